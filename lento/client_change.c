// SPDX-License-Identifier: MIT
/*
 * Local changes (client_int.h) made through the control socket -- mkdir,
 * create, write, setattr, unlink, rmdir, rename, symlink, link, setxattr,
 * removexattr -- on the cache tree, each with its CML record. The same
 * changes made through a presto mount come from its journal
 * (kml_apply.c), with the same rows and records.
 *
 * A change needs, when connected, the parent's listing (so a name's
 * existence is known) and the volume's write-back permit; disconnected,
 * what is cached and a local permit. The change is made on the disk
 * first, then the cache's rows and the CML record go in one SQLite
 * transaction; if its COMMIT fails the disk change is undone: what a
 * change replaces or removes (a file's old content, a removed name, a
 * rename's target) waits in .lento/tmp until the COMMIT and is put back
 * if it fails. A COMMIT that went in stands, though the sync after it
 * fails (the error is reported, and the cache refuses to go on).
 * A file's new content is written to a temporary file and synced, on
 * the worker's thread (see Bodies below), then renamed into place.
 *
 * Records name, per object, the server's version this client knows of it
 * (the cache's vv, which local changes leave alone): cml.h's base rule.
 * Permissions are the server's to check at reintegration: until presto
 * does it in the kernel, these commands do not check them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client_int.h"
#include "cml.h"
#include "fault.h"
#include "log.h"
#include "vv.h"
#include "worker.h"

#define DIR_MODE	0755
#define FILE_MODE	0644
/* A test's slow disk: longer than a host test's heartbeat timeout. */
#define BODY_SLOW_MS	2000

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* What every change says when it succeeded. */
static int done_out(struct op *op)
{
	if (ctl_json(op->r))
		jw_raw(ctl_out(op->r), "{}\n", 3);
	return 0;
}

static int fail(struct op *op, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct op *op, int err, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ctl_error(op->r, "%s: %s", msg, cache_strerror(err));
	return err;
}

/*
 * The volume's permit for a change: 0 (held; or disconnected, a local
 * permit), OP_WAIT, or -errno.
 */
static int need_permit(struct op *op, struct vol *v)
{
	struct client *cl = op->cl;

	if (!cl->id_assigned) {
		ctl_error(op->r, "this cache has not met its server yet, so "
			  "it has no client id to name new objects with");
		return -ENOTCONN;
	}
	if (!connected(cl))
		return 0;
	if (v->revoked || v->releasing) {
		/* Given back first, then asked for again: no starving. */
		op->wait_vol = v->cv.id;
		return OP_WAIT;
	}
	if (v->permit && lo_now_ms() < v->expires_ms)
		return 0;
	return op_need(op, J_ACQUIRE, v->cv.id, NULL, NULL);
}

static void rec_init(struct lento_rec *r, const struct op *op, uint16_t code)
{
	memset(r, 0, sizeof(*r));
	r->op = code;
	r->uid = op->uid;
	r->gid = op->gid;
	r->groups = op->ngroups ? op->groups : NULL;
	r->ngroups = op->ngroups;
	r->time_ns = now_ns();
}

/* The record goes into the log; every object it names is dirty now. */
static int log_rec(struct client *cl, struct lento_rec *r, uint64_t body)
{
	const struct lento_fid *f[] = { &r->dir, &r->obj, &r->dir2,
					&r->target };
	int err = cml_append(cache_cml(cl->cache), r, body);

	for (size_t i = 0; !err && i < 4; i++)
		if (!lento_fid_is_null(f[i]))
			err = cache_dirty_add(cl->cache, f[i], 1);
	return err;
}

/* A change is in the log: the volume's reintegration learns of it. */
static void changed(struct vol *v)
{
	v->last_change_ms = lo_now_ms();
	v->log_changed = true;
}

/*
 * Commit the change begun, unless @err; *@logged (if given) says whether
 * it was committed, which it may be though the sync after fails: then
 * what the caller did on the disk stays, as the log has it.
 */
/*
 * What a change moved to @aside first, back at @path. False, and said,
 * if it cannot be: it stays there until lento starts again.
 */
static bool put_back(struct cache *c, const char *aside, const char *path)
{
	int err = cache_rename(c, aside, path, RENAME_NOREPLACE);

	if (!err)
		return true;
	log_err("%s: could not be put back from %s: %s; it stays there until "
		"lento starts again", path, aside, cache_strerror(err));
	return false;
}

/* Directory @path holds nothing (a removal moved it aside unchecked). */
static bool dir_empty(struct cache *c, const char *path)
{
	int fd = cache_open_obj(c, path, O_RDONLY | O_DIRECTORY, 0);
	struct dirent *de;
	bool empty = true;
	DIR *d;

	if (fd < 0)
		return false;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return false;
	}
	while (empty && (de = readdir(d)))
		empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
	closedir(d);
	return empty;
}

/*
 * Move @path (of an object of @type) aside, into @aside, for a change
 * that removes or replaces it. 0 and *@moved false if nothing is there
 * (an object lento lists but could not make, as a device node); a
 * directory that is not empty on the disk is put back: -ENOTEMPTY.
 */
static int move_aside(struct client *cl, const char *path, uint8_t type,
		      char *aside, bool *moved)
{
	int err = cache_move_aside(cl->cache, path, aside);

	*moved = !err;
	if (err)
		return err == -ENOENT ? 0 : err;
	if (type == LENTO_T_DIR && !dir_empty(cl->cache, aside)) {
		if (put_back(cl->cache, aside, path))
			*moved = false;
		return -ENOTEMPTY;
	}
	return 0;
}

static int finish(struct client *cl, struct vol *v, int err, bool *logged)
{
	err = err ?: cache_commit_lazy(cl->cache);
	if (logged)
		*logged = !err;
	if (err) {
		cache_rollback(cl->cache);
		return err;
	}
	changed(v);
	return cache_sync(cl->cache);
}

/* A directory's times (and link count) move with its entries. */
static int touch_dir(struct client *cl, const struct lento_fid *dir,
		     int nlink_delta, int64_t t)
{
	struct cache_obj d;
	int err = cache_obj_get(cl->cache, dir, &d, NULL, 0);

	if (err)
		return err;
	d.nlink += nlink_delta;
	d.attr.mtime_ns = d.attr.ctime_ns = t;
	d.dirty = true;
	return cache_obj_put(cl->cache, &d, NULL, 0);
}

/* Resolve the parent of a new name: 0, OP_WAIT or -errno. */
static int resolve_new(struct op *op, const char *path, struct resolved *res)
{
	int err = resolve(op, path, false, res);

	if (err)
		return err;
	if (!lento_fid_is_null(&res->fid)) {
		ctl_error(op->r, "%s: exists", path);
		return -EEXIST;
	}
	return need_permit(op, res->vol);
}

/*
 * A new object of @type at @res with its attributes, logged. @fd is the
 * object the caller made there (O_PATH will do): its name may be
 * another's by now, and that other must not get the attributes, nor be
 * recorded as this object's inode.
 */
static int new_object(struct op *op, struct resolved *res, uint16_t code,
		      uint8_t type, uint32_t mode, const char *target,
		      int fd, struct cache_obj *o, bool *logged)
{
	struct client *cl = op->cl;
	struct cache_obj parent;
	struct lento_rec r;
	int err;

	*logged = false;
	rec_init(&r, op, code);
	err = cache_obj_get(cl->cache, &res->parent, &parent, NULL, 0);
	err = err ?: cml_mint_fid(cache_cml(cl->cache), res->vol->cv.id,
				  &r.obj);
	if (err)
		return err;
	memset(o, 0, sizeof(*o));
	o->fid = r.obj;
	o->type = type;
	o->nlink = type == LENTO_T_DIR ? 2 : 1;
	o->attr.valid = LENTO_A_ALL & ~LENTO_A_RDEV;
	o->attr.mode = mode;
	o->attr.uid = op->uid;
	o->attr.gid = op->gid;
	o->attr.size = target ? strlen(target) : 0;
	o->attr.atime_ns = o->attr.mtime_ns = o->attr.ctime_ns = r.time_ns;
	o->valid = o->data = o->dirty = true;
	o->used_ms = wall_ms();
	r.dir = res->parent;
	r.base_dir = parent.vv;
	r.type = type;
	r.attr = o->attr;
	r.attr.valid = LENTO_A_MODE | LENTO_A_UID | LENTO_A_GID |
		       LENTO_A_ATIME | LENTO_A_MTIME | LENTO_A_CTIME;
	r.attr.size = 0;
	snprintf(r.name, sizeof(r.name), "%s", res->name);
	if (target) {
		r.data = target;
		r.data_len = strlen(target);
	}
	err = cache_set_attrs_fd(fd, o);
	err = err ?: cache_begin(cl->cache);
	err = err ?: cache_obj_put(cl->cache, o, target,
				   target ? strlen(target) : 0);
	err = err ?: cache_dirent_put(cl->cache, &res->parent, res->name,
				      &o->fid);
	err = err ?: touch_dir(cl, &res->parent, type == LENTO_T_DIR,
			       r.time_ns);
	err = err ?: log_rec(cl, &r, 0);
	err = finish(cl, res->vol, err, logged);
	if (*logged)
		cache_handle_update_fd(cl->cache, &o->fid, fd);
	return err;
}

/* Each path of the command in turn; op->next_arg survives the waits. */
static int each_path(struct op *op, int (*one)(struct op *op,
					       const char *path))
{
	while (op->next_arg < op->argc) {
		int err = one(op, op->argv[op->next_arg]);

		if (err)
			return err;
		op->next_arg++;
	}
	return done_out(op);
}

/* ---------------------------------------------------------------- mkdir */

static int mkdir_one(struct op *op, const char *path)
{
	struct cache *c = op->cl->cache;
	struct resolved res;
	struct cache_obj o;
	bool logged = false;
	int fd, err = resolve_new(op, path, &res);

	if (err)
		return err;
	err = cache_mkdir(c, res.path, 0700);
	if (err)
		return fail(op, err, "%s", path);
	/* What was made, at once: the name may be another's next. */
	fd = cache_open_obj(c, res.path, O_PATH | O_DIRECTORY, 0);
	err = fd < 0 ? fd : new_object(op, &res, LENTO_OP_MKDIR, LENTO_T_DIR,
				       DIR_MODE, NULL, fd, &o, &logged);
	if (fd >= 0)
		close(fd);
	if (err) {
		if (!logged)
			cache_unlink(c, res.path, AT_REMOVEDIR);
		return fail(op, err, "%s", path);
	}
	return 0;
}

static int mkdir_step(struct op *op)
{
	return each_path(op, mkdir_one);
}

int cmd_mkdir(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	return op_start(ctx, r, argc, argv, mkdir_step);
}

/* --------------------------------------------------------------- create */

/* A new empty file at @res (resolved by resolve_new). */
static int create_at(struct op *op, struct resolved *res, const char *path,
		     struct cache_obj *o)
{
	struct cache *c = op->cl->cache;
	int fd = cache_open_obj(c, res->path, O_WRONLY | O_CREAT | O_EXCL,
				0600), err;
	bool logged;

	if (fd < 0)
		return fail(op, fd, "%s", path);
	err = new_object(op, res, LENTO_OP_CREATE, LENTO_T_REG, FILE_MODE,
			 NULL, fd, o, &logged);
	close(fd);
	if (err) {
		if (!logged)
			cache_unlink(c, res->path, 0);
		return fail(op, err, "%s", path);
	}
	return 0;
}

static int create_one(struct op *op, const char *path)
{
	struct resolved res;
	struct cache_obj o;
	int err = resolve_new(op, path, &res);

	return err ?: create_at(op, &res, path, &o);
}

static int create_step(struct op *op)
{
	return each_path(op, create_one);
}

int cmd_create(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	return op_start(ctx, r, argc, argv, create_step);
}

/* -------------------------------------------------------------- symlink */

static int symlink_step(struct op *op)
{
	struct cache *c = op->cl->cache;
	const char *target = op->argv[1];
	struct resolved res;
	struct cache_obj o;
	bool logged = false;
	int fd, err;

	if (!*target || strlen(target) > LENTO_SYMLINK_MAX) {
		ctl_error(op->r, "a symlink's target is 1 to %d bytes",
			  LENTO_SYMLINK_MAX);
		return -EINVAL;
	}
	err = resolve_new(op, op->argv[0], &res);
	if (err)
		return err;
	err = cache_symlink(c, target, res.path);
	if (err)
		return fail(op, err, "%s", op->argv[0]);
	/* The symlink itself (O_PATH, not followed), at once. */
	fd = cache_open_obj(c, res.path, O_PATH, 0);
	err = fd < 0 ? fd : new_object(op, &res, LENTO_OP_SYMLINK,
				       LENTO_T_SYMLINK, 0777, target, fd, &o,
				       &logged);
	if (fd >= 0)
		close(fd);
	if (err) {
		if (!logged)
			cache_unlink(c, res.path, 0);
		return fail(op, err, "%s", op->argv[0]);
	}
	return done_out(op);
}

int cmd_symlink(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	return op_start(ctx, r, argc, argv, symlink_step);
}

/* ------------------------------------------------------------- bodies */

/*
 * Bodies. A change's new content -- a write's bytes, a file cut or
 * stretched to a new size -- goes into a synced temporary file on the
 * worker's thread (worker.h): copying and syncing a large file takes
 * seconds on a busy disk, and meanwhile the loop answers the kernel's
 * upcalls and the server's heartbeats (a server takes a client silent
 * for three of them for gone). The op waits for its body and owns it;
 * an op that goes first (its asker gone, lento stopping) leaves the job
 * to remove the file when it is done.
 */
struct op_body {
	struct wk_job wk;	/* first: the job is the body */
	struct client *cl;
	struct op *op;		/* NULL once the op is gone */
	int in, out;		/* the source (-1: text), the new file */
	char *text;		/* or the bytes themselves */
	uint64_t len;		/* bytes of the source */
	uint64_t size;		/* the body's size: len, cut or stretched */
	/*
	 * A new size: the object, the version and the cache's file (inode,
	 * ctime: a local write moves them, not the version) it was made
	 * from.
	 */
	struct lento_fid fid;
	struct lento_vv vv;
	ino_t ino;
	struct timespec ctime;
	bool ready;		/* made, or failed (err) */
	int err;
	char tmp[CACHE_PATH_MAX];	/* "" once installed or removed */
};

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t k = write(fd, p, len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

/* On the worker: nothing of the loop's is touched. */
static void body_run(struct wk_job *wk)
{
	struct op_body *b = (struct op_body *)wk;
	int err;

	fault_hold("body-slow", BODY_SLOW_MS);	/* a disk slow to take it */
	err = b->in >= 0 ? cache_copy_fd(b->in, b->out, (off_t)b->len) :
			   write_all(b->out, b->text, b->len);
	if (!err && b->size != b->len && ftruncate(b->out, (off_t)b->size))
		err = -errno;
	if (!err && fsync(b->out))
		err = -errno;
	b->err = err;
}

static void body_free(struct op_body *b)
{
	if (b->tmp[0])
		cache_unlink(b->cl->cache, b->tmp, 0);
	free(b->text);
	free(b);
}

static void body_done(struct wk_job *wk, bool ran)
{
	struct op_body *b = (struct op_body *)wk;

	if (b->in >= 0)
		close(b->in);
	close(b->out);
	b->in = b->out = -1;
	if (!ran && !b->err)
		b->err = -ECANCELED;
	b->ready = true;
	if (!b->op)
		body_free(b);
	else
		op_wake_body(b->cl, b->op);
}

void op_body_drop(struct op *op)
{
	struct op_body *b = op->body;

	if (!b)
		return;
	op->body = NULL;
	if (b->ready)
		body_free(b);
	else
		b->op = NULL;	/* body_done() frees it */
}

/*
 * Start making @op's body: @len bytes of @in (taken; -1: of @text, not
 * taken), cut or stretched to @size. OP_WAIT, or -errno with @in closed.
 */
static int body_start(struct op *op, int in, const char *text, uint64_t len,
		      uint64_t size)
{
	struct op_body *b;
	int err;

	op_body_drop(op);	/* one made from what is gone */
	b = calloc(1, sizeof(*b));
	err = b ? 0 : -ENOMEM;

	if (!err && text && !(b->text = malloc(len ? len : 1)))
		err = -ENOMEM;
	if (!err) {
		b->out = cache_tmpfile(op->cl->cache, b->tmp);
		err = b->out < 0 ? b->out : 0;
		if (err)
			b->tmp[0] = 0;
	}
	if (err) {
		if (in >= 0)
			close(in);
		if (b)
			free(b->text);
		free(b);
		return fail(op, err, "%s: its new content", op->argv[0]);
	}
	if (text)
		memcpy(b->text, text, len);
	b->wk.run = body_run;
	b->wk.done = body_done;
	b->cl = op->cl;
	b->op = op;
	b->in = in;
	b->len = len;
	b->size = size;
	op->body = b;
	op->wait_body = true;
	wk_submit(op->cl->wk, &b->wk);
	return OP_WAIT;
}

/*
 * The op's body once made: 0 (its file in b->tmp), OP_WAIT while it is
 * being made, -errno if it could not be.
 */
static int body_ready(struct op *op, const char *what)
{
	if (!op->body->ready) {
		op->wait_body = true;
		return OP_WAIT;
	}
	return op->body->err ? fail(op, op->body->err, "%s", what) : 0;
}

/* ---------------------------------------------------------------- write */

/*
 * The content to write, TEXT or @FILE's, into the op's body: checked
 * before anything is changed, so that a bad @FILE leaves no file made.
 */
static int write_body_start(struct op *op)
{
	const char *arg = op->argv[1];
	struct stat sb;
	int fd, err = 0;

	if (arg[0] != '@')
		return body_start(op, -1, arg, strlen(arg), strlen(arg));
	/* lento reads it, from its own directory: no guessing. */
	if (arg[1] != '/') {
		ctl_error(op->r, "%s: @FILE is an absolute path", arg + 1);
		return -EINVAL;
	}
	/* Not waiting for a writer: a fifo is refused below, not opened. */
	fd = open(arg + 1, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb))
		err = -errno;
	else if (!S_ISREG(sb.st_mode))
		err = S_ISDIR(sb.st_mode) ? -EISDIR : -EINVAL;
	if (err) {
		if (fd >= 0)
			close(fd);
		return fail(op, err, "%s", arg + 1);
	}
	return body_start(op, fd, NULL, (uint64_t)sb.st_size,
			  (uint64_t)sb.st_size);
}

/*
 * @tmp, a new synced body for @res's file, in place with record @r (whose
 * body is @body bytes of it) and @res->obj's rows: all of it, or none,
 * and @tmp gone either way.
 */
static int replace_body(struct op *op, struct resolved *res, const char *tmp,
			struct lento_rec *r, uint64_t body)
{
	struct client *cl = op->cl;
	struct cache *c = cl->cache;
	char old[CACHE_PATH_MAX];
	struct cache_obj *o = &res->obj;
	bool aside = false;
	int fd = -1, undo, err = cache_begin(cl->cache);

	if (err) {
		cache_unlink(c, tmp, 0);
		return err;
	}
	err = cache_obj_put(cl->cache, o, NULL, 0);
	err = err ?: log_rec(cl, r, body);
	/* A new body keeps the file's xattrs; in place once logged. */
	err = err ?: cache_copy_xattrs(cl->cache, res->path, tmp);
	/*
	 * The old body stays at @old until the record is committed: a
	 * COMMIT that fails puts it back, so that the cache never holds
	 * content its log does not account for.
	 */
	if (!err) {
		err = cache_link_aside(cl->cache, res->path, old);
		aside = !err;
		if (err == -ENOENT)	/* no file yet: nothing to keep */
			err = 0;
	}
	/* @fd: the new body's inode, whatever takes its name after. */
	err = err ?: cache_install_fd(cl->cache, tmp, res->path, o, &fd);
	if (err)
		cache_rollback(cl->cache);
	else
		err = cache_commit_lazy(cl->cache);	/* rolled back if so */
	if (err) {
		/*
		 * Installed, or half so (its directory's sync failed), or
		 * not at all (then @old is a second link of what is there,
		 * and the rename does nothing): the old body at its name.
		 */
		if (aside && (undo = cache_rename(c, old, res->path, 0))) {
			log_err("%s: its old content could not be put back "
				"from %s: %s; it stays there until lento starts "
				"again", res->path, old, cache_strerror(undo));
			aside = false;
		}
		cache_unlink(c, tmp, 0);	/* gone if installed */
		if (aside)
			cache_unlink(c, old, 0);	/* left if the same */
		if (fd >= 0)
			close(fd);
		return err;
	}
	if (aside)
		cache_unlink(c, old, 0);
	changed(res->vol);
	cache_handle_update_fd(cl->cache, &o->fid, fd);
	close(fd);
	return cache_sync(cl->cache);
}

/* The op's body in place as @res's content, with its STORE record. */
static int store(struct op *op, struct resolved *res)
{
	struct op_body *b = op->body;
	struct cache_obj *o = &res->obj;
	struct lento_rec r;
	int err;

	rec_init(&r, op, LENTO_OP_STORE);
	r.obj = o->fid;
	r.base_obj = o->vv;
	o->attr.size = b->size;
	o->attr.mtime_ns = o->attr.ctime_ns = r.time_ns;
	o->data = o->dirty = true;
	o->used_ms = wall_ms();
	r.attr.valid = LENTO_A_SIZE | LENTO_A_MTIME | LENTO_A_CTIME;
	r.attr.size = b->size;
	r.attr.mtime_ns = r.attr.ctime_ns = r.time_ns;
	err = replace_body(op, res, b->tmp, &r, b->size);
	b->tmp[0] = 0;		/* installed, or removed */
	return err;
}

static int write_step(struct op *op)
{
	struct resolved res;
	int err;

	/* The content first: a bad @FILE changes nothing. */
	if (!op->body)
		return write_body_start(op);
	err = body_ready(op, op->argv[1][0] == '@' ? op->argv[1] + 1 :
			 op->argv[0]);
	err = err ?: resolve(op, op->argv[0], false, &res);
	err = err ?: need_permit(op, res.vol);
	if (err)
		return err;
	/* Made if missing, as a shell's > does; not twice after a wait. */
	if (lento_fid_is_null(&res.fid)) {
		err = create_at(op, &res, op->argv[0], &res.obj);
		if (err)
			return err;
		res.fid = res.obj.fid;
	}
	if (res.obj.type != LENTO_T_REG) {
		ctl_error(op->r, "%s: not a regular file", op->argv[0]);
		return res.obj.type == LENTO_T_DIR ? -EISDIR : -EINVAL;
	}
	err = store(op, &res);
	if (err)
		return fail(op, err, "%s", op->argv[0]);
	return done_out(op);
}

int cmd_write(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	return op_start(ctx, r, argc, argv, write_step);
}

/* -------------------------------------------------------------- setattr */

static int parse_time(const char *s, int64_t *ns)
{
	char *end;
	double v = strtod(s, &end);

	if (*end || end == s || v < -9e9 || v > 9e9)
		return -EINVAL;
	*ns = (int64_t)(v * 1e9);
	return 0;
}

static int parse_u64(const char *s, int base, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(s, &end, base);
	return errno || *end || end == s || *s == '-' ? -EINVAL : 0;
}

/* ATTR=VALUE words into @a (valid says which). */
static int parse_attrs(struct op *op, struct lento_attr *a)
{
	memset(a, 0, sizeof(*a));
	for (int i = 1; i < op->argc; i++) {
		const char *w = op->argv[i], *eq = strchr(w, '=');
		uint64_t u = 0;
		int err = eq ? 0 : -EINVAL;
		size_t k = eq ? (size_t)(eq - w) : 0;

		if (!err && !strncmp(w, "mode", k) && k == 4) {
			err = parse_u64(eq + 1, 8, &u) ?: u > 07777 ? -EINVAL : 0;
			a->mode = (uint32_t)u;
			a->valid |= LENTO_A_MODE;
		} else if (!err && !strncmp(w, "uid", k) && k == 3) {
			err = parse_u64(eq + 1, 10, &u) ?:
			      u > UINT32_MAX ? -EINVAL : 0;
			a->uid = (uint32_t)u;
			a->valid |= LENTO_A_UID;
		} else if (!err && !strncmp(w, "gid", k) && k == 3) {
			err = parse_u64(eq + 1, 10, &u) ?:
			      u > UINT32_MAX ? -EINVAL : 0;
			a->gid = (uint32_t)u;
			a->valid |= LENTO_A_GID;
		} else if (!err && !strncmp(w, "size", k) && k == 4) {
			err = parse_u64(eq + 1, 10, &a->size) ?:
			      a->size > INT64_MAX ? -EINVAL : 0;
			a->valid |= LENTO_A_SIZE;
		} else if (!err && !strncmp(w, "atime", k) && k == 5) {
			err = parse_time(eq + 1, &a->atime_ns);
			a->valid |= LENTO_A_ATIME;
		} else if (!err && !strncmp(w, "mtime", k) && k == 5) {
			err = parse_time(eq + 1, &a->mtime_ns);
			a->valid |= LENTO_A_MTIME;
		} else {
			err = -EINVAL;
		}
		if (err) {
			ctl_error(op->r, "'%s': attributes are mode=OCTAL uid=N "
				  "gid=N size=N atime=SEC mtime=SEC", w);
			return err;
		}
	}
	return 0;
}

#define SETATTR_DISK (LENTO_A_MODE | LENTO_A_UID | LENTO_A_GID | \
		      LENTO_A_ATIME | LENTO_A_MTIME)

/*
 * @res's content cut or stretched to @size, into the op's body: a new
 * file, as a truncate in place could not be undone if its record failed
 * to go in. Made from the object's version now, which it remembers.
 */
static int resize_body_start(struct op *op, const struct resolved *res,
			     uint64_t size)
{
	int in = cache_open_obj(op->cl->cache, res->path, O_RDONLY, 0), rc;
	struct stat sb;

	if (in >= 0 && fstat(in, &sb)) {
		rc = -errno;
		close(in);
		in = rc;
	}
	if (in < 0)
		return fail(op, in, "%s", op->argv[0]);
	rc = body_start(op, in, NULL, (uint64_t)sb.st_size < size ?
			(uint64_t)sb.st_size : size, size);
	if (rc == OP_WAIT) {
		op->body->fid = res->obj.fid;
		op->body->vv = res->obj.vv;
		op->body->ino = sb.st_ino;
		op->body->ctime = sb.st_ctim;
	}
	return rc;
}

/*
 * Whether the op's body was made from @res's object as it is now: its
 * version, and its file in the cache not written nor replaced since.
 */
static bool body_of(const struct op *op, const struct resolved *res)
{
	const struct op_body *b = op->body;
	struct stat sb;
	bool same;
	int fd;

	if (!b || !lento_fid_eq(&b->fid, &res->obj.fid) ||
	    !lento_vv_eq(&b->vv, &res->obj.vv))
		return false;
	fd = cache_open_obj(op->cl->cache, res->path, O_PATH, 0);
	if (fd < 0)
		return false;
	same = !fstat(fd, &sb) && sb.st_ino == b->ino &&
	       sb.st_ctim.tv_sec == b->ctime.tv_sec &&
	       sb.st_ctim.tv_nsec == b->ctime.tv_nsec;
	close(fd);
	return same;
}

/* @o's attributes as @a sets them; @r's record of it. */
static void setattr_apply(struct cache_obj *o, const struct lento_attr *a,
			  struct lento_rec *r)
{
	r->obj = o->fid;
	r->base_obj = o->vv;
	r->attr = *a;
	r->attr.valid |= LENTO_A_CTIME;
	r->attr.ctime_ns = r->time_ns;
	lento_attr_merge(&o->attr, &r->attr);
	/* A new size is a change of content, unless the caller said when. */
	if ((a->valid & LENTO_A_SIZE) && !(a->valid & LENTO_A_MTIME))
		o->attr.mtime_ns = r->time_ns;
	o->dirty = true;
}

/* What the attributes of the object open as @fd are, to set them back. */
static int attrs_as_now(int fd, struct cache_obj *o)
{
	struct stat sb;

	if (fstat(fd, &sb))
		return -errno;
	o->type = S_ISLNK(sb.st_mode) ? LENTO_T_SYMLINK : LENTO_T_REG;
	o->attr.mode = sb.st_mode & 07777;
	o->attr.uid = sb.st_uid;
	o->attr.gid = sb.st_gid;
	o->attr.atime_ns = (int64_t)sb.st_atim.tv_sec * 1000000000 +
			   sb.st_atim.tv_nsec;
	o->attr.mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 +
			   sb.st_mtim.tv_nsec;
	return 0;
}

/*
 * A new size makes a new body (replace_body()); other attributes are set
 * on the cache's copy, and set back as they were if the record fails to
 * go in.
 */
static int setattr_step(struct op *op)
{
	struct client *cl = op->cl;
	struct cache_obj was = { 0 }, *o;
	struct lento_attr a;
	struct resolved res;
	struct lento_rec r;
	uint32_t valid;
	bool logged;
	int fd, undo, err = parse_attrs(op, &a);

	err = err ?: resolve(op, op->argv[0], true, &res);
	err = err ?: need_permit(op, res.vol);
	if (err)
		return err;
	o = &res.obj;
	if ((a.valid & LENTO_A_SIZE) && o->type != LENTO_T_REG) {
		ctl_error(op->r, "%s: only a regular file has a size to set",
			  op->argv[0]);
		return o->type == LENTO_T_DIR ? -EISDIR : -EINVAL;
	}
	/* A new size keeps what is below it: the content must be here. */
	if ((a.valid & LENTO_A_SIZE) && !usable(cl, o))
		return connected(cl) ?
		       op_need(op, J_FETCH, 0, &o->fid, NULL) :
		       fail(op, -ENOTCONN, "%s: not cached", op->argv[0]);
	/* Made again if the object moved on while it was being made. */
	if ((a.valid & LENTO_A_SIZE) && !body_of(op, &res))
		return resize_body_start(op, &res, a.size);
	err = (a.valid & LENTO_A_SIZE) ? body_ready(op, op->argv[0]) : 0;
	if (err)
		return err;
	rec_init(&r, op, LENTO_OP_SETATTR);
	valid = o->attr.valid;
	setattr_apply(o, &a, &r);
	if (a.valid & LENTO_A_SIZE) {
		err = replace_body(op, &res, op->body->tmp, &r, 0);
		op->body->tmp[0] = 0;	/* installed, or removed */
		return err ? fail(op, err, "%s", op->argv[0]) : done_out(op);
	}
	/*
	 * One inode for what it was, the change and its undo: the object's
	 * own, not another a user put under its name (lento is root: it
	 * would chown and chmod theirs).
	 */
	fd = cache_open_obj(cl->cache, res.path, O_PATH, 0);
	if (fd < 0)
		return fail(op, fd, "%s", op->argv[0]);
	err = cache_fd_own(cl->cache, fd, &o->fid, res.path);
	if (err == -ESTALE) {
		close(fd);
		ctl_error(op->r, "%s: %s", op->argv[0], STALE_SAID);
		return err;
	}
	err = err ?: attrs_as_now(fd, &was);
	if (err) {
		close(fd);
		return fail(op, err, "%s", op->argv[0]);
	}
	was.attr.valid = a.valid & SETATTR_DISK;
	o->attr.valid = was.attr.valid;
	err = cache_set_attrs_fd(fd, o);
	o->attr.valid = valid;
	if (err) {
		close(fd);
		return fail(op, err, "%s", op->argv[0]);
	}
	err = cache_begin(cl->cache);
	err = err ?: cache_obj_put(cl->cache, o, NULL, 0);
	err = err ?: log_rec(cl, &r, 0);
	err = finish(cl, res.vol, err, &logged);
	if (err && !logged && (undo = cache_set_attrs_fd(fd, &was)))
		log_err("%s: its attributes could not be set back: %s",
			res.path, cache_strerror(undo));
	close(fd);
	return err ? fail(op, err, "%s", op->argv[0]) : done_out(op);
}

int cmd_setattr(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	return op_start(ctx, r, argc, argv, setattr_step);
}

/* ------------------------------------------------------- unlink, rmdir */

/* @res's name goes from its directory; @o loses a link. Logged. */
static int unname(struct op *op, struct resolved *res, uint16_t code,
		  bool *logged)
{
	struct client *cl = op->cl;
	struct cache_obj parent, *o = &res->obj;
	struct lento_rec r;
	int err = cache_obj_get(cl->cache, &res->parent, &parent, NULL, 0);

	*logged = false;
	if (err)
		return err;
	rec_init(&r, op, code);
	r.dir = res->parent;
	r.obj = res->fid;
	r.base_dir = parent.vv;
	r.base_obj = o->vv;
	snprintf(r.name, sizeof(r.name), "%s", res->name);
	o->nlink = code == LENTO_OP_RMDIR || o->nlink <= 1 ? 0 : o->nlink - 1;
	/* The optimiser may drop what was done to an object with no name. */
	if (code == LENTO_OP_UNLINK && !o->nlink)
		r.flags = LENTO_R_LASTLINK;
	o->attr.ctime_ns = r.time_ns;
	o->dirty = true;
	err = cache_begin(cl->cache);
	err = err ?: cache_dirent_del(cl->cache, &res->parent, res->name);
	err = err ?: cache_obj_put(cl->cache, o, NULL, 0);
	err = err ?: touch_dir(cl, &res->parent,
			       code == LENTO_OP_RMDIR ? -1 : 0, r.time_ns);
	err = err ?: log_rec(cl, &r, 0);
	return finish(cl, res->vol, err, logged);
}

/*
 * Remove @res's name from the disk and the log: the object moved aside
 * first, put back if the removal is not logged, gone once it is.
 */
static int remove_one(struct op *op, struct resolved *res, uint16_t code,
		      const char *path)
{
	struct cache *c = op->cl->cache;
	char aside[CACHE_PATH_MAX];
	bool logged, moved;
	int err = move_aside(op->cl, res->path, res->obj.type, aside, &moved);

	if (err)
		return fail(op, err, "%s", path);
	err = unname(op, res, code, &logged);
	if (moved && logged)
		cache_unlink(c, aside, code == LENTO_OP_RMDIR ?
			     AT_REMOVEDIR : 0);
	else if (moved)
		put_back(c, aside, res->path);
	return err ? fail(op, err, "%s", path) : 0;
}

static int unlink_one(struct op *op, const char *path)
{
	struct resolved res;
	int err = resolve(op, path, true, &res);

	err = err ?: need_permit(op, res.vol);
	if (err)
		return err;
	if (res.obj.type == LENTO_T_DIR || !res.name[0])
		return fail(op, -EISDIR, "%s", path);
	return remove_one(op, &res, LENTO_OP_UNLINK, path);
}

static int unlink_step(struct op *op)
{
	return each_path(op, unlink_one);
}

int cmd_unlink(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	return op_start(ctx, r, argc, argv, unlink_step);
}

/* An empty directory, by its full listing: 0, OP_WAIT, -errno. */
static int need_empty(struct op *op, struct resolved *res, const char *path)
{
	int n = need_listing(op, &res->fid);

	if (n)
		return n;
	n = cache_dir_count(op->cl->cache, &res->fid);
	if (n < 0)
		return fail(op, n, "%s", path);
	if (n) {
		ctl_error(op->r, "%s: directory not empty", path);
		return -ENOTEMPTY;
	}
	return 0;
}

static int rmdir_one(struct op *op, const char *path)
{
	struct resolved res;
	int err = resolve(op, path, true, &res);

	if (err)
		return err;
	if (res.obj.type != LENTO_T_DIR)
		return fail(op, -ENOTDIR, "%s", path);
	if (!res.name[0])
		return fail(op, -EBUSY, "%s: a volume's root", path);
	err = need_empty(op, &res, path) ?: need_permit(op, res.vol);
	if (err)
		return err;
	return remove_one(op, &res, LENTO_OP_RMDIR, path);
}

static int rmdir_step(struct op *op)
{
	return each_path(op, rmdir_one);
}

int cmd_rmdir(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	return op_start(ctx, r, argc, argv, rmdir_step);
}

/* --------------------------------------------------------------- rename */

/* Is @dir @fid or below it? */
static bool within(struct client *cl, const struct lento_fid *dir,
		   const struct lento_fid *fid)
{
	char name[LENTO_NAME_MAX + 1];
	struct lento_fid cur = *dir, up;

	for (int depth = 0; depth < 4096; depth++) {
		if (lento_fid_eq(&cur, fid))
			return true;
		if (cache_name_of(cl->cache, &cur, &up, name))
			return false;
		cur = up;
	}
	return true;	/* a loop: say yes, refuse the rename */
}

/* What a rename may replace, by POSIX's rules. */
static int rename_check(struct op *op, struct resolved *a, struct resolved *b)
{
	if (a->vol != b->vol) {
		ctl_error(op->r, "a rename across volumes");
		return -EXDEV;
	}
	if (!a->name[0] || (!b->name[0])) {
		ctl_error(op->r, "a volume's root does not move");
		return -EBUSY;
	}
	if (a->obj.type == LENTO_T_DIR &&
	    within(op->cl, &b->parent, &a->fid)) {
		ctl_error(op->r, "a directory into itself");
		return -EINVAL;
	}
	if (lento_fid_is_null(&b->fid))
		return 0;
	if (a->obj.type == LENTO_T_DIR && b->obj.type != LENTO_T_DIR) {
		ctl_error(op->r, "%s: not a directory", op->argv[1]);
		return -ENOTDIR;
	}
	if (a->obj.type != LENTO_T_DIR && b->obj.type == LENTO_T_DIR) {
		ctl_error(op->r, "%s: is a directory", op->argv[1]);
		return -EISDIR;
	}
	return b->obj.type == LENTO_T_DIR ? need_empty(op, b, op->argv[1]) : 0;
}

static int rename_log(struct op *op, struct resolved *a, struct resolved *b,
		      bool *logged)
{
	struct client *cl = op->cl;
	bool dir = a->obj.type == LENTO_T_DIR, moved =
		!lento_fid_eq(&a->parent, &b->parent),
	     target = !lento_fid_is_null(&b->fid);
	struct cache_obj pa, pb;
	struct lento_rec r;
	int err = cache_obj_get(cl->cache, &a->parent, &pa, NULL, 0) ?:
		  cache_obj_get(cl->cache, &b->parent, &pb, NULL, 0);

	*logged = false;
	if (err)
		return err;
	rec_init(&r, op, LENTO_OP_RENAME);
	r.dir = a->parent;
	r.obj = a->fid;
	r.dir2 = b->parent;
	r.base_dir = pa.vv;
	r.base_obj = a->obj.vv;
	r.base_dir2 = pb.vv;
	snprintf(r.name, sizeof(r.name), "%s", a->name);
	snprintf(r.name2, sizeof(r.name2), "%s", b->name);
	err = cache_begin(cl->cache);
	if (!err && target) {
		struct cache_obj *t = &b->obj;

		r.target = b->fid;
		r.base_target = t->vv;
		t->nlink = dir || t->nlink <= 1 ? 0 : t->nlink - 1;
		if (!t->nlink)
			r.flags = LENTO_R_LASTLINK;
		t->dirty = true;
		err = cache_obj_put(cl->cache, t, NULL, 0);
	}
	err = err ?: cache_dirent_del(cl->cache, &a->parent, a->name);
	err = err ?: cache_dirent_put(cl->cache, &b->parent, b->name, &a->fid);
	err = err ?: touch_dir(cl, &a->parent, dir && moved ? -1 : 0,
			       r.time_ns);
	err = err ?: touch_dir(cl, &b->parent, (dir && moved ? 1 : 0) -
			       (dir && target ? 1 : 0), r.time_ns);
	err = err ?: log_rec(cl, &r, 0);
	return finish(cl, a->vol, err, logged);
}

static int rename_step(struct op *op)
{
	struct cache *c = op->cl->cache;
	char aside[CACHE_PATH_MAX];
	struct resolved a, b;
	bool moved = false, logged;
	int err = resolve(op, op->argv[0], true, &a) ?:
		  resolve(op, op->argv[1], false, &b);

	err = err ?: rename_check(op, &a, &b);
	err = err ?: need_permit(op, a.vol);
	if (err)
		return err;
	/* Two names of one object: nothing to do (as rename(2)). */
	if (lento_fid_eq(&a.fid, &b.fid))
		return done_out(op);
	/* A target replaced stays aside until the rename is logged. */
	if (!lento_fid_is_null(&b.fid)) {
		err = move_aside(op->cl, b.path, b.obj.type, aside, &moved);
		if (err)
			return fail(op, err, "%s", op->argv[1]);
	}
	err = cache_rename(c, a.path, b.path, 0);
	if (err) {
		logged = false;
	} else {
		err = rename_log(op, &a, &b, &logged);
		if (!logged)
			put_back(c, b.path, a.path);
	}
	/* Not put back over the renamed object if it could not go back. */
	if (moved && logged)
		cache_unlink(c, aside, b.obj.type == LENTO_T_DIR ?
			     AT_REMOVEDIR : 0);
	else if (moved)
		put_back(c, aside, b.path);
	if (err)
		return fail(op, err, "%s -> %s", op->argv[0], op->argv[1]);
	return done_out(op);
}

int cmd_rename(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	return op_start(ctx, r, argc, argv, rename_step);
}

/* ----------------------------------------------------------------- link */

static int link_step(struct op *op)
{
	struct client *cl = op->cl;
	struct resolved a, b;
	struct cache_obj parent;
	struct lento_rec r;
	bool logged;
	int err = resolve(op, op->argv[0], true, &a) ?:
		  resolve_new(op, op->argv[1], &b);

	if (err)
		return err;
	if (a.obj.type == LENTO_T_DIR) {
		ctl_error(op->r, "%s: a directory gets no more links",
			  op->argv[0]);
		return -EPERM;
	}
	if (a.vol != b.vol) {
		ctl_error(op->r, "a link across volumes");
		return -EXDEV;
	}
	err = cache_hardlink(cl->cache, a.path, b.path);
	if (err)
		return fail(op, err, "%s", op->argv[1]);
	rec_init(&r, op, LENTO_OP_LINK);
	err = cache_obj_get(cl->cache, &b.parent, &parent, NULL, 0);
	r.dir = b.parent;
	r.obj = a.fid;
	r.base_dir = parent.vv;
	r.base_obj = a.obj.vv;
	snprintf(r.name, sizeof(r.name), "%s", b.name);
	a.obj.nlink++;
	a.obj.attr.ctime_ns = r.time_ns;
	a.obj.dirty = true;
	err = err ?: cache_begin(cl->cache);
	err = err ?: cache_obj_put(cl->cache, &a.obj, NULL, 0);
	err = err ?: cache_dirent_put(cl->cache, &b.parent, b.name, &a.fid);
	err = err ?: touch_dir(cl, &b.parent, 0, r.time_ns);
	err = err ?: log_rec(cl, &r, 0);
	err = finish(cl, a.vol, err, &logged);
	if (err) {
		if (!logged)
			cache_unlink(cl->cache, b.path, 0);
		return fail(op, err, "%s", op->argv[1]);
	}
	return done_out(op);
}

int cmd_link(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	return op_start(ctx, r, argc, argv, link_step);
}

/* --------------------------------------------------------------- xattrs */

/*
 * Attribute @name of @path as it is (*@val NULL if it has none), to set it
 * back if the change's record fails to go in.
 */
static int xattr_as_now(struct cache *c, const char *path, const char *name,
			char **val, size_t *len)
{
	ssize_t n;

	*val = malloc(LENTO_XATTR_SIZE_MAX);
	if (!*val)
		return -ENOMEM;
	n = cache_getxattr(c, path, name, *val, LENTO_XATTR_SIZE_MAX);
	if (n >= 0) {
		*len = (size_t)n;
		return 0;
	}
	free(*val);
	*val = NULL;
	return n == -ENODATA ? 0 : (int)n;
}

static int xattr_step(struct op *op, bool set)
{
	struct client *cl = op->cl;
	const char *name = op->argv[1];
	const char *value = set ? op->argv[2] : NULL;
	char *was;
	struct resolved res;
	struct lento_rec r;
	size_t was_len = 0;
	bool logged;
	int undo, err;

	if (!*name || strlen(name) > LENTO_XATTR_NAME_MAX ||
	    !strncmp(name, "trusted.presto.", 15)) {
		ctl_error(op->r, "%s: not an attribute name one may set", name);
		return -EINVAL;
	}
	err = resolve(op, op->argv[0], true, &res) ?:
	      need_permit(op, res.vol);
	if (err)
		return err;
	err = xattr_as_now(cl->cache, res.path, name, &was, &was_len);
	if (err)
		return fail(op, err, "%s", op->argv[0]);
	err = set ? cache_setxattr(cl->cache, res.path, name, value,
				   strlen(value)) :
		    cache_removexattr(cl->cache, res.path, name);
	if (err) {
		err = fail(op, err, "%s", op->argv[0]);
		free(was);
		return err;
	}
	rec_init(&r, op, set ? LENTO_OP_SETXATTR : LENTO_OP_REMOVEXATTR);
	r.obj = res.fid;
	r.base_obj = res.obj.vv;
	snprintf(r.name, sizeof(r.name), "%s", name);
	if (set && *value) {
		r.data = value;
		r.data_len = strlen(value);
	}
	res.obj.attr.ctime_ns = r.time_ns;
	res.obj.dirty = true;
	err = cache_begin(cl->cache);
	err = err ?: cache_obj_put(cl->cache, &res.obj, NULL, 0);
	err = err ?: log_rec(cl, &r, 0);
	err = finish(cl, res.vol, err, &logged);
	if (err && !logged &&
	    (undo = was ? cache_setxattr(cl->cache, res.path, name, was,
					 was_len) :
			  cache_removexattr(cl->cache, res.path, name)))
		log_err("%s: its attribute %s could not be set back: %s",
			res.path, name, cache_strerror(undo));
	free(was);
	return err ? fail(op, err, "%s", op->argv[0]) : done_out(op);
}

static int setxattr_step(struct op *op)
{
	return xattr_step(op, true);
}

static int removexattr_step(struct op *op)
{
	return xattr_step(op, false);
}

int cmd_setxattr(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	return op_start(ctx, r, argc, argv, setxattr_step);
}

int cmd_removexattr(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	return op_start(ctx, r, argc, argv, removexattr_step);
}
