/*
 * microbench: the seed papers' system-call loops, timed.
 *
 *   microbench create N DIR...      N x (open O_CREAT, close, unlink)
 *   microbench mkdir N DIR...       N x (mkdir, rmdir)
 *   microbench openread N FILE...   N x (open, read 4 KiB, close)
 *   microbench stat N FILE...       N x stat
 *   microbench fsync N FILE...      N x (append 4 KiB, fsync) to a new FILE
 *   microbench lstree N DIR...      N x a walk of the tree: getdents and
 *                                   lstat of every entry (ls -lR)
 *   microbench readtree N DIR...    N x a walk reading every regular file
 *                                   whole (open, read, close)
 *
 * With one target it prints "OPS SECONDS": operations per second and the
 * elapsed time. With several (ext4, presto, overlayfs...) the loops are
 * interleaved: ROUNDS rounds of N/ROUNDS operations on each target in
 * turn, the order rotated every round, so that the emulator's drift,
 * which moves a two-second loop by 20% from one run to the next, hits
 * all targets alike. It then prints one line per target:
 * "OPS SECONDS RATIO", RATIO being the median over the rounds of the
 * target's speed relative to the first target's in the same round.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 40
#define MAX_TARGETS 8

enum op { OP_CREATE, OP_MKDIR, OP_OPENREAD, OP_STAT, OP_FSYNC, OP_LSTREE,
	  OP_READTREE, OP_NR };

struct target {
	const char *path;
	int fd;			/* OP_FSYNC: the file appended to */
	double seconds;		/* all rounds */
	double round[ROUNDS];	/* each round */
};

static const char *const op_names[] = {
	[OP_CREATE] = "create", [OP_MKDIR] = "mkdir",
	[OP_OPENREAD] = "openread", [OP_STAT] = "stat", [OP_FSYNC] = "fsync",
	[OP_LSTREE] = "lstree", [OP_READTREE] = "readtree",
};

static char buf[4096];

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int fail(const char *what, const char *path)
{
	fprintf(stderr, "microbench: %s %s: %s\n", what, path, strerror(errno));
	return -1;
}

static int name(char *path, size_t size, const char *dir, long i)
{
	int n = snprintf(path, size, "%s/mb.%ld", dir, i);

	if (n < 0 || (size_t)n >= size) {
		errno = ENAMETOOLONG;
		return fail("name", dir);
	}
	return 0;
}

/* Every entry below the open directory @fd (closed here), lstat'd; with
 * @read, every regular file read whole. */
static int walk(int fd, const char *path, int read_files)
{
	DIR *d = fdopendir(fd);
	struct dirent *e;
	struct stat st;
	int err = 0, sub;

	if (!d) {
		close(fd);
		return fail("opendir", path);
	}
	while (!err && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW)) {
			err = fail("lstat", e->d_name);
		} else if (S_ISDIR(st.st_mode)) {
			sub = openat(fd, e->d_name, O_RDONLY | O_DIRECTORY);
			err = sub < 0 ? fail("open", e->d_name) :
				walk(sub, e->d_name, read_files);
		} else if (S_ISREG(st.st_mode) && read_files) {
			ssize_t n;

			sub = openat(fd, e->d_name, O_RDONLY);
			if (sub < 0) {
				err = fail("open", e->d_name);
				continue;
			}
			while ((n = read(sub, buf, sizeof(buf))) > 0)
				;
			if (n < 0)
				err = fail("read", e->d_name);
			close(sub);
		}
	}
	closedir(d);
	return err;
}

/* One operation of the loop, the i-th on this target. */
static int one(enum op op, struct target *t, long i)
{
	char path[4096];
	struct stat st;
	int fd;

	switch (op) {
	case OP_CREATE:
		if (name(path, sizeof(path), t->path, i))
			return -1;
		fd = open(path, O_CREAT | O_WRONLY | O_EXCL, 0644);
		if (fd < 0)
			return fail("open", path);
		close(fd);
		return unlink(path) ? fail("unlink", path) : 0;
	case OP_MKDIR:
		if (name(path, sizeof(path), t->path, i))
			return -1;
		if (mkdir(path, 0755))
			return fail("mkdir", path);
		return rmdir(path) ? fail("rmdir", path) : 0;
	case OP_OPENREAD:
		fd = open(t->path, O_RDONLY);
		if (fd < 0)
			return fail("open", t->path);
		if (read(fd, buf, sizeof(buf)) < 0) {
			close(fd);
			return fail("read", t->path);
		}
		close(fd);
		return 0;
	case OP_STAT:
		return stat(t->path, &st) ? fail("stat", t->path) : 0;
	case OP_FSYNC:
		if (write(t->fd, buf, sizeof(buf)) != sizeof(buf))
			return fail("write", t->path);
		return fsync(t->fd) ? fail("fsync", t->path) : 0;
	case OP_LSTREE:
	case OP_READTREE:
		fd = open(t->path, O_RDONLY | O_DIRECTORY);
		if (fd < 0)
			return fail("open", t->path);
		return walk(fd, t->path, op == OP_READTREE);
	case OP_NR:
		break;
	}
	return -1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Median over the rounds of t's speed relative to ref's. */
static double median_ratio(const struct target *ref, const struct target *t,
			   int rounds)
{
	double r[ROUNDS];
	int k;

	for (k = 0; k < rounds; k++)
		r[k] = ref->round[k] / t->round[k];
	qsort(r, rounds, sizeof(r[0]), cmp_double);
	return rounds % 2 ? r[rounds / 2] :
		(r[rounds / 2 - 1] + r[rounds / 2]) / 2;
}

static int run(enum op op, long n, struct target *t, int nt)
{
	int rounds = nt == 1 ? 1 : n >= ROUNDS ? ROUNDS : (int)n;
	long done = 0;
	int k, j;

	for (k = 0; k < rounds; k++) {
		long upto = n * (k + 1) / rounds;

		for (j = 0; j < nt; j++) {
			struct target *cur = &t[(j + k) % nt];
			double t0 = now();
			long i;

			for (i = done; i < upto; i++)
				if (one(op, cur, i))
					return -1;
			cur->round[k] = now() - t0;
			cur->seconds += cur->round[k];
		}
		done = upto;
	}
	for (j = 0; j < nt; j++) {
		printf("%.0f %.6f", n / t[j].seconds, t[j].seconds);
		if (nt > 1)
			printf(" %.4f", median_ratio(&t[0], &t[j], rounds));
		printf("\n");
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct target t[MAX_TARGETS] = { 0 };
	int nt = argc - 3, j, err;
	enum op op;
	long n;

	if (argc < 4 || nt > MAX_TARGETS || (n = atol(argv[2])) <= 0) {
		fprintf(stderr, "usage: microbench create|mkdir|openread|stat|fsync|lstree|readtree N PATH... (at most %d)\n",
			MAX_TARGETS);
		return 2;
	}
	for (op = 0; op < OP_NR; op++)
		if (!strcmp(argv[1], op_names[op]))
			break;
	if (op == OP_NR) {
		fprintf(stderr, "microbench: unknown operation %s\n", argv[1]);
		return 2;
	}
	memset(buf, 'x', sizeof(buf));
	for (j = 0; j < nt; j++) {
		t[j].path = argv[3 + j];
		t[j].fd = -1;
		if (op != OP_FSYNC)
			continue;
		t[j].fd = open(t[j].path, O_CREAT | O_EXCL | O_WRONLY | O_APPEND,
			       0644);
		if (t[j].fd < 0) {
			fail("open", t[j].path);
			return 1;
		}
	}
	err = run(op, n, t, nt);
	for (j = 0; j < nt; j++) {
		if (t[j].fd < 0)
			continue;
		close(t[j].fd);
		if (unlink(t[j].path))
			err = fail("unlink", t[j].path);
	}
	return err ? 1 : 0;
}
