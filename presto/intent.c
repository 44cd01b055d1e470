// SPDX-License-Identifier: GPL-2.0
/*
 * Intent marks: what recovery at mount needs to find the changes a crash
 * kept in the cache but whose records it lost (protocol/KML.md).
 *
 * ext4 does not order a record's bytes in a log segment with the change
 * the record describes; it does order its own metadata, one jbd2
 * transaction after another. So before a change, presto makes sure the
 * object whose state changes is marked, and a mark is a directory entry:
 * a hard link CACHE/.presto/intent/BB/m.INO.GEN.SECS to an anchor file
 * CACHE/.presto/intent/anchor.N. A link made before the change is in the
 * same jbd2 transaction as the change or an earlier one, so a change on
 * disk implies its mark on disk. A link costs no inode and no block
 * allocation; ext4 allows 65000 links per anchor, and presto makes
 * another anchor when one is full.
 *
 * BB, two hex digits, is the object's inode number modulo 64. ext4 finds
 * a name, and a place for a new one, by reading a directory block entry
 * by entry: a tar unpack keeps 300 marks at once, and in one directory
 * the entries a link or a removal reads cost more than ext4's own create
 * of the file the mark is for. In 64 buckets they are a few apiece.
 *
 * Marks are few and long-lived: a mark stays while changes to its object
 * are in flight or their records are not durable, so a directory that a
 * tar unpack fills is marked once. The records that a mark covers are
 * durable once the log is durable up to the mark's last_seq (the log is
 * durable in prefix order); the sweep then removes the link.
 *
 * A namespace or attribute change makes its link itself, before it takes
 * write access to the lower or any lower lock: a hand-off to a worker
 * would cost two context switches per new mark (rm -rf marks every
 * directory it empties). A data mark is made by an ordered workqueue:
 * page_mkwrite() needs one with the mmap lock held, and taking a
 * directory's i_rwsem there would invert readdir's order (i_rwsem, then
 * a fault); a writer waits (killable) for it, holding no lower lock and
 * no write access to the lower. Sweeps run on the same workqueue.
 *
 * A file's data is not ordered with its mark either: delayed allocation
 * writes it back long after the STORE that describes it is durable. A
 * mark removed first would leave a crash with a file the cache lost and
 * the server has, and nothing for recovery to find. So a file whose STORE
 * is logged with data still in memory joins the sweep's writeback set, and
 * the sweep writes that set back before it removes a link: a removal on
 * disk then implies the data on disk (presto_intent_writeback()).
 *
 * The other way round, a record may reach the disk before its change: a
 * record written to a segment can be written back at any time (an
 * fsync's cheap way, the flusher, a sync), while its change and often a
 * fresh mark for it are still in ext4's running transaction. A crash then
 * keeps a record of a change that did not happen, and unless the object
 * is marked, recovery restates nothing and the log lies. So the journal
 * thread commits the marks set so far before it writes records
 * (presto_intent_commit()).
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
#include <linux/pagemap.h>
#include <linux/slab.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
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
	struct path bucket[PRESTO_INTENT_BUCKETS];	/* the marks */
	bool ready;			/* open and recovered */
	/* Links, and the anchor they point to, one at a time. */
	struct mutex link_lock;
	struct dentry *anchor;		/* the file links point to */
	unsigned int anchor_no;
	struct workqueue_struct *wq;	/* ordered: links and sweeps */
	struct delayed_work sweep_work;
	wait_queue_head_t wait;		/* a mark changed state */
	/* Lower inodes, by number (generation as value), to write back. */
	struct xarray writeback;

	spinlock_t lock;		/* everything below */
	DECLARE_HASHTABLE(marks, 8);
	u64 durable;			/* the log is durable up to here */
	u64 set_gen;			/* marks linked so far */
	u64 committed_gen;		/* marks known to be on disk */
	/*
	 * The anchor open: every link dirties the anchor's inode, so an
	 * fsync of it commits the jbd2 transaction of the last link made
	 * (and of every one before it) for presto_intent_commit_upto().
	 */
	struct file *anchor_file;
	unsigned int cleared_gen;	/* bumped after each sweep */
};

static void presto_mark_name(char *buf, size_t size, const struct presto_mark *m)
{
	snprintf(buf, size, "m.%llu.%u.%lld", m->ino, m->gen, m->secs);
}

/* The directory that holds the marks of inode @ino. */
static const struct path *presto_bucket(struct presto_intent *in, u64 ino)
{
	return &in->bucket[ino % PRESTO_INTENT_BUCKETS];
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

/*
 * Under in->link_lock and the intent directory's lock, with write access:
 * a new anchor, anchor.N, made the one links point to.
 */
static int presto_intent_new_anchor(struct presto_intent *in)
{
	struct inode *dir = d_inode(in->dir.dentry);
	struct path path = { .mnt = in->dir.mnt };
	struct file *f;
	char name[32];
	int err;

	snprintf(name, sizeof(name), "anchor.%u", in->anchor_no + 1);
	path.dentry = lookup_one_len(name, in->dir.dentry, strlen(name));
	if (IS_ERR(path.dentry))
		return PTR_ERR(path.dentry);
	err = 0;
	if (d_is_negative(path.dentry))
		err = vfs_create(&init_user_ns, dir, path.dentry,
				 S_IFREG | 0600, true);
	if (err)
		goto out;
	f = dentry_open(&path, O_RDONLY, presto_sb(in->sb)->creds);
	err = PTR_ERR(f);
	if (IS_ERR(f))
		goto out;
	spin_lock(&in->lock);
	swap(in->anchor_file, f);
	spin_unlock(&in->lock);
	if (f)
		fput(f);
	swap(in->anchor, path.dentry);
	in->anchor_no++;
	err = 0;
out:
	dput(path.dentry);
	return err;
}

/* Under in->link_lock, with write access: the anchor after a full one. */
static int presto_intent_next_anchor(struct presto_intent *in)
{
	struct inode *dir = d_inode(in->dir.dentry);
	int err;

	inode_lock_nested(dir, I_MUTEX_PARENT);
	err = presto_intent_new_anchor(in);
	inode_unlock(dir);
	return err;
}

/* Under in->link_lock, with write access: link @name in @bucket. */
static int presto_mark_link_in(struct presto_intent *in,
			       const struct path *bucket, const char *name)
{
	struct inode *dir = d_inode(bucket->dentry);
	struct dentry *d;
	int err;

	inode_lock_nested(dir, I_MUTEX_PARENT);
	d = lookup_one_len(name, bucket->dentry, strlen(name));
	err = PTR_ERR(d);
	if (IS_ERR(d))
		goto unlock;
	/* A positive one was asked for again within the same second. */
	err = d_is_positive(d) ? 0 :
	      vfs_link(in->anchor, &init_user_ns, dir, d, NULL);
	dput(d);
unlock:
	inode_unlock(dir);
	return err;
}

static int presto_mark_link(struct presto_intent *in, struct presto_mark *m)
{
	const struct path *bucket = presto_bucket(in, m->ino);
	char name[64];
	int err;

	presto_mark_name(name, sizeof(name), m);
	err = mnt_want_write(bucket->mnt);
	if (err)
		return err;
	mutex_lock(&in->link_lock);
	err = presto_mark_link_in(in, bucket, name);
	if (err == -EMLINK) {
		/* The anchor is full: the next one, made in the parent. */
		err = presto_intent_next_anchor(in);
		if (!err)
			err = presto_mark_link_in(in, bucket, name);
	}
	mutex_unlock(&in->link_lock);
	mnt_drop_write(bucket->mnt);
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

/* Make @m's link, in the caller's context or the worker's. */
static void presto_mark_set(struct presto_mark *m)
{
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

static void presto_mark_work(struct work_struct *work)
{
	presto_mark_set(container_of(work, struct presto_mark, work));
}

/*
 * Mark @lower (a lower inode of this fileset) before changing it or its
 * entries, and return the mark, held: let go of it with presto_mark_put().
 * A new mark's link is made here if @here, else by the workqueue (see
 * above); either way the call returns once the link exists, and a wait
 * for it is killable. The caller holds no lower lock and no write access
 * to the lower.
 */
struct presto_mark *presto_mark_get(struct super_block *sb,
				    struct inode *lower, bool here)
{
	struct presto_intent *in = presto_sb(sb)->intent;
	struct presto_mark *m, *new = NULL;
	unsigned int cleared;
	bool fresh = false;
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
		hash_add(in->marks, &m->node, m->ino);
		fresh = true;
	}
	m->users++;
	spin_unlock(&in->lock);
	kfree(new);
	if (fresh && here) {
		presto_mark_set(m);
	} else if (fresh) {
		INIT_WORK(&m->work, presto_mark_work);
		queue_work(in->wq, &m->work);
	}

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
 * Make sure every mark linked up to the @gen'th is on disk. An fsync of
 * the intent directory commits the jbd2 transaction of every link made
 * before it (the running one: everything else in it too).
 */
static int presto_intent_commit_upto(struct presto_intent *in, u64 gen)
{
	struct file *f;
	bool committed;
	u64 now;
	int err;

	spin_lock(&in->lock);
	now = in->set_gen;
	committed = gen <= in->committed_gen;
	f = committed ? NULL : get_file(in->anchor_file);
	spin_unlock(&in->lock);
	if (committed)
		return 0;
	err = vfs_fsync(f, 0);
	fput(f);
	if (err)
		return err;
	spin_lock(&in->lock);
	in->committed_gen = max(in->committed_gen, now);
	spin_unlock(&in->lock);
	return 0;
}

/* Before an in-place overwrite under @m: make sure the mark is on disk. */
int presto_mark_commit(struct super_block *sb, struct presto_mark *m)
{
	return presto_intent_commit_upto(presto_sb(sb)->intent,
					 READ_ONCE(m->set_gen));
}

/*
 * From the journal thread, before it writes records to the log: every
 * mark set so far is on disk. A record may reach the disk at any time
 * once written (an fsync's write-back, the flusher, a sync), and a change
 * is in ext4's running transaction until that commits, often with the
 * mark just set for it. A record on disk whose change and mark a crash
 * then lost would be a change the log has and the cache does not, with
 * nothing for recovery to restate. The mark of every change whose record
 * is queued was set before the record was committed, so it is among the
 * marks linked so far. Costs a commit only when a new mark was set since
 * the last one.
 */
int presto_intent_commit(struct super_block *sb)
{
	/* Pairs with the release in presto_intent_open(). */
	struct presto_intent *in = smp_load_acquire(&presto_sb(sb)->intent);

	/* At mount: the marks there are the ones recovery found on disk. */
	if (!in || !smp_load_acquire(&in->ready))
		return 0;
	return presto_intent_commit_upto(in, READ_ONCE(in->set_gen));
}

/*
 * A STORE about @lower was logged: its data goes to disk before the next
 * mark is removed. Called before the data mark is let go, so that a sweep
 * that finds the mark unused finds the file here too.
 */
void presto_intent_stored(struct super_block *sb, struct inode *lower)
{
	struct presto_intent *in = presto_sb(sb)->intent;
	struct address_space *mapping = lower->i_mapping;
	void *old;

	if (!mapping_tagged(mapping, PAGECACHE_TAG_DIRTY) &&
	    !mapping_tagged(mapping, PAGECACHE_TAG_WRITEBACK))
		return;
	/*
	 * By number, not held: a file removed meanwhile must free its space
	 * at once (its data no longer matters), and a linked inode with
	 * dirty pages stays in memory, where the sweep finds it.
	 */
	old = xa_store(&in->writeback, lower->i_ino,
		       xa_mk_value(lower->i_generation), GFP_KERNEL);
	if (xa_is_err(old))	/* out of memory: its data goes now */
		filemap_write_and_wait(mapping);
}

/*
 * Write back the data of every file in the writeback set that is still in
 * memory (all of them, also on error: a failure is reported by the return
 * value, and the caller then keeps its marks).
 */
static int presto_intent_writeback(struct presto_intent *in)
{
	struct super_block *lower_sb;
	unsigned long ino;
	void *gen;
	int err = 0;

	if (xa_empty(&in->writeback))	/* also before the open is done */
		return 0;
	lower_sb = in->dir.dentry->d_sb;
	xa_for_each(&in->writeback, ino, gen) {
		struct inode *inode;
		int ret;

		xa_erase(&in->writeback, ino);
		inode = ilookup(lower_sb, ino);
		if (!inode)
			continue;
		ret = inode->i_generation == xa_to_value(gen) ?
		      filemap_write_and_wait(inode->i_mapping) : 0;
		if (ret && !err) {
			pr_warn_ratelimited("presto: %s: cannot write back inode %lu before its mark is removed (error %d)\n",
					    presto_sb(in->sb)->lower_name, ino,
					    ret);
			err = ret;
		}
		iput(inode);
	}
	return err;
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
	if (presto_intent_writeback(in)) {
		/*
		 * The marks stay; the next sweep tries again. Whoever waits
		 * for one of them to go takes it as it is, now.
		 */
		spin_lock(&in->lock);
		list_for_each_entry(m, &sweep, sweep) {
			m->state = PRESTO_MARK_SET;
			m->idle_since = jiffies;
		}
		in->cleared_gen++;
		spin_unlock(&in->lock);
		wake_up_all(&in->wait);
		if (!all)
			queue_delayed_work(in->wq, &in->sweep_work,
					   PRESTO_MARK_IDLE);
		return;
	}

	old = override_creds(presto_sb(in->sb)->creds);
	list_for_each_entry(m, &sweep, sweep) {
		int err;

		presto_mark_name(name, sizeof(name), m);
		err = presto_private_unlink(presto_bucket(in, m->ino), name);
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

/*
 * Keep anchor.0 (made if missing) and remove the other anchors, the
 * @n numbered in @anchors that recovery listed.
 */
static int presto_intent_reset_anchors(struct presto_intent *in,
				       const unsigned int *anchors,
				       unsigned int n)
{
	char name[32];
	unsigned int i;
	int err;

	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "anchor.%u", anchors[i]);
		err = presto_private_unlink(&in->dir, name);
		if (err)
			return err;
	}
	err = mnt_want_write(in->dir.mnt);
	if (err)
		return err;
	mutex_lock(&in->link_lock);
	inode_lock_nested(d_inode(in->dir.dentry), I_MUTEX_PARENT);
	in->anchor_no = -1U;	/* the next is anchor.0 */
	err = presto_intent_new_anchor(in);
	inode_unlock(d_inode(in->dir.dentry));
	mutex_unlock(&in->link_lock);
	mnt_drop_write(in->dir.mnt);
	return err;
}

/* The intent directory (@i < 0), or its @i'th bucket. */
const struct path *presto_intent_dir(struct super_block *sb, int i)
{
	struct presto_intent *in = presto_sb(sb)->intent;

	return i < 0 ? &in->dir : &in->bucket[i];
}

/* Make the buckets that are missing. */
static int presto_intent_buckets(struct presto_intent *in)
{
	char name[8];
	int i, err;

	for (i = 0; i < PRESTO_INTENT_BUCKETS; i++) {
		snprintf(name, sizeof(name), PRESTO_INTENT_BUCKET_FMT, i);
		err = presto_private_dir(&in->dir, name, &in->bucket[i]);
		if (err)
			return err;
	}
	return 0;
}

/*
 * At mount, with the log open: find the intent directory (make it if it
 * is missing), let recovery log what marks are left, and get ready.
 */
int presto_intent_open(struct super_block *sb)
{
	struct presto_intent *in;
	unsigned int *anchors = NULL, nanchors = 0;
	struct path private;
	int err;

	in = kzalloc(sizeof(*in), GFP_KERNEL);
	if (!in)
		return -ENOMEM;
	in->sb = sb;
	spin_lock_init(&in->lock);
	mutex_init(&in->link_lock);
	hash_init(in->marks);
	init_waitqueue_head(&in->wait);
	xa_init(&in->writeback);
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
	err = presto_intent_buckets(in);
	if (err)
		return err;
	err = presto_recover(sb, &anchors, &nanchors);
	if (!err)
		err = presto_intent_reset_anchors(in, anchors, nanchors);
	kfree(anchors);
	if (err)
		return err;
	/* The journal thread reads it (presto_intent_commit()). */
	smp_store_release(&in->ready, true);
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
	int i;

	if (!in)
		return;
	cancel_delayed_work_sync(&in->sweep_work);
	flush_workqueue(in->wq);
	if (in->ready)		/* open succeeded */
		presto_intent_do_sweep(in, true);
	destroy_workqueue(in->wq);
	/* What no sweep took (the open failed, or no mark was left). */
	presto_intent_writeback(in);
	xa_destroy(&in->writeback);
	hash_for_each_safe(in->marks, bkt, tmp, m, node) {
		/* Left on disk for the next mount's recovery. */
		WARN_ON_ONCE(m->users);
		hash_del(&m->node);
		kfree(m);
	}
	if (in->anchor_file)
		fput(in->anchor_file);
	dput(in->anchor);
	for (i = 0; i < PRESTO_INTENT_BUCKETS; i++)
		path_put(&in->bucket[i]);
	path_put(&in->dir);
	kfree(in);
	presto_sb(sb)->intent = NULL;
}
