/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * The kernel modification log (KML): the on-disk format presto writes and
 * lento (and kmlcat) read. Specified in protocol/KML.md; this header is
 * the one definition both sides compile against.
 *
 * All integers are little-endian. A segment file CACHE/.presto/kml.NNNNNNNN
 * starts with a header block of PRESTO_KML_HDR_SIZE bytes; records follow
 * back to back, each a multiple of 8 bytes, until a record of length 0 or
 * the end of the file.
 */
#ifndef _PRESTO_KML_H
#define _PRESTO_KML_H

#include <linux/types.h>
#include <linux/ioctl.h>

#define PRESTO_KML_MAGIC	"PRESTKML"
/*
 * 2 added the flag STORED; a reader of 2 reads 1 too (KML.md, "Versions").
 */
#define PRESTO_KML_VERSION	2
#define PRESTO_KML_VERSION_MIN	1
#define PRESTO_KML_HDR_SIZE	4096
#define PRESTO_KML_ALIGN	8

/* The header at offset 0 of every segment. */
struct presto_kml_seg_hdr {
	__u8	magic[8];	/* PRESTO_KML_MAGIC, no NUL */
	__le32	version;	/* PRESTO_KML_VERSION */
	__le32	hdr_size;	/* offset of the first record */
	__le64	segno;		/* this segment's number (its name) */
	__le64	first_seq;	/* sequence number of its first record */
	__le64	seg_size;	/* bytes preallocated, header included */
	__le32	reserved;	/* zero */
	__le32	crc;		/* CRC-32C of the bytes before it */
};

/* A lower object: ext4 inode number and generation. */
struct presto_kml_fh {
	__le64	ino;		/* 0: no object in this slot */
	__le32	gen;
	__le32	reserved;	/* zero */
};

/* Attributes present in a record (presto_kml_attr.valid). */
#define PRESTO_KML_A_MODE	0x0001
#define PRESTO_KML_A_UID	0x0002
#define PRESTO_KML_A_GID	0x0004
#define PRESTO_KML_A_SIZE	0x0008
#define PRESTO_KML_A_ATIME	0x0010
#define PRESTO_KML_A_MTIME	0x0020
#define PRESTO_KML_A_CTIME	0x0040
#define PRESTO_KML_A_RDEV	0x0080
#define PRESTO_KML_A_NLINK	0x0100
#define PRESTO_KML_A_ALL	0x01ff

struct presto_kml_attr {
	__le32	valid;		/* PRESTO_KML_A_* */
	__le32	mode;		/* type and permission bits */
	__le32	uid;		/* as seen from the initial user namespace */
	__le32	gid;
	__le64	size;
	__le64	atime_ns;	/* nanoseconds since the epoch, signed */
	__le64	mtime_ns;
	__le64	ctime_ns;
	__le32	rdev;		/* new_encode_dev() */
	__le32	nlink;
};

enum presto_kml_op {
	PRESTO_KML_CREATE	= 1,
	PRESTO_KML_MKDIR	= 2,
	PRESTO_KML_MKNOD	= 3,
	PRESTO_KML_SYMLINK	= 4,
	PRESTO_KML_LINK		= 5,
	PRESTO_KML_UNLINK	= 6,
	PRESTO_KML_RMDIR	= 7,
	PRESTO_KML_RENAME	= 8,
	PRESTO_KML_SETATTR	= 9,
	PRESTO_KML_SETXATTR	= 10,
	PRESTO_KML_REMOVEXATTR	= 11,
	PRESTO_KML_STORE	= 12,
	/* Written by recovery at mount, always with PRESTO_KML_F_RECOVERED. */
	PRESTO_KML_RESYNC	= 13,
	PRESTO_KML_RESYNC_DIR	= 14,
	PRESTO_KML_DIRENT	= 15,
	PRESTO_KML_OP_MAX	= 15,
};

/* Record flags. */
#define PRESTO_KML_F_NOREPLACE	0x0001	/* RENAME: RENAME_NOREPLACE */
#define PRESTO_KML_F_EXCHANGE	0x0002	/* RENAME: RENAME_EXCHANGE */
#define PRESTO_KML_F_XCREATE	0x0004	/* SETXATTR: XATTR_CREATE */
#define PRESTO_KML_F_XREPLACE	0x0008	/* SETXATTR: XATTR_REPLACE */
#define PRESTO_KML_F_TMPFILE	0x0010	/* CREATE: an O_TMPFILE linked in */
#define PRESTO_KML_F_RECOVERED	0x0020	/* written by recovery at mount */
#define PRESTO_KML_F_GROUPS_CUT	0x0040	/* more groups than the record holds */
#define PRESTO_KML_F_STORED	0x0080	/* CREATE: a STORE folded in too */
#define PRESTO_KML_F_ALL	0x00ff

/* Slots of presto_kml_rec.fh. */
enum {
	PRESTO_KML_FH_DIR	= 0,	/* parent (old parent for RENAME) */
	PRESTO_KML_FH_OBJ	= 1,	/* the object the record is about */
	PRESTO_KML_FH_NEWDIR	= 2,	/* RENAME: new parent */
	PRESTO_KML_FH_TARGET	= 3,	/* RENAME: the object at the new name */
	PRESTO_KML_NFH		= 4,
};

#define PRESTO_KML_NAME_MAX	255
#define PRESTO_KML_DATA_MAX	65536	/* XATTR_SIZE_MAX; > PATH_MAX */
/* Supplementary groups a record carries at most (presto_kml_rec.ngroups). */
#define PRESTO_KML_GROUPS_MAX	256

struct presto_kml_rec {
	__le32	len;		/* whole record incl. padding, multiple of 8 */
	__le32	crc;		/* CRC-32C of the record with this field 0 */
	__le64	seq;		/* consecutive from 1, never reused */
	__le16	op;		/* enum presto_kml_op */
	__le16	flags;		/* PRESTO_KML_F_* */
	__le16	name_len;	/* bytes of the first name */
	__le16	name2_len;	/* bytes of the second name (RENAME) */
	__le32	data_len;	/* bytes of data (symlink target, xattr value) */
	__le32	uid;		/* the caller's fsuid, initial user namespace */
	__le32	gid;		/* the caller's fsgid */
	__le16	ngroups;	/* supplementary groups after the data */
	__le16	reserved;	/* zero */
	__le64	time_ns;	/* wall clock when the change took effect */
	struct presto_kml_fh fh[PRESTO_KML_NFH];
	struct presto_kml_attr attr;
	/*
	 * name, name2, data (no NUL terminators), ngroups __le32 group ids
	 * (initial user namespace), then zeros up to len
	 */
};

/* RESYNC_DIR's data: how many DIRENT records follow it. */
struct presto_kml_resync_dir {
	__le64	entries;
};

/*
 * State of a fileset's log, from the PRESTO_IOC_KML_STATE ioctl on any
 * directory of the mount (also in /proc/self/mountstats).
 */
struct presto_kml_state {
	__u64	next_seq;	/* the sequence number the next record gets */
	__u64	durable_seq;	/* every record up to here is on disk */
	__u64	acked_seq;	/* every record up to here is consumed */
	__u64	pending_records; /* durable or not, not yet acknowledged */
	__u64	pending_bytes;	/* their bytes, plus bytes reserved */
	__u64	limit_bytes;	/* pending_bytes may not grow past this */
	__s64	oldest_ns;	/* time of the oldest pending record, or 0 */
	__u64	first_segno;	/* oldest segment still on disk */
	__u64	cur_segno;	/* the segment being written */
	__u64	segments;	/* segment files on disk */
	__s32	error;		/* a write error that stopped the log, or 0 */
	__u32	reserved;
};

#define PRESTO_IOC_MAGIC	0xb5
/* Read the log's state. Needs CAP_SYS_ADMIN. */
#define PRESTO_IOC_KML_STATE	_IOR(PRESTO_IOC_MAGIC, 1, struct presto_kml_state)
/*
 * Acknowledge every record up to a sequence number (a __u64, at most
 * durable_seq): presto may retire the segments that hold only those.
 * Needs CAP_SYS_ADMIN.
 */
#define PRESTO_IOC_KML_ACK	_IOW(PRESTO_IOC_MAGIC, 2, __u64)

#endif /* _PRESTO_KML_H */
