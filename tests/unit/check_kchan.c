// SPDX-License-Identifier: MIT
/*
 * Unit tests of the decoding of what presto sends lento (lento/kchan.h,
 * protocol/KERNEL.md) and of the flags xattr. Messages are built with
 * libnl as the kernel builds them.
 *
 *   unit-kchan [--write-corpus DIR]   the fuzzer's seeds (kchan_fuzz.c)
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <netlink/attr.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>

#include "kchan.h"

#define FAM	0x1d	/* the family id the tests pretend presto has */

/* Not ck_assert: --write-corpus runs outside any test. */
#define MUST(cond) do {							\
	if (!(cond)) {							\
		fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond);	\
		abort();						\
	}								\
} while (0)

/* A message being built, as presto would send it. */
static struct nl_msg *msg_new(uint8_t cmd, uint8_t version, uint32_t seq)
{
	struct nl_msg *m = nlmsg_alloc();

	MUST(m);
	MUST(genlmsg_put(m, 0, seq, FAM, 0, 0, cmd, version));
	return m;
}

static void put_handle(struct nl_msg *m, int type, uint64_t ino, uint32_t gen,
		       uint32_t pad)
{
	struct presto_handle h = { .ino = ino, .gen = gen, .pad = pad };

	MUST(nla_put(m, type, sizeof(h), &h) == 0);
}

static struct nl_msg *upcall(const char *fs, uint64_t req, uint32_t op)
{
	struct nl_msg *m = msg_new(PRESTO_CMD_UPCALL, PRESTO_GENL_VERSION, 0);

	MUST(nla_put_string(m, PRESTO_A_FILESET, fs) == 0);
	MUST(nla_put_u64(m, PRESTO_A_REQ, req) == 0);
	MUST(nla_put_u32(m, PRESTO_A_OP, op) == 0);
	put_handle(m, PRESTO_A_HANDLE, 12, 34, 0);
	return m;
}

/* Decode a built message (and free it). */
static int decode(struct nl_msg *nm, struct kmsg *m, const char **why)
{
	struct nlmsghdr *h = nlmsg_hdr(nm);
	void *copy = malloc(NLMSG_ALIGN(h->nlmsg_len) + 8);
	int err;

	memcpy(copy, h, h->nlmsg_len);
	err = kchan_decode(copy, h->nlmsg_len, FAM, m, why);
	free(copy);
	nlmsg_free(nm);
	return err;
}

START_TEST(upcall_decodes)
{
	struct kmsg m;
	const char *why;

	ck_assert_int_eq(decode(upcall("vol-1", 77, PRESTO_OP_FETCH_FILE),
				&m, &why), 0);
	ck_assert_int_eq(m.kind, KM_GENL);
	ck_assert_int_eq(m.cmd, PRESTO_CMD_UPCALL);
	ck_assert_str_eq(m.fileset, "vol-1");
	ck_assert_uint_eq(m.req, 77);
	ck_assert_uint_eq(m.op, PRESTO_OP_FETCH_FILE);
	ck_assert_uint_eq(m.handle.ino, 12);
	ck_assert_uint_eq(m.handle.gen, 34);
	ck_assert_uint_eq(m.have, KA(FILESET) | KA(REQ) | KA(OP) | KA(HANDLE));
}
END_TEST

START_TEST(upcall_missing_or_extra)
{
	struct nl_msg *nm = msg_new(PRESTO_CMD_UPCALL, PRESTO_GENL_VERSION, 0);
	struct kmsg m;
	const char *why;

	/* No HANDLE. */
	nla_put_string(nm, PRESTO_A_FILESET, "v");
	nla_put_u64(nm, PRESTO_A_REQ, 1);
	nla_put_u32(nm, PRESTO_A_OP, 1);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	ck_assert_ptr_nonnull(why);
	/* An ERRNO too many. */
	nm = upcall("v", 1, 1);
	nla_put_u32(nm, PRESTO_A_ERRNO, 5);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
}
END_TEST

START_TEST(wrong_lengths_and_values)
{
	struct nl_msg *nm;
	struct kmsg m;
	const char *why;

	/* OP as a u64. */
	nm = msg_new(PRESTO_CMD_UPCALL, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "v");
	nla_put_u64(nm, PRESTO_A_REQ, 1);
	nla_put_u64(nm, PRESTO_A_OP, 1);
	put_handle(nm, PRESTO_A_HANDLE, 1, 1, 0);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	/* A handle of 12 bytes. */
	nm = msg_new(PRESTO_CMD_UPCALL, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "v");
	nla_put_u64(nm, PRESTO_A_REQ, 1);
	nla_put_u32(nm, PRESTO_A_OP, 1);
	nla_put(nm, PRESTO_A_HANDLE, 12, "0123456789ab");
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	/* A handle with pad. */
	nm = msg_new(PRESTO_CMD_UPCALL, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "v");
	nla_put_u64(nm, PRESTO_A_REQ, 1);
	nla_put_u32(nm, PRESTO_A_OP, 1);
	put_handle(nm, PRESTO_A_HANDLE, 1, 1, 9);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	/* OPs out of range. */
	ck_assert_int_eq(decode(upcall("v", 1, 0), &m, &why), -EBADMSG);
	ck_assert_int_eq(decode(upcall("v", 1, 5), &m, &why), -EBADMSG);
	ck_assert_int_eq(decode(upcall("v", 1, 3), &m, &why), 0);
	/* The permit's upcall. */
	ck_assert_int_eq(decode(upcall("v", 1, PRESTO_OP_PERMIT), &m, &why), 0);
	ck_assert_uint_eq(m.op, PRESTO_OP_PERMIT);
}
END_TEST

START_TEST(fileset_names)
{
	static const char *const bad[] = {
		".hidden", "a/b", "a b", "", "x\xff",
		"0123456789012345678901234567890123456789012345678901234567890123",
	};
	struct nl_msg *nm;
	struct kmsg m;
	const char *why;

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		ck_assert_msg(decode(upcall(bad[i], 1, 1), &m, &why) ==
			      -EBADMSG, "%s", bad[i]);
	ck_assert_int_eq(decode(upcall("A.b_c-9", 1, 1), &m, &why), 0);
	/* 63 bytes is the most. */
	ck_assert_int_eq(decode(upcall("012345678901234567890123456789012345"
				       "678901234567890123456789012", 1, 1),
				&m, &why), 0);
	/* Not NUL-ended. */
	nm = msg_new(PRESTO_CMD_UNMOUNTED, PRESTO_GENL_VERSION, 0);
	nla_put(nm, PRESTO_A_FILESET, 3, "abc");
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	/* A NUL inside. */
	nm = msg_new(PRESTO_CMD_UNMOUNTED, PRESTO_GENL_VERSION, 0);
	nla_put(nm, PRESTO_A_FILESET, 4, "a\0b");
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
}
END_TEST

START_TEST(duplicates_trailing_unknown)
{
	struct nl_msg *nm;
	struct kmsg m;
	const char *why;
	struct nlmsghdr *h;
	uint8_t *buf;

	nm = msg_new(PRESTO_CMD_UNMOUNTED, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "v");
	nla_put_string(nm, PRESTO_A_FILESET, "w");
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	/* PAD is skipped, even twice (nla_put_u64_64bit's alignment). */
	nm = msg_new(PRESTO_CMD_UNMOUNTED, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "v");
	nla_put(nm, PRESTO_A_PAD, 0, NULL);
	nla_put(nm, PRESTO_A_PAD, 0, NULL);
	ck_assert_int_eq(decode(nm, &m, &why), 0);
	/* Type 0 is refused. */
	nm = msg_new(PRESTO_CMD_UNMOUNTED, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "v");
	nla_put_u32(nm, 0, 0);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	/* A later presto's attribute is skipped. */
	nm = msg_new(PRESTO_CMD_UNMOUNTED, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "v");
	nla_put_u32(nm, PRESTO_A_MAX + 3, 0);
	ck_assert_int_eq(decode(nm, &m, &why), 0);
	ck_assert_str_eq(m.fileset, "v");
	/* Two bytes trailing the attributes (counted in nlmsg_len). */
	nm = msg_new(PRESTO_CMD_UNMOUNTED, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "v");
	h = nlmsg_hdr(nm);
	buf = malloc(h->nlmsg_len + 8);
	memcpy(buf, h, h->nlmsg_len);
	memset(buf + h->nlmsg_len, 0, 2);
	((struct nlmsghdr *)buf)->nlmsg_len += 2;
	ck_assert_int_eq(kchan_decode(buf, h->nlmsg_len + 2, FAM, &m, &why),
			 -EBADMSG);
	/* A length that is not the buffer's. */
	ck_assert_int_eq(kchan_decode(buf, h->nlmsg_len, FAM, &m, &why),
			 -EBADMSG);
	free(buf);
	nlmsg_free(nm);
}
END_TEST

START_TEST(versions_commands_families)
{
	struct nl_msg *nm;
	struct kmsg m;
	const char *why;

	nm = msg_new(PRESTO_CMD_UNMOUNTED, PRESTO_GENL_VERSION + 1, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "v");
	ck_assert_int_eq(decode(nm, &m, &why), -EPROTO);
	/* Commands only lento sends. */
	nm = msg_new(PRESTO_CMD_REPLY, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "v");
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	nm = msg_new(0, PRESTO_GENL_VERSION, 0);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	/* A later one: skipped. */
	nm = msg_new(PRESTO_CMD_MAX + 1, PRESTO_GENL_VERSION, 0);
	ck_assert_int_eq(decode(nm, &m, &why), 0);
	ck_assert_int_eq(m.kind, KM_OTHER);
	/* Another family: not presto's. */
	nm = nlmsg_alloc();
	genlmsg_put(nm, 0, 0, FAM + 1, 0, 0, PRESTO_CMD_UPCALL, 1);
	ck_assert_int_eq(decode(nm, &m, &why), 0);
	ck_assert_int_eq(m.kind, KM_OTHER);
}
END_TEST

static struct nl_msg *kml(const char *fs, uint64_t durable, uint64_t acked)
{
	struct nl_msg *m = msg_new(PRESTO_CMD_KML, PRESTO_GENL_VERSION, 0);

	MUST(nla_put_string(m, PRESTO_A_FILESET, fs) == 0);
	MUST(nla_put_u64(m, PRESTO_A_KML_DURABLE, durable) == 0);
	MUST(nla_put_u64(m, PRESTO_A_KML_ACKED, acked) == 0);
	return m;
}

START_TEST(kml_notices)
{
	struct nl_msg *nm;
	struct kmsg m;
	const char *why;

	ck_assert_int_eq(decode(kml("home", 70, 12), &m, &why), 0);
	ck_assert_int_eq(m.cmd, PRESTO_CMD_KML);
	ck_assert_uint_eq(m.kml_durable, 70);
	ck_assert_uint_eq(m.kml_acked, 12);
	ck_assert_int_eq(decode(kml("home", 0, 0), &m, &why), 0);
	/* Acknowledged past durable: impossible. */
	ck_assert_int_eq(decode(kml("home", 5, 6), &m, &why), -EBADMSG);
	ck_assert_ptr_nonnull(why);
	/* One without the other. */
	nm = msg_new(PRESTO_CMD_KML, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "home");
	nla_put_u64(nm, PRESTO_A_KML_DURABLE, 5);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	/* A u32 position. */
	nm = msg_new(PRESTO_CMD_KML, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "home");
	nla_put_u32(nm, PRESTO_A_KML_DURABLE, 5);
	nla_put_u64(nm, PRESTO_A_KML_ACKED, 5);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	/* An answer: its request, an error, the permit. */
	nm = kml("home", 5, 5);
	nla_put_u64(nm, PRESTO_A_REQ, 77);
	nla_put_u32(nm, PRESTO_A_ERRNO, EIO);
	nla_put_u8(nm, PRESTO_A_PERMIT, 0);
	ck_assert_int_eq(decode(nm, &m, &why), 0);
	ck_assert_uint_eq(m.req, 77);
	ck_assert_uint_eq(m.errno_, EIO);
	ck_assert(m.have & KA(PERMIT));
	nm = kml("home", 5, 5);
	nla_put_u32(nm, PRESTO_A_ERRNO, 0);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	nm = kml("home", 5, 5);
	nla_put_u32(nm, PRESTO_A_ERRNO, 5000);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	/* What KML may not carry. */
	nm = kml("home", 5, 5);
	put_handle(nm, PRESTO_A_HANDLE, 1, 1, 0);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	/* Commands only lento sends. */
	nm = msg_new(PRESTO_CMD_KML_ACK, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "home");
	nla_put_u64(nm, PRESTO_A_SEQ, 5);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	nm = msg_new(PRESTO_CMD_PERMIT, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "home");
	nla_put_u8(nm, PRESTO_A_PERMIT, 0);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
}
END_TEST

/* REGISTER's answer and MOUNTED say where the log stands, and the permit. */
static struct nl_msg *mounted_log(uint8_t cmd, uint64_t durable,
				  uint64_t acked, uint8_t permit)
{
	struct nl_msg *nm = msg_new(cmd, PRESTO_GENL_VERSION, 4);

	nla_put_string(nm, PRESTO_A_FILESET, "home");
	nla_put_u8(nm, PRESTO_A_MOUNTED, 1);
	put_handle(nm, PRESTO_A_ROOT, 2, 0, 0);
	nla_put_u32(nm, PRESTO_A_TIMEOUT_MS, 30000);
	nla_put_u64(nm, PRESTO_A_KML_DURABLE, durable);
	nla_put_u64(nm, PRESTO_A_KML_ACKED, acked);
	nla_put_u8(nm, PRESTO_A_PERMIT, permit);
	return nm;
}

START_TEST(register_log_permit)
{
	struct kmsg m;
	const char *why;

	ck_assert_int_eq(decode(mounted_log(PRESTO_CMD_REGISTER, 9, 3, 1), &m,
				&why), 0);
	ck_assert_uint_eq(m.kml_durable, 9);
	ck_assert_uint_eq(m.kml_acked, 3);
	ck_assert_uint_eq(m.permit, 1);
	ck_assert(m.have & KA(PERMIT));
	ck_assert_int_eq(decode(mounted_log(PRESTO_CMD_MOUNTED, 9, 9, 0), &m,
				&why), 0);
	ck_assert_uint_eq(m.permit, 0);
	ck_assert_int_eq(decode(mounted_log(PRESTO_CMD_MOUNTED, 9, 9, 2), &m,
				&why), -EBADMSG);
	ck_assert_int_eq(decode(mounted_log(PRESTO_CMD_REGISTER, 1, 2, 0), &m,
				&why), -EBADMSG);
}
END_TEST

/* An ack: an NLMSG_ERROR naming the request by its sequence. */
static size_t ack(uint8_t *buf, uint32_t seq, int error)
{
	struct nlmsghdr h = { .nlmsg_len = NLMSG_HDRLEN +
			      sizeof(struct nlmsgerr),
			      .nlmsg_type = NLMSG_ERROR, .nlmsg_seq = seq };
	struct nlmsgerr e = { .error = error };

	e.msg.nlmsg_seq = seq;
	e.msg.nlmsg_type = FAM;
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + NLMSG_HDRLEN, &e, sizeof(e));
	return h.nlmsg_len;
}

START_TEST(acks)
{
	uint8_t *buf = malloc(256);
	struct kmsg m;
	const char *why;
	size_t n = ack(buf, 4242, -EBUSY);

	ck_assert_int_eq(kchan_decode(buf, n, FAM, &m, &why), 0);
	ck_assert_int_eq(m.kind, KM_ACK);
	ck_assert_int_eq(m.err, -EBUSY);
	ck_assert_uint_eq(m.seq, 4242);
	n = ack(buf, 1, 0);
	ck_assert_int_eq(kchan_decode(buf, n, FAM, &m, &why), 0);
	ck_assert_int_eq(m.err, 0);
	/* An error that is no errno, and a short ack. */
	n = ack(buf, 1, 5);
	ck_assert_int_eq(kchan_decode(buf, n, FAM, &m, &why), -EBADMSG);
	n = ack(buf, 1, -100000);
	ck_assert_int_eq(kchan_decode(buf, n, FAM, &m, &why), -EBADMSG);
	((struct nlmsghdr *)buf)->nlmsg_len = NLMSG_HDRLEN + 4;
	ck_assert_int_eq(kchan_decode(buf, NLMSG_HDRLEN + 4, FAM, &m, &why),
			 -EBADMSG);
	free(buf);
}
END_TEST

START_TEST(register_and_mounted)
{
	struct nl_msg *nm;
	struct kmsg m;
	const char *why;

	nm = msg_new(PRESTO_CMD_REGISTER, PRESTO_GENL_VERSION, 9);
	nla_put_string(nm, PRESTO_A_FILESET, "home");
	nla_put_u8(nm, PRESTO_A_MOUNTED, 0);
	ck_assert_int_eq(decode(nm, &m, &why), 0);
	ck_assert_uint_eq(m.mounted, 0);
	ck_assert_uint_eq(m.seq, 9);
	/* Mounted needs its root and timeout. */
	nm = msg_new(PRESTO_CMD_REGISTER, PRESTO_GENL_VERSION, 9);
	nla_put_string(nm, PRESTO_A_FILESET, "home");
	nla_put_u8(nm, PRESTO_A_MOUNTED, 1);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	nm = msg_new(PRESTO_CMD_REGISTER, PRESTO_GENL_VERSION, 9);
	nla_put_string(nm, PRESTO_A_FILESET, "home");
	nla_put_u8(nm, PRESTO_A_MOUNTED, 1);
	put_handle(nm, PRESTO_A_ROOT, 2, 0, 0);
	nla_put_u32(nm, PRESTO_A_TIMEOUT_MS, 30000);
	ck_assert_int_eq(decode(nm, &m, &why), 0);
	ck_assert_uint_eq(m.root.ino, 2);
	ck_assert_uint_eq(m.timeout_ms, 30000);
	/* MOUNTED 2 is no boolean. */
	nm = msg_new(PRESTO_CMD_REGISTER, PRESTO_GENL_VERSION, 9);
	nla_put_string(nm, PRESTO_A_FILESET, "home");
	nla_put_u8(nm, PRESTO_A_MOUNTED, 2);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	/* The notice. */
	nm = msg_new(PRESTO_CMD_MOUNTED, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "home");
	put_handle(nm, PRESTO_A_ROOT, 5, 6, 0);
	nla_put_u32(nm, PRESTO_A_TIMEOUT_MS, 1000);
	ck_assert_int_eq(decode(nm, &m, &why), 0);
	ck_assert_uint_eq(m.root.gen, 6);
	nm = msg_new(PRESTO_CMD_MOUNTED, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "home");
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	/* The notices may say MOUNTED too (presto does), if they agree. */
	nm = msg_new(PRESTO_CMD_MOUNTED, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "home");
	nla_put_u8(nm, PRESTO_A_MOUNTED, 1);
	put_handle(nm, PRESTO_A_ROOT, 5, 6, 0);
	nla_put_u32(nm, PRESTO_A_TIMEOUT_MS, 1000);
	ck_assert_int_eq(decode(nm, &m, &why), 0);
	ck_assert_uint_eq(m.mounted, 1);
	nm = msg_new(PRESTO_CMD_MOUNTED, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "home");
	nla_put_u8(nm, PRESTO_A_MOUNTED, 0);
	put_handle(nm, PRESTO_A_ROOT, 5, 6, 0);
	nla_put_u32(nm, PRESTO_A_TIMEOUT_MS, 1000);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	nm = msg_new(PRESTO_CMD_UNMOUNTED, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "home");
	nla_put_u8(nm, PRESTO_A_MOUNTED, 0);
	ck_assert_int_eq(decode(nm, &m, &why), 0);
	nm = msg_new(PRESTO_CMD_UNMOUNTED, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "home");
	nla_put_u8(nm, PRESTO_A_MOUNTED, 1);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	/* Where the mount left its log: both ends, or neither. */
	nm = msg_new(PRESTO_CMD_UNMOUNTED, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "home");
	nla_put_u8(nm, PRESTO_A_MOUNTED, 0);
	nla_put_u64(nm, PRESTO_A_KML_DURABLE, 70);
	nla_put_u64(nm, PRESTO_A_KML_ACKED, 60);
	ck_assert_int_eq(decode(nm, &m, &why), 0);
	ck_assert(m.have & KA(KML_DURABLE));
	ck_assert_uint_eq(m.kml_durable, 70);
	ck_assert_uint_eq(m.kml_acked, 60);
	nm = msg_new(PRESTO_CMD_UNMOUNTED, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "home");
	nla_put_u64(nm, PRESTO_A_KML_DURABLE, 70);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	/* Not mounted, with a root. */
	nm = msg_new(PRESTO_CMD_REGISTER, PRESTO_GENL_VERSION, 9);
	nla_put_string(nm, PRESTO_A_FILESET, "home");
	nla_put_u8(nm, PRESTO_A_MOUNTED, 0);
	put_handle(nm, PRESTO_A_ROOT, 2, 0, 0);
	nla_put_u32(nm, PRESTO_A_TIMEOUT_MS, 30000);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
}
END_TEST

START_TEST(stats_nested)
{
	struct nl_msg *nm = msg_new(PRESTO_CMD_STATS, PRESTO_GENL_VERSION, 3);
	struct nlattr *nest;
	struct kmsg m;
	const char *why;

	nla_put_string(nm, PRESTO_A_FILESET, "v");
	nla_put_u8(nm, PRESTO_A_MOUNTED, 1);
	put_handle(nm, PRESTO_A_ROOT, 2, 0, 0);
	nla_put_u32(nm, PRESTO_A_TIMEOUT_MS, 30000);
	nest = nla_nest_start(nm, PRESTO_A_STAT);
	nla_put(nm, PRESTO_S_PAD, 0, NULL);
	nla_put_u64(nm, PRESTO_S_UPCALLS, 10);
	nla_put_u64(nm, PRESTO_S_FETCH_DIR, 4);
	nla_put_u64(nm, PRESTO_S_PENDING, 1);
	nla_put(nm, PRESTO_S_PAD, 0, NULL);	/* before a u64, again */
	nla_put_u64(nm, PRESTO_S_PERMIT, 2);
	nla_put_u64(nm, PRESTO_S_PERMIT_HELD, 1);
	nla_put_u64(nm, PRESTO_S_MAX + 2, 99);	/* a later counter */
	nla_nest_end(nm, nest);
	/* Where the log stands, as in REGISTER's answer. */
	nla_put_u64(nm, PRESTO_A_KML_DURABLE, 9);
	nla_put_u64(nm, PRESTO_A_KML_ACKED, 8);
	nla_put_u8(nm, PRESTO_A_PERMIT, 1);
	ck_assert_int_eq(decode(nm, &m, &why), 0);
	ck_assert_uint_eq(m.kml_durable, 9);
	ck_assert_uint_eq(m.stat[PRESTO_S_UPCALLS], 10);
	ck_assert_uint_eq(m.stat[PRESTO_S_FETCH_DIR], 4);
	ck_assert_uint_eq(m.stat[PRESTO_S_PENDING], 1);
	ck_assert_uint_eq(m.stat[PRESTO_S_PERMIT], 2);
	ck_assert_uint_eq(m.stat[PRESTO_S_PERMIT_HELD], 1);
	ck_assert_uint_eq(m.stat_have, (1u << PRESTO_S_UPCALLS) |
			  (1u << PRESTO_S_FETCH_DIR) | (1u << PRESTO_S_PENDING) |
			  (1u << PRESTO_S_PERMIT) |
			  (1u << PRESTO_S_PERMIT_HELD));
	/* A counter of 4 bytes. */
	nm = msg_new(PRESTO_CMD_STATS, PRESTO_GENL_VERSION, 3);
	nla_put_string(nm, PRESTO_A_FILESET, "v");
	nest = nla_nest_start(nm, PRESTO_A_STAT);
	nla_put_u32(nm, PRESTO_S_UPCALLS, 10);
	nla_nest_end(nm, nest);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	/* Twice. */
	nm = msg_new(PRESTO_CMD_STATS, PRESTO_GENL_VERSION, 3);
	nla_put_string(nm, PRESTO_A_FILESET, "v");
	nest = nla_nest_start(nm, PRESTO_A_STAT);
	nla_put_u64(nm, PRESTO_S_UPCALLS, 10);
	nla_put_u64(nm, PRESTO_S_UPCALLS, 11);
	nla_nest_end(nm, nest);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
}
END_TEST

START_TEST(access_handles)
{
	struct presto_handle hs[3] = { { 1, 2, 0 }, { 3, 4, 0 }, { 5, 6, 0 } };
	struct presto_handle h;
	struct nl_msg *nm;
	struct kmsg m;
	const char *why;

	nm = msg_new(PRESTO_CMD_ACCESS, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "v");
	nla_put(nm, PRESTO_A_HANDLES, sizeof(hs), hs);
	ck_assert_int_eq(decode(nm, &m, &why), 0);
	/* m.handles pointed into the freed copy: count only. */
	ck_assert_uint_eq(m.nhandles, 3);
	nm = msg_new(PRESTO_CMD_ACCESS, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "v");
	nla_put(nm, PRESTO_A_HANDLES, sizeof(hs) - 4, hs);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	hs[1].pad = 1;
	nm = msg_new(PRESTO_CMD_ACCESS, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "v");
	nla_put(nm, PRESTO_A_HANDLES, sizeof(hs), hs);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	/* Read in place. */
	hs[1].pad = 0;
	nm = msg_new(PRESTO_CMD_ACCESS, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "v");
	nla_put(nm, PRESTO_A_HANDLES, sizeof(hs), hs);
	ck_assert_int_eq(kchan_decode(nlmsg_hdr(nm), nlmsg_hdr(nm)->nlmsg_len,
				      FAM, &m, &why), 0);
	kmsg_handle(&m, 2, &h);
	ck_assert_uint_eq(h.ino, 5);
	ck_assert_uint_eq(h.gen, 6);
	nlmsg_free(nm);
}
END_TEST

/* Every cut of a good message fails cleanly (ASan watches the reads). */
START_TEST(every_prefix)
{
	struct nl_msg *nm = upcall("volume", 5, 2);
	struct nlmsghdr *h = nlmsg_hdr(nm);
	uint32_t len = h->nlmsg_len;
	struct kmsg m;
	const char *why;

	for (uint32_t n = 0; n < len; n++) {
		uint8_t *buf = malloc(n + 8);

		memcpy(buf, h, n);
		if (n >= sizeof(struct nlmsghdr))
			((struct nlmsghdr *)buf)->nlmsg_len = n;
		ck_assert_int_ne(kchan_decode(buf, n, FAM, &m, &why), 0);
		free(buf);
	}
	nlmsg_free(nm);
}
END_TEST

START_TEST(datagrams)
{
	uint8_t *buf = malloc(4096);
	struct nl_msg *nm = upcall("a", 1, 1);
	struct nlmsghdr *h = nlmsg_hdr(nm);
	size_t len = 0, off = 0;
	struct kmsg m;
	const char *why;

	memcpy(buf, h, h->nlmsg_len);
	len = NLMSG_ALIGN(h->nlmsg_len);
	len += ack(buf + len, 7, -ESRCH);
	memcpy(buf + len, h, h->nlmsg_len);
	len += h->nlmsg_len;
	ck_assert_int_eq(kchan_next(buf, len, &off, FAM, &m, &why), 1);
	ck_assert_int_eq(m.kind, KM_GENL);
	ck_assert_int_eq(kchan_next(buf, len, &off, FAM, &m, &why), 1);
	ck_assert_int_eq(m.kind, KM_ACK);
	ck_assert_int_eq(m.err, -ESRCH);
	ck_assert_int_eq(kchan_next(buf, len, &off, FAM, &m, &why), 1);
	ck_assert_int_eq(kchan_next(buf, len, &off, FAM, &m, &why), 0);
	/* The last one cut short: an error, then the end. */
	off = 0;
	len -= 3;
	ck_assert_int_eq(kchan_next(buf, len, &off, FAM, &m, &why), 1);
	ck_assert_int_eq(kchan_next(buf, len, &off, FAM, &m, &why), 1);
	ck_assert_int_eq(kchan_next(buf, len, &off, FAM, &m, &why), -EBADMSG);
	ck_assert_int_eq(kchan_next(buf, len, &off, FAM, &m, &why), 0);
	nlmsg_free(nm);
	free(buf);
}
END_TEST

START_TEST(cb_xattr)
{
	uint8_t b[KCHAN_CB_LEN];
	uint32_t flags, nlink;
	uint64_t epoch;

	kchan_cb_encode(b, PRESTO_CB_ATTR | PRESTO_CB_DATA, 0x11223344,
			0x0102030405060708ull);
	/* The layout of struct presto_cb_xattr, little-endian. */
	ck_assert_uint_eq(sizeof(struct presto_cb_xattr), KCHAN_CB_LEN);
	ck_assert_uint_eq(b[0], PRESTO_CB_XATTR_VERSION);
	ck_assert_uint_eq(b[1], 3);
	ck_assert_uint_eq(b[4], 0x44);
	ck_assert_uint_eq(b[7], 0x11);
	ck_assert_uint_eq(b[8], 0x08);
	ck_assert_uint_eq(b[15], 0x01);
	ck_assert_int_eq(kchan_cb_decode(b, sizeof(b), &flags, &nlink, &epoch),
			 0);
	ck_assert_uint_eq(flags, 3);
	ck_assert_uint_eq(nlink, 0x11223344);
	ck_assert_uint_eq(epoch, 0x0102030405060708ull);
	/* Only the flags that exist are written. */
	kchan_cb_encode(b, 0xff, 0, 1);
	ck_assert_uint_eq(b[1], PRESTO_CB_ALL);
	ck_assert_int_eq(kchan_cb_decode(b, sizeof(b) - 1, &flags, NULL, &epoch),
			 -EINVAL);
	b[1] = 4;
	ck_assert_int_eq(kchan_cb_decode(b, sizeof(b), &flags, NULL, &epoch),
			 -EINVAL);
	b[1] = 1;
	b[0] = 2;
	ck_assert_int_eq(kchan_cb_decode(b, sizeof(b), &flags, NULL, &epoch),
			 -EINVAL);
	b[0] = 1;
	b[2] = 1;
	ck_assert_int_eq(kchan_cb_decode(b, sizeof(b), &flags, NULL, &epoch),
			 -EINVAL);
}
END_TEST

/* WATCHED: a directory lento broke has watchers; its handle only. */
static struct nl_msg *watched(const char *fs, uint64_t ino, uint32_t gen)
{
	struct nl_msg *nm = msg_new(PRESTO_CMD_WATCHED, PRESTO_GENL_VERSION, 0);

	nla_put_string(nm, PRESTO_A_FILESET, fs);
	put_handle(nm, PRESTO_A_HANDLE, ino, gen, 0);
	return nm;
}

START_TEST(watched_notices)
{
	struct nl_msg *nm;
	struct kmsg m;
	const char *why;

	ck_assert_int_eq(decode(watched("www", 99, 7), &m, &why), 0);
	ck_assert_int_eq(m.cmd, PRESTO_CMD_WATCHED);
	ck_assert_uint_eq(m.handle.ino, 99);
	ck_assert_uint_eq(m.handle.gen, 7);
	/* No handle; a handle with padding; more than it may carry. */
	nm = msg_new(PRESTO_CMD_WATCHED, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "www");
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	nm = msg_new(PRESTO_CMD_WATCHED, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "www");
	put_handle(nm, PRESTO_A_HANDLE, 1, 1, 3);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	nm = watched("www", 1, 1);
	nla_put_u32(nm, PRESTO_A_FLAGS, 1);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
	/* NOTIFY is lento's to send, never presto's. */
	nm = msg_new(PRESTO_CMD_NOTIFY, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "www");
	put_handle(nm, PRESTO_A_HANDLE, 1, 1, 0);
	nla_put_string(nm, PRESTO_A_NAME, "x");
	nla_put_u32(nm, PRESTO_A_EVENT, PRESTO_EV_CREATE);
	ck_assert_int_eq(decode(nm, &m, &why), -EBADMSG);
}
END_TEST

/* A message sent during a tick, after the tick read its clock, is not
 * overdue (the lento of before failed it at once: now - sent_ms wrapped). */
START_TEST(ack_overdue)
{
	ck_assert(!kchan_ack_overdue(1000, 999));
	ck_assert(!kchan_ack_overdue(1000, 1000));
	ck_assert(!kchan_ack_overdue(1000, 1000 + KCHAN_ACK_MS - 1));
	ck_assert(kchan_ack_overdue(1000, 1000 + KCHAN_ACK_MS));
	ck_assert(kchan_ack_overdue(0, UINT64_MAX / 2));
}
END_TEST

/* ---------------------------------------------------------- corpus */

static void write_one(const char *dir, const char *name, struct nl_msg *nm)
{
	char path[4096];
	struct nlmsghdr *h = nlmsg_hdr(nm);
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(h, 1, h->nlmsg_len, f) != h->nlmsg_len) {
		perror(path);
		exit(1);
	}
	fclose(f);
	nlmsg_free(nm);
}

static int write_corpus(const char *dir)
{
	struct presto_handle hs[2] = { { 1, 2, 0 }, { 3, 4, 0 } };
	struct nlattr *nest;
	struct nl_msg *nm;

	write_one(dir, "upcall-dir", upcall("www", 1, PRESTO_OP_FETCH_DIR));
	write_one(dir, "upcall-file", upcall("www", 2, PRESTO_OP_FETCH_FILE));
	write_one(dir, "upcall-attr", upcall("www", 3, PRESTO_OP_FETCH_ATTR));
	write_one(dir, "upcall-permit", upcall("www", 4, PRESTO_OP_PERMIT));
	write_one(dir, "kml", kml("www", 1234, 1000));
	nm = kml("www", 1300, 1000);
	nla_put_u64(nm, PRESTO_A_REQ, 3);
	nla_put_u8(nm, PRESTO_A_PERMIT, 0);
	write_one(dir, "kml-answer", nm);
	write_one(dir, "register-log", mounted_log(PRESTO_CMD_REGISTER, 77, 70,
						   1));
	nm = msg_new(PRESTO_CMD_REGISTER, PRESTO_GENL_VERSION, 5);
	nla_put_string(nm, PRESTO_A_FILESET, "www");
	nla_put_u8(nm, PRESTO_A_MOUNTED, 1);
	put_handle(nm, PRESTO_A_ROOT, 2, 0, 0);
	nla_put_u32(nm, PRESTO_A_TIMEOUT_MS, 30000);
	write_one(dir, "register", nm);
	nm = msg_new(PRESTO_CMD_MOUNTED, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "www");
	put_handle(nm, PRESTO_A_ROOT, 2, 0, 0);
	nla_put_u32(nm, PRESTO_A_TIMEOUT_MS, 30000);
	write_one(dir, "mounted", nm);
	nm = msg_new(PRESTO_CMD_UNMOUNTED, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "www");
	write_one(dir, "unmounted", nm);
	nm = msg_new(PRESTO_CMD_ACCESS, PRESTO_GENL_VERSION, 0);
	nla_put_string(nm, PRESTO_A_FILESET, "www");
	nla_put(nm, PRESTO_A_HANDLES, sizeof(hs), hs);
	write_one(dir, "access", nm);
	nm = msg_new(PRESTO_CMD_STATS, PRESTO_GENL_VERSION, 7);
	nla_put_string(nm, PRESTO_A_FILESET, "www");
	nest = nla_nest_start(nm, PRESTO_A_STAT);
	for (int i = PRESTO_S_UPCALLS; i <= PRESTO_S_MAX; i++)
		if (i != PRESTO_S_PAD)
			nla_put_u64(nm, i, (uint64_t)i * 3);
	nla_nest_end(nm, nest);
	write_one(dir, "stats", nm);
	write_one(dir, "watched", watched("www", 12, 3));
	return 0;
}

static Suite *kchan_suite(void)
{
	Suite *s = suite_create("kchan");
	TCase *tc = tcase_create("decode");

	tcase_add_test(tc, upcall_decodes);
	tcase_add_test(tc, upcall_missing_or_extra);
	tcase_add_test(tc, wrong_lengths_and_values);
	tcase_add_test(tc, fileset_names);
	tcase_add_test(tc, duplicates_trailing_unknown);
	tcase_add_test(tc, versions_commands_families);
	tcase_add_test(tc, acks);
	tcase_add_test(tc, register_and_mounted);
	tcase_add_test(tc, stats_nested);
	tcase_add_test(tc, kml_notices);
	tcase_add_test(tc, register_log_permit);
	tcase_add_test(tc, access_handles);
	tcase_add_test(tc, watched_notices);
	tcase_add_test(tc, every_prefix);
	tcase_add_test(tc, datagrams);
	suite_add_tcase(s, tc);
	tc = tcase_create("acks_due");
	tcase_add_test(tc, ack_overdue);
	suite_add_tcase(s, tc);
	tc = tcase_create("xattr");
	tcase_add_test(tc, cb_xattr);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	SRunner *sr;
	int failed;

	if (argc == 3 && !strcmp(argv[1], "--write-corpus"))
		return write_corpus(argv[2]);
	if (argc != 1) {
		fprintf(stderr, "usage: unit-kchan [--write-corpus DIR]\n");
		return 2;
	}
	sr = srunner_create(kchan_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
