/* SPDX-License-Identifier: MIT */
/*
 * How the client's database (client.db: the CML's tables and the cache's)
 * stores fids and version vectors as blobs, little-endian:
 *
 *   fid  16 bytes: volume u32, client u32, seq u64
 *   vv   n u32, n counters u64, store.client u32, store.seq u64
 *
 * One definition for both tables' owners (cml.c, cache.c).
 */
#ifndef LENTO_BLOB_H
#define LENTO_BLOB_H

#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "lento_types.h"

#define FID_BLOB	16
#define VV_BLOB_MAX	(4 + 8 * LENTO_VV_MAX + 12)

static inline void blob_put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static inline void blob_put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

static inline uint32_t blob_get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

static inline uint64_t blob_get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

static inline void fid_encode(uint8_t b[FID_BLOB], const struct lento_fid *f)
{
	blob_put32(b, f->volume);
	blob_put32(b + 4, f->client);
	blob_put64(b + 8, f->seq);
}

/* -EUCLEAN unless @len is a fid's. */
static inline int fid_decode(const uint8_t *b, size_t len,
			     struct lento_fid *f)
{
	if (len != FID_BLOB || !b)
		return -EUCLEAN;
	f->volume = blob_get32(b);
	f->client = blob_get32(b + 4);
	f->seq = blob_get64(b + 8);
	return 0;
}

/* Into @b (VV_BLOB_MAX bytes); returns the length. */
static inline size_t vv_encode(uint8_t *b, const struct lento_vv *vv)
{
	uint32_t n = vv->n > LENTO_VV_MAX ? LENTO_VV_MAX : vv->n;
	size_t len = 4;

	blob_put32(b, n);
	for (uint32_t i = 0; i < n; i++, len += 8)
		blob_put64(b + len, vv->v[i]);
	blob_put32(b + len, vv->store.client);
	blob_put64(b + len + 4, vv->store.seq);
	return len + 12;
}

/* -EUCLEAN unless @b holds a whole, sane vv (it is zeroed then). */
static inline int vv_decode(const uint8_t *b, size_t len, struct lento_vv *vv)
{
	memset(vv, 0, sizeof(*vv));
	if (len < 16 || !b)
		return -EUCLEAN;
	vv->n = blob_get32(b);
	if (vv->n > LENTO_VV_MAX || len != 16 + 8 * (size_t)vv->n) {
		vv->n = 0;
		return -EUCLEAN;
	}
	for (uint32_t i = 0; i < vv->n; i++)
		vv->v[i] = blob_get64(b + 4 + 8 * i);
	vv->store.client = blob_get32(b + 4 + 8 * vv->n);
	vv->store.seq = blob_get64(b + 8 + 8 * vv->n);
	return 0;
}

#endif /* LENTO_BLOB_H */
