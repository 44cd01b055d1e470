// SPDX-License-Identifier: MIT
/*
 * A lento client's connection to its server (conn.h).
 *
 * Requests in flight are a short array scanned by tag: a client has few
 * at a time (a ctl command's fetches, one batch, one PING).
 */
#include "array.h"
#include "conn.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

struct pending {
	uint32_t tag;
	uint16_t type;
	conn_reply_fn fn;	/* NULL: forgotten, frames dropped */
	void *arg;
	uint64_t heard_ms;	/* sent, or the last frame of its answer */
};

struct conn {
	struct lo_loop *loop;
	char addr[256];
	const struct conn_ops *ops;
	void *arg;
	enum conn_state state;
	struct lo_conn *lc;
	struct lp_buf out;
	uint32_t next_tag;
	uint32_t hello_tag, ping_tag;	/* 0: none in flight */
	uint64_t since_ms;		/* the attempt began */
	uint64_t heard_ms, pinged_ms;
	size_t unacked;		/* lo_conn_unacked() when last asked */
	uint64_t ticked_ms;		/* the last conn_tick() */
	uint64_t plan_ms;		/* the next is due by (conn_plan()) */
	uint64_t retry_at, backoff_ms;
	uint32_t heartbeat_ms;
	struct pending *pend;
	uint64_t replied_ms;	/* the last frame answering a request */
	size_t npend, cappend;
	char last_error[1400];
	bool failing;			/* attempts fail: log them quietly */
	bool closing;			/* lo_conn_close() called */
	bool held;			/* busy(): frames left unread */
};

static const struct lo_conn_ops lc_ops;

const char *conn_state_name(enum conn_state s)
{
	switch (s) {
	case CONN_IDLE:
		return "disconnected";
	case CONN_CONNECTING:
		return "connecting";
	case CONN_HANDSHAKE:
		return "handshake";
	case CONN_READY:
		return "connected";
	}
	return "?";
}

int conn_new(struct lo_loop *loop, const char *addr,
	     const struct conn_ops *ops, void *arg, struct conn **out)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	if (snprintf(c->addr, sizeof(c->addr), "%s", addr) >=
	    (int)sizeof(c->addr)) {
		free(c);
		return -ENAMETOOLONG;
	}
	c->loop = loop;
	c->ops = ops;
	c->arg = arg;
	c->state = CONN_IDLE;
	c->backoff_ms = CONN_BACKOFF_MIN_MS;
	c->heartbeat_ms = LP_PING_MS;
	*out = c;
	return 0;
}

/* Fail every request in flight (the connection went). */
static void fail_pending(struct conn *c)
{
	while (c->npend) {
		struct pending p = c->pend[--c->npend];
		const char *why;

		if (p.fn)
			p.fn(p.arg, NULL, -ENOTCONN, &why);
	}
	c->hello_tag = c->ping_tag = 0;
}

void conn_free(struct conn *c)
{
	if (!c)
		return;
	if (c->lc) {
		/* Its closed() comes later and finds no conn. */
		lo_conn_set(c->lc, &lc_ops, NULL);
		if (!c->closing)
			lo_conn_close(c->lc, -ECANCELED, "lento is stopping");
	}
	c->state = CONN_IDLE;
	fail_pending(c);
	lp_buf_free(&c->out);
	free(c->pend);
	free(c);
}

enum conn_state conn_state(const struct conn *c)
{
	return c->closing ? CONN_IDLE : c->state;
}

const char *conn_addr(const struct conn *c)
{
	return c->addr;
}

const char *conn_last_error(const struct conn *c)
{
	return c->last_error;
}

bool conn_failing(const struct conn *c)
{
	return c->failing;
}

uint64_t conn_retry_at(const struct conn *c)
{
	return c->retry_at;
}

uint32_t conn_heartbeat_ms(const struct conn *c)
{
	return c->heartbeat_ms;
}

uint32_t conn_tag(struct conn *c)
{
	/* Skip 0 and any tag still in flight (after a wrap). */
	for (;;) {
		bool used = false;

		if (!++c->next_tag)
			continue;
		for (size_t i = 0; i < c->npend; i++)
			used |= c->pend[i].tag == c->next_tag;
		if (!used)
			return c->next_tag;
	}
}

struct lp_buf *conn_buf(struct conn *c)
{
	return &c->out;
}

size_t conn_queued(const struct conn *c)
{
	return c->lc && c->state == CONN_READY ? lo_conn_queued(c->lc) : 0;
}

/* Close (once); what is in flight fails when closed() runs. */
static void drop(struct conn *c, int err, const char *why)
{
	if (!c->lc || c->closing)
		return;
	c->closing = true;
	if (why != c->last_error)
		snprintf(c->last_error, sizeof(c->last_error), "%s", why);
	lo_conn_close(c->lc, err, why);
}

void conn_close(struct conn *c, int err, const char *why)
{
	if (err == -EBADMSG && c->lc && !c->closing)
		log_warn("closing the connection to %s: %s", c->addr, why);
	drop(c, err, why);
}

int conn_send(struct conn *c)
{
	int err = 0;

	if (conn_state(c) != CONN_READY)
		err = -ENOTCONN;
	else if (c->out.len)
		err = lo_conn_send(c->lc, c->out.p, c->out.len);
	c->out.len = 0;
	if (err == -ENOBUFS)
		conn_close(c, err, "the server does not read what it is sent");
	return err;
}

static int add_pending(struct conn *c, uint32_t tag, unsigned int type,
		       conn_reply_fn fn, void *arg)
{
	struct pending *p = array_grow(c->pend, &c->cappend, c->npend, 1,
				       sizeof(*p));

	if (!p)
		return -ENOMEM;
	c->pend = p;
	c->pend[c->npend++] = (struct pending){ tag, (uint16_t)type, fn, arg,
						lo_now_ms() };
	return 0;
}

int conn_request(struct conn *c, uint32_t tag, unsigned int type,
		 conn_reply_fn fn, void *arg)
{
	int err;

	if (conn_state(c) != CONN_READY) {
		c->out.len = 0;
		return -ENOTCONN;
	}
	err = add_pending(c, tag, type, fn, arg);
	if (err) {
		c->out.len = 0;
		return err;
	}
	/* If the send fails, the close it causes fails the request. */
	conn_send(c);
	return 0;
}

void conn_forget(struct conn *c, uint32_t tag)
{
	for (size_t i = 0; i < c->npend; i++)
		if (c->pend[i].tag == tag)
			c->pend[i].fn = NULL;
}

static struct pending *find_pending(struct conn *c, uint32_t tag)
{
	for (size_t i = 0; i < c->npend; i++)
		if (c->pend[i].tag == tag)
			return &c->pend[i];
	return NULL;
}

uint64_t conn_heard_ms(struct conn *c, uint32_t tag)
{
	struct pending *p = c ? find_pending(c, tag) : NULL;

	if (!p)
		return 0;
	return p->heard_ms > c->replied_ms ? p->heard_ms : c->replied_ms;
}

/* ------------------------------------------------------------ frames */

static int on_hello_reply(struct conn *c, const struct lp_frame *f,
			  const char **why)
{
	struct lp_hello_reply r;
	struct lp_error e;
	char msg[LP_MSG_MAX + 1];
	int err;

	if (f->tag != c->hello_tag) {
		*why = "a frame before the handshake's answer";
		return -EBADMSG;
	}
	c->hello_tag = 0;
	if (f->type == LP_ERROR) {
		if (lp_decode_error(f, &e, why))
			return -EBADMSG;
		snprintf(msg, sizeof(msg), "%.*s", (int)e.msg_len, e.msg);
		snprintf(c->last_error, sizeof(c->last_error),
			 "the server refused the handshake: %s (%s)", msg,
			 lp_err_name(e.code));
		log_err("%s: %s", c->addr, c->last_error);
		drop(c, -lp_err_to_errno(e.code), c->last_error);
		return 0;
	}
	if (f->type != LP_HELLO_REPLY) {
		*why = "the handshake's answer is not a HELLO_REPLY";
		return -EBADMSG;
	}
	if (lp_decode_hello_reply(f, &r, why))
		return -EBADMSG;
	c->state = CONN_READY;
	c->heartbeat_ms = r.heartbeat_ms;
	c->backoff_ms = CONN_BACKOFF_MIN_MS;
	c->failing = false;
	c->last_error[0] = 0;
	c->pinged_ms = lo_now_ms();
	err = c->ops->up(c->arg, &r);
	if (err) {
		/* Never ready after all: an attempt that failed (failing). */
		c->state = CONN_HANDSHAKE;
		drop(c, err, "the client refused the handshake");
	}
	return 0;
}

static int on_pong(struct conn *c, const struct lp_frame *f, const char **why)
{
	uint64_t nonce;

	c->ping_tag = 0;
	if (f->type == LP_ERROR)
		return 0;	/* answered all the same: the server is there */
	if (f->type != LP_PONG) {
		*why = "a PING answered by something else than PONG";
		return -EBADMSG;
	}
	return lp_decode_ping(f, &nonce, why) ? -EBADMSG : 0;
}

static int on_reply(struct conn *c, const struct lp_frame *f,
		    const char **why)
{
	struct pending *p = find_pending(c, f->tag);
	struct pending copy;
	bool last = !(f->flags & LP_F_MORE);

	if (!p) {
		*why = "a reply to no request in flight";
		return -EBADMSG;
	}
	if (f->tag == c->ping_tag) {
		*p = c->pend[--c->npend];
		return on_pong(c, f, why);
	}
	p->heard_ms = c->replied_ms = lo_now_ms();
	copy = *p;
	/* The last frame ends the request before its fn runs. */
	if (last)
		*p = c->pend[--c->npend];
	return copy.fn ? copy.fn(copy.arg, f, 0, why) : 0;
}

static int on_frame(struct conn *c, const struct lp_frame *f,
		    const char **why)
{
	if (c->state == CONN_HANDSHAKE)
		return on_hello_reply(c, f, why);
	switch (lp_type_kind(f->type)) {
	case LP_K_PUSH:
		return c->ops->push(c->arg, f, why);
	case LP_K_REPLY:
	case LP_K_DATA:
		return on_reply(c, f, why);
	default:
		*why = "a request sent to a client";
		return -EBADMSG;
	}
}

static ssize_t lc_data(struct lo_conn *lc, const uint8_t *p, size_t len)
{
	struct conn *c = lo_conn_ctx(lc);
	size_t off = 0;

	if (!c)
		return len;
	c->heard_ms = lo_now_ms();
	while (off < len && !c->closing &&
	       (c->state == CONN_HANDSHAKE || c->state == CONN_READY)) {
		struct lp_frame f;
		const char *why = "malformed";
		ssize_t n = lp_frame_parse(p + off, len - off, &f, &why);
		int err;

		if (n == 0)
			break;
		if (n > 0) {
			err = on_frame(c, &f, &why);
			off += n;
			if (!err && !c->closing && c->ops->busy &&
			    c->ops->busy(c->arg)) {
				c->held = true;
				lo_conn_hold(lc);
				break;
			}
			if (!err && off < len && !c->closing &&
			    lo_now_ms() - c->heard_ms >= LO_STEP_MS) {
				lo_conn_again(lc);	/* the loop's turn */
				break;
			}
			if (!err)
				continue;
		}
		snprintf(c->last_error, sizeof(c->last_error), "%s: %s",
			 lp_type_name(f.type), why);
		log_warn("closing the connection to %s: %s", c->addr,
			 c->last_error);
		drop(c, -EBADMSG, c->last_error);
		return len;
	}
	/* Closing: what is left is not read. */
	return c->closing ? (ssize_t)len : (ssize_t)off;
}

static void send_hello(struct conn *c)
{
	struct lp_hello m = { .vmin = LP_VERSION_MIN, .vmax = LP_VERSION_MAX };
	int err;

	c->ops->hello(c->arg, &m);
	c->hello_tag = conn_tag(c);
	err = lp_encode_hello(&c->out, c->hello_tag, &m);
	if (!err)
		err = lo_conn_send(c->lc, c->out.p, c->out.len);
	c->out.len = 0;
	if (err)
		drop(c, err, "cannot send HELLO");
}

static void lc_connected(struct lo_conn *lc, int err)
{
	struct conn *c = lo_conn_ctx(lc);

	if (!c || err)
		return;		/* closed() follows */
	c->state = CONN_HANDSHAKE;
	c->heard_ms = lo_now_ms();
	lo_conn_set_max_in(lc, LP_HDR_SIZE + LP_FRAME_MAX);
	send_hello(c);
}

static void lc_closed(struct lo_conn *lc, int err, const char *reason)
{
	struct conn *c = lo_conn_ctx(lc);
	bool was_ready;
	char why[300];

	if (!c || c->lc != lc)
		return;
	was_ready = c->state == CONN_READY;
	c->lc = NULL;
	c->state = CONN_IDLE;
	c->closing = false;
	c->held = false;
	snprintf(why, sizeof(why), "%s%s%s", reason ? reason : "",
		 reason && err ? ": " : "", err ? strerror(-err) : "");
	if (!c->last_error[0])
		snprintf(c->last_error, sizeof(c->last_error), "%s", why);
	c->retry_at = lo_now_ms() + c->backoff_ms;
	if (was_ready || !c->failing)
		log_warn("server %s %s: %s (next attempt in %" PRIu64 " ms)",
			 c->addr, was_ready ? "gone" : "unreachable", why,
			 c->backoff_ms);
	else
		log_debug("server %s unreachable: %s", c->addr, why);
	c->failing = !was_ready;
	c->backoff_ms = c->backoff_ms * 2 > CONN_BACKOFF_MAX_MS ?
			CONN_BACKOFF_MAX_MS : c->backoff_ms * 2;
	fail_pending(c);
	c->out.len = 0;
	c->ops->down(c->arg, err, why);
}

static void lc_sent(struct lo_conn *lc)
{
	struct conn *c = lo_conn_ctx(lc);

	if (c && c->state == CONN_READY && c->ops->sent)
		c->ops->sent(c->arg);
}

static const struct lo_conn_ops lc_ops = {
	.data = lc_data, .connected = lc_connected, .closed = lc_closed,
	.sent = lc_sent,
};

/* -------------------------------------------------------------- ticks */

static void try_connect(struct conn *c, uint64_t now)
{
	char err[256] = "";
	int e;

	c->since_ms = c->heard_ms = now;
	c->last_error[0] = 0;
	e = lo_connect(c->loop, c->addr, &lc_ops, c, &c->lc, err,
		       sizeof(err));
	if (e) {
		c->lc = NULL;
		snprintf(c->last_error, sizeof(c->last_error), "%s",
			 err[0] ? err : strerror(-e));
		if (!c->failing)
			log_warn("cannot connect to %s: %s", c->addr,
				 c->last_error);
		c->failing = true;
		c->retry_at = now + c->backoff_ms;
		c->backoff_ms = c->backoff_ms * 2 > CONN_BACKOFF_MAX_MS ?
				CONN_BACKOFF_MAX_MS : c->backoff_ms * 2;
		c->ops->down(c->arg, e, c->last_error);
		return;
	}
	c->state = CONN_CONNECTING;
}

static void send_ping(struct conn *c, uint64_t now)
{
	c->ping_tag = conn_tag(c);
	c->pinged_ms = now;
	if (lp_encode_ping(&c->out, LP_PING, c->ping_tag, now) ||
	    conn_request(c, c->ping_tag, LP_PING, NULL, NULL))
		c->ping_tag = 0;
}

void conn_plan(struct conn *c, uint64_t at_ms)
{
	if (at_ms > c->plan_ms)
		c->plan_ms = at_ms;
}

uint64_t conn_due_ms(const struct conn *c, uint64_t now)
{
	uint64_t gone = 3ull * c->heartbeat_ms, due;

	if (c->closing)
		return now;
	switch (c->state) {
	case CONN_IDLE:
		return c->retry_at;
	case CONN_CONNECTING:
	case CONN_HANDSHAKE:
		return c->since_ms + gone + 1;
	case CONN_READY:
		/* Unheard for a heartbeat: looked into at every tick. */
		due = c->heard_ms + c->heartbeat_ms + 1;
		if ((!c->ping_tag || c->held) &&
		    c->pinged_ms + c->heartbeat_ms < due)
			due = c->pinged_ms + c->heartbeat_ms;
		/*
		 * A tick planned this close to the silence's end is one a
		 * stall would delay past it unnoticed (conn_plan()): with
		 * heartbeats under CONN_STALL_MS / 2.
		 */
		if (c->heard_ms + gone < due + CONN_STALL_MS)
			due = c->heard_ms + gone > CONN_STALL_MS + now ?
			      c->heard_ms + gone - CONN_STALL_MS : now;
		return due;
	}
	return now;
}

void conn_resume(struct conn *c)
{
	if (!c->held)
		return;
	c->held = false;
	/* What waited in the socket counts as heard from now. */
	c->heard_ms = lo_now_ms();
	if (c->lc && !c->closing)
		lo_conn_release(c->lc);
}

void conn_tick(struct conn *c, uint64_t now)
{
	uint64_t gone = 3ull * c->heartbeat_ms;
	size_t unacked;
	char why[128];

	/*
	 * This process stood still (a long transaction, a stop signal):
	 * what the server sent meanwhile is still unread, so its silence
	 * counts from now.
	 */
	if (c->ticked_ms && now > c->plan_ms + CONN_STALL_MS &&
	    c->heard_ms < now)
		c->heard_ms = now;
	c->ticked_ms = c->plan_ms = now;

	if (c->closing)
		return;
	switch (c->state) {
	case CONN_IDLE:
		if (now >= c->retry_at)
			try_connect(c, now);
		return;
	case CONN_CONNECTING:
	case CONN_HANDSHAKE:
		if (now - c->since_ms > gone)
			conn_close(c, -ETIMEDOUT, "no handshake in time");
		return;
	case CONN_READY:
		/*
		 * The server taking our bytes is not silent: on a slow line
		 * our PING, and so its PONG, waits behind a batch's bodies.
		 * (A dead server stops taking them, and then is silent.)
		 * Asked (an ioctl) only once a heartbeat passed unheard: an
		 * idle connection hears a PONG each heartbeat. Frames left
		 * unread (held) are not the server's silence either.
		 */
		if (c->held)
			c->heard_ms = now;
		if (now - c->heard_ms > c->heartbeat_ms) {
			unacked = lo_conn_unacked(c->lc);
			if (unacked && unacked < c->unacked)
				c->heard_ms = now;
			c->unacked = unacked;
		}
		if (now - c->heard_ms > gone) {
			snprintf(why, sizeof(why), "silent for %" PRIu64 " ms",
				 now - c->heard_ms);
			conn_close(c, -ETIMEDOUT, why);
			return;
		}
		/*
		 * Held, the PONG waits unread behind the frames: a PING each
		 * heartbeat all the same, or the server would take our
		 * silence for a client gone. An earlier one's PONG, read
		 * later, is a reply to a request with nobody waiting.
		 */
		if ((!c->ping_tag || c->held) &&
		    now - c->pinged_ms >= c->heartbeat_ms)
			send_ping(c, now);
		return;
	}
}
