/* SPDX-License-Identifier: MIT */
/*
 * A small JSON writer into a growable buffer, for lentoctl's --json
 * output: objects, arrays, strings (escaped), integers, booleans. A write
 * that runs out of memory marks the buffer failed; jw_finish() says so.
 */
#ifndef LENTO_JW_H
#define LENTO_JW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jw {
	char *p;
	size_t len, cap;
	bool failed;
	bool need_comma;
};

void jw_init(struct jw *w);
void jw_free(struct jw *w);
/* 0 and the text (NUL-terminated, owned by @w), or -ENOMEM. */
int jw_finish(struct jw *w, const char **text);

void jw_obj_begin(struct jw *w);
void jw_obj_end(struct jw *w);
void jw_arr_begin(struct jw *w);
void jw_arr_end(struct jw *w);
/* A member's name inside an object; its value follows. */
void jw_key(struct jw *w, const char *key);
void jw_str(struct jw *w, const char *s);
void jw_strn(struct jw *w, const char *s, size_t n);
void jw_int(struct jw *w, int64_t v);
void jw_uint(struct jw *w, uint64_t v);
void jw_bool(struct jw *w, bool v);
void jw_null(struct jw *w);

/* Raw text appended as is (plain output uses the same buffer). */
void jw_raw(struct jw *w, const char *s, size_t n);
void jw_printf(struct jw *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif /* LENTO_JW_H */
