// SPDX-License-Identifier: MIT
/*
 * lento's server (server.h).
 *
 * One thread, one event loop (loop.h): every client connection is a
 * session, which parses frames (lproto.h) and answers from the store
 * (store.h). The state that is not in the store lives here and dies with
 * the process, as the protocol says (a new epoch tells the clients):
 *
 *  - callbacks: per session, the fids it was promised (fidset.h) and the
 *    volumes it validated whole. A change through another client breaks
 *    them (BREAK, BREAK_VOLUME pushes); a session that goes loses them.
 *  - permits: per volume, the client holding the write-back permit and
 *    its lease. A grant breaks the volume's callbacks at every other
 *    session. A request for a volume whose permit another client holds --
 *    an ACQUIRE, or a read, which must see the holder's changes -- waits
 *    (deferred) while the holder is asked to give it back (PERMIT_REVOKE):
 *    it reintegrates and releases, or its lease runs out, renewed for a
 *    lease after the asking at most. A deferred request that waits
 *    longer than two leases gets ETIMEDOUT.
 *  - reintegration: a REINTEGRATE's records, then the bodies of its
 *    STOREs in DATA frames, written to temporary files in the store; then
 *    one store_reintegrate() (one SQLite transaction) and the answer.
 *
 * The store is used synchronously from the loop: a batch's transaction
 * holds up the other sessions while it commits. The file work that may
 * take seconds is done on the worker first: bodies' writeback, and the
 * copies size changes make (resizes_start()).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "array.h"
#include "ctl.h"
#include "fault.h"
#include "fidset.h"
#include "log.h"
#include "loop.h"
#include "lproto.h"
#include "server.h"
#include "store.h"
#include "vv.h"
#include "worker.h"

#define TICK_MS			200
#define STALL_MS		500	/* ticks this far apart: we stood still */
#define FETCH_QUEUE_LOW		(4u << 20)	/* queue more DATA below this */
/* FETCHes a session may have unanswered: past it, it does not read. */
#define FETCH_QUEUED_MAX	65536u
/*
 * Bytes of a session's requests that may wait for permits at once: a
 * client reading while another writes has a few small requests and a
 * VALIDATE or two waiting (at most 7.6 MB each); past this it floods.
 */
#define DEFERRED_MAX		(64u << 20)
#define DEFAULT_PORT_V4		"127.0.0.1:4770"
#define DEFAULT_PORT_V6		"[::1]:4770"

struct session;

/* A request waiting for a volume's permit to come free. */
struct deferred {
	struct deferred *next;
	struct session *s;
	uint16_t type;
	uint32_t tag;
	uint32_t len;
	uint64_t deadline_ms;
	uint8_t body[];
};

struct permit {
	struct permit *next;
	uint32_t volume;
	uint32_t holder;		/* client id; 0: free */
	uint64_t expires_ms;
	bool revoked;			/* PERMIT_REVOKE sent to this holder */
	uint64_t revoke_end_ms;		/* and renewals end here (revoked) */
	struct deferred *head, **tail;
};

/*
 * A FETCH queued on its session. Its body is opened (and its callback
 * promised) when it comes to the head of the queue, so a client that
 * asks for many and reads none holds one descriptor, not one each.
 */
struct fetch_out {
	struct fetch_out *next;
	uint32_t tag;
	struct lp_fetch req;
	int fd;
	uint64_t off, size;
	struct lp_fetch_reply reply;
	bool opened, started;
};

/*
 * A READDIR queued on its session. When its turn comes its listing is
 * made whole, in one turn of the loop (one snapshot, its callbacks
 * promised with it), into a spool file; its frames then go out as the
 * output drains. Memory holds one frame of it at a time, whatever the
 * directory's size.
 */
struct list_out {
	struct list_out *next;
	uint32_t tag;
	struct lento_fid fid;
	int fd;				/* the spool; -1 until made */
	uint64_t off, size;
};

/* Bodies whose writes one job waits for (bodies_wait). */
#define BODY_WAIT_MAX	64
/* Descriptors bodies may hold however low the process's limit. */
#define BODY_FDS_MIN	8

/* A REINTEGRATE whose bodies are arriving. */
struct reint_in {
	uint32_t tag, volume;
	struct lento_rec *recs;
	uint32_t n;
	uint8_t **data;			/* records' data, owned */
	struct store_body *bodies;	/* indexed like recs */
	char (*paths)[256];		/* temporary files of the bodies */
	uint32_t cur;			/* the STORE whose body comes */
	int fd;				/* its temporary file, or -1 */
	struct lp_stream stream;
	void *chunk;			/* LP_CHUNK_MAX bytes */
	struct session *s;
	int whole[BODY_WAIT_MAX];	/* bodies that came, not waited for */
	uint32_t nwhole;
	struct body_wait *waiting;	/* jobs waiting for bodies' writes */
	int sync_err;			/* the first that failed */
	bool complete;			/* every body came: applied once synced */
	/* Size changes' copies, made on the worker before the apply. */
	struct store_resize *rz;
	uint32_t nrz;
	bool planned;			/* rz made (or none needed) */
	struct resize_job *rjob;	/* their job, running */
};

struct session {
	struct server *srv;
	struct session *prev, *next;
	struct lo_conn *conn;
	bool ready;			/* HELLO done */
	bool closing;			/* sess_close() was called */
	bool discard;			/* dropping DATA of a refused batch */
	uint32_t client;
	uint8_t uuid[16];
	uint64_t heard_ms, since_ms;
	struct fidset cbs;
	uint32_t *vols;			/* volume callbacks */
	size_t nvols, capvols;
	struct fetch_out *fetch, **fetch_tail;
	unsigned int nfetch;		/* FETCHes queued */
	struct list_out *lists, **lists_tail;
	unsigned int nlists;		/* READDIRs queued */
	/*
	 * What was made to go out while a listing is on its way (its spool
	 * made, frames left): sent when it ends (sess_flush()).
	 */
	struct lp_buf behind;
	size_t deferred;		/* bytes of its requests in permits' queues */
	struct reint_in *ri;
	/*
	 * A REINTEGRATE sent once @ri had all come, while the server still
	 * works on it (its bodies' writeback, its copies): taken when @ri is
	 * answered. Frames of a batch after it wait unread (held).
	 */
	struct lp_frame ri_next;
	uint8_t *ri_next_body;		/* ri_next's, owned; NULL: none */
	bool held;			/* input held behind ri_next */
	uint64_t requests;
};

struct server {
	const struct server_opts *opt;
	struct lo_loop *loop;
	struct store *st;
	uint64_t epoch;
	uint32_t lease_ms, heartbeat_ms, gone_ms;
	uint64_t ticked_ms;		/* the last tick */
	struct session *sessions;
	struct permit *permits;
	struct lp_buf out;		/* the frames being made */
	uint8_t *frame;			/* a spooled frame on its way out */
	size_t frame_cap;
	size_t out_max;			/* LENTO_TEST_OUT_MAX; 0: loop's */
	void *zd;			/* DATA's ZSTD_DCtx (lp_zd_free) */
	struct worker *wk;		/* bodies' syncs off the loop */
	/* Descriptors of whole bodies held for their writeback, and how
	 * many may be (half of what the process may have open). */
	unsigned int body_fds, body_fds_max;
	/* Sessions past their handshake, and how many may be. */
	unsigned int clients, clients_max;
	/*
	 * Sessions before it, and how many may be: as many as clients (a
	 * burst of reconnections), SERVER_GREETING_MIN at least. Each is
	 * closed if its HELLO has not come within gone_ms, whatever bytes
	 * trickle in: they count toward no client, and hold a descriptor.
	 */
	unsigned int greeting, greeting_max;
	/* Identities the store may register (new clients), in all. */
	unsigned int identities_max;
	size_t dir_max;			/* LP_DIR_MAX; LENTO_TEST_DIR_MAX */
	bool stopping;
	bool test_body_enospc;		/* LENTO_TEST_BODY_ENOSPC */
	struct ctl_server ctl;
	char listening[SERVER_LISTEN_MAX][120];
	int nlistening;
	int stop_signal;
	bool broken;			/* stopped for the store's sake */
};

static void sess_close(struct session *s, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ------------------------------------------------------------ sending */

/* srv->out sent now, never held: a FETCH's DATA (its reply went first). */
static void sess_flush_data(struct session *s)
{
	struct lp_buf *b = &s->srv->out;
	int err;

	if (!b->len)
		return;
	err = lo_conn_send(s->conn, b->p, b->len);
	b->len = 0;
	if (err == -ENOBUFS)
		sess_close(s, err, "it does not read what it is sent");
}

/*
 * Is a listing of @s on its way: made (its snapshot taken, its callbacks
 * promised), some of its frames still in its spool?
 */
static bool sess_listing(const struct session *s)
{
	return s->lists && s->lists->fd >= 0;
}

/* Bytes held behind a listing at most: past them, the peer is not reading. */
#define BEHIND_MAX	(64u << 20)

/*
 * Send what srv->out holds to @s; a peer that does not read is closed.
 * Behind a listing on its way, it waits for the listing's end: a BREAK or
 * an answer made after the listing's snapshot must not overtake an older
 * status in one of its frames still to go.
 */
static void sess_flush(struct session *s)
{
	struct lp_buf *b = &s->srv->out;

	if (!b->len)
		return;
	if (sess_listing(s)) {
		uint8_t *p = s->behind.p;

		if (s->behind.len + b->len > BEHIND_MAX) {
			b->len = 0;
			sess_close(s, -ENOBUFS, "it does not read what it is "
				   "sent");
			return;
		}
		if (s->behind.len + b->len > s->behind.cap) {
			size_t cap = 2 * (s->behind.len + b->len);

			p = realloc(s->behind.p, cap);
			if (!p) {
				b->len = 0;
				sess_close(s, -ENOMEM, "out of memory for "
					   "what waits behind a listing");
				return;
			}
			s->behind.p = p;
			s->behind.cap = cap;
		}
		memcpy(p + s->behind.len, b->p, b->len);
		s->behind.len += b->len;
		b->len = 0;
		return;
	}
	sess_flush_data(s);
}

/* The same, ahead of the bulk output queued (whole frames: a PONG). */
static void sess_flush_first(struct session *s)
{
	struct lp_buf *b = &s->srv->out;
	int err;

	if (!b->len)
		return;
	err = lo_conn_send_first(s->conn, b->p, b->len);
	b->len = 0;
	if (err == -ENOBUFS)
		sess_close(s, err, "it does not read what it is sent");
}

static void sess_error(struct session *s, uint32_t tag, int err,
		       const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void sess_error(struct session *s, uint32_t tag, int err,
		       const char *fmt, ...)
{
	char msg[LP_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!lp_encode_error(&s->srv->out, tag, lp_err_from_errno(err), msg))
		sess_flush(s);
}

/*
 * A push that cannot be encoded (no memory) is a BREAK the client never
 * hears: its session goes, and with it every promise; the client
 * validates what it caches when it is back.
 */
static void sess_push_fid(struct session *s, unsigned int type,
			  const struct lento_fid *fid)
{
	if (!lp_encode_fid(&s->srv->out, type, 0, fid))
		sess_flush(s);
	else
		sess_close(s, -ENOMEM, "out of memory for a callback break");
}

static void sess_push_volume(struct session *s, unsigned int type,
			     uint32_t volume)
{
	if (!lp_encode_volume(&s->srv->out, type, 0, volume))
		sess_flush(s);
	else
		sess_close(s, -ENOMEM, "out of memory for a callback break");
}

/* ---------------------------------------------------------- callbacks */

static bool sess_has_volume(const struct session *s, uint32_t volume)
{
	size_t i;

	for (i = 0; i < s->nvols; i++)
		if (s->vols[i] == volume)
			return true;
	return false;
}

/*
 * A promise to @s of every callback of @volume (a VALID answer). As in
 * sess_promise(), one that cannot be recorded must not be made: the
 * session goes before the answer (the client, told VALID, would serve
 * its cache of the volume and hear of no change).
 */
static void sess_add_volume(struct session *s, uint32_t volume)
{
	uint32_t *v;

	if (sess_has_volume(s, volume))
		return;
	if (s->nvols == s->capvols) {
		size_t cap = s->capvols ? s->capvols * 2 : 4;

		v = fault_at("server-volume-promise") ? NULL :
		    realloc(s->vols, cap * sizeof(*v));
		if (!v) {
			sess_close(s, -ENOMEM, "out of memory for its volume "
				   "callbacks");
			return;
		}
		s->vols = v;
		s->capvols = cap;
	}
	s->vols[s->nvols++] = volume;
}

static bool sess_drop_volume(struct session *s, uint32_t volume)
{
	size_t i;

	for (i = 0; i < s->nvols; i++)
		if (s->vols[i] == volume) {
			s->vols[i] = s->vols[--s->nvols];
			return true;
		}
	return false;
}

/*
 * A promise to @s: @fid does not change without a BREAK first. One that
 * cannot be recorded must not be made: the session goes before the answer
 * that would make it, and the client validates when it is back (or sends
 * its batch again, which the store skips and answers anew).
 */
static void sess_promise(struct session *s, const struct lento_fid *fid)
{
	if (fault_at("server-promise") || fidset_add(&s->cbs, fid) < 0)
		sess_close(s, -ENOMEM, "out of memory for its callbacks");
}

/* Every callback of @volume at sessions of other clients than @client. */
static void break_volume(struct server *srv, uint32_t volume,
			 uint32_t client)
{
	struct session *t;

	for (t = srv->sessions; t; t = t->next) {
		bool had;

		if (!t->ready || t->client == client)
			continue;
		had = sess_drop_volume(t, volume);
		had |= fidset_del_volume(&t->cbs, volume) > 0;
		if (had)
			sess_push_volume(t, LP_BREAK_VOLUME, volume);
	}
}

/* @fid changes through @client: break the others' callbacks on it. */
static void break_fid(struct server *srv, const struct lento_fid *fid,
		      uint32_t client)
{
	struct session *t;

	for (t = srv->sessions; t; t = t->next) {
		if (!t->ready || t->client == client)
			continue;
		if (fidset_del(&t->cbs, fid))
			sess_push_fid(t, LP_BREAK, fid);
	}
}

/* ------------------------------------------------------------ permits */

static struct permit *permit_get(struct server *srv, uint32_t volume,
				 bool create)
{
	struct permit *p;

	for (p = srv->permits; p; p = p->next)
		if (p->volume == volume)
			return p;
	if (!create)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->volume = volume;
	p->tail = &p->head;
	p->next = srv->permits;
	srv->permits = p;
	return p;
}

/*
 * The session of @client that a push can reach. A closing one is still
 * listed until the loop frees it, and sends nothing: a client that has
 * reconnected meanwhile is reached on its new session (a push to the
 * closing one would be lost), one that has not is not connected.
 */
static struct session *session_of(struct server *srv, uint32_t client)
{
	struct session *s;

	for (s = srv->sessions; s; s = s->next)
		if (s->ready && !s->closing && s->client == client)
			return s;
	return NULL;
}

/* The permit of @volume if a client other than @client holds it. */
static struct permit *held_by_other(struct server *srv, uint32_t volume,
				    uint32_t client)
{
	struct permit *p = permit_get(srv, volume, false);

	if (!p || !p->holder || p->holder == client)
		return NULL;
	return p;
}

/*
 * A lease given or renewed now ends here: later than the holder counts
 * it (from when it asked, less the slack), whatever each clock's lag.
 */
static uint64_t lease_expiry(const struct server *srv)
{
	return lo_now_ms() + srv->lease_ms + lo_clock_slack_ms();
}

/* Ask the holder to give the permit back, once. */
static void permit_revoke(struct server *srv, struct permit *p)
{
	struct session *h;

	if (p->revoked)
		return;
	p->revoked = true;
	p->revoke_end_ms = lease_expiry(srv);
	h = session_of(srv, p->holder);
	log_info("volume %" PRIu32 ": asking client %" PRIu32
		 " to give its permit back%s", p->volume, p->holder,
		 h ? "" : " (not connected: its lease must run out)");
	if (h)
		sess_push_volume(h, LP_PERMIT_REVOKE, p->volume);
}

/* Keep the request in @f until @p is free (or answer why not). */
static void defer(struct session *s, struct permit *p,
		  const struct lp_frame *f)
{
	struct deferred *d;

	if (s->deferred + f->len > DEFERRED_MAX) {
		sess_close(s, -ENOBUFS, "%zu bytes of its requests wait for "
			   "permits already", s->deferred);
		return;
	}
	d = malloc(sizeof(*d) + f->len);
	if (!d) {
		sess_error(s, f->tag, -ENOMEM, "out of memory");
		return;
	}
	s->deferred += f->len;
	d->next = NULL;
	d->s = s;
	d->type = f->type;
	d->tag = f->tag;
	d->len = f->len;
	d->deadline_ms = lo_now_ms() + 2ull * s->srv->lease_ms;
	memcpy(d->body, f->body, f->len);
	*p->tail = d;
	p->tail = &d->next;
	permit_revoke(s->srv, p);
}

/* @d leaves its permit's queue (its session is still there). */
static void deferred_free(struct deferred *d)
{
	d->s->deferred -= d->len;
	free(d);
}

static void handle_request(struct session *s, const struct lp_frame *f);

/* The permit came free: run what waited for it, in order. */
static void permit_run_deferred(struct permit *p)
{
	struct deferred *d = p->head, *next;

	p->head = NULL;
	p->tail = &p->head;
	for (; d; d = next) {
		struct lp_frame f = { .type = d->type, .tag = d->tag,
				      .len = d->len, .body = d->body };

		next = d->next;
		d->s->deferred -= d->len;
		/* May wait again, behind a new holder. */
		if (!d->s->closing)
			handle_request(d->s, &f);
		free(d);
	}
}

static void permit_free_holder(struct permit *p, const char *why)
{
	log_info("volume %" PRIu32 ": permit of client %" PRIu32 " %s",
		 p->volume, p->holder, why);
	p->holder = 0;
	p->revoked = false;
	permit_run_deferred(p);
}

/* @p is free: @s has it now. */
static void permit_grant(struct server *srv, struct permit *p,
			 struct session *s)
{
	p->holder = s->client;
	p->expires_ms = lease_expiry(srv);
	p->revoked = false;
	log_info("volume %" PRIu32 ": permit granted to client %" PRIu32,
		 p->volume, s->client);
	/* Their next open asks us, and we revoke this holder first. */
	break_volume(srv, p->volume, s->client);
}

/* Drop the requests of @s that wait for permits (it is going). */
static void permits_forget_session(struct server *srv, struct session *s)
{
	struct permit *p;

	for (p = srv->permits; p; p = p->next) {
		struct deferred **dp = &p->head, *d;

		while ((d = *dp)) {
			if (d->s == s) {
				*dp = d->next;
				deferred_free(d);
			} else {
				dp = &d->next;
			}
		}
		p->tail = dp;
	}
}

/* -------------------------------------------------------------- reads */

/*
 * Before a read of @volume by @s: if another client holds its permit,
 * the request waits (returns 1) while that holder is asked to give it
 * back, so the reader sees what the holder changed.
 */
static int read_waits(struct session *s, uint32_t volume,
		      const struct lp_frame *f)
{
	struct permit *p = held_by_other(s->srv, volume, s->client);

	if (!p)
		return 0;
	defer(s, p, f);
	return 1;
}

/*
 * Objects' xattrs from the store (store_xattr_fn), and listings' symlink
 * targets: bytes side by side. The arrays grow, so pointers into them
 * are kept as offsets until xattrs_fix().
 */
struct xattrs {
	char *bytes;		/* names and values (and targets) */
	size_t used, bcap;
	struct lp_xattr *x;	/* every xattr, an object's side by side */
	size_t nx, xcap;
	uint32_t *count;	/* the object being collected's nxattr */
};

/* @len bytes kept: their offset, or -ENOMEM. */
static ssize_t keep_bytes(struct xattrs *a, const void *p, size_t len)
{
	size_t at = a->used;
	char *b = array_grow(a->bytes, &a->bcap, a->used, len, 1);

	if (!b)
		return -ENOMEM;
	a->bytes = b;
	memcpy(a->bytes + at, p, len);
	a->used += len;
	return (ssize_t)at;
}

static int collect_xattr(void *arg, const char *name, const void *value,
			 size_t len)
{
	struct xattrs *a = arg;
	size_t nl = strlen(name);
	struct lp_xattr *x;
	ssize_t n, v;

	if (*a->count == LENTO_XATTRS_MAX)
		return -E2BIG;
	x = array_grow(a->x, &a->xcap, a->nx, 1, sizeof(*a->x));
	if (!x)
		return -ENOMEM;
	a->x = x;
	n = keep_bytes(a, name, nl);
	v = n < 0 ? n : keep_bytes(a, value, len);
	if (v < 0)
		return -ENOMEM;
	a->x[a->nx++] = (struct lp_xattr){
		.name = (const char *)(uintptr_t)n, .name_len = (uint32_t)nl,
		.value = (const void *)(uintptr_t)v, .value_len = (uint32_t)len,
	};
	(*a->count)++;
	return 0;
}

/* Everything collected: offsets become pointers. */
static void xattrs_fix(struct xattrs *a)
{
	for (size_t i = 0; i < a->nx; i++) {
		a->x[i].name = a->bytes + (uintptr_t)a->x[i].name;
		a->x[i].value = a->bytes + (uintptr_t)a->x[i].value;
	}
}

static void xattrs_free(struct xattrs *a)
{
	free(a->bytes);
	free(a->x);
}

static void do_getattr(struct session *s, const struct lp_frame *f)
{
	static char target[LENTO_SYMLINK_MAX + 1];
	struct lp_getattr_reply m = { 0 };
	struct xattrs xa = { .count = &m.nxattr };
	struct lento_fid fid;
	const char *why;
	int err;

	if (lp_decode_fid(f, &fid, &why)) {
		sess_close(s, -EBADMSG, "GETATTR: %s", why);
		return;
	}
	if (read_waits(s, fid.volume, f))
		return;
	err = store_getattr(s->srv->st, &fid, &m.st, target, sizeof(target),
			    collect_xattr, &xa);
	if (err) {
		sess_error(s, f->tag, err, "getattr: %s", strerror(-err));
		goto out;
	}
	xattrs_fix(&xa);
	if (m.nxattr)
		memcpy(m.xattr, xa.x, m.nxattr * sizeof(*xa.x));
	if (m.st.type == LENTO_T_SYMLINK) {
		m.target = target;
		m.target_len = strlen(target);
	}
	sess_promise(s, &fid);
	if (!lp_encode_getattr_reply(&s->srv->out, f->tag, &m))
		sess_flush(s);
	else
		sess_error(s, f->tag, -EIO, "cannot encode the reply");
out:
	xattrs_free(&xa);
}

static int write_all(int fd, const void *p, size_t n);

/*
 * A directory's entries, collected for one READDIR_REPLY frame at a time
 * with their symlink targets and xattrs (the directory's own first), the
 * frames written to the listing's spool as they fill.
 */
struct listing {
	struct lp_dirent *e;
	size_t n, cap;		/* entries of the frame being filled */
	size_t bytes;		/* about what they take on the wire */
	uint64_t seen;		/* entries collected, in all */
	struct xattrs xa;
	struct store *st;
	struct session *s;
	struct lp_readdir_reply *m;
	uint32_t tag;
	int fd;			/* the spool */
	uint64_t size;		/* bytes written to it */
};

/* The entries collected: offsets become pointers. */
static void listing_fix(struct listing *l, struct lp_readdir_reply *m)
{
	xattrs_fix(&l->xa);
	for (size_t i = 0; i < l->n; i++) {
		struct lp_dirent *e = &l->e[i];

		/* Offset 0 (the first bytes) is a null pointer: by length. */
		if (e->target_len)
			e->target = l->xa.bytes + (uintptr_t)e->target;
		e->xattr = e->nxattr ? l->xa.x + (uintptr_t)e->xattr : NULL;
	}
	/* The directory's own come first, and go in the first frame only. */
	m->dir_xattr = m->dir_nxattr ? l->xa.x : NULL;
}

/*
 * The entries collected go to the spool as frames, and their callbacks
 * are promised (the promises go with the listing: a BREAK of one of
 * them waits for its last frame, sess_flush()). Then the next frame's
 * entries are collected.
 */
static int listing_flush(struct listing *l)
{
	struct lp_buf *b = &l->s->srv->out;
	size_t done = 0;
	int err;

	listing_fix(l, l->m);
	do {
		int k = lp_encode_readdir_reply(b, l->tag, l->m, l->e + done,
						(uint32_t)(l->n - done));

		if (k < 0) {
			b->len = 0;
			return k;
		}
		err = write_all(l->fd, b->p, b->len);
		l->size += b->len;
		b->len = 0;
		if (err)
			return err;
		done += (size_t)k;
		l->m->first += (uint32_t)k;
	} while (done < l->n);
	for (size_t i = 0; i < l->n && !l->s->closing; i++)
		sess_promise(l->s, &l->e[i].de.st.fid);
	if (l->s->closing)
		return -ENOMEM;
	l->n = 0;
	l->bytes = 0;
	l->xa.used = 0;
	l->xa.nx = 0;
	return 0;
}

static int collect_dirent(void *arg, const struct lento_dirent *de,
			  const char *target, uint32_t target_len,
			  bool xattrs)
{
	struct listing *l = arg;
	struct lento_status st;
	struct lp_dirent *e;
	size_t used = l->xa.used, nx = l->xa.nx;
	ssize_t at = 0;
	int err = 0;

	/* More than counted in the same snapshot: the store's damage. */
	if (l->seen == l->m->total)
		return -EIO;
	e = array_grow(l->e, &l->cap, l->n, 1, sizeof(*l->e));
	if (!e)
		return -ENOMEM;
	l->e = e;
	if (target && (at = keep_bytes(&l->xa, target, target_len)) < 0)
		return -ENOMEM;
	e = &l->e[l->n++];
	l->seen++;
	memset(e, 0, sizeof(*e));
	e->de = *de;
	e->target = target ? (const char *)(uintptr_t)at : NULL;
	e->target_len = target ? target_len : 0;
	e->xattr = (const struct lp_xattr *)(uintptr_t)l->xa.nx;
	/* Only objects that have some cost the query (an ACL, say). */
	if (xattrs) {
		l->xa.count = &e->nxattr;
		err = store_getattr(l->st, &de->st.fid, &st, NULL, 0,
				    collect_xattr, &l->xa);
		if (err)
			return err;
	}
	/* name, status, target, xattrs: as put_dirent() puts them. */
	l->bytes += 2 + strlen(de->name) + 90 + 8 * (size_t)LENTO_VV_MAX +
		    (l->xa.used - used) + 2 + 2 + 6 * (l->xa.nx - nx);
	return l->bytes >= LP_SPLIT_TARGET ? listing_flush(l) : 0;
}

/*
 * Make the listing of READDIR @o into its spool: the directory's status
 * and xattrs, how many entries it has (a directory of more than a
 * listing may have is EFBIG before any is read), then the entries, frame
 * by frame. All in this turn of the loop: the listing is one snapshot of
 * the directory, and its promises are made with it. An error is its
 * answer (nothing of it has gone yet).
 */
static int listing_make(struct session *s, struct list_out *o)
{
	struct server *srv = s->srv;
	struct lp_readdir_reply m = { 0 };
	struct listing l = { .st = srv->st, .s = s, .m = &m, .tag = o->tag,
			     .fd = -1, .xa = { .count = &m.dir_nxattr } };
	uint64_t total = 0;
	int err;

	err = store_getattr(srv->st, &o->fid, &m.dir, NULL, 0, collect_xattr,
			    &l.xa);
	if (!err)
		err = store_readdir_count(srv->st, &o->fid, &total);
	if (!err && total > srv->dir_max) {
		sess_error(s, o->tag, -EFBIG, "readdir: more than %zu entries",
			   srv->dir_max);
		err = -EFBIG;
		goto out;
	}
	if (!err)
		err = l.fd = store_spool(srv->st);
	if (err < 0) {
		l.fd = -1;
		sess_error(s, o->tag, err, "readdir: %s", strerror(-err));
		goto out;
	}
	m.total = (uint32_t)total;
	sess_promise(s, &o->fid);
	err = s->closing ? -ENOMEM :
	      store_readdir(srv->st, &o->fid, collect_dirent, &l);
	/* The last frame; an empty directory's only one. */
	if (!err && (l.n || !m.total))
		err = listing_flush(&l);
	if (!err && l.seen != total)
		err = -EIO;	/* fewer than counted: the store's damage */
	if (err) {
		sess_error(s, o->tag, err, "readdir: %s", strerror(-err));
		close(l.fd);
		goto out;
	}
	o->fd = l.fd;
	o->size = l.size;
	o->off = 0;
out:
	free(l.e);
	xattrs_free(&l.xa);
	return err < 0 ? err : 0;
}

static void list_pop(struct session *s)
{
	struct list_out *o = s->lists;
	int err;

	s->lists = o->next;
	if (!s->lists)
		s->lists_tail = &s->lists;
	s->nlists--;
	if (o->fd >= 0)
		close(o->fd);
	free(o);
	/* What waited behind the listing goes now, before the next one. */
	if (s->behind.len && !s->closing) {
		err = lo_conn_send(s->conn, s->behind.p, s->behind.len);
		if (err == -ENOBUFS)
			sess_close(s, err, "it does not read what it is sent");
	}
	s->behind.len = 0;
}

static int pread_all(int fd, void *p, size_t n, uint64_t off)
{
	size_t got = 0;

	while (got < n) {
		ssize_t k = pread(fd, (char *)p + got, n - got,
				  (off_t)(off + got));

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (!k)
			return -EIO;
		got += (size_t)k;
	}
	return 0;
}

/*
 * The next frame of the listing at the head of the queue (made first if
 * its turn just came): false if there was none to send.
 */
static bool list_pump_one(struct session *s)
{
	struct server *srv = s->srv;
	struct list_out *o = s->lists;
	uint32_t len;
	size_t n;
	int err;

	if (!o)
		return false;
	if (o->fd < 0 && listing_make(s, o)) {
		list_pop(s);
		return true;
	}
	if (srv->frame_cap < LP_HDR_SIZE) {
		uint8_t *p = realloc(srv->frame, LP_HDR_SIZE);

		if (!p) {
			sess_close(s, -ENOMEM, "out of memory for a listing");
			return false;
		}
		srv->frame = p;
		srv->frame_cap = LP_HDR_SIZE;
	}
	err = pread_all(o->fd, srv->frame, LP_HDR_SIZE, o->off);
	len = (uint32_t)srv->frame[0] | (uint32_t)srv->frame[1] << 8 |
	      (uint32_t)srv->frame[2] << 16 | (uint32_t)srv->frame[3] << 24;
	n = LP_HDR_SIZE + (size_t)len;
	if (!err && (len > LP_FRAME_MAX || o->off + n > o->size))
		err = -EIO;	/* not what we wrote */
	if (!err && n > srv->frame_cap) {
		uint8_t *p = realloc(srv->frame, n);

		if (!p)
			err = -ENOMEM;
		else {
			srv->frame = p;
			srv->frame_cap = n;
		}
	}
	if (!err)
		err = pread_all(o->fd, srv->frame + LP_HDR_SIZE, len,
				o->off + LP_HDR_SIZE);
	if (err) {
		/* The listing is under way: all we can do. */
		sess_close(s, err, "reading a listing back from its spool: %s",
			   strerror(-err));
		return false;
	}
	err = lo_conn_send(s->conn, srv->frame, n);
	if (err) {
		sess_close(s, err, "it does not read what it is sent");
		return false;
	}
	o->off += n;
	if (o->off == o->size)
		list_pop(s);
	return true;
}

static void out_pump(struct session *s);

static void do_readdir(struct session *s, const struct lp_frame *f)
{
	struct list_out *o;
	struct lento_fid fid;
	const char *why;

	if (lp_decode_fid(f, &fid, &why)) {
		sess_close(s, -EBADMSG, "READDIR: %s", why);
		return;
	}
	if (read_waits(s, fid.volume, f))
		return;
	if (s->nlists >= FETCH_QUEUED_MAX) {
		sess_close(s, -ENOBUFS, "%u READDIRs unanswered: it does not "
			   "read what it is sent", s->nlists);
		return;
	}
	o = calloc(1, sizeof(*o));
	if (!o) {
		sess_error(s, f->tag, -ENOMEM, "out of memory");
		return;
	}
	o->tag = f->tag;
	o->fid = fid;
	o->fd = -1;
	*s->lists_tail = o;
	s->lists_tail = &o->next;
	s->nlists++;
	out_pump(s);
}

/* ---------------------------------------------------- FETCH: streaming */

static void fetch_free(struct fetch_out *o)
{
	if (o->fd >= 0)
		close(o->fd);
	free(o);
}

static void fetch_pop(struct session *s)
{
	struct fetch_out *o = s->fetch;

	s->fetch = o->next;
	if (!s->fetch)
		s->fetch_tail = &s->fetch;
	s->nfetch--;
	fetch_free(o);
}

/*
 * Open the body of the FETCH at the head of the queue, with the status
 * that goes with it, and promise its callback: what is sent is the
 * version current now. An error is its answer.
 */
static int fetch_open(struct session *s, struct fetch_out *o)
{
	const struct lp_fetch *m = &o->req;
	int err;

	err = store_body_open(s->srv->st, &m->fid, m->expect.n ? &m->expect :
			      NULL, &o->fd, &o->size, NULL);
	if (!err)
		err = store_getattr(s->srv->st, &m->fid, &o->reply.st, NULL, 0,
				    NULL, NULL);
	if (!err && o->reply.st.attr.size != o->size)
		err = -EIO;	/* the store's own damage */
	if (err) {
		sess_error(s, o->tag, err, "fetch: %s", strerror(-err));
		return err;
	}
	o->opened = true;
	o->reply.size = o->size;
	sess_promise(s, &m->fid);
	return 0;
}

/*
 * Queue frames of the listings and DATA of the FETCHes, each in order,
 * the two by turns, while the output is short.
 */
static void out_pump(struct session *s)
{
	static uint8_t chunk[LP_CHUNK_MAX];

	while ((s->fetch || s->lists) &&
	       lo_conn_queued(s->conn) < FETCH_QUEUE_LOW && !s->closing) {
		struct fetch_out *o = s->fetch;
		struct lp_data d = { 0 };
		size_t want;
		ssize_t n = 0;

		bool sent = list_pump_one(s);

		if (s->closing)
			return;
		if (!o) {
			if (!sent)
				break;
			continue;
		}
		if (lo_conn_queued(s->conn) >= FETCH_QUEUE_LOW)
			break;
		/*
		 * A FETCH opened now would tell a status newer than the
		 * listing's frames still to go: it waits for their end.
		 */
		if (!o->opened && sess_listing(s)) {
			if (!sent)
				break;
			continue;
		}
		if (!o->opened && fetch_open(s, o)) {
			fetch_pop(s);
			continue;
		}
		want = o->size - o->off < LP_CHUNK_MAX ? o->size - o->off :
							 LP_CHUNK_MAX;
		if (!o->started) {
			o->started = true;
			if (lp_encode_fetch_reply(&s->srv->out, o->tag,
						  &o->reply)) {
				sess_close(s, -EIO, "cannot encode FETCH_REPLY");
				return;
			}
			sess_flush(s);
		}
		while ((size_t)n < want) {
			ssize_t k = pread(o->fd, chunk + n, want - n,
					  o->off + n);

			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0) {
				/* The reply is under way: all we can do. */
				sess_close(s, k < 0 ? -errno : -EIO,
					   "reading the body of %08" PRIx32
					   "-%08" PRIx32 "-%016" PRIx64 ": %s",
					   o->reply.st.fid.volume,
					   o->reply.st.fid.client,
					   o->reply.st.fid.seq,
					   k < 0 ? strerror(errno) :
					   "shorter than its size");
				return;
			}
			n += k;
		}
		d.offset = o->off;
		d.flags = o->off + n == o->size ? LP_DATA_LAST : 0;
		d.more = !d.flags;
		if (lp_encode_data(&s->srv->out, o->tag, &d, chunk, n)) {
			sess_close(s, -EIO, "cannot compress a chunk");
			return;
		}
		sess_flush_data(s);
		o->off += n;
		if (d.flags & LP_DATA_LAST)
			fetch_pop(s);
	}
}

static void do_fetch(struct session *s, const struct lp_frame *f)
{
	struct fetch_out *o;
	struct lp_fetch m;
	const char *why;

	if (lp_decode_fetch(f, &m, &why)) {
		sess_close(s, -EBADMSG, "FETCH: %s", why);
		return;
	}
	if (read_waits(s, m.fid.volume, f))
		return;
	if (s->nfetch >= FETCH_QUEUED_MAX) {
		sess_close(s, -ENOBUFS, "%u FETCHes unanswered: it does not "
			   "read what it is sent", s->nfetch);
		return;
	}
	o = calloc(1, sizeof(*o));
	if (!o) {
		sess_error(s, f->tag, -ENOMEM, "out of memory");
		return;
	}
	o->tag = f->tag;
	o->req = m;
	o->fd = -1;
	*s->fetch_tail = o;
	s->fetch_tail = &o->next;
	s->nfetch++;
	out_pump(s);
}

/* ------------------------------------------------------------ volumes */

static void do_volume_lookup(struct session *s, const struct lp_frame *f)
{
	char name[LENTO_VOLNAME_MAX + 1];
	struct store_volume v;
	struct lp_volume m;
	const char *why;
	int err;

	if (lp_decode_volume_lookup(f, name, &why)) {
		sess_close(s, -EBADMSG, "VOLUME_LOOKUP: %s", why);
		return;
	}
	err = store_volume_lookup(s->srv->st, name, &v);
	if (err) {
		sess_error(s, f->tag, err, "volume %s: %s", name,
			   err == -ENOENT ? "no such volume" : strerror(-err));
		return;
	}
	m.volume = v.id;
	m.root = v.root;
	m.stamp = v.stamp;
	if (!lp_encode_volume_lookup_reply(&s->srv->out, f->tag, &m))
		sess_flush(s);
}

static void do_volume_validate(struct session *s, const struct lp_frame *f)
{
	struct lp_volstamp *v = NULL;
	struct lp_list l, again;
	struct lp_volstamp one;
	const char *why;
	uint32_t n = 0;

	if (lp_decode_volume_validate(f, &l, &why)) {
		sess_close(s, -EBADMSG, "VOLUME_VALIDATE: %s", why);
		return;
	}
	again = l;
	while (lp_next_volstamp(&again, &one) == 1)
		if (read_waits(s, one.volume, f))
			return;
	v = calloc(l.left ? l.left : 1, sizeof(*v));
	if (!v) {
		sess_error(s, f->tag, -ENOMEM, "out of memory");
		return;
	}
	while (lp_next_volstamp(&l, &v[n]) == 1) {
		struct store_volume sv;
		int err = fault_at("server-volume-get") ? -EIO :
			  store_volume_get(s->srv->st, v[n].volume, &sv);

		if (err == -ENOENT) {
			v[n].result = LP_VOL_UNKNOWN;
			v[n].stamp = 0;
		} else if (err) {
			/*
			 * Not an answer about the volume: UNKNOWN would make
			 * the client give it up for good. An ERROR leaves it
			 * unvalidated, and the client asks again.
			 */
			sess_error(s, f->tag, err, "volume %" PRIu32 ": %s",
				   v[n].volume, strerror(-err));
			free(v);
			return;
		} else if (sv.stamp == v[n].stamp) {
			v[n].result = LP_VOL_VALID;
		} else {
			v[n].result = LP_VOL_CHANGED;
			v[n].stamp = sv.stamp;
		}
		n++;
	}
	/* Promises only with the answer that makes them. */
	for (uint32_t i = 0; i < n && !s->closing; i++)
		if (v[i].result == LP_VOL_VALID)
			sess_add_volume(s, v[i].volume);
	/* A promise not recorded: the session goes, unanswered. */
	if (!s->closing &&
	    !lp_encode_volume_validate_reply(&s->srv->out, f->tag, v, n))
		sess_flush(s);
	free(v);
}

static void do_validate(struct session *s, const struct lp_frame *f)
{
	struct lp_list l, again;
	struct lp_fidvv one;
	struct lento_fid *fids;
	struct lento_vv *vvs;
	uint8_t *res;
	const char *why;
	uint32_t n = 0, i;
	int err;

	if (lp_decode_validate(f, &l, &why)) {
		sess_close(s, -EBADMSG, "VALIDATE: %s", why);
		return;
	}
	again = l;
	while (lp_next_fidvv(&again, &one) == 1)
		if (read_waits(s, one.fid.volume, f))
			return;
	fids = calloc(l.left, sizeof(*fids));
	vvs = calloc(l.left, sizeof(*vvs));
	res = calloc(l.left, 1);
	err = !fids || !vvs || !res ? -ENOMEM : 0;
	while (!err && lp_next_fidvv(&l, &one) == 1) {
		fids[n] = one.fid;
		vvs[n++] = one.vv;
	}
	if (!err) {
		bool *changed = calloc(n ? n : 1, sizeof(*changed));

		err = changed ? store_validate_objects(s->srv->st, fids, vvs,
						       n, changed) : -ENOMEM;
		if (err > 0)	/* how many changed: not an error */
			err = 0;
		for (i = 0; !err && i < n; i++) {
			res[i] = changed[i] ? LP_OBJ_CHANGED : LP_OBJ_VALID;
			if (res[i] == LP_OBJ_VALID)
				sess_promise(s, &fids[i]);
		}
		free(changed);
	}
	if (err)
		sess_error(s, f->tag, err, "validate: %s", strerror(-err));
	else if (!lp_encode_validate_reply(&s->srv->out, f->tag, res, n))
		sess_flush(s);
	free(fids);
	free(vvs);
	free(res);
}

/* ------------------------------------------------------- permits: wire */

static void send_permit(struct session *s, uint32_t tag, uint32_t volume,
			uint32_t lease_ms)
{
	struct lp_permit m = { .volume = volume, .lease_ms = lease_ms };

	if (!lp_encode_permit_reply(&s->srv->out, tag, &m))
		sess_flush(s);
}

static void refuse_permit(struct session *s, uint32_t tag, uint32_t volume,
			  const char *why)
{
	char msg[LP_MSG_MAX];

	snprintf(msg, sizeof(msg), "volume %" PRIu32 ": %s", volume, why);
	if (!lp_encode_error(&s->srv->out, tag, LP_ENOPERMIT, msg))
		sess_flush(s);
}

/*
 * The holder @s asks for more time (a RENEW, or an ACQUIRE of what it
 * holds): answered, or false when the permit is taken back instead. A
 * holder asked to give the permit back may renew it only up to one lease
 * after the asking: time to reintegrate and release (a batch on its way
 * keeps it meanwhile, holder_alive()), not to keep the volume while the
 * others' requests wait. The answer says how long is left.
 */
static bool permit_extend(struct session *s, struct permit *p, uint32_t tag)
{
	uint64_t now = lo_now_ms(), slack = lo_clock_slack_ms();
	uint64_t end = lease_expiry(s->srv);

	if (p->revoked && end > p->revoke_end_ms)
		end = p->expires_ms > p->revoke_end_ms ? p->expires_ms :
		      p->revoke_end_ms;
	if (end <= now + 2 * slack) {
		permit_free_holder(p, "taken back: asked back a lease ago, "
				   "and only renewed");
		return false;
	}
	p->expires_ms = end;
	send_permit(s, tag, p->volume, (uint32_t)(end - now - slack));
	return true;
}

static void do_permit(struct session *s, const struct lp_frame *f)
{
	struct server *srv = s->srv;
	struct store_volume v;
	struct permit *p;
	uint32_t volume;
	const char *why;
	int err;

	if (lp_decode_volume(f, &volume, &why)) {
		sess_close(s, -EBADMSG, "%s: %s", lp_type_name(f->type), why);
		return;
	}
	err = store_volume_get(srv->st, volume, &v);
	if (err) {
		sess_error(s, f->tag, err, "volume %" PRIu32 ": %s", volume,
			   err == -ENOENT ? "no such volume" : strerror(-err));
		return;
	}
	p = permit_get(srv, volume, true);
	if (!p) {
		sess_error(s, f->tag, -ENOMEM, "out of memory");
		return;
	}
	switch (f->type) {
	case LP_PERMIT_ACQUIRE:
		/*
		 * Held already: a renewal, or taken back and asked anew. A
		 * holder asked to give it back is told again: its answer to
		 * an ACQUIRE is a grant, which it takes for a new one.
		 */
		if (p->holder == s->client && permit_extend(s, p, f->tag)) {
			if (p->revoked)
				sess_push_volume(s, LP_PERMIT_REVOKE, volume);
			return;
		}
		if (p->holder) {
			defer(s, p, f);
			return;
		}
		permit_grant(srv, p, s);
		send_permit(s, f->tag, volume, srv->lease_ms);
		return;
	case LP_PERMIT_RENEW:
		if (p->holder != s->client)
			refuse_permit(s, f->tag, volume,
				      "not the permit's holder");
		else if (!permit_extend(s, p, f->tag))
			refuse_permit(s, f->tag, volume,
				      "asked back a lease ago, and not given back");
		return;
	default:		/* LP_PERMIT_RELEASE */
		send_permit(s, f->tag, volume, 0);
		if (p->holder == s->client)
			permit_free_holder(p, "released");
		return;
	}
}

/* ------------------------------------------------------- reintegration */

/*
 * A batch's bodies are made durable on the worker's thread, so that the
 * loop does not wait for their writeback (8 s for 1 GiB in the VM): each
 * body's writeback starts as soon as it has come, while the rest of the
 * batch comes, and the waits come in groups of BODY_WAIT_MAX -- the
 * writes of many small bodies are then in flight together, not one after
 * the other (400 bodies on a disk with 150 ms writes took 41 s one by
 * one), and a group holds few descriptors. Data only (sync_file_range):
 * the store's one syncfs at the apply (store.c) commits the metadata of
 * all the batch's bodies at once. That syncfs also writes and waits for
 * any body no job waited for, so the descriptors held for the early
 * writeback are bounded (srv->body_fds_max): past the bound a body is
 * closed as it comes, and only its writeback waits for the apply. Many
 * clients sending many small bodies to a busy disk would otherwise run
 * the server out of descriptors, and refuse batches for it.
 */
struct body_start {
	struct wk_job wk;
	struct server *srv;
	int fd;				/* the job's own: a dup */
};

/* A descriptor held for a body's writeback is closed. */
static void body_fd_close(struct server *srv, int fd)
{
	close(fd);
	srv->body_fds--;
}

static void body_start_run(struct wk_job *wk)
{
	struct body_start *j = (struct body_start *)wk;

	/* Only a start: an error shows again in body_wait_run's wait. */
	(void)sync_file_range(j->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
}

static void body_start_done(struct wk_job *wk, bool ran)
{
	struct body_start *j = (struct body_start *)wk;

	(void)ran;
	body_fd_close(j->srv, j->fd);
	free(j);
}

struct body_wait {
	struct wk_job wk;
	struct server *srv;
	struct body_wait *next;		/* ri->waiting */
	struct reint_in *ri;		/* NULL once the batch is gone */
	int fd[BODY_WAIT_MAX];		/* the job's */
	uint32_t n;
	int err;			/* the first that failed */
};

static void body_wait_run(struct wk_job *wk)
{
	struct body_wait *j = (struct body_wait *)wk;
	uint32_t i;

	for (i = 0; i < j->n; i++)
		if (sync_file_range(j->fd[i], 0, 0,
				    SYNC_FILE_RANGE_WAIT_BEFORE |
				    SYNC_FILE_RANGE_WRITE |
				    SYNC_FILE_RANGE_WAIT_AFTER) && !j->err)
			j->err = -errno;
}

static void reint_ready(struct session *s);

static void body_wait_done(struct wk_job *wk, bool ran)
{
	struct body_wait *j = (struct body_wait *)wk, **pp;
	struct reint_in *ri = j->ri;
	uint32_t i;

	for (i = 0; i < j->n; i++)
		body_fd_close(j->srv, j->fd[i]);
	if (ri) {
		for (pp = &ri->waiting; *pp != j; pp = &(*pp)->next)
			;
		*pp = j->next;
		if (j->err && !ri->sync_err)
			ri->sync_err = j->err;
	}
	free(j);
	/* The last one: the batch goes on, unless the server stops. */
	if (ri && ran && !ri->waiting && ri->complete &&
	    !ri->s->srv->stopping)
		reint_ready(ri->s);
}

/*
 * The bodies of @ri that came are waited for on the worker. Without
 * memory for the job, the apply's syncfs makes them durable.
 */
static void bodies_wait(struct session *s, struct reint_in *ri)
{
	struct body_wait *j = calloc(1, sizeof(*j));

	if (!j) {
		while (ri->nwhole)
			body_fd_close(s->srv, ri->whole[--ri->nwhole]);
		return;
	}
	j->srv = s->srv;
	memcpy(j->fd, ri->whole, ri->nwhole * sizeof(*j->fd));
	j->n = ri->nwhole;
	ri->nwhole = 0;
	j->wk.run = body_wait_run;
	j->wk.done = body_wait_done;
	j->ri = ri;
	j->next = ri->waiting;
	ri->waiting = j;
	wk_submit(s->srv->wk, &j->wk);
}

/*
 * The body in @ri->fd is whole: its writeback starts and @ri keeps it
 * for the wait, as far as descriptors allow (the apply's syncfs writes
 * the rest).
 */
static void body_whole(struct session *s, struct reint_in *ri)
{
	struct server *srv = s->srv;
	struct body_start *j;

	if (srv->body_fds >= srv->body_fds_max) {
		close(ri->fd);
		ri->fd = -1;
		return;
	}
	j = srv->body_fds + 2 <= srv->body_fds_max ?
	    calloc(1, sizeof(*j)) : NULL;
	if (j && (j->fd = dup(ri->fd)) >= 0) {
		j->srv = srv;
		j->wk.run = body_start_run;
		j->wk.done = body_start_done;
		srv->body_fds++;
		wk_submit(srv->wk, &j->wk);
	} else {	/* the wait writes it anyway */
		free(j);
	}
	srv->body_fds++;
	ri->whole[ri->nwhole++] = ri->fd;
	ri->fd = -1;
	if (ri->nwhole == BODY_WAIT_MAX)
		bodies_wait(s, ri);
}

/* Every body came: applied once all are durable. */
static void bodies_complete(struct session *s, struct reint_in *ri)
{
	ri->complete = true;
	if (ri->nwhole)
		bodies_wait(s, ri);
	if (!ri->waiting)
		reint_ready(s);
}

/*
 * A SETATTR that changes a file's size copies the file's first bytes
 * into its new content: seconds for a big file. The copies are made on
 * the worker before the apply, which takes them (store_reintegrate_with)
 * within its one transaction, as it would have made them; the batch is
 * answered after, in its turn. What they are made from is predicted from
 * the batch's records and the store: the content each file has when its
 * record comes (a body of the batch, an earlier copy, the one
 * committed). A copy the apply does not meet is removed; a size change
 * not predicted is made by the apply itself.
 */
struct resize_job {
	struct wk_job wk;
	struct server *srv;
	struct reint_in *ri;		/* NULL once the batch is gone */
	struct store_resize *rz;	/* the batch's, or ours once it went */
	uint32_t n;
};

static void resizes_end(struct server *srv, struct store_resize *rz,
			uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		store_resize_end(srv->st, &rz[i]);
	srv->body_fds -= 2 * n;	/* counted by resizes_start() */
	free(rz);
}

/* The batch goes: its copies with it, or with their job when it ends. */
static void resizes_drop(struct reint_in *ri)
{
	if (ri->rjob) {
		ri->rjob->ri = NULL;	/* the job ends them */
		ri->rjob = NULL;
	} else {
		resizes_end(ri->s->srv, ri->rz, ri->nrz);
	}
	ri->rz = NULL;
	ri->nrz = 0;
}

static void resize_run(struct wk_job *wk)
{
	struct resize_job *j = (struct resize_job *)wk;

	for (uint32_t i = 0; i < j->n; i++)
		if (store_resize_copy(j->srv->st, &j->rz[i]))
			break;
}

static void reint_ready(struct session *s);

static void resize_done(struct wk_job *wk, bool ran)
{
	struct resize_job *j = (struct resize_job *)wk;
	struct reint_in *ri = j->ri;

	if (!ri) {
		resizes_end(j->srv, j->rz, j->n);
		free(j);
		return;
	}
	ri->rjob = NULL;
	/* A copy that failed (not made) is the apply's to make, or fail. */
	free(j);
	if (ran && !ri->s->srv->stopping)
		reint_ready(ri->s);
}

/* What a file's content is, record by record of the batch. */
struct content {
	struct lento_fid fid;
	bool has;
	struct lento_storeid sid;
	uint64_t size;
	int copy;		/* the copy made ready that it is, or -1 */
	const char *path;	/* else the batch's body that it is, or NULL */
	bool unknown;		/* made by the apply: not a source here */
};

static struct content *content_of(struct server *srv, struct content **cs,
				  size_t *n, size_t *cap,
				  const struct lento_fid *fid)
{
	struct content *c;

	for (size_t i = 0; i < *n; i++)
		if (lento_fid_eq(&(*cs)[i].fid, fid))
			return &(*cs)[i];
	c = array_grow(*cs, cap, *n, 1, sizeof(**cs));
	if (!c)
		return NULL;
	*cs = c;
	c = &c[(*n)++];
	memset(c, 0, sizeof(*c));
	c->fid = *fid;
	c->copy = -1;
	/* Not there (yet): made by the batch, or an error of the apply's. */
	if (store_content(srv->st, fid, &c->has, &c->sid, &c->size, NULL))
		c->unknown = true;
	return c;
}

/* Size-change copies a batch makes on the worker; the apply makes more. */
#define RESIZE_PREP_MAX	32

/*
 * The copies @ri's size changes need, begun in DIR/tmp and handed to the
 * worker: true if there is a job to wait for. Whatever fails here (no
 * memory, a file) or comes past RESIZE_PREP_MAX copies is left to the
 * apply, which makes the copy itself.
 */
static bool resizes_start(struct session *s, struct reint_in *ri)
{
	struct server *srv = s->srv;
	struct content *cs = NULL, *c;
	size_t ncs = 0, capcs = 0, caprz = 0;
	struct resize_job *j;
	uint64_t applied = 0;
	uint32_t i;

	/* A batch sent again: what was applied is skipped, the content on. */
	if (store_last_applied(srv->st, ri->volume, s->client, &applied))
		applied = 0;
	for (i = 0; i < ri->n; i++) {
		const struct lento_rec *r = &ri->recs[i];
		struct lento_storeid sid = { s->client, r->recno };
		struct store_resize *z;
		int in = -1;

		if (r->recno <= applied)
			continue;

		if (!(r->op == LENTO_OP_STORE ||
		      (r->op == LENTO_OP_CREATE && r->type == LENTO_T_REG) ||
		      (r->op == LENTO_OP_SETATTR &&
		       r->attr.valid & LENTO_A_SIZE)))
			continue;
		c = content_of(srv, &cs, &ncs, &capcs, &r->obj);
		if (!c)
			break;
		if (r->flags & LENTO_R_NOBODY)
			continue;	/* a STORE that leaves the content */
		if (r->op != LENTO_OP_SETATTR) {	/* STORE, CREATE */
			uint64_t size = r->op == LENTO_OP_STORE &&
					r->attr.valid & LENTO_A_SIZE ?
					r->attr.size : 0;

			*c = (struct content){ .fid = r->obj, .has = size > 0,
					       .sid = sid, .size = size,
					       .copy = -1,
					       .path = size ? ri->paths[i] :
							      NULL };
			continue;
		}
		if (c->unknown || r->attr.size == c->size)
			continue;	/* the apply's to judge */
		if (!r->attr.size || !c->has) {	/* no copy: cheap */
			c->has = r->attr.size > 0;
			c->sid = sid;
			c->size = r->attr.size;
			c->copy = -1;
			c->path = NULL;
			c->unknown = c->has;
			continue;
		}
		if (c->copy >= 0) {
			/* A copy of the batch's: the apply resizes it. */
			c->sid = sid;
			c->size = r->attr.size;
			continue;
		}
		/*
		 * Two descriptors a copy until the apply, counted with the
		 * bodies' (srv->body_fds_max): the rest are the apply's.
		 */
		if (ri->nrz >= RESIZE_PREP_MAX ||
		    srv->body_fds + 2 > srv->body_fds_max)
			break;
		z = array_grow(ri->rz, &caprz, ri->nrz, 1, sizeof(*ri->rz));
		if (!z)
			break;
		ri->rz = z;
		if (c->path)
			in = open(c->path, O_RDONLY | O_CLOEXEC);
		else if (store_content(srv->st, &r->obj, &(bool){ 0 },
				       &(struct lento_storeid){ 0 },
				       &(uint64_t){ 0 }, &in))
			in = -1;
		z = &ri->rz[ri->nrz];
		*z = (struct store_resize){
			.fid = r->obj, .sid = sid, .src_has = true,
			.src = c->sid, .len = c->size < r->attr.size ?
			c->size : r->attr.size, .size = r->attr.size,
			.in = in, .out = -1,
		};
		if (in < 0 || store_resize_begin(srv->st, z)) {
			if (in >= 0)
				close(in);
			break;
		}
		srv->body_fds += 2;
		c->sid = sid;
		c->size = r->attr.size;
		c->copy = (int)ri->nrz++;
		c->path = NULL;
	}
	free(cs);
	if (!ri->nrz)
		return false;
	j = calloc(1, sizeof(*j));
	if (!j) {
		resizes_drop(ri);
		return false;
	}
	j->srv = srv;
	j->ri = ri;
	j->rz = ri->rz;
	j->n = ri->nrz;
	j->wk.run = resize_run;
	j->wk.done = resize_done;
	ri->rjob = j;
	wk_submit(srv->wk, &j->wk);
	return true;
}

static void reint_free(struct reint_in *ri)
{
	uint32_t i;

	if (!ri)
		return;
	if (ri->fd >= 0)
		close(ri->fd);
	for (i = 0; i < ri->nwhole; i++)
		body_fd_close(ri->s->srv, ri->whole[i]);
	for (struct body_wait *j = ri->waiting; j; j = j->next)
		j->ri = NULL;
	resizes_drop(ri);
	for (i = 0; i < ri->n; i++) {
		free(ri->data[i]);
		/*
		 * A body the store took is in bodies/, its name here gone
		 * (ENOENT); one it did not take stays behind: remove it.
		 */
		if (ri->paths[i][0] && unlink(ri->paths[i]) && errno != ENOENT)
			log_err("removing %s: %s", ri->paths[i],
				strerror(errno));
	}
	free(ri->recs);
	free(ri->data);
	free(ri->bodies);
	free(ri->paths);
	free(ri->chunk);
	free(ri);
}

/* The fids a record names, for callbacks and the new versions. */
static int rec_fids(const struct lento_rec *r, struct lento_fid out[4])
{
	const struct lento_fid *f[4] = { &r->dir, &r->obj, &r->dir2,
					 &r->target };
	int i, n = 0;

	for (i = 0; i < 4; i++)
		if (!lento_fid_is_null(f[i]))
			out[n++] = *f[i];
	return n;
}

/*
 * Is @st (of a directory the batch changed) one whose names changed
 * through others since the client's base? Then the client's listing of
 * it is stale: it gets no version for it but a BREAK.
 */
static bool stale_dir(const struct store_result *res,
		      const struct lento_status *st)
{
	if (st->type != LENTO_T_DIR)
		return false;
	if (res->stale_more)
		return true;
	for (size_t i = 0; i < res->nstale; i++)
		if (lento_fid_eq(&res->stale[i], &st->fid))
			return true;
	return false;
}

static void reint_reply(struct session *s, struct reint_in *ri,
			const struct store_result *res)
{
	struct server *srv = s->srv;
	struct lp_reint_reply m = { 0 };
	struct lp_fidvv *v = NULL;
	struct fidset seen;
	uint32_t nv = 0, i;

	fidset_init(&seen);
	m.applied = res->last_recno;
	m.stamp = res->stamp;
	m.index = LP_NO_INDEX;
	if (res->outcome == STORE_APPLIED) {
		m.code = LP_OK;
		/* 4 fids a record, LP_REINT_RECS_MAX records: in one reply. */
		v = calloc(4 * (size_t)ri->n + 1, sizeof(*v));
		if (!v)
			sess_close(s, -ENOMEM, "out of memory for the answer");
		for (i = 0; i < ri->n; i++) {
			struct lento_fid fids[4];
			int k, nf = rec_fids(&ri->recs[i], fids);

			for (k = 0; k < nf; k++) {
				struct lento_status st;
				int added = fidset_add(&seen, &fids[k]);

				if (!added)
					continue;
				/* Whatever else fails, the others hear. */
				break_fid(srv, &fids[k], s->client);
				if (added < 0)
					sess_close(s, -ENOMEM, "out of memory "
						   "for the answer");
				if (s->closing)
					continue;
				if (store_getattr(srv->st, &fids[k], &st, NULL,
						  0, NULL, NULL))
					continue;	/* gone */
				if (stale_dir(res, &st)) {
					fidset_del(&s->cbs, &fids[k]);
					sess_push_fid(s, LP_BREAK, &fids[k]);
					continue;
				}
				/*
				 * The client caches what it made: it must
				 * hear when another changes it.
				 */
				sess_promise(s, &fids[k]);
				if (s->closing)
					continue;
				v[nv].fid = fids[k];
				v[nv++].vv = st.vv;
			}
		}
		/* The stamp moved: whole-volume promises are void. */
		if (res->applied)
			for (struct session *t = srv->sessions; t; t = t->next)
				if (t->ready && t->client != s->client &&
				    sess_drop_volume(t, ri->volume))
					sess_push_volume(t, LP_BREAK_VOLUME,
							 ri->volume);
		log_info("client %" PRIu32 ": volume %" PRIu32 ": %zu records "
			 "applied, %zu resent and skipped (up to %" PRIu64 ")",
			 s->client, ri->volume, res->applied, res->skipped,
			 res->last_recno);
	} else {
		m.code = res->outcome == STORE_CONFLICT ? LP_ECONFLICT :
			 lp_err_from_errno(res->err);
		m.index = res->rec >= 0 ? (uint32_t)res->rec : LP_NO_INDEX;
		m.fid = res->fid;
		m.base = res->base;
		m.current = res->current;
		m.msg = res->msg;
		log_info("client %" PRIu32 ": volume %" PRIu32 ": batch "
			 "refused: %s", s->client, ri->volume, res->msg);
	}
	if (!lp_encode_reintegrate_reply(&srv->out, ri->tag, &m, v, nv))
		sess_flush(s);
	else
		sess_error(s, ri->tag, -EIO, "cannot encode the answer");
	fidset_free(&seen);
	free(v);
}

static void do_reintegrate(struct session *s, const struct lp_frame *f);

/*
 * The batch of @s was answered (or refused): the one queued behind it
 * is taken now, and the frames held behind that are read again.
 */
static void reint_next(struct session *s)
{
	struct lp_frame f = s->ri_next;
	uint8_t *body = s->ri_next_body;

	if (s->ri || s->closing)
		return;
	if (body) {
		s->ri_next_body = NULL;
		do_reintegrate(s, &f);
		free(body);
	}
	if (s->held && !s->ri_next_body && !s->closing) {
		s->held = false;
		lo_conn_release(s->conn);
	}
}

static void reint_apply(struct session *s)
{
	struct reint_in *ri = s->ri;
	struct store_result res;
	struct permit *p;

	s->ri = NULL;
	/* The lease may have run out while the bodies came. */
	p = permit_get(s->srv, ri->volume, false);
	if (!p || p->holder != s->client) {
		refuse_permit(s, ri->tag, ri->volume,
			      "the permit's lease ran out");
		reint_free(ri);
		reint_next(s);
		return;
	}
	store_reintegrate_with(s->srv->st, ri->volume, s->client, ri->recs,
			       ri->n, ri->bodies, ri->rz, ri->nrz, &res);
	reint_reply(s, ri, &res);
	/*
	 * The store renamed the bodies it took into bodies/; the rest (a
	 * batch sent again, a STORE a later record of the batch made moot,
	 * a refused batch) reint_free() removes: a path in tmp/ left is not
	 * the store's. Only this thread makes files in tmp/, so no other
	 * body has taken a name the store let go meanwhile.
	 */
	reint_free(ri);
	reint_next(s);
}

/* The next STORE whose body comes, from @from on; ri->n if none. */
static uint32_t next_store(const struct reint_in *ri, uint32_t from)
{
	while (from < ri->n && ri->recs[from].op != LENTO_OP_STORE)
		from++;
	return from;
}

static bool last_store(const struct reint_in *ri, uint32_t i)
{
	return next_store(ri, i + 1) == ri->n;
}

/* Open the temporary file of the body of STORE @ri->cur. */
static int reint_body_begin(struct session *s, struct reint_in *ri)
{
	uint32_t i = ri->cur;

	/* The descriptor it returns is the file's: no second open. */
	ri->fd = store_body_tmp(s->srv->st, ri->paths[i],
				sizeof(ri->paths[i]));
	if (ri->fd < 0) {
		int err = ri->fd;

		ri->fd = -1;
		ri->paths[i][0] = 0;
		return err;
	}
	lp_stream_init(&ri->stream, i, ri->recs[i].attr.size,
		       last_store(ri, i));
	return 0;
}

static int write_all(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t k = write(fd, p, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		p = (const char *)p + k;
		n -= k;
	}
	return 0;
}

/*
 * The permit holder is sending its batch: it is alive, and its lease
 * lasts while the batch comes (a batch of many bodies may take longer to
 * send than a lease, and would otherwise be refused, sent again, and
 * refused again for good).
 */
static void holder_alive(struct session *s, uint32_t volume)
{
	struct permit *p = permit_get(s->srv, volume, false);

	if (p && p->holder == s->client)
		p->expires_ms = lease_expiry(s->srv);
}

static void do_data(struct session *s, const struct lp_frame *f)
{
	struct reint_in *ri = s->ri;
	struct lp_data d;
	const char *why;
	int r, err;

	if (s->discard) {	/* of a batch already refused */
		s->discard = f->flags & LP_F_MORE;
		return;
	}
	if (!ri || f->tag != ri->tag || ri->complete) {
		sess_close(s, -EBADMSG, "DATA: no batch of this tag wants a body");
		return;
	}
	if (lp_decode_data(f, &d, &why) ||
	    (r = lp_stream_data(&ri->stream, &d, &why)) < 0 ||
	    lp_chunk_decompress(&d, ri->chunk, LP_CHUNK_MAX, &why,
				&s->srv->zd)) {
		sess_close(s, -EBADMSG, "DATA: %s", why ? why : "bad chunk");
		return;
	}
	err = s->srv->test_body_enospc ? -ENOSPC :
	      write_all(ri->fd, ri->chunk, d.raw_len);
	if (!err && r == 1) {	/* the body is whole */
		body_whole(s, ri);
		ri->bodies[ri->cur].path = ri->paths[ri->cur];
		ri->bodies[ri->cur].fd = -1;
		ri->bodies[ri->cur].size = ri->recs[ri->cur].attr.size;
		ri->cur = next_store(ri, ri->cur + 1);
		if (!err && ri->cur < ri->n)
			err = reint_body_begin(s, ri);
	}
	if (err) {
		/* Our disk, not the peer: refuse the batch, keep the line. */
		s->discard = f->flags & LP_F_MORE;
		s->ri = NULL;
		sess_error(s, ri->tag, err, "writing a body: %s",
			   strerror(-err));
		reint_free(ri);
		return;
	}
	/* Its lease counts from now: writing the body took our time. */
	holder_alive(s, ri->volume);
	if (ri->cur == ri->n) {
		bodies_complete(s, ri);
	}
}

/* Every body came and is durable (or failed to be): the batch goes on. */
static void reint_ready(struct session *s)
{
	struct reint_in *ri = s->ri;
	int err = ri->sync_err;

	if (s->closing)
		return;		/* the client sends it again */
	if (err) {
		s->ri = NULL;
		sess_error(s, ri->tag, err, "writing a body out: %s",
			   strerror(-err));
		reint_free(ri);
		reint_next(s);
		return;
	}
	if (!ri->planned) {
		ri->planned = true;
		if (resizes_start(s, ri))
			return;		/* resize_done() comes back here */
	}
	reint_apply(s);
}

static int reint_copy(struct reint_in *ri, struct lp_list *l)
{
	uint32_t i;

	for (i = 0; i < ri->n; i++) {
		struct lento_rec *r = &ri->recs[i];

		size_t glen;
		uint8_t *p;

		if (lp_next_rec(l, r) != 1)
			return -EBADMSG;
		/*
		 * The frame goes before the batch is applied (its bodies
		 * come after it; a pipelined one waits): its data and
		 * groups are copied, into one block the batch owns.
		 */
		glen = 4 * (size_t)r->ngroups;
		if (!r->data_len && !glen)
			continue;
		p = malloc(r->data_len + glen);
		if (!p)
			return -ENOMEM;
		ri->data[i] = p;
		if (r->data_len) {
			memcpy(p, r->data, r->data_len);
			r->data = p;
		}
		if (glen) {
			memcpy(p + r->data_len, r->groups, glen);
			r->groups = p + r->data_len;
		}
	}
	return 0;
}

static void do_reintegrate(struct session *s, const struct lp_frame *f)
{
	struct server *srv = s->srv;
	struct reint_in *ri;
	struct lp_reint m;
	struct permit *p;
	const char *why;
	int err = -ENOMEM;

	if (lp_decode_reintegrate(f, &m, &why)) {
		sess_close(s, -EBADMSG, "REINTEGRATE: %s", why);
		return;
	}
	if ((s->ri && !s->ri->complete) || s->discard) {
		sess_close(s, -EBADMSG,
			   "REINTEGRATE: another batch is being sent");
		return;
	}
	/*
	 * The batch before it came whole and the server works on it: this
	 * one is judged once that one is answered (its records may follow
	 * that one's).
	 */
	if (s->ri) {
		s->ri_next_body = malloc(f->len ? f->len : 1);
		if (!s->ri_next_body) {
			s->discard = m.more;
			sess_error(s, f->tag, -ENOMEM, "out of memory");
			return;
		}
		memcpy(s->ri_next_body, f->body, f->len);
		s->ri_next = *f;
		s->ri_next.body = s->ri_next_body;
		return;
	}
	if (m.client != s->client) {
		s->discard = m.more;
		sess_error(s, f->tag, -EPERM, "a batch of client %" PRIu32
			   " from client %" PRIu32, m.client, s->client);
		return;
	}
	p = permit_get(srv, m.volume, false);
	if (!p || p->holder != s->client) {
		s->discard = m.more;
		refuse_permit(s, f->tag, m.volume, "not the permit's holder");
		return;
	}
	ri = calloc(1, sizeof(*ri));
	if (ri) {
		ri->tag = f->tag;
		ri->volume = m.volume;
		ri->fd = -1;
		ri->s = s;
		ri->recs = calloc(m.count, sizeof(*ri->recs));
		ri->data = calloc(m.count, sizeof(*ri->data));
		ri->bodies = calloc(m.count, sizeof(*ri->bodies));
		ri->paths = fault_at("server-reint-alloc") ? NULL :
			    calloc(m.count, sizeof(*ri->paths));
	}
	/* reint_free() walks n of data and paths: n once they all exist. */
	if (ri && ri->recs && ri->data && ri->bodies && ri->paths) {
		ri->n = m.count;
		err = reint_copy(ri, &m.recs);
	}
	/*
	 * A batch the apply would refuse (its record numbers, a body's
	 * size, the quota) is refused now, with the apply's answer: its
	 * bodies (each as large as the client says, up to 2^63 - 1) are
	 * dropped as they come, never written out. A check that could not
	 * judge (no memory, the database) refuses nothing: a refusal makes
	 * the client hold the volume's changes until a person steps in,
	 * for the store's trouble of a moment. The apply judges then.
	 */
	if (!err && m.stores) {
		struct store_result res = { .rec = -1 };
		int e = fault_at("server-reint-check") ? -ENOMEM :
			store_reintegrate_check(srv->st, m.volume, s->client,
						ri->recs, ri->n, &res);

		if (e) {
			log_warn("client %" PRIu32 ": volume %" PRIu32 ": a "
				 "batch not judged before its bodies (%s%s%s); "
				 "the apply judges it", s->client, m.volume,
				 strerror(-e), res.msg[0] ? ": " : "", res.msg);
		} else if (res.outcome != STORE_APPLIED) {
			s->discard = m.more;
			reint_reply(s, ri, &res);
			reint_free(ri);
			return;
		}
	}
	if (!err && m.stores) {
		ri->chunk = malloc(LP_CHUNK_MAX);
		err = ri->chunk ? 0 : -ENOMEM;
		if (!err) {
			ri->cur = next_store(ri, 0);
			err = reint_body_begin(s, ri);
		}
	}
	if (err) {
		s->discard = m.more;
		sess_error(s, f->tag, err, "cannot take the batch: %s",
			   strerror(-err));
		reint_free(ri);
		return;
	}
	s->ri = ri;
	if (!m.stores) {	/* whole: applied once its copies are made */
		ri->complete = true;
		reint_ready(s);
	}
}

/* ------------------------------------------------------------ sessions */

static void do_hello(struct session *s, const struct lp_frame *f)
{
	struct server *srv = s->srv;
	struct lp_hello_reply r = { 0 };
	struct lp_hello m;
	const char *why;
	unsigned int v;
	int err;

	if (lp_decode_hello(f, &m, &why)) {
		sess_close(s, -EBADMSG, "HELLO: %s", why);
		return;
	}
	v = lp_negotiate(&m);
	if (!v) {
		sess_error(s, f->tag, -EPROTONOSUPPORT,
			   "this server speaks versions %d to %d",
			   LP_VERSION_MIN, LP_VERSION_MAX);
		sess_close(s, 0, "no protocol version in common");
		return;
	}
	/*
	 * Each client may hold up to hundreds of MiB (a frame coming, its
	 * answers going, its requests waiting for a permit): the count is
	 * what bounds the server's memory and descriptors. The client tries
	 * again later (its backoff).
	 */
	if (srv->clients >= srv->clients_max) {
		sess_error(s, f->tag, -EAGAIN, "the server serves %u clients, "
			   "its most", srv->clients_max);
		sess_close(s, 0, "serving %u clients already",
			   srv->clients_max);
		log_warn("refused a client from %s: serving %u already",
			 lo_conn_peer(s->conn), srv->clients);
		return;
	}
	if (m.client) {
		err = store_client_check(srv->st, m.client, m.uuid);
		if (err == -EPERM || err == -ENOENT) {
			sess_error(s, f->tag, -EEXIST, err == -EPERM ?
				   "client id %" PRIu32 " belongs to another client" :
				   "client id %" PRIu32 " is not one of this server's",
				   m.client);
			sess_close(s, 0, "client id %" PRIu32 " refused",
				   m.client);
			return;
		}
	} else {
		/*
		 * An identity is a row kept for good (its id is in the fids
		 * it minted): a HELLO may make one, and the store holds
		 * only so many, so that connections with ever new uuids do
		 * not grow it without end. A known uuid still gets its id.
		 */
		err = store_client_register_max(srv->st, m.uuid,
						srv->identities_max,
						&m.client);
		if (err == -EDQUOT) {
			sess_error(s, f->tag, err, "the server registers at "
				   "most %u clients, and has",
				   srv->identities_max);
			sess_close(s, 0, "no new client identity: %u "
				   "registered already", srv->identities_max);
			log_warn("refused a new client from %s: %u client "
				 "identities registered, the most "
				 "(--max-identities)", lo_conn_peer(s->conn),
				 srv->identities_max);
			return;
		}
	}
	if (err) {
		sess_error(s, f->tag, err, "client identity: %s",
			   strerror(-err));
		sess_close(s, 0, "client identity: %s", strerror(-err));
		return;
	}
	s->client = m.client;
	memcpy(s->uuid, m.uuid, sizeof(s->uuid));
	s->ready = true;
	srv->greeting--;
	srv->clients++;
	r.version = v;
	r.client = s->client;
	r.epoch = srv->epoch;
	r.heartbeat_ms = srv->heartbeat_ms;
	if (!lp_encode_hello_reply(&srv->out, f->tag, &r))
		sess_flush(s);
	log_info("client %" PRIu32 " connected from %s (protocol %u)",
		 s->client, lo_conn_peer(s->conn), v);
}

static void handle_request(struct session *s, const struct lp_frame *f)
{
	s->requests++;
	switch (f->type) {
	case LP_GETATTR:
		do_getattr(s, f);
		break;
	case LP_READDIR:
		do_readdir(s, f);
		break;
	case LP_FETCH:
		do_fetch(s, f);
		break;
	case LP_VOLUME_LOOKUP:
		do_volume_lookup(s, f);
		break;
	case LP_VOLUME_VALIDATE:
		do_volume_validate(s, f);
		break;
	case LP_VALIDATE:
		do_validate(s, f);
		break;
	case LP_PERMIT_ACQUIRE:
	case LP_PERMIT_RENEW:
	case LP_PERMIT_RELEASE:
		do_permit(s, f);
		break;
	case LP_REINTEGRATE:
		do_reintegrate(s, f);
		break;
	default:
		sess_error(s, f->tag, -ENOSYS, "%s is not a request a server "
			   "answers", lp_type_name(f->type));
	}
}

static void handle_frame(struct session *s, const struct lp_frame *f)
{
	const char *why;
	uint64_t nonce;

	if (!s->ready) {
		do_hello(s, f);
		return;
	}
	switch (lp_type_kind(f->type)) {
	case LP_K_REQUEST:
		if (f->type == LP_PING) {
			if (lp_decode_ping(f, &nonce, &why)) {
				sess_close(s, -EBADMSG, "PING: %s", why);
				return;
			}
			/* At once: ahead of listings and bodies queued. */
			if (!lp_encode_ping(&s->srv->out, LP_PONG, f->tag,
					    nonce))
				sess_flush_first(s);
			return;
		}
		if (f->type == LP_HELLO) {
			sess_close(s, -EBADMSG, "HELLO: a second handshake");
			return;
		}
		handle_request(s, f);
		return;
	case LP_K_DATA:
		do_data(s, f);
		return;
	default:
		sess_close(s, -EBADMSG, "%s: not something a client sends",
			   lp_type_name(f->type));
	}
}

static ssize_t sess_data(struct lo_conn *c, const uint8_t *p, size_t len)
{
	struct session *s = lo_conn_ctx(c);
	size_t off = 0;

	s->heard_ms = lo_now_ms();
	while (off < len) {
		struct lp_frame f;
		const char *why = NULL;
		ssize_t n = lp_frame_parse(p + off, len - off, &f, &why);

		if (n < 0) {
			sess_close(s, -EBADMSG, "%s", why);
			return -EBADMSG;
		}
		/* Before the handshake: a HELLO, and a small one. */
		if (!s->ready && len - off >= LP_HDR_SIZE &&
		    (f.type != LP_HELLO || f.len > LP_HELLO_MAX)) {
			sess_close(s, -EBADMSG, "%s before the handshake",
				   lp_type_name(f.type));
			return -EBADMSG;
		}
		/*
		 * Its batch's bodies coming, whole or in part, keep the
		 * holder's lease; its PINGs do not, or a batch stalled with
		 * a revoke asked would keep the volume for ever.
		 */
		if (s->ri && f.type == LP_DATA && len - off >= LP_HDR_SIZE)
			holder_alive(s, s->ri->volume);
		if (!n)
			break;
		/*
		 * A batch waits behind the one the server works on: what
		 * comes of it, or of a batch after it, waits in the socket.
		 */
		if (s->ri_next_body && (f.type == LP_REINTEGRATE ||
					f.type == LP_DATA)) {
			s->held = true;
			lo_conn_hold(c);
			break;
		}
		handle_frame(s, &f);
		off += n;
		if (s->closing)	/* by a handler: the rest is not read */
			return len;
		if (off < len && lo_now_ms() - s->heard_ms >= LO_STEP_MS) {
			lo_conn_again(c);	/* the loop's turn first */
			break;
		}
	}
	return off;
}

static void sess_sent(struct lo_conn *c)
{
	struct session *s = lo_conn_ctx(c);

	if (s->fetch || s->lists)
		out_pump(s);
}

static void session_free(struct session *s)
{
	struct server *srv = s->srv;

	permits_forget_session(srv, s);
	if (s->ready)
		srv->clients--;
	else
		srv->greeting--;
	if (s->prev)
		s->prev->next = s->next;
	else
		srv->sessions = s->next;
	if (s->next)
		s->next->prev = s->prev;
	while (s->fetch)
		fetch_pop(s);
	s->closing = true;	/* nothing more goes out */
	while (s->lists)
		list_pop(s);
	free(s->behind.p);
	reint_free(s->ri);
	free(s->ri_next_body);
	fidset_free(&s->cbs);
	free(s->vols);
	free(s);
}

static void sess_closed(struct lo_conn *c, int err, const char *reason)
{
	struct session *s = lo_conn_ctx(c);

	if (s->ready)
		log_info("client %" PRIu32 " (%s) gone: %s%s%s", s->client,
			 lo_conn_peer(c), reason, err ? ": " : "",
			 err ? strerror(-err) : "");
	session_free(s);
}

static void sess_close(struct session *s, int err, const char *fmt, ...)
{
	char why[512];
	va_list ap;

	if (s->closing)
		return;
	s->closing = true;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (err == -EBADMSG)
		log_warn("closing connection from %s: %s",
			 lo_conn_peer(s->conn), why);
	lo_conn_close(s->conn, err, why);
	/* Deferred requests of a closing session are not run. */
	permits_forget_session(s->srv, s);
}

static const struct lo_conn_ops sess_ops = {
	.data = sess_data, .closed = sess_closed, .sent = sess_sent,
};

static int accept_client(struct lo_listener *l, struct lo_conn *c, void *arg)
{
	struct server *srv = arg;
	struct session *s = calloc(1, sizeof(*s));

	(void)l;
	if (!s)
		return -ENOMEM;
	if (srv->greeting >= srv->greeting_max) {
		free(s);
		log_warn("refused a connection from %s: %u await their "
			 "handshake already", lo_conn_peer(c), srv->greeting);
		return -EAGAIN;
	}
	srv->greeting++;
	s->srv = srv;
	s->conn = c;
	s->heard_ms = s->since_ms = lo_now_ms();
	s->fetch_tail = &s->fetch;
	s->lists_tail = &s->lists;
	fidset_init(&s->cbs);
	s->next = srv->sessions;
	if (srv->sessions)
		srv->sessions->prev = s;
	srv->sessions = s;
	lo_conn_set_max_in(c, LP_HDR_SIZE + LP_FRAME_MAX);
	lo_conn_set_max_out(c, srv->out_max);
	lo_conn_set(c, &sess_ops, s);
	return 0;
}

/* -------------------------------------------------------------- ticks */

static void tick(struct lo_loop *loop, void *arg)
{
	struct server *srv = arg;
	uint64_t now = lo_now_ms(), stalled;
	struct session *s, *next;
	struct permit *p;

	(void)loop;
	/*
	 * A commit (a batch's, a volume's) whose outcome nobody knows: only
	 * opening the store again tells. Serving on would answer every
	 * request EIO; stopping lets the supervisor start the server again
	 * (a new epoch), and the client send its batch again, skipped if it
	 * was applied.
	 */
	if (store_broken(srv->st) && !srv->broken) {
		log_err("the store's commit failed with an unknown outcome: "
			"stopping, to be started again");
		srv->broken = true;
		lo_stop(srv->loop);
		return;
	}
	/*
	 * The server stood still (a long batch, a slow disk): what the
	 * clients sent meanwhile is still unread -- renewals too -- so
	 * their silence counts from now, and leases move on by as long.
	 */
	stalled = srv->ticked_ms && now - srv->ticked_ms > STALL_MS ?
		  now - srv->ticked_ms : 0;
	for (s = srv->sessions; s; s = s->next) {
		/* Its frames wait for us, not it for us: not silent. */
		if (stalled || s->held)
			s->heard_ms = now;
		/* A batch that came whole waits for the server's work. */
		if (s->ri && s->ri->complete && !s->closing)
			holder_alive(s, s->ri->volume);
	}
	for (p = srv->permits; p; p = p->next) {
		struct deferred **dp, *d;

		if (p->holder) {
			p->expires_ms += stalled;
			p->revoke_end_ms += stalled;
		}
		if (p->holder && now >= p->expires_ms)
			permit_free_holder(p, "expired (lease over)");
		/* Requests that waited too long. */
		for (dp = &p->head; (d = *dp);) {
			if (now < d->deadline_ms) {
				dp = &d->next;
				continue;
			}
			*dp = d->next;
			sess_error(d->s, d->tag, -ETIMEDOUT,
				   "volume %" PRIu32 "'s permit holder did "
				   "not give it back in time", p->volume);
			deferred_free(d);
		}
		p->tail = dp;
	}
	srv->ticked_ms = now;
	for (s = srv->sessions; s; s = next) {
		next = s->next;
		if (!s->closing && now - s->heard_ms > srv->gone_ms)
			sess_close(s, -ETIMEDOUT, "silent for %" PRIu64 " ms",
				   now - s->heard_ms);
		else if (!s->closing && !s->ready &&
			 now - s->since_ms > srv->gone_ms)
			sess_close(s, -ETIMEDOUT, "no HELLO in %" PRIu64
				   " ms", now - s->since_ms);
	}
}

static void on_signal(struct lo_loop *loop, int signo, void *arg)
{
	struct server *srv = arg;

	srv->stop_signal = signo;
	lo_stop(loop);
}

/* ------------------------------------------------------------ control */

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	case 't': case 'T': v <<= 40; end++; break;
	}
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

static void volume_json(struct jw *w, const struct store_volume *v)
{
	jw_obj_begin(w);
	jw_key(w, "id");
	jw_uint(w, v->id);
	jw_key(w, "name");
	jw_str(w, v->name);
	jw_key(w, "stamp");
	jw_uint(w, v->stamp);
	jw_key(w, "quota");
	jw_uint(w, v->quota);
	jw_key(w, "usage");
	jw_uint(w, v->usage);
	jw_key(w, "objects");
	jw_uint(w, v->objects);
	jw_obj_end(w);
}

static int list_volume(void *arg, const struct store_volume *v)
{
	struct ctl_req *r = arg;
	struct jw *w = ctl_out(r);

	if (ctl_json(r))
		volume_json(w, v);
	else
		jw_printf(w, "%-6" PRIu32 " %-20s %12" PRIu64 " %12" PRIu64
			  " %10" PRIu64 " %10" PRIu64 "\n", v->id, v->name,
			  v->usage, v->quota, v->objects, v->stamp);
	return 0;
}

static int cmd_volume(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	struct server *srv = ctx;
	struct store_volume v;
	uint64_t quota = 0;
	uint32_t uid = 0, gid = 0;
	char err[256] = "";
	int e, i;

	if (!strcmp(argv[0], "list")) {
		if (ctl_json(r))
			jw_arr_begin(ctl_out(r));
		else
			jw_printf(ctl_out(r), "%-6s %-20s %12s %12s %10s %10s\n",
				  "ID", "NAME", "USAGE", "QUOTA", "OBJECTS",
				  "STAMP");
		e = store_volume_list(srv->st, list_volume, r);
		if (ctl_json(r)) {
			jw_arr_end(ctl_out(r));
			jw_raw(ctl_out(r), "\n", 1);
		}
		return e;
	}
	if (argc < 2) {
		ctl_error(r, "usage: volume create|remove|quota NAME ...");
		return -EINVAL;
	}
	if (!strcmp(argv[0], "create")) {
		for (i = 2; i < argc; i++) {
			if (!strncmp(argv[i], "quota=", 6) &&
			    !parse_size(argv[i] + 6, &quota))
				continue;
			if (!strncmp(argv[i], "owner=", 6) &&
			    sscanf(argv[i] + 6, "%" SCNu32 ":%" SCNu32, &uid,
				   &gid) == 2)
				continue;
			ctl_error(r, "volume create NAME [quota=SIZE] "
				  "[owner=UID:GID]: what is '%s'?", argv[i]);
			return -EINVAL;
		}
		e = store_volume_create(srv->st, argv[1], quota, uid, gid, &v,
					err, sizeof(err));
		if (e) {
			ctl_error(r, "%s", err[0] ? err : strerror(-e));
			return e;
		}
		log_info("volume %s created (id %" PRIu32 ", quota %" PRIu64
			 ")", v.name, v.id, v.quota);
		if (ctl_json(r)) {
			volume_json(ctl_out(r), &v);
			jw_raw(ctl_out(r), "\n", 1);
		} else {
			jw_printf(ctl_out(r), "volume %s created, id %" PRIu32
				  "\n", v.name, v.id);
		}
		return 0;
	}
	if (!strcmp(argv[0], "remove") && argc == 2) {
		e = store_volume_lookup(srv->st, argv[1], &v);
		if (!e)
			e = store_volume_remove(srv->st, argv[1], err,
						sizeof(err));
		if (e) {
			ctl_error(r, "%s", err[0] ? err : e == -ENOENT ?
				  "no such volume" : strerror(-e));
			return e;
		}
		break_volume(srv, v.id, 0);
		log_info("volume %s removed", argv[1]);
		jw_printf(ctl_out(r), ctl_json(r) ? "{}\n" :
			  "volume %s removed\n", argv[1]);
		return 0;
	}
	if (!strcmp(argv[0], "quota") && argc == 3) {
		if (parse_size(argv[2], &quota)) {
			ctl_error(r, "bad size %s", argv[2]);
			return -EINVAL;
		}
		e = store_volume_set_quota(srv->st, argv[1], quota, err,
					   sizeof(err));
		if (e) {
			ctl_error(r, "%s", err[0] ? err : strerror(-e));
			return e;
		}
		jw_printf(ctl_out(r), ctl_json(r) ? "{}\n" :
			  "volume %s: quota %" PRIu64 " bytes\n", argv[1],
			  quota);
		return 0;
	}
	ctl_error(r, "usage: volume list | create NAME [quota=SIZE] "
		  "[owner=UID:GID] | remove NAME | quota NAME SIZE");
	return -EINVAL;
}

static int cmd_status(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	struct server *srv = ctx;
	struct jw *w = ctl_out(r);
	uint64_t now = lo_now_ms();
	struct session *s;
	struct permit *p;
	uint64_t identities = 0;
	int i;

	(void)argc;
	(void)argv;
	/* A store that cannot count says 0: status is for people. */
	(void)store_client_count(srv->st, &identities);
	if (!ctl_json(r)) {
		jw_printf(w, "lento server, store %s, epoch %" PRIu64 "\n",
			  srv->opt->store, srv->epoch);
		for (i = 0; i < srv->nlistening; i++)
			jw_printf(w, "listening on %s\n", srv->listening[i]);
		jw_printf(w, "client identities: %" PRIu64 " of at most %u\n",
			  identities, srv->identities_max);
		jw_printf(w, "clients (%u of at most %u):\n", srv->clients,
			  srv->clients_max);
		for (s = srv->sessions; s; s = s->next)
			if (s->ready)
				jw_printf(w, "  client %-6" PRIu32 " %-28s "
					  "%8zu callbacks, %" PRIu64
					  " requests, idle %" PRIu64 " ms\n",
					  s->client, lo_conn_peer(s->conn),
					  s->cbs.count, s->requests,
					  now - s->heard_ms);
		jw_printf(w, "permits:\n");
		for (p = srv->permits; p; p = p->next)
			if (p->holder)
				jw_printf(w, "  volume %-6" PRIu32 " client %-6"
					  PRIu32 " %" PRIu64 " ms left%s\n",
					  p->volume, p->holder,
					  p->expires_ms - now,
					  p->revoked ? ", revoked" : "");
		return 0;
	}
	jw_obj_begin(w);
	jw_key(w, "store");
	jw_str(w, srv->opt->store);
	jw_key(w, "epoch");
	jw_uint(w, srv->epoch);
	jw_key(w, "listening");
	jw_arr_begin(w);
	for (i = 0; i < srv->nlistening; i++)
		jw_str(w, srv->listening[i]);
	jw_arr_end(w);
	jw_key(w, "clients_max");
	jw_uint(w, srv->clients_max);
	jw_key(w, "identities");
	jw_uint(w, identities);
	jw_key(w, "identities_max");
	jw_uint(w, srv->identities_max);
	jw_key(w, "clients");
	jw_arr_begin(w);
	for (s = srv->sessions; s; s = s->next) {
		if (!s->ready)
			continue;
		jw_obj_begin(w);
		jw_key(w, "client");
		jw_uint(w, s->client);
		jw_key(w, "peer");
		jw_str(w, lo_conn_peer(s->conn));
		jw_key(w, "callbacks");
		jw_uint(w, s->cbs.count);
		jw_key(w, "volume_callbacks");
		jw_uint(w, s->nvols);
		jw_key(w, "requests");
		jw_uint(w, s->requests);
		jw_key(w, "idle_ms");
		jw_uint(w, now - s->heard_ms);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_key(w, "permits");
	jw_arr_begin(w);
	for (p = srv->permits; p; p = p->next) {
		if (!p->holder)
			continue;
		jw_obj_begin(w);
		jw_key(w, "volume");
		jw_uint(w, p->volume);
		jw_key(w, "client");
		jw_uint(w, p->holder);
		jw_key(w, "lease_left_ms");
		jw_uint(w, p->expires_ms - now);
		jw_key(w, "revoked");
		jw_bool(w, p->revoked);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_obj_end(w);
	jw_raw(w, "\n", 1);
	return 0;
}

static const struct ctl_cmd server_cmds[] = {
	{ "status", NULL, "clients, permits, epoch", 0, 0, cmd_status },
	{ "volume", "list|create|remove|quota ...",
	  "administer volumes", 1, 5, cmd_volume },
	{ 0 }
};

/* ---------------------------------------------------------------- main */

/*
 * LENTO_TEST_DELAY_COMMIT_MS=N: every batch waits N ms with its bodies in
 * place and before its COMMIT, so a test can kill the server there. The
 * whole server waits (the store is used from the loop): a test hook only.
 */
struct test_delays {
	unsigned int commit_ms, resize_ms;
};

static int delay_commit(void *arg, enum store_fault where, struct sqlite3 *db)
{
	const struct test_delays *t = arg;
	unsigned int ms = t->commit_ms;

	(void)db;
	if (where == STORE_FAULT_RESIZE && t->resize_ms) {
		log_warn("LENTO_TEST_DELAY_RESIZE_MS: a size change's copy "
			 "waits %u ms", t->resize_ms);
		usleep(t->resize_ms * 1000u);
		return 0;
	}
	if (where != STORE_FAULT_COMMIT || !ms)
		return 0;
	log_warn("LENTO_TEST_DELAY_COMMIT_MS: holding a batch %u ms before "
		 "its COMMIT", ms);
	usleep(ms * 1000u);
	return 0;
}

static void test_hooks(struct server *srv)
{
	static struct test_delays t;
	const char *v = getenv("LENTO_TEST_DIR_MAX");

	/* Listings of more entries refused: a test's LP_DIR_MAX. */
	srv->dir_max = v && *v ? strtoul(v, NULL, 10) : 0;
	if (!srv->dir_max || srv->dir_max > LP_DIR_MAX)
		srv->dir_max = LP_DIR_MAX;
	else
		log_warn("LENTO_TEST_DIR_MAX: listings of more than %zu "
			 "entries are refused", srv->dir_max);
	/* A session's output bound lower than the loop's 256 MiB. */
	v = getenv("LENTO_TEST_OUT_MAX");
	srv->out_max = v && *v ? strtoul(v, NULL, 10) : 0;
	if (srv->out_max)
		log_warn("LENTO_TEST_OUT_MAX: a client may have %zu bytes "
			 "queued to it", srv->out_max);
	v = getenv("LENTO_TEST_BODY_ENOSPC");
	/* Every body refused as if the store's disk were full. */
	srv->test_body_enospc = v && *v && strcmp(v, "0");
	if (srv->test_body_enospc)
		log_warn("LENTO_TEST_BODY_ENOSPC: every body is refused");
	v = getenv("LENTO_TEST_DELAY_COMMIT_MS");
	t.commit_ms = v && *v ? (unsigned int)strtoul(v, NULL, 10) : 0;
	/* A size change's copy that takes that long: a big file's. */
	v = getenv("LENTO_TEST_DELAY_RESIZE_MS");
	t.resize_ms = v && *v ? (unsigned int)strtoul(v, NULL, 10) : 0;
	if (t.commit_ms || t.resize_ms)
		store_set_fault(srv->st, delay_commit, &t);
}

static int server_listen(struct server *srv)
{
	const struct server_opts *o = srv->opt;
	const char *defaults[] = { DEFAULT_PORT_V4, DEFAULT_PORT_V6 };
	const char *const *addrs = o->nlisten ? o->listen : defaults;
	int n = o->nlisten ? o->nlisten : 2, i;

	for (i = 0; i < n; i++) {
		struct lo_listener *l;
		char err[256];
		int e = lo_listen(srv->loop, addrs[i], accept_client, srv, &l,
				  err, sizeof(err));

		if (e) {
			/* A host without IPv6 still serves the default v4. */
			if (!o->nlisten && i == 1) {
				log_info("%s (serving IPv4 only)", err);
				continue;
			}
			log_err("%s", err);
			return e;
		}
		snprintf(srv->listening[srv->nlistening++],
			 sizeof(srv->listening[0]), "%s", lo_listener_addr(l));
		log_info("listening on %s", lo_listener_addr(l));
	}
	return 0;
}

static void server_free(struct server *srv)
{
	while (srv->permits) {
		struct permit *p = srv->permits;

		srv->permits = p->next;
		while (p->head) {
			struct deferred *d = p->head;

			p->head = d->next;
			free(d);
		}
		free(p);
	}
	/* Bodies synced meanwhile go with their batches, unapplied. */
	srv->stopping = true;
	wk_stop(srv->wk);
	srv->wk = NULL;
	lo_loop_free(srv->loop);	/* the sessions go with it */
	store_close(srv->st);
	lp_buf_free(&srv->out);
	free(srv->frame);
	lp_zd_free(&srv->zd);
}

int server_main(const struct server_opts *o)
{
	struct server srv = { .opt = o };
	char err[512], path[4096];
	int e;

	srv.lease_ms = o->lease_ms ? o->lease_ms : SERVER_LEASE_MS;
	srv.heartbeat_ms = o->heartbeat_ms ? o->heartbeat_ms : LP_PING_MS;
	srv.body_fds_max = (o->fds ? o->fds : 1024) / 2;
	if (srv.body_fds_max < BODY_FDS_MIN)
		srv.body_fds_max = BODY_FDS_MIN;
	/* A client's socket and a file of its, beside the bodies' half. */
	srv.clients_max = o->clients_max ? o->clients_max : SERVER_CLIENTS_MAX;
	if (o->fds && srv.clients_max > o->fds / 4)
		srv.clients_max = o->fds / 4 ? o->fds / 4 : 1;
	srv.identities_max = o->identities_max ? o->identities_max :
			     SERVER_IDENTITIES_MAX;
	srv.gone_ms = 3 * srv.heartbeat_ms;
	srv.greeting_max = srv.clients_max > SERVER_GREETING_MIN ?
			   srv.clients_max : SERVER_GREETING_MIN;
	e = store_open(o->store, &srv.st, err, sizeof(err));
	if (e) {
		log_err("%s", err);
		return 1;
	}
	srv.epoch = store_epoch(srv.st);
	test_hooks(&srv);
	e = lo_loop_new(&srv.loop);
	if (e) {
		log_err("io_uring: %s", strerror(-e));
		store_close(srv.st);
		return 1;
	}
	e = wk_start(srv.loop, &srv.wk);
	if (e) {
		log_err("the worker thread: %s", strerror(-e));
		server_free(&srv);
		return 1;
	}
	snprintf(path, sizeof(path), "%s/control.sock", o->store);
	srv.ctl.cmds = server_cmds;
	srv.ctl.ctx = &srv;
	e = server_listen(&srv);
	if (!e)
		e = ctl_listen(srv.loop, o->control ? o->control : path,
			       &srv.ctl, err, sizeof(err));
	if (e && !err[0])
		snprintf(err, sizeof(err), "%s", strerror(-e));
	if (!e)
		e = lo_timer(srv.loop, TICK_MS, tick, &srv);
	lo_set_stall(srv.loop, LOG_STALL_MS, log_stall, NULL);
	if (!e)
		e = lo_signal(srv.loop, SIGTERM, on_signal, &srv);
	if (!e)
		e = lo_signal(srv.loop, SIGINT, on_signal, &srv);
	if (e) {
		log_err("cannot start: %s", err);
		server_free(&srv);
		return 1;
	}
	log_info("serving store %s, epoch %" PRIu64 ", lease %" PRIu32
		 " ms, heartbeat %" PRIu32 " ms", o->store, srv.epoch,
		 srv.lease_ms, srv.heartbeat_ms);
	e = lo_run(srv.loop);
	if (e)
		log_err("event loop: %s", strerror(-e));
	else if (!srv.broken)
		log_info("stopping (signal %d)", srv.stop_signal);
	server_free(&srv);
	return e || srv.broken ? 1 : 0;
}
