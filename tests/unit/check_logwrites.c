// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of the dm-log-writes decoder (tools/crash/logwrites.c) and of
 * replay-log: logs built here the way the kernel writes them decode to
 * what was put in and replay to the right bytes, and every kind of damage
 * is refused with -EBADMSG and a reason.
 *
 *   unit-logwrites                      run the tests
 *   unit-logwrites --write-corpus DIR   write the fuzzer's seed logs
 */
#include "logwrites.h"

#include <check.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/unit-logwrites-XXXXXX";

/* ---- a test encoder: logs laid out as dm-log-writes lays them out ---- */

struct enc {
	unsigned char *buf;
	size_t len, cap;
	uint32_t ss;
	uint64_t n;
};

static void put64(unsigned char *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

static unsigned char *grow(struct enc *e, size_t more)
{
	unsigned char *p;

	if (e->len + more > e->cap) {
		e->cap = (e->len + more) * 2;
		e->buf = realloc(e->buf, e->cap);
		if (!e->buf)	/* not ck_assert: --write-corpus runs no test */
			abort();
	}
	p = e->buf + e->len;
	memset(p, 0, more);
	e->len += more;
	return p;
}

static void enc_super(struct enc *e, uint64_t magic, uint64_t version,
		      uint64_t nr_entries, uint32_t ss)
{
	uint32_t le = htole32(ss);

	put64(e->buf, magic);
	put64(e->buf + 8, version);
	put64(e->buf + 16, nr_entries);
	memcpy(e->buf + 24, &le, 4);
	/* the kernel copies its struct's padding uninitialised */
	memset(e->buf + 28, 0xa5, 4);
}

static void enc_init(struct enc *e, uint32_t ss)
{
	memset(e, 0, sizeof(*e));
	e->ss = ss;
	grow(e, ss);
}

/* Finish: the super with the number of entries encoded. */
static void enc_done(struct enc *e)
{
	enc_super(e, LW_MAGIC, LW_VERSION, e->n, e->ss);
}

/* The header sector; returns its offset in the buffer. */
static size_t enc_header(struct enc *e, uint64_t sector, uint64_t nr,
			 uint64_t flags, uint64_t data_len)
{
	size_t off = e->len;
	unsigned char *h = grow(e, e->ss);

	put64(h, sector);
	put64(h + 8, nr);
	put64(h + 16, flags);
	put64(h + 24, data_len);
	e->n++;
	return off;
}

/* A write: nr sectors of data from fill(), or of byte b. */
static size_t enc_write(struct enc *e, uint64_t sector, uint64_t nr,
			uint64_t flags, unsigned char b)
{
	size_t off = enc_header(e, sector, nr, flags, 0);
	unsigned char *d = grow(e, nr * e->ss);

	for (size_t i = 0; i < nr * e->ss; i++)
		d[i] = (unsigned char)(b + i / e->ss);
	return off;
}

static size_t enc_flush(struct enc *e)
{
	return enc_header(e, 0, 0, LW_FLUSH, 0);
}

static size_t enc_mark(struct enc *e, const char *name)
{
	size_t off = enc_header(e, 0, 0, LW_MARK, strlen(name));

	memcpy(e->buf + off + 32, name, strlen(name));
	return off;
}

static size_t enc_discard(struct enc *e, uint64_t sector, uint64_t nr)
{
	return enc_header(e, sector, nr, LW_DISCARD, 0);
}

/* The sample log: writes, a flush, a mark, a discard, a FUA, a mark. */
static void enc_sample(struct enc *e, uint32_t ss)
{
	enc_init(e, ss);
	enc_write(e, 8, 2, 0, 'a');		/* 1 */
	enc_write(e, 0, 1, LW_METADATA, 'm');	/* 2 */
	enc_flush(e);				/* 3 */
	enc_mark(e, "after-fsync-1");		/* 4 */
	enc_discard(e, 9, 1);			/* 5 */
	enc_write(e, 16, 1, LW_FUA | LW_METADATA, 'f'); /* 6 */
	enc_mark(e, "end");			/* 7 */
	enc_done(e);
}

/* The encoded log as an open file (already unlinked). */
static int log_file(const struct enc *e)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/log-XXXXXX", tmpdir);
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_eq(pwrite(fd, e->buf, e->len, 0), (ssize_t)e->len);
	return fd;
}

static int target_file(size_t size, unsigned char fill)
{
	char path[PATH_MAX];
	unsigned char *b = malloc(size);
	int fd;

	ck_assert_ptr_nonnull(b);
	memset(b, fill, size);
	snprintf(path, sizeof(path), "%s/target-XXXXXX", tmpdir);
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_eq(pwrite(fd, b, size, 0), (ssize_t)size);
	free(b);
	return fd;
}

static void check_bytes(int fd, uint64_t off, size_t len, const void *want)
{
	unsigned char *b = malloc(len);

	ck_assert_ptr_nonnull(b);
	ck_assert_int_eq(pread(fd, b, len, (off_t)off), (ssize_t)len);
	ck_assert_mem_eq(b, want, len);
	free(b);
}

static void check_fill(int fd, uint64_t off, size_t len, unsigned char c)
{
	unsigned char *w = malloc(len);

	ck_assert_ptr_nonnull(w);
	memset(w, c, len);
	check_bytes(fd, off, len, w);
	free(w);
}

/* Open the encoded log; expect -EBADMSG at open or at entry bad_at. */
static void expect_bad(const struct enc *e, uint64_t bad_at, const char *why)
{
	struct lw_log log;
	struct lw_entry en;
	int fd = log_file(e), ret;

	ret = lw_open(&log, fd);
	if (bad_at == 0) {
		ck_assert_int_eq(ret, -EBADMSG);
		ck_assert_msg(strstr(lw_error(&log), why),
			      "error \"%s\" lacks \"%s\"", lw_error(&log), why);
		close(fd);
		return;
	}
	ck_assert_int_eq(ret, 0);
	for (uint64_t i = 1; i < bad_at; i++)
		ck_assert_int_eq(lw_next(&log, &en), 1);
	ret = lw_next(&log, &en);
	ck_assert_int_eq(ret, -EBADMSG);
	ck_assert_msg(strstr(lw_error(&log), why), "error \"%s\" lacks \"%s\"",
		      lw_error(&log), why);
	/* it stays refused, and names the entry */
	ck_assert_int_eq(lw_next(&log, &en), -EBADMSG);
	{
		char name[32];

		snprintf(name, sizeof(name), "entry %llu",
			 (unsigned long long)bad_at);
		ck_assert_msg(strstr(lw_error(&log), name), "\"%s\" lacks "
			      "\"%s\"", lw_error(&log), name);
	}
	lw_close(&log);
	close(fd);
}

/* The encoded log decodes to its end without an error. */
static void expect_ok(const struct enc *e)
{
	struct lw_log log;
	struct lw_entry en;
	int fd = log_file(e), ret;

	ck_assert_int_eq(lw_open(&log, fd), 0);
	while ((ret = lw_next(&log, &en)) > 0)
		;
	ck_assert_msg(ret == 0, "refused: %s", lw_error(&log));
	lw_close(&log);
	close(fd);
}

/* ---- decoding ---- */

START_TEST(decode_sample)
{
	uint32_t ss = _i ? 4096 : 512;
	struct enc e;
	struct lw_log log;
	struct lw_entry en;
	int fd;

	enc_sample(&e, ss);
	fd = log_file(&e);
	ck_assert_int_eq(lw_open(&log, fd), 0);
	ck_assert_uint_eq(log.sectorsize, ss);
	ck_assert_uint_eq(log.nr_entries, 7);

	ck_assert_int_eq(lw_next(&log, &en), 1);
	ck_assert_uint_eq(en.index, 1);
	ck_assert_uint_eq(en.sector, 8);
	ck_assert_uint_eq(en.nr_sectors, 2);
	ck_assert_uint_eq(en.flags, 0);
	ck_assert_uint_eq(en.log_offset, ss);
	ck_assert_uint_eq(en.data_offset, 2 * ss);
	ck_assert_uint_eq(en.data_bytes, 2 * ss);
	ck_assert_ptr_null(en.mark);

	ck_assert_int_eq(lw_next(&log, &en), 1);
	ck_assert_uint_eq(en.index, 2);
	ck_assert_uint_eq(en.log_offset, 4 * ss);
	ck_assert_uint_eq(en.flags, LW_METADATA);
	ck_assert_uint_eq(en.data_bytes, ss);

	ck_assert_int_eq(lw_next(&log, &en), 1);
	ck_assert_uint_eq(en.index, 3);
	ck_assert_uint_eq(en.flags, LW_FLUSH);
	ck_assert_uint_eq(en.nr_sectors, 0);
	ck_assert_uint_eq(en.data_bytes, 0);

	ck_assert_int_eq(lw_next(&log, &en), 1);
	ck_assert_uint_eq(en.index, 4);
	ck_assert_uint_eq(en.flags, LW_MARK);
	ck_assert_uint_eq(en.log_offset, 7 * ss);
	ck_assert_uint_eq(en.data_len, 13);
	ck_assert_str_eq(en.mark, "after-fsync-1");

	ck_assert_int_eq(lw_next(&log, &en), 1);
	ck_assert_uint_eq(en.flags, LW_DISCARD);
	ck_assert_uint_eq(en.sector, 9);
	ck_assert_uint_eq(en.nr_sectors, 1);
	ck_assert_uint_eq(en.data_bytes, 0);	/* no data in the log */

	ck_assert_int_eq(lw_next(&log, &en), 1);
	ck_assert_uint_eq(en.flags, LW_FUA | LW_METADATA);
	ck_assert_uint_eq(en.log_offset, 9 * ss);

	ck_assert_int_eq(lw_next(&log, &en), 1);
	ck_assert_uint_eq(en.index, 7);
	ck_assert_str_eq(en.mark, "end");

	ck_assert_int_eq(lw_next(&log, &en), 0);
	ck_assert_int_eq(lw_next(&log, &en), 0);
	ck_assert_uint_eq(log.pos, e.len);

	lw_rewind(&log);
	ck_assert_int_eq(lw_next(&log, &en), 1);
	ck_assert_uint_eq(en.index, 1);
	lw_close(&log);
	close(fd);
	free(e.buf);
}
END_TEST

START_TEST(empty_log)
{
	struct enc e;
	struct lw_log log;
	struct lw_entry en;
	int fd;

	enc_init(&e, 512);
	enc_done(&e);
	fd = log_file(&e);
	ck_assert_int_eq(lw_open(&log, fd), 0);
	ck_assert_int_eq(lw_next(&log, &en), 0);
	lw_close(&log);
	close(fd);
	free(e.buf);
}
END_TEST

/* Entries past the super's count (not yet counted, or stale) are unread. */
START_TEST(entries_past_the_count)
{
	struct enc e;
	struct lw_log log;
	struct lw_entry en;
	int fd;

	enc_init(&e, 512);
	enc_write(&e, 1, 1, 0, 'x');
	enc_mark(&e, "m");
	enc_done(&e);
	enc_header(&e, 1, 1, 0xffff, 1ULL << 60);	/* garbage */
	fd = log_file(&e);
	ck_assert_int_eq(lw_open(&log, fd), 0);
	ck_assert_int_eq(lw_next(&log, &en), 1);
	ck_assert_int_eq(lw_next(&log, &en), 1);
	ck_assert_int_eq(lw_next(&log, &en), 0);
	lw_close(&log);
	close(fd);
	free(e.buf);
}
END_TEST

START_TEST(longest_mark)
{
	char name[512];
	struct enc e;
	struct lw_log log;
	struct lw_entry en;
	int fd;

	/* The kernel keeps at most sectorsize - 33 bytes; 512 - 32 fit. */
	memset(name, 'n', sizeof(name));
	name[512 - 32] = '\0';
	enc_init(&e, 512);
	enc_mark(&e, name);
	enc_done(&e);
	fd = log_file(&e);
	ck_assert_int_eq(lw_open(&log, fd), 0);
	ck_assert_int_eq(lw_next(&log, &en), 1);
	ck_assert_uint_eq(strlen(en.mark), 480);
	ck_assert_str_eq(en.mark, name);
	lw_close(&log);
	close(fd);
	free(e.buf);

	enc_init(&e, 512);
	enc_mark(&e, name);
	put64(e.buf + 512 + 24, 481);
	enc_done(&e);
	expect_bad(&e, 1, "past the end of its sector");
	free(e.buf);
}
END_TEST

START_TEST(flags_names)
{
	char b[64];

	ck_assert_str_eq(lw_flags_name(0, b, sizeof(b)), "-");
	ck_assert_str_eq(lw_flags_name(LW_FLUSH, b, sizeof(b)), "FLUSH");
	ck_assert_str_eq(lw_flags_name(LW_FUA | LW_METADATA, b, sizeof(b)),
			 "FUA|METADATA");
	ck_assert_str_eq(lw_flags_name(LW_ALL_FLAGS, b, sizeof(b)),
			 "FLUSH|FUA|DISCARD|MARK|METADATA");
	ck_assert_str_eq(lw_flags_name(LW_MARK | 0x100, b, sizeof(b)),
			 "MARK|0x100");
	ck_assert_str_eq(lw_flags_name(LW_ALL_FLAGS, b, 8), "FLUSH|F");
}
END_TEST

/* ---- replay ---- */

/* Apply entries 1..limit; the target starts as 64 sectors of 0xee. */
static int replay(const struct enc *e, uint64_t limit, uint64_t target_size,
		  int *target)
{
	struct lw_log log;
	struct lw_entry en;
	int fd = log_file(e), ret = 0;

	*target = target_file(64 * e->ss, 0xee);
	ck_assert_int_eq(lw_open(&log, fd), 0);
	while (log.next_index < limit && (ret = lw_next(&log, &en)) > 0) {
		ret = lw_apply(&log, &en, *target, target_size);
		if (ret)
			break;
	}
	lw_close(&log);
	close(fd);
	return ret < 0 ? ret : 0;
}

START_TEST(replay_sample)
{
	uint32_t ss = _i ? 4096 : 512;
	unsigned char want[2 * 4096];
	struct enc e;
	int t;

	enc_sample(&e, ss);
	for (size_t i = 0; i < 2 * ss; i++)
		want[i] = (unsigned char)('a' + i / ss);

	/* The whole log. */
	ck_assert_int_eq(replay(&e, UINT64_MAX, 0, &t), 0);
	check_fill(t, 0, 1, 'm');
	check_fill(t, 1, ss - 1, 'm');
	check_fill(t, ss, 7 * ss, 0xee);
	check_bytes(t, 8 * ss, ss, want);		/* sector 8: 'a' */
	check_fill(t, 9 * ss, ss, 0);			/* discarded */
	check_fill(t, 10 * ss, 6 * ss, 0xee);
	check_fill(t, 16 * ss, ss, 'f');
	check_fill(t, 17 * ss, 47 * ss, 0xee);
	close(t);

	/* Through the mark: before the discard and the FUA. */
	ck_assert_int_eq(replay(&e, 4, 0, &t), 0);
	check_bytes(t, 8 * ss, 2 * ss, want);
	check_fill(t, 16 * ss, ss, 0xee);
	close(t);

	/* Only the first write. */
	ck_assert_int_eq(replay(&e, 1, 0, &t), 0);
	check_fill(t, 0, ss, 0xee);
	check_bytes(t, 8 * ss, 2 * ss, want);
	close(t);
	free(e.buf);
}
END_TEST

START_TEST(replay_bounded_target)
{
	struct enc e;
	int t;

	/* The FUA write to sector 16 does not fit in 16 sectors. */
	enc_sample(&e, 512);
	ck_assert_int_eq(replay(&e, UINT64_MAX, 16 * 512, &t), -ENOSPC);
	check_fill(t, 16 * 512, 512, 0xee);
	check_fill(t, 9 * 512, 512, 0);	/* the discard before it was done */
	close(t);
	free(e.buf);
}
END_TEST

START_TEST(replay_large_write)
{
	/* 3 MiB + a sector: more than one copy chunk. */
	uint64_t nr = (3 << 20) / 512 + 1;
	struct enc e;
	struct lw_log log;
	struct lw_entry en;
	unsigned char *want;
	int fd, t;

	enc_init(&e, 512);
	enc_write(&e, 5, nr, 0, 0);
	enc_discard(&e, 5 + 1000, 3000);
	enc_done(&e);
	fd = log_file(&e);
	t = target_file(4 << 20, 0xee);
	ck_assert_int_eq(lw_open(&log, fd), 0);
	ck_assert_int_eq(lw_next(&log, &en), 1);
	ck_assert_int_eq(lw_apply(&log, &en, t, 0), 0);
	check_bytes(t, 5 * 512, nr * 512, e.buf + 1024);
	ck_assert_int_eq(lw_next(&log, &en), 1);
	ck_assert_int_eq(lw_apply(&log, &en, t, 0), 0);
	want = calloc(1, 3000 * 512);
	ck_assert_ptr_nonnull(want);
	check_bytes(t, 1005 * 512, 3000 * 512, want);
	check_bytes(t, 5 * 512, 1000 * 512, e.buf + 1024);
	check_fill(t, 0, 5 * 512, 0xee);
	free(want);
	lw_close(&log);
	close(fd);
	close(t);
	free(e.buf);
}
END_TEST

/* The log shrinks after the entry was decoded: refused, not read past. */
START_TEST(log_shrinks_under_apply)
{
	struct enc e;
	struct lw_log log;
	struct lw_entry en;
	int fd, t;

	enc_init(&e, 512);
	enc_write(&e, 0, 4, 0, 'z');
	enc_done(&e);
	fd = log_file(&e);
	t = target_file(8 * 512, 0xee);
	ck_assert_int_eq(lw_open(&log, fd), 0);
	ck_assert_int_eq(lw_next(&log, &en), 1);
	ck_assert_int_eq(ftruncate(fd, 3 * 512), 0);
	ck_assert_int_eq(lw_apply(&log, &en, t, 0), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(lw_error(&log), "entry 1"));
	lw_close(&log);
	close(fd);
	close(t);
	free(e.buf);
}
END_TEST

/* ---- damage ---- */

START_TEST(bad_super)
{
	struct enc e;

	enc_sample(&e, 512);
	enc_super(&e, LW_MAGIC + 1, LW_VERSION, 7, 512);
	expect_bad(&e, 0, "bad magic");
	enc_super(&e, LW_MAGIC, 2, 7, 512);
	expect_bad(&e, 0, "version 2");
	enc_super(&e, LW_MAGIC, 0, 7, 512);
	expect_bad(&e, 0, "version 0");
	enc_super(&e, LW_MAGIC, LW_VERSION, 7, 0);
	expect_bad(&e, 0, "sector size 0");
	enc_super(&e, LW_MAGIC, LW_VERSION, 7, 1000);
	expect_bad(&e, 0, "sector size 1000");
	enc_super(&e, LW_MAGIC, LW_VERSION, 7, 256);
	expect_bad(&e, 0, "sector size 256");
	enc_super(&e, LW_MAGIC, LW_VERSION, 7, 1U << 17);
	expect_bad(&e, 0, "sector size 131072");
	/* 4096-byte sectors in a log of 6 * 512 bytes */
	enc_super(&e, LW_MAGIC, LW_VERSION, 1, 4096);
	e.len = 6 * 512;
	expect_bad(&e, 0, "less than its sector size");
	/* a log shorter than a sector */
	e.len = 100;
	expect_bad(&e, 0, "less than a sector");
	e.len = 0;
	expect_bad(&e, 0, "less than a sector");
	free(e.buf);
}
END_TEST

START_TEST(nr_entries_past_the_end)
{
	struct enc e;

	enc_sample(&e, 512);	/* 12 sectors: room for 11 entries */
	ck_assert_uint_eq(e.len, 12 * 512);
	enc_super(&e, LW_MAGIC, LW_VERSION, UINT64_MAX, 512);
	expect_bad(&e, 0, "nr_entries 18446744073709551615 is past the end");
	enc_super(&e, LW_MAGIC, LW_VERSION, 12, 512);
	expect_bad(&e, 0, "holds at most 11");
	/* 8 passes the first check; the 8th header is past the end */
	enc_super(&e, LW_MAGIC, LW_VERSION, 8, 512);
	expect_bad(&e, 8, "header is past the end");
	/* 11, and entry 7 damaged: refused there */
	enc_super(&e, LW_MAGIC, LW_VERSION, 11, 512);
	e.buf[e.len - 512 + 16] = 0x80;
	expect_bad(&e, 7, "unknown flags");
	free(e.buf);
}
END_TEST

START_TEST(data_len_past_the_end)
{
	struct enc e;
	size_t h;

	/* a write whose data_len is more than its sectors */
	enc_init(&e, 512);
	enc_write(&e, 0, 1, 0, 'x');
	h = enc_write(&e, 4, 2, 0, 'y');
	enc_done(&e);
	put64(e.buf + h + 24, 1025);
	expect_bad(&e, 2, "data_len 1025 is past its 1024 bytes");
	put64(e.buf + h + 24, 1024);	/* as much as its sectors: allowed */
	expect_ok(&e);
	free(e.buf);

	/* a mark whose name runs past its sector */
	enc_init(&e, 512);
	h = enc_mark(&e, "m");
	enc_done(&e);
	put64(e.buf + h + 24, 512);
	expect_bad(&e, 1, "mark data_len 512");
	free(e.buf);

	/* a discard with data */
	enc_init(&e, 512);
	h = enc_discard(&e, 0, 8);
	enc_done(&e);
	put64(e.buf + h + 24, 1);
	expect_bad(&e, 1, "discards carry no data");
	free(e.buf);
}
END_TEST

START_TEST(huge_lengths)
{
	struct enc e;
	size_t h;

	enc_init(&e, 512);
	enc_flush(&e);
	h = enc_write(&e, 0, 1, 0, 'x');
	enc_done(&e);

	put64(e.buf + h + 24, 1ULL << 62);	/* data_len */
	expect_bad(&e, 2, "data_len 4611686018427387904");
	put64(e.buf + h + 24, UINT64_MAX);
	expect_bad(&e, 2, "data_len 18446744073709551615");
	put64(e.buf + h + 24, 0);

	put64(e.buf + h + 8, UINT64_MAX);	/* nr_sectors */
	expect_bad(&e, 2, "more than the 64 MiB allowed");
	put64(e.buf + h + 8, (64ULL << 20) / 512 + 1);
	expect_bad(&e, 2, "more than the 64 MiB allowed");
	/* 64 MiB is allowed, but this log does not hold it */
	put64(e.buf + h + 8, (64ULL << 20) / 512);
	expect_bad(&e, 2, "67108864 bytes of data run past the end");
	put64(e.buf + h + 8, 1);

	put64(e.buf + h, UINT64_MAX / 512);	/* sector */
	expect_bad(&e, 2, "out of range");
	put64(e.buf + h, (uint64_t)INT64_MAX / 512);
	expect_bad(&e, 2, "out of range");
	put64(e.buf + h, (uint64_t)INT64_MAX / 512 - 1);
	expect_ok(&e);	/* the last whole sector */
	free(e.buf);

	/* a discard of everything */
	enc_init(&e, 512);
	h = enc_discard(&e, 0, UINT64_MAX);
	enc_done(&e);
	expect_bad(&e, 1, "out of range");
	put64(e.buf + h + 8, (uint64_t)INT64_MAX / 512);
	put64(e.buf + h, 1);
	expect_bad(&e, 1, "out of range");
	free(e.buf);
}
END_TEST

START_TEST(truncated)
{
	struct enc e, f;
	size_t full;

	enc_sample(&e, 512);
	full = e.len;
	f = e;
	/* inside the FUA write's data (entry 6: header at 9 * 512) */
	f.len = 10 * 512 + 100;
	expect_bad(&f, 6, "run past the end");
	/* inside entry 2's data: fewer sectors than entries */
	f.len = 6 * 512 - 1;
	expect_bad(&f, 0, "nr_entries 7 is past the end");
	enc_super(&f, LW_MAGIC, LW_VERSION, 2, 512);
	f.len = 6 * 512 - 1;
	expect_bad(&f, 2, "run past the end");
	enc_super(&f, LW_MAGIC, LW_VERSION, 7, 512);
	/* inside the last mark's header */
	f.len = full - 1;
	expect_bad(&f, 7, "header is past the end");
	/* right after the super */
	f.len = 512;
	expect_bad(&f, 0, "nr_entries 7 is past the end");
	/* whole: fine */
	f.len = full;
	expect_ok(&f);
	free(e.buf);
}
END_TEST

START_TEST(bad_entries)
{
	struct enc e;
	size_t h, m;

	enc_init(&e, 512);
	enc_write(&e, 0, 1, 0, 'x');
	h = enc_write(&e, 0, 1, 0, 'x');
	m = enc_mark(&e, "mark");
	enc_done(&e);

	put64(e.buf + h + 16, 1ULL << 5);
	expect_bad(&e, 2, "unknown flags 0x20");
	put64(e.buf + h + 16, 1ULL << 63);
	expect_bad(&e, 2, "unknown flags 0x8000000000000000");
	put64(e.buf + h + 16, 0);

	put64(e.buf + m + 16, LW_MARK | LW_FLUSH);
	expect_bad(&e, 3, "a mark with other flags");
	put64(e.buf + m + 16, LW_MARK);
	put64(e.buf + m + 8, 1);
	expect_bad(&e, 3, "a mark with nr_sectors 1");
	put64(e.buf + m + 8, 0);
	e.buf[m + 32 + 1] = '\0';
	expect_bad(&e, 3, "has a NUL byte");
	free(e.buf);
}
END_TEST

/* ---- replay-log ---- */

static char tool[PATH_MAX];

/* Run replay-log with args; its exit status, its stdout in out. */
static int run_tool(const char *args, char *out, size_t size)
{
	char cmd[2 * PATH_MAX];
	FILE *p;
	size_t n;
	int st;

	snprintf(cmd, sizeof(cmd), "'%s' %s 2>/dev/null", tool, args);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	n = fread(out, 1, size - 1, p);
	out[n] = '\0';
	st = pclose(p);
	ck_assert(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static void save(const struct enc *e, const char *name, char *path)
{
	int fd;

	snprintf(path, PATH_MAX, "%s/%s", tmpdir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, e->buf, e->len), (ssize_t)e->len);
	close(fd);
}

START_TEST(tool_modes)
{
	char logp[PATH_MAX], badp[PATH_MAX], data[PATH_MAX];
	char args[4 * PATH_MAX], out[4096];
	unsigned char b[512];
	struct enc e;
	int fd;

	enc_sample(&e, 512);
	save(&e, "tool.log", logp);
	snprintf(data, sizeof(data), "%s/tool.img", tmpdir);
	fd = open(data, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 64 * 512), 0);

	snprintf(args, sizeof(args), "--log '%s' --list", logp);
	ck_assert_int_eq(run_tool(args, out, sizeof(out)), 0);
	ck_assert_str_eq(out,
		"1 sector 8 nr_sectors 2 flags -\n"
		"2 sector 0 nr_sectors 1 flags METADATA\n"
		"3 sector 0 nr_sectors 0 flags FLUSH\n"
		"4 sector 0 nr_sectors 0 flags MARK mark after-fsync-1\n"
		"5 sector 9 nr_sectors 1 flags DISCARD\n"
		"6 sector 16 nr_sectors 1 flags FUA|METADATA\n"
		"7 sector 0 nr_sectors 0 flags MARK mark end\n"
		"7 entries (sector size 512)\n");

	snprintf(args, sizeof(args), "--log '%s' --flush-points", logp);
	ck_assert_int_eq(run_tool(args, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "3\nmark 4 after-fsync-1\n6\nmark 7 end\n");

	snprintf(args, sizeof(args), "--log '%s' --replay '%s' --end-mark "
		 "after-fsync-1", logp, data);
	ck_assert_int_eq(run_tool(args, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "applied 4 entries: through entry 4 of 7 "
			 "(mark after-fsync-1)\n");
	ck_assert_int_eq(pread(fd, b, 512, 8 * 512), 512);
	ck_assert_int_eq(b[0], 'a');
	ck_assert_int_eq(pread(fd, b, 512, 16 * 512), 512);
	ck_assert_int_eq(b[0], 0);

	snprintf(args, sizeof(args), "--log '%s' --replay '%s' --limit 6 "
		 "--fsck-points", logp, data);
	ck_assert_int_eq(run_tool(args, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "point 3\npoint 6\n"
			 "applied 6 entries: through entry 6 of 7\n");
	ck_assert_int_eq(pread(fd, b, 512, 16 * 512), 512);
	ck_assert_int_eq(b[0], 'f');

	/* a missing mark: nothing written, status 2 */
	snprintf(args, sizeof(args), "--log '%s' --replay '%s' --end-mark "
		 "nope", logp, data);
	ck_assert_int_eq(run_tool(args, out, sizeof(out)), 2);
	/* a mark after the limit */
	snprintf(args, sizeof(args), "--log '%s' --replay '%s' --limit 3 "
		 "--end-mark after-fsync-1", logp, data);
	ck_assert_int_eq(run_tool(args, out, sizeof(out)), 2);
	/* usage */
	ck_assert_int_eq(run_tool("--list", out, sizeof(out)), 2);
	snprintf(args, sizeof(args), "--log '%s' --list --flush-points", logp);
	ck_assert_int_eq(run_tool(args, out, sizeof(out)), 2);
	snprintf(args, sizeof(args), "--log '%s' --list --limit 3", logp);
	ck_assert_int_eq(run_tool(args, out, sizeof(out)), 2);
	snprintf(args, sizeof(args), "--log '%s' --replay '%s' --limit x",
		 logp, data);
	ck_assert_int_eq(run_tool(args, out, sizeof(out)), 2);
	snprintf(args, sizeof(args), "--log '%s/none' --list", tmpdir);
	ck_assert_int_eq(run_tool(args, out, sizeof(out)), 2);
	snprintf(args, sizeof(args), "--log '%s' --replay '%s/none'", logp,
		 tmpdir);
	ck_assert_int_eq(run_tool(args, out, sizeof(out)), 2);

	/* malformed: status 1; --list prints the entries before */
	put64(e.buf + 9 * 512 + 16, 1ULL << 7);
	save(&e, "bad.log", badp);
	snprintf(args, sizeof(args), "--log '%s' --list", badp);
	ck_assert_int_eq(run_tool(args, out, sizeof(out)), 1);
	ck_assert_ptr_nonnull(strstr(out, "5 sector 9 nr_sectors 1 flags "
				     "DISCARD\n"));
	ck_assert_ptr_null(strstr(out, "entries"));
	snprintf(args, sizeof(args), "--log '%s' --flush-points", badp);
	ck_assert_int_eq(run_tool(args, out, sizeof(out)), 1);
	/* the replay checks before it writes */
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	ck_assert_int_eq(ftruncate(fd, 64 * 512), 0);
	snprintf(args, sizeof(args), "--log '%s' --replay '%s'", badp, data);
	ck_assert_int_eq(run_tool(args, out, sizeof(out)), 1);
	ck_assert_int_eq(pread(fd, b, 512, 8 * 512), 512);
	ck_assert_int_eq(b[0], 0);
	/* but replays up to before the damage */
	snprintf(args, sizeof(args), "--log '%s' --replay '%s' --limit 5",
		 badp, data);
	ck_assert_int_eq(run_tool(args, out, sizeof(out)), 0);
	ck_assert_int_eq(pread(fd, b, 512, 8 * 512), 512);
	ck_assert_int_eq(b[0], 'a');
	enc_super(&e, 0, LW_VERSION, 7, 512);
	save(&e, "bad.log", badp);
	snprintf(args, sizeof(args), "--log '%s' --list", badp);
	ck_assert_int_eq(run_tool(args, out, sizeof(out)), 1);

	close(fd);
	unlink(data);
	unlink(logp);
	unlink(badp);
	free(e.buf);
}
END_TEST

/* ---- fixture, corpus, main ---- */

static void remove_tmpdir(void)
{
	DIR *d = opendir(tmpdir);
	struct dirent *de;
	char path[PATH_MAX];

	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", tmpdir, de->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(tmpdir);
}

static int write_corpus(const char *dir)
{
	struct {
		const char *name;
		struct enc e;
	} logs[6];
	char path[PATH_MAX];

	enc_sample(&logs[0].e, 512);
	logs[0].name = "sample-512";
	enc_init(&logs[1].e, 4096);
	enc_write(&logs[1].e, 7, 1, LW_FUA | LW_METADATA, 'w');
	enc_done(&logs[1].e);
	logs[1].name = "fua-4096";
	enc_init(&logs[2].e, 512);
	enc_done(&logs[2].e);
	logs[2].name = "empty";
	enc_init(&logs[3].e, 512);
	enc_write(&logs[3].e, 2, 1, LW_FLUSH | LW_FUA | LW_METADATA, 'q');
	enc_mark(&logs[3].e, "mkfs");
	enc_discard(&logs[3].e, 0, 2048);
	enc_write(&logs[3].e, 1, 3, 0, 'r');
	enc_flush(&logs[3].e);
	enc_mark(&logs[3].e, "dm-log-writes-end");
	enc_done(&logs[3].e);
	logs[3].name = "flush-with-data";
	enc_init(&logs[4].e, 1024);
	for (int i = 0; i < 4; i++) {
		enc_write(&logs[4].e, (uint64_t)i * 3, 1, 0, (unsigned char)i);
		enc_flush(&logs[4].e);
	}
	enc_mark(&logs[4].e, "after-fsync-1");
	enc_done(&logs[4].e);
	logs[4].name = "flushes-1024";
	enc_init(&logs[5].e, 4096);
	enc_discard(&logs[5].e, 1, 100);
	enc_mark(&logs[5].e, "after-fsync-2");
	enc_done(&logs[5].e);
	logs[5].name = "marks-4096";
	for (int i = 0; i < 6; i++) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s", dir, logs[i].name);
		f = fopen(path, "wb");
		if (!f || fwrite(logs[i].e.buf, 1, logs[i].e.len, f) !=
		    logs[i].e.len || fclose(f)) {
			perror(path);
			return 1;
		}
		printf("%s: %zu bytes\n", path, logs[i].e.len);
		free(logs[i].e.buf);
	}
	return 0;
}

static Suite *logwrites_suite(void)
{
	Suite *s = suite_create("logwrites");
	TCase *tc = tcase_create("decoder");

	tcase_add_loop_test(tc, decode_sample, 0, 2);
	tcase_add_test(tc, empty_log);
	tcase_add_test(tc, entries_past_the_count);
	tcase_add_test(tc, longest_mark);
	tcase_add_test(tc, flags_names);
	tcase_add_loop_test(tc, replay_sample, 0, 2);
	tcase_add_test(tc, replay_bounded_target);
	tcase_add_test(tc, replay_large_write);
	tcase_add_test(tc, log_shrinks_under_apply);
	tcase_add_test(tc, bad_super);
	tcase_add_test(tc, nr_entries_past_the_end);
	tcase_add_test(tc, data_len_past_the_end);
	tcase_add_test(tc, huge_lengths);
	tcase_add_test(tc, truncated);
	tcase_add_test(tc, bad_entries);
	tcase_add_test(tc, tool_modes);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	char exe[PATH_MAX];
	ssize_t n;
	SRunner *sr;
	int failed;

	if (argc == 3 && !strcmp(argv[1], "--write-corpus"))
		return write_corpus(argv[2]);
	if (argc != 1) {
		fprintf(stderr, "usage: unit-logwrites [--write-corpus DIR]\n");
		return 2;
	}
	/* replay-log is tools/bin/replay-log, from tests/bin/ */
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0) {
		perror("/proc/self/exe");
		return 1;
	}
	exe[n] = '\0';
	snprintf(tool, sizeof(tool), "%s/../../tools/bin/replay-log",
		 dirname(exe));
	if (!mkdtemp(tmpdir)) {
		perror(tmpdir);
		return 1;
	}
	sr = srunner_create(logwrites_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	remove_tmpdir();
	return failed ? 1 : 0;
}
