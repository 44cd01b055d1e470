/* SPDX-License-Identifier: MIT */
/*
 * The lento server's store: volumes, objects by fid, directory entries,
 * xattrs and file bodies, and the one way they change — a client's batch
 * of CML records (struct lento_rec) applied atomically by
 * store_reintegrate(). A library for the server's network loop; no
 * networking here, nothing printed.
 *
 * A store is a directory:
 *
 *   DIR/meta.db    SQLite (WAL, synchronous=FULL, foreign keys on; schema
 *                  version in PRAGMA user_version)
 *   DIR/bodies/    one file per regular file's content, named by the fid
 *                  and the version of the content (see "Bodies" below)
 *   DIR/tmp/       temporary files (incoming bodies: store_body_tmp());
 *                  emptied at every open
 *   DIR/lock       held (flock) while the store is open: one process only
 *
 * Conventions: every function returns 0 or a negative errno; SQLite's
 * errors are mapped (SQLITE_FULL -> -ENOSPC, SQLITE_BUSY/LOCKED -> -EBUSY,
 * SQLITE_NOMEM -> -ENOMEM, SQLITE_READONLY -> -EROFS, I/O errors -> the
 * system errno or -EIO, corruption -> -EUCLEAN). A struct store is used by
 * one thread at a time. Callbacks (readdir, volume list, xattrs) may read
 * the store (store_getattr from a readdir callback is fine) but not
 * change it (-EDEADLK); a callback's non-zero return stops the walk and
 * is returned.
 *
 * Versions: an object's version vector has one counter (this server,
 * index 0) and the StoreId of its last update. A root directory starts at
 * [1]@0:0 and a created object at [1]@client:recno. A record applied
 * bumps each object it names (dir, obj, dir2, target) that still exists
 * after it, once even if named twice: counter + 1, StoreId = {client,
 * recno}. That holds for a rename between two names of one object too,
 * which changes nothing else. So a client predicts the version each of
 * its records leaves, and its next record, in the same batch or a later
 * one, names that version as its base. A RENAME within one directory
 * (dir2 == dir) is checked against base_dir only.
 *
 * Bodies: see store.c's "Bodies and crashes".
 */
#ifndef LENTO_STORE_H
#define LENTO_STORE_H

#include "lento_types.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct store;
struct sqlite3;

/* The schema this code writes; a newer one is refused at open. */
#define STORE_SCHEMA_VERSION	1

/*
 * A volume's usage: the bytes of its regular files' bodies and symlinks'
 * targets, the bytes of its xattrs' names and values, and this much per
 * object (its row, its directory entry, its attributes).
 */
#define STORE_OBJ_OVERHEAD	512

/*
 * Open (creating it if DIR or the database does not exist yet) the store
 * in @dir. The store's epoch changes on every open. Bodies no object
 * refers to and everything in DIR/tmp are removed (a crash's leftovers).
 * -EBUSY if another process has it open; -EPROTONOSUPPORT if meta.db's
 * schema is newer than this code's. @err (may be NULL) says why.
 */
int store_open(const char *dir, struct store **out, char *err, size_t errlen);

/* Close and free. NULL is fine. */
void store_close(struct store *s);

/* The server's epoch: a u64 that differs at every open of the store. */
uint64_t store_epoch(const struct store *s);

/* What the last store_open found and cleaned up. */
struct store_stats {
	uint64_t epoch;
	uint64_t bodies;		/* bodies referenced and present */
	uint64_t bodies_collected;	/* orphan bodies removed at open */
	uint64_t bodies_missing;	/* referenced but absent: damage */
	uint64_t tmp_collected;		/* files removed from DIR/tmp */
};
void store_stats(const struct store *s, struct store_stats *st);

/* -------------------------------------------------------------- volumes */

struct store_volume {
	uint32_t id;
	char name[LENTO_VOLNAME_MAX + 1];
	struct lento_fid root;		/* LENTO_ROOT_FID(id) */
	uint64_t stamp;			/* bumped by every applied record */
	uint64_t quota;			/* bytes; 0: none */
	uint64_t usage;			/* bytes, as STORE_OBJ_OVERHEAD says */
	uint64_t objects;
	int64_t created_ns;
};

/*
 * A name a volume may have: 1..LENTO_VOLNAME_MAX printable ASCII bytes
 * but space (0x21..0x7e), no '/'. Stricter than the wire's rule for a
 * volume name (space allowed): a lookup of such a name is -ENOENT.
 */
bool store_volume_name_ok(const char *name);

/*
 * A new volume and its root directory (LENTO_ROOT_FID(id), mode 0755,
 * owned by @uid:@gid). Volume ids are never reused. @out may be NULL.
 * -EINVAL bad name, -EEXIST name taken.
 */
int store_volume_create(struct store *s, const char *name, uint64_t quota,
			uint32_t uid, uint32_t gid, struct store_volume *out,
			char *err, size_t errlen);

typedef int (*store_volume_fn)(void *arg, const struct store_volume *v);

/* Every volume, in id order. */
int store_volume_list(struct store *s, store_volume_fn fn, void *arg);

/* A volume by name or by id: -ENOENT if none (any name, valid or not). */
int store_volume_lookup(struct store *s, const char *name,
			struct store_volume *out);
int store_volume_get(struct store *s, uint32_t id, struct store_volume *out);

/* Change a volume's quota (0: none). Usage above it stays; it only stops
 * batches that would grow it. */
int store_volume_set_quota(struct store *s, const char *name, uint64_t quota,
			   char *err, size_t errlen);

/* Remove a volume: all its objects, entries, xattrs, clients' record
 * numbers, then (after the commit) its bodies. */
int store_volume_remove(struct store *s, const char *name, char *err,
			size_t errlen);

/* ---------------------------------------------------------------- reads */

typedef int (*store_xattr_fn)(void *arg, const char *name, const void *value,
			      size_t len);

/*
 * An object's status; a symlink's target into @target (NUL-terminated;
 * @target_size >= LENTO_SYMLINK_MAX + 1 always fits; may be NULL; ""
 * for other types; -ENAMETOOLONG if it does not fit); each xattr to @fn
 * (may be NULL), in name order. -ENOENT if no such object.
 */
int store_getattr(struct store *s, const struct lento_fid *fid,
		  struct lento_status *st, char *target, size_t target_size,
		  store_xattr_fn fn, void *arg);

/*
 * @target: a symlink's target (@target_len bytes, not NUL-ended), else
 * NULL. @xattrs: the object has xattrs (store_getattr lists them).
 */
typedef int (*store_dirent_fn)(void *arg, const struct lento_dirent *de,
			       const char *target, uint32_t target_len,
			       bool xattrs);

/*
 * Each entry of directory @dir with its object's status, in name (byte)
 * order; "." and ".." are not entries. One indexed query.
 * -ENOENT, -ENOTDIR.
 */
int store_readdir(struct store *s, const struct lento_fid *dir,
		  store_dirent_fn fn, void *arg);

/* How many entries directory @dir has (as store_readdir() lists them). */
int store_readdir_count(struct store *s, const struct lento_fid *dir,
			uint64_t *n);

/*
 * A temporary file without a name in DIR/tmp (O_RDWR; gone when closed,
 * and at a crash): room on disk for what the server would otherwise hold
 * in memory, a listing on its way out. The caller closes it.
 */
int store_spool(struct store *s);

/*
 * Open regular file @fid's content for reading: *fd (the caller closes
 * it) and *size. If @expect is not NULL and the object's version is not
 * that, -ESTALE and nothing opened; @vv (may be NULL) gets the current
 * version either way. A file with no content (size 0) gets an empty
 * memfd. The fd keeps reading the version it opened after later changes.
 * -ENOENT, -EISDIR, -EINVAL (not a regular file), -EIO (body missing).
 */
int store_body_open(struct store *s, const struct lento_fid *fid,
		    const struct lento_vv *expect, int *fd, uint64_t *size,
		    struct lento_vv *vv);

/*
 * A new empty temporary file in DIR/tmp for an incoming body: returns its
 * fd (O_RDWR, the caller closes it) and its path in @path. Write it,
 * fsync it, and hand it to store_reintegrate by fd or by path.
 */
int store_body_tmp(struct store *s, char *path, size_t pathlen);

/* ---------------------------------------------------------- validation */

/* Is @stamp volume @volume's current stamp? *now gets it (may be NULL). */
int store_validate(struct store *s, uint32_t volume, uint64_t stamp,
		   bool *current, uint64_t *now);

/*
 * For each of @n objects, changed[i] = its version is no longer vvs[i]
 * (or it is gone). Returns how many changed, or a negative errno.
 */
int store_validate_objects(struct store *s, const struct lento_fid *fids,
			   const struct lento_vv *vvs, size_t n,
			   bool *changed);

/* ------------------------------------------------------- reintegration */

/*
 * The content a STORE record brings: a file already written (the store
 * makes it durable: one syncfs(2) for all the bodies of a batch, so a
 * store is best on a file system of its own), on the store's file system
 * (store_body_tmp() makes one), given either
 * as an open @fd (>= 0; hard-linked into bodies/ through /proc/self/fd;
 * the caller keeps and closes the fd) or, with fd < 0, as @path (renamed
 * into bodies/ when the batch commits; renamed back if it does not). A
 * body of a skipped or refused record is left where it was: the caller
 * removes what is left. @size must be the file's size and the record's
 * attr.size when that is valid.
 */
struct store_body {
	int fd;
	const char *path;
	uint64_t size;
};

/*
 * A COMMIT failed with an outcome unknown (an I/O error syncing the WAL):
 * every call fails with -EIO until the store is opened again.
 */
bool store_broken(const struct store *s);

enum store_outcome {
	STORE_APPLIED = 0,	/* committed (maybe nothing new: all skipped) */
	STORE_CONFLICT,		/* a record's base version is not current */
	STORE_FAILED,		/* an error: see err */
};

#define STORE_STALE_MAX	32

struct store_result {
	enum store_outcome outcome;
	size_t applied;		/* records applied (0 unless APPLIED) */
	size_t skipped;		/* records with recno <= the last applied */
	uint64_t last_recno;	/* the client's last applied record, after */
	uint64_t stamp;		/* the volume's stamp, after */
	/* Not APPLIED: */
	int err;		/* the negative errno returned */
	ssize_t rec;		/* index of the record to blame, or -1 */
	struct lento_fid fid;	/* the object concerned (zero if none) */
	struct lento_vv base;	/* CONFLICT: the version the record names */
	struct lento_vv current;	/* CONFLICT: the server's version */
	char msg[512];		/* why, for people */
	/*
	 * APPLIED: directories whose names records changed though their
	 * base was not the directory's version (others changed its names
	 * meanwhile; not a conflict, see store_reintegrate): the client's
	 * listing of them is stale. Past STORE_STALE_MAX, stale_more says
	 * to count every directory the batch names as one.
	 */
	struct lento_fid stale[STORE_STALE_MAX];
	size_t nstale;
	bool stale_more;
};

/*
 * Apply client @client's records @recs[0..n) to volume @volume in one
 * SQLite transaction: all of them or none.
 *
 * Record numbers must be consecutive (recs[i].recno == recs[0].recno + i,
 * from 1). Records numbered <= the last one applied for (client, volume)
 * are skipped (res->skipped): a batch sent again is never applied twice.
 * The first new record must be the last applied + 1: a gap is -EPROTO.
 *
 * Each new record is checked and applied in order: the objects it names
 * exist (-ENOENT), its base versions are their current ones (else
 * CONFLICT, -ESTALE: res names the record, the object, both versions) --
 * but for the directory whose names it changes (dir, dir2): two clients
 * changing different names of one directory do not conflict, a name
 * taken or gone is -EEXIST or -ENOENT, and the directory is reported in
 * res->stale --,
 * the record's uid/gid may make the change (owner/group/other mode bits,
 * sticky directories; uid 0 passes; -EACCES/-EPERM), the change makes
 * sense (-EEXIST, -ENOTEMPTY, -ENOTDIR, -EISDIR, -EXDEV, -EINVAL, ...).
 * Then the volume's quota (-EDQUOT if the batch grows usage beyond it),
 * then the bodies are put in place, then COMMIT. Any failure: nothing
 * changed, res says which record and why. @bodies is indexed like @recs
 * (only STORE records' entries are read); NULL if the batch has no STORE
 * with content.
 *
 * Returns 0 (res->outcome APPLIED) or res->err.
 */
int store_reintegrate(struct store *s, uint32_t volume, uint32_t client,
		      const struct lento_rec *recs, size_t n,
		      const struct store_body *bodies,
		      struct store_result *res);

/*
 * Size changes made ready off the loop. A SETATTR that changes a regular
 * file's size makes its new content: the first @len bytes of the
 * content it had (@src, a body; or none), then zeros up to @size. That
 * copy may take seconds for a big file, so a server makes it before the
 * apply, on another thread, and hands the apply what it made:
 * store_reintegrate_with() takes a copy whose record, object and source
 * are the ones it meets (anything else it makes itself, as
 * store_reintegrate() does). The caller predicts them (its batch's
 * records, store_content()); a wrong guess costs only the copy.
 *
 *   store_resize_begin(): its file in DIR/tmp (r->out); r->in is the
 *     caller's: the source's content, opened for reading;
 *   store_resize_copy(): the copy, made durable (fdatasync). Touches
 *     only @r and its descriptors (and the store's fault hook): it may
 *     run on another thread while the store is used;
 *   store_resize_end(): descriptors closed, the file removed unless an
 *     apply took it.
 */
struct store_resize {
	struct lento_fid fid;
	struct lento_storeid sid;	/* the new content's: {client, recno} */
	bool src_has;			/* cut from a body */
	struct lento_storeid src;	/* that body's */
	uint64_t len;			/* bytes of it kept */
	uint64_t size;			/* the new size */
	int in, out;			/* -1: none, or closed */
	char name[128];			/* its file in DIR/tmp */
	int err;			/* store_resize_copy()'s */
	bool made;			/* copied: an apply may take it */
	bool taken;			/* an apply took it */
};

/* The last record of @client applied in @volume (0: none), or -errno. */
int store_last_applied(struct store *s, uint32_t volume, uint32_t client,
		       uint64_t *last);

/*
 * Regular file @fid's content now: whether it has a body, the body's
 * StoreId, the file's size, and (@fd not NULL, a body) the body opened
 * for reading (the caller closes it; -1 if none).
 */
int store_content(struct store *s, const struct lento_fid *fid, bool *has,
		  struct lento_storeid *sid, uint64_t *size, int *fd);
int store_resize_begin(struct store *s, struct store_resize *r);
int store_resize_copy(struct store *s, struct store_resize *r);
void store_resize_end(struct store *s, struct store_resize *r);

/* store_reintegrate(), taking the @nrz copies of @rz it can use. */
int store_reintegrate_with(struct store *s, uint32_t volume, uint32_t client,
			   const struct lento_rec *recs, size_t n,
			   const struct store_body *bodies,
			   struct store_resize *rz, size_t nrz,
			   struct store_result *res);

/*
 * Before a batch's bodies come: would store_reintegrate() certainly refuse
 * it? So that a body bound to be refused is never written out (a STORE's
 * size is the client's word, up to 2^63 - 1). The verdict is in @res,
 * filled as store_reintegrate() fills it (last_recno and stamp too):
 * outcome STORE_APPLIED if the check sees nothing it would refuse, or
 * STORE_FAILED with the apply's own answer -- -EINVAL (client 0, record
 * numbers not consecutive from 1) and -EPROTO (records missing before
 * the batch), checked first as the apply does; -EFBIG for a new STORE
 * larger than a file may be (res->rec names it); -EDQUOT when the
 * batch's growth of the volume's usage, counted at its least, is beyond
 * what the quota leaves: the bodies of the STOREs that are their
 * objects' last word, less what the objects the batch names use now (a
 * batch that replaces a file's content, or removes files to make room,
 * is not refused here; the apply counts it exactly). Only new records
 * are judged, as in store_reintegrate(). Reads only.
 *
 * Returns 0, or -errno if it could not judge (the store broken, a
 * database error, no memory; why in res->msg): that is the store's
 * trouble, not the batch's, and says nothing of it -- the apply, which
 * meets it too, answers it.
 */
int store_reintegrate_check(struct store *s, uint32_t volume,
			    uint32_t client, const struct lento_rec *recs,
			    size_t n, struct store_result *res);

/* ----------------------------------------------------------- identities */

/*
 * A client's id by its persistent uuid: the one it has, or a new one
 * (from 1, never reused). 0 or -errno.
 */
int store_client_register(struct store *s, const uint8_t uuid[16],
			  uint32_t *id);
/*
 * The same, but a new identity only while the store has fewer than @max
 * (0: no bound): -EDQUOT when it has that many. A known uuid always gets
 * its id back.
 */
int store_client_register_max(struct store *s, const uint8_t uuid[16],
			      uint64_t max, uint32_t *id);
/* How many identities the store has registered. */
int store_client_count(struct store *s, uint64_t *n);
/* Is @id the client with @uuid? 0, -ENOENT (no such id), -EPERM (another). */
int store_client_check(struct store *s, uint32_t id, const uint8_t uuid[16]);

/* ------------------------------------------------------------- testing */

/*
 * Fault injection for tests: @fn is called at each point with the
 * store's database handle; a negative return fails the operation there
 * with that errno, as a real failure at that point would.
 */
enum store_fault {
	STORE_FAULT_BEGIN,	/* reintegration: the transaction just began */
	STORE_FAULT_BODY_LINK,	/* before each body is put into bodies/ */
	STORE_FAULT_BODY_SYNC,	/* before bodies/ is fsynced */
	STORE_FAULT_COMMIT,	/* bodies in place, before COMMIT */
	STORE_FAULT_COMMITTED,	/* after COMMIT, before old bodies go */
	STORE_FAULT_RESIZE,	/* before a size change's copy (db NULL) */
};
typedef int (*store_fault_fn)(void *arg, enum store_fault where,
			      struct sqlite3 *db);
void store_set_fault(struct store *s, store_fault_fn fn, void *arg);

#endif /* LENTO_STORE_H */
