// SPDX-License-Identifier: MIT
/*
 * lento's event loop on io_uring (see loop.h).
 *
 * Every operation in flight carries a struct lo_op as its user_data: the
 * kind says whose it is, container_of finds the owner. A connection has at
 * most one receive, one send and one connect in flight; closing it shuts
 * the socket down so they complete, and it is freed (closed() called, fd
 * closed) only when none is left, so the kernel never writes into freed
 * memory.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <liburing.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "loop.h"

#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

#define LO_RING_SIZE	256
#define LO_IN_MIN	(64u << 10)
#define LO_IN_MAX	((64u << 20) + 64)
#define LO_OUT_MAX	(256u << 20)
#define LO_ACCEPT_RETRY_MS 100

enum lo_kind { K_ACCEPT, K_RECV, K_AGAIN, K_SEND, K_CONNECT, K_TIMER,
	       K_SIGNAL, K_FILE, K_POLL };

struct lo_op {
	enum lo_kind kind;
};

struct lo_buf {
	uint8_t *p;
	size_t len, cap;
};

struct lo_conn {
	struct lo_loop *loop;
	struct lo_conn *prev, *next;	/* loop->conns */
	int fd;
	const struct lo_conn_ops *ops;
	void *ctx;
	char peer[80];
	bool local;
	struct lo_op recv_op, again_op, send_op, connect_op;
	int inflight;
	bool connecting, sending, closing;
	bool again;		/* lo_conn_again(): the input handed back */
	bool held;		/* lo_conn_hold(): nothing read or handed */
	bool draining;		/* closing once the output is sent */
	int close_err;
	char reason[160];
	struct lo_buf in;
	size_t max_in;
	/* urgent goes out before queue, after what is being sent */
	struct lo_buf sending_buf, urgent, queue;
	size_t sent;
	size_t max_out;
	struct sockaddr_storage addr;
	socklen_t addrlen;
};

struct lo_listener {
	struct lo_loop *loop;
	struct lo_listener *next;
	int fd;
	lo_accept_fn fn;
	void *arg;
	char addr[120];
	char unix_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct lo_op accept_op;
	struct sockaddr_storage peer;
	socklen_t peerlen;
	struct __kernel_timespec retry_ts;
	bool inflight, closing;
};

struct lo_timer {
	struct lo_op op;
	struct lo_timer *next;
	struct __kernel_timespec ts;	/* the period */
	struct __kernel_timespec idle_ts;	/* lo_timer_idle()'s */
	bool idle;		/* fire after idle_ts until something happens */
	bool armed_idle;	/* the timeout on the ring is idle_ts */
	lo_timer_fn fn;
	void *arg;
};

struct lo_sig {
	struct lo_op op;
	struct lo_sig *next;
	int fd, signo;
	struct signalfd_siginfo info;
	lo_signal_fn fn;
	void *arg;
};

/* A file's read, write or fsync in flight (lo_file_*). */
struct lo_file {
	struct lo_op op;
	struct lo_file *prev, *next;	/* loop->files */
	int fd;
	bool fsync;
	bool nop;			/* lo_later(): a turn of the loop */
	uint8_t *rbuf;			/* a read's: one read, not continued */
	const uint8_t *buf;
	size_t len, done;
	uint64_t off;
	lo_file_fn fn;
	void *arg;
};

/* A descriptor watched for input (lo_poll). */
struct lo_poll {
	struct lo_op op;
	struct lo_loop *loop;
	struct lo_poll *prev, *next;	/* loop->polls */
	int fd;
	lo_poll_fn fn;
	void *arg;
	bool inflight, closing;
	bool in_fn;		/* its callback runs: lo_poll_done frees it */
};

struct lo_loop {
	struct io_uring ring;
	bool stop, dead;
	struct lo_conn *conns;
	struct lo_listener *listeners;
	struct lo_timer *timers;
	int nidle;		/* timers with idle set */
	struct lo_sig *sigs;
	struct lo_file *files;
	struct lo_poll *polls;
	struct lo_defer *deferred;
	unsigned int stall_ms;
	lo_stall_fn stall_fn;
	void *stall_arg;
};

/*
 * The coarse clock (a tick's resolution, a few ms) is read from the vDSO
 * page whatever the clocksource; CLOCK_MONOTONIC is a system call where
 * the TSC is not usable (a VM's HPET): a fifth of a busy lento's CPU, read
 * twice per completion for the stall check. Leases, timeouts and stalls
 * are counted in hundreds of ms or more; leases allow for the lag of a
 * reading on each side (lo_clock_slack_ms()).
 */
uint64_t lo_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t lo_clock_slack_ms(void)
{
	static uint64_t slack;
	struct timespec res;

	if (!slack) {
		if (clock_getres(CLOCK_MONOTONIC_COARSE, &res))
			res = (struct timespec){ .tv_nsec = 10000000 };
		slack = 2 * (((uint64_t)res.tv_sec * 1000000000 +
			      (uint64_t)res.tv_nsec + 999999) / 1000000);
	}
	return slack;
}

static void errf(char *err, size_t errlen, const char *fmt, const char *a,
		 int e)
{
	if (err && errlen)
		snprintf(err, errlen, fmt, a, strerror(e));
}

/* An SQE, submitting what is queued if the ring is full. */
static struct io_uring_sqe *lo_sqe(struct lo_loop *loop)
{
	struct io_uring_sqe *sqe;

	if (loop->dead)		/* being freed: nothing more is submitted */
		return NULL;
	sqe = io_uring_get_sqe(&loop->ring);

	if (!sqe) {
		io_uring_submit(&loop->ring);
		sqe = io_uring_get_sqe(&loop->ring);
	}
	return sqe;
}

int lo_loop_new(struct lo_loop **out)
{
	struct lo_loop *loop = calloc(1, sizeof(*loop));
	int err;

	if (!loop)
		return -ENOMEM;
	err = io_uring_queue_init(LO_RING_SIZE, &loop->ring, 0);
	if (err) {
		free(loop);
		return err;
	}
	*out = loop;
	return 0;
}

/* ---- connections ---- */

static int lo_buf_reserve(struct lo_buf *b, size_t want, size_t max)
{
	size_t cap = b->cap ? b->cap : LO_IN_MIN;
	uint8_t *p;

	if (want <= b->cap)
		return 0;
	if (want > max)
		return -ENOBUFS;
	while (cap < want)
		cap *= 2;
	if (cap > max)
		cap = max;
	p = realloc(b->p, cap);
	if (!p)
		return -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

static void lo_peer_name(const struct sockaddr_storage *sa, char *buf,
			 size_t size)
{
	char host[INET6_ADDRSTRLEN];

	if (sa->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, size, "%s:%u", host, ntohs(in->sin_port));
	} else if (sa->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, size, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, size, "local");
	}
}

static struct lo_conn *lo_conn_new(struct lo_loop *loop, int fd)
{
	struct lo_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->loop = loop;
	c->fd = fd;
	c->max_in = LO_IN_MAX;
	c->max_out = LO_OUT_MAX;
	c->recv_op.kind = K_RECV;
	c->again_op.kind = K_AGAIN;
	c->send_op.kind = K_SEND;
	c->connect_op.kind = K_CONNECT;
	c->next = loop->conns;
	if (loop->conns)
		loop->conns->prev = c;
	loop->conns = c;
	return c;
}

static void lo_conn_free(struct lo_conn *c)
{
	struct lo_loop *loop = c->loop;

	if (c->prev)
		c->prev->next = c->next;
	else
		loop->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (c->fd >= 0)
		close(c->fd);
	free(c->in.p);
	free(c->sending_buf.p);
	free(c->urgent.p);
	free(c->queue.p);
	free(c);
}

/* The last operation of a closing connection completed: it goes. */
static void lo_conn_finish(struct lo_conn *c)
{
	if (c->ops && c->ops->closed)
		c->ops->closed(c, c->close_err, c->reason);
	lo_conn_free(c);
}

void lo_conn_set(struct lo_conn *c, const struct lo_conn_ops *ops, void *ctx)
{
	c->ops = ops;
	c->ctx = ctx;
}

void *lo_conn_ctx(const struct lo_conn *c)
{
	return c->ctx;
}

const char *lo_conn_peer(const struct lo_conn *c)
{
	return c->peer;
}

int lo_conn_peerids(const struct lo_conn *c, uid_t *uid, gid_t *gid)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (!c->local)
		return -ENOTSOCK;
	if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len))
		return -errno;
	*uid = cred.uid;
	*gid = cred.gid;
	return 0;
}

int lo_conn_peergroups(const struct lo_conn *c, gid_t *groups, size_t max)
{
	socklen_t len;
	gid_t *all;
	int err;

	if (!c->local)
		return -ENOTSOCK;
	if (max > NGROUPS_MAX)
		max = NGROUPS_MAX;
	len = (socklen_t)(max * sizeof(*groups));
	if (!getsockopt(c->fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len))
		return (int)(len / sizeof(*groups));
	if (errno != ERANGE)
		return -errno;
	/* More than @max: len says how many bytes all of them take. */
	all = malloc(len);
	if (!all)
		return -ENOMEM;
	err = getsockopt(c->fd, SOL_SOCKET, SO_PEERGROUPS, all, &len) ?
	      -errno : 0;
	if (!err && len / sizeof(*groups) < max)
		max = len / sizeof(*groups);
	if (!err)
		memcpy(groups, all, max * sizeof(*groups));
	free(all);
	return err ?: (int)max;
}

void lo_conn_set_max_in(struct lo_conn *c, size_t max)
{
	c->max_in = max;
}

void lo_conn_set_max_out(struct lo_conn *c, size_t max)
{
	c->max_out = max && max < LO_OUT_MAX ? max : LO_OUT_MAX;
}

size_t lo_conn_queued(const struct lo_conn *c)
{
	return c->queue.len + c->urgent.len + c->sending_buf.len - c->sent;
}

size_t lo_conn_unacked(const struct lo_conn *c)
{
	int n = 0;

	if (c->fd < 0 || ioctl(c->fd, SIOCOUTQ, &n) || n < 0)
		n = 0;
	return lo_conn_queued(c) + (size_t)n;
}

static void lo_conn_arm_recv(struct lo_conn *c)
{
	struct io_uring_sqe *sqe;
	size_t want = c->in.len + LO_IN_MIN;
	int err;

	if (want > c->max_in)
		want = c->max_in;
	err = lo_buf_reserve(&c->in, want, c->max_in);
	if (!err && c->in.len == c->in.cap)
		err = -ENOBUFS;
	if (err) {
		lo_conn_close(c, err, err == -ENOBUFS ?
			      "a message longer than the input limit" :
			      "out of memory for input");
		return;
	}
	sqe = lo_sqe(c->loop);
	if (!sqe) {
		lo_conn_close(c, -EAGAIN, "io_uring submission queue full");
		return;
	}
	io_uring_prep_recv(sqe, c->fd, c->in.p + c->in.len,
			   c->in.cap - c->in.len, 0);
	io_uring_sqe_set_data(sqe, &c->recv_op);
	c->inflight++;
}

static void lo_conn_arm_send(struct lo_conn *c)
{
	struct io_uring_sqe *sqe;
	struct lo_buf tmp;

	if (c->sending || c->closing)
		return;
	if (c->sent == c->sending_buf.len) {
		struct lo_buf *next = c->urgent.len ? &c->urgent : &c->queue;

		if (!next->len)
			return;
		tmp = c->sending_buf;
		c->sending_buf = *next;
		*next = tmp;
		next->len = 0;
		c->sent = 0;
	}
	sqe = lo_sqe(c->loop);
	if (!sqe) {
		lo_conn_close(c, -EAGAIN, "io_uring submission queue full");
		return;
	}
	io_uring_prep_send(sqe, c->fd, c->sending_buf.p + c->sent,
			   c->sending_buf.len - c->sent, MSG_NOSIGNAL);
	io_uring_sqe_set_data(sqe, &c->send_op);
	c->sending = true;
	c->inflight++;
}

static int lo_conn_append(struct lo_conn *c, struct lo_buf *b,
			  const void *p, size_t n)
{
	int err;

	if (c->closing || c->draining)
		return -EPIPE;
	if (!n)		/* nothing: and the queue may have no buffer yet */
		return 0;
	if (lo_conn_queued(c) + n > c->max_out)
		return -ENOBUFS;
	err = lo_buf_reserve(b, b->len + n, c->max_out);
	if (err)
		return err;
	memcpy(b->p + b->len, p, n);
	b->len += n;
	if (!c->connecting)
		lo_conn_arm_send(c);
	return 0;
}

int lo_conn_send(struct lo_conn *c, const void *p, size_t n)
{
	return lo_conn_append(c, &c->queue, p, n);
}

int lo_conn_send_first(struct lo_conn *c, const void *p, size_t n)
{
	return lo_conn_append(c, &c->urgent, p, n);
}

/* Closes now: what is still queued is dropped. */
static void lo_conn_shut(struct lo_conn *c)
{
	struct io_uring_sqe *sqe;

	c->closing = true;
	/* Makes a receive or send in flight complete. */
	shutdown(c->fd, SHUT_RDWR);
	if (c->connecting && (sqe = lo_sqe(c->loop))) {
		io_uring_prep_cancel(sqe, &c->connect_op, 0);
		io_uring_sqe_set_data(sqe, NULL);
	}
	/* closed() runs from the loop even with nothing in flight. */
	if (!c->inflight && (sqe = lo_sqe(c->loop))) {
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data(sqe, &c->send_op);
		c->inflight++;
	}
}

void lo_conn_close(struct lo_conn *c, int err, const char *reason)
{
	if (c->closing || c->draining)
		return;
	c->close_err = err;
	snprintf(c->reason, sizeof(c->reason), "%s",
		 reason ? reason : err ? strerror(-err) : "closed");
	/* A clean close sends what was queued first (an answer, a goodbye). */
	if (!err && !c->connecting && lo_conn_queued(c)) {
		c->draining = true;
		return;
	}
	lo_conn_shut(c);
}

/* A turn of the loop (a NOP), then what is buffered to the owner. */
static void lo_conn_arm_again(struct lo_conn *c)
{
	struct io_uring_sqe *sqe = lo_sqe(c->loop);

	if (!sqe) {
		lo_conn_close(c, -EAGAIN, "io_uring submission queue full");
		return;
	}
	io_uring_prep_nop(sqe);
	io_uring_sqe_set_data(sqe, &c->again_op);
	c->inflight++;
}

/*
 * The input to its owner; then the next receive, or -- the owner asked
 * for it with lo_conn_again() -- a turn of the loop first (a NOP), after
 * which what it left is handed back even if nothing more arrives.
 */
static void lo_conn_deliver(struct lo_conn *c)
{
	ssize_t used;

	c->again = false;
	used = c->ops && c->ops->data ?
		c->ops->data(c, c->in.p, c->in.len) : (ssize_t)c->in.len;
	if (used < 0) {
		lo_conn_close(c, (int)used, NULL);
		return;
	}
	if ((size_t)used > c->in.len)
		used = c->in.len;
	memmove(c->in.p, c->in.p + used, c->in.len - used);
	c->in.len -= used;
	if (c->closing || c->held)
		return;
	if (!c->again || !c->in.len) {
		lo_conn_arm_recv(c);
		return;
	}
	lo_conn_arm_again(c);
}

static void lo_conn_recv_done(struct lo_conn *c, int res)
{
	if (c->closing)
		return;
	if (res <= 0) {
		c->draining = false;	/* nobody to send to */
		lo_conn_close(c, res, res ? NULL : "closed by the peer");
		return;
	}
	if (c->draining) {		/* input after our goodbye: ignored */
		lo_conn_arm_recv(c);
		return;
	}
	c->in.len += res;
	lo_conn_deliver(c);
}

void lo_conn_again(struct lo_conn *c)
{
	c->again = true;
}

void lo_conn_hold(struct lo_conn *c)
{
	c->held = true;
}

void lo_conn_release(struct lo_conn *c)
{
	if (!c->held)
		return;
	c->held = false;
	if (c->closing || c->draining)
		return;
	if (c->in.len)
		lo_conn_arm_again(c);
	else
		lo_conn_arm_recv(c);
}

static void lo_conn_send_done(struct lo_conn *c, int res)
{
	c->sending = false;
	if (c->closing)
		return;
	if (res < 0) {
		c->draining = false;
		lo_conn_close(c, res, NULL);
		return;
	}
	c->sent += res;
	lo_conn_arm_send(c);
	if (c->draining && !lo_conn_queued(c))
		lo_conn_shut(c);
	else if (!c->draining && c->ops && c->ops->sent)
		c->ops->sent(c);
}

static void lo_conn_connect_done(struct lo_conn *c, int res)
{
	c->connecting = false;
	if (c->closing)
		return;
	if (res < 0) {
		if (c->ops && c->ops->connected)
			c->ops->connected(c, res);
		lo_conn_close(c, res, NULL);
		return;
	}
	if (c->ops && c->ops->connected)
		c->ops->connected(c, 0);
	if (c->closing)
		return;
	lo_conn_arm_recv(c);
	lo_conn_arm_send(c);
}

/* ---- addresses ---- */

static int lo_parse_addr(const char *addr, struct sockaddr_storage *sa,
			 socklen_t *len, bool passive)
{
	struct addrinfo hints = { 0 }, *res;
	char host[256];
	const char *port;
	size_t hl;
	int err;

	if (!strncmp(addr, "unix:", 5)) {
		struct sockaddr_un *un = (void *)sa;

		if (strlen(addr + 5) >= sizeof(un->sun_path) || !addr[5])
			return -ENAMETOOLONG;
		memset(un, 0, sizeof(*un));
		un->sun_family = AF_UNIX;
		strcpy(un->sun_path, addr + 5);
		*len = sizeof(*un);
		return 0;
	}
	if (addr[0] == '[') {
		const char *end = strchr(addr, ']');

		if (!end || end[1] != ':')
			return -EINVAL;
		hl = end - addr - 1;
		port = end + 2;
		addr++;
	} else {
		port = strrchr(addr, ':');
		if (!port)
			return -EINVAL;
		hl = port - addr;
		port++;
	}
	if (hl >= sizeof(host) || !*port)
		return -EINVAL;
	memcpy(host, addr, hl);
	host[hl] = 0;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = passive ? AI_PASSIVE : 0;
	hints.ai_flags |= AI_NUMERICSERV;
	err = getaddrinfo(hl ? host : NULL, port, &hints, &res);
	if (err)
		return err == EAI_SYSTEM ? -errno : -EADDRNOTAVAIL;
	memcpy(sa, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/* ---- listeners ---- */

static void lo_listener_arm(struct lo_listener *l)
{
	struct io_uring_sqe *sqe = lo_sqe(l->loop);

	if (!sqe)
		return;		/* the next retry tick tries again */
	l->peerlen = sizeof(l->peer);
	io_uring_prep_accept(sqe, l->fd, (struct sockaddr *)&l->peer,
			     &l->peerlen, SOCK_CLOEXEC);
	io_uring_sqe_set_data(sqe, &l->accept_op);
	l->inflight = true;
}

/* accept failed for want of resources: try again a little later. */
static void lo_listener_retry(struct lo_listener *l)
{
	struct io_uring_sqe *sqe = lo_sqe(l->loop);

	if (!sqe)
		return;
	l->retry_ts.tv_sec = 0;
	l->retry_ts.tv_nsec = LO_ACCEPT_RETRY_MS * 1000000L;
	io_uring_prep_timeout(sqe, &l->retry_ts, 0, 0);
	io_uring_sqe_set_data(sqe, &l->accept_op);
	l->inflight = true;
}

static void lo_listener_free(struct lo_listener *l)
{
	struct lo_listener **pp;

	for (pp = &l->loop->listeners; *pp; pp = &(*pp)->next)
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	/*
	 * The name first: a lento starting meanwhile finds it answering or
	 * gone, never refused (which would let it take the name, and this
	 * unlink then remove its socket's).
	 */
	if (l->unix_path[0])
		unlink(l->unix_path);
	close(l->fd);
	free(l);
}

static void lo_accept_done(struct lo_listener *l, int res)
{
	struct lo_conn *c;

	l->inflight = false;
	if (l->closing) {
		if (res >= 0)
			close(res);
		lo_listener_free(l);
		return;
	}
	if (res == -ETIME) {		/* the retry delay is over */
		lo_listener_arm(l);
		return;
	}
	if (res < 0) {
		if (res == -EINTR || res == -ECONNABORTED || res == -EAGAIN)
			lo_listener_arm(l);
		else
			lo_listener_retry(l);
		return;
	}
	c = lo_conn_new(l->loop, res);
	if (!c) {
		close(res);
		lo_listener_retry(l);
		return;
	}
	c->local = l->unix_path[0] != 0;
	lo_peer_name(&l->peer, c->peer, sizeof(c->peer));
	if (!c->local) {
		int one = 1;

		setsockopt(res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	if (l->fn(l, c, l->arg) < 0)
		lo_conn_free(c);
	else
		lo_conn_arm_recv(c);
	lo_listener_arm(l);
}

/*
 * A lento killed with its accept still queued in io_uring keeps its listening
 * socket until the kernel's asynchronous ring teardown drops the request's
 * file reference, a few milliseconds after the process is reaped (longer
 * under load); SO_REUSEADDR does not cover a socket that still listens. A
 * restart therefore retries, for a bounded time, a bind that finds its
 * address in use and a control socket that still answers.
 */
#define LO_BIND_RETRY_MS	3000
#define LO_BIND_STEP_MS		50

static void lo_bind_pause(void)
{
	const struct timespec step = { 0, LO_BIND_STEP_MS * 1000000L };

	nanosleep(&step, NULL);
}

/* A stale socket file (nobody listening) may be replaced. */
static int lo_unix_reclaim(const struct sockaddr_storage *sa, socklen_t len)
{
	const struct sockaddr_un *un = (const void *)sa;
	int fd, e, waited;

	for (waited = 0;; waited += LO_BIND_STEP_MS) {
		/* Never blocks: a full backlog (EAGAIN) is a lento there. */
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			    0);
		if (fd < 0)
			return -errno;
		e = connect(fd, (const struct sockaddr *)sa, len) ? errno : 0;
		close(fd);
		if (e == ECONNREFUSED)
			unlink(un->sun_path);
		if (e && e != EAGAIN)
			return 0;
		if (waited >= LO_BIND_RETRY_MS)
			return -EADDRINUSE;
		lo_bind_pause();
	}
}

static void lo_listener_name(struct lo_listener *l)
{
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);

	if (l->unix_path[0]) {
		snprintf(l->addr, sizeof(l->addr), "unix:%s", l->unix_path);
		return;
	}
	if (getsockname(l->fd, (struct sockaddr *)&sa, &len))
		return;
	lo_peer_name(&sa, l->addr, sizeof(l->addr));
}

static int lo_bind(int fd, const struct sockaddr_storage *sa, socklen_t len)
{
	int waited;

	for (waited = 0;; waited += LO_BIND_STEP_MS) {
		if (!bind(fd, (const struct sockaddr *)sa, len))
			return 0;
		if (errno != EADDRINUSE || sa->ss_family == AF_UNIX ||
		    waited >= LO_BIND_RETRY_MS)
			return -errno;
		lo_bind_pause();
	}
}

int lo_listen(struct lo_loop *loop, const char *addr, lo_accept_fn fn,
	      void *arg, struct lo_listener **out, char *err, size_t errlen)
{
	struct sockaddr_storage sa;
	struct lo_listener *l;
	socklen_t len;
	int fd, e, one = 1;

	e = lo_parse_addr(addr, &sa, &len, true);
	if (e) {
		errf(err, errlen, "bad address %s: %s", addr, -e);
		return e;
	}
	if (sa.ss_family == AF_UNIX && (e = lo_unix_reclaim(&sa, len))) {
		errf(err, errlen, "%s: %s (another lento?)", addr, -e);
		return e;
	}
	fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		e = -errno;
		errf(err, errlen, "socket for %s: %s", addr, -e);
		return e;
	}
	if (sa.ss_family != AF_UNIX)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	e = lo_bind(fd, &sa, len);
	if (e || listen(fd, 128)) {
		e = e ? e : -errno;
		close(fd);
		errf(err, errlen, "cannot listen on %s: %s", addr, -e);
		return e;
	}
	l = calloc(1, sizeof(*l));
	if (!l) {
		close(fd);
		return -ENOMEM;
	}
	if (sa.ss_family == AF_UNIX) {
		strcpy(l->unix_path, ((struct sockaddr_un *)&sa)->sun_path);
		chmod(l->unix_path, 0600);	/* its owner only */
	}
	l->loop = loop;
	l->fd = fd;
	l->fn = fn;
	l->arg = arg;
	l->accept_op.kind = K_ACCEPT;
	l->next = loop->listeners;
	loop->listeners = l;
	lo_listener_name(l);
	lo_listener_arm(l);
	if (out)
		*out = l;
	return 0;
}

const char *lo_listener_addr(const struct lo_listener *l)
{
	return l->addr;
}

void lo_listener_close(struct lo_listener *l)
{
	struct io_uring_sqe *sqe;

	if (l->closing)
		return;
	l->closing = true;
	if (!l->inflight) {
		lo_listener_free(l);
		return;
	}
	sqe = lo_sqe(l->loop);
	if (sqe) {
		io_uring_prep_cancel(sqe, &l->accept_op, 0);
		io_uring_sqe_set_data(sqe, NULL);
	}
}

/* ---- outgoing connections ---- */

int lo_connect(struct lo_loop *loop, const char *addr,
	       const struct lo_conn_ops *ops, void *ctx,
	       struct lo_conn **out, char *err, size_t errlen)
{
	struct io_uring_sqe *sqe;
	struct lo_conn *c;
	int fd, e, one = 1;

	c = lo_conn_new(loop, -1);
	if (!c)
		return -ENOMEM;
	e = lo_parse_addr(addr, &c->addr, &c->addrlen, false);
	if (e) {
		errf(err, errlen, "bad address %s: %s", addr, -e);
		goto fail;
	}
	fd = socket(c->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		e = -errno;
		errf(err, errlen, "socket for %s: %s", addr, -e);
		goto fail;
	}
	c->fd = fd;
	c->local = c->addr.ss_family == AF_UNIX;
	if (!c->local)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	lo_peer_name(&c->addr, c->peer, sizeof(c->peer));
	sqe = lo_sqe(loop);
	if (!sqe) {
		e = -EAGAIN;
		errf(err, errlen, "connect to %s: %s", addr, -e);
		goto fail;
	}
	io_uring_prep_connect(sqe, fd, (struct sockaddr *)&c->addr,
			      c->addrlen);
	io_uring_sqe_set_data(sqe, &c->connect_op);
	c->connecting = true;
	c->inflight++;
	lo_conn_set(c, ops, ctx);
	*out = c;
	return 0;
fail:
	lo_conn_free(c);
	return e;
}

/* ---- timers and signals ---- */

static void lo_timer_arm(struct lo_loop *loop, struct lo_timer *t)
{
	struct io_uring_sqe *sqe = lo_sqe(loop);

	if (!sqe)
		return;
	t->armed_idle = t->idle;
	io_uring_prep_timeout(sqe, t->idle ? &t->idle_ts : &t->ts, 0, 0);
	io_uring_sqe_set_data(sqe, &t->op);
}

int lo_timer(struct lo_loop *loop, unsigned int ms, lo_timer_fn fn, void *arg)
{
	struct lo_timer *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->op.kind = K_TIMER;
	t->ts.tv_sec = ms / 1000;
	t->ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	t->fn = fn;
	t->arg = arg;
	t->next = loop->timers;
	loop->timers = t;
	lo_timer_arm(loop, t);
	return 0;
}

int lo_timer_idle(struct lo_loop *loop, lo_timer_fn fn, void *arg,
		  unsigned int ms)
{
	struct lo_timer *t;

	for (t = loop->timers; t; t = t->next)
		if (t->fn == fn && t->arg == arg)
			break;
	if (!t)
		return -ENOENT;
	if ((uint64_t)ms * 1000000u <=
	    (uint64_t)t->ts.tv_sec * 1000000000u + (uint64_t)t->ts.tv_nsec)
		return 0;
	t->idle_ts.tv_sec = ms / 1000;
	t->idle_ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	if (!t->idle)
		loop->nidle++;
	t->idle = true;
	return 0;
}

/*
 * Something other than a timer happened: idle timers go back to their
 * period, the one on the ring too (moved to fire a period from now). If
 * it fired meanwhile, the update finds nothing (-ENOENT, ignored) and its
 * next arming takes the period.
 */
static void lo_timers_wake(struct lo_loop *loop)
{
	struct io_uring_sqe *sqe;

	for (struct lo_timer *t = loop->timers; t && loop->nidle;
	     t = t->next) {
		if (!t->idle)
			continue;
		t->idle = false;
		loop->nidle--;
		if (!t->armed_idle)
			continue;
		t->armed_idle = false;
		sqe = lo_sqe(loop);
		if (!sqe)
			continue;	/* it fires late, once */
		io_uring_prep_timeout_update(sqe, &t->ts,
					     (uint64_t)(uintptr_t)&t->op, 0);
		io_uring_sqe_set_data(sqe, NULL);
	}
}

static void lo_signal_arm(struct lo_loop *loop, struct lo_sig *s)
{
	struct io_uring_sqe *sqe = lo_sqe(loop);

	if (!sqe)
		return;
	io_uring_prep_read(sqe, s->fd, &s->info, sizeof(s->info), 0);
	io_uring_sqe_set_data(sqe, &s->op);
}

int lo_signal(struct lo_loop *loop, int signo, lo_signal_fn fn, void *arg)
{
	struct lo_sig *s;
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, signo);
	if (sigprocmask(SIG_BLOCK, &set, NULL))
		return -errno;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->fd = signalfd(-1, &set, SFD_CLOEXEC);
	if (s->fd < 0) {
		int e = -errno;

		free(s);
		return e;
	}
	s->op.kind = K_SIGNAL;
	s->signo = signo;
	s->fn = fn;
	s->arg = arg;
	s->next = loop->sigs;
	loop->sigs = s;
	lo_signal_arm(loop, s);
	return 0;
}

/* ---- files ---- */

static void lo_file_unlink(struct lo_loop *loop, struct lo_file *f)
{
	if (f->prev)
		f->prev->next = f->next;
	else
		loop->files = f->next;
	if (f->next)
		f->next->prev = f->prev;
}

static int lo_file_arm(struct lo_loop *loop, struct lo_file *f)
{
	struct io_uring_sqe *sqe = lo_sqe(loop);

	if (!sqe)
		return -EAGAIN;
	if (f->nop)
		io_uring_prep_nop(sqe);
	else if (f->fsync)
		io_uring_prep_fsync(sqe, f->fd, 0);
	else if (f->rbuf)
		io_uring_prep_read(sqe, f->fd, f->rbuf, (unsigned int)f->len,
				   f->off);
	else
		io_uring_prep_write(sqe, f->fd, f->buf + f->done,
				    f->len - f->done > (1u << 30) ?
				    (1u << 30) : (unsigned int)(f->len - f->done),
				    f->off + f->done);
	io_uring_sqe_set_data(sqe, &f->op);
	return 0;
}

/* Arm @f and keep it on the loop's list; freed if it cannot be armed. */
static int lo_file_start(struct lo_loop *loop, struct lo_file *f)
{
	int err = lo_file_arm(loop, f);

	if (err) {
		free(f);
		return err;
	}
	f->next = loop->files;
	if (loop->files)
		loop->files->prev = f;
	loop->files = f;
	return 0;
}

static int lo_file_add(struct lo_loop *loop, int fd, bool fsync,
		       uint8_t *rbuf, const void *buf, size_t len,
		       uint64_t off, lo_file_fn fn, void *arg)
{
	struct lo_file *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->op.kind = K_FILE;
	f->fd = fd;
	f->fsync = fsync;
	f->rbuf = rbuf;
	f->buf = buf;
	f->len = len;
	f->off = off;
	f->fn = fn;
	f->arg = arg;
	return lo_file_start(loop, f);
}

int lo_file_write(struct lo_loop *loop, int fd, const void *buf, size_t len,
		  uint64_t off, lo_file_fn fn, void *arg)
{
	return lo_file_add(loop, fd, false, NULL, buf, len, off, fn, arg);
}

int lo_file_fsync(struct lo_loop *loop, int fd, lo_file_fn fn, void *arg)
{
	return lo_file_add(loop, fd, true, NULL, NULL, 0, 0, fn, arg);
}

int lo_file_read(struct lo_loop *loop, int fd, void *buf, size_t len,
		 uint64_t off, lo_file_fn fn, void *arg)
{
	if (len > (1u << 30))
		return -EINVAL;
	return lo_file_add(loop, fd, false, buf, NULL, len, off, fn, arg);
}

int lo_later(struct lo_loop *loop, lo_file_fn fn, void *arg)
{
	struct lo_file *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->op.kind = K_FILE;
	f->fd = -1;
	f->nop = true;
	f->fn = fn;
	f->arg = arg;
	return lo_file_start(loop, f);
}

static void lo_file_done(struct lo_loop *loop, struct lo_file *f, int res)
{
	if (f->rbuf || f->nop) {
		/* A read says how much it read: the owner reads on. */
		lo_file_unlink(loop, f);
		f->fn(f->arg, res);
		free(f);
		return;
	}
	if (!f->fsync && res > 0) {
		f->done += res;
		/* A short write (a signal, a full page cache): go on. */
		if (f->done < f->len && !lo_file_arm(loop, f))
			return;
		res = f->done < f->len ? -EAGAIN : 0;
	} else if (!f->fsync && !res && f->len) {
		res = -EIO;	/* nothing written and no error: give up */
	}
	lo_file_unlink(loop, f);
	f->fn(f->arg, res < 0 ? res : 0);
	free(f);
}

/* ---- descriptors watched for input ---- */

static void lo_poll_unlink(struct lo_poll *p)
{
	if (p->prev)
		p->prev->next = p->next;
	else
		p->loop->polls = p->next;
	if (p->next)
		p->next->prev = p->prev;
}

static int lo_poll_arm(struct lo_poll *p)
{
	struct io_uring_sqe *sqe = lo_sqe(p->loop);

	if (!sqe)
		return -EAGAIN;
	io_uring_prep_poll_add(sqe, p->fd, POLLIN);
	io_uring_sqe_set_data(sqe, &p->op);
	p->inflight = true;
	return 0;
}

int lo_poll(struct lo_loop *loop, int fd, lo_poll_fn fn, void *arg,
	    struct lo_poll **out)
{
	struct lo_poll *p = calloc(1, sizeof(*p));
	int err;

	if (!p)
		return -ENOMEM;
	p->op.kind = K_POLL;
	p->loop = loop;
	p->fd = fd;
	p->fn = fn;
	p->arg = arg;
	err = lo_poll_arm(p);
	if (err) {
		free(p);
		return err;
	}
	p->next = loop->polls;
	if (loop->polls)
		loop->polls->prev = p;
	loop->polls = p;
	*out = p;
	return 0;
}

void lo_poll_close(struct lo_poll *p)
{
	struct io_uring_sqe *sqe;

	if (!p || p->closing)
		return;
	p->closing = true;
	p->fn = NULL;
	if (p->in_fn)
		return;
	if (!p->inflight) {
		lo_poll_unlink(p);
		free(p);
		return;
	}
	/* Freed when the poll in flight completes (cancelled). */
	sqe = lo_sqe(p->loop);
	if (sqe) {
		io_uring_prep_poll_remove(sqe, (__u64)(uintptr_t)&p->op);
		io_uring_sqe_set_data(sqe, NULL);
	}
}

static void lo_poll_done(struct lo_poll *p, int res)
{
	p->inflight = false;
	if (p->closing) {
		lo_poll_unlink(p);
		free(p);
		return;
	}
	p->in_fn = true;
	p->fn(p->arg, res < 0 ? res : 0);
	p->in_fn = false;
	/* The callback may have closed it. */
	if (p->closing) {
		lo_poll_unlink(p);
		free(p);
		return;
	}
	if (lo_poll_arm(p)) {
		/* No room in the ring now: the owner starts a new watch. */
		p->in_fn = true;
		p->fn(p->arg, -EAGAIN);
		p->in_fn = false;
		if (p->closing) {
			lo_poll_unlink(p);
			free(p);
		}
	}
}

/* ---- the loop ---- */

void lo_set_stall(struct lo_loop *loop, unsigned int ms, lo_stall_fn fn,
		  void *arg)
{
	loop->stall_ms = fn ? ms : 0;
	loop->stall_fn = fn;
	loop->stall_arg = arg;
}

/*
 * What @op is, for a stall report: the completion may free it, so a
 * connection's peer is copied before (a plain copy; formatted only if
 * the completion stalled), and anything else has a static name.
 */
struct lo_op_what {
	const char *name;	/* NULL: a connection, "connection PEER" */
	char peer[sizeof(((struct lo_conn *)0)->peer)];
};

static void lo_op_what(const struct lo_op *op, struct lo_op_what *w)
{
	static const char *const names[] = {
		[K_ACCEPT] = "accept", [K_TIMER] = "timer",
		[K_SIGNAL] = "signal", [K_FILE] = "file", [K_POLL] = "poll",
	};
	const struct lo_conn *c;

	switch (op->kind) {
	case K_RECV:
		c = container_of(op, struct lo_conn, recv_op);
		break;
	case K_AGAIN:
		c = container_of(op, struct lo_conn, again_op);
		break;
	case K_SEND:
		c = container_of(op, struct lo_conn, send_op);
		break;
	case K_CONNECT:
		c = container_of(op, struct lo_conn, connect_op);
		break;
	default:
		w->name = names[op->kind];
		return;
	}
	w->name = NULL;
	memcpy(w->peer, c->peer, sizeof(w->peer));
}

static const char *lo_op_name(const struct lo_op_what *w, char *buf,
			      size_t size)
{
	if (w->name)
		return w->name;
	snprintf(buf, size, "connection %.*s", (int)sizeof(w->peer), w->peer);
	return buf;
}

static void lo_complete(struct lo_loop *loop, struct lo_op *op, int res)
{
	struct lo_conn *c = NULL;

	switch (op->kind) {
	case K_ACCEPT:
		lo_accept_done(container_of(op, struct lo_listener, accept_op),
			       res);
		return;
	case K_TIMER: {
		struct lo_timer *t = container_of(op, struct lo_timer, op);

		if (t->idle) {	/* the callback says it again if it still is */
			t->idle = false;
			loop->nidle--;
		}
		t->fn(loop, t->arg);
		lo_timer_arm(loop, t);
		return;
	}
	case K_SIGNAL: {
		struct lo_sig *s = container_of(op, struct lo_sig, op);

		if (res == sizeof(s->info))
			s->fn(loop, s->signo, s->arg);
		lo_signal_arm(loop, s);
		return;
	}
	case K_FILE:
		lo_file_done(loop, container_of(op, struct lo_file, op), res);
		return;
	case K_POLL:
		lo_poll_done(container_of(op, struct lo_poll, op), res);
		return;
	case K_RECV:
		c = container_of(op, struct lo_conn, recv_op);
		c->inflight--;
		lo_conn_recv_done(c, res);
		break;
	case K_AGAIN:
		c = container_of(op, struct lo_conn, again_op);
		c->inflight--;
		if (c->closing)
			break;
		if (c->draining)	/* input after our goodbye: ignored */
			lo_conn_arm_recv(c);
		else
			lo_conn_deliver(c);
		break;
	case K_SEND:
		c = container_of(op, struct lo_conn, send_op);
		c->inflight--;
		lo_conn_send_done(c, res);
		break;
	case K_CONNECT:
		c = container_of(op, struct lo_conn, connect_op);
		c->inflight--;
		lo_conn_connect_done(c, res);
		break;
	}
	if (c && c->closing && !c->inflight)
		lo_conn_finish(c);
}

static void lo_dispatch(struct lo_loop *loop, struct lo_op *op, int res)
{
	struct lo_op_what what;
	uint64_t t0, took;
	char buf[160];

	if (!loop->stall_ms) {
		lo_complete(loop, op, res);
		return;
	}
	lo_op_what(op, &what);
	t0 = lo_now_ms();
	lo_complete(loop, op, res);
	took = lo_now_ms() - t0;
	if (took >= loop->stall_ms)
		loop->stall_fn(loop->stall_arg,
			       lo_op_name(&what, buf, sizeof(buf)), took);
}

void lo_defer(struct lo_loop *loop, struct lo_defer *d)
{
	if (d->queued)
		return;
	d->queued = true;
	d->next = loop->deferred;
	loop->deferred = d;
}

void lo_defer_cancel(struct lo_loop *loop, struct lo_defer *d)
{
	struct lo_defer **pp;

	if (!d->queued)
		return;
	for (pp = &loop->deferred; *pp; pp = &(*pp)->next)
		if (*pp == d) {
			*pp = d->next;
			break;
		}
	d->queued = false;
}

static void lo_run_deferred(struct lo_loop *loop)
{
	struct lo_defer *d;

	while ((d = loop->deferred)) {
		loop->deferred = d->next;
		d->queued = false;
		d->fn(d->arg);
	}
}

int lo_run(struct lo_loop *loop)
{
	struct io_uring_cqe *cqe;
	unsigned int head;
	int err;

	loop->stop = false;
	while (!loop->stop) {
		lo_run_deferred(loop);
		if (loop->stop)
			break;
		err = io_uring_submit_and_wait(&loop->ring, 1);
		if (err < 0 && err != -EINTR && err != -EAGAIN &&
		    err != -EBUSY)
			return err;
		io_uring_for_each_cqe(&loop->ring, head, cqe) {
			struct lo_op *op = io_uring_cqe_get_data(cqe);
			int res = cqe->res;

			/* Advance first: a completion may submit more. */
			io_uring_cqe_seen(&loop->ring, cqe);
			if (op && op->kind != K_TIMER && loop->nidle)
				lo_timers_wake(loop);
			if (op)
				lo_dispatch(loop, op, res);
			if (loop->stop)
				break;
		}
	}
	io_uring_submit(&loop->ring);
	return 0;
}

void lo_stop(struct lo_loop *loop)
{
	loop->stop = true;
}

void lo_loop_free(struct lo_loop *loop)
{
	if (!loop)
		return;
	/* The ring goes first: nothing in flight can touch what follows. */
	io_uring_queue_exit(&loop->ring);
	loop->dead = true;
	/* The ring is gone: their owners free what the I/O used. */
	while (loop->files) {
		struct lo_file *f = loop->files;

		lo_file_unlink(loop, f);
		f->fn(f->arg, -ECANCELED);
		free(f);
	}
	while (loop->conns) {
		struct lo_conn *c = loop->conns;

		if (!c->closing) {
			c->closing = true;
			c->close_err = -ECANCELED;
			snprintf(c->reason, sizeof(c->reason),
				 "lento is stopping");
		}
		lo_conn_finish(c);
	}
	while (loop->listeners)
		lo_listener_free(loop->listeners);
	while (loop->polls) {
		struct lo_poll *p = loop->polls;

		lo_poll_unlink(p);
		free(p);
	}
	while (loop->timers) {
		struct lo_timer *t = loop->timers;

		loop->timers = t->next;
		free(t);
	}
	while (loop->sigs) {
		struct lo_sig *s = loop->sigs;

		loop->sigs = s->next;
		close(s->fd);
		free(s);
	}
	free(loop);
}
