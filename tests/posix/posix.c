/*
 * posix: the POSIX behaviour suite, for presto and for ext4 itself.
 *
 *   posix [--presto --lower LOWER] [--only NAME] DIR
 *
 * DIR is an empty directory on the file system under test. With --presto,
 * DIR is the root of a presto mount and LOWER its lower directory, and the
 * presto-only cases run too. Every case runs in a child of its own in a
 * fresh directory DIR/NAME; the output is one "ok - NAME (T s)" or
 * "not ok - NAME" per case (failures preceded by "# where: why" lines) and
 * the closing line "N passed, N failed".
 */
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "posix.h"

struct posix_env env;

#define CASE_TIMEOUT 120	/* seconds; a hung case fails, not the suite */

void posix_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	printf("# %s:%d: ", file, line);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	_exit(1);
}

bool as_user(uid_t uid, gid_t gid, void (*fn)(void *), void *arg)
{
	pid_t pid;
	int status;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		posix_fail(__FILE__, __LINE__, "fork: %s", strerror(errno));
	if (pid == 0) {
		if (setgroups(0, NULL) || setresgid(gid, gid, gid) ||
		    setresuid(uid, uid, uid))
			posix_fail(__FILE__, __LINE__, "dropping privileges: %s",
				   strerror(errno));
		fn(arg);
		fflush(stdout);
		_exit(0);
	}
	if (waitpid(pid, &status, 0) < 0)
		posix_fail(__FILE__, __LINE__, "waitpid: %s", strerror(errno));
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

void path_in(char *buf, size_t size, const char *base, const char *name)
{
	int n = snprintf(buf, size, "%s/%s", base, name);

	if (n < 0 || (size_t)n >= size)
		posix_fail(__FILE__, __LINE__, "path too long: %s/%s", base,
			   name);
}

void write_file(const char *path, const char *data, size_t len, mode_t mode)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, mode);
	size_t done = 0;

	if (fd < 0)
		posix_fail(__FILE__, __LINE__, "open %s: %s", path,
			   strerror(errno));
	while (done < len) {
		ssize_t n = write(fd, data + done, len - done);

		if (n <= 0)
			posix_fail(__FILE__, __LINE__, "write %s: %s", path,
				   strerror(errno));
		done += n;
	}
	close(fd);
}

size_t read_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	size_t done = 0;
	ssize_t n;

	if (fd < 0)
		posix_fail(__FILE__, __LINE__, "open %s: %s", path,
			   strerror(errno));
	while (done < size && (n = read(fd, buf + done, size - done)) > 0)
		done += n;
	close(fd);
	return done;
}

static int rm_tree(const char *path)
{
	char cmd[8192];
	int n = snprintf(cmd, sizeof(cmd), "chattr -R -ia '%s' 2>/dev/null; rm -rf '%s'",
			 path, path);

	if (n < 0 || (size_t)n >= sizeof(cmd))
		return -1;
	return system(cmd);
}

/* Run one case; returns true when it passed. */
static bool run_case(const struct posix_case *c, const char *dir,
		     const char *lower_root)
{
	char cdir[4096], lower[4096];
	pid_t pid;
	int status;

	path_in(cdir, sizeof(cdir), dir, c->name);
	if (mkdir(cdir, 0755) && errno != EEXIST) {
		printf("# mkdir %s: %s\n", cdir, strerror(errno));
		return false;
	}
	if (lower_root)
		path_in(lower, sizeof(lower), lower_root, c->name);
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		printf("# fork: %s\n", strerror(errno));
		return false;
	}
	if (pid == 0) {
		setpgid(0, 0);
		alarm(CASE_TIMEOUT);
		umask(022);
		if (chdir(cdir))
			posix_fail(__FILE__, __LINE__, "chdir %s: %s", cdir,
				   strerror(errno));
		env.dir = cdir;
		env.lower = lower_root ? lower : NULL;
		c->fn();
		fflush(stdout);
		_exit(0);
	}
	if (waitpid(pid, &status, 0) < 0)
		return false;
	kill(-pid, SIGKILL);	/* whatever the case left running */
	rm_tree(cdir);
	if (WIFSIGNALED(status)) {
		printf("# killed by signal %d%s\n", WTERMSIG(status),
		       WTERMSIG(status) == SIGALRM ? " (timed out)" : "");
		return false;
	}
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	const struct posix_case *tables[] = { ns_cases, data_cases,
					      presto_cases };
	const char *only = NULL, *lower_root = NULL, *dir;
	char absdir[4096];
	int passed = 0, failed = 0, i;

	for (i = 1; i < argc - 1; i++) {
		if (!strcmp(argv[i], "--presto"))
			env.presto = true;
		else if (!strcmp(argv[i], "--lower") && i + 1 < argc - 1)
			lower_root = argv[++i];
		else if (!strcmp(argv[i], "--only") && i + 1 < argc - 1)
			only = argv[++i];
		else
			break;
	}
	if (i != argc - 1 || (env.presto && !lower_root)) {
		fprintf(stderr,
			"usage: posix [--presto --lower LOWER] [--only NAME] DIR\n");
		return 2;
	}
	dir = realpath(argv[i], absdir);
	if (!dir) {
		perror(argv[i]);
		return 2;
	}
	env.root = dir;
	env.lower_root = lower_root;
	setvbuf(stdout, NULL, _IOLBF, 0);

	for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
		for (const struct posix_case *c = tables[t]; c->name; c++) {
			if (only && strcmp(only, c->name))
				continue;
			if ((c->flags & CASE_PRESTO_ONLY) && !env.presto)
				continue;
			double t0 = now_s();
			bool ok = run_case(c, dir,
					   env.presto ? lower_root : NULL);

			printf("%s - %s (%.1f s)\n", ok ? "ok" : "not ok",
			       c->name, now_s() - t0);
			if (ok)
				passed++;
			else
				failed++;
		}
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
