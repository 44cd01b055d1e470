/* SPDX-License-Identifier: MIT */
/*
 * lento's end of the kernel channel (protocol/KERNEL.md): the generic
 * netlink family "presto", through libnl-3 / libnl-genl-3, on lento's
 * io_uring loop.
 *
 * The family is resolved (its version checked) when the channel starts
 * and again every KCHAN_RETRY_MS while it is missing, so lento may start
 * before presto is loaded; a family that goes away (rmmod) or comes back
 * with another id is noticed by the same periodic check. The socket is
 * nonblocking, has NETLINK_NO_ENOBUFS set, and is read whenever the loop
 * sees it readable; once emptied, its drop counter (SO_MEMINFO) says
 * whether the kernel dropped messages to it meanwhile (ops->lost).
 *
 * Every message read is decoded by kchan_decode() -- a pure function, so
 * that it has unit tests and a fuzzer -- against a strict policy: the
 * bytes come from the kernel but are checked as any input (and a message
 * not sent by the kernel, port id 0, is dropped). Commands lento sends
 * ask for an ack; the ack (and the REGISTER or STATS message before it)
 * goes to the callback given with the command.
 *
 * Every function returns 0 or -errno and prints nothing; one thread.
 */
#ifndef LENTO_KCHAN_H
#define LENTO_KCHAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loop.h"
#include "presto_genl.h"

#define KCHAN_RETRY_MS	3000	/* family missing: look again this often */
#define KCHAN_CHECK_MS	5000	/* family there: check it still is */
#define KCHAN_ACK_MS	5000	/* an ack that does not come: -ETIMEDOUT */
#define KCHAN_RCVBUF	(4u << 20)
#define KCHAN_HANDLES_MAX 4095	/* handles one ACCESS may carry */
#define KCHAN_NAME_MAX	255	/* bytes of a NOTIFY name, no NUL */

/*
 * Is the ack of a message sent at @sent_ms overdue at @now? A tick reads
 * @now once, at its start, and a message sent later in that tick has a
 * @sent_ms past it: compared as now - sent_ms, that wraps to an age of
 * centuries and fails the message at once with -ETIMEDOUT.
 */
static inline bool kchan_ack_overdue(uint64_t sent_ms, uint64_t now)
{
	return sent_ms + KCHAN_ACK_MS <= now;
}

/* Which attributes a message has: bit (1u << PRESTO_A_x). */
#define KA(x)		(1u << PRESTO_A_##x)

enum kmsg_kind {
	KM_GENL,	/* a presto command: cmd and attributes */
	KM_ACK,		/* NLMSG_ERROR: the ack (err 0) or error of seq */
	KM_OTHER,	/* NLMSG_DONE, NLMSG_NOOP, another family: ignored */
};

/* A decoded message. Pointers point into the decoded bytes. */
struct kmsg {
	enum kmsg_kind kind;
	uint32_t seq;
	uint32_t portid;	/* of the header: 0 from the kernel */
	int err;		/* KM_ACK: 0 or -errno */
	uint8_t cmd;		/* KM_GENL */
	uint8_t version;
	uint32_t have;		/* KA() bits */
	char fileset[PRESTO_FILESET_MAX + 1];
	uint64_t req;
	uint32_t op;
	struct presto_handle handle, root;
	uint32_t errno_;
	uint32_t flags;
	uint64_t epoch;
	uint32_t timeout_ms;
	uint8_t mounted;
	uint32_t stat_have;	/* bit (1u << PRESTO_S_x) */
	uint64_t stat[PRESTO_S_MAX + 1];
	const uint8_t *handles;	/* nhandles * 16 bytes, unaligned */
	uint32_t nhandles;
	uint64_t kml_durable;	/* KML, and REGISTER's or MOUNTED's */
	uint64_t kml_acked;	/* <= kml_durable */
	uint8_t permit;		/* 0 or 1 */
};

/*
 * Decode one netlink message of @len bytes (exactly its nlmsg_len) from
 * presto, whose family id is @family. 0 with @m filled, or -EBADMSG with
 * *why said (-EPROTO: a presto message of a version lento does not know).
 */
int kchan_decode(const void *buf, size_t len, uint16_t family,
		 struct kmsg *m, const char **why);
/*
 * The messages of one datagram, one by one: *off starts at 0. 1 with
 * @m, 0 at the end, -EBADMSG (the rest of the datagram is unusable).
 */
int kchan_next(const void *buf, size_t len, size_t *off, uint16_t family,
	       struct kmsg *m, const char **why);
/* The @i-th handle of an ACCESS (i < m->nhandles). */
void kmsg_handle(const struct kmsg *m, uint32_t i, struct presto_handle *h);

/* The xattr PRESTO_CB_XATTR: encode (16 bytes) and decode. */
#define KCHAN_CB_LEN	16
void kchan_cb_encode(uint8_t out[KCHAN_CB_LEN], uint32_t flags,
		     uint32_t nlink, uint64_t epoch);
/*
 * -EINVAL: not a version 1 value of that size with valid flags and zero
 * padding. @nlink may be NULL.
 */
int kchan_cb_decode(const void *buf, size_t len, uint32_t *flags,
		    uint32_t *nlink, uint64_t *epoch);

const char *kchan_cmd_name(unsigned int cmd);
/* A fileset name as KERNEL.md allows (@len bytes, no NUL counted). */
bool kchan_fileset_ok(const char *s, size_t len);

/* ------------------------------------------------------------ the channel */

struct kchan;

struct kchan_ops {
	/* The family is (again) there: register what is to be registered. */
	void (*up)(void *arg);
	/* It went (module unloaded, or a new one with another id). */
	void (*down)(void *arg, const char *why);
	/* A message from presto (UPCALL, REGISTER, MOUNTED, ...). */
	void (*msg)(void *arg, const struct kmsg *m);
	/* A message that did not decode (dropped): for the log. */
	void (*bad)(void *arg, int err, const char *why);
	/*
	 * The kernel dropped messages to lento (its socket buffer was full:
	 * the socket's drop counter moved, or a read said ENOBUFS), or one
	 * came truncated: which ones is unknown, so what may have been in
	 * them is to be asked again.
	 */
	void (*lost)(void *arg);
};

/*
 * A command's end: @err 0 or -errno from the ack (-ETIMEDOUT if none
 * came, -ECANCELED if the channel went first); @reply the REGISTER or
 * STATS message that answered it, or NULL.
 */
typedef void (*kchan_ack_fn)(void *arg, int err, const struct kmsg *reply);

/* What lento sends; @have says which fields count (KA() bits). */
struct kcmd {
	uint8_t cmd;
	const char *fileset;
	uint32_t have;
	uint64_t req;
	uint32_t errno_;
	uint32_t flags;
	uint64_t epoch;
	struct presto_handle handle;
	uint64_t seq;		/* KML_ACK */
	uint8_t permit;		/* PERMIT */
	const char *name;	/* NOTIFY: one name of a directory */
	uint32_t event;		/* NOTIFY: PRESTO_EV_* */
};

/* The channel: tries the family at once, and at every tick after. */
int kchan_new(struct lo_loop *loop, const struct kchan_ops *ops, void *arg,
	      struct kchan **out);
/* Pending acks end with -ECANCELED. */
void kchan_free(struct kchan *k);
void kchan_tick(struct kchan *k, uint64_t now_ms);
/* When kchan_tick() next has something to do. */
uint64_t kchan_due_ms(const struct kchan *k);
bool kchan_is_up(const struct kchan *k);
/* Why it is not up ("" if it is). */
const char *kchan_state(const struct kchan *k);
/*
 * Send @c; its ack goes to @fn. With @fn NULL no ack is asked nor
 * awaited (PROGRESS, SET_FLAGS: many, and nothing to do with the
 * answer). -ENOTCONN if down, -ENOMEM if out of memory; the socket's
 * error (-ENOBUFS...) if the kernel did not take it.
 */
int kchan_send(struct kchan *k, const struct kcmd *c, kchan_ack_fn fn,
	       void *arg);
/* Acks awaited. */
unsigned int kchan_pending(const struct kchan *k);
/* How many times messages from presto were found lost (ops->lost). */
uint64_t kchan_losses(const struct kchan *k);

#endif /* LENTO_KCHAN_H */
