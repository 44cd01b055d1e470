/* SPDX-License-Identifier: MIT */
/*
 * The lento wire codec (lproto.h, PROTOCOL.md). Writers and readers go
 * field by field through two small cursors: struct wr appends to an
 * lp_buf and remembers its first error; struct rd takes bytes from a body
 * and remembers the first reason it is malformed, so a decoder reads on
 * and looks once at the end.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>
#include "lproto.h"

_Static_assert(ZSTD_COMPRESSBOUND(LP_CHUNK_MAX) <= LP_ZCHUNK_MAX,
	       "a compressed chunk fits LP_ZCHUNK_MAX");
_Static_assert(40 + LP_AUTH_MAX <= LP_HELLO_MAX,
	       "the largest HELLO fits LP_HELLO_MAX");

#define ARRAY_SIZE(a) (sizeof(a) / sizeof(*(a)))

/* ------------------------------------------------------------ tables */

struct type_info {
	const char *name;
	uint8_t kind;		/* enum lp_kind */
	bool more;		/* may carry LP_F_MORE */
	uint8_t reply;		/* a request's reply type */
};

static const struct type_info types[] = {
	[LP_HELLO] = { "HELLO", LP_K_REQUEST, false, LP_HELLO_REPLY },
	[LP_HELLO_REPLY] = { "HELLO_REPLY", LP_K_REPLY, false, 0 },
	[LP_PING] = { "PING", LP_K_REQUEST, false, LP_PONG },
	[LP_PONG] = { "PONG", LP_K_REPLY, false, 0 },
	[LP_ERROR] = { "ERROR", LP_K_REPLY, false, 0 },
	[LP_GETATTR] = { "GETATTR", LP_K_REQUEST, false, LP_GETATTR_REPLY },
	[LP_GETATTR_REPLY] = { "GETATTR_REPLY", LP_K_REPLY, false, 0 },
	[LP_READDIR] = { "READDIR", LP_K_REQUEST, false, LP_READDIR_REPLY },
	[LP_READDIR_REPLY] = { "READDIR_REPLY", LP_K_REPLY, true, 0 },
	[LP_FETCH] = { "FETCH", LP_K_REQUEST, false, LP_FETCH_REPLY },
	[LP_FETCH_REPLY] = { "FETCH_REPLY", LP_K_REPLY, true, 0 },
	[LP_DATA] = { "DATA", LP_K_DATA, true, 0 },
	[LP_VOLUME_LOOKUP] = { "VOLUME_LOOKUP", LP_K_REQUEST, false,
			       LP_VOLUME_LOOKUP_REPLY },
	[LP_VOLUME_LOOKUP_REPLY] = { "VOLUME_LOOKUP_REPLY", LP_K_REPLY, false,
				     0 },
	[LP_VOLUME_VALIDATE] = { "VOLUME_VALIDATE", LP_K_REQUEST, false,
				 LP_VOLUME_VALIDATE_REPLY },
	[LP_VOLUME_VALIDATE_REPLY] = { "VOLUME_VALIDATE_REPLY", LP_K_REPLY,
				       false, 0 },
	[LP_VALIDATE] = { "VALIDATE", LP_K_REQUEST, false, LP_VALIDATE_REPLY },
	[LP_VALIDATE_REPLY] = { "VALIDATE_REPLY", LP_K_REPLY, false, 0 },
	[LP_PERMIT_ACQUIRE] = { "PERMIT_ACQUIRE", LP_K_REQUEST, false,
				LP_PERMIT_REPLY },
	[LP_PERMIT_RENEW] = { "PERMIT_RENEW", LP_K_REQUEST, false,
			      LP_PERMIT_REPLY },
	[LP_PERMIT_RELEASE] = { "PERMIT_RELEASE", LP_K_REQUEST, false,
				LP_PERMIT_REPLY },
	[LP_PERMIT_REPLY] = { "PERMIT_REPLY", LP_K_REPLY, false, 0 },
	[LP_REINTEGRATE] = { "REINTEGRATE", LP_K_REQUEST, true,
			     LP_REINTEGRATE_REPLY },
	[LP_REINTEGRATE_REPLY] = { "REINTEGRATE_REPLY", LP_K_REPLY, false, 0 },
	[LP_BREAK] = { "BREAK", LP_K_PUSH, false, 0 },
	[LP_BREAK_VOLUME] = { "BREAK_VOLUME", LP_K_PUSH, false, 0 },
	[LP_PERMIT_REVOKE] = { "PERMIT_REVOKE", LP_K_PUSH, false, 0 },
};

static const struct type_info *type_info(unsigned int type)
{
	if (type >= ARRAY_SIZE(types) || !types[type].name)
		return NULL;
	return &types[type];
}

const char *lp_type_name(unsigned int type)
{
	const struct type_info *t = type_info(type);

	return t ? t->name : "?";
}

enum lp_kind lp_type_kind(unsigned int type)
{
	const struct type_info *t = type_info(type);

	return t ? t->kind : LP_K_NONE;
}

unsigned int lp_reply_type(unsigned int request)
{
	const struct type_info *t = type_info(request);

	return t ? t->reply : 0;
}

static const struct {
	uint32_t code;
	int err;		/* host errno; 0: the protocol's own */
	const char *name;
} errs[] = {
	{ LP_EPERM, EPERM, "EPERM" },
	{ LP_ENOENT, ENOENT, "ENOENT" },
	{ LP_EIO, EIO, "EIO" },
	{ LP_EAGAIN, EAGAIN, "EAGAIN" },
	{ LP_ENOMEM, ENOMEM, "ENOMEM" },
	{ LP_EACCES, EACCES, "EACCES" },
	{ LP_EBUSY, EBUSY, "EBUSY" },
	{ LP_EEXIST, EEXIST, "EEXIST" },
	{ LP_EXDEV, EXDEV, "EXDEV" },
	{ LP_ENOTDIR, ENOTDIR, "ENOTDIR" },
	{ LP_EISDIR, EISDIR, "EISDIR" },
	{ LP_EINVAL, EINVAL, "EINVAL" },
	{ LP_EFBIG, EFBIG, "EFBIG" },
	{ LP_ENOSPC, ENOSPC, "ENOSPC" },
	{ LP_EROFS, EROFS, "EROFS" },
	{ LP_EMLINK, EMLINK, "EMLINK" },
	{ LP_ERANGE, ERANGE, "ERANGE" },
	{ LP_EDEADLK, EDEADLK, "EDEADLK" },
	{ LP_ENAMETOOLONG, ENAMETOOLONG, "ENAMETOOLONG" },
	{ LP_ENOSYS, ENOSYS, "ENOSYS" },
	{ LP_ENOTEMPTY, ENOTEMPTY, "ENOTEMPTY" },
	{ LP_ENODATA, ENODATA, "ENODATA" },
	{ LP_EPROTO, EPROTO, "EPROTO" },
	{ LP_EBADMSG, EBADMSG, "EBADMSG" },
	{ LP_EOVERFLOW, EOVERFLOW, "EOVERFLOW" },
	{ LP_EPROTONOSUPPORT, EPROTONOSUPPORT, "EPROTONOSUPPORT" },
	{ LP_EOPNOTSUPP, EOPNOTSUPP, "EOPNOTSUPP" },
	{ LP_ETIMEDOUT, ETIMEDOUT, "ETIMEDOUT" },
	{ LP_ESTALE, ESTALE, "ESTALE" },
	{ LP_EUCLEAN, EUCLEAN, "EUCLEAN" },
	{ LP_EDQUOT, EDQUOT, "EDQUOT" },
	{ LP_ECONFLICT, 0, "ECONFLICT" },
	{ LP_ENOPERMIT, 0, "ENOPERMIT" },
};

static int err_index(uint32_t code)
{
	for (size_t i = 0; i < ARRAY_SIZE(errs); i++)
		if (errs[i].code == code)
			return (int)i;
	return -1;
}

const char *lp_err_name(uint32_t code)
{
	int i = err_index(code);

	if (code == LP_OK)
		return "OK";
	return i < 0 ? "?" : errs[i].name;
}

uint32_t lp_err_from_errno(int err)
{
	if (err < 0 && err != INT_MIN)
		err = -err;
	if (!err)
		return LP_OK;
	for (size_t i = 0; i < ARRAY_SIZE(errs); i++)
		if (errs[i].err == err)
			return errs[i].code;
	return LP_EIO;
}

int lp_err_to_errno(uint32_t code)
{
	int i = err_index(code);

	if (code == LP_OK)
		return 0;
	return i < 0 || !errs[i].err ? EIO : errs[i].err;
}

/* -------------------------------------------------------- byte order */

static void le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> 8 * i);
}

static void le64(uint8_t *p, uint64_t v)
{
	le32(p, (uint32_t)v);
	le32(p + 4, (uint32_t)(v >> 32));
}

static uint16_t ld16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t ld32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t ld64(const uint8_t *p)
{
	return (uint64_t)ld32(p) | (uint64_t)ld32(p + 4) << 32;
}

/* ------------------------------------------------------------ writer */

struct wr {
	struct lp_buf *b;
	size_t start;		/* the frame's first byte in b */
	int err;
};

void lp_buf_free(struct lp_buf *b)
{
	free(b->p);
	ZSTD_freeCCtx(b->zc);
	memset(b, 0, sizeof(*b));
}

/* @n more bytes at the end of the frame, or NULL (w->err says why). */
static uint8_t *room(struct wr *w, size_t n)
{
	struct lp_buf *b = w->b;
	size_t cap;
	uint8_t *p;

	if (w->err)
		return NULL;
	if (n > LP_HDR_SIZE + LP_FRAME_MAX - (b->len - w->start)) {
		w->err = -EMSGSIZE;
		return NULL;
	}
	if (b->cap - b->len < n) {
		for (cap = b->cap ? b->cap : 4096; cap - b->len < n;)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			w->err = -ENOMEM;
			return NULL;
		}
		b->p = p;
		b->cap = cap;
	}
	p = b->p + b->len;
	b->len += n;
	return p;
}

/* Input an encoder cannot even write down. */
static void invalid(struct wr *w, const char *why)
{
	if (!w->err) {
		w->err = -EINVAL;
		w->b->why = why;
	}
}

static void put8(struct wr *w, uint8_t v)
{
	uint8_t *p = room(w, 1);

	if (p)
		*p = v;
}

static void put16(struct wr *w, uint16_t v)
{
	uint8_t *p = room(w, 2);

	if (p)
		le16(p, v);
}

static void put32(struct wr *w, uint32_t v)
{
	uint8_t *p = room(w, 4);

	if (p)
		le32(p, v);
}

static void put64(struct wr *w, uint64_t v)
{
	uint8_t *p = room(w, 8);

	if (p)
		le64(p, v);
}

static void put_bytes(struct wr *w, const void *src, size_t n)
{
	uint8_t *p = room(w, n);

	if (p && n)
		memcpy(p, src, n);
}

/* Bytes with a u16 length; longer than a u16 is refused. */
static void put_str16(struct wr *w, const void *s, size_t n)
{
	if (n > UINT16_MAX)
		return invalid(w, "string longer than 65535 bytes");
	put16(w, (uint16_t)n);
	put_bytes(w, s, n);
}

static void put_blob32(struct wr *w, const void *s, uint32_t n)
{
	put32(w, n);
	put_bytes(w, s, n);
}

/* An error text: at most LP_MSG_MAX bytes, control characters blanked. */
static void put_msg(struct wr *w, const char *msg)
{
	size_t n = msg ? strnlen(msg, LP_MSG_MAX) : 0;
	uint8_t *p;

	put16(w, (uint16_t)n);
	p = room(w, n);
	for (size_t i = 0; p && i < n; i++) {
		uint8_t c = (uint8_t)msg[i];

		p[i] = c < 0x20 || c == 0x7f ? ' ' : c;
	}
}

static void put_fid(struct wr *w, const struct lento_fid *f)
{
	put32(w, f->volume);
	put32(w, f->client);
	put64(w, f->seq);
}

static void put_vv(struct wr *w, const struct lento_vv *vv)
{
	if (vv->n > LENTO_VV_MAX)
		return invalid(w, "version vector with more than LENTO_VV_MAX counters");
	put8(w, (uint8_t)vv->n);
	for (uint32_t i = 0; i < vv->n; i++)
		put64(w, vv->v[i]);
	put32(w, vv->store.client);
	put64(w, vv->store.seq);
}

static void put_attr(struct wr *w, const struct lento_attr *a)
{
	put32(w, a->valid);
	put32(w, a->mode);
	put32(w, a->uid);
	put32(w, a->gid);
	put64(w, a->size);
	put64(w, (uint64_t)a->atime_ns);
	put64(w, (uint64_t)a->mtime_ns);
	put64(w, (uint64_t)a->ctime_ns);
	put64(w, a->rdev);
}

static void put_status(struct wr *w, const struct lento_status *st)
{
	put_fid(w, &st->fid);
	put8(w, st->type);
	put32(w, st->nlink);
	put_attr(w, &st->attr);
	put_vv(w, &st->vv);
}

/* A C string from a fixed array of @size bytes, its NUL included. */
static void put_cstr(struct wr *w, const char *s, size_t size)
{
	size_t n = strnlen(s, size);

	if (n == size)
		invalid(w, "name without its NUL");
	else
		put_str16(w, s, n);
}

static void begin(struct wr *w, struct lp_buf *b, unsigned int type,
		  uint32_t tag)
{
	uint8_t *h;

	w->b = b;
	w->start = b->len;
	w->err = 0;
	h = room(w, LP_HDR_SIZE);
	if (type > UINT16_MAX)
		invalid(w, "unknown frame type");
	if (!h)
		return;
	memset(h, 0, LP_HDR_SIZE);
	le16(h + 4, (uint16_t)type);
	le32(h + 8, tag);
}

/*
 * Seal the frame: its length and flags, then the decoder's verdict on
 * it. On any failure the frame is taken back off the buffer.
 */
static int finish(struct wr *w, uint16_t flags)
{
	struct lp_buf *b = w->b;
	struct lp_frame f;
	const char *why = NULL;
	uint8_t *h;

	if (!w->err) {
		h = b->p + w->start;
		le32(h, (uint32_t)(b->len - w->start - LP_HDR_SIZE));
		le16(h + 6, flags);
		if (lp_frame_parse(h, b->len - w->start, &f, &why) <= 0 ||
		    lp_frame_check(&f, &why))
			invalid(w, why);
	}
	if (w->err)
		b->len = w->start;
	return w->err;
}

/* ------------------------------------------------------------ reader */

struct rd {
	const uint8_t *p;
	size_t n;		/* bytes left */
	const char *why;	/* the first thing wrong */
};

static void fail(struct rd *r, const char *why)
{
	if (!r->why)
		r->why = why;
}

static const uint8_t *take(struct rd *r, size_t k)
{
	const uint8_t *p = r->p;

	if (r->why)
		return NULL;
	if (k > r->n) {
		fail(r, "message ends inside a field (truncated)");
		return NULL;
	}
	r->p += k;
	r->n -= k;
	return p;
}

static uint8_t get8(struct rd *r)
{
	const uint8_t *p = take(r, 1);

	return p ? *p : 0;
}

static uint16_t get16(struct rd *r)
{
	const uint8_t *p = take(r, 2);

	return p ? ld16(p) : 0;
}

static uint32_t get32(struct rd *r)
{
	const uint8_t *p = take(r, 4);

	return p ? ld32(p) : 0;
}

static uint64_t get64(struct rd *r)
{
	const uint8_t *p = take(r, 8);

	return p ? ld64(p) : 0;
}

/* A count of items at least @min bytes each, at most @max of them. */
static uint32_t get_count(struct rd *r, size_t min, uint32_t max)
{
	uint32_t n = get32(r);

	if (n > max)
		fail(r, "count beyond the protocol's limit");
	else if (n > r->n / min)
		fail(r, "count larger than the bytes left could hold");
	return r->why ? 0 : n;
}

/* @f's body as a reader, failed already unless @ok. */
static struct rd body_if(const struct lp_frame *f, bool ok)
{
	struct rd r = { f->body, f->len, NULL };

	if (!ok)
		fail(&r, "frame is not of the type decoded");
	else if (!f->body)
		fail(&r, "frame without its body");
	return r;
}

static struct rd body(const struct lp_frame *f, unsigned int type)
{
	return body_if(f, f->type == type);
}

/* The same, for decoders of several types (@ok, @nok of them). */
static struct rd body2(const struct lp_frame *f, const unsigned int *ok,
		       size_t nok)
{
	bool match = false;

	for (size_t i = 0; i < nok; i++)
		match |= f->type == ok[i];
	return body_if(f, match);
}

static int done(struct rd *r, const char **why)
{
	if (!r->why && r->n)
		fail(r, "trailing bytes after the message");
	if (!r->why)
		return 0;
	*why = r->why;
	return -EBADMSG;
}

/* ---------------------------------------------------- value checks */

static bool has_byte(const void *p, size_t n, int c)
{
	return n && memchr(p, c, n);
}

/*
 * Why @s is not a directory entry's name, or NULL. Its callers already
 * hold it to LENTO_NAME_MAX bytes (get_cstr, a name array's size).
 */
static const char *entry_name_invalid(const char *s, size_t n)
{
	if (!n)
		return "empty entry name";
	if (has_byte(s, n, '/') || has_byte(s, n, '\0'))
		return "entry name with '/' or NUL";
	if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
		return "entry name \".\" or \"..\"";
	return NULL;
}

static const char *xattr_name_invalid(const char *s, size_t n)
{
	if (!n)
		return "empty xattr name";
	if (n > LENTO_XATTR_NAME_MAX)
		return "xattr name longer than LENTO_XATTR_NAME_MAX";
	if (has_byte(s, n, '\0'))
		return "xattr name with NUL";
	return NULL;
}

static const char *target_invalid(const char *s, size_t n)
{
	if (!n)
		return "empty symlink target";
	if (n > LENTO_SYMLINK_MAX)
		return "symlink target longer than LENTO_SYMLINK_MAX";
	if (has_byte(s, n, '\0'))
		return "symlink target with NUL";
	return NULL;
}

static const char *volname_invalid(const char *s, size_t n)
{
	if (!n || n > LENTO_VOLNAME_MAX)
		return "volume name empty or longer than LENTO_VOLNAME_MAX";
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] > 0x7e || s[i] == '/')
			return "volume name not printable ASCII without '/'";
	return NULL;
}

static const char *attr_invalid(const struct lento_attr *a)
{
	if (a->valid & ~(uint32_t)LENTO_A_ALL)
		return "unknown attribute bits";
	if (a->mode & ~07777U)
		return "mode beyond the permission bits";
	if (a->size > INT64_MAX)
		return "size beyond 2^63 - 1";
	return NULL;
}

static bool valid_type(unsigned int t)
{
	return t >= LENTO_T_REG && t <= LENTO_T_BLK;
}

static bool known_err(uint32_t code)
{
	return err_index(code) >= 0;
}

/* -------------------------------------------------- common fields */

static void get_fid(struct rd *r, struct lento_fid *f)
{
	f->volume = get32(r);
	f->client = get32(r);
	f->seq = get64(r);
}

static void get_used_fid(struct rd *r, struct lento_fid *f)
{
	get_fid(r, f);
	if (lento_fid_is_null(f))
		fail(r, "null fid");
}

static void get_vv(struct rd *r, struct lento_vv *vv)
{
	memset(vv, 0, sizeof(*vv));
	vv->n = get8(r);
	if (vv->n > LENTO_VV_MAX) {
		fail(r, "version vector with more than LENTO_VV_MAX counters");
		return;
	}
	for (uint32_t i = 0; i < vv->n; i++)
		vv->v[i] = get64(r);
	vv->store.client = get32(r);
	vv->store.seq = get64(r);
}

static void get_attr(struct rd *r, struct lento_attr *a)
{
	const char *why;

	a->valid = get32(r);
	a->mode = get32(r);
	a->uid = get32(r);
	a->gid = get32(r);
	a->size = get64(r);
	a->atime_ns = (int64_t)get64(r);
	a->mtime_ns = (int64_t)get64(r);
	a->ctime_ns = (int64_t)get64(r);
	a->rdev = get64(r);
	why = attr_invalid(a);
	if (why)
		fail(r, why);
}

#define STATUS_MIN	(16 + 1 + 4 + 56 + 13)

static void get_status(struct rd *r, struct lento_status *st)
{
	memset(st, 0, sizeof(*st));
	get_used_fid(r, &st->fid);
	st->type = get8(r);
	st->nlink = get32(r);
	get_attr(r, &st->attr);
	get_vv(r, &st->vv);
	if (!valid_type(st->type))
		fail(r, "unknown object type");
	if (st->attr.valid != LENTO_A_ALL)
		fail(r, "status without every attribute");
}

/* u16-length bytes, at most @max (else @toolong); NULL if bad. */
static const char *get_str16(struct rd *r, size_t max, uint32_t *len,
			     const char *toolong)
{
	uint16_t n = get16(r);

	*len = 0;
	if (n > max) {
		fail(r, toolong);
		return NULL;
	}
	*len = n;
	return (const char *)take(r, n);
}

static const void *get_blob32(struct rd *r, size_t max, uint32_t *len,
			      const char *toolong)
{
	uint32_t n = get32(r);

	*len = 0;
	if (n > max) {
		fail(r, toolong);
		return NULL;
	}
	*len = n;
	return take(r, n);
}

/* A name copied into @dst (@size bytes): no NUL inside, shorter. */
static size_t get_cstr(struct rd *r, char *dst, size_t size)
{
	uint32_t n;
	const char *s = get_str16(r, size - 1, &n, size == LENTO_NAME_MAX + 1 ?
				  "name longer than LENTO_NAME_MAX" :
				  "volume name longer than LENTO_VOLNAME_MAX");

	dst[0] = '\0';
	if (!s)
		return 0;
	if (has_byte(s, n, '\0')) {
		fail(r, "name with NUL");
		return 0;
	}
	memcpy(dst, s, n);
	dst[n] = '\0';
	return n;
}

/* A symlink target where @type says there is one, else nothing. */
static const char *get_target(struct rd *r, uint8_t type, uint32_t *len)
{
	const char *s = get_str16(r, LENTO_SYMLINK_MAX, len,
				  "symlink target longer than LENTO_SYMLINK_MAX");
	const char *why;

	if (r->why)
		return NULL;
	if (type != LENTO_T_SYMLINK) {
		if (*len)
			fail(r, "symlink target on an object not a symlink");
		return NULL;
	}
	why = target_invalid(s, *len);
	if (why)
		fail(r, why);
	return s;
}

static const char *get_msg(struct rd *r, uint32_t *len)
{
	const char *s = get_str16(r, LP_MSG_MAX, len,
				  "message longer than LP_MSG_MAX");

	for (uint32_t i = 0; s && i < *len; i++)
		if ((uint8_t)s[i] < 0x20 || s[i] == 0x7f)
			fail(r, "control character in a message");
	return s;
}

/* The items of lists: struct lp_list.kind. */
enum { L_NONE, L_DIRENT, L_VOLSTAMP, L_VOLRESULT, L_FIDVV, L_REC, L_XATTR,
       L_KINDS };

typedef void item_fn(struct rd *r, void *out);
static item_fn get_dirent, get_volstamp, get_volresult, get_fidvv, get_rec,
	get_xattr_item;

static item_fn *const items[L_KINDS] = {
	[L_DIRENT] = get_dirent,
	[L_VOLSTAMP] = get_volstamp,
	[L_VOLRESULT] = get_volresult,
	[L_FIDVV] = get_fidvv,
	[L_REC] = get_rec,
	[L_XATTR] = get_xattr_item,
};

/*
 * The list of @count items of @kind that starts where @r is, each checked
 * by @check (NULL: the kind's reader) into @scratch.
 */
static void get_list(struct rd *r, struct lp_list *l, uint32_t count,
		     int kind, item_fn *check, void *scratch)
{
	const uint8_t *start = r->p;

	if (!check)
		check = items[kind];
	for (uint32_t i = 0; i < count && !r->why; i++)
		check(r, scratch);
	l->p = start;
	l->n = r->why ? 0 : (size_t)(r->p - start);
	l->left = r->why ? 0 : count;
	l->kind = (uint8_t)kind;
}

/* The next item of a list its decoder accepted, if of a kind in @kinds. */
static int next(struct lp_list *l, unsigned int kinds, void *out)
{
	struct rd r = { l->p, l->n, NULL };

	if (!l->left)
		return 0;
	if (l->kind >= L_KINDS || !(kinds & 1U << l->kind))
		return -EINVAL;
	items[l->kind](&r, out);
	if (r.why) {		/* not a list a decoder accepted */
		l->left = 0;
		return -EBADMSG;
	}
	l->p = r.p;
	l->n = r.n;
	l->left--;
	return 1;
}

/* ------------------------------------------------------------ frames */

ssize_t lp_frame_parse(const uint8_t *p, size_t n, struct lp_frame *f,
		       const char **why)
{
	const struct type_info *t;

	memset(f, 0, sizeof(*f));
	if (n < LP_HDR_SIZE)
		return 0;
	f->len = ld32(p);
	f->type = ld16(p + 4);
	f->flags = ld16(p + 6);
	f->tag = ld32(p + 8);
	t = type_info(f->type);
	*why = NULL;
	if (!t)
		*why = "unknown frame type";
	else if (f->flags & ~LP_F_MORE || (f->flags && !t->more))
		*why = "flag not allowed on this frame type";
	else if ((t->kind == LP_K_PUSH) != !f->tag)
		*why = "tag 0 on a request or reply, or not 0 on a push";
	else if (f->len > LP_FRAME_MAX)
		*why = "frame longer than LP_FRAME_MAX";
	if (*why)
		return -EBADMSG;
	if (n - LP_HDR_SIZE < f->len)
		return 0;
	f->body = p + LP_HDR_SIZE;
	return (ssize_t)(LP_HDR_SIZE + f->len);
}

/* ---------------------------------------------------------- HELLO */

int lp_encode_hello(struct lp_buf *b, uint32_t tag, const struct lp_hello *m)
{
	struct wr w;

	begin(&w, b, LP_HELLO, tag);
	put_bytes(&w, LP_MAGIC, 8);
	put16(&w, m->vmin);
	put16(&w, m->vmax);
	put32(&w, 0);		/* flags */
	put32(&w, m->client);
	put_bytes(&w, m->uuid, 16);
	put_blob32(&w, m->auth, m->auth_len);
	return finish(&w, 0);
}

int lp_decode_hello(const struct lp_frame *f, struct lp_hello *m,
		    const char **why)
{
	struct rd r = body(f, LP_HELLO);
	static const uint8_t zero[16];
	const uint8_t *magic = take(&r, 8);

	memset(m, 0, sizeof(*m));
	if (magic && memcmp(magic, LP_MAGIC, 8))
		fail(&r, "not a lento client (bad magic)");
	m->vmin = get16(&r);
	m->vmax = get16(&r);
	if (get32(&r))
		fail(&r, "HELLO flags not zero");
	m->client = get32(&r);
	memcpy(m->uuid, take(&r, 16) ?: zero, 16);
	m->auth = get_blob32(&r, LP_AUTH_MAX, &m->auth_len,
			     "auth longer than LP_AUTH_MAX");
	if (!m->vmin || m->vmin > m->vmax)
		fail(&r, "version range empty or from 0");
	if (!memcmp(m->uuid, zero, 16))
		fail(&r, "client uuid all zero");
	return done(&r, why);
}

unsigned int lp_negotiate(const struct lp_hello *m)
{
	unsigned int hi = m->vmax < LP_VERSION_MAX ? m->vmax : LP_VERSION_MAX;
	unsigned int lo = m->vmin > LP_VERSION_MIN ? m->vmin : LP_VERSION_MIN;

	return hi >= lo ? hi : 0;
}

int lp_encode_hello_reply(struct lp_buf *b, uint32_t tag,
			  const struct lp_hello_reply *m)
{
	struct wr w;

	begin(&w, b, LP_HELLO_REPLY, tag);
	put16(&w, m->version);
	put32(&w, 0);		/* flags */
	put32(&w, m->client);
	put64(&w, m->epoch);
	put32(&w, m->heartbeat_ms);
	put_blob32(&w, m->auth, m->auth_len);
	return finish(&w, 0);
}

int lp_decode_hello_reply(const struct lp_frame *f, struct lp_hello_reply *m,
			  const char **why)
{
	struct rd r = body(f, LP_HELLO_REPLY);

	memset(m, 0, sizeof(*m));
	m->version = get16(&r);
	if (get32(&r))
		fail(&r, "HELLO_REPLY flags not zero");
	m->client = get32(&r);
	m->epoch = get64(&r);
	m->heartbeat_ms = get32(&r);
	m->auth = get_blob32(&r, LP_AUTH_MAX, &m->auth_len,
			     "auth longer than LP_AUTH_MAX");
	if (m->version < LP_VERSION_MIN || m->version > LP_VERSION_MAX)
		fail(&r, "negotiated a version this code does not speak");
	if (!m->client)
		fail(&r, "client id 0");
	if (!m->epoch)
		fail(&r, "server epoch 0");
	if (m->heartbeat_ms < LP_HEARTBEAT_MIN_MS ||
	    m->heartbeat_ms > LP_HEARTBEAT_MAX_MS)
		fail(&r, "heartbeat interval out of range");
	return done(&r, why);
}

/* ---------------------------------------------------- PING, ERROR */

int lp_encode_ping(struct lp_buf *b, unsigned int type, uint32_t tag,
		   uint64_t nonce)
{
	struct wr w;

	begin(&w, b, type, tag);
	put64(&w, nonce);
	return finish(&w, 0);
}

int lp_decode_ping(const struct lp_frame *f, uint64_t *nonce,
		   const char **why)
{
	static const unsigned int ok[] = { LP_PING, LP_PONG };
	struct rd r = body2(f, ok, ARRAY_SIZE(ok));

	*nonce = get64(&r);
	return done(&r, why);
}

int lp_encode_error(struct lp_buf *b, uint32_t tag, uint32_t code,
		    const char *msg)
{
	struct wr w;

	begin(&w, b, LP_ERROR, tag);
	put32(&w, code);
	put_msg(&w, msg);
	return finish(&w, 0);
}

int lp_decode_error(const struct lp_frame *f, struct lp_error *m,
		    const char **why)
{
	struct rd r = body(f, LP_ERROR);

	memset(m, 0, sizeof(*m));
	m->code = get32(&r);
	m->msg = get_msg(&r, &m->msg_len);
	if (m->code == LP_OK || !known_err(m->code))
		fail(&r, "unknown error code");
	return done(&r, why);
}

/* ---------------------------------------------- one fid, one volume */

static const unsigned int fid_types[] = { LP_GETATTR, LP_READDIR, LP_BREAK };
static const unsigned int volume_types[] = {
	LP_PERMIT_ACQUIRE, LP_PERMIT_RENEW, LP_PERMIT_RELEASE,
	LP_BREAK_VOLUME, LP_PERMIT_REVOKE,
};

int lp_encode_fid(struct lp_buf *b, unsigned int type, uint32_t tag,
		  const struct lento_fid *fid)
{
	struct wr w;

	begin(&w, b, type, tag);
	put_fid(&w, fid);
	return finish(&w, 0);
}

int lp_decode_fid(const struct lp_frame *f, struct lento_fid *fid,
		  const char **why)
{
	struct rd r = body2(f, fid_types, ARRAY_SIZE(fid_types));

	get_used_fid(&r, fid);
	return done(&r, why);
}

int lp_encode_volume(struct lp_buf *b, unsigned int type, uint32_t tag,
		     uint32_t volume)
{
	struct wr w;

	begin(&w, b, type, tag);
	put32(&w, volume);
	return finish(&w, 0);
}

int lp_decode_volume(const struct lp_frame *f, uint32_t *volume,
		     const char **why)
{
	struct rd r = body2(f, volume_types, ARRAY_SIZE(volume_types));

	*volume = get32(&r);
	return done(&r, why);
}

/* ---------------------------------------------------------- GETATTR */

/* An object's xattrs: a count, then each (name str16, value blob32). */
static void put_xattrs(struct wr *w, uint32_t n, const struct lp_xattr *x)
{
	if (n > LENTO_XATTRS_MAX)
		invalid(w, "more than LENTO_XATTRS_MAX xattrs");
	put16(w, (uint16_t)n);
	for (uint32_t i = 0; i < n && !w->err; i++) {
		put_str16(w, x[i].name, x[i].name_len);
		put_blob32(w, x[i].value, x[i].value_len);
	}
}

int lp_encode_getattr_reply(struct lp_buf *b, uint32_t tag,
			    const struct lp_getattr_reply *m)
{
	struct wr w;

	begin(&w, b, LP_GETATTR_REPLY, tag);
	put_status(&w, &m->st);
	put_str16(&w, m->target, m->target_len);
	put_xattrs(&w, m->nxattr, m->xattr);
	return finish(&w, 0);
}

static void get_xattr(struct rd *r, struct lp_xattr *x)
{
	const char *why;

	x->name = get_str16(r, LENTO_XATTR_NAME_MAX, &x->name_len,
			    "xattr name longer than LENTO_XATTR_NAME_MAX");
	x->value = get_blob32(r, LENTO_XATTR_SIZE_MAX, &x->value_len,
			      "xattr value larger than LENTO_XATTR_SIZE_MAX");
	why = r->why ? NULL : xattr_name_invalid(x->name, x->name_len);
	if (why)
		fail(r, why);
}

static void get_xattr_item(struct rd *r, void *out)
{
	get_xattr(r, out);
}

/* The xattrs read so far of one object: no name twice. */
struct xattr_seen {
	uint32_t n;
	struct lp_xattr *x;	/* LENTO_XATTRS_MAX of them */
};

static void check_xattr(struct rd *r, void *scratch)
{
	struct xattr_seen *s = scratch;
	struct lp_xattr *x = &s->x[s->n];

	get_xattr(r, x);
	for (uint32_t j = 0; j < s->n && !r->why; j++)
		if (s->x[j].name_len == x->name_len &&
		    !memcmp(s->x[j].name, x->name, x->name_len))
			fail(r, "xattr listed twice");
	s->n++;
}

/* A count and that many xattrs, each checked into @x (64 of them). */
static void get_xattrs(struct rd *r, struct lp_list *l, struct lp_xattr *x)
{
	struct xattr_seen seen = { .x = x };
	uint32_t n = get16(r);

	if (n > LENTO_XATTRS_MAX)
		fail(r, "more than LENTO_XATTRS_MAX xattrs");
	get_list(r, l, r->why ? 0 : n, L_XATTR, check_xattr, &seen);
}

int lp_next_xattr(struct lp_list *l, struct lp_xattr *x)
{
	return next(l, 1U << L_XATTR, x);
}

int lp_decode_getattr_reply(const struct lp_frame *f,
			    struct lp_getattr_reply *m, const char **why)
{
	struct rd r = body(f, LP_GETATTR_REPLY);
	struct lp_list l;

	memset(m, 0, sizeof(*m));
	get_status(&r, &m->st);
	m->target = get_target(&r, m->st.type, &m->target_len);
	get_xattrs(&r, &l, m->xattr);
	m->nxattr = r.why ? 0 : l.left;
	return done(&r, why);
}

/* ---------------------------------------------------------- READDIR */

#define DIRENT_MIN	(2 + 1 + STATUS_MIN + 2 + 2)

static void get_dirent(struct rd *r, void *out)
{
	struct lp_xattr scratch[LENTO_XATTRS_MAX];
	struct lp_dirent *d = out;
	size_t n = get_cstr(r, d->de.name, sizeof(d->de.name));
	const char *why = r->why ? NULL : entry_name_invalid(d->de.name, n);

	if (why)
		fail(r, why);
	get_status(r, &d->de.st);
	d->target = get_target(r, d->de.st.type, &d->target_len);
	get_xattrs(r, &d->xattrs, scratch);
	d->nxattr = d->xattrs.left;
	d->xattr = NULL;
}

int lp_next_dirent(struct lp_list *l, struct lp_dirent *d)
{
	return next(l, 1U << L_DIRENT, d);
}

static void put_dirent(struct wr *w, const struct lp_dirent *d)
{
	put_cstr(w, d->de.name, sizeof(d->de.name));
	put_status(w, &d->de.st);
	put_str16(w, d->target, d->target_len);
	put_xattrs(w, d->nxattr, d->xattr);
}

int lp_encode_readdir_reply(struct lp_buf *b, uint32_t tag,
			    const struct lp_readdir_reply *m,
			    const struct lp_dirent *ents, uint32_t n)
{
	struct wr w;
	size_t at;
	uint32_t i = 0;
	int err;

	begin(&w, b, LP_READDIR_REPLY, tag);
	put_status(&w, &m->dir);
	put32(&w, m->total);
	put32(&w, m->first);
	/* The directory's own xattrs, in the first frame only. */
	if (m->first)
		put16(&w, 0);
	else
		put_xattrs(&w, m->dir_nxattr, m->dir_xattr);
	at = b->len;
	put32(&w, 0);		/* count, once known */
	for (; i < n && !w.err; i++) {
		if (i && b->len - w.start >= LP_SPLIT_TARGET)
			break;
		put_dirent(&w, &ents[i]);
	}
	if (!w.err)
		le32(b->p + at, i);
	err = finish(&w, (uint64_t)m->first + i < m->total ? LP_F_MORE : 0);
	return err ? err : (int)i;
}

int lp_decode_readdir_reply(const struct lp_frame *f,
			    struct lp_readdir_reply *m, const char **why)
{
	struct rd r = body(f, LP_READDIR_REPLY);
	struct lp_xattr xscratch[LENTO_XATTRS_MAX];
	struct lp_dirent scratch;

	memset(m, 0, sizeof(*m));
	get_status(&r, &m->dir);
	m->total = get32(&r);
	m->first = get32(&r);
	get_xattrs(&r, &m->dir_xattrs, xscratch);
	m->dir_nxattr = m->dir_xattrs.left;
	if (m->first && m->dir_nxattr)
		fail(&r, "the directory's xattrs in a frame but the first");
	m->count = get_count(&r, DIRENT_MIN, LP_DIR_MAX);
	m->more = f->flags & LP_F_MORE;
	if (m->dir.type != LENTO_T_DIR)
		fail(&r, "listing of an object not a directory");
	if (m->total > LP_DIR_MAX || m->first > m->total ||
	    m->count > m->total - m->first)
		fail(&r, "entries beyond the listing's total");
	if (!m->count && m->total)
		fail(&r, "frame without entries in a listing with some");
	if (m->more != (m->first + m->count < m->total))
		fail(&r, "MORE flag disagrees with the entries left");
	get_list(&r, &m->ents, m->count, L_DIRENT, NULL, &scratch);
	return done(&r, why);
}

/* ------------------------------------------------------ FETCH, DATA */

int lp_encode_fetch(struct lp_buf *b, uint32_t tag, const struct lp_fetch *m)
{
	struct wr w;

	begin(&w, b, LP_FETCH, tag);
	put_fid(&w, &m->fid);
	put_vv(&w, &m->expect);
	return finish(&w, 0);
}

int lp_decode_fetch(const struct lp_frame *f, struct lp_fetch *m,
		    const char **why)
{
	struct rd r = body(f, LP_FETCH);

	memset(m, 0, sizeof(*m));
	get_used_fid(&r, &m->fid);
	get_vv(&r, &m->expect);
	return done(&r, why);
}

int lp_encode_fetch_reply(struct lp_buf *b, uint32_t tag,
			  const struct lp_fetch_reply *m)
{
	struct wr w;

	begin(&w, b, LP_FETCH_REPLY, tag);
	put_status(&w, &m->st);
	put64(&w, m->size);
	return finish(&w, LP_F_MORE);
}

int lp_decode_fetch_reply(const struct lp_frame *f, struct lp_fetch_reply *m,
			  const char **why)
{
	struct rd r = body(f, LP_FETCH_REPLY);

	memset(m, 0, sizeof(*m));
	get_status(&r, &m->st);
	m->size = get64(&r);
	if (m->st.type != LENTO_T_REG)
		fail(&r, "FETCH of an object not a regular file");
	if (m->size != m->st.attr.size)
		fail(&r, "body size disagrees with the status");
	if (!(f->flags & LP_F_MORE))
		fail(&r, "FETCH_REPLY without MORE: its DATA must follow");
	return done(&r, why);
}

int lp_encode_data(struct lp_buf *b, uint32_t tag, const struct lp_data *d,
		   const void *raw, uint32_t raw_len)
{
	size_t bound = ZSTD_compressBound(raw_len), zlen, at;
	struct wr w;
	uint8_t *z;

	begin(&w, b, LP_DATA, tag);
	if (raw_len > LP_CHUNK_MAX)
		invalid(&w, "chunk larger than LP_CHUNK_MAX");
	put32(&w, d->rec);
	put32(&w, d->flags);
	put64(&w, d->offset);
	put32(&w, raw_len);
	at = b->len;
	put32(&w, 0);		/* zlen, once known */
	z = room(&w, bound);
	/*
	 * One context per buffer: a new one per chunk (ZSTD_compress) costs
	 * an allocation of its tables and their page faults every time.
	 */
	if (z && !b->zc) {
		b->zc = ZSTD_createCCtx();
		if (!b->zc)
			w.err = -ENOMEM;
	}
	if (z && b->zc) {
		zlen = ZSTD_compressCCtx(b->zc, z, bound, raw_len ? raw : "",
					 raw_len, LP_ZSTD_LEVEL);
		if (ZSTD_isError(zlen)) {
			w.err = -ENOMEM;	/* its only failure here */
		} else {
			b->len -= bound - zlen;
			le32(b->p + at, (uint32_t)zlen);
		}
	}
	return finish(&w, d->more ? LP_F_MORE : 0);
}

int lp_decode_data(const struct lp_frame *f, struct lp_data *d,
		   const char **why)
{
	struct rd r = body(f, LP_DATA);

	memset(d, 0, sizeof(*d));
	d->rec = get32(&r);
	d->flags = get32(&r);
	d->offset = get64(&r);
	d->raw_len = get32(&r);
	d->z = get_blob32(&r, LP_ZCHUNK_MAX, &d->zlen,
			  "compressed chunk larger than LP_ZCHUNK_MAX");
	d->more = f->flags & LP_F_MORE;
	if (d->flags & ~(uint32_t)LP_DATA_LAST)
		fail(&r, "unknown DATA flags");
	if (d->raw_len > LP_CHUNK_MAX)
		fail(&r, "chunk larger than LP_CHUNK_MAX");
	if (d->offset > (uint64_t)INT64_MAX - d->raw_len)
		fail(&r, "chunk beyond 2^63 - 1 bytes");
	if (!d->raw_len && (d->offset || !(d->flags & LP_DATA_LAST)))
		fail(&r, "empty chunk that is not a whole empty body");
	if (!d->zlen)
		fail(&r, "chunk without compressed bytes");
	return done(&r, why);
}

void lp_zd_free(void **zd)
{
	ZSTD_freeDCtx(*zd);
	*zd = NULL;
}

int lp_chunk_decompress(const struct lp_data *d, void *dst, size_t cap,
			const char **why, void **zd)
{
	size_t got;

	*why = NULL;
	if (d->raw_len > LP_CHUNK_MAX || d->raw_len > cap)
		*why = "chunk larger than the buffer for it";
	else if (d->zlen < 4 || ld32(d->z) != ZSTD_MAGICNUMBER)
		*why = "chunk is not a zstd frame";
	else if (ZSTD_findFrameCompressedSize(d->z, d->zlen) != d->zlen)
		*why = "chunk is not exactly one zstd frame";
	else if (ZSTD_getFrameContentSize(d->z, d->zlen) != d->raw_len)
		*why = "zstd frame's size is not the chunk's";
	if (*why)
		return -EBADMSG;
	/* Never room for more than raw_len: a lying frame fails here. */
	if (zd && !*zd)
		*zd = ZSTD_createDCtx();
	got = zd && *zd ? ZSTD_decompressDCtx(*zd, dst, d->raw_len, d->z,
					      d->zlen) :
	      ZSTD_decompress(dst, d->raw_len, d->z, d->zlen);
	if (ZSTD_isError(got) || got != d->raw_len) {
		*why = "zstd data corrupt or not of its declared size";
		return -EBADMSG;
	}
	return 0;
}

void lp_stream_init(struct lp_stream *s, uint32_t rec, uint64_t total,
		    bool final)
{
	s->rec = rec;
	s->final = final;
	s->done = false;
	s->next = 0;
	s->total = total;
}

int lp_stream_data(struct lp_stream *s, const struct lp_data *d,
		   const char **why)
{
	uint64_t end = s->next + d->raw_len;
	bool last = end == s->total;

	*why = NULL;
	if (s->done)
		*why = "DATA after the body was complete";
	else if (d->rec != s->rec)
		*why = "DATA for another record than the body due";
	else if (d->offset != s->next)
		*why = "chunk not at the offset due";
	else if (d->raw_len > s->total - s->next)
		*why = "chunks run past the body's size";
	else if (!d->raw_len && s->total)
		*why = "empty chunk in a body that is not empty";
	else if (!(d->flags & LP_DATA_LAST) != !last)
		*why = "LAST flag disagrees with the body's size";
	else if (d->more == (last && s->final))
		*why = "MORE flag disagrees with the chunks left";
	if (*why)
		return -EBADMSG;
	s->next = end;
	s->done = last;
	return last;
}

/* ---------------------------------------------------------- volumes */

int lp_encode_volume_lookup(struct lp_buf *b, uint32_t tag, const char *name)
{
	struct wr w;

	begin(&w, b, LP_VOLUME_LOOKUP, tag);
	put_str16(&w, name, strnlen(name, LENTO_VOLNAME_MAX + 1));
	return finish(&w, 0);
}

int lp_decode_volume_lookup(const struct lp_frame *f,
			    char name[LENTO_VOLNAME_MAX + 1], const char **why)
{
	struct rd r = body(f, LP_VOLUME_LOOKUP);
	size_t n = get_cstr(&r, name, LENTO_VOLNAME_MAX + 1);
	const char *bad = r.why ? NULL : volname_invalid(name, n);

	if (bad)
		fail(&r, bad);
	return done(&r, why);
}

int lp_encode_volume_lookup_reply(struct lp_buf *b, uint32_t tag,
				  const struct lp_volume *m)
{
	struct wr w;

	begin(&w, b, LP_VOLUME_LOOKUP_REPLY, tag);
	put32(&w, m->volume);
	put_fid(&w, &m->root);
	put64(&w, m->stamp);
	return finish(&w, 0);
}

int lp_decode_volume_lookup_reply(const struct lp_frame *f,
				  struct lp_volume *m, const char **why)
{
	struct rd r = body(f, LP_VOLUME_LOOKUP_REPLY);

	m->volume = get32(&r);
	get_used_fid(&r, &m->root);
	m->stamp = get64(&r);
	if (m->root.volume != m->volume)
		fail(&r, "root fid in another volume");
	return done(&r, why);
}

static void get_volstamp(struct rd *r, void *out)
{
	struct lp_volstamp *v = out;

	v->volume = get32(r);
	v->stamp = get64(r);
	v->result = 0;
}

static void get_volresult(struct rd *r, void *out)
{
	struct lp_volstamp *v = out;

	v->volume = get32(r);
	v->result = get8(r);
	v->stamp = get64(r);
	if (v->result > LP_VOL_UNKNOWN)
		fail(r, "unknown volume validation result");
}

static int encode_volstamps(struct lp_buf *b, unsigned int type,
			    uint32_t tag, const struct lp_volstamp *v,
			    uint32_t n)
{
	struct wr w;

	begin(&w, b, type, tag);
	put32(&w, n);
	for (uint32_t i = 0; i < n && !w.err; i++) {
		put32(&w, v[i].volume);
		if (type == LP_VOLUME_VALIDATE_REPLY)
			put8(&w, v[i].result);
		put64(&w, v[i].stamp);
	}
	return finish(&w, 0);
}

int lp_encode_volume_validate(struct lp_buf *b, uint32_t tag,
			      const struct lp_volstamp *v, uint32_t n)
{
	return encode_volstamps(b, LP_VOLUME_VALIDATE, tag, v, n);
}

int lp_encode_volume_validate_reply(struct lp_buf *b, uint32_t tag,
				    const struct lp_volstamp *v, uint32_t n)
{
	return encode_volstamps(b, LP_VOLUME_VALIDATE_REPLY, tag, v, n);
}

int lp_decode_volume_validate(const struct lp_frame *f, struct lp_list *l,
			      const char **why)
{
	static const unsigned int ok[] = {
		LP_VOLUME_VALIDATE, LP_VOLUME_VALIDATE_REPLY,
	};
	struct rd r = body2(f, ok, ARRAY_SIZE(ok));
	bool reply = f->type == LP_VOLUME_VALIDATE_REPLY;
	struct lp_volstamp scratch;
	uint32_t n = get_count(&r, reply ? 13 : 12, LP_LIST_MAX);

	if (!r.why && !n)
		fail(&r, "empty list");
	get_list(&r, l, n, reply ? L_VOLRESULT : L_VOLSTAMP, NULL, &scratch);
	return done(&r, why);
}

int lp_next_volstamp(struct lp_list *l, struct lp_volstamp *v)
{
	return next(l, 1U << L_VOLSTAMP | 1U << L_VOLRESULT, v);
}

/* ---------------------------------------------------------- VALIDATE */

#define FIDVV_MIN	(16 + 13)

static void get_fidvv(struct rd *r, void *out)
{
	struct lp_fidvv *v = out;

	get_used_fid(r, &v->fid);
	get_vv(r, &v->vv);
}

int lp_next_fidvv(struct lp_list *l, struct lp_fidvv *v)
{
	return next(l, 1U << L_FIDVV, v);
}

static void put_fidvvs(struct wr *w, const struct lp_fidvv *v, uint32_t n)
{
	put32(w, n);
	for (uint32_t i = 0; i < n && !w->err; i++) {
		put_fid(w, &v[i].fid);
		put_vv(w, &v[i].vv);
	}
}

int lp_encode_validate(struct lp_buf *b, uint32_t tag,
		       const struct lp_fidvv *v, uint32_t n)
{
	struct wr w;

	begin(&w, b, LP_VALIDATE, tag);
	put_fidvvs(&w, v, n);
	return finish(&w, 0);
}

int lp_decode_validate(const struct lp_frame *f, struct lp_list *l,
		       const char **why)
{
	struct rd r = body(f, LP_VALIDATE);
	struct lp_fidvv scratch;
	uint32_t n = get_count(&r, FIDVV_MIN, LP_LIST_MAX);

	if (!r.why && !n)
		fail(&r, "empty list");
	get_list(&r, l, n, L_FIDVV, NULL, &scratch);
	return done(&r, why);
}

int lp_encode_validate_reply(struct lp_buf *b, uint32_t tag,
			     const uint8_t *result, uint32_t n)
{
	struct wr w;

	begin(&w, b, LP_VALIDATE_REPLY, tag);
	put32(&w, n);
	put_bytes(&w, result, n);
	return finish(&w, 0);
}

int lp_decode_validate_reply(const struct lp_frame *f,
			     struct lp_validate_reply *m, const char **why)
{
	struct rd r = body(f, LP_VALIDATE_REPLY);

	m->count = get_count(&r, 1, LP_LIST_MAX);
	m->result = take(&r, m->count);
	if (!r.why && !m->count)
		fail(&r, "empty list");
	for (uint32_t i = 0; m->result && i < m->count; i++)
		if (m->result[i] > LP_OBJ_CHANGED)
			fail(&r, "unknown object validation result");
	if (r.why)
		m->count = 0;
	return done(&r, why);
}

/* ----------------------------------------------------------- permits */

int lp_encode_permit_reply(struct lp_buf *b, uint32_t tag,
			   const struct lp_permit *m)
{
	struct wr w;

	begin(&w, b, LP_PERMIT_REPLY, tag);
	put32(&w, m->volume);
	put32(&w, m->lease_ms);
	return finish(&w, 0);
}

int lp_decode_permit_reply(const struct lp_frame *f, struct lp_permit *m,
			   const char **why)
{
	struct rd r = body(f, LP_PERMIT_REPLY);

	m->volume = get32(&r);
	m->lease_ms = get32(&r);
	return done(&r, why);
}

/* ------------------------------------------------------- REINTEGRATE */

enum { N_NONE, N_ENTRY, N_XATTR };	/* what a record's name is */
enum { D_NONE, D_TARGET, D_VALUE, D_NAMES };	/* what its data is */

#define U_DIR		0x1		/* the fids a record uses */
#define U_OBJ		0x2
#define U_DIR2		0x4
#define U_TARGET	0x8
#define T(t)		(1U << LENTO_T_##t)
#define T_NODE		(T(FIFO) | T(SOCK) | T(CHR) | T(BLK))

static const struct shape {
	uint8_t fids, may_fids;	/* fids it must have, may have */
	uint8_t name, name2, data;
	uint8_t types;		/* new object's types; 0: type is 0 */
	uint16_t flags;		/* LENTO_R_* it may carry */
} shapes[] = {
	[LENTO_OP_CREATE] = { U_DIR | U_OBJ, 0, N_ENTRY, 0, 0, T(REG), 0 },
	[LENTO_OP_MKDIR] = { U_DIR | U_OBJ, 0, N_ENTRY, 0, 0, T(DIR), 0 },
	[LENTO_OP_MKNOD] = { U_DIR | U_OBJ, 0, N_ENTRY, 0, 0, T_NODE, 0 },
	[LENTO_OP_SYMLINK] = { U_DIR | U_OBJ, 0, N_ENTRY, 0, D_TARGET,
			       T(SYMLINK), 0 },
	[LENTO_OP_LINK] = { U_DIR | U_OBJ, 0, N_ENTRY, 0, 0, 0, 0 },
	[LENTO_OP_UNLINK] = { U_DIR | U_OBJ, 0, N_ENTRY, 0, 0, 0,
			      LENTO_R_LASTLINK },
	[LENTO_OP_RMDIR] = { U_DIR | U_OBJ, 0, N_ENTRY, 0, 0, 0, 0 },
	[LENTO_OP_RENAME] = { U_DIR | U_OBJ | U_DIR2, U_TARGET, N_ENTRY,
			      N_ENTRY, 0, 0,
			      LENTO_R_NOREPLACE | LENTO_R_EXCHANGE |
			      LENTO_R_LASTLINK },
	[LENTO_OP_SETATTR] = { U_OBJ, 0, 0, 0, 0, 0, 0 },
	[LENTO_OP_SETXATTR] = { U_OBJ, 0, N_XATTR, 0, D_VALUE, 0, 0 },
	[LENTO_OP_REMOVEXATTR] = { U_OBJ, 0, N_XATTR, 0, 0, 0, 0 },
	[LENTO_OP_STORE] = { U_OBJ, 0, 0, 0, 0, 0, LENTO_R_NOBODY },
	[LENTO_OP_PRUNEXATTRS] = { U_OBJ, 0, 0, 0, D_NAMES, 0, 0 },
};

static const char *fids_invalid(const struct lento_rec *r,
				const struct shape *s)
{
	const struct lento_fid *f[] = { &r->dir, &r->obj, &r->dir2, &r->target };

	for (unsigned int i = 0; i < ARRAY_SIZE(f); i++) {
		bool null = lento_fid_is_null(f[i]);

		if (s->fids & 1U << i && null)
			return "record without a fid its op needs";
		if (!((s->fids | s->may_fids) & 1U << i) && !null)
			return "record with a fid its op does not use";
	}
	return NULL;
}

static const char *name_invalid(const char *name, size_t size, int kind)
{
	size_t n = strnlen(name, size);

	if (n == size)
		return "record name without its NUL";
	if (kind == N_ENTRY)
		return entry_name_invalid(name, n);
	if (kind == N_XATTR)
		return xattr_name_invalid(name, n);
	return n ? "record with a name its op does not use" : NULL;
}

/*
 * PRUNEXATTRS's data: at most LENTO_XATTRS_MAX xattr names, each ending in
 * a NUL, none twice.
 */
static const char *names_invalid(const char *s, size_t n)
{
	const char *name[LENTO_XATTRS_MAX];
	size_t len[LENTO_XATTRS_MAX], count = 0;

	while (n) {
		const char *end = memchr(s, '\0', n);
		const char *why;

		if (!end)
			return "xattr name list without its last NUL";
		if (count == LENTO_XATTRS_MAX)
			return "more than LENTO_XATTRS_MAX xattr names";
		len[count] = (size_t)(end - s);
		why = xattr_name_invalid(s, len[count]);
		if (why)
			return why;
		for (size_t i = 0; i < count; i++)
			if (len[i] == len[count] && !memcmp(name[i], s, len[i]))
				return "xattr name listed twice";
		name[count++] = s;
		n -= len[count - 1] + 1;
		s = end + 1;
	}
	return NULL;
}

static const char *data_invalid(const struct lento_rec *r, int kind)
{
	if (r->data_len && !r->data)
		return "record data_len without data";
	if (kind == D_TARGET)
		return target_invalid(r->data, r->data_len);
	if (kind == D_VALUE)
		return r->data_len > LENTO_XATTR_SIZE_MAX ?
		       "xattr value larger than LENTO_XATTR_SIZE_MAX" : NULL;
	if (kind == D_NAMES)
		return names_invalid(r->data, r->data_len);
	return r->data_len ? "record with data its op does not use" : NULL;
}

static const char *groups_invalid(const struct lento_rec *r)
{
	if (r->ngroups > LENTO_GROUPS_MAX)
		return "record with more than LENTO_GROUPS_MAX groups";
	if (r->ngroups && !r->groups)
		return "record ngroups without groups";
	return NULL;
}

static const char *vvs_invalid(const struct lento_rec *r)
{
	if (r->base_dir.n > LENTO_VV_MAX || r->base_obj.n > LENTO_VV_MAX ||
	    r->base_dir2.n > LENTO_VV_MAX || r->base_target.n > LENTO_VV_MAX)
		return "version vector with more than LENTO_VV_MAX counters";
	return NULL;
}

const char *lp_rec_invalid(const struct lento_rec *r)
{
	const struct shape *s;
	const char *why;

	if (r->op < LENTO_OP_CREATE || r->op > LENTO_OP_LAST)
		return "unknown record op";
	s = &shapes[r->op];
	if (!r->recno)
		return "record number 0";
	if (r->flags & ~s->flags)
		return "record flag its op does not take";
	if ((r->flags & LENTO_R_NOREPLACE) && (r->flags & LENTO_R_EXCHANGE))
		return "RENAME both NOREPLACE and EXCHANGE";
	if (r->op == LENTO_OP_RENAME && (r->flags & LENTO_R_LASTLINK) &&
	    lento_fid_is_null(&r->target))
		return "RENAME LASTLINK without a target";
	if (s->types ? !(valid_type(r->type) && s->types & 1U << r->type) :
		       r->type)
		return "record type not one its op makes";
	if ((why = fids_invalid(r, s)) ||
	    (why = name_invalid(r->name, sizeof(r->name), s->name)) ||
	    (why = name_invalid(r->name2, sizeof(r->name2), s->name2)) ||
	    (why = data_invalid(r, s->data)) || (why = groups_invalid(r)) ||
	    (why = vvs_invalid(r)) || (why = attr_invalid(&r->attr)))
		return why;
	if (r->op == LENTO_OP_SETATTR && !r->attr.valid)
		return "SETATTR that sets nothing";
	if (r->op == LENTO_OP_STORE && !(r->attr.valid & LENTO_A_SIZE))
		return "STORE without its size";
	if (r->op == LENTO_OP_STORE && (r->flags & LENTO_R_NOBODY) &&
	    r->attr.size)
		return "STORE NOBODY with a size";
	return NULL;
}

#define REC_MIN	(28 + 4 * 16 + 4 * 13 + 1 + 56 + 2 + 2 + 4 + 2)
/* A REINTEGRATE_REPLY's version: fid, then a vv of LENTO_VV_MAX counters. */
#define FIDVV_MAX	(16 + 1 + 8 * LENTO_VV_MAX + 12)

/* An encoder's frame never holds more records than the decoder takes... */
_Static_assert(LP_SPLIT_TARGET / REC_MIN + 1 <= LP_REINT_RECS_MAX,
	       "LP_REINT_RECS_MAX below what LP_SPLIT_TARGET holds");
/* ... and the versions the server answers a batch with always fit. */
_Static_assert(4 * LP_REINT_RECS_MAX <= LP_LIST_MAX &&
	       4 * LP_REINT_RECS_MAX * FIDVV_MAX + LP_MSG_MAX + 256 <=
	       LP_FRAME_MAX, "a REINTEGRATE_REPLY could outgrow its frame");

static void put_rec(struct wr *w, const struct lento_rec *r)
{
	const char *why = lp_rec_invalid(r);

	if (why)
		return invalid(w, why);
	put64(w, r->recno);
	put16(w, r->op);
	put16(w, r->flags);
	put32(w, r->uid);
	put32(w, r->gid);
	put64(w, (uint64_t)r->time_ns);
	put_fid(w, &r->dir);
	put_fid(w, &r->obj);
	put_fid(w, &r->dir2);
	put_fid(w, &r->target);
	put_vv(w, &r->base_dir);
	put_vv(w, &r->base_obj);
	put_vv(w, &r->base_dir2);
	put_vv(w, &r->base_target);
	put8(w, r->type);
	put_attr(w, &r->attr);
	put_cstr(w, r->name, sizeof(r->name));
	put_cstr(w, r->name2, sizeof(r->name2));
	put_blob32(w, r->data, r->data_len);
	put16(w, r->ngroups);
	put_bytes(w, r->groups, 4 * (size_t)r->ngroups);
}

static void get_rec(struct rd *rd, void *out)
{
	struct lento_rec *r = out;
	const char *why;

	memset(r, 0, sizeof(*r));
	r->recno = get64(rd);
	r->op = get16(rd);
	r->flags = get16(rd);
	r->uid = get32(rd);
	r->gid = get32(rd);
	r->time_ns = (int64_t)get64(rd);
	get_fid(rd, &r->dir);
	get_fid(rd, &r->obj);
	get_fid(rd, &r->dir2);
	get_fid(rd, &r->target);
	get_vv(rd, &r->base_dir);
	get_vv(rd, &r->base_obj);
	get_vv(rd, &r->base_dir2);
	get_vv(rd, &r->base_target);
	r->type = get8(rd);
	get_attr(rd, &r->attr);
	get_cstr(rd, r->name, sizeof(r->name));
	get_cstr(rd, r->name2, sizeof(r->name2));
	r->data = get_blob32(rd, LENTO_XATTR_SIZE_MAX, &r->data_len,
			     "record data larger than LENTO_XATTR_SIZE_MAX");
	r->ngroups = get16(rd);
	if (r->ngroups > LENTO_GROUPS_MAX)
		fail(rd, "record with more than LENTO_GROUPS_MAX groups");
	else
		r->groups = take(rd, 4 * (size_t)r->ngroups);
	why = rd->why ? NULL : lp_rec_invalid(r);
	if (why)
		fail(rd, why);
}

int lp_next_rec(struct lp_list *l, struct lento_rec *r)
{
	return next(l, 1U << L_REC, r);
}

int lp_encode_reintegrate(struct lp_buf *b, uint32_t tag,
			  const struct lp_reint *m,
			  const struct lento_rec *recs, uint32_t n)
{
	bool stores = false;
	struct wr w;
	size_t at;
	uint32_t i = 0;
	int err;

	begin(&w, b, LP_REINTEGRATE, tag);
	put32(&w, m->volume);
	put32(&w, m->client);
	put64(&w, n ? recs[0].recno : 0);
	at = b->len;
	put32(&w, 0);		/* count, once known */
	for (; i < n && !w.err; i++) {
		/* Within LP_REINT_RECS_MAX too (asserted above). */
		if (i && b->len - w.start >= LP_SPLIT_TARGET)
			break;
		put_rec(&w, &recs[i]);
		stores |= recs[i].op == LENTO_OP_STORE;
	}
	if (!w.err)
		le32(b->p + at, i);
	err = finish(&w, stores ? LP_F_MORE : 0);
	return err ? err : (int)i;
}

/* get_rec, and the batch's own rules: consecutive recnos, STOREs. */
struct batch {
	struct lento_rec rec;
	uint64_t recno;
	uint32_t stores;
};

static void get_batch_rec(struct rd *r, void *out)
{
	struct batch *b = out;

	get_rec(r, &b->rec);
	if (!r->why && b->rec.recno != b->recno)
		fail(r, "record numbers not consecutive from the first");
	b->recno++;
	b->stores += b->rec.op == LENTO_OP_STORE;
}

int lp_decode_reintegrate(const struct lp_frame *f, struct lp_reint *m,
			  const char **why)
{
	struct rd r = body(f, LP_REINTEGRATE);
	struct batch scratch;

	memset(m, 0, sizeof(*m));
	m->volume = get32(&r);
	m->client = get32(&r);
	m->first = get64(&r);
	m->count = get_count(&r, REC_MIN, LP_REINT_RECS_MAX);
	m->more = f->flags & LP_F_MORE;
	if (!m->client)
		fail(&r, "client id 0");
	if (!r.why && !m->count)
		fail(&r, "batch without records");
	if (m->first > UINT64_MAX - m->count)
		fail(&r, "record numbers past 2^64");
	scratch.recno = m->first;
	scratch.stores = 0;
	get_list(&r, &m->recs, m->count, L_REC, get_batch_rec, &scratch);
	m->stores = r.why ? 0 : scratch.stores;
	if (m->more != (m->stores > 0))
		fail(&r, "MORE flag disagrees with the STORE records");
	return done(&r, why);
}

int lp_encode_reintegrate_reply(struct lp_buf *b, uint32_t tag,
				const struct lp_reint_reply *m,
				const struct lp_fidvv *v, uint32_t n)
{
	struct wr w;

	begin(&w, b, LP_REINTEGRATE_REPLY, tag);
	put64(&w, m->applied);
	put64(&w, m->stamp);
	put32(&w, m->code);
	put32(&w, m->index);
	put_fid(&w, &m->fid);
	put_msg(&w, m->msg);
	if (m->code == LP_ECONFLICT) {
		put_vv(&w, &m->base);
		put_vv(&w, &m->current);
	}
	put_fidvvs(&w, v, n);
	return finish(&w, 0);
}

int lp_decode_reintegrate_reply(const struct lp_frame *f,
				struct lp_reint_reply *m, const char **why)
{
	struct rd r = body(f, LP_REINTEGRATE_REPLY);
	struct lp_fidvv scratch;

	memset(m, 0, sizeof(*m));
	m->applied = get64(&r);
	m->stamp = get64(&r);
	m->code = get32(&r);
	m->index = get32(&r);
	get_fid(&r, &m->fid);
	m->msg = get_msg(&r, &m->msg_len);
	if (m->code == LP_ECONFLICT) {
		get_vv(&r, &m->base);
		get_vv(&r, &m->current);
	}
	m->nver = get_count(&r, FIDVV_MIN, LP_LIST_MAX);
	if (m->code != LP_OK && !known_err(m->code))
		fail(&r, "unknown error code");
	if (m->code == LP_OK && m->index != LP_NO_INDEX)
		fail(&r, "a record blamed in a batch applied whole");
	if (m->code == LP_ECONFLICT &&
	    (m->index == LP_NO_INDEX || lento_fid_is_null(&m->fid)))
		fail(&r, "conflict without its record and object");
	get_list(&r, &m->versions, m->nver, L_FIDVV, NULL, &scratch);
	if (r.why)
		m->nver = 0;
	return done(&r, why);
}

/* ------------------------------------------------------ any frame */

int lp_frame_check(const struct lp_frame *f, const char **why)
{
	union {
		struct lp_hello hello;
		struct lp_hello_reply hello_reply;
		struct lp_error error;
		struct lento_fid fid;
		struct lp_getattr_reply getattr_reply;
		struct lp_readdir_reply readdir_reply;
		struct lp_fetch fetch;
		struct lp_fetch_reply fetch_reply;
		struct lp_data data;
		char volname[LENTO_VOLNAME_MAX + 1];
		struct lp_volume volume;
		struct lp_list list;
		struct lp_validate_reply validate_reply;
		struct lp_permit permit;
		struct lp_reint reint;
		struct lp_reint_reply reint_reply;
		uint64_t u64;
		uint32_t u32;
	} u;

	switch (f->type) {
	case LP_HELLO:
		return lp_decode_hello(f, &u.hello, why);
	case LP_HELLO_REPLY:
		return lp_decode_hello_reply(f, &u.hello_reply, why);
	case LP_PING:
	case LP_PONG:
		return lp_decode_ping(f, &u.u64, why);
	case LP_ERROR:
		return lp_decode_error(f, &u.error, why);
	case LP_GETATTR:
	case LP_READDIR:
	case LP_BREAK:
		return lp_decode_fid(f, &u.fid, why);
	case LP_GETATTR_REPLY:
		return lp_decode_getattr_reply(f, &u.getattr_reply, why);
	case LP_READDIR_REPLY:
		return lp_decode_readdir_reply(f, &u.readdir_reply, why);
	case LP_FETCH:
		return lp_decode_fetch(f, &u.fetch, why);
	case LP_FETCH_REPLY:
		return lp_decode_fetch_reply(f, &u.fetch_reply, why);
	case LP_DATA:
		return lp_decode_data(f, &u.data, why);
	case LP_VOLUME_LOOKUP:
		return lp_decode_volume_lookup(f, u.volname, why);
	case LP_VOLUME_LOOKUP_REPLY:
		return lp_decode_volume_lookup_reply(f, &u.volume, why);
	case LP_VOLUME_VALIDATE:
	case LP_VOLUME_VALIDATE_REPLY:
		return lp_decode_volume_validate(f, &u.list, why);
	case LP_VALIDATE:
		return lp_decode_validate(f, &u.list, why);
	case LP_VALIDATE_REPLY:
		return lp_decode_validate_reply(f, &u.validate_reply, why);
	case LP_PERMIT_ACQUIRE:
	case LP_PERMIT_RENEW:
	case LP_PERMIT_RELEASE:
	case LP_BREAK_VOLUME:
	case LP_PERMIT_REVOKE:
		return lp_decode_volume(f, &u.u32, why);
	case LP_PERMIT_REPLY:
		return lp_decode_permit_reply(f, &u.permit, why);
	case LP_REINTEGRATE:
		return lp_decode_reintegrate(f, &u.reint, why);
	case LP_REINTEGRATE_REPLY:
		return lp_decode_reintegrate_reply(f, &u.reint_reply, why);
	}
	*why = "unknown frame type";
	return -EBADMSG;
}
