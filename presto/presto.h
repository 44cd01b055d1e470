/* SPDX-License-Identifier: GPL-2.0 */
/*
 * presto: a filter filesystem stacked over a directory on ext4.
 *
 * Every presto inode wraps one lower (ext4) inode and every presto dentry
 * one lower dentry. Attributes and data live only in the lower objects:
 * presto reads attributes from the lower inode when asked, and reads,
 * writes and mmap go straight to a lower file, so no page of file data is
 * ever cached twice.
 *
 * One private header for the whole module, as in fs/overlayfs.
 */
#ifndef _PRESTO_H
#define _PRESTO_H

#include <linux/fs.h>
#include <linux/mount.h>
#include <linux/path.h>
#include <linux/fs_context.h>
#include <linux/percpu-rwsem.h>
#include "presto_kml.h"
#include "presto_genl.h"

#define PRESTO_SUPER_MAGIC	0x70726573	/* "pres" */

/* The name at the root of the lower tree that presto keeps for itself. */
#define PRESTO_RESERVED_NAME	".presto"

/* Prefix of presto's own xattrs on lower inodes; hidden from the mount. */
#define PRESTO_XATTR_PREFIX	"trusted.presto."

struct presto_sb_info {
	struct path lower;		/* private clone of the lower mount */
	char *lower_name;		/* lower= as given, for /proc/mounts */
	const struct cred *creds;	/* the mounter's, for presto's own I/O */
	struct list_head mounts;	/* on presto_mounts, for overlap checks */
	struct presto_journal *journal;	/* the fileset's KML (journal.c) */
	struct presto_intent *intent;	/* intent marks (intent.c) */
	u64 kml_limit;			/* kml_limit=, bytes */
	/* A fileset mount (fileset=): its channel to lento (channel.c). */
	struct presto_fileset *fileset;
	char *fileset_name;		/* fileset= as given */
	unsigned long timeout;		/* timeout=, jiffies */
	u64 epoch;			/* the flags' epoch lento confirmed */
	/*
	 * The fileset's write-back permit (permit.c): changes hold
	 * permit_calls (page faults permit_faults) for reading while they
	 * run, so that a revoke can wait for the ones in progress.
	 */
	bool permit;
	struct percpu_rw_semaphore permit_calls, permit_faults;
	wait_queue_head_t permit_wq;	/* changes waiting for a drain */
	/*
	 * Does the lower give a regular file FMODE_NOWAIT? 0: no lower
	 * regular file was opened yet; else PRESTO_NOWAIT_NO or _YES. What a
	 * presto file whose lower file is not open yet says (file.c).
	 */
	int lower_nowait;
};

enum { PRESTO_NOWAIT_NO = 1, PRESTO_NOWAIT_YES };

struct presto_inode {
	struct inode *lower;		/* referenced; never changes */
	/*
	 * One lower file shared by every plain read-only open of this inode,
	 * opened on first use and dropped at eviction: opening the lower
	 * file is most of the cost of an open, and a read-only open with no
	 * special flags needs no state of its own in the lower file (the
	 * position lives in presto's file).
	 */
	struct file *shared_ro;
	/*
	 * A negative lower dentry for the name just removed through presto
	 * (dir.c), until the presto dentry turns negative and takes it.
	 */
	struct dentry *neg_lower;
	/* The last record about this inode, for fsync (change.c). */
	u64 last_seq;
	/*
	 * Data changes (writes, mmap, fallocate) and the ones a STORE
	 * record covers: a file owes a STORE while they differ.
	 */
	atomic64_t data_gen;
	u64 stored_gen;
	/*
	 * The intent mark that covers data being written (change.c), and
	 * the writes and shared writable mappings that need it.
	 */
	spinlock_t mark_lock;
	struct presto_mark *data_mark;
	unsigned int writers;
	/*
	 * The opener's creds of the file that last wrote (referenced):
	 * a STORE logged by an fsync through a file open only for reading
	 * is theirs, not the reader's, who may not write. Under mark_lock.
	 */
	const struct cred *writer_cred;
	/* Kernel callbacks (callback.c); under vfs_inode.i_lock. */
	u32 cb_flags;			/* PRESTO_CB_* */
	u64 cb_epoch;			/* they count in; 0: none */
	u32 cb_nlink;			/* a directory's at the server, or 0 */
	u32 cb_gen;			/* downcalls that changed the flags */
	unsigned int opens;		/* open files (a fileset's regular file) */
	unsigned long hinted;		/* jiffies of its last access hint */
	struct inode vfs_inode;
};

/* The epoch of what was made through the mount: valid in any epoch. */
#define PRESTO_EPOCH_LOCAL	U64_MAX

/*
 * A regular file open for writing. A read-only file's ->private_data is
 * its lower file itself, which saves an allocation on every open of the
 * commonest kind.
 */
struct presto_file {
	/* NULL until first used, in a file its open created (file.c). */
	struct file *lower;
	/* Room reserved for the STORE record this file may owe. */
	struct presto_kml_entry *store;
};

/* What a STORE carries; a write may have dropped set-id bits: the mode. */
#define PRESTO_KML_A_STORE	(PRESTO_KML_A_SIZE | PRESTO_KML_A_MTIME | \
				 PRESTO_KML_A_CTIME | PRESTO_KML_A_MODE)

/* A record on its way to the log: journal.c. */
struct presto_kml_entry {
	struct list_head list;
	u32 size;			/* of rec, padded */
	struct presto_kml_rec rec;	/* then names and data */
};

static inline struct presto_sb_info *presto_sb(const struct super_block *sb)
{
	return sb->s_fs_info;
}

static inline struct presto_inode *PRESTO_I(const struct inode *inode)
{
	return container_of(inode, struct presto_inode, vfs_inode);
}

static inline struct inode *presto_lower_inode(const struct inode *inode)
{
	return PRESTO_I(inode)->lower;
}

/*
 * The lower dentry of a presto dentry. NULL only for negative ones: the
 * reserved name, and names removed through presto (presto_d_iput()).
 */
static inline struct dentry *presto_lower_dentry(const struct dentry *dentry)
{
	return READ_ONCE(dentry->d_fsdata);
}

static inline struct vfsmount *presto_lower_mnt(const struct super_block *sb)
{
	return presto_sb(sb)->lower.mnt;
}

static inline struct user_namespace *presto_lower_userns(const struct super_block *sb)
{
	return mnt_user_ns(presto_lower_mnt(sb));
}

static inline void presto_lower_path(const struct dentry *dentry,
				     struct path *path)
{
	path->mnt = presto_lower_mnt(dentry->d_sb);
	path->dentry = presto_lower_dentry(dentry);
}

/*
 * The lower file behind a presto file; NULL for a file whose open created
 * it, until presto_lower_get() opens it.
 */
static inline struct file *presto_lower_file(const struct file *file)
{
	if (file->f_mode & FMODE_WRITE)
		return READ_ONCE(((struct presto_file *)file->private_data)->lower);
	return file->private_data;
}

/* super.c */
extern struct file_system_type presto_fs_type;

/* inode.c */
extern const struct inode_operations presto_file_iops;
extern const struct inode_operations presto_symlink_iops;
extern const struct inode_operations presto_special_iops;
struct inode *presto_iget(struct super_block *sb, struct dentry *lower);
struct inode *presto_ilookup(struct super_block *sb, u64 ino, u32 gen);
void presto_copyattr(struct inode *inode);
void presto_copysize(struct inode *inode);
int presto_update_time(struct inode *inode, struct timespec64 *time, int flags);
int presto_permission(struct user_namespace *userns, struct inode *inode,
		      int mask);
int presto_getattr(struct user_namespace *userns, const struct path *path,
		   struct kstat *stat, u32 request_mask, unsigned int flags);
int presto_setattr(struct user_namespace *userns, struct dentry *dentry,
		   struct iattr *attr);
int presto_fileattr_get(struct dentry *dentry, struct fileattr *fa);
int presto_fileattr_set(struct user_namespace *userns, struct dentry *dentry,
			struct fileattr *fa);
int presto_inode_cache_init(void);
void presto_inode_cache_destroy(void);
struct inode *presto_alloc_inode(struct super_block *sb);
void presto_free_inode(struct inode *inode);
void presto_evict_inode(struct inode *inode);

/* namei.c */
extern const struct dentry_operations presto_dentry_ops;
struct dentry *presto_lookup(struct inode *dir, struct dentry *dentry,
			     unsigned int flags);
bool presto_is_reserved(const struct inode *dir, const struct qstr *name);
void presto_set_lower_dentry(struct dentry *dentry, struct dentry *lower);

/* dir.c */
extern const struct inode_operations presto_dir_iops;

/* readdir.c */
extern const struct file_operations presto_dir_fops;

/* file.c */
extern const struct file_operations presto_file_fops;
extern const struct address_space_operations presto_aops;
struct file *presto_open_lower(const struct path *path, int flags,
			       const struct cred *cred);
struct file *presto_lower_get(struct file *file);

/* xattr.c */
extern const struct xattr_handler *presto_xattr_handlers[];
ssize_t presto_listxattr(struct dentry *dentry, char *list, size_t size);

/* journal.c */
struct presto_journal;
struct seq_file;
int presto_journal_open(struct super_block *sb, u64 limit);
void presto_journal_close(struct super_block *sb);
struct presto_kml_entry *presto_kml_alloc(struct super_block *sb,
					  enum presto_kml_op op,
					  size_t name_len, size_t name2_len,
					  size_t data_len, bool force,
					  const struct cred *cred);
void presto_kml_free(struct super_block *sb, struct presto_kml_entry *e);
u64 presto_kml_commit(struct super_block *sb, struct presto_kml_entry *e);
u64 presto_kml_commit_store(struct super_block *sb, struct presto_kml_entry *e);
bool presto_kml_foldable(struct super_block *sb, struct inode *lower,
			 u32 valid, const struct cred *cred);
u64 presto_kml_fold(struct super_block *sb, const struct presto_kml_attr *a,
		    struct inode *lower, const struct cred *cred);
int presto_journal_wait(struct super_block *sb, u64 seq);
void presto_journal_start_written(struct super_block *sb, u64 seq);
int presto_journal_wait_written(struct super_block *sb, u64 seq);
void presto_journal_flushed(struct super_block *sb, u64 seq);
int presto_journal_sync(struct super_block *sb);
void presto_journal_state(struct super_block *sb, struct presto_kml_state *st);
u64 presto_journal_stable(struct super_block *sb);
int presto_journal_ack(struct super_block *sb, u64 seq);
void presto_journal_show(struct seq_file *m, struct super_block *sb);
long presto_journal_ioctl(struct file *file, unsigned int cmd,
			  unsigned long arg);
int presto_private_dir(const struct path *parent, const char *name,
		       struct path *out);
int presto_private_unlink(const struct path *dir, const char *name);

/* intent.c */
struct presto_mark;
struct presto_mark *presto_mark_get(struct super_block *sb,
				    struct inode *lower, bool here);
void presto_mark_hold(struct super_block *sb, struct presto_mark *m);
void presto_mark_put(struct super_block *sb, struct presto_mark *m, u64 seq);
bool presto_mark_is(const struct presto_mark *m, const struct inode *lower);
int presto_mark_commit(struct super_block *sb, struct presto_mark *m);
int presto_intent_commit(struct super_block *sb);
void presto_intent_durable(struct super_block *sb, u64 seq);
void presto_intent_stored(struct super_block *sb, struct inode *lower);
/* Marks are in CACHE/.presto/intent/BB, BB the inode number modulo 64. */
#define PRESTO_INTENT_BUCKETS		64
#define PRESTO_INTENT_BUCKET_FMT	"%02x"
const struct path *presto_intent_dir(struct super_block *sb, int i);
int presto_intent_open(struct super_block *sb);
void presto_intent_close(struct super_block *sb);

/* channel.c */
struct presto_fileset;
struct sk_buff;
struct genl_info;
struct sock;
bool presto_fileset_name_ok(const char *name);
int presto_fileset_attach(struct super_block *sb, const char *name);
void presto_fileset_announce(struct super_block *sb);
void presto_fileset_detach(struct super_block *sb);
void presto_fileset_show(struct seq_file *m, struct super_block *sb);
int presto_upcall(struct inode *inode, u32 op);
void presto_hint_open(struct inode *inode);
/* for genl.c: what lento says */
struct presto_fileset *presto_fileset_get(const char *name, bool make);
void presto_fileset_put(struct presto_fileset *fs);
bool presto_fileset_is_lento(struct presto_fileset *fs, const struct sock *sk);
int presto_fileset_register(struct presto_fileset *fs, struct sock *sk,
			    struct genl_info *info, struct sk_buff *msg,
			    void *hdr);
void presto_fileset_resend(struct presto_fileset *fs);
void presto_fileset_unregister(struct presto_fileset *fs,
			       const struct sock *sk);
void presto_lento_closed(u32 portid);
int presto_filesets_init(void);
void presto_filesets_exit(void);
int presto_fileset_fill(struct presto_fileset *fs, struct sk_buff *skb);
int presto_fileset_set_epoch(struct presto_fileset *fs, u64 epoch);
int presto_fileset_reply(struct presto_fileset *fs, u64 id, int err,
			 u32 flags, u64 epoch);
int presto_fileset_progress(struct presto_fileset *fs, u64 id);
int presto_fileset_object(struct presto_fileset *fs, u8 cmd,
			  const struct presto_handle *h, u32 flags, u64 epoch);
void presto_fileset_kml_durable(struct super_block *sb);
int presto_fileset_kml_ack(struct presto_fileset *fs, u64 seq);
int presto_fileset_kml_request(struct presto_fileset *fs, u64 req,
			       bool revoke);
int presto_fileset_grant(struct presto_fileset *fs);
int presto_fileset_notify(struct presto_fileset *fs,
			  const struct presto_handle *h, const char *name,
			  u32 event);

/* permit.c */
int presto_permit_init(struct super_block *sb);
void presto_permit_destroy(struct super_block *sb);
int presto_permit_get(struct super_block *sb, bool fault);
void presto_permit_put(struct super_block *sb, bool fault);
void presto_permit_set(struct super_block *sb, bool held);
void presto_permit_drain(struct super_block *sb);

/* genl.c */
struct sk_buff *presto_genl_new(const char *fileset, size_t size, u8 cmd,
				void **hdr);
int presto_genl_init(void);
void presto_genl_exit(void);

/* callback.c */
void presto_cb_load(struct inode *inode, struct dentry *lower);
void presto_cb_local(struct inode *inode);
int presto_cb_need(struct inode *inode, u32 want);
void presto_cb_change(struct inode *inode, u32 set, u32 clear, u64 epoch);
bool presto_cb_apply(struct super_block *sb, const struct presto_handle *h,
		     u32 set, u32 clear, u64 epoch);
int presto_cb_purge(struct super_block *sb, const struct presto_handle *h);
int presto_cb_open(struct inode *inode, struct file *file);
void presto_cb_close(struct inode *inode);

/*
 * Does @inode have the flags @want (PRESTO_CB_*) in the fileset's epoch?
 * Lock-free, for RCU walks too: a torn read only costs an upcall.
 */
static inline bool presto_cb_valid(const struct inode *inode, u32 want)
{
	const struct presto_sb_info *sbi = presto_sb(inode->i_sb);
	const struct presto_inode *pi = PRESTO_I(inode);
	u64 epoch;

	if (!sbi->fileset)
		return true;
	if ((READ_ONCE(pi->cb_flags) & want) != want)
		return false;
	epoch = READ_ONCE(pi->cb_epoch);
	return epoch && (epoch == PRESTO_EPOCH_LOCAL ||
			 epoch == READ_ONCE(sbi->epoch));
}

/* notify.c */
u64 presto_notify_watched(struct super_block *sb);
bool presto_notify_break(struct super_block *sb, const struct presto_handle *h,
			 u32 flags);
int presto_notify_name(struct super_block *sb, const struct presto_handle *h,
		       const char *name, u32 event);

/* recover.c */
int presto_recover(struct super_block *sb, unsigned int **anchors,
		   unsigned int *nanchors);

/*
 * change.c: the one place every modification goes through. A change is
 * bracketed by presto_change_begin(), which reserves its record (or
 * refuses the change), marks the lower inodes in mark_on (intent.c) and
 * takes write access to the lower, and presto_change_end(); on success,
 * presto_change_log() commits the record under the locks that order the
 * change.
 */
struct presto_change {
	struct super_block *sb;
	/* Set by the caller before presto_change_begin(): what to mark. */
	struct inode *mark_on[3];
	struct presto_mark *marks[3];
	u64 seq;			/* the last record logged */
	struct presto_kml_entry *rec;	/* NULL: a change not logged */
	/* An O_TMPFILE linked in: its xattrs and its STORE. */
	struct presto_kml_entry **xattrs;
	unsigned int nxattrs;
	struct presto_kml_entry *store;
	bool permit;			/* held: the change logs */
	/*
	 * A SETATTR: set by the caller before presto_change_begin(), the
	 * lower object and what changes, so that it may fold into the
	 * object's last record instead of reserving one (journal.c).
	 */
	struct inode *fold;
	u32 fold_valid;
	bool folding;			/* it reserved none: it will fold */
};

/* A write in progress (presto_store_begin/end). */
struct presto_write {
	umode_t mode;			/* before: a write may drop set-id */
	bool permit;			/* held: the file has a name */
	bool fault;			/* a page fault's (permit.c) */
};

int presto_change_begin(struct presto_change *chg, struct super_block *sb,
			enum presto_kml_op op, const struct qstr *name,
			const struct qstr *name2, const void *data,
			size_t data_len);
u64 presto_change_log(struct presto_change *chg, unsigned int flags,
		      u32 valid, struct inode *dir, struct inode *obj,
		      struct inode *newdir, struct inode *target);
void presto_change_end(struct presto_change *chg);
int presto_change_tmpfile(struct presto_change *chg, struct super_block *sb,
			  struct dentry *lower);
void presto_change_free(struct presto_change *chg);
struct presto_mark *presto_change_mark(struct presto_change *chg,
				       struct inode *lower);
struct inode *presto_mark_whom(struct dentry *lower, struct dentry *parent);
struct inode *presto_mark_for(struct dentry *dentry);
void presto_data_mark_move(struct inode *inode, struct inode *from,
			   struct presto_mark *to);
int presto_store_begin(struct file *file, loff_t pos, struct presto_write *w);
void presto_store_end(struct file *file, const struct presto_write *w,
		      bool wrote);
void presto_store_mapped(struct file *file, bool hold);
int presto_store(struct file *file, bool closing);
int presto_log_recovered(struct super_block *sb, enum presto_kml_op op,
			 struct inode *dir, struct inode *obj,
			 const char *name, size_t name_len,
			 const void *data, size_t data_len, u32 valid);
int presto_fsync_lower(struct inode *inode, struct file *lower, loff_t start,
		       loff_t end, int datasync);

/* @inode's last record is @seq (0: none was logged). */
static inline void presto_stamp(struct inode *inode, u64 seq)
{
	if (inode && seq)
		WRITE_ONCE(PRESTO_I(inode)->last_seq, seq);
}

#endif /* _PRESTO_H */
