// SPDX-License-Identifier: MIT
/*
 * The journal's segments read through lento's ring (kml_read.h).
 *
 * The buffer holds the bytes of the current segment from file offset
 * buf_off on; records are decoded from it in place. When the next record
 * is not whole in it, the bytes left are moved to its front and a read
 * fills the rest. A segment ends at a record of length zero or at the end
 * of the file; the next record is then the first of the next segment,
 * whose header must say so.
 */
#include "kml_read.h"
#include "fault.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct kread {
	struct lo_loop *loop;
	int dirfd;
	int fd;			/* the segment, -1 none */
	uint64_t segno;
	uint64_t next_seq;	/* of the next record handed out */
	uint64_t expect;	/* of the next record in the buffer */
	uint8_t *buf;
	size_t len, pos;	/* bytes in buf; where the next record is */
	uint64_t buf_off;	/* file offset of buf[0] */
	bool eof;		/* the last read reached the end of the file */
	/*
	 * The bytes from pos on were read again after an end or a bad
	 * record was met there: the current segment grows while it is
	 * read, so what a read saw before may be stale.
	 */
	bool reread;
	bool busy, dead;
	const uint8_t *last;	/* the bytes of the record last handed out */
	lo_file_fn more;
	void *more_arg;
};

bool kread_busy(const struct kread *kr)
{
	return kr->busy;
}

uint64_t kread_pos(const struct kread *kr)
{
	return kr->next_seq;
}

uint64_t kread_segno(const struct kread *kr)
{
	return kr->segno;
}

const void *kread_raw(const struct kread *kr)
{
	return kr->last;
}

static void seg_close(struct kread *kr)
{
	if (kr->fd >= 0)
		close(kr->fd);
	kr->fd = -1;
	kr->len = kr->pos = 0;
	kr->eof = false;
}

/*
 * The segment file @name of the journal's directory, open for reading;
 * or -errno (-EINVAL: not a regular file). Never through a symlink, and
 * never waiting: a FIFO or a device planted under a segment's name would
 * otherwise hold lento's one thread in open() or read().
 */
static int seg_openat(int dirfd, const char *name)
{
	struct stat st;
	int fd = openat(dirfd, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW |
			O_CLOEXEC | O_NOCTTY), err;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		err = -errno;
		close(fd);
		return err;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

/* Segment @segno, open, and its first record's number; or -errno. */
static int seg_peek(struct kread *kr, uint64_t segno, uint64_t *first)
{
	uint8_t hdr[sizeof(struct presto_kml_seg_hdr)];
	struct kml_seg_header h;
	char name[32];
	const char *why;
	ssize_t n;
	int fd;

	snprintf(name, sizeof(name), "kml.%08" PRIu64, segno);
	fd = seg_openat(kr->dirfd, name);
	if (fd < 0)
		return fd;
	n = pread(fd, hdr, sizeof(hdr), 0);
	if (n != (ssize_t)sizeof(hdr) ||
	    kml_decode_header(hdr, sizeof(hdr), &h, &why) || h.segno != segno) {
		close(fd);
		return n < 0 ? -errno : -ENODATA;	/* a spare, or damage */
	}
	*first = h.first_seq;
	return fd;
}

/* Read segment @segno from its first record on. */
static int seg_open(struct kread *kr, uint64_t segno, uint64_t *first)
{
	int fd = seg_peek(kr, segno, first);

	if (fd < 0)
		return fd;
	seg_close(kr);
	kr->fd = fd;
	kr->segno = segno;
	kr->buf_off = PRESTO_KML_HDR_SIZE;
	kr->expect = *first;
	return 0;
}

/* The number of the segment file @name, or 0. */
static uint64_t segno_of(const char *name)
{
	char *end;
	uint64_t n;

	if (strncmp(name, "kml.", 4) || strlen(name) != 12)
		return 0;
	n = strtoull(name + 4, &end, 10);
	return *end ? 0 : n;
}

/*
 * The segment holding @seq: the newest whose first record is at most
 * @seq. Listed once, at the start and after a gap; -ENODATA if none.
 */
static int seg_find(struct kread *kr, uint64_t seq)
{
	int fd = dup(kr->dirfd);
	uint64_t best = 0, first;
	struct dirent *de;
	DIR *d;

	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d))) {
		uint64_t n = segno_of(de->d_name);
		int sfd;

		if (!n || n <= best || (sfd = seg_peek(kr, n, &first)) < 0)
			continue;
		close(sfd);
		if (first <= seq)
			best = n;
	}
	closedir(d);
	return best ? seg_open(kr, best, &first) : -ENODATA;
}

static void read_done(void *arg, int res)
{
	struct kread *kr = arg;

	kr->busy = false;
	if (kr->dead) {
		kread_free(kr);
		return;
	}
	if (res >= 0) {
		kr->len += (size_t)res;
		/* A regular file reads short only at its end. */
		kr->eof = kr->len < KREAD_CHUNK;
	}
	if (kr->more)
		kr->more(kr->more_arg, res < 0 ? res : 0);
}

/* Keep what is left, read the rest of a chunk behind it. */
static int fill(struct kread *kr)
{
	int err;

	memmove(kr->buf, kr->buf + kr->pos, kr->len - kr->pos);
	kr->buf_off += kr->pos;
	kr->len -= kr->pos;
	kr->pos = 0;
	err = lo_file_read(kr->loop, kr->fd, kr->buf + kr->len,
			   KREAD_CHUNK - kr->len, kr->buf_off + kr->len,
			   read_done, kr);
	if (!err)
		kr->busy = true;
	return err;
}

int kread_new(struct lo_loop *loop, const char *dir, uint64_t next_seq,
	      struct kread **out)
{
	struct kread *kr = calloc(1, sizeof(*kr));

	if (!kr)
		return -ENOMEM;
	kr->buf = malloc(KREAD_CHUNK);
	kr->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (!kr->buf || kr->dirfd < 0) {
		int err = kr->buf ? -errno : -ENOMEM;

		if (kr->dirfd >= 0)
			close(kr->dirfd);
		free(kr->buf);
		free(kr);
		return err;
	}
	kr->loop = loop;
	kr->fd = -1;
	kr->next_seq = next_seq ? next_seq : 1;
	*out = kr;
	return 0;
}

void kread_free(struct kread *kr)
{
	if (!kr)
		return;
	if (kr->busy) {		/* the ring still writes into buf */
		kr->dead = true;
		return;
	}
	seg_close(kr);
	close(kr->dirfd);
	free(kr->buf);
	free(kr);
}

/* The record at buf[pos] is not whole in the buffer: read more, or end. */
static bool need_more(const struct kread *kr)
{
	size_t left = kr->len - kr->pos;
	const uint8_t *p = kr->buf + kr->pos;
	uint32_t rlen;

	if (kr->eof)
		return false;
	if (left < 4)
		return true;
	rlen = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
	return left < sizeof(struct presto_kml_rec) ||
	       (rlen && rlen <= KML_REC_MAX && rlen > left);
}

/* Read what follows pos again: the segment may have grown since. */
static void reread(struct kread *kr)
{
	kr->len = kr->pos;
	kr->eof = false;
	kr->reread = true;
}

/*
 * The records of this segment ended at pos (@err: -ENODATA), or the one
 * there is not valid (@err: -EBADMSG). The next segment, if it begins
 * with the next record, is where it goes on; else the bytes are read
 * again once (presto may have written there since), and only then is
 * it an error.
 */
static int at_end(struct kread *kr, int err, const char **why)
{
	uint64_t first;
	int fd = seg_peek(kr, kr->segno + 1, &first);

	if (fd >= 0) {
		close(fd);
		if (first == kr->expect && err == -ENODATA)
			return seg_open(kr, kr->segno + 1, &first);
	}
	if (!kr->reread) {
		reread(kr);
		return 0;
	}
	kr->reread = false;
	kr->eof = false;
	if (err == -ENODATA)
		*why = fd >= 0 ? "the next segment does not begin with the "
			"next record" : "no record there, and no next segment";
	return fd >= 0 && err == -ENODATA ? -EBADMSG : err;
}

int kread_next(struct kread *kr, uint64_t limit, struct kml_record *r,
	       const char **why, lo_file_fn more, void *arg)
{
	*why = NULL;
	kr->more = more;
	kr->more_arg = arg;
	if (kr->next_seq <= limit && fault_at("kread-bad")) {
		*why = "a damaged record (injected by a test)";
		return -EBADMSG;
	}
	while (!kr->busy && kr->next_seq <= limit) {
		enum kml_result res;
		int err;

		if (kr->fd < 0 && (err = seg_find(kr, kr->next_seq)))
			return err;
		if (kr->pos >= kr->len && kr->eof) {
			err = at_end(kr, -ENODATA, why);
			if (err)
				return err;
			continue;
		}
		if (kr->pos >= kr->len || need_more(kr)) {
			err = fill(kr);
			if (err)
				return err;
			continue;
		}
		res = kml_decode_record(kr->buf + kr->pos, kr->len - kr->pos,
					kr->expect, r, why);
		if (res != KML_OK) {
			err = at_end(kr, res == KML_END ? -ENODATA : -EBADMSG,
				     why);
			if (err)
				return err;
			continue;
		}
		kr->reread = false;
		kr->last = kr->buf + kr->pos;
		kr->pos += r->len;
		kr->expect++;
		if (r->seq < kr->next_seq)
			continue;	/* consumed before */
		kr->next_seq++;
		return 1;
	}
	return 0;
}
