/* SPDX-License-Identifier: MIT */
/*
 * lento's event loop: one io_uring per process carrying every socket
 * (TCP over IPv4 and IPv6, and the local control socket), periodic timers
 * and signals. The loop owns its connections; a connection's owner
 * (server session, client session, control session) sees it through
 * callbacks and never frees it itself.
 *
 * Threading: a loop and everything on it belong to the thread that runs
 * lo_run(); nothing here is thread-safe.
 */
#ifndef LENTO_LOOP_H
#define LENTO_LOOP_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct lo_loop;
struct lo_conn;
struct lo_listener;

struct lo_conn_ops {
	/*
	 * Bytes arrived. Returns how many it consumed (0 to @len; the rest
	 * is handed back with what arrives next), or a negative errno to
	 * close the connection (after lo_conn_close() with a reason, or the
	 * loop closes it with that errno).
	 */
	ssize_t (*data)(struct lo_conn *c, const uint8_t *p, size_t len);
	/*
	 * An outgoing connection was made (@err 0) or failed (-errno; then
	 * closed() follows).
	 */
	void (*connected)(struct lo_conn *c, int err);
	/*
	 * The connection is gone: the peer closed it (@err 0), an error, or
	 * lo_conn_close(). Called once, after which the connection is freed.
	 */
	void (*closed)(struct lo_conn *c, int err, const char *reason);
	/*
	 * Some queued output went out (optional): a sender of long streams
	 * queues more while lo_conn_queued() is low.
	 */
	void (*sent)(struct lo_conn *c);
};

/* Accepted a connection: set its ops with lo_conn_set(), or return -errno to refuse it. */
typedef int (*lo_accept_fn)(struct lo_listener *l, struct lo_conn *c,
			    void *arg);
typedef void (*lo_timer_fn)(struct lo_loop *loop, void *arg);
typedef void (*lo_signal_fn)(struct lo_loop *loop, int signo, void *arg);

int lo_loop_new(struct lo_loop **out);
/* Closes every connection (their closed() runs) and frees the loop. */
void lo_loop_free(struct lo_loop *loop);
/* Runs until lo_stop(); returns 0, or -errno if io_uring failed. */
int lo_run(struct lo_loop *loop);
void lo_stop(struct lo_loop *loop);
/* The loop's clock: CLOCK_MONOTONIC_COARSE in milliseconds. */
uint64_t lo_now_ms(void);
/*
 * How far a reading of lo_now_ms() may lag the true time, twice over (a
 * tick each, for the two readings a lease is counted between): a lease's
 * holder ends it this much sooner, its grantor this much later.
 */
uint64_t lo_clock_slack_ms(void);

/*
 * A call made once the completions at hand are handled, before the loop
 * waits again: for what each of a burst of completions may ask for and
 * is cheaper done once (waking a thread). The struct is its owner's, set
 * up with fn and arg; queued again before it ran, it runs once; queued
 * again while it runs (by itself or another), it runs again before the
 * loop waits. Calls run in no particular order. An owner that goes away
 * cancels it first.
 */
struct lo_defer {
	void (*fn)(void *arg);
	void *arg;
	struct lo_defer *next;	/* the loop's */
	bool queued;		/* the loop's */
};
void lo_defer(struct lo_loop *loop, struct lo_defer *d);
void lo_defer_cancel(struct lo_loop *loop, struct lo_defer *d);

/*
 * A callback that holds the loop for @ms milliseconds or more is reported
 * to @fn afterwards: what it was ("timer", "signal", "file", "poll",
 * "accept", or "connection PEER") and how long it took. Everything else
 * waited that long: leases, heartbeats, upcalls. @ms 0 turns it off.
 */
typedef void (*lo_stall_fn)(void *arg, const char *what, uint64_t ms);
void lo_set_stall(struct lo_loop *loop, unsigned int ms, lo_stall_fn fn,
		  void *arg);

/*
 * Addresses: "HOST:PORT" (a name or an IPv4 address), "[IPv6]:PORT",
 * or "unix:PATH" for a local stream socket. Port 0 picks a free port
 * (lo_listener_addr() tells which).
 */
int lo_listen(struct lo_loop *loop, const char *addr, lo_accept_fn fn,
	      void *arg, struct lo_listener **out, char *err, size_t errlen);
/* The bound address, in the form lo_listen() takes. */
const char *lo_listener_addr(const struct lo_listener *l);
void lo_listener_close(struct lo_listener *l);

int lo_connect(struct lo_loop *loop, const char *addr,
	       const struct lo_conn_ops *ops, void *ctx,
	       struct lo_conn **out, char *err, size_t errlen);

void lo_conn_set(struct lo_conn *c, const struct lo_conn_ops *ops, void *ctx);
void *lo_conn_ctx(const struct lo_conn *c);
/* "ADDR:PORT" of the peer, "[v6]:PORT", or "local". */
const char *lo_conn_peer(const struct lo_conn *c);
/*
 * The uid and gid of the peer on a local socket (SO_PEERCRED): the ids a
 * change is made as. -ENOTSOCK on TCP.
 */
int lo_conn_peerids(const struct lo_conn *c, uid_t *uid, gid_t *gid);
/*
 * The peer's supplementary groups on a local socket (SO_PEERGROUPS, as
 * they were when it connected, in the kernel's order): the first @max of
 * them into @groups. Returns how many, or -errno: -ENOTSOCK on TCP,
 * -ENOPROTOOPT from a kernel without SO_PEERGROUPS.
 */
int lo_conn_peergroups(const struct lo_conn *c, gid_t *groups, size_t max);
/*
 * From data(): hand back what it leaves unconsumed at the next turn of
 * the loop, even if nothing more arrives -- for an owner that stops
 * early so as not to hold the loop (a long run of frames in one read).
 * Input is not read meanwhile.
 */
void lo_conn_again(struct lo_conn *c);
/*
 * From data(): deliver nothing more and read nothing (what the peer sends
 * waits in the socket) until lo_conn_release(), after which what data()
 * left is handed back at the next turn of the loop -- for an owner whose
 * memory for what the frames bring is full.
 */
void lo_conn_hold(struct lo_conn *c);
void lo_conn_release(struct lo_conn *c);
/*
 * How long a data() callback works through the frames of one read before
 * it hands the rest back (lo_conn_again()): frames of zeros compress a
 * GiB into one read, and the loop has leases and heartbeats to answer.
 */
#define LO_STEP_MS	50
/* Bytes the connection may buffer unread (default 64 MiB + 64). */
void lo_conn_set_max_in(struct lo_conn *c, size_t max);
/*
 * Queues bytes to send (copied). -ENOBUFS when more than the output limit
 * (256 MiB, or less: lo_conn_set_max_out()) is queued: the peer does not
 * read, and the caller closes it.
 */
int lo_conn_send(struct lo_conn *c, const void *p, size_t n);
/*
 * The same, ahead of every byte queued but not yet handed to the socket
 * (behind what is being sent, and earlier lo_conn_send_first() bytes):
 * for a small answer that must not wait behind bulk output, a PONG.
 * Bytes go out as they were given to one call or the other, so an owner
 * that sends whole frames in each call never has one split.
 */
int lo_conn_send_first(struct lo_conn *c, const void *p, size_t n);
/* A lower output limit than 256 MiB (0: that one); tests use it. */
void lo_conn_set_max_out(struct lo_conn *c, size_t max);
size_t lo_conn_queued(const struct lo_conn *c);
/*
 * Bytes sent but not yet taken by the peer: queued here, and in the
 * socket (written, not acknowledged: SIOCOUTQ). Going down means the peer
 * takes them.
 */
size_t lo_conn_unacked(const struct lo_conn *c);
/*
 * Closes (once); closed() runs from the loop, never from inside this call.
 * With @err 0 what is queued is sent first; with an error it is dropped.
 */
void lo_conn_close(struct lo_conn *c, int err, const char *reason);

/* Calls @fn every @ms milliseconds until the loop is freed. */
int lo_timer(struct lo_loop *loop, unsigned int ms, lo_timer_fn fn, void *arg);
/*
 * From the callback of the timer of @fn and @arg: it fires next after
 * @ms instead of its period, unless the loop completes anything but a
 * timer (I/O, a signal) meanwhile: then after its period, counted from
 * that completion. For an owner with nothing to do until a known time;
 * each firing goes back to the period unless its callback says this
 * again. @ms at or below the period changes nothing. -ENOENT if there
 * is no such timer.
 */
int lo_timer_idle(struct lo_loop *loop, lo_timer_fn fn, void *arg,
		  unsigned int ms);
/* Blocks @signo for the process and calls @fn from the loop when it arrives. */
int lo_signal(struct lo_loop *loop, int signo, lo_signal_fn fn, void *arg);

/*
 * File I/O through the ring, so that writing a large body does not hold
 * up the sockets. @fn runs from the loop with 0 or -errno once the whole
 * write (short writes are continued) or the fsync is done; if the loop is
 * freed first, it runs from lo_loop_free() with -ECANCELED. @buf must stay
 * valid and @fd open until then. 0 or -errno (nothing submitted, @fn is
 * not called).
 */
typedef void (*lo_file_fn)(void *arg, int res);
int lo_file_write(struct lo_loop *loop, int fd, const void *buf, size_t len,
		  uint64_t off, lo_file_fn fn, void *arg);
int lo_file_fsync(struct lo_loop *loop, int fd, lo_file_fn fn, void *arg);
/*
 * One read of at most @len bytes (at most 1 GiB) at @off into @buf: @fn
 * gets the bytes read (0 at the end of the file) or -errno; a short read
 * is not continued. Like the writes otherwise.
 */
int lo_file_read(struct lo_loop *loop, int fd, void *buf, size_t len,
		 uint64_t off, lo_file_fn fn, void *arg);

/*
 * @fn(@arg, 0) after a turn of the loop (a NOP through the ring): what
 * completed meanwhile -- input, timers -- is handled first. For long work
 * done in steps. Freed with the loop first: @fn(@arg, -ECANCELED). 0 or
 * -errno (@fn is not called).
 */
int lo_later(struct lo_loop *loop, lo_file_fn fn, void *arg);

/*
 * Watch @fd for input: @fn runs from the loop each time it is readable
 * (@res 0), or with -errno if the poll failed (-EAGAIN: the ring was
 * full and the watch stopped; the owner starts a new one). The owner
 * reads until EAGAIN itself. lo_poll_close() stops it (also from inside
 * @fn); @fd may be closed right after.
 */
struct lo_poll;
typedef void (*lo_poll_fn)(void *arg, int res);
int lo_poll(struct lo_loop *loop, int fd, lo_poll_fn fn, void *arg,
	    struct lo_poll **out);
void lo_poll_close(struct lo_poll *p);

#endif /* LENTO_LOOP_H */
