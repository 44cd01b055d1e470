// SPDX-License-Identifier: GPL-2.0
/*
 * Extended attributes, POSIX ACLs included, are the lower inode's: one
 * handler takes every name and passes it down as the caller, so the
 * lower's permission checks and limits apply unchanged. Reading them needs
 * the ATTR callback, as stat does: lento brings a changed object's xattrs
 * from the server together with its other attributes. presto's own
 * xattrs (trusted.presto.*) can be neither listed, read nor set through
 * the mount.
 */
#include <linux/xattr.h>
#include "presto.h"

static bool presto_is_private_xattr(const char *name)
{
	return !strncmp(name, PRESTO_XATTR_PREFIX,
			sizeof(PRESTO_XATTR_PREFIX) - 1);
}

static int presto_xattr_get(const struct xattr_handler *handler,
			    struct dentry *dentry, struct inode *inode,
			    const char *name, void *buffer, size_t size)
{
	int err;

	if (presto_is_private_xattr(name))
		return -ENODATA;
	/* lento sets the server's xattrs with the other attributes. */
	err = presto_cb_need(inode, PRESTO_CB_ATTR);
	if (err)
		return err;
	return vfs_getxattr(presto_lower_userns(inode->i_sb),
			    presto_lower_dentry(dentry), name, buffer, size);
}

/* A removal comes with XATTR_REPLACE; only a set's flags are logged. */
static unsigned int presto_xattr_flags(const void *value, int flags)
{
	if (!value)
		return 0;
	return (flags & XATTR_CREATE ? PRESTO_KML_F_XCREATE : 0) |
	       (flags & XATTR_REPLACE ? PRESTO_KML_F_XREPLACE : 0);
}

static int presto_xattr_set(const struct xattr_handler *handler,
			    struct user_namespace *userns,
			    struct dentry *dentry, struct inode *inode,
			    const char *name, const void *value, size_t size,
			    int flags)
{
	struct user_namespace *lower_userns = presto_lower_userns(inode->i_sb);
	struct dentry *lower = presto_lower_dentry(dentry);
	struct qstr qname = QSTR_INIT(name, strlen(name));
	struct presto_change chg = { .mark_on = { presto_mark_for(dentry) } };
	int err;

	if (presto_is_private_xattr(name))
		return -EPERM;
	if (qname.len > PRESTO_KML_NAME_MAX)
		return -ERANGE;
	if (size > PRESTO_KML_DATA_MAX)
		return -E2BIG;
	err = presto_change_begin(&chg, inode->i_sb, value ?
				  PRESTO_KML_SETXATTR : PRESTO_KML_REMOVEXATTR,
				  &qname, NULL, value, value ? size : 0);
	if (err)
		return err;
	if (value)
		err = vfs_setxattr(lower_userns, lower, name, value, size,
				   flags);
	else
		err = vfs_removexattr(lower_userns, lower, name);
	/*
	 * Logged under presto's inode lock, which the VFS holds and which
	 * orders changes to the inode. An ACL can change the mode.
	 */
	if (!err)
		presto_stamp(inode, presto_change_log(&chg,
			presto_xattr_flags(value, flags),
			PRESTO_KML_A_MODE | PRESTO_KML_A_CTIME, NULL,
			presto_lower_inode(inode), NULL, NULL));
	presto_copyattr(inode);
	presto_change_end(&chg);
	return err;
}

static const struct xattr_handler presto_xattr_handler = {
	.prefix	= "",	/* every name */
	.get	= presto_xattr_get,
	.set	= presto_xattr_set,
};

const struct xattr_handler *presto_xattr_handlers[] = {
	&presto_xattr_handler,
	NULL
};

/*
 * The lower's list without presto's own names. Asked for the size only,
 * the answer may be larger than the filtered list: that is allowed, and
 * spares a second pass.
 */
ssize_t presto_listxattr(struct dentry *dentry, char *list, size_t size)
{
	ssize_t res, len;
	char *s;

	res = presto_cb_need(d_inode(dentry), PRESTO_CB_ATTR);
	if (res)
		return res;
	res = vfs_listxattr(presto_lower_dentry(dentry), list, size);
	if (res <= 0 || size == 0)
		return res;

	for (s = list, len = res; len > 0;) {
		size_t slen = strnlen(s, len) + 1;

		if (WARN_ON_ONCE(slen > len))
			return -EIO;
		len -= slen;
		if (presto_is_private_xattr(s)) {
			res -= slen;
			memmove(s, s + slen, len);
		} else {
			s += slen;
		}
	}
	return res;
}
