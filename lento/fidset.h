/* SPDX-License-Identifier: MIT */
/*
 * A set of fids (open addressing, linear probing, backward-shift
 * deletion): the callbacks a server has promised one client, the objects
 * a client holds callbacks on. And a map of fids to indexes.
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

/*
 * A map of fids to indexes, filled and cleared but never deleted from:
 * where each object's entry is in an array (a journal batch's rows).
 */
struct fidmap {
	struct lento_fid *key;	/* a null fid is an empty slot */
	size_t *val;
	size_t count, cap;	/* cap a power of two, or 0 */
};

void fidmap_init(struct fidmap *m);
void fidmap_free(struct fidmap *m);
void fidmap_clear(struct fidmap *m);
/* 0 (@f's value is @v now, replacing any), -EINVAL (null fid), -ENOMEM. */
int fidmap_put(struct fidmap *m, const struct lento_fid *f, size_t v);
bool fidmap_get(const struct fidmap *m, const struct lento_fid *f, size_t *v);

#endif /* LENTO_FIDSET_H */
