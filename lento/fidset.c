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

/* The slot of @slot (@cap, a power of two) holding @f, or where it goes. */
static size_t find_in(const struct lento_fid *slot, size_t cap,
		      const struct lento_fid *f)
{
	size_t mask = cap - 1, i = fid_hash(f) & mask;

	while (!lento_fid_is_null(&slot[i]) && !lento_fid_eq(&slot[i], f))
		i = (i + 1) & mask;
	return i;
}

static size_t fidset_find(const struct fidset *s, const struct lento_fid *f)
{
	return find_in(s->slot, s->cap, f);
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

/* ------------------------------------------------------------- fidmap */

void fidmap_init(struct fidmap *m)
{
	memset(m, 0, sizeof(*m));
}

void fidmap_free(struct fidmap *m)
{
	free(m->key);
	free(m->val);
	fidmap_init(m);
}

void fidmap_clear(struct fidmap *m)
{
	if (m->count)
		memset(m->key, 0, m->cap * sizeof(*m->key));
	m->count = 0;
}

static int fidmap_grow(struct fidmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 64, j;
	struct fidmap n = { .cap = cap, .count = m->count };

	n.key = calloc(cap, sizeof(*n.key));
	n.val = malloc(cap * sizeof(*n.val));
	if (!n.key || !n.val) {
		free(n.key);
		free(n.val);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (lento_fid_is_null(&m->key[i]))
			continue;
		j = find_in(n.key, cap, &m->key[i]);
		n.key[j] = m->key[i];
		n.val[j] = m->val[i];
	}
	free(m->key);
	free(m->val);
	*m = n;
	return 0;
}

int fidmap_put(struct fidmap *m, const struct lento_fid *f, size_t v)
{
	size_t i;

	if (lento_fid_is_null(f))
		return -EINVAL;
	/* At most 3/4 full, so a probe always ends. */
	if ((m->count + 1) * 4 > m->cap * 3 && fidmap_grow(m))
		return -ENOMEM;
	i = find_in(m->key, m->cap, f);
	if (lento_fid_is_null(&m->key[i])) {
		m->key[i] = *f;
		m->count++;
	}
	m->val[i] = v;
	return 0;
}

bool fidmap_get(const struct fidmap *m, const struct lento_fid *f, size_t *v)
{
	size_t i;

	if (!m->count || lento_fid_is_null(f))
		return false;
	i = find_in(m->key, m->cap, f);
	if (lento_fid_is_null(&m->key[i]))
		return false;
	*v = m->val[i];
	return true;
}
