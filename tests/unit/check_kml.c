// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of the user-space KML decoder (protocol/kml.c): records built
 * here the way presto builds them decode to what was put in, and every
 * kind of damage is refused with KML_BAD (or seen as the end).
 */
#include "kml.h"

#include <check.h>
#include <endian.h>
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
		h->reserved = htole32(1);
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
	}
	if (reseal)
		seal(buf);
	ck_assert_int_eq(decode(avail, seq, &r, &why), KML_BAD);
	ck_assert_ptr_nonnull(why);
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
	tcase_add_test(tc, end_of_records);
	tcase_add_loop_test(tc, damage_is_refused, 0, 18);
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
