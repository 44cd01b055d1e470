// SPDX-License-Identifier: MIT
/* KML segments for the tests (kmlgen.h). */
#include "kmlgen.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

#define AT(base, type, member) ((base) + offsetof(type, member))

int kmlgen_open(struct kmlgen *g, const char *dir)
{
	memset(g, 0, sizeof(*g));
	g->fd = -1;
	g->next_seq = 1;
	if (mkdir(dir, 0700) && errno != EEXIST)
		return -errno;
	g->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return g->dirfd < 0 ? -errno : 0;
}

int kmlgen_segment(struct kmlgen *g, uint64_t segno)
{
	typedef struct presto_kml_seg_hdr H;
	uint8_t h[PRESTO_KML_HDR_SIZE] = { 0 };
	char name[32];

	if (g->fd >= 0)
		close(g->fd);
	snprintf(name, sizeof(name), "kml.%08" PRIu64, segno);
	g->fd = openat(g->dirfd, name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
		       0600);
	if (g->fd < 0)
		return -errno;
	memcpy(h, PRESTO_KML_MAGIC, 8);
	put32(AT(h, H, version), PRESTO_KML_VERSION);
	put32(AT(h, H, hdr_size), PRESTO_KML_HDR_SIZE);
	put64(AT(h, H, segno), segno);
	put64(AT(h, H, first_seq), g->next_seq);
	put64(AT(h, H, seg_size), 4u << 20);
	put32(AT(h, H, crc), kml_crc(h, offsetof(H, crc)));
	if (pwrite(g->fd, h, sizeof(h), 0) != (ssize_t)sizeof(h))
		return -EIO;
	g->segno = segno;
	g->off = PRESTO_KML_HDR_SIZE;
	return 0;
}

static void put_attr(uint8_t *p, const struct kml_attr *a)
{
	typedef struct presto_kml_attr A;

	put32(AT(p, A, valid), a->valid);
	put32(AT(p, A, mode), a->mode);
	put32(AT(p, A, uid), a->uid);
	put32(AT(p, A, gid), a->gid);
	put64(AT(p, A, size), a->size);
	put64(AT(p, A, atime_ns), (uint64_t)a->atime_ns);
	put64(AT(p, A, mtime_ns), (uint64_t)a->mtime_ns);
	put64(AT(p, A, ctime_ns), (uint64_t)a->ctime_ns);
	put32(AT(p, A, rdev), a->rdev);
	put32(AT(p, A, nlink), a->nlink);
}

int64_t kmlgen_append(struct kmlgen *g, const struct kmlgen_rec *r)
{
	typedef struct presto_kml_rec R;
	size_t n1 = r->name ? strlen(r->name) : 0;
	size_t n2 = r->name2 ? strlen(r->name2) : 0;
	size_t body = sizeof(R) + n1 + n2 + r->data_len + 4 * r->ngroups;
	size_t len = (body + PRESTO_KML_ALIGN - 1) & ~(size_t)7;
	uint8_t *p = calloc(1, len);
	uint64_t seq = g->next_seq;

	if (!p)
		return -ENOMEM;
	put32(AT(p, R, len), (uint32_t)len);
	put64(AT(p, R, seq), seq);
	put16(AT(p, R, op), r->op);
	put16(AT(p, R, flags), r->flags);
	put16(AT(p, R, name_len), (uint16_t)n1);
	put16(AT(p, R, name2_len), (uint16_t)n2);
	put32(AT(p, R, data_len), (uint32_t)r->data_len);
	put32(AT(p, R, uid), r->uid);
	put32(AT(p, R, gid), r->gid);
	put16(AT(p, R, ngroups), r->ngroups);
	put64(AT(p, R, time_ns), (uint64_t)r->time_ns);
	for (int i = 0; i < PRESTO_KML_NFH; i++) {
		uint8_t *f = p + offsetof(R, fh) +
			     i * sizeof(struct presto_kml_fh);

		put64(f, r->fh[i].ino);
		put32(f + 8, r->fh[i].gen);
	}
	put_attr(AT(p, R, attr), &r->attr);
	if (n1)
		memcpy(p + sizeof(R), r->name, n1);
	if (n2)
		memcpy(p + sizeof(R) + n1, r->name2, n2);
	if (r->data_len)
		memcpy(p + sizeof(R) + n1 + n2, r->data, r->data_len);
	for (uint16_t i = 0; i < r->ngroups; i++)
		put32(p + sizeof(R) + n1 + n2 + r->data_len + 4 * i,
		      r->groups[i]);
	put32(AT(p, R, crc), kml_crc(p, len));
	if (pwrite(g->fd, p, len, (off_t)g->off) != (ssize_t)len) {
		free(p);
		return -EIO;
	}
	free(p);
	g->off += len;
	g->next_seq++;
	return (int64_t)seq;
}

void kmlgen_close(struct kmlgen *g)
{
	if (g->fd >= 0)
		close(g->fd);
	if (g->dirfd >= 0)
		close(g->dirfd);
	g->fd = g->dirfd = -1;
}
