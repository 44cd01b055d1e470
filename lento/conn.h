/* SPDX-License-Identifier: MIT */
/*
 * A lento client's connection to its server (protocol/PROTOCOL.md): the
 * handshake, requests by tag and their replies, pushes, heartbeats, and
 * reconnection.
 *
 * States: IDLE (no connection; the next attempt is due at a time),
 * CONNECTING, HANDSHAKE (HELLO sent), READY. From READY on, the client
 * PINGs every heartbeat_ms (the server's, from HELLO_REPLY) with at most
 * one PING in flight; when nothing at all has arrived for three heartbeats
 * the server is gone and the connection is closed. A connection attempt
 * or handshake that takes longer than that fails too. After a failure the
 * next attempt waits CONN_BACKOFF_MIN_MS, doubling up to
 * CONN_BACKOFF_MAX_MS; a handshake that succeeds resets it.
 *
 * A malformed frame from the server closes the connection with the reason
 * logged, as a gone server does. When a connection goes, every request in
 * flight on it fails with -ENOTCONN.
 *
 * Timing runs off conn_tick(), which the owner calls often (every
 * CLIENT_TICK_MS, or by conn_due_ms()); nothing here has timers of its
 * own.
 */
#ifndef LENTO_CONN_H
#define LENTO_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loop.h"
#include "lproto.h"

/* A tick this late: the process stood still, not the server. */
#define CONN_STALL_MS		500
#define CONN_BACKOFF_MIN_MS	200
#define CONN_BACKOFF_MAX_MS	10000

enum conn_state {
	CONN_IDLE,
	CONN_CONNECTING,
	CONN_HANDSHAKE,
	CONN_READY,
};

struct conn;

struct conn_ops {
	/* Fill in the HELLO: the client's id (0: asks for one) and uuid. */
	void (*hello)(void *arg, struct lp_hello *m);
	/*
	 * The handshake is done. The owner may send requests from here.
	 * Returns 0, or -errno to drop the connection (why logged by it).
	 */
	int (*up)(void *arg, const struct lp_hello_reply *r);
	/*
	 * The connection went (was READY or not), or an attempt failed;
	 * requests already failed.
	 */
	void (*down)(void *arg, int err, const char *why);
	/* A push: BREAK, BREAK_VOLUME, PERMIT_REVOKE. -EBADMSG closes. */
	int (*push)(void *arg, const struct lp_frame *f, const char **why);
	/* Queued output went out (a REINTEGRATE queues its bodies so). */
	void (*sent)(void *arg);
	/*
	 * Optional: true while the owner has no memory for what more frames
	 * would bring (bodies waiting for a slow disk). Frames are then left
	 * unread, in the socket, until conn_resume().
	 */
	bool (*busy)(void *arg);
};

/*
 * A frame of the reply to a request (@f), or the request failed (@f
 * NULL, @err -ENOTCONN: the connection went). Called for every frame of
 * the reply; the one without LP_F_MORE is the last, and the request is no
 * longer in flight when it is called. Returns 0, or -EBADMSG with a
 * reason in *why to close the connection (a malformed reply).
 */
typedef int (*conn_reply_fn)(void *arg, const struct lp_frame *f, int err,
			     const char **why);

/* A connection to @addr; the first attempt is made at the first tick. */
int conn_new(struct lo_loop *loop, const char *addr,
	     const struct conn_ops *ops, void *arg, struct conn **out);
/* Closes the connection; requests in flight fail (their fns run). */
void conn_free(struct conn *c);
/* Frames are read again, if busy() held them. */
void conn_resume(struct conn *c);

void conn_tick(struct conn *c, uint64_t now_ms);
/*
 * When conn_tick() next has something to do (a ping, a retry, a silence
 * to look into): @now_ms if it has now.
 */
uint64_t conn_due_ms(const struct conn *c, uint64_t now_ms);
/*
 * The owner's next tick comes by @at_ms (after the tick that says so):
 * only a tick later than that by CONN_STALL_MS means the process stood
 * still. Without it the next tick is expected at once.
 */
void conn_plan(struct conn *c, uint64_t at_ms);
enum conn_state conn_state(const struct conn *c);
const char *conn_state_name(enum conn_state s);
const char *conn_addr(const struct conn *c);
/* The last reason a connection went or an attempt failed ("" if none). */
const char *conn_last_error(const struct conn *c);
/*
 * Whether the last attempt to connect failed (the server unreachable), as
 * against a connection that went and is being made again.
 */
bool conn_failing(const struct conn *c);
/* When the next attempt is due (IDLE), in lo_now_ms() time. */
uint64_t conn_retry_at(const struct conn *c);
uint32_t conn_heartbeat_ms(const struct conn *c);

/*
 * Sending a request: take a tag, encode its frame(s) into conn_buf(),
 * then conn_request() sends them and registers @fn for the reply. A
 * REINTEGRATE's DATA frames follow later: encode them into conn_buf()
 * and conn_send(). -ENOTCONN unless READY (the buffer is emptied).
 */
uint32_t conn_tag(struct conn *c);
struct lp_buf *conn_buf(struct conn *c);
int conn_request(struct conn *c, uint32_t tag, unsigned int type,
		 conn_reply_fn fn, void *arg);
int conn_send(struct conn *c);
size_t conn_queued(const struct conn *c);
/*
 * Forget request @tag: its reply frames are still taken off the wire but
 * go to nobody, and its fn is not called again.
 */
void conn_forget(struct conn *c, uint32_t tag);
/*
 * When request @tag went, or the last frame answering it or any other
 * request came (a server answers one client's FETCHes one after the
 * other); 0 if it is not in flight.
 */
uint64_t conn_heard_ms(struct conn *c, uint32_t tag);

/* Drop the connection now (a reply the owner found wrong, say). */
void conn_close(struct conn *c, int err, const char *why);

#endif /* LENTO_CONN_H */
