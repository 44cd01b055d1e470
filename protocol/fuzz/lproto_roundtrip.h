/* SPDX-License-Identifier: MIT */
/*
 * For the tests and the fuzzer of the wire codec: decode a frame by its
 * type, read every list it has, and encode what was decoded again. The
 * encoding is canonical, so a frame a decoder accepts comes out byte for
 * byte the same.
 */
#ifndef LENTO_LPROTO_ROUNDTRIP_H
#define LENTO_LPROTO_ROUNDTRIP_H

#include "lproto.h"

enum lp_rt {
	LP_RT_BAD = -1,		/* the decoder refused it: *why */
	LP_RT_SAME = 0,		/* encoded again into out: compare */
	LP_RT_DATA = 1,		/* DATA: checked by decompressing, see .c */
	LP_RT_BIG = 2,		/* beyond LP_SPLIT_TARGET: encoded in part */
};

/*
 * Decode @f, then encode it into @out (appended). An encoder failing on
 * what its decoder accepted is a bug: returns LP_RT_BAD with *why
 * starting "re-encode".
 */
enum lp_rt lp_roundtrip(const struct lp_frame *f, struct lp_buf *out,
			const char **why);

#endif
