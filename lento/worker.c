// SPDX-License-Identifier: MIT
/*
 * The worker thread (worker.h). Jobs go to the thread through a queue
 * under a mutex; finished ones come back through a second queue, and an
 * eventfd the loop watches says there are some.
 *
 * Each hand-off wakes a thread only when one waits, and after the lock
 * is dropped, so that the thread woken does not block on it: the worker
 * is signalled once a turn of the loop (lo_defer()), for all the jobs
 * the turn submitted, and only while it sleeps; the eventfd is written
 * only when the finished queue was empty -- the loop takes it whole.
 * A server taking many clients' small bodies at once otherwise spent
 * much of its time switching between the two threads.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "worker.h"

struct wk_queue {
	struct wk_job *head, *tail;
};

struct worker {
	struct lo_loop *loop;
	struct lo_poll *poll;
	int efd;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct wk_queue todo, finished;	/* under lock */
	bool stop;			/* under lock */
	bool sleeping;			/* under lock: in cond_wait */
	struct lo_defer kick;		/* wk_kick(), once a turn */
	unsigned int pending;		/* the loop's */
};

static void q_add(struct wk_queue *q, struct wk_job *j)
{
	j->next = NULL;
	if (q->tail)
		q->tail->next = j;
	else
		q->head = j;
	q->tail = j;
}

static struct wk_job *q_take_all(struct wk_queue *q)
{
	struct wk_job *j = q->head;

	q->head = q->tail = NULL;
	return j;
}

static void *wk_main(void *arg)
{
	struct worker *w = arg;
	uint64_t one = 1;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct wk_job *j;
		bool tell;
		ssize_t k;

		while (!w->stop && !w->todo.head) {
			w->sleeping = true;
			pthread_cond_wait(&w->cond, &w->lock);
			w->sleeping = false;
		}
		if (w->stop)
			break;
		j = w->todo.head;
		w->todo.head = j->next;
		if (!w->todo.head)
			w->todo.tail = NULL;
		pthread_mutex_unlock(&w->lock);
		j->run(j);
		pthread_mutex_lock(&w->lock);
		tell = !w->finished.head;
		q_add(&w->finished, j);
		if (!tell)
			continue;
		/* Outside the lock, which the loop takes when it wakes. */
		pthread_mutex_unlock(&w->lock);
		/* Fails only when the counter is full: readable then. */
		k = write(w->efd, &one, sizeof(one));
		(void)k;
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static void run_done(struct worker *w, struct wk_job *j, bool ran)
{
	while (j) {
		struct wk_job *next = j->next;

		w->pending--;
		j->done(j, ran);	/* may free j */
		j = next;
	}
}

static void readable(void *arg, int res)
{
	struct worker *w = arg;
	struct wk_job *j;
	uint64_t n;

	if (res == -EAGAIN) {	/* the watch stopped: a new one */
		lo_poll_close(w->poll);
		w->poll = NULL;
		if (lo_poll(w->loop, w->efd, readable, w, &w->poll))
			log_err("the worker's jobs can no longer be finished: "
				"its eventfd cannot be watched");
		return;
	}
	/* Before the queue is taken: a job finished after that writes. */
	if (read(w->efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		log_err("the worker's eventfd: read failed");
	pthread_mutex_lock(&w->lock);
	j = q_take_all(&w->finished);
	pthread_mutex_unlock(&w->lock);
	run_done(w, j, true);
}

/* After the loop's turn: one wake-up for all the jobs it submitted. */
static void wk_kick(void *arg)
{
	struct worker *w = arg;
	bool wake;

	pthread_mutex_lock(&w->lock);
	wake = w->sleeping && w->todo.head;
	pthread_mutex_unlock(&w->lock);
	if (wake)
		pthread_cond_signal(&w->cond);
}

int wk_start(struct lo_loop *loop, struct worker **out)
{
	struct worker *w = calloc(1, sizeof(*w));
	sigset_t all, old;
	int err;

	if (!w)
		return -ENOMEM;
	w->loop = loop;
	w->kick.fn = wk_kick;
	w->kick.arg = w;
	w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->efd < 0) {
		err = -errno;
		free(w);
		return err;
	}
	err = lo_poll(loop, w->efd, readable, w, &w->poll);
	if (err)
		goto out_efd;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	/* Signals are the loop's (signalfd): the thread takes none. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = -pthread_create(&w->thread, NULL, wk_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		goto out_sync;
	*out = w;
	return 0;

out_sync:
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	lo_poll_close(w->poll);
out_efd:
	close(w->efd);
	free(w);
	return err;
}

void wk_submit(struct worker *w, struct wk_job *j)
{
	bool stopped;

	pthread_mutex_lock(&w->lock);
	q_add(&w->todo, j);
	stopped = w->stop;
	pthread_mutex_unlock(&w->lock);
	/* Submitted by a done() that wk_stop() runs: given back by it. */
	if (!stopped)
		lo_defer(w->loop, &w->kick);
	w->pending++;
}

unsigned int wk_pending(const struct worker *w)
{
	return w->pending;
}

void wk_stop(struct worker *w)
{
	if (!w)
		return;
	lo_defer_cancel(w->loop, &w->kick);
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	run_done(w, q_take_all(&w->finished), true);
	/* A done() may submit more: each is given back, never run. */
	while (w->todo.head)
		run_done(w, q_take_all(&w->todo), false);
	lo_poll_close(w->poll);
	close(w->efd);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w);
}
