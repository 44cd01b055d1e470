/* SPDX-License-Identifier: MIT */
/*
 * The client modification log (CML): the changes a lento client made to
 * its volumes and has not yet reintegrated, kept in the client's SQLite
 * database, plus the client's identity and its fid counter.
 *
 *   cml table       one row per record (struct lento_rec), recno the key;
 *                   per record its volume and its state (pending, or taken
 *                   by a batch and not yet acknowledged: "shipped")
 *   cml_meta        format version, the last record number reserved (so a
 *                   number is never reused, also after its record was
 *                   acknowledged and lento restarted), client id, uuid
 *   cml_fidseq      per volume, the last fid sequence number reserved
 *
 * Numbers are reserved in blocks (cml.c): they grow, with gaps.
 *
 * Record numbers count from 1 across all volumes of the client. Records of
 * a volume are shipped in record order; the server keeps the last one it
 * applied per client and volume, so a record is never applied twice.
 *
 * Base versions. A record names, per object it touches (dir, obj, dir2,
 * target), the version the server had of that object before the first
 * record of the log that touched it: the version vector of the copy lento
 * cached, which local changes do not move. So every record of a log names
 * the same base for one object; an object created in the log has the null
 * version (n == 0). The optimiser keeps this true (see cml_opt.c).
 *
 * Every function returns 0 (or a count) on success and -errno on failure;
 * nothing is printed. A struct cml is used by one thread at a time.
 */
#ifndef LENTO_CML_H
#define LENTO_CML_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "lento_types.h"

#define CML_FORMAT		1	/* cml_meta 'format' this code writes */
#define CML_UUID_SIZE		16

/*
 * What a record is counted as for statistics and batch limits: a fixed
 * header, its names, data and groups, and for a STORE the body that goes
 * with it.
 * An estimate of its size on the wire, before compression.
 */
#define CML_REC_HDR_BYTES	128

struct cml;

/* Pending work of one volume, for lentoctl status. */
struct cml_stats {
	uint64_t records;	/* not yet acknowledged by the server */
	uint64_t bytes;		/* cml_rec_bytes() of those, bodies included */
	uint64_t shipped;	/* of those, taken by a batch */
	int64_t oldest_ns;	/* the oldest one's time; 0 when none */
};

/* What cml_optimise() did. */
struct cml_opt_stats {
	uint64_t before;	/* records it looked at (pending, not shipped) */
	uint64_t after;		/* of those, records left */
	uint64_t cancelled;	/* records of objects created and removed */
	uint64_t converted;	/* renames rewritten because what they moved
				 * or replaced was cancelled */
	uint64_t moot;		/* changes to objects removed afterwards */
	uint64_t stores;	/* STOREs merged into a later STORE */
	uint64_t setattrs;	/* SETATTRs merged into a later SETATTR */
	uint64_t folded;	/* SETATTRs of size folded into a STORE */
	uint64_t renames;	/* RENAMEs merged into an earlier RENAME */
	uint64_t creates;	/* RENAMEs merged into their object's create */
};

/*
 * Called once per record, in order. rec (and rec->data, rec->groups) is
 * valid during the call only: a callback that keeps a record copies them.
 * Return 0 to go on, or -errno to stop: the calling function then returns
 * that error. It must not call cml_* on the same
 * struct cml.
 */
typedef int cml_rec_fn(void *arg, const struct lento_rec *rec,
		       uint64_t body_size);

/*
 * Open the log in @db, which the caller owns and closes after cml_close()
 * (the caller chooses its journal mode and durability: WAL and
 * synchronous=FULL, or the KML may be acknowledged for a record a power
 * cut then loses). Creates the tables the first time, and the client's
 * identity (a random non-zero client id and a random uuid). -EPROTO for a
 * log of a newer format.
 */
int cml_open(struct cml **cmlp, sqlite3 *db);

/* The same on a database file the struct cml owns: WAL, synchronous=FULL. */
int cml_open_path(struct cml **cmlp, const char *path);

void cml_close(struct cml *cml);

/* The database the log lives in (owned as cml_open() said). */
sqlite3 *cml_db(struct cml *cml);

/* The client's identity, the same after every restart. */
int cml_ident(struct cml *cml, uint32_t *client, uint8_t uuid[CML_UUID_SIZE]);

/*
 * Take the client id a server assigned. Only before the first fid was
 * minted (-EBUSY after: fids carry the client id); 0 is -EINVAL.
 */
int cml_set_client(struct cml *cml, uint32_t client);

/*
 * Mint a new fid for an object created on this client in @volume:
 * {volume, client id, next sequence number from 1}. Persistent, never
 * reused, needs no server.
 */
int cml_mint_fid(struct cml *cml, uint32_t volume, struct lento_fid *fid);

/*
 * Append @rec to the log of the volume of rec->obj and set rec->recno to
 * the number it got. @body_size is the size of a STORE's body (0 for every
 * other operation). Checks the record's shape: -EINVAL for an unknown op
 * or flag, a missing fid or name, a name not terminated within
 * LENTO_NAME_MAX, data too long, more than LENTO_GROUPS_MAX groups or
 * groups without their bytes; -EXDEV when its fids are of different
 * volumes. The data and groups are copied into the log. Joins the
 * caller's transaction when one is open.
 */
int cml_append(struct cml *cml, struct lento_rec *rec, uint64_t body_size);

/*
 * Take the next batch of @volume: its pending records in order, at most
 * @max_records of them and at most @max_bytes (cml_rec_bytes()), but
 * always at least one (0: no limit). Each goes to @fn; when all calls
 * returned 0, the records become shipped: later batches and the optimiser
 * leave them alone, until cml_ack() removes them or cml_requeue() makes
 * them pending again. Returns the number of records.
 */
int cml_batch(struct cml *cml, uint32_t volume, uint32_t max_records,
	      uint64_t max_bytes, cml_rec_fn *fn, void *arg);

/*
 * The server applied every record of @volume up to @upto: remove them.
 * Returns how many went.
 */
int cml_ack(struct cml *cml, uint32_t volume, uint64_t upto);

/*
 * Make @volume's shipped records pending again. Only once the server has
 * said which records it applied and cml_ack() removed those: a record the
 * server may have applied must never be optimised away.
 */
int cml_requeue(struct cml *cml, uint32_t volume);
/*
 * Remove pending record @recno (a person discarding a change the server
 * refused): 0, or -ENOENT if there is no such record not shipped.
 */
int cml_drop(struct cml *cml, uint64_t recno);
/*
 * Every pending record of @volume that names @fid takes @vv as that
 * object's base (a person choosing this client's changes over the
 * server's version @vv). Returns the records changed.
 */
int cml_rebase(struct cml *cml, uint32_t volume, const struct lento_fid *fid,
	       const struct lento_vv *vv);

/* Every record of @volume in order, shipped or not, changing nothing. */
int cml_list(struct cml *cml, uint32_t volume, cml_rec_fn *fn, void *arg);

int cml_stats(struct cml *cml, uint32_t volume, struct cml_stats *st);

/* What a record counts for in cml_stats.bytes and batch limits. */
uint64_t cml_rec_bytes(const struct lento_rec *rec, uint64_t body_size);

/*
 * The number of record slots (dir, obj, dir2, target) naming @fid moved
 * by @delta (never 0). 0, or -errno to undo the whole change.
 */
typedef int cml_count_fn(void *arg, const struct lento_fid *fid,
			 int64_t delta);

/*
 * Rewrite @volume's pending records (those after the last shipped one) in
 * one transaction: cancel, merge and drop records as cml_opt.c describes,
 * so that shipping the result leaves the server in the state the whole
 * log would. @st may be NULL. @counted (may be NULL) hears, inside the
 * transaction, of each object whose count of slots naming it changed.
 */
int cml_optimise(struct cml *cml, uint32_t volume, struct cml_opt_stats *st,
		 cml_count_fn *counted, void *arg);

/*
 * Tell @fn, once per object, how many slots of the @n records @recs name
 * it, times @sign. Stops at @fn's first error and returns it; -ENOMEM.
 */
int cml_count_names(const struct lento_rec *recs, size_t n, int64_t sign,
		    cml_count_fn *fn, void *arg);

#endif /* LENTO_CML_H */
