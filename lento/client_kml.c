// SPDX-License-Identifier: MIT
/*
 * presto's journal and the write-back permit, per fileset (KERNEL.md,
 * "The journal" and "The write-back permit"; client_kernel.h).
 *
 * Consuming. presto says how far its log is durable (the REGISTER
 * answer, MOUNTED, KML notices); lento reads the records up to there from
 * CACHE/VOLUME/.presto through its ring (kml_read.c) and turns them into
 * cache rows and CML records (kml_apply.c), a batch per transaction that
 * also stores the position, cache_meta "kmlpos:VOLUME". The transaction
 * is lazy (cache.h): a sync of the cache on the loop's ring follows, and
 * only then does lento acknowledge the position (KML_ACK) -- a busy disk
 * holds the acknowledgement, not the loop. The flags of the objects the
 * batch made are persisted, and the usual machinery reintegrates
 * (reint.c). A lento that restarts goes on after its stored position:
 * nothing is logged twice, nothing acknowledged is lost. Consumption
 * waits while the cache has no client id from the server (new objects
 * need fids that carry it), and while the volume is not known here.
 *
 * The permit. presto changes nothing without it. A PERMIT upcall is
 * granted once lento holds the volume's permit from the server (or,
 * disconnected, a local one: client_kernel.c). Before lento gives the
 * permit back -- the server revoked it, or it is idle -- presto gives it
 * back first (PERMIT 0, answered by a KML notice that covers every change
 * made under it), and the log is consumed up to there: only then are the
 * records all in the CML, to reintegrate before the release. A lento that
 * starts and finds presto holding the permit asks the server for it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "client_kernel.h"
#include "cml.h"
#include "fault.h"
#include "log.h"

/*
 * Records a transaction. Each commit writes every page it touched to the
 * WAL again, so a big batch writes less per record (a tar unpack's
 * consumption: 10% less CPU at 256 than at 64); KML_RUN_MS bounds it.
 */
#define KML_BATCH_MAX	256
/*
 * Consuming holds the event loop: after this long it lets the rest run
 * (permit renewals, upcalls) and goes on at the next tick.
 */
#define KML_RUN_MS	50
#define KML_RETRY_MS	1000			/* after a failure */
/*
 * presto's answers are not queued when lento's buffer is full: a request
 * not answered in this long is sent again (both are idempotent).
 */
#define KML_ANSWER_MS	10000

static void poskey(char *buf, size_t size, const char *volume)
{
	snprintf(buf, size, "kmlpos:%s", volume);
}

bool kml_caught_up(const struct fset *fs)
{
	return !fs->j.known || fs->j.pos >= fs->j.durable;
}

static bool at_end(const struct kjournal *j)
{
	return j->known && j->pos >= j->durable;
}

uint64_t kml_behind_ms(const struct fset *fs)
{
	uint64_t now = lo_now_ms();

	if (at_end(&fs->j))
		return 0;
	return now > fs->j.caught_up_ms ? now - fs->j.caught_up_ms : 0;
}

/* ----------------------------------------------------------- acks */

static void ack_done(void *arg, int err, const struct kmsg *reply)
{
	struct fset *fs = arg;

	(void)reply;
	if (!err)
		return;
	if (err != -ECANCELED)
		log_warn("fileset %s: KML_ACK: %s", fs->name, strerror(-err));
	fs->j.ack_sent = 0;	/* the tick sends it again */
}

/* How far the position is durable; a sync is asked for the rest. */
static uint64_t ackable(struct client *cl, struct kjournal *j)
{
	if (cache_durable_gen(cl->cache) >= j->pos_gen)
		j->durable_pos = j->pos;
	else
		client_sync_want(cl);
	return j->durable_pos;
}

static void ack_send(struct client *cl, struct fset *fs)
{
	struct kjournal *j = &fs->j;
	uint64_t upto = ackable(cl, j);
	struct kcmd c = { .cmd = PRESTO_CMD_KML_ACK, .fileset = fs->name,
			  .have = KA(SEQ), .seq = upto };

	if (!fset_live(fs) || !j->known || upto <= j->ack_sent ||
	    upto <= j->acked || upto > j->durable)
		return;
	if (!kchan_send(kclient_chan(cl), &c, ack_done, fs))
		j->ack_sent = upto;
}

void kml_sync_started(struct client *cl)
{
	for (struct fset *fs = cl->k ? cl->k->fsets : NULL; fs; fs = fs->next)
		fs->j.sync_pos = fs->j.pos;
}

void kml_synced(struct client *cl)
{
	if (cache_sync_error(cl->cache))
		return;
	for (struct fset *fs = cl->k ? cl->k->fsets : NULL; fs; fs = fs->next) {
		struct kjournal *j = &fs->j;

		if (j->sync_pos > j->durable_pos)
			j->durable_pos = j->sync_pos;
		ack_send(cl, fs);
	}
}

/* ------------------------------------------------------------ reading */

static void stop_reading(struct fset *fs)
{
	kread_free(fs->j.kr);		/* later, if a read is in flight */
	fs->j.kr = NULL;
	if (fs->j.ka_ready) {
		/* A record failing goes on counting in the next kapply. */
		fs->j.fail = fs->j.ka.fail;
		fs->j.quarantined_said = 0;
		kapply_free(&fs->j.ka);
	}
	fs->j.ka_ready = false;
}

void kml_stop(struct client *cl, struct fset *fs)
{
	stop_reading(fs);
	fs->j.known = false;
	fs->j.final = false;
	fs->j.presto_permit = false;
	/* Unmounted: nothing to give back, nothing more to sync. */
	fs->j.revoke_req = fs->j.sync_req = 0;
	op_wake_reint(cl);
}

/*
 * UNMOUNTED of a mount lento served: with where the mount left its log
 * (presto synced it at the unmount), lento reads the rest as it would
 * mounted; without (an older presto), it stops until the next mount.
 */
void kml_unmounted(struct client *cl, struct fset *fs, const struct kmsg *m)
{
	struct kjournal *j = &fs->j;

	if (!(m->have & KA(KML_DURABLE))) {
		kml_stop(cl, fs);
		return;
	}
	j->cl = cl;
	j->known = j->final = true;
	if (m->kml_durable > j->durable)
		j->durable = m->kml_durable;
	/* All of it durable: a sync or a catch-up reads to its end. */
	if (j->sync_upto < j->durable)
		j->sync_upto = j->durable;
	j->acked = m->kml_acked;
	j->presto_permit = false;
	/* Nothing answers these any more. */
	j->revoke_req = j->sync_req = 0;
	if (j->durable > j->pos)
		log_info("fileset %s: unmounted with records %" PRIu64 " to %"
			 PRIu64 " of its journal not yet read: reading them",
			 fs->name, j->pos + 1, j->durable);
	op_wake_reint(cl);
	kml_consume(cl, fs);
}

void kml_free(struct fset *fs)
{
	stop_reading(fs);
}

/* Why lento cannot consume now ("" if it can); @v the volume. */
static const char *blocked(struct client *cl, struct fset *fs,
			   struct vol **v)
{
	*v = vol_by_name(cl, fs->volume);
	if (!(fset_live(fs) || fs->j.final) || !fs->j.known)
		return "presto has not said where its log stands";
	if (!cl->id_assigned)
		return "waiting for a client id from the server (new objects "
		       "need fids that carry it)";
	if (!*v)
		return "the volume is not known here yet";
	return "";
}

static int pos_load(struct client *cl, struct fset *fs)
{
	char key[LENTO_VOLNAME_MAX + 16];
	int64_t v = 0;
	int err;

	poskey(key, sizeof(key), fs->volume);
	err = cache_meta_get(cl->cache, key, &v);
	if (err && err != -ENOENT)
		return err;
	/* Durable: the cache's open synced what a lento killed left. */
	fs->j.pos = fs->j.durable_pos = (uint64_t)v;
	fs->j.pos_gen = 0;
	fs->j.pos_loaded = true;
	return 0;
}

/* Reader and translator, made when first needed. */
static int start_reading(struct client *cl, struct fset *fs, struct vol *v)
{
	struct kjournal *j = &fs->j;
	struct kml_fh rh = { fs->root.ino, fs->root.gen };
	char dir[CACHE_PATH_MAX + LENTO_VOLNAME_MAX + 16];
	int err = 0;

	if (!j->ka_ready) {
		err = kapply_init(&j->ka, cl->cache, v->cv.id, &v->cv.root,
				  &rh);
		if (err)
			return err;
		j->ka.fail = j->fail;
		j->ka_ready = true;
	}
	if (j->kr)
		return 0;
	snprintf(dir, sizeof(dir), "%s/%s/.presto", cl->opt->cache,
		 fs->volume);
	return kread_new(cl->loop, dir, j->pos + 1, &j->kr);
}

/* New objects keep their flags across a remount: in trusted.presto.cb. */
static void flags_of_made(struct client *cl, struct fset *fs)
{
	struct kapply *ka = &fs->j.ka;
	struct cache_path_memo m = { 0 };
	char path[CACHE_PATH_MAX];
	bool rd;

	/* A test's window: the names change here (fault.h). */
	if (ka->nmade)
		fault_hold("made-flags", FAULT_HOLD_MS);
	rd = fs->epoch && ka->nmade && cache_read_begin(cl->cache);

	for (size_t i = 0; fs->epoch && i < ka->nmade; i++) {
		int fd = -1, err = cache_path_near(cl->cache, &ka->made[i], &m,
						   path, sizeof(path));

		/*
		 * The object the record made, by the handle the record
		 * gave it: by now its name may hold another (moved or made
		 * there through the mount, in a record not yet consumed),
		 * which must not get these flags -- a placeholder served
		 * as complete.
		 */
		if (!err)
			fd = err = cache_open_obj(cl->cache, path, O_PATH, 0);
		if (fd >= 0 && (err = cache_fd_is(cl->cache, fd, &ka->made[i]))
		    != 1)
			log_debug("fileset %s: %s is not the object made "
				  "there (%d): its flags left alone", fs->name,
				  path, err);
		else if (fd >= 0)
			err = kclient_flags_new(cl, &ka->made[i], fd);
		if (fd >= 0)
			close(fd);
		/* Removed again in the same batch: nothing to mark. */
		if (err < 0 && err != -ENOENT)
			log_warn("fileset %s: the flags of %s: %s", fs->name,
				 path, strerror(-err));
	}
	cache_read_end(cl->cache, rd);
	kapply_batch_end(ka);
}

static void after_batch(struct client *cl, struct fset *fs, struct vol *v,
			int n)
{
	struct kjournal *j = &fs->j;

	j->batches++;
	j->records += (uint64_t)n;
	if (j->ka.unmapped > j->unmapped_said) {
		log_err("fileset %s: %" PRIu64 " journal record(s) about "
			"objects lento does not know were not logged; the "
			"last: %s", fs->name, j->ka.unmapped - j->unmapped_said,
			j->ka.why);
		j->unmapped_said = j->ka.unmapped;
	}
	if (j->ka.quarantined > j->quarantined_said) {
		log_err("fileset %s: %s; kept in the cache's table "
			"kml_quarantine, and the %zu object(s) it names will "
			"be fetched again from the server", fs->name,
			j->ka.quarantine_why, j->ka.nsuspect);
		j->quarantined_said = j->ka.quarantined;
	}
	/* What presto holds of them goes too: their next use asks lento. */
	for (size_t i = 0; i < j->ka.nsuspect; i++)
		kclient_break_fid(cl, &j->ka.suspect[i]);
	flags_of_made(cl, fs);
	ack_send(cl, fs);
	v->last_change_ms = lo_now_ms();
	v->log_changed = true;
}

static void read_more(void *arg, int res);

static void consume_failed(struct client *cl, struct fset *fs, int err,
			   const char *why)
{
	struct kjournal *j = &fs->j;

	snprintf(j->err, sizeof(j->err), "consuming after record %" PRIu64
		 " (durable %" PRIu64 "): %s%s%.200s", j->pos, j->durable,
		 strerror(-err), why ? ": " : "", why ? why : "");
	log_err("fileset %s: %s; trying again in %d s", fs->name, j->err,
		KML_RETRY_MS / 1000);
	/* Read again from the position stored. */
	kread_free(j->kr);
	j->kr = NULL;
	j->retry_at_ms = lo_now_ms() + KML_RETRY_MS;
	/* Upcalls that waited for it look once more, and answer. */
	kclient_journal_moved(cl, fs);
}

void kml_consume(struct client *cl, struct fset *fs)
{
	struct kjournal *j = &fs->j;
	char key[LENTO_VOLNAME_MAX + 16];
	const char *why = NULL;
	bool moved = false;
	struct vol *v;
	int n = 0, err;

	/* A test's reader that falls behind: nothing read while armed. */
	if (fault_armed("kml-stall"))
		return;
	if ((j->kr && kread_busy(j->kr)) || *blocked(cl, fs, &v) ||
	    lo_now_ms() < j->retry_at_ms)
		return;
	err = j->pos_loaded ? 0 : pos_load(cl, fs);
	err = err ?: start_reading(cl, fs, v);
	poskey(key, sizeof(key), fs->volume);
	for (uint64_t until = lo_now_ms() + KML_RUN_MS; !err &&
	     !kml_caught_up(fs) && lo_now_ms() < until;) {
		uint64_t was = j->pos;

		n = kapply_batch(&j->ka, j->kr, j->durable, KML_BATCH_MAX,
				 until, key, &j->pos, read_more, fs, &why);
		/*
		 * A read that fails after records were applied keeps them:
		 * the position moved, and its acknowledgement must wait for
		 * the sync of what was applied, as after any batch (the
		 * objects they made get their flags after the next one).
		 */
		if (j->pos != was)
			j->pos_gen = cache_gen(cl->cache);
		if (n <= 0) {
			err = n;
			break;
		}
		after_batch(cl, fs, v, n);
		moved = true;
	}
	if (err) {
		consume_failed(cl, fs, err, why);
		return;
	}
	j->err[0] = 0;
	if (at_end(j))
		j->caught_up_ms = lo_now_ms();
	if (!moved)
		return;
	kclient_journal_moved(cl, fs);
	op_wake_reint(cl);
	reint_kick(cl);
}

static void read_more(void *arg, int res)
{
	struct fset *fs = arg;
	struct client *cl = fs->j.cl;

	if (res < 0) {
		consume_failed(cl, fs, res, "reading a segment");
		return;
	}
	kml_consume(cl, fs);
}

/* ---------------------------------------------------- presto's word */

/* A new mount or registration: where lento stands against the log. */
static void log_restart(struct client *cl, struct fset *fs)
{
	struct kjournal *j = &fs->j;

	if (!j->pos_loaded && pos_load(cl, fs))
		return;
	if (j->pos > j->durable) {
		log_warn("fileset %s: lento consumed the journal up to %"
			 PRIu64 ", but it holds records up to %" PRIu64
			 " only: a new log; consuming from %" PRIu64,
			 fs->name, j->pos, j->durable, j->acked + 1);
		j->pos = j->acked;
	} else if (j->pos < j->acked) {
		log_warn("fileset %s: records %" PRIu64 "..%" PRIu64 " were "
			 "acknowledged by another consumer: they are not in "
			 "this cache's log", fs->name, j->pos + 1, j->acked);
		j->pos = j->acked;
	}
	/* A position moved back is durable no further than it is. */
	if (j->durable_pos > j->pos)
		j->durable_pos = j->pos;
	if (j->sync_pos > j->pos)
		j->sync_pos = j->pos;
	/* presto does not keep acknowledgements across a mount. */
	j->ack_sent = 0;
	stop_reading(fs);
	ack_send(cl, fs);
}

static void revoked(struct client *cl, struct fset *fs, const struct kmsg *m);
static void synced(struct client *cl, struct fset *fs, const struct kmsg *m);

void kml_log_state(struct client *cl, struct fset *fs, const struct kmsg *m)
{
	struct kjournal *j = &fs->j;

	j->cl = cl;
	if (!(m->have & KA(KML_DURABLE)))
		return;		/* not mounted */
	if (j->final) {
		/* Mounted again: its recovery may have added records. */
		stop_reading(fs);
		j->final = false;
	}
	if (at_end(j))		/* until now: behind from here, if at all */
		j->caught_up_ms = lo_now_ms();
	j->known = true;
	if (m->kml_durable > j->durable || m->cmd != PRESTO_CMD_KML)
		j->durable = m->kml_durable;
	j->acked = m->kml_acked;
	if (m->cmd == PRESTO_CMD_MOUNTED && j->log_err) {
		/* A new mount: its recovery restated what the log lost. */
		log_info("fileset %s: mounted again: its journal is read "
			 "anew", fs->name);
		j->log_err = 0;
	}
	if (m->cmd != PRESTO_CMD_KML) {
		/*
		 * Only here: after it, presto's permit moves by lento's
		 * word alone, and a notice sent before a grant must not
		 * take it back.
		 */
		j->presto_permit = (m->have & KA(PERMIT)) && m->permit;
		if (j->presto_permit)
			log_info("fileset %s: presto holds the write-back "
				 "permit", fs->name);
		log_restart(cl, fs);
	} else if ((m->have & KA(REQ)) && m->req) {
		if (m->req == j->revoke_req)
			revoked(cl, fs, m);
		if (m->req == j->sync_req)
			synced(cl, fs, m);
	}
	kml_consume(cl, fs);
}

/* ------------------------------------------------------------ permit */

void kml_permit_granted(struct client *cl, struct fset *fs)
{
	struct vol *v = vol_by_name(cl, fs->volume);

	fs->j.presto_permit = true;
	fs->permits++;
	if (v)
		v->last_change_ms = lo_now_ms();
}

/* PERMIT 0 answered: every change made under it is at most durable. */
static void revoked(struct client *cl, struct fset *fs, const struct kmsg *m)
{
	struct kjournal *j = &fs->j;

	j->revoke_req = 0;
	j->presto_permit = false;
	/* A PERMIT upcall made meanwhile waited for this answer. */
	kclient_fset_woken(cl, fs);
	if (m->errno_) {
		/*
		 * Not "every change is at most durable": some may be in no
		 * record lento can read. Giving the permit back now would
		 * let another client's changes past them, unseen: held.
		 */
		if (!j->log_err)
			log_err("fileset %s: presto could not make its journal "
				"durable when it gave the permit back (%s): the "
				"permit is held, not given back to the server, "
				"until the journal is whole (asked again every %d "
				"s; a remount repairs it)", fs->name,
				strerror((int)m->errno_), KML_ANSWER_MS / 1000);
		j->log_err = -(int)m->errno_;
		j->log_err_ms = lo_now_ms();
		return;
	}
	if (j->log_err)
		log_info("fileset %s: presto's journal is whole again",
			 fs->name);
	j->log_err = 0;
	log_info("fileset %s: presto gave the permit back (journal durable "
		 "up to %" PRIu64 ")", fs->name, m->kml_durable);
	reint_kick(cl);
}

/* A request's ack (its answer comes as a KML message). */
static void request_ack(void *arg, int err, const struct kmsg *reply,
			bool revoke)
{
	struct fset *fs = arg;
	struct kjournal *j = &fs->j;

	(void)reply;
	if (!err || err == -ECANCELED)
		return;		/* answered later; or the channel went */
	if (revoke) {
		j->revoke_req = 0;
		/* Unmounted: presto holds nothing any more. */
		if (err == -ENOENT)
			j->presto_permit = false;
		else
			log_warn("fileset %s: PERMIT 0: %s", fs->name,
				 strerror(-err));
		kclient_fset_woken(j->cl, fs);
		reint_kick(j->cl);
		return;
	}
	j->sync_req = 0;
	if (err != -ENOENT)
		j->sync_err = err;
	op_wake_reint(j->cl);
}

static void revoke_ack(void *arg, int err, const struct kmsg *reply)
{
	request_ack(arg, err, reply, true);
}

static void sync_ack(void *arg, int err, const struct kmsg *reply)
{
	request_ack(arg, err, reply, false);
}

/*
 * KML_SYNC or PERMIT 0 with a new REQ; its number, or 0 if not sent (and
 * why in *@errp, if given).
 */
static uint64_t request(struct client *cl, struct fset *fs, uint8_t cmd,
			int *errp)
{
	struct kcmd c = { .cmd = cmd, .fileset = fs->name, .have = KA(REQ),
			  .req = ++fs->j.last_req };
	int err;

	if (cmd == PRESTO_CMD_PERMIT)
		c.have |= KA(PERMIT);	/* 0 */
	fs->j.cl = cl;
	err = kchan_send(kclient_chan(cl), &c, cmd == PRESTO_CMD_PERMIT ?
			 revoke_ack : sync_ack, fs);
	if (err) {
		log_warn("fileset %s: %s: %s", fs->name, kchan_cmd_name(cmd),
			 strerror(-err));
		if (errp)
			*errp = err;
		return 0;
	}
	return c.req;
}

/*
 * KML_SYNC asked (again): one that could not be sent is the sync's error,
 * not a sync answered with nothing new.
 */
static void sync_request(struct client *cl, struct fset *fs)
{
	int err = 0;

	fs->j.sync_req = request(cl, fs, PRESTO_CMD_KML_SYNC, &err);
	fs->j.sync_ms = lo_now_ms();
	if (!fs->j.sync_req)
		fs->j.sync_err = err;
}

static void presto_revoke(struct client *cl, struct fset *fs,
			  const char *why)
{
	if (fs->j.revoke_req || !fset_live(fs))
		return;
	log_info("fileset %s: asking presto for the permit back: %s",
		 fs->name, why);
	fs->j.revoke_req = request(cl, fs, PRESTO_CMD_PERMIT, NULL);
	fs->j.revoke_ms = fs->j.log_err_ms = lo_now_ms();
}

/*
 * The permit stays: the journal cannot be read (or presto could not make
 * it durable), and giving the permit back would lose the changes in it.
 * Said once per episode, and shown by status. false, always.
 */
static bool permit_held(struct fset *fs, struct vol *v)
{
	struct kjournal *j = &fs->j;

	if (!j->held_said)
		log_err("fileset %s: volume %s: the permit is NOT given back%s: "
			"presto's journal is broken (%s); changes made under "
			"the permit would be lost. It is held until the journal "
			"can be read (see lentoctl status)", fs->name,
			v->cv.name, v->revoked ? " to the server, which asked "
			"for it" : "", j->log_err ? strerror(-j->log_err) :
			j->err);
	j->held_said = true;
	return false;
}

bool kclient_permit_drained(struct client *cl, struct vol *v)
{
	struct fset *fs = cl->k ? fset_by_volume(cl, v->cv.name) : NULL;
	struct kjournal *j = fs ? &fs->j : NULL;

	if (j && j->final) {
		/* Unmounted: what its log holds goes before the permit. */
		if (j->pos < j->durable)
			kml_consume(cl, fs);
		if (j->pos >= j->durable) {
			j->held_said = false;
			return true;
		}
		return j->err[0] ? permit_held(fs, v) : false;
	}
	if (!fs || !fset_live(fs) || !j->known)
		return true;	/* presto holds nothing lento could ask */
	if (j->presto_permit || j->revoke_req) {
		presto_revoke(cl, fs, v->revoked ? "the server wants it" :
			      "lento gives it back");
		return false;
	}
	/* Asked again now and then (kml_tick): a whole log answers without. */
	if (j->log_err)
		return permit_held(fs, v);
	/* Every change made under it in the CML first. */
	if (j->pos < j->durable)
		kml_consume(cl, fs);
	if (j->pos >= j->durable) {
		j->held_said = false;
		return true;
	}
	return j->err[0] ? permit_held(fs, v) : false;
}

void kclient_permit_lost(struct client *cl, struct vol *v)
{
	struct fset *fs = cl->k ? fset_by_volume(cl, v->cv.name) : NULL;

	if (fs && fs->j.presto_permit)
		presto_revoke(cl, fs, "lento lost it");
}

void kclient_acquire_failed(struct client *cl, uint32_t volume, int err)
{
	struct vol *v = vol_by_id(cl, volume);
	struct fset *fs = v && cl->k ? fset_by_volume(cl, v->cv.name) : NULL;

	/* Refused (not a lost connection): presto must stop changing. */
	if (fs && fs->j.presto_permit && err != -ENOTCONN)
		presto_revoke(cl, fs, "the server refused it to lento");
}

/* presto holds the permit (lento restarted): hold it at the server too. */
static void permit_follow(struct client *cl, struct fset *fs)
{
	struct vol *v = vol_by_name(cl, fs->volume);

	if (!fs->j.presto_permit || !v || !connected(cl) || v->permit ||
	    v->acquiring || v->releasing || v->revoked || fs->j.revoke_req ||
	    lo_now_ms() < v->retry_at_ms)
		return;
	log_info("fileset %s: presto holds the permit: acquiring it from "
		 "the server", fs->name);
	job_start(cl, J_ACQUIRE, v->cv.id, NULL, NULL, NULL);
}

/* Requests whose answer was lost (presto's send found no room). */
static void requests_again(struct client *cl, struct fset *fs)
{
	uint64_t now = lo_now_ms();

	if (fs->j.revoke_req && now - fs->j.revoke_ms > KML_ANSWER_MS) {
		fs->j.revoke_req = 0;
		presto_revoke(cl, fs, "asked again: no answer came");
	}
	if (fs->j.sync_req && now - fs->j.sync_ms > KML_ANSWER_MS)
		sync_request(cl, fs);
	/* A permit held for a log presto could not sync: is it whole now? */
	if (fs->j.log_err && !fs->j.revoke_req &&
	    now - fs->j.log_err_ms > KML_ANSWER_MS)
		presto_revoke(cl, fs, "asking again whether its journal is "
			      "whole");
}

void kml_lost(struct client *cl, struct fset *fs)
{
	uint64_t now = lo_now_ms(), past = now > KML_ANSWER_MS ?
					   now - KML_ANSWER_MS - 1 : 0;

	(void)cl;
	/* Their answers may be among what was lost: asked again now. */
	if (fs->j.revoke_req)
		fs->j.revoke_ms = past;
	if (fs->j.sync_req)
		fs->j.sync_ms = past;
}

uint64_t kml_due_ms(struct client *cl, const struct fset *fs, uint64_t now)
{
	const struct kjournal *j = &fs->j;
	uint64_t due = UINT64_MAX;
	struct vol *v;

	if (j->final)
		return j->pos < j->durable ?
		       (j->retry_at_ms > now ? j->retry_at_ms : now) : due;
	if (!fset_live(fs) || !j->known)
		return due;
	if (j->pos > j->acked && j->pos > j->ack_sent)
		return now;		/* to acknowledge */
	if (j->pos < j->durable || j->catch_up)
		due = j->retry_at_ms > now ? j->retry_at_ms : now;
	if (j->revoke_req)
		due = earlier_ms(due, j->revoke_ms + KML_ANSWER_MS + 1);
	if (j->sync_req)
		due = earlier_ms(due, j->sync_ms + KML_ANSWER_MS + 1);
	if (j->log_err && !j->revoke_req)
		due = earlier_ms(due, j->log_err_ms + KML_ANSWER_MS + 1);
	v = j->presto_permit ? vol_by_name(cl, fs->volume) : NULL;
	if (v && !v->permit)	/* permit_follow() */
		due = earlier_ms(due, v->retry_at_ms > now ? v->retry_at_ms : now);
	return due;
}

void kml_tick(struct client *cl, struct fset *fs)
{
	fs->j.cl = cl;
	if (fs->j.final)
		kml_consume(cl, fs);
	if (!fset_live(fs))
		return;
	requests_again(cl, fs);
	ack_send(cl, fs);
	kml_consume(cl, fs);
	permit_follow(cl, fs);
}

/* ------------------------------------------------------------- sync */

/* The KML_SYNC awaited is answered: consume up to its durable point. */
static void synced(struct client *cl, struct fset *fs, const struct kmsg *m)
{
	struct kjournal *j = &fs->j;

	j->sync_req = 0;
	if (m->errno_)
		j->sync_err = -(int)m->errno_;
	if (m->kml_durable > j->sync_upto)
		j->sync_upto = m->kml_durable;
	kclient_journal_moved(cl, fs);	/* a listing may wait for it */
	op_wake_reint(cl);
	reint_kick(cl);		/* a batch may wait for it */
}

/*
 * Each sync asks anew: an answer to an earlier request may not cover
 * what was committed since. Earlier answers still move sync_upto.
 */
static void sync_send(struct client *cl, struct fset *fs)
{
	fs->j.sync_err = 0;
	if (!fset_live(fs) || !fs->j.known)
		return;
	sync_request(cl, fs);
}

/* One fileset of a sync: 0 consumed, 1 still going, -errno. */
static int sync_one(struct op *op, struct fset *fs)
{
	struct kjournal *j = &fs->j;

	if (j->sync_req)
		return 1;
	if (j->sync_err) {
		ctl_error(op->r, "fileset %s: presto's journal: %s", fs->name,
			  strerror(-j->sync_err));
		return j->sync_err;
	}
	if (!(fset_live(fs) || j->final) || j->pos >= j->sync_upto)
		return 0;
	kml_consume(op->cl, fs);
	if (j->pos >= j->sync_upto)
		return 0;
	if (j->err[0] || lo_now_ms() < j->retry_at_ms) {
		ctl_error(op->r, "fileset %s: the journal is not consumed: %s",
			  fs->name, j->err[0] ? j->err : "retrying");
		return -EIO;
	}
	return 1;
}

/* ------------------------------------------------------- catching up */

static struct fset *fset_of(struct client *cl, struct vol *v)
{
	return cl->k ? fset_by_volume(cl, v->cv.name) : NULL;
}

static void catch_up_send(struct client *cl, struct fset *fs)
{
	if (!fs->j.catch_up || !fset_live(fs) || !fs->j.known)
		return;
	sync_send(cl, fs);
	fs->j.catch_up = !fs->j.sync_req;	/* not sent: again later */
}

void kclient_catch_up(struct client *cl, struct vol *v)
{
	struct fset *fs = fset_of(cl, v);

	if (!fs)
		return;
	fs->j.catch_up = true;
	catch_up_send(cl, fs);
}

bool kclient_caught_up(struct client *cl, struct vol *v)
{
	struct fset *fs = fset_of(cl, v);
	struct kjournal *j;

	if (!fs)
		return true;
	j = &fs->j;
	if (j->final)	/* nothing is added to an unmounted fileset's log */
		j->catch_up = false;
	catch_up_send(cl, fs);
	if (j->catch_up || j->sync_req)
		return false;
	/* Not synced: what was durable already is consumed, at least. */
	if (j->pos < j->sync_upto)
		kml_consume(cl, fs);
	return j->pos >= j->sync_upto;
}

/*
 * For a listing: has lento read what @v's fileset logged before the
 * KML_SYNC kclient_catch_up() asked for? Also true when it cannot know
 * or will not get there soon: no fileset, one not mounted, a journal
 * that cannot be synced or read (the listing goes on as if it were).
 */
bool kclient_journal_read(struct client *cl, struct vol *v)
{
	struct fset *fs = fset_of(cl, v);
	const struct kjournal *j = fs ? &fs->j : NULL;

	if (!j || !fset_live(fs) || !j->known || j->err[0] || j->sync_err ||
	    j->log_err)
		return true;
	return kclient_caught_up(cl, v);
}

bool kclient_journal_live(struct client *cl, struct vol *v)
{
	struct fset *fs = fset_of(cl, v);

	return !fs || ((fset_live(fs) || fs->j.final) && fs->j.known);
}

int kclient_sync(struct op *op)
{
	struct client *cl = op->cl;
	bool going = false;

	if (!cl->k)
		return 0;
	if (!op->kml_synced) {
		for (struct fset *fs = cl->k->fsets; fs; fs = fs->next)
			sync_send(cl, fs);
		op->kml_synced = true;
	}
	for (struct fset *fs = cl->k->fsets; fs; fs = fs->next) {
		struct vol *v;
		int rc;

		if (op->argc && (!(v = vol_by_name(cl, fs->volume)) ||
				 strcmp(v->cv.name, op->argv[0])))
			continue;
		rc = sync_one(op, fs);
		if (rc < 0)
			return rc;
		going |= rc == 1;
	}
	if (!going)
		return 0;
	op->wait_reint = true;
	return OP_WAIT;
}

/* ------------------------------------------------------------ status */

static void pending_of(struct client *cl, struct fset *fs,
		       struct cml_stats *cs)
{
	struct vol *v = vol_by_name(cl, fs->volume);

	memset(cs, 0, sizeof(*cs));
	if (v)
		cml_stats(cache_cml(cl->cache), v->cv.id, cs);
}

static int64_t age_ms(const struct cml_stats *cs)
{
	return cs->records && cs->oldest_ns ?
	       wall_ms() - cs->oldest_ns / 1000000 : 0;
}

/* Records set aside (kml_apply.h): how many, the last. */
static int quarantine_of(struct client *cl, struct fset *fs, uint64_t *n,
			 uint64_t *seq, char *why, size_t size)
{
	struct vol *v = vol_by_name(cl, fs->volume);

	*n = *seq = 0;
	why[0] = 0;
	return v ? cache_quarantine_count(cl->cache, v->cv.id, n, seq, why,
					  size) : 0;
}

static void quarantine_json(struct client *cl, struct fset *fs, struct jw *w)
{
	char why[320];
	uint64_t n, seq;

	quarantine_of(cl, fs, &n, &seq, why, sizeof(why));
	jw_key(w, "quarantined");
	jw_uint(w, n);
	jw_key(w, "quarantine_last");
	jw_str(w, why);
}

static void quarantine_text(struct client *cl, struct fset *fs, struct jw *w)
{
	char why[320];
	uint64_t n, seq;

	if (quarantine_of(cl, fs, &n, &seq, why, sizeof(why)) || !n)
		return;
	jw_printf(w, "  JOURNAL: %" PRIu64 " record(s) could not be translated "
		  "and were set aside (table kml_quarantine of the cache's "
		  "database; their objects are fetched again); the last: %s\n",
		  n, why);
}

void kml_status_json(struct client *cl, struct fset *fs, struct jw *w)
{
	struct kjournal *j = &fs->j;
	struct vol *v = vol_by_name(cl, fs->volume);
	struct cml_stats cs;

	pending_of(cl, fs, &cs);
	jw_key(w, "permit");
	jw_obj_begin(w);
	jw_key(w, "presto");
	jw_bool(w, j->presto_permit);
	jw_key(w, "lento");
	jw_bool(w, v && v->permit);
	jw_key(w, "revoking");
	jw_bool(w, j->revoke_req != 0);
	jw_key(w, "held_journal_broken");
	jw_bool(w, j->held_said);
	jw_key(w, "journal_sync_error");
	jw_str(w, j->log_err ? strerror(-j->log_err) : "");
	jw_key(w, "granted");
	jw_uint(w, fs->permits);
	jw_obj_end(w);
	jw_key(w, "journal");
	jw_obj_begin(w);
	jw_key(w, "consumed");
	jw_uint(w, j->pos);
	jw_key(w, "durable");
	jw_uint(w, j->durable);
	jw_key(w, "acked");
	jw_uint(w, j->acked);
	jw_key(w, "records_consumed");
	jw_uint(w, j->records);
	jw_key(w, "unmapped");
	jw_uint(w, j->ka_ready ? j->ka.unmapped : j->unmapped_said);
	jw_key(w, "error");
	jw_str(w, j->err);
	quarantine_json(cl, fs, w);
	jw_key(w, "waiting");
	jw_str(w, blocked(cl, fs, &v));
	jw_obj_end(w);
	jw_key(w, "pending_records");
	jw_uint(w, cs.records);
	jw_key(w, "pending_bytes");
	jw_uint(w, cs.bytes);
	jw_key(w, "oldest_age_ms");
	jw_int(w, age_ms(&cs));
}

void kml_status_text(struct client *cl, struct fset *fs, struct jw *w)
{
	struct kjournal *j = &fs->j;
	struct vol *v = vol_by_name(cl, fs->volume);
	struct cml_stats cs;

	pending_of(cl, fs, &cs);
	jw_printf(w, "  permit: presto %s, lento %s%s; journal consumed %"
		  PRIu64 " of %" PRIu64 " durable (acknowledged %" PRIu64
		  ")\n", j->presto_permit ? "holds it" : "does not hold it",
		  v && v->permit ? "holds it" : connected(cl) ?
		  "does not hold it" : "disconnected (a local permit)",
		  j->revoke_req ? ", being given back" : "", j->pos, j->durable,
		  j->acked);
	jw_printf(w, "  pending in the CML: %" PRIu64 " records, %" PRIu64
		  " bytes, oldest %" PRId64 " ms old\n", cs.records, cs.bytes,
		  age_ms(&cs));
	if (j->log_err)
		jw_printf(w, "  JOURNAL: presto could not make it durable when "
			  "it gave the permit back: %s\n",
			  strerror(-j->log_err));
	if (j->held_said)
		jw_printf(w, "  PERMIT HELD: not given back while the journal "
			  "is broken (its changes would be lost)\n");
	if (j->err[0])
		jw_printf(w, "  JOURNAL: %s\n", j->err);
	else if (fset_live(fs) && *blocked(cl, fs, &v))
		jw_printf(w, "  journal not consumed: %s\n",
			  blocked(cl, fs, &v));
	quarantine_text(cl, fs, w);
	if (j->ka_ready && j->ka.unmapped)
		jw_printf(w, "  %" PRIu64 " journal records about objects "
			  "lento did not know were not logged (the last: %s)\n",
			  j->ka.unmapped, j->ka.why);
}
