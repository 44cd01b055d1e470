// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of the user-space KML decoder (protocol/kml.c): records built
 * here the way presto builds them decode to what was put in, and every
 * kind of damage is refused with KML_BAD (or seen as the end), recovery
 * records of a shape KML.md does not allow included.
 */
#include "kml.h"

#include <check.h>
#include <endian.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

static uint8_t buf[2 * 65536 + 8192];

/* A record as presto writes it; returns its length. */
static uint32_t encode(uint8_t *p, uint64_t seq, uint16_t op,
		       const char *name, const char *name2, const void *data,
		       size_t data_len)
{
	struct presto_kml_rec r;
	size_t n1 = name ? strlen(name) : 0, n2 = name2 ? strlen(name2) : 0;
	uint32_t len = (sizeof(r) + n1 + n2 + data_len + 7) & ~7U;

	memset(&r, 0, sizeof(r));
	r.len = htole32(len);
	r.seq = htole64(seq);
	r.op = htole16(op);
	r.name_len = htole16((uint16_t)n1);
	r.name2_len = htole16((uint16_t)n2);
	r.data_len = htole32((uint32_t)data_len);
	r.uid = htole32(1000);
	r.gid = htole32(100);
	r.time_ns = htole64(1700000000123456789ULL);
	r.fh[PRESTO_KML_FH_DIR].ino = htole64(2);
	r.fh[PRESTO_KML_FH_DIR].gen = htole32(7);
	r.fh[PRESTO_KML_FH_OBJ].ino = htole64(12);
	r.fh[PRESTO_KML_FH_OBJ].gen = htole32(99);
	r.attr.valid = htole32(PRESTO_KML_A_MODE | PRESTO_KML_A_SIZE);
	r.attr.mode = htole32(0100644);
	r.attr.size = htole64(4096);
	memset(p, 0, len);
	memcpy(p, &r, sizeof(r));
	if (n1)
		memcpy(p + sizeof(r), name, n1);
	if (n2)
		memcpy(p + sizeof(r) + n1, name2, n2);
	if (data_len)
		memcpy(p + sizeof(r) + n1 + n2, data, data_len);
	return len;
}

/* Recompute the CRC after a test changed the record. */
static void seal(uint8_t *p)
{
	uint32_t len = le32toh(((struct presto_kml_rec *)p)->len);
	uint32_t crc;

	memset(p + offsetof(struct presto_kml_rec, crc), 0, 4);
	crc = htole32(kml_crc(p, len));
	memcpy(p + offsetof(struct presto_kml_rec, crc), &crc, 4);
}

static enum kml_result decode(size_t len, uint64_t seq, struct kml_record *r,
			      const char **why)
{
	*why = NULL;
	return kml_decode_record(buf, len, seq, r, why);
}

START_TEST(crc_is_castagnoli)
{
	/* The standard check value of CRC-32C is 0xe3069283, inverted. */
	ck_assert_uint_eq(kml_crc("123456789", 9), ~0xe3069283U);
}
END_TEST

START_TEST(record_round_trip)
{
	struct kml_record r;
	const char *why;
	uint32_t len = encode(buf, 5, PRESTO_KML_RENAME, "old", "new", NULL, 0);

	seal(buf);
	ck_assert_int_eq(decode(len, 5, &r, &why), KML_OK);
	ck_assert_uint_eq(r.len, len);
	ck_assert_uint_eq(r.seq, 5);
	ck_assert_uint_eq(r.op, PRESTO_KML_RENAME);
	ck_assert_str_eq(kml_op_name(r.op), "RENAME");
	ck_assert_uint_eq(r.uid, 1000);
	ck_assert_uint_eq(r.gid, 100);
	ck_assert_int_eq(r.time_ns, 1700000000123456789LL);
	ck_assert_uint_eq(r.fh[PRESTO_KML_FH_DIR].ino, 2);
	ck_assert_uint_eq(r.fh[PRESTO_KML_FH_DIR].gen, 7);
	ck_assert_uint_eq(r.fh[PRESTO_KML_FH_OBJ].ino, 12);
	ck_assert_uint_eq(r.fh[PRESTO_KML_FH_OBJ].gen, 99);
	ck_assert_uint_eq(r.fh[PRESTO_KML_FH_NEWDIR].ino, 0);
	ck_assert_uint_eq(r.attr.valid, PRESTO_KML_A_MODE | PRESTO_KML_A_SIZE);
	ck_assert_uint_eq(r.attr.mode, 0100644);
	ck_assert_uint_eq(r.attr.size, 4096);
	ck_assert_uint_eq(r.name_len, 3);
	ck_assert_int_eq(memcmp(r.name, "old", 3), 0);
	ck_assert_uint_eq(r.name2_len, 3);
	ck_assert_int_eq(memcmp(r.name2, "new", 3), 0);
	ck_assert_uint_eq(r.data_len, 0);
	/* Any sequence number is accepted when none is expected. */
	ck_assert_int_eq(decode(len, 0, &r, &why), KML_OK);
}
END_TEST

START_TEST(largest_record)
{
	static char value[PRESTO_KML_DATA_MAX];
	char name[PRESTO_KML_NAME_MAX + 1];
	struct kml_record r;
	const char *why;
	uint32_t len;

	memset(name, 'n', PRESTO_KML_NAME_MAX);
	name[PRESTO_KML_NAME_MAX] = '\0';
	memset(value, 0xab, sizeof(value));
	len = encode(buf, 1, PRESTO_KML_SETXATTR, name, NULL, value,
		     sizeof(value));
	seal(buf);
	ck_assert_int_eq(decode(len, 1, &r, &why), KML_OK);
	ck_assert_uint_eq(r.data_len, PRESTO_KML_DATA_MAX);
	ck_assert_uint_eq(r.data[PRESTO_KML_DATA_MAX - 1], 0xab);
	ck_assert_uint_le(len, KML_REC_MAX);
}
END_TEST

/* Append @n groups (1000 + i) to the record at buf of length @len. */
static uint32_t add_groups(uint32_t len, uint16_t n, uint16_t flags)
{
	struct presto_kml_rec *h = (struct presto_kml_rec *)buf;
	size_t body = sizeof(*h) + le16toh(h->name_len) +
		      le16toh(h->name2_len) + le32toh(h->data_len);
	uint32_t nlen = (uint32_t)((body + 4 * (size_t)n + 7) & ~(size_t)7);

	memset(buf + body, 0, nlen > len ? nlen - body : len - body);
	for (uint16_t i = 0; i < n; i++) {
		uint32_t g = htole32(1000u + i);

		memcpy(buf + body + 4 * i, &g, 4);
	}
	h->ngroups = htole16(n);
	h->flags = htole16(le16toh(h->flags) | flags);
	h->len = htole32(nlen);
	seal(buf);
	return nlen;
}

START_TEST(groups_round_trip)
{
	struct kml_record r;
	const char *why;
	uint32_t len = encode(buf, 1, PRESTO_KML_SYMLINK, "link", NULL,
			      "target", 6);

	len = add_groups(len, 3, 0);
	ck_assert_int_eq(decode(len, 1, &r, &why), KML_OK);
	ck_assert_uint_eq(r.ngroups, 3);
	ck_assert_uint_eq(r.data_len, 6);
	ck_assert_mem_eq(r.data, "target", 6);
	ck_assert_uint_eq(r.groups[0] | r.groups[1] << 8, 1000);
	ck_assert_uint_eq(r.groups[8] | r.groups[9] << 8, 1002);
	ck_assert_ptr_eq(r.groups, r.data + 6);
	ck_assert_uint_eq(r.len, len);
}
END_TEST

/* Every group a record may hold, with the longest names and data. */
START_TEST(largest_record_with_groups)
{
	static char value[PRESTO_KML_DATA_MAX];
	char name[PRESTO_KML_NAME_MAX + 1];
	struct kml_record r;
	const char *why;
	uint32_t len;

	memset(name, 'n', PRESTO_KML_NAME_MAX);
	name[PRESTO_KML_NAME_MAX] = '\0';
	memset(value, 0xab, sizeof(value));
	len = encode(buf, 1, PRESTO_KML_RENAME, name, name, value,
		     sizeof(value));
	len = add_groups(len, PRESTO_KML_GROUPS_MAX, PRESTO_KML_F_GROUPS_CUT);
	ck_assert_uint_eq(len, KML_REC_MAX);
	ck_assert_int_eq(decode(len, 1, &r, &why), KML_OK);
	ck_assert_uint_eq(r.ngroups, PRESTO_KML_GROUPS_MAX);
	ck_assert_uint_eq(r.flags, PRESTO_KML_F_GROUPS_CUT);
}
END_TEST

START_TEST(end_of_records)
{
	struct kml_record r;
	const char *why;

	memset(buf, 0, sizeof(struct presto_kml_rec));
	ck_assert_int_eq(decode(sizeof(struct presto_kml_rec), 1, &r, &why),
			 KML_END);
	ck_assert_int_eq(decode(sizeof(struct presto_kml_rec) - 1, 1, &r, &why),
			 KML_END);
	ck_assert_int_eq(decode(0, 1, &r, &why), KML_END);
}
END_TEST

/* One kind of damage per index: each must be KML_BAD. */
START_TEST(damage_is_refused)
{
	struct presto_kml_rec *h = (struct presto_kml_rec *)buf;
	uint32_t len = encode(buf, 9, PRESTO_KML_SYMLINK, "link", NULL,
			      "target", 6);
	size_t avail = len;
	uint64_t seq = 9;
	struct kml_record r;
	const char *why;
	int reseal = 1;

	switch (_i) {
	case 0:		/* a bit flipped after the CRC was taken */
		seal(buf);
		buf[sizeof(*h) + 1] ^= 1;
		reseal = 0;
		break;
	case 1:		/* the record runs past the bytes there are */
		avail = len - 8;
		break;
	case 2:		/* length not a multiple of 8 */
		h->len = htole32(len - 4);
		break;
	case 3:		/* length shorter than a record header */
		h->len = htole32(64);
		break;
	case 4:		/* length beyond the largest record */
		h->len = htole32((uint32_t)KML_REC_MAX + 8);
		avail = sizeof(buf);
		break;
	case 5:		/* out of order */
		seq = 10;
		break;
	case 6:		/* unknown operation */
		h->op = htole16(PRESTO_KML_OP_MAX + 1);
		break;
	case 7:		/* operation 0 */
		h->op = 0;
		break;
	case 8:		/* unknown flag */
		h->flags = htole16(0x8000);
		break;
	case 9:		/* names longer than the record */
		h->name_len = htole16(200);
		break;
	case 10:	/* a name longer than NAME_MAX */
		h->name_len = htole16(PRESTO_KML_NAME_MAX + 1);
		break;
	case 11:	/* more padding than alignment needs */
		h->len = htole32(len + 8);
		avail = len + 8;
		memset(buf + len, 0, 8);
		break;
	case 12:	/* padding not zero */
		buf[len - 1] = 1;
		break;
	case 13:	/* a reserved field not zero */
		h->reserved = htole16(1);
		break;
	case 14:	/* a handle's reserved field not zero */
		h->fh[3].reserved = htole32(1);
		break;
	case 15:	/* unknown attribute bits */
		h->attr.valid = htole32(0x10000);
		break;
	case 16:	/* sequence number 0 */
		h->seq = 0;
		seq = 0;
		break;
	case 17:	/* data longer than DATA_MAX */
		h->data_len = htole32(PRESTO_KML_DATA_MAX + 1);
		break;
	case 18:	/* more groups than a record holds */
		h->ngroups = htole16(PRESTO_KML_GROUPS_MAX + 1);
		break;
	case 19:	/* groups running past the record's length */
		h->ngroups = htole16(2);
		break;
	case 20:	/* groups said cut, yet fewer than the most */
		h->flags = htole16(PRESTO_KML_F_GROUPS_CUT);
		break;
	}
	if (reseal)
		seal(buf);
	ck_assert_int_eq(decode(avail, seq, &r, &why), KML_BAD);
	ck_assert_ptr_nonnull(why);
}
END_TEST

/*
 * A recovery record as presto writes it: RECOVERED, the handles, names and
 * attributes its operation has (KML.md, "Recovery records"). Returns its
 * length; tests then change it and seal it.
 */
static uint32_t encode_recovery(uint8_t *p, uint64_t seq, uint16_t op,
				const char *name, const void *data,
				size_t data_len, uint32_t mode)
{
	struct presto_kml_rec *h = (struct presto_kml_rec *)p;
	uint32_t len = encode(p, seq, op, name, NULL, data, data_len);

	h->flags = htole16(PRESTO_KML_F_RECOVERED);
	h->attr.mode = htole32(mode);
	switch (op) {
	case PRESTO_KML_RESYNC:
		memset(&h->fh[PRESTO_KML_FH_DIR], 0, sizeof(h->fh[0]));
		h->attr.valid = htole32(PRESTO_KML_A_ALL);
		h->attr.nlink = htole32(1);
		break;
	case PRESTO_KML_RESYNC_DIR:
		memset(&h->fh[PRESTO_KML_FH_DIR], 0, sizeof(h->fh[0]));
		memset(&h->attr, 0, sizeof(h->attr));
		break;
	case PRESTO_KML_DIRENT:
		h->attr.valid = htole32(PRESTO_KML_A_MODE | PRESTO_KML_A_RDEV);
		h->attr.size = 0;
		break;
	}
	seal(p);
	return len;
}

static uint32_t encode_resync_dir(uint8_t *p, uint64_t seq, uint64_t n)
{
	struct presto_kml_resync_dir d = { .entries = htole64(n) };

	return encode_recovery(p, seq, PRESTO_KML_RESYNC_DIR, NULL, &d,
			       sizeof(d), 0);
}

START_TEST(resync_round_trip)
{
	static const char list[] = "user.a\0trusted.bb\0security.selinux";
	struct kml_record r;
	const char *why, *x;
	size_t pos = 0, n;
	uint32_t len = encode_recovery(buf, 3, PRESTO_KML_RESYNC, NULL, list,
				       sizeof(list), 0100640);

	ck_assert_int_eq(decode(len, 3, &r, &why), KML_OK);
	ck_assert_str_eq(kml_op_name(r.op), "RESYNC");
	ck_assert_uint_eq(r.flags, PRESTO_KML_F_RECOVERED);
	ck_assert_uint_eq(r.fh[PRESTO_KML_FH_DIR].ino, 0);
	ck_assert_uint_eq(r.fh[PRESTO_KML_FH_OBJ].ino, 12);
	ck_assert_uint_eq(r.fh[PRESTO_KML_FH_OBJ].gen, 99);
	ck_assert_uint_eq(r.attr.valid, PRESTO_KML_A_ALL);
	ck_assert_uint_eq(r.attr.mode, 0100640);
	ck_assert_uint_eq(r.attr.size, 4096);
	ck_assert_uint_eq(r.data_len, sizeof(list));
	x = kml_resync_xattr(&r, &pos, &n);
	ck_assert_uint_eq(n, 6);
	ck_assert_int_eq(memcmp(x, "user.a", n), 0);
	x = kml_resync_xattr(&r, &pos, &n);
	ck_assert_uint_eq(n, 10);
	ck_assert_int_eq(memcmp(x, "trusted.bb", n), 0);
	x = kml_resync_xattr(&r, &pos, &n);
	ck_assert_uint_eq(n, 16);
	ck_assert_int_eq(memcmp(x, "security.selinux", n), 0);
	ck_assert_ptr_null(kml_resync_xattr(&r, &pos, &n));

	/* No xattrs: an empty list. */
	len = encode_recovery(buf, 4, PRESTO_KML_RESYNC, NULL, NULL, 0,
			      040755);
	ck_assert_int_eq(decode(len, 4, &r, &why), KML_OK);
	pos = 0;
	ck_assert_ptr_null(kml_resync_xattr(&r, &pos, &n));
}
END_TEST

START_TEST(resync_longest_xattr_name)
{
	char list[2 * (PRESTO_KML_NAME_MAX + 1)];
	struct kml_record r;
	const char *why;
	size_t pos = 0, n;
	uint32_t len;

	memset(list, 'x', sizeof(list));
	list[PRESTO_KML_NAME_MAX] = '\0';
	list[sizeof(list) - 1] = '\0';
	len = encode_recovery(buf, 1, PRESTO_KML_RESYNC, NULL, list,
			      sizeof(list), 0100644);
	ck_assert_int_eq(decode(len, 1, &r, &why), KML_OK);
	ck_assert_ptr_nonnull(kml_resync_xattr(&r, &pos, &n));
	ck_assert_uint_eq(n, PRESTO_KML_NAME_MAX);
	ck_assert_ptr_nonnull(kml_resync_xattr(&r, &pos, &n));
	ck_assert_uint_eq(n, PRESTO_KML_NAME_MAX);
	ck_assert_ptr_null(kml_resync_xattr(&r, &pos, &n));
}
END_TEST

/* Recovery by a mounter in more groups than a record holds: cut, read. */
START_TEST(recovered_with_groups_cut)
{
	struct kml_record r;
	const char *why;
	uint32_t len = encode_resync_dir(buf, 8, 2);

	len = add_groups(len, PRESTO_KML_GROUPS_MAX, PRESTO_KML_F_GROUPS_CUT);
	ck_assert_int_eq(decode(len, 8, &r, &why), KML_OK);
	ck_assert_uint_eq(r.flags,
			  PRESTO_KML_F_RECOVERED | PRESTO_KML_F_GROUPS_CUT);
	ck_assert_uint_eq(r.entries, 2);
	ck_assert_uint_eq(r.ngroups, PRESTO_KML_GROUPS_MAX);
}
END_TEST

START_TEST(resync_dir_round_trip)
{
	struct kml_record r;
	const char *why;
	uint32_t len = encode_resync_dir(buf, 8, 0x100000003ULL);

	ck_assert_int_eq(decode(len, 8, &r, &why), KML_OK);
	ck_assert_str_eq(kml_op_name(r.op), "RESYNC_DIR");
	ck_assert_uint_eq(r.entries, 0x100000003ULL);
	ck_assert_uint_eq(r.data_len, sizeof(struct presto_kml_resync_dir));
	ck_assert_uint_eq(r.attr.valid, 0);
	ck_assert_uint_eq(r.fh[PRESTO_KML_FH_OBJ].ino, 12);
	/* An empty directory. */
	len = encode_resync_dir(buf, 9, 0);
	ck_assert_int_eq(decode(len, 9, &r, &why), KML_OK);
	ck_assert_uint_eq(r.entries, 0);
	/* entries is RESYNC_DIR's alone. */
	len = encode_recovery(buf, 10, PRESTO_KML_RESYNC, NULL, NULL, 0,
			      040755);
	ck_assert_int_eq(decode(len, 10, &r, &why), KML_OK);
	ck_assert_uint_eq(r.entries, 0);
}
END_TEST

START_TEST(dirent_round_trip)
{
	struct presto_kml_rec *h = (struct presto_kml_rec *)buf;
	char longest[PRESTO_KML_NAME_MAX + 1];
	struct kml_record r;
	const char *why;
	uint32_t len;

	len = encode_recovery(buf, 2, PRESTO_KML_DIRENT, "...", NULL, 0,
			      0100600);
	ck_assert_int_eq(decode(len, 2, &r, &why), KML_OK);
	ck_assert_str_eq(kml_op_name(r.op), "DIRENT");
	ck_assert_uint_eq(r.fh[PRESTO_KML_FH_DIR].ino, 2);
	ck_assert_uint_eq(r.fh[PRESTO_KML_FH_DIR].gen, 7);
	ck_assert_uint_eq(r.fh[PRESTO_KML_FH_OBJ].ino, 12);
	ck_assert_uint_eq(r.name_len, 3);
	ck_assert_int_eq(memcmp(r.name, "...", 3), 0);
	ck_assert_uint_eq(r.attr.valid, PRESTO_KML_A_MODE | PRESTO_KML_A_RDEV);
	ck_assert_uint_eq(r.attr.mode, 0100600);
	ck_assert_uint_eq(r.data_len, 0);

	len = encode_recovery(buf, 3, PRESTO_KML_DIRENT, "ln", "../t", 4,
			      0120777);
	ck_assert_int_eq(decode(len, 3, &r, &why), KML_OK);
	ck_assert_uint_eq(r.data_len, 4);
	ck_assert_int_eq(memcmp(r.data, "../t", 4), 0);

	len = encode_recovery(buf, 4, PRESTO_KML_DIRENT, "null", NULL, 0,
			      020666);
	h->attr.rdev = htole32(0x103);
	seal(buf);
	ck_assert_int_eq(decode(len, 4, &r, &why), KML_OK);
	ck_assert_uint_eq(r.attr.mode, 020666);
	ck_assert_uint_eq(r.attr.rdev, 0x103);

	memset(longest, 'l', PRESTO_KML_NAME_MAX);
	longest[PRESTO_KML_NAME_MAX] = '\0';
	len = encode_recovery(buf, 5, PRESTO_KML_DIRENT, longest, NULL, 0,
			      040700);
	ck_assert_int_eq(decode(len, 5, &r, &why), KML_OK);
	ck_assert_uint_eq(r.name_len, PRESTO_KML_NAME_MAX);
}
END_TEST

/* Recovery restates xattrs and content with SETXATTR and STORE. */
START_TEST(recovered_setxattr_and_store)
{
	struct presto_kml_rec *h = (struct presto_kml_rec *)buf;
	struct kml_record r;
	const char *why;
	uint32_t len;

	len = encode(buf, 6, PRESTO_KML_SETXATTR, "user.a", NULL, "v", 1);
	h->flags = htole16(PRESTO_KML_F_RECOVERED);
	seal(buf);
	ck_assert_int_eq(decode(len, 6, &r, &why), KML_OK);
	ck_assert_uint_eq(r.flags, PRESTO_KML_F_RECOVERED);
	len = encode(buf, 7, PRESTO_KML_STORE, NULL, NULL, NULL, 0);
	h->flags = htole16(PRESTO_KML_F_RECOVERED);
	seal(buf);
	ck_assert_int_eq(decode(len, 7, &r, &why), KML_OK);
	ck_assert_uint_eq(r.flags, PRESTO_KML_F_RECOVERED);
}
END_TEST

/* A record of @op as a change makes it, with @flags, into buf. */
static uint32_t encode_change(uint16_t op, uint16_t flags)
{
	struct presto_kml_rec *h = (struct presto_kml_rec *)buf;
	uint32_t len = encode(buf, 1, op, "n",
			      op == PRESTO_KML_RENAME ? "m" : NULL, NULL, 0);

	h->flags = htole16(flags);
	seal(buf);
	return len;
}

/* Every other change is never written by recovery. */
START_TEST(recovered_refused_on_changes)
{
	struct kml_record r;
	const char *why;

	if (_i == PRESTO_KML_SETXATTR || _i == PRESTO_KML_STORE)
		return;
	ck_assert_int_eq(decode(encode_change(_i, 0), 1, &r, &why), KML_OK);
	ck_assert_int_eq(decode(encode_change(_i, PRESTO_KML_F_RECOVERED), 1,
				&r, &why), KML_BAD);
	ck_assert_str_eq(why,
			 "RECOVERED flag on an op recovery does not write");
}
END_TEST

/* STORED (a STORE folded in) only on a CREATE. */
START_TEST(stored_only_on_create)
{
	uint32_t len = encode_change(_i, PRESTO_KML_F_STORED);
	struct kml_record r;
	const char *why;

	if (_i == PRESTO_KML_CREATE) {
		ck_assert_int_eq(decode(len, 1, &r, &why), KML_OK);
		ck_assert_uint_eq(r.flags, PRESTO_KML_F_STORED);
		return;
	}
	ck_assert_int_eq(decode(len, 1, &r, &why), KML_BAD);
	ck_assert_str_eq(why, "STORED flag on an op other than CREATE");
}
END_TEST

/* One malformed recovery record per index: each must be KML_BAD. */
START_TEST(recovery_damage_is_refused)
{
	static const char list[] = "user.a\0user.b";
	static char path_max[PATH_MAX];
	char long_name[PRESTO_KML_NAME_MAX + 2];
	struct presto_kml_rec *h = (struct presto_kml_rec *)buf;
	char *name = (char *)buf + sizeof(*h);
	struct kml_record r;
	const char *why, *want = NULL;
	uint32_t len = 0;

	switch (_i) {
	case 0:		/* RESYNC without RECOVERED */
		want = "recovery record without the RECOVERED flag";
		len = encode_recovery(buf, 1, PRESTO_KML_RESYNC, NULL, list,
				      sizeof(list), 0100644);
		h->flags = 0;
		break;
	case 1:		/* RESYNC_DIR without RECOVERED */
		want = "recovery record without the RECOVERED flag";
		len = encode_resync_dir(buf, 1, 1);
		h->flags = 0;
		break;
	case 2:		/* DIRENT without RECOVERED */
		want = "recovery record without the RECOVERED flag";
		len = encode_recovery(buf, 1, PRESTO_KML_DIRENT, "f", NULL, 0,
				      0100644);
		h->flags = 0;
		break;
	case 3:		/* another flag besides RECOVERED */
		want = "recovery record with flags other than RECOVERED";
		len = encode_recovery(buf, 1, PRESTO_KML_RESYNC, NULL, NULL, 0,
				      0100644);
		h->flags = htole16(PRESTO_KML_F_RECOVERED |
				   PRESTO_KML_F_XCREATE);
		break;
	case 4:		/* RESYNC with a dir handle */
		want = "RESYNC: a handle other than obj alone";
		len = encode_recovery(buf, 1, PRESTO_KML_RESYNC, NULL, NULL, 0,
				      0100644);
		h->fh[PRESTO_KML_FH_DIR].ino = htole64(2);
		break;
	case 5:		/* RESYNC without obj */
		want = "RESYNC: a handle other than obj alone";
		len = encode_recovery(buf, 1, PRESTO_KML_RESYNC, NULL, NULL, 0,
				      0100644);
		h->fh[PRESTO_KML_FH_OBJ].ino = 0;
		break;
	case 6:		/* RESYNC with a name */
		want = "RESYNC with a name";
		len = encode_recovery(buf, 1, PRESTO_KML_RESYNC, "n", NULL, 0,
				      0100644);
		break;
	case 7:		/* RESYNC without every attribute */
		want = "RESYNC without every attribute";
		len = encode_recovery(buf, 1, PRESTO_KML_RESYNC, NULL, NULL, 0,
				      0100644);
		h->attr.valid = htole32(PRESTO_KML_A_ALL & ~PRESTO_KML_A_NLINK);
		break;
	case 8:		/* xattr list without its last NUL */
		want = "RESYNC: malformed list of xattr names";
		len = encode_recovery(buf, 1, PRESTO_KML_RESYNC, NULL, list,
				      sizeof(list) - 1, 0100644);
		break;
	case 9:		/* xattr list of an empty name */
		want = "RESYNC: malformed list of xattr names";
		len = encode_recovery(buf, 1, PRESTO_KML_RESYNC, NULL, "", 1,
				      0100644);
		break;
	case 10:	/* an empty name inside the list */
		want = "RESYNC: malformed list of xattr names";
		len = encode_recovery(buf, 1, PRESTO_KML_RESYNC, NULL,
				      "user.a\0\0user.b", 15, 0100644);
		break;
	case 11:	/* an xattr name longer than NAME_MAX */
		want = "RESYNC: malformed list of xattr names";
		memset(long_name, 'x', sizeof(long_name) - 1);
		long_name[sizeof(long_name) - 1] = '\0';
		len = encode_recovery(buf, 1, PRESTO_KML_RESYNC, NULL,
				      long_name, sizeof(long_name), 0100644);
		break;
	case 12:	/* RESYNC of no file type */
		want = "RESYNC: invalid mode";
		len = encode_recovery(buf, 1, PRESTO_KML_RESYNC, NULL, NULL, 0,
				      0644);
		break;
	case 13:	/* RESYNC of mode bits past the type */
		want = "RESYNC: invalid mode";
		len = encode_recovery(buf, 1, PRESTO_KML_RESYNC, NULL, NULL, 0,
				      0300644);
		break;
	case 14:	/* RESYNC_DIR of a short count */
		want = "RESYNC_DIR: data is not an entry count";
		len = encode_recovery(buf, 1, PRESTO_KML_RESYNC_DIR, NULL,
				      "\1\0\0\0", 4, 0);
		break;
	case 15:	/* RESYNC_DIR of a long count */
		want = "RESYNC_DIR: data is not an entry count";
		len = encode_recovery(buf, 1, PRESTO_KML_RESYNC_DIR, NULL,
				      "\1\0\0\0\0\0\0\0\0", 9, 0);
		break;
	case 16:	/* RESYNC_DIR with attributes */
		want = "RESYNC_DIR with attributes";
		len = encode_resync_dir(buf, 1, 1);
		h->attr.valid = htole32(PRESTO_KML_A_MODE);
		break;
	case 17:	/* RESYNC_DIR with a newdir handle */
		want = "RESYNC_DIR: a handle other than obj alone";
		len = encode_resync_dir(buf, 1, 1);
		h->fh[PRESTO_KML_FH_NEWDIR].ino = htole64(5);
		break;
	case 18:	/* RESYNC_DIR with a name */
		want = "RESYNC_DIR with a name";
		len = encode_recovery(buf, 1, PRESTO_KML_RESYNC_DIR, "n",
				      "\1\0\0\0\0\0\0\0", 8, 0);
		break;
	case 19:	/* DIRENT without dir */
		want = "DIRENT: handles other than dir and obj";
		len = encode_recovery(buf, 1, PRESTO_KML_DIRENT, "f", NULL, 0,
				      0100644);
		h->fh[PRESTO_KML_FH_DIR].ino = 0;
		break;
	case 20:	/* DIRENT with a target handle */
		want = "DIRENT: handles other than dir and obj";
		len = encode_recovery(buf, 1, PRESTO_KML_DIRENT, "f", NULL, 0,
				      0100644);
		h->fh[PRESTO_KML_FH_TARGET].ino = htole64(30);
		break;
	case 21:	/* DIRENT without a name */
		want = "DIRENT: not a valid entry name";
		len = encode_recovery(buf, 1, PRESTO_KML_DIRENT, NULL, NULL, 0,
				      0100644);
		break;
	case 22:	/* DIRENT named . */
		want = "DIRENT: not a valid entry name";
		len = encode_recovery(buf, 1, PRESTO_KML_DIRENT, ".", NULL, 0,
				      040755);
		break;
	case 23:	/* DIRENT named .. */
		want = "DIRENT: not a valid entry name";
		len = encode_recovery(buf, 1, PRESTO_KML_DIRENT, "..", NULL, 0,
				      040755);
		break;
	case 24:	/* a name with a slash */
		want = "DIRENT: not a valid entry name";
		len = encode_recovery(buf, 1, PRESTO_KML_DIRENT, "a/b", NULL,
				      0, 0100644);
		break;
	case 25:	/* a name with a NUL */
		want = "DIRENT: not a valid entry name";
		len = encode_recovery(buf, 1, PRESTO_KML_DIRENT, "ab", NULL, 0,
				      0100644);
		name[1] = '\0';
		break;
	case 26:	/* data on an entry that is not a symlink */
		want = "DIRENT: data for an entry not a symlink";
		len = encode_recovery(buf, 1, PRESTO_KML_DIRENT, "f", "t", 1,
				      0100644);
		break;
	case 27:	/* a symlink without a target */
		want = "DIRENT: not a valid symlink target";
		len = encode_recovery(buf, 1, PRESTO_KML_DIRENT, "l", NULL, 0,
				      0120777);
		break;
	case 28:	/* a symlink target with a NUL */
		want = "DIRENT: not a valid symlink target";
		len = encode_recovery(buf, 1, PRESTO_KML_DIRENT, "l", "a\0b", 3,
				      0120777);
		break;
	case 29:	/* a symlink target of PATH_MAX bytes */
		want = "DIRENT: not a valid symlink target";
		memset(path_max, 'p', sizeof(path_max));
		len = encode_recovery(buf, 1, PRESTO_KML_DIRENT, "l", path_max,
				      sizeof(path_max), 0120777);
		break;
	case 30:	/* DIRENT without rdev */
		want = "DIRENT: attributes other than mode and rdev";
		len = encode_recovery(buf, 1, PRESTO_KML_DIRENT, "f", NULL, 0,
				      0100644);
		h->attr.valid = htole32(PRESTO_KML_A_MODE);
		break;
	case 31:	/* DIRENT with more than mode and rdev */
		want = "DIRENT: attributes other than mode and rdev";
		len = encode_recovery(buf, 1, PRESTO_KML_DIRENT, "f", NULL, 0,
				      0100644);
		h->attr.valid |= htole32(PRESTO_KML_A_SIZE);
		break;
	case 32:	/* DIRENT of an unknown file type */
		want = "DIRENT: invalid mode";
		len = encode_recovery(buf, 1, PRESTO_KML_DIRENT, "f", NULL, 0,
				      0030644);
		break;
	case 33:	/* a second name */
		want = "recovery record with a second name";
		len = encode(buf, 1, PRESTO_KML_DIRENT, "f", "g", NULL, 0);
		h->flags = htole16(PRESTO_KML_F_RECOVERED);
		h->attr.valid = htole32(PRESTO_KML_A_MODE | PRESTO_KML_A_RDEV);
		break;
	}
	seal(buf);
	ck_assert_int_eq(decode(len, 1, &r, &why), KML_BAD);
	ck_assert_str_eq(why, want);
}
END_TEST

static void header(uint8_t *p, uint64_t first_seq)
{
	struct presto_kml_seg_hdr h;
	uint32_t crc;

	memset(p, 0, PRESTO_KML_HDR_SIZE);
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, PRESTO_KML_MAGIC, 8);
	h.version = htole32(PRESTO_KML_VERSION);
	h.hdr_size = htole32(PRESTO_KML_HDR_SIZE);
	h.segno = htole64(3);
	h.first_seq = htole64(first_seq);
	h.seg_size = htole64(4 << 20);
	crc = kml_crc(&h, offsetof(struct presto_kml_seg_hdr, crc));
	h.crc = htole32(crc);
	memcpy(p, &h, sizeof(h));
}

START_TEST(unused_segment)
{
	memset(buf, 0, PRESTO_KML_HDR_SIZE + 64);
	/* Empty, or zeros where the header goes: a spare never begun. */
	ck_assert_int_eq(kml_seg_unused(buf, 0), 1);
	ck_assert_int_eq(kml_seg_unused(buf, 100), 1);
	ck_assert_int_eq(kml_seg_unused(buf, PRESTO_KML_HDR_SIZE + 64), 1);
	/* Anything in the header block, even past the header itself. */
	buf[PRESTO_KML_HDR_SIZE - 1] = 1;
	ck_assert_int_eq(kml_seg_unused(buf, PRESTO_KML_HDR_SIZE + 64), 0);
	header(buf, 42);
	ck_assert_int_eq(kml_seg_unused(buf, PRESTO_KML_HDR_SIZE), 0);
	/* Bytes past the header block do not count: records, or damage. */
	memset(buf, 0, PRESTO_KML_HDR_SIZE);
	buf[PRESTO_KML_HDR_SIZE] = 1;
	ck_assert_int_eq(kml_seg_unused(buf, PRESTO_KML_HDR_SIZE + 64), 1);
}
END_TEST

START_TEST(segment_header)
{
	struct presto_kml_seg_hdr *raw = (struct presto_kml_seg_hdr *)buf;
	struct kml_seg_header h;
	const char *why;

	header(buf, 42);
	ck_assert_int_eq(kml_decode_header(buf, PRESTO_KML_HDR_SIZE, &h, &why),
			 0);
	ck_assert_uint_eq(h.segno, 3);
	ck_assert_uint_eq(h.first_seq, 42);
	ck_assert_uint_eq(h.version, PRESTO_KML_VERSION);
	ck_assert_int_eq(kml_decode_header(buf, sizeof(*raw) - 1, &h, &why),
			 -1);
	buf[0] = 'X';
	ck_assert_int_eq(kml_decode_header(buf, PRESTO_KML_HDR_SIZE, &h, &why),
			 -1);
	header(buf, 42);
	raw->segno ^= 1;	/* CRC no longer matches */
	ck_assert_int_eq(kml_decode_header(buf, PRESTO_KML_HDR_SIZE, &h, &why),
			 -1);
	header(buf, 42);
	raw->version = htole32(PRESTO_KML_VERSION + 1);
	raw->crc = htole32(kml_crc(raw, offsetof(struct presto_kml_seg_hdr,
						  crc)));
	ck_assert_int_eq(kml_decode_header(buf, PRESTO_KML_HDR_SIZE, &h, &why),
			 -1);
	ck_assert_str_eq(why, "unknown KML format version");
}
END_TEST

/* A run of records decodes in order and stops at the zeros after it. */
START_TEST(run_of_records)
{
	size_t pos = 0, n = 0;
	struct kml_record r;
	const char *why;

	memset(buf, 0, 4096);
	for (uint64_t s = 1; s <= 5; s++) {
		uint32_t len = encode(buf + pos, s, PRESTO_KML_CREATE, "f",
				      NULL, NULL, 0);

		seal(buf + pos);
		pos += len;
	}
	pos = 0;
	for (uint64_t s = 1;; s++) {
		enum kml_result res = kml_decode_record(buf + pos, 4096 - pos,
							s, &r, &why);
		if (res != KML_OK) {
			ck_assert_int_eq(res, KML_END);
			break;
		}
		pos += r.len;
		n++;
	}
	ck_assert_uint_eq(n, 5);
}
END_TEST

static Suite *kml_suite(void)
{
	Suite *s = suite_create("kml");
	TCase *tc = tcase_create("decoder");

	tcase_add_test(tc, crc_is_castagnoli);
	tcase_add_test(tc, record_round_trip);
	tcase_add_test(tc, largest_record);
	tcase_add_test(tc, groups_round_trip);
	tcase_add_test(tc, largest_record_with_groups);
	tcase_add_test(tc, end_of_records);
	tcase_add_loop_test(tc, damage_is_refused, 0, 21);
	tcase_add_test(tc, resync_round_trip);
	tcase_add_test(tc, resync_longest_xattr_name);
	tcase_add_test(tc, resync_dir_round_trip);
	tcase_add_test(tc, recovered_with_groups_cut);
	tcase_add_test(tc, dirent_round_trip);
	tcase_add_test(tc, recovered_setxattr_and_store);
	tcase_add_loop_test(tc, recovered_refused_on_changes, 1,
			    PRESTO_KML_STORE + 1);
	tcase_add_loop_test(tc, stored_only_on_create, 1,
			    PRESTO_KML_STORE + 1);
	tcase_add_loop_test(tc, recovery_damage_is_refused, 0, 34);
	tcase_add_test(tc, unused_segment);
	tcase_add_test(tc, segment_header);
	tcase_add_test(tc, run_of_records);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(kml_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
