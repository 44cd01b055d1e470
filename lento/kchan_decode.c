// SPDX-License-Identifier: MIT
/*
 * Decoding what presto sends (kchan.h, protocol/KERNEL.md): pure
 * functions of the bytes, kept apart from the channel so that the unit
 * tests and the fuzzer (protocol/fuzz/kchan_fuzz.c) link only this.
 *
 * Strict where it matters: the netlink and genetlink headers are
 * bounds-checked, every attribute presto's version 1 defines is checked
 * against one policy (libnl's nla_parse with it, then the exact lengths
 * and values of KERNEL.md's table), attributes may not repeat, nothing
 * may trail them, and each command must carry exactly the attributes it
 * is specified with. An attribute type above PRESTO_A_MAX, or a command
 * above PRESTO_CMD_MAX, is skipped: KERNEL.md lets a later presto add
 * them at the end without a new version, and lento must keep working.
 * PAD attributes (nla_put_u64_64bit's alignment, on machines that need
 * it) are skipped wherever they are.
 *
 * MOUNTED (the u8) may come with every message that says whether the
 * fileset is mounted -- REGISTER's and STATS' answers, the MOUNTED and
 * UNMOUNTED notices -- and must agree with them; mounted, ROOT and
 * TIMEOUT_MS must be there.
 */
#include "kchan.h"

#include <errno.h>
#include <string.h>

#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>

/* ------------------------------------------------------------- decoding */

static const struct nla_policy kpolicy[PRESTO_A_MAX + 1] = {
	[PRESTO_A_FILESET] = { .type = NLA_STRING, .minlen = 2,
			       .maxlen = PRESTO_FILESET_MAX + 1 },
	[PRESTO_A_REQ] = { .type = NLA_U64 },
	[PRESTO_A_OP] = { .type = NLA_U32 },
	[PRESTO_A_HANDLE] = { .type = NLA_UNSPEC,
			      .minlen = sizeof(struct presto_handle),
			      .maxlen = sizeof(struct presto_handle) },
	[PRESTO_A_ERRNO] = { .type = NLA_U32 },
	[PRESTO_A_FLAGS] = { .type = NLA_U32 },
	[PRESTO_A_EPOCH] = { .type = NLA_U64 },
	[PRESTO_A_ROOT] = { .type = NLA_UNSPEC,
			    .minlen = sizeof(struct presto_handle),
			    .maxlen = sizeof(struct presto_handle) },
	[PRESTO_A_TIMEOUT_MS] = { .type = NLA_U32 },
	[PRESTO_A_MOUNTED] = { .type = NLA_U8 },
	[PRESTO_A_STAT] = { .type = NLA_NESTED },
	[PRESTO_A_HANDLES] = { .type = NLA_UNSPEC,
			       .maxlen = KCHAN_HANDLES_MAX *
					 sizeof(struct presto_handle) },
	[PRESTO_A_SEQ] = { .type = NLA_U64 },
	[PRESTO_A_KML_DURABLE] = { .type = NLA_U64 },
	[PRESTO_A_KML_ACKED] = { .type = NLA_U64 },
	[PRESTO_A_PERMIT] = { .type = NLA_U8 },
};

/* The exact payload length of each attribute (0: variable). */
static const uint16_t kexact[PRESTO_A_MAX + 1] = {
	[PRESTO_A_REQ] = 8,
	[PRESTO_A_OP] = 4,
	[PRESTO_A_HANDLE] = sizeof(struct presto_handle),
	[PRESTO_A_ERRNO] = 4,
	[PRESTO_A_FLAGS] = 4,
	[PRESTO_A_EPOCH] = 8,
	[PRESTO_A_ROOT] = sizeof(struct presto_handle),
	[PRESTO_A_TIMEOUT_MS] = 4,
	[PRESTO_A_MOUNTED] = 1,
	[PRESTO_A_SEQ] = 8,
	[PRESTO_A_KML_DURABLE] = 8,
	[PRESTO_A_KML_ACKED] = 8,
	[PRESTO_A_PERMIT] = 1,
};

static const struct nla_policy spolicy[PRESTO_S_MAX + 1] = {
	[PRESTO_S_UPCALLS ... PRESTO_S_REGISTERED] = { .type = NLA_U64 },
	[PRESTO_S_PERMIT ... PRESTO_S_WATCHED] = { .type = NLA_U64 },
};

/* Where the journal stands and whether presto holds the permit. */
#define KA_LOG	(KA(KML_DURABLE) | KA(KML_ACKED) | KA(PERMIT))

/* What each command presto sends must and may carry. */
struct kshape {
	uint32_t must, may;
};

static const struct kshape kshapes[PRESTO_CMD_MAX + 1] = {
	[PRESTO_CMD_REGISTER] = { KA(FILESET) | KA(MOUNTED),
				  KA(ROOT) | KA(TIMEOUT_MS) | KA_LOG },
	[PRESTO_CMD_UPCALL] = { KA(FILESET) | KA(REQ) | KA(OP) | KA(HANDLE),
				0 },
	[PRESTO_CMD_MOUNTED] = { KA(FILESET) | KA(ROOT) | KA(TIMEOUT_MS),
				 KA(MOUNTED) | KA_LOG },
	[PRESTO_CMD_UNMOUNTED] = { KA(FILESET), KA(MOUNTED) | KA_LOG },
	[PRESTO_CMD_ACCESS] = { KA(FILESET) | KA(HANDLES), 0 },
	[PRESTO_CMD_STATS] = { KA(FILESET) | KA(STAT),
			       KA(MOUNTED) | KA(ROOT) | KA(TIMEOUT_MS) |
			       KA_LOG },
	/* An answer (to KML_SYNC, PERMIT 0) names its REQ, and ERRNO. */
	[PRESTO_CMD_KML] = { KA(FILESET) | KA(KML_DURABLE) | KA(KML_ACKED),
			     KA(REQ) | KA(ERRNO) | KA(PERMIT) },
	[PRESTO_CMD_WATCHED] = { KA(FILESET) | KA(HANDLE), 0 },
};

static const char *const cmd_names[PRESTO_CMD_MAX + 1] = {
	[PRESTO_CMD_UNSPEC] = "UNSPEC",
	[PRESTO_CMD_REGISTER] = "REGISTER",
	[PRESTO_CMD_UNREGISTER] = "UNREGISTER",
	[PRESTO_CMD_SET_EPOCH] = "SET_EPOCH",
	[PRESTO_CMD_UPCALL] = "UPCALL",
	[PRESTO_CMD_REPLY] = "REPLY",
	[PRESTO_CMD_PROGRESS] = "PROGRESS",
	[PRESTO_CMD_BREAK] = "BREAK",
	[PRESTO_CMD_SET_FLAGS] = "SET_FLAGS",
	[PRESTO_CMD_PURGE] = "PURGE",
	[PRESTO_CMD_STATS] = "STATS",
	[PRESTO_CMD_MOUNTED] = "MOUNTED",
	[PRESTO_CMD_UNMOUNTED] = "UNMOUNTED",
	[PRESTO_CMD_ACCESS] = "ACCESS",
	[PRESTO_CMD_KML] = "KML",
	[PRESTO_CMD_KML_ACK] = "KML_ACK",
	[PRESTO_CMD_KML_SYNC] = "KML_SYNC",
	[PRESTO_CMD_PERMIT] = "PERMIT",
	[PRESTO_CMD_WATCHED] = "WATCHED",
	[PRESTO_CMD_NOTIFY] = "NOTIFY",
};

const char *kchan_cmd_name(unsigned int cmd)
{
	return cmd <= PRESTO_CMD_MAX ? cmd_names[cmd] : "?";
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static uint32_t get_u32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static int handle_get(const struct nlattr *a, struct presto_handle *h,
		      const char **why)
{
	memcpy(h, nla_data(a), sizeof(*h));
	if (h->pad) {
		*why = "a handle whose pad is not zero";
		return -EBADMSG;
	}
	return 0;
}

/* KERNEL.md: 1 to 63 bytes of letters, digits, '.', '_', '-', no '.' first. */
bool kchan_fileset_ok(const char *s, size_t len)
{
	if (!len || len > PRESTO_FILESET_MAX || s[0] == '.')
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-'))
			return false;
	}
	return true;
}

/*
 * The attributes in [p, p + len): no type 0, none twice (but PAD),
 * nothing trailing. Types above @max and PAD are skipped (see the top).
 * *seen: bits.
 */
static int attrs_strict(const uint8_t *p, size_t len, int max, int pad,
			uint32_t *seen, const char **why)
{
	*seen = 0;
	while (len) {
		struct nlattr a;
		int type;

		if (len < NLA_HDRLEN) {
			*why = "bytes trailing the attributes";
			return -EBADMSG;
		}
		memcpy(&a, p, sizeof(a));
		if (a.nla_len < NLA_HDRLEN || a.nla_len > len) {
			*why = "an attribute longer than its message";
			return -EBADMSG;
		}
		type = a.nla_type & NLA_TYPE_MASK;
		if (type == 0) {
			*why = "an attribute of type 0";
			return -EBADMSG;
		}
		if (type <= max && type != pad) {
			if (*seen & (1u << type)) {
				*why = "an attribute twice";
				return -EBADMSG;
			}
			*seen |= 1u << type;
		}
		if ((size_t)NLA_ALIGN(a.nla_len) >= len)
			break;
		p += NLA_ALIGN(a.nla_len);
		len -= NLA_ALIGN(a.nla_len);
	}
	return 0;
}

static int decode_stats(struct nlattr *a, struct kmsg *m, const char **why)
{
	struct nlattr *tb[PRESTO_S_MAX + 1];
	uint32_t seen;
	int err = attrs_strict(nla_data(a), (size_t)nla_len(a), PRESTO_S_MAX,
			       PRESTO_S_PAD, &seen, why);

	if (err)
		return err;
	if (nla_parse_nested(tb, PRESTO_S_MAX, a,
			     (struct nla_policy *)spolicy)) {
		*why = "STAT: a counter outside its policy";
		return -EBADMSG;
	}
	for (int i = 1; i <= PRESTO_S_MAX; i++) {
		if (i == PRESTO_S_PAD || !tb[i])
			continue;
		if (nla_len(tb[i]) != 8) {
			*why = "STAT: a counter not 8 bytes long";
			return -EBADMSG;
		}
		m->stat[i] = get_u64(nla_data(tb[i]));
		m->stat_have |= 1u << i;
	}
	return 0;
}

/* The journal's two positions, an answer's errno and the permit. */
static int decode_log(struct nlattr **tb, struct kmsg *m, const char **why)
{
	if (tb[PRESTO_A_KML_DURABLE])
		m->kml_durable = get_u64(nla_data(tb[PRESTO_A_KML_DURABLE]));
	if (tb[PRESTO_A_KML_ACKED])
		m->kml_acked = get_u64(nla_data(tb[PRESTO_A_KML_ACKED]));
	/* Only what is durable is ever acknowledged. */
	if (m->kml_acked > m->kml_durable) {
		*why = "KML_ACKED past KML_DURABLE";
		return -EBADMSG;
	}
	if (!!tb[PRESTO_A_KML_DURABLE] != !!tb[PRESTO_A_KML_ACKED]) {
		*why = "KML_DURABLE without KML_ACKED, or the reverse";
		return -EBADMSG;
	}
	if (tb[PRESTO_A_ERRNO]) {
		m->errno_ = get_u32(nla_data(tb[PRESTO_A_ERRNO]));
		if (!m->errno_ || m->errno_ > 4095) {
			*why = "ERRNO: not an errno";
			return -EBADMSG;
		}
	}
	if (tb[PRESTO_A_PERMIT]) {
		m->permit = *(const uint8_t *)nla_data(tb[PRESTO_A_PERMIT]);
		if (m->permit > 1) {
			*why = "PERMIT: neither 0 nor 1";
			return -EBADMSG;
		}
	}
	return 0;
}

static int decode_genl(const struct nlmsghdr *h, size_t len, struct kmsg *m,
		       const char **why)
{
	const uint8_t *body = (const uint8_t *)h + NLMSG_HDRLEN;
	struct nlattr *tb[PRESTO_A_MAX + 1];
	struct genlmsghdr g;
	const struct kshape *sh;
	uint32_t seen;
	size_t alen;
	int err;

	if (len < NLMSG_HDRLEN + GENL_HDRLEN) {
		*why = "a generic netlink message without its header";
		return -EBADMSG;
	}
	memcpy(&g, body, sizeof(g));
	m->kind = KM_GENL;
	m->cmd = g.cmd;
	m->version = g.version;
	if (g.version != PRESTO_GENL_VERSION) {
		*why = "a message of a presto version lento does not know";
		return -EPROTO;
	}
	if (g.cmd > PRESTO_CMD_MAX) {
		/* A later presto's command: not for this lento. */
		m->kind = KM_OTHER;
		return 0;
	}
	sh = &kshapes[g.cmd];
	if (!sh->must) {
		*why = "a command presto does not send";
		return -EBADMSG;
	}
	alen = len - NLMSG_HDRLEN - GENL_HDRLEN;
	err = attrs_strict(body + GENL_HDRLEN, alen, PRESTO_A_MAX, PRESTO_A_PAD,
			   &seen, why);
	if (err)
		return err;
	if ((seen & sh->must) != sh->must || (seen & ~(sh->must | sh->may))) {
		*why = "a command without the attributes it must have, or "
		       "with some it may not";
		return -EBADMSG;
	}
	if (nla_parse(tb, PRESTO_A_MAX,
		      (struct nlattr *)(body + GENL_HDRLEN), (int)alen,
		      (struct nla_policy *)kpolicy)) {
		*why = "an attribute outside its policy";
		return -EBADMSG;
	}
	for (int i = 1; i <= PRESTO_A_MAX; i++) {
		if (!tb[i] || !kexact[i] || nla_len(tb[i]) == kexact[i])
			continue;
		*why = "an attribute of the wrong length";
		return -EBADMSG;
	}
	m->have = seen;
	if (tb[PRESTO_A_FILESET]) {
		const char *s = nla_data(tb[PRESTO_A_FILESET]);
		size_t n = (size_t)nla_len(tb[PRESTO_A_FILESET]);

		if (s[n - 1] || strlen(s) != n - 1 || !kchan_fileset_ok(s, n - 1)) {
			*why = "FILESET: not a fileset name";
			return -EBADMSG;
		}
		memcpy(m->fileset, s, n);
	}
	if (tb[PRESTO_A_REQ])
		m->req = get_u64(nla_data(tb[PRESTO_A_REQ]));
	if (tb[PRESTO_A_OP]) {
		m->op = get_u32(nla_data(tb[PRESTO_A_OP]));
		if (m->op < PRESTO_OP_FETCH_DIR || m->op > PRESTO_OP_PERMIT) {
			*why = "OP: not an upcall lento knows";
			return -EBADMSG;
		}
	}
	if (tb[PRESTO_A_HANDLE] &&
	    handle_get(tb[PRESTO_A_HANDLE], &m->handle, why))
		return -EBADMSG;
	if (tb[PRESTO_A_ROOT] && handle_get(tb[PRESTO_A_ROOT], &m->root, why))
		return -EBADMSG;
	if (tb[PRESTO_A_TIMEOUT_MS])
		m->timeout_ms = get_u32(nla_data(tb[PRESTO_A_TIMEOUT_MS]));
	if (tb[PRESTO_A_MOUNTED]) {
		m->mounted = *(const uint8_t *)nla_data(tb[PRESTO_A_MOUNTED]);
		if (m->mounted > 1) {
			*why = "MOUNTED: neither 0 nor 1";
			return -EBADMSG;
		}
	}
	if ((seen & KA(MOUNTED)) &&
	    ((g.cmd == PRESTO_CMD_MOUNTED && !m->mounted) ||
	     (g.cmd == PRESTO_CMD_UNMOUNTED && m->mounted))) {
		*why = "MOUNTED contradicts the notice";
		return -EBADMSG;
	}
	if (g.cmd == PRESTO_CMD_MOUNTED)
		m->mounted = 1;
	if (m->mounted && (~seen & (KA(ROOT) | KA(TIMEOUT_MS)))) {
		*why = "mounted, but no ROOT or TIMEOUT_MS";
		return -EBADMSG;
	}
	if (!m->mounted && (seen & (KA(ROOT) | KA(TIMEOUT_MS))) &&
	    g.cmd != PRESTO_CMD_MOUNTED) {
		*why = "a ROOT or TIMEOUT_MS of a fileset not mounted";
		return -EBADMSG;
	}
	if (tb[PRESTO_A_HANDLES]) {
		size_t n = (size_t)nla_len(tb[PRESTO_A_HANDLES]);
		const uint8_t *p = nla_data(tb[PRESTO_A_HANDLES]);

		if (n % sizeof(struct presto_handle)) {
			*why = "HANDLES: not a whole number of handles";
			return -EBADMSG;
		}
		m->handles = p;
		m->nhandles = (uint32_t)(n / sizeof(struct presto_handle));
		for (uint32_t i = 0; i < m->nhandles; i++) {
			struct presto_handle ph;

			kmsg_handle(m, i, &ph);
			if (ph.pad) {
				*why = "HANDLES: a handle whose pad is not "
				       "zero";
				return -EBADMSG;
			}
		}
	}
	err = decode_log(tb, m, why);
	if (err)
		return err;
	if (tb[PRESTO_A_STAT])
		return decode_stats(tb[PRESTO_A_STAT], m, why);
	return 0;
}

int kchan_decode(const void *buf, size_t len, uint16_t family,
		 struct kmsg *m, const char **why)
{
	const struct nlmsghdr *h = buf;

	memset(m, 0, sizeof(*m));
	*why = NULL;
	if ((uintptr_t)buf % NLMSG_ALIGNTO) {
		*why = "a message at an unaligned address";
		return -EBADMSG;
	}
	if (len < NLMSG_HDRLEN || h->nlmsg_len != len) {
		*why = "a netlink message whose length is not its header's";
		return -EBADMSG;
	}
	m->seq = h->nlmsg_seq;
	m->portid = h->nlmsg_pid;
	if (h->nlmsg_type == NLMSG_ERROR) {
		struct nlmsgerr e;

		if (len < NLMSG_HDRLEN + sizeof(e)) {
			*why = "a netlink ack too short";
			return -EBADMSG;
		}
		memcpy(&e, (const uint8_t *)h + NLMSG_HDRLEN, sizeof(e));
		if (e.error > 0 || e.error < -4095) {
			*why = "a netlink ack with an error out of range";
			return -EBADMSG;
		}
		m->kind = KM_ACK;
		m->err = e.error;
		/* The ack names the request it answers by its sequence. */
		m->seq = e.msg.nlmsg_seq;
		return 0;
	}
	if (h->nlmsg_type < NLMSG_MIN_TYPE || h->nlmsg_type != family) {
		m->kind = KM_OTHER;
		return 0;
	}
	return decode_genl(h, len, m, why);
}

int kchan_next(const void *buf, size_t len, size_t *off, uint16_t family,
	       struct kmsg *m, const char **why)
{
	const uint8_t *p = (const uint8_t *)buf + *off;
	size_t left = len - *off;
	struct nlmsghdr h;
	int err;

	if (*off >= len)
		return 0;
	if (left < NLMSG_HDRLEN) {
		*why = "bytes trailing the last netlink message";
		*off = len;
		return -EBADMSG;
	}
	memcpy(&h, p, sizeof(h));
	if (h.nlmsg_len < NLMSG_HDRLEN || h.nlmsg_len > left) {
		*why = "a netlink message longer than its datagram";
		*off = len;
		return -EBADMSG;
	}
	err = kchan_decode(p, h.nlmsg_len, family, m, why);
	/* Past it, whatever it was: the next one may be good. */
	*off += NLMSG_ALIGN(h.nlmsg_len) < left ? NLMSG_ALIGN(h.nlmsg_len) :
		left;
	return err ? err : 1;
}

void kmsg_handle(const struct kmsg *m, uint32_t i, struct presto_handle *h)
{
	memcpy(h, m->handles + (size_t)i * sizeof(*h), sizeof(*h));
}

/* ---------------------------------------------------------------- xattr */

void kchan_cb_encode(uint8_t out[KCHAN_CB_LEN], uint32_t flags,
		     uint32_t nlink, uint64_t epoch)
{
	memset(out, 0, KCHAN_CB_LEN);
	out[0] = PRESTO_CB_XATTR_VERSION;
	out[1] = (uint8_t)(flags & PRESTO_CB_ALL);
	for (int i = 0; i < 4; i++)
		out[4 + i] = (uint8_t)(nlink >> (8 * i));
	for (int i = 0; i < 8; i++)
		out[8 + i] = (uint8_t)(epoch >> (8 * i));
}

int kchan_cb_decode(const void *buf, size_t len, uint32_t *flags,
		    uint32_t *nlink, uint64_t *epoch)
{
	const uint8_t *p = buf;
	uint64_t e = 0;
	uint32_t n = 0;

	if (len != KCHAN_CB_LEN || p[0] != PRESTO_CB_XATTR_VERSION ||
	    (p[1] & ~PRESTO_CB_ALL) || p[2] || p[3])
		return -EINVAL;
	for (int i = 0; i < 4; i++)
		n |= (uint32_t)p[4 + i] << (8 * i);
	for (int i = 0; i < 8; i++)
		e |= (uint64_t)p[8 + i] << (8 * i);
	*flags = p[1];
	if (nlink)
		*nlink = n;
	*epoch = e;
	return 0;
}
