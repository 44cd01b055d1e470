// SPDX-License-Identifier: MIT
/*
 * lento's client (client.h): the daemon's frame -- its volumes, the
 * connection's handshake and what a new connection means, the server's
 * pushes, write-back permits and their leases, ops (control requests that
 * wait), the tick, and the status commands.
 *
 * A new connection. The server forgets a client's callbacks when its
 * connection goes, so after any reconnection -- a new epoch or not --
 * nothing cached is trusted until its volume is validated again
 * (VOLUME_VALIDATE, then VALIDATE of its objects if the stamp moved).
 * That is done lazily, at the first use of each volume: doing it at once
 * would make the server revoke other clients' permits for nothing. A new
 * epoch also means the server lost every permit.
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client_int.h"
#include "client_kernel.h"
#include "cml.h"
#include "log.h"
#include "worker.h"
#include "vv.h"

int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool connected(const struct client *cl)
{
	return conn_state(cl->conn) == CONN_READY;
}

/* ------------------------------------------------------------- volumes */

struct vol *vol_by_id(struct client *cl, uint32_t id)
{
	struct vol *v;

	for (v = cl->vols; v; v = v->next)
		if (v->cv.id == id)
			return v;
	return NULL;
}

struct vol *vol_by_name(struct client *cl, const char *name)
{
	struct vol *v;

	for (v = cl->vols; v; v = v->next)
		if (!strcmp(v->cv.name, name))
			return v;
	return NULL;
}

int vol_add(struct client *cl, const struct cache_vol *cv, struct vol **out)
{
	struct vol *v = vol_by_id(cl, cv->id), **pp;

	if (!v) {
		v = calloc(1, sizeof(*v));
		if (!v)
			return -ENOMEM;
		v->cl = cl;
		v->log_changed = true;	/* whatever the log holds */
		/* In id order, for status. */
		for (pp = &cl->vols; *pp && (*pp)->cv.id < cv->id;
		     pp = &(*pp)->next)
			;
		v->next = *pp;
		*pp = v;
	}
	v->cv = *cv;
	if (out)
		*out = v;
	return 0;
}

static int load_vol(void *arg, const struct cache_vol *cv)
{
	return vol_add(arg, cv, NULL);
}

/* ----------------------------------------------------------------- LRU */

void client_touches_flush(struct client *cl)
{
	int64_t now;
	int err;

	/* Every tick: the wall clock is a system call in some VMs. */
	if (!cl->ntouched)
		return;
	now = wall_ms();
	err = cache_begin(cl->cache);
	for (int i = 0; !err && i < cl->ntouched; i++)
		err = cache_obj_touch(cl->cache, &cl->touched[i], now);
	/* A crash may lose them: the order of the LRU only. */
	err = err ?: cache_commit_lazy(cl->cache);
	if (err) {
		cache_rollback(cl->cache);
		log_warn("recording uses for the LRU: %s", strerror(-err));
	}
	cl->ntouched = 0;
}

void client_touch(struct client *cl, const struct lento_fid *fid)
{
	if (cl->ntouched && lento_fid_eq(&cl->touched[cl->ntouched - 1], fid))
		return;
	if (cl->ntouched == TOUCH_MAX)
		client_touches_flush(cl);
	cl->touched[cl->ntouched++] = *fid;
}

/* ---------------------------------------------------------- durability */

/* A sync ended (its result in the cache): say what it made durable. */
static void synced(struct client *cl)
{
	int err = cache_sync_error(cl->cache);

	if (err)
		log_err("the cache's database cannot be made durable: %s; "
			"nothing more is acknowledged to presto nor sent to "
			"the server until lento is restarted", strerror(-err));
	kml_synced(cl);
	reint_durable(cl);
}

static void sync_done(void *arg, int res)
{
	struct client *cl = arg;

	cl->syncing = false;
	/* lento stops: closing the database syncs it. */
	if (res == -ECANCELED)
		return;
	cache_synced(cl->cache, cl->sync_gen, res);
	synced(cl);
	/* Asked for while it ran: what was committed since goes now. */
	if (cl->sync_again) {
		cl->sync_again = false;
		client_sync_want(cl);
	}
}

void client_sync_want(struct client *cl)
{
	if (cl->syncing) {
		cl->sync_again = true;
		return;
	}
	if (cache_sync_error(cl->cache) ||
	    cache_durable_gen(cl->cache) >= cache_gen(cl->cache))
		return;
	cl->sync_gen = cache_gen(cl->cache);
	kml_sync_started(cl);
	if (!lo_file_fsync(cl->loop, cache_sync_fd(cl->cache), sync_done,
			   cl)) {
		cl->syncing = true;
		return;
	}
	/* Not on the ring (it is full): here, holding the loop. */
	cache_sync(cl->cache);
	synced(cl);
}

/* ----------------------------------------------------------------- ops */

static void op_free(struct op *op)
{
	op_body_drop(op);
	for (int i = 0; i < op->argc; i++)
		free(op->argv[i]);
	free(op->argv);
	free(op);
}

static void op_unlink(struct client *cl, struct op *op)
{
	struct op **pp;

	for (pp = &cl->ops; *pp; pp = &(*pp)->next)
		if (*pp == op) {
			*pp = op->next;
			return;
		}
}

/* Run @op's step once more: finished, it answers and goes. */
static void op_rerun(struct op *op)
{
	struct client *cl = op->cl;
	int rc;

	op->wait_job = 0;
	op->wait_vol = 0;
	op->wait_reint = false;
	op->wait_body = false;
	if (++op->steps > OP_STEPS_MAX) {
		ctl_error(op->r, "gave up after %d attempts: what it needs "
			  "keeps changing at the server", OP_STEPS_MAX);
		rc = -EAGAIN;
	} else {
		rc = op->step(op);
	}
	if (rc == OP_WAIT)
		return;
	op_unlink(cl, op);
	ctl_reply(op->r, rc);
	op_free(op);
}

/*
 * The asker's supplementary groups into @op, as its records carry them:
 * none when the control socket cannot tell them. 0 or -errno.
 */
static int op_groups(struct op *op, const struct ctl_req *r)
{
	gid_t g[LENTO_GROUPS_MAX];
	int n = ctl_peer_groups(r, g, LENTO_GROUPS_MAX);

	if (n == -ENOTSOCK || n == -ENOPROTOOPT || n == -ENODATA)
		n = 0;
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		uint32_t le = htole32((uint32_t)g[i]);

		memcpy(op->groups + 4 * i, &le, 4);
	}
	op->ngroups = (uint16_t)n;
	return 0;
}

int op_start(struct client *cl, struct ctl_req *r, int argc, char **argv,
	     int (*step)(struct op *op))
{
	struct op *op = calloc(1, sizeof(*op));
	int rc;

	if (!op || !(op->argv = calloc(argc + 1, sizeof(char *)))) {
		free(op);
		return -ENOMEM;
	}
	for (; op->argc < argc; op->argc++) {
		op->argv[op->argc] = strdup(argv[op->argc]);
		if (!op->argv[op->argc]) {
			op_free(op);
			return -ENOMEM;
		}
	}
	op->cl = cl;
	op->r = r;
	op->step = step;
	op->started_ms = wall_ms();
	if (ctl_peer(r, &op->uid, &op->gid)) {
		op->uid = geteuid();
		op->gid = getegid();
	}
	rc = op_groups(op, r);
	if (rc) {
		op_free(op);
		return rc;
	}
	op->steps = 1;
	rc = step(op);
	if (rc != OP_WAIT) {
		op_free(op);
		return rc;
	}
	op->next = cl->ops;
	cl->ops = op;
	return CTL_LATER;
}

/*
 * Rerun every parked op @match picks, each once: a rerun may park again,
 * finish, or start ops of its own, so the walk starts over after each.
 */
static void op_wake(struct client *cl, bool (*match)(const struct op *op,
						      const void *key),
		    const void *key)
{
	static uint64_t generation;
	uint64_t gen = ++generation;
	struct op *op;

again:
	for (op = cl->ops; op; op = op->next) {
		if (op->woken == gen || !match(op, key))
			continue;
		op->woken = gen;
		op_rerun(op);
		goto again;
	}
}

static bool match_job(const struct op *op, const void *key)
{
	return op->wait_job && op->wait_job == *(const uint64_t *)key;
}

static bool match_vol(const struct op *op, const void *key)
{
	return op->wait_vol && op->wait_vol == *(const uint32_t *)key;
}

static bool match_reint(const struct op *op, const void *key)
{
	(void)key;
	return op->wait_reint;
}

void op_wake_job(struct client *cl, struct job *j)
{
	struct op **pp = &cl->ops, *op;

	/*
	 * A lost connection is not the op's failure: run again, it finds
	 * that out (a miss fails, a change is logged under a local permit).
	 */
	if (j->err && j->err != -ENOTCONN) {
		while ((op = *pp)) {
			if (op->wait_job != j->id) {
				pp = &op->next;
				continue;
			}
			*pp = op->next;
			ctl_error(op->r, "%s", j->msg[0] ? j->msg :
				  strerror(-j->err));
			ctl_reply(op->r, j->err);
			op_free(op);
		}
		return;
	}
	op_wake(cl, match_job, &j->id);
}

void op_wake_volume(struct client *cl, uint32_t volume)
{
	op_wake(cl, match_vol, &volume);
	kclient_volume_woken(cl, volume);
}

void op_wake_reint(struct client *cl)
{
	op_wake(cl, match_reint, NULL);
}

static bool match_body(const struct op *op, const void *key)
{
	return op == key && op->wait_body;
}

void op_wake_body(struct client *cl, struct op *op)
{
	op_wake(cl, match_body, op);
}

/* Ops whose lentoctl gave up (its --timeout) go. */
static void ops_reap(struct client *cl)
{
	struct op **pp = &cl->ops, *op;

	while ((op = *pp)) {
		if (!ctl_gone(op->r)) {
			pp = &op->next;
			continue;
		}
		*pp = op->next;
		ctl_reply(op->r, -ECANCELED);
		op_free(op);
	}
}

static void ops_free(struct client *cl)
{
	while (cl->ops) {
		struct op *op = cl->ops;

		cl->ops = op->next;
		ctl_error(op->r, "lento is stopping");
		ctl_reply(op->r, -ECANCELED);
		op_free(op);
	}
}

/* ------------------------------------------------------------- permits */

void permit_lost(struct client *cl, struct vol *v, const char *why)
{
	if (v->permit)
		log_info("volume %s: permit lost: %s", v->cv.name, why);
	kclient_permit_lost(cl, v);
	v->permit = false;
	v->revoked = false;
	v->renewing = false;
	op_wake_volume(cl, v->cv.id);
}

static int renew_reply(void *arg, const struct lp_frame *f, int err,
		       const char **why)
{
	struct vol *v = arg;
	struct lp_permit m;
	struct lp_error e;

	v->renewing = false;
	if (err)
		return 0;	/* the connection went */
	if (f->type == LP_ERROR) {
		if (lp_decode_error(f, &e, why))
			return -EBADMSG;
		permit_lost(v->cl, v, "the server refused to renew it");
		return 0;
	}
	if (f->type != LP_PERMIT_REPLY) {
		*why = "a PERMIT_RENEW answered by something else";
		return -EBADMSG;
	}
	if (lp_decode_permit_reply(f, &m, why))
		return -EBADMSG;
	if (!v->permit || m.volume != v->cv.id)
		return 0;
	/* Counted from when it was asked: the lease began before. */
	v->lease_ms = m.lease_ms;
	v->expires_ms = lease_end(v->renew_sent_ms, m.lease_ms);
	v->renew_at_ms = v->renew_sent_ms + m.lease_ms / 2;
	return 0;
}

uint64_t lease_end(uint64_t asked_ms, uint32_t lease_ms)
{
	uint64_t slack = lo_clock_slack_ms();

	return asked_ms + (lease_ms > slack ? lease_ms - slack : 0);
}

static void permit_renew(struct client *cl, struct vol *v)
{
	struct conn *c = cl->conn;
	uint32_t tag = conn_tag(c);

	if (lp_encode_volume(conn_buf(c), LP_PERMIT_RENEW, tag, v->cv.id) ||
	    conn_request(c, tag, LP_PERMIT_RENEW, renew_reply, v))
		return;
	v->renewing = true;
	v->renew_sent_ms = lo_now_ms();
	/* If the answer never comes, the lease says when it is over. */
	v->renew_at_ms = v->expires_ms;
}

/* Leases, renewals and giving back idle permits; once per tick. */
static void permits_tick(struct client *cl, uint64_t now)
{
	struct vol *v;

	for (v = cl->vols; v; v = v->next) {
		struct cml_stats cs;

		if (!v->permit)
			continue;
		/*
		 * The server keeps the lease while this client's batch comes
		 * (a slow line may take longer than a lease to carry it):
		 * the answer says whether it still held when applied.
		 */
		if (now >= v->expires_ms && !reint_sending(cl, v->cv.id)) {
			permit_lost(cl, v, "its lease ran out");
			continue;
		}
		if (!connected(cl))
			continue;
		if (!v->renewing && now >= v->renew_at_ms)
			permit_renew(cl, v);
		/*
		 * Changes logged during this tick are later than @now.
		 * presto's permit drained before the log is counted: draining
		 * consumes its journal, which may add records (kick_volume's
		 * order too).
		 */
		if (v->releasing || v->acquiring ||
		    now < v->last_change_ms + PERMIT_IDLE_MS ||
		    !kclient_permit_drained(cl, v) ||
		    cml_stats(cache_cml(cl->cache), v->cv.id, &cs) ||
		    cs.records)
			continue;
		log_info("volume %s: permit unused for %d s: giving it back",
			 v->cv.name, PERMIT_IDLE_MS / 1000);
		job_start(cl, J_RELEASE, v->cv.id, NULL, NULL, NULL);
	}
}

/* When permits_tick() next has something to do. */
static uint64_t permits_due_ms(struct client *cl)
{
	uint64_t due = UINT64_MAX;

	for (struct vol *v = cl->vols; v; v = v->next) {
		if (!v->permit)
			continue;
		due = earlier_ms(due, v->expires_ms);
		if (!connected(cl))
			continue;
		if (!v->renewing)
			due = earlier_ms(due, v->renew_at_ms);
		if (!v->releasing && !v->acquiring)
			due = earlier_ms(due, v->last_change_ms +
					 PERMIT_IDLE_MS);
	}
	return due;
}

/* -------------------------------------------------------- connection */

static void on_hello(void *arg, struct lp_hello *m)
{
	struct client *cl = arg;

	m->client = cl->id_assigned ? cl->client_id : 0;
	memcpy(m->uuid, cl->uuid, sizeof(m->uuid));
}

/* The id the server gave a new client becomes the one its fids carry. */
static int adopt_client_id(struct client *cl, uint32_t id)
{
	int err;

	if (cl->id_assigned) {
		if (id == cl->client_id)
			return 0;
		log_err("the server calls this client %" PRIu32 ", not %"
			PRIu32 ": refusing it", id, cl->client_id);
		return -EPROTO;
	}
	err = cml_set_client(cache_cml(cl->cache), id);
	if (!err)
		err = cache_meta_set(cl->cache, "client_assigned", 1);
	if (err) {
		log_err("cannot take the client id %" PRIu32 " the server "
			"assigned: %s", id, strerror(-err));
		return err;
	}
	cl->client_id = id;
	cl->id_assigned = true;
	log_info("the server assigned this client the id %" PRIu32, id);
	return 0;
}

static int on_up(void *arg, const struct lp_hello_reply *r)
{
	struct client *cl = arg;
	bool new_epoch = cl->epoch_known && r->epoch != cl->epoch;
	struct vol *v;
	int err = adopt_client_id(cl, r->client);

	if (err)
		return err;
	log_info("connected to %s: client %" PRIu32 ", epoch %" PRIu64
		 ", heartbeat %" PRIu32 " ms%s", conn_addr(cl->conn),
		 r->client, r->epoch, r->heartbeat_ms,
		 new_epoch ? " (a new epoch: the server restarted; every "
		 "callback and permit is gone)" : "");
	cl->epoch = r->epoch;
	cl->epoch_known = true;
	cache_meta_set(cl->cache, "epoch", (int64_t)r->epoch);
	for (v = cl->vols; v; v = v->next) {
		v->validated = false;
		if (new_epoch && v->permit)
			permit_lost(cl, v, "the server restarted");
		v->acquiring = v->renewing = v->releasing = false;
	}
	client_lookup_configured(cl);
	kclient_conn_up(cl);
	reint_kick(cl);
	/* Syncs that waited for the connection look again. */
	op_wake_reint(cl);
	return 0;
}

static void on_down(void *arg, int err, const char *why)
{
	struct client *cl = arg;
	struct vol *v;

	(void)err;
	(void)why;
	for (v = cl->vols; v; v = v->next) {
		v->validated = false;
		v->acquiring = v->renewing = v->releasing = false;
	}
	/*
	 * What a reply applied from now on says (a listing's later steps)
	 * is not promised any more: no BREAK would follow it.
	 */
	jobs_conn_lost(cl);
	reint_conn_down(cl);
	/* Syncs learn that they cannot finish now. */
	op_wake_reint(cl);
}

static int on_push(void *arg, const struct lp_frame *f, const char **why)
{
	struct client *cl = arg;
	struct lento_fid fid;
	struct cache_obj o;
	uint32_t volume;
	struct vol *v;

	if (f->type == LP_BREAK) {
		if (lp_decode_fid(f, &fid, why))
			return -EBADMSG;
		cl->st.breaks++;
		jobs_break_fid(cl, &fid);
		/* Not in the cache (any more) is fine: nothing to break. */
		if (!cache_obj_get(cl->cache, &fid, &o, NULL, 0) && o.valid)
			cache_obj_set_state(cl->cache, &fid, false, o.data);
		/* And presto's flags of it, in the xattr and in memory. */
		kclient_break_fid(cl, &fid);
		log_debug("break of %08" PRIx32 "-%08" PRIx32 "-%016" PRIx64,
			  fid.volume, fid.client, fid.seq);
		return 0;
	}
	if (lp_decode_volume(f, &volume, why))
		return -EBADMSG;
	v = vol_by_id(cl, volume);
	if (!v)
		return 0;
	if (f->type == LP_BREAK_VOLUME) {
		/* No per-object break comes after this one: revalidate. */
		v->validated = false;
		cl->st.volume_breaks++;
		jobs_break_volume(cl, volume);
		kclient_break_volume(cl, v);
		log_debug("volume %s: every callback broken", v->cv.name);
		return 0;
	}
	/* PERMIT_REVOKE */
	log_info("volume %s: the server wants the permit back: "
		 "reintegrating, then releasing it", v->cv.name);
	v->revoked = true;
	v->force = true;
	reint_kick(cl);
	return 0;
}

static void on_sent(void *arg)
{
	reint_sent(arg);
}

/*
 * Bodies' chunks fill memory faster than the disk takes them. A true
 * answer holds the input until conn_resume(): counted, for lentoctl.
 */
static bool on_busy(void *arg)
{
	struct client *cl = arg;

	if (cl->fetch_mem < cl->fetch_mem_max)
		return false;
	cl->st.fetch_holds++;
	return true;
}

static const struct conn_ops conn_ops = {
	.hello = on_hello, .up = on_up, .down = on_down, .push = on_push,
	.sent = on_sent, .busy = on_busy,
};

/* ---------------------------------------------------------- ctl: info */

/* A member and its value, in one call: status has many. */
static void kv_uint(struct jw *w, const char *key, uint64_t v)
{
	jw_key(w, key);
	jw_uint(w, v);
}

static void kv_bool(struct jw *w, const char *key, bool v)
{
	jw_key(w, key);
	jw_bool(w, v);
}

static void kv_str(struct jw *w, const char *key, const char *v)
{
	jw_key(w, key);
	jw_str(w, v);
}

/* The last reintegration and, if it was one, its conflict. */
static void last_json(struct jw *w, const struct reint_result *l)
{
	char buf[160];

	jw_key(w, "last_reintegration");
	if (!l->when_ms) {
		jw_null(w);
	} else {
		jw_obj_begin(w);
		jw_key(w, "ago_ms");
		jw_int(w, wall_ms() - l->when_ms);
		kv_str(w, "result", l->code ? lp_err_name(l->code) : "ok");
		kv_uint(w, "records", l->records);
		kv_str(w, "message", l->msg);
		jw_obj_end(w);
	}
	jw_key(w, "conflict");
	if (l->code != LP_ECONFLICT) {
		jw_null(w);
		return;
	}
	jw_obj_begin(w);
	kv_uint(w, "recno", l->recno);
	kv_uint(w, "op", l->op);
	snprintf(buf, sizeof(buf), "%08" PRIx32 "-%08" PRIx32 "-%016" PRIx64,
		 l->fid.volume, l->fid.client, l->fid.seq);
	kv_str(w, "fid", buf);
	lento_vv_format(&l->base, buf, sizeof(buf));
	kv_str(w, "base", buf);
	lento_vv_format(&l->current, buf, sizeof(buf));
	kv_str(w, "current", buf);
	jw_obj_end(w);
}

static void vol_status_json(struct jw *w, struct vol *v,
			    const struct cml_stats *cs, uint64_t now)
{
	jw_obj_begin(w);
	kv_str(w, "name", v->cv.name);
	kv_uint(w, "id", v->cv.id);
	kv_bool(w, "validated", v->validated);
	kv_bool(w, "unknown_at_server", v->unknown);
	kv_uint(w, "stamp", v->cv.stamp);
	kv_bool(w, "permit", v->permit);
	kv_uint(w, "lease_left_ms", v->permit && v->expires_ms > now ?
		v->expires_ms - now : 0);
	kv_bool(w, "revoked", v->revoked);
	kv_uint(w, "pending_records", cs->records);
	kv_uint(w, "pending_bytes", cs->bytes);
	kv_uint(w, "shipped_unacknowledged", cs->shipped);
	jw_key(w, "oldest_age_ms");
	jw_int(w, cs->records && cs->oldest_ns ?
	       wall_ms() - cs->oldest_ns / 1000000 : 0);
	kv_uint(w, "applied", v->cv.applied);
	kv_bool(w, "stuck", v->stuck);
	kv_uint(w, "rounds", v->rounds);
	kv_uint(w, "records_applied", v->shipped);
	last_json(w, &v->last);
	jw_obj_end(w);
}

static void vol_status_text(struct jw *w, struct vol *v,
			    const struct cml_stats *cs, uint64_t now)
{
	int64_t wnow = wall_ms();

	jw_printf(w, "volume %s (id %" PRIu32 ")%s%s\n", v->cv.name, v->cv.id,
		  v->validated ? "" : ", not validated",
		  v->unknown ? ", UNKNOWN at the server" : "");
	if (v->permit)
		jw_printf(w, "  permit held, lease %" PRIu64 " ms left%s\n",
			  v->expires_ms > now ? v->expires_ms - now : 0,
			  v->revoked ? ", revoked" : "");
	else
		jw_printf(w, "  no permit\n");
	jw_printf(w, "  pending: %" PRIu64 " records, %" PRIu64 " bytes",
		  cs->records, cs->bytes);
	if (cs->records)
		jw_printf(w, ", oldest %" PRId64 " ms old",
			  wnow - cs->oldest_ns / 1000000);
	if (cs->shipped)
		jw_printf(w, ", %" PRIu64 " sent and not acknowledged",
			  cs->shipped);
	jw_printf(w, "\n");
	if (v->last.when_ms)
		jw_printf(w, "  last reintegration %" PRId64 " ms ago: %s%s%s\n",
			  wnow - v->last.when_ms,
			  v->last.code ? lp_err_name(v->last.code) : "ok",
			  v->last.msg[0] ? ": " : "", v->last.msg);
	if (v->stuck)
		jw_printf(w, "  STUCK: the changes stay here until a person "
			  "resolves them (then: lentoctl reintegrate %s)\n",
			  v->cv.name);
}

static int status_write(struct client *cl, struct ctl_req *r)
{
	struct jw *w = ctl_out(r);
	uint64_t now = lo_now_ms();
	enum conn_state s = conn_state(cl->conn);
	struct vol *v;

	if (ctl_json(r)) {
		jw_obj_begin(w);
		kv_str(w, "role", "client");
		kv_str(w, "cache", cl->opt->cache);
		kv_str(w, "server", conn_addr(cl->conn));
		kv_str(w, "state", conn_state_name(s));
		kv_uint(w, "client_id", cl->id_assigned ? cl->client_id : 0);
		kv_uint(w, "epoch", cl->epoch);
		kv_str(w, "last_error", conn_last_error(cl->conn));
		kv_uint(w, "retry_in_ms", s == CONN_IDLE &&
			conn_retry_at(cl->conn) > now ?
			conn_retry_at(cl->conn) - now : 0);
		kv_bool(w, "cache_full_of_dirty", cl->full_of_dirty);
		kclient_status_json(cl, w);
		jw_key(w, "volumes");
		jw_arr_begin(w);
	} else {
		jw_printf(w, "lento client, cache %s\nserver %s: %s%s%s\n",
			  cl->opt->cache, conn_addr(cl->conn),
			  conn_state_name(s), s != CONN_READY &&
			  conn_last_error(cl->conn)[0] ? ": " : "",
			  s != CONN_READY ? conn_last_error(cl->conn) : "");
		jw_printf(w, "client %" PRIu32 ", epoch %" PRIu64 "\n",
			  cl->id_assigned ? cl->client_id : 0, cl->epoch);
		if (cl->full_of_dirty)
			jw_printf(w, "CACHE FULL of changes not yet "
				  "reintegrated\n");
		kclient_status_text(cl, w);
	}
	for (v = cl->vols; v; v = v->next) {
		struct cml_stats cs;
		int e = cml_stats(cache_cml(cl->cache), v->cv.id, &cs);

		if (e) {
			ctl_error(r, "volume %s: %s", v->cv.name, strerror(-e));
			return e;
		}
		if (ctl_json(r))
			vol_status_json(w, v, &cs, now);
		else
			vol_status_text(w, v, &cs, now);
	}
	if (ctl_json(r)) {
		jw_arr_end(w);
		jw_obj_end(w);
		jw_raw(w, "\n", 1);
	}
	return 0;
}

/* presto's counters are in: the status goes out. */
static void status_later(struct client *cl, struct ctl_req *r)
{
	ctl_reply(r, status_write(cl, r));
}

static int cmd_status(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	struct client *cl = ctx;

	(void)argc;
	(void)argv;
	/* With filesets: presto's counters first (an ack away). */
	if (kclient_stats_refresh(cl, r, status_later))
		return CTL_LATER;
	return status_write(cl, r);
}

static int cmd_volumes(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	struct client *cl = ctx;
	struct jw *w = ctl_out(r);
	struct vol *v;

	(void)argc;
	(void)argv;
	if (ctl_json(r))
		jw_arr_begin(w);
	for (v = cl->vols; v; v = v->next) {
		if (!ctl_json(r)) {
			jw_printf(w, "%-6" PRIu32 " %-24s stamp %-10" PRIu64
				  " %s\n", v->cv.id, v->cv.name, v->cv.stamp,
				  v->validated ? "validated" : "not validated");
			continue;
		}
		jw_obj_begin(w);
		kv_uint(w, "id", v->cv.id);
		kv_str(w, "name", v->cv.name);
		kv_uint(w, "stamp", v->cv.stamp);
		kv_bool(w, "validated", v->validated);
		jw_obj_end(w);
	}
	if (ctl_json(r)) {
		jw_arr_end(w);
		jw_raw(w, "\n", 1);
	}
	return 0;
}

static int cmd_cache(struct ctl_req *r, void *ctx, int argc, char **argv)
{
	struct client *cl = ctx;
	struct jw *w = ctl_out(r);
	struct cache_stats cs;
	int e = cache_stats(cl->cache, &cs);

	(void)argc;
	(void)argv;
	if (e) {
		ctl_error(r, "cache statistics: %s", strerror(-e));
		return e;
	}
	if (!ctl_json(r)) {
		jw_printf(w, "objects %" PRIu64 ", files cached %" PRIu64
			  ", %" PRIu64 " of %" PRIu64 " bytes\n"
			  "dirty %" PRIu64 " objects, %" PRIu64 " bytes%s\n"
			  "hits %" PRIu64 ", misses %" PRIu64 ", fetches %"
			  PRIu64 " (%" PRIu64 " bytes), listings %" PRIu64
			  ", evictions %" PRIu64 ", xattrs skipped %" PRIu64
			  "\nbodies in memory at most %" PRIu64 " bytes, the "
			  "server's input held %" PRIu64 " times for them\n",
			  cs.objects,
			  cs.files_cached, cs.bytes, cl->cache_size, cs.dirty,
			  cs.dirty_bytes, cl->full_of_dirty ?
			  " (FULL of dirty objects)" : "", cl->st.hits,
			  cl->st.misses, cl->st.fetches, cl->st.fetched_bytes,
			  cl->st.listings, cl->st.evictions,
			  cl->st.xattrs_skipped, cl->st.fetch_mem_peak,
			  cl->st.fetch_holds);
		jw_printf(w, "database: %" PRIu64 " commits, %" PRIu64
			  " durable%s%s\n", cache_gen(cl->cache),
			  cache_durable_gen(cl->cache),
			  cache_sync_error(cl->cache) ? "; cannot sync: " : "",
			  cache_sync_error(cl->cache) ?
			  strerror(-cache_sync_error(cl->cache)) : "");
		return 0;
	}
	jw_obj_begin(w);
	kv_uint(w, "objects", cs.objects);
	kv_uint(w, "files_cached", cs.files_cached);
	kv_uint(w, "bytes", cs.bytes);
	kv_uint(w, "limit", cl->cache_size);
	kv_uint(w, "dirty", cs.dirty);
	kv_uint(w, "dirty_bytes", cs.dirty_bytes);
	kv_bool(w, "full_of_dirty", cl->full_of_dirty);
	kv_uint(w, "hits", cl->st.hits);
	kv_uint(w, "misses", cl->st.misses);
	kv_uint(w, "fetches", cl->st.fetches);
	kv_uint(w, "fetched_bytes", cl->st.fetched_bytes);
	kv_uint(w, "listings", cl->st.listings);
	kv_uint(w, "listing_steps", cl->st.listing_steps);
	kv_uint(w, "breaks", cl->st.breaks);
	kv_uint(w, "volume_breaks", cl->st.volume_breaks);
	kv_uint(w, "evictions", cl->st.evictions);
	kv_uint(w, "xattrs_skipped", cl->st.xattrs_skipped);
	kv_uint(w, "size_counts", cl->st.size_counts);
	kv_uint(w, "fetch_mem_peak", cl->st.fetch_mem_peak);
	kv_uint(w, "fetch_holds", cl->st.fetch_holds);
	/* The database's transactions since start, and how many are durable. */
	kv_uint(w, "commits", cache_gen(cl->cache));
	kv_uint(w, "commits_durable", cache_durable_gen(cl->cache));
	if (cache_sync_error(cl->cache))
		kv_str(w, "sync_error", strerror(-cache_sync_error(cl->cache)));
	jw_obj_end(w);
	jw_raw(w, "\n", 1);
	return 0;
}

static const struct ctl_cmd client_cmds[] = {
	{ "status", NULL, "connection, volumes, permits, pending work",
	  0, 0, cmd_status },
	{ "volumes", NULL, "the volumes this cache knows", 0, 0, cmd_volumes },
	{ "cache", NULL, "cache statistics", 0, 0, cmd_cache },
	{ "reintegrate", "[VOLUME]", "ship pending changes now (and retry "
	  "refused ones)", 0, 1, cmd_reintegrate },
	{ "sync", "[VOLUME]", "return once nothing is pending (or say why "
	  "not)", 0, 1, cmd_sync },
	{ "resolve", "VOLUME local|server|both", "settle the volume's "
	  "conflict: keep this client's version, the server's, or both", 2,
	  2, cmd_resolve },
	{ "quarantine", "[VOLUME]", "journal records set aside, and the files "
	  "kept for them", 0, 1, cmd_quarantine },
	{ "quarantine-drop", "VOLUME SEQ", "forget a record set aside (dealt "
	  "with): its row and its kept files", 2, 2, cmd_quarantine_drop },
	{ "ls", "PATH", "list a directory (VOLUME/path)", 1, 1, cmd_ls },
	{ "cat", "PATH", "a file's content, fetched if need be", 1, 1,
	  cmd_cat },
	{ "stat", "PATH", "an object's status and cache state", 1, 1,
	  cmd_stat },
	{ "mkdir", "PATH...", "make directories", 1, CTL_ARGS_MAX, cmd_mkdir },
	{ "create", "PATH...", "make empty files", 1, CTL_ARGS_MAX,
	  cmd_create },
	{ "write", "PATH TEXT|@FILE", "replace a file's content (made if "
	  "missing)", 2, 2, cmd_write },
	{ "setattr", "PATH ATTR=VALUE...", "mode= uid= gid= size= atime= "
	  "mtime=", 2, 7, cmd_setattr },
	{ "unlink", "PATH...", "remove files", 1, CTL_ARGS_MAX, cmd_unlink },
	{ "rmdir", "PATH...", "remove empty directories", 1, CTL_ARGS_MAX,
	  cmd_rmdir },
	{ "rename", "FROM TO", "rename (replacing TO)", 2, 2, cmd_rename },
	{ "symlink", "PATH TARGET", "make a symlink", 2, 2, cmd_symlink },
	{ "link", "EXISTING NEW", "make a hard link", 2, 2, cmd_link },
	{ "setxattr", "PATH NAME VALUE", "set an extended attribute", 3, 3,
	  cmd_setxattr },
	{ "removexattr", "PATH NAME", "remove an extended attribute", 2, 2,
	  cmd_removexattr },
	{ 0 }
};

/* ---------------------------------------------------------------- main */

/*
 * Which step of a tick holds the loop (log_stall() says only "timer"):
 * reports the time since @t0, the tick's start, once it is long.
 */
static void tick_took(const char *step, uint64_t t0)
{
	uint64_t took = lo_now_ms() - t0;

	if (took >= LOG_STALL_MS)
		log_warn("tick: %" PRIu64 " ms by the end of %s", took, step);
}

/*
 * When the tick next has something to do: @now while anything is under
 * way (its steps run from the tick, or wait on it), else the earliest
 * time one of its parts keeps.
 */
static uint64_t client_due_ms(struct client *cl, uint64_t now)
{
	uint64_t due = cl->evict_check_ms;

	if (cl->stop_signal || cl->ntouched || cl->ops || cl->jobs ||
	    cl->batch || cl->syncing || cl->reint_waits)
		return now;
	due = earlier_ms(due, conn_due_ms(cl->conn, now));
	due = earlier_ms(due, kclient_due_ms(cl, now));
	return earlier_ms(due, permits_due_ms(cl));
}

static void tick(struct lo_loop *loop, void *arg);

/*
 * Nothing to do for a while: the next tick comes later, unless woken.
 * The gap counts from the tick's end, and one lag of the coarse clock
 * more, so that the tick lands after the time, not just before it.
 */
static void tick_plan(struct client *cl, uint64_t now)
{
	uint64_t due = client_due_ms(cl, now);
	uint64_t end = lo_now_ms();
	uint64_t gap = due > end ? due - end + lo_clock_slack_ms() : 0;

	if (gap > CLIENT_IDLE_TICK_MS)
		gap = CLIENT_IDLE_TICK_MS;
	if (gap <= CLIENT_TICK_MS)
		return;
	conn_plan(cl->conn, end + gap);
	lo_timer_idle(cl->loop, tick, cl, (unsigned int)gap);
}

static void tick(struct lo_loop *loop, void *arg)
{
	struct client *cl = arg;
	uint64_t now = lo_now_ms();
	int err;

	if (cl->stop_signal) {	/* the ops' answers had a tick to go */
		lo_stop(loop);
		return;
	}
	client_touches_flush(cl);
	tick_took("flushing touches", now);
	err = cache_checkpoint_error(cl->cache);
	if (err)
		log_warn("checkpointing the cache's database: %s; its WAL "
			 "grows until a checkpoint succeeds", strerror(-err));
	conn_tick(cl->conn, now);
	kclient_tick(cl, now);
	listings_journal_moved(cl, NULL);	/* bounded waits end */
	tick_took("the kernel's filesets", now);
	permits_tick(cl, now);
	reint_kick(cl);
	tick_took("reintegration", now);
	ops_reap(cl);
	if (now >= cl->evict_check_ms) {
		evict_check(cl, now);
		tick_took("eviction", now);
	}
	tick_plan(cl, now);
}

/* Stop at the next tick: the waiting requests are answered first. */
static void on_signal(struct lo_loop *loop, int signo, void *arg)
{
	struct client *cl = arg;

	(void)loop;
	cl->stop_signal = signo;
	ops_free(cl);
}

static int identity(struct client *cl)
{
	int64_t v = 0;
	int e = cml_ident(cache_cml(cl->cache), &cl->client_id, cl->uuid);

	if (e)
		return e;
	e = cache_meta_get(cl->cache, "client_assigned", &v);
	if (e && e != -ENOENT)
		return e;
	cl->id_assigned = v != 0;
	e = cache_meta_get(cl->cache, "epoch", &v);
	if (e && e != -ENOENT)
		return e;
	cl->epoch_known = !e;
	cl->epoch = (uint64_t)v;
	return 0;
}

static int client_start(struct client *cl, char *err, size_t errlen)
{
	const struct client_opts *o = cl->opt;
	char path[CACHE_PATH_MAX];
	int e;

	for (int i = 0; i < o->nvolumes; i++)
		if (!cache_volname_ok(o->volumes[i])) {
			snprintf(err, errlen, "--volume %s: not a name a cache "
				 "can keep a volume under", o->volumes[i]);
			return -EINVAL;
		}
	e = cache_open(o->cache, &cl->cache, err, errlen);
	if (e)
		return e;
	e = identity(cl);
	if (!e)
		e = cache_vol_list(cl->cache, load_vol, cl);
	if (e) {
		snprintf(err, errlen, "%s: %s", o->cache, strerror(-e));
		return e;
	}
	e = lo_loop_new(&cl->loop);
	if (e) {
		snprintf(err, errlen, "io_uring: %s", strerror(-e));
		return e;
	}
	e = wk_start(cl->loop, &cl->wk);
	if (e) {
		snprintf(err, errlen, "the worker thread: %s", strerror(-e));
		return e;
	}
	e = conn_new(cl->loop, o->server, &conn_ops, cl, &cl->conn);
	if (e) {
		snprintf(err, errlen, "server %s: %s", o->server, strerror(-e));
		return e;
	}
	snprintf(path, sizeof(path), "%s/.lento/control.sock", o->cache);
	cl->ctl.cmds = client_cmds;
	cl->ctl.ctx = cl;
	e = ctl_listen(cl->loop, o->control ? o->control : path, &cl->ctl,
		       err, errlen);
	if (!e)
		e = kclient_start(cl, err, errlen);
	if (!e)
		e = lo_timer(cl->loop, CLIENT_TICK_MS, tick, cl);
	lo_set_stall(cl->loop, LOG_STALL_MS, log_stall, NULL);
	if (!e)
		e = lo_signal(cl->loop, SIGTERM, on_signal, cl);
	if (!e)
		e = lo_signal(cl->loop, SIGINT, on_signal, cl);
	if (e && !err[0])
		snprintf(err, errlen, "%s", strerror(-e));
	return e;
}

static void client_free(struct client *cl)
{
	if (cl->cache)
		client_touches_flush(cl);
	ops_free(cl);
	kclient_free(cl);	/* before the cache: a status may be waiting */
	conn_free(cl->conn);	/* fails what is in flight */
	cl->conn = NULL;
	jobs_free(cl);
	/* After the connection: a batch's shadows, made or not, go too. */
	wk_stop(cl->wk);
	reint_conn_down(cl);
	lo_loop_free(cl->loop);	/* file I/O in flight is cancelled */
	jobs_free(cl);
	cache_close(cl->cache);
	lp_zd_free(&cl->zd);
	while (cl->vols) {
		struct vol *v = cl->vols;

		cl->vols = v->next;
		free(v);
	}
}

int client_main(const struct client_opts *o)
{
	struct client cl = { .opt = o };
	char err[512] = "";
	const char *crash = getenv("LENTO_TEST_CRASH_AFTER_SEND");
	int e;

	cl.age_ms = o->age_ms ? o->age_ms : CLIENT_AGE_MS;
	cl.watch_ms = o->watch_ms_set ? o->watch_ms : CLIENT_WATCH_MS;
	cl.cache_size = o->cache_size ? o->cache_size : CLIENT_CACHE_SIZE;
	cl.fetch_mem_max = o->fetch_memory ?: CLIENT_FETCH_MEMORY;
	cl.evict_changes = -1;
	/* A batch holds a descriptor for each body: a quarter at most. */
	cl.batch_records = (o->fds ? o->fds : 1024) / 4;
	if (cl.batch_records > BATCH_RECORDS_MAX)
		cl.batch_records = BATCH_RECORDS_MAX;
	if (cl.batch_records < BATCH_RECORDS_MIN)
		cl.batch_records = BATCH_RECORDS_MIN;
	cl.crash_after_send = crash && *crash && strcmp(crash, "0");
	e = client_start(&cl, err, sizeof(err));
	if (e) {
		log_err("cannot start: %s", err);
		client_free(&cl);
		return 1;
	}
	log_info("cache %s, server %s, client %" PRIu32 "%s, aging %" PRIu32
		 " ms, cache size %" PRIu64 " bytes", o->cache, o->server,
		 cl.client_id, cl.id_assigned ? "" : " (not yet assigned)",
		 cl.age_ms, cl.cache_size);
	if (cl.crash_after_send)
		log_warn("LENTO_TEST_CRASH_AFTER_SEND: this lento kills itself "
			 "when a batch is answered, before it records that");
	e = lo_run(cl.loop);
	if (e)
		log_err("event loop: %s", strerror(-e));
	else
		log_info("stopping (signal %d)", cl.stop_signal);
	client_free(&cl);
	return e ? 1 : 0;
}
