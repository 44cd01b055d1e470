/* SPDX-License-Identifier: MIT */
/*
 * A thread for the file work that may block for seconds on a busy disk
 * -- creating, copying and syncing files in the cache -- so that it does
 * not hold the event loop (leases, heartbeats and upcalls wait on it).
 *
 * One thread, jobs run in the order submitted: a job that removes a file
 * runs after the one that made it. A job's run() works on the thread
 * with what the job carries and nothing of the loop's (no SQLite, no
 * connections); its done() runs afterwards from the loop, where the
 * results are taken. The job is the submitter's: embedded in its own
 * struct, it is neither allocated nor freed here, and must stay until
 * done() ran. An owner that goes away first leaves done() to free it.
 *
 * Not thread-safe otherwise: submit and stop from the loop's thread.
 */
#ifndef LENTO_WORKER_H
#define LENTO_WORKER_H

#include <stdbool.h>

struct lo_loop;
struct worker;

struct wk_job {
	void (*run)(struct wk_job *j);	/* on the worker's thread */
	/*
	 * From the loop once run() returned; with @ran false if it never
	 * ran (the worker stopped first): it then frees what it must.
	 */
	void (*done)(struct wk_job *j, bool ran);
	struct wk_job *next;		/* the worker's */
};

int wk_start(struct lo_loop *loop, struct worker **out);
void wk_submit(struct worker *w, struct wk_job *j);
/* Jobs submitted and not yet done (run or not). */
unsigned int wk_pending(const struct worker *w);
/*
 * Waits for the job running (if any), runs done() of every job (those
 * never run with @ran false, also those a done() submits meanwhile) and
 * frees the worker. NULL is fine. Before the loop is freed.
 */
void wk_stop(struct worker *w);

#endif /* LENTO_WORKER_H */
