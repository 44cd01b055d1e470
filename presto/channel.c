// SPDX-License-Identifier: GPL-2.0
/*
 * The channel to lento: filesets, upcalls and what lento tells presto
 * (protocol/KERNEL.md). The netlink family they travel on is genl.c.
 *
 * A fileset is a name that a mount (fileset=) and a lento (REGISTER) meet
 * at, in either order: whichever comes first makes it, and it lives while
 * either holds it. It keeps the upcalls in flight. An upcall stays queued
 * until lento answers it, because a unicast to a full socket is dropped
 * and a lento may die: queued upcalls are sent again every
 * PRESTO_RESEND_DELAY and whenever a lento registers. Every waiter gives
 * up at its deadline (timeout=) or at a signal; an upcall nobody waits for
 * any more is forgotten if it was never sent, and otherwise kept until
 * lento answers it or goes, so that its answer still sets the flags.
 *
 * Locks: presto_filesets_lock (the list, and each fileset's refcount
 * reaching zero) is never held with a fileset's mutex. A fileset's mutex
 * covers its lento, its superblock, its upcalls and sending them; the
 * netlink unicast under it never sleeps (MSG_DONTWAIT).
 */
#include <linux/ctype.h>
#include <linux/kref.h>
#include <linux/rcupdate.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/wait.h>
#include <net/genetlink.h>
#include <net/sock.h>
#include "presto.h"

#define PRESTO_RESEND_DELAY	(HZ / 10)
/* Access hints: at most a message a second, a file once a minute. */
#define PRESTO_HINT_DELAY	HZ
#define PRESTO_HINT_EVERY	(60 * HZ)
#define PRESTO_HINTS_MAX	256
/* Moves of the log's durable point closer than this make one notice. */
#define PRESTO_KML_NOTIFY_DELAY	(HZ / 10)

enum {
	PRESTO_ST_UPCALLS, PRESTO_ST_FETCH_DIR, PRESTO_ST_FETCH_FILE,
	PRESTO_ST_FETCH_ATTR, PRESTO_ST_JOINED, PRESTO_ST_RESENT,
	PRESTO_ST_TIMEOUTS, PRESTO_ST_INTERRUPTED, PRESTO_ST_FAILED,
	PRESTO_ST_BREAKS, PRESTO_ST_PERMIT, PRESTO_ST_REVOKES, PRESTO_ST_NR
};

/* Each counter's attribute on the wire, and its name in mountstats. */
static const struct {
	u16 attr;
	const char *name;
} presto_stat_info[PRESTO_ST_NR] = {
	[PRESTO_ST_UPCALLS]	= { PRESTO_S_UPCALLS, "upcalls" },
	[PRESTO_ST_FETCH_DIR]	= { PRESTO_S_FETCH_DIR, "fetch_dir" },
	[PRESTO_ST_FETCH_FILE]	= { PRESTO_S_FETCH_FILE, "fetch_file" },
	[PRESTO_ST_FETCH_ATTR]	= { PRESTO_S_FETCH_ATTR, "fetch_attr" },
	[PRESTO_ST_JOINED]	= { PRESTO_S_JOINED, "joined" },
	[PRESTO_ST_RESENT]	= { PRESTO_S_RESENT, "resent" },
	[PRESTO_ST_TIMEOUTS]	= { PRESTO_S_TIMEOUTS, "timeouts" },
	[PRESTO_ST_INTERRUPTED]	= { PRESTO_S_INTERRUPTED, "interrupted" },
	[PRESTO_ST_FAILED]	= { PRESTO_S_FAILED, "failed" },
	[PRESTO_ST_BREAKS]	= { PRESTO_S_BREAKS, "breaks" },
	[PRESTO_ST_PERMIT]	= { PRESTO_S_PERMIT, "permit" },
	[PRESTO_ST_REVOKES]	= { PRESTO_S_REVOKES, "revokes" },
};

/* The counter of upcalls of each op. */
static const u8 presto_op_stat[] = {
	[PRESTO_OP_FETCH_DIR]	= PRESTO_ST_FETCH_DIR,
	[PRESTO_OP_FETCH_FILE]	= PRESTO_ST_FETCH_FILE,
	[PRESTO_OP_FETCH_ATTR]	= PRESTO_ST_FETCH_ATTR,
	[PRESTO_OP_PERMIT]	= PRESTO_ST_PERMIT,
};

struct presto_fileset {
	struct list_head node;		/* on presto_filesets */
	struct kref ref;		/* the mount's, lento's, callers' */
	char name[PRESTO_FILESET_MAX + 1];
	struct mutex mutex;
	/* Under mutex: */
	u32 portid;			/* the registered lento; 0: none */
	/*
	 * Its socket, held: a port id is free for a new socket before the
	 * old one's NETLINK_URELEASE is told, so the id alone does not say
	 * which socket is the lento.
	 */
	struct sock *lento_sk;
	bool notice_owed;		/* its MOUNTED or UNMOUNTED was lost */
	bool attached;			/* a mount has it (maybe not ready) */
	struct super_block *sb;		/* the mount, ready; NULL: none */
	/* Downcalls and KML workers at work on sb: presto_sb_pin(). */
	atomic_t sb_pins;
	wait_queue_head_t sb_unpinned;
	/*
	 * Unmounted: where the last mount left its log (synced at the
	 * unmount), for lento to read the rest without presto.
	 */
	bool final_known;
	u64 final_durable, final_acked;
	struct list_head upcalls;	/* not answered yet */
	unsigned int pending;
	struct delayed_work resend;
	atomic64_t stats[PRESTO_ST_NR];
	/* Files opened lately, for lento's LRU: under hint_lock. */
	spinlock_t hint_lock;
	unsigned int nhints;
	struct presto_handle hints[PRESTO_HINTS_MAX];
	struct delayed_work hint_work;
	/* The log's durable point moved: lento hears of it (KML). */
	struct delayed_work kml_work;
};

/* A KML_SYNC or a revoke, done by a worker: it may take a while. */
struct presto_kml_request {
	struct work_struct work;
	struct presto_fileset *fs;	/* a reference */
	struct super_block *sb;		/* pinned: presto_sb_pin() */
	u64 req;
	bool revoke;
};

struct presto_upcall {
	struct list_head node;		/* on presto_fileset.upcalls */
	u64 id;
	u32 op;
	struct presto_handle handle;
	wait_queue_head_t wq;
	/* Under the fileset's mutex: */
	unsigned int waiters;
	bool sent;
	unsigned long progress_until;	/* jiffies: PROGRESS keeps waits on */
	/* Set once, under the mutex, before waking the waiters: */
	bool done;
	int err;
};

static LIST_HEAD(presto_filesets);
static DEFINE_MUTEX(presto_filesets_lock);
/*
 * Upcall ids, for every fileset: a fileset freed and made again (lento
 * unregistered, nothing mounted) must not reuse the ids of an old one,
 * which a late REPLY may still name.
 */
static atomic64_t presto_upcall_ids = ATOMIC64_INIT(0);
/*
 * KML_SYNC and revoke workers run here, so that module exit can wait for
 * them: the unmount that a worker held up may end, and the module go,
 * while the worker still runs presto's code.
 */
static struct workqueue_struct *presto_kml_wq;

static void presto_count(struct presto_fileset *fs, int i)
{
	atomic64_inc(&fs->stats[i]);
}

bool presto_fileset_name_ok(const char *name)
{
	size_t i, len = strlen(name);

	if (!len || len > PRESTO_FILESET_MAX || name[0] == '.')
		return false;
	for (i = 0; i < len; i++)
		if (!isalnum(name[i]) && !strchr("._-", name[i]))
			return false;
	return true;
}

static void presto_resend_work(struct work_struct *work);
static void presto_hint_work(struct work_struct *work);
static void presto_kml_work(struct work_struct *work);

/* The fileset called @name, with a new reference; made if @make. */
struct presto_fileset *presto_fileset_get(const char *name, bool make)
{
	struct presto_fileset *fs;

	mutex_lock(&presto_filesets_lock);
	list_for_each_entry(fs, &presto_filesets, node) {
		if (!strcmp(fs->name, name)) {
			kref_get(&fs->ref);
			goto out;
		}
	}
	fs = NULL;
	if (!make)
		goto out;
	fs = kzalloc(sizeof(*fs), GFP_KERNEL);
	if (!fs)
		goto out;
	kref_init(&fs->ref);
	strscpy(fs->name, name, sizeof(fs->name));
	mutex_init(&fs->mutex);
	init_waitqueue_head(&fs->sb_unpinned);
	INIT_LIST_HEAD(&fs->upcalls);
	INIT_DELAYED_WORK(&fs->resend, presto_resend_work);
	spin_lock_init(&fs->hint_lock);
	INIT_DELAYED_WORK(&fs->hint_work, presto_hint_work);
	INIT_DELAYED_WORK(&fs->kml_work, presto_kml_work);
	list_add(&fs->node, &presto_filesets);
out:
	mutex_unlock(&presto_filesets_lock);
	return fs;
}

static void presto_fileset_release(struct kref *ref)
{
	struct presto_fileset *fs = container_of(ref, struct presto_fileset,
						 ref);

	list_del(&fs->node);
	mutex_unlock(&presto_filesets_lock);
	/* Nobody holds it: no mount, no lento, hence no upcall either. */
	cancel_delayed_work_sync(&fs->resend);
	cancel_delayed_work_sync(&fs->hint_work);
	cancel_delayed_work_sync(&fs->kml_work);
	WARN_ON_ONCE(!list_empty(&fs->upcalls));
	mutex_destroy(&fs->mutex);
	kfree(fs);
}

void presto_fileset_put(struct presto_fileset *fs)
{
	kref_put_mutex(&fs->ref, presto_fileset_release, &presto_filesets_lock);
}

/* ------------------------------------------------------------ sending */

static struct sk_buff *presto_msg_new(struct presto_fileset *fs, u8 cmd,
				      void **hdr)
{
	return presto_genl_new(fs->name, NLMSG_GOODSIZE, cmd, hdr);
}

/* Unicast to the fileset's lento. Caller holds fs->mutex. */
static int presto_msg_send(struct presto_fileset *fs, struct sk_buff *skb,
			   void *hdr)
{
	genlmsg_end(skb, hdr);
	if (!fs->portid) {
		nlmsg_free(skb);
		return -ENOTCONN;
	}
	return genlmsg_unicast(&init_net, skb, fs->portid);
}

/* Where the log of @sb stands, and whether it holds the permit. */
static int presto_put_kml(struct sk_buff *skb, struct super_block *sb)
{
	struct presto_kml_state st;

	presto_journal_state(sb, &st);
	/* lento ships what it reads: only changes that are on disk too. */
	if (nla_put_u64_64bit(skb, PRESTO_A_KML_DURABLE,
			      presto_journal_stable(sb), PRESTO_A_PAD) ||
	    nla_put_u64_64bit(skb, PRESTO_A_KML_ACKED, st.acked_seq,
			      PRESTO_A_PAD) ||
	    nla_put_u8(skb, PRESTO_A_PERMIT, READ_ONCE(presto_sb(sb)->permit)))
		return -EMSGSIZE;
	return 0;
}

static int presto_put_mount(struct sk_buff *skb, struct presto_fileset *fs)
{
	struct presto_handle root = {};
	struct inode *lower;

	if (nla_put_u8(skb, PRESTO_A_MOUNTED, !!fs->sb))
		return -EMSGSIZE;
	if (!fs->sb && fs->final_known)
		return nla_put_u64_64bit(skb, PRESTO_A_KML_DURABLE,
					 fs->final_durable, PRESTO_A_PAD) ||
		       nla_put_u64_64bit(skb, PRESTO_A_KML_ACKED,
					 fs->final_acked, PRESTO_A_PAD) ?
		       -EMSGSIZE : 0;
	if (!fs->sb)
		return 0;
	lower = d_inode(presto_sb(fs->sb)->lower.dentry);
	root.ino = lower->i_ino;
	root.gen = lower->i_generation;
	if (nla_put(skb, PRESTO_A_ROOT, sizeof(root), &root) ||
	    nla_put_u32(skb, PRESTO_A_TIMEOUT_MS,
			jiffies_to_msecs(presto_sb(fs->sb)->timeout)))
		return -EMSGSIZE;
	return presto_put_kml(skb, fs->sb);
}

/* MOUNTED or UNMOUNTED to the registered lento, if any. */
static void presto_notify_mount(struct presto_fileset *fs)
{
	struct sk_buff *skb;
	void *hdr;

	fs->notice_owed = false;
	if (!fs->portid)
		return;
	skb = presto_msg_new(fs, fs->sb ? PRESTO_CMD_MOUNTED :
				 PRESTO_CMD_UNMOUNTED, &hdr);
	if (!skb)
		goto later;
	if (presto_put_mount(skb, fs)) {
		nlmsg_free(skb);
		goto later;
	}
	if (!presto_msg_send(fs, skb, hdr))
		return;
later:
	/* lento's buffer was full: the resend work tells the state then. */
	fs->notice_owed = true;
	schedule_delayed_work(&fs->resend, PRESTO_RESEND_DELAY);
}

/* Send @up; on failure it stays queued for the resend work. */
static void presto_upcall_send(struct presto_fileset *fs,
			       struct presto_upcall *up)
{
	struct sk_buff *skb;
	void *hdr;

	if (!fs->portid)
		return;
	skb = presto_msg_new(fs, PRESTO_CMD_UPCALL, &hdr);
	if (!skb)
		goto later;
	if (nla_put_u64_64bit(skb, PRESTO_A_REQ, up->id, PRESTO_A_PAD) ||
	    nla_put_u32(skb, PRESTO_A_OP, up->op) ||
	    nla_put(skb, PRESTO_A_HANDLE, sizeof(up->handle), &up->handle)) {
		nlmsg_free(skb);
		goto later;
	}
	if (presto_msg_send(fs, skb, hdr))
		goto later;
	up->sent = true;
	return;
later:
	schedule_delayed_work(&fs->resend, PRESTO_RESEND_DELAY);
}

static void presto_resend_all(struct presto_fileset *fs)
{
	struct presto_upcall *up;

	if (fs->notice_owed)
		presto_notify_mount(fs);
	list_for_each_entry(up, &fs->upcalls, node) {
		if (up->sent)
			continue;
		presto_count(fs, PRESTO_ST_RESENT);
		presto_upcall_send(fs, up);
	}
}

static void presto_resend_work(struct work_struct *work)
{
	struct presto_fileset *fs = container_of(work, struct presto_fileset,
						 resend.work);

	mutex_lock(&fs->mutex);
	presto_resend_all(fs);
	mutex_unlock(&fs->mutex);
}

/* ------------------------------------------------------------ hints */

/*
 * A regular file of the fileset was opened. Warm opens never reach lento,
 * so its LRU learns of them here: cheaply (a file at most once a
 * minute), batched (a message a second), and lossy (hints past
 * PRESTO_HINTS_MAX a second, or while no lento listens, are dropped).
 */
void presto_hint_open(struct inode *inode)
{
	struct presto_fileset *fs = presto_sb(inode->i_sb)->fileset;
	struct presto_inode *pi = PRESTO_I(inode);
	unsigned long last = READ_ONCE(pi->hinted);
	bool first;

	if (last && time_before(jiffies, last + PRESTO_HINT_EVERY))
		return;
	if (!READ_ONCE(fs->portid))
		return;
	spin_lock(&fs->hint_lock);
	first = !fs->nhints;
	/* A file whose hint is dropped is hinted at its next open. */
	if (fs->nhints < PRESTO_HINTS_MAX) {
		WRITE_ONCE(pi->hinted, jiffies ?: 1);
		fs->hints[fs->nhints].ino = pi->lower->i_ino;
		fs->hints[fs->nhints].gen = pi->lower->i_generation;
		fs->hints[fs->nhints].pad = 0;
		fs->nhints++;
	}
	spin_unlock(&fs->hint_lock);
	if (first)
		schedule_delayed_work(&fs->hint_work, PRESTO_HINT_DELAY);
}

static void presto_hint_work(struct work_struct *work)
{
	struct presto_fileset *fs = container_of(work, struct presto_fileset,
						 hint_work.work);
	struct sk_buff *skb;
	struct nlattr *a;
	void *hdr;

	mutex_lock(&fs->mutex);
	skb = presto_genl_new(fs->name, nla_total_size(sizeof(fs->hints)),
			      PRESTO_CMD_ACCESS, &hdr);
	spin_lock(&fs->hint_lock);
	a = skb ? nla_reserve(skb, PRESTO_A_HANDLES,
			      fs->nhints * sizeof(fs->hints[0])) : NULL;
	if (a)
		memcpy(nla_data(a), fs->hints, fs->nhints * sizeof(fs->hints[0]));
	fs->nhints = 0;
	spin_unlock(&fs->hint_lock);
	if (a)
		presto_msg_send(fs, skb, hdr);
	else
		nlmsg_free(skb);
	mutex_unlock(&fs->mutex);
}

/* ------------------------------------------------------------ upcalls */

static void presto_upcall_free(struct presto_fileset *fs,
			       struct presto_upcall *up)
{
	if (!list_empty(&up->node)) {
		list_del_init(&up->node);
		fs->pending--;
	}
	kfree(up);
}

/* Answer @up: wake its waiters, or free it if it has none. */
static void presto_upcall_done(struct presto_fileset *fs,
			       struct presto_upcall *up, int err)
{
	list_del_init(&up->node);
	fs->pending--;
	up->err = err;
	if (err)
		presto_count(fs, PRESTO_ST_FAILED);
	if (!up->waiters) {
		kfree(up);
		return;
	}
	WRITE_ONCE(up->done, true);
	wake_up_all(&up->wq);
}

static struct presto_upcall *presto_upcall_find(struct presto_fileset *fs,
						u32 op,
						const struct presto_handle *h)
{
	struct presto_upcall *up;

	list_for_each_entry(up, &fs->upcalls, node)
		if (up->op == op && up->handle.ino == h->ino &&
		    up->handle.gen == h->gen)
			return up;
	return NULL;
}

/* The upcall for @op on @lower, joined or made; NULL if out of memory. */
static struct presto_upcall *presto_upcall_get(struct presto_fileset *fs,
					       u32 op, struct inode *lower)
{
	struct presto_handle h = { .ino = lower->i_ino,
				   .gen = lower->i_generation };
	struct presto_upcall *up;

	up = presto_upcall_find(fs, op, &h);
	if (up) {
		up->waiters++;
		presto_count(fs, PRESTO_ST_JOINED);
		return up;
	}
	up = kzalloc(sizeof(*up), GFP_KERNEL);
	if (!up)
		return NULL;
	up->id = atomic64_inc_return(&presto_upcall_ids);
	up->op = op;
	up->handle = h;
	init_waitqueue_head(&up->wq);
	up->waiters = 1;
	up->progress_until = jiffies;
	list_add_tail(&up->node, &fs->upcalls);
	fs->pending++;
	presto_count(fs, PRESTO_ST_UPCALLS);
	presto_count(fs, presto_op_stat[op]);
	presto_upcall_send(fs, up);
	return up;
}

/*
 * Wait for @up until it is answered, @deadline passes (or the later one
 * lento's PROGRESS set) or a signal comes: 0 once answered, else
 * -ETIMEDOUT or -ERESTARTSYS. The caller reads the answer under the
 * fileset's mutex, which orders it after the answering; done is only a
 * hint here.
 *
 * The wait is interruptible but not freezable. A waiter may hold the
 * directory's lock (a lookup, a change waiting for the permit) or the
 * mmap lock (page_mkwrite); frozen in place it would keep them through a
 * suspend, and a task waiting for them uninterruptibly can never freeze,
 * so the suspend would fail. A freezer's wake-up (system suspend, a
 * cgroup's freeze) ends the wait instead: the locks are let go, the task
 * freezes on its way out, and the call starts again after the thaw. A
 * real signal ends the call with EINTR unless its handler was installed
 * with SA_RESTART.
 */
static int presto_upcall_wait(struct presto_upcall *up, unsigned long deadline)
{
	unsigned long until;
	long left;

	for (;;) {
		until = READ_ONCE(up->progress_until);
		if (time_after(until, deadline))
			deadline = until;
		left = (long)(deadline - jiffies);
		if (left <= 0)
			return READ_ONCE(up->done) ? 0 : -ETIMEDOUT;
		left = wait_event_interruptible_timeout(up->wq,
							READ_ONCE(up->done),
							left);
		if (left < 0)
			return READ_ONCE(up->done) ? 0 : -ERESTARTSYS;
		if (left > 0)
			return 0;
	}
}

/*
 * Ask lento for what @inode lacks (@op) and wait for its answer: 0 when
 * lento filled it, else its error, -ENOTCONN (no lento came in time),
 * -ETIMEDOUT (lento did not answer in time) or -ERESTARTSYS.
 */
int presto_upcall(struct inode *inode, u32 op)
{
	struct presto_sb_info *sbi = presto_sb(inode->i_sb);
	struct presto_fileset *fs = sbi->fileset;
	unsigned long deadline = jiffies + sbi->timeout;
	struct presto_upcall *up;
	int err;

	mutex_lock(&fs->mutex);
	up = presto_upcall_get(fs, op, presto_lower_inode(inode));
	mutex_unlock(&fs->mutex);
	if (!up)
		return -ENOMEM;

	err = presto_upcall_wait(up, deadline);

	mutex_lock(&fs->mutex);
	if (up->done) {
		err = up->err;
	} else if (err == -ERESTARTSYS) {
		presto_count(fs, PRESTO_ST_INTERRUPTED);
	} else {
		presto_count(fs, PRESTO_ST_TIMEOUTS);
		if (!fs->portid)
			err = -ENOTCONN;
	}
	/* The last waiter of an upcall lento never saw takes it back. */
	if (!--up->waiters && (up->done || !up->sent))
		presto_upcall_free(fs, up);
	mutex_unlock(&fs->mutex);
	return err;
}

/* lento went: what it was sent goes again to the next one. */
static void presto_lento_gone(struct presto_fileset *fs)
{
	struct presto_upcall *up, *tmp;

	fs->portid = 0;
	sock_put(fs->lento_sk);
	WRITE_ONCE(fs->lento_sk, NULL);
	list_for_each_entry_safe(up, tmp, &fs->upcalls, node) {
		up->sent = false;
		if (!up->waiters)
			presto_upcall_free(fs, up);
	}
}

/* ------------------------------------------------------------ mounts */

int presto_fileset_attach(struct super_block *sb, const char *name)
{
	struct presto_fileset *fs;
	int err = 0;

	fs = presto_fileset_get(name, true);
	if (!fs)
		return -ENOMEM;
	mutex_lock(&fs->mutex);
	if (fs->attached) {
		err = -EBUSY;
	} else {
		fs->attached = true;
		presto_sb(sb)->fileset = fs;
	}
	mutex_unlock(&fs->mutex);
	if (err)
		presto_fileset_put(fs);
	return err;
}

/*
 * The mount is ready, its log open: downcalls may reach it from now on,
 * and a registered lento hears of it.
 */
void presto_fileset_announce(struct super_block *sb)
{
	struct presto_fileset *fs = presto_sb(sb)->fileset;

	mutex_lock(&fs->mutex);
	fs->sb = sb;
	fs->final_known = false;
	presto_notify_mount(fs);
	mutex_unlock(&fs->mutex);
}

/*
 * The mount goes (before its inodes): no downcall reaches the superblock
 * from here on, and nothing of it waits (nothing runs in a mount that is
 * being killed).
 */
void presto_fileset_detach(struct super_block *sb)
{
	struct presto_fileset *fs = presto_sb(sb)->fileset;
	struct presto_kml_state st = {};
	u64 durable = 0;
	bool ready;

	if (!fs)
		return;
	/*
	 * A mount that got ready (fs->sb is then this one, cleared only
	 * here) has its log synced first, so that UNMOUNTED tells lento
	 * the last record: no change comes any more, and lento reads the
	 * rest of the log while nothing is mounted. A sync that fails
	 * leaves the durable point where the log got.
	 */
	ready = READ_ONCE(fs->sb) == sb;
	if (ready) {
		sync_filesystem(sb);
		presto_journal_state(sb, &st);
		durable = presto_journal_stable(sb);
	}
	mutex_lock(&fs->mutex);
	if (fs->sb) {
		fs->sb = NULL;
		fs->final_known = ready;
		fs->final_durable = durable;
		fs->final_acked = min(st.acked_seq, durable);
		presto_notify_mount(fs);
	}
	fs->attached = false;
	mutex_unlock(&fs->mutex);
	/* Downcalls still at work on the inodes finish before they go. */
	wait_event(fs->sb_unpinned, !atomic_read(&fs->sb_pins));
	/* The journal thread may be telling of its log (kml_durable). */
	WRITE_ONCE(presto_sb(sb)->fileset, NULL);
	synchronize_rcu();
	presto_fileset_put(fs);
}

static void presto_fileset_stats(struct presto_fileset *fs, u64 *v)
{
	int i;

	for (i = 0; i < PRESTO_ST_NR; i++)
		v[i] = atomic64_read(&fs->stats[i]);
}

/* The fileset's line in /proc/self/mountstats. */
void presto_fileset_show(struct seq_file *m, struct super_block *sb)
{
	struct presto_fileset *fs = presto_sb(sb)->fileset;
	u64 v[PRESTO_ST_NR];
	int i;

	if (!fs)
		return;
	presto_fileset_stats(fs, v);
	seq_printf(m, "\n\tfileset: %s lento %s epoch %llu pending %u permit %s",
		   fs->name, READ_ONCE(fs->portid) ? "registered" : "none",
		   READ_ONCE(presto_sb(sb)->epoch), READ_ONCE(fs->pending),
		   READ_ONCE(presto_sb(sb)->permit) ? "held" : "none");
	seq_puts(m, "\n\tchannel:");
	for (i = 0; i < PRESTO_ST_NR; i++)
		seq_printf(m, " %s %llu", presto_stat_info[i].name, v[i]);
}

/* ------------------------------------------------------------ lento */

/* Is the socket @sk the lento of @fs? */
bool presto_fileset_is_lento(struct presto_fileset *fs, const struct sock *sk)
{
	return READ_ONCE(fs->lento_sk) == sk;
}

/*
 * The sender of @info, on socket @sk, becomes the lento of @fs (-EBUSY if
 * another one is), answered with @msg (begun at @hdr; consumed) and the
 * mount's state, under the lock that MOUNTED and UNMOUNTED notices are
 * sent under, so that none of them overtakes the answer with news older
 * than it. A lento the answer did not reach is not registered. A lento
 * whose socket is closing is gone already: its NETLINK_URELEASE may come
 * after a new socket took its port id.
 */
int presto_fileset_register(struct presto_fileset *fs, struct sock *sk,
			    struct genl_info *info, struct sk_buff *msg,
			    void *hdr)
{
	int err;

	mutex_lock(&fs->mutex);
	err = -EBUSY;
	if (fs->lento_sk && fs->lento_sk != sk &&
	    !sock_flag(fs->lento_sk, SOCK_DEAD))
		goto out;
	err = presto_put_mount(msg, fs);
	if (err)
		goto out;
	genlmsg_end(msg, hdr);
	err = genlmsg_reply(msg, info);
	msg = NULL;
	if (err)
		goto out;
	if (fs->lento_sk != sk) {
		if (fs->lento_sk)
			presto_lento_gone(fs);
		else
			kref_get(&fs->ref);	/* lento's, until it goes */
		sock_hold(sk);
		WRITE_ONCE(fs->lento_sk, sk);
	}
	fs->portid = info->snd_portid;
	/* The answer told the mount's state. */
	fs->notice_owed = false;
out:
	mutex_unlock(&fs->mutex);
	nlmsg_free(msg);
	return err;
}

/* Everything still pending goes to the lento just registered. */
void presto_fileset_resend(struct presto_fileset *fs)
{
	struct presto_upcall *up;

	mutex_lock(&fs->mutex);
	list_for_each_entry(up, &fs->upcalls, node)
		up->sent = false;
	presto_resend_all(fs);
	mutex_unlock(&fs->mutex);
}

/*
 * The lento of @fs goes if it is on socket @sk (UNREGISTER), or, with no
 * @sk, if its socket is closed and had port id @portid.
 */
static void presto_fileset_drop_lento(struct presto_fileset *fs,
				      const struct sock *sk, u32 portid)
{
	bool had;

	mutex_lock(&fs->mutex);
	if (sk)
		had = fs->lento_sk == sk;
	else
		had = fs->lento_sk && fs->portid == portid &&
		      sock_flag(fs->lento_sk, SOCK_DEAD);
	if (had)
		presto_lento_gone(fs);
	mutex_unlock(&fs->mutex);
	if (had)
		presto_fileset_put(fs);
}

/* UNREGISTER from socket @sk. */
void presto_fileset_unregister(struct presto_fileset *fs,
			       const struct sock *sk)
{
	presto_fileset_drop_lento(fs, sk, 0);
}

/*
 * A netlink socket closed: if it was a lento, it is gone at once. The
 * filesets are taken a batch at a time, each batch after the last one's
 * end (held, it stays in the list): a new socket that took the same port
 * id and its filesets before this ran keeps them, and must not make
 * every pass find the same ones again.
 */
void presto_lento_closed(u32 portid)
{
	struct presto_fileset *fs, *cursor = NULL, *next, *gone[8];
	int i, nr;

	do {
		nr = 0;
		next = NULL;
		mutex_lock(&presto_filesets_lock);
		fs = list_prepare_entry(cursor, &presto_filesets, node);
		list_for_each_entry_continue(fs, &presto_filesets, node) {
			if (READ_ONCE(fs->portid) != portid)
				continue;
			kref_get(&fs->ref);
			gone[nr++] = fs;
			if (nr == ARRAY_SIZE(gone)) {
				next = fs;
				kref_get(&next->ref);
				break;
			}
		}
		mutex_unlock(&presto_filesets_lock);
		if (cursor)
			presto_fileset_put(cursor);
		cursor = next;
		for (i = 0; i < nr; i++) {
			presto_fileset_drop_lento(gone[i], NULL, portid);
			presto_fileset_put(gone[i]);
		}
	} while (cursor);
}

int presto_filesets_init(void)
{
	presto_kml_wq = alloc_workqueue("presto_kml", WQ_UNBOUND, 0);
	return presto_kml_wq ? 0 : -ENOMEM;
}

/*
 * Module exit, the family gone: no mount is left, no worker runs, and
 * the filesets left are held by their lentos alone, which are let go.
 */
void presto_filesets_exit(void)
{
	struct presto_fileset *fs, *tmp;

	destroy_workqueue(presto_kml_wq);
	list_for_each_entry_safe(fs, tmp, &presto_filesets, node) {
		if (WARN_ON_ONCE(fs->attached || !fs->lento_sk))
			continue;
		presto_fileset_unregister(fs, fs->lento_sk);
	}
}

/* The state of @fs into @skb: its mount and its counters. */
int presto_fileset_fill(struct presto_fileset *fs, struct sk_buff *skb)
{
	u64 v[PRESTO_ST_NR], watched = 0;
	struct nlattr *nest;
	bool held;
	int i, err;

	mutex_lock(&fs->mutex);
	err = presto_put_mount(skb, fs);
	mutex_unlock(&fs->mutex);
	if (err)
		return err;
	nest = nla_nest_start(skb, PRESTO_A_STAT);
	if (!nest)
		return -EMSGSIZE;
	presto_fileset_stats(fs, v);
	for (i = 0; i < PRESTO_ST_NR; i++)
		if (nla_put_u64_64bit(skb, presto_stat_info[i].attr, v[i],
				      PRESTO_S_PAD))
			return -EMSGSIZE;
	mutex_lock(&fs->mutex);
	held = fs->sb && READ_ONCE(presto_sb(fs->sb)->permit);
	if (fs->sb)
		watched = presto_notify_watched(fs->sb);
	mutex_unlock(&fs->mutex);
	if (nla_put_u64_64bit(skb, PRESTO_S_PENDING, READ_ONCE(fs->pending),
			      PRESTO_S_PAD) ||
	    nla_put_u64_64bit(skb, PRESTO_S_REGISTERED, !!READ_ONCE(fs->portid),
			      PRESTO_S_PAD) ||
	    nla_put_u64_64bit(skb, PRESTO_S_PERMIT_HELD, held, PRESTO_S_PAD) ||
	    nla_put_u64_64bit(skb, PRESTO_S_WATCHED, watched, PRESTO_S_PAD))
		return -EMSGSIZE;
	nla_nest_end(skb, nest);
	return 0;
}

int presto_fileset_set_epoch(struct presto_fileset *fs, u64 epoch)
{
	int err = -ENOENT;

	mutex_lock(&fs->mutex);
	if (fs->sb) {
		WRITE_ONCE(presto_sb(fs->sb)->epoch, epoch);
		err = 0;
	}
	mutex_unlock(&fs->mutex);
	return err;
}

static struct presto_upcall *presto_upcall_by_id(struct presto_fileset *fs,
						 u64 id)
{
	struct presto_upcall *up;

	list_for_each_entry(up, &fs->upcalls, node)
		if (up->id == id)
			return up;
	return NULL;
}

/*
 * The mounted superblock, kept for a downcall that works on its inodes
 * without the fileset's mutex: an inode's last iput there may evict it,
 * and an unlinked object's eviction frees its lower blocks, which upcalls
 * should not wait for. An unmount waits for the pins to go before its
 * inodes do (presto_fileset_detach()). NULL if nothing is mounted.
 */
static struct super_block *presto_sb_pin(struct presto_fileset *fs)
{
	struct super_block *sb;

	mutex_lock(&fs->mutex);
	sb = fs->sb;
	if (sb)
		atomic_inc(&fs->sb_pins);
	mutex_unlock(&fs->mutex);
	return sb;
}

static void presto_sb_unpin(struct presto_fileset *fs)
{
	if (atomic_dec_and_test(&fs->sb_pins))
		wake_up(&fs->sb_unpinned);
}

/*
 * lento answers upcall @id: @err (0 or a negative errno) and, if @flags,
 * the flags it filled in @epoch. -ESRCH if no such upcall is pending.
 */
int presto_fileset_reply(struct presto_fileset *fs, u64 id, int err,
			 u32 flags, u64 epoch)
{
	struct inode *inode = NULL;
	struct presto_upcall *up;
	int ret = 0;

	mutex_lock(&fs->mutex);
	up = presto_upcall_by_id(fs, id);
	if (!up) {
		ret = -ESRCH;
		goto out;
	}
	/* Flags (or the permit) first: a waiter woken finds them set. */
	if (flags && fs->sb) {
		inode = presto_ilookup(fs->sb, up->handle.ino, up->handle.gen);
		if (inode) {
			presto_cb_change(inode, flags, 0, epoch);
			/* Its last iput may evict it: not under the mutex. */
			atomic_inc(&fs->sb_pins);
		}
	}
	if (up->op == PRESTO_OP_PERMIT && !err && fs->sb)
		presto_permit_set(fs->sb, true);
	presto_upcall_done(fs, up, err);
out:
	mutex_unlock(&fs->mutex);
	if (inode) {
		iput(inode);
		presto_sb_unpin(fs);
	}
	return ret;
}

/* lento is still at upcall @id: its waiters wait a timeout more. */
int presto_fileset_progress(struct presto_fileset *fs, u64 id)
{
	struct presto_upcall *up;
	int ret = -ESRCH;

	mutex_lock(&fs->mutex);
	up = presto_upcall_by_id(fs, id);
	if (up && fs->sb) {
		WRITE_ONCE(up->progress_until,
			   jiffies + presto_sb(fs->sb)->timeout);
		ret = 0;
	}
	mutex_unlock(&fs->mutex);
	return ret;
}

/*
 * A directory lento broke has watchers of its names: lento lists it again
 * now, not at its next use, and NOTIFYs what came and went. Lost if
 * lento's buffer is full: the watchers then hear of the names at the
 * directory's next use. Caller holds fs->mutex.
 */
static void presto_watched_send(struct presto_fileset *fs,
				const struct presto_handle *h)
{
	struct sk_buff *skb;
	void *hdr;

	skb = presto_msg_new(fs, PRESTO_CMD_WATCHED, &hdr);
	if (!skb)
		return;
	if (nla_put(skb, PRESTO_A_HANDLE, sizeof(*h), h)) {
		nlmsg_free(skb);
		return;
	}
	presto_msg_send(fs, skb, hdr);
}

/* BREAK, SET_FLAGS and PURGE (@cmd) of the object named by @h. */
int presto_fileset_object(struct presto_fileset *fs, u8 cmd,
			  const struct presto_handle *h, u32 flags, u64 epoch)
{
	struct super_block *sb = presto_sb_pin(fs);
	int ret = 0;

	if (!sb)
		return -ENOENT;
	switch (cmd) {
	case PRESTO_CMD_BREAK:
		if (!presto_cb_apply(sb, h, 0, flags, 0))
			break;
		presto_count(fs, PRESTO_ST_BREAKS);
		if (presto_notify_break(sb, h, flags)) {
			mutex_lock(&fs->mutex);
			presto_watched_send(fs, h);
			mutex_unlock(&fs->mutex);
		}
		break;
	case PRESTO_CMD_SET_FLAGS:
		presto_cb_apply(sb, h, flags, 0, epoch);
		break;
	case PRESTO_CMD_PURGE:
		ret = presto_cb_purge(sb, h);
		break;
	default:
		ret = -EINVAL;
	}
	presto_sb_unpin(fs);
	return ret;
}

/* lento made a change of the server's to a directory's names. */
int presto_fileset_notify(struct presto_fileset *fs,
			  const struct presto_handle *h, const char *name,
			  u32 event)
{
	struct super_block *sb = presto_sb_pin(fs);
	int ret;

	if (!sb)
		return -ENOENT;
	ret = presto_notify_name(sb, h, name, event);
	presto_sb_unpin(fs);
	return ret;
}

/* ------------------------------------------------------------ the log */

/* A KML message about @sb's log: the answer to @req if nonzero. */
static void presto_kml_send(struct presto_fileset *fs, struct super_block *sb,
			    u64 req, int err)
{
	struct sk_buff *skb;
	void *hdr;

	skb = presto_msg_new(fs, PRESTO_CMD_KML, &hdr);
	if (!skb)
		return;
	if ((req && nla_put_u64_64bit(skb, PRESTO_A_REQ, req, PRESTO_A_PAD)) ||
	    (err && nla_put_u32(skb, PRESTO_A_ERRNO, -err)) ||
	    presto_put_kml(skb, sb)) {
		nlmsg_free(skb);
		return;
	}
	/* Lost if lento's buffer is full: the next move tells it again. */
	presto_msg_send(fs, skb, hdr);
}

/*
 * The log of @sb is durable further (the journal thread synced it, or an
 * fsync flushed it): lento hears of it shortly, in one message for
 * several moves. Called from the journal thread and from fsync; the
 * mount's detach waits for an RCU grace period before it lets go of the
 * fileset, so the fileset seen here is alive.
 */
void presto_fileset_kml_durable(struct super_block *sb)
{
	struct presto_fileset *fs;

	rcu_read_lock();
	fs = READ_ONCE(presto_sb(sb)->fileset);
	if (fs && READ_ONCE(fs->portid))
		schedule_delayed_work(&fs->kml_work, PRESTO_KML_NOTIFY_DELAY);
	rcu_read_unlock();
}

static void presto_kml_work(struct work_struct *work)
{
	struct presto_fileset *fs = container_of(work, struct presto_fileset,
						 kml_work.work);

	mutex_lock(&fs->mutex);
	if (fs->sb)
		presto_kml_send(fs, fs->sb, 0, 0);
	mutex_unlock(&fs->mutex);
}

/* lento consumed the log up to @seq. */
int presto_fileset_kml_ack(struct presto_fileset *fs, u64 seq)
{
	int err = -ENOENT;

	mutex_lock(&fs->mutex);
	if (fs->sb)
		err = presto_journal_ack(fs->sb, seq);
	mutex_unlock(&fs->mutex);
	return err;
}

static void presto_kml_request_work(struct work_struct *work)
{
	struct presto_kml_request *r = container_of(work,
						    struct presto_kml_request,
						    work);
	struct presto_fileset *fs = r->fs;
	int err;

	if (r->revoke)
		presto_permit_drain(r->sb);
	err = presto_journal_sync(r->sb);
	mutex_lock(&fs->mutex);
	presto_kml_send(fs, r->sb, r->req, err);
	mutex_unlock(&fs->mutex);
	presto_sb_unpin(fs);
	presto_fileset_put(fs);
	kfree(r);
}

/*
 * KML_SYNC (@revoke false) and a revoke (PERMIT 0), request @req of
 * lento's: the answer, a KML message, comes from a worker once the log
 * is durable (and, for a revoke, once the changes in progress ended), so
 * that lento's sending thread never waits for the disk or for writers.
 * The worker pins the mount meanwhile: an unmount waits for the answer
 * rather than return with the superblock, and the cache's file system
 * under it, still in use.
 */
int presto_fileset_kml_request(struct presto_fileset *fs, u64 req,
			       bool revoke)
{
	struct presto_kml_request *r;
	int err = -ENOENT;

	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	mutex_lock(&fs->mutex);
	if (!fs->sb)
		goto out;
	atomic_inc(&fs->sb_pins);
	r->sb = fs->sb;
	if (revoke) {
		presto_permit_set(fs->sb, false);
		presto_count(fs, PRESTO_ST_REVOKES);
	}
	kref_get(&fs->ref);
	r->fs = fs;
	r->req = req;
	r->revoke = revoke;
	INIT_WORK(&r->work, presto_kml_request_work);
	queue_work(presto_kml_wq, &r->work);
	r = NULL;
	err = 0;
out:
	mutex_unlock(&fs->mutex);
	kfree(r);
	return err;
}

/* PERMIT 1: lento holds the permit (it restarted, say). */
int presto_fileset_grant(struct presto_fileset *fs)
{
	int err = -ENOENT;

	mutex_lock(&fs->mutex);
	if (fs->sb) {
		presto_permit_set(fs->sb, true);
		err = 0;
	}
	mutex_unlock(&fs->mutex);
	return err;
}
