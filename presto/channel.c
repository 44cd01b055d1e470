// SPDX-License-Identifier: GPL-2.0
/*
 * The channel to lento: filesets, upcalls, and the generic-netlink family
 * they travel on (protocol/KERNEL.md).
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
#include <linux/freezer.h>
#include <linux/kref.h>
#include <linux/module.h>
#include <linux/netlink.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/wait.h>
#include <net/genetlink.h>
#include <net/netlink.h>
#include "presto.h"

#define PRESTO_RESEND_DELAY	(HZ / 10)
/* Access hints: at most a message a second, a file once a minute. */
#define PRESTO_HINT_DELAY	HZ
#define PRESTO_HINT_EVERY	(60 * HZ)
#define PRESTO_HINTS_MAX	256

enum {
	PRESTO_ST_UPCALLS, PRESTO_ST_FETCH_DIR, PRESTO_ST_FETCH_FILE,
	PRESTO_ST_FETCH_ATTR, PRESTO_ST_JOINED, PRESTO_ST_RESENT,
	PRESTO_ST_TIMEOUTS, PRESTO_ST_INTERRUPTED, PRESTO_ST_FAILED,
	PRESTO_ST_BREAKS, PRESTO_ST_NR
};

/* Counter i is PRESTO_S_UPCALLS + i on the wire; names for mountstats. */
static const char *const presto_stat_names[PRESTO_ST_NR] = {
	"upcalls", "fetch_dir", "fetch_file", "fetch_attr", "joined",
	"resent", "timeouts", "interrupted", "failed", "breaks",
};

struct presto_fileset {
	struct list_head node;		/* on presto_filesets */
	struct kref ref;		/* the mount's, lento's, callers' */
	char name[PRESTO_FILESET_MAX + 1];
	struct mutex mutex;
	/* Under mutex: */
	u32 portid;			/* the registered lento; 0: none */
	struct super_block *sb;		/* the mount; NULL: none */
	u64 next_id;
	struct list_head upcalls;	/* not answered yet */
	unsigned int pending;
	struct delayed_work resend;
	atomic64_t stats[PRESTO_ST_NR];
	/* Files opened lately, for lento's LRU: under hint_lock. */
	spinlock_t hint_lock;
	unsigned int nhints;
	struct presto_handle hints[PRESTO_HINTS_MAX];
	struct delayed_work hint_work;
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
static struct genl_family presto_genl_family;

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

/* The fileset called @name, with a new reference; made if @make. */
static struct presto_fileset *presto_fileset_get(const char *name, bool make)
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
	INIT_LIST_HEAD(&fs->upcalls);
	INIT_DELAYED_WORK(&fs->resend, presto_resend_work);
	spin_lock_init(&fs->hint_lock);
	INIT_DELAYED_WORK(&fs->hint_work, presto_hint_work);
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
	WARN_ON_ONCE(!list_empty(&fs->upcalls));
	mutex_destroy(&fs->mutex);
	kfree(fs);
}

static void presto_fileset_put(struct presto_fileset *fs)
{
	kref_put_mutex(&fs->ref, presto_fileset_release, &presto_filesets_lock);
}

/* ------------------------------------------------------------ sending */

static struct sk_buff *presto_msg_new(struct presto_fileset *fs, u8 cmd,
				      void **hdr)
{
	struct sk_buff *skb;

	skb = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!skb)
		return NULL;
	*hdr = genlmsg_put(skb, 0, 0, &presto_genl_family, 0, cmd);
	if (!*hdr || nla_put_string(skb, PRESTO_A_FILESET, fs->name)) {
		nlmsg_free(skb);
		return NULL;
	}
	return skb;
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

static int presto_put_mount(struct sk_buff *skb, struct presto_fileset *fs)
{
	struct presto_handle root = {};
	struct inode *lower;

	if (nla_put_u8(skb, PRESTO_A_MOUNTED, !!fs->sb))
		return -EMSGSIZE;
	if (!fs->sb)
		return 0;
	lower = d_inode(presto_sb(fs->sb)->lower.dentry);
	root.ino = lower->i_ino;
	root.gen = lower->i_generation;
	if (nla_put(skb, PRESTO_A_ROOT, sizeof(root), &root) ||
	    nla_put_u32(skb, PRESTO_A_TIMEOUT_MS,
			jiffies_to_msecs(presto_sb(fs->sb)->timeout)))
		return -EMSGSIZE;
	return 0;
}

/* MOUNTED or UNMOUNTED to the registered lento, if any. */
static void presto_notify_mount(struct presto_fileset *fs)
{
	struct sk_buff *skb;
	void *hdr;

	if (!fs->portid)
		return;
	skb = presto_msg_new(fs, fs->sb ? PRESTO_CMD_MOUNTED :
				 PRESTO_CMD_UNMOUNTED, &hdr);
	if (!skb)
		return;
	if (presto_put_mount(skb, fs)) {
		nlmsg_free(skb);
		return;
	}
	/* Lost if lento's buffer is full: a REGISTER tells it again. */
	presto_msg_send(fs, skb, hdr);
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
	WRITE_ONCE(pi->hinted, jiffies ?: 1);
	spin_lock(&fs->hint_lock);
	first = !fs->nhints;
	if (fs->nhints < PRESTO_HINTS_MAX) {
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
	skb = presto_msg_new(fs, PRESTO_CMD_ACCESS, &hdr);
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
	up->id = ++fs->next_id;
	up->op = op;
	up->handle = h;
	init_waitqueue_head(&up->wq);
	up->waiters = 1;
	up->progress_until = jiffies;
	list_add_tail(&up->node, &fs->upcalls);
	fs->pending++;
	presto_count(fs, PRESTO_ST_UPCALLS);
	presto_count(fs, PRESTO_ST_FETCH_DIR + op - PRESTO_OP_FETCH_DIR);
	presto_upcall_send(fs, up);
	return up;
}

/*
 * Wait for @up until it is answered, @deadline passes (or the later one
 * lento's PROGRESS set) or a signal comes. The wait is freezable: a
 * suspend does not wait for lento. 0 once answered, else -ETIMEDOUT or
 * -EINTR. The caller reads the answer under the fileset's mutex, which
 * orders it after the answering; done is only a hint here.
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
		left = wait_event_freezable_timeout(up->wq, READ_ONCE(up->done),
						    left);
		if (left < 0)
			return READ_ONCE(up->done) ? 0 : -EINTR;
		if (left > 0)
			return 0;
	}
}

/*
 * Ask lento for what @inode lacks (@op) and wait for its answer: 0 when
 * lento filled it, else its error, -ENOTCONN (no lento came in time),
 * -ETIMEDOUT (lento did not answer in time) or -EINTR.
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
	} else if (err == -EINTR) {
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
	if (fs->sb) {
		err = -EBUSY;
	} else {
		fs->sb = sb;
		presto_sb(sb)->fileset = fs;
	}
	mutex_unlock(&fs->mutex);
	if (err)
		presto_fileset_put(fs);
	return err;
}

/* The mount is ready: a registered lento hears of it. */
void presto_fileset_announce(struct super_block *sb)
{
	struct presto_fileset *fs = presto_sb(sb)->fileset;

	mutex_lock(&fs->mutex);
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

	if (!fs)
		return;
	mutex_lock(&fs->mutex);
	fs->sb = NULL;
	presto_notify_mount(fs);
	mutex_unlock(&fs->mutex);
	presto_sb(sb)->fileset = NULL;
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
	seq_printf(m, "\n\tfileset: %s lento %s epoch %llu pending %u",
		   fs->name, READ_ONCE(fs->portid) ? "registered" : "none",
		   READ_ONCE(presto_sb(sb)->epoch), READ_ONCE(fs->pending));
	seq_puts(m, "\n\tchannel:");
	for (i = 0; i < PRESTO_ST_NR; i++)
		seq_printf(m, " %s %llu", presto_stat_names[i], v[i]);
}

/* ------------------------------------------------------------ commands */

static const struct nla_policy presto_policy[PRESTO_A_MAX + 1] = {
	[PRESTO_A_FILESET]	= { .type = NLA_NUL_STRING,
				    .len = PRESTO_FILESET_MAX },
	[PRESTO_A_REQ]		= { .type = NLA_U64 },
	[PRESTO_A_OP]		= NLA_POLICY_RANGE(NLA_U32, PRESTO_OP_FETCH_DIR,
						   PRESTO_OP_FETCH_ATTR),
	[PRESTO_A_HANDLE]	= NLA_POLICY_EXACT_LEN(sizeof(struct presto_handle)),
	[PRESTO_A_ERRNO]	= NLA_POLICY_MAX(NLA_U32, 511),
	[PRESTO_A_FLAGS]	= NLA_POLICY_MASK(NLA_U32, PRESTO_CB_ALL),
	[PRESTO_A_EPOCH]	= NLA_POLICY_MIN(NLA_U64, 1),
	/* What only presto sends. */
	[PRESTO_A_ROOT]		= { .type = NLA_REJECT },
	[PRESTO_A_TIMEOUT_MS]	= { .type = NLA_REJECT },
	[PRESTO_A_MOUNTED]	= { .type = NLA_REJECT },
	[PRESTO_A_STAT]		= { .type = NLA_REJECT },
	[PRESTO_A_HANDLES]	= { .type = NLA_REJECT },
	[PRESTO_A_PAD]		= { .type = NLA_REJECT },
};

/* Each command's attributes: required (and no others are used). */
#define A(x)	BIT(PRESTO_A_##x)
static const u32 presto_cmd_attrs[PRESTO_CMD_MAX + 1] = {
	[PRESTO_CMD_REGISTER]	= A(FILESET),
	[PRESTO_CMD_UNREGISTER]	= A(FILESET),
	[PRESTO_CMD_SET_EPOCH]	= A(FILESET) | A(EPOCH),
	[PRESTO_CMD_REPLY]	= A(FILESET) | A(REQ) | A(ERRNO),
	[PRESTO_CMD_PROGRESS]	= A(FILESET) | A(REQ),
	[PRESTO_CMD_BREAK]	= A(FILESET) | A(HANDLE) | A(FLAGS),
	[PRESTO_CMD_SET_FLAGS]	= A(FILESET) | A(HANDLE) | A(FLAGS) | A(EPOCH),
	[PRESTO_CMD_PURGE]	= A(FILESET) | A(HANDLE),
	[PRESTO_CMD_STATS]	= A(FILESET),
};
#undef A

static int presto_get_handle(struct genl_info *info, struct presto_handle *h)
{
	nla_memcpy(h, info->attrs[PRESTO_A_HANDLE], sizeof(*h));
	if (h->pad) {
		GENL_SET_ERR_MSG(info, "presto: handle padding is not zero");
		return -EINVAL;
	}
	return 0;
}

/*
 * Every command: the caller may act for lento (CAP_SYS_ADMIN, checked on
 * the socket, since the family flag would check CAP_NET_ADMIN), its
 * attributes are all there, its fileset exists; all but REGISTER and
 * STATS come from the fileset's lento. On success info->user_ptr[0]
 * holds a reference to the fileset.
 */
static int presto_pre_doit(const struct genl_ops *ops, struct sk_buff *skb,
			   struct genl_info *info)
{
	u8 cmd = ops->cmd;
	struct presto_fileset *fs;
	const char *name;
	int a;

	if (cmd != PRESTO_CMD_STATS && !netlink_capable(skb, CAP_SYS_ADMIN))
		return -EPERM;
	for (a = 1; a <= PRESTO_A_MAX; a++) {
		if ((presto_cmd_attrs[cmd] & BIT(a)) && !info->attrs[a]) {
			GENL_SET_ERR_MSG(info, "presto: an attribute is missing");
			return -EINVAL;
		}
	}
	name = nla_data(info->attrs[PRESTO_A_FILESET]);
	if (!presto_fileset_name_ok(name)) {
		GENL_SET_ERR_MSG(info, "presto: not a fileset name");
		return -EINVAL;
	}
	fs = presto_fileset_get(name, cmd == PRESTO_CMD_REGISTER);
	if (!fs)
		return cmd == PRESTO_CMD_REGISTER ? -ENOMEM : -ENOENT;
	if (cmd != PRESTO_CMD_REGISTER && cmd != PRESTO_CMD_STATS &&
	    READ_ONCE(fs->portid) != info->snd_portid) {
		presto_fileset_put(fs);
		GENL_SET_ERR_MSG(info, "presto: not this fileset's lento");
		return -EPERM;
	}
	info->user_ptr[0] = fs;
	return 0;
}

static void presto_post_doit(const struct genl_ops *ops, struct sk_buff *skb,
			     struct genl_info *info)
{
	if (info->user_ptr[0])
		presto_fileset_put(info->user_ptr[0]);
}

static int presto_cmd_register(struct sk_buff *skb, struct genl_info *info)
{
	struct presto_fileset *fs = info->user_ptr[0];
	struct presto_upcall *up;
	struct sk_buff *msg;
	void *hdr;
	int err = -ENOMEM;

	msg = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!msg)
		return -ENOMEM;
	mutex_lock(&fs->mutex);
	if (fs->portid && fs->portid != info->snd_portid) {
		err = -EBUSY;
		GENL_SET_ERR_MSG(info, "presto: another lento holds the fileset");
		goto out;
	}
	hdr = genlmsg_put_reply(msg, info, &presto_genl_family, 0,
				PRESTO_CMD_REGISTER);
	if (!hdr || nla_put_string(msg, PRESTO_A_FILESET, fs->name) ||
	    presto_put_mount(msg, fs)) {
		err = -EMSGSIZE;
		goto out;
	}
	genlmsg_end(msg, hdr);
	if (!fs->portid)
		kref_get(&fs->ref);	/* lento's, until it goes */
	fs->portid = info->snd_portid;
	err = genlmsg_reply(msg, info);
	msg = NULL;
	/* Everything still pending goes to this lento. */
	list_for_each_entry(up, &fs->upcalls, node)
		up->sent = false;
	presto_resend_all(fs);
out:
	mutex_unlock(&fs->mutex);
	nlmsg_free(msg);
	return err;
}

/* The lento @portid of @fs goes (UNREGISTER, or its socket closed). */
static void presto_unregister(struct presto_fileset *fs, u32 portid)
{
	bool had;

	mutex_lock(&fs->mutex);
	had = fs->portid == portid;
	if (had)
		presto_lento_gone(fs);
	mutex_unlock(&fs->mutex);
	if (had)
		presto_fileset_put(fs);
}

static int presto_cmd_unregister(struct sk_buff *skb, struct genl_info *info)
{
	presto_unregister(info->user_ptr[0], info->snd_portid);
	return 0;
}

static int presto_cmd_set_epoch(struct sk_buff *skb, struct genl_info *info)
{
	struct presto_fileset *fs = info->user_ptr[0];
	u64 epoch = nla_get_u64(info->attrs[PRESTO_A_EPOCH]);
	int ret = -ENOENT;

	mutex_lock(&fs->mutex);
	if (fs->sb) {
		WRITE_ONCE(presto_sb(fs->sb)->epoch, epoch);
		ret = 0;
	}
	mutex_unlock(&fs->mutex);
	return ret;
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

static int presto_cmd_reply(struct sk_buff *skb, struct genl_info *info)
{
	struct presto_fileset *fs = info->user_ptr[0];
	u64 id = nla_get_u64(info->attrs[PRESTO_A_REQ]);
	u32 err = nla_get_u32(info->attrs[PRESTO_A_ERRNO]);
	struct nlattr *flags = info->attrs[PRESTO_A_FLAGS];
	struct nlattr *epoch = info->attrs[PRESTO_A_EPOCH];
	struct presto_upcall *up;
	int ret = 0;

	if (!flags != !epoch || (err && flags)) {
		GENL_SET_ERR_MSG(info, "presto: FLAGS and EPOCH go together, with ERRNO 0");
		return -EINVAL;
	}
	mutex_lock(&fs->mutex);
	up = presto_upcall_by_id(fs, id);
	if (!up) {
		ret = -ESRCH;
		goto out;
	}
	/* Flags first: a waiter woken finds them set. */
	if (flags && fs->sb)
		presto_cb_apply(fs->sb, &up->handle, nla_get_u32(flags), 0,
				nla_get_u64(epoch));
	presto_upcall_done(fs, up, -(int)err);
out:
	mutex_unlock(&fs->mutex);
	return ret;
}

static int presto_cmd_progress(struct sk_buff *skb, struct genl_info *info)
{
	struct presto_fileset *fs = info->user_ptr[0];
	struct presto_upcall *up;
	int ret = -ESRCH;

	mutex_lock(&fs->mutex);
	up = presto_upcall_by_id(fs, nla_get_u64(info->attrs[PRESTO_A_REQ]));
	if (up && fs->sb) {
		WRITE_ONCE(up->progress_until,
			   jiffies + presto_sb(fs->sb)->timeout);
		ret = 0;
	}
	mutex_unlock(&fs->mutex);
	return ret;
}

/* BREAK, SET_FLAGS and PURGE: the object named by HANDLE. */
static int presto_cmd_object(struct sk_buff *skb, struct genl_info *info)
{
	struct presto_fileset *fs = info->user_ptr[0];
	u32 flags = 0;
	struct presto_handle h;
	int ret;

	ret = presto_get_handle(info, &h);
	if (ret)
		return ret;
	if (info->attrs[PRESTO_A_FLAGS])
		flags = nla_get_u32(info->attrs[PRESTO_A_FLAGS]);
	mutex_lock(&fs->mutex);
	if (!fs->sb) {
		ret = -ENOENT;
		goto out;
	}
	switch (info->genlhdr->cmd) {
	case PRESTO_CMD_BREAK:
		if (presto_cb_apply(fs->sb, &h, 0, flags, 0))
			presto_count(fs, PRESTO_ST_BREAKS);
		break;
	case PRESTO_CMD_SET_FLAGS:
		presto_cb_apply(fs->sb, &h, flags, 0,
				nla_get_u64(info->attrs[PRESTO_A_EPOCH]));
		break;
	case PRESTO_CMD_PURGE:
		ret = presto_cb_purge(fs->sb, &h);
		break;
	}
out:
	mutex_unlock(&fs->mutex);
	return ret;
}

static int presto_cmd_stats(struct sk_buff *skb, struct genl_info *info)
{
	struct presto_fileset *fs = info->user_ptr[0];
	u64 v[PRESTO_ST_NR];
	struct sk_buff *msg;
	struct nlattr *nest;
	void *hdr;
	int i;

	msg = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!msg)
		return -ENOMEM;
	hdr = genlmsg_put_reply(msg, info, &presto_genl_family, 0,
				PRESTO_CMD_STATS);
	if (!hdr || nla_put_string(msg, PRESTO_A_FILESET, fs->name))
		goto too_big;
	mutex_lock(&fs->mutex);
	i = presto_put_mount(msg, fs);
	mutex_unlock(&fs->mutex);
	if (i)
		goto too_big;
	nest = nla_nest_start(msg, PRESTO_A_STAT);
	if (!nest)
		goto too_big;
	presto_fileset_stats(fs, v);
	for (i = 0; i < PRESTO_ST_NR; i++)
		if (nla_put_u64_64bit(msg, PRESTO_S_UPCALLS + i, v[i],
				      PRESTO_S_PAD))
			goto too_big;
	if (nla_put_u64_64bit(msg, PRESTO_S_PENDING, READ_ONCE(fs->pending),
			      PRESTO_S_PAD) ||
	    nla_put_u64_64bit(msg, PRESTO_S_REGISTERED, !!READ_ONCE(fs->portid),
			      PRESTO_S_PAD))
		goto too_big;
	nla_nest_end(msg, nest);
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);
too_big:
	nlmsg_free(msg);
	return -EMSGSIZE;
}

static const struct genl_small_ops presto_ops[] = {
	{ .cmd = PRESTO_CMD_REGISTER, .doit = presto_cmd_register },
	{ .cmd = PRESTO_CMD_UNREGISTER, .doit = presto_cmd_unregister },
	{ .cmd = PRESTO_CMD_SET_EPOCH, .doit = presto_cmd_set_epoch },
	{ .cmd = PRESTO_CMD_REPLY, .doit = presto_cmd_reply },
	{ .cmd = PRESTO_CMD_PROGRESS, .doit = presto_cmd_progress },
	{ .cmd = PRESTO_CMD_BREAK, .doit = presto_cmd_object },
	{ .cmd = PRESTO_CMD_SET_FLAGS, .doit = presto_cmd_object },
	{ .cmd = PRESTO_CMD_PURGE, .doit = presto_cmd_object },
	{ .cmd = PRESTO_CMD_STATS, .doit = presto_cmd_stats },
};

static struct genl_family presto_genl_family __ro_after_init = {
	.name		= PRESTO_GENL_NAME,
	.version	= PRESTO_GENL_VERSION,
	.maxattr	= PRESTO_A_MAX,
	.policy		= presto_policy,
	/* Strict validation of every command. */
	.resv_start_op	= PRESTO_CMD_MAX + 1,
	/* Handlers take their own locks; none waits under genl_mutex. */
	.parallel_ops	= true,
	.pre_doit	= presto_pre_doit,
	.post_doit	= presto_post_doit,
	.small_ops	= presto_ops,
	.n_small_ops	= ARRAY_SIZE(presto_ops),
	.module		= THIS_MODULE,
};

/* A netlink socket closed: if it was a lento, it is gone at once. */
static int presto_netlink_notify(struct notifier_block *nb,
				 unsigned long state, void *data)
{
	struct netlink_notify *n = data;
	struct presto_fileset *fs, *gone[8];
	int i, nr;

	if (state != NETLINK_URELEASE || n->protocol != NETLINK_GENERIC ||
	    !n->portid)
		return NOTIFY_DONE;
	do {
		nr = 0;
		mutex_lock(&presto_filesets_lock);
		list_for_each_entry(fs, &presto_filesets, node) {
			if (READ_ONCE(fs->portid) != n->portid)
				continue;
			kref_get(&fs->ref);
			gone[nr++] = fs;
			if (nr == ARRAY_SIZE(gone))
				break;
		}
		mutex_unlock(&presto_filesets_lock);
		for (i = 0; i < nr; i++) {
			presto_unregister(gone[i], n->portid);
			presto_fileset_put(gone[i]);
		}
	} while (nr == ARRAY_SIZE(gone));
	return NOTIFY_OK;
}

static struct notifier_block presto_netlink_nb = {
	.notifier_call = presto_netlink_notify,
};

int presto_channel_init(void)
{
	int err;

	err = genl_register_family(&presto_genl_family);
	if (err)
		return err;
	err = netlink_register_notifier(&presto_netlink_nb);
	if (err)
		genl_unregister_family(&presto_genl_family);
	return err;
}

void presto_channel_exit(void)
{
	struct presto_fileset *fs, *tmp;

	genl_unregister_family(&presto_genl_family);
	netlink_unregister_notifier(&presto_netlink_nb);
	/* No mount is left (the module is in use while one is): lentos. */
	list_for_each_entry_safe(fs, tmp, &presto_filesets, node) {
		if (WARN_ON_ONCE(fs->sb))
			continue;
		presto_unregister(fs, fs->portid);
	}
}
