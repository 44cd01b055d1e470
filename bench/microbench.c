/*
 * microbench: the seed papers' system-call loops, timed.
 *
 *   microbench create N DIR      N x (open O_CREAT, close, unlink)
 *   microbench mkdir N DIR       N x (mkdir, rmdir)
 *   microbench openread N FILE   N x (open, read 4 KiB, close)
 *   microbench stat N FILE       N x stat
 *   microbench fsync N FILE      N x (append 4 KiB, fsync) to a new FILE
 *
 * Prints "OPS SECONDS": the operations per second and the elapsed time.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int fail(const char *what, const char *path)
{
	fprintf(stderr, "microbench: %s %s: %s\n", what, path, strerror(errno));
	return 1;
}

static int name(char *buf, size_t size, const char *dir, long i)
{
	int n = snprintf(buf, size, "%s/mb.%ld", dir, i);

	return n < 0 || (size_t)n >= size;
}

int main(int argc, char **argv)
{
	char path[4096], buf[4096];
	const char *op, *target;
	double t0, t;
	long n, i;

	if (argc != 4 || (n = atol(argv[2])) <= 0) {
		fprintf(stderr, "usage: microbench create|mkdir|openread|stat|fsync N PATH\n");
		return 2;
	}
	op = argv[1];
	target = argv[3];
	if (!strcmp(op, "fsync")) {
		int fd = open(target, O_CREAT | O_EXCL | O_WRONLY | O_APPEND,
			      0644);

		if (fd < 0)
			return fail("open", target);
		memset(buf, 'x', sizeof(buf));
		t0 = now();
		for (i = 0; i < n; i++) {
			if (write(fd, buf, sizeof(buf)) != sizeof(buf))
				return fail("write", target);
			if (fsync(fd))
				return fail("fsync", target);
		}
		t = now() - t0;
		close(fd);
		if (unlink(target))
			return fail("unlink", target);
		printf("%.0f %.6f\n", n / t, t);
		return 0;
	}
	t0 = now();
	for (i = 0; i < n; i++) {
		if (!strcmp(op, "create")) {
			int fd;

			if (name(path, sizeof(path), target, i))
				return fail("name too long", target);
			fd = open(path, O_CREAT | O_WRONLY | O_EXCL, 0644);
			if (fd < 0)
				return fail("open", path);
			close(fd);
			if (unlink(path))
				return fail("unlink", path);
		} else if (!strcmp(op, "mkdir")) {
			if (name(path, sizeof(path), target, i))
				return fail("name too long", target);
			if (mkdir(path, 0755))
				return fail("mkdir", path);
			if (rmdir(path))
				return fail("rmdir", path);
		} else if (!strcmp(op, "openread")) {
			int fd = open(target, O_RDONLY);

			if (fd < 0)
				return fail("open", target);
			if (read(fd, buf, sizeof(buf)) < 0)
				return fail("read", target);
			close(fd);
		} else if (!strcmp(op, "stat")) {
			struct stat st;

			if (stat(target, &st))
				return fail("stat", target);
		} else {
			fprintf(stderr, "microbench: unknown operation %s\n", op);
			return 2;
		}
	}
	t = now() - t0;
	printf("%.0f %.6f\n", n / t, t);
	return 0;
}
