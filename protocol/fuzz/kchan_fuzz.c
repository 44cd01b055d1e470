/*
 * libFuzzer target for the decoding of what presto sends lento
 * (lento/kchan_decode.c): the input is taken as one datagram of netlink
 * messages, then as one message, then the first 16 bytes as the flags
 * xattr.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kchan.h"

#define FAM	0x1d

/* Touch what a decoded message points at, so ASan sees any overrun. */
static unsigned int walk(const struct kmsg *m)
{
	unsigned int sum = 0;

	for (uint32_t i = 0; i < m->nhandles; i++) {
		struct presto_handle h;

		kmsg_handle(m, i, &h);
		if (h.pad)
			__builtin_trap();	/* the decoder promised */
		sum += (unsigned int)h.ino;
	}
	if (strlen(m->fileset) > PRESTO_FILESET_MAX)
		__builtin_trap();
	if (m->kind == KM_GENL && m->cmd == PRESTO_CMD_UPCALL &&
	    (m->op < 1 || m->op > PRESTO_OP_PERMIT))
		__builtin_trap();
	if (m->kml_acked > m->kml_durable || m->permit > 1)
		__builtin_trap();
	return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Aligned, as a datagram read into lento's buffer is. */
	uint8_t *buf = malloc(size + 8);
	volatile unsigned int sum = 0;
	struct kmsg m;
	const char *why;
	size_t off = 0;
	uint32_t flags, nlink;
	uint64_t epoch;
	int r;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	while ((r = kchan_next(buf, size, &off, FAM, &m, &why))) {
		if (r > 0)
			sum += walk(&m);
		else if (!why)
			__builtin_trap();	/* every failure says why */
	}
	if (kchan_decode(buf, size, FAM, &m, &why) == 0)
		sum += walk(&m);
	if (!kchan_cb_decode(buf, size < KCHAN_CB_LEN ? size : KCHAN_CB_LEN,
			     &flags, &nlink, &epoch) && (flags & ~PRESTO_CB_ALL))
		__builtin_trap();
	free(buf);
	(void)sum;
	return 0;
}
