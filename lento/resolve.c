// SPDX-License-Identifier: MIT
/*
 * Resolving a conflict (client_int.h): lentoctl resolve VOLUME CHOICE, a
 * person's decision about the object a refused batch stopped at, after
 * which the volume reintegrates again.
 *
 *   local   this client's changes win: every pending record that names
 *           the object takes the server's version (the one the conflict
 *           reported) as its base, so the server's changes to that object
 *           are replaced by this client's; what the server changed
 *           that these records do not change stays, and this client
 *           fetches the object again once they are in. Nothing else
 *           moves.
 *   server  the server's version wins: this client's pending records of
 *           the object (those that change it, move, link or remove it) go
 *           from the log, and the object is fetched again, its
 *           directories listed again, once nothing else of this client's
 *           is pending on them.
 *   both    a regular file: this client's content goes first to a new
 *           file beside it, NAME.conflict-CLIENT-RECNO (made and written
 *           by records of its own, so it reaches the server too), then as
 *           server. Nothing of either side is lost.
 *
 * Only a conflict (ECONFLICT: an object changed at the server and here)
 * is resolved this way; other refusals say what to change (a name taken
 * is EEXIST: rename or remove the file here, then lentoctl reintegrate).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "array.h"
#include "client_int.h"
#include "cml.h"
#include "log.h"


enum choice { C_LOCAL, C_SERVER, C_BOTH };

struct name_at {
	struct lento_fid dir;
	char name[LENTO_NAME_MAX + 1];
};

/* The pending records of the conflict's object, and who made its change. */
struct of_obj {
	struct lento_fid fid;
	uint64_t blamed;		/* the record the server refused */
	uint32_t uid, gid;		/* its maker's */
	uint16_t ngroups;		/* and the maker's groups, copied */
	uint8_t groups[4 * LENTO_GROUPS_MAX];
	uint64_t *recnos;		/* records to drop (server, both) */
	struct lento_fid *dirs;		/* directories their names were in */
	size_t n, ndirs, cap;
	struct name_at *freed;		/* names the records to drop free */
	size_t nfreed, freedcap;
	uint64_t reused;		/* a record kept that takes one, or 0 */
	struct name_at reused_name;
};

/* Room is made by collect(): two directories a record at most. */
static void keep_dir(struct of_obj *w, const struct lento_fid *d)
{
	if (lento_fid_is_null(d))
		return;
	for (size_t i = 0; i < w->ndirs; i++)
		if (lento_fid_eq(&w->dirs[i], d))
			return;
	w->dirs[w->ndirs++] = *d;
}

static ssize_t freed_find(const struct of_obj *w, const struct lento_fid *d,
			  const char *name)
{
	for (size_t i = 0; i < w->nfreed; i++)
		if (lento_fid_eq(&w->freed[i].dir, d) &&
		    !strcmp(w->freed[i].name, name))
			return (ssize_t)i;
	return -1;
}

static int freed_add(struct of_obj *w, const struct lento_fid *d,
		     const char *name)
{
	struct name_at *p;

	if (freed_find(w, d, name) >= 0)
		return 0;
	p = array_grow(w->freed, &w->freedcap, w->nfreed, 1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	w->freed = p;
	w->freed[w->nfreed].dir = *d;
	snprintf(w->freed[w->nfreed++].name, LENTO_NAME_MAX + 1, "%s", name);
	return 0;
}

/* The name @r makes (in *@d, *@name), if it makes one. */
static bool takes_name(const struct lento_rec *r, const struct lento_fid **d,
		       const char **name)
{
	switch (r->op) {
	case LENTO_OP_CREATE:
	case LENTO_OP_MKDIR:
	case LENTO_OP_MKNOD:
	case LENTO_OP_SYMLINK:
	case LENTO_OP_LINK:
		*d = &r->dir;
		*name = r->name;
		return true;
	case LENTO_OP_RENAME:
		*d = &r->dir2;
		*name = r->name2;
		return true;
	}
	return false;
}

/*
 * A name the object's records free (its unlink, its rename's source) is
 * not free at the server once they are dropped: the object is there
 * still. A record kept that takes it would be refused (EEXIST), so the
 * first such is noted, and server and both refuse to drop.
 */
static int note_names(struct of_obj *w, const struct lento_rec *r, bool drop)
{
	const struct lento_fid *d;
	const char *name;
	ssize_t at;

	if (takes_name(r, &d, &name)) {
		at = freed_find(w, d, name);
		if (at >= 0 && !drop && !w->reused) {
			w->reused = r->recno;
			w->reused_name = w->freed[at];
		}
		if (at >= 0)	/* taken again: not free at either */
			w->freed[at] = w->freed[--w->nfreed];
	}
	if (!drop || !lento_fid_eq(&r->obj, &w->fid))
		return 0;
	if (r->op == LENTO_OP_UNLINK || r->op == LENTO_OP_RMDIR ||
	    r->op == LENTO_OP_RENAME)
		return freed_add(w, &r->dir, r->name);
	return 0;
}

static int collect(void *arg, const struct lento_rec *r, uint64_t body)
{
	struct of_obj *w = arg;
	bool drop = lento_fid_eq(&r->obj, &w->fid) ||
		    lento_fid_eq(&r->target, &w->fid);
	int err;

	(void)body;
	if (r->recno == w->blamed) {
		w->uid = r->uid;
		w->gid = r->gid;
		w->ngroups = r->ngroups;
		if (r->ngroups)
			memcpy(w->groups, r->groups, 4 * (size_t)r->ngroups);
	}
	err = note_names(w, r, drop);
	if (err || !drop)
		return err;
	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 16;
		uint64_t *p = realloc(w->recnos, cap * sizeof(*p));
		struct lento_fid *d;

		if (!p)
			return -ENOMEM;
		w->recnos = p;
		d = realloc(w->dirs, 2 * cap * sizeof(*d));
		if (!d)
			return -ENOMEM;
		w->dirs = d;
		w->cap = cap;
	}
	w->recnos[w->n++] = r->recno;
	keep_dir(w, &r->dir);
	keep_dir(w, &r->dir2);
	return 0;
}

/* ----------------------------------------------------------------- both */

/* A free name beside @name in @dir (its path @dirpath): NAME.conflict-... */
static int copy_name(struct client *cl, const struct lento_fid *dir,
		     const char *dirpath, const char *name, uint64_t recno,
		     char out[LENTO_NAME_MAX + 1], char *path)
{
	char suffix[64];
	struct lento_fid f;
	struct stat sb;

	for (int k = 0; k < 100; k++) {
		int len = k ? snprintf(suffix, sizeof(suffix), ".conflict-%"
				       PRIu32 "-%" PRIu64 "-%d",
				       cl->client_id, recno, k) :
			      snprintf(suffix, sizeof(suffix), ".conflict-%"
				       PRIu32 "-%" PRIu64, cl->client_id,
				       recno);
		int keep = (int)strlen(name);

		if (keep + len > LENTO_NAME_MAX)
			keep = LENTO_NAME_MAX - len;
		snprintf(out, LENTO_NAME_MAX + 1, "%.*s%s", keep, name, suffix);
		if (snprintf(path, CACHE_PATH_MAX, "%s/%s", dirpath, out) >=
		    CACHE_PATH_MAX)
			return -ENAMETOOLONG;
		if (cache_lookup(cl->cache, dir, out, &f) == -ENOENT &&
		    cache_lstat(cl->cache, path, &sb) == -ENOENT)
			return 0;
	}
	return -EEXIST;
}

static int64_t ns_of(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/*
 * This client's version of regular file @fid, at @path in @dir, to a new
 * file beside it, with its CREATE and STORE records. Its new path in
 * @copy.
 */
static int keep_copy(struct client *cl, struct vol *v,
		     const struct of_obj *w, const char *path, char *copy)
{
	int to, err;
	char tmp[CACHE_PATH_MAX], dirpath[CACHE_PATH_MAX];
	char name[LENTO_NAME_MAX + 1], newname[LENTO_NAME_MAX + 1];
	struct cache_obj d, g;
	struct lento_rec r;
	struct lento_fid dir;
	struct stat sb;

	err = cache_name_of(cl->cache, &w->fid, &dir, name);
	err = err ?: cache_obj_get(cl->cache, &dir, &d, NULL, 0);
	err = err ?: cache_path(cl->cache, &dir, dirpath, sizeof(dirpath));
	err = err ?: copy_name(cl, &dir, dirpath, name, w->blamed, newname,
			       copy);
	if (err)
		return err;
	tmp[0] = '\0';
	to = cache_tmpfile(cl->cache, tmp);
	err = to < 0 ? to :
	      cache_copy_content(cache_dirfd(cl->cache), path, to, &sb);
	if (!err && fsync(to))
		err = -errno;
	if (to >= 0)
		close(to);
	if (err)
		goto undo_tmp;

	memset(&g, 0, sizeof(g));
	g.type = LENTO_T_REG;
	g.nlink = 1;
	g.attr.valid = LENTO_A_ALL & ~LENTO_A_RDEV;
	g.attr.mode = sb.st_mode & 07777;
	g.attr.uid = sb.st_uid;
	g.attr.gid = sb.st_gid;
	g.attr.size = (uint64_t)sb.st_size;
	g.attr.atime_ns = ns_of(&sb.st_atim);
	g.attr.mtime_ns = ns_of(&sb.st_mtim);
	g.attr.ctime_ns = wall_ms() * 1000000;
	g.valid = g.data = true;
	g.used_ms = wall_ms();
	err = cml_mint_fid(cache_cml(cl->cache), v->cv.id, &g.fid);
	err = err ?: cache_install(cl->cache, tmp, copy, &g);
	if (err)
		goto undo_tmp;

	memset(&r, 0, sizeof(r));
	r.op = LENTO_OP_CREATE;
	r.uid = w->uid;
	r.gid = w->gid;
	r.groups = w->ngroups ? w->groups : NULL;
	r.ngroups = w->ngroups;
	r.time_ns = g.attr.ctime_ns;
	r.dir = dir;
	r.base_dir = d.vv;
	r.obj = g.fid;
	r.type = LENTO_T_REG;
	r.attr = g.attr;
	r.attr.valid = LENTO_A_MODE | LENTO_A_UID | LENTO_A_GID |
		       LENTO_A_ATIME | LENTO_A_MTIME | LENTO_A_CTIME;
	r.attr.size = 0;
	snprintf(r.name, sizeof(r.name), "%s", newname);
	err = cache_obj_put(cl->cache, &g, NULL, 0);
	err = err ?: cache_dirent_put(cl->cache, &dir, newname, &g.fid);
	err = err ?: cml_append(cache_cml(cl->cache), &r, 0);
	if (!err) {
		memset(&r.attr, 0, sizeof(r.attr));
		r.op = LENTO_OP_STORE;
		r.dir = (struct lento_fid){ 0 };
		r.base_dir = (struct lento_vv){ 0 };
		r.type = 0;
		r.name[0] = '\0';
		r.attr.valid = LENTO_A_SIZE | LENTO_A_MTIME | LENTO_A_CTIME;
		r.attr.size = g.attr.size;
		r.attr.mtime_ns = g.attr.mtime_ns;
		r.attr.ctime_ns = g.attr.ctime_ns;
		err = cml_append(cache_cml(cl->cache), &r, g.attr.size);
	}
	if (err) {
		cache_unlink(cl->cache, copy, 0);
		return err;
	}
	cache_handle_update(cl->cache, &g.fid, copy);
	/* A name presto may hold a negative dentry of. */
	kclient_clear_flags(cl, v->cv.id, dirpath);
	return 0;
undo_tmp:
	if (tmp[0])
		cache_unlink(cl->cache, tmp, 0);
	return err;
}

/* --------------------------------------------------------------- server */

/* The object and the directories its dropped names were in: fetch again. */
static int refetch(struct client *cl, const struct of_obj *w)
{
	struct cache_obj o;
	int err = 0;

	for (size_t i = 0; !err && i <= w->ndirs; i++) {
		const struct lento_fid *f = i < w->ndirs ? &w->dirs[i] :
					    &w->fid;

		if (cache_obj_get(cl->cache, f, &o, NULL, 0))
			continue;	/* gone here: its directory brings it */
		/*
		 * Not valid: listed or fetched again when next used. What
		 * this client still changes is kept until that is in (a
		 * dirty directory is not listed, and stays not valid until
		 * then); the rest is dropped, so that no validation of an
		 * unchanged version makes it current again.
		 */
		err = cache_obj_set_state(cl->cache, f, false,
					  o.dirty ? o.data : false);
	}
	return err;
}

static int drop_all(struct client *cl, const struct of_obj *w)
{
	int err = 0;

	for (size_t i = 0; !err && i < w->n; i++)
		err = cml_drop(cache_cml(cl->cache), w->recnos[i]);
	return err;
}

/* ------------------------------------------------------------- command */

static int parse(struct ctl_req *r, struct client *cl, int argc,
		 char **argv, struct vol **vp, enum choice *c)
{
	static const char *const names[] = { "local", "server", "both" };
	struct vol *v;

	(void)argc;
	for (*c = C_LOCAL; *c <= C_BOTH; (*c)++)
		if (!strcmp(argv[1], names[*c]))
			break;
	if (*c > C_BOTH) {
		ctl_error(r, "%s: not a choice (local, server or both)",
			  argv[1]);
		return -EINVAL;
	}
	v = vol_by_name(cl, argv[0]);
	if (!v) {
		ctl_error(r, "%s: no such volume here", argv[0]);
		return -ENOENT;
	}
	if (!v->stuck || v->last.code != LP_ECONFLICT) {
		ctl_error(r, "volume %s has no conflict to resolve%s%s",
			  v->cv.name, v->stuck ? ": its last batch was "
			  "refused with " : "", v->stuck ?
			  lp_err_name(v->last.code) : "");
		return -EINVAL;
	}
	*vp = v;
	return 0;
}

/* What resolution @c does to @w's object: 0 or -errno. */
static int apply(struct ctl_req *r, struct client *cl, struct vol *v,
		 struct of_obj *w, enum choice c, char *copy)
{
	char path[CACHE_PATH_MAX];
	struct cache_obj o;
	int err;

	if (c == C_LOCAL) {
		err = cml_rebase(cache_cml(cl->cache), v->cv.id, &w->fid,
				 &v->last.current);
		/*
		 * Not valid: the copy here lacks what the server changed
		 * and these records do not; once they are in, it is
		 * fetched again (reint.c, stale_when_clean()).
		 */
		if (err >= 0)
			err = cache_obj_set_vv(cl->cache, &w->fid,
					       &v->last.current, true);
		return err < 0 ? err : 0;
	}
	if (w->reused) {
		ctl_error(r, "volume %s: %s: record %" PRIu64 " of this "
			  "client takes the name %s that the object's dropped "
			  "records free, which it keeps at the server: move "
			  "that away here, then resolve again, or choose "
			  "local", v->cv.name, c == C_BOTH ? "both" : "server",
			  w->reused, w->reused_name.name);
		return -EINVAL;
	}
	if (c == C_BOTH) {
		err = cache_obj_get(cl->cache, &w->fid, &o, NULL, 0);
		err = err ?: cache_path(cl->cache, &w->fid, path,
					sizeof(path));
		if (err == -ENOENT) {
			ctl_error(r, "volume %s: both: this client removed "
				  "the object; keep the server's version "
				  "(server) or the removal (local)",
				  v->cv.name);
			return -EINVAL;
		}
		if (!err && o.type != LENTO_T_REG) {
			ctl_error(r, "volume %s: both: the object is not a "
				  "regular file; choose local or server",
				  v->cv.name);
			return -EINVAL;
		}
		err = err ?: keep_copy(cl, v, w, path, copy);
		if (err)
			return err;
	}
	err = drop_all(cl, w);
	err = err ?: reint_dirty_refresh(cl, v->cv.id);
	return err ?: refetch(cl, w);
}

int cmd_resolve(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	static const char *const what[] = {
		"this client's version will replace the server's",
		"the server's version replaces this client's",
		"the server's version under its name, this client's beside it",
	};
	struct client *cl = ctx;
	struct of_obj w = { 0 };
	char copy[CACHE_PATH_MAX] = "";
	struct cml_opt_stats os;
	struct vol *v;
	enum choice c;
	int err = parse(r, cl, argc, argv, &v, &c);

	if (err)
		return err;
	w.fid = v->last.fid;
	w.blamed = v->last.recno;
	/* What was changed here since is judged as it will be sent. */
	err = reint_optimise(cl, v, &os);
	err = err ?: cache_begin(cl->cache);
	if (err)
		goto out;
	err = cml_list(cache_cml(cl->cache), v->cv.id, collect, &w);
	err = err < 0 ? err : apply(r, cl, v, &w, c, copy);
	err = err ?: cache_commit(cl->cache);
	if (err) {
		cache_rollback(cl->cache);
		if (copy[0])	/* made on the disk, not in the cache */
			cache_unlink(cl->cache, copy, 0);
		goto out;
	}
	/* Its names and content as the server has them, next time used. */
	if (c != C_LOCAL) {
		kclient_break_fid(cl, &w.fid);
		for (size_t i = 0; i < w.ndirs; i++)
			kclient_break_fid(cl, &w.dirs[i]);
	}
	log_info("volume %s: conflict on " FIDFMT " resolved: %s (%zu records "
		 "dropped%s%s)", v->cv.name, FIDARG(&w.fid), what[c],
		 c == C_LOCAL ? 0 : w.n, copy[0] ? ", kept as " : "", copy);
	v->stuck = false;
	v->force = true;
	v->retry_at_ms = 0;
	v->log_changed = true;
	if (ctl_json(r)) {
		struct jw *o = ctl_out(r);

		jw_obj_begin(o);
		jw_key(o, "dropped");
		jw_uint(o, c == C_LOCAL ? 0 : w.n);
		jw_key(o, "copy");
		if (copy[0])
			jw_str(o, copy);
		else
			jw_null(o);
		jw_obj_end(o);
		jw_raw(o, "\n", 1);
	} else {
		jw_printf(ctl_out(r), "volume %s: %s%s%s; reintegrating\n",
			  v->cv.name, what[c], copy[0] ? ": " : "", copy);
	}
	reint_kick(cl);
out:
	if (err && err != -EINVAL)
		ctl_error(r, "volume %s: resolving: %s", v->cv.name,
			  strerror(-err));
	free(w.recnos);
	free(w.dirs);
	free(w.freed);
	return err;
}
