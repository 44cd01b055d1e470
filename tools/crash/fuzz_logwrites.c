// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target for the dm-log-writes decoder: the input is the log
 * device, in a memfd; every entry is decoded and applied to a second
 * memfd of at most TARGET_MAX bytes (entries reaching past it are
 * skipped, as replay-log refuses them on a block device).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "logwrites.h"

#define TARGET_MAX (1U << 20)

static int memfd(const char *name, const uint8_t *data, size_t size)
{
	int fd = memfd_create(name, MFD_CLOEXEC);
	size_t done = 0;

	if (fd < 0)
		abort();
	while (done < size) {
		ssize_t n = write(fd, data + done, size - done);

		if (n <= 0)
			abort();
		done += (size_t)n;
	}
	return fd;
}

volatile uint64_t logwrites_fuzz_sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lw_log log;
	struct lw_entry e;
	uint64_t off, len, prev_end;
	int fd, target, ret;

	fd = memfd("log", data, size);
	target = memfd("target", NULL, 0);
	if (ftruncate(target, TARGET_MAX))
		abort();
	ret = lw_open(&log, fd);
	if (ret) {
		/* a refusal always says why */
		if (ret != -EBADMSG || !log.err[0])
			__builtin_trap();
		goto out;
	}
	prev_end = log.sectorsize;
	while ((ret = lw_next(&log, &e)) > 0) {
		/* what the decoder promises */
		if (e.log_offset != prev_end ||
		    e.data_offset != e.log_offset + log.sectorsize ||
		    e.data_bytes > log.size - e.data_offset ||
		    log.pos != e.data_offset + e.data_bytes ||
		    e.data_bytes > LW_MAX_WRITE ||
		    (e.mark && strlen(e.mark) != e.data_len))
			__builtin_trap();
		prev_end = log.pos;
		if (lw_target_range(&log, &e, &off, &len))
			__builtin_trap();
		logwrites_fuzz_sink += off + len + (e.mark ? e.mark[0] : 0);
		if (off > TARGET_MAX || len > TARGET_MAX - off)
			continue;
		ret = lw_apply(&log, &e, target, TARGET_MAX);
		if (ret)
			__builtin_trap();
	}
	if (ret < 0 && (ret != -EBADMSG || !log.err[0]))
		__builtin_trap();
	lw_close(&log);
out:
	close(target);
	close(fd);
	return 0;
}
