// SPDX-License-Identifier: MIT
/*
 * lento's end of the kernel channel (kchan.h, protocol/KERNEL.md): the
 * socket, the family's resolution, reading, sending and acks. What is
 * read is decoded by kchan_decode.c.
 */
#include "kchan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netlink/attr.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/family.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>

#ifndef SOL_NETLINK
#define SOL_NETLINK	270
#endif
#ifndef SO_MEMINFO
#define SO_MEMINFO	55
#endif

#include "fault.h"

#define KCHAN_RXBUF	(128u << 10)

/* ---------------------------------------------------------- the channel */

struct pending {
	struct pending *next;
	uint32_t seq;
	uint8_t cmd;
	char fileset[PRESTO_FILESET_MAX + 1];
	uint64_t sent_ms;
	kchan_ack_fn fn;
	void *arg;
	bool have_reply;
	struct kmsg reply;
};

struct kchan {
	struct lo_loop *loop;
	const struct kchan_ops *ops;
	void *arg;
	struct nl_sock *sk;
	int fd;
	struct lo_poll *poll;
	int family;		/* 0: not resolved */
	uint32_t seq;
	uint64_t next_ms;	/* next attempt (down) or check (up) */
	char state[256];
	struct pending *pend;
	unsigned int npend;
	uint8_t *rx;
	bool said_missing;
	/*
	 * Messages the kernel dropped at this socket (its buffer full):
	 * the socket's drop counter (SO_MEMINFO) as last read, and how
	 * many times lento found it moved.
	 */
	uint32_t drops_seen;
	bool drops_known;
	uint64_t losses;
};

bool kchan_is_up(const struct kchan *k)
{
	return k && k->sk;
}

const char *kchan_state(const struct kchan *k)
{
	return !k ? "no channel" : k->sk ? "" : k->state;
}

unsigned int kchan_pending(const struct kchan *k)
{
	return k ? k->npend : 0;
}

/* The family's id and version, on a socket of its own (blocking). */
static int resolve(int *id, uint32_t *version)
{
	struct nl_sock *s = nl_socket_alloc();
	struct nl_cache *cache = NULL;
	struct genl_family *fam;
	int err = 0;

	if (!s)
		return -ENOMEM;
	if (genl_connect(s) || genl_ctrl_alloc_cache(s, &cache)) {
		err = -EIO;
		goto out;
	}
	fam = genl_ctrl_search_by_name(cache, PRESTO_GENL_NAME);
	if (!fam) {
		err = -ENOENT;
		goto out;
	}
	*id = genl_family_get_id(fam);
	*version = (uint32_t)genl_family_get_version(fam);
	genl_family_put(fam);
out:
	if (cache)
		nl_cache_free(cache);
	nl_socket_free(s);
	return err;
}

static void fail_pending(struct kchan *k, int err)
{
	while (k->pend) {
		struct pending *p = k->pend;

		k->pend = p->next;
		k->npend--;
		if (p->fn)
			p->fn(p->arg, err, NULL);
		free(p);
	}
}

static void close_socket(struct kchan *k)
{
	if (k->poll)
		lo_poll_close(k->poll);
	k->poll = NULL;
	if (k->sk)
		nl_socket_free(k->sk);	/* closes the descriptor */
	k->sk = NULL;
	k->fd = -1;
}

static void go_down(struct kchan *k, const char *why)
{
	bool was = k->sk != NULL;

	snprintf(k->state, sizeof(k->state), "%s", why);
	close_socket(k);
	k->family = 0;
	fail_pending(k, -ECANCELED);
	k->next_ms = lo_now_ms() + KCHAN_RETRY_MS;
	if (was && k->ops->down)
		k->ops->down(k->arg, why);
}

static void dispatch(struct kchan *k, const struct kmsg *m)
{
	struct pending **pp, *p;

	if (m->kind == KM_ACK) {
		for (pp = &k->pend; (p = *pp); pp = &p->next)
			if (p->seq == m->seq)
				break;
		if (!p)
			return;	/* an ack nobody waits for (timed out) */
		*pp = p->next;
		k->npend--;
		if (p->fn)
			p->fn(p->arg, m->err, p->have_reply ? &p->reply : NULL);
		free(p);
		return;
	}
	if (m->kind != KM_GENL)
		return;
	if (m->cmd == PRESTO_CMD_REGISTER || m->cmd == PRESTO_CMD_STATS) {
		struct pending *by_name = NULL;

		for (p = k->pend; p; p = p->next) {
			if (p->cmd != m->cmd || p->have_reply ||
			    strcmp(p->fileset, m->fileset))
				continue;
			if (p->seq == m->seq)
				break;
			by_name = p;	/* the oldest (the list is newest first) */
		}
		/* An answer with another sequence: the oldest one asked. */
		p = p ?: by_name;
		if (p) {
			p->reply = *m;
			p->reply.handles = NULL;
			p->reply.nhandles = 0;
			p->have_reply = true;
		}
	}
	if (m->cmd != PRESTO_CMD_STATS && k->ops->msg)
		k->ops->msg(k->arg, m);
}

static void readable(void *arg, int res);

/*
 * Has the kernel dropped a message at this socket since the last look?
 * With NETLINK_NO_ENOBUFS set, a full buffer is no read error: the
 * socket's drop counter (SO_MEMINFO, SK_MEMINFO_DROPS) is what moves.
 */
static bool dropped(struct kchan *k)
{
	uint32_t mem[SK_MEMINFO_VARS];
	socklen_t len = sizeof(mem);
	bool moved;

	if (getsockopt(k->fd, SOL_SOCKET, SO_MEMINFO, mem, &len) ||
	    len <= SK_MEMINFO_DROPS * sizeof(mem[0]))
		return false;	/* an old kernel: ENOBUFS says it, if set */
	moved = k->drops_known && mem[SK_MEMINFO_DROPS] != k->drops_seen;
	k->drops_seen = mem[SK_MEMINFO_DROPS];
	k->drops_known = true;
	return moved;
}

/* Something presto sent was lost: the channel's user resynchronises. */
static void lost(struct kchan *k)
{
	k->losses++;
	if (k->ops->lost)
		k->ops->lost(k->arg);
}

/* Read every datagram queued; each message goes where it belongs. */
static void drain(struct kchan *k)
{
	bool lose = false;

	for (;;) {
		struct sockaddr_nl sa;
		socklen_t salen = sizeof(sa);
		size_t off = 0;
		struct kmsg m;
		const char *why;
		ssize_t n;
		int r;

		if (!k->sk)
			return;
		n = recvfrom(k->fd, k->rx, KCHAN_RXBUF, MSG_DONTWAIT |
			     MSG_TRUNC, (struct sockaddr *)&sa, &salen);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ENOBUFS) {	/* the kernel dropped some */
				lose = true;
				continue;
			}
			/* Nothing sensible is left: start over. */
			if (errno != EAGAIN && errno != EWOULDBLOCK) {
				go_down(k, "reading the presto socket failed");
				return;
			}
			/* All read: was anything dropped before it came? */
			if (dropped(k) || lose)
				lost(k);
			return;
		}
		/* A test's stand-in for a message the kernel dropped. */
		if (fault_at("kchan-drop")) {
			lose = true;
			continue;
		}
		if (salen != sizeof(sa) || sa.nl_family != AF_NETLINK ||
		    sa.nl_pid != 0)
			continue;	/* not from the kernel */
		if ((size_t)n > KCHAN_RXBUF) {
			lose = true;	/* truncated: lost as well */
			continue;
		}
		while ((r = kchan_next(k->rx, (size_t)n, &off,
				       (uint16_t)k->family, &m, &why))) {
			if (r < 0) {
				if (k->ops->bad)
					k->ops->bad(k->arg, r, why ? why : "?");
				continue;
			}
			dispatch(k, &m);
			if (!k->sk)
				return;
		}
	}
}

static void readable(void *arg, int res)
{
	struct kchan *k = arg;

	if (res == -EAGAIN) {	/* the watch stopped: a new one */
		lo_poll_close(k->poll);
		k->poll = NULL;
		if (lo_poll(k->loop, k->fd, readable, k, &k->poll))
			go_down(k, "cannot watch the presto socket");
		return;
	}
	drain(k);
}

/* The socket for @family, watched; or -errno and *@what failed. */
static int open_socket(struct kchan *k, int family, const char **what)
{
	int one = 1, size = KCHAN_RCVBUF, err;

	*what = "opening it";
	k->sk = nl_socket_alloc();
	if (!k->sk)
		return -ENOMEM;
	nl_socket_disable_seq_check(k->sk);
	if (nl_connect(k->sk, NETLINK_GENERIC)) {
		nl_socket_free(k->sk);
		k->sk = NULL;
		return -EIO;
	}
	k->fd = nl_socket_get_fd(k->sk);
	nl_socket_set_nonblocking(k->sk);
	/*
	 * Upcalls stay queued in presto when this fills: no error here.
	 * Without it a full buffer makes every read fail with ENOBUFS, and
	 * KERNEL.md asks for it: no channel rather than one that drops.
	 */
	if (setsockopt(k->fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one,
		       sizeof(one))) {
		err = -errno;
		close_socket(k);
		*what = "setting NETLINK_NO_ENOBUFS";
		return err;
	}
	if (setsockopt(k->fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)))
		setsockopt(k->fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	k->family = family;
	k->drops_known = false;
	dropped(k);		/* the counter's start */
	*what = "watching it";
	err = lo_poll(k->loop, k->fd, readable, k, &k->poll);
	if (err) {
		close_socket(k);
		k->family = 0;
	}
	return err;
}

static void try_up(struct kchan *k)
{
	const char *what;
	uint32_t version = 0;
	int id = 0, err = resolve(&id, &version);

	k->next_ms = lo_now_ms() + KCHAN_RETRY_MS;
	if (err == -ENOENT) {
		snprintf(k->state, sizeof(k->state), "the presto module is not "
			 "loaded (no generic netlink family \"%s\"): trying "
			 "again every %d s", PRESTO_GENL_NAME,
			 KCHAN_RETRY_MS / 1000);
		return;
	}
	if (err) {
		snprintf(k->state, sizeof(k->state), "generic netlink: %s",
			 strerror(-err));
		return;
	}
	if (version != PRESTO_GENL_VERSION) {
		snprintf(k->state, sizeof(k->state), "presto speaks version %u "
			 "of the channel, this lento version %d: not using it",
			 version, PRESTO_GENL_VERSION);
		return;
	}
	err = open_socket(k, id, &what);
	if (err) {
		snprintf(k->state, sizeof(k->state), "presto socket: %s: %s: "
			 "trying again every %d s", what, strerror(-err),
			 KCHAN_RETRY_MS / 1000);
		return;
	}
	k->state[0] = 0;
	k->next_ms = lo_now_ms() + KCHAN_CHECK_MS;
	if (k->ops->up)
		k->ops->up(k->arg);
}

int kchan_new(struct lo_loop *loop, const struct kchan_ops *ops, void *arg,
	      struct kchan **out)
{
	struct kchan *k = calloc(1, sizeof(*k));

	if (!k)
		return -ENOMEM;
	k->rx = malloc(KCHAN_RXBUF);
	if (!k->rx) {
		free(k);
		return -ENOMEM;
	}
	k->loop = loop;
	k->ops = ops;
	k->arg = arg;
	k->fd = -1;
	k->seq = (uint32_t)lo_now_ms();
	snprintf(k->state, sizeof(k->state), "not tried yet");
	*out = k;
	return 0;
}

void kchan_free(struct kchan *k)
{
	if (!k)
		return;
	close_socket(k);
	fail_pending(k, -ECANCELED);
	free(k->rx);
	free(k);
}

uint64_t kchan_due_ms(const struct kchan *k)
{
	uint64_t due;

	if (!k)
		return UINT64_MAX;
	due = k->next_ms;
	if (!k->sk)
		return due;
	for (const struct pending *p = k->pend; p; p = p->next)
		if (p->sent_ms + KCHAN_ACK_MS < due)
			due = p->sent_ms + KCHAN_ACK_MS;
	return due;
}

void kchan_tick(struct kchan *k, uint64_t now)
{
	struct pending **pp, *p;

	if (!k)
		return;
	if (!k->sk) {
		if (now >= k->next_ms)
			try_up(k);
		return;
	}
	/* Acks that never came. */
	for (pp = &k->pend; (p = *pp);) {
		if (!kchan_ack_overdue(p->sent_ms, now)) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		k->npend--;
		if (p->fn)
			p->fn(p->arg, -ETIMEDOUT, NULL);
		free(p);
	}
	if (now >= k->next_ms) {
		uint32_t version = 0;
		int id = 0, err = resolve(&id, &version);

		k->next_ms = now + KCHAN_CHECK_MS;
		if (err == -ENOENT)
			go_down(k, "the presto module went away");
		else if (!err && (id != k->family ||
				  version != PRESTO_GENL_VERSION))
			go_down(k, "the presto module was loaded again");
		if (!k->sk)
			try_up(k);
	}
}

static int put_cmd(struct nl_msg *msg, const struct kcmd *c)
{
	int err = nla_put_string(msg, PRESTO_A_FILESET, c->fileset);

	if (!err && (c->have & KA(REQ)))
		err = nla_put_u64(msg, PRESTO_A_REQ, c->req);
	if (!err && (c->have & KA(HANDLE)))
		err = nla_put(msg, PRESTO_A_HANDLE, sizeof(c->handle),
			      &c->handle);
	if (!err && (c->have & KA(ERRNO)))
		err = nla_put_u32(msg, PRESTO_A_ERRNO, c->errno_);
	if (!err && (c->have & KA(FLAGS)))
		err = nla_put_u32(msg, PRESTO_A_FLAGS, c->flags);
	if (!err && (c->have & KA(EPOCH)))
		err = nla_put_u64(msg, PRESTO_A_EPOCH, c->epoch);
	if (!err && (c->have & KA(SEQ)))
		err = nla_put_u64(msg, PRESTO_A_SEQ, c->seq);
	if (!err && (c->have & KA(PERMIT)))
		err = nla_put_u8(msg, PRESTO_A_PERMIT, c->permit);
	if (!err && (c->have & KA(NAME)))
		err = nla_put_string(msg, PRESTO_A_NAME, c->name);
	if (!err && (c->have & KA(EVENT)))
		err = nla_put_u32(msg, PRESTO_A_EVENT, c->event);
	return err ? -EMSGSIZE : 0;
}

int kchan_send(struct kchan *k, const struct kcmd *c, kchan_ack_fn fn,
	       void *arg)
{
	struct sockaddr_nl to = { .nl_family = AF_NETLINK };
	struct pending *p = NULL;
	struct nl_msg *msg;
	struct nlmsghdr *h;
	int err = 0;

	if (!kchan_is_up(k))
		return -ENOTCONN;
	if (!c->fileset || !kchan_fileset_ok(c->fileset, strlen(c->fileset)) ||
	    ((c->have & KA(NAME)) && (!c->name ||
				      strlen(c->name) > KCHAN_NAME_MAX)))
		return -EINVAL;
	if (fn) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return -ENOMEM;
	}
	msg = nlmsg_alloc();
	if (!msg) {
		free(p);
		return -ENOMEM;
	}
	if (!genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, k->family, 0,
			 NLM_F_REQUEST, c->cmd, PRESTO_GENL_VERSION))
		err = -EMSGSIZE;
	err = err ?: put_cmd(msg, c);
	if (!err) {
		h = nlmsg_hdr(msg);
		h->nlmsg_seq = ++k->seq;
		h->nlmsg_pid = nl_socket_get_local_port(k->sk);
		/* Without @fn no ack is asked (an error still comes back). */
		h->nlmsg_flags = NLM_F_REQUEST | (fn ? NLM_F_ACK : 0);
		while (sendto(k->fd, h, h->nlmsg_len, 0,
			      (struct sockaddr *)&to, sizeof(to)) < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			break;
		}
	}
	nlmsg_free(msg);
	if (err || !fn) {
		free(p);
		return err;
	}
	p->seq = k->seq;
	p->cmd = c->cmd;
	snprintf(p->fileset, sizeof(p->fileset), "%s", c->fileset);
	p->sent_ms = lo_now_ms();
	p->fn = fn;
	p->arg = arg;
	p->next = k->pend;
	k->pend = p;
	k->npend++;
	return 0;
}

uint64_t kchan_losses(const struct kchan *k)
{
	return k ? k->losses : 0;
}
