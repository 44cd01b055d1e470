/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tree: walk two directory trees side by side and report every way in
 * which they differ.
 *
 * The walk never follows a symbolic link and never crosses into another
 * mount (a directory on another device than its tree's root is compared
 * as an object but not entered). Names are visited in sorted order on
 * both sides, so the report is deterministic.
 *
 * Compared for every name present on both sides: the type; for names of
 * the same type the permission bits (with suid, sgid and sticky), owner,
 * group, link count, size (not for directories when TREE_NO_DIR_SIZE),
 * the extended attributes (every name the kernel lists, trusted.*,
 * security.* and system.posix_acl_* included, and their values), the hard
 * link structure (two names share an inode on one side iff they share it
 * on the other), the link target of symbolic links, the contents of
 * regular files, the device number of device nodes, and optionally the
 * modification time of regular files. Access, change and birth times and
 * inode numbers are never compared. The two roots are compared by
 * their contents only, not by their own attributes, unless TREE_ROOT_ATTRS
 * is given (a root's link count counts subdirectories that may be ignored,
 * and a mount point's mode is the mounter's business).
 *
 * Ownership: tree_compare() allocates nothing that outlives it; every
 * string in a struct tree_diff handed to a callback lives until the
 * callback returns. A struct tree_diff_list owns copies of its entries
 * until tree_diff_list_free().
 */
#ifndef TREE_H
#define TREE_H

#include <stddef.h>
#include <sys/types.h>

/* "file", "dir", "symlink", "fifo", "chr", "blk", "sock" or "unknown". */
const char *tree_type_name(mode_t mode);

enum tree_diff_kind {
	TREE_DIFF_ONLY_A,	/* the name exists in A only */
	TREE_DIFF_ONLY_B,	/* the name exists in B only */
	TREE_DIFF_TYPE,		/* file, dir, symlink, fifo, chr, blk, sock */
	TREE_DIFF_MODE,		/* permission bits incl. suid/sgid/sticky */
	TREE_DIFF_UID,
	TREE_DIFF_GID,
	TREE_DIFF_NLINK,
	TREE_DIFF_SIZE,
	TREE_DIFF_RDEV,		/* device number of a chr/blk node */
	TREE_DIFF_MTIME,	/* regular files, with TREE_MTIME only */
	TREE_DIFF_CONTENT,	/* first differing byte of a regular file */
	TREE_DIFF_SYMLINK,	/* symbolic link target */
	TREE_DIFF_XATTR_ONLY_A,	/* xattr (in attr) present in A only */
	TREE_DIFF_XATTR_ONLY_B,	/* xattr (in attr) present in B only */
	TREE_DIFF_XATTR_VALUE,	/* xattr (in attr) has different values */
	TREE_DIFF_HARDLINK,	/* which earlier name shares the inode */
	TREE_DIFF_NKINDS
};

/*
 * One difference. path is relative to the roots ("." for the roots
 * themselves); attr is the xattr name for the TREE_DIFF_XATTR_* kinds,
 * NULL otherwise; a and b describe the value on each side ("-" where
 * there is none): see tree_compare() for the exact formats.
 */
struct tree_diff {
	enum tree_diff_kind kind;
	const char *path;
	const char *attr;
	const char *a;
	const char *b;
};

/*
 * Called once per difference, in walk order. Return 0 to go on, or a
 * negative errno value to stop the walk: tree_compare() then returns it.
 */
typedef int (*tree_diff_fn)(const struct tree_diff *diff, void *arg);

enum {
	TREE_MTIME = 1 << 0,		/* compare st_mtim of regular files */
	TREE_ROOT_ATTRS = 1 << 1,	/* compare the roots' own attributes */
	TREE_NO_DIR_SIZE = 1 << 2,	/* do not compare directory sizes */
	TREE_NO_XATTRS = 1 << 3,	/* do not compare xattrs */
};

struct tree_opts {
	/* Names skipped at the root of both trees (not below it). */
	const char *const *ignore;
	size_t n_ignore;
	unsigned int flags;		/* TREE_* above */
};

/* Where a walk failed, for the caller's message. */
struct tree_error {
	int err;			/* positive errno value */
	char op[32];			/* the call that failed */
	char path[512];			/* side and path, truncated if longer */
};

/*
 * Compare the trees under directories a and b. Returns the number of
 * differences (each also handed to fn, which may be NULL), or a negative
 * errno value if the walk itself failed (an entry vanished, a file could
 * not be read, memory ran out, ...) or fn asked to stop; then err (which
 * may be NULL) says where. opts may be NULL for the defaults.
 *
 * Value formats (a and b):
 *   TYPE     "file", "dir", "symlink", "fifo", "chr", "blk", "sock"
 *   MODE     four octal digits, e.g. "0644", "4755"
 *   UID, GID, NLINK, SIZE   decimal
 *   RDEV     "MAJOR:MINOR"
 *   MTIME    "SECONDS.NANOSECONDS" (nine digits)
 *   CONTENT  "offset N byte 0xHH": the first byte that differs within
 *            the shorter of the two files (a size difference is SIZE's)
 *   SYMLINK  the target, C-escaped, in double quotes
 *   XATTR_*  the value's length and its first bytes C-escaped:
 *            "3 bytes \"abc\""; "-" on the side without the xattr
 *   HARDLINK the path of the first name (in walk order) sharing the
 *            inode, or "-" if the name is the first or only one
 *   ONLY_A, ONLY_B   the type on the side that has the name, "-" on the
 *            other
 */
int tree_compare(const char *a, const char *b, const struct tree_opts *opts,
		 tree_diff_fn fn, void *arg, struct tree_error *err);

/* The name of a kind ("type", "mode", "xattr-value", ...). */
const char *tree_diff_kind_name(enum tree_diff_kind kind);

/*
 * One line describing diff, always NUL-terminated, truncated to len;
 * returns what snprintf() would have: "PATH: KIND [ATTR]: A != B".
 */
int tree_diff_format(const struct tree_diff *diff, char *buf, size_t len);

/* A growable list of owned copies of differences. */
struct tree_diff_list {
	struct tree_diff *items;
	size_t n, cap;
};

/* A tree_diff_fn that appends a copy to the struct tree_diff_list arg. */
int tree_diff_list_add(const struct tree_diff *diff, void *list);

/* Free the copies and reset the list to empty. */
void tree_diff_list_free(struct tree_diff_list *list);

#endif /* TREE_H */
