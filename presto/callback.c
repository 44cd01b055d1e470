// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel callbacks: per object, what presto may serve from the cache
 * without asking lento (protocol/KERNEL.md). ATTR: the attributes are
 * current; DATA: a file's content, or a directory's listing, is complete.
 *
 * The flags come from lento: in the xattr it writes on the lower inode
 * (read once, when presto first meets the inode), in its answers to
 * upcalls, and in downcalls. They count while their epoch is the one lento
 * confirmed for the fileset, so one SET_EPOCH turns all of them off, and
 * a remounted warm cache is served again once lento says its volume has
 * not changed. Objects made through the mount are complete by
 * construction (PRESTO_EPOCH_LOCAL) until lento says otherwise.
 *
 * A local mount (no fileset=) has everything.
 */
#include <linux/xattr.h>
#include "presto.h"

/* The flags lento persisted on @lower into @x: false if none. */
static bool presto_cb_read(struct dentry *lower, struct presto_cb_xattr *x)
{
	/* No permission check: this is presto reading its own state. */
	ssize_t n = __vfs_getxattr(lower, d_inode(lower), PRESTO_CB_XATTR, x,
				   sizeof(*x));

	/* An epoch of presto's own is no epoch lento could confirm. */
	return n == sizeof(*x) && x->version == PRESTO_CB_XATTR_VERSION &&
	       le64_to_cpu(x->epoch) != PRESTO_EPOCH_LOCAL;
}

/* Caller holds @inode's i_lock. */
static void presto_cb_store(struct inode *inode,
			    const struct presto_cb_xattr *x)
{
	struct presto_inode *pi = PRESTO_I(inode);

	WRITE_ONCE(pi->cb_flags, x->flags & PRESTO_CB_ALL);
	WRITE_ONCE(pi->cb_epoch, le64_to_cpu(x->epoch));
	WRITE_ONCE(pi->cb_nlink, le32_to_cpu(x->nlink));
}

/* @inode was just made from @lower: its persisted flags, if any. */
void presto_cb_load(struct inode *inode, struct dentry *lower)
{
	struct presto_cb_xattr x;

	if (!presto_sb(inode->i_sb)->fileset || !presto_cb_read(lower, &x))
		return;
	spin_lock(&inode->i_lock);
	presto_cb_store(inode, &x);
	spin_unlock(&inode->i_lock);
}

/*
 * Before asking lento, look at what it persisted: it writes the xattr of
 * everything it fills, and a listing rewrites its children's, so an inode
 * presto held with flags of an older epoch (or none) is often complete
 * already. One xattr read instead of an upcall. The lower has an alias
 * while presto holds the inode (presto's dentry pins it).
 *
 * lento writes the xattr before the downcall that says the same: a BREAK
 * or PURGE that came while the xattr was being read says more than what
 * was read, which must not overwrite it (cb_gen tells).
 */
static bool presto_cb_reload(struct inode *inode, u32 want)
{
	struct presto_inode *pi = PRESTO_I(inode);
	struct inode *lower = presto_lower_inode(inode);
	struct dentry *alias = d_find_any_alias(lower);
	struct presto_cb_xattr x;
	bool read;
	u32 gen;

	if (!alias)
		return false;
	spin_lock(&inode->i_lock);
	gen = pi->cb_gen;
	spin_unlock(&inode->i_lock);
	read = presto_cb_read(alias, &x);
	dput(alias);
	if (!read)
		return false;
	spin_lock(&inode->i_lock);
	if (pi->cb_gen == gen)
		presto_cb_store(inode, &x);
	spin_unlock(&inode->i_lock);
	return presto_cb_valid(inode, want);
}

/* @inode was made through the mount: nothing of it is elsewhere. */
void presto_cb_local(struct inode *inode)
{
	struct presto_inode *pi = PRESTO_I(inode);

	spin_lock(&inode->i_lock);
	WRITE_ONCE(pi->cb_flags, PRESTO_CB_ALL);
	WRITE_ONCE(pi->cb_epoch, PRESTO_EPOCH_LOCAL);
	spin_unlock(&inode->i_lock);
}

/*
 * Make sure @inode has @want, asking lento if it has not: 0, or why it
 * could not be had. Sleeps; callers in RCU walk use presto_cb_valid().
 */
int presto_cb_need(struct inode *inode, u32 want)
{
	u32 op;

	if (presto_cb_valid(inode, want))
		return 0;
	/*
	 * An object lento replaced (or that was removed) is what it was
	 * when its last name went: files still open on it keep working on
	 * it, stat included, with nothing to ask.
	 */
	if (!READ_ONCE(presto_lower_inode(inode)->i_nlink))
		return 0;
	/*
	 * The root's attributes are the cache's own: a stat of the mount
	 * point (umount(8) makes one, df too) never waits for lento.
	 */
	if (!(want & PRESTO_CB_DATA) && inode == d_inode(inode->i_sb->s_root))
		return 0;
	if (presto_cb_reload(inode, want))
		return 0;
	if (!(want & PRESTO_CB_DATA))
		op = PRESTO_OP_FETCH_ATTR;
	else if (S_ISDIR(inode->i_mode))
		op = PRESTO_OP_FETCH_DIR;
	else
		op = PRESTO_OP_FETCH_FILE;
	return presto_upcall(inode, op);
}

/* Set @set (if @epoch is the fileset's) and clear @clear on @inode. */
void presto_cb_change(struct inode *inode, u32 set, u32 clear, u64 epoch)
{
	struct presto_inode *pi = PRESTO_I(inode);
	u32 flags;

	spin_lock(&inode->i_lock);
	flags = pi->cb_flags;
	if (set && epoch == READ_ONCE(presto_sb(inode->i_sb)->epoch)) {
		if (pi->cb_epoch != epoch)
			flags = 0;
		flags |= set;
		WRITE_ONCE(pi->cb_epoch, epoch);
	}
	WRITE_ONCE(pi->cb_flags, flags & ~clear);
	pi->cb_gen++;
	spin_unlock(&inode->i_lock);
	/* lento changed the lower: the VFS's copy follows. */
	presto_copyattr(inode);
}

/*
 * presto_cb_change() on the object named by @h, if presto has it in
 * memory; false if it has not (the flags are read from the xattr when it
 * is met). Caller keeps the superblock alive: the fileset's mutex or a
 * pin (presto_sb_pin()).
 */
bool presto_cb_apply(struct super_block *sb, const struct presto_handle *h,
		     u32 set, u32 clear, u64 epoch)
{
	struct inode *inode = presto_ilookup(sb, h->ino, h->gen);

	if (!inode)
		return false;
	presto_cb_change(inode, set, clear, epoch);
	iput(inode);
	return true;
}

/*
 * lento wants to drop a file's content: take DATA away unless the file is
 * open through the mount, or changed by records lento has not yet
 * acknowledged (-EBUSY): until it has, lento cannot know that the content
 * is the only copy of a change.
 */
int presto_cb_purge(struct super_block *sb, const struct presto_handle *h)
{
	struct inode *inode = presto_ilookup(sb, h->ino, h->gen);
	struct presto_kml_state st;
	struct presto_inode *pi;
	int err = 0;

	if (!inode)
		return 0;
	pi = PRESTO_I(inode);
	if (!S_ISREG(inode->i_mode)) {
		err = -EINVAL;
		goto out;
	}
	presto_journal_state(sb, &st);
	spin_lock(&inode->i_lock);
	/*
	 * Not while open, nor while its last changes are not consumed, nor
	 * while it has changes no STORE covers (one failed to be logged) or
	 * a shared writable mapping that can still make some.
	 */
	if (pi->opens || READ_ONCE(pi->last_seq) > st.acked_seq ||
	    atomic64_read(&pi->data_gen) != READ_ONCE(pi->stored_gen) ||
	    READ_ONCE(pi->writers))
		err = -EBUSY;
	else
		WRITE_ONCE(pi->cb_flags, pi->cb_flags & ~PRESTO_CB_DATA);
	pi->cb_gen++;
	spin_unlock(&inode->i_lock);
out:
	iput(inode);
	return err;
}

/*
 * A regular file is being opened: count the open (a PURGE of an open file
 * is refused) and make sure its content is here. If lento filled it by
 * renaming a new lower file over the name, this open's inode is the old
 * one: -EOPENSTALE has the VFS walk the path again and find the new one.
 */
int presto_cb_open(struct inode *inode, struct file *file)
{
	struct presto_inode *pi = PRESTO_I(inode);
	struct dentry *lower;
	bool have;
	int err;

	if (!presto_sb(inode->i_sb)->fileset)
		return 0;
	spin_lock(&inode->i_lock);
	pi->opens++;
	have = presto_cb_valid(inode, PRESTO_CB_DATA);
	spin_unlock(&inode->i_lock);
	presto_hint_open(inode);
	if (have)
		return 0;
	err = presto_cb_need(inode, PRESTO_CB_DATA);
	if (!err) {
		lower = presto_lower_dentry(file->f_path.dentry);
		if (!lower || d_unhashed(lower) || d_inode(lower) != pi->lower)
			err = -EOPENSTALE;
	}
	if (err)
		presto_cb_close(inode);
	return err;
}

void presto_cb_close(struct inode *inode)
{
	if (!presto_sb(inode->i_sb)->fileset)
		return;
	spin_lock(&inode->i_lock);
	PRESTO_I(inode)->opens--;
	spin_unlock(&inode->i_lock);
}
