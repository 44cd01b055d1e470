// SPDX-License-Identifier: GPL-2.0
/*
 * The one place every change goes through, and what it logs.
 *
 * Each modifying operation brackets its lower operation with
 * presto_change_begin() and presto_change_end(). begin reserves the
 * operation's KML record before anything is done, so that a change the log
 * has no room for is refused (ENOSPC) rather than done unlogged, and takes
 * write access to the lower mount (a read-only or frozen lower refuses or
 * waits cleanly). On success the operation calls presto_change_log() while
 * it still holds the locks that order it against other changes to the same
 * objects, so the log's order is the order the changes took effect in.
 * A struct presto_change starts zeroed.
 *
 * File data is logged differently: a write only counts (data_gen), and the
 * STORE record that says "this file's content changed" is written when a
 * file that wrote is closed or fsynced, or a shared writable mapping goes
 * away. Its room is reserved by the open file before the first write.
 *
 * A record carries the ids and groups of whoever made the change, for the
 * server's permission checks: the caller's; a STORE's, the opener's of the
 * file (write permission is checked at open), whoever closes it.
 *
 * Changes to an object with no name left (an unlinked open file, an
 * O_TMPFILE) are not logged: the object is gone from the tree. An
 * O_TMPFILE linked in is logged as a CREATE and a STORE.
 */
#include <linux/cred.h>
#include <linux/slab.h>
#include <linux/xattr.h>
#include "presto.h"

static void presto_kml_set_fh(struct presto_kml_fh *fh, struct inode *lower)
{
	if (!lower)
		return;
	fh->ino = cpu_to_le64(lower->i_ino);
	fh->gen = cpu_to_le32(lower->i_generation);
}

static void presto_kml_set_attr(struct presto_kml_attr *a, u32 valid,
				struct inode *lower)
{
	a->valid = cpu_to_le32(valid);
	a->mode = cpu_to_le32(lower->i_mode);
	a->uid = cpu_to_le32(from_kuid(&init_user_ns, lower->i_uid));
	a->gid = cpu_to_le32(from_kgid(&init_user_ns, lower->i_gid));
	a->size = cpu_to_le64(i_size_read(lower));
	a->atime_ns = cpu_to_le64(timespec64_to_ns(&lower->i_atime));
	a->mtime_ns = cpu_to_le64(timespec64_to_ns(&lower->i_mtime));
	a->ctime_ns = cpu_to_le64(timespec64_to_ns(&lower->i_ctime));
	a->rdev = cpu_to_le32(new_encode_dev(lower->i_rdev));
	a->nlink = cpu_to_le32(lower->i_nlink);
}

static void presto_kml_set_names(struct presto_kml_entry *e,
				 const struct qstr *name,
				 const struct qstr *name2,
				 const void *data, size_t data_len)
{
	char *p = (char *)(&e->rec + 1);

	if (name) {
		memcpy(p, name->name, name->len);
		p += name->len;
	}
	if (name2) {
		memcpy(p, name2->name, name2->len);
		p += name2->len;
	}
	if (data_len)
		memcpy(p, data, data_len);
}

/*
 * Let go of whatever @chg still holds: the records of a failed change,
 * and its marks (the last record logged under them is chg->seq).
 */
void presto_change_free(struct presto_change *chg)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(chg->marks); i++) {
		presto_mark_put(chg->sb, chg->marks[i], chg->seq);
		chg->marks[i] = NULL;
	}

	presto_kml_free(chg->sb, chg->rec);
	chg->rec = NULL;
	if (chg->permit)
		presto_permit_put(chg->sb, false);
	chg->permit = false;
	presto_kml_free(chg->sb, chg->store);
	chg->store = NULL;
	for (i = 0; i < chg->nxattrs; i++)
		presto_kml_free(chg->sb, chg->xattrs[i]);
	kfree(chg->xattrs);
	chg->xattrs = NULL;
	chg->nxattrs = 0;
}

/*
 * What to mark before changing @dentry's own state (attributes, xattrs):
 * nothing for an object with no name, as nothing about it is logged.
 * The caller holds @dentry's inode lock, which keeps it where it is.
 */
struct inode *presto_mark_for(struct dentry *dentry)
{
	struct dentry *lower = presto_lower_dentry(dentry);

	if (!d_inode(lower)->i_nlink)
		return NULL;
	return presto_mark_whom(lower, READ_ONCE(lower->d_parent));
}

/* Mark what chg->mark_on names, each inode once. */
static int presto_change_marks(struct presto_change *chg)
{
	struct presto_mark *m;
	unsigned int i, k;

	for (i = 0; i < ARRAY_SIZE(chg->mark_on); i++) {
		if (!chg->mark_on[i])
			continue;
		for (k = 0; k < i; k++)
			if (chg->mark_on[k] == chg->mark_on[i])
				break;
		if (k < i)
			continue;
		m = presto_mark_get(chg->sb, chg->mark_on[i], true);
		if (IS_ERR(m))
			return PTR_ERR(m);
		chg->marks[i] = m;
	}
	return 0;
}

/* The mark @chg holds for lower inode @lower, or NULL. */
struct presto_mark *presto_change_mark(struct presto_change *chg,
				       struct inode *lower)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(chg->marks); i++)
		if (chg->marks[i] && presto_mark_is(chg->marks[i], lower))
			return chg->marks[i];
	return NULL;
}

/*
 * The lower inode whose mark covers a change to the state of @lower (a
 * dentry with parent @parent): a directory marks itself; an object with
 * one name, the directory that holds it, whose listing recovery logs with
 * the state of every entry changed since the mark (so that a tar unpack
 * marks each directory once, not each file); an object with several names
 * or none that presto knows of, itself.
 */
struct inode *presto_mark_whom(struct dentry *lower, struct dentry *parent)
{
	struct inode *inode = d_inode(lower);

	if (S_ISDIR(inode->i_mode) || inode->i_nlink != 1 ||
	    d_unhashed(lower) || lower == parent)
		return inode;
	return d_inode(parent);
}

int presto_change_begin(struct presto_change *chg, struct super_block *sb,
			enum presto_kml_op op, const struct qstr *name,
			const struct qstr *name2, const void *data,
			size_t data_len)
{
	struct presto_kml_entry *e = NULL;
	int err;

	chg->sb = sb;
	if (op) {
		/* First: a wait for lento holds nothing else. */
		err = presto_permit_get(sb, false);
		if (err)
			goto fail;
		chg->permit = true;
	}
	if (op == PRESTO_KML_SETATTR && chg->fold &&
	    presto_kml_foldable(sb, chg->fold, chg->fold_valid,
				current_cred())) {
		chg->folding = true;
	} else if (op) {
		e = presto_kml_alloc(sb, op, name ? name->len : 0,
				     name2 ? name2->len : 0, data_len, false,
				     current_cred());
		err = PTR_ERR(e);
		if (IS_ERR(e))
			goto fail;
		presto_kml_set_names(e, name, name2, data, data_len);
		chg->rec = e;
	}
	/* A mark is made before the lower's write access is taken. */
	err = presto_change_marks(chg);
	if (err)
		goto fail;
	err = mnt_want_write(presto_lower_mnt(sb));
	if (err)
		goto fail;
	return 0;
fail:
	presto_change_free(chg);
	return err;
}

/*
 * Log a SETXATTR for xattr @name of @lower, as it is now, in @chg, made
 * by @cred.
 */
static int presto_change_add_xattr(struct presto_change *chg,
				   struct super_block *sb,
				   struct dentry *lower, const char *name,
				   void *buf, const struct cred *cred)
{
	struct qstr qname = QSTR_INIT(name, strlen(name));
	struct presto_kml_entry *e;
	ssize_t len;

	len = vfs_getxattr(&init_user_ns, lower, name, buf, XATTR_SIZE_MAX);
	if (len == -ENODATA)	/* gone since it was listed */
		return 0;
	if (len < 0)
		return len;
	if (qname.len > PRESTO_KML_NAME_MAX)
		return -ERANGE;
	e = presto_kml_alloc(sb, PRESTO_KML_SETXATTR, qname.len, 0, len,
			     false, cred);
	if (IS_ERR(e))
		return PTR_ERR(e);
	presto_kml_set_names(e, &qname, NULL, buf, len);
	chg->xattrs[chg->nxattrs++] = e;
	return 0;
}

/*
 * An O_TMPFILE being linked in is new to the tree: besides its CREATE it
 * owes a SETXATTR for each xattr it has (set through its file, or ACLs it
 * inherited) and the STORE of its content. Reserved on a zeroed @chg
 * before presto_change_begin(), as reserving may wait for the journal
 * thread, which must not happen with the lower's write access held; the
 * VFS holds the inode's lock, so its xattrs stay as listed.
 */
int presto_change_tmpfile(struct presto_change *chg, struct super_block *sb,
			  struct dentry *lower)
{
	const struct cred *old;
	char *names = NULL, *p;
	void *buf = NULL;
	ssize_t len;
	int n = 0, err;

	chg->store = presto_kml_alloc(sb, PRESTO_KML_STORE, 0, 0, 0, false,
				      current_cred());
	if (IS_ERR(chg->store)) {
		err = PTR_ERR(chg->store);
		chg->store = NULL;
		return err;
	}
	/*
	 * Every xattr, trusted.* too: read with presto's own credentials,
	 * logged as the caller's (@old).
	 */
	old = override_creds(presto_sb(sb)->creds);
	len = vfs_listxattr(lower, NULL, 0);
	err = len;
	if (len <= 0)
		goto out;
	err = -ENOMEM;
	names = kvmalloc(len, GFP_KERNEL);
	buf = kvmalloc(XATTR_SIZE_MAX, GFP_KERNEL);
	if (!names || !buf)
		goto out;
	len = vfs_listxattr(lower, names, len);
	err = len;
	if (len < 0)
		goto out;
	for (p = names; p < names + len; p += strlen(p) + 1)
		n++;
	err = -ENOMEM;
	chg->xattrs = kcalloc(n, sizeof(*chg->xattrs), GFP_KERNEL);
	if (!chg->xattrs)
		goto out;
	err = 0;
	for (p = names; p < names + len && !err; p += strlen(p) + 1)
		if (strncmp(p, PRESTO_XATTR_PREFIX,
			    strlen(PRESTO_XATTR_PREFIX)))
			err = presto_change_add_xattr(chg, sb, lower, p, buf,
						      old);
out:
	revert_creds(old);
	kvfree(names);
	kvfree(buf);
	return err < 0 ? err : 0;
}

static bool presto_kml_about_object(enum presto_kml_op op)
{
	return op == PRESTO_KML_SETATTR || op == PRESTO_KML_SETXATTR ||
	       op == PRESTO_KML_REMOVEXATTR || op == PRESTO_KML_STORE;
}

/*
 * Commit @e about the lower inodes given; it is the log's then. Returns its
 * sequence number, or 0 if it was not logged.
 */
static u64 presto_kml_log(struct super_block *sb, struct presto_kml_entry *e,
			  unsigned int flags, u32 valid, struct inode *dir,
			  struct inode *obj, struct inode *newdir,
			  struct inode *target)
{
	struct presto_kml_rec *r = &e->rec;
	enum presto_kml_op op = le16_to_cpu(r->op);

	if (presto_kml_about_object(op) && !obj->i_nlink) {
		presto_kml_free(sb, e);
		return 0;
	}
	/* Its maker's ids and groups were set when it was reserved. */
	r->flags |= cpu_to_le16(flags);
	presto_kml_set_fh(&r->fh[PRESTO_KML_FH_DIR], dir);
	presto_kml_set_fh(&r->fh[PRESTO_KML_FH_OBJ], obj);
	presto_kml_set_fh(&r->fh[PRESTO_KML_FH_NEWDIR], newdir);
	presto_kml_set_fh(&r->fh[PRESTO_KML_FH_TARGET], target);
	if (obj)
		presto_kml_set_attr(&r->attr, valid, obj);
	if (op == PRESTO_KML_STORE && !(flags & PRESTO_KML_F_RECOVERED))
		return presto_kml_commit_store(sb, e);
	return presto_kml_commit(sb, e);
}

/*
 * A SETATTR that reserved no record, as it would fold into the object's
 * last one: folded now, or if that record went to the disk meanwhile,
 * logged in a record of its own, owed for a change made (rare: the
 * thread ran in between; reserving it may pass the log's limit by as
 * much as a STORE at close may).
 */
static u64 presto_change_fold(struct presto_change *chg, u32 valid,
			      struct inode *obj)
{
	struct presto_kml_entry *e;
	struct presto_kml_attr a;
	u64 seq;

	if (!obj->i_nlink)	/* nothing about it is logged */
		return 0;
	presto_kml_set_attr(&a, valid, obj);
	seq = presto_kml_fold(chg->sb, &a, obj, current_cred());
	if (seq)
		return seq;
	e = presto_kml_alloc(chg->sb, PRESTO_KML_SETATTR, 0, 0, 0, true,
			     current_cred());
	if (IS_ERR(e))		/* a broken log, which says so */
		return 0;
	return presto_kml_log(chg->sb, e, 0, valid, NULL, obj, NULL, NULL);
}

/*
 * Log a successful change, given the lower inodes it concerns: @dir the
 * parent (old parent of a rename), @obj the object, @newdir and @target
 * for a rename. @valid says which of @obj's attributes the record
 * carries. The caller stamps the presto inodes with the sequence number
 * returned (presto_stamp()), for fsync.
 */
u64 presto_change_log(struct presto_change *chg, unsigned int flags,
		      u32 valid, struct inode *dir, struct inode *obj,
		      struct inode *newdir, struct inode *target)
{
	unsigned int i;
	u64 seq = 0;

	if (chg->folding)
		seq = presto_change_fold(chg, valid, obj);
	else if (chg->rec)
		seq = presto_kml_log(chg->sb, chg->rec, flags, valid, dir, obj,
				     newdir, target);
	chg->rec = NULL;
	chg->folding = false;
	for (i = 0; i < chg->nxattrs; i++)
		seq = presto_kml_log(chg->sb, chg->xattrs[i], 0,
				     PRESTO_KML_A_MODE | PRESTO_KML_A_CTIME,
				     NULL, obj, NULL, NULL) ?: seq;
	chg->nxattrs = 0;
	if (chg->store)
		seq = presto_kml_log(chg->sb, chg->store, 0,
				     PRESTO_KML_A_STORE, NULL, obj, NULL,
				     NULL) ?: seq;
	chg->store = NULL;
	chg->seq = max(chg->seq, seq);
	return seq;
}

void presto_change_end(struct presto_change *chg)
{
	/* A change that failed logs nothing. */
	presto_change_free(chg);
	mnt_drop_write(presto_lower_mnt(chg->sb));
}

/*
 * The mark that covers @file's data while it is being written (see
 * presto_mark_whom()): held by the inode from the first write after a
 * STORE until the next STORE, and while a shared writable mapping exists.
 * A file with no name is not logged and needs none. A rename or a new
 * hard link moves it (presto_data_mark_move()); a name going away makes
 * the inode unhashed, so the next first write marks the file itself.
 */
static struct presto_mark *presto_data_mark(struct file *file)
{
	struct super_block *sb = file_inode(file)->i_sb;
	struct presto_inode *pi = PRESTO_I(file_inode(file));
	struct dentry *lower = presto_lower_dentry(file->f_path.dentry);
	struct presto_mark *m, *held;
	struct dentry *parent;
	struct inode *whom;

	for (;;) {
		spin_lock(&pi->mark_lock);
		if (pi->data_mark || !pi->lower->i_nlink) {
			pi->writers++;
			held = pi->data_mark;
			spin_unlock(&pi->mark_lock);
			return held;
		}
		spin_unlock(&pi->mark_lock);

		parent = dget_parent(lower);
		whom = presto_mark_whom(lower, parent);
		m = presto_mark_get(sb, whom, false);
		if (IS_ERR(m)) {
			dput(parent);
			return m;
		}
		/* Still the right one, after waiting? A rename may have won. */
		spin_lock(&pi->mark_lock);
		if (!pi->data_mark && READ_ONCE(lower->d_parent) == parent &&
		    presto_mark_whom(lower, parent) == whom) {
			pi->data_mark = m;
			m = NULL;
		}
		spin_unlock(&pi->mark_lock);
		dput(parent);
		presto_mark_put(sb, m, 0);
	}
}

static void presto_data_unhold(struct inode *inode, int writers)
{
	struct presto_inode *pi = PRESTO_I(inode);

	spin_lock(&pi->mark_lock);
	pi->writers -= writers;
	spin_unlock(&pi->mark_lock);
}

/* After a STORE (or none owed): let go of the data mark if it is idle. */
static void presto_data_release(struct inode *inode, u64 seq)
{
	struct presto_inode *pi = PRESTO_I(inode);
	struct presto_mark *m = NULL;

	spin_lock(&pi->mark_lock);
	if (!pi->writers &&
	    atomic64_read(&pi->data_gen) == READ_ONCE(pi->stored_gen)) {
		m = pi->data_mark;
		pi->data_mark = NULL;
	}
	spin_unlock(&pi->mark_lock);
	presto_mark_put(inode->i_sb, m, seq);
}

/*
 * @inode (a regular file) now has a name under the directory that @to
 * marks, instead of under @from's (NULL: it has one more name, and is
 * marked by itself from now on).
 */
void presto_data_mark_move(struct inode *inode, struct inode *from,
			   struct presto_mark *to)
{
	struct presto_inode *pi = PRESTO_I(inode);
	struct presto_mark *old = NULL;

	if (!to || !S_ISREG(inode->i_mode))
		return;
	spin_lock(&pi->mark_lock);
	/* An O_TMPFILE being written as it is linked in has none yet. */
	if ((pi->data_mark && pi->data_mark != to &&
	     (!from || presto_mark_is(pi->data_mark, from))) ||
	    (!pi->data_mark && pi->writers)) {
		old = pi->data_mark;
		presto_mark_hold(inode->i_sb, to);
		pi->data_mark = to;
	}
	spin_unlock(&pi->mark_lock);
	presto_mark_put(inode->i_sb, old, 0);
}

/* @file (open for writing) is the one that writes @inode now. */
static void presto_store_writer(struct inode *inode, struct file *file)
{
	struct presto_inode *pi = PRESTO_I(inode);
	const struct cred *old;

	if (likely(READ_ONCE(pi->writer_cred) == file->f_cred))
		return;
	get_cred(file->f_cred);
	spin_lock(&pi->mark_lock);
	old = pi->writer_cred;
	pi->writer_cred = file->f_cred;
	spin_unlock(&pi->mark_lock);
	if (old)
		put_cred(old);
}

/* The creds of @inode's last writer, referenced; NULL if none wrote. */
static const struct cred *presto_store_writer_get(struct inode *inode)
{
	struct presto_inode *pi = PRESTO_I(inode);
	const struct cred *cred;

	spin_lock(&pi->mark_lock);
	cred = pi->writer_cred ? get_cred(pi->writer_cred) : NULL;
	spin_unlock(&pi->mark_lock);
	return cred;
}

/*
 * Room for the STORE that writes through @file (open for writing) owe,
 * made by its opener.
 */
static int presto_store_reserve(struct file *file)
{
	struct presto_file *pf = file->private_data;
	struct super_block *sb = file_inode(file)->i_sb;
	struct presto_kml_entry *e;

	if (likely(READ_ONCE(pf->store)))
		return 0;
	e = presto_kml_alloc(sb, PRESTO_KML_STORE, 0, 0, 0, false,
			     file->f_cred);
	if (IS_ERR(e))
		return PTR_ERR(e);
	if (cmpxchg(&pf->store, NULL, e))
		presto_kml_free(sb, e);
	return 0;
}

/*
 * Before a write through @file at @pos (-1: anywhere, a page fault's
 * through a mapping): the permit (a file with no name logs nothing and needs
 * none), room for the STORE it will owe, or the write is refused before
 * it is done, and the mark that covers the data; opens @file's lower file
 * if its open put that off. Notes the mode, which a
 * write may change (set-id bits) even when it fails. Every successful
 * call is paired with presto_store_end().
 */
int presto_store_begin(struct file *file, loff_t pos, struct presto_write *w)
{
	struct inode *inode = file_inode(file);
	struct super_block *sb = inode->i_sb;
	struct presto_mark *m;
	int err;

	/* The writer's lower file, which the data mark goes by. */
	err = PTR_ERR_OR_ZERO(presto_lower_get(file));
	if (err)
		return err;
	w->mode = presto_lower_inode(inode)->i_mode;
	w->permit = presto_lower_inode(inode)->i_nlink;
	w->fault = pos < 0;
	if (w->permit) {
		err = presto_permit_get(sb, w->fault);
		if (err)
			return err;
	}
	err = presto_store_reserve(file);
	if (err)
		goto fail;
	presto_store_writer(inode, file);
	m = presto_data_mark(file);
	err = PTR_ERR(m);
	if (IS_ERR(m))
		goto fail;
	/*
	 * ext4 orders new blocks after the transaction that holds the mark,
	 * but may write a block over an old one any time: the mark first.
	 */
	if (m && (pos < 0 || pos < i_size_read(presto_lower_inode(inode)))) {
		err = presto_mark_commit(sb, m);
		if (err) {
			presto_data_unhold(inode, 1);
			goto fail;
		}
	}
	return 0;
fail:
	if (w->permit)
		presto_permit_put(sb, w->fault);
	return err;
}

/* After a write through @file: did it change the file? */
void presto_store_end(struct file *file, const struct presto_write *w,
		      bool wrote)
{
	struct inode *inode = file_inode(file);

	if (wrote || presto_lower_inode(inode)->i_mode != w->mode)
		atomic64_inc(&PRESTO_I(inode)->data_gen);
	presto_data_unhold(inode, 1);
	if (w->permit)
		presto_permit_put(inode->i_sb, w->fault);
}

/*
 * A shared writable mapping may change the file at any time once a page
 * of it was made writable: it holds the data mark as a writer does, until
 * it goes away (@hold false), which counts as a write.
 */
void presto_store_mapped(struct file *file, bool hold)
{
	struct inode *inode = file_inode(file);
	struct presto_inode *pi = PRESTO_I(inode);

	if (!hold)
		atomic64_inc(&pi->data_gen);
	spin_lock(&pi->mark_lock);
	pi->writers += hold ? 1 : -1;
	spin_unlock(&pi->mark_lock);
}

/*
 * Log the STORE @file owes, if the content changed since the last STORE,
 * as its opener's -- or, @file open only for reading (an fsync), as the
 * last writer's opener's. Unless @closing, reserve again for the writes
 * still to come.
 */
int presto_store(struct file *file, bool closing)
{
	/* A read-only file (fsync) has no room of its own reserved. */
	struct presto_file *pf = file->f_mode & FMODE_WRITE ?
				 file->private_data : NULL;
	struct inode *inode = file_inode(file);
	struct presto_inode *pi = PRESTO_I(inode);
	struct presto_kml_entry *e = NULL;
	u64 gen = atomic64_read(&pi->data_gen);
	u64 seq;

	if (gen == READ_ONCE(pi->stored_gen)) {
		if (closing && pf)
			presto_kml_free(inode->i_sb, xchg(&pf->store, NULL));
		presto_data_release(inode, 0);
		return 0;
	}
	if (pf)
		e = xchg(&pf->store, NULL);
	/*
	 * Owed for a change already made: past the log's limit if need be.
	 * Through a read-only file (an fsync), the writer's.
	 */
	if (!e) {
		const struct cred *writer = pf ? NULL :
					    presto_store_writer_get(inode);

		e = presto_kml_alloc(inode->i_sb, PRESTO_KML_STORE, 0, 0, 0,
				     true, writer ?: file->f_cred);
		if (writer)
			put_cred(writer);
	}
	if (IS_ERR(e))		/* the log is broken */
		return PTR_ERR(e);
	WRITE_ONCE(pi->stored_gen, gen);
	seq = presto_kml_log(inode->i_sb, e, 0, PRESTO_KML_A_STORE, NULL,
			     pi->lower, NULL, NULL);
	presto_stamp(inode, seq);
	if (seq)
		presto_intent_stored(inode->i_sb, pi->lower);
	presto_data_release(inode, seq);
	/*
	 * Room for the next STORE: if there is none, the next write is
	 * refused; this fsync has done its work either way.
	 */
	if (!closing && pf)
		presto_store_reserve(file);
	return 0;
}

/* Recovery (recover.c): log a record with flag RECOVERED. */
int presto_log_recovered(struct super_block *sb, enum presto_kml_op op,
			 struct inode *dir, struct inode *obj,
			 const char *name, size_t name_len,
			 const void *data, size_t data_len, u32 valid)
{
	struct qstr qname = QSTR_INIT(name, name_len);
	struct presto_kml_entry *e;

	e = presto_kml_alloc(sb, op, name_len, 0, data_len, true,
			     current_cred());
	if (IS_ERR(e))
		return PTR_ERR(e);
	presto_kml_set_names(e, name ? &qname : NULL, NULL, data, data_len);
	presto_kml_log(sb, e, PRESTO_KML_F_RECOVERED, valid, dir, obj, NULL,
		       NULL);
	return 0;
}

/*
 * fsync of @inode through its lower file @lower: the lower object and
 * every record about @inode durable. The records are written back first;
 * the lower fsync's cache flush (its jbd2 commit's, or the flush ext4
 * issues when there is nothing to commit) then makes them durable along
 * with the file, with no sync of the log of its own.
 */
int presto_fsync_lower(struct inode *inode, struct file *lower, loff_t start,
		       loff_t end, int datasync)
{
	u64 seq = READ_ONCE(PRESTO_I(inode)->last_seq);
	int flush, err;

	flush = seq ? presto_journal_wait_written(inode->i_sb, seq) : 0;
	if (flush < 0)
		return flush;
	err = vfs_fsync_range(lower, start, end, datasync);
	if (err)
		return err;
	if (flush)
		presto_journal_flushed(inode->i_sb, seq);
	return 0;
}
