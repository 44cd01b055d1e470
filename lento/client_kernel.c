// SPDX-License-Identifier: MIT
/*
 * The lento client as presto's cache manager (protocol/KERNEL.md): the
 * filesets it serves (--fileset VOLUME: the mount's lower is
 * CACHE/VOLUME), their registration and epochs, upcalls, breaks, purges
 * and access hints.
 *
 * Epochs. Each fileset's volume has an epoch in the cache database
 * (cache_meta "kepoch:VOLUME"): the flags lento writes in the lower
 * inodes' trusted.presto.cb carry it. When the volume is validated with
 * the server the epoch stays, so that a warm cache stays warm across a
 * restart of lento or a remount: if the stamp moved, the objects whose
 * versions changed are broken one by one (their flags cleared in the
 * xattr and in presto) as the validation finds them. A new random epoch
 * -- one SET_EPOCH turns every flag off at once -- is taken when the
 * server breaks the whole volume (lento holds no callback of it any
 * more, so presto must not serve it alone until it is validated again)
 * and for a volume new to the cache. Started without its server, lento
 * confirms the epoch it has, as it serves the rest of the cache
 * disconnected.
 *
 * Upcalls are like ops (client_int.h): a step runs, finds what it lacks,
 * parks on the job that fetches it and runs again when the job ends. A
 * step that has what it needs fills the lower object, writes its flags
 * and answers; every upcall gets exactly one REPLY (or none if presto
 * forgot it: the fileset was unmounted, or the channel went).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "client_int.h"
#include "client_kernel.h"
#include "cml.h"
#include "fault.h"
#include "kchan.h"
#include "log.h"

#define FILEID_INO32_GEN	1	/* ext4's handles (exportfs.h) */
/*
 * A directory listed again (after a volume break, say) has children
 * presto may hold in memory with flags of an old epoch: they are told
 * their new flags (SET_FLAGS) rather than each asking (FETCH_ATTR), up to
 * this many. Larger ones let their children ask.
 */
#define SET_FLAGS_MAX		4096

struct upcall {
	struct upcall *next;
	struct client *cl;
	struct fset *fs;
	uint64_t req;
	uint32_t op;
	struct presto_handle h;
	uint64_t start_ms, progress_ms;
	uint64_t wait_job;
	int steps;
	bool fetched;		/* a job ran for it: not a hit */
	/*
	 * The object asked about, once known: a fetched body replaces the
	 * inode the handle named, so the handle is looked up only once.
	 */
	bool have_fid;
	struct lento_fid fid;
	uint32_t flags;		/* what the answer sets */
	bool wait_kml;		/* for the journal to be consumed */
	bool wait_vol;		/* for the volume's permit to settle */
	bool relisted;		/* FETCH_ATTR: the parent listed again */
};

#define BUSY_MS		10000		/* not asked again for this long */

static const char *const op_names[] = { "?", "FETCH_DIR", "FETCH_FILE",
					"FETCH_ATTR", "PERMIT" };

static struct fset *fset_by_name(struct client *cl, const char *name)
{
	struct fset *fs;

	if (!cl->k)
		return NULL;
	for (fs = cl->k->fsets; fs; fs = fs->next)
		if (!strcmp(fs->name, name))
			return fs;
	return NULL;
}

struct fset *fset_by_volume(struct client *cl, const char *volume)
{
	struct fset *fs;

	if (!cl->k)
		return NULL;
	for (fs = cl->k->fsets; fs; fs = fs->next)
		if (!strcmp(fs->volume, volume))
			return fs;
	return NULL;
}

static struct fset *fset_of_volume(struct client *cl, uint32_t volume)
{
	struct vol *v = vol_by_id(cl, volume);

	return v ? fset_by_volume(cl, v->cv.name) : NULL;
}

/* Presto has the fileset mounted over this cache and listens. */
bool fset_live(const struct fset *fs)
{
	return fs->registered && fs->mounted && fs->root_ok;
}

/* ---------------------------------------------------- handles, flags */

static bool handle_eq(const struct presto_handle *a,
		      const struct presto_handle *b)
{
	return a->ino == b->ino && a->gen == b->gen;
}

/* A handle as presto has it, of the lower object @fd (or at @path). */
static int handle_take(int fd, struct client *cl, const char *path,
		       struct presto_handle *ph)
{
	struct {
		struct file_handle fh;
		unsigned char buf[MAX_HANDLE_SZ];
	} h;
	uint32_t ino, gen;
	int mount_id, err;

	h.fh.handle_bytes = MAX_HANDLE_SZ;
	err = fd >= 0 ? cache_fd_handle(fd, &h.fh, &mount_id) :
	      cache_name_to_handle(cl->cache, path, &h.fh, &mount_id);
	if (err)
		return err;
	if (h.fh.handle_type != FILEID_INO32_GEN || h.fh.handle_bytes != 8)
		return -EOPNOTSUPP;
	memcpy(&ino, h.fh.f_handle, 4);
	memcpy(&gen, h.fh.f_handle + 4, 4);
	ph->ino = ino;
	ph->gen = gen;
	ph->pad = 0;
	return 0;
}

/* The handle of the lower object at @path (relative to the cache). */
static int handle_of(struct client *cl, const char *path,
		     struct presto_handle *ph)
{
	return handle_take(-1, cl, path, ph);
}

static int handle_of_fd(int fd, struct presto_handle *ph)
{
	return handle_take(fd, NULL, NULL, ph);
}

/*
 * The lower object at @path (a path of the rows), opened with @flags, if
 * it is the object with handle @want -- or, given @fid, one of the
 * inodes the cache recorded for @fid (a fetch put a new one in place
 * since presto named the old). The path may be stale: a user of the
 * mount moved the object and put another under its name; lento must not
 * set that other's attributes, flags or size. -ESTALE then.
 */
static int open_expected(struct client *cl, const char *path, int flags,
			 const struct presto_handle *want,
			 const struct lento_fid *fid)
{
	struct presto_handle ph;
	int fd = cache_open_obj(cl->cache, path, flags, 0), err;

	if (fd < 0)
		return fd;
	err = handle_of_fd(fd, &ph);
	if (!err && handle_eq(&ph, want))
		return fd;
	if (!err && fid && cache_fd_is(cl->cache, fd, fid) == 1)
		return fd;
	close(fd);
	if (err)
		return err;
	log_debug("%s is inode %" PRIu64 "/%" PRIu32 ", not the object "
		  "expected there (%" PRIu64 "/%" PRIu32 "): left alone", path,
		  (uint64_t)ph.ino, ph.gen, (uint64_t)want->ino, want->gen);
	return -ESTALE;
}

static int fid_of_handle(struct client *cl, struct fset *fs, struct vol *v,
			 const struct presto_handle *ph, struct lento_fid *fid)
{
	uint32_t blob[2] = { (uint32_t)ph->ino, ph->gen };
	int err;

	if (handle_eq(ph, &fs->root)) {
		*fid = v->cv.root;
		return 0;
	}
	if (ph->ino > UINT32_MAX)
		return -ESTALE;
	err = cache_handle_lookup(cl->cache, FILEID_INO32_GEN, blob,
				  sizeof(blob), fid);
	if (err == -ENOENT || (!err && fid->volume != v->cv.id))
		return -ESTALE;
	return err;
}

/* trusted.presto.cb of the lower object at @path. */
int flags_write_nlink(struct client *cl, const char *path, uint32_t flags,
		      uint32_t nlink, uint64_t epoch)
{
	uint8_t b[KCHAN_CB_LEN];

	kchan_cb_encode(b, flags, nlink, epoch);
	return cache_setxattr(cl->cache, path, PRESTO_CB_XATTR, b, sizeof(b));
}

/* The same on the object open as @fd. */
static int flags_write_fd(int fd, uint32_t flags, uint32_t nlink,
			  uint64_t epoch)
{
	uint8_t b[KCHAN_CB_LEN];

	kchan_cb_encode(b, flags, nlink, epoch);
	return cache_fsetxattr(fd, PRESTO_CB_XATTR, b, sizeof(b));
}

int flags_write(struct client *cl, const char *path, uint32_t flags,
		uint64_t epoch)
{
	return flags_write_nlink(cl, path, flags, 0, epoch);
}

/*
 * The link count presto shows for @o while its listing is not complete
 * here: the server's, for a directory (the lower has only the
 * subdirectories lento materialised); 0 (the lower's) otherwise.
 */
static uint32_t nlink_of(const struct cache_obj *o, uint32_t flags)
{
	return o->type == LENTO_T_DIR && !(flags & PRESTO_CB_DATA) ?
	       o->nlink : 0;
}

static int flags_read_fd(int fd, uint32_t *flags, uint64_t *epoch)
{
	uint8_t b[KCHAN_CB_LEN + 1];
	ssize_t n = cache_fgetxattr(fd, PRESTO_CB_XATTR, b, sizeof(b));

	if (n < 0)
		return (int)n;
	return kchan_cb_decode(b, (size_t)n, flags, NULL, epoch);
}

/* No trusted.presto.cb at all on the lower object at @path. */
static int flags_remove(struct client *cl, const char *path)
{
	return cache_removexattr(cl->cache, path, PRESTO_CB_XATTR);
}

/* What the kernel may do alone with @o, by lento's database. */
static uint32_t flags_of(struct client *cl, const struct cache_obj *o)
{
	uint32_t f = 0;

	if (!o->valid && !o->dirty)
		return 0;
	f |= PRESTO_CB_ATTR;
	if (o->type == LENTO_T_SYMLINK || usable(cl, o))
		f |= PRESTO_CB_DATA;
	return f;
}

/* ------------------------------------------------------------ epochs */

static void meta_key(char *buf, size_t size, const char *volume)
{
	snprintf(buf, size, "kepoch:%s", volume);
}

static int epoch_load(struct client *cl, const char *volume, uint64_t *e)
{
	char key[LENTO_VOLNAME_MAX + 16];
	int64_t v = 0;
	int err;

	meta_key(key, sizeof(key), volume);
	err = cache_meta_get(cl->cache, key, &v);
	if (!err && !v)
		err = -ENOENT;
	*e = (uint64_t)v;
	return err;
}

static int epoch_new(struct client *cl, struct fset *fs)
{
	char key[LENTO_VOLNAME_MAX + 16];
	uint64_t e = 0;
	int err;

	while (!e || e == fs->epoch)
		if (getrandom(&e, sizeof(e), 0) != sizeof(e))
			return -errno;
	meta_key(key, sizeof(key), fs->volume);
	err = cache_meta_set(cl->cache, key, (int64_t)e);
	if (err)
		return err;
	fs->epoch = e;
	fs->epoch_sent = false;
	return 0;
}

static void epoch_ack(void *arg, int err, const struct kmsg *reply)
{
	struct fset *fs = arg;

	(void)reply;
	if (!err)
		return;
	log_warn("fileset %s: SET_EPOCH: %s; sent again at the next upcall "
		 "or validation", fs->name, strerror(-err));
	/*
	 * presto does not have the epoch: a later epoch_push() must not
	 * take it for sent, or the fileset serves nothing from the cache
	 * until it is remounted.
	 */
	fs->epoch_sent = false;
}

/* SET_EPOCH, once per mount and epoch. */
static void epoch_push(struct client *cl, struct fset *fs)
{
	struct kcmd c = { .cmd = PRESTO_CMD_SET_EPOCH, .fileset = fs->name,
			  .have = KA(EPOCH), .epoch = fs->epoch };
	int err;

	if (!fset_live(fs) || !fs->epoch || fs->epoch_sent)
		return;
	err = kchan_send(cl->k->kc, &c, epoch_ack, fs);
	if (err) {
		log_warn("fileset %s: SET_EPOCH: %s", fs->name, strerror(-err));
		return;
	}
	fs->epoch_sent = true;
	log_info("fileset %s: epoch %016" PRIx64, fs->name, fs->epoch);
}

void kclient_validated(struct client *cl, struct vol *v, bool fresh)
{
	struct fset *fs = fset_by_volume(cl, v->cv.name);
	uint64_t e;
	int err;

	if (!fs)
		return;
	if (!fresh && !fs->epoch && !epoch_load(cl, fs->volume, &e))
		fs->epoch = e;
	if (fresh || !fs->epoch) {
		err = epoch_new(cl, fs);
		if (err) {
			log_err("fileset %s: cannot record a new epoch: %s",
				fs->name, strerror(-err));
			return;
		}
		log_info("fileset %s: a new epoch (%s)", fs->name, fresh ?
			 "the volume is new here" : "none was recorded");
	}
	epoch_push(cl, fs);
}

/* Mounted: which epoch counts now? */
static void epoch_at_mount(struct client *cl, struct fset *fs)
{
	struct vol *v = vol_by_name(cl, fs->volume);
	uint64_t e;

	if (fs->epoch) {
		epoch_push(cl, fs);
		return;
	}
	if (!connected(cl)) {
		/* Disconnected: the cache is served as it is. */
		if (!epoch_load(cl, fs->volume, &e)) {
			fs->epoch = e;
			log_info("fileset %s: the server is not connected: "
				 "serving the cache as it was", fs->name);
			epoch_push(cl, fs);
		}
		return;
	}
	if (!v)
		job_start(cl, J_LOOKUP, 0, NULL, fs->volume, NULL);
	else if (!v->validated)
		job_start(cl, J_VALIDATE, v->cv.id, NULL, NULL, NULL);
	else
		kclient_validated(cl, v, false);
}

/* ----------------------------------------------------------- upcalls */

static void uc_unlink(struct client *cl, struct upcall *uc)
{
	struct upcall **pp;

	for (pp = &cl->k->upcalls; *pp; pp = &(*pp)->next)
		if (*pp == uc) {
			*pp = uc->next;
			return;
		}
}

static void reply_ack(void *arg, int err, const struct kmsg *reply)
{
	struct fset *fs = arg;

	(void)reply;
	if (err == -ESRCH) {
		log_debug("a REPLY presto no longer waited for");
	} else if (err == -ETIMEDOUT || err == -ENOMEM || err == -ENOBUFS ||
		   err == -EAGAIN) {
		/*
		 * Its ack lost, or presto could not take it: the upcall may
		 * still wait. Registering again has presto send it again.
		 */
		log_warn("fileset %s: REPLY: %s: asking presto for its pending "
			 "upcalls again", fs->name, strerror(-err));
		fs->resync = true;
	} else if (err && err != -ECANCELED) {
		log_warn("fileset %s: REPLY: %s", fs->name, strerror(-err));
	}
}

/*
 * Send a REPLY: with an ack if there is memory for the wait, else
 * without (less memory). 0 or -errno: the caller owes it then.
 */
static int reply_send(struct client *cl, struct fset *fs, const struct kcmd *c)
{
	int err = fault_at("upcall-reply") ? -ENOBUFS :
		  kchan_send(cl->k->kc, c, reply_ack, fs);

	if (err == -ENOMEM)
		err = kchan_send(cl->k->kc, c, NULL, NULL);
	return err;
}

/*
 * @c could not be sent: owed, sent again from the tick. No slot free:
 * the fileset registers again, and presto sends the upcall again.
 */
static void reply_owe(struct client *cl, struct fset *fs, uint32_t op,
		      const struct kcmd *c, int err)
{
	struct kclient *k = cl->k;
	uint64_t now = lo_now_ms();

	fs->replies_owed++;
	for (unsigned int i = 0; i < OWED_MAX; i++) {
		struct owed *o = &k->owed[i];

		if (o->fs)
			continue;
		*o = (struct owed){ .fs = fs, .req = c->req, .op = op,
				    .errno_ = c->errno_, .flags = c->flags,
				    .epoch = c->epoch, .first_ms = now,
				    .next_ms = now + OWED_RETRY_MS, .tries = 1 };
		k->nowed++;
		log_warn("fileset %s: the answer to upcall %" PRIu64 " could "
			 "not be sent (%s): sending it again", fs->name,
			 c->req, strerror(-err));
		return;
	}
	log_err("fileset %s: the answer to upcall %" PRIu64 " could not be "
		"sent (%s), and %d others wait: asking presto for its pending "
		"upcalls again", fs->name, c->req, strerror(-err), OWED_MAX);
	fs->resync = true;
}

static void owed_cmd(const struct owed *o, struct kcmd *c)
{
	*c = (struct kcmd){ .cmd = PRESTO_CMD_REPLY, .fileset = o->fs->name,
			    .have = KA(REQ) | KA(ERRNO), .req = o->req,
			    .errno_ = o->errno_ };
	if (!o->errno_ && o->op != PRESTO_OP_PERMIT) {
		c->have |= KA(FLAGS) | KA(EPOCH);
		c->flags = o->flags;
		c->epoch = o->epoch;
	}
}

/* Owed answers sent again; bounded, then presto is asked again. */
static void owed_tick(struct client *cl, uint64_t now)
{
	struct kclient *k = cl->k;

	for (unsigned int i = 0; k->nowed && i < OWED_MAX; i++) {
		struct owed *o = &k->owed[i];
		struct kcmd c;
		int err;

		if (!o->fs || now < o->next_ms)
			continue;
		owed_cmd(o, &c);
		err = reply_send(cl, o->fs, &c);
		if (!err) {
			log_info("fileset %s: upcall %" PRIu64 " answered "
				 "after %u tries", o->fs->name, o->req,
				 o->tries + 1);
		} else if (now - o->first_ms < OWED_MS) {
			o->tries++;
			o->next_ms = now + OWED_RETRY_MS;
			continue;
		} else {
			log_err("fileset %s: the answer to upcall %" PRIu64
				" could not be sent in %d s (%s): asking presto "
				"for its pending upcalls again", o->fs->name,
				o->req, OWED_MS / 1000, strerror(-err));
			o->fs->resync = true;
		}
		o->fs = NULL;
		k->nowed--;
	}
}

static uint64_t owed_due_ms(struct client *cl)
{
	uint64_t due = UINT64_MAX;

	for (unsigned int i = 0; cl->k->nowed && i < OWED_MAX; i++)
		if (cl->k->owed[i].fs)
			due = earlier_ms(due, cl->k->owed[i].next_ms);
	return due;
}

/* presto forgot @fs's upcalls (or every fileset's, @fs NULL). */
static void owed_drop(struct client *cl, struct fset *fs)
{
	for (unsigned int i = 0; i < OWED_MAX; i++) {
		struct owed *o = &cl->k->owed[i];

		if (o->fs && (!fs || o->fs == fs)) {
			o->fs = NULL;
			cl->k->nowed--;
		}
	}
}

/* The one answer of @uc: @err 0 (uc->flags set) or -errno. */
static void uc_answer(struct upcall *uc, int err)
{
	struct client *cl = uc->cl;
	struct fset *fs = uc->fs;
	struct kcmd c = { .cmd = PRESTO_CMD_REPLY, .fileset = fs->name,
			  .have = KA(REQ) | KA(ERRNO), .req = uc->req };
	int e;

	if (err) {
		/* Only the errnos KERNEL.md names. */
		if (uc->op == PRESTO_OP_PERMIT ?
		    err != -EROFS && err != -EDQUOT && err != -ENOTCONN &&
		    err != -EACCES && err != -ENOMEM && err != -EIO :
		    err != -ENOENT && err != -ENOTCONN && err != -ESTALE &&
		    err != -ENOSPC && err != -EACCES && err != -ENOMEM)
			err = -EIO;
		c.errno_ = (uint32_t)-err;
		fs->failed++;
	} else if (uc->op == PRESTO_OP_PERMIT) {
		kml_permit_granted(cl, fs);
	} else {
		c.have |= KA(FLAGS) | KA(EPOCH);
		c.flags = uc->flags;
		c.epoch = fs->epoch;
		if (uc->fetched)
			fs->fetched++;
		else
			fs->hits++;
	}
	e = reply_send(cl, fs, &c);
	if (e)
		reply_owe(cl, fs, uc->op, &c, e);
	log_debug("fileset %s: %s of %" PRIu64 "/%" PRIu32 " (req %" PRIu64
		  "): %s in %" PRIu64 " ms%s", fs->name,
		  op_names[uc->op <= PRESTO_OP_PERMIT ? uc->op : 0],
		  (uint64_t)uc->h.ino,
		  uc->h.gen, uc->req, err ? strerror(-err) : "done",
		  lo_now_ms() - uc->start_ms, e ? " (the REPLY is owed)" : "");
}

static int uc_need(struct upcall *uc, enum job_kind k, uint32_t volume,
		   const struct lento_fid *fid, const char *name)
{
	struct job *j;
	int err = job_start(uc->cl, k, volume, fid, name, &j);

	if (err)
		return err;
	uc->wait_job = j->id;
	uc->fetched = true;
	return OP_WAIT;
}

struct child_flags {
	struct client *cl;
	struct fset *fs;
	const char *dirpath;
	int err;
	unsigned int n;
	bool tell;		/* SET_FLAGS too */
};

/* A child of a listing just made complete: its flags. */
static int child_flags(void *arg, const char *name,
		       const struct lento_fid *fid)
{
	struct child_flags *cf = arg;
	char path[CACHE_PATH_MAX];
	struct cache_obj o;
	uint32_t flags;
	int fd, err;

	/* A directory of 100,000: presto hears from us meanwhile. */
	if (!(++cf->n % 16))
		kclient_progress(cf->cl);
	if (snprintf(path, sizeof(path), "%s/%s", cf->dirpath, name) >=
	    (int)sizeof(path) || cache_obj_get(cf->cl->cache, fid, &o, NULL, 0))
		return 0;
	flags = flags_of(cf->cl, &o);
	/* One inode for the flags and the handle told. */
	fd = cache_open_obj(cf->cl->cache, path, O_PATH, 0);
	/*
	 * The child's own, not another object a user put under its name
	 * (having moved this one away) before lento consumed the journal
	 * that says so: that one's flags are not this one's, nor is its
	 * handle. Every child of the rows had its handle recorded as it
	 * was made (a listing, a command, the journal), so one without
	 * (-ENOENT) is not it either; left, presto asks for it.
	 */
	if (fd >= 0) {
		int is = cache_fd_is(cf->cl->cache, fd, fid);

		if (is != 1 && is != -EOPNOTSUPP) {
			log_debug("%s: not known as the object listed there "
				  "any more: its flags left alone", path);
			close(fd);
			return 0;
		}
	}
	err = fd < 0 ? fd : flags_write_fd(fd, flags, nlink_of(&o, flags),
					   cf->fs->epoch);
	/* Not materialised (a device): presto does not meet it either. */
	if (err && err != -ENOENT && !cf->err)
		cf->err = err;
	if (!err && flags && cf->tell) {
		struct kcmd c = { .cmd = PRESTO_CMD_SET_FLAGS,
				  .fileset = cf->fs->name,
				  .have = KA(HANDLE) | KA(FLAGS) | KA(EPOCH),
				  .flags = flags, .epoch = cf->fs->epoch };

		if (!handle_of_fd(fd, &c.handle))
			kchan_send(cf->cl->k->kc, &c, NULL, NULL);
	}
	if (fd >= 0)
		close(fd);
	return 0;
}

static int fill_dir(struct upcall *uc, const struct cache_obj *o,
		    const char *path)
{
	struct client *cl = uc->cl;
	struct child_flags cf = { .cl = cl, .fs = uc->fs, .dirpath = path };
	int fd, err, n;

	if (o->type != LENTO_T_DIR)
		return -EIO;
	/* Joined even disconnected: the listing goes on without the server. */
	if (listing_applying(cl, &o->fid))
		return uc_need(uc, J_READDIR, 0, &o->fid, NULL);
	if (!usable(cl, o)) {
		if (!connected(cl))
			return -ENOTCONN;
		cl->st.misses++;
		return uc_need(uc, J_READDIR, 0, &o->fid, NULL);
	}
	/* Not another directory moved under its name. */
	fd = open_expected(cl, path, O_PATH, &uc->h, &o->fid);
	if (fd < 0)
		return fd;
	n = cache_dir_count(cl->cache, &o->fid);
	cf.tell = n >= 0 && n <= SET_FLAGS_MAX;
	err = cache_readdir(cl->cache, &o->fid, child_flags, &cf);
	err = err ?: cf.err;
	err = err ?: flags_write_fd(fd, PRESTO_CB_ALL, 0, uc->fs->epoch);
	close(fd);
	uc->flags = PRESTO_CB_ALL;
	return err;
}

static int fill_file(struct upcall *uc, const struct cache_obj *o,
		     const char *path)
{
	struct client *cl = uc->cl;
	int fd, err;

	if (o->type == LENTO_T_DIR)
		return -EIO;
	if (o->type == LENTO_T_REG && !usable(cl, o)) {
		if (!connected(cl))
			return -ENOTCONN;
		cl->st.misses++;
		return uc_need(uc, J_FETCH, 0, &o->fid, NULL);
	}
	fd = open_expected(cl, path, O_PATH, &uc->h, &o->fid);
	if (fd < 0)
		return fd;
	if (!uc->fetched)
		cl->st.hits++;
	client_touch(cl, &o->fid);
	uc->flags = PRESTO_CB_ALL;
	err = flags_write_fd(fd, PRESTO_CB_ALL, 0, uc->fs->epoch);
	close(fd);
	return err;
}

static int fill_attr(struct upcall *uc, const struct cache_obj *o,
		     const char *path)
{
	struct client *cl = uc->cl;
	struct lento_fid dir;
	char name[LENTO_NAME_MAX + 1];
	uint32_t flags = 0;
	uint64_t epoch = 0;
	int fd, err;

	if (!o->valid && !o->dirty && !uc->relisted) {
		if (!connected(cl))
			return -ENOTCONN;
		/*
		 * Its status comes with its directory's listing; once (the
		 * listing of a directory changed here may not have it).
		 */
		err = cache_name_of(cl->cache, &o->fid, &dir, name);
		if (err == -ENOENT)
			dir = o->fid;	/* a root */
		else if (err)
			return err;
		uc->relisted = true;
		return uc_need(uc, J_READDIR, 0, &dir, NULL);
	}
	/* The object presto asked about, not another under its name. */
	fd = open_expected(cl, path, O_PATH, &uc->h, &o->fid);
	if (fd < 0)
		return fd;
	err = cache_set_attrs_fd(fd, o);
	if (err)
		goto out;
	/* DATA stays as it was (for this epoch). */
	if (!flags_read_fd(fd, &flags, &epoch) && epoch == uc->fs->epoch)
		flags &= PRESTO_CB_DATA;
	else
		flags = 0;
	/* Not current (yet): presto asks again next time. */
	uc->flags = o->valid || o->dirty ? PRESTO_CB_ATTR : 0;
	flags |= uc->flags;
	err = flags_write_fd(fd, flags, nlink_of(o, flags), uc->fs->epoch);
out:
	close(fd);
	return err;
}

/*
 * The write-back permit for presto: held from the server, or a local one
 * while disconnected. A permit being given back is asked for again once
 * it went (no starving the server's other clients).
 */
static int fill_permit(struct upcall *uc)
{
	struct client *cl = uc->cl;
	struct fset *fs = uc->fs;
	struct vol *v = vol_by_name(cl, fs->volume);

	if (!cl->id_assigned)
		return -ENOTCONN;	/* never met its server: no fids */
	if (!v)
		return connected(cl) ? uc_need(uc, J_LOOKUP, 0, NULL,
					       fs->volume) : -ENOTCONN;
	if (v->unknown)
		return -EROFS;
	if (!connected(cl))
		return 0;
	if (v->revoked || v->releasing || fs->j.revoke_req) {
		uc->wait_vol = true;
		return OP_WAIT;
	}
	if (v->permit && lo_now_ms() < v->expires_ms)
		return 0;
	return uc_need(uc, J_ACQUIRE, v->cv.id, NULL, NULL);
}

/*
 * The object of a handle lento does not know may be one made through the
 * mount whose record is not consumed yet: consume, then look again.
 */
static int fid_after_journal(struct upcall *uc, struct vol *v)
{
	struct client *cl = uc->cl;
	struct fset *fs = uc->fs;
	int err = fid_of_handle(cl, fs, v, &uc->h, &uc->fid);

	if (err != -ESTALE || kml_caught_up(fs) || fs->j.err[0])
		return err;
	kml_consume(cl, fs);
	if (!kml_caught_up(fs) && !fs->j.err[0]) {
		uc->wait_kml = true;
		return OP_WAIT;
	}
	return fid_of_handle(cl, fs, v, &uc->h, &uc->fid);
}

/* 0 (answered with uc->flags), OP_WAIT, or -errno to answer. */
static int uc_step(struct upcall *uc)
{
	struct client *cl = uc->cl;
	struct fset *fs = uc->fs;
	struct vol *v = vol_by_name(cl, fs->volume);
	char path[CACHE_PATH_MAX];
	struct lento_fid fid;
	struct cache_obj o;
	int err;

	if (!fs->root_ok)
		return -EIO;
	if (uc->op == PRESTO_OP_PERMIT)
		return fill_permit(uc);
	if (!v)
		return connected(cl) ? uc_need(uc, J_LOOKUP, 0, NULL, fs->volume)
				     : -ENOTCONN;
	if (v->unknown)
		return -ENOENT;
	if (connected(cl) && !v->validated)
		return uc_need(uc, J_VALIDATE, v->cv.id, NULL, NULL);
	if (!fs->epoch)
		kclient_validated(cl, v, false);
	if (!fs->epoch)
		return -EIO;
	epoch_push(cl, fs);
	if (!uc->have_fid) {
		err = fid_after_journal(uc, v);
		if (err)
			return err;
		uc->have_fid = true;
	}
	fid = uc->fid;
	err = cache_obj_get(cl->cache, &fid, &o, NULL, 0);
	err = err ?: cache_path(cl->cache, &fid, path, sizeof(path));
	if (err)
		return err == -ENOENT ? -ESTALE : err;
	switch (uc->op) {
	case PRESTO_OP_FETCH_DIR:
		return fill_dir(uc, &o, path);
	case PRESTO_OP_FETCH_FILE:
		return fill_file(uc, &o, path);
	default:
		return fill_attr(uc, &o, path);
	}
}

/* Run @uc's step once more: answered, it goes. */
static void uc_run(struct upcall *uc)
{
	struct client *cl = uc->cl;
	int rc;

	uc->wait_job = 0;
	uc->wait_kml = uc->wait_vol = false;
	rc = ++uc->steps > OP_STEPS_MAX ? -EIO : uc_step(uc);
	if (rc == OP_WAIT)
		return;
	uc_answer(uc, rc);
	uc_unlink(cl, uc);
	free(uc);
}

typedef bool uc_match_fn(const struct upcall *uc, const void *key);

/*
 * Take the upcalls @match picks off the list, to run them: a run may park
 * one again, which puts it back.
 */
static struct upcall *uc_take(struct client *cl, uc_match_fn *match,
			      const void *key)
{
	struct upcall *list = NULL, *uc, **pp;

	for (pp = &cl->k->upcalls; (uc = *pp);) {
		if (!match(uc, key)) {
			pp = &uc->next;
			continue;
		}
		*pp = uc->next;
		uc->next = list;
		list = uc;
	}
	return list;
}

/* Upcalls that @match picks run again (they may park again). */
static void uc_rerun(struct client *cl, uc_match_fn *match, const void *key)
{
	struct upcall *list = uc_take(cl, match, key), *uc;

	while ((uc = list)) {
		list = uc->next;
		uc->next = cl->k->upcalls;
		cl->k->upcalls = uc;
		uc_run(uc);
	}
}

static bool match_kml(const struct upcall *uc, const void *key)
{
	return uc->wait_kml && uc->fs == key;
}

static bool match_vol(const struct upcall *uc, const void *key)
{
	return uc->wait_vol && !strcmp(uc->fs->volume, key);
}

void kclient_fset_woken(struct client *cl, struct fset *fs)
{
	if (cl->k)
		uc_rerun(cl, match_vol, fs->volume);
}

void kclient_journal_moved(struct client *cl, struct fset *fs)
{
	struct vol *v = vol_by_name(cl, fs->volume);

	if (v)
		listings_journal_moved(cl, v);
	if (cl->k)
		uc_rerun(cl, match_kml, fs);
}

void kclient_volume_woken(struct client *cl, uint32_t volume)
{
	struct vol *v = vol_by_id(cl, volume);

	if (cl->k && v)
		uc_rerun(cl, match_vol, v->cv.name);
}

struct kchan *kclient_chan(struct client *cl)
{
	return cl->k ? cl->k->kc : NULL;
}

static bool match_job(const struct upcall *uc, const void *key)
{
	return uc->wait_job == *(const uint64_t *)key;
}

void kclient_job_ended(struct client *cl, struct job *j)
{
	struct upcall *list, *uc;

	if (!cl->k)
		return;
	if (j->kind == J_ACQUIRE && j->err)
		kclient_acquire_failed(cl, j->volume, j->err);
	list = uc_take(cl, match_job, &j->id);
	while ((uc = list)) {
		list = uc->next;
		uc->next = cl->k->upcalls;
		cl->k->upcalls = uc;
		/* A lost connection: the step finds that out itself. */
		if (j->err && j->err != -ENOTCONN) {
			log_debug("fileset %s: %s", uc->fs->name, j->msg);
			uc_answer(uc, j->err);	/* EIO but the few named */
			uc_unlink(cl, uc);
			free(uc);
			continue;
		}
		uc_run(uc);
	}
}

static void on_upcall(struct client *cl, struct fset *fs, const struct kmsg *m)
{
	struct upcall *uc;

	for (uc = cl->k->upcalls; uc; uc = uc->next)
		if (uc->fs == fs && uc->req == m->req)
			return;	/* sent again: it is being answered */
	uc = fault_at("upcall-alloc") ? NULL : calloc(1, sizeof(*uc));
	if (!uc) {
		/* Answered at once: presto's caller fails now, not later. */
		struct kcmd c = { .cmd = PRESTO_CMD_REPLY, .fileset = fs->name,
				  .have = KA(REQ) | KA(ERRNO), .req = m->req,
				  .errno_ = ENOMEM };
		int err = reply_send(cl, fs, &c);

		fs->upcalls++;
		fs->failed++;
		log_err("fileset %s: out of memory for upcall %" PRIu64
			": answered ENOMEM", fs->name, m->req);
		if (err)
			reply_owe(cl, fs, m->op, &c, err);
		return;
	}
	uc->cl = cl;
	uc->fs = fs;
	uc->req = m->req;
	uc->op = m->op;
	uc->h = m->handle;
	uc->start_ms = uc->progress_ms = lo_now_ms();
	uc->next = cl->k->upcalls;
	cl->k->upcalls = uc;
	fs->upcalls++;
	uc_run(uc);
}

/* Upcalls presto forgot (unmounted, the channel went). */
static void upcalls_drop(struct client *cl, struct fset *fs)
{
	struct upcall **pp, *uc;

	owed_drop(cl, fs);
	for (pp = &cl->k->upcalls; (uc = *pp);) {
		if (fs && uc->fs != fs) {
			pp = &uc->next;
			continue;
		}
		*pp = uc->next;
		free(uc);
	}
}

/* ------------------------------------------------------------ breaks */

static void break_ack(void *arg, int err, const struct kmsg *reply)
{
	struct fset *fs = arg;

	(void)reply;
	if (err)
		log_warn("fileset %s: BREAK: %s", fs->name, strerror(-err));
}

/* @path's flags cleared, in its xattr and then in presto. */
static void break_path(struct client *cl, struct fset *fs, const char *path,
		       bool root)
{
	struct kcmd c = { .cmd = PRESTO_CMD_BREAK, .fileset = fs->name,
			  .have = KA(HANDLE) | KA(FLAGS),
			  .flags = PRESTO_CB_ALL };
	int err = flags_write(cl, path, 0, fs->epoch);

	if (err == -ENOENT)
		return;		/* not materialised: nothing to break */
	if (err && err != -EOPNOTSUPP) {
		log_warn("fileset %s: clearing the flags of %s: %s", fs->name,
			 path, cache_strerror(err));
		err = flags_remove(cl, path);
	}
	/*
	 * The xattr still claims what the BREAK takes away: presto would
	 * read the flags again from it the next time it meets the inode.
	 * A new epoch turns every flag of the fileset off at once, this
	 * one's too.
	 */
	if (err && err != -ENOENT && err != -ENODATA && err != -EOPNOTSUPP) {
		log_warn("fileset %s: removing the flags of %s: %s: a new "
			 "epoch instead", fs->name, path, cache_strerror(err));
		err = epoch_new(cl, fs);
		if (!err) {
			epoch_push(cl, fs);	/* every flag off: no BREAK */
			return;
		}
		/* presto's flags off at least, until it reads the xattr. */
		log_err("fileset %s: cannot record a new epoch: %s", fs->name,
			strerror(-err));
	}
	if (!fset_live(fs))
		return;
	if (root)
		c.handle = fs->root;
	else if (handle_of(cl, path, &c.handle))
		return;
	fs->breaks++;
	err = kchan_send(cl->k->kc, &c, break_ack, fs);
	if (err)
		log_warn("fileset %s: BREAK: %s", fs->name, strerror(-err));
}

void kclient_break_fid(struct client *cl, const struct lento_fid *fid)
{
	struct fset *fs = fset_of_volume(cl, fid->volume);
	struct vol *v = vol_by_id(cl, fid->volume);
	char path[CACHE_PATH_MAX];

	if (!fs || !fs->epoch ||
	    cache_path(cl->cache, fid, path, sizeof(path)))
		return;
	cl->k->broken[cl->k->broken_next].fid = *fid;
	cl->k->broken[cl->k->broken_next].when_ms = lo_now_ms();
	cl->k->broken_next = (cl->k->broken_next + 1) % BROKEN_KEEP;
	break_path(cl, fs, path, v && lento_fid_eq(fid, &v->cv.root));
}

/*
 * presto says a directory lento broke has watchers of its names: list it
 * now rather than at its next use, so that they hear of the names the
 * server changed (listing_apply NOTIFYs them).
 */
static void on_watched(struct client *cl, struct fset *fs,
		       const struct kmsg *m)
{
	struct vol *v = vol_by_name(cl, fs->volume);
	struct lento_fid fid;
	int err;

	if (!v || !fs->root_ok || !connected(cl) ||
	    fid_of_handle(cl, fs, v, &m->handle, &fid))
		return;
	err = job_start(cl, J_READDIR, 0, &fid, NULL, NULL);
	if (err)
		log_warn("fileset %s: listing a watched directory again: %s",
			 fs->name, strerror(-err));
	else
		fs->watched++;
}

void kclient_notify(struct client *cl, const struct lento_fid *dir,
		    const struct name_event *ev, size_t n)
{
	struct fset *fs = fset_of_volume(cl, dir->volume);
	struct vol *v = vol_by_id(cl, dir->volume);
	struct kcmd c = { .cmd = PRESTO_CMD_NOTIFY,
			  .have = KA(HANDLE) | KA(NAME) | KA(EVENT) };
	char path[CACHE_PATH_MAX];
	int err = 0;

	if (!n || !fs || !v || !fset_live(fs))
		return;
	c.fileset = fs->name;
	if (lento_fid_eq(dir, &v->cv.root))
		c.handle = fs->root;
	else if (cache_path(cl->cache, dir, path, sizeof(path)) ||
		 handle_of(cl, path, &c.handle))
		return;
	/* No ack: what presto makes of a name is the watchers' business. */
	for (size_t i = 0; !err && i < n; i++) {
		c.name = ev[i].name;
		c.event = ev[i].event;
		err = kchan_send(cl->k->kc, &c, NULL, NULL);
	}
	if (err)
		log_warn("fileset %s: NOTIFY: %s", fs->name, strerror(-err));
	else
		fs->notified += n;
}

/*
 * After the server broke the whole volume nothing is revalidated until
 * the fileset's next use, which a process that only watches it never
 * makes. So lento asks presto whether anything in it is watched and, if
 * so, revalidates the volume after --watch-ms: what changed is broken
 * object by object, and the watchers hear of it. The delay bounds how
 * often watchers here take the permit back from a client writing there.
 */
static void watch_answer(void *arg, int err, const struct kmsg *reply)
{
	struct fset *fs = arg;

	if (err || !reply || !(reply->stat_have & (1u << PRESTO_S_WATCHED)) ||
	    !reply->stat[PRESTO_S_WATCHED])
		return;
	if (!fs->watched_at_ms)
		fs->watched_at_ms = lo_now_ms();
}

static void watch_ask(struct client *cl, struct fset *fs)
{
	struct kcmd c = { .cmd = PRESTO_CMD_STATS, .fileset = fs->name };

	if (!cl->watch_ms || !fset_live(fs))
		return;
	if (kchan_send(cl->k->kc, &c, watch_answer, fs))
		log_warn("fileset %s: cannot ask presto about watchers",
			 fs->name);
}

static void watch_tick(struct client *cl, struct fset *fs, uint64_t now)
{
	struct vol *v;

	if (!fs->watched_at_ms || now < fs->watched_at_ms + cl->watch_ms)
		return;
	fs->watched_at_ms = 0;
	v = vol_by_name(cl, fs->volume);
	if (!v || v->validated || !connected(cl) || !fset_live(fs))
		return;
	log_info("fileset %s: watched: revalidating volume %s", fs->name,
		 v->cv.name);
	job_start(cl, J_VALIDATE, v->cv.id, NULL, NULL, NULL);
}

void kclient_break_volume(struct client *cl, struct vol *v)
{
	struct fset *fs = fset_by_volume(cl, v->cv.name);
	int err;

	if (!fs || !fs->epoch)
		return;
	err = epoch_new(cl, fs);
	if (err) {
		log_err("fileset %s: cannot record a new epoch: %s", fs->name,
			strerror(-err));
		return;
	}
	log_info("fileset %s: the server broke the whole volume: a new "
		 "epoch", fs->name);
	epoch_push(cl, fs);
	watch_ask(cl, fs);
}

void kclient_clear_flags(struct client *cl, uint32_t volume, const char *path)
{
	struct fset *fs = fset_of_volume(cl, volume);

	if (fs && fs->epoch)
		break_path(cl, fs, path, false);
}

int kclient_flags_new(struct client *cl, const struct lento_fid *fid, int fd)
{
	struct fset *fs = fset_of_volume(cl, fid->volume);

	if (!fs || !fs->epoch)
		return 0;
	return flags_write_fd(fd, PRESTO_CB_ALL, 0, fs->epoch);
}

bool kclient_skip_name(struct client *cl, const struct lento_fid *dir,
		       const char *name)
{
	struct vol *v;
	struct fset *fs;

	if (strcmp(name, ".presto"))
		return false;
	v = vol_by_id(cl, dir->volume);
	if (!v || !lento_fid_eq(dir, &v->cv.root))
		return false;
	fs = fset_by_volume(cl, v->cv.name);
	if (fs && !fs->dot_presto_said) {
		fs->dot_presto_said = true;
		log_warn("volume %s: the server has an entry .presto at its "
			 "root; presto keeps its journal there, so it is not "
			 "cached", v->cv.name);
	} else if (!fs) {
		log_debug("volume %s: .presto at the root not cached",
			  v->cv.name);
	}
	return true;
}

/* ---------------------------------------------------------- eviction */

struct purge {
	struct client *cl;
	struct fset *fs;
	struct lento_fid fid;
	struct presto_handle handle;	/* the inode PURGEd */
	char path[CACHE_PATH_MAX];
};

/*
 * Drop a file's content in place (a sparse file of its size): presto
 * keeps its inode, which PURGE just made incomplete. Not by a new
 * placeholder inode as evict_obj() does: presto would still hold the old.
 * Only that inode: by the time the ack comes its path may name another
 * (a user of the mount moved the file and made one under its name).
 */
static int evict_in_place(struct client *cl, const struct cache_obj *o,
			  const struct purge *p)
{
	int fd = open_expected(cl, p->path, O_WRONLY, &p->handle, NULL),
	    err = 0;

	if (fd < 0)
		return fd;
	if (ftruncate(fd, 0))
		err = -errno;
	/* Its content is gone from here on, whatever fails after. */
	err = err ?: cache_obj_set_state(cl->cache, &o->fid, o->valid, false);
	if (!err && ftruncate(fd, (off_t)o->attr.size))
		err = -errno;
	err = err ?: cache_set_attrs_fd(fd, o);
	close(fd);
	if (!err)
		cl->st.evictions++;
	return err;
}

/* DATA back on the inode PURGEd, if its path still names it. */
static void purge_undo(struct purge *p)
{
	int fd = open_expected(p->cl, p->path, O_PATH, &p->handle, NULL);

	if (fd < 0)
		return;
	flags_write_fd(fd, PRESTO_CB_ALL, 0, p->fs->epoch);
	close(fd);
}

static void purge_ack(void *arg, int err, const struct kmsg *reply)
{
	struct purge *p = arg;
	struct client *cl = p->cl;
	struct cache_obj o;

	(void)reply;
	cl->k->purging--;
	if (err == -EBUSY) {
		/* Open through the mount: it stays, and so does DATA. */
		struct kclient *k = cl->k;

		p->fs->busy++;
		purge_undo(p);
		k->busy[k->busy_next].fid = p->fid;
		k->busy[k->busy_next].until_ms = lo_now_ms() + BUSY_MS;
		k->busy_next = (k->busy_next + 1) % BUSY_KEEP;
	} else if (err) {
		log_warn("fileset %s: PURGE of %s: %s", p->fs->name, p->path,
			 strerror(-err));
		if (err != -ECANCELED && err != -ETIMEDOUT)
			purge_undo(p);
	} else if (!cache_obj_get(cl->cache, &p->fid, &o, NULL, 0) &&
		   o.data && !o.dirty) {
		p->fs->purges++;
		err = evict_in_place(cl, &o, p);
		if (err == -ESTALE)
			log_debug("evicting %s: no longer the file PURGEd: left "
				  "alone", p->path);
		else if (err)
			log_warn("evicting %s: %s", p->path,
				 cache_strerror(err));
	}
	free(p);
}

int kclient_evict(struct client *cl, const struct cache_obj *o)
{
	struct fset *fs = fset_of_volume(cl, o->fid.volume);
	struct kcmd c = { .cmd = PRESTO_CMD_PURGE, .have = KA(HANDLE) };
	struct purge *p;
	int fd, err;

	if (!fs)
		return 0;
	/*
	 * Not mounted: presto has none of it in memory, but its journal
	 * may hold a change to the file that lento has not read (lento was
	 * down while it was mounted): not before that is read, at the next
	 * mount. A content replaced by a placeholder would lose the change.
	 */
	if (!fs->mounted)
		return fs->j.known && kml_caught_up(fs) ? 0 : -EAGAIN;
	/*
	 * Not before every durable record is read: one may be a change to
	 * this file that makes it dirty. (presto refuses a file whose
	 * records are not yet acknowledged, whatever lento thinks.)
	 */
	if (!fset_live(fs) || !kml_caught_up(fs))
		return -EAGAIN;
	for (unsigned int i = 0; i < BUSY_KEEP; i++)
		if (lento_fid_eq(&cl->k->busy[i].fid, &o->fid) &&
		    lo_now_ms() < cl->k->busy[i].until_ms)
			return -EBUSY;	/* open a moment ago */
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->cl = cl;
	p->fs = fs;
	p->fid = o->fid;
	err = cache_path(cl->cache, &o->fid, p->path, sizeof(p->path));
	/* The handle PURGEd and the xattr written: one inode, the file's. */
	fd = err ? err : cache_open_obj(cl->cache, p->path, O_PATH, 0);
	err = fd < 0 ? fd : handle_of_fd(fd, &c.handle);
	if (!err && cache_fd_is(cl->cache, fd, &o->fid) == 0)
		err = -ESTALE;	/* another object under its name */
	p->handle = c.handle;
	if (err == -ENOENT) {
		free(p);
		return 0;
	}
	/* DATA off in the xattr first, then in presto. */
	err = err ?: flags_write_fd(fd, PRESTO_CB_ATTR, 0, fs->epoch);
	if (fd >= 0)
		close(fd);
	c.fileset = fs->name;
	err = err ?: kchan_send(cl->k->kc, &c, purge_ack, p);
	if (err) {
		free(p);
		return err;
	}
	cl->k->purging++;
	return 1;
}

unsigned int kclient_purging(struct client *cl)
{
	return cl->k ? cl->k->purging : 0;
}

/* ------------------------------------------------- messages from presto */

static void register_ack(void *arg, int err, const struct kmsg *reply)
{
	struct fset *fs = arg;

	(void)reply;
	fs->registering = false;
	if (!err) {
		fs->busy_said = false;
		return;
	}
	fs->registered = false;
	fs->register_at_ms = lo_now_ms() + KCHAN_RETRY_MS;
	if (err == -EBUSY && fs->busy_said)
		return;
	fs->busy_said = err == -EBUSY;
	log_err("fileset %s: cannot register with presto: %s%s", fs->name,
		strerror(-err), err == -EBUSY ? " (another lento serves it); "
		"trying again every few seconds" : err == -EPERM ?
		" (lento needs CAP_SYS_ADMIN)" : "");
}

static void fset_register(struct client *cl, struct fset *fs)
{
	struct kcmd c = { .cmd = PRESTO_CMD_REGISTER, .fileset = fs->name };
	int err;

	if (fs->registered || fs->registering || !kchan_is_up(cl->k->kc) ||
	    lo_now_ms() < fs->register_at_ms)
		return;
	err = kchan_send(cl->k->kc, &c, register_ack, fs);
	if (err) {
		log_warn("fileset %s: REGISTER: %s", fs->name, strerror(-err));
		fs->register_at_ms = lo_now_ms() + KCHAN_RETRY_MS;
		return;
	}
	fs->registering = true;
}

/*
 * Ask presto again where @fs stands: REGISTER from the same socket, whose
 * answer tells the mount, the log and the permit as they are, and after
 * which presto sends every pending upcall again (KERNEL.md).
 */
static void fset_resync(struct client *cl, struct fset *fs)
{
	struct kcmd c = { .cmd = PRESTO_CMD_REGISTER, .fileset = fs->name };
	int err;

	if (!fs->resync || !fs->registered || fs->registering ||
	    !kchan_is_up(cl->k->kc) || lo_now_ms() < fs->register_at_ms)
		return;
	err = kchan_send(cl->k->kc, &c, register_ack, fs);
	if (err) {
		log_warn("fileset %s: REGISTER again: %s", fs->name,
			 strerror(-err));
		fs->register_at_ms = lo_now_ms() + OWED_RETRY_MS * 10;
		return;
	}
	fs->resync = false;
	fs->registering = true;
	fs->resyncs++;
}

/* REGISTER's answer or a MOUNTED/UNMOUNTED notice. */
static void on_mount_state(struct client *cl, struct fset *fs, bool mounted,
			   const struct kmsg *m)
{
	struct presto_handle mine;
	bool was = fs->mounted;
	int err;

	fs->mounted = mounted;
	if (!mounted) {
		if (was)
			log_info("fileset %s: unmounted", fs->name);
		fs->root_ok = false;
		fs->epoch_sent = false;
		upcalls_drop(cl, fs);
		return;
	}
	if (was && fs->root_ok && handle_eq(&m->root, &fs->root)) {
		/*
		 * Told again -- or mounted again over the same lower, the
		 * UNMOUNTED notice between lost: that mount has no epoch
		 * until it hears one. The two look alike, and SET_EPOCH
		 * twice does no harm: sent again either way.
		 */
		fs->timeout_ms = m->timeout_ms;
		fs->epoch_sent = false;
		epoch_at_mount(cl, fs);
		return;
	}
	fs->root = m->root;
	fs->timeout_ms = m->timeout_ms;
	fs->epoch_sent = false;
	err = handle_of(cl, fs->volume, &mine);
	fs->root_ok = !err && handle_eq(&mine, &m->root);
	if (!fs->root_ok) {
		if (err)
			log_err("fileset %s: presto mounted it over inode %"
				PRIu64 "/%" PRIu32 ", but %s/%s: %s: refusing "
				"to serve it", fs->name, (uint64_t)m->root.ino,
				m->root.gen, cl->opt->cache, fs->volume,
				strerror(-err));
		else
			log_err("fileset %s: presto mounted it over inode %"
				PRIu64 "/%" PRIu32 ", not over %s/%s (inode %"
				PRIu64 "/%" PRIu32 "): refusing to serve it "
				"(mount with lower=%s/%s)", fs->name,
				(uint64_t)m->root.ino, m->root.gen,
				cl->opt->cache, fs->volume, (uint64_t)mine.ino,
				mine.gen, cl->opt->cache, fs->volume);
		return;
	}
	log_info("fileset %s: mounted (timeout %" PRIu32 " ms)", fs->name,
		 fs->timeout_ms);
	epoch_at_mount(cl, fs);
}

static void on_access(struct client *cl, struct fset *fs, const struct kmsg *m)
{
	struct vol *v = vol_by_name(cl, fs->volume);

	if (!v || !fs->root_ok)
		return;
	for (uint32_t i = 0; i < m->nhandles; i++) {
		struct presto_handle h;
		struct lento_fid fid;

		kmsg_handle(m, i, &h);
		if (!fid_of_handle(cl, fs, v, &h, &fid)) {
			client_touch(cl, &fid);
			fs->hints++;
		}
	}
}

static void k_msg(void *arg, const struct kmsg *m)
{
	struct client *cl = arg;
	struct fset *fs = m->kind == KM_GENL ? fset_by_name(cl, m->fileset) :
			  NULL;
	bool ours;

	if (!fs) {
		if (m->kind == KM_GENL)
			log_debug("presto: %s for fileset %s, not served here",
				  kchan_cmd_name(m->cmd), m->fileset);
		return;
	}
	switch (m->cmd) {
	case PRESTO_CMD_REGISTER:
		if (!fs->registered)
			log_info("fileset %s: registered with presto (%s)",
				 fs->name, m->mounted ? "mounted" :
				 "not mounted yet");
		fs->registered = true;
		/*
		 * Again after a loss, the answer may be all that is left of
		 * an UNMOUNTED that could not be sent: taken as that.
		 */
		ours = fs->mounted && fs->root_ok;
		on_mount_state(cl, fs, m->mounted, m);
		if (fs->root_ok)
			kml_log_state(cl, fs, m);
		else if (!m->mounted && ours)
			kml_unmounted(cl, fs, m);
		break;
	case PRESTO_CMD_MOUNTED:
		on_mount_state(cl, fs, true, m);
		if (fs->root_ok)
			kml_log_state(cl, fs, m);
		break;
	case PRESTO_CMD_UNMOUNTED:
		/* A mount lento served: the rest of its log is lento's. */
		ours = fs->mounted && fs->root_ok;
		on_mount_state(cl, fs, false, m);
		if (ours)
			kml_unmounted(cl, fs, m);
		else
			kml_stop(cl, fs);
		break;
	case PRESTO_CMD_KML:
		if (fs->root_ok)
			kml_log_state(cl, fs, m);
		break;
	case PRESTO_CMD_UPCALL:
		on_upcall(cl, fs, m);
		break;
	case PRESTO_CMD_ACCESS:
		on_access(cl, fs, m);
		break;
	case PRESTO_CMD_WATCHED:
		on_watched(cl, fs, m);
		break;
	default:
		break;
	}
}

static void k_bad(void *arg, int err, const char *why)
{
	(void)arg;
	log_warn("presto: a message dropped: %s (%s)", why, strerror(-err));
}

static void k_up(void *arg)
{
	struct client *cl = arg;

	log_info("presto: the channel is up");
	for (struct fset *fs = cl->k->fsets; fs; fs = fs->next) {
		fs->register_at_ms = 0;
		fset_register(cl, fs);
	}
}

static void k_down(void *arg, const char *why)
{
	struct client *cl = arg;

	log_warn("presto: the channel went: %s", why);
	for (struct fset *fs = cl->k->fsets; fs; fs = fs->next) {
		fs->registered = fs->registering = false;
		fs->resync = false;	/* the REGISTER at up asks it all */
		fs->mounted = fs->root_ok = false;
		fs->epoch_sent = false;
		kml_stop(cl, fs);
	}
	upcalls_drop(cl, NULL);
}

/*
 * After a loss, a WATCHED may be among what went: if presto has watchers,
 * the directories broken lately are listed now rather than at their next
 * use, as a WATCHED would have had them.
 */
static void lost_watch_answer(void *arg, int err, const struct kmsg *reply)
{
	struct fset *fs = arg;
	struct client *cl = fs->j.cl;
	struct kclient *k;
	struct vol *v;
	uint64_t now = lo_now_ms();

	if (err || !reply || !cl || !cl->k ||
	    !(reply->stat_have & (1u << PRESTO_S_WATCHED)) ||
	    !reply->stat[PRESTO_S_WATCHED])
		return;
	k = cl->k;
	v = vol_by_name(cl, fs->volume);
	if (!v || !connected(cl))
		return;
	for (unsigned int i = 0; i < BROKEN_KEEP; i++) {
		struct cache_obj o;

		if (!k->broken[i].when_ms ||
		    now - k->broken[i].when_ms > BROKEN_MS ||
		    k->broken[i].fid.volume != v->cv.id ||
		    cache_obj_get(cl->cache, &k->broken[i].fid, &o, NULL, 0) ||
		    o.type != LENTO_T_DIR)
			continue;
		if (!job_start(cl, J_READDIR, 0, &o.fid, NULL, NULL))
			fs->watched++;
		k->broken[i].when_ms = 0;
	}
}

static void k_lost(void *arg)
{
	struct client *cl = arg;

	log_warn("presto: messages to lento were dropped (its socket buffer "
		 "was full): asking presto where each fileset stands again");
	for (struct fset *fs = cl->k->fsets; fs; fs = fs->next) {
		struct kcmd c = { .cmd = PRESTO_CMD_STATS,
				  .fileset = fs->name };

		if (!fs->registered)
			continue;	/* its REGISTER's answer is to come */
		fs->resync = true;
		fs->register_at_ms = 0;
		fset_resync(cl, fs);
		kml_lost(cl, fs);
		fs->j.cl = cl;
		if (fset_live(fs))
			kchan_send(cl->k->kc, &c, lost_watch_answer, fs);
	}
}

static const struct kchan_ops kops = {
	.up = k_up, .down = k_down, .msg = k_msg, .bad = k_bad,
	.lost = k_lost,
};

/* -------------------------------------------------------------- frame */

int kclient_start(struct client *cl, char *err, size_t errlen)
{
	const struct client_opts *o = cl->opt;
	int e;

	if (!o->nfilesets)
		return 0;
	cl->k = calloc(1, sizeof(*cl->k));
	if (!cl->k)
		return -ENOMEM;
	for (int i = o->nfilesets - 1; i >= 0; i--) {
		char vol[LENTO_VOLNAME_MAX + 1], name[PRESTO_FILESET_MAX + 1];
		const char *arg = o->filesets[i], *colon = strrchr(arg, ':');
		struct fset *fs;

		/* VOLUME, or VOLUME:NAME (a fileset name of its own). */
		if (colon && colon > arg &&
		    kchan_fileset_ok(colon + 1, strlen(colon + 1)) &&
		    (size_t)(colon - arg) <= LENTO_VOLNAME_MAX) {
			snprintf(vol, sizeof(vol), "%.*s", (int)(colon - arg),
				 arg);
			snprintf(name, sizeof(name), "%s", colon + 1);
		} else if (strlen(arg) <= PRESTO_FILESET_MAX) {
			snprintf(vol, sizeof(vol), "%s", arg);
			snprintf(name, sizeof(name), "%s", arg);
		} else {
			vol[0] = name[0] = 0;
		}
		if (!cache_volname_ok(vol) ||
		    !kchan_fileset_ok(name, strlen(name))) {
			snprintf(err, errlen, "--fileset %s: not VOLUME or "
				 "VOLUME:NAME with a volume name and a fileset "
				 "name presto takes (letters, digits, . _ -)",
				 arg);
			return -EINVAL;
		}
		if (fset_by_name(cl, name) || fset_by_volume(cl, vol)) {
			snprintf(err, errlen, "--fileset %s: that fileset or "
				 "volume twice", arg);
			return -EINVAL;
		}
		fs = calloc(1, sizeof(*fs));
		if (!fs)
			return -ENOMEM;
		snprintf(fs->name, sizeof(fs->name), "%s", name);
		snprintf(fs->volume, sizeof(fs->volume), "%s", vol);
		fs->timeout_ms = 30000;
		/* Its journal unread: lento is behind it from the start. */
		fs->j.caught_up_ms = lo_now_ms();
		fs->next = cl->k->fsets;
		cl->k->fsets = fs;
	}
	e = kchan_new(cl->loop, &kops, cl, &cl->k->kc);
	if (e)
		snprintf(err, errlen, "the presto channel: %s", strerror(-e));
	return e;
}

void kclient_free(struct client *cl)
{
	if (!cl->k)
		return;
	kchan_free(cl->k->kc);	/* acks in flight: -ECANCELED */
	upcalls_drop(cl, NULL);
	while (cl->k->fsets) {
		struct fset *fs = cl->k->fsets;

		cl->k->fsets = fs->next;
		kml_free(fs);
		free(fs);
	}
	free(cl->k);
	cl->k = NULL;
}

uint64_t kclient_due_ms(struct client *cl, uint64_t now)
{
	struct kclient *k = cl->k;
	uint64_t due;

	if (!k)
		return UINT64_MAX;
	due = kchan_due_ms(k->kc);
	if (!kchan_is_up(k->kc))
		return due;
	if (k->upcalls)		/* their steps, PROGRESS */
		return now;
	due = earlier_ms(due, owed_due_ms(cl));
	for (struct fset *fs = k->fsets; fs; fs = fs->next) {
		if (fs->resync && fs->registered && !fs->registering)
			due = earlier_ms(due, fs->register_at_ms > now ?
					 fs->register_at_ms : now);
		if (!fs->registered) {
			if (!fs->registering)
				due = earlier_ms(due, fs->register_at_ms);
			continue;
		}
		due = earlier_ms(due, kml_due_ms(cl, fs, now));
		if (fs->watched_at_ms)
			due = earlier_ms(due, fs->watched_at_ms +
					 cl->watch_ms);
	}
	return due;
}

void kclient_tick(struct client *cl, uint64_t now)
{
	struct kclient *k = cl->k;
	bool was_up;
	static bool said;

	if (!k)
		return;
	was_up = kchan_is_up(k->kc);
	kchan_tick(k->kc, now);
	if (!kchan_is_up(k->kc)) {
		if (!said || was_up)
			log_warn("presto: %s", kchan_state(k->kc));
		said = true;
		return;
	}
	said = false;
	owed_tick(cl, now);
	for (struct fset *fs = k->fsets; fs; fs = fs->next) {
		fset_register(cl, fs);
		fset_resync(cl, fs);
		kml_tick(cl, fs);
		watch_tick(cl, fs, now);
	}
	kclient_progress(cl);
}

void kclient_progress(struct client *cl)
{
	uint64_t now = lo_now_ms();

	if (!cl->k || !kchan_is_up(cl->k->kc))
		return;
	/*
	 * Long fetches tell presto they are still at it; one whose request
	 * the server has long been silent on is not (JOB_SILENT_MS).
	 */
	for (struct upcall *uc = cl->k->upcalls; uc; uc = uc->next) {
		struct kcmd c = { .cmd = PRESTO_CMD_PROGRESS,
				  .fileset = uc->fs->name, .have = KA(REQ),
				  .req = uc->req };
		uint32_t every = (uc->fs->timeout_ms ?: 30000) / 3;

		if (now - uc->progress_ms < every / 2 + every / 4)
			continue;
		if (uc->wait_job && job_stalled(cl, uc->wait_job, now))
			continue;
		uc->progress_ms = now;
		kchan_send(cl->k->kc, &c, NULL, NULL);
	}
}

void kclient_conn_up(struct client *cl)
{
	if (!cl->k)
		return;
	/* presto serves hits without asking: validate now, not lazily. */
	for (struct fset *fs = cl->k->fsets; fs; fs = fs->next) {
		struct vol *v = vol_by_name(cl, fs->volume);

		if (!v)
			job_start(cl, J_LOOKUP, 0, NULL, fs->volume, NULL);
		else
			job_start(cl, J_VALIDATE, v->cv.id, NULL, NULL, NULL);
	}
}

/* ------------------------------------------------------------ status */

struct stats_wait {
	struct client *cl;
	struct ctl_req *r;
	int left;
	void (*done)(struct client *cl, struct ctl_req *r);
};

struct stats_one {
	struct stats_wait *sw;
	struct fset *fs;
};

static void stats_ack(void *arg, int err, const struct kmsg *reply)
{
	struct stats_one *so = arg;
	struct stats_wait *sw = so->sw;

	if (!err && reply) {
		memcpy(so->fs->stat, reply->stat, sizeof(so->fs->stat));
		so->fs->have_stat = true;
	}
	free(so);
	if (--sw->left)
		return;
	sw->done(sw->cl, sw->r);
	free(sw);
}

bool kclient_stats_refresh(struct client *cl, struct ctl_req *r,
			   void (*done)(struct client *cl, struct ctl_req *r))
{
	struct stats_wait *sw;

	if (!cl->k || !kchan_is_up(cl->k->kc))
		return false;
	sw = calloc(1, sizeof(*sw));
	if (!sw)
		return false;
	sw->cl = cl;
	sw->r = r;
	sw->done = done;
	sw->left = 1;		/* until every STATS is out */
	for (struct fset *fs = cl->k->fsets; fs; fs = fs->next) {
		struct kcmd c = { .cmd = PRESTO_CMD_STATS,
				  .fileset = fs->name };
		struct stats_one *so = calloc(1, sizeof(*so));

		if (!so)
			break;
		so->sw = sw;
		so->fs = fs;
		sw->left++;
		if (kchan_send(cl->k->kc, &c, stats_ack, so)) {
			sw->left--;
			free(so);
		}
	}
	if (--sw->left)
		return true;
	free(sw);
	return false;
}

static const char *const stat_names[PRESTO_S_MAX + 1] = {
	[PRESTO_S_UPCALLS] = "upcalls",
	[PRESTO_S_FETCH_DIR] = "fetch_dir",
	[PRESTO_S_FETCH_FILE] = "fetch_file",
	[PRESTO_S_FETCH_ATTR] = "fetch_attr",
	[PRESTO_S_JOINED] = "joined",
	[PRESTO_S_RESENT] = "resent",
	[PRESTO_S_TIMEOUTS] = "timeouts",
	[PRESTO_S_INTERRUPTED] = "interrupted",
	[PRESTO_S_FAILED] = "failed",
	[PRESTO_S_BREAKS] = "breaks",
	[PRESTO_S_PENDING] = "pending",
	[PRESTO_S_REGISTERED] = "registered",
	[PRESTO_S_PERMIT] = "permit_upcalls",
	[PRESTO_S_REVOKES] = "revokes",
	[PRESTO_S_PERMIT_HELD] = "permit_held",
	[PRESTO_S_WATCHED] = "watched",
};

static unsigned int pending_of(struct client *cl, struct fset *fs)
{
	unsigned int n = 0;

	for (struct upcall *uc = cl->k->upcalls; uc; uc = uc->next)
		n += uc->fs == fs;
	return n;
}

void kclient_status_json(struct client *cl, struct jw *w)
{
	jw_key(w, "presto");
	if (!cl->k) {
		jw_null(w);
		return;
	}
	jw_obj_begin(w);
	jw_key(w, "channel");
	jw_str(w, kchan_is_up(cl->k->kc) ? "up" : kchan_state(cl->k->kc));
	jw_key(w, "losses");
	jw_uint(w, kchan_losses(cl->k->kc));
	jw_key(w, "filesets");
	jw_arr_begin(w);
	for (struct fset *fs = cl->k->fsets; fs; fs = fs->next) {
		char epoch[24];

		jw_obj_begin(w);
		jw_key(w, "name");
		jw_str(w, fs->name);
		jw_key(w, "volume");
		jw_str(w, fs->volume);
		jw_key(w, "registered");
		jw_bool(w, fs->registered);
		jw_key(w, "mounted");
		jw_bool(w, fs->mounted);
		jw_key(w, "root_ok");
		jw_bool(w, fs->root_ok);
		snprintf(epoch, sizeof(epoch), "%016" PRIx64, fs->epoch);
		jw_key(w, "epoch");
		jw_str(w, epoch);
		jw_key(w, "epoch_sent");
		jw_bool(w, fs->epoch_sent);
		jw_key(w, "timeout_ms");
		jw_uint(w, fs->timeout_ms);
		jw_key(w, "lento");
		jw_obj_begin(w);
		jw_key(w, "upcalls");
		jw_uint(w, fs->upcalls);
		jw_key(w, "answered_from_cache");
		jw_uint(w, fs->hits);
		jw_key(w, "answered_after_fetch");
		jw_uint(w, fs->fetched);
		jw_key(w, "failed");
		jw_uint(w, fs->failed);
		jw_key(w, "in_progress");
		jw_uint(w, pending_of(cl, fs));
		jw_key(w, "breaks_sent");
		jw_uint(w, fs->breaks);
		jw_key(w, "purged");
		jw_uint(w, fs->purges);
		jw_key(w, "purge_busy");
		jw_uint(w, fs->busy);
		jw_key(w, "access_hints");
		jw_uint(w, fs->hints);
		jw_key(w, "watched_listed");
		jw_uint(w, fs->watched);
		jw_key(w, "names_notified");
		jw_uint(w, fs->notified);
		jw_key(w, "replies_owed");
		jw_uint(w, fs->replies_owed);
		jw_key(w, "resyncs");
		jw_uint(w, fs->resyncs);
		jw_obj_end(w);
		jw_key(w, "kernel");
		if (!fs->have_stat) {
			jw_null(w);
		} else {
			jw_obj_begin(w);
			for (int i = 1; i <= PRESTO_S_MAX; i++) {
				if (i == PRESTO_S_PAD)
					continue;
				jw_key(w, stat_names[i]);
				jw_uint(w, fs->stat[i]);
			}
			jw_obj_end(w);
		}
		kml_status_json(cl, fs, w);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_obj_end(w);
}

void kclient_status_text(struct client *cl, struct jw *w)
{
	if (!cl->k)
		return;
	if (!kchan_is_up(cl->k->kc))
		jw_printf(w, "presto: %s\n", kchan_state(cl->k->kc));
	for (struct fset *fs = cl->k->fsets; fs; fs = fs->next) {
		jw_printf(w, "fileset %s (volume %s): %s, %s%s, epoch %016"
			  PRIx64 "%s\n", fs->name, fs->volume, fs->registered ? "registered" :
			  "NOT registered", fs->mounted ? "mounted" :
			  "not mounted", fs->mounted && !fs->root_ok ?
			  " over another directory (REFUSED)" : "",
			  fs->epoch, fs->epoch && !fs->epoch_sent &&
			  fs->mounted ? " (not sent yet)" : "");
		jw_printf(w, "  lento: %" PRIu64 " upcalls (%" PRIu64 " from "
			  "the cache, %" PRIu64 " fetched, %" PRIu64 " failed, "
			  "%u in progress), %" PRIu64 " breaks, %" PRIu64
			  " purged, %" PRIu64 " access hints, %" PRIu64
			  " names told to watchers\n", fs->upcalls,
			  fs->hits, fs->fetched, fs->failed, pending_of(cl, fs),
			  fs->breaks, fs->purges, fs->hints, fs->notified);
		if (fs->replies_owed || fs->resyncs)
			jw_printf(w, "  channel: %" PRIu64 " answers to upcalls "
				  "sent again, %" PRIu64 " times presto asked "
				  "again where the fileset stands (%" PRIu64
				  " losses of messages from presto)\n",
				  fs->replies_owed, fs->resyncs,
				  kchan_losses(cl->k->kc));
		kml_status_text(cl, fs, w);
		if (!fs->have_stat)
			continue;
		jw_printf(w, "  kernel:");
		for (int i = 1; i <= PRESTO_S_MAX; i++)
			if (i != PRESTO_S_PAD)
				jw_printf(w, "%s %s %" PRIu64, i > 1 ? "," :
					  "", stat_names[i], fs->stat[i]);
		jw_printf(w, "\n");
	}
}
