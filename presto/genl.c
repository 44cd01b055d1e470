// SPDX-License-Identifier: GPL-2.0
/*
 * The generic-netlink family "presto": what comes from lento is checked
 * here, then handed to channel.c (protocol/KERNEL.md).
 *
 * Everything lento sends may be wrong. Each attribute has a policy and
 * every command is validated strictly (resv_start_op past the last
 * command); each command's required attributes are checked; a handle's
 * padding must be zero; the sender must have CAP_SYS_ADMIN (checked on
 * the socket: the family flag GENL_ADMIN_PERM would check CAP_NET_ADMIN)
 * and, but for REGISTER and STATS, be the fileset's lento. Handlers run
 * in parallel (parallel_ops) under the fileset's own mutex, never under
 * the global genetlink mutex, which other families share.
 */
#include <linux/bitops.h>
#include <linux/netlink.h>
#include <net/genetlink.h>
#include <net/netlink.h>
#include "presto.h"

static struct genl_family presto_genl_family;

static struct netlink_range_validation presto_epoch_range = {
	.min = 1,
	.max = PRESTO_EPOCH_LOCAL - 1,
};

static const struct nla_policy presto_policy[PRESTO_A_MAX + 1] = {
	[PRESTO_A_FILESET]	= { .type = NLA_NUL_STRING,
				    .len = PRESTO_FILESET_MAX },
	/*
	 * presto numbers upcalls from 1, and a KML answer with no REQ is a
	 * plain notice: 0 names no request.
	 */
	[PRESTO_A_REQ]		= NLA_POLICY_MIN(NLA_U64, 1),
	[PRESTO_A_OP]		= NLA_POLICY_RANGE(NLA_U32, PRESTO_OP_FETCH_DIR,
						   PRESTO_OP_PERMIT),
	[PRESTO_A_HANDLE]	= NLA_POLICY_EXACT_LEN(sizeof(struct presto_handle)),
	[PRESTO_A_ERRNO]	= NLA_POLICY_MAX(NLA_U32, 511),
	[PRESTO_A_FLAGS]	= NLA_POLICY_MASK(NLA_U32, PRESTO_CB_ALL),
	/* U64_MAX is presto's own: PRESTO_EPOCH_LOCAL. */
	[PRESTO_A_EPOCH]	= NLA_POLICY_FULL_RANGE(NLA_U64,
							&presto_epoch_range),
	[PRESTO_A_SEQ]		= { .type = NLA_U64 },
	[PRESTO_A_PERMIT]	= NLA_POLICY_MAX(NLA_U8, 1),
	[PRESTO_A_NAME]		= { .type = NLA_NUL_STRING, .len = NAME_MAX },
	[PRESTO_A_EVENT]	= NLA_POLICY_MASK(NLA_U32, PRESTO_EV_ALL),
	/* What only presto sends. */
	[PRESTO_A_ROOT]		= { .type = NLA_REJECT },
	[PRESTO_A_TIMEOUT_MS]	= { .type = NLA_REJECT },
	[PRESTO_A_MOUNTED]	= { .type = NLA_REJECT },
	[PRESTO_A_STAT]		= { .type = NLA_REJECT },
	[PRESTO_A_HANDLES]	= { .type = NLA_REJECT },
	[PRESTO_A_PAD]		= { .type = NLA_REJECT },
	[PRESTO_A_KML_DURABLE]	= { .type = NLA_REJECT },
	[PRESTO_A_KML_ACKED]	= { .type = NLA_REJECT },
};

/* Each command's required attributes. */
#define A(x)	BIT(PRESTO_A_##x)
static const u32 presto_cmd_attrs[PRESTO_CMD_MAX + 1] = {
	[PRESTO_CMD_REGISTER]	= A(FILESET),
	[PRESTO_CMD_UNREGISTER]	= A(FILESET),
	[PRESTO_CMD_SET_EPOCH]	= A(FILESET) | A(EPOCH),
	[PRESTO_CMD_REPLY]	= A(FILESET) | A(REQ) | A(ERRNO),
	[PRESTO_CMD_PROGRESS]	= A(FILESET) | A(REQ),
	[PRESTO_CMD_BREAK]	= A(FILESET) | A(HANDLE) | A(FLAGS),
	[PRESTO_CMD_SET_FLAGS]	= A(FILESET) | A(HANDLE) | A(FLAGS) | A(EPOCH),
	[PRESTO_CMD_PURGE]	= A(FILESET) | A(HANDLE),
	[PRESTO_CMD_STATS]	= A(FILESET),
	[PRESTO_CMD_KML_ACK]	= A(FILESET) | A(SEQ),
	[PRESTO_CMD_KML_SYNC]	= A(FILESET) | A(REQ),
	[PRESTO_CMD_PERMIT]	= A(FILESET) | A(PERMIT),
	[PRESTO_CMD_NOTIFY]	= A(FILESET) | A(HANDLE) | A(NAME) | A(EVENT),
};
#undef A

/*
 * A message of presto's own for @fileset, with room for @size bytes of
 * attributes besides the fileset's name; NULL if out of memory.
 */
struct sk_buff *presto_genl_new(const char *fileset, size_t size, u8 cmd,
				void **hdr)
{
	struct sk_buff *skb;

	skb = genlmsg_new(nla_total_size(PRESTO_FILESET_MAX + 1) + size,
			  GFP_KERNEL);
	if (!skb)
		return NULL;
	*hdr = genlmsg_put(skb, 0, 0, &presto_genl_family, 0, cmd);
	if (!*hdr || nla_put_string(skb, PRESTO_A_FILESET, fileset)) {
		nlmsg_free(skb);
		return NULL;
	}
	return skb;
}

/*
 * A string attribute is its bytes and one NUL, nothing after it (the
 * policy's NLA_NUL_STRING only asks for a NUL somewhere).
 */
static bool presto_string_ok(const struct nlattr *nla)
{
	return !nla || strnlen(nla_data(nla), nla_len(nla)) + 1 == nla_len(nla);
}

static int presto_pre_doit(const struct genl_ops *ops, struct sk_buff *skb,
			   struct genl_info *info)
{
	u8 cmd = ops->cmd;
	struct presto_fileset *fs;
	const char *name;
	int a;

	if (cmd != PRESTO_CMD_STATS && !netlink_capable(skb, CAP_SYS_ADMIN))
		return -EPERM;
	for (a = 1; a <= PRESTO_A_MAX; a++) {
		if ((presto_cmd_attrs[cmd] & BIT(a)) && !info->attrs[a]) {
			GENL_SET_ERR_MSG(info, "presto: an attribute is missing");
			return -EINVAL;
		}
	}
	if (!presto_string_ok(info->attrs[PRESTO_A_FILESET]) ||
	    !presto_string_ok(info->attrs[PRESTO_A_NAME])) {
		GENL_SET_ERR_MSG(info, "presto: bytes after a string's NUL");
		return -EINVAL;
	}
	name = nla_data(info->attrs[PRESTO_A_FILESET]);
	if (!presto_fileset_name_ok(name)) {
		GENL_SET_ERR_MSG(info, "presto: not a fileset name");
		return -EINVAL;
	}
	fs = presto_fileset_get(name, cmd == PRESTO_CMD_REGISTER);
	if (!fs)
		return cmd == PRESTO_CMD_REGISTER ? -ENOMEM : -ENOENT;
	if (cmd != PRESTO_CMD_REGISTER && cmd != PRESTO_CMD_STATS &&
	    !presto_fileset_is_lento(fs, NETLINK_CB(skb).sk)) {
		presto_fileset_put(fs);
		GENL_SET_ERR_MSG(info, "presto: not this fileset's lento");
		return -EPERM;
	}
	info->user_ptr[0] = fs;
	return 0;
}

static void presto_post_doit(const struct genl_ops *ops, struct sk_buff *skb,
			     struct genl_info *info)
{
	presto_fileset_put(info->user_ptr[0]);
}

/* An answer to @info naming its fileset, begun (*@hdr) for the rest. */
static struct sk_buff *presto_reply_begin(struct genl_info *info, u8 cmd,
					  void **hdr)
{
	const char *name = nla_data(info->attrs[PRESTO_A_FILESET]);
	struct sk_buff *msg = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);

	if (!msg)
		return ERR_PTR(-ENOMEM);
	*hdr = genlmsg_put_reply(msg, info, &presto_genl_family, 0, cmd);
	if (!*hdr || nla_put_string(msg, PRESTO_A_FILESET, name)) {
		nlmsg_free(msg);
		return ERR_PTR(-EMSGSIZE);
	}
	return msg;
}

/* REGISTER answers with the mount's state (presto_fileset_register()). */
static int presto_cmd_register(struct sk_buff *skb, struct genl_info *info)
{
	struct presto_fileset *fs = info->user_ptr[0];
	struct sk_buff *msg;
	void *hdr;
	int err;

	msg = presto_reply_begin(info, PRESTO_CMD_REGISTER, &hdr);
	if (IS_ERR(msg))
		return PTR_ERR(msg);
	err = presto_fileset_register(fs, NETLINK_CB(skb).sk, info, msg, hdr);
	if (err == -EBUSY)
		GENL_SET_ERR_MSG(info, "presto: another lento holds the fileset");
	if (err)
		return err;
	/* After the answer, what was pending for the old lento, if any. */
	presto_fileset_resend(fs);
	return 0;
}

static int presto_cmd_unregister(struct sk_buff *skb, struct genl_info *info)
{
	presto_fileset_unregister(info->user_ptr[0], NETLINK_CB(skb).sk);
	return 0;
}

static int presto_cmd_set_epoch(struct sk_buff *skb, struct genl_info *info)
{
	return presto_fileset_set_epoch(info->user_ptr[0],
			nla_get_u64(info->attrs[PRESTO_A_EPOCH]));
}

static int presto_cmd_reply(struct sk_buff *skb, struct genl_info *info)
{
	u32 err = nla_get_u32(info->attrs[PRESTO_A_ERRNO]);
	struct nlattr *flags = info->attrs[PRESTO_A_FLAGS];
	struct nlattr *epoch = info->attrs[PRESTO_A_EPOCH];

	if (!flags != !epoch || (err && flags)) {
		GENL_SET_ERR_MSG(info, "presto: FLAGS and EPOCH go together, with ERRNO 0");
		return -EINVAL;
	}
	return presto_fileset_reply(info->user_ptr[0],
				    nla_get_u64(info->attrs[PRESTO_A_REQ]),
				    -(int)err, flags ? nla_get_u32(flags) : 0,
				    epoch ? nla_get_u64(epoch) : 0);
}

static int presto_cmd_progress(struct sk_buff *skb, struct genl_info *info)
{
	return presto_fileset_progress(info->user_ptr[0],
			nla_get_u64(info->attrs[PRESTO_A_REQ]));
}

/* HANDLE, into @h: -EINVAL (and said) if its padding is not zero. */
static int presto_get_handle(struct genl_info *info, struct presto_handle *h)
{
	nla_memcpy(h, info->attrs[PRESTO_A_HANDLE], sizeof(*h));
	if (h->pad) {
		GENL_SET_ERR_MSG(info, "presto: handle padding is not zero");
		return -EINVAL;
	}
	return 0;
}

/* BREAK, SET_FLAGS and PURGE: the object named by HANDLE. */
static int presto_cmd_object(struct sk_buff *skb, struct genl_info *info)
{
	struct nlattr *flags = info->attrs[PRESTO_A_FLAGS];
	struct nlattr *epoch = info->attrs[PRESTO_A_EPOCH];
	struct presto_handle h;

	if (presto_get_handle(info, &h))
		return -EINVAL;
	return presto_fileset_object(info->user_ptr[0], info->genlhdr->cmd, &h,
				     flags ? nla_get_u32(flags) : 0,
				     epoch ? nla_get_u64(epoch) : 0);
}

/* One name of a directory: not empty, not . or .., no '/'. */
static bool presto_one_name(const char *name)
{
	return name[0] && strcmp(name, ".") && strcmp(name, "..") &&
	       !strchr(name, '/');
}

/* NOTIFY: a name the server added to (or removed from) a directory. */
static int presto_cmd_notify(struct sk_buff *skb, struct genl_info *info)
{
	const char *name = nla_data(info->attrs[PRESTO_A_NAME]);
	u32 event = nla_get_u32(info->attrs[PRESTO_A_EVENT]);
	struct presto_handle h;

	if (presto_get_handle(info, &h))
		return -EINVAL;
	if (!presto_one_name(name)) {
		GENL_SET_ERR_MSG(info, "presto: NAME is not one name");
		return -EINVAL;
	}
	if (hweight32(event & (PRESTO_EV_CREATE | PRESTO_EV_DELETE)) != 1) {
		GENL_SET_ERR_MSG(info, "presto: EVENT is not CREATE or DELETE");
		return -EINVAL;
	}
	return presto_fileset_notify(info->user_ptr[0], &h, name, event);
}

/* STATS answers with the fileset's state and counters. */
static int presto_cmd_stats(struct sk_buff *skb, struct genl_info *info)
{
	struct presto_fileset *fs = info->user_ptr[0];
	struct sk_buff *msg;
	void *hdr;

	msg = presto_reply_begin(info, PRESTO_CMD_STATS, &hdr);
	if (IS_ERR(msg))
		return PTR_ERR(msg);
	if (presto_fileset_fill(fs, msg)) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);
}

static int presto_cmd_kml_ack(struct sk_buff *skb, struct genl_info *info)
{
	int err;

	err = presto_fileset_kml_ack(info->user_ptr[0],
				     nla_get_u64(info->attrs[PRESTO_A_SEQ]));
	if (err == -EINVAL)
		GENL_SET_ERR_MSG(info, "presto: SEQ is past the durable records");
	return err;
}

static int presto_cmd_kml_sync(struct sk_buff *skb, struct genl_info *info)
{
	return presto_fileset_kml_request(info->user_ptr[0],
			nla_get_u64(info->attrs[PRESTO_A_REQ]), false);
}

/* PERMIT 1 grants; PERMIT 0 revokes, answered as a KML_SYNC with REQ. */
static int presto_cmd_permit(struct sk_buff *skb, struct genl_info *info)
{
	struct nlattr *req = info->attrs[PRESTO_A_REQ];

	if (nla_get_u8(info->attrs[PRESTO_A_PERMIT]))
		return presto_fileset_grant(info->user_ptr[0]);
	if (!req) {
		GENL_SET_ERR_MSG(info, "presto: a revoke needs REQ for its answer");
		return -EINVAL;
	}
	return presto_fileset_kml_request(info->user_ptr[0], nla_get_u64(req),
					  true);
}

static const struct genl_small_ops presto_ops[] = {
	{ .cmd = PRESTO_CMD_REGISTER, .doit = presto_cmd_register },
	{ .cmd = PRESTO_CMD_UNREGISTER, .doit = presto_cmd_unregister },
	{ .cmd = PRESTO_CMD_SET_EPOCH, .doit = presto_cmd_set_epoch },
	{ .cmd = PRESTO_CMD_REPLY, .doit = presto_cmd_reply },
	{ .cmd = PRESTO_CMD_PROGRESS, .doit = presto_cmd_progress },
	{ .cmd = PRESTO_CMD_BREAK, .doit = presto_cmd_object },
	{ .cmd = PRESTO_CMD_SET_FLAGS, .doit = presto_cmd_object },
	{ .cmd = PRESTO_CMD_PURGE, .doit = presto_cmd_object },
	{ .cmd = PRESTO_CMD_STATS, .doit = presto_cmd_stats },
	{ .cmd = PRESTO_CMD_KML_ACK, .doit = presto_cmd_kml_ack },
	{ .cmd = PRESTO_CMD_KML_SYNC, .doit = presto_cmd_kml_sync },
	{ .cmd = PRESTO_CMD_PERMIT, .doit = presto_cmd_permit },
	{ .cmd = PRESTO_CMD_NOTIFY, .doit = presto_cmd_notify },
};

static struct genl_family presto_genl_family __ro_after_init = {
	.name		= PRESTO_GENL_NAME,
	.version	= PRESTO_GENL_VERSION,
	.maxattr	= PRESTO_A_MAX,
	.policy		= presto_policy,
	.resv_start_op	= PRESTO_CMD_MAX + 1,
	.parallel_ops	= true,
	.pre_doit	= presto_pre_doit,
	.post_doit	= presto_post_doit,
	.small_ops	= presto_ops,
	.n_small_ops	= ARRAY_SIZE(presto_ops),
	.module		= THIS_MODULE,
};

static int presto_netlink_notify(struct notifier_block *nb,
				 unsigned long state, void *data)
{
	struct netlink_notify *n = data;

	/*
	 * A port id names a socket only within its network namespace, and
	 * anyone may bind a free one in a namespace of their own: only a
	 * socket in the family's namespace can be a lento.
	 */
	if (state != NETLINK_URELEASE || n->protocol != NETLINK_GENERIC ||
	    !n->portid || !net_eq(n->net, &init_net))
		return NOTIFY_DONE;
	presto_lento_closed(n->portid);
	return NOTIFY_OK;
}

static struct notifier_block presto_netlink_nb = {
	.notifier_call = presto_netlink_notify,
};

int presto_genl_init(void)
{
	int err;

	err = presto_filesets_init();
	if (err)
		return err;
	err = genl_register_family(&presto_genl_family);
	if (err)
		goto out_filesets;
	err = netlink_register_notifier(&presto_netlink_nb);
	if (err)
		goto out_family;
	return 0;
out_family:
	genl_unregister_family(&presto_genl_family);
out_filesets:
	presto_filesets_exit();
	return err;
}

void presto_genl_exit(void)
{
	genl_unregister_family(&presto_genl_family);
	netlink_unregister_notifier(&presto_netlink_nb);
	presto_filesets_exit();
}
