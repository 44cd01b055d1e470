// SPDX-License-Identifier: GPL-2.0
/*
 * Directory inode operations: every namespace change is passed to the
 * lower directory under its lock, as the caller, between
 * presto_change_begin() and presto_change_end().
 */
#include <linux/namei.h>
#include <linux/slab.h>
#include "presto.h"

/*
 * The lower dentry for @dentry, checked under the lower parent's lock
 * (which the caller holds) to still stand where presto believes: same
 * parent, hashed, and naming the same lower inode or still negative.
 * A negative presto dentry whose lower went stale (or was let go) is looked
 * up afresh; a positive one that no longer matches is -ESTALE, which makes
 * the VFS retry with LOOKUP_REVAL, and d_revalidate then brings presto up
 * to date.
 * The dentry returned is borrowed from @dentry's d_fsdata.
 */
static struct dentry *presto_lower_locked(struct dentry *dentry)
{
	struct dentry *lparent = presto_lower_dentry(dentry->d_parent);
	struct dentry *lower = presto_lower_dentry(dentry);
	struct inode *inode = d_inode(dentry);

	if (lower && lower->d_parent == lparent && !d_unhashed(lower) &&
	    (inode ? d_inode(lower) == presto_lower_inode(inode) :
		     d_is_negative(lower)))
		return lower;
	if (inode)
		return ERR_PTR(-ESTALE);

	lower = lookup_one(presto_lower_userns(dentry->d_sb),
			   dentry->d_name.name, lparent, dentry->d_name.len);
	if (IS_ERR(lower))
		return lower;
	if (d_is_positive(lower)) {
		dput(lower);
		return ERR_PTR(-ESTALE);
	}
	presto_set_lower_dentry(dentry, lower);
	return lower;
}

/* Lock @dentry's lower parent and return its checked lower dentry. */
static struct dentry *presto_lock_lower(struct dentry *dentry)
{
	struct inode *ldir = d_inode(presto_lower_dentry(dentry->d_parent));
	struct dentry *lower;

	inode_lock_nested(ldir, I_MUTEX_PARENT);
	lower = presto_lower_locked(dentry);
	if (IS_ERR(lower))
		inode_unlock(ldir);
	return lower;
}

static void presto_unlock_lower(struct dentry *dentry)
{
	inode_unlock(d_inode(presto_lower_dentry(dentry->d_parent)));
}

/*
 * Give @dentry the presto inode of its lower dentry, just created: a new
 * object if @made (complete, as far as callbacks go), else a new link.
 */
static int presto_instantiate(struct dentry *dentry, struct dentry *lower,
			      bool made)
{
	struct inode *inode;

	if (WARN_ON_ONCE(d_is_negative(lower)))
		return -EIO;
	inode = presto_iget(dentry->d_sb, lower);
	if (IS_ERR(inode))
		return PTR_ERR(inode);
	if (made)
		presto_cb_local(inode);
	d_instantiate(dentry, inode);
	return 0;
}

struct presto_create_args {
	umode_t mode;
	dev_t rdev;
	bool excl;
	const char *link;
};

static int presto_create_object(struct inode *dir, struct dentry *dentry,
				enum presto_kml_op op,
				const struct presto_create_args *args)
{
	struct user_namespace *userns = presto_lower_userns(dir->i_sb);
	struct presto_change chg = { .mark_on = { presto_lower_inode(dir) } };
	struct dentry *lower;
	struct inode *ldir;
	u64 seq;
	int err;

	if (presto_is_reserved(dir, &dentry->d_name))
		return -EPERM;
	err = presto_change_begin(&chg, dir->i_sb, op, &dentry->d_name, NULL,
				  args->link,
				  args->link ? strlen(args->link) : 0);
	if (err)
		return err;
	lower = presto_lock_lower(dentry);
	err = PTR_ERR(lower);
	if (IS_ERR(lower))
		goto out;
	ldir = d_inode(lower->d_parent);
	switch (op) {
	case PRESTO_KML_CREATE:
		err = vfs_create(userns, ldir, lower, args->mode, args->excl);
		break;
	case PRESTO_KML_MKDIR:
		err = vfs_mkdir(userns, ldir, lower, args->mode);
		break;
	case PRESTO_KML_MKNOD:
		err = vfs_mknod(userns, ldir, lower, args->mode, args->rdev);
		break;
	case PRESTO_KML_SYMLINK:
		err = vfs_symlink(userns, ldir, lower, args->link);
		break;
	default:
		err = -EINVAL;
		break;
	}
	if (!err) {
		/* Logged even if presto's inode cannot be had below. */
		seq = presto_change_log(&chg, 0, PRESTO_KML_A_ALL, ldir,
					d_inode(lower), NULL, NULL);
		presto_stamp(dir, seq);
		err = presto_instantiate(dentry, lower, true);
		if (!err)
			presto_stamp(d_inode(dentry), seq);
	}
	presto_copyattr(dir);
	presto_unlock_lower(dentry);
out:
	presto_change_end(&chg);
	return err;
}

static int presto_create(struct user_namespace *userns, struct inode *dir,
			 struct dentry *dentry, umode_t mode, bool excl)
{
	struct presto_create_args args = { .mode = mode, .excl = excl };

	return presto_create_object(dir, dentry, PRESTO_KML_CREATE, &args);
}

static int presto_mkdir(struct user_namespace *userns, struct inode *dir,
			struct dentry *dentry, umode_t mode)
{
	struct presto_create_args args = { .mode = mode };

	return presto_create_object(dir, dentry, PRESTO_KML_MKDIR, &args);
}

static int presto_mknod(struct user_namespace *userns, struct inode *dir,
			struct dentry *dentry, umode_t mode, dev_t rdev)
{
	struct presto_create_args args = { .mode = mode, .rdev = rdev };

	return presto_create_object(dir, dentry, PRESTO_KML_MKNOD, &args);
}

static int presto_symlink(struct user_namespace *userns, struct inode *dir,
			  struct dentry *dentry, const char *link)
{
	struct presto_create_args args = { .mode = S_IFLNK, .link = link };

	return presto_create_object(dir, dentry, PRESTO_KML_SYMLINK, &args);
}

static int presto_link(struct dentry *old, struct inode *dir,
		       struct dentry *new)
{
	struct inode *inode = d_inode(old);
	struct inode *lobj = presto_lower_inode(inode);
	/* An O_TMPFILE linked in is new to the tree. */
	bool tmpfile = !lobj->i_nlink;
	/* A file with two names is marked by itself (presto_mark_whom()). */
	struct presto_change chg = {
		.mark_on = { presto_lower_inode(dir),
			     S_ISREG(inode->i_mode) ? lobj : NULL },
	};
	struct dentry *lower;
	struct inode *ldir;
	u64 seq;
	int err;

	if (presto_is_reserved(dir, &new->d_name))
		return -EPERM;
	if (tmpfile) {
		chg.sb = dir->i_sb;
		err = presto_change_tmpfile(&chg, dir->i_sb,
					    presto_lower_dentry(old));
		if (err) {
			presto_change_free(&chg);
			return err;
		}
	}
	err = presto_change_begin(&chg, dir->i_sb, tmpfile ? PRESTO_KML_CREATE :
				  PRESTO_KML_LINK, &new->d_name, NULL, NULL,
				  0);
	if (err)
		return err;
	lower = presto_lock_lower(new);
	err = PTR_ERR(lower);
	if (IS_ERR(lower))
		goto out;
	ldir = d_inode(lower->d_parent);
	err = vfs_link(presto_lower_dentry(old), presto_lower_userns(dir->i_sb),
		       ldir, lower, NULL);
	if (!err) {
		seq = presto_change_log(&chg, tmpfile ? PRESTO_KML_F_TMPFILE : 0,
					tmpfile ? PRESTO_KML_A_ALL :
					PRESTO_KML_A_NLINK | PRESTO_KML_A_CTIME,
					ldir, lobj, NULL, NULL);
		if (tmpfile)
			WRITE_ONCE(PRESTO_I(inode)->stored_gen,
				   atomic64_read(&PRESTO_I(inode)->data_gen));
		presto_data_mark_move(inode, NULL,
				      presto_change_mark(&chg, lobj));
		presto_stamp(dir, seq);
		presto_stamp(inode, seq);
		err = presto_instantiate(new, lower, false);
	}
	presto_copyattr(dir);
	presto_copyattr(inode);
	presto_unlock_lower(new);
out:
	presto_change_end(&chg);
	return err;
}

/*
 * @lower's name was just removed, and the lower d_delete() unhashed @lower
 * rather than turning it negative in place (presto_remove() held it
 * twice). Make the negative dentry that ext4 would have kept, for the
 * presto dentry to take once it turns negative (presto_d_iput()): a
 * create of the same name then needs no lower lookup. The name is gone
 * for sure: the lower parent is locked and the removal succeeded. Not
 * for directories that ext4 gives dentry operations of their own or
 * keeps no negative dentries in (encrypted, casefolded).
 */
static void presto_keep_negative(struct inode *inode, struct dentry *lower)
{
	struct inode *ldir = d_inode(lower->d_parent);
	struct dentry *neg;

	if (!d_unhashed(lower) || lower->d_op || IS_ENCRYPTED(ldir) ||
	    IS_CASEFOLDED(ldir))
		return;
	neg = d_alloc(lower->d_parent, &lower->d_name);
	if (!neg)
		return;		/* the next lookup asks the lower */
	d_add(neg, NULL);
	dput(xchg(&PRESTO_I(inode)->neg_lower, neg));
}

/*
 * A directory was removed. The negative presto dentries of the names
 * removed in it hold the negative lower dentries that the removals kept,
 * so the lower vfs_rmdir() could not free those, and they would hold the
 * removed lower directory, its inode and its block, until memory pressure
 * or the parent's removal. Free presto's (the VFS would, just after this)
 * and then the lower ones they let go, as ext4's own rmdir would have.
 */
static void presto_drop_children(struct dentry *dentry, struct dentry *lower)
{
	shrink_dcache_parent(dentry);
	shrink_dcache_parent(lower);
}

static int presto_remove(struct inode *dir, struct dentry *dentry,
			 enum presto_kml_op op)
{
	struct user_namespace *userns = presto_lower_userns(dir->i_sb);
	struct inode *inode = d_inode(dentry);
	struct presto_change chg = { .mark_on = { presto_lower_inode(dir) } };
	struct dentry *lower;
	struct inode *ldir;
	u64 seq;
	int err;

	err = presto_change_begin(&chg, dir->i_sb, op, &dentry->d_name, NULL,
				  NULL, 0);
	if (err)
		return err;
	lower = presto_lock_lower(dentry);
	err = PTR_ERR(lower);
	if (IS_ERR(lower))
		goto out;
	ldir = d_inode(lower->d_parent);
	/*
	 * A dentry nobody else holds is turned negative in place by the
	 * lower d_delete(); but this presto dentry may stay positive (an
	 * open file's) and must keep a positive lower dentry: hold a second
	 * reference so that the lower dentry is unhashed instead.
	 * presto_d_iput() lets it go once the presto dentry turns negative.
	 */
	dget(lower);
	if (op == PRESTO_KML_RMDIR)
		err = vfs_rmdir(userns, ldir, lower);
	else
		err = vfs_unlink(userns, ldir, lower, NULL);
	if (!err) {
		seq = presto_change_log(&chg, 0, PRESTO_KML_A_NLINK |
					PRESTO_KML_A_CTIME, ldir,
					presto_lower_inode(inode), NULL, NULL);
		presto_stamp(dir, seq);
		presto_stamp(inode, seq);
		presto_keep_negative(inode, lower);
		if (op == PRESTO_KML_RMDIR)
			presto_drop_children(dentry, lower);
	}
	dput(lower);
	presto_copyattr(dir);
	presto_copyattr(inode);
	presto_unlock_lower(dentry);
out:
	presto_change_end(&chg);
	return err;
}

static int presto_unlink(struct inode *dir, struct dentry *dentry)
{
	return presto_remove(dir, dentry, PRESTO_KML_UNLINK);
}

static int presto_rmdir(struct inode *dir, struct dentry *dentry)
{
	return presto_remove(dir, dentry, PRESTO_KML_RMDIR);
}

static int presto_rename(struct user_namespace *userns, struct inode *olddir,
			 struct dentry *old, struct inode *newdir,
			 struct dentry *new, unsigned int flags)
{
	struct dentry *lold_parent = presto_lower_dentry(old->d_parent);
	struct dentry *lnew_parent = presto_lower_dentry(new->d_parent);
	struct inode *inode = d_inode(old), *target = d_inode(new);
	struct dentry *lold, *lnew, *trap;
	struct presto_change chg = {
		.mark_on = { d_inode(lold_parent), d_inode(lnew_parent) },
	};
	struct renamedata rd;
	u64 seq;
	int err;

	/* A whiteout is overlayfs's business; presto has no layers. */
	if (flags & RENAME_WHITEOUT)
		return -EINVAL;
	if (presto_is_reserved(newdir, &new->d_name))
		return -EPERM;
	err = presto_change_begin(&chg, olddir->i_sb, PRESTO_KML_RENAME,
				  &old->d_name, &new->d_name, NULL, 0);
	if (err)
		return err;

	trap = lock_rename(lnew_parent, lold_parent);
	lold = presto_lower_locked(old);
	err = PTR_ERR(lold);
	if (IS_ERR(lold))
		goto unlock;
	lnew = presto_lower_locked(new);
	err = PTR_ERR(lnew);
	if (IS_ERR(lnew))
		goto unlock;
	/*
	 * The VFS has refused renames into one's own subtree on presto's
	 * dentries; meeting the trap below means the lower tree changed.
	 */
	err = -ESTALE;
	if (lold == trap || lnew == trap)
		goto unlock;

	rd = (struct renamedata) {
		.old_mnt_userns	= presto_lower_userns(olddir->i_sb),
		.old_dir	= d_inode(lold_parent),
		.old_dentry	= lold,
		.new_mnt_userns	= presto_lower_userns(olddir->i_sb),
		.new_dir	= d_inode(lnew_parent),
		.new_dentry	= lnew,
		.flags		= flags,
	};
	err = vfs_rename(&rd);
	if (!err) {
		seq = presto_change_log(&chg,
					(flags & RENAME_NOREPLACE ?
					 PRESTO_KML_F_NOREPLACE : 0) |
					(flags & RENAME_EXCHANGE ?
					 PRESTO_KML_F_EXCHANGE : 0),
					PRESTO_KML_A_CTIME,
					d_inode(lold_parent),
					presto_lower_inode(inode),
					d_inode(lnew_parent),
					target ? presto_lower_inode(target) :
						 NULL);
		presto_stamp(olddir, seq);
		presto_stamp(newdir, seq);
		presto_stamp(inode, seq);
		presto_stamp(target, seq);
		/* A file being written is now found through its new parent. */
		presto_data_mark_move(inode, rd.old_dir,
				      presto_change_mark(&chg, rd.new_dir));
		if (target && (flags & RENAME_EXCHANGE))
			presto_data_mark_move(target, rd.new_dir,
					      presto_change_mark(&chg,
								 rd.old_dir));
	}
	presto_copyattr(olddir);
	if (newdir != olddir)
		presto_copyattr(newdir);
	presto_copyattr(inode);
	if (target)
		presto_copyattr(target);
unlock:
	unlock_rename(lnew_parent, lold_parent);
	presto_change_end(&chg);
	return err;
}

/* Open the lower tmpfile that presto_tmpfile() left in ->private_data. */
static int presto_open_tmpfile(struct inode *inode, struct file *file)
{
	/* Counted as any open of a regular file (presto_release()). */
	return presto_cb_open(inode, file);
}

static int presto_tmpfile(struct user_namespace *userns, struct inode *dir,
			  struct file *file, umode_t mode)
{
	struct dentry *dentry = file->f_path.dentry;
	struct presto_change chg = {};
	struct presto_file *pf;
	struct path lparent;
	struct file *lfile;
	struct inode *inode;
	int err;

	pf = kzalloc(sizeof(*pf), GFP_KERNEL);
	if (!pf)
		return -ENOMEM;
	/* Not logged: it has no name yet (see presto_link()). */
	err = presto_change_begin(&chg, dir->i_sb, 0, NULL, NULL, NULL, 0);
	if (err) {
		kfree(pf);
		return err;
	}
	presto_lower_path(dentry->d_parent, &lparent);
	/*
	 * Linkability is decided by presto's own inode (O_EXCL). The lower
	 * file cannot show presto's path (presto_open_lower()), so security
	 * modules judge its open with presto's credentials: they judge the
	 * caller's open of presto's file next (finish_open()). The caller's
	 * credentials make the inode and check its permissions, as in any
	 * create through presto. Access times are presto's (file.c).
	 */
	lfile = vfs_tmpfile_open(presto_lower_userns(dir->i_sb), &lparent,
				 mode, (file->f_flags & ~O_EXCL) | O_NOATIME |
				 FMODE_NONOTIFY, presto_sb(dir->i_sb)->creds);
	err = PTR_ERR(lfile);
	if (IS_ERR(lfile))
		goto out_free;
	inode = presto_iget(dir->i_sb, lfile->f_path.dentry);
	err = PTR_ERR(inode);
	if (IS_ERR(inode)) {
		fput(lfile);
		goto out_free;
	}
	presto_cb_local(inode);
	dentry->d_fsdata = dget(lfile->f_path.dentry);
	pf->lower = lfile;
	file->private_data = pf;
	/* d_tmpfile() takes the new inode's one link away. */
	set_nlink(inode, 1);
	d_tmpfile(file, inode);
	err = finish_open(file, dentry, presto_open_tmpfile);
	presto_copyattr(dir);
	if (err) {
		/* ->release() is not called for a file that failed to open. */
		file->private_data = NULL;
		fput(lfile);
		goto out_free;
	}
	presto_change_end(&chg);
	return 0;
out_free:
	kfree(pf);
	presto_change_end(&chg);
	return err;
}

const struct inode_operations presto_dir_iops = {
	.lookup		= presto_lookup,
	.create		= presto_create,
	.mkdir		= presto_mkdir,
	.mknod		= presto_mknod,
	.symlink	= presto_symlink,
	.link		= presto_link,
	.unlink		= presto_unlink,
	.rmdir		= presto_rmdir,
	.rename		= presto_rename,
	.tmpfile	= presto_tmpfile,
	.permission	= presto_permission,
	.getattr	= presto_getattr,
	.setattr	= presto_setattr,
	.listxattr	= presto_listxattr,
	.fileattr_get	= presto_fileattr_get,
	.fileattr_set	= presto_fileattr_set,
	.update_time	= presto_update_time,
};
