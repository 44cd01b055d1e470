/* SPDX-License-Identifier: MIT */
/*
 * The control socket lentoctl talks to: a local stream socket, one request
 * per connection.
 *
 * Request: words, each ended by a NUL, then an empty word (so the request
 * ends with two NULs); at most CTL_REQ_MAX bytes. The first word is the
 * output format, "text" or "json"; then the command and its arguments.
 * Response: a line "status N\n", N 0 for success or a positive errno,
 * then the command's output (text, or one JSON value; on failure the
 * message, or {"error": MESSAGE, "errno": N}); then the server closes.
 * Only the socket's owner (mode 0600) and root can connect.
 */
#ifndef LENTO_CTL_H
#define LENTO_CTL_H

#include <stdbool.h>
#include "jw.h"
#include "loop.h"

#define CTL_REQ_MAX	65536
#define CTL_ARGS_MAX	64

struct ctl_req;

struct ctl_cmd {
	const char *name;
	const char *args;	/* usage of the arguments, for help */
	const char *help;	/* one line */
	int min_args, max_args;
	/*
	 * Writes its output to ctl_out(r) (text or JSON as ctl_json(r)
	 * says) and returns 0, or -errno after ctl_error(); or returns
	 * CTL_LATER and calls ctl_reply() itself later (a sync that waits).
	 */
	int (*run)(struct ctl_req *r, void *ctx, int argc, char **argv);
};

#define CTL_LATER	1

/* A control socket; its owner keeps it as long as the loop runs. */
struct ctl_server {
	const struct ctl_cmd *cmds;	/* ended by a zeroed entry */
	void *ctx;			/* passed to every command */
	struct lo_listener *listener;
};

/*
 * Serves @s->cmds on the local socket @path (a stale socket file is
 * replaced; a live one is -EADDRINUSE).
 */
int ctl_listen(struct lo_loop *loop, const char *path, struct ctl_server *s,
	       char *err, size_t errlen);

bool ctl_json(const struct ctl_req *r);
struct jw *ctl_out(struct ctl_req *r);
/* The failure's message; the command then returns -errno. */
void ctl_error(struct ctl_req *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/*
 * Finishes a CTL_LATER request with @err (0 or -errno): sends the response
 * and frees @r. Safe after the client went away (nothing is sent then).
 */
void ctl_reply(struct ctl_req *r, int err);
/* Has the client of a CTL_LATER request gone? */
bool ctl_gone(const struct ctl_req *r);
/*
 * Who asked: the uid and gid of the process at the other end (taken when
 * it connected). A change made through the control socket is made as
 * them. -ENOTSOCK if unknown.
 */
int ctl_peer(const struct ctl_req *r, uint32_t *uid, uint32_t *gid);
/*
 * And its supplementary groups, as they were when it connected: the first
 * @max of them into @groups (lo_conn_peergroups()). Returns how many, or
 * -errno: -ENOTCONN once the client is gone, -ENOTSOCK or -ENOPROTOOPT
 * when the socket cannot tell.
 */
int ctl_peer_groups(const struct ctl_req *r, gid_t *groups, size_t max);

#endif /* LENTO_CTL_H */
