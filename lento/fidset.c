// SPDX-License-Identifier: MIT
/* A set of fids (see fidset.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "fidset.h"

void fidset_init(struct fidset *s)
{
	memset(s, 0, sizeof(*s));
}

void fidset_free(struct fidset *s)
{
	free(s->slot);
	fidset_init(s);
}

void fidset_clear(struct fidset *s)
{
	if (s->cap)
		memset(s->slot, 0, s->cap * sizeof(*s->slot));
	s->count = 0;
}

static size_t fid_hash(const struct lento_fid *f)
{
	uint64_t h = f->seq * 0x9e3779b97f4a7c15ull;

	h ^= ((uint64_t)f->volume << 32 | f->client) * 0xc2b2ae3d27d4eb4full;
	h ^= h >> 29;
	return (size_t)h;
}

/* The slot holding @f, or the empty slot where it would go. */
static size_t fidset_find(const struct fidset *s, const struct lento_fid *f)
{
	size_t mask = s->cap - 1, i = fid_hash(f) & mask;

	while (!lento_fid_is_null(&s->slot[i]) &&
	       !lento_fid_eq(&s->slot[i], f))
		i = (i + 1) & mask;
	return i;
}

static int fidset_grow(struct fidset *s)
{
	size_t cap = s->cap ? s->cap * 2 : 16, i;
	struct fidset n = { .cap = cap };

	n.slot = calloc(cap, sizeof(*n.slot));
	if (!n.slot)
		return -ENOMEM;
	for (i = 0; i < s->cap; i++)
		if (!lento_fid_is_null(&s->slot[i]))
			n.slot[fidset_find(&n, &s->slot[i])] = s->slot[i];
	n.count = s->count;
	free(s->slot);
	*s = n;
	return 0;
}

int fidset_add(struct fidset *s, const struct lento_fid *f)
{
	size_t i;

	if (lento_fid_is_null(f))
		return -EINVAL;
	/* At most 3/4 full, so a probe always ends. */
	if ((s->count + 1) * 4 > s->cap * 3 && fidset_grow(s))
		return -ENOMEM;
	i = fidset_find(s, f);
	if (!lento_fid_is_null(&s->slot[i]))
		return 0;
	s->slot[i] = *f;
	s->count++;
	return 1;
}

bool fidset_has(const struct fidset *s, const struct lento_fid *f)
{
	return s->cap && !lento_fid_is_null(f) &&
	       !lento_fid_is_null(&s->slot[fidset_find(s, f)]);
}

/* Empty slot @i, moving back the entries after it that probed past it. */
static void fidset_remove_at(struct fidset *s, size_t i)
{
	size_t mask = s->cap - 1, j = i;

	memset(&s->slot[i], 0, sizeof(s->slot[i]));
	s->count--;
	for (;;) {
		size_t home;

		j = (j + 1) & mask;
		if (lento_fid_is_null(&s->slot[j]))
			return;
		home = fid_hash(&s->slot[j]) & mask;
		/* Does slot i lie cyclically in [home, j)? Then move it. */
		if ((j > i && (home <= i || home > j)) ||
		    (j < i && home <= i && home > j)) {
			s->slot[i] = s->slot[j];
			memset(&s->slot[j], 0, sizeof(s->slot[j]));
			i = j;
		}
	}
}

bool fidset_del(struct fidset *s, const struct lento_fid *f)
{
	size_t i;

	if (!fidset_has(s, f))
		return false;
	i = fidset_find(s, f);
	fidset_remove_at(s, i);
	return true;
}

size_t fidset_del_volume(struct fidset *s, uint32_t volume)
{
	size_t i = 0, n = 0;

	while (i < s->cap) {
		if (!lento_fid_is_null(&s->slot[i]) &&
		    s->slot[i].volume == volume) {
			/* The slot may be refilled from later: look again. */
			fidset_remove_at(s, i);
			n++;
			continue;
		}
		i++;
	}
	return n;
}
