/* SPDX-License-Identifier: MIT */
/*
 * The vocabulary lento's client, server and wire protocol share: object
 * identity (fids), versions (version vectors and StoreIds), an object's
 * status, and the records of the client modification log (CML) that a
 * client reintegrates. Host byte order, C structs: protocol/lproto.c
 * encodes them for the wire (protocol/PROTOCOL.md), lento's stores keep
 * them in SQLite. One definition, compiled by every side.
 */
#ifndef LENTO_TYPES_H
#define LENTO_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>

/* Limits every decoder and store enforces. */
#define LENTO_NAME_MAX		255	/* one path component, bytes */
#define LENTO_SYMLINK_MAX	4095	/* a symlink's target, bytes */
#define LENTO_XATTR_NAME_MAX	255
#define LENTO_XATTR_SIZE_MAX	65536	/* one xattr value */
#define LENTO_XATTRS_MAX	64	/* xattrs of one object */
#define LENTO_VV_MAX		8	/* servers in a volume's replica group */
#define LENTO_VOLNAME_MAX	64

/*
 * A fid names an object for its whole life, on every client and server:
 * {volume, client that created it, that client's sequence number}. A
 * client mints fids for what it creates, also while disconnected, so no
 * fid is ever translated at reintegration. A volume's root and the
 * objects a server creates itself have client 0.
 */
struct lento_fid {
	uint32_t volume;
	uint32_t client;
	uint64_t seq;
};

/* A fid in messages and logs: printf("..." FIDFMT "...", FIDARG(f)). */
#define FIDFMT		"%08" PRIx32 "-%08" PRIx32 "-%016" PRIx64
#define FIDARG(f)	(f)->volume, (f)->client, (f)->seq

/* The fid of volume @v's root directory. */
#define LENTO_ROOT_FID(v)	((struct lento_fid){ (v), 0, 1 })

static inline bool lento_fid_eq(const struct lento_fid *a,
				const struct lento_fid *b)
{
	return a->volume == b->volume && a->client == b->client &&
	       a->seq == b->seq;
}

static inline bool lento_fid_is_null(const struct lento_fid *f)
{
	return !f->volume && !f->client && !f->seq;
}

/*
 * Is the xattr @name (@len bytes) one clients keep in their caches as the
 * server has it? All but the local security module's: security.* other
 * than security.capability (PROTOCOL.md, PRUNEXATTRS).
 */
static inline bool lento_xattr_mirrored(const char *name, size_t len)
{
	static const char sec[] = "security.", caps[] = "security.capability";
	size_t n;

	if (len < sizeof(sec) - 1)
		return true;
	for (n = 0; n < sizeof(sec) - 1; n++)
		if (name[n] != sec[n])
			return true;
	if (len != sizeof(caps) - 1)
		return false;
	for (; n < len; n++)
		if (name[n] != caps[n])
			return false;
	return true;
}

/* The update that produced a version: which client, its record number. */
struct lento_storeid {
	uint32_t client;
	uint64_t seq;
};

/*
 * A version vector: one counter per server of the volume's replica group
 * (n of them; one while volumes are not replicated), plus the StoreId of
 * the last update. Two versions are equal when every counter and the
 * StoreId are; a reintegrated change names the version it was based on,
 * and the server applies it only if the object's version still is that.
 */
struct lento_vv {
	uint32_t n;
	uint64_t v[LENTO_VV_MAX];
	struct lento_storeid store;
};

/* How two version vectors compare (lento_vv_cmp). */
enum lento_vv_order {
	LENTO_VV_EQUAL,
	LENTO_VV_BEFORE,	/* a is dominated by b: b is newer */
	LENTO_VV_AFTER,		/* a dominates b */
	LENTO_VV_CONCURRENT,	/* neither: a conflict */
};

enum lento_type {
	LENTO_T_REG	= 1,
	LENTO_T_DIR	= 2,
	LENTO_T_SYMLINK	= 3,
	LENTO_T_FIFO	= 4,
	LENTO_T_SOCK	= 5,
	LENTO_T_CHR	= 6,
	LENTO_T_BLK	= 7,
};

/* Attributes present (struct lento_attr.valid). */
#define LENTO_A_MODE	0x0001
#define LENTO_A_UID	0x0002
#define LENTO_A_GID	0x0004
#define LENTO_A_SIZE	0x0008
#define LENTO_A_ATIME	0x0010
#define LENTO_A_MTIME	0x0020
#define LENTO_A_CTIME	0x0040
#define LENTO_A_RDEV	0x0080
#define LENTO_A_ALL	0x00ff

struct lento_attr {
	uint32_t valid;		/* LENTO_A_* */
	uint32_t mode;		/* permission bits (07777); type is separate */
	uint32_t uid;
	uint32_t gid;
	uint64_t size;
	int64_t atime_ns;	/* nanoseconds since the epoch */
	int64_t mtime_ns;
	int64_t ctime_ns;
	uint64_t rdev;		/* major << 32 | minor */
};

/* @a's valid fields into an object's attributes @o. */
static inline void lento_attr_merge(struct lento_attr *o,
				    const struct lento_attr *a)
{
	if (a->valid & LENTO_A_MODE)
		o->mode = a->mode;
	if (a->valid & LENTO_A_UID)
		o->uid = a->uid;
	if (a->valid & LENTO_A_GID)
		o->gid = a->gid;
	if (a->valid & LENTO_A_SIZE)
		o->size = a->size;
	if (a->valid & LENTO_A_ATIME)
		o->atime_ns = a->atime_ns;
	if (a->valid & LENTO_A_MTIME)
		o->mtime_ns = a->mtime_ns;
	if (a->valid & LENTO_A_CTIME)
		o->ctime_ns = a->ctime_ns;
	if (a->valid & LENTO_A_RDEV)
		o->rdev = a->rdev;
}

/* An object as the server knows it: what a fetch returns. */
struct lento_status {
	struct lento_fid fid;
	uint8_t type;		/* enum lento_type */
	uint32_t nlink;
	struct lento_attr attr;	/* valid == LENTO_A_ALL */
	struct lento_vv vv;
};

/* One entry of a directory listing. */
struct lento_dirent {
	char name[LENTO_NAME_MAX + 1];
	struct lento_status st;
};

/*
 * CML record operations: the changes a client reintegrates. They follow
 * presto's KML operations (protocol/presto_kml.h) one for one, with fids
 * in place of lower handles.
 */
enum lento_op {
	LENTO_OP_CREATE		= 1,
	LENTO_OP_MKDIR		= 2,
	LENTO_OP_MKNOD		= 3,
	LENTO_OP_SYMLINK	= 4,
	LENTO_OP_LINK		= 5,
	LENTO_OP_UNLINK		= 6,
	LENTO_OP_RMDIR		= 7,
	LENTO_OP_RENAME		= 8,
	LENTO_OP_SETATTR	= 9,
	LENTO_OP_SETXATTR	= 10,
	LENTO_OP_REMOVEXATTR	= 11,
	LENTO_OP_STORE		= 12,
	/*
	 * The object's xattrs are the ones data names (each name ends in a
	 * NUL): every other one a client mirrors is removed. Recovery sends
	 * it when a crash lost which xattrs went (version 3).
	 */
	LENTO_OP_PRUNEXATTRS	= 13,
};

#define LENTO_OP_LAST		LENTO_OP_PRUNEXATTRS

/* struct lento_rec.flags */
#define LENTO_R_NOREPLACE	0x0001	/* RENAME: fail if the target exists */
#define LENTO_R_EXCHANGE	0x0002	/* RENAME: swap source and target */
/*
 * UNLINK: the object had no name left after it; RENAME with a target: the
 * target had no name left. The client sets it when it knows (the KML's
 * UNLINK carries nlink); the CML optimiser drops a removed object's
 * earlier changes only then, so an object with another name never loses
 * its data.
 */
#define LENTO_R_LASTLINK	0x0004
/*
 * STORE: the client has no body for it, and its size is 0 and its body
 * empty on the wire. The object lost its names at the client before the
 * batch went, so what was written is gone there; but at the server it
 * may have other names (a hard link in a directory the client never
 * listed). The server leaves the content, size and times as they are and
 * only moves the object's version, as any STORE does: an empty body would
 * have wiped what the other names hold.
 */
#define LENTO_R_NOBODY		0x0008

/* Supplementary groups a record carries at most (as the KML's). */
#define LENTO_GROUPS_MAX	256

/*
 * One CML record. Which fields an operation uses:
 *
 *   op           dir          obj           dir2/name2     base (versions)
 *   CREATE etc.  parent       new object    -              dir
 *   LINK         parent       object        -              dir, obj
 *   UNLINK/RMDIR parent       object        -              dir, obj
 *   RENAME       old parent   object        new parent,    dir, obj, dir2,
 *                                           new name;      target (if any)
 *                                           target: what
 *                                           the new name
 *                                           replaced
 *   SETATTR      -            object        -              obj
 *   SETXATTR/    -            object        -              obj
 *   REMOVEXATTR
 *   STORE        -            object        -              obj
 *
 * A new object's fid is minted by the client (CREATE, MKDIR, MKNOD,
 * SYMLINK) and attr carries its initial attributes; SETATTR carries the
 * attributes that changed; STORE the new size and mtime, its body going
 * with the batch. data is a symlink's target or an xattr's value.
 */
struct lento_rec {
	uint64_t recno;		/* the client's record number, from 1 */
	uint16_t op;		/* enum lento_op */
	uint16_t flags;		/* LENTO_R_* */
	uint32_t uid, gid;	/* who made the change */
	int64_t time_ns;	/* when */
	struct lento_fid dir, obj, dir2, target;
	struct lento_vv base_dir, base_obj, base_dir2, base_target;
	uint8_t type;		/* enum lento_type of a new object */
	struct lento_attr attr;
	char name[LENTO_NAME_MAX + 1];	/* entry name, or xattr name */
	char name2[LENTO_NAME_MAX + 1];	/* RENAME's new name */
	const void *data;	/* symlink target, xattr value: not owned */
	uint32_t data_len;
	/*
	 * The maker's supplementary groups, which the server's permission
	 * checks count as the gid is: ngroups little-endian u32s, not owned.
	 */
	const uint8_t *groups;
	uint16_t ngroups;	/* at most LENTO_GROUPS_MAX */
};

#endif /* LENTO_TYPES_H */
