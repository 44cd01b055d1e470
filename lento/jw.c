// SPDX-License-Identifier: MIT
/* A small JSON writer (see jw.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "jw.h"

void jw_init(struct jw *w)
{
	memset(w, 0, sizeof(*w));
}

void jw_free(struct jw *w)
{
	free(w->p);
	jw_init(w);
}

static bool jw_reserve(struct jw *w, size_t more)
{
	size_t cap = w->cap ? w->cap : 256;
	char *p;

	if (w->failed)
		return false;
	if (w->len + more + 1 <= w->cap)
		return true;
	while (cap < w->len + more + 1)
		cap *= 2;
	p = realloc(w->p, cap);
	if (!p) {
		w->failed = true;
		return false;
	}
	w->p = p;
	w->cap = cap;
	return true;
}

void jw_raw(struct jw *w, const char *s, size_t n)
{
	if (!jw_reserve(w, n))
		return;
	memcpy(w->p + w->len, s, n);
	w->len += n;
	w->p[w->len] = 0;
}

void jw_printf(struct jw *w, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !jw_reserve(w, n))
		return;
	va_start(ap, fmt);
	vsnprintf(w->p + w->len, n + 1, fmt, ap);
	va_end(ap);
	w->len += n;
}

int jw_finish(struct jw *w, const char **text)
{
	if (!jw_reserve(w, 0))
		return -ENOMEM;
	*text = w->p;
	return 0;
}

/* A value starts: a comma if it follows another in the same container. */
static void jw_value(struct jw *w)
{
	if (w->need_comma)
		jw_raw(w, ",", 1);
	w->need_comma = true;
}

void jw_obj_begin(struct jw *w)
{
	jw_value(w);
	jw_raw(w, "{", 1);
	w->need_comma = false;
}

void jw_obj_end(struct jw *w)
{
	jw_raw(w, "}", 1);
	w->need_comma = true;
}

void jw_arr_begin(struct jw *w)
{
	jw_value(w);
	jw_raw(w, "[", 1);
	w->need_comma = false;
}

void jw_arr_end(struct jw *w)
{
	jw_raw(w, "]", 1);
	w->need_comma = true;
}

static void jw_quoted(struct jw *w, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t i;

	jw_raw(w, "\"", 1);
	for (i = 0; i < n; i++) {
		unsigned char c = s[i];
		char esc[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };

		if (c == '"' || c == '\\') {
			esc[1] = c;
			jw_raw(w, esc, 2);
		} else if (c < 0x20 || c == 0x7f) {
			jw_raw(w, esc, 6);
		} else {
			jw_raw(w, (const char *)&s[i], 1);
		}
	}
	jw_raw(w, "\"", 1);
}

void jw_key(struct jw *w, const char *key)
{
	jw_value(w);
	jw_quoted(w, key, strlen(key));
	jw_raw(w, ":", 1);
	w->need_comma = false;
}

void jw_strn(struct jw *w, const char *s, size_t n)
{
	jw_value(w);
	jw_quoted(w, s, n);
}

void jw_str(struct jw *w, const char *s)
{
	if (!s) {
		jw_null(w);
		return;
	}
	jw_strn(w, s, strlen(s));
}

void jw_int(struct jw *w, int64_t v)
{
	jw_value(w);
	jw_printf(w, "%" PRId64, v);
}

void jw_uint(struct jw *w, uint64_t v)
{
	jw_value(w);
	jw_printf(w, "%" PRIu64, v);
}

void jw_bool(struct jw *w, bool v)
{
	jw_value(w);
	jw_raw(w, v ? "true" : "false", v ? 4 : 5);
}

void jw_null(struct jw *w)
{
	jw_value(w);
	jw_raw(w, "null", 4);
}
