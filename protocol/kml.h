/*
 * Decoding the kernel modification log (KML.md) in user space: lento,
 * kmlcat and the tests share this one decoder. Every length and count in
 * the bytes is checked before it is used; nothing here trusts the disk.
 */
#ifndef LENTO_KML_H
#define LENTO_KML_H

#include <stddef.h>
#include <stdint.h>
#include "presto_kml.h"

struct kml_fh {
	uint64_t ino;		/* 0: empty slot */
	uint32_t gen;
};

struct kml_attr {
	uint32_t valid;		/* PRESTO_KML_A_* */
	uint32_t mode, uid, gid, rdev, nlink;
	uint64_t size;
	int64_t atime_ns, mtime_ns, ctime_ns;
};

/* A decoded record; the names and data point into the buffer decoded. */
struct kml_record {
	uint64_t seq;
	uint16_t op, flags;
	uint32_t uid, gid;
	int64_t time_ns;
	struct kml_fh fh[PRESTO_KML_NFH];
	struct kml_attr attr;
	const char *name, *name2;
	const uint8_t *data;
	size_t name_len, name2_len, data_len;
	/* The caller's supplementary groups: ngroups little-endian u32s. */
	const uint8_t *groups;
	uint16_t ngroups;
	uint64_t entries;	/* RESYNC_DIR: the DIRENTs that follow it */
	uint32_t len;		/* bytes the record took */
};

struct kml_seg_header {
	uint32_t version;
	uint64_t segno, first_seq, seg_size;
};

enum kml_result {
	KML_OK = 0,
	KML_END,	/* a zero length or too few bytes for a record: the end */
	KML_BAD,	/* not a valid record: a torn tail, or damage */
};

/* Largest record: header, two names, the largest data, every group. */
#define KML_REC_MAX \
	((sizeof(struct presto_kml_rec) + 2 * PRESTO_KML_NAME_MAX + \
	  PRESTO_KML_DATA_MAX + 4 * PRESTO_KML_GROUPS_MAX + \
	  PRESTO_KML_ALIGN - 1) & \
	 ~(size_t)(PRESTO_KML_ALIGN - 1))

/* CRC-32C from ~0 without the final inversion, as the kernel's. */
uint32_t kml_crc(const void *buf, size_t len);

/*
 * Is a segment whose file holds @len bytes starting with @buf one presto
 * made and never began: empty (a spare preallocated with its size kept at
 * zero) or with a header of zeros (a spare zeroed ahead of use, or the
 * newest segment of a crash that kept its size but not its header)? Its
 * readers skip it; KML.md.
 */
int kml_seg_unused(const void *buf, size_t len);

/*
 * Decode a segment header from @len bytes. Returns 0, or -1 with a reason
 * in @why.
 */
int kml_decode_header(const void *buf, size_t len, struct kml_seg_header *h,
		      const char **why);

/*
 * Decode the record at the start of @len bytes. @expect_seq, unless 0, is
 * the sequence number it must carry. Besides the framing, the recovery
 * records (RESYNC, RESYNC_DIR, DIRENT) and the RECOVERED flag are checked
 * against what KML.md says of them. KML_BAD sets @why.
 */
enum kml_result kml_decode_record(const void *buf, size_t len,
				  uint64_t expect_seq, struct kml_record *r,
				  const char **why);

const char *kml_op_name(unsigned int op);

/*
 * The xattr names a decoded RESYNC lists, one by one: start with *@pos 0;
 * each call returns the next name and its length in @len, or NULL after
 * the last. The decoder checked the list, so no name is empty or long.
 */
const char *kml_resync_xattr(const struct kml_record *r, size_t *pos,
			     size_t *len);

#endif
