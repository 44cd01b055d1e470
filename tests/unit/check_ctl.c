// SPDX-License-Identifier: MIT
/*
 * The control socket and lentoctl: lentoctl (tools/bin/lentoctl, run as a
 * child) against a control server on lento's loop, in text and JSON; the
 * server's answers to malformed requests; the JSON writer.
 */
#include <check.h>
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "ctl.h"
#include "jw.h"

#define LENTOCTL "tools/bin/lentoctl"

static struct ctl_req *pending;

static void reply_later(struct lo_loop *loop, void *arg)
{
	(void)loop;
	(void)arg;
	if (pending) {
		if (!ctl_gone(pending))
			jw_printf(ctl_out(pending), "synced\n");
		ctl_reply(pending, 0);
		pending = NULL;
	}
}

static int cmd_echo(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	struct jw *w = ctl_out(r);
	int i;

	(void)ctx;
	if (ctl_json(r)) {
		jw_arr_begin(w);
		for (i = 0; i < argc; i++)
			jw_str(w, argv[i]);
		jw_arr_end(w);
		jw_raw(w, "\n", 1);
		return 0;
	}
	for (i = 0; i < argc; i++)
		jw_printf(w, "%s%s", i ? " " : "", argv[i]);
	jw_raw(w, "\n", 1);
	return 0;
}

static int cmd_fail(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	(void)ctx;
	(void)argc;
	ctl_error(r, "no volume named %s", argv[0]);
	return -ENOENT;
}

static int cmd_later(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	(void)ctx;
	(void)argc;
	(void)argv;
	pending = r;
	return CTL_LATER;
}

static int cmd_big(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	int i;

	(void)ctx;
	(void)argc;
	(void)argv;
	for (i = 0; i < 100000; i++)
		jw_printf(ctl_out(r), "line %06d of a long answer\n", i);
	return 0;
}

/* The asker's groups, at most ARG of them: "N: G G ...". */
static int cmd_groups(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	gid_t g[512];
	size_t max = strtoul(argv[0], NULL, 10);
	int n;

	(void)ctx;
	(void)argc;
	ck_assert_uint_le(max, 512);
	n = ctl_peer_groups(r, g, max);
	if (n < 0) {
		ctl_error(r, "groups: %s", strerror(-n));
		return n;
	}
	jw_printf(ctl_out(r), "%d:", n);
	for (int i = 0; i < n; i++)
		jw_printf(ctl_out(r), " %u", (unsigned)g[i]);
	jw_raw(ctl_out(r), "\n", 1);
	return 0;
}

static const struct ctl_cmd cmds[] = {
	{ "echo", "WORD...", "prints its arguments", 0, 8, cmd_echo },
	{ "fail", "NAME", "fails", 1, 1, cmd_fail },
	{ "sync", NULL, "answers later", 0, 0, cmd_later },
	{ "big", NULL, "a long answer", 0, 0, cmd_big },
	{ "groups", "MAX", "the asker's groups", 1, 1, cmd_groups },
	{ "a-long-command-name", "X", "a long name", 1, 1, cmd_echo },
	{ 0 }
};

static struct ctl_server srv = { .cmds = cmds };
static char sock[64];
static struct lo_loop *loop;

static void child_exited(struct lo_loop *l, int signo, void *arg)
{
	(void)signo;
	(void)arg;
	lo_stop(l);
}

static void setup(void)
{
	char err[256];

	snprintf(sock, sizeof(sock), "/tmp/check-ctl.%d", getpid());
	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_msg(!ctl_listen(loop, sock, &srv, err, sizeof(err)), "%s",
		      err);
	ck_assert_int_eq(lo_signal(loop, SIGCHLD, child_exited, NULL), 0);
	ck_assert_int_eq(lo_timer(loop, 50, reply_later, NULL), 0);
}

static void teardown(void)
{
	lo_loop_free(loop);
	loop = NULL;
}

/* The supplementary groups lentoctl runs with; none set: the test's own. */
static gid_t child_groups[300];
static size_t nchild_groups;

/* Runs lentoctl ARGS while the loop serves; its output and exit status. */
static int lentoctl(char *out, size_t size, const char *const *args)
{
	const char *argv[16] = { LENTOCTL, "-s", sock };
	char path[64];
	int i, status;
	FILE *f;
	size_t n;
	pid_t pid;

	for (i = 0; args[i]; i++)
		argv[3 + i] = args[i];
	snprintf(path, sizeof(path), "/tmp/check-ctl-out.%d", getpid());
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		sigset_t all;

		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		if (nchild_groups &&
		    setgroups(nchild_groups, child_groups))
			_exit(97);
		if (!freopen(path, "w", stdout) ||
		    dup2(fileno(stdout), 2) < 0)
			_exit(99);
		execv(LENTOCTL, (char **)argv);
		_exit(98);
	}
	while (waitpid(pid, &status, WNOHANG) == 0)
		lo_run(loop);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	n = fread(out, 1, size - 1, f);
	out[n] = 0;
	fclose(f);
	unlink(path);
	ck_assert(WIFEXITED(status));
	return WEXITSTATUS(status);
}

START_TEST(text_echo)
{
	static const char *const a[] = { "echo", "a b", "c", NULL };
	char out[256];

	ck_assert_int_eq(lentoctl(out, sizeof(out), a), 0);
	ck_assert_str_eq(out, "a b c\n");
}
END_TEST

START_TEST(json_echo)
{
	static const char *const a[] = { "--json", "echo", "q\"t", "\t", NULL };
	char out[256];

	ck_assert_int_eq(lentoctl(out, sizeof(out), a), 0);
	ck_assert_str_eq(out, "[\"q\\\"t\",\"\\u0009\"]\n");
}
END_TEST

START_TEST(error_text_and_json)
{
	static const char *const a[] = { "fail", "vol1", NULL };
	static const char *const j[] = { "-j", "fail", "vol1", NULL };
	char out[256];

	ck_assert_int_eq(lentoctl(out, sizeof(out), a), 1);
	ck_assert_str_eq(out, "no volume named vol1\n");
	ck_assert_int_eq(lentoctl(out, sizeof(out), j), 1);
	ck_assert_str_eq(out, "{\"error\":\"no volume named vol1\",\"errno\":2}\n");
}
END_TEST

START_TEST(usage_errors)
{
	static const char *const unknown[] = { "frobnicate", NULL };
	static const char *const many[] = { "fail", "a", "b", NULL };
	static const char *const none[] = { NULL };
	static const char *const help[] = { "help", NULL };
	char out[1024];

	ck_assert_int_eq(lentoctl(out, sizeof(out), unknown), 1);
	ck_assert_str_eq(out,
			 "unknown command 'frobnicate' (lentoctl help lists them)\n");
	ck_assert_int_eq(lentoctl(out, sizeof(out), many), 1);
	ck_assert_str_eq(out, "usage: fail NAME\n");
	ck_assert_int_eq(lentoctl(out, sizeof(out), none), 2);
	ck_assert_int_eq(lentoctl(out, sizeof(out), help), 0);
	ck_assert_ptr_nonnull(strstr(out, "echo"));
	ck_assert_ptr_nonnull(strstr(out, "answers later"));
	/* The columns as wide as the longest name. */
	ck_assert_ptr_eq(strstr(out, "  echo                WORD...  "), out);
	ck_assert_ptr_nonnull(strstr(out, "\n  a-long-command-name X        "));
}
END_TEST

START_TEST(answer_later)
{
	static const char *const a[] = { "sync", NULL };
	char out[256];

	ck_assert_int_eq(lentoctl(out, sizeof(out), a), 0);
	ck_assert_str_eq(out, "synced\n");
}
END_TEST

START_TEST(long_answer)
{
	static const char *const a[] = { "big", NULL };
	static char out[4 << 20];

	ck_assert_int_eq(lentoctl(out, sizeof(out), a), 0);
	ck_assert_uint_eq(strlen(out), 100000 * 29);
	ck_assert_ptr_nonnull(strstr(out, "line 099999 of a long answer\n"));
}
END_TEST

/* Which groups the asker has, as lentoctl's process had them. */
START_TEST(peer_groups)
{
	static const char *const all[] = { "groups", "512", NULL };
	static const char *const two[] = { "groups", "2", NULL };
	gid_t mine[512];
	char out[8192], want[8192];
	int n = getgroups(512, mine), k = 0;

	ck_assert_int_ge(n, 0);
	k += snprintf(want + k, sizeof(want) - k, "%d:", n);
	for (int i = 0; i < n; i++)
		k += snprintf(want + k, sizeof(want) - k, " %u",
			      (unsigned)mine[i]);
	snprintf(want + k, sizeof(want) - k, "\n");
	ck_assert_int_eq(lentoctl(out, sizeof(out), all), 0);
	ck_assert_str_eq(out, want);

	/* As root: 300 groups, of which the first 2, or 256. */
	if (geteuid())
		return;
	for (size_t i = 0; i < 300; i++)
		child_groups[i] = 5000 + (gid_t)i;
	nchild_groups = 300;
	ck_assert_int_eq(lentoctl(out, sizeof(out), two), 0);
	ck_assert_str_eq(out, "2: 5000 5001\n");
	ck_assert_int_eq(lentoctl(out, sizeof(out),
				  (const char *const[]){ "groups", "256",
							 NULL }), 0);
	ck_assert_int_eq(strncmp(out, "256: 5000 5001 ", 15), 0);
	ck_assert_ptr_nonnull(strstr(out, " 5255\n"));
	ck_assert_ptr_null(strstr(out, " 5256"));
	nchild_groups = 0;
}
END_TEST

START_TEST(no_lento)
{
	static const char *const a[] = { "echo", NULL };
	char out[256];

	lo_listener_close(srv.listener);
	lo_loop_free(loop);
	loop = NULL;
	ck_assert_int_ne(access(sock, F_OK), 0);
	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_int_eq(lo_signal(loop, SIGCHLD, child_exited, NULL), 0);
	ck_assert_int_eq(lentoctl(out, sizeof(out), a), 2);
	ck_assert_ptr_nonnull(strstr(out, "no lento at"));
}
END_TEST

/* A raw client: sends @req, collects the answer until the server closes. */
struct raw {
	const char *req;
	size_t len;
	char got[512];
	size_t n;
	int closed;
};

static void raw_connected(struct lo_conn *c, int err)
{
	struct raw *r = lo_conn_ctx(c);

	ck_assert_int_eq(err, 0);
	ck_assert_int_eq(lo_conn_send(c, r->req, r->len), 0);
}

static ssize_t raw_data(struct lo_conn *c, const uint8_t *p, size_t len)
{
	struct raw *r = lo_conn_ctx(c);
	size_t k = len < sizeof(r->got) - 1 - r->n ?
		   len : sizeof(r->got) - 1 - r->n;

	memcpy(r->got + r->n, p, k);
	r->n += k;
	r->got[r->n] = 0;
	return len;
}

static void raw_closed(struct lo_conn *c, int err, const char *reason)
{
	struct raw *r = lo_conn_ctx(c);

	(void)err;
	(void)reason;
	r->closed = 1;
	lo_stop(loop);
}

static const struct lo_conn_ops raw_ops = {
	.data = raw_data, .connected = raw_connected, .closed = raw_closed,
};

static void raw_request(struct raw *r)
{
	char addr[80];
	struct lo_conn *c;

	snprintf(addr, sizeof(addr), "unix:%s", sock);
	ck_assert_int_eq(lo_connect(loop, addr, &raw_ops, r, &c, NULL, 0), 0);
	while (!r->closed)
		lo_run(loop);
}

START_TEST(malformed_requests)
{
	struct raw no_format = { .req = "echo\0x\0\0", .len = 8 };
	struct raw empty = { .req = "\0\0", .len = 2 };
	struct raw ok = { .req = "text\0echo\0x\0\0", .len = 13 };

	raw_request(&no_format);
	ck_assert_str_eq(no_format.got,
			 "status 22\na request starts with its format, text or json\n");
	raw_request(&empty);
	ck_assert_str_eq(empty.got,
			 "status 22\na request starts with its format, text or json\n");
	raw_request(&ok);
	ck_assert_str_eq(ok.got, "status 0\nx\n");
}
END_TEST

START_TEST(request_too_long)
{
	static char big[CTL_REQ_MAX + 100];
	struct raw r = { .req = big, .len = sizeof(big) };

	memset(big, 'a', sizeof(big));
	raw_request(&r);
	/* Closed without an answer. */
	ck_assert_uint_eq(r.n, 0);
}
END_TEST

START_TEST(jw_nesting)
{
	struct jw w;
	const char *t;

	jw_init(&w);
	jw_obj_begin(&w);
	jw_key(&w, "a");
	jw_arr_begin(&w);
	jw_int(&w, -1);
	jw_uint(&w, 18446744073709551615ull);
	jw_bool(&w, true);
	jw_null(&w);
	jw_obj_begin(&w);
	jw_obj_end(&w);
	jw_arr_end(&w);
	jw_key(&w, "b\n");
	jw_str(&w, "\x01\x7f");
	jw_obj_end(&w);
	ck_assert_int_eq(jw_finish(&w, &t), 0);
	ck_assert_str_eq(t, "{\"a\":[-1,18446744073709551615,true,null,{}],"
			 "\"b\\u000a\":\"\\u0001\\u007f\"}");
	jw_free(&w);
}
END_TEST

static Suite *ctl_suite(void)
{
	Suite *s = suite_create("ctl");
	TCase *tc = tcase_create("ctl");

	tcase_set_timeout(tc, 30);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, text_echo);
	tcase_add_test(tc, json_echo);
	tcase_add_test(tc, error_text_and_json);
	tcase_add_test(tc, usage_errors);
	tcase_add_test(tc, answer_later);
	tcase_add_test(tc, long_answer);
	tcase_add_test(tc, peer_groups);
	tcase_add_test(tc, no_lento);
	tcase_add_test(tc, malformed_requests);
	tcase_add_test(tc, request_too_long);
	tcase_add_test(tc, jw_nesting);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(ctl_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
