// SPDX-License-Identifier: GPL-2.0
/*
 * presto: mount, superblock and module.
 *
 *   mount -t presto -o lower=DIR[,fileset=NAME[,timeout=S]] presto MNT
 *
 * shows the tree under DIR, a directory on ext4; with fileset=, as lento's
 * cache of that fileset (protocol/KERNEL.md). Every refusal is one line
 * in the kernel log saying why, and a distinct errno:
 *   no lower=                      EINVAL
 *   lower does not exist           ENOENT (or the lookup's error)
 *   lower is not a directory       ENOTDIR
 *   lower is inside a presto mount ELOOP
 *   lower is not on ext4           EINVAL
 *   lower overlaps another presto mount's lower   EBUSY
 *   an unknown option              EINVAL
 *   kml_limit out of range         EINVAL
 *   fileset not a fileset name     EINVAL
 *   timeout out of range, or without fileset   EINVAL
 *   the fileset is mounted already EBUSY
 *   the log cannot be opened       its error (EROFS for a read-only
 *                                  lower, EUCLEAN for a damaged segment)
 */
#include <linux/module.h>
#include <linux/fs_parser.h>
#include <linux/namei.h>
#include <linux/seq_file.h>
#include <linux/statfs.h>
#include <linux/slab.h>
#include <linux/cred.h>
#include "presto.h"

/* Lower trees in use, so that no two mounts share any part of one. */
static LIST_HEAD(presto_mounts);
static DEFINE_MUTEX(presto_mounts_lock);

/* The log's default limit while nothing consumes it (kml_limit=, MiB). */
#define PRESTO_KML_LIMIT_MB	256
/* How long an upcall waits for lento (timeout=, seconds). */
#define PRESTO_TIMEOUT_S	30
#define PRESTO_TIMEOUT_MAX_S	3600

struct presto_fs_context {
	char *lower;
	u64 kml_limit_mb;	/* 0: not given */
	char *fileset;
	unsigned int timeout_s;	/* 0: not given */
};

enum { Opt_lower, Opt_kml_limit, Opt_fileset, Opt_timeout };

static const struct fs_parameter_spec presto_fs_parameters[] = {
	fsparam_string("lower", Opt_lower),
	fsparam_u64("kml_limit", Opt_kml_limit),
	fsparam_string("fileset", Opt_fileset),
	fsparam_u32("timeout", Opt_timeout),
	{}
};

static int presto_parse_param(struct fs_context *fc,
			      struct fs_parameter *param)
{
	struct presto_fs_context *ctx = fc->fs_private;
	struct fs_parse_result result;
	int opt;

	opt = fs_parse(fc, presto_fs_parameters, param, &result);
	if (opt < 0)
		return opt;
	switch (opt) {
	case Opt_lower:
		kfree(ctx->lower);
		ctx->lower = param->string;
		param->string = NULL;
		break;
	case Opt_kml_limit:
		/* At least a few segments; at most what a u64 of bytes holds. */
		if (result.uint_64 < 16 || result.uint_64 > (1ULL << 40))
			return invalfc(fc, "kml_limit=%llu: give 16 to %llu MiB",
				       result.uint_64, 1ULL << 40);
		ctx->kml_limit_mb = result.uint_64;
		break;
	case Opt_fileset:
		if (!presto_fileset_name_ok(param->string))
			return invalfc(fc, "fileset=%s: 1 to %d letters, digits, '.', '_', '-', not starting with '.'",
				       param->string, PRESTO_FILESET_MAX);
		kfree(ctx->fileset);
		ctx->fileset = param->string;
		param->string = NULL;
		break;
	case Opt_timeout:
		if (!result.uint_32 || result.uint_32 > PRESTO_TIMEOUT_MAX_S)
			return invalfc(fc, "timeout=%u: give 1 to %d seconds",
				       result.uint_32, PRESTO_TIMEOUT_MAX_S);
		ctx->timeout_s = result.uint_32;
		break;
	}
	return 0;
}

static bool presto_lowers_overlap(const struct path *a, const struct path *b)
{
	if (a->dentry->d_sb != b->dentry->d_sb)
		return false;
	return is_subdir(a->dentry, b->dentry) ||
	       is_subdir(b->dentry, a->dentry);
}

static int presto_claim_lower(struct presto_sb_info *sbi)
{
	struct presto_sb_info *other;
	int err = 0;

	mutex_lock(&presto_mounts_lock);
	list_for_each_entry(other, &presto_mounts, mounts) {
		if (presto_lowers_overlap(&sbi->lower, &other->lower)) {
			err = -EBUSY;
			break;
		}
	}
	if (!err)
		list_add(&sbi->mounts, &presto_mounts);
	mutex_unlock(&presto_mounts_lock);
	return err;
}

static void presto_release_lower(struct presto_sb_info *sbi)
{
	mutex_lock(&presto_mounts_lock);
	if (!list_empty(&sbi->mounts))
		list_del_init(&sbi->mounts);
	mutex_unlock(&presto_mounts_lock);
}

static int presto_statfs(struct dentry *dentry, struct kstatfs *buf)
{
	struct path lower;
	int err;

	presto_lower_path(dentry, &lower);
	err = vfs_statfs(&lower, buf);
	if (!err)
		buf->f_type = PRESTO_SUPER_MAGIC;
	return err;
}

/*
 * syncfs() on presto syncs the lower file system, which holds the data,
 * and the log.
 */
static int presto_sync_fs(struct super_block *sb, int wait)
{
	struct super_block *lower_sb = presto_lower_mnt(sb)->mnt_sb;
	int err;

	/* sync_filesystem() below makes both passes itself. */
	if (!wait)
		return 0;
	down_read(&lower_sb->s_umount);
	err = sync_filesystem(lower_sb);
	up_read(&lower_sb->s_umount);
	return err ?: presto_journal_sync(sb);
}

/*
 * fsfreeze on presto: the VFS has stopped changes through the mount and
 * synced it (presto_sync_fs(), the log included). The lower stays as it
 * is: freeze the cache's file system to stop it too.
 */
static int presto_freeze_fs(struct super_block *sb)
{
	return 0;
}

static int presto_unfreeze_fs(struct super_block *sb)
{
	return 0;
}

static int presto_show_options(struct seq_file *m, struct dentry *root)
{
	struct presto_sb_info *sbi = presto_sb(root->d_sb);

	seq_show_option(m, "lower", sbi->lower_name);
	seq_printf(m, ",kml_limit=%llu", sbi->kml_limit >> 20);
	if (sbi->fileset_name) {
		seq_show_option(m, "fileset", sbi->fileset_name);
		seq_printf(m, ",timeout=%u", jiffies_to_msecs(sbi->timeout) / 1000);
	}
	return 0;
}

/* /proc/self/mountstats: the log's state, and the channel's. */
static int presto_show_stats(struct seq_file *m, struct dentry *root)
{
	presto_journal_show(m, root->d_sb);
	presto_fileset_show(m, root->d_sb);
	return 0;
}

static const struct super_operations presto_sops = {
	.alloc_inode	= presto_alloc_inode,
	.free_inode	= presto_free_inode,
	.evict_inode	= presto_evict_inode,
	.drop_inode	= generic_delete_inode,
	.statfs		= presto_statfs,
	.sync_fs	= presto_sync_fs,
	.freeze_fs	= presto_freeze_fs,
	.unfreeze_fs	= presto_unfreeze_fs,
	.show_options	= presto_show_options,
	.show_stats	= presto_show_stats,
};

/* Resolve and check lower=; on success @path holds a reference. */
static int presto_lookup_lower(struct fs_context *fc, const char *name,
			       struct path *path)
{
	const char *fstype;
	int err;

	err = kern_path(name, LOOKUP_FOLLOW, path);
	if (err) {
		errorfc(fc, "lower %s: not found (error %d)", name, err);
		return err;
	}
	err = -ENOTDIR;
	if (!d_is_dir(path->dentry)) {
		errorfc(fc, "lower %s: not a directory", name);
		goto out;
	}
	err = -ELOOP;
	if (path->mnt->mnt_sb->s_type == &presto_fs_type) {
		errorfc(fc, "lower %s: inside a presto mount", name);
		goto out;
	}
	err = -EINVAL;
	fstype = path->mnt->mnt_sb->s_type->name;
	if (strcmp(fstype, "ext4")) {
		errorfc(fc, "lower %s: on %s, presto needs ext4", name, fstype);
		goto out;
	}
	return 0;
out:
	path_put(path);
	return err;
}

static int presto_fill_super(struct super_block *sb, struct fs_context *fc)
{
	struct presto_fs_context *ctx = fc->fs_private;
	struct presto_sb_info *sbi;
	struct super_block *lower_sb;
	struct vfsmount *mnt;
	struct inode *inode;
	struct path path;
	int err;

	if (!ctx->lower)
		return invalfc(fc, "missing lower=DIR");
	if (ctx->timeout_s && !ctx->fileset)
		return invalfc(fc, "timeout= goes with fileset=");
	err = presto_lookup_lower(fc, ctx->lower, &path);
	if (err)
		return err;

	err = -ENOMEM;
	sbi = kzalloc(sizeof(*sbi), GFP_KERNEL);
	if (!sbi)
		goto out_path;
	INIT_LIST_HEAD(&sbi->mounts);
	sb->s_fs_info = sbi;	/* presto_kill_sb() frees it */
	sbi->lower_name = kstrdup(ctx->lower, GFP_KERNEL);
	sbi->creds = prepare_creds();
	if (!sbi->lower_name || !sbi->creds || presto_permit_init(sb))
		goto out_path;

	/* A mount of our own: the user's may be changed or unmounted. */
	mnt = clone_private_mount(&path);
	err = PTR_ERR(mnt);
	if (IS_ERR(mnt)) {
		errorfc(fc, "lower %s: cannot clone its mount (error %d)",
			ctx->lower, err);
		goto out_path;
	}
	sbi->lower.mnt = mnt;
	sbi->lower.dentry = mnt->mnt_root;

	err = presto_claim_lower(sbi);
	if (err) {
		errorfc(fc, "lower %s: overlaps the lower of another presto mount",
			ctx->lower);
		goto out_path;
	}

	lower_sb = mnt->mnt_sb;
	sb->s_stack_depth = lower_sb->s_stack_depth + 1;
	err = -EINVAL;
	if (sb->s_stack_depth > FILESYSTEM_MAX_STACK_DEPTH) {
		errorfc(fc, "lower %s: file systems stacked too deep",
			ctx->lower);
		goto out_path;
	}
	sb->s_magic = PRESTO_SUPER_MAGIC;
	sb->s_op = &presto_sops;
	sb->s_d_op = &presto_dentry_ops;
	sb->s_xattr = presto_xattr_handlers;
	sb->s_maxbytes = lower_sb->s_maxbytes;
	sb->s_time_gran = lower_sb->s_time_gran;
	sb->s_blocksize = lower_sb->s_blocksize;
	sb->s_blocksize_bits = lower_sb->s_blocksize_bits;
	/* With ACLs the lower applies the umask, as ext4 would. */
	sb->s_flags |= lower_sb->s_flags & SB_POSIXACL;

	/* Before the root inode, which reads its callback flags. */
	if (ctx->fileset) {
		err = -ENOMEM;
		sbi->fileset_name = kstrdup(ctx->fileset, GFP_KERNEL);
		if (!sbi->fileset_name)
			goto out_path;
		sbi->timeout = (ctx->timeout_s ?: PRESTO_TIMEOUT_S) * HZ;
		err = presto_fileset_attach(sb, ctx->fileset);
		if (err) {
			errorfc(fc, "fileset %s: mounted already", ctx->fileset);
			goto out_path;
		}
	}

	inode = presto_iget(sb, sbi->lower.dentry);
	err = PTR_ERR(inode);
	if (IS_ERR(inode))
		goto out_path;
	err = -ENOMEM;
	sb->s_root = d_make_root(inode);
	if (!sb->s_root)
		goto out_path;
	sb->s_root->d_fsdata = dget(sbi->lower.dentry);

	sbi->kml_limit = (ctx->kml_limit_mb ?: PRESTO_KML_LIMIT_MB) << 20;
	err = presto_journal_open(sb, sbi->kml_limit);
	if (err) {
		errorfc(fc, "lower %s: cannot open the log in %s (error %d)",
			ctx->lower, PRESTO_RESERVED_NAME, err);
		goto out_path;
	}
	/* Recovery runs here, with the log open and the mount not yet seen. */
	err = presto_intent_open(sb);
	if (err)
		errorfc(fc, "lower %s: cannot recover from the intent marks in %s (error %d)",
			ctx->lower, PRESTO_RESERVED_NAME, err);
	else if (sbi->fileset)
		presto_fileset_announce(sb);
out_path:
	path_put(&path);
	return err;
}

static int presto_get_tree(struct fs_context *fc)
{
	return get_tree_nodev(fc, presto_fill_super);
}

static int presto_reconfigure(struct fs_context *fc)
{
	struct presto_fs_context *ctx = fc->fs_private;
	struct presto_sb_info *sbi = presto_sb(fc->root->d_sb);

	/* mount(8) passes the current options back on remount. */
	if (ctx->lower && strcmp(ctx->lower, sbi->lower_name))
		return invalfc(fc, "lower cannot be changed by remount");
	if (ctx->kml_limit_mb && ctx->kml_limit_mb << 20 != sbi->kml_limit)
		return invalfc(fc, "kml_limit cannot be changed by remount");
	if (ctx->fileset && (!sbi->fileset_name ||
			     strcmp(ctx->fileset, sbi->fileset_name)))
		return invalfc(fc, "fileset cannot be changed by remount");
	if (ctx->timeout_s && ctx->timeout_s * HZ != sbi->timeout)
		return invalfc(fc, "timeout cannot be changed by remount");
	/*
	 * Read-only from now on, sync(2), syncfs(2) and the umount skip
	 * presto: the log is made durable now, as the changes' data.
	 */
	if ((fc->sb_flags_mask & SB_RDONLY) && (fc->sb_flags & SB_RDONLY) &&
	    !sb_rdonly(fc->root->d_sb))
		return sync_filesystem(fc->root->d_sb);
	return 0;
}

static void presto_free_fc(struct fs_context *fc)
{
	struct presto_fs_context *ctx = fc->fs_private;

	if (ctx) {
		kfree(ctx->lower);
		kfree(ctx->fileset);
		kfree(ctx);
	}
}

static const struct fs_context_operations presto_context_ops = {
	.parse_param	= presto_parse_param,
	.get_tree	= presto_get_tree,
	.reconfigure	= presto_reconfigure,
	.free		= presto_free_fc,
};

static int presto_init_fs_context(struct fs_context *fc)
{
	struct presto_fs_context *ctx;

	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL);
	if (!ctx)
		return -ENOMEM;
	fc->fs_private = ctx;
	fc->ops = &presto_context_ops;
	return 0;
}

static void presto_kill_sb(struct super_block *sb)
{
	struct presto_sb_info *sbi = presto_sb(sb);

	/* No downcall may look for inodes while they are evicted. */
	if (sbi)
		presto_fileset_detach(sb);
	kill_anon_super(sb);
	if (!sbi)
		return;
	/* After the last change: generic_shutdown_super() synced the log. */
	presto_journal_close(sb);
	presto_intent_close(sb);
	presto_release_lower(sbi);
	if (sbi->lower.mnt)
		kern_unmount(sbi->lower.mnt);
	if (sbi->creds)
		put_cred(sbi->creds);
	presto_permit_destroy(sb);	/* safe on a zeroed one */
	kfree(sbi->lower_name);
	kfree(sbi->fileset_name);
	kfree(sbi);
}

struct file_system_type presto_fs_type = {
	.owner			= THIS_MODULE,
	.name			= "presto",
	.init_fs_context	= presto_init_fs_context,
	.parameters		= presto_fs_parameters,
	.kill_sb		= presto_kill_sb,
};
MODULE_ALIAS_FS("presto");

static int __init presto_init(void)
{
	int err;

	err = presto_inode_cache_init();
	if (err)
		return err;
	err = presto_genl_init();
	if (err)
		goto out_cache;
	err = register_filesystem(&presto_fs_type);
	if (err)
		goto out_channel;
	return 0;
out_channel:
	presto_genl_exit();
out_cache:
	presto_inode_cache_destroy();
	return err;
}

static void __exit presto_exit(void)
{
	unregister_filesystem(&presto_fs_type);
	presto_genl_exit();
	presto_inode_cache_destroy();
}

module_init(presto_init);
module_exit(presto_exit);

MODULE_DESCRIPTION("presto: a caching filter file system over ext4");
MODULE_AUTHOR("The presto/lento authors");
MODULE_LICENSE("GPL");
