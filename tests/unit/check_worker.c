// SPDX-License-Identifier: MIT
/*
 * lento's worker thread: jobs run off the loop in the order submitted,
 * their done() comes back on the loop, a job that blocks does not hold
 * the loop, and stopping hands back the jobs that never ran.
 */
#include <check.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "loop.h"
#include "worker.h"

struct tjob {
	struct wk_job wk;
	int id;
	int gate;		/* >= 0: run() waits for a byte on it */
	pthread_t ran_on;
	bool ran, done, done_ran;
	int *order, *norder;	/* ids in the order run() ran */
	pthread_t loop_thread;
	bool done_on_loop;
	struct lo_loop *stop_loop;	/* done() stops it */
	struct worker *w;
	struct tjob *resubmit;	/* done() submits it to w */
};

static void t_run(struct wk_job *wk)
{
	struct tjob *t = (struct tjob *)wk;
	char c;

	if (t->gate >= 0 && read(t->gate, &c, 1) != 1)
		return;
	t->ran_on = pthread_self();
	t->ran = true;
	t->order[(*t->norder)++] = t->id;
}

static void t_done(struct wk_job *wk, bool ran)
{
	struct tjob *t = (struct tjob *)wk;

	t->done = true;
	t->done_ran = ran;
	t->done_on_loop = pthread_equal(pthread_self(), t->loop_thread);
	if (t->stop_loop)
		lo_stop(t->stop_loop);
	if (t->resubmit)
		wk_submit(t->w, &t->resubmit->wk);
}

static void t_init(struct tjob *t, int id, int *order, int *norder)
{
	*t = (struct tjob){ .wk = { .run = t_run, .done = t_done },
			    .id = id, .gate = -1, .order = order,
			    .norder = norder, .loop_thread = pthread_self() };
}

static void guard(struct lo_loop *loop, void *arg)
{
	int *ticks = arg;

	if (++*ticks > 500)	/* 10 s: something is stuck */
		lo_stop(loop);
}

START_TEST(runs_in_order)
{
	struct lo_loop *loop;
	struct worker *w;
	struct tjob t[16];
	int order[16], norder = 0, ticks = 0;

	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_int_eq(wk_start(loop, &w), 0);
	ck_assert_int_eq(lo_timer(loop, 20, guard, &ticks), 0);
	for (int i = 0; i < 16; i++) {
		t_init(&t[i], i, order, &norder);
		wk_submit(w, &t[i].wk);
	}
	ck_assert_uint_eq(wk_pending(w), 16);
	t[15].stop_loop = loop;
	ck_assert_int_eq(lo_run(loop), 0);
	ck_assert_int_le(ticks, 500);
	ck_assert_uint_eq(wk_pending(w), 0);
	ck_assert_int_eq(norder, 16);
	for (int i = 0; i < 16; i++) {
		ck_assert_int_eq(order[i], i);
		ck_assert(t[i].done && t[i].done_ran && t[i].done_on_loop);
		ck_assert(!pthread_equal(t[i].ran_on, pthread_self()));
	}
	wk_stop(w);
	lo_loop_free(loop);
}
END_TEST

/* While a job blocks, the loop's timers go on. */
static void count_tick(struct lo_loop *loop, void *arg)
{
	int *n = arg;

	(void)loop;
	++*n;
}

struct opener {
	int fd;
	int *ticks;
};

static void open_gate(struct lo_loop *loop, void *arg)
{
	struct opener *o = arg;

	(void)loop;
	if (*o->ticks >= 5 && o->fd >= 0) {
		ck_assert_int_eq(write(o->fd, "x", 1), 1);
		o->fd = -1;
	}
}

START_TEST(blocked_job_frees_loop)
{
	struct lo_loop *loop;
	struct worker *w;
	struct tjob t;
	int order[1], norder = 0, ticks = 0, guard_ticks = 0, gate[2];
	struct opener o;

	ck_assert_int_eq(pipe(gate), 0);
	o.fd = gate[1];
	o.ticks = &ticks;
	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_int_eq(wk_start(loop, &w), 0);
	ck_assert_int_eq(lo_timer(loop, 20, guard, &guard_ticks), 0);
	ck_assert_int_eq(lo_timer(loop, 10, count_tick, &ticks), 0);
	ck_assert_int_eq(lo_timer(loop, 10, open_gate, &o), 0);
	t_init(&t, 7, order, &norder);
	t.gate = gate[0];
	t.stop_loop = loop;
	wk_submit(w, &t.wk);
	ck_assert_int_eq(lo_run(loop), 0);
	ck_assert_int_le(guard_ticks, 500);
	/* The loop ticked while the job waited for the gate it opened. */
	ck_assert(t.ran && t.done && t.done_ran);
	ck_assert_int_ge(ticks, 5);
	wk_stop(w);
	lo_loop_free(loop);
	close(gate[0]);
	close(gate[1]);
}
END_TEST

/* Stopping: the running job finishes, the queued ones come back unrun. */
START_TEST(stop_hands_back)
{
	struct lo_loop *loop;
	struct worker *w;
	struct tjob t[3];
	int order[3], norder = 0, gate[2];

	ck_assert_int_eq(pipe(gate), 0);
	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_int_eq(wk_start(loop, &w), 0);
	for (int i = 0; i < 3; i++) {
		t_init(&t[i], i, order, &norder);
		wk_submit(w, &t[i].wk);
	}
	t[0].gate = gate[0];
	/* t[0] may or may not have started: either way it finishes. */
	ck_assert_int_eq(write(gate[1], "x", 1), 1);
	wk_stop(w);
	for (int i = 0; i < 3; i++) {
		ck_assert(t[i].done && t[i].done_on_loop);
		ck_assert(t[i].done_ran == t[i].ran);
	}
	lo_loop_free(loop);
	close(gate[0]);
	close(gate[1]);
}
END_TEST

static void stop_now(struct lo_loop *loop, void *arg)
{
	(void)arg;
	lo_stop(loop);
}

/*
 * A done() that wk_stop() runs submits another job: that one comes back
 * unrun too, and the loop, run again, calls nothing of the freed worker.
 */
START_TEST(stop_takes_resubmitted)
{
	struct lo_loop *loop;
	struct worker *w;
	struct tjob t[2];
	int order[2], norder = 0;

	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_int_eq(wk_start(loop, &w), 0);
	t_init(&t[0], 0, order, &norder);
	t_init(&t[1], 1, order, &norder);
	t[0].w = w;
	t[0].resubmit = &t[1];
	wk_submit(w, &t[0].wk);
	wk_stop(w);
	ck_assert(t[0].done);
	ck_assert(t[1].done && !t[1].done_ran && !t[1].ran);
	ck_assert_int_eq(lo_timer(loop, 10, stop_now, NULL), 0);
	ck_assert_int_eq(lo_run(loop), 0);
	lo_loop_free(loop);
}
END_TEST

/*
 * Many hand-offs, both ways at once: each done() submits more jobs while
 * the worker runs the earlier ones. A wake-up lost on either side (a job
 * queued while the worker went to sleep, a job finished while the loop
 * took the queue) leaves a job undone and the guard stops the loop.
 */
#define STRESS_JOBS 20000

struct stress {
	struct worker *w;
	struct lo_loop *loop;
	struct sjob {
		struct wk_job wk;
		struct stress *s;
	} *jobs;
	int submitted, ran, done;
	bool in_order;
};

static void s_run(struct wk_job *wk)
{
	struct sjob *j = (struct sjob *)wk;

	/* The worker's own count: read by the loop after wk_stop(). */
	if (j - j->s->jobs != j->s->ran++)
		j->s->in_order = false;
}

static void s_done(struct wk_job *wk, bool ran);

static void s_submit(struct stress *s, int n)
{
	for (; n > 0 && s->submitted < STRESS_JOBS; n--) {
		struct sjob *j = &s->jobs[s->submitted++];

		j->wk = (struct wk_job){ .run = s_run, .done = s_done };
		j->s = s;
		wk_submit(s->w, &j->wk);
	}
}

static void s_done(struct wk_job *wk, bool ran)
{
	struct sjob *j = (struct sjob *)wk;
	struct stress *s = j->s;

	(void)ran;
	if (++s->done == STRESS_JOBS)
		lo_stop(s->loop);
	s_submit(s, s->done % 3 + 1);
}

START_TEST(no_lost_wakeups)
{
	struct stress s = { .in_order = true };
	int ticks = 0;

	s.jobs = calloc(STRESS_JOBS, sizeof(*s.jobs));
	ck_assert_ptr_nonnull(s.jobs);
	ck_assert_int_eq(lo_loop_new(&s.loop), 0);
	ck_assert_int_eq(wk_start(s.loop, &s.w), 0);
	ck_assert_int_eq(lo_timer(s.loop, 20, guard, &ticks), 0);
	for (int i = 0; i < 4; i++) {
		struct sjob *j = &s.jobs[s.submitted++];

		j->wk = (struct wk_job){ .run = s_run, .done = s_done };
		j->s = &s;
		wk_submit(s.w, &j->wk);
	}
	ck_assert_int_eq(lo_run(s.loop), 0);
	ck_assert_int_le(ticks, 500);
	ck_assert_int_eq(s.done, STRESS_JOBS);
	wk_stop(s.w);
	ck_assert_int_eq(s.ran, STRESS_JOBS);
	ck_assert(s.in_order);
	lo_loop_free(s.loop);
	free(s.jobs);
}
END_TEST

static Suite *worker_suite(void)
{
	Suite *s = suite_create("worker");
	TCase *tc = tcase_create("worker");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, runs_in_order);
	tcase_add_test(tc, blocked_job_frees_loop);
	tcase_add_test(tc, stop_hands_back);
	tcase_add_test(tc, stop_takes_resubmitted);
	tcase_add_test(tc, no_lost_wakeups);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(worker_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
