/*
 * Cases that hold only on presto: what presto keeps for itself, what it
 * refuses, and that changes made directly in the lower directory (as lento
 * will make them) are seen through the mount at once.
 */
#include <fcntl.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <dirent.h>
#include <unistd.h>
#include <sys/sysmacros.h>
#include <linux/fs.h>
#include "posix.h"

#define PRESTO_MAGIC 0x70726573

static void statfs_is_presto(void)
{
	struct statfs a, b;

	CHECK_OK(statfs(".", &a));
	CHECK_OK(statfs(env.lower, &b));
	CHECK_EQ(a.f_type, PRESTO_MAGIC);
	CHECK_EQ(a.f_bsize, b.f_bsize);
	CHECK_EQ(a.f_blocks, b.f_blocks);
	CHECK_EQ(a.f_files, b.f_files);
	CHECK_EQ(a.f_namelen, b.f_namelen);
}

static void same_inodes_as_lower(void)
{
	const char *names[] = { "f", "d", "d/g", "s" };
	char lp[4096];
	struct stat a, b;

	write_file("f", "x", 1, 0644);
	CHECK_OK(mkdir("d", 0755));
	write_file("d/g", "y", 1, 0644);
	CHECK_OK(symlink("f", "s"));
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		path_in(lp, sizeof(lp), env.lower, names[i]);
		CHECK_OK(lstat(names[i], &a));
		CHECK_OK(lstat(lp, &b));
		CHECK_EQ(a.st_ino, b.st_ino);
		CHECK(a.st_dev != b.st_dev);
		CHECK_EQ(a.st_mode, b.st_mode);
		CHECK_EQ(a.st_size, b.st_size);
		CHECK_EQ(a.st_nlink, b.st_nlink);
		CHECK_EQ(a.st_mtim.tv_sec, b.st_mtim.tv_sec);
		CHECK_EQ(a.st_mtim.tv_nsec, b.st_mtim.tv_nsec);
	}
}

static bool root_lists(const char *name)
{
	DIR *d = opendir(env.root);
	struct dirent *de;
	bool found = false;

	CHECK(d != NULL);
	while ((de = readdir(d)))
		if (!strcmp(de->d_name, name))
			found = true;
	closedir(d);
	return found;
}

static void reserved_name_hidden(void)
{
	char p[4096], q[4096], lp[4096];
	struct stat st;

	/* The runner made LOWER/.presto before mounting. */
	path_in(lp, sizeof(lp), env.lower_root, ".presto");
	CHECK_OK(stat(lp, &st));
	path_in(p, sizeof(p), env.root, ".presto");
	CHECK(!root_lists(".presto"));
	CHECK_ERR(stat(p, &st), ENOENT);
	CHECK_ERR(open(p, O_RDONLY), ENOENT);
	CHECK_ERR(mkdir(p, 0755), EPERM);
	CHECK_ERR(open(p, O_CREAT | O_WRONLY, 0644), EPERM);
	CHECK_ERR(symlink("x", p), EPERM);
	CHECK_ERR(mknod(p, S_IFIFO | 0644, 0), EPERM);
	CHECK_ERR(rmdir(p), ENOENT);
	CHECK_ERR(unlink(p), ENOENT);
	write_file("f", "x", 1, 0644);
	CHECK_ERR(rename("f", p), EPERM);
	CHECK_ERR(link("f", p), EPERM);
	CHECK_ERR(syscall(SYS_renameat2, AT_FDCWD, "f", AT_FDCWD, p,
			  RENAME_EXCHANGE), ENOENT);
	CHECK_OK(stat(lp, &st));	/* and the lower's is untouched */
	CHECK(S_ISDIR(st.st_mode));

	/* Below the root it is an ordinary name. */
	CHECK_OK(mkdir(".presto", 0755));
	path_in(q, sizeof(q), env.dir, ".presto/x");
	write_file(q, "y", 1, 0644);
	CHECK_OK(rename(".presto", ".presto2"));
	CHECK_OK(rename(".presto2", ".presto"));
}

static void own_xattrs_hidden(void)
{
	char lp[4096], list[4096], val[16];
	ssize_t n;
	bool other = false;

	write_file("f", "x", 1, 0644);
	path_in(lp, sizeof(lp), env.lower, "f");
	CHECK_OK(setxattr(lp, "trusted.presto.state", "abc", 3, 0));
	CHECK_OK(setxattr(lp, "trusted.other", "def", 3, 0));
	CHECK_ERR(getxattr("f", "trusted.presto.state", val, sizeof(val)),
		  ENODATA);
	CHECK_EQ(getxattr("f", "trusted.other", val, sizeof(val)), 3);
	n = CHECK_OK(listxattr("f", list, sizeof(list)));
	for (char *s = list; s < list + n; s += strlen(s) + 1) {
		CHECK(strncmp(s, "trusted.presto.", 15) != 0);
		if (!strcmp(s, "trusted.other"))
			other = true;
	}
	CHECK(other);
	CHECK_ERR(setxattr("f", "trusted.presto.state", "zz", 2, 0), EPERM);
	CHECK_ERR(setxattr("f", "trusted.presto.new", "zz", 2, 0), EPERM);
	CHECK_ERR(removexattr("f", "trusted.presto.state"), EPERM);
	CHECK_EQ(getxattr(lp, "trusted.presto.state", val, sizeof(val)), 3);
	CHECK(!memcmp(val, "abc", 3));
}

static void whiteout_refused(void)
{
	struct stat st;

	write_file("f", "x", 1, 0644);
	CHECK_ERR(syscall(SYS_renameat2, AT_FDCWD, "f", AT_FDCWD, "g",
			  RENAME_WHITEOUT), EINVAL);
	CHECK_OK(stat("f", &st));
	CHECK_ERR(stat("g", &st), ENOENT);
}

static void lease_refused(void)
{
	int fd;

	write_file("f", "x", 1, 0644);
	fd = CHECK_OK(open("f", O_RDONLY));
	CHECK_ERR(fcntl(fd, F_SETLEASE, F_RDLCK), EINVAL);
	close(fd);
}

static void no_nfs_handles(void)
{
	struct {
		struct file_handle fh;
		unsigned char buf[128];
	} h = { .fh.handle_bytes = 128 };
	int mnt;

	write_file("f", "x", 1, 0644);
	CHECK_ERR(name_to_handle_at(AT_FDCWD, "f", &h.fh, &mnt, 0),
		  EOPNOTSUPP);
}

/* Changes made in the lower directory, as lento will make them. */
/*
 * The append-only flag set in the lower, with no stat through the mount
 * since: the VFS's checks at open and truncate (which ext4 does not make
 * again) must see it.
 */
static void lower_attr_changes_checked(void)
{
	char lf[4096];
	struct stat st;
	int fd, wfd, flags;

	write_file("f", "data", 4, 0644);
	CHECK_OK(stat("f", &st));
	wfd = CHECK_OK(open("f", O_WRONLY));
	path_in(lf, sizeof(lf), env.lower, "f");
	fd = open(lf, O_RDONLY);
	CHECK_OK(fd);
	flags = FS_APPEND_FL;
	CHECK_OK(ioctl(fd, FS_IOC_SETFLAGS, &flags));
	/* Open before: presto has not looked the file up since. */
	CHECK_ERR(ftruncate(wfd, 0), EPERM);
	CHECK_OK(close(wfd));
	CHECK_ERR(open("f", O_WRONLY | O_TRUNC), EPERM);
	CHECK_ERR(truncate("f", 0), EPERM);
	CHECK_ERR(open("f", O_WRONLY), EPERM);
	CHECK_OK(close(CHECK_OK(open("f", O_WRONLY | O_APPEND))));
	flags = 0;
	CHECK_OK(ioctl(fd, FS_IOC_SETFLAGS, &flags));
	CHECK_OK(close(fd));
	CHECK_OK(stat(lf, &st));
	CHECK_EQ(st.st_size, 4);
}

static void lower_changes_seen(void)
{
	char lf[4096], lg[4096], lh[4096], ld[4096], buf[64];
	struct stat st;
	size_t n;

	path_in(lf, sizeof(lf), env.lower, "f");
	path_in(lg, sizeof(lg), env.lower, "g");
	path_in(lh, sizeof(lh), env.lower, "h");
	path_in(ld, sizeof(ld), env.lower, "d");

	/* A name looked up (negatively) through the mount, then created. */
	CHECK_ERR(stat("f", &st), ENOENT);
	write_file(lf, "one", 3, 0644);
	CHECK_OK(stat("f", &st));
	CHECK_EQ(st.st_size, 3);
	n = read_file("f", buf, sizeof(buf));
	CHECK(n == 3 && !memcmp(buf, "one", 3));

	/* New content, new mode. */
	write_file(lf, "second", 6, 0644);
	CHECK_OK(chmod(lf, 0600));
	CHECK_OK(stat("f", &st));
	CHECK_EQ(st.st_size, 6);
	CHECK_EQ(st.st_mode & 07777, 0600);

	/* Renamed in the lower: the old name goes, the new one appears. */
	CHECK_OK(rename(lf, lg));
	CHECK_ERR(stat("f", &st), ENOENT);
	n = read_file("g", buf, sizeof(buf));
	CHECK(n == 6 && !memcmp(buf, "second", 6));

	/* Replaced by a new file under the same name (lento's fetch). */
	write_file(lh, "third", 5, 0644);
	CHECK_OK(rename(lh, lg));
	n = read_file("g", buf, sizeof(buf));
	CHECK(n == 5 && !memcmp(buf, "third", 5));

	/* Removed in the lower. */
	CHECK_OK(unlink(lg));
	CHECK_ERR(stat("g", &st), ENOENT);
	CHECK_ERR(open("g", O_RDONLY), ENOENT);

	/* A directory made and filled in the lower. */
	CHECK_ERR(stat("d", &st), ENOENT);
	CHECK_OK(mkdir(ld, 0755));
	path_in(lf, sizeof(lf), ld, "x");
	write_file(lf, "x", 1, 0644);
	CHECK_OK(stat("d/x", &st));

	/* And the mount can change what it now sees. */
	CHECK_OK(unlink("d/x"));
	CHECK_OK(rmdir("d"));
	CHECK_ERR(stat(ld, &st), ENOENT);
}

/*
 * A name removed through the mount keeps a negative lower dentry (a
 * create of the same name then asks ext4 nothing): a file or directory
 * that lento then makes under that name in the lower must still be seen,
 * also while the removed file is open.
 */
static void lower_remade_after_removal(void)
{
	char lf[4096], ld[4096], buf[64];
	struct stat st, ost;
	size_t n;
	int fd;

	path_in(lf, sizeof(lf), env.lower, "e");
	path_in(ld, sizeof(ld), env.lower, "e2");

	write_file("e", "1", 1, 0644);
	CHECK_OK(unlink("e"));
	CHECK_ERR(stat("e", &st), ENOENT);
	write_file(lf, "lower", 5, 0644);
	n = read_file("e", buf, sizeof(buf));
	CHECK(n == 5 && !memcmp(buf, "lower", 5));

	/* The same with the removed file still open. */
	fd = CHECK_OK(open("e", O_RDONLY));
	CHECK_OK(unlink("e"));
	CHECK_ERR(stat("e", &st), ENOENT);
	write_file(lf, "again!", 6, 0600);
	CHECK_OK(stat("e", &st));
	CHECK_EQ(st.st_size, 6);
	CHECK_OK(fstat(fd, &ost));
	CHECK_EQ(ost.st_size, 5);
	CHECK_EQ(ost.st_nlink, 0);
	CHECK(ost.st_ino != st.st_ino);
	close(fd);
	CHECK_OK(unlink("e"));

	/* A directory. */
	CHECK_OK(mkdir("e2", 0755));
	CHECK_OK(rmdir("e2"));
	CHECK_ERR(stat("e2", &st), ENOENT);
	CHECK_OK(mkdir(ld, 0700));
	CHECK_OK(stat("e2", &st));
	CHECK(S_ISDIR(st.st_mode));
	CHECK_EQ(st.st_mode & 07777, 0700);
	CHECK_OK(rmdir("e2"));

	/* And made again through the mount, the lower sees it. */
	write_file("e", "mnt", 3, 0644);
	CHECK_OK(stat(lf, &st));
	CHECK_EQ(st.st_size, 3);
	CHECK_OK(unlink("e"));
	CHECK_ERR(stat(lf, &st), ENOENT);
}

/*
 * Found by fsdiff: an open file whose name is unlinked, while another
 * name of the same inode holds the shared lower file, must still fstat as
 * itself, also once the name is reused for a directory.
 */
static void fstat_after_unlink_of_linked_name(void)
{
	struct stat st;
	int a, b;

	write_file("a", "data", 4, 0644);
	CHECK_OK(link("a", "b"));
	a = CHECK_OK(open("a", O_RDONLY));
	b = CHECK_OK(open("b", O_RDONLY));
	CHECK_OK(unlink("b"));
	CHECK_OK(fstat(b, &st));
	CHECK(S_ISREG(st.st_mode));
	CHECK_EQ(st.st_nlink, 1);
	CHECK_OK(mkdir("b", 0700));
	CHECK_OK(fstat(b, &st));
	CHECK(S_ISREG(st.st_mode));
	CHECK_EQ(st.st_size, 4);
	CHECK_OK(unlink("a"));
	CHECK_OK(fstat(a, &st));
	CHECK(S_ISREG(st.st_mode));
	CHECK_EQ(st.st_nlink, 0);
	CHECK_OK(fstat(b, &st));
	CHECK_EQ(st.st_nlink, 0);
	CHECK_OK(stat("b", &st));
	CHECK(S_ISDIR(st.st_mode));
	close(a);
	close(b);
}

/* Found by fsdiff: O_DIRECT is for regular files only. */
static void direct_on_special_files(void)
{
	CHECK_OK(mknod("fifo", S_IFIFO | 0644, 0));
	CHECK_OK(mknod("null", S_IFCHR | 0666, makedev(1, 3)));
	CHECK_ERR(open("fifo", O_RDWR | O_DIRECT), EINVAL);
	CHECK_ERR(open("null", O_RDWR | O_DIRECT), EINVAL);
	CHECK_ERR(open("fifo", O_RDWR | O_CREAT | O_DIRECT, 0644), EINVAL);
}

static void set_old_times(const char *path)
{
	struct timespec ts[2] = { { 1000, 0 }, { 1000, 0 } };

	CHECK_OK(utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW));
}

/*
 * Found by fsdiff: following a symlink and fifo I/O update the times of
 * the symlink's and the fifo's own inodes (relatime).
 */
static void symlink_and_fifo_times(void)
{
	struct stat st;
	char c = 'x';
	int fd;

	write_file("f", "x", 1, 0644);
	CHECK_OK(symlink("f", "s"));
	set_old_times("s");
	CHECK_OK(stat("s", &st));
	CHECK_OK(lstat("s", &st));
	CHECK(st.st_atime > 1000);
	CHECK_EQ(st.st_mtime, 1000);

	CHECK_OK(mknod("fifo", S_IFIFO | 0644, 0));
	set_old_times("fifo");
	fd = CHECK_OK(open("fifo", O_RDWR | O_NONBLOCK));
	CHECK_EQ(write(fd, &c, 1), 1);
	CHECK_OK(fstat(fd, &st));
	CHECK(st.st_mtime > 1000);
	CHECK_EQ(read(fd, &c, 1), 1);
	CHECK_OK(fstat(fd, &st));
	CHECK(st.st_atime > 1000);
	close(fd);
}

/* The space of a removed file is free again at once (after a sync). */
static void removed_file_space_freed(void)
{
	static char buf[1 << 20];
	struct statfs before, full, after;
	int fd, i;

	sync();
	CHECK_OK(statfs(".", &before));
	fd = CHECK_OK(open("big", O_CREAT | O_WRONLY, 0644));
	memset(buf, 'x', sizeof(buf));
	for (i = 0; i < 64; i++)
		CHECK_EQ(write(fd, buf, sizeof(buf)), (long)sizeof(buf));
	CHECK_OK(fsync(fd));
	close(fd);
	CHECK_OK(statfs(".", &full));
	CHECK(before.f_bfree - full.f_bfree >= (64ul << 20) / (unsigned long)before.f_bsize);
	CHECK_OK(unlink("big"));
	sync();
	CHECK_OK(statfs(".", &after));
	/* Within 1 MiB of where it was: other cases' leftovers aside. */
	CHECK(after.f_bfree + (1ul << 20) / (unsigned long)before.f_bsize >= before.f_bfree);
}

/*
 * A directory removed after its entries were gives its inode back at once,
 * as on ext4: the names removed in it must not keep the removed directory
 * alive below (presto kept them as negative dentries on both levels).
 */
static void removed_dir_inode_freed(void)
{
	char p[64];
	struct statfs before, after;
	int d, f;

	sync();
	CHECK_OK(statfs(".", &before));
	for (d = 0; d < 8; d++) {
		snprintf(p, sizeof(p), "rd%d", d);
		CHECK_OK(mkdir(p, 0755));
		for (f = 0; f < 4; f++) {
			snprintf(p, sizeof(p), "rd%d/f%d", d, f);
			write_file(p, "x", 1, 0644);
		}
		snprintf(p, sizeof(p), "rd%d/sub", d);
		CHECK_OK(mkdir(p, 0755));
	}
	for (d = 0; d < 8; d++) {
		for (f = 0; f < 4; f++) {
			snprintf(p, sizeof(p), "rd%d/f%d", d, f);
			CHECK_OK(unlink(p));
		}
		snprintf(p, sizeof(p), "rd%d/sub", d);
		CHECK_OK(rmdir(p));
		snprintf(p, sizeof(p), "rd%d", d);
		CHECK_OK(rmdir(p));
	}
	CHECK_OK(statfs(".", &after));
	/* Two of slack: a new journal segment is an inode. */
	CHECK(after.f_ffree + 2 >= before.f_ffree);
}

/*
 * Read-only opens with O_NONBLOCK (nginx opens every file so) share
 * presto's lower file with plain ones: each descriptor keeps its own
 * position and flags, and sendfile from it works.
 */
static void nonblock_readers(void)
{
	char buf[16];
	off_t off = 2;
	int a, b, c, p[2];

	write_file("f", "0123456789", 10, 0644);
	a = CHECK_OK(open("f", O_RDONLY | O_NONBLOCK));
	b = CHECK_OK(open("f", O_RDONLY));
	c = CHECK_OK(open("f", O_RDONLY | O_NONBLOCK));
	CHECK_EQ(read(a, buf, 3), 3);
	CHECK(!memcmp(buf, "012", 3));
	CHECK_EQ(read(b, buf, 2), 2);
	CHECK(!memcmp(buf, "01", 2));
	CHECK_EQ(read(a, buf, 3), 3);
	CHECK(!memcmp(buf, "345", 3));
	CHECK(fcntl(a, F_GETFL) & O_NONBLOCK);
	CHECK(!(fcntl(b, F_GETFL) & O_NONBLOCK));
	CHECK_OK(fcntl(a, F_SETFL, 0));
	CHECK(!(fcntl(a, F_GETFL) & O_NONBLOCK));
	CHECK(fcntl(c, F_GETFL) & O_NONBLOCK);
	CHECK_EQ(read(a, buf, sizeof(buf)), 4);
	CHECK(!memcmp(buf, "6789", 4));
	CHECK_OK(pipe(p));
	CHECK_EQ(sendfile(p[1], c, &off, 8), 8);
	CHECK_EQ(off, 10);
	CHECK_EQ(lseek(c, 0, SEEK_CUR), 0);
	CHECK_EQ(read(p[0], buf, sizeof(buf)), 8);
	CHECK(!memcmp(buf, "23456789", 8));
	CHECK_EQ(sendfile(p[1], c, NULL, 4), 4);
	CHECK_EQ(lseek(c, 0, SEEK_CUR), 4);
	CHECK_EQ(read(p[0], buf, sizeof(buf)), 4);
	CHECK(!memcmp(buf, "0123", 4));
	CHECK_EQ(lseek(b, 0, SEEK_CUR), 2);
	close(p[0]);
	close(p[1]);
	close(a);
	close(b);
	close(c);
	CHECK_OK(unlink("f"));
}

/* A file made by open(O_CREAT) whose first use is of each kind. */
static int new_file(const char *name)
{
	return CHECK_OK(open(name, O_CREAT | O_EXCL | O_RDWR, 0644));
}

static void check_content(const char *name, const char *want, size_t len)
{
	char buf[64];
	int fd = CHECK_OK(open(name, O_RDONLY));

	CHECK_EQ(read(fd, buf, sizeof(buf)), (ssize_t)len);
	CHECK(!memcmp(buf, want, len));
	close(fd);
}

static void new_file_first_use(void)
{
	struct iovec iov = { 0 };
	char buf[16], *map;
	struct stat st;
	int fd, src, dst, ver, p[2];

	/* Made and closed with no I/O: there, empty. */
	close(new_file("touched"));
	CHECK_OK(stat("touched", &st));
	CHECK_EQ(st.st_size, 0);

	fd = new_file("rw");
	CHECK_EQ(pwrite(fd, "hello", 5, 0), 5);
	CHECK_EQ(pread(fd, buf, sizeof(buf), 0), 5);
	CHECK(!memcmp(buf, "hello", 5));
	close(fd);
	check_content("rw", "hello", 5);

	/* A read first (what io_uring and RWF_NOWAIT readers do). */
	fd = new_file("nowait");
	iov = (struct iovec){ buf, sizeof(buf) };
	CHECK_EQ(preadv2(fd, &iov, 1, 0, RWF_NOWAIT), 0);
	CHECK_EQ(read(fd, buf, sizeof(buf)), 0);
	close(fd);

	fd = new_file("mapped");
	CHECK_OK(ftruncate(fd, 4096));
	map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(map != MAP_FAILED);
	if (map != MAP_FAILED) {
		memcpy(map, "abc", 3);
		CHECK_OK(msync(map, 4096, MS_SYNC));
		CHECK_OK(munmap(map, 4096));
	}
	close(fd);
	fd = CHECK_OK(open("mapped", O_RDONLY));
	CHECK_EQ(pread(fd, buf, 3, 0), 3);
	CHECK(!memcmp(buf, "abc", 3));
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_size, 4096);
	close(fd);

	fd = new_file("synced");
	CHECK_OK(fsync(fd));
	CHECK_OK(fdatasync(fd));
	close(fd);

	fd = new_file("allocated");
	CHECK_OK(fallocate(fd, 0, 0, 8192));
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_size, 8192);
	close(fd);

	fd = new_file("sought");
	CHECK_ERR(lseek(fd, 0, SEEK_DATA), ENXIO);
	close(fd);

	/* copy_file_range, both ways, and splice, into new files. */
	write_file("src", "0123456789", 10, 0644);
	src = CHECK_OK(open("src", O_RDONLY));
	fd = new_file("copied");
	CHECK_EQ(copy_file_range(src, NULL, fd, NULL, 10, 0), 10);
	close(fd);
	check_content("copied", "0123456789", 10);
	fd = new_file("empty-in");
	/* An empty new file as the source copies nothing. */
	dst = CHECK_OK(open("copied", O_WRONLY));
	CHECK_EQ(copy_file_range(fd, NULL, dst, NULL, 10, 0), 0);
	close(dst);
	close(fd);
	fd = new_file("spliced");
	CHECK_OK(pipe(p));
	CHECK_EQ(write(p[1], "xyz", 3), 3);
	CHECK_EQ(splice(p[0], NULL, fd, NULL, 3, 0), 3);
	close(p[0]);
	close(p[1]);
	close(fd);
	check_content("spliced", "xyz", 3);
	close(src);

	fd = new_file("version");
	CHECK_OK(ioctl(fd, FS_IOC_GETVERSION, &ver));
	close(fd);

	/* The name gone or moved before the first write. */
	fd = new_file("removed");
	CHECK_OK(unlink("removed"));
	CHECK_EQ(write(fd, "gone", 4), 4);
	CHECK_OK(fstat(fd, &st));
	CHECK_EQ(st.st_size, 4);
	CHECK_EQ(st.st_nlink, 0);
	close(fd);
	fd = new_file("before");
	CHECK_OK(rename("before", "after"));
	CHECK_EQ(write(fd, "moved", 5), 5);
	close(fd);
	check_content("after", "moved", 5);

	/* On a name that was there, open(O_CREAT) makes nothing. */
	fd = CHECK_OK(open("after", O_CREAT | O_WRONLY, 0644));
	CHECK_EQ(write(fd, "M", 1), 1);
	close(fd);
	check_content("after", "Moved", 5);

	for (const char *const *n = (const char *const[]){ "touched", "rw",
	     "nowait", "mapped", "synced", "allocated", "sought", "src",
	     "copied", "empty-in", "spliced", "version", "after", NULL };
	     *n; n++)
		CHECK_OK(unlink(*n));
}

const struct posix_case presto_cases[] = {
	{ "regress-nonblock-readers", nonblock_readers, 0 },
	{ "regress-new-file-first-use", new_file_first_use, 0 },
	{ "regress-removed-file-space-freed", removed_file_space_freed, 0 },
	{ "regress-removed-dir-inode-freed", removed_dir_inode_freed, 0 },
	{ "regress-direct-on-special-files", direct_on_special_files, 0 },
	{ "regress-symlink-and-fifo-times", symlink_and_fifo_times, 0 },
	{ "regress-fstat-after-unlink-of-linked-name",
	  fstat_after_unlink_of_linked_name, 0 },
	{ "presto-statfs", statfs_is_presto, CASE_PRESTO_ONLY },
	{ "presto-same-inodes-as-lower", same_inodes_as_lower, CASE_PRESTO_ONLY },
	{ "presto-reserved-name", reserved_name_hidden, CASE_PRESTO_ONLY },
	{ "presto-own-xattrs-hidden", own_xattrs_hidden, CASE_PRESTO_ONLY },
	{ "presto-whiteout-refused", whiteout_refused, CASE_PRESTO_ONLY },
	{ "presto-lease-refused", lease_refused, CASE_PRESTO_ONLY },
	{ "presto-no-nfs-handles", no_nfs_handles, CASE_PRESTO_ONLY },
	{ "presto-lower-changes-seen", lower_changes_seen, CASE_PRESTO_ONLY },
	{ "presto-lower-append-only-checked", lower_attr_changes_checked,
	  CASE_PRESTO_ONLY },
	{ "presto-lower-remade-after-removal", lower_remade_after_removal,
	  CASE_PRESTO_ONLY },
	{ NULL, NULL, 0 }
};
