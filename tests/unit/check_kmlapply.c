// SPDX-License-Identifier: MIT
/*
 * presto's journal consumed by lento (lento/kml_read.c, lento/kml_apply.c):
 * segments written by tests/lib/kmlgen.c as presto writes them, read
 * through the io_uring loop and turned into cache rows and CML records;
 * resuming after a restart, recovery blocks, unknown handles.
 */
#include <check.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "blob.h"
#include "cache.h"
#include "cml.h"
#include "kml_apply.h"
#include "kml_read.h"
#include "kmlgen.h"
#include "loop.h"

#define VOL	1
#define T0	1700000000000000000LL

static char dir[64], kdir[128];
static struct cache *c;
static struct kmlgen g;
static const struct kml_fh root_h = { 2, 0 };
static const struct lento_fid root = { VOL, 0, 1 };

static int rm_one(const char *path, const struct stat *sb, int flag,
		  struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static struct cache_obj obj(struct lento_fid f, uint8_t type, uint32_t nlink,
			    uint64_t v)
{
	struct cache_obj o = { .fid = f, .type = type, .nlink = nlink };

	o.attr.valid = LENTO_A_ALL;
	o.attr.mode = type == LENTO_T_DIR ? 0755 : 0644;
	o.vv.n = 1;
	o.vv.v[0] = v;
	o.valid = o.data = true;
	return o;
}

/* A handle presto would name the object by. */
static void handle(const struct lento_fid *f, uint64_t ino)
{
	uint8_t b[8];

	kapply_handle(ino, 1, b);
	ck_assert_int_eq(cache_handle_set(c, f, KAPPLY_HTYPE, b, 8, ino), 0);
}

/*
 * A cache with volume "vol": its root, a file "a" (handle 10/1, version
 * 3) and a directory "d" (handle 11/1, version 4), materialised.
 */
static void setup(void)
{
	struct cache_vol v = { .id = VOL, .name = "vol", .root = root };
	struct lento_fid a = { VOL, 0, 2 }, d = { VOL, 0, 3 };
	struct cache_obj o;
	char err[256] = "", path[160];

	strcpy(dir, "/tmp/check-kmlapply-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_msg(cache_open(dir, &c, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(cml_set_client(cache_cml(c), 9), 0);
	ck_assert_int_eq(cache_vol_put(c, &v), 0);
	o = obj(root, LENTO_T_DIR, 3, 1);
	ck_assert_int_eq(cache_obj_put(c, &o, NULL, 0), 0);
	o = obj(a, LENTO_T_REG, 1, 3);
	ck_assert_int_eq(cache_obj_put(c, &o, NULL, 0), 0);
	o = obj(d, LENTO_T_DIR, 2, 4);
	ck_assert_int_eq(cache_obj_put(c, &o, NULL, 0), 0);
	ck_assert_int_eq(cache_dirent_put(c, &root, "a", &a), 0);
	ck_assert_int_eq(cache_dirent_put(c, &root, "d", &d), 0);
	handle(&a, 10);
	handle(&d, 11);
	snprintf(path, sizeof(path), "%s/vol", dir);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(kdir, sizeof(kdir), "%s/vol/.presto", dir);
	ck_assert_int_eq(kmlgen_open(&g, kdir), 0);
	ck_assert_int_eq(kmlgen_segment(&g, 1), 0);
}

static void teardown(void)
{
	kmlgen_close(&g);
	cache_close(c);
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static struct kml_fh fh(uint64_t ino)
{
	return ino == 2 ? root_h : (struct kml_fh){ ino, 1 };
}

static int64_t recovered(uint16_t op, struct kml_fh d, struct kml_fh o,
			 const char *name, uint32_t mode, const void *data,
			 size_t len);

/* A record of @op: dir, obj (handles by inode number), names. */
static int64_t rec(uint16_t op, uint64_t d, uint64_t o, const char *name,
		   const char *name2)
{
	struct kmlgen_rec r = { .op = op, .uid = 1000, .gid = 1000,
				.time_ns = T0, .name = name, .name2 = name2 };
	int64_t seq;

	if (d)
		r.fh[PRESTO_KML_FH_DIR] = fh(d);
	r.fh[PRESTO_KML_FH_OBJ] = fh(o);
	if (op == PRESTO_KML_RENAME)
		r.fh[PRESTO_KML_FH_NEWDIR] = fh(d);	/* within @d */
	if (op <= PRESTO_KML_SYMLINK) {
		r.attr.valid = PRESTO_KML_A_ALL;
		r.attr.mode = (op == PRESTO_KML_MKDIR ? S_IFDIR | 0755 :
			       op == PRESTO_KML_SYMLINK ? S_IFLNK | 0777 :
			       S_IFREG | 0600);
		r.attr.uid = r.attr.gid = 1000;
		r.attr.nlink = op == PRESTO_KML_MKDIR ? 2 : 1;
		r.attr.mtime_ns = r.attr.ctime_ns = T0;
	}
	if (op == PRESTO_KML_SYMLINK) {
		r.data = "target";
		r.data_len = 6;
	}
	if (op == PRESTO_KML_UNLINK || op == PRESTO_KML_LINK) {
		r.attr.valid = PRESTO_KML_A_NLINK | PRESTO_KML_A_CTIME;
		r.attr.nlink = op == PRESTO_KML_LINK ? 2 : 0;
	}
	seq = kmlgen_append(&g, &r);
	ck_assert_int_gt(seq, 0);
	return seq;
}

static int64_t store(uint64_t o, uint64_t size, uint32_t mode)
{
	struct kmlgen_rec r = { .op = PRESTO_KML_STORE, .time_ns = T0 };

	r.fh[PRESTO_KML_FH_OBJ] = fh(o);
	r.attr.valid = PRESTO_KML_A_SIZE | PRESTO_KML_A_MTIME |
		       PRESTO_KML_A_CTIME | PRESTO_KML_A_MODE;
	r.attr.size = size;
	r.attr.mode = S_IFREG | mode;
	r.attr.mtime_ns = r.attr.ctime_ns = T0 + 5;
	return kmlgen_append(&g, &r);
}

/* The CREATE of a file "f", @o in @d, by 1000:1000 with @mode. */
static struct kmlgen_rec new_file(uint64_t d, uint64_t o, uint32_t mode)
{
	struct kmlgen_rec r = { .op = PRESTO_KML_CREATE, .uid = 1000,
				.gid = 1000, .time_ns = T0, .name = "f" };

	r.fh[PRESTO_KML_FH_DIR] = fh(d);
	r.fh[PRESTO_KML_FH_OBJ] = fh(o);
	r.attr.valid = PRESTO_KML_A_ALL;
	r.attr.mode = S_IFREG | mode;
	r.attr.uid = r.attr.gid = 1000;
	r.attr.nlink = 1;
	return r;
}

/* ---------------------------------------------------- consuming, looped */

struct run {
	struct lo_loop *loop;
	struct kapply ka;
	struct kread *kr;
	uint64_t pos, limit;
	int err;
	int batches;
	bool done;
	uint64_t unmapped, voided;	/* the kapply's, kept */
	char why[256];
};

static void step(void *arg, int res);

/* Each batch's deadline (kapply_batch()'s @until_ms): 0, none. */
static uint64_t batch_until;

/* Batches until the limit, as client_kml.c runs them. */
static void consume(struct run *run)
{
	const char *why;
	int n;

	do {
		n = kapply_batch(&run->ka, run->kr, run->limit, 4,
				 batch_until, "kmlpos:vol", &run->pos, step,
				 run, &why);
		kapply_batch_end(&run->ka);
		run->batches += n > 0;
	} while (n > 0);
	if (n < 0 || !kread_busy(run->kr)) {
		run->err = n;
		run->done = true;
		lo_stop(run->loop);
	}
}

static void step(void *arg, int res)
{
	struct run *run = arg;

	if (res < 0) {
		run->err = res;
		run->done = true;
		lo_stop(run->loop);
		return;
	}
	consume(run);
}

/* Consume from the position stored (a lento that starts) up to @limit. */
static int consume_upto(uint64_t limit, struct run *run)
{
	int64_t pos = 0;

	memset(run, 0, sizeof(*run));
	cache_meta_get(c, "kmlpos:vol", &pos);
	run->pos = (uint64_t)pos;
	run->limit = limit;
	ck_assert_int_eq(lo_loop_new(&run->loop), 0);
	ck_assert_int_eq(kapply_init(&run->ka, c, VOL, &root, &root_h), 0);
	ck_assert_int_eq(kread_new(run->loop, kdir, run->pos + 1, &run->kr), 0);
	consume(run);
	if (!run->done)
		ck_assert_int_eq(lo_run(run->loop), 0);
	kread_free(run->kr);
	lo_loop_free(run->loop);
	run->unmapped = run->ka.unmapped;
	run->voided = run->ka.voided;
	snprintf(run->why, sizeof(run->why), "%s", run->ka.why);
	kapply_free(&run->ka);
	return run->err;
}

/*
 * Consume up to @limit with @run's kapply, kept across calls as the
 * daemon keeps it across its retries: a new reader from the position
 * stored each time.
 */
static int consume_again(uint64_t limit, struct run *run)
{
	int64_t pos = 0;

	cache_meta_get(c, "kmlpos:vol", &pos);
	run->pos = (uint64_t)pos;
	run->limit = limit;
	run->err = 0;
	run->done = false;
	ck_assert_int_eq(lo_loop_new(&run->loop), 0);
	ck_assert_int_eq(kread_new(run->loop, kdir, run->pos + 1, &run->kr), 0);
	consume(run);
	if (!run->done)
		ck_assert_int_eq(lo_run(run->loop), 0);
	kread_free(run->kr);
	lo_loop_free(run->loop);
	return run->err;
}

/* ----------------------------------------------------------- the CML */

#define RECS_MAX 64
static struct lento_rec recs[RECS_MAX];
static char recs_data[RECS_MAX][64];	/* each record's first data bytes */
static uint8_t recs_groups[RECS_MAX][4 * LENTO_GROUPS_MAX];
static int nrecs;

static int grab(void *arg, const struct lento_rec *r, uint64_t body)
{
	(void)arg;
	(void)body;
	ck_assert_int_lt(nrecs, RECS_MAX);
	recs[nrecs] = *r;
	if (r->data_len)
		memcpy(recs_data[nrecs], r->data,
		       r->data_len < 64 ? r->data_len : 64);
	recs[nrecs].data = recs_data[nrecs];
	ck_assert_uint_le(r->ngroups, LENTO_GROUPS_MAX);
	if (r->ngroups)
		memcpy(recs_groups[nrecs], r->groups, 4 * (size_t)r->ngroups);
	recs[nrecs].groups = r->ngroups ? recs_groups[nrecs] : NULL;
	nrecs++;
	return 0;
}

static void list_cml(void)
{
	nrecs = 0;
	ck_assert_int_ge(cml_list(cache_cml(c), VOL, grab, NULL), 0);
}

static struct lento_fid at(const struct lento_fid *d, const char *name)
{
	struct lento_fid f = { 0 };

	ck_assert_int_eq(cache_lookup(c, d, name, &f), 0);
	return f;
}

/* Each cached object's dirty count: the slots of the CML's records naming it. */
static void dirty_counts_right(void)
{
	sqlite3_stmt *st;
	int rows = 0;

	list_cml();
	ck_assert_int_eq(sqlite3_prepare_v2(cache_db(c), "SELECT fid, dirty "
					    "FROM cache", -1, &st, NULL),
			 SQLITE_OK);
	while (sqlite3_step(st) == SQLITE_ROW) {
		struct lento_fid f;
		int64_t want = 0;

		ck_assert_int_eq(fid_decode(sqlite3_column_blob(st, 0),
					    (size_t)sqlite3_column_bytes(st, 0),
					    &f), 0);
		for (int i = 0; i < nrecs; i++) {
			const struct lento_fid *s[4] = { &recs[i].dir,
				&recs[i].obj, &recs[i].dir2, &recs[i].target };

			for (int k = 0; k < 4; k++)
				want += lento_fid_eq(s[k], &f);
		}
		ck_assert_msg(sqlite3_column_int64(st, 1) == want,
			      "object %" PRIu32 ".%" PRIu32 ".%" PRIu64
			      ": dirty %lld, named %lld times", f.volume,
			      f.client, f.seq,
			      (long long)sqlite3_column_int64(st, 1),
			      (long long)want);
		rows++;
	}
	sqlite3_finalize(st);
	ck_assert_int_gt(rows, 1);
}

/* ------------------------------------------------------------- tests */

START_TEST(namespace_and_content)
{
	struct lento_fid a = { VOL, 0, 2 }, d = { VOL, 0, 3 }, n, f;
	struct cache_obj o;
	struct run run;

	rec(PRESTO_KML_MKDIR, 2, 100, "n", NULL);		/* 1 */
	rec(PRESTO_KML_CREATE, 100, 101, "f", NULL);		/* 2 */
	store(101, 42, 0600);					/* 3 */
	rec(PRESTO_KML_RENAME, 100, 101, "f", "g");		/* 4 */
	rec(PRESTO_KML_SYMLINK, 11, 102, "s", NULL);		/* 5 */
	rec(PRESTO_KML_LINK, 11, 10, "a2", NULL);		/* 6 */
	rec(PRESTO_KML_UNLINK, 2, 10, "a", NULL);		/* 7 */
	ck_assert_int_eq(consume_upto(7, &run), 0);
	ck_assert_uint_eq(run.pos, 7);
	ck_assert_int_ge(run.batches, 2);	/* 4 a batch */
	ck_assert_msg(run.unmapped == 0, "%s", run.why);
	dirty_counts_right();
	list_cml();
	ck_assert_int_eq(nrecs, 7);
	n = at(&root, "n");
	ck_assert_int_eq(recs[0].op, LENTO_OP_MKDIR);
	ck_assert(lento_fid_eq(&recs[0].dir, &root));
	ck_assert_uint_eq(recs[0].base_dir.v[0], 1);	/* the root's vv */
	ck_assert_uint_eq(recs[0].obj.client, 9);	/* minted here */
	ck_assert_uint_eq(recs[0].base_obj.n, 0);	/* new: null */
	ck_assert_int_eq(recs[1].op, LENTO_OP_CREATE);
	ck_assert(lento_fid_eq(&recs[1].dir, &n));
	f = recs[1].obj;
	ck_assert_int_eq(recs[2].op, LENTO_OP_STORE);
	ck_assert(lento_fid_eq(&recs[2].obj, &f));
	ck_assert_uint_eq(recs[2].attr.size, 42);
	ck_assert_int_eq(recs[3].op, LENTO_OP_RENAME);
	ck_assert_str_eq(recs[3].name2, "g");
	n = at(&n, "g");
	ck_assert(lento_fid_eq(&n, &f));
	n = recs[0].obj;
	ck_assert_int_eq(cache_lookup(c, &n, "f", &d), -ENOENT);
	d = (struct lento_fid){ VOL, 0, 3 };
	ck_assert_int_eq(recs[4].op, LENTO_OP_SYMLINK);
	ck_assert(lento_fid_eq(&recs[4].dir, &d));
	ck_assert_uint_eq(recs[4].base_dir.v[0], 4);
	ck_assert_int_eq(recs[5].op, LENTO_OP_LINK);
	f = at(&d, "a2");
	ck_assert(lento_fid_eq(&f, &a));
	ck_assert_uint_eq(recs[5].base_obj.v[0], 3);
	ck_assert_int_eq(recs[6].op, LENTO_OP_UNLINK);
	/* The KML said no name was left: the optimiser may use that. */
	ck_assert_uint_eq(recs[6].flags, LENTO_R_LASTLINK);
	ck_assert_int_eq(cache_obj_get(c, &a, &o, NULL, 0), 0);
	ck_assert_uint_eq(o.nlink, 0);
	ck_assert(o.dirty);
	/* The root has one directory more. */
	ck_assert_int_eq(cache_obj_get(c, &root, &o, NULL, 0), 0);
	ck_assert_uint_eq(o.nlink, 4);
	/* The store made the file's content the cache's. */
	f = recs[1].obj;
	ck_assert_int_eq(cache_obj_get(c, &f, &o, NULL, 0), 0);
	ck_assert_uint_eq(o.attr.size, 42);
	ck_assert(o.data);
}
END_TEST

/*
 * A CREATE with a STORE folded in (KML.md): the CML gets both, the file's
 * content is the cache's.
 */
START_TEST(create_with_a_store_folded_in)
{
	struct kmlgen_rec r = new_file(2, 101, 0640);
	struct cache_obj o;
	struct lento_fid f;
	struct run run;

	r.flags = PRESTO_KML_F_STORED;
	r.attr.size = 42;
	r.attr.mtime_ns = r.attr.ctime_ns = T0 + 5;
	kmlgen_append(&g, &r);
	ck_assert_int_eq(consume_upto(1, &run), 0);
	ck_assert_msg(run.unmapped == 0, "%s", run.why);
	list_cml();
	ck_assert_int_eq(nrecs, 2);
	ck_assert_int_eq(recs[0].op, LENTO_OP_CREATE);
	ck_assert_uint_eq(recs[0].attr.mode, 0640);
	f = recs[0].obj;
	ck_assert_uint_eq(f.client, 9);	/* minted here */
	ck_assert_int_eq(recs[1].op, LENTO_OP_STORE);
	ck_assert(lento_fid_eq(&recs[1].obj, &f));
	ck_assert_uint_eq(recs[1].attr.size, 42);
	ck_assert_int_eq(cache_obj_get(c, &f, &o, NULL, 0), 0);
	ck_assert_uint_eq(o.attr.size, 42);
	ck_assert(o.data);
	dirty_counts_right();
}
END_TEST

/* A record of @op about @o alone (SETATTR, SETXATTR, REMOVEXATTR). */
static int64_t about(uint16_t op, uint64_t o, uint32_t valid, uint32_t mode,
		     const char *name, const char *value)
{
	struct kmlgen_rec r = { .op = op, .uid = 7, .gid = 8, .time_ns = T0,
				.name = name, .data = value,
				.data_len = value ? strlen(value) : 0 };

	r.fh[PRESTO_KML_FH_OBJ] = fh(o);
	r.attr.valid = valid | PRESTO_KML_A_CTIME;
	r.attr.mode = S_IFREG | mode;
	r.attr.uid = 1234;
	r.attr.size = 5;
	r.attr.mtime_ns = T0 + 9;
	r.attr.ctime_ns = T0 + 10;
	return kmlgen_append(&g, &r);
}

START_TEST(attributes_xattrs_renames)
{
	struct lento_fid a = { VOL, 0, 2 }, d = { VOL, 0, 3 }, t;
	struct cache_obj o;
	struct run run;

	about(PRESTO_KML_SETATTR, 10, PRESTO_KML_A_MODE | PRESTO_KML_A_UID |
	      PRESTO_KML_A_SIZE | PRESTO_KML_A_MTIME, 0600, NULL, NULL);
	about(PRESTO_KML_SETXATTR, 10, PRESTO_KML_A_MODE, 0600, "user.k",
	      "v1");
	about(PRESTO_KML_REMOVEXATTR, 10, PRESTO_KML_A_MODE, 0600, "user.k",
	      NULL);
	/* A write that dropped set-id bits: a SETATTR before the STORE. */
	store(10, 77, 0400);
	rec(PRESTO_KML_CREATE, 11, 700, "t", NULL);
	{
		/* "a" renamed over d/t: t loses its last name. */
		struct kmlgen_rec r = { .op = PRESTO_KML_RENAME,
					.time_ns = T0, .name = "a",
					.name2 = "t" };

		r.fh[PRESTO_KML_FH_DIR] = root_h;
		r.fh[PRESTO_KML_FH_OBJ] = fh(10);
		r.fh[PRESTO_KML_FH_NEWDIR] = fh(11);
		r.fh[PRESTO_KML_FH_TARGET] = fh(700);
		ck_assert_int_gt(kmlgen_append(&g, &r), 0);
	}
	ck_assert_int_eq(consume_upto(g.next_seq - 1, &run), 0);
	list_cml();
	ck_assert_int_eq(nrecs, 7);
	ck_assert_int_eq(recs[0].op, LENTO_OP_SETATTR);
	ck_assert_uint_eq(recs[0].attr.valid, LENTO_A_MODE | LENTO_A_UID |
			  LENTO_A_SIZE | LENTO_A_MTIME | LENTO_A_CTIME);
	ck_assert_uint_eq(recs[0].attr.mode, 0600);
	ck_assert_uint_eq(recs[0].attr.uid, 1234);
	ck_assert_uint_eq(recs[0].uid, 7);		/* who made it */
	ck_assert_uint_eq(recs[0].base_obj.v[0], 3);
	ck_assert_int_eq(recs[1].op, LENTO_OP_SETXATTR);
	ck_assert_str_eq(recs[1].name, "user.k");
	ck_assert_uint_eq(recs[1].data_len, 2);
	ck_assert_int_eq(recs[2].op, LENTO_OP_REMOVEXATTR);
	ck_assert_int_eq(recs[3].op, LENTO_OP_SETATTR);
	ck_assert_uint_eq(recs[3].attr.mode, 0400);
	ck_assert_int_eq(recs[4].op, LENTO_OP_STORE);
	ck_assert_uint_eq(recs[4].attr.size, 77);
	ck_assert_int_eq(recs[5].op, LENTO_OP_CREATE);
	t = recs[5].obj;
	ck_assert_int_eq(recs[6].op, LENTO_OP_RENAME);
	ck_assert(lento_fid_eq(&recs[6].target, &t));
	ck_assert_uint_eq(recs[6].flags, LENTO_R_LASTLINK);
	ck_assert(lento_fid_eq(&recs[6].dir2, &d));
	ck_assert_int_eq(cache_obj_get(c, &t, &o, NULL, 0), 0);
	ck_assert_uint_eq(o.nlink, 0);
	ck_assert_int_eq(cache_obj_get(c, &a, &o, NULL, 0), 0);
	ck_assert_uint_eq(o.attr.mode, 0400);
	ck_assert_uint_eq(o.attr.size, 77);
	t = at(&d, "t");
	ck_assert(lento_fid_eq(&t, &a));
}
END_TEST

/* Are @r's groups @want (host order), @n of them? */
static bool groups_are(const struct lento_rec *r, const uint32_t *want,
		       uint16_t n)
{
	if (r->ngroups != n || (n && !r->groups))
		return false;
	for (uint16_t i = 0; i < n; i++) {
		uint32_t le;

		memcpy(&le, r->groups + 4 * i, 4);
		if (le32toh(le) != want[i])
			return false;
	}
	return true;
}

/*
 * A journal record's groups go into every CML record made of it, as the
 * log stores them; one cut short at the most a record holds keeps those.
 */
START_TEST(groups_into_the_cml)
{
	static const uint32_t three[] = { 5, 1000, 4000000000U };
	static const uint32_t two[] = { 27, 100 };
	static uint32_t most[PRESTO_KML_GROUPS_MAX];
	struct kmlgen_rec r;
	struct run run;

	for (uint32_t i = 0; i < PRESTO_KML_GROUPS_MAX; i++)
		most[i] = 2000 + 3 * i;
	r = new_file(11, 100, 0660);
	r.groups = three;
	r.ngroups = 3;
	ck_assert_int_gt(kmlgen_append(&g, &r), 0);
	/* A write that dropped set-id bits: SETATTR and STORE, one maker. */
	r = (struct kmlgen_rec){ .op = PRESTO_KML_STORE, .uid = 1001,
				 .gid = 1001, .time_ns = T0, .groups = two,
				 .ngroups = 2 };
	r.fh[PRESTO_KML_FH_OBJ] = fh(10);
	r.attr.valid = PRESTO_KML_A_SIZE | PRESTO_KML_A_MTIME |
		       PRESTO_KML_A_CTIME | PRESTO_KML_A_MODE;
	r.attr.size = 9;
	r.attr.mode = S_IFREG | 0600;
	ck_assert_int_gt(kmlgen_append(&g, &r), 0);
	/* More groups than a record holds: the first 256. */
	r = (struct kmlgen_rec){ .op = PRESTO_KML_SETXATTR, .uid = 1002,
				 .gid = 1002, .time_ns = T0, .name = "user.g",
				 .data = "v", .data_len = 1, .groups = most,
				 .ngroups = PRESTO_KML_GROUPS_MAX,
				 .flags = PRESTO_KML_F_GROUPS_CUT };
	r.fh[PRESTO_KML_FH_OBJ] = fh(10);
	ck_assert_int_gt(kmlgen_append(&g, &r), 0);
	/* None. */
	rec(PRESTO_KML_UNLINK, 11, 100, "f", NULL);
	ck_assert_int_eq(consume_upto(g.next_seq - 1, &run), 0);
	ck_assert_msg(run.unmapped == 0, "%s", run.why);

	list_cml();
	ck_assert_int_eq(nrecs, 5);
	ck_assert_int_eq(recs[0].op, LENTO_OP_CREATE);
	ck_assert(groups_are(&recs[0], three, 3));
	ck_assert_int_eq(recs[1].op, LENTO_OP_SETATTR);
	ck_assert_uint_eq(recs[1].uid, 1001);
	ck_assert(groups_are(&recs[1], two, 2));
	ck_assert_int_eq(recs[2].op, LENTO_OP_STORE);
	ck_assert(groups_are(&recs[2], two, 2));
	ck_assert_int_eq(recs[3].op, LENTO_OP_SETXATTR);
	ck_assert(groups_are(&recs[3], most, PRESTO_KML_GROUPS_MAX));
	ck_assert_int_eq(recs[4].op, LENTO_OP_UNLINK);
	ck_assert_uint_eq(recs[4].ngroups, 0);
	ck_assert_ptr_null(recs[4].groups);
}
END_TEST

START_TEST(only_up_to_durable_and_resume)
{
	struct run run;

	for (int i = 0; i < 10; i++) {
		char name[8];

		snprintf(name, sizeof(name), "f%d", i);
		rec(PRESTO_KML_CREATE, 2, 200 + i, name, NULL);
		if (i == 5)
			ck_assert_int_eq(kmlgen_segment(&g, 2), 0);
	}
	ck_assert_int_eq(consume_upto(3, &run), 0);
	ck_assert_uint_eq(run.pos, 3);
	list_cml();
	ck_assert_int_eq(nrecs, 3);
	/* A lento that restarts goes on after 3: nothing twice. */
	ck_assert_int_eq(consume_upto(8, &run), 0);
	ck_assert_uint_eq(run.pos, 8);
	list_cml();
	ck_assert_int_eq(nrecs, 8);
	ck_assert_str_eq(recs[7].name, "f7");	/* across segments */
	ck_assert_int_eq(consume_upto(10, &run), 0);
	list_cml();
	ck_assert_int_eq(nrecs, 10);
	ck_assert_int_eq(consume_upto(10, &run), 0);
	list_cml();
	ck_assert_int_eq(nrecs, 10);
}
END_TEST

START_TEST(a_durable_record_missing)
{
	struct run run;

	rec(PRESTO_KML_CREATE, 2, 300, "x", NULL);
	/* presto says 2 are durable; the log has 1 and no next segment. */
	ck_assert_int_eq(consume_upto(2, &run), -ENODATA);
	list_cml();
	ck_assert_int_eq(nrecs, 1);	/* what was there stays consumed */
	rec(PRESTO_KML_CREATE, 2, 301, "y", NULL);
	ck_assert_int_eq(consume_upto(2, &run), 0);
	list_cml();
	ck_assert_int_eq(nrecs, 2);
}
END_TEST

START_TEST(unknown_handles)
{
	struct lento_fid a = { VOL, 0, 2 };
	struct run run;

	/* A SETATTR of an object nobody told lento of: reported. */
	struct kmlgen_rec r = { .op = PRESTO_KML_SETATTR, .time_ns = T0 };

	r.fh[PRESTO_KML_FH_OBJ] = fh(999);
	r.attr.valid = PRESTO_KML_A_MODE | PRESTO_KML_A_CTIME;
	r.attr.mode = S_IFREG | 0600;
	ck_assert_int_gt(kmlgen_append(&g, &r), 0);
	/* An UNLINK of "a" under a handle lento did not record: by name. */
	rec(PRESTO_KML_UNLINK, 2, 555, "a", NULL);
	ck_assert_int_eq(consume_upto(2, &run), 0);
	ck_assert_uint_eq(run.pos, 2);		/* not stuck on it */
	ck_assert_uint_eq(run.unmapped, 1);
	ck_assert_ptr_nonnull(strstr(run.why, "999"));
	list_cml();
	ck_assert_int_eq(nrecs, 1);
	ck_assert_int_eq(recs[0].op, LENTO_OP_UNLINK);
	ck_assert(lento_fid_eq(&recs[0].obj, &a));
}
END_TEST

/* The handle of a real file in the cache, as presto names it. */
static struct kml_fh real_handle(const char *rel)
{
	struct {
		struct file_handle fh;
		unsigned char b[MAX_HANDLE_SZ];
	} h;
	char path[256];
	uint32_t ino, gen;
	int mnt;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	h.fh.handle_bytes = MAX_HANDLE_SZ;
	ck_assert_int_eq(name_to_handle_at(AT_FDCWD, path, &h.fh, &mnt, 0), 0);
	memcpy(&ino, h.fh.f_handle, 4);
	memcpy(&gen, h.fh.f_handle + 4, 4);
	return (struct kml_fh){ ino, gen };
}

static int64_t recovered(uint16_t op, struct kml_fh d, struct kml_fh o,
			 const char *name, uint32_t mode, const void *data,
			 size_t len)
{
	struct kmlgen_rec r = { .op = op, .flags = PRESTO_KML_F_RECOVERED,
				.time_ns = T0, .name = name, .data = data,
				.data_len = len };

	if (op == PRESTO_KML_DIRENT)
		r.fh[PRESTO_KML_FH_DIR] = d;
	r.fh[PRESTO_KML_FH_OBJ] = o;
	if (op == PRESTO_KML_DIRENT) {
		r.attr.valid = PRESTO_KML_A_MODE | PRESTO_KML_A_RDEV;
		r.attr.mode = mode;
	} else if (op == PRESTO_KML_RESYNC) {
		r.attr.valid = PRESTO_KML_A_ALL;
		r.attr.mode = mode;
		r.attr.nlink = 1;
	}
	return kmlgen_append(&g, &r);
}

/* A RESYNC of the file at @path as it is: what recovery writes. */
static void resync_as_is(const char *path, struct kml_fh h)
{
	struct kmlgen_rec r = { .op = PRESTO_KML_RESYNC,
				.flags = PRESTO_KML_F_RECOVERED,
				.time_ns = T0 };
	struct stat sb;

	ck_assert_int_eq(stat(path, &sb), 0);
	r.fh[PRESTO_KML_FH_OBJ] = h;
	r.attr.valid = PRESTO_KML_A_ALL;
	r.attr.mode = sb.st_mode;
	r.attr.uid = sb.st_uid;
	r.attr.gid = sb.st_gid;
	r.attr.size = (uint64_t)sb.st_size;
	r.attr.nlink = (uint32_t)sb.st_nlink;
	r.attr.atime_ns = sb.st_atim.tv_sec * 1000000000LL + sb.st_atim.tv_nsec;
	r.attr.mtime_ns = sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
	r.attr.ctime_ns = sb.st_ctim.tv_sec * 1000000000LL + sb.st_ctim.tv_nsec;
	ck_assert_int_gt(kmlgen_append(&g, &r), 0);
}

/*
 * "a" (fid { VOL, 0, 2 }) materialised in the lower at @path (its full
 * path, made here) and recorded by its real handle, which is returned.
 */
/*
 * lento's mark for @f on the file at @path, as it installs files in a
 * fileset: false where trusted xattrs cannot be set (nothing to test).
 */
static bool set_mark(const char *path, struct lento_fid f)
{
	uint8_t b[FID_BLOB];

	fid_encode(b, &f);
	return !setxattr(path, "trusted.presto.fid", b, sizeof(b), 0);
}

/*
 * The root restated after a crash as "d" and "a" (handle @ah), consumed,
 * and the CML listed (recs, nrecs).
 */
static void restate_d_a(struct kml_fh ah)
{
	uint64_t two = 2;
	struct run run;

	recovered(PRESTO_KML_RESYNC_DIR, root_h, root_h, NULL, 0, &two, 8);
	recovered(PRESTO_KML_DIRENT, root_h, fh(11), "d", S_IFDIR | 0755,
		  NULL, 0);
	recovered(PRESTO_KML_DIRENT, root_h, ah, "a", S_IFREG | 0644, NULL, 0);
	ck_assert_int_eq(consume_upto(g.next_seq - 1, &run), 0);
	list_cml();
}

static struct kml_fh materialise_a(char *path, size_t size)
{
	const struct lento_fid a = { VOL, 0, 2 };
	struct kml_fh ah;
	uint8_t b[8];
	int fd;

	snprintf(path, size, "%s/vol/a", dir);
	fd = open(path, O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ah = real_handle("vol/a");
	kapply_handle(ah.ino, ah.gen, b);
	ck_assert_int_eq(cache_handle_set(c, &a, KAPPLY_HTYPE, b, 8, ah.ino),
			 0);
	return ah;
}

START_TEST(recovery_block)
{
	struct lento_fid a = { VOL, 0, 2 }, d = { VOL, 0, 3 }, nf;
	struct kml_fh nh;
	uint64_t n3 = 3;
	char path[256];
	struct run run;
	int fd;

	/* In the lower: "a" is gone, "d" stayed, "new" appeared. */
	snprintf(path, sizeof(path), "%s/vol/new", dir);
	fd = open(path, O_CREAT | O_WRONLY, 0640);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "hello", 5), 5);
	close(fd);
	nh = real_handle("vol/new");
	/* The root restated: its mode changed, its xattrs, its listing. */
	recovered(PRESTO_KML_RESYNC, root_h, root_h, NULL, S_IFDIR | 0700,
		  "user.keep\0user.keep\0", 20);
	recovered(PRESTO_KML_RESYNC_DIR, root_h, root_h, NULL, 0, &n3, 8);
	/* Cut short first: void, then written again whole. */
	recovered(PRESTO_KML_DIRENT, root_h, fh(11), "d", S_IFDIR | 0755,
		  NULL, 0);
	n3 = 2;
	recovered(PRESTO_KML_RESYNC_DIR, root_h, root_h, NULL, 0, &n3, 8);
	recovered(PRESTO_KML_DIRENT, root_h, fh(11), "d", S_IFDIR | 0755,
		  NULL, 0);
	recovered(PRESTO_KML_DIRENT, root_h, nh, "new", S_IFREG | 0640,
		  NULL, 0);
	resync_as_is(path, nh);
	{
		struct kmlgen_rec r = { .op = PRESTO_KML_STORE,
					.flags = PRESTO_KML_F_RECOVERED,
					.time_ns = T0 };

		r.fh[PRESTO_KML_FH_OBJ] = nh;
		r.attr.valid = PRESTO_KML_A_SIZE | PRESTO_KML_A_MODE;
		r.attr.size = 5;
		r.attr.mode = S_IFREG | 0640;
		ck_assert_int_gt(kmlgen_append(&g, &r), 0);
	}
	ck_assert_int_eq(consume_upto(g.next_seq - 1, &run), 0);
	ck_assert_uint_eq(run.voided, 1);
	list_cml();
	/*
	 * SETATTR root, PRUNEXATTRS root (its one xattr, once), UNLINK a,
	 * CREATE new, (its RESYNC: no attribute changed) PRUNEXATTRS new
	 * (none), STORE.
	 */
	ck_assert_int_eq(nrecs, 6);
	ck_assert_int_eq(recs[0].op, LENTO_OP_SETATTR);
	ck_assert(lento_fid_eq(&recs[0].obj, &root));
	ck_assert_uint_eq(recs[0].attr.mode, 0700);
	ck_assert_int_eq(recs[1].op, LENTO_OP_PRUNEXATTRS);
	ck_assert(lento_fid_eq(&recs[1].obj, &root));
	ck_assert_uint_eq(recs[1].data_len, 10);
	ck_assert_mem_eq(recs[1].data, "user.keep", 10);
	ck_assert_int_eq(recs[2].op, LENTO_OP_UNLINK);
	ck_assert(lento_fid_eq(&recs[2].obj, &a));
	ck_assert_uint_eq(recs[2].flags, LENTO_R_LASTLINK);
	ck_assert_int_eq(recs[3].op, LENTO_OP_CREATE);
	ck_assert_str_eq(recs[3].name, "new");
	ck_assert_uint_eq(recs[3].attr.mode, 0640);
	nf = at(&root, "new");
	ck_assert(lento_fid_eq(&recs[3].obj, &nf));
	ck_assert_int_eq(recs[4].op, LENTO_OP_PRUNEXATTRS);
	ck_assert(lento_fid_eq(&recs[4].obj, &nf));
	ck_assert_uint_eq(recs[4].data_len, 0);
	ck_assert_int_eq(recs[5].op, LENTO_OP_STORE);
	ck_assert(lento_fid_eq(&recs[5].obj, &nf));
	nf = at(&root, "d");
	ck_assert(lento_fid_eq(&nf, &d));
	ck_assert_int_eq(cache_lookup(c, &root, "a", &nf), -ENOENT);
}
END_TEST

/*
 * A crash kept a listing step's inode from being recorded: lento's mark
 * (trusted.presto.fid) is on it. The restated listing does not make it
 * a user's new object; the user's new file beside it is one.
 */
START_TEST(recovery_leftover_is_not_new)
{
	struct kml_fh nh, lh;
	uint64_t n3 = 3;
	char path[256], left[256];
	struct run run;
	int fd;

	snprintf(path, sizeof(path), "%s/vol/new", dir);
	snprintf(left, sizeof(left), "%s/vol/left", dir);
	fd = open(path, O_CREAT | O_WRONLY, 0640);
	ck_assert_int_ge(fd, 0);
	close(fd);
	fd = open(left, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	if (!set_mark(left, (struct lento_fid){ VOL, 9, 77 }))
		return;		/* no trusted xattrs here: nothing to test */
	nh = real_handle("vol/new");
	lh = real_handle("vol/left");
	recovered(PRESTO_KML_RESYNC_DIR, root_h, root_h, NULL, 0, &n3, 8);
	recovered(PRESTO_KML_DIRENT, root_h, fh(11), "d", S_IFDIR | 0755,
		  NULL, 0);
	recovered(PRESTO_KML_DIRENT, root_h, lh, "left", S_IFREG | 0600,
		  NULL, 0);
	recovered(PRESTO_KML_DIRENT, root_h, nh, "new", S_IFREG | 0640,
		  NULL, 0);
	ck_assert_int_eq(consume_upto(g.next_seq - 1, &run), 0);
	list_cml();
	for (int i = 0; i < nrecs; i++)
		ck_assert_msg(strcmp(recs[i].name, "left"),
			      "a record of the leftover: op %d", recs[i].op);
	ck_assert_int_eq(nrecs, 2);	/* UNLINK a, CREATE new */
	ck_assert_int_eq(recs[1].op, LENTO_OP_CREATE);
	ck_assert_str_eq(recs[1].name, "new");
	{
		struct lento_fid f;

		ck_assert_int_eq(cache_lookup(c, &root, "left", &f), -ENOENT);
	}
}
END_TEST

/*
 * A crash kept a fetch's new inode of "a" from being recorded: in the
 * lower, "a" is an inode lento made for a (its mark), no handle known.
 * The restated listing takes it for a's own: nothing logged (no UNLINK
 * of a, no CREATE), and its handle recorded for a.
 */
START_TEST(recovery_own_unrecorded_inode)
{
	struct lento_fid a = { VOL, 0, 2 }, hf;
	struct kml_fh ah, nh;
	char path[256], tmp[256];
	uint8_t b[8];
	int fd;

	ah = materialise_a(path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s/vol/a.new", dir);
	fd = open(tmp, O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
	if (!set_mark(tmp, a))
		return;		/* no trusted xattrs here */
	ck_assert_int_eq(rename(tmp, path), 0);
	nh = real_handle("vol/a");
	ck_assert_uint_ne(nh.ino, ah.ino);
	restate_d_a(nh);
	ck_assert_int_eq(nrecs, 0);
	hf = at(&root, "a");
	ck_assert(lento_fid_eq(&hf, &a));
	kapply_handle(nh.ino, nh.gen, b);
	ck_assert_int_eq(cache_handle_lookup(c, KAPPLY_HTYPE, b, 8, &hf), 0);
	ck_assert(lento_fid_eq(&hf, &a));
}
END_TEST

START_TEST(recovery_moved)
{
	struct lento_fid a = { VOL, 0, 2 }, d = { VOL, 0, 3 };
	struct kml_fh ah;
	uint64_t n = 1;
	char from[256], to[256];
	struct run run;

	/* "a" materialised, recorded by its real handle, moved into d. */
	ah = materialise_a(from, sizeof(from));
	snprintf(to, sizeof(to), "%s/vol/d", dir);
	ck_assert_int_eq(mkdir(to, 0755), 0);
	snprintf(to, sizeof(to), "%s/vol/d/b", dir);
	ck_assert_int_eq(rename(from, to), 0);
	/* The root's listing (first) lacks "a"; d's has "b". */
	recovered(PRESTO_KML_RESYNC_DIR, root_h, root_h, NULL, 0, &n, 8);
	recovered(PRESTO_KML_DIRENT, root_h, fh(11), "d", S_IFDIR | 0755,
		  NULL, 0);
	recovered(PRESTO_KML_RESYNC_DIR, fh(11), fh(11), NULL, 0, &n, 8);
	recovered(PRESTO_KML_DIRENT, fh(11), ah, "b", S_IFREG | 0644, NULL, 0);
	ck_assert_int_eq(consume_upto(g.next_seq - 1, &run), 0);
	list_cml();
	ck_assert_int_eq(nrecs, 1);
	ck_assert_int_eq(recs[0].op, LENTO_OP_RENAME);
	ck_assert(lento_fid_eq(&recs[0].obj, &a));
	ck_assert(lento_fid_eq(&recs[0].dir2, &d));
	ck_assert_str_eq(recs[0].name2, "b");
	d = at(&d, "b");
	ck_assert(lento_fid_eq(&d, &a));
}
END_TEST

/*
 * The crash kept "a" moved into a directory made after the last record it
 * kept: the root's listing (first) lacks "a" and has the new "n", n's
 * listing (later) has "b". That is a MKDIR and a RENAME, never an UNLINK
 * of a's last name (the server would drop the object) and a LINK.
 */
START_TEST(recovery_moved_into_new_dir)
{
	struct lento_fid a = { VOL, 0, 2 }, d = { VOL, 0, 3 }, n;
	struct kml_fh ah, nh;
	uint64_t two = 2, one = 1;
	char from[256], to[256];
	struct run run;

	ah = materialise_a(from, sizeof(from));
	snprintf(to, sizeof(to), "%s/vol/n", dir);
	ck_assert_int_eq(mkdir(to, 0755), 0);
	nh = real_handle("vol/n");
	snprintf(to, sizeof(to), "%s/vol/n/b", dir);
	ck_assert_int_eq(rename(from, to), 0);
	recovered(PRESTO_KML_RESYNC_DIR, root_h, root_h, NULL, 0, &two, 8);
	recovered(PRESTO_KML_DIRENT, root_h, fh(11), "d", S_IFDIR | 0755,
		  NULL, 0);
	recovered(PRESTO_KML_DIRENT, root_h, nh, "n", S_IFDIR | 0755, NULL, 0);
	recovered(PRESTO_KML_RESYNC_DIR, nh, nh, NULL, 0, &one, 8);
	recovered(PRESTO_KML_DIRENT, nh, ah, "b", S_IFREG | 0644, NULL, 0);
	ck_assert_int_eq(consume_upto(g.next_seq - 1, &run), 0);
	list_cml();
	ck_assert_int_eq(nrecs, 2);
	ck_assert_int_eq(recs[0].op, LENTO_OP_MKDIR);
	ck_assert_str_eq(recs[0].name, "n");
	n = at(&root, "n");
	ck_assert(lento_fid_eq(&recs[0].obj, &n));
	ck_assert_int_eq(recs[1].op, LENTO_OP_RENAME);
	ck_assert(lento_fid_eq(&recs[1].obj, &a));
	ck_assert(lento_fid_eq(&recs[1].dir2, &n));
	ck_assert_str_eq(recs[1].name, "a");
	ck_assert_str_eq(recs[1].name2, "b");
	d = at(&n, "b");
	ck_assert(lento_fid_eq(&d, &a));
	ck_assert_int_eq(cache_lookup(c, &root, "a", &d), -ENOENT);
}
END_TEST

/*
 * The log kept the UNLINK of a's last name and the crash lost it: the
 * lower still has "a", and recovery lists it. lento shipped the UNLINK
 * (or will), so the server drops the object: "a" is a new object now, a
 * CREATE with a fid of its own, never a LINK to the one that is gone.
 */
START_TEST(recovery_removal_lost)
{
	struct lento_fid a = { VOL, 0, 2 }, nf;
	struct kmlgen_rec r = { .op = PRESTO_KML_UNLINK, .time_ns = T0,
				.name = "a" };
	struct kml_fh ah;
	char path[256];

	ah = materialise_a(path, sizeof(path));
	/*
	 * Second round: a placed it, with its mark (as for every file
	 * lento installs in a fileset); the removal a crash lost makes it
	 * new all the same.
	 */
	if (_i && !set_mark(path, a))
		return;		/* no trusted xattrs here */
	r.fh[PRESTO_KML_FH_DIR] = root_h;
	r.fh[PRESTO_KML_FH_OBJ] = ah;
	r.attr.valid = PRESTO_KML_A_NLINK | PRESTO_KML_A_CTIME;
	ck_assert_int_gt(kmlgen_append(&g, &r), 0);
	restate_d_a(ah);
	ck_assert_int_eq(nrecs, 2);
	ck_assert_int_eq(recs[0].op, LENTO_OP_UNLINK);
	ck_assert(lento_fid_eq(&recs[0].obj, &a));
	ck_assert_int_eq(recs[1].op, LENTO_OP_CREATE);
	ck_assert_str_eq(recs[1].name, "a");
	ck_assert(!lento_fid_eq(&recs[1].obj, &a));
	nf = at(&root, "a");
	ck_assert(lento_fid_eq(&recs[1].obj, &nf));
	/* The handle names the new object from now on. */
	{
		struct lento_fid hf;
		uint8_t b[8];

		kapply_handle(ah.ino, ah.gen, b);
		ck_assert_int_eq(cache_handle_lookup(c, KAPPLY_HTYPE, b, 8,
						     &hf), 0);
		ck_assert(lento_fid_eq(&hf, &nf));
	}
}
END_TEST

/*
 * A file with two names, p/x and r/y, in the cache's listings. The crash
 * lost two renames: of p (now q in the lower) and of r/y (now s/z). Only
 * s is restated. The name s/z took is r/y, not p/x: p's path in the
 * listings is stale, but its handle finds q, where x still is.
 */
START_TEST(recovery_moved_beside_a_renamed_dir)
{
	struct lento_fid p = { VOL, 0, 20 }, r = { VOL, 0, 21 };
	struct lento_fid s = { VOL, 0, 22 }, f = { VOL, 0, 23 }, got;
	const char *dirs[] = { "vol/q", "vol/r", "vol/s" };
	const struct lento_fid *fids[] = { &p, &r, &s };
	struct kml_fh sh, fh_;
	struct cache_obj o;
	char path[256], to[256];
	uint64_t one = 1;
	struct run run;
	uint8_t b[8];
	int fd;

	for (int i = 0; i < 3; i++) {
		struct kml_fh h;

		snprintf(path, sizeof(path), "%s/%s", dir, dirs[i]);
		ck_assert_int_eq(mkdir(path, 0755), 0);
		o = obj(*fids[i], LENTO_T_DIR, 2, 5);
		ck_assert_int_eq(cache_obj_put(c, &o, NULL, 0), 0);
		ck_assert_int_eq(cache_dirent_put(c, &root, i ? dirs[i] + 4 :
						  "p", fids[i]), 0);
		h = real_handle(dirs[i]);
		kapply_handle(h.ino, h.gen, b);
		ck_assert_int_eq(cache_handle_set(c, fids[i], KAPPLY_HTYPE, b,
						  8, h.ino), 0);
	}
	snprintf(path, sizeof(path), "%s/vol/q/x", dir);
	fd = open(path, O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
	snprintf(to, sizeof(to), "%s/vol/s/z", dir);
	ck_assert_int_eq(link(path, to), 0);
	o = obj(f, LENTO_T_REG, 2, 6);
	ck_assert_int_eq(cache_obj_put(c, &o, NULL, 0), 0);
	ck_assert_int_eq(cache_dirent_put(c, &p, "x", &f), 0);
	ck_assert_int_eq(cache_dirent_put(c, &r, "y", &f), 0);
	fh_ = real_handle("vol/q/x");
	kapply_handle(fh_.ino, fh_.gen, b);
	ck_assert_int_eq(cache_handle_set(c, &f, KAPPLY_HTYPE, b, 8, fh_.ino),
			 0);
	sh = real_handle("vol/s");
	recovered(PRESTO_KML_RESYNC_DIR, sh, sh, NULL, 0, &one, 8);
	recovered(PRESTO_KML_DIRENT, sh, fh_, "z", S_IFREG | 0644, NULL, 0);
	ck_assert_int_eq(consume_upto(g.next_seq - 1, &run), 0);
	list_cml();
	ck_assert_int_eq(nrecs, 1);
	ck_assert_int_eq(recs[0].op, LENTO_OP_RENAME);
	ck_assert(lento_fid_eq(&recs[0].obj, &f));
	ck_assert(lento_fid_eq(&recs[0].dir, &r));
	ck_assert_str_eq(recs[0].name, "y");
	ck_assert(lento_fid_eq(&recs[0].dir2, &s));
	ck_assert_str_eq(recs[0].name2, "z");
	got = at(&p, "x");
	ck_assert(lento_fid_eq(&got, &f));
	ck_assert_int_eq(cache_lookup(c, &r, "y", &got), -ENOENT);
}
END_TEST

/*
 * An object made in the lower at @rel (a directory if @isdir) and in the
 * rows as @f, named @name in @parent and recorded by its real handle,
 * which is returned.
 */
static struct kml_fh real_obj(const struct lento_fid *f, bool isdir,
			      const char *rel, const struct lento_fid *parent,
			      const char *name)
{
	struct cache_obj o = obj(*f, isdir ? LENTO_T_DIR : LENTO_T_REG,
				 isdir ? 2 : 1, 7);
	struct kml_fh h;
	char path[256];
	uint8_t b[8];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	if (isdir) {
		ck_assert_int_eq(mkdir(path, 0755), 0);
	} else {
		fd = open(path, O_CREAT | O_WRONLY, 0644);
		ck_assert_int_ge(fd, 0);
		close(fd);
	}
	ck_assert_int_eq(cache_obj_put(c, &o, NULL, 0), 0);
	ck_assert_int_eq(cache_dirent_put(c, parent, name, f), 0);
	h = real_handle(rel);
	kapply_handle(h.ino, h.gen, b);
	ck_assert_int_eq(cache_handle_set(c, f, KAPPLY_HTYPE, b, 8, h.ino), 0);
	return h;
}

/* The lower's @from renamed to @to (paths under the cache). */
static void lower_mv(const char *from, const char *to)
{
	char a[256], b[256];

	snprintf(a, sizeof(a), "%s/%s", dir, from);
	snprintf(b, sizeof(b), "%s/%s", dir, to);
	ck_assert_int_eq(rename(a, b), 0);
}

/* No record of the CML removes a name for good. */
static void no_lastlink(void)
{
	for (int i = 0; i < nrecs; i++)
		ck_assert_msg(!(recs[i].flags & LENTO_R_LASTLINK) &&
			      recs[i].op != LENTO_OP_RMDIR,
			      "record %d (op %u, %s) removes an object", i,
			      recs[i].op, recs[i].name);
}

/*
 * The crash lost "mv m z; mv a m": a directory (with a file in it) took
 * the name of a file that moved on. The root is listed; "a" comes first.
 * The file moves to z and the directory to m, with its file: never an
 * RMDIR of the live directory and an UNLINK of the last name of what it
 * holds (the server would drop both), as when m's name was taken.
 */
START_TEST(recovery_dir_moved_onto_a_moved_name)
{
	struct lento_fid dm = { VOL, 0, 30 }, x = { VOL, 0, 31 };
	struct lento_fid f = { VOL, 0, 32 }, got;
	struct kml_fh dh, fh_;
	uint64_t three = 3;
	struct run run;

	dh = real_obj(&dm, true, "vol/a", &root, "a");
	real_obj(&x, false, "vol/a/x", &dm, "x");
	fh_ = real_obj(&f, false, "vol/m", &root, "m");
	lower_mv("vol/m", "vol/z");
	lower_mv("vol/a", "vol/m");
	recovered(PRESTO_KML_RESYNC_DIR, root_h, root_h, NULL, 0, &three, 8);
	recovered(PRESTO_KML_DIRENT, root_h, fh(11), "d", S_IFDIR | 0755,
		  NULL, 0);
	recovered(PRESTO_KML_DIRENT, root_h, dh, "m", S_IFDIR | 0755, NULL, 0);
	recovered(PRESTO_KML_DIRENT, root_h, fh_, "z", S_IFREG | 0644,
		  NULL, 0);
	ck_assert_int_eq(consume_upto(g.next_seq - 1, &run), 0);
	list_cml();
	no_lastlink();
	ck_assert_int_eq(nrecs, 2);
	ck_assert_int_eq(recs[0].op, LENTO_OP_RENAME);
	ck_assert(lento_fid_eq(&recs[0].obj, &f));
	ck_assert_str_eq(recs[0].name2, "z");
	ck_assert_int_eq(recs[1].op, LENTO_OP_RENAME);
	ck_assert(lento_fid_eq(&recs[1].obj, &dm));
	ck_assert_str_eq(recs[1].name, "a");
	ck_assert_str_eq(recs[1].name2, "m");
	got = at(&root, "m");
	ck_assert(lento_fid_eq(&got, &dm));
	got = at(&dm, "x");
	ck_assert(lento_fid_eq(&got, &x));
	got = at(&root, "z");
	ck_assert(lento_fid_eq(&got, &f));
	ck_assert_int_eq(cache_lookup(c, &root, "a", &got), -ENOENT);
}
END_TEST

/*
 * The crash lost a swap of two names ("mv p t; mv q p; mv t q", or
 * renameat2's RENAME_EXCHANGE): each name's object lives on under the
 * other. One RENAME_EXCHANGE, never an UNLINK of either.
 */
START_TEST(recovery_swap_lost)
{
	struct lento_fid p = { VOL, 0, 40 }, q = { VOL, 0, 41 }, got;
	struct cache_obj r0, r1;
	struct kml_fh ph, qh;
	uint64_t three = 3;
	struct run run;

	/* The directory under the second name, then (_i) under the first. */
	ck_assert_int_eq(cache_dirent_del(c, &root, "a"), 0);
	ph = real_obj(&p, _i, "vol/p", &root, "p");
	qh = real_obj(&q, !_i, "vol/q", &root, "q");
	ck_assert_int_eq(cache_obj_get(c, &root, &r0, NULL, 0), 0);
	lower_mv("vol/p", "vol/t");
	lower_mv("vol/q", "vol/p");
	lower_mv("vol/t", "vol/q");
	recovered(PRESTO_KML_RESYNC_DIR, root_h, root_h, NULL, 0, &three, 8);
	recovered(PRESTO_KML_DIRENT, root_h, fh(11), "d", S_IFDIR | 0755,
		  NULL, 0);
	recovered(PRESTO_KML_DIRENT, root_h, qh, "p", _i ? S_IFREG | 0644 :
		  S_IFDIR | 0755, NULL, 0);
	recovered(PRESTO_KML_DIRENT, root_h, ph, "q", _i ? S_IFDIR | 0755 :
		  S_IFREG | 0644, NULL, 0);
	ck_assert_int_eq(consume_upto(g.next_seq - 1, &run), 0);
	list_cml();
	no_lastlink();
	ck_assert_int_eq(nrecs, 1);
	ck_assert_int_eq(recs[0].op, LENTO_OP_RENAME);
	ck_assert_uint_eq(recs[0].flags, LENTO_R_EXCHANGE);
	got = at(&root, "p");
	ck_assert(lento_fid_eq(&got, &q));
	got = at(&root, "q");
	ck_assert(lento_fid_eq(&got, &p));
	/* A swap within a directory leaves its link count. */
	ck_assert_int_eq(cache_obj_get(c, &root, &r1, NULL, 0), 0);
	ck_assert_uint_eq(r1.nlink, r0.nlink);
}
END_TEST

/*
 * The crash lost "mv d/f t; rmdir d; mv t d": the root lists the file
 * under the name its gone directory had. No order of records gets the
 * rows there (the directory must be empty to go, and its file cannot
 * take its name first): both are left as they are, said -- never an
 * RMDIR of a directory with a name in it, nor the runaway of renames
 * and removals of before.
 */
START_TEST(recovery_file_takes_its_gone_dirs_name)
{
	struct lento_fid dd = { VOL, 0, 60 }, f = { VOL, 0, 61 }, got;
	struct kml_fh fh_;
	char path[256];
	uint64_t two = 2;
	struct run run;

	real_obj(&dd, true, "vol/x", &root, "x");
	fh_ = real_obj(&f, false, "vol/x/f", &dd, "f");
	lower_mv("vol/x/f", "vol/t");
	snprintf(path, sizeof(path), "%s/vol/x", dir);
	ck_assert_int_eq(rmdir(path), 0);
	lower_mv("vol/t", "vol/x");
	recovered(PRESTO_KML_RESYNC_DIR, root_h, root_h, NULL, 0, &two, 8);
	recovered(PRESTO_KML_DIRENT, root_h, fh(11), "d", S_IFDIR | 0755,
		  NULL, 0);
	recovered(PRESTO_KML_DIRENT, root_h, fh_, "x", S_IFREG | 0644, NULL,
		  0);
	ck_assert_int_eq(cache_dirent_del(c, &root, "a"), 0);
	ck_assert_int_eq(consume_upto(g.next_seq - 1, &run), 0);
	list_cml();
	no_lastlink();
	ck_assert_int_eq(nrecs, 0);
	got = at(&root, "x");
	ck_assert(lento_fid_eq(&got, &dd));
	got = at(&dd, "f");
	ck_assert(lento_fid_eq(&got, &f));
}
END_TEST

/*
 * Three names in a cycle ("a" to "b", "b" to "c", "c" to "a"): left as
 * they are, and said; nothing removed.
 */
START_TEST(recovery_cycle_left)
{
	const struct lento_fid f[3] = { { VOL, 0, 50 }, { VOL, 0, 51 },
					{ VOL, 0, 52 } };
	const char *names[3] = { "a", "b", "c" };
	struct kml_fh h[3];
	uint64_t four = 4;
	struct lento_fid got;
	struct run run;

	/* setup's "a" makes way: the cycle uses the name. */
	ck_assert_int_eq(cache_dirent_del(c, &root, "a"), 0);
	h[0] = real_obj(&f[0], false, "vol/a", &root, "a");
	h[1] = real_obj(&f[1], false, "vol/b", &root, "b");
	h[2] = real_obj(&f[2], false, "vol/c", &root, "c");
	lower_mv("vol/c", "vol/t");
	lower_mv("vol/b", "vol/c");
	lower_mv("vol/a", "vol/b");
	lower_mv("vol/t", "vol/a");
	recovered(PRESTO_KML_RESYNC_DIR, root_h, root_h, NULL, 0, &four, 8);
	recovered(PRESTO_KML_DIRENT, root_h, fh(11), "d", S_IFDIR | 0755,
		  NULL, 0);
	for (int i = 0; i < 3; i++)
		recovered(PRESTO_KML_DIRENT, root_h, h[(i + 2) % 3], names[i],
			  S_IFREG | 0644, NULL, 0);
	ck_assert_int_eq(consume_upto(g.next_seq - 1, &run), 0);
	list_cml();
	no_lastlink();
	ck_assert_int_eq(nrecs, 0);
	for (int i = 0; i < 3; i++) {
		got = at(&root, names[i]);
		ck_assert(lento_fid_eq(&got, &f[i]));
	}
}
END_TEST

/*
 * The crash lost "mv a g; touch a": a restatement of the new "a" comes
 * before the root's listing. The new inode is not taken for the object
 * the rows still have at "a", whose own inode lives on at "g".
 */
START_TEST(recovery_new_file_at_a_moved_name)
{
	struct lento_fid a = { VOL, 0, 2 }, got;
	struct kml_fh ah, nh;
	char path[256];
	uint64_t three = 3;
	struct run run;
	int fd;

	ah = materialise_a(path, sizeof(path));
	lower_mv("vol/a", "vol/g");
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	nh = real_handle("vol/a");
	resync_as_is(path, nh);
	recovered(PRESTO_KML_RESYNC_DIR, root_h, root_h, NULL, 0, &three, 8);
	recovered(PRESTO_KML_DIRENT, root_h, fh(11), "d", S_IFDIR | 0755,
		  NULL, 0);
	recovered(PRESTO_KML_DIRENT, root_h, nh, "a", S_IFREG | 0600, NULL, 0);
	recovered(PRESTO_KML_DIRENT, root_h, ah, "g", S_IFREG | 0644, NULL, 0);
	ck_assert_int_eq(consume_upto(g.next_seq - 1, &run), 0);
	list_cml();
	no_lastlink();
	for (int i = 0; i < nrecs; i++)
		ck_assert_int_ne(recs[i].op, LENTO_OP_LINK);
	got = at(&root, "g");
	ck_assert(lento_fid_eq(&got, &a));
	got = at(&root, "a");
	ck_assert(!lento_fid_eq(&got, &a));
	ck_assert_uint_ge(run.unmapped, 1);
}
END_TEST

/*
 * A live file whose name in the lower cannot be told (a path longer than
 * lento reads): its lost name is left, not removed with LASTLINK.
 */
START_TEST(recovery_live_name_untold)
{
	struct lento_fid a = { VOL, 0, 2 }, got;
	char path[256], seg[201];
	uint64_t one = 1;
	struct run run;
	int fd, next;

	materialise_a(path, sizeof(path));
	memset(seg, 'l', 200);
	seg[200] = 0;
	snprintf(path, sizeof(path), "%s/vol", dir);
	fd = open(path, O_PATH | O_DIRECTORY);
	ck_assert_int_ge(fd, 0);
	/* 30 levels of 201 bytes: a path /proc cannot give. */
	for (int i = 0; i < 30; i++) {
		ck_assert_int_eq(mkdirat(fd, seg, 0755), 0);
		next = openat(fd, seg, O_PATH | O_DIRECTORY);
		ck_assert_int_ge(next, 0);
		close(fd);
		fd = next;
	}
	snprintf(path, sizeof(path), "%s/vol/a", dir);
	ck_assert_int_eq(renameat(AT_FDCWD, path, fd, "a"), 0);
	close(fd);
	recovered(PRESTO_KML_RESYNC_DIR, root_h, root_h, NULL, 0, &one, 8);
	recovered(PRESTO_KML_DIRENT, root_h, fh(11), "d", S_IFDIR | 0755,
		  NULL, 0);
	ck_assert_int_eq(consume_upto(g.next_seq - 1, &run), 0);
	list_cml();
	no_lastlink();
	ck_assert_int_eq(nrecs, 0);
	got = at(&root, "a");
	ck_assert(lento_fid_eq(&got, &a));
}
END_TEST

/*
 * A recovery block listing the root with "a" alone (kept, under a handle
 * no inode has), so that "d" is gone; consumed.
 */
static void root_lists_only_a(struct run *run)
{
	struct lento_fid a = { VOL, 0, 2 };
	uint64_t n = 1;

	handle(&a, 4000000002u);
	recovered(PRESTO_KML_RESYNC_DIR, root_h, root_h, NULL, 0, &n, 8);
	recovered(PRESTO_KML_DIRENT, root_h, fh(4000000002u), "a",
		  S_IFREG | 0644, NULL, 0);
	ck_assert_int_eq(consume_upto(g.next_seq - 1, run), 0);
}

START_TEST(recovery_gone_dir)
{
	struct lento_fid d = { VOL, 0, 3 }, x = { VOL, 0, 5 };
	struct cache_obj o = obj(x, LENTO_T_REG, 1, 6);
	struct run run;

	/* d (cached with an entry x) is gone from the lower. */
	ck_assert_int_eq(cache_obj_put(c, &o, NULL, 0), 0);
	ck_assert_int_eq(cache_dirent_put(c, &d, "x", &x), 0);
	handle(&x, 4000000001u);
	root_lists_only_a(&run);
	list_cml();
	/* Its entry first, or the server would refuse the RMDIR. */
	ck_assert_int_eq(nrecs, 2);
	ck_assert_int_eq(recs[0].op, LENTO_OP_UNLINK);
	ck_assert(lento_fid_eq(&recs[0].obj, &x));
	ck_assert(lento_fid_eq(&recs[0].dir, &d));
	ck_assert_int_eq(recs[1].op, LENTO_OP_RMDIR);
	ck_assert(lento_fid_eq(&recs[1].obj, &d));
	ck_assert_uint_eq(recs[1].base_obj.v[0], 4);
}
END_TEST

/* The CML's RMDIRs: how many, the first's and the last's objects. */
struct rmdirs {
	int n, others;
	struct lento_fid first, last;
};

static int count_rmdir(void *arg, const struct lento_rec *r, uint64_t body)
{
	struct rmdirs *rd = arg;

	(void)body;
	if (r->op != LENTO_OP_RMDIR) {
		rd->others++;
		return 0;
	}
	if (!rd->n++)
		rd->first = r->obj;
	rd->last = r->obj;
	return 0;
}

/*
 * A deep tree gone from the lower: each directory removed after what it
 * held, deepest first, and lento's stack is not what bounds the depth.
 */
START_TEST(recovery_gone_deep)
{
	enum { DEPTH = 1500 };	/* "d/a/a/...": 3002 bytes of path */
	struct lento_fid d = { VOL, 0, 3 }, parent = d, f = { 0 };
	struct rmdirs rd = { 0 };
	struct run run;

	for (int i = 0; i < DEPTH; i++) {
		struct cache_obj o;

		f = (struct lento_fid){ VOL, 0, 100 + (uint64_t)i };
		o = obj(f, LENTO_T_DIR, 2, 6);
		ck_assert_int_eq(cache_obj_put(c, &o, NULL, 0), 0);
		ck_assert_int_eq(cache_dirent_put(c, &parent, "a", &f), 0);
		parent = f;
	}
	root_lists_only_a(&run);
	ck_assert_int_ge(cml_list(cache_cml(c), VOL, count_rmdir, &rd), 0);
	ck_assert_int_eq(rd.n, DEPTH + 1);
	ck_assert_int_eq(rd.others, 0);
	ck_assert(lento_fid_eq(&rd.first, &f));
	ck_assert(lento_fid_eq(&rd.last, &d));
}
END_TEST

/* kread_next through the loop: 1 with a record, 0 none, -errno. */
struct next_wait {
	struct lo_loop *loop;
};

static void next_ready(void *arg, int res)
{
	(void)res;
	lo_stop(((struct next_wait *)arg)->loop);
}

static int next_record(struct lo_loop *loop, struct kread *kr, uint64_t limit,
		       struct kml_record *r)
{
	struct next_wait w = { loop };
	const char *why;
	int rc;

	while (!(rc = kread_next(kr, limit, r, &why, next_ready, &w)) &&
	       kread_busy(kr))
		ck_assert_int_eq(lo_run(loop), 0);
	return rc;
}

START_TEST(segment_grows_while_read)
{
	struct lo_loop *loop;
	struct kread *kr;
	struct kml_record r;

	rec(PRESTO_KML_CREATE, 2, 600, "one", NULL);
	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_int_eq(kread_new(loop, kdir, 1, &kr), 0);
	ck_assert_int_eq(next_record(loop, kr, 1, &r), 1);
	ck_assert_uint_eq(r.seq, 1);
	/* The reader saw the end of the file; presto writes on. */
	rec(PRESTO_KML_CREATE, 2, 601, "two", NULL);
	rec(PRESTO_KML_CREATE, 2, 602, "three", NULL);
	ck_assert_int_eq(next_record(loop, kr, 3, &r), 1);
	ck_assert_uint_eq(r.seq, 2);
	ck_assert_int_eq(next_record(loop, kr, 3, &r), 1);
	ck_assert_uint_eq(r.seq, 3);
	/* Then a new segment begins. */
	ck_assert_int_eq(kmlgen_segment(&g, 2), 0);
	rec(PRESTO_KML_CREATE, 2, 603, "four", NULL);
	ck_assert_int_eq(next_record(loop, kr, 4, &r), 1);
	ck_assert_uint_eq(r.seq, 4);
	ck_assert_uint_eq(kread_segno(kr), 2);
	ck_assert_int_eq(next_record(loop, kr, 4, &r), 0);
	/* Durable says 5, and it is nowhere. */
	ck_assert_int_eq(next_record(loop, kr, 5, &r), -ENODATA);
	kread_free(kr);
	lo_loop_free(loop);
}
END_TEST

static void quarantine_rows(uint64_t *n, uint64_t *seq)
{
	char why[256];

	ck_assert_int_eq(cache_quarantine_count(c, VOL, n, seq, why,
						sizeof(why)), 0);
}

/*
 * A record that can never be translated (a STORE of what the cache
 * knows as a directory) is tried KAPPLY_TRIES times, then set
 * aside: in the quarantine table with its bytes, the position past it,
 * the records after it applied, the objects it names to be fetched
 * again. Before, it failed every batch for ever and the log never moved.
 */
START_TEST(untranslatable_record_set_aside)
{
	struct lento_fid n;
	struct cache_obj o;
	struct run run;
	uint64_t q, qseq;
	sqlite3_stmt *st;
	int i, err;

	rec(PRESTO_KML_CREATE, 11, 300, "x", NULL);		/* 1 */
	store(11, 42, 0600);			/* 2: a STORE of a directory */
	rec(PRESTO_KML_MKDIR, 2, 100, "n", NULL);		/* 3 */
	memset(&run, 0, sizeof(run));
	ck_assert_int_eq(kapply_init(&run.ka, c, VOL, &root, &root_h), 0);
	for (i = 0; i < KAPPLY_TRIES; i++) {
		err = consume_again(3, &run);
		ck_assert_int_lt(err, 0);
		ck_assert(!kapply_transient(err));
		ck_assert_uint_eq(run.pos, 0);
		ck_assert_uint_eq(run.ka.fail.seq, 2);
	}
	quarantine_rows(&q, &qseq);
	ck_assert_uint_eq(q, 0);
	ck_assert_int_eq(consume_again(3, &run), 0);
	ck_assert_uint_eq(run.pos, 3);
	ck_assert_uint_eq(run.ka.quarantined, 1);
	quarantine_rows(&q, &qseq);
	ck_assert_uint_eq(q, 1);
	ck_assert_uint_eq(qseq, 2);
	/* Its bytes, whole: they decode as record 2 again. */
	ck_assert_int_eq(sqlite3_prepare_v2(cache_db(c), "SELECT record, op, "
					    "err FROM kml_quarantine", -1, &st,
					    NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	{
		struct kml_record r;
		const char *why;

		ck_assert_int_eq(kml_decode_record(sqlite3_column_blob(st, 0),
				 (size_t)sqlite3_column_bytes(st, 0), 2, &r,
				 &why), KML_OK);
		ck_assert_uint_eq(r.seq, 2);
		ck_assert_int_eq(sqlite3_column_int(st, 1), PRESTO_KML_STORE);
		ck_assert_int_gt(sqlite3_column_int(st, 2), 0);
	}
	sqlite3_finalize(st);
	/* The records around it went through. */
	n = at(&root, "n");
	(void)n;
	/* The directory it named is to be fetched again (d has x: dirty). */
	{
		struct lento_fid d = { VOL, 0, 3 };

		ck_assert_int_eq(cache_obj_get(c, &d, &o, NULL, 0), 0);
		ck_assert(!o.valid);
		ck_assert_ptr_nonnull(strstr(run.ka.quarantine_why,
					     "KML record 2 (STORE)"));
	}
	kapply_free(&run.ka);
}
END_TEST

/*
 * Two records in a row that never translate: each is set aside in turn.
 * Before, the second's failure rolled back the batch that set the first
 * aside, and the two took turns failing for ever.
 */
START_TEST(two_bad_records_in_a_row)
{
	struct run run;
	uint64_t q, qseq;
	int i, err = 0;

	rec(PRESTO_KML_CREATE, 11, 300, "x", NULL);		/* 1 */
	store(11, 42, 0600);			/* 2: a STORE of a directory */
	store(11, 43, 0600);			/* 3: again */
	rec(PRESTO_KML_MKDIR, 2, 100, "n", NULL);		/* 4 */
	memset(&run, 0, sizeof(run));
	ck_assert_int_eq(kapply_init(&run.ka, c, VOL, &root, &root_h), 0);
	for (i = 0; i < 4 * KAPPLY_TRIES && (err || run.pos < 4); i++)
		err = consume_again(4, &run);
	ck_assert_int_eq(err, 0);
	ck_assert_uint_eq(run.pos, 4);
	quarantine_rows(&q, &qseq);
	ck_assert_uint_eq(q, 2);
	ck_assert_uint_eq(qseq, 3);
	kapply_free(&run.ka);
}
END_TEST

/* A failure of the machine, not the record: retried, never set aside. */
START_TEST(transient_failure_not_set_aside)
{
	struct run run;
	uint64_t q, qseq;
	char faults[192];
	int i;

	rec(PRESTO_KML_MKDIR, 2, 100, "n", NULL);		/* 1 */
	snprintf(faults, sizeof(faults), "%s/faults", dir);
	setenv("LENTO_TEST_FAULTS", faults, 1);
	memset(&run, 0, sizeof(run));
	ck_assert_int_eq(kapply_init(&run.ka, c, VOL, &root, &root_h), 0);
	for (i = 0; i < 2 * KAPPLY_TRIES; i++) {
		FILE *f = fopen(faults, "w");

		ck_assert_ptr_nonnull(f);
		fputs("kapply-record", f);
		fclose(f);
		ck_assert_int_eq(consume_again(1, &run), -ENOMEM);
		ck_assert_uint_eq(run.pos, 0);
	}
	ck_assert_int_eq(consume_again(1, &run), 0);
	ck_assert_uint_eq(run.pos, 1);
	ck_assert_uint_eq(run.ka.quarantined, 0);
	quarantine_rows(&q, &qseq);
	ck_assert_uint_eq(q, 0);
	kapply_free(&run.ka);
}
END_TEST

/*
 * A segment's name that is not a regular file: a FIFO (an open that would
 * wait for a writer forever) or a symlink to a valid segment elsewhere.
 * The reader refuses both at once, and hangs on neither.
 */
START_TEST(segment_not_a_regular_file)
{
	char seg[192], other[192], odir[160];
	struct lo_loop *loop;
	struct kread *kr;
	struct kml_record r;
	struct kmlgen g2;

	snprintf(seg, sizeof(seg), "%s/kml.00000001", kdir);
	ck_assert_int_eq(unlink(seg), 0);
	ck_assert_int_eq(mkfifo(seg, 0600), 0);
	ck_assert_int_eq(lo_loop_new(&loop), 0);
	ck_assert_int_eq(kread_new(loop, kdir, 1, &kr), 0);
	ck_assert_int_eq(next_record(loop, kr, 1, &r), -ENODATA);
	kread_free(kr);
	/* A symlink to a segment that holds record 1. */
	ck_assert_int_eq(unlink(seg), 0);
	snprintf(odir, sizeof(odir), "%s/elsewhere", dir);
	ck_assert_int_eq(kmlgen_open(&g2, odir), 0);
	ck_assert_int_eq(kmlgen_segment(&g2, 1), 0);
	{
		struct kmlgen_rec x = { .op = PRESTO_KML_MKDIR, .time_ns = T0,
					.name = "n" };

		x.fh[PRESTO_KML_FH_DIR] = fh(2);
		x.fh[PRESTO_KML_FH_OBJ] = fh(100);
		x.attr.valid = PRESTO_KML_A_ALL;
		x.attr.mode = S_IFDIR | 0755;
		x.attr.nlink = 2;
		ck_assert_int_gt(kmlgen_append(&g2, &x), 0);
	}
	kmlgen_close(&g2);
	snprintf(other, sizeof(other), "%s/kml.00000001", odir);
	ck_assert_int_eq(symlink(other, seg), 0);
	ck_assert_int_eq(kread_new(loop, kdir, 1, &kr), 0);
	ck_assert_int_eq(next_record(loop, kr, 1, &r), -ENODATA);
	kread_free(kr);
	/* The same segment, a regular file here, reads. */
	ck_assert_int_eq(unlink(seg), 0);
	ck_assert_int_eq(link(other, seg), 0);
	ck_assert_int_eq(kread_new(loop, kdir, 1, &kr), 0);
	ck_assert_int_eq(next_record(loop, kr, 1, &r), 1);
	ck_assert_uint_eq(r.seq, 1);
	kread_free(kr);
	lo_loop_free(loop);
}
END_TEST

/* A batch past its deadline ends after one record, and keeps it. */
START_TEST(batch_ends_at_its_deadline)
{
	struct run run;

	rec(PRESTO_KML_MKDIR, 2, 100, "n", NULL);		/* 1 */
	rec(PRESTO_KML_CREATE, 100, 101, "f", NULL);		/* 2 */
	store(101, 42, 0600);					/* 3 */
	batch_until = 1;		/* long past */
	ck_assert_int_eq(consume_upto(3, &run), 0);
	batch_until = 0;
	ck_assert_uint_eq(run.pos, 3);
	ck_assert_int_eq(run.batches, 3);
	list_cml();
	ck_assert_int_eq(nrecs, 3);
}
END_TEST

START_TEST(listing_across_batches)
{
	uint64_t n = 6;
	struct run run;

	rec(PRESTO_KML_CREATE, 2, 400, "z", NULL);		/* 1 */
	recovered(PRESTO_KML_RESYNC_DIR, fh(11), fh(11), NULL, 0, &n, 8);
	for (int i = 0; i < 3; i++) {			/* 3..5 */
		char name[8];

		snprintf(name, sizeof(name), "e%d", i);
		recovered(PRESTO_KML_DIRENT, fh(11), fh(500 + i), name,
			  S_IFREG | 0644, NULL, 0);
	}
	/* Durable up to the middle of the listing: stops before it. */
	ck_assert_int_eq(consume_upto(5, &run), 0);
	ck_assert_uint_eq(run.pos, 1);
	list_cml();
	ck_assert_int_eq(nrecs, 1);
}
END_TEST

/*
 * A listing of a directory lento cannot name is done with once its last
 * entry comes: the position passes it (it once stayed below it for good,
 * the journal never caught up and the permit never given back).
 */
START_TEST(listing_of_an_unknown_directory_passes)
{
	uint64_t n = 2;
	struct run run;

	rec(PRESTO_KML_CREATE, 2, 400, "z", NULL);		/* 1 */
	recovered(PRESTO_KML_RESYNC_DIR, fh(77), fh(77), NULL, 0, &n, 8);
	recovered(PRESTO_KML_DIRENT, fh(77), fh(600), "a", S_IFREG | 0644,
		  NULL, 0);					/* 3 */
	recovered(PRESTO_KML_DIRENT, fh(77), fh(601), "b", S_IFREG | 0644,
		  NULL, 0);					/* 4 */
	ck_assert_int_eq(consume_upto(4, &run), 0);
	ck_assert_uint_eq(run.pos, 4);
	ck_assert_uint_ge(run.unmapped, 1);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("kmlapply");
	TCase *tc = tcase_create("consume");

	/* recovery_gone_deep: 1500 levels, each logged with its path. */
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, namespace_and_content);
	tcase_add_test(tc, create_with_a_store_folded_in);
	tcase_add_test(tc, attributes_xattrs_renames);
	tcase_add_test(tc, groups_into_the_cml);
	tcase_add_test(tc, only_up_to_durable_and_resume);
	tcase_add_test(tc, a_durable_record_missing);
	tcase_add_test(tc, unknown_handles);
	tcase_add_test(tc, listing_of_an_unknown_directory_passes);
	tcase_add_test(tc, recovery_block);
	tcase_add_test(tc, recovery_leftover_is_not_new);
	tcase_add_test(tc, recovery_own_unrecorded_inode);
	tcase_add_test(tc, recovery_moved);
	tcase_add_test(tc, recovery_moved_into_new_dir);
	tcase_add_loop_test(tc, recovery_removal_lost, 0, 2);
	tcase_add_test(tc, recovery_gone_dir);
	tcase_add_test(tc, recovery_gone_deep);
	tcase_add_test(tc, recovery_moved_beside_a_renamed_dir);
	tcase_add_test(tc, recovery_dir_moved_onto_a_moved_name);
	tcase_add_loop_test(tc, recovery_swap_lost, 0, 2);
	tcase_add_test(tc, recovery_file_takes_its_gone_dirs_name);
	tcase_add_test(tc, recovery_cycle_left);
	tcase_add_test(tc, recovery_new_file_at_a_moved_name);
	tcase_add_test(tc, recovery_live_name_untold);
	tcase_add_test(tc, listing_across_batches);
	tcase_add_test(tc, batch_ends_at_its_deadline);
	tcase_add_test(tc, segment_grows_while_read);
	tcase_add_test(tc, segment_not_a_regular_file);
	tcase_add_test(tc, untranslatable_record_set_aside);
	tcase_add_test(tc, two_bad_records_in_a_row);
	tcase_add_test(tc, transient_failure_not_set_aside);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
