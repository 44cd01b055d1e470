/*
 * Data and attribute cases: read/write and their flags, truncate, modes,
 * owners and times, holes and fallocate, sync, mmap, splice and friends,
 * O_DIRECT, O_TMPFILE, inode flags and FIEMAP, locks, xattrs and POSIX
 * ACLs, exec, inotify and fanotify. Every case holds on ext4 and must hold
 * the same on presto over ext4.
 */
#include <endian.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <dirent.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <sys/fanotify.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <linux/falloc.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include "posix.h"

#define PAGE 4096
#define MIB (1024 * 1024)

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

/* The file at @path holds exactly @len bytes equal to @want. */
static void check_content(const char *path, const void *want, size_t len)
{
	char *buf = malloc(len + 1);
	size_t n;

	CHECK(buf != NULL);
	n = read_file(path, buf, len + 1);
	CHECK_EQ(n, len);
	CHECK(memcmp(buf, want, len) == 0);
	free(buf);
}

/* pread exactly @len bytes at @off and compare with @want. */
static void check_pread(int fd, off_t off, const void *want, size_t len)
{
	char *buf = malloc(len);

	CHECK(buf != NULL);
	CHECK_EQ(pread(fd, buf, len, off), len);
	CHECK(memcmp(buf, want, len) == 0);
	free(buf);
}

/* @len bytes at @off are all @c. */
static void check_filled(int fd, off_t off, size_t len, char c)
{
	char *want = malloc(len);

	CHECK(want != NULL);
	memset(want, c, len);
	check_pread(fd, off, want, len);
	free(want);
}

static void pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	CHECK_EQ(pwrite(fd, buf, len, off), len);
}

/* Write @len bytes of @c at @off. */
static void pwrite_fill(int fd, char c, size_t len, off_t off)
{
	char *buf = malloc(len);

	CHECK(buf != NULL);
	memset(buf, c, len);
	pwrite_all(fd, buf, len, off);
	free(buf);
}

static char *map(int fd, size_t len, int prot, int flags)
{
	char *p = mmap(NULL, len, prot, flags, fd, 0);

	CHECK(p != MAP_FAILED);
	return p;
}

/* A file of @pages pages of @c, open O_RDWR. */
static int make_pages(const char *path, int pages, char c)
{
	int fd = CHECK_OK(open(path, O_RDWR | O_CREAT | O_TRUNC, 0644));

	pwrite_fill(fd, c, pages * PAGE, 0);
	return fd;
}

static struct stat stat_of(const char *path)
{
	struct stat st;

	CHECK_OK(lstat(path, &st));
	return st;
}

static mode_t mode_of(const char *path)
{
	return stat_of(path).st_mode & 07777;
}

/* A root-owned file of @mode (the umask does not get in the way). */
static void make_file(const char *path, const char *data, mode_t mode)
{
	write_file(path, data, strlen(data), 0600);
	CHECK_OK(chmod(path, mode));
}

/* Copy @from (anywhere) to @to and give it @mode. */
static void copy_file(const char *from, const char *to, mode_t mode)
{
	int in = CHECK_OK(open(from, O_RDONLY));
	int out = CHECK_OK(open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600));
	char buf[65536];
	ssize_t n;

	while ((n = read(in, buf, sizeof(buf))) > 0)
		CHECK_EQ(write(out, buf, n), n);
	CHECK_OK(n);
	close(in);
	CHECK_OK(close(out));
	CHECK_OK(chmod(to, mode));
}

static bool ts_after(struct timespec a, struct timespec b)
{
	return a.tv_sec > b.tv_sec ||
	       (a.tv_sec == b.tv_sec && a.tv_nsec > b.tv_nsec);
}

/* Long enough for the file system's coarse clock to tick. */
static void tick(void)
{
	usleep(50 * 1000);
}

static void no_core_dumps(void)
{
	struct rlimit rl = { 0, 0 };

	setrlimit(RLIMIT_CORE, &rl);
}

/*
 * Touch @p (read, or write when @write) in a child; returns the signal
 * that killed it, 0 when it survived.
 */
static int touch_signal(volatile char *p, bool write)
{
	pid_t pid;
	int status;

	fflush(stdout);
	pid = CHECK_OK(fork());
	if (pid == 0) {
		no_core_dumps();
		if (write)
			*p = 'w';
		else
			(void)*p;
		_exit(0);
	}
	CHECK_OK(waitpid(pid, &status, 0));
	if (WIFSIGNALED(status))
		return WTERMSIG(status);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	return 0;
}

static int get_flags(int fd)
{
	int flags;

	CHECK_OK(ioctl(fd, FS_IOC_GETFLAGS, &flags));
	return flags;
}

static int set_flags(int fd, int flags)
{
	return ioctl(fd, FS_IOC_SETFLAGS, &flags);
}

/* Add or clear inode flags on @path (as root). */
static void change_flags(const char *path, int add, int clear)
{
	int fd = CHECK_OK(open(path, O_RDONLY | O_NONBLOCK));

	CHECK_OK(set_flags(fd, (get_flags(fd) | add) & ~clear));
	close(fd);
}

/* ------------------------------------------------------------------ */
/* read, write, pread, pwrite, O_APPEND, RWF_* flags                   */
/* ------------------------------------------------------------------ */

static void read_write(void)
{
	char buf[64];
	int fd;

	fd = CHECK_OK(open("f", O_RDWR | O_CREAT | O_EXCL, 0644));
	CHECK_EQ(write(fd, "hello world", 11), 11);
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 11);
	CHECK_EQ(read(fd, buf, sizeof(buf)), 0);	/* at EOF */
	CHECK_EQ(lseek(fd, 6, SEEK_SET), 6);
	CHECK_EQ(read(fd, buf, sizeof(buf)), 5);
	CHECK(!memcmp(buf, "world", 5));
	CHECK_EQ(read(fd, buf, sizeof(buf)), 0);

	/* pread/pwrite do not move the offset. */
	CHECK_EQ(pwrite(fd, "HELLO", 5, 0), 5);
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 11);
	CHECK_EQ(pread(fd, buf, 7, 4), 7);
	CHECK(!memcmp(buf, "O world", 7));
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 11);
	CHECK_EQ(pread(fd, buf, sizeof(buf), 11), 0);
	CHECK_EQ(pread(fd, buf, sizeof(buf), 1000), 0);
	CHECK_ERR(pread(fd, buf, 1, -1), EINVAL);
	CHECK_ERR(pwrite(fd, buf, 1, -1), EINVAL);

	/* A write past EOF leaves a hole that reads as zeros. */
	CHECK_EQ(pwrite(fd, "end", 3, 20), 3);
	CHECK_EQ(stat_of("f").st_size, 23);
	check_pread(fd, 11, "\0\0\0\0\0\0\0\0\0end", 12);

	/* A zero-length read and write succeed and change nothing. */
	CHECK_EQ(write(fd, buf, 0), 0);
	CHECK_EQ(read(fd, buf, 0), 0);
	CHECK_OK(close(fd));
	check_content("f", "HELLO world\0\0\0\0\0\0\0\0\0end", 23);
}

static void unlinked_open(void)
{
	struct stat st;
	char *p;
	int fd;

	fd = CHECK_OK(open("f", O_RDWR | O_CREAT, 0644));
	CHECK_OK(unlink("f"));
	CHECK_ERR(lstat("f", &st), ENOENT);
	pwrite_fill(fd, 'u', 2 * PAGE, 0);
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_nlink, 0);
	CHECK_EQ(st.st_size, 2 * PAGE);
	check_filled(fd, 0, 2 * PAGE, 'u');
	CHECK_OK(ftruncate(fd, PAGE));
	CHECK_OK(fchmod(fd, 0600));
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_size, PAGE);
	CHECK_EQ(st.st_mode & 07777, 0600);
	p = map(fd, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED);
	p[0] = 'M';
	check_pread(fd, 0, "Mu", 2);
	munmap(p, PAGE);
	CHECK_OK(fsync(fd));
	CHECK_OK(fsetxattr(fd, "user.a", "1", 1, 0));
	/* A new file by the old name is another file. */
	write_file("f", "new", 3, 0644);
	check_pread(fd, 0, "Mu", 2);
	close(fd);
	check_content("f", "new", 3);
}

static void wrong_access_mode(void)
{
	char buf[8];
	int ro, wo;

	write_file("f", "data", 4, 0644);
	ro = CHECK_OK(open("f", O_RDONLY));
	wo = CHECK_OK(open("f", O_WRONLY));
	CHECK_ERR(write(ro, "x", 1), EBADF);
	CHECK_ERR(pwrite(ro, "x", 1, 0), EBADF);
	CHECK_ERR(read(wo, buf, sizeof(buf)), EBADF);
	CHECK_ERR(pread(wo, buf, sizeof(buf), 0), EBADF);
	close(ro);
	close(wo);

	/* O_PATH gives neither. */
	ro = CHECK_OK(open("f", O_PATH));
	CHECK_ERR(read(ro, buf, sizeof(buf)), EBADF);
	CHECK_ERR(write(ro, "x", 1), EBADF);
	close(ro);
	check_content("f", "data", 4);
}

static void append_mode(void)
{
	int fd;

	write_file("f", "abc", 3, 0644);
	fd = CHECK_OK(open("f", O_WRONLY | O_APPEND));
	CHECK_EQ(lseek(fd, 0, SEEK_SET), 0);
	CHECK_EQ(write(fd, "def", 3), 3);
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 6);
	CHECK_EQ(lseek(fd, 1, SEEK_SET), 1);
	CHECK_EQ(write(fd, "g", 1), 1);
	/* Linux appends even for pwrite on an O_APPEND file. */
	CHECK_EQ(pwrite(fd, "h", 1, 0), 1);
	CHECK_OK(close(fd));
	check_content("f", "abcdefgh", 8);
}

static void setfl_append(void)
{
	int fd;

	write_file("f", "abc", 3, 0644);
	fd = CHECK_OK(open("f", O_WRONLY));
	CHECK_EQ(write(fd, "X", 1), 1);		/* at 0 */
	CHECK_OK(fcntl(fd, F_SETFL, O_APPEND));
	CHECK(fcntl(fd, F_GETFL) & O_APPEND);
	CHECK_EQ(lseek(fd, 0, SEEK_SET), 0);
	CHECK_EQ(write(fd, "d", 1), 1);
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 4);
	CHECK_OK(fcntl(fd, F_SETFL, 0));
	CHECK_EQ(lseek(fd, 0, SEEK_SET), 0);
	CHECK_EQ(write(fd, "Y", 1), 1);
	CHECK_OK(close(fd));
	check_content("f", "Ybcd", 4);
}

static void rwf_flags(void)
{
	struct iovec iov[2];
	char a[8], b[8];
	int fd;

	write_file("f", "0123456789", 10, 0644);
	fd = CHECK_OK(open("f", O_RDWR));

	/* RWF_APPEND: at the end whatever the offset; -1 moves the offset. */
	iov[0] = (struct iovec){ "ab", 2 };
	iov[1] = (struct iovec){ "cd", 2 };
	CHECK_EQ(pwritev2(fd, iov, 2, 0, RWF_APPEND), 4);
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 0);
	CHECK_EQ(pwritev2(fd, iov, 1, -1, RWF_APPEND), 2);
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 16);
	check_pread(fd, 0, "0123456789abcdab", 16);

	/* RWF_DSYNC and RWF_SYNC: written and durable. */
	CHECK_EQ(pwritev2(fd, iov, 2, 2, RWF_DSYNC), 4);
	CHECK_EQ(pwritev2(fd, iov, 1, 6, RWF_SYNC), 2);
	check_pread(fd, 0, "01abcdab89abcdab", 16);

	/* preadv2 into two buffers. */
	iov[0] = (struct iovec){ a, 3 };
	iov[1] = (struct iovec){ b, 4 };
	CHECK_EQ(preadv2(fd, iov, 2, 1, 0), 7);
	CHECK(!memcmp(a, "1ab", 3) && !memcmp(b, "cdab", 4));
	CHECK_EQ(lseek(fd, 1, SEEK_SET), 1);
	CHECK_EQ(preadv2(fd, iov, 2, -1, 0), 7);	/* at the offset */
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 8);
	CHECK(!memcmp(a, "1ab", 3) && !memcmp(b, "cdab", 4));

	/* An unknown flag. */
	CHECK_ERR(preadv2(fd, iov, 1, 0, 0x40000000), EOPNOTSUPP);
	CHECK_ERR(pwritev2(fd, iov, 1, 0, 0x40000000), EOPNOTSUPP);
	CHECK_OK(close(fd));
}

static void rwf_nowait(void)
{
	struct iovec iov[2];
	char a[8], b[8];
	int fd;

	write_file("f", "0123456789", 10, 0644);
	fd = CHECK_OK(open("f", O_RDWR));
	iov[0] = (struct iovec){ a, 3 };
	iov[1] = (struct iovec){ b, 4 };
	CHECK_EQ(preadv2(fd, iov, 2, 1, 0), 7);
	/* The data is cached now: a non-blocking buffered read gets it. */
	memset(a, 0, sizeof(a));
	memset(b, 0, sizeof(b));
	CHECK_EQ(CHECK_OK(preadv2(fd, iov, 2, 1, RWF_NOWAIT)), 7);
	CHECK(!memcmp(a, "123", 3) && !memcmp(b, "4567", 4));
	CHECK_EQ(preadv2(fd, iov, 2, 100, RWF_NOWAIT), 0);
	/* ext4 (6.1) has no non-blocking buffered writes. */
	CHECK_ERR(pwritev2(fd, iov, 1, 0, RWF_NOWAIT), EOPNOTSUPP);
	CHECK_OK(close(fd));
}

/* ------------------------------------------------------------------ */
/* truncate, ftruncate                                                 */
/* ------------------------------------------------------------------ */

static void truncate_as_user(void *arg)
{
	const char *mode = arg;

	if (*mode == 'r') {
		CHECK_ERR(truncate("ro", 0), EACCES);
		CHECK_ERR(open("ro", O_WRONLY | O_TRUNC), EACCES);
	} else {
		CHECK_OK(truncate("rw", 2));
	}
}

static void truncate_sizes(void)
{
	char zeros[90] = { 0 };
	int fd;

	write_file("f", "0123456789", 10, 0644);
	CHECK_OK(truncate("f", 100));
	CHECK_EQ(stat_of("f").st_size, 100);
	fd = CHECK_OK(open("f", O_RDWR));
	check_pread(fd, 0, "0123456789", 10);
	check_pread(fd, 10, zeros, 90);

	CHECK_OK(ftruncate(fd, 5));
	CHECK_EQ(stat_of("f").st_size, 5);
	/* Growing again shows zeros, not the old bytes. */
	CHECK_OK(ftruncate(fd, 10));
	check_pread(fd, 0, "01234\0\0\0\0\0", 10);
	CHECK_OK(ftruncate(fd, 0));
	CHECK_EQ(stat_of("f").st_size, 0);
	CHECK_ERR(ftruncate(fd, -1), EINVAL);
	close(fd);
	CHECK_ERR(truncate("f", -1), EINVAL);

	fd = CHECK_OK(open("f", O_RDONLY));
	CHECK_ERR(ftruncate(fd, 0), EINVAL);
	close(fd);

	CHECK_OK(mkdir("d", 0755));
	CHECK_ERR(truncate("d", 0), EISDIR);
	CHECK_ERR(truncate("missing", 0), ENOENT);
}

static void truncate_permission(void)
{
	write_file("ro", "0123456789", 10, 0644);
	make_file("rw", "0123456789", 0666);
	CHECK(as_user(1000, 1000, truncate_as_user, "r"));
	CHECK(as_user(1000, 1000, truncate_as_user, "w"));
	CHECK_EQ(stat_of("ro").st_size, 10);
	CHECK_EQ(stat_of("rw").st_size, 2);
}

/* ------------------------------------------------------------------ */
/* chmod, chown, times, statx                                          */
/* ------------------------------------------------------------------ */

static void chmod_values(void)
{
	struct stat a, b;
	int fd;

	write_file("f", "x", 1, 0644);
	CHECK_OK(chmod("f", 0640));
	CHECK_EQ(mode_of("f"), 0640);
	CHECK_EQ(stat_of("f").st_mode & S_IFMT, S_IFREG);
	fd = CHECK_OK(open("f", O_RDONLY));
	CHECK_OK(fchmod(fd, 04711));
	CHECK_EQ(mode_of("f"), 04711);
	CHECK_OK(fchmodat(AT_FDCWD, "f", 0, 0));
	CHECK_EQ(mode_of("f"), 0);
	close(fd);

	/* chmod changes the ctime, not the mtime. */
	a = stat_of("f");
	tick();
	CHECK_OK(chmod("f", 0600));
	b = stat_of("f");
	CHECK(ts_after(b.st_ctim, a.st_ctim));
	CHECK_EQ(b.st_mtim.tv_sec, a.st_mtim.tv_sec);
	CHECK_EQ(b.st_mtim.tv_nsec, a.st_mtim.tv_nsec);

	CHECK_OK(mkdir("d", 0755));
	CHECK_OK(chmod("d", 01777));
	CHECK_EQ(mode_of("d"), 01777);
	CHECK_ERR(chmod("missing", 0644), ENOENT);
}

static void chown_values(void)
{
	struct stat st, a, b;

	write_file("f", "x", 1, 0644);
	CHECK_OK(symlink("f", "l"));
	a = stat_of("f");
	tick();
	CHECK_OK(chown("f", 1000, 1001));
	b = stat_of("f");
	CHECK_EQ(b.st_uid, 1000);
	CHECK_EQ(b.st_gid, 1001);
	CHECK(ts_after(b.st_ctim, a.st_ctim));
	CHECK_OK(chown("f", -1, 1002));
	CHECK_EQ(stat_of("f").st_uid, 1000);
	CHECK_EQ(stat_of("f").st_gid, 1002);

	/* lchown changes the link, chown through it the target. */
	CHECK_OK(lchown("l", 2000, 2000));
	CHECK_EQ(stat_of("l").st_uid, 2000);
	CHECK_EQ(stat_of("f").st_uid, 1000);
	CHECK_OK(chown("l", 3000, 3000));
	CHECK_EQ(stat_of("l").st_uid, 2000);
	CHECK_OK(stat("l", &st));
	CHECK_EQ(st.st_uid, 3000);
	CHECK_EQ(st.st_gid, 3000);
}

static void chown_user(void *arg)
{
	(void)arg;
	/* Not even one's own file can be given away. */
	CHECK_ERR(chown("mine", 0, -1), EPERM);
	CHECK_ERR(chown("mine", -1, 0), EPERM);	/* not in group 0 */
	CHECK_OK(chown("mine", 1000, 1000));	/* a no-op is allowed */
	CHECK_OK(chown("mine", -1, -1));
	CHECK_ERR(chown("root", 1000, 1000), EPERM);
	CHECK_OK(chown("root", -1, -1));	/* a no-op even here */
	CHECK_ERR(chmod("root", 0777), EPERM);
	CHECK_OK(chmod("mine", 0600));
	/* The owner may set S_ISGID only for a group it is in. */
	CHECK_OK(chown("mine2", -1, -1));
	CHECK_OK(chmod("mine2", 02755));
}

static void chown_chmod_permission(void)
{
	make_file("root", "x", 0666);
	make_file("mine", "x", 0644);
	make_file("mine2", "x", 0644);
	CHECK_OK(chown("mine", 1000, 1000));
	CHECK_OK(chown("mine2", 1000, 0));	/* group 1000 is not in */
	CHECK(as_user(1000, 1000, chown_user, NULL));
	CHECK_EQ(stat_of("mine").st_uid, 1000);
	CHECK_EQ(stat_of("root").st_uid, 0);
	CHECK_EQ(mode_of("root"), 0666);
	CHECK_EQ(mode_of("mine"), 0600);
	CHECK_EQ(mode_of("mine2"), 0755);	/* S_ISGID dropped */
}

static void chown_clears_setuid(void)
{
	make_file("u", "x", 04755);
	make_file("ug", "x", 06755);
	make_file("keep", "x", 04755);
	CHECK_OK(chown("u", 1000, 1000));
	CHECK_EQ(mode_of("u"), 0755);
	CHECK_EQ(stat_of("u").st_uid, 1000);
	CHECK_OK(chown("ug", -1, 1000));
	CHECK_EQ(mode_of("ug"), 0755);
	/* chmod by root keeps what it sets. */
	CHECK_OK(chmod("keep", 06755));
	CHECK_EQ(mode_of("keep"), 06755);
	/* A directory keeps its S_ISGID across chown. */
	CHECK_OK(mkdir("d", 0755));
	CHECK_OK(chmod("d", 02755));
	CHECK_OK(chown("d", 1000, 1000));
	CHECK_EQ(mode_of("d"), 02755);
}

/* A byte past the end: an executable still runs. */
static void append_as_user(void *arg)
{
	int fd = CHECK_OK(open(arg, O_WRONLY | O_APPEND));

	CHECK_EQ(write(fd, "", 1), 1);
	close(fd);
}

static void write_as_user(void *arg)
{
	const char *path = arg;
	int fd = CHECK_OK(open(path, O_WRONLY));

	CHECK_EQ(write(fd, "y", 1), 1);
	close(fd);
}

static void write_clears_setuid(void)
{
	make_file("u", "x", 04777);
	make_file("ug", "x", 06777);
	make_file("g", "x", 02767);	/* S_ISGID without group x */
	make_file("g2", "x", 02767);
	CHECK_OK(chown("g2", 0, 1000));
	make_file("root", "x", 04777);
	CHECK(as_user(1000, 1000, write_as_user, "u"));
	CHECK_EQ(mode_of("u"), 0777);
	CHECK(as_user(1000, 1000, write_as_user, "ug"));
	CHECK_EQ(mode_of("ug"), 0777);
	/* Without group x, S_ISGID goes unless the writer is in the group. */
	CHECK(as_user(1000, 1000, write_as_user, "g"));
	CHECK_EQ(mode_of("g"), 0767);
	CHECK(as_user(1000, 1000, write_as_user, "g2"));
	CHECK_EQ(mode_of("g2"), 02767);
	/* Root's write keeps the bits. */
	write_as_user("root");
	CHECK_EQ(mode_of("root"), 04777);
	check_content("u", "y", 1);
}

/*
 * The set-id bits a write dropped are gone for the VFS at once, while the
 * writer still holds the file: the hardlink protection reads the mode
 * (a setuid file may be linked by its owner only), and a link through
 * /proc/self/fd/N meets no lookup that would refresh it.
 */
static void write_clears_setuid_at_once(void)
{
	char proc[64], old[8] = "";
	int fd, wfd, pfd;
	ssize_t n = -1;

	/* The protection on, as Debian boots with it. */
	pfd = CHECK_OK(open("/proc/sys/fs/protected_hardlinks", O_RDWR));
	CHECK(pread(pfd, old, sizeof(old) - 1, 0) > 0);
	CHECK_EQ(pwrite(pfd, "1", 1, 0), 1);
	make_file("s", "x", 04777);
	CHECK_OK(mkdir("d", 0755));
	CHECK_OK(chmod("d", 0777));
	fd = CHECK_OK(open("s", O_RDONLY));
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	/* As user 1000 (no CAP_FSETID), the file kept open for writing. */
	CHECK_OK(setresuid(-1, 1000, -1));
	wfd = open("s", O_WRONLY | O_APPEND);
	if (wfd >= 0)
		n = write(wfd, "y", 1);
	CHECK_OK(setresuid(-1, 0, -1));
	CHECK(wfd >= 0);
	CHECK_EQ(n, 1);
	CHECK_OK(setresuid(-1, 1000, -1));
	n = linkat(AT_FDCWD, proc, AT_FDCWD, "d/s2", AT_SYMLINK_FOLLOW) ?
	    errno : 0;
	CHECK_OK(setresuid(-1, 0, -1));
	CHECK_EQ(n, 0);
	CHECK_EQ(mode_of("d/s2"), 0777);
	close(wfd);
	close(fd);
	CHECK_EQ(pwrite(pfd, old, strlen(old), 0), (ssize_t)strlen(old));
	close(pfd);
}

static void utimensat_values(void)
{
	struct timespec ts[2] = { { 1000000000, 123456789 },
				  { 1100000000, 987654321 } };
	struct stat st;
	time_t now;
	int fd;

	write_file("f", "x", 1, 0644);
	CHECK_OK(utimensat(AT_FDCWD, "f", ts, 0));
	st = stat_of("f");
	CHECK_EQ(st.st_atim.tv_sec, ts[0].tv_sec);
	CHECK_EQ(st.st_atim.tv_nsec, ts[0].tv_nsec);
	CHECK_EQ(st.st_mtim.tv_sec, ts[1].tv_sec);
	CHECK_EQ(st.st_mtim.tv_nsec, ts[1].tv_nsec);

	/* UTIME_OMIT keeps one, UTIME_NOW sets the other to now. */
	now = time(NULL);
	ts[0].tv_nsec = UTIME_OMIT;
	ts[1].tv_nsec = UTIME_NOW;
	CHECK_OK(utimensat(AT_FDCWD, "f", ts, 0));
	st = stat_of("f");
	CHECK_EQ(st.st_atim.tv_sec, 1000000000);
	CHECK_EQ(st.st_atim.tv_nsec, 123456789);
	CHECK(st.st_mtim.tv_sec >= now - 1 && st.st_mtim.tv_sec <= now + 5);

	/* futimens, and times before 1970. */
	ts[0] = (struct timespec){ -1000, 5 };
	ts[1] = (struct timespec){ 1, 0 };
	fd = CHECK_OK(open("f", O_RDONLY));
	CHECK_OK(futimens(fd, ts));
	close(fd);
	st = stat_of("f");
	CHECK_EQ(st.st_atim.tv_sec, -1000);
	CHECK_EQ(st.st_atim.tv_nsec, 5);
	CHECK_EQ(st.st_mtim.tv_sec, 1);

	ts[0].tv_nsec = 1000000000;
	CHECK_ERR(utimensat(AT_FDCWD, "f", ts, 0), EINVAL);
	CHECK_ERR(utimensat(AT_FDCWD, "missing", NULL, 0), ENOENT);
}

static void utimes_user(void *arg)
{
	struct timespec now[2] = { { 0, UTIME_NOW }, { 0, UTIME_NOW } };
	struct timespec set[2] = { { 5, 0 }, { 6, 0 } };
	struct timespec omit[2] = { { 0, UTIME_OMIT }, { 0, UTIME_NOW } };

	(void)arg;
	/* Write permission is enough to set the times to now... */
	CHECK_OK(utimensat(AT_FDCWD, "rw", NULL, 0));
	CHECK_OK(utimensat(AT_FDCWD, "rw", now, 0));
	/* ... but not to set them to anything else. */
	CHECK_ERR(utimensat(AT_FDCWD, "rw", set, 0), EPERM);
	CHECK_ERR(utimensat(AT_FDCWD, "rw", omit, 0), EPERM);
	CHECK_ERR(utimensat(AT_FDCWD, "ro", NULL, 0), EACCES);
	CHECK_ERR(utimensat(AT_FDCWD, "ro", set, 0), EPERM);
}

static void utimensat_permission(void)
{
	struct timespec old[2] = { { 1000, 0 }, { 2000, 0 } };
	time_t now = time(NULL);

	make_file("rw", "x", 0666);
	make_file("ro", "x", 0644);
	CHECK_OK(utimensat(AT_FDCWD, "rw", old, 0));
	CHECK_OK(utimensat(AT_FDCWD, "ro", old, 0));
	CHECK(as_user(1000, 1000, utimes_user, NULL));
	CHECK(stat_of("rw").st_mtim.tv_sec >= now - 1);
	CHECK_EQ(stat_of("ro").st_mtim.tv_sec, 2000);
}

static void utimensat_nofollow(void)
{
	struct timespec tf[2] = { { 1000, 1 }, { 2000, 2 } };
	struct timespec tl[2] = { { 3000, 3 }, { 4000, 4 } };
	struct stat st;

	write_file("f", "x", 1, 0644);
	CHECK_OK(symlink("f", "l"));
	CHECK_OK(utimensat(AT_FDCWD, "f", tf, 0));
	CHECK_OK(utimensat(AT_FDCWD, "l", tl, AT_SYMLINK_NOFOLLOW));
	st = stat_of("l");
	CHECK_EQ(st.st_atim.tv_sec, 3000);
	CHECK_EQ(st.st_mtim.tv_sec, 4000);
	CHECK_EQ(st.st_mtim.tv_nsec, 4);
	st = stat_of("f");
	CHECK_EQ(st.st_atim.tv_sec, 1000);
	CHECK_EQ(st.st_mtim.tv_sec, 2000);
	CHECK_EQ(st.st_mtim.tv_nsec, 2);
	/* Without the flag the target changes. */
	CHECK_OK(utimensat(AT_FDCWD, "l", tf, 0));
	CHECK_EQ(stat_of("l").st_mtim.tv_sec, 4000);
}

static void times_follow_data(void)
{
	struct timespec old[2] = { { 1000, 0 }, { 2000, 0 } };
	struct stat st;
	char buf[8], *p;
	int fd;

	write_file("f", "data", 4, 0644);
	fd = CHECK_OK(open("f", O_RDWR));
	/* A write moves mtime and ctime, not atime. */
	CHECK_OK(futimens(fd, old));
	CHECK_EQ(pwrite(fd, "D", 1, 0), 1);
	st = stat_of("f");
	CHECK(st.st_mtim.tv_sec > 2000 && st.st_ctim.tv_sec > 2000);
	CHECK_EQ(st.st_atim.tv_sec, 1000);
	/* A read moves an atime older than the mtime (relatime). */
	CHECK_EQ(pread(fd, buf, 4, 0), 4);
	CHECK(stat_of("f").st_atim.tv_sec > 2000);
	/* An empty write moves nothing. */
	CHECK_OK(futimens(fd, old));
	CHECK_EQ(pwrite(fd, buf, 0, 0), 0);
	CHECK_EQ(stat_of("f").st_mtim.tv_sec, 2000);
	/* truncate and ftruncate to another size. */
	CHECK_OK(ftruncate(fd, 2));
	CHECK(stat_of("f").st_mtim.tv_sec > 2000);
	CHECK_OK(futimens(fd, old));
	CHECK_OK(truncate("f", PAGE));
	CHECK(stat_of("f").st_mtim.tv_sec > 2000);
	/* A store through a shared mapping. */
	CHECK_OK(futimens(fd, old));
	p = map(fd, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED);
	p[0] = 'M';
	CHECK_OK(msync(p, PAGE, MS_SYNC));
	munmap(p, PAGE);
	CHECK(stat_of("f").st_mtim.tv_sec > 2000);
	close(fd);
}

static void noatime_user(void *arg)
{
	int fd;

	(void)arg;
	CHECK_ERR(open("f", O_RDONLY | O_NOATIME), EPERM);
	fd = CHECK_OK(open("f", O_RDONLY));
	CHECK_ERR(fcntl(fd, F_SETFL, O_NOATIME), EPERM);
	close(fd);
}

static void noatime(void)
{
	struct timespec old[2] = { { 1000, 0 }, { 2000, 0 } };
	char buf[8];
	int fd;

	write_file("f", "data", 4, 0644);
	CHECK_OK(utimensat(AT_FDCWD, "f", old, 0));
	fd = CHECK_OK(open("f", O_RDONLY | O_NOATIME));
	CHECK_EQ(read(fd, buf, sizeof(buf)), 4);
	close(fd);
	CHECK_EQ(stat_of("f").st_atim.tv_sec, 1000);
	/* Without it, a read moves the atime (relatime). */
	fd = CHECK_OK(open("f", O_RDONLY));
	CHECK_EQ(read(fd, buf, sizeof(buf)), 4);
	close(fd);
	CHECK(stat_of("f").st_atim.tv_sec > 2000);

	/* Only the owner may. */
	CHECK(as_user(1000, 1000, noatime_user, NULL));
}

static void noatime_setfl(void)
{
	const int modes[] = { O_RDONLY, O_RDWR };
	struct timespec old[2] = { { 1000, 0 }, { 2000, 0 } };
	char buf[8];
	int fd;

	/* Set and cleared on an open descriptor. */
	write_file("f", "data", 4, 0644);
	for (int i = 0; i < 2; i++) {
		CHECK_OK(utimensat(AT_FDCWD, "f", old, 0));
		fd = CHECK_OK(open("f", modes[i]));
		CHECK_OK(fcntl(fd, F_SETFL, O_NOATIME));
		CHECK(fcntl(fd, F_GETFL) & O_NOATIME);
		CHECK_EQ(pread(fd, buf, sizeof(buf), 0), 4);
		CHECK_EQ(stat_of("f").st_atim.tv_sec, 1000);
		CHECK_OK(fcntl(fd, F_SETFL, 0));
		CHECK_EQ(pread(fd, buf, sizeof(buf), 0), 4);
		CHECK(stat_of("f").st_atim.tv_sec > 2000);
		close(fd);
	}
}

/*
 * The access time of @path, after its times were set to an hour from now
 * (atime) and two minutes ago (mtime; ctime is now): newer than both, so
 * relatime leaves it alone and strictatime does not.
 */
static time_t future_atime(const char *path)
{
	time_t now = time(NULL);
	struct timespec ts[2] = { { now + 3600, 0 }, { now - 120, 0 } };

	CHECK_OK(utimensat(AT_FDCWD, path, ts, 0));
	return now + 3600;
}

/* A read of @path, and a listing of @dir. */
static void read_and_list(const char *path, const char *dir)
{
	char buf[8];
	DIR *d;

	read_file(path, buf, sizeof(buf));
	d = opendir(dir);
	CHECK(d != NULL);
	while (readdir(d))
		;
	closedir(d);
}

/*
 * Access times follow the options of the mount a file is read through
 * (noatime, relatime, strictatime), for files and directories, and
 * whether another reader has the file open or not.
 */
static void atime_by_mount_options(void)
{
	const char *tmp = getenv("TMPDIR");
	char cwd[4096], mnt[4200], f[4300], d[4300];
	time_t before;
	int keep;

	CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
	snprintf(mnt, sizeof(mnt), "%s/posix-atime-XXXXXX", tmp ? tmp : "/tmp");
	CHECK(mkdtemp(mnt) != NULL);
	CHECK_OK(mount(cwd, mnt, NULL, MS_BIND, NULL));
	snprintf(f, sizeof(f), "%s/f", mnt);
	snprintf(d, sizeof(d), "%s/d", mnt);
	write_file("f", "data", 4, 0644);
	CHECK_OK(mkdir("d", 0755));
	keep = CHECK_OK(open("f", O_RDONLY));

	CHECK_OK(mount(NULL, mnt, NULL, MS_REMOUNT | MS_BIND | MS_NOATIME,
		       NULL));
	before = future_atime("f");
	future_atime("d");
	read_and_list(f, d);
	CHECK_EQ(stat_of("f").st_atime, before);
	CHECK_EQ(stat_of("d").st_atime, before);

	CHECK_OK(mount(NULL, mnt, NULL, MS_REMOUNT | MS_BIND | MS_STRICTATIME,
		       NULL));
	before = future_atime("f");
	future_atime("d");
	read_and_list(f, d);
	CHECK(stat_of("f").st_atime < before);
	CHECK(stat_of("d").st_atime < before);

	/* The test's own mount is relatime. */
	before = future_atime("f");
	future_atime("d");
	read_and_list("f", "d");
	CHECK_EQ(stat_of("f").st_atime, before);
	CHECK_EQ(stat_of("d").st_atime, before);

	close(keep);
	CHECK_OK(umount2(mnt, MNT_DETACH));
	CHECK_OK(rmdir(mnt));
	CHECK_OK(rmdir("d"));
	CHECK_OK(unlink("f"));
}

static void statx_fields(void)
{
	struct statx sx, sx2;
	struct stat st;
	int fd;

	write_file("f", "hello", 5, 0644);
	CHECK_OK(statx(AT_FDCWD, "f", 0, STATX_BASIC_STATS | STATX_BTIME,
		       &sx));
	CHECK_EQ(sx.stx_mask & STATX_BASIC_STATS, STATX_BASIC_STATS);
	CHECK(sx.stx_mask & STATX_BTIME);
	st = stat_of("f");
	CHECK_EQ(sx.stx_size, 5);
	CHECK_EQ(sx.stx_ino, st.st_ino);
	CHECK_EQ(sx.stx_mode, st.st_mode);
	CHECK_EQ(sx.stx_nlink, st.st_nlink);
	CHECK_EQ(sx.stx_blocks, st.st_blocks);
	CHECK_EQ(sx.stx_blksize, st.st_blksize);
	CHECK_EQ(makedev(sx.stx_dev_major, sx.stx_dev_minor), st.st_dev);
	CHECK_EQ(sx.stx_mtime.tv_sec, st.st_mtim.tv_sec);
	CHECK_EQ(sx.stx_mtime.tv_nsec, st.st_mtim.tv_nsec);
	CHECK(sx.stx_btime.tv_sec > 0);
	CHECK(sx.stx_btime.tv_sec <= sx.stx_ctime.tv_sec);
	CHECK(sx.stx_attributes_mask & STATX_ATTR_APPEND);
	CHECK(sx.stx_attributes_mask & STATX_ATTR_IMMUTABLE);
	CHECK(!(sx.stx_attributes & (STATX_ATTR_APPEND |
				     STATX_ATTR_IMMUTABLE)));

	/* Inode flags show in stx_attributes. */
	change_flags("f", FS_APPEND_FL | FS_NODUMP_FL, 0);
	CHECK_OK(statx(AT_FDCWD, "f", 0, STATX_BASIC_STATS, &sx2));
	CHECK(sx2.stx_attributes & STATX_ATTR_APPEND);
	CHECK(sx2.stx_attributes & STATX_ATTR_NODUMP);
	change_flags("f", 0, FS_APPEND_FL | FS_NODUMP_FL);

	/* btime survives a write and a chmod. */
	write_file("f", "other", 5, 0644);
	CHECK_OK(chmod("f", 0600));
	fd = CHECK_OK(open("f", O_RDONLY));
	CHECK_OK(statx(fd, "", AT_EMPTY_PATH | AT_STATX_FORCE_SYNC,
		       STATX_BTIME, &sx2));
	close(fd);
	CHECK(sx2.stx_mask & STATX_BTIME);
	CHECK_EQ(sx2.stx_btime.tv_sec, sx.stx_btime.tv_sec);
	CHECK_EQ(sx2.stx_btime.tv_nsec, sx.stx_btime.tv_nsec);
	CHECK_EQ(sx2.stx_ino, sx.stx_ino);

	CHECK_ERR(statx(AT_FDCWD, "f", AT_STATX_FORCE_SYNC |
			AT_STATX_DONT_SYNC, STATX_BASIC_STATS, &sx2), EINVAL);
	CHECK_ERR(statx(AT_FDCWD, "f", 0, STATX__RESERVED, &sx2), EINVAL);
}

/* ------------------------------------------------------------------ */
/* Holes, lseek, fallocate                                             */
/* ------------------------------------------------------------------ */

/* 4 KiB of data at 0 and at 1 MiB, a hole between, synced. */
static int make_sparse(const char *path)
{
	int fd = CHECK_OK(open(path, O_RDWR | O_CREAT | O_TRUNC, 0644));

	pwrite_fill(fd, 'a', PAGE, 0);
	pwrite_fill(fd, 'b', PAGE, MIB);
	CHECK_OK(fsync(fd));
	return fd;
}

static void seek_data_hole(void)
{
	const off_t end = MIB + PAGE;
	int fd = make_sparse("f");

	CHECK_EQ(lseek(fd, 0, SEEK_DATA), 0);
	CHECK_EQ(lseek(fd, 0, SEEK_HOLE), PAGE);
	CHECK_EQ(lseek(fd, 100, SEEK_HOLE), PAGE);
	CHECK_EQ(lseek(fd, PAGE, SEEK_DATA), MIB);
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), MIB);	/* the offset moved */
	CHECK_EQ(lseek(fd, PAGE + 1, SEEK_HOLE), PAGE + 1);
	CHECK_EQ(lseek(fd, MIB + 10, SEEK_DATA), MIB + 10);
	CHECK_EQ(lseek(fd, MIB, SEEK_HOLE), end);	/* the implicit hole */
	CHECK_EQ(lseek(fd, end - 1, SEEK_HOLE), end);
	CHECK_ERR(lseek(fd, end, SEEK_DATA), ENXIO);
	CHECK_ERR(lseek(fd, end + 100, SEEK_DATA), ENXIO);
	CHECK_ERR(lseek(fd, end, SEEK_HOLE), ENXIO);
	CHECK_ERR(lseek(fd, -1, SEEK_DATA), ENXIO);
	check_filled(fd, PAGE, PAGE, 0);
	check_filled(fd, MIB, PAGE, 'b');
	close(fd);

	/* An empty file has neither. */
	fd = CHECK_OK(open("empty", O_RDWR | O_CREAT, 0644));
	CHECK_ERR(lseek(fd, 0, SEEK_DATA), ENXIO);
	CHECK_ERR(lseek(fd, 0, SEEK_HOLE), ENXIO);
	close(fd);
}

static void seek_end(void)
{
	int fd;

	write_file("f", "0123456789", 10, 0644);
	fd = CHECK_OK(open("f", O_RDWR));
	CHECK_EQ(lseek(fd, 0, SEEK_END), 10);
	CHECK_EQ(lseek(fd, -3, SEEK_END), 7);
	CHECK_EQ(lseek(fd, 2, SEEK_CUR), 9);
	CHECK_EQ(lseek(fd, -10, SEEK_END), 0);
	CHECK_ERR(lseek(fd, -11, SEEK_END), EINVAL);
	CHECK_ERR(lseek(fd, -1, SEEK_SET), EINVAL);
	CHECK_ERR(lseek(fd, -1, SEEK_CUR), EINVAL);
	CHECK_ERR(lseek(fd, 0, 17), EINVAL);
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 0);	/* failures moved nothing */
	/* Beyond the end is fine, and a write there leaves a hole. */
	CHECK_EQ(lseek(fd, 10, SEEK_END), 20);
	CHECK_EQ(write(fd, "x", 1), 1);
	CHECK_EQ(lseek(fd, 0, SEEK_END), 21);
	/* The end follows the size, also after a truncate elsewhere. */
	CHECK_OK(truncate("f", 5));
	CHECK_EQ(lseek(fd, 0, SEEK_END), 5);
	close(fd);
}

static void sparse_blocks(void)
{
	struct stat sparse, dense;
	int fd;

	fd = make_sparse("sparse");
	close(fd);
	fd = CHECK_OK(open("dense", O_RDWR | O_CREAT, 0644));
	pwrite_fill(fd, 'c', MIB + PAGE, 0);
	CHECK_OK(fsync(fd));
	close(fd);
	sparse = stat_of("sparse");
	dense = stat_of("dense");
	CHECK_EQ(sparse.st_size, dense.st_size);
	CHECK(sparse.st_blocks >= 2 * PAGE / 512);
	CHECK(sparse.st_blocks < dense.st_blocks);
	CHECK(dense.st_blocks >= (MIB + PAGE) / 512);
	CHECK(sparse.st_blksize > 0);
}

static void fallocate_modes(void)
{
	struct stat a, b;
	int fd;

	fd = CHECK_OK(open("f", O_RDWR | O_CREAT, 0644));
	CHECK_OK(fallocate(fd, 0, 0, MIB));
	a = stat_of("f");
	CHECK_EQ(a.st_size, MIB);
	CHECK(a.st_blocks >= MIB / 512);
	check_filled(fd, 0, PAGE, 0);

	/* KEEP_SIZE past the end: more blocks, same size. */
	CHECK_OK(fallocate(fd, FALLOC_FL_KEEP_SIZE, MIB, MIB));
	b = stat_of("f");
	CHECK_EQ(b.st_size, MIB);
	CHECK(b.st_blocks >= a.st_blocks + MIB / 512);

	/* Inside the file, mode 0 does not change the size. */
	CHECK_OK(fallocate(fd, 0, 0, PAGE));
	CHECK_EQ(stat_of("f").st_size, MIB);

	CHECK_ERR(fallocate(fd, 0, 0, 0), EINVAL);
	CHECK_ERR(fallocate(fd, 0, -1, PAGE), EINVAL);
	CHECK_ERR(fallocate(fd, FALLOC_FL_PUNCH_HOLE, 0, PAGE), EOPNOTSUPP);
	close(fd);

	fd = CHECK_OK(open("f", O_RDONLY));
	CHECK_ERR(fallocate(fd, 0, 0, PAGE), EBADF);
	close(fd);
}

static void fallocate_punch(void)
{
	const int mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
	struct stat a, b;
	int fd;

	fd = CHECK_OK(open("f", O_RDWR | O_CREAT, 0644));
	pwrite_fill(fd, 'x', 64 * 1024, 0);
	CHECK_OK(fsync(fd));
	a = stat_of("f");
	CHECK_OK(fallocate(fd, mode, 16 * 1024, 16 * 1024));
	b = stat_of("f");
	CHECK_EQ(b.st_size, 64 * 1024);
	CHECK_EQ(b.st_blocks, a.st_blocks - 16 * 1024 / 512);
	check_filled(fd, 0, 16 * 1024, 'x');
	check_filled(fd, 16 * 1024, 16 * 1024, 0);
	check_filled(fd, 32 * 1024, 32 * 1024, 'x');
	CHECK_EQ(lseek(fd, 0, SEEK_HOLE), 16 * 1024);
	CHECK_EQ(lseek(fd, 16 * 1024, SEEK_DATA), 32 * 1024);

	/* A partial block is zeroed in place. */
	CHECK_OK(fallocate(fd, mode, 100, 10));
	check_pread(fd, 98, "xx\0\0\0\0\0\0\0\0\0\0xx", 14);

	/* ZERO_RANGE reads back zeros too, the size stays. */
	CHECK_OK(fallocate(fd, FALLOC_FL_ZERO_RANGE, 40 * 1024, 8 * 1024));
	check_filled(fd, 40 * 1024, 8 * 1024, 0);
	check_filled(fd, 48 * 1024, 16 * 1024, 'x');
	CHECK_EQ(stat_of("f").st_size, 64 * 1024);

	/* COLLAPSE_RANGE wants whole blocks. */
	CHECK_ERR(fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 100, PAGE), EINVAL);
	close(fd);
}

/* ------------------------------------------------------------------ */
/* fsync, fdatasync, syncfs, sync_file_range                           */
/* ------------------------------------------------------------------ */

static void sync_calls(void)
{
	const unsigned int all = SYNC_FILE_RANGE_WAIT_BEFORE |
				 SYNC_FILE_RANGE_WRITE |
				 SYNC_FILE_RANGE_WAIT_AFTER;
	int fd, dir;

	fd = CHECK_OK(open("f", O_RDWR | O_CREAT, 0644));
	pwrite_fill(fd, 'x', 3 * PAGE, 0);
	CHECK_EQ(fsync(fd), 0);
	pwrite_fill(fd, 'y', PAGE, PAGE);
	CHECK_EQ(fdatasync(fd), 0);
	CHECK_EQ(sync_file_range(fd, 0, 0, all), 0);
	CHECK_EQ(sync_file_range(fd, PAGE, PAGE, SYNC_FILE_RANGE_WRITE), 0);
	CHECK_ERR(sync_file_range(fd, -1, 0, all), EINVAL);
	CHECK_ERR(sync_file_range(fd, 0, 0, 0x100), EINVAL);
	CHECK_EQ(syncfs(fd), 0);
	close(fd);

	/* A read-only descriptor may be synced too. */
	fd = CHECK_OK(open("f", O_RDONLY));
	CHECK_EQ(fsync(fd), 0);
	CHECK_EQ(fdatasync(fd), 0);
	close(fd);

	CHECK_OK(mkdir("d", 0755));
	dir = CHECK_OK(open("d", O_RDONLY | O_DIRECTORY));
	CHECK_EQ(fsync(dir), 0);
	CHECK_EQ(fdatasync(dir), 0);
	CHECK_EQ(syncfs(dir), 0);
	CHECK_EQ(sync_file_range(dir, 0, 0, all), 0);
	close(dir);
	dir = CHECK_OK(open(".", O_RDONLY | O_DIRECTORY));
	CHECK_EQ(fsync(dir), 0);
	close(dir);

	/* O_PATH descriptors cannot be synced. */
	fd = CHECK_OK(open("f", O_PATH));
	CHECK_ERR(fsync(fd), EBADF);
	close(fd);
}

/* ------------------------------------------------------------------ */
/* fadvise, readahead, size limits                                     */
/* ------------------------------------------------------------------ */

static void fadvise_calls(void)
{
	const int advice[] = { POSIX_FADV_NORMAL, POSIX_FADV_SEQUENTIAL,
			       POSIX_FADV_RANDOM, POSIX_FADV_NOREUSE,
			       POSIX_FADV_WILLNEED, POSIX_FADV_DONTNEED };
	int fd, ro, dir;

	fd = make_pages("f", 4, 'a');
	ro = CHECK_OK(open("f", O_RDONLY));
	for (size_t i = 0; i < sizeof(advice) / sizeof(advice[0]); i++) {
		CHECK_EQ(posix_fadvise(fd, 0, 0, advice[i]), 0);
		CHECK_EQ(posix_fadvise(ro, PAGE, PAGE, advice[i]), 0);
	}
	CHECK_EQ(posix_fadvise(fd, 0, 0, 99), EINVAL);
	CHECK_EQ(posix_fadvise(fd, 0, -1, POSIX_FADV_NORMAL), EINVAL);
	CHECK_EQ(readahead(ro, 0, 4 * PAGE), 0);
	/* Dropped from the cache, the data is still there. */
	CHECK_OK(fsync(fd));
	CHECK_EQ(posix_fadvise(ro, 0, 0, POSIX_FADV_DONTNEED), 0);
	check_filled(ro, 0, 4 * PAGE, 'a');
	close(fd);
	close(ro);

	CHECK_OK(mkdir("d", 0755));
	dir = CHECK_OK(open("d", O_RDONLY | O_DIRECTORY));
	CHECK_ERR(readahead(dir, 0, PAGE), EINVAL);
	close(dir);
}

static void size_limits(void)
{
	const off_t huge = 1LL << 46;	/* past ext4's 16 TiB */
	const off_t big = 5LL << 30;	/* past 4 GiB */
	struct rlimit rl = { 1000, RLIM_INFINITY };
	static char buf[2000];
	int fd;

	signal(SIGXFSZ, SIG_IGN);
	fd = CHECK_OK(open("f", O_RDWR | O_CREAT, 0644));
	CHECK_ERR(pwrite(fd, "x", 1, huge), EFBIG);
	CHECK_ERR(ftruncate(fd, huge), EFBIG);
	CHECK_ERR(truncate("f", huge), EFBIG);
	CHECK_ERR(lseek(fd, huge, SEEK_SET), EINVAL);
	CHECK_ERR(fallocate(fd, 0, huge, PAGE), EFBIG);
	CHECK_EQ(stat_of("f").st_size, 0);

	/* Large offsets are fine below the limit. */
	CHECK_EQ(pwrite(fd, "far", 3, big), 3);
	CHECK_EQ(stat_of("f").st_size, big + 3);
	check_pread(fd, big, "far", 3);
	CHECK_EQ(lseek(fd, 0, SEEK_END), big + 3);
	CHECK_EQ(lseek(fd, 0, SEEK_DATA), big & ~(off_t)(PAGE - 1));
	CHECK_OK(fallocate(fd, FALLOC_FL_KEEP_SIZE, big + PAGE, PAGE));
	CHECK_OK(ftruncate(fd, 0));

	/* RLIMIT_FSIZE: a short write, then EFBIG. */
	CHECK_OK(setrlimit(RLIMIT_FSIZE, &rl));
	CHECK_EQ(pwrite(fd, buf, sizeof(buf), 0), 1000);
	CHECK_ERR(pwrite(fd, buf, 1, 1000), EFBIG);
	CHECK_ERR(ftruncate(fd, 2000), EFBIG);
	CHECK_ERR(fallocate(fd, 0, 0, 2000), EFBIG);
	CHECK_OK(ftruncate(fd, 500));
	CHECK_EQ(stat_of("f").st_size, 500);
	close(fd);
}

/* ------------------------------------------------------------------ */
/* mmap                                                                */
/* ------------------------------------------------------------------ */

static void mmap_shared_coherent(void)
{
	int fd = make_pages("f", 2, 'a');
	char *p = map(fd, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED);
	char buf[8];

	/* Stores through the mapping are seen by read()... */
	memcpy(p, "MAPPED", 6);
	check_pread(fd, 0, "MAPPEDaa", 8);
	/* ... and write() is seen through the mapping. */
	pwrite_all(fd, "WRITTEN", 7, PAGE + 10);
	CHECK(!memcmp(p + PAGE + 10, "WRITTEN", 7));
	CHECK_EQ(msync(p, 2 * PAGE, MS_SYNC), 0);
	CHECK_EQ(msync(p, PAGE, MS_ASYNC), 0);
	CHECK_EQ(msync(p, PAGE, MS_INVALIDATE), 0);
	CHECK_OK(munmap(p, 2 * PAGE));
	close(fd);

	/* What the mapping stored is in the file for a new open. */
	fd = CHECK_OK(open("f", O_RDONLY));
	CHECK_EQ(read(fd, buf, 8), 8);
	CHECK(!memcmp(buf, "MAPPEDaa", 8));
	close(fd);
	CHECK_EQ(stat_of("f").st_size, 2 * PAGE);
}

static void mmap_private(void)
{
	int fd = make_pages("f", 1, 'a');
	char *priv = map(fd, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	char *shared = map(fd, PAGE, PROT_READ, MAP_SHARED);
	char *priv2 = map(fd, PAGE, PROT_READ, MAP_PRIVATE);

	memcpy(priv, "private", 7);
	CHECK(!memcmp(priv, "private", 7));
	check_filled(fd, 0, PAGE, 'a');
	CHECK(shared[0] == 'a' && shared[6] == 'a');
	CHECK(priv2[0] == 'a');
	/* A write() after the copy does not reach the private page... */
	pwrite_all(fd, "file", 4, 0);
	CHECK(!memcmp(priv, "private", 7));
	/* ... but does reach shared ones and untouched private ones. */
	CHECK(!memcmp(shared, "file", 4));
	CHECK(!memcmp(priv2, "file", 4));
	CHECK_EQ(msync(priv, PAGE, MS_SYNC), 0);
	check_pread(fd, 0, "filea", 5);
	munmap(priv, PAGE);
	munmap(priv2, PAGE);
	munmap(shared, PAGE);
	close(fd);
}

static void mmap_truncate_sigbus(void)
{
	int fd = make_pages("f", 3, 'a');
	char *p = map(fd, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED);

	CHECK_EQ(touch_signal(p + 2 * PAGE + 10, false), 0);
	CHECK_OK(ftruncate(fd, PAGE + 100));
	/* The page holding the new EOF stays, zeroed past it. */
	CHECK_EQ(p[PAGE + 50], 'a');
	CHECK_EQ(p[PAGE + 200], 0);
	CHECK_EQ(touch_signal(p + PAGE + 200, true), 0);
	/* Beyond that page: SIGBUS for reads and writes. */
	CHECK_EQ(touch_signal(p + 2 * PAGE + 10, false), SIGBUS);
	CHECK_EQ(touch_signal(p + 2 * PAGE, true), SIGBUS);
	CHECK_EQ(stat_of("f").st_size, PAGE + 100);
	munmap(p, 3 * PAGE);
	close(fd);
}

static void mmap_grow(void)
{
	int fd = CHECK_OK(open("f", O_RDWR | O_CREAT, 0644));
	char *p;

	pwrite_fill(fd, 'a', 100, 0);
	p = map(fd, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED);
	CHECK_EQ(p[99], 'a');
	CHECK_EQ(p[100], 0);
	CHECK_EQ(touch_signal(p + PAGE + 904, false), SIGBUS);
	CHECK_OK(ftruncate(fd, 2 * PAGE));
	CHECK_EQ(touch_signal(p + PAGE + 904, false), 0);
	p[PAGE + 904] = 'z';
	check_pread(fd, PAGE + 903, "\0z\0", 3);
	/* Grown by a write(): visible in the mapping too. */
	pwrite_all(fd, "tail", 4, 2 * PAGE + 10);
	CHECK(!memcmp(p + 2 * PAGE + 10, "tail", 4));
	CHECK_EQ(p[2 * PAGE], 0);
	CHECK_EQ(msync(p, 3 * PAGE, MS_SYNC), 0);
	munmap(p, 3 * PAGE);
	close(fd);
}

static void mmap_access_modes(void)
{
	int fd;
	char *p;

	write_file("f", "data", 4, 0644);
	fd = CHECK_OK(open("f", O_RDONLY));
	CHECK(mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) ==
	      MAP_FAILED && errno == EACCES);
	p = map(fd, PAGE, PROT_READ, MAP_SHARED);
	CHECK(!memcmp(p, "data", 4));
	CHECK_ERR(mprotect(p, PAGE, PROT_READ | PROT_WRITE), EACCES);
	munmap(p, PAGE);
	/* A private writable mapping of a read-only file is fine. */
	p = map(fd, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE);
	p[0] = 'D';
	munmap(p, PAGE);
	close(fd);

	fd = CHECK_OK(open("f", O_WRONLY));
	CHECK(mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED &&
	      errno == EACCES);
	CHECK(mmap(NULL, PAGE, PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED &&
	      errno == EACCES);
	close(fd);

	/* O_APPEND does not stand in the way (the inode flag does). */
	fd = CHECK_OK(open("f", O_RDWR | O_APPEND));
	p = map(fd, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED);
	munmap(p, PAGE);
	/* MAP_SYNC is for DAX only. */
	CHECK(mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		   MAP_SHARED_VALIDATE | MAP_SYNC, fd, 0) == MAP_FAILED &&
	      errno == EOPNOTSUPP);
	close(fd);

	CHECK_OK(mkdir("d", 0755));
	fd = CHECK_OK(open("d", O_RDONLY | O_DIRECTORY));
	CHECK(mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED &&
	      errno == ENODEV);
	close(fd);
	check_content("f", "data", 4);
}

/* ------------------------------------------------------------------ */
/* splice, sendfile, copy_file_range                                   */
/* ------------------------------------------------------------------ */

#define XFER 10000

/* A file of XFER patterned bytes; returns the pattern in @buf. */
static void make_pattern(const char *path, char *buf)
{
	for (int i = 0; i < XFER; i++)
		buf[i] = 'A' + i % 23;
	write_file(path, buf, XFER, 0644);
}

static void splice_file_pipe_file(void)
{
	static char want[XFER];
	int in, out, pfd[2];
	loff_t off_in = 0, off_out = 0;

	make_pattern("src", want);
	in = CHECK_OK(open("src", O_RDONLY));
	out = CHECK_OK(open("dst", O_WRONLY | O_CREAT, 0644));
	CHECK_OK(pipe(pfd));
	CHECK_EQ(splice(in, &off_in, pfd[1], NULL, XFER, 0), XFER);
	CHECK_EQ(off_in, XFER);
	CHECK_EQ(lseek(in, 0, SEEK_CUR), 0);
	CHECK_EQ(splice(pfd[0], NULL, out, &off_out, XFER, 0), XFER);
	CHECK_EQ(off_out, XFER);
	CHECK_EQ(lseek(out, 0, SEEK_CUR), 0);
	check_content("dst", want, XFER);

	/* Without offsets the file positions move. */
	CHECK_EQ(lseek(in, 100, SEEK_SET), 100);
	CHECK_EQ(lseek(out, XFER, SEEK_SET), XFER);
	CHECK_EQ(splice(in, NULL, pfd[1], NULL, 50, 0), 50);
	CHECK_EQ(lseek(in, 0, SEEK_CUR), 150);
	CHECK_EQ(splice(pfd[0], NULL, out, NULL, 50, 0), 50);
	CHECK_EQ(lseek(out, 0, SEEK_CUR), XFER + 50);
	CHECK_EQ(stat_of("dst").st_size, XFER + 50);

	/* At EOF, splice moves nothing. */
	off_in = XFER;
	CHECK_EQ(splice(in, &off_in, pfd[1], NULL, 10, 0), 0);
	/* Into a file not open for writing. */
	CHECK_EQ(write(pfd[1], "x", 1), 1);
	CHECK_ERR(splice(pfd[0], NULL, in, NULL, 1, 0), EBADF);
	close(pfd[0]);
	close(pfd[1]);
	close(in);
	close(out);
}

static void sendfile_calls(void)
{
	static char want[XFER], got[XFER];
	int in, out, pfd[2];
	off_t off = 0;

	make_pattern("src", want);
	in = CHECK_OK(open("src", O_RDONLY));
	out = CHECK_OK(open("dst", O_WRONLY | O_CREAT, 0644));
	CHECK_EQ(sendfile(out, in, &off, XFER), XFER);
	CHECK_EQ(off, XFER);
	CHECK_EQ(lseek(in, 0, SEEK_CUR), 0);
	CHECK_EQ(lseek(out, 0, SEEK_CUR), XFER);
	check_content("dst", want, XFER);
	CHECK_EQ(sendfile(out, in, &off, XFER), 0);	/* at EOF */

	/* Without an offset: from the file position, which moves. */
	CHECK_OK(pipe(pfd));
	CHECK_EQ(lseek(in, 1000, SEEK_SET), 1000);
	CHECK_EQ(sendfile(pfd[1], in, NULL, 4000), 4000);
	CHECK_EQ(lseek(in, 0, SEEK_CUR), 5000);
	CHECK_EQ(read(pfd[0], got, sizeof(got)), 4000);
	CHECK(!memcmp(got, want + 1000, 4000));

	/* Out of a file not open for reading, into one not for writing. */
	CHECK_ERR(sendfile(in, out, NULL, 10), EBADF);
	close(pfd[0]);
	close(pfd[1]);
	close(in);
	close(out);
}

static ssize_t cfr(int in, loff_t *off_in, int out, loff_t *off_out,
		   size_t len, unsigned int flags)
{
	return syscall(SYS_copy_file_range, in, off_in, out, off_out, len,
		       flags);
}

/*
 * sendfile and copy_file_range write where the file's flags of the moment
 * say, as write does: O_APPEND cleared by fcntl(F_SETFL) writes at the
 * file position or the offset given; set by it, they are refused.
 */
static void setfl_append_splice(void)
{
	loff_t off_in = 1, off_out = 3;
	off_t off = 0;
	int in, fd;

	write_file("src", "XY", 2, 0644);
	write_file("f", "abcdef", 6, 0644);
	in = CHECK_OK(open("src", O_RDONLY));
	fd = CHECK_OK(open("f", O_WRONLY | O_APPEND));
	CHECK_OK(fcntl(fd, F_SETFL, 0));
	CHECK_EQ(lseek(fd, 0, SEEK_SET), 0);
	CHECK_EQ(sendfile(fd, in, &off, 1), 1);
	CHECK_EQ(lseek(fd, 0, SEEK_CUR), 1);
	CHECK_EQ(cfr(in, &off_in, fd, &off_out, 1, 0), 1);
	CHECK_EQ(off_out, 4);
	check_content("f", "XbcYef", 6);

	CHECK_OK(fcntl(fd, F_SETFL, O_APPEND));
	off = 0;
	CHECK_ERR(sendfile(fd, in, &off, 1), EINVAL);
	off_in = 0;
	CHECK_ERR(cfr(in, &off_in, fd, NULL, 1, 0), EBADF);
	CHECK_OK(close(fd));
	CHECK_OK(close(in));
	check_content("f", "XbcYef", 6);
}

static void copy_file_range_same_fs(void)
{
	static char want[XFER], got[XFER];
	loff_t off_in = 1000, off_out = 0;
	int in, out, wo, app;

	make_pattern("src", want);
	in = CHECK_OK(open("src", O_RDONLY));
	out = CHECK_OK(open("dst", O_RDWR | O_CREAT, 0644));
	CHECK_EQ(cfr(in, &off_in, out, &off_out, 5000, 0), 5000);
	CHECK_EQ(off_in, 6000);
	CHECK_EQ(off_out, 5000);
	CHECK_EQ(lseek(in, 0, SEEK_CUR), 0);
	CHECK_EQ(lseek(out, 0, SEEK_CUR), 0);
	check_content("dst", want + 1000, 5000);

	/* Without offsets the file positions are used and moved. */
	CHECK_EQ(lseek(in, 0, SEEK_SET), 0);
	CHECK_EQ(lseek(out, 5000, SEEK_SET), 5000);
	CHECK_EQ(cfr(in, NULL, out, NULL, XFER, 0), XFER);
	CHECK_EQ(lseek(in, 0, SEEK_CUR), XFER);
	CHECK_EQ(lseek(out, 0, SEEK_CUR), 5000 + XFER);
	CHECK_EQ(pread(out, got, XFER, 5000), XFER);
	CHECK(!memcmp(got, want, XFER));
	/* Short at EOF, 0 past it. */
	off_in = XFER - 10;
	CHECK_EQ(cfr(in, &off_in, out, NULL, 100, 0), 10);
	CHECK_EQ(cfr(in, &off_in, out, NULL, 100, 0), 0);

	/* Overlapping ranges of one file, bad flags, bad modes. */
	off_in = 0;
	off_out = 10;
	CHECK_ERR(cfr(out, &off_in, out, &off_out, 100, 0), EINVAL);
	CHECK_ERR(cfr(in, NULL, out, NULL, 10, 1), EINVAL);
	CHECK_ERR(cfr(out, NULL, in, NULL, 10, 0), EBADF);
	wo = CHECK_OK(open("dst", O_WRONLY));
	CHECK_ERR(cfr(wo, NULL, out, NULL, 10, 0), EBADF);
	close(wo);
	app = CHECK_OK(open("dst", O_WRONLY | O_APPEND));
	CHECK_ERR(cfr(in, NULL, app, NULL, 10, 0), EBADF);
	close(app);
	close(in);
	close(out);
}

/* A directory of ours on a tmpfs (another file system). */
static void tmpfs_dir(char *buf, size_t size)
{
	const char *bases[] = { "/dev/shm", "/tmp", "/run" };
	struct statfs sf;

	for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
		if (statfs(bases[i], &sf) || sf.f_type != TMPFS_MAGIC)
			continue;
		snprintf(buf, size, "%s/posix-data-XXXXXX", bases[i]);
		if (mkdtemp(buf))
			return;
	}
	CHECK(!"no writable tmpfs found");
}

/* copy_file_range() from @in to @out: the errno, 0 when it copied. */
static int cfr_errno(const char *in, const char *out)
{
	loff_t off_in = 0, off_out = 0;
	int fdin = CHECK_OK(open(in, O_RDONLY));
	int fdout = CHECK_OK(open(out, O_WRONLY));
	int err;

	errno = 0;
	err = cfr(fdin, &off_in, fdout, &off_out, 5, 0) < 0 ? errno : 0;
	close(fdin);
	close(fdout);
	return err;
}

static void copy_file_range_xdev(void)
{
	char dir[256], shm[300], buf[XFER];
	int err1, err2;

	make_pattern("src", buf);
	write_file("dst", "", 0, 0644);
	tmpfs_dir(dir, sizeof(dir));
	snprintf(shm, sizeof(shm), "%s/f", dir);
	write_file(shm, "tmpfs data", 10, 0644);
	err1 = cfr_errno("src", shm);
	err2 = cfr_errno(shm, "dst");
	unlink(shm);
	rmdir(dir);
	/* Linux 6.1 copies between different file systems only for nfs. */
	CHECK_EQ(err1, EXDEV);
	CHECK_EQ(err2, EXDEV);
	CHECK_EQ(stat_of("dst").st_size, 0);
}

/* ------------------------------------------------------------------ */
/* O_DIRECT                                                            */
/* ------------------------------------------------------------------ */

static char *aligned(size_t len, char c)
{
	char *p = aligned_alloc(PAGE, len);

	CHECK(p != NULL);
	memset(p, c, len);
	return p;
}

static void direct_io(void)
{
	char *wbuf = aligned(2 * PAGE, 'd'), *rbuf = aligned(2 * PAGE, 0);
	char *p;
	int fd, buffered;

	memcpy(wbuf + PAGE, "second page", 11);
	fd = CHECK_OK(open("f", O_RDWR | O_CREAT | O_DIRECT, 0644));
	CHECK(fcntl(fd, F_GETFL) & O_DIRECT);
	CHECK_EQ(pwrite(fd, wbuf, 2 * PAGE, 0), 2 * PAGE);
	CHECK_EQ(stat_of("f").st_size, 2 * PAGE);
	CHECK_EQ(pread(fd, rbuf, PAGE, PAGE), PAGE);
	CHECK(!memcmp(rbuf, wbuf + PAGE, PAGE));
	/* A read across EOF is short, at EOF empty. */
	CHECK_EQ(pread(fd, rbuf, 2 * PAGE, PAGE), PAGE);
	CHECK_EQ(pread(fd, rbuf, PAGE, 2 * PAGE), 0);

	/* The same data through a buffered descriptor and a mapping. */
	buffered = CHECK_OK(open("f", O_RDONLY));
	check_pread(buffered, 0, wbuf, 2 * PAGE);
	p = map(buffered, 2 * PAGE, PROT_READ, MAP_SHARED);
	CHECK(!memcmp(p, wbuf, 2 * PAGE));
	munmap(p, 2 * PAGE);

	/* Misaligned buffer, offset or length. */
	CHECK_ERR(pread(fd, rbuf + 1, PAGE, 0), EINVAL);
	CHECK_ERR(pread(fd, rbuf, PAGE, 100), EINVAL);
	CHECK_ERR(pread(fd, rbuf, 100, 0), EINVAL);
	CHECK_ERR(pwrite(fd, wbuf + 1, PAGE, 0), EINVAL);
	CHECK_ERR(pwrite(fd, wbuf, PAGE, 100), EINVAL);
	CHECK_ERR(pwrite(fd, wbuf, 100, 0), EINVAL);
	check_pread(buffered, 0, wbuf, 2 * PAGE);	/* all unchanged */
	close(buffered);
	close(fd);
	free(wbuf);
	free(rbuf);
}

static void direct_io_setfl(void)
{
	char *buf = aligned(PAGE, 0);
	int fd, flags;

	fd = CHECK_OK(open("f", O_RDWR | O_CREAT, 0644));
	pwrite_fill(fd, 'b', 2 * PAGE, 0);
	CHECK_OK(fsync(fd));
	close(fd);

	fd = CHECK_OK(open("f", O_RDONLY));
	CHECK_EQ(pread(fd, buf + 1, 100, 1), 100);	/* buffered: fine */
	flags = CHECK_OK(fcntl(fd, F_GETFL));
	CHECK_OK(fcntl(fd, F_SETFL, flags | O_DIRECT));
	CHECK(fcntl(fd, F_GETFL) & O_DIRECT);
	memset(buf, 0, PAGE);
	CHECK_EQ(pread(fd, buf, PAGE, PAGE), PAGE);
	CHECK(buf[0] == 'b' && buf[PAGE - 1] == 'b');
	CHECK_ERR(pread(fd, buf + 1, 100, 1), EINVAL);	/* direct now */
	CHECK_OK(fcntl(fd, F_SETFL, flags));
	CHECK_EQ(pread(fd, buf + 1, 100, 1), 100);
	close(fd);
	free(buf);
}

/* ------------------------------------------------------------------ */
/* O_TMPFILE                                                           */
/* ------------------------------------------------------------------ */

static void link_fd(int fd, const char *name, int expect_errno)
{
	char proc[64];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (expect_errno)
		CHECK_ERR(linkat(AT_FDCWD, proc, AT_FDCWD, name,
				 AT_SYMLINK_FOLLOW), expect_errno);
	else
		CHECK_OK(linkat(AT_FDCWD, proc, AT_FDCWD, name,
				AT_SYMLINK_FOLLOW));
}

static void tmpfile_link(void)
{
	struct stat st;
	int fd;

	fd = CHECK_OK(open(".", O_TMPFILE | O_RDWR, 0600));
	CHECK_EQ(write(fd, "temporary", 9), 9);
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_nlink, 0);
	CHECK(S_ISREG(st.st_mode));
	CHECK_EQ(st.st_mode & 07777, 0600);
	CHECK_EQ(st.st_size, 9);
	link_fd(fd, "name", 0);
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_nlink, 1);
	st = stat_of("name");
	CHECK_EQ(st.st_nlink, 1);
	CHECK_EQ(st.st_mode & 07777, 0600);
	check_content("name", "temporary", 9);
	/* Still the same file behind the descriptor. */
	CHECK_EQ(pwrite(fd, "T", 1, 0), 1);
	check_content("name", "Temporary", 9);
	link_fd(fd, "name", EEXIST);
	link_fd(fd, "second", 0);
	CHECK_EQ(stat_of("name").st_nlink, 2);
	close(fd);

	/* Linked with AT_EMPTY_PATH (root has CAP_DAC_READ_SEARCH). */
	fd = CHECK_OK(open(".", O_TMPFILE | O_WRONLY, 0644));
	CHECK_EQ(write(fd, "e", 1), 1);
	CHECK_OK(linkat(fd, "", AT_FDCWD, "empty", AT_EMPTY_PATH));
	close(fd);
	check_content("empty", "e", 1);
}

static void tmpfile_unlinked(void)
{
	struct stat st;
	int fd;

	/* Never linked: its nlink is 0 and it vanishes on close. */
	fd = CHECK_OK(open(".", O_TMPFILE | O_RDWR, 0644));
	CHECK_EQ(write(fd, "x", 1), 1);
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_nlink, 0);
	close(fd);

	/* O_EXCL: it may never be linked. */
	fd = CHECK_OK(open(".", O_TMPFILE | O_RDWR | O_EXCL, 0600));
	CHECK_EQ(write(fd, "x", 1), 1);
	link_fd(fd, "name", ENOENT);
	CHECK_ERR(linkat(fd, "", AT_FDCWD, "name", AT_EMPTY_PATH), ENOENT);
	close(fd);
	CHECK_ERR(lstat("name", &st), ENOENT);

	/* Linked, then unlinked again. */
	fd = CHECK_OK(open(".", O_TMPFILE | O_RDWR, 0600));
	link_fd(fd, "name", 0);
	CHECK_OK(unlink("name"));
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_nlink, 0);
	close(fd);

	/* Must be opened for writing, in a directory. */
	CHECK_ERR(open(".", O_TMPFILE | O_RDONLY, 0600), EINVAL);
	write_file("f", "x", 1, 0644);
	CHECK_ERR(open("f", O_TMPFILE | O_RDWR, 0600), ENOTDIR);
	CHECK_ERR(open("missing", O_TMPFILE | O_RDWR, 0600), ENOENT);
}

static void tmpfile_user(void *arg)
{
	(void)arg;
	CHECK_ERR(open(".", O_TMPFILE | O_RDWR, 0600), EACCES);
	CHECK_OK(close(CHECK_OK(open("open", O_TMPFILE | O_RDWR, 0600))));
}

static void tmpfile_permission(void)
{
	struct stat st;
	int fd;

	CHECK_OK(mkdir("open", 0777));
	CHECK_OK(chmod("open", 0777));
	CHECK(as_user(1000, 1000, tmpfile_user, NULL));
	/* Owned by its creator. */
	fd = CHECK_OK(open("open", O_TMPFILE | O_RDWR, 0640));
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_uid, 0);
	CHECK_EQ(st.st_mode & 07777, 0640);
	close(fd);
}

/* ------------------------------------------------------------------ */
/* Inode flags, FIEMAP, other ioctls                                   */
/* ------------------------------------------------------------------ */

static struct fiemap *fiemap_of(int fd, unsigned int count)
{
	struct fiemap *fm = calloc(1, sizeof(*fm) +
				   count * sizeof(struct fiemap_extent));

	CHECK(fm != NULL);
	fm->fm_start = 0;
	fm->fm_length = FIEMAP_MAX_OFFSET;
	fm->fm_flags = FIEMAP_FLAG_SYNC;
	fm->fm_extent_count = count;
	CHECK_OK(ioctl(fd, FS_IOC_FIEMAP, fm));
	return fm;
}

static void fiemap_extents(void)
{
	struct fiemap *fm;
	struct fiemap_extent *last;
	unsigned int n, counted;
	int fd, blk;

	fd = CHECK_OK(open("f", O_RDWR | O_CREAT, 0644));
	pwrite_fill(fd, 'a', 16 * 1024, 0);
	pwrite_fill(fd, 'b', 16 * 1024, MIB);
	CHECK_OK(fsync(fd));

	fm = fiemap_of(fd, 0);		/* count only */
	counted = fm->fm_mapped_extents;
	free(fm);
	CHECK(counted >= 2);

	fm = fiemap_of(fd, 32);
	n = fm->fm_mapped_extents;
	CHECK_EQ(n, counted);
	CHECK_EQ(fm->fm_extents[0].fe_logical, 0);
	CHECK(fm->fm_extents[0].fe_physical != 0);
	last = &fm->fm_extents[n - 1];
	CHECK(last->fe_flags & FIEMAP_EXTENT_LAST);
	CHECK_EQ(last->fe_logical + last->fe_length, MIB + 16 * 1024);
	/* Nothing is mapped in the hole. */
	for (unsigned int i = 0; i < n; i++) {
		struct fiemap_extent *e = &fm->fm_extents[i];

		CHECK(e->fe_logical + e->fe_length <= 16 * 1024 ||
		      e->fe_logical >= MIB);
	}
	/* FIBMAP agrees with FIEMAP on where block 0 is. */
	blk = 0;
	CHECK_OK(ioctl(fd, FIBMAP, &blk));
	CHECK_EQ((unsigned long long)blk * stat_of("f").st_blksize,
		 fm->fm_extents[0].fe_physical);
	free(fm);

	/* An unknown flag is refused, with the bad flag reported back. */
	fm = calloc(1, sizeof(*fm));
	CHECK(fm != NULL);
	fm->fm_length = FIEMAP_MAX_OFFSET;
	fm->fm_flags = 0x80000000;
	CHECK_ERR(ioctl(fd, FS_IOC_FIEMAP, fm), EBADR);
	free(fm);
	close(fd);
}

static void append_only_flag(void)
{
	struct fsxattr fsx;
	int fd;

	write_file("f", "abc", 3, 0644);
	change_flags("f", FS_APPEND_FL, 0);
	fd = CHECK_OK(open("f", O_RDONLY));
	CHECK(get_flags(fd) & FS_APPEND_FL);
	CHECK_OK(ioctl(fd, FS_IOC_FSGETXATTR, &fsx));
	CHECK(fsx.fsx_xflags & FS_XFLAG_APPEND);
	close(fd);

	CHECK_ERR(open("f", O_WRONLY), EPERM);
	CHECK_ERR(open("f", O_RDWR), EPERM);
	CHECK_ERR(open("f", O_WRONLY | O_APPEND | O_TRUNC), EPERM);
	CHECK_ERR(truncate("f", 0), EPERM);
	CHECK_ERR(unlink("f"), EPERM);
	CHECK_ERR(rename("f", "g"), EPERM);
	fd = CHECK_OK(open("f", O_WRONLY | O_APPEND));
	CHECK_EQ(lseek(fd, 0, SEEK_SET), 0);
	CHECK_EQ(write(fd, "def", 3), 3);
	CHECK_ERR(fcntl(fd, F_SETFL, 0), EPERM);	/* cannot drop it */
	CHECK_ERR(ftruncate(fd, 0), EPERM);
	CHECK_ERR(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			    0, 1), EPERM);
	close(fd);
	/* No shared mapping through a descriptor open for writing. */
	fd = CHECK_OK(open("f", O_RDWR | O_APPEND));
	CHECK(mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED &&
	      errno == EACCES);
	close(fd);
	check_content("f", "abcdef", 6);

	change_flags("f", 0, FS_APPEND_FL);
	fd = CHECK_OK(open("f", O_RDONLY));
	CHECK(!(get_flags(fd) & FS_APPEND_FL));
	close(fd);
	CHECK_OK(truncate("f", 1));
	CHECK_OK(unlink("f"));
}

static void immutable_flag(void)
{
	struct timespec ts[2] = { { 1, 0 }, { 2, 0 } };
	char buf[8];
	int fd, wfd;

	write_file("f", "abc", 3, 0644);
	wfd = CHECK_OK(open("f", O_WRONLY));	/* opened before */
	change_flags("f", FS_IMMUTABLE_FL, 0);

	CHECK_ERR(open("f", O_WRONLY), EPERM);
	CHECK_ERR(open("f", O_RDWR | O_APPEND), EPERM);
	CHECK_ERR(write(wfd, "x", 1), EPERM);
	CHECK_ERR(unlink("f"), EPERM);
	CHECK_ERR(rename("f", "g"), EPERM);
	CHECK_ERR(link("f", "g"), EPERM);
	CHECK_ERR(chmod("f", 0600), EPERM);
	CHECK_ERR(chown("f", 1, 1), EPERM);
	CHECK_ERR(truncate("f", 0), EPERM);
	CHECK_ERR(utimensat(AT_FDCWD, "f", ts, 0), EPERM);
	CHECK_ERR(utimensat(AT_FDCWD, "f", NULL, 0), EPERM);
	CHECK_ERR(setxattr("f", "user.x", "1", 1, 0), EPERM);
	fd = CHECK_OK(open("f", O_RDONLY));
	CHECK_EQ(read(fd, buf, sizeof(buf)), 3);
	CHECK(get_flags(fd) & FS_IMMUTABLE_FL);
	close(fd);

	change_flags("f", 0, FS_IMMUTABLE_FL);
	CHECK_EQ(write(wfd, "x", 1), 1);
	close(wfd);
	check_content("f", "xbc", 3);
	CHECK_OK(chmod("f", 0600));
	CHECK_OK(setxattr("f", "user.x", "1", 1, 0));
	CHECK_OK(unlink("f"));
}

static void flags_user(void *arg)
{
	int fd, flags;

	(void)arg;
	fd = CHECK_OK(open("mine", O_RDONLY));
	flags = get_flags(fd);
	CHECK_ERR(set_flags(fd, flags | FS_IMMUTABLE_FL), EPERM);
	CHECK_ERR(set_flags(fd, flags | FS_APPEND_FL), EPERM);
	/* The owner may set the unprivileged ones. */
	CHECK_OK(set_flags(fd, flags | FS_NOATIME_FL));
	CHECK(get_flags(fd) & FS_NOATIME_FL);
	CHECK_OK(set_flags(fd, flags));
	close(fd);
	fd = CHECK_OK(open("root", O_RDONLY));
	flags = get_flags(fd);
	CHECK_ERR(set_flags(fd, flags | FS_NOATIME_FL), EPERM);
	close(fd);
}

static void flags_permission(void)
{
	write_file("mine", "x", 1, 0644);
	CHECK_OK(chown("mine", 1000, 1000));
	write_file("root", "x", 1, 0644);
	CHECK(as_user(1000, 1000, flags_user, NULL));
	CHECK_OK(unlink("mine"));
}

static void misc_ioctls(void)
{
	struct fsxattr fsx, fsx2;
	int fd, v1, v2;

	write_file("f", "x", 1, 0644);
	fd = CHECK_OK(open("f", O_RDONLY));
	CHECK_OK(ioctl(fd, FS_IOC_GETVERSION, &v1));
	CHECK_OK(ioctl(fd, FS_IOC_GETVERSION, &v2));
	CHECK_EQ(v1, v2);

	CHECK_OK(ioctl(fd, FS_IOC_FSGETXATTR, &fsx));
	CHECK_EQ(fsx.fsx_xflags & (FS_XFLAG_IMMUTABLE | FS_XFLAG_APPEND), 0);
	/* FSSETXATTR sets the same flags as SETFLAGS. */
	fsx.fsx_xflags |= FS_XFLAG_NOATIME;
	CHECK_OK(ioctl(fd, FS_IOC_FSSETXATTR, &fsx));
	CHECK(get_flags(fd) & FS_NOATIME_FL);
	CHECK_OK(ioctl(fd, FS_IOC_FSGETXATTR, &fsx2));
	CHECK(fsx2.fsx_xflags & FS_XFLAG_NOATIME);
	fsx.fsx_xflags &= ~FS_XFLAG_NOATIME;
	CHECK_OK(ioctl(fd, FS_IOC_FSSETXATTR, &fsx));
	CHECK(!(get_flags(fd) & FS_NOATIME_FL));
	/* An ioctl nobody knows. */
	CHECK_ERR(ioctl(fd, _IO('z', 0x7f)), ENOTTY);
	close(fd);

	/* The VFS's own: FIONREAD, FIGETBSZ; ext4 cannot clone. */
	write_file("g", "0123456789", 10, 0644);
	fd = CHECK_OK(open("g", O_RDWR));
	CHECK_EQ(lseek(fd, 3, SEEK_SET), 3);
	CHECK_OK(ioctl(fd, FIONREAD, &v1));
	CHECK_EQ(v1, 7);
	CHECK_OK(ioctl(fd, FIGETBSZ, &v1));
	CHECK_EQ(v1, stat_of("g").st_blksize);
	v2 = CHECK_OK(open("f", O_RDONLY));
	CHECK_ERR(ioctl(fd, FICLONE, v2), EOPNOTSUPP);
	close(v2);
	close(fd);

	/* Directories have flags too. */
	CHECK_OK(mkdir("d", 0755));
	fd = CHECK_OK(open("d", O_RDONLY | O_DIRECTORY));
	(void)get_flags(fd);
	CHECK_OK(ioctl(fd, FS_IOC_FSGETXATTR, &fsx));
	close(fd);
}

/* ------------------------------------------------------------------ */
/* flock, POSIX and OFD locks                                          */
/* ------------------------------------------------------------------ */

static void flock_modes(void)
{
	int a, b, c, dup_a;

	write_file("f", "x", 1, 0644);
	a = CHECK_OK(open("f", O_RDONLY));
	b = CHECK_OK(open("f", O_RDONLY));
	c = CHECK_OK(open("f", O_WRONLY));
	CHECK_OK(flock(a, LOCK_EX));
	CHECK_ERR(flock(b, LOCK_EX | LOCK_NB), EWOULDBLOCK);
	CHECK_ERR(flock(b, LOCK_SH | LOCK_NB), EWOULDBLOCK);
	/* A duplicate shares the lock: no conflict, it may convert it. */
	dup_a = CHECK_OK(dup(a));
	CHECK_OK(flock(dup_a, LOCK_EX | LOCK_NB));
	CHECK_OK(flock(dup_a, LOCK_SH | LOCK_NB));
	CHECK_OK(flock(b, LOCK_SH | LOCK_NB));	/* shared by two */
	CHECK_ERR(flock(c, LOCK_EX | LOCK_NB), EWOULDBLOCK);
	CHECK_OK(flock(c, LOCK_SH | LOCK_NB));
	CHECK_OK(flock(a, LOCK_UN));
	CHECK_ERR(flock(c, LOCK_EX | LOCK_NB), EWOULDBLOCK);	/* b holds */
	close(b);				/* closing drops it */
	CHECK_OK(flock(c, LOCK_EX | LOCK_NB));
	CHECK_ERR(flock(a, LOCK_SH | LOCK_NB), EWOULDBLOCK);
	CHECK_ERR(flock(a, 0), EINVAL);
	close(a);
	close(dup_a);
	close(c);
}

static struct flock lk(short type, off_t start, off_t len)
{
	return (struct flock){ .l_type = type, .l_whence = SEEK_SET,
			       .l_start = start, .l_len = len };
}

static int setlk(int fd, int cmd, short type, off_t start, off_t len)
{
	struct flock fl = lk(type, start, len);

	return fcntl(fd, cmd, &fl);
}

struct lock_probe {
	pid_t holder;		/* the holder, 0: none */
	short type;		/* the lock the probe tries */
};

/* In another process: try a lock on "f" [0, 100) and ask who holds it. */
static void lock_probe(void *arg)
{
	const struct lock_probe *p = arg;
	int fd = CHECK_OK(open("f", O_RDWR));
	struct flock fl = lk(p->type, 0, 100);

	CHECK_OK(fcntl(fd, F_GETLK, &fl));
	if (!p->holder) {
		CHECK_EQ(fl.l_type, F_UNLCK);
		CHECK_OK(setlk(fd, F_SETLK, p->type, 0, 100));
		return;
	}
	CHECK_EQ(fl.l_type, F_WRLCK);
	CHECK_EQ(fl.l_pid, p->holder);
	CHECK_EQ(fl.l_start, 10);
	CHECK_EQ(fl.l_len, 20);
	CHECK_ERR(setlk(fd, F_SETLK, p->type, 0, 100), EAGAIN);
	CHECK_ERR(setlk(fd, F_SETLK, F_RDLCK, 15, 1), EAGAIN);
	/* Outside the held range all is free. */
	CHECK_OK(setlk(fd, F_SETLK, F_WRLCK, 30, 10));
	CHECK_OK(setlk(fd, F_SETLK, F_WRLCK, 0, 10));
}

static void posix_lock_conflict(void)
{
	struct lock_probe probe = { getpid(), F_WRLCK };
	int fd, ro;

	make_file("f", "x", 0666);
	fd = CHECK_OK(open("f", O_RDWR));
	CHECK_OK(setlk(fd, F_SETLK, F_WRLCK, 10, 20));
	CHECK(as_user(0, 0, lock_probe, &probe));
	probe.type = F_RDLCK;
	CHECK(as_user(1000, 1000, lock_probe, &probe));

	/* Our own locks never conflict with us. */
	CHECK_OK(setlk(fd, F_SETLK, F_RDLCK, 0, 100));
	CHECK_OK(setlk(fd, F_SETLK, F_UNLCK, 0, 0));
	probe.holder = 0;
	CHECK(as_user(0, 0, lock_probe, &probe));

	/* A write lock needs a descriptor open for writing. */
	ro = CHECK_OK(open("f", O_RDONLY));
	CHECK_ERR(setlk(ro, F_SETLK, F_WRLCK, 0, 1), EBADF);
	CHECK_OK(setlk(ro, F_SETLK, F_RDLCK, 0, 1));
	CHECK_ERR(setlk(fd, F_SETLK, F_WRLCK, -5, 1), EINVAL);
	close(ro);
	close(fd);
}

static void posix_lock_close(void)
{
	struct lock_probe held = { getpid(), F_WRLCK };
	struct lock_probe free_probe = { 0, F_WRLCK };
	int fd, other;

	write_file("f", "x", 1, 0644);
	fd = CHECK_OK(open("f", O_RDWR));
	CHECK_OK(setlk(fd, F_SETLK, F_WRLCK, 10, 20));
	CHECK(as_user(0, 0, lock_probe, &held));
	/* Closing any descriptor of the file drops the process's locks. */
	other = CHECK_OK(open("f", O_RDONLY));
	close(other);
	CHECK(as_user(0, 0, lock_probe, &free_probe));
	close(fd);
}

static void posix_lock_exit(void)
{
	int go[2], ready[2], fd;
	struct flock fl;
	pid_t pid;
	char c;

	write_file("f", "x", 1, 0644);
	CHECK_OK(pipe(go));
	CHECK_OK(pipe(ready));
	fflush(stdout);
	pid = CHECK_OK(fork());
	if (pid == 0) {
		close(go[1]);
		fd = CHECK_OK(open("f", O_RDWR));
		CHECK_OK(setlk(fd, F_SETLK, F_WRLCK, 0, 0));
		CHECK_EQ(write(ready[1], "r", 1), 1);
		(void)!read(go[0], &c, 1);	/* until the parent closes */
		_exit(0);
	}
	close(go[0]);
	close(ready[1]);
	CHECK_EQ(read(ready[0], &c, 1), 1);
	fd = CHECK_OK(open("f", O_RDWR));
	fl = lk(F_WRLCK, 0, 1);
	CHECK_OK(fcntl(fd, F_GETLK, &fl));
	CHECK_EQ(fl.l_type, F_WRLCK);
	CHECK_EQ(fl.l_pid, pid);
	CHECK_ERR(setlk(fd, F_SETLK, F_RDLCK, 0, 1), EAGAIN);
	close(go[1]);			/* the child exits */
	CHECK_OK(waitpid(pid, NULL, 0));
	fl = lk(F_WRLCK, 0, 1);
	CHECK_OK(fcntl(fd, F_GETLK, &fl));
	CHECK_EQ(fl.l_type, F_UNLCK);
	CHECK_OK(setlk(fd, F_SETLK, F_WRLCK, 0, 0));
	close(fd);
}

/* Wait (up to 10 s) until /proc/locks shows a waiter on inode @ino. */
static void wait_blocked(ino_t ino)
{
	char line[256], tag[32];

	snprintf(tag, sizeof(tag), ":%lu ", (unsigned long)ino);
	for (int i = 0; i < 500; i++) {
		FILE *f = fopen("/proc/locks", "r");
		bool found = false;

		CHECK(f != NULL);
		while (fgets(line, sizeof(line), f))
			if (strstr(line, "->") && strstr(line, tag))
				found = true;
		fclose(f);
		if (found)
			return;
		usleep(20 * 1000);
	}
	CHECK(!"the child never blocked");
}

static void posix_lock_wait(void)
{
	int fd, ready[2], status;
	pid_t pid;
	char c;

	write_file("f", "x", 1, 0644);
	fd = CHECK_OK(open("f", O_RDWR));
	CHECK_OK(setlk(fd, F_SETLK, F_WRLCK, 0, 10));
	CHECK_OK(pipe(ready));
	fflush(stdout);
	pid = CHECK_OK(fork());
	if (pid == 0) {
		int fd2 = CHECK_OK(open("f", O_RDWR));

		CHECK_OK(setlk(fd2, F_SETLK, F_WRLCK, 10, 10));
		CHECK_EQ(write(ready[1], "r", 1), 1);
		CHECK_OK(setlk(fd2, F_SETLKW, F_WRLCK, 0, 10));	/* blocks */
		_exit(0);
	}
	close(ready[1]);
	CHECK_EQ(read(ready[0], &c, 1), 1);
	wait_blocked(stat_of("f").st_ino);
	/* Waiting for the child while it waits for us: a deadlock. */
	CHECK_ERR(setlk(fd, F_SETLKW, F_WRLCK, 10, 10), EDEADLK);
	CHECK_EQ(waitpid(pid, &status, WNOHANG), 0);
	/* Unlocking wakes the child, which gets the lock. */
	CHECK_OK(setlk(fd, F_SETLK, F_UNLCK, 0, 10));
	CHECK_OK(waitpid(pid, &status, 0));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(fd);
}

static void ofd_locks(void)
{
	struct flock fl;
	int a, b, dup_a;

	write_file("f", "x", 1, 0644);
	a = CHECK_OK(open("f", O_RDWR));
	b = CHECK_OK(open("f", O_RDWR));
	CHECK_OK(setlk(a, F_OFD_SETLK, F_WRLCK, 0, 10));
	/* Another open file description conflicts, even in one process. */
	CHECK_ERR(setlk(b, F_OFD_SETLK, F_WRLCK, 5, 10), EAGAIN);
	CHECK_ERR(setlk(b, F_OFD_SETLK, F_RDLCK, 0, 1), EAGAIN);
	/* ... and so does a classic POSIX lock of this very process. */
	CHECK_ERR(setlk(b, F_SETLK, F_RDLCK, 0, 1), EAGAIN);
	fl = lk(F_WRLCK, 0, 1);
	CHECK_OK(fcntl(b, F_OFD_GETLK, &fl));
	CHECK_EQ(fl.l_type, F_WRLCK);
	CHECK_EQ(fl.l_pid, -1);
	CHECK_EQ(fl.l_len, 10);
	/* The same description does not conflict with itself. */
	dup_a = CHECK_OK(dup(a));
	CHECK_OK(setlk(dup_a, F_OFD_SETLK, F_WRLCK, 5, 10));
	CHECK_OK(setlk(a, F_OFD_SETLK, F_RDLCK, 0, 15));
	CHECK_OK(setlk(b, F_OFD_SETLK, F_RDLCK, 0, 15));	/* shared */
	CHECK_OK(setlk(b, F_OFD_SETLK, F_UNLCK, 0, 0));
	CHECK_OK(setlk(a, F_OFD_SETLK, F_WRLCK, 0, 15));
	/* Closing one descriptor of the description keeps the lock. */
	close(a);
	CHECK_ERR(setlk(b, F_OFD_SETLK, F_WRLCK, 0, 1), EAGAIN);
	close(dup_a);
	CHECK_OK(setlk(b, F_OFD_SETLK, F_WRLCK, 0, 1));
	/* l_pid must be 0 for OFD locks. */
	fl = lk(F_WRLCK, 0, 1);
	fl.l_pid = 1;
	CHECK_ERR(fcntl(b, F_OFD_SETLK, &fl), EINVAL);
	close(b);
}

/* ------------------------------------------------------------------ */
/* Extended attributes                                                 */
/* ------------------------------------------------------------------ */

/* The list @list of @len bytes holds @name. */
static bool listed(const char *list, ssize_t len, const char *name)
{
	for (const char *s = list; s < list + len; s += strlen(s) + 1)
		if (!strcmp(s, name))
			return true;
	return false;
}

static bool path_lists(const char *path, const char *name)
{
	char list[4096];
	ssize_t n = CHECK_OK(listxattr(path, list, sizeof(list)));

	return listed(list, n, name);
}

static void xattr_basic(void)
{
	char buf[64], list[256];
	ssize_t n;
	int fd;

	write_file("f", "x", 1, 0644);
	CHECK_OK(setxattr("f", "user.a", "value", 5, 0));
	CHECK_EQ(getxattr("f", "user.a", buf, sizeof(buf)), 5);
	CHECK(!memcmp(buf, "value", 5));
	CHECK_EQ(getxattr("f", "user.a", NULL, 0), 5);	/* size query */
	CHECK_ERR(getxattr("f", "user.a", buf, 4), ERANGE);
	CHECK_ERR(getxattr("f", "user.b", buf, sizeof(buf)), ENODATA);

	CHECK_ERR(setxattr("f", "user.a", "x", 1, XATTR_CREATE), EEXIST);
	CHECK_ERR(setxattr("f", "user.b", "x", 1, XATTR_REPLACE), ENODATA);
	CHECK_OK(setxattr("f", "user.a", "new", 3, XATTR_REPLACE));
	CHECK_OK(setxattr("f", "user.b", "", 0, XATTR_CREATE));
	CHECK_EQ(getxattr("f", "user.b", buf, sizeof(buf)), 0);
	CHECK_ERR(setxattr("f", "user.c", "x", 1, 4), EINVAL);
	/* Both flags, and the name is missing: ENODATA on ext4. */
	CHECK_ERR(setxattr("f", "user.c", "x", 1,
			   XATTR_CREATE | XATTR_REPLACE), ENODATA);
	CHECK_ERR(setxattr("f", "bogus.c", "x", 1, 0), EOPNOTSUPP);
	CHECK_ERR(setxattr("f", "user.", "x", 1, 0), EINVAL);

	n = CHECK_OK(listxattr("f", NULL, 0));
	CHECK(n >= 14);
	n = CHECK_OK(listxattr("f", list, sizeof(list)));
	CHECK(listed(list, n, "user.a") && listed(list, n, "user.b"));
	CHECK_ERR(listxattr("f", list, 3), ERANGE);

	/* The f* calls on a descriptor. */
	fd = CHECK_OK(open("f", O_RDONLY));
	CHECK_EQ(fgetxattr(fd, "user.a", buf, sizeof(buf)), 3);
	CHECK(!memcmp(buf, "new", 3));
	CHECK_OK(fsetxattr(fd, "user.c", "fd", 2, 0));
	CHECK_EQ(flistxattr(fd, list, sizeof(list)), n + 7);
	CHECK_OK(fremovexattr(fd, "user.c"));
	close(fd);

	CHECK_OK(removexattr("f", "user.a"));
	CHECK_ERR(getxattr("f", "user.a", buf, sizeof(buf)), ENODATA);
	CHECK_ERR(removexattr("f", "user.a"), ENODATA);
	CHECK(!path_lists("f", "user.a"));
	CHECK_OK(removexattr("f", "user.b"));

	/* On a directory too. */
	CHECK_OK(mkdir("d", 0755));
	CHECK_OK(setxattr("d", "user.d", "dir", 3, 0));
	CHECK_EQ(getxattr("d", "user.d", buf, sizeof(buf)), 3);
	CHECK_ERR(getxattr("missing", "user.d", buf, sizeof(buf)), ENOENT);
}

static void xattr_limits(void)
{
	static char big[65537];
	char name[300];

	write_file("f", "x", 1, 0644);
	CHECK_ERR(setxattr("f", "user.big", big, sizeof(big), 0), E2BIG);
	/* Longer than the block: ext4 has no room for it. */
	CHECK_ERR(setxattr("f", "user.big", big, 8000, 0), ENOSPC);
	CHECK_ERR(getxattr("f", "user.big", NULL, 0), ENODATA);
	CHECK_OK(setxattr("f", "user.big", big, 2000, 0));
	CHECK_EQ(getxattr("f", "user.big", NULL, 0), 2000);

	/* Names: 255 bytes in all is the limit. */
	memset(name, 'n', sizeof(name));
	memcpy(name, "user.", 5);
	name[255] = 0;
	CHECK_OK(setxattr("f", name, "v", 1, 0));
	CHECK_EQ(getxattr("f", name, NULL, 0), 1);
	name[255] = 'n';
	name[256] = 0;
	CHECK_ERR(setxattr("f", name, "v", 1, 0), ERANGE);
	CHECK_ERR(getxattr("f", name, NULL, 0), ERANGE);
	CHECK_ERR(removexattr("f", name), ERANGE);
}

static void xattr_fill(void)
{
	char name[32], value[100];
	int i, err = 0;

	write_file("f", "x", 1, 0644);
	memset(value, 'v', sizeof(value));
	for (i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "user.fill%04d", i);
		if (setxattr("f", name, value, sizeof(value), 0)) {
			err = errno;
			break;
		}
	}
	CHECK_EQ(err, ENOSPC);
	CHECK(i > 10);
	CHECK_ERR(getxattr("f", name, NULL, 0), ENODATA);
	/* Removing one makes room for another of the same size. */
	CHECK_OK(removexattr("f", "user.fill0003"));
	CHECK_OK(setxattr("f", name, value, sizeof(value), 0));
	CHECK_EQ(getxattr("f", name, NULL, 0), sizeof(value));
	CHECK_EQ(getxattr("f", "user.fill0000", NULL, 0), sizeof(value));
	/* Replacing with a smaller value needs no room. */
	CHECK_OK(setxattr("f", "user.fill0001", "s", 1, XATTR_REPLACE));
}

static void xattr_trusted_user(void *arg)
{
	char buf[16];

	(void)arg;
	CHECK_ERR(setxattr("f", "trusted.u", "x", 1, 0), EPERM);
	CHECK_ERR(getxattr("f", "trusted.t", buf, sizeof(buf)), ENODATA);
	CHECK_ERR(removexattr("f", "trusted.t"), EPERM);
	CHECK(!path_lists("f", "trusted.t"));
	CHECK(path_lists("f", "user.u"));
}

static void xattr_trusted(void)
{
	char buf[16];

	make_file("f", "x", 0666);
	CHECK_OK(setxattr("f", "trusted.t", "root", 4, 0));
	CHECK_OK(setxattr("f", "user.u", "user", 4, 0));
	CHECK(path_lists("f", "trusted.t"));
	CHECK(as_user(1000, 1000, xattr_trusted_user, NULL));
	CHECK_EQ(getxattr("f", "trusted.t", buf, sizeof(buf)), 4);
	CHECK_ERR(getxattr("f", "trusted.u", buf, sizeof(buf)), ENODATA);
}

static void xattr_special_files(void)
{
	char buf[16];

	write_file("f", "x", 1, 0644);
	CHECK_OK(symlink("f", "l"));
	CHECK_OK(mkfifo("p", 0666));
	/* user.* is for regular files and directories only. */
	CHECK_ERR(lsetxattr("l", "user.a", "x", 1, 0), EPERM);
	CHECK_ERR(lgetxattr("l", "user.a", buf, sizeof(buf)), ENODATA);
	CHECK_ERR(setxattr("p", "user.a", "x", 1, 0), EPERM);
	CHECK_ERR(getxattr("p", "user.a", buf, sizeof(buf)), ENODATA);
	/* Through the link, the target's. */
	CHECK_OK(setxattr("l", "user.a", "x", 1, 0));
	CHECK_EQ(getxattr("f", "user.a", buf, sizeof(buf)), 1);
	CHECK_ERR(lremovexattr("l", "user.a"), EPERM);
	/* trusted.* is fine on a link. */
	CHECK_OK(lsetxattr("l", "trusted.a", "y", 1, 0));
	CHECK_EQ(lgetxattr("l", "trusted.a", buf, sizeof(buf)), 1);
	CHECK_ERR(getxattr("f", "trusted.a", buf, sizeof(buf)), ENODATA);
	CHECK_OK(setxattr("p", "trusted.a", "y", 1, 0));
}

static void xattr_perm_user(void *arg)
{
	char buf[16];

	(void)arg;
	CHECK_ERR(setxattr("ro", "user.b", "x", 1, 0), EACCES);
	CHECK_ERR(removexattr("ro", "user.a"), EACCES);
	CHECK_EQ(getxattr("ro", "user.a", buf, sizeof(buf)), 1);
	CHECK_ERR(getxattr("private", "user.a", buf, sizeof(buf)), EACCES);
	CHECK_OK(listxattr("private", NULL, 0));	/* needs no access */
	CHECK_OK(setxattr("rw", "user.b", "x", 1, 0));
	/* In a sticky directory only the owner may. */
	CHECK_ERR(setxattr("sticky", "user.b", "x", 1, 0), EPERM);
}

static void xattr_permission(void)
{
	make_file("ro", "x", 0644);
	make_file("private", "x", 0600);
	make_file("rw", "x", 0666);
	CHECK_OK(mkdir("sticky", 0777));
	CHECK_OK(chmod("sticky", 01777));
	CHECK_OK(setxattr("ro", "user.a", "x", 1, 0));
	CHECK_OK(setxattr("private", "user.a", "x", 1, 0));
	CHECK(as_user(1000, 1000, xattr_perm_user, NULL));
	CHECK_EQ(getxattr("rw", "user.b", NULL, 0), 1);
	CHECK_ERR(getxattr("ro", "user.b", NULL, 0), ENODATA);
}

/* ------------------------------------------------------------------ */
/* POSIX ACLs through system.posix_acl_*                               */
/* ------------------------------------------------------------------ */

#define ACL_ACCESS "system.posix_acl_access"
#define ACL_DEFAULT "system.posix_acl_default"
#define ACL_USER_OBJ 0x01
#define ACL_USER 0x02
#define ACL_GROUP_OBJ 0x04
#define ACL_GROUP 0x08
#define ACL_MASK 0x10
#define ACL_OTHER 0x20
#define ACL_NOID 0xffffffffu

struct acl_ent {
	uint16_t tag, perm;
	uint32_t id;
};

/* The xattr form of @n entries (in the order given) into @buf. */
static size_t acl_blob(char *buf, const struct acl_ent *e, size_t n)
{
	uint32_t version = htole32(2);

	memcpy(buf, &version, 4);
	for (size_t i = 0; i < n; i++) {
		uint16_t tag = htole16(e[i].tag), perm = htole16(e[i].perm);
		uint32_t id = htole32(e[i].id);

		memcpy(buf + 4 + 8 * i, &tag, 2);
		memcpy(buf + 6 + 8 * i, &perm, 2);
		memcpy(buf + 8 + 8 * i, &id, 4);
	}
	return 4 + 8 * n;
}

/*
 * The usual five entries: owner @owner, user 1000 @user, owning group
 * @group, mask @mask, others @other.
 */
static int set_acl(const char *path, const char *name, int owner, int user,
		   int group, int mask, int other)
{
	const struct acl_ent e[] = {
		{ ACL_USER_OBJ, owner, ACL_NOID },
		{ ACL_USER, user, 1000 },
		{ ACL_GROUP_OBJ, group, ACL_NOID },
		{ ACL_MASK, mask, ACL_NOID },
		{ ACL_OTHER, other, ACL_NOID },
	};
	char buf[64];

	return setxattr(path, name, buf, acl_blob(buf, e, 5), 0);
}

/* The perm of entry @tag (@id for USER) in @path's ACL @name, -1: none. */
static int acl_perm(const char *path, const char *name, int tag, uint32_t id)
{
	char buf[256];
	ssize_t n = getxattr(path, name, buf, sizeof(buf));
	uint32_t version;

	if (n < 0)
		return -1;
	CHECK_EQ((n - 4) % 8, 0);
	memcpy(&version, buf, 4);
	CHECK_EQ(le32toh(version), 2);
	for (ssize_t off = 4; off < n; off += 8) {
		uint16_t t, p;
		uint32_t i;

		memcpy(&t, buf + off, 2);
		memcpy(&p, buf + off + 2, 2);
		memcpy(&i, buf + off + 4, 4);
		if (le16toh(t) == tag &&
		    (tag != ACL_USER || le32toh(i) == id))
			return le16toh(p);
	}
	return -1;
}

/* As uid 1000: open a path, which must work (err 0) or fail with err. */
struct open_probe {
	const char *path;
	int flags;
	int err;		/* 0: must open */
};

static void open_probe(void *arg)
{
	const struct open_probe *p = arg;

	if (p->err)
		CHECK_ERR(open(p->path, p->flags), p->err);
	else
		CHECK_OK(close(CHECK_OK(open(p->path, p->flags))));
}

static bool user_opens(const char *path, int flags, int err)
{
	struct open_probe p = { path, flags, err };

	return as_user(1000, 1000, open_probe, &p);
}

static void acl_user_entry(void)
{
	make_file("f", "x", 0600);
	CHECK(user_opens("f", O_RDWR, EACCES));
	CHECK_ERR(getxattr("f", ACL_ACCESS, NULL, 0), ENODATA);
	CHECK_OK(set_acl("f", ACL_ACCESS, 6, 6, 0, 6, 0));
	CHECK_EQ(getxattr("f", ACL_ACCESS, NULL, 0), 44);
	CHECK_EQ(acl_perm("f", ACL_ACCESS, ACL_USER, 1000), 6);
	CHECK_EQ(acl_perm("f", ACL_ACCESS, ACL_USER, 1001), -1);
	/* The group bits of the mode now show the mask. */
	CHECK_EQ(mode_of("f"), 0660);
	CHECK(user_opens("f", O_RDWR, 0));

	/* Removing the ACL takes the permission away again. */
	CHECK_OK(removexattr("f", ACL_ACCESS));
	CHECK_ERR(getxattr("f", ACL_ACCESS, NULL, 0), ENODATA);
	CHECK_OK(removexattr("f", ACL_ACCESS));	/* ext4: none is fine */
	CHECK(user_opens("f", O_RDONLY, EACCES));
}

static void acl_mask(void)
{
	make_file("f", "x", 0600);
	CHECK_OK(set_acl("f", ACL_ACCESS, 6, 6, 0, 4, 0));
	CHECK_EQ(mode_of("f"), 0640);
	CHECK(user_opens("f", O_RDONLY, 0));
	CHECK(user_opens("f", O_RDWR, EACCES));

	/* chmod sets the mask, the named entry stays. */
	CHECK_OK(chmod("f", 0600));
	CHECK_EQ(acl_perm("f", ACL_ACCESS, ACL_MASK, 0), 0);
	CHECK_EQ(acl_perm("f", ACL_ACCESS, ACL_USER, 1000), 6);
	CHECK(user_opens("f", O_RDONLY, EACCES));
	CHECK_OK(chmod("f", 0670));
	CHECK_EQ(acl_perm("f", ACL_ACCESS, ACL_MASK, 0), 7);
	CHECK_EQ(acl_perm("f", ACL_ACCESS, ACL_GROUP_OBJ, 0), 0);
	CHECK(user_opens("f", O_RDWR, 0));
}

static void acl_set_user(void *arg)
{
	(void)arg;
	CHECK_ERR(set_acl("f", ACL_ACCESS, 6, 6, 6, 6, 6), EPERM);
	CHECK_OK(set_acl("mine", ACL_ACCESS, 6, 4, 0, 4, 0));
}

static void acl_invalid(void)
{
	const struct acl_ent minimal[] = {
		{ ACL_USER_OBJ, 6, ACL_NOID }, { ACL_GROUP_OBJ, 4, ACL_NOID },
		{ ACL_OTHER, 0, ACL_NOID },
	};
	const struct acl_ent no_mask[] = {
		{ ACL_USER_OBJ, 6, ACL_NOID }, { ACL_USER, 6, 1000 },
		{ ACL_GROUP_OBJ, 4, ACL_NOID }, { ACL_OTHER, 0, ACL_NOID },
	};
	const struct acl_ent unsorted[] = {
		{ ACL_USER_OBJ, 6, ACL_NOID }, { ACL_GROUP_OBJ, 4, ACL_NOID },
		{ ACL_USER, 6, 1000 }, { ACL_MASK, 6, ACL_NOID },
		{ ACL_OTHER, 0, ACL_NOID },
	};
	char buf[64];
	size_t n;

	make_file("f", "x", 0600);
	/* An ACL the mode says all of: the mode changes, no xattr stays. */
	CHECK_OK(setxattr("f", ACL_ACCESS, buf, acl_blob(buf, minimal, 3), 0));
	CHECK_EQ(mode_of("f"), 0640);
	CHECK_ERR(getxattr("f", ACL_ACCESS, NULL, 0), ENODATA);

	CHECK_ERR(setxattr("f", ACL_ACCESS, buf, acl_blob(buf, no_mask, 4), 0),
		  EINVAL);
	CHECK_ERR(setxattr("f", ACL_ACCESS, buf, acl_blob(buf, unsorted, 5), 0),
		  EINVAL);
	n = acl_blob(buf, minimal, 3);
	CHECK_ERR(setxattr("f", ACL_ACCESS, buf, n - 1, 0), EINVAL);
	buf[0] = 3;				/* version */
	CHECK_ERR(setxattr("f", ACL_ACCESS, buf, n, 0), EOPNOTSUPP);
	/* Default ACLs are for directories. */
	CHECK_ERR(set_acl("f", ACL_DEFAULT, 7, 7, 5, 7, 5), EACCES);
	CHECK_EQ(mode_of("f"), 0640);

	/* Only the owner may set one. */
	make_file("mine", "x", 0600);
	CHECK_OK(chown("mine", 1000, 1000));
	CHECK(as_user(1000, 1000, acl_set_user, NULL));
	CHECK_EQ(acl_perm("mine", ACL_ACCESS, ACL_USER, 1000), 4);
	CHECK_EQ(acl_perm("f", ACL_ACCESS, ACL_USER, 1000), -1);
}

static void acl_default(void)
{
	int fd;

	CHECK_OK(mkdir("d", 0755));
	CHECK_OK(set_acl("d", ACL_DEFAULT, 7, 7, 5, 7, 6));
	CHECK_EQ(getxattr("d", ACL_DEFAULT, NULL, 0), 44);
	CHECK_ERR(getxattr("d", ACL_ACCESS, NULL, 0), ENODATA);
	CHECK_EQ(mode_of("d"), 0755);

	/* A new file: the ACL, not the umask (022), shapes its mode. */
	fd = CHECK_OK(open("d/f", O_CREAT | O_WRONLY, 0666));
	close(fd);
	CHECK_EQ(mode_of("d/f"), 0666);
	CHECK_EQ(acl_perm("d/f", ACL_ACCESS, ACL_USER, 1000), 7);
	CHECK_EQ(acl_perm("d/f", ACL_ACCESS, ACL_MASK, 0), 6);
	CHECK_EQ(acl_perm("d/f", ACL_ACCESS, ACL_OTHER, 0), 6);
	CHECK_ERR(getxattr("d/f", ACL_DEFAULT, NULL, 0), ENODATA);
	CHECK(user_opens("d/f", O_RDWR, 0));

	/* A new directory inherits the default ACL as well. */
	CHECK_OK(mkdir("d/sub", 0777));
	CHECK_EQ(mode_of("d/sub"), 0776);
	CHECK_EQ(acl_perm("d/sub", ACL_DEFAULT, ACL_USER, 1000), 7);
	CHECK_EQ(acl_perm("d/sub", ACL_ACCESS, ACL_USER, 1000), 7);
	fd = CHECK_OK(open("d/sub/g", O_CREAT | O_WRONLY, 0640));
	close(fd);
	CHECK_EQ(acl_perm("d/sub/g", ACL_ACCESS, ACL_USER, 1000), 7);
	CHECK_EQ(mode_of("d/sub/g"), 0640);

	/* Without a default ACL the umask applies. */
	fd = CHECK_OK(open("plain", O_CREAT | O_WRONLY, 0666));
	close(fd);
	CHECK_EQ(mode_of("plain"), 0644);
	CHECK_ERR(getxattr("plain", ACL_ACCESS, NULL, 0), ENODATA);

	CHECK_OK(removexattr("d", ACL_DEFAULT));
	CHECK_ERR(getxattr("d", ACL_DEFAULT, NULL, 0), ENODATA);
	fd = CHECK_OK(open("d/h", O_CREAT | O_WRONLY, 0666));
	close(fd);
	CHECK_EQ(mode_of("d/h"), 0644);
}

/* ------------------------------------------------------------------ */
/* exec                                                                */
/* ------------------------------------------------------------------ */

/*
 * Run @argv (argv[0] is the path) in a child, as @uid unless it is 0,
 * its stdout into @out (NUL-terminated) when given. Returns the exit
 * status; 100 + errno when the exec itself failed.
 */
static int run(char *const argv[], uid_t uid, char *out, size_t size)
{
	int pfd[2], status;
	ssize_t n, done = 0;
	pid_t pid;

	CHECK_OK(pipe(pfd));
	fflush(stdout);
	pid = CHECK_OK(fork());
	if (pid == 0) {
		close(pfd[0]);
		dup2(pfd[1], 1);
		if (uid && (setgroups(0, NULL) || setresgid(uid, uid, uid) ||
			    setresuid(uid, uid, uid)))
			_exit(99);
		execv(argv[0], argv);
		_exit(errno < 100 ? 100 + errno : 99);
	}
	close(pfd[1]);
	while (out && done < (ssize_t)size - 1 &&
	       (n = read(pfd[0], out + done, size - 1 - done)) > 0)
		done += n;
	if (out)
		out[done] = 0;
	close(pfd[0]);
	CHECK_OK(waitpid(pid, &status, 0));
	CHECK(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void exec_modes(void)
{
	char *const t[] = { "./true", NULL };
	char *const f[] = { "./false", NULL };
	char *const d[] = { "./d", NULL };
	char *const j[] = { "./junk", NULL };

	copy_file("/bin/true", "true", 0755);
	CHECK_EQ(run(t, 0, NULL, 0), 0);
	CHECK_EQ(run(t, 1000, NULL, 0), 0);
	/* Without an x bit not even root may. */
	copy_file("/bin/false", "false", 0644);
	CHECK_EQ(run(f, 0, NULL, 0), 100 + EACCES);
	CHECK_OK(chmod("false", 0744));
	CHECK_EQ(run(f, 0, NULL, 0), 1);
	CHECK_EQ(run(f, 1000, NULL, 0), 100 + EACCES);
	CHECK_OK(mkdir("d", 0755));
	CHECK_EQ(run(d, 0, NULL, 0), 100 + EACCES);
	/* Not an executable format. */
	write_file("junk", "\x7f" "ELFjunk", 8, 0755);
	CHECK_OK(chmod("junk", 0755));
	CHECK_EQ(run(j, 0, NULL, 0), 100 + ENOEXEC);
}

static void exec_script(void)
{
	char *const s[] = { "./script", NULL };
	char out[64];

	write_file("script", "#!/bin/sh\necho script ran\n", 27, 0755);
	CHECK_OK(chmod("script", 0755));
	CHECK_EQ(run(s, 0, out, sizeof(out)), 0);
	CHECK(!strcmp(out, "script ran\n"));
}

/* Wait (up to 10 s) until @pid runs the file @name of this directory. */
static void wait_exec(pid_t pid, const char *name)
{
	char proc[64], link[4096], want[4096];
	ssize_t n;

	path_in(want, sizeof(want), env.dir, name);
	snprintf(proc, sizeof(proc), "/proc/%d/exe", (int)pid);
	for (int i = 0; i < 500; i++) {
		n = readlink(proc, link, sizeof(link) - 1);
		if (n > 0) {
			link[n] = 0;
			if (!strcmp(link, want))
				return;
		}
		usleep(20 * 1000);
	}
	CHECK(!"the child never ran the binary");
}

static void exec_text_busy(void)
{
	pid_t pid;
	int fd;

	copy_file("/bin/sleep", "sleep", 0755);
	fflush(stdout);
	pid = CHECK_OK(fork());
	if (pid == 0) {
		execl("./sleep", "sleep", "10", (char *)NULL);
		_exit(127);
	}
	wait_exec(pid, "sleep");
	usleep(200 * 1000);
	CHECK_ERR(open("sleep", O_WRONLY), ETXTBSY);
	CHECK_ERR(open("sleep", O_RDWR), ETXTBSY);
	CHECK_ERR(truncate("sleep", 0), ETXTBSY);
	fd = CHECK_OK(open("sleep", O_RDONLY));
	close(fd);
	CHECK_OK(kill(pid, SIGKILL));
	CHECK_OK(waitpid(pid, NULL, 0));
	fd = CHECK_OK(open("sleep", O_WRONLY));
	close(fd);
}

static void exec_setuid(void)
{
	char *const euid[] = { "./id", "-u", NULL };
	char *const ruid[] = { "./id", "-ru", NULL };
	char out[64];

	copy_file("/usr/bin/id", "id", 0755);
	CHECK_EQ(run(euid, 1000, out, sizeof(out)), 0);
	CHECK(!strcmp(out, "1000\n"));
	CHECK_OK(chmod("id", 04755));
	CHECK_EQ(run(euid, 1000, out, sizeof(out)), 0);
	CHECK(!strcmp(out, "0\n"));
	CHECK_EQ(run(ruid, 1000, out, sizeof(out)), 0);
	CHECK(!strcmp(out, "1000\n"));
	/* Owned by another user, it runs as that one. */
	CHECK_OK(chown("id", 2000, 0));
	CHECK_EQ(mode_of("id"), 0755);		/* chown dropped it */
	CHECK_OK(chmod("id", 04755));
	CHECK_EQ(run(euid, 1000, out, sizeof(out)), 0);
	CHECK(!strcmp(out, "2000\n"));
	/* Another user's write drops the bit: what it wrote never runs setuid. */
	CHECK_OK(chown("id", 0, 0));
	CHECK_OK(chmod("id", 04777));
	CHECK(as_user(1000, 1000, append_as_user, "id"));
	CHECK_EQ(run(euid, 1000, out, sizeof(out)), 0);
	CHECK(!strcmp(out, "1000\n"));
	CHECK_EQ(mode_of("id"), 0777);
}

/* ------------------------------------------------------------------ */
/* inotify, fanotify                                                   */
/* ------------------------------------------------------------------ */

struct event {
	uint32_t mask;
	char name[32];
};

/*
 * Read inotify events from @fd until @want have come or none came for
 * @ms milliseconds; returns how many.
 */
static int inotify_events(int fd, struct event *ev, int want, int ms)
{
	char buf[4096] __attribute__((aligned(8)));
	struct pollfd pfd = { fd, POLLIN, 0 };
	int got = 0;

	while (got < want && poll(&pfd, 1, ms) == 1) {
		ssize_t n = CHECK_OK(read(fd, buf, sizeof(buf)));

		for (char *p = buf; p < buf + n;) {
			struct inotify_event *e = (struct inotify_event *)p;

			if (got < want) {
				ev[got].mask = e->mask;
				snprintf(ev[got].name, sizeof(ev[got].name),
					 "%s", e->len ? e->name : "");
				got++;
			}
			p += sizeof(*e) + e->len;
		}
	}
	return got;
}

static void check_event(const struct event *e, uint32_t mask,
			const char *name)
{
	if (e->mask != mask || strcmp(e->name, name))
		posix_fail(__FILE__, __LINE__,
			   "event 0x%x \"%s\", expected 0x%x \"%s\"", e->mask,
			   e->name, mask, name);
}

static void inotify_dir(void)
{
	struct event ev[8];
	int in, fd;

	in = CHECK_OK(inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
	CHECK_OK(inotify_add_watch(in, ".", IN_CREATE | IN_MODIFY |
				   IN_CLOSE_WRITE | IN_DELETE));
	fd = CHECK_OK(open("f", O_CREAT | O_WRONLY, 0644));
	CHECK_EQ(write(fd, "data", 4), 4);
	close(fd);
	CHECK_OK(unlink("f"));
	CHECK_OK(mkdir("d", 0755));
	CHECK_EQ(inotify_events(in, ev, 8, 2000), 5);
	check_event(&ev[0], IN_CREATE, "f");
	check_event(&ev[1], IN_MODIFY, "f");
	check_event(&ev[2], IN_CLOSE_WRITE, "f");
	check_event(&ev[3], IN_DELETE, "f");
	check_event(&ev[4], IN_CREATE | IN_ISDIR, "d");
	/* Reading and closing a file raises none of these. */
	write_file("g", "x", 1, 0644);
	CHECK_EQ(inotify_events(in, ev, 8, 500), 3);
	(void)!read_file("g", (char[4]){ 0 }, 4);
	CHECK_EQ(inotify_events(in, ev, 8, 300), 0);
	close(in);
}

static void inotify_file(void)
{
	struct event ev[8];
	int in, fd, wd;

	write_file("f", "x", 1, 0644);
	in = CHECK_OK(inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
	wd = CHECK_OK(inotify_add_watch(in, "f", IN_ATTRIB | IN_MODIFY |
					IN_CLOSE_WRITE | IN_DELETE_SELF));
	CHECK(wd > 0);
	CHECK_OK(chmod("f", 0600));
	CHECK_EQ(inotify_events(in, ev, 8, 2000), 1);
	check_event(&ev[0], IN_ATTRIB, "");
	CHECK_OK(setxattr("f", "user.a", "1", 1, 0));
	CHECK_EQ(inotify_events(in, ev, 8, 2000), 1);
	check_event(&ev[0], IN_ATTRIB, "");
	fd = CHECK_OK(open("f", O_WRONLY));
	CHECK_EQ(write(fd, "y", 1), 1);
	close(fd);
	CHECK_EQ(inotify_events(in, ev, 8, 2000), 2);
	check_event(&ev[0], IN_MODIFY, "");
	check_event(&ev[1], IN_CLOSE_WRITE, "");
	CHECK_OK(unlink("f"));
	CHECK_EQ(inotify_events(in, ev, 8, 2000), 3);
	check_event(&ev[0], IN_ATTRIB, "");	/* the link count */
	check_event(&ev[1], IN_DELETE_SELF, "");
	check_event(&ev[2], IN_IGNORED, "");
	close(in);
}

/* The events now queued on @in are exactly @want (names empty). */
static void expect_events(int line, int in, const uint32_t *want, int n)
{
	struct event ev[16];
	int got = inotify_events(in, ev, 16, 300);

	for (int i = 0; i < got || i < n; i++)
		if (i >= got || i >= n || ev[i].mask != want[i])
			posix_fail(__FILE__, line, "event %d: got 0x%x, "
				   "expected 0x%x (%d events, expected %d)", i,
				   i < got ? ev[i].mask : 0, i < n ? want[i] : 0,
				   got, n);
}

#define EXPECT(in, ...)							\
	do {								\
		const uint32_t _w[] = { __VA_ARGS__ };			\
		expect_events(__LINE__, in, _w,				\
			      sizeof(_w) / sizeof(_w[0]) - 1);		\
	} while (0)

static void inotify_data_paths(void)
{
	int in, rw, other, fd, pfd[2];
	loff_t off;
	char buf[8], *p;

	write_file("f", "0123456789", 10, 0644);
	write_file("other", "abcdefghij", 10, 0644);
	rw = CHECK_OK(open("f", O_RDWR));
	other = CHECK_OK(open("other", O_RDWR));
	CHECK_OK(pipe(pfd));
	in = CHECK_OK(inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
	CHECK_OK(inotify_add_watch(in, "f", IN_ACCESS | IN_MODIFY | IN_OPEN |
				   IN_CLOSE_WRITE | IN_CLOSE_NOWRITE));

	fd = CHECK_OK(open("f", O_RDONLY));
	CHECK_EQ(read(fd, buf, 4), 4);
	close(fd);
	EXPECT(in, IN_OPEN, IN_ACCESS, IN_CLOSE_NOWRITE, 0);
	CHECK_EQ(pwrite(rw, "x", 1, 0), 1);
	EXPECT(in, IN_MODIFY, 0);
	CHECK_OK(ftruncate(rw, 20));
	EXPECT(in, IN_MODIFY, 0);
	CHECK_OK(fallocate(rw, FALLOC_FL_KEEP_SIZE, 0, PAGE));
	EXPECT(in, IN_MODIFY, 0);

	/* sendfile and copy_file_range, both ways. */
	off = 0;
	CHECK_EQ(sendfile(rw, other, &off, 4), 4);
	EXPECT(in, IN_MODIFY, 0);
	off = 0;
	CHECK_EQ(sendfile(pfd[1], rw, &off, 4), 4);
	CHECK_EQ(read(pfd[0], buf, 4), 4);
	EXPECT(in, IN_ACCESS, 0);
	off = 0;
	CHECK_EQ(cfr(other, &off, rw, NULL, 4, 0), 4);
	EXPECT(in, IN_MODIFY, 0);
	off = 0;
	CHECK_EQ(cfr(rw, &off, other, NULL, 4, 0), 4);
	EXPECT(in, IN_ACCESS, 0);

	/* Stores through a mapping raise nothing. */
	p = map(rw, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED);
	p[1] = 'm';
	CHECK_OK(msync(p, PAGE, MS_SYNC));
	munmap(p, PAGE);
	EXPECT(in, 0);

	close(rw);
	EXPECT(in, IN_CLOSE_WRITE, 0);
	close(other);
	close(in);
}

static void inotify_splice(void)
{
	int in, rw, pfd[2];
	loff_t off = 0;
	char buf[8];

	write_file("f", "0123456789", 10, 0644);
	rw = CHECK_OK(open("f", O_RDWR));
	CHECK_OK(pipe(pfd));
	in = CHECK_OK(inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
	CHECK_OK(inotify_add_watch(in, "f", IN_ACCESS | IN_MODIFY));
	/* Linux 6.1: splice into a file raises IN_MODIFY, out of it nothing. */
	CHECK_EQ(write(pfd[1], "spl", 3), 3);
	CHECK_EQ(splice(pfd[0], NULL, rw, &off, 3, 0), 3);
	EXPECT(in, IN_MODIFY, 0);
	off = 0;
	CHECK_EQ(splice(rw, &off, pfd[1], NULL, 3, 0), 3);
	CHECK_EQ(read(pfd[0], buf, 3), 3);
	EXPECT(in, 0);
	check_content("f", "spl3456789", 10);
	close(rw);
	close(in);
}

static void fanotify_mount(void)
{
	char buf[4096] __attribute__((aligned(8)));
	struct pollfd pfd;
	uint64_t seen = 0;
	struct stat want, st;
	int fan, fd;

	fan = CHECK_OK(fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC |
				     FAN_NONBLOCK, O_RDONLY | O_LARGEFILE));
	CHECK_OK(fanotify_mark(fan, FAN_MARK_ADD | FAN_MARK_MOUNT,
			       FAN_MODIFY | FAN_CLOSE_WRITE, AT_FDCWD, "."));
	fd = CHECK_OK(open("f", O_CREAT | O_WRONLY, 0644));
	CHECK_EQ(write(fd, "data", 4), 4);
	close(fd);
	want = stat_of("f");

	pfd = (struct pollfd){ fan, POLLIN, 0 };
	while ((seen & (FAN_MODIFY | FAN_CLOSE_WRITE)) !=
	       (FAN_MODIFY | FAN_CLOSE_WRITE) && poll(&pfd, 1, 3000) == 1) {
		ssize_t n = CHECK_OK(read(fan, buf, sizeof(buf)));
		struct fanotify_event_metadata *m = (void *)buf;

		for (; FAN_EVENT_OK(m, n); m = FAN_EVENT_NEXT(m, n)) {
			CHECK_EQ(m->vers, FANOTIFY_METADATA_VERSION);
			if (m->fd < 0)
				continue;
			CHECK_OK(fstat(m->fd, &st));
			if (st.st_ino == want.st_ino &&
			    st.st_dev == want.st_dev) {
				CHECK_EQ(m->pid, getpid());
				seen |= m->mask;
			}
			close(m->fd);
		}
	}
	CHECK(seen & FAN_MODIFY);
	CHECK(seen & FAN_CLOSE_WRITE);
	close(fan);
}

const struct posix_case data_cases[] = {
	{ "data-read-write", read_write, 0 },
	{ "data-unlinked-open", unlinked_open, 0 },
	{ "data-wrong-access-mode", wrong_access_mode, 0 },
	{ "data-append", append_mode, 0 },
	{ "data-setfl-append", setfl_append, 0 },
	{ "data-setfl-append-splice", setfl_append_splice, 0 },
	{ "data-rwf-flags", rwf_flags, 0 },
	{ "data-rwf-nowait", rwf_nowait, 0 },
	{ "data-truncate", truncate_sizes, 0 },
	{ "data-truncate-permission", truncate_permission, 0 },
	{ "attr-chmod", chmod_values, 0 },
	{ "attr-chown", chown_values, 0 },
	{ "attr-chown-chmod-permission", chown_chmod_permission, 0 },
	{ "attr-chown-clears-setuid", chown_clears_setuid, 0 },
	{ "attr-write-clears-setuid", write_clears_setuid, 0 },
	{ "attr-write-clears-setuid-at-once", write_clears_setuid_at_once, 0 },
	{ "attr-utimensat", utimensat_values, 0 },
	{ "attr-utimensat-permission", utimensat_permission, 0 },
	{ "attr-utimensat-nofollow", utimensat_nofollow, 0 },
	{ "attr-times-follow-data", times_follow_data, 0 },
	{ "attr-noatime", noatime, 0 },
	{ "attr-noatime-setfl", noatime_setfl, 0 },
	{ "attr-atime-by-mount-options", atime_by_mount_options, 0 },
	{ "attr-statx", statx_fields, 0 },
	{ "data-seek-data-hole", seek_data_hole, 0 },
	{ "data-seek-end", seek_end, 0 },
	{ "data-sparse-blocks", sparse_blocks, 0 },
	{ "data-fallocate", fallocate_modes, 0 },
	{ "data-fallocate-punch", fallocate_punch, 0 },
	{ "data-sync", sync_calls, 0 },
	{ "data-fadvise", fadvise_calls, 0 },
	{ "data-size-limits", size_limits, 0 },
	{ "data-mmap-shared-coherent", mmap_shared_coherent, 0 },
	{ "data-mmap-private", mmap_private, 0 },
	{ "data-mmap-truncate-sigbus", mmap_truncate_sigbus, 0 },
	{ "data-mmap-grow", mmap_grow, 0 },
	{ "data-mmap-access-modes", mmap_access_modes, 0 },
	{ "data-splice", splice_file_pipe_file, 0 },
	{ "data-sendfile", sendfile_calls, 0 },
	{ "data-copy-file-range", copy_file_range_same_fs, 0 },
	{ "data-copy-file-range-xdev", copy_file_range_xdev, 0 },
	{ "data-direct-io", direct_io, 0 },
	{ "data-direct-io-setfl", direct_io_setfl, 0 },
	{ "data-tmpfile-link", tmpfile_link, 0 },
	{ "data-tmpfile-unlinked", tmpfile_unlinked, 0 },
	{ "data-tmpfile-permission", tmpfile_permission, 0 },
	{ "data-fiemap", fiemap_extents, 0 },
	{ "attr-append-only-flag", append_only_flag, 0 },
	{ "attr-immutable-flag", immutable_flag, 0 },
	{ "attr-flags-permission", flags_permission, 0 },
	{ "attr-ioctls", misc_ioctls, 0 },
	{ "lock-flock", flock_modes, 0 },
	{ "lock-posix-conflict", posix_lock_conflict, 0 },
	{ "lock-posix-close", posix_lock_close, 0 },
	{ "lock-posix-exit", posix_lock_exit, 0 },
	{ "lock-posix-wait", posix_lock_wait, 0 },
	{ "lock-ofd", ofd_locks, 0 },
	{ "xattr-basic", xattr_basic, 0 },
	{ "xattr-limits", xattr_limits, 0 },
	{ "xattr-fill", xattr_fill, 0 },
	{ "xattr-trusted", xattr_trusted, 0 },
	{ "xattr-special-files", xattr_special_files, 0 },
	{ "xattr-permission", xattr_permission, 0 },
	{ "acl-user-entry", acl_user_entry, 0 },
	{ "acl-mask", acl_mask, 0 },
	{ "acl-invalid", acl_invalid, 0 },
	{ "acl-default", acl_default, 0 },
	{ "exec-modes", exec_modes, 0 },
	{ "exec-script", exec_script, 0 },
	{ "exec-text-busy", exec_text_busy, 0 },
	{ "exec-setuid", exec_setuid, 0 },
	{ "notify-inotify-dir", inotify_dir, 0 },
	{ "notify-inotify-file", inotify_file, 0 },
	{ "notify-inotify-data-paths", inotify_data_paths, 0 },
	{ "notify-inotify-splice", inotify_splice, 0 },
	{ "notify-fanotify", fanotify_mount, 0 },
	{ NULL, NULL, 0 }
};
