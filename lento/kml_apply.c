// SPDX-License-Identifier: MIT
/*
 * presto's journal into lento's cache and CML (kml_apply.h). Each record
 * does what client_change.c's command of the same name does to the rows
 * and the log -- the change itself is already in the cache, presto made
 * it -- with the same base versions: the cache's vv of each object, null
 * for an object made here.
 */
#include "kml_apply.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "array.h"
#include "cml.h"
#include "fault.h"
#include "log.h"

/* Every group a journal record holds goes into its CML records. */
_Static_assert(PRESTO_KML_GROUPS_MAX <= LENTO_GROUPS_MAX,
	       "a KML record holds more groups than a CML record");

struct kapply_dirent {
	char name[LENTO_NAME_MAX + 1];
	struct kml_fh h;
	uint32_t mode;
	char *target;		/* a symlink's, owned */
};

/*
 * Who made a change and when: the KML record's. groups (ngroups
 * little-endian u32s) points into the record, which outlives every CML
 * record made from it (cml_append() copies them).
 */
struct who {
	uint32_t uid, gid;
	const uint8_t *groups;
	uint16_t ngroups;
	int64_t time_ns;
};

/* How deep recovery follows a removed tree, or a chain of lost renames. */
#define KAPPLY_DEPTH_MAX	4096

/* Records applied between two looks at the clock (a system call in a VM). */
#define KAPPLY_CLOCK_EVERY	8

static int64_t wall_ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void kapply_handle(uint64_t ino, uint32_t gen, uint8_t out[8])
{
	uint32_t i = (uint32_t)ino;

	/* As name_to_handle_at() gives it: host order. */
	memcpy(out, &i, 4);
	memcpy(out + 4, &gen, 4);
}

int kapply_init(struct kapply *ka, struct cache *c, uint32_t volume,
		const struct lento_fid *root, const struct kml_fh *root_h)
{
	char proc[64];
	ssize_t n;

	memset(ka, 0, sizeof(*ka));
	ka->cache = c;
	ka->volume = volume;
	ka->root = *root;
	ka->root_h = *root_h;
	/* open_by_handle_at() wants a descriptor that is not O_PATH. */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", cache_dirfd(c));
	ka->mntfd = open(proc, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (ka->mntfd < 0)
		return -errno;
	n = readlink(proc, ka->cache_abs, sizeof(ka->cache_abs) - 1);
	if (n < 0) {
		n = -errno;
		close(ka->mntfd);
		return (int)n;
	}
	ka->cache_abs[n] = 0;
	return 0;
}

static void list_clear(struct kapply *ka)
{
	for (size_t i = 0; i < ka->nlist; i++)
		free(ka->list[i].target);
	ka->nlist = 0;
	ka->listing = false;
}

void kapply_free(struct kapply *ka)
{
	list_clear(ka);
	free(ka->list);
	free(ka->made);
	free(ka->counts);
	free(ka->rows);
	fidmap_free(&ka->counts_at);
	fidmap_free(&ka->rows_at);
	free(ka->suspect);
	if (ka->mntfd >= 0)
		close(ka->mntfd);
	memset(ka, 0, sizeof(*ka));
	ka->mntfd = -1;
}

void kapply_batch_end(struct kapply *ka)
{
	ka->nmade = 0;
	ka->nsuspect = 0;
}

/* The batch's rows and counts, forgotten (written, or rolled back). */
static void rows_forget(struct kapply *ka)
{
	ka->nrows = 0;
	ka->ncounts = 0;
	fidmap_clear(&ka->rows_at);
	fidmap_clear(&ka->counts_at);
}

void kapply_reset(struct kapply *ka)
{
	list_clear(ka);
	ka->nmade = 0;
	ka->nsuspect = 0;
	rows_forget(ka);
}

/*
 * Each object a batch's records name is one more record dirty (cache.h's
 * count), added up here and written once per object at the batch's end:
 * nothing in a batch reads the count.
 */
static int count_add(struct kapply *ka, const struct lento_fid *fid)
{
	size_t at;
	void *p;

	if (fidmap_get(&ka->counts_at, fid, &at)) {
		ka->counts[at].n++;
		return 0;
	}
	p = array_grow(ka->counts, &ka->counts_cap, ka->ncounts, 1,
		       sizeof(*ka->counts));
	if (!p)
		return -ENOMEM;
	ka->counts = p;
	if (fidmap_put(&ka->counts_at, fid, ka->ncounts))
		return -ENOMEM;
	ka->counts[ka->ncounts++] = (struct kapply_count){ *fid, 1 };
	return 0;
}

/*
 * The rows of the objects a batch reads and changes are kept here and
 * written once each at its end: a file unpacked is a CREATE, a STORE and
 * a SETATTR or two, each reading and rewriting its row. Nothing else in
 * a batch reads the cache's rows (its names and handles are written at
 * once), and a batch rolled back forgets them. A listing restated after
 * a crash may make 100,000 of them: found by a hash, not a scan.
 */
static struct kapply_row *row_of(struct kapply *ka,
				 const struct lento_fid *fid)
{
	size_t at;

	return fidmap_get(&ka->rows_at, fid, &at) ? &ka->rows[at] : NULL;
}

/* A new row of @fid's, to be filled in. */
static struct kapply_row *row_new(struct kapply *ka,
				  const struct lento_fid *fid)
{
	void *p = array_grow(ka->rows, &ka->rows_cap, ka->nrows, 1,
			     sizeof(*ka->rows));

	if (!p)
		return NULL;
	ka->rows = p;
	if (fidmap_put(&ka->rows_at, fid, ka->nrows))
		return NULL;
	return &ka->rows[ka->nrows++];
}

static int obj_get(struct kapply *ka, const struct lento_fid *fid,
		   struct cache_obj *o)
{
	struct kapply_row *row = row_of(ka, fid);
	int err;

	if (row) {
		*o = row->o;
		return 0;
	}
	err = cache_obj_get(ka->cache, fid, o, NULL, 0);
	if (err)
		return err;
	row = row_new(ka, fid);
	if (!row)
		return -ENOMEM;
	*row = (struct kapply_row){ .o = *o };
	return 0;
}

/* A symlink's target is written at once; its row as the others. */
static int obj_put(struct kapply *ka, const struct cache_obj *o,
		   const char *target, size_t target_len)
{
	struct kapply_row *row = row_of(ka, &o->fid);
	int err = 0;

	if (target)
		err = cache_obj_put(ka->cache, o, target, target_len);
	if (err)
		return err;
	if (!row)
		row = row_new(ka, &o->fid);
	if (!row)
		return -ENOMEM;
	*row = (struct kapply_row){ .o = *o, .changed = !target };
	return 0;
}

/* The count of @fid's records in the batch, taken (0 if none). */
static int count_take(struct kapply *ka, const struct lento_fid *fid)
{
	size_t at;
	int n;

	if (!fidmap_get(&ka->counts_at, fid, &at))
		return 0;
	n = ka->counts[at].n;
	ka->counts[at].n = 0;
	return n;
}

/* Each row rewritten carries its count; the rest are counted alone. */
static int rows_write(struct kapply *ka)
{
	int err = 0;

	for (size_t i = 0; !err && i < ka->nrows; i++)
		if (ka->rows[i].changed)
			err = cache_obj_put_dirty(ka->cache, &ka->rows[i].o,
						  count_take(ka,
							     &ka->rows[i].o.fid));
	for (size_t i = 0; !err && i < ka->ncounts; i++)
		if (ka->counts[i].n)
			err = cache_dirty_add(ka->cache, &ka->counts[i].fid,
					      ka->counts[i].n);
	rows_forget(ka);
	return err;
}

static int made_add(struct kapply *ka, const struct lento_fid *fid)
{
	void *p = array_grow(ka->made, &ka->made_cap, ka->nmade, 1,
			     sizeof(*ka->made));

	if (!p)
		return -ENOMEM;
	ka->made = p;
	ka->made[ka->nmade++] = *fid;
	return 0;
}

static int unmapped(struct kapply *ka, const struct kml_record *r,
		    const struct kml_fh *h, const char *what)
{
	ka->unmapped++;
	snprintf(ka->why, sizeof(ka->why), "KML record %" PRIu64 " (%s): %s "
		 "%" PRIu64 "/%" PRIu32 " is not an object lento knows",
		 r->seq, kml_op_name(r->op), what, h->ino, h->gen);
	return KAPPLY_UNMAPPED;
}

/* ------------------------------------------------------------ mapping */

static bool is_root(const struct kapply *ka, const struct kml_fh *h)
{
	return h->ino == ka->root_h.ino && h->gen == ka->root_h.gen;
}

static int lookup_handle(struct kapply *ka, const struct kml_fh *h,
			 struct lento_fid *fid)
{
	uint8_t blob[8];
	int err;

	if (is_root(ka, h)) {
		*fid = ka->root;
		return 0;
	}
	if (h->ino > UINT32_MAX)
		return -ENOENT;		/* not an ext4 handle lento records */
	kapply_handle(h->ino, h->gen, blob);
	err = cache_handle_lookup(ka->cache, KAPPLY_HTYPE, blob, sizeof(blob),
				  fid);
	if (!err && fid->volume != ka->volume)
		return -ENOENT;
	return err;
}

static int record_handle(struct kapply *ka, const struct lento_fid *fid,
			 const struct kml_fh *h)
{
	uint8_t blob[8];

	if (h->ino > UINT32_MAX)
		return -EOVERFLOW;
	kapply_handle(h->ino, h->gen, blob);
	return cache_handle_set(ka->cache, fid, KAPPLY_HTYPE, blob,
				sizeof(blob), h->ino);
}

static uint8_t type_of(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFDIR: return LENTO_T_DIR;
	case S_IFLNK: return LENTO_T_SYMLINK;
	case S_IFIFO: return LENTO_T_FIFO;
	case S_IFSOCK: return LENTO_T_SOCK;
	case S_IFCHR: return LENTO_T_CHR;
	case S_IFBLK: return LENTO_T_BLK;
	default: return LENTO_T_REG;
	}
}

/* The lower inode of @h, opened O_PATH, or -errno (gone: -ESTALE). */
static int open_handle(struct kapply *ka, const struct kml_fh *h)
{
	union {
		struct file_handle fh;
		uint8_t raw[sizeof(struct file_handle) + 8];
	} u;
	int fd;

	if (h->ino > UINT32_MAX)
		return -ESTALE;
	u.fh.handle_bytes = 8;
	u.fh.handle_type = KAPPLY_HTYPE;
	kapply_handle(h->ino, h->gen,
		      u.raw + offsetof(struct file_handle, f_handle));
	fd = open_by_handle_at(ka->mntfd, &u.fh, O_PATH | O_NOFOLLOW |
			       O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/*
 * Where the inode of @h is now, relative to the cache directory (one of
 * its names). -ENOENT if it has none there that /proc can tell.
 */
static int lower_path(struct kapply *ka, const struct kml_fh *h, char *out,
		      size_t size)
{
	char proc[64], abs[CACHE_PATH_MAX];
	size_t pre = strlen(ka->cache_abs);
	int fd = open_handle(ka, h);
	ssize_t n;

	if (fd < 0)
		return fd;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	n = readlink(proc, abs, sizeof(abs) - 1);
	close(fd);
	if (n < 0)
		return -errno;
	abs[n] = 0;
	/* " (deleted)", or a disconnected name: not under the cache. */
	if (strncmp(abs, ka->cache_abs, pre) || abs[pre] != '/' ||
	    (n > 10 && !strcmp(abs + n - 10, " (deleted)")))
		return -ENOENT;
	if (snprintf(out, size, "%s", abs + pre + 1) >= (int)size)
		return -ENAMETOOLONG;
	return 0;
}

/* The fid at @path (VOLUME/a/b) by the cache's listings. */
static int fid_at_path(struct kapply *ka, const char *path,
		       struct lento_fid *fid)
{
	char buf[CACHE_PATH_MAX], *save = NULL, *c;
	struct cache_vol v;
	int err = cache_vol_get(ka->cache, ka->volume, &v);

	if (err)
		return err;
	snprintf(buf, sizeof(buf), "%s", path);
	c = strtok_r(buf, "/", &save);
	if (!c || strcmp(c, v.name))
		return -ENOENT;
	*fid = ka->root;
	while (!err && (c = strtok_r(NULL, "/", &save)))
		err = cache_lookup(ka->cache, fid, c, fid);
	return err;
}

struct live_other {
	struct kapply *ka;
	const struct kml_fh *h;
};

/* cache_handles: an inode of the object's other than @h, still linked. */
static int live_other(void *arg, int type, const void *handle, size_t len)
{
	struct live_other *lo = arg;
	struct kml_fh k = { 0 };
	struct stat sb;
	bool linked;
	int fd;

	if (!kapply_handle_parse(type, handle, len, &k) ||
	    (k.ino == lo->h->ino && k.gen == lo->h->gen))
		return 0;
	fd = open_handle(lo->ka, &k);
	if (fd < 0)
		return 0;
	linked = !fstat(fd, &sb) && sb.st_nlink;
	close(fd);
	return linked;
}

/*
 * A handle lento did not record (a fill whose handle could not be
 * taken): found by the path the lower inode has, and recorded now. The
 * path is the lower's now and the rows are as of the record, which a
 * later rename may have made stale ("mv f g; touch f" has a new inode at
 * f): the object found there must be of the inode's type and have no
 * other inode recorded that still has a name -- that one is the object.
 */
static int map_by_path(struct kapply *ka, const struct kml_fh *h,
		       struct lento_fid *fid)
{
	struct live_other other = { .ka = ka, .h = h };
	char path[CACHE_PATH_MAX];
	struct cache_obj o;
	struct stat sb;
	int fd, err;

	fd = open_handle(ka, h);
	if (fd < 0)
		return -ENOENT;
	err = fstat(fd, &sb) ? -errno : 0;
	close(fd);
	err = err ?: lower_path(ka, h, path, sizeof(path));
	err = err ?: fid_at_path(ka, path, fid);
	if (err)
		return -ENOENT;
	err = obj_get(ka, fid, &o);
	err = err ?: cache_handles(ka->cache, fid, live_other, &other);
	if (err < 0)
		return err;
	if (err || o.type != type_of(sb.st_mode))
		return -ENOENT;
	return record_handle(ka, fid, h);
}

static int map(struct kapply *ka, const struct kml_fh *h,
	       struct lento_fid *fid)
{
	int err = lookup_handle(ka, h, fid);

	return err == -ENOENT ? map_by_path(ka, h, fid) : err;
}

/* ------------------------------------------------------------- helpers */

/* Linux's new_encode_dev() undone, into lento's major << 32 | minor. */
static uint64_t rdev_of(uint32_t dev)
{
	uint64_t major = (dev & 0xfff00) >> 8;
	uint64_t minor = (dev & 0xff) | ((dev >> 12) & 0xfff00);

	return major << 32 | minor;
}

/* The KML's attributes in @valid_mask into lento's. */
static void attr_of(const struct kml_attr *k, uint32_t mask,
		    struct lento_attr *a)
{
	uint32_t v = k->valid & mask;

	memset(a, 0, sizeof(*a));
	a->valid = v & (LENTO_A_ALL);	/* the bits are the same below NLINK */
	a->mode = k->mode & 07777;
	a->uid = k->uid;
	a->gid = k->gid;
	a->size = k->size;
	a->atime_ns = k->atime_ns;
	a->mtime_ns = k->mtime_ns;
	a->ctime_ns = k->ctime_ns;
	a->rdev = rdev_of(k->rdev);
}

static void rec_init(struct lento_rec *r, const struct who *w, uint16_t op)
{
	memset(r, 0, sizeof(*r));
	r->op = op;
	r->uid = w->uid;
	r->gid = w->gid;
	r->groups = w->ngroups ? w->groups : NULL;
	r->ngroups = w->ngroups;
	r->time_ns = w->time_ns;
}

/* Into the log; every object it names is dirty now (client_change.c). */
static int log_rec(struct kapply *ka, struct lento_rec *r, uint64_t body)
{
	const struct lento_fid *f[] = { &r->dir, &r->obj, &r->dir2,
					&r->target };
	int err = cml_append(cache_cml(ka->cache), r, body);

	for (size_t i = 0; !err && i < 4; i++)
		if (!lento_fid_is_null(f[i]))
			err = count_add(ka, f[i]);
	if (!err)
		ka->records++;
	return err;
}

/* A directory's times (and link count) move with its entries. */
static int touch_dir(struct kapply *ka, const struct lento_fid *dir,
		     int nlink_delta, int64_t t)
{
	struct cache_obj d;
	int err = obj_get(ka, dir, &d);

	if (err)
		return err;
	d.nlink = (uint32_t)((int64_t)d.nlink + nlink_delta);
	d.attr.mtime_ns = d.attr.ctime_ns = t;
	return obj_put(ka, &d, NULL, 0);
}

static int get(struct kapply *ka, const struct lento_fid *fid,
	       struct cache_obj *o)
{
	int err = obj_get(ka, fid, o);

	/* A handle mapped to a fid the cache lost: a broken database. */
	return err == -ENOENT ? -EUCLEAN : err;
}

/* ---------------------------------------------------------- namespace */

/* A new object @name in @dir, its handle @h; @a has every attribute. */
static int new_obj(struct kapply *ka, const struct who *w,
		   const struct lento_fid *dir, const char *name,
		   const struct kml_fh *h, uint8_t type,
		   const struct lento_attr *a, uint32_t nlink,
		   const char *target, size_t target_len)
{
	static const uint16_t ops[] = {
		[LENTO_T_REG] = LENTO_OP_CREATE, [LENTO_T_DIR] = LENTO_OP_MKDIR,
		[LENTO_T_SYMLINK] = LENTO_OP_SYMLINK,
		[LENTO_T_FIFO] = LENTO_OP_MKNOD,
		[LENTO_T_SOCK] = LENTO_OP_MKNOD,
		[LENTO_T_CHR] = LENTO_OP_MKNOD, [LENTO_T_BLK] = LENTO_OP_MKNOD,
	};
	struct cache_obj parent, o;
	struct lento_rec r;
	int err = get(ka, dir, &parent);

	rec_init(&r, w, ops[type]);
	err = err ?: cml_mint_fid(cache_cml(ka->cache), ka->volume, &r.obj);
	if (err)
		return err;
	memset(&o, 0, sizeof(o));
	o.fid = r.obj;
	o.type = type;
	o.nlink = nlink ? nlink : type == LENTO_T_DIR ? 2 : 1;
	o.attr = *a;
	o.attr.valid = LENTO_A_ALL;
	if (type == LENTO_T_SYMLINK)
		o.attr.size = target_len;
	o.valid = o.data = true;
	o.used_ms = wall_ms_now();
	r.dir = *dir;
	r.base_dir = parent.vv;
	r.type = type;
	r.attr = o.attr;
	r.attr.valid = LENTO_A_MODE | LENTO_A_UID | LENTO_A_GID |
		       LENTO_A_ATIME | LENTO_A_MTIME | LENTO_A_CTIME |
		       (r.op == LENTO_OP_MKNOD ? LENTO_A_RDEV : 0);
	r.attr.size = 0;
	snprintf(r.name, sizeof(r.name), "%s", name);
	if (target_len) {
		r.data = target;
		r.data_len = (uint32_t)target_len;
	}
	err = obj_put(ka, &o, target, target_len);
	err = err ?: cache_dirent_put(ka->cache, dir, name, &o.fid);
	err = err ?: touch_dir(ka, dir, type == LENTO_T_DIR, w->time_ns);
	err = err ?: record_handle(ka, &o.fid, h);
	err = err ?: log_rec(ka, &r, 0);
	return err ?: made_add(ka, &o.fid);
}

/* @name goes from @dir; @o is left with @nlink names. Logged. */
static int remove_name(struct kapply *ka, const struct who *w,
		       const struct lento_fid *dir, const char *name,
		       struct cache_obj *o, uint32_t nlink)
{
	bool isdir = o->type == LENTO_T_DIR;
	struct cache_obj parent;
	struct lento_rec r;
	int err = get(ka, dir, &parent);

	if (err)
		return err;
	rec_init(&r, w, isdir ? LENTO_OP_RMDIR : LENTO_OP_UNLINK);
	r.dir = *dir;
	r.obj = o->fid;
	r.base_dir = parent.vv;
	r.base_obj = o->vv;
	snprintf(r.name, sizeof(r.name), "%s", name);
	o->nlink = isdir ? 0 : nlink;
	/* The optimiser may drop what was done to an object with no name. */
	if (!isdir && !o->nlink)
		r.flags = LENTO_R_LASTLINK;
	o->attr.ctime_ns = w->time_ns;
	err = cache_dirent_del(ka->cache, dir, name);
	err = err ?: obj_put(ka, o, NULL, 0);
	err = err ?: touch_dir(ka, dir, isdir ? -1 : 0, w->time_ns);
	return err ?: log_rec(ka, &r, 0);
}

/* @o gets the name @name in @dir besides those it has. Logged. */
static int add_link(struct kapply *ka, const struct who *w,
		    const struct lento_fid *dir, const char *name,
		    struct cache_obj *o, uint32_t nlink)
{
	struct cache_obj parent;
	struct lento_rec r;
	int err = get(ka, dir, &parent);

	if (err)
		return err;
	rec_init(&r, w, LENTO_OP_LINK);
	r.dir = *dir;
	r.obj = o->fid;
	r.base_dir = parent.vv;
	r.base_obj = o->vv;
	snprintf(r.name, sizeof(r.name), "%s", name);
	o->nlink = nlink ? nlink : o->nlink + 1;
	o->attr.ctime_ns = w->time_ns;
	err = obj_put(ka, o, NULL, 0);
	err = err ?: cache_dirent_put(ka->cache, dir, name, &o->fid);
	err = err ?: touch_dir(ka, dir, 0, w->time_ns);
	return err ?: log_rec(ka, &r, 0);
}

struct rename_args {
	struct lento_fid dir, dir2;
	const char *name, *name2;
	struct cache_obj *o, *t;	/* t: what name2 named, or NULL */
	uint16_t flags;			/* LENTO_R_NOREPLACE, _EXCHANGE */
};

/* The names as rename(2) left them, in the listings. */
static int rename_names(struct kapply *ka, const struct rename_args *a)
{
	int err = cache_dirent_del(ka->cache, &a->dir, a->name);

	if (!err && (a->flags & LENTO_R_EXCHANGE))
		err = cache_dirent_put(ka->cache, &a->dir, a->name, &a->t->fid);
	return err ?: cache_dirent_put(ka->cache, &a->dir2, a->name2,
				       &a->o->fid);
}

/* A directory's ".." moves with it: the parents' link counts. */
static int rename_dirs(struct kapply *ka, const struct rename_args *a,
		       int64_t t)
{
	bool moved = !lento_fid_eq(&a->dir, &a->dir2);
	bool odir = a->o->type == LENTO_T_DIR;
	bool tdir = a->t && a->t->type == LENTO_T_DIR;
	int d1 = 0, d2 = 0;

	if (a->flags & LENTO_R_EXCHANGE) {
		/* Each takes the other's place: no parent loses a link. */
		d1 = moved ? tdir - odir : 0;
		d2 = moved ? odir - tdir : 0;
	} else {
		d1 = moved && odir ? -1 : 0;
		d2 = (moved && odir ? 1 : 0) - (tdir ? 1 : 0);
	}
	return touch_dir(ka, &a->dir, d1, t) ?:
	       touch_dir(ka, &a->dir2, d2, t);
}

static int rename_log(struct kapply *ka, const struct who *w,
		      const struct rename_args *a)
{
	struct cache_obj pa, pb;
	struct lento_rec r;
	int err = get(ka, &a->dir, &pa) ?: get(ka, &a->dir2, &pb);

	if (err)
		return err;
	rec_init(&r, w, LENTO_OP_RENAME);
	r.dir = a->dir;
	r.obj = a->o->fid;
	r.dir2 = a->dir2;
	r.base_dir = pa.vv;
	r.base_obj = a->o->vv;
	r.base_dir2 = pb.vv;
	r.flags = a->flags;
	snprintf(r.name, sizeof(r.name), "%s", a->name);
	snprintf(r.name2, sizeof(r.name2), "%s", a->name2);
	a->o->attr.ctime_ns = w->time_ns;
	err = obj_put(ka, a->o, NULL, 0);
	if (!err && a->t) {
		r.target = a->t->fid;
		r.base_target = a->t->vv;
		if (!(a->flags & LENTO_R_EXCHANGE)) {
			a->t->nlink = a->t->type == LENTO_T_DIR ||
				      a->t->nlink <= 1 ? 0 : a->t->nlink - 1;
			if (!a->t->nlink)
				r.flags |= LENTO_R_LASTLINK;
		}
		a->t->attr.ctime_ns = w->time_ns;
		err = obj_put(ka, a->t, NULL, 0);
	}
	err = err ?: rename_names(ka, a);
	err = err ?: rename_dirs(ka, a, w->time_ns);
	return err ?: log_rec(ka, &r, 0);
}

/* --------------------------------------------------------- the records */

static void who_of(const struct kml_record *r, struct who *w)
{
	w->uid = r->uid;
	w->gid = r->gid;
	w->groups = r->groups;
	w->ngroups = r->ngroups;
	w->time_ns = r->time_ns;
}

/* The record's first name, NUL-terminated. */
static void name_of(const char *p, size_t len, char out[LENTO_NAME_MAX + 1])
{
	memcpy(out, p, len);
	out[len] = 0;
}

static int k_new(struct kapply *ka, const struct kml_record *r)
{
	const struct kml_fh *dh = &r->fh[PRESTO_KML_FH_DIR];
	const struct kml_fh *oh = &r->fh[PRESTO_KML_FH_OBJ];
	char name[LENTO_NAME_MAX + 1];
	struct lento_fid dir;
	struct lento_attr a;
	struct who w;
	int err = map(ka, dh, &dir);

	if (err == -ENOENT)
		return unmapped(ka, r, dh, "the directory");
	if (err)
		return err;
	if (!r->name_len || r->data_len > LENTO_SYMLINK_MAX)
		return -EINVAL;
	who_of(r, &w);
	name_of(r->name, r->name_len, name);
	attr_of(&r->attr, PRESTO_KML_A_ALL, &a);
	return new_obj(ka, &w, &dir, name, oh, type_of(r->attr.mode), &a,
		       r->attr.valid & PRESTO_KML_A_NLINK ? r->attr.nlink : 0,
		       (const char *)r->data, r->data_len);
}

static int k_link(struct kapply *ka, const struct kml_record *r)
{
	const struct kml_fh *dh = &r->fh[PRESTO_KML_FH_DIR];
	const struct kml_fh *oh = &r->fh[PRESTO_KML_FH_OBJ];
	char name[LENTO_NAME_MAX + 1];
	struct lento_fid dir, fid;
	struct cache_obj o;
	struct who w;
	int err = map(ka, dh, &dir);

	if (err == -ENOENT)
		return unmapped(ka, r, dh, "the directory");
	err = err ?: map(ka, oh, &fid);
	if (err == -ENOENT)
		return unmapped(ka, r, oh, "the object");
	err = err ?: get(ka, &fid, &o);
	if (err)
		return err;
	who_of(r, &w);
	name_of(r->name, r->name_len, name);
	return add_link(ka, &w, &dir, name, &o,
			r->attr.valid & PRESTO_KML_A_NLINK ? r->attr.nlink : 0);
}

/* The object of a record that names it @name in @dir: its handle, or the
 * name, which the cache's listing still has before the record applies. */
static int map_named(struct kapply *ka, const struct kml_fh *h,
		     const struct lento_fid *dir, const char *name,
		     struct lento_fid *fid)
{
	int err = lookup_handle(ka, h, fid);

	if (err != -ENOENT)
		return err;
	err = cache_lookup(ka->cache, dir, name, fid);
	return err ?: record_handle(ka, fid, h);
}

static int k_remove(struct kapply *ka, const struct kml_record *r)
{
	const struct kml_fh *dh = &r->fh[PRESTO_KML_FH_DIR];
	const struct kml_fh *oh = &r->fh[PRESTO_KML_FH_OBJ];
	char name[LENTO_NAME_MAX + 1];
	struct lento_fid dir, fid;
	struct cache_obj o;
	struct who w;
	int err = map(ka, dh, &dir);

	if (err == -ENOENT)
		return unmapped(ka, r, dh, "the directory");
	if (err)
		return err;
	name_of(r->name, r->name_len, name);
	err = map_named(ka, oh, &dir, name, &fid);
	if (err == -ENOENT)
		return unmapped(ka, r, oh, "the object");
	err = err ?: get(ka, &fid, &o);
	if (err)
		return err;
	who_of(r, &w);
	return remove_name(ka, &w, &dir, name, &o,
			   r->attr.valid & PRESTO_KML_A_NLINK ? r->attr.nlink :
			   o.nlink ? o.nlink - 1 : 0);
}

static int k_rename(struct kapply *ka, const struct kml_record *r)
{
	const struct kml_fh *th = &r->fh[PRESTO_KML_FH_TARGET];
	char name[LENTO_NAME_MAX + 1], name2[LENTO_NAME_MAX + 1];
	struct rename_args a = { .name = name, .name2 = name2 };
	struct cache_obj o, t;
	struct lento_fid fid;
	struct who w;
	int err;

	name_of(r->name, r->name_len, name);
	name_of(r->name2, r->name2_len, name2);
	err = map(ka, &r->fh[PRESTO_KML_FH_DIR], &a.dir);
	if (err == -ENOENT)
		return unmapped(ka, r, &r->fh[PRESTO_KML_FH_DIR],
				"the directory");
	err = err ?: map(ka, &r->fh[PRESTO_KML_FH_NEWDIR], &a.dir2);
	if (err == -ENOENT)
		return unmapped(ka, r, &r->fh[PRESTO_KML_FH_NEWDIR],
				"the new directory");
	err = err ?: map_named(ka, &r->fh[PRESTO_KML_FH_OBJ], &a.dir, name,
			       &fid);
	if (err == -ENOENT)
		return unmapped(ka, r, &r->fh[PRESTO_KML_FH_OBJ], "the object");
	err = err ?: get(ka, &fid, &o);
	if (!err && th->ino) {
		err = map_named(ka, th, &a.dir2, name2, &fid);
		if (err == -ENOENT)
			return unmapped(ka, r, th, "the target");
		err = err ?: get(ka, &fid, &t);
		a.t = &t;
	}
	if (err)
		return err;
	a.o = &o;
	if (r->flags & PRESTO_KML_F_EXCHANGE)
		a.flags = a.t ? LENTO_R_EXCHANGE : 0;
	else if (r->flags & PRESTO_KML_F_NOREPLACE)
		a.flags = a.t ? 0 : LENTO_R_NOREPLACE;
	who_of(r, &w);
	return rename_log(ka, &w, &a);
}

/* ------------------------------------------------------------- content */

/* An object's own record: its fid and row, or KAPPLY_UNMAPPED. */
static int obj_of(struct kapply *ka, const struct kml_record *r,
		  struct cache_obj *o)
{
	const struct kml_fh *oh = &r->fh[PRESTO_KML_FH_OBJ];
	struct lento_fid fid;
	int err = map(ka, oh, &fid);

	if (err == -ENOENT)
		return unmapped(ka, r, oh, "the object");
	return err ?: get(ka, &fid, o);
}

/* SETATTR of @a (changed attributes) on @o, logged; @a gets CTIME. */
static int setattr_log(struct kapply *ka, const struct who *w,
		       struct cache_obj *o, struct lento_attr *a)
{
	struct lento_rec r;

	rec_init(&r, w, LENTO_OP_SETATTR);
	a->valid |= LENTO_A_CTIME;
	if (!a->ctime_ns)
		a->ctime_ns = w->time_ns;
	r.obj = o->fid;
	r.base_obj = o->vv;
	r.attr = *a;
	lento_attr_merge(&o->attr, a);
	return obj_put(ka, o, NULL, 0) ?: log_rec(ka, &r, 0);
}

static int k_setattr(struct kapply *ka, const struct kml_record *r)
{
	struct cache_obj o;
	struct lento_attr a;
	struct who w;
	int err = obj_of(ka, r, &o);

	if (err)
		return err;
	who_of(r, &w);
	/* rdev and nlink are no attributes one sets. */
	attr_of(&r->attr, PRESTO_KML_A_ALL & ~(PRESTO_KML_A_RDEV |
					       PRESTO_KML_A_NLINK), &a);
	if (o.type != LENTO_T_REG)
		a.valid &= ~LENTO_A_SIZE;
	return setattr_log(ka, &w, &o, &a);
}

/* presto's own xattrs (trusted.presto.*): never in the journal. */
static bool presto_own(const char *name, size_t len)
{
	return len >= 15 && !memcmp(name, "trusted.presto.", 15);
}

static int xattr_log(struct kapply *ka, const struct kml_record *r,
		     struct cache_obj *o)
{
	struct lento_rec rec;
	struct who w;

	/* presto's own never reach the journal; refuse them regardless. */
	if (!r->name_len || presto_own(r->name, r->name_len))
		return -EINVAL;
	who_of(r, &w);
	rec_init(&rec, &w, r->op == PRESTO_KML_SETXATTR ? LENTO_OP_SETXATTR :
		 LENTO_OP_REMOVEXATTR);
	rec.obj = o->fid;
	rec.base_obj = o->vv;
	name_of(r->name, r->name_len, rec.name);
	if (r->op == PRESTO_KML_SETXATTR && r->data_len) {
		rec.data = r->data;
		rec.data_len = (uint32_t)r->data_len;
	}
	/* A POSIX ACL moves the mode: presto says the one it left. */
	if (r->attr.valid & PRESTO_KML_A_MODE)
		o->attr.mode = r->attr.mode & 07777;
	o->attr.ctime_ns = r->attr.valid & PRESTO_KML_A_CTIME ?
			   r->attr.ctime_ns : r->time_ns;
	return obj_put(ka, o, NULL, 0) ?: log_rec(ka, &rec, 0);
}

static int k_xattr(struct kapply *ka, const struct kml_record *r)
{
	struct cache_obj o;
	int err = obj_of(ka, r, &o);

	return err ?: xattr_log(ka, r, &o);
}

/*
 * STORE: the content is the cache file itself (reint.c ships it, through
 * its shadow copy). A write that dropped set-id bits moved the mode,
 * which a STORE does not carry: a SETATTR says it first.
 */
static int k_store(struct kapply *ka, const struct kml_record *r)
{
	struct cache_obj o;
	struct lento_rec rec;
	struct who w;
	int err = obj_of(ka, r, &o);

	if (err)
		return err;
	if (o.type != LENTO_T_REG)
		return -EINVAL;
	who_of(r, &w);
	if ((r->attr.valid & PRESTO_KML_A_MODE) &&
	    (r->attr.mode & 07777) != o.attr.mode) {
		struct lento_attr a = { .valid = LENTO_A_MODE,
					.mode = r->attr.mode & 07777 };

		err = setattr_log(ka, &w, &o, &a);
		if (err)
			return err;
	}
	rec_init(&rec, &w, LENTO_OP_STORE);
	rec.obj = o.fid;
	rec.base_obj = o.vv;
	attr_of(&r->attr, PRESTO_KML_A_SIZE | PRESTO_KML_A_MTIME |
		PRESTO_KML_A_CTIME, &rec.attr);
	lento_attr_merge(&o.attr, &rec.attr);
	o.data = true;
	o.used_ms = wall_ms_now();
	return obj_put(ka, &o, NULL, 0) ?:
	       log_rec(ka, &rec, rec.attr.size);
}

/* ------------------------------------------------------------ recovery */

/*
 * RESYNC's xattr names (each ending in a NUL) as PRUNEXATTRS's: the ones
 * a server may hold, each once. Returns the list's length, or -EINVAL for
 * a list no object can have (more names than the server holds).
 */
static ssize_t prune_names(const struct kml_record *r, char *out)
{
	const char *p = (const char *)r->data, *end = p + r->data_len;
	size_t len = 0, n = 0;

	while (p < end) {
		const char *nul = memchr(p, '\0', (size_t)(end - p));
		size_t l = nul ? (size_t)(nul - p) : (size_t)(end - p);
		bool dup = false;

		if (!l || l > LENTO_XATTR_NAME_MAX || presto_own(p, l))
			return -EINVAL;
		for (const char *q = out; q < out + len; q += strlen(q) + 1)
			dup |= strlen(q) == l && !memcmp(q, p, l);
		if (!dup) {
			if (n++ == LENTO_XATTRS_MAX)
				return -EINVAL;
			memcpy(out + len, p, l);
			out[len + l] = '\0';
			len += l + 1;
		}
		p += l + 1;
	}
	return (ssize_t)len;
}

/*
 * The object's xattrs are exactly the RESYNC's: a crash may have lost the
 * REMOVEXATTR of one the server still has, so the server removes every
 * xattr the list does not name (PRUNEXATTRS).
 */
static int prune_log(struct kapply *ka, const struct kml_record *r,
		     const struct who *w, const struct cache_obj *o)
{
	char names[LENTO_XATTRS_MAX * (LENTO_XATTR_NAME_MAX + 1)];
	struct lento_rec rec;
	ssize_t len = prune_names(r, names);

	if (len < 0) {
		log_warn("kml %" PRIu64 ": RESYNC's xattr names are more or "
			 "longer than a server holds; none removed", r->seq);
		return 0;
	}
	rec_init(&rec, w, LENTO_OP_PRUNEXATTRS);
	rec.obj = o->fid;
	rec.base_obj = o->vv;
	rec.data = len ? names : NULL;
	rec.data_len = (uint32_t)len;
	return log_rec(ka, &rec, 0);
}

/* RESYNC: the attributes that differ from the cache's, as a SETATTR. */
static int k_resync(struct kapply *ka, const struct kml_record *r)
{
	struct cache_obj o;
	struct lento_attr a, d = { 0 };
	struct who w;
	int err = obj_of(ka, r, &o);

	if (err)
		return err;
	attr_of(&r->attr, PRESTO_KML_A_ALL, &a);
	if (a.mode != o.attr.mode)
		d.valid |= LENTO_A_MODE;
	if (a.uid != o.attr.uid)
		d.valid |= LENTO_A_UID;
	if (a.gid != o.attr.gid)
		d.valid |= LENTO_A_GID;
	if (a.atime_ns != o.attr.atime_ns)
		d.valid |= LENTO_A_ATIME;
	if (a.mtime_ns != o.attr.mtime_ns)
		d.valid |= LENTO_A_MTIME;
	who_of(r, &w);
	/* A regular file's size comes with the STORE that follows. */
	if (d.valid) {
		d.mode = a.mode;
		d.uid = a.uid;
		d.gid = a.gid;
		d.atime_ns = a.atime_ns;
		d.mtime_ns = a.mtime_ns;
		d.ctime_ns = a.ctime_ns;
		err = setattr_log(ka, &w, &o, &d);
	}
	return err ?: prune_log(ka, r, &w, &o);
}

static int k_resync_dir(struct kapply *ka, const struct kml_record *r)
{
	list_clear(ka);
	ka->listing = true;
	ka->list_seq = r->seq;
	ka->list_dir = r->fh[PRESTO_KML_FH_OBJ];
	ka->list_want = r->entries;
	return 0;
}

static int list_add(struct kapply *ka, const struct kml_record *r)
{
	struct kapply_dirent *e;
	void *p = array_grow(ka->list, &ka->list_cap, ka->nlist, 1,
			     sizeof(*ka->list));

	if (!p)
		return -ENOMEM;
	ka->list = p;
	e = &ka->list[ka->nlist];
	memset(e, 0, sizeof(*e));
	name_of(r->name, r->name_len, e->name);
	e->h = r->fh[PRESTO_KML_FH_OBJ];
	e->mode = r->attr.mode;
	if (r->data_len) {
		e->target = strndup((const char *)r->data, r->data_len);
		if (!e->target)
			return -ENOMEM;
	}
	ka->nlist++;
	return 0;
}

static int dirent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct kapply_dirent *)a)->name,
		      ((const struct kapply_dirent *)b)->name);
}

/* The listing's entry of @name (the listing sorted by name). */
static const struct kapply_dirent *listed(const struct kapply *ka,
					  const char *name)
{
	struct kapply_dirent key;

	snprintf(key.name, sizeof(key.name), "%s", name);
	return bsearch(&key, ka->list, ka->nlist, sizeof(*ka->list),
		       dirent_cmp);
}

/*
 * An inode of @h no recorded handle gives, that lento made for @fid (its
 * mark): @fid's own, installed by a fetch or listing whose commit a crash
 * lost (not a user's new file). 1 if so, 0 if not, or -errno.
 */
static int made_for_fid(struct kapply *ka, const struct kml_fh *h,
			const struct lento_fid *fid)
{
	struct lento_fid made;
	int fd = open_handle(ka, h), err;

	if (fd < 0)
		return fd == -ESTALE ? 0 : fd;
	err = cache_fd_made_for(fd, &made);
	close(fd);
	if (err)
		return err == -ENOENT ? 0 : err;
	return lento_fid_eq(&made, fid);
}

/*
 * Is the listed entry @e the object @fid? 1 by its recorded handle, 2 by
 * lento's mark (made_for_fid(): its handle to be recorded), 0 if not.
 * Not known to be another's (an error): 1, kept, nothing logged.
 */
static int entry_is(struct kapply *ka, const struct kapply_dirent *e,
		    const struct lento_fid *fid)
{
	struct lento_fid now;
	int err = lookup_handle(ka, &e->h, &now);

	if (!err)
		return lento_fid_eq(&now, fid);
	if (err != -ENOENT)
		return 1;
	err = made_for_fid(ka, &e->h, fid);
	return err < 0 ? 1 : err ? 2 : 0;
}

/* Does the listing have @name as the object @fid? */
static bool listed_as(struct kapply *ka, const char *name,
		      const struct lento_fid *fid)
{
	const struct kapply_dirent *e = listed(ka, name);

	return e && entry_is(ka, e, fid);
}

struct stale {
	struct kapply *ka;
	bool all;		/* every name, not only those not listed */
	char (*names)[LENTO_NAME_MAX + 1];
	size_t n, cap;
};

/*
 * cache_readdir: the names the lower's listing does not have as they are
 * (or all of them). Gathered first: they are changed after.
 */
static int stale_name(void *arg, const char *name, const struct lento_fid *fid)
{
	struct stale *s = arg;
	void *p;

	if (!s->all && listed_as(s->ka, name, fid))
		return 0;
	p = array_grow(s->names, &s->cap, s->n, 1, sizeof(*s->names));
	if (!p)
		return -ENOMEM;
	s->names = p;
	snprintf(s->names[s->n++], LENTO_NAME_MAX + 1, "%s", name);
	return 0;
}

struct lower_of {
	struct kapply *ka;
	struct stat sb;
	char path[CACHE_PATH_MAX];
	bool found;
};

bool kapply_handle_parse(int type, const void *handle, size_t len,
			 struct kml_fh *h)
{
	uint32_t ino;

	if (type != KAPPLY_HTYPE || len != 8)
		return false;
	memcpy(&ino, handle, 4);
	memcpy(&h->gen, (const uint8_t *)handle + 4, 4);
	h->ino = ino;
	return true;
}

/* cache_handles: the first of @fid's handles that opens. */
static int try_handle(void *arg, int type, const void *handle, size_t len)
{
	struct lower_of *lo = arg;
	struct kml_fh h = { 0 };
	int fd;

	if (!kapply_handle_parse(type, handle, len, &h))
		return 0;
	fd = open_handle(lo->ka, &h);
	/* Gone; anything else (no descriptors, no memory) says nothing. */
	if (fd == -ESTALE || fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	lo->found = !fstat(fd, &lo->sb) && lo->sb.st_nlink;
	close(fd);
	if (lo->found && lower_path(lo->ka, &h, lo->path, sizeof(lo->path)))
		lo->path[0] = 0;
	return lo->found;
}

struct dir_fd {
	struct kapply *ka;
	int fd;
};

/* cache_handles: the first of a directory's handles that opens. */
static int try_dir_handle(void *arg, int type, const void *handle,
			  size_t len)
{
	struct dir_fd *d = arg;
	struct kml_fh h = { 0 };

	if (!kapply_handle_parse(type, handle, len, &h))
		return 0;
	d->fd = open_handle(d->ka, &h);
	return d->fd >= 0;
}

/*
 * The lower directory of @dir, opened O_PATH by its handle, or -1. Not by
 * the cache's path of it: a rename of it or of a parent that the crash
 * lost and the block has not restated yet leaves that path stale.
 */
static int open_dir(struct kapply *ka, const struct lento_fid *dir)
{
	struct dir_fd d = { .ka = ka, .fd = -1 };

	if (lento_fid_eq(dir, &ka->root))
		d.fd = open_handle(ka, &ka->root_h);
	else if (cache_handles(ka->cache, dir, try_dir_handle, &d) < 0)
		d.fd = -1;
	return d.fd >= 0 ? d.fd : -1;
}

/*
 * The directory at @path (VOLUME/a/b) in the lower: by its handle, which
 * holds also after a rename the block has not restated yet, else by the
 * cache's listings.
 */
static int dir_at_path(struct kapply *ka, const char *path,
		       struct lento_fid *fid)
{
	struct {
		struct file_handle fh;
		unsigned char b[MAX_HANDLE_SZ];
	} h;
	struct kml_fh kh = { 0 };
	struct cache_obj o;
	int mnt;

	h.fh.handle_bytes = MAX_HANDLE_SZ;
	if (!cache_name_to_handle(ka->cache, path, &h.fh, &mnt) &&
	    kapply_handle_parse(h.fh.handle_type, h.fh.f_handle,
				h.fh.handle_bytes, &kh) &&
	    !lookup_handle(ka, &kh, fid) && !get(ka, fid, &o) && o.nlink &&
	    o.type == LENTO_T_DIR)
		return 0;
	return fid_at_path(ka, path, fid);
}

/*
 * The objects whose lost names wait, each on the next, for a name to be
 * freed (lose_live()): a chain of renames the crash lost, as "mv b c; mv
 * a b" was.
 */
struct chain {
	const struct lento_fid *fid;
	const struct lento_fid *dir;	/* where it is in the rows */
	const char *name;
	const struct chain *up;
	bool dying;		/* a directory gone, losing its names */
};

static int lose_name(struct kapply *ka, const struct who *w,
		     const struct lento_fid *dir, const char *name,
		     struct cache_obj *o, int depth, const struct chain *up);

/*
 * What a recovery block made of a name, in lento's log: the records the
 * crash lost are gone, so this is all an operator has to go by.
 */
static void vsaid(struct kapply *ka, bool warn, const struct lento_fid *dir,
		  const char *name, const char *fmt, va_list ap)
{
	char path[CACHE_PATH_MAX], what[256];

	if (cache_path(ka->cache, dir, path, sizeof(path)))
		snprintf(path, sizeof(path), "?");
	vsnprintf(what, sizeof(what), fmt, ap);
	log_msg(warn ? LOG_WARN : LOG_INFO, "journal recovery: %s%s%s: %s",
		path, path[0] ? "/" : "", name, what);
}

__attribute__((format(printf, 4, 5)))
static void said(struct kapply *ka, const struct lento_fid *dir,
		 const char *name, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsaid(ka, false, dir, name, fmt, ap);
	va_end(ap);
}

/* The same, of what an operator must look at: the server lacks it. */
__attribute__((format(printf, 4, 5)))
static void said_warn(struct kapply *ka, const struct lento_fid *dir,
		      const char *name, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsaid(ka, true, dir, name, fmt, ap);
	va_end(ap);
}

/* The names @dir lost with it, each found elsewhere or gone, first. */
static int lose_children(struct kapply *ka, const struct who *w,
			 const struct lento_fid *dir, int depth,
			 const struct chain *up)
{
	struct stale s = { .ka = ka, .all = true };
	struct lento_fid fid;
	struct cache_obj o;
	int err = depth > KAPPLY_DEPTH_MAX ? -ELOOP :
		  cache_readdir(ka->cache, dir, stale_name, &s);

	for (size_t i = 0; !err && i < s.n; i++) {
		err = cache_lookup(ka->cache, dir, s.names[i], &fid);
		if (err == -ENOENT) {	/* a chain of moves took it */
			err = 0;
			continue;
		}
		err = err ?: get(ka, &fid, &o);
		err = err ?: lose_name(ka, w, dir, s.names[i], &o, depth + 1,
				       up);
	}
	free(s.names);
	return err;
}

static bool on_chain(const struct chain *c, const struct lento_fid *fid)
{
	for (; c; c = c->up)
		if (lento_fid_eq(c->fid, fid))
			return true;
	return false;
}

/* @o at @name in @dir and @t at @name2 in @dir2 swap names. */
static int exchange(struct kapply *ka, const struct who *w,
		    const struct lento_fid *dir, const char *name,
		    struct cache_obj *o, const struct lento_fid *dir2,
		    const char *name2, const struct lento_fid *tfid)
{
	struct cache_obj t;
	struct rename_args a = { .dir = *dir, .dir2 = *dir2, .name = name,
				 .name2 = name2, .o = o, .t = &t,
				 .flags = LENTO_R_EXCHANGE };
	int err = get(ka, tfid, &t);

	if (err)
		return err;
	said(ka, dir, name, "exchanged with %s (RENAME_EXCHANGE)", name2);
	return rename_log(ka, w, &a);
}

/*
 * The lower's name of @o, which lives on as @lo->path, taken in the rows
 * by @there at @name2 in @dir2: that other object is not there in the
 * lower, so its name there is lost first -- moved on, or gone. The one
 * that waits on @o for the name @o has (a swap: "mv a t; mv b a; mv t
 * b") exchanges names with it. 0 when the name is free, 1 when @o has it
 * now or it stays taken (said), or -errno.
 */
static int free_name(struct kapply *ka, const struct who *w,
		     const struct lento_fid *dir, const char *name,
		     struct cache_obj *o, const struct lento_fid *dir2,
		     const char *name2, int depth, const struct chain *up)
{
	const struct chain me = { &o->fid, dir, name, up, false };
	struct lento_fid there;
	struct cache_obj x;
	int err = cache_lookup(ka->cache, dir2, name2, &there);

	if (err)
		return err == -ENOENT ? 0 : err;
	if (up && !up->dying && lento_fid_eq(&there, up->fid) &&
	    lento_fid_eq(dir2, up->dir) && !strcmp(name2, up->name))
		return exchange(ka, w, dir, name, o, dir2, name2, &there) ?: 1;
	/*
	 * Held by one that waits on this (a longer cycle of renames), or
	 * by a directory gone that this is in ("mv d/f t; rmdir d; mv t
	 * d"): no order of renames gets there.
	 */
	if (on_chain(up, &there) || depth > KAPPLY_DEPTH_MAX) {
		said(ka, dir, name, "left as it is: its name in the lower, "
		     "%s, is another's that cannot move first", name2);
		return 1;
	}
	err = get(ka, &there, &x);
	err = err ?: lose_name(ka, w, dir2, name2, &x, depth + 1, &me);
	if (err)
		return err;
	err = cache_lookup(ka->cache, dir2, name2, &there);
	if (err)
		return err == -ENOENT ? 0 : err;
	if (!lento_fid_eq(&there, &o->fid))
		said(ka, dir, name, "left as it is: its name in the lower, "
		     "%s, stays another's", name2);
	return 1;			/* @o has it (exchanged), or not */
}

/*
 * Is @dir2 (found by the lower's path, or else by the rows') a directory
 * @o may move into: one with a name, and not @o or below it? 0 if so, 1
 * if not, or -errno.
 */
static int parent_fits(struct kapply *ka, const struct lento_fid *dir2,
		       const struct cache_obj *o)
{
	char op[CACHE_PATH_MAX], dp[CACHE_PATH_MAX];
	struct cache_obj d;
	size_t n;
	int err = get(ka, dir2, &d);

	if (err)
		return err;
	if (d.type != LENTO_T_DIR || !d.nlink || lento_fid_eq(dir2, &o->fid))
		return 1;
	if (o->type != LENTO_T_DIR)
		return 0;
	err = cache_path(ka->cache, &o->fid, op, sizeof(op));
	err = err ?: cache_path(ka->cache, dir2, dp, sizeof(dp));
	if (err)
		return err == -ENOENT ? 1 : err;
	n = strlen(op);
	return !strncmp(dp, op, n) && dp[n] == '/';
}

/*
 * A lost name of @o, which lives on in the lower (@lo): moved to the
 * name the lower inode has (a RENAME), or, of an object that keeps
 * another name in the rows, one name less (0: the caller's UNLINK).
 * When the lower's name is in a directory lento does not know yet (made
 * after the last record the crash kept, and restated further on in the
 * block, deeper), or cannot be told, the name is left as it is: that
 * directory's listing finds the object under its new name and moves it
 * there (listed_known). Removing the name here would take the object's
 * last name at the server, which then has no object for that new name
 * to hold, and a directory's subtree with it. 1 when done, or -errno.
 */
static int lose_live(struct kapply *ka, const struct who *w,
		     const struct lento_fid *dir, const char *name,
		     struct cache_obj *o, struct lower_of *lo, int names,
		     int depth, const struct chain *up)
{
	bool other_names = o->type != LENTO_T_DIR && names > 1;
	char *slash = lo->path[0] ? strrchr(lo->path, '/') : NULL;
	struct rename_args a = { .dir = *dir, .name = name, .o = o };
	struct lento_fid there;
	int err;

	if (!slash) {
		if (other_names)
			return 0;
		said(ka, dir, name, "left as it is: the object lives on, "
		     "under a name that cannot be told");
		return 1;
	}
	*slash = 0;
	a.name2 = slash + 1;
	err = dir_at_path(ka, lo->path, &a.dir2);
	if (err == -ENOENT) {	/* moved where the block goes later */
		said(ka, dir, name, "left as it is: the object lives on in "
		     "%s, a directory not known yet", lo->path);
		return 1;
	}
	if (err)
		return err;
	err = parent_fits(ka, &a.dir2, o);
	if (err) {
		if (err < 0)
			return err;
		said(ka, dir, name, "left as it is: the lower's parent of "
		     "it, %s, is not a directory it can move into here",
		     lo->path);
		return 1;
	}
	if (lento_fid_eq(&a.dir2, dir) && !strcmp(a.name2, name))
		return 1;	/* not lost: an earlier move put it back */
	err = cache_lookup(ka->cache, &a.dir2, a.name2, &there);
	if (!err && lento_fid_eq(&there, &o->fid)) {
		if (other_names)
			return 0;
		said(ka, dir, name, "left as it is: a directory the rows "
		     "give two names");
		return 1;
	}
	err = free_name(ka, w, dir, name, o, &a.dir2, a.name2, depth, up);
	if (err)
		return err;
	err = cache_lookup(ka->cache, dir, name, &there);
	if (err == -ENOENT || (!err && !lento_fid_eq(&there, &o->fid)))
		return 1;	/* the chain moved it */
	err = err ?: get(ka, &o->fid, o);	/* its row as the chain left */
	if (err)
		return err;
	said(ka, dir, name, "moved to %s/%s (RENAME)", lo->path, a.name2);
	return rename_log(ka, w, &a) ?: 1;
}

/*
 * A name the listing lost, of @o: moved to a name the lower inode still
 * has (lose_live()), or gone (UNLINK, RMDIR; a directory's cached entries
 * before it, or the server would refuse). @up: the objects whose own
 * moves wait on this name (free_name()).
 *
 * @lo, the lower's answer, is on the heap: a directory's children are lost
 * by recursion (lose_children()), as deep as a path allows.
 */
/* cache_readdir: any name at all. */
static int any_name(void *arg, const char *name, const struct lento_fid *fid)
{
	(void)arg;
	(void)name;
	(void)fid;
	return 1;
}

static int lose_name(struct kapply *ka, const struct who *w,
		     const struct lento_fid *dir, const char *name,
		     struct cache_obj *o, int depth, const struct chain *up)
{
	struct lower_of *lo = calloc(1, sizeof(*lo));
	struct lento_fid there;
	uint32_t nlink;
	int names, err;

	if (!lo)
		return -ENOMEM;
	lo->ka = ka;
	names = cache_name_count(ka->cache, &o->fid);
	err = cache_handles(ka->cache, &o->fid, try_handle, lo);
	if (err < 0 || names < 0) {
		err = err < 0 ? err : names;
		goto out;
	}
	if (lo->found) {
		err = lose_live(ka, w, dir, name, o, lo, names, depth, up);
		if (err)
			goto out;
	}
	if (o->type == LENTO_T_DIR) {
		const struct chain me = { &o->fid, dir, name, up, true };

		err = lose_children(ka, w, &o->fid, depth, &me);
		/* Its link count moved. */
		err = err ?: get(ka, &o->fid, o);
		err = err ?: cache_readdir(ka->cache, &o->fid, any_name, NULL);
		if (err > 0) {	/* the server would refuse the RMDIR */
			said(ka, dir, name, "left as it is: names in it stay "
			     "(their objects live on where they cannot move "
			     "yet)");
			err = 0;
			goto out;
		}
		if (err)
			goto out;
	}
	/* A chain of moves may have given the name to another by now. */
	err = cache_lookup(ka->cache, dir, name, &there);
	if (err == -ENOENT || (!err && !lento_fid_eq(&there, &o->fid))) {
		err = 0;
		goto out;
	}
	if (err)
		goto out;
	nlink = lo->found && lo->sb.st_nlink < (nlink_t)names ?
		(uint32_t)lo->sb.st_nlink : (uint32_t)names - 1;
	said(ka, dir, name, "gone (%s; %u names left)",
	     o->type == LENTO_T_DIR ? "RMDIR" : "UNLINK", nlink);
	err = remove_name(ka, w, dir, name, o, nlink);
out:
	free(lo);
	return err < 0 ? err : 0;
}

/* A listed entry whose handle lento does not know: a new object. */
static int listed_new(struct kapply *ka, const struct who *w,
		      const struct lento_fid *dir,
		      const struct kapply_dirent *e, bool unknown)
{
	struct lento_attr a = { 0 };
	struct lento_fid made;
	struct stat sb;
	int fd = open_handle(ka, &e->h), err;

	if (fd < 0)
		return fd == -ESTALE ? 0 : fd;	/* gone again: nothing */
	/*
	 * lento's own, that a crash kept from being recorded (a listing
	 * step's): not a user's new object. The directory's next full
	 * listing removes it. (A handle known for an object removed here
	 * is the removal a crash lost: new again, mark or not.)
	 */
	err = fstat(fd, &sb) ? -errno :
	      unknown ? cache_fd_made_for(fd, &made) : -ENOENT;
	close(fd);
	if (!err) {
		said_warn(ka, dir, e->name, "not logged: lento made it for "
			  FIDFMT " and a crash kept it from being recorded",
			  FIDARG(&made));
		return 0;
	}
	if (err != -ENOENT)
		return err;
	said(ka, dir, e->name, "new (%s)", S_ISDIR(e->mode) ? "MKDIR" :
	     "CREATE");
	a.mode = sb.st_mode & 07777;
	a.uid = sb.st_uid;
	a.gid = sb.st_gid;
	a.size = (uint64_t)sb.st_size;
	a.atime_ns = sb.st_atim.tv_sec * 1000000000LL + sb.st_atim.tv_nsec;
	a.mtime_ns = sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
	a.ctime_ns = sb.st_ctim.tv_sec * 1000000000LL + sb.st_ctim.tv_nsec;
	a.rdev = (uint64_t)major(sb.st_rdev) << 32 | minor(sb.st_rdev);
	return new_obj(ka, w, dir, e->name, &e->h, type_of(e->mode), &a,
		       (uint32_t)sb.st_nlink, e->target,
		       e->target ? strlen(e->target) : 0);
}

struct old_name {
	struct kapply *ka;
	ino_t ino;		/* the lower inode the object has now */
	struct lento_fid dir;
	char name[LENTO_NAME_MAX + 1];
	bool found;
};

/* cache_names: a name of the object that the lower no longer gives it. */
static int find_old_name(void *arg, const struct lento_fid *dir,
			 const char *name)
{
	struct old_name *on = arg;
	char path[CACHE_PATH_MAX + LENTO_NAME_MAX + 2];
	int dfd = open_dir(on->ka, dir);
	struct stat sb;
	bool here;

	if (dfd >= 0) {
		here = !fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) &&
		       sb.st_ino == on->ino;
		close(dfd);
	} else if (cache_path(on->ka->cache, dir, path, CACHE_PATH_MAX)) {
		return 0;
	} else {
		/* A directory lento has no handle of: by its path. */
		strcat(path, "/");
		strcat(path, name);
		here = !cache_lstat(on->ka->cache, path, &sb) &&
		       sb.st_ino == on->ino;
	}
	if (here)
		return 0;
	on->dir = *dir;
	snprintf(on->name, sizeof(on->name), "%s", name);
	on->found = true;
	return 1;
}

/*
 * A listed entry of a known object: moved here from a name the lower no
 * longer has (a RENAME), or one more name (a LINK).
 */
static int listed_known(struct kapply *ka, const struct who *w,
			const struct lento_fid *dir,
			const struct kapply_dirent *e, struct cache_obj *o)
{
	struct lower_of lo = { .ka = ka };
	struct old_name on = { .ka = ka, .ino = (ino_t)e->h.ino };
	int err = cache_handles(ka->cache, &o->fid, try_handle, &lo);

	err = err < 0 ? err : cache_names(ka->cache, &o->fid, find_old_name,
					  &on);
	if (err < 0)
		return err;
	if (on.found) {
		struct rename_args a = { .dir = on.dir, .dir2 = *dir,
					 .name = on.name, .name2 = e->name,
					 .o = o };

		said(ka, dir, e->name, "moved here from %s (RENAME)",
		     on.name);
		return rename_log(ka, w, &a);
	}
	said(ka, dir, e->name, "one more name (LINK)");
	return add_link(ka, w, dir, e->name, o, lo.found ?
			(uint32_t)lo.sb.st_nlink : 0);
}

/* The gathered listing against the cache's: the differences, logged. */
static int apply_listing(struct kapply *ka, const struct kml_record *r)
{
	struct stale s = { .ka = ka };
	struct lento_fid dir, fid;
	struct cache_obj o;
	struct who w;
	int err = map(ka, &ka->list_dir, &dir);

	if (err == -ENOENT) {
		/* Done with, all the same: the position may pass it. */
		list_clear(ka);
		return unmapped(ka, r, &ka->list_dir, "the directory listed");
	}
	who_of(r, &w);
	/* A directory of 100,000 names: one sort, not a scan per name. */
	if (ka->nlist)
		qsort(ka->list, ka->nlist, sizeof(*ka->list), dirent_cmp);
	err = err ?: cache_readdir(ka->cache, &dir, stale_name, &s);
	/*
	 * First what went, so that the names are free for what came. A
	 * chain of moves (free_name()) may have put a name right already.
	 */
	for (size_t i = 0; !err && i < s.n; i++) {
		err = cache_lookup(ka->cache, &dir, s.names[i], &fid);
		if (err == -ENOENT || (!err && listed_as(ka, s.names[i],
							 &fid))) {
			err = 0;
			continue;
		}
		err = err ?: get(ka, &fid, &o);
		err = err ?: lose_name(ka, &w, &dir, s.names[i], &o, 0, NULL);
	}
	free(s.names);
	for (size_t i = 0; !err && i < ka->nlist; i++) {
		const struct kapply_dirent *e = &ka->list[i];

		if (!cache_lookup(ka->cache, &dir, e->name, &fid)) {
			int is = entry_is(ka, e, &fid);

			/* Its own inode, unrecorded: recorded now. */
			if (is == 2)
				err = record_handle(ka, &fid, &e->h);
			/* As it was, or moved here just now; or left. */
			else if (!is)
				said_warn(ka, &dir, e->name, "not logged: the "
				     "lower has another object here, but the "
				     "name stays the one left as it is");
			continue;
		}
		err = lookup_handle(ka, &e->h, &fid);
		err = err ?: get(ka, &fid, &o);
		/*
		 * A handle lento knows for an object it removed: a removal
		 * the log kept and the crash lost. The server dropped that
		 * object, so for lento it is a new one now.
		 */
		if (err == -ENOENT || (!err && !o.nlink))
			err = listed_new(ka, &w, &dir, e, err == -ENOENT);
		else if (!err)
			err = listed_known(ka, &w, &dir, e, &o);
	}
	list_clear(ka);
	return err;
}

static int k_dirent(struct kapply *ka, const struct kml_record *r)
{
	const struct kml_fh *d = &r->fh[PRESTO_KML_FH_DIR];
	int err;

	if (!ka->listing || d->ino != ka->list_dir.ino ||
	    d->gen != ka->list_dir.gen || ka->nlist >= ka->list_want)
		return -EINVAL;	/* the decoder's shapes, out of order */
	err = list_add(ka, r);
	if (!err && ka->nlist == ka->list_want)
		err = apply_listing(ka, r);
	return err;
}

/* ----------------------------------------------------------- dispatch */

/*
 * Apply one record, inside the batch's transaction: 0, KAPPLY_UNMAPPED
 * (an object lento cannot name: nothing done, ka->why says which; the
 * batch goes on -- a later record or recovery restates the object, and a
 * record that could not be applied today will not be applicable tomorrow
 * either), or -errno (the batch is rolled back).
 */
static int apply_record(struct kapply *ka, const struct kml_record *r)
{
	if (fault_at("kapply-record"))
		return -ENOMEM;
	if (fault_at("kapply-record-bad"))	/* one that never translates */
		return -EINVAL;
	if (ka->listing && r->op != PRESTO_KML_DIRENT) {
		/* Cut short (KML.md): void; the next mount restates it. */
		ka->voided++;
		list_clear(ka);
	}
	switch (r->op) {
	case PRESTO_KML_CREATE:
		/* A STORE folded into its file's CREATE (KML.md). */
		if (r->flags & PRESTO_KML_F_STORED)
			return k_new(ka, r) ?: k_store(ka, r);
		return k_new(ka, r);
	case PRESTO_KML_MKDIR:
	case PRESTO_KML_MKNOD:
	case PRESTO_KML_SYMLINK:
		return k_new(ka, r);
	case PRESTO_KML_LINK:
		return k_link(ka, r);
	case PRESTO_KML_UNLINK:
	case PRESTO_KML_RMDIR:
		return k_remove(ka, r);
	case PRESTO_KML_RENAME:
		return k_rename(ka, r);
	case PRESTO_KML_SETATTR:
		return k_setattr(ka, r);
	case PRESTO_KML_SETXATTR:
	case PRESTO_KML_REMOVEXATTR:
		return k_xattr(ka, r);
	case PRESTO_KML_STORE:
		return k_store(ka, r);
	case PRESTO_KML_RESYNC:
		return k_resync(ka, r);
	case PRESTO_KML_RESYNC_DIR:
		if (!r->entries) {
			ka->list_dir = r->fh[PRESTO_KML_FH_OBJ];
			return apply_listing(ka, r);
		}
		return k_resync_dir(ka, r);
	case PRESTO_KML_DIRENT:
		return k_dirent(ka, r);
	default:
		return -EINVAL;
	}
}

/* --------------------------------------------------------- quarantine */

bool kapply_transient(int err)
{
	switch (-err) {
	case ENOMEM:
	case EBUSY:		/* SQLite busy or locked */
	case EAGAIN:
	case EINTR:
	case ENOSPC:
	case EDQUOT:
	case EIO:
	case EROFS:
	case EUCLEAN:		/* the cache's database is damaged */
	case EMFILE:
	case ENFILE:
	case ENOBUFS:
	case ETIMEDOUT:
		return true;
	default:
		return false;
	}
}

/* @fid is to be fetched again: not valid, its content gone if clean. */
static int suspect(struct kapply *ka, const struct lento_fid *fid)
{
	struct cache_obj o;
	void *p;
	int err = obj_get(ka, fid, &o);

	if (err == -ENOENT)
		return 0;
	if (err)
		return err;
	for (size_t i = 0; i < ka->nsuspect; i++)
		if (lento_fid_eq(&ka->suspect[i], fid))
			return 0;
	o.valid = false;
	/*
	 * Other records not yet reintegrated build on what the cache has:
	 * that stays (their reintegration checks it against the server).
	 */
	if (!o.dirty)
		o.data = false;
	err = obj_put(ka, &o, NULL, 0);
	if (err)
		return err;
	p = array_grow(ka->suspect, &ka->suspect_cap, ka->nsuspect, 1,
		       sizeof(*ka->suspect));
	if (!p)
		return -ENOMEM;
	ka->suspect = p;
	ka->suspect[ka->nsuspect++] = *fid;
	return 0;
}

/*
 * The regular file @h of set-aside record @seq keeps its content under
 * CACHE/.lento/quarantine/VOLUME.SEQ.I (a second link, made before the
 * fetch that replaces the file): the change the record describes is not
 * reintegrated, and the user's data must not go with it. 0 if there was
 * nothing to keep (not a regular file, or no longer there), or -errno.
 */
static int keep_aside(struct kapply *ka, uint64_t seq, int i,
		      const struct kml_fh *h)
{
	char name[96];
	struct stat sb;
	int fd = open_handle(ka, h), err = 0;

	if (fd == -ESTALE || fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	snprintf(name, sizeof(name), CACHE_QUARANTINE_DIR "/%" PRIu32 ".%"
		 PRIu64 ".%d", ka->volume, seq, i);
	if (fstat(fd, &sb))
		err = -errno;
	else if (S_ISREG(sb.st_mode) && sb.st_nlink &&
		 linkat(fd, "", cache_dirfd(ka->cache), name, AT_EMPTY_PATH) &&
		 errno != EEXIST)
		err = -errno;
	close(fd);
	return err;
}

/* Record @r (its bytes @raw) set aside, in the batch's transaction. */
static int quarantine(struct kapply *ka, const struct kml_record *r,
		      const void *raw)
{
	int err = cache_quarantine_put(ka->cache, ka->volume, r->seq, r->op,
				       ka->fail.err, ka->fail.why,
				       wall_ms_now(), raw, raw ? r->len : 0);

	for (int i = 0; !err && i < PRESTO_KML_NFH; i++) {
		struct lento_fid fid;
		int e;

		if (!r->fh[i].ino)
			continue;
		e = keep_aside(ka, r->seq, i, &r->fh[i]);
		if (e)
			return e;
		e = lookup_handle(ka, &r->fh[i], &fid);
		if (e == -ENOENT)
			continue;
		err = e ?: suspect(ka, &fid);
	}
	if (err)
		return err;
	ka->quarantined++;
	snprintf(ka->quarantine_why, sizeof(ka->quarantine_why),
		 "KML record %" PRIu64 " (%s) set aside after %u failures: %s",
		 r->seq, kml_op_name(r->op), ka->fail.tries, ka->fail.why);
	ka->fail.seq = 0;
	ka->fail.tries = 0;
	return 0;
}

/* Record @r failed with @err: counted against it, unless transient. */
static void failed(struct kapply *ka, const struct kml_record *r, int err)
{
	if (kapply_transient(err)) {
		snprintf(ka->fail.why, sizeof(ka->fail.why), "KML record %"
			 PRIu64 " (%s): %s (transient: retried)", r->seq,
			 kml_op_name(r->op), strerror(-err));
		return;
	}
	if (ka->fail.seq != r->seq) {
		ka->fail.seq = r->seq;
		ka->fail.tries = 0;
	}
	ka->fail.tries++;
	ka->fail.err = err;
	snprintf(ka->fail.why, sizeof(ka->fail.why), "KML record %" PRIu64
		 " (%s): %s (failure %u of %d before it is set aside)", r->seq,
		 kml_op_name(r->op), strerror(-err), ka->fail.tries,
		 KAPPLY_TRIES);
}

/* ------------------------------------------------------------ batches */

int kapply_batch(struct kapply *ka, struct kread *kr, uint64_t limit,
		 uint32_t max, uint64_t until_ms, const char *poskey,
		 uint64_t *pos, lo_file_fn more, void *arg, const char **why)
{
	struct kml_record r;
	uint64_t last = *pos;
	uint32_t n = 0;
	int rc = 0, err = cache_begin(ka->cache);

	*why = NULL;
	/* The clock: after the first record, then every few. */
	while (!err && n < max && (!n || !until_ms ||
				   (n - 1) % KAPPLY_CLOCK_EVERY ||
				   lo_now_ms() < until_ms) &&
	       (rc = kread_next(kr, limit, &r, why, more, arg)) == 1) {
		if (r.seq == ka->fail.seq && ka->fail.tries >= KAPPLY_TRIES) {
			err = quarantine(ka, &r, kread_raw(kr));
			/*
			 * A listing that loses an entry is void: kept, it
			 * would hold the position below it for ever (the
			 * journal never caught up, the permit never given
			 * back), and the next mount restates it.
			 */
			if (!err && ka->listing) {
				ka->voided++;
				list_clear(ka);
			}
			/*
			 * Not set aside (its file's copy cannot be made, say):
			 * retried, and said, for consuming waits on it.
			 */
			if (err) {
				snprintf(ka->fail.why, sizeof(ka->fail.why),
					 "KML record %" PRIu64 " (%s) cannot be "
					 "set aside: %s; the journal waits for "
					 "it", r.seq, kml_op_name(r.op),
					 strerror(-err));
				*why = ka->fail.why;
			}
			/*
			 * The batch ends with it: committed, so that a later
			 * record's failure cannot roll it back and start its
			 * count again (two bad records in a row would take
			 * turns for ever).
			 */
			if (!err) {
				last = r.seq;
				n++;
				break;
			}
		} else {
			err = apply_record(ka, &r);
			if (err < 0) {
				failed(ka, &r, err);
				*why = ka->fail.why;
			} else if (r.seq == ka->fail.seq) {
				ka->fail.seq = 0;	/* it went through */
				ka->fail.tries = 0;
			}
		}
		if (err == KAPPLY_UNMAPPED)
			err = 0;	/* counted, and said by the caller */
		last = r.seq;
		n++;
	}
	/* A read that failed keeps what came before it. */
	if (!err && n) {
		/* A listing not yet complete is read again after a restart. */
		last = ka->listing && ka->list_seq <= last ? ka->list_seq - 1 :
		       last;
		err = rows_write(ka);
		err = err ?: cache_meta_set(ka->cache, poskey, (int64_t)last);
		err = err ?: cache_commit_lazy(ka->cache);
	}
	if (err || !n) {
		rows_forget(ka);
		cache_rollback(ka->cache);
		err = err ?: rc < 0 ? rc : 0;
		if (err)
			kapply_reset(ka);
		return err;
	}
	*pos = last;
	/*
	 * The records applied are committed (rows_write() emptied the rows):
	 * the objects they made keep their place in the made list, for the
	 * next batch's caller.
	 */
	if (rc < 0)
		list_clear(ka);
	return rc < 0 ? rc : (int)n;
}
