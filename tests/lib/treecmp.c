// SPDX-License-Identifier: GPL-2.0
/*
 * treecmp [--ignore NAME]... [--mtime] [--root] [--no-dir-size]
 *         [--no-xattrs] A B
 *
 * Compare the trees under directories A and B (see tree.h for what is
 * compared), print each difference, and end with "trees equal" or
 * "N differences". Exit 0 iff equal, 1 if they differ, 2 on error.
 */
#include "tree.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static int print_diff(const struct tree_diff *d, void *arg)
{
	char line[2048];

	(void)arg;
	tree_diff_format(d, line, sizeof(line));
	if (printf("%s\n", line) < 0)
		return -EIO;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: treecmp [--ignore NAME]... [--mtime] [--root] "
		   "[--no-dir-size] [--no-xattrs] A B\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "ignore", required_argument, NULL, 'i' },
		{ "mtime", no_argument, NULL, 'm' },
		{ "root", no_argument, NULL, 'r' },
		{ "no-dir-size", no_argument, NULL, 'd' },
		{ "no-xattrs", no_argument, NULL, 'x' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct tree_opts opts = { 0 };
	const char **ignore;
	struct tree_error err;
	struct rlimit rl;
	int c, n;

	ignore = calloc((size_t)argc, sizeof(*ignore));
	if (!ignore) {
		perror("treecmp");
		return 2;
	}
	while ((c = getopt_long(argc, argv, "i:mrdxh", longopts, NULL)) != -1) {
		switch (c) {
		case 'i':
			ignore[opts.n_ignore++] = optarg;
			break;
		case 'm':
			opts.flags |= TREE_MTIME;
			break;
		case 'r':
			opts.flags |= TREE_ROOT_ATTRS;
			break;
		case 'd':
			opts.flags |= TREE_NO_DIR_SIZE;
			break;
		case 'x':
			opts.flags |= TREE_NO_XATTRS;
			break;
		case 'h':
			usage(stdout);
			free(ignore);
			return 0;
		default:
			usage(stderr);
			free(ignore);
			return 2;
		}
	}
	if (argc - optind != 2) {
		usage(stderr);
		free(ignore);
		return 2;
	}
	opts.ignore = ignore;

	/* The walk holds two descriptors per level of depth. */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}

	n = tree_compare(argv[optind], argv[optind + 1], &opts, print_diff,
			 NULL, &err);
	free(ignore);
	if (n < 0) {
		fprintf(stderr, "treecmp: %s: %s: %s\n", err.path, err.op,
			strerror(err.err));
		return 2;
	}
	if (n == 0)
		printf("trees equal\n");
	else
		printf("%d difference%s\n", n, n == 1 ? "" : "s");
	if (fflush(stdout))
		return 2;
	return n ? 1 : 0;
}
