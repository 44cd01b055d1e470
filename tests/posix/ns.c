/*
 * Namespace cases: names and what they name. open/creat, name and path
 * lengths, mkdir, rmdir, unlink, link, rename, symlink, mknod, readdir,
 * racing namespace calls, O_TMPFILE, permissions on directories, setgid
 * directories, statx, directory times and statfs.
 * Every case holds on ext4 itself (that is the bar), and so must on presto.
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/fs.h>
#include "posix.h"

#define USER	1000	/* the unprivileged user of the permission cases */
#define OTHER	1001	/* another one */

/* ------------------------------------------------------------------ */
/* Helpers                                                            */
/* ------------------------------------------------------------------ */

/* lstat(path), which must succeed; evaluates to the struct stat. */
#define LSTAT(path)							\
	({								\
		struct stat _st;					\
		CHECK_OK(lstat((path), &_st));				\
		_st;							\
	})

/* The file's whole content must be exactly @s. */
#define CHECK_CONTENT(path, s)						\
	do {								\
		char _buf[256];						\
		size_t _n = read_file((path), _buf, sizeof(_buf));	\
		CHECK(_n == strlen(s) && !memcmp(_buf, (s), _n));	\
	} while (0)

#define CHECK_MODE(path, m) CHECK_EQ(LSTAT(path).st_mode & 07777, (m))

static void touch(const char *path)
{
	write_file(path, "", 0, 0644);
}

static bool ts_after(struct timespec a, struct timespec b)
{
	return a.tv_sec > b.tv_sec ||
	       (a.tv_sec == b.tv_sec && a.tv_nsec > b.tv_nsec);
}

static bool ts_equal(struct timespec a, struct timespec b)
{
	return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/*
 * Wait ~10 ms, and until the clock file systems stamp times with (the
 * coarse real-time clock) has moved on.
 */
static void tick(void)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_REALTIME_COARSE, &t0);
	do {
		usleep(10000);
		clock_gettime(CLOCK_REALTIME_COARSE, &t);
	} while (ts_equal(t, t0));
}

/* How many times @dir lists @name. */
static int listed(const char *dir, const char *name)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	CHECK(d != NULL);
	while ((de = readdir(d)))
		if (!strcmp(de->d_name, name))
			n++;
	closedir(d);
	return n;
}

/* How many entries @dir lists, "." and ".." included. */
static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	int n = 0;

	CHECK(d != NULL);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static long rename2(const char *from, const char *to, unsigned int flags)
{
	return syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, flags);
}

/* ------------------------------------------------------------------ */
/* open / creat                                                       */
/* ------------------------------------------------------------------ */

static void open_excl(void)
{
	struct stat st;
	int fd;

	fd = CHECK_OK(open("f", O_CREAT | O_EXCL | O_WRONLY, 0644));
	CHECK_OK(fstat(fd, &st));
	CHECK(S_ISREG(st.st_mode));
	CHECK_EQ(st.st_size, 0);
	CHECK_EQ(st.st_nlink, 1);
	CHECK_EQ(st.st_uid, 0);
	close(fd);
	CHECK_ERR(open("f", O_CREAT | O_EXCL | O_WRONLY, 0644), EEXIST);
	CHECK_OK(mkdir("d", 0755));
	CHECK_ERR(open("d", O_CREAT | O_EXCL | O_RDONLY, 0644), EEXIST);

	/* O_EXCL does not follow a symlink, not even a dangling one. */
	CHECK_OK(symlink("target", "l"));
	CHECK_ERR(open("l", O_CREAT | O_EXCL | O_WRONLY, 0644), EEXIST);
	CHECK_ERR(lstat("target", &st), ENOENT);

	/* Without O_EXCL, O_CREAT opens what is there, mode untouched... */
	fd = CHECK_OK(open("f", O_CREAT | O_WRONLY, 0600));
	close(fd);
	CHECK_MODE("f", 0644);
	/* ...and creates the target of a dangling symlink. */
	fd = CHECK_OK(open("l", O_CREAT | O_WRONLY, 0644));
	close(fd);
	CHECK(S_ISREG(LSTAT("target").st_mode));
	CHECK(S_ISLNK(LSTAT("l").st_mode));

	/* O_CREAT never opens a directory, nor creates one. */
	CHECK_ERR(open("d", O_CREAT | O_RDONLY, 0644), EISDIR);
	CHECK_ERR(open("new/", O_CREAT | O_WRONLY, 0644), EISDIR);
	CHECK_ERR(lstat("new", &st), ENOENT);
}

static void open_errors(void)
{
	struct stat st;
	int fd;

	CHECK_ERR(open("missing", O_RDONLY), ENOENT);
	CHECK_ERR(open("missing/f", O_CREAT | O_WRONLY, 0644), ENOENT);
	CHECK_ERR(open("", O_RDONLY), ENOENT);

	write_file("f", "x", 1, 0644);
	CHECK_ERR(open("f/x", O_RDONLY), ENOTDIR);
	CHECK_ERR(open("f/x", O_CREAT | O_WRONLY, 0644), ENOTDIR);
	CHECK_ERR(open("f/", O_RDONLY), ENOTDIR);
	CHECK_ERR(open("f", O_RDONLY | O_DIRECTORY), ENOTDIR);

	CHECK_OK(mkdir("d", 0755));
	CHECK_ERR(open("d", O_WRONLY), EISDIR);
	CHECK_ERR(open("d", O_RDWR), EISDIR);
	CHECK_ERR(open("d", O_RDONLY | O_TRUNC), EISDIR);
	fd = CHECK_OK(open("d", O_RDONLY | O_DIRECTORY));
	CHECK_OK(fstat(fd, &st));
	CHECK(S_ISDIR(st.st_mode));
	close(fd);
	fd = CHECK_OK(open("d/", O_RDONLY));
	close(fd);

	/* O_DIRECTORY follows symlinks, and judges what they point at. */
	CHECK_OK(symlink("d", "ld"));
	CHECK_OK(symlink("f", "lf"));
	fd = CHECK_OK(open("ld", O_RDONLY | O_DIRECTORY));
	close(fd);
	CHECK_ERR(open("lf", O_RDONLY | O_DIRECTORY), ENOTDIR);
}

static void open_umask(void)
{
	int fd;

	fd = CHECK_OK(open("a", O_CREAT | O_WRONLY, 0666));
	close(fd);
	CHECK_MODE("a", 0644);
	fd = CHECK_OK(creat("b", 0777));
	close(fd);
	CHECK_MODE("b", 0755);
	umask(027);
	fd = CHECK_OK(open("c", O_CREAT | O_WRONLY, 0666));
	close(fd);
	CHECK_MODE("c", 0640);
	umask(0);
	fd = CHECK_OK(open("d", O_CREAT | O_WRONLY, 0666));
	close(fd);
	CHECK_MODE("d", 0666);
	/* Root keeps the set-id bits it asks for. */
	fd = CHECK_OK(open("e", O_CREAT | O_WRONLY, 06755));
	close(fd);
	CHECK_MODE("e", 06755);
	umask(022);
}

static void open_trunc(void)
{
	struct stat before, st;
	char buf[16];
	int fd;

	write_file("f", "hello", 5, 0644);
	before = LSTAT("f");
	tick();
	fd = CHECK_OK(open("f", O_WRONLY | O_TRUNC));
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_size, 0);
	CHECK_EQ(st.st_ino, before.st_ino);
	CHECK(ts_after(st.st_mtim, before.st_mtim));
	CHECK(ts_after(st.st_ctim, before.st_ctim));
	CHECK_EQ(write(fd, "ab", 2), 2);
	close(fd);
	CHECK_EQ(read_file("f", buf, sizeof(buf)), 2);

	/* O_CREAT | O_TRUNC on an existing file truncates it too. */
	fd = CHECK_OK(open("f", O_CREAT | O_WRONLY | O_TRUNC, 0600));
	close(fd);
	CHECK_EQ(LSTAT("f").st_size, 0);
	CHECK_MODE("f", 0644);
}

static void open_nofollow(void)
{
	struct stat st;
	int fd;

	write_file("f", "data", 4, 0644);
	CHECK_OK(mkdir("d", 0755));
	touch("d/g");
	CHECK_OK(symlink("f", "l"));
	CHECK_OK(symlink("d", "ld"));

	CHECK_ERR(open("l", O_RDONLY | O_NOFOLLOW), ELOOP);
	CHECK_ERR(open("l", O_WRONLY | O_CREAT | O_NOFOLLOW, 0644), ELOOP);
	/* With O_DIRECTORY, the symlink is first of all not a directory. */
	CHECK_ERR(open("ld", O_RDONLY | O_NOFOLLOW | O_DIRECTORY), ENOTDIR);
	fd = CHECK_OK(open("f", O_RDONLY | O_NOFOLLOW));
	close(fd);
	fd = CHECK_OK(open("l", O_RDONLY));
	close(fd);
	CHECK_CONTENT("l", "data");

	/* Only the last component is not followed. */
	fd = CHECK_OK(open("ld/g", O_RDONLY | O_NOFOLLOW));
	close(fd);

	/* O_PATH | O_NOFOLLOW opens the symlink itself. */
	fd = CHECK_OK(open("l", O_PATH | O_NOFOLLOW));
	CHECK_OK(fstatat(fd, "", &st, AT_EMPTY_PATH));
	CHECK(S_ISLNK(st.st_mode));
	CHECK_EQ(st.st_ino, LSTAT("l").st_ino);
	close(fd);
}

/* ------------------------------------------------------------------ */
/* Name and path lengths                                              */
/* ------------------------------------------------------------------ */

static void name_max(void)
{
	char n255[256], m255[256], n256[257];
	struct stat st;
	int fd;

	memset(n255, 'n', 255);
	n255[255] = 0;
	memset(m255, 'm', 255);
	m255[255] = 0;
	memset(n256, 'n', 256);
	n256[256] = 0;

	fd = CHECK_OK(open(n255, O_CREAT | O_WRONLY, 0644));
	CHECK_EQ(write(fd, "x", 1), 1);
	close(fd);
	CHECK_EQ(LSTAT(n255).st_size, 1);
	CHECK_EQ(listed(".", n255), 1);
	CHECK_OK(rename(n255, m255));
	CHECK_EQ(listed(".", m255), 1);
	CHECK_EQ(listed(".", n255), 0);
	CHECK_OK(link(m255, n255));
	CHECK_EQ(LSTAT(n255).st_nlink, 2);
	CHECK_OK(unlink(m255));
	CHECK_OK(unlink(n255));
	CHECK_ERR(lstat(n255, &st), ENOENT);
	CHECK_EQ(listed(".", n255), 0);
	CHECK_OK(mkdir(n255, 0755));
	CHECK_OK(rmdir(n255));
	CHECK_OK(symlink(n255, m255));
	CHECK_OK(unlink(m255));

	touch("f");
	CHECK_ERR(open(n256, O_CREAT | O_WRONLY, 0644), ENAMETOOLONG);
	CHECK_ERR(open(n256, O_RDONLY), ENAMETOOLONG);
	CHECK_ERR(lstat(n256, &st), ENAMETOOLONG);
	CHECK_ERR(mkdir(n256, 0755), ENAMETOOLONG);
	CHECK_ERR(symlink("f", n256), ENAMETOOLONG);
	CHECK_ERR(link("f", n256), ENAMETOOLONG);
	CHECK_ERR(rename("f", n256), ENAMETOOLONG);
	CHECK_ERR(mknod(n256, S_IFIFO | 0644, 0), ENAMETOOLONG);
	CHECK_ERR(unlink(n256), ENAMETOOLONG);
	CHECK_EQ(entries("."), 3);
}

/*
 * One name, many lives: every kind of file in turn, each seen for what it
 * is, whether the name was last looked up as present or as absent.
 */
static void name_reuse(void)
{
	char buf[16];
	struct stat st;

	CHECK_ERR(lstat("n", &st), ENOENT);
	write_file("n", "file", 4, 0644);
	CHECK(S_ISREG(LSTAT("n").st_mode));
	CHECK_OK(unlink("n"));
	CHECK_ERR(lstat("n", &st), ENOENT);
	CHECK_OK(mkdir("n", 0755));
	CHECK(S_ISDIR(LSTAT("n").st_mode));
	touch("n/inside");
	CHECK_OK(unlink("n/inside"));
	CHECK_OK(rmdir("n"));
	CHECK_ERR(lstat("n/inside", &st), ENOENT);
	CHECK_OK(symlink("one", "n"));
	CHECK(S_ISLNK(LSTAT("n").st_mode));
	CHECK_OK(unlink("n"));
	CHECK_OK(mkfifo("n", 0644));
	CHECK(S_ISFIFO(LSTAT("n").st_mode));
	CHECK_OK(unlink("n"));
	CHECK_OK(mkdir("n", 0755));
	CHECK_EQ(entries("n"), 2);
	CHECK_OK(rmdir("n"));

	/* A symlink replaced by rename: the new target is followed. */
	write_file("a", "A", 1, 0644);
	write_file("b", "B", 1, 0644);
	CHECK_OK(symlink("a", "l"));
	CHECK_CONTENT("l", "A");
	CHECK_OK(symlink("b", "l2"));
	CHECK_OK(rename("l2", "l"));
	CHECK_EQ(readlink("l", buf, sizeof(buf)), 1);
	CHECK_EQ(buf[0], 'b');
	CHECK_CONTENT("l", "B");
	CHECK_OK(unlink("l"));
	CHECK_OK(symlink("a", "l"));
	CHECK_CONTENT("l", "A");

	/* A name rename()d onto, last seen absent. */
	CHECK_ERR(lstat("n", &st), ENOENT);
	CHECK_OK(rename("a", "n"));
	CHECK_CONTENT("n", "A");
	CHECK_ERR(lstat("a", &st), ENOENT);
	CHECK_OK(link("n", "a"));
	CHECK_EQ(LSTAT("a").st_ino, LSTAT("n").st_ino);
	/* Case matters. */
	CHECK_ERR(lstat("N", &st), ENOENT);
	touch("N");
	CHECK(LSTAT("N").st_ino != LSTAT("n").st_ino);
}

/* Names are bytes: every byte but '/' and NUL, spaces, dots, newlines. */
static void name_bytes(void)
{
	char all[256];
	const char *names[] = { all, " ", "...", "-n", "a b\tc\nd",
				"\xff\xfe", "caf\xc3\xa9", ".hidden" };
	size_t n = sizeof(names) / sizeof(names[0]), k = 0;
	struct dirent *de;
	DIR *d;

	for (int c = 1; c < 256; c++)
		if (c != '/')
			all[k++] = c;
	all[k] = 0;
	CHECK_EQ(strlen(all), 254);
	for (size_t i = 0; i < n; i++)
		write_file(names[i], names[i], strlen(names[i]), 0644);
	d = opendir(".");
	CHECK(d != NULL);
	k = 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		size_t i;

		for (i = 0; i < n && strcmp(names[i], de->d_name); i++)
			;
		CHECK(i < n);
		k++;
	}
	closedir(d);
	CHECK_EQ(k, n);
	for (size_t i = 0; i < n; i++) {
		CHECK_CONTENT(names[i], names[i]);
		CHECK_EQ(LSTAT(names[i]).st_size, strlen(names[i]));
	}
	CHECK_OK(rename(all, "x"));
	CHECK_OK(rename("x", all));
	for (size_t i = 0; i < n; i++)
		CHECK_OK(unlink(names[i]));
	CHECK_EQ(entries("."), 2);
}

#define DEPTH 200
#define LEVEL "deep-directory-level"	/* 20 bytes: 200 levels > PATH_MAX */

/* @levels times LEVEL "/", then @leaf, into @buf. */
static void deep_name(char *buf, size_t size, int levels, const char *leaf)
{
	size_t len = 0;

	for (int i = 0; i < levels; i++) {
		CHECK(len + sizeof(LEVEL) < size);
		memcpy(buf + len, LEVEL "/", sizeof(LEVEL));
		len += sizeof(LEVEL);
	}
	CHECK(len + strlen(leaf) < size);
	strcpy(buf + len, leaf);
}

static void deep_path(void)
{
	static char rel[DEPTH * sizeof(LEVEL) + 8192], path[sizeof(rel)];
	char buf[16];
	struct stat st;
	int fd, next, mid = -1;

	fd = CHECK_OK(open(".", O_RDONLY | O_DIRECTORY));
	for (int i = 0; i < DEPTH; i++) {
		CHECK_OK(mkdirat(fd, LEVEL, 0755));
		next = CHECK_OK(openat(fd, LEVEL, O_RDONLY | O_DIRECTORY));
		if (i == DEPTH / 2 - 1)
			mid = CHECK_OK(dup(next));
		close(fd);
		fd = next;
	}
	next = CHECK_OK(openat(fd, "f", O_CREAT | O_WRONLY, 0644));
	CHECK_EQ(write(next, "bottom", 6), 6);
	close(next);

	/* Half way down, a relative path reaches the bottom. */
	deep_name(rel, sizeof(rel), DEPTH / 2, "f");
	next = CHECK_OK(openat(mid, rel, O_RDONLY));
	CHECK_EQ(read(next, buf, sizeof(buf)), 6);
	CHECK(!memcmp(buf, "bottom", 6));
	close(next);

	/* And ".." all the way up reaches the top. */
	rel[0] = 0;
	for (int i = 0; i < DEPTH; i++)
		strcat(rel, i ? "/.." : "..");
	CHECK_OK(fstatat(fd, rel, &st, 0));
	CHECK_EQ(st.st_ino, LSTAT(".").st_ino);

	/* The whole path, relative or absolute, is longer than PATH_MAX. */
	deep_name(rel, sizeof(rel), DEPTH, "f");
	CHECK(strlen(rel) >= PATH_MAX);
	CHECK_ERR(open(rel, O_RDONLY), ENAMETOOLONG);
	CHECK_ERR(lstat(rel, &st), ENAMETOOLONG);
	path_in(path, sizeof(path), env.dir, rel);
	CHECK_ERR(open(path, O_RDONLY), ENAMETOOLONG);
	CHECK_ERR(mkdir(path, 0755), ENAMETOOLONG);
	close(fd);
	close(mid);
}

/* A path of PATH_MAX - 1 bytes is the longest one. */
static void path_max(void)
{
	char path[PATH_MAX + 2];
	int fd, k = (PATH_MAX - 2) / 2;

	write_file("f", "x", 1, 0644);
	for (int i = 0; i < k; i++)
		memcpy(path + 2 * i, "./", 2);
	strcpy(path + 2 * k, "f");		/* 4095 bytes */
	CHECK_EQ(strlen(path), PATH_MAX - 1);
	fd = CHECK_OK(open(path, O_RDONLY));
	close(fd);
	strcpy(path + 2 * k, "/f");		/* 4096 bytes */
	CHECK_EQ(strlen(path), PATH_MAX);
	CHECK_ERR(open(path, O_RDONLY), ENAMETOOLONG);
}

/* ------------------------------------------------------------------ */
/* mkdir / rmdir                                                      */
/* ------------------------------------------------------------------ */

static void mkdir_basic(void)
{
	nlink_t n0 = LSTAT(".").st_nlink;
	struct stat st;

	CHECK_EQ(n0, 2);
	CHECK_OK(mkdir("d", 0777));
	st = LSTAT("d");
	CHECK(S_ISDIR(st.st_mode));
	CHECK_EQ(st.st_mode & 07777, 0755);
	CHECK_EQ(st.st_nlink, 2);
	CHECK_EQ(st.st_uid, 0);
	CHECK_EQ(st.st_gid, 0);
	CHECK_EQ(LSTAT(".").st_nlink, n0 + 1);
	CHECK_EQ(LSTAT("d/.").st_ino, st.st_ino);
	CHECK_EQ(LSTAT("d/..").st_ino, LSTAT(".").st_ino);
	CHECK_EQ(entries("d"), 2);

	CHECK_OK(mkdir("d/e/", 0700));	/* a trailing slash is fine */
	CHECK_MODE("d/e", 0700);
	CHECK_EQ(LSTAT("d").st_nlink, 3);
	CHECK_EQ(LSTAT(".").st_nlink, n0 + 1);
	CHECK_OK(mkdir("s", 01777));	/* the sticky bit stays */
	CHECK_MODE("s", 01755);

	touch("f");
	CHECK_OK(symlink("nowhere", "l"));
	CHECK_ERR(mkdir("d", 0755), EEXIST);
	CHECK_ERR(mkdir("f", 0755), EEXIST);
	CHECK_ERR(mkdir("l", 0755), EEXIST);
	CHECK_ERR(mkdir(".", 0755), EEXIST);
	CHECK_ERR(mkdir("..", 0755), EEXIST);
	CHECK_ERR(lstat("nowhere", &st), ENOENT);
	CHECK_ERR(mkdir("missing/x", 0755), ENOENT);
	CHECK_ERR(mkdir("", 0755), ENOENT);
	CHECK_ERR(mkdir("f/x", 0755), ENOTDIR);
	CHECK_EQ(LSTAT(".").st_nlink, n0 + 2);
}

static void rmdir_basic(void)
{
	nlink_t n0 = LSTAT(".").st_nlink;
	struct stat st;

	CHECK_OK(mkdir("d", 0755));
	CHECK_EQ(LSTAT(".").st_nlink, n0 + 1);
	CHECK_OK(rmdir("d"));
	CHECK_EQ(LSTAT(".").st_nlink, n0);
	CHECK_ERR(lstat("d", &st), ENOENT);
	CHECK_EQ(listed(".", "d"), 0);

	CHECK_OK(mkdir("d", 0755));
	touch("d/f");
	CHECK_ERR(rmdir("d"), ENOTEMPTY);
	CHECK_OK(unlink("d/f"));
	CHECK_OK(mkdir("d/e", 0755));
	CHECK_ERR(rmdir("d"), ENOTEMPTY);
	CHECK_OK(rmdir("d/e/"));
	CHECK_EQ(LSTAT("d").st_nlink, 2);
	CHECK_OK(rmdir("d"));

	touch("f");
	CHECK_OK(mkdir("e", 0755));
	CHECK_OK(symlink("e", "le"));
	CHECK_ERR(rmdir("f"), ENOTDIR);
	CHECK_ERR(rmdir("f/"), ENOTDIR);
	CHECK_ERR(rmdir("le"), ENOTDIR);
	CHECK_ERR(rmdir("."), EINVAL);
	CHECK_ERR(rmdir("e/."), EINVAL);
	CHECK_ERR(rmdir(".."), ENOTEMPTY);
	CHECK_ERR(rmdir("missing"), ENOENT);
	CHECK_ERR(rmdir("missing/x"), ENOENT);
	CHECK(S_ISDIR(LSTAT("e").st_mode));
}

/* The working directory removed: it stays usable, but empty and dead. */
static void rmdir_cwd(void)
{
	char buf[64] __attribute__((aligned(8)));
	struct stat st;
	DIR *d;
	int fd;

	CHECK_OK(mkdir("d", 0755));
	CHECK_OK(chdir("d"));
	CHECK_OK(rmdir("../d"));
	CHECK_OK(stat(".", &st));
	CHECK(S_ISDIR(st.st_mode));
	CHECK_EQ(st.st_nlink, 0);
	CHECK_ERR(open("f", O_CREAT | O_WRONLY, 0644), ENOENT);
	CHECK_ERR(mkdir("e", 0755), ENOENT);
	CHECK_ERR(mknod("p", S_IFIFO | 0644, 0), ENOENT);
	CHECK_ERR(symlink("x", "l"), ENOENT);
	/* Reading it fails with ENOENT, which readdir() takes for the end. */
	fd = CHECK_OK(open(".", O_RDONLY | O_DIRECTORY));
	CHECK_ERR(syscall(SYS_getdents64, fd, buf, sizeof(buf)), ENOENT);
	close(fd);
	d = opendir(".");
	CHECK(d != NULL);
	errno = 0;
	CHECK(readdir(d) == NULL && errno == 0);
	closedir(d);
	CHECK_OK(chdir(".."));
	CHECK_ERR(lstat("d", &st), ENOENT);
}

/* A directory removed while open: it reads as dead, and takes no names. */
static void rmdir_open(void)
{
	char buf[64] __attribute__((aligned(8)));
	struct stat st;
	int fd;

	CHECK_OK(mkdir("d", 0755));
	fd = CHECK_OK(open("d", O_RDONLY | O_DIRECTORY));
	CHECK_OK(rmdir("d"));
	CHECK_OK(fstat(fd, &st));
	CHECK(S_ISDIR(st.st_mode));
	CHECK_EQ(st.st_nlink, 0);
	CHECK_ERR(syscall(SYS_getdents64, fd, buf, sizeof(buf)), ENOENT);
	CHECK_ERR(openat(fd, "x", O_CREAT | O_WRONLY, 0644), ENOENT);
	CHECK_ERR(mkdirat(fd, "x", 0755), ENOENT);
	CHECK_ERR(fstatat(fd, "x", &st, 0), ENOENT);
	close(fd);
	CHECK_ERR(lstat("d", &st), ENOENT);
}

/* ------------------------------------------------------------------ */
/* unlink                                                             */
/* ------------------------------------------------------------------ */

static void unlink_basic(void)
{
	struct stat st;

	touch("f");
	CHECK_OK(unlink("f"));
	CHECK_ERR(lstat("f", &st), ENOENT);
	CHECK_EQ(listed(".", "f"), 0);
	CHECK_ERR(unlink("f"), ENOENT);
	CHECK_ERR(unlink("missing/f"), ENOENT);

	CHECK_OK(mkdir("d", 0755));
	CHECK_ERR(unlink("d"), EISDIR);
	CHECK_ERR(unlink("d/"), EISDIR);
	CHECK_ERR(unlink("."), EISDIR);
	CHECK(S_ISDIR(LSTAT("d").st_mode));

	touch("g");
	CHECK_ERR(unlink("g/x"), ENOTDIR);
	CHECK_ERR(unlink("g/"), ENOTDIR);

	/* Unlinking a symlink removes the link, not its target. */
	CHECK_OK(symlink("g", "l"));
	CHECK_OK(symlink("d", "ld"));
	CHECK_OK(symlink("nowhere", "dangling"));
	CHECK_OK(unlink("l"));
	CHECK_OK(unlink("ld"));
	CHECK_OK(unlink("dangling"));
	CHECK(S_ISREG(LSTAT("g").st_mode));
	CHECK(S_ISDIR(LSTAT("d").st_mode));
	CHECK_EQ(entries("."), 4);
}

static void unlink_open(void)
{
	struct stat st, old;
	char buf[32];
	int fd;

	fd = CHECK_OK(open("f", O_CREAT | O_RDWR, 0644));
	CHECK_EQ(write(fd, "before", 6), 6);
	CHECK_OK(unlink("f"));
	CHECK_OK(fstat(fd, &old));
	CHECK_EQ(old.st_nlink, 0);
	CHECK_EQ(old.st_size, 6);
	CHECK_ERR(lstat("f", &st), ENOENT);
	CHECK_EQ(listed(".", "f"), 0);

	/* The open file still reads and writes. */
	CHECK_EQ(pwrite(fd, "after", 5, 6), 5);
	CHECK_EQ(pread(fd, buf, sizeof(buf), 0), 11);
	CHECK(!memcmp(buf, "beforeafter", 11));

	/* A new file of the same name is another file. */
	write_file("f", "new", 3, 0644);
	CHECK(LSTAT("f").st_ino != old.st_ino);
	CHECK_CONTENT("f", "new");
	CHECK_EQ(pread(fd, buf, sizeof(buf), 0), 11);
	CHECK(!memcmp(buf, "beforeafter", 11));
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_nlink, 0);
	CHECK_EQ(st.st_size, 11);

	/* A file with no names left cannot be given one again. */
	CHECK_ERR(linkat(fd, "", AT_FDCWD, "g", AT_EMPTY_PATH), ENOENT);
	CHECK_ERR(lstat("g", &st), ENOENT);
	close(fd);
}

/*
 * Names removed while held by no open file, only by an O_PATH descriptor:
 * fstat still answers, with no links left.
 */
static void unlink_pinned(void)
{
	struct stat st;
	int fd, dfd;

	write_file("f", "abc", 3, 0644);
	fd = CHECK_OK(open("f", O_PATH));
	CHECK_OK(unlink("f"));
	CHECK_OK(fstat(fd, &st));
	CHECK(S_ISREG(st.st_mode));
	CHECK_EQ(st.st_nlink, 0);
	CHECK_EQ(st.st_size, 3);
	close(fd);

	CHECK_OK(mkdir("d", 0755));
	dfd = CHECK_OK(open("d", O_PATH | O_DIRECTORY));
	CHECK_OK(rmdir("d"));
	CHECK_OK(fstat(dfd, &st));
	CHECK(S_ISDIR(st.st_mode));
	CHECK_EQ(st.st_nlink, 0);
	CHECK_ERR(openat(dfd, "x", O_CREAT | O_WRONLY, 0644), ENOENT);
	close(dfd);
	CHECK_EQ(entries("."), 2);
}

/* ------------------------------------------------------------------ */
/* link                                                               */
/* ------------------------------------------------------------------ */

static void link_basic(void)
{
	struct stat f, g, st;
	int fd;

	write_file("f", "shared", 6, 0644);
	CHECK_OK(link("f", "g"));
	f = LSTAT("f");
	g = LSTAT("g");
	CHECK_EQ(f.st_ino, g.st_ino);
	CHECK_EQ(f.st_nlink, 2);
	CHECK_EQ(g.st_nlink, 2);
	CHECK(S_ISREG(g.st_mode));

	/* One file: what is written under one name reads under the other. */
	fd = CHECK_OK(open("g", O_WRONLY | O_APPEND));
	CHECK_EQ(write(fd, "!", 1), 1);
	close(fd);
	CHECK_CONTENT("f", "shared!");

	CHECK_OK(mkdir("d", 0755));
	CHECK_OK(link("f", "d/h"));
	CHECK_EQ(LSTAT("f").st_nlink, 3);
	CHECK_EQ(LSTAT("d/h").st_ino, f.st_ino);

	CHECK_ERR(link("d", "e"), EPERM);
	CHECK_ERR(link("f", "g"), EEXIST);
	CHECK_ERR(link("f", "d"), EEXIST);
	CHECK_ERR(link("missing", "m"), ENOENT);
	CHECK_ERR(link("f", "missing/m"), ENOENT);
	CHECK_ERR(link("f", "f/m"), ENOTDIR);
	CHECK_ERR(link("f/", "m"), ENOTDIR);
	CHECK_ERR(lstat("m", &st), ENOENT);

	CHECK_OK(unlink("g"));
	CHECK_EQ(LSTAT("f").st_nlink, 2);
	CHECK_OK(unlink("d/h"));
	CHECK_EQ(LSTAT("f").st_nlink, 1);
	CHECK_CONTENT("f", "shared!");
}

/* link() gives the inode's ctime a new value. */
static void link_ctime(void)
{
	struct stat before, after;

	touch("f");
	before = LSTAT("f");
	tick();
	CHECK_OK(link("f", "g"));
	after = LSTAT("f");
	CHECK(ts_after(after.st_ctim, before.st_ctim));
	CHECK(ts_equal(after.st_mtim, before.st_mtim));
	before = after;
	tick();
	CHECK_OK(unlink("g"));
	after = LSTAT("f");
	CHECK(ts_after(after.st_ctim, before.st_ctim));
}

static void link_symlink(void)
{
	char buf[16];
	struct stat st;

	touch("f");
	CHECK_OK(symlink("f", "l"));

	/* Without AT_SYMLINK_FOLLOW the symlink itself gets the new name. */
	CHECK_OK(linkat(AT_FDCWD, "l", AT_FDCWD, "h", 0));
	st = LSTAT("h");
	CHECK(S_ISLNK(st.st_mode));
	CHECK_EQ(st.st_ino, LSTAT("l").st_ino);
	CHECK_EQ(st.st_nlink, 2);
	CHECK_EQ(readlink("h", buf, sizeof(buf)), 1);
	CHECK_EQ(buf[0], 'f');
	CHECK_EQ(LSTAT("f").st_nlink, 1);

	/* With it, the target does. */
	CHECK_OK(linkat(AT_FDCWD, "l", AT_FDCWD, "k", AT_SYMLINK_FOLLOW));
	st = LSTAT("k");
	CHECK(S_ISREG(st.st_mode));
	CHECK_EQ(st.st_ino, LSTAT("f").st_ino);
	CHECK_EQ(LSTAT("f").st_nlink, 2);

	/* A dangling symlink can be linked, not followed. */
	CHECK_OK(symlink("nowhere", "dl"));
	CHECK_OK(linkat(AT_FDCWD, "dl", AT_FDCWD, "dh", 0));
	CHECK(S_ISLNK(LSTAT("dh").st_mode));
	CHECK_ERR(linkat(AT_FDCWD, "dl", AT_FDCWD, "dk", AT_SYMLINK_FOLLOW),
		  ENOENT);
}

/* ------------------------------------------------------------------ */
/* rename                                                             */
/* ------------------------------------------------------------------ */

static void rename_file(void)
{
	struct stat a, st;
	char buf[16];
	int fd;

	write_file("a", "aaa", 3, 0644);
	write_file("b", "bbbb", 4, 0644);
	a = LSTAT("a");
	fd = CHECK_OK(open("b", O_RDONLY));

	/* Over an existing file: it takes the source's inode and data. */
	CHECK_OK(rename("a", "b"));
	CHECK_ERR(lstat("a", &st), ENOENT);
	CHECK_EQ(LSTAT("b").st_ino, a.st_ino);
	CHECK_EQ(LSTAT("b").st_nlink, 1);
	CHECK_CONTENT("b", "aaa");
	CHECK_EQ(listed(".", "a"), 0);
	CHECK_EQ(listed(".", "b"), 1);
	/* The replaced file lives on while open, with no name. */
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_nlink, 0);
	CHECK_EQ(pread(fd, buf, sizeof(buf), 0), 4);
	CHECK(!memcmp(buf, "bbbb", 4));
	close(fd);

	/* Into another directory. */
	CHECK_OK(mkdir("d", 0755));
	CHECK_OK(rename("b", "d/c"));
	CHECK_EQ(LSTAT("d/c").st_ino, a.st_ino);
	CHECK_EQ(entries("."), 3);

	/* Onto itself, and onto another name of the same file: nothing. */
	CHECK_OK(rename("d/c", "d/c"));
	CHECK_OK(link("d/c", "d/c2"));
	CHECK_OK(rename("d/c", "d/c2"));
	CHECK_EQ(LSTAT("d/c").st_nlink, 2);
	CHECK_EQ(LSTAT("d/c2").st_ino, a.st_ino);

	/* A symlink is renamed, not its target. */
	CHECK_OK(symlink("d/c", "l"));
	CHECK_OK(rename("l", "m"));
	CHECK(S_ISLNK(LSTAT("m").st_mode));
	CHECK_EQ(LSTAT("d/c").st_ino, a.st_ino);

	CHECK_ERR(rename("missing", "x"), ENOENT);
	CHECK_ERR(rename("d/c", "missing/x"), ENOENT);
	CHECK_ERR(rename("d/c", "d/c2/x"), ENOTDIR);
	CHECK_ERR(rename("d/c/", "x"), ENOTDIR);
	CHECK_ERR(rename("d/c", "x/"), ENOTDIR);
	CHECK_ERR(rename(".", "x"), EBUSY);
	CHECK_ERR(rename("d/c", "."), EBUSY);
	CHECK_ERR(lstat("x", &st), ENOENT);
}

static void rename_dir(void)
{
	nlink_t n0;
	struct stat a, st;

	CHECK_OK(mkdir("a", 0755));
	CHECK_OK(mkdir("b", 0755));
	a = LSTAT("a");
	n0 = LSTAT(".").st_nlink;

	/* An empty directory over an empty one. */
	CHECK_OK(rename("a", "b"));
	CHECK_ERR(lstat("a", &st), ENOENT);
	CHECK_EQ(LSTAT("b").st_ino, a.st_ino);
	CHECK_EQ(LSTAT("b").st_nlink, 2);
	CHECK_EQ(LSTAT(".").st_nlink, n0 - 1);

	/* Over a non-empty one: ext4 says ENOTEMPTY. */
	CHECK_OK(mkdir("c", 0755));
	touch("c/x");
	CHECK_ERR(rename("b", "c"), ENOTEMPTY);
	CHECK_EQ(LSTAT("b").st_ino, a.st_ino);
	CHECK_OK(lstat("c/x", &st));

	/* Directories and files do not replace each other. */
	touch("f");
	CHECK_ERR(rename("b", "f"), ENOTDIR);
	CHECK_ERR(rename("f", "b"), EISDIR);
	CHECK(S_ISREG(LSTAT("f").st_mode));
	CHECK(S_ISDIR(LSTAT("b").st_mode));

	/* Not into its own subtree, not over its own ancestor. */
	CHECK_OK(mkdir("c/y", 0755));
	CHECK_ERR(rename("c", "c/z"), EINVAL);
	CHECK_ERR(rename("c", "c/y/z"), EINVAL);
	CHECK_ERR(rename("c/y", "c"), ENOTEMPTY);
	CHECK_OK(rename("c", "c"));

	/* A renamed directory keeps its children. */
	a = LSTAT("c");
	CHECK_OK(rename("c/", "e/"));
	CHECK_ERR(lstat("c", &st), ENOENT);
	CHECK_EQ(LSTAT("e").st_ino, a.st_ino);
	CHECK(S_ISREG(LSTAT("e/x").st_mode));
	CHECK_EQ(LSTAT("e/y/..").st_ino, a.st_ino);
	CHECK_ERR(lstat("c/x", &st), ENOENT);
	CHECK_EQ(LSTAT(".").st_nlink, n0);
}

static void rename_cross_dir(void)
{
	struct stat st;

	CHECK_OK(mkdir("A", 0755));
	CHECK_OK(mkdir("B", 0755));
	CHECK_OK(mkdir("A/d", 0755));
	CHECK_OK(mkdir("A/d/sub", 0755));
	CHECK_OK(mkdir("A/e", 0755));
	CHECK_OK(mkdir("B/e", 0755));
	touch("A/f");
	CHECK_EQ(LSTAT("A").st_nlink, 4);
	CHECK_EQ(LSTAT("B").st_nlink, 3);

	/* A directory moves: one link leaves A, one comes to B. */
	CHECK_OK(rename("A/d", "B/d"));
	CHECK_EQ(LSTAT("A").st_nlink, 3);
	CHECK_EQ(LSTAT("B").st_nlink, 4);
	CHECK_EQ(LSTAT("B/d").st_nlink, 3);
	CHECK_EQ(LSTAT("B/d/..").st_ino, LSTAT("B").st_ino);
	CHECK_EQ(LSTAT("B/d/sub/../..").st_ino, LSTAT("B").st_ino);

	/* Over an empty directory in the other parent. */
	CHECK_OK(rename("A/e", "B/e"));
	CHECK_EQ(LSTAT("A").st_nlink, 2);
	CHECK_EQ(LSTAT("B").st_nlink, 4);
	CHECK_EQ(LSTAT("B/e/..").st_ino, LSTAT("B").st_ino);

	/* A file moves: no directory link changes. */
	CHECK_OK(rename("A/f", "B/f"));
	CHECK_EQ(LSTAT("A").st_nlink, 2);
	CHECK_EQ(LSTAT("B").st_nlink, 4);
	CHECK_ERR(lstat("A/f", &st), ENOENT);
	CHECK_EQ(entries("A"), 2);
	CHECK_EQ(entries("B"), 5);
}

static void rename_open(void)
{
	char cwd[PATH_MAX], want[PATH_MAX];
	struct stat st;
	char buf[16];
	int fd;

	write_file("f", "one", 3, 0644);
	fd = CHECK_OK(open("f", O_RDWR | O_APPEND));
	CHECK_OK(mkdir("d", 0755));
	CHECK_OK(rename("f", "d/g"));
	CHECK_EQ(write(fd, "two", 3), 3);
	CHECK_CONTENT("d/g", "onetwo");
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_ino, LSTAT("d/g").st_ino);
	CHECK_EQ(st.st_nlink, 1);
	CHECK_EQ(pread(fd, buf, sizeof(buf), 0), 6);
	CHECK(!memcmp(buf, "onetwo", 6));
	close(fd);

	/* An open directory renamed still lists and creates. */
	fd = CHECK_OK(open("d", O_RDONLY | O_DIRECTORY));
	CHECK_OK(rename("d", "e"));
	CHECK_OK(mkdirat(fd, "sub", 0755));
	CHECK(S_ISDIR(LSTAT("e/sub").st_mode));
	CHECK_OK(fstatat(fd, "g", &st, AT_SYMLINK_NOFOLLOW));
	close(fd);

	/* So does the working directory, and getcwd() has its new name. */
	CHECK_OK(chdir("e"));
	path_in(want, sizeof(want), env.dir, "moved");
	CHECK_OK(rename("../e", want));
	CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
	CHECK(!strcmp(cwd, want));
	touch("here");
	CHECK_OK(chdir(".."));
	CHECK(S_ISREG(LSTAT("moved/here").st_mode));
}

/* A file replaced by rename() while held only by an O_PATH descriptor. */
static void rename_pinned(void)
{
	struct stat st;
	int fd;

	write_file("old", "old", 3, 0644);
	write_file("new", "new!", 4, 0644);
	fd = CHECK_OK(open("old", O_PATH));
	CHECK_OK(rename("new", "old"));
	CHECK_OK(fstat(fd, &st));
	CHECK(S_ISREG(st.st_mode));
	CHECK_EQ(st.st_nlink, 0);
	CHECK_EQ(st.st_size, 3);
	CHECK_EQ(LSTAT("old").st_size, 4);
	close(fd);
}

static void rename_noreplace(void)
{
	struct stat st;

	write_file("a", "a", 1, 0644);
	write_file("b", "b", 1, 0644);
	CHECK_ERR(rename2("a", "b", RENAME_NOREPLACE), EEXIST);
	CHECK_CONTENT("a", "a");
	CHECK_CONTENT("b", "b");
	CHECK_OK(rename2("a", "c", RENAME_NOREPLACE));
	CHECK_ERR(lstat("a", &st), ENOENT);
	CHECK_CONTENT("c", "a");

	CHECK_OK(mkdir("d", 0755));
	CHECK_OK(mkdir("e", 0755));
	CHECK_ERR(rename2("d", "e", RENAME_NOREPLACE), EEXIST);
	CHECK_OK(symlink("nowhere", "l"));
	CHECK_ERR(rename2("c", "l", RENAME_NOREPLACE), EEXIST);
	CHECK(S_ISLNK(LSTAT("l").st_mode));
	CHECK_OK(rename2("d", "e/d", RENAME_NOREPLACE));
	CHECK_EQ(LSTAT("e").st_nlink, 3);
	CHECK_ERR(rename2("missing", "x", RENAME_NOREPLACE), ENOENT);

	CHECK_ERR(rename2("c", "x", RENAME_NOREPLACE | RENAME_EXCHANGE),
		  EINVAL);
	CHECK_ERR(rename2("c", "x", 1u << 12), EINVAL);
	CHECK_ERR(lstat("x", &st), ENOENT);
}

static void rename_exchange(void)
{
	struct stat a, b, st;

	write_file("a", "A", 1, 0644);
	write_file("b", "BB", 2, 0644);
	a = LSTAT("a");
	b = LSTAT("b");
	CHECK_OK(rename2("a", "b", RENAME_EXCHANGE));
	CHECK_EQ(LSTAT("a").st_ino, b.st_ino);
	CHECK_EQ(LSTAT("b").st_ino, a.st_ino);
	CHECK_CONTENT("a", "BB");
	CHECK_CONTENT("b", "A");
	CHECK_OK(rename2("a", "a", RENAME_EXCHANGE));
	CHECK_EQ(LSTAT("a").st_ino, b.st_ino);

	/* A file and a directory trade places. */
	CHECK_OK(mkdir("d", 0755));
	touch("d/x");
	CHECK_OK(rename2("a", "d", RENAME_EXCHANGE));
	CHECK(S_ISDIR(LSTAT("a").st_mode));
	CHECK(S_ISREG(LSTAT("a/x").st_mode));
	CHECK(S_ISREG(LSTAT("d").st_mode));
	CHECK_CONTENT("d", "BB");

	/* Across directories, the parents' link counts follow. */
	CHECK_OK(mkdir("P", 0755));
	CHECK_OK(mkdir("Q", 0755));
	CHECK_OK(mkdir("P/sub", 0755));
	touch("Q/f");
	CHECK_OK(rename2("P/sub", "Q/f", RENAME_EXCHANGE));
	CHECK(S_ISREG(LSTAT("P/sub").st_mode));
	CHECK(S_ISDIR(LSTAT("Q/f").st_mode));
	CHECK_EQ(LSTAT("P").st_nlink, 2);
	CHECK_EQ(LSTAT("Q").st_nlink, 3);
	CHECK_EQ(LSTAT("Q/f/..").st_ino, LSTAT("Q").st_ino);

	/* Both names must exist. */
	CHECK_ERR(rename2("b", "missing", RENAME_EXCHANGE), ENOENT);
	CHECK_ERR(rename2("missing", "b", RENAME_EXCHANGE), ENOENT);
	CHECK_ERR(lstat("missing", &st), ENOENT);
	CHECK_CONTENT("b", "A");
	/* Nor may a directory trade places with something inside it. */
	CHECK_ERR(rename2("a", "a/x", RENAME_EXCHANGE), EINVAL);
}

/* ------------------------------------------------------------------ */
/* symlink / readlink                                                 */
/* ------------------------------------------------------------------ */

static void symlink_basic(void)
{
	char buf[PATH_MAX], abs[PATH_MAX];
	struct stat st;
	int fd;

	write_file("f", "data", 4, 0644);
	CHECK_OK(symlink("f", "l"));
	st = LSTAT("l");
	CHECK(S_ISLNK(st.st_mode));
	CHECK_EQ(st.st_size, 1);
	CHECK_EQ(st.st_mode & 07777, 0777);
	CHECK_EQ(st.st_uid, 0);
	CHECK_OK(stat("l", &st));
	CHECK_EQ(st.st_ino, LSTAT("f").st_ino);
	CHECK_CONTENT("l", "data");
	CHECK_EQ(readlink("l", buf, sizeof(buf)), 1);
	CHECK_EQ(buf[0], 'f');

	/* readlink truncates to the buffer, without a NUL. */
	CHECK_OK(symlink("a/longer/target", "m"));
	CHECK_EQ(LSTAT("m").st_size, 15);
	memset(buf, '#', 8);
	CHECK_EQ(readlink("m", buf, 4), 4);
	CHECK(!memcmp(buf, "a/lo#", 5));
	CHECK_ERR(readlink("m", buf, 0), EINVAL);

	/* Dangling. */
	CHECK_OK(symlink("nowhere", "d"));
	CHECK_ERR(open("d", O_RDONLY), ENOENT);
	CHECK_ERR(stat("d", &st), ENOENT);
	CHECK(S_ISLNK(LSTAT("d").st_mode));

	/* Absolute, and to a directory. */
	path_in(abs, sizeof(abs), env.dir, "f");
	CHECK_OK(symlink(abs, "abs"));
	CHECK_CONTENT("abs", "data");
	CHECK_EQ(LSTAT("abs").st_size, strlen(abs));
	CHECK_OK(mkdir("dir", 0755));
	touch("dir/x");
	CHECK_OK(symlink("dir", "ld"));
	CHECK(S_ISREG(LSTAT("ld/x").st_mode));
	CHECK(S_ISDIR(LSTAT("ld/").st_mode));

	CHECK_ERR(readlink("f", buf, sizeof(buf)), EINVAL);
	CHECK_ERR(readlink("dir", buf, sizeof(buf)), EINVAL);
	CHECK_ERR(readlink("missing", buf, sizeof(buf)), ENOENT);
	CHECK_ERR(symlink("x", "f"), EEXIST);
	CHECK_ERR(symlink("x", "l"), EEXIST);
	CHECK_ERR(symlink("x", "dir"), EEXIST);
	CHECK_ERR(symlink("x", "d"), EEXIST);
	CHECK_ERR(symlink("", "e"), ENOENT);
	CHECK_ERR(symlink("x", "missing/e"), ENOENT);
	CHECK_ERR(symlink("x", "f/e"), ENOTDIR);
	CHECK_ERR(lstat("nowhere", &st), ENOENT);
	fd = CHECK_OK(open("f", O_RDONLY));
	close(fd);
}

/* Targets of every length ext4 stores differently, up to the longest. */
static void symlink_long(void)
{
	static const size_t lens[] = { 1, 59, 60, 61, 255, 256, 1000, 4095 };
	static char target[PATH_MAX + 2], buf[PATH_MAX + 2];
	char name[16];

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		for (size_t j = 0; j < lens[i]; j++)
			target[j] = (j % 64 == 63) ? '/' : 'a' + j % 26;
		target[lens[i]] = 0;
		snprintf(name, sizeof(name), "l%zu", lens[i]);
		CHECK_OK(symlink(target, name));
		CHECK_EQ(LSTAT(name).st_size, lens[i]);
		CHECK_EQ(readlink(name, buf, sizeof(buf)), lens[i]);
		CHECK(!memcmp(buf, target, lens[i]));
	}
	memset(target, 'a', PATH_MAX);
	target[PATH_MAX] = 0;
	CHECK_ERR(symlink(target, "too-long"), ENAMETOOLONG);
	CHECK_EQ(entries("."), 2 + (int)(sizeof(lens) / sizeof(lens[0])));
}

static void symlink_loop(void)
{
	char name[16], to[16];
	struct stat st;
	int fd;

	CHECK_OK(symlink("b", "a"));
	CHECK_OK(symlink("a", "b"));
	CHECK_ERR(open("a", O_RDONLY), ELOOP);
	CHECK_ERR(stat("a", &st), ELOOP);
	CHECK_ERR(open("a", O_CREAT | O_WRONLY, 0644), ELOOP);
	CHECK(S_ISLNK(LSTAT("a").st_mode));
	CHECK_OK(symlink("self", "self"));
	CHECK_ERR(stat("self", &st), ELOOP);
	CHECK_ERR(stat("self/x", &st), ELOOP);

	/* A chain of 40 symlinks is followed; one of 41 is not. */
	write_file("c0", "end", 3, 0644);
	for (int i = 1; i <= 41; i++) {
		snprintf(name, sizeof(name), "c%d", i);
		snprintf(to, sizeof(to), "c%d", i - 1);
		CHECK_OK(symlink(to, name));
	}
	fd = CHECK_OK(open("c40", O_RDONLY));
	close(fd);
	CHECK_ERR(open("c41", O_RDONLY), ELOOP);
}

/* ------------------------------------------------------------------ */
/* mknod: fifos, sockets, devices                                     */
/* ------------------------------------------------------------------ */

static void mknod_fifo(void)
{
	static const char msg[] = "through the fifo";
	char buf[64];
	size_t got = 0;
	ssize_t n;
	int fd, status;
	pid_t pid;

	CHECK_OK(mkfifo("p", 0666));
	CHECK(S_ISFIFO(LSTAT("p").st_mode));
	CHECK_MODE("p", 0644);
	CHECK_OK(mknod("q", S_IFIFO | 0600, 0));
	CHECK(S_ISFIFO(LSTAT("q").st_mode));
	CHECK_ERR(mkfifo("p", 0644), EEXIST);
	CHECK_ERR(open("p", O_WRONLY | O_NONBLOCK), ENXIO);

	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		fd = open("p", O_WRONLY);
		_exit(fd < 0 || write(fd, msg, sizeof(msg)) != sizeof(msg));
	}
	fd = CHECK_OK(open("p", O_RDONLY));
	while ((n = read(fd, buf + got, sizeof(buf) - got)) > 0)
		got += n;
	CHECK_EQ(n, 0);
	close(fd);
	CHECK_OK(waitpid(pid, &status, 0));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(got, sizeof(msg));
	CHECK(!memcmp(buf, msg, got));
	CHECK_EQ(LSTAT("p").st_size, 0);
}

static int unix_socket(const char *path, struct sockaddr_un *sun)
{
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	strcpy(sun->sun_path, path);
	return CHECK_OK(socket(AF_UNIX, SOCK_STREAM, 0));
}

static void mknod_socket(void)
{
	struct sockaddr_un sun;
	char buf[8];
	int srv, cli, conn, other;

	/* A socket node nobody is bound to refuses connections. */
	CHECK_OK(mknod("s", S_IFSOCK | 0644, 0));
	CHECK(S_ISSOCK(LSTAT("s").st_mode));
	cli = unix_socket("s", &sun);
	CHECK_ERR(connect(cli, (struct sockaddr *)&sun, sizeof(sun)),
		  ECONNREFUSED);
	close(cli);

	/* bind() makes the node, and connect() finds the socket by it. */
	srv = unix_socket("b", &sun);
	CHECK_OK(bind(srv, (struct sockaddr *)&sun, sizeof(sun)));
	CHECK(S_ISSOCK(LSTAT("b").st_mode));
	CHECK_MODE("b", 0755);
	CHECK_OK(listen(srv, 1));
	cli = unix_socket("b", &sun);
	CHECK_OK(connect(cli, (struct sockaddr *)&sun, sizeof(sun)));
	conn = CHECK_OK(accept(srv, NULL, NULL));
	CHECK_EQ(write(cli, "hi", 2), 2);
	CHECK_EQ(read(conn, buf, sizeof(buf)), 2);
	CHECK(!memcmp(buf, "hi", 2));

	/* The name is taken, for bind() and mknod() alike. */
	other = unix_socket("b", &sun);
	CHECK_ERR(bind(other, (struct sockaddr *)&sun, sizeof(sun)),
		  EADDRINUSE);
	CHECK_ERR(mknod("b", S_IFSOCK | 0644, 0), EEXIST);
	close(other);
	close(conn);
	close(cli);
	close(srv);
	CHECK_OK(unlink("b"));
}

static void mknod_device(void)
{
	struct stat st;
	char buf[8];
	int fd;

	CHECK_OK(mknod("null", S_IFCHR | 0666, makedev(1, 3)));
	st = LSTAT("null");
	CHECK(S_ISCHR(st.st_mode));
	CHECK_EQ(st.st_mode & 07777, 0644);
	CHECK_EQ(st.st_rdev, makedev(1, 3));
	CHECK_EQ(st.st_size, 0);

	/* It is /dev/null: reads nothing, swallows everything. */
	fd = CHECK_OK(open("null", O_RDWR));
	CHECK_EQ(read(fd, buf, sizeof(buf)), 0);
	CHECK_EQ(write(fd, "gone", 4), 4);
	close(fd);

	CHECK_OK(mknod("blk", S_IFBLK | 0600, makedev(7, 200)));
	st = LSTAT("blk");
	CHECK(S_ISBLK(st.st_mode));
	CHECK_EQ(st.st_rdev, makedev(7, 200));
	CHECK_EQ(major(st.st_rdev), 7);
	CHECK_EQ(minor(st.st_rdev), 200);

	/* A regular file, when the type says so or says nothing. */
	CHECK_OK(mknod("reg", S_IFREG | 0644, 0));
	CHECK(S_ISREG(LSTAT("reg").st_mode));
	CHECK_OK(mknod("none", 0644, 0));
	CHECK(S_ISREG(LSTAT("none").st_mode));

	CHECK_ERR(mknod("null", S_IFCHR | 0644, makedev(1, 3)), EEXIST);
	CHECK_ERR(mknod("dir", S_IFDIR | 0755, 0), EPERM);
	CHECK_ERR(mknod("bad", S_IFMT | 0644, 0), EINVAL);
	CHECK_ERR(mknod("missing/x", S_IFCHR | 0644, makedev(1, 3)), ENOENT);
}

static void mknod_unprivileged(void *arg)
{
	struct stat st;

	(void)arg;
	CHECK_ERR(mknod("w/c", S_IFCHR | 0644, makedev(1, 3)), EPERM);
	CHECK_ERR(mknod("w/b", S_IFBLK | 0644, makedev(7, 200)), EPERM);
	CHECK_ERR(lstat("w/c", &st), ENOENT);
	/* FIFOs and sockets need no privilege. */
	CHECK_OK(mknod("w/p", S_IFIFO | 0644, 0));
	CHECK_OK(mknod("w/s", S_IFSOCK | 0644, 0));
	st = LSTAT("w/p");
	CHECK_EQ(st.st_uid, USER);
	CHECK_EQ(st.st_gid, USER);
}

static void mknod_perm(void)
{
	CHECK_OK(mkdir("w", 0755));
	CHECK_OK(chmod("w", 0777));
	CHECK(as_user(USER, USER, mknod_unprivileged, NULL));
	CHECK(S_ISFIFO(LSTAT("w/p").st_mode));
	CHECK(S_ISSOCK(LSTAT("w/s").st_mode));
	CHECK_EQ(entries("w"), 4);
}

/* ------------------------------------------------------------------ */
/* readdir                                                            */
/* ------------------------------------------------------------------ */

#define MANY 500

static void make_many(const char *fmt, int n)
{
	char name[32];

	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), fmt, i);
		touch(name);
	}
}

/* Index of a name "f%03d" made by make_many(), or -1. */
static int many_index(const char *name)
{
	int i, len = -1;

	if (sscanf(name, "f%3d%n", &i, &len) == 1 && len == 4 &&
	    !name[4] && i >= 0 && i < MANY)
		return i;
	return -1;
}

static void readdir_many(void)
{
	static int seen[MANY];
	int dot = 0, dotdot = 0, i;
	struct dirent *de;
	DIR *d;

	make_many("f%03d", MANY);
	d = opendir(".");
	CHECK(d != NULL);
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, "."))
			dot++;
		else if (!strcmp(de->d_name, ".."))
			dotdot++;
		else {
			i = many_index(de->d_name);
			CHECK(i >= 0);
			seen[i]++;
		}
	}
	closedir(d);
	CHECK_EQ(dot, 1);
	CHECK_EQ(dotdot, 1);
	for (i = 0; i < MANY; i++)
		CHECK_EQ(seen[i], 1);
}

static void readdir_dtype(void)
{
	static const struct {
		const char *name;
		unsigned char type;
	} want[] = {
		{ ".", DT_DIR }, { "..", DT_DIR }, { "f", DT_REG },
		{ "d", DT_DIR }, { "l", DT_LNK }, { "p", DT_FIFO },
		{ "s", DT_SOCK }, { "c", DT_CHR }, { "b", DT_BLK },
	};
	size_t n = sizeof(want) / sizeof(want[0]), found = 0, i;
	struct dirent *de;
	DIR *d;

	touch("f");
	CHECK_OK(mkdir("d", 0755));
	CHECK_OK(symlink("f", "l"));
	CHECK_OK(mkfifo("p", 0644));
	CHECK_OK(mknod("s", S_IFSOCK | 0644, 0));
	CHECK_OK(mknod("c", S_IFCHR | 0644, makedev(1, 3)));
	CHECK_OK(mknod("b", S_IFBLK | 0644, makedev(7, 200)));
	d = opendir(".");
	CHECK(d != NULL);
	while ((de = readdir(d))) {
		for (i = 0; i < n && strcmp(want[i].name, de->d_name); i++)
			;
		CHECK(i < n);
		CHECK_EQ(de->d_type, want[i].type);
		found++;
	}
	closedir(d);
	CHECK_EQ(found, n);
}

/* telldir() before an entry, seekdir() back: the same entries follow. */
static void readdir_seek(void)
{
	static char names[MANY + 2][8];
	static const int marks[] = { 0, 1, 137, 400, MANY + 1, MANY + 2 };
	long pos[sizeof(marks) / sizeof(marks[0])];
	struct dirent *de;
	int n = 0, m;
	DIR *d;

	make_many("f%03d", MANY);
	d = opendir(".");
	CHECK(d != NULL);
	for (m = 0;; n++) {
		if (m < (int)(sizeof(marks) / sizeof(marks[0])) &&
		    marks[m] == n)
			pos[m++] = telldir(d);
		de = readdir(d);
		if (!de)
			break;
		CHECK(n < MANY + 2);
		CHECK(strlen(de->d_name) < sizeof(names[n]));
		strcpy(names[n], de->d_name);
	}
	CHECK_EQ(n, MANY + 2);

	/* Back to each mark in turn, latest first. */
	while (m-- > 0) {
		seekdir(d, pos[m]);
		for (int k = marks[m]; k < n; k++) {
			de = readdir(d);
			CHECK(de != NULL);
			CHECK(!strcmp(de->d_name, names[k]));
		}
		CHECK(readdir(d) == NULL);
	}

	/* And rewinddir starts over. */
	rewinddir(d);
	de = readdir(d);
	CHECK(de && !strcmp(de->d_name, names[0]));
	closedir(d);
}

static void readdir_ino(void)
{
	struct dirent *de;
	struct stat st;
	int n = 0;
	DIR *d;

	touch("f");
	CHECK_OK(link("f", "g"));
	CHECK_OK(mkdir("d", 0755));
	CHECK_OK(symlink("f", "l"));
	CHECK_OK(mkfifo("p", 0644));
	make_many("f%03d", 20);
	d = opendir(".");
	CHECK(d != NULL);
	while ((de = readdir(d))) {
		CHECK_OK(lstat(de->d_name, &st));
		if (de->d_ino != st.st_ino)
			posix_fail(__FILE__, __LINE__, "%s: d_ino %llu, st_ino %llu",
				   de->d_name, (unsigned long long)de->d_ino,
				   (unsigned long long)st.st_ino);
		n++;
	}
	closedir(d);
	CHECK_EQ(n, 27);
}

static void readdir_unlinked(void)
{
	char name[8];
	struct dirent *de;
	int n = 0;
	DIR *d;

	make_many("f%03d", 50);
	d = opendir(".");
	CHECK(d != NULL);
	while (readdir(d))
		n++;
	CHECK_EQ(n, 52);
	for (int i = 0; i < 50; i += 2) {
		snprintf(name, sizeof(name), "f%03d", i);
		CHECK_OK(unlink(name));
	}
	rewinddir(d);
	n = 0;
	while ((de = readdir(d))) {
		int i = many_index(de->d_name);

		CHECK(i < 0 ? de->d_name[0] == '.' : i % 2 == 1);
		n++;
	}
	CHECK_EQ(n, 27);
	closedir(d);
}

/*
 * Creating entries while reading the directory: the read ends, every
 * entry that was there all along comes exactly once, none comes twice.
 */
static void readdir_growing(void)
{
	enum { OLD = 100, NEW = 1000 };
	static int old[OLD], new[NEW];
	char name[16];
	int created = 0, total = 0, i;
	struct dirent *de;
	DIR *d;

	make_many("f%03d", OLD);
	d = opendir(".");
	CHECK(d != NULL);
	while ((de = readdir(d))) {
		CHECK(++total <= OLD + NEW + 2);
		if (sscanf(de->d_name, "f%d", &i) == 1 && i < OLD)
			old[i]++;
		else if (sscanf(de->d_name, "n%d", &i) == 1 && i < NEW)
			CHECK(++new[i] == 1);
		else
			CHECK(de->d_name[0] == '.');
		for (int k = 0; k < 2 && created < NEW; k++) {
			snprintf(name, sizeof(name), "n%04d", created++);
			touch(name);
		}
	}
	closedir(d);
	for (i = 0; i < OLD; i++)
		CHECK_EQ(old[i], 1);
	CHECK_EQ(entries("."), OLD + created + 2);
}

struct ld64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

#define LONG_NAME "a-rather-long-name-x"	/* record of 40 bytes */

/* getdents64 with room for one record at a time, or for none. */
static void getdents_small(void)
{
	char buf[64] __attribute__((aligned(8)));
	struct ld64 *e = (struct ld64 *)buf;
	int fd, dot = 0, dotdot = 0, s = 0, lng = 0, einval = 0;
	long n;

	touch("s");
	touch(LONG_NAME);
	fd = CHECK_OK(open(".", O_RDONLY | O_DIRECTORY));
	CHECK_ERR(syscall(SYS_getdents64, fd, buf, 0), EINVAL);
	CHECK_ERR(syscall(SYS_getdents64, fd, buf, 1), EINVAL);
	for (;;) {
		n = syscall(SYS_getdents64, fd, buf, 24);
		if (n < 0) {
			/* The long record does not fit; it stays next. */
			CHECK_EQ(errno, EINVAL);
			einval++;
			n = CHECK_OK(syscall(SYS_getdents64, fd, buf, 40));
			CHECK_EQ(n, 40);
			CHECK(!strcmp(e->d_name, LONG_NAME));
			CHECK_EQ(e->d_reclen, 40);
			lng++;
			continue;
		}
		if (n == 0)
			break;
		CHECK_EQ(n, 24);
		CHECK_EQ(e->d_reclen, 24);
		if (!strcmp(e->d_name, "."))
			dot++;
		else if (!strcmp(e->d_name, ".."))
			dotdot++;
		else if (!strcmp(e->d_name, "s"))
			s++;
		else
			CHECK(!"an unexpected entry");
	}
	close(fd);
	CHECK(dot == 1 && dotdot == 1 && s == 1 && lng == 1 && einval == 1);

	fd = CHECK_OK(open("s", O_RDONLY));
	CHECK_ERR(syscall(SYS_getdents64, fd, buf, sizeof(buf)), ENOTDIR);
	close(fd);
}

/* ------------------------------------------------------------------ */
/* Races: each call atomic, whoever wins                              */
/* ------------------------------------------------------------------ */

#define RACERS 4
#define RACE_NAMES 200

/*
 * Run @fn(i) in RACERS children at once; each returns how many of its
 * calls took effect, or -1 after a wrong error (reported). The sum.
 */
static int race(int (*fn)(int))
{
	int pipefd[2], sum = 0, status, wins;
	pid_t pids[RACERS];

	CHECK_OK(pipe(pipefd));
	for (int i = 0; i < RACERS; i++) {
		pids[i] = fork();
		CHECK(pids[i] >= 0);
		if (pids[i] == 0) {
			close(pipefd[0]);
			wins = fn(i);
			_exit(write(pipefd[1], &wins, sizeof(wins)) !=
			      sizeof(wins));
		}
	}
	close(pipefd[1]);
	for (int i = 0; i < RACERS; i++) {
		CHECK_EQ(read(pipefd[0], &wins, sizeof(wins)), sizeof(wins));
		CHECK(wins >= 0);
		sum += wins;
	}
	close(pipefd[0]);
	for (int i = 0; i < RACERS; i++) {
		CHECK_OK(waitpid(pids[i], &status, 0));
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	return sum;
}

/* The result of one racing call: 1 if it took effect, 0 if it lost. */
static int race_result(long r, int lose, const char *what, int i)
{
	if (r >= 0)
		return 1;
	if (errno == lose)
		return 0;
	printf("# %s %d: %s\n", what, i, strerrorname_np(errno) ?: "?");
	return -1;
}

/* Each racer walks the names from its own starting point. */
#define RACE_LOOP(who, call, lose, what)				\
	char name[16];							\
	int wins = 0, r;						\
	for (int k = 0; k < RACE_NAMES; k++) {				\
		int i = (k + (who) * RACE_NAMES / RACERS) % RACE_NAMES;	\
		snprintf(name, sizeof(name), "n%03d", i);		\
		r = race_result((call), (lose), (what), i);		\
		if (r < 0)						\
			return -1;					\
		wins += r;						\
	}								\
	return wins

static int race_create(int who)
{
	RACE_LOOP(who, ({ int _fd = open(name, O_CREAT | O_EXCL | O_WRONLY,
					 0644);
			  if (_fd >= 0) close(_fd); _fd; }),
		  EEXIST, "open O_EXCL");
}

static int race_unlink(int who)
{
	RACE_LOOP(who, unlink(name), ENOENT, "unlink");
}

static int race_mkdir(int who)
{
	RACE_LOOP(who, mkdir(name, 0755), EEXIST, "mkdir");
}

static int race_rmdir(int who)
{
	RACE_LOOP(who, rmdir(name), ENOENT, "rmdir");
}

static int race_link(int who)
{
	RACE_LOOP(who, link("f", name), EEXIST, "link");
}

static int race_noreplace(int who)
{
	char from[16];

	snprintf(from, sizeof(from), "src%d", who);
	RACE_LOOP(who, ({ long _r = rename2(from, name, RENAME_NOREPLACE);
			  if (_r == 0) CHECK_OK(link(name, from)); _r; }),
		  EEXIST, "rename NOREPLACE");
}

static void race_create_remove(void)
{
	CHECK_EQ(race(race_create), RACE_NAMES);
	CHECK_EQ(entries("."), RACE_NAMES + 2);
	CHECK_EQ(race(race_unlink), RACE_NAMES);
	CHECK_EQ(entries("."), 2);
	CHECK_EQ(race(race_mkdir), RACE_NAMES);
	CHECK_EQ(LSTAT(".").st_nlink, RACE_NAMES + 2);
	CHECK_EQ(race(race_rmdir), RACE_NAMES);
	CHECK_EQ(LSTAT(".").st_nlink, 2);
	touch("f");
	CHECK_EQ(race(race_link), RACE_NAMES);
	CHECK_EQ(LSTAT("f").st_nlink, RACE_NAMES + 1);
	CHECK_EQ(race(race_unlink), RACE_NAMES);
	for (int i = 0; i < RACERS; i++) {
		char src[16];

		snprintf(src, sizeof(src), "src%d", i);
		touch(src);
	}
	CHECK_EQ(race(race_noreplace), RACE_NAMES);
	CHECK_EQ(entries("."), RACE_NAMES + RACERS + 3);
}

#define SHUFFLES 500

/* Racers move one file between two names; one of them always has it. */
static int race_shuffle(int who)
{
	const char *from = who % 2 ? "b" : "a", *to = who % 2 ? "a" : "b";
	int wins = 0;

	for (int k = 0; k < SHUFFLES; k++) {
		int r = race_result(rename(from, to), ENOENT, "rename", k);

		if (r < 0)
			return -1;
		wins += r;
	}
	return wins;
}

static void race_rename(void)
{
	struct stat a, b;
	ino_t ino;
	int ra, rb;

	write_file("a", "the one", 7, 0644);
	ino = LSTAT("a").st_ino;
	CHECK(race(race_shuffle) > 0);
	ra = lstat("a", &a);
	rb = lstat("b", &b);
	CHECK((ra == 0) != (rb == 0));
	CHECK_EQ(ra == 0 ? a.st_ino : b.st_ino, ino);
	CHECK_CONTENT(ra == 0 ? "a" : "b", "the one");
	CHECK_EQ(entries("."), 3);
}

/* ------------------------------------------------------------------ */
/* O_TMPFILE                                                          */
/* ------------------------------------------------------------------ */

static void tmpfile_basic(void)
{
	struct stat st;
	char buf[8];
	int fd;

	fd = CHECK_OK(open(".", O_TMPFILE | O_RDWR, 0666));
	CHECK_EQ(write(fd, "tmp", 3), 3);
	CHECK_OK(fstat(fd, &st));
	CHECK(S_ISREG(st.st_mode));
	CHECK_EQ(st.st_mode & 07777, 0644);
	CHECK_EQ(st.st_nlink, 0);
	CHECK_EQ(st.st_size, 3);
	CHECK_EQ(entries("."), 2);

	/* Given a name, it is an ordinary file. */
	CHECK_OK(linkat(fd, "", AT_FDCWD, "named", AT_EMPTY_PATH));
	CHECK_EQ(LSTAT("named").st_ino, st.st_ino);
	CHECK_EQ(LSTAT("named").st_nlink, 1);
	CHECK_CONTENT("named", "tmp");
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_nlink, 1);
	CHECK_EQ(pwrite(fd, "!", 1, 3), 1);
	CHECK_CONTENT("named", "tmp!");
	close(fd);

	/* O_EXCL: it can never have a name. */
	fd = CHECK_OK(open(".", O_TMPFILE | O_RDWR | O_EXCL, 0600));
	CHECK_ERR(linkat(fd, "", AT_FDCWD, "never", AT_EMPTY_PATH), ENOENT);
	CHECK_EQ(pread(fd, buf, sizeof(buf), 0), 0);
	close(fd);

	CHECK_ERR(open(".", O_TMPFILE | O_RDONLY, 0600), EINVAL);
	CHECK_ERR(open("named", O_TMPFILE | O_RDWR, 0600), ENOTDIR);
	CHECK_ERR(open("missing", O_TMPFILE | O_RDWR, 0600), ENOENT);
	CHECK_EQ(entries("."), 3);
}

/* ------------------------------------------------------------------ */
/* Permissions, as an unprivileged user                               */
/* ------------------------------------------------------------------ */

/* In a root-owned 0755 directory, USER can change no name. */
static void user_no_create(void *arg)
{
	struct stat st;

	(void)arg;
	CHECK_ERR(open("x", O_CREAT | O_WRONLY, 0644), EACCES);
	CHECK_ERR(creat("x", 0644), EACCES);
	CHECK_ERR(mkdir("x", 0755), EACCES);
	CHECK_ERR(symlink("f", "x"), EACCES);
	CHECK_ERR(mknod("x", S_IFIFO | 0644, 0), EACCES);
	CHECK_ERR(open(".", O_TMPFILE | O_RDWR, 0600), EACCES);
	CHECK_ERR(unlink("f"), EACCES);
	CHECK_ERR(rename("f", "x"), EACCES);
	CHECK_ERR(rmdir("d"), EACCES);
	CHECK_ERR(lstat("x", &st), ENOENT);
	/* Writing an existing, writable file needs no write on the dir. */
	write_file("w", "user", 4, 0644);
}

static void perm_create(void)
{
	touch("f");
	CHECK_OK(mkdir("d", 0755));
	write_file("w", "root", 4, 0666);
	CHECK_OK(chmod("w", 0666));
	CHECK(as_user(USER, USER, user_no_create, NULL));
	CHECK_CONTENT("w", "user");
	CHECK_EQ(LSTAT("w").st_uid, 0);
	CHECK_EQ(entries("."), 5);
}

static void user_open(void *arg)
{
	int fd;

	(void)arg;
	CHECK_ERR(open("secret", O_RDONLY), EACCES);
	CHECK_ERR(open("secret", O_WRONLY), EACCES);
	CHECK_ERR(open("w/secret", O_CREAT | O_RDONLY, 0644), EACCES);
	CHECK_ERR(access("secret", R_OK), EACCES);
	fd = CHECK_OK(open("public", O_RDONLY));
	close(fd);
	CHECK_ERR(open("public", O_RDWR), EACCES);
	CHECK_ERR(open("public", O_WRONLY | O_TRUNC), EACCES);
	CHECK_OK(access("public", R_OK));
	CHECK_ERR(access("public", W_OK), EACCES);
	/* The group's bits decide for a member, even against others'. */
	fd = CHECK_OK(open("group-ok", O_RDONLY));
	close(fd);
	CHECK_ERR(open("group-no", O_RDONLY), EACCES);
}

static void perm_open(void)
{
	write_file("secret", "s", 1, 0600);
	write_file("public", "p", 1, 0644);
	write_file("group-ok", "g", 1, 0640);
	write_file("group-no", "g", 1, 0604);
	CHECK_OK(chown("group-ok", 0, USER));
	CHECK_OK(chown("group-no", 0, USER));
	CHECK_OK(chmod("group-no", 0604));
	CHECK_OK(mkdir("w", 0777));
	CHECK_OK(chmod("w", 0777));
	write_file("w/secret", "s", 1, 0600);
	CHECK(as_user(USER, USER, user_open, NULL));

	/* Root reads and writes anything, but executes only what has an x. */
	CHECK_OK(access("secret", R_OK | W_OK));
	CHECK_ERR(access("secret", X_OK), EACCES);
	CHECK_OK(chmod("secret", 0100));
	CHECK_OK(access("secret", R_OK | W_OK | X_OK));
	CHECK_OK(access("w", R_OK | W_OK | X_OK));
	CHECK_EQ(LSTAT("public").st_size, 1);
}

/* "d" can be read but not searched. */
static void user_no_search(void *arg)
{
	struct stat st;
	int fd;

	(void)arg;
	CHECK_ERR(lstat("d/f", &st), EACCES);
	CHECK_ERR(open("d/f", O_RDONLY), EACCES);
	CHECK_ERR(open("d/g", O_CREAT | O_WRONLY, 0644), EACCES);
	CHECK_ERR(lstat("d/sub/f", &st), EACCES);
	CHECK_ERR(lstat("d/missing", &st), EACCES);
	CHECK_OK(lstat("d", &st));
	/* Its names can be read all the same. */
	CHECK_EQ(listed("d", "f"), 1);
	CHECK_EQ(listed("d", "sub"), 1);
	fd = CHECK_OK(open("d", O_RDONLY | O_DIRECTORY));
	CHECK_ERR(fstatat(fd, "f", &st, 0), EACCES);
	close(fd);
}

static void perm_search(void)
{
	CHECK_OK(mkdir("d", 0755));
	CHECK_OK(mkdir("d/sub", 0755));
	touch("d/f");
	touch("d/sub/f");
	CHECK_OK(chmod("d", 0744));
	CHECK(as_user(USER, USER, user_no_search, NULL));
}

/* "d" can be searched but not read. */
static void user_no_read(void *arg)
{
	struct stat st;
	int fd;

	(void)arg;
	CHECK(opendir("d") == NULL && errno == EACCES);
	CHECK_ERR(open("d", O_RDONLY | O_DIRECTORY), EACCES);
	CHECK_OK(lstat("d/f", &st));
	fd = CHECK_OK(open("d/f", O_RDONLY));
	close(fd);
	CHECK_ERR(lstat("d/missing", &st), ENOENT);
	/* An O_PATH descriptor needs no read, and reads nothing. */
	fd = CHECK_OK(open("d", O_PATH | O_DIRECTORY));
	CHECK_OK(fstatat(fd, "f", &st, 0));
	close(fd);
}

static void perm_readdir(void)
{
	CHECK_OK(mkdir("d", 0711));
	touch("d/f");
	CHECK(as_user(USER, USER, user_no_read, NULL));
}

static void user_chdir(void *arg)
{
	char cwd[PATH_MAX], want[PATH_MAX];
	int fd;

	(void)arg;
	CHECK_ERR(chdir("noexec"), EACCES);
	fd = CHECK_OK(open("noexec", O_RDONLY | O_DIRECTORY));
	CHECK_ERR(fchdir(fd), EACCES);
	close(fd);
	CHECK_OK(chdir("exec"));
	CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
	path_in(want, sizeof(want), env.dir, "exec");
	CHECK(!strcmp(cwd, want));
	CHECK_OK(chdir(".."));
}

static void perm_chdir(void)
{
	CHECK_OK(mkdir("noexec", 0744));
	CHECK_OK(mkdir("exec", 0711));
	CHECK(as_user(USER, USER, user_chdir, NULL));
}

/*
 * Moving a directory to another parent rewrites its "..", so it needs
 * write permission on the directory itself; a file needs none of its own.
 */
static void user_rename(void *arg)
{
	struct stat st;

	(void)arg;
	CHECK_ERR(rename("A/rootdir", "B/rootdir"), EACCES);
	CHECK_ERR(rename2("A/rootdir", "B/mydir", RENAME_EXCHANGE), EACCES);
	CHECK_ERR(rename2("B/mine", "A/rootdir", RENAME_EXCHANGE), EACCES);
	CHECK_OK(rename("A/rootdir", "A/renamed"));
	CHECK_OK(rename("B/mydir", "A/mydir"));
	CHECK_OK(rename("A/rootfile", "B/rootfile"));
	CHECK_OK(rename2("A/mydir", "B/mine", RENAME_EXCHANGE));
	CHECK_OK(unlink("A/mydir"));
	CHECK_OK(unlink("B/rootfile"));
	/* Nothing moves into, or out of, a directory USER cannot write. */
	CHECK_ERR(rename("B/mine", "ro/mine"), EACCES);
	CHECK_ERR(rename("ro/f", "B/f"), EACCES);
	CHECK_ERR(lstat("B/f", &st), ENOENT);
}

static void perm_rename(void)
{
	CHECK_OK(mkdir("A", 0755));
	CHECK_OK(mkdir("B", 0755));
	CHECK_OK(chown("A", USER, USER));
	CHECK_OK(chown("B", USER, USER));
	CHECK_OK(mkdir("A/rootdir", 0755));
	touch("A/rootfile");
	CHECK_OK(mkdir("B/mydir", 0755));
	CHECK_OK(chown("B/mydir", USER, USER));
	touch("B/mine");
	CHECK_OK(chown("B/mine", USER, USER));
	CHECK_OK(mkdir("ro", 0755));
	touch("ro/f");
	CHECK(as_user(USER, USER, user_rename, NULL));
	CHECK(S_ISDIR(LSTAT("A/renamed").st_mode));
	CHECK(S_ISDIR(LSTAT("B/mine").st_mode));
	CHECK_EQ(LSTAT("B/mine").st_uid, USER);
	CHECK_EQ(entries("A"), 3);
	CHECK_EQ(entries("B"), 3);
}

/* In the sticky, world-writable "t": only one's own names go. */
static void user_sticky(void *arg)
{
	struct stat st;

	(void)arg;
	CHECK_ERR(unlink("t/theirs"), EPERM);
	CHECK_ERR(rename("t/theirs", "t/moved"), EPERM);
	CHECK_ERR(rmdir("t/theirdir"), EPERM);
	CHECK_OK(mkdir("t/mydir", 0755));
	write_file("t/mine", "m", 1, 0644);
	CHECK_ERR(rename("t/mine", "t/theirs"), EPERM);
	CHECK_OK(rename("t/mine", "t/mine2"));
	CHECK_OK(lstat("t/mine2", &st));
	CHECK_EQ(st.st_uid, USER);
	CHECK_OK(unlink("t/mine2"));
	CHECK_OK(rmdir("t/mydir"));
	/* A sticky directory's owner may remove anyone's names. */
	CHECK_OK(unlink("u/theirs"));
}

static void perm_sticky(void)
{
	CHECK_OK(mkdir("t", 0755));
	CHECK_OK(chmod("t", 01777));
	touch("t/theirs");
	CHECK_OK(chown("t/theirs", OTHER, OTHER));
	CHECK_OK(mkdir("t/theirdir", 0755));
	CHECK_OK(chown("t/theirdir", OTHER, OTHER));
	CHECK_OK(mkdir("u", 0755));
	CHECK_OK(chown("u", USER, USER));
	CHECK_OK(chmod("u", 01777));
	touch("u/theirs");
	CHECK_OK(chown("u/theirs", OTHER, OTHER));
	CHECK(as_user(USER, USER, user_sticky, NULL));
	CHECK_EQ(LSTAT("t/theirs").st_uid, OTHER);
	CHECK(S_ISDIR(LSTAT("t/theirdir").st_mode));
	CHECK_EQ(entries("t"), 4);
	CHECK_EQ(entries("u"), 2);
}

/* In their own directory, USER does everything, as USER. */
static void user_own_dir(void *arg)
{
	struct stat st;

	(void)arg;
	write_file("home/f", "mine", 4, 0644);
	st = LSTAT("home/f");
	CHECK_EQ(st.st_uid, USER);
	CHECK_EQ(st.st_gid, USER);
	CHECK_OK(mkdir("home/d", 0755));
	st = LSTAT("home/d");
	CHECK_EQ(st.st_uid, USER);
	CHECK_EQ(st.st_gid, USER);
	CHECK_OK(symlink("f", "home/l"));
	CHECK_EQ(LSTAT("home/l").st_uid, USER);
	CHECK_OK(mkfifo("home/p", 0644));
	CHECK_EQ(LSTAT("home/p").st_uid, USER);
	CHECK_OK(link("home/f", "home/d/g"));
	CHECK_OK(rename("home/f", "home/d/f"));
	CHECK_OK(rename2("home/l", "home/d", RENAME_EXCHANGE));
	CHECK_OK(unlink("home/d"));
	CHECK_OK(unlink("home/l/f"));
	CHECK_OK(unlink("home/l/g"));
	CHECK_OK(rmdir("home/l"));
	CHECK_OK(unlink("home/p"));

	/* Without write on it, not even the owner changes its names. */
	CHECK_OK(chmod("home", 0555));
	CHECK_ERR(open("home/g", O_CREAT | O_WRONLY, 0644), EACCES);
	CHECK_ERR(mkdir("home/e", 0755), EACCES);
	CHECK_ERR(unlink("home/keep"), EACCES);
	CHECK_OK(chmod("home", 0755));
	CHECK_OK(unlink("home/keep"));
	CHECK_EQ(entries("home"), 2);
}

static void perm_own_dir(void)
{
	CHECK_OK(mkdir("home", 0755));
	CHECK_OK(chown("home", USER, USER));
	touch("home/keep");
	CHECK(as_user(USER, USER, user_own_dir, NULL));
}

struct create_in {
	const char *dir;
	int err;		/* 0: the create must work */
};

static void user_create_in(void *arg)
{
	const struct create_in *c = arg;
	char path[64];

	path_in(path, sizeof(path), c->dir, "f");
	if (c->err)
		CHECK_ERR(open(path, O_CREAT | O_WRONLY, 0644), c->err);
	else
		close(CHECK_OK(open(path, O_CREAT | O_WRONLY, 0644)));
}

/* Owner, group, others: the first class that matches decides. */
static void perm_classes(void)
{
	struct create_in group_ok = { "group", 0 }, group_no = { "group", EACCES },
		others_ok = { "others", 0 }, others_no = { "others", EACCES },
		owner_no = { "owner", EACCES };
	struct stat st;

	CHECK_OK(mkdir("group", 0755));
	CHECK_OK(chown("group", 0, USER));
	CHECK_OK(chmod("group", 0070));
	CHECK_OK(mkdir("others", 0755));
	CHECK_OK(chown("others", 0, USER));
	CHECK_OK(chmod("others", 0707));
	CHECK_OK(mkdir("owner", 0755));
	CHECK_OK(chown("owner", USER, 0));
	CHECK_OK(chmod("owner", 0077));

	CHECK(as_user(USER, USER, user_create_in, &group_ok));
	CHECK(as_user(OTHER, OTHER, user_create_in, &group_no));
	CHECK(as_user(USER, USER, user_create_in, &others_no));
	CHECK(as_user(OTHER, OTHER, user_create_in, &others_ok));
	CHECK(as_user(USER, USER, user_create_in, &owner_no));
	CHECK_EQ(LSTAT("group/f").st_uid, USER);
	CHECK_EQ(LSTAT("others/f").st_uid, OTHER);
	CHECK_ERR(lstat("owner/f", &st), ENOENT);
}

/* ------------------------------------------------------------------ */
/* setgid directories                                                 */
/* ------------------------------------------------------------------ */

static void user_in_setgid(void *arg)
{
	int fd;

	(void)arg;
	/* Not a member of group 100: no setgid bit on a new file. */
	fd = CHECK_OK(open("d/u", O_CREAT | O_WRONLY, 02755));
	close(fd);
	CHECK_OK(mkdir("d/ud", 0755));
}

static void setgid_dir(void)
{
	struct stat st;
	int fd;

	CHECK_OK(mkdir("d", 0755));
	CHECK_OK(chown("d", 0, 100));
	CHECK_OK(chmod("d", 02777));
	CHECK_MODE("d", 02777);

	touch("d/f");
	st = LSTAT("d/f");
	CHECK_EQ(st.st_gid, 100);
	CHECK_EQ(st.st_mode & 07777, 0644);
	CHECK_OK(mkdir("d/sub", 0755));
	st = LSTAT("d/sub");
	CHECK_EQ(st.st_gid, 100);
	CHECK_EQ(st.st_mode & 07777, 02755);
	CHECK_OK(mkdir("d/sub/deeper", 0700));
	CHECK_EQ(LSTAT("d/sub/deeper").st_gid, 100);
	CHECK_MODE("d/sub/deeper", 02700);
	CHECK_OK(symlink("f", "d/l"));
	CHECK_EQ(LSTAT("d/l").st_gid, 100);
	CHECK_OK(mkfifo("d/p", 0644));
	CHECK_EQ(LSTAT("d/p").st_gid, 100);
	fd = CHECK_OK(open("d", O_TMPFILE | O_RDWR, 0644));
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_gid, 100);
	close(fd);
	/* Root asked for the bit and keeps it. */
	fd = CHECK_OK(open("d/g", O_CREAT | O_WRONLY, 02755));
	close(fd);
	CHECK_MODE("d/g", 02755);

	CHECK(as_user(USER, USER, user_in_setgid, NULL));
	st = LSTAT("d/u");
	CHECK_EQ(st.st_uid, USER);
	CHECK_EQ(st.st_gid, 100);
	CHECK_EQ(st.st_mode & 07777, 0755);
	st = LSTAT("d/ud");
	CHECK_EQ(st.st_gid, 100);
	CHECK_EQ(st.st_mode & 07777, 02755);

	/* Outside it, the creator's group. */
	touch("plain");
	CHECK_EQ(LSTAT("plain").st_gid, 0);
}

/* ------------------------------------------------------------------ */
/* statx, directory times, statfs                                     */
/* ------------------------------------------------------------------ */

static bool stx_ts_equal(struct statx_timestamp a, struct timespec b)
{
	return a.tv_sec == b.tv_sec && a.tv_nsec == (unsigned)b.tv_nsec;
}

static void statx_one(const char *name, struct timespec before,
		      struct timespec after)
{
	struct statx stx;
	struct stat st;

	CHECK_OK(statx(AT_FDCWD, name, AT_SYMLINK_NOFOLLOW,
		       STATX_BASIC_STATS | STATX_BTIME, &stx));
	st = LSTAT(name);
	CHECK_EQ(stx.stx_mask & STATX_BASIC_STATS, STATX_BASIC_STATS);
	CHECK(stx.stx_mask & STATX_BTIME);
	CHECK_EQ(stx.stx_ino, st.st_ino);
	CHECK_EQ(stx.stx_nlink, st.st_nlink);
	CHECK_EQ(stx.stx_mode, st.st_mode);
	CHECK_EQ(stx.stx_size, st.st_size);
	CHECK_EQ(stx.stx_uid, st.st_uid);
	CHECK_EQ(stx.stx_gid, st.st_gid);
	CHECK_EQ(stx.stx_blocks, st.st_blocks);
	CHECK_EQ(makedev(stx.stx_dev_major, stx.stx_dev_minor), st.st_dev);
	CHECK_EQ(makedev(stx.stx_rdev_major, stx.stx_rdev_minor), st.st_rdev);
	CHECK(stx_ts_equal(stx.stx_mtime, st.st_mtim));
	CHECK(stx_ts_equal(stx.stx_ctime, st.st_ctim));
	CHECK(stx_ts_equal(stx.stx_atime, st.st_atim));
	/* Born between the case's start and now, no later than changed. */
	CHECK(stx.stx_btime.tv_sec >= before.tv_sec - 1);
	CHECK(stx.stx_btime.tv_sec <= after.tv_sec);
	CHECK(stx.stx_btime.tv_sec < stx.stx_ctime.tv_sec ||
	      (stx.stx_btime.tv_sec == stx.stx_ctime.tv_sec &&
	       stx.stx_btime.tv_nsec <= stx.stx_ctime.tv_nsec));
}

static void statx_basic(void)
{
	static const char *names[] = { ".", "f", "d", "l", "p", "c" };
	struct timespec before, after;
	struct statx stx;
	int fd;

	clock_gettime(CLOCK_REALTIME, &before);
	write_file("f", "hello", 5, 0644);
	CHECK_OK(mkdir("d", 0755));
	CHECK_OK(symlink("f", "l"));
	CHECK_OK(mkfifo("p", 0644));
	CHECK_OK(mknod("c", S_IFCHR | 0644, makedev(1, 3)));
	clock_gettime(CLOCK_REALTIME, &after);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		statx_one(names[i], before, after);

	/* Following the symlink, and by descriptor. */
	CHECK_OK(statx(AT_FDCWD, "l", 0, STATX_INO, &stx));
	CHECK_EQ(stx.stx_ino, LSTAT("f").st_ino);
	fd = CHECK_OK(open("f", O_RDONLY));
	CHECK_OK(statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx));
	CHECK_EQ(stx.stx_ino, LSTAT("f").st_ino);
	CHECK_EQ(stx.stx_size, 5);
	close(fd);

	CHECK_ERR(statx(AT_FDCWD, "missing", 0, STATX_BASIC_STATS, &stx),
		  ENOENT);
	CHECK_ERR(statx(AT_FDCWD, "f/x", 0, STATX_BASIC_STATS, &stx), ENOTDIR);
	CHECK_ERR(statx(AT_FDCWD, "f", AT_STATX_FORCE_SYNC | AT_STATX_DONT_SYNC,
			STATX_BASIC_STATS, &stx), EINVAL);
	CHECK_ERR(statx(AT_FDCWD, "f", 0, STATX__RESERVED, &stx), EINVAL);
}

/* Run @op, and check it moved the directory's mtime and ctime on. */
#define CHECK_DIR_TOUCHED(dir, op)					\
	do {								\
		struct stat _b = LSTAT(dir), _a;			\
		tick();							\
		CHECK_OK(op);						\
		_a = LSTAT(dir);					\
		CHECK(ts_after(_a.st_mtim, _b.st_mtim));		\
		CHECK(ts_after(_a.st_ctim, _b.st_ctim));		\
		CHECK(ts_equal(_a.st_atim, _b.st_atim));		\
	} while (0)

static void dir_times(void)
{
	struct stat a, b;
	DIR *d;

	CHECK_OK(mkdir("d", 0755));
	CHECK_DIR_TOUCHED("d", open("d/f", O_CREAT | O_WRONLY, 0644));
	CHECK_DIR_TOUCHED("d", mkdir("d/e", 0755));
	CHECK_DIR_TOUCHED("d", symlink("f", "d/l"));
	CHECK_DIR_TOUCHED("d", mknod("d/p", S_IFIFO | 0644, 0));
	CHECK_DIR_TOUCHED("d", link("d/f", "d/g"));
	CHECK_DIR_TOUCHED("d", rename("d/g", "d/h"));
	CHECK_DIR_TOUCHED("d", unlink("d/h"));
	CHECK_DIR_TOUCHED("d", rmdir("d/e"));
	CHECK_DIR_TOUCHED("d", unlink("d/p"));

	/* Moving between directories touches both. */
	CHECK_OK(mkdir("d2", 0755));
	CHECK_DIR_TOUCHED("d2", rename("d/l", "d2/l"));
	CHECK_DIR_TOUCHED("d", rename("d2/l", "d/l"));

	/* Failing, or only reading, touches nothing. */
	a = LSTAT("d");
	tick();
	CHECK_ERR(mkdir("d/f", 0755), EEXIST);
	CHECK_ERR(unlink("d/missing"), ENOENT);
	d = opendir("d");
	CHECK(d != NULL);
	while (readdir(d))
		;
	closedir(d);
	b = LSTAT("d");
	CHECK(ts_equal(a.st_mtim, b.st_mtim));
	CHECK(ts_equal(a.st_ctim, b.st_ctim));
}

/* utimensat() on a directory; then a new entry moves mtime on anyway. */
static void dir_utimens(void)
{
	struct timespec ts[2] = { { 1000000000, 123456789 },
				  { 1100000000, 987654321 } };
	struct timespec now;
	struct stat st;

	CHECK_OK(mkdir("d", 0755));
	CHECK_OK(utimensat(AT_FDCWD, "d", ts, 0));
	st = LSTAT("d");
	CHECK(ts_equal(st.st_atim, ts[0]));
	CHECK(ts_equal(st.st_mtim, ts[1]));
	touch("d/f");
	clock_gettime(CLOCK_REALTIME, &now);
	st = LSTAT("d");
	CHECK(ts_equal(st.st_atim, ts[0]));
	CHECK(ts_after(st.st_mtim, ts[1]));
	CHECK(!ts_after(st.st_mtim, now));
	CHECK(ts_equal(st.st_mtim, st.st_ctim));

	/* UTIME_OMIT leaves one alone, UTIME_NOW stamps the other. */
	ts[0].tv_nsec = UTIME_NOW;
	ts[1].tv_nsec = UTIME_OMIT;
	CHECK_OK(utimensat(AT_FDCWD, "d", ts, 0));
	st = LSTAT("d");
	CHECK(ts_after(st.st_atim, (struct timespec){ 1000000000, 123456789 }));
	CHECK(!ts_after(st.st_mtim, now));
	CHECK(ts_after(st.st_mtim, (struct timespec){ 1100000000, 987654321 }));
}

/* A renamed file's ctime moves on; its mtime does not. */
static void rename_times(void)
{
	struct stat a, b;

	touch("f");
	CHECK_OK(mkdir("d", 0755));
	a = LSTAT("f");
	tick();
	CHECK_OK(rename("f", "g"));
	b = LSTAT("g");
	CHECK(ts_equal(a.st_mtim, b.st_mtim));
	CHECK(ts_after(b.st_ctim, a.st_ctim));
	a = LSTAT("d");
	tick();
	CHECK_OK(rename("d", "e"));
	b = LSTAT("e");
	CHECK(ts_equal(a.st_mtim, b.st_mtim));
	CHECK(ts_after(b.st_ctim, a.st_ctim));
}

static void statfs_basic(void)
{
	struct statfs s, t;
	int fd;

	touch("f");
	CHECK_OK(statfs(".", &s));
	CHECK(s.f_bsize > 0);
	CHECK(s.f_frsize > 0);
	CHECK_EQ(s.f_namelen, 255);
	CHECK(s.f_files > 0);
	CHECK(s.f_ffree <= s.f_files);
	CHECK(s.f_ffree > 0);
	CHECK(s.f_blocks > 0);
	CHECK(s.f_bfree <= s.f_blocks);
	CHECK(s.f_bavail <= s.f_bfree);

	/* The same answer for any file on it, by name or descriptor. */
	fd = CHECK_OK(open("f", O_RDONLY));
	CHECK_OK(fstatfs(fd, &t));
	close(fd);
	CHECK_EQ(t.f_type, s.f_type);
	CHECK_EQ(t.f_bsize, s.f_bsize);
	CHECK_EQ(t.f_blocks, s.f_blocks);
	CHECK_EQ(t.f_files, s.f_files);
	CHECK_EQ(t.f_namelen, s.f_namelen);
	CHECK_EQ(t.f_fsid.__val[0], s.f_fsid.__val[0]);
	CHECK_EQ(t.f_fsid.__val[1], s.f_fsid.__val[1]);
	CHECK_ERR(statfs("missing", &t), ENOENT);
	CHECK_ERR(statfs("f/x", &t), ENOTDIR);
}

const struct posix_case ns_cases[] = {
	{ "ns-open-excl", open_excl, 0 },
	{ "ns-open-errors", open_errors, 0 },
	{ "ns-open-umask", open_umask, 0 },
	{ "ns-open-trunc", open_trunc, 0 },
	{ "ns-open-nofollow", open_nofollow, 0 },
	{ "ns-name-max", name_max, 0 },
	{ "ns-name-reuse", name_reuse, 0 },
	{ "ns-name-bytes", name_bytes, 0 },
	{ "ns-deep-path", deep_path, 0 },
	{ "ns-path-max", path_max, 0 },
	{ "ns-mkdir", mkdir_basic, 0 },
	{ "ns-rmdir", rmdir_basic, 0 },
	{ "ns-rmdir-cwd", rmdir_cwd, 0 },
	{ "ns-rmdir-open", rmdir_open, 0 },
	{ "ns-unlink", unlink_basic, 0 },
	{ "ns-unlink-open", unlink_open, 0 },
	{ "ns-unlink-pinned", unlink_pinned, 0 },
	{ "ns-link", link_basic, 0 },
	{ "ns-link-ctime", link_ctime, 0 },
	{ "ns-link-symlink", link_symlink, 0 },
	{ "ns-rename-file", rename_file, 0 },
	{ "ns-rename-dir", rename_dir, 0 },
	{ "ns-rename-cross-dir", rename_cross_dir, 0 },
	{ "ns-rename-open", rename_open, 0 },
	{ "ns-rename-pinned", rename_pinned, 0 },
	{ "ns-rename-noreplace", rename_noreplace, 0 },
	{ "ns-rename-exchange", rename_exchange, 0 },
	{ "ns-symlink", symlink_basic, 0 },
	{ "ns-symlink-long", symlink_long, 0 },
	{ "ns-symlink-loop", symlink_loop, 0 },
	{ "ns-mknod-fifo", mknod_fifo, 0 },
	{ "ns-mknod-socket", mknod_socket, 0 },
	{ "ns-mknod-device", mknod_device, 0 },
	{ "ns-mknod-perm", mknod_perm, 0 },
	{ "ns-readdir-many", readdir_many, 0 },
	{ "ns-readdir-dtype", readdir_dtype, 0 },
	{ "ns-readdir-seek", readdir_seek, 0 },
	{ "ns-readdir-ino", readdir_ino, 0 },
	{ "ns-readdir-unlinked", readdir_unlinked, 0 },
	{ "ns-readdir-growing", readdir_growing, 0 },
	{ "ns-getdents-small", getdents_small, 0 },
	{ "ns-race-create-remove", race_create_remove, 0 },
	{ "ns-race-rename", race_rename, 0 },
	{ "ns-tmpfile", tmpfile_basic, 0 },
	{ "ns-perm-create", perm_create, 0 },
	{ "ns-perm-open", perm_open, 0 },
	{ "ns-perm-search", perm_search, 0 },
	{ "ns-perm-readdir", perm_readdir, 0 },
	{ "ns-perm-chdir", perm_chdir, 0 },
	{ "ns-perm-rename", perm_rename, 0 },
	{ "ns-perm-sticky", perm_sticky, 0 },
	{ "ns-perm-own-dir", perm_own_dir, 0 },
	{ "ns-perm-classes", perm_classes, 0 },
	{ "ns-setgid-dir", setgid_dir, 0 },
	{ "ns-statx", statx_basic, 0 },
	{ "ns-dir-times", dir_times, 0 },
	{ "ns-dir-utimens", dir_utimens, 0 },
	{ "ns-rename-times", rename_times, 0 },
	{ "ns-statfs", statfs_basic, 0 },
	{ NULL, NULL, 0 }
};
