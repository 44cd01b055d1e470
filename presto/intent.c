// SPDX-License-Identifier: GPL-2.0
/*
 * Intent marks: what recovery at mount needs to find the changes a crash
 * kept in the cache but whose records it lost (protocol/KML.md).
 *
 * ext4 does not order a record's bytes in a log segment with the change
 * the record describes; it does order its own metadata, one jbd2
 * transaction after another. So before a change, presto makes sure the
 * object whose state changes is marked, and a mark is a directory entry:
 * a hard link CACHE/.presto/intent/m.INO.GEN.SECS to an anchor file. A
 * link made before the change is in the same jbd2 transaction as the
 * change or an earlier one, so a change on disk implies its mark on disk.
 * A link costs no inode and no block allocation; ext4 allows 65000 links
 * per anchor, and presto makes another anchor when one is full.
 *
 * Marks are few and long-lived: a mark stays while changes to its object
 * are in flight or their records are not durable, so a directory that a
 * tar unpack fills is marked once. The records that a mark covers are
 * durable once the log is durable up to the mark's last_seq (the log is
 * durable in prefix order); the sweep then removes the link.
 *
 * Links are made and removed by an ordered workqueue, never by the caller:
 * page_mkwrite() needs a mark with the mmap lock held, and taking a
 * directory's i_rwsem there would invert readdir's order (i_rwsem, then
 * a fault). A caller waits (killable) for its mark, holding no lower lock
 * and no write access to the lower.
 *
 * An in-place overwrite of a block that is already on disk is not ordered
 * by ext4 at all: the block may reach the disk before the transaction
 * holding the mark commits. presto_mark_commit() makes sure the mark is
 * committed first (one fsync of the intent directory per mark, not per
 * write).
 */
#include <linux/cred.h>
#include <linux/hashtable.h>
#include <linux/namei.h>
#include <linux/slab.h>
#include <linux/workqueue.h>
#include "presto.h"

#define PRESTO_INTENT_DIR	"intent"
/*
 * A mark stays this long after its last use, so that a directory or file
 * in steady use (an append-and-fsync loop) is not marked and unmarked over
 * and over.
 */
#define PRESTO_MARK_IDLE	(5 * HZ)

enum presto_mark_state {
	PRESTO_MARK_SETTING,	/* the link is being made */
	PRESTO_MARK_SET,	/* the link exists */
	PRESTO_MARK_FAILED,	/* it could not be made: ->err */
	PRESTO_MARK_CLEARING,	/* the sweep is removing the link */
};

struct presto_mark {
	struct hlist_node node;		/* in presto_intent.marks */
	struct list_head sweep;		/* on the sweep's private list */
	struct work_struct work;	/* makes the link */
	struct presto_intent *in;
	u64 ino;			/* the marked lower object */
	u32 gen;
	s64 secs;			/* when the mark was asked for */
	/* Under presto_intent.lock: */
	unsigned int users;		/* changes, files and waiters */
	enum presto_mark_state state;
	int err;
	u64 last_seq;			/* last record logged under the mark */
	u64 set_gen;			/* linked as the set_gen'th mark */
	unsigned long idle_since;	/* jiffies when users became 0 */
};

struct presto_intent {
	struct super_block *sb;
	struct path dir;		/* CACHE/.presto/intent */
	struct file *dir_file;		/* for presto_mark_commit() */
	struct dentry *anchor;		/* the file links point to */
	unsigned int anchor_no;
	struct workqueue_struct *wq;	/* ordered: links and sweeps */
	struct delayed_work sweep_work;
	wait_queue_head_t wait;		/* a mark changed state */

	spinlock_t lock;		/* everything below */
	DECLARE_HASHTABLE(marks, 8);
	u64 durable;			/* the log is durable up to here */
	u64 set_gen;			/* marks linked so far */
	u64 committed_gen;		/* marks known to be on disk */
	unsigned int cleared_gen;	/* bumped after each sweep */
};

static void presto_mark_name(char *buf, size_t size, const struct presto_mark *m)
{
	snprintf(buf, size, "m.%llu.%u.%lld", m->ino, m->gen, m->secs);
}

static struct presto_mark *presto_mark_find(struct presto_intent *in,
					    const struct inode *lower)
{
	struct presto_mark *m;

	hash_for_each_possible(in->marks, m, node, lower->i_ino)
		if (m->ino == lower->i_ino && m->gen == lower->i_generation)
			return m;
	return NULL;
}

/* Under the intent directory's lock: a new anchor, anchor.N. */
static int presto_intent_new_anchor(struct presto_intent *in)
{
	struct inode *dir = d_inode(in->dir.dentry);
	struct dentry *d;
	char name[32];
	int err;

	snprintf(name, sizeof(name), "anchor.%u", in->anchor_no + 1);
	d = lookup_one_len(name, in->dir.dentry, strlen(name));
	if (IS_ERR(d))
		return PTR_ERR(d);
	err = 0;
	if (d_is_negative(d))
		err = vfs_create(&init_user_ns, dir, d, S_IFREG | 0600, true);
	if (err) {
		dput(d);
		return err;
	}
	dput(in->anchor);
	in->anchor = d;
	in->anchor_no++;
	return 0;
}

static int presto_mark_link(struct presto_intent *in, struct presto_mark *m)
{
	struct inode *dir = d_inode(in->dir.dentry);
	struct dentry *d;
	char name[64];
	int err;

	presto_mark_name(name, sizeof(name), m);
	err = mnt_want_write(in->dir.mnt);
	if (err)
		return err;
	inode_lock_nested(dir, I_MUTEX_PARENT);
	d = lookup_one_len(name, in->dir.dentry, strlen(name));
	err = PTR_ERR(d);
	if (IS_ERR(d))
		goto unlock;
	err = 0;
	if (d_is_positive(d))	/* asked again within the same second */
		goto put;
	err = vfs_link(in->anchor, &init_user_ns, dir, d, NULL);
	if (err == -EMLINK) {
		err = presto_intent_new_anchor(in);
		if (!err)
			err = vfs_link(in->anchor, &init_user_ns, dir, d, NULL);
	}
put:
	dput(d);
unlock:
	inode_unlock(dir);
	mnt_drop_write(in->dir.mnt);
	return err;
}

/* Under in->lock: @m has no users left. Should the caller free it? */
static bool presto_mark_unused(struct presto_intent *in, struct presto_mark *m)
{
	if (m->state == PRESTO_MARK_FAILED)
		return true;
	m->idle_since = jiffies;
	queue_delayed_work(in->wq, &in->sweep_work, PRESTO_MARK_IDLE);
	return false;
}

static void presto_mark_work(struct work_struct *work)
{
	struct presto_mark *m = container_of(work, struct presto_mark, work);
	struct presto_intent *in = m->in;
	const struct cred *old;
	bool free = false;
	int err;

	old = override_creds(presto_sb(in->sb)->creds);
	err = presto_mark_link(in, m);
	revert_creds(old);
	if (err)
		pr_warn_ratelimited("presto: %s: cannot set an intent mark (error %d)\n",
				    presto_sb(in->sb)->lower_name, err);
	spin_lock(&in->lock);
	if (err) {
		/* Its users see the error; the next change tries anew. */
		m->state = PRESTO_MARK_FAILED;
		m->err = err;
		hash_del(&m->node);
	} else {
		m->state = PRESTO_MARK_SET;
		m->set_gen = ++in->set_gen;
	}
	if (!m->users)
		free = presto_mark_unused(in, m);
	spin_unlock(&in->lock);
	wake_up_all(&in->wait);
	if (free)
		kfree(m);
}

/*
 * Mark @lower (a lower inode of this fileset) before changing it or its
 * entries, and return the mark, held: let go of it with presto_mark_put().
 * Waits for the link (killable); the caller holds no lower lock and no
 * write access to the lower.
 */
struct presto_mark *presto_mark_get(struct super_block *sb,
				    struct inode *lower)
{
	struct presto_intent *in = presto_sb(sb)->intent;
	struct presto_mark *m, *new = NULL;
	unsigned int cleared;
	int err;

again:
	spin_lock(&in->lock);
	m = presto_mark_find(in, lower);
	if (m && m->state == PRESTO_MARK_CLEARING) {
		/* Being removed: wait until it is gone, then set it anew. */
		cleared = in->cleared_gen;
		spin_unlock(&in->lock);
		err = wait_event_killable(in->wait,
					  READ_ONCE(in->cleared_gen) != cleared);
		if (err)
			goto fail;
		goto again;
	}
	if (!m && !new) {
		spin_unlock(&in->lock);
		new = kzalloc(sizeof(*new), GFP_KERNEL);
		err = -ENOMEM;
		if (!new)
			goto fail;
		goto again;
	}
	if (!m) {
		m = new;
		new = NULL;
		m->in = in;
		m->ino = lower->i_ino;
		m->gen = lower->i_generation;
		m->secs = ktime_get_real_seconds();
		m->state = PRESTO_MARK_SETTING;
		INIT_WORK(&m->work, presto_mark_work);
		hash_add(in->marks, &m->node, m->ino);
		queue_work(in->wq, &m->work);
	}
	m->users++;
	spin_unlock(&in->lock);
	kfree(new);

	err = wait_event_killable(in->wait,
				  READ_ONCE(m->state) != PRESTO_MARK_SETTING);
	if (!err && READ_ONCE(m->state) == PRESTO_MARK_FAILED)
		err = m->err;
	if (err) {
		presto_mark_put(sb, m, 0);
		return ERR_PTR(err);
	}
	return m;
fail:
	kfree(new);
	return ERR_PTR(err);
}

/* Another user of @m, which the caller holds. */
void presto_mark_hold(struct super_block *sb, struct presto_mark *m)
{
	struct presto_intent *in = presto_sb(sb)->intent;

	spin_lock(&in->lock);
	m->users++;
	spin_unlock(&in->lock);
}

/* Let go of @m; @seq is the last record logged under it (0: none). */
void presto_mark_put(struct super_block *sb, struct presto_mark *m, u64 seq)
{
	struct presto_intent *in = presto_sb(sb)->intent;
	bool free = false;

	if (!m)
		return;
	spin_lock(&in->lock);
	m->last_seq = max(m->last_seq, seq);
	if (!--m->users)
		free = presto_mark_unused(in, m);
	spin_unlock(&in->lock);
	if (free)
		kfree(m);
}

/* Is @m the mark of @lower? */
bool presto_mark_is(const struct presto_mark *m, const struct inode *lower)
{
	return m->ino == lower->i_ino && m->gen == lower->i_generation;
}

/*
 * Before an in-place overwrite under @m: make sure the mark is on disk.
 * An fsync of the intent directory commits the jbd2 transaction of every
 * link made before it.
 */
int presto_mark_commit(struct super_block *sb, struct presto_mark *m)
{
	struct presto_intent *in = presto_sb(sb)->intent;
	bool committed;
	u64 gen;
	int err;

	spin_lock(&in->lock);
	gen = in->set_gen;
	committed = m->set_gen <= in->committed_gen;
	spin_unlock(&in->lock);
	if (committed)
		return 0;
	err = vfs_fsync(in->dir_file, 0);
	if (err)
		return err;
	spin_lock(&in->lock);
	in->committed_gen = max(in->committed_gen, gen);
	spin_unlock(&in->lock);
	return 0;
}

/*
 * Remove the links of marks unused for a while whose records are all
 * durable (@all: of every unused mark whose records are durable).
 */
static void presto_intent_do_sweep(struct presto_intent *in, bool all)
{
	struct presto_mark *m, *next;
	const struct cred *old;
	bool again = false;
	LIST_HEAD(sweep);
	char name[64];
	unsigned int bkt;

	spin_lock(&in->lock);
	hash_for_each(in->marks, bkt, m, node) {
		if (m->state != PRESTO_MARK_SET || m->users)
			continue;
		if (m->last_seq <= in->durable &&
		    (all || time_after(jiffies,
				       m->idle_since + PRESTO_MARK_IDLE))) {
			m->state = PRESTO_MARK_CLEARING;
			list_add_tail(&m->sweep, &sweep);
		} else {
			again = true;
		}
	}
	spin_unlock(&in->lock);
	if (again && !all)
		queue_delayed_work(in->wq, &in->sweep_work, PRESTO_MARK_IDLE);
	if (list_empty(&sweep))
		return;

	old = override_creds(presto_sb(in->sb)->creds);
	list_for_each_entry(m, &sweep, sweep) {
		int err;

		presto_mark_name(name, sizeof(name), m);
		err = presto_private_unlink(&in->dir, name);
		/* A mark left behind costs a recovery a look; no more. */
		if (err)
			pr_warn_ratelimited("presto: %s: cannot remove intent mark %s (error %d)\n",
					    presto_sb(in->sb)->lower_name, name,
					    err);
	}
	revert_creds(old);

	spin_lock(&in->lock);
	list_for_each_entry(m, &sweep, sweep)
		hash_del(&m->node);
	in->cleared_gen++;
	spin_unlock(&in->lock);
	wake_up_all(&in->wait);
	list_for_each_entry_safe(m, next, &sweep, sweep)
		kfree(m);
}

static void presto_intent_sweep(struct work_struct *work)
{
	presto_intent_do_sweep(container_of(to_delayed_work(work),
					    struct presto_intent, sweep_work),
			       false);
}

/* From the journal thread: every record up to @seq is durable. */
void presto_intent_durable(struct super_block *sb, u64 seq)
{
	/* Pairs with the release in presto_intent_open(). */
	struct presto_intent *in = smp_load_acquire(&presto_sb(sb)->intent);

	if (!in)	/* not yet, at mount */
		return;
	spin_lock(&in->lock);
	in->durable = max(in->durable, seq);
	spin_unlock(&in->lock);
}

/* Keep anchor.0 (made if missing) and remove the other anchors. */
static int presto_intent_reset_anchors(struct presto_intent *in,
				       unsigned int anchors)
{
	char name[32];
	unsigned int i;
	int err;

	for (i = 1; i < anchors; i++) {
		snprintf(name, sizeof(name), "anchor.%u", i);
		err = presto_private_unlink(&in->dir, name);
		if (err)
			return err;
	}
	err = mnt_want_write(in->dir.mnt);
	if (err)
		return err;
	inode_lock_nested(d_inode(in->dir.dentry), I_MUTEX_PARENT);
	in->anchor_no = -1U;	/* the next is anchor.0 */
	err = presto_intent_new_anchor(in);
	inode_unlock(d_inode(in->dir.dentry));
	mnt_drop_write(in->dir.mnt);
	return err;
}

/* Remove a mark that recovery has logged, by its name. */
int presto_intent_remove(struct super_block *sb, const char *name)
{
	return presto_private_unlink(&presto_sb(sb)->intent->dir, name);
}

const struct path *presto_intent_dir(struct super_block *sb)
{
	return &presto_sb(sb)->intent->dir;
}

/*
 * At mount, with the log open: find the intent directory (make it if it
 * is missing), let recovery log what marks are left, and get ready.
 */
int presto_intent_open(struct super_block *sb)
{
	struct presto_intent *in;
	unsigned int anchors = 0;
	struct path private;
	int err;

	in = kzalloc(sizeof(*in), GFP_KERNEL);
	if (!in)
		return -ENOMEM;
	in->sb = sb;
	spin_lock_init(&in->lock);
	hash_init(in->marks);
	init_waitqueue_head(&in->wait);
	INIT_DELAYED_WORK(&in->sweep_work, presto_intent_sweep);
	in->wq = alloc_ordered_workqueue("presto_intent", WQ_MEM_RECLAIM);
	if (!in->wq) {
		kfree(in);
		return -ENOMEM;
	}
	/* The journal thread reads it (presto_intent_durable()). */
	smp_store_release(&presto_sb(sb)->intent, in);

	err = presto_private_dir(&presto_sb(sb)->lower, PRESTO_RESERVED_NAME,
				 &private);
	if (err)
		return err;
	err = presto_private_dir(&private, PRESTO_INTENT_DIR, &in->dir);
	path_put(&private);
	if (err)
		return err;
	err = presto_recover(sb, &anchors);
	if (err)
		return err;
	err = presto_intent_reset_anchors(in, anchors);
	if (err)
		return err;
	in->dir_file = dentry_open(&in->dir, O_RDONLY | O_DIRECTORY,
				   presto_sb(sb)->creds);
	if (IS_ERR(in->dir_file)) {
		err = PTR_ERR(in->dir_file);
		in->dir_file = NULL;
		return err;
	}
	return 0;
}

/*
 * After the log is closed (its last records durable, if it could write
 * them): remove the marks of what is durable. Nothing holds a mark now.
 */
void presto_intent_close(struct super_block *sb)
{
	struct presto_intent *in = presto_sb(sb)->intent;
	struct presto_mark *m;
	struct hlist_node *tmp;
	unsigned int bkt;

	if (!in)
		return;
	cancel_delayed_work_sync(&in->sweep_work);
	flush_workqueue(in->wq);
	if (in->dir_file)	/* open succeeded */
		presto_intent_do_sweep(in, true);
	destroy_workqueue(in->wq);
	hash_for_each_safe(in->marks, bkt, tmp, m, node) {
		/* Left on disk for the next mount's recovery. */
		WARN_ON_ONCE(m->users);
		hash_del(&m->node);
		kfree(m);
	}
	if (in->dir_file)
		fput(in->dir_file);
	dput(in->anchor);
	path_put(&in->dir);
	kfree(in);
	presto_sb(sb)->intent = NULL;
}
