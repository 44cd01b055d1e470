// SPDX-License-Identifier: MIT
/*
 * The lento server's store (store.h): SQLite for metadata, one file per
 * body.
 *
 * Schema (version 1, PRAGMA user_version):
 *
 *   meta     (key, value)             the epoch counter
 *   volumes  (id, name, quota, usage, objects, stamp, created_ns)
 *   objects  (vol, client, seq, type, mode, uid, gid, nlink, size,
 *             atime, mtime, ctime, rdev, target, vv, sid_client, sid_seq,
 *             body_client, body_seq, xattr_bytes)   key (vol, client, seq)
 *   entries  (vol, dclient, dseq, name, cclient, cseq)
 *             key (vol, dclient, dseq, name); index on the child
 *   xattrs   (vol, client, seq, name, value)   key (vol, client, seq, name)
 *   clients  (vol, client, last_recno)         key (vol, client)
 *   identities (id, uuid, created_ns)          a client's id by its uuid
 *
 * Times are nanoseconds, u64s are stored as SQLite's i64 bit for bit, vv
 * is the counters as little-endian u64s (the StoreId in sid_*), names are
 * blobs (bytes, not text). Foreign keys tie entries, xattrs and objects
 * together: an object still named by an entry cannot be deleted.
 *
 * Bodies and crashes. A regular file's content is the file
 * bodies/FID.STOREID, where STOREID is the {client, recno} of the record
 * that made that content (a STORE, or a SETATTR that changed the size).
 * The metadata names it (objects.body_client, body_seq); a file with no
 * content (size 0) has none. Because every new content gets a new name,
 * putting a body in place never overwrites the one the committed metadata
 * names. A batch therefore
 *
 *   1. checks and applies every record inside BEGIN IMMEDIATE (a size
 *      change copies the old content into DIR/tmp),
 *   2. checks the quota,
 *   3. makes the new bodies durable (one syncfs: a thousand small files
 *      cost one journal commit, not a thousand), moves each one that is
 *      still current at the end of the batch into bodies/ under its final
 *      name (rename of a caller's path, or link of a caller's fd) and
 *      fsyncs bodies/,
 *   4. COMMITs (synchronous=FULL: the WAL is fsynced),
 *   5. removes the bodies the batch superseded.
 *
 * A crash before 4 leaves new bodies nobody names; a crash between 4 and
 * 5 leaves old bodies nobody names. Either way the committed metadata
 * names only bodies that exist and are the right ones, and store_open
 * removes every body the metadata does not name (and all of DIR/tmp). A
 * batch that fails before COMMIT moves the bodies back (a caller's path)
 * or removes them (links, copies). A COMMIT that fails with an I/O error
 * may or may not have reached the disk: then the bodies stay, the store
 * refuses further work (-EIO) and the next open keeps whichever bodies
 * the metadata names.
 */
#include "array.h"
#include "store.h"
#include "vv.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* This server's index in version vectors, and their length. */
#define SERVER_INDEX	0
#define SERVER_COUNT	1

#define NLINK_MAX	65000
/*
 * A file's largest size: ext4's (4 KiB blocks). The usage sums of the
 * records of a frame (16 MiB) then stay far below 2^63.
 */
#define STORE_FILE_MAX	(1ull << 44)
/*
 * How far a rename walks up from its new parent to find whether it moves
 * a directory into itself: a parent this deep or deeper is refused one
 * (ENAMETOOLONG: no path of PATH_MAX bytes names it, though openat()
 * reaches it). The walk, a lookup a level, costs each rename that much.
 */
#define DEPTH_MAX	4096u

/* FID.STOREID */
#define BODY_NAME_LEN	(8 + 1 + 8 + 1 + 16 + 1 + 8 + 1 + 16)

enum q {
	Q_BEGIN, Q_COMMIT, Q_ROLLBACK,
	Q_META_GET, Q_META_SET,
	Q_VOL_BY_NAME, Q_VOL_BY_ID, Q_VOL_LIST, Q_VOL_INSERT, Q_VOL_UPDATE,
	Q_VOL_QUOTA, Q_VOL_DEL_ENTRIES, Q_VOL_DEL_XATTRS, Q_VOL_DEL_OBJECTS,
	Q_VOL_DEL_CLIENTS, Q_VOL_DELETE,
	Q_OBJ_GET, Q_OBJ_INSERT, Q_OBJ_UPDATE, Q_OBJ_DELETE, Q_OBJ_TARGET,
	Q_OBJ_XATTRS_DEL,
	Q_ENT_GET, Q_ENT_INSERT, Q_ENT_DELETE, Q_ENT_SET_CHILD, Q_ENT_ANY,
	Q_ENT_PARENT,
	Q_XATTR_LEN, Q_XATTR_GET, Q_XATTR_COUNT, Q_XATTR_SET, Q_XATTR_DEL,
	Q_XATTR_LIST,
	Q_CLIENT_GET, Q_CLIENT_SET,
	Q_READDIR, Q_READDIR_COUNT, Q_BODIES,
	Q_IDENT_BY_UUID, Q_IDENT_BY_ID, Q_IDENT_INSERT, Q_IDENT_COUNT,
	Q_N
};

#define OBJ_COLS "type, mode, uid, gid, nlink, size, atime, mtime, ctime, " \
	"rdev, vv, sid_client, sid_seq, body_client, body_seq, xattr_bytes"
#define VOL_COLS "id, name, quota, usage, objects, stamp, created_ns"
#define PK " WHERE vol = ?1 AND client = ?2 AND seq = ?3"

static const char *const sql[Q_N] = {
	[Q_BEGIN] = "BEGIN IMMEDIATE",
	[Q_COMMIT] = "COMMIT",
	[Q_ROLLBACK] = "ROLLBACK",
	[Q_META_GET] = "SELECT value FROM meta WHERE key = ?1",
	[Q_META_SET] = "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
	[Q_VOL_BY_NAME] = "SELECT " VOL_COLS " FROM volumes WHERE name = ?1",
	[Q_VOL_BY_ID] = "SELECT " VOL_COLS " FROM volumes WHERE id = ?1",
	[Q_VOL_LIST] = "SELECT " VOL_COLS " FROM volumes ORDER BY id",
	[Q_VOL_INSERT] = "INSERT INTO volumes (name, quota, usage, objects, "
		"stamp, created_ns) VALUES (?1, ?2, ?3, 1, 1, ?4)",
	[Q_VOL_UPDATE] = "UPDATE volumes SET stamp = ?2, usage = ?3, "
		"objects = ?4 WHERE id = ?1",
	[Q_VOL_QUOTA] = "UPDATE volumes SET quota = ?2 WHERE id = ?1",
	[Q_VOL_DEL_ENTRIES] = "DELETE FROM entries WHERE vol = ?1",
	[Q_VOL_DEL_XATTRS] = "DELETE FROM xattrs WHERE vol = ?1",
	[Q_VOL_DEL_OBJECTS] = "DELETE FROM objects WHERE vol = ?1",
	[Q_VOL_DEL_CLIENTS] = "DELETE FROM clients WHERE vol = ?1",
	[Q_VOL_DELETE] = "DELETE FROM volumes WHERE id = ?1",
	[Q_OBJ_GET] = "SELECT " OBJ_COLS " FROM objects" PK,
	[Q_OBJ_INSERT] = "INSERT INTO objects (vol, client, seq, " OBJ_COLS
		", target) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
		"?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)",
	[Q_OBJ_UPDATE] = "UPDATE objects SET mode = ?5, uid = ?6, gid = ?7, "
		"nlink = ?8, size = ?9, atime = ?10, mtime = ?11, ctime = ?12, "
		"rdev = ?13, vv = ?14, sid_client = ?15, sid_seq = ?16, "
		"body_client = ?17, body_seq = ?18, xattr_bytes = ?19" PK,
	[Q_OBJ_DELETE] = "DELETE FROM objects" PK,
	[Q_OBJ_TARGET] = "SELECT target FROM objects" PK,
	[Q_OBJ_XATTRS_DEL] = "DELETE FROM xattrs" PK,
	[Q_ENT_GET] = "SELECT cclient, cseq FROM entries WHERE vol = ?1 AND "
		"dclient = ?2 AND dseq = ?3 AND name = ?4",
	[Q_ENT_INSERT] = "INSERT INTO entries (vol, dclient, dseq, name, "
		"cclient, cseq) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
	[Q_ENT_DELETE] = "DELETE FROM entries WHERE vol = ?1 AND dclient = ?2 "
		"AND dseq = ?3 AND name = ?4",
	[Q_ENT_SET_CHILD] = "UPDATE entries SET cclient = ?5, cseq = ?6 "
		"WHERE vol = ?1 AND dclient = ?2 AND dseq = ?3 AND name = ?4",
	[Q_ENT_ANY] = "SELECT 1 FROM entries WHERE vol = ?1 AND dclient = ?2 "
		"AND dseq = ?3 LIMIT 1",
	[Q_ENT_PARENT] = "SELECT dclient, dseq FROM entries WHERE vol = ?1 "
		"AND cclient = ?2 AND cseq = ?3 LIMIT 1",
	[Q_XATTR_LEN] = "SELECT length(value) FROM xattrs" PK " AND name = ?4",
	[Q_XATTR_GET] = "SELECT value FROM xattrs" PK " AND name = ?4",
	[Q_XATTR_COUNT] = "SELECT count(*) FROM xattrs" PK,
	[Q_XATTR_SET] = "INSERT OR REPLACE INTO xattrs (vol, client, seq, "
		"name, value) VALUES (?1, ?2, ?3, ?4, ?5)",
	[Q_XATTR_DEL] = "DELETE FROM xattrs" PK " AND name = ?4",
	[Q_XATTR_LIST] = "SELECT name, value FROM xattrs" PK " ORDER BY name",
	[Q_CLIENT_GET] = "SELECT last_recno FROM clients WHERE vol = ?1 AND "
		"client = ?2",
	[Q_CLIENT_SET] = "INSERT OR REPLACE INTO clients (vol, client, "
		"last_recno) VALUES (?1, ?2, ?3)",
	[Q_READDIR] = "SELECT e.name, o.client, o.seq, o.type, o.mode, o.uid, "
		"o.gid, o.nlink, o.size, o.atime, o.mtime, o.ctime, o.rdev, "
		"o.vv, o.sid_client, o.sid_seq, o.body_client, o.body_seq, "
		"o.xattr_bytes, o.target FROM entries AS e JOIN objects AS o ON "
		"o.vol = e.vol AND o.client = e.cclient AND o.seq = e.cseq "
		"WHERE e.vol = ?1 AND e.dclient = ?2 AND e.dseq = ?3 "
		"ORDER BY e.name",
	[Q_READDIR_COUNT] = "SELECT COUNT(*) FROM entries WHERE vol = ?1 AND "
		"dclient = ?2 AND dseq = ?3",
	[Q_BODIES] = "SELECT vol, client, seq, body_client, body_seq FROM "
		"objects WHERE body_client IS NOT NULL",
	[Q_IDENT_BY_UUID] = "SELECT id FROM identities WHERE uuid = ?1",
	[Q_IDENT_BY_ID] = "SELECT uuid FROM identities WHERE id = ?1",
	[Q_IDENT_INSERT] = "INSERT INTO identities (uuid, created_ns) "
		"VALUES (?1, ?2)",
	[Q_IDENT_COUNT] = "SELECT COUNT(*) FROM identities",
};

static const char schema[] =
	"CREATE TABLE meta (\n"
	"  key TEXT PRIMARY KEY,\n"
	"  value INTEGER NOT NULL\n"
	") WITHOUT ROWID;\n"
	"CREATE TABLE volumes (\n"
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
	"  name TEXT NOT NULL UNIQUE,\n"
	"  quota INTEGER NOT NULL,\n"
	"  usage INTEGER NOT NULL,\n"
	"  objects INTEGER NOT NULL,\n"
	"  stamp INTEGER NOT NULL,\n"
	"  created_ns INTEGER NOT NULL\n"
	");\n"
	"CREATE TABLE objects (\n"
	"  vol INTEGER NOT NULL REFERENCES volumes (id),\n"
	"  client INTEGER NOT NULL,\n"
	"  seq INTEGER NOT NULL,\n"
	"  type INTEGER NOT NULL,\n"
	"  mode INTEGER NOT NULL,\n"
	"  uid INTEGER NOT NULL,\n"
	"  gid INTEGER NOT NULL,\n"
	"  nlink INTEGER NOT NULL,\n"
	"  size INTEGER NOT NULL,\n"
	"  atime INTEGER NOT NULL,\n"
	"  mtime INTEGER NOT NULL,\n"
	"  ctime INTEGER NOT NULL,\n"
	"  rdev INTEGER NOT NULL,\n"
	"  vv BLOB NOT NULL,\n"
	"  sid_client INTEGER NOT NULL,\n"
	"  sid_seq INTEGER NOT NULL,\n"
	"  body_client INTEGER,\n"
	"  body_seq INTEGER,\n"
	"  xattr_bytes INTEGER NOT NULL,\n"
	"  target BLOB,\n"
	"  PRIMARY KEY (vol, client, seq)\n"
	") WITHOUT ROWID;\n"
	"CREATE TABLE entries (\n"
	"  vol INTEGER NOT NULL,\n"
	"  dclient INTEGER NOT NULL,\n"
	"  dseq INTEGER NOT NULL,\n"
	"  name BLOB NOT NULL,\n"
	"  cclient INTEGER NOT NULL,\n"
	"  cseq INTEGER NOT NULL,\n"
	"  PRIMARY KEY (vol, dclient, dseq, name),\n"
	"  FOREIGN KEY (vol, dclient, dseq) REFERENCES objects,\n"
	"  FOREIGN KEY (vol, cclient, cseq) REFERENCES objects\n"
	") WITHOUT ROWID;\n"
	"CREATE INDEX entries_child ON entries (vol, cclient, cseq);\n"
	"CREATE TABLE xattrs (\n"
	"  vol INTEGER NOT NULL,\n"
	"  client INTEGER NOT NULL,\n"
	"  seq INTEGER NOT NULL,\n"
	"  name BLOB NOT NULL,\n"
	"  value BLOB NOT NULL,\n"
	"  PRIMARY KEY (vol, client, seq, name),\n"
	"  FOREIGN KEY (vol, client, seq) REFERENCES objects\n"
	") WITHOUT ROWID;\n"
	"CREATE TABLE clients (\n"
	"  vol INTEGER NOT NULL REFERENCES volumes (id),\n"
	"  client INTEGER NOT NULL,\n"
	"  last_recno INTEGER NOT NULL,\n"
	"  PRIMARY KEY (vol, client)\n"
	") WITHOUT ROWID;\n"
	"CREATE TABLE identities (\n"
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,\n"
	"  uuid BLOB NOT NULL UNIQUE,\n"
	"  created_ns INTEGER NOT NULL\n"
	");\n";

struct store {
	sqlite3 *db;
	sqlite3_stmt *q[Q_N];
	char *dir;
	int dirfd, bodiesfd, tmpfd, lockfd;
	uint64_t epoch;
	struct store_stats stats;
	unsigned int cb_depth;	/* inside a caller's callback */
	bool broken;		/* a COMMIT of unknown outcome */
	uint64_t resize_seq;	/* the last size-change copy's number */
	char why[200];		/* SQLite's last message */
	store_fault_fn fault;
	void *fault_arg;
};

/* ------------------------------------------------------------- helpers */

static void msg(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void msg(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* SQLite's result code as a negative errno; its message kept in s->why. */
static int sqerr(struct store *s, int rc)
{
	int sys = sqlite3_system_errno(s->db);

	snprintf(s->why, sizeof(s->why), "%s", sqlite3_errmsg(s->db));
	switch (rc & 0xff) {
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_READONLY:
		return -EROFS;
	case SQLITE_IOERR:
	case SQLITE_CANTOPEN:
		return sys > 0 ? -sys : -EIO;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		return -EUCLEAN;
	case SQLITE_TOOBIG:
		return -E2BIG;
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EPERM;
	case SQLITE_INTERRUPT:
		return -EINTR;
	default:
		return -EIO;
	}
}

/* Step: 1 a row, 0 done, or a negative errno. */
static int row(struct store *s, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	return sqerr(s, rc);
}

/* Run a statement that returns no rows, then reset it. */
static int done(struct store *s, sqlite3_stmt *st)
{
	int r = row(s, st);

	sqlite3_reset(st);
	return r == 1 ? 0 : r;
}

static int fault(struct store *s, enum store_fault where)
{
	return s->fault ? s->fault(s->fault_arg, where, s->db) : 0;
}

static void bind_u64(sqlite3_stmt *st, int i, uint64_t v)
{
	sqlite3_bind_int64(st, i, (sqlite3_int64)v);
}

static uint64_t col_u64(sqlite3_stmt *st, int i)
{
	return (uint64_t)sqlite3_column_int64(st, i);
}

static void bind_fid(sqlite3_stmt *st, int i, const struct lento_fid *f)
{
	sqlite3_bind_int64(st, i, f->volume);
	sqlite3_bind_int64(st, i + 1, f->client);
	bind_u64(st, i + 2, f->seq);
}

/* A blob bound with a length, never SQL NULL (bind_blob(NULL) is NULL). */
static void bind_bytes(sqlite3_stmt *st, int i, const void *p, size_t len)
{
	if (!len)
		sqlite3_bind_zeroblob(st, i, 0);
	else
		sqlite3_bind_blob(st, i, p, (int)len, SQLITE_STATIC);
}

static void body_name(char buf[BODY_NAME_LEN + 1], const struct lento_fid *f,
		      const struct lento_storeid *sid)
{
	snprintf(buf, BODY_NAME_LEN + 1, FIDFMT ".%08" PRIx32 "-%016" PRIx64,
		 FIDARG(f), sid->client, sid->seq);
}

/* A name body_name() makes, parsed back; false for anything else. */
static bool body_parse(const char *name, struct lento_fid *f,
		       struct lento_storeid *sid)
{
	char again[BODY_NAME_LEN + 1];
	unsigned long long seq, sseq;
	unsigned int vol, client, sclient;

	if (strlen(name) != BODY_NAME_LEN ||
	    sscanf(name, "%8x-%8x-%16llx.%8x-%16llx", &vol, &client, &seq,
		   &sclient, &sseq) != 5)
		return false;
	*f = (struct lento_fid){ vol, client, seq };
	*sid = (struct lento_storeid){ sclient, sseq };
	body_name(again, f, sid);
	return !strcmp(again, name);
}

static const char *op_name(uint16_t op)
{
	static const char *const names[] = {
		[LENTO_OP_CREATE] = "CREATE", [LENTO_OP_MKDIR] = "MKDIR",
		[LENTO_OP_MKNOD] = "MKNOD", [LENTO_OP_SYMLINK] = "SYMLINK",
		[LENTO_OP_LINK] = "LINK", [LENTO_OP_UNLINK] = "UNLINK",
		[LENTO_OP_RMDIR] = "RMDIR", [LENTO_OP_RENAME] = "RENAME",
		[LENTO_OP_SETATTR] = "SETATTR",
		[LENTO_OP_SETXATTR] = "SETXATTR",
		[LENTO_OP_REMOVEXATTR] = "REMOVEXATTR",
		[LENTO_OP_STORE] = "STORE",
		[LENTO_OP_PRUNEXATTRS] = "PRUNEXATTRS",
	};

	return op < sizeof(names) / sizeof(names[0]) && names[op] ?
	       names[op] : "?";
}

bool store_volume_name_ok(const char *name)
{
	size_t len;

	if (!name)
		return false;
	len = strnlen(name, LENTO_VOLNAME_MAX + 1);
	if (!len || len > LENTO_VOLNAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (name[i] < 0x21 || name[i] > 0x7e || name[i] == '/')
			return false;
	return true;
}

/* A directory entry's name: 1..NAME_MAX bytes, no '/', not . or .. */
static bool name_ok(const char name[LENTO_NAME_MAX + 1])
{
	size_t len = strnlen(name, LENTO_NAME_MAX + 1);

	return len && len <= LENTO_NAME_MAX && !memchr(name, '/', len) &&
	       strcmp(name, ".") && strcmp(name, "..");
}

/* ------------------------------------------------------------- objects */

struct obj {
	struct lento_fid fid;
	uint8_t type;
	uint32_t mode, uid, gid, nlink;
	uint64_t size, rdev, xattr_bytes;
	int64_t atime, mtime, ctime;
	struct lento_vv vv;
	bool has_body;
	struct lento_storeid body;
	uint64_t usage0;	/* its usage when loaded or last written */
};

static uint64_t obj_usage(const struct obj *o)
{
	uint64_t u = STORE_OBJ_OVERHEAD + o->xattr_bytes;

	if (o->type == LENTO_T_REG || o->type == LENTO_T_SYMLINK)
		u += o->size;
	return u;
}

static int vv_decode(const void *p, int len, struct lento_vv *vv)
{
	const uint8_t *b = p;

	if (len < 0 || len % 8 || len / 8 > LENTO_VV_MAX)
		return -EUCLEAN;
	memset(vv, 0, sizeof(*vv));
	vv->n = (uint32_t)len / 8;
	for (uint32_t i = 0; i < vv->n; i++)
		for (int k = 7; k >= 0; k--)
			vv->v[i] = vv->v[i] << 8 | b[i * 8 + k];
	return 0;
}

static int vv_encode(const struct lento_vv *vv, uint8_t buf[8 * LENTO_VV_MAX])
{
	uint32_t n = vv->n < LENTO_VV_MAX ? vv->n : LENTO_VV_MAX;

	for (uint32_t i = 0; i < n; i++)
		for (int k = 0; k < 8; k++)
			buf[i * 8 + k] = (uint8_t)(vv->v[i] >> (8 * k));
	return (int)n * 8;
}

/* The 16 OBJ_COLS from column @c of @st. */
static int obj_from_row(sqlite3_stmt *st, int c, struct obj *o)
{
	int r;

	o->type = (uint8_t)sqlite3_column_int(st, c);
	o->mode = (uint32_t)sqlite3_column_int64(st, c + 1);
	o->uid = (uint32_t)sqlite3_column_int64(st, c + 2);
	o->gid = (uint32_t)sqlite3_column_int64(st, c + 3);
	o->nlink = (uint32_t)sqlite3_column_int64(st, c + 4);
	o->size = col_u64(st, c + 5);
	o->atime = sqlite3_column_int64(st, c + 6);
	o->mtime = sqlite3_column_int64(st, c + 7);
	o->ctime = sqlite3_column_int64(st, c + 8);
	o->rdev = col_u64(st, c + 9);
	r = vv_decode(sqlite3_column_blob(st, c + 10),
		      sqlite3_column_bytes(st, c + 10), &o->vv);
	if (r)
		return r;
	o->vv.store.client = (uint32_t)sqlite3_column_int64(st, c + 11);
	o->vv.store.seq = col_u64(st, c + 12);
	o->has_body = sqlite3_column_type(st, c + 13) != SQLITE_NULL;
	o->body.client = (uint32_t)sqlite3_column_int64(st, c + 13);
	o->body.seq = col_u64(st, c + 14);
	o->xattr_bytes = col_u64(st, c + 15);
	o->usage0 = obj_usage(o);
	return 0;
}

static int obj_get(struct store *s, const struct lento_fid *fid,
		   struct obj *o)
{
	sqlite3_stmt *st = s->q[Q_OBJ_GET];
	int r;

	bind_fid(st, 1, fid);
	r = row(s, st);
	if (r == 1) {
		o->fid = *fid;
		r = obj_from_row(st, 0, o);
		if (r)
			snprintf(s->why, sizeof(s->why),
				 "object " FIDFMT ": bad version vector",
				 FIDARG(fid));
	} else if (!r) {
		r = -ENOENT;
	}
	sqlite3_reset(st);
	return r;
}

/* Bind ?4.. the way Q_OBJ_INSERT (@insert) or Q_OBJ_UPDATE wants them. */
static void obj_bind(sqlite3_stmt *st, const struct obj *o, bool insert,
		     uint8_t vvbuf[8 * LENTO_VV_MAX])
{
	int i = 4;

	bind_fid(st, 1, &o->fid);
	if (insert)
		sqlite3_bind_int(st, i, o->type);
	i++;		/* ?4 is the type, which never changes */
	sqlite3_bind_int64(st, i++, o->mode);
	sqlite3_bind_int64(st, i++, o->uid);
	sqlite3_bind_int64(st, i++, o->gid);
	sqlite3_bind_int64(st, i++, o->nlink);
	bind_u64(st, i++, o->size);
	sqlite3_bind_int64(st, i++, o->atime);
	sqlite3_bind_int64(st, i++, o->mtime);
	sqlite3_bind_int64(st, i++, o->ctime);
	bind_u64(st, i++, o->rdev);
	sqlite3_bind_blob(st, i++, vvbuf, vv_encode(&o->vv, vvbuf),
			  SQLITE_STATIC);
	sqlite3_bind_int64(st, i++, o->vv.store.client);
	bind_u64(st, i++, o->vv.store.seq);
	if (o->has_body) {
		sqlite3_bind_int64(st, i++, o->body.client);
		bind_u64(st, i++, o->body.seq);
	} else {
		sqlite3_bind_null(st, i++);
		sqlite3_bind_null(st, i++);
	}
	bind_u64(st, i++, o->xattr_bytes);
}

static int obj_insert(struct store *s, const struct obj *o,
		      const void *target, size_t target_len)
{
	sqlite3_stmt *st = s->q[Q_OBJ_INSERT];
	uint8_t vvbuf[8 * LENTO_VV_MAX];

	obj_bind(st, o, true, vvbuf);
	if (target)
		bind_bytes(st, 20, target, target_len);
	else
		sqlite3_bind_null(st, 20);
	return done(s, st);
}

static int obj_update(struct store *s, const struct obj *o)
{
	sqlite3_stmt *st = s->q[Q_OBJ_UPDATE];
	uint8_t vvbuf[8 * LENTO_VV_MAX];

	obj_bind(st, o, false, vvbuf);
	return done(s, st);
}

static int fid_stmt(struct store *s, enum q which, const struct lento_fid *f)
{
	sqlite3_stmt *st = s->q[which];

	bind_fid(st, 1, f);
	return done(s, st);
}

static void status_from_obj(const struct obj *o, struct lento_status *st)
{
	memset(st, 0, sizeof(*st));
	st->fid = o->fid;
	st->type = o->type;
	st->nlink = o->nlink;
	st->attr.valid = LENTO_A_ALL;
	st->attr.mode = o->mode;
	st->attr.uid = o->uid;
	st->attr.gid = o->gid;
	st->attr.size = o->size;
	st->attr.atime_ns = o->atime;
	st->attr.mtime_ns = o->mtime;
	st->attr.ctime_ns = o->ctime;
	st->attr.rdev = o->rdev;
	st->vv = o->vv;
}

/* Directory @dir's entry @name: its child, or -ENOENT. */
static int ent_get(struct store *s, const struct lento_fid *dir,
		   const char *name, struct lento_fid *child)
{
	sqlite3_stmt *st = s->q[Q_ENT_GET];
	int r;

	bind_fid(st, 1, dir);
	bind_bytes(st, 4, name, strlen(name));
	r = row(s, st);
	if (r == 1) {
		child->volume = dir->volume;
		child->client = (uint32_t)sqlite3_column_int64(st, 0);
		child->seq = col_u64(st, 1);
		r = 0;
	} else if (!r) {
		r = -ENOENT;
	}
	sqlite3_reset(st);
	return r;
}

/* Q_ENT_INSERT or Q_ENT_SET_CHILD. */
static int ent_put(struct store *s, enum q which, const struct lento_fid *dir,
		   const char *name, const struct lento_fid *child)
{
	sqlite3_stmt *st = s->q[which];

	bind_fid(st, 1, dir);
	bind_bytes(st, 4, name, strlen(name));
	sqlite3_bind_int64(st, 5, child->client);
	bind_u64(st, 6, child->seq);
	return done(s, st);
}

static int ent_del(struct store *s, const struct lento_fid *dir,
		   const char *name)
{
	sqlite3_stmt *st = s->q[Q_ENT_DELETE];

	bind_fid(st, 1, dir);
	bind_bytes(st, 4, name, strlen(name));
	return done(s, st);
}

/* 1 if directory @dir has an entry, 0 if not, or an errno. */
static int ent_any(struct store *s, const struct lento_fid *dir)
{
	sqlite3_stmt *st = s->q[Q_ENT_ANY];
	int r;

	bind_fid(st, 1, dir);
	r = row(s, st);
	sqlite3_reset(st);
	return r;
}

/* The directory that holds directory @fid, or -ENOENT (the root). */
static int ent_parent(struct store *s, const struct lento_fid *fid,
		      struct lento_fid *parent)
{
	sqlite3_stmt *st = s->q[Q_ENT_PARENT];
	int r;

	bind_fid(st, 1, fid);
	r = row(s, st);
	if (r == 1) {
		parent->volume = fid->volume;
		parent->client = (uint32_t)sqlite3_column_int64(st, 0);
		parent->seq = col_u64(st, 1);
		r = 0;
	} else if (!r) {
		r = -ENOENT;
	}
	sqlite3_reset(st);
	return r;
}

/* 1 if directory @fid is @anc or inside it, 0 if not, or an errno. */
static int is_within(struct store *s, const struct lento_fid *fid,
		     const struct lento_fid *anc)
{
	struct lento_fid cur = *fid;

	for (unsigned int depth = 0; depth < DEPTH_MAX; depth++) {
		int r;

		if (lento_fid_eq(&cur, anc))
			return 1;
		r = ent_parent(s, &cur, &cur);
		if (r == -ENOENT)
			return 0;
		if (r)
			return r;
	}
	snprintf(s->why, sizeof(s->why), "directory " FIDFMT
		 " is %u levels deep or deeper (or in a loop)", FIDARG(fid),
		 DEPTH_MAX);
	return -ENAMETOOLONG;
}

/* -------------------------------------------------------- transactions */

static int tx_begin(struct store *s)
{
	return done(s, s->q[Q_BEGIN]);
}

static void tx_rollback(struct store *s)
{
	if (!sqlite3_get_autocommit(s->db))
		done(s, s->q[Q_ROLLBACK]);
}

/*
 * COMMIT. If it fails for want of space, memory or the lock, nothing was
 * committed and the transaction is rolled back. Any other failure (an
 * I/O error while syncing the WAL) may have left the commit on disk: the
 * store is then broken until reopened (*unknown set).
 */
static int tx_commit(struct store *s, bool *unknown)
{
	int rc = sqlite3_step(s->q[Q_COMMIT]);
	int r;

	sqlite3_reset(s->q[Q_COMMIT]);
	*unknown = false;
	if (rc == SQLITE_DONE)
		return 0;
	r = sqerr(s, rc);
	switch (rc & 0xff) {
	case SQLITE_FULL:
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
	case SQLITE_NOMEM:
		break;
	default:
		*unknown = true;
		s->broken = true;
	}
	tx_rollback(s);
	return r;
}

bool store_broken(const struct store *s)
{
	return s->broken;
}

#define USABLE(s)							\
	do {								\
		if ((s)->broken)					\
			return -EIO;					\
	} while (0)

#define NOT_IN_CALLBACK(s)						\
	do {								\
		if ((s)->cb_depth)					\
			return -EDEADLK;				\
	} while (0)

/* ---------------------------------------------------------------- open */

static int meta_get(struct store *s, const char *key, uint64_t *v)
{
	sqlite3_stmt *st = s->q[Q_META_GET];
	int r;

	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	r = row(s, st);
	if (r == 1)
		*v = col_u64(st, 0);
	sqlite3_reset(st);
	return r == 1 ? 0 : r ? r : -ENOENT;
}

static int meta_set(struct store *s, const char *key, uint64_t v)
{
	sqlite3_stmt *st = s->q[Q_META_SET];

	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	bind_u64(st, 2, v);
	return done(s, st);
}

static int exec(struct store *s, const char *text)
{
	int rc = sqlite3_exec(s->db, text, NULL, NULL, NULL);

	return rc == SQLITE_OK ? 0 : sqerr(s, rc);
}

static int pragma_int(struct store *s, const char *text, int64_t *v)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(s->db, text, -1, &st, NULL);
	int r;

	if (rc != SQLITE_OK)
		return sqerr(s, rc);
	r = row(s, st);
	if (r == 1)
		*v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return r == 1 ? 0 : r ? r : -EIO;
}

/* Create the schema in a new database, check an existing one's version. */
static int schema_check(struct store *s, char *err, size_t errlen)
{
	int64_t version, tables;
	uint32_t seed;
	int r;

	r = pragma_int(s, "PRAGMA user_version", &version);
	if (!r)
		r = pragma_int(s, "SELECT count(*) FROM sqlite_schema",
			       &tables);
	if (r) {
		msg(err, errlen, "%s/meta.db: %s", s->dir, s->why);
		return r;
	}
	if (version > STORE_SCHEMA_VERSION) {
		msg(err, errlen, "%s/meta.db has schema version %" PRId64
		    ", newer than this lento's (%d): use a newer lento",
		    s->dir, version, STORE_SCHEMA_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (version == STORE_SCHEMA_VERSION)
		return 0;
	if (version != 0 || tables) {
		msg(err, errlen, "%s/meta.db is not a lento store (schema "
		    "version %" PRId64 ", %" PRId64 " tables)", s->dir, version,
		    tables);
		return -EINVAL;
	}
	/* A new store. The epoch counter starts at a random place, so a
	 * store made again in the same place does not repeat epochs. */
	if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
		seed = (uint32_t)now_ns();
	r = exec(s, "BEGIN IMMEDIATE");
	if (!r)
		r = exec(s, schema);
	if (!r) {
		char set[128];

		snprintf(set, sizeof(set),
			 "INSERT INTO meta (key, value) VALUES ('epoch', %"
			 PRIu64 "); PRAGMA user_version = %d; COMMIT",
			 /* below 2^63: SQL reads a larger literal as a REAL */
			 (uint64_t)(seed >> 1) << 32, STORE_SCHEMA_VERSION);
		r = exec(s, set);
	}
	if (r) {
		msg(err, errlen, "%s/meta.db: creating the schema: %s", s->dir,
		    s->why);
		exec(s, "ROLLBACK");
	}
	return r;
}

/* The epoch: the persisted counter + 1, committed before it is used. */
static int epoch_next(struct store *s)
{
	bool unknown;
	int r;

	r = tx_begin(s);
	if (!r)
		r = meta_get(s, "epoch", &s->epoch);
	if (!r)
		r = meta_set(s, "epoch", ++s->epoch);
	if (!r)
		return tx_commit(s, &unknown);
	tx_rollback(s);
	return r;
}

struct bref {
	struct lento_fid fid;
	struct lento_storeid sid;
	bool seen;
};

static int bref_cmp(const void *pa, const void *pb)
{
	const struct bref *a = pa, *b = pb;

#define CMP(x, y) do { if ((x) != (y)) return (x) < (y) ? -1 : 1; } while (0)
	CMP(a->fid.volume, b->fid.volume);
	CMP(a->fid.client, b->fid.client);
	CMP(a->fid.seq, b->fid.seq);
	CMP(a->sid.client, b->sid.client);
	CMP(a->sid.seq, b->sid.seq);
#undef CMP
	return 0;
}

/* Remove every file in tmp/. */
static int gc_tmp(struct store *s)
{
	int fd = dup(s->tmpfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	rewinddir(d);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    !unlinkat(s->tmpfd, de->d_name, 0))
			s->stats.tmp_collected++;
	closedir(d);
	return 0;
}

/* Remove the bodies the metadata does not name; count those it names. */
static int gc_bodies(struct store *s, char *err, size_t errlen)
{
	sqlite3_stmt *st = s->q[Q_BODIES];
	struct bref *refs = NULL, key;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d = NULL;
	int fd, r;

	while ((r = row(s, st)) == 1) {
		struct bref *p = array_grow(refs, &cap, n, 1, sizeof(*refs));

		if (!p) {
			r = -ENOMEM;
			break;
		}
		refs = p;
		refs[n].fid.volume = (uint32_t)sqlite3_column_int64(st, 0);
		refs[n].fid.client = (uint32_t)sqlite3_column_int64(st, 1);
		refs[n].fid.seq = col_u64(st, 2);
		refs[n].sid.client = (uint32_t)sqlite3_column_int64(st, 3);
		refs[n].sid.seq = col_u64(st, 4);
		refs[n].seen = false;
		n++;
	}
	sqlite3_reset(st);
	if (r) {
		msg(err, errlen, "%s: listing bodies: %s", s->dir,
		    r == -ENOMEM ? "out of memory" : s->why);
		goto out;
	}
	if (n)
		qsort(refs, n, sizeof(*refs), bref_cmp);
	fd = dup(s->bodiesfd);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		r = -errno;
		if (fd >= 0)
			close(fd);
		msg(err, errlen, "%s/bodies: %s", s->dir, strerror(-r));
		goto out;
	}
	rewinddir(d);
	while ((de = readdir(d))) {
		struct bref *hit;

		if (!body_parse(de->d_name, &key.fid, &key.sid))
			continue;	/* not ours: left alone */
		hit = n ? bsearch(&key, refs, n, sizeof(*refs), bref_cmp) :
			  NULL;
		if (hit)
			hit->seen = true;
		else if (!unlinkat(s->bodiesfd, de->d_name, 0))
			s->stats.bodies_collected++;
	}
	closedir(d);
	for (size_t i = 0; i < n; i++) {
		if (refs[i].seen)
			s->stats.bodies++;
		else
			s->stats.bodies_missing++;
	}
	if (s->stats.bodies_collected && fsync(s->bodiesfd)) {
		r = -errno;
		msg(err, errlen, "%s/bodies: fsync: %s", s->dir, strerror(-r));
	}
out:
	free(refs);
	return r;
}

static int open_subdir(struct store *s, const char *name, int *fd, char *err,
		       size_t errlen)
{
	if (mkdirat(s->dirfd, name, 0700) && errno != EEXIST) {
		msg(err, errlen, "%s/%s: %s", s->dir, name, strerror(errno));
		return -errno;
	}
	*fd = openat(s->dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*fd < 0) {
		msg(err, errlen, "%s/%s: %s", s->dir, name, strerror(errno));
		return -errno;
	}
	return 0;
}

int store_open(const char *dir, struct store **out, char *err, size_t errlen)
{
	struct store *s;
	char *path = NULL;
	int64_t fk = 0;
	int r, rc;

	*out = NULL;
	msg(err, errlen, "%s", "");
	s = calloc(1, sizeof(*s));
	if (!s || !(s->dir = strdup(dir))) {
		free(s);
		msg(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->dirfd = s->bodiesfd = s->tmpfd = s->lockfd = -1;
	if (mkdir(dir, 0700) && errno != EEXIST) {
		r = -errno;
		msg(err, errlen, "%s: %s", dir, strerror(errno));
		goto fail;
	}
	s->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->dirfd < 0) {
		r = -errno;
		msg(err, errlen, "%s: %s", dir, strerror(errno));
		goto fail;
	}
	s->lockfd = openat(s->dirfd, "lock", O_RDWR | O_CREAT | O_CLOEXEC,
			   0600);
	if (s->lockfd < 0 || flock(s->lockfd, LOCK_EX | LOCK_NB)) {
		r = errno == EWOULDBLOCK ? -EBUSY : -errno;
		msg(err, errlen, "%s/lock: %s", dir, r == -EBUSY ?
		    "the store is open in another process" : strerror(-r));
		goto fail;
	}
	r = open_subdir(s, "bodies", &s->bodiesfd, err, errlen);
	if (!r)
		r = open_subdir(s, "tmp", &s->tmpfd, err, errlen);
	if (r)
		goto fail;

	if (asprintf(&path, "%s/meta.db", dir) < 0) {
		path = NULL;
		r = -ENOMEM;
		msg(err, errlen, "out of memory");
		goto fail;
	}
	rc = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE |
			     SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX |
			     SQLITE_OPEN_EXRESCODE, NULL);
	if (rc != SQLITE_OK) {
		r = s->db ? sqerr(s, rc) : -ENOMEM;
		msg(err, errlen, "%s: %s", path, s->db ? s->why :
		    "out of memory");
		goto fail;
	}
	sqlite3_busy_timeout(s->db, 2000);
	r = schema_check(s, err, errlen);
	if (r)
		goto fail;
	{
		sqlite3_stmt *st;
		const char *mode = NULL;

		/* journal_mode answers with the mode it is in. */
		rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode = WAL", -1,
					&st, NULL);
		if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
			mode = (const char *)sqlite3_column_text(st, 0);
		r = mode && !strcmp(mode, "wal") ? 0 : -EIO;
		if (rc == SQLITE_OK)
			sqlite3_finalize(st);
		if (r) {
			msg(err, errlen, "%s: cannot use WAL mode", path);
			goto fail;
		}
	}
	r = exec(s, "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON");
	if (!r)
		r = pragma_int(s, "PRAGMA foreign_keys", &fk);
	if (!r && fk != 1)
		r = -EIO;
	if (r) {
		msg(err, errlen, "%s: cannot set synchronous = FULL and "
		    "foreign keys on: %s", path, s->why);
		goto fail;
	}
	for (int i = 0; i < Q_N; i++) {
		rc = sqlite3_prepare_v3(s->db, sql[i], -1,
					SQLITE_PREPARE_PERSISTENT, &s->q[i],
					NULL);
		if (rc != SQLITE_OK) {
			r = sqerr(s, rc);
			msg(err, errlen, "%s: preparing \"%s\": %s", path,
			    sql[i], s->why);
			goto fail;
		}
	}
	r = epoch_next(s);
	if (r) {
		msg(err, errlen, "%s: the epoch: %s", path, s->why);
		goto fail;
	}
	s->stats.epoch = s->epoch;
	r = gc_tmp(s);
	if (r) {
		msg(err, errlen, "%s/tmp: %s", dir, strerror(-r));
		goto fail;
	}
	r = gc_bodies(s, err, errlen);
	if (r)
		goto fail;
	free(path);
	*out = s;
	return 0;
fail:
	free(path);
	store_close(s);
	return r;
}

void store_close(struct store *s)
{
	if (!s)
		return;
	for (int i = 0; i < Q_N; i++)
		sqlite3_finalize(s->q[i]);
	if (s->db)
		sqlite3_close(s->db);
	if (s->tmpfd >= 0)
		close(s->tmpfd);
	if (s->bodiesfd >= 0)
		close(s->bodiesfd);
	if (s->lockfd >= 0)
		close(s->lockfd);	/* drops the flock */
	if (s->dirfd >= 0)
		close(s->dirfd);
	free(s->dir);
	free(s);
}

uint64_t store_epoch(const struct store *s)
{
	return s->epoch;
}

void store_stats(const struct store *s, struct store_stats *st)
{
	*st = s->stats;
}

void store_set_fault(struct store *s, store_fault_fn fn, void *arg)
{
	s->fault = fn;
	s->fault_arg = arg;
}

/* ------------------------------------------------------------- volumes */

static void vol_from_row(sqlite3_stmt *st, struct store_volume *v)
{
	const unsigned char *name = sqlite3_column_text(st, 1);

	memset(v, 0, sizeof(*v));
	v->id = (uint32_t)sqlite3_column_int64(st, 0);
	snprintf(v->name, sizeof(v->name), "%s", name ? (const char *)name :
		 "");
	v->root = LENTO_ROOT_FID(v->id);
	v->quota = col_u64(st, 2);
	v->usage = col_u64(st, 3);
	v->objects = col_u64(st, 4);
	v->stamp = col_u64(st, 5);
	v->created_ns = sqlite3_column_int64(st, 6);
}

static int vol_by_name(struct store *s, const char *name,
		       struct store_volume *v)
{
	sqlite3_stmt *st = s->q[Q_VOL_BY_NAME];
	int r;

	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	r = row(s, st);
	if (r == 1)
		vol_from_row(st, v);
	sqlite3_reset(st);
	return r == 1 ? 0 : r ? r : -ENOENT;
}

static int vol_by_id(struct store *s, uint32_t id, struct store_volume *v)
{
	sqlite3_stmt *st = s->q[Q_VOL_BY_ID];
	int r;

	sqlite3_bind_int64(st, 1, id);
	r = row(s, st);
	if (r == 1)
		vol_from_row(st, v);
	sqlite3_reset(st);
	return r == 1 ? 0 : r ? r : -ENOENT;
}

int store_volume_lookup(struct store *s, const char *name,
			struct store_volume *out)
{
	USABLE(s);
	/*
	 * No volume has such a name (a space, say, which the wire allows):
	 * a lookup of it finds none, as of any other name not taken.
	 */
	if (!store_volume_name_ok(name))
		return -ENOENT;
	return vol_by_name(s, name, out);
}

int store_volume_get(struct store *s, uint32_t id, struct store_volume *out)
{
	USABLE(s);
	return vol_by_id(s, id, out);
}

int store_volume_create(struct store *s, const char *name, uint64_t quota,
			uint32_t uid, uint32_t gid, struct store_volume *out,
			char *err, size_t errlen)
{
	struct store_volume v;
	sqlite3_stmt *st;
	struct obj root;
	sqlite3_int64 id;
	int64_t now = now_ns();
	bool unknown;
	int r;

	USABLE(s);
	NOT_IN_CALLBACK(s);
	if (!store_volume_name_ok(name)) {
		msg(err, errlen, "bad volume name: 1 to %d printable "
		    "characters, no '/' and no space", LENTO_VOLNAME_MAX);
		return -EINVAL;
	}
	if (quota > INT64_MAX) {
		msg(err, errlen, "quota too large");
		return -EINVAL;
	}
	r = tx_begin(s);
	if (r)
		goto sqlfail;
	r = vol_by_name(s, name, &v);
	if (!r) {
		tx_rollback(s);
		msg(err, errlen, "volume %s exists (id %" PRIu32 ")", name,
		    v.id);
		return -EEXIST;
	}
	if (r != -ENOENT)
		goto sqlfail;
	st = s->q[Q_VOL_INSERT];
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	bind_u64(st, 2, quota);
	sqlite3_bind_int64(st, 3, STORE_OBJ_OVERHEAD);
	sqlite3_bind_int64(st, 4, now);
	r = done(s, st);
	if (r)
		goto sqlfail;
	id = sqlite3_last_insert_rowid(s->db);
	if (id <= 0 || id > UINT32_MAX) {
		tx_rollback(s);
		msg(err, errlen, "no volume ids left");
		return -EOVERFLOW;
	}
	memset(&root, 0, sizeof(root));
	root.fid = LENTO_ROOT_FID((uint32_t)id);
	root.type = LENTO_T_DIR;
	root.mode = 0755;
	root.uid = uid;
	root.gid = gid;
	root.nlink = 2;
	root.atime = root.mtime = root.ctime = now;
	lento_vv_init(&root.vv, SERVER_COUNT);
	root.vv.v[SERVER_INDEX] = 1;
	r = obj_insert(s, &root, NULL, 0);
	if (r)
		goto sqlfail;
	r = tx_commit(s, &unknown);
	if (r) {
		msg(err, errlen, "committing volume %s: %s", name, s->why);
		return r;
	}
	if (out)
		return vol_by_id(s, (uint32_t)id, out);
	return 0;
sqlfail:
	tx_rollback(s);
	msg(err, errlen, "creating volume %s: %s", name, s->why);
	return r;
}

int store_volume_list(struct store *s, store_volume_fn fn, void *arg)
{
	sqlite3_stmt *st = s->q[Q_VOL_LIST];
	struct store_volume v;
	int r;

	USABLE(s);
	if (sqlite3_stmt_busy(st))
		return -EDEADLK;
	while ((r = row(s, st)) == 1) {
		vol_from_row(st, &v);
		s->cb_depth++;
		r = fn(arg, &v);
		s->cb_depth--;
		if (r)
			break;
	}
	sqlite3_reset(st);
	return r;
}

int store_volume_set_quota(struct store *s, const char *name, uint64_t quota,
			   char *err, size_t errlen)
{
	struct store_volume v;
	sqlite3_stmt *st = s->q[Q_VOL_QUOTA];
	int r;

	USABLE(s);
	NOT_IN_CALLBACK(s);
	if (quota > INT64_MAX) {
		msg(err, errlen, "quota too large");
		return -EINVAL;
	}
	r = store_volume_lookup(s, name, &v);
	if (r) {
		msg(err, errlen, "volume %s: %s", name,
		    r == -ENOENT ? "no such volume" : s->why);
		return r;
	}
	sqlite3_bind_int64(st, 1, v.id);
	bind_u64(st, 2, quota);
	r = done(s, st);
	if (r)
		msg(err, errlen, "volume %s: %s", name, s->why);
	return r;
}

/* Remove the body files of volume @id (after the metadata is gone). */
static void remove_volume_bodies(struct store *s, uint32_t id)
{
	char prefix[16];
	int fd = dup(s->bodiesfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;		/* the next open collects them */
	}
	snprintf(prefix, sizeof(prefix), "%08" PRIx32 "-", id);
	rewinddir(d);
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, prefix, 9))
			unlinkat(s->bodiesfd, de->d_name, 0);
	closedir(d);
}

int store_volume_remove(struct store *s, const char *name, char *err,
			size_t errlen)
{
	static const enum q steps[] = {
		Q_VOL_DEL_ENTRIES, Q_VOL_DEL_XATTRS, Q_VOL_DEL_OBJECTS,
		Q_VOL_DEL_CLIENTS, Q_VOL_DELETE,
	};
	struct store_volume v;
	bool unknown;
	int r;

	USABLE(s);
	NOT_IN_CALLBACK(s);
	if (!store_volume_name_ok(name)) {
		msg(err, errlen, "bad volume name");
		return -EINVAL;
	}
	r = tx_begin(s);
	if (r)
		goto fail;
	r = vol_by_name(s, name, &v);
	if (r == -ENOENT) {
		tx_rollback(s);
		msg(err, errlen, "no volume %s", name);
		return r;
	}
	for (size_t i = 0; !r && i < sizeof(steps) / sizeof(steps[0]); i++) {
		sqlite3_stmt *st = s->q[steps[i]];

		sqlite3_bind_int64(st, 1, v.id);
		r = done(s, st);
	}
	if (r)
		goto fail;
	r = tx_commit(s, &unknown);
	if (r) {
		msg(err, errlen, "removing volume %s: %s", name, s->why);
		return r;
	}
	remove_volume_bodies(s, v.id);
	return 0;
fail:
	tx_rollback(s);
	msg(err, errlen, "removing volume %s: %s", name, s->why);
	return r;
}

/* --------------------------------------------------------------- reads */

int store_getattr(struct store *s, const struct lento_fid *fid,
		  struct lento_status *st, char *target, size_t target_size,
		  store_xattr_fn fn, void *arg)
{
	struct obj o;
	int r;

	USABLE(s);
	r = obj_get(s, fid, &o);
	if (r)
		return r;
	status_from_obj(&o, st);
	if (target && target_size) {
		sqlite3_stmt *q = s->q[Q_OBJ_TARGET];
		int len;

		target[0] = '\0';
		bind_fid(q, 1, fid);
		r = row(s, q);
		if (r == 1) {
			len = sqlite3_column_bytes(q, 0);
			if ((size_t)len >= target_size) {
				r = -ENAMETOOLONG;
			} else {
				if (len)
					memcpy(target,
					       sqlite3_column_blob(q, 0),
					       (size_t)len);
				target[len] = '\0';
				r = 0;
			}
		}
		sqlite3_reset(q);
		if (r)
			return r;
	}
	if (fn) {
		sqlite3_stmt *q = s->q[Q_XATTR_LIST];
		char name[LENTO_XATTR_NAME_MAX + 1];

		if (sqlite3_stmt_busy(q))
			return -EDEADLK;
		bind_fid(q, 1, fid);
		while ((r = row(s, q)) == 1) {
			int len = sqlite3_column_bytes(q, 0);

			if (len > LENTO_XATTR_NAME_MAX)
				len = LENTO_XATTR_NAME_MAX;
			memcpy(name, sqlite3_column_blob(q, 0), (size_t)len);
			name[len] = '\0';
			s->cb_depth++;
			r = fn(arg, name, sqlite3_column_blob(q, 1),
			       (size_t)sqlite3_column_bytes(q, 1));
			s->cb_depth--;
			if (r)
				break;
		}
		sqlite3_reset(q);
	}
	return r;
}

int store_readdir(struct store *s, const struct lento_fid *dir,
		  store_dirent_fn fn, void *arg)
{
	sqlite3_stmt *st = s->q[Q_READDIR];
	struct lento_dirent de;
	struct obj d, o;
	int r;

	USABLE(s);
	if (sqlite3_stmt_busy(st))
		return -EDEADLK;
	r = obj_get(s, dir, &d);
	if (r)
		return r;
	if (d.type != LENTO_T_DIR)
		return -ENOTDIR;
	bind_fid(st, 1, dir);
	while ((r = row(s, st)) == 1) {
		int len = sqlite3_column_bytes(st, 0);

		if (len < 1 || len > LENTO_NAME_MAX) {
			r = -EUCLEAN;
			break;
		}
		memcpy(de.name, sqlite3_column_blob(st, 0), (size_t)len);
		de.name[len] = '\0';
		o.fid.volume = dir->volume;
		o.fid.client = (uint32_t)sqlite3_column_int64(st, 1);
		o.fid.seq = col_u64(st, 2);
		r = obj_from_row(st, 3, &o);
		if (r)
			break;
		status_from_obj(&o, &de.st);
		s->cb_depth++;
		r = fn(arg, &de, sqlite3_column_blob(st, 19),
		       (uint32_t)sqlite3_column_bytes(st, 19),
		       o.xattr_bytes > 0);
		s->cb_depth--;
		if (r)
			break;
	}
	sqlite3_reset(st);
	return r;
}

int store_readdir_count(struct store *s, const struct lento_fid *dir,
			uint64_t *n)
{
	sqlite3_stmt *st = s->q[Q_READDIR_COUNT];
	struct obj d;
	int r;

	USABLE(s);
	r = obj_get(s, dir, &d);
	if (r)
		return r;
	if (d.type != LENTO_T_DIR)
		return -ENOTDIR;
	bind_fid(st, 1, dir);
	r = row(s, st);
	*n = r == 1 ? col_u64(st, 0) : 0;
	sqlite3_reset(st);
	return r < 0 ? r : 0;
}

int store_spool(struct store *s)
{
	char path[4096];
	int fd;

	USABLE(s);
	fd = openat(s->tmpfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR))
		return fd < 0 ? -errno : fd;
	/* No O_TMPFILE here: a name, gone at once. */
	fd = store_body_tmp(s, path, sizeof(path));
	if (fd >= 0)
		unlink(path);
	return fd;
}

int store_body_open(struct store *s, const struct lento_fid *fid,
		    const struct lento_vv *expect, int *fd, uint64_t *size,
		    struct lento_vv *vv)
{
	char name[BODY_NAME_LEN + 1];
	struct obj o;
	int r;

	USABLE(s);
	*fd = -1;
	r = obj_get(s, fid, &o);
	if (r)
		return r;
	if (vv)
		*vv = o.vv;
	if (o.type == LENTO_T_DIR)
		return -EISDIR;
	if (o.type != LENTO_T_REG)
		return -EINVAL;
	if (expect && !lento_vv_eq(expect, &o.vv))
		return -ESTALE;
	if (o.has_body) {
		body_name(name, &o.fid, &o.body);
		*fd = openat(s->bodiesfd, name, O_RDONLY | O_CLOEXEC);
		if (*fd < 0)
			return errno == ENOENT ? -EIO : -errno;
	} else {
		*fd = memfd_create("lento-empty", MFD_CLOEXEC);
		if (*fd < 0)
			return -errno;
	}
	*size = o.has_body ? o.size : 0;
	return 0;
}

int store_body_tmp(struct store *s, char *path, size_t pathlen)
{
	int fd;

	USABLE(s);
	if ((size_t)snprintf(path, pathlen, "%s/tmp/in.XXXXXX", s->dir) >=
	    pathlen)
		return -ENAMETOOLONG;
	fd = mkostemp(path, O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* ---------------------------------------------------------- validation */

int store_validate(struct store *s, uint32_t volume, uint64_t stamp,
		   bool *current, uint64_t *now)
{
	struct store_volume v;
	int r;

	USABLE(s);
	r = vol_by_id(s, volume, &v);
	if (r)
		return r;
	*current = v.stamp == stamp;
	if (now)
		*now = v.stamp;
	return 0;
}

int store_validate_objects(struct store *s, const struct lento_fid *fids,
			   const struct lento_vv *vvs, size_t n, bool *changed)
{
	struct obj o;
	bool tx = sqlite3_get_autocommit(s->db) && !s->cb_depth;
	int count = 0, r;

	USABLE(s);
	r = tx ? exec(s, "BEGIN") : 0;	/* one snapshot for all of them */
	if (r)
		return r;
	for (size_t i = 0; i < n; i++) {
		r = obj_get(s, &fids[i], &o);
		if (r && r != -ENOENT)
			break;
		changed[i] = r == -ENOENT || !lento_vv_eq(&o.vv, &vvs[i]);
		count += changed[i];
		r = 0;
	}
	if (tx)
		exec(s, "COMMIT");
	return r ? r : count;
}

/* ------------------------------------------------------- reintegration */

/* A body this batch made some object's content. */
struct pend {
	struct lento_fid fid;
	struct lento_storeid sid;
	size_t rec;		/* the record that made it */
	int fd;			/* the caller's fd, or -1 */
	const char *path;	/* else the caller's path, or NULL */
	char *own;		/* else our copy in tmp/ (a size change) */
	bool placed;		/* in bodies/ now */
};

/* A committed body the batch supersedes: removed after the commit. */
struct doom {
	struct lento_fid fid;
	struct lento_storeid sid;
};

struct batch {
	struct store *s;
	uint32_t vol, client;
	const struct lento_rec *recs;
	const struct store_body *bodies;
	size_t i;			/* the record being applied */
	uint64_t first_recno;		/* the first new record's */
	int64_t usage_delta, objects_delta;
	struct pend *pend;
	size_t npend, pcap;
	struct doom *doom;
	size_t ndoom, dcap;
	struct store_resize *rz;	/* copies made ready (or NULL) */
	size_t nrz;
	struct store_result *res;
};

static int bfail(struct batch *b, int err, const struct lento_fid *fid,
		 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int bfail(struct batch *b, int err, const struct lento_fid *fid,
		 const char *fmt, ...)
{
	struct store_result *res = b->res;
	const struct lento_rec *r = &b->recs[b->i];
	va_list ap;
	int len;

	res->outcome = STORE_FAILED;
	res->err = err;
	res->rec = (ssize_t)b->i;
	if (fid)
		res->fid = *fid;
	len = snprintf(res->msg, sizeof(res->msg), "record %zu (%s, recno %"
		       PRIu64 "): ", b->i, op_name(r->op), r->recno);
	if (len < 0 || (size_t)len >= sizeof(res->msg))
		return err;
	va_start(ap, fmt);
	vsnprintf(res->msg + len, sizeof(res->msg) - (size_t)len, fmt, ap);
	va_end(ap);
	return err;
}

/* A database error while applying record b->i. */
static int bsql(struct batch *b, int err)
{
	return bfail(b, err, NULL, "database: %s", b->s->why);
}

static int check_base(struct batch *b, const struct obj *o,
		      const struct lento_vv *base, const char *what)
{
	struct store_result *res = b->res;
	const struct lento_rec *r = &b->recs[b->i];
	char have[128], want[128];

	if (lento_vv_eq(&o->vv, base))
		return 0;
	res->outcome = STORE_CONFLICT;
	res->err = -ESTALE;
	res->rec = (ssize_t)b->i;
	res->fid = o->fid;
	res->base = *base;
	res->current = o->vv;
	lento_vv_format(&o->vv, have, sizeof(have));
	lento_vv_format(base, want, sizeof(want));
	snprintf(res->msg, sizeof(res->msg), "record %zu (%s, recno %" PRIu64
		 "): conflict: %s " FIDFMT " is at version %s, the record is "
		 "based on %s", b->i, op_name(r->op), r->recno, what,
		 FIDARG(&o->fid), have, want);
	return -ESTALE;
}

/*
 * The base of the directory whose names record b->i changes. Names merge:
 * the record's own preconditions (a name free, a name there, a directory
 * empty) are checked as it is applied, so a version others moved is no
 * conflict; the directory is noted stale for the client instead.
 */
static void parent_base(struct batch *b, const struct obj *d,
			const struct lento_vv *base)
{
	struct store_result *res = b->res;

	if (lento_vv_eq(&d->vv, base) || res->stale_more)
		return;
	for (size_t i = 0; i < res->nstale; i++)
		if (lento_fid_eq(&res->stale[i], &d->fid))
			return;
	if (res->nstale == STORE_STALE_MAX)
		res->stale_more = true;
	else
		res->stale[res->nstale++] = d->fid;
}

/*
 * An object's base: checked, but a directory's merges as its names do
 * (parent_base): moving or removing one another client changed loses
 * nothing of theirs -- its names move with it, and only an empty one
 * goes (ENOTEMPTY otherwise). Its attributes, set by SETATTR, are
 * checked like any object's.
 */
static int obj_base(struct batch *b, const struct obj *o,
		    const struct lento_vv *base, const char *what)
{
	if (o->type != LENTO_T_DIR)
		return check_base(b, o, base, what);
	parent_base(b, o, base);
	return 0;
}

static int load(struct batch *b, const struct lento_fid *fid, struct obj *o,
		const char *what, bool dir)
{
	int r = obj_get(b->s, fid, o);

	if (r == -ENOENT)
		return bfail(b, r, fid, "%s " FIDFMT " does not exist", what,
			     FIDARG(fid));
	if (r)
		return bsql(b, r);
	if (dir && o->type != LENTO_T_DIR)
		return bfail(b, -ENOTDIR, fid, "%s " FIDFMT " is not a "
			     "directory", what, FIDARG(fid));
	return 0;
}

/* The record's change to @o: its counter + 1, StoreId {client, recno}. */
static int touch(struct batch *b, struct obj *o)
{
	struct lento_storeid sid = { b->client, b->recs[b->i].recno };
	int r = lento_vv_bump(&o->vv, SERVER_INDEX, sid);

	return r ? bfail(b, r, &o->fid, "version counter overflow") : 0;
}

/* Write @o back, accounting for its change in usage. */
static int put(struct batch *b, struct obj *o)
{
	int r = obj_update(b->s, o);
	uint64_t u = obj_usage(o);

	if (r)
		return bsql(b, r);
	b->usage_delta += (int64_t)u - (int64_t)o->usage0;
	o->usage0 = u;
	return 0;
}

/* Was @o's content made by this batch (not yet committed anywhere)? */
static bool body_is_new(const struct batch *b, const struct obj *o)
{
	return o->body.client == b->client && o->body.seq >= b->first_recno;
}

/* @o's content is about to be replaced or dropped. */
static int drop_body(struct batch *b, struct obj *o)
{
	if (o->has_body && !body_is_new(b, o)) {
		struct doom *p = array_grow(b->doom, &b->dcap, b->ndoom, 1,
					    sizeof(*p));

		if (!p)
			return bfail(b, -ENOMEM, &o->fid, "out of memory");
		b->doom = p;
		b->doom[b->ndoom++] = (struct doom){ o->fid, o->body };
	}
	o->has_body = false;
	return 0;
}

static struct pend *add_pend(struct batch *b, const struct obj *o)
{
	struct pend *p;

	p = array_grow(b->pend, &b->pcap, b->npend, 1, sizeof(*p));
	if (!p) {
		bfail(b, -ENOMEM, &o->fid, "out of memory");
		return NULL;
	}
	b->pend = p;
	p = &b->pend[b->npend++];
	memset(p, 0, sizeof(*p));
	p->fid = o->fid;
	p->sid = (struct lento_storeid){ b->client, b->recs[b->i].recno };
	p->rec = b->i;
	p->fd = -1;
	return p;
}

/* The new body this batch's record @rec made (pend is in record order). */
static struct pend *find_pend(struct batch *b, size_t rec)
{
	size_t lo = 0, hi = b->npend;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->pend[mid].rec == rec)
			return &b->pend[mid];
		if (b->pend[mid].rec < rec)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Copy @len bytes from @in to @out, at offset @off in both. */
static int copy_bytes(int in, int out, uint64_t off, uint64_t len)
{
	loff_t off_in = (loff_t)off, off_out = (loff_t)off;
	char buf[65536];
	bool plain = false;

	while (len) {
		size_t chunk = len > (1 << 30) ? 1 << 30 : (size_t)len;
		ssize_t n;

		if (!plain) {
			n = copy_file_range(in, &off_in, out, &off_out, chunk,
					    0);
			if (n < 0 && (errno == EXDEV || errno == EINVAL ||
				      errno == ENOSYS || errno == EOPNOTSUPP)) {
				plain = true;
				continue;
			}
		} else {
			n = pread(in, buf, chunk < sizeof(buf) ? chunk :
				  sizeof(buf), off_in);
			if (n > 0) {
				ssize_t w = pwrite(out, buf, (size_t)n,
						   off_out);

				if (w != n)
					return w < 0 ? -errno : -EIO;
				off_in += n;
				off_out += n;
			}
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (!n)
			return -EIO;	/* the source is shorter than said */
		len -= (uint64_t)n;
	}
	return 0;
}

/*
 * The first @len bytes of @in into @out (empty), holes left holes: a
 * file grown by a size change is sparse, and copying its zeros would
 * make them real -- a file grown to a TiB and then by a byte would be
 * written whole. copy_file_range() fills holes on ext4.
 */
static int copy_data(int in, int out, uint64_t len)
{
	uint64_t pos = 0;
	struct stat sb;
	int r;

	if (fstat(in, &sb))
		return -errno;
	if ((uint64_t)sb.st_size < len)
		return -EIO;	/* the source is shorter than said */
	while (pos < len) {
		off_t data = lseek(in, (off_t)pos, SEEK_DATA), hole;

		if (data < 0 && errno == ENXIO)
			return 0;		/* holes to the end */
		if (data < 0)	/* no SEEK_DATA here: all of it */
			return errno == EINVAL ?
			       copy_bytes(in, out, pos, len - pos) : -errno;
		if ((uint64_t)data >= len)
			return 0;
		hole = lseek(in, data, SEEK_HOLE);
		if (hole < 0)
			return -errno;
		if ((uint64_t)hole > len)
			hole = (off_t)len;
		r = copy_bytes(in, out, (uint64_t)data,
			       (uint64_t)(hole - data));
		if (r)
			return r;
		pos = (uint64_t)hole;
	}
	return 0;
}

/*
 * A size change of regular file @o: its new content is the first
 * min(old, new) bytes of the current one, extended with zeros, in a file
 * of ours in tmp/ named after the new version (made durable with the
 * batch's other bodies, place_bodies()).
 */
static bool sid_eq(const struct lento_storeid *a,
		   const struct lento_storeid *b)
{
	return a->client == b->client && a->seq == b->seq;
}

/* A copy made ready for this size change of @o, if there is one. */
static struct store_resize *ready_resize(struct batch *b,
					 const struct obj *o,
					 const struct lento_storeid *sid,
					 uint64_t size)
{
	uint64_t len = o->size < size ? o->size : size;

	for (size_t k = 0; k < b->nrz; k++) {
		struct store_resize *r = &b->rz[k];

		if (r->made && !r->taken && lento_fid_eq(&r->fid, &o->fid) &&
		    sid_eq(&r->sid, sid) && r->src_has == o->has_body &&
		    (!o->has_body || sid_eq(&r->src, &o->body)) &&
		    r->len == len && r->size == size)
			return r;
	}
	return NULL;
}

/*
 * A size change of content an earlier size change of this batch made in
 * tmp/ (@src's file): no one else has that file, and nothing places it
 * once it is superseded, so it is cut and extended where it is and
 * becomes this version's. A batch of a thousand size changes of a big
 * file copies it once, not a thousand times (filling tmp/ and holding
 * the loop).
 */
static int resize_in_place(struct batch *b, struct obj *o, size_t src,
			   const struct lento_storeid *sid, uint64_t size)
{
	uint64_t keep = o->size < size ? o->size : size;
	struct pend *p;
	int fd, r = 0;

	fd = openat(b->s->tmpfd, b->pend[src].own, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return bfail(b, -errno, &o->fid, "opening its content: %s",
			     strerror(errno));
	if (ftruncate(fd, (off_t)keep) || ftruncate(fd, (off_t)size))
		r = bfail(b, -errno, &o->fid, "resizing its content: %s",
			  strerror(errno));
	close(fd);
	if (r)
		return r;
	p = add_pend(b, o);	/* may move b->pend */
	if (!p)
		return b->res->err;
	p->own = b->pend[src].own;
	b->pend[src].own = NULL;
	o->body = *sid;
	return 0;
}

static int resize_body(struct batch *b, struct obj *o, uint64_t size)
{
	struct store *s = b->s;
	struct lento_storeid sid = { b->client, b->recs[b->i].recno };
	char name[BODY_NAME_LEN + 3], bname[BODY_NAME_LEN + 1];
	struct store_resize *ready = ready_resize(b, o, &sid, size);
	int in = -1, out = -1, r = 0;
	bool close_in = true;
	struct pend *p;

	if (ready) {		/* made off the loop: taken as it is */
		p = add_pend(b, o);
		if (!p)
			return b->res->err;
		p->own = strdup(ready->name);
		if (!p->own) {
			b->npend--;
			return bfail(b, -ENOMEM, &o->fid, "out of memory");
		}
		ready->taken = true;
		r = drop_body(b, o);
		if (!r) {
			o->has_body = true;
			o->body = sid;
		}
		return r;
	}

	if (o->has_body && body_is_new(b, o)) {
		struct pend *src = find_pend(b, (size_t)(o->body.seq -
							 b->recs[0].recno));

		if (!src)
			return bfail(b, -EIO, &o->fid, "lost a new body");
		if (src->own)
			return resize_in_place(b, o, (size_t)(src - b->pend),
					       &sid, size);
		if (src->fd >= 0) {
			in = src->fd;
			close_in = false;
		} else {
			in = open(src->path, O_RDONLY | O_CLOEXEC);
		}
	} else if (o->has_body) {
		body_name(bname, &o->fid, &o->body);
		in = openat(s->bodiesfd, bname, O_RDONLY | O_CLOEXEC);
	}
	if (o->has_body && in < 0)
		return bfail(b, -errno, &o->fid, "opening its content: %s",
			     strerror(errno));
	body_name(bname, &o->fid, &sid);
	snprintf(name, sizeof(name), "t.%s", bname);
	out = openat(s->tmpfd, name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
		     0600);
	if (out < 0) {
		r = bfail(b, -errno, &o->fid, "tmp/%s: %s", name,
			  strerror(errno));
		goto out;
	}
	p = add_pend(b, o);
	if (!p) {
		r = b->res->err;
		unlinkat(s->tmpfd, name, 0);
		goto out;
	}
	p->own = strdup(name);
	if (!p->own) {
		unlinkat(s->tmpfd, name, 0);
		b->npend--;
		r = bfail(b, -ENOMEM, &o->fid, "out of memory");
		goto out;
	}
	if (in >= 0 && s->fault)
		r = s->fault(s->fault_arg, STORE_FAULT_RESIZE, NULL);
	if (in >= 0 && !r)
		r = copy_data(in, out, o->size < size ? o->size : size);
	if (!r && ftruncate(out, (off_t)size))
		r = -errno;
	if (r) {
		r = bfail(b, r, &o->fid, "resizing its content: %s",
			  strerror(-r));
		goto out;
	}
	r = drop_body(b, o);
	if (!r) {
		o->has_body = true;
		o->body = sid;
	}
out:
	if (in >= 0 && close_in)
		close(in);
	if (out >= 0)
		close(out);
	return r;
}

/* Delete @o (no entry names it any more): row, xattrs, content. */
static int remove_obj(struct batch *b, struct obj *o)
{
	int r = drop_body(b, o);

	if (r)
		return r;
	/* xattrs first: the foreign key wants them gone. */
	r = fid_stmt(b->s, Q_OBJ_XATTRS_DEL, &o->fid);
	if (!r)
		r = fid_stmt(b->s, Q_OBJ_DELETE, &o->fid);
	if (r)
		return bsql(b, r);
	b->usage_delta -= (int64_t)o->usage0;
	b->objects_delta--;
	return 0;
}

/* ------------------------------------------------------- permissions */

#define MAY_X	1
#define MAY_W	2

/* A record's credentials in a message: CREDFMT, then CREDARG(r). */
#define CREDFMT \
	"uid %" PRIu32 " gid %" PRIu32 " (and %u supplementary groups)"
#define CREDARG(r)	(r)->uid, (r)->gid, (unsigned int)(r)->ngroups

/* POSIX ACL entry tags (linux/posix_acl.h). */
#define ACL_USER_OBJ	0x01
#define ACL_USER	0x02
#define ACL_GROUP_OBJ	0x04
#define ACL_GROUP	0x08
#define ACL_MASK	0x10
#define ACL_OTHER	0x20

#define ACL_ACCESS	"system.posix_acl_access"

static uint32_t le32_at(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* Is @gid the record's gid or one of its supplementary groups? */
static bool in_groups(const struct lento_rec *r, uint32_t gid)
{
	if (r->gid == gid)
		return true;
	for (size_t i = 0; r->groups && i < r->ngroups; i++)
		if (le32_at(r->groups + 4 * i) == gid)
			return true;
	return false;
}

/*
 * A POSIX ACL as the kernel gives it (system.posix_acl_access): version 2
 * (u32), then entries of tag u16, perm u16, id u32; all little-endian.
 */
struct acl_ent {
	uint16_t tag;
	uint16_t perm;		/* its rwx bits */
	uint32_t id;		/* ACL_USER's uid, ACL_GROUP's gid */
};

/* The entries of ACL @v (@len bytes), or -1 if it is not one's shape. */
static long acl_count(const uint8_t *v, size_t len)
{
	if (!v || len < 4 || (len - 4) % 8 || le32_at(v) != 2)
		return -1;
	return (long)((len - 4) / 8);
}

/* Entry @i (below acl_count) of ACL @v. */
static struct acl_ent acl_ent(const uint8_t *v, size_t i)
{
	const uint8_t *p = v + 4 + 8 * i;

	return (struct acl_ent){ (uint16_t)(p[0] | p[1] << 8), p[2] & 7u,
				 le32_at(p + 4) };
}

/*
 * The permission bits a POSIX ACL makes the mode, as the kernel does
 * when it sets one: the owner's, the mask's (else the owning group's) and
 * others'. -EINVAL if it is not one: an unknown tag, or the owner's, the
 * owning group's or others' entry missing.
 */
static int acl_mode(const uint8_t *v, size_t len, uint32_t *perm)
{
	uint32_t u = 8, g = 8, m = 8, o = 8;
	long n = acl_count(v, len);

	for (long i = 0; i < n; i++) {
		struct acl_ent e = acl_ent(v, (size_t)i);

		if (e.tag == ACL_USER_OBJ)
			u = e.perm;
		else if (e.tag == ACL_GROUP_OBJ)
			g = e.perm;
		else if (e.tag == ACL_MASK)
			m = e.perm;
		else if (e.tag == ACL_OTHER)
			o = e.perm;
		else if (e.tag != ACL_USER && e.tag != ACL_GROUP)
			return -EINVAL;
	}
	if (n < 0 || u > 7 || g > 7 || o > 7)
		return -EINVAL;
	*perm = u << 6 | (m <= 7 ? m : g) << 3 | o;
	return 0;
}

/*
 * Linux's posix_acl_permission for a caller who does not own @o, with
 * @o's access ACL @v (acl_mode accepted it): a named user entry of the
 * caller's uid decides (masked); else the entries of the caller's groups
 * (the owning group's and named ones): one granting it all (masked), or
 * none; else others'. The mask, the owning group's entry of an ACL
 * without one, and others' entry are taken from the mode, which Linux
 * keeps equal to them (chmod rewrites them; acl_chmod() here): a copy
 * stored before that rewrite counts as the mode says.
 */
static bool acl_may(const struct obj *o, const struct lento_rec *r,
		    const uint8_t *v, size_t len, unsigned int want)
{
	unsigned int gbits = (o->mode >> 3) & 7, mask;
	bool has_mask = false, found = false, granted = false;
	int user = -1, owning = -1;
	long n = acl_count(v, len);

	for (long i = 0; i < n; i++) {
		struct acl_ent e = acl_ent(v, (size_t)i);

		if (e.tag == ACL_MASK) {
			has_mask = true;
		} else if (e.tag == ACL_USER && e.id == r->uid) {
			user = user < 0 ? e.perm : user;
		} else if (e.tag == ACL_GROUP_OBJ && in_groups(r, o->gid)) {
			owning = e.perm;
		} else if (e.tag == ACL_GROUP && in_groups(r, e.id)) {
			found = true;
			granted |= (e.perm & want) == want;
		}
	}
	mask = has_mask ? gbits : 7;
	if (user >= 0)
		return ((unsigned int)user & mask & want) == want;
	if (owning >= 0) {
		found = true;
		granted |= ((has_mask ? (unsigned int)owning : gbits) & want) ==
			   want;
	}
	if (found)
		return granted && (mask & want) == want;
	return (o->mode & want) == want;
}

/*
 * A chmod of an object with an access ACL rewrites the ACL's owner, mask
 * (else owning group) and other entries to the new mode, as Linux's
 * posix_acl_chmod does -- and logs no SETXATTR for it, so the server
 * does it here: a client fetching the object gets the ACL its mode says.
 * An ACL that is not one's shape is left for acl_stored_may() to report.
 */
static int acl_chmod(struct batch *b, const struct obj *o)
{
	sqlite3_stmt *st = b->s->q[Q_XATTR_GET];
	uint8_t *v = NULL;
	size_t len = 0;
	bool has_mask = false;
	long n = -1;
	int ret;

	bind_fid(st, 1, &o->fid);
	bind_bytes(st, 4, ACL_ACCESS, strlen(ACL_ACCESS));
	ret = row(b->s, st);
	if (ret == 1) {
		const void *stored = sqlite3_column_blob(st, 0);

		len = (size_t)sqlite3_column_bytes(st, 0);
		n = acl_count(stored, len);
		v = n >= 0 ? malloc(len) : NULL;
		if (v)
			memcpy(v, stored, len);
	}
	sqlite3_reset(st);
	if (ret <= 0 || n < 0)
		return ret < 0 ? bsql(b, ret) : 0;
	if (!v)
		return bfail(b, -ENOMEM, &o->fid, "no memory for its access "
			     "ACL");
	for (long i = 0; i < n; i++)
		has_mask |= acl_ent(v, (size_t)i).tag == ACL_MASK;
	for (long i = 0; i < n; i++) {
		uint8_t *p = v + 4 + 8 * i;	/* its perm at p[2], a u16 */
		uint16_t tag = acl_ent(v, (size_t)i).tag;
		int shift = -1;

		if (tag == ACL_USER_OBJ)
			shift = 6;
		else if (tag == (has_mask ? ACL_MASK : ACL_GROUP_OBJ))
			shift = 3;
		else if (tag == ACL_OTHER)
			shift = 0;
		if (shift >= 0) {
			p[2] = (uint8_t)((o->mode >> shift) & 7);
			p[3] = 0;
		}
	}
	st = b->s->q[Q_XATTR_SET];
	bind_fid(st, 1, &o->fid);
	bind_bytes(st, 4, ACL_ACCESS, strlen(ACL_ACCESS));
	bind_bytes(st, 5, v, len);
	ret = done(b->s, st);
	free(v);
	return ret ? bsql(b, ret) : 0;
}

/* Without an access ACL: the owner's, the group's or others' bits. */
static bool mode_may(const struct obj *o, const struct lento_rec *r,
		     unsigned int want)
{
	unsigned int bits = o->mode;

	if (r->uid == o->uid)
		bits >>= 6;
	else if (in_groups(r, o->gid))
		bits >>= 3;
	return (bits & want) == want;
}

/*
 * By @o's access ACL, if it has one: 1 and whether they may in *yes, 0
 * if it has none, or the error the batch records.
 */
static int acl_stored_may(struct batch *b, const struct obj *o,
			  unsigned int want, bool *yes)
{
	sqlite3_stmt *st = b->s->q[Q_XATTR_GET];
	bool damaged = false;
	uint32_t perm;
	int ret;

	bind_fid(st, 1, &o->fid);
	bind_bytes(st, 4, ACL_ACCESS, strlen(ACL_ACCESS));
	ret = row(b->s, st);
	if (ret == 1) {
		const uint8_t *v = sqlite3_column_blob(st, 0);
		size_t len = (size_t)sqlite3_column_bytes(st, 0);

		damaged = acl_mode(v, len, &perm) != 0;
		*yes = !damaged && acl_may(o, &b->recs[b->i], v, len, want);
	}
	sqlite3_reset(st);
	if (ret < 0)
		return bsql(b, ret);
	if (damaged)
		return bfail(b, -EIO, &o->fid, "the access ACL stored for "
			     FIDFMT " is not one", FIDARG(&o->fid));
	return ret;
}

/*
 * May the record's credentials (uid, gid, supplementary groups) @want on
 * @o? As Linux's generic_permission: uid 0 may anything; the owner has
 * the owner's bits; for others an access ACL decides if @o has one and
 * its group bits (an ACL's mask) grant something, else the group bits if
 * @o's group is among theirs, else others' bits. 0, or EACCES saying they
 * may not @what @o, or another error; the batch records it.
 */
static int may(struct batch *b, const struct obj *o, unsigned int want,
	       const char *what)
{
	const struct lento_rec *r = &b->recs[b->i];
	bool yes = false;
	int acl = 0;

	if (r->uid == 0)
		return 0;
	/* Only an ACL makes the mode bits inexact; only xattrs hold one. */
	if (r->uid != o->uid && o->xattr_bytes && o->mode & S_IRWXG)
		acl = acl_stored_may(b, o, want, &yes);
	if (acl < 0)
		return acl;
	if (!acl)
		yes = mode_may(o, r, want);
	if (yes)
		return 0;
	return bfail(b, -EACCES, &o->fid, CREDFMT " may not %s " FIDFMT
		     " (mode %04" PRIo32 ", owner %" PRIu32 ":%" PRIu32 "%s)",
		     CREDARG(r), what, FIDARG(&o->fid), o->mode, o->uid,
		     o->gid, acl ? ", access ACL" : "");
}

static bool owner(const struct obj *o, const struct lento_rec *r)
{
	return r->uid == 0 || r->uid == o->uid;
}

/* Changing directory @d's entries: write and search permission. */
static int may_change(struct batch *b, const struct obj *d)
{
	return may(b, d, MAY_W | MAY_X, "change directory");
}

/* Removing or replacing @victim's name in sticky directory @d. */
static int may_unname(struct batch *b, const struct obj *d,
		      const struct obj *victim)
{
	const struct lento_rec *r = &b->recs[b->i];

	if (!(d->mode & S_ISVTX) || owner(victim, r) || owner(d, r))
		return 0;
	return bfail(b, -EPERM, &victim->fid, "uid %" PRIu32 " may not remove "
		     FIDFMT " (owner %" PRIu32 ") from sticky directory " FIDFMT,
		     r->uid, FIDARG(&victim->fid), victim->uid, FIDARG(&d->fid));
}

/* Setting or removing xattr @name of @o. */
static int may_xattr(struct batch *b, const struct obj *o, const char *name)
{
	const struct lento_rec *r = &b->recs[b->i];

	if (!strncmp(name, "user.", 5)) {
		if (o->type != LENTO_T_REG && o->type != LENTO_T_DIR)
			return bfail(b, -EPERM, &o->fid, "user xattrs are for "
				     "files and directories only");
		return may(b, o, MAY_W, "write");
	}
	if (!strncmp(name, "trusted.", 8)) {
		if (r->uid)
			return bfail(b, -EPERM, &o->fid, "trusted xattrs are "
				     "root's");
		return 0;
	}
	/*
	 * A file capability grants privilege to whoever runs the file:
	 * Linux lets only a caller with CAP_SETFCAP set or remove it,
	 * owner or not. The server's privileged caller is uid 0, as for
	 * trusted xattrs.
	 */
	if (!strcmp(name, "security.capability")) {
		if (r->uid)
			return bfail(b, -EPERM, &o->fid, "uid %" PRIu32 " may "
				     "not set or remove security.capability: "
				     "root's (CAP_SETFCAP)", r->uid);
		return 0;
	}
	if (!strncmp(name, "security.", 9) ||
	    !strcmp(name, "system.posix_acl_access") ||
	    !strcmp(name, "system.posix_acl_default")) {
		if (!owner(o, r))
			return bfail(b, -EPERM, &o->fid, "only the owner sets "
				     "%s", name);
		return 0;
	}
	return bfail(b, -EOPNOTSUPP, &o->fid, "xattr namespace of \"%s\" not "
		     "supported", name);
}

/* ---------------------------------------------------------- operations */

static void times_changed(struct obj *o, int64_t t)
{
	o->mtime = o->ctime = t;
}

/* CREATE, MKDIR, MKNOD, SYMLINK: a new object named in a directory. */
static int op_new(struct batch *b, const struct lento_rec *r)
{
	struct lento_fid found;
	struct obj d, o, scratch;
	bool type_ok;
	int ret;

	switch (r->op) {
	case LENTO_OP_CREATE:
		type_ok = r->type == LENTO_T_REG;
		break;
	case LENTO_OP_MKDIR:
		type_ok = r->type == LENTO_T_DIR;
		break;
	case LENTO_OP_SYMLINK:
		type_ok = r->type == LENTO_T_SYMLINK;
		break;
	default:
		type_ok = r->type == LENTO_T_REG || r->type == LENTO_T_FIFO ||
			  r->type == LENTO_T_SOCK || r->type == LENTO_T_CHR ||
			  r->type == LENTO_T_BLK;
	}
	if (!type_ok)
		return bfail(b, -EINVAL, &r->obj, "type %u is not one %s makes",
			     r->type, op_name(r->op));
	if (!name_ok(r->name))
		return bfail(b, -EINVAL, &r->dir, "bad name");
	if (r->dir.volume != b->vol)
		return bfail(b, -EINVAL, &r->dir, "directory not in volume %"
			     PRIu32, b->vol);
	if (r->obj.volume != b->vol || r->obj.client != b->client ||
	    !r->obj.seq)
		return bfail(b, -EINVAL, &r->obj, "new fid " FIDFMT " is not "
			     "one client %" PRIu32 " mints in volume %" PRIu32,
			     FIDARG(&r->obj), b->client, b->vol);
	if (!(r->attr.valid & LENTO_A_MODE) || (r->attr.mode & ~07777u))
		return bfail(b, -EINVAL, &r->obj, "no mode, or mode %#" PRIo32
			     " has more than permission bits", r->attr.mode);
	if (r->op == LENTO_OP_SYMLINK &&
	    (!r->data || !r->data_len || r->data_len > LENTO_SYMLINK_MAX ||
	     memchr(r->data, '\0', r->data_len)))
		return bfail(b, r->data_len > LENTO_SYMLINK_MAX ?
			     -ENAMETOOLONG : -EINVAL, &r->obj,
			     "bad symlink target");
	ret = load(b, &r->dir, &d, "directory", true);
	if (!ret)
		parent_base(b, &d, &r->base_dir);
	if (!ret)
		ret = may_change(b, &d);
	if (ret)
		return ret;

	memset(&o, 0, sizeof(o));
	o.fid = r->obj;
	o.type = r->type;
	o.mode = r->attr.mode;
	o.uid = r->attr.valid & LENTO_A_UID ? r->attr.uid : r->uid;
	o.gid = r->attr.valid & LENTO_A_GID ? r->attr.gid :
		d.mode & S_ISGID ? d.gid : r->gid;
	if (r->uid && o.uid != r->uid)
		return bfail(b, -EPERM, &r->obj, "uid %" PRIu32 " may not "
			     "create objects owned by %" PRIu32, r->uid, o.uid);
	if (r->uid && !in_groups(r, o.gid) &&
	    !(d.mode & S_ISGID && o.gid == d.gid))
		return bfail(b, -EPERM, &r->obj, CREDFMT " may not create "
			     "objects of group %" PRIu32, CREDARG(r), o.gid);
	if (r->uid && (o.type == LENTO_T_CHR || o.type == LENTO_T_BLK))
		return bfail(b, -EPERM, &r->obj, "only root makes devices");
	if (o.type == LENTO_T_DIR && d.nlink >= NLINK_MAX)
		return bfail(b, -EMLINK, &d.fid, "%" PRIu32 " links already",
			     d.nlink);

	ret = ent_get(b->s, &d.fid, r->name, &found);
	if (!ret)
		return bfail(b, -EEXIST, &found, "\"%s\" exists in " FIDFMT,
			     r->name, FIDARG(&d.fid));
	if (ret != -ENOENT)
		return bsql(b, ret);
	ret = obj_get(b->s, &r->obj, &scratch);
	if (!ret)
		return bfail(b, -EEXIST, &r->obj, "fid " FIDFMT " exists",
			     FIDARG(&r->obj));
	if (ret != -ENOENT)
		return bsql(b, ret);

	o.nlink = o.type == LENTO_T_DIR ? 2 : 1;
	o.size = o.type == LENTO_T_SYMLINK ? r->data_len : 0;
	if ((o.type == LENTO_T_CHR || o.type == LENTO_T_BLK) &&
	    r->attr.valid & LENTO_A_RDEV)
		o.rdev = r->attr.rdev;
	o.atime = r->attr.valid & LENTO_A_ATIME ? r->attr.atime_ns : r->time_ns;
	o.mtime = r->attr.valid & LENTO_A_MTIME ? r->attr.mtime_ns : r->time_ns;
	o.ctime = r->attr.valid & LENTO_A_CTIME ? r->attr.ctime_ns : r->time_ns;
	lento_vv_init(&o.vv, SERVER_COUNT);
	ret = touch(b, &o);
	if (ret)
		return ret;
	ret = obj_insert(b->s, &o, o.type == LENTO_T_SYMLINK ? r->data : NULL,
			 r->data_len);
	if (!ret)
		ret = ent_put(b->s, Q_ENT_INSERT, &d.fid, r->name, &o.fid);
	if (ret)
		return bsql(b, ret);
	b->usage_delta += (int64_t)obj_usage(&o);
	b->objects_delta++;

	if (o.type == LENTO_T_DIR)
		d.nlink++;
	times_changed(&d, r->time_ns);
	ret = touch(b, &d);
	return ret ? ret : put(b, &d);
}

static int op_link(struct batch *b, const struct lento_rec *r)
{
	struct lento_fid found;
	struct obj d, o;
	int ret;

	if (!name_ok(r->name))
		return bfail(b, -EINVAL, &r->dir, "bad name");
	if (r->dir.volume != b->vol || r->obj.volume != b->vol)
		return bfail(b, -EXDEV, &r->obj, "link across volumes");
	ret = load(b, &r->dir, &d, "directory", true);
	if (!ret)
		ret = load(b, &r->obj, &o, "object", false);
	if (!ret)
		parent_base(b, &d, &r->base_dir);
	if (!ret)
		ret = check_base(b, &o, &r->base_obj, "object");
	if (ret)
		return ret;
	if (o.type == LENTO_T_DIR)
		return bfail(b, -EPERM, &o.fid, "hard link to a directory");
	ret = may_change(b, &d);
	if (ret)
		return ret;
	ret = ent_get(b->s, &d.fid, r->name, &found);
	if (!ret)
		return bfail(b, -EEXIST, &found, "\"%s\" exists in " FIDFMT,
			     r->name, FIDARG(&d.fid));
	if (ret != -ENOENT)
		return bsql(b, ret);
	if (o.nlink >= NLINK_MAX)
		return bfail(b, -EMLINK, &o.fid, "%" PRIu32 " links already",
			     o.nlink);
	ret = ent_put(b->s, Q_ENT_INSERT, &d.fid, r->name, &o.fid);
	if (ret)
		return bsql(b, ret);
	o.nlink++;
	o.ctime = r->time_ns;
	ret = touch(b, &o);
	if (!ret)
		ret = put(b, &o);
	if (ret)
		return ret;
	times_changed(&d, r->time_ns);
	ret = touch(b, &d);
	return ret ? ret : put(b, &d);
}

/* Is @dir/@name @o? -ENOENT (reported) if not. */
static int check_entry(struct batch *b, const struct obj *dir,
		       const char *name, const struct obj *o)
{
	struct lento_fid found;
	int ret = ent_get(b->s, &dir->fid, name, &found);

	if (ret == -ENOENT)
		return bfail(b, ret, &o->fid, "no \"%s\" in " FIDFMT, name,
			     FIDARG(&dir->fid));
	if (ret)
		return bsql(b, ret);
	if (!lento_fid_eq(&found, &o->fid))
		return bfail(b, -ENOENT, &o->fid, "\"%s\" in " FIDFMT " is "
			     FIDFMT ", not " FIDFMT, name, FIDARG(&dir->fid),
			     FIDARG(&found), FIDARG(&o->fid));
	return 0;
}

/* One name less for @o: removed at nlink 0, else its ctime and version. */
static int unname(struct batch *b, struct obj *o)
{
	int ret;

	if (o->type == LENTO_T_DIR || !--o->nlink)
		return remove_obj(b, o);
	o->ctime = b->recs[b->i].time_ns;
	ret = touch(b, o);
	return ret ? ret : put(b, o);
}

/* UNLINK and RMDIR. */
static int op_remove(struct batch *b, const struct lento_rec *r)
{
	bool rmdir = r->op == LENTO_OP_RMDIR;
	struct obj d, o;
	int ret;

	if (!name_ok(r->name))
		return bfail(b, -EINVAL, &r->dir, "bad name");
	if (r->dir.volume != b->vol || r->obj.volume != b->vol)
		return bfail(b, -EINVAL, &r->obj, "not in volume %" PRIu32,
			     b->vol);
	ret = load(b, &r->dir, &d, "directory", true);
	if (!ret)
		ret = load(b, &r->obj, &o, "object", false);
	if (!ret)
		parent_base(b, &d, &r->base_dir);
	if (!ret)
		ret = obj_base(b, &o, &r->base_obj, "object");
	if (!ret)
		ret = check_entry(b, &d, r->name, &o);
	if (ret)
		return ret;
	if (!rmdir && o.type == LENTO_T_DIR)
		return bfail(b, -EISDIR, &o.fid, "unlink of a directory");
	if (rmdir && o.type != LENTO_T_DIR)
		return bfail(b, -ENOTDIR, &o.fid, "rmdir of a non-directory");
	ret = may_change(b, &d);
	if (!ret)
		ret = may_unname(b, &d, &o);
	if (ret)
		return ret;
	if (rmdir) {
		ret = ent_any(b->s, &o.fid);
		if (ret > 0)
			return bfail(b, -ENOTEMPTY, &o.fid, "directory not "
				     "empty");
		if (ret)
			return bsql(b, ret);
		d.nlink--;
	}
	ret = ent_del(b->s, &d.fid, r->name);
	if (ret)
		return bsql(b, ret);
	ret = unname(b, &o);
	if (ret)
		return ret;
	times_changed(&d, r->time_ns);
	ret = touch(b, &d);
	return ret ? ret : put(b, &d);
}

static int op_rename(struct batch *b, const struct lento_rec *r)
{
	bool exch = r->flags & LENTO_R_EXCHANGE, same, has_t;
	struct obj sdo, ddo, o, t;
	struct obj *sd = &sdo, *dd = &ddo;
	struct lento_fid tf;
	int ret;

	memset(&t, 0, sizeof(t));
	/* LASTLINK (with a target) is the client's own note, as in UNLINK. */
	if (r->flags & ~(LENTO_R_NOREPLACE | LENTO_R_EXCHANGE |
			 LENTO_R_LASTLINK) ||
	    (exch && r->flags & LENTO_R_NOREPLACE))
		return bfail(b, -EINVAL, &r->obj, "bad flags %#x", r->flags);
	if (!name_ok(r->name) || !name_ok(r->name2))
		return bfail(b, -EINVAL, &r->obj, "bad name");
	if (r->dir.volume != b->vol || r->obj.volume != b->vol ||
	    r->dir2.volume != b->vol ||
	    (!lento_fid_is_null(&r->target) && r->target.volume != b->vol))
		return bfail(b, -EXDEV, &r->obj, "rename across volumes");
	same = lento_fid_eq(&r->dir, &r->dir2);
	if (same)
		dd = sd;
	ret = load(b, &r->dir, sd, "source directory", true);
	if (!ret && !same)
		ret = load(b, &r->dir2, dd, "target directory", true);
	if (!ret)
		ret = load(b, &r->obj, &o, "object", false);
	if (!ret) {
		parent_base(b, sd, &r->base_dir);
		if (!same)
			parent_base(b, dd, &r->base_dir2);
		ret = obj_base(b, &o, &r->base_obj, "object");
	}
	if (!ret)
		ret = check_entry(b, sd, r->name, &o);
	if (ret)
		return ret;

	ret = ent_get(b->s, &dd->fid, r->name2, &tf);
	if (ret && ret != -ENOENT)
		return bsql(b, ret);
	has_t = !ret;
	if (has_t && lento_fid_is_null(&r->target))
		return bfail(b, -EEXIST, &tf, "\"%s\" in " FIDFMT " is " FIDFMT
			     ", which the record does not name", r->name2,
			     FIDARG(&dd->fid), FIDARG(&tf));
	if (has_t && !lento_fid_eq(&tf, &r->target))
		return bfail(b, -EEXIST, &tf, "\"%s\" in " FIDFMT " is " FIDFMT
			     ", not " FIDFMT, r->name2, FIDARG(&dd->fid),
			     FIDARG(&tf), FIDARG(&r->target));
	if (!has_t && !lento_fid_is_null(&r->target))
		return bfail(b, -ENOENT, &r->target, "no \"%s\" in " FIDFMT,
			     r->name2, FIDARG(&dd->fid));
	if (has_t && !lento_fid_eq(&tf, &o.fid)) {
		ret = load(b, &tf, &t, "target", false);
		if (!ret)
			ret = obj_base(b, &t, &r->base_target, "target");
		if (ret)
			return ret;
	}
	ret = may_change(b, sd);
	if (!ret && !same)
		ret = may_change(b, dd);
	if (!ret)
		ret = may_unname(b, sd, &o);
	if (!ret && has_t)
		ret = may_unname(b, dd, lento_fid_eq(&tf, &o.fid) ? &o : &t);
	if (ret)
		return ret;
	/* As Linux: before the test of two names of one object. */
	if (has_t && r->flags & LENTO_R_NOREPLACE)
		return bfail(b, -EEXIST, &t.fid, "\"%s\" exists (NOREPLACE)",
			     r->name2);
	if (has_t && lento_fid_eq(&tf, &o.fid)) {
		/* Two names of one object: rename does nothing. */
		ret = touch(b, sd);
		if (!ret)
			ret = put(b, sd);
		if (!ret && !same)
			ret = touch(b, dd);
		if (!ret && !same)
			ret = put(b, dd);
		if (!ret)
			ret = touch(b, &o);
		return ret ? ret : put(b, &o);
	}
	/* Moving a directory to another needs write permission on it. */
	if (!same && o.type == LENTO_T_DIR)
		ret = may(b, &o, MAY_W, "move directory");
	if (!ret && !same && exch && has_t && t.type == LENTO_T_DIR)
		ret = may(b, &t, MAY_W, "move directory");
	if (ret)
		return ret;
	if (!has_t && exch)
		return bfail(b, -ENOENT, &dd->fid, "no \"%s\" to exchange with",
			     r->name2);
	if (has_t && !exch) {
		if (o.type == LENTO_T_DIR && t.type != LENTO_T_DIR)
			return bfail(b, -ENOTDIR, &t.fid, "a directory over a "
				     "non-directory");
		if (o.type != LENTO_T_DIR && t.type == LENTO_T_DIR)
			return bfail(b, -EISDIR, &t.fid, "a non-directory over "
				     "a directory");
		if (t.type == LENTO_T_DIR) {
			ret = ent_any(b->s, &t.fid);
			if (ret > 0)
				return bfail(b, -ENOTEMPTY, &t.fid, "target "
					     "directory not empty");
			if (ret)
				return bsql(b, ret);
		}
	}
	if (!same && o.type == LENTO_T_DIR) {
		ret = is_within(b->s, &dd->fid, &o.fid);
		if (ret > 0)
			return bfail(b, -EINVAL, &o.fid, "a directory into its "
				     "own subtree");
		if (ret == -ENAMETOOLONG)
			return bfail(b, ret, &dd->fid, "%s", b->s->why);
		if (ret)
			return bsql(b, ret);
	}
	if (!same && exch && t.type == LENTO_T_DIR) {
		ret = is_within(b->s, &sd->fid, &t.fid);
		if (ret > 0)
			return bfail(b, -EINVAL, &t.fid, "a directory into its "
				     "own subtree");
		if (ret == -ENAMETOOLONG)
			return bfail(b, ret, &sd->fid, "%s", b->s->why);
		if (ret)
			return bsql(b, ret);
	}
	/*
	 * A directory that moves to another parent is a link more of it,
	 * unless a directory leaves that parent in exchange or is replaced.
	 */
	if (!same && o.type == LENTO_T_DIR && dd->nlink >= NLINK_MAX &&
	    !(has_t && t.type == LENTO_T_DIR))
		return bfail(b, -EMLINK, &dd->fid, "%" PRIu32 " links already",
			     dd->nlink);
	if (!same && exch && t.type == LENTO_T_DIR &&
	    o.type != LENTO_T_DIR && sd->nlink >= NLINK_MAX)
		return bfail(b, -EMLINK, &sd->fid, "%" PRIu32 " links already",
			     sd->nlink);

	if (exch) {
		ret = ent_put(b->s, Q_ENT_SET_CHILD, &sd->fid, r->name, &t.fid);
		if (!ret)
			ret = ent_put(b->s, Q_ENT_SET_CHILD, &dd->fid, r->name2,
				      &o.fid);
		if (ret)
			return bsql(b, ret);
		if (!same && o.type == LENTO_T_DIR) {
			sd->nlink--;
			dd->nlink++;
		}
		if (!same && t.type == LENTO_T_DIR) {
			dd->nlink--;
			sd->nlink++;
		}
		t.ctime = r->time_ns;
		ret = touch(b, &t);
		if (!ret)
			ret = put(b, &t);
	} else {
		if (has_t) {
			ret = ent_del(b->s, &dd->fid, r->name2);
			if (ret)
				return bsql(b, ret);
			if (t.type == LENTO_T_DIR)
				dd->nlink--;
			ret = unname(b, &t);
			if (ret)
				return ret;
		}
		ret = ent_del(b->s, &sd->fid, r->name);
		if (!ret)
			ret = ent_put(b->s, Q_ENT_INSERT, &dd->fid, r->name2,
				      &o.fid);
		if (ret)
			return bsql(b, ret);
		if (!same && o.type == LENTO_T_DIR) {
			sd->nlink--;
			dd->nlink++;
		}
	}
	if (ret)
		return ret;
	o.ctime = r->time_ns;
	ret = touch(b, &o);
	if (!ret)
		ret = put(b, &o);
	if (ret)
		return ret;
	times_changed(sd, r->time_ns);
	ret = touch(b, sd);
	if (!ret)
		ret = put(b, sd);
	if (!ret && !same) {
		times_changed(dd, r->time_ns);
		ret = touch(b, dd);
		if (!ret)
			ret = put(b, dd);
	}
	return ret;
}

/* Is @mode @was with one or both set-id bits taken away, and no more? */
static bool privs_dropped(uint32_t was, uint32_t mode)
{
	uint32_t setid = S_ISUID | S_ISGID;

	was &= 07777;
	return mode != was && (mode & ~was) == 0 &&
	       (mode & ~setid) == (was & ~setid);
}

static int op_setattr(struct batch *b, const struct lento_rec *r)
{
	const struct lento_attr *a = &r->attr;
	bool ids_changed = false;
	struct obj o;
	int ret;

	if (r->obj.volume != b->vol)
		return bfail(b, -EINVAL, &r->obj, "not in volume %" PRIu32,
			     b->vol);
	ret = load(b, &r->obj, &o, "object", false);
	if (!ret)
		ret = check_base(b, &o, &r->base_obj, "object");
	if (ret)
		return ret;
	if (a->valid & ~(uint32_t)LENTO_A_ALL || a->valid & LENTO_A_RDEV)
		return bfail(b, -EINVAL, &o.fid, "attributes %#" PRIx32
			     " cannot be set", a->valid);
	if (a->valid & LENTO_A_MODE) {
		if (a->mode & ~07777u)
			return bfail(b, -EINVAL, &o.fid, "mode %#" PRIo32
				     " has more than permission bits",
				     a->mode);
		/*
		 * A write by anyone who may write drops set-id bits
		 * (Linux's file_remove_privs()): the client logs that as a
		 * mode change of the writer's.
		 */
		if (!owner(&o, r) && !privs_dropped(o.mode, a->mode))
			return bfail(b, -EPERM, &o.fid, "only the owner "
				     "changes the mode");
		if (!owner(&o, r))
			ret = may(b, &o, MAY_W, "drop the set-id bits of");
		if (ret)
			return ret;
	}
	if (a->valid & LENTO_A_UID && a->uid != o.uid && r->uid)
		return bfail(b, -EPERM, &o.fid, "only root changes the owner");
	/* chgrp: the owner to a group among its own, as Linux. */
	if (a->valid & LENTO_A_GID && a->gid != o.gid && r->uid &&
	    !(r->uid == o.uid && in_groups(r, a->gid)))
		return bfail(b, -EPERM, &o.fid, CREDFMT " may not give "
			     FIDFMT " (owner %" PRIu32 ") group %" PRIu32,
			     CREDARG(r), FIDARG(&o.fid), o.uid, a->gid);
	if (a->valid & LENTO_A_SIZE) {
		if (o.type == LENTO_T_DIR)
			return bfail(b, -EISDIR, &o.fid, "size of a directory");
		if (o.type != LENTO_T_REG)
			return bfail(b, -EINVAL, &o.fid, "size of a "
				     "non-regular file");
		/* The owner may, as with STORE: see op_store. */
		if (!owner(&o, r))
			ret = may(b, &o, MAY_W, "write");
	}
	if (!ret && a->valid & (LENTO_A_ATIME | LENTO_A_MTIME) &&
	    !owner(&o, r))
		ret = may(b, &o, MAY_W, "set the times of");
	if (ret)
		return ret;

	if (a->valid & LENTO_A_UID && a->uid != o.uid) {
		o.uid = a->uid;
		ids_changed = true;
	}
	if (a->valid & LENTO_A_GID && a->gid != o.gid) {
		o.gid = a->gid;
		ids_changed = true;
	}
	if (a->valid & LENTO_A_MODE) {
		o.mode = a->mode;
		/* As chmod: the setgid bit goes if not in the group. */
		if (r->uid && !in_groups(r, o.gid))
			o.mode &= ~(uint32_t)S_ISGID;
		ret = acl_chmod(b, &o);
		if (ret)
			return ret;
	} else if (ids_changed && o.type != LENTO_T_DIR) {
		/* As chown: set-id bits go. */
		o.mode &= ~(uint32_t)S_ISUID;
		if (o.mode & S_IXGRP)
			o.mode &= ~(uint32_t)S_ISGID;
	}
	if (a->valid & LENTO_A_SIZE && a->size != o.size) {
		if (a->size > STORE_FILE_MAX)
			return bfail(b, -EFBIG, &o.fid, "size too large");
		ret = a->size ? resize_body(b, &o, a->size) :
				drop_body(b, &o);
		if (ret)
			return ret;
		o.size = a->size;
		if (!(a->valid & LENTO_A_MTIME))
			o.mtime = r->time_ns;
	}
	if (a->valid & LENTO_A_ATIME)
		o.atime = a->atime_ns;
	if (a->valid & LENTO_A_MTIME)
		o.mtime = a->mtime_ns;
	o.ctime = a->valid & LENTO_A_CTIME ? a->ctime_ns : r->time_ns;
	ret = touch(b, &o);
	return ret ? ret : put(b, &o);
}

/* SETXATTR and REMOVEXATTR. */
static int op_xattr(struct batch *b, const struct lento_rec *r)
{
	bool set = r->op == LENTO_OP_SETXATTR;
	size_t nlen = strnlen(r->name, LENTO_XATTR_NAME_MAX + 1);
	int64_t old = -1, count = 0;
	sqlite3_stmt *st;
	struct obj o;
	int ret;

	if (r->obj.volume != b->vol)
		return bfail(b, -EINVAL, &r->obj, "not in volume %" PRIu32,
			     b->vol);
	if (!nlen)
		return bfail(b, -EINVAL, &r->obj, "empty xattr name");
	if (nlen > LENTO_XATTR_NAME_MAX)
		return bfail(b, -ERANGE, &r->obj, "xattr name too long");
	if (set && r->data_len > LENTO_XATTR_SIZE_MAX)
		return bfail(b, -E2BIG, &r->obj, "xattr value of %" PRIu32
			     " bytes", r->data_len);
	if (set && r->data_len && !r->data)
		return bfail(b, -EINVAL, &r->obj, "xattr value missing");
	ret = load(b, &r->obj, &o, "object", false);
	if (!ret)
		ret = check_base(b, &o, &r->base_obj, "object");
	if (!ret)
		ret = may_xattr(b, &o, r->name);
	if (ret)
		return ret;

	st = b->s->q[Q_XATTR_LEN];
	bind_fid(st, 1, &o.fid);
	bind_bytes(st, 4, r->name, nlen);
	ret = row(b->s, st);
	if (ret == 1)
		old = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	if (ret < 0)
		return bsql(b, ret);
	if (!set && old < 0)
		return bfail(b, -ENODATA, &o.fid, "no xattr \"%s\"", r->name);
	if (set && old < 0) {
		st = b->s->q[Q_XATTR_COUNT];
		bind_fid(st, 1, &o.fid);
		ret = row(b->s, st);
		if (ret == 1)
			count = sqlite3_column_int64(st, 0);
		sqlite3_reset(st);
		if (ret < 0)
			return bsql(b, ret);
		if (count >= LENTO_XATTRS_MAX)
			return bfail(b, -ENOSPC, &o.fid, "%d xattrs already",
				     LENTO_XATTRS_MAX);
	}
	st = b->s->q[set ? Q_XATTR_SET : Q_XATTR_DEL];
	bind_fid(st, 1, &o.fid);
	bind_bytes(st, 4, r->name, nlen);
	if (set)
		bind_bytes(st, 5, r->data, r->data_len);
	ret = done(b->s, st);
	if (ret)
		return bsql(b, ret);
	if (old >= 0)
		o.xattr_bytes -= nlen + (uint64_t)old;
	if (set)
		o.xattr_bytes += nlen + r->data_len;
	/* An access ACL is the mode's permission bits too, as on Linux. */
	if (set && !strcmp(r->name, ACL_ACCESS)) {
		uint32_t perm;

		if (acl_mode(r->data, r->data_len, &perm))
			return bfail(b, -EINVAL, &o.fid, "not a POSIX ACL");
		o.mode = (o.mode & ~0777u) | perm;
		if (r->uid && !in_groups(r, o.gid))
			o.mode &= ~(uint32_t)S_ISGID;
	}
	o.ctime = r->time_ns;
	ret = touch(b, &o);
	return ret ? ret : put(b, &o);
}

/* Is @name one of PRUNEXATTRS's NUL-terminated @list? */
static bool xattr_kept(const struct lento_rec *r, const char *name)
{
	const char *p = r->data, *end = p + r->data_len;

	for (; p < end; p += strlen(p) + 1)
		if (!strcmp(p, name))
			return true;
	return false;
}

/*
 * PRUNEXATTRS: the object's mirrored xattrs become the ones the record
 * names; the others go, each with the permission a REMOVEXATTR of it
 * needs. Like every record it moves the object's version, removing
 * something or not: clients predict a batch's versions so (reint.c).
 */
static int op_prunexattrs(struct batch *b, const struct lento_rec *r)
{
	char gone[LENTO_XATTRS_MAX][LENTO_XATTR_NAME_MAX + 1];
	uint64_t bytes[LENTO_XATTRS_MAX];
	sqlite3_stmt *st = b->s->q[Q_XATTR_LIST];
	unsigned int n = 0;
	struct obj o;
	int ret;

	if (r->obj.volume != b->vol)
		return bfail(b, -EINVAL, &r->obj, "not in volume %" PRIu32,
			     b->vol);
	if (r->data_len && ((const char *)r->data)[r->data_len - 1])
		return bfail(b, -EINVAL, &r->obj, "xattr names without NUL");
	ret = load(b, &r->obj, &o, "object", false);
	if (!ret)
		ret = check_base(b, &o, &r->base_obj, "object");
	if (ret)
		return ret;
	bind_fid(st, 1, &o.fid);
	while ((ret = row(b->s, st)) == 1 && n < LENTO_XATTRS_MAX) {
		int len = sqlite3_column_bytes(st, 0);

		if (len > LENTO_XATTR_NAME_MAX)
			continue;
		memcpy(gone[n], sqlite3_column_blob(st, 0), (size_t)len);
		gone[n][len] = '\0';
		if (!lento_xattr_mirrored(gone[n], (size_t)len) ||
		    xattr_kept(r, gone[n]))
			continue;
		bytes[n] = (uint64_t)len + (uint64_t)sqlite3_column_bytes(st, 1);
		n++;
	}
	sqlite3_reset(st);
	if (ret < 0)
		return bsql(b, ret);
	for (unsigned int i = 0; i < n; i++) {
		ret = may_xattr(b, &o, gone[i]);
		if (ret)
			return ret;
		st = b->s->q[Q_XATTR_DEL];
		bind_fid(st, 1, &o.fid);
		bind_bytes(st, 4, gone[i], strlen(gone[i]));
		ret = done(b->s, st);
		if (ret)
			return bsql(b, ret);
		o.xattr_bytes -= bytes[i];
	}
	if (n)
		o.ctime = r->time_ns;
	ret = touch(b, &o);
	return ret ? ret : put(b, &o);
}

/*
 * STORE: new content. Write permission, or ownership: as in AFS, the
 * owner may always store, so that a file created read-only and written
 * through the descriptor that created it (open(O_CREAT, 0444), as git
 * and tar do) reintegrates.
 */
static int op_store(struct batch *b, const struct lento_rec *r)
{
	const struct store_body *body = b->bodies ? &b->bodies[b->i] : NULL;
	bool has = body && (body->fd >= 0 || body->path);
	uint64_t size;
	struct stat sb;
	struct obj o;
	int ret;

	if (r->obj.volume != b->vol)
		return bfail(b, -EINVAL, &r->obj, "not in volume %" PRIu32,
			     b->vol);
	ret = load(b, &r->obj, &o, "object", false);
	if (!ret)
		ret = check_base(b, &o, &r->base_obj, "object");
	if (ret)
		return ret;
	if (o.type == LENTO_T_DIR)
		return bfail(b, -EISDIR, &o.fid, "STORE to a directory");
	if (o.type != LENTO_T_REG)
		return bfail(b, -EINVAL, &o.fid, "STORE to a non-regular file");
	if (!owner(&o, r)) {
		ret = may(b, &o, MAY_W, "write");
		if (ret)
			return ret;
	}
	/* The client lost the bytes: what the other names hold stays. */
	if (r->flags & LENTO_R_NOBODY)
		return touch(b, &o) ?: put(b, &o);
	if (r->attr.valid & LENTO_A_SIZE)
		size = r->attr.size;
	else if (has)
		size = body->size;
	else
		return bfail(b, -EINVAL, &o.fid, "STORE without size or body");
	if (size > STORE_FILE_MAX)
		return bfail(b, -EFBIG, &o.fid, "size too large");
	if (size && !has)
		return bfail(b, -EINVAL, &o.fid, "STORE of %" PRIu64 " bytes "
			     "without a body", size);
	if (size) {
		if (body->size != size)
			return bfail(b, -EINVAL, &o.fid, "body of %" PRIu64
				     " bytes for a STORE of %" PRIu64,
				     body->size, size);
		if (body->fd >= 0 ? fstat(body->fd, &sb) :
				    stat(body->path, &sb))
			return bfail(b, -errno, &o.fid, "body: %s",
				     strerror(errno));
		if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != size)
			return bfail(b, -EINVAL, &o.fid, "body is not a "
				     "regular file of %" PRIu64 " bytes",
				     size);
	}
	ret = drop_body(b, &o);
	if (ret)
		return ret;
	if (size) {
		struct pend *p = add_pend(b, &o);

		if (!p)
			return b->res->err;
		p->fd = body->fd;
		p->path = body->fd >= 0 ? NULL : body->path;
		o.has_body = true;
		o.body = p->sid;
	}
	o.size = size;
	o.mtime = r->attr.valid & LENTO_A_MTIME ? r->attr.mtime_ns : r->time_ns;
	o.ctime = r->attr.valid & LENTO_A_CTIME ? r->attr.ctime_ns : r->time_ns;
	ret = touch(b, &o);
	return ret ? ret : put(b, &o);
}

static int apply(struct batch *b, const struct lento_rec *r)
{
	switch (r->op) {
	case LENTO_OP_CREATE:
	case LENTO_OP_MKDIR:
	case LENTO_OP_MKNOD:
	case LENTO_OP_SYMLINK:
		return op_new(b, r);
	case LENTO_OP_LINK:
		return op_link(b, r);
	case LENTO_OP_UNLINK:
	case LENTO_OP_RMDIR:
		return op_remove(b, r);
	case LENTO_OP_RENAME:
		return op_rename(b, r);
	case LENTO_OP_SETATTR:
		return op_setattr(b, r);
	case LENTO_OP_SETXATTR:
	case LENTO_OP_REMOVEXATTR:
		return op_xattr(b, r);
	case LENTO_OP_STORE:
		return op_store(b, r);
	case LENTO_OP_PRUNEXATTRS:
		return op_prunexattrs(b, r);
	default:
		return bfail(b, -EINVAL, &r->obj, "unknown operation %u",
			     r->op);
	}
}

/* ---------------------------------------------------------- the batch */

/*
 * Make the batch's new bodies durable (one syncfs), put every one that is
 * still its object's content into bodies/, then fsync bodies/. Bodies a later record of the batch superseded are
 * not placed.
 */
static int place_bodies(struct batch *b)
{
	struct store *s = b->s;
	char name[BODY_NAME_LEN + 1];
	bool any = false;
	int ret;

	/* The bodies' data before the names that make them the content. */
	if (b->npend && syncfs(s->bodiesfd))
		return -errno;
	for (size_t k = 0; k < b->npend; k++) {
		struct pend *p = &b->pend[k];
		struct obj o;

		b->i = p->rec;
		ret = obj_get(s, &p->fid, &o);
		if (ret == -ENOENT)
			continue;
		if (ret)
			return bsql(b, ret);
		if (!o.has_body || o.body.client != p->sid.client ||
		    o.body.seq != p->sid.seq)
			continue;
		ret = fault(s, STORE_FAULT_BODY_LINK);
		if (ret)
			return bfail(b, ret, &p->fid, "placing its body: %s",
				     strerror(-ret));
		body_name(name, &p->fid, &p->sid);
		if (p->own) {
			ret = renameat(s->tmpfd, p->own, s->bodiesfd, name);
		} else if (p->fd >= 0) {
			char proc[64];

			snprintf(proc, sizeof(proc), "/proc/self/fd/%d", p->fd);
			ret = linkat(AT_FDCWD, proc, s->bodiesfd, name,
				     AT_SYMLINK_FOLLOW);
			if (ret && errno == EEXIST) {
				/* A crash's leftover of this very batch. */
				unlinkat(s->bodiesfd, name, 0);
				ret = linkat(AT_FDCWD, proc, s->bodiesfd, name,
					     AT_SYMLINK_FOLLOW);
			}
		} else {
			ret = renameat(AT_FDCWD, p->path, s->bodiesfd, name);
		}
		if (ret)
			return bfail(b, -errno, &p->fid, "placing its body: %s",
				     strerror(errno));
		p->placed = true;
		any = true;
	}
	if (!any)
		return 0;
	b->i = SIZE_MAX;
	ret = fault(s, STORE_FAULT_BODY_SYNC);
	if (!ret && fsync(s->bodiesfd))
		ret = -errno;
	return ret;
}

/* The batch failed: bodies back where they came from, or removed. */
static void unplace_bodies(struct batch *b)
{
	char name[BODY_NAME_LEN + 1];

	for (size_t k = 0; k < b->npend; k++) {
		struct pend *p = &b->pend[k];

		if (!p->placed)
			continue;
		body_name(name, &p->fid, &p->sid);
		if (p->own || p->fd >= 0 ||
		    renameat(b->s->bodiesfd, name, AT_FDCWD, p->path))
			unlinkat(b->s->bodiesfd, name, 0);
	}
}

static void cleanup(struct batch *b)
{
	for (size_t k = 0; k < b->npend; k++) {
		if (b->pend[k].own) {
			unlinkat(b->s->tmpfd, b->pend[k].own, 0);
			free(b->pend[k].own);
		}
	}
	free(b->pend);
	free(b->doom);
}

static int client_get(struct store *s, uint32_t vol, uint32_t client,
		      uint64_t *last)
{
	sqlite3_stmt *st = s->q[Q_CLIENT_GET];
	int r;

	sqlite3_bind_int64(st, 1, vol);
	sqlite3_bind_int64(st, 2, client);
	r = row(s, st);
	*last = r == 1 ? col_u64(st, 0) : 0;
	sqlite3_reset(st);
	return r < 0 ? r : 0;
}

int store_last_applied(struct store *s, uint32_t volume, uint32_t client,
		       uint64_t *last)
{
	USABLE(s);
	return client_get(s, volume, client, last);
}

/* A failure not about one record. */
static int batch_fail(struct batch *b, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int batch_fail(struct batch *b, int err, const char *fmt, ...)
{
	va_list ap;

	b->res->outcome = STORE_FAILED;
	b->res->err = err;
	b->res->rec = -1;
	va_start(ap, fmt);
	vsnprintf(b->res->msg, sizeof(b->res->msg), fmt, ap);
	va_end(ap);
	return err;
}

/* A slot of a record: which object, named by which record, and how. */
struct named {
	struct lento_fid fid;
	size_t rec;
	bool freeable;		/* as obj or target: its usage may go */
};

static int named_cmp(const void *pa, const void *pb)
{
	const struct named *a = pa, *b = pb;

	if (a->fid.volume != b->fid.volume)
		return a->fid.volume < b->fid.volume ? -1 : 1;
	if (a->fid.client != b->fid.client)
		return a->fid.client < b->fid.client ? -1 : 1;
	if (a->fid.seq != b->fid.seq)
		return a->fid.seq < b->fid.seq ? -1 : 1;
	return a->rec < b->rec ? -1 : a->rec > b->rec;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/*
 * How much the new records recs[first..n) grow the volume's usage at
 * least, if they apply. Each STORE that is its object's last word (no
 * later record names it: nothing truncates, supersedes or removes that
 * content) leaves an object of at least its size (and the overhead:
 * obj_usage). Only what a record names as obj or target can use less
 * after it (a directory named as dir or dir2 gains entries, not bytes),
 * so all that those objects use now is the most the batch can free.
 * Into *grow (0 if it may shrink); 0 or -errno.
 */
static int batch_growth(struct store *s, const struct lento_rec *recs,
			size_t first, size_t n, uint64_t *grow)
{
	struct named *nm = calloc(4 * (n - first) + 1, sizeof(*nm));
	uint64_t least = 0, credit = 0;
	size_t k = 0, i, j;
	int ret = 0;

	if (!nm)
		return -ENOMEM;
	for (i = first; i < n; i++) {
		const struct lento_fid *f[4] = { &recs[i].dir, &recs[i].obj,
						 &recs[i].dir2,
						 &recs[i].target };

		for (j = 0; j < 4; j++)
			if (!lento_fid_is_null(f[j]))
				nm[k++] = (struct named){ *f[j], i,
							  j == 1 || j == 3 };
	}
	qsort(nm, k, sizeof(*nm), named_cmp);
	for (i = 0; i < k && !ret; i = j) {
		const struct lento_rec *last;
		bool freeable = false;
		struct obj o;

		for (j = i; j < k && lento_fid_eq(&nm[j].fid, &nm[i].fid); j++)
			freeable |= nm[j].freeable;
		last = &recs[nm[j - 1].rec];	/* the last to name it */
		if (last->op == LENTO_OP_STORE &&
		    lento_fid_eq(&last->obj, &nm[i].fid) &&
		    last->attr.valid & LENTO_A_SIZE)
			least = add_sat(least, add_sat(STORE_OBJ_OVERHEAD,
						       last->attr.size));
		if (!freeable)
			continue;
		ret = obj_get(s, &nm[i].fid, &o);
		if (!ret)
			credit = add_sat(credit, obj_usage(&o));
		else if (ret == -ENOENT)	/* made by the batch, or none */
			ret = 0;
	}
	free(nm);
	*grow = least > credit ? least - credit : 0;
	return ret;
}

/*
 * The check could not judge (the store's trouble, not the batch's): why
 * in res->msg, for the caller's log; no verdict.
 */
static int unjudged(struct batch *b, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int unjudged(struct batch *b, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(b->res->msg, sizeof(b->res->msg), fmt, ap);
	va_end(ap);
	return err;
}

int store_reintegrate_check(struct store *s, uint32_t volume,
			    uint32_t client, const struct lento_rec *recs,
			    size_t n, struct store_result *res)
{
	struct batch b = {
		.s = s, .vol = volume, .client = client, .recs = recs,
		.res = res,
	};
	struct store_volume v;
	uint64_t last = 0, bodies = 0, room, grow;
	size_t first;
	int ret;

	memset(res, 0, sizeof(*res));
	res->rec = -1;
	if (s->broken)
		return unjudged(&b, -EIO, "an earlier commit failed with an "
				"unknown outcome: reopen the store");
	if (s->cb_depth)
		return unjudged(&b, -EDEADLK, "called from a callback");
	/*
	 * What store_reintegrate() refuses before any record, in its order:
	 * a batch refused here is refused with the apply's own answer.
	 */
	if (!client) {
		batch_fail(&b, -EINVAL, "client 0 is the server's");
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		if (recs[i].recno != recs[0].recno + i || !recs[i].recno) {
			b.i = i;
			bfail(&b, -EINVAL, NULL, "record numbers must be "
			      "consecutive, from 1");
			return 0;
		}
	}
	ret = vol_by_id(s, volume, &v);
	if (ret)
		return unjudged(&b, ret, "volume %" PRIu32 ": %s", volume,
				ret == -ENOENT ? "no such volume" : s->why);
	ret = client_get(s, volume, client, &last);
	if (ret)
		return unjudged(&b, ret, "database: %s", s->why);
	res->last_recno = last;
	res->stamp = v.stamp;
	if (n && recs[0].recno > last + 1) {
		batch_fail(&b, -EPROTO, "records %" PRIu64 " to %" PRIu64 " of "
			   "client %" PRIu32 " are missing: the batch starts at "
			   "%" PRIu64, last + 1, recs[0].recno - 1, client,
			   recs[0].recno);
		return 0;
	}
	/* Skipped records (a batch sent again) are not judged again. */
	first = n && recs[0].recno <= last ?
		(last - recs[0].recno + 1 < n ? last - recs[0].recno + 1 : n) :
		0;
	for (b.i = first; b.i < n; b.i++) {
		const struct lento_rec *r = &recs[b.i];

		if (r->op != LENTO_OP_STORE || !(r->attr.valid & LENTO_A_SIZE))
			continue;
		/* As op_store() would. */
		if (r->attr.size > STORE_FILE_MAX) {
			bfail(&b, -EFBIG, &r->obj, "size too large");
			return 0;
		}
		bodies += r->attr.size;	/* 8192 x 2^44 at most: no wrap */
	}
	room = v.quota > v.usage ? v.quota - v.usage : 0;
	if (!v.quota || bodies <= room)
		return 0;
	ret = batch_growth(s, recs, first, n, &grow);
	if (ret)
		return unjudged(&b, ret, "database: %s", s->why);
	/* As store_reintegrate() would, with the least usage it can make. */
	if (grow > room)
		batch_fail(&b, -EDQUOT, "volume %s: the batch would bring "
			   "usage to %" PRIu64 " bytes at least, over its "
			   "quota of %" PRIu64, v.name,
			   add_sat(v.usage, grow), v.quota);
	return 0;
}

int store_reintegrate(struct store *s, uint32_t volume, uint32_t client,
		      const struct lento_rec *recs, size_t n,
		      const struct store_body *bodies,
		      struct store_result *res)
{
	return store_reintegrate_with(s, volume, client, recs, n, bodies,
				      NULL, 0, res);
}

int store_content(struct store *s, const struct lento_fid *fid, bool *has,
		  struct lento_storeid *sid, uint64_t *size, int *fd)
{
	char name[BODY_NAME_LEN + 1];
	struct obj o;
	int r;

	USABLE(s);
	if (fd)
		*fd = -1;
	r = obj_get(s, fid, &o);
	if (r)
		return r;
	if (o.type != LENTO_T_REG)
		return -EINVAL;
	*has = o.has_body;
	*sid = o.body;
	*size = o.size;
	if (fd && o.has_body) {
		body_name(name, &o.fid, &o.body);
		*fd = openat(s->bodiesfd, name, O_RDONLY | O_CLOEXEC);
		if (*fd < 0)
			return errno == ENOENT ? -EIO : -errno;
	}
	return 0;
}

int store_resize_begin(struct store *s, struct store_resize *r)
{
	char bname[BODY_NAME_LEN + 1];

	USABLE(s);
	body_name(bname, &r->fid, &r->sid);
	/*
	 * A name of its own: a batch sent again after a reconnection has
	 * the same fids and records as one whose copies may still be made.
	 */
	snprintf(r->name, sizeof(r->name), "t.%s.%" PRIu64, bname,
		 ++s->resize_seq);
	r->out = openat(s->tmpfd, r->name, O_RDWR | O_CREAT | O_EXCL |
			O_CLOEXEC, 0600);
	if (r->out < 0) {
		r->name[0] = '\0';
		return -errno;
	}
	return 0;
}

int store_resize_copy(struct store *s, struct store_resize *r)
{
	int err = s->fault ? s->fault(s->fault_arg, STORE_FAULT_RESIZE,
				      NULL) : 0;

	if (!err && r->in >= 0)
		err = copy_data(r->in, r->out, r->len);
	if (!err && ftruncate(r->out, (off_t)r->size))
		err = -errno;
	if (!err && fdatasync(r->out))
		err = -errno;
	r->err = err;
	r->made = !err;
	return err;
}

void store_resize_end(struct store *s, struct store_resize *r)
{
	if (r->in >= 0)
		close(r->in);
	if (r->out >= 0)
		close(r->out);
	r->in = r->out = -1;
	if (r->name[0] && !r->taken)
		unlinkat(s->tmpfd, r->name, 0);
	r->name[0] = '\0';
}

int store_reintegrate_with(struct store *s, uint32_t volume, uint32_t client,
			   const struct lento_rec *recs, size_t n,
			   const struct store_body *bodies,
			   struct store_resize *rz, size_t nrz,
			   struct store_result *res)
{
	struct batch b = {
		.s = s, .vol = volume, .client = client, .recs = recs,
		.bodies = bodies, .rz = rz, .nrz = nrz, .res = res,
	};
	struct store_volume v;
	uint64_t last = 0, usage;
	size_t first;
	bool unknown;
	int ret;

	memset(res, 0, sizeof(*res));
	res->rec = -1;
	if (s->broken)
		return batch_fail(&b, -EIO, "an earlier commit failed with an "
				  "unknown outcome: reopen the store");
	if (s->cb_depth)
		return batch_fail(&b, -EDEADLK, "called from a callback");
	if (!client)
		return batch_fail(&b, -EINVAL, "client 0 is the server's");
	for (size_t i = 0; i < n; i++) {
		if (recs[i].recno != recs[0].recno + i || !recs[i].recno) {
			b.i = i;
			return bfail(&b, -EINVAL, NULL, "record numbers must "
				     "be consecutive, from 1");
		}
	}
	ret = tx_begin(s);
	if (!ret)
		ret = fault(s, STORE_FAULT_BEGIN);
	if (ret) {
		batch_fail(&b, ret, "BEGIN: %s", s->why);
		goto fail;
	}
	ret = vol_by_id(s, volume, &v);
	if (ret) {
		batch_fail(&b, ret, "volume %" PRIu32 ": %s", volume,
			   ret == -ENOENT ? "no such volume" : s->why);
		goto fail;
	}
	ret = client_get(s, volume, client, &last);
	if (ret) {
		batch_fail(&b, ret, "database: %s", s->why);
		goto fail;
	}
	res->last_recno = last;
	res->stamp = v.stamp;
	if (n && recs[0].recno > last + 1) {
		ret = batch_fail(&b, -EPROTO, "records %" PRIu64 " to %" PRIu64
				 " of client %" PRIu32 " are missing: the "
				 "batch starts at %" PRIu64, last + 1,
				 recs[0].recno - 1, client, recs[0].recno);
		goto fail;
	}
	first = n && recs[0].recno <= last ?
		(last - recs[0].recno + 1 < n ? last - recs[0].recno + 1 : n) :
		0;
	res->skipped = first;
	b.first_recno = last + 1;

	for (b.i = first; b.i < n; b.i++) {
		ret = apply(&b, &recs[b.i]);
		if (ret)
			goto fail;
	}
	if (first < n) {
		usage = (uint64_t)((int64_t)v.usage + b.usage_delta);
		if (v.quota && b.usage_delta > 0 && usage > v.quota) {
			ret = batch_fail(&b, -EDQUOT, "volume %s: the batch "
					 "would bring usage to %" PRIu64
					 " bytes, over its quota of %" PRIu64,
					 v.name, usage, v.quota);
			goto fail;
		}
		ret = place_bodies(&b);
		if (ret) {
			if (res->outcome == STORE_APPLIED)
				batch_fail(&b, ret, "making bodies durable: %s",
					   strerror(-ret));
			goto fail;
		}
		{
			sqlite3_stmt *st = s->q[Q_VOL_UPDATE];

			sqlite3_bind_int64(st, 1, volume);
			bind_u64(st, 2, v.stamp + (n - first));
			bind_u64(st, 3, usage);
			bind_u64(st, 4, (uint64_t)((int64_t)v.objects +
						   b.objects_delta));
			ret = done(s, st);
		}
		if (!ret) {
			sqlite3_stmt *st = s->q[Q_CLIENT_SET];

			sqlite3_bind_int64(st, 1, volume);
			sqlite3_bind_int64(st, 2, client);
			bind_u64(st, 3, recs[n - 1].recno);
			ret = done(s, st);
		}
		if (ret) {
			batch_fail(&b, ret, "database: %s", s->why);
			goto fail;
		}
	}
	ret = fault(s, STORE_FAULT_COMMIT);
	if (ret) {
		batch_fail(&b, ret, "COMMIT: %s", strerror(-ret));
		goto fail;
	}
	ret = tx_commit(s, &unknown);
	if (ret) {
		batch_fail(&b, ret, "COMMIT: %s%s", s->why, unknown ?
			   " (outcome unknown: the store must be reopened)" :
			   "");
		if (unknown) {
			/* The bodies stay: the next open keeps the ones the
			 * metadata names. */
			for (size_t k = 0; k < b.npend; k++)
				b.pend[k].placed = false;
		}
		goto fail;
	}
	fault(s, STORE_FAULT_COMMITTED);
	for (size_t k = 0; k < b.ndoom; k++) {
		char name[BODY_NAME_LEN + 1];

		body_name(name, &b.doom[k].fid, &b.doom[k].sid);
		unlinkat(s->bodiesfd, name, 0);
	}
	cleanup(&b);
	res->outcome = STORE_APPLIED;
	res->applied = n - first;
	if (first < n) {
		res->last_recno = recs[n - 1].recno;
		res->stamp = v.stamp + (n - first);
	}
	return 0;
fail:
	tx_rollback(s);
	unplace_bodies(&b);
	cleanup(&b);
	if (!res->err)
		batch_fail(&b, ret ? ret : -EIO, "failed");
	return res->err;
}

/* ----------------------------------------------------------- identities */

int store_client_count(struct store *s, uint64_t *n)
{
	sqlite3_stmt *st = s->q[Q_IDENT_COUNT];
	int r;

	USABLE(s);
	r = row(s, st);
	*n = r == 1 ? col_u64(st, 0) : 0;
	sqlite3_reset(st);
	return r < 0 ? r : 0;
}

int store_client_register(struct store *s, const uint8_t uuid[16],
			  uint32_t *id)
{
	return store_client_register_max(s, uuid, 0, id);
}

int store_client_register_max(struct store *s, const uint8_t uuid[16],
			      uint64_t max, uint32_t *id)
{
	sqlite3_stmt *st = s->q[Q_IDENT_BY_UUID];
	uint64_t n;
	int r;

	USABLE(s);
	sqlite3_bind_blob(st, 1, uuid, 16, SQLITE_STATIC);
	r = row(s, st);
	if (r == 1)
		*id = (uint32_t)sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	if (r)
		return r < 0 ? r : 0;
	if (max) {
		r = store_client_count(s, &n);
		if (r)
			return r;
		if (n >= max)
			return -EDQUOT;
	}
	st = s->q[Q_IDENT_INSERT];
	sqlite3_bind_blob(st, 1, uuid, 16, SQLITE_STATIC);
	bind_u64(st, 2, (uint64_t)now_ns());
	r = done(s, st);
	if (r)
		return r;
	if (sqlite3_last_insert_rowid(s->db) > UINT32_MAX)
		return -EOVERFLOW;
	*id = (uint32_t)sqlite3_last_insert_rowid(s->db);
	return 0;
}

int store_client_check(struct store *s, uint32_t id, const uint8_t uuid[16])
{
	sqlite3_stmt *st = s->q[Q_IDENT_BY_ID];
	int r;

	USABLE(s);
	sqlite3_bind_int64(st, 1, id);
	r = row(s, st);
	if (r == 1)
		r = sqlite3_column_bytes(st, 0) == 16 &&
		    !memcmp(sqlite3_column_blob(st, 0), uuid, 16) ? 0 : -EPERM;
	else if (r == 0)
		r = -ENOENT;
	sqlite3_reset(st);
	return r;
}
