// SPDX-License-Identifier: MIT
/*
 * Unit tests of the lento server's store (lento/store.c) and version
 * vectors (lento/vv.c), each in a fresh store directory under $TMPDIR:
 * volumes and quotas; every operation applied and seen through getattr,
 * readdir and the bodies; conflicts and errors that leave the volume as
 * it was (a full dump compared); resent batches, record number gaps;
 * bodies replaced, truncated, removed, collected at open; crashes before
 * and after COMMIT (a child process dies at a fault point); a full disk
 * and a full database; 100,000 entries in one directory, timed.
 */
#include "store.h"
#include "vv.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[PATH_MAX];
static struct store *s;
static char err[512];

static bool same_fid(struct lento_fid a, struct lento_fid b)
{
	return lento_fid_eq(&a, &b);
}

static void reopen(void)
{
	store_close(s);
	s = NULL;
	ck_assert_msg(store_open(dir, &s, err, sizeof(err)) == 0, "%s", err);
}

static void setup(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/check-store.XXXXXX", tmp ? tmp : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_msg(store_open(dir, &s, err, sizeof(err)) == 0, "%s", err);
}

static int rm_one(const char *path, const struct stat *sb, int flag,
		  struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void teardown(void)
{
	store_close(s);
	s = NULL;
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* ------------------------------------------------- a client, in a test */

#define MAXREC 64

/*
 * Builds batches the way a client must: each record's bases are the
 * versions the objects have after the client's earlier records (the
 * store's rule: each record bumps every object it names, StoreId {client,
 * recno}).
 */
struct tc {
	uint32_t vol, client, uid, gid;
	const uint8_t *groups;	/* ngroups LE u32s, in every record */
	uint16_t ngroups;
	uint64_t recno, seq;
	int64_t time;
	struct lento_rec recs[MAXREC];
	struct store_body bodies[MAXREC];
	char paths[MAXREC][PATH_MAX];
	size_t n;
	struct {
		struct lento_fid fid;
		struct lento_vv vv;
	} known[4 * MAXREC];
	size_t nknown;
	struct store_result res;
};

static void tc_init(struct tc *c, uint32_t vol, uint32_t client)
{
	memset(c, 0, sizeof(*c));
	c->vol = vol;
	c->client = client;
	c->time = 1700000000000000000LL;
	c->seq = 100;
}

static struct lento_vv vv_of(struct tc *c, const struct lento_fid *f)
{
	struct lento_status st;
	struct lento_vv none;

	for (size_t i = c->nknown; i-- > 0;)
		if (lento_fid_eq(&c->known[i].fid, f))
			return c->known[i].vv;
	if (!store_getattr(s, f, &st, NULL, 0, NULL, NULL))
		return st.vv;
	lento_vv_init(&none, 1);
	return none;
}

static void predict(struct tc *c, const struct lento_fid *f, uint64_t recno)
{
	struct lento_vv vv = vv_of(c, f);

	ck_assert_int_lt(c->nknown, 4 * MAXREC);
	lento_vv_bump(&vv, 0, (struct lento_storeid){ c->client, recno });
	c->known[c->nknown].fid = *f;
	c->known[c->nknown++].vv = vv;
}

static struct lento_rec *add(struct tc *c, uint16_t op)
{
	struct lento_rec *r;

	ck_assert_int_lt(c->n, MAXREC);
	r = &c->recs[c->n];
	memset(r, 0, sizeof(*r));
	c->bodies[c->n] = (struct store_body){ .fd = -1 };
	c->paths[c->n][0] = '\0';
	c->n++;
	r->recno = ++c->recno;
	r->op = op;
	r->uid = c->uid;
	r->gid = c->gid;
	r->groups = c->groups;
	r->ngroups = c->ngroups;
	r->time_ns = ++c->time;
	return r;
}

/* Bases from the versions known, then the versions this record leaves. */
static void seal(struct tc *c, struct lento_rec *r)
{
	const struct lento_fid *named[4] = { &r->dir, &r->obj, &r->dir2,
					     &r->target };
	bool creates = r->op <= LENTO_OP_SYMLINK;

	r->base_dir = vv_of(c, &r->dir);
	r->base_obj = vv_of(c, &r->obj);
	r->base_dir2 = vv_of(c, &r->dir2);
	r->base_target = vv_of(c, &r->target);
	if (creates)
		lento_vv_init(&r->base_obj, 0);
	for (int i = 0; i < 4; i++) {
		bool dup = lento_fid_is_null(named[i]);

		for (int k = 0; k < i && !dup; k++)
			dup = lento_fid_eq(named[i], named[k]);
		if (!dup)
			predict(c, named[i], r->recno);
	}
}

static struct lento_fid new_fid(struct tc *c)
{
	return (struct lento_fid){ c->vol, c->client, ++c->seq };
}

static struct lento_fid mk(struct tc *c, uint16_t op, struct lento_fid d,
			   const char *name, uint8_t type, uint32_t mode)
{
	struct lento_rec *r = add(c, op);

	r->dir = d;
	r->obj = new_fid(c);
	r->type = type;
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->attr.valid = LENTO_A_MODE;
	r->attr.mode = mode;
	if (op == LENTO_OP_SYMLINK) {
		r->data = "../some/target";
		r->data_len = 14;
	}
	seal(c, r);
	return r->obj;
}

static struct lento_fid mkfile(struct tc *c, struct lento_fid d,
			       const char *name)
{
	return mk(c, LENTO_OP_CREATE, d, name, LENTO_T_REG, 0644);
}

static struct lento_fid mkdir_(struct tc *c, struct lento_fid d,
			       const char *name)
{
	return mk(c, LENTO_OP_MKDIR, d, name, LENTO_T_DIR, 0755);
}

static struct lento_rec *named(struct tc *c, uint16_t op, struct lento_fid d,
			       const char *name, struct lento_fid o)
{
	struct lento_rec *r = add(c, op);

	r->dir = d;
	r->obj = o;
	snprintf(r->name, sizeof(r->name), "%s", name);
	seal(c, r);
	return r;
}

static struct lento_rec *mv(struct tc *c, struct lento_fid sd,
			    const char *name, struct lento_fid o,
			    struct lento_fid dd, const char *name2,
			    struct lento_fid target, uint16_t flags)
{
	struct lento_rec *r = add(c, LENTO_OP_RENAME);

	r->dir = sd;
	r->obj = o;
	r->dir2 = dd;
	r->target = target;
	r->flags = flags;
	snprintf(r->name, sizeof(r->name), "%s", name);
	snprintf(r->name2, sizeof(r->name2), "%s", name2);
	seal(c, r);
	return r;
}

static struct lento_rec *setattr(struct tc *c, struct lento_fid o,
				 const struct lento_attr *a)
{
	struct lento_rec *r = add(c, LENTO_OP_SETATTR);

	r->obj = o;
	r->attr = *a;
	seal(c, r);
	return r;
}

static struct lento_rec *xattr(struct tc *c, struct lento_fid o,
			       const char *name, const char *value)
{
	struct lento_rec *r = add(c, value ? LENTO_OP_SETXATTR :
					     LENTO_OP_REMOVEXATTR);

	r->obj = o;
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->data = value;
	r->data_len = value ? (uint32_t)strlen(value) : 0;
	seal(c, r);
	return r;
}

/* @c's records carry supplementary groups @gids (@n of them, in @buf). */
static void tc_groups(struct tc *c, uint8_t *buf, const uint32_t *gids,
		      uint16_t n)
{
	for (uint16_t i = 0; i < n; i++)
		for (int k = 0; k < 4; k++)
			buf[4 * i + k] = (uint8_t)(gids[i] >> 8 * k);
	c->groups = n ? buf : NULL;
	c->ngroups = n;
}

/* POSIX ACL entry tags, and an id for the entries that have none. */
enum { A_UOBJ = 0x01, A_USER = 0x02, A_GOBJ = 0x04, A_GROUP = 0x08,
       A_MASK = 0x10, A_OTHER = 0x20 };
#define A_NOID	0xffffffffu

/* Up to 8 entries of an access ACL: tag, perm, id. */
struct acl {
	uint32_t e[8][3];
	uint8_t bytes[4 + 8 * 8];
};

/*
 * A SETXATTR of @o's system.posix_acl_access to @a's @n entries, as the
 * kernel gives it (version 2, then tag u16, perm u16, id u32).
 */
static struct lento_rec *set_acl(struct tc *c, struct lento_fid o,
				 struct acl *a, size_t n)
{
	struct lento_rec *r = xattr(c, o, "system.posix_acl_access", "x");

	memset(a->bytes, 0, sizeof(a->bytes));
	a->bytes[0] = 2;
	for (size_t i = 0; i < n; i++) {
		uint8_t *p = a->bytes + 4 + 8 * i;

		p[0] = (uint8_t)a->e[i][0];
		p[2] = (uint8_t)a->e[i][1];
		for (int k = 0; k < 4; k++)
			p[4 + k] = (uint8_t)(a->e[i][2] >> 8 * k);
	}
	r->data = a->bytes;
	r->data_len = (uint32_t)(4 + 8 * n);
	return r;
}

static int acl_cb(void *arg, const char *name, const void *value,
		  size_t len)
{
	static const char *const tags[] = { [A_UOBJ] = "u", [A_USER] = "u",
		[A_GOBJ] = "g", [A_GROUP] = "g", [A_MASK] = "m",
		[A_OTHER] = "o" };
	const uint8_t *v = value;
	char *out = arg;

	if (strcmp(name, "system.posix_acl_access"))
		return 0;
	for (size_t i = 4; i + 8 <= len; i += 8) {
		unsigned int tag = v[i], perm = v[i + 2];
		uint32_t id = (uint32_t)v[i + 4] | (uint32_t)v[i + 5] << 8 |
			      (uint32_t)v[i + 6] << 16 |
			      (uint32_t)v[i + 7] << 24;
		char one[32];

		ck_assert_uint_le(tag, A_OTHER);
		if (id == A_NOID)
			snprintf(one, sizeof(one), "%s%s::%u", *out ? " " : "",
				 tags[tag], perm);
		else
			snprintf(one, sizeof(one), "%s%s:%u:%u",
				 *out ? " " : "", tags[tag], id, perm);
		strcat(out, one);
	}
	return 0;
}

/* @o's stored access ACL, as "u::6 u:1000:6 g::4 m::6 o::0". */
static const char *stored_acl(struct lento_fid o)
{
	static char out[8 * 32];
	struct lento_status st;

	out[0] = 0;
	ck_assert_int_eq(store_getattr(s, &o, &st, NULL, 0, acl_cb, out), 0);
	return out;
}

/* A PRUNEXATTRS of @o keeping the NUL-terminated names in @len bytes. */
static struct lento_rec *prune(struct tc *c, struct lento_fid o,
			       const char *names, uint32_t len)
{
	struct lento_rec *r = add(c, LENTO_OP_PRUNEXATTRS);

	r->obj = o;
	r->data = len ? names : NULL;
	r->data_len = len;
	seal(c, r);
	return r;
}

/* A STORE of @len bytes of @data; the body by path, or by fd if @by_fd. */
static struct lento_rec *store_data(struct tc *c, struct lento_fid o,
				    const void *data, size_t len, bool by_fd)
{
	struct lento_rec *r = add(c, LENTO_OP_STORE);
	size_t i = c->n - 1;
	int fd = store_body_tmp(s, c->paths[i], sizeof(c->paths[i]));

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	ck_assert_int_eq(fsync(fd), 0);
	if (by_fd) {
		c->bodies[i].fd = fd;
	} else {
		close(fd);
		c->bodies[i].path = c->paths[i];
	}
	c->bodies[i].size = len;
	r->obj = o;
	r->attr.valid = LENTO_A_SIZE | LENTO_A_MTIME;
	r->attr.size = len;
	r->attr.mtime_ns = c->time;
	seal(c, r);
	return r;
}

static void drop_bodies(struct tc *c)
{
	for (size_t i = 0; i < c->n; i++) {
		if (c->bodies[i].fd >= 0)
			close(c->bodies[i].fd);
		if (c->paths[i][0])
			unlink(c->paths[i]);	/* if still there */
		c->bodies[i].fd = -1;
		c->paths[i][0] = '\0';
	}
}

/*
 * Send the batch; on failure forget its record numbers. Every batch of
 * these tests is judged by store_reintegrate_check() first, as the
 * server does before the bodies come: it may refuse only what the apply
 * refuses, and then as the apply does -- the same error, the same
 * record blamed.
 */
static int send(struct tc *c)
{
	struct store_result pre;
	int p = store_reintegrate_check(s, c->vol, c->client, c->recs, c->n,
					&pre);
	int r = store_reintegrate(s, c->vol, c->client, c->recs, c->n,
				  c->bodies, &c->res);

	ck_assert_msg(!p, "not judged: %s: %s", strerror(-p), pre.msg);
	ck_assert_msg(pre.outcome == STORE_APPLIED || r,
		      "refused early (%s), applied: %s", strerror(-pre.err),
		      pre.msg);
	if (pre.outcome != STORE_APPLIED) {
		ck_assert_int_eq(r, pre.err);
		ck_assert_int_eq(c->res.rec, pre.rec);
	}
	drop_bodies(c);
	if (r)
		c->recno -= c->n;
	/* Predictions serve within a batch; after it the store knows. */
	c->nknown = 0;
	c->n = 0;
	return r;
}

#define SEND_OK(c)							\
	do {								\
		int r_ = send(c);					\
		ck_assert_msg(r_ == 0, "batch refused: %d %s", r_,	\
			      (c)->res.msg);				\
	} while (0)

static uint32_t new_volume(const char *name, uint64_t quota)
{
	struct store_volume v;

	ck_assert_msg(store_volume_create(s, name, quota, 0, 0, &v, err,
					  sizeof(err)) == 0, "%s", err);
	return v.id;
}

static struct lento_status getattr(struct lento_fid f)
{
	struct lento_status st;

	ck_assert_int_eq(store_getattr(s, &f, &st, NULL, 0, NULL, NULL), 0);
	return st;
}

static bool exists(struct lento_fid f)
{
	struct lento_status st;

	return store_getattr(s, &f, &st, NULL, 0, NULL, NULL) == 0;
}

/* Directory @d's entry @name, or a null fid. */
struct find {
	const char *name;
	struct lento_fid fid;
	size_t count;
	char target[LENTO_SYMLINK_MAX + 1];	/* the entry's, if a symlink */
	bool xattrs;				/* the entry's object has some */
};

static int find_cb(void *arg, const struct lento_dirent *de,
		   const char *target, uint32_t target_len, bool xattrs)
{
	struct find *f = arg;

	f->count++;
	ck_assert_int_eq(target != NULL, de->st.type == LENTO_T_SYMLINK);
	if (f->name && !strcmp(de->name, f->name)) {
		f->fid = de->st.fid;
		f->xattrs = xattrs;
		if (target) {
			ck_assert_uint_le(target_len, LENTO_SYMLINK_MAX);
			memcpy(f->target, target, target_len);
			f->target[target_len] = 0;
		}
	}
	return 0;
}

/* The target of symlink @d/@name, as a listing of @d gives it. */
static const char *listed_target(struct lento_fid d, const char *name)
{
	static struct find f;

	memset(&f, 0, sizeof(f));
	f.name = name;
	ck_assert_int_eq(store_readdir(s, &d, find_cb, &f), 0);
	return f.target;
}

static struct lento_fid lookup(struct lento_fid d, const char *name)
{
	struct find f = { .name = name };

	ck_assert_int_eq(store_readdir(s, &d, find_cb, &f), 0);
	return f.fid;
}

static size_t entries(struct lento_fid d)
{
	struct find f = { 0 };

	ck_assert_int_eq(store_readdir(s, &d, find_cb, &f), 0);
	return f.count;
}

/* The whole content of regular file @f, NUL-terminated (free it). */
static char *content(struct lento_fid f, uint64_t *size)
{
	uint64_t n;
	char *buf;
	int fd;

	ck_assert_int_eq(store_body_open(s, &f, NULL, &fd, &n, NULL), 0);
	buf = malloc(n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(pread(fd, buf, n, 0), (ssize_t)n);
	buf[n] = '\0';
	close(fd);
	if (size)
		*size = n;
	return buf;
}

static size_t count_files(const char *sub)
{
	char path[PATH_MAX + 16];
	struct dirent *de;
	size_t n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "%s/%s", dir, sub);
	d = opendir(path);
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* 512-byte blocks the files of @sub hold on the disk. */
static uint64_t blocks_of(const char *sub)
{
	char path[PATH_MAX + 300];
	struct dirent *de;
	struct stat sb;
	uint64_t n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "%s/%s", dir, sub);
	d = opendir(path);
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/%s", dir, sub, de->d_name);
		ck_assert_int_eq(stat(path, &sb), 0);
		n += (uint64_t)sb.st_blocks;
	}
	closedir(d);
	return n;
}

/* ------------------------------------------------------ a volume's dump */

struct buf {
	char *p;
	size_t len, cap;
};

static void put(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void put(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if ((size_t)n < b->cap - b->len)
			break;
		b->cap = b->cap * 2 + n + 1;
		b->p = realloc(b->p, b->cap);
		ck_assert_ptr_nonnull(b->p);
	}
	b->len += (size_t)n;
}

static int xattr_cb(void *arg, const char *name, const void *value,
		    size_t len)
{
	put(arg, " %s=%.*s", name, (int)len, (const char *)value);
	return 0;
}

static void dump_status(struct buf *b, const struct lento_status *st)
{
	char vv[128], target[LENTO_SYMLINK_MAX + 1];

	lento_vv_format(&st->vv, vv, sizeof(vv));
	put(b, " fid %08x-%08x-%016" PRIx64 " type %u mode %04o uid %u gid %u "
	    "nlink %u size %" PRIu64 " times %" PRId64 ",%" PRId64 ",%" PRId64
	    " rdev %" PRIu64 " vv %s", st->fid.volume, st->fid.client,
	    st->fid.seq, st->type, st->attr.mode, st->attr.uid, st->attr.gid,
	    st->nlink, st->attr.size, st->attr.atime_ns, st->attr.mtime_ns,
	    st->attr.ctime_ns, st->attr.rdev, vv);
	ck_assert_int_eq(store_getattr(s, &st->fid, (struct lento_status[1]){},
				       target, sizeof(target), xattr_cb, b), 0);
	if (st->type == LENTO_T_SYMLINK)
		put(b, " -> %s", target);
	if (st->type == LENTO_T_REG) {
		uint64_t n;
		char *data = content(st->fid, &n);

		put(b, " data %" PRIu64 ":%s", n, data);
		free(data);
	}
	put(b, "\n");
}

struct walk {
	struct buf *b;
	char path[4096];
	struct lento_dirent *des;
	size_t n, cap;
};

static int collect_cb(void *arg, const struct lento_dirent *de,
		   const char *target __attribute__((unused)),
		   uint32_t target_len __attribute__((unused)),
		   bool xattrs __attribute__((unused)))
{
	struct walk *w = arg;

	if (w->n == w->cap) {
		w->cap = w->cap ? 2 * w->cap : 16;
		w->des = realloc(w->des, w->cap * sizeof(*w->des));
		ck_assert_ptr_nonnull(w->des);
	}
	w->des[w->n++] = *de;
	return 0;
}

static void dump_dir(struct buf *b, const char *path, struct lento_fid d)
{
	struct walk w = { .b = b };

	ck_assert_int_eq(store_readdir(s, &d, collect_cb, &w), 0);
	for (size_t i = 0; i < w.n; i++) {
		char sub[4096];

		snprintf(sub, sizeof(sub), "%s/%s", path, w.des[i].name);
		put(b, "%s", sub);
		dump_status(b, &w.des[i].st);
		if (w.des[i].st.type == LENTO_T_DIR)
			dump_dir(b, sub, w.des[i].st.fid);
	}
	free(w.des);
}

/* Everything a volume is, as text: compare two to see nothing changed. */
static char *dump(uint32_t vol, const uint32_t *clients, size_t nclients)
{
	struct buf b = { .cap = 4096 };
	struct store_volume v;
	struct lento_status root;
	struct dirent *de;
	char path[PATH_MAX + 16];
	DIR *d;

	b.p = malloc(b.cap);
	ck_assert_ptr_nonnull(b.p);
	ck_assert_int_eq(store_volume_get(s, vol, &v), 0);
	put(&b, "volume %u %s stamp %" PRIu64 " usage %" PRIu64 " quota %"
	    PRIu64 " objects %" PRIu64 "\n", v.id, v.name, v.stamp, v.usage,
	    v.quota, v.objects);
	for (size_t i = 0; i < nclients; i++) {
		struct store_result res;

		ck_assert_int_eq(store_reintegrate(s, vol, clients[i], NULL, 0,
						   NULL, &res), 0);
		put(&b, "client %u last %" PRIu64 "\n", clients[i],
		    res.last_recno);
	}
	root = getattr(v.root);
	put(&b, "/");
	dump_status(&b, &root);
	dump_dir(&b, "", v.root);
	snprintf(path, sizeof(path), "%s/bodies", dir);
	d = opendir(path);
	ck_assert_ptr_nonnull(d);
	{
		static char names[256][NAME_MAX + 1];
		size_t n = 0;

		while ((de = readdir(d)))
			if (de->d_name[0] != '.' && n < 256)
				snprintf(names[n++], sizeof(names[0]), "%s",
					 de->d_name);
		qsort(names, n, sizeof(names[0]),
		      (int (*)(const void *, const void *))strcmp);
		for (size_t i = 0; i < n; i++)
			put(&b, "body %s\n", names[i]);
	}
	closedir(d);
	return b.p;
}

#define SAME_DUMP(before, after)					\
	do {								\
		ck_assert_msg(!strcmp(before, after),			\
			      "volume changed:\n--- before\n%s--- after\n%s", \
			      before, after);				\
		free(before);						\
		free(after);						\
	} while (0)

/* ----------------------------------------------------- version vectors */

START_TEST(vv_basics)
{
	struct lento_vv a, b;
	char buf[64];

	lento_vv_init(&a, 1);
	lento_vv_init(&b, 1);
	ck_assert(lento_vv_eq(&a, &b));
	ck_assert_int_eq(lento_vv_bump(&a, 0, (struct lento_storeid){ 7, 3 }),
			 0);
	ck_assert_int_eq(lento_vv_cmp(&a, &b), LENTO_VV_AFTER);
	ck_assert_int_eq(lento_vv_cmp(&b, &a), LENTO_VV_BEFORE);
	ck_assert(!lento_vv_eq(&a, &b));
	/* Same counters, different last update: concurrent. */
	ck_assert_int_eq(lento_vv_bump(&b, 0, (struct lento_storeid){ 8, 3 }),
			 0);
	ck_assert_int_eq(lento_vv_cmp(&a, &b), LENTO_VV_CONCURRENT);
	/* A second server's counter: the vector grows; missing counts 0. */
	ck_assert_int_eq(lento_vv_bump(&b, 1, (struct lento_storeid){ 8, 4 }),
			 0);
	ck_assert_uint_eq(b.n, 2);
	lento_vv_bump(&a, 0, (struct lento_storeid){ 7, 4 });
	ck_assert_int_eq(lento_vv_cmp(&a, &b), LENTO_VV_CONCURRENT);
	ck_assert_int_eq(lento_vv_bump(&a, LENTO_VV_MAX,
				       (struct lento_storeid){ 1, 1 }),
			 -EINVAL);
	lento_vv_format(&b, buf, sizeof(buf));
	ck_assert_str_eq(buf, "[1,1]@8:4");
	lento_vv_init(&a, 2);
	lento_vv_init(&b, 1);
	ck_assert(lento_vv_eq(&a, &b));
	a.v[0] = UINT64_MAX;
	ck_assert_int_eq(lento_vv_bump(&a, 0, (struct lento_storeid){ 1, 1 }),
			 -EOVERFLOW);
}
END_TEST

/* ------------------------------------------------------------- volumes */

static int list_cb(void *arg, const struct store_volume *v)
{
	struct buf *b = arg;

	put(b, "%u:%s ", v->id, v->name);
	return 0;
}

START_TEST(volumes_crud)
{
	struct store_volume v, w;
	struct lento_status st;
	struct buf b = { .cap = 256 };
	char longname[LENTO_VOLNAME_MAX + 2];
	uint32_t id;

	b.p = malloc(b.cap);
	ck_assert_int_eq(store_volume_create(s, "home", 1 << 20, 1000, 100, &v,
					     err, sizeof(err)), 0);
	ck_assert_uint_eq(v.id, 1);
	ck_assert_str_eq(v.name, "home");
	ck_assert(lento_fid_eq(&v.root, &LENTO_ROOT_FID(1)));
	ck_assert_uint_eq(v.stamp, 1);
	ck_assert_uint_eq(v.quota, 1 << 20);
	ck_assert_uint_eq(v.usage, STORE_OBJ_OVERHEAD);
	ck_assert_uint_eq(v.objects, 1);
	st = getattr(v.root);
	ck_assert_uint_eq(st.type, LENTO_T_DIR);
	ck_assert_uint_eq(st.attr.mode, 0755);
	ck_assert_uint_eq(st.attr.uid, 1000);
	ck_assert_uint_eq(st.attr.gid, 100);
	ck_assert_uint_eq(st.nlink, 2);
	ck_assert_uint_eq(st.vv.n, 1);
	ck_assert_uint_eq(st.vv.v[0], 1);
	ck_assert_uint_eq(entries(v.root), 0);

	ck_assert_int_eq(store_volume_create(s, "home", 0, 0, 0, NULL, err,
					     sizeof(err)), -EEXIST);
	ck_assert_ptr_nonnull(strstr(err, "exists"));
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	ck_assert_int_eq(store_volume_create(s, longname, 0, 0, 0, NULL, err,
					     sizeof(err)), -EINVAL);
	longname[LENTO_VOLNAME_MAX] = '\0';
	ck_assert_int_eq(store_volume_create(s, longname, 0, 0, 0, NULL, err,
					     sizeof(err)), 0);
	ck_assert_int_eq(store_volume_create(s, "", 0, 0, 0, NULL, err,
					     sizeof(err)), -EINVAL);
	ck_assert_int_eq(store_volume_create(s, "a/b", 0, 0, 0, NULL, err,
					     sizeof(err)), -EINVAL);
	ck_assert_int_eq(store_volume_create(s, "a b", 0, 0, 0, NULL, err,
					     sizeof(err)), -EINVAL);
	ck_assert_int_eq(store_volume_create(s, "a\tb", 0, 0, 0, NULL, err,
					     sizeof(err)), -EINVAL);
	ck_assert_int_eq(store_volume_create(s, "caf\xc3\xa9", 0, 0, 0, NULL,
					     err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(store_volume_create(s, "www", 0, 0, 0, NULL, err,
					     sizeof(err)), 0);

	ck_assert_int_eq(store_volume_lookup(s, "www", &w), 0);
	ck_assert_uint_eq(w.id, 3);
	ck_assert_int_eq(store_volume_lookup(s, "nope", &w), -ENOENT);
	/* A name no volume can have is not one: ENOENT, not EINVAL. */
	ck_assert_int_eq(store_volume_lookup(s, "a b", &w), -ENOENT);
	ck_assert_int_eq(store_volume_lookup(s, "a/b", &w), -ENOENT);
	ck_assert_int_eq(store_volume_list(s, list_cb, &b), 0);
	{
		char want[128];

		snprintf(want, sizeof(want), "1:home 2:%s 3:www ", longname);
		ck_assert_str_eq(b.p, want);
	}

	ck_assert_int_eq(store_volume_set_quota(s, "www", 4096, err,
						sizeof(err)), 0);
	ck_assert_int_eq(store_volume_lookup(s, "www", &w), 0);
	ck_assert_uint_eq(w.quota, 4096);

	ck_assert_int_eq(store_volume_remove(s, "home", err, sizeof(err)), 0);
	ck_assert_int_eq(store_volume_lookup(s, "home", &w), -ENOENT);
	ck_assert_int_eq(store_getattr(s, &v.root, &st, NULL, 0, NULL, NULL),
			 -ENOENT);
	ck_assert_int_eq(store_volume_remove(s, "home", err, sizeof(err)),
			 -ENOENT);
	/* Ids are never reused. */
	ck_assert_int_eq(store_volume_create(s, "home", 0, 0, 0, &v, err,
					     sizeof(err)), 0);
	ck_assert_uint_eq(v.id, 4);
	id = v.id;
	b.len = 0;
	ck_assert_int_eq(store_volume_list(s, list_cb, &b), 0);
	ck_assert_ptr_nonnull(strstr(b.p, "4:home"));
	/* They survive a reopen. */
	reopen();
	ck_assert_int_eq(store_volume_get(s, id, &w), 0);
	ck_assert_str_eq(w.name, "home");
	free(b.p);
}
END_TEST

/* Removing a volume removes its objects and bodies, not others'. */
START_TEST(volume_remove_everything)
{
	uint32_t a = new_volume("a", 0), b = new_volume("b", 0);
	struct tc ca, cb;
	struct lento_fid d, f, g;

	tc_init(&ca, a, 5);
	tc_init(&cb, b, 5);
	d = mkdir_(&ca, LENTO_ROOT_FID(a), "d");
	f = mkfile(&ca, d, "f");
	store_data(&ca, f, "hello", 5, false);
	xattr(&ca, f, "user.x", "1");
	SEND_OK(&ca);
	g = mkfile(&cb, LENTO_ROOT_FID(b), "g");
	store_data(&cb, g, "world", 5, true);
	SEND_OK(&cb);
	ck_assert_uint_eq(count_files("bodies"), 2);
	ck_assert_int_eq(store_volume_remove(s, "a", err, sizeof(err)), 0);
	ck_assert_uint_eq(count_files("bodies"), 1);
	ck_assert(!exists(f));
	ck_assert(!exists(d));
	ck_assert(exists(g));
	free(content(g, NULL));
	/* The client's record numbers went with the volume. */
	ck_assert_int_eq(store_volume_create(s, "a", 0, 0, 0, NULL, err,
					     sizeof(err)), 0);
	reopen();
	ck_assert_uint_eq(count_files("bodies"), 1);
}
END_TEST

START_TEST(quota)
{
	uint32_t vol = new_volume("q", 4 * STORE_OBJ_OVERHEAD + 1000);
	struct store_volume v;
	struct lento_fid f, g;
	uint32_t clients[] = { 9 };
	char big[4000], *before, *after;
	struct tc c;

	memset(big, 'b', sizeof(big));
	tc_init(&c, vol, 9);
	f = mkfile(&c, LENTO_ROOT_FID(vol), "f");
	store_data(&c, f, big, 1000, false);
	SEND_OK(&c);
	ck_assert_int_eq(store_volume_get(s, vol, &v), 0);
	ck_assert_uint_eq(v.usage, 2 * STORE_OBJ_OVERHEAD + 1000);
	ck_assert_uint_eq(v.objects, 2);

	/* Two more objects fit; 1 byte more does not. */
	before = dump(vol, clients, 1);
	g = mkfile(&c, LENTO_ROOT_FID(vol), "g");
	mkfile(&c, LENTO_ROOT_FID(vol), "h");
	store_data(&c, g, big, 1, true);
	ck_assert_int_eq(send(&c), -EDQUOT);
	ck_assert_int_eq(c.res.outcome, STORE_FAILED);
	ck_assert_int_eq(c.res.err, -EDQUOT);
	ck_assert_ptr_nonnull(strstr(c.res.msg, "quota"));
	after = dump(vol, clients, 1);
	SAME_DUMP(before, after);

	/* Replacing content within the quota is fine; so is shrinking. */
	store_data(&c, f, big, 1000 + STORE_OBJ_OVERHEAD * 2, false);
	SEND_OK(&c);
	ck_assert_int_eq(store_volume_get(s, vol, &v), 0);
	ck_assert_uint_eq(v.usage, v.quota);
	/* Xattrs count: name and value. */
	xattr(&c, f, "user.a", "z");
	ck_assert_int_eq(send(&c), -EDQUOT);
	ck_assert_int_eq(store_volume_set_quota(s, "q", 0, err, sizeof(err)),
			 0);
	xattr(&c, f, "user.a", "z");
	SEND_OK(&c);
	ck_assert_int_eq(store_volume_get(s, vol, &v), 0);
	ck_assert_uint_eq(v.usage, 2 * STORE_OBJ_OVERHEAD + 1000 +
			  2 * STORE_OBJ_OVERHEAD + 7);
	/* Usage above the quota: a batch that frees space still goes. */
	ck_assert_int_eq(store_volume_set_quota(s, "q", 100, err, sizeof(err)),
			 0);
	named(&c, LENTO_OP_UNLINK, LENTO_ROOT_FID(vol), "f", f);
	SEND_OK(&c);
	ck_assert_int_eq(store_volume_get(s, vol, &v), 0);
	ck_assert_uint_eq(v.usage, STORE_OBJ_OVERHEAD);
	ck_assert_uint_eq(v.objects, 1);
}
END_TEST

/*
 * The check before the bodies come: a STORE over the largest file size,
 * and a batch that grows usage past the quota however it is counted, are
 * refused as the apply refuses them; content replaced, removed or
 * truncated by the batch is counted at its least, so no batch the apply
 * takes is refused (send() checks that of every batch).
 */
START_TEST(reintegrate_check)
{
	uint32_t vol = new_volume("rc", 4 * STORE_OBJ_OVERHEAD + 1000);
	struct lento_attr trunc = { .valid = LENTO_A_SIZE, .size = 0 };
	struct lento_rec *r;
	struct lento_fid f, g;
	char big[3000];
	struct tc c;

	memset(big, 'b', sizeof(big));
	tc_init(&c, vol, 9);
	f = mkfile(&c, LENTO_ROOT_FID(vol), "f");
	/* Larger than a file may be (STORE_FILE_MAX, 2^44): the record. */
	r = add(&c, LENTO_OP_STORE);
	r->obj = f;
	r->attr.valid = LENTO_A_SIZE;
	r->attr.size = (1ull << 44) + 1;
	seal(&c, r);
	ck_assert_int_eq(store_reintegrate_check(s, vol, 9, c.recs, c.n,
						 &c.res), 0);
	ck_assert_int_eq(c.res.err, -EFBIG);
	ck_assert_int_eq(c.res.rec, 1);
	ck_assert(lento_fid_eq(&c.res.fid, &f));
	ck_assert_int_eq(send(&c), -EFBIG);

	/* 3000 bytes where 2536 are left: refused before and at the apply. */
	f = mkfile(&c, LENTO_ROOT_FID(vol), "f");
	store_data(&c, f, big, 3000, false);
	ck_assert_int_eq(store_reintegrate_check(s, vol, 9, c.recs, c.n,
						 &c.res), 0);
	ck_assert_int_eq(c.res.err, -EDQUOT);
	ck_assert_int_eq(c.res.rec, -1);
	ck_assert_uint_eq(c.res.last_recno, 0);
	ck_assert_int_eq(send(&c), -EDQUOT);
	/* Truncated later in the batch: it fits, and is not refused. */
	f = mkfile(&c, LENTO_ROOT_FID(vol), "f");
	store_data(&c, f, big, 3000, false);
	setattr(&c, f, &trunc);
	SEND_OK(&c);
	/* 2000 bytes in f: 24 bytes are left. Replaced by 2000: it fits. */
	store_data(&c, f, big, 2000, false);
	SEND_OK(&c);
	store_data(&c, f, big, 2000, false);
	SEND_OK(&c);
	/* f removed to make room for g and its 2000 bytes: it fits. */
	g = mkfile(&c, LENTO_ROOT_FID(vol), "g");
	named(&c, LENTO_OP_UNLINK, LENTO_ROOT_FID(vol), "f", f);
	store_data(&c, g, big, 2000, false);
	SEND_OK(&c);
	/* A batch sent again is not judged again: its records are skipped. */
	c.recno -= 3;
	g = mkfile(&c, LENTO_ROOT_FID(vol), "g");
	named(&c, LENTO_OP_UNLINK, LENTO_ROOT_FID(vol), "f", f);
	r = add(&c, LENTO_OP_STORE);
	r->obj = g;
	r->attr.valid = LENTO_A_SIZE;
	r->attr.size = 1u << 30;
	ck_assert_int_eq(store_reintegrate_check(s, vol, 9, c.recs, c.n,
						 &c.res), 0);
	ck_assert_int_eq(c.res.outcome, STORE_APPLIED);
	ck_assert_uint_eq(c.res.last_recno, c.recno);
	c.n = 0;

	/*
	 * Record numbers are judged first, as the apply judges them: a
	 * batch with records missing before it, or not consecutive, and a
	 * STORE too large is refused for its numbers (the check of before
	 * said EFBIG where the apply says EPROTO or EINVAL).
	 */
	c.recno += 2;
	f = mkfile(&c, LENTO_ROOT_FID(vol), "h");
	r = add(&c, LENTO_OP_STORE);
	r->obj = f;
	r->attr.valid = LENTO_A_SIZE;
	r->attr.size = (1ull << 44) + 1;
	seal(&c, r);
	ck_assert_int_eq(store_reintegrate_check(s, vol, 9, c.recs, c.n,
						 &c.res), 0);
	ck_assert_int_eq(c.res.err, -EPROTO);
	ck_assert_int_eq(send(&c), -EPROTO);
	c.recno -= 2;
	f = mkfile(&c, LENTO_ROOT_FID(vol), "h");
	r = add(&c, LENTO_OP_STORE);
	r->obj = f;
	r->attr.valid = LENTO_A_SIZE;
	r->attr.size = (1ull << 44) + 1;
	seal(&c, r);
	c.recs[1].recno++;
	ck_assert_int_eq(store_reintegrate_check(s, vol, 9, c.recs, c.n,
						 &c.res), 0);
	ck_assert_int_eq(c.res.err, -EINVAL);
	ck_assert_int_eq(c.res.rec, 1);
	ck_assert_int_eq(send(&c), -EINVAL);
	ck_assert_int_eq(store_reintegrate_check(s, vol, 0, c.recs, c.n,
						 &c.res), 0);
	ck_assert_int_eq(c.res.err, -EINVAL);
	c.n = 0;
}
END_TEST

/* ----------------------------------------------------------- operations */

START_TEST(create_and_friends)
{
	uint32_t vol = new_volume("v", 0);
	struct lento_fid root = LENTO_ROOT_FID(vol), f, d, p, l, dev;
	char target[LENTO_SYMLINK_MAX + 1];
	struct lento_status st, rst;
	struct lento_rec *r;
	struct store_volume v;
	struct tc c;

	tc_init(&c, vol, 3);
	f = mkfile(&c, root, "file");
	d = mkdir_(&c, root, "dir");
	p = mk(&c, LENTO_OP_MKNOD, d, "fifo", LENTO_T_FIFO, 0600);
	l = mk(&c, LENTO_OP_SYMLINK, d, "link", LENTO_T_SYMLINK, 0777);
	r = add(&c, LENTO_OP_MKNOD);
	r->dir = d;
	r->obj = dev = new_fid(&c);
	r->type = LENTO_T_CHR;
	snprintf(r->name, sizeof(r->name), "null");
	r->attr.valid = LENTO_A_MODE | LENTO_A_RDEV | LENTO_A_UID |
			LENTO_A_GID | LENTO_A_MTIME;
	r->attr.mode = 0666;
	r->attr.rdev = (1ULL << 32) | 3;
	r->attr.mtime_ns = 42;
	seal(&c, r);
	SEND_OK(&c);
	ck_assert_uint_eq(c.res.applied, 5);
	ck_assert_uint_eq(c.res.skipped, 0);
	ck_assert_uint_eq(c.res.last_recno, 5);
	ck_assert_uint_eq(c.res.stamp, 6);

	ck_assert(same_fid(lookup(root, "file"), f));
	ck_assert(same_fid(lookup(root, "dir"), d));
	ck_assert(same_fid(lookup(d, "fifo"), p));
	ck_assert(same_fid(lookup(d, "link"), l));
	ck_assert_uint_eq(entries(root), 2);
	ck_assert_uint_eq(entries(d), 3);
	st = getattr(f);
	ck_assert_uint_eq(st.type, LENTO_T_REG);
	ck_assert_uint_eq(st.attr.mode, 0644);
	ck_assert_uint_eq(st.nlink, 1);
	ck_assert_uint_eq(st.attr.size, 0);
	ck_assert_int_eq(st.attr.mtime_ns, c.recs[0].time_ns);
	ck_assert_uint_eq(st.vv.v[0], 1);
	ck_assert_uint_eq(st.vv.store.client, 3);
	ck_assert_uint_eq(st.vv.store.seq, 1);
	free(content(f, NULL));
	st = getattr(d);
	ck_assert_uint_eq(st.type, LENTO_T_DIR);
	ck_assert_uint_eq(st.nlink, 2);
	/* d was named by records 2 (created), 3, 4, 5 (parent). */
	ck_assert_uint_eq(st.vv.v[0], 4);
	ck_assert_uint_eq(st.vv.store.seq, 5);
	ck_assert_int_eq(st.attr.mtime_ns, c.recs[4].time_ns);
	rst = getattr(root);
	ck_assert_uint_eq(rst.nlink, 3);
	ck_assert_uint_eq(rst.vv.v[0], 3);
	ck_assert_int_eq(store_getattr(s, &l, &st, target, sizeof(target),
				       NULL, NULL), 0);
	ck_assert_uint_eq(st.type, LENTO_T_SYMLINK);
	ck_assert_str_eq(target, "../some/target");
	ck_assert_str_eq(listed_target(d, "link"), "../some/target");
	ck_assert_uint_eq(st.attr.size, 14);
	ck_assert_int_eq(store_getattr(s, &l, &st, target, 5, NULL, NULL),
			 -ENAMETOOLONG);
	st = getattr(dev);
	ck_assert_uint_eq(st.type, LENTO_T_CHR);
	ck_assert_uint_eq(st.attr.rdev, (1ULL << 32) | 3);
	ck_assert_int_eq(st.attr.mtime_ns, 42);
	st = getattr(p);
	ck_assert_uint_eq(st.type, LENTO_T_FIFO);
	ck_assert_uint_eq(st.attr.mode, 0600);
	{
		int fd;
		uint64_t n;

		ck_assert_int_eq(store_body_open(s, &d, NULL, &fd, &n, NULL),
				 -EISDIR);
		ck_assert_int_eq(store_body_open(s, &p, NULL, &fd, &n, NULL),
				 -EINVAL);
	}
	ck_assert_int_eq(store_volume_get(s, vol, &v), 0);
	ck_assert_uint_eq(v.objects, 6);
	ck_assert_uint_eq(v.usage, 6 * STORE_OBJ_OVERHEAD + 14);
}
END_TEST

START_TEST(link_unlink_rmdir)
{
	uint32_t vol = new_volume("v", 0);
	struct lento_fid root = LENTO_ROOT_FID(vol), f, d, e;
	struct store_volume v;
	struct tc c;

	tc_init(&c, vol, 3);
	d = mkdir_(&c, root, "d");
	e = mkdir_(&c, d, "e");
	f = mkfile(&c, root, "f");
	store_data(&c, f, "abc", 3, false);
	named(&c, LENTO_OP_LINK, d, "f2", f);
	SEND_OK(&c);
	ck_assert_uint_eq(getattr(f).nlink, 2);
	ck_assert_uint_eq(getattr(d).nlink, 3);
	ck_assert(same_fid(lookup(d, "f2"), f));
	ck_assert_uint_eq(count_files("bodies"), 1);

	/* One name goes: the object stays. */
	named(&c, LENTO_OP_UNLINK, root, "f", f);
	SEND_OK(&c);
	ck_assert_uint_eq(getattr(f).nlink, 1);
	ck_assert(lookup(root, "f").seq == 0);
	{
		char *data = content(f, NULL);

		ck_assert_str_eq(data, "abc");
		free(data);
	}
	/* The last one: object and body go. */
	named(&c, LENTO_OP_UNLINK, d, "f2", f);
	named(&c, LENTO_OP_RMDIR, d, "e", e);
	SEND_OK(&c);
	ck_assert(!exists(f));
	ck_assert(!exists(e));
	ck_assert_uint_eq(count_files("bodies"), 0);
	ck_assert_uint_eq(getattr(d).nlink, 2);
	named(&c, LENTO_OP_RMDIR, root, "d", d);
	SEND_OK(&c);
	ck_assert_uint_eq(entries(root), 0);
	ck_assert_uint_eq(getattr(root).nlink, 2);
	ck_assert_int_eq(store_volume_get(s, vol, &v), 0);
	ck_assert_uint_eq(v.objects, 1);
	ck_assert_uint_eq(v.usage, STORE_OBJ_OVERHEAD);
}
END_TEST

START_TEST(renames)
{
	uint32_t vol = new_volume("v", 0);
	struct lento_fid root = LENTO_ROOT_FID(vol), a, b, f, g, sub, h;
	struct lento_fid none = { 0 };
	struct tc c;

	tc_init(&c, vol, 3);
	a = mkdir_(&c, root, "a");
	b = mkdir_(&c, root, "b");
	f = mkfile(&c, a, "f");
	g = mkfile(&c, b, "g");
	sub = mkdir_(&c, a, "sub");
	h = mkfile(&c, root, "h");
	store_data(&c, g, "old g", 5, false);
	SEND_OK(&c);

	/* Within a directory. */
	mv(&c, a, "f", f, a, "f1", none, 0);
	SEND_OK(&c);
	ck_assert(same_fid(lookup(a, "f1"), f));
	ck_assert(lookup(a, "f").seq == 0);
	/* Across directories, over an existing file: it goes, body too. */
	ck_assert_uint_eq(count_files("bodies"), 1);
	mv(&c, a, "f1", f, b, "g", g, 0);
	SEND_OK(&c);
	ck_assert(same_fid(lookup(b, "g"), f));
	ck_assert(!exists(g));
	ck_assert_uint_eq(count_files("bodies"), 0);
	ck_assert_uint_eq(entries(b), 1);
	/* A directory across directories: link counts follow. */
	mv(&c, a, "sub", sub, b, "sub", none, 0);
	SEND_OK(&c);
	ck_assert_uint_eq(getattr(a).nlink, 2);
	ck_assert_uint_eq(getattr(b).nlink, 3);
	/* Into its own subtree: EINVAL. */
	mv(&c, root, "b", b, sub, "b", none, 0);
	ck_assert_int_eq(send(&c), -EINVAL);
	ck_assert_int_eq(c.res.rec, 0);
	ck_assert(lento_fid_eq(&c.res.fid, &b));
	mv(&c, root, "b", b, b, "b", none, 0);
	ck_assert_int_eq(send(&c), -EINVAL);
	/* NOREPLACE. */
	mv(&c, root, "h", h, b, "g", f, LENTO_R_NOREPLACE);
	ck_assert_int_eq(send(&c), -EEXIST);
	mv(&c, root, "h", h, b, "h", none, LENTO_R_NOREPLACE);
	SEND_OK(&c);
	ck_assert(same_fid(lookup(b, "h"), h));
	/* Over another name of the same object too, as Linux. */
	named(&c, LENTO_OP_LINK, b, "h2", h);
	SEND_OK(&c);
	mv(&c, b, "h", h, b, "h2", h, LENTO_R_NOREPLACE);
	ck_assert_int_eq(send(&c), -EEXIST);
	named(&c, LENTO_OP_UNLINK, b, "h2", h);
	SEND_OK(&c);
	/* EXCHANGE a file and a directory across directories. */
	mv(&c, b, "h", h, root, "a", a, LENTO_R_EXCHANGE);
	SEND_OK(&c);
	ck_assert(same_fid(lookup(b, "h"), a));
	ck_assert(same_fid(lookup(root, "a"), h));
	ck_assert_uint_eq(getattr(b).nlink, 4);
	ck_assert_uint_eq(getattr(root).nlink, 3);
	/* EXCHANGE needs a target; NOREPLACE|EXCHANGE is invalid. */
	mv(&c, b, "g", f, root, "zz", none, LENTO_R_EXCHANGE);
	ck_assert_int_eq(send(&c), -ENOENT);
	mv(&c, b, "g", f, root, "a", h, LENTO_R_EXCHANGE | LENTO_R_NOREPLACE);
	ck_assert_int_eq(send(&c), -EINVAL);
	/* Type rules when replacing. */
	mv(&c, b, "g", f, b, "sub", sub, 0);
	ck_assert_int_eq(send(&c), -EISDIR);
	mv(&c, b, "sub", sub, b, "g", f, 0);
	ck_assert_int_eq(send(&c), -ENOTDIR);
	/* A directory over a non-empty one; then over an empty one. */
	mkfile(&c, sub, "x");
	SEND_OK(&c);
	mv(&c, b, "h", a, b, "sub", sub, 0);
	ck_assert_int_eq(send(&c), -ENOTEMPTY);
	{
		struct lento_fid empty = mkdir_(&c, root, "empty");

		mv(&c, b, "h", a, root, "empty", empty, 0);
		SEND_OK(&c);
		ck_assert(!exists(empty));
		ck_assert(same_fid(lookup(root, "empty"), a));
		ck_assert_uint_eq(getattr(root).nlink, 4);
		ck_assert_uint_eq(getattr(b).nlink, 3);
	}
	/* The record must know what the new name holds. */
	mv(&c, b, "g", f, root, "a", none, 0);
	ck_assert_int_eq(send(&c), -EEXIST);
	/* Two names of one object: nothing happens. */
	named(&c, LENTO_OP_LINK, b, "g2", f);
	mv(&c, b, "g", f, b, "g2", f, 0);
	SEND_OK(&c);
	ck_assert(same_fid(lookup(b, "g"), f));
	ck_assert(same_fid(lookup(b, "g2"), f));
	ck_assert_uint_eq(getattr(f).nlink, 2);
}
END_TEST

/*
 * A directory moved into one 4096 levels deep is refused (ENAMETOOLONG):
 * the server walks up from the new parent, a lookup a level, to tell
 * whether the move is into the directory's own subtree.
 */
START_TEST(rename_into_a_deep_chain)
{
	uint32_t vol = new_volume("v", 0);
	struct lento_fid root = LENTO_ROOT_FID(vol), m, d, mid = { 0 };
	struct lento_fid none = { 0 };
	struct tc c;

	tc_init(&c, vol, 3);
	m = mkdir_(&c, root, "m");
	d = root;
	for (int i = 0; i < 4097; i++) {
		d = mkdir_(&c, d, "d");
		if (i == 100)
			mid = d;
		if (c.n == MAXREC - 1)
			SEND_OK(&c);
	}
	SEND_OK(&c);
	mv(&c, root, "m", m, d, "m", none, 0);
	ck_assert_int_eq(send(&c), -ENAMETOOLONG);
	ck_assert_ptr_nonnull(strstr(c.res.msg, "4096 levels deep"));
	mv(&c, root, "m", m, mid, "m", none, 0);
	SEND_OK(&c);
	ck_assert(same_fid(lookup(mid, "m"), m));
}
END_TEST

/* LASTLINK on a rename over a target is the client's note: taken. */
START_TEST(rename_lastlink)
{
	uint32_t vol = new_volume("v", 0);
	struct lento_fid root = LENTO_ROOT_FID(vol), f, g;
	struct tc c;

	tc_init(&c, vol, 3);
	f = mkfile(&c, root, "f");
	g = mkfile(&c, root, "g");
	SEND_OK(&c);
	mv(&c, root, "f", f, root, "g", g, LENTO_R_LASTLINK);
	SEND_OK(&c);
	ck_assert(same_fid(lookup(root, "g"), f));
	ck_assert(!exists(g));
}
END_TEST

/*
 * A directory with NLINK_MAX links (65000) takes no more subdirectories:
 * not by MKDIR, nor by a RENAME or an exchange that moves one in. One
 * moved out in exchange, or replaced, leaves the count as it was.
 */
START_TEST(dir_links_bounded)
{
	const size_t n = 65000 - 2;
	uint32_t vol = new_volume("links", 0);
	struct lento_fid root = LENTO_ROOT_FID(vol), full, src, d, f, in, e;
	struct lento_rec *recs = calloc(n, sizeof(*recs));
	struct store_result res;
	struct lento_vv fvv;
	struct tc c;

	ck_assert_ptr_nonnull(recs);
	tc_init(&c, vol, 3);
	full = mkdir_(&c, root, "full");
	src = mkdir_(&c, root, "src");
	d = mkdir_(&c, src, "d");
	e = mkdir_(&c, src, "e");
	f = mkfile(&c, src, "f");
	SEND_OK(&c);
	fvv = getattr(full).vv;
	for (size_t i = 0; i < n; i++) {
		struct lento_rec *r = &recs[i];

		r->recno = i + 1;
		r->op = LENTO_OP_MKDIR;
		r->time_ns = 1700000000000000000LL + (int64_t)i;
		r->dir = full;
		r->obj = (struct lento_fid){ vol, 9, i + 1 };
		r->base_dir = fvv;
		lento_vv_init(&r->base_obj, 0);
		r->type = LENTO_T_DIR;
		snprintf(r->name, sizeof(r->name), "sub-%05zu", i);
		r->attr.valid = LENTO_A_MODE;
		r->attr.mode = 0755;
		lento_vv_bump(&fvv, 0, (struct lento_storeid){ 9, i + 1 });
	}
	ck_assert_int_eq(store_reintegrate(s, vol, 9, recs, n, NULL, &res), 0);
	free(recs);
	ck_assert_uint_eq(getattr(full).nlink, 65000);
	in = (struct lento_fid){ vol, 9, 1 };	/* full/sub-00000 */

	mkdir_(&c, full, "more");
	ck_assert_int_eq(send(&c), -EMLINK);
	mv(&c, src, "d", d, full, "d", (struct lento_fid){ 0 }, 0);
	ck_assert_int_eq(send(&c), -EMLINK);
	ck_assert(lento_fid_eq(&c.res.fid, &full));
	mv(&c, src, "f", f, full, "sub-00000", in, LENTO_R_EXCHANGE);
	ck_assert_int_eq(send(&c), 0);	/* a directory out, a file in */
	ck_assert_uint_eq(getattr(full).nlink, 64999);
	mv(&c, src, "e", e, full, "e", (struct lento_fid){ 0 }, 0);
	ck_assert_int_eq(send(&c), 0);	/* the last link there was */
	ck_assert_uint_eq(getattr(full).nlink, 65000);
	mv(&c, full, "sub-00000", f, src, "d", d, LENTO_R_EXCHANGE);
	ck_assert_int_eq(send(&c), -EMLINK);	/* a file out, d in */
	ck_assert(lento_fid_eq(&c.res.fid, &full));
	mv(&c, src, "d", d, full, "sub-00001",
	   (struct lento_fid){ vol, 9, 2 }, 0);
	ck_assert_int_eq(send(&c), 0);	/* a directory replaced */
	ck_assert_uint_eq(getattr(full).nlink, 65000);
}
END_TEST

START_TEST(rename_across_volumes)
{
	uint32_t v1 = new_volume("one", 0), v2 = new_volume("two", 0);
	struct lento_fid f, none = { 0 };
	struct tc c;

	tc_init(&c, v1, 3);
	f = mkfile(&c, LENTO_ROOT_FID(v1), "f");
	SEND_OK(&c);
	mv(&c, LENTO_ROOT_FID(v1), "f", f, LENTO_ROOT_FID(v2), "f", none, 0);
	ck_assert_int_eq(send(&c), -EXDEV);
	ck_assert_int_eq(c.res.rec, 0);
	named(&c, LENTO_OP_LINK, LENTO_ROOT_FID(v2), "f", f);
	ck_assert_int_eq(send(&c), -EXDEV);
	ck_assert_uint_eq(entries(LENTO_ROOT_FID(v2)), 0);
}
END_TEST

/* How many size changes copied content (STORE_FAULT_RESIZE). */
struct copies {
	int n;
};

static int count_copies(void *arg, enum store_fault where, struct sqlite3 *db)
{
	(void)db;
	((struct copies *)arg)->n += where == STORE_FAULT_RESIZE;
	return 0;
}

START_TEST(setattr_and_sizes)
{
	uint32_t vol = new_volume("v", 0);
	struct lento_fid root = LENTO_ROOT_FID(vol), f, d;
	struct lento_attr a = { 0 };
	struct lento_status st;
	uint64_t n;
	char *data;
	struct tc c;

	tc_init(&c, vol, 3);
	f = mkfile(&c, root, "f");
	d = mkdir_(&c, root, "d");
	store_data(&c, f, "0123456789", 10, false);
	SEND_OK(&c);

	a.valid = LENTO_A_MODE | LENTO_A_UID | LENTO_A_GID | LENTO_A_ATIME |
		  LENTO_A_MTIME | LENTO_A_CTIME;
	a.mode = 04711;
	a.uid = 12;
	a.gid = 34;
	a.atime_ns = 1;
	a.mtime_ns = 2;
	a.ctime_ns = 3;
	setattr(&c, f, &a);
	SEND_OK(&c);
	st = getattr(f);
	ck_assert_uint_eq(st.attr.mode, 04711);
	ck_assert_uint_eq(st.attr.uid, 12);
	ck_assert_uint_eq(st.attr.gid, 34);
	ck_assert_int_eq(st.attr.atime_ns, 1);
	ck_assert_int_eq(st.attr.mtime_ns, 2);
	ck_assert_int_eq(st.attr.ctime_ns, 3);
	ck_assert_uint_eq(st.attr.size, 10);
	/* chown alone drops set-id bits (not on directories). */
	a.valid = LENTO_A_UID;
	a.uid = 13;
	setattr(&c, f, &a);
	SEND_OK(&c);
	ck_assert_uint_eq(getattr(f).attr.mode, 0711);
	ck_assert_int_eq(getattr(f).attr.ctime_ns, c.time);

	/* Truncate: a new body, the old one gone after the commit. */
	a.valid = LENTO_A_SIZE;
	a.size = 4;
	setattr(&c, f, &a);
	SEND_OK(&c);
	data = content(f, &n);
	ck_assert_str_eq(data, "0123");
	free(data);
	ck_assert_uint_eq(count_files("bodies"), 1);
	/* Extend: zeros. */
	a.size = 6;
	setattr(&c, f, &a);
	SEND_OK(&c);
	data = content(f, &n);
	ck_assert_uint_eq(n, 6);
	ck_assert_int_eq(memcmp(data, "0123\0\0", 6), 0);
	free(data);
	/* A STORE and a truncation of it in one batch. */
	store_data(&c, f, "abcdefgh", 8, true);
	a.size = 3;
	setattr(&c, f, &a);
	a.size = 5;
	setattr(&c, f, &a);
	SEND_OK(&c);
	data = content(f, &n);
	ck_assert_uint_eq(n, 5);
	ck_assert_int_eq(memcmp(data, "abc\0\0", 5), 0);
	free(data);
	ck_assert_uint_eq(count_files("bodies"), 1);
	ck_assert_uint_eq(count_files("tmp"), 0);
	/*
	 * A chain of size changes in one batch: one copy, the rest resize
	 * it in place. The content: what the smallest size kept, then zeros.
	 */
	{
		struct copies cp = { 0 };
		static char big[65536];

		memset(big, 'x', sizeof(big));
		store_data(&c, f, big, sizeof(big), false);
		for (int i = 0; i < 40; i++) {
			a.size = i == 20 ? 1000 : sizeof(big) - i % 2;
			setattr(&c, f, &a);
		}
		store_set_fault(s, count_copies, &cp);
		SEND_OK(&c);
		store_set_fault(s, NULL, NULL);
		ck_assert_int_eq(cp.n, 1);
		data = content(f, &n);
		ck_assert_uint_eq(n, sizeof(big) - 1);
		for (size_t k = 0; k < n; k++)
			ck_assert_int_eq(data[k], k < 1000 ? 'x' : 0);
		free(data);
		ck_assert_uint_eq(count_files("bodies"), 1);
		ck_assert_uint_eq(count_files("tmp"), 0);
	}
	/* To 0: no body at all. */
	a.size = 0;
	setattr(&c, f, &a);
	SEND_OK(&c);
	ck_assert_uint_eq(count_files("bodies"), 0);
	data = content(f, &n);
	ck_assert_uint_eq(n, 0);
	free(data);
	/* From nothing to 3 bytes of zeros. */
	a.size = 3;
	setattr(&c, f, &a);
	SEND_OK(&c);
	data = content(f, &n);
	ck_assert_int_eq(memcmp(data, "\0\0\0", 3), 0);
	free(data);

	/*
	 * Grown to a GiB, then by a byte: the body stays sparse (the copy
	 * of the old one skips its hole), and nothing past ext4's largest
	 * file is taken.
	 */
	a.size = 1ull << 30;
	setattr(&c, f, &a);
	SEND_OK(&c);
	a.size = (1ull << 30) + 1;
	setattr(&c, f, &a);
	SEND_OK(&c);
	ck_assert_uint_eq(getattr(f).attr.size, (1ull << 30) + 1);
	ck_assert_uint_lt(blocks_of("bodies"), 1024);
	a.size = (1ull << 44) + 1;
	setattr(&c, f, &a);
	ck_assert_int_eq(send(&c), -EFBIG);
	a.size = 3;

	/* Not for directories; not the rdev; not type bits. */
	setattr(&c, d, &a);
	ck_assert_int_eq(send(&c), -EISDIR);
	a.valid = LENTO_A_RDEV;
	setattr(&c, f, &a);
	ck_assert_int_eq(send(&c), -EINVAL);
	a.valid = LENTO_A_MODE;
	a.mode = 0100644;
	setattr(&c, f, &a);
	ck_assert_int_eq(send(&c), -EINVAL);
}
END_TEST

static int count_xattrs(void *arg, const char *name, const void *value,
			size_t len)
{
	(void)name;
	(void)value;
	(void)len;
	++*(int *)arg;
	return 0;
}

START_TEST(xattrs)
{
	uint32_t vol = new_volume("v", 0);
	struct lento_fid root = LENTO_ROOT_FID(vol), f, l;
	struct lento_status st;
	struct buf b = { .cap = 64 };
	struct lento_rec *r;
	static char big[LENTO_XATTR_SIZE_MAX + 1];
	int count = 0;
	struct tc c;

	b.p = malloc(b.cap);
	tc_init(&c, vol, 3);
	f = mkfile(&c, root, "f");
	l = mk(&c, LENTO_OP_SYMLINK, root, "l", LENTO_T_SYMLINK, 0777);
	xattr(&c, f, "user.b", "2");
	xattr(&c, f, "user.a", "1");
	xattr(&c, f, "trusted.t", "");
	xattr(&c, f, "user.b", "22");
	SEND_OK(&c);
	ck_assert_int_eq(store_getattr(s, &f, &st, NULL, 0, xattr_cb, &b), 0);
	ck_assert_str_eq(b.p, " trusted.t= user.a=1 user.b=22");
	/* A listing says which entries have xattrs to ask for. */
	struct find fd = { .name = "f" }, fl = { .name = "l" };

	ck_assert_int_eq(store_readdir(s, &root, find_cb, &fd), 0);
	ck_assert(fd.xattrs);
	ck_assert_int_eq(store_readdir(s, &root, find_cb, &fl), 0);
	ck_assert(!fl.xattrs);
	xattr(&c, f, "user.a", NULL);
	SEND_OK(&c);
	b.len = 0;
	ck_assert_int_eq(store_getattr(s, &f, &st, NULL, 0, xattr_cb, &b), 0);
	ck_assert_str_eq(b.p, " trusted.t= user.b=22");
	xattr(&c, f, "user.a", NULL);
	ck_assert_int_eq(send(&c), -ENODATA);
	/* An access ACL sets the mode's permission bits (mask for group). */
	static const uint8_t acl[] = {
		2, 0, 0, 0,  0x01, 0, 6, 0, 0xff, 0xff, 0xff, 0xff,
		0x02, 0, 4, 0, 0xe8, 3, 0, 0,  0x04, 0, 0, 0, 0xff, 0xff, 0xff,
		0xff,  0x10, 0, 5, 0, 0xff, 0xff, 0xff, 0xff,  0x20, 0, 1, 0,
		0xff, 0xff, 0xff, 0xff,
	};
	r = xattr(&c, f, "system.posix_acl_access", "x");
	r->data = acl;
	r->data_len = sizeof(acl);
	SEND_OK(&c);
	ck_assert_int_eq(store_getattr(s, &f, &st, NULL, 0, NULL, NULL), 0);
	ck_assert_uint_eq(st.attr.mode & 0777, 0651);
	r = xattr(&c, f, "system.posix_acl_access", "x");
	r->data = acl;
	r->data_len = sizeof(acl) - 1;
	ck_assert_int_eq(send(&c), -EINVAL);
	xattr(&c, f, "system.posix_acl_access", NULL);
	SEND_OK(&c);
	xattr(&c, f, "bogus.a", "1");
	ck_assert_int_eq(send(&c), -EOPNOTSUPP);
	xattr(&c, l, "user.a", "1");
	ck_assert_int_eq(send(&c), -EPERM);

	/* Limits: value size, count. */
	r = xattr(&c, f, "user.big", "x");
	memset(big, 'v', sizeof(big));
	r->data = big;
	r->data_len = LENTO_XATTR_SIZE_MAX + 1;
	ck_assert_int_eq(send(&c), -E2BIG);
	r = xattr(&c, f, "user.big", "x");
	r->data = big;
	r->data_len = LENTO_XATTR_SIZE_MAX;
	SEND_OK(&c);
	for (int i = 3; i < LENTO_XATTRS_MAX; i++) {
		char name[32];

		snprintf(name, sizeof(name), "user.n%d", i);
		xattr(&c, f, name, "v");
		if (c.n == MAXREC)
			SEND_OK(&c);
	}
	SEND_OK(&c);
	ck_assert_int_eq(store_getattr(s, &f, &st, NULL, 0, count_xattrs,
				       &count), 0);
	ck_assert_int_eq(count, LENTO_XATTRS_MAX);
	xattr(&c, f, "user.onemore", "v");
	ck_assert_int_eq(send(&c), -ENOSPC);
	xattr(&c, f, "user.b", "replacing is fine");
	SEND_OK(&c);
	/* With none left, the listing says so. */
	for (int i = 3; i < LENTO_XATTRS_MAX; i++) {
		char name[32];

		snprintf(name, sizeof(name), "user.n%d", i);
		xattr(&c, f, name, NULL);
		if (c.n == MAXREC)
			SEND_OK(&c);
	}
	xattr(&c, f, "user.b", NULL);
	xattr(&c, f, "user.big", NULL);
	xattr(&c, f, "trusted.t", NULL);
	SEND_OK(&c);
	fd.xattrs = true;
	ck_assert_int_eq(store_readdir(s, &root, find_cb, &fd), 0);
	ck_assert(!fd.xattrs);
	free(b.p);
}
END_TEST

/*
 * PRUNEXATTRS (recovery after a crash): the mirrored xattrs not named go,
 * each with a REMOVEXATTR's permission; the local LSM's stay; removing
 * nothing is no change.
 */
START_TEST(prune_xattrs)
{
	uint32_t vol = new_volume("v", 0);
	struct lento_fid root = LENTO_ROOT_FID(vol), f;
	struct lento_status st;
	struct store_volume v;
	struct buf b = { .cap = 64 };
	struct lento_vv before;
	uint64_t usage;
	struct tc c;

	b.p = malloc(b.cap);
	tc_init(&c, vol, 3);
	f = mkfile(&c, root, "f");
	xattr(&c, f, "user.a", "1");
	xattr(&c, f, "user.b", "2");
	xattr(&c, f, "trusted.t", "3");
	xattr(&c, f, "security.selinux", "lbl");
	xattr(&c, f, "security.capability", "cap");
	SEND_OK(&c);
	ck_assert_int_eq(store_volume_get(s, vol, &v), 0);
	usage = v.usage;
	/* Kept: user.a and a name the object does not have. */
	prune(&c, f, "user.x\0user.a", 14);
	SEND_OK(&c);
	ck_assert_int_eq(store_getattr(s, &f, &st, NULL, 0, xattr_cb, &b), 0);
	ck_assert_str_eq(b.p, " security.selinux=lbl user.a=1");
	ck_assert_int_eq(store_volume_get(s, vol, &v), 0);
	ck_assert_uint_eq(v.usage, usage - (6 + 1) - (9 + 1) -
				   (19 + 3));
	/*
	 * Nothing left to remove: the ctime stays, the version moves as
	 * the client predicts (seal()), and a record after it applies.
	 */
	before = st.vv;
	prune(&c, f, "user.a", 7);
	xattr(&c, f, "user.d", "4");
	SEND_OK(&c);
	ck_assert_int_eq(store_getattr(s, &f, &st, NULL, 0, NULL, NULL), 0);
	ck_assert(lento_vv_cmp(&st.vv, &before) == LENTO_VV_AFTER);
	prune(&c, f, "user.a\0user.d", 14);
	SEND_OK(&c);
	ck_assert_int_eq(store_getattr(s, &f, &st, NULL, 0, NULL, NULL), 0);
	ck_assert_int_eq(st.attr.ctime_ns, c.time - 1);
	/* An empty list takes every mirrored one. */
	xattr(&c, f, "user.c", "3");
	xattr(&c, f, "user.d", NULL);
	SEND_OK(&c);
	prune(&c, f, NULL, 0);
	SEND_OK(&c);
	b.len = 0;
	b.p[0] = '\0';
	ck_assert_int_eq(store_getattr(s, &f, &st, NULL, 0, xattr_cb, &b), 0);
	ck_assert_str_eq(b.p, " security.selinux=lbl");
	/* A trusted xattr is root's to remove: the batch is refused whole. */
	xattr(&c, f, "trusted.t", "3");
	SEND_OK(&c);
	c.uid = 1000;
	prune(&c, f, NULL, 0);
	ck_assert_int_eq(send(&c), -EPERM);
	b.len = 0;
	b.p[0] = '\0';
	ck_assert_int_eq(store_getattr(s, &f, &st, NULL, 0, xattr_cb, &b), 0);
	ck_assert_str_eq(b.p, " security.selinux=lbl trusted.t=3");
	free(b.p);
}
END_TEST

START_TEST(store_bodies)
{
	uint32_t vol = new_volume("v", 0);
	struct lento_fid root = LENTO_ROOT_FID(vol), f;
	struct lento_status st;
	struct lento_vv vv1, now;
	struct lento_rec *r;
	uint64_t n;
	char *data, buf[16];
	int fd, old;
	struct tc c;

	tc_init(&c, vol, 3);
	f = mkfile(&c, root, "f");
	store_data(&c, f, "version one", 11, false);
	SEND_OK(&c);
	ck_assert_uint_eq(count_files("bodies"), 1);
	ck_assert_uint_eq(count_files("tmp"), 0);
	st = getattr(f);
	ck_assert_uint_eq(st.attr.size, 11);
	ck_assert_int_eq(st.attr.mtime_ns, c.recs[1].attr.mtime_ns);
	vv1 = st.vv;
	ck_assert_int_eq(store_body_open(s, &f, &vv1, &old, &n, NULL), 0);

	/* Replaced (by fd this time): one body, the new one. */
	store_data(&c, f, "version two!", 12, true);
	SEND_OK(&c);
	ck_assert_uint_eq(count_files("bodies"), 1);
	data = content(f, &n);
	ck_assert_str_eq(data, "version two!");
	free(data);
	/* An fd opened earlier still reads what it opened. */
	ck_assert_int_eq(pread(old, buf, sizeof(buf), 0), 11);
	ck_assert_int_eq(memcmp(buf, "version one", 11), 0);
	close(old);
	/* Expecting the old version: ESTALE, and the current one said. */
	ck_assert_int_eq(store_body_open(s, &f, &vv1, &fd, &n, &now), -ESTALE);
	ck_assert_int_eq(fd, -1);
	st = getattr(f);
	ck_assert(lento_vv_eq(&now, &st.vv));

	/* Two STOREs in one batch: only the last one's body is placed. */
	store_data(&c, f, "three", 5, false);
	store_data(&c, f, "four", 4, true);
	SEND_OK(&c);
	ck_assert_uint_eq(count_files("bodies"), 1);
	data = content(f, NULL);
	ck_assert_str_eq(data, "four");
	free(data);
	/* NOBODY: the content, size and mtime stay, the version moves. */
	st = getattr(f);
	r = add(&c, LENTO_OP_STORE);
	r->obj = f;
	r->flags = LENTO_R_NOBODY;
	r->attr.valid = LENTO_A_SIZE | LENTO_A_MTIME;
	r->attr.mtime_ns = st.attr.mtime_ns + 1000;
	seal(&c, r);
	SEND_OK(&c);
	data = content(f, &n);
	ck_assert_str_eq(data, "four");
	free(data);
	now = getattr(f).vv;
	ck_assert(!lento_vv_eq(&now, &st.vv));
	ck_assert_int_eq(getattr(f).attr.mtime_ns, st.attr.mtime_ns);
	ck_assert_uint_eq(count_files("bodies"), 1);
	/* A STORE of nothing. */
	store_data(&c, f, "", 0, false);
	SEND_OK(&c);
	ck_assert_uint_eq(count_files("bodies"), 0);
	ck_assert_uint_eq(getattr(f).attr.size, 0);

	/* The body must be what the record says. */
	store_data(&c, f, "12345", 5, false);
	c.recs[0].attr.size = 6;
	ck_assert_int_eq(send(&c), -EINVAL);
	store_data(&c, f, "12345", 5, false);
	c.bodies[0].path = NULL;
	ck_assert_int_eq(send(&c), -EINVAL);
	named(&c, LENTO_OP_UNLINK, root, "f", f);
	store_data(&c, f, "late", 4, false);
	ck_assert_int_eq(send(&c), -ENOENT);
	ck_assert_int_eq(c.res.rec, 1);
	/* STORE then unlink in one batch: no body is ever placed. */
	store_data(&c, f, "gone", 4, true);
	named(&c, LENTO_OP_UNLINK, root, "f", f);
	SEND_OK(&c);
	ck_assert_uint_eq(count_files("bodies"), 0);
	ck_assert_uint_eq(count_files("tmp"), 0);
}
END_TEST

/* --------------------------------------------- conflicts and refusals */

START_TEST(conflict_on_stale_base)
{
	uint32_t vol = new_volume("v", 0);
	struct lento_fid root = LENTO_ROOT_FID(vol), f;
	uint32_t clients[] = { 1, 2 };
	struct lento_vv stale, cur;
	struct lento_attr a = { .valid = LENTO_A_MODE, .mode = 0600 };
	char *before, *after;
	struct tc c1, c2;

	tc_init(&c1, vol, 1);
	tc_init(&c2, vol, 2);
	c2.seq = 5000;
	f = mkfile(&c1, root, "f");
	store_data(&c1, f, "one", 3, false);
	SEND_OK(&c1);
	stale = getattr(f).vv;
	/* Client 2 changes f. */
	store_data(&c2, f, "two", 3, false);
	SEND_OK(&c2);
	cur = getattr(f).vv;
	ck_assert_uint_eq(cur.store.client, 2);

	/* Client 1, still at the old version, in its 2nd record. */
	before = dump(vol, clients, 2);
	mkfile(&c1, root, "g");
	setattr(&c1, f, &a);
	c1.recs[1].base_obj = stale;
	mkfile(&c1, root, "h");
	ck_assert_int_eq(send(&c1), -ESTALE);
	ck_assert_int_eq(c1.res.outcome, STORE_CONFLICT);
	ck_assert_int_eq(c1.res.err, -ESTALE);
	ck_assert_int_eq(c1.res.rec, 1);
	ck_assert(lento_fid_eq(&c1.res.fid, &f));
	ck_assert(lento_vv_eq(&c1.res.base, &stale));
	ck_assert(lento_vv_eq(&c1.res.current, &cur));
	ck_assert_uint_eq(c1.res.applied, 0);
	ck_assert_ptr_nonnull(strstr(c1.res.msg, "conflict"));
	after = dump(vol, clients, 2);
	SAME_DUMP(before, after);

	/* A directory's attributes are checked like a file's. */
	before = dump(vol, clients, 2);
	{
		struct lento_attr da = { .valid = LENTO_A_MODE, .mode = 0700 };
		struct lento_rec *r = setattr(&c1, root, &da);

		r->base_obj.v[0]--;
		ck_assert_int_eq(send(&c1), -ESTALE);
		ck_assert_int_eq(c1.res.rec, 0);
		ck_assert(lento_fid_eq(&c1.res.fid, &root));
	}
	after = dump(vol, clients, 2);
	SAME_DUMP(before, after);
}
END_TEST

/*
 * Two clients change different names of one directory from the same
 * version: both apply, the second hears the directory is stale. A name
 * taken or gone meanwhile, or a directory no longer empty, is refused.
 */
START_TEST(names_merge)
{
	uint32_t vol = new_volume("v", 0);
	struct lento_fid root = LENTO_ROOT_FID(vol), d, e, g, x, found;
	struct lento_fid none = { 0 };
	uint32_t clients[] = { 1, 2 };
	char *before, *after;
	struct tc c1, c2;

	tc_init(&c1, vol, 1);
	tc_init(&c2, vol, 2);
	c2.seq = 5000;
	d = mkdir_(&c1, root, "d");
	e = mkdir_(&c1, d, "e");
	g = mkfile(&c1, d, "gone");
	SEND_OK(&c1);
	mkfile(&c1, d, "from1");
	named(&c1, LENTO_OP_UNLINK, d, "gone", g);
	mkfile(&c1, e, "inside");
	x = mkfile(&c2, d, "from2");	/* based on d as it was */
	mv(&c2, d, "e", e, root, "e2", none, 0);
	SEND_OK(&c1);
	ck_assert_uint_eq(c1.res.nstale, 0);
	SEND_OK(&c2);
	ck_assert_uint_eq(c2.res.nstale, 2);	/* d, and e moved */
	ck_assert(!c2.res.stale_more);
	ck_assert(lento_fid_eq(&c2.res.stale[0], &d) ||
		  lento_fid_eq(&c2.res.stale[1], &d));
	found = lookup(d, "from2");
	ck_assert(lento_fid_eq(&found, &x));
	found = lookup(d, "from1");
	ck_assert(!lento_fid_is_null(&found));
	found = lookup(d, "gone");
	ck_assert(lento_fid_is_null(&found));
	found = lookup(root, "e2");
	ck_assert(lento_fid_eq(&found, &e));
	found = lookup(e, "inside");
	ck_assert(!lento_fid_is_null(&found));

	/* Not mergeable: refused, nothing changed. */
	before = dump(vol, clients, 2);
	mkfile(&c2, d, "from1");
	ck_assert_int_eq(send(&c2), -EEXIST);
	named(&c2, LENTO_OP_UNLINK, d, "gone", g);
	ck_assert_int_eq(send(&c2), -ENOENT);
	named(&c2, LENTO_OP_RMDIR, root, "e2", e);
	ck_assert_int_eq(send(&c2), -ENOTEMPTY);
	after = dump(vol, clients, 2);
	SAME_DUMP(before, after);
}
END_TEST

/* A batch whose 3rd record fails leaves the volume exactly as it was. */
START_TEST(error_in_third_record)
{
	uint32_t vol = new_volume("v", 0);
	struct lento_fid root = LENTO_ROOT_FID(vol), f, d;
	uint32_t clients[] = { 3 };
	char *before, *after;
	struct stat sb;
	struct tc c;

	tc_init(&c, vol, 3);
	f = mkfile(&c, root, "f");
	d = mkdir_(&c, root, "d");
	store_data(&c, f, "kept", 4, false);
	xattr(&c, f, "user.k", "v");
	SEND_OK(&c);

	for (int kind = 0; kind < 6; kind++) {
		before = dump(vol, clients, 1);
		/* Two good records, one of them with a body... */
		store_data(&c, f, "replaced?", 9, false);
		mkfile(&c, d, "new");
		switch (kind) {	/* ... then the bad one. */
		case 0:
			mkfile(&c, root, "f");
			break;
		case 1:
			named(&c, LENTO_OP_RMDIR, root, "d", d);
			break;
		case 2:
			mkfile(&c, f, "under a file");
			break;
		case 3:
			named(&c, LENTO_OP_UNLINK, root, "nothing", f);
			break;
		case 4:
			mkfile(&c, (struct lento_fid){ vol, 3, 999999 }, "x");
			break;
		case 5:
			mkfile(&c, root, "..");
			break;
		}
		mkfile(&c, root, "after");
		ck_assert_int_eq(stat(c.paths[0], &sb), 0);
		{
			static const int want[] = { -EEXIST, -ENOTEMPTY,
						    -ENOTDIR, -ENOENT, -ENOENT,
						    -EINVAL };
			struct store_result *res = &c.res;
			int r = store_reintegrate(s, vol, 3, c.recs, c.n,
						  c.bodies, res);

			ck_assert_int_eq(r, want[kind]);
			ck_assert_int_eq(res->outcome, STORE_FAILED);
			ck_assert_int_eq(res->err, want[kind]);
			ck_assert_int_eq(res->rec, 2);
			ck_assert_uint_eq(res->applied, 0);
			/* The caller's body is where it was. */
			ck_assert_int_eq(stat(c.paths[0], &sb), 0);
			drop_bodies(&c);
			c.recno -= c.n;
			c.nknown = 0;
			c.n = 0;
		}
		after = dump(vol, clients, 1);
		SAME_DUMP(before, after);
		ck_assert_uint_eq(count_files("tmp"), 0);
	}
}
END_TEST

START_TEST(resent_batch_skipped)
{
	uint32_t vol = new_volume("v", 0);
	struct lento_fid root = LENTO_ROOT_FID(vol), f;
	uint32_t clients[] = { 3 };
	struct lento_rec recs[5];
	struct store_result res;
	char *before, *after;
	struct tc c;

	tc_init(&c, vol, 3);
	f = mkfile(&c, root, "f");
	xattr(&c, f, "user.a", "1");
	mkfile(&c, root, "g");
	mkdir_(&c, root, "d");
	named(&c, LENTO_OP_LINK, root, "f2", f);
	memcpy(recs, c.recs, sizeof(recs));
	SEND_OK(&c);
	ck_assert_uint_eq(c.res.applied, 5);

	before = dump(vol, clients, 1);
	ck_assert_int_eq(store_reintegrate(s, vol, 3, recs, 5, NULL, &res), 0);
	ck_assert_int_eq(res.outcome, STORE_APPLIED);
	ck_assert_uint_eq(res.applied, 0);
	ck_assert_uint_eq(res.skipped, 5);
	ck_assert_uint_eq(res.last_recno, 5);
	after = dump(vol, clients, 1);
	SAME_DUMP(before, after);

	/* Overlapping: 4 and 5 again, then 6 and 7 new. */
	mkfile(&c, root, "six");
	mkfile(&c, root, "seven");
	memmove(&c.recs[2], &c.recs[0], 2 * sizeof(c.recs[0]));
	memcpy(&c.recs[0], &recs[3], 2 * sizeof(recs[0]));
	c.n = 4;
	SEND_OK(&c);
	ck_assert_uint_eq(c.res.skipped, 2);
	ck_assert_uint_eq(c.res.applied, 2);
	ck_assert_uint_eq(c.res.last_recno, 7);
	ck_assert_uint_eq(entries(root), 6);
	/* The same batch after a reopen: still skipped. */
	reopen();
	ck_assert_int_eq(store_reintegrate(s, vol, 3, recs, 5, NULL, &res), 0);
	ck_assert_uint_eq(res.skipped, 5);
	ck_assert_uint_eq(entries(root), 6);
	/* Another client's numbers are its own. */
	ck_assert_int_eq(store_reintegrate(s, vol, 4, recs, 1, NULL, &res),
			 -EINVAL);	/* fid not minted by client 4 */
	ck_assert_int_eq(res.rec, 0);
}
END_TEST

START_TEST(recno_gap_refused)
{
	uint32_t vol = new_volume("v", 0);
	struct lento_fid root = LENTO_ROOT_FID(vol);
	struct tc c;

	tc_init(&c, vol, 3);
	mkfile(&c, root, "a");
	SEND_OK(&c);
	c.recno += 2;	/* records 2 and 3 lost */
	mkfile(&c, root, "b");
	ck_assert_int_eq(send(&c), -EPROTO);
	ck_assert_int_eq(c.res.outcome, STORE_FAILED);
	ck_assert_ptr_nonnull(strstr(c.res.msg, "missing"));
	ck_assert_uint_eq(c.res.last_recno, 1);
	ck_assert_uint_eq(entries(root), 1);
	/* Within a batch numbers are consecutive. */
	mkfile(&c, root, "b");
	mkfile(&c, root, "c");
	c.recs[1].recno++;
	ck_assert_int_eq(send(&c), -EINVAL);
	ck_assert_int_eq(c.res.rec, 1);
	/* Record 0 does not exist; client 0 is the server. */
	mkfile(&c, root, "b");
	c.recs[0].recno = 0;
	ck_assert_int_eq(send(&c), -EINVAL);
	mkfile(&c, root, "b");
	ck_assert_int_eq(store_reintegrate(s, vol, 0, c.recs, 1, NULL, &c.res),
			 -EINVAL);
	c.n = 0;
	ck_assert_uint_eq(entries(root), 1);
}
END_TEST

START_TEST(permissions)
{
	uint32_t vol = new_volume("v", 0);	/* root dir: 0:0 0755 */
	struct lento_fid root = LENTO_ROOT_FID(vol), pub, mine, ro, theirs;
	struct lento_attr a = { 0 };
	struct lento_rec *r;
	struct tc c, u;

	tc_init(&c, vol, 3);	/* as root */
	tc_init(&u, vol, 4);	/* as uid 1000 */
	u.uid = 1000;
	u.gid = 1000;
	u.seq = 9000;

	mkfile(&u, root, "nope");
	ck_assert_int_eq(send(&u), -EACCES);
	ck_assert_int_eq(u.res.rec, 0);
	ck_assert(lento_fid_eq(&u.res.fid, &root));

	pub = mk(&c, LENTO_OP_MKDIR, root, "pub", LENTO_T_DIR, 01777);
	theirs = mkfile(&c, pub, "root's");
	SEND_OK(&c);
	mine = mkfile(&u, pub, "mine");
	ro = mk(&u, LENTO_OP_CREATE, pub, "ro", LENTO_T_REG, 0444);
	SEND_OK(&u);
	ck_assert_uint_eq(getattr(mine).attr.uid, 1000);
	/* Owning a read-only file is enough to store into it. */
	store_data(&u, ro, "data", 4, false);
	SEND_OK(&u);
	/* Not the owner, no write bit: no. */
	store_data(&u, theirs, "data", 4, false);
	ck_assert_int_eq(send(&u), -EACCES);
	/* Sticky directory: not another's file. */
	named(&u, LENTO_OP_UNLINK, pub, "root's", theirs);
	ck_assert_int_eq(send(&u), -EPERM);
	mv(&u, pub, "root's", theirs, pub, "x", (struct lento_fid){ 0 }, 0);
	ck_assert_int_eq(send(&u), -EPERM);
	/* chmod: the owner only; chown: root only; chgrp: to one's group. */
	a.valid = LENTO_A_MODE;
	a.mode = 0666;
	setattr(&u, theirs, &a);
	ck_assert_int_eq(send(&u), -EPERM);
	setattr(&u, mine, &a);
	SEND_OK(&u);
	a.valid = LENTO_A_UID;
	a.uid = 0;
	setattr(&u, mine, &a);
	ck_assert_int_eq(send(&u), -EPERM);
	a.valid = LENTO_A_GID;
	a.gid = 5;
	setattr(&u, mine, &a);
	ck_assert_int_eq(send(&u), -EPERM);
	/* Creating as someone else. */
	r = add(&u, LENTO_OP_CREATE);
	r->dir = pub;
	r->obj = new_fid(&u);
	r->type = LENTO_T_REG;
	snprintf(r->name, sizeof(r->name), "forged");
	r->attr.valid = LENTO_A_MODE | LENTO_A_UID;
	r->attr.uid = 0;
	seal(&u, r);
	ck_assert_int_eq(send(&u), -EPERM);
	/* Devices: root's. */
	mk(&u, LENTO_OP_MKNOD, pub, "dev", LENTO_T_BLK, 0600);
	ck_assert_int_eq(send(&u), -EPERM);
	/* xattrs: trusted is root's; user needs write permission. */
	xattr(&u, mine, "trusted.x", "1");
	ck_assert_int_eq(send(&u), -EPERM);
	xattr(&u, theirs, "user.x", "1");
	ck_assert_int_eq(send(&u), -EACCES);
	xattr(&u, mine, "user.x", "1");
	SEND_OK(&u);
	/*
	 * A file capability is root's (CAP_SETFCAP), even on one's own
	 * file, to set and to remove; other security xattrs the owner's.
	 */
	xattr(&u, mine, "security.capability", "cap");
	ck_assert_int_eq(send(&u), -EPERM);
	xattr(&u, mine, "security.selinux", "lbl");
	SEND_OK(&u);
	xattr(&c, mine, "security.capability", "cap");
	SEND_OK(&c);
	xattr(&u, mine, "security.capability", NULL);
	ck_assert_int_eq(send(&u), -EPERM);
	/* Root may do all of it. */
	named(&c, LENTO_OP_UNLINK, pub, "mine", mine);
	a.valid = LENTO_A_UID;
	a.uid = 77;
	setattr(&c, ro, &a);
	SEND_OK(&c);
	ck_assert_uint_eq(getattr(ro).attr.uid, 77);
	/* Group bits: gid 1000 in a 0770 directory of group 1000. */
	a.valid = LENTO_A_MODE | LENTO_A_GID;
	a.mode = 0770;
	a.gid = 1000;
	setattr(&c, pub, &a);
	SEND_OK(&c);
	u.uid = 1001;
	mkfile(&u, pub, "via group");
	SEND_OK(&u);
	u.gid = 1001;
	mkfile(&u, pub, "no group");
	ck_assert_int_eq(send(&u), -EACCES);
}
END_TEST

/*
 * Supplementary groups count as the gid does: for the group bits, for
 * chgrp by the owner, and for whether chmod keeps the set-group-ID bit.
 */
START_TEST(permissions_groups)
{
	static const uint32_t devs[] = { 2000 }, two[] = { 3000, 2000 };
	uint32_t vol = new_volume("v", 0);	/* root dir: 0:0 0755 */
	struct lento_fid root = LENTO_ROOT_FID(vol), shared, sgid, a, f;
	uint8_t gbuf[4 * 2];
	struct lento_attr at = { 0 };
	struct tc c, u;

	tc_init(&c, vol, 3);	/* as root */
	tc_init(&u, vol, 4);	/* as uid 1000 gid 1000 */
	u.uid = u.gid = 1000;
	u.seq = 9000;
	shared = mkdir_(&c, root, "shared");
	sgid = mkdir_(&c, root, "sgid");
	at.valid = LENTO_A_MODE | LENTO_A_GID;
	at.mode = 0770;
	at.gid = 2000;
	setattr(&c, shared, &at);
	at.mode = 02770;
	setattr(&c, sgid, &at);
	SEND_OK(&c);

	/* root:2000 0770: not without the group... */
	mkfile(&u, shared, "a");
	ck_assert_int_eq(send(&u), -EACCES);
	ck_assert(lento_fid_eq(&u.res.fid, &shared));
	ck_assert_ptr_nonnull(strstr(u.res.msg, "and 0 supplementary"));
	/* ... but with it, first or not. */
	tc_groups(&u, gbuf, devs, 1);
	a = mkfile(&u, shared, "a");
	SEND_OK(&u);
	ck_assert_uint_eq(getattr(a).attr.gid, 1000);
	tc_groups(&u, gbuf, two, 2);
	mkfile(&u, shared, "b");
	SEND_OK(&u);
	/* The set-group-ID directory's group goes to what is made in it. */
	f = mkfile(&u, sgid, "f");
	SEND_OK(&u);
	ck_assert_uint_eq(getattr(f).attr.gid, 2000);

	/* chgrp by the owner: to a group of its own, not another. */
	at.valid = LENTO_A_GID;
	at.gid = 5;
	setattr(&u, a, &at);
	ck_assert_int_eq(send(&u), -EPERM);
	ck_assert_ptr_nonnull(strstr(u.res.msg, "and 2 supplementary"));
	at.gid = 2000;
	tc_groups(&u, gbuf, devs, 0);
	setattr(&u, a, &at);
	ck_assert_int_eq(send(&u), -EPERM);
	tc_groups(&u, gbuf, devs, 1);
	setattr(&u, a, &at);
	SEND_OK(&u);
	ck_assert_uint_eq(getattr(a).attr.gid, 2000);

	/* chmod g+s: kept in the group (through a supplementary one)... */
	at.valid = LENTO_A_MODE;
	at.mode = 02750;
	setattr(&u, a, &at);
	SEND_OK(&u);
	ck_assert_uint_eq(getattr(a).attr.mode, 02750);
	/* ... dropped out of it. */
	tc_groups(&u, gbuf, devs, 0);
	setattr(&u, a, &at);
	SEND_OK(&u);
	ck_assert_uint_eq(getattr(a).attr.mode, 0750);

	/*
	 * A write by a member of the group drops a root file's set-id
	 * bits: the mode change that says so is the writer's...
	 */
	at.valid = LENTO_A_MODE;
	at.mode = 06770;
	setattr(&c, shared, &at);
	SEND_OK(&c);
	at.mode = 00770;
	tc_groups(&u, gbuf, devs, 1);
	setattr(&u, shared, &at);
	SEND_OK(&u);
	ck_assert_uint_eq(getattr(shared).attr.mode, 0770);
	/* ... but no other change of it, nor by one who may not write. */
	at.mode = 06770;
	setattr(&c, shared, &at);
	SEND_OK(&c);
	at.mode = 06750;
	setattr(&u, shared, &at);
	ck_assert_int_eq(send(&u), -EPERM);
	at.mode = 02770;
	tc_groups(&u, gbuf, devs, 0);
	setattr(&u, shared, &at);
	ck_assert_int_eq(send(&u), -EACCES);
	ck_assert_uint_eq(getattr(shared).attr.mode, 06770);
}
END_TEST

/*
 * An access ACL decides for those who do not own the object, as Linux's
 * posix_acl_permission: a named user's entry (masked) grants or denies
 * whatever others' bits say; a group entry of the caller's groups grants
 * (masked), and the caller's groups' entries deny if none grants.
 */
START_TEST(permissions_acl)
{
	static const uint32_t g3000[] = { 3000 };
	uint32_t vol = new_volume("v", 0);	/* root dir: 0:0 0755 */
	struct lento_fid root = LENTO_ROOT_FID(vol), d, deny, grp, other, f;
	struct acl acl = { .e = {
		{ A_UOBJ, 7, A_NOID }, { A_USER, 7, 1000 },
		{ A_GOBJ, 5, A_NOID }, { A_MASK, 7, A_NOID },
		{ A_OTHER, 0, A_NOID },
	} };
	struct lento_attr at = { 0 };
	uint8_t gbuf[4];
	struct tc c, u;

	tc_init(&c, vol, 3);	/* as root */
	tc_init(&u, vol, 4);
	u.uid = u.gid = 1000;
	u.seq = 9000;
	d = mk(&c, LENTO_OP_MKDIR, root, "d", LENTO_T_DIR, 0750);
	SEND_OK(&c);
	mkfile(&u, d, "no ACL yet");
	ck_assert_int_eq(send(&u), -EACCES);

	/* user:1000:rwx on root:root 0750: the mode becomes 0770. */
	set_acl(&c, d, &acl, 5);
	SEND_OK(&c);
	ck_assert_uint_eq(getattr(d).attr.mode, 0770);
	mkfile(&u, d, "named user");
	SEND_OK(&u);
	u.uid = u.gid = 1002;
	mkfile(&u, d, "someone else");
	ck_assert_int_eq(send(&u), -EACCES);
	ck_assert_ptr_nonnull(strstr(u.res.msg, "access ACL"));

	/* The mask limits a named entry... */
	acl.e[3][1] = 5;
	set_acl(&c, d, &acl, 5);
	SEND_OK(&c);
	ck_assert_uint_eq(getattr(d).attr.mode, 0750);
	u.uid = u.gid = 1000;
	mkfile(&u, d, "masked");
	ck_assert_int_eq(send(&u), -EACCES);
	/* ... and is the group bits: a chmod moves it, as Linux's does. */
	at.valid = LENTO_A_MODE;
	at.mode = 0770;
	setattr(&c, d, &at);
	SEND_OK(&c);
	mkfile(&u, d, "unmasked by chmod");
	SEND_OK(&u);

	/* user:1001:--- on 0757: denied though others may. */
	deny = mk(&c, LENTO_OP_MKDIR, root, "deny", LENTO_T_DIR, 0757);
	acl.e[1][1] = 0;
	acl.e[1][2] = 1001;
	acl.e[3][1] = 5;
	acl.e[4][1] = 7;
	set_acl(&c, deny, &acl, 5);
	SEND_OK(&c);
	ck_assert_uint_eq(getattr(deny).attr.mode, 0757);
	u.uid = u.gid = 1001;
	mkfile(&u, deny, "denied");
	ck_assert_int_eq(send(&u), -EACCES);
	u.uid = u.gid = 1002;
	mkfile(&u, deny, "other");
	SEND_OK(&u);

	/* group:3000:rwx reached through a supplementary group. */
	grp = mk(&c, LENTO_OP_MKDIR, root, "grp", LENTO_T_DIR, 0750);
	acl.e[1][0] = A_GROUP;
	acl.e[1][1] = 7;
	acl.e[1][2] = 3000;
	acl.e[3][1] = 7;
	acl.e[4][1] = 0;
	set_acl(&c, grp, &acl, 5);
	SEND_OK(&c);
	u.uid = u.gid = 1003;
	mkfile(&u, grp, "not in 3000");
	ck_assert_int_eq(send(&u), -EACCES);
	tc_groups(&u, gbuf, g3000, 1);
	mkfile(&u, grp, "in 3000");
	SEND_OK(&u);

	/*
	 * group:3000:r-x on 0777: a group entry that matches but does not
	 * grant denies, others' bits notwithstanding.
	 */
	other = mk(&c, LENTO_OP_MKDIR, root, "other", LENTO_T_DIR, 0777);
	acl.e[1][1] = 5;
	acl.e[4][1] = 7;
	set_acl(&c, other, &acl, 5);
	SEND_OK(&c);
	ck_assert_uint_eq(getattr(other).attr.mode, 0777);
	mkfile(&u, other, "group entry denies");
	ck_assert_int_eq(send(&u), -EACCES);
	tc_groups(&u, gbuf, g3000, 0);
	mkfile(&u, other, "others may");
	SEND_OK(&u);

	/* A file: user:1000:rw- lets uid 1000 store into root's 0640 file. */
	f = mk(&c, LENTO_OP_CREATE, root, "f", LENTO_T_REG, 0640);
	acl.e[1][0] = A_USER;
	acl.e[1][1] = 6;
	acl.e[1][2] = 1000;
	acl.e[2][1] = 4;
	acl.e[3][1] = 6;
	acl.e[4][1] = 0;
	set_acl(&c, f, &acl, 5);
	SEND_OK(&c);
	ck_assert_uint_eq(getattr(f).attr.mode, 0760);
	u.uid = u.gid = 1001;
	store_data(&u, f, "data", 4, false);
	ck_assert_int_eq(send(&u), -EACCES);
	u.uid = u.gid = 1000;
	store_data(&u, f, "data", 4, false);
	SEND_OK(&u);

	/*
	 * chmod 0604 rewrites the stored ACL as Linux rewrites its own: the
	 * owner's entry, the mask (the owning group's entry kept) and
	 * others'; the named entry stays, masked to nothing now.
	 */
	at.valid = LENTO_A_MODE;
	at.mode = 0604;
	setattr(&c, f, &at);
	SEND_OK(&c);
	ck_assert_str_eq(stored_acl(f), "u::6 u:1000:6 g::4 m::0 o::4");
	store_data(&u, f, "data", 4, false);
	ck_assert_int_eq(send(&u), -EACCES);
	/* Without a mask, the owning group's entry is the group bits. */
	acl.e[0][1] = 6;
	acl.e[1][0] = A_GOBJ;
	acl.e[1][1] = 4;
	acl.e[1][2] = A_NOID;
	acl.e[2][0] = A_OTHER;
	acl.e[2][1] = 4;
	set_acl(&c, f, &acl, 3);
	SEND_OK(&c);
	at.mode = 0750;
	setattr(&c, f, &at);
	SEND_OK(&c);
	ck_assert_uint_eq(getattr(f).attr.mode, 0750);
	ck_assert_str_eq(stored_acl(f), "u::7 g::5 o::0");
}
END_TEST

START_TEST(semantic_errors)
{
	uint32_t vol = new_volume("v", 0);
	struct lento_fid root = LENTO_ROOT_FID(vol), f, d, ghost;
	struct lento_rec *r;
	struct tc c;

	tc_init(&c, vol, 3);
	f = mkfile(&c, root, "f");
	d = mkdir_(&c, root, "d");
	mkfile(&c, d, "x");
	SEND_OK(&c);
	ghost = (struct lento_fid){ vol, 3, 777777 };

	mkfile(&c, ghost, "x");
	ck_assert_int_eq(send(&c), -ENOENT);
	ck_assert(lento_fid_eq(&c.res.fid, &ghost));
	mkfile(&c, root, "f");
	ck_assert_int_eq(send(&c), -EEXIST);
	/* A fid that exists: EEXIST on the fid. */
	r = add(&c, LENTO_OP_CREATE);
	r->dir = root;
	r->obj = f;
	r->type = LENTO_T_REG;
	snprintf(r->name, sizeof(r->name), "again");
	r->attr.valid = LENTO_A_MODE;
	r->attr.mode = 0644;
	seal(&c, r);
	ck_assert_int_eq(send(&c), -EEXIST);
	ck_assert(lento_fid_eq(&c.res.fid, &f));
	named(&c, LENTO_OP_RMDIR, root, "d", d);
	ck_assert_int_eq(send(&c), -ENOTEMPTY);
	named(&c, LENTO_OP_RMDIR, root, "f", f);
	ck_assert_int_eq(send(&c), -ENOTDIR);
	named(&c, LENTO_OP_UNLINK, root, "d", d);
	ck_assert_int_eq(send(&c), -EISDIR);
	named(&c, LENTO_OP_LINK, root, "d2", d);
	ck_assert_int_eq(send(&c), -EPERM);
	mkfile(&c, f, "x");
	ck_assert_int_eq(send(&c), -ENOTDIR);
	mkfile(&c, root, "a/b");
	ck_assert_int_eq(send(&c), -EINVAL);
	mkfile(&c, root, "");
	ck_assert_int_eq(send(&c), -EINVAL);
	mk(&c, LENTO_OP_MKDIR, root, "wrongtype", LENTO_T_REG, 0755);
	ck_assert_int_eq(send(&c), -EINVAL);
	r = add(&c, 99);
	r->obj = f;
	seal(&c, r);
	ck_assert_int_eq(send(&c), -EINVAL);
	r = add(&c, LENTO_OP_SYMLINK);
	r->dir = root;
	r->obj = new_fid(&c);
	r->type = LENTO_T_SYMLINK;
	snprintf(r->name, sizeof(r->name), "emptylink");
	r->attr.valid = LENTO_A_MODE;
	seal(&c, r);
	ck_assert_int_eq(send(&c), -EINVAL);
	/* No volume. */
	mkfile(&c, root, "y");
	ck_assert_int_eq(store_reintegrate(s, 99, 3, c.recs, 1, NULL, &c.res),
			 -ENOENT);
	c.n = 0;
}
END_TEST

/* ------------------------------------------------------------ validate */

START_TEST(validation)
{
	uint32_t vol = new_volume("v", 0);
	struct lento_fid root = LENTO_ROOT_FID(vol), fids[3];
	struct lento_vv vvs[3];
	struct store_volume v;
	bool current, changed[3];
	uint64_t now;
	struct tc c;

	tc_init(&c, vol, 3);
	fids[0] = root;
	fids[1] = mkfile(&c, root, "a");
	fids[2] = mkfile(&c, root, "b");
	SEND_OK(&c);
	ck_assert_int_eq(store_volume_get(s, vol, &v), 0);
	ck_assert_int_eq(store_validate(s, vol, v.stamp, &current, &now), 0);
	ck_assert(current);
	for (int i = 0; i < 3; i++)
		vvs[i] = getattr(fids[i]).vv;
	ck_assert_int_eq(store_validate_objects(s, fids, vvs, 3, changed), 0);
	xattr(&c, fids[1], "user.x", "y");
	named(&c, LENTO_OP_UNLINK, root, "b", fids[2]);
	SEND_OK(&c);
	ck_assert_int_eq(store_validate(s, vol, v.stamp, &current, &now), 0);
	ck_assert(!current);
	ck_assert_uint_eq(now, v.stamp + 2);
	ck_assert_int_eq(store_validate_objects(s, fids, vvs, 3, changed), 3);
	ck_assert(changed[0] && changed[1] && changed[2]);
	ck_assert_int_eq(store_validate(s, 99, 1, &current, NULL), -ENOENT);
}
END_TEST

/* ----------------------------------------------- open, epochs, crashes */

START_TEST(epoch_and_lock)
{
	struct store *other;
	struct store_stats st;
	uint64_t e1 = store_epoch(s), e2;

	ck_assert_int_eq(store_open(dir, &other, err, sizeof(err)), -EBUSY);
	ck_assert_ptr_nonnull(strstr(err, "another process"));
	reopen();
	e2 = store_epoch(s);
	ck_assert_uint_ne(e1, e2);
	reopen();
	ck_assert_uint_ne(store_epoch(s), e2);
	ck_assert_uint_ne(store_epoch(s), e1);
	store_stats(s, &st);
	ck_assert_uint_eq(st.epoch, store_epoch(s));
}
END_TEST

START_TEST(newer_schema_refused)
{
	char path[PATH_MAX + 16];
	sqlite3 *db;

	store_close(s);
	s = NULL;
	snprintf(path, sizeof(path), "%s/meta.db", dir);
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "PRAGMA user_version = 99", NULL,
				      NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	ck_assert_int_eq(store_open(dir, &s, err, sizeof(err)),
			 -EPROTONOSUPPORT);
	ck_assert_ptr_null(s);
	ck_assert_ptr_nonnull(strstr(err, "schema version 99"));
	ck_assert_ptr_nonnull(strstr(err, "newer"));
	/* And a database that is not a store. */
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "PRAGMA user_version = 0", NULL,
				      NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	ck_assert_int_eq(store_open(dir, &s, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "not a lento store"));
}
END_TEST

START_TEST(orphans_collected_at_open)
{
	uint32_t vol = new_volume("v", 0);
	struct lento_fid f;
	struct store_stats st;
	char path[2 * PATH_MAX];
	char *before, *after;
	uint32_t clients[] = { 3 };
	struct tc c;
	int fd;

	tc_init(&c, vol, 3);
	f = mkfile(&c, LENTO_ROOT_FID(vol), "f");
	store_data(&c, f, "body", 4, false);
	SEND_OK(&c);
	before = dump(vol, clients, 1);
	/* A body nobody names, a stranger, a temp file. */
	snprintf(path, sizeof(path), "%s/bodies/%08x-%08x-%016x.%08x-%016x",
		 dir, vol, 3, 1234, 3, 99);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/bodies/README", dir);
	close(open(path, O_CREAT | O_WRONLY, 0600));
	ck_assert_int_ge(fd = store_body_tmp(s, path, sizeof(path)), 0);
	close(fd);
	ck_assert_uint_eq(count_files("bodies"), 3);
	ck_assert_uint_eq(count_files("tmp"), 1);
	reopen();
	store_stats(s, &st);
	ck_assert_uint_eq(st.bodies, 1);
	ck_assert_uint_eq(st.bodies_collected, 1);
	ck_assert_uint_eq(st.bodies_missing, 0);
	ck_assert_uint_eq(st.tmp_collected, 1);
	ck_assert_uint_eq(count_files("bodies"), 2);	/* ours + README */
	snprintf(path, sizeof(path), "%s/bodies/README", dir);
	ck_assert_int_eq(unlink(path), 0);
	after = dump(vol, clients, 1);
	SAME_DUMP(before, after);
	/* A missing body is counted, and reading it is EIO. */
	{
		char name[PATH_MAX + 128];
		int bfd;
		uint64_t n;
		DIR *d;
		struct dirent *de;

		snprintf(name, sizeof(name), "%s/bodies", dir);
		d = opendir(name);
		while ((de = readdir(d)))
			if (de->d_name[0] != '.')
				snprintf(path, sizeof(path), "%s/bodies/%s",
					 dir, de->d_name);
		closedir(d);
		ck_assert_int_eq(unlink(path), 0);
		reopen();
		store_stats(s, &st);
		ck_assert_uint_eq(st.bodies_missing, 1);
		ck_assert_int_eq(store_body_open(s, &f, NULL, &bfd, &n, NULL),
				 -EIO);
	}
}
END_TEST

static int die_at(void *arg, enum store_fault where, struct sqlite3 *db)
{
	(void)db;
	if (where == *(enum store_fault *)arg)
		_exit(77);
	return 0;
}

/* In a child: open the store, send @c's batch, die at @where. */
static void crash_child(struct tc *c, enum store_fault where)
{
	pid_t pid;
	int status;

	/* The child's open empties tmp/: the bodies wait next to it. */
	for (size_t i = 0; i < c->n; i++) {
		char moved[PATH_MAX + 32];

		if (!c->paths[i][0])
			continue;
		snprintf(moved, sizeof(moved), "%s/in.%zu", dir, i);
		ck_assert_uint_lt(strlen(moved), PATH_MAX);
		ck_assert_int_eq(rename(c->paths[i], moved), 0);
		strcpy(c->paths[i], moved);
		if (c->bodies[i].path)
			c->bodies[i].path = c->paths[i];
	}
	store_close(s);
	s = NULL;
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		struct store_result res;

		if (store_open(dir, &s, err, sizeof(err)))
			_exit(1);
		store_set_fault(s, die_at, &where);
		store_reintegrate(s, c->vol, c->client, c->recs, c->n,
				  c->bodies, &res);
		_exit(2);	/* it did not die */
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 77);
	drop_bodies(c);
	c->n = 0;
	reopen();
}

START_TEST(crash_before_commit)
{
	uint32_t vol = new_volume("v", 0);
	struct lento_fid root = LENTO_ROOT_FID(vol), f, g;
	uint32_t clients[] = { 3 };
	struct store_stats st;
	char *before, *after, *data;
	struct tc c;

	tc_init(&c, vol, 3);
	f = mkfile(&c, root, "f");
	store_data(&c, f, "committed", 9, false);
	SEND_OK(&c);
	before = dump(vol, clients, 1);
	/* New bodies for f (replacing) and g, renamed into bodies/; then
	 * the server dies before COMMIT. */
	store_data(&c, f, "never committed", 15, false);
	g = mkfile(&c, root, "g");
	store_data(&c, g, "nor this", 8, true);
	crash_child(&c, STORE_FAULT_COMMIT);
	store_stats(s, &st);
	ck_assert_uint_eq(st.bodies_collected, 2);
	ck_assert_uint_eq(st.bodies, 1);
	ck_assert_uint_eq(st.bodies_missing, 0);
	after = dump(vol, clients, 1);
	SAME_DUMP(before, after);
	data = content(f, NULL);
	ck_assert_str_eq(data, "committed");
	free(data);
	ck_assert(!exists(g));
	/* The client sends the batch again: applied once. */
	c.recno -= 3;
	c.nknown = 0;
	store_data(&c, f, "now committed", 13, false);
	g = mkfile(&c, root, "g");
	store_data(&c, g, "and this", 8, true);
	SEND_OK(&c);
	ck_assert_uint_eq(c.res.applied, 3);
	data = content(g, NULL);
	ck_assert_str_eq(data, "and this");
	free(data);
	ck_assert_uint_eq(count_files("bodies"), 2);
}
END_TEST

START_TEST(crash_after_commit)
{
	uint32_t vol = new_volume("v", 0);
	struct lento_fid root = LENTO_ROOT_FID(vol), f;
	struct store_stats st;
	char *data;
	struct tc c;

	tc_init(&c, vol, 3);
	f = mkfile(&c, root, "f");
	store_data(&c, f, "old", 3, false);
	SEND_OK(&c);
	store_data(&c, f, "new", 3, false);
	crash_child(&c, STORE_FAULT_COMMITTED);
	/* Committed: the new content; the old body collected at open. */
	store_stats(s, &st);
	ck_assert_uint_eq(st.bodies_collected, 1);
	ck_assert_uint_eq(count_files("bodies"), 1);
	data = content(f, NULL);
	ck_assert_str_eq(data, "new");
	free(data);
	c.nknown = 0;
	named(&c, LENTO_OP_UNLINK, root, "f", f);
	SEND_OK(&c);
	ck_assert_uint_eq(count_files("bodies"), 0);
}
END_TEST

struct inject {
	enum store_fault where;
	int err;
	bool full_db;	/* at BEGIN: no more database pages */
};

static int inject(void *arg, enum store_fault where, struct sqlite3 *db)
{
	struct inject *in = arg;
	char sql[128];

	if (where == STORE_FAULT_BEGIN) {
		sqlite3_stmt *st;
		long pages = 0;

		if (sqlite3_prepare_v2(db, "PRAGMA page_count", -1, &st,
				       NULL) == SQLITE_OK &&
		    sqlite3_step(st) == SQLITE_ROW)
			pages = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
		snprintf(sql, sizeof(sql), "PRAGMA max_page_count = %ld",
			 in->full_db ? pages : 1L << 30);
		sqlite3_exec(db, sql, NULL, NULL, NULL);
	}
	return where == in->where ? in->err : 0;
}

/* A full disk at each point of a batch: refused, nothing changed. */
START_TEST(disk_full)
{
	uint32_t vol = new_volume("v", 0);
	struct lento_fid root = LENTO_ROOT_FID(vol), f;
	uint32_t clients[] = { 3 };
	/* A full database first, while it has no free pages. */
	static const enum store_fault points[] = {
		(enum store_fault)-1, STORE_FAULT_BEGIN, STORE_FAULT_BODY_LINK,
		STORE_FAULT_BODY_SYNC, STORE_FAULT_COMMIT,
	};
	struct inject in = { 0 };
	char *before, *after, *data;
	struct stat sb;
	struct tc c;

	tc_init(&c, vol, 3);
	f = mkfile(&c, root, "f");
	store_data(&c, f, "old", 3, false);
	SEND_OK(&c);
	in.where = (enum store_fault)-1;
	store_set_fault(s, inject, &in);
	for (size_t i = 0; i < sizeof(points) / sizeof(points[0]); i++) {
		before = dump(vol, clients, 1);
		in.where = points[i];
		in.err = -ENOSPC;
		in.full_db = i == 0;
		store_data(&c, f, "new", 3, false);
		for (int k = 0; k < 40; k++) {
			char name[160];

			snprintf(name, sizeof(name), "file-%d-with-a-long-"
				 "name-to-fill-pages-%0100d", k, k);
			mkfile(&c, root, name);
		}
		ck_assert_int_eq(stat(c.paths[0], &sb), 0);
		ck_assert_int_eq(store_reintegrate(s, vol, 3, c.recs, c.n,
						   c.bodies, &c.res), -ENOSPC);
		ck_assert_int_eq(c.res.outcome, STORE_FAILED);
		ck_assert_int_eq(c.res.err, -ENOSPC);
		ck_assert_int_eq(stat(c.paths[0], &sb), 0);
		in.full_db = false;
		in.where = (enum store_fault)-1;
		after = dump(vol, clients, 1);
		SAME_DUMP(before, after);
		data = content(f, NULL);
		ck_assert_str_eq(data, "old");
		free(data);
		ck_assert_uint_eq(count_files("bodies"), 1);
		ck_assert_uint_eq(count_files("tmp"), 1);
		/* The same batch, with room: applied. */
		ck_assert_int_eq(store_reintegrate(s, vol, 3, c.recs, c.n,
						   c.bodies, &c.res), 0);
		drop_bodies(&c);
		c.n = 0;
		c.nknown = 0;
		data = content(f, NULL);
		ck_assert_str_eq(data, "new");
		free(data);
		/* Back to "old" for the next round. */
		store_data(&c, f, "old", 3, false);
		for (int k = 0; k < 40; k++) {
			char name[160];

			snprintf(name, sizeof(name), "file-%d-with-a-long-"
				 "name-to-fill-pages-%0100d", k, k);
			named(&c, LENTO_OP_UNLINK, root, name,
			      lookup(root, name));
		}
		SEND_OK(&c);
	}
}
END_TEST

/* --------------------------------------------------------- big readdir */

#define BIG 100000

struct big {
	size_t n;
	char last[LENTO_NAME_MAX + 1];
	bool sorted;
	uint64_t seqsum;
};

static int big_cb(void *arg, const struct lento_dirent *de,
		   const char *target __attribute__((unused)),
		   uint32_t target_len __attribute__((unused)),
		   bool xattrs __attribute__((unused)))
{
	struct big *b = arg;

	if (b->n && strcmp(b->last, de->name) >= 0)
		b->sorted = false;
	snprintf(b->last, sizeof(b->last), "%s", de->name);
	b->seqsum += de->st.fid.seq;
	if (de->st.type != LENTO_T_REG || de->st.attr.mode != 0644 ||
	    de->st.vv.store.seq != de->st.fid.seq)
		b->sorted = false;
	b->n++;
	return 0;
}

static double secs(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) +
	       (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

START_TEST(identities)
{
	uint8_t a[16] = { 1 }, b[16] = { 2 };
	uint32_t ia, ib, again;

	ck_assert_int_eq(store_client_register(s, a, &ia), 0);
	ck_assert_int_eq(store_client_register(s, b, &ib), 0);
	ck_assert_uint_ge(ia, 1);
	ck_assert_uint_ne(ia, ib);
	ck_assert_int_eq(store_client_register(s, a, &again), 0);
	ck_assert_uint_eq(again, ia);
	ck_assert_int_eq(store_client_check(s, ia, a), 0);
	ck_assert_int_eq(store_client_check(s, ia, b), -EPERM);
	ck_assert_int_eq(store_client_check(s, ib + 100, b), -ENOENT);
	/* Kept across a reopen. */
	reopen();
	ck_assert_int_eq(store_client_register(s, b, &again), 0);
	ck_assert_uint_eq(again, ib);
	ck_assert_int_eq(store_client_check(s, ia, a), 0);
}
END_TEST

START_TEST(readdir_100k)
{
	uint32_t vol = new_volume("big", 0);
	struct lento_fid root = LENTO_ROOT_FID(vol);
	struct lento_vv dvv = getattr(root).vv;
	struct lento_rec *recs = calloc(BIG, sizeof(*recs));
	struct store_result res;
	struct timespec t0, t1, t2;
	struct big b = { .sorted = true };
	struct store_volume v;

	ck_assert_ptr_nonnull(recs);
	for (size_t i = 0; i < BIG; i++) {
		struct lento_rec *r = &recs[i];

		r->recno = i + 1;
		r->op = LENTO_OP_CREATE;
		r->uid = r->gid = 0;
		r->time_ns = 1700000000000000000LL + (int64_t)i;
		r->dir = root;
		r->obj = (struct lento_fid){ vol, 7, i + 1 };
		r->base_dir = dvv;
		r->type = LENTO_T_REG;
		snprintf(r->name, sizeof(r->name), "entry-%06zu", i);
		r->attr.valid = LENTO_A_MODE;
		r->attr.mode = 0644;
		lento_vv_bump(&dvv, 0, (struct lento_storeid){ 7, i + 1 });
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(store_reintegrate(s, vol, 7, recs, BIG, NULL, &res),
			 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_int_eq(store_readdir(s, &root, big_cb, &b), 0);
	clock_gettime(CLOCK_MONOTONIC, &t2);
	printf("store: one batch of %d creates: %.2f s; readdir of %zu "
	       "entries: %.3f s\n", BIG, secs(&t0, &t1), b.n, secs(&t1, &t2));
	fflush(stdout);
	ck_assert_uint_eq(res.applied, BIG);
	ck_assert_uint_eq(b.n, BIG);
	ck_assert(b.sorted);
	ck_assert_uint_eq(b.seqsum, (uint64_t)BIG * (BIG + 1) / 2);
	{
		struct lento_status rst = getattr(root);

		ck_assert(lento_vv_eq(&rst.vv, &dvv));
	}
	ck_assert_int_eq(store_volume_get(s, vol, &v), 0);
	ck_assert_uint_eq(v.objects, BIG + 1);
	ck_assert_uint_eq(v.stamp, BIG + 1);
	free(recs);
}
END_TEST

/* The readdir query is one index walk joined to objects by key. */
START_TEST(readdir_plan)
{
	char path[PATH_MAX + 16], plan[1024] = "";
	sqlite3_stmt *st;
	sqlite3 *db;

	snprintf(path, sizeof(path), "%s/meta.db", dir);
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(db, "EXPLAIN QUERY PLAN SELECT "
		"e.name, o.type FROM entries AS e JOIN objects AS o ON "
		"o.vol = e.vol AND o.client = e.cclient AND o.seq = e.cseq "
		"WHERE e.vol = 1 AND e.dclient = 0 AND e.dseq = 1 ORDER BY "
		"e.name", -1, &st, NULL), SQLITE_OK);
	while (sqlite3_step(st) == SQLITE_ROW) {
		strncat(plan, (const char *)sqlite3_column_text(st, 3),
			sizeof(plan) - strlen(plan) - 2);
		strcat(plan, ";");
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	ck_assert_msg(strstr(plan, "SEARCH e USING PRIMARY KEY") &&
		      strstr(plan, "SEARCH o USING PRIMARY KEY") &&
		      !strstr(plan, "TEMP B-TREE") && !strstr(plan, "SCAN"),
		      "plan: %s", plan);
}
END_TEST

static int nested_cb(void *arg, const struct lento_dirent *de,
		   const char *target __attribute__((unused)),
		   uint32_t target_len __attribute__((unused)),
		   bool xattrs __attribute__((unused)))
{
	struct lento_status st;
	struct store_result res;

	(void)arg;
	ck_assert_int_eq(store_getattr(s, &de->st.fid, &st, NULL, 0, NULL,
				       NULL), 0);
	ck_assert_int_eq(store_readdir(s, &de->st.fid, nested_cb, NULL),
			 -EDEADLK);
	ck_assert_int_eq(store_reintegrate(s, 1, 1, NULL, 0, NULL, &res),
			 -EDEADLK);
	return 7;
}

START_TEST(callbacks)
{
	uint32_t vol = new_volume("v", 0);
	struct lento_fid root = LENTO_ROOT_FID(vol);
	struct tc c;

	tc_init(&c, vol, 3);
	mkdir_(&c, root, "a");
	mkdir_(&c, root, "b");
	SEND_OK(&c);
	/* A callback's non-zero return stops the walk and is returned. */
	ck_assert_int_eq(store_readdir(s, &root, nested_cb, NULL), 7);
	ck_assert_int_eq(store_readdir(s, &(struct lento_fid){ vol, 3, 101 },
				       find_cb, &(struct find){ 0 }), 0);
	ck_assert_int_eq(store_readdir(s, &(struct lento_fid){ vol, 3, 1 },
				       find_cb, &(struct find){ 0 }), -ENOENT);
}
END_TEST

static Suite *store_suite(void)
{
	Suite *su = suite_create("store");
	TCase *tc = tcase_create("store");
	TCase *big = tcase_create("big");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, vv_basics);
	tcase_add_test(tc, volumes_crud);
	tcase_add_test(tc, volume_remove_everything);
	tcase_add_test(tc, quota);
	tcase_add_test(tc, reintegrate_check);
	tcase_add_test(tc, create_and_friends);
	tcase_add_test(tc, link_unlink_rmdir);
	tcase_add_test(tc, renames);
	tcase_add_test(tc, rename_lastlink);
	tcase_add_test(tc, rename_into_a_deep_chain);
	tcase_add_test(tc, dir_links_bounded);
	tcase_add_test(tc, rename_across_volumes);
	tcase_add_test(tc, setattr_and_sizes);
	tcase_add_test(tc, xattrs);
	tcase_add_test(tc, prune_xattrs);
	tcase_add_test(tc, names_merge);
	tcase_add_test(tc, store_bodies);
	tcase_add_test(tc, conflict_on_stale_base);
	tcase_add_test(tc, error_in_third_record);
	tcase_add_test(tc, resent_batch_skipped);
	tcase_add_test(tc, recno_gap_refused);
	tcase_add_test(tc, permissions);
	tcase_add_test(tc, permissions_groups);
	tcase_add_test(tc, permissions_acl);
	tcase_add_test(tc, semantic_errors);
	tcase_add_test(tc, validation);
	tcase_add_test(tc, epoch_and_lock);
	tcase_add_test(tc, newer_schema_refused);
	tcase_add_test(tc, orphans_collected_at_open);
	tcase_add_test(tc, crash_before_commit);
	tcase_add_test(tc, crash_after_commit);
	tcase_add_test(tc, disk_full);
	tcase_add_test(tc, readdir_plan);
	tcase_add_test(tc, identities);
	tcase_add_test(tc, callbacks);
	suite_add_tcase(su, tc);

	tcase_add_checked_fixture(big, setup, teardown);
	tcase_set_timeout(big, 600);
	tcase_add_test(big, readdir_100k);
	suite_add_tcase(su, big);
	return su;
}

int main(void)
{
	SRunner *sr = srunner_create(store_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
