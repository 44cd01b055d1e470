/* SPDX-License-Identifier: MIT */
/*
 * What client_kernel.c (the channel, upcalls, flags) and client_kml.c
 * (presto's journal and the write-back permit) share of a fileset.
 */
#ifndef LENTO_CLIENT_KERNEL_H
#define LENTO_CLIENT_KERNEL_H

#include <stdbool.h>
#include <stdint.h>

#include "client_int.h"
#include "kchan.h"
#include "kml_apply.h"
#include "kml_read.h"

/* presto's journal of one fileset, as lento consumes it (client_kml.c). */
struct kjournal {
	struct client *cl;
	bool known;		/* presto said where its log stands */
	/*
	 * Unmounted, and presto said where the last mount left its log:
	 * nothing is added to it any more, and lento reads it to durable
	 * without presto (no acknowledgement: it goes at the next mount).
	 */
	bool final;
	uint64_t durable;	/* presto's KML_DURABLE, the last heard */
	uint64_t acked;		/* presto's KML_ACKED */
	uint64_t pos;		/* consumed: in the CML (cache_meta) */
	/*
	 * pos as a crash leaves it: the cache's transaction that stored pos
	 * (cache_gen()), pos when the cache's sync under way began, and the
	 * last pos known durable -- what may be acknowledged.
	 */
	uint64_t pos_gen, sync_pos, durable_pos;
	uint64_t ack_sent;	/* the last KML_ACK that went */
	bool pos_loaded;
	bool ka_ready;
	struct kapply ka;
	struct kread *kr;	/* owned; NULL until consumption starts */
	uint64_t retry_at_ms;	/* after an error */
	char err[300];		/* why consumption stopped, "" if it runs */
	uint64_t batches, records;
	uint64_t unmapped_said;	/* of ka.unmapped, logged up to here */
	uint64_t quarantined_said;	/* of ka.quarantined, logged */
	struct kapply_fail fail;	/* ka.fail while ka is not there */
	/*
	 * Requests whose answer is a KML message naming them (REQ): a
	 * revoke (PERMIT 0) and KML_SYNC. 0: none awaited.
	 */
	uint64_t last_req;
	/*
	 * presto answered a revoke saying its log could not be synced
	 * (ERRNO, KERNEL.md): changes made under the permit may not be in
	 * what lento can read. The permit is held (not given back to the
	 * server) until a revoke or a new mount says the log is whole.
	 */
	int log_err;
	uint64_t log_err_ms;
	/* A permit held because the journal is broken: said once. */
	bool held_said;
	/* The write-back permit, as presto holds it. */
	bool presto_permit;
	uint64_t revoke_req;	/* PERMIT 0 sent, its answer awaited */
	uint64_t revoke_ms;
	/* lentoctl sync: the last KML_SYNC, and how far to consume. */
	uint64_t sync_req;
	uint64_t sync_ms;
	uint64_t sync_upto;
	int sync_err;
	/* A catch-up (kclient_catch_up()) wants a KML_SYNC sent. */
	bool catch_up;
	/* When consumption was last seen at the end (or lento started). */
	uint64_t caught_up_ms;
};

struct fset {
	struct fset *next;
	char name[PRESTO_FILESET_MAX + 1];	/* presto's (fileset=) */
	char volume[LENTO_VOLNAME_MAX + 1];	/* lower=CACHE/volume */
	bool registered, registering;
	bool mounted, root_ok, refused_said;
	struct presto_handle root;
	uint32_t timeout_ms;
	uint64_t epoch;			/* 0: none chosen yet */
	bool epoch_sent;		/* to this mount */
	uint64_t register_at_ms;	/* next REGISTER attempt */
	bool busy_said, dot_presto_said;
	/* presto's counters (STATS), the last ones read */
	bool have_stat;
	uint64_t stat[PRESTO_S_MAX + 1];
	/* lento's side */
	uint64_t upcalls, hits, fetched, failed, breaks, purges, busy;
	uint64_t hints;			/* ACCESS handles taken for the LRU */
	uint64_t watched;		/* WATCHED: directories listed at once */
	uint64_t notified;		/* NOTIFY: names told to watchers */
	uint64_t watched_at_ms;		/* watched after a volume break (0:
					 * not): revalidated --watch-ms later
					 */
	uint64_t permits;		/* PERMIT upcalls granted */
	/*
	 * presto is asked where things stand again (REGISTER from the same
	 * socket: the answer says the mount, the log and the permit, and
	 * every pending upcall comes again): messages from presto were lost,
	 * or an answer to an upcall may not have reached it.
	 */
	bool resync;
	uint64_t resyncs;		/* REGISTERs sent again for that */
	uint64_t replies_owed;		/* answers whose send failed at first */
	struct kjournal j;
};

#define BUSY_KEEP	64		/* files found open, remembered */
/*
 * Answers to upcalls whose send failed, sent again every OWED_RETRY_MS
 * for up to OWED_MS; past that (or with every slot taken) the fileset
 * registers again, and presto sends the upcall again. Kept in a table
 * made at start, so that an answer is owed without memory.
 */
#define OWED_MAX	64
#define OWED_RETRY_MS	100
#define OWED_MS		5000
/* Objects broken lately: after a loss, the directories among them are
 * listed again if presto has watchers (a WATCHED may have been lost). */
#define BROKEN_KEEP	32
#define BROKEN_MS	30000

struct upcall;

struct owed {
	struct fset *fs;		/* NULL: the slot is free */
	uint64_t req;
	uint32_t op;
	uint32_t errno_;		/* 0: done, with flags and epoch */
	uint32_t flags;
	uint64_t epoch;
	uint64_t first_ms, next_ms;
	unsigned int tries;
};

struct kclient {
	struct kchan *kc;
	struct fset *fsets;
	struct upcall *upcalls;
	unsigned int purging;		/* PURGEs awaiting their ack */
	/* Files a PURGE found open: the LRU's next ones go first. */
	struct {
		struct lento_fid fid;
		uint64_t until_ms;
	} busy[BUSY_KEEP];
	unsigned int busy_next;
	struct owed owed[OWED_MAX];
	unsigned int nowed;
	struct {
		struct lento_fid fid;
		uint64_t when_ms;
	} broken[BROKEN_KEEP];
	unsigned int broken_next;
};

/* client_kernel.c */
bool fset_live(const struct fset *fs);
struct fset *fset_by_volume(struct client *cl, const char *volume);
int flags_write(struct client *cl, const char *path, uint32_t flags,
		uint64_t epoch);
/* The same, with a directory's link count at the server (or 0). */
int flags_write_nlink(struct client *cl, const char *path, uint32_t flags,
		      uint32_t nlink, uint64_t epoch);
struct kchan *kclient_chan(struct client *cl);
/*
 * Upcalls and listings that waited for the journal to be consumed look
 * again.
 */
void kclient_journal_moved(struct client *cl, struct fset *fs);
/* Upcalls that waited for @fs's permit to be given back run again. */
void kclient_fset_woken(struct client *cl, struct fset *fs);

/* client_kml.c */
/* presto said where its log stands (REGISTER's answer, MOUNTED, KML). */
void kml_log_state(struct client *cl, struct fset *fs, const struct kmsg *m);
/* Consume what is durable, if lento may now. */
void kml_consume(struct client *cl, struct fset *fs);
/* Everything durable is consumed (as far as lento heard). */
bool kml_caught_up(const struct fset *fs);
/*
 * How long lento has been behind the journal: 0 when it is at its end,
 * else since it last was (or since lento started, when the fileset is
 * not mounted and its journal cannot be read).
 */
uint64_t kml_behind_ms(const struct fset *fs);
/* The fileset is gone (unmounted, the channel down): stop reading. */
void kml_stop(struct client *cl, struct fset *fs);
/* A mount lento served went: read the rest of its log, if presto said. */
void kml_unmounted(struct client *cl, struct fset *fs, const struct kmsg *m);
void kml_free(struct fset *fs);
void kml_tick(struct client *cl, struct fset *fs);
/* When kml_tick() next has something to do: @now if it has now. */
uint64_t kml_due_ms(struct client *cl, const struct fset *fs, uint64_t now);
/* presto was granted the permit (a PERMIT upcall answered 0). */
void kml_permit_granted(struct client *cl, struct fset *fs);
/* Messages from presto were lost: requests awaiting an answer go again. */
void kml_lost(struct client *cl, struct fset *fs);
/* The cache's sync began, and ended: what it made durable is acknowledged. */
void kml_sync_started(struct client *cl);
void kml_synced(struct client *cl);
void kml_status_json(struct client *cl, struct fset *fs, struct jw *w);
void kml_status_text(struct client *cl, struct fset *fs, struct jw *w);

#endif /* LENTO_CLIENT_KERNEL_H */
