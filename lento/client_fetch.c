// SPDX-License-Identifier: MIT
/*
 * What the lento client asks its server (client_int.h): jobs -- a
 * volume's lookup and validation, a directory's listing, a file's body, a
 * permit -- and, on top of them, resolving paths and the commands that
 * read (ls, cat, stat); and evicting content when the cache is full.
 *
 * Listings are whole (as AFS): a READDIR caches every entry with its
 * status, materialises what is new or changed (directories, symlinks, and
 * files as sparse placeholders of their size until their content is
 * fetched) and removes what went. Entries and objects with local changes
 * not yet reintegrated (dirty) are left as they are: the log wins locally
 * until the server has taken it or refused it; in a complete directory
 * changed here, so do its names (listing_begin()). A big listing is
 * applied in steps, the loop turning between them (listing_step()).
 *
 * A body arrives in DATA chunks, each written through the ring as it
 * comes and held in memory only until written; past --fetch-memory of
 * them the server's frames wait unread. The last one is followed by an
 * fsync. A new version goes into a temporary file renamed onto the
 * object's path, so a reader that has the old file open keeps the old
 * inode. A placeholder is filled where it is: nobody can have read it, and
 * its inode, which stat has shown and other names may share, stays the
 * file's (tar, rsync -H and git go by inode numbers).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "array.h"
#include "client_int.h"
#include "client_kernel.h"
#include "cml.h"
#include "fault.h"
#include "fidset.h"
#include "log.h"
#include "presto_genl.h"
#include "vv.h"

#define EVICT_BATCH	256
#define LISTING_JOURNAL_MS	10000	/* listing_journal() */

static void job_msg(struct job *j, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void job_msg(struct job *j, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(j->msg, sizeof(j->msg), fmt, ap);
	va_end(ap);
}

/* An ERROR frame's code and message, as the job's failure. */
static int job_error(struct job *j, const struct lp_frame *f,
		     const char *what, const char **why)
{
	struct lp_error e;

	if (lp_decode_error(f, &e, why))
		return -EBADMSG;
	job_msg(j, "%s: %.*s (%s)", what, (int)e.msg_len, e.msg,
		lp_err_name(e.code));
	/* Nobody may be waiting to hear these: the log does. */
	if (j->kind == J_LOOKUP || j->kind == J_ACQUIRE)
		log_warn("%s", j->msg);
	job_end(j, -lp_err_to_errno(e.code));
	return 0;
}

/* ---------------------------------------------------------------- jobs */

static void job_free_if_idle(struct job *j)
{
	if (!j->done || j->io)
		return;
	if (j->free_priv)
		j->free_priv(j);
	free(j);
}

bool job_stalled(struct client *cl, uint64_t id, uint64_t now)
{
	uint64_t heard, silent = JOB_SILENT_MS;
	struct job *j;

	for (j = cl->jobs; j && j->id != id; j = j->next)
		;
	if (!j || !j->inflight || !j->tag)
		return false;
	for (struct vol *v = cl->vols; v; v = v->next)
		if (3ull * v->lease_ms > silent)
			silent = 3ull * v->lease_ms;
	heard = conn_heard_ms(cl->conn, j->tag);
	return heard && now - heard > silent;
}

struct job *job_find(struct client *cl, enum job_kind k, uint32_t volume,
		     const struct lento_fid *fid, const char *name)
{
	struct job *j;

	for (j = cl->jobs; j; j = j->next) {
		if (j->kind != k || j->volume != volume)
			continue;
		if (fid && !lento_fid_eq(fid, &j->fid))
			continue;
		if (name && strcmp(name, j->name))
			continue;
		return j;
	}
	return NULL;
}

/*
 * @j cached what the server said before the connection went, with no
 * promise left behind it. Not marked stale (offline it is all there is,
 * as for everything else cached): its volume is validated again. Not
 * yet validated since, the next validation covers it; validated since
 * (before @j's last entries were in), the volume's stamp is newer than
 * what @j cached, so the objects are checked one by one.
 */
static void job_revalidate(struct job *j)
{
	struct client *cl = j->cl;
	struct vol *v = vol_by_id(cl, j->volume);

	if (!v || !v->validated)
		return;
	v->validated = false;
	v->cv.stamp = 0;
	log_info("volume %s: validated again: the connection went while a "
		 "reply was applied", v->cv.name);
	/* presto serves hits without asking: now, not lazily. */
	if (fset_by_volume(cl, v->cv.name))
		job_start(cl, J_VALIDATE, v->cv.id, NULL, NULL, NULL);
}

void job_end(struct job *j, int err)
{
	struct client *cl = j->cl;
	struct job **pp;

	if (j->done)
		return;
	j->done = true;
	j->err = err;
	if (err && !j->msg[0])
		job_msg(j, "%s", cache_strerror(err));
	for (pp = &cl->jobs; *pp; pp = &(*pp)->next)
		if (*pp == j) {
			*pp = j->next;
			break;
		}
	/* What is still to come of its reply goes to nobody. */
	if (j->inflight && cl->conn)
		conn_forget(cl->conn, j->tag);
	j->inflight = false;
	if (j->conn_lost && !err && j->kind != J_VALIDATE)
		job_revalidate(j);
	op_wake_job(cl, j);
	kclient_job_ended(cl, j);
	job_free_if_idle(j);
}

static void listing_heard_break(struct job *j, const struct lento_fid *fid);

void jobs_break_fid(struct client *cl, const struct lento_fid *fid)
{
	for (struct job *j = cl->jobs; j; j = j->next) {
		if (lento_fid_eq(&j->fid, fid))
			j->broken = true;
		else if (j->kind == J_READDIR && j->volume == fid->volume)
			listing_heard_break(j, fid);
	}
}

void jobs_break_volume(struct client *cl, uint32_t volume)
{
	for (struct job *j = cl->jobs; j; j = j->next)
		if (j->volume == volume)
			j->broken = true;
}

void jobs_conn_lost(struct client *cl)
{
	for (struct job *j = cl->jobs; j; j = j->next)
		j->conn_lost = true;
}

void jobs_free(struct client *cl)
{
	while (cl->jobs) {
		struct job *j = cl->jobs;

		job_msg(j, "lento is stopping");
		j->inflight = false;
		job_end(j, -ECANCELED);
	}
}

static int start_request(struct job *j, unsigned int type, conn_reply_fn fn)
{
	int err = conn_request(j->cl->conn, j->tag, type, fn, j);

	if (!err) {
		j->inflight = true;
		j->sent_ms = lo_now_ms();
	}
	return err;
}

/* The reply ended (its last frame, or the connection went). */
static void reply_over(struct job *j, const struct lp_frame *f, int err)
{
	if (err || !(f->flags & LP_F_MORE))
		j->inflight = false;
}

/* -------------------------------------------------------------- lookup */

/* The volume and its root (status to come with its listing) recorded. */
static int lookup_store(struct client *cl, const struct cache_vol *cv)
{
	struct cache_obj root;
	int err = cache_begin(cl->cache);

	if (!err && cache_obj_get(cl->cache, &cv->root, &root, NULL, 0) ==
	    -ENOENT) {
		memset(&root, 0, sizeof(root));
		root.fid = cv->root;
		root.type = LENTO_T_DIR;
		root.nlink = 2;
		root.used_ms = wall_ms();
		err = cache_obj_put(cl->cache, &root, NULL, 0);
	}
	err = err ?: cache_vol_put(cl->cache, cv);
	err = err ?: cache_commit(cl->cache);
	if (err)
		cache_rollback(cl->cache);
	if (!err) {
		err = cache_mkdir(cl->cache, cv->name, 0700);
		if (err == -EEXIST)
			err = 0;
	}
	return err;
}

static int lookup_reply(void *arg, const struct lp_frame *f, int err,
			const char **why)
{
	struct job *j = arg;
	struct client *cl = j->cl;
	struct cache_vol cv = { 0 };
	struct lp_volume m;
	struct vol *v;
	bool known;

	reply_over(j, f, err);
	if (err)
		return job_end(j, err), 0;
	if (f->type == LP_ERROR)
		return job_error(j, f, j->name, why);
	if (f->type != LP_VOLUME_LOOKUP_REPLY ||
	    lp_decode_volume_lookup_reply(f, &m, why))
		return *why = *why ?: "not a VOLUME_LOOKUP_REPLY", -EBADMSG;
	cv.id = m.volume;
	snprintf(cv.name, sizeof(cv.name), "%s", j->name);
	cv.root = m.root;
	/* Nothing of it is cached yet: its current stamp is ours. */
	cv.stamp = m.stamp;
	v = vol_by_id(cl, m.volume);
	known = v != NULL;
	if (v) {
		/* Known by another name (renamed at the server): the same. */
		cv.stamp = v->cv.stamp;
		cv.applied = v->cv.applied;
	}
	err = lookup_store(cl, &cv) ?: vol_add(cl, &cv, &v);
	if (err) {
		job_msg(j, "volume %s: %s", j->name, strerror(-err));
		return job_end(j, err), 0;
	}
	/* A new one has nothing cached to validate. */
	if (!known)
		v->validated = !j->broken;
	if (!known && v->validated)
		kclient_validated(cl, v, true);
	log_info("volume %s: id %" PRIu32 ", root " FIDFMT ", stamp %" PRIu64,
		 cv.name, cv.id, FIDARG(&cv.root), cv.stamp);
	job_end(j, 0);
	return 0;
}

static int lookup_start(struct job *j)
{
	struct conn *c = j->cl->conn;

	return lp_encode_volume_lookup(conn_buf(c), j->tag, j->name) ?:
	       start_request(j, LP_VOLUME_LOOKUP, lookup_reply);
}

void client_lookup_configured(struct client *cl)
{
	for (int i = 0; i < cl->opt->nvolumes; i++) {
		const char *name = cl->opt->volumes[i];

		if (!vol_by_name(cl, name))
			job_start(cl, J_LOOKUP, 0, NULL, name, NULL);
	}
}

/* ---------------------------------------------------------- validation */

struct validation {
	uint64_t stamp;			/* the server's, to adopt at the end */
	struct lp_fidvv *items;
	uint32_t n, cap, next, sent;	/* sent: items of the request out */
};

static void validation_free(struct job *j)
{
	struct validation *va = j->priv;

	free(va->items);
	free(va);
}

static int collect_obj(void *arg, const struct cache_obj *o)
{
	struct validation *va = arg;

	/* Created here and not reintegrated: the server has nothing. */
	if (!o->vv.n)
		return 0;
	if (va->n == va->cap) {
		uint32_t cap = va->cap ? 2 * va->cap : 256;
		struct lp_fidvv *p = realloc(va->items, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		va->items = p;
		va->cap = cap;
	}
	va->items[va->n].fid = o->fid;
	va->items[va->n++].vv = o->vv;
	return 0;
}

static int validate_send(struct job *j);

/* Everything checked: adopt the server's stamp, serve the volume. */
static void validation_done(struct job *j)
{
	struct validation *va = j->priv;
	struct client *cl = j->cl;
	struct vol *v = vol_by_id(cl, j->volume);
	int err;

	if (!v)
		return job_end(j, -ENOENT);
	if (j->broken) {	/* changed meanwhile: try again */
		job_msg(j, "volume %s changed while it was validated",
			v->cv.name);
		return job_end(j, -ENOTCONN);
	}
	v->cv.stamp = va->stamp;
	err = cache_vol_put(cl->cache, &v->cv);
	if (err) {
		job_msg(j, "volume %s: the cache: %s", v->cv.name,
			strerror(-err));
		return job_end(j, err);
	}
	v->validated = true;
	log_info("volume %s validated: stamp %" PRIu64 "%s", v->cv.name,
		 va->stamp, va->n ? ", objects checked one by one" : "");
	/* What changed was broken object by object: the epoch stays. */
	kclient_validated(cl, v, false);
	job_end(j, 0);
}

static int validate_reply(void *arg, const struct lp_frame *f, int err,
			  const char **why)
{
	struct job *j = arg;
	struct validation *va = j->priv;
	struct client *cl = j->cl;
	struct lp_validate_reply m;
	uint32_t first = va->next - va->sent;
	int changed = 0;

	reply_over(j, f, err);
	if (err)
		return job_end(j, err), 0;
	if (f->type == LP_ERROR)
		return job_error(j, f, "validating objects", why);
	if (f->type != LP_VALIDATE_REPLY ||
	    lp_decode_validate_reply(f, &m, why))
		return *why = *why ?: "not a VALIDATE_REPLY", -EBADMSG;
	if (m.count != va->sent) {
		*why = "VALIDATE_REPLY: not one result per object asked";
		return -EBADMSG;
	}
	err = cache_begin(cl->cache);
	for (uint32_t i = 0; !err && i < m.count; i++) {
		struct cache_obj o;
		bool valid = m.result[i] == LP_OBJ_VALID;

		if (cache_obj_get(cl->cache, &va->items[first + i].fid, &o,
				  NULL, 0))
			continue;
		/* A version that moved meanwhile is not what was asked. */
		if (!lento_vv_eq(&o.vv, &va->items[first + i].vv))
			valid = false;
		/*
		 * Known stale here (its listing lacks what the server has)
		 * while this client's changes are pending: stays so.
		 */
		if (!o.valid && o.dirty)
			valid = false;
		changed += !valid;
		err = cache_obj_set_state(cl->cache, &o.fid, valid, o.data);
		/*
		 * presto's flags of it go too (the epoch may stay), and a
		 * listing under way learns it.
		 */
		if (!err && !valid) {
			kclient_break_fid(cl, &o.fid);
			jobs_break_fid(cl, &o.fid);
		}
	}
	err = err ?: cache_commit(cl->cache);
	if (err) {
		cache_rollback(cl->cache);
		job_msg(j, "validating: the cache: %s", strerror(-err));
		return job_end(j, err), 0;
	}
	log_debug("volume %" PRIu32 ": %u of %u objects changed", j->volume,
		  changed, m.count);
	if (va->next < va->n) {
		err = validate_send(j);
		if (err)
			job_end(j, err);
		return 0;
	}
	validation_done(j);
	return 0;
}

static int validate_send(struct job *j)
{
	struct validation *va = j->priv;
	struct conn *c = j->cl->conn;
	uint32_t n = va->n - va->next;

	if (n > LP_LIST_MAX)
		n = LP_LIST_MAX;
	j->tag = conn_tag(c);
	va->sent = n;
	va->next += n;
	return lp_encode_validate(conn_buf(c), j->tag, va->items +
				  va->next - n, n) ?:
	       start_request(j, LP_VALIDATE, validate_reply);
}

/* The stamp moved: which of the objects cached are still current? */
static void validate_objects(struct job *j, uint64_t stamp)
{
	struct validation *va = j->priv;
	int err;

	va->stamp = stamp;
	err = cache_obj_walk(j->cl->cache, j->volume, collect_obj, va);
	if (err) {
		job_msg(j, "validating: the cache: %s", strerror(-err));
		return job_end(j, err);
	}
	if (!va->n)
		return validation_done(j);
	err = validate_send(j);
	if (err)
		job_end(j, err);
}

static int volval_reply(void *arg, const struct lp_frame *f, int err,
			const char **why)
{
	struct job *j = arg;
	struct lp_volstamp vs;
	struct lp_list l;
	struct vol *v = vol_by_id(j->cl, j->volume);

	reply_over(j, f, err);
	if (err)
		return job_end(j, err), 0;
	if (f->type == LP_ERROR)
		return job_error(j, f, "validating the volume", why);
	if (f->type != LP_VOLUME_VALIDATE_REPLY ||
	    lp_decode_volume_validate(f, &l, why))
		return *why = *why ?: "not a VOLUME_VALIDATE_REPLY", -EBADMSG;
	if (l.left != 1 || lp_next_volstamp(&l, &vs) != 1 ||
	    vs.volume != j->volume) {
		*why = "VOLUME_VALIDATE_REPLY: not the volume asked";
		return -EBADMSG;
	}
	if (!v)
		return job_end(j, -ENOENT), 0;
	switch (vs.result) {
	case LP_VOL_VALID:
		((struct validation *)j->priv)->stamp = v->cv.stamp;
		validation_done(j);
		return 0;
	case LP_VOL_CHANGED:
		validate_objects(j, vs.stamp);
		return 0;
	default:
		v->unknown = true;
		log_warn("volume %s: the server has no such volume any more",
			 v->cv.name);
		job_msg(j, "volume %s: the server has no such volume any more",
			v->cv.name);
		job_end(j, -ENOENT);
		return 0;
	}
}

static int validate_start(struct job *j)
{
	struct vol *v = vol_by_id(j->cl, j->volume);
	struct conn *c = j->cl->conn;
	struct lp_volstamp vs;

	if (!v)
		return -ENOENT;
	j->priv = calloc(1, sizeof(struct validation));
	if (!j->priv)
		return -ENOMEM;
	j->free_priv = validation_free;
	vs.volume = v->cv.id;
	vs.stamp = v->cv.stamp;
	vs.result = 0;
	return lp_encode_volume_validate(conn_buf(c), j->tag, &vs, 1) ?:
	       start_request(j, LP_VOLUME_VALIDATE, volval_reply);
}

/* ------------------------------------------------------------ listings */

/* A name a listing step gave an inode it made (listing_unmake()). */
struct made_name {
	char *path;
	struct lento_fid fid;
	dev_t dev;
	ino_t ino;
	bool dir;
	bool had_row;		/* the object's row is older than the step */
};

struct listing {
	struct lento_status dir;
	uint32_t total;
	bool begun;		/* the first frame came */
	struct lp_dirent *e;
	char **targets;		/* owned copies, NUL-ended, or NULL */
	uint32_t n, cap;	/* entries kept, room for */
	uint32_t seen;		/* entries received (.presto is not kept) */
	/* Names that came and went since a complete listing, for NOTIFY. */
	struct name_event *ev;
	size_t nev, capev;
	bool tell;		/* the cache had a complete listing before */
	/* The directory's xattrs (the entries' are in e[].xattrs), owned. */
	struct lp_list dir_xattrs;
	uint32_t dir_nxattr;
	uint32_t skipped;	/* xattrs the cache could not take */
	uint32_t next;		/* entries applied so far (listing_step) */
	/*
	 * Objects of the volume broken since the READDIR went: the
	 * listing's status of them may be older than that news (a BREAK
	 * may pass the frames of a reply, and a listing is applied in
	 * steps).
	 */
	struct fidset broken;
	uint32_t steps;		/* committed before the one under way */
	bool keep_names;	/* the directory's names are the log's */
	/* The names the step under way gave inodes it made. */
	struct made_name *made;
	size_t nmade, capmade;
	struct fidset made_fids;	/* their objects new to the rows */
	/*
	 * In a fileset, not applied before lento read what presto logged
	 * until the reply came (listing_journal()): when it began to wait
	 * for that, whether it waits now, whether it is done.
	 */
	uint64_t journal_ms;
	bool journal_wait, journal_read;
};

/* A BREAK of @fid, heard while listing job @j lives. */
static void listing_heard_break(struct job *j, const struct lento_fid *fid)
{
	struct listing *li = j->priv;

	if (!li || j->done)
		return;
	if (fidset_add(&li->broken, fid) < 0)
		j->broken = true;	/* then every entry from here on */
}

static void listing_made_clear(struct listing *li)
{
	for (size_t i = 0; i < li->nmade; i++)
		free(li->made[i].path);
	li->nmade = 0;
	fidset_clear(&li->made_fids);
}

static void listing_free(struct job *j)
{
	struct listing *li = j->priv;

	for (uint32_t i = 0; i < li->n; i++) {
		free(li->targets[i]);
		free((void *)li->e[i].xattrs.p);
	}
	free((void *)li->dir_xattrs.p);
	free(li->targets);
	free(li->e);
	free(li->ev);
	fidset_free(&li->broken);
	listing_made_clear(li);
	free(li->made);
	fidset_free(&li->made_fids);
	free(li);
}

/*
 * @path, just made the name of @o's inode open as @fd, is noted: @have,
 * the object had a row (maybe one this step made for another of its
 * names).
 */
static int made_note(struct listing *li, const char *path, int fd,
		     const struct cache_obj *o, bool have)
{
	bool had_row = have && !fidset_has(&li->made_fids, &o->fid);
	struct made_name *m;
	struct stat sb;
	char *p;

	if (fstat(fd, &sb))
		return -errno;
	m = array_grow(li->made, &li->capmade, li->nmade, 1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	li->made = m;
	p = strdup(path);
	if (!p)
		return -ENOMEM;
	if (!had_row && fidset_add(&li->made_fids, &o->fid) < 0) {
		free(p);
		return -ENOMEM;
	}
	li->made[li->nmade++] = (struct made_name){
		.path = p, .fid = o->fid, .dev = sb.st_dev, .ino = sb.st_ino,
		.dir = S_ISDIR(sb.st_mode), .had_row = had_row,
	};
	return 0;
}

/*
 * The inode at @m->path, if it is still the one the step made: opened
 * O_PATH, or -1.
 */
static int made_still(struct client *cl, const struct made_name *m)
{
	struct stat sb;
	int fd = cache_open_obj(cl->cache, m->path, O_PATH | O_NOFOLLOW, 0);

	if (fd < 0)
		return -1;
	if (fstat(fd, &sb) || sb.st_dev != m->dev || sb.st_ino != m->ino) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * A step rolled back: what it made on the disk must not outlive it as
 * inodes the rows do not know, which a fileset's next listing may not
 * replace (they may be a user's) and would meet for good. A name given
 * an object new to the rows goes; an inode put in place of an object's
 * old one (its handle gone with the rollback) is recorded as its now, the
 * object not current and its content not cached, in a transaction of its
 * own.
 */
static void listing_unmake(struct client *cl, struct listing *li)
{
	bool begun = false;
	int err = 0;

	for (size_t i = li->nmade; i-- > 0;) {
		const struct made_name *m = &li->made[i];
		int fd = made_still(cl, m);

		if (fd < 0)
			continue;	/* not what the step made any more */
		if (!m->had_row) {
			close(fd);
			err = cache_unlink(cl->cache, m->path,
					   m->dir ? AT_REMOVEDIR : 0);
			if (err)
				log_warn("listing: %s, made by a step rolled "
					 "back, stays: %s", m->path,
					 cache_strerror(err));
			err = 0;
			continue;
		}
		if (!begun && !err)
			err = cache_begin(cl->cache);
		begun = begun || !err;
		err = err ?: cache_handle_update_fd(cl->cache, &m->fid, fd);
		err = err ?: cache_obj_set_state(cl->cache, &m->fid, false,
						 false);
		close(fd);
	}
	if (begun)
		err = err ?: cache_commit(cl->cache);
	if (err) {
		if (begun)
			cache_rollback(cl->cache);
		log_warn("listing: the inodes a step rolled back put in place "
			 "stay unrecorded: %s", cache_strerror(err));
	}
}

static void obj_from_status(struct cache_obj *o, const struct lento_status *st)
{
	o->fid = st->fid;
	o->type = st->type;
	o->nlink = st->nlink;
	o->attr = st->attr;
	o->vv = st->vv;
}

/* An entry of the old listing the new one does not have goes. */
struct old_ent {
	char name[LENTO_NAME_MAX + 1];
	struct lento_fid fid;
};

struct old_list {
	struct old_ent *e;
	size_t n, cap;
};

static int collect_old(void *arg, const char *name,
		       const struct lento_fid *fid)
{
	struct old_list *ol = arg;

	struct old_ent *p = array_grow(ol->e, &ol->cap, ol->n, 1,
				       sizeof(*p));

	if (!p)
		return -ENOMEM;
	ol->e = p;
	snprintf(ol->e[ol->n].name, sizeof(ol->e[0].name), "%s", name);
	ol->e[ol->n++].fid = *fid;
	return 0;
}

static int ent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct lp_dirent *)a)->de.name,
		      ((const struct lp_dirent *)b)->de.name);
}

static int old_name_cmp(const void *name, const void *oe)
{
	return strcmp(name, ((const struct old_ent *)oe)->name);
}

/* Has @arg, a struct old_list in name order (cache_readdir()), @name? */
static bool old_has(void *arg, const char *name)
{
	const struct old_list *ol = arg;

	return ol->n && bsearch(name, ol->e, ol->n, sizeof(*ol->e),
				old_name_cmp);
}

/* Is (name, fid) in the new listing (sorted by name)? */
static bool listed(const struct listing *li, const struct old_ent *oe)
{
	struct lp_dirent key;
	const struct lp_dirent *e;

	snprintf(key.de.name, sizeof(key.de.name), "%s", oe->name);
	e = li->n ? bsearch(&key, li->e, li->n, sizeof(*li->e), ent_cmp) :
		    NULL;
	return e && lento_fid_eq(&e->de.st.fid, &oe->fid);
}

static int join(char *buf, const char *dir, const char *name)
{
	return snprintf(buf, CACHE_PATH_MAX, "%s/%s", dir, name) >=
	       CACHE_PATH_MAX ? -ENAMETOOLONG : 0;
}

/* The names of a file with links, on the disk. */
struct name_paths {
	struct client *cl;
	const struct lento_fid *fid;
	const char *skip;		/* this one's path */
	int found;			/* a name's inode, the file's, or -1 */
	const char *from;		/* relink: the inode's path */
	int fd;				/* relink: the inode */
	int err;
};

/*
 * Is the object open as @fd the file @fid? A path of the rows may name
 * another by now (a user of a presto mount moved the file and made one
 * under its name): that one must not become the file's other names.
 * Where the file system gives no handles, nothing tells: as it was.
 */
static bool fd_is_file(struct client *cl, int fd, const struct lento_fid *fid)
{
	int is = cache_fd_is(cl->cache, fd, fid);

	return is == 1 || is == -EOPNOTSUPP;
}

/*
 * What a listing may replace or remove at a name of the rows (struct
 * cache_at): an inode of @fid; and, where no presto mount lets users
 * change the tree, also one the cache knows nothing of (a crash's
 * leftover, between a change on the disk and its commit). In a fileset
 * that is a user's, made through the mount: the journal will say.
 */
static struct cache_at listing_at(struct client *cl,
				  const struct lento_fid *fid)
{
	struct vol *v = vol_by_id(cl, fid->volume);

	return (struct cache_at){ fid, !v || !fset_by_volume(cl, v->cv.name) };
}

static int name_path(struct name_paths *np, const struct lento_fid *dir,
		     const char *name, char *path)
{
	char dirpath[CACHE_PATH_MAX];
	int err = cache_path(np->cl->cache, dir, dirpath, sizeof(dirpath));

	return err ?: join(path, dirpath, name);
}

/* A name of the object, other than np->skip, on the disk as the file. */
static int find_other(void *arg, const struct lento_fid *dir,
		      const char *name)
{
	struct name_paths *np = arg;
	char path[CACHE_PATH_MAX];
	int fd;

	if (name_path(np, dir, name, path) || !strcmp(path, np->skip))
		return 0;
	fd = cache_open_obj(np->cl->cache, path, O_PATH, 0);
	if (fd < 0)
		return 0;
	if (!fd_is_file(np->cl, fd, np->fid)) {
		close(fd);
		return 0;
	}
	np->found = fd;
	return 1;
}

/* Every other name becomes a link to np->fd's inode. */
static int relink_other(void *arg, const struct lento_fid *dir,
			const char *name)
{
	struct name_paths *np = arg;
	char path[CACHE_PATH_MAX];

	if (name_path(np, dir, name, path) || !strcmp(path, np->from))
		return 0;
	np->err = np->err ?: cache_link_fd(np->cl->cache, np->fd, path);
	return 0;
}

/*
 * A file with several names is one inode in the cache, as at the server:
 * a new name links to the file's inode under a name already there (1,
 * that inode in *@fd), or 0 if there is none.
 */
static int link_to_other(struct client *cl, const struct lento_fid *fid,
			 const char *path, int *fd)
{
	struct name_paths np = { .cl = cl, .fid = fid, .skip = path,
				 .found = -1 };
	int err = cache_names(cl->cache, fid, find_other, &np);

	if (err < 0 || np.found < 0)
		return err < 0 ? err : 0;
	/* By the inode checked, not by its name again. */
	err = cache_link_fd(cl->cache, np.found, path);
	if (err) {
		close(np.found);
		return err;
	}
	*fd = np.found;
	return 1;
}

/* Every other name of @fid a link to @fd, the file's inode at @path. */
static int relink_names(struct client *cl, const struct lento_fid *fid,
			const char *path, int fd)
{
	struct name_paths np = { .cl = cl, .from = path, .fd = fd };
	int err = cache_names(cl->cache, fid, relink_other, &np);

	return err ?: np.err;
}

/* A name that came or went, for the watchers, if the listing tells. */
static int listing_event(struct listing *li, const char *name, int type,
			 uint32_t event)
{
	struct name_event *p;

	if (!li->tell)
		return 0;
	p = array_grow(li->ev, &li->capev, li->nev, 1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	li->ev = p;
	snprintf(li->ev[li->nev].name, sizeof(li->ev[0].name), "%s", name);
	li->ev[li->nev++].event = event |
				  (type == LENTO_T_DIR ? PRESTO_EV_DIR : 0);
	return 0;
}

/*
 * Does the object @fid keep its name, the server's listing
 * notwithstanding? 1 if it, or an object below it, has changes not yet
 * reintegrated; 0 if not; or -errno.
 */
static int name_kept(struct client *cl, const struct lento_fid *fid)
{
	struct cache_obj o;
	int err = cache_obj_get(cl->cache, fid, &o, NULL, 0);

	if (err)
		return err == -ENOENT ? 0 : err;
	if (o.dirty)
		return 1;
	return o.type == LENTO_T_DIR ? cache_tree_dirty(cl->cache, fid) : 0;
}

/* An old entry went at the server: its name, and its object if clean. */
static int drop_entry(struct client *cl, struct listing *li,
		      const char *dirpath, const struct lento_fid *dir,
		      const struct old_ent *oe)
{
	char path[CACHE_PATH_MAX];
	struct cache_obj o;
	struct cache_at at = listing_at(cl, &oe->fid);
	/* Local changes win until reintegrated. */
	int err = name_kept(cl, &oe->fid);
	int type;

	if (err)
		return err < 0 ? err : 0;
	type = cache_obj_get(cl->cache, &oe->fid, &o, NULL, 0) ? 0 : o.type;
	err = listing_event(li, oe->name, type, PRESTO_EV_DELETE);
	err = err ?: join(path, dirpath, oe->name);
	/*
	 * The object's own inode only: another a user put under the name
	 * (having moved this one away) is theirs, left to the journal.
	 * Checked while the rows still know the object's inode: before
	 * its row, and with it its handle, may go.
	 */
	if (!err)
		err = cache_remove_at(cl->cache, path, &at);
	if (err == -ESTALE) {
		log_info("listing: %s left alone: %s", path, STALE_SAID);
		err = 0;
	}
	err = err ?: cache_dirent_del(cl->cache, dir, oe->name);
	/* Gone with its last name, and a directory's tree with it. */
	if (!err && cache_name_count(cl->cache, &oe->fid) == 0)
		err = cache_obj_del_tree(cl->cache, &oe->fid);
	return err;
}

/* The directories a listing names, into @s: 0 or -ENOMEM. */
static int listed_dirs(const struct listing *li, struct fidset *s)
{
	for (uint32_t i = 0; i < li->n; i++)
		if (li->e[i].de.st.type == LENTO_T_DIR &&
		    fidset_add(s, &li->e[i].de.st.fid) < 0)
			return -ENOMEM;
	return 0;
}

/* A decoded list kept past its frame: its bytes copied (NULL if empty). */
static int list_keep(struct lp_list *l)
{
	uint8_t *p;

	if (!l->left) {
		*l = (struct lp_list){ 0 };
		return 0;
	}
	p = malloc(l->n);
	if (!p) {
		*l = (struct lp_list){ 0 };
		return -ENOMEM;
	}
	memcpy(p, l->p, l->n);
	l->p = p;
	return 0;
}

/*
 * The server's xattrs of an object, @n of them in @l, into @x (room for
 * LENTO_XATTRS_MAX), for cache_placeholder_fd() to set.
 */
static int xattrs_decode(struct listing *li, struct lp_list l, uint32_t n,
			 struct cache_xattr *x, struct cache_xattrs *xa)
{
	struct lp_xattr a;
	uint32_t i = 0;

	while (i < n && i < LENTO_XATTRS_MAX && lp_next_xattr(&l, &a) == 1)
		x[i++] = (struct cache_xattr){ a.name, a.name_len, a.value,
					       a.value_len };
	if (i != n)
		return -EBADMSG;	/* not the list the decoder checked */
	*xa = (struct cache_xattrs){ .x = x, .n = n, .skipped = &li->skipped };
	return 0;
}

/*
 * A directory the server moved to @path (a name in the directory being
 * listed): its tree goes there on the disk, its rows and entries with it,
 * and its old name goes from the rows, for a directory has one. Its own
 * inode only, renamed (a user's made at the old name is left to the
 * journal): 1 if moved, 0 if not (the old tree, if any, removed; the
 * caller makes an empty one), or -errno.
 */
static int dir_moved(struct client *cl, const struct lento_fid *fid,
		     const char *path)
{
	char from[CACHE_PATH_MAX], oname[LENTO_NAME_MAX + 1];
	struct cache_at at = listing_at(cl, fid);
	struct lento_fid odir;
	int fd, err = cache_name_of(cl->cache, fid, &odir, oname);

	if (err)
		return err == -ENOENT ? 0 : err;
	err = cache_path(cl->cache, fid, from, sizeof(from));
	err = err ?: cache_dirent_del(cl->cache, &odir, oname);
	if (err)
		return err;
	fd = cache_open_obj(cl->cache, from, O_PATH | O_DIRECTORY, 0);
	if (fd < 0)
		return fd == -ENOENT || fd == -ENOTDIR ? 0 : fd;
	err = cache_at_allows(cl->cache, fd, from, &at);
	close(fd);
	if (err)
		return err == -ESTALE ? 0 : err;
	if (!cache_rename(cl->cache, from, path, RENAME_NOREPLACE))
		return 1;
	/* Its place taken, or a loop the rows make: not moved. */
	err = cache_remove_at(cl->cache, from, &at);
	return err == -ESTALE || err == -ENOENT ? 0 : err;
}

/* One entry of a new listing into the cache (and onto the disk). */
static int take_entry(struct client *cl, struct job *j, const char *dirpath,
		      const struct lento_fid *dir, const struct lp_dirent *e,
		      const char *target)
{
	struct listing *li = j->priv;
	char path[CACHE_PATH_MAX];
	struct cache_xattr x[LENTO_XATTRS_MAX];
	struct cache_xattrs xa;
	struct lento_fid was;
	struct cache_obj old, o = { 0 };
	bool have = !cache_obj_get(cl->cache, &e->de.st.fid, &old, NULL, 0);
	bool has_name = !cache_lookup(cl->cache, dir, e->de.name, &was);
	bool same_name = has_name && lento_fid_eq(&was, &e->de.st.fid);
	bool same = have && old.type == e->de.st.type &&
		    lento_vv_eq(&old.vv, &e->de.st.vv);
	bool newer;
	int fd = -1, err;

	if (li->keep_names && !same_name)
		return 0;	/* the log's names (listing_begin()) */

	/*
	 * The name is another object's here, one with changes not yet
	 * reintegrated (under it, for a directory): it keeps the name
	 * until they are, as drop_entry() keeps it.
	 */
	if (has_name && !same_name) {
		err = name_kept(cl, &was);
		if (err)
			return err < 0 ? err : 0;
	}
	/* A directory has one name: the one its changes are under, still. */
	if (have && !same_name && old.type == LENTO_T_DIR) {
		err = name_kept(cl, &e->de.st.fid);
		if (err)
			return err < 0 ? err : 0;
	}
	/*
	 * Changed here, or newer here than the listing: news that came
	 * after it (between two of its steps) -- a reintegration's answer,
	 * a fetched body -- is not undone by it. A directory keeps the one
	 * name the news gave it (a move the journal brought and the
	 * reintegration answered): the listing's is older.
	 */
	newer = have && (old.dirty || lento_vv_cmp(&old.vv, &e->de.st.vv) ==
			 LENTO_VV_AFTER);
	if (newer && !same_name && old.type == LENTO_T_DIR) {
		err = cache_name_count(cl->cache, &e->de.st.fid);
		if (err)
			return err < 0 ? err : 0;
	}
	err = same_name ? 0 : listing_event(li, e->de.name, e->de.st.type,
					    PRESTO_EV_CREATE);
	if (err)
		return err;
	if (newer)
		return same_name ? 0 :
		       cache_dirent_put(cl->cache, dir, e->de.name,
					&e->de.st.fid);
	obj_from_status(&o, &e->de.st);
	o.valid = !j->broken && !fidset_has(&li->broken, &o.fid);
	/* Symlinks, fifos, sockets and devices are complete as made. */
	o.data = (same && old.data) || (o.type != LENTO_T_REG &&
					o.type != LENTO_T_DIR);
	o.used_ms = have ? old.used_ms : wall_ms();
	err = join(path, dirpath, e->de.name);
	if (err)
		return err;
	/*
	 * Its name gone from a fileset's disk: a user removed or moved it
	 * through presto, and the journal has yet to say so. Put back, it
	 * would come back to life there, and stay when the journal's
	 * removal reaches the rows: left to the journal. (A device that
	 * lento may not make is listed only, never on the disk.)
	 */
	if (have && same_name && !same && old.type != LENTO_T_CHR &&
	    old.type != LENTO_T_BLK && !listing_at(cl, &o.fid).lax) {
		struct stat sb;

		err = cache_lstat(cl->cache, path, &sb);
		/* Not current: checked again when next used. */
		if (err == -ENOENT)
			return cache_obj_set_state(cl->cache, &o.fid, false,
						   old.data);
		if (err)
			return err;
	}
	if (have && !same_name && old.type == LENTO_T_DIR) {
		err = dir_moved(cl, &o.fid, path);
		err = err < 0 ? err : 0;
	}
	if (!err && !(same && same_name)) {
		int linked = o.type == LENTO_T_REG && same ?
			     link_to_other(cl, &o.fid, path, &fd) : 0;

		/* A new inode has none; one that changed may have others. */
		bool xattrs = !linked && (e->nxattr || have);
		/*
		 * In place of the object's own old inode (or of nothing):
		 * not of a user's file made under its name, nor of another
		 * object moved there, before lento consumed the journal
		 * that says so.
		 */
		struct cache_at at = listing_at(cl, &o.fid);
		struct stat sb;
		/* A directory made anew here: the old tree is not in it. */
		bool fresh_dir = o.type == LENTO_T_DIR && have &&
				 (cache_lstat(cl->cache, path, &sb) ||
				  !S_ISDIR(sb.st_mode));

		err = linked < 0 ? linked : 0;
		if (!err && xattrs)
			err = xattrs_decode(li, e->xattrs, e->nxattr, x, &xa);
		/* Its xattrs before its name: on it, not on what has that. */
		if (!err && !linked)
			err = cache_placeholder_fd(cl->cache, path, &o, target,
						   xattrs ? &xa : NULL, &at,
						   &fd);
		/*
		 * A placeholder holds nothing yet, whatever the row knew of
		 * the object: a directory moved at the server comes here
		 * under its new name, and its files (their rows kept, their
		 * names gone with the old tree) come as new placeholders.
		 * Taken for complete, they read as zeros and as empty
		 * directories.
		 */
		if (!err && !linked &&
		    (o.type == LENTO_T_REG || o.type == LENTO_T_DIR))
			o.data = false;
		if (!err && fresh_dir)
			err = cache_dirents_del(cl->cache, &o.fid);
		/*
		 * The name is the inode just made or linked, not another a
		 * user put there since: the journal will say what became
		 * of it.
		 */
		err = err ?: cache_path_is_fd(cl->cache, path, fd);
		err = err ?: made_note(li, path, fd, &o, have);
		/* A test's window: the name changes here (fault.h). */
		if (!err)
			fault_hold("listing-made", FAULT_HOLD_MS);
		/* A directory changed keeps its inode: not its flags. */
		if (!err && have && !same && o.type == LENTO_T_DIR)
			kclient_clear_flags(cl, o.fid.volume, path);
		if (err == -EOPNOTSUPP)	/* a device, say: listed only */
			err = 0;
		else if (!err && !linked)
			cache_handle_update_fd(cl->cache, &o.fid, fd);
	} else if (!err && o.type == LENTO_T_REG) {
		/* Kept: the file's own inode, if the name still gives it. */
		fd = cache_open_obj(cl->cache, path, O_PATH, 0);
		if (fd >= 0 && !fd_is_file(cl, fd, &o.fid)) {
			close(fd);
			fd = -1;
		}
	}
	/* Its names in directories not listed here yet, hidden. */
	if (!err && fd >= 0 && o.type == LENTO_T_REG &&
	    (o.nlink > 1 || (have && old.nlink > 1)))
		err = cache_names_fit_fd(cl->cache, &o.fid, fd, o.nlink);
	if (fd >= 0)
		close(fd);
	err = err ?: cache_obj_put(cl->cache, &o, target,
				   target ? strlen(target) : 0);
	return err ?: cache_dirent_put(cl->cache, dir, e->de.name,
				       &e->de.st.fid);
}

/* Entries in name order, each with its target: lookups by bsearch. */
static int listing_sort(struct listing *li)
{
	for (uint32_t i = 0; i < li->n; i++)
		li->e[i].target = li->targets[i];	/* travels with it */
	if (li->n)
		qsort(li->e, li->n, sizeof(*li->e), ent_cmp);
	for (uint32_t i = 0; i < li->n; i++) {
		li->targets[i] = (char *)li->e[i].target;
		li->e[i].target = NULL;
	}
	/* A name twice would make one entry of two objects. */
	for (uint32_t i = 1; i < li->n; i++)
		if (!ent_cmp(&li->e[i - 1], &li->e[i]))
			return -EBADMSG;
	return 0;
}

struct fid_type {
	struct lento_fid fid;
	int type;
};

static int fid_type_cmp(const void *a, const void *b)
{
	const struct fid_type *x = a, *y = b;

	return memcmp(&x->fid, &y->fid, sizeof(x->fid));
}

/*
 * A fid is one object for good, of one type: a listing that says
 * otherwise (two types for one fid, or a type the cache knows it not
 * to have) is refused before anything of it is applied. Two names of
 * one object are its hard links.
 */
static int listing_types(struct client *cl, const struct listing *li)
{
	struct fid_type *ft = calloc(li->n ? li->n : 1, sizeof(*ft));
	struct cache_obj o;
	int err = ft ? 0 : -ENOMEM;

	for (uint32_t i = 0; !err && i < li->n; i++) {
		ft[i].fid = li->e[i].de.st.fid;
		ft[i].type = li->e[i].de.st.type;
		if (!cache_obj_get(cl->cache, &ft[i].fid, &o, NULL, 0) &&
		    o.type != ft[i].type)
			err = -EBADMSG;
	}
	if (!err)
		qsort(ft, li->n, sizeof(*ft), fid_type_cmp);
	for (uint32_t i = 1; !err && i < li->n; i++)
		if (!fid_type_cmp(&ft[i - 1], &ft[i]) &&
		    ft[i - 1].type != ft[i].type)
			err = -EBADMSG;
	free(ft);
	return err;
}

/*
 * The first step of applying a listing: the checks, the directory's
 * own status, the names that went. 0 or -errno.
 */
static int listing_begin(struct job *j, const struct cache_obj *d,
			 const char *dirpath)
{
	struct listing *li = j->priv;
	struct client *cl = j->cl;
	struct old_list ol = { 0 };
	struct cache_obj nd = { 0 };
	struct cache_xattr x[LENTO_XATTRS_MAX];
	struct cache_xattrs xa;
	struct cache_at at = listing_at(cl, &j->fid);
	struct fidset dirs;
	bool dirs_made = false;
	int err = listing_sort(li);

	err = err ?: listing_types(cl, li);
	if (err == -EBADMSG)
		log_err("volume %" PRIu32 ": the server listed a directory with "
			"a name twice, or an object of two types",
			j->fid.volume);
	if (err)
		return err;
	/* A first listing is no news: the names were there all along. */
	li->tell = d->data;
	/*
	 * Changed here, its own status is the log's until reintegrated.
	 * Complete, its names are the log's too: the listing refreshes the
	 * status of the entries the cache has under the same names, and no
	 * more -- a name removed here is not brought back, one made here is
	 * not dropped. Never complete, it has no name changed here (a name
	 * changes after a lookup, which needs the listing): it goes in whole.
	 */
	li->keep_names = d->dirty && d->data;
	/*
	 * Gone from a fileset's disk: moved or removed through presto, the
	 * journal not read yet. Made again here it would be an empty
	 * directory beside the one the user has: not listed until the
	 * journal says where it went.
	 */
	if (!at.lax && strchr(dirpath, '/')) {
		struct stat sb;

		err = cache_lstat(cl->cache, dirpath, &sb);
		if (err == -ENOENT)
			return -ESTALE;
		if (err)
			return err;
	}
	if (!d->dirty) {
		obj_from_status(&nd, &li->dir);
		/* Kept if there, if it is this directory; xattrs by inode. */
		err = xattrs_decode(li, li->dir_xattrs, li->dir_nxattr, x,
				    &xa);
		err = err ?: cache_placeholder_fd(cl->cache, dirpath, &nd,
						  NULL, &xa, &at, NULL);
	}
	if (!li->keep_names)
		err = err ?: cache_readdir(cl->cache, &j->fid, collect_old,
					   &ol);
	/*
	 * What a listing that a crash cut short left on the disk: inodes
	 * made for names the rows never got, removed here whether listed
	 * again or not. Those at names the rows have (in place of their
	 * object's inode) are replaced or removed as the entries come: the
	 * mark allows it. Best effort: a leftover that stays is harmless.
	 */
	if (!err && !li->keep_names) {
		int stuck = 0;
		int n = cache_drop_strays(cl->cache, dirpath, old_has, &ol,
					  &stuck);

		if (n > 0)
			log_info("listing %s: removed %d inodes an interrupted "
				 "listing left there", dirpath, n);
		if (n < 0 || stuck)
			log_warn("listing %s: the inodes an interrupted listing "
				 "left there stay: %s", dirpath,
				 cache_strerror(n < 0 ? n : stuck));
	}
	fidset_init(&dirs);
	for (size_t i = 0; !err && i < ol.n; i++) {
		if (listed(li, &ol.e[i]))
			continue;
		if (!dirs_made) {
			err = listed_dirs(li, &dirs);
			dirs_made = true;
		}
		/* Renamed in this directory: take_entry() moves its tree. */
		if (!err && !fidset_has(&dirs, &ol.e[i].fid))
			err = drop_entry(cl, li, dirpath, &j->fid, &ol.e[i]);
	}
	fidset_free(&dirs);
	free(ol.e);
	return err;
}

/*
 * Is a listing of @dir being applied (in steps)? Its rows are then half
 * the old listing's and half the new one's: a lookup in it joins the
 * listing's job (need_listing(), presto's FETCH_DIR), whatever the row
 * says. The row itself keeps saying whether the directory was complete
 * before: a directory never complete has no name changed here.
 */
bool listing_applying(struct client *cl, const struct lento_fid *dir)
{
	struct job *j = job_find(cl, J_READDIR, dir->volume, dir, NULL);
	const struct listing *li = j && !j->done ? j->priv : NULL;

	return li && li->next;
}

/*
 * Apply the listing's next entries, for about a step of the loop
 * (LO_STEP_MS): a directory of 100,000 entries takes seconds, or tens
 * of them on a slow disk, and meanwhile the loop answers the server's
 * heartbeats and presto's upcalls. Each step is a transaction of its
 * own; until the last, lookups in the directory join this job
 * (listing_applying()). 1: more to do, 0 done, -errno.
 */
static int listing_step(struct job *j)
{
	struct listing *li = j->priv;
	struct client *cl = j->cl;
	char dirpath[CACHE_PATH_MAX];
	struct cache_obj d, nd = { 0 };
	uint64_t t0 = lo_now_ms();
	int err;

	/*
	 * Gone. Changed here, before the listing or between two of its
	 * steps, it is applied as listing_begin() says; take_entry() leaves
	 * what changed here alone.
	 */
	err = cache_obj_get(cl->cache, &j->fid, &d, NULL, 0);
	if (err)
		return err == -ENOENT ? 0 : err;
	err = cache_path(cl->cache, &j->fid, dirpath, sizeof(dirpath));
	/* Not reachable any more; half applied, a failure (abandoned). */
	if (err == -ENOENT && !li->next)
		return 0;
	if (!err && !li->next)
		err = listing_begin(j, &d, dirpath);
	/*
	 * Changed here between two steps (lento consumed presto's journal
	 * meanwhile), a complete directory's names are the log's from now
	 * on, as if so from the start.
	 */
	else if (!err && d.dirty && d.data)
		li->keep_names = true;
	if (err)
		return err;
	/* Every new name is in this directory: one fsync of it a step. */
	cache_defer_dirsync(cl->cache, true);
	while (!err && li->next < li->n) {
		uint32_t i = li->next++;

		err = take_entry(cl, j, dirpath, &j->fid, &li->e[i],
				 li->targets[i]);
		if (!(i % 16)) {
			kclient_progress(cl);	/* presto waits on this */
			/* A test's crash takes the whole listing at once. */
			if ((lo_now_ms() - t0 >= LO_STEP_MS &&
			     !fault_armed("listing-crash")) ||
			    fault_armed("listing-paused"))
				break;
		}
	}
	cache_defer_dirsync(cl->cache, false);
	err = err ?: cache_sync_dir(cl->cache, dirpath);
	if (err)
		return err;
	if (li->next < li->n) {
		/*
		 * presto's lookups in it come to lento until it is complete,
		 * and join this job (listing_applying()): not answered from
		 * a half-applied tree.
		 */
		if (!li->steps++)
			kclient_clear_flags(cl, j->fid.volume, dirpath);
		return 1;
	}
	/*
	 * Changed here meanwhile: its row is the log's, complete now. Or
	 * newer than the listing (this client's change reintegrated between
	 * two steps): its status stands, a break since it was had counts.
	 */
	if (d.dirty)
		return cache_obj_set_state(cl->cache, &j->fid, !j->broken,
					   true);
	if (lento_vv_cmp(&d.vv, &li->dir.vv) == LENTO_VV_AFTER)
		return cache_obj_set_state(cl->cache, &j->fid,
					   d.valid && !j->broken, true);
	obj_from_status(&nd, &li->dir);
	nd.valid = !j->broken;
	nd.data = true;
	nd.used_ms = wall_ms();
	return cache_obj_put(cl->cache, &nd, NULL, 0);
}

/*
 * Room for one more entry: grown as they come, not by the total the
 * first frame announces (up to LP_DIR_MAX from a server gone wrong).
 */
static int listing_room(struct listing *li)
{
	uint32_t cap;
	void *p;

	if (li->n < li->cap)
		return 0;
	/* The decoder checks the totals frame by frame: n < total. */
	cap = li->cap < li->total / 2 ? li->cap * 2 : li->total;
	if (cap < 64)
		cap = li->total < 64 ? li->total : 64;
	p = reallocarray(li->e, cap, sizeof(*li->e));
	if (!p)
		return -ENOMEM;
	li->e = p;
	p = reallocarray(li->targets, cap, sizeof(*li->targets));
	if (!p)
		return -ENOMEM;
	li->targets = p;
	li->cap = cap;
	return 0;
}

static int listing_add(struct listing *li, const struct lp_dirent *d)
{
	uint32_t n = li->n;

	if (listing_room(li))
		return -ENOMEM;
	li->e[n] = *d;
	li->e[n].target = NULL;
	li->targets[n] = NULL;
	if (list_keep(&li->e[n].xattrs))
		return -ENOMEM;
	if (d->target_len) {
		li->targets[n] = strndup(d->target, d->target_len);
		if (!li->targets[n]) {
			free((void *)li->e[n].xattrs.p);
			return -ENOMEM;
		}
	}
	li->n++;
	return 0;
}

/* The first frame: the directory's status and the listing's size. */
static int listing_init(struct listing *li, const struct lp_readdir_reply *m)
{
	li->begun = true;
	li->dir = m->dir;
	li->total = m->total;
	li->dir_xattrs = m->dir_xattrs;
	li->dir_nxattr = m->dir_nxattr;
	return list_keep(&li->dir_xattrs) ? -ENOMEM : 0;
}

static int readdir_frame(struct job *j, const struct lp_frame *f,
			 const char **why)
{
	struct listing *li = j->priv;
	struct lp_readdir_reply m;
	struct lp_dirent d;
	int err = 0;

	if (lp_decode_readdir_reply(f, &m, why))
		return -EBADMSG;
	if (!li->begun && !m.first)
		err = listing_init(li, &m);
	else if (!li->begun || m.first != li->seen || m.total != li->total) {
		*why = "READDIR_REPLY: frames that do not follow one another";
		return -EBADMSG;
	}
	if (!lento_fid_eq(&m.dir.fid, &j->fid)) {
		*why = "READDIR_REPLY: the listing of another directory";
		return -EBADMSG;
	}
	while (!err && lp_next_dirent(&m.ents, &d) == 1) {
		li->seen++;
		/* presto's journal lives there: never lento's to touch. */
		if (kclient_skip_name(j->cl, &j->fid, d.de.name))
			continue;
		err = listing_add(li, &d);
	}
	return err;
}

static void listing_next(struct job *j, int err);

static int readdir_reply(void *arg, const struct lp_frame *f, int err,
			 const char **why)
{
	struct job *j = arg;

	reply_over(j, f, err);
	if (err)
		return job_end(j, err), 0;
	if (f->type == LP_ERROR)
		return job_error(j, f, "listing a directory", why);
	if (f->type != LP_READDIR_REPLY) {
		*why = "a READDIR answered by something else";
		return -EBADMSG;
	}
	err = readdir_frame(j, f, why);
	if (err == -EBADMSG)
		return err;
	if (!err && (f->flags & LP_F_MORE))
		return 0;
	listing_next(j, err);
	return 0;
}

static void listing_later(void *arg, int res);

/* listing_later() after a turn of the loop: false if the ring is full. */
static bool listing_yield(struct job *j)
{
	if (lo_later(j->cl->loop, listing_later, j))
		return false;
	j->io++;
	return true;
}

/*
 * A step in a transaction of its own: 1 more to do, 0 done, -errno. A
 * step rolled back takes its events with it.
 */
static int listing_turn(struct job *j)
{
	struct cache *c = j->cl->cache;
	struct listing *li = j->priv;
	size_t nev = li->nev;
	int rc = cache_begin(c), e;

	rc = rc ?: listing_step(j);
	/* A test's crash: the step's inodes made, its rows not (fault.h). */
	if (rc >= 0 && fault_at("listing-crash"))
		raise(SIGKILL);
	e = rc < 0 ? rc : fault_at("listing-commit") ? -EIO : cache_commit(c);
	if (e) {
		cache_rollback(c);
		li->nev = nev;
		listing_unmake(j->cl, li);
	}
	listing_made_clear(li);
	return e ?: rc;
}

/*
 * A listing that failed after some of its steps: the directory's rows
 * are half old, half new. Not current, it is listed again before it is
 * trusted (unless changed here: then its names are the log's anyway).
 */
static void listing_abandon(struct job *j)
{
	struct cache *c = j->cl->cache;
	struct cache_obj d;
	int err = cache_begin(c);

	err = err ?: cache_obj_get(c, &j->fid, &d, NULL, 0);
	err = err ?: cache_obj_set_state(c, &j->fid, false, d.data);
	err = err ?: cache_commit(c);
	if (err)
		cache_rollback(c);
	if (err && err != -ENOENT)
		job_msg(j, "listing " FIDFMT ": marking it not current: %s",
			FIDARG(&j->fid), cache_strerror(err));
}

/*
 * Does the listing wait for presto's journal? A user's change made
 * through the mount is on the disk at once, and in lento's rows once
 * lento has read its record: before that, a name missing on the disk
 * looks like one the server removed, a user's new file like a leftover
 * -- and a file the user removed, which the server renamed, would come
 * back under its new name. So a fileset's listing is applied once the
 * journal is read up to a KML_SYNC asked for when the reply came: every
 * change made before then is in the rows (what comes after is the
 * listing's steps' to meet, as before). Bounded: a journal that does
 * not get there in LISTING_JOURNAL_MS lets the listing go on.
 */
static bool listing_journal(struct job *j)
{
	struct listing *li = j->priv;
	struct client *cl = j->cl;
	struct vol *v = vol_by_id(cl, j->volume);
	uint64_t now = lo_now_ms();

	li->journal_wait = false;
	if (li->journal_read || !v)
		return false;
	if (!li->journal_ms) {
		li->journal_ms = now;
		kclient_catch_up(cl, v);
	}
	li->journal_read = kclient_journal_read(cl, v);
	if (!li->journal_read && now - li->journal_ms >= LISTING_JOURNAL_MS) {
		log_warn("listing " FIDFMT ": applied before presto's journal "
			 "was read up to date (still not after %d s)",
			 FIDARG(&j->fid), LISTING_JOURNAL_MS / 1000);
		li->journal_read = true;
	}
	li->journal_wait = !li->journal_read;
	return li->journal_wait;
}

void listings_journal_moved(struct client *cl, const struct vol *v)
{
	for (struct job *j = cl->jobs; j; j = j->next) {
		struct listing *li = j->priv;

		if (j->kind != J_READDIR || j->done || !li ||
		    !li->journal_wait || (v && j->volume != v->cv.id))
			continue;
		/* Looked at again after a turn of the loop; now, no room. */
		if (listing_yield(j))
			li->journal_wait = false;
	}
}

/*
 * A step of applying the listing (@err: the reply failed), then the
 * next after a turn of the loop, or the job's end.
 */
static void listing_next(struct job *j, int err)
{
	struct client *cl = j->cl;
	struct listing *li = j->priv;

	/* Waiting: listings_journal_moved() comes back. */
	if (!err && !li->next && listing_journal(j))
		return;
	err = err ?: listing_turn(j);
	if (err == 1 && listing_yield(j)) {
		cl->st.listing_steps++;
		return;
	}
	/* No room on the ring for the turn: the rest at once. */
	while (err == 1)
		err = listing_turn(j);
	if (err) {
		job_msg(j, "listing " FIDFMT ": %s", FIDARG(&j->fid),
			err == -ESTALE ? STALE_SAID : cache_strerror(err));
		/* Steps committed before the failure changed names. */
		if (li->steps) {
			listing_abandon(j);
			kclient_notify(cl, &j->fid, li->ev, li->nev);
		}
	} else {
		cl->st.listings++;
		kclient_notify(cl, &j->fid, li->ev, li->nev);
	}
	if (!err && li->skipped) {
		cl->st.xattrs_skipped += li->skipped;
		job_msg(j, "listing " FIDFMT ": %u xattrs the cache could not "
			"take (not permitted, not supported or too large)",
			FIDARG(&j->fid), li->skipped);
	}
	job_end(j, err);
}

static void listing_later(void *arg, int res)
{
	struct job *j = arg;
	const struct timespec nap = { 0, 20 * 1000000L };

	j->io--;
	if (j->done)		/* ended meanwhile (lento stopping) */
		return job_free_if_idle(j);
	/* A test's window between two steps: the loop turns on meanwhile. */
	if (!res && fault_armed("listing-paused")) {
		nanosleep(&nap, NULL);
		if (listing_yield(j))
			return;
	}
	listing_next(j, res);
}

static int readdir_start(struct job *j)
{
	struct conn *c = j->cl->conn;
	struct listing *li = calloc(1, sizeof(*li));

	if (!li)
		return -ENOMEM;
	fidset_init(&li->broken);
	j->priv = li;
	j->free_priv = listing_free;
	return lp_encode_fid(conn_buf(c), LP_READDIR, j->tag, &j->fid) ?:
	       start_request(j, LP_READDIR, readdir_reply);
}

/* --------------------------------------------------------------- bodies */

struct body_in {
	struct lento_status st;
	int fd;
	bool in_place;			/* filling the placeholder, not tmp */
	char tmp[CACHE_PATH_MAX];
	struct lp_stream stream;
	bool started, complete, failed;
	int err;
	uint64_t bytes;
};

/* One chunk on its way to the file. */
struct chunk_write {
	struct job *j;
	void *buf;
	size_t len;
};

static void body_free(struct job *j)
{
	struct body_in *b = j->priv;

	if (b->fd >= 0)
		close(b->fd);
	if (b->tmp[0])
		cache_unlink(j->cl->cache, b->tmp, 0);
	free(b);
}

/*
 * The xattrs a body fetched takes. The listing that gave the object's
 * version put that version's xattrs on its inode; the body's version may
 * be newer (changed at the server since), and then they are the
 * server's, asked for with a GETATTR. Never those of whatever the
 * object's name holds now: a user's file put there, another object.
 */
#define BODY_ASK	1	/* body_install(): the server's xattrs first */

/*
 * The body is in the file, synced: put it in place, with the xattrs of
 * @sx (the server's, from a GETATTR) or, if NULL, those the object has
 * here if they are its version's -- else BODY_ASK.
 */
static int body_install(struct job *j, const struct cache_xattrs *sx)
{
	struct body_in *b = j->priv;
	struct client *cl = j->cl;
	char path[CACHE_PATH_MAX];
	struct cache_obj o;
	struct cache_xattr_copy kept = { 0 };
	uint32_t skipped = 0;
	struct cache_xattrs xa = { .skipped = &skipped };
	struct cache_at at;
	bool same, local;
	int old = -1, err = cache_obj_get(cl->cache, &j->fid, &o, NULL, 0);

	if (err)		/* gone */
		return err == -ENOENT ? 0 : err;
	/* The xattrs on the object's inode here are of the row's version. */
	same = lento_vv_eq(&o.vv, &b->st.vv);
	/*
	 * Changed here: its content, if it has any here, is this client's
	 * (written meanwhile). Without content, only its names, attributes
	 * or xattrs were (a file renamed before it was ever read): the
	 * content is the server's to fetch, and the rest of the row, and of
	 * the file, stays. The server's content is of the version the
	 * records build on, or of a newer one if it changed there since:
	 * then that is all there is to read, and the records' reintegration
	 * reports the conflict.
	 */
	local = o.dirty;
	if (local && o.data)
		return 0;
	if (local && !same)
		log_warn("fetching " FIDFMT ": changed here and at the server "
			 "since; its content is the server's newer one, and "
			 "reintegrating this client's changes of it will be a "
			 "conflict", FIDARG(&j->fid));
	err = cache_path(cl->cache, &j->fid, path, sizeof(path));
	if (err)
		return err == -ENOENT ? 0 : err;
	at = listing_at(cl, &j->fid);
	if (!b->in_place) {
		/*
		 * A new inode in place of the object's own, found by its
		 * handle, whose xattrs it takes; or of nothing, or of a
		 * crash's leftover where only lento changes the tree.
		 */
		old = cache_open_obj(cl->cache, path, O_PATH, 0);
		if (old == -ENOENT && !at.lax)
			return -ESTALE;	/* moved or removed: the journal */
		if (old < 0 && old != -ENOENT)
			return old;
		err = old < 0 ? 0 : cache_at_allows(cl->cache, old, path, &at);
		if (!err && old >= 0 && !sx && (same || local) &&
		    fd_is_file(cl, old, &j->fid))
			err = cache_xattrs_read_fd(old, &kept);
		else if (!err && !sx)
			err = BODY_ASK;	/* nothing here to take them from */
		if (old >= 0)
			close(old);
		if (err)
			return err;
		xa.x = sx ? sx->x : kept.x;
		xa.n = sx ? sx->n : kept.n;
	} else if (!sx && !same && !local) {
		return BODY_ASK;	/* the placeholder has an older one's */
	}
	if (!local) {
		obj_from_status(&o, &b->st);
		o.valid = !j->broken;
	}
	o.data = true;
	o.used_ms = wall_ms();
	/*
	 * A temporary file gets its attributes as it is installed; the
	 * placeholder filled, by the descriptor written through (its name
	 * may have moved on meanwhile), and the server's xattrs if asked.
	 */
	if (b->in_place) {
		err = cache_set_attrs_fd(b->fd, &o);
		if (!err && sx)
			err = cache_sync_xattrs_fd(b->fd, sx->x, sx->n,
						   &skipped);
	}
	/*
	 * Complete: presto may serve it alone once it has the name (after
	 * the attributes, in the lower's journal too) -- if it is current.
	 */
	if (!err && (o.valid || local))
		err = kclient_flags_new(cl, &o.fid, b->fd);
	if (err == -EOPNOTSUPP)
		err = 0;
	err = err ?: cache_begin(cl->cache);
	if (err) {
		cache_xattrs_release(&kept);
		return err;
	}
	if (!b->in_place) {
		/* Its xattrs on it before its name, in place of the old. */
		err = cache_install_at(cl->cache, b->tmp, path, &o, &xa, &at,
				       NULL);
		if (!err)
			b->tmp[0] = 0;
	}
	cache_xattrs_release(&kept);
	/*
	 * Only b->fd is known to be the file: the placeholder filled (its
	 * name may have moved on during the fetch, and a user's file taken
	 * it) or the new file installed. A name that is not it now is left
	 * to the journal: that other file must not become this one's other
	 * names, nor be recorded as its inode.
	 */
	err = err ?: cache_path_is_fd(cl->cache, path, b->fd);
	/* Its other names: the same inode. */
	err = err ?: relink_names(cl, &o.fid, path, b->fd);
	err = err ?: cache_names_fit_fd(cl->cache, &o.fid, b->fd, o.nlink);
	err = err ?: cache_obj_put(cl->cache, &o, NULL, 0);
	if (!err)
		cache_handle_update_fd(cl->cache, &o.fid, b->fd);
	err = err ?: cache_commit(cl->cache);
	if (err)
		cache_rollback(cl->cache);
	if (!err)
		cl->st.xattrs_skipped += skipped;
	return err;
}

static void body_done(struct job *j, int err)
{
	if (!err) {
		j->cl->st.fetches++;
		j->cl->st.fetched_bytes += ((struct body_in *)j->priv)->bytes;
	} else if (err == -ESTALE) {
		job_msg(j, "storing the body of " FIDFMT ": %s",
			FIDARG(&j->fid), STALE_SAID);
	} else {
		job_msg(j, "storing the body of " FIDFMT ": %s",
			FIDARG(&j->fid), cache_strerror(err));
	}
	job_end(j, err);	/* and it goes */
}

/* The server's status and xattrs of the file: the body goes in. */
static int body_attr_reply(void *arg, const struct lp_frame *f, int err,
			   const char **why)
{
	struct job *j = arg;
	struct body_in *b = j->priv;
	struct lp_getattr_reply *m;
	struct cache_xattr x[LENTO_XATTRS_MAX];
	struct cache_xattrs sx;

	reply_over(j, f, err);
	if (err)
		return job_end(j, err), 0;
	if (f->type == LP_ERROR)
		return job_error(j, f, "the xattrs of a file fetched", why);
	m = malloc(sizeof(*m));
	if (!m)
		return job_end(j, -ENOMEM), 0;
	if (f->type != LP_GETATTR_REPLY || lp_decode_getattr_reply(f, m, why) ||
	    !lento_fid_eq(&m->st.fid, &j->fid)) {
		free(m);
		return *why = *why ?: "not the GETATTR_REPLY of the file",
		       -EBADMSG;
	}
	for (uint32_t i = 0; i < m->nxattr; i++)
		x[i] = (struct cache_xattr){ m->xattr[i].name,
					     m->xattr[i].name_len,
					     m->xattr[i].value,
					     m->xattr[i].value_len };
	sx = (struct cache_xattrs){ .x = x, .n = m->nxattr };
	/* Changed again since the body was sent: not current, then. */
	if (!lento_vv_eq(&m->st.vv, &b->st.vv))
		j->broken = true;
	free(m);
	err = body_install(j, &sx);
	body_done(j, err == BODY_ASK ? -EIO : err);
	return 0;
}

static void body_synced(void *arg, int res)
{
	struct job *j = arg;
	struct conn *c = j->cl->conn;
	int err = res;

	j->io--;
	if (j->done)		/* ended without it: it only had to go */
		return job_free_if_idle(j);
	err = err ?: body_install(j, NULL);
	if (err != BODY_ASK)
		return body_done(j, err);
	if (!c)
		return body_done(j, -ENOTCONN);
	j->tag = conn_tag(c);
	err = lp_encode_fid(conn_buf(c), LP_GETATTR, j->tag, &j->fid) ?:
	      start_request(j, LP_GETATTR, body_attr_reply);
	if (err) {
		conn_buf(c)->len = 0;
		body_done(j, err);
	}
}

/* Every chunk written and the last one seen: fsync, then install. */
static void body_maybe_done(struct job *j)
{
	struct body_in *b = j->priv;
	int err;

	if (j->io || !b->complete || j->done)
		return;
	if (b->failed) {
		job_msg(j, "writing the body of " FIDFMT ": %s",
			FIDARG(&j->fid), cache_strerror(b->err));
		return job_end(j, b->err);
	}
	err = lo_file_fsync(j->cl->loop, b->fd, body_synced, j);
	if (err)
		return job_end(j, err);
	j->io++;
}

static void chunk_written(void *arg, int res)
{
	struct chunk_write *w = arg;
	struct job *j = w->j;
	struct body_in *b = j->priv;
	struct client *cl = j->cl;

	cl->fetch_mem -= w->len;
	if (cl->fetch_mem <= cl->fetch_mem_max / 2 && cl->conn)
		conn_resume(cl->conn);
	free(w->buf);
	free(w);
	j->io--;
	if (j->done)
		return job_free_if_idle(j);
	if (res && !b->failed) {
		b->failed = true;
		b->err = res;
	}
	body_maybe_done(j);	/* may end it, and free it */
}

static int body_chunk(struct job *j, const struct lp_frame *f,
		      const char **why)
{
	struct body_in *b = j->priv;
	struct chunk_write *w;
	struct lp_data d;
	int r;

	if (!b->started) {
		*why = "DATA before FETCH_REPLY";
		return -EBADMSG;
	}
	if (lp_decode_data(f, &d, why) ||
	    (r = lp_stream_data(&b->stream, &d, why)) < 0)
		return -EBADMSG;
	b->complete = r == 1;
	if (!d.raw_len)
		return 0;
	w = calloc(1, sizeof(*w));
	if (w)
		w->buf = malloc(d.raw_len);
	if (!w || !w->buf) {
		free(w);
		b->failed = true;
		b->err = -ENOMEM;
		return 0;
	}
	if (lp_chunk_decompress(&d, w->buf, d.raw_len, why, &j->cl->zd)) {
		free(w->buf);
		free(w);
		return -EBADMSG;
	}
	w->j = j;
	w->len = d.raw_len;
	b->bytes += d.raw_len;
	if (b->failed || lo_file_write(j->cl->loop, b->fd, w->buf, d.raw_len,
				       d.offset, chunk_written, w)) {
		free(w->buf);
		free(w);
		b->failed = true;
		b->err = b->err ?: -EIO;
		return 0;
	}
	j->io++;
	j->cl->fetch_mem += d.raw_len;
	if (j->cl->fetch_mem > j->cl->st.fetch_mem_peak)
		j->cl->st.fetch_mem_peak = j->cl->fetch_mem;
	return 0;
}

/*
 * The placeholder of @fid, opened for writing and sized @size, if it is
 * one: a regular file with no content here, no local change and no data
 * on disk (a name of an older version, which a reader may have open, has
 * some). Or -1.
 */
static int open_placeholder(struct client *cl, const struct lento_fid *fid,
			    uint64_t size)
{
	char path[CACHE_PATH_MAX];
	struct cache_obj o;
	struct stat sb;
	int fd;

	if (cache_obj_get(cl->cache, fid, &o, NULL, 0) || o.data || o.dirty ||
	    o.type != LENTO_T_REG ||
	    cache_path(cl->cache, fid, path, sizeof(path)))
		return -1;
	fd = cache_open_obj(cl->cache, path, O_WRONLY, 0);
	if (fd < 0)
		return -1;
	/*
	 * No data: only holes (its blocks may be an xattr block). Filled in
	 * place, it keeps its inode number (tar, rsync -H and git go by it).
	 * And the object's own inode: the path may be stale (a user of a
	 * presto mount moved the file and made another under its name),
	 * and that other file must not get this one's content and owner.
	 */
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) ||
	    lseek(fd, 0, SEEK_DATA) >= 0 || errno != ENXIO ||
	    cache_fd_is(cl->cache, fd, fid) != 1 ||
	    ftruncate(fd, (off_t)size)) {
		close(fd);
		return -1;
	}
	return fd;
}

static int body_begin(struct job *j, const struct lp_frame *f,
		      const char **why)
{
	struct body_in *b = j->priv;
	struct lp_fetch_reply m;

	if (b->started) {
		*why = "a second FETCH_REPLY";
		return -EBADMSG;
	}
	if (lp_decode_fetch_reply(f, &m, why))
		return -EBADMSG;
	if (!lento_fid_eq(&m.st.fid, &j->fid)) {
		*why = "FETCH_REPLY: the body of another file";
		return -EBADMSG;
	}
	b->started = true;
	b->st = m.st;
	lp_stream_init(&b->stream, 0, m.size, true);
	b->fd = open_placeholder(j->cl, &j->fid, m.size);
	b->in_place = b->fd >= 0;
	if (!b->in_place)
		b->fd = cache_tmpfile(j->cl->cache, b->tmp);
	if (b->fd < 0) {
		b->failed = true;
		b->err = b->fd;
		b->tmp[0] = 0;
	}
	return 0;
}

static int fetch_reply(void *arg, const struct lp_frame *f, int err,
		       const char **why)
{
	struct job *j = arg;
	struct body_in *b = j->priv;

	reply_over(j, f, err);
	if (err)
		return job_end(j, err), 0;
	if (f->type == LP_ERROR)
		return job_error(j, f, "fetching a file", why);
	if (f->type == LP_FETCH_REPLY)
		err = body_begin(j, f, why);
	else if (f->type == LP_DATA)
		err = body_chunk(j, f, why);
	else
		return *why = "a FETCH answered by something else", -EBADMSG;
	if (err)
		return err;
	if (!(f->flags & LP_F_MORE) && !b->complete) {
		*why = "FETCH: the reply ended before the body";
		return -EBADMSG;
	}
	body_maybe_done(j);
	return 0;
}

static int fetch_start(struct job *j)
{
	struct conn *c = j->cl->conn;
	struct lp_fetch m = { .fid = j->fid };
	struct body_in *b = calloc(1, sizeof(*b));

	if (!b)
		return -ENOMEM;
	b->fd = -1;
	j->priv = b;
	j->free_priv = body_free;
	return lp_encode_fetch(conn_buf(c), j->tag, &m) ?:
	       start_request(j, LP_FETCH, fetch_reply);
}

/* ------------------------------------------------------------- permits */

static int permit_reply(void *arg, const struct lp_frame *f, int err,
			const char **why)
{
	struct job *j = arg;
	struct client *cl = j->cl;
	struct vol *v = vol_by_id(cl, j->volume);
	bool acquire = j->kind == J_ACQUIRE;
	struct lp_permit m;

	reply_over(j, f, err);
	if (v && acquire)
		v->acquiring = false;
	if (v && !acquire)
		v->releasing = false;
	if (err)
		return job_end(j, err), 0;
	if (f->type == LP_ERROR) {
		/* The engine's own acquire waits before it asks again. */
		if (v && acquire)
			v->retry_at_ms = lo_now_ms() + REINT_RETRY_MS;
		return job_error(j, f, acquire ? "acquiring the permit" :
				 "releasing the permit", why);
	}
	if (f->type != LP_PERMIT_REPLY || lp_decode_permit_reply(f, &m, why))
		return *why = *why ?: "not a PERMIT_REPLY", -EBADMSG;
	if (!v || m.volume != v->cv.id) {
		*why = "PERMIT_REPLY: not the volume asked";
		return -EBADMSG;
	}
	if (acquire) {
		v->permit = true;
		v->revoked = false;
		v->lease_ms = m.lease_ms;
		/* From when it was asked: a conservative end. */
		v->expires_ms = lease_end(j->sent_ms, m.lease_ms);
		v->renew_at_ms = j->sent_ms + m.lease_ms / 2;
		v->last_change_ms = lo_now_ms();
		log_info("volume %s: permit acquired, lease %" PRIu32 " ms",
			 v->cv.name, m.lease_ms);
	} else {
		log_info("volume %s: permit given back", v->cv.name);
		v->permit = v->revoked = v->renewing = false;
	}
	job_end(j, 0);		/* j goes */
	op_wake_volume(cl, v->cv.id);
	return 0;
}

static int permit_start(struct job *j)
{
	struct vol *v = vol_by_id(j->cl, j->volume);
	struct conn *c = j->cl->conn;
	unsigned int type = j->kind == J_ACQUIRE ? LP_PERMIT_ACQUIRE :
			    LP_PERMIT_RELEASE;
	int err;

	if (!v)
		return -ENOENT;
	err = lp_encode_volume(conn_buf(c), type, j->tag, v->cv.id) ?:
	      start_request(j, type, permit_reply);
	if (!err && j->kind == J_ACQUIRE)
		v->acquiring = true;
	else if (!err)
		v->releasing = true;
	return err;
}

/* ----------------------------------------------------------- job start */

int job_start(struct client *cl, enum job_kind k, uint32_t volume,
	      const struct lento_fid *fid, const char *name, struct job **out)
{
	struct job *j;
	int err;

	if (fid)
		volume = fid->volume;
	j = job_find(cl, k, volume, fid, name);
	if (j)
		goto found;
	if (!connected(cl))
		return -ENOTCONN;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->cl = cl;
	j->id = ++cl->next_job_id;
	j->kind = k;
	j->volume = volume;
	if (fid)
		j->fid = *fid;
	if (name)
		snprintf(j->name, sizeof(j->name), "%s", name);
	j->tag = conn_tag(cl->conn);
	switch (k) {
	case J_LOOKUP:
		err = lookup_start(j);
		break;
	case J_VALIDATE:
		err = validate_start(j);
		break;
	case J_READDIR:
		err = readdir_start(j);
		break;
	case J_FETCH:
		err = fetch_start(j);
		break;
	default:
		err = permit_start(j);
		break;
	}
	if (err) {
		conn_buf(cl->conn)->len = 0;
		if (j->free_priv)
			j->free_priv(j);
		free(j);
		return err;
	}
	j->next = cl->jobs;
	cl->jobs = j;
found:
	if (out)
		*out = j;
	return 0;
}

int op_need(struct op *op, enum job_kind k, uint32_t volume,
	    const struct lento_fid *fid, const char *name)
{
	struct job *j;
	int err = job_start(op->cl, k, volume, fid, name, &j);

	if (err) {
		ctl_error(op->r, "%s", err == -ENOTCONN ?
			  "not in the cache, and the server is not connected" :
			  strerror(-err));
		return err;
	}
	op->wait_job = j->id;
	return OP_WAIT;
}

/* ------------------------------------------------------------ resolving */

bool usable(struct client *cl, const struct cache_obj *o)
{
	struct vol *v;

	if (!o->data)
		return false;
	if (o->dirty)
		return true;
	if (!o->valid)
		return false;
	/* Connected, a volume not yet validated is not trusted. */
	v = vol_by_id(cl, o->fid.volume);
	return !connected(cl) || (v && v->validated);
}

int need_listing(struct op *op, const struct lento_fid *dir)
{
	struct client *cl = op->cl;
	struct cache_obj o;
	int err = cache_obj_get(cl->cache, dir, &o, NULL, 0);

	if (err) {
		ctl_error(op->r, "directory " FIDFMT ": %s", FIDARG(dir),
			  strerror(-err));
		return err;
	}
	if (o.type != LENTO_T_DIR) {
		ctl_error(op->r, "not a directory");
		return -ENOTDIR;
	}
	if (usable(cl, &o) && !listing_applying(cl, dir))
		return 0;
	cl->st.misses++;
	return op_need(op, J_READDIR, 0, dir, NULL);
}

/* The volume of @path (its first component), known and validated. */
static int resolve_volume(struct op *op, const char *name, struct vol **out)
{
	struct client *cl = op->cl;
	struct vol *v = vol_by_name(cl, name);

	if (!cache_volname_ok(name)) {
		ctl_error(op->r, "'%s' is not a volume name", name);
		return -EINVAL;
	}
	if (!v)
		return op_need(op, J_LOOKUP, 0, NULL, name);
	if (v->unknown) {
		ctl_error(op->r, "volume %s: the server has no such volume any "
			  "more", name);
		return -ENOENT;
	}
	if (connected(cl) && !v->validated)
		return op_need(op, J_VALIDATE, v->cv.id, NULL, NULL);
	*out = v;
	return 0;
}

/* The next component of @p into @name; NULL after the last. */
static const char *next_comp(const char *p, char name[LENTO_NAME_MAX + 1],
			     int *err)
{
	size_t len;

	while (*p == '/')
		p++;
	if (!*p)
		return NULL;
	len = strcspn(p, "/");
	if (len > LENTO_NAME_MAX) {
		*err = -ENAMETOOLONG;
		return NULL;
	}
	memcpy(name, p, len);
	name[len] = 0;
	if (!strcmp(name, ".") || !strcmp(name, "..")) {
		*err = -EINVAL;
		return NULL;
	}
	return p + len;
}

static int resolve_walk(struct op *op, struct resolved *res, const char *p)
{
	struct client *cl = op->cl;
	char name[LENTO_NAME_MAX + 1];
	struct lento_fid cur = res->vol->cv.root, found;
	bool any = false;
	int err = 0;

	while ((p = next_comp(p, name, &err))) {
		any = true;
		/* Each directory on the way: its whole listing. */
		err = need_listing(op, &cur);
		if (err)
			return err;
		res->parent = cur;
		snprintf(res->name, sizeof(res->name), "%s", name);
		err = cache_lookup(cl->cache, &cur, name, &found);
		if (err == -ENOENT) {
			memset(&res->fid, 0, sizeof(res->fid));
			/* Only the last component may be missing. */
			while (*p == '/')
				p++;
			if (*p)
				ctl_error(op->r, "%s: no such directory", name);
			return *p ? -ENOENT : 0;
		}
		if (err) {
			ctl_error(op->r, "%s: %s", name, strerror(-err));
			return err;
		}
		res->fid = cur = found;
	}
	if (err) {
		ctl_error(op->r, "bad path component");
		return err;
	}
	/* The root itself: its status comes with its listing. */
	return any ? 0 : need_listing(op, &cur);
}

int resolve(struct op *op, const char *path, bool need_obj,
	    struct resolved *res)
{
	struct client *cl = op->cl;
	char vname[LENTO_VOLNAME_MAX + 2];
	size_t len = strcspn(path, "/");
	int err;

	memset(res, 0, sizeof(*res));
	if (len > LENTO_VOLNAME_MAX || !len) {
		ctl_error(op->r, "%s: paths are VOLUME/path", path);
		return -EINVAL;
	}
	memcpy(vname, path, len);
	vname[len] = 0;
	err = resolve_volume(op, vname, &res->vol);
	if (err)
		return err;
	res->fid = res->vol->cv.root;
	err = resolve_walk(op, res, path + len);
	if (err)
		return err;
	if (lento_fid_is_null(&res->fid)) {
		if (need_obj) {
			ctl_error(op->r, "%s: no such file or directory",
				  path);
			return -ENOENT;
		}
		err = cache_path(cl->cache, &res->parent, res->path,
				 sizeof(res->path));
		if (!err && strlen(res->path) + strlen(res->name) + 2 >
		    sizeof(res->path))
			err = -ENAMETOOLONG;
		if (!err)
			strcat(strcat(res->path, "/"), res->name);
	} else {
		err = cache_obj_get(cl->cache, &res->fid, &res->obj, NULL, 0);
		err = err ?: cache_path(cl->cache, &res->fid, res->path,
					sizeof(res->path));
	}
	if (err)
		ctl_error(op->r, "%s: %s", path, cache_strerror(err));
	return err;
}

/* ------------------------------------------------------- read commands */

static void status_json(struct jw *w, const char *name,
			const struct cache_obj *o)
{
	char vv[160], fid[40];

	lento_vv_format(&o->vv, vv, sizeof(vv));
	jw_obj_begin(w);
	if (name) {
		jw_key(w, "name");
		jw_str(w, name);
	}
	snprintf(fid, sizeof(fid), FIDFMT, FIDARG(&o->fid));
	jw_key(w, "fid");
	jw_str(w, fid);
	jw_key(w, "type");
	jw_uint(w, o->type);
	jw_key(w, "mode");
	jw_uint(w, o->attr.mode);
	jw_key(w, "uid");
	jw_uint(w, o->attr.uid);
	jw_key(w, "gid");
	jw_uint(w, o->attr.gid);
	jw_key(w, "size");
	jw_uint(w, o->attr.size);
	jw_key(w, "nlink");
	jw_uint(w, o->nlink);
	jw_key(w, "mtime_ns");
	jw_int(w, o->attr.mtime_ns);
	jw_key(w, "version");
	jw_str(w, vv);
	jw_key(w, "valid");
	jw_bool(w, o->valid);
	jw_key(w, "cached");
	jw_bool(w, o->data);
	jw_key(w, "dirty");
	jw_bool(w, o->dirty);
	jw_obj_end(w);
}

static const char type_char[] = "?-dlpscb";

static void status_text(struct jw *w, const char *name,
			const struct cache_obj *o)
{
	jw_printf(w, "%c%04o %3" PRIu32 " %5" PRIu32 " %5" PRIu32 " %10"
		  PRIu64 " %c%c%c %s\n",
		  type_char[o->type < 8 ? o->type : 0], o->attr.mode,
		  o->nlink, o->attr.uid, o->attr.gid, o->attr.size,
		  o->valid ? 'v' : '-', o->data ? 'c' : '-',
		  o->dirty ? 'd' : '-', name);
}

struct ls_out {
	struct client *cl;
	struct ctl_req *r;
};

static int ls_entry(void *arg, const char *name, const struct lento_fid *fid)
{
	struct ls_out *lo = arg;
	struct cache_obj o;
	int err = cache_obj_get(lo->cl->cache, fid, &o, NULL, 0);

	if (err)
		return err;
	if (ctl_json(lo->r))
		status_json(ctl_out(lo->r), name, &o);
	else
		status_text(ctl_out(lo->r), name, &o);
	return 0;
}

static int ls_step(struct op *op)
{
	struct client *cl = op->cl;
	struct ls_out lo = { cl, op->r };
	struct resolved res;
	int err = resolve(op, op->argv[0], true, &res);

	if (err)
		return err;
	if (res.obj.type == LENTO_T_DIR) {
		err = need_listing(op, &res.fid);
		if (err)
			return err;
	}
	if (ctl_json(op->r))
		jw_arr_begin(ctl_out(op->r));
	if (res.obj.type == LENTO_T_DIR)
		err = cache_readdir(cl->cache, &res.fid, ls_entry, &lo);
	else
		err = ls_entry(&lo, res.name, &res.fid);
	if (err) {
		ctl_error(op->r, "listing %s: %s", op->argv[0], strerror(-err));
		return err;
	}
	if (ctl_json(op->r)) {
		jw_arr_end(ctl_out(op->r));
		jw_raw(ctl_out(op->r), "\n", 1);
	}
	client_touch(cl, &res.fid);
	return 0;
}

int cmd_ls(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	return op_start(ctx, r, argc, argv, ls_step);
}

/* A cached file's content into the output. */
static int cat_out(struct op *op, const struct resolved *res)
{
	struct jw *w = ctl_out(op->r);
	struct stat sb;
	char *buf = NULL;
	ssize_t n = 0;
	int fd = cache_open_obj(op->cl->cache, res->path, O_RDONLY, 0),
	    err = 0;

	if (fd < 0)
		err = fd;
	else if (fstat(fd, &sb))
		err = -errno;
	if (!err && !(buf = malloc(sb.st_size + 1)))
		err = -ENOMEM;
	/* pread() gives at most about 2 GiB at a time, or less. */
	while (!err && n < sb.st_size) {
		ssize_t k = pread(fd, buf + n, sb.st_size - n, n);

		if (k < 0)
			err = -errno;
		else if (!k)
			break;	/* cut meanwhile: what there is */
		else
			n += k;
	}
	if (fd >= 0)
		close(fd);
	if (err) {
		free(buf);
		ctl_error(op->r, "%s: %s", op->argv[0], cache_strerror(err));
		return err;
	}
	if (ctl_json(op->r)) {
		jw_obj_begin(w);
		jw_key(w, "size");
		jw_uint(w, (uint64_t)n);
		jw_key(w, "data");
		jw_strn(w, buf, (size_t)n);
		jw_obj_end(w);
		jw_raw(w, "\n", 1);
	} else {
		jw_raw(w, buf, (size_t)n);
	}
	free(buf);
	return 0;
}

static int cat_step(struct op *op)
{
	struct client *cl = op->cl;
	struct resolved res;
	int err = resolve(op, op->argv[0], true, &res);

	if (err)
		return err;
	if (res.obj.type != LENTO_T_REG) {
		ctl_error(op->r, "%s: not a regular file", op->argv[0]);
		return res.obj.type == LENTO_T_DIR ? -EISDIR : -EINVAL;
	}
	if (!usable(cl, &res.obj)) {
		cl->st.misses++;
		op->next_arg = 1;	/* it was fetched: not a hit */
		return op_need(op, J_FETCH, 0, &res.fid, NULL);
	}
	if (!op->next_arg)
		cl->st.hits++;
	client_touch(cl, &res.fid);
	return cat_out(op, &res);
}

int cmd_cat(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	return op_start(ctx, r, argc, argv, cat_step);
}

static int stat_step(struct op *op)
{
	struct resolved res;
	int err = resolve(op, op->argv[0], true, &res);
	struct jw *w = ctl_out(op->r);

	if (err)
		return err;
	/*
	 * Changed at the server since (its callback broken): its status
	 * comes again with its directory's listing, as for presto's
	 * FETCH_ATTR; once (a listing of a directory changed here may not
	 * have it). A root's came with its own.
	 */
	if (!res.obj.valid && !res.obj.dirty && res.name[0] &&
	    connected(op->cl) && !op->relisted) {
		op->relisted = true;
		return op_need(op, J_READDIR, 0, &res.parent, NULL);
	}
	if (ctl_json(op->r)) {
		status_json(w, res.name[0] ? res.name : res.vol->cv.name,
			    &res.obj);
		jw_raw(w, "\n", 1);
	} else {
		char vv[160];

		lento_vv_format(&res.obj.vv, vv, sizeof(vv));
		status_text(w, res.path, &res.obj);
		jw_printf(w, "fid " FIDFMT ", version %s\n",
			  FIDARG(&res.fid), vv);
	}
	return 0;
}

int cmd_stat(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	return op_start(ctx, r, argc, argv, stat_step);
}

/* ------------------------------------------------------------ eviction */

struct victims {
	struct client *cl;
	struct cache_obj o[EVICT_BATCH];
	size_t n;
};

static int pick_victim(void *arg, const struct cache_obj *o)
{
	struct victims *vs = arg;

	/* Being fetched: its job will put it back anyway. */
	if (job_find(vs->cl, J_FETCH, o->fid.volume, &o->fid, NULL))
		return 0;
	vs->o[vs->n++] = *o;
	return vs->n == EVICT_BATCH ? 1 : 0;
}

/*
 * presto's flags of an evicted file's old inode (@from), for its
 * placeholder: as they were but DATA, which goes with the content (the
 * attributes stay current, in the same epoch). 1 and @cb to set, or 0:
 * none (not a fileset's, or not yet flagged).
 */
static int evict_flags(int from, uint8_t cb[KCHAN_CB_LEN])
{
	uint8_t b[KCHAN_CB_LEN + 1];
	ssize_t n = cache_fgetxattr(from, PRESTO_CB_XATTR, b, sizeof(b));
	uint32_t flags, nlink;
	uint64_t epoch;

	if (n == -ENODATA || n == -EOPNOTSUPP)
		return 0;
	if (n < 0)
		return (int)n;
	if (kchan_cb_decode(b, (size_t)n, &flags, &nlink, &epoch))
		return 0;	/* not presto's: none, presto asks */
	kchan_cb_encode(cb, flags & ~PRESTO_CB_DATA, nlink, epoch);
	return 1;
}

int evict_obj(struct client *cl, const struct cache_obj *o)
{
	char path[CACHE_PATH_MAX];
	struct cache_obj e = *o;
	struct cache_xattr_copy kept = { 0 };
	uint8_t cb[KCHAN_CB_LEN];
	struct cache_xattr own = { PRESTO_CB_XATTR, strlen(PRESTO_CB_XATTR),
				   cb, KCHAN_CB_LEN };
	uint32_t skipped = 0;
	struct cache_xattrs xa = { .skipped = &skipped };
	int old = -1, fd = -1,
	    err = cache_path(cl->cache, &o->fid, path, sizeof(path));

	e.data = false;
	/*
	 * The file's own inode at its name, or nothing is done there: a
	 * file a user put under the name (having moved this one away) is
	 * theirs, not content to drop.
	 */
	if (!err) {
		old = cache_open_obj(cl->cache, path, O_PATH, 0);
		err = old < 0 ? old :
		      fd_is_file(cl, old, &o->fid) ? 0 : -ESTALE;
	}
	/*
	 * All the file had but its content goes to the placeholder before
	 * it takes the name: its xattrs, and presto's flags less DATA.
	 */
	err = err ?: cache_xattrs_read_fd(old, &kept);
	if (!err) {
		xa.x = kept.x;
		xa.n = kept.n;
		err = evict_flags(old, cb);
		xa.own = err == 1 ? &own : NULL;
		xa.nown = err == 1;
		err = err < 0 ? err : 0;
	}
	/*
	 * ... and it is that inode, checked again as it is replaced,
	 * that the placeholder takes the name of.
	 */
	if (!err)
		err = cache_placeholder_fd(cl->cache, path, &e, NULL, &xa,
					   &(struct cache_at){ &o->fid, false },
					   &fd);
	cache_xattrs_release(&kept);
	if (old >= 0)
		close(old);
	/* ... and it is the new inode that goes on, not one put there since. */
	err = err ?: cache_path_is_fd(cl->cache, path, fd);
	/*
	 * A new inode: a fetch fills it in place if it knows it as @o's.
	 * Its name holds no content from here on, whatever fails after.
	 */
	if (!err) {
		cache_handle_update_fd(cl->cache, &e.fid, fd);
		err = cache_obj_set_state(cl->cache, &o->fid, o->valid, false);
	}
	/* Every name on the new inode, so that the content goes. */
	err = err ?: relink_names(cl, &e.fid, path, fd);
	err = err ?: cache_names_fit_fd(cl->cache, &e.fid, fd, e.nlink);
	if (fd >= 0)
		close(fd);
	if (err == -ENOENT)
		err = 0;	/* no path: just forget the content */
	err = err ?: cache_obj_set_state(cl->cache, &o->fid, o->valid, false);
	if (!err) {
		cl->st.evictions++;
		cl->st.xattrs_skipped += skipped;
	}
	return err;
}

/*
 * Counting the cache's size reads every row of it (14 ms a second for
 * 100,000 objects natively). A cache found within its size is counted
 * again only once its rows changed, so an idle client does not count at
 * all; and a count that took long spaces the next ones out, to stay
 * under 1% of the loop's time. One over its size is counted every time:
 * what could not be evicted (open files) may be evictable now.
 */
#define EVICT_CHECK_MS		1000
#define EVICT_COUNT_SHARE	100	/* the loop's time per count's */

void evict_check(struct client *cl, uint64_t now)
{
	int64_t changes = cache_changes(cl->cache);
	struct victims *vs;
	struct cache_stats cs;
	uint64_t t0, took;
	int err;

	cl->evict_check_ms = now + EVICT_CHECK_MS;
	if (changes == cl->evict_changes)
		return;
	t0 = lo_now_ms();
	err = cache_stats(cl->cache, &cs);
	cl->st.size_counts++;
	took = lo_now_ms() - t0;
	if (took * EVICT_COUNT_SHARE > EVICT_CHECK_MS)
		cl->evict_check_ms = now + took * EVICT_COUNT_SHARE;
	cl->evict_changes = -1;
	if (err || cs.bytes <= cl->cache_size) {
		cl->full_of_dirty = false;
		if (!err)
			cl->evict_changes = changes;
		return;
	}
	if (kclient_purging(cl))
		return;		/* the last round's PURGEs are not answered */
	vs = calloc(1, sizeof(*vs));
	if (!vs)
		return;
	vs->cl = cl;
	err = cache_lru_walk(cl->cache, pick_victim, vs);
	for (size_t i = 0; (err == 0 || err == 1) && i < vs->n &&
	     cs.bytes > cl->cache_size; i++) {
		/* presto first, if it has the file: not while open. */
		int k = kclient_evict(cl, &vs->o[i]), e = 0;

		if (!k && (e = evict_obj(cl, &vs->o[i])))
			log_warn("evicting " FIDFMT ": %s",
				 FIDARG(&vs->o[i].fid), e == -ESTALE ?
				 STALE_SAID : cache_strerror(e));
		if (k < 0 || e)
			continue;
		cs.bytes -= vs->o[i].attr.size;
	}
	free(vs);
	if (cs.bytes > cl->cache_size && cs.dirty_bytes > cl->cache_size / 2) {
		if (!cl->full_of_dirty)
			log_warn("the cache is full of changes not yet "
				 "reintegrated (%" PRIu64 " of %" PRIu64
				 " bytes dirty): nothing can be evicted",
				 cs.dirty_bytes, cl->cache_size);
		cl->full_of_dirty = true;
	} else {
		cl->full_of_dirty = false;
	}
}
