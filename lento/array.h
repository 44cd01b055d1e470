/* SPDX-License-Identifier: MIT */
/*
 * Arrays that grow by doubling: the one way lento's modules make room in
 * an array they own.
 */
#ifndef LENTO_ARRAY_H
#define LENTO_ARRAY_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/*
 * @p (*@cap elements of @size bytes, @len of them used) with room for @n
 * more: @p itself, or where it moved (*@cap grown, doubling from 16), or
 * NULL -- no memory, or a size past SIZE_MAX -- with @p and *@cap as they
 * were.
 */
static inline void *array_grow(void *p, size_t *cap, size_t len, size_t n,
			       size_t size)
{
	size_t c = *cap ? *cap : 16;

	if (len + n < len)
		return NULL;
	while (c < len + n) {
		if (c > SIZE_MAX / 2)
			return NULL;
		c *= 2;
	}
	if (c == *cap)
		return p;
	if (size && c > SIZE_MAX / size)
		return NULL;
	p = realloc(p, c * size);
	if (p)
		*cap = c;
	return p;
}

#endif /* LENTO_ARRAY_H */
