// SPDX-License-Identifier: GPL-2.0
/*
 * Lookup and dentry revalidation.
 *
 * Each presto dentry holds a reference to the lower dentry of the same
 * name (d_fsdata), negative ones included, so a negative lookup costs
 * nothing the second time. The lower tree may change underneath a live
 * mount (lento fills and updates the cache directly), so every cached
 * presto dentry is revalidated against its lower dentry: still hashed,
 * same lower parent, same name, same lower inode (or still negative).
 * The check is RCU-safe and cheap, so warm path walks stay in RCU mode.
 */
#include <linux/namei.h>
#include "presto.h"

bool presto_is_reserved(const struct inode *dir, const struct qstr *name)
{
	return dir == d_inode(dir->i_sb->s_root) &&
	       name->len == sizeof(PRESTO_RESERVED_NAME) - 1 &&
	       !memcmp(name->name, PRESTO_RESERVED_NAME, name->len);
}

/*
 * Replace the lower dentry of a negative presto dentry. Lock-free readers
 * (d_revalidate) may still see the old one: it stays valid memory until an
 * RCU grace period after the last dput.
 */
void presto_set_lower_dentry(struct dentry *dentry, struct dentry *lower)
{
	struct dentry *old = presto_lower_dentry(dentry);

	WRITE_ONCE(dentry->d_fsdata, lower);
	dput(old);
}

struct dentry *presto_lookup(struct inode *dir, struct dentry *dentry,
			     unsigned int flags)
{
	struct dentry *lparent = presto_lower_dentry(dentry->d_parent);
	struct inode *inode = NULL;
	struct dentry *lower;
	int err;

	/* presto's own files are not part of the tree it shows. */
	if (presto_is_reserved(dir, &dentry->d_name))
		return d_splice_alias(NULL, dentry);
	/* The lower answers once the listing is complete. */
	err = presto_cb_need(dir, PRESTO_CB_DATA);
	if (err)
		return ERR_PTR(err);

	lower = lookup_one_unlocked(presto_lower_userns(dir->i_sb),
				    dentry->d_name.name, lparent,
				    dentry->d_name.len);
	if (IS_ERR(lower))
		return ERR_CAST(lower);

	if (d_is_positive(lower)) {
		inode = presto_iget(dir->i_sb, lower);
		if (IS_ERR(inode)) {
			dput(lower);
			return ERR_CAST(inode);
		}
	}
	dentry->d_fsdata = lower;
	return d_splice_alias(inode, dentry);
}

/*
 * Does @lower still stand where @dentry stands? Runs lock-free: the
 * sequence counts of both dentries catch a concurrent rename, and RCU keeps
 * names and dentries readable meanwhile.
 */
static bool presto_lower_matches(const struct dentry *dentry,
				 const struct dentry *lower)
{
	const struct dentry *parent;
	unsigned int seq, lseq;
	bool ok;

	do {
		seq = read_seqcount_begin(&dentry->d_seq);
		lseq = read_seqcount_begin(&lower->d_seq);
		parent = READ_ONCE(dentry->d_parent);
		ok = !d_unhashed(lower) &&
		     READ_ONCE(lower->d_parent) == presto_lower_dentry(parent) &&
		     lower->d_name.len == dentry->d_name.len &&
		     !memcmp(lower->d_name.name, dentry->d_name.name,
			     dentry->d_name.len);
	} while (read_seqcount_retry(&lower->d_seq, lseq) ||
		 read_seqcount_retry(&dentry->d_seq, seq));
	return ok;
}

/*
 * A fileset's names are as good as their directory's listing: one that
 * lento has not made complete (never, or not since a callback break) is
 * fetched first, and the lower then says whether the name still stands.
 */
static int presto_revalidate_dir(struct dentry *dentry, unsigned int flags)
{
	struct dentry *parent;
	struct inode *dir;
	int err;

	if (flags & LOOKUP_RCU) {
		dir = d_inode_rcu(READ_ONCE(dentry->d_parent));
		return dir && presto_cb_valid(dir, PRESTO_CB_DATA) ? 0 : -ECHILD;
	}
	parent = dget_parent(dentry);
	err = presto_cb_need(d_inode(parent), PRESTO_CB_DATA);
	dput(parent);
	return err;
}

static int presto_d_revalidate(struct dentry *dentry, unsigned int flags)
{
	struct dentry *lower;
	struct inode *inode, *dir;
	int valid;

	if (presto_sb(dentry->d_sb)->fileset) {
		valid = presto_revalidate_dir(dentry, flags);
		if (valid)
			return valid;
	}

	rcu_read_lock();
	lower = presto_lower_dentry(dentry);
	if (!lower) {
		/*
		 * Negative with no lower dentry: the reserved name, negative
		 * for good, or a name removed through presto, which the
		 * lower is asked about again. In an RCU walk the parent may
		 * have turned negative under us (an rmdir): walk again.
		 */
		dir = d_inode_rcu(READ_ONCE(dentry->d_parent));
		if (dir)
			valid = presto_is_reserved(dir, &dentry->d_name);
		else
			valid = flags & LOOKUP_RCU ? -ECHILD : 0;
		rcu_read_unlock();
		return valid;
	}
	inode = d_inode_rcu(dentry);
	valid = presto_lower_matches(dentry, lower) &&
		(inode ? presto_lower_inode(inode) == d_inode_rcu(lower) :
			 !d_inode_rcu(lower));
	/*
	 * Some of the VFS's checks read presto's copy of the attributes,
	 * which ext4 does not make again below: the append-only flag at an
	 * open and a truncate, the owner and set-id bits for
	 * protected_hardlinks. A change made in the cache directly must
	 * reach them (nearly always a comparison that finds nothing to do).
	 */
	if (valid && inode)
		presto_copyattr(inode);
	rcu_read_unlock();
	return valid;
}

/*
 * The presto dentry turns negative (its name was removed through presto)
 * or dies. Its lower dentry may hold the lower inode of a removed name,
 * which ext4 frees only with the last reference: let it go now, so that a
 * cached negative dentry does not keep a removed file's space. The
 * removal may have left a negative lower dentry for the name
 * (presto_keep_negative()): the presto dentry takes it if it still
 * stands where the name was.
 */
static void presto_d_iput(struct dentry *dentry, struct inode *inode)
{
	struct dentry *lower = presto_lower_dentry(dentry);
	struct dentry *neg = xchg(&PRESTO_I(inode)->neg_lower, NULL);
	bool keep = false;

	if (neg) {
		rcu_read_lock();
		keep = presto_lower_matches(dentry, neg) && d_is_negative(neg);
		rcu_read_unlock();
	}
	if (!keep) {
		dput(neg);
		neg = NULL;
	}
	WRITE_ONCE(dentry->d_fsdata, neg);
	dput(lower);
	iput(inode);
}

static void presto_d_release(struct dentry *dentry)
{
	dput(dentry->d_fsdata);
}

/*
 * The dentry of @inode here: presto's own, or the lower dentry if @inode
 * is the lower inode. A lower file of presto's shows presto's path
 * (presto_open_lower()), and the VFS asks here for the dentry that goes
 * with its inode (file_dentry(): a write dropping set-id bits, fscrypt,
 * IMA). With no @inode: the dentry that holds a regular file's data
 * (d_real_inode(): uprobes, IMA), as mappings map the lower file.
 */
static struct dentry *presto_d_real(struct dentry *dentry,
				    const struct inode *inode)
{
	struct dentry *lower;

	if (inode && d_inode(dentry) == inode)
		return dentry;
	lower = presto_lower_dentry(dentry);
	if (!inode)
		return lower && d_is_reg(dentry) ? lower : dentry;
	if (lower && d_inode(lower) == inode)
		return lower;
	WARN_ONCE(1, "presto: %pd4 has no lower dentry for inode %lu\n",
		  dentry, inode->i_ino);
	return dentry;
}

const struct dentry_operations presto_dentry_ops = {
	.d_revalidate	= presto_d_revalidate,
	.d_iput		= presto_d_iput,
	.d_release	= presto_d_release,
	.d_real		= presto_d_real,
};
