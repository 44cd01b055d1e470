// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of the tree comparison library (tests/lib/tree.c), on the
 * host, in a fresh directory under /tmp per test: two trees a/ and b/
 * are built, compared, and the exact list of differences is checked.
 * Tests that need root (owners, device nodes, trusted.* xattrs) skip
 * their root-only part when not run as root.
 */
#include "tree.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <unistd.h>

static char top[64];		/* /tmp/unit-tree-XXXXXX, for the run */
static char base[96];		/* top/tN, for one test */
static char dir_a[128], dir_b[128], dir_out[128];
static struct tree_diff_list diffs;

/* ---- helpers ---------------------------------------------------------------- */

/* base/REL formatted; a static ring of buffers, enough for one call. */
static const char *P(const char *fmt, ...)
{
	static char bufs[8][8192];
	static int next;
	char rel[8000];
	char *buf = bufs[next++ % 8];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rel, sizeof(rel), fmt, ap);
	va_end(ap);
	ck_assert_int_lt(snprintf(buf, sizeof(bufs[0]), "%s/%s", base, rel),
			 (int)sizeof(bufs[0]));
	return buf;
}

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	ck_assert_int_eq(close(fd), 0);
}

static void put(const char *path, const char *s)
{
	write_file(path, s, strlen(s));
}

static void mkdir_ok(const char *path)
{
	ck_assert_msg(mkdir(path, 0755) == 0, "mkdir %s: %s", path,
		      strerror(errno));
}

static void symlink_ok(const char *target, const char *path)
{
	ck_assert_msg(symlink(target, path) == 0, "symlink %s: %s", path,
		      strerror(errno));
}

static void link_ok(const char *old, const char *new)
{
	ck_assert_msg(link(old, new) == 0, "link %s: %s", new,
		      strerror(errno));
}

static void xattr_ok(const char *path, const char *name, const char *value)
{
	ck_assert_msg(lsetxattr(path, name, value, strlen(value), 0) == 0,
		      "setxattr %s %s: %s", path, name, strerror(errno));
}

static bool is_root(void)
{
	return geteuid() == 0;
}

/* Remove name in parent and everything under it, at any depth. */
static int rm_at(int parent, const char *name)
{
	struct dirent *de;
	int fd, ret = 0;
	DIR *d;

	if (!unlinkat(parent, name, 0) || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -1;
	fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (rm_at(dirfd(d), de->d_name))
			ret = -1;
	}
	closedir(d);
	if (unlinkat(parent, name, AT_REMOVEDIR))
		ret = -1;
	return ret;
}

/* Run the comparison into diffs; returns what tree_compare() returned. */
static int compare(const struct tree_opts *opts)
{
	struct tree_error err;
	int n;

	tree_diff_list_free(&diffs);
	n = tree_compare(dir_a, dir_b, opts, tree_diff_list_add, &diffs, &err);
	ck_assert_msg(n >= 0, "tree_compare: %s: %s: %s", err.path, err.op,
		      strerror(err.err));
	ck_assert_int_eq((size_t)n, diffs.n);
	return n;
}

/* Assert that difference i is exactly this. */
static void expect(size_t i, enum tree_diff_kind kind, const char *path,
		   const char *attr, const char *a, const char *b)
{
	const struct tree_diff *d;

	ck_assert_msg(i < diffs.n, "difference %zu missing (have %zu)", i,
		      diffs.n);
	d = &diffs.items[i];
	ck_assert_str_eq(tree_diff_kind_name(d->kind), tree_diff_kind_name(kind));
	ck_assert_str_eq(d->path, path);
	if (attr)
		ck_assert_pstr_eq(d->attr, attr);
	else
		ck_assert_ptr_null(d->attr);
	ck_assert_str_eq(d->a, a);
	ck_assert_str_eq(d->b, b);
}

/* The one difference found is exactly this. */
static void expect_one(enum tree_diff_kind kind, const char *path,
		       const char *attr, const char *a, const char *b)
{
	int n = compare(NULL);

	if (n != 1) {
		for (size_t i = 0; i < diffs.n; i++) {
			char line[1024];

			tree_diff_format(&diffs.items[i], line, sizeof(line));
			fprintf(stderr, "  %s\n", line);
		}
	}
	ck_assert_int_eq(n, 1);
	expect(0, kind, path, attr, a, b);
}

/* The same rich tree under both a/ and b/. */
static void build_rich(const char *side)
{
	char big[10000];

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 7 + 3);
	mkdir_ok(P("%s/d1", side));
	mkdir_ok(P("%s/d1/d2", side));
	put(P("%s/f", side), "hello\n");
	write_file(P("%s/d1/big", side), big, sizeof(big));
	put(P("%s/d1/d2/empty", side), "");
	link_ok(P("%s/f", side), P("%s/d1/f-link", side));
	symlink_ok("f", P("%s/s", side));
	symlink_ok("nowhere/dangling", P("%s/d1/dangling", side));
	ck_assert_int_eq(mkfifo(P("%s/fifo", side), 0640), 0);
	xattr_ok(P("%s/f", side), "user.one", "1");
	xattr_ok(P("%s/d1", side), "user.dir", "dirval");
	ck_assert_int_eq(chmod(P("%s/d1/d2", side), 02750), 0);
}

/* ---- fixture ------------------------------------------------------------------ */

/*
 * Each test runs in a child process in a directory of its own under top;
 * main() removes top at the end, so a failed test leaves nothing behind.
 */
static void setup(void)
{
	snprintf(base, sizeof(base), "%s/tXXXXXX", top);
	ck_assert_ptr_nonnull(mkdtemp(base));
	snprintf(dir_a, sizeof(dir_a), "%s/a", base);
	snprintf(dir_b, sizeof(dir_b), "%s/b", base);
	snprintf(dir_out, sizeof(dir_out), "%s/out", base);
	mkdir_ok(dir_a);
	mkdir_ok(dir_b);
	mkdir_ok(dir_out);	/* outside both trees, for extra links */
	umask(022);
}

static void teardown(void)
{
	tree_diff_list_free(&diffs);
	rm_at(AT_FDCWD, base);
}

/* ---- tests --------------------------------------------------------------------- */

START_TEST(test_empty_equal)
{
	ck_assert_int_eq(compare(NULL), 0);
}
END_TEST

START_TEST(test_rich_equal)
{
	build_rich("a");
	build_rich("b");
	ck_assert_int_eq(compare(NULL), 0);
	/* Also equal compared with itself, the same tree on both sides. */
	ck_assert_int_eq(tree_compare(dir_a, dir_a, NULL, NULL, NULL, NULL), 0);
}
END_TEST

START_TEST(test_missing_name)
{
	build_rich("a");
	build_rich("b");
	ck_assert_int_eq(unlink(P("b/d1/d2/empty")), 0);
	expect_one(TREE_DIFF_ONLY_A, "d1/d2/empty", NULL, "file", "-");
}
END_TEST

START_TEST(test_extra_name)
{
	build_rich("a");
	build_rich("b");
	put(P("b/d1/d2/new"), "x");
	expect_one(TREE_DIFF_ONLY_B, "d1/d2/new", NULL, "-", "file");
	/* A new directory also adds a link to its parent. */
	mkdir_ok(P("b/d1/newdir"));
	put(P("b/d1/newdir/inside"), "x");	/* not reported on its own */
	ck_assert_int_eq(compare(NULL), 3);
	expect(0, TREE_DIFF_NLINK, "d1", NULL, "3", "4");
	expect(1, TREE_DIFF_ONLY_B, "d1/d2/new", NULL, "-", "file");
	expect(2, TREE_DIFF_ONLY_B, "d1/newdir", NULL, "-", "dir");
}
END_TEST

START_TEST(test_type)
{
	put(P("a/x"), "");
	mkdir_ok(P("b/x"));
	put(P("b/x/under"), "");		/* not entered */
	expect_one(TREE_DIFF_TYPE, "x", NULL, "file", "dir");
}
END_TEST

START_TEST(test_type_symlink_fifo)
{
	symlink_ok("t", P("a/x"));
	ck_assert_int_eq(mkfifo(P("b/x"), 0644), 0);
	expect_one(TREE_DIFF_TYPE, "x", NULL, "symlink", "fifo");
}
END_TEST

START_TEST(test_size)
{
	put(P("a/f"), "abc");
	put(P("b/f"), "abcd");
	/* The common prefix is equal: the size is the only difference. */
	expect_one(TREE_DIFF_SIZE, "f", NULL, "3", "4");
}
END_TEST

START_TEST(test_mode)
{
	put(P("a/f"), "abc");
	put(P("b/f"), "abc");
	ck_assert_int_eq(chmod(P("b/f"), 04755), 0);
	expect_one(TREE_DIFF_MODE, "f", NULL, "0644", "4755");
}
END_TEST

START_TEST(test_mode_sticky_dir)
{
	mkdir_ok(P("a/d"));
	mkdir_ok(P("b/d"));
	ck_assert_int_eq(chmod(P("a/d"), 01777), 0);
	ck_assert_int_eq(chmod(P("b/d"), 0777), 0);
	expect_one(TREE_DIFF_MODE, "d", NULL, "1777", "0777");
}
END_TEST

START_TEST(test_owner)
{
	if (!is_root())
		return;
	put(P("a/f"), "");
	put(P("b/f"), "");
	ck_assert_int_eq(lchown(P("a/f"), 1234, 0), 0);
	ck_assert_int_eq(lchown(P("b/f"), 0, 0), 0);
	expect_one(TREE_DIFF_UID, "f", NULL, "1234", "0");
	ck_assert_int_eq(lchown(P("a/f"), 0, 0), 0);
	ck_assert_int_eq(lchown(P("b/f"), 0, 99), 0);
	expect_one(TREE_DIFF_GID, "f", NULL, "0", "99");
}
END_TEST

START_TEST(test_content_last_byte)
{
	enum { LEN = 200000 };
	char *buf = malloc(LEN);

	ck_assert_ptr_nonnull(buf);
	for (size_t i = 0; i < LEN; i++)
		buf[i] = (char)(i % 251);
	write_file(P("a/f"), buf, LEN);
	buf[LEN - 1] ^= 0x01;
	write_file(P("b/f"), buf, LEN);
	/* 199999 % 251 == 203 */
	expect_one(TREE_DIFF_CONTENT, "f", NULL, "offset 199999 byte 0xcb",
		   "offset 199999 byte 0xca");
	free(buf);
}
END_TEST

START_TEST(test_content_sparse)
{
	/* 1 TiB sparse files: only their data is read. */
	const off_t far = (off_t)1 << 40;
	int fa = open(P("a/sparse"), O_WRONLY | O_CREAT, 0644);
	int fb = open(P("b/sparse"), O_WRONLY | O_CREAT, 0644);

	ck_assert_int_ge(fa, 0);
	ck_assert_int_ge(fb, 0);
	ck_assert_int_eq(pwrite(fa, "x", 1, 4096 * 3), 1);
	ck_assert_int_eq(pwrite(fb, "x", 1, 4096 * 3), 1);
	ck_assert_int_eq(pwrite(fa, "end", 3, far), 3);
	ck_assert_int_eq(pwrite(fb, "end", 3, far), 3);
	close(fa);
	close(fb);
	ck_assert_int_eq(compare(NULL), 0);

	/* Data on one side where the other has a hole. */
	fb = open(P("b/sparse"), O_WRONLY);
	ck_assert_int_ge(fb, 0);
	ck_assert_int_eq(pwrite(fb, "\x01", 1, far / 2), 1);
	close(fb);
	expect_one(TREE_DIFF_CONTENT, "sparse", NULL,
		   "offset 549755813888 byte 0x00",
		   "offset 549755813888 byte 0x01");
}
END_TEST

START_TEST(test_symlink_target)
{
	symlink_ok("target/one", P("a/l"));
	symlink_ok("target/two", P("b/l"));
	expect_one(TREE_DIFF_SYMLINK, "l", NULL, "\"target/one\"",
		   "\"target/two\"");
}
END_TEST

START_TEST(test_symlink_not_followed)
{
	/* Equal links to different directories: nothing is entered. */
	mkdir_ok(P("a/real"));
	put(P("a/real/only-here"), "");
	mkdir_ok(P("b/real"));
	put(P("b/real/only-here"), "");
	symlink_ok("../out", P("a/real/l"));
	symlink_ok("../out", P("b/real/l"));
	put(P("out/elsewhere"), "");
	ck_assert_int_eq(compare(NULL), 0);
}
END_TEST

START_TEST(test_xattr_value)
{
	put(P("a/f"), "");
	put(P("b/f"), "");
	xattr_ok(P("a/f"), "user.k", "value-a");
	xattr_ok(P("b/f"), "user.k", "value-b\n");
	expect_one(TREE_DIFF_XATTR_VALUE, "f", "user.k",
		   "7 bytes \"value-a\"", "8 bytes \"value-b\\n\"");
}
END_TEST

START_TEST(test_xattr_missing)
{
	mkdir_ok(P("a/d"));
	mkdir_ok(P("b/d"));
	xattr_ok(P("a/d"), "user.both", "same");
	xattr_ok(P("b/d"), "user.both", "same");
	xattr_ok(P("a/d"), "user.gone", "");
	expect_one(TREE_DIFF_XATTR_ONLY_A, "d", "user.gone", "0 bytes \"\"",
		   "-");
	ck_assert_int_eq(removexattr(P("a/d"), "user.gone"), 0);
	xattr_ok(P("b/d"), "user.new", "n");
	expect_one(TREE_DIFF_XATTR_ONLY_B, "d", "user.new", "-",
		   "1 bytes \"n\"");
}
END_TEST

START_TEST(test_xattr_binary_long)
{
	char va[3000], vb[3000];

	memset(va, 0xff, sizeof(va));
	memcpy(vb, va, sizeof(vb));
	vb[2999] = 0;
	put(P("a/f"), "");
	put(P("b/f"), "");
	ck_assert_int_eq(setxattr(P("a/f"), "user.big", va, sizeof(va), 0), 0);
	ck_assert_int_eq(setxattr(P("b/f"), "user.big", vb, sizeof(vb), 0), 0);
	ck_assert_int_eq(compare(NULL), 1);
	ck_assert_int_eq(diffs.items[0].kind, TREE_DIFF_XATTR_VALUE);
	ck_assert_ptr_nonnull(strstr(diffs.items[0].a, "3000 bytes \"\\xff"));
	ck_assert_ptr_nonnull(strstr(diffs.items[0].a, "...\""));
}
END_TEST

START_TEST(test_xattr_trusted_symlink)
{
	if (!is_root())
		return;
	/* user.* is refused on symlinks; trusted.* is not. */
	symlink_ok("t", P("a/l"));
	symlink_ok("t", P("b/l"));
	xattr_ok(P("a/l"), "trusted.x", "1");
	expect_one(TREE_DIFF_XATTR_ONLY_A, "l", "trusted.x", "1 bytes \"1\"",
		   "-");
	/* The link's own xattrs, not its target's. */
	put(P("a/t"), "");
	put(P("b/t"), "");
	xattr_ok(P("b/l"), "trusted.x", "1");
	xattr_ok(P("b/t"), "trusted.y", "2");
	expect_one(TREE_DIFF_XATTR_ONLY_B, "t", "trusted.y", "-",
		   "1 bytes \"2\"");
}
END_TEST

START_TEST(test_xattr_fifo)
{
	if (!is_root())
		return;
	ck_assert_int_eq(mkfifo(P("a/p"), 0644), 0);
	ck_assert_int_eq(mkfifo(P("b/p"), 0644), 0);
	xattr_ok(P("a/p"), "trusted.p", "a");
	xattr_ok(P("b/p"), "trusted.p", "b");
	expect_one(TREE_DIFF_XATTR_VALUE, "p", "trusted.p", "1 bytes \"a\"",
		   "1 bytes \"b\"");
}
END_TEST

START_TEST(test_nlink)
{
	/* An extra name outside the compared tree: only nlink differs. */
	put(P("a/f"), "same");
	put(P("b/f"), "same");
	link_ok(P("a/f"), P("out/extra"));
	expect_one(TREE_DIFF_NLINK, "f", NULL, "2", "1");
}
END_TEST

START_TEST(test_hardlink_structure)
{
	/*
	 * A: x and y are one inode. B: x and y are two files with the same
	 * content, each with one more name outside the tree, so every
	 * name's link count and content match: only the structure differs.
	 */
	put(P("a/x"), "data");
	link_ok(P("a/x"), P("a/y"));
	put(P("b/x"), "data");
	put(P("b/y"), "data");
	link_ok(P("b/x"), P("out/bx"));
	link_ok(P("b/y"), P("out/by"));
	expect_one(TREE_DIFF_HARDLINK, "y", NULL, "x", "-");
}
END_TEST

START_TEST(test_hardlink_other_partner)
{
	/* Three names, linked in pairs differently: d/p-q on A, d/p-r on B. */
	mkdir_ok(P("a/d"));
	mkdir_ok(P("b/d"));
	put(P("a/d/p"), "1");
	link_ok(P("a/d/p"), P("a/d/q"));
	put(P("a/d/r"), "1");
	link_ok(P("a/d/r"), P("out/ar"));
	put(P("b/d/p"), "1");
	link_ok(P("b/d/p"), P("b/d/r"));
	put(P("b/d/q"), "1");
	link_ok(P("b/d/q"), P("out/bq"));
	ck_assert_int_eq(compare(NULL), 2);
	expect(0, TREE_DIFF_HARDLINK, "d/q", NULL, "d/p", "-");
	expect(1, TREE_DIFF_HARDLINK, "d/r", NULL, "-", "d/p");
}
END_TEST

START_TEST(test_hardlink_across_dirs_equal)
{
	mkdir_ok(P("a/d"));
	mkdir_ok(P("b/d"));
	put(P("a/f"), "z");
	link_ok(P("a/f"), P("a/d/g"));
	put(P("b/f"), "z");
	link_ok(P("b/f"), P("b/d/g"));
	ck_assert_int_eq(compare(NULL), 0);
}
END_TEST

START_TEST(test_device)
{
	if (!is_root())
		return;
	ck_assert_int_eq(mknod(P("a/c"), S_IFCHR | 0600, makedev(1, 3)), 0);
	ck_assert_int_eq(mknod(P("b/c"), S_IFCHR | 0600, makedev(1, 5)), 0);
	expect_one(TREE_DIFF_RDEV, "c", NULL, "1:3", "1:5");
}
END_TEST

START_TEST(test_ignore_root_names)
{
	const char *ign[] = { ".presto", "lost+found" };
	struct tree_opts o = { .ignore = ign, .n_ignore = 2 };

	mkdir_ok(P("a/.presto"));
	put(P("a/.presto/journal"), "j");
	mkdir_ok(P("b/lost+found"));
	mkdir_ok(P("a/sub"));
	mkdir_ok(P("b/sub"));
	ck_assert_int_eq(compare(&o), 0);
	/* Not ignored below the root. */
	put(P("a/sub/.presto"), "");
	ck_assert_int_eq(compare(&o), 1);
	expect(0, TREE_DIFF_ONLY_A, "sub/.presto", NULL, "file", "-");
	/* Nor at all without the option. */
	ck_assert_int_eq(compare(NULL), 3);
	expect(0, TREE_DIFF_ONLY_A, ".presto", NULL, "dir", "-");
	expect(1, TREE_DIFF_ONLY_B, "lost+found", NULL, "-", "dir");
	expect(2, TREE_DIFF_ONLY_A, "sub/.presto", NULL, "file", "-");
}
END_TEST

START_TEST(test_mtime_option)
{
	struct timespec ta[2] = { { 100, 5 }, { 1000, 123 } };
	struct timespec tb[2] = { { 200, 5 }, { 1000, 124 } };
	struct tree_opts o = { .flags = TREE_MTIME };

	put(P("a/f"), "t");
	put(P("b/f"), "t");
	ck_assert_int_eq(utimensat(AT_FDCWD, P("a/f"), ta, 0), 0);
	ck_assert_int_eq(utimensat(AT_FDCWD, P("b/f"), tb, 0), 0);
	ck_assert_int_eq(compare(NULL), 0);	/* times ignored by default */
	ck_assert_int_eq(compare(&o), 1);
	expect(0, TREE_DIFF_MTIME, "f", NULL, "1000.000000123",
	       "1000.000000124");
}
END_TEST

START_TEST(test_root_attrs)
{
	struct tree_opts o = { .flags = TREE_ROOT_ATTRS };

	ck_assert_int_eq(chmod(dir_a, 0700), 0);
	ck_assert_int_eq(compare(NULL), 0);
	ck_assert_int_eq(compare(&o), 1);
	expect(0, TREE_DIFF_MODE, ".", NULL, "0700", "0755");
}
END_TEST

START_TEST(test_dir_size_option)
{
	struct tree_opts o = { .flags = TREE_NO_DIR_SIZE };

	mkdir_ok(P("a/d"));
	mkdir_ok(P("b/d"));
	/* Enough entries to grow a's directory, then gone again. */
	for (int i = 0; i < 300; i++)
		put(P("a/d/a-rather-long-name-to-fill-blocks-%03d", i), "");
	for (int i = 0; i < 300; i++)
		ck_assert_int_eq(
			unlink(P("a/d/a-rather-long-name-to-fill-blocks-%03d",
				 i)), 0);
	struct stat sa, sb;

	ck_assert_int_eq(stat(P("a/d"), &sa), 0);
	ck_assert_int_eq(stat(P("b/d"), &sb), 0);
	if (sa.st_size == sb.st_size)
		return;		/* a file system that shrinks directories */
	ck_assert_int_eq(compare(NULL), 1);
	ck_assert_int_eq(diffs.items[0].kind, TREE_DIFF_SIZE);
	ck_assert_int_eq(compare(&o), 0);
}
END_TEST

START_TEST(test_deep)
{
	/* Deeper than PATH_MAX allows in one path: 300 levels of 20 chars. */
	enum { DEPTH = 300 };
	static const char seg[] = "level-name-of-20-ch";
	char expected[DEPTH * 20 + 8];
	int da, db;

	da = open(dir_a, O_RDONLY | O_DIRECTORY);
	db = open(dir_b, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(da, 0);
	ck_assert_int_ge(db, 0);
	expected[0] = 0;
	for (int i = 0; i < DEPTH; i++) {
		int na, nb;

		ck_assert_int_eq(mkdirat(da, seg, 0755), 0);
		ck_assert_int_eq(mkdirat(db, seg, 0755), 0);
		na = openat(da, seg, O_RDONLY | O_DIRECTORY);
		nb = openat(db, seg, O_RDONLY | O_DIRECTORY);
		ck_assert_int_ge(na, 0);
		ck_assert_int_ge(nb, 0);
		close(da);
		close(db);
		da = na;
		db = nb;
		if (i)
			strcat(expected, "/");
		strcat(expected, seg);
	}
	ck_assert_int_gt(strlen(expected), 4096);
	ck_assert_int_eq(compare(NULL), 0);

	/* One difference at the very bottom. */
	int fd = openat(da, "leaf", O_WRONLY | O_CREAT, 0644);

	ck_assert_int_ge(fd, 0);
	close(fd);
	fd = openat(db, "leaf", O_WRONLY | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	strcat(expected, "/leaf");
	expect_one(TREE_DIFF_MODE, expected, NULL, "0644", "0600");
	close(da);
	close(db);
}
END_TEST

START_TEST(test_wide)
{
	/* Many names, one difference in the middle, reported in order. */
	for (int i = 0; i < 2000; i++) {
		put(P("a/n%04d", i), "v");
		put(P("b/n%04d", i), i == 1234 ? "w" : "v");
	}
	put(P("b/n1500x"), "");
	ck_assert_int_eq(compare(NULL), 2);
	expect(0, TREE_DIFF_CONTENT, "n1234", NULL, "offset 0 byte 0x76",
	       "offset 0 byte 0x77");
	expect(1, TREE_DIFF_ONLY_B, "n1500x", NULL, "-", "file");
}
END_TEST

START_TEST(test_many_kinds_reported)
{
	/* Every difference of one object is reported, not just the first. */
	put(P("a/f"), "abc");
	put(P("b/f"), "abd!");
	ck_assert_int_eq(chmod(P("b/f"), 0600), 0);
	xattr_ok(P("a/f"), "user.a", "1");
	ck_assert_int_eq(compare(NULL), 4);
	expect(0, TREE_DIFF_MODE, "f", NULL, "0644", "0600");
	expect(1, TREE_DIFF_SIZE, "f", NULL, "3", "4");
	expect(2, TREE_DIFF_XATTR_ONLY_A, "f", "user.a", "1 bytes \"1\"", "-");
	expect(3, TREE_DIFF_CONTENT, "f", NULL, "offset 2 byte 0x63",
	       "offset 2 byte 0x64");
}
END_TEST

static int stop_after_first(const struct tree_diff *d, void *arg)
{
	int *calls = arg;

	(void)d;
	(*calls)++;
	return -EINTR;
}

START_TEST(test_callback_stops)
{
	struct tree_error err;
	int calls = 0;

	put(P("a/x"), "");
	put(P("a/y"), "");
	ck_assert_int_eq(tree_compare(dir_a, dir_b, NULL, stop_after_first,
				      &calls, &err), -EINTR);
	ck_assert_int_eq(calls, 1);
	ck_assert_int_eq(err.err, EINTR);
	ck_assert_str_eq(err.path, "x");
}
END_TEST

START_TEST(test_errors)
{
	struct tree_error err;

	ck_assert_int_eq(tree_compare(P("no-such"), dir_b, NULL, NULL, NULL,
				      &err), -ENOENT);
	ck_assert_int_eq(err.err, ENOENT);
	ck_assert_str_eq(err.op, "open");
	ck_assert_ptr_nonnull(strstr(err.path, "no-such"));
	put(P("a/file"), "");
	ck_assert_int_eq(tree_compare(dir_b, P("a/file"), NULL, NULL, NULL,
				      &err), -ENOTDIR);
	ck_assert_int_eq(tree_compare(NULL, dir_b, NULL, NULL, NULL, NULL),
			 -EINVAL);
}
END_TEST

START_TEST(test_format)
{
	struct tree_diff d = {
		.kind = TREE_DIFF_XATTR_VALUE, .path = "p/q", .attr = "user.x",
		.a = "1 bytes \"a\"", .b = "-",
	};
	char small[8], line[128];

	ck_assert_int_eq(tree_diff_format(&d, line, sizeof(line)),
			 (int)strlen(line));
	ck_assert_str_eq(line, "p/q: xattr-value user.x: 1 bytes \"a\" != -");
	tree_diff_format(&d, small, sizeof(small));
	ck_assert_str_eq(small, "p/q: xa");
	ck_assert_str_eq(tree_diff_kind_name(TREE_DIFF_NKINDS), "unknown");
	ck_assert_str_eq(tree_diff_kind_name(TREE_DIFF_HARDLINK), "hardlink");
}
END_TEST

static Suite *tree_suite(void)
{
	Suite *s = suite_create("tree");
	TCase *tc = tcase_create("compare");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_empty_equal);
	tcase_add_test(tc, test_rich_equal);
	tcase_add_test(tc, test_missing_name);
	tcase_add_test(tc, test_extra_name);
	tcase_add_test(tc, test_type);
	tcase_add_test(tc, test_type_symlink_fifo);
	tcase_add_test(tc, test_size);
	tcase_add_test(tc, test_mode);
	tcase_add_test(tc, test_mode_sticky_dir);
	tcase_add_test(tc, test_owner);
	tcase_add_test(tc, test_content_last_byte);
	tcase_add_test(tc, test_content_sparse);
	tcase_add_test(tc, test_symlink_target);
	tcase_add_test(tc, test_symlink_not_followed);
	tcase_add_test(tc, test_xattr_value);
	tcase_add_test(tc, test_xattr_missing);
	tcase_add_test(tc, test_xattr_binary_long);
	tcase_add_test(tc, test_xattr_trusted_symlink);
	tcase_add_test(tc, test_xattr_fifo);
	tcase_add_test(tc, test_nlink);
	tcase_add_test(tc, test_hardlink_structure);
	tcase_add_test(tc, test_hardlink_other_partner);
	tcase_add_test(tc, test_hardlink_across_dirs_equal);
	tcase_add_test(tc, test_device);
	tcase_add_test(tc, test_ignore_root_names);
	tcase_add_test(tc, test_mtime_option);
	tcase_add_test(tc, test_root_attrs);
	tcase_add_test(tc, test_dir_size_option);
	tcase_add_test(tc, test_deep);
	tcase_add_test(tc, test_wide);
	tcase_add_test(tc, test_many_kinds_reported);
	tcase_add_test(tc, test_callback_stops);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_format);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr;
	int failed;

	snprintf(top, sizeof(top), "/tmp/unit-tree-XXXXXX");
	if (!mkdtemp(top)) {
		perror("unit-tree: mkdtemp");
		return EXIT_FAILURE;
	}
	sr = srunner_create(tree_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	if (rm_at(AT_FDCWD, top))
		perror("unit-tree: removing the test directory");
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
