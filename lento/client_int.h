/* SPDX-License-Identifier: MIT */
/*
 * The lento client's insides, shared by client.c (the daemon, its
 * connection, pushes, permits, status), client_fetch.c (what it asks the
 * server: volumes, validation, listings, bodies; resolving paths),
 * client_change.c (local changes and their CML records) and reint.c
 * (reintegration).
 *
 * Control requests that need the server are *ops*: an op's step function
 * runs, finds what is missing in the cache, starts (or joins) the *job*
 * that fetches it and parks; when the job ends the op's step runs again
 * from the top. A step that has all it needs does its work and finishes.
 * So an op never holds state across a wait but the request itself, and
 * every wait ends with its job: a reply, an error, or the connection
 * going (which fails every job).
 */
#ifndef LENTO_CLIENT_INT_H
#define LENTO_CLIENT_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "cache.h"
#include "client.h"
#include "conn.h"
#include "ctl.h"
#include "lento_types.h"
#include "loop.h"
#include "lproto.h"

#define CLIENT_TICK_MS		100
/*
 * A client with nothing to do before a known time (client_due_ms())
 * ticks as seldom as this: an idle laptop wakes once a second, not ten
 * times. Anything that happens (a message, a signal) brings the period
 * back at once.
 */
#define CLIENT_IDLE_TICK_MS	1000
#define PERMIT_IDLE_MS		30000	/* an unused permit is given back */
#define REINT_RETRY_MS		5000	/* after a batch failed for a reason
					 * that may pass (not a refusal) */
#define REINT_BACKOFF_MAX_MS	300000	/* the server refusing it again and
					 * again: doubled up to this */
#define REINT_MOVED_ON_MAX	3	/* catch-ups before a STORE's body
					   that moved on is given up */
#define OP_STEPS_MAX		1024	/* an op that keeps missing fails (a
					 * step per directory of a path, and
					 * what changes meanwhile) */
/*
 * A batch is bounded: the server applies it in one transaction from its
 * event loop, answering nobody meanwhile (about 0.7 ms a record under
 * ASan on the development host), and a silent server is soon gone.
 */
#define BATCH_RECORDS_MAX	1024
#define BATCH_RECORDS_MIN	8	/* however few descriptors it may open */
#define BATCH_BYTES_MAX		(16ull << 20)	/* bodies included */
#define BODY_QUEUE_LOW		(4u << 20)	/* queue more DATA below */
#define OP_WAIT			1	/* a step's "parked, run me later" */
#define TOUCH_MAX		256	/* uses kept before they are written */

struct client;
struct op;

/* What a volume's last reintegration came to. */
struct reint_result {
	int64_t when_ms;	/* wall clock; 0: none yet */
	uint32_t code;		/* LP_OK, LP_ECONFLICT, another lp_err */
	uint64_t records;	/* records the server applied in that round */
	char msg[512];
	/* LP_ECONFLICT: the record and object, both versions */
	uint64_t recno;		/* the CML record (not the shipped number) */
	uint16_t op;
	struct lento_fid fid;
	struct lento_vv base, current;
};

struct vol {
	struct vol *next;
	struct client *cl;
	struct cache_vol cv;
	bool validated;		/* this connection: its cache may be served */
	bool unknown;		/* the server has no such volume any more */
	/* Write-back permit, as far as this client knows. */
	bool permit;
	uint64_t expires_ms;	/* lo_now_ms() time; local, conservative */
	uint32_t lease_ms;
	uint64_t renew_at_ms, renew_sent_ms;
	bool acquiring, renewing, releasing;
	bool revoked;		/* the server asked for it back */
	uint64_t last_change_ms;
	/* Reintegration. */
	bool force;		/* ship now, however young the records */
	bool log_changed;	/* records logged since the optimiser ran */
	bool stuck;		/* refused: waits for "lentoctl reintegrate" */
	uint64_t retry_at_ms;	/* after a failure that may pass */
	uint32_t backoff_ms;	/* the server's refusals in a row: the wait */
	/* Why the last batch could not be made or sent here, and when. */
	int local_err;
	int64_t local_err_ms;
	/*
	 * A STORE's body moved on in the cache (its CML behind presto's
	 * journal): the batch waits for the journal's end consumed, this
	 * many times in a row before the body is given up as moot.
	 */
	bool catching_up;
	uint32_t moved_on;
	struct reint_result last;
	uint64_t rounds, shipped;	/* statistics */
};

enum job_kind {
	J_LOOKUP,	/* VOLUME_LOOKUP of a name */
	J_VALIDATE,	/* VOLUME_VALIDATE, then VALIDATE of its objects */
	J_READDIR,	/* a directory's listing */
	J_FETCH,	/* a file's body */
	J_ACQUIRE,	/* a volume's permit */
	J_RELEASE,	/* giving it back */
};

struct job {
	struct job *next;
	struct client *cl;
	uint64_t id;
	enum job_kind kind;
	uint32_t volume;
	struct lento_fid fid;
	char name[LENTO_VOLNAME_MAX + 1];
	uint32_t tag;		/* the request in flight; 0 none */
	bool inflight;		/* its request awaits (more of) a reply */
	bool broken;		/* a break came while it was in flight */
	/*
	 * The connection went while it was under way, and with it the
	 * server's promises: what it cached is validated again (job_end()).
	 */
	bool conn_lost;
	bool done;		/* ended; freed once its I/O is done too */
	int io;			/* file writes and fsyncs in flight */
	uint64_t sent_ms;	/* when its request went */
	int err;
	char msg[300];		/* why it failed, for the ops waiting */
	void *priv;		/* the kind's own state */
	void (*free_priv)(struct job *j);
};

struct op {
	struct op *next;
	struct client *cl;
	struct ctl_req *r;
	int (*step)(struct op *op);
	int argc;
	char **argv;		/* copies */
	uint64_t wait_job;	/* the job it waits for, 0 none */
	uint32_t wait_vol;	/* or a volume's permit/reintegration */
	bool wait_reint;	/* or any reintegration's end (sync) */
	bool wait_body;		/* or its body, made on the worker */
	/*
	 * A change's new content (write, a new size), made into a synced
	 * temporary file on the worker's thread: the op's own until it
	 * goes (client_change.c).
	 */
	struct op_body *body;
	int steps;
	uint64_t woken;		/* the last op_wake() that ran it */
	int next_arg;		/* commands of several paths: done so far */
	uint32_t uid, gid;	/* who asked */
	/*
	 * and the asker's supplementary groups (little-endian u32s), which
	 * the op owns: its records point at them until cml_append() copies.
	 */
	uint16_t ngroups;
	uint8_t groups[4 * LENTO_GROUPS_MAX];
	bool kml_synced;	/* sync: presto's journals asked (KML_SYNC) */
	/* An object's parent listed again for its status (stat). */
	bool relisted;
	int64_t started_ms;	/* wall clock */
};

struct client_stats {
	uint64_t hits, misses, fetches, fetched_bytes, evictions;
	uint64_t listings;
	uint64_t listing_steps;		/* turns a listing's apply yielded */
	uint64_t breaks, volume_breaks;	/* callback breaks heard */
	uint64_t xattrs_skipped;	/* the cache could not take them */
	uint64_t size_counts;		/* evict_check()'s scans of the cache */
	/* Chunks of bodies in memory at most, and the input held for them. */
	uint64_t fetch_mem_peak, fetch_holds;
};

struct batch;
struct kclient;

struct client {
	const struct client_opts *opt;
	struct lo_loop *loop;
	struct cache *cache;
	struct conn *conn;
	struct ctl_server ctl;
	uint32_t client_id;
	bool id_assigned;	/* by the server: changes may mint fids */
	uint8_t uuid[16];
	uint64_t epoch;		/* of the current (or last) connection */
	bool epoch_known;
	uint32_t age_ms;
	uint32_t watch_ms;	/* a watched fileset revalidated after (0: no) */
	uint64_t cache_size;
	uint64_t fetch_mem_max;	/* --fetch-memory (CLIENT_FETCH_MEMORY) */
	uint32_t batch_records;	/* records a batch carries at most */
	struct vol *vols;
	struct job *jobs;
	uint64_t next_job_id;
	struct op *ops;
	struct batch *batch;	/* the REINTEGRATE on the wire, if any */
	struct worker *wk;	/* file work off the loop (worker.h) */
	void *zd;		/* bodies' ZSTD_DCtx (lp_zd_free) */
	uint64_t fetch_mem;	/* chunks being written (fetch_mem_max) */
	struct client_stats st;
	bool full_of_dirty;	/* reported once per episode */
	/* Uses for the LRU, written once a tick: not an fsync per read. */
	struct lento_fid touched[TOUCH_MAX];
	int ntouched;
	bool kicking, kick_again;	/* reint_kick() runs, and again */
	/*
	 * The last reint_kick() left records to ship. Stale while a batch
	 * is out or the server is away, both of which keep the tick busy
	 * or end in a completion that brings a tick and a kick.
	 */
	bool reint_waits;
	uint64_t evict_check_ms;
	/* cache_changes() at the last count that found it within its size. */
	int64_t evict_changes;	/* -1: count at the next check */
	int stop_signal;
	bool crash_after_send;	/* LENTO_TEST_CRASH_AFTER_SEND */
	/* The sync of the cache's lazy commits on the ring: up to sync_gen. */
	bool syncing, sync_again;
	uint64_t sync_gen;
	struct kclient *k;	/* presto's filesets (client_kernel.c) */
};

/* The earlier of two times: the *_due_ms() functions' one step. */
static inline uint64_t earlier_ms(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* client.c */
struct vol *vol_by_id(struct client *cl, uint32_t id);
struct vol *vol_by_name(struct client *cl, const char *name);
int vol_add(struct client *cl, const struct cache_vol *cv, struct vol **out);
/*
 * When a lease of @lease_ms asked for at @asked_ms ends here: sooner than
 * the server counts it, whatever each clock's lag (lo_clock_slack_ms()).
 */
uint64_t lease_end(uint64_t asked_ms, uint32_t lease_ms);
bool connected(const struct client *cl);
int64_t wall_ms(void);
/* The job ended: its ops run again, or fail with its error. */
void op_wake_job(struct client *cl, struct job *j);
void op_wake_volume(struct client *cl, uint32_t volume);
void op_wake_reint(struct client *cl);
/* @op's body is made (or failed): it runs again. */
void op_wake_body(struct client *cl, struct op *op);
int op_start(struct client *cl, struct ctl_req *r, int argc, char **argv,
	     int (*step)(struct op *op));
void permit_lost(struct client *cl, struct vol *v, const char *why);
/* @fid was used (the LRU's order); written at the next tick. */
void client_touch(struct client *cl, const struct lento_fid *fid);
void client_touches_flush(struct client *cl);
/*
 * The cache's lazy commits so far made durable on the loop's ring
 * (cache.h), unless they are or a sync is under way; its end tells
 * presto's filesets (kml_synced()) and the reintegration.
 */
void client_sync_want(struct client *cl);

/* client_fetch.c */
/*
 * A server may keep a read waiting behind another client's permit for two
 * leases (60 s by default): a request still unanswered, with no answer to
 * any request meanwhile, for longer than this or three of the longest
 * lease seen is taken for lost, and the upcalls waiting for it are no
 * longer kept alive (PROGRESS): presto fails them with ETIMEDOUT.
 */
#define JOB_SILENT_MS	120000
/* Is job @id waiting for an answer the server has been silent on? */
bool job_stalled(struct client *cl, uint64_t id, uint64_t now);
struct job *job_find(struct client *cl, enum job_kind k, uint32_t volume,
		     const struct lento_fid *fid, const char *name);
int job_start(struct client *cl, enum job_kind k, uint32_t volume,
	      const struct lento_fid *fid, const char *name, struct job **out);
/* Park @op on the job (started if need be); OP_WAIT or -errno. */
int op_need(struct op *op, enum job_kind k, uint32_t volume,
	    const struct lento_fid *fid, const char *name);
/* End @j (0 or -errno, with j->msg said); its ops learn it. */
void job_end(struct job *j, int err);
void jobs_break_fid(struct client *cl, const struct lento_fid *fid);
void jobs_break_volume(struct client *cl, uint32_t volume);
/* The connection went, and with it every promise the server made. */
void jobs_conn_lost(struct client *cl);
/*
 * presto's journal of @v (NULL: any volume) was read further or cannot
 * be: the listings waiting for it look again.
 */
void listings_journal_moved(struct client *cl, const struct vol *v);
/* A listing of @dir is being applied: lookups in it wait for it. */
bool listing_applying(struct client *cl, const struct lento_fid *dir);
void jobs_free(struct client *cl);
/*
 * From the tick, at most once a second: count the cache's size if it may
 * have changed, evict if it is over (client_fetch.c says when it counts).
 */
void evict_check(struct client *cl, uint64_t now);
/* Replace a file's content by a sparse placeholder: not cached now. */
int evict_obj(struct client *cl, const struct cache_obj *o);

/* A path VOLUME/a/b resolved as far as the cache (and server) allow. */
struct resolved {
	struct vol *vol;
	struct lento_fid parent;	/* null for a volume's root */
	char name[LENTO_NAME_MAX + 1];	/* the last component, "" for a root */
	struct lento_fid fid;		/* null if no such entry */
	struct cache_obj obj;		/* fid's, when not null */
	char path[CACHE_PATH_MAX];	/* relative to the cache directory */
};

/*
 * Resolve @path for @op. The parent's listing is cached and usable;
 * @need_obj: the object must exist (else -ENOENT). 0, OP_WAIT or -errno
 * (with ctl_error said).
 */
int resolve(struct op *op, const char *path, bool need_obj,
	    struct resolved *res);
/* The object's cached data may be used now (hit), per connection state. */
bool usable(struct client *cl, const struct cache_obj *o);
/* A directory's full listing, fetched if need be: 0, OP_WAIT, -errno. */
int need_listing(struct op *op, const struct lento_fid *dir);
int cmd_ls(struct ctl_req *r, void *ctx, int argc, char **argv);
int cmd_cat(struct ctl_req *r, void *ctx, int argc, char **argv);
int cmd_stat(struct ctl_req *r, void *ctx, int argc, char **argv);
void client_lookup_configured(struct client *cl);

/* client_change.c */
int cmd_mkdir(struct ctl_req *r, void *ctx, int argc, char **argv);
int cmd_create(struct ctl_req *r, void *ctx, int argc, char **argv);
int cmd_write(struct ctl_req *r, void *ctx, int argc, char **argv);
int cmd_setattr(struct ctl_req *r, void *ctx, int argc, char **argv);
int cmd_unlink(struct ctl_req *r, void *ctx, int argc, char **argv);
int cmd_rmdir(struct ctl_req *r, void *ctx, int argc, char **argv);
int cmd_rename(struct ctl_req *r, void *ctx, int argc, char **argv);
int cmd_symlink(struct ctl_req *r, void *ctx, int argc, char **argv);
int cmd_link(struct ctl_req *r, void *ctx, int argc, char **argv);
int cmd_setxattr(struct ctl_req *r, void *ctx, int argc, char **argv);
int cmd_removexattr(struct ctl_req *r, void *ctx, int argc, char **argv);
/* The op's body goes with it: its file removed, or left to its job. */
void op_body_drop(struct op *op);

/*
 * client_kernel.c: presto's filesets (--fileset). Each does nothing
 * when no fileset is configured.
 */
int kclient_start(struct client *cl, char *err, size_t errlen);
void kclient_free(struct client *cl);
void kclient_tick(struct client *cl, uint64_t now_ms);
/* When kclient_tick() next has something to do: @now_ms if it has now. */
uint64_t kclient_due_ms(struct client *cl, uint64_t now_ms);
/*
 * PROGRESS for the upcalls that have waited long: from the tick, and
 * from loops that hold the event loop long (a listing of 100,000).
 */
void kclient_progress(struct client *cl);
/* The server connection is up: validate the filesets' volumes now. */
void kclient_conn_up(struct client *cl);
/*
 * @v was validated: its fileset's epoch is confirmed (a new one if
 * @fresh: the volume is new here). Objects found changed were broken one
 * by one (kclient_break_fid) before.
 */
void kclient_validated(struct client *cl, struct vol *v, bool fresh);
/* A job ended: the upcalls parked on it run again. */
void kclient_job_ended(struct client *cl, struct job *j);
/* The server broke @fid / the whole of @v. */
void kclient_break_fid(struct client *cl, const struct lento_fid *fid);
void kclient_break_volume(struct client *cl, struct vol *v);
/* A name the server added to or removed from a directory (NOTIFY). */
struct name_event {
	char name[LENTO_NAME_MAX + 1];
	uint32_t event;			/* PRESTO_EV_* */
};
/*
 * The server's changes to the names of @dir, done in the cache: presto
 * tells the directory's watchers (inotify, fanotify).
 */
void kclient_notify(struct client *cl, const struct lento_fid *dir,
		    const struct name_event *ev, size_t n);
/* The object at @path (of @volume) changed under its name. */
void kclient_clear_flags(struct client *cl, uint32_t volume, const char *path);
/*
 * A new complete body for @fid, open as @fd (a temporary file, or the
 * placeholder filled in place): its flags.
 */
int kclient_flags_new(struct client *cl, const struct lento_fid *fid, int fd);
/* Is @name in @dir presto's own (.presto at a volume's root)? */
bool kclient_skip_name(struct client *cl, const struct lento_fid *dir,
		       const char *name);
/*
 * Before evicting @o: 0 evict it now, 1 a PURGE went (the ack evicts
 * it, or leaves it if open), -errno leave it.
 */
int kclient_evict(struct client *cl, const struct cache_obj *o);
unsigned int kclient_purging(struct client *cl);
/*
 * Asks presto for each fileset's counters; true if @done will run once
 * they are in (false: nothing to ask, call it yourself).
 */
bool kclient_stats_refresh(struct client *cl, struct ctl_req *r,
			   void (*done)(struct client *cl, struct ctl_req *r));
void kclient_status_json(struct client *cl, struct jw *w);
void kclient_status_text(struct client *cl, struct jw *w);
/* @volume's permit changed (acquired, released, lost): upcalls rerun. */
void kclient_volume_woken(struct client *cl, uint32_t volume);

/*
 * client_kml.c: presto's journal and its write-back permit.
 *
 * Before @v's permit goes back to the server: presto gives it back to
 * lento first and its journal is consumed to the end. true once that is
 * so (or there is no fileset of @v); false: asked, call again later.
 */
bool kclient_permit_drained(struct client *cl, struct vol *v);
/* @v's permit is lost (lease, server): presto loses it too. */
void kclient_permit_lost(struct client *cl, struct vol *v);
/* Acquiring @volume's permit failed with @err. */
void kclient_acquire_failed(struct client *cl, uint32_t volume, int err);
/*
 * lentoctl sync: presto's journals made durable (KML_SYNC) and consumed
 * up to there. 0 done, OP_WAIT, or -errno (with ctl_error said).
 */
int kclient_sync(struct op *op);
/*
 * A STORE of @v found its body moved on: presto's journal made durable
 * and consumed to there before the batch is made again (asked once the
 * fileset is mounted, if it is not yet).
 */
void kclient_catch_up(struct client *cl, struct vol *v);
/* Whether that is done (true at once when @v has no fileset). */
bool kclient_caught_up(struct client *cl, struct vol *v);
/*
 * Whether a listing in @v may be applied: what presto logged before the
 * last kclient_catch_up() is read, or cannot be (no fileset, a journal
 * not mounted or broken). kclient_journal_moved() says when to look
 * again.
 */
bool kclient_journal_read(struct client *cl, struct vol *v);
/* Whether @v's journal can be read: no fileset, or one mounted. */
bool kclient_journal_live(struct client *cl, struct vol *v);

/* reint.c */
void reint_kick(struct client *cl);
void reint_conn_down(struct client *cl);
void reint_sent(struct client *cl);
/*
 * The batch made goes once the cache is durable up to it: now, or a sync
 * is asked for and its end calls this again.
 */
void reint_durable(struct client *cl);
/* Is a batch of @volume on its way to the server, not yet answered? */
bool reint_sending(struct client *cl, uint32_t volume);
/*
 * Optimise @v's log if it changed since last time (into @os, zeroed if
 * not): before a batch, and before a conflict is resolved.
 */
struct cml_opt_stats;
int reint_optimise(struct client *cl, struct vol *v, struct cml_opt_stats *os);
/* Recompute the dirty flags of @volume's objects from its CML. */
int reint_dirty_refresh(struct client *cl, uint32_t volume);
int cmd_reintegrate(struct ctl_req *r, void *ctx, int argc, char **argv);
int cmd_sync(struct ctl_req *r, void *ctx, int argc, char **argv);

/* resolve.c: lentoctl resolve VOLUME local|server|both */
int cmd_resolve(struct ctl_req *r, void *ctx, int argc, char **argv);

/* quarantine.c: the journal records set aside, listed and dropped */
int cmd_quarantine(struct ctl_req *r, void *ctx, int argc, char **argv);
int cmd_quarantine_drop(struct ctl_req *r, void *ctx, int argc,
			char **argv);

/* What -ESTALE means where a name of the rows was checked. */
#define STALE_SAID "its name in the cache is another file's now (changed " \
		   "behind lento's back; the journal will say how)"

#endif /* LENTO_CLIENT_INT_H */
