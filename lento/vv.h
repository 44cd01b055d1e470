/* SPDX-License-Identifier: MIT */
/*
 * Version vectors (struct lento_vv, protocol/lento_types.h): compare two,
 * bump one server's counter for an update, test equality. Small on
 * purpose: the server's store and the client's log both use it.
 *
 * A counter a vector does not carry (index >= n) counts as 0, so vectors
 * of different lengths compare as the longer one padded with zeros.
 */
#ifndef LENTO_VV_H
#define LENTO_VV_H

#include "lento_types.h"

#include <stddef.h>

/* A version nobody has updated yet: n counters, all 0, StoreId {0, 0}. */
void lento_vv_init(struct lento_vv *vv, uint32_t n);

/*
 * How a compares with b, counter by counter. Equal counters with different
 * StoreIds are CONCURRENT: two updates that each server counted once.
 */
enum lento_vv_order lento_vv_cmp(const struct lento_vv *a,
				 const struct lento_vv *b);

/* Every counter and the StoreId equal (LENTO_VV_EQUAL). */
bool lento_vv_eq(const struct lento_vv *a, const struct lento_vv *b);

/*
 * Record one update made at server index @server by StoreId @sid: that
 * counter + 1 (the vector grows to server + 1 counters if shorter), the
 * StoreId replaced. -EINVAL if @server >= LENTO_VV_MAX or n is already
 * out of range, -EOVERFLOW if the counter is at its maximum; vv unchanged
 * then.
 */
int lento_vv_bump(struct lento_vv *vv, uint32_t server,
		  struct lento_storeid sid);

/*
 * "[c0,c1,...]@client:seq" into buf (always terminated when len > 0);
 * returns what snprintf would.
 */
int lento_vv_format(const struct lento_vv *vv, char *buf, size_t len);

#endif /* LENTO_VV_H */
