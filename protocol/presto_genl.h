/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * The channel between presto (the kernel) and lento (its cache manager):
 * a generic-netlink family. protocol/KERNEL.md is its specification;
 * this header is the one both sides compile.
 *
 * In short: a lento registers for a fileset (the name given with
 * fileset= at mount); presto sends it an UPCALL when an operation needs
 * something the cache lacks and sleeps until lento REPLYs; lento tells
 * presto of changes it made in the cache (BREAK, SET_FLAGS, PURGE). lento
 * reads the journal's records from its segment files (KML.md); the
 * channel says how far they are durable (KML) and takes lento's
 * acknowledgements (KML_ACK). A change needs the fileset's write-back
 * permit, which presto asks lento for (the PERMIT upcall) and lento may
 * take back (PERMIT 0). Names the server changed in a directory someone
 * watches (inotify, fanotify) reach the watchers through WATCHED and
 * NOTIFY.
 * Objects are named by their lower (ext4) inode: number and generation.
 */
#ifndef _UAPI_PRESTO_GENL_H
#define _UAPI_PRESTO_GENL_H

#include <linux/types.h>

#define PRESTO_GENL_NAME	"presto"
#define PRESTO_GENL_VERSION	1
/* Multicast group of MOUNTED/UNMOUNTED notices (any listener). */
#define PRESTO_GENL_MCGRP	"events"

#define PRESTO_FILESET_MAX	63	/* bytes of a fileset name, no NUL */

enum presto_cmd {
	PRESTO_CMD_UNSPEC,
	PRESTO_CMD_REGISTER,	/* lento: FILESET -> REGISTER reply */
	PRESTO_CMD_UNREGISTER,	/* lento: FILESET */
	PRESTO_CMD_SET_EPOCH,	/* lento: FILESET, EPOCH */
	PRESTO_CMD_UPCALL,	/* presto: FILESET, REQ, OP, HANDLE */
	PRESTO_CMD_REPLY,	/* lento: FILESET, REQ, ERRNO[, FLAGS, EPOCH] */
	PRESTO_CMD_PROGRESS,	/* lento: FILESET, REQ: still working on it */
	PRESTO_CMD_BREAK,	/* lento: FILESET, HANDLE, FLAGS to clear */
	PRESTO_CMD_SET_FLAGS,	/* lento: FILESET, HANDLE, FLAGS, EPOCH */
	PRESTO_CMD_PURGE,	/* lento: FILESET, HANDLE: drop DATA if unused */
	PRESTO_CMD_STATS,	/* anyone: FILESET -> STATS reply */
	PRESTO_CMD_MOUNTED,	/* presto: FILESET, ROOT, TIMEOUT_MS */
	PRESTO_CMD_UNMOUNTED,	/* presto: FILESET */
	PRESTO_CMD_ACCESS,	/* presto: FILESET, HANDLES: opened lately */
	PRESTO_CMD_KML,		/* presto: FILESET, [REQ, ERRNO,] KML_DURABLE,
				 * KML_ACKED, PERMIT
				 */
	PRESTO_CMD_KML_ACK,	/* lento: FILESET, SEQ: consumed up to SEQ */
	PRESTO_CMD_KML_SYNC,	/* lento: FILESET, REQ -> KML with REQ */
	PRESTO_CMD_PERMIT,	/* lento: FILESET, PERMIT[, REQ]: 1 grants, 0
				 * revokes (answered by KML with REQ)
				 */
	PRESTO_CMD_WATCHED,	/* presto: FILESET, HANDLE: a directory lento
				 * broke has watchers of its names
				 */
	PRESTO_CMD_NOTIFY,	/* lento: FILESET, HANDLE, NAME, EVENT: a name
				 * the server added or removed
				 */
	__PRESTO_CMD_MAX,
};
#define PRESTO_CMD_MAX	(__PRESTO_CMD_MAX - 1)

enum presto_attr {
	PRESTO_A_UNSPEC,
	PRESTO_A_FILESET,	/* NUL-terminated string, 1..63 bytes */
	PRESTO_A_REQ,		/* u64: an upcall's id, unique per fileset */
	PRESTO_A_OP,		/* u32: enum presto_upcall_op */
	PRESTO_A_HANDLE,	/* struct presto_handle */
	PRESTO_A_ERRNO,		/* u32: 0 or a positive errno, at most 511 */
	PRESTO_A_FLAGS,		/* u32: PRESTO_CB_* */
	PRESTO_A_EPOCH,		/* u64: nonzero */
	PRESTO_A_ROOT,		/* struct presto_handle: the lower root */
	PRESTO_A_TIMEOUT_MS,	/* u32: how long an upcall waits */
	PRESTO_A_MOUNTED,	/* u8: the fileset is mounted now */
	PRESTO_A_STAT,		/* nested: PRESTO_S_* u64 counters */
	PRESTO_A_HANDLES,	/* binary: an array of struct presto_handle */
	PRESTO_A_PAD,
	PRESTO_A_SEQ,		/* u64: a KML sequence number */
	PRESTO_A_KML_DURABLE,	/* u64: records up to here are durable */
	PRESTO_A_KML_ACKED,	/* u64: ... and acknowledged up to here */
	PRESTO_A_PERMIT,	/* u8: 1 the write-back permit is held, 0 not */
	PRESTO_A_NAME,		/* NUL-terminated string: one name, 1..255
				 * bytes, no '/', not . or ..
				 */
	PRESTO_A_EVENT,		/* u32: PRESTO_EV_* */
	__PRESTO_A_MAX,
};
#define PRESTO_A_MAX	(__PRESTO_A_MAX - 1)

/* Counters of PRESTO_A_STAT (u64 each), since the fileset appeared. */
enum presto_stat {
	PRESTO_S_UNSPEC,
	PRESTO_S_UPCALLS,	/* upcalls made (not counting re-sends) */
	PRESTO_S_FETCH_DIR,
	PRESTO_S_FETCH_FILE,
	PRESTO_S_FETCH_ATTR,
	PRESTO_S_JOINED,	/* misses that waited on an upcall in flight */
	PRESTO_S_RESENT,	/* deliveries again (full buffer, new lento) */
	PRESTO_S_TIMEOUTS,	/* waits that ended without an answer */
	PRESTO_S_INTERRUPTED,	/* waits a signal ended */
	PRESTO_S_FAILED,	/* answers with an error */
	PRESTO_S_BREAKS,	/* BREAKs that found the object in memory */
	PRESTO_S_PENDING,	/* upcalls not answered yet (a gauge) */
	PRESTO_S_REGISTERED,	/* 1 while a lento is registered (a gauge) */
	PRESTO_S_PAD,
	PRESTO_S_PERMIT,	/* PERMIT upcalls made */
	PRESTO_S_REVOKES,	/* permits revoked by lento */
	PRESTO_S_PERMIT_HELD,	/* 1 while the permit is held (a gauge) */
	PRESTO_S_WATCHED,	/* objects of the mount that inotify or
				 * fanotify watch (a gauge)
				 */
	__PRESTO_S_MAX,
};
#define PRESTO_S_MAX	(__PRESTO_S_MAX - 1)

enum presto_upcall_op {
	PRESTO_OP_FETCH_DIR = 1,	/* make the listing complete */
	PRESTO_OP_FETCH_FILE = 2,	/* make the content complete */
	PRESTO_OP_FETCH_ATTR = 3,	/* make the attributes current */
	/* The write-back permit (the root's handle); ERRNO 0 grants it. */
	PRESTO_OP_PERMIT = 4,
};

/*
 * NOTIFY's EVENT: exactly one of CREATE and DELETE, with DIR when the
 * name is (was) a directory's.
 */
#define PRESTO_EV_CREATE	0x1
#define PRESTO_EV_DELETE	0x2
#define PRESTO_EV_DIR		0x4
#define PRESTO_EV_ALL		(PRESTO_EV_CREATE | PRESTO_EV_DELETE | \
				 PRESTO_EV_DIR)

/* Kernel callback flags: what presto may serve without asking lento. */
#define PRESTO_CB_ATTR	0x1	/* the attributes are current */
#define PRESTO_CB_DATA	0x2	/* content / listing complete */
#define PRESTO_CB_ALL	(PRESTO_CB_ATTR | PRESTO_CB_DATA)

/*
 * A lower inode: what name_to_handle_at() calls FILEID_INO32_GEN on ext4
 * (so lento opens it with open_by_handle_at()), widened.
 */
struct presto_handle {
	__u64 ino;
	__u32 gen;
	__u32 pad;		/* zero */
};

/*
 * Per lower inode, the callback flags that outlive a mount: the xattr
 * PRESTO_CB_XATTR, written by lento (with CAP_SYS_ADMIN), read by presto
 * when it first meets the inode. Little-endian. The flags count only
 * while epoch equals the fileset's epoch that lento confirmed
 * (SET_EPOCH) after revalidating the volume. nlink: a directory's link
 * count at the server, shown while its listing is not complete in the
 * cache (the lower counts only the subdirectories lento materialised);
 * 0: the lower's count.
 */
#define PRESTO_CB_XATTR		"trusted.presto.cb"
#define PRESTO_CB_XATTR_VERSION	1
struct presto_cb_xattr {
	__u8 version;		/* PRESTO_CB_XATTR_VERSION */
	__u8 flags;		/* PRESTO_CB_* */
	__u8 pad[2];		/* zero */
	__le32 nlink;
	__le64 epoch;
};

#endif /* _UAPI_PRESTO_GENL_H */
