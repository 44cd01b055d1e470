/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Decoder for the log written by the kernel's dm-log-writes target
 * (drivers/md/dm-log-writes.c, format version 1), and replay of its
 * entries onto a device or a file.
 *
 * The on-disk layout, as the 6.1 kernel writes it. All numbers are
 * little-endian. "Sector" means the log's sector size (the logical block
 * size of the logged device, recorded in the super), not 512 bytes:
 *
 *   log sector 0    struct lw_disk_super, the rest of the sector zero
 *   log sector 1..  nr_entries entries, one after the other:
 *                     1 sector       struct lw_disk_entry (32 bytes); for a
 *                                    MARK, its name follows at byte 32
 *                                    (data_len bytes, no NUL; the sector's
 *                                    remainder is zero)
 *                     nr_sectors     the data written, for an entry that is
 *                                    not a DISCARD (a DISCARD's nr_sectors
 *                                    is the range discarded; it has no data
 *                                    in the log)
 *
 * In an entry, sector and nr_sectors are the target's, in the same units.
 * data_len is set only for marks (the name's length); writes have 0. A
 * flush without data is an entry with nr_sectors 0. The super's
 * nr_entries is rewritten only after a FUA or a MARK entry (and at the
 * end, when the target is removed, with the "dm-log-writes-end" mark), so
 * entries past it may be on the log device but are not counted.
 *
 * The library never prints: functions return 0 (or 1 for "an entry") or a
 * negative errno. -EBADMSG means the log is malformed or truncated, and
 * lw_error() then says which entry and what is wrong; any other error is
 * from the system (reading the log, writing the target).
 */
#ifndef PRESTO_LOGWRITES_H
#define PRESTO_LOGWRITES_H

#include <stdint.h>

#define LW_FLUSH	(UINT64_C(1) << 0)
#define LW_FUA		(UINT64_C(1) << 1)
#define LW_DISCARD	(UINT64_C(1) << 2)
#define LW_MARK		(UINT64_C(1) << 3)
#define LW_METADATA	(UINT64_C(1) << 4)
#define LW_ALL_FLAGS	(LW_FLUSH | LW_FUA | LW_DISCARD | LW_MARK | LW_METADATA)

#define LW_MAGIC	UINT64_C(0x6a736677736872)
#define LW_VERSION	UINT64_C(1)

/* Sector sizes accepted: powers of two from 512 to 64 KiB. */
#define LW_MIN_SECTORSIZE	512U
#define LW_MAX_SECTORSIZE	65536U
/* The most data one write entry may carry (a bio is far smaller). */
#define LW_MAX_WRITE		(UINT64_C(64) << 20)

/* On disk (the kernel's structs, which are not packed). */
struct lw_disk_super {
	uint64_t magic;
	uint64_t version;
	uint64_t nr_entries;
	uint32_t sectorsize;
	/* 4 bytes of padding, not initialised by the kernel */
};

struct lw_disk_entry {
	uint64_t sector;
	uint64_t nr_sectors;
	uint64_t flags;
	uint64_t data_len;
};

/* One decoded entry. */
struct lw_entry {
	uint64_t index;		/* 1-based: apply entries 1..index to reach it */
	uint64_t sector;	/* on the target, in sectorsize units */
	uint64_t nr_sectors;
	uint64_t flags;
	uint64_t data_len;
	uint64_t log_offset;	/* byte offset of its header in the log */
	uint64_t data_offset;	/* byte offset of its data in the log */
	uint64_t data_bytes;	/* bytes of data in the log (0 unless a write) */
	/* For a MARK: its name, NUL-terminated; valid until the next
	 * lw_next() or lw_close(). NULL otherwise. */
	const char *mark;
};

struct lw_log {
	int fd;
	uint64_t size;		/* bytes in the log device or file */
	uint32_t sectorsize;
	uint64_t nr_entries;	/* from the super */
	uint64_t next_index;	/* entries decoded so far */
	uint64_t pos;		/* byte offset of the next entry's header */
	unsigned char *sector;	/* one sector: the last header read */
	char err[160];
};

/*
 * Read and check the super of the log open on fd (read with pread; the fd
 * stays the caller's). On success the log must be closed with lw_close().
 */
int lw_open(struct lw_log *log, int fd);
void lw_close(struct lw_log *log);

/*
 * Decode the next entry into *e: 1 if there is one, 0 after the last of
 * the super's nr_entries, or a negative errno. Every length is checked
 * against the log's size before it is used.
 */
int lw_next(struct lw_log *log, struct lw_entry *e);

/* Go back to the first entry. */
void lw_rewind(struct lw_log *log);

/*
 * The byte range of the target an entry changes (a write's data or a
 * discard's range): 0 and *len 0 for flushes without data and marks, or
 * -EBADMSG if the range does not fit in a 63-bit offset.
 */
int lw_target_range(const struct lw_log *log, const struct lw_entry *e,
		    uint64_t *off, uint64_t *len);

/*
 * Apply an entry to the target open on fd: a write's data is copied from
 * the log to sector * sectorsize; a discarded range is made to read as
 * zeros (a punched hole where the file or device can, written zeros
 * otherwise); flushes and marks change nothing. If target_size is not 0,
 * an entry reaching past it is refused with -ENOSPC and nothing is
 * written.
 */
int lw_apply(struct lw_log *log, const struct lw_entry *e, int fd,
	     uint64_t target_size);

/* What was wrong with the log, after -EBADMSG (else ""). */
const char *lw_error(const struct lw_log *log);

/* "FLUSH|FUA|..." for flags, "-" for none; buf of at least 64 bytes. */
const char *lw_flags_name(uint64_t flags, char *buf, unsigned int size);

#endif
