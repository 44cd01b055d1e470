// SPDX-License-Identifier: GPL-2.0
/*
 * Regular files: data goes straight to a lower file.
 *
 * Reads and writes are handed to the lower file with a kiocb of presto's
 * own (position and flags from the caller's kiocb), so presto's file keeps
 * the position and the open flags, and the lower file's are never used.
 * That lets every plain read-only open of an inode share one lower file
 * (struct presto_inode.shared_ro): an open then costs no lower open at
 * all, which is what makes overlayfs's open/read/close slow. mmap puts the
 * lower file in the vma, so pages live only in the lower inode's cache and
 * mapped and read/write I/O are coherent exactly as on ext4.
 *
 * A file created by its own open (open(O_CREAT) of a new name) opens its
 * lower file at its first use instead (presto_lower_get()): creating a
 * file and closing it without I/O -- touch, lock and marker files, a
 * build's stamps -- then costs no lower open and close. The lower file
 * is opened with the opener's credentials either way, and the open
 * refuses what the lower would (a read-only lower).
 *
 * A lower file of presto's file's own shows presto's path, as overlayfs's
 * real files do (presto_open_lower()). Security modules that judge by
 * path (AppArmor, TOMOYO) then judge the path the caller named: the
 * cache's is one no policy names, and on presto's private lower mount
 * AppArmor cannot name it at all. The shared lower file is opened with
 * presto's credentials, after the VFS judged the caller's open of
 * presto's file; it keeps the lower path, as it outlives any one open and
 * must not pin a mount of presto.
 */
#include <linux/fs.h>
#include <linux/uio.h>
#include <linux/fadvise.h>
#include <linux/splice.h>
#include <linux/fsnotify.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/pagemap.h>
#include <linux/slab.h>
#include "presto.h"

/* Flags of a caller's kiocb that mean the same to the lower file. */
#define PRESTO_IOCB_MASK	(IOCB_DSYNC | IOCB_SYNC | IOCB_NOWAIT | \
				 IOCB_APPEND | IOCB_DIRECT | IOCB_WRITE | \
				 IOCB_NOIO)

/*
 * Open flags that need a lower file of their own. Not O_NONBLOCK, which
 * nginx opens every file with: it means nothing to a regular file's lower
 * I/O, where presto passes only its own kiocb's flags, and the VFS reads
 * it from presto's file (splice, sendfile, leases).
 */
#define PRESTO_PRIVATE_FLAGS	(O_ACCMODE | O_APPEND | O_DIRECT | O_DSYNC | \
				 __O_SYNC | FASYNC | __FMODE_EXEC)

/*
 * presto's own file raises the fsnotify events the user sees, and
 * touches the access time, by presto's mount options and its file's
 * O_NOATIME (presto_update_time() passes it down): a lower file never
 * does. A lower file that shows presto's path would touch presto's inode
 * by the lower file's flags, and the shared one would go by the lower
 * mount's options and by no one reader's O_NOATIME.
 */
#define PRESTO_LOWER_OPEN_FLAGS	(O_LARGEFILE | O_NOATIME | FMODE_NONOTIFY)

/*
 * The lower file of @path, a path of presto's, for @cred: the lower inode
 * behind presto's path (presto_d_real() maps it back for the VFS). The
 * open takes write access to presto's mount, as the caller's open of
 * presto's file did; the lower mount is only checked, which presto's
 * journal keeps writable while mounted (its segment is open for writing).
 */
struct file *presto_open_lower(const struct path *path, int flags,
			       const struct cred *cred)
{
	struct super_block *sb = path->dentry->d_sb;

	if ((flags & O_ACCMODE) != O_RDONLY &&
	    __mnt_is_readonly(presto_lower_mnt(sb)))
		return ERR_PTR(-EROFS);
	return open_with_fake_path(path, flags | PRESTO_LOWER_OPEN_FLAGS,
				   presto_lower_inode(d_inode(path->dentry)),
				   cred);
}

/*
 * The lower file in *@slot, opened (@open, @cred) and put there first if
 * the slot is empty; whoever loses a race to fill it drops its own.
 */
static struct file *presto_lower_once(struct file **slot,
				      struct file *(*open)(const struct path *,
							    int,
							    const struct cred *),
				      const struct path *path, int flags,
				      const struct cred *cred)
{
	struct file *lfile = READ_ONCE(*slot), *old;

	if (lfile)
		return lfile;
	lfile = open(path, flags, cred);
	if (IS_ERR(lfile))
		return lfile;
	old = cmpxchg(slot, NULL, lfile);
	if (old) {
		fput(lfile);
		return old;
	}
	return lfile;
}

/* The shared lower file, for presto's @path; see the top of this file. */
static struct file *presto_open_shared(const struct path *path, int flags,
				       const struct cred *cred)
{
	struct path lower;

	presto_lower_path(path->dentry, &lower);
	return open_with_fake_path(&lower, flags | PRESTO_LOWER_OPEN_FLAGS,
				   d_inode(lower.dentry), cred);
}

static struct file *presto_get_shared_ro(struct file *file)
{
	struct dentry *dentry = file->f_path.dentry;

	return presto_lower_once(&PRESTO_I(d_inode(dentry))->shared_ro,
				 presto_open_shared, &file->f_path, O_RDONLY,
				 presto_sb(dentry->d_sb)->creds);
}

static bool presto_file_is_shared(struct file *file)
{
	return !(file->f_mode & FMODE_WRITE) &&
	       presto_lower_file(file) ==
	       READ_ONCE(PRESTO_I(file_inode(file))->shared_ro);
}

/*
 * Remember whether the lower gives its regular files FMODE_NOWAIT; written
 * only when it changes, as every open passes here.
 */
static void presto_learn_nowait(struct super_block *sb, struct file *lfile)
{
	int nowait = lfile->f_mode & FMODE_NOWAIT ? PRESTO_NOWAIT_YES :
						    PRESTO_NOWAIT_NO;

	if (READ_ONCE(presto_sb(sb)->lower_nowait) != nowait)
		WRITE_ONCE(presto_sb(sb)->lower_nowait, nowait);
}

/*
 * The lower file of @file, opened now if its open put that off; an error
 * if it cannot be opened (as the open would have failed).
 */
struct file *presto_lower_get(struct file *file)
{
	struct file *lfile = presto_lower_file(file);

	if (likely(lfile))
		return lfile;
	/* Only a file open for writing puts it off. */
	return presto_lower_once(&((struct presto_file *)file->private_data)->lower,
				 presto_open_lower, &file->f_path,
				 file->f_flags, file->f_cred);
}

/*
 * May @file, open for writing, leave its lower file for later? If the file
 * is new (an empty file the caller just made, so the lower open could
 * refuse nothing but a read-only lower) and the lower's FMODE_NOWAIT is
 * known.
 */
static bool presto_open_later(struct file *file)
{
	struct super_block *sb = file_inode(file)->i_sb;
	int nowait = READ_ONCE(presto_sb(sb)->lower_nowait);

	if (!(file->f_mode & FMODE_CREATED) || !nowait)
		return false;
	if (nowait == PRESTO_NOWAIT_YES)
		file->f_mode |= FMODE_NOWAIT;
	return true;
}

static int presto_open(struct inode *inode, struct file *file)
{
	struct presto_file *pf = NULL;
	struct file *lfile;
	int err;

	/* The content is here (lento fetched it if need be). */
	err = presto_cb_open(inode, file);
	if (err)
		return err;
	if (file->f_mode & FMODE_WRITE) {
		pf = kzalloc(sizeof(*pf), GFP_KERNEL);
		if (!pf) {
			err = -ENOMEM;
			goto out;
		}
	}
	if (pf && presto_open_later(file)) {
		err = -EROFS;
		if (__mnt_is_readonly(presto_lower_mnt(inode->i_sb))) {
			kfree(pf);
			goto out;
		}
		file->private_data = pf;
		presto_copyattr(inode);
		return 0;
	}
	if (!(file->f_flags & PRESTO_PRIVATE_FLAGS))
		lfile = presto_get_shared_ro(file);
	else
		lfile = presto_open_lower(&file->f_path, file->f_flags,
					  current_cred());
	if (IS_ERR(lfile)) {
		kfree(pf);
		err = PTR_ERR(lfile);
		goto out;
	}
	if (pf) {
		pf->lower = lfile;
		file->private_data = pf;
	} else {
		file->private_data = lfile;
	}
	/* RWF_NOWAIT is for files whose I/O path can honour it: ext4's. */
	file->f_mode |= lfile->f_mode & FMODE_NOWAIT;
	presto_learn_nowait(inode->i_sb, lfile);
	/*
	 * The VFS reads presto's copy of the attributes for this file from
	 * here on (setuid exec, size checks in copy_file_range).
	 */
	presto_copyattr(inode);
	return 0;
out:
	presto_cb_close(inode);
	return err;
}

static int presto_release(struct inode *inode, struct file *file)
{
	struct file *lower = presto_lower_file(file);

	if (file->f_mode & FMODE_WRITE) {
		/*
		 * The STORE of what this file wrote, if nobody logged it:
		 * while the open still counts, so that lento cannot purge
		 * the content before its STORE is in the log.
		 */
		presto_store(file, true);
		/* None if the file was never used (presto_open_later()). */
		if (lower)
			fput(lower);
		kfree(file->private_data);
	} else if (!presto_file_is_shared(file)) {
		fput(lower);
	}
	presto_cb_close(inode);
	return 0;
}

/*
 * A synchronous kiocb (init_sync_kiocb()'s, but for the caller's I/O
 * priority, which it would look up only to be replaced).
 */
static void presto_lower_kiocb(struct kiocb *lower, struct kiocb *iocb)
{
	*lower = (struct kiocb) {
		.ki_filp = presto_lower_file(iocb->ki_filp),
		.ki_flags = iocb->ki_flags & PRESTO_IOCB_MASK,
		.ki_pos = iocb->ki_pos,
		.ki_ioprio = iocb->ki_ioprio,
	};
}

/*
 * An asynchronous caller (aio, io_uring) is answered synchronously: the
 * lower kiocb has no completion, so the lower finishes before returning.
 */
static ssize_t presto_read_iter(struct kiocb *iocb, struct iov_iter *iter)
{
	struct file *lfile = presto_lower_get(iocb->ki_filp);
	struct kiocb lower;
	ssize_t ret;

	if (IS_ERR(lfile))
		return PTR_ERR(lfile);
	presto_lower_kiocb(&lower, iocb);
	ret = call_read_iter(lower.ki_filp, &lower, iter);
	iocb->ki_pos = lower.ki_pos;
	if (ret >= 0)
		file_accessed(iocb->ki_filp);
	return ret;
}

static ssize_t presto_write_iter(struct kiocb *iocb, struct iov_iter *iter)
{
	struct file *file = iocb->ki_filp;
	struct presto_write w;
	struct kiocb lower;
	ssize_t ret;

	/* An append writes past the end, wherever ki_pos says. */
	ret = presto_store_begin(file, iocb->ki_flags & IOCB_APPEND ?
				 LLONG_MAX : iocb->ki_pos, &w);
	if (ret)
		return ret;
	presto_lower_kiocb(&lower, iocb);
	file_start_write(lower.ki_filp);
	ret = call_write_iter(lower.ki_filp, &lower, iter);
	file_end_write(lower.ki_filp);
	iocb->ki_pos = lower.ki_pos;
	presto_store_end(file, &w, ret > 0);
	presto_copysize(file_inode(file));
	return ret;
}

/* The open flags that fcntl(F_SETFL) may change and a write obeys. */
#define PRESTO_SETFL_MASK	(O_APPEND | O_DIRECT)

/*
 * Bring @lower, @file's own lower file, to the O_APPEND and O_DIRECT that
 * fcntl(F_SETFL) left on @file, for a splice or copy_file_range: those go
 * through the lower file's flags, where read and write pass presto's
 * kiocb. The VFS judged the change against presto's file, whose inode
 * flags are the lower's, and ext4 has no check_flags of its own.
 */
static void presto_lower_setfl(struct file *file, struct file *lower)
{
	unsigned int flags = READ_ONCE(file->f_flags) & PRESTO_SETFL_MASK;

	if (!((flags ^ READ_ONCE(lower->f_flags)) & PRESTO_SETFL_MASK))
		return;
	spin_lock(&lower->f_lock);
	lower->f_flags = (lower->f_flags & ~PRESTO_SETFL_MASK) | flags;
	lower->f_iocb_flags = iocb_flags(lower);
	spin_unlock(&lower->f_lock);
}

/*
 * Calling iter_file_splice_write() on presto's file would take the pipe
 * lock before the lower file's freeze protection, the reverse of a splice
 * onto the lower file: take the freeze protection first, then splice
 * straight into the lower file.
 */
static ssize_t presto_splice_write(struct pipe_inode_info *pipe,
				   struct file *out, loff_t *ppos, size_t len,
				   unsigned int flags)
{
	struct presto_write w;
	struct file *lower;
	ssize_t ret;

	/* Opens the lower file if need be. */
	ret = presto_store_begin(out, *ppos, &w);
	if (ret)
		return ret;
	lower = presto_lower_file(out);
	presto_lower_setfl(out, lower);
	file_start_write(lower);
	ret = iter_file_splice_write(pipe, lower, ppos, len, flags);
	file_end_write(lower);
	presto_store_end(out, &w, ret > 0);
	presto_copysize(file_inode(out));
	/* The lower file raises no events: watchers watch presto's. */
	if (ret > 0)
		fsnotify_modify(out);
	return ret;
}

/*
 * A shared writable mapping changes the file behind presto's back: its
 * vmas get operations that wrap the lower's (as fs/coda does) so that a
 * page made writable counts as a write, and the last unmap logs the STORE.
 * The mapping holds a reference to presto's file, whose STORE room it
 * uses. The state lives in vm_private_data, which ext4 leaves alone.
 */
struct presto_vm {
	const struct vm_operations_struct *lower_ops;
	struct file *file;
	atomic_t vmas;
	atomic_t writing;	/* a page was made writable: presto_store_mapped() */
};

static void presto_vm_open(struct vm_area_struct *vma)
{
	struct presto_vm *pvm = vma->vm_private_data;

	atomic_inc(&pvm->vmas);
	if (pvm->lower_ops->open)
		pvm->lower_ops->open(vma);
}

static void presto_vm_close(struct vm_area_struct *vma)
{
	struct presto_vm *pvm = vma->vm_private_data;

	if (pvm->lower_ops->close)
		pvm->lower_ops->close(vma);
	if (!atomic_dec_and_test(&pvm->vmas))
		return;
	/* Stores through pages left writable may have come after a STORE. */
	if (atomic_read(&pvm->writing))
		presto_store_mapped(pvm->file, false);
	presto_store(pvm->file, true);
	fput(pvm->file);
	kfree(pvm);
}

static vm_fault_t presto_vm_fault(struct vm_fault *vmf)
{
	struct presto_vm *pvm = vmf->vma->vm_private_data;

	return pvm->lower_ops->fault(vmf);
}

static vm_fault_t presto_vm_map_pages(struct vm_fault *vmf, pgoff_t start,
				      pgoff_t end)
{
	struct presto_vm *pvm = vmf->vma->vm_private_data;

	if (!pvm->lower_ops->map_pages)
		return 0;
	return pvm->lower_ops->map_pages(vmf, start, end);
}

static vm_fault_t presto_vm_page_mkwrite(struct vm_fault *vmf)
{
	struct presto_vm *pvm = vmf->vma->vm_private_data;
	struct presto_write w;
	vm_fault_t ret;
	int err;

	/*
	 * A wait for the permit that a signal (or a freezer) ended, in the
	 * process's own access: the fault is taken again once the signal is
	 * handled. An access the kernel makes for a system call (a read(2)
	 * into the mapping) would only fault again at once, the signal
	 * still pending: it fails, as every error here fails, like ext4's
	 * ENOSPC in page_mkwrite.
	 */
	err = presto_store_begin(pvm->file, -1, &w);
	if (err == -ERESTARTSYS && (vmf->flags & FAULT_FLAG_USER))
		return VM_FAULT_NOPAGE;
	if (err)
		return vmf_error(err);
	ret = pvm->lower_ops->page_mkwrite(vmf);
	if (!(ret & VM_FAULT_ERROR) && !atomic_xchg(&pvm->writing, 1))
		presto_store_mapped(pvm->file, true);
	presto_store_end(pvm->file, &w, !(ret & VM_FAULT_ERROR));
	return ret;
}

static const struct vm_operations_struct presto_vm_ops = {
	.open		= presto_vm_open,
	.close		= presto_vm_close,
	.fault		= presto_vm_fault,
	.map_pages	= presto_vm_map_pages,
	.page_mkwrite	= presto_vm_page_mkwrite,
};

static int presto_vm_wrap(struct file *file, struct vm_area_struct *vma)
{
	const struct vm_operations_struct *ops = vma->vm_ops;
	struct presto_vm *pvm;

	/*
	 * What presto can wrap: ext4's page cache mappings. A DAX one has
	 * huge_fault and pfn_mkwrite, which would bypass the accounting.
	 */
	if (!ops || !ops->fault || !ops->page_mkwrite || ops->huge_fault ||
	    ops->pfn_mkwrite || vma->vm_private_data)
		return -ENODEV;
	pvm = kzalloc(sizeof(*pvm), GFP_KERNEL);
	if (!pvm)
		return -ENOMEM;
	pvm->lower_ops = ops;
	pvm->file = get_file(file);
	atomic_set(&pvm->vmas, 1);
	vma->vm_private_data = pvm;
	vma->vm_ops = &presto_vm_ops;
	return 0;
}

static loff_t presto_llseek(struct file *file, loff_t offset, int whence)
{
	struct inode *lower_inode = presto_lower_inode(file_inode(file));
	struct file *lower;
	loff_t ret;

	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return generic_file_llseek_size(file, offset, whence,
						lower_inode->i_sb->s_maxbytes,
						i_size_read(lower_inode));
	/*
	 * Only the lower knows where the holes are. It also moves its own
	 * file's position, which presto never uses.
	 */
	lower = presto_lower_get(file);
	if (IS_ERR(lower))
		return PTR_ERR(lower);
	ret = vfs_llseek(lower, offset, whence);
	if (ret < 0)
		return ret;
	return vfs_setpos(file, ret, lower_inode->i_sb->s_maxbytes);
}

/*
 * fsync: the data in the cache, and its STORE and every record before.
 * The data is written out first and the log synced next: syncing the log
 * commits the ext4 transaction that holds the data's allocation too, so
 * that the lower fsync after it mostly finds its work done, and an fsync
 * costs one journal commit, as on ext4.
 */
static int presto_fsync(struct file *file, loff_t start, loff_t end,
			int datasync)
{
	struct file *lower = presto_lower_get(file);
	struct inode *inode = file_inode(file);
	u64 seq;
	int err;

	if (IS_ERR(lower))
		return PTR_ERR(lower);
	/*
	 * The STORE first: its record then goes out while the data does.
	 * It describes the content in the page cache, as a STORE at close
	 * does; the data is written before the fsync returns either way.
	 */
	err = presto_store(file, false);
	if (err)
		return err;
	seq = READ_ONCE(PRESTO_I(inode)->last_seq);
	if (seq)
		presto_journal_start_written(inode->i_sb, seq);
	err = filemap_write_and_wait_range(lower->f_mapping, start, end);
	if (err)
		return err;
	return presto_fsync_lower(inode, lower, start, end, datasync);
}

static long presto_fallocate(struct file *file, int mode, loff_t offset,
			     loff_t len)
{
	struct presto_write w;
	long ret;

	/* Zeroing a range writes over blocks in place. Opens the lower. */
	ret = presto_store_begin(file, offset, &w);
	if (ret)
		return ret;
	ret = vfs_fallocate(presto_lower_file(file), mode, offset, len);
	presto_store_end(file, &w, !ret);
	presto_copysize(file_inode(file));
	return ret;
}

static int presto_fadvise(struct file *file, loff_t offset, loff_t len,
			  int advice)
{
	struct file *lower;

	/*
	 * Readahead hints change the lower file's state: on a shared lower
	 * file they would change every other reader's readahead too, so
	 * they are accepted and not passed on. Page cache advice concerns
	 * the inode and is passed on.
	 */
	if (presto_file_is_shared(file) &&
	    (advice == POSIX_FADV_NORMAL || advice == POSIX_FADV_RANDOM ||
	     advice == POSIX_FADV_SEQUENTIAL))
		return 0;
	lower = presto_lower_get(file);
	if (IS_ERR(lower))
		return PTR_ERR(lower);
	return vfs_fadvise(lower, offset, len, advice);
}

static ssize_t presto_copy_file_range(struct file *in, loff_t pos_in,
				      struct file *out, loff_t pos_out,
				      size_t len, unsigned int flags)
{
	struct file *lin = in->f_op == &presto_file_fops ?
			   presto_lower_get(in) : in;
	struct presto_write w;
	ssize_t ret;

	if (IS_ERR(lin))
		return PTR_ERR(lin);
	/* Opens the lower file of @out if need be. */
	ret = presto_store_begin(out, pos_out, &w);
	if (ret)
		return ret;
	presto_lower_setfl(out, presto_lower_file(out));
	ret = vfs_copy_file_range(lin, pos_in, presto_lower_file(out), pos_out,
				  len, flags);
	if (ret > 0 && lin != in)
		file_accessed(in);
	presto_store_end(out, &w, ret > 0);
	presto_copysize(file_inode(out));
	return ret;
}

static long presto_ioctl(struct file *file, unsigned int cmd,
			 unsigned long arg)
{
	struct file *lower;

	/*
	 * chattr/lsattr and FIEMAP are served by the VFS through fileattr
	 * and ->fiemap; of the lower's own ioctls only the harmless query
	 * of the inode generation (lsattr -v) is passed on.
	 */
	switch (cmd) {
	case FS_IOC_GETVERSION:
		lower = presto_lower_get(file);
		if (IS_ERR(lower))
			return PTR_ERR(lower);
		if (!lower->f_op->unlocked_ioctl)
			return -ENOTTY;
		return lower->f_op->unlocked_ioctl(lower, cmd, arg);
	default:
		return -ENOTTY;
	}
}

/*
 * A shared writable mapping's vmas hold a lower file of their own, whose
 * file operations pass the kernel's calls on a mapping's file through
 * presto: remap_file_pages(2) maps the file anew (presto_map_mmap() wraps
 * the new vma too), madvise(MADV_REMOVE) punches a hole through
 * fallocate, and msync(2) is an fsync, each logged as the same call on
 * presto's file is. No other operation of a vma's file is ever called.
 * ->private_data holds presto's file (ext4 uses it for directories only).
 */
static int presto_map_mmap(struct file *mfile, struct vm_area_struct *vma)
{
	int err;

	err = file_inode(mfile)->i_fop->mmap(mfile, vma);
	if (err)
		return err;
	/* On failure the caller unmaps with the lower's own operations. */
	return presto_vm_wrap(mfile->private_data, vma);
}

static long presto_map_fallocate(struct file *mfile, int mode, loff_t offset,
				 loff_t len)
{
	long ret;

	/*
	 * presto's fallocate takes the permit, then the lower's freeze
	 * protection, as every change does: the freeze protection that
	 * vfs_fallocate() took on this file is let go meanwhile.
	 */
	file_end_write(mfile);
	ret = vfs_fallocate(mfile->private_data, mode, offset, len);
	file_start_write(mfile);
	return ret;
}

static int presto_map_fsync(struct file *mfile, loff_t start, loff_t end,
			    int datasync)
{
	return presto_fsync(mfile->private_data, start, end, datasync);
}

static int presto_map_release(struct inode *inode, struct file *mfile)
{
	int ret = 0;

	if (inode->i_fop->release)
		ret = inode->i_fop->release(inode, mfile);
	fput(mfile->private_data);
	return ret;
}

static const struct file_operations presto_map_fops = {
	.owner		= THIS_MODULE,
	.mmap		= presto_map_mmap,
	.fallocate	= presto_map_fallocate,
	.fsync		= presto_map_fsync,
	.release	= presto_map_release,
};

/* A mapping file for @file's shared writable mapping. */
static struct file *presto_map_open(struct file *file)
{
	struct file *mfile;

	mfile = presto_open_lower(&file->f_path, O_RDWR, file->f_cred);
	if (IS_ERR(mfile))
		return mfile;
	if (!mfile->f_op->mmap || mfile->f_op != file_inode(mfile)->i_fop) {
		fput(mfile);
		return ERR_PTR(-ENODEV);
	}
	/* No operation of the file runs before it is whole. */
	mfile->private_data = get_file(file);
	__module_get(THIS_MODULE);	/* what __fput() puts for the ops */
	fops_put(mfile->f_op);
	mfile->f_op = &presto_map_fops;
	return mfile;
}

static int presto_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct file *lower;
	int err;

	if (WARN_ON(file != vma->vm_file))
		return -EIO;
	if ((vma->vm_flags & (VM_SHARED | VM_MAYWRITE)) ==
	    (VM_SHARED | VM_MAYWRITE)) {
		lower = presto_map_open(file);
		if (IS_ERR(lower))
			return PTR_ERR(lower);
		vma_set_file(vma, lower);
		fput(lower);
	} else {
		lower = presto_lower_get(file);
		if (IS_ERR(lower))
			return PTR_ERR(lower);
		if (!lower->f_op->mmap)
			return -ENODEV;
		vma_set_file(vma, lower);
	}
	err = call_mmap(lower, vma);
	if (!err)
		file_accessed(file);
	return err;
}

const struct file_operations presto_file_fops = {
	.open		= presto_open,
	.release	= presto_release,
	.llseek		= presto_llseek,
	.read_iter	= presto_read_iter,
	.write_iter	= presto_write_iter,
	.splice_read	= generic_file_splice_read,
	.splice_write	= presto_splice_write,
	.mmap		= presto_mmap,
	.fsync		= presto_fsync,
	.fallocate	= presto_fallocate,
	.fadvise	= presto_fadvise,
	.copy_file_range = presto_copy_file_range,
	.unlocked_ioctl	= presto_ioctl,
	.setlease	= simple_nosetlease,
};

static sector_t presto_bmap(struct address_space *mapping, sector_t block)
{
	struct inode *lower = presto_lower_inode(mapping->host);

	if (!lower->i_mapping->a_ops->bmap)
		return 0;
	return lower->i_mapping->a_ops->bmap(lower->i_mapping, block);
}

/*
 * presto's own mapping never holds a page; direct_IO is here so that
 * O_DIRECT opens pass the VFS's check, the I/O itself is the lower's.
 */
const struct address_space_operations presto_aops = {
	.direct_IO	= noop_direct_IO,
	.bmap		= presto_bmap,
};
