// SPDX-License-Identifier: GPL-2.0
/*
 * Recovery at mount: for every intent mark a crash left behind, log the
 * state of the object it names, so that whatever the cache kept of the
 * changes the log lost is in the log (protocol/KML.md, "Recovery
 * records"). Runs before the mount is visible: nothing changes the cache
 * meanwhile.
 *
 * A mark names its object by lower handle; the object is found through
 * ext4's export operations, as nfsd would find it. A directory is logged
 * with its whole listing and the state of the entries that changed since
 * the mark was set (their ctime says so); an object, with its attributes,
 * its xattrs and, for a regular file, a STORE. Over-reporting costs the
 * consumer a comparison; leaving a change out is what must not happen.
 */
#include <linux/exportfs.h>
#include <linux/namei.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/xattr.h>
#include "presto.h"

/* Entries whose ctime is this much older than the mark still count. */
#define PRESTO_RECOVER_SLACK	1

struct presto_lost_mark {
	char name[64];
	int bucket;		/* where it is (presto_intent_dir()) */
	u64 ino;
	u32 gen;
	s64 secs;
	struct dentry *dentry;	/* the object, or NULL: gone */
	int depth;		/* of a directory below the root; else INT_MAX */
};

struct presto_mark_list {
	struct dir_context ctx;
	struct presto_lost_mark *marks;
	unsigned int count, size;
	/* The anchors listed but anchor.0 (which stays): their numbers. */
	unsigned int *anchors;
	unsigned int nanchors, anchors_size;
	int bucket;		/* the one being listed, -1: the top */
	int err;
};

/* Is @name a bucket of the intent directory? */
static bool presto_is_bucket(const char *name, int len)
{
	char buf[8];
	int i;

	for (i = 0; i < PRESTO_INTENT_BUCKETS; i++) {
		if (snprintf(buf, sizeof(buf), PRESTO_INTENT_BUCKET_FMT, i) ==
		    len && !memcmp(buf, name, len))
			return true;
	}
	return false;
}

struct presto_recovery {
	struct super_block *sb;
	void *buf;		/* XATTR_SIZE_MAX bytes, for values */
	char *names;		/* XATTR_LIST_MAX bytes, for xattr names */
	u64 records;
	unsigned int objects;
};

/*
 * Anchor @n, listed as @name: its number kept for its removal, the names
 * as listed rather than a range guessed from the highest (a name planted
 * or damaged on the disk could say anchor.4294967295). Not presto's if
 * not as presto writes it (anchor.01).
 */
static bool presto_anchor_found(struct presto_mark_list *l, const char *name,
				unsigned int n)
{
	unsigned int *more;
	char want[32];

	snprintf(want, sizeof(want), "anchor.%u", n);
	if (strcmp(want, name)) {
		pr_warn("presto: unknown entry %s in the intent directory\n",
			name);
		return true;
	}
	if (!n)
		return true;	/* anchor.0 stays */
	if (l->nanchors == l->anchors_size) {
		l->anchors_size = l->anchors_size ? 2 * l->anchors_size : 8;
		more = krealloc_array(l->anchors, l->anchors_size,
				      sizeof(*more), GFP_KERNEL);
		if (!more) {
			l->err = -ENOMEM;
			return false;
		}
		l->anchors = more;
	}
	l->anchors[l->nanchors++] = n;
	return true;
}

static bool presto_mark_filldir(struct dir_context *ctx, const char *name,
				int len, loff_t pos, u64 ino, unsigned int type)
{
	struct presto_mark_list *l = container_of(ctx, struct presto_mark_list,
						  ctx);
	struct presto_lost_mark *m, *more;
	char buf[64];
	unsigned int n;
	int end = 0;

	if (len >= sizeof(buf))
		return true;
	memcpy(buf, name, len);
	buf[len] = '\0';
	if (l->bucket < 0 && presto_is_bucket(name, len))
		return true;	/* listed on its own */
	if (l->bucket < 0 &&
	    sscanf(buf, "anchor.%u%n", &n, &end) == 1 && end == len)
		return presto_anchor_found(l, buf, n);
	if (l->count == l->size) {
		l->size = l->size ? 2 * l->size : 16;
		more = krealloc_array(l->marks, l->size, sizeof(*more),
				      GFP_KERNEL);
		if (!more) {
			l->err = -ENOMEM;
			return false;
		}
		l->marks = more;
	}
	m = &l->marks[l->count];
	memset(m, 0, sizeof(*m));
	if (sscanf(buf, "m.%llu.%u.%lld%n", &m->ino, &m->gen, &m->secs,
		   &end) != 3 || end != len || m->ino > U32_MAX) {
		/* Not presto's: leave it alone. */
		if (strcmp(buf, ".") && strcmp(buf, ".."))
			pr_warn("presto: unknown entry %s in the intent directory\n",
				buf);
		return true;
	}
	strscpy(m->name, buf, sizeof(m->name));
	m->bucket = l->bucket;
	l->count++;
	return true;
}

static int presto_list_dir(const struct path *dir, struct presto_mark_list *l)
{
	struct file *f;
	int err;

	f = dentry_open(dir, O_RDONLY | O_DIRECTORY, current_cred());
	if (IS_ERR(f))
		return PTR_ERR(f);
	l->ctx.actor = presto_mark_filldir;
	err = iterate_dir(f, &l->ctx);
	fput(f);
	return err ?: l->err;
}

/*
 * The marks in the buckets, and in the intent directory itself, where
 * caches made before the buckets keep theirs.
 */
static int presto_list_marks(struct super_block *sb, struct presto_mark_list *l)
{
	int i, err = 0;

	for (i = -1; i < PRESTO_INTENT_BUCKETS && !err; i++) {
		l->bucket = i;
		err = presto_list_dir(presto_intent_dir(sb, i), l);
	}
	return err;
}

static int presto_accept_any(void *context, struct dentry *dentry)
{
	return 1;
}

/*
 * Find the object @m names: depth below the root, or not there at all.
 * A non-directory's place is not known (ext4 keeps no parent): one
 * outside the fileset, which only a damaged or forged mark names, is
 * logged all the same, and lento, which knows the fileset's objects by
 * their handles, sets its records aside.
 */
static int presto_find_marked(struct super_block *sb,
			      struct presto_lost_mark *m)
{
	struct presto_sb_info *sbi = presto_sb(sb);
	struct fid fid = { .i32 = { .ino = m->ino, .gen = m->gen } };
	struct dentry *d, *p;
	int depth = 0;

	d = exportfs_decode_fh(sbi->lower.mnt, &fid, 2, FILEID_INO32_GEN,
			       presto_accept_any, NULL);
	if (IS_ERR(d))
		return PTR_ERR(d) == -ESTALE ? 0 : PTR_ERR(d);
	/* ext4 takes generation 0 for any: a damaged mark is no match. */
	if (!d_inode(d)->i_nlink || d_inode(d)->i_generation != m->gen)
		goto gone;
	if (!d_is_dir(d)) {
		m->depth = INT_MAX;
		m->dentry = d;
		return 0;
	}
	/* Directories are connected: is it in this fileset, how deep? */
	for (p = d; p != sbi->lower.dentry; p = p->d_parent, depth++)
		if (IS_ROOT(p))
			goto gone;
	m->depth = depth;
	m->dentry = d;
	return 0;
gone:
	dput(d);
	return 0;
}

/* By depth, then by object: marks of one object side by side. */
static int presto_lost_cmp(const void *a, const void *b)
{
	const struct presto_lost_mark *x = a, *y = b;

	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	if (x->dentry != y->dentry)
		return (uintptr_t)x->dentry < (uintptr_t)y->dentry ? -1 : 1;
	return 0;
}

static int presto_recover_log(struct presto_recovery *r, enum presto_kml_op op,
			      struct inode *dir, struct inode *obj,
			      const char *name, size_t name_len,
			      const void *data, size_t data_len, u32 valid)
{
	int err = presto_log_recovered(r->sb, op, dir, obj, name, name_len,
				       data, data_len, valid);

	if (!err)
		r->records++;
	return err;
}

/* RESYNC with the names of @d's xattrs, a SETXATTR each, then a STORE. */
static int presto_recover_object(struct presto_recovery *r, struct dentry *d)
{
	struct inode *inode = d_inode(d);
	size_t prefix = strlen(PRESTO_XATTR_PREFIX);
	ssize_t len, kept = 0, vlen;
	char *p;
	int err;

	len = vfs_listxattr(d, r->buf, XATTR_LIST_MAX);
	if (len < 0 && len != -EOPNOTSUPP)
		return len;
	/* Keep the names that are not presto's own. */
	for (p = r->buf; len > 0 && p < (char *)r->buf + len;
	     p += strlen(p) + 1) {
		if (strncmp(p, PRESTO_XATTR_PREFIX, prefix)) {
			strcpy(r->names + kept, p);
			kept += strlen(p) + 1;
		}
	}
	err = presto_recover_log(r, PRESTO_KML_RESYNC, NULL, inode, NULL, 0,
				 r->names, kept, PRESTO_KML_A_ALL);
	for (p = r->names; !err && p < r->names + kept; p += strlen(p) + 1) {
		vlen = vfs_getxattr(&init_user_ns, d, p, r->buf,
				    XATTR_SIZE_MAX);
		if (vlen < 0)
			return vlen;
		err = presto_recover_log(r, PRESTO_KML_SETXATTR, NULL, inode,
					 p, strlen(p), r->buf, vlen,
					 PRESTO_KML_A_MODE | PRESTO_KML_A_CTIME);
	}
	if (!err && S_ISREG(inode->i_mode))
		err = presto_recover_log(r, PRESTO_KML_STORE, NULL, inode,
					 NULL, 0, NULL, 0, PRESTO_KML_A_STORE);
	if (!err)
		r->objects++;
	return err;
}

/* The names in a directory, back to back, each with its length before. */
struct presto_names {
	struct dir_context ctx;
	char *buf;
	size_t len, size;
	u64 count;
	bool root;		/* the fileset's root: .presto is not listed */
	int err;
};

static bool presto_names_filldir(struct dir_context *ctx, const char *name,
				 int len, loff_t pos, u64 ino,
				 unsigned int type)
{
	struct presto_names *n = container_of(ctx, struct presto_names, ctx);
	char *more;

	if ((len == 1 && name[0] == '.') ||
	    (len == 2 && name[0] == '.' && name[1] == '.'))
		return true;
	if (n->root && len == strlen(PRESTO_RESERVED_NAME) &&
	    !memcmp(name, PRESTO_RESERVED_NAME, len))
		return true;
	if (n->len + len + 1 > n->size) {
		n->size = max_t(size_t, 2 * n->size, 64 << 10);
		more = kvrealloc(n->buf, n->len, n->size, GFP_KERNEL);
		if (!more) {
			n->err = -ENOMEM;
			return false;
		}
		n->buf = more;
	}
	n->buf[n->len++] = len;
	memcpy(n->buf + n->len, name, len);
	n->len += len;
	n->count++;
	return true;
}

static int presto_recover_dirent(struct presto_recovery *r, struct inode *dir,
				 struct dentry *child)
{
	struct inode *inode = d_inode(child);
	DEFINE_DELAYED_CALL(done);
	const char *link = NULL;
	int err;

	if (S_ISLNK(inode->i_mode)) {
		link = vfs_get_link(child, &done);
		if (IS_ERR(link))
			return PTR_ERR(link);
	}
	err = presto_recover_log(r, PRESTO_KML_DIRENT, dir, inode,
				 child->d_name.name, child->d_name.len, link,
				 link ? strlen(link) : 0,
				 PRESTO_KML_A_MODE | PRESTO_KML_A_RDEV);
	do_delayed_call(&done);
	return err;
}

/*
 * A directory: itself, its listing, then each entry changed since
 * @since. Nothing changes the lower meanwhile, so the listing and the
 * lookups after it agree.
 */
static int presto_recover_dir(struct presto_recovery *r, struct dentry *d,
			      s64 since)
{
	struct presto_sb_info *sbi = presto_sb(r->sb);
	struct path path = { .mnt = sbi->lower.mnt, .dentry = d };
	struct presto_names n = { .root = d == sbi->lower.dentry };
	struct presto_kml_resync_dir rd;
	struct dentry *child;
	struct file *f;
	size_t pos;
	int pass, err;

	err = presto_recover_object(r, d);
	if (err)
		return err;
	f = dentry_open(&path, O_RDONLY | O_DIRECTORY, current_cred());
	if (IS_ERR(f))
		return PTR_ERR(f);
	n.ctx.actor = presto_names_filldir;
	err = iterate_dir(f, &n.ctx) ?: n.err;
	fput(f);
	if (err)
		goto out;
	rd.entries = cpu_to_le64(n.count);
	err = presto_recover_log(r, PRESTO_KML_RESYNC_DIR, NULL, d_inode(d),
				 NULL, 0, &rd, sizeof(rd), 0);
	/* Pass 0 lists every entry, pass 1 logs the changed ones. */
	for (pass = 0; pass < 2 && !err; pass++) {
		for (pos = 0; pos < n.len && !err;
		     pos += 1 + (u8)n.buf[pos]) {
			child = lookup_one_len_unlocked(n.buf + pos + 1, d,
							(u8)n.buf[pos]);
			if (IS_ERR(child)) {
				err = PTR_ERR(child);
				break;
			}
			if (d_is_negative(child))
				err = -ESTALE;	/* the lower changed */
			else if (!pass)
				err = presto_recover_dirent(r, d_inode(d),
							    child);
			else if (d_inode(child)->i_ctime.tv_sec >=
				 since - PRESTO_RECOVER_SLACK)
				err = presto_recover_object(r, child);
			dput(child);
		}
	}
out:
	kvfree(n.buf);
	return err;
}

static int presto_recover_marks(struct presto_recovery *r,
				struct presto_mark_list *l)
{
	unsigned int i;
	int err = 0;

	for (i = 0; i < l->count && !err; i++)
		err = presto_find_marked(r->sb, &l->marks[i]);
	if (err)
		return err;
	/* A listing that names a directory before that directory's own. */
	sort(l->marks, l->count, sizeof(*l->marks), presto_lost_cmp, NULL);
	for (i = 0; i < l->count && !err; i++) {
		struct presto_lost_mark *m = &l->marks[i];
		s64 since = m->secs;

		if (!m->dentry)
			continue;
		/*
		 * An object logged once, however many marks name it (a
		 * damaged cache may hold thousands), from the oldest one's
		 * time.
		 */
		while (i + 1 < l->count && l->marks[i + 1].dentry == m->dentry)
			since = min(since, l->marks[++i].secs);
		if (d_is_dir(m->dentry))
			err = presto_recover_dir(r, m->dentry, since);
		else
			err = presto_recover_object(r, m->dentry);
	}
	/* Once the records are durable, the marks have done their work. */
	if (!err)
		err = presto_journal_sync(r->sb);
	for (i = 0; i < l->count && !err; i++)
		err = presto_private_unlink(presto_intent_dir(r->sb,
							      l->marks[i].bucket),
					    l->marks[i].name);
	return err;
}

/*
 * Log what the marks left in the intent directory name; hand the caller
 * the numbers of the anchor files found but anchor.0 (*@anchors, to free;
 * *@nanchors of them). Called at mount with the log open.
 */
int presto_recover(struct super_block *sb, unsigned int **anchors,
		   unsigned int *nanchors)
{
	struct presto_recovery r = { .sb = sb };
	struct presto_mark_list l = {};
	unsigned int i;
	int err;

	err = presto_list_marks(sb, &l);
	if (err)
		goto out;
	*anchors = l.anchors;
	*nanchors = l.nanchors;
	l.anchors = NULL;
	if (!l.count)
		goto out;
	err = -ENOMEM;
	r.buf = kvmalloc(XATTR_SIZE_MAX, GFP_KERNEL);
	r.names = kvmalloc(XATTR_LIST_MAX, GFP_KERNEL);
	if (!r.buf || !r.names)
		goto out;
	err = presto_recover_marks(&r, &l);
	if (err)
		pr_err("presto: %s: recovery of %u intent marks failed (error %d)\n",
		       presto_sb(sb)->lower_name, l.count, err);
	else
		pr_notice("presto: %s: recovery: %u intent marks; logged the state of %u objects in %llu records\n",
			  presto_sb(sb)->lower_name, l.count, r.objects,
			  r.records);
out:
	for (i = 0; i < l.count; i++)
		dput(l.marks[i].dentry);
	kfree(l.marks);
	kfree(l.anchors);
	kvfree(r.buf);
	kvfree(r.names);
	return err;
}
