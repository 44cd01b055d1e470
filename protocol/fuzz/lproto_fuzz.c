/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the wire codec: the input is what a peer sent, a
 * run of frames. Each frame goes through its decoder, every list it has
 * is read, a DATA chunk is decompressed, and what a decoder accepted is
 * encoded again and must come out as the same bytes. The chunks of a
 * FETCH reply also go through the receiver's stream check.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "lproto_roundtrip.h"

/* A FETCH reply's chunks, as a client follows them. */
static void follow(const struct lp_frame *f, struct lp_stream *s, bool *on)
{
	struct lp_fetch_reply r;
	struct lp_data d;
	const char *why;

	if (!lp_decode_fetch_reply(f, &r, &why)) {
		lp_stream_init(s, 0, r.size, true);
		*on = true;
	} else if (*on && !lp_decode_data(f, &d, &why)) {
		if (lp_stream_data(s, &d, &why) != 0)
			*on = false;	/* complete, or a broken stream */
		if (s->next > s->total)
			__builtin_trap();	/* the check promised */
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lp_buf out = { 0 };
	struct lp_stream s;
	bool on = false;
	struct lp_frame f;
	const char *why = NULL, *why2 = NULL;
	enum lp_rt rt;
	ssize_t n;

	while ((n = lp_frame_parse(data, size, &f, &why)) > 0) {
		if ((size_t)n > size || n != (ssize_t)(LP_HDR_SIZE + f.len))
			__builtin_trap();
		out.len = 0;
		rt = lp_roundtrip(&f, &out, &why);
		/* An encoder refusing what its decoder took. */
		if (rt == LP_RT_BAD && !strncmp(why, "re-encode", 9))
			__builtin_trap();
		/* lp_frame_check agrees with the decoders. */
		if ((rt == LP_RT_BAD) != (lp_frame_check(&f, &why2) != 0))
			__builtin_trap();
		/* The encoding is canonical. */
		if (rt == LP_RT_SAME &&
		    (out.len != (size_t)n || memcmp(out.p, data, out.len)))
			__builtin_trap();
		follow(&f, &s, &on);
		data += n;
		size -= (size_t)n;
	}
	lp_buf_free(&out);
	return 0;
}
