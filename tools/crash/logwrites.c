// SPDX-License-Identifier: GPL-2.0
/*
 * The dm-log-writes log decoder and replayer: see logwrites.h for the
 * format. Everything read from the log is checked before it is used: the
 * super's count against the log's size, each entry's flags, lengths and
 * offsets against the log's size and against 63-bit arithmetic, so a
 * damaged or truncated log is reported (-EBADMSG), never read past.
 */
#include "logwrites.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ENTRY_SIZE	32U	/* sizeof(struct log_write_entry) */
#define SUPER_SIZE	28U	/* the fields of struct log_write_super */
#define CHUNK		(1U << 20)	/* bytes copied or zeroed at a time */

__attribute__((format(printf, 2, 3)))
static int bad(struct lw_log *log, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(log->err, sizeof(log->err), fmt, ap);
	va_end(ap);
	return -EBADMSG;
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static uint32_t get32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

/*
 * Read exactly len bytes at off; -EBADMSG (with the log's error set by
 * the caller's words) if the file ends first.
 */
static int read_full(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done,
				  (off_t)(off + done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EBADMSG;
		done += (size_t)n;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done,
				   (off_t)(off + done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -ENOSPC;
		done += (size_t)n;
	}
	return 0;
}

int lw_open(struct lw_log *log, int fd)
{
	unsigned char super[SUPER_SIZE];
	uint64_t magic, version, max_entries;
	off_t end;
	int ret;

	memset(log, 0, sizeof(*log));
	log->fd = fd;
	end = lseek(fd, 0, SEEK_END);
	if (end < 0)
		return -errno;
	log->size = (uint64_t)end;
	if (log->size < LW_MIN_SECTORSIZE)
		return bad(log, "super: the log is %" PRIu64
			   " bytes, less than a sector", log->size);
	ret = read_full(fd, super, sizeof(super), 0);
	if (ret == -EBADMSG)
		return bad(log, "super: the log ends inside it");
	if (ret)
		return ret;

	magic = get64(super);
	version = get64(super + 8);
	log->nr_entries = get64(super + 16);
	log->sectorsize = get32(super + 24);
	if (magic != LW_MAGIC)
		return bad(log, "super: bad magic 0x%" PRIx64 " (not a "
			   "dm-log-writes log; expected 0x%llx)", magic,
			   (unsigned long long)LW_MAGIC);
	if (version != LW_VERSION)
		return bad(log, "super: version %" PRIu64 ", only %llu is known",
			   version, (unsigned long long)LW_VERSION);
	if (log->sectorsize < LW_MIN_SECTORSIZE ||
	    log->sectorsize > LW_MAX_SECTORSIZE ||
	    (log->sectorsize & (log->sectorsize - 1)))
		return bad(log, "super: sector size %" PRIu32 " is not a power "
			   "of two in [%u, %u]", log->sectorsize,
			   LW_MIN_SECTORSIZE, LW_MAX_SECTORSIZE);
	if (log->size < log->sectorsize)
		return bad(log, "super: the log is %" PRIu64 " bytes, less "
			   "than its sector size %" PRIu32, log->size,
			   log->sectorsize);
	/* Each entry takes at least its header sector after the super. */
	max_entries = log->size / log->sectorsize - 1;
	if (log->nr_entries > max_entries)
		return bad(log, "super: nr_entries %" PRIu64 " is past the end: "
			   "a log of %" PRIu64 " bytes holds at most %" PRIu64,
			   log->nr_entries, log->size, max_entries);

	/* One more byte, for the NUL after a mark's name. */
	log->sector = malloc((size_t)log->sectorsize + 1);
	if (!log->sector)
		return -ENOMEM;
	log->pos = log->sectorsize;
	return 0;
}

void lw_close(struct lw_log *log)
{
	free(log->sector);
	log->sector = NULL;
}

void lw_rewind(struct lw_log *log)
{
	log->next_index = 0;
	log->pos = log->sectorsize;
}

const char *lw_error(const struct lw_log *log)
{
	return log->err;
}

/* The largest byte offset we let an entry reach. */
#define OFF_MAX ((uint64_t)INT64_MAX)

int lw_next(struct lw_log *log, struct lw_entry *e)
{
	uint64_t idx = log->next_index + 1, ss = log->sectorsize;
	uint64_t data_bytes = 0, range;
	int ret;

	if (!log->sector)
		return -EINVAL;
	if (log->next_index >= log->nr_entries)
		return 0;
	memset(e, 0, sizeof(*e));
	/* pos <= size always holds: it only advances past checked bytes. */
	if (log->size - log->pos < ss)
		return bad(log, "entry %" PRIu64 " at byte %" PRIu64 ": its "
			   "header is past the end of the log (%" PRIu64
			   " bytes)", idx, log->pos, log->size);
	ret = read_full(log->fd, log->sector, ss, log->pos);
	if (ret == -EBADMSG)
		return bad(log, "entry %" PRIu64 " at byte %" PRIu64 ": the "
			   "log ends inside its header", idx, log->pos);
	if (ret)
		return ret;

	e->index = idx;
	e->sector = get64(log->sector);
	e->nr_sectors = get64(log->sector + 8);
	e->flags = get64(log->sector + 16);
	e->data_len = get64(log->sector + 24);
	e->log_offset = log->pos;
	e->data_offset = log->pos + ss;

	if (e->flags & ~LW_ALL_FLAGS)
		return bad(log, "entry %" PRIu64 " at byte %" PRIu64 ": unknown "
			   "flags 0x%" PRIx64, idx, log->pos, e->flags);

	if (e->flags & LW_MARK) {
		if (e->flags != LW_MARK)
			return bad(log, "entry %" PRIu64 ": a mark with other "
				   "flags (0x%" PRIx64 ")", idx, e->flags);
		if (e->nr_sectors)
			return bad(log, "entry %" PRIu64 ": a mark with "
				   "nr_sectors %" PRIu64 " (marks have no "
				   "data sectors)", idx, e->nr_sectors);
		if (e->data_len > ss - ENTRY_SIZE)
			return bad(log, "entry %" PRIu64 ": mark data_len %"
				   PRIu64 " is past the end of its sector (at "
				   "most %" PRIu64 ")", idx, e->data_len,
				   ss - ENTRY_SIZE);
		if (memchr(log->sector + ENTRY_SIZE, 0, e->data_len))
			return bad(log, "entry %" PRIu64 ": the mark's name "
				   "has a NUL byte inside its %" PRIu64
				   " bytes", idx, e->data_len);
		log->sector[ENTRY_SIZE + e->data_len] = '\0';
		e->mark = (const char *)log->sector + ENTRY_SIZE;
	} else if (e->flags & LW_DISCARD) {
		if (e->data_len)
			return bad(log, "entry %" PRIu64 ": a discard with "
				   "data_len %" PRIu64 " (discards carry no "
				   "data)", idx, e->data_len);
	} else {
		if (e->nr_sectors > LW_MAX_WRITE / ss)
			return bad(log, "entry %" PRIu64 ": a write of %" PRIu64
				   " sectors, more than the %" PRIu64 " MiB allowed",
				   idx, e->nr_sectors, LW_MAX_WRITE >> 20);
		data_bytes = e->nr_sectors * ss;
		if (e->data_len > data_bytes)
			return bad(log, "entry %" PRIu64 ": data_len %" PRIu64
				   " is past its %" PRIu64 " bytes of data",
				   idx, e->data_len, data_bytes);
	}

	/* The target range must be addressable with an off_t. */
	if (!(e->flags & LW_MARK) && e->nr_sectors) {
		if (e->nr_sectors > OFF_MAX / ss || e->sector > OFF_MAX / ss)
			return bad(log, "entry %" PRIu64 ": sector %" PRIu64
				   " + %" PRIu64 " is out of range", idx,
				   e->sector, e->nr_sectors);
		range = e->nr_sectors * ss;
		if (e->sector * ss > OFF_MAX - range)
			return bad(log, "entry %" PRIu64 ": sector %" PRIu64
				   " + %" PRIu64 " is out of range", idx,
				   e->sector, e->nr_sectors);
	}

	/* Header and data must lie inside the log: pos + ss <= size. */
	if (data_bytes > log->size - log->pos - ss)
		return bad(log, "entry %" PRIu64 " at byte %" PRIu64 ": its %"
			   PRIu64 " bytes of data run past the end of the log "
			   "(%" PRIu64 " bytes)", idx, log->pos, data_bytes,
			   log->size);
	e->data_bytes = data_bytes;

	log->pos += ss + data_bytes;
	log->next_index = idx;
	return 1;
}

int lw_target_range(const struct lw_log *log, const struct lw_entry *e,
		    uint64_t *off, uint64_t *len)
{
	uint64_t ss = log->sectorsize;

	*off = 0;
	*len = 0;
	if ((e->flags & LW_MARK) || !e->nr_sectors)
		return 0;
	if (e->nr_sectors > OFF_MAX / ss || e->sector > OFF_MAX / ss ||
	    e->sector * ss > OFF_MAX - e->nr_sectors * ss)
		return -EBADMSG;
	*off = e->sector * ss;
	*len = e->nr_sectors * ss;
	return 0;
}

static int zero_range(int fd, uint64_t off, uint64_t len)
{
	char *zeros;
	int ret = 0;

	/*
	 * A punched hole reads as zeros in a file; on a block device the
	 * kernel zeroes the range (without falling back to writing). Where
	 * that is not supported, write the zeros.
	 */
	if (!fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		       (off_t)off, (off_t)len))
		return 0;
	if (errno == EIO)
		return -EIO;
	zeros = calloc(1, CHUNK);
	if (!zeros)
		return -ENOMEM;
	while (len && !ret) {
		size_t n = len < CHUNK ? (size_t)len : CHUNK;

		ret = write_full(fd, zeros, n, off);
		off += n;
		len -= n;
	}
	free(zeros);
	return ret;
}

int lw_apply(struct lw_log *log, const struct lw_entry *e, int fd,
	     uint64_t target_size)
{
	uint64_t off, len, done = 0;
	char *buf;
	int ret;

	if (lw_target_range(log, e, &off, &len))
		return bad(log, "entry %" PRIu64 ": sector out of range",
			   e->index);
	if (!len)
		return 0;
	if (target_size && (off > target_size || len > target_size - off))
		return -ENOSPC;
	if (e->flags & LW_DISCARD)
		return zero_range(fd, off, len);

	/* A write: its data is in the log, checked by lw_next(). */
	if (e->data_bytes != len || e->data_offset > log->size ||
	    len > log->size - e->data_offset)
		return bad(log, "entry %" PRIu64 ": not an entry of this log",
			   e->index);
	buf = malloc(len < CHUNK ? (size_t)len : CHUNK);
	if (!buf)
		return -ENOMEM;
	ret = 0;
	while (done < len) {
		size_t n = len - done < CHUNK ? (size_t)(len - done) : CHUNK;

		ret = read_full(log->fd, buf, n, e->data_offset + done);
		if (ret == -EBADMSG)
			ret = bad(log, "entry %" PRIu64 ": the log ends inside "
				  "its data", e->index);
		if (ret)
			break;
		ret = write_full(fd, buf, n, off + done);
		if (ret)
			break;
		done += n;
	}
	free(buf);
	return ret;
}

const char *lw_flags_name(uint64_t flags, char *buf, unsigned int size)
{
	static const char *const names[] = {
		"FLUSH", "FUA", "DISCARD", "MARK", "METADATA"
	};
	size_t used = 0;

	if (!size)
		return buf;
	buf[0] = '\0';
	for (unsigned int i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!(flags & (1ULL << i)))
			continue;
		used += (size_t)snprintf(buf + used, used < size ? size - used : 0,
					 "%s%s", used ? "|" : "", names[i]);
		if (used >= size)
			return buf;
	}
	if (flags & ~LW_ALL_FLAGS)
		used += (size_t)snprintf(buf + used, used < size ? size - used : 0,
					 "%s0x%" PRIx64, used ? "|" : "",
					 flags & ~LW_ALL_FLAGS);
	if (!used)
		snprintf(buf, size, "-");
	return buf;
}
