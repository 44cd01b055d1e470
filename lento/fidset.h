/* SPDX-License-Identifier: MIT */
/*
 * A set of fids (open addressing, linear probing, backward-shift
 * deletion): the callbacks a server has promised one client, the objects
 * a client holds callbacks on.
 */
#ifndef LENTO_FIDSET_H
#define LENTO_FIDSET_H

#include <stdbool.h>
#include <stddef.h>
#include "lento_types.h"

struct fidset {
	struct lento_fid *slot;	/* a null fid is an empty slot */
	size_t count, cap;	/* cap a power of two, or 0 */
};

void fidset_init(struct fidset *s);
void fidset_free(struct fidset *s);
/* 1 if added, 0 if it was there, -ENOMEM. The null fid cannot be added. */
int fidset_add(struct fidset *s, const struct lento_fid *f);
bool fidset_has(const struct fidset *s, const struct lento_fid *f);
/* Whether it was there. */
bool fidset_del(struct fidset *s, const struct lento_fid *f);
/* Removes every fid of @volume; returns how many. */
size_t fidset_del_volume(struct fidset *s, uint32_t volume);
void fidset_clear(struct fidset *s);

#endif /* LENTO_FIDSET_H */
