/* SPDX-License-Identifier: MIT */
/*
 * Decode and encode again, message by message (lproto_roundtrip.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "lproto_roundtrip.h"

static uint8_t chunk[LP_CHUNK_MAX], chunk2[LP_CHUNK_MAX];

/* A decoded text (no NUL inside) as a C string for the encoders. */
static char *cstr(const char *s, uint32_t n)
{
	char *c = malloc(n + 1);

	if (c) {
		memcpy(c, s, n);
		c[n] = '\0';
	}
	return c;
}

static int again(int err, const char **why)
{
	if (err >= 0)
		return LP_RT_SAME;
	*why = err == -ENOMEM ? "re-encode: out of memory" :
	       "re-encode: the encoder refused what its decoder accepted";
	return LP_RT_BAD;
}

static enum lp_rt error(const struct lp_frame *f, struct lp_buf *out,
			const char **why)
{
	struct lp_error m;
	char *msg;
	int err;

	if (lp_decode_error(f, &m, why))
		return LP_RT_BAD;
	msg = cstr(m.msg, m.msg_len);
	err = msg ? lp_encode_error(out, f->tag, m.code, msg) : -ENOMEM;
	free(msg);
	return again(err, why);
}

/* A decoded list of xattrs as the array an encoder reads (NULL if none). */
static struct lp_xattr *xattr_array(struct lp_list *l, uint32_t n, int *err)
{
	struct lp_xattr *x = n ? calloc(n, sizeof(*x)) : NULL;
	uint32_t i = 0;

	if (n && !x)
		*err = -ENOMEM;
	while (x && i < n && lp_next_xattr(l, &x[i]) == 1)
		i++;
	if (x && i != n)
		*err = -EINVAL;
	return x;
}

static enum lp_rt readdir_reply(const struct lp_frame *f, struct lp_buf *out,
				const char **why)
{
	struct lp_readdir_reply m;
	struct lp_dirent *d;
	uint32_t i = 0;
	int err = 0;

	if (lp_decode_readdir_reply(f, &m, why))
		return LP_RT_BAD;
	d = calloc(m.count + 1, sizeof(*d));
	if (!d)
		return again(-ENOMEM, why);
	m.dir_xattr = xattr_array(&m.dir_xattrs, m.dir_nxattr, &err);
	while (!err && lp_next_dirent(&m.ents, &d[i]) == 1) {
		d[i].xattr = xattr_array(&d[i].xattrs, d[i].nxattr, &err);
		i++;
	}
	if (!err)
		err = i == m.count ? lp_encode_readdir_reply(out, f->tag, &m,
							     d, i) : -EINVAL;
	for (uint32_t k = 0; k < i; k++)
		free((void *)d[k].xattr);
	free((void *)m.dir_xattr);
	free(d);
	if (err >= 0 && (uint32_t)err != i)
		return LP_RT_BIG;
	return again(err, why);
}

/* Decompress, compress again, and decompress that: the same bytes. */
static enum lp_rt data(const struct lp_frame *f, struct lp_buf *out,
		       const char **why)
{
	struct lp_data d, d2;
	struct lp_frame f2;
	size_t at = out->len;

	if (lp_decode_data(f, &d, why))
		return LP_RT_BAD;
	if (lp_chunk_decompress(&d, chunk, sizeof(chunk), why, NULL))
		return LP_RT_DATA;	/* a well-formed frame, bad zstd */
	if (lp_encode_data(out, f->tag, &d, chunk, d.raw_len))
		return again(-EINVAL, why);
	if (lp_frame_parse(out->p + at, out->len - at, &f2, why) <= 0 ||
	    lp_decode_data(&f2, &d2, why) ||
	    lp_chunk_decompress(&d2, chunk2, sizeof(chunk2), why, NULL) ||
	    d2.rec != d.rec || d2.flags != d.flags || d2.offset != d.offset ||
	    d2.raw_len != d.raw_len || d2.more != d.more ||
	    memcmp(chunk, chunk2, d.raw_len)) {
		*why = "re-encode: DATA came back different";
		return LP_RT_BAD;
	}
	return LP_RT_DATA;
}

static enum lp_rt volume_validate(const struct lp_frame *f,
				  struct lp_buf *out, const char **why)
{
	struct lp_volstamp *v;
	struct lp_list l;
	uint32_t i = 0;
	int err;

	if (lp_decode_volume_validate(f, &l, why))
		return LP_RT_BAD;
	v = calloc(l.left + 1, sizeof(*v));
	if (!v)
		return again(-ENOMEM, why);
	while (lp_next_volstamp(&l, &v[i]) == 1)
		i++;
	err = f->type == LP_VOLUME_VALIDATE ?
	      lp_encode_volume_validate(out, f->tag, v, i) :
	      lp_encode_volume_validate_reply(out, f->tag, v, i);
	free(v);
	return again(err, why);
}

/* Every item of a list of fids and versions, in a new array. */
static struct lp_fidvv *fidvvs(struct lp_list *l, uint32_t *n)
{
	struct lp_fidvv *v = calloc(l->left + 1, sizeof(*v));

	*n = 0;
	while (v && lp_next_fidvv(l, &v[*n]) == 1)
		(*n)++;
	return v;
}

static enum lp_rt validate(const struct lp_frame *f, struct lp_buf *out,
			   const char **why)
{
	struct lp_fidvv *v;
	struct lp_list l;
	uint32_t n;
	int err;

	if (lp_decode_validate(f, &l, why))
		return LP_RT_BAD;
	v = fidvvs(&l, &n);
	err = v ? lp_encode_validate(out, f->tag, v, n) : -ENOMEM;
	free(v);
	return again(err, why);
}

static enum lp_rt reintegrate(const struct lp_frame *f, struct lp_buf *out,
			      const char **why)
{
	struct lento_rec *r;
	struct lp_reint m;
	uint32_t i = 0;
	int err;

	if (lp_decode_reintegrate(f, &m, why))
		return LP_RT_BAD;
	r = calloc(m.count + 1, sizeof(*r));
	if (!r)
		return again(-ENOMEM, why);
	while (lp_next_rec(&m.recs, &r[i]) == 1)
		i++;
	err = lp_encode_reintegrate(out, f->tag, &m, r, i);
	free(r);
	if (err >= 0 && (uint32_t)err != i)
		return LP_RT_BIG;
	return again(err, why);
}

static enum lp_rt reintegrate_reply(const struct lp_frame *f,
				    struct lp_buf *out, const char **why)
{
	struct lp_reint_reply m;
	struct lp_fidvv *v;
	uint32_t n;
	char *msg;
	int err = -ENOMEM;

	if (lp_decode_reintegrate_reply(f, &m, why))
		return LP_RT_BAD;
	v = fidvvs(&m.versions, &n);
	msg = cstr(m.msg, m.msg_len);
	if (v && msg) {
		m.msg = msg;
		err = lp_encode_reintegrate_reply(out, f->tag, &m, v, n);
	}
	free(v);
	free(msg);
	return again(err, why);
}

/* The messages of one struct each: decode, and encode that again. */
static enum lp_rt simple(const struct lp_frame *f, struct lp_buf *out,
			 const char **why)
{
	union {
		struct lp_hello hello;
		struct lp_hello_reply hello_reply;
		struct lento_fid fid;
		struct lp_getattr_reply getattr_reply;
		struct lp_fetch fetch;
		struct lp_fetch_reply fetch_reply;
		char volname[LENTO_VOLNAME_MAX + 1];
		struct lp_volume volume;
		struct lp_validate_reply validate_reply;
		struct lp_permit permit;
		uint64_t u64;
		uint32_t u32;
	} u;
	uint32_t t = f->tag;

#define RT(dec, enc) return dec ? LP_RT_BAD : again(enc, why)
	switch (f->type) {
	case LP_HELLO:
		RT(lp_decode_hello(f, &u.hello, why),
		   lp_encode_hello(out, t, &u.hello));
	case LP_HELLO_REPLY:
		RT(lp_decode_hello_reply(f, &u.hello_reply, why),
		   lp_encode_hello_reply(out, t, &u.hello_reply));
	case LP_PING:
	case LP_PONG:
		RT(lp_decode_ping(f, &u.u64, why),
		   lp_encode_ping(out, f->type, t, u.u64));
	case LP_GETATTR:
	case LP_READDIR:
	case LP_BREAK:
		RT(lp_decode_fid(f, &u.fid, why),
		   lp_encode_fid(out, f->type, t, &u.fid));
	case LP_GETATTR_REPLY:
		RT(lp_decode_getattr_reply(f, &u.getattr_reply, why),
		   lp_encode_getattr_reply(out, t, &u.getattr_reply));
	case LP_FETCH:
		RT(lp_decode_fetch(f, &u.fetch, why),
		   lp_encode_fetch(out, t, &u.fetch));
	case LP_FETCH_REPLY:
		RT(lp_decode_fetch_reply(f, &u.fetch_reply, why),
		   lp_encode_fetch_reply(out, t, &u.fetch_reply));
	case LP_VOLUME_LOOKUP:
		RT(lp_decode_volume_lookup(f, u.volname, why),
		   lp_encode_volume_lookup(out, t, u.volname));
	case LP_VOLUME_LOOKUP_REPLY:
		RT(lp_decode_volume_lookup_reply(f, &u.volume, why),
		   lp_encode_volume_lookup_reply(out, t, &u.volume));
	case LP_VALIDATE_REPLY:
		RT(lp_decode_validate_reply(f, &u.validate_reply, why),
		   lp_encode_validate_reply(out, t, u.validate_reply.result,
					    u.validate_reply.count));
	case LP_PERMIT_REPLY:
		RT(lp_decode_permit_reply(f, &u.permit, why),
		   lp_encode_permit_reply(out, t, &u.permit));
	default:		/* the volume messages */
		RT(lp_decode_volume(f, &u.u32, why),
		   lp_encode_volume(out, f->type, t, u.u32));
	}
#undef RT
}

enum lp_rt lp_roundtrip(const struct lp_frame *f, struct lp_buf *out,
			const char **why)
{
	switch (f->type) {
	case LP_ERROR:
		return error(f, out, why);
	case LP_READDIR_REPLY:
		return readdir_reply(f, out, why);
	case LP_DATA:
		return data(f, out, why);
	case LP_VOLUME_VALIDATE:
	case LP_VOLUME_VALIDATE_REPLY:
		return volume_validate(f, out, why);
	case LP_VALIDATE:
		return validate(f, out, why);
	case LP_REINTEGRATE:
		return reintegrate(f, out, why);
	case LP_REINTEGRATE_REPLY:
		return reintegrate_reply(f, out, why);
	}
	return simple(f, out, why);
}
