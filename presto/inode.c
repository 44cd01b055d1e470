// SPDX-License-Identifier: GPL-2.0
/*
 * presto inodes: one per lower inode, attributes taken from the lower.
 *
 * Inodes are keyed on the lower inode (iget5), so the names of one lower
 * inode (hard links) share one presto inode, and st_ino is the lower
 * inode number, stable across remounts. The lower inode is the truth:
 * lento may change it underneath a live mount, so getattr asks the lower
 * every time and the copy kept in the presto inode only serves the VFS's
 * own checks (size limits, append-only, immutable).
 */
#include <linux/slab.h>
#include <linux/xattr.h>
#include <linux/fileattr.h>
#include <linux/namei.h>
#include "presto.h"

static struct kmem_cache *presto_inode_cachep;

static void presto_inode_init_once(void *obj)
{
	struct presto_inode *pi = obj;

	inode_init_once(&pi->vfs_inode);
}

int presto_inode_cache_init(void)
{
	presto_inode_cachep = kmem_cache_create("presto_inode",
						sizeof(struct presto_inode), 0,
						SLAB_RECLAIM_ACCOUNT |
						SLAB_ACCOUNT,
						presto_inode_init_once);
	return presto_inode_cachep ? 0 : -ENOMEM;
}

void presto_inode_cache_destroy(void)
{
	/* Inodes are freed after an RCU grace period: wait for them. */
	rcu_barrier();
	kmem_cache_destroy(presto_inode_cachep);
}

struct inode *presto_alloc_inode(struct super_block *sb)
{
	struct presto_inode *pi;

	pi = alloc_inode_sb(sb, presto_inode_cachep, GFP_KERNEL);
	if (!pi)
		return NULL;
	pi->lower = NULL;
	pi->shared_ro = NULL;
	pi->neg_lower = NULL;
	pi->last_seq = 0;
	atomic64_set(&pi->data_gen, 0);
	pi->stored_gen = 0;
	spin_lock_init(&pi->mark_lock);
	pi->data_mark = NULL;
	pi->writers = 0;
	pi->writer_cred = NULL;
	pi->cb_flags = 0;
	pi->cb_epoch = 0;
	pi->cb_nlink = 0;
	pi->cb_gen = 0;
	pi->opens = 0;
	pi->hinted = 0;
	return &pi->vfs_inode;
}

void presto_free_inode(struct inode *inode)
{
	kmem_cache_free(presto_inode_cachep, PRESTO_I(inode));
}

void presto_evict_inode(struct inode *inode)
{
	struct presto_inode *pi = PRESTO_I(inode);

	truncate_inode_pages_final(&inode->i_data);
	clear_inode(inode);
	if (pi->shared_ro)
		fput(pi->shared_ro);
	/* The last close or unmap logged the STORE and let go of it. */
	if (WARN_ON_ONCE(pi->data_mark || pi->writers))
		presto_mark_put(inode->i_sb, pi->data_mark, 0);
	if (pi->writer_cred)
		put_cred(pi->writer_cred);
	dput(pi->neg_lower);
	iput(pi->lower);
}

/* The lower inode's flags that the VFS checks on presto's. */
#define PRESTO_COPIED_FLAGS	(S_SYNC | S_APPEND | S_IMMUTABLE | S_DIRSYNC)

/*
 * Caller holds inode->i_lock. presto_attr_current() compares the fields
 * copied here: one changed without the other would skip a copy.
 */
static void __presto_copyattr(struct inode *inode, const struct inode *lower)
{
	const unsigned int flags = PRESTO_COPIED_FLAGS;

	inode->i_mode = lower->i_mode;
	inode->i_uid = lower->i_uid;
	inode->i_gid = lower->i_gid;
	inode->i_atime = lower->i_atime;
	inode->i_mtime = lower->i_mtime;
	inode->i_ctime = lower->i_ctime;
	inode->i_blocks = lower->i_blocks;
	set_nlink(inode, lower->i_nlink);
	i_size_write(inode, i_size_read(lower));
	inode_set_flags(inode, lower->i_flags & flags, flags);
}

/*
 * Does the presto inode's copy already match @lower? Read without the lock:
 * a stat refreshes the copy every time, and nearly always finds nothing to
 * do, so it should not take a lock and dirty the inode for it.
 */
static bool presto_attr_current(const struct inode *inode,
				const struct inode *lower)
{
	const unsigned int flags = PRESTO_COPIED_FLAGS;

	/*
	 * A torn read only sends us to the locked copy; a change racing with
	 * the check is copied by whoever made it.
	 */
	return data_race(inode->i_mode == lower->i_mode &&
			 uid_eq(inode->i_uid, lower->i_uid) &&
			 gid_eq(inode->i_gid, lower->i_gid) &&
			 timespec64_equal(&inode->i_atime, &lower->i_atime) &&
			 timespec64_equal(&inode->i_mtime, &lower->i_mtime) &&
			 timespec64_equal(&inode->i_ctime, &lower->i_ctime) &&
			 inode->i_blocks == lower->i_blocks &&
			 inode->i_nlink == lower->i_nlink &&
			 inode->i_size == lower->i_size &&
			 (inode->i_flags & flags) == (lower->i_flags & flags));
}

/* Refresh the presto inode's copy of the lower inode's attributes. */
void presto_copyattr(struct inode *inode)
{
	struct inode *lower = presto_lower_inode(inode);

	if (presto_attr_current(inode, lower))
		return;
	spin_lock(&inode->i_lock);
	__presto_copyattr(inode, lower);
	spin_unlock(&inode->i_lock);
}

/*
 * The cheap refresh for the data path: the size, and the mode, whose
 * set-id bits the lower write drops when the writer may not keep them.
 * The VFS reads presto's copy for an exec's set-id and for the hardlink
 * protection: a stale setuid bit would let a user's bytes run setuid.
 */
void presto_copysize(struct inode *inode)
{
	struct inode *lower = presto_lower_inode(inode);

	spin_lock(&inode->i_lock);
	inode->i_mode = lower->i_mode;
	i_size_write(inode, i_size_read(lower));
	inode->i_blocks = lower->i_blocks;
	spin_unlock(&inode->i_lock);
}

static int presto_inode_test(struct inode *inode, void *lower)
{
	return PRESTO_I(inode)->lower == lower;
}

static int presto_inode_set(struct inode *inode, void *lower)
{
	ihold(lower);
	PRESTO_I(inode)->lower = lower;
	return 0;
}

/* The presto inode for @ldentry's inode, with a new reference. */
struct inode *presto_iget(struct super_block *sb, struct dentry *ldentry)
{
	struct inode *lower = d_inode(ldentry);
	struct inode *inode;

	inode = iget5_locked(sb, lower->i_ino, presto_inode_test,
			     presto_inode_set, lower);
	if (!inode)
		return ERR_PTR(-ENOMEM);
	if (!(inode->i_state & I_NEW)) {
		/* The lower may have changed since presto last looked. */
		presto_copyattr(inode);
		return inode;
	}

	inode->i_ino = lower->i_ino;
	inode->i_generation = lower->i_generation;
	/*
	 * Times are the lower inode's. Regular files and directories do
	 * their writes through a lower file, which updates the lower's mtime
	 * and ctime. The access time of every kind is the VFS's to touch on
	 * presto's inode, by presto's mount options (lower files are opened
	 * O_NOATIME), and presto_update_time() passes that down.
	 */
	if (S_ISREG(lower->i_mode) || S_ISDIR(lower->i_mode))
		inode->i_flags |= S_NOCMTIME;
	switch (lower->i_mode & S_IFMT) {
	case S_IFREG:
		inode->i_op = &presto_file_iops;
		inode->i_fop = &presto_file_fops;
		inode->i_mapping->a_ops = &presto_aops;
		break;
	case S_IFDIR:
		inode->i_op = &presto_dir_iops;
		inode->i_fop = &presto_dir_fops;
		break;
	case S_IFLNK:
		inode->i_op = &presto_symlink_iops;
		break;
	default:
		inode->i_op = &presto_special_iops;
		init_special_inode(inode, lower->i_mode, lower->i_rdev);
		break;
	}
	__presto_copyattr(inode, lower);
	presto_cb_load(inode, ldentry);
	unlock_new_inode(inode);
	return inode;
}

/*
 * The presto inode of lower inode @ino of generation @gen, with a new
 * reference, if both are in memory; else NULL.
 */
struct inode *presto_ilookup(struct super_block *sb, u64 ino, u32 gen)
{
	struct inode *lower, *inode = NULL;

	lower = ilookup(presto_lower_mnt(sb)->mnt_sb, ino);
	if (!lower)
		return NULL;
	if (lower->i_generation == gen)
		inode = ilookup5(sb, lower->i_ino, presto_inode_test, lower);
	iput(lower);
	return inode;
}

/*
 * Permission is the lower inode's, checked as the caller: its mode, owner,
 * ACLs and flags decide, exactly as on ext4. presto never lends its own
 * privilege to a caller.
 */
int presto_permission(struct user_namespace *userns, struct inode *inode,
		      int mask)
{
	int err;

	if (mask & MAY_NOT_BLOCK) {
		if (!presto_cb_valid(inode, PRESTO_CB_ATTR))
			return -ECHILD;
	} else {
		err = presto_cb_need(inode, PRESTO_CB_ATTR);
		if (err)
			return err;
	}
	return inode_permission(presto_lower_userns(inode->i_sb),
				presto_lower_inode(inode), mask);
}

/*
 * A directory whose listing is not complete here has in the lower only
 * the subdirectories lento materialised: its count at the server, which
 * lento wrote with its flags, is the one to show (find and fts go by it).
 */
static void presto_dir_nlink(struct inode *inode, struct kstat *stat)
{
	u32 nlink = READ_ONCE(PRESTO_I(inode)->cb_nlink);

	if (nlink && S_ISDIR(inode->i_mode) &&
	    !presto_cb_valid(inode, PRESTO_CB_DATA))
		stat->nlink = nlink;
}

int presto_getattr(struct user_namespace *userns, const struct path *path,
		   struct kstat *stat, u32 request_mask, unsigned int flags)
{
	struct dentry *dentry = path->dentry;
	struct path lower;
	int err;

	err = presto_cb_need(d_inode(dentry), PRESTO_CB_ATTR);
	if (err)
		return err;
	presto_lower_path(dentry, &lower);
	/*
	 * The VFS has asked the security modules about the caller's getattr
	 * of the path it named. The lower path is presto's cache, which no
	 * policy names: a path-based module (AppArmor, TOMOYO) asked again
	 * about it would judge a confined caller by a path it never used.
	 */
	err = vfs_getattr_nosec(&lower, stat, request_mask, flags);
	if (err)
		return err;
	stat->dev = dentry->d_sb->s_dev;
	presto_dir_nlink(d_inode(dentry), stat);
	presto_copyattr(d_inode(dentry));
	return 0;
}

/* The attributes a SETATTR record carries for @ia_valid. */
static u32 presto_setattr_valid(unsigned int ia_valid)
{
	u32 valid = PRESTO_KML_A_CTIME;

	if (ia_valid & (ATTR_MODE | ATTR_KILL_SUID | ATTR_KILL_SGID))
		valid |= PRESTO_KML_A_MODE;
	if (ia_valid & ATTR_UID)
		valid |= PRESTO_KML_A_UID | PRESTO_KML_A_MODE;
	if (ia_valid & ATTR_GID)
		valid |= PRESTO_KML_A_GID | PRESTO_KML_A_MODE;
	if (ia_valid & ATTR_SIZE)
		valid |= PRESTO_KML_A_SIZE | PRESTO_KML_A_MTIME;
	if (ia_valid & ATTR_ATIME)
		valid |= PRESTO_KML_A_ATIME;
	if (ia_valid & ATTR_MTIME)
		valid |= PRESTO_KML_A_MTIME;
	return valid;
}

int presto_setattr(struct user_namespace *userns, struct dentry *dentry,
		   struct iattr *attr)
{
	struct inode *inode = d_inode(dentry);
	struct inode *lower = presto_lower_inode(inode);
	u32 valid = presto_setattr_valid(attr->ia_valid);
	struct presto_change chg = {
		.mark_on = { presto_mark_for(dentry) },
		.fold = lower, .fold_valid = valid,
	};
	int err;

	err = presto_change_begin(&chg, dentry->d_sb, PRESTO_KML_SETATTR, NULL,
				  NULL, NULL, 0);
	if (err)
		return err;
	/*
	 * The lower notify_change() recomputes the mode from the kill-suid
	 * bits and refuses both at once; the file in ATTR_FILE is presto's.
	 */
	if (attr->ia_valid & (ATTR_KILL_SUID | ATTR_KILL_SGID))
		attr->ia_valid &= ~ATTR_MODE;
	attr->ia_valid &= ~ATTR_FILE;
	attr->ia_file = NULL;

	inode_lock(lower);
	/*
	 * The VFS refuses a size change to an append-only file by presto's
	 * copy of the flag, which a chattr made on the cache directly
	 * reaches at the next lookup: an ftruncate() on a file already
	 * open needs the lower's flag, which notify_change() never checks.
	 */
	if ((attr->ia_valid & ATTR_SIZE) && IS_APPEND(lower))
		err = -EPERM;
	else
		err = notify_change(presto_lower_userns(dentry->d_sb),
				    presto_lower_dentry(dentry), attr, NULL);
	/* Logged under the inode lock, which orders changes to it. */
	if (!err)
		presto_stamp(inode, presto_change_log(&chg, 0, valid, NULL, lower,
						      NULL, NULL));
	inode_unlock(lower);
	presto_copyattr(inode);
	presto_change_end(&chg);
	return err;
}

int presto_fileattr_get(struct dentry *dentry, struct fileattr *fa)
{
	return vfs_fileattr_get(presto_lower_dentry(dentry), fa);
}

int presto_fileattr_set(struct user_namespace *userns, struct dentry *dentry,
			struct fileattr *fa)
{
	struct presto_change chg = {};
	int err;

	/* Inode flags belong to the cache and are not logged. */
	err = presto_change_begin(&chg, dentry->d_sb, 0, NULL, NULL, NULL, 0);
	if (err)
		return err;
	err = vfs_fileattr_set(presto_lower_userns(dentry->d_sb),
			       presto_lower_dentry(dentry), fa);
	presto_copyattr(d_inode(dentry));
	presto_change_end(&chg);
	return err;
}

static int presto_fiemap(struct inode *inode, struct fiemap_extent_info *fi,
			 u64 start, u64 len)
{
	struct inode *lower = presto_lower_inode(inode);

	if (!lower->i_op->fiemap)
		return -EOPNOTSUPP;
	return lower->i_op->fiemap(lower, fi, start, len);
}

static const char *presto_get_link(struct dentry *dentry, struct inode *inode,
				   struct delayed_call *done)
{
	if (!dentry) {
		/*
		 * RCU walk: a link body the lower keeps in memory (ext4's
		 * fast symlinks) is safe to use; anything else may block.
		 */
		const char *link = READ_ONCE(presto_lower_inode(inode)->i_link);

		return link ? link : ERR_PTR(-ECHILD);
	}
	return vfs_get_link(presto_lower_dentry(dentry), done);
}

/*
 * The VFS decided, by presto's mount options, that an access time (or the
 * times of a special file) is due: update the lower inode's, as the VFS
 * would. Like touch_atime(), give up rather than wait on a frozen or
 * read-only lower.
 */
int presto_update_time(struct inode *inode, struct timespec64 *time, int flags)
{
	struct inode *lower = presto_lower_inode(inode);
	int err;

	if (__mnt_is_readonly(presto_lower_mnt(inode->i_sb)) ||
	    !sb_start_write_trylock(lower->i_sb))
		return 0;
	if (lower->i_op->update_time)
		err = lower->i_op->update_time(lower, time, flags);
	else
		err = generic_update_time(lower, time, flags);
	sb_end_write(lower->i_sb);
	presto_copyattr(inode);
	return err;
}

const struct inode_operations presto_file_iops = {
	.permission	= presto_permission,
	.getattr	= presto_getattr,
	.setattr	= presto_setattr,
	.listxattr	= presto_listxattr,
	.fiemap		= presto_fiemap,
	.fileattr_get	= presto_fileattr_get,
	.fileattr_set	= presto_fileattr_set,
	.update_time	= presto_update_time,
};

const struct inode_operations presto_symlink_iops = {
	.get_link	= presto_get_link,
	.update_time	= presto_update_time,
	.getattr	= presto_getattr,
	.setattr	= presto_setattr,
	.listxattr	= presto_listxattr,
};

const struct inode_operations presto_special_iops = {
	.permission	= presto_permission,
	.update_time	= presto_update_time,
	.getattr	= presto_getattr,
	.setattr	= presto_setattr,
	.listxattr	= presto_listxattr,
};
