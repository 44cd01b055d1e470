// SPDX-License-Identifier: MIT
/*
 * The lento client's cache (cache.h): its SQLite tables, and the files,
 * directories and symlinks it materialises under DIR.
 *
 * Storage: fids are 16-byte blobs (volume, client, seq, little-endian),
 * version vectors blobs of n (4 bytes), n counters (8), StoreId client (4)
 * and seq (8) -- the CML's encoding, so one reader could read both.
 */
#include "cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <linux/openat2.h>

#include "array.h"
#include "blob.h"
#include "fault.h"
#include "cml.h"

#define PATH_DEPTH_MAX	2048	/* a path longer than this is a loop */

enum stmt {
	S_META_GET,
	S_META_SET,
	S_VOL_PUT,
	S_VOL_GET,
	S_VOL_FIND,
	S_VOL_LIST,
	S_OBJ_GET,
	S_OBJ_PUT,
	S_OBJ_DEL,
	S_OBJ_DEL_NAMES,
	S_OBJ_DEL_HANDLES,
	S_OBJ_STATE,
	S_OBJ_VV,
	S_OBJ_TOUCH,
	S_OBJ_WALK,
	S_DIRTY_CLEAR,
	S_DIRTY_ADD,
	S_PURGE,
	S_PURGE_HANDLES,
	S_PURGE_HANDLES_OF,
	S_LOOKUP,
	S_DIRENT_PUT,
	S_DIRENT_DEL,
	S_DIRENTS_DEL,
	S_READDIR,
	S_DIR_COUNT,
	S_NAME_COUNT,
	S_TREE_DIRTY,
	S_NAME_OF,
	S_NAMES,
	S_SHIP_ADD,
	S_SHIP_OF,
	S_SHIP_UPTO,
	S_SHIP_DROP,
	S_SHIP_COUNT,
	S_STATS,
	S_LRU,
	S_HANDLE_PUT,
	S_HANDLE_GET,
	S_HANDLES_OF,
	S_QUAR_PUT,
	S_QUAR_COUNT,
	S_QUAR_LAST,
	S_QUAR_EACH,
	S_QUAR_HAS,
	S_QUAR_DEL,
	S_COUNT
};

#define OBJ_COLS "fid, type, nlink, a_valid, mode, uid, gid, size, atime, " \
	"mtime, ctime, rdev, vv, valid, data, dirty, used, target"

static const char *const sql[S_COUNT] = {
	[S_META_GET] = "SELECT value FROM cache_meta WHERE key = ?1",
	[S_META_SET] = "INSERT OR REPLACE INTO cache_meta(key, value) "
		       "VALUES (?1, ?2)",
	[S_VOL_PUT] = "INSERT OR REPLACE INTO volumes(id, name, root, stamp, "
		      "applied) VALUES (?1, ?2, ?3, ?4, ?5)",
	[S_VOL_GET] = "SELECT id, name, root, stamp, applied FROM volumes "
		      "WHERE id = ?1",
	[S_VOL_FIND] = "SELECT id, name, root, stamp, applied FROM volumes "
		       "WHERE name = ?1",
	[S_VOL_LIST] = "SELECT id, name, root, stamp, applied FROM volumes "
		       "ORDER BY id",
	[S_OBJ_GET] = "SELECT " OBJ_COLS " FROM cache WHERE fid = ?1",
	/*
	 * A symlink's target stays when none is given; the dirty count
	 * moves by ?17, as cache_dirty_add() moves it (from 0 for a new
	 * row). The volume is the fid's: not set again, so cache_volume is
	 * not rewritten (the partial indexes on nlink and dirty are, when
	 * the row enters or leaves them).
	 */
	[S_OBJ_PUT] = "INSERT INTO cache(volume, " OBJ_COLS ") "
		      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
		      "?12, ?13, ?14, ?15, ?16, max(?17, 0), ?18, ?19) "
		      "ON CONFLICT(fid) DO UPDATE SET type = excluded.type, "
		      "nlink = excluded.nlink, a_valid = excluded.a_valid, "
		      "mode = excluded.mode, uid = excluded.uid, gid = excluded.gid, "
		      "size = excluded.size, atime = excluded.atime, "
		      "mtime = excluded.mtime, ctime = excluded.ctime, "
		      "rdev = excluded.rdev, vv = excluded.vv, "
		      "valid = excluded.valid, data = excluded.data, "
		      "dirty = max(dirty + ?17, 0), used = excluded.used, "
		      "target = coalesce(excluded.target, target)",
	[S_OBJ_DEL] = "DELETE FROM cache WHERE fid = ?1",
	[S_OBJ_DEL_NAMES] = "DELETE FROM dirents WHERE fid = ?1 OR dir = ?1",
	[S_OBJ_DEL_HANDLES] = "DELETE FROM handles WHERE fid = ?1",
	[S_OBJ_STATE] = "UPDATE cache SET valid = ?2, data = ?3 WHERE fid = ?1",
	[S_OBJ_VV] = "UPDATE cache SET vv = ?2, valid = valid AND NOT ?3 "
		     "WHERE fid = ?1 RETURNING valid",
	[S_OBJ_TOUCH] = "UPDATE cache SET used = ?2 WHERE fid = ?1",
	[S_OBJ_WALK] = "SELECT " OBJ_COLS " FROM cache WHERE volume = ?1 "
		       "ORDER BY fid",
	[S_DIRTY_CLEAR] = "UPDATE cache SET dirty = 0 WHERE volume = ?1 "
			  "AND dirty <> 0",
	[S_DIRTY_ADD] = "UPDATE cache SET dirty = max(dirty + ?2, 0) "
			"WHERE fid = ?1",
	[S_PURGE_HANDLES] = "DELETE FROM handles WHERE fid IN (SELECT fid "
			    "FROM cache WHERE volume = ?1 AND nlink = 0 AND "
			    "dirty = 0)",
	[S_PURGE_HANDLES_OF] = "SELECT htype, handle FROM handles WHERE fid IN "
			       "(SELECT fid FROM cache WHERE volume = ?1 AND "
			       "nlink = 0 AND dirty = 0)",
	[S_PURGE] = "DELETE FROM cache WHERE volume = ?1 AND nlink = 0 AND "
		    "dirty = 0",
	[S_LOOKUP] = "SELECT fid FROM dirents WHERE dir = ?1 AND name = ?2",
	[S_DIRENT_PUT] = "INSERT OR REPLACE INTO dirents(dir, name, fid) "
			 "VALUES (?1, ?2, ?3)",
	[S_DIRENT_DEL] = "DELETE FROM dirents WHERE dir = ?1 AND name = ?2",
	[S_DIRENTS_DEL] = "DELETE FROM dirents WHERE dir = ?1",
	[S_READDIR] = "SELECT name, fid FROM dirents WHERE dir = ?1 "
		      "ORDER BY name",
	[S_DIR_COUNT] = "SELECT count(*) FROM dirents WHERE dir = ?1",
	[S_NAME_COUNT] = "SELECT count(*) FROM dirents WHERE fid = ?1",
	/* UNION, not UNION ALL: a cycle in a broken cache ends. */
	[S_TREE_DIRTY] = "WITH RECURSIVE t(fid) AS ("
			 "  SELECT fid FROM dirents WHERE dir = ?1"
			 "  UNION SELECT d.fid FROM dirents d JOIN t"
			 "  ON d.dir = t.fid) "
			 "SELECT count(*) FROM (SELECT 1 FROM cache JOIN t "
			 "  USING (fid) WHERE cache.dirty != 0 LIMIT 1)",
	[S_NAME_OF] = "SELECT dir, name FROM dirents WHERE fid = ?1 "
		      "ORDER BY dir, name LIMIT 1",
	[S_NAMES] = "SELECT dir, name FROM dirents WHERE fid = ?1 "
		    "ORDER BY dir, name",
	[S_SHIP_ADD] = "INSERT INTO ship(volume, shipno, recno) "
		       "VALUES (?1, ?2, ?3)",
	[S_SHIP_OF] = "SELECT shipno FROM ship WHERE volume = ?1 AND recno = ?2",
	[S_SHIP_UPTO] = "SELECT coalesce(max(recno), 0) FROM ship "
			"WHERE volume = ?1 AND shipno <= ?2",
	[S_SHIP_DROP] = "DELETE FROM ship WHERE volume = ?1 AND shipno <= ?2",
	[S_SHIP_COUNT] = "SELECT count(*) FROM ship WHERE volume = ?1",
	[S_STATS] = "SELECT count(*), "
		    "coalesce(sum(type = 1 AND data <> 0), 0), "
		    "coalesce(sum(CASE WHEN type = 1 AND (data <> 0 OR "
		    "dirty <> 0) THEN size ELSE 0 END), 0), "
		    "coalesce(sum(dirty <> 0), 0), "
		    "coalesce(sum(CASE WHEN type = 1 AND dirty <> 0 THEN size "
		    "ELSE 0 END), 0) FROM cache",
	[S_LRU] = "SELECT " OBJ_COLS " FROM cache WHERE type = 1 AND "
		  "data <> 0 AND dirty = 0 ORDER BY used",
	[S_HANDLE_PUT] = "INSERT OR REPLACE INTO handles(htype, handle, ino, "
			 "fid) VALUES (?1, ?2, ?3, ?4)",
	[S_HANDLE_GET] = "SELECT fid FROM handles WHERE htype = ?1 AND "
			 "handle = ?2",
	[S_HANDLES_OF] = "SELECT htype, handle FROM handles WHERE fid = ?1",
	[S_QUAR_PUT] = "INSERT OR REPLACE INTO kml_quarantine(volume, seq, op, "
		       "err, why, at_ms, record) VALUES (?1, ?2, ?3, ?4, ?5, "
		       "?6, ?7)",
	[S_QUAR_COUNT] = "SELECT count(*) FROM kml_quarantine WHERE volume = ?1",
	[S_QUAR_LAST] = "SELECT seq, why FROM kml_quarantine WHERE volume = ?1 "
			"ORDER BY seq DESC LIMIT 1",
	/* ?1 < 0: every volume's (CACHE_QUAR_ALL). */
	[S_QUAR_EACH] = "SELECT volume, seq, op, err, why, at_ms, "
			"length(record) FROM kml_quarantine WHERE ?1 < 0 OR "
			"volume = ?1 ORDER BY volume, seq",
	[S_QUAR_HAS] = "SELECT count(*) FROM kml_quarantine WHERE volume = ?1 "
		       "AND seq = ?2",
	[S_QUAR_DEL] = "DELETE FROM kml_quarantine WHERE volume = ?1 AND "
		       "seq = ?2",
};

static const char schema[] =
	"CREATE TABLE IF NOT EXISTS cache_meta("
	"  key TEXT PRIMARY KEY, value) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS volumes("
	"  id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,"
	"  root BLOB NOT NULL, stamp INTEGER NOT NULL,"
	"  applied INTEGER NOT NULL);"
	"CREATE TABLE IF NOT EXISTS cache("
	"  fid BLOB PRIMARY KEY, volume INTEGER NOT NULL,"
	"  type INTEGER NOT NULL, nlink INTEGER NOT NULL,"
	"  a_valid INTEGER NOT NULL, mode INTEGER NOT NULL,"
	"  uid INTEGER NOT NULL, gid INTEGER NOT NULL, size INTEGER NOT NULL,"
	"  atime INTEGER NOT NULL, mtime INTEGER NOT NULL,"
	"  ctime INTEGER NOT NULL, rdev INTEGER NOT NULL,"
	"  vv BLOB NOT NULL, valid INTEGER NOT NULL, data INTEGER NOT NULL,"
	"  dirty INTEGER NOT NULL, used INTEGER NOT NULL, target BLOB)"
	"  WITHOUT ROWID;"
	"CREATE INDEX IF NOT EXISTS cache_volume ON cache(volume);"
	/*
	 * The eviction order holds the clean cached files alone: a row
	 * changed while dirty (every row a journal batch writes) leaves it
	 * alone. Until 2026-11 an index of every row: dropped.
	 */
	"DROP INDEX IF EXISTS cache_lru;"
	"CREATE INDEX IF NOT EXISTS cache_clean ON cache(used) "
	"  WHERE type = 1 AND data <> 0 AND dirty = 0;"
	/*
	 * What every acknowledgement looks for (cache_purge(), and
	 * cache_dirty_clear() once the log is empty): rows with no name
	 * left, and rows still counted dirty. Both are few, and a scan of
	 * the volume's rows each time cost as much as the cache is big.
	 */
	"CREATE INDEX IF NOT EXISTS cache_dead ON cache(volume) "
	"  WHERE nlink = 0;"
	"CREATE INDEX IF NOT EXISTS cache_dirty ON cache(volume) "
	"  WHERE dirty <> 0;"
	"CREATE TABLE IF NOT EXISTS dirents("
	"  dir BLOB NOT NULL, name BLOB NOT NULL, fid BLOB NOT NULL,"
	"  PRIMARY KEY(dir, name)) WITHOUT ROWID;"
	"CREATE INDEX IF NOT EXISTS dirents_fid ON dirents(fid);"
	"CREATE TABLE IF NOT EXISTS handles("
	"  htype INTEGER NOT NULL, handle BLOB NOT NULL, ino INTEGER NOT NULL,"
	"  fid BLOB NOT NULL, PRIMARY KEY(htype, handle)) WITHOUT ROWID;"
	"CREATE INDEX IF NOT EXISTS handles_fid ON handles(fid);"
	"CREATE TABLE IF NOT EXISTS ship("
	"  volume INTEGER NOT NULL, shipno INTEGER NOT NULL,"
	"  recno INTEGER NOT NULL UNIQUE,"
	"  PRIMARY KEY(volume, shipno)) WITHOUT ROWID;"
	/*
	 * presto's journal records that could never be translated, set
	 * aside (kml_apply.h): the record's bytes as in its segment.
	 */
	"CREATE TABLE IF NOT EXISTS kml_quarantine("
	"  volume INTEGER NOT NULL, seq INTEGER NOT NULL, op INTEGER NOT NULL,"
	"  err INTEGER NOT NULL, why TEXT NOT NULL, at_ms INTEGER NOT NULL,"
	"  record BLOB NOT NULL, PRIMARY KEY(volume, seq)) WITHOUT ROWID;";

/*
 * Checkpoints of the WAL into the database, on a thread of their own with
 * a connection of its own: a checkpoint syncs both files, and the loop
 * that commits must not wait for a busy disk. SQLite lets a checkpoint
 * run while another connection writes.
 */
#define CKPT_FRAMES	1000	/* SQLite's own autocheckpoint */

struct ckpt {
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool want, stop;	/* under lock */
	int err;		/* under lock: the last failure, until said */
	sqlite3 *db;		/* the thread's */
};

struct cache {
	sqlite3 *db;
	struct ckpt ck;
	struct cml *cml;
	int dirfd;
	sqlite3_stmt *st[S_COUNT];
	bool defer_dirsync;	/* cache_defer_dirsync() */
	/*
	 * The WAL, opened again for its syncs: SQLite runs with
	 * synchronous=NORMAL, and cache_commit() syncs it itself, which is
	 * what FULL does. (SQLite keeps no locks on the WAL file, so a
	 * second descriptor of it is harmless.)
	 */
	int walfd;
	uint64_t gen, durable;	/* cache_gen(), cache_durable_gen() */
	int sync_err;		/* sticky: cache_sync_error() */
	/*
	 * When it was opened, by the clock the kernel stamps ctimes with
	 * (the coarse one): what changed before is an earlier run's.
	 */
	struct timespec opened;
	int mntfd;		/* open_by_handle_at()'s: not O_PATH */
	bool marks;		/* lento's marks set: they can be taken off */
};

/* ------------------------------------------------------------- helpers */

static int sql_err(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_ROW:
	case SQLITE_DONE:
		return 0;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_READONLY:
		return -EROFS;
	case SQLITE_CONSTRAINT:
		return -EEXIST;
	case SQLITE_CANTOPEN:
		return -ENOENT;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		return -EUCLEAN;
	default:
		return -EIO;
	}
}

static sqlite3_stmt *stmt(struct cache *c, enum stmt s)
{
	return c->st[s];
}

static void reset(struct cache *c, enum stmt s)
{
	sqlite3_reset(c->st[s]);
	sqlite3_clear_bindings(c->st[s]);
}

/* Run a statement whose rows (if any) are not read. */
static int run(struct cache *c, enum stmt s)
{
	int rc = sqlite3_step(c->st[s]);

	reset(c, s);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : sql_err(rc);
}

/* The first column of the one row of a counting statement. */
static int count(struct cache *c, enum stmt s, int64_t *v)
{
	int rc = sqlite3_step(c->st[s]);
	int err = 0;

	if (rc == SQLITE_ROW)
		*v = sqlite3_column_int64(c->st[s], 0);
	else
		err = rc == SQLITE_DONE ? -ENOENT : sql_err(rc);
	reset(c, s);
	return err;
}

static void bind_fid(sqlite3_stmt *st, int col, const struct lento_fid *f)
{
	uint8_t b[FID_BLOB];

	fid_encode(b, f);
	sqlite3_bind_blob(st, col, b, sizeof(b), SQLITE_TRANSIENT);
}

static int col_fid(sqlite3_stmt *st, int col, struct lento_fid *f)
{
	return fid_decode(sqlite3_column_blob(st, col),
			  (size_t)sqlite3_column_bytes(st, col), f);
}

static void bind_vv(sqlite3_stmt *st, int col, const struct lento_vv *vv)
{
	uint8_t b[VV_BLOB_MAX];

	sqlite3_bind_blob(st, col, b, (int)vv_encode(b, vv), SQLITE_TRANSIENT);
}

static int col_vv(sqlite3_stmt *st, int col, struct lento_vv *vv)
{
	return vv_decode(sqlite3_column_blob(st, col),
			 (size_t)sqlite3_column_bytes(st, col), vv);
}

static void bind_name(sqlite3_stmt *st, int col, const char *name)
{
	sqlite3_bind_blob(st, col, name, (int)strlen(name), SQLITE_TRANSIENT);
}

static int col_name(sqlite3_stmt *st, int col, char name[LENTO_NAME_MAX + 1])
{
	const void *b = sqlite3_column_blob(st, col);
	int len = sqlite3_column_bytes(st, col);

	if (len < 1 || len > LENTO_NAME_MAX || !b || memchr(b, 0, len))
		return -EUCLEAN;
	memcpy(name, b, len);
	name[len] = 0;
	return 0;
}

/* ---------------------------------------------------------- open/close */

static int meta_check(struct cache *c, char *err, size_t errlen)
{
	int64_t format;
	int e = cache_meta_get(c, "format", &format);

	if (e == -ENOENT)
		return cache_meta_set(c, "format", CACHE_FORMAT);
	if (e)
		return e;
	if (format > CACHE_FORMAT) {
		snprintf(err, errlen, "the cache's format is %lld, newer than "
			 "this lento's (%d)", (long long)format, CACHE_FORMAT);
		return -EPROTO;
	}
	return 0;
}

/*
 * A lento killed left its lazy commits in the page cache: durable before
 * this one acts on them (acknowledges presto's records up to a position
 * stored there). Before SQLite opens the files: closing a descriptor of
 * the database would drop the locks of a connection of this process.
 */
static int sync_leftovers(const char *db, char *err, size_t errlen)
{
	static const char *const suffix[] = { "-wal", "" };
	char path[CACHE_PATH_MAX];

	for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
		int fd, e = 0;

		snprintf(path, sizeof(path), "%s%s", db, suffix[i]);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT)
			continue;
		if (fd < 0 || fdatasync(fd))
			e = -errno;
		if (fd >= 0)
			close(fd);
		if (e) {
			snprintf(err, errlen, "%s: %s", path, strerror(-e));
			return e;
		}
	}
	return 0;
}

static void *ckpt_main(void *arg)
{
	struct ckpt *ck = arg;

	pthread_mutex_lock(&ck->lock);
	for (;;) {
		int rc;

		while (!ck->want && !ck->stop)
			pthread_cond_wait(&ck->cond, &ck->lock);
		if (ck->stop)
			break;
		ck->want = false;
		pthread_mutex_unlock(&ck->lock);
		/* PASSIVE: what it can now, never waiting for the writer. */
		rc = sqlite3_wal_checkpoint_v2(ck->db, NULL,
					       SQLITE_CHECKPOINT_PASSIVE, NULL,
					       NULL);
		pthread_mutex_lock(&ck->lock);
		if (rc != SQLITE_OK && rc != SQLITE_BUSY)
			ck->err = sql_err(rc) ?: -EIO;
	}
	pthread_mutex_unlock(&ck->lock);
	return NULL;
}

/* After each commit of the loop's connection: is a checkpoint due? */
static int ckpt_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
	struct ckpt *ck = arg;

	(void)db;
	(void)name;
	if (frames < CKPT_FRAMES)
		return SQLITE_OK;
	pthread_mutex_lock(&ck->lock);
	ck->want = true;
	pthread_cond_signal(&ck->cond);
	pthread_mutex_unlock(&ck->lock);
	return SQLITE_OK;
}

static int ckpt_start(struct cache *c, const char *path, char *err,
		      size_t errlen)
{
	struct ckpt *ck = &c->ck;
	sigset_t all, old;
	int rc, e;

	rc = sqlite3_open_v2(path, &ck->db, SQLITE_OPEN_READWRITE |
			     SQLITE_OPEN_NOMUTEX, NULL);
	/* FULL (the default): the checkpoint syncs the WAL, then the db. */
	if (rc == SQLITE_OK)
		rc = sqlite3_busy_timeout(ck->db, 10000);
	/* Else it has not read the file yet, and checkpoints nothing. */
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(ck->db, "PRAGMA journal_mode = WAL", NULL,
				  NULL, NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "%s (the checkpoints' connection): %s",
			 path, ck->db ? sqlite3_errmsg(ck->db) : "no memory");
		return sql_err(rc) ?: -EIO;
	}
	pthread_mutex_init(&ck->lock, NULL);
	pthread_cond_init(&ck->cond, NULL);
	/* Signals are the loop's (signalfd): the thread takes none. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	e = -pthread_create(&ck->thread, NULL, ckpt_main, ck);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e) {
		snprintf(err, errlen, "the checkpoints' thread: %s",
			 strerror(-e));
		return e;
	}
	ck->started = true;
	/* Replaces SQLite's autocheckpoint on the loop's connection. */
	sqlite3_wal_hook(c->db, ckpt_hook, ck);
	return 0;
}

static void ckpt_stop(struct ckpt *ck)
{
	if (ck->started) {
		pthread_mutex_lock(&ck->lock);
		ck->stop = true;
		pthread_cond_signal(&ck->cond);
		pthread_mutex_unlock(&ck->lock);
		pthread_join(ck->thread, NULL);
		pthread_cond_destroy(&ck->cond);
		pthread_mutex_destroy(&ck->lock);
		ck->started = false;
	}
	sqlite3_close(ck->db);
	ck->db = NULL;
}

int cache_checkpoint_error(struct cache *c)
{
	int e;

	if (!c->ck.started)
		return 0;
	pthread_mutex_lock(&c->ck.lock);
	e = c->ck.err;
	c->ck.err = 0;
	pthread_mutex_unlock(&c->ck.lock);
	return e;
}

static int db_open(struct cache *c, const char *dir, char *err, size_t errlen)
{
	char path[CACHE_PATH_MAX], wal[CACHE_PATH_MAX + 4];
	int rc, e;

	snprintf(path, sizeof(path), "%s/.lento/client.db", dir);
	e = sync_leftovers(path, err, errlen);
	if (e)
		return e;
	rc = sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE |
			     SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_busy_timeout(c->db, 10000);
	/*
	 * What the CML says is what survives a crash (I-2): commits are
	 * made durable by cache_commit() or a later sync (cache.h). NORMAL
	 * keeps the checkpoints' syncs.
	 */
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(c->db, "PRAGMA journal_mode = WAL; "
				  "PRAGMA synchronous = NORMAL;", NULL, NULL,
				  NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(c->db, schema, NULL, NULL, NULL);
	for (int i = 0; rc == SQLITE_OK && i < S_COUNT; i++)
		rc = sqlite3_prepare_v3(c->db, sql[i], -1,
					SQLITE_PREPARE_PERSISTENT, &c->st[i],
					NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(c->db));
		return sql_err(rc) ?: -EIO;
	}
	e = meta_check(c, err, errlen);
	if (e)
		return e;
	/* There since the schema's transaction. */
	snprintf(wal, sizeof(wal), "%s-wal", path);
	c->walfd = open(wal, O_RDONLY | O_CLOEXEC);
	if (c->walfd < 0) {
		e = -errno;
		snprintf(err, errlen, "%s: %s", wal, strerror(-e));
		return e;
	}
	e = cml_open(&c->cml, c->db);
	if (e) {
		snprintf(err, errlen, "%s: the modification log: %s", path,
			 strerror(-e));
		return e;
	}
	return ckpt_start(c, path, err, errlen);
}

/* The files in directory @sub (a crash's leftovers): nobody wants them. */
static int empty_dir(struct cache *c, const char *sub)
{
	int fd = cache_open_obj(c, sub, O_RDONLY | O_DIRECTORY, 0);
	struct dirent *de;
	DIR *d;

	if (fd < 0)
		return fd;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    unlinkat(fd, de->d_name, 0) && errno == EISDIR)
			unlinkat(fd, de->d_name, AT_REMOVEDIR);	/* aside */
	closedir(d);
	return 0;
}

/*
 * .lento/tmp emptied; .lento/shadow, where lento before 2026-11-26 kept
 * named copies of the bodies it reintegrated, removed.
 */
static int empty_tmp(struct cache *c, const char *dir, char *err,
		     size_t errlen)
{
	int e = empty_dir(c, ".lento/tmp");

	if (e) {
		snprintf(err, errlen, "%s/.lento/tmp: %s", dir, strerror(-e));
		return e;
	}
	e = empty_dir(c, ".lento/shadow");
	if (!e)
		e = cache_unlink(c, ".lento/shadow", AT_REMOVEDIR);
	if (e && e != -ENOENT) {
		snprintf(err, errlen, "%s/.lento/shadow: %s", dir,
			 strerror(-e));
		return e;
	}
	return 0;
}

static int make_dirs(const char *dir, char *err, size_t errlen)
{
	static const char *const sub[] = { "", "/.lento", "/.lento/tmp",
					   "/.lento/names",
					   "/" CACHE_QUARANTINE_DIR };
	char path[CACHE_PATH_MAX];

	for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
		if (snprintf(path, sizeof(path), "%s%s", dir, sub[i]) >=
		    (int)sizeof(path)) {
			snprintf(err, errlen, "%s: path too long", dir);
			return -ENAMETOOLONG;
		}
		if (mkdir(path, 0700) && errno != EEXIST) {
			int e = -errno;

			snprintf(err, errlen, "cannot make %s: %s", path,
				 strerror(-e));
			return e;
		}
	}
	return 0;
}

/* lento's mark on the inodes it installs: below, made_mark(). */
#define MADE_XATTR	"trusted.presto.fid"

/*
 * Can lento take its mark off a file it finds by handle (it needs
 * CAP_DAC_READ_SEARCH for open_by_handle_at(), CAP_SYS_ADMIN for trusted
 * xattrs)? Tried on a file of its own. Only then does it mark
 * (made_mark()).
 */
static bool can_unmark(struct cache *c)
{
	struct {
		struct file_handle fh;
		unsigned char buf[MAX_HANDLE_SZ];
	} h;
	char tmp[CACHE_PATH_MAX];
	int mount_id, fd = cache_tmpfile(c, tmp), by = -1;
	bool can;

	if (fd < 0)
		return false;
	h.fh.handle_bytes = MAX_HANDLE_SZ;
	can = c->mntfd >= 0 && !cache_fd_handle(fd, &h.fh, &mount_id);
	if (can)
		by = open_by_handle_at(c->mntfd, &h.fh, O_PATH | O_NOFOLLOW |
				       O_CLOEXEC);
	can = by >= 0 && !cache_fsetxattr(by, MADE_XATTR, "probe", 5) &&
	      !cache_fremovexattr(by, MADE_XATTR);
	if (by >= 0)
		close(by);
	close(fd);
	cache_unlink(c, tmp, 0);
	return can;
}

int cache_open(const char *dir, struct cache **out, char *err, size_t errlen)
{
	struct cache *c;
	int e;

	*out = NULL;
	e = make_dirs(dir, err, errlen);
	if (e)
		return e;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->walfd = -1;
	clock_gettime(CLOCK_REALTIME_COARSE, &c->opened);
	c->mntfd = -1;
	c->dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (c->dirfd < 0) {
		e = -errno;
		snprintf(err, errlen, "%s: %s", dir, strerror(-e));
		cache_close(c);
		return e;
	}
	c->mntfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	e = db_open(c, dir, err, errlen);
	if (!e)
		e = empty_tmp(c, dir, err, errlen);
	if (!e)
		c->marks = can_unmark(c);
	if (e) {
		cache_close(c);
		return e;
	}
	*out = c;
	return 0;
}

void cache_close(struct cache *c)
{
	if (!c)
		return;
	/* Before the last connection's close checkpoints and removes the WAL. */
	ckpt_stop(&c->ck);
	cml_close(c->cml);
	for (int i = 0; i < S_COUNT; i++)
		sqlite3_finalize(c->st[i]);
	if (c->db)
		sqlite3_close(c->db);
	if (c->walfd >= 0)
		close(c->walfd);
	if (c->dirfd >= 0)
		close(c->dirfd);
	if (c->mntfd >= 0)
		close(c->mntfd);
	free(c);
}

struct cml *cache_cml(struct cache *c)
{
	return c->cml;
}

struct sqlite3 *cache_db(struct cache *c)
{
	return c->db;
}

int cache_dirfd(const struct cache *c)
{
	return c->dirfd;
}

/* ---------------------------------------------------------- safe paths */

/*
 * The paths of the cache's rows may be stale, and not only by a name: a
 * user of a presto mount (its lower is DIR/VOLUME) renames directories
 * and makes symlinks in the tree, and lento learns of it only when it
 * consumes the journal, seconds later. lento runs as root: a path walked
 * the usual way through a symlink that a user put where the cache has a
 * directory would have it chmod, truncate, rename over or read any file
 * of the host (O_NOFOLLOW and AT_SYMLINK_NOFOLLOW guard the last
 * component only). So no path is walked that way here: every lookup is
 * openat2() beneath DIR with no symlink on the way (ELOOP, which
 * cache_strerror() names), and the last component is then acted on by
 * name in the directory so reached, never followed.
 */
#define CACHE_RESOLVE	(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | \
			 RESOLVE_NO_MAGICLINKS)

/*
 * An open for content (not O_PATH, not a directory) that found @fd: 0 if
 * it is a regular file, its O_NONBLOCK cleared unless @flags asked for
 * it, or -errno and @fd closed.
 */
static int content_fd(int fd, int flags)
{
	struct stat sb;
	int fl, err = 0;

	if (fstat(fd, &sb))
		err = -errno;
	else if (!S_ISREG(sb.st_mode))
		err = S_ISDIR(sb.st_mode) ? -EISDIR : -CACHE_ENOTREG;
	/* As it was before: the reads and writes after block as usual. */
	else if (!(flags & O_NONBLOCK) &&
		 ((fl = fcntl(fd, F_GETFL)) < 0 ||
		  fcntl(fd, F_SETFL, fl & ~O_NONBLOCK)))
		err = -errno;
	if (err)
		close(fd);
	return err;
}

int cache_beneath(int dirfd, const char *path, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.resolve = CACHE_RESOLVE,
	};
	/* O_TMPFILE has O_DIRECTORY's bit: a new regular file, though. */
	bool content = !(flags & O_PATH) &&
		       (!(flags & O_DIRECTORY) ||
			(flags & O_TMPFILE) == O_TMPFILE);
	/* O_CREAT | O_EXCL makes a regular file or fails: nothing to fear. */
	bool made = (flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL);
	int fd = -1, err;

	/*
	 * A symlink last is ELOOP like any other (RESOLVE_NO_SYMLINKS),
	 * but for an O_PATH open of an object, which may be a symlink
	 * itself: O_NOFOLLOW gives that symlink. Not for a directory,
	 * where it would make a symlink ENOTDIR rather than ELOOP.
	 */
	if ((flags & O_PATH) && !(flags & O_DIRECTORY))
		how.flags |= O_NOFOLLOW;
	/*
	 * A user may put a fifo (or a socket, or a link to a device node)
	 * where the cache has a file: an open of it for content would wait
	 * for a peer that never comes -- the event loop, or the worker,
	 * with it -- and a device's open may do things. O_NONBLOCK opens a
	 * fifo at once (or fails ENXIO, as a socket does), O_NOCTTY takes
	 * no terminal, and content_fd() refuses all but a regular file.
	 */
	if (!(flags & O_PATH) && !made)
		how.flags |= O_NONBLOCK | O_NOCTTY;
	if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
		how.mode = mode;
	/* EAGAIN: a rename raced the lookup (RESOLVE_BENEATH): again. */
	for (int tries = 0; tries < 16; tries++) {
		fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
		if (fd >= 0 || errno != EAGAIN)
			break;
	}
	if (fd < 0)
		return content && errno == ENXIO ? -CACHE_ENOTREG : -errno;
	if (content && !made && (err = content_fd(fd, flags)))
		return err;
	return fd;
}

int cache_open_obj(struct cache *c, const char *path, int flags, mode_t mode)
{
	return cache_beneath(c->dirfd, path, flags, mode);
}

int cache_parent(struct cache *c, const char *path, const char **name)
{
	const char *slash = strrchr(path, '/');
	const char *last = slash ? slash + 1 : path;
	char dir[CACHE_PATH_MAX];

	/* A name in that directory, not a way out of it. */
	if (!*last || !strcmp(last, ".") || !strcmp(last, ".."))
		return -EINVAL;
	*name = last;
	if (!slash)
		return c->dirfd;
	if ((size_t)(slash - path) >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, path, slash - path);
	dir[slash - path] = '\0';
	return cache_beneath(c->dirfd, dir, O_PATH | O_DIRECTORY, 0);
}

void cache_parent_put(struct cache *c, int fd)
{
	if (fd >= 0 && fd != c->dirfd)
		close(fd);
}

const char *cache_strerror(int err)
{
	if (err == -ELOOP)
		return "a symlink stands where the cache has a directory "
		       "(changed behind lento's back; the journal will say "
		       "how)";
	if (err == -CACHE_ENOTREG)
		return "a fifo, socket or device stands where the cache has "
		       "a regular file (changed behind lento's back; the "
		       "journal will say how)";
	return strerror(err < 0 ? -err : err);
}

int cache_lstat(struct cache *c, const char *path, struct stat *sb)
{
	const char *name;
	int pfd = cache_parent(c, path, &name), err = 0;

	if (pfd < 0)
		return pfd;
	if (fstatat(pfd, name, sb, AT_SYMLINK_NOFOLLOW))
		err = -errno;
	cache_parent_put(c, pfd);
	return err;
}

int cache_unlink(struct cache *c, const char *path, int flags)
{
	const char *name;
	int pfd = cache_parent(c, path, &name), err = 0;

	if (pfd < 0)
		return pfd;
	if (unlinkat(pfd, name, flags))
		err = -errno;
	cache_parent_put(c, pfd);
	return err;
}

int cache_mkdir(struct cache *c, const char *path, mode_t mode)
{
	const char *name;
	int pfd = cache_parent(c, path, &name), err = 0;

	if (pfd < 0)
		return pfd;
	if (mkdirat(pfd, name, mode))
		err = -errno;
	cache_parent_put(c, pfd);
	return err;
}

int cache_symlink(struct cache *c, const char *target, const char *path)
{
	const char *name;
	int pfd = cache_parent(c, path, &name), err = 0;

	if (pfd < 0)
		return pfd;
	if (symlinkat(target, pfd, name))
		err = -errno;
	cache_parent_put(c, pfd);
	return err;
}

static int cache_mknod(struct cache *c, const char *path, mode_t mode,
		       dev_t dev)
{
	const char *name;
	int pfd = cache_parent(c, path, &name), err = 0;

	if (pfd < 0)
		return pfd;
	if (mknodat(pfd, name, mode, dev))
		err = -errno;
	cache_parent_put(c, pfd);
	return err;
}

/* @from and @to's parents, for a call on two names. */
static int parents2(struct cache *c, const char *from, const char *to,
		    int *pf, const char **nf, int *pt, const char **nt)
{
	*pf = cache_parent(c, from, nf);
	if (*pf < 0)
		return *pf;
	*pt = cache_parent(c, to, nt);
	if (*pt < 0) {
		cache_parent_put(c, *pf);
		return *pt;
	}
	return 0;
}

int cache_rename(struct cache *c, const char *from, const char *to,
		 unsigned int flags)
{
	const char *nf, *nt;
	int pf, pt, err = parents2(c, from, to, &pf, &nf, &pt, &nt);

	if (err)
		return err;
	if (flags ? renameat2(pf, nf, pt, nt, flags) : renameat(pf, nf, pt, nt))
		err = -errno;
	cache_parent_put(c, pf);
	cache_parent_put(c, pt);
	return err;
}

int cache_hardlink(struct cache *c, const char *from, const char *to)
{
	const char *nf, *nt;
	int pf, pt, err = parents2(c, from, to, &pf, &nf, &pt, &nt);

	if (err)
		return err;
	/* No AT_SYMLINK_FOLLOW: a symlink at @from is linked, not its target. */
	if (linkat(pf, nf, pt, nt, 0))
		err = -errno;
	cache_parent_put(c, pf);
	cache_parent_put(c, pt);
	return err;
}

/*
 * The path the l*xattr calls take for @name in the directory @pfd: the
 * directory by its descriptor, the name not followed.
 */
static void xattr_at(int pfd, const char *name, char *out, size_t size)
{
	snprintf(out, size, "/proc/self/fd/%d/%s", pfd, name);
}

/* The same for the object @fd (O_PATH will do) itself, for *xattr(). */
static void xattr_fd(int fd, char *out, size_t size)
{
	snprintf(out, size, "/proc/self/fd/%d", fd);
}

ssize_t cache_getxattr(struct cache *c, const char *path, const char *xname,
		       void *buf, size_t size)
{
	char p[CACHE_PATH_MAX + 40];
	const char *name;
	int pfd = cache_parent(c, path, &name);
	ssize_t n;

	if (pfd < 0)
		return pfd;
	xattr_at(pfd, name, p, sizeof(p));
	n = lgetxattr(p, xname, buf, size);
	if (n < 0)
		n = -errno;
	cache_parent_put(c, pfd);
	return n;
}

int cache_setxattr(struct cache *c, const char *path, const char *xname,
		   const void *value, size_t size)
{
	char p[CACHE_PATH_MAX + 40];
	const char *name;
	int pfd = cache_parent(c, path, &name), err = 0;

	if (pfd < 0)
		return pfd;
	xattr_at(pfd, name, p, sizeof(p));
	if (lsetxattr(p, xname, value, size, 0))
		err = -errno;
	cache_parent_put(c, pfd);
	return err;
}

int cache_removexattr(struct cache *c, const char *path, const char *xname)
{
	char p[CACHE_PATH_MAX + 40];
	const char *name;
	int pfd = cache_parent(c, path, &name), err = 0;

	if (pfd < 0)
		return pfd;
	xattr_at(pfd, name, p, sizeof(p));
	if (lremovexattr(p, xname))
		err = -errno;
	cache_parent_put(c, pfd);
	return err;
}

/*
 * Through /proc/self/fd/N the object @fd was opened on is reached itself
 * (a symlink too: the magic link is not followed further), whatever its
 * names are now; fsetxattr() would refuse an O_PATH descriptor.
 */
ssize_t cache_fgetxattr(int fd, const char *xname, void *buf, size_t size)
{
	char p[40];
	ssize_t n;

	xattr_fd(fd, p, sizeof(p));
	n = getxattr(p, xname, buf, size);
	return n < 0 ? -errno : n;
}

int cache_fsetxattr(int fd, const char *xname, const void *value,
		    size_t size)
{
	char p[40];

	xattr_fd(fd, p, sizeof(p));
	return setxattr(p, xname, value, size, 0) ? -errno : 0;
}

int cache_fremovexattr(int fd, const char *xname)
{
	char p[40];

	xattr_fd(fd, p, sizeof(p));
	return removexattr(p, xname) ? -errno : 0;
}

int cache_fd_handle(int fd, struct file_handle *fh, int *mount_id)
{
	return name_to_handle_at(fd, "", fh, mount_id, AT_EMPTY_PATH) ?
	       -errno : 0;
}

int cache_name_to_handle(struct cache *c, const char *path,
			 struct file_handle *fh, int *mount_id)
{
	int fd = cache_open_obj(c, path, O_PATH, 0), err;

	if (fd < 0)
		return fd;
	err = cache_fd_handle(fd, fh, mount_id);
	close(fd);
	return err;
}

int cache_begin(struct cache *c)
{
	return sql_err(sqlite3_exec(c->db, "BEGIN IMMEDIATE", NULL, NULL,
				    NULL));
}

int cache_commit_lazy(struct cache *c)
{
	int e = fault_at("cache-commit") ? -EIO :
		sql_err(sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL));

	if (e)
		cache_rollback(c);
	else
		c->gen++;
	return e;
}

/*
 * Committed, and then durable or not: an error here does not undo the
 * transaction (it is in the WAL), it says the cache cannot promise it.
 */
int cache_commit(struct cache *c)
{
	int e = cache_commit_lazy(c);

	return e ?: cache_sync(c);
}

int cache_sync(struct cache *c)
{
	if (!c->sync_err)
		cache_synced(c, c->gen, fault_at("cache-sync") ? -EIO :
			     fdatasync(c->walfd) ? -errno : 0);
	return c->sync_err;
}

uint64_t cache_gen(const struct cache *c)
{
	return c->gen;
}

uint64_t cache_durable_gen(const struct cache *c)
{
	return c->durable;
}

int cache_sync_fd(const struct cache *c)
{
	return c->walfd;
}

void cache_synced(struct cache *c, uint64_t gen, int err)
{
	if (err) {
		/* The pages that failed may be clean now, and lost. */
		if (!c->sync_err)
			c->sync_err = err;
		return;
	}
	if (!c->sync_err && gen > c->durable)
		c->durable = gen;
}

int cache_sync_error(const struct cache *c)
{
	return c->sync_err;
}

void cache_rollback(struct cache *c)
{
	if (!sqlite3_get_autocommit(c->db))
		sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
}

bool cache_read_begin(struct cache *c)
{
	return sqlite3_get_autocommit(c->db) &&
	       sqlite3_exec(c->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK;
}

void cache_read_end(struct cache *c, bool began)
{
	/* Nothing written: its end cannot lose anything. */
	if (began && sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL))
		cache_rollback(c);
}

int cache_meta_get(struct cache *c, const char *key, int64_t *v)
{
	sqlite3_bind_text(stmt(c, S_META_GET), 1, key, -1, SQLITE_STATIC);
	return count(c, S_META_GET, v);
}

int cache_meta_set(struct cache *c, const char *key, int64_t v)
{
	sqlite3_stmt *st = stmt(c, S_META_SET);

	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, v);
	return run(c, S_META_SET);
}

/* ---------------------------------------------------------- quarantine */

int cache_quarantine_put(struct cache *c, uint32_t volume, uint64_t seq,
			 uint16_t op, int err, const char *why,
			 int64_t at_ms, const void *rec, size_t len)
{
	sqlite3_stmt *st = stmt(c, S_QUAR_PUT);

	if (len > INT32_MAX || seq > INT64_MAX)
		return -EINVAL;
	sqlite3_bind_int64(st, 1, volume);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)seq);
	sqlite3_bind_int(st, 3, op);
	sqlite3_bind_int(st, 4, err < 0 ? -err : err);
	sqlite3_bind_text(st, 5, why, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 6, at_ms);
	sqlite3_bind_blob(st, 7, rec ? rec : "", (int)len, SQLITE_TRANSIENT);
	return run(c, S_QUAR_PUT);
}

int cache_quarantine_count(struct cache *c, uint32_t volume, uint64_t *n,
			   uint64_t *last_seq, char *why, size_t why_size)
{
	sqlite3_stmt *st = stmt(c, S_QUAR_COUNT);
	int64_t v = 0;
	int err, rc;

	sqlite3_bind_int64(st, 1, volume);
	err = count(c, S_QUAR_COUNT, &v);
	if (err)
		return err;
	*n = (uint64_t)v;
	*last_seq = 0;
	if (why_size)
		why[0] = 0;
	if (!v)
		return 0;
	st = stmt(c, S_QUAR_LAST);
	sqlite3_bind_int64(st, 1, volume);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const unsigned char *t = sqlite3_column_text(st, 1);

		*last_seq = (uint64_t)sqlite3_column_int64(st, 0);
		if (why_size)
			snprintf(why, why_size, "%s", t ? (const char *)t : "");
		rc = SQLITE_DONE;
	}
	reset(c, S_QUAR_LAST);
	return sql_err(rc);
}

int cache_quarantine_each(struct cache *c, int64_t volume, cache_quar_fn fn,
			  void *arg)
{
	sqlite3_stmt *st = stmt(c, S_QUAR_EACH);
	int rc, err = 0;

	sqlite3_bind_int64(st, 1, volume);
	while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		const unsigned char *why = sqlite3_column_text(st, 4);
		struct cache_quar q = {
			.volume = (uint32_t)sqlite3_column_int64(st, 0),
			.seq = (uint64_t)sqlite3_column_int64(st, 1),
			.op = (uint16_t)sqlite3_column_int(st, 2),
			.err = sqlite3_column_int(st, 3),
			.why = why ? (const char *)why : "",
			.at_ms = sqlite3_column_int64(st, 5),
			.len = (size_t)sqlite3_column_int64(st, 6),
		};

		err = fn(arg, &q);
	}
	if (!err && rc != SQLITE_DONE)
		err = sql_err(rc);
	reset(c, S_QUAR_EACH);
	return err;
}

/* "VOLUME.SEQ." and a number of 32 bits, NUL: a kept file's name. */
#define QUAR_NAME_MAX	48

/* A file kept for a record set aside: its name, its I, its size. */
struct quar_file {
	char name[QUAR_NAME_MAX];
	uint32_t i;
	uint64_t size;
};

struct quar_files {
	struct quar_file *f;
	size_t n, cap;
};

/*
 * Is @name exactly @prefix ("VOLUME.SEQ.") then I, a number as
 * keep_aside() writes it (decimal digits, no sign, no leading zero, 32
 * bits)? I in *@i. "12.2.0", "1.20.0" and "1.2.x" are not 1.2's.
 */
static bool quar_name_is(const char *name, const char *prefix, size_t plen,
			 uint32_t *i)
{
	const char *p = name + plen;
	uint64_t v = 0;

	if (strncmp(name, prefix, plen) || !*p || (p[0] == '0' && p[1]))
		return false;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		v = v * 10 + (uint64_t)(*p - '0');
		if (v > UINT32_MAX)
			return false;
	}
	*i = (uint32_t)v;
	return true;
}

static int quar_add(struct quar_files *fl, const char *name, uint32_t i,
		    uint64_t size)
{
	size_t len = strlen(name);
	struct quar_file *f;

	if (len >= sizeof(f->name))	/* quar_name_is() bounds it */
		return -ENAMETOOLONG;
	f = array_grow(fl->f, &fl->cap, fl->n, 1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	fl->f = f;
	f = &fl->f[fl->n++];
	memcpy(f->name, name, len + 1);
	f->i = i;
	f->size = size;
	return 0;
}

static int quar_by_i(const void *a, const void *b)
{
	const struct quar_file *x = a, *y = b;

	return x->i < y->i ? -1 : x->i > y->i;
}

/* The files of @d (the quarantine directory) kept for @seq of @volume. */
static int quar_scan(DIR *d, uint32_t volume, uint64_t seq,
		     struct quar_files *fl)
{
	char prefix[QUAR_NAME_MAX];
	size_t plen = (size_t)snprintf(prefix, sizeof(prefix), "%" PRIu32
				       ".%" PRIu64 ".", volume, seq);
	struct dirent *de;
	int err = 0;

	errno = 0;
	while (!err && (de = readdir(d))) {
		struct stat sb;
		uint32_t i;

		if (!quar_name_is(de->d_name, prefix, plen, &i))
			continue;
		if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW))
			err = errno == ENOENT ? 0 : -errno;
		else
			err = quar_add(fl, de->d_name, i, (uint64_t)sb.st_size);
		errno = 0;
	}
	if (!err && errno)
		err = -errno;
	if (!err && fl->n)
		qsort(fl->f, fl->n, sizeof(*fl->f), quar_by_i);
	return err;
}

/* CACHE_QUARANTINE_DIR, to read: 0 and *@d, or -errno. */
static int quar_open(struct cache *c, DIR **d)
{
	int fd = cache_open_obj(c, CACHE_QUARANTINE_DIR,
				O_RDONLY | O_DIRECTORY, 0);

	if (fd < 0)
		return fd;
	*d = fdopendir(fd);
	if (!*d) {
		int err = -errno;

		close(fd);
		return err;
	}
	return 0;
}

int cache_quarantine_files(struct cache *c, uint32_t volume, uint64_t seq,
			   cache_quar_file_fn fn, void *arg)
{
	struct quar_files fl = { 0 };
	DIR *d;
	int err = quar_open(c, &d);

	if (err)
		return err == -ENOENT ? 0 : err;
	err = quar_scan(d, volume, seq, &fl);
	closedir(d);
	for (size_t k = 0; !err && k < fl.n; k++)
		err = fn(arg, fl.f[k].name, fl.f[k].size);
	free(fl.f);
	return err;
}

/* The files kept for @seq of @volume unlinked, for good (the dir synced). */
static int quar_unlink(struct cache *c, uint32_t volume, uint64_t seq,
		       unsigned int *n)
{
	struct quar_files fl = { 0 };
	DIR *d;
	int err = quar_open(c, &d);

	if (err)
		return err == -ENOENT ? 0 : err;
	err = quar_scan(d, volume, seq, &fl);
	for (size_t k = 0; !err && k < fl.n; k++) {
		if (!unlinkat(dirfd(d), fl.f[k].name, 0))
			(*n)++;
		else if (errno != ENOENT)
			err = -errno;
	}
	if (!err && *n && fsync(dirfd(d)))
		err = -errno;
	closedir(d);
	free(fl.f);
	return err;
}

/*
 * The files go first, the row after. A crash (or a failure) between the
 * two leaves the row without its files: cache_quarantine_each() still
 * shows it, and a drop again removes it. The other order would leave
 * files no row names, which no listing shows and no drop reaches.
 */
int cache_quarantine_drop(struct cache *c, uint32_t volume, uint64_t seq,
			  unsigned int *nfiles)
{
	sqlite3_stmt *st = stmt(c, S_QUAR_HAS);
	int64_t has = 0;
	int err;

	*nfiles = 0;
	if (seq > INT64_MAX)
		return -ENOENT;
	sqlite3_bind_int64(st, 1, volume);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)seq);
	err = count(c, S_QUAR_HAS, &has);
	if (err)
		return err;
	if (!has)
		return -ENOENT;
	err = quar_unlink(c, volume, seq, nfiles);
	if (err)
		return err;
	err = cache_begin(c);
	if (err)
		return err;
	st = stmt(c, S_QUAR_DEL);
	sqlite3_bind_int64(st, 1, volume);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)seq);
	err = run(c, S_QUAR_DEL);
	if (err) {
		cache_rollback(c);
		return err;
	}
	return cache_commit(c);
}

/* ------------------------------------------------------------- volumes */

bool cache_volname_ok(const char *name)
{
	size_t len = strlen(name);

	if (!len || len > LENTO_VOLNAME_MAX || !strcmp(name, ".") ||
	    !strcmp(name, "..") || !strcmp(name, ".lento"))
		return false;
	for (size_t i = 0; i < len; i++)
		if (name[i] < 0x20 || name[i] > 0x7e || name[i] == '/')
			return false;
	return true;
}

int cache_vol_put(struct cache *c, const struct cache_vol *v)
{
	sqlite3_stmt *st = stmt(c, S_VOL_PUT);

	sqlite3_bind_int64(st, 1, v->id);
	sqlite3_bind_text(st, 2, v->name, -1, SQLITE_TRANSIENT);
	bind_fid(st, 3, &v->root);
	sqlite3_bind_int64(st, 4, (sqlite3_int64)v->stamp);
	sqlite3_bind_int64(st, 5, (sqlite3_int64)v->applied);
	return run(c, S_VOL_PUT);
}

static int col_vol(sqlite3_stmt *st, struct cache_vol *v)
{
	const unsigned char *name = sqlite3_column_text(st, 1);

	memset(v, 0, sizeof(*v));
	v->id = (uint32_t)sqlite3_column_int64(st, 0);
	if (!name || strlen((const char *)name) > LENTO_VOLNAME_MAX)
		return -EUCLEAN;
	strcpy(v->name, (const char *)name);
	v->stamp = (uint64_t)sqlite3_column_int64(st, 3);
	v->applied = (uint64_t)sqlite3_column_int64(st, 4);
	return col_fid(st, 2, &v->root);
}

static int vol_one(struct cache *c, enum stmt s, struct cache_vol *v)
{
	int rc = sqlite3_step(stmt(c, s));
	int err = rc == SQLITE_ROW ? col_vol(stmt(c, s), v) :
		  rc == SQLITE_DONE ? -ENOENT : sql_err(rc);

	reset(c, s);
	return err;
}

int cache_vol_get(struct cache *c, uint32_t id, struct cache_vol *v)
{
	sqlite3_bind_int64(stmt(c, S_VOL_GET), 1, id);
	return vol_one(c, S_VOL_GET, v);
}

int cache_vol_find(struct cache *c, const char *name, struct cache_vol *v)
{
	sqlite3_bind_text(stmt(c, S_VOL_FIND), 1, name, -1, SQLITE_TRANSIENT);
	return vol_one(c, S_VOL_FIND, v);
}

int cache_vol_list(struct cache *c, cache_vol_fn fn, void *arg)
{
	sqlite3_stmt *st = stmt(c, S_VOL_LIST);
	struct cache_vol v;
	int rc, err = 0;

	while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		err = col_vol(st, &v);
		if (!err)
			err = fn(arg, &v);
	}
	if (!err && rc != SQLITE_DONE)
		err = sql_err(rc);
	reset(c, S_VOL_LIST);
	return err;
}

/* ------------------------------------------------------------- objects */

static int col_obj(sqlite3_stmt *st, struct cache_obj *o, char *target,
		   size_t target_size)
{
	struct lento_attr *a = &o->attr;
	int err;

	memset(o, 0, sizeof(*o));
	err = col_fid(st, 0, &o->fid);
	o->type = (uint8_t)sqlite3_column_int(st, 1);
	o->nlink = (uint32_t)sqlite3_column_int64(st, 2);
	a->valid = (uint32_t)sqlite3_column_int64(st, 3);
	a->mode = (uint32_t)sqlite3_column_int64(st, 4);
	a->uid = (uint32_t)sqlite3_column_int64(st, 5);
	a->gid = (uint32_t)sqlite3_column_int64(st, 6);
	a->size = (uint64_t)sqlite3_column_int64(st, 7);
	a->atime_ns = sqlite3_column_int64(st, 8);
	a->mtime_ns = sqlite3_column_int64(st, 9);
	a->ctime_ns = sqlite3_column_int64(st, 10);
	a->rdev = (uint64_t)sqlite3_column_int64(st, 11);
	err = err ?: col_vv(st, 12, &o->vv);
	o->valid = sqlite3_column_int(st, 13);
	o->data = sqlite3_column_int(st, 14);
	o->dirty = sqlite3_column_int(st, 15) > 0;
	o->used_ms = sqlite3_column_int64(st, 16);
	if (target && target_size) {
		const void *t = sqlite3_column_blob(st, 17);
		size_t len = (size_t)sqlite3_column_bytes(st, 17);

		if (len >= target_size)
			return -ENAMETOOLONG;
		if (len)
			memcpy(target, t, len);
		target[len] = 0;
	}
	return err;
}

int cache_obj_get(struct cache *c, const struct lento_fid *fid,
		  struct cache_obj *o, char *target, size_t target_size)
{
	sqlite3_stmt *st = stmt(c, S_OBJ_GET);
	int rc, err;

	bind_fid(st, 1, fid);
	rc = sqlite3_step(st);
	err = rc == SQLITE_ROW ? col_obj(st, o, target, target_size) :
	      rc == SQLITE_DONE ? -ENOENT : sql_err(rc);
	reset(c, S_OBJ_GET);
	return err;
}

static int obj_put(struct cache *c, const struct cache_obj *o,
		   const char *target, size_t target_len, int dirty_delta)
{
	sqlite3_stmt *st = stmt(c, S_OBJ_PUT);
	const struct lento_attr *a = &o->attr;

	sqlite3_bind_int64(st, 1, o->fid.volume);
	bind_fid(st, 2, &o->fid);
	sqlite3_bind_int(st, 3, o->type);
	sqlite3_bind_int64(st, 4, o->nlink);
	sqlite3_bind_int64(st, 5, a->valid);
	sqlite3_bind_int64(st, 6, a->mode);
	sqlite3_bind_int64(st, 7, a->uid);
	sqlite3_bind_int64(st, 8, a->gid);
	sqlite3_bind_int64(st, 9, (sqlite3_int64)a->size);
	sqlite3_bind_int64(st, 10, a->atime_ns);
	sqlite3_bind_int64(st, 11, a->mtime_ns);
	sqlite3_bind_int64(st, 12, a->ctime_ns);
	sqlite3_bind_int64(st, 13, (sqlite3_int64)a->rdev);
	bind_vv(st, 14, &o->vv);
	sqlite3_bind_int(st, 15, o->valid);
	sqlite3_bind_int(st, 16, o->data);
	sqlite3_bind_int(st, 17, dirty_delta);
	sqlite3_bind_int64(st, 18, o->used_ms);
	if (target)
		sqlite3_bind_blob(st, 19, target, (int)target_len,
				  SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, 19);
	return run(c, S_OBJ_PUT);
}

int cache_obj_put(struct cache *c, const struct cache_obj *o,
		  const char *target, size_t target_len)
{
	return obj_put(c, o, target, target_len, 0);
}

int cache_obj_put_dirty(struct cache *c, const struct cache_obj *o,
			int dirty_delta)
{
	return obj_put(c, o, NULL, 0, dirty_delta);
}

static int fid_run(struct cache *c, enum stmt s, const struct lento_fid *fid)
{
	bind_fid(stmt(c, s), 1, fid);
	return run(c, s);
}

static int unmark_one(void *arg, int type, const void *handle, size_t len);

int cache_obj_del(struct cache *c, const struct lento_fid *fid)
{
	/*
	 * A mark that did not come off keeps its handle's row: the inode,
	 * recorded, is then never taken for a crash's leftover (it names
	 * an object the rows no longer have, as another object's inode).
	 */
	bool unmarked = !cache_handles(c, fid, unmark_one, c);

	return fid_run(c, S_OBJ_DEL, fid) ?:
	       fid_run(c, S_OBJ_DEL_NAMES, fid) ?:
	       (unmarked ? fid_run(c, S_OBJ_DEL_HANDLES, fid) : 0);
}

struct fid_stack {
	struct lento_fid *f;
	size_t n, cap;
};

static int fid_push(void *arg, const char *name, const struct lento_fid *fid)
{
	struct fid_stack *s = arg;
	struct lento_fid *p = array_grow(s->f, &s->cap, s->n, 1, sizeof(*p));

	(void)name;
	if (!p)
		return -ENOMEM;
	s->f = p;
	s->f[s->n++] = *fid;
	return 0;
}

int cache_obj_del_tree(struct cache *c, const struct lento_fid *fid)
{
	struct fid_stack s = { 0 };
	int err = fid_push(&s, NULL, fid);

	while (!err && s.n) {
		struct lento_fid f = s.f[--s.n];
		size_t kids = s.n;
		struct cache_obj o;

		/*
		 * Never a volume's root (a broken cache's cycle), nor what
		 * has changes to reintegrate (a broken cache's, or a row
		 * gone while its tree stayed): its rows stay.
		 */
		if (lento_fid_eq(&f, &LENTO_ROOT_FID(f.volume)))
			continue;
		err = cache_obj_get(c, &f, &o, NULL, 0);
		if (!err && o.dirty)
			continue;
		err = err == -ENOENT ? 0 : err;
		/* Its entries, then it and its names there go... */
		err = err ?: cache_readdir(c, &f, fid_push, &s);
		err = err ?: cache_obj_del(c, &f);
		if (!err)
			cache_names_drop(c, &f);
		/* ... and an entry with no name left goes next. */
		for (size_t i = kids; !err && i < s.n;) {
			int n = cache_name_count(c, &s.f[i]);

			if (n < 0)
				err = n;
			else if (n)
				s.f[i] = s.f[--s.n];
			else
				i++;
		}
	}
	free(s.f);
	return err;
}

int cache_obj_set_state(struct cache *c, const struct lento_fid *fid,
			bool valid, bool data)
{
	sqlite3_stmt *st = stmt(c, S_OBJ_STATE);

	bind_fid(st, 1, fid);
	sqlite3_bind_int(st, 2, valid);
	sqlite3_bind_int(st, 3, data);
	return run(c, S_OBJ_STATE);
}

int cache_obj_set_vv(struct cache *c, const struct lento_fid *fid,
		     const struct lento_vv *vv, bool stale)
{
	sqlite3_stmt *st = stmt(c, S_OBJ_VV);
	int rc, valid = 0;

	bind_fid(st, 1, fid);
	bind_vv(st, 2, vv);
	sqlite3_bind_int(st, 3, stale);
	/* RETURNING: the change is made whole at the first step. */
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		valid = sqlite3_column_int(st, 0);
	reset(c, S_OBJ_VV);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return sql_err(rc);
	return rc == SQLITE_DONE ? 0 : valid ? 1 : 2;
}

int cache_obj_touch(struct cache *c, const struct lento_fid *fid,
		    int64_t used_ms)
{
	sqlite3_stmt *st = stmt(c, S_OBJ_TOUCH);

	bind_fid(st, 1, fid);
	sqlite3_bind_int64(st, 2, used_ms);
	return run(c, S_OBJ_TOUCH);
}

/* Each object a statement yields, to @fn, until it returns non-zero. */
static int obj_rows(struct cache *c, enum stmt s, cache_obj_fn fn, void *arg)
{
	sqlite3_stmt *st = stmt(c, s);
	struct cache_obj o;
	int rc, err = 0;

	while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		err = col_obj(st, &o, NULL, 0);
		if (!err)
			err = fn(arg, &o);
	}
	if (!err && rc != SQLITE_DONE)
		err = sql_err(rc);
	reset(c, s);
	return err;
}

int cache_obj_walk(struct cache *c, uint32_t volume, cache_obj_fn fn,
		   void *arg)
{
	sqlite3_bind_int64(stmt(c, S_OBJ_WALK), 1, volume);
	return obj_rows(c, S_OBJ_WALK, fn, arg);
}

int cache_dirty_clear(struct cache *c, uint32_t volume)
{
	sqlite3_bind_int64(stmt(c, S_DIRTY_CLEAR), 1, volume);
	return run(c, S_DIRTY_CLEAR);
}

int cache_dirty_add(struct cache *c, const struct lento_fid *fid, int delta)
{
	sqlite3_stmt *st = stmt(c, S_DIRTY_ADD);

	bind_fid(st, 1, fid);
	sqlite3_bind_int(st, 2, delta);
	return run(c, S_DIRTY_ADD);
}

static void names_purge(struct cache *c, uint32_t volume);
static int unmark_one(void *arg, int type, const void *handle, size_t len);

/* Each (type, handle) row of statement @s, bound already, to @fn. */
static int handle_rows(struct cache *c, enum stmt s, cache_handle_fn fn,
		       void *arg)
{
	sqlite3_stmt *st = stmt(c, s);
	int rc, err = 0;

	while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW)
		err = fn(arg, sqlite3_column_int(st, 0),
			 sqlite3_column_blob(st, 1),
			 (size_t)sqlite3_column_bytes(st, 1));
	if (!err && rc != SQLITE_DONE)
		err = sql_err(rc);
	reset(c, s);
	return err;
}

/* The marks off the inodes of the objects cache_purge() drops. */
static int purge_unmark(struct cache *c, uint32_t volume)
{
	sqlite3_bind_int64(stmt(c, S_PURGE_HANDLES_OF), 1, volume);
	return handle_rows(c, S_PURGE_HANDLES_OF, unmark_one, c);
}

int cache_purge(struct cache *c, uint32_t volume)
{
	int err;

	names_purge(c, volume);
	/* As in cache_obj_del(): not unmarked, the handles stay. */
	if (!purge_unmark(c, volume)) {
		sqlite3_bind_int64(stmt(c, S_PURGE_HANDLES), 1, volume);
		err = run(c, S_PURGE_HANDLES);
		if (err)
			return err;
	}
	sqlite3_bind_int64(stmt(c, S_PURGE), 1, volume);
	return run(c, S_PURGE);
}

/* ------------------------------------------------------------ listings */

int cache_lookup(struct cache *c, const struct lento_fid *dir,
		 const char *name, struct lento_fid *fid)
{
	sqlite3_stmt *st = stmt(c, S_LOOKUP);
	int rc, err;

	bind_fid(st, 1, dir);
	bind_name(st, 2, name);
	rc = sqlite3_step(st);
	err = rc == SQLITE_ROW ? col_fid(st, 0, fid) :
	      rc == SQLITE_DONE ? -ENOENT : sql_err(rc);
	reset(c, S_LOOKUP);
	return err;
}

int cache_dirent_put(struct cache *c, const struct lento_fid *dir,
		     const char *name, const struct lento_fid *fid)
{
	sqlite3_stmt *st = stmt(c, S_DIRENT_PUT);

	bind_fid(st, 1, dir);
	bind_name(st, 2, name);
	bind_fid(st, 3, fid);
	return run(c, S_DIRENT_PUT);
}

int cache_dirent_del(struct cache *c, const struct lento_fid *dir,
		     const char *name)
{
	sqlite3_stmt *st = stmt(c, S_DIRENT_DEL);

	bind_fid(st, 1, dir);
	bind_name(st, 2, name);
	return run(c, S_DIRENT_DEL);
}

int cache_dirents_del(struct cache *c, const struct lento_fid *dir)
{
	bind_fid(stmt(c, S_DIRENTS_DEL), 1, dir);
	return run(c, S_DIRENTS_DEL);
}

int cache_readdir(struct cache *c, const struct lento_fid *dir,
		  cache_dirent_fn fn, void *arg)
{
	sqlite3_stmt *st = stmt(c, S_READDIR);
	char name[LENTO_NAME_MAX + 1];
	struct lento_fid fid;
	int rc, err = 0;

	bind_fid(st, 1, dir);
	while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		err = col_name(st, 0, name) ?: col_fid(st, 1, &fid);
		if (!err)
			err = fn(arg, name, &fid);
	}
	if (!err && rc != SQLITE_DONE)
		err = sql_err(rc);
	reset(c, S_READDIR);
	return err;
}

static int fid_count(struct cache *c, enum stmt s, const struct lento_fid *f)
{
	int64_t n = 0;
	int err;

	bind_fid(stmt(c, s), 1, f);
	err = count(c, s, &n);
	return err ?: (int)(n > INT32_MAX ? INT32_MAX : n);
}

int cache_dir_count(struct cache *c, const struct lento_fid *dir)
{
	return fid_count(c, S_DIR_COUNT, dir);
}

int cache_name_count(struct cache *c, const struct lento_fid *fid)
{
	return fid_count(c, S_NAME_COUNT, fid);
}

int cache_tree_dirty(struct cache *c, const struct lento_fid *dir)
{
	return fid_count(c, S_TREE_DIRTY, dir);
}

int cache_name_of(struct cache *c, const struct lento_fid *fid,
		  struct lento_fid *dir, char name[LENTO_NAME_MAX + 1])
{
	sqlite3_stmt *st = stmt(c, S_NAME_OF);
	int rc, err;

	bind_fid(st, 1, fid);
	rc = sqlite3_step(st);
	err = rc == SQLITE_ROW ? col_fid(st, 0, dir) ?: col_name(st, 1, name) :
	      rc == SQLITE_DONE ? -ENOENT : sql_err(rc);
	reset(c, S_NAME_OF);
	return err;
}

int cache_names(struct cache *c, const struct lento_fid *fid,
		cache_name_fn fn, void *arg)
{
	sqlite3_stmt *st = stmt(c, S_NAMES);
	char name[LENTO_NAME_MAX + 1];
	struct lento_fid dir;
	int rc, err = 0;

	bind_fid(st, 1, fid);
	while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		err = col_fid(st, 0, &dir) ?: col_name(st, 1, name);
		if (!err)
			err = fn(arg, &dir, name);
	}
	if (!err && rc != SQLITE_DONE)
		err = sql_err(rc);
	reset(c, S_NAMES);
	return err;
}

/* Prepend "/@name" (or "@name" at the very front) to the path at @pos. */
static int prepend(char *buf, size_t *pos, const char *name, bool slash)
{
	size_t len = strlen(name) + slash;

	if (len > *pos)
		return -ENAMETOOLONG;
	*pos -= len;
	memcpy(buf + *pos, name, strlen(name));
	if (slash)
		buf[*pos + len - 1] = '/';
	return 0;
}

int cache_path(struct cache *c, const struct lento_fid *fid, char *buf,
	       size_t size)
{
	char name[LENTO_NAME_MAX + 1];
	struct lento_fid cur = *fid, dir;
	struct cache_vol v;
	size_t pos;
	int err, depth;

	if (size < 2)
		return -ENAMETOOLONG;
	err = cache_vol_get(c, fid->volume, &v);
	if (err)
		return err;
	pos = size - 1;
	buf[pos] = 0;
	for (depth = 0; !lento_fid_eq(&cur, &v.root); depth++) {
		if (depth == PATH_DEPTH_MAX)
			return -ELOOP;
		err = cache_name_of(c, &cur, &dir, name);
		if (err)
			return err;
		/* The first name written has no slash after it. */
		err = prepend(buf, &pos, name, pos != size - 1);
		if (err)
			return err;
		cur = dir;
	}
	err = prepend(buf, &pos, v.name, pos != size - 1);
	if (err)
		return err;
	memmove(buf, buf + pos, size - pos);
	return 0;
}

int cache_path_near(struct cache *c, const struct lento_fid *fid,
		    struct cache_path_memo *m, char *buf, size_t size)
{
	char name[LENTO_NAME_MAX + 1];
	struct lento_fid dir;
	int err = cache_name_of(c, fid, &dir, name), n;

	/* A root has no name: its path is the volume's. */
	if (err == -ENOENT)
		return cache_path(c, fid, buf, size);
	if (err)
		return err;
	if (!m->known || !lento_fid_eq(&m->dir, &dir)) {
		m->known = false;
		err = cache_path(c, &dir, m->path, sizeof(m->path));
		if (err)
			return err;
		m->dir = dir;
		m->known = true;
	}
	n = snprintf(buf, size, "%s/%s", m->path, name);
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* ----------------------------------------------------- shipped numbers */

int cache_ship_add(struct cache *c, uint32_t volume, uint64_t shipno,
		   uint64_t recno)
{
	sqlite3_stmt *st = stmt(c, S_SHIP_ADD);

	sqlite3_bind_int64(st, 1, volume);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)shipno);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)recno);
	return run(c, S_SHIP_ADD);
}

int cache_ship_of(struct cache *c, uint32_t volume, uint64_t recno,
		  uint64_t *shipno)
{
	sqlite3_stmt *st = stmt(c, S_SHIP_OF);
	int64_t v = 0;
	int err;

	sqlite3_bind_int64(st, 1, volume);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)recno);
	err = count(c, S_SHIP_OF, &v);
	*shipno = (uint64_t)v;
	return err;
}

static sqlite3_int64 clamp64(uint64_t v)
{
	return v > INT64_MAX ? INT64_MAX : (sqlite3_int64)v;
}

int cache_ship_recno_upto(struct cache *c, uint32_t volume, uint64_t shipno,
			  uint64_t *recno)
{
	sqlite3_stmt *st = stmt(c, S_SHIP_UPTO);
	int64_t v = 0;
	int err;

	sqlite3_bind_int64(st, 1, volume);
	sqlite3_bind_int64(st, 2, clamp64(shipno));
	err = count(c, S_SHIP_UPTO, &v);
	*recno = (uint64_t)v;
	return err;
}

int cache_ship_drop(struct cache *c, uint32_t volume, uint64_t shipno)
{
	sqlite3_stmt *st = stmt(c, S_SHIP_DROP);

	sqlite3_bind_int64(st, 1, volume);
	sqlite3_bind_int64(st, 2, clamp64(shipno));
	return run(c, S_SHIP_DROP);
}

int cache_ship_count(struct cache *c, uint32_t volume)
{
	int64_t n = 0;
	int err;

	sqlite3_bind_int64(stmt(c, S_SHIP_COUNT), 1, volume);
	err = count(c, S_SHIP_COUNT, &n);
	return err ?: (int)n;
}

/* ---------------------------------------------------------- statistics */

int cache_stats(struct cache *c, struct cache_stats *out)
{
	sqlite3_stmt *st = stmt(c, S_STATS);
	int rc, err = 0;

	memset(out, 0, sizeof(*out));
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		out->objects = (uint64_t)sqlite3_column_int64(st, 0);
		out->files_cached = (uint64_t)sqlite3_column_int64(st, 1);
		out->bytes = (uint64_t)sqlite3_column_int64(st, 2);
		out->dirty = (uint64_t)sqlite3_column_int64(st, 3);
		out->dirty_bytes = (uint64_t)sqlite3_column_int64(st, 4);
	} else {
		err = sql_err(rc) ?: -EIO;
	}
	reset(c, S_STATS);
	return err;
}

int64_t cache_changes(const struct cache *c)
{
	return sqlite3_total_changes64(c->db);
}

int cache_lru_walk(struct cache *c, cache_obj_fn fn, void *arg)
{
	return obj_rows(c, S_LRU, fn, arg);
}

/* ------------------------------------------------------------- handles */

int cache_handle_update(struct cache *c, const struct lento_fid *fid,
			const char *path)
{
	int fd = cache_open_obj(c, path, O_PATH, 0), err;

	if (fd < 0)
		return fd;
	err = cache_handle_update_fd(c, fid, fd);
	close(fd);
	return err;
}

int cache_handle_update_fd(struct cache *c, const struct lento_fid *fid,
			   int fd)
{
	struct {
		struct file_handle fh;
		unsigned char buf[MAX_HANDLE_SZ];
	} h;
	sqlite3_stmt *st;
	struct stat sb;
	int mount_id, err;

	/* The handle and the inode number of one inode, whatever moves. */
	h.fh.handle_bytes = MAX_HANDLE_SZ;
	err = cache_fd_handle(fd, &h.fh, &mount_id);
	if (!err && fstat(fd, &sb))
		err = -errno;
	if (err)
		return err;
	/*
	 * The handles of inodes it had before stay: presto may still hold
	 * one (an open file, a dentry not yet revalidated) and ask by it.
	 * They go with the object (cache_obj_del, cache_purge).
	 */
	st = stmt(c, S_HANDLE_PUT);
	sqlite3_bind_int(st, 1, h.fh.handle_type);
	sqlite3_bind_blob(st, 2, h.fh.f_handle, (int)h.fh.handle_bytes,
			  SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)sb.st_ino);
	bind_fid(st, 4, fid);
	return run(c, S_HANDLE_PUT);
}

int cache_handle_set(struct cache *c, const struct lento_fid *fid, int type,
		     const void *handle, size_t len, uint64_t ino)
{
	sqlite3_stmt *st = stmt(c, S_HANDLE_PUT);

	if (!len || len > MAX_HANDLE_SZ)
		return -EINVAL;
	sqlite3_bind_int(st, 1, type);
	sqlite3_bind_blob(st, 2, handle, (int)len, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)ino);
	bind_fid(st, 4, fid);
	return run(c, S_HANDLE_PUT);
}

int cache_handles(struct cache *c, const struct lento_fid *fid,
		  cache_handle_fn fn, void *arg)
{
	bind_fid(stmt(c, S_HANDLES_OF), 1, fid);
	return handle_rows(c, S_HANDLES_OF, fn, arg);
}

/* The object whose inode is open as @fd, by its handle: -ENOENT if none. */
static int fd_fid(struct cache *c, int fd, struct lento_fid *fid)
{
	struct {
		struct file_handle fh;
		unsigned char buf[MAX_HANDLE_SZ];
	} h;
	int mount_id, err;

	h.fh.handle_bytes = MAX_HANDLE_SZ;
	err = cache_fd_handle(fd, &h.fh, &mount_id);
	return err ?: cache_handle_lookup(c, h.fh.handle_type, h.fh.f_handle,
					  h.fh.handle_bytes, fid);
}

static bool xattr_unholdable(int err);

/*
 * Every inode lento installs where an unknown inode is not its to replace
 * carries the fid of the object it was made for (its blob, blob.h), in an
 * xattr of presto's (trusted.presto.*: no user sets or reads those
 * through a presto mount), set before it takes its name. Its handle is
 * recorded in the same transaction as the rows that name it; a crash
 * between the two leaves an inode no recorded handle gives. The mark
 * tells that leftover from an inode a user made under the name through
 * presto, which the journal has yet to tell lento of.
 */
static int made_mark(const struct cache *c, int fd,
		     const struct lento_fid *fid)
{
	uint8_t v[FID_BLOB];
	int err;

	if (!c->marks)
		return 0;
	fid_encode(v, fid);
	err = cache_fsetxattr(fd, MADE_XATTR, v, sizeof(v));
	/*
	 * A lento without CAP_SYS_ADMIN, a file system without trusted
	 * xattrs, or no room left for one: unmarked, a crash's leftover is
	 * taken for a user's and left, as it was before marks.
	 */
	return err == -EPERM || xattr_unholdable(-err) ? 0 : err;
}

/*
 * The mark off an inode of an object whose rows go: a user may have
 * renamed it (the journal has yet to say so), and marked, with no handle
 * recorded any more, it would pass for a crash's leftover. An inode no
 * longer there, or unmarked: 0. Not known to be unmarked: -errno, and
 * the caller keeps the handle's row (cache_obj_del()).
 */
static int unmark_one(void *arg, int type, const void *handle, size_t len)
{
	struct cache *c = arg;
	struct {
		struct file_handle fh;
		unsigned char buf[MAX_HANDLE_SZ];
	} h;
	uint8_t v[FID_BLOB];
	ssize_t n;
	int fd, err = 0;

	if (!c->marks || len > MAX_HANDLE_SZ)
		return -EOPNOTSUPP;	/* this run cannot tell */
	h.fh.handle_bytes = (unsigned int)len;
	h.fh.handle_type = type;
	memcpy(h.fh.f_handle, handle, len);
	fd = open_by_handle_at(c->mntfd, &h.fh, O_PATH | O_NOFOLLOW |
			       O_CLOEXEC);
	if (fd < 0)
		return errno == ESTALE || errno == ENOENT ? 0 : -errno;
	n = cache_fgetxattr(fd, MADE_XATTR, v, sizeof(v));
	if (n >= 0)
		err = cache_fremovexattr(fd, MADE_XATTR);
	else if (n != -ENODATA && n != -EOPNOTSUPP)
		err = (int)n;
	close(fd);
	return err == -ENODATA ? 0 : err;
}

int cache_fd_made_for(int fd, struct lento_fid *fid)
{
	uint8_t v[FID_BLOB];
	ssize_t n = cache_fgetxattr(fd, MADE_XATTR, v, sizeof(v));

	if (n == -ENODATA || n == -EOPNOTSUPP || n == -ERANGE)
		return -ENOENT;		/* none */
	if (n < 0)
		return (int)n;
	/* Not a fid's length: not lento's. */
	return fid_decode(v, (size_t)n, fid) ? -ENOENT : 0;
}

/* Has the inode open as @fd not changed since this run began? 1, 0. */
static int earlier_run(const struct cache *c, int fd)
{
	struct stat sb;

	if (fstat(fd, &sb))
		return -errno;
	return sb.st_ctim.tv_sec < c->opened.tv_sec ||
	       (sb.st_ctim.tv_sec == c->opened.tv_sec &&
		sb.st_ctim.tv_nsec < c->opened.tv_nsec);
}

/*
 * An inode no recorded handle gives: lento's own, its handle's row lost
 * to a crash? 0 if so, -ESTALE if not, or -errno. Marked for @fid, it
 * is; marked for another object, if an earlier run left it (an install
 * in place of @fid's inode that never committed). The mark goes when an
 * object's rows go (unmark_one()), so a marked inode without a handle
 * is one whose install never committed.
 */
static int made_lost(const struct cache *c, int fd,
		     const struct lento_fid *fid)
{
	struct lento_fid got;
	int err = cache_fd_made_for(fd, &got);

	if (err)
		return err == -ENOENT ? -ESTALE : err;
	if (fid && lento_fid_eq(&got, fid))
		return 0;
	err = earlier_run(c, fd);
	return err < 0 ? err : err ? 0 : -ESTALE;
}

int cache_fd_is(struct cache *c, int fd, const struct lento_fid *fid)
{
	struct lento_fid got;
	int err = fd_fid(c, fd, &got);

	return err ?: lento_fid_eq(&got, fid);
}

int cache_at_allows(struct cache *c, int fd, const char *path,
		    const struct cache_at *at)
{
	struct lento_fid got;
	int err = fd_fid(c, fd, &got);

	if (err == -EOPNOTSUPP)
		return 0;	/* nothing tells */
	if (!err)
		return at->fid && lento_fid_eq(&got, at->fid) ? 0 : -ESTALE;
	if (err != -ENOENT)
		return err;
	/* A volume's root, DIR/VOLUME, was made with no handle recorded. */
	if ((at->fid && !strchr(path, '/')) || at->lax)
		return 0;
	return made_lost(c, fd, at->fid);
}

int cache_fd_own(struct cache *c, int fd, const struct lento_fid *fid,
		 const char *path)
{
	int is = cache_fd_is(c, fd, fid);

	if (is == 1 || is == -EOPNOTSUPP)
		return 0;
	/*
	 * A volume's root, DIR/VOLUME: no user of the mount moves that
	 * (its root), and the cache made it with no handle recorded.
	 */
	if (is == -ENOENT && !strchr(path, '/'))
		return 0;
	if (is == -ENOENT)
		return made_lost(c, fd, fid);
	return is < 0 ? is : -ESTALE;
}

int cache_path_is_fd(struct cache *c, const char *path, int fd)
{
	struct stat at, of;
	int err = cache_lstat(c, path, &at);

	if (err)
		return err == -ENOENT ? -ESTALE : err;
	if (fstat(fd, &of))
		return -errno;
	return at.st_dev == of.st_dev && at.st_ino == of.st_ino ? 0 : -ESTALE;
}

int cache_handle_lookup(struct cache *c, int type, const void *handle,
			size_t len, struct lento_fid *fid)
{
	sqlite3_stmt *st = stmt(c, S_HANDLE_GET);
	int rc, err;

	sqlite3_bind_int(st, 1, type);
	sqlite3_bind_blob(st, 2, handle, (int)len, SQLITE_TRANSIENT);
	rc = sqlite3_step(st);
	err = rc == SQLITE_ROW ? col_fid(st, 0, fid) :
	      rc == SQLITE_DONE ? -ENOENT : sql_err(rc);
	reset(c, S_HANDLE_GET);
	return err;
}

/* ------------------------------------------------------- materialising */

static int newfile(struct cache *c, const char *dir, char *path)
{
	static unsigned int counter;

	for (int tries = 0; tries < 100; tries++) {
		int fd;

		snprintf(path, CACHE_PATH_MAX, "%s/%d.%u", dir, (int)getpid(),
			 ++counter);
		fd = cache_open_obj(c, path, O_RDWR | O_CREAT | O_EXCL, 0600);
		if (fd != -EEXIST)
			return fd;
	}
	return -EEXIST;
}

int cache_tmpfile(struct cache *c, char *path)
{
	return newfile(c, ".lento/tmp", path);
}

int cache_copy_fd(int in, int out, off_t size)
{
	bool splice = false;	/* across file systems: by sendfile() */
	int err = 0;

	for (off_t left = size; !err && left > 0;) {
		ssize_t k = splice ? sendfile(out, in, NULL, (size_t)left) :
			    copy_file_range(in, NULL, out, NULL, (size_t)left,
					    0);

		if (k < 0 && !splice && (errno == EXDEV || errno == EINVAL ||
					 errno == EOPNOTSUPP ||
					 errno == ENOSYS)) {
			splice = true;
			continue;
		}
		if (k <= 0)
			err = k < 0 ? -errno : -EIO;
		left -= k > 0 ? k : 0;
	}
	return err;
}

int cache_copy_content(int dirfd, const char *path, int out,
		       struct stat *sb)
{
	int in = cache_beneath(dirfd, path, O_RDONLY, 0);
	int err;

	if (in < 0)
		return in;
	err = fstat(in, sb) ? -errno : cache_copy_fd(in, out, sb->st_size);
	close(in);
	return err;
}

/* The directory part of @path, opened, to fsync a rename in it. */
void cache_defer_dirsync(struct cache *c, bool on)
{
	c->defer_dirsync = on;
}

int cache_sync_dir(struct cache *c, const char *path)
{
	int fd = cache_open_obj(c, path, O_RDONLY | O_DIRECTORY, 0), err = 0;

	if (fd < 0)
		return fd;
	if (fsync(fd))
		err = -errno;
	close(fd);
	return err;
}

static int sync_parent(struct cache *c, const char *path)
{
	char dir[CACHE_PATH_MAX];
	const char *slash = strrchr(path, '/');
	int fd, err = 0;

	if (c->defer_dirsync)
		return 0;	/* the caller syncs the directory once */
	if (!slash) {
		snprintf(dir, sizeof(dir), ".");
	} else {
		if ((size_t)(slash - path) >= sizeof(dir))
			return -ENAMETOOLONG;
		memcpy(dir, path, slash - path);
		dir[slash - path] = 0;
	}
	fd = cache_open_obj(c, dir, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return fd;
	if (fsync(fd))
		err = -errno;
	close(fd);
	return err;
}

static struct timespec ts_of(int64_t ns)
{
	struct timespec ts = { .tv_sec = ns / 1000000000,
			       .tv_nsec = ns % 1000000000 };

	if (ts.tv_nsec < 0) {
		ts.tv_sec--;
		ts.tv_nsec += 1000000000;
	}
	return ts;
}

int cache_set_attrs_fd(int fd, const struct cache_obj *o)
{
	const struct lento_attr *a = &o->attr;
	struct timespec ts[2] = { ts_of(a->atime_ns), ts_of(a->mtime_ns) };
	char p[40];

	/* Only root can give files away; others keep them as lento's. */
	if (geteuid() == 0 && (a->valid & (LENTO_A_UID | LENTO_A_GID)) &&
	    fchownat(fd, "", a->valid & LENTO_A_UID ? a->uid : -1u,
		     a->valid & LENTO_A_GID ? a->gid : -1u, AT_EMPTY_PATH))
		return -errno;
	/*
	 * Never through a symlink: what the cache has may not be what the
	 * server says it is (a symlink's target is anyone's). fchmod() on
	 * a descriptor open for content; by /proc on an O_PATH one, which
	 * fchmod() refuses (EBADF): the magic link reaches the inode
	 * itself, and one that is a symlink refuses a mode.
	 */
	if (o->type != LENTO_T_SYMLINK && (a->valid & LENTO_A_MODE) &&
	    fchmod(fd, a->mode & 07777)) {
		if (errno != EBADF)
			return -errno;
		xattr_fd(fd, p, sizeof(p));
		if (chmod(p, a->mode & 07777))
			return -errno;
	}
	if (!(a->valid & LENTO_A_ATIME))
		ts[0].tv_nsec = UTIME_OMIT;
	if (!(a->valid & LENTO_A_MTIME))
		ts[1].tv_nsec = UTIME_OMIT;
	if (utimensat(fd, "", ts, AT_EMPTY_PATH))
		return -errno;
	return 0;
}

int cache_set_attrs(struct cache *c, const char *path,
		    const struct cache_obj *o)
{
	/* One inode for the three calls, reached with no symlink. */
	int fd = cache_open_obj(c, path, O_PATH, 0), err;

	if (fd < 0)
		return fd;
	err = cache_set_attrs_fd(fd, o);
	close(fd);
	return err;
}

int cache_install(struct cache *c, const char *tmp, const char *path,
		  const struct cache_obj *o)
{
	return cache_install_fd(c, tmp, path, o, NULL);
}

static int remove_below(int dfd);

/* @xa's xattrs on the object open as @fd: the server's, then presto's. */
static int xattrs_set_fd(int fd, const struct cache_xattrs *xa)
{
	char name[LENTO_XATTR_NAME_MAX + 1];
	int err = cache_sync_xattrs_fd(fd, xa->x, xa->n, xa->skipped);

	for (uint32_t i = 0; !err && i < xa->nown; i++) {
		if (xa->own[i].name_len >= sizeof(name))
			return -EINVAL;
		memcpy(name, xa->own[i].name, xa->own[i].name_len);
		name[xa->own[i].name_len] = '\0';
		err = cache_fsetxattr(fd, name, xa->own[i].value,
				      xa->own[i].value_len);
	}
	return err;
}

/* The object @name in @pfd: removed, a directory with all below it. */
static int remove_name(int pfd, const char *name)
{
	int fd, err = 0;

	if (unlinkat(pfd, name, 0))
		err = errno == ENOENT ? 0 : -errno;
	if (err == -EISDIR) {
		/* One name in @pfd, not followed: its tree, not another's. */
		fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			    O_CLOEXEC);
		err = fd < 0 ? -errno : remove_below(fd);
		if (!err && unlinkat(pfd, name, AT_REMOVEDIR))
			err = -errno;
	}
	return err;
}

/*
 * What @name in @pfd holds, as @at allows it to be replaced: its status
 * in *@was and 1, or 0 if nothing is there; -ESTALE if it may not be.
 */
static int at_check(struct cache *c, int pfd, const char *name,
		    const char *path, const struct cache_at *at,
		    struct stat *was)
{
	int fd = cache_beneath(pfd, name, O_PATH, 0), err;

	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	err = fstat(fd, was) ? -errno : 0;
	if (!err && at)
		err = cache_at_allows(c, fd, path, at);
	close(fd);
	return err ?: 1;
}

/*
 * @tname in @tpfd (a new object of lento's in .lento/tmp) renamed to
 * @name in @pfd, in place of the inode @was (NULL: of nothing) and of
 * that one only: the name's object is exchanged with the new one and
 * removed if it is @was, else put back (-ESTALE). Where the file system
 * has no renameat2() flags, a plain rename (the check was just made).
 */
static int replace_at(int tpfd, const char *tname, int pfd, const char *name,
		      const struct stat *was)
{
	struct stat got;

	if (!was) {
		if (!renameat2(tpfd, tname, pfd, name, RENAME_NOREPLACE))
			return 0;
		if (errno == EEXIST)
			return -ESTALE;	/* one came meanwhile: theirs */
		if (errno != EINVAL)
			return -errno;
		return renameat(tpfd, tname, pfd, name) ? -errno : 0;
	}
	if (renameat2(tpfd, tname, pfd, name, RENAME_EXCHANGE)) {
		if (errno == ENOENT)	/* it went meanwhile */
			return replace_at(tpfd, tname, pfd, name, NULL);
		if (errno != EINVAL)
			return -errno;
		return renameat(tpfd, tname, pfd, name) ? -errno : 0;
	}
	if (!fstatat(tpfd, tname, &got, AT_SYMLINK_NOFOLLOW) &&
	    got.st_dev == was->st_dev && got.st_ino == was->st_ino) {
		/*
		 * Replaced. Left in .lento/tmp (emptied at the next open)
		 * if it cannot go now: the new object has the name.
		 */
		remove_name(tpfd, tname);
		return 0;
	}
	/* Another took the name between the check and the exchange. */
	if (renameat2(tpfd, tname, pfd, name, RENAME_EXCHANGE) &&
	    renameat2(tpfd, tname, pfd, name, RENAME_NOREPLACE))
		return -errno;
	return -ESTALE;
}

/*
 * cache_install_at(): @tmp, open as @fd (O_PATH will do; the descriptor
 * is given, closed or in *@fdp), gets @o's attributes and @xa's xattrs
 * (if not NULL) and takes @path's name in place of what @at allows there
 * (NULL: whatever it is).
 */
static int install_open(struct cache *c, int fd, const char *tmp,
			const char *path, const struct cache_obj *o,
			const struct cache_xattrs *xa,
			const struct cache_at *at, int *fdp)
{
	int err;
	const char *tname, *name;
	int tpfd = -1, pfd = -1;
	struct stat was;

	if (fd < 0)
		return fd;
	/*
	 * All of it while the name is lento's alone: xattrs set by the
	 * path after the rename would go to whatever a user put there
	 * since (a file of theirs getting the server's
	 * security.capability). After the owner, which clears it.
	 */
	err = cache_set_attrs_fd(fd, o);
	/* Before the server's xattrs, which may fill the room there is. */
	if (!err && at && !at->lax)
		err = made_mark(c, fd, &o->fid);
	if (!err && xa)
		err = xattrs_set_fd(fd, xa);
	err = err ?: parents2(c, tmp, path, &tpfd, &tname, &pfd, &name);
	if (!err) {
		err = at_check(c, pfd, name, path, at, &was);
		err = err < 0 ? err :
		      replace_at(tpfd, tname, pfd, name, err ? &was : NULL);
		cache_parent_put(c, tpfd);
		cache_parent_put(c, pfd);
	}
	err = err ?: sync_parent(c, path);
	if (err || !fdp)
		close(fd);
	else
		*fdp = fd;
	return err;
}

static int install(struct cache *c, const char *tmp, const char *path,
		   const struct cache_obj *o, const struct cache_xattrs *xa,
		   const struct cache_at *at, int *fdp)
{
	/* The inode installed, whatever takes its name after. */
	return install_open(c, cache_open_obj(c, tmp, O_PATH, 0), tmp, path,
			    o, xa, at, fdp);
}

int cache_install_fd(struct cache *c, const char *tmp, const char *path,
		     const struct cache_obj *o, int *fdp)
{
	return install(c, tmp, path, o, NULL, NULL, fdp);
}

int cache_install_at(struct cache *c, const char *tmp, const char *path,
		     const struct cache_obj *o, const struct cache_xattrs *xa,
		     const struct cache_at *at, int *fdp)
{
	return install(c, tmp, path, o, xa, at, fdp);
}

/* A fresh name in .lento/tmp into @aside, with nothing under it. */
static int aside_name(struct cache *c, char *aside)
{
	int fd = cache_tmpfile(c, aside);

	if (fd < 0)
		return fd;
	close(fd);
	return cache_unlink(c, aside, 0);
}

int cache_link_aside(struct cache *c, const char *path, char *aside)
{
	int err = aside_name(c, aside);

	return err ?: cache_hardlink(c, path, aside);
}

int cache_move_aside(struct cache *c, const char *path, char *aside)
{
	int err = aside_name(c, aside);

	return err ?: cache_rename(c, path, aside, 0);
}

/*
 * linkat() of the inode open as @fd (O_PATH will do) itself: by its
 * magic link, which names the inode whatever its names are now, and
 * needs no CAP_DAC_READ_SEARCH as AT_EMPTY_PATH would.
 */
static int hardlink_fd(struct cache *c, int fd, const char *to)
{
	char p[40];
	const char *name;
	int pfd = cache_parent(c, to, &name), err = 0;

	if (pfd < 0)
		return pfd;
	xattr_fd(fd, p, sizeof(p));
	if (linkat(AT_FDCWD, p, pfd, name, AT_SYMLINK_FOLLOW))
		err = -errno;
	cache_parent_put(c, pfd);
	return err;
}

int cache_link_fd(struct cache *c, int fd, const char *to)
{
	char tmp[CACHE_PATH_MAX];
	int err = aside_name(c, tmp);

	err = err ?: hardlink_fd(c, fd, tmp);
	if (err)
		return err;
	err = cache_rename(c, tmp, to, 0);
	/* Gone if renamed; left if @to was that inode already. */
	cache_unlink(c, tmp, 0);
	return err;
}

int cache_link(struct cache *c, const char *from, const char *to)
{
	char tmp[CACHE_PATH_MAX];
	int err = cache_link_aside(c, from, tmp);

	if (err)
		return err;
	err = cache_rename(c, tmp, to, 0);
	/* Gone if renamed; left if @to was that inode already. */
	cache_unlink(c, tmp, 0);
	return err;
}

static int placeholder_file(struct cache *c, const char *path,
			    const struct cache_obj *o,
			    const struct cache_xattrs *xa,
			    const struct cache_at *at, int *fdp)
{
	char tmp[CACHE_PATH_MAX];
	int fd = cache_tmpfile(c, tmp), err = 0;

	if (fd < 0)
		return fd;
	/* Installed by the descriptor it was made with (empty, as made). */
	if (o->attr.size && ftruncate(fd, (off_t)o->attr.size)) {
		err = -errno;
		close(fd);
	} else {
		err = install_open(c, fd, tmp, path, o, xa, at, fdp);
	}
	if (err)
		cache_unlink(c, tmp, 0);
	return err;
}

static int placeholder_symlink(struct cache *c, const char *path,
			       const struct cache_obj *o, const char *target,
			       const struct cache_xattrs *xa,
			       const struct cache_at *at, int *fdp)
{
	char tmp[CACHE_PATH_MAX];
	int fd = cache_tmpfile(c, tmp), err = 0;

	if (fd < 0)
		return fd;
	close(fd);
	/* A name to make it under, then renamed over @path. */
	err = cache_unlink(c, tmp, 0) ?:
	      cache_symlink(c, target ? target : "", tmp);
	if (err)
		return err;
	err = install(c, tmp, path, o, xa, at, fdp);
	if (err)
		cache_unlink(c, tmp, 0);
	return err;
}

/*
 * A fifo, socket or device node, complete as made. Only root may make
 * devices: lento without CAP_MKNOD lists them and leaves them out of the
 * tree (-EOPNOTSUPP), as it does what ext4 cannot hold.
 */
static int placeholder_node(struct cache *c, const char *path,
			    const struct cache_obj *o,
			    const struct cache_xattrs *xa,
			    const struct cache_at *at, int *fdp)
{
	static const mode_t fmt[] = {
		[LENTO_T_FIFO] = S_IFIFO, [LENTO_T_SOCK] = S_IFSOCK,
		[LENTO_T_CHR] = S_IFCHR, [LENTO_T_BLK] = S_IFBLK,
	};
	dev_t dev = makedev((unsigned int)(o->attr.rdev >> 32),
			    (unsigned int)(o->attr.rdev & 0xffffffffu));
	char tmp[CACHE_PATH_MAX];
	int fd = cache_tmpfile(c, tmp), err;

	if (fd < 0)
		return fd;
	close(fd);
	err = cache_unlink(c, tmp, 0) ?:
	      cache_mknod(c, tmp, fmt[o->type] | 0600,
			  o->type == LENTO_T_CHR || o->type == LENTO_T_BLK ?
			  dev : 0);
	if (err)
		return err == -EPERM ? -EOPNOTSUPP : err;
	err = install(c, tmp, path, o, xa, at, fdp);
	if (err)
		cache_unlink(c, tmp, 0);
	return err;
}

int cache_placeholder(struct cache *c, const char *path,
		      const struct cache_obj *o, const char *target)
{
	return cache_placeholder_fd(c, path, o, target, NULL, NULL, NULL);
}

/*
 * A directory is kept if there, with what is in it: so it must be this
 * one, not another a user made under its name having moved this one
 * away (lento is root: it would give theirs the object's owner, mode
 * and xattrs). Known by its handle (cache_fd_own()). A new one is made
 * in .lento/tmp, with its attributes and xattrs, and takes the name as
 * a file's placeholder does: in place of nothing, or of what @at allows.
 */
static int placeholder_dir(struct cache *c, const char *path,
			   const struct cache_obj *o,
			   const struct cache_xattrs *xa,
			   const struct cache_at *at, int *fdp)
{
	char tmp[CACHE_PATH_MAX];
	struct stat sb;
	int fd, err = cache_lstat(c, path, &sb);

	if (err && err != -ENOENT)
		return err;
	if (err || !S_ISDIR(sb.st_mode)) {
		err = aside_name(c, tmp);
		err = err ?: cache_mkdir(c, tmp, 0700);
		if (err)
			return err;
		err = install(c, tmp, path, o, xa, at, fdp);
		if (!err)
			return 0;
		cache_unlink(c, tmp, AT_REMOVEDIR);
		/* A directory came meanwhile: as if it had been there. */
		if (err != -ESTALE || cache_lstat(c, path, &sb) ||
		    !S_ISDIR(sb.st_mode))
			return err;
	}
	fd = cache_open_obj(c, path, O_PATH | O_DIRECTORY, 0);
	if (fd < 0)
		return fd;
	err = cache_fd_own(c, fd, &o->fid, path);
	err = err ?: cache_set_attrs_fd(fd, o);
	if (!err && xa)
		err = xattrs_set_fd(fd, xa);
	if (err || !fdp)
		close(fd);
	else
		*fdp = fd;
	return err;
}

int cache_placeholder_fd(struct cache *c, const char *path,
			 const struct cache_obj *o, const char *target,
			 const struct cache_xattrs *xa,
			 const struct cache_at *at, int *fdp)
{
	switch (o->type) {
	case LENTO_T_DIR:
		return placeholder_dir(c, path, o, xa, at, fdp);
	case LENTO_T_SYMLINK:
		if (!target || !*target)
			return -EINVAL;
		return placeholder_symlink(c, path, o, target, xa, at, fdp);
	case LENTO_T_REG:
		return placeholder_file(c, path, o, xa, at, fdp);
	case LENTO_T_FIFO:
	case LENTO_T_SOCK:
	case LENTO_T_CHR:
	case LENTO_T_BLK:
		return placeholder_node(c, path, o, xa, at, fdp);
	default:
		return -EINVAL;
	}
}

static int remove_below(int dfd)
{
	struct dirent *de;
	DIR *d;
	int err = 0;

	d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -errno;
	}
	while (!err && (de = readdir(d))) {
		int fd;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!unlinkat(dirfd(d), de->d_name, 0))
			continue;
		if (errno != EISDIR) {
			err = -errno;
			break;
		}
		fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY |
			    O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			err = -errno;
			break;
		}
		err = remove_below(fd);
		if (!err && unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR))
			err = -errno;
	}
	closedir(d);
	return err;
}

int cache_remove_tree(struct cache *c, const char *path)
{
	const char *name;
	int pfd = cache_parent(c, path, &name), err;

	if (pfd < 0)
		return pfd == -ENOENT ? 0 : pfd;
	err = remove_name(pfd, name);
	cache_parent_put(c, pfd);
	return err;
}

/* @name in @dirpath, open as @dfd: dropped if a crash's leftover (1). */
static int drop_stray(struct cache *c, int dfd, const char *dirpath,
		      const char *name)
{
	char path[CACHE_PATH_MAX];
	struct lento_fid fid;
	struct cache_at at = { &fid, false };
	int fd = cache_beneath(dfd, name, O_PATH, 0), err;

	if (fd < 0)
		return fd == -ENOENT || fd == -ELOOP ? 0 : fd;
	err = fd_fid(c, fd, &fid);
	/*
	 * Unrecorded, marked, and not changed since this run began: an
	 * earlier run's leftover (a failure in this one is undone where it
	 * happens).
	 */
	if (err == -ENOENT)
		err = cache_fd_made_for(fd, &fid) ?: earlier_run(c, fd);
	else
		err = err == -EOPNOTSUPP || !err ? 0 : err;
	close(fd);
	if (err <= 0)
		return err == -ENOENT ? 0 : err;
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dirpath, name) >=
	    sizeof(path))
		return -ENAMETOOLONG;
	/* Checked again as it goes: lento's, for that object, no handle. */
	err = cache_remove_at(c, path, &at);
	return err == -ESTALE ? 0 : err ?: 1;
}

int cache_drop_strays(struct cache *c, const char *dirpath,
		      bool (*known)(void *arg, const char *name), void *arg,
		      int *stuck)
{
	int dfd, err = 0, n = 0;
	struct dirent *de;
	DIR *d;

	/*
	 * A run that cannot take marks off (nor set them) left them on
	 * inodes whose rows went: marks prove nothing then.
	 */
	if (!c->marks)
		return 0;
	dfd = cache_open_obj(c, dirpath, O_RDONLY | O_DIRECTORY, 0);
	if (dfd < 0)
		return dfd == -ENOENT || dfd == -ENOTDIR ? 0 : dfd;
	d = fdopendir(dfd);
	if (!d) {
		err = -errno;
		close(dfd);
		return err;
	}
	for (errno = 0; !err && (de = readdir(d)); errno = 0) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    known(arg, de->d_name))
			continue;
		err = drop_stray(c, dirfd(d), dirpath, de->d_name);
		n += err > 0;
		/* One that will not go stays (harmless): the others go. */
		if (err < 0 && !*stuck)
			*stuck = err;
		err = 0;
	}
	if (!err && errno)
		err = -errno;
	closedir(d);
	return err ?: n;
}

int cache_remove_at(struct cache *c, const char *path,
		    const struct cache_at *at)
{
	char aside[CACHE_PATH_MAX];
	const char *name, *aname;
	struct stat was, got;
	int pfd, apfd, err = aside_name(c, aside);

	if (err)
		return err;
	err = parents2(c, path, aside, &pfd, &name, &apfd, &aname);
	if (err)
		return err == -ENOENT ? 0 : err;
	err = at_check(c, pfd, name, path, at, &was);
	if (err <= 0)
		goto out;
	/* Into .lento/tmp, then gone if it is the one checked. */
	err = renameat2(pfd, name, apfd, aname, RENAME_NOREPLACE) ? -errno : 0;
	if (err == -EINVAL)	/* no flags here: the name is a new one */
		err = renameat(pfd, name, apfd, aname) ? -errno : 0;
	if (err == -ENOENT) {
		err = 0;		/* gone meanwhile */
		goto out;
	}
	if (err)
		goto out;
	if (!fstatat(apfd, aname, &got, AT_SYMLINK_NOFOLLOW) &&
	    got.st_dev == was.st_dev && got.st_ino == was.st_ino) {
		err = remove_name(apfd, aname);
	} else {
		/* Another took the name meanwhile: back, as it was. */
		err = renameat2(apfd, aname, pfd, name, RENAME_NOREPLACE) ?
		      -errno : -ESTALE;
	}
out:
	cache_parent_put(c, pfd);
	cache_parent_put(c, apfd);
	return err < 0 ? err : 0;
}

/* ------------------------------------------------------------ xattrs */

/* Names cache_sync_xattrs leaves alone: presto's and the LSM's. */
static bool xattr_local(const char *name, size_t len)
{
	static const char presto[] = "trusted.presto.";

	if (len >= sizeof(presto) - 1 &&
	    !memcmp(name, presto, sizeof(presto) - 1))
		return true;
	return !lento_xattr_mirrored(name, len);
}

/* What the lower refuses to hold: skipped, not an error. */
static bool xattr_unholdable(int err)
{
	return err == EPERM || err == EOPNOTSUPP || err == E2BIG ||
	       err == ERANGE || err == ENOSPC;
}

/*
 * The *xattr() calls on @p: with @follow, the object a magic link
 * /proc/self/fd/N (xattr_fd()) names; without, @p itself, not followed
 * (xattr_at()'s PARENT/NAME).
 */
static ssize_t x_list(const char *p, bool follow, char *list, size_t size)
{
	return follow ? listxattr(p, list, size) : llistxattr(p, list, size);
}

static ssize_t x_get(const char *p, bool follow, const char *name,
		     void *value, size_t size)
{
	return follow ? getxattr(p, name, value, size) :
			lgetxattr(p, name, value, size);
}

static int x_set(const char *p, bool follow, const char *name,
		 const void *value, size_t size)
{
	return follow ? setxattr(p, name, value, size, 0) :
			lsetxattr(p, name, value, size, 0);
}

static int x_remove(const char *p, bool follow, const char *name)
{
	return follow ? removexattr(p, name) : lremovexattr(p, name);
}

/* @p's xattr names, NUL-separated, into a malloc'd *@list. */
static ssize_t xattr_names(const char *p, bool follow, char **list)
{
	ssize_t n;

	*list = NULL;
	for (;;) {
		n = x_list(p, follow, NULL, 0);
		if (n <= 0)
			return n < 0 ? -errno : 0;
		free(*list);
		*list = malloc((size_t)n);
		if (!*list)
			return -ENOMEM;
		n = x_list(p, follow, *list, (size_t)n);
		if (n >= 0)
			return n;
		if (errno != ERANGE) {	/* ERANGE: it grew meanwhile */
			free(*list);
			*list = NULL;
			return -errno;
		}
	}
}

static bool xattr_listed(const struct cache_xattr *x, uint32_t n,
			 const char *name)
{
	size_t len = strlen(name);

	for (uint32_t i = 0; i < n; i++)
		if (x[i].name_len == len && !memcmp(x[i].name, name, len))
			return true;
	return false;
}

/* Is @x's value at @p already? */
static bool xattr_same(const char *p, bool follow, const char *name,
		       const struct cache_xattr *x, uint8_t *buf)
{
	ssize_t got = x_get(p, follow, name, buf, LENTO_XATTR_SIZE_MAX);

	return got == (ssize_t)x->value_len &&
	       !memcmp(buf, x->value, x->value_len);
}

/* cache_sync_xattrs() of the object @p names (x_list()'s @follow). */
static int sync_xattrs(const char *p, bool follow,
		       const struct cache_xattr *x, uint32_t n,
		       uint32_t *skipped)
{
	char name[LENTO_XATTR_NAME_MAX + 1];
	char *list;
	uint8_t *buf = NULL;
	ssize_t len;
	int err = 0;

	len = xattr_names(p, follow, &list);
	if (len < 0)
		return len == -EOPNOTSUPP ? 0 : (int)len;
	for (char *s = list; s < list + len; s += strlen(s) + 1) {
		if (xattr_local(s, strlen(s)) || xattr_listed(x, n, s))
			continue;
		if (x_remove(p, follow, s) && errno != ENODATA) {
			if (!xattr_unholdable(errno)) {
				err = -errno;
				goto out;
			}
			(*skipped)++;
		}
	}
	if (n && !(buf = malloc(LENTO_XATTR_SIZE_MAX))) {
		err = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (x[i].name_len >= sizeof(name) ||
		    xattr_local(x[i].name, x[i].name_len)) {
			(*skipped)++;
			continue;
		}
		memcpy(name, x[i].name, x[i].name_len);
		name[x[i].name_len] = '\0';
		if (xattr_same(p, follow, name, &x[i], buf))
			continue;
		if (x_set(p, follow, name, x[i].value, x[i].value_len)) {
			if (!xattr_unholdable(errno)) {
				err = -errno;
				goto out;
			}
			(*skipped)++;
		}
	}
out:
	free(buf);
	free(list);
	return err;
}

int cache_sync_xattrs(struct cache *c, const char *path,
		      const struct cache_xattr *x, uint32_t n,
		      uint32_t *skipped)
{
	char p[CACHE_PATH_MAX + 40];
	const char *last;
	int pfd = cache_parent(c, path, &last), err;

	if (pfd < 0)
		return pfd;
	xattr_at(pfd, last, p, sizeof(p));
	err = sync_xattrs(p, false, x, n, skipped);
	cache_parent_put(c, pfd);
	return err;
}

int cache_sync_xattrs_fd(int fd, const struct cache_xattr *x, uint32_t n,
			 uint32_t *skipped)
{
	char p[40];

	xattr_fd(fd, p, sizeof(p));
	return sync_xattrs(p, true, x, n, skipped);
}

void cache_xattrs_release(struct cache_xattr_copy *b)
{
	free(b->x);
	free(b->mem);
	*b = (struct cache_xattr_copy){ 0 };
}

int cache_xattrs_read_fd(int fd, struct cache_xattr_copy *b)
{
	char p[40], *list;
	size_t used = 0, room = 0;
	uint32_t n = 0;
	ssize_t len, v;
	int err = 0;

	*b = (struct cache_xattr_copy){ 0 };
	xattr_fd(fd, p, sizeof(p));
	len = xattr_names(p, true, &list);
	if (len <= 0)
		return len == -EOPNOTSUPP ? 0 : (int)len;
	for (char *s = list; s < list + len; s += strlen(s) + 1)
		n += !xattr_local(s, strlen(s));
	/* Names and values one after the other: room for the largest. */
	b->x = calloc(n ? n : 1, sizeof(*b->x));
	if (!b->x)
		err = -ENOMEM;
	for (char *s = list; !err && s < list + len; s += strlen(s) + 1) {
		size_t nl = strlen(s);
		uint8_t *m;

		if (xattr_local(s, nl))
			continue;
		if (room - used < nl + LENTO_XATTR_SIZE_MAX) {
			/* Grown: the pointers so far are offsets until the end. */
			room = 2 * room + nl + LENTO_XATTR_SIZE_MAX;
			m = realloc(b->mem, room);
			if (!m) {
				err = -ENOMEM;
				break;
			}
			b->mem = m;
		}
		v = getxattr(p, s, b->mem + used + nl, LENTO_XATTR_SIZE_MAX);
		if (v < 0) {
			if (errno == ENODATA)
				continue;	/* gone meanwhile */
			err = -errno;
			break;
		}
		memcpy(b->mem + used, s, nl);
		b->x[b->n++] = (struct cache_xattr){
			(const char *)(uintptr_t)used, (uint32_t)nl,
			(const void *)(uintptr_t)(used + nl), (uint32_t)v };
		used += nl + (size_t)v;
	}
	free(list);
	if (err) {
		cache_xattrs_release(b);
		return err;
	}
	for (uint32_t i = 0; i < b->n; i++) {
		b->x[i].name = (const char *)b->mem + (uintptr_t)b->x[i].name;
		b->x[i].value = b->mem + (uintptr_t)b->x[i].value;
	}
	return 0;
}

int cache_copy_xattrs(struct cache *c, const char *from, const char *to)
{
	char pf[CACHE_PATH_MAX + 40], pt[CACHE_PATH_MAX + 40];
	char *list;
	uint8_t *buf = NULL;
	const char *nf, *nt;
	ssize_t len, v;
	int dfrom, dto, err = parents2(c, from, to, &dfrom, &nf, &dto, &nt);

	if (err)
		return err == -ENOENT ? 0 : err;
	xattr_at(dfrom, nf, pf, sizeof(pf));
	xattr_at(dto, nt, pt, sizeof(pt));
	len = xattr_names(pf, false, &list);
	if (len <= 0) {
		cache_parent_put(c, dfrom);
		cache_parent_put(c, dto);
		return len == -ENOENT || len == -EOPNOTSUPP ? 0 : (int)len;
	}
	for (char *s = list; !err && s < list + len; s += strlen(s) + 1) {
		if (xattr_local(s, strlen(s)))
			continue;
		if (!buf && !(buf = malloc(LENTO_XATTR_SIZE_MAX))) {
			err = -ENOMEM;
			break;
		}
		v = lgetxattr(pf, s, buf, LENTO_XATTR_SIZE_MAX);
		if (v < 0)
			err = errno == ENODATA ? 0 : -errno;
		else if (lsetxattr(pt, s, buf, (size_t)v, 0) &&
			 !xattr_unholdable(errno))
			err = -errno;
	}
	free(buf);
	free(list);
	cache_parent_put(c, dfrom);
	cache_parent_put(c, dto);
	return err;
}

/* ------------------------------------------------------- hidden names */

/* More than any file has a reason for: a server that says more is wrong. */
#define CACHE_HIDDEN_MAX	4096

static void hidden_name(char *buf, const struct lento_fid *fid, uint32_t n)
{
	snprintf(buf, CACHE_PATH_MAX, ".lento/names/%08" PRIx32 "-%08" PRIx32
		 "-%016" PRIx64 ".%" PRIu32, fid->volume, fid->client,
		 fid->seq, n);
}

int cache_names_fit(struct cache *c, const struct lento_fid *fid,
		    const char *path, uint32_t nlink)
{
	int fd = cache_open_obj(c, path, O_PATH, 0), err;

	if (fd < 0)
		return fd;
	err = cache_names_fit_fd(c, fid, fd, nlink);
	close(fd);
	return err;
}

int cache_names_fit_fd(struct cache *c, const struct lento_fid *fid, int fd,
		       uint32_t nlink)
{
	char name[CACHE_PATH_MAX];
	struct stat sb, hb;
	uint32_t hidden = 0, visible, want;
	int err = fstat(fd, &sb) ? -errno : 0;

	if (err)
		return err;
	if (!S_ISREG(sb.st_mode))
		return 0;
	/* Those there, each made this inode's again if it is another's. */
	for (;; hidden++) {
		hidden_name(name, fid, hidden);
		err = cache_lstat(c, name, &hb);
		if (err)
			break;
		if (hb.st_ino != sb.st_ino) {
			err = cache_link_fd(c, fd, name);
			if (err)
				return err;
			sb.st_nlink++;
		}
	}
	if (err != -ENOENT)
		return err;
	visible = (uint32_t)sb.st_nlink - hidden;
	want = nlink > visible ? nlink - visible : 0;
	if (want > CACHE_HIDDEN_MAX)
		want = CACHE_HIDDEN_MAX;
	for (; hidden < want; hidden++) {
		hidden_name(name, fid, hidden);
		err = hardlink_fd(c, fd, name);
		if (err)
			return err;
	}
	while (hidden > want) {
		hidden_name(name, fid, --hidden);
		err = cache_unlink(c, name, 0);
		if (err && err != -ENOENT)
			return err;
	}
	return 0;
}

void cache_names_drop(struct cache *c, const struct lento_fid *fid)
{
	char name[CACHE_PATH_MAX];

	for (uint32_t n = 0;; n++) {
		hidden_name(name, fid, n);
		if (cache_unlink(c, name, 0))
			break;
	}
}

/* Every hidden name of @volume's files (the volume goes). */
static void names_purge(struct cache *c, uint32_t volume)
{
	int fd = cache_open_obj(c, ".lento/names", O_RDONLY | O_DIRECTORY, 0);
	char prefix[16];
	struct dirent *de;
	DIR *d;

	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	snprintf(prefix, sizeof(prefix), "%08" PRIx32 "-", volume);
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, prefix, strlen(prefix)))
			unlinkat(fd, de->d_name, 0);
	closedir(d);
}
