// SPDX-License-Identifier: MIT
/* The control socket (see ctl.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ctl.h"

struct ctl_req {
	struct ctl_server *srv;
	struct lo_conn *conn;	/* NULL once the client is gone */
	bool json, started, later;
	int peer_err;		/* 0: uid and gid are the peer's */
	uint32_t uid, gid;
	struct jw out;
	char error[512];
};

bool ctl_json(const struct ctl_req *r)
{
	return r->json;
}

struct jw *ctl_out(struct ctl_req *r)
{
	return &r->out;
}

bool ctl_gone(const struct ctl_req *r)
{
	return !r->conn;
}

int ctl_peer(const struct ctl_req *r, uint32_t *uid, uint32_t *gid)
{
	if (r->peer_err)
		return r->peer_err;
	*uid = r->uid;
	*gid = r->gid;
	return 0;
}

int ctl_peer_groups(const struct ctl_req *r, gid_t *groups, size_t max)
{
	if (!r->conn)
		return -ENOTCONN;
	return lo_conn_peergroups(r->conn, groups, max);
}

void ctl_error(struct ctl_req *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->error, sizeof(r->error), fmt, ap);
	va_end(ap);
}

static void ctl_req_free(struct ctl_req *r)
{
	jw_free(&r->out);
	free(r);
}

/* Sends the response and closes the connection. */
static void ctl_send(struct ctl_req *r, int err)
{
	char head[32];
	struct jw body;
	const char *text = "";
	size_t len = 0;

	jw_init(&body);
	if (!err && jw_finish(&r->out, &text))
		err = -ENOMEM;
	if (!err) {
		len = r->out.len;
	} else {
		if (!r->error[0])
			snprintf(r->error, sizeof(r->error), "%s",
				 strerror(-err));
		if (r->json) {
			jw_obj_begin(&body);
			jw_key(&body, "error");
			jw_str(&body, r->error);
			jw_key(&body, "errno");
			jw_int(&body, -err);
			jw_obj_end(&body);
			jw_raw(&body, "\n", 1);
		} else {
			jw_printf(&body, "%s\n", r->error);
		}
		if (jw_finish(&body, &text))
			text = "out of memory\n";
		len = strlen(text);
	}
	snprintf(head, sizeof(head), "status %d\n", -err);
	if (lo_conn_send(r->conn, head, strlen(head)) ||
	    lo_conn_send(r->conn, text, len))
		lo_conn_close(r->conn, -ENOBUFS, "response too large");
	else
		lo_conn_close(r->conn, 0, "response sent");
	jw_free(&body);
}

void ctl_reply(struct ctl_req *r, int err)
{
	if (r->conn) {
		ctl_send(r, err);
		/* closed() sees later == false and frees r. */
		r->later = false;
		return;
	}
	ctl_req_free(r);
}

static const struct ctl_cmd *ctl_find(const struct ctl_cmd *cmds,
				      const char *name)
{
	for (; cmds->name; cmds++)
		if (!strcmp(cmds->name, name))
			return cmds;
	return NULL;
}

/* The widest command name, for help's columns: 12 at least. */
static int ctl_name_width(const struct ctl_cmd *cmds)
{
	size_t width = 12;

	for (; cmds->name; cmds++)
		if (strlen(cmds->name) > width)
			width = strlen(cmds->name);
	return (int)width;
}

static int ctl_help(struct ctl_req *r, const struct ctl_cmd *cmds)
{
	struct jw *w = &r->out;
	int width = ctl_name_width(cmds);

	if (r->json)
		jw_arr_begin(w);
	for (; cmds->name; cmds++) {
		if (r->json) {
			jw_obj_begin(w);
			jw_key(w, "command");
			jw_str(w, cmds->name);
			jw_key(w, "args");
			jw_str(w, cmds->args ? cmds->args : "");
			jw_key(w, "help");
			jw_str(w, cmds->help);
			jw_obj_end(w);
		} else {
			jw_printf(w, "  %-*s %-24s %s\n", width, cmds->name,
				  cmds->args ? cmds->args : "", cmds->help);
		}
	}
	if (r->json) {
		jw_arr_end(w);
		jw_raw(w, "\n", 1);
	}
	return 0;
}

/* A whole request in @p[0..len): split, check, run. */
static int ctl_run(struct ctl_req *r, char *p, size_t len)
{
	char *argv[CTL_ARGS_MAX];
	const struct ctl_cmd *cmd;
	int argc = 0;
	size_t i = 0;

	while (i < len && p[i]) {
		if (argc == CTL_ARGS_MAX) {
			ctl_error(r, "more than %d words", CTL_ARGS_MAX);
			return -E2BIG;
		}
		argv[argc++] = p + i;
		i += strlen(p + i) + 1;
	}
	if (argc < 1 || (strcmp(argv[0], "text") && strcmp(argv[0], "json"))) {
		ctl_error(r, "a request starts with its format, text or json");
		return -EINVAL;
	}
	r->json = !strcmp(argv[0], "json");
	if (argc < 2 || !strcmp(argv[1], "help"))
		return ctl_help(r, r->srv->cmds);
	cmd = ctl_find(r->srv->cmds, argv[1]);
	if (!cmd) {
		ctl_error(r, "unknown command '%s' (lentoctl help lists them)",
			  argv[1]);
		return -EINVAL;
	}
	if (argc - 2 < cmd->min_args || argc - 2 > cmd->max_args) {
		ctl_error(r, "usage: %s %s", cmd->name,
			  cmd->args ? cmd->args : "");
		return -EINVAL;
	}
	return cmd->run(r, r->srv->ctx, argc - 2, argv + 2);
}

static ssize_t ctl_data(struct lo_conn *c, const uint8_t *p, size_t len)
{
	struct ctl_req *r = lo_conn_ctx(c);
	char *buf;
	size_t i;
	int err;

	if (r->started)		/* one request per connection */
		return len;
	for (i = 1; i < len; i++)
		if (!p[i] && !p[i - 1])
			break;
	if (i >= len) {
		if (len >= CTL_REQ_MAX) {
			lo_conn_close(c, -E2BIG, "request too long");
			return -E2BIG;
		}
		return 0;	/* more to come */
	}
	r->started = true;
	buf = malloc(i + 1);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, p, i + 1);
	/* A command that answers later owns r until its ctl_reply(). */
	r->later = true;
	err = ctl_run(r, buf, i + 1);
	free(buf);
	if (err == CTL_LATER)
		return len;
	r->later = false;
	ctl_send(r, err);
	return len;
}

static void ctl_closed(struct lo_conn *c, int err, const char *reason)
{
	struct ctl_req *r = lo_conn_ctx(c);

	(void)err;
	(void)reason;
	r->conn = NULL;
	if (!r->later)		/* else its command frees it by ctl_reply() */
		ctl_req_free(r);
}

static const struct lo_conn_ops ctl_ops = {
	.data = ctl_data, .closed = ctl_closed,
};

static int ctl_accept(struct lo_listener *l, struct lo_conn *c, void *arg)
{
	struct ctl_req *r = calloc(1, sizeof(*r));
	uid_t uid = 0;
	gid_t gid = 0;

	(void)l;
	if (!r)
		return -ENOMEM;
	r->srv = arg;
	r->conn = c;
	r->peer_err = lo_conn_peerids(c, &uid, &gid);
	r->uid = uid;
	r->gid = gid;
	jw_init(&r->out);
	lo_conn_set_max_in(c, CTL_REQ_MAX);
	lo_conn_set(c, &ctl_ops, r);
	return 0;
}

int ctl_listen(struct lo_loop *loop, const char *path, struct ctl_server *s,
	       char *err, size_t errlen)
{
	char addr[256];

	if (snprintf(addr, sizeof(addr), "unix:%s", path) >=
	    (int)sizeof(addr)) {
		snprintf(err, errlen, "control socket path too long: %s",
			 path);
		return -ENAMETOOLONG;
	}
	return lo_listen(loop, addr, ctl_accept, s, &s->listener, err, errlen);
}
