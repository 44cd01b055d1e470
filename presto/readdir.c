// SPDX-License-Identifier: GPL-2.0
/*
 * Directory files: each open presto directory owns one open lower
 * directory, which keeps the lower file system's readdir state (ext4's
 * htree cursor). Offsets are the lower's, so telldir/seekdir positions
 * are exactly ext4's and stay valid across calls.
 */
#include <linux/namei.h>
#include "presto.h"

struct presto_readdir_ctx {
	struct dir_context ctx;
	struct dir_context *caller;
	bool root;
};

static bool presto_filldir(struct dir_context *ctx, const char *name,
			   int namelen, loff_t offset, u64 ino,
			   unsigned int d_type)
{
	struct presto_readdir_ctx *rctx =
		container_of(ctx, struct presto_readdir_ctx, ctx);

	/* presto's own files at the root are not part of the tree. */
	if (rctx->root && namelen == sizeof(PRESTO_RESERVED_NAME) - 1 &&
	    !memcmp(name, PRESTO_RESERVED_NAME, namelen))
		return true;
	return rctx->caller->actor(rctx->caller, name, namelen, offset, ino,
				   d_type);
}

static int presto_iterate(struct file *file, struct dir_context *ctx)
{
	struct file *lower = presto_lower_file(file);
	/* A lower that fails before it reads leaves the position as it was. */
	struct presto_readdir_ctx rctx = {
		.ctx.actor = presto_filldir,
		.ctx.pos = ctx->pos,
		.caller = ctx,
		.root = IS_ROOT(file->f_path.dentry),
	};
	int err;

	err = presto_cb_need(file_inode(file), PRESTO_CB_DATA);
	if (err)
		return err;
	lower->f_pos = ctx->pos;
	err = iterate_dir(lower, &rctx.ctx);
	ctx->pos = rctx.ctx.pos;
	return err;
}

static loff_t presto_dir_llseek(struct file *file, loff_t offset, int whence)
{
	struct file *lower = presto_lower_file(file);
	loff_t ret;

	/* The lower decides which offsets are valid (ext4 hashes). */
	lower->f_pos = file->f_pos;
	ret = vfs_llseek(lower, offset, whence);
	if (ret >= 0)
		file->f_pos = lower->f_pos;
	return ret;
}

static int presto_dir_open(struct inode *inode, struct file *file)
{
	struct file *lfile;

	lfile = presto_open_lower(&file->f_path, file->f_flags, current_cred());
	if (IS_ERR(lfile))
		return PTR_ERR(lfile);
	file->private_data = lfile;
	return 0;
}

static int presto_dir_release(struct inode *inode, struct file *file)
{
	fput(presto_lower_file(file));
	return 0;
}

static int presto_dir_fsync(struct file *file, loff_t start, loff_t end,
			    int datasync)
{
	return presto_fsync_lower(file_inode(file), presto_lower_file(file),
				  start, end, datasync);
}

const struct file_operations presto_dir_fops = {
	.open		= presto_dir_open,
	.release	= presto_dir_release,
	.iterate_shared	= presto_iterate,
	.llseek		= presto_dir_llseek,
	.read		= generic_read_dir,
	.fsync		= presto_dir_fsync,
	.unlocked_ioctl	= presto_journal_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
};
