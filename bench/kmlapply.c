// SPDX-License-Identifier: MIT
/*
 * How fast lento turns presto's journal into its own (lento/kml_apply.c),
 * on the host, without the kernel: a tar unpack's records -- per
 * directory MKDIR and SETATTR (times), per file CREATE, STORE, SETATTR
 * (owner), SETATTR (times) -- written as presto writes its segments
 * (tests/lib/kmlgen.c), then consumed in batches as client_kml.c does, the
 * cache's commits lazy as in the daemon. Prints the records consumed per
 * second of wall and CPU time. Run under perf to see where the time goes.
 *
 *	bench/bin/kmlapply [DIRS [FILES-PER-DIR]]	(default 300 5)
 */
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "cml.h"
#include "kml_apply.h"
#include "kml_read.h"
#include "kmlgen.h"
#include "loop.h"

#define VOL	1
#define T0	1700000000000000000LL
#define BATCH	64	/* client_kml.c's KML_BATCH_MAX */

static const struct kml_fh root_h = { 2, 0 };
static const struct lento_fid root = { VOL, 0, 1 };

struct run {
	struct lo_loop *loop;
	struct kapply ka;
	struct kread *kr;
	uint64_t pos, limit, records;
	int err;
};

static void die(const char *what, int err)
{
	fprintf(stderr, "kmlapply: %s: %s\n", what, strerror(err < 0 ? -err :
							       err));
	exit(1);
}

static int rm_one(const char *path, const struct stat *sb, int flag,
		  struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static double now_s(int clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int64_t put(struct kmlgen *g, struct kmlgen_rec *r)
{
	int64_t seq = kmlgen_append(g, r);

	if (seq < 0)
		die("writing the segment", (int)seq);
	return seq;
}

static struct kml_fh fh(uint64_t ino)
{
	return ino == 2 ? root_h : (struct kml_fh){ ino, 1 };
}

static void times_of(struct kmlgen *g, uint64_t ino)
{
	struct kmlgen_rec r = { .op = PRESTO_KML_SETATTR, .time_ns = T0 };

	r.fh[PRESTO_KML_FH_OBJ] = fh(ino);
	r.attr.valid = PRESTO_KML_A_ATIME | PRESTO_KML_A_MTIME |
		       PRESTO_KML_A_CTIME;
	r.attr.atime_ns = r.attr.mtime_ns = T0 - 1000;
	r.attr.ctime_ns = T0;
	put(g, &r);
}

static void new_obj(struct kmlgen *g, uint16_t op, uint64_t dir,
		    uint64_t ino, const char *name)
{
	struct kmlgen_rec r = { .op = op, .time_ns = T0, .name = name };

	r.fh[PRESTO_KML_FH_DIR] = fh(dir);
	r.fh[PRESTO_KML_FH_OBJ] = fh(ino);
	r.attr.valid = PRESTO_KML_A_ALL;
	r.attr.mode = op == PRESTO_KML_MKDIR ? S_IFDIR | 0755 : S_IFREG | 0644;
	r.attr.nlink = op == PRESTO_KML_MKDIR ? 2 : 1;
	r.attr.mtime_ns = r.attr.ctime_ns = T0;
	put(g, &r);
}

/* A tar unpack of @dirs directories of @files files each: its records. */
static uint64_t tar_records(struct kmlgen *g, int dirs, int files)
{
	uint64_t ino = 100;
	int64_t last = 0;
	char name[32];

	for (int d = 0; d < dirs; d++) {
		uint64_t dino = ino++;

		snprintf(name, sizeof(name), "dir%d", d);
		new_obj(g, PRESTO_KML_MKDIR, 2, dino, name);
		for (int f = 0; f < files; f++) {
			struct kmlgen_rec r = { .op = PRESTO_KML_STORE,
						.time_ns = T0 };

			snprintf(name, sizeof(name), "file%d.c", f);
			new_obj(g, PRESTO_KML_CREATE, dino, ino, name);
			r.fh[PRESTO_KML_FH_OBJ] = fh(ino);
			r.attr.valid = PRESTO_KML_A_SIZE | PRESTO_KML_A_MTIME |
				       PRESTO_KML_A_CTIME | PRESTO_KML_A_MODE;
			r.attr.size = 6543;
			r.attr.mode = S_IFREG | 0644;
			r.attr.mtime_ns = r.attr.ctime_ns = T0 + 5;
			put(g, &r);
			r = (struct kmlgen_rec){ .op = PRESTO_KML_SETATTR,
						 .time_ns = T0 };
			r.fh[PRESTO_KML_FH_OBJ] = fh(ino);
			r.attr.valid = PRESTO_KML_A_UID | PRESTO_KML_A_GID |
				       PRESTO_KML_A_CTIME;
			r.attr.uid = r.attr.gid = 1000;
			r.attr.ctime_ns = T0;
			put(g, &r);
			times_of(g, ino++);
		}
		last = put(g, &(struct kmlgen_rec){ .op = PRESTO_KML_SETATTR,
			.time_ns = T0, .fh[PRESTO_KML_FH_OBJ] = fh(dino),
			.attr = { .valid = PRESTO_KML_A_MTIME |
				  PRESTO_KML_A_CTIME, .mtime_ns = T0 - 1000,
				  .ctime_ns = T0 } });
	}
	return (uint64_t)last;
}

static void step(void *arg, int res);

static void consume(struct run *run)
{
	const char *why;
	int n;

	do {
		n = kapply_batch(&run->ka, run->kr, run->limit, BATCH, 0,
				 "kmlpos:vol", &run->pos, step, run, &why);
		kapply_batch_end(&run->ka);
		if (n > 0)
			run->records += (uint64_t)n;
	} while (n > 0);
	if (n < 0 || !kread_busy(run->kr)) {
		if (n < 0 && why)
			fprintf(stderr, "kmlapply: %s\n", why);
		run->err = n;
		lo_stop(run->loop);
	}
}

static void step(void *arg, int res)
{
	struct run *run = arg;

	if (res < 0) {
		run->err = res;
		lo_stop(run->loop);
		return;
	}
	consume(run);
}

static void cache_of(const char *dir, struct cache **c)
{
	struct cache_vol v = { .id = VOL, .name = "vol", .root = root };
	struct cache_obj o = { .fid = root, .type = LENTO_T_DIR, .nlink = 2 };
	char err[256] = "";
	int rc;

	if (cache_open(dir, c, err, sizeof(err)))
		fprintf(stderr, "kmlapply: %s\n", err), exit(1);
	o.attr.valid = LENTO_A_ALL;
	o.attr.mode = 0755;
	o.vv.n = 1;
	o.vv.v[0] = 1;
	o.valid = o.data = true;
	rc = cml_set_client(cache_cml(*c), 9);
	rc = rc ?: cache_vol_put(*c, &v);
	rc = rc ?: cache_obj_put(*c, &o, NULL, 0);
	if (rc)
		die("making the cache", rc);
}

int main(int argc, char **argv)
{
	int dirs = argc > 1 ? atoi(argv[1]) : 300;
	int files = argc > 2 ? atoi(argv[2]) : 5;
	char dir[] = "/tmp/kmlapply-XXXXXX", kdir[64];
	struct kmlgen g;
	struct cache *c;
	struct run run = { 0 };
	double t0, c0, wall, cpu;
	int rc;

	if (dirs <= 0 || files < 0)
		fprintf(stderr, "usage: kmlapply [DIRS [FILES-PER-DIR]]\n"),
		exit(2);
	if (!mkdtemp(dir))
		die("mkdtemp", errno);
	cache_of(dir, &c);
	snprintf(kdir, sizeof(kdir), "%s/vol", dir);
	if (mkdir(kdir, 0755))
		die(kdir, errno);
	snprintf(kdir, sizeof(kdir), "%s/vol/.presto", dir);
	rc = kmlgen_open(&g, kdir);
	rc = rc ?: kmlgen_segment(&g, 1);
	if (rc)
		die("the segment", rc);
	run.limit = tar_records(&g, dirs, files);
	kmlgen_close(&g);

	rc = lo_loop_new(&run.loop);
	rc = rc ?: kapply_init(&run.ka, c, VOL, &root, &root_h);
	rc = rc ?: kread_new(run.loop, kdir, 1, &run.kr);
	if (rc)
		die("starting", rc);
	t0 = now_s(CLOCK_MONOTONIC);
	c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
	consume(&run);
	if (!run.err && kread_busy(run.kr))
		rc = lo_run(run.loop);
	wall = now_s(CLOCK_MONOTONIC) - t0;
	cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
	if (rc || run.err)
		die("consuming", rc ? rc : run.err);
	if (run.records != run.limit || run.ka.unmapped)
		fprintf(stderr, "kmlapply: %" PRIu64 " of %" PRIu64
			" records, %" PRIu64 " unmapped\n", run.records,
			run.limit, run.ka.unmapped), exit(1);
	printf("%" PRIu64 " records, %" PRIu64 " CML records: %.3f s wall, "
	       "%.3f s CPU, %.0f records/s, %.1f us CPU/record\n",
	       run.records, run.ka.records, wall, cpu,
	       (double)run.records / wall, cpu * 1e6 / (double)run.records);
	kread_free(run.kr);
	kapply_free(&run.ka);
	lo_loop_free(run.loop);
	cache_close(c);
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}
