/*
 * presto-errors: every way to mount presto wrongly is refused with its own
 * errno and one line in the kernel log saying why; a busy mount cannot be
 * unmounted and the module cannot be unloaded while mounted.
 *
 *   presto-errors EXT4DIR TMPFSDIR
 *
 * EXT4DIR: an empty scratch directory on ext4; TMPFSDIR: one on tmpfs.
 * Runs as root in the test VM with presto loaded. Ends with the line
 * "N passed, N failed".
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int passed, failed;
static int kmsg = -1;

static void report(int ok, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* snprintf that refuses to truncate: these are paths and options. */
static void fmt(char *buf, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void fmt(char *buf, size_t size, const char *f, ...)
{
	va_list ap;
	int n;

	va_start(ap, f);
	n = vsnprintf(buf, size, f, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= size) {
		fprintf(stderr, "presto-errors: path too long\n");
		exit(2);
	}
}

static void report(int ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		passed++;
		printf("ok - %s\n", name);
		return;
	}
	failed++;
	printf("not ok - %s: ", name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/* Skip what the kernel log holds so far. */
static void kmsg_mark(void)
{
	lseek(kmsg, 0, SEEK_END);
}

/* Did a kernel log line since the mark contain @needle? */
static int kmsg_saw(const char *needle, char *line, size_t size)
{
	char buf[8192];
	ssize_t n;

	line[0] = '\0';
	while ((n = read(kmsg, buf, sizeof(buf) - 1)) > 0) {
		char *msg;

		buf[n] = '\0';
		msg = strchr(buf, ';');
		msg = msg ? msg + 1 : buf;
		msg[strcspn(msg, "\n")] = '\0';
		if (strstr(msg, needle)) {
			fmt(line, size, "%.*s", (int)(size - 1), msg);
			return 1;
		}
	}
	return 0;
}

static void expect_mount_error(const char *name, const char *target,
			       const char *opts, int err, const char *logmsg)
{
	char line[512];
	int rc, e;

	kmsg_mark();
	rc = mount("presto", target, "presto", 0, opts);
	e = errno;
	if (rc == 0) {
		umount(target);
		report(0, name, "mount -o %s succeeded, expected %s", opts,
		       strerror(err));
		return;
	}
	if (e != err) {
		report(0, name, "mount -o %s: %s, expected %s", opts,
		       strerror(e), strerror(err));
		return;
	}
	if (!kmsg_saw(logmsg, line, sizeof(line))) {
		report(0, name, "no kernel log line containing \"%s\"", logmsg);
		return;
	}
	report(1, name, "%s", line);
}

static int mount_presto(const char *lower, const char *target)
{
	char opts[4096];

	fmt(opts, sizeof(opts), "lower=%s", lower);
	return mount("presto", target, "presto", 0, opts);
}

static int file_contains(const char *path, const char *needle)
{
	char buf[65536];
	ssize_t n;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return 0;
	buf[n] = '\0';
	return strstr(buf, needle) != NULL;
}

int main(int argc, char **argv)
{
	char lower[4096], sub[4096], file[4096], mnt[4096], mnt2[4096];
	char opts[8192], inside[4096];
	const char *ext4, *tmpfs;
	int fd, rc;

	if (argc != 3) {
		fprintf(stderr, "usage: %s EXT4DIR TMPFSDIR\n", argv[0]);
		return 2;
	}
	ext4 = argv[1];
	tmpfs = argv[2];
	kmsg = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	if (kmsg < 0) {
		perror("/dev/kmsg");
		return 2;
	}
	fmt(lower, sizeof(lower), "%s/lower", ext4);
	fmt(sub, sizeof(sub), "%s/lower/sub", ext4);
	fmt(file, sizeof(file), "%s/file", ext4);
	fmt(mnt, sizeof(mnt), "%s/mnt", tmpfs);
	fmt(mnt2, sizeof(mnt2), "%s/mnt2", tmpfs);
	if ((mkdir(ext4, 0755) && errno != EEXIST) ||
	    (mkdir(lower, 0755) && errno != EEXIST) ||
	    (mkdir(sub, 0755) && errno != EEXIST) ||
	    (mkdir(mnt, 0755) && errno != EEXIST) ||
	    (mkdir(mnt2, 0755) && errno != EEXIST)) {
		perror("mkdir");
		return 2;
	}
	fd = open(file, O_CREAT | O_WRONLY, 0644);
	if (fd < 0) {
		perror(file);
		return 2;
	}
	close(fd);

	expect_mount_error("no lower", mnt, "", EINVAL, "missing lower=");
	fmt(opts, sizeof(opts), "lower=%s/nonexistent", ext4);
	expect_mount_error("missing lower", mnt, opts, ENOENT, "not found");
	fmt(opts, sizeof(opts), "lower=%s", file);
	expect_mount_error("lower not a directory", mnt, opts, ENOTDIR,
			   "not a directory");
	fmt(opts, sizeof(opts), "lower=%s", tmpfs);
	expect_mount_error("lower not ext4", mnt, opts, EINVAL,
			   "presto needs ext4");
	fmt(opts, sizeof(opts), "lower=%s,bogus=1", lower);
	expect_mount_error("unknown option", mnt, opts, EINVAL,
			   "Unknown parameter");

	rc = mount_presto(lower, mnt);
	report(rc == 0, "mount", "mount lower=%s: %s", lower, strerror(errno));
	if (rc)
		goto out;
	fmt(opts, sizeof(opts), "lower=%s", lower);
	report(file_contains("/proc/mounts", opts), "options in /proc/mounts",
	       "no \"%s\" in /proc/mounts", opts);

	fmt(inside, sizeof(inside), "lower=%s/sub", mnt);
	expect_mount_error("lower inside presto", mnt2, inside, ELOOP,
			   "inside a presto mount");
	fmt(opts, sizeof(opts), "lower=%s", lower);
	expect_mount_error("same lower twice", mnt2, opts, EBUSY,
			   "overlaps the lower of another");
	fmt(opts, sizeof(opts), "lower=%s", sub);
	expect_mount_error("lower below another's", mnt2, opts, EBUSY,
			   "overlaps the lower of another");
	fmt(opts, sizeof(opts), "lower=%s", ext4);
	expect_mount_error("lower above another's", mnt2, opts, EBUSY,
			   "overlaps the lower of another");

	/* Remount: flags may change, the lower may not. */
	fmt(opts, sizeof(opts), "lower=%s", lower);
	rc = mount("presto", mnt, "presto", MS_REMOUNT | MS_RDONLY, opts);
	report(rc == 0, "remount ro", "%s", strerror(errno));
	if (rc == 0) {
		char path[4200];

		fmt(path, sizeof(path), "%s/x", mnt);
		fd = open(path, O_CREAT | O_WRONLY, 0644);
		report(fd < 0 && errno == EROFS, "read-only mount refuses writes",
		       "open(O_CREAT) gave %d/%s", fd, strerror(errno));
		if (fd >= 0)
			close(fd);
		rc = mount("presto", mnt, "presto", MS_REMOUNT, opts);
		report(rc == 0, "remount rw", "%s", strerror(errno));
	}
	kmsg_mark();
	fmt(opts, sizeof(opts), "lower=%s", sub);
	rc = mount("presto", mnt, "presto", MS_REMOUNT, opts);
	{
		char line[512];

		report(rc < 0 && errno == EINVAL &&
		       kmsg_saw("cannot be changed", line, sizeof(line)),
		       "remount cannot change lower", "rc %d, %s", rc,
		       strerror(errno));
	}

	/* Busy: an open file keeps the mount; the module stays loaded. */
	{
		char path[4200];

		fmt(path, sizeof(path), "%s/sub", mnt);
		fd = open(path, O_RDONLY | O_DIRECTORY);
		rc = umount(mnt);
		report(fd >= 0 && rc < 0 && errno == EBUSY, "busy umount is EBUSY",
		       "fd %d, umount rc %d, %s", fd, rc, strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	rc = syscall(SYS_delete_module, "presto", O_NONBLOCK);
	/* What rmmod reports as "Module presto is in use". */
	report(rc < 0 && errno == EWOULDBLOCK, "module unload refused while mounted",
	       "delete_module rc %d, %s", rc, strerror(errno));
	rc = umount(mnt);
	report(rc == 0, "umount", "%s", strerror(errno));
out:
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
