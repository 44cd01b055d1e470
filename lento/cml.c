// SPDX-License-Identifier: MIT
/*
 * The client modification log in SQLite: append, batches, acknowledgement,
 * statistics, the client's identity and fid counter, and loading and
 * storing the records the optimiser (cml_opt.c) rewrites.
 *
 * Storage. Fids are 16-byte blobs (volume, client, seq; little-endian),
 * NULL for an unused slot; version vectors are blobs (n: 4, n counters of
 * 8, StoreId client: 4, seq: 8), NULL for an unused slot; names and data
 * are blobs of their bytes (no NUL); the maker's supplementary groups a
 * blob of little-endian u32s, NULL when none (a log made before records
 * had them gets the column at open); attributes are columns. Every change
 * of several statements runs in a savepoint, so it joins a transaction the
 * caller opened.
 *
 * Counters. Record numbers and fid sequence numbers are given out from
 * blocks: the stored counter (cml_meta 'last_recno', cml_fidseq.last) is
 * the last number of the block reserved, moved once per block in the
 * transaction that takes its first number. A transaction rolled back
 * takes its reservation with it, so the block is forgotten then
 * (rolled_back()) and the next number reserves again from what is stored:
 * no number is given out twice, and one given out in a transaction that
 * was undone may be given out again -- it named nothing. A restart skips
 * the rest of a block: numbers have gaps, as the optimiser leaves anyway.
 *
 * Statistics. cml_stats() would read the whole log; a volume's figures
 * are kept here once read and moved by what changes the log: an append,
 * a batch shipped or requeued, an acknowledgement (whose DELETE returns
 * what it removed), the optimiser's rewrite (from the records it loaded).
 * The oldest record's time alone is read again when an acknowledgement
 * or the rewrite removed or moved the record that had it. A record
 * dropped or a rollback make all of them be read anew.
 */
#include "array.h"
#include "blob.h"
#include "cml.h"
#include "cml_opt.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

enum {
	CML_PENDING = 0,
	CML_SHIPPED = 1,
};

enum stmt {
	S_BEGIN,
	S_RELEASE,
	S_ROLLBACK,
	S_META_GET,
	S_META_SET,
	S_RESERVE,
	S_INSERT,
	S_MINT,
	S_MINTED,
	S_PENDING,
	S_ALL,
	S_SHIP,
	S_REQUEUE,
	S_ACK,
	S_STATS,
	S_OLDEST,
	S_WINDOW,
	S_BASES,
	S_UPDATE,
	S_DELETE,
	S_DROP,
	S_REBASE,
	S_COUNT,
};

/* The columns of a record, in the order every SELECT of one gives them. */
#define REC_COLS							\
	"recno, op, flags, uid, gid, time, dir, obj, dir2, target, "	\
	"base_dir, base_obj, base_dir2, base_target, type, a_valid, "	\
	"a_mode, a_uid, a_gid, a_size, a_atime, a_mtime, a_ctime, a_rdev, " \
	"name, name2, data, body_size, groups"

/* In S_PENDING and S_ALL, after REC_COLS: the record's REC_BYTES. */
#define COL_BYTES	29

#define REC_BYTES							\
	"(" CML_STR(CML_REC_HDR_BYTES) " + coalesce(length(name), 0) + " \
	"coalesce(length(name2), 0) + coalesce(length(data), 0) + " \
	"coalesce(length(groups), 0) + body_size)"
#define CML_STR2(x) #x
#define CML_STR(x) CML_STR2(x)

static const char *const sql[S_COUNT] = {
	[S_BEGIN] = "SAVEPOINT cml",
	[S_RELEASE] = "RELEASE cml",
	[S_ROLLBACK] = "ROLLBACK TO cml",
	[S_META_GET] = "SELECT value FROM cml_meta WHERE key = ?1",
	[S_META_SET] = "INSERT OR REPLACE INTO cml_meta(key, value) VALUES (?1, ?2)",
	[S_RESERVE] = "UPDATE cml_meta SET value = value + ?1 "
		      "WHERE key = 'last_recno' RETURNING value",
	[S_INSERT] = "INSERT INTO cml(" REC_COLS ", volume, state) VALUES ("
		     "?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, "
		     "?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, "
		     "?25, ?26, ?27, ?28, ?29, ?30, 0)",
	[S_MINT] = "INSERT INTO cml_fidseq(volume, last) VALUES (?1, ?2) "
		   "ON CONFLICT(volume) DO UPDATE SET last = last + ?2 "
		   "RETURNING last",
	[S_MINTED] = "SELECT count(*) FROM cml_fidseq",
	[S_PENDING] = "SELECT " REC_COLS ", " REC_BYTES " FROM cml "
		      "WHERE volume = ?1 AND state = 0 ORDER BY recno",
	[S_ALL] = "SELECT " REC_COLS ", " REC_BYTES " FROM cml "
		  "WHERE volume = ?1 ORDER BY recno",
	[S_SHIP] = "UPDATE cml SET state = 1 WHERE volume = ?1 AND state = 0 "
		   "AND recno BETWEEN ?2 AND ?3",
	[S_REQUEUE] = "UPDATE cml SET state = 0 WHERE volume = ?1 AND state = 1",
	[S_ACK] = "DELETE FROM cml WHERE volume = ?1 AND recno <= ?2 "
		  "RETURNING " REC_BYTES ", state, time",
	[S_STATS] = "SELECT count(*), coalesce(sum(" REC_BYTES "), 0), "
		    "coalesce(sum(state <> 0), 0), coalesce(min(time), 0) "
		    "FROM cml WHERE volume = ?1",
	[S_OLDEST] = "SELECT coalesce(min(time), 0) FROM cml WHERE volume = ?1",
	[S_WINDOW] = "SELECT " REC_COLS " FROM cml WHERE volume = ?1 "
		     "AND state = 0 AND recno > (SELECT coalesce(max(recno), 0) "
		     "FROM cml WHERE volume = ?1 AND state <> 0) ORDER BY recno",
	[S_BASES] = "SELECT base_dir, base_obj, base_dir2, base_target "
		    "FROM cml WHERE recno = ?1",
	[S_UPDATE] = "UPDATE cml SET op = ?2, flags = ?3, time = ?4, dir = ?5, "
		     "obj = ?6, dir2 = ?7, target = ?8, base_dir = ?9, "
		     "base_obj = ?10, base_dir2 = ?11, base_target = ?12, "
		     "a_valid = ?13, a_mode = ?14, a_uid = ?15, a_gid = ?16, "
		     "a_size = ?17, a_atime = ?18, a_mtime = ?19, a_ctime = ?20, "
		     "a_rdev = ?21, name = ?22, name2 = ?23 WHERE recno = ?1",
	[S_DELETE] = "DELETE FROM cml WHERE recno = ?1",
	[S_DROP] = "DELETE FROM cml WHERE recno = ?1 AND state = 0",
	[S_REBASE] = "UPDATE cml SET "
		     "base_dir = CASE WHEN dir = ?2 THEN ?3 ELSE base_dir END, "
		     "base_obj = CASE WHEN obj = ?2 THEN ?3 ELSE base_obj END, "
		     "base_dir2 = CASE WHEN dir2 = ?2 THEN ?3 ELSE base_dir2 END, "
		     "base_target = CASE WHEN target = ?2 THEN ?3 "
		     "ELSE base_target END "
		     "WHERE volume = ?1 AND state = 0 AND "
		     "?2 IN (dir, obj, dir2, target)",
};

static const char schema[] =
	"CREATE TABLE IF NOT EXISTS cml_meta("
	"  key TEXT PRIMARY KEY, value) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS cml_fidseq("
	"  volume INTEGER PRIMARY KEY, last INTEGER NOT NULL);"
	"CREATE TABLE IF NOT EXISTS cml("
	"  recno INTEGER PRIMARY KEY,"
	"  volume INTEGER NOT NULL,"
	"  state INTEGER NOT NULL,"
	"  op INTEGER NOT NULL, flags INTEGER NOT NULL,"
	"  uid INTEGER NOT NULL, gid INTEGER NOT NULL, time INTEGER NOT NULL,"
	"  dir BLOB, obj BLOB NOT NULL, dir2 BLOB, target BLOB,"
	"  base_dir BLOB, base_obj BLOB, base_dir2 BLOB, base_target BLOB,"
	"  type INTEGER NOT NULL,"
	"  a_valid INTEGER NOT NULL, a_mode INTEGER NOT NULL,"
	"  a_uid INTEGER NOT NULL, a_gid INTEGER NOT NULL,"
	"  a_size INTEGER NOT NULL, a_atime INTEGER NOT NULL,"
	"  a_mtime INTEGER NOT NULL, a_ctime INTEGER NOT NULL,"
	"  a_rdev INTEGER NOT NULL,"
	"  name BLOB, name2 BLOB, data BLOB,"
	"  body_size INTEGER NOT NULL, groups BLOB);"
	"CREATE INDEX IF NOT EXISTS cml_volume ON cml(volume, recno);";

/* Numbers reserved at a time (see Counters above). */
#define RECNO_BLOCK	1024
#define FIDSEQ_BLOCK	256

/* A block of numbers reserved: next .. last; none when next > last. */
struct block {
	uint64_t next, last;
};

/* What is kept of one volume (see Statistics and Counters above). */
struct cml_vol {
	uint32_t volume;
	bool stats_known;
	bool oldest_known;	/* stats.oldest_ns, when stats_known */
	struct cml_stats stats;
	struct block fidseq;
};

struct cml {
	sqlite3 *db;
	bool own_db;
	uint32_t client;
	uint8_t uuid[CML_UUID_SIZE];
	sqlite3_stmt *st[S_COUNT];
	struct block recno;
	struct cml_vol *vols;
	size_t nvols, vols_cap;
};


/* -errno for an SQLite result code. */
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
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	case SQLITE_TOOBIG:
		return -E2BIG;
	case SQLITE_CONSTRAINT:
		return -EEXIST;
	case SQLITE_CANTOPEN:
		return -ENOENT;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		return -EUCLEAN;
	case SQLITE_INTERRUPT:
		return -EINTR;
	default:
		return -EIO;
	}
}

/* Run a cached statement that returns no row (or whose rows are not read). */
static int run(struct cml *cml, enum stmt s)
{
	int rc = sqlite3_step(cml->st[s]);

	sqlite3_reset(cml->st[s]);
	sqlite3_clear_bindings(cml->st[s]);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : sql_err(rc);
}

static void done(struct cml *cml, enum stmt s)
{
	sqlite3_reset(cml->st[s]);
	sqlite3_clear_bindings(cml->st[s]);
}

static int begin(struct cml *cml)
{
	return run(cml, S_BEGIN);
}

/* Blocks and figures a rollback may have undone, forgotten. */
static void forget(struct cml *cml)
{
	cml->recno = (struct block){ 1, 0 };
	for (size_t i = 0; i < cml->nvols; i++) {
		cml->vols[i].stats_known = false;
		cml->vols[i].fidseq = (struct block){ 1, 0 };
	}
}

/* SQLite's rollback hook: a transaction (the caller's or ours) undone. */
static void rolled_back(void *arg)
{
	forget(arg);
}

/* End the savepoint: keep its changes if @err is 0, else undo them. */
static int end(struct cml *cml, int err)
{
	if (!err)
		err = run(cml, S_RELEASE);
	if (err) {
		run(cml, S_ROLLBACK);
		run(cml, S_RELEASE);
		forget(cml);
	}
	return err;
}

/* What is kept of @volume; made if @make (NULL: no memory), else NULL. */
static struct cml_vol *vol_of(struct cml *cml, uint32_t volume, bool make)
{
	struct cml_vol *v;

	for (size_t i = 0; i < cml->nvols; i++)
		if (cml->vols[i].volume == volume)
			return &cml->vols[i];
	if (!make)
		return NULL;
	v = array_grow(cml->vols, &cml->vols_cap, cml->nvols, 1, sizeof(*v));
	if (!v)
		return NULL;
	cml->vols = v;
	v = &cml->vols[cml->nvols++];
	memset(v, 0, sizeof(*v));
	v->volume = volume;
	v->fidseq = (struct block){ 1, 0 };
	return v;
}

/* @volume's log changed other than by an append: its figures are read anew. */
static void stats_forget(struct cml *cml, uint32_t volume)
{
	struct cml_vol *v = vol_of(cml, volume, false);

	if (v)
		v->stats_known = false;
}

/*
 * The next number of block @b, reserving a block of @n first if it is
 * used up: @s is S_RESERVE (record numbers) or S_MINT (@volume's fids).
 */
static int take(struct cml *cml, struct block *b, enum stmt s,
		uint32_t volume, int64_t n, uint64_t *out)
{
	sqlite3_stmt *st = cml->st[s];
	sqlite3_int64 last = 0;
	int rc, err = 0;

	if (b->next <= b->last) {
		*out = b->next++;
		return 0;
	}
	if (s == S_MINT) {
		sqlite3_bind_int64(st, 1, volume);
		sqlite3_bind_int64(st, 2, n);
	} else {
		sqlite3_bind_int64(st, 1, n);
	}
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		/* Past INT64_MAX SQLite's sum turns into a real. */
		if (sqlite3_column_type(st, 0) != SQLITE_INTEGER)
			err = -EOVERFLOW;
		last = sqlite3_column_int64(st, 0);
	} else {
		err = rc == SQLITE_DONE ? -EUCLEAN : sql_err(rc);
	}
	/* RETURNING's row is out; step to the end so the change is made. */
	if (!err && sqlite3_step(st) != SQLITE_DONE)
		err = -EIO;
	done(cml, s);
	if (!err && last < n)
		err = -EUCLEAN;
	if (err)
		return err;
	b->next = (uint64_t)(last - n) + 1;
	b->last = (uint64_t)last;
	*out = b->next++;
	return 0;
}

/* Encodings ------------------------------------------------------------ */

static int bind_fid(sqlite3_stmt *st, int col, const struct lento_fid *f)
{
	uint8_t b[FID_BLOB];

	if (lento_fid_is_null(f))
		return sqlite3_bind_null(st, col);
	fid_encode(b, f);
	return sqlite3_bind_blob(st, col, b, sizeof(b), SQLITE_TRANSIENT);
}

/* NULL is the null fid. */
static int col_fid(sqlite3_stmt *st, int col, struct lento_fid *f)
{
	memset(f, 0, sizeof(*f));
	if (sqlite3_column_type(st, col) == SQLITE_NULL)
		return 0;
	return fid_decode(sqlite3_column_blob(st, col),
			  (size_t)sqlite3_column_bytes(st, col), f);
}

/* A base for a slot: NULL when the slot is unused. */
static int bind_vv(sqlite3_stmt *st, int col, const struct lento_fid *f,
		   const struct lento_vv *vv)
{
	uint8_t b[VV_BLOB_MAX];

	if (lento_fid_is_null(f))
		return sqlite3_bind_null(st, col);
	return sqlite3_bind_blob(st, col, b, (int)vv_encode(b, vv),
				 SQLITE_TRANSIENT);
}

static int col_vv(sqlite3_stmt *st, int col, struct lento_vv *vv)
{
	const void *b = sqlite3_column_blob(st, col);

	size_t len = (size_t)sqlite3_column_bytes(st, col);

	/* NULL (an unused slot) is no version. */
	if (!len) {
		memset(vv, 0, sizeof(*vv));
		return 0;
	}
	return vv_decode(b, len, vv);
}

/* A name: its bytes without the NUL, NULL when empty. */
static int bind_name(sqlite3_stmt *st, int col, const char *name)
{
	size_t len = strlen(name);

	if (!len)
		return sqlite3_bind_null(st, col);
	return sqlite3_bind_blob(st, col, name, (int)len, SQLITE_TRANSIENT);
}

static int col_name(sqlite3_stmt *st, int col, char *name)
{
	const void *b = sqlite3_column_blob(st, col);
	int len = sqlite3_column_bytes(st, col);

	if (len > LENTO_NAME_MAX || (len && !b) || (len && memchr(b, 0, len)))
		return -EUCLEAN;
	if (len)
		memcpy(name, b, len);
	name[len] = 0;
	return 0;
}

/* Record shape --------------------------------------------------------- */

static bool is_create(uint16_t op)
{
	return op == LENTO_OP_CREATE || op == LENTO_OP_MKDIR ||
	       op == LENTO_OP_MKNOD || op == LENTO_OP_SYMLINK;
}

static int check_name(const char *name, bool need)
{
	size_t len = strnlen(name, LENTO_NAME_MAX + 1);

	if (len > LENTO_NAME_MAX || (need && !len))
		return -EINVAL;
	return 0;
}

static int check_rec(const struct lento_rec *r, uint64_t body_size)
{
	const struct lento_fid *fids[] = { &r->dir, &r->obj, &r->dir2,
					   &r->target };
	bool dir = false, dir2 = false, target = false, name = false,
	     name2 = false;
	uint16_t flags = 0;
	uint32_t data_max = 0;
	int err;

	if (r->op < LENTO_OP_CREATE || r->op > LENTO_OP_LAST)
		return -EINVAL;
	if (lento_fid_is_null(&r->obj))
		return -EINVAL;
	for (size_t i = 0; i < 4; i++)
		if (!lento_fid_is_null(fids[i]) &&
		    fids[i]->volume != r->obj.volume)
			return -EXDEV;
	if (is_create(r->op)) {
		dir = name = true;
		if (r->type < LENTO_T_REG || r->type > LENTO_T_BLK ||
		    (r->op == LENTO_OP_MKDIR) != (r->type == LENTO_T_DIR) ||
		    (r->op == LENTO_OP_SYMLINK) != (r->type == LENTO_T_SYMLINK) ||
		    (r->op == LENTO_OP_CREATE && r->type != LENTO_T_REG))
			return -EINVAL;
		if (r->op == LENTO_OP_SYMLINK)
			data_max = LENTO_SYMLINK_MAX;
	} else if (r->op == LENTO_OP_LINK || r->op == LENTO_OP_UNLINK ||
		   r->op == LENTO_OP_RMDIR) {
		dir = name = true;
		if (r->op == LENTO_OP_UNLINK)
			flags = LENTO_R_LASTLINK;
	} else if (r->op == LENTO_OP_RENAME) {
		dir = dir2 = name = name2 = true;
		target = !lento_fid_is_null(&r->target);
		flags = LENTO_R_NOREPLACE | LENTO_R_EXCHANGE | LENTO_R_LASTLINK;
		if ((r->flags & LENTO_R_EXCHANGE) &&
		    (!target || (r->flags & (LENTO_R_NOREPLACE |
					     LENTO_R_LASTLINK))))
			return -EINVAL;
		if (target && (r->flags & LENTO_R_NOREPLACE))
			return -EINVAL;
		if (!target && (r->flags & LENTO_R_LASTLINK))
			return -EINVAL;
	} else if (r->op == LENTO_OP_SETXATTR || r->op == LENTO_OP_REMOVEXATTR) {
		name = true;
		if (r->op == LENTO_OP_SETXATTR)
			data_max = LENTO_XATTR_SIZE_MAX;
	} else if (r->op == LENTO_OP_PRUNEXATTRS) {
		data_max = LENTO_XATTRS_MAX * (LENTO_XATTR_NAME_MAX + 1);
	}
	if (r->flags & ~flags)
		return -EINVAL;
	if (dir == lento_fid_is_null(&r->dir) ||
	    dir2 == lento_fid_is_null(&r->dir2) ||
	    (!target && !lento_fid_is_null(&r->target)))
		return -EINVAL;
	err = check_name(r->name, name);
	if (!err)
		err = check_name(r->name2, name2);
	if (err)
		return err;
	if ((!name && r->name[0]) || (!name2 && r->name2[0]))
		return -EINVAL;
	if (r->data_len > data_max || (r->data_len && !r->data))
		return -EINVAL;
	if (r->ngroups > LENTO_GROUPS_MAX || (r->ngroups && !r->groups))
		return -EINVAL;
	if (body_size && r->op != LENTO_OP_STORE)
		return -EINVAL;
	return 0;
}

uint64_t cml_rec_bytes(const struct lento_rec *rec, uint64_t body_size)
{
	return CML_REC_HDR_BYTES +
	       strnlen(rec->name, LENTO_NAME_MAX + 1) +
	       strnlen(rec->name2, LENTO_NAME_MAX + 1) + rec->data_len +
	       4 * (uint64_t)rec->ngroups + body_size;
}

/* Open and close ------------------------------------------------------- */

static int meta_get(struct cml *cml, const char *key, sqlite3_int64 *v,
		    uint8_t *blob, size_t blob_len)
{
	sqlite3_stmt *st = cml->st[S_META_GET];
	int rc, err = 0;

	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		if (blob) {
			if ((size_t)sqlite3_column_bytes(st, 0) != blob_len ||
			    sqlite3_column_type(st, 0) != SQLITE_BLOB)
				err = -EUCLEAN;
			else
				memcpy(blob, sqlite3_column_blob(st, 0),
				       blob_len);
		} else {
			if (sqlite3_column_type(st, 0) != SQLITE_INTEGER)
				err = -EUCLEAN;
			*v = sqlite3_column_int64(st, 0);
		}
	} else {
		err = rc == SQLITE_DONE ? -ENOENT : sql_err(rc);
	}
	done(cml, S_META_GET);
	return err;
}

static int meta_set(struct cml *cml, const char *key, sqlite3_int64 v,
		    const uint8_t *blob, size_t blob_len)
{
	sqlite3_stmt *st = cml->st[S_META_SET];

	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	if (blob)
		sqlite3_bind_blob(st, 2, blob, (int)blob_len, SQLITE_STATIC);
	else
		sqlite3_bind_int64(st, 2, v);
	return run(cml, S_META_SET);
}

static int random_bytes(void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* A new log: its format, its record counter and the client's identity. */
static int create_ident(struct cml *cml)
{
	uint32_t client = 0;
	int err;

	while (!client) {
		err = random_bytes(&client, sizeof(client));
		if (err)
			return err;
	}
	err = random_bytes(cml->uuid, sizeof(cml->uuid));
	if (err)
		return err;
	cml->uuid[6] = (cml->uuid[6] & 0x0f) | 0x40;	/* version 4 */
	cml->uuid[8] = (cml->uuid[8] & 0x3f) | 0x80;	/* RFC 4122 variant */
	cml->client = client;
	err = meta_set(cml, "format", CML_FORMAT, NULL, 0);
	if (!err)
		err = meta_set(cml, "last_recno", 0, NULL, 0);
	if (!err)
		err = meta_set(cml, "client", client, NULL, 0);
	if (!err)
		err = meta_set(cml, "uuid", 0, cml->uuid, sizeof(cml->uuid));
	return err;
}

static int load_ident(struct cml *cml)
{
	sqlite3_int64 format, client, last;
	int err;

	err = meta_get(cml, "format", &format, NULL, 0);
	if (err == -ENOENT)
		return create_ident(cml);
	if (err)
		return err;
	if (format != CML_FORMAT)
		return format > CML_FORMAT ? -EPROTO : -EUCLEAN;
	err = meta_get(cml, "client", &client, NULL, 0);
	if (!err)
		err = meta_get(cml, "uuid", NULL, cml->uuid, sizeof(cml->uuid));
	if (!err)
		err = meta_get(cml, "last_recno", &last, NULL, 0);
	if (err)
		return err == -ENOENT ? -EUCLEAN : err;
	if (client <= 0 || client > UINT32_MAX || last < 0)
		return -EUCLEAN;
	cml->client = (uint32_t)client;
	return 0;
}

/*
 * A log made before records carried their maker's groups has no column
 * for them: it gets one, empty (NULL) for the records it holds.
 */
static int add_groups_column(sqlite3 *db)
{
	sqlite3_stmt *st;
	bool found = false;
	int rc;

	rc = sqlite3_prepare_v2(db, "PRAGMA table_info(cml)", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return sql_err(rc);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const unsigned char *name = sqlite3_column_text(st, 1);

		found |= name && !strcmp((const char *)name, "groups");
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return sql_err(rc) ?: -EIO;
	if (found)
		return 0;
	return sql_err(sqlite3_exec(db, "ALTER TABLE cml ADD COLUMN "
				    "groups BLOB", NULL, NULL, NULL));
}

static void finalize_all(struct cml *cml)
{
	for (int i = 0; i < S_COUNT; i++) {
		sqlite3_finalize(cml->st[i]);
		cml->st[i] = NULL;
	}
}

int cml_open(struct cml **cmlp, sqlite3 *db)
{
	struct cml *cml;
	int err, rc;

	*cmlp = NULL;
	if (!db)
		return -EINVAL;
	cml = calloc(1, sizeof(*cml));
	if (!cml)
		return -ENOMEM;
	cml->db = db;
	/*
	 * The schema first (in a savepoint of its own, so a caller's open
	 * transaction is joined), then the statements that use it.
	 */
	rc = sqlite3_exec(db, "SAVEPOINT cml_open", NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, schema, NULL, NULL, NULL);
	err = sql_err(rc);
	if (!err)
		err = add_groups_column(db);
	for (int i = 0; !err && i < S_COUNT; i++)
		err = sql_err(sqlite3_prepare_v3(db, sql[i], -1,
						 SQLITE_PREPARE_PERSISTENT,
						 &cml->st[i], NULL));
	if (!err)
		err = load_ident(cml);
	if (!err)
		err = sql_err(sqlite3_exec(db, "RELEASE cml_open", NULL, NULL,
					   NULL));
	if (err) {
		sqlite3_exec(db, "ROLLBACK TO cml_open", NULL, NULL, NULL);
		sqlite3_exec(db, "RELEASE cml_open", NULL, NULL, NULL);
		finalize_all(cml);
		free(cml);
		return err;
	}
	forget(cml);
	sqlite3_rollback_hook(db, rolled_back, cml);
	*cmlp = cml;
	return 0;
}

int cml_open_path(struct cml **cmlp, const char *path)
{
	sqlite3 *db = NULL;
	int rc, err;

	*cmlp = NULL;
	rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE |
			     SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_busy_timeout(db, 10000);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, "PRAGMA journal_mode = WAL; "
				  "PRAGMA synchronous = FULL;", NULL, NULL,
				  NULL);
	err = sql_err(rc);
	if (!err)
		err = cml_open(cmlp, db);
	if (err) {
		sqlite3_close(db);
		return err;
	}
	(*cmlp)->own_db = true;
	return 0;
}

void cml_close(struct cml *cml)
{
	if (!cml)
		return;
	sqlite3_rollback_hook(cml->db, NULL, NULL);
	finalize_all(cml);
	if (cml->own_db)
		sqlite3_close(cml->db);
	free(cml->vols);
	free(cml);
}

sqlite3 *cml_db(struct cml *cml)
{
	return cml->db;
}

/* Identity and fids ---------------------------------------------------- */

int cml_ident(struct cml *cml, uint32_t *client, uint8_t uuid[CML_UUID_SIZE])
{
	if (client)
		*client = cml->client;
	if (uuid)
		memcpy(uuid, cml->uuid, CML_UUID_SIZE);
	return 0;
}

int cml_set_client(struct cml *cml, uint32_t client)
{
	sqlite3_stmt *st = cml->st[S_MINTED];
	int err, rc;

	if (!client)
		return -EINVAL;
	err = begin(cml);
	if (err)
		return err;
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW)
		err = sql_err(rc);
	else if (sqlite3_column_int64(st, 0))
		err = -EBUSY;
	done(cml, S_MINTED);
	if (!err)
		err = meta_set(cml, "client", client, NULL, 0);
	err = end(cml, err);
	if (!err)
		cml->client = client;
	return err;
}

int cml_mint_fid(struct cml *cml, uint32_t volume, struct lento_fid *fid)
{
	struct cml_vol *v = vol_of(cml, volume, true);
	uint64_t seq;
	int err;

	if (!v)
		return -ENOMEM;
	err = take(cml, &v->fidseq, S_MINT, volume, FIDSEQ_BLOCK, &seq);
	if (err)
		return err;
	fid->volume = volume;
	fid->client = cml->client;
	fid->seq = seq;
	return 0;
}

/* Append --------------------------------------------------------------- */

static void bind_attr(sqlite3_stmt *st, int col, const struct lento_attr *a)
{
	sqlite3_bind_int64(st, col, a->valid);
	sqlite3_bind_int64(st, col + 1, a->mode);
	sqlite3_bind_int64(st, col + 2, a->uid);
	sqlite3_bind_int64(st, col + 3, a->gid);
	sqlite3_bind_int64(st, col + 4, (sqlite3_int64)a->size);
	sqlite3_bind_int64(st, col + 5, a->atime_ns);
	sqlite3_bind_int64(st, col + 6, a->mtime_ns);
	sqlite3_bind_int64(st, col + 7, a->ctime_ns);
	sqlite3_bind_int64(st, col + 8, (sqlite3_int64)a->rdev);
}

static void col_attr(sqlite3_stmt *st, int col, struct lento_attr *a)
{
	a->valid = (uint32_t)sqlite3_column_int64(st, col);
	a->mode = (uint32_t)sqlite3_column_int64(st, col + 1);
	a->uid = (uint32_t)sqlite3_column_int64(st, col + 2);
	a->gid = (uint32_t)sqlite3_column_int64(st, col + 3);
	a->size = (uint64_t)sqlite3_column_int64(st, col + 4);
	a->atime_ns = sqlite3_column_int64(st, col + 5);
	a->mtime_ns = sqlite3_column_int64(st, col + 6);
	a->ctime_ns = sqlite3_column_int64(st, col + 7);
	a->rdev = (uint64_t)sqlite3_column_int64(st, col + 8);
}

/* A record of @bytes, at @time_ns, in @v's figures, if they are kept. */
static void figures_add(struct cml_vol *v, uint64_t bytes, int64_t time_ns)
{
	if (!v || !v->stats_known)
		return;
	if (!v->stats.records) {
		v->stats.oldest_ns = time_ns;
		v->oldest_known = true;
	} else if (time_ns < v->stats.oldest_ns) {
		v->stats.oldest_ns = time_ns;
	}
	v->stats.records++;
	v->stats.bytes += bytes;
}

/*
 * A record of @bytes (@shipped or not), at @time_ns, out of @v's figures,
 * if they are kept. The oldest time is read again if it was the record's.
 */
static void figures_drop(struct cml_vol *v, uint64_t bytes, bool shipped,
			 int64_t time_ns)
{
	if (!v || !v->stats_known)
		return;
	if (!v->stats.records || v->stats.bytes < bytes ||
	    v->stats.shipped < shipped) {
		v->stats_known = false;		/* not what was counted */
		return;
	}
	v->stats.records--;
	v->stats.bytes -= bytes;
	v->stats.shipped -= shipped;
	if (time_ns <= v->stats.oldest_ns)
		v->oldest_known = false;
	if (!v->stats.records) {
		v->stats.oldest_ns = 0;
		v->oldest_known = true;
	}
}

/* An appended record counted in its volume's figures. */
static void count_append(struct cml *cml, const struct lento_rec *rec,
			 uint64_t body_size)
{
	figures_add(vol_of(cml, rec->obj.volume, false),
		    cml_rec_bytes(rec, body_size), rec->time_ns);
}

int cml_append(struct cml *cml, struct lento_rec *rec, uint64_t body_size)
{
	sqlite3_stmt *st = cml->st[S_INSERT];
	uint64_t recno;
	int err;

	err = check_rec(rec, body_size);
	if (err)
		return err;
	if (body_size > INT64_MAX)
		return -EFBIG;
	/* One statement (and now and then a reservation): no savepoint. */
	err = take(cml, &cml->recno, S_RESERVE, 0, RECNO_BLOCK, &recno);
	if (!err) {
		sqlite3_bind_int64(st, 1, (sqlite3_int64)recno);
		sqlite3_bind_int64(st, 2, rec->op);
		sqlite3_bind_int64(st, 3, rec->flags);
		sqlite3_bind_int64(st, 4, rec->uid);
		sqlite3_bind_int64(st, 5, rec->gid);
		sqlite3_bind_int64(st, 6, rec->time_ns);
		bind_fid(st, 7, &rec->dir);
		bind_fid(st, 8, &rec->obj);
		bind_fid(st, 9, &rec->dir2);
		bind_fid(st, 10, &rec->target);
		bind_vv(st, 11, &rec->dir, &rec->base_dir);
		bind_vv(st, 12, &rec->obj, &rec->base_obj);
		bind_vv(st, 13, &rec->dir2, &rec->base_dir2);
		bind_vv(st, 14, &rec->target, &rec->base_target);
		sqlite3_bind_int64(st, 15, rec->type);
		bind_attr(st, 16, &rec->attr);
		bind_name(st, 25, rec->name);
		bind_name(st, 26, rec->name2);
		if (rec->data_len)
			sqlite3_bind_blob(st, 27, rec->data, (int)rec->data_len,
					  SQLITE_STATIC);
		else
			sqlite3_bind_null(st, 27);
		sqlite3_bind_int64(st, 28, (sqlite3_int64)body_size);
		if (rec->ngroups)
			sqlite3_bind_blob(st, 29, rec->groups,
					  4 * (int)rec->ngroups, SQLITE_STATIC);
		else
			sqlite3_bind_null(st, 29);
		sqlite3_bind_int64(st, 30, rec->obj.volume);
		err = run(cml, S_INSERT);
	}
	if (err)
		return err;
	rec->recno = recno;
	count_append(cml, rec, body_size);
	return 0;
}

/* Reading -------------------------------------------------------------- */

/* The maker's groups: r->groups points into the statement's row. */
static int col_groups(sqlite3_stmt *st, int col, struct lento_rec *r)
{
	const void *b = sqlite3_column_blob(st, col);
	int len = sqlite3_column_bytes(st, col);

	if (len % 4 || len / 4 > LENTO_GROUPS_MAX || (len && !b))
		return -EUCLEAN;
	r->groups = len ? b : NULL;
	r->ngroups = (uint16_t)(len / 4);
	return 0;
}

/*
 * A row of REC_COLS into @r; r->data and r->groups point into the
 * statement's row.
 */
static int col_rec(sqlite3_stmt *st, struct lento_rec *r, uint64_t *body_size)
{
	int err = 0;

	memset(r, 0, sizeof(*r));
	r->recno = (uint64_t)sqlite3_column_int64(st, 0);
	r->op = (uint16_t)sqlite3_column_int(st, 1);
	r->flags = (uint16_t)sqlite3_column_int(st, 2);
	r->uid = (uint32_t)sqlite3_column_int64(st, 3);
	r->gid = (uint32_t)sqlite3_column_int64(st, 4);
	r->time_ns = sqlite3_column_int64(st, 5);
	err = err ?: col_fid(st, 6, &r->dir);
	err = err ?: col_fid(st, 7, &r->obj);
	err = err ?: col_fid(st, 8, &r->dir2);
	err = err ?: col_fid(st, 9, &r->target);
	err = err ?: col_vv(st, 10, &r->base_dir);
	err = err ?: col_vv(st, 11, &r->base_obj);
	err = err ?: col_vv(st, 12, &r->base_dir2);
	err = err ?: col_vv(st, 13, &r->base_target);
	r->type = (uint8_t)sqlite3_column_int(st, 14);
	col_attr(st, 15, &r->attr);
	err = err ?: col_name(st, 24, r->name);
	err = err ?: col_name(st, 25, r->name2);
	if (sqlite3_column_type(st, 26) != SQLITE_NULL) {
		r->data = sqlite3_column_blob(st, 26);
		r->data_len = (uint32_t)sqlite3_column_bytes(st, 26);
	}
	if (body_size)
		*body_size = (uint64_t)sqlite3_column_int64(st, 27);
	err = err ?: col_groups(st, 28, r);
	if (!err && r->op >= LENTO_OP_CREATE && r->op <= LENTO_OP_LAST &&
	    !lento_fid_is_null(&r->obj))
		return 0;
	return err ?: -EUCLEAN;
}

/* Call @fn for records of @s; stop at the limits. Returns the count. */
static int walk(struct cml *cml, enum stmt s, uint32_t volume,
		uint32_t max_records, uint64_t max_bytes, cml_rec_fn *fn,
		void *arg, uint64_t *first, uint64_t *last)
{
	sqlite3_stmt *st = cml->st[s];
	struct lento_rec *rec;
	uint64_t bytes = 0, body;
	int n = 0, rc, err = 0;

	rec = malloc(sizeof(*rec));
	if (!rec)
		return -ENOMEM;
	sqlite3_bind_int64(st, 1, volume);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		uint64_t b = (uint64_t)sqlite3_column_int64(st, COL_BYTES);

		if (n && ((max_records && (uint32_t)n >= max_records) ||
			  (max_bytes && bytes + b > max_bytes)))
			break;
		if (n == INT_MAX)
			break;
		err = col_rec(st, rec, &body);
		if (!err)
			err = fn(arg, rec, body);
		if (err)
			break;
		if (!n && first)
			*first = rec->recno;
		if (last)
			*last = rec->recno;
		bytes += b;
		n++;
	}
	if (!err && rc != SQLITE_ROW && rc != SQLITE_DONE)
		err = sql_err(rc);
	done(cml, s);
	free(rec);
	return err ?: n;
}

int cml_batch(struct cml *cml, uint32_t volume, uint32_t max_records,
	      uint64_t max_bytes, cml_rec_fn *fn, void *arg)
{
	uint64_t first = 0, last = 0, shipped = 0;
	struct cml_vol *v;
	int n, err;

	err = begin(cml);
	if (err)
		return err;
	n = walk(cml, S_PENDING, volume, max_records, max_bytes, fn, arg,
		 &first, &last);
	err = n < 0 ? n : 0;
	if (n > 0) {
		sqlite3_stmt *st = cml->st[S_SHIP];

		sqlite3_bind_int64(st, 1, volume);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)first);
		sqlite3_bind_int64(st, 3, (sqlite3_int64)last);
		err = run(cml, S_SHIP);
	}
	if (!err && n > 0)
		shipped = (uint64_t)sqlite3_changes(cml->db);
	err = end(cml, err);
	v = err ? NULL : vol_of(cml, volume, false);
	if (v && v->stats_known)
		v->stats.shipped += shipped;
	return err ?: n;
}

int cml_list(struct cml *cml, uint32_t volume, cml_rec_fn *fn, void *arg)
{
	return walk(cml, S_ALL, volume, 0, 0, fn, arg, NULL, NULL);
}

int cml_requeue(struct cml *cml, uint32_t volume)
{
	struct cml_vol *v = vol_of(cml, volume, false);
	int err;

	sqlite3_bind_int64(cml->st[S_REQUEUE], 1, volume);
	err = run(cml, S_REQUEUE);
	/* Nothing is left taken by a batch. */
	if (err)
		stats_forget(cml, volume);
	else if (v)
		v->stats.shipped = 0;
	return err;
}

int cml_drop(struct cml *cml, uint64_t recno)
{
	int err;

	if (recno > INT64_MAX)
		return -ENOENT;
	for (size_t i = 0; i < cml->nvols; i++)
		cml->vols[i].stats_known = false;
	sqlite3_bind_int64(cml->st[S_DROP], 1, (sqlite3_int64)recno);
	err = run(cml, S_DROP);
	return err ?: (sqlite3_changes(cml->db) ? 0 : -ENOENT);
}

int cml_rebase(struct cml *cml, uint32_t volume, const struct lento_fid *fid,
	       const struct lento_vv *vv)
{
	sqlite3_stmt *st = cml->st[S_REBASE];
	int err;

	sqlite3_bind_int64(st, 1, volume);
	bind_fid(st, 2, fid);
	bind_vv(st, 3, fid, vv);
	err = run(cml, S_REBASE);
	return err ?: sqlite3_changes(cml->db);
}

int cml_ack(struct cml *cml, uint32_t volume, uint64_t upto)
{
	sqlite3_stmt *st = cml->st[S_ACK];
	struct cml_vol *v = vol_of(cml, volume, false);
	int rc, n = 0, err;

	if (upto > INT64_MAX)
		upto = INT64_MAX;
	sqlite3_bind_int64(st, 1, volume);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)upto);
	/* Each record deleted leaves its volume's figures. */
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		n++;
		figures_drop(v, (uint64_t)sqlite3_column_int64(st, 0),
			     sqlite3_column_int64(st, 1) != 0,
			     sqlite3_column_int64(st, 2));
	}
	err = rc == SQLITE_DONE ? 0 : sql_err(rc) ?: -EIO;
	done(cml, S_ACK);
	if (err)
		stats_forget(cml, volume);
	return err ?: n;
}

int cml_stats(struct cml *cml, uint32_t volume, struct cml_stats *out)
{
	sqlite3_stmt *st = cml->st[S_STATS];
	struct cml_vol *v = vol_of(cml, volume, true);
	int rc, err = 0;

	if (v && v->stats_known && !v->oldest_known) {
		st = cml->st[S_OLDEST];
		sqlite3_bind_int64(st, 1, volume);
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			v->stats.oldest_ns = sqlite3_column_int64(st, 0);
			v->oldest_known = true;
		} else {
			err = sql_err(rc) ?: -EIO;
		}
		done(cml, S_OLDEST);
		if (err)
			return err;
	}
	if (v && v->stats_known) {
		*out = v->stats;
		return 0;
	}
	memset(out, 0, sizeof(*out));
	sqlite3_bind_int64(st, 1, volume);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		out->records = (uint64_t)sqlite3_column_int64(st, 0);
		out->bytes = (uint64_t)sqlite3_column_int64(st, 1);
		out->shipped = (uint64_t)sqlite3_column_int64(st, 2);
		out->oldest_ns = sqlite3_column_int64(st, 3);
	} else {
		err = sql_err(rc) ?: -EIO;
	}
	done(cml, S_STATS);
	if (!err && v) {
		v->stats = *out;
		v->stats_known = true;
		v->oldest_known = true;
	}
	return err;
}

/* The optimiser's load and store --------------------------------------- */

/* What a node counted for in its volume's figures, as loaded. */
struct loaded {
	uint64_t bytes;		/* cml_rec_bytes() */
	uint64_t fixed;		/* of those, not names': data, groups, body */
	int64_t time_ns;
};

struct window {
	struct cml_onode *nodes;
	char **names;		/* per node: name, name2, groups (one block) */
	struct lento_fid (*was)[CML_NSLOT];	/* per node: fids as loaded */
	struct loaded *loaded;	/* per node: what its figures were */
	uint32_t n, cap;
};

static void window_free(struct window *w)
{
	for (uint32_t i = 0; i < w->n; i++)
		free(w->names[i]);
	free(w->names);
	free(w->nodes);
	free(w->was);
	free(w->loaded);
}

static int window_grow(struct window *w)
{
	uint32_t cap = w->cap ? w->cap * 2 : 256;
	void *p;

	p = realloc(w->nodes, cap * sizeof(*w->nodes));
	if (!p)
		return -ENOMEM;
	w->nodes = p;
	p = realloc(w->names, cap * sizeof(*w->names));
	if (!p)
		return -ENOMEM;
	w->names = p;
	p = realloc(w->was, cap * sizeof(*w->was));
	if (!p)
		return -ENOMEM;
	w->was = p;
	p = realloc(w->loaded, cap * sizeof(*w->loaded));
	if (!p)
		return -ENOMEM;
	w->loaded = p;
	w->cap = cap;
	return 0;
}

static int window_load(struct cml *cml, uint32_t volume, struct window *w)
{
	sqlite3_stmt *st = cml->st[S_WINDOW];
	struct lento_rec *rec;
	int rc, err = 0;

	rec = malloc(sizeof(*rec));
	if (!rec)
		return -ENOMEM;
	sqlite3_bind_int64(st, 1, volume);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct cml_onode *o;
		uint64_t body_size;
		size_t l1, l2, lg;
		char *names;

		if (w->n == UINT32_MAX - 1) {
			err = -E2BIG;
			break;
		}
		err = w->n == w->cap ? window_grow(w) : 0;
		err = err ?: col_rec(st, rec, &body_size);
		if (err)
			break;
		l1 = strlen(rec->name);
		l2 = strlen(rec->name2);
		lg = 4 * (size_t)rec->ngroups;
		names = malloc(l1 + l2 + 2 + lg);
		if (!names) {
			err = -ENOMEM;
			break;
		}
		memcpy(names, rec->name, l1 + 1);
		memcpy(names + l1 + 1, rec->name2, l2 + 1);
		if (lg)
			memcpy(names + l1 + l2 + 2, rec->groups, lg);
		w->names[w->n] = names;
		o = &w->nodes[w->n];
		memset(o, 0, sizeof(*o));
		o->recno = rec->recno;
		o->op = rec->op;
		o->flags = rec->flags;
		o->uid = rec->uid;
		o->gid = rec->gid;
		o->time_ns = rec->time_ns;
		o->fid[CML_DIR] = rec->dir;
		o->fid[CML_OBJ] = rec->obj;
		o->fid[CML_DIR2] = rec->dir2;
		o->fid[CML_TARGET] = rec->target;
		o->type = rec->type;
		o->attr = rec->attr;
		o->name = names;
		o->name2 = names + l1 + 1;
		o->groups = lg ? (const uint8_t *)names + l1 + l2 + 2 : NULL;
		o->ngroups = rec->ngroups;
		for (int s = 0; s < CML_NSLOT; s++) {
			o->base_node[s] = w->n;
			o->base_slot[s] = (uint8_t)s;
		}
		memcpy(w->was[w->n], o->fid, sizeof(o->fid));
		w->loaded[w->n] = (struct loaded){
			.bytes = cml_rec_bytes(rec, body_size),
			.fixed = rec->data_len + lg + body_size,
			.time_ns = rec->time_ns,
		};
		w->n++;
	}
	if (!err && rc != SQLITE_ROW && rc != SQLITE_DONE)
		err = sql_err(rc);
	done(cml, S_WINDOW);
	free(rec);
	return err;
}

/* The base blobs a rewritten node gets, read before anything changes. */
struct bases {
	uint8_t b[CML_NSLOT][VV_BLOB_MAX];
	int len[CML_NSLOT];	/* -1: NULL */
};

static int read_base(struct cml *cml, uint64_t recno, int slot, uint8_t *b,
		     int *len)
{
	sqlite3_stmt *st = cml->st[S_BASES];
	int rc, err = 0;

	sqlite3_bind_int64(st, 1, (sqlite3_int64)recno);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		int l = sqlite3_column_bytes(st, slot);

		if (sqlite3_column_type(st, slot) == SQLITE_NULL) {
			*len = -1;
		} else if (l > VV_BLOB_MAX) {
			err = -EUCLEAN;
		} else {
			if (l)
				memcpy(b, sqlite3_column_blob(st, slot), l);
			*len = l;
		}
	} else {
		err = rc == SQLITE_DONE ? -EUCLEAN : sql_err(rc);
	}
	done(cml, S_BASES);
	return err;
}

static int window_store(struct cml *cml, struct window *w)
{
	struct bases *bases = NULL;
	uint32_t *dirty, nd = 0;
	int err = 0;

	dirty = malloc(((size_t)w->n + 1) * sizeof(*dirty));
	if (!dirty)
		return -ENOMEM;
	for (uint32_t i = 0; i < w->n; i++)
		if (w->nodes[i].dirty && !w->nodes[i].dead)
			dirty[nd++] = i;
	if (nd) {
		bases = malloc(nd * sizeof(*bases));
		if (!bases)
			err = -ENOMEM;
	}
	/* Every base as it was loaded, before any row changes. */
	for (uint32_t k = 0; !err && k < nd; k++) {
		struct cml_onode *o = &w->nodes[dirty[k]];

		for (int s = 0; !err && s < CML_NSLOT; s++) {
			bases[k].len[s] = -1;
			if (lento_fid_is_null(&o->fid[s]))
				continue;
			err = read_base(cml, w->nodes[o->base_node[s]].recno,
					o->base_slot[s], bases[k].b[s],
					&bases[k].len[s]);
		}
	}
	for (uint32_t k = 0; !err && k < nd; k++) {
		struct cml_onode *o = &w->nodes[dirty[k]];
		sqlite3_stmt *st = cml->st[S_UPDATE];

		sqlite3_bind_int64(st, 1, (sqlite3_int64)o->recno);
		sqlite3_bind_int64(st, 2, o->op);
		sqlite3_bind_int64(st, 3, o->flags);
		sqlite3_bind_int64(st, 4, o->time_ns);
		for (int s = 0; s < CML_NSLOT; s++) {
			bind_fid(st, 5 + s, &o->fid[s]);
			if (bases[k].len[s] < 0)
				sqlite3_bind_null(st, 9 + s);
			else
				sqlite3_bind_blob(st, 9 + s, bases[k].b[s],
						  bases[k].len[s],
						  SQLITE_STATIC);
		}
		bind_attr(st, 13, &o->attr);
		bind_name(st, 22, o->name);
		bind_name(st, 23, o->name2);
		err = run(cml, S_UPDATE);
	}
	for (uint32_t i = 0; !err && i < w->n; i++) {
		if (!w->nodes[i].dead)
			continue;
		sqlite3_bind_int64(cml->st[S_DELETE], 1,
				   (sqlite3_int64)w->nodes[i].recno);
		err = run(cml, S_DELETE);
	}
	free(bases);
	free(dirty);
	return err;
}

/* How often one object is named: its fid and a change of that count. */
struct named {
	struct lento_fid fid;
	int64_t delta;
};

static int named_cmp(const void *a, const void *b)
{
	const struct lento_fid *x = &((const struct named *)a)->fid;
	const struct lento_fid *y = &((const struct named *)b)->fid;

	if (x->volume != y->volume)
		return x->volume < y->volume ? -1 : 1;
	if (x->client != y->client)
		return x->client < y->client ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void named_add(struct named *v, size_t *n,
		      const struct lento_fid fids[CML_NSLOT], int64_t delta)
{
	for (int s = 0; s < CML_NSLOT; s++)
		if (!lento_fid_is_null(&fids[s]))
			v[(*n)++] = (struct named){ fids[s], delta };
}

/* Sum @v's changes per object and tell @fn each sum that is not 0. */
static int named_tell(struct named *v, size_t n, cml_count_fn *fn, void *arg)
{
	int err = 0;

	qsort(v, n, sizeof(*v), named_cmp);
	for (size_t i = 0; !err && i < n;) {
		int64_t sum = 0;
		size_t j = i;

		while (j < n && !named_cmp(&v[i], &v[j]))
			sum += v[j++].delta;
		if (sum)
			err = fn(arg, &v[i].fid, sum);
		i = j;
	}
	return err;
}

/*
 * Tell @fn how the rewrite changed the number of slots that name each
 * object: each node dropped or rewritten no longer names what it named as
 * loaded; a rewritten one names what it names now. Summed per object.
 */
static int window_counted(struct window *w, cml_count_fn *fn, void *arg)
{
	struct named *v;
	size_t n = 0;
	int err;

	v = malloc(((size_t)w->n * 2 * CML_NSLOT + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (uint32_t i = 0; i < w->n; i++) {
		const struct cml_onode *o = &w->nodes[i];

		if (!o->dead && !o->dirty)
			continue;
		named_add(v, &n, w->was[i], -1);
		if (!o->dead)
			named_add(v, &n, o->fid, 1);
	}
	err = named_tell(v, n, fn, arg);
	free(v);
	return err;
}

int cml_count_names(const struct lento_rec *recs, size_t n, int64_t sign,
		    cml_count_fn *fn, void *arg)
{
	struct named *v;
	size_t k = 0;
	int err;

	v = malloc((n * CML_NSLOT + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct lento_fid fids[CML_NSLOT] = {
			[CML_DIR] = recs[i].dir, [CML_OBJ] = recs[i].obj,
			[CML_DIR2] = recs[i].dir2,
			[CML_TARGET] = recs[i].target,
		};

		named_add(v, &k, fids, sign);
	}
	err = named_tell(v, k, fn, arg);
	free(v);
	return err;
}

/*
 * The rewrite's change to the volume's figures: a node dropped leaves
 * them, one rewritten counts again with its names and time as they are
 * now. Every node of the window is unshipped.
 */
static void window_figures(struct cml_vol *v, const struct window *w)
{
	for (uint32_t i = 0; i < w->n; i++) {
		const struct cml_onode *o = &w->nodes[i];
		const struct loaded *l = &w->loaded[i];

		if (!o->dead && !o->dirty)
			continue;
		figures_drop(v, l->bytes, false, l->time_ns);
		if (!o->dead)
			figures_add(v, CML_REC_HDR_BYTES + l->fixed +
				    strnlen(o->name, LENTO_NAME_MAX + 1) +
				    strnlen(o->name2, LENTO_NAME_MAX + 1),
				    o->time_ns);
	}
}

int cml_optimise(struct cml *cml, uint32_t volume, struct cml_opt_stats *st,
		 cml_count_fn *counted, void *arg)
{
	struct cml_opt_stats local;
	struct window w = { 0 };
	int err;

	memset(&local, 0, sizeof(local));
	err = begin(cml);
	if (err)
		return err;
	err = window_load(cml, volume, &w);
	if (!err && w.n)
		err = cml_opt_run(w.nodes, w.n, &local);
	if (!err && w.n)
		err = window_store(cml, &w);
	if (!err && w.n && counted)
		err = window_counted(&w, counted, arg);
	err = end(cml, err);
	if (!err)
		window_figures(vol_of(cml, volume, false), &w);
	window_free(&w);
	if (!err && st)
		*st = local;
	return err;
}
