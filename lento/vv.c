// SPDX-License-Identifier: MIT
/* Version vectors: see vv.h. */
#include "vv.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static uint32_t vv_len(const struct lento_vv *vv)
{
	return vv->n < LENTO_VV_MAX ? vv->n : LENTO_VV_MAX;
}

static uint64_t vv_at(const struct lento_vv *vv, uint32_t i)
{
	return i < vv_len(vv) ? vv->v[i] : 0;
}

void lento_vv_init(struct lento_vv *vv, uint32_t n)
{
	memset(vv, 0, sizeof(*vv));
	vv->n = n < LENTO_VV_MAX ? n : LENTO_VV_MAX;
}

enum lento_vv_order lento_vv_cmp(const struct lento_vv *a,
				 const struct lento_vv *b)
{
	uint32_t n = vv_len(a) > vv_len(b) ? vv_len(a) : vv_len(b);
	bool less = false, more = false;

	for (uint32_t i = 0; i < n; i++) {
		uint64_t x = vv_at(a, i), y = vv_at(b, i);

		less |= x < y;
		more |= x > y;
	}
	if (less && more)
		return LENTO_VV_CONCURRENT;
	if (less)
		return LENTO_VV_BEFORE;
	if (more)
		return LENTO_VV_AFTER;
	if (a->store.client != b->store.client ||
	    a->store.seq != b->store.seq)
		return LENTO_VV_CONCURRENT;
	return LENTO_VV_EQUAL;
}

bool lento_vv_eq(const struct lento_vv *a, const struct lento_vv *b)
{
	return lento_vv_cmp(a, b) == LENTO_VV_EQUAL;
}

int lento_vv_bump(struct lento_vv *vv, uint32_t server,
		  struct lento_storeid sid)
{
	if (server >= LENTO_VV_MAX || vv->n > LENTO_VV_MAX)
		return -EINVAL;
	if (vv_at(vv, server) == UINT64_MAX)
		return -EOVERFLOW;
	while (vv->n <= server)
		vv->v[vv->n++] = 0;
	vv->v[server]++;
	vv->store = sid;
	return 0;
}

int lento_vv_format(const struct lento_vv *vv, char *buf, size_t len)
{
	size_t off = 0;
	int r;

	if (len)
		buf[0] = '\0';
#define PUT(...)							\
	do {								\
		r = snprintf(buf + (off < len ? off : len),		\
			     off < len ? len - off : 0, __VA_ARGS__);	\
		if (r < 0)						\
			return r;					\
		off += (size_t)r;					\
	} while (0)
	PUT("[");
	for (uint32_t i = 0; i < vv_len(vv); i++)
		PUT("%s%" PRIu64, i ? "," : "", vv->v[i]);
	PUT("]@%" PRIu32 ":%" PRIu64, vv->store.client, vv->store.seq);
#undef PUT
	return (int)off;
}
