// SPDX-License-Identifier: MIT
/*
 * lento's event loop: echo servers over TCP (IPv4, IPv6) and a local
 * socket, large transfers, many connections, closes from either side,
 * the input limit, refused connections, timers and signals.
 */
#include <check.h>
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "loop.h"

/* ---- an echo server ---- */

struct echo_srv {
	int accepted, closed, bytes;
	int last_err;
	char last_reason[160];
	size_t max_in;		/* 0: the default */
	int close_on_byte;	/* close with a reason on this byte, -1: never */
	size_t per_call;	/* > 0: echo that much a call, the rest again */
	int calls;
	/* > 0: echo that much a call, then hold the input (hold_timer) */
	size_t hold_each;
	struct lo_conn *held;
	int calls_held;		/* calls when it was held */
	int holds, early;	/* holds; calls while held */
};

static ssize_t echo_data(struct lo_conn *c, const uint8_t *p, size_t len)
{
	struct echo_srv *s = lo_conn_ctx(c);

	if (s->close_on_byte >= 0 && memchr(p, s->close_on_byte, len)) {
		lo_conn_close(c, -EPROTO, "a forbidden byte");
		return -EPROTO;
	}
	s->calls++;
	if (s->held)
		s->early++;
	if (s->hold_each) {
		if (len > s->hold_each)
			len = s->hold_each;
		lo_conn_hold(c);
		s->held = c;
		s->calls_held = s->calls;
		s->holds++;
	}
	if (s->per_call && len > s->per_call) {
		len = s->per_call;
		lo_conn_again(c);
	}
	s->bytes += len;
	if (lo_conn_send(c, p, len))
		return -ENOBUFS;
	return len;
}

static void echo_closed(struct lo_conn *c, int err, const char *reason)
{
	struct echo_srv *s = lo_conn_ctx(c);

	s->closed++;
	s->last_err = err;
	snprintf(s->last_reason, sizeof(s->last_reason), "%s", reason);
}

static const struct lo_conn_ops echo_ops = {
	.data = echo_data, .closed = echo_closed,
};

static int echo_accept(struct lo_listener *l, struct lo_conn *c, void *arg)
{
	struct echo_srv *s = arg;

	(void)l;
	s->accepted++;
	if (s->max_in)
		lo_conn_set_max_in(c, s->max_in);
	lo_conn_set(c, &echo_ops, s);
	return 0;
}

/* ---- a client that sends a pattern and checks what comes back ---- */

struct client {
	struct lo_loop *loop;
	size_t total, got;
	int connected_err, closed, close_err, mismatches;
	bool close_after;	/* close when everything came back */
	int *done;		/* clients finished, loop stops at want */
	int want;
};

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 7 + i / 251);
}

static void client_finish(struct client *cl)
{
	if (++*cl->done == cl->want)
		lo_stop(cl->loop);
}

static ssize_t client_data(struct lo_conn *c, const uint8_t *p, size_t len)
{
	struct client *cl = lo_conn_ctx(c);
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != pattern(cl->got + i))
			cl->mismatches++;
	cl->got += len;
	if (cl->got == cl->total) {
		if (cl->close_after)
			lo_conn_close(c, 0, "done");
		else
			client_finish(cl);
	}
	return len;
}

static void client_connected(struct lo_conn *c, int err)
{
	struct client *cl = lo_conn_ctx(c);
	uint8_t *buf;
	size_t i;

	cl->connected_err = err;
	if (err)
		return;
	buf = malloc(cl->total ? cl->total : 1);
	ck_assert_ptr_nonnull(buf);
	for (i = 0; i < cl->total; i++)
		buf[i] = pattern(i);
	ck_assert_int_eq(lo_conn_send(c, buf, cl->total), 0);
	free(buf);
}

static void client_closed(struct lo_conn *c, int err, const char *reason)
{
	struct client *cl = lo_conn_ctx(c);

	(void)reason;
	cl->closed++;
	cl->close_err = err;
	if (cl->close_after || cl->got != cl->total || cl->connected_err)
		client_finish(cl);
}

static const struct lo_conn_ops client_ops = {
	.data = client_data, .connected = client_connected,
	.closed = client_closed,
};

static void stop_timer(struct lo_loop *loop, void *arg)
{
	int *fired = arg;

	if (++*fired >= 50)	/* 5 s: the test is stuck */
		lo_stop(loop);
}

/* Echo @total bytes over @n connections to a server on @addr. */
static struct echo_srv *echo_roundtrip_srv(const char *addr, int n,
					   size_t total, size_t per_call)
{
	static struct echo_srv srv;
	struct lo_listener *l;
	struct lo_loop *loop;
	struct client *cl = calloc(n, sizeof(*cl));
	struct lo_conn *c;
	char err[256];
	int done = 0, fired = 0, i;

	srv = (struct echo_srv){ .close_on_byte = -1, .per_call = per_call };
	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_msg(!lo_listen(loop, addr, echo_accept, &srv, &l, err,
				 sizeof(err)), "%s", err);
	ck_assert_int_eq(lo_timer(loop, 100, stop_timer, &fired), 0);
	for (i = 0; i < n; i++) {
		cl[i] = (struct client){ .loop = loop, .total = total,
					 .done = &done, .want = n };
		ck_assert_msg(!lo_connect(loop, lo_listener_addr(l),
					  &client_ops, &cl[i], &c, err,
					  sizeof(err)), "%s", err);
	}
	ck_assert_int_eq(lo_run(loop), 0);
	ck_assert_int_eq(done, n);
	for (i = 0; i < n; i++) {
		ck_assert_int_eq(cl[i].connected_err, 0);
		ck_assert_uint_eq(cl[i].got, total);
		ck_assert_int_eq(cl[i].mismatches, 0);
	}
	ck_assert_int_eq(srv.accepted, n);
	lo_loop_free(loop);
	/* Freeing the loop closed both ends of every connection. */
	ck_assert_int_eq(srv.closed, n);
	for (i = 0; i < n; i++)
		ck_assert_int_eq(cl[i].closed, 1);
	free(cl);
	return &srv;
}

static void echo_roundtrip(const char *addr, int n, size_t total)
{
	echo_roundtrip_srv(addr, n, total, 0);
}

/* Lets go of a held input: nothing came to the server meanwhile. */
static void hold_timer(struct lo_loop *loop, void *arg)
{
	struct echo_srv *s = arg;
	struct lo_conn *c = s->held;

	(void)loop;
	if (!c)
		return;
	if (s->calls != s->calls_held)
		s->early++;
	s->held = NULL;
	lo_conn_release(c);
}

/*
 * A server that holds its input after every 100 bytes, until a timer
 * lets go: nothing is handed to it while held (though the rest has long
 * arrived), and everything comes back in the end.
 */
START_TEST(hold_until_released)
{
	struct echo_srv srv = { .close_on_byte = -1, .hold_each = 100 };
	struct client cl;
	struct lo_listener *l;
	struct lo_loop *loop;
	struct lo_conn *c;
	char err[256];
	int done = 0, fired = 0;

	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_msg(!lo_listen(loop, "127.0.0.1:0", echo_accept, &srv, &l,
				 err, sizeof(err)), "%s", err);
	ck_assert_int_eq(lo_timer(loop, 100, stop_timer, &fired), 0);
	ck_assert_int_eq(lo_timer(loop, 10, hold_timer, &srv), 0);
	cl = (struct client){ .loop = loop, .total = 1000, .done = &done,
			      .want = 1 };
	ck_assert_msg(!lo_connect(loop, lo_listener_addr(l), &client_ops, &cl,
				  &c, err, sizeof(err)), "%s", err);
	ck_assert_int_eq(lo_run(loop), 0);
	ck_assert_int_eq(done, 1);
	ck_assert_uint_eq(cl.got, 1000);
	ck_assert_int_eq(cl.mismatches, 0);
	ck_assert_int_ge(srv.holds, 10);
	ck_assert_int_eq(srv.early, 0);
	lo_loop_free(loop);
}
END_TEST

/*
 * A server that takes 7 bytes a call and asks for the rest again: all
 * of it comes back, though nothing more arrives after the first send.
 */
START_TEST(again_hands_back)
{
	struct echo_srv *srv = echo_roundtrip_srv("127.0.0.1:0", 1, 1000, 7);

	ck_assert_int_ge(srv->calls, 1000 / 7);
}
END_TEST

START_TEST(echo_ipv4)
{
	echo_roundtrip("127.0.0.1:0", 1, 1000);
}
END_TEST

START_TEST(echo_ipv6)
{
	echo_roundtrip("[::1]:0", 1, 1000);
}
END_TEST

START_TEST(echo_unix)
{
	char addr[64];

	snprintf(addr, sizeof(addr), "unix:/tmp/check-loop.%d", getpid());
	echo_roundtrip(addr, 3, 5000);
	/* The socket file went with the listener. */
	ck_assert_int_ne(access(addr + 5, F_OK), 0);
}
END_TEST

START_TEST(echo_large)
{
	echo_roundtrip("127.0.0.1:0", 2, 8u << 20);
}
END_TEST

START_TEST(echo_many)
{
	echo_roundtrip("127.0.0.1:0", 100, 4096);
}
END_TEST

struct watch {
	int *flag;
	int ticks;
};

static void watch_timer(struct lo_loop *loop, void *arg)
{
	struct watch *w = arg;

	if (*w->flag || ++w->ticks >= 500)	/* 5 s: stuck */
		lo_stop(loop);
}

/* Each test runs in a process of its own (Check forks). */
static struct watch watch;

/* Runs @loop until *@flag is set (or 5 s pass). */
static void run_until_closed(struct lo_loop *loop, int *flag)
{
	watch.flag = flag;
	watch.ticks = 0;
	ck_assert_int_eq(lo_timer(loop, 10, watch_timer, &watch), 0);
	while (!*flag && watch.ticks < 500)
		lo_run(loop);
}

/* The client closes; the server sees the peer's close (err 0). */
START_TEST(close_by_client)
{
	struct echo_srv srv = { .close_on_byte = -1 };
	struct lo_listener *l;
	struct lo_loop *loop;
	struct client cl;
	struct lo_conn *c;
	int done = 0;

	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_int_eq(lo_listen(loop, "127.0.0.1:0", echo_accept, &srv, &l,
				   NULL, 0), 0);
	cl = (struct client){ .loop = loop, .total = 10, .close_after = true,
			      .done = &done, .want = 1 };
	ck_assert_int_eq(lo_connect(loop, lo_listener_addr(l), &client_ops,
				    &cl, &c, NULL, 0), 0);
	ck_assert_int_eq(lo_run(loop), 0);
	ck_assert_int_eq(cl.closed, 1);
	ck_assert_int_eq(cl.close_err, 0);
	run_until_closed(loop, &srv.closed);
	ck_assert_int_eq(srv.last_err, 0);
	ck_assert_str_eq(srv.last_reason, "closed by the peer");
	lo_loop_free(loop);
}
END_TEST

START_TEST(close_by_server)
{
	struct echo_srv srv = { .close_on_byte = 0 };
	struct lo_listener *l;
	struct lo_loop *loop;
	struct client cl;
	struct lo_conn *c;
	int done = 0;

	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_int_eq(lo_listen(loop, "127.0.0.1:0", echo_accept, &srv, &l,
				   NULL, 0), 0);
	/* pattern(0) is 0: the forbidden byte */
	cl = (struct client){ .loop = loop, .total = 10, .done = &done,
			      .want = 1 };
	ck_assert_int_eq(lo_connect(loop, lo_listener_addr(l), &client_ops,
				    &cl, &c, NULL, 0), 0);
	run_until_closed(loop, &cl.closed);
	ck_assert_int_eq(cl.closed, 1);
	ck_assert_uint_eq(cl.got, 0);
	ck_assert_int_eq(srv.closed, 1);
	ck_assert_int_eq(srv.last_err, -EPROTO);
	ck_assert_str_eq(srv.last_reason, "a forbidden byte");
	lo_loop_free(loop);
}
END_TEST

/* A server that never consumes: the input limit closes the connection. */
static ssize_t hoard_data(struct lo_conn *c, const uint8_t *p, size_t len)
{
	(void)c;
	(void)p;
	(void)len;
	return 0;
}

static const struct lo_conn_ops hoard_ops = {
	.data = hoard_data, .closed = echo_closed,
};

static int hoard_accept(struct lo_listener *l, struct lo_conn *c, void *arg)
{
	(void)l;
	lo_conn_set_max_in(c, 100000);
	lo_conn_set(c, &hoard_ops, arg);
	return 0;
}

START_TEST(input_limit)
{
	struct echo_srv srv = { .close_on_byte = -1 };
	struct lo_listener *l;
	struct lo_loop *loop;
	struct client cl;
	struct lo_conn *c;
	int done = 0;

	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_int_eq(lo_listen(loop, "127.0.0.1:0", hoard_accept, &srv,
				   &l, NULL, 0), 0);
	cl = (struct client){ .loop = loop, .total = 300000, .done = &done,
			      .want = 1 };
	ck_assert_int_eq(lo_connect(loop, lo_listener_addr(l), &client_ops,
				    &cl, &c, NULL, 0), 0);
	run_until_closed(loop, &srv.closed);
	ck_assert_int_eq(srv.closed, 1);
	ck_assert_int_eq(srv.last_err, -ENOBUFS);
	ck_assert_str_eq(srv.last_reason,
			 "a message longer than the input limit");
	lo_loop_free(loop);
}
END_TEST

/* ---- lo_conn_send_first(): ahead of what waits, behind what goes ---- */

#define BULK_LEN	(8u << 20)

static const struct lo_conn_ops first_ops = {
	.closed = echo_closed,
};

/* Queues bulk, then a small message, then an urgent one. */
static int first_accept(struct lo_listener *l, struct lo_conn *c, void *arg)
{
	static uint8_t bulk[BULK_LEN];

	(void)l;
	memset(bulk, 'a', sizeof(bulk));
	lo_conn_set(c, &first_ops, arg);
	ck_assert_int_eq(lo_conn_send(c, bulk, sizeof(bulk)), 0);
	ck_assert_int_eq(lo_conn_send(c, "bbbb", 4), 0);
	ck_assert_int_eq(lo_conn_send_first(c, "cc", 2), 0);
	ck_assert_uint_eq(lo_conn_queued(c), BULK_LEN + 6);
	return 0;
}

struct reader {
	char addr[120];
	uint8_t *got;
	size_t len;
};

/* A plain blocking client: reads everything, late, then closes. */
static void *first_reader(void *arg)
{
	struct reader *r = arg;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ssize_t n;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)atoi(strrchr(r->addr, ':') + 1));
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
		return NULL;
	usleep(200 * 1000);	/* all of it queued by then */
	while (r->len < BULK_LEN + 6 &&
	       (n = read(fd, r->got + r->len, BULK_LEN + 6 - r->len)) > 0)
		r->len += (size_t)n;
	close(fd);
	return NULL;
}

/*
 * Bytes given to lo_conn_send_first() go out ahead of what lo_conn_send()
 * queued and is not yet being sent, and never inside what is: bulk (being
 * sent), then the urgent bytes, then the small message queued before them.
 */
START_TEST(send_first_goes_ahead)
{
	struct echo_srv srv = { .close_on_byte = -1 };
	struct reader r = { .got = malloc(BULK_LEN + 6) };
	struct lo_listener *l;
	struct lo_loop *loop;
	pthread_t t;
	size_t i;

	ck_assert_ptr_nonnull(r.got);
	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_int_eq(lo_listen(loop, "127.0.0.1:0", first_accept, &srv,
				   &l, NULL, 0), 0);
	snprintf(r.addr, sizeof(r.addr), "%s", lo_listener_addr(l));
	ck_assert_int_eq(pthread_create(&t, NULL, first_reader, &r), 0);
	run_until_closed(loop, &srv.closed);
	pthread_join(t, NULL);
	ck_assert_uint_eq(r.len, BULK_LEN + 6);
	for (i = 0; i < BULK_LEN && r.got[i] == 'a'; i++)
		;
	ck_assert_uint_eq(i, BULK_LEN);
	ck_assert(!memcmp(r.got + BULK_LEN, "ccbbbb", 6));
	free(r.got);
	lo_loop_free(loop);
}
END_TEST

/* Nobody listens: connected() and closed() report the refusal. */
START_TEST(connect_refused)
{
	struct echo_srv srv = { .close_on_byte = -1 };
	struct lo_listener *l;
	struct lo_loop *loop;
	struct client cl;
	struct lo_conn *c;
	char addr[128];
	int done = 0;

	/* A port that was free a moment ago. */
	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_int_eq(lo_listen(loop, "127.0.0.1:0", echo_accept, &srv, &l,
				   NULL, 0), 0);
	snprintf(addr, sizeof(addr), "%s", lo_listener_addr(l));
	lo_loop_free(loop);
	ck_assert_int_eq(lo_loop_new(&loop), 0);
	cl = (struct client){ .loop = loop, .total = 10, .done = &done,
			      .want = 1 };
	ck_assert_int_eq(lo_connect(loop, addr, &client_ops, &cl, &c, NULL, 0),
			 0);
	run_until_closed(loop, &cl.closed);
	ck_assert_int_eq(cl.connected_err, -ECONNREFUSED);
	ck_assert_int_eq(cl.close_err, -ECONNREFUSED);
	ck_assert_int_eq(srv.accepted, 0);
	lo_loop_free(loop);
}
END_TEST

START_TEST(bad_addresses)
{
	struct lo_loop *loop;
	struct lo_listener *l;
	char err[256];

	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_int_lt(lo_listen(loop, "no-port", echo_accept, NULL, &l,
				   err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(strstr(err, "bad address no-port"));
	ck_assert_int_lt(lo_listen(loop, "[::1", echo_accept, NULL, &l, err,
				   sizeof(err)), 0);
	ck_assert_int_lt(lo_listen(loop, "127.0.0.1:", echo_accept, NULL, &l,
				   err, sizeof(err)), 0);
	ck_assert_int_lt(lo_listen(loop, "unix:", echo_accept, NULL, &l, err,
				   sizeof(err)), 0);
	/* Port in use. */
	ck_assert_int_eq(lo_listen(loop, "127.0.0.1:0", echo_accept, NULL, &l,
				   err, sizeof(err)), 0);
	{
		char addr[128];
		struct lo_listener *l2;

		snprintf(addr, sizeof(addr), "%s", lo_listener_addr(l));
		ck_assert_int_eq(lo_listen(loop, addr, echo_accept, NULL, &l2,
					   err, sizeof(err)), -EADDRINUSE);
		ck_assert_ptr_nonnull(strstr(err, "cannot listen on"));
	}
	lo_loop_free(loop);
}
END_TEST

/* A live local socket is not taken over; a stale one is. */
START_TEST(unix_reclaim)
{
	struct lo_loop *loop;
	struct lo_listener *l, *l2;
	char addr[64], err[256];

	snprintf(addr, sizeof(addr), "unix:/tmp/check-loop-r.%d", getpid());
	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_int_eq(lo_listen(loop, addr, echo_accept, NULL, &l, err,
				   sizeof(err)), 0);
	ck_assert_int_eq(lo_listen(loop, addr, echo_accept, NULL, &l2, err,
				   sizeof(err)), -EADDRINUSE);
	ck_assert_ptr_nonnull(strstr(err, "another lento?"));
	lo_loop_free(loop);
	/* A stale file, as a crashed lento leaves it. */
	{
		char cmd[256];

		snprintf(cmd, sizeof(cmd),
			 "python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.bind(\"%s\")'",
			 addr + 5);
		ck_assert_int_eq(system(cmd), 0);
	}
	ck_assert_int_eq(access(addr + 5, F_OK), 0);
	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_msg(!lo_listen(loop, addr, echo_accept, NULL, &l, err,
				 sizeof(err)), "%s", err);
	lo_loop_free(loop);
}
END_TEST

static void count_timer(struct lo_loop *loop, void *arg)
{
	int *n = arg;

	if (++*n == 5)
		lo_stop(loop);
}

START_TEST(timer_period)
{
	struct lo_loop *loop;
	uint64_t t0, dt;
	int n = 0;

	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_int_eq(lo_timer(loop, 20, count_timer, &n), 0);
	t0 = lo_now_ms();
	ck_assert_int_eq(lo_run(loop), 0);
	dt = lo_now_ms() - t0;
	ck_assert_int_eq(n, 5);
	ck_assert_uint_ge(dt, 95);
	lo_loop_free(loop);
}
END_TEST

/*
 * An idle timer: a 10 ms period that goes idle (5 s) at each firing; a
 * second timer every 100 ms raises a signal at its first firing, and
 * stops the loop at its third.
 */
struct idle_t {
	int fired, fired_at_signal, signals, other;
	uint64_t t0, signal_ms, after_ms;
};

static void idle_timer(struct lo_loop *loop, void *arg)
{
	struct idle_t *it = arg;

	it->fired++;
	if (it->signals && !it->after_ms)
		it->after_ms = lo_now_ms() - it->signal_ms;
	ck_assert_int_eq(lo_timer_idle(loop, idle_timer, it, 5000), 0);
}

static void idle_other(struct lo_loop *loop, void *arg)
{
	struct idle_t *it = arg;

	if (++it->other == 1 && it->signal_ms == 1) {
		it->fired_at_signal = it->fired;
		it->signal_ms = lo_now_ms();
		kill(getpid(), SIGUSR1);
	}
	if (it->other == 3)
		lo_stop(loop);
}

static void idle_signal(struct lo_loop *loop, int signo, void *arg)
{
	struct idle_t *it = arg;

	(void)loop;
	(void)signo;
	it->signals++;
}

/* Idle (50 ms) at its first firing only. */
static void idle_once(struct lo_loop *loop, void *arg)
{
	struct idle_t *it = arg;

	if (++it->fired == 1)
		ck_assert_int_eq(lo_timer_idle(loop, idle_once, it, 50), 0);
}

START_TEST(timer_idle_until_something_happens)
{
	struct lo_loop *loop;
	struct idle_t quiet = { 0 }, woken = { .signal_ms = 1 };

	/* Idle, nothing else happening: one firing in 300 ms, not 30. */
	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_int_eq(lo_timer_idle(loop, idle_other, &quiet, 10),
			 -ENOENT);
	ck_assert_int_eq(lo_timer(loop, 10, idle_timer, &quiet), 0);
	ck_assert_int_eq(lo_timer(loop, 100, idle_other, &quiet), 0);
	/* At or below the period: no change. */
	ck_assert_int_eq(lo_timer_idle(loop, idle_other, &quiet, 50), 0);
	ck_assert_int_eq(lo_run(loop), 0);
	ck_assert_int_eq(quiet.fired, 1);
	lo_loop_free(loop);

	/* A signal brings the period back: it fires 10 ms after it. */
	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_int_eq(lo_signal(loop, SIGUSR1, idle_signal, &woken), 0);
	ck_assert_int_eq(lo_timer(loop, 10, idle_timer, &woken), 0);
	ck_assert_int_eq(lo_timer(loop, 100, idle_other, &woken), 0);
	ck_assert_int_eq(lo_run(loop), 0);
	ck_assert_int_eq(woken.signals, 1);
	ck_assert_int_eq(woken.fired_at_signal, 1);
	ck_assert_int_eq(woken.fired, 2);
	ck_assert_uint_le(woken.after_ms, 150);
	lo_loop_free(loop);

	/*
	 * Said once: the next firing is 50 ms on, the ones after it every
	 * 10 ms again (about 25 in 300 ms; 6 if it stayed idle).
	 */
	ck_assert_int_eq(lo_loop_new(&loop), 0);
	memset(&quiet, 0, sizeof(quiet));
	ck_assert_int_eq(lo_timer(loop, 10, idle_once, &quiet), 0);
	ck_assert_int_eq(lo_timer(loop, 100, idle_other, &quiet), 0);
	ck_assert_int_eq(lo_run(loop), 0);
	ck_assert_int_ge(quiet.fired, 12);
	lo_loop_free(loop);
}
END_TEST

struct stall {
	int ticks, reports;
	char what[64];
	uint64_t ms;
};

/* The second tick holds the loop 60 ms; the fourth stops it. */
static void slow_timer(struct lo_loop *loop, void *arg)
{
	struct stall *st = arg;

	if (++st->ticks == 2)
		usleep(60 * 1000);
	if (st->ticks == 4)
		lo_stop(loop);
}

static void on_stall(void *arg, const char *what, uint64_t ms)
{
	struct stall *st = arg;

	st->reports++;
	snprintf(st->what, sizeof(st->what), "%s", what);
	st->ms = ms;
}

/* A callback that holds the loop is reported once, with its kind and time. */
START_TEST(stall_reported)
{
	struct lo_loop *loop;
	struct stall st = { 0 };

	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_int_eq(lo_timer(loop, 5, slow_timer, &st), 0);
	lo_set_stall(loop, 40, on_stall, &st);
	ck_assert_int_eq(lo_run(loop), 0);
	ck_assert_int_eq(st.ticks, 4);
	ck_assert_int_eq(st.reports, 1);
	ck_assert_str_eq(st.what, "timer");
	ck_assert_uint_ge(st.ms, 60);
	lo_loop_free(loop);
}
END_TEST

static void on_signal(struct lo_loop *loop, int signo, void *arg)
{
	*(int *)arg = signo;
	lo_stop(loop);
}

/* lo_poll: a pipe written by a timer; each byte read, then it closes. */
struct pollt {
	struct lo_loop *loop;
	struct lo_poll *p;
	int fds[2];
	int ticks, got, calls, closed_at;
};

static void pollt_readable(void *arg, int res)
{
	struct pollt *pt = arg;
	char buf[16];
	ssize_t n;

	ck_assert_int_eq(res, 0);
	pt->calls++;
	while ((n = read(pt->fds[0], buf, sizeof(buf))) > 0)
		pt->got += (int)n;
	ck_assert(n < 0 && errno == EAGAIN);
	if (pt->got == 5) {	/* closed from inside its callback */
		lo_poll_close(pt->p);
		pt->p = NULL;
		pt->closed_at = pt->ticks;
	}
}

static void pollt_timer(struct lo_loop *loop, void *arg)
{
	struct pollt *pt = arg;

	if (++pt->ticks <= 5)
		ck_assert_int_eq(write(pt->fds[1], "x", 1), 1);
	/* Written after the close: nobody is called. */
	if (pt->ticks == 8)
		ck_assert_int_eq(write(pt->fds[1], "y", 1), 1);
	if (pt->ticks == 12)
		lo_stop(loop);
}

START_TEST(poll_readable)
{
	struct pollt pt = { 0 };

	ck_assert_int_eq(lo_loop_new(&pt.loop), 0);
	ck_assert_int_eq(pipe2(pt.fds, O_NONBLOCK | O_CLOEXEC), 0);
	ck_assert_int_eq(lo_poll(pt.loop, pt.fds[0], pollt_readable, &pt,
				 &pt.p), 0);
	ck_assert_int_eq(lo_timer(pt.loop, 5, pollt_timer, &pt), 0);
	ck_assert_int_eq(lo_run(pt.loop), 0);
	ck_assert_int_eq(pt.got, 5);
	ck_assert_int_eq(pt.closed_at, 5);
	ck_assert_int_ge(pt.calls, 1);
	ck_assert_int_le(pt.calls, 5);
	/* One left open, watched: freed with the loop. */
	ck_assert_int_eq(lo_poll(pt.loop, pt.fds[0], pollt_readable, &pt,
				 &pt.p), 0);
	lo_loop_free(pt.loop);
	close(pt.fds[0]);
	close(pt.fds[1]);
}
END_TEST

START_TEST(signal_stops)
{
	struct lo_loop *loop;
	int got = 0;

	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_int_eq(lo_signal(loop, SIGUSR1, on_signal, &got), 0);
	kill(getpid(), SIGUSR1);
	ck_assert_int_eq(lo_run(loop), 0);
	ck_assert_int_eq(got, SIGUSR1);
	lo_loop_free(loop);
}
END_TEST

/* ---- file writes and fsyncs through the ring ---- */

struct fileio {
	int pending, errors, last;
};

static void fileio_done(void *arg, int res)
{
	struct fileio *io = arg;

	io->pending--;
	io->last = res;
	if (res)
		io->errors++;
}

static void fileio_poll(struct lo_loop *loop, void *arg)
{
	struct fileio *io = arg;

	if (!io->pending)
		lo_stop(loop);
}

START_TEST(file_write_fsync)
{
	char path[] = "/tmp/check-loop-XXXXXX";
	struct fileio io = { 0 };
	struct lo_loop *loop;
	size_t len = 3u << 20, i;
	uint8_t *buf = malloc(len), *back = malloc(len);
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	ck_assert_ptr_nonnull(buf);
	ck_assert_ptr_nonnull(back);
	for (i = 0; i < len; i++)
		buf[i] = pattern(i);
	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_int_eq(lo_timer(loop, 5, fileio_poll, &io), 0);
	/* Three chunks, out of order, then an fsync. */
	io.pending = 3;
	ck_assert_int_eq(lo_file_write(loop, fd, buf + (2u << 20), 1u << 20,
				       2u << 20, fileio_done, &io), 0);
	ck_assert_int_eq(lo_file_write(loop, fd, buf, 1u << 20, 0,
				       fileio_done, &io), 0);
	ck_assert_int_eq(lo_file_write(loop, fd, buf + (1u << 20), 1u << 20,
				       1u << 20, fileio_done, &io), 0);
	ck_assert_int_eq(lo_run(loop), 0);
	ck_assert_int_eq(io.pending, 0);
	io.pending = 1;
	ck_assert_int_eq(lo_file_fsync(loop, fd, fileio_done, &io), 0);
	ck_assert_int_eq(lo_run(loop), 0);
	ck_assert_int_eq(io.pending, 0);
	ck_assert_int_eq(io.errors, 0);
	ck_assert_int_eq(pread(fd, back, len, 0), (ssize_t)len);
	ck_assert_int_eq(memcmp(buf, back, len), 0);

	/* A write to a descriptor open for reading fails with its errno. */
	close(fd);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	io.pending = 1;
	ck_assert_int_eq(lo_file_write(loop, fd, buf, 10, 0, fileio_done,
				       &io), 0);
	ck_assert_int_eq(lo_run(loop), 0);
	ck_assert_int_eq(io.last, -EBADF);

	/* One still in flight when the loop goes hears -ECANCELED. */
	io.pending = 1;
	io.last = 0;
	ck_assert_int_eq(lo_file_fsync(loop, fd, fileio_done, &io), 0);
	lo_loop_free(loop);
	ck_assert_int_eq(io.pending, 0);
	ck_assert_int_eq(io.last, -ECANCELED);
	close(fd);
	unlink(path);
	free(buf);
	free(back);
}
END_TEST

/*
 * A deferred call runs once per turn however often it was queued, after
 * the turn's completions and before the loop waits; a cancelled one not.
 */
struct dtest {
	struct lo_defer d, never;
	int ticks, runs, never_runs;
	bool late;
};

static void d_run(void *arg)
{
	((struct dtest *)arg)->runs++;
}

static void d_never(void *arg)
{
	((struct dtest *)arg)->never_runs++;
}

static void d_timer(struct lo_loop *loop, void *arg)
{
	struct dtest *t = arg;

	/* The last turn's call ran before this turn's wait ended. */
	if (t->runs != t->ticks)
		t->late = true;
	if (++t->ticks == 4) {
		lo_stop(loop);
		return;
	}
	lo_defer(loop, &t->d);
	lo_defer(loop, &t->d);
	if (t->ticks == 1) {
		lo_defer(loop, &t->never);
		lo_defer_cancel(loop, &t->never);
	}
}

START_TEST(defer_once_a_turn)
{
	struct dtest t = { .d = { .fn = d_run, .arg = &t },
			   .never = { .fn = d_never, .arg = &t } };
	struct lo_loop *loop;

	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_int_eq(lo_timer(loop, 10, d_timer, &t), 0);
	ck_assert_int_eq(lo_run(loop), 0);
	ck_assert_int_eq(t.ticks, 4);
	ck_assert_int_eq(t.runs, 3);
	ck_assert(!t.late);
	ck_assert_int_eq(t.never_runs, 0);
	ck_assert(!t.never.queued);
	lo_loop_free(loop);
}
END_TEST

static Suite *loop_suite(void)
{
	Suite *s = suite_create("loop");
	TCase *tc = tcase_create("loop");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, echo_ipv4);
	tcase_add_test(tc, again_hands_back);
	tcase_add_test(tc, hold_until_released);
	tcase_add_test(tc, echo_ipv6);
	tcase_add_test(tc, echo_unix);
	tcase_add_test(tc, echo_large);
	tcase_add_test(tc, echo_many);
	tcase_add_test(tc, close_by_client);
	tcase_add_test(tc, close_by_server);
	tcase_add_test(tc, input_limit);
	tcase_add_test(tc, send_first_goes_ahead);
	tcase_add_test(tc, connect_refused);
	tcase_add_test(tc, bad_addresses);
	tcase_add_test(tc, unix_reclaim);
	tcase_add_test(tc, timer_period);
	tcase_add_test(tc, timer_idle_until_something_happens);
	tcase_add_test(tc, stall_reported);
	tcase_add_test(tc, defer_once_a_turn);
	tcase_add_test(tc, signal_stops);
	tcase_add_test(tc, file_write_fsync);
	tcase_add_test(tc, poll_readable);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(loop_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
