// SPDX-License-Identifier: GPL-2.0
/*
 * tree: compare two directory trees. See tree.h for what is compared.
 *
 * The walk holds one open directory per level and side, reads each
 * directory whole (getdents64) into a sorted list of names and merges the
 * two lists. Every object is reached relative to its parent's descriptor
 * (fstatat, readlinkat, openat with O_NOFOLLOW), so paths of any length
 * work and no symbolic link is ever followed; extended attributes of
 * objects that cannot be opened safely (symbolic links, fifos, devices)
 * are read through /proc/self/fd/DIRFD/NAME with the l*xattr calls.
 */
#include "tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <unistd.h>

#define VALUE_LEN	192	/* one formatted value, NUL included */
#define SHOW_BYTES	32	/* bytes of an xattr value shown in a report */
#define CHUNK		(64 * 1024)

/* Names of one directory, sorted. */
struct names {
	char **v;
	size_t n, cap;
};

/* (dev, ino) -> the first path seen with that inode; open addressing. */
struct link_slot {
	dev_t dev;
	ino_t ino;
	char *path;		/* owned; NULL: empty slot */
};

struct link_map {
	struct link_slot *slots;
	size_t n, cap;		/* cap is 0 or a power of two */
};

struct side {
	const char *label;	/* "A" or "B", for errors */
	dev_t dev;		/* of the root: not crossed */
	struct link_map links;
};

struct walk {
	const struct tree_opts *opts;
	tree_diff_fn fn;
	void *arg;
	struct tree_error *err;
	struct side side[2];
	char *path;		/* relative path of the current object */
	size_t path_len, path_cap;
	int count;
	char *buf[2];		/* CHUNK bytes each, for contents */
};

/* ---- errors and reports ------------------------------------------------ */

static int fail(struct walk *w, int side, const char *op, const char *name,
		int e)
{
	if (e <= 0)
		e = EIO;
	if (w->err) {
		const char *p = w->path_len ? w->path : ".";

		w->err->err = e;
		snprintf(w->err->op, sizeof(w->err->op), "%s", op);
		if (side < 0)
			snprintf(w->err->path, sizeof(w->err->path), "%s", p);
		else if (name)
			snprintf(w->err->path, sizeof(w->err->path),
				 "%s: %s%s%s", w->side[side].label,
				 w->path_len ? p : "", w->path_len ? "/" : "",
				 name);
		else
			snprintf(w->err->path, sizeof(w->err->path), "%s: %s",
				 w->side[side].label, p);
	}
	return -e;
}

static const char *cur_path(const struct walk *w)
{
	return w->path_len ? w->path : ".";
}

static int report(struct walk *w, enum tree_diff_kind kind, const char *attr,
		  const char *a, const char *b)
{
	struct tree_diff d = {
		.kind = kind,
		.path = cur_path(w),
		.attr = attr,
		.a = a ? a : "-",
		.b = b ? b : "-",
	};
	int ret = 0;

	if (w->count == INT32_MAX)
		return fail(w, -1, "count", NULL, EOVERFLOW);
	w->count++;
	if (w->fn)
		ret = w->fn(&d, w->arg);
	if (ret > 0)
		ret = -ECANCELED;
	if (ret < 0 && w->err) {
		w->err->err = -ret;
		snprintf(w->err->op, sizeof(w->err->op), "callback");
		snprintf(w->err->path, sizeof(w->err->path), "%s",
			 cur_path(w));
	}
	return ret;
}

static int report_u(struct walk *w, enum tree_diff_kind kind,
		    unsigned long long a, unsigned long long b)
{
	char sa[32], sb[32];

	snprintf(sa, sizeof(sa), "%llu", a);
	snprintf(sb, sizeof(sb), "%llu", b);
	return report(w, kind, NULL, sa, sb);
}

/* C-escape up to max bytes of p[0..n) into out (always terminated). */
static void escape(const unsigned char *p, size_t n, size_t max, char *out,
		   size_t outlen)
{
	size_t o = 0, i;

	if (outlen == 0)
		return;
	for (i = 0; i < n && i < max; i++) {
		char tmp[8];
		size_t tl;

		switch (p[i]) {
		case '"': strcpy(tmp, "\\\""); break;
		case '\\': strcpy(tmp, "\\\\"); break;
		case '\n': strcpy(tmp, "\\n"); break;
		case '\t': strcpy(tmp, "\\t"); break;
		default:
			if (p[i] >= 0x20 && p[i] < 0x7f) {
				tmp[0] = (char)p[i];
				tmp[1] = 0;
			} else {
				snprintf(tmp, sizeof(tmp), "\\x%02x", p[i]);
			}
		}
		tl = strlen(tmp);
		if (o + tl + 4 >= outlen)
			break;
		memcpy(out + o, tmp, tl);
		o += tl;
	}
	if (i < n && o + 4 < outlen) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = 0;
}

const char *tree_type_name(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFREG: return "file";
	case S_IFDIR: return "dir";
	case S_IFLNK: return "symlink";
	case S_IFIFO: return "fifo";
	case S_IFCHR: return "chr";
	case S_IFBLK: return "blk";
	case S_IFSOCK: return "sock";
	default: return "unknown";
	}
}

static const char *const kind_names[TREE_DIFF_NKINDS] = {
	[TREE_DIFF_ONLY_A] = "only-in-a",
	[TREE_DIFF_ONLY_B] = "only-in-b",
	[TREE_DIFF_TYPE] = "type",
	[TREE_DIFF_MODE] = "mode",
	[TREE_DIFF_UID] = "uid",
	[TREE_DIFF_GID] = "gid",
	[TREE_DIFF_NLINK] = "nlink",
	[TREE_DIFF_SIZE] = "size",
	[TREE_DIFF_RDEV] = "rdev",
	[TREE_DIFF_MTIME] = "mtime",
	[TREE_DIFF_CONTENT] = "content",
	[TREE_DIFF_SYMLINK] = "symlink",
	[TREE_DIFF_XATTR_ONLY_A] = "xattr-only-in-a",
	[TREE_DIFF_XATTR_ONLY_B] = "xattr-only-in-b",
	[TREE_DIFF_XATTR_VALUE] = "xattr-value",
	[TREE_DIFF_HARDLINK] = "hardlink",
};

const char *tree_diff_kind_name(enum tree_diff_kind kind)
{
	if ((unsigned int)kind >= TREE_DIFF_NKINDS)
		return "unknown";
	return kind_names[kind];
}

int tree_diff_format(const struct tree_diff *d, char *buf, size_t len)
{
	return snprintf(buf, len, "%s: %s%s%s: %s != %s", d->path,
			tree_diff_kind_name(d->kind), d->attr ? " " : "",
			d->attr ? d->attr : "", d->a, d->b);
}

/* ---- the diff list ------------------------------------------------------ */

int tree_diff_list_add(const struct tree_diff *d, void *arg)
{
	struct tree_diff_list *l = arg;
	struct tree_diff c = { .kind = d->kind };
	char *path, *attr = NULL, *a, *b;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct tree_diff *v;

		if (cap > SIZE_MAX / sizeof(*v))
			return -ENOMEM;
		v = realloc(l->items, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->items = v;
		l->cap = cap;
	}
	path = strdup(d->path);
	a = strdup(d->a);
	b = strdup(d->b);
	if (d->attr)
		attr = strdup(d->attr);
	if (!path || !a || !b || (d->attr && !attr)) {
		free(path);
		free(a);
		free(b);
		free(attr);
		return -ENOMEM;
	}
	c.path = path;
	c.attr = attr;
	c.a = a;
	c.b = b;
	l->items[l->n++] = c;
	return 0;
}

void tree_diff_list_free(struct tree_diff_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free((char *)l->items[i].path);
		free((char *)l->items[i].attr);
		free((char *)l->items[i].a);
		free((char *)l->items[i].b);
	}
	free(l->items);
	l->items = NULL;
	l->n = l->cap = 0;
}

/* ---- the current path --------------------------------------------------- */

/* Append "/name" (or "name" at the root); returns the old length. */
static int path_push(struct walk *w, const char *name, size_t *old)
{
	size_t nl = strlen(name), need;

	need = w->path_len + 1 + nl + 1;
	if (need > w->path_cap) {
		size_t cap = w->path_cap ? w->path_cap : 256;
		char *p;

		while (cap < need)
			cap *= 2;
		p = realloc(w->path, cap);
		if (!p)
			return -ENOMEM;
		w->path = p;
		w->path_cap = cap;
	}
	*old = w->path_len;
	if (w->path_len)
		w->path[w->path_len++] = '/';
	memcpy(w->path + w->path_len, name, nl + 1);
	w->path_len += nl;
	return 0;
}

static void path_pop(struct walk *w, size_t old)
{
	w->path_len = old;
	if (w->path)
		w->path[old] = 0;
}

/* ---- hard links ---------------------------------------------------------- */

static size_t link_hash(dev_t dev, ino_t ino)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ULL ^ (uint64_t)dev;

	h ^= h >> 29;
	return (size_t)(h * 0xbf58476d1ce4e5b9ULL);
}

static int link_grow(struct link_map *m)
{
	size_t cap = m->cap ? m->cap * 2 : 64;
	struct link_slot *s;

	if (cap > SIZE_MAX / sizeof(*s))
		return -ENOMEM;
	s = calloc(cap, sizeof(*s));
	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++) {
		struct link_slot *o = &m->slots[i];
		size_t j;

		if (!o->path)
			continue;
		j = link_hash(o->dev, o->ino) & (cap - 1);
		while (s[j].path)
			j = (j + 1) & (cap - 1);
		s[j] = *o;
	}
	free(m->slots);
	m->slots = s;
	m->cap = cap;
	return 0;
}

/*
 * The first path recorded for (dev, ino) in *first (borrowed, NULL if
 * none); records path if there was none.
 */
static int link_first(struct link_map *m, dev_t dev, ino_t ino,
		      const char *path, const char **first)
{
	size_t j;

	if ((m->n + 1) * 2 > m->cap) {
		int ret = link_grow(m);

		if (ret)
			return ret;
	}
	j = link_hash(dev, ino) & (m->cap - 1);
	while (m->slots[j].path) {
		if (m->slots[j].dev == dev && m->slots[j].ino == ino) {
			*first = m->slots[j].path;
			return 0;
		}
		j = (j + 1) & (m->cap - 1);
	}
	m->slots[j].path = strdup(path);
	if (!m->slots[j].path)
		return -ENOMEM;
	m->slots[j].dev = dev;
	m->slots[j].ino = ino;
	m->n++;
	*first = NULL;
	return 0;
}

static void link_free(struct link_map *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->slots[i].path);
	free(m->slots);
	m->slots = NULL;
	m->n = m->cap = 0;
}

/* ---- names --------------------------------------------------------------- */

static void names_free(struct names *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}

static int names_add(struct names *l, const char *name, size_t len)
{
	char *s;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		char **v;

		if (cap > SIZE_MAX / sizeof(*v))
			return -ENOMEM;
		v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	s = strndup(name, len);
	if (!s)
		return -ENOMEM;
	l->v[l->n++] = s;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool ignored(const struct tree_opts *o, const char *name)
{
	for (size_t i = 0; i < o->n_ignore; i++)
		if (o->ignore[i] && !strcmp(o->ignore[i], name))
			return true;
	return false;
}

/* Read the directory open at fd into l, sorted, without . and .. */
static int read_names(struct walk *w, int side, int fd, bool root,
		      struct names *l)
{
	char *buf = w->buf[side];
	ssize_t n;

	if (lseek(fd, 0, SEEK_SET) < 0)
		return fail(w, side, "lseek", NULL, errno);
	while ((n = getdents64(fd, buf, CHUNK)) > 0) {
		ssize_t off = 0;

		while (off < n) {
			struct dirent64 *de = (struct dirent64 *)(buf + off);
			size_t max, len;
			int ret;

			if (de->d_reclen == 0 || de->d_reclen > n - off)
				return fail(w, side, "getdents64", NULL, EIO);
			off += de->d_reclen;
			max = de->d_reclen - offsetof(struct dirent64, d_name);
			len = strnlen(de->d_name, max);
			if (len == max)
				return fail(w, side, "getdents64", NULL, EIO);
			if (!strcmp(de->d_name, ".") ||
			    !strcmp(de->d_name, ".."))
				continue;
			if (root && ignored(w->opts, de->d_name))
				continue;
			ret = names_add(l, de->d_name, len);
			if (ret)
				return fail(w, side, "malloc", NULL, -ret);
		}
	}
	if (n < 0)
		return fail(w, side, "getdents64", NULL, errno);
	if (l->n > 1)
		qsort(l->v, l->n, sizeof(*l->v), cmp_str);
	return 0;
}

/* ---- extended attributes -------------------------------------------------- */

/*
 * How an object's xattrs are reached: through the open descriptor fd, or
 * (fd < 0) through dirfd and name without following a link.
 */
struct xref {
	int fd;
	int dirfd;
	const char *name;
	char proc[64 + NAME_MAX];
};

static void xref_init(struct xref *x, int fd, int dirfd, const char *name)
{
	x->fd = fd;
	x->dirfd = dirfd;
	x->name = name;
	x->proc[0] = 0;
	if (fd < 0)
		snprintf(x->proc, sizeof(x->proc), "/proc/self/fd/%d/%s",
			 dirfd, name);
}

static ssize_t x_list(const struct xref *x, char *buf, size_t len)
{
	return x->fd >= 0 ? flistxattr(x->fd, buf, len) :
			    llistxattr(x->proc, buf, len);
}

static ssize_t x_get(const struct xref *x, const char *attr, void *buf,
		     size_t len)
{
	return x->fd >= 0 ? fgetxattr(x->fd, attr, buf, len) :
			    lgetxattr(x->proc, attr, buf, len);
}

/* The xattr names of x, sorted, in l (owned by the caller). */
static int xattr_names(struct walk *w, int side, const struct xref *x,
		       struct names *l)
{
	char *buf = NULL;
	ssize_t n;

	for (int tries = 0; ; tries++) {
		char *nb;

		n = x_list(x, NULL, 0);
		if (n < 0 && (errno == ENOTSUP || errno == EOPNOTSUPP))
			return 0;
		if (n < 0)
			return fail(w, side, "listxattr", x->name, errno);
		if (n == 0)
			return 0;
		nb = realloc(buf, (size_t)n);
		if (!nb) {
			free(buf);
			return fail(w, side, "malloc", x->name, ENOMEM);
		}
		buf = nb;
		n = x_list(x, buf, (size_t)n);
		if (n >= 0)
			break;
		if (errno != ERANGE || tries > 8) {
			int e = errno;

			free(buf);
			return fail(w, side, "listxattr", x->name, e);
		}
	}
	for (ssize_t off = 0; off < n;) {
		size_t len = strnlen(buf + off, (size_t)(n - off));
		int ret;

		if (len == (size_t)(n - off)) {
			free(buf);
			return fail(w, side, "listxattr", x->name, EIO);
		}
		if (len) {
			ret = names_add(l, buf + off, len);
			if (ret) {
				free(buf);
				return fail(w, side, "malloc", x->name, -ret);
			}
		}
		off += (ssize_t)len + 1;
	}
	free(buf);
	if (l->n > 1)
		qsort(l->v, l->n, sizeof(*l->v), cmp_str);
	return 0;
}

/* The value of attr in *val (malloc'ed, owned by the caller). */
static int xattr_value(struct walk *w, int side, const struct xref *x,
		       const char *attr, char **val, size_t *vlen)
{
	char *buf = NULL;
	ssize_t n;

	*val = NULL;
	*vlen = 0;
	for (int tries = 0; ; tries++) {
		char *nb;

		n = x_get(x, attr, NULL, 0);
		if (n < 0)
			break;
		nb = realloc(buf, n ? (size_t)n : 1);
		if (!nb) {
			free(buf);
			return fail(w, side, "malloc", x->name, ENOMEM);
		}
		buf = nb;
		n = x_get(x, attr, buf, (size_t)n);
		if (n >= 0 || errno != ERANGE || tries > 8)
			break;
	}
	if (n < 0) {
		int e = errno;

		free(buf);
		return fail(w, side, "getxattr", x->name, e);
	}
	*val = buf;
	*vlen = (size_t)n;
	return 0;
}

static void format_value(const char *v, size_t n, char *out, size_t outlen)
{
	char esc[4 * SHOW_BYTES + 8];

	escape((const unsigned char *)v, n, SHOW_BYTES, esc, sizeof(esc));
	snprintf(out, outlen, "%zu bytes \"%s\"", n, esc);
}

static int compare_xattrs(struct walk *w, const struct xref *xa,
			  const struct xref *xb)
{
	struct names la = { 0 }, lb = { 0 };
	size_t i = 0, j = 0;
	int ret;

	if (w->opts->flags & TREE_NO_XATTRS)
		return 0;
	ret = xattr_names(w, 0, xa, &la);
	if (!ret)
		ret = xattr_names(w, 1, xb, &lb);
	while (!ret && (i < la.n || j < lb.n)) {
		int c = i == la.n ? 1 : j == lb.n ? -1 :
			strcmp(la.v[i], lb.v[j]);
		char *va = NULL, *vb = NULL;
		size_t na, nb;
		char sa[VALUE_LEN], sb[VALUE_LEN];

		if (c < 0) {
			ret = xattr_value(w, 0, xa, la.v[i], &va, &na);
			if (!ret) {
				format_value(va, na, sa, sizeof(sa));
				ret = report(w, TREE_DIFF_XATTR_ONLY_A,
					     la.v[i], sa, NULL);
			}
			i++;
		} else if (c > 0) {
			ret = xattr_value(w, 1, xb, lb.v[j], &vb, &nb);
			if (!ret) {
				format_value(vb, nb, sb, sizeof(sb));
				ret = report(w, TREE_DIFF_XATTR_ONLY_B,
					     lb.v[j], NULL, sb);
			}
			j++;
		} else {
			ret = xattr_value(w, 0, xa, la.v[i], &va, &na);
			if (!ret)
				ret = xattr_value(w, 1, xb, lb.v[j], &vb, &nb);
			if (!ret && (na != nb || memcmp(va, vb, na))) {
				format_value(va, na, sa, sizeof(sa));
				format_value(vb, nb, sb, sizeof(sb));
				ret = report(w, TREE_DIFF_XATTR_VALUE,
					     la.v[i], sa, sb);
			}
			i++;
			j++;
		}
		free(va);
		free(vb);
	}
	names_free(&la);
	names_free(&lb);
	return ret;
}

/* ---- contents ------------------------------------------------------------ */

/* Read exactly len bytes at off (the file must be at least that long). */
static int read_full(struct walk *w, int side, int fd, char *buf, size_t len,
		     off_t off, const char *name)
{
	while (len) {
		ssize_t n = pread(fd, buf, len, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return fail(w, side, "pread", name, errno);
		if (n == 0)	/* shrank under us */
			return fail(w, side, "pread", name, ENODATA);
		buf += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

/*
 * Where the next data at or after pos is (end if none). A file system
 * without SEEK_DATA says all of it is data.
 */
static off_t next_data(int fd, off_t pos, off_t end)
{
	off_t r = lseek(fd, pos, SEEK_DATA);

	if (r < 0)
		return errno == ENXIO ? end : pos;
	return r < end ? r : end;
}

static off_t next_hole(int fd, off_t pos, off_t end)
{
	off_t r = lseek(fd, pos, SEEK_HOLE);

	if (r < 0)
		return end;
	return r < end ? r : end;
}

/*
 * Compare the first len bytes of the two files. Ranges that are holes on
 * both sides read as zeros on both and are skipped, so sparse files of
 * any size cost only their data.
 */
static int compare_contents(struct walk *w, int fa, int fb, off_t len,
			    const char *name)
{
	off_t pos = 0;

	while (pos < len) {
		off_t da = next_data(fa, pos, len), db = next_data(fb, pos, len);
		off_t start = da < db ? da : db, end = start;

		if (start >= len)
			break;
		if (da == start)
			end = next_hole(fa, start, len);
		if (db == start) {
			off_t eb = next_hole(fb, start, len);

			end = eb > end ? eb : end;
		}
		if (end <= start)	/* no progress: compare a chunk */
			end = start + CHUNK < len ? start + CHUNK : len;
		for (pos = start; pos < end;) {
			size_t n = end - pos < CHUNK ? (size_t)(end - pos) :
						       CHUNK;
			int ret;

			ret = read_full(w, 0, fa, w->buf[0], n, pos, name);
			if (!ret)
				ret = read_full(w, 1, fb, w->buf[1], n, pos,
						name);
			if (ret)
				return ret;
			if (memcmp(w->buf[0], w->buf[1], n)) {
				char sa[64], sb[64];
				size_t k = 0;

				while (w->buf[0][k] == w->buf[1][k])
					k++;
				snprintf(sa, sizeof(sa),
					 "offset %lld byte 0x%02x",
					 (long long)(pos + (off_t)k),
					 (unsigned char)w->buf[0][k]);
				snprintf(sb, sizeof(sb),
					 "offset %lld byte 0x%02x",
					 (long long)(pos + (off_t)k),
					 (unsigned char)w->buf[1][k]);
				return report(w, TREE_DIFF_CONTENT, NULL, sa,
					      sb);
			}
			pos += (off_t)n;
		}
	}
	return 0;
}

/* ---- one object ------------------------------------------------------------- */

static int readlink_alloc(struct walk *w, int side, int dirfd,
			  const char *name, char **out, size_t *outlen)
{
	size_t cap = 256;

	for (;;) {
		char *buf = malloc(cap);
		ssize_t n;

		if (!buf)
			return fail(w, side, "malloc", name, ENOMEM);
		n = readlinkat(dirfd, name, buf, cap);
		if (n < 0) {
			int e = errno;

			free(buf);
			return fail(w, side, "readlinkat", name, e);
		}
		if ((size_t)n < cap) {
			*out = buf;
			*outlen = (size_t)n;
			return 0;
		}
		free(buf);
		if (cap >= 65536)
			return fail(w, side, "readlinkat", name, ENAMETOOLONG);
		cap *= 2;
	}
}

static int compare_symlinks(struct walk *w, int da, int db, const char *name)
{
	char *ta = NULL, *tb = NULL;
	size_t na, nb;
	int ret;

	ret = readlink_alloc(w, 0, da, name, &ta, &na);
	if (!ret)
		ret = readlink_alloc(w, 1, db, name, &tb, &nb);
	if (!ret && (na != nb || memcmp(ta, tb, na))) {
		char ea[VALUE_LEN], eb[VALUE_LEN], sa[VALUE_LEN + 2],
			sb[VALUE_LEN + 2];

		escape((unsigned char *)ta, na, 64, ea, sizeof(ea));
		escape((unsigned char *)tb, nb, 64, eb, sizeof(eb));
		snprintf(sa, sizeof(sa), "\"%s\"", ea);
		snprintf(sb, sizeof(sb), "\"%s\"", eb);
		ret = report(w, TREE_DIFF_SYMLINK, NULL, sa, sb);
	}
	free(ta);
	free(tb);
	return ret;
}

/* Attributes common to every type; both have the same type. */
static int compare_attrs(struct walk *w, const struct stat *a,
			 const struct stat *b)
{
	const unsigned int flags = w->opts->flags;
	int ret = 0;

	if ((a->st_mode & 07777) != (b->st_mode & 07777)) {
		char sa[16], sb[16];

		snprintf(sa, sizeof(sa), "%04o", (unsigned)(a->st_mode & 07777));
		snprintf(sb, sizeof(sb), "%04o", (unsigned)(b->st_mode & 07777));
		ret = report(w, TREE_DIFF_MODE, NULL, sa, sb);
	}
	if (!ret && a->st_uid != b->st_uid)
		ret = report_u(w, TREE_DIFF_UID, a->st_uid, b->st_uid);
	if (!ret && a->st_gid != b->st_gid)
		ret = report_u(w, TREE_DIFF_GID, a->st_gid, b->st_gid);
	if (!ret && a->st_nlink != b->st_nlink)
		ret = report_u(w, TREE_DIFF_NLINK, a->st_nlink, b->st_nlink);
	if (!ret && a->st_size != b->st_size &&
	    !(S_ISDIR(a->st_mode) && (flags & TREE_NO_DIR_SIZE)))
		ret = report_u(w, TREE_DIFF_SIZE, (unsigned long long)a->st_size,
			       (unsigned long long)b->st_size);
	if (!ret && (S_ISCHR(a->st_mode) || S_ISBLK(a->st_mode)) &&
	    a->st_rdev != b->st_rdev) {
		char sa[32], sb[32];

		snprintf(sa, sizeof(sa), "%u:%u", major(a->st_rdev),
			 minor(a->st_rdev));
		snprintf(sb, sizeof(sb), "%u:%u", major(b->st_rdev),
			 minor(b->st_rdev));
		ret = report(w, TREE_DIFF_RDEV, NULL, sa, sb);
	}
	if (!ret && S_ISREG(a->st_mode) && (flags & TREE_MTIME) &&
	    (a->st_mtim.tv_sec != b->st_mtim.tv_sec ||
	     a->st_mtim.tv_nsec != b->st_mtim.tv_nsec)) {
		char sa[48], sb[48];

		snprintf(sa, sizeof(sa), "%lld.%09ld",
			 (long long)a->st_mtim.tv_sec, a->st_mtim.tv_nsec);
		snprintf(sb, sizeof(sb), "%lld.%09ld",
			 (long long)b->st_mtim.tv_sec, b->st_mtim.tv_nsec);
		ret = report(w, TREE_DIFF_MTIME, NULL, sa, sb);
	}
	return ret;
}

static int compare_hardlinks(struct walk *w, const struct stat *a,
			     const struct stat *b)
{
	const char *fa = NULL, *fb = NULL;
	int ret;

	if (S_ISDIR(a->st_mode))
		return 0;
	if (a->st_nlink > 1) {
		ret = link_first(&w->side[0].links, a->st_dev, a->st_ino,
				 w->path, &fa);
		if (ret)
			return fail(w, 0, "malloc", NULL, -ret);
	}
	if (b->st_nlink > 1) {
		ret = link_first(&w->side[1].links, b->st_dev, b->st_ino,
				 w->path, &fb);
		if (ret)
			return fail(w, 1, "malloc", NULL, -ret);
	}
	if ((fa == NULL) != (fb == NULL) || (fa && strcmp(fa, fb)))
		return report(w, TREE_DIFF_HARDLINK, NULL, fa, fb);
	return 0;
}

static int compare_dir(struct walk *w, int da, int db, bool root);

static int open_at(struct walk *w, int side, int dirfd, const char *name,
		   int flags, int *fd)
{
	*fd = openat(dirfd, name, flags | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	if (*fd < 0)
		return fail(w, side, "openat", name, errno);
	return 0;
}

/* Compare the object name (present on both sides) in da and db. */
static int compare_entry(struct walk *w, int da, int db, const char *name)
{
	struct stat sa, sb;
	int fa = -1, fb = -1, ret;
	struct xref xa, xb;

	if (fstatat(da, name, &sa, AT_SYMLINK_NOFOLLOW))
		return fail(w, 0, "fstatat", name, errno);
	if (fstatat(db, name, &sb, AT_SYMLINK_NOFOLLOW))
		return fail(w, 1, "fstatat", name, errno);
	if ((sa.st_mode & S_IFMT) != (sb.st_mode & S_IFMT))
		return report(w, TREE_DIFF_TYPE, NULL, tree_type_name(sa.st_mode),
			      tree_type_name(sb.st_mode));

	ret = compare_hardlinks(w, &sa, &sb);
	if (!ret)
		ret = compare_attrs(w, &sa, &sb);
	if (ret)
		return ret;

	if (S_ISREG(sa.st_mode) || S_ISDIR(sa.st_mode)) {
		int fl = S_ISDIR(sa.st_mode) ? O_RDONLY | O_DIRECTORY :
					       O_RDONLY | O_NONBLOCK;

		ret = open_at(w, 0, da, name, fl, &fa);
		if (!ret)
			ret = open_at(w, 1, db, name, fl, &fb);
		if (ret)
			goto out;
	}
	xref_init(&xa, fa, da, name);
	xref_init(&xb, fb, db, name);
	ret = compare_xattrs(w, &xa, &xb);
	if (ret)
		goto out;

	if (S_ISLNK(sa.st_mode)) {
		ret = compare_symlinks(w, da, db, name);
	} else if (S_ISREG(sa.st_mode)) {
		off_t len = sa.st_size < sb.st_size ? sa.st_size : sb.st_size;

		ret = compare_contents(w, fa, fb, len, name);
	} else if (S_ISDIR(sa.st_mode) && sa.st_dev == w->side[0].dev &&
		   sb.st_dev == w->side[1].dev) {
		ret = compare_dir(w, fa, fb, false);
	}
out:
	if (fa >= 0)
		close(fa);
	if (fb >= 0)
		close(fb);
	return ret;
}

/* A name on one side only: report it with its type. */
static int report_only(struct walk *w, int side, int dirfd, const char *name)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW))
		return fail(w, side, "fstatat", name, errno);
	if (side == 0)
		return report(w, TREE_DIFF_ONLY_A, NULL, tree_type_name(st.st_mode),
			      NULL);
	return report(w, TREE_DIFF_ONLY_B, NULL, NULL, tree_type_name(st.st_mode));
}

static int compare_dir(struct walk *w, int da, int db, bool root)
{
	struct names la = { 0 }, lb = { 0 };
	size_t i = 0, j = 0;
	int ret;

	ret = read_names(w, 0, da, root, &la);
	if (!ret)
		ret = read_names(w, 1, db, root, &lb);
	while (!ret && (i < la.n || j < lb.n)) {
		int c = i == la.n ? 1 : j == lb.n ? -1 :
			strcmp(la.v[i], lb.v[j]);
		const char *name = c <= 0 ? la.v[i] : lb.v[j];
		size_t old;

		ret = path_push(w, name, &old);
		if (ret) {
			ret = fail(w, -1, "malloc", NULL, -ret);
			break;
		}
		if (c < 0) {
			ret = report_only(w, 0, da, name);
			i++;
		} else if (c > 0) {
			ret = report_only(w, 1, db, name);
			j++;
		} else {
			ret = compare_entry(w, da, db, name);
			i++;
			j++;
		}
		path_pop(w, old);
	}
	names_free(&la);
	names_free(&lb);
	return ret;
}

/* ---- the entry point ----------------------------------------------------- */

int tree_compare(const char *a, const char *b, const struct tree_opts *opts,
		 tree_diff_fn fn, void *arg, struct tree_error *err)
{
	static const struct tree_opts defaults;
	struct walk w = {
		.opts = opts ? opts : &defaults,
		.fn = fn,
		.arg = arg,
		.err = err,
		.side = { { .label = "A" }, { .label = "B" } },
	};
	const char *roots[2] = { a, b };
	int fd[2] = { -1, -1 };
	struct stat st[2];
	int ret = 0;

	if (err)
		memset(err, 0, sizeof(*err));
	if (!a || !b)
		return fail(&w, -1, "tree_compare", NULL, EINVAL);
	w.path = calloc(1, 256);
	w.buf[0] = malloc(CHUNK);
	w.buf[1] = malloc(CHUNK);
	if (!w.path || !w.buf[0] || !w.buf[1]) {
		ret = fail(&w, -1, "malloc", NULL, ENOMEM);
		goto out;
	}
	w.path_cap = 256;
	for (int s = 0; s < 2; s++) {
		fd[s] = open(roots[s], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd[s] < 0 || fstat(fd[s], &st[s])) {
			ret = fail(&w, s, "open", roots[s], errno);
			goto out;
		}
		w.side[s].dev = st[s].st_dev;
	}
	if (w.opts->flags & TREE_ROOT_ATTRS) {
		struct xref xa, xb;

		ret = compare_attrs(&w, &st[0], &st[1]);
		xref_init(&xa, fd[0], -1, ".");
		xref_init(&xb, fd[1], -1, ".");
		if (!ret)
			ret = compare_xattrs(&w, &xa, &xb);
	}
	if (!ret)
		ret = compare_dir(&w, fd[0], fd[1], true);
out:
	for (int s = 0; s < 2; s++) {
		if (fd[s] >= 0)
			close(fd[s]);
		link_free(&w.side[s].links);
		free(w.buf[s]);
	}
	free(w.path);
	return ret < 0 ? ret : w.count;
}
