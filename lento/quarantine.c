// SPDX-License-Identifier: MIT
/*
 * The journal records set aside (kml_apply.h), for a person
 * (client_int.h):
 *
 *   quarantine [VOLUME]          every record set aside (of VOLUME): its
 *                                seq, operation, error and why, when, and
 *                                the files kept for it
 *   quarantine-drop VOLUME SEQ   dealt with: its kept files and its row go
 *
 * What is set aside stays until dropped; lentoctl status counts it (from
 * the same table, so a drop shows there at once).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client_int.h"
#include "kml.h"

/* A cache's volume by name; -errno after ctl_error() if none. */
static int quar_volume(struct client *cl, struct ctl_req *r,
		       const char *name, struct cache_vol *v)
{
	int err = cache_vol_find(cl->cache, name, v);

	if (err == -ENOENT)
		ctl_error(r, "no volume %s in this cache", name);
	else if (err)
		ctl_error(r, "volume %s: %s", name, strerror(-err));
	return err;
}

/* SEQ: a record's number, decimal. -EINVAL after ctl_error() if not. */
static int quar_seq(struct ctl_req *r, const char *s, uint64_t *seq)
{
	unsigned long long v = 0;
	char *end = NULL;

	errno = 0;
	/* Digits only: strtoull() takes a sign and spaces too. */
	if (*s >= '0' && *s <= '9')
		v = strtoull(s, &end, 10);
	if (!end || *end || errno || v > INT64_MAX) {
		ctl_error(r, "not a record number: %s", s);
		return -EINVAL;
	}
	*seq = v;
	return 0;
}

/* @ms since the epoch as ISO 8601, UTC: 2026-01-02T03:04:05.678Z. */
static void iso_utc(int64_t ms, char *buf, size_t size)
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	char day[32];

	if (ms < 0 || !gmtime_r(&s, &tm) ||
	    !strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm)) {
		snprintf(buf, size, "%" PRId64 " ms", ms);
		return;
	}
	snprintf(buf, size, "%s.%03dZ", day, (int)(ms % 1000));
}

/* The errno's name, "EEXIST", or its number for one glibc does not know. */
static const char *errno_name(int err, char *buf, size_t size)
{
	const char *name = strerrorname_np(err);

	if (name)
		return name;
	snprintf(buf, size, "errno %d", err);
	return buf;
}

/* One listing's state, through cache_quarantine_each(). */
struct qlist {
	struct client *cl;
	struct jw *w;
	bool json;
	uint64_t records;
	unsigned int files;	/* of the record being written */
};

/*
 * A kept file. Its path is shown, not used: a person copies it back
 * through the mount (cache.c alone reaches it).
 */
static int quar_file_out(void *arg, const char *name, uint64_t size)
{
	struct qlist *q = arg;

	q->files++;
	if (!q->json) {
		jw_printf(q->w, "  kept: %s/%s/%s (%" PRIu64 " bytes)\n",
			  q->cl->opt->cache, CACHE_QUARANTINE_DIR, name, size);
		return 0;
	}
	jw_obj_begin(q->w);
	jw_key(q->w, "name");
	jw_str(q->w, name);
	jw_key(q->w, "size");
	jw_uint(q->w, size);
	jw_obj_end(q->w);
	return 0;
}

static void quar_head_text(struct jw *w, const char *vol,
			   const struct cache_quar *e)
{
	char when[48], en[32];

	iso_utc(e->at_ms, when, sizeof(when));
	jw_printf(w, "%s seq %" PRIu64 ": %s, %s (%s), set aside %s\n", vol,
		  e->seq, kml_op_name(e->op), errno_name(e->err, en,
		  sizeof(en)), strerror(e->err), when);
	jw_printf(w, "  why: %s\n", e->why);
}

static void quar_head_json(struct jw *w, const char *vol,
			   const struct cache_quar *e)
{
	char en[32];

	jw_key(w, "volume");
	jw_str(w, vol);
	jw_key(w, "volume_id");
	jw_uint(w, e->volume);
	jw_key(w, "seq");
	jw_uint(w, e->seq);
	jw_key(w, "op");
	jw_str(w, kml_op_name(e->op));
	jw_key(w, "errno");
	jw_int(w, e->err);
	jw_key(w, "error");
	jw_str(w, errno_name(e->err, en, sizeof(en)));
	jw_key(w, "error_text");
	jw_str(w, strerror(e->err));
	jw_key(w, "why");
	jw_str(w, e->why);
	jw_key(w, "at_ms");
	jw_int(w, e->at_ms);
	jw_key(w, "record_bytes");
	jw_uint(w, e->len);
}

/* One record set aside, and its kept files. */
static int quar_record_out(void *arg, const struct cache_quar *e)
{
	struct qlist *q = arg;
	struct cache_vol v;
	char id[16];
	const char *vol = id;
	int err;

	/* A row of a volume the cache forgot: its id stands for its name. */
	snprintf(id, sizeof(id), "#%" PRIu32, e->volume);
	err = cache_vol_get(q->cl->cache, e->volume, &v);
	if (!err)
		vol = v.name;
	else if (err != -ENOENT)
		return err;
	q->records++;
	q->files = 0;
	if (!q->json) {
		quar_head_text(q->w, vol, e);
		err = cache_quarantine_files(q->cl->cache, e->volume, e->seq,
					     quar_file_out, q);
		if (!err && !q->files)
			jw_printf(q->w, "  kept: no file\n");
		return err;
	}
	jw_obj_begin(q->w);
	quar_head_json(q->w, vol, e);
	jw_key(q->w, "files");
	jw_arr_begin(q->w);
	err = cache_quarantine_files(q->cl->cache, e->volume, e->seq,
				     quar_file_out, q);
	jw_arr_end(q->w);
	jw_obj_end(q->w);
	return err;
}

int cmd_quarantine(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	struct client *cl = ctx;
	struct qlist q = { .cl = cl, .w = ctl_out(r), .json = ctl_json(r) };
	struct cache_vol v;
	int64_t vol = CACHE_QUAR_ALL;
	int err;

	if (argc) {
		err = quar_volume(cl, r, argv[0], &v);
		if (err)
			return err;
		vol = v.id;
	}
	if (q.json)
		jw_arr_begin(q.w);
	err = cache_quarantine_each(cl->cache, vol, quar_record_out, &q);
	if (err) {
		ctl_error(r, "the records set aside: %s", strerror(-err));
		return err;
	}
	if (q.json)
		jw_arr_end(q.w);
	else if (!q.records)
		jw_printf(q.w, "no journal record set aside%s%s\n",
			  argc ? " of " : "", argc ? argv[0] : "");
	if (q.json)
		jw_raw(q.w, "\n", 1);
	return 0;
}

int cmd_quarantine_drop(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	struct client *cl = ctx;
	struct jw *w = ctl_out(r);
	struct cache_vol v;
	unsigned int nfiles;
	uint64_t seq;
	int err;

	(void)argc;
	err = quar_volume(cl, r, argv[0], &v) ?: quar_seq(r, argv[1], &seq);
	if (err)
		return err;
	err = cache_quarantine_drop(cl->cache, v.id, seq, &nfiles);
	if (err == -ENOENT) {
		ctl_error(r, "no record %" PRIu64 " of %s set aside", seq,
			  v.name);
		return err;
	}
	if (err) {
		ctl_error(r, "record %" PRIu64 " of %s: %s (%u kept file(s) "
			  "removed; lentoctl quarantine shows what is left)",
			  seq, v.name, strerror(-err), nfiles);
		return err;
	}
	if (!ctl_json(r)) {
		jw_printf(w, "record %" PRIu64 " of %s dropped, %u kept file(s) "
			  "removed\n", seq, v.name, nfiles);
		return 0;
	}
	jw_obj_begin(w);
	jw_key(w, "volume");
	jw_str(w, v.name);
	jw_key(w, "seq");
	jw_uint(w, seq);
	jw_key(w, "files_removed");
	jw_uint(w, nfiles);
	jw_obj_end(w);
	jw_raw(w, "\n", 1);
	return 0;
}
