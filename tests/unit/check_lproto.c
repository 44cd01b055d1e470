// SPDX-License-Identifier: MIT
/*
 * Unit tests of the lento wire codec (protocol/lproto.c): every message
 * goes through its encoder and decoder and comes back the same, byte for
 * byte; every truncation of every sample frame is refused; malformed
 * fields of each kind are refused with their reason, by the decoder and
 * (where an encoder can write them down) by the encoder too; chunks that
 * would decompress beyond what they declare are refused.
 *
 *   unit-lproto                      run the tests
 *   unit-lproto --write-corpus DIR   write the fuzzer's seed frames
 */
#include "lproto.h"
#include "lproto_roundtrip.h"

#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof(*(a)))

/* Not ck_assert: --write-corpus runs outside any test. */
#define MUST(call) do {							\
	int err_ = (call);						\
	if (err_ < 0) {							\
		fprintf(stderr, "%s:%d: %s: %d (%s)\n", __FILE__,	\
			__LINE__, #call, err_, b->why ? b->why : "");	\
		abort();						\
	}								\
} while (0)

/* ------------------------------------------------------- samples */

static const unsigned int all_types[] = {
	LP_HELLO, LP_HELLO_REPLY, LP_PING, LP_PONG, LP_ERROR,
	LP_GETATTR, LP_GETATTR_REPLY, LP_READDIR, LP_READDIR_REPLY,
	LP_FETCH, LP_FETCH_REPLY, LP_DATA,
	LP_VOLUME_LOOKUP, LP_VOLUME_LOOKUP_REPLY,
	LP_VOLUME_VALIDATE, LP_VOLUME_VALIDATE_REPLY,
	LP_VALIDATE, LP_VALIDATE_REPLY,
	LP_PERMIT_ACQUIRE, LP_PERMIT_RENEW, LP_PERMIT_RELEASE, LP_PERMIT_REPLY,
	LP_REINTEGRATE, LP_REINTEGRATE_REPLY,
	LP_BREAK, LP_BREAK_VOLUME, LP_PERMIT_REVOKE,
};

#define NTYPES	ARRAY_SIZE(all_types)
#define NV	6	/* variants of each type's sample */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static struct lento_fid sfid(unsigned int v)
{
	return (struct lento_fid){ 7 + v, v % 3, 100 + v };
}

static struct lento_vv svv(unsigned int v)
{
	struct lento_vv vv;

	memset(&vv, 0, sizeof(vv));
	vv.n = v % (LENTO_VV_MAX + 1);
	for (uint32_t i = 0; i < vv.n; i++)
		vv.v[i] = i + 1 + v;
	vv.store.client = v;
	vv.store.seq = 1000 + v;
	return vv;
}

static struct lento_attr sattr(unsigned int v)
{
	struct lento_attr a;

	memset(&a, 0, sizeof(a));
	a.valid = LENTO_A_ALL;
	a.mode = (0644 + v) & 07777;
	a.uid = 1000 + v;
	a.gid = 100;
	a.size = v * 1000ULL;
	a.atime_ns = 1700000000000000000LL + v;
	a.mtime_ns = -5 - (int64_t)v;	/* before the epoch is fine */
	a.ctime_ns = 1700000000123456789LL;
	a.rdev = (uint64_t)v << 32 | 3;
	return a;
}

static struct lento_status sstatus(unsigned int v, uint8_t type)
{
	struct lento_status st;

	memset(&st, 0, sizeof(st));
	st.fid = sfid(v);
	st.type = type;
	st.nlink = 1 + v;
	st.attr = sattr(v);
	st.vv = svv(v + 1);
	return st;
}

/* Entry name @i of variant @v: one of them the longest there is. */
static void sname(char *dst, unsigned int v, unsigned int i)
{
	if (v == 3 && i == 1) {
		memset(dst, 'n', LENTO_NAME_MAX);
		dst[LENTO_NAME_MAX] = '\0';
	} else {
		snprintf(dst, LENTO_NAME_MAX + 1, "entry-%u.%u \xc3\xa9", v, i);
	}
}

static char long_target[LENTO_SYMLINK_MAX + 1];
static uint8_t value[LENTO_XATTR_SIZE_MAX + 1];
/* Supplementary groups 2000, 2001, ... as records carry them (LE u32s). */
static uint8_t sgroups[4 * LENTO_GROUPS_MAX];

static void fill_statics(void)
{
	memset(long_target, 't', LENTO_SYMLINK_MAX);
	for (size_t i = 0; i < sizeof(value); i++)
		value[i] = (uint8_t)(i * 7);
	for (uint32_t i = 0; i < LENTO_GROUPS_MAX; i++)
		for (int k = 0; k < 4; k++)
			sgroups[4 * i + k] = (uint8_t)((2000 + i) >> 8 * k);
}

/* Xattrs for samples: an ACL, a user attribute, an empty value. */
static const struct lp_xattr sxattrs[] = {
	{ "system.posix_acl_access", 23, "\x02\0\0\0\x01\0\x06\0", 8 },
	{ "user.mime_type", 14, "text/plain", 10 },
	{ "trusted.empty", 13, "", 0 },
};

static void sdirent(struct lp_dirent *d, unsigned int v, unsigned int i)
{
	static const uint8_t types[] = {
		LENTO_T_REG, LENTO_T_DIR, LENTO_T_SYMLINK, LENTO_T_FIFO,
		LENTO_T_SOCK, LENTO_T_CHR, LENTO_T_BLK,
	};

	memset(d, 0, sizeof(*d));
	sname(d->de.name, v, i);
	d->de.st = sstatus(v + i, types[i % ARRAY_SIZE(types)]);
	if (d->de.st.type == LENTO_T_SYMLINK) {
		d->target = long_target;
		d->target_len = v == 4 ? LENTO_SYMLINK_MAX : 1 + i;
	}
	d->nxattr = (v + i) % (ARRAY_SIZE(sxattrs) + 1);
	d->xattr = sxattrs;
}

/* A record of @op, as lento_types.h's table says it looks. */
static void srec(struct lento_rec *r, uint16_t op, uint64_t recno,
		 unsigned int v)
{
	memset(r, 0, sizeof(*r));
	r->recno = recno;
	r->op = op;
	r->uid = 1000 + v;
	r->gid = 100;
	r->time_ns = 1700000000000000000LL + (int64_t)recno;
	/* No groups, a few, or as many as a record carries. */
	r->ngroups = v == 4 ? LENTO_GROUPS_MAX : v % 2 ? 3 : 0;
	r->groups = r->ngroups ? sgroups : NULL;
	r->obj = sfid(v + 1);
	r->base_obj = svv(v + 1);
	if (op <= LENTO_OP_RENAME) {
		r->dir = sfid(v + 2);
		r->base_dir = svv(v + 2);
		sname(r->name, v, (unsigned int)recno);
	}
	switch (op) {
	case LENTO_OP_CREATE:
		r->type = LENTO_T_REG;
		r->attr = sattr(v);
		break;
	case LENTO_OP_MKDIR:
		r->type = LENTO_T_DIR;
		r->attr = sattr(v);
		break;
	case LENTO_OP_MKNOD:
		r->type = LENTO_T_CHR;
		r->attr = sattr(v);
		break;
	case LENTO_OP_SYMLINK:
		r->type = LENTO_T_SYMLINK;
		r->data = long_target;
		r->data_len = v == 5 ? LENTO_SYMLINK_MAX : 12;
		break;
	case LENTO_OP_RENAME:
		r->dir2 = sfid(v + 3);
		r->base_dir2 = svv(v + 3);
		strcpy(r->name2, "renamed");
		if (v % 2) {
			r->target = sfid(v + 4);
			r->base_target = svv(v + 4);
		}
		r->flags = v == 2 ? LENTO_R_NOREPLACE :
			   v == 3 ? LENTO_R_EXCHANGE : 0;
		break;
	case LENTO_OP_SETATTR:
		r->attr.valid = LENTO_A_MODE | LENTO_A_MTIME;
		r->attr.mode = 0600;
		r->attr.mtime_ns = 42;
		break;
	case LENTO_OP_SETXATTR:
		strcpy(r->name, "user.comment");
		r->data = value;
		r->data_len = v == 4 ? 1000 : 3;
		break;
	case LENTO_OP_REMOVEXATTR:
		strcpy(r->name, "security.selinux");
		break;
	case LENTO_OP_STORE:
		r->attr.valid = LENTO_A_SIZE | LENTO_A_MTIME;
		r->attr.size = 5000 + v;
		break;
	case LENTO_OP_PRUNEXATTRS:
		r->data = "user.comment\0system.posix_acl_access";
		r->data_len = v == 4 ? 0 : 37;
		break;
	}
}

/* Variant @v's batch: which ops, in @recs; returns how many. */
static uint32_t sbatch(struct lento_rec *recs, unsigned int v)
{
	static const uint16_t only[NV] = {
		0, 0, LENTO_OP_STORE, LENTO_OP_RENAME, LENTO_OP_SETXATTR,
		LENTO_OP_SYMLINK,
	};
	uint32_t n = 0;

	for (uint16_t op = LENTO_OP_CREATE; op <= LENTO_OP_LAST; op++) {
		if (only[v] ? op != only[v] : v == 1 && op == LENTO_OP_STORE)
			continue;
		srec(&recs[n], op, 41 + n, v);
		n++;
	}
	return n;
}

static const uint32_t codes[] = {
	LP_ENOSPC, LP_EDQUOT, LP_ENOPERMIT, LP_ESTALE, LP_EPROTONOSUPPORT,
	LP_EACCES,
};

static char msg_max[LP_MSG_MAX + 1];

static void sample_getattr_reply(struct lp_buf *b, uint32_t tag,
				 unsigned int v)
{
	static const char *const names[] = { "user.a", "security.selinux",
					     "trusted.x", "system.posix_acl" };
	struct lp_getattr_reply m;
	char xnames[LENTO_XATTRS_MAX][16];

	memset(&m, 0, sizeof(m));
	m.st = sstatus(v, v % 3 ? LENTO_T_REG : LENTO_T_SYMLINK);
	if (m.st.type == LENTO_T_SYMLINK) {
		m.target = long_target;
		m.target_len = v == 3 ? LENTO_SYMLINK_MAX : 7;
	}
	m.nxattr = v == 4 ? LENTO_XATTRS_MAX : v % 4;
	for (uint32_t i = 0; i < m.nxattr; i++) {
		snprintf(xnames[i], sizeof(xnames[i]), "%s", names[i % 4]);
		if (i >= 4)
			snprintf(xnames[i], sizeof(xnames[i]), "user.%u", i);
		m.xattr[i].name = xnames[i];
		m.xattr[i].name_len = (uint32_t)strlen(xnames[i]);
		m.xattr[i].value = value;
		m.xattr[i].value_len = i % 3 ? 10 + i : 0;
	}
	MUST(lp_encode_getattr_reply(b, tag, &m));
}

static void sample_readdir_reply(struct lp_buf *b, uint32_t tag,
				 unsigned int v)
{
	struct lp_readdir_reply m;
	struct lp_dirent d[10];
	uint32_t n = v * 2;

	memset(&m, 0, sizeof(m));
	m.dir = sstatus(v, LENTO_T_DIR);
	m.first = v == 4 ? 5 : 0;
	m.total = m.first + n + (v == 5 ? 10 : 0);
	for (uint32_t i = 0; i < n; i++)
		sdirent(&d[i], v, i);
	MUST(lp_encode_readdir_reply(b, tag, &m, d, n));
}

static void sample_data(struct lp_buf *b, uint32_t tag, unsigned int v)
{
	static uint8_t raw[4000];
	struct lp_data d = { .rec = v == 4 ? 3 : 0, .flags = LP_DATA_LAST };
	uint32_t n = (uint32_t[]){ 0, 100, 3000, 2000, 10, 4000 }[v];

	for (uint32_t i = 0; i < n; i++)
		raw[i] = v == 3 ? (uint8_t)rnd() : (uint8_t)("lento "[i % 6]);
	if (v == 2 || v == 5) {
		d.flags = 0;
		d.offset = (uint64_t)v << 20;
		d.more = true;
	}
	MUST(lp_encode_data(b, tag, &d, raw, n));
}

static void sample_volume_validate(struct lp_buf *b, unsigned int type,
				   uint32_t tag, unsigned int v)
{
	struct lp_volstamp s[16];
	uint32_t n = 1 + v * 3;

	for (uint32_t i = 0; i < n; i++)
		s[i] = (struct lp_volstamp){ 1 + i, 77 + v * i,
					     type == LP_VOLUME_VALIDATE ?
					     0 : (uint8_t)(i % 3) };
	if (type == LP_VOLUME_VALIDATE)
		MUST(lp_encode_volume_validate(b, tag, s, n));
	else
		MUST(lp_encode_volume_validate_reply(b, tag, s, n));
}

static void sample_validate(struct lp_buf *b, unsigned int type,
			    uint32_t tag, unsigned int v)
{
	struct lp_fidvv fv[16];
	uint8_t res[32];
	uint32_t n = 1 + v * 2;

	memset(fv, 0, sizeof(fv));
	for (uint32_t i = 0; i < n; i++) {
		fv[i].fid = sfid(v + i);
		fv[i].vv = svv(v + i);
		res[i] = (uint8_t)(i % 2);
	}
	if (type == LP_VALIDATE)
		MUST(lp_encode_validate(b, tag, fv, n));
	else
		MUST(lp_encode_validate_reply(b, tag, res, n));
}

static void sample_reintegrate(struct lp_buf *b, uint32_t tag,
			       unsigned int v)
{
	struct lento_rec recs[LENTO_OP_LAST];
	struct lp_reint m = { .volume = 7 + v, .client = 1 + v };

	MUST(lp_encode_reintegrate(b, tag, &m, recs, sbatch(recs, v)));
}

static void sample_reint_reply(struct lp_buf *b, uint32_t tag,
			       unsigned int v)
{
	struct lp_reint_reply m;
	struct lp_fidvv fv[8];
	uint32_t n = v == 0 ? 5 : v == 5 ? 1 : 0;

	memset(&m, 0, sizeof(m));
	memset(fv, 0, sizeof(fv));
	m.applied = 40 + v;
	m.stamp = 9000 + v;
	m.index = LP_NO_INDEX;
	if (v == 1 || v == 4) {
		m.code = LP_ECONFLICT;
		m.index = v;
		m.fid = sfid(v);
		m.base = svv(v);
		m.current = svv(v + 1);
		m.msg = "base version is not current";
	} else if (v) {
		m.code = codes[v];
		m.index = v == 3 ? LP_NO_INDEX : 2;
		m.msg = v == 2 ? msg_max : "refused";
	}
	for (uint32_t i = 0; i < n; i++) {
		fv[i].fid = sfid(i);
		fv[i].vv = svv(i + 1);
	}
	MUST(lp_encode_reintegrate_reply(b, tag, &m, fv, n));
}

static void sample_hello(struct lp_buf *b, uint32_t tag, unsigned int v)
{
	struct lp_hello m = { .vmin = 1, .vmax = (uint16_t)(1 + v % 2),
			      .client = v, .auth = value,
			      .auth_len = v == 5 ? LP_AUTH_MAX : v * 10 };

	for (int i = 0; i < 16; i++)
		m.uuid[i] = (uint8_t)(v * 16 + i + 1);
	MUST(lp_encode_hello(b, tag, &m));
}

static void sample_hello_reply(struct lp_buf *b, uint32_t tag, unsigned int v)
{
	struct lp_hello_reply m = {
		.version = LP_VERSION_MAX, .client = 1 + v, .epoch = 0x123456789aULL + v,
		.heartbeat_ms = v == 5 ? LP_HEARTBEAT_MAX_MS : LP_PING_MS,
		.auth = value, .auth_len = v * 7,
	};

	MUST(lp_encode_hello_reply(b, tag, &m));
}

static void sample_more(struct lp_buf *b, unsigned int type, uint32_t tag,
			unsigned int v)
{
	static const char *const volnames[NV] = {
		"home", "web-site", "a", "0123456789012345678901234567890123456789012345678901234567890123",
		"repo.debian", "x y~z",
	};
	struct lento_fid fid = sfid(v);
	struct lp_fetch fetch = { fid, svv(v) };
	struct lp_fetch_reply fr = { sstatus(v, LENTO_T_REG), v * 1000ULL };
	struct lp_volume vol = { 7 + v, LENTO_ROOT_FID(7 + v), 55 + v };
	struct lp_permit permit = { 7 + v, v * 30000 };

	switch (type) {
	case LP_PING:
	case LP_PONG:
		MUST(lp_encode_ping(b, type, tag, v * 0x0101010101010101ULL));
		break;
	case LP_ERROR:
		MUST(lp_encode_error(b, tag, codes[v], v == 5 ? msg_max :
				     v ? "no space left on the volume" : NULL));
		break;
	case LP_GETATTR:
	case LP_READDIR:
	case LP_BREAK:
		MUST(lp_encode_fid(b, type, tag, &fid));
		break;
	case LP_FETCH:
		MUST(lp_encode_fetch(b, tag, &fetch));
		break;
	case LP_FETCH_REPLY:
		MUST(lp_encode_fetch_reply(b, tag, &fr));
		break;
	case LP_VOLUME_LOOKUP:
		MUST(lp_encode_volume_lookup(b, tag, volnames[v]));
		break;
	case LP_VOLUME_LOOKUP_REPLY:
		MUST(lp_encode_volume_lookup_reply(b, tag, &vol));
		break;
	case LP_PERMIT_REPLY:
		MUST(lp_encode_permit_reply(b, tag, &permit));
		break;
	default:
		MUST(lp_encode_volume(b, type, tag, 7 + v));
	}
}

/* Variant @v (< NV) of a valid frame of @type, appended to @b. */
static void sample(struct lp_buf *b, unsigned int type, unsigned int v)
{
	uint32_t tag = lp_type_kind(type) == LP_K_PUSH ? 0 : 1 + v * 1000;

	switch (type) {
	case LP_HELLO:
		return sample_hello(b, tag, v);
	case LP_HELLO_REPLY:
		return sample_hello_reply(b, tag, v);
	case LP_GETATTR_REPLY:
		return sample_getattr_reply(b, tag, v);
	case LP_READDIR_REPLY:
		return sample_readdir_reply(b, tag, v);
	case LP_DATA:
		return sample_data(b, tag, v);
	case LP_VOLUME_VALIDATE:
	case LP_VOLUME_VALIDATE_REPLY:
		return sample_volume_validate(b, type, tag, v);
	case LP_VALIDATE:
	case LP_VALIDATE_REPLY:
		return sample_validate(b, type, tag, v);
	case LP_REINTEGRATE:
		return sample_reintegrate(b, tag, v);
	case LP_REINTEGRATE_REPLY:
		return sample_reint_reply(b, tag, v);
	}
	sample_more(b, type, tag, v);
}

/* ------------------------------------------------------- helpers */

static struct lp_buf b;

static void setup(void)
{
	fill_statics();
	memset(msg_max, 'm', LP_MSG_MAX);
	memset(&b, 0, sizeof(b));
}

static void teardown(void)
{
	lp_buf_free(&b);
}

/* The one frame in b (from @at): parsed whole. */
static struct lp_frame frame_at(size_t at)
{
	struct lp_frame f;
	const char *why = NULL;

	ck_assert_int_eq(lp_frame_parse(b.p + at, b.len - at, &f, &why),
			 (ssize_t)(b.len - at));
	return f;
}

/* Why the frame in b's bytes is refused (NULL if it is not). */
static const char *verdict(void)
{
	struct lp_frame f;
	const char *why = NULL;
	ssize_t got = lp_frame_parse(b.p, b.len, &f, &why);

	if (got < 0)
		return why;
	ck_assert_int_eq(got, (ssize_t)b.len);
	return lp_frame_check(&f, &why) ? why : NULL;
}

#define ck_refused(reason) do {						\
	const char *w_ = verdict();					\
	ck_assert_msg(w_ && strstr(w_, reason),				\
		      "expected \"%s\", got \"%s\"", reason,		\
		      w_ ? w_ : "(accepted)");				\
} while (0)

/* An encoder call refused as @reason, leaving b as it was. */
#define ck_enc_refused(call, reason) do {				\
	size_t len_ = b.len;						\
	int err_ = (call);						\
	ck_assert_msg(err_ == -EINVAL, "%s: %d", #call, err_);		\
	ck_assert_msg(b.why && strstr(b.why, reason),			\
		      "expected \"%s\", got \"%s\"", reason, b.why);	\
	ck_assert_uint_eq(b.len, len_);					\
} while (0)

static void set_len(uint32_t body)
{
	b.len = LP_HDR_SIZE + body;
	b.p[0] = (uint8_t)body;
	b.p[1] = (uint8_t)(body >> 8);
	b.p[2] = (uint8_t)(body >> 16);
	b.p[3] = (uint8_t)(body >> 24);
}

static uint8_t *body_at(size_t off)
{
	return b.p + LP_HDR_SIZE + off;
}

static void put32_at(size_t off, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		body_at(off)[i] = (uint8_t)(v >> 8 * i);
}

static void put16_at(size_t off, uint16_t v)
{
	body_at(off)[0] = (uint8_t)v;
	body_at(off)[1] = (uint8_t)(v >> 8);
}

static void put64_at(size_t off, uint64_t v)
{
	put32_at(off, (uint32_t)v);
	put32_at(off + 4, (uint32_t)(v >> 32));
}

static void set_flags(uint16_t flags)
{
	b.p[6] = (uint8_t)flags;
	b.p[7] = (uint8_t)(flags >> 8);
}

/* Bytes of an encoded status with @n counters, and where fields are. */
#define ST_LEN(n)	(90 + 8 * (n))
#define ST_TYPE		16
#define ST_VALID	21
#define ST_MODE		25
#define ST_SIZE		37
#define ST_VVN		77

/* Field by field: structs have padding memcmp would compare. */
static void ck_vv_eq(const struct lento_vv *a, const struct lento_vv *b)
{
	ck_assert_uint_eq(a->n, b->n);
	for (uint32_t i = 0; i < a->n; i++)
		ck_assert_uint_eq(a->v[i], b->v[i]);
	ck_assert_uint_eq(a->store.client, b->store.client);
	ck_assert_uint_eq(a->store.seq, b->store.seq);
}

static void ck_fid_eq(const struct lento_fid *a, const struct lento_fid *b)
{
	ck_assert_msg(lento_fid_eq(a, b), "fid %u:%u:%lu, not %u:%u:%lu",
		      a->volume, a->client, (unsigned long)a->seq, b->volume,
		      b->client, (unsigned long)b->seq);
}

static void ck_attr_eq(const struct lento_attr *a, const struct lento_attr *b)
{
	ck_assert_uint_eq(a->valid, b->valid);
	ck_assert_uint_eq(a->mode, b->mode);
	ck_assert_uint_eq(a->uid, b->uid);
	ck_assert_uint_eq(a->gid, b->gid);
	ck_assert_uint_eq(a->size, b->size);
	ck_assert_int_eq(a->atime_ns, b->atime_ns);
	ck_assert_int_eq(a->mtime_ns, b->mtime_ns);
	ck_assert_int_eq(a->ctime_ns, b->ctime_ns);
	ck_assert_uint_eq(a->rdev, b->rdev);
}

static void ck_status_eq(const struct lento_status *a,
			 const struct lento_status *b)
{
	ck_fid_eq(&a->fid, &b->fid);
	ck_assert_uint_eq(a->type, b->type);
	ck_assert_uint_eq(a->nlink, b->nlink);
	ck_attr_eq(&a->attr, &b->attr);
	ck_vv_eq(&a->vv, &b->vv);
}

static void ck_rec_eq(const struct lento_rec *a, const struct lento_rec *b)
{
	ck_assert_uint_eq(a->recno, b->recno);
	ck_assert_uint_eq(a->op, b->op);
	ck_assert_uint_eq(a->flags, b->flags);
	ck_assert_uint_eq(a->uid, b->uid);
	ck_assert_uint_eq(a->gid, b->gid);
	ck_assert_int_eq(a->time_ns, b->time_ns);
	ck_fid_eq(&a->dir, &b->dir);
	ck_fid_eq(&a->obj, &b->obj);
	ck_fid_eq(&a->dir2, &b->dir2);
	ck_fid_eq(&a->target, &b->target);
	ck_vv_eq(&a->base_dir, &b->base_dir);
	ck_vv_eq(&a->base_obj, &b->base_obj);
	ck_vv_eq(&a->base_dir2, &b->base_dir2);
	ck_vv_eq(&a->base_target, &b->base_target);
	ck_assert_uint_eq(a->type, b->type);
	ck_attr_eq(&a->attr, &b->attr);
	ck_assert_str_eq(a->name, b->name);
	ck_assert_str_eq(a->name2, b->name2);
	ck_assert_uint_eq(a->data_len, b->data_len);
	if (a->data_len)
		ck_assert_mem_eq(a->data, b->data, a->data_len);
	ck_assert_uint_eq(a->ngroups, b->ngroups);
	if (a->ngroups)
		ck_assert_mem_eq(a->groups, b->groups, 4 * (size_t)a->ngroups);
}

/* ------------------------------------------------ every sample */

/* Every sample decodes, and encodes again to the same bytes. */
START_TEST(samples_round_trip)
{
	unsigned int type = all_types[_i / NV], v = _i % NV;
	struct lp_buf again = { 0 };
	struct lp_frame f;
	const char *why = NULL;
	enum lp_rt rt;

	sample(&b, type, v);
	f = frame_at(0);
	ck_assert_uint_eq(f.type, type);
	ck_assert_int_eq(lp_frame_check(&f, &why), 0);
	rt = lp_roundtrip(&f, &again, &why);
	ck_assert_msg(rt != LP_RT_BAD, "%s: %s", lp_type_name(type), why);
	if (rt == LP_RT_SAME) {
		ck_assert_uint_eq(again.len, b.len);
		ck_assert_mem_eq(again.p, b.p, b.len);
	} else {
		ck_assert_int_eq(rt, LP_RT_DATA);
	}
	lp_buf_free(&again);
}
END_TEST

/*
 * A frame cut anywhere is not a frame yet; a body cut anywhere (its
 * length made to match) is refused, and so is one byte too many.
 */
START_TEST(samples_truncated)
{
	unsigned int type = all_types[_i / NV], v = _i % NV;
	struct lp_frame f;
	const char *why;
	size_t whole;

	sample(&b, type, v);
	whole = b.len;
	for (size_t k = 0; k < whole; k++)
		ck_assert_int_eq(lp_frame_parse(b.p, k, &f, &why), 0);
	for (uint32_t k = 0; k < whole - LP_HDR_SIZE; k++) {
		set_len(k);
		ck_assert_msg(verdict(), "%s cut to %u bytes accepted",
			      lp_type_name(type), k);
	}
	if (b.cap < whole + 1) {
		b.p = realloc(b.p, whole + 1);
		ck_assert_ptr_nonnull(b.p);
		b.cap = whole + 1;
	}
	b.p[whole] = 0;
	set_len((uint32_t)(whole + 1 - LP_HDR_SIZE));
	ck_refused("trailing bytes");
}
END_TEST

/* The frames a session would carry, back to back, split one by one. */
START_TEST(stream_of_frames)
{
	struct lp_frame f;
	const char *why;
	size_t at = 0, n = 0;
	ssize_t got;

	for (unsigned int i = 0; i < NTYPES; i++)
		sample(&b, all_types[i], 2);
	while ((got = lp_frame_parse(b.p + at, b.len - at, &f, &why)) > 0) {
		ck_assert_uint_eq(f.type, all_types[n]);
		ck_assert_int_eq(lp_frame_check(&f, &why), 0);
		at += (size_t)got;
		n++;
	}
	ck_assert_int_eq(got, 0);
	ck_assert_uint_eq(at, b.len);
	ck_assert_uint_eq(n, NTYPES);
}
END_TEST

/* -------------------------------------------- field round trips */

START_TEST(hello_round_trip)
{
	struct lp_hello m = { .vmin = 1, .vmax = LP_VERSION_MAX, .client = 42,
			      .auth = (const uint8_t *)"", .auth_len = 0 }, d;
	struct lp_hello_reply r = { .version = LP_VERSION_MAX, .client = 42, .epoch = 99,
				    .heartbeat_ms = LP_PING_MS }, dr;
	struct lp_frame f;
	const char *why;

	memset(m.uuid, 0xab, 16);
	ck_assert_int_eq(lp_encode_hello(&b, 5, &m), 0);
	ck_assert_uint_eq(b.len, LP_HDR_SIZE + 40);
	ck_assert_mem_eq(b.p + LP_HDR_SIZE, LP_MAGIC, 8);
	f = frame_at(0);
	ck_assert_uint_eq(f.tag, 5);
	ck_assert_int_eq(lp_decode_hello(&f, &d, &why), 0);
	ck_assert_uint_eq(d.vmin, 1);
	ck_assert_uint_eq(d.vmax, LP_VERSION_MAX);
	ck_assert_uint_eq(d.client, 42);
	ck_assert_mem_eq(d.uuid, m.uuid, 16);
	ck_assert_uint_eq(d.auth_len, 0);
	ck_assert_uint_eq(lp_negotiate(&d), LP_VERSION_MAX);
	/* A decoder of one type refuses the frames of another. */
	ck_assert_int_eq(lp_decode_hello_reply(&f, &dr, &why), -EBADMSG);
	ck_assert_str_eq(why, "frame is not of the type decoded");

	b.len = 0;
	ck_assert_int_eq(lp_encode_hello_reply(&b, 5, &r), 0);
	f = frame_at(0);
	ck_assert_int_eq(lp_decode_hello_reply(&f, &dr, &why), 0);
	ck_assert_uint_eq(dr.version, LP_VERSION_MAX);
	ck_assert_uint_eq(dr.client, 42);
	ck_assert_uint_eq(dr.epoch, 99);
	ck_assert_uint_eq(dr.heartbeat_ms, LP_PING_MS);
}
END_TEST

START_TEST(negotiation)
{
	struct lp_hello m = { .vmin = 1, .vmax = 1 };

	/* Version 1 listed no xattrs: its peers are not spoken to. */
	ck_assert_uint_eq(lp_negotiate(&m), 0);
	/* Version 3's records carried no groups. */
	m.vmax = 3;
	ck_assert_uint_eq(lp_negotiate(&m), 0);
	m.vmax = LP_VERSION_MAX;
	ck_assert_uint_eq(lp_negotiate(&m), LP_VERSION_MAX);
	m.vmax = 7;
	ck_assert_uint_eq(lp_negotiate(&m), LP_VERSION_MAX);
	m.vmin = LP_VERSION_MAX + 1;
	ck_assert_uint_eq(lp_negotiate(&m), 0);
}
END_TEST

START_TEST(getattr_round_trip)
{
	struct lp_getattr_reply m, d;
	struct lp_frame f;
	const char *why;

	memset(&m, 0, sizeof(m));
	m.st = sstatus(3, LENTO_T_SYMLINK);
	m.st.vv = svv(LENTO_VV_MAX);
	m.target = "../some/where";
	m.target_len = 13;
	m.nxattr = 2;
	m.xattr[0] = (struct lp_xattr){ "user.a", 6, "1\0002", 3 };
	m.xattr[1] = (struct lp_xattr){ "user.empty", 10, "", 0 };
	ck_assert_int_eq(lp_encode_getattr_reply(&b, 9, &m), 0);
	f = frame_at(0);
	ck_assert_int_eq(lp_decode_getattr_reply(&f, &d, &why), 0);
	ck_status_eq(&d.st, &m.st);
	ck_assert_uint_eq(d.target_len, 13);
	ck_assert_mem_eq(d.target, "../some/where", 13);
	ck_assert_uint_eq(d.nxattr, 2);
	ck_assert_uint_eq(d.xattr[0].name_len, 6);
	ck_assert_mem_eq(d.xattr[0].name, "user.a", 6);
	ck_assert_uint_eq(d.xattr[0].value_len, 3);
	ck_assert_mem_eq(d.xattr[0].value, "1\0002", 3);
	ck_assert_uint_eq(d.xattr[1].value_len, 0);
}
END_TEST

/* The largest GETATTR_REPLY: every xattr at its largest. */
START_TEST(getattr_largest)
{
	static char names[LENTO_XATTRS_MAX][LENTO_XATTR_NAME_MAX + 1];
	struct lp_getattr_reply m, d;
	struct lp_frame f;
	const char *why;

	memset(&m, 0, sizeof(m));
	m.st = sstatus(1, LENTO_T_REG);
	m.nxattr = LENTO_XATTRS_MAX;
	for (uint32_t i = 0; i < m.nxattr; i++) {
		memset(names[i], 'a' + i % 26, LENTO_XATTR_NAME_MAX);
		names[i][0] = (char)('0' + i / 26);
		m.xattr[i] = (struct lp_xattr){ names[i], LENTO_XATTR_NAME_MAX,
						value, LENTO_XATTR_SIZE_MAX };
	}
	ck_assert_int_eq(lp_encode_getattr_reply(&b, 9, &m), 0);
	ck_assert_uint_le(b.len, LP_HDR_SIZE + LP_FRAME_MAX);
	f = frame_at(0);
	ck_assert_int_eq(lp_decode_getattr_reply(&f, &d, &why), 0);
	ck_assert_uint_eq(d.nxattr, LENTO_XATTRS_MAX);
	ck_assert_mem_eq(d.xattr[63].value, value, LENTO_XATTR_SIZE_MAX);
}
END_TEST

/* A decoded list of xattrs is @want[0, n), in order. */
static void ck_xattrs_eq(struct lp_list *l, uint32_t got,
			 const struct lp_xattr *want, uint32_t n)
{
	struct lp_xattr x;
	uint32_t i = 0;

	ck_assert_uint_eq(got, n);
	while (lp_next_xattr(l, &x) == 1) {
		ck_assert_uint_lt(i, n);
		ck_assert_uint_eq(x.name_len, want[i].name_len);
		ck_assert_mem_eq(x.name, want[i].name, x.name_len);
		ck_assert_uint_eq(x.value_len, want[i].value_len);
		if (x.value_len)
			ck_assert_mem_eq(x.value, want[i].value, x.value_len);
		i++;
	}
	ck_assert_uint_eq(i, n);
}

START_TEST(readdir_round_trip)
{
	struct lp_readdir_reply m, d;
	struct lp_dirent in[7], out;
	struct lp_frame f;
	const char *why;
	uint32_t i = 0;

	memset(&m, 0, sizeof(m));
	m.dir = sstatus(1, LENTO_T_DIR);
	m.total = 7;
	m.dir_nxattr = 2;
	m.dir_xattr = sxattrs;
	for (uint32_t k = 0; k < 7; k++)
		sdirent(&in[k], 3, k);
	ck_assert_int_eq(lp_encode_readdir_reply(&b, 3, &m, in, 7), 7);
	f = frame_at(0);
	ck_assert_uint_eq(f.flags, 0);
	ck_assert_int_eq(lp_decode_readdir_reply(&f, &d, &why), 0);
	ck_status_eq(&d.dir, &m.dir);
	ck_assert_uint_eq(d.total, 7);
	ck_assert_uint_eq(d.first, 0);
	ck_assert_uint_eq(d.count, 7);
	ck_assert(!d.more);
	ck_xattrs_eq(&d.dir_xattrs, d.dir_nxattr, sxattrs, 2);
	while (lp_next_dirent(&d.ents, &out) == 1) {
		ck_assert_str_eq(out.de.name, in[i].de.name);
		ck_status_eq(&out.de.st, &in[i].de.st);
		ck_assert_uint_eq(out.target_len, in[i].target_len);
		if (out.target_len)
			ck_assert_mem_eq(out.target, in[i].target,
					 out.target_len);
		ck_assert_ptr_null(out.xattr);
		ck_xattrs_eq(&out.xattrs, out.nxattr, in[i].xattr,
			     in[i].nxattr);
		i++;
	}
	ck_assert_uint_eq(i, 7);
	/* A cursor reads only the items of its own kind. */
	struct lp_fidvv fv;

	d.ents.left = 1;
	ck_assert_int_eq(lp_next_fidvv(&d.ents, &fv), -EINVAL);
}
END_TEST

/*
 * A directory of 100,000 entries: frames of about LP_SPLIT_TARGET, the
 * whole listing across them, in order, checked frame by frame.
 */
START_TEST(readdir_100k)
{
	const uint32_t total = 100000;
	struct lp_dirent *ents = calloc(total, sizeof(*ents)), d;
	struct lp_readdir_reply m, r;
	uint32_t done = 0, frames = 0, seen = 0;
	struct lp_frame f;
	const char *why;
	size_t at = 0;
	ssize_t got;
	int n;

	ck_assert_ptr_nonnull(ents);
	memset(&m, 0, sizeof(m));
	m.dir = sstatus(0, LENTO_T_DIR);
	m.total = total;
	for (uint32_t i = 0; i < total; i++) {
		snprintf(ents[i].de.name, sizeof(ents[i].de.name),
			 "file-%07u.c", i);
		ents[i].de.st = sstatus(i, LENTO_T_REG);
	}
	do {
		m.first = done;
		n = lp_encode_readdir_reply(&b, 77, &m, ents + done,
					    total - done);
		ck_assert_int_gt(n, 0);
		done += (uint32_t)n;
	} while (done < total);
	while ((got = lp_frame_parse(b.p + at, b.len - at, &f, &why)) > 0) {
		ck_assert_uint_le(f.len, LP_SPLIT_TARGET + 512);
		ck_assert_int_eq(lp_decode_readdir_reply(&f, &r, &why), 0);
		ck_assert_uint_eq(r.first, seen);
		ck_assert(r.more == (seen + r.count < total));
		while (lp_next_dirent(&r.ents, &d) == 1) {
			ck_assert_uint_eq(d.de.st.fid.seq, 100 + seen);
			seen++;
		}
		frames++;
		at += (size_t)got;
	}
	ck_assert_uint_eq(seen, total);
	ck_assert_uint_gt(frames, 5);
	free(ents);
}
END_TEST

START_TEST(fetch_round_trip)
{
	struct lp_fetch m = { sfid(1), svv(2) }, d;
	struct lp_fetch_reply r = { sstatus(1, LENTO_T_REG), 1000 }, dr;
	struct lp_frame f;
	const char *why;

	ck_assert_int_eq(lp_encode_fetch(&b, 3, &m), 0);
	f = frame_at(0);
	ck_assert_int_eq(lp_decode_fetch(&f, &d, &why), 0);
	ck_fid_eq(&d.fid, &m.fid);
	ck_vv_eq(&d.expect, &m.expect);
	b.len = 0;
	ck_assert_int_eq(lp_encode_fetch_reply(&b, 3, &r), 0);
	f = frame_at(0);
	ck_assert_uint_eq(f.flags, LP_F_MORE);
	ck_assert_int_eq(lp_decode_fetch_reply(&f, &dr, &why), 0);
	ck_status_eq(&dr.st, &r.st);
	ck_assert_uint_eq(dr.size, r.size);
}
END_TEST

/*
 * A body of 2.5 MiB fetched: a reply header and three chunks, which the
 * stream check accepts and which decompress to the body.
 */
START_TEST(fetch_body)
{
	const uint64_t size = 5 * LP_CHUNK_MAX / 2;
	uint8_t *body = malloc(size), *got = malloc(size);
	struct lp_fetch_reply r = { sstatus(1, LENTO_T_REG), size }, dr;
	struct lp_stream s;
	struct lp_frame f;
	struct lp_data d;
	const char *why;
	void *zd = NULL;
	size_t at = 0;
	int last = 0;

	ck_assert_ptr_nonnull(body);
	ck_assert_ptr_nonnull(got);
	for (uint64_t i = 0; i < size; i++)
		body[i] = (uint8_t)(i % 251 < 100 ? rnd() : i);
	r.st.attr.size = size;
	ck_assert_int_eq(lp_encode_fetch_reply(&b, 8, &r), 0);
	for (uint64_t off = 0; off < size; off += LP_CHUNK_MAX) {
		uint32_t n = (uint32_t)(size - off < LP_CHUNK_MAX ?
					size - off : LP_CHUNK_MAX);
		struct lp_data c = { .offset = off,
				     .flags = off + n == size ? LP_DATA_LAST : 0,
				     .more = off + n < size };

		ck_assert_int_eq(lp_encode_data(&b, 8, &c, body + off, n), 0);
	}
	ck_assert_int_eq(lp_frame_parse(b.p, b.len, &f, &why) > 0, 1);
	ck_assert_int_eq(lp_decode_fetch_reply(&f, &dr, &why), 0);
	at = LP_HDR_SIZE + f.len;
	lp_stream_init(&s, 0, dr.size, true);
	while (!last) {
		at += (size_t)lp_frame_parse(b.p + at, b.len - at, &f, &why);
		ck_assert_int_eq(lp_decode_data(&f, &d, &why), 0);
		last = lp_stream_data(&s, &d, &why);
		ck_assert_int_ge(last, 0);
		/* One context for every chunk, as lento keeps one. */
		ck_assert_int_eq(lp_chunk_decompress(&d, got + d.offset,
						     size - d.offset, &why,
						     &zd), 0);
		ck_assert_ptr_nonnull(zd);
	}
	ck_assert_uint_eq(at, b.len);
	ck_assert_mem_eq(got, body, size);
	/* Nothing may follow a complete body. */
	ck_assert_int_eq(lp_stream_data(&s, &d, &why), -EBADMSG);
	lp_zd_free(&zd);
	ck_assert_ptr_null(zd);
	free(body);
	free(got);
}
END_TEST

/* An empty file: one empty chunk, LAST. */
START_TEST(empty_body)
{
	struct lp_data c = { .flags = LP_DATA_LAST }, d;
	struct lp_stream s;
	struct lp_frame f;
	const char *why;
	uint8_t one;

	ck_assert_int_eq(lp_encode_data(&b, 8, &c, NULL, 0), 0);
	f = frame_at(0);
	ck_assert_int_eq(lp_decode_data(&f, &d, &why), 0);
	lp_stream_init(&s, 0, 0, true);
	ck_assert_int_eq(lp_stream_data(&s, &d, &why), 1);
	ck_assert_int_eq(lp_chunk_decompress(&d, &one, 0, &why, NULL), 0);
}
END_TEST

/* The stream check, one rule broken per index. */
START_TEST(stream_rules)
{
	struct lp_data d = { .rec = 2, .raw_len = 100, .more = true };
	struct lp_stream s;
	const char *why;
	const char *reason;

	lp_stream_init(&s, 2, 300, true);
	ck_assert_int_eq(lp_stream_data(&s, &d, &why), 0);
	d.offset = 100;
	switch (_i) {
	case 0:
		d.rec = 3;
		reason = "another record";
		break;
	case 1:
		d.offset = 150;
		reason = "offset due";
		break;
	case 2:
		d.raw_len = 201;
		reason = "past the body's size";
		break;
	case 3:
		d.flags = LP_DATA_LAST;
		reason = "LAST flag";
		break;
	case 4:
		d.raw_len = 200;	/* the last chunk: LAST, no MORE */
		d.flags = LP_DATA_LAST;
		reason = "MORE flag";
		break;
	case 5:
		d.raw_len = 0;
		reason = "empty chunk";
		break;
	default:		/* not the final body: MORE after it too */
		lp_stream_init(&s, 2, 100, false);
		d.offset = 0;
		d.flags = LP_DATA_LAST;
		d.more = false;
		reason = "MORE flag";
		break;
	}
	ck_assert_int_eq(lp_stream_data(&s, &d, &why), -EBADMSG);
	ck_assert_msg(strstr(why, reason), "%s", why);
}
END_TEST

START_TEST(volume_round_trip)
{
	struct lp_volume v = { 9, LENTO_ROOT_FID(9), 1234 }, dv;
	struct lp_volstamp in[3] = { { 1, 10, 0 }, { 2, 20, 1 }, { 3, 30, 2 } };
	struct lp_volstamp out;
	char name[LENTO_VOLNAME_MAX + 1];
	struct lp_list l;
	struct lp_frame f;
	const char *why;
	uint32_t vol, i = 0;

	ck_assert_int_eq(lp_encode_volume_lookup(&b, 1, "home"), 0);
	f = frame_at(0);
	ck_assert_int_eq(lp_decode_volume_lookup(&f, name, &why), 0);
	ck_assert_str_eq(name, "home");
	b.len = 0;
	ck_assert_int_eq(lp_encode_volume_lookup_reply(&b, 1, &v), 0);
	f = frame_at(0);
	ck_assert_int_eq(lp_decode_volume_lookup_reply(&f, &dv, &why), 0);
	ck_assert_uint_eq(dv.volume, 9);
	ck_fid_eq(&dv.root, &v.root);
	ck_assert_uint_eq(dv.stamp, 1234);
	b.len = 0;
	ck_assert_int_eq(lp_encode_volume_validate_reply(&b, 1, in, 3), 0);
	f = frame_at(0);
	ck_assert_int_eq(lp_decode_volume_validate(&f, &l, &why), 0);
	while (lp_next_volstamp(&l, &out) == 1) {
		ck_assert_uint_eq(out.volume, in[i].volume);
		ck_assert_uint_eq(out.stamp, in[i].stamp);
		ck_assert_uint_eq(out.result, in[i].result);
		i++;
	}
	ck_assert_uint_eq(i, 3);
	b.len = 0;
	ck_assert_int_eq(lp_encode_volume(&b, LP_PERMIT_REVOKE, 0, 9), 0);
	f = frame_at(0);
	ck_assert_int_eq(lp_decode_volume(&f, &vol, &why), 0);
	ck_assert_uint_eq(vol, 9);
}
END_TEST

START_TEST(validate_round_trip)
{
	struct lp_fidvv in[3], out;
	struct lp_validate_reply r;
	const uint8_t res[3] = { LP_OBJ_VALID, LP_OBJ_CHANGED, LP_OBJ_VALID };
	struct lp_list l;
	struct lp_frame f;
	const char *why;
	uint32_t i = 0;

	memset(in, 0, sizeof(in));
	for (int k = 0; k < 3; k++) {
		in[k].fid = sfid(k);
		in[k].vv = svv(k * 3);
	}
	ck_assert_int_eq(lp_encode_validate(&b, 1, in, 3), 0);
	f = frame_at(0);
	ck_assert_int_eq(lp_decode_validate(&f, &l, &why), 0);
	while (lp_next_fidvv(&l, &out) == 1) {
		ck_fid_eq(&out.fid, &in[i].fid);
		ck_vv_eq(&out.vv, &in[i].vv);
		i++;
	}
	ck_assert_uint_eq(i, 3);
	b.len = 0;
	ck_assert_int_eq(lp_encode_validate_reply(&b, 1, res, 3), 0);
	f = frame_at(0);
	ck_assert_int_eq(lp_decode_validate_reply(&f, &r, &why), 0);
	ck_assert_uint_eq(r.count, 3);
	ck_assert_mem_eq(r.result, res, 3);
}
END_TEST

/* A list too large for one frame is refused, not cut. */
START_TEST(validate_too_large)
{
	struct lp_fidvv *v = calloc(LP_LIST_MAX, sizeof(*v));

	ck_assert_ptr_nonnull(v);
	for (uint32_t i = 0; i < LP_LIST_MAX; i++) {
		v[i].fid = sfid(i);
		v[i].vv = svv(LENTO_VV_MAX);
	}
	ck_assert_int_eq(lp_encode_validate(&b, 1, v, LP_LIST_MAX), -EMSGSIZE);
	ck_assert_uint_eq(b.len, 0);
	ck_assert_int_eq(lp_encode_validate(&b, 1, v, 100000), 0);
	free(v);
}
END_TEST

START_TEST(permit_round_trip)
{
	struct lp_permit p = { 4, 30000 }, d;
	struct lp_frame f;
	const char *why;
	uint32_t vol;

	ck_assert_int_eq(lp_encode_volume(&b, LP_PERMIT_ACQUIRE, 6, 4), 0);
	f = frame_at(0);
	ck_assert_int_eq(lp_decode_volume(&f, &vol, &why), 0);
	ck_assert_uint_eq(vol, 4);
	b.len = 0;
	ck_assert_int_eq(lp_encode_permit_reply(&b, 6, &p), 0);
	f = frame_at(0);
	ck_assert_int_eq(lp_decode_permit_reply(&f, &d, &why), 0);
	ck_assert_uint_eq(d.volume, 4);
	ck_assert_uint_eq(d.lease_ms, 30000);
}
END_TEST

/* Every op's record, every field, and the batch's bodies after it. */
START_TEST(reintegrate_round_trip)
{
	struct lento_rec in[LENTO_OP_LAST], out;
	struct lp_reint m = { .volume = 7, .client = 3 }, d;
	uint32_t n = sbatch(in, 0), i = 0;
	struct lp_data c = { .rec = LENTO_OP_STORE - 1, .flags = LP_DATA_LAST },
		       dc;
	struct lp_stream s;
	struct lp_frame f;
	const char *why;
	size_t at;

	ck_assert_uint_eq(n, LENTO_OP_LAST);
	ck_assert_int_eq(lp_encode_reintegrate(&b, 11, &m, in, n), (int)n);
	at = b.len;
	ck_assert_int_eq(lp_encode_data(&b, 11, &c, value, 5000), 0);
	ck_assert_int_eq(lp_frame_parse(b.p, b.len, &f, &why),
			 (ssize_t)at);
	ck_assert_uint_eq(f.flags, LP_F_MORE);
	ck_assert_int_eq(lp_decode_reintegrate(&f, &d, &why), 0);
	ck_assert_uint_eq(d.volume, 7);
	ck_assert_uint_eq(d.client, 3);
	ck_assert_uint_eq(d.first, 41);
	ck_assert_uint_eq(d.count, n);
	ck_assert_uint_eq(d.stores, 1);
	while (lp_next_rec(&d.recs, &out) == 1) {
		ck_rec_eq(&out, &in[i]);
		if (out.op == LENTO_OP_STORE)
			lp_stream_init(&s, i, out.attr.size, true);
		i++;
	}
	ck_assert_uint_eq(i, n);
	ck_assert_uint_eq(s.total, 5000);
	f = frame_at(at);
	ck_assert_int_eq(lp_decode_data(&f, &dc, &why), 0);
	ck_assert_int_eq(lp_stream_data(&s, &dc, &why), 1);
	/* A body shorter than its STORE says. */
	lp_stream_init(&s, LENTO_OP_STORE - 1, 6000, true);
	ck_assert_int_eq(lp_stream_data(&s, &dc, &why), -EBADMSG);
	ck_assert_str_eq(why, "LAST flag disagrees with the body's size");
}
END_TEST

/* The largest records, and a batch split at LP_SPLIT_TARGET. */
START_TEST(reintegrate_split)
{
	const uint32_t n = 300;
	struct lento_rec *recs = calloc(n, sizeof(*recs)), r;
	struct lp_reint m = { .volume = 1, .client = 2 }, d;
	uint32_t done = 0, seen = 0;
	struct lp_frame f;
	const char *why;
	size_t at = 0;
	ssize_t got;
	int k;

	ck_assert_ptr_nonnull(recs);
	for (uint32_t i = 0; i < n; i++) {
		srec(&recs[i], LENTO_OP_SETXATTR, 1 + i, 0);
		memset(recs[i].name, 'x', LENTO_XATTR_NAME_MAX);
		recs[i].data_len = LENTO_XATTR_SIZE_MAX;
	}
	while (done < n) {
		k = lp_encode_reintegrate(&b, 1, &m, recs + done, n - done);
		ck_assert_int_gt(k, 0);
		done += (uint32_t)k;
	}
	while ((got = lp_frame_parse(b.p + at, b.len - at, &f, &why)) > 0) {
		ck_assert_int_eq(lp_decode_reintegrate(&f, &d, &why), 0);
		ck_assert_uint_eq(d.first, 1 + seen);
		ck_assert(!d.more);
		while (lp_next_rec(&d.recs, &r) == 1) {
			ck_assert_uint_eq(r.data_len, LENTO_XATTR_SIZE_MAX);
			seen++;
		}
		ck_assert_uint_le(f.len, LP_SPLIT_TARGET + 70000);
		at += (size_t)got;
	}
	ck_assert_uint_eq(seen, n);
	free(recs);
}
END_TEST

/*
 * A record's supplementary groups: none, one, the most a record carries,
 * each pointing into the frame; a count beyond LENTO_GROUPS_MAX or the
 * frame's bytes is malformed.
 */
START_TEST(reintegrate_groups)
{
	static const uint16_t counts[] = { 0, 1, 3, LENTO_GROUPS_MAX };
	struct lento_rec in[ARRAY_SIZE(counts)], out;
	struct lp_reint m = { .volume = 1, .client = 2 }, d;
	struct lp_frame f;
	const char *why;
	uint32_t i = 0;
	size_t at;

	for (i = 0; i < ARRAY_SIZE(counts); i++) {
		srec(&in[i], LENTO_OP_SETATTR, 1 + i, 0);
		in[i].ngroups = counts[i];
		in[i].groups = counts[i] ? sgroups : NULL;
	}
	ck_assert_int_eq(lp_encode_reintegrate(&b, 1, &m, in, i), (int)i);
	f = frame_at(0);
	ck_assert_int_eq(lp_decode_reintegrate(&f, &d, &why), 0);
	for (i = 0; lp_next_rec(&d.recs, &out) == 1; i++) {
		ck_rec_eq(&out, &in[i]);
		if (out.ngroups)
			ck_assert(out.groups >= f.body &&
				  out.groups + 4 * out.ngroups <=
				  f.body + f.len);
	}
	ck_assert_uint_eq(i, ARRAY_SIZE(counts));

	/* One record, its 3 groups last in the frame after their count. */
	b.len = 0;
	in[2].recno = 1;
	ck_assert_int_eq(lp_encode_reintegrate(&b, 1, &m, &in[2], 1), 1);
	at = b.len - LP_HDR_SIZE - 4 * 3 - 2;
	ck_assert_ptr_null(verdict());
	put16_at(at, LENTO_GROUPS_MAX + 1);
	ck_refused("more than LENTO_GROUPS_MAX groups");
	put16_at(at, UINT16_MAX);
	ck_refused("more than LENTO_GROUPS_MAX groups");
	put16_at(at, 4);
	ck_refused("truncated");
	put16_at(at, 2);
	ck_refused("trailing bytes");
	put16_at(at, 3);
	ck_assert_ptr_null(verdict());
	/* A count the frame ends before. */
	set_len((uint32_t)(at + 1));
	ck_refused("truncated");
}
END_TEST

/*
 * A batch of more records than a reply could answer is malformed; the
 * largest answer of one that is not (four objects a record, each with a
 * full version vector) fits its frame.
 */
START_TEST(reintegrate_count_bounded)
{
	const uint32_t nv = 4 * LP_REINT_RECS_MAX;
	struct lp_reint m = { .volume = 1, .client = 2 }, d;
	struct lp_reint_reply rm = { .code = LP_OK, .index = LP_NO_INDEX };
	struct lp_fidvv *v = calloc(nv, sizeof(*v));
	struct lento_rec r;
	struct lp_frame f;
	const char *why;

	srec(&r, LENTO_OP_SETATTR, 1, 0);
	ck_assert_int_eq(lp_encode_reintegrate(&b, 1, &m, &r, 1), 1);
	/* The count follows the volume, client and first recno. */
	put32_at(16, LP_REINT_RECS_MAX + 1);
	f = frame_at(0);
	ck_assert_int_eq(lp_decode_reintegrate(&f, &d, &why), -EBADMSG);
	ck_assert_str_eq(why, "count beyond the protocol's limit");
	put32_at(16, 1);
	ck_assert_int_eq(lp_decode_reintegrate(&f, &d, &why), 0);

	ck_assert_ptr_nonnull(v);
	for (uint32_t i = 0; i < nv; i++) {
		v[i].fid = sfid(i);
		v[i].vv = svv(LENTO_VV_MAX);
	}
	b.len = 0;
	ck_assert_int_eq(lp_encode_reintegrate_reply(&b, 1, &rm, v, nv), 0);
	free(v);
}
END_TEST

START_TEST(reint_reply_round_trip)
{
	struct lp_reint_reply m, d;
	struct lp_fidvv v[2], out;
	struct lp_frame f;
	const char *why;

	memset(&m, 0, sizeof(m));
	memset(v, 0, sizeof(v));
	m.applied = 77;
	m.stamp = 5;
	m.code = LP_ECONFLICT;
	m.index = 3;
	m.fid = sfid(2);
	m.base = svv(2);
	m.current = svv(3);
	m.msg = "line one\nline two";	/* control characters blanked */
	v[0].fid = sfid(0);
	v[0].vv = svv(1);
	v[1].fid = sfid(1);
	ck_assert_int_eq(lp_encode_reintegrate_reply(&b, 4, &m, v, 2), 0);
	f = frame_at(0);
	ck_assert_int_eq(lp_decode_reintegrate_reply(&f, &d, &why), 0);
	ck_assert_uint_eq(d.applied, 77);
	ck_assert_uint_eq(d.stamp, 5);
	ck_assert_uint_eq(d.code, LP_ECONFLICT);
	ck_assert_uint_eq(d.index, 3);
	ck_assert_mem_eq(&d.fid, &m.fid, sizeof(m.fid));
	ck_assert_mem_eq(&d.base, &m.base, sizeof(m.base));
	ck_assert_mem_eq(&d.current, &m.current, sizeof(m.current));
	ck_assert_uint_eq(d.msg_len, 17);
	ck_assert_mem_eq(d.msg, "line one line two", 17);
	ck_assert_uint_eq(d.nver, 2);
	ck_assert_int_eq(lp_next_fidvv(&d.versions, &out), 1);
	ck_assert_mem_eq(&out, &v[0], sizeof(out));
	ck_assert_int_eq(lp_next_fidvv(&d.versions, &out), 1);
	ck_assert_mem_eq(&out, &v[1], sizeof(out));
	ck_assert_int_eq(lp_next_fidvv(&d.versions, &out), 0);
}
END_TEST

START_TEST(error_round_trip)
{
	struct lp_error d;
	struct lp_frame f;
	const char *why;
	char long_msg[LP_MSG_MAX + 100];

	ck_assert_int_eq(lp_encode_error(&b, 2, LP_EDQUOT, "quota of home"), 0);
	f = frame_at(0);
	ck_assert_int_eq(lp_decode_error(&f, &d, &why), 0);
	ck_assert_uint_eq(d.code, LP_EDQUOT);
	ck_assert_uint_eq(d.msg_len, 13);
	ck_assert_mem_eq(d.msg, "quota of home", 13);
	/* A longer message is cut to LP_MSG_MAX. */
	memset(long_msg, 'q', sizeof(long_msg) - 1);
	long_msg[sizeof(long_msg) - 1] = '\0';
	b.len = 0;
	ck_assert_int_eq(lp_encode_error(&b, 2, LP_EIO, long_msg), 0);
	f = frame_at(0);
	ck_assert_int_eq(lp_decode_error(&f, &d, &why), 0);
	ck_assert_uint_eq(d.msg_len, LP_MSG_MAX);
}
END_TEST

START_TEST(ping_round_trip)
{
	struct lp_frame f;
	const char *why;
	uint64_t nonce;

	ck_assert_int_eq(lp_encode_ping(&b, LP_PING, 1, 0xfedcba9876543210ULL),
			 0);
	ck_assert_int_eq(lp_encode_ping(&b, LP_PONG, 1, 7), 0);
	ck_assert_int_eq(lp_frame_parse(b.p, b.len, &f, &why),
			 LP_HDR_SIZE + 8);
	ck_assert_int_eq(lp_decode_ping(&f, &nonce, &why), 0);
	ck_assert_uint_eq(nonce, 0xfedcba9876543210ULL);
	f = frame_at(LP_HDR_SIZE + 8);
	ck_assert_uint_eq(f.type, LP_PONG);
	ck_assert_int_eq(lp_decode_ping(&f, &nonce, &why), 0);
	ck_assert_uint_eq(nonce, 7);
}
END_TEST

/* The byte layout PROTOCOL.md shows for a PING. */
START_TEST(ping_bytes)
{
	static const uint8_t want[] = {
		0x08, 0, 0, 0, 0x03, 0, 0, 0, 0x2a, 0, 0, 0,
		0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe,
	};

	ck_assert_int_eq(lp_encode_ping(&b, LP_PING, 42,
					0xfedcba9876543210ULL), 0);
	ck_assert_uint_eq(b.len, sizeof(want));
	ck_assert_mem_eq(b.p, want, sizeof(want));
}
END_TEST

/* ---------------------------------------------- frame headers */

START_TEST(frame_header)
{
	struct lp_frame f;
	const char *why = NULL;
	uint8_t h[LP_HDR_SIZE] = { 0 };

	ck_assert_int_eq(lp_encode_fid(&b, LP_GETATTR, 1, &(struct lento_fid){
					       1, 2, 3 }), 0);
	/* The header alone: more is needed, but the header is known. */
	ck_assert_int_eq(lp_frame_parse(b.p, LP_HDR_SIZE, &f, &why), 0);
	ck_assert_uint_eq(f.type, LP_GETATTR);
	ck_assert_uint_eq(f.len, 16);
	ck_assert_ptr_null(f.body);
	ck_assert_int_eq(lp_frame_check(&f, &why), -EBADMSG);
	ck_assert_str_eq(why, "frame without its body");
	ck_assert_int_eq(lp_frame_parse(b.p, LP_HDR_SIZE - 1, &f, &why), 0);

	h[4] = LP_GETATTR;
	h[8] = 1;
	h[0] = 0xff;
	h[1] = 0xff;
	h[2] = 0xff;
	h[3] = 0xff;	/* 4 GiB - 1: refused before any body arrives */
	ck_assert_int_eq(lp_frame_parse(h, sizeof(h), &f, &why), -EBADMSG);
	ck_assert_str_eq(why, "frame longer than LP_FRAME_MAX");
	memcpy(h, (uint8_t[]){ 0, 0, 0, 1 }, 4);	/* LP_FRAME_MAX */
	ck_assert_int_eq(lp_frame_parse(h, sizeof(h), &f, &why), 0);
	memcpy(h, (uint8_t[]){ 1, 0, 0, 1 }, 4);
	ck_assert_int_eq(lp_frame_parse(h, sizeof(h), &f, &why), -EBADMSG);

	set_flags(LP_F_MORE);	/* GETATTR never continues */
	ck_refused("flag not allowed");
	set_flags(0x2);
	ck_refused("flag not allowed");
	set_flags(0);
	b.p[4] = 0;
	ck_refused("unknown frame type");
	b.p[4] = 6;
	ck_refused("unknown frame type");
	b.p[4] = 0xff;
	b.p[5] = 0xff;
	ck_refused("unknown frame type");
	b.p[5] = 0;
	b.p[4] = LP_GETATTR;
	memset(b.p + 8, 0, 4);
	ck_refused("tag 0 on a request");
	b.p[4] = LP_BREAK;	/* a push: tag 0 */
	ck_assert_ptr_null(verdict());
	b.p[8] = 9;
	ck_refused("not 0 on a push");
}
END_TEST

/* Encoders refuse a tag that the frame rules refuse, and keep b. */
START_TEST(encoder_rolls_back)
{
	struct lento_fid fid = { 1, 2, 3 };
	size_t len;

	ck_assert_int_eq(lp_encode_fid(&b, LP_GETATTR, 1, &fid), 0);
	len = b.len;
	ck_enc_refused(lp_encode_fid(&b, LP_GETATTR, 0, &fid), "tag 0");
	ck_enc_refused(lp_encode_fid(&b, LP_BREAK, 5, &fid), "push");
	ck_enc_refused(lp_encode_fid(&b, LP_FETCH, 5, &fid), "truncated");
	ck_enc_refused(lp_encode_fid(&b, 200, 5, &fid), "unknown frame type");
	ck_enc_refused(lp_encode_fid(&b, 0x10000 + LP_GETATTR, 5, &fid),
		       "unknown frame type");
	fid = (struct lento_fid){ 0, 0, 0 };
	ck_enc_refused(lp_encode_fid(&b, LP_GETATTR, 1, &fid), "null fid");
	ck_assert_uint_eq(b.len, len);
	b.len = 0;
	ck_assert_int_eq(lp_encode_volume(&b, LP_PERMIT_REVOKE, 0, 5), 0);
	ck_assert_int_eq(lp_encode_volume(&b, LP_PERMIT_RENEW, 5, 5), 0);
}
END_TEST

/* ------------------------------------------ malformed messages */

static void hello(void)
{
	b.len = 0;
	sample(&b, LP_HELLO, 1);	/* auth of 10 bytes */
}

START_TEST(bad_hello)
{
	struct lp_hello m = { .vmin = 1, .vmax = 1 };

	hello();
	body_at(0)[0] ^= 1;
	ck_refused("bad magic");
	hello();
	put32_at(12, 1);
	ck_refused("HELLO flags not zero");
	hello();
	put16_at(8, 0);
	ck_refused("version range");
	hello();
	put16_at(8, 3);
	put16_at(10, 2);
	ck_refused("version range");
	hello();
	memset(body_at(20), 0, 16);
	ck_refused("uuid all zero");
	hello();
	put32_at(36, LP_AUTH_MAX + 1);
	ck_refused("auth longer than LP_AUTH_MAX");
	hello();
	put32_at(36, 0xffffffff);
	ck_refused("auth longer than LP_AUTH_MAX");
	hello();
	put32_at(36, 11);
	ck_refused("truncated");
	b.len = 0;
	ck_enc_refused(lp_encode_hello(&b, 1, &m), "uuid all zero");
	m.uuid[3] = 1;
	m.auth = value;
	m.auth_len = LP_AUTH_MAX + 1;
	ck_enc_refused(lp_encode_hello(&b, 1, &m), "auth longer");
}
END_TEST

START_TEST(bad_hello_reply)
{
	struct lp_hello_reply m = { .version = LP_VERSION_MAX, .client = 1,
				    .epoch = 1, .heartbeat_ms = LP_PING_MS };

	ck_assert_int_eq(lp_encode_hello_reply(&b, 1, &m), 0);
	b.len = 0;
	m.version = LP_VERSION_MAX + 1;
	ck_enc_refused(lp_encode_hello_reply(&b, 1, &m), "does not speak");
	m.version = 0;
	ck_enc_refused(lp_encode_hello_reply(&b, 1, &m), "does not speak");
	m.version = 1;
	ck_enc_refused(lp_encode_hello_reply(&b, 1, &m), "does not speak");
	m.version = LP_VERSION_MAX;
	m.client = 0;
	ck_enc_refused(lp_encode_hello_reply(&b, 1, &m), "client id 0");
	m.client = 1;
	m.epoch = 0;
	ck_enc_refused(lp_encode_hello_reply(&b, 1, &m), "epoch 0");
	m.epoch = 1;
	m.heartbeat_ms = LP_HEARTBEAT_MIN_MS - 1;
	ck_enc_refused(lp_encode_hello_reply(&b, 1, &m), "heartbeat");
	m.heartbeat_ms = LP_HEARTBEAT_MAX_MS + 1;
	ck_enc_refused(lp_encode_hello_reply(&b, 1, &m), "heartbeat");
	m.heartbeat_ms = LP_PING_MS;
	ck_assert_int_eq(lp_encode_hello_reply(&b, 1, &m), 0);
	put32_at(2, 4);
	ck_refused("HELLO_REPLY flags not zero");
}
END_TEST

START_TEST(bad_error)
{
	ck_enc_refused(lp_encode_error(&b, 1, LP_OK, "x"), "unknown error code");
	ck_enc_refused(lp_encode_error(&b, 1, 999, "x"), "unknown error code");
	ck_enc_refused(lp_encode_error(&b, 1, 1002, "x"), "unknown error code");
	ck_assert_int_eq(lp_encode_error(&b, 1, LP_EIO, "abc"), 0);
	body_at(7)[0] = '\n';
	ck_refused("control character");
	body_at(7)[0] = 0;
	ck_refused("control character");
	body_at(7)[0] = 0x7f;
	ck_refused("control character");
	body_at(7)[0] = 0xc3;	/* UTF-8 is fine */
	ck_assert_ptr_null(verdict());
	put16_at(4, LP_MSG_MAX + 1);
	ck_refused("message longer than LP_MSG_MAX");
	put16_at(4, 4);
	ck_refused("truncated");
}
END_TEST

/* A status with one thing wrong per index: refused by both sides. */
START_TEST(bad_status)
{
	struct lp_getattr_reply m;
	const char *reason = NULL;

	memset(&m, 0, sizeof(m));
	m.st = sstatus(1, LENTO_T_REG);
	switch (_i) {
	case 0:
		m.st.type = 0;
		reason = "unknown object type";
		break;
	case 1:
		m.st.type = LENTO_T_BLK + 1;
		reason = "unknown object type";
		break;
	case 2:
		m.st.attr.valid = LENTO_A_ALL & ~LENTO_A_RDEV;
		reason = "status without every attribute";
		break;
	case 3:
		m.st.attr.valid |= 0x100;
		reason = "unknown attribute bits";
		break;
	case 4:
		m.st.attr.mode = 0100644;
		reason = "mode beyond the permission bits";
		break;
	case 5:
		m.st.attr.size = (uint64_t)INT64_MAX + 1;
		reason = "size beyond";
		break;
	case 6:
		m.st.fid = (struct lento_fid){ 0, 0, 0 };
		reason = "null fid";
		break;
	case 7:
		m.st.vv.n = LENTO_VV_MAX + 1;
		reason = "LENTO_VV_MAX";
		break;
	}
	ck_enc_refused(lp_encode_getattr_reply(&b, 1, &m), reason);
	/* The decoder's own: a vv count no encoder writes. */
	m = (struct lp_getattr_reply){ .st = sstatus(1, LENTO_T_REG) };
	m.st.vv.n = 0;
	ck_assert_int_eq(lp_encode_getattr_reply(&b, 1, &m), 0);
	body_at(ST_VVN)[0] = LENTO_VV_MAX + 1;
	ck_refused("more than LENTO_VV_MAX counters");
	body_at(ST_VVN)[0] = 0xff;
	ck_refused("more than LENTO_VV_MAX counters");
	body_at(ST_VVN)[0] = 1;		/* 8 bytes more than there are */
	ck_refused("truncated");
}
END_TEST

START_TEST(bad_getattr_reply)
{
	struct lp_getattr_reply m;
	char name[LENTO_XATTR_NAME_MAX + 2];

	memset(&m, 0, sizeof(m));
	m.st = sstatus(1, LENTO_T_REG);
	m.target = "t";
	m.target_len = 1;
	ck_enc_refused(lp_encode_getattr_reply(&b, 1, &m), "not a symlink");
	m.st.type = LENTO_T_SYMLINK;
	m.target_len = 0;
	ck_enc_refused(lp_encode_getattr_reply(&b, 1, &m), "empty symlink");
	m.target = "a\0b";
	m.target_len = 3;
	ck_enc_refused(lp_encode_getattr_reply(&b, 1, &m), "target with NUL");
	m.target = long_target;
	m.target_len = LENTO_SYMLINK_MAX + 1;
	ck_enc_refused(lp_encode_getattr_reply(&b, 1, &m),
		       "longer than LENTO_SYMLINK_MAX");
	m.target_len = LENTO_SYMLINK_MAX;
	ck_assert_int_eq(lp_encode_getattr_reply(&b, 1, &m), 0);
	b.len = 0;

	m.st.type = LENTO_T_REG;
	m.target_len = 0;
	m.nxattr = LENTO_XATTRS_MAX + 1;
	ck_enc_refused(lp_encode_getattr_reply(&b, 1, &m), "LENTO_XATTRS_MAX");
	m.nxattr = 1;
	m.xattr[0] = (struct lp_xattr){ "", 0, "", 0 };
	ck_enc_refused(lp_encode_getattr_reply(&b, 1, &m), "empty xattr name");
	m.xattr[0] = (struct lp_xattr){ "a\0b", 3, "", 0 };
	ck_enc_refused(lp_encode_getattr_reply(&b, 1, &m), "xattr name with NUL");
	memset(name, 'x', sizeof(name));
	m.xattr[0] = (struct lp_xattr){ name, LENTO_XATTR_NAME_MAX + 1, "", 0 };
	ck_enc_refused(lp_encode_getattr_reply(&b, 1, &m),
		       "longer than LENTO_XATTR_NAME_MAX");
	m.xattr[0] = (struct lp_xattr){ "user.a", 6, value,
					LENTO_XATTR_SIZE_MAX + 1 };
	ck_enc_refused(lp_encode_getattr_reply(&b, 1, &m),
		       "larger than LENTO_XATTR_SIZE_MAX");
	m.nxattr = 2;
	m.xattr[0] = (struct lp_xattr){ "user.a", 6, "1", 1 };
	m.xattr[1] = (struct lp_xattr){ "user.a", 6, "2", 1 };
	ck_enc_refused(lp_encode_getattr_reply(&b, 1, &m), "listed twice");
	/* The decoder's own: a count of xattrs no encoder writes. */
	m.nxattr = 0;
	ck_assert_int_eq(lp_encode_getattr_reply(&b, 1, &m), 0);
	put16_at(ST_LEN(m.st.vv.n) + 2, LENTO_XATTRS_MAX + 1);
	ck_refused("more than LENTO_XATTRS_MAX");
	put16_at(ST_LEN(m.st.vv.n) + 2, 0xffff);
	ck_refused("more than LENTO_XATTRS_MAX");
	put16_at(ST_LEN(m.st.vv.n) + 2, 1);
	ck_refused("truncated");
}
END_TEST

/* Entry names, one bad one per index, and the decoder's own checks. */
START_TEST(bad_entry_name)
{
	static const struct {
		const char *name;
		const char *reason;
	} bad[] = {
		{ "", "empty entry name" },
		{ ".", "\".\" or \"..\"" },
		{ "..", "\".\" or \"..\"" },
		{ "a/b", "'/' or NUL" },
		{ "/", "'/' or NUL" },
	};
	struct lp_readdir_reply m;
	struct lp_dirent d;

	memset(&m, 0, sizeof(m));
	m.dir = sstatus(1, LENTO_T_DIR);
	m.total = 1;
	sdirent(&d, 0, 0);
	if (_i < (int)ARRAY_SIZE(bad)) {
		strcpy(d.de.name, bad[_i].name);
		ck_enc_refused(lp_encode_readdir_reply(&b, 1, &m, &d, 1),
			       bad[_i].reason);
		return;
	}
	/* A NUL inside, and a name too long: only bytes can say that. */
	strcpy(d.de.name, "abc");
	ck_assert_int_eq(lp_encode_readdir_reply(&b, 1, &m, &d, 1), 1);
	if (_i == (int)ARRAY_SIZE(bad)) {
		body_at(ST_LEN(m.dir.vv.n) + 14 + 2 + 1)[0] = '\0';
		ck_refused("name with NUL");
	} else {
		put16_at(ST_LEN(m.dir.vv.n) + 14, LENTO_NAME_MAX + 1);
		ck_refused("name longer than LENTO_NAME_MAX");
	}
}
END_TEST

START_TEST(bad_readdir_counts)
{
	struct lp_readdir_reply m;
	struct lp_dirent d[2];
	size_t cnt;

	memset(&m, 0, sizeof(m));
	m.dir = sstatus(1, LENTO_T_DIR);
	cnt = ST_LEN(m.dir.vv.n) + 10;
	sdirent(&d[0], 0, 0);
	sdirent(&d[1], 0, 1);
	m.total = 1;
	ck_enc_refused(lp_encode_readdir_reply(&b, 1, &m, d, 2),
		       "beyond the listing's total");
	m.total = 3;
	m.first = 2;
	ck_enc_refused(lp_encode_readdir_reply(&b, 1, &m, d, 2),
		       "beyond the listing's total");
	m.first = 0;
	m.total = 0;
	m.dir.type = LENTO_T_REG;
	ck_enc_refused(lp_encode_readdir_reply(&b, 1, &m, d, 0),
		       "not a directory");
	m.dir.type = LENTO_T_DIR;
	m.total = LP_DIR_MAX + 1;
	ck_enc_refused(lp_encode_readdir_reply(&b, 1, &m, d, 1),
		       "beyond the listing's total");
	m.total = 4;
	ck_enc_refused(lp_encode_readdir_reply(&b, 1, &m, d, 0),
		       "frame without entries");
	ck_assert_int_eq(lp_encode_readdir_reply(&b, 1, &m, d, 2), 2);
	ck_assert_uint_eq(b.p[6], LP_F_MORE);
	set_flags(0);
	ck_refused("MORE flag disagrees");
	set_flags(LP_F_MORE);
	put32_at(cnt, 3);
	ck_refused("count larger than the bytes left");
	put32_at(cnt, 0xffffffff);
	ck_refused("count beyond the protocol's limit");
	put32_at(cnt, 1);
	ck_refused("trailing bytes");
}
END_TEST

/* Entries' and the directory's xattrs: limits, no name twice, frame one. */
START_TEST(bad_readdir_xattrs)
{
	struct lp_xattr twice[2] = { sxattrs[1], sxattrs[1] };
	struct lp_xattr many[LENTO_XATTRS_MAX + 1];
	char names[LENTO_XATTRS_MAX + 1][16];
	struct lp_readdir_reply m;
	struct lp_dirent d[2];

	for (uint32_t i = 0; i <= LENTO_XATTRS_MAX; i++) {
		snprintf(names[i], sizeof(names[i]), "user.%u", i);
		many[i] = (struct lp_xattr){ names[i],
					     (uint32_t)strlen(names[i]),
					     value, 1 };
	}
	memset(&m, 0, sizeof(m));
	m.dir = sstatus(1, LENTO_T_DIR);
	m.total = 3;
	sdirent(&d[0], 0, 0);
	sdirent(&d[1], 0, 1);
	d[1].nxattr = 2;
	d[1].xattr = twice;
	ck_enc_refused(lp_encode_readdir_reply(&b, 1, &m, d, 2),
		       "xattr listed twice");
	d[1].nxattr = LENTO_XATTRS_MAX + 1;
	d[1].xattr = many;
	ck_enc_refused(lp_encode_readdir_reply(&b, 1, &m, d, 2),
		       "more than LENTO_XATTRS_MAX");
	d[1].nxattr = LENTO_XATTRS_MAX;
	ck_assert_int_eq(lp_encode_readdir_reply(&b, 1, &m, d, 2), 2);
	b.len = 0;
	d[1].nxattr = 1;
	m.dir_nxattr = 2;
	m.dir_xattr = twice;
	ck_enc_refused(lp_encode_readdir_reply(&b, 1, &m, d, 2),
		       "xattr listed twice");
	/* A later frame carries no directory xattrs, whatever it is given. */
	m.first = 1;
	ck_assert_int_eq(lp_encode_readdir_reply(&b, 1, &m, d, 2), 2);
	b.len = 0;
	/* ... and one that says it does is refused. */
	m.first = 0;
	m.dir_xattr = sxattrs;
	ck_assert_int_eq(lp_encode_readdir_reply(&b, 1, &m, d, 2), 2);
	put32_at(ST_LEN(m.dir.vv.n) + 4, 1);
	set_flags(0);
	ck_refused("xattrs in a frame but the first");
}
END_TEST

START_TEST(bad_fetch)
{
	struct lp_fetch_reply r = { sstatus(1, LENTO_T_DIR), 1000 };
	struct lp_fetch m = { { 0, 0, 0 }, { 0 } };

	ck_enc_refused(lp_encode_fetch(&b, 1, &m), "null fid");
	ck_enc_refused(lp_encode_fetch_reply(&b, 1, &r), "not a regular file");
	r.st.type = LENTO_T_REG;
	r.size = 999;
	ck_enc_refused(lp_encode_fetch_reply(&b, 1, &r), "disagrees");
	r.size = 1000;
	ck_assert_int_eq(lp_encode_fetch_reply(&b, 1, &r), 0);
	set_flags(0);
	ck_refused("without MORE");
}
END_TEST

static void data_frame(uint32_t raw)
{
	struct lp_data d = { .flags = LP_DATA_LAST };

	b.len = 0;
	ck_assert_int_eq(lp_encode_data(&b, 1, &d, value, raw), 0);
}

START_TEST(bad_data)
{
	struct lp_data d = { 0 };

	ck_enc_refused(lp_encode_data(&b, 1, &d, value, 0), "empty chunk");
	d.offset = 5;
	d.flags = LP_DATA_LAST;
	ck_enc_refused(lp_encode_data(&b, 1, &d, value, 0), "empty chunk");
	d.flags = 0x2;
	ck_enc_refused(lp_encode_data(&b, 1, &d, value, 10), "unknown DATA flags");
	d.flags = 0;
	d.offset = INT64_MAX - 5;
	ck_enc_refused(lp_encode_data(&b, 1, &d, value, 10), "beyond 2^63");
	d.offset = 0;
	ck_enc_refused(lp_encode_data(&b, 1, &d, value, LP_CHUNK_MAX + 1),
		       "larger than LP_CHUNK_MAX");
	data_frame(100);
	put32_at(16, LP_CHUNK_MAX + 1);
	ck_refused("chunk larger than LP_CHUNK_MAX");
	data_frame(100);
	put32_at(20, LP_ZCHUNK_MAX + 1);
	ck_refused("larger than LP_ZCHUNK_MAX");
	data_frame(100);
	set_len(24);
	put32_at(20, 0);
	ck_refused("without compressed bytes");
	data_frame(100);
	put32_at(20, (uint32_t)(b.len - LP_HDR_SIZE - 24 + 1));
	ck_refused("truncated");
}
END_TEST

/* Decompress the DATA frame in b into a buffer of @cap. */
static const char *inflate_verdict(size_t cap)
{
	static uint8_t out[LP_CHUNK_MAX];
	struct lp_frame f = frame_at(0);
	struct lp_data d;
	const char *why;

	ck_assert_int_eq(lp_decode_data(&f, &d, &why), 0);
	return lp_chunk_decompress(&d, out, cap, &why, NULL) ? why : NULL;
}

/* A DATA frame around zstd bytes of our own making. */
static void data_with(uint32_t raw_len, const void *z, size_t zlen)
{
	b.len = 0;
	data_frame(1);
	b.len = LP_HDR_SIZE + 24;
	put32_at(16, raw_len);
	put32_at(20, (uint32_t)zlen);
	if (b.cap < b.len + zlen) {
		b.p = realloc(b.p, b.len + zlen);
		ck_assert_ptr_nonnull(b.p);
		b.cap = b.len + zlen;
	}
	memcpy(b.p + b.len, z, zlen);
	set_len((uint32_t)(24 + zlen));
}

/*
 * Zip bombs and other bad zstd: a chunk that inflates to more than it
 * declares, a frame that does not say its size, two frames, a frame
 * cut short, a frame that lies about its size.
 */
START_TEST(zip_bombs)
{
	const size_t big = 64u << 20;
	uint8_t *zeros = calloc(1, big);
	size_t zcap = ZSTD_compressBound(big), zlen, z2;
	uint8_t *z = malloc(2 * zcap + 8);
	ZSTD_CCtx *cc = ZSTD_createCCtx();

	ck_assert_ptr_nonnull(zeros);
	ck_assert_ptr_nonnull(z);
	data_frame(1000);
	ck_assert_ptr_null(inflate_verdict(1000));
	ck_assert_str_eq(inflate_verdict(999), "chunk larger than the buffer for it");

	/* 64 MiB of zeros in a few KiB, declared as 1 MiB. */
	zlen = ZSTD_compress(z, zcap, zeros, big, 3);
	ck_assert(!ZSTD_isError(zlen));
	ck_assert_uint_lt(zlen, LP_ZCHUNK_MAX);
	data_with(LP_CHUNK_MAX, z, zlen);
	ck_assert_str_eq(inflate_verdict(LP_CHUNK_MAX),
			 "zstd frame's size is not the chunk's");

	/* 2 MiB without its size in the frame header. */
	ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 0);
	zlen = ZSTD_compress2(cc, z, zcap, zeros, 2u << 20);
	ck_assert(!ZSTD_isError(zlen));
	ck_assert_uint_eq(ZSTD_getFrameContentSize(z, zlen),
			  ZSTD_CONTENTSIZE_UNKNOWN);
	data_with(LP_CHUNK_MAX, z, zlen);
	ck_assert_str_eq(inflate_verdict(LP_CHUNK_MAX),
			 "zstd frame's size is not the chunk's");

	/*
	 * That frame with a size put in its header, 1 MiB, a lie: the
	 * header says FCS_Field_Size 4 (descriptor bits 7-6 = 2), the four
	 * bytes after the window descriptor.
	 */
	ck_assert_uint_eq(z[4] & 0xe3, 0);	/* no FCS, dict, checksum */
	memmove(z + 10, z + 6, zlen - 6);
	z[4] |= 0x80;
	memcpy(z + 6, (uint8_t[]){ 0, 0, 0x10, 0 }, 4);
	zlen += 4;
	ck_assert_uint_eq(ZSTD_getFrameContentSize(z, zlen), LP_CHUNK_MAX);
	data_with(LP_CHUNK_MAX, z, zlen);
	ck_assert_str_eq(inflate_verdict(LP_CHUNK_MAX),
			 "zstd data corrupt or not of its declared size");

	/* Two frames, each 100 bytes, declared as 200. */
	zlen = ZSTD_compress(z, zcap, value, 100, 1);
	z2 = ZSTD_compress(z + zlen, zcap, value, 100, 1);
	data_with(200, z, zlen + z2);
	ck_assert_str_eq(inflate_verdict(200),
			 "chunk is not exactly one zstd frame");
	data_with(100, z, zlen - 1);
	ck_assert_str_eq(inflate_verdict(100),
			 "chunk is not exactly one zstd frame");
	data_with(100, "\x28\xb5\x2f", 3);
	ck_assert_str_eq(inflate_verdict(100), "chunk is not a zstd frame");
	/* A skippable frame is not a chunk. */
	data_with(0, "\x50\x2a\x4d\x18\0\0\0\0", 8);
	ck_assert_str_eq(inflate_verdict(0), "chunk is not a zstd frame");
	ZSTD_freeCCtx(cc);
	free(zeros);
	free(z);
}
END_TEST

START_TEST(bad_volume_lookup)
{
	static const char *const bad[] = {
		"", "a/b", "tab\there", "del\x7f", "caf\xc3\xa9",
		"01234567890123456789012345678901234567890123456789012345678901234",
	};
	struct lp_volume v = { 3, LENTO_ROOT_FID(4), 1 };

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		ck_enc_refused(lp_encode_volume_lookup(&b, 1, bad[i]),
			       "volume name");
	ck_assert_int_eq(lp_encode_volume_lookup(&b, 1, "abc"), 0);
	body_at(3)[0] = '\0';
	ck_refused("name with NUL");
	put16_at(0, LENTO_VOLNAME_MAX + 1);
	ck_refused("volume name longer than LENTO_VOLNAME_MAX");
	b.len = 0;
	ck_enc_refused(lp_encode_volume_lookup_reply(&b, 1, &v),
		       "root fid in another volume");
	v.root = (struct lento_fid){ 0, 0, 0 };
	ck_enc_refused(lp_encode_volume_lookup_reply(&b, 1, &v), "null fid");
}
END_TEST

START_TEST(bad_validate)
{
	struct lp_volstamp vs[2] = { { 1, 1, 0 }, { 2, 2, 3 } };
	struct lp_fidvv fv[2];
	const uint8_t res[2] = { 0, 2 };

	memset(fv, 0, sizeof(fv));
	ck_enc_refused(lp_encode_volume_validate(&b, 1, vs, 0), "empty list");
	ck_enc_refused(lp_encode_volume_validate_reply(&b, 1, vs, 2),
		       "unknown volume validation result");
	ck_enc_refused(lp_encode_validate(&b, 1, fv, 1), "null fid");
	ck_enc_refused(lp_encode_validate(&b, 1, fv, 0), "empty list");
	ck_enc_refused(lp_encode_validate_reply(&b, 1, res, 2),
		       "unknown object validation result");
	ck_enc_refused(lp_encode_validate_reply(&b, 1, res, 0), "empty list");

	ck_assert_int_eq(lp_encode_volume_validate(&b, 1, vs, 2), 0);
	put32_at(0, 3);
	ck_refused("count larger than the bytes left");
	put32_at(0, LP_LIST_MAX + 1);
	ck_refused("count beyond the protocol's limit");
	put32_at(0, 1);
	ck_refused("trailing bytes");
	b.len = 0;
	fv[0].fid = sfid(1);
	fv[1].fid = sfid(2);
	ck_assert_int_eq(lp_encode_validate(&b, 1, fv, 2), 0);
	body_at(4 + 16)[0] = LENTO_VV_MAX + 1;	/* the first vv's n */
	ck_refused("LENTO_VV_MAX");
	body_at(4 + 16)[0] = 0;
	put32_at(0, 0xfffffff0);
	ck_refused("count beyond the protocol's limit");
	b.len = 0;
	ck_assert_int_eq(lp_encode_validate_reply(&b, 1, res, 1), 0);
	put32_at(0, 2);
	ck_refused("count larger than the bytes left");
}
END_TEST

/* Which xattrs clients mirror: all but the LSM's, capabilities mirrored. */
START_TEST(xattr_mirrored)
{
	static const struct {
		const char *name;
		bool mirrored;
	} cases[] = {
		{ "user.a", true }, { "trusted.t", true },
		{ "system.posix_acl_access", true }, { "security", true },
		{ "security.selinux", false }, { "security.", false },
		{ "security.capability", true },
		{ "security.capabilit", false },
		{ "security.capabilityx", false },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ck_assert_msg(lento_xattr_mirrored(cases[i].name,
						   strlen(cases[i].name)) ==
			      cases[i].mirrored, "%s", cases[i].name);
}
END_TEST

/* PRUNEXATTRS lists: 65 names; a name of 256 bytes. */
static char many_names[65 * 8], long_name[LENTO_XATTR_NAME_MAX + 2];

static void bad_record_setup(void)
{
	for (unsigned int i = 0; i < 65; i++)
		snprintf(many_names + 8 * i, 8, "user.%02u", i);
	memset(long_name, 'a', sizeof(long_name) - 1);
	memcpy(long_name, "user.", 5);
	long_name[sizeof(long_name) - 1] = '\0';
}

/* A record with one thing wrong per index, refused with its reason. */
START_TEST(bad_record)
{
	static const struct {
		uint16_t op;
		const char *reason;
	} cases[] = {
		{ 0, "unknown record op" },
		{ LENTO_OP_LAST + 1, "unknown record op" },
		{ LENTO_OP_CREATE, "record number 0" },
		{ LENTO_OP_CREATE, "without a fid" },
		{ LENTO_OP_SETATTR, "a fid its op does not use" },
		{ LENTO_OP_UNLINK, "a fid its op does not use" },
		{ LENTO_OP_RENAME, "without a fid" },
		{ LENTO_OP_CREATE, "'/' or NUL" },
		{ LENTO_OP_MKDIR, "\".\" or \"..\"" },
		{ LENTO_OP_LINK, "empty entry name" },
		{ LENTO_OP_SETATTR, "a name its op does not use" },
		{ LENTO_OP_UNLINK, "a name its op does not use" },
		{ LENTO_OP_RENAME, "\".\" or \"..\"" },
		{ LENTO_OP_SETXATTR, "empty xattr name" },
		{ LENTO_OP_SYMLINK, "empty symlink target" },
		{ LENTO_OP_SYMLINK, "longer than LENTO_SYMLINK_MAX" },
		{ LENTO_OP_SYMLINK, "target with NUL" },
		{ LENTO_OP_SETXATTR, "larger than LENTO_XATTR_SIZE_MAX" },
		{ LENTO_OP_UNLINK, "data its op does not use" },
		{ LENTO_OP_STORE, "data_len without data" },
		{ LENTO_OP_CREATE, "type not one its op makes" },
		{ LENTO_OP_MKNOD, "type not one its op makes" },
		{ LENTO_OP_LINK, "type not one its op makes" },
		{ LENTO_OP_MKDIR, "type not one its op makes" },
		{ LENTO_OP_CREATE, "flag its op does not take" },
		{ LENTO_OP_RENAME, "LASTLINK without a target" },
		{ LENTO_OP_RENAME, "both NOREPLACE and EXCHANGE" },
		{ LENTO_OP_SETATTR, "SETATTR that sets nothing" },
		{ LENTO_OP_STORE, "STORE without its size" },
		{ LENTO_OP_CREATE, "unknown attribute bits" },
		{ LENTO_OP_CREATE, "mode beyond the permission bits" },
		{ LENTO_OP_LINK, "LENTO_VV_MAX" },
		{ LENTO_OP_CREATE, "name without its NUL" },
		{ LENTO_OP_UNLINK, "flag its op does not take" },
		{ LENTO_OP_PRUNEXATTRS, "xattr name listed twice" },
		{ LENTO_OP_PRUNEXATTRS, "without its last NUL" },
		{ LENTO_OP_PRUNEXATTRS, "empty xattr name" },
		{ LENTO_OP_PRUNEXATTRS, "more than LENTO_XATTRS_MAX" },
		{ LENTO_OP_PRUNEXATTRS, "a name its op does not use" },
		{ LENTO_OP_PRUNEXATTRS, "longer than LENTO_XATTR_NAME_MAX" },
		{ LENTO_OP_CREATE, "more than LENTO_GROUPS_MAX groups" },
		{ LENTO_OP_SETATTR, "ngroups without groups" },
		{ LENTO_OP_STORE, "STORE NOBODY with a size" },
		{ LENTO_OP_CREATE, "flag its op does not take" },
	};
	struct lp_reint m = { .volume = 1, .client = 1 };
	struct lento_rec r;

	bad_record_setup();
	srec(&r, cases[_i].op ? cases[_i].op : LENTO_OP_CREATE, 1, 0);
	r.op = cases[_i].op;
	switch (_i) {
	case 2: r.recno = 0; break;
	case 3: r.obj = (struct lento_fid){ 0, 0, 0 }; break;
	case 4: r.dir = sfid(1); break;
	case 5: r.dir2 = sfid(1); break;
	case 6: r.dir2 = (struct lento_fid){ 0, 0, 0 }; break;
	case 7: strcpy(r.name, "a/b"); break;
	case 8: strcpy(r.name, ".."); break;
	case 9: r.name[0] = '\0'; break;
	case 10: strcpy(r.name, "x"); break;
	case 11: strcpy(r.name2, "x"); break;
	case 12: strcpy(r.name2, "."); break;
	case 13: r.name[0] = '\0'; break;
	case 14: r.data_len = 0; break;
	case 15: r.data_len = LENTO_SYMLINK_MAX + 1; break;
	case 16: r.data = "a\0b"; r.data_len = 3; break;
	case 17: r.data_len = LENTO_XATTR_SIZE_MAX + 1; break;
	case 18: r.data = "x"; r.data_len = 1; break;
	case 19: r.data_len = 1; break;
	case 20: r.type = LENTO_T_DIR; break;
	case 21: r.type = LENTO_T_REG; break;
	case 22: r.type = LENTO_T_REG; break;
	case 23: r.type = 200; break;
	case 24: r.flags = LENTO_R_NOREPLACE; break;
	case 25: r.flags = LENTO_R_LASTLINK; break;
	case 26: r.flags = LENTO_R_NOREPLACE | LENTO_R_EXCHANGE; break;
	case 27: r.attr.valid = 0; break;
	case 28: r.attr.valid = LENTO_A_MTIME; break;
	case 29: r.attr.valid |= 0x200; break;
	case 30: r.attr.mode = 040755; break;
	case 31: r.base_dir.n = LENTO_VV_MAX + 1; break;
	case 32: memset(r.name, 'a', sizeof(r.name)); break;
	case 33: r.flags = 0x8; break;
	case 34: r.data = "user.a\0user.b\0user.a"; r.data_len = 21; break;
	case 35: r.data = "user.a\0user.b"; r.data_len = 13; break;
	case 36: r.data = "user.a\0\0"; r.data_len = 8; break;
	case 37: r.data = many_names; r.data_len = sizeof(many_names); break;
	case 38: strcpy(r.name, "user.a"); break;
	case 39: r.data = long_name; r.data_len = sizeof(long_name); break;
	case 40: r.groups = sgroups; r.ngroups = LENTO_GROUPS_MAX + 1; break;
	case 41: r.groups = NULL; r.ngroups = 1; break;
	case 42: r.flags = LENTO_R_NOBODY; break;
	case 43: r.flags = LENTO_R_NOBODY; break;
	}
	ck_assert_msg(lp_rec_invalid(&r) &&
		      strstr(lp_rec_invalid(&r), cases[_i].reason),
		      "expected \"%s\", got \"%s\"", cases[_i].reason,
		      lp_rec_invalid(&r) ? lp_rec_invalid(&r) : "(valid)");
	ck_enc_refused(lp_encode_reintegrate(&b, 1, &m, &r, 1),
		       cases[_i].reason);
}
END_TEST

/* Where fields of the first record are, from the batch's start. */
#define BATCH_HDR	20
#define REC_OP		(BATCH_HDR + 8)

static void batch(unsigned int v)
{
	b.len = 0;
	sample(&b, LP_REINTEGRATE, v);
}

START_TEST(bad_batch)
{
	struct lp_reint m = { .volume = 1, .client = 0 };
	struct lento_rec r[2];

	srec(&r[0], LENTO_OP_MKDIR, 5, 0);
	srec(&r[1], LENTO_OP_SETATTR, 7, 0);
	ck_enc_refused(lp_encode_reintegrate(&b, 1, &m, r, 1), "client id 0");
	m.client = 1;
	ck_enc_refused(lp_encode_reintegrate(&b, 1, &m, r, 0),
		       "batch without records");
	ck_enc_refused(lp_encode_reintegrate(&b, 1, &m, r, 2),
		       "not consecutive");
	r[1].recno = 6;
	ck_assert_int_eq(lp_encode_reintegrate(&b, 1, &m, r, 2), 2);
	put64_at(8, 4);
	ck_refused("not consecutive");
	put64_at(8, UINT64_MAX);
	ck_refused("past 2^64");
	put64_at(8, 5);
	put32_at(16, 3);
	ck_refused("count larger than the bytes left");
	put32_at(16, 1);
	ck_refused("trailing bytes");
	put32_at(16, 2);
	put16_at(REC_OP, 0);
	ck_refused("unknown record op");
	put16_at(REC_OP, LENTO_OP_LAST + 1);
	ck_refused("unknown record op");
	put16_at(REC_OP, LENTO_OP_MKDIR);
	ck_assert_ptr_null(verdict());
	set_flags(LP_F_MORE);		/* no STORE in it */
	ck_refused("MORE flag disagrees");
	batch(2);			/* one STORE */
	set_flags(0);
	ck_refused("MORE flag disagrees");
}
END_TEST

START_TEST(bad_reint_reply)
{
	struct lp_reint_reply m;

	memset(&m, 0, sizeof(m));
	m.code = LP_OK;
	m.index = 0;
	ck_enc_refused(lp_encode_reintegrate_reply(&b, 1, &m, NULL, 0),
		       "blamed in a batch applied whole");
	m.code = 1003;
	m.index = LP_NO_INDEX;
	ck_enc_refused(lp_encode_reintegrate_reply(&b, 1, &m, NULL, 0),
		       "unknown error code");
	m.code = LP_ECONFLICT;
	ck_enc_refused(lp_encode_reintegrate_reply(&b, 1, &m, NULL, 0),
		       "conflict without");
	m.index = 1;
	ck_enc_refused(lp_encode_reintegrate_reply(&b, 1, &m, NULL, 0),
		       "conflict without");
	m.fid = sfid(1);
	ck_assert_int_eq(lp_encode_reintegrate_reply(&b, 1, &m, NULL, 0), 0);
	/* nver: after 40 bytes, the empty message and two empty vvs. */
	put32_at(40 + 2 + 26, 1);
	ck_refused("count larger than the bytes left");
	put32_at(40 + 2 + 26, LP_LIST_MAX + 1);
	ck_refused("count beyond the protocol's limit");
}
END_TEST

/* ----------------------------------------------- tables, codes */

START_TEST(type_table)
{
	for (unsigned int t = 0; t < 300; t++) {
		enum lp_kind k = lp_type_kind(t);
		unsigned int r = lp_reply_type(t);
		bool listed = false;

		for (size_t i = 0; i < NTYPES; i++)
			listed |= all_types[i] == t;
		ck_assert_int_eq(k != LP_K_NONE, listed);
		ck_assert_int_eq(strcmp(lp_type_name(t), "?") != 0, listed);
		ck_assert_int_eq(r != 0, k == LP_K_REQUEST);
		if (r)
			ck_assert_int_eq(lp_type_kind(r), LP_K_REPLY);
	}
	ck_assert_str_eq(lp_type_name(LP_REINTEGRATE), "REINTEGRATE");
	ck_assert_int_eq(lp_type_kind(LP_PERMIT_REVOKE), LP_K_PUSH);
	ck_assert_int_eq(lp_type_kind(LP_DATA), LP_K_DATA);
}
END_TEST

START_TEST(error_codes)
{
	ck_assert_uint_eq(lp_err_from_errno(0), LP_OK);
	ck_assert_uint_eq(lp_err_from_errno(-ENOSPC), LP_ENOSPC);
	ck_assert_uint_eq(lp_err_from_errno(EDQUOT), LP_EDQUOT);
	ck_assert_uint_eq(lp_err_from_errno(-ENOTSUP), LP_EOPNOTSUPP);
	ck_assert_uint_eq(lp_err_from_errno(-ECHILD), LP_EIO);
	ck_assert_uint_eq(lp_err_from_errno(INT_MIN), LP_EIO);
	ck_assert_int_eq(lp_err_to_errno(LP_ESTALE), ESTALE);
	ck_assert_int_eq(lp_err_to_errno(LP_ECONFLICT), EIO);
	ck_assert_int_eq(lp_err_to_errno(12345), EIO);
	ck_assert_int_eq(lp_err_to_errno(LP_OK), 0);
	ck_assert_str_eq(lp_err_name(LP_ENOPERMIT), "ENOPERMIT");
	ck_assert_str_eq(lp_err_name(LP_EUCLEAN), "EUCLEAN");
	ck_assert_str_eq(lp_err_name(3), "?");
	/* The numbers are Linux's on this host too. */
	ck_assert_int_eq(LP_EDQUOT, EDQUOT);
	ck_assert_int_eq(LP_ESTALE, ESTALE);
	ck_assert_int_eq(LP_EPROTONOSUPPORT, EPROTONOSUPPORT);
}
END_TEST

/* ------------------------------------------------- corpus, main */

static int write_file(const char *dir, const char *name, const struct lp_buf *w)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(w->p, 1, w->len, f) != w->len || fclose(f)) {
		perror(path);
		return 1;
	}
	return 0;
}

/* The exchanges a session has: frames that follow one another. */
static void sessions(struct lp_buf *s, unsigned int i)
{
	struct lp_buf *b = s;	/* for MUST */
	struct lp_fetch_reply r = { sstatus(1, LENTO_T_REG), 2500 };
	struct lp_data d = { .more = true };

	switch (i) {
	case 0:		/* handshake, a ping, a lookup */
		sample(s, LP_HELLO, 0);
		sample(s, LP_HELLO_REPLY, 0);
		sample(s, LP_PING, 1);
		sample(s, LP_PONG, 1);
		sample(s, LP_VOLUME_LOOKUP, 0);
		sample(s, LP_VOLUME_LOOKUP_REPLY, 0);
		break;
	case 1:		/* a fetch of 2500 bytes in two chunks */
		r.st.attr.size = 2500;
		MUST(lp_encode_fetch_reply(s, 9, &r));
		MUST(lp_encode_data(s, 9, &d, value, 2000));
		d = (struct lp_data){ .offset = 2000, .flags = LP_DATA_LAST };
		MUST(lp_encode_data(s, 9, &d, value + 2000, 500));
		break;
	case 2:		/* a batch with a STORE, its body, the reply */
		sample(s, LP_REINTEGRATE, 2);
		d = (struct lp_data){ .flags = LP_DATA_LAST };
		MUST(lp_encode_data(s, 1 + 2000, &d, value, 5002));
		sample(s, LP_REINTEGRATE_REPLY, 0);
		break;
	default:	/* pushes among replies */
		sample(s, LP_BREAK, 0);
		sample(s, LP_GETATTR_REPLY, 1);
		sample(s, LP_PERMIT_REVOKE, 1);
		sample(s, LP_BREAK_VOLUME, 2);
		sample(s, LP_ERROR, 3);
		break;
	}
}

static int write_corpus(const char *dir)
{
	struct lp_buf w = { 0 };
	char name[64];
	int rc = 0;

	setup();
	for (size_t t = 0; t < NTYPES; t++) {
		for (unsigned int v = 0; v < NV; v++) {
			w.len = 0;
			sample(&w, all_types[t], v);
			snprintf(name, sizeof(name), "%s-%u",
				 lp_type_name(all_types[t]), v);
			rc |= write_file(dir, name, &w);
		}
	}
	for (unsigned int i = 0; i < 4; i++) {
		w.len = 0;
		sessions(&w, i);
		snprintf(name, sizeof(name), "session-%u", i);
		rc |= write_file(dir, name, &w);
	}
	lp_buf_free(&w);
	return rc;
}

static Suite *lproto_suite(void)
{
	Suite *s = suite_create("lproto");
	TCase *tc = tcase_create("codec");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, samples_round_trip, 0, NTYPES * NV);
	tcase_add_loop_test(tc, samples_truncated, 0, NTYPES * NV);
	tcase_add_test(tc, stream_of_frames);
	tcase_add_test(tc, hello_round_trip);
	tcase_add_test(tc, negotiation);
	tcase_add_test(tc, getattr_round_trip);
	tcase_add_test(tc, getattr_largest);
	tcase_add_test(tc, readdir_round_trip);
	tcase_add_test(tc, readdir_100k);
	tcase_add_test(tc, fetch_round_trip);
	tcase_add_test(tc, fetch_body);
	tcase_add_test(tc, empty_body);
	tcase_add_loop_test(tc, stream_rules, 0, 7);
	tcase_add_test(tc, volume_round_trip);
	tcase_add_test(tc, validate_round_trip);
	tcase_add_test(tc, validate_too_large);
	tcase_add_test(tc, permit_round_trip);
	tcase_add_test(tc, reintegrate_round_trip);
	tcase_add_test(tc, reintegrate_split);
	tcase_add_test(tc, reintegrate_count_bounded);
	tcase_add_test(tc, reintegrate_groups);
	tcase_add_test(tc, reint_reply_round_trip);
	tcase_add_test(tc, error_round_trip);
	tcase_add_test(tc, ping_round_trip);
	tcase_add_test(tc, ping_bytes);
	tcase_add_test(tc, frame_header);
	tcase_add_test(tc, encoder_rolls_back);
	tcase_add_test(tc, bad_hello);
	tcase_add_test(tc, bad_hello_reply);
	tcase_add_test(tc, bad_error);
	tcase_add_loop_test(tc, bad_status, 0, 8);
	tcase_add_test(tc, bad_getattr_reply);
	tcase_add_loop_test(tc, bad_entry_name, 0, 7);
	tcase_add_test(tc, bad_readdir_counts);
	tcase_add_test(tc, bad_readdir_xattrs);
	tcase_add_test(tc, bad_fetch);
	tcase_add_test(tc, bad_data);
	tcase_add_test(tc, zip_bombs);
	tcase_add_test(tc, bad_volume_lookup);
	tcase_add_test(tc, bad_validate);
	tcase_add_loop_test(tc, bad_record, 0, 44);
	tcase_add_test(tc, xattr_mirrored);
	tcase_add_test(tc, bad_batch);
	tcase_add_test(tc, bad_reint_reply);
	tcase_add_test(tc, type_table);
	tcase_add_test(tc, error_codes);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	SRunner *sr;
	int failed;

	if (argc == 3 && !strcmp(argv[1], "--write-corpus"))
		return write_corpus(argv[2]);
	if (argc != 1) {
		fprintf(stderr, "usage: unit-lproto [--write-corpus DIR]\n");
		return 2;
	}
	sr = srunner_create(lproto_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
