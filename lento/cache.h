/* SPDX-License-Identifier: MIT */
/*
 * A lento client's cache: what it knows of its volumes and objects, in
 * SQLite, and the objects themselves, materialised as real files,
 * directories and symlinks. A cache is a directory DIR:
 *
 *   DIR/<volume>/...        each volume's tree as the server has it, plus
 *                           the local changes not yet reintegrated
 *   DIR/.lento/client.db    SQLite (WAL): the CML (cml.h) and the
 *                           tables below; durable at each commit, or
 *                           with cache_commit_lazy() at a later sync
 *   DIR/.lento/tmp/         temporary files (fetched bodies before they
 *                           are renamed into place, large shadow copies
 *                           of bodies being reintegrated: O_TMPFILE);
 *                           emptied at open
 *
 * Tables (besides the CML's):
 *
 *   cache_meta  format version; whether the server assigned the client id
 *               (cml.c makes up a random one until then); the server's
 *               last epoch
 *   volumes     id -> name, root fid, version stamp, and the last record
 *               number (per volume, as shipped) the server applied
 *   cache       fid -> volume, type, status (nlink, attributes), the
 *               server's version vector of it, state (status valid, data
 *               cached, dirty), last use (LRU) and a symlink's target
 *   dirents     (directory fid, name) -> fid: the listings. A separate
 *               table rather than a name in the object's row, so that a
 *               file with two names (link) is one object
 *   handles     lower inode handle (name_to_handle_at) -> fid, for presto:
 *               filled for the objects materialised here and for those
 *               presto's journal says were made through the mount
 *   ship        (volume, shipped record number) -> CML record number: a
 *               batch's consecutive numbers on the wire, kept so that a
 *               batch sent again after a crash carries the same ones
 *
 * Versions: an object's vv is the server's version of it as this client
 * knows it: from a listing, a fetch, a validation, or a reintegration's
 * answer. Local changes do not move it (they are in the CML, based on
 * it); n == 0 for an object created here and not yet reintegrated.
 *
 * Every function returns 0 (or a count) or -errno, prints nothing, and
 * runs on the thread that opened the cache.
 */
#ifndef LENTO_CACHE_H
#define LENTO_CACHE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "lento_types.h"

#define CACHE_FORMAT	1	/* cache_meta 'format' this code writes */
#define CACHE_PATH_MAX	4096

struct cache;
struct cml;
struct sqlite3;

/*
 * Open (making what is missing) the cache in @dir; its CML too. Empties
 * DIR/.lento/tmp. -EPROTO if the database is of a newer format; @err says
 * why.
 */
int cache_open(const char *dir, struct cache **out, char *err, size_t errlen);
void cache_close(struct cache *c);

struct cml *cache_cml(struct cache *c);
struct sqlite3 *cache_db(struct cache *c);
/*
 * Where the content of files named by journal records set aside is kept
 * (kml_apply.c), relative to DIR.
 */
#define CACHE_QUARANTINE_DIR	".lento/quarantine"

/* DIR, open (O_PATH): every path below is relative to it. */
int cache_dirfd(const struct cache *c);

/*
 * Paths in the cache, safely. The paths the rows give (cache_path()) may
 * be stale: a user of a presto mount, whose lower is DIR/VOLUME, renames
 * directories and makes symlinks there, and lento learns of it only from
 * the journal, seconds later. lento is root: no path is walked through a
 * symlink. Lookups are openat2() beneath DIR with RESOLVE_NO_SYMLINKS (a
 * symlink anywhere on the way: -ELOOP, which cache_strerror() says as
 * "a symlink stands where the cache has a directory"); the last
 * component is never followed. Every function below taking a path
 * relative to DIR goes through these.
 */
/*
 * What an open for content (below) returns for something that is not a
 * regular file, as a fifo a user made under a file's name: no errno says
 * it, this one is met nowhere else here, and cache_strerror() says what
 * it means.
 */
#define CACHE_ENOTREG	EMEDIUMTYPE
/*
 * @path opened beneath @dirfd (O_CLOEXEC added; @mode for O_CREAT or
 * O_TMPFILE): a descriptor or -errno. A symlink last is -ELOOP too, but
 * for O_PATH without O_DIRECTORY, which opens the symlink itself. An
 * open for content (neither O_PATH nor O_DIRECTORY) never waits on a
 * fifo and gives only a regular file: -CACHE_ENOTREG for a fifo, socket
 * or device, -EISDIR for a directory. Needs no struct cache: the
 * worker's thread uses it too.
 */
int cache_beneath(int dirfd, const char *path, int flags, mode_t mode);
/* cache_beneath() from DIR. */
int cache_open_obj(struct cache *c, const char *path, int flags, mode_t mode);
/*
 * The directory @path is in, reached as cache_beneath() does (O_PATH):
 * its descriptor, DIR's own for a name at the top, and in *@name the
 * last component, to act on by name there (not followed). -EINVAL for a
 * last component "." or "..". Given back with cache_parent_put().
 */
int cache_parent(struct cache *c, const char *path, const char **name);
void cache_parent_put(struct cache *c, int fd);
/* strerror(-@err), but for ELOOP and CACHE_ENOTREG what they mean here. */
const char *cache_strerror(int err);

/* The *at() calls, by (parent, name): 0 or -errno. */
int cache_lstat(struct cache *c, const char *path, struct stat *sb);
int cache_unlink(struct cache *c, const char *path, int flags);
int cache_mkdir(struct cache *c, const char *path, mode_t mode);
int cache_symlink(struct cache *c, const char *target, const char *path);
/* renameat2() with @flags (0: renameat()); linkat() not following. */
int cache_rename(struct cache *c, const char *from, const char *to,
		 unsigned int flags);
int cache_hardlink(struct cache *c, const char *from, const char *to);
/* The l*xattr() calls on @path: a size, 0, or -errno. */
ssize_t cache_getxattr(struct cache *c, const char *path, const char *xname,
		       void *buf, size_t size);
int cache_setxattr(struct cache *c, const char *path, const char *xname,
		   const void *value, size_t size);
int cache_removexattr(struct cache *c, const char *path, const char *xname);
/* The same on the object open as @fd (O_PATH will do), by /proc. */
ssize_t cache_fgetxattr(int fd, const char *xname, void *buf, size_t size);
int cache_fsetxattr(int fd, const char *xname, const void *value,
		    size_t size);
int cache_fremovexattr(int fd, const char *xname);
/*
 * The handle (name_to_handle_at()) of the object open as @fd, or of the
 * one at @path (a symlink's own). @fh->handle_bytes: its room.
 */
struct file_handle;
int cache_fd_handle(int fd, struct file_handle *fh, int *mount_id);
int cache_name_to_handle(struct cache *c, const char *path,
			 struct file_handle *fh, int *mount_id);

/*
 * A transaction around several changes (the CML's join it).
 * cache_commit() returns once the transaction, and every one before it,
 * is durable. cache_commit_lazy() is for the event loop's busy paths: the
 * transaction is atomic and ordered after the earlier ones, but a crash
 * may lose it (and what follows it) until a sync of the WAL: whoever acts
 * on it outside the cache -- acknowledges presto's records, ships a
 * batch -- first waits for cache_durable_gen() to reach its generation.
 * A failed sync (-EIO) makes no later one trustworthy: every durable
 * commit and sync fails from then on (cache_sync_error()).
 */
int cache_begin(struct cache *c);
int cache_commit(struct cache *c);
int cache_commit_lazy(struct cache *c);
void cache_rollback(struct cache *c);
/*
 * Many reads in a row in one read transaction: one snapshot and one round
 * of SQLite's file locks, not one per statement. cache_read_begin() says
 * whether it began one (none inside another transaction, or if BEGIN
 * failed: the reads then go one by one); cache_read_end() ends it if so.
 */
bool cache_read_begin(struct cache *c);
void cache_read_end(struct cache *c, bool began);
/* Transactions committed since the cache was opened, and of those, durable. */
uint64_t cache_gen(const struct cache *c);
uint64_t cache_durable_gen(const struct cache *c);
/*
 * The sync of the lazy commits, for a caller that does it elsewhere (the
 * loop's ring): the file to fdatasync, and its result for every commit up
 * to @gen (cache_gen() when it started).
 */
int cache_sync_fd(const struct cache *c);
void cache_synced(struct cache *c, uint64_t gen, int err);
/* The sync done here and now, for every commit so far: 0 or the error. */
int cache_sync(struct cache *c);
int cache_sync_error(const struct cache *c);
/*
 * The WAL is checkpointed on a thread of the cache's: the last failure
 * since asked (then forgotten), or 0. The WAL grows until one succeeds.
 */
int cache_checkpoint_error(struct cache *c);

int cache_meta_get(struct cache *c, const char *key, int64_t *v);
int cache_meta_set(struct cache *c, const char *key, int64_t v);

/*
 * presto's journal record @seq of @volume, which can never be translated
 * (kml_apply.h): set aside with why, the errno and its bytes (@rec, @len,
 * as in its segment), in the table kml_quarantine. Part of the caller's
 * transaction.
 */
int cache_quarantine_put(struct cache *c, uint32_t volume, uint64_t seq,
			 uint16_t op, int err, const char *why,
			 int64_t at_ms, const void *rec, size_t len);
/* How many records of @volume are set aside; the last one's seq and why. */
int cache_quarantine_count(struct cache *c, uint32_t volume, uint64_t *n,
			   uint64_t *last_seq, char *why, size_t why_size);

/* A record set aside, as cache_quarantine_each() gives it. */
struct cache_quar {
	uint32_t volume;
	uint64_t seq;
	uint16_t op;		/* enum presto_kml_op */
	int err;		/* the errno, positive */
	const char *why;	/* valid until the callback returns */
	int64_t at_ms;		/* when, wall clock */
	size_t len;		/* the record's bytes */
};
typedef int (*cache_quar_fn)(void *arg, const struct cache_quar *q);
#define CACHE_QUAR_ALL	(-1)	/* every volume's, to cache_quarantine_each */
/*
 * Every record set aside of @volume (a volume id, or CACHE_QUAR_ALL), in
 * (volume, seq) order; @fn's non-zero return stops it and is returned.
 * @fn may read the cache (cache_quarantine_files(), cache_vol_get()) but
 * not call this again nor change the table.
 */
int cache_quarantine_each(struct cache *c, int64_t volume, cache_quar_fn fn,
			  void *arg);
/*
 * The files kept for record @seq of @volume (kml_apply.h): the entries
 * of CACHE_QUARANTINE_DIR named exactly VOLUME.SEQ.I, I a number (as
 * written: decimal, no leading zero), in I order; @name is the entry's,
 * @size from lstat. None if the directory is missing. @fn's non-zero
 * return stops it and is returned.
 */
typedef int (*cache_quar_file_fn)(void *arg, const char *name,
				  uint64_t size);
int cache_quarantine_files(struct cache *c, uint32_t volume, uint64_t seq,
			   cache_quar_file_fn fn, void *arg);
/*
 * A person has dealt with record @seq of @volume: its kept files (as
 * cache_quarantine_files() lists them) are unlinked, then its row is
 * deleted, durably. -ENOENT if there is no such row, and nothing is
 * removed. In *@nfiles, the files unlinked. Outside a transaction.
 */
int cache_quarantine_drop(struct cache *c, uint32_t volume, uint64_t seq,
			  unsigned int *nfiles);

/* ------------------------------------------------------------ volumes */

struct cache_vol {
	uint32_t id;
	char name[LENTO_VOLNAME_MAX + 1];
	struct lento_fid root;
	uint64_t stamp;		/* the server's, as last validated */
	uint64_t applied;	/* last shipped record the server applied */
};

/*
 * A name a client can keep its volume under: a server's volume name that
 * is also a file name and not ".lento".
 */
bool cache_volname_ok(const char *name);

int cache_vol_put(struct cache *c, const struct cache_vol *v);
int cache_vol_get(struct cache *c, uint32_t id, struct cache_vol *v);
int cache_vol_find(struct cache *c, const char *name, struct cache_vol *v);
typedef int (*cache_vol_fn)(void *arg, const struct cache_vol *v);
int cache_vol_list(struct cache *c, cache_vol_fn fn, void *arg);

/* ------------------------------------------------------------ objects */

struct cache_obj {
	struct lento_fid fid;
	uint8_t type;			/* enum lento_type */
	uint32_t nlink;
	struct lento_attr attr;
	struct lento_vv vv;		/* the server's version (see above) */
	bool valid;			/* no break since it was fetched */
	bool data;			/* file content / full listing cached */
	bool dirty;			/* named by a record not reintegrated
					 * (read only: cache_dirty_add) */
	int64_t used_ms;		/* last use, wall clock: the LRU */
};

/* -ENOENT if not cached. @target (may be NULL): a symlink's, NUL-ended. */
int cache_obj_get(struct cache *c, const struct lento_fid *fid,
		  struct cache_obj *o, char *target, size_t target_size);
/* Insert or replace; @target: a symlink's (NULL: the one it has). */
int cache_obj_put(struct cache *c, const struct cache_obj *o,
		  const char *target, size_t target_len);
/* The same, keeping the target, and cache_dirty_add(@dirty_delta) too. */
int cache_obj_put_dirty(struct cache *c, const struct cache_obj *o,
			int dirty_delta);
/*
 * The row, its names in listings and its handles; lento's mark goes from
 * the inodes those handles give (a user may have moved one: with neither
 * handle nor mark it is theirs, not a crash's leftover).
 */
int cache_obj_del(struct cache *c, const struct lento_fid *fid);
/*
 * The same for @fid and, a directory, for every object below it that has
 * no name elsewhere (a removed tree's rows; hidden names too). The caller
 * has made sure that nothing in it has changes to reintegrate.
 */
int cache_obj_del_tree(struct cache *c, const struct lento_fid *fid);
int cache_obj_set_state(struct cache *c, const struct lento_fid *fid,
			bool valid, bool data);
/*
 * @fid's version, and not valid if @stale (else its validity stays): 1
 * (valid), 2 (not valid), or 0 if it is not cached.
 */
int cache_obj_set_vv(struct cache *c, const struct lento_fid *fid,
		     const struct lento_vv *vv, bool stale);
int cache_obj_touch(struct cache *c, const struct lento_fid *fid,
		    int64_t used_ms);

typedef int (*cache_obj_fn)(void *arg, const struct cache_obj *o);
/* Every object of @volume (in fid order). */
int cache_obj_walk(struct cache *c, uint32_t volume, cache_obj_fn fn,
		   void *arg);

/*
 * An object is dirty while records of the log name it: the count of
 * those (a slot of a record counts once). Added to when a record is
 * logged, taken from when it is acknowledged; recounted when the
 * optimiser rewrites the log. cache_obj_put() leaves it alone.
 */
int cache_dirty_add(struct cache *c, const struct lento_fid *fid, int delta);
/* Every object of @volume clean (to recount, or the log is empty). */
int cache_dirty_clear(struct cache *c, uint32_t volume);
/* Objects with no name left and no pending change: forgotten. */
int cache_purge(struct cache *c, uint32_t volume);

/* ------------------------------------------------------------ listings */

int cache_lookup(struct cache *c, const struct lento_fid *dir,
		 const char *name, struct lento_fid *fid);
/* Insert or replace the entry @name of @dir. */
int cache_dirent_put(struct cache *c, const struct lento_fid *dir,
		     const char *name, const struct lento_fid *fid);
int cache_dirent_del(struct cache *c, const struct lento_fid *dir,
		     const char *name);
/* Every entry of @dir (a directory made again, empty). */
int cache_dirents_del(struct cache *c, const struct lento_fid *dir);
typedef int (*cache_dirent_fn)(void *arg, const char *name,
			       const struct lento_fid *fid);
/* Entries of @dir in name (byte) order. */
int cache_readdir(struct cache *c, const struct lento_fid *dir,
		  cache_dirent_fn fn, void *arg);
/* How many entries @dir has; how many names @fid has. */
int cache_dir_count(struct cache *c, const struct lento_fid *dir);
int cache_name_count(struct cache *c, const struct lento_fid *fid);
/* 1 if an object below directory @dir is dirty, 0 if none, or -errno. */
int cache_tree_dirty(struct cache *c, const struct lento_fid *dir);
/* One name of @fid: its directory and the name. -ENOENT if none. */
int cache_name_of(struct cache *c, const struct lento_fid *fid,
		  struct lento_fid *dir, char name[LENTO_NAME_MAX + 1]);

typedef int (*cache_name_fn)(void *arg, const struct lento_fid *dir,
			     const char *name);
/* Every name of @fid (a file with links has several). */
int cache_names(struct cache *c, const struct lento_fid *fid,
		cache_name_fn fn, void *arg);

/*
 * Where @fid is materialised, relative to DIR: "VOLUME/a/b" (by one of
 * its names), "VOLUME" for a root. -ENOENT if it has no path (not
 * reachable from its root).
 */
int cache_path(struct cache *c, const struct lento_fid *fid, char *buf,
	       size_t size);

/*
 * cache_path() for many objects in a row that share directories (a
 * batch's): the path of the last directory met is kept in @m, zeroed
 * before the first call. Only while no name in the cache changes.
 */
struct cache_path_memo {
	bool known;
	struct lento_fid dir;
	char path[CACHE_PATH_MAX];
};

int cache_path_near(struct cache *c, const struct lento_fid *fid,
		    struct cache_path_memo *m, char *buf, size_t size);

/* ----------------------------------------------------- shipped numbers */

int cache_ship_add(struct cache *c, uint32_t volume, uint64_t shipno,
		   uint64_t recno);
/* The ship number record @recno got; -ENOENT if it was not shipped. */
int cache_ship_of(struct cache *c, uint32_t volume, uint64_t recno,
		  uint64_t *shipno);
/* The highest record number shipped as @shipno or lower; 0 if none. */
int cache_ship_recno_upto(struct cache *c, uint32_t volume, uint64_t shipno,
			  uint64_t *recno);
/* Forget the numbers up to @shipno (acknowledged); all: UINT64_MAX. */
int cache_ship_drop(struct cache *c, uint32_t volume, uint64_t shipno);
/* How many records of @volume have numbers. */
int cache_ship_count(struct cache *c, uint32_t volume);

/* -------------------------------------------------------- statistics */

struct cache_stats {
	uint64_t objects;
	uint64_t files_cached;	/* regular files with their content */
	uint64_t bytes;		/* content of those, and of dirty files */
	uint64_t dirty;		/* objects named by pending records */
	uint64_t dirty_bytes;	/* content of dirty regular files */
};
int cache_stats(struct cache *c, struct cache_stats *st);
/*
 * Rows changed through the cache's connection since it opened (rolled
 * back ones too): equal counts mean cache_stats() would say the same.
 */
int64_t cache_changes(const struct cache *c);

/*
 * Regular files whose content may be evicted (cached, clean), least
 * recently used first; stop by returning non-zero from @fn.
 */
int cache_lru_walk(struct cache *c, cache_obj_fn fn, void *arg);

/* ------------------------------------------------------------- handles */

/*
 * Record the lower inode handle of @fid's object at @path (relative to
 * DIR). The handles of the inodes it had before (a body fetched, a
 * placeholder replaced) still name it: presto may ask by one it still
 * holds. -EOPNOTSUPP where the file system has none: the caller may
 * ignore it.
 */
int cache_handle_update(struct cache *c, const struct lento_fid *fid,
			const char *path);
/*
 * The same for the inode open as @fd (O_PATH will do): the one lento
 * made or checked, not whatever @path names by now.
 */
int cache_handle_update_fd(struct cache *c, const struct lento_fid *fid,
			   int fd);
/*
 * Record a handle of @fid's object without looking at the disk: presto
 * named the inode (ext4's inode @ino) in its journal.
 */
int cache_handle_set(struct cache *c, const struct lento_fid *fid, int type,
		     const void *handle, size_t len, uint64_t ino);
typedef int (*cache_handle_fn)(void *arg, int type, const void *handle,
			       size_t len);
/* The handles recorded for @fid (old inodes' too); @fn may stop it. */
int cache_handles(struct cache *c, const struct lento_fid *fid,
		  cache_handle_fn fn, void *arg);
/*
 * Is the object open as @fd one of @fid's inodes, by the handles
 * recorded? 1, 0 (another object's), or -errno: -ENOENT if its handle
 * was never recorded, -EOPNOTSUPP if the file system gives none. For a
 * path of the rows, which may now name another object.
 */
int cache_fd_is(struct cache *c, int fd, const struct lento_fid *fid);
/*
 * Is the object open as @fd, found at @path (of the rows), @fid's own?
 * 0 if so by its handle -- or if nothing can tell (no handles), or it is
 * a volume's root (no '/' in @path; made with no handle recorded), or
 * lento's mark for @fid is on it and no handle recorded (a crash's
 * leftover; cache_at below) --, -ESTALE if it is another object or one
 * the cache does not know (a user's, made under the name), or -errno.
 */
int cache_fd_own(struct cache *c, int fd, const struct lento_fid *fid,
		 const char *path);
/*
 * Is @path (not followed) still the inode open as @fd? 0, -ESTALE if it
 * is another or nothing (moved away, another put in its place), or
 * -errno. For a name a fetch or a listing goes on to use.
 */
int cache_path_is_fd(struct cache *c, const char *path, int fd);
/*
 * What a name of the rows may hold where lento puts an object of its own
 * (cache_install_at(), cache_placeholder_fd(), cache_remove_at()): the
 * name's inode is replaced or removed only if it is
 *   - an inode of @fid (cache_fd_is(): by its handle), or nothing tells
 *     (the file system gives no handles), or a volume's root;
 *   - or an inode the cache knows no handle of that carries lento's
 *     mark for @fid: its own, made for the object and left by a crash
 *     between the change on the disk and the commit of its handle;
 *   - or, with @lax, any inode the cache knows no handle of: lento's own
 *     left by a crash, where nobody else changes the tree (no presto
 *     mount over it).
 * Anything else -- an inode of another object, or, without @lax, one the
 * cache does not know (a user's, made through a presto mount) -- is left
 * as it is: -ESTALE. @fid NULL: the rows have nothing at the name.
 * Nothing at the name is always fine. The check is made just before the
 * rename, which then replaces only that inode (renameat2(RENAME_EXCHANGE),
 * put back if another took the name meanwhile; RENAME_NOREPLACE if there
 * was nothing).
 */
struct cache_at {
	const struct lento_fid *fid;
	bool lax;
};
/*
 * May the inode open as @fd, at @path, be replaced as @at says? 0 if so,
 * -ESTALE if not, or -errno.
 */
int cache_at_allows(struct cache *c, int fd, const char *path,
		    const struct cache_at *at);
/*
 * Inodes in the directory at @dirpath that a crash left behind: lento
 * made each for an object (the mark install gives every inode it puts
 * in place), and the transaction that was to record its handle and name
 * never committed. Names @known says the rows have are not looked at;
 * of the others, those no recorded handle gives, that lento's mark is on
 * and that have not changed since the cache was opened (an earlier
 * run's) are removed; a user's, made through presto, carries no mark.
 * Marks go only where @at of an install is not lax (a fileset's). The
 * count removed, or -errno if the directory cannot be read; *@stuck
 * (0 before) gets the first error of one that would not go.
 */
int cache_drop_strays(struct cache *c, const char *dirpath,
		      bool (*known)(void *arg, const char *name), void *arg,
		      int *stuck);
/*
 * The object lento made the inode open as @fd for (its mark), into
 * *@fid: 0, -ENOENT if the inode has no mark, or -errno.
 */
int cache_fd_made_for(int fd, struct lento_fid *fid);
/* The fid of the object with this handle. */
int cache_handle_lookup(struct cache *c, int type, const void *handle,
			size_t len, struct lento_fid *fid);

/* ------------------------------------------------------- materialising */

/*
 * A new empty file in DIR/.lento/tmp: its descriptor (O_RDWR) and its
 * path relative to DIR in @path (CACHE_PATH_MAX bytes).
 */
int cache_tmpfile(struct cache *c, char *path);
/*
 * The content of regular file @path (relative to @dirfd, the cache's
 * directory; not followed) copied into @out, a file in DIR
 * (copy_file_range); its status before the copy in *@sb. -EIO if it
 * shrank meanwhile. It touches only files, not the database: the
 * worker's thread runs it too.
 */
int cache_copy_content(int dirfd, const char *path, int out,
		       struct stat *sb);
/* The same from an open file @in, whose status said @size. */
int cache_copy_fd(int in, int out, off_t size);
/*
 * Rename the fsynced temporary file @tmp onto @path (both relative to
 * DIR) and sync the directory: readers that have @path open keep the old
 * inode. Sets @o's mode and times (and owner when running as root).
 */
int cache_install(struct cache *c, const char *tmp, const char *path,
		  const struct cache_obj *o);
/* The same, and in *@fdp (if not NULL) the inode installed, O_PATH. */
int cache_install_fd(struct cache *c, const char *tmp, const char *path,
		     const struct cache_obj *o, int *fdp);
/*
 * cache_install_fd(), but only over what @at allows at @path (else
 * -ESTALE, @tmp left for the caller), and with the xattrs of @xa (NULL:
 * none set) set on @tmp before it takes the name.
 */
struct cache_xattrs;
int cache_install_at(struct cache *c, const char *tmp, const char *path,
		     const struct cache_obj *o, const struct cache_xattrs *xa,
		     const struct cache_at *at, int *fdp);
/*
 * A second name for the file at @path (relative to DIR) in .lento/tmp,
 * into @aside (CACHE_PATH_MAX): its content kept while @path is replaced,
 * for the caller to rename back or remove.
 */
int cache_link_aside(struct cache *c, const char *path, char *aside);
/* The same, @path itself moved there (a file or a directory). */
int cache_move_aside(struct cache *c, const char *path, char *aside);
/*
 * Make @path (relative to DIR) the object @o without its content: a
 * directory (kept if there), a symlink to @target, a fifo, socket or
 * device node (a device only as root: -EOPNOTSUPP otherwise, the caller
 * may leave it out of the tree), or a sparse file of its size (through a
 * temporary file, so open readers keep the old inode). Attributes as
 * cache_install.
 */
int cache_placeholder(struct cache *c, const char *path,
		      const struct cache_obj *o, const char *target);
/*
 * The same, and with the xattrs of @xa (cache_sync_xattrs_fd(); NULL:
 * none set), set before the object takes its name; in *@fdp (if not
 * NULL) the object made or kept: O_PATH, or for a regular file the
 * descriptor it was made with (O_RDWR). A directory kept must be the
 * object's own (cache_fd_is()), but for a volume's root: -ESTALE if it
 * is another. What the name holds is replaced (a directory made in
 * place of a file too) only as @at allows (NULL: whatever it is):
 * -ESTALE, and it is left as it is.
 */
int cache_placeholder_fd(struct cache *c, const char *path,
			 const struct cache_obj *o, const char *target,
			 const struct cache_xattrs *xa,
			 const struct cache_at *at, int *fdp);
/*
 * Make @to (relative to DIR) another name of the inode at @from, replacing
 * what @to was (through a temporary name: readers keep the old inode).
 */
int cache_link(struct cache *c, const char *from, const char *to);
/* The same for the inode open as @fd (O_PATH will do), by no name. */
int cache_link_fd(struct cache *c, int fd, const char *to);
/*
 * Between cache_defer_dirsync(c, true) and (c, false), installs and
 * placeholders do not sync their directory one by one: the caller then
 * syncs it once with cache_sync_dir() (a listing of 100,000 entries is
 * one fsync, not 100,000; ext4 commits the metadata before in order).
 */
void cache_defer_dirsync(struct cache *c, bool on);
int cache_sync_dir(struct cache *c, const char *path);
/* Mode, times and (as root) owner of @path from @o. */
int cache_set_attrs(struct cache *c, const char *path,
		    const struct cache_obj *o);
/* The same for the object open as @fd (O_PATH will do). */
int cache_set_attrs_fd(int fd, const struct cache_obj *o);
/* Remove @path and, for a directory, everything below it. */
int cache_remove_tree(struct cache *c, const char *path);
/*
 * The same, if what @path holds is what @at allows (else -ESTALE, and it
 * stays): moved into .lento/tmp first, so that only that inode goes.
 * Nothing there: 0.
 */
int cache_remove_at(struct cache *c, const char *path,
		    const struct cache_at *at);

/* An xattr as the server has it (names not NUL-terminated). */
struct cache_xattr {
	const char *name;
	uint32_t name_len;
	const void *value;
	uint32_t value_len;
};

/*
 * Make the xattrs of @path (relative to DIR, not followed if a symlink)
 * @x[0, @n): those it has that @x lacks go, the others are set where
 * their values differ. Left alone either way: presto's own
 * (trusted.presto.*) and security labels of the local host's LSM
 * (security.* but security.capability). An xattr the cache cannot hold
 * or lento may not set (EPERM, EOPNOTSUPP, E2BIG, ERANGE, ENOSPC from the
 * lower) is skipped and counted in *@skipped; any other error is
 * returned.
 */
int cache_sync_xattrs(struct cache *c, const char *path,
		      const struct cache_xattr *x, uint32_t n,
		      uint32_t *skipped);
/* The same for the object open as @fd (O_PATH will do). */
int cache_sync_xattrs_fd(int fd, const struct cache_xattr *x, uint32_t n,
			 uint32_t *skipped);
/*
 * What cache_placeholder_fd() and cache_install_at() set: @x as
 * cache_sync_xattrs() does, and presto's own (trusted.presto.*, which
 * that leaves alone) @own as they are (none if NULL).
 */
struct cache_xattrs {
	const struct cache_xattr *x;
	uint32_t n;
	uint32_t *skipped;
	const struct cache_xattr *own;
	uint32_t nown;
};
/*
 * The xattrs cache_sync_xattrs() manages of the inode open as @fd (O_PATH
 * will do), read into @b (its memory, given back with
 * cache_xattrs_release()): for an object's new inode, from its old one,
 * known by its handle -- never from whatever its name holds now.
 */
struct cache_xattr_copy {
	struct cache_xattr *x;
	uint32_t n;
	uint8_t *mem;
};
int cache_xattrs_read_fd(int fd, struct cache_xattr_copy *b);
void cache_xattrs_release(struct cache_xattr_copy *b);
/*
 * Copy @from's xattrs (those cache_sync_xattrs manages) to @to, by
 * their names: only where nobody else changes the tree (tests, and
 * lentoctl's changes without presto). A body fetched takes them from the
 * old inode known by its handle (cache_xattrs_read_fd()).
 */
int cache_copy_xattrs(struct cache *c, const char *from, const char *to);
/*
 * The names of a file that the cache has not materialised (they are in
 * directories it has not listed) are hidden links DIR/.lento/names/FID.N
 * to its inode, so that its link count is the server's @nlink, as stat
 * shows it and as tar, rsync -H and du go by. Makes @path's inode (the
 * file @fid) have them: @nlink minus the names it has elsewhere, none if
 * it has them all. cache_names_drop() removes them (the object goes).
 */
int cache_names_fit(struct cache *c, const struct lento_fid *fid,
		    const char *path, uint32_t nlink);
/* The same for the inode open as @fd, whatever names it has now. */
int cache_names_fit_fd(struct cache *c, const struct lento_fid *fid, int fd,
		       uint32_t nlink);
void cache_names_drop(struct cache *c, const struct lento_fid *fid);

#endif /* LENTO_CACHE_H */
