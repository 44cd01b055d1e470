/* SPDX-License-Identifier: MIT */
/*
 * presto's journal (protocol/KML.md) turned into lento's: each KML record
 * of a fileset becomes the cache rows and the CML records the same change
 * made through lentoctl would have made (client_change.c), with lower
 * handles mapped to fids. Kept apart from the daemon (client_kml.c reads
 * the segments and talks to presto) so that the unit tests drive it with
 * a cache and records of their own.
 *
 * kapply_batch() applies a batch of records in one transaction that also
 * stores the position; kapply_batch_end() then tells the caller what the
 * batch made, so the new objects' flags can be persisted in the cache.
 *
 * Mapping. A handle is the volume's root, or one the handles table knows
 * (lento recorded it when it materialised the object, or consumed its
 * create). Else, for a record whose name still names the object in the
 * cache's listing (UNLINK, RMDIR, RENAME), that name; else the lower inode
 * is opened by its handle and its path looked up in the cache (a handle
 * lento failed to record). A record about an object none of that finds
 * is not applied: it is counted and reported (KAPPLY_UNMAPPED), never
 * dropped silently: the batch goes on without it.
 *
 * Recovery blocks (KML.md, "Recovery records") are state: a RESYNC's
 * attributes are compared with the cache's and the differences logged as
 * a SETATTR; its SETXATTRs and STORE are logged as they come (the cache
 * does not keep xattrs, so what the server has is restated, not diffed);
 * a directory's DIRENTs are gathered and, complete, compared with the
 * cache's listing: names gone become UNLINK/RMDIR (or a RENAME, when the
 * inode lives on under a name elsewhere in the volume), names of known
 * objects new here LINK or RENAME, unknown handles new objects
 * (CREATE/MKDIR/SYMLINK/MKNOD, attributes from the lower inode).
 *
 * A record that fails. The batch is rolled back and the caller reads
 * again later. A failure of the machine rather than of the record --
 * kapply_transient(): no memory, the database busy, a full or failing
 * disk -- is retried as long as it lasts: the record is fine, and
 * dropping it would lose a change. Any other error says the record can
 * never be translated (its names or handles contradict the cache):
 * after KAPPLY_TRIES failures of the same record in a row, the next batch
 * sets it aside instead of applying it -- its bytes, the error and why go
 * to the cache's table kml_quarantine (cache_quarantine_put()) in the
 * batch's transaction, so the position moves past it and presto's log is
 * acknowledged and retired as usual; the batch ends with it, so that no
 * later record's failure rolls it back -- the content of each regular
 * file it names is kept under CACHE_QUARANTINE_DIR, and the objects it
 * names are marked for revalidation: not valid, and without their content or
 * listing unless other records not yet reintegrated name them, so that
 * their next use fetches them from the server rather than serving a
 * cache that silently diverges from it. ka->suspect lists them, for the
 * caller to clear their callback flags in presto.
 *
 * Every function returns 0 or -errno and prints nothing.
 */
#ifndef LENTO_KML_APPLY_H
#define LENTO_KML_APPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "fidset.h"
#include "kml.h"
#include "kml_read.h"
#include "lento_types.h"

#define KAPPLY_UNMAPPED	1	/* a record not applied, counted */
#define KAPPLY_TRIES	3	/* failures of one record before it is set aside */

struct kapply_dirent;

/* The record that failed last: its number, error, failures in a row. */
struct kapply_fail {
	uint64_t seq;
	int err;
	unsigned int tries;
	char why[256];
};

/* An object's row as the batch has it (kml_apply.c). */
struct kapply_row {
	struct cache_obj o;
	bool changed;		/* to be written */
};

/* An object's records in the batch so far (kml_apply.c). */
struct kapply_count {
	struct lento_fid fid;
	int n;
};

struct kapply {
	struct cache *cache;
	uint32_t volume;
	struct lento_fid root;		/* the volume's root */
	struct kml_fh root_h;		/* the lower root's handle */
	int mntfd;			/* the cache directory, for handles */
	char cache_abs[CACHE_PATH_MAX];	/* its path, as /proc shows it */
	/* New objects of this batch (their flags are persisted after it). */
	struct lento_fid *made;
	size_t nmade, made_cap;
	/* How many of the batch's records name each object. */
	struct kapply_count *counts;
	size_t ncounts, counts_cap;
	struct fidmap counts_at;	/* where each object's count is */
	/* The rows of the objects the batch read or changed. */
	struct kapply_row *rows;
	size_t nrows, rows_cap;
	struct fidmap rows_at;		/* where each object's row is */
	/* A recovery listing being gathered. */
	struct kml_fh list_dir;
	uint64_t list_seq;		/* its RESYNC_DIR's */
	uint64_t list_want;		/* DIRENTs its RESYNC_DIR announced */
	struct kapply_dirent *list;
	size_t nlist, list_cap;
	bool listing;
	/* Statistics and the last problem, for status and the log. */
	uint64_t records;		/* CML records appended */
	uint64_t unmapped;		/* KML records about unknown objects */
	uint64_t voided;		/* listings cut short (void) */
	char why[256];
	/*
	 * The record that failed last (kept by the caller across a new
	 * kapply for the same log, so that its count goes on).
	 */
	struct kapply_fail fail;
	/* Set aside (quarantined) by this kapply, the last one's why. */
	uint64_t quarantined;
	char quarantine_why[320];
	/* Objects the batch's quarantined records named (see above). */
	struct lento_fid *suspect;
	size_t nsuspect, suspect_cap;
};

/*
 * Is @err a failure of the machine (retried while it lasts), not of the
 * record (set aside after KAPPLY_TRIES)?
 */
bool kapply_transient(int err);

/*
 * @root_h: the lower root's handle (REGISTER, MOUNTED). 0 or -errno (the
 * cache directory cannot be opened).
 */
int kapply_init(struct kapply *ka, struct cache *c, uint32_t volume,
		const struct lento_fid *root, const struct kml_fh *root_h);
void kapply_free(struct kapply *ka);

/*
 * One batch: the records @kr has up to @limit (presto's KML_DURABLE), at
 * most @max of them, applied in one transaction that also stores the
 * position -- the last record consumed -- in cache_meta @poskey and
 * *@pos, committed lazily: durable once cache_durable_gen() reaches
 * cache_gen() as it is on return. The batch ends early once the loop's
 * clock reaches @until_ms (0: no limit): after its first record, and
 * then looked at every few records (KAPPLY_CLOCK_EVERY, 8), as the caller
 * holds the loop. A recovery listing still gathering DIRENTs changes
 * nothing yet, so the position stored stops before its RESYNC_DIR: a
 * lento that restarts reads the listing again. Returns the records read
 * (0: none now; kread_busy() says whether @more will run), or -errno: then
 * nothing of the batch is kept, and the caller reads again from *@pos
 * with a new reader (kapply_reset()). @why may say more of an error.
 * Afterwards ka->made lists the objects the batch made, until
 * kapply_batch_end().
 */
int kapply_batch(struct kapply *ka, struct kread *kr, uint64_t limit,
		 uint32_t max, uint64_t until_ms, const char *poskey,
		 uint64_t *pos, lo_file_fn more, void *arg, const char **why);
/* The batch's made and suspect lists are done with. */
void kapply_batch_end(struct kapply *ka);
/* A batch failed: the listing gathered is void (it is read again). */
void kapply_reset(struct kapply *ka);

/* ext4's handle of inode @ino/@gen (FILEID_INO32_GEN): 8 bytes. */
#define KAPPLY_HTYPE	1
void kapply_handle(uint64_t ino, uint32_t gen, uint8_t out[8]);
/* A handle as cache_handles() gives it, as presto names it; or false. */
bool kapply_handle_parse(int type, const void *handle, size_t len,
			 struct kml_fh *h);

#endif /* LENTO_KML_APPLY_H */
