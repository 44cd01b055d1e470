// SPDX-License-Identifier: MIT
/*
 * Unit tests of the lento client's modification log (lento/cml.c) and its
 * optimiser (lento/cml_opt.c), on SQLite databases in a temporary
 * directory.
 *
 * The optimiser's tests build their logs through a small model of a
 * volume (names -> objects, objects -> type, links, attributes, body,
 * xattrs): each record is applied to the model as it is made, so every
 * log is one a client could have written. The optimised log is then
 * applied, strictly (every name a record needs must be there, every name
 * it makes must be free, a removed directory must be empty, a directory
 * may not move under itself), to the same starting volume, and must give
 * the same final volume; every base version must still be the one the
 * server had before the log. The random test does this for a few thousand
 * seeded sequences: CML_SEED=S and CML_SEQUENCES=N replay it.
 */
#include "cml.h"

#include <check.h>
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VOL	7
#define CLIENT	9		/* client of the objects the logs create */
#define NONE	UINT32_MAX
#define NXA	4		/* xattrs "user.0" .. "user.3" */

static char tmpdir[256];
static char dbpath[300];

static void setup(void)
{
	const char *t = getenv("TMPDIR");

	snprintf(tmpdir, sizeof(tmpdir), "%s/check-cml.XXXXXX", t ? t : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(dbpath, sizeof(dbpath), "%s/lento.db", tmpdir);
}

static void remove_db(const char *path)
{
	static const char *const sfx[] = { "", "-wal", "-shm", "-journal" };
	char p[340];

	for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", path, sfx[i]);
		unlink(p);
	}
}

static void teardown(void)
{
	remove_db(dbpath);
	rmdir(tmpdir);
}

static struct cml *open_cml(void)
{
	struct cml *c;

	ck_assert_int_eq(cml_open_path(&c, dbpath), 0);
	return c;
}

static void exec(struct cml *c, const char *sql)
{
	ck_assert_int_eq(sqlite3_exec(cml_db(c), sql, NULL, NULL, NULL),
			 SQLITE_OK);
}

/* Records --------------------------------------------------------------- */

/* A record with its data and groups, and the size of a STORE's body. */
struct grec {
	struct lento_rec r;
	uint8_t data[16];
	uint8_t groups[4 * LENTO_GROUPS_MAX];
	uint64_t body;
};

struct glist {
	struct grec *v;
	size_t n, cap;
};

static struct grec *glist_add(struct glist *l)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		ck_assert_ptr_nonnull(l->v);
	}
	memset(&l->v[l->n], 0, sizeof(l->v[0]));
	return &l->v[l->n++];
}

static void glist_free(struct glist *l)
{
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static struct lento_rec *grec_rec(struct grec *e)
{
	e->r.data = e->r.data_len ? e->data : NULL;
	e->r.groups = e->r.ngroups ? e->groups : NULL;
	return &e->r;
}

static int collect(void *arg, const struct lento_rec *rec, uint64_t body)
{
	struct grec *e = glist_add(arg);

	e->r = *rec;
	ck_assert_uint_le(rec->data_len, sizeof(e->data));
	if (rec->data_len)
		memcpy(e->data, rec->data, rec->data_len);
	ck_assert_uint_le(rec->ngroups, LENTO_GROUPS_MAX);
	ck_assert(!rec->ngroups || rec->groups);
	if (rec->ngroups)
		memcpy(e->groups, rec->groups, 4 * (size_t)rec->ngroups);
	e->r.data = NULL;
	e->r.groups = NULL;
	e->body = body;
	return 0;
}

/* @n groups @g (host order) as a record carries them, into @out. */
static void groups_le(uint8_t *out, const uint32_t *g, uint16_t n)
{
	for (uint16_t i = 0; i < n; i++) {
		uint32_t le = htole32(g[i]);

		memcpy(out + 4 * i, &le, 4);
	}
}

/* Group @i of @r, in host order. */
static uint32_t group_of(const struct grec *e, uint16_t i)
{
	uint32_t le;

	memcpy(&le, e->groups + 4 * i, 4);
	return le32toh(le);
}

/* Did the same caller make @a and @b (uid, gid, groups of grecs)? */
static bool same_maker(const struct grec *a, const struct grec *b)
{
	return a->r.uid == b->r.uid && a->r.gid == b->r.gid &&
	       a->r.ngroups == b->r.ngroups &&
	       !memcmp(a->groups, b->groups, 4 * (size_t)a->r.ngroups);
}

static struct glist list(struct cml *c, uint32_t vol)
{
	struct glist l = { 0 };

	ck_assert_int_ge(cml_list(c, vol, collect, &l), 0);
	return l;
}

static const char *const opname[] = {
	"?", "CREATE", "MKDIR", "MKNOD", "SYMLINK", "LINK", "UNLINK", "RMDIR",
	"RENAME", "SETATTR", "SETXATTR", "REMOVEXATTR", "STORE",
};

static void dump(const char *title, const struct glist *l)
{
	fprintf(stderr, "%s (%zu records)\n", title, l->n);
	for (size_t i = 0; i < l->n; i++) {
		const struct lento_rec *r = &l->v[i].r;

		fprintf(stderr, "  %4" PRIu64 " %-11s f%x uid %u dir %u:%" PRIu64
			" obj %u:%" PRIu64 " dir2 %u:%" PRIu64 " tgt %u:%" PRIu64
			" '%s' '%s' valid %x size %" PRIu64 "\n",
			r->recno, r->op < 13 ? opname[r->op] : "?", r->flags,
			r->uid, r->dir.client, r->dir.seq, r->obj.client,
			r->obj.seq, r->dir2.client, r->dir2.seq,
			r->target.client, r->target.seq, r->name, r->name2,
			r->attr.valid, r->attr.size);
	}
}

static size_t count_op(const struct glist *l, uint16_t op)
{
	size_t n = 0;

	for (size_t i = 0; i < l->n; i++)
		n += l->v[i].r.op == op;
	return n;
}

/* The model ------------------------------------------------------------ */

struct ment {
	char name[24];
	uint32_t obj;
};

struct mobj {
	struct lento_fid fid;
	bool ever, live;
	uint8_t type;
	uint32_t nlink, parent;
	struct lento_attr a;
	uint64_t body, blen;	/* the content, and how much of it is left */
	bool xs[NXA];
	uint32_t xv[NXA];
	struct ment *ent;
	uint32_t nent, cap;
};

struct model {
	struct mobj *o;
	uint32_t n, cap;
	uint32_t vol;
};

static char why[512];

static bool nope(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return false;
}

static void m_grow(struct model *m, uint32_t n)
{
	if (n > m->cap) {
		uint32_t cap = m->cap ? m->cap : 64;

		while (cap < n)
			cap *= 2;
		m->o = realloc(m->o, cap * sizeof(*m->o));
		ck_assert_ptr_nonnull(m->o);
		memset(m->o + m->cap, 0, (cap - m->cap) * sizeof(*m->o));
		m->cap = cap;
	}
	if (n > m->n)
		m->n = n;
}

static void m_free(struct model *m)
{
	for (uint32_t i = 0; i < m->n; i++)
		free(m->o[i].ent);
	free(m->o);
	memset(m, 0, sizeof(*m));
}

static void m_clone(struct model *d, const struct model *s)
{
	memset(d, 0, sizeof(*d));
	d->vol = s->vol;
	m_grow(d, s->n);
	for (uint32_t i = 0; i < s->n; i++) {
		d->o[i] = s->o[i];
		d->o[i].ent = NULL;
		d->o[i].cap = s->o[i].nent;
		if (s->o[i].nent) {
			d->o[i].ent = malloc(s->o[i].nent * sizeof(struct ment));
			ck_assert_ptr_nonnull(d->o[i].ent);
			memcpy(d->o[i].ent, s->o[i].ent,
			       s->o[i].nent * sizeof(struct ment));
		}
	}
}

static uint32_t m_find(const struct model *m, const struct lento_fid *f)
{
	uint64_t i = f->seq - 1;

	if (f->volume != m->vol || !f->seq || i >= m->n || !m->o[i].ever ||
	    !lento_fid_eq(&m->o[i].fid, f))
		return NONE;
	return (uint32_t)i;
}

static int ent_find(const struct mobj *d, const char *name)
{
	for (uint32_t i = 0; i < d->nent; i++)
		if (!strcmp(d->ent[i].name, name))
			return (int)i;
	return -1;
}

static void ent_add(struct mobj *d, const char *name, uint32_t obj)
{
	ck_assert_uint_lt(strlen(name), sizeof(d->ent[0].name));
	if (d->nent == d->cap) {
		d->cap = d->cap ? d->cap * 2 : 8;
		d->ent = realloc(d->ent, d->cap * sizeof(*d->ent));
		ck_assert_ptr_nonnull(d->ent);
	}
	strcpy(d->ent[d->nent].name, name);
	d->ent[d->nent++].obj = obj;
}

static void ent_del(struct mobj *d, int i)
{
	d->ent[i] = d->ent[--d->nent];
}

static bool live_dir(const struct model *m, uint32_t d)
{
	return d != NONE && m->o[d].live && m->o[d].type == LENTO_T_DIR;
}

/* Is @d the directory @x or somewhere under it? */
static bool under(const struct model *m, uint32_t d, uint32_t x)
{
	for (uint32_t i = 0; i < m->n + 1; i++) {
		if (d == x)
			return true;
		if (d == 0)
			return false;
		d = m->o[d].parent;
	}
	return true;
}

static void m_kill(struct model *m, uint32_t x)
{
	m->o[x].live = false;
	free(m->o[x].ent);
	m->o[x].ent = NULL;
	m->o[x].nent = m->o[x].cap = 0;
}

static void m_attr(struct mobj *o, const struct lento_attr *a, bool truncate)
{
	if (a->valid & LENTO_A_MODE)
		o->a.mode = a->mode;
	if (a->valid & LENTO_A_UID)
		o->a.uid = a->uid;
	if (a->valid & LENTO_A_GID)
		o->a.gid = a->gid;
	if (a->valid & LENTO_A_SIZE) {
		o->a.size = a->size;
		if (truncate && o->blen > a->size)
			o->blen = a->size;
	}
	if (a->valid & LENTO_A_ATIME)
		o->a.atime_ns = a->atime_ns;
	if (a->valid & LENTO_A_MTIME)
		o->a.mtime_ns = a->mtime_ns;
	if (a->valid & LENTO_A_CTIME)
		o->a.ctime_ns = a->ctime_ns;
	if (a->valid & LENTO_A_RDEV)
		o->a.rdev = a->rdev;
}

static bool m_rename(struct model *m, const struct lento_rec *r, uint32_t d,
		     uint32_t x)
{
	uint32_t d2 = m_find(m, &r->dir2), t = m_find(m, &r->target);
	int i = ent_find(&m->o[d], r->name), j;
	bool xdir = m->o[x].type == LENTO_T_DIR;

	if (!live_dir(m, d2))
		return nope("rename: no dir2");
	j = ent_find(&m->o[d2], r->name2);
	if (d == d2 && !strcmp(r->name, r->name2))
		return nope("rename onto itself");
	if (xdir && under(m, d2, x))
		return nope("rename of a directory under itself");
	if (r->flags & LENTO_R_EXCHANGE) {
		if (j < 0 || t == NONE || m->o[d2].ent[j].obj != t || t == x)
			return nope("exchange: target not at its name");
		if (m->o[t].type == LENTO_T_DIR && under(m, d, t))
			return nope("exchange: under itself");
		m->o[d].ent[i].obj = t;
		m->o[d2].ent[j].obj = x;
		m->o[x].parent = d2;
		m->o[t].parent = d;
		return true;
	}
	if (j >= 0) {
		struct mobj *to;

		if (t == NONE || m->o[d2].ent[j].obj != t)
			return nope("rename: name2 holds another object");
		if (r->flags & LENTO_R_NOREPLACE)
			return nope("rename: noreplace over an object");
		if (t == x)
			return nope("rename over itself");
		to = &m->o[t];
		if ((to->type == LENTO_T_DIR) != xdir)
			return nope("rename: kinds differ");
		if (xdir && to->nent)
			return nope("rename over a full directory");
		ent_del(&m->o[d2], j);
		if (xdir || !--to->nlink)
			m_kill(m, t);
		i = ent_find(&m->o[d], r->name);
	} else if (t != NONE || !lento_fid_is_null(&r->target)) {
		return nope("rename: target not at name2");
	}
	ent_del(&m->o[d], i);
	ent_add(&m->o[d2], r->name2, x);
	m->o[x].parent = d2;
	return true;
}

/* Apply @r to @m as a server would: false (and why) if it does not apply. */
static bool m_apply(struct model *m, const struct lento_rec *r)
{
	uint32_t d = m_find(m, &r->dir), x = m_find(m, &r->obj);
	struct mobj *o;
	int i;

	switch (r->op) {
	case LENTO_OP_CREATE:
	case LENTO_OP_MKDIR:
	case LENTO_OP_MKNOD:
	case LENTO_OP_SYMLINK:
		if (!live_dir(m, d))
			return nope("create: no dir");
		if (ent_find(&m->o[d], r->name) >= 0)
			return nope("create: '%s' exists", r->name);
		if (r->obj.volume != m->vol || !r->obj.seq ||
		    r->obj.seq > 1000000)
			return nope("create: bad fid");
		x = (uint32_t)(r->obj.seq - 1);
		m_grow(m, x + 1);
		if (m->o[x].ever)
			return nope("create: fid reused");
		o = &m->o[x];
		memset(o, 0, sizeof(*o));
		o->fid = r->obj;
		o->ever = o->live = true;
		o->type = r->type;
		o->nlink = 1;
		o->parent = d;
		o->a = r->attr;
		o->a.valid = 0;
		ent_add(&m->o[d], r->name, x);
		return true;
	case LENTO_OP_LINK:
		if (!live_dir(m, d) || x == NONE || !m->o[x].live ||
		    m->o[x].type == LENTO_T_DIR)
			return nope("link: bad objects");
		if (ent_find(&m->o[d], r->name) >= 0)
			return nope("link: '%s' exists", r->name);
		ent_add(&m->o[d], r->name, x);
		m->o[x].nlink++;
		return true;
	case LENTO_OP_UNLINK:
	case LENTO_OP_RMDIR:
		if (!live_dir(m, d) || x == NONE || !m->o[x].live)
			return nope("unlink: bad objects");
		i = ent_find(&m->o[d], r->name);
		if (i < 0 || m->o[d].ent[i].obj != x)
			return nope("unlink: '%s' is not the object", r->name);
		if ((m->o[x].type == LENTO_T_DIR) != (r->op == LENTO_OP_RMDIR))
			return nope("unlink: wrong kind");
		if (r->op == LENTO_OP_RMDIR && m->o[x].nent)
			return nope("rmdir: not empty");
		ent_del(&m->o[d], i);
		if (r->op == LENTO_OP_RMDIR || !--m->o[x].nlink)
			m_kill(m, x);
		return true;
	case LENTO_OP_RENAME:
		if (!live_dir(m, d) || x == NONE || !m->o[x].live)
			return nope("rename: bad objects");
		i = ent_find(&m->o[d], r->name);
		if (i < 0 || m->o[d].ent[i].obj != x)
			return nope("rename: '%s' is not the object", r->name);
		return m_rename(m, r, d, x);
	case LENTO_OP_SETATTR:
	case LENTO_OP_SETXATTR:
	case LENTO_OP_REMOVEXATTR:
	case LENTO_OP_STORE:
		if (x == NONE || !m->o[x].live)
			return nope("%s: no object", opname[r->op]);
		o = &m->o[x];
		if (r->op == LENTO_OP_SETATTR) {
			if ((r->attr.valid & LENTO_A_SIZE) &&
			    o->type != LENTO_T_REG)
				return nope("truncate of a non-file");
			m_attr(o, &r->attr, true);
		} else if (r->op == LENTO_OP_STORE) {
			if (o->type != LENTO_T_REG ||
			    !(r->attr.valid & LENTO_A_SIZE))
				return nope("bad store");
			m_attr(o, &r->attr, false);
			o->body = (uint64_t)r->time_ns;
			o->blen = r->attr.size;
		} else {
			unsigned n;
			uint32_t v;

			if (sscanf(r->name, "user.%u", &n) != 1 || n >= NXA)
				return nope("bad xattr name");
			if (r->op == LENTO_OP_REMOVEXATTR) {
				if (!o->xs[n])
					return nope("removexattr: none");
				o->xs[n] = false;
			} else {
				if (r->data_len != 4)
					return nope("setxattr: bad value");
				memcpy(&v, r->data, 4);
				o->xs[n] = true;
				o->xv[n] = v;
			}
		}
		return true;
	}
	return nope("unknown op %u", r->op);
}

static bool m_equal(const struct model *a, const struct model *b)
{
	uint32_t n = a->n > b->n ? a->n : b->n;

	for (uint32_t i = 0; i < n; i++) {
		const struct mobj *x = i < a->n ? &a->o[i] : NULL;
		const struct mobj *y = i < b->n ? &b->o[i] : NULL;
		bool lx = x && x->live, ly = y && y->live;

		if (lx != ly)
			return nope("object %u: live %d, expected %d", i, lx, ly);
		if (!lx)
			continue;
		if (x->type != y->type || x->nlink != y->nlink)
			return nope("object %u: type/nlink", i);
		if (x->a.mode != y->a.mode || x->a.uid != y->a.uid ||
		    x->a.gid != y->a.gid || x->a.size != y->a.size ||
		    x->a.atime_ns != y->a.atime_ns ||
		    x->a.mtime_ns != y->a.mtime_ns ||
		    x->a.ctime_ns != y->a.ctime_ns || x->a.rdev != y->a.rdev)
			return nope("object %u: attributes", i);
		if (x->blen != y->blen || (x->blen && x->body != y->body))
			return nope("object %u: content", i);
		for (int k = 0; k < NXA; k++)
			if (x->xs[k] != y->xs[k] ||
			    (x->xs[k] && x->xv[k] != y->xv[k]))
				return nope("object %u: xattr %d", i, k);
		if (x->nent != y->nent)
			return nope("object %u: %u entries, expected %u", i,
				    x->nent, y->nent);
		for (uint32_t e = 0; e < x->nent; e++) {
			int f = ent_find(y, x->ent[e].name);

			if (f < 0 || y->ent[f].obj != x->ent[e].obj)
				return nope("object %u: entry '%s'", i,
					    x->ent[e].name);
		}
	}
	return true;
}

/* The generator: a client making changes and logging them ------------- */

struct gen {
	struct model m, init;
	struct glist recs;
	int64_t clock;
	uint32_t uid, gid;
	uint32_t groups[4];	/* the maker's supplementary groups */
	uint16_t ngroups;
	bool lastlink;		/* set LENTO_R_LASTLINK when it holds */
	uint64_t rng;
};

static struct lento_fid g_fid(struct gen *g, uint32_t i)
{
	return g->m.o[i].fid;
}

/* The version the server had of @f before the log: created ones have none. */
static struct lento_vv base_of(const struct lento_fid *f)
{
	struct lento_vv vv;

	memset(&vv, 0, sizeof(vv));
	if (!lento_fid_is_null(f) && !f->client) {
		vv.n = 1;
		vv.v[0] = 1000 + f->seq;
		vv.store.seq = f->seq;
	}
	return vv;
}

static struct grec *g_new(struct gen *g, uint16_t op)
{
	struct grec *e = glist_add(&g->recs);

	e->r.op = op;
	e->r.uid = g->uid;
	e->r.gid = g->gid;
	groups_le(e->groups, g->groups, g->ngroups);
	e->r.ngroups = g->ngroups;
	e->r.time_ns = ++g->clock;
	return e;
}

static void g_commit(struct gen *g, struct grec *e)
{
	struct lento_rec *r = grec_rec(e);

	r->base_dir = base_of(&r->dir);
	r->base_obj = base_of(&r->obj);
	r->base_dir2 = base_of(&r->dir2);
	r->base_target = base_of(&r->target);
	if (r->op == LENTO_OP_STORE)
		e->body = r->attr.size;
	ck_assert_msg(m_apply(&g->m, r), "generator: %s", why);
}

/* A server object at the start, in directory @dir. */
static uint32_t g_server(struct gen *g, uint8_t type, uint32_t dir,
			 const char *name)
{
	uint32_t i = g->m.n;
	struct mobj *o;

	m_grow(&g->m, i + 1);
	o = &g->m.o[i];
	o->fid = (struct lento_fid){ g->m.vol, 0, i + 1 };
	o->ever = o->live = true;
	o->type = type;
	o->nlink = 1;
	o->a.mode = type == LENTO_T_DIR ? 0755 : 0644;
	o->a.uid = o->a.gid = 1000;
	o->a.size = type == LENTO_T_REG ? 100 : 0;
	o->blen = o->a.size;
	o->body = 7;
	if (dir != NONE) {
		o->parent = dir;
		ent_add(&g->m.o[dir], name, i);
	}
	return i;
}

/*
 * The volume every test starts from: / with directories s1, s2, s1/s3;
 * files /a, /s1/b, /c = /s2/c (two links); symlink /s2/d; fifo /s1/s3/e.
 */
enum { ROOT, S1, S2, S3, FA, FB, FC, SLD, FIE, NSERVER };

static void g_init(struct gen *g, uint32_t vol, uint64_t seed)
{
	memset(g, 0, sizeof(*g));
	g->m.vol = vol;
	g->uid = g->gid = 1000;
	g->lastlink = true;
	g->rng = seed;
	g->clock = 1000000;
	g_server(g, LENTO_T_DIR, NONE, NULL);
	g_server(g, LENTO_T_DIR, ROOT, "s1");
	g_server(g, LENTO_T_DIR, ROOT, "s2");
	g_server(g, LENTO_T_DIR, S1, "s3");
	g_server(g, LENTO_T_REG, ROOT, "a");
	g_server(g, LENTO_T_REG, S1, "b");
	g_server(g, LENTO_T_REG, ROOT, "c");
	ent_add(&g->m.o[S2], "c", FC);
	g->m.o[FC].nlink = 2;
	g_server(g, LENTO_T_SYMLINK, S2, "d");
	g_server(g, LENTO_T_FIFO, S3, "e");
	m_clone(&g->init, &g->m);
}

static void g_free(struct gen *g)
{
	m_free(&g->m);
	m_free(&g->init);
	glist_free(&g->recs);
}

static uint32_t g_make(struct gen *g, uint16_t op, uint32_t dir,
		       const char *name)
{
	struct grec *e = g_new(g, op);
	uint32_t i = g->m.n;

	e->r.dir = g_fid(g, dir);
	e->r.obj = (struct lento_fid){ g->m.vol, CLIENT, i + 1 };
	e->r.type = op == LENTO_OP_MKDIR ? LENTO_T_DIR :
		    op == LENTO_OP_SYMLINK ? LENTO_T_SYMLINK :
		    op == LENTO_OP_MKNOD ? LENTO_T_FIFO : LENTO_T_REG;
	e->r.attr.valid = LENTO_A_ALL;
	e->r.attr.mode = op == LENTO_OP_MKDIR ? 0755 : 0644;
	e->r.attr.uid = g->uid;
	e->r.attr.gid = g->gid;
	e->r.attr.atime_ns = e->r.attr.mtime_ns = e->r.attr.ctime_ns =
		g->clock;
	snprintf(e->r.name, sizeof(e->r.name), "%s", name);
	if (op == LENTO_OP_SYMLINK) {
		memcpy(e->data, "target", 6);
		e->r.data_len = 6;
	}
	g_commit(g, e);
	return i;
}

static uint32_t g_entry(struct gen *g, uint32_t dir, const char *name)
{
	int i = ent_find(&g->m.o[dir], name);

	ck_assert_int_ge(i, 0);
	return g->m.o[dir].ent[i].obj;
}

static void g_link(struct gen *g, uint32_t x, uint32_t dir, const char *name)
{
	struct grec *e = g_new(g, LENTO_OP_LINK);

	e->r.dir = g_fid(g, dir);
	e->r.obj = g_fid(g, x);
	snprintf(e->r.name, sizeof(e->r.name), "%s", name);
	g_commit(g, e);
}

static void g_remove(struct gen *g, uint32_t dir, const char *name)
{
	uint32_t x = g_entry(g, dir, name);
	bool isdir = g->m.o[x].type == LENTO_T_DIR;
	struct grec *e = g_new(g, isdir ? LENTO_OP_RMDIR : LENTO_OP_UNLINK);

	e->r.dir = g_fid(g, dir);
	e->r.obj = g_fid(g, x);
	if (!isdir && g->m.o[x].nlink == 1 && g->lastlink)
		e->r.flags = LENTO_R_LASTLINK;
	snprintf(e->r.name, sizeof(e->r.name), "%s", name);
	g_commit(g, e);
}

static void g_rename(struct gen *g, uint32_t dir, const char *name,
		     uint32_t dir2, const char *name2, uint16_t flags)
{
	struct grec *e = g_new(g, LENTO_OP_RENAME);
	int j = ent_find(&g->m.o[dir2], name2);

	e->r.dir = g_fid(g, dir);
	e->r.obj = g_fid(g, g_entry(g, dir, name));
	e->r.dir2 = g_fid(g, dir2);
	e->r.flags = flags;
	if (j >= 0) {
		uint32_t t = g->m.o[dir2].ent[j].obj;

		e->r.target = g_fid(g, t);
		if (!(flags & LENTO_R_EXCHANGE) && g->lastlink &&
		    (g->m.o[t].type == LENTO_T_DIR || g->m.o[t].nlink == 1))
			e->r.flags |= LENTO_R_LASTLINK;
	}
	e->r.attr.valid = LENTO_A_CTIME;
	e->r.attr.ctime_ns = g->clock;
	snprintf(e->r.name, sizeof(e->r.name), "%s", name);
	snprintf(e->r.name2, sizeof(e->r.name2), "%s", name2);
	g_commit(g, e);
}

static void g_setattr(struct gen *g, uint32_t x, uint32_t valid,
		      uint32_t mode, uint64_t size)
{
	struct grec *e = g_new(g, LENTO_OP_SETATTR);

	e->r.obj = g_fid(g, x);
	e->r.attr.valid = valid;
	e->r.attr.mode = mode;
	e->r.attr.uid = g->uid + 1;
	e->r.attr.gid = g->gid + 2;
	e->r.attr.size = size;
	e->r.attr.atime_ns = g->clock - 5;
	e->r.attr.mtime_ns = g->clock - 3;
	e->r.attr.ctime_ns = g->clock;
	g_commit(g, e);
}

static void g_truncate(struct gen *g, uint32_t x, uint64_t size)
{
	g_setattr(g, x, LENTO_A_SIZE | LENTO_A_MTIME | LENTO_A_CTIME, 0, size);
}

static void g_store(struct gen *g, uint32_t x, uint64_t size, uint32_t valid)
{
	struct grec *e = g_new(g, LENTO_OP_STORE);

	e->r.obj = g_fid(g, x);
	e->r.attr.valid = valid;
	e->r.attr.size = size;
	e->r.attr.mode = 0640;
	e->r.attr.mtime_ns = e->r.attr.ctime_ns = g->clock;
	g_commit(g, e);
}

#define STORE_ATTRS (LENTO_A_SIZE | LENTO_A_MTIME | LENTO_A_CTIME | LENTO_A_MODE)

static void g_xattr(struct gen *g, uint32_t x, unsigned n, bool set,
		    uint32_t v)
{
	struct grec *e = g_new(g, set ? LENTO_OP_SETXATTR :
				   LENTO_OP_REMOVEXATTR);

	e->r.obj = g_fid(g, x);
	snprintf(e->r.name, sizeof(e->r.name), "user.%u", n);
	if (set) {
		memcpy(e->data, &v, 4);
		e->r.data_len = 4;
	}
	e->r.attr.valid = LENTO_A_CTIME;
	e->r.attr.ctime_ns = g->clock;
	g_commit(g, e);
}

/* Running a log through the optimiser --------------------------------- */

static char ctx[128];		/* which case, for failure messages */

static int ignore(void *arg, const struct lento_rec *rec, uint64_t body)
{
	(void)arg;
	(void)rec;
	(void)body;
	return 0;
}

static bool same_rec(const struct lento_rec *a, const struct lento_rec *b)
{
	return a->recno == b->recno && a->op == b->op && a->flags == b->flags &&
	       lento_fid_eq(&a->dir, &b->dir) && lento_fid_eq(&a->obj, &b->obj) &&
	       lento_fid_eq(&a->dir2, &b->dir2) &&
	       lento_fid_eq(&a->target, &b->target) &&
	       !strcmp(a->name, b->name) && !strcmp(a->name2, b->name2) &&
	       !memcmp(&a->attr, &b->attr, sizeof(a->attr));
}

static bool vv_eq(const struct lento_vv *a, const struct lento_vv *b)
{
	if (a->n != b->n || a->store.client != b->store.client ||
	    a->store.seq != b->store.seq)
		return false;
	for (uint32_t i = 0; i < a->n; i++)
		if (a->v[i] != b->v[i])
			return false;
	return true;
}

/* Do the bases of @r name the server's versions from before the log? */
static bool bases_right(const struct lento_rec *r)
{
	const struct lento_fid *f[] = { &r->dir, &r->obj, &r->dir2, &r->target };
	const struct lento_vv *b[] = { &r->base_dir, &r->base_obj,
				       &r->base_dir2, &r->base_target };

	for (int s = 0; s < 4; s++) {
		struct lento_vv want = base_of(f[s]);

		if (!vv_eq(b[s], &want))
			return nope("record %" PRIu64 ": base of slot %d",
				    r->recno, s);
	}
	return true;
}

struct outcome {
	struct glist out;
	struct cml_opt_stats st;
};

/* How many record slots name each object (cml_count_fn's counts). */
struct counts {
	struct lento_fid *fid;
	int64_t *n;
	size_t len, cap;
};

static int counts_add(void *arg, const struct lento_fid *f, int64_t delta)
{
	struct counts *cs = arg;
	size_t i;

	ck_assert_int_ne(delta, 0);
	for (i = 0; i < cs->len && !lento_fid_eq(&cs->fid[i], f); i++)
		;
	if (i == cs->len) {
		if (cs->len == cs->cap) {
			cs->cap = cs->cap ? cs->cap * 2 : 64;
			cs->fid = realloc(cs->fid, cs->cap * sizeof(*cs->fid));
			cs->n = realloc(cs->n, cs->cap * sizeof(*cs->n));
			ck_assert(cs->fid && cs->n);
		}
		cs->fid[cs->len] = *f;
		cs->n[cs->len++] = 0;
	}
	cs->n[i] += delta;
	return 0;
}

static void counts_of(struct counts *cs, const struct glist *l, int64_t sign)
{
	for (size_t i = 0; i < l->n; i++) {
		const struct lento_rec *r = &l->v[i].r;
		const struct lento_fid *f[] = { &r->dir, &r->obj, &r->dir2,
						&r->target };

		for (int k = 0; k < 4; k++)
			if (!lento_fid_is_null(f[k]))
				counts_add(cs, f[k], sign);
	}
}

/* cml_stats() as the log itself says, read afresh. */
static struct cml_stats stats_read(struct cml *c, uint32_t vol)
{
	struct cml_stats s = { 0 };
	sqlite3_stmt *st;

	ck_assert_int_eq(sqlite3_prepare_v2(cml_db(c),
		"SELECT count(*), coalesce(sum(128 + coalesce(length(name), 0)"
		" + coalesce(length(name2), 0) + coalesce(length(data), 0) + "
		"coalesce(length(groups), 0) + body_size), 0), "
		"coalesce(sum(state <> 0), 0), "
		"coalesce(min(time), 0) FROM cml WHERE volume = ?1", -1, &st,
		NULL), SQLITE_OK);
	sqlite3_bind_int64(st, 1, vol);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	s.records = (uint64_t)sqlite3_column_int64(st, 0);
	s.bytes = (uint64_t)sqlite3_column_int64(st, 1);
	s.shipped = (uint64_t)sqlite3_column_int64(st, 2);
	s.oldest_ns = sqlite3_column_int64(st, 3);
	sqlite3_finalize(st);
	return s;
}

/*
 * Append @g's log to volume g->m.vol, ship its first @ship records, run the
 * optimiser, and check the result: the shipped records untouched, the
 * optimised log applies to the starting volume and ends where the log did,
 * (with @bases) every base right, the figures kept right, and a second
 * run changes nothing.
 */
static void run_log(struct cml *c, struct gen *g, uint32_t ship, bool bases,
		    struct outcome *res)
{
	uint32_t vol = g->m.vol;
	struct cml_opt_stats again;
	struct counts counts = { 0 };
	struct cml_stats fig, want;
	struct glist before;
	struct model rm;
	size_t k = 0;

	memset(res, 0, sizeof(*res));
	exec(c, "BEGIN");
	for (size_t i = 0; i < g->recs.n; i++) {
		struct grec *e = &g->recs.v[i];

		ck_assert_int_eq(cml_append(c, grec_rec(e), e->body), 0);
	}
	exec(c, "COMMIT");

	/* The generator's log itself ends where the model did. */
	m_clone(&rm, &g->init);
	for (size_t i = 0; i < g->recs.n; i++)
		ck_assert_msg(m_apply(&rm, grec_rec(&g->recs.v[i])),
			      "%s: the log does not replay: %s", ctx, why);
	ck_assert_msg(m_equal(&rm, &g->m), "%s: log replay: %s", ctx, why);
	m_free(&rm);

	if (ship)
		ck_assert_int_eq(cml_batch(c, vol, ship, 0, ignore, NULL),
				 (int)ship);
	/* Counted before, told each change, counted after: all even. */
	before = list(c, vol);
	counts_of(&counts, &before, 1);
	glist_free(&before);
	/* The figures kept follow the rewrite. */
	ck_assert_int_eq(cml_stats(c, vol, &fig), 0);
	ck_assert_int_eq(cml_optimise(c, vol, &res->st, counts_add, &counts),
			 0);
	want = stats_read(c, vol);
	ck_assert_int_eq(cml_stats(c, vol, &fig), 0);
	ck_assert_msg(fig.records == want.records && fig.bytes == want.bytes &&
		      fig.shipped == want.shipped &&
		      fig.oldest_ns == want.oldest_ns, "%s: the figures after "
		      "the optimiser are off", ctx);
	res->out = list(c, vol);
	counts_of(&counts, &res->out, -1);
	for (size_t i = 0; i < counts.len; i++)
		ck_assert_msg(!counts.n[i], "%s: the optimiser's counts are "
			      "off by %" PRId64 " for an object", ctx,
			      counts.n[i]);
	free(counts.fid);
	free(counts.n);
	ck_assert_uint_eq(res->st.before, g->recs.n - ship);
	ck_assert_uint_eq(res->st.after + ship, res->out.n);

	for (size_t i = 0; i < ship; i++)
		ck_assert_msg(same_rec(&res->out.v[i].r, &g->recs.v[i].r),
			      "%s: shipped record %zu changed", ctx, i);
	/* Records keep their numbers and their order. */
	for (size_t i = 0; i < res->out.n; i++) {
		while (k < g->recs.n &&
		       g->recs.v[k].r.recno < res->out.v[i].r.recno)
			k++;
		ck_assert_msg(k < g->recs.n &&
			      g->recs.v[k].r.recno == res->out.v[i].r.recno,
			      "%s: a record number that was not in the log",
			      ctx);
		/* A record keeps its maker: uid, gid, groups. */
		ck_assert_msg(same_maker(&res->out.v[i], &g->recs.v[k]),
			      "%s: record %" PRIu64 " changed its maker", ctx,
			      res->out.v[i].r.recno);
		if (res->out.v[i].r.op == LENTO_OP_STORE)
			ck_assert_uint_eq(res->out.v[i].body,
					  res->out.v[i].r.attr.size);
	}

	m_clone(&rm, &g->init);
	for (size_t i = 0; i < res->out.n; i++) {
		if (!m_apply(&rm, grec_rec(&res->out.v[i]))) {
			dump("log", &g->recs);
			dump("optimised", &res->out);
			ck_abort_msg("%s: optimised record %zu (recno %" PRIu64
				     ") does not apply: %s", ctx, i,
				     res->out.v[i].r.recno, why);
		}
		if (bases && !bases_right(&res->out.v[i].r)) {
			dump("log", &g->recs);
			dump("optimised", &res->out);
			ck_abort_msg("%s: %s", ctx, why);
		}
	}
	if (!m_equal(&rm, &g->m)) {
		dump("log", &g->recs);
		dump("optimised", &res->out);
		ck_abort_msg("%s: the optimised log ends elsewhere: %s", ctx,
			     why);
	}
	m_free(&rm);

	ck_assert_int_eq(cml_optimise(c, vol, &again, NULL, NULL), 0);
	if (again.after != again.before) {
		dump("optimised", &res->out);
		ck_abort_msg("%s: a second run removed %" PRIu64 " more", ctx,
			     again.before - again.after);
	}
}

/* Storage tests -------------------------------------------------------- */

static struct lento_rec setattr_rec(uint32_t vol, uint64_t seq)
{
	struct lento_rec r;

	memset(&r, 0, sizeof(r));
	r.op = LENTO_OP_SETATTR;
	r.obj = (struct lento_fid){ vol, 0, seq };
	r.uid = r.gid = 1000;
	r.time_ns = 5000 + (int64_t)seq;
	r.attr.valid = LENTO_A_MODE;
	r.attr.mode = 0600;
	r.base_obj.n = 1;
	r.base_obj.v[0] = 42;
	return r;
}

START_TEST(append_numbers_and_persists)
{
	struct cml *c = open_cml();
	struct lento_rec r = setattr_rec(VOL, 10);
	uint64_t last;
	struct glist l;
	char *mode = NULL;
	sqlite3_stmt *st;

	for (uint64_t i = 1; i <= 3; i++) {
		ck_assert_int_eq(cml_append(c, &r, 0), 0);
		ck_assert_uint_eq(r.recno, i);
	}
	ck_assert_int_eq(sqlite3_prepare_v2(cml_db(c), "PRAGMA journal_mode",
					    -1, &st, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	mode = strdup((const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	ck_assert_str_eq(mode, "wal");
	free(mode);
	cml_close(c);

	c = open_cml();
	l = list(c, VOL);
	ck_assert_uint_eq(l.n, 3);
	for (size_t i = 0; i < 3; i++) {
		ck_assert_uint_eq(l.v[i].r.recno, i + 1);
		ck_assert_uint_eq(l.v[i].r.op, LENTO_OP_SETATTR);
		ck_assert_uint_eq(l.v[i].r.attr.mode, 0600);
		ck_assert_uint_eq(l.v[i].r.base_obj.n, 1);
		ck_assert_uint_eq(l.v[i].r.base_obj.v[0], 42);
		ck_assert_uint_eq(l.v[i].r.base_dir.n, 0);
	}
	glist_free(&l);
	/* A restart may skip numbers, never go back. */
	ck_assert_int_eq(cml_append(c, &r, 0), 0);
	ck_assert_uint_gt(r.recno, 3);
	last = r.recno;
	ck_assert_int_eq(cml_append(c, &r, 0), 0);
	ck_assert_uint_eq(r.recno, last + 1);
	ck_assert_int_eq(cml_ack(c, VOL, r.recno), 5);
	last = r.recno;
	cml_close(c);

	/* Every record acknowledged and deleted: numbers still go on. */
	c = open_cml();
	ck_assert_int_eq(cml_append(c, &r, 0), 0);
	ck_assert_uint_gt(r.recno, last);
	cml_close(c);
}
END_TEST

/*
 * Numbers taken in a transaction that is rolled back were never given
 * out: after it, and after a restart, each number is still new.
 */
START_TEST(numbers_after_a_rollback)
{
	struct cml *c = open_cml();
	struct lento_rec r = setattr_rec(VOL, 10);
	struct lento_fid f;
	uint64_t recno, seq;
	struct glist l;

	exec(c, "BEGIN");
	ck_assert_int_eq(cml_append(c, &r, 0), 0);
	ck_assert_int_eq(cml_mint_fid(c, VOL, &f), 0);
	exec(c, "ROLLBACK");
	ck_assert_int_eq(cml_append(c, &r, 0), 0);
	ck_assert_int_eq(cml_mint_fid(c, VOL, &f), 0);
	recno = r.recno;
	seq = f.seq;
	/* One rolled back after the block was reserved. */
	exec(c, "BEGIN");
	ck_assert_int_eq(cml_append(c, &r, 0), 0);
	ck_assert_uint_eq(r.recno, recno + 1);
	exec(c, "ROLLBACK");
	ck_assert_int_eq(cml_append(c, &r, 0), 0);
	ck_assert_uint_gt(r.recno, recno);
	recno = r.recno;
	cml_close(c);

	c = open_cml();
	ck_assert_int_eq(cml_append(c, &r, 0), 0);
	ck_assert_uint_gt(r.recno, recno);
	ck_assert_int_eq(cml_mint_fid(c, VOL, &f), 0);
	ck_assert_uint_gt(f.seq, seq);
	l = list(c, VOL);
	ck_assert_uint_eq(l.n, 3);
	glist_free(&l);
	cml_close(c);
}
END_TEST

static void stats_right(struct cml *c, const char *when)
{
	for (uint32_t vol = VOL; vol <= VOL + 1; vol++) {
		struct cml_stats want = stats_read(c, vol), got;

		ck_assert_int_eq(cml_stats(c, vol, &got), 0);
		ck_assert_msg(got.records == want.records &&
			      got.bytes == want.bytes &&
			      got.shipped == want.shipped &&
			      got.oldest_ns == want.oldest_ns,
			      "%s, volume %u: %" PRIu64 " records, %" PRIu64
			      " bytes, %" PRIu64 " shipped, oldest %" PRId64
			      "; the log has %" PRIu64 ", %" PRIu64 ", %"
			      PRIu64 ", %" PRId64, when, vol, got.records,
			      got.bytes, got.shipped, got.oldest_ns,
			      want.records, want.bytes, want.shipped,
			      want.oldest_ns);
	}
}

static int take_none(void *arg, const struct lento_rec *rec, uint64_t body)
{
	(void)arg;
	(void)rec;
	(void)body;
	return 0;
}

/* Records' names summed per object, each object told once. */
START_TEST(count_names_sums_per_object)
{
	struct lento_rec r[3];
	struct counts cs = { 0 };
	struct lento_fid d = { VOL, 0, 1 }, a = { VOL, 0, 2 },
			 b = { VOL, CLIENT, 3 };

	memset(r, 0, sizeof(r));
	r[0].dir = d;
	r[0].obj = a;
	r[1].obj = a;
	r[2].dir = d;
	r[2].obj = b;
	r[2].dir2 = d;
	ck_assert_int_eq(cml_count_names(r, 3, -1, counts_add, &cs), 0);
	ck_assert_uint_eq(cs.len, 3);
	for (size_t i = 0; i < cs.len; i++)
		ck_assert_int_eq(cs.n[i], lento_fid_eq(&cs.fid[i], &d) ? -3 :
				 lento_fid_eq(&cs.fid[i], &a) ? -2 : -1);
	free(cs.fid);
	free(cs.n);
}
END_TEST

/* The figures kept between reads follow every change of the log. */
START_TEST(stats_follow_the_log)
{
	static const uint8_t groups[8] = { 1, 0, 0, 0, 2, 0, 0, 0 };
	struct cml *c = open_cml();
	struct lento_rec r;
	uint64_t recno[12];

	stats_right(c, "empty");
	for (int i = 0; i < 12; i++) {
		r = setattr_rec(i % 3 ? VOL : VOL + 1, 20 + (uint64_t)i);
		r.time_ns = 9000 - i * (i % 2 ? 1 : -1);
		/* Some with groups: they count as their bytes. */
		r.groups = groups;
		r.ngroups = (uint16_t)(i % 3);
		if (i % 4 == 1) {
			r.op = LENTO_OP_STORE;
			r.attr.valid = LENTO_A_SIZE;
			r.attr.size = 300 + (uint64_t)i;
		}
		ck_assert_int_eq(cml_append(c, &r, r.op == LENTO_OP_STORE ?
					    r.attr.size : 0), 0);
		recno[i] = r.recno;
		stats_right(c, "appended");
	}
	ck_assert_int_eq(cml_batch(c, VOL, 3, 0, take_none, NULL), 3);
	stats_right(c, "shipped");
	exec(c, "BEGIN");
	r = setattr_rec(VOL, 99);
	r.time_ns = 1;
	ck_assert_int_eq(cml_append(c, &r, 0), 0);
	ck_assert_int_eq(cml_ack(c, VOL, recno[2]), 2);
	stats_right(c, "in a transaction");
	exec(c, "ROLLBACK");
	stats_right(c, "rolled back");
	ck_assert_int_eq(cml_ack(c, VOL, recno[2]), 2);
	stats_right(c, "acknowledged");
	ck_assert_int_eq(cml_requeue(c, VOL), 0);
	stats_right(c, "requeued");
	ck_assert_int_eq(cml_drop(c, recno[11]), 0);
	stats_right(c, "dropped");
	ck_assert_int_eq(cml_optimise(c, VOL, NULL, NULL, NULL), 0);
	stats_right(c, "optimised");
	/* Two changes of one object's mode fold into one: the oldest goes. */
	for (int i = 0; i < 2; i++) {
		r = setattr_rec(VOL, 77);
		r.time_ns = i ? 30000 : 2;
		r.attr.mode = i ? 0644 : 0600;
		r.groups = groups;
		r.ngroups = 2;
		ck_assert_int_eq(cml_append(c, &r, 0), 0);
	}
	stats_right(c, "appended a fold");
	ck_assert_int_eq(cml_optimise(c, VOL, NULL, NULL, NULL), 0);
	stats_right(c, "optimised a fold");
	r = setattr_rec(VOL, 20);
	ck_assert_int_eq(cml_append(c, &r, 0), 0);
	stats_right(c, "appended after");
	/* Acknowledgements one batch at a time, the oldest anywhere. */
	for (int i = 0; i < 4; i++) {
		r = setattr_rec(VOL, 40 + (uint64_t)i);
		r.time_ns = i == 2 ? 5 : 20000 + i;
		ck_assert_int_eq(cml_append(c, &r, 0), 0);
		recno[i] = r.recno;
	}
	stats_right(c, "appended more");
	while (cml_batch(c, VOL, 2, 0, take_none, NULL) > 0) {
		stats_right(c, "shipped again");
		ck_assert_int_eq(cml_ack(c, VOL, 0), 0);
		stats_right(c, "nothing acknowledged");
	}
	ck_assert_int_gt(cml_ack(c, VOL, recno[0]), 1);
	stats_right(c, "acknowledged, the oldest stays");
	ck_assert_int_eq(cml_ack(c, VOL, recno[2]), 2);
	stats_right(c, "acknowledged the oldest");
	ck_assert_int_eq(cml_ack(c, VOL, UINT64_MAX), 1);
	stats_right(c, "acknowledged all");
	r = setattr_rec(VOL, 50);
	ck_assert_int_eq(cml_append(c, &r, 0), 0);
	stats_right(c, "appended to an empty log");
	cml_close(c);
}
END_TEST

START_TEST(round_trip_every_field)
{
	struct cml *c = open_cml();
	struct lento_rec r, *o;
	struct glist l;
	char big[LENTO_SYMLINK_MAX];
	uint32_t gids[LENTO_GROUPS_MAX];
	uint8_t groups[4 * LENTO_GROUPS_MAX];

	memset(&r, 0, sizeof(r));
	memset(big, 'x', sizeof(big));
	r.op = LENTO_OP_RENAME;
	r.flags = LENTO_R_LASTLINK;
	r.uid = 4000000000U;
	r.gid = 77;
	r.time_ns = -12345;
	r.dir = (struct lento_fid){ VOL, 0, 1 };
	r.obj = (struct lento_fid){ VOL, 3, UINT64_MAX - 1 };
	r.dir2 = (struct lento_fid){ VOL, UINT32_MAX, 2 };
	r.target = (struct lento_fid){ VOL, 0, 99 };
	r.base_dir.n = 1;
	r.base_dir.v[0] = UINT64_MAX;
	r.base_obj.n = LENTO_VV_MAX;
	for (int i = 0; i < LENTO_VV_MAX; i++)
		r.base_obj.v[i] = (uint64_t)i * 1000;
	r.base_obj.store = (struct lento_storeid){ 5, 6 };
	r.base_target.n = 2;
	r.base_target.v[1] = 3;
	r.attr = (struct lento_attr){ LENTO_A_ALL, 07777, 1, 2, UINT64_MAX,
				      -1, INT64_MIN, INT64_MAX, UINT64_MAX };
	memset(r.name, 'n', LENTO_NAME_MAX);
	strcpy(r.name2, "\xff\x01 new");
	for (uint32_t i = 0; i < LENTO_GROUPS_MAX; i++)
		gids[i] = i ? 4000000000U - i : 0;
	groups_le(groups, gids, LENTO_GROUPS_MAX);
	r.groups = groups;
	r.ngroups = LENTO_GROUPS_MAX;
	ck_assert_int_eq(cml_append(c, &r, 0), 0);

	l = list(c, VOL);
	ck_assert_uint_eq(l.n, 1);
	o = &l.v[0].r;
	r.recno = 1;
	ck_assert_mem_eq(&o->base_obj, &r.base_obj, sizeof(r.base_obj));
	ck_assert(same_rec(o, &r));
	ck_assert(o->uid == r.uid && o->gid == r.gid && o->time_ns == r.time_ns);
	ck_assert_uint_eq(o->ngroups, LENTO_GROUPS_MAX);
	ck_assert_mem_eq(l.v[0].groups, groups, sizeof(groups));
	ck_assert(vv_eq(&o->base_dir, &r.base_dir));
	ck_assert(vv_eq(&o->base_target, &r.base_target));
	ck_assert_uint_eq(o->base_dir2.n, 0);
	glist_free(&l);

	/* A symlink of the longest target. */
	memset(&r, 0, sizeof(r));
	r.op = LENTO_OP_SYMLINK;
	r.type = LENTO_T_SYMLINK;
	r.dir = (struct lento_fid){ VOL, 0, 1 };
	r.obj = (struct lento_fid){ VOL, 3, 9 };
	strcpy(r.name, "l");
	r.data = big;
	r.data_len = sizeof(big);
	ck_assert_int_eq(cml_append(c, &r, 0), 0);
	{
		struct cml_stats st;

		ck_assert_int_eq(cml_stats(c, VOL, &st), 0);
		ck_assert_uint_eq(st.records, 2);
		ck_assert_uint_eq(st.bytes, 2 * CML_REC_HDR_BYTES +
				  LENTO_NAME_MAX + 6 + 4 * LENTO_GROUPS_MAX +
				  1 + sizeof(big));
	}
	cml_close(c);
}
END_TEST

START_TEST(append_refuses_bad_records)
{
	struct cml *c = open_cml();
	static const uint8_t big_groups[4 * (LENTO_GROUPS_MAX + 1)];
	struct lento_rec r = setattr_rec(VOL, 10), b;
	struct cml_stats st;

	b = r;
	b.op = 0;
	ck_assert_int_eq(cml_append(c, &b, 0), -EINVAL);
	b = r;
	b.op = LENTO_OP_LAST + 1;
	ck_assert_int_eq(cml_append(c, &b, 0), -EINVAL);
	b = r;
	memset(&b.obj, 0, sizeof(b.obj));
	ck_assert_int_eq(cml_append(c, &b, 0), -EINVAL);
	b = r;
	b.flags = LENTO_R_EXCHANGE;
	ck_assert_int_eq(cml_append(c, &b, 0), -EINVAL);
	b = r;
	ck_assert_int_eq(cml_append(c, &b, 10), -EINVAL);	/* body */
	b = r;
	b.dir = (struct lento_fid){ VOL, 0, 1 };
	ck_assert_int_eq(cml_append(c, &b, 0), -EINVAL);	/* no dir */
	b = r;
	strcpy(b.name, "x");
	ck_assert_int_eq(cml_append(c, &b, 0), -EINVAL);	/* no name */
	b = r;
	b.ngroups = 1;
	ck_assert_int_eq(cml_append(c, &b, 0), -EINVAL);	/* no groups */
	b.groups = big_groups;
	b.ngroups = LENTO_GROUPS_MAX + 1;
	ck_assert_int_eq(cml_append(c, &b, 0), -EINVAL);	/* too many */

	/* A create: needs dir, name, a type that fits. */
	memset(&b, 0, sizeof(b));
	b.op = LENTO_OP_CREATE;
	b.type = LENTO_T_REG;
	b.dir = (struct lento_fid){ VOL, 0, 1 };
	b.obj = (struct lento_fid){ VOL + 1, 3, 9 };
	strcpy(b.name, "f");
	ck_assert_int_eq(cml_append(c, &b, 0), -EXDEV);
	b.obj.volume = VOL;
	b.type = LENTO_T_DIR;
	ck_assert_int_eq(cml_append(c, &b, 0), -EINVAL);
	b.type = LENTO_T_REG;
	memset(b.name, 'n', sizeof(b.name));		/* no NUL */
	ck_assert_int_eq(cml_append(c, &b, 0), -EINVAL);
	memset(b.name, 0, sizeof(b.name));
	ck_assert_int_eq(cml_append(c, &b, 0), -EINVAL);	/* empty */
	strcpy(b.name, "f");
	b.data_len = 3;
	b.data = "abc";
	ck_assert_int_eq(cml_append(c, &b, 0), -EINVAL);	/* data */
	b.data_len = 0;
	b.data = NULL;

	/* Renames: a target with NOREPLACE, EXCHANGE without one. */
	memset(&b, 0, sizeof(b));
	b.op = LENTO_OP_RENAME;
	b.dir = b.dir2 = (struct lento_fid){ VOL, 0, 1 };
	b.obj = (struct lento_fid){ VOL, 0, 5 };
	strcpy(b.name, "a");
	strcpy(b.name2, "b");
	b.flags = LENTO_R_EXCHANGE;
	ck_assert_int_eq(cml_append(c, &b, 0), -EINVAL);
	b.flags = LENTO_R_LASTLINK;
	ck_assert_int_eq(cml_append(c, &b, 0), -EINVAL);
	b.target = (struct lento_fid){ VOL, 0, 6 };
	b.flags = LENTO_R_NOREPLACE;
	ck_assert_int_eq(cml_append(c, &b, 0), -EINVAL);
	b.flags = LENTO_R_EXCHANGE;
	ck_assert_int_eq(cml_append(c, &b, 0), 0);
	ck_assert_uint_eq(b.recno, 1);		/* refusals took no number */

	ck_assert_int_eq(cml_stats(c, VOL, &st), 0);
	ck_assert_uint_eq(st.records, 1);
	cml_close(c);
}
END_TEST

START_TEST(refuses_newer_format)
{
	struct cml *c = open_cml();

	exec(c, "UPDATE cml_meta SET value = 2 WHERE key = 'format'");
	cml_close(c);
	ck_assert_int_eq(cml_open_path(&c, dbpath), -EPROTO);
	ck_assert_ptr_null(c);
}
END_TEST

/* The log's tables before its records carried their maker's groups. */
static const char old_schema[] =
	"CREATE TABLE cml_meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;"
	"CREATE TABLE cml_fidseq("
	"  volume INTEGER PRIMARY KEY, last INTEGER NOT NULL);"
	"CREATE TABLE cml("
	"  recno INTEGER PRIMARY KEY,"
	"  volume INTEGER NOT NULL,"
	"  state INTEGER NOT NULL,"
	"  op INTEGER NOT NULL, flags INTEGER NOT NULL,"
	"  uid INTEGER NOT NULL, gid INTEGER NOT NULL, time INTEGER NOT NULL,"
	"  dir BLOB, obj BLOB NOT NULL, dir2 BLOB, target BLOB,"
	"  base_dir BLOB, base_obj BLOB, base_dir2 BLOB, base_target BLOB,"
	"  type INTEGER NOT NULL,"
	"  a_valid INTEGER NOT NULL, a_mode INTEGER NOT NULL,"
	"  a_uid INTEGER NOT NULL, a_gid INTEGER NOT NULL,"
	"  a_size INTEGER NOT NULL, a_atime INTEGER NOT NULL,"
	"  a_mtime INTEGER NOT NULL, a_ctime INTEGER NOT NULL,"
	"  a_rdev INTEGER NOT NULL,"
	"  name BLOB, name2 BLOB, data BLOB,"
	"  body_size INTEGER NOT NULL);"
	"CREATE INDEX cml_volume ON cml(volume, recno);"
	"INSERT INTO cml_meta VALUES ('format', 1), ('last_recno', 1024), "
	"  ('client', 9), ('uuid', x'00112233445566778899aabbccddeeff');"
	/*
	 * Two chmods (SETATTR, 9) of object {VOL, 0, 10} by uid and gid
	 * 1000, its base {42}: setattr_rec()'s.
	 */
	"INSERT INTO cml VALUES "
	"  (1, 7, 0, 9, 0, 1000, 1000, 5001, NULL, "
	"   x'07000000000000000a00000000000000', NULL, NULL, NULL, "
	"   x'010000002a00000000000000000000000000000000000000', NULL, NULL, "
	"   0, 1, 384, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0),"
	"  (2, 7, 0, 9, 0, 1000, 1000, 5002, NULL, "
	"   x'07000000000000000a00000000000000', NULL, NULL, NULL, "
	"   x'010000002a00000000000000000000000000000000000000', NULL, NULL, "
	"   0, 1, 420, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, 0);";

/* Has the log's table at dbpath a column for the groups? */
static bool has_groups_column(void)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	bool has;

	ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT count(*) FROM "
		"pragma_table_info('cml') WHERE name = 'groups'", -1, &st,
		NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	has = sqlite3_column_int(st, 0) == 1;
	sqlite3_finalize(st);
	ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
	return has;
}

static void sql_at(const char *sql)
{
	sqlite3 *db;

	ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
}

/*
 * A log made before records carried groups gets the column at open, in
 * the open's savepoint; its records read back with none, and go through
 * the optimiser and batches as before.
 */
START_TEST(old_log_gets_groups_column)
{
	static const uint32_t gids[] = { 10, 20 };
	struct lento_rec r = setattr_rec(VOL, 10);
	uint8_t groups[8];
	struct cml_stats st;
	struct glist l;
	struct cml *c;

	sql_at(old_schema);
	ck_assert(!has_groups_column());
	/* An open that fails leaves the log as it was. */
	sql_at("UPDATE cml_meta SET value = 2 WHERE key = 'format'");
	ck_assert_int_eq(cml_open_path(&c, dbpath), -EPROTO);
	ck_assert(!has_groups_column());
	sql_at("UPDATE cml_meta SET value = 1 WHERE key = 'format'");

	c = open_cml();
	ck_assert(has_groups_column());
	l = list(c, VOL);
	ck_assert_uint_eq(l.n, 2);
	for (size_t i = 0; i < l.n; i++) {
		ck_assert_uint_eq(l.v[i].r.recno, i + 1);
		ck_assert_uint_eq(l.v[i].r.op, LENTO_OP_SETATTR);
		ck_assert_uint_eq(l.v[i].r.uid, 1000);
		ck_assert_uint_eq(l.v[i].r.attr.mode, i ? 0644 : 0600);
		ck_assert_uint_eq(l.v[i].r.base_obj.v[0], 42);
		ck_assert_uint_eq(l.v[i].r.ngroups, 0);
	}
	glist_free(&l);
	ck_assert_int_eq(cml_stats(c, VOL, &st), 0);
	ck_assert_uint_eq(st.bytes, 2 * CML_REC_HDR_BYTES);

	/* A new record has its groups; the old two merge, not with it. */
	groups_le(groups, gids, 2);
	r.groups = groups;
	r.ngroups = 2;
	r.attr.mode = 0640;
	ck_assert_int_eq(cml_append(c, &r, 0), 0);
	ck_assert_uint_gt(r.recno, 1024);
	ck_assert_int_eq(cml_optimise(c, VOL, NULL, NULL, NULL), 0);
	cml_close(c);

	/* Open again: the column is there, not added twice. */
	c = open_cml();
	l = list(c, VOL);
	ck_assert_uint_eq(l.n, 2);
	ck_assert_uint_eq(l.v[0].r.recno, 2);
	ck_assert_uint_eq(l.v[0].r.ngroups, 0);
	ck_assert_uint_eq(l.v[1].r.recno, r.recno);
	ck_assert_uint_eq(l.v[1].r.ngroups, 2);
	ck_assert_uint_eq(group_of(&l.v[1], 0), 10);
	ck_assert_uint_eq(group_of(&l.v[1], 1), 20);
	glist_free(&l);
	ck_assert_int_eq(cml_stats(c, VOL, &st), 0);
	ck_assert_uint_eq(st.bytes, 2 * CML_REC_HDR_BYTES + 8);
	cml_close(c);
}
END_TEST

START_TEST(caller_owns_the_database)
{
	sqlite3 *db;
	struct cml *c;
	struct lento_rec r = setattr_rec(VOL, 10);
	struct cml_stats st;

	ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
	ck_assert_int_eq(cml_open(&c, db), 0);
	/* Appends join the caller's transaction, and roll back with it. */
	ck_assert_int_eq(sqlite3_exec(db, "BEGIN", NULL, NULL, NULL), 0);
	ck_assert_int_eq(cml_append(c, &r, 0), 0);
	ck_assert_int_eq(cml_append(c, &r, 0), 0);
	ck_assert_uint_eq(r.recno, 2);
	ck_assert_int_eq(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL), 0);
	ck_assert_int_eq(cml_stats(c, VOL, &st), 0);
	ck_assert_uint_eq(st.records, 0);
	ck_assert_int_eq(cml_append(c, &r, 0), 0);
	ck_assert_uint_eq(r.recno, 1);	/* 1 and 2 were never committed */
	cml_close(c);
	/* The database is still the caller's to use and close. */
	ck_assert_int_eq(sqlite3_exec(db, "SELECT count(*) FROM cml", NULL,
				      NULL, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
}
END_TEST

START_TEST(fids_unique_and_persistent)
{
	struct cml *c = open_cml();
	uint8_t uuid[CML_UUID_SIZE], uuid2[CML_UUID_SIZE], zero[CML_UUID_SIZE];
	uint32_t client, client2;
	struct lento_fid f;

	memset(zero, 0, sizeof(zero));
	ck_assert_int_eq(cml_ident(c, &client, uuid), 0);
	ck_assert_uint_ne(client, 0);
	ck_assert_mem_ne(uuid, zero, sizeof(uuid));
	ck_assert_uint_eq(uuid[6] >> 4, 4);
	/* Before any fid, the server may give the client its id. */
	ck_assert_int_eq(cml_set_client(c, 0), -EINVAL);
	ck_assert_int_eq(cml_set_client(c, 4242), 0);
	client = 4242;
	for (uint64_t i = 1; i <= 500; i++) {
		ck_assert_int_eq(cml_mint_fid(c, VOL, &f), 0);
		ck_assert_uint_eq(f.volume, VOL);
		ck_assert_uint_eq(f.client, client);
		ck_assert_uint_eq(f.seq, i);
	}
	ck_assert_int_eq(cml_mint_fid(c, VOL + 1, &f), 0);
	ck_assert_uint_eq(f.seq, 1);
	ck_assert_int_eq(cml_set_client(c, 77), -EBUSY);
	cml_close(c);

	c = open_cml();
	ck_assert_int_eq(cml_ident(c, &client2, uuid2), 0);
	ck_assert_uint_eq(client2, client);
	ck_assert_mem_eq(uuid2, uuid, sizeof(uuid));
	/* A restart may skip numbers, never go back. */
	ck_assert_int_eq(cml_mint_fid(c, VOL, &f), 0);
	ck_assert_uint_gt(f.seq, 500);
	ck_assert_int_eq(cml_mint_fid(c, VOL + 1, &f), 0);
	ck_assert_uint_gt(f.seq, 1);
	cml_close(c);
}
END_TEST

START_TEST(identities_differ)
{
	struct cml *a, *b;
	uint8_t ua[CML_UUID_SIZE], ub[CML_UUID_SIZE];
	char other[320];

	snprintf(other, sizeof(other), "%s/other.db", tmpdir);
	a = open_cml();
	ck_assert_int_eq(cml_open_path(&b, other), 0);
	cml_ident(a, NULL, ua);
	cml_ident(b, NULL, ub);
	ck_assert_mem_ne(ua, ub, sizeof(ua));
	cml_close(a);
	cml_close(b);
	remove_db(other);
}
END_TEST

struct took {
	uint64_t recno[64];
	int n;
};

static int take(void *arg, const struct lento_rec *rec, uint64_t body)
{
	struct took *t = arg;

	(void)body;
	t->recno[t->n++] = rec->recno;
	return 0;
}

static int refuse(void *arg, const struct lento_rec *rec, uint64_t body)
{
	(void)arg;
	(void)rec;
	(void)body;
	return -ECONNRESET;
}

START_TEST(batches_and_acks)
{
	struct cml *c = open_cml();
	struct took t = { 0 };
	struct cml_stats st;
	struct lento_rec r;

	/* Records 1..10 alternate between two volumes; 5 and 7 are STOREs. */
	for (int i = 1; i <= 10; i++) {
		r = setattr_rec(i % 2 ? VOL : VOL + 1, 10 + (uint64_t)i);
		if (i == 5 || i == 7) {
			r.op = LENTO_OP_STORE;
			r.attr.valid = LENTO_A_SIZE;
			r.attr.size = 1000;
		}
		ck_assert_int_eq(cml_append(c, &r, r.op == LENTO_OP_STORE ?
					    1000 : 0), 0);
	}
	ck_assert_int_eq(cml_stats(c, VOL, &st), 0);
	ck_assert_uint_eq(st.records, 5);
	ck_assert_uint_eq(st.bytes, 5 * CML_REC_HDR_BYTES + 2000);
	ck_assert_uint_eq(st.shipped, 0);
	ck_assert_int_eq(st.oldest_ns, 5011);

	/* A refused batch ships nothing. */
	ck_assert_int_eq(cml_batch(c, VOL, 0, 0, refuse, NULL), -ECONNRESET);
	ck_assert_int_eq(cml_batch(c, VOL, 2, 0, take, &t), 2);
	ck_assert_uint_eq(t.recno[0], 1);
	ck_assert_uint_eq(t.recno[1], 3);
	/* By bytes: record 5 alone passes the limit but goes, alone. */
	ck_assert_int_eq(cml_batch(c, VOL, 0, 200, take, &t), 1);
	ck_assert_uint_eq(t.recno[2], 5);
	ck_assert_int_eq(cml_batch(c, VOL, 0, 1500, take, &t), 2);
	ck_assert_uint_eq(t.recno[3], 7);
	ck_assert_uint_eq(t.recno[4], 9);
	ck_assert_int_eq(cml_batch(c, VOL, 0, 0, take, &t), 0);
	ck_assert_int_eq(cml_stats(c, VOL, &st), 0);
	ck_assert_uint_eq(st.shipped, 5);

	/* The server applied up to 5; the rest goes again. */
	ck_assert_int_eq(cml_ack(c, VOL, 5), 3);
	ck_assert_int_eq(cml_requeue(c, VOL), 0);
	t.n = 0;
	ck_assert_int_eq(cml_batch(c, VOL, 0, 0, take, &t), 2);
	ck_assert_uint_eq(t.recno[0], 7);
	ck_assert_uint_eq(t.recno[1], 9);
	ck_assert_int_eq(cml_stats(c, VOL, &st), 0);
	ck_assert_uint_eq(st.records, 2);
	ck_assert_uint_eq(st.bytes, 2 * CML_REC_HDR_BYTES + 1000);
	ck_assert_int_eq(st.oldest_ns, 5017);

	/* The other volume was not touched. */
	ck_assert_int_eq(cml_stats(c, VOL + 1, &st), 0);
	ck_assert_uint_eq(st.records, 5);
	ck_assert_uint_eq(st.shipped, 0);
	ck_assert_int_eq(cml_ack(c, VOL, UINT64_MAX), 2);
	ck_assert_int_eq(cml_stats(c, VOL, &st), 0);
	ck_assert_uint_eq(st.records, 0);
	ck_assert_uint_eq(st.bytes, 0);
	ck_assert_int_eq(st.oldest_ns, 0);
	cml_close(c);

	/* Shipped is persistent. */
	c = open_cml();
	t.n = 0;
	ck_assert_int_eq(cml_batch(c, VOL + 1, 1, 0, take, &t), 1);
	cml_close(c);
	c = open_cml();
	ck_assert_int_eq(cml_batch(c, VOL + 1, 0, 0, take, &t), 4);
	ck_assert_uint_eq(t.recno[0], 2);
	ck_assert_uint_eq(t.recno[1], 4);
	cml_close(c);
}
END_TEST

/* Optimiser: the four --------------------------------------- */

static struct cml *fast_cml(void)
{
	struct cml *c = open_cml();

	exec(c, "PRAGMA synchronous = OFF");
	return c;
}

static bool vv_same(const struct lento_vv *a, const struct lento_vv *b)
{
	return a->n == b->n && !memcmp(a->v, b->v, a->n * sizeof(a->v[0]));
}

/* What a person settling a conflict does: drop records, rebase an object. */
START_TEST(drop_and_rebase)
{
	struct cml *c = open_cml();
	struct lento_rec r, u;
	struct lento_vv now = { .n = 2, .v = { 42, 7 } };
	struct took t = { 0 };
	struct glist l;

	for (uint64_t seq = 10; seq < 13; seq++) {
		r = setattr_rec(VOL, seq);
		ck_assert_int_eq(cml_append(c, &r, 0), 0);
	}
	/* An unlink of object 11 from directory 10: both slots rebase. */
	memset(&u, 0, sizeof(u));
	u.op = LENTO_OP_UNLINK;
	u.dir = (struct lento_fid){ VOL, 0, 10 };
	u.obj = (struct lento_fid){ VOL, 0, 11 };
	u.base_dir.n = u.base_obj.n = 1;
	snprintf(u.name, sizeof(u.name), "x");
	ck_assert_int_eq(cml_append(c, &u, 0), 0);
	ck_assert_int_eq(cml_rebase(c, VOL, &u.obj, &now), 2);
	ck_assert_int_eq(cml_rebase(c, VOL + 1, &u.obj, &now), 0);
	l = list(c, VOL);
	ck_assert_uint_eq(l.n, 4);
	ck_assert(!vv_same(&l.v[0].r.base_obj, &now));
	ck_assert(vv_same(&l.v[1].r.base_obj, &now));
	ck_assert(!vv_same(&l.v[3].r.base_dir, &now));
	ck_assert(vv_same(&l.v[3].r.base_obj, &now));
	glist_free(&l);
	/* Dropped: gone, once; a shipped record is not dropped. */
	ck_assert_int_eq(cml_drop(c, 2), 0);
	ck_assert_int_eq(cml_drop(c, 2), -ENOENT);
	ck_assert_int_eq(cml_batch(c, VOL, 1, 0, take, &t), 1);
	ck_assert_uint_eq(t.recno[0], 1);
	ck_assert_int_eq(cml_drop(c, 1), -ENOENT);
	ck_assert_int_eq(cml_rebase(c, VOL, &u.obj, &now), 1);
	l = list(c, VOL);
	ck_assert_uint_eq(l.n, 3);
	ck_assert_uint_eq(l.v[1].r.recno, 3);
	glist_free(&l);
	cml_close(c);
}
END_TEST

START_TEST(thousand_files_ship_nothing)
{
	struct cml *c = fast_cml();
	struct outcome res;
	struct gen g;
	char name[32];

	g_init(&g, VOL, 1);
	for (int i = 0; i < 1000; i++) {
		uint32_t x;

		snprintf(name, sizeof(name), "f%d", i);
		x = g_make(&g, LENTO_OP_CREATE, S1, name);
		g_store(&g, x, 4096, STORE_ATTRS);
	}
	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		g_remove(&g, S1, name);
	}
	strcpy(ctx, "1000 files");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.st.before, 3000);
	ck_assert_uint_eq(res.out.n, 0);
	ck_assert_uint_eq(res.st.cancelled, 3000);
	glist_free(&res.out);
	g_free(&g);
	cml_close(c);
}
END_TEST

/* Remove the tree under @dir's entry @name, depth first (rm -rf). */
static void rm_rf(struct gen *g, uint32_t dir, const char *name)
{
	uint32_t x = g_entry(g, dir, name);

	while (g->m.o[x].type == LENTO_T_DIR && g->m.o[x].nent) {
		char n[24];

		strcpy(n, g->m.o[x].ent[g->m.o[x].nent - 1].name);
		rm_rf(g, x, n);
	}
	g_remove(g, dir, name);
}

START_TEST(tar_unpack_then_rm_ships_nothing)
{
	struct cml *c = fast_cml();
	uint32_t dirs[300], top, files = 0;
	struct outcome res;
	struct gen g;
	char name[32];

	g_init(&g, VOL, 2);
	top = g_make(&g, LENTO_OP_MKDIR, S2, "tree");
	/* 300 directories, 10 levels of 30, five files each. */
	for (int i = 0; i < 300; i++) {
		uint32_t parent = i < 30 ? top : dirs[i - 30];

		snprintf(name, sizeof(name), "d%d", i);
		dirs[i] = g_make(&g, LENTO_OP_MKDIR, parent, name);
		for (int j = 0; j < 5; j++) {
			uint32_t x;

			snprintf(name, sizeof(name), "f%d", j);
			x = g_make(&g, j == 4 && i % 10 == 0 ?
				   LENTO_OP_SYMLINK : LENTO_OP_CREATE,
				   dirs[i], name);
			files++;
			if (g.m.o[x].type != LENTO_T_REG)
				continue;
			g_store(&g, x, 512 * (uint64_t)j, STORE_ATTRS);
			g_setattr(&g, x, LENTO_A_MODE, 0600, 0);
			g_setattr(&g, x, LENTO_A_ATIME | LENTO_A_MTIME, 0, 0);
			if (j == 2)
				g_xattr(&g, x, 1, true, 5);
		}
	}
	/* tar sets directory times last, deepest first. */
	for (int i = 299; i >= 0; i--)
		g_setattr(&g, dirs[i], LENTO_A_ATIME | LENTO_A_MTIME, 0, 0);
	ck_assert_uint_eq(files, 1500);
	rm_rf(&g, S2, "tree");
	strcpy(ctx, "tar and rm -rf");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_gt(res.st.before, 7000);
	ck_assert_uint_eq(res.out.n, 0);
	glist_free(&res.out);
	g_free(&g);
	cml_close(c);
}
END_TEST

START_TEST(fifty_saves_ship_one_store)
{
	struct cml *c = fast_cml();
	struct outcome res;
	struct gen g;
	uint32_t x;

	/* A server file saved in place 50 times: truncate, write, close. */
	g_init(&g, VOL, 3);
	for (int i = 0; i < 50; i++) {
		g_truncate(&g, FA, 0);
		g_store(&g, FA, 100 + (uint64_t)i, STORE_ATTRS);
	}
	strcpy(ctx, "50 saves");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 1);
	ck_assert_uint_eq(res.out.v[0].r.op, LENTO_OP_STORE);
	ck_assert_uint_eq(res.out.v[0].r.attr.size, 149);
	ck_assert_uint_eq(res.out.v[0].r.recno, 100);
	ck_assert_uint_eq(res.st.stores, 49);
	ck_assert_uint_eq(res.st.folded, 50);
	glist_free(&res.out);
	g_free(&g);

	/* A new file saved 50 times: its create and one store. */
	g_init(&g, VOL + 1, 3);
	x = g_make(&g, LENTO_OP_CREATE, S1, "new");
	for (int i = 0; i < 50; i++)
		g_store(&g, x, 10 + (uint64_t)i, STORE_ATTRS);
	strcpy(ctx, "50 saves of a new file");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 2);
	ck_assert_uint_eq(res.out.v[0].r.op, LENTO_OP_CREATE);
	ck_assert_uint_eq(res.out.v[1].r.op, LENTO_OP_STORE);
	glist_free(&res.out);
	g_free(&g);
	cml_close(c);
}
END_TEST

START_TEST(rename_chain_ships_one_rename)
{
	struct cml *c = fast_cml();
	struct outcome res;
	struct gen g;
	const struct lento_rec *r;

	g_init(&g, VOL, 4);
	g_rename(&g, ROOT, "a", ROOT, "b", 0);
	g_rename(&g, ROOT, "b", ROOT, "c2", 0);
	strcpy(ctx, "a->b->c");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 1);
	r = &res.out.v[0].r;
	ck_assert_uint_eq(r->op, LENTO_OP_RENAME);
	ck_assert_str_eq(r->name, "a");
	ck_assert_str_eq(r->name2, "c2");
	ck_assert_uint_eq(r->recno, 1);
	ck_assert_uint_eq(res.st.renames, 1);
	glist_free(&res.out);
	g_free(&g);

	/* Across directories, over a file at the end, in four steps. */
	g_init(&g, VOL + 1, 4);
	g_rename(&g, ROOT, "a", S1, "x", LENTO_R_NOREPLACE);
	g_store(&g, FA, 5, STORE_ATTRS);
	g_rename(&g, S1, "x", S2, "y", 0);
	g_rename(&g, S2, "y", S3, "z", 0);
	g_rename(&g, S3, "z", S1, "b", 0);	/* over /s1/b */
	strcpy(ctx, "a->x->y->z->b");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 2);
	r = &res.out.v[0].r;
	ck_assert_uint_eq(r->op, LENTO_OP_RENAME);
	ck_assert_str_eq(r->name, "a");
	ck_assert_str_eq(r->name2, "b");
	ck_assert(lento_fid_eq(&r->dir2, &g.m.o[S1].fid));
	ck_assert(lento_fid_eq(&r->target, &g.init.o[FB].fid));
	ck_assert_uint_eq(r->flags, LENTO_R_LASTLINK);
	glist_free(&res.out);
	g_free(&g);
	cml_close(c);
}
END_TEST

/* Optimiser: where optimising would be wrong --------------------------- */

START_TEST(link_keeps_both_names)
{
	struct cml *c = fast_cml();
	struct outcome res;
	struct gen g;
	uint32_t x;

	/* A file created here, linked, its first name removed. */
	g_init(&g, VOL, 5);
	x = g_make(&g, LENTO_OP_CREATE, S1, "x");
	g_store(&g, x, 10, STORE_ATTRS);
	g_link(&g, x, S2, "y");
	g_remove(&g, S1, "x");
	strcpy(ctx, "create, link, unlink");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 4);
	glist_free(&res.out);
	g_free(&g);

	/* A server file with two names loses one: its store stays. */
	g_init(&g, VOL + 1, 5);
	g_store(&g, FC, 10, STORE_ATTRS);
	g_remove(&g, ROOT, "c");
	strcpy(ctx, "server file with two links");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 2);
	ck_assert_uint_eq(res.out.v[0].r.op, LENTO_OP_STORE);
	ck_assert_uint_eq(res.out.v[1].r.flags, 0);
	glist_free(&res.out);
	g_free(&g);

	/* Linked and both names removed: everything goes. */
	g_init(&g, VOL + 2, 5);
	x = g_make(&g, LENTO_OP_CREATE, S1, "x");
	g_link(&g, x, S2, "y");
	g_store(&g, x, 10, STORE_ATTRS);
	g_remove(&g, S1, "x");
	g_remove(&g, S2, "y");
	strcpy(ctx, "create, link, both unlinked");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 0);
	glist_free(&res.out);
	g_free(&g);
	cml_close(c);
}
END_TEST

START_TEST(unlink_of_server_object_stays)
{
	struct cml *c = fast_cml();
	struct outcome res;
	struct gen g;

	g_init(&g, VOL, 6);
	g_store(&g, FA, 10, STORE_ATTRS);
	g_setattr(&g, FA, LENTO_A_MODE, 0600, 0);
	g_xattr(&g, FA, 0, true, 1);
	g_store(&g, FA, 20, STORE_ATTRS);
	g_remove(&g, ROOT, "a");
	strcpy(ctx, "server file changed, removed");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 1);
	ck_assert_uint_eq(res.out.v[0].r.op, LENTO_OP_UNLINK);
	ck_assert_uint_eq(res.out.v[0].r.flags, LENTO_R_LASTLINK);
	ck_assert_uint_eq(res.st.moot + res.st.stores, 4);
	glist_free(&res.out);
	g_free(&g);

	/* Whether the name was the last is not known: nothing moot. */
	g_init(&g, VOL + 1, 6);
	g.lastlink = false;
	g_store(&g, FA, 10, STORE_ATTRS);
	g_remove(&g, ROOT, "a");
	strcpy(ctx, "server file removed, last name not known");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 2);
	glist_free(&res.out);
	g_free(&g);

	/* A chown stays: the unlink's permission may depend on the owner. */
	g_init(&g, VOL + 2, 6);
	g_store(&g, FA, 10, STORE_ATTRS);
	g_setattr(&g, FA, LENTO_A_UID, 0, 0);
	g_setattr(&g, FA, LENTO_A_MODE, 0600, 0);
	g_remove(&g, ROOT, "a");
	strcpy(ctx, "server file chowned, removed");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 3);
	ck_assert_uint_eq(res.out.v[0].r.op, LENTO_OP_STORE);
	ck_assert_uint_eq(res.out.v[1].r.op, LENTO_OP_SETATTR);
	ck_assert_uint_eq(res.out.v[1].r.attr.valid, LENTO_A_UID);
	glist_free(&res.out);
	g_free(&g);

	/* A directory of the server: its attributes go, its rmdir stays. */
	g_init(&g, VOL + 3, 6);
	g_remove(&g, S3, "e");
	g_setattr(&g, S3, LENTO_A_MODE, 0700, 0);
	g_remove(&g, S1, "s3");
	strcpy(ctx, "server directory emptied, removed");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 2);
	ck_assert_uint_eq(res.out.v[1].r.op, LENTO_OP_RMDIR);
	glist_free(&res.out);
	g_free(&g);
	cml_close(c);
}
END_TEST

START_TEST(chain_not_collapsed_when_a_name_depends)
{
	struct cml *c = fast_cml();
	struct outcome res;
	struct gen g;
	uint32_t y;

	/*
	 * A directory moved twice while an ancestor of its final place went
	 * into it and out again: moved at once, it would make a loop.
	 */
	g_init(&g, VOL + 7, 7);
	g_rename(&g, ROOT, "s2", ROOT, "x", 0);
	g_rename(&g, ROOT, "s1", S2, "w", 0);
	g_rename(&g, S2, "w", ROOT, "s1", 0);
	g_rename(&g, ROOT, "x", S3, "x", 0);
	strcpy(ctx, "directory chain around a loop");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 4);
	glist_free(&res.out);
	g_free(&g);

	/* The final name is used between the two renames. */
	g_init(&g, VOL, 7);
	g_rename(&g, ROOT, "a", ROOT, "b", 0);
	g_link(&g, FB, ROOT, "z");
	g_remove(&g, ROOT, "z");
	g_rename(&g, ROOT, "b", ROOT, "z", 0);
	strcpy(ctx, "final name used between");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 4);
	ck_assert_uint_eq(res.st.renames, 0);
	glist_free(&res.out);
	g_free(&g);

	/*
	 * Used by a new file that then moves away: its create goes to where
	 * it ends, and then nothing uses the name between.
	 */
	g_init(&g, VOL + 6, 7);
	g_rename(&g, ROOT, "a", ROOT, "b", 0);
	y = g_make(&g, LENTO_OP_CREATE, ROOT, "z");
	g_store(&g, y, 1, STORE_ATTRS);
	g_rename(&g, ROOT, "z", S1, "z", 0);
	g_rename(&g, ROOT, "b", ROOT, "z", 0);
	strcpy(ctx, "final name used by a file that moves away");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 3);
	ck_assert_uint_eq(res.out.v[0].r.op, LENTO_OP_RENAME);
	ck_assert_str_eq(res.out.v[0].r.name2, "z");
	ck_assert_uint_eq(res.out.v[1].r.op, LENTO_OP_CREATE);
	ck_assert(lento_fid_eq(&res.out.v[1].r.dir, &g.m.o[S1].fid));
	glist_free(&res.out);
	g_free(&g);

	/* The intermediate name taken by a new object: two objects, no chain. */
	g_init(&g, VOL + 1, 7);
	g_rename(&g, ROOT, "a", ROOT, "b", 0);
	g_remove(&g, ROOT, "b");
	y = g_make(&g, LENTO_OP_CREATE, ROOT, "b");
	g_rename(&g, ROOT, "b", ROOT, "z", 0);
	strcpy(ctx, "intermediate name re-created");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 3);
	for (size_t i = 0; i < res.out.n; i++)
		ck_assert(!(res.out.v[i].r.op == LENTO_OP_RENAME &&
			    !strcmp(res.out.v[i].r.name2, "z")));
	glist_free(&res.out);
	g_free(&g);

	/* A link of the renamed object between. */
	g_init(&g, VOL + 2, 7);
	g_rename(&g, ROOT, "a", ROOT, "b", 0);
	g_link(&g, FA, S2, "l");
	g_rename(&g, ROOT, "b", ROOT, "z", 0);
	strcpy(ctx, "link between");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 3);
	glist_free(&res.out);
	g_free(&g);

	/* Back to the first name: left alone. */
	g_init(&g, VOL + 3, 7);
	g_rename(&g, ROOT, "a", ROOT, "b", 0);
	g_rename(&g, ROOT, "b", ROOT, "a", 0);
	strcpy(ctx, "a->b->a");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 2);
	glist_free(&res.out);
	g_free(&g);

	/* A directory moved with another rename between: left alone. */
	g_init(&g, VOL + 4, 7);
	g_rename(&g, S1, "s3", ROOT, "t", 0);
	g_rename(&g, ROOT, "a", S2, "a", 0);
	g_rename(&g, ROOT, "t", S2, "t", 0);
	strcpy(ctx, "directory chain with a rename between");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 3);
	glist_free(&res.out);
	g_free(&g);

	/*
	 * A directory renamed in its parent, made writable, then moved out:
	 * at the first rename's place the move would need the write
	 * permission it did not have yet. Left alone; a touch is no such
	 * change.
	 */
	g_init(&g, VOL + 9, 7);
	g_rename(&g, ROOT, "s2", ROOT, "t", 0);
	g_setattr(&g, S2, LENTO_A_MODE | LENTO_A_CTIME, 0755, 0);
	g_rename(&g, ROOT, "t", S1, "t", 0);
	strcpy(ctx, "directory chain across a chmod");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 3);
	ck_assert_uint_eq(res.st.renames, 0);
	glist_free(&res.out);
	g_free(&g);
	g_init(&g, VOL + 10, 7);
	g_rename(&g, ROOT, "s2", ROOT, "t", 0);
	g_setattr(&g, S2, LENTO_A_MTIME | LENTO_A_CTIME, 0, 0);
	g_rename(&g, ROOT, "t", S1, "t", 0);
	strcpy(ctx, "directory chain across a touch");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 2);
	ck_assert_uint_eq(res.st.renames, 1);
	glist_free(&res.out);
	g_free(&g);
	/* Out of its directory, then over that (by then empty) directory. */
	g_init(&g, VOL + 8, 7);
	g_remove(&g, S1, "b");
	g_rename(&g, S1, "s3", ROOT, "t", 0);
	g_rename(&g, ROOT, "t", ROOT, "s1", 0);
	strcpy(ctx, "over its former directory");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 3);
	glist_free(&res.out);
	g_free(&g);

	/* The create's final directory is made between: not merged. */
	g_init(&g, VOL + 5, 7);
	y = g_make(&g, LENTO_OP_CREATE, ROOT, "x");
	g_make(&g, LENTO_OP_MKDIR, ROOT, "d");
	g_rename(&g, ROOT, "x", g.m.n - 1, "x", 0);
	strcpy(ctx, "create into a directory made later");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 3);
	glist_free(&res.out);
	g_free(&g);
	(void)y;
	cml_close(c);
}
END_TEST

START_TEST(exchange_not_collapsed)
{
	struct cml *c = fast_cml();
	struct outcome res;
	struct gen g;
	uint32_t x;

	g_init(&g, VOL, 8);
	g_rename(&g, ROOT, "a", ROOT, "b", 0);
	g_rename(&g, ROOT, "b", S2, "d", LENTO_R_EXCHANGE);
	g_rename(&g, S2, "d", S2, "e", 0);
	strcpy(ctx, "chain through an exchange");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 3);
	glist_free(&res.out);
	g_free(&g);

	/*
	 * A directory and a file with two names swapped: the file is no
	 * directory, and losing one name is not losing its last.
	 */
	g_init(&g, VOL + 2, 8);
	g.lastlink = false;
	g_make(&g, LENTO_OP_CREATE, S1, "n");	/* s1 is a directory */
	g_rename(&g, ROOT, "s1", ROOT, "c", LENTO_R_EXCHANGE);
	g_setattr(&g, FC, LENTO_A_MODE, 0600, 0);
	g_rename(&g, S2, "d", S2, "c", 0);
	strcpy(ctx, "exchange of a directory and a file");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 4);
	glist_free(&res.out);
	g_free(&g);

	/* A new file exchanged with a server file, then removed: kept. */
	g_init(&g, VOL + 1, 8);
	x = g_make(&g, LENTO_OP_CREATE, S1, "x");
	g_rename(&g, S1, "x", ROOT, "a", LENTO_R_EXCHANGE);
	g_store(&g, x, 3, STORE_ATTRS);
	g_remove(&g, ROOT, "a");
	strcpy(ctx, "exchange with a new file");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_ge(res.out.n, 3);
	ck_assert_uint_eq(count_op(&res.out, LENTO_OP_CREATE), 1);
	ck_assert_uint_eq(count_op(&res.out, LENTO_OP_RENAME), 1);
	glist_free(&res.out);
	g_free(&g);
	cml_close(c);
}
END_TEST

START_TEST(shipped_records_untouched)
{
	struct cml *c = fast_cml();
	struct outcome res;
	struct gen g;
	uint32_t x;

	/* The create went out: the server may have the file. */
	g_init(&g, VOL, 9);
	x = g_make(&g, LENTO_OP_CREATE, S1, "x");
	g_store(&g, x, 1, STORE_ATTRS);
	g_store(&g, x, 2, STORE_ATTRS);
	g_store(&g, x, 3, STORE_ATTRS);
	g_remove(&g, S1, "x");
	strcpy(ctx, "create shipped");
	run_log(c, &g, 2, false, &res);
	ck_assert_uint_eq(res.out.n, 3);
	ck_assert_uint_eq(res.out.v[0].r.op, LENTO_OP_CREATE);
	ck_assert_uint_eq(res.out.v[1].r.op, LENTO_OP_STORE);
	ck_assert_uint_eq(res.out.v[2].r.op, LENTO_OP_UNLINK);
	glist_free(&res.out);
	g_free(&g);
	cml_close(c);
}
END_TEST

/* Optimiser: the rest -------------------------------------------------- */

START_TEST(create_then_rename)
{
	struct cml *c = fast_cml();
	struct outcome res;
	struct gen g;
	uint32_t x;

	g_init(&g, VOL, 10);
	x = g_make(&g, LENTO_OP_CREATE, ROOT, ".tmp");
	g_store(&g, x, 7, STORE_ATTRS);
	g_rename(&g, ROOT, ".tmp", S1, "final", 0);
	g_rename(&g, S1, "final", S2, "final2", 0);
	strcpy(ctx, "create, rename, rename");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 2);
	ck_assert_uint_eq(res.out.v[0].r.op, LENTO_OP_CREATE);
	ck_assert_str_eq(res.out.v[0].r.name, "final2");
	ck_assert(lento_fid_eq(&res.out.v[0].r.dir, &g.m.o[S2].fid));
	ck_assert_uint_eq(res.st.creates, 2);
	glist_free(&res.out);
	g_free(&g);

	/* Editor saves: write a temporary file, rename it over the file. */
	g_init(&g, VOL + 1, 10);
	for (int i = 0; i < 5; i++) {
		x = g_make(&g, LENTO_OP_CREATE, ROOT, ".a.swp");
		g_store(&g, x, 50 + (uint64_t)i, STORE_ATTRS);
		g_setattr(&g, x, LENTO_A_MODE, 0644, 0);
		g_rename(&g, ROOT, ".a.swp", ROOT, "a", 0);
	}
	strcpy(ctx, "five saves by rename");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 4);
	ck_assert_uint_eq(res.out.v[0].r.op, LENTO_OP_UNLINK);
	ck_assert(lento_fid_eq(&res.out.v[0].r.obj, &g.init.o[FA].fid));
	ck_assert_uint_eq(res.out.v[1].r.op, LENTO_OP_CREATE);
	ck_assert_str_eq(res.out.v[1].r.name, "a");
	ck_assert_uint_eq(res.out.v[2].r.op, LENTO_OP_STORE);
	ck_assert_uint_eq(res.out.v[3].r.op, LENTO_OP_SETATTR);
	glist_free(&res.out);
	g_free(&g);
	cml_close(c);
}
END_TEST

START_TEST(setattrs_coalesce_soundly)
{
	struct cml *c = fast_cml();
	struct outcome res;
	struct gen g;

	/* chmod, then utimes: one SETATTR with both. */
	g_init(&g, VOL, 11);
	g_setattr(&g, FA, LENTO_A_MODE, 0600, 0);
	g_setattr(&g, FA, LENTO_A_ATIME | LENTO_A_MTIME, 0, 0);
	g_setattr(&g, FA, LENTO_A_MODE | LENTO_A_CTIME, 0640, 0);
	strcpy(ctx, "setattrs");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 1);
	ck_assert_uint_eq(res.out.v[0].r.attr.valid, LENTO_A_MODE |
			  LENTO_A_ATIME | LENTO_A_MTIME | LENTO_A_CTIME);
	ck_assert_uint_eq(res.out.v[0].r.attr.mode, 0640);
	ck_assert_uint_eq(res.st.setattrs, 2);
	glist_free(&res.out);
	g_free(&g);

	/* Shrink then grow: not one truncate (it would not zero-fill). */
	g_init(&g, VOL + 1, 11);
	g_truncate(&g, FA, 10);
	g_truncate(&g, FA, 20);
	strcpy(ctx, "truncates");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 2);
	glist_free(&res.out);
	g_free(&g);

	/* ... but shrinking below both is one truncate. */
	g_init(&g, VOL + 4, 11);
	g_truncate(&g, FA, 10);
	g_truncate(&g, FA, 20);
	g_truncate(&g, FA, 5);
	strcpy(ctx, "truncates, then smaller");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 1);
	ck_assert_uint_eq(res.out.v[0].r.attr.size, 5);
	glist_free(&res.out);
	g_free(&g);

	/* A store between, or another uid: not merged. */
	g_init(&g, VOL + 2, 11);
	g_setattr(&g, FA, LENTO_A_MODE, 0666, 0);
	g_store(&g, FA, 3, STORE_ATTRS);
	g_setattr(&g, FA, LENTO_A_MODE, 0600, 0);
	g.uid = 0;
	g_setattr(&g, FA, LENTO_A_GID, 0, 0);
	strcpy(ctx, "setattrs apart");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 4);
	glist_free(&res.out);
	g_free(&g);

	/* A STORE without every attribute of the one before keeps it. */
	g_init(&g, VOL + 3, 11);
	g_store(&g, FA, 3, STORE_ATTRS);
	g_store(&g, FA, 4, LENTO_A_SIZE | LENTO_A_MTIME);
	strcpy(ctx, "stores of different attributes");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 2);
	glist_free(&res.out);
	g_free(&g);
	cml_close(c);
}
END_TEST

/*
 * Records merge only when one caller made them: the same uid, gid and
 * supplementary groups (the server checks the merged record once, as its
 * maker's); the survivor keeps its groups.
 */
START_TEST(merges_need_the_same_groups)
{
	static const uint32_t ga[] = { 100, 200 }, gb[] = { 100, 300 };
	struct cml *c = fast_cml();
	struct outcome res;
	struct gen g;

	/* Two chmods by one caller in groups 100 and 200: one record. */
	g_init(&g, VOL, 12);
	memcpy(g.groups, ga, sizeof(ga));
	g.ngroups = 2;
	g_setattr(&g, FA, LENTO_A_MODE, 0600, 0);
	g_setattr(&g, FA, LENTO_A_MODE, 0660, 0);
	strcpy(ctx, "setattrs, same groups");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 1);
	ck_assert_uint_eq(res.out.v[0].r.attr.mode, 0660);
	ck_assert_uint_eq(res.out.v[0].r.ngroups, 2);
	ck_assert_uint_eq(group_of(&res.out.v[0], 0), 100);
	ck_assert_uint_eq(group_of(&res.out.v[0], 1), 200);
	ck_assert_uint_eq(res.st.setattrs, 1);
	glist_free(&res.out);
	g_free(&g);

	/* The same uid and gid in other groups, as many: two records. */
	g_init(&g, VOL + 1, 12);
	memcpy(g.groups, ga, sizeof(ga));
	g.ngroups = 2;
	g_setattr(&g, FA, LENTO_A_MODE, 0600, 0);
	memcpy(g.groups, gb, sizeof(gb));
	g_setattr(&g, FA, LENTO_A_MODE, 0660, 0);
	strcpy(ctx, "setattrs, other groups");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 2);
	ck_assert_uint_eq(group_of(&res.out.v[0], 1), 200);
	ck_assert_uint_eq(group_of(&res.out.v[1], 1), 300);
	ck_assert_uint_eq(res.st.setattrs, 0);
	glist_free(&res.out);
	g_free(&g);

	/* Fewer groups, the first the same: two records. */
	g_init(&g, VOL + 2, 12);
	memcpy(g.groups, ga, sizeof(ga));
	g.ngroups = 2;
	g_setattr(&g, FA, LENTO_A_MODE, 0600, 0);
	g.ngroups = 1;
	g_setattr(&g, FA, LENTO_A_MODE, 0660, 0);
	strcpy(ctx, "setattrs, fewer groups");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 2);
	ck_assert_uint_eq(res.out.v[0].r.ngroups, 2);
	ck_assert_uint_eq(res.out.v[1].r.ngroups, 1);
	glist_free(&res.out);
	g_free(&g);

	/* A rename chain in one set of groups: one rename, its groups. */
	g_init(&g, VOL + 3, 12);
	memcpy(g.groups, gb, sizeof(gb));
	g.ngroups = 2;
	g_rename(&g, ROOT, "a", ROOT, "b", 0);
	g_rename(&g, ROOT, "b", S1, "x", 0);
	strcpy(ctx, "renames, same groups");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 1);
	ck_assert_uint_eq(res.st.renames, 1);
	ck_assert_uint_eq(res.out.v[0].r.ngroups, 2);
	ck_assert_uint_eq(group_of(&res.out.v[0], 1), 300);
	glist_free(&res.out);
	g_free(&g);

	/* ... and in two: two renames. */
	g_init(&g, VOL + 4, 12);
	memcpy(g.groups, gb, sizeof(gb));
	g.ngroups = 2;
	g_rename(&g, ROOT, "a", ROOT, "b", 0);
	memcpy(g.groups, ga, sizeof(ga));
	g_rename(&g, ROOT, "b", S1, "x", 0);
	strcpy(ctx, "renames, other groups");
	run_log(c, &g, 0, true, &res);
	ck_assert_uint_eq(res.out.n, 2);
	ck_assert_uint_eq(res.st.renames, 0);
	glist_free(&res.out);
	g_free(&g);
	cml_close(c);
}
END_TEST

/* Give record @i of @g slot @s's base version counter @v. */
static void set_base(struct gen *g, size_t i, int s, uint64_t v)
{
	struct lento_rec *r = &g->recs.v[i].r;
	struct lento_vv *b[] = { &r->base_dir, &r->base_obj, &r->base_dir2,
				 &r->base_target };

	b[s]->n = 1;
	b[s]->v[0] = v;
}

START_TEST(survivors_take_the_earliest_base)
{
	struct cml *c = fast_cml();
	struct outcome res;
	struct gen g;
	const struct lento_rec *r;
	uint32_t x;

	/* Stores and setattrs: the first one's base. */
	g_init(&g, VOL, 12);
	g_store(&g, FA, 1, STORE_ATTRS);
	g_store(&g, FA, 2, STORE_ATTRS);
	g_truncate(&g, FA, 0);
	g_store(&g, FA, 3, STORE_ATTRS);
	g_setattr(&g, FB, LENTO_A_MODE, 0600, 0);
	g_setattr(&g, FB, LENTO_A_MTIME, 0, 0);
	for (size_t i = 0; i < g.recs.n; i++)
		set_base(&g, i, 1, 11 + i);
	strcpy(ctx, "bases of stores");
	run_log(c, &g, 0, false, &res);
	ck_assert_uint_eq(res.out.n, 2);
	ck_assert_uint_eq(res.out.v[0].r.base_obj.v[0], 11);
	ck_assert_uint_eq(res.out.v[1].r.base_obj.v[0], 15);
	glist_free(&res.out);
	g_free(&g);

	/* Renames: each directory's base from the first record naming it. */
	g_init(&g, VOL + 1, 12);
	g_rename(&g, ROOT, "a", S1, "x", 0);
	g_rename(&g, S1, "x", S2, "y", 0);
	g_rename(&g, S2, "y", ROOT, "z", 0);
	set_base(&g, 0, 0, 21);		/* / */
	set_base(&g, 0, 1, 22);		/* a */
	set_base(&g, 0, 2, 23);		/* s1 */
	set_base(&g, 1, 0, 24);
	set_base(&g, 1, 1, 25);
	set_base(&g, 1, 2, 26);		/* s2 */
	set_base(&g, 2, 0, 27);
	set_base(&g, 2, 1, 28);
	set_base(&g, 2, 2, 29);		/* / again */
	strcpy(ctx, "bases of a chain");
	run_log(c, &g, 0, false, &res);
	ck_assert_uint_eq(res.out.n, 1);
	r = &res.out.v[0].r;
	ck_assert_uint_eq(r->base_dir.v[0], 21);
	ck_assert_uint_eq(r->base_obj.v[0], 22);
	ck_assert_uint_eq(r->base_dir2.v[0], 21);
	ck_assert_uint_eq(r->base_target.n, 0);
	glist_free(&res.out);
	g_free(&g);

	g_init(&g, VOL + 2, 12);
	g_rename(&g, ROOT, "a", S1, "x", 0);
	g_rename(&g, S1, "x", S2, "y", 0);
	set_base(&g, 0, 2, 31);
	set_base(&g, 1, 2, 32);
	strcpy(ctx, "bases of a chain to a new directory");
	run_log(c, &g, 0, false, &res);
	ck_assert_uint_eq(res.out.n, 1);
	ck_assert_uint_eq(res.out.v[0].r.base_dir2.v[0], 32);
	glist_free(&res.out);
	g_free(&g);

	/* A temporary renamed over a file, then removed: T's removal. */
	g_init(&g, VOL + 3, 12);
	x = g_make(&g, LENTO_OP_CREATE, S1, "tmp");
	g_store(&g, x, 9, STORE_ATTRS);
	g_rename(&g, S1, "tmp", ROOT, "a", 0);
	g_remove(&g, ROOT, "a");
	set_base(&g, 2, 2, 41);
	set_base(&g, 2, 3, 42);
	strcpy(ctx, "bases of a rename turned removal");
	run_log(c, &g, 0, false, &res);
	ck_assert_uint_eq(res.out.n, 1);
	r = &res.out.v[0].r;
	ck_assert_uint_eq(r->op, LENTO_OP_UNLINK);
	ck_assert_str_eq(r->name, "a");
	ck_assert_str_eq(r->name2, "");
	ck_assert(lento_fid_eq(&r->obj, &g.init.o[FA].fid));
	ck_assert(lento_fid_eq(&r->dir, &g.init.o[ROOT].fid));
	ck_assert_uint_eq(r->flags, LENTO_R_LASTLINK);
	ck_assert_uint_eq(r->base_dir.v[0], 41);
	ck_assert_uint_eq(r->base_obj.v[0], 42);
	ck_assert_uint_eq(r->base_dir2.n, 0);
	ck_assert_uint_eq(r->base_target.n, 0);
	ck_assert_uint_eq(res.st.converted, 1);
	glist_free(&res.out);
	g_free(&g);
	cml_close(c);
}
END_TEST

/* The random model --------------------------------------------------- */

static uint64_t rnd(struct gen *g)
{
	uint64_t z = (g->rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint32_t below(struct gen *g, uint32_t n)
{
	return n ? (uint32_t)(rnd(g) % n) : 0;
}

/* A live object: often one of the last made, which makes chains. */
static uint32_t pick(struct gen *g, int want)
{
	for (int tries = 0; tries < 20; tries++) {
		uint32_t i = below(g, 3) ? g->m.n - 1 - below(g, g->m.n < 6 ?
							 g->m.n : 6) :
				     below(g, g->m.n);
		const struct mobj *o = &g->m.o[i];

		if (!o->live)
			continue;
		if (want == 'd' && o->type != LENTO_T_DIR)
			continue;
		if (want == 'f' && o->type != LENTO_T_REG)
			continue;
		if (want == 'n' && o->type == LENTO_T_DIR)
			continue;
		return i;
	}
	return NONE;
}

static const char *const pool[] = { "a", "b", "c", "d", "e", "f" };

static const char *any_name(struct gen *g)
{
	return pool[below(g, 6)];
}

static void random_op(struct gen *g)
{
	uint32_t d, d2, x;
	int e;

	g->uid = g->gid = below(g, 8) ? 1000 : 0;
	/* Mostly one set of groups; now and then none, or another. */
	g->ngroups = below(g, 8) ? 2 : below(g, 2) ? 0 : 1;
	g->groups[0] = g->ngroups == 1 ? 200 : 100;
	g->groups[1] = 200;
	g->lastlink = below(g, 8) != 0;
	switch (below(g, 16)) {
	case 0:
	case 1:
	case 2: {
		static const uint16_t ops[] = { LENTO_OP_CREATE,
						LENTO_OP_CREATE,
						LENTO_OP_MKDIR,
						LENTO_OP_MKDIR,
						LENTO_OP_SYMLINK,
						LENTO_OP_MKNOD };
		const char *n = any_name(g);

		d = pick(g, 'd');
		if (d != NONE && ent_find(&g->m.o[d], n) < 0)
			g_make(g, ops[below(g, 6)], d, n);
		return;
	}
	case 3:
		x = pick(g, 'n');
		d = pick(g, 'd');
		if (x != NONE && d != NONE) {
			const char *n = any_name(g);

			if (ent_find(&g->m.o[d], n) < 0)
				g_link(g, x, d, n);
		}
		return;
	case 4:
	case 5:
		d = pick(g, 'd');
		if (d == NONE || !g->m.o[d].nent)
			return;
		e = (int)below(g, g->m.o[d].nent);
		x = g->m.o[d].ent[e].obj;
		if (g->m.o[x].type == LENTO_T_DIR && g->m.o[x].nent)
			return;
		{
			char n[24];

			strcpy(n, g->m.o[d].ent[e].name);
			g_remove(g, d, n);
		}
		return;
	case 6:
	case 7:
	case 8: {
		char n[24], n2buf[24];
		const char *n2 = any_name(g);
		uint16_t flags = 0;
		uint32_t t = NONE;
		int j;

		d = pick(g, 'd');
		if (d == NONE || !g->m.o[d].nent)
			return;
		e = (int)below(g, g->m.o[d].nent);
		x = g->m.o[d].ent[e].obj;
		/* Across, up, down, or within: directories move around. */
		switch (below(g, 5)) {
		case 0:
			d2 = d;
			break;
		case 1:
			d2 = g->m.o[d].parent;
			break;
		case 2:
			d2 = g->m.o[d].ent[below(g, g->m.o[d].nent)].obj;
			if (g->m.o[d2].type != LENTO_T_DIR)
				d2 = d;
			break;
		default:
			d2 = pick(g, 'd');
			break;
		}
		if (d2 == NONE)
			return;
		/* Often over the directory the object left, or its parent. */
		if (!below(g, 6) && g->m.o[d2].nent) {
			int k = (int)below(g, g->m.o[d2].nent);

			if (g->m.o[g->m.o[d2].ent[k].obj].type == LENTO_T_DIR)
				n2 = g->m.o[d2].ent[k].name;
		}
		strcpy(n, g->m.o[d].ent[e].name);
		strcpy(n2buf, n2);
		n2 = n2buf;
		if (d == d2 && !strcmp(n, n2))
			return;
		bool xdir = g->m.o[x].type == LENTO_T_DIR;
		if (xdir && under(&g->m, d2, x))
			return;
		j = ent_find(&g->m.o[d2], n2);
		if (j >= 0) {
			t = g->m.o[d2].ent[j].obj;
			if (t == x)
				return;
			if (below(g, 4) == 0) {
				if (g->m.o[t].type == LENTO_T_DIR &&
				    under(&g->m, d, t))
					return;
				flags = LENTO_R_EXCHANGE;
			} else if ((g->m.o[t].type == LENTO_T_DIR) != xdir ||
				   (xdir && g->m.o[t].nent)) {
				return;
			}
		} else if (below(g, 4) == 0) {
			flags = LENTO_R_NOREPLACE;
		}
		g_rename(g, d, n, d2, n2, flags);
		return;
	}
	case 9:
		x = pick(g, 0);
		if (x != NONE) {
			uint32_t valid = (uint32_t)below(g, 0x80) &
					 ~LENTO_A_SIZE & ~LENTO_A_RDEV;

			if (g->m.o[x].type == LENTO_T_REG && !below(g, 4))
				valid |= LENTO_A_SIZE;
			g_setattr(g, x, valid ? valid : LENTO_A_MODE,
				  below(g, 07777), below(g, 200));
		}
		return;
	case 10:
		x = pick(g, 'f');
		if (x != NONE) {
			g_truncate(g, x, below(g, 150));
			if (below(g, 2))
				g_store(g, x, below(g, 300), STORE_ATTRS);
		}
		return;
	case 11:
	case 12:
	case 13:
		x = pick(g, 'f');
		if (x != NONE)
			g_store(g, x, below(g, 300), below(g, 4) ? STORE_ATTRS :
				LENTO_A_SIZE | LENTO_A_MTIME);
		return;
	case 14:
	case 15:
		x = pick(g, 0);
		if (x != NONE) {
			unsigned n = below(g, NXA);

			if (g->m.o[x].xs[n] && below(g, 2))
				g_xattr(g, x, n, false, 0);
			else
				g_xattr(g, x, n, true, (uint32_t)rnd(g));
		}
		return;
	}
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);

	return v && *v ? strtoull(v, NULL, 0) : dflt;
}

START_TEST(random_logs_keep_their_meaning)
{
	uint64_t seed = env_u64("CML_SEED", 20240611);
	uint64_t runs = env_u64("CML_SEQUENCES", 3000);
	struct cml_opt_stats sum = { 0 };
	struct cml *c = fast_cml();

	for (uint64_t i = 0; i < runs; i++) {
		struct outcome res;
		struct gen g;
		uint32_t len, ship = 0;

		g_init(&g, 100 + (uint32_t)i, seed + i);
		len = 5 + below(&g, 60);
		for (uint32_t k = 0; k < len || !g.recs.n; k++)
			random_op(&g);
		if (!below(&g, 4))
			ship = below(&g, (uint32_t)g.recs.n);
		snprintf(ctx, sizeof(ctx), "seed %" PRIu64 " (CML_SEED=%" PRIu64
			 " CML_SEQUENCES=1)", seed + i, seed + i);
		run_log(c, &g, ship, true, &res);
		sum.before += res.st.before;
		sum.after += res.st.after;
		sum.cancelled += res.st.cancelled;
		sum.converted += res.st.converted;
		sum.moot += res.st.moot;
		sum.stores += res.st.stores;
		sum.setattrs += res.st.setattrs;
		sum.folded += res.st.folded;
		sum.renames += res.st.renames;
		sum.creates += res.st.creates;
		ck_assert_int_ge(cml_ack(c, g.m.vol, UINT64_MAX), 0);
		glist_free(&res.out);
		g_free(&g);
	}
	fprintf(stderr, "random logs: %" PRIu64 " sequences from seed %" PRIu64
		": %" PRIu64 " records -> %" PRIu64 " (cancelled %" PRIu64
		", converted %" PRIu64 ", moot %" PRIu64 ", stores %" PRIu64
		", setattrs %" PRIu64 ", folded %" PRIu64 ", renames %" PRIu64
		", creates %" PRIu64 ")\n", runs, seed, sum.before, sum.after,
		sum.cancelled, sum.converted, sum.moot, sum.stores,
		sum.setattrs, sum.folded, sum.renames, sum.creates);
	/* Every rule fired somewhere. */
	ck_assert(runs < 1000 || (sum.cancelled && sum.converted && sum.moot &&
				  sum.stores && sum.setattrs && sum.folded &&
				  sum.renames && sum.creates));
	cml_close(c);
}
END_TEST

static Suite *cml_suite(void)
{
	Suite *s = suite_create("cml");
	TCase *log = tcase_create("log");
	TCase *opt = tcase_create("optimiser");

	tcase_add_checked_fixture(log, setup, teardown);
	tcase_add_test(log, append_numbers_and_persists);
	tcase_add_test(log, numbers_after_a_rollback);
	tcase_add_test(log, stats_follow_the_log);
	tcase_add_test(log, count_names_sums_per_object);
	tcase_add_test(log, round_trip_every_field);
	tcase_add_test(log, append_refuses_bad_records);
	tcase_add_test(log, refuses_newer_format);
	tcase_add_test(log, old_log_gets_groups_column);
	tcase_add_test(log, caller_owns_the_database);
	tcase_add_test(log, fids_unique_and_persistent);
	tcase_add_test(log, identities_differ);
	tcase_add_test(log, batches_and_acks);
	tcase_add_test(log, drop_and_rebase);
	suite_add_tcase(s, log);

	tcase_add_checked_fixture(opt, setup, teardown);
	tcase_set_timeout(opt, 600);
	tcase_add_test(opt, thousand_files_ship_nothing);
	tcase_add_test(opt, tar_unpack_then_rm_ships_nothing);
	tcase_add_test(opt, fifty_saves_ship_one_store);
	tcase_add_test(opt, rename_chain_ships_one_rename);
	tcase_add_test(opt, link_keeps_both_names);
	tcase_add_test(opt, unlink_of_server_object_stays);
	tcase_add_test(opt, chain_not_collapsed_when_a_name_depends);
	tcase_add_test(opt, exchange_not_collapsed);
	tcase_add_test(opt, shipped_records_untouched);
	tcase_add_test(opt, create_then_rename);
	tcase_add_test(opt, setattrs_coalesce_soundly);
	tcase_add_test(opt, merges_need_the_same_groups);
	tcase_add_test(opt, survivors_take_the_earliest_base);
	tcase_add_test(opt, random_logs_keep_their_meaning);
	suite_add_tcase(s, opt);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(cml_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
