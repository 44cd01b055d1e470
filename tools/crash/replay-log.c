// SPDX-License-Identifier: GPL-2.0
/*
 * replay-log: list and replay a dm-log-writes log (see logwrites.h), to
 * rebuild the state a device was in at a flush or at a named mark.
 *
 *   replay-log --log LOG --list
 *   replay-log --log LOG --flush-points
 *   replay-log --log LOG --replay DATA [--limit N] [--end-mark NAME]
 *              [--fsck-points]
 *
 * Entries are numbered from 1; "--limit N" applies entries 1 to N, so an
 * entry's number is the limit that replays through it. --list prints one
 * line per entry and then the count. --flush-points prints the number of
 * every FLUSH or FUA entry (the crash states worth checking) and
 * "mark N NAME" for every mark. --replay applies the entries in order to
 * DATA (a block device or an existing regular file), up to --limit N
 * entries or through the mark named by --end-mark (it is an error if there
 * is no such mark); without either, the whole log. The log is checked up
 * to the stopping point before DATA is touched. --fsck-points also prints
 * "point N" after each FLUSH or FUA entry applied, after syncing DATA.
 * Block devices are opened exclusively: a mounted DATA, or a LOG still
 * held by the dm-log-writes target, is refused.
 *
 * Exit status: 0; 1 if the log is malformed (the message names the entry
 * and what is wrong); 2 for a usage or I/O error, or a missing mark.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "logwrites.h"

#define EXIT_MALFORMED	1
#define EXIT_USAGE	2

static const char *log_path;

static void usage(void)
{
	fprintf(stderr,
		"usage: replay-log --log LOG --list\n"
		"       replay-log --log LOG --flush-points\n"
		"       replay-log --log LOG --replay DATA [--limit N] "
		"[--end-mark NAME] [--fsck-points]\n");
	exit(EXIT_USAGE);
}

/*
 * Open a file or block device; a block device exclusively, so that one
 * mounted, or still held by the dm-log-writes target, is refused.
 */
static int open_dev(const char *path, int flags)
{
	struct stat st;
	int fd;

	if (!stat(path, &st) && S_ISBLK(st.st_mode))
		flags |= O_EXCL;
	fd = open(path, flags | O_CLOEXEC);
	if (fd < 0)
		fprintf(stderr, "replay-log: %s: %s%s\n", path, strerror(errno),
			errno == EBUSY ? " (mounted, or still held by a "
			"device-mapper target?)" : "");
	return fd;
}

/* Report a library error: malformed log (1) or system error (2). */
static int fail(struct lw_log *log, int err, const char *what)
{
	if (err == -EBADMSG) {
		fprintf(stderr, "replay-log: %s: malformed log: %s\n",
			log_path, lw_error(log));
		return EXIT_MALFORMED;
	}
	fprintf(stderr, "replay-log: %s: %s\n", what, strerror(-err));
	return EXIT_USAGE;
}

/* A mark's name for people: printable ASCII, the rest as \xNN. */
static void print_name(const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c < 0x20 || c >= 0x7f || c == '\\')
			printf("\\x%02x", c);
		else
			putchar(c);
	}
}

static int list(struct lw_log *log)
{
	struct lw_entry e;
	char flags[64];
	uint64_t n = 0;
	int ret;

	while ((ret = lw_next(log, &e)) > 0) {
		n++;
		printf("%" PRIu64 " sector %" PRIu64 " nr_sectors %" PRIu64
		       " flags %s", e.index, e.sector, e.nr_sectors,
		       lw_flags_name(e.flags, flags, sizeof(flags)));
		if (e.mark) {
			printf(" mark ");
			print_name(e.mark);
		}
		putchar('\n');
	}
	fflush(stdout);
	if (ret < 0)
		return fail(log, ret, log_path);
	printf("%" PRIu64 " entries (sector size %" PRIu32 ")\n", n,
	       log->sectorsize);
	return 0;
}

static int flush_points(struct lw_log *log)
{
	struct lw_entry e;
	int ret;

	while ((ret = lw_next(log, &e)) > 0) {
		if (e.flags & (LW_FLUSH | LW_FUA)) {
			printf("%" PRIu64 "\n", e.index);
		} else if (e.mark) {
			printf("mark %" PRIu64 " ", e.index);
			print_name(e.mark);
			putchar('\n');
		}
	}
	fflush(stdout);
	if (ret < 0)
		return fail(log, ret, log_path);
	return 0;
}

struct replay_opts {
	const char *data;
	uint64_t limit;		/* UINT64_MAX: none */
	const char *end_mark;
	int fsck_points;
};

static int replay(struct lw_log *log, const struct replay_opts *o)
{
	struct lw_entry e;
	uint64_t stop = 0, target_size = 0;
	struct stat st;
	int ret, fd, found = 0;

	/* Check the log up to where we stop, before writing anything. */
	ret = 0;
	while (stop < o->limit) {
		ret = lw_next(log, &e);
		if (ret <= 0)
			break;
		stop = e.index;
		if (o->end_mark && e.mark && !strcmp(e.mark, o->end_mark)) {
			found = 1;
			break;
		}
	}
	if (ret < 0)
		return fail(log, ret, log_path);
	if (o->end_mark && !found) {
		fprintf(stderr, "replay-log: %s: no mark \"%s\" in ", log_path,
			o->end_mark);
		if (o->limit != UINT64_MAX)
			fprintf(stderr, "the first %" PRIu64 " entries\n",
				o->limit);
		else
			fprintf(stderr, "its %" PRIu64 " entries\n",
				log->nr_entries);
		return EXIT_USAGE;
	}

	fd = open_dev(o->data, O_RDWR);
	if (fd < 0)
		return EXIT_USAGE;
	if (fstat(fd, &st)) {
		fprintf(stderr, "replay-log: %s: %s\n", o->data,
			strerror(errno));
		close(fd);
		return EXIT_USAGE;
	}
	if (S_ISBLK(st.st_mode)) {
		off_t end = lseek(fd, 0, SEEK_END);

		if (end <= 0) {
			fprintf(stderr, "replay-log: %s: cannot find its "
				"size: %s\n", o->data,
				end < 0 ? strerror(errno) : "empty");
			close(fd);
			return EXIT_USAGE;
		}
		target_size = (uint64_t)end;
	} else if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "replay-log: %s: not a block device or a "
			"regular file\n", o->data);
		close(fd);
		return EXIT_USAGE;
	}

	lw_rewind(log);
	ret = 0;
	while (log->next_index < stop) {
		ret = lw_next(log, &e);
		if (ret <= 0) {
			/* the log changed under us */
			ret = ret ? ret : -EBADMSG;
			break;
		}
		ret = lw_apply(log, &e, fd, target_size);
		if (ret == -ENOSPC && target_size) {
			fprintf(stderr, "replay-log: entry %" PRIu64 " (sector %"
				PRIu64 " + %" PRIu64 ") reaches past the end "
				"of %s (%" PRIu64 " bytes)\n", e.index,
				e.sector, e.nr_sectors, o->data, target_size);
			close(fd);
			return EXIT_USAGE;
		}
		if (ret)
			break;
		if (o->fsck_points && (e.flags & (LW_FLUSH | LW_FUA))) {
			if (fsync(fd)) {
				ret = -errno;
				break;
			}
			printf("point %" PRIu64 "\n", e.index);
			fflush(stdout);
		}
	}
	if (!ret && fsync(fd))
		ret = -errno;
	if (close(fd) && !ret)
		ret = -errno;
	if (ret)
		return fail(log, ret, o->data);
	printf("applied %" PRIu64 " entries: through entry %" PRIu64
	       " of %" PRIu64, stop, stop, log->nr_entries);
	if (found)
		printf(" (mark %s)", o->end_mark);
	putchar('\n');
	return 0;
}

int main(int argc, char **argv)
{
	enum { O_LOG = 256, O_LIST, O_REPLAY, O_LIMIT, O_END_MARK,
	       O_FLUSH_POINTS, O_FSCK_POINTS };
	static const struct option opts[] = {
		{ "log", required_argument, NULL, O_LOG },
		{ "list", no_argument, NULL, O_LIST },
		{ "replay", required_argument, NULL, O_REPLAY },
		{ "limit", required_argument, NULL, O_LIMIT },
		{ "end-mark", required_argument, NULL, O_END_MARK },
		{ "flush-points", no_argument, NULL, O_FLUSH_POINTS },
		{ "fsck-points", no_argument, NULL, O_FSCK_POINTS },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	struct replay_opts ro = { .limit = UINT64_MAX };
	int do_list = 0, do_points = 0, modes, c, fd, ret;
	struct lw_log log;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case O_LOG:
			log_path = optarg;
			break;
		case O_LIST:
			do_list = 1;
			break;
		case O_REPLAY:
			ro.data = optarg;
			break;
		case O_LIMIT: {
			char *end;

			errno = 0;
			ro.limit = strtoull(optarg, &end, 10);
			if (errno || end == optarg || *end || optarg[0] == '-' ||
			    ro.limit == UINT64_MAX) {
				fprintf(stderr, "replay-log: bad --limit %s\n",
					optarg);
				return EXIT_USAGE;
			}
			break;
		}
		case O_END_MARK:
			ro.end_mark = optarg;
			break;
		case O_FLUSH_POINTS:
			do_points = 1;
			break;
		case O_FSCK_POINTS:
			ro.fsck_points = 1;
			break;
		default:
			usage();
		}
	}
	modes = do_list + do_points + !!ro.data;
	if (optind != argc || !log_path || modes != 1 ||
	    (!ro.data && (ro.limit != UINT64_MAX || ro.end_mark ||
			  ro.fsck_points)))
		usage();

	fd = open_dev(log_path, O_RDONLY);
	if (fd < 0)
		return EXIT_USAGE;
	ret = lw_open(&log, fd);
	if (ret) {
		ret = fail(&log, ret, log_path);
	} else {
		if (do_list)
			ret = list(&log);
		else if (do_points)
			ret = flush_points(&log);
		else
			ret = replay(&log, &ro);
		lw_close(&log);
	}
	close(fd);
	return ret;
}
