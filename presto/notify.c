// SPDX-License-Identifier: GPL-2.0
/*
 * Changes that came from the server, told to the inotify and fanotify
 * watchers of the mount (protocol/KERNEL.md, "Watchers").
 *
 * lento changes the lower tree itself, so the VFS hooks, which fire only
 * for changes made through the mount, never see what the server changed.
 * presto raises the events instead, from what lento tells it. A regular
 * file lento breaks is reported modified at once: its content may have
 * changed, and what changed is known only when it is read again. A
 * directory's names come one by one: when lento breaks a directory whose
 * names someone watches, presto says so (WATCHED), and lento lists it
 * again at once and sends a NOTIFY for each name that came or went.
 *
 * An inode watched by inotify (or by a fanotify inode mark) is pinned by
 * its mark, so it is in memory when lento names it; one that is not in
 * memory has no such watcher, and its events are not raised.
 */
#include <linux/fsnotify.h>
#include "presto.h"

/*
 * How many objects of the mount have watchers (the superblock's own mark,
 * a fanotify filesystem mark, counts as one): lento revalidates a
 * watched fileset soon after the server broke its volume, not only at
 * its next use.
 */
u64 presto_notify_watched(struct super_block *sb)
{
#ifdef CONFIG_FSNOTIFY
	return atomic_long_read(&sb->s_fsnotify_connectors);
#else
	return 0;
#endif
}

/* Does anyone watch names come and go in @dir? */
static bool presto_dir_watched(struct inode *dir)
{
#ifdef CONFIG_FSNOTIFY
	u32 mask = READ_ONCE(dir->i_fsnotify_mask) |
		   READ_ONCE(dir->i_sb->s_fsnotify_mask);

	return mask & ALL_FSNOTIFY_DIRENT_EVENTS;
#else
	return false;
#endif
}

/*
 * lento broke @flags of the object named by @h. A regular file that
 * lost DATA is reported modified, to its own watchers and to its
 * directory's. True if @h is a directory whose names are watched: lento
 * is to list it again and NOTIFY what changed.
 */
bool presto_notify_break(struct super_block *sb, const struct presto_handle *h,
			 u32 flags)
{
	struct dentry *alias;
	struct inode *inode;
	bool watched = false;

	if (!(flags & PRESTO_CB_DATA))
		return false;
	inode = presto_ilookup(sb, h->ino, h->gen);
	if (!inode)
		return false;
	if (S_ISDIR(inode->i_mode)) {
		watched = presto_dir_watched(inode);
	} else if (S_ISREG(inode->i_mode)) {
		alias = d_find_alias(inode);
		if (alias) {
			fsnotify_dentry(alias, FS_MODIFY);
			dput(alias);
		} else {
			fsnotify_inode(inode, FS_MODIFY);
		}
	}
	iput(inode);
	return watched;
}

/*
 * The server added (PRESTO_EV_CREATE) or removed (PRESTO_EV_DELETE) @name
 * in the directory named by @h, and lento did the same in the lower. The
 * event's object is the directory: the entry's inode may not be in
 * memory, nor, for a name removed, anywhere.
 */
int presto_notify_name(struct super_block *sb, const struct presto_handle *h,
		       const char *name, u32 event)
{
	struct qstr q = QSTR_INIT(name, strlen(name));
	struct inode *dir;
	u32 mask;
	int err = 0;

	dir = presto_ilookup(sb, h->ino, h->gen);
	if (!dir)
		return 0;
	if (!S_ISDIR(dir->i_mode)) {
		err = -ENOTDIR;
		goto out;
	}
	mask = event & PRESTO_EV_CREATE ? FS_CREATE : FS_DELETE;
	if (event & PRESTO_EV_DIR)
		mask |= FS_ISDIR;
	fsnotify_name(mask, dir, FSNOTIFY_EVENT_INODE, dir, &q, 0);
out:
	iput(dir);
	return err;
}
