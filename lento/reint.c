// SPDX-License-Identifier: MIT
/*
 * Reintegration (client_int.h): shipping a volume's CML to the server in
 * batches, and what the answers mean.
 *
 * When. A volume is shipped when its oldest record is older than the
 * aging window (--age-ms) and lento has consumed what presto journaled
 * since (a backlog may still hold what cancels it; behind it for twice
 * the window, it goes regardless), at once when the server revokes its permit,
 * when asked (lentoctl reintegrate, sync), when records were sent and not
 * acknowledged (a lost connection, a crash: they go again first), and
 * when the cache is full of dirty objects. One batch at a time per
 * connection: the protocol lets a REINTEGRATE follow one not yet
 * answered, but the server reads nothing behind such a batch until it
 * takes it -- PINGs neither -- and a long apply would then look like a
 * server gone.
 *
 * Numbers. CML record numbers count across volumes and the optimiser
 * leaves gaps; the server wants each volume's records numbered 1, 2, 3...
 * So a batch gives its records consecutive *ship numbers*, following the
 * last one the server applied, and keeps them in the cache's ship table,
 * in the same transaction that marks the records shipped (cml_batch).
 * A batch sent again -- after a lost answer or a crash -- is the same
 * records with the same numbers, and the server skips those it applied.
 * Shipped records are never optimised nor renumbered until an answer
 * says which the server has.
 *
 * Bases. The server applies a record only if each object's version is
 * the record's base, and each record it applies moves the versions of
 * the objects it names (store.h). Records in the log name the version
 * this client knew before it changed the object; on the wire, each
 * record's base is that version moved forward by the batch's earlier
 * records (as store.h's rule predicts), and after an acknowledgement the
 * cache holds the versions the server answered with.
 *
 * Bodies. A STORE's body is sent from a shadow copy taken when the batch
 * is made, never from the file that may be written meanwhile: a file
 * written during the send would reach the server torn. The copy has no
 * name (in memory, or an O_TMPFILE in the cache for a large body) and
 * goes with the batch: a batch sent again -- after a lost connection or
 * a crash -- takes its bodies again from the files as they are then.
 * That is safe because the server skips the records it applied, and one
 * it did not apply may carry newer bytes: a later STORE of them is in the
 * log behind it. The file is found by the names the cache's database
 * holds, which are the CML's: behind the cache when lento has not
 * consumed all presto journaled. So the file found must be the record's
 * object (its inode, as presto named it); one that is not there or not it
 * has moved on since, and presto's journal is consumed to its end
 * (KML_SYNC) before the batch is made again. An object with no name left
 * in the database lost them to later records: its bytes are gone here
 * and the STORE goes with none (LENTO_R_NOBODY). The server keeps the
 * content it has, which matters when the object has a name there that
 * this client never listed: an empty body would wipe it.
 *
 * Answers. Applied: the records go from the log (cml_ack), the cache
 * takes the new versions and the volume's stamp. A conflict or another
 * refusal: records up to what the server applied go, the rest stay in
 * the log, pending again (they may be optimised further), the volume is
 * stuck and says why in lentoctl status until a person resolves it and
 * runs lentoctl reintegrate. ENOPERMIT: the permit is acquired again and
 * the same batch sent again. Nothing is ever deleted because the server
 * refused it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/fs.h>

#include "array.h"
#include "client_int.h"
#include "client_kernel.h"
#include "cml.h"
#include "kml_apply.h"
#include "log.h"
#include "vv.h"
#include "worker.h"

struct batch {
	struct client *cl;
	uint32_t volume;
	uint32_t tag;
	uint32_t n, cap;
	struct lento_rec *recs;	/* wire form: recno is the ship number */
	uint8_t **data;		/* per record: data, then groups; owned */
	uint64_t *recnos;	/* their CML record numbers */
	int *fds;		/* STORE: its shadow, open; else -1 */
	uint32_t stores;	/* how many STOREs */
	struct shadow_job *job;	/* making the shadows */
	uint64_t first;		/* ship number of recs[0] */
	uint32_t cur;		/* the STORE whose body is being sent */
	uint64_t off;
	bool replied, sent_all, dead;
	/*
	 * Made, not yet sent: its shadows are being made (@job), or the
	 * cache's transactions up to @gen (its ship numbers, the records and
	 * fids it carries) are not durable yet.
	 */
	bool waiting;
	uint64_t gen;
	int err;		/* making its shadows */
	struct pred *pred;	/* the versions its records leave */
};

/* ------------------------------------------------------------- helpers */

static bool is_create(uint16_t op)
{
	return op == LENTO_OP_CREATE || op == LENTO_OP_MKDIR ||
	       op == LENTO_OP_MKNOD || op == LENTO_OP_SYMLINK;
}

/* ------------------------------------------------------------- shadows */

/*
 * A STORE's body is sent from its shadow (see Bodies above), made on the
 * worker's thread: copying a large file may take seconds on a busy disk,
 * and the loop must not wait for it.
 *
 * A shadow is an unnamed file that lives as long as its batch: a memfd
 * for a small body (no inode, no journal, no writeback in the cache's
 * file system), an O_TMPFILE in the cache's .lento/tmp once a body or the
 * job's memory passes its bound. Nothing is synced and nothing is left
 * behind by a crash.
 */
#define SHADOW_MEM_BODY_MAX	(1 << 20)	/* a body in memory at most */
#define SHADOW_MEM_JOB_MAX	(32 << 20)	/* a job's bodies in memory */

/* A lower inode presto named an object by (its handles). */
struct inode_id {
	uint32_t ino, gen;
};

struct shadow {
	uint32_t rec;		/* its record in the batch */
	char *src;		/* the cache's file; NULL: no name left */
	int fd;
	bool moot;		/* no body: sent empty, NOBODY */
	uint64_t size;
	/*
	 * The inodes src may be (none known: not checked): every one presto
	 * named the object by, as each fetch puts a new inode in its place.
	 */
	size_t nid, idcap;
	struct inode_id *id;
};

struct shadow_job {
	struct wk_job wk;
	struct batch *b;	/* NULL once the batch is gone */
	int dirfd;
	bool gone_ok;		/* a body moved on is moot (given up) */
	uint64_t mem;		/* bytes of its shadows in memory */
	uint32_t n;
	struct shadow *s;
	int err;		/* -ESTALE: a body moved on */
	uint32_t failed;	/* the shadow that failed, if err */
};

/* Whether @in (status @sb) is the object's inode (-ESTALE if not). */
static int shadow_is_it(const struct shadow *s, int in,
			const struct stat *sb)
{
	unsigned int gen;
	bool have_gen;

	if (!s->nid)
		return 0;	/* not known: not checked */
	have_gen = !ioctl(in, FS_IOC_GETVERSION, &gen);
	for (size_t i = 0; i < s->nid; i++)
		if (s->id[i].ino == sb->st_ino &&
		    (!have_gen || s->id[i].gen == gen))
			return 0;
	return -ESTALE;
}

/* An unnamed file for a body of @size bytes, in memory while it fits. */
static int shadow_open(struct shadow_job *j, struct shadow *s, off_t size)
{
	if (size <= SHADOW_MEM_BODY_MAX &&
	    j->mem + (uint64_t)size <= SHADOW_MEM_JOB_MAX) {
		s->fd = memfd_create("lento-shadow", MFD_CLOEXEC);
		if (s->fd >= 0) {
			j->mem += (uint64_t)size;
			return 0;
		}
		if (errno != ENOMEM && errno != EMFILE && errno != ENFILE)
			return -errno;
	}
	s->fd = cache_beneath(j->dirfd, ".lento/tmp", O_TMPFILE | O_RDWR, 0600);
	return s->fd >= 0 ? 0 : s->fd;
}

/* The object's body from the cache's file into a new shadow. */
static int shadow_copy(struct shadow_job *j, struct shadow *s)
{
	/*
	 * Beneath the cache and through no symlink: the path of the rows
	 * may be stale, and a symlink a user put on it must not have lento
	 * ship a file from anywhere on the host.
	 */
	int in = cache_beneath(j->dirfd, s->src, O_RDONLY, 0);
	struct stat sb;
	int err;

	/* The name moved on (a fifo under it, say): not this object's. */
	if (in < 0)
		return in == -ENOENT || in == -ELOOP || in == -EISDIR ||
		       in == -CACHE_ENOTREG ? -ESTALE : in;
	err = fstat(in, &sb) ? -errno : shadow_is_it(s, in, &sb);
	err = err ?: shadow_open(j, s, sb.st_size);
	err = err ?: cache_copy_fd(in, s->fd, sb.st_size);
	close(in);
	return err;
}

/* The shadow made: a copy, or empty when the body is moot. */
static int shadow_make(struct shadow_job *j, struct shadow *s)
{
	int err = 0;

	s->moot = !s->src;
	if (s->src)
		err = shadow_copy(j, s);
	if (err == -ESTALE && j->gone_ok) {
		s->moot = true;
		err = 0;
	}
	/* No shadow yet: a body moves on before its copy is opened. */
	if (!err && s->moot)
		err = shadow_open(j, s, 0);
	return err;
}

/* The body as it is in the copy: its size is what ships. */
static int shadow_size(struct shadow_job *j, struct shadow *s)
{
	struct stat sb;

	(void)j;
	if (fstat(s->fd, &sb))
		return -errno;
	s->size = (uint64_t)sb.st_size;
	return 0;
}

/* One step for every shadow, in turn; the first failure stops the job. */
static void shadow_step(struct shadow_job *j,
			int (*step)(struct shadow_job *, struct shadow *))
{
	for (uint32_t i = 0; !j->err && i < j->n; i++) {
		j->err = step(j, &j->s[i]);
		if (j->err)
			j->failed = i;
	}
}

static void shadow_run(struct wk_job *wk)
{
	struct shadow_job *j = (struct shadow_job *)wk;

	shadow_step(j, shadow_make);
	shadow_step(j, shadow_size);
}

static void shadow_job_free(struct shadow_job *j)
{
	for (uint32_t i = 0; i < j->n; i++) {
		if (j->s[i].fd >= 0)
			close(j->s[i].fd);
		free(j->s[i].src);
		free(j->s[i].id);
	}
	free(j->s);
	free(j);
}

static void shadow_said_moot(const struct batch *b,
			     const struct lento_rec *r, bool given_up)
{
	if (given_up)
		log_err("volume %" PRIu32 ": the body of " FIDFMT " for its "
			"STORE is not in the cache, nor anything presto "
			"journaled says where it went: it goes without one, "
			"and the server keeps the content it has",
			b->volume, FIDARG(&r->obj));
	else
		log_info("volume %" PRIu32 ": " FIDFMT " has no name left in "
			 "the cache: its STORE goes without a body, and the "
			 "server keeps the content it has (for its other names, "
			 "if any)", b->volume, FIDARG(&r->obj));
}

static void shadow_done(struct wk_job *wk, bool ran)
{
	struct shadow_job *j = (struct shadow_job *)wk;
	struct batch *b = j->b;

	if (!b) {
		shadow_job_free(j);
		return;
	}
	b->job = NULL;
	if (!ran) {
		b->err = -ECANCELED;
	} else if (j->err) {
		const struct lento_rec *r = &b->recs[j->s[j->failed].rec];

		b->err = j->err;
		if (j->err == -ESTALE)
			log_info("volume %" PRIu32 ": the body of " FIDFMT
				 " for its STORE moved on in the cache since "
				 "the record was consumed: presto's journal "
				 "first", b->volume, FIDARG(&r->obj));
		else
			log_err("volume %" PRIu32 ": the body of " FIDFMT
				" for its STORE: %s", b->volume,
				FIDARG(&r->obj), strerror(-j->err));
	} else {
		for (uint32_t i = 0; i < j->n; i++) {
			struct lento_rec *r = &b->recs[j->s[i].rec];

			if (j->s[i].moot) {
				shadow_said_moot(b, r, j->gone_ok &&
						 j->s[i].src);
				r->flags |= LENTO_R_NOBODY;
			}
			b->fds[j->s[i].rec] = j->s[i].fd;
			j->s[i].fd = -1;
			r->attr.valid |= LENTO_A_SIZE;
			r->attr.size = j->s[i].size;
		}
	}
	shadow_job_free(j);
	if (ran)
		reint_durable(b->cl);
}

static void shadow_orphan(struct shadow_job *j)
{
	j->b = NULL;
}

/* Each handle presto named the object by: an inode it may be. */
static int take_id(void *arg, int type, const void *handle, size_t len)
{
	struct shadow *s = arg;
	struct inode_id *id;
	struct kml_fh h;

	if (!kapply_handle_parse(type, handle, len, &h))
		return 0;
	id = array_grow(s->id, &s->idcap, s->nid, 1, sizeof(*id));
	if (!id)
		return -ENOMEM;
	s->id = id;
	s->id[s->nid].ino = (uint32_t)h.ino;
	s->id[s->nid++].gen = h.gen;
	return 0;
}

/* The batch's shadows, made by the worker; 0 or -errno (none started). */
static int shadows_start(struct client *cl, struct batch *b, struct vol *v)
{
	struct shadow_job *j;
	struct cache_path_memo m = { 0 };
	char path[CACHE_PATH_MAX];
	bool rd;
	int err = 0;

	if (!b->stores)
		return 0;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->wk.run = shadow_run;
	j->wk.done = shadow_done;
	j->b = b;
	j->dirfd = cache_dirfd(cl->cache);
	j->gone_ok = v->moved_on >= REINT_MOVED_ON_MAX;
	j->s = calloc(b->stores, sizeof(*j->s));
	if (!j->s)
		err = -ENOMEM;
	rd = cache_read_begin(cl->cache);
	for (uint32_t i = 0; !err && i < b->n; i++) {
		struct shadow *s;

		if (b->recs[i].op != LENTO_OP_STORE)
			continue;
		s = &j->s[j->n++];
		s->rec = i;
		s->fd = -1;
		/* No name left: a later record removes it (src NULL). */
		err = cache_path_near(cl->cache, &b->recs[i].obj, &m, path,
				      sizeof(path));
		if (!err) {
			s->src = strdup(path);
			err = s->src ? 0 : -ENOMEM;
		} else if (err == -ENOENT) {
			err = 0;
		}
		err = err ?: cache_handles(cl->cache, &b->recs[i].obj,
					   take_id, s);
	}
	cache_read_end(cl->cache, rd);
	if (err) {
		shadow_job_free(j);
		return err;
	}
	b->job = j;
	wk_submit(cl->wk, &j->wk);
	return 0;
}

static void pred_drop(struct batch *b);

static void batch_free(struct batch *b)
{
	pred_drop(b);
	if (b->job)		/* the job's end frees it */
		shadow_orphan(b->job);
	for (uint32_t i = 0; i < b->n; i++) {
		free(b->data[i]);
		if (b->fds[i] >= 0)
			close(b->fds[i]);
	}
	free(b->recs);
	free(b->data);
	free(b->recnos);
	free(b->fds);
	free(b);
}

static int batch_grow(struct batch *b)
{
	uint32_t cap = b->cap ? 2 * b->cap : 64;
	void *p;

	p = realloc(b->recs, cap * sizeof(*b->recs));
	if (!p)
		return -ENOMEM;
	b->recs = p;
	p = realloc(b->data, cap * sizeof(*b->data));
	if (!p)
		return -ENOMEM;
	b->data = p;
	p = realloc(b->recnos, cap * sizeof(*b->recnos));
	if (!p)
		return -ENOMEM;
	b->recnos = p;
	p = realloc(b->fds, cap * sizeof(*b->fds));
	if (!p)
		return -ENOMEM;
	b->fds = p;
	b->cap = cap;
	return 0;
}

/*
 * @r's data and groups, which point into the log's row, copied into one
 * allocation the batch owns (*@own, NULL when there are none).
 */
static int rec_copy_out(struct lento_rec *r, uint8_t **own)
{
	size_t lg = 4 * (size_t)r->ngroups;
	uint8_t *p;

	*own = NULL;
	if (!r->data_len && !lg)
		return 0;
	p = malloc(r->data_len + lg);
	if (!p)
		return -ENOMEM;
	if (r->data_len) {
		memcpy(p, r->data, r->data_len);
		r->data = p;
	}
	if (lg) {
		memcpy(p + r->data_len, r->groups, lg);
		r->groups = p + r->data_len;
	}
	*own = p;
	return 0;
}

/* A record into the batch (data and groups copied), with its ship number. */
static int batch_add(struct batch *b, const struct lento_rec *rec,
		     uint64_t shipno)
{
	uint32_t i = b->n;
	struct lento_rec *r;
	int err = b->n == b->cap ? batch_grow(b) : 0;

	if (err)
		return err;
	r = &b->recs[i];
	*r = *rec;
	b->fds[i] = -1;
	b->recnos[i] = rec->recno;
	err = rec_copy_out(r, &b->data[i]);
	if (err)
		return err;
	b->n++;
	r->recno = shipno;
	/* A hint for the optimiser, not a wire flag. */
	r->flags &= ~LENTO_R_LASTLINK;
	b->stores += r->op == LENTO_OP_STORE;
	return 0;
}

/* cml_batch: a record newly taken gets the next ship number. */
static int take_new(void *arg, const struct lento_rec *rec, uint64_t body)
{
	struct batch *b = arg;
	uint64_t shipno = b->first + b->n;
	int err;

	(void)body;
	err = cache_ship_add(b->cl->cache, b->volume, shipno, rec->recno);
	return err ?: batch_add(b, rec, shipno);
}

/* cml_list: the records shipped before and not acknowledged. */
static int take_shipped(void *arg, const struct lento_rec *rec,
			uint64_t body)
{
	struct batch *b = arg;
	uint64_t shipno;
	int err = cache_ship_of(b->cl->cache, b->volume, rec->recno, &shipno);

	(void)body;
	if (err == -ENOENT)
		return 0;
	if (err)
		return err;
	if (b->n && shipno != b->first + b->n)
		return -EUCLEAN;	/* the numbers must follow */
	if (!b->n)
		b->first = shipno;
	return batch_add(b, rec, shipno);
}

/* ----------------------------------------------------- predicted bases */

/* The versions the batch's records leave: a small open-addressed map. */
struct pred {
	struct lento_fid *fid;
	struct lento_vv *vv;
	size_t cap;		/* a power of two */
};

static size_t pred_slot(const struct pred *p, const struct lento_fid *f)
{
	uint64_t h = (f->seq * 0x9e3779b97f4a7c15ull) ^
		     ((uint64_t)f->client << 32 | f->volume);
	size_t i = (size_t)(h ^ h >> 29) & (p->cap - 1);

	while (!lento_fid_is_null(&p->fid[i]) && !lento_fid_eq(&p->fid[i], f))
		i = (i + 1) & (p->cap - 1);
	return i;
}

static int pred_init(struct pred *p, uint32_t nrec)
{
	p->cap = 64;
	while (p->cap < 8 * (size_t)nrec + 8)
		p->cap *= 2;
	p->fid = calloc(p->cap, sizeof(*p->fid));
	p->vv = calloc(p->cap, sizeof(*p->vv));
	return p->fid && p->vv ? 0 : -ENOMEM;
}

static void pred_free(struct pred *p)
{
	free(p->fid);
	free(p->vv);
}

static void pred_drop(struct batch *b)
{
	if (b->pred) {
		pred_free(b->pred);
		free(b->pred);
		b->pred = NULL;
	}
}

/* An object's version before record @r: predicted, cached, or logged. */
static void base_of(struct client *cl, struct pred *p,
		    const struct lento_fid *f, struct lento_vv *base)
{
	size_t i = pred_slot(p, f);
	struct cache_obj o;

	if (!lento_fid_is_null(&p->fid[i]))
		*base = p->vv[i];
	else if (!cache_obj_get(cl->cache, f, &o, NULL, 0))
		*base = o.vv;
	/* else: not cached (a resend after the object went): as logged */
}

/* Record @r moves every object it names, once. */
static void bump_all(struct client *cl, struct pred *p, struct lento_rec *r)
{
	struct lento_fid *f[4] = { &r->dir, &r->obj, &r->dir2, &r->target };
	struct lento_vv *b[4] = { &r->base_dir, &r->base_obj, &r->base_dir2,
				  &r->base_target };
	struct lento_storeid sid = { cl->client_id, r->recno };

	for (int k = 0; k < 4; k++) {
		bool seen = false;
		size_t i;

		if (lento_fid_is_null(f[k]))
			continue;
		for (int m = 0; m < k; m++)
			seen |= lento_fid_eq(f[m], f[k]);
		if (seen)
			continue;
		i = pred_slot(p, f[k]);
		p->fid[i] = *f[k];
		if (k == 1 && is_create(r->op))
			lento_vv_init(&p->vv[i], 1);
		else
			p->vv[i] = *b[k];
		if (!p->vv[i].n)
			lento_vv_init(&p->vv[i], 1);
		lento_vv_bump(&p->vv[i], 0, sid);
	}
}

/* The batch keeps @p: the answer's versions are checked against it. */
static void pred_keep(struct batch *b, struct pred *p)
{
	b->pred = malloc(sizeof(*b->pred));
	if (b->pred)
		*b->pred = *p;
	else
		pred_free(p);
}

static int wire_bases(struct batch *b)
{
	struct client *cl = b->cl;
	struct pred p;
	int err = pred_init(&p, b->n);

	for (uint32_t i = 0; !err && i < b->n; i++) {
		struct lento_rec *r = &b->recs[i];

		if (!lento_fid_is_null(&r->dir))
			base_of(cl, &p, &r->dir, &r->base_dir);
		/* A new object has no version yet: its base is null. */
		if (!is_create(r->op))
			base_of(cl, &p, &r->obj, &r->base_obj);
		if (!lento_fid_is_null(&r->dir2))
			base_of(cl, &p, &r->dir2, &r->base_dir2);
		if (!lento_fid_is_null(&r->target))
			base_of(cl, &p, &r->target, &r->base_target);
		bump_all(cl, &p, r);
	}
	if (err)
		pred_free(&p);
	else
		pred_keep(b, &p);
	return err;
}

/*
 * The batch was cut short (the frame's bound): the answer's versions are
 * those after the records sent, predicted again from their bases, which
 * wire_bases() set. Without a prediction (no memory) they are taken as
 * they come.
 */
static void pred_remake(struct batch *b)
{
	struct pred p;

	pred_drop(b);
	if (pred_init(&p, b->n)) {
		pred_free(&p);
		return;
	}
	for (uint32_t i = 0; i < b->n; i++)
		bump_all(b->cl, &p, &b->recs[i]);
	pred_keep(b, &p);
}

/* --------------------------------------------------------- dirty flags */

/* Each object a record names counts it once per slot (as logged). */
static int count_rec(struct cache *c, const struct lento_rec *r, int delta)
{
	const struct lento_fid *f[4] = { &r->dir, &r->obj, &r->dir2,
					 &r->target };
	int err = 0;

	for (int k = 0; !err && k < 4; k++)
		if (!lento_fid_is_null(f[k]))
			err = cache_dirty_add(c, f[k], delta);
	return err;
}

static int mark_rec(void *arg, const struct lento_rec *r, uint64_t body)
{
	(void)body;
	return count_rec(arg, r, 1);
}

int reint_dirty_refresh(struct client *cl, uint32_t volume)
{
	int err = cache_dirty_clear(cl->cache, volume);

	if (!err) {
		err = cml_list(cache_cml(cl->cache), volume, mark_rec,
			       cl->cache);
		err = err < 0 ? err : 0;
	}
	return err ?: cache_purge(cl->cache, volume);
}

/* The optimiser changed how many slots name @fid (cml_count_fn). */
static int recount(void *arg, const struct lento_fid *fid, int64_t delta)
{
	int d = delta < INT_MIN ? INT_MIN : delta > INT_MAX ? INT_MAX :
		(int)delta;

	return cache_dirty_add(arg, fid, d);
}

/* The records the server has no longer make their objects dirty. */
static int unmark_acked(struct client *cl, const struct batch *b,
			uint64_t applied)
{
	struct cml_stats cs;
	uint32_t n = 0;
	int err;

	while (n < b->n && b->recs[n].recno <= applied)
		n++;
	err = cml_count_names(b->recs, n, -1, recount, cl->cache);
	/* An empty log leaves nothing dirty, whatever was counted. */
	err = err ?: cml_stats(cache_cml(cl->cache), b->volume, &cs);
	if (!err && !cs.records)
		err = cache_dirty_clear(cl->cache, b->volume);
	return err ?: cache_purge(cl->cache, b->volume);
}

/* Did the optimiser rewrite or drop anything? */
static bool optimised(const struct cml_opt_stats *os)
{
	return os->before != os->after || os->cancelled || os->converted ||
	       os->moot || os->stores || os->setattrs || os->folded ||
	       os->renames || os->creates;
}

bool reint_sending(struct client *cl, uint32_t volume)
{
	struct batch *b = cl->batch;

	return b && b->volume == volume && !b->replied && !b->dead;
}

/* ------------------------------------------------------------- sending */

static uint32_t next_store(const struct batch *b, uint32_t from)
{
	while (from < b->n && b->recs[from].op != LENTO_OP_STORE)
		from++;
	return from;
}

static void batch_done(struct client *cl, struct batch *b);

/*
 * Queue DATA frames of the bodies while the output is short, and at most
 * BODY_QUEUE_LOW bytes of them per call: zeros compress to nearly
 * nothing, and a 1 GiB file of them read and compressed in one go held
 * the loop 4.5 s (the permit's lease ran out meanwhile, and the batch was
 * refused, again and again). What was queued going out calls again.
 */
static void pump(struct client *cl, struct batch *b)
{
	static uint8_t chunk[LP_CHUNK_MAX];
	uint64_t raw = 0;

	while (!b->waiting && !b->sent_all && raw < BODY_QUEUE_LOW &&
	       conn_queued(cl->conn) < BODY_QUEUE_LOW) {
		uint32_t i = b->cur;
		uint64_t size = b->recs[i].attr.size, want = size - b->off;
		struct lp_data d = { .rec = i, .offset = b->off };
		ssize_t k = 0;

		if (want > LP_CHUNK_MAX)
			want = LP_CHUNK_MAX;
		while ((uint64_t)k < want) {
			ssize_t r = pread(b->fds[i], chunk + k, want - k,
					  (off_t)(b->off + k));

			if (r <= 0) {
				/* Mid-batch: only closing ends it cleanly. */
				conn_close(cl->conn, -EIO, "a body to send "
					   "cannot be read");
				return;
			}
			k += r;
		}
		d.flags = b->off + want == size ? LP_DATA_LAST : 0;
		d.more = !d.flags || next_store(b, i + 1) < b->n;
		if (lp_encode_data(conn_buf(cl->conn), b->tag, &d, chunk,
				   (uint32_t)want) || conn_send(cl->conn))
			return;	/* the connection goes: reply fails */
		b->off += want;
		raw += want;
		if (!d.flags)
			continue;
		close(b->fds[i]);
		b->fds[i] = -1;
		b->off = 0;
		b->cur = next_store(b, i + 1);
		b->sent_all = b->cur >= b->n;
	}
	if (b->sent_all && b->replied)
		batch_done(cl, b);
}

void reint_sent(struct client *cl)
{
	if (cl->batch && !cl->batch->sent_all)
		pump(cl, cl->batch);
}

/* ------------------------------------------------------------- answers */

static int64_t age_ms_of(const struct cml_stats *cs)
{
	return cs->records && cs->oldest_ns ?
	       wall_ms() - cs->oldest_ns / 1000000 : 0;
}

/* Objects gathered while a batch settles. */
struct fid_list {
	struct lento_fid *fid;
	size_t n, cap;
};

static int fid_list_add(struct fid_list *l, const struct lento_fid *f)
{
	struct lento_fid *p = array_grow(l->fid, &l->cap, l->n, 1,
					 sizeof(*p));

	if (!p)
		return -ENOMEM;
	l->fid = p;
	l->fid[l->n++] = *f;
	return 0;
}

/*
 * The new versions of the objects the batch changed, into the cache. One
 * that is not what the batch's records leave was changed at the server by
 * another client since (an answer read late: sent again after a crash or
 * a lost settlement, and skipped): its copy here is not that version, so
 * it is broken as by a BREAK -- never a version taken for content it is
 * not.
 */
static int take_versions(struct client *cl, const struct batch *b,
			 const struct lp_reint_reply *m,
			 struct fid_list *moved, struct fid_list *invalid)
{
	struct lp_list l = m->versions;
	struct lp_fidvv fv;
	int err = 0;

	while (!err && lp_next_fidvv(&l, &fv) == 1) {
		bool stale = false;
		size_t i = 0;
		int cached;

		if (b->pred) {
			i = pred_slot(b->pred, &fv.fid);
			stale = !lento_fid_is_null(&b->pred->fid[i]) &&
				!lento_vv_eq(&b->pred->vv[i], &fv.vv);
		}
		/*
		 * Its version, not its validity: one known stale stays so.
		 * Moved on by another: the version of what is here, which the
		 * validation will find old. Not cached: nothing to do.
		 */
		cached = cache_obj_set_vv(cl->cache, &fv.fid, stale ?
					  &b->pred->vv[i] : &fv.vv, stale);
		err = cached < 0 ? cached : 0;
		if (cached > 0 && stale)
			err = fid_list_add(moved, &fv.fid);
		else if (cached == 2)	/* for stale_when_clean() */
			err = fid_list_add(invalid, &fv.fid);
	}
	return err;
}

/* The version @f had before the batch: the first base it was sent with. */
static bool base_before(const struct batch *b, const struct lento_fid *f,
			struct lento_vv *vv)
{
	for (uint32_t i = 0; i < b->n; i++) {
		const struct lento_rec *r = &b->recs[i];
		const struct lento_fid *fid[4] = { &r->dir, &r->obj, &r->dir2,
						   &r->target };
		const struct lento_vv *base[4] = { &r->base_dir, &r->base_obj,
						   &r->base_dir2,
						   &r->base_target };

		for (int k = 0; k < 4; k++) {
			if (!lento_fid_eq(fid[k], f))
				continue;
			if (k == 1 && is_create(r->op))
				return false;	/* new: no version before */
			*vv = *base[k];
			return true;
		}
	}
	return false;
}

/*
 * Objects known stale here (not valid: broken while this client changed
 * them, or resolved "local" over a version never fetched) that the
 * batch left with nothing pending: the server's version holds what this
 * client's records changed and what it did not, which the copy here
 * lacks. Their version goes back to what it was before the batch, so
 * that no validation takes the copy for the new one, and they are broken
 * as moved ones are: listed and fetched again when next used. Taken after
 * unmark_acked(), so that "pending" is after the batch, among those
 * take_versions() found not valid (@invalid): rarely any.
 */
static int stale_when_clean(struct client *cl, const struct batch *b,
			    const struct fid_list *invalid,
			    struct fid_list *moved)
{
	struct lento_vv was;
	struct cache_obj o;
	int err = 0;

	for (size_t i = 0; !err && i < invalid->n; i++) {
		const struct lento_fid *f = &invalid->fid[i];

		if (cache_obj_get(cl->cache, f, &o, NULL, 0) || o.dirty ||
		    !base_before(b, f, &was))
			continue;	/* gone or pending */
		err = cache_obj_set_vv(cl->cache, f, &was, true);
		err = err < 0 ? err : fid_list_add(moved, f);
	}
	return err;
}

/* After the commit: the stale ones broken, here and in presto. */
static void break_moved(struct client *cl, uint32_t volume,
			const struct fid_list *moved)
{
	for (size_t i = 0; i < moved->n; i++) {
		log_info("volume %" PRIu32 ": " FIDFMT " at the server is not "
			 "the copy here: fetched again when next used", volume,
			 FIDARG(&moved->fid[i]));
		jobs_break_fid(cl, &moved->fid[i]);
		kclient_break_fid(cl, &moved->fid[i]);
	}
}

/*
 * What the server has is gone from the log; on a refusal, the rest waits.
 *
 * Committed lazily, its sync started at once: lost in a crash, the
 * records are still shipped after it, and go again with the same numbers
 * -- the server skips what it has and answers with the versions again, as
 * after a crash before the answer was read (the resend case of
 * tests/lento/run). Nothing outside the cache acts on it first: the next
 * batch waits for a later commit's sync (the WAL keeps their order), and
 * the resend takes its bodies again (Bodies above), which the server
 * skips.
 */
static int settle(struct client *cl, struct batch *b, struct vol *v,
		  const struct lp_reint_reply *m)
{
	struct cml *cml = cache_cml(cl->cache);
	struct fid_list moved = { 0 }, invalid = { 0 };
	uint64_t upto = 0;
	int err = cache_begin(cl->cache);

	err = err ?: cache_ship_recno_upto(cl->cache, b->volume, m->applied,
					   &upto);
	if (!err && upto) {
		int k = cml_ack(cml, b->volume, upto);

		err = k < 0 ? k : 0;
	}
	err = err ?: cache_ship_drop(cl->cache, b->volume, m->applied);
	if (!err && m->code == LP_OK && v->validated)
		v->cv.stamp = m->stamp;
	if (m->applied > v->cv.applied)
		v->cv.applied = m->applied;
	err = err ?: take_versions(cl, b, m, &moved, &invalid);
	if (!err && m->code != LP_OK) {
		/* Not applied: pending again, numbered afresh next time. */
		err = cml_requeue(cml, b->volume);
		err = err ?: cache_ship_drop(cl->cache, b->volume, UINT64_MAX);
		/* May be optimised further, now that it is pending. */
		v->log_changed = true;
	}
	err = err ?: unmark_acked(cl, b, m->applied);
	err = err ?: stale_when_clean(cl, b, &invalid, &moved);
	free(invalid.fid);
	err = err ?: cache_vol_put(cl->cache, &v->cv);
	err = err ?: cache_commit_lazy(cl->cache);
	if (err) {
		cache_rollback(cl->cache);
		free(moved.fid);
		return err;
	}
	break_moved(cl, b->volume, &moved);
	free(moved.fid);
	client_sync_want(cl);
	return 0;
}

static void note_result(struct vol *v, const struct batch *b,
			const struct lp_reint_reply *m, uint64_t applied_before)
{
	struct reint_result *res = &v->last;

	memset(res, 0, sizeof(*res));
	res->when_ms = wall_ms();
	res->code = m->code;
	res->records = m->applied > applied_before ?
		       m->applied - applied_before : 0;
	snprintf(res->msg, sizeof(res->msg), "%.*s", (int)m->msg_len, m->msg);
	v->rounds++;
	v->shipped += res->records;
	if (m->code == LP_OK)
		return;
	v->stuck = true;
	if (m->index < b->n) {
		res->recno = b->recnos[m->index];
		res->op = b->recs[m->index].op;
	}
	res->fid = m->fid;
	res->base = m->base;
	res->current = m->current;
	log_warn("volume %s: the server refused a batch (%s): %s; the "
		 "changes stay here until a person resolves them", v->cv.name,
		 lp_err_name(m->code), res->msg);
}

static int answer(struct client *cl, struct batch *b,
		  const struct lp_frame *f, const char **why)
{
	struct vol *v = vol_by_id(cl, b->volume);
	struct lp_reint_reply m;
	struct cml_stats cs;
	uint64_t before;
	int err;

	if (lp_decode_reintegrate_reply(f, &m, why))
		return -EBADMSG;
	if (cl->crash_after_send) {
		log_warn("LENTO_TEST_CRASH_AFTER_SEND: answered, dying before "
			 "the answer is recorded");
		kill(getpid(), SIGKILL);
	}
	if (!v)
		return 0;
	before = v->cv.applied;
	err = settle(cl, b, v, &m);
	if (err) {
		/* The records stay shipped: the same batch goes again. */
		log_err("volume %s: recording the server's answer: %s",
			v->cv.name, strerror(-err));
		v->retry_at_ms = lo_now_ms() + REINT_RETRY_MS;
		return 0;
	}
	note_result(v, b, &m, before);
	v->backoff_ms = 0;
	v->moved_on = 0;
	if (!cml_stats(cache_cml(cl->cache), v->cv.id, &cs) && !cs.records)
		v->force = false;	/* done: later changes age as usual */
	if (m.code == LP_OK)
		log_info("volume %s: %" PRIu64 " records reintegrated (up to "
			 "%" PRIu64 ")", v->cv.name, v->last.records,
			 m.applied);
	return 0;
}

/* An ERROR instead of an answer: nothing of this request was applied. */
static int refused(struct client *cl, struct batch *b,
		   const struct lp_frame *f, const char **why)
{
	struct vol *v = vol_by_id(cl, b->volume);
	struct lp_error e;

	if (lp_decode_error(f, &e, why))
		return -EBADMSG;
	if (!v)
		return 0;
	v->last.when_ms = wall_ms();
	v->last.code = e.code;
	v->last.records = 0;
	snprintf(v->last.msg, sizeof(v->last.msg), "%.*s", (int)e.msg_len,
		 e.msg);
	if (e.code == LP_ENOPERMIT) {
		permit_lost(cl, v, "the server says this client does not "
			    "hold it");
		return 0;
	}
	/* Each time it says no, it is asked half as often. */
	v->backoff_ms = v->backoff_ms ? 2 * v->backoff_ms : REINT_RETRY_MS;
	if (v->backoff_ms > REINT_BACKOFF_MAX_MS)
		v->backoff_ms = REINT_BACKOFF_MAX_MS;
	log_warn("volume %s: batch not taken (%s): %s; sent again in %" PRIu32
		 " s", v->cv.name, lp_err_name(e.code), v->last.msg,
		 v->backoff_ms / 1000);
	v->retry_at_ms = lo_now_ms() + v->backoff_ms;
	return 0;
}

static int reint_reply(void *arg, const struct lp_frame *f, int err,
		       const char **why)
{
	struct batch *b = arg;
	struct client *cl = b->cl;
	int rc = 0;

	b->replied = true;
	if (err)		/* the connection went: it goes again later */
		b->dead = true;
	else if (f->type == LP_REINTEGRATE_REPLY)
		rc = answer(cl, b, f, why);
	else if (f->type == LP_ERROR)
		rc = refused(cl, b, f, why);
	else
		return *why = "a REINTEGRATE answered by something else",
		       -EBADMSG;
	/* The message is finished first if bodies are still to go. */
	if (b->sent_all || b->dead)
		batch_done(cl, b);
	return rc;
}

static void batch_done(struct client *cl, struct batch *b)
{
	if (cl->batch == b)
		cl->batch = NULL;
	batch_free(b);
	op_wake_reint(cl);
	reint_kick(cl);
}

void reint_conn_down(struct client *cl)
{
	/* The request failed (its reply fn ran) unless it was forgotten. */
	if (cl->batch) {
		batch_free(cl->batch);
		cl->batch = NULL;
	}
}

/* ----------------------------------------------------------- batches */

/* Once per change of the log, not per batch: it reads it all. */
int reint_optimise(struct client *cl, struct vol *v, struct cml_opt_stats *os)
{
	int err;

	memset(os, 0, sizeof(*os));
	if (!v->log_changed)
		return 0;
	err = cml_optimise(cache_cml(cl->cache), v->cv.id, os, recount,
			   cl->cache);
	if (err)
		return err;
	v->log_changed = false;
	if (os->before != os->after)
		log_info("volume %s: the optimiser made %" PRIu64 " records "
			 "of %" PRIu64, v->cv.name, os->after, os->before);
	return 0;
}

/* The records to send: those sent before, or a new optimised batch. */
static int batch_fill(struct client *cl, struct batch *b, struct vol *v)
{
	struct cml *cml = cache_cml(cl->cache);
	struct cml_opt_stats os;
	int err = cache_ship_count(cl->cache, v->cv.id), n;

	if (err > 0) {
		n = cml_list(cml, v->cv.id, take_shipped, b);
		return n < 0 ? n : 0;
	}
	if (err < 0)
		return err;
	err = reint_optimise(cl, v, &os);
	if (err)
		return err;
	b->first = v->cv.applied + 1;
	err = cache_begin(cl->cache);
	if (err)
		return err;
	n = cml_batch(cml, v->cv.id, cl->batch_records, BATCH_BYTES_MAX,
		      take_new, b);
	err = n < 0 ? n : 0;
	/* Objects the rewrite left unnamed and clean are forgotten. */
	if (!err && optimised(&os))
		err = cache_purge(cl->cache, v->cv.id);
	err = err ?: cache_commit_lazy(cl->cache);
	if (err)
		cache_rollback(cl->cache);
	return err;
}

static int batch_send(struct client *cl, struct batch *b)
{
	struct lp_reint m = { .volume = b->volume, .client = cl->client_id,
			      .first = b->first };
	struct conn *c = cl->conn;
	bool cut;
	int k;

	b->tag = conn_tag(c);
	k = lp_encode_reintegrate(conn_buf(c), b->tag, &m, b->recs, b->n);
	if (k < 0) {
		log_err("volume %" PRIu32 ": cannot encode a batch: %s (%s)",
			b->volume, strerror(-k), conn_buf(c)->why ?
			conn_buf(c)->why : "?");
		conn_buf(c)->len = 0;
		return k;
	}
	/* The rest stays shipped: it goes next, with the same numbers. */
	cut = b->n > (uint32_t)k;
	while (b->n > (uint32_t)k) {
		b->n--;
		free(b->data[b->n]);
		if (b->fds[b->n] >= 0)
			close(b->fds[b->n]);
	}
	if (cut)
		pred_remake(b);
	b->cur = next_store(b, 0);
	b->sent_all = b->cur >= b->n;
	return conn_request(c, b->tag, LP_REINTEGRATE, reint_reply, b);
}

static void batch_start(struct client *cl, struct vol *v)
{
	struct batch *b = calloc(1, sizeof(*b));
	int err;

	if (!b)
		return;
	b->cl = cl;
	b->volume = v->cv.id;
	err = batch_fill(cl, b, v);
	err = err ?: b->n ? wire_bases(b) : 0;
	if (err) {
		log_err("volume %s: cannot make a batch: %s", v->cv.name,
			strerror(-err));
		v->retry_at_ms = lo_now_ms() + REINT_RETRY_MS;
	}
	if (!err && !b->n)
		v->force = false;	/* done: later changes age as usual */
	if (err || !b->n) {
		batch_free(b);
		/* Optimised to nothing: syncs may be over. */
		op_wake_reint(cl);
		return;
	}
	log_debug("volume %s: batch of %" PRIu32 " records (%" PRIu64
		  "..%" PRIu64 ")", v->cv.name, b->n, b->first,
		  b->first + b->n - 1);
	/*
	 * What the server takes must survive a crash here: the records and
	 * their numbers (a batch sent again is the same one) and the fids.
	 * The bodies are taken again (Bodies above).
	 */
	b->gen = cache_gen(cl->cache);
	b->waiting = true;
	cl->batch = b;
	b->err = shadows_start(cl, b, v);
	reint_durable(cl);
}

void reint_durable(struct client *cl)
{
	struct batch *b = cl->batch;
	struct vol *v;
	int err;

	/* No connection (lento stopping): the batch goes with it. */
	if (!b || !b->waiting || !cl->conn)
		return;
	err = b->err ?: cache_sync_error(cl->cache);
	/* The database's sync runs while the shadows are made. */
	if (!err && cache_durable_gen(cl->cache) < b->gen) {
		client_sync_want(cl);
		return;
	}
	if (!err && b->job)
		return;		/* shadow_done() comes back */
	b->waiting = false;
	err = err ?: batch_send(cl, b);
	v = vol_by_id(cl, b->volume);
	if (v)
		v->local_err = err == -ESTALE ? 0 : err;
	if (!err) {
		pump(cl, b);
		return;
	}
	if (err == -ESTALE && v) {
		/* Made again once the CML has caught up with the cache. */
		v->moved_on++;
		v->catching_up = true;
		kclient_catch_up(cl, v);
	} else {
		log_err("volume %" PRIu32 ": cannot send a batch: %s",
			b->volume, strerror(-err));
		if (v) {
			v->retry_at_ms = lo_now_ms() + REINT_RETRY_MS;
			v->local_err_ms = wall_ms();
		}
	}
	cl->batch = NULL;
	batch_free(b);
	op_wake_reint(cl);
}

/*
 * Whether @v's oldest record has aged enough to go. Not while lento is
 * behind its fileset's journal (a burst of changes, a backlog a crash
 * left, a fileset not mounted yet): what follows there may cancel the
 * record -- the UNLINK of a file just made -- and the optimiser has not
 * seen that yet. Behind for twice the window, it goes regardless, so a
 * journal never caught up still trickles. (Measured from when lento fell
 * behind, not from the records' times: after a crash they are all old.)
 */
static bool aged(struct client *cl, struct vol *v, const struct cml_stats *cs)
{
	struct fset *fs;
	uint64_t behind;

	if (age_ms_of(cs) < (int64_t)cl->age_ms)
		return false;
	fs = fset_by_volume(cl, v->cv.name);
	behind = fs ? kml_behind_ms(fs) : 0;
	return !behind || behind >= 2 * (uint64_t)cl->age_ms;
}

/* Whether @v's records should go now. */
static bool due(struct client *cl, struct vol *v, const struct cml_stats *cs)
{
	return v->force || v->revoked || cs->shipped || cl->full_of_dirty ||
	       aged(cl, v, cs);
}

static void release(struct client *cl, struct vol *v)
{
	if (!v->permit && !v->acquiring && !v->releasing) {
		/*
		 * Asked back after its lease ran out here: the server has
		 * let it go too, and nothing must wait for a release that
		 * will never be sent.
		 */
		v->revoked = false;
		op_wake_volume(cl, v->cv.id);
		return;
	}
	if (v->permit && !v->releasing && !v->acquiring)
		job_start(cl, J_RELEASE, v->cv.id, NULL, NULL, NULL);
}

/*
 * One volume's turn: ship, acquire, release, or nothing; @waits is set
 * when records are left to ship (aging, or waiting on something).
 */
static bool kick_volume(struct client *cl, struct vol *v, uint64_t now,
			bool *waits)
{
	struct cml_stats cs;

	*waits = true;
	/* Revoked: presto's changes into the CML first, then shipped. */
	if (v->revoked && !kclient_permit_drained(cl, v))
		return false;
	if (cml_stats(cache_cml(cl->cache), v->cv.id, &cs))
		return false;
	if (!cs.records || v->stuck) {
		*waits = false;
		if (!cs.records)
			v->force = false;
		if (v->revoked)
			release(cl, v);
		return false;
	}
	if (now < v->retry_at_ms || !due(cl, v, &cs))
		return false;
	if (v->catching_up && !kclient_caught_up(cl, v))
		return false;
	v->catching_up = false;
	if (!v->permit || now >= v->expires_ms) {
		if (!v->acquiring && !v->releasing)
			job_start(cl, J_ACQUIRE, v->cv.id, NULL, NULL, NULL);
		return false;
	}
	batch_start(cl, v);
	return cl->batch != NULL;
}

void reint_kick(struct client *cl)
{
	uint64_t now = lo_now_ms();

	if (cl->kicking) {	/* from a wake inside: once more after */
		cl->kick_again = true;
		return;
	}
	cl->kicking = true;
	do {
		bool waits = false;

		cl->kick_again = false;
		cl->reint_waits = false;
		if (!connected(cl) || cl->batch)
			break;
		for (struct vol *v = cl->vols; v; v = v->next) {
			bool w;

			if (kick_volume(cl, v, now, &w))
				break;
			waits |= w;
		}
		cl->reint_waits = waits;
	} while (cl->kick_again && !cl->batch);
	cl->kicking = false;
}

/* ------------------------------------------------------------ commands */

static int pick_volumes(struct ctl_req *r, struct client *cl, int argc,
			char **argv, struct vol **only)
{
	*only = NULL;
	if (!argc)
		return 0;
	*only = vol_by_name(cl, argv[0]);
	if (*only)
		return 0;
	ctl_error(r, "%s: no such volume in this cache", argv[0]);
	return -ENOENT;
}

int cmd_reintegrate(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	struct client *cl = ctx;
	struct vol *only, *v;
	int err = pick_volumes(r, cl, argc, argv, &only);

	if (err)
		return err;
	for (v = cl->vols; v; v = v->next) {
		if (only && v != only)
			continue;
		/* A person says: try what was refused again. */
		v->stuck = false;
		v->force = true;
		v->retry_at_ms = 0;
		if (!ctl_json(r))
			jw_printf(ctl_out(r), "volume %s: reintegrating\n",
				  v->cv.name);
	}
	if (ctl_json(r))
		jw_raw(ctl_out(r), "{}\n", 3);
	reint_kick(cl);
	return 0;
}

/* Errno for a volume that cannot finish: what its last answer said. */
static int stuck_err(const struct vol *v)
{
	if (v->last.code == LP_ECONFLICT)
		return -ESTALE;
	return v->last.code ? -lp_err_to_errno(v->last.code) : -EAGAIN;
}

/* One volume of a sync: 0 done, 1 still going, -errno cannot finish. */
static int sync_volume(struct op *op, struct vol *v)
{
	struct client *cl = op->cl;
	struct cml_stats cs;
	int err = cml_stats(cache_cml(cl->cache), v->cv.id, &cs);

	if (err) {
		ctl_error(op->r, "volume %s: %s", v->cv.name, strerror(-err));
		return err;
	}
	if (!cs.records)
		return 0;
	err = cache_sync_error(cl->cache);
	if (err) {
		ctl_error(op->r, "volume %s: %" PRIu64 " records not "
			  "reintegrated: the cache's database cannot be made "
			  "durable (%s); restart lento", v->cv.name,
			  cs.records, strerror(-err));
		return err;
	}
	if (v->catching_up && !kclient_journal_live(cl, v)) {
		ctl_error(op->r, "volume %s: %" PRIu64 " records not "
			  "reintegrated: the body of a STORE moved on in the "
			  "cache, and presto's journal, which says where, "
			  "cannot be read until its fileset is mounted",
			  v->cv.name, cs.records);
		return -EAGAIN;
	}
	if (v->stuck) {
		ctl_error(op->r, "volume %s: %" PRIu64 " records not "
			  "reintegrated: %s: %s", v->cv.name, cs.records,
			  v->last.code == LP_ECONFLICT ? "conflict" :
			  lp_err_name(v->last.code), v->last.msg);
		return stuck_err(v);
	}
	/*
	 * Refused since this sync began (the server's disk is full...):
	 * said, not waited out. lento goes on sending it.
	 */
	if (v->last.code && v->last.code != LP_ENOPERMIT &&
	    v->last.when_ms >= op->started_ms) {
		ctl_error(op->r, "volume %s: %" PRIu64 " records not "
			  "reintegrated: the server refused them (%s: %s); "
			  "lento sends them again in %" PRIu32 " s",
			  v->cv.name, cs.records, lp_err_name(v->last.code),
			  v->last.msg, v->backoff_ms / 1000);
		return -lp_err_to_errno(v->last.code);
	}
	/*
	 * A connection that went is made again at once (conn.h): the sync
	 * waits for that attempt, and a batch it cut short goes again. Only
	 * a server that cannot be reached -- an attempt failed -- ends it.
	 */
	if (!connected(cl) && conn_failing(cl->conn)) {
		ctl_error(op->r, "volume %s: %" PRIu64 " records not "
			  "reintegrated: disconnected from %s (%s)", v->cv.name,
			  cs.records, conn_addr(cl->conn),
			  conn_last_error(cl->conn));
		return -ENOTCONN;
	}
	/* Failed here since this sync began (no descriptor, no memory). */
	if (v->local_err && v->local_err_ms >= op->started_ms) {
		ctl_error(op->r, "volume %s: %" PRIu64 " records not "
			  "reintegrated: a batch could not be made and sent "
			  "(%s); lento tries again in %d s", v->cv.name,
			  cs.records, strerror(-v->local_err),
			  REINT_RETRY_MS / 1000);
		return v->local_err;
	}
	/* Refused before it: this sync tries again now, not after a wait. */
	if (v->last.code && v->last.when_ms < op->started_ms)
		v->retry_at_ms = 0;
	v->force = true;
	return 1;
}

/* Every volume asked: 0 all done, 1 some still going, -errno. */
static int sync_scan(struct op *op, struct vol *only)
{
	bool going = false;

	for (struct vol *v = op->cl->vols; v; v = v->next) {
		int rc;

		if (only && v != only)
			continue;
		rc = sync_volume(op, v);
		if (rc < 0)
			return rc;
		going |= rc == 1;
	}
	return going;
}

static int sync_step(struct op *op)
{
	struct client *cl = op->cl;
	struct vol *only = NULL;
	int rc;

	if (op->argc && !(only = vol_by_name(cl, op->argv[0]))) {
		ctl_error(op->r, "%s: no such volume in this cache",
			  op->argv[0]);
		return -ENOENT;
	}
	/* What presto journaled so far goes too. */
	rc = kclient_sync(op);
	if (rc)
		return rc;
	rc = sync_scan(op, only);
	/*
	 * The kick may finish at once (optimised to nothing) and wake no
	 * one: this op is not parked yet. So look again after it.
	 */
	if (rc == 1) {
		reint_kick(cl);
		rc = sync_scan(op, only);
	}
	if (rc == 1) {
		op->wait_reint = true;
		return OP_WAIT;
	}
	if (!rc && ctl_json(op->r))
		jw_raw(ctl_out(op->r), "{}\n", 3);
	return rc;
}

int cmd_sync(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	return op_start(ctx, r, argc, argv, sync_step);
}
