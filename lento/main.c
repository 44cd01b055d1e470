// SPDX-License-Identifier: MIT
/*
 * lento: presto's cache manager on a client, the file server on a server.
 *
 *   lento server --store DIR [--listen ADDR]... [--control PATH]
 *                [--lease-ms N] [--heartbeat-ms N] [--max-clients N]
 *                [--max-identities N] [--log FILE] [--debug]
 *   lento client --cache DIR --server ADDR [--control PATH]
 *                [--volume NAME]... [--fileset VOLUME[:NAME]]... [--age-ms N]
 *                [--watch-ms N]
 *                [--cache-size SIZE] [--fetch-memory SIZE]
 *                [--log FILE] [--debug]
 *
 * See docs/man/lento.8.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "client.h"
#include "log.h"
#include "server.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: lento server --store DIR [--listen ADDR]... [--control PATH]\n"
		"                    [--lease-ms N] [--heartbeat-ms N] [--max-clients N]\n"
		"                    [--max-identities N] [--log FILE] [--debug]\n"
		"  --store DIR        the server's store (made if missing)\n"
		"  --listen ADDR      HOST:PORT or [IPv6]:PORT; repeatable (default\n"
		"                     127.0.0.1:4770 and [::1]:4770: loopback only)\n"
		"  --control PATH     lentoctl's socket (default DIR/control.sock)\n"
		"  --lease-ms N       a write-back permit's lease (default 30000)\n"
		"  --heartbeat-ms N   the PING interval clients are told (default 5000);\n"
		"                     a client silent for three is gone\n"
		"  --max-clients N    clients served at once (default 1024, and at most\n"
		"                     a quarter of the descriptors it may open)\n"
		"  --max-identities N new clients the store registers, in all (default\n"
		"                     65536); one more is refused EDQUOT\n"
		"  --log FILE         log there instead of standard error\n"
		"  --debug            log more\n"
		"\n"
		"usage: lento client --cache DIR --server ADDR [--control PATH]\n"
		"                    [--volume NAME]... [--fileset VOLUME[:NAME]]...\n"
		"                    [--age-ms N] [--watch-ms N] [--cache-size SIZE]\n"
		"                    [--fetch-memory SIZE] [--log FILE] [--debug]\n"
		"  --cache DIR        the cache (made if missing); DIR/.lento holds\n"
		"                     the database, DIR/VOLUME each volume's tree\n"
		"  --server ADDR      the server, HOST:PORT or [IPv6]:PORT\n"
		"  --control PATH     lentoctl's socket (default DIR/.lento/control.sock)\n"
		"  --volume NAME      look this volume up at the first connection;\n"
		"                     repeatable (others are looked up when used)\n"
		"  --fileset VOLUME[:NAME]  serve presto's fileset NAME (default\n"
		"                     VOLUME), mounted with -o lower=DIR/VOLUME,\n"
		"                     fileset=NAME: its misses, its permit, its\n"
		"                     journal; repeatable\n"
		"  --age-ms N         ship a change once it is this old (default 5000)\n"
		"  --watch-ms N       revalidate a fileset with inotify or fanotify watchers\n"
		"                     this long after the server broke its volume, so they\n"
		"                     hear of the changes (default 5000; 0: at next use)\n"
		"  --cache-size SIZE  bytes of file content kept (default 1G; K, M, G, T)\n"
		"  --fetch-memory SIZE  bytes of fetched content held in memory on\n"
		"                     their way to a slower disk before the server is\n"
		"                     left waiting (default 32M; 2M to 4G)\n"
		"  --log FILE         log there instead of standard error\n"
		"  --debug            log more\n");
}

static int parse_ms(const char *opt, const char *s, uint32_t *out)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (*end || end == s || v < 100 || v > 86400000) {
		fprintf(stderr, "lento: %s %s: a number of milliseconds from 100 to 86400000\n",
			opt, s);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

static int parse_count(const char *opt, const char *s, unsigned int *out)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (*end || end == s || !isdigit((unsigned char)*s) || v < 1 ||
	    v > 1000000) {
		fprintf(stderr, "lento: %s %s: a number from 1 to 1000000\n",
			opt, s);
		return -1;
	}
	*out = (unsigned int)v;
	return 0;
}

/* optarg onto a repeatable option's list of at most @max; -1 (said) if full. */
static int push_arg(const char **list, int *n, int max, const char *opt)
{
	if (*n == max) {
		fprintf(stderr, "lento: at most %d %s\n", max, opt);
		return -1;
	}
	list[(*n)++] = optarg;
	return 0;
}

static int run_role(const char *role, const char *logfile,
		    enum log_level level, int (*fn)(const void *), const void *o)
{
	int e = log_open(role, logfile, level);

	if (e) {
		fprintf(stderr, "lento: cannot log to %s: %s\n", logfile,
			strerror(-e));
		return 1;
	}
	e = fn(o);
	log_close();
	return e;
}

static int run_server(const void *o)
{
	return server_main(o);
}

static int run_client(const void *o)
{
	return client_main(o);
}

#define FD_LIMIT_MAX	(1u << 20)	/* Linux's default nr_open */

/*
 * How many descriptors the process may have open: its soft limit raised
 * to the hard one first (lento uses no select(), so a high limit costs
 * nothing). A server holds a descriptor for each body of the batches its
 * clients send, a client one for each body of its batch; the default
 * soft limit of 1024 is soon reached by a server of a few clients.
 */
static unsigned int fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 1024;
	if (rl.rlim_cur < rl.rlim_max) {
		struct rlimit up = rl;

		up.rlim_cur = rl.rlim_max < FD_LIMIT_MAX ? rl.rlim_max :
			      FD_LIMIT_MAX;
		if (up.rlim_cur > rl.rlim_cur && !setrlimit(RLIMIT_NOFILE, &up))
			rl = up;
	}
	return rl.rlim_cur < FD_LIMIT_MAX ? (unsigned int)rl.rlim_cur :
	       FD_LIMIT_MAX;
}

static int server_cmd(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "store", required_argument, NULL, 's' },
		{ "listen", required_argument, NULL, 'l' },
		{ "control", required_argument, NULL, 'c' },
		{ "lease-ms", required_argument, NULL, 'L' },
		{ "heartbeat-ms", required_argument, NULL, 'H' },
		{ "max-clients", required_argument, NULL, 'M' },
		{ "max-identities", required_argument, NULL, 'I' },
		{ "log", required_argument, NULL, 'o' },
		{ "debug", no_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct server_opts o = { 0 };
	const char *logfile = NULL;
	enum log_level level = LOG_INFO;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			o.store = optarg;
			break;
		case 'l':
			if (push_arg(o.listen, &o.nlisten, SERVER_LISTEN_MAX,
				     "--listen"))
				return 2;
			break;
		case 'c':
			o.control = optarg;
			break;
		case 'L':
			if (parse_ms("--lease-ms", optarg, &o.lease_ms))
				return 2;
			break;
		case 'H':
			if (parse_ms("--heartbeat-ms", optarg, &o.heartbeat_ms))
				return 2;
			break;
		case 'M':
			if (parse_count("--max-clients", optarg, &o.clients_max))
				return 2;
			break;
		case 'I':
			if (parse_count("--max-identities", optarg,
					&o.identities_max))
				return 2;
			break;
		case 'o':
			logfile = optarg;
			break;
		case 'd':
			level = LOG_DEBUG;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!o.store || optind != argc) {
		usage(stderr);
		return 2;
	}
	o.fds = fd_limit();
	return run_role("server", logfile, level, run_server, &o);
}

static int parse_size(const char *opt, const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	int shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	}
	if (errno || end == s || *end || !v || *s == '-' ||
	    v > (UINT64_MAX >> shift)) {
		fprintf(stderr, "lento: %s %s: a size in bytes (K, M, G, T)\n",
			opt, s);
		return -1;
	}
	*out = (uint64_t)v << shift;
	return 0;
}

static int client_cmd(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cache", required_argument, NULL, 'C' },
		{ "server", required_argument, NULL, 'S' },
		{ "control", required_argument, NULL, 'c' },
		{ "volume", required_argument, NULL, 'v' },
		{ "fileset", required_argument, NULL, 'f' },
		{ "age-ms", required_argument, NULL, 'a' },
		{ "watch-ms", required_argument, NULL, 'w' },
		{ "cache-size", required_argument, NULL, 'z' },
		{ "fetch-memory", required_argument, NULL, 'm' },
		{ "log", required_argument, NULL, 'o' },
		{ "debug", no_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct client_opts o = { 0 };
	const char *logfile = NULL;
	enum log_level level = LOG_INFO;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'C':
			o.cache = optarg;
			break;
		case 'S':
			o.server = optarg;
			break;
		case 'c':
			o.control = optarg;
			break;
		case 'v':
			if (push_arg(o.volumes, &o.nvolumes, CLIENT_VOLUMES_MAX,
				     "--volume"))
				return 2;
			break;
		case 'f':
			if (push_arg(o.filesets, &o.nfilesets,
				     CLIENT_VOLUMES_MAX, "--fileset"))
				return 2;
			break;
		case 'a':
			if (parse_ms("--age-ms", optarg, &o.age_ms))
				return 2;
			break;
		case 'w':
			if (strcmp(optarg, "0") &&
			    parse_ms("--watch-ms", optarg, &o.watch_ms))
				return 2;
			o.watch_ms_set = true;
			break;
		case 'z':
			if (parse_size("--cache-size", optarg, &o.cache_size))
				return 2;
			break;
		case 'm':
			if (parse_size("--fetch-memory", optarg, &o.fetch_memory))
				return 2;
			if (o.fetch_memory < CLIENT_FETCH_MEMORY_MIN ||
			    o.fetch_memory > CLIENT_FETCH_MEMORY_MAX) {
				fprintf(stderr, "lento: --fetch-memory %s: from 2M to 4G\n",
					optarg);
				return 2;
			}
			break;
		case 'o':
			logfile = optarg;
			break;
		case 'd':
			level = LOG_DEBUG;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!o.cache || !o.server || optind != argc) {
		usage(stderr);
		return 2;
	}
	o.fds = fd_limit();
	return run_role("client", logfile, level, run_client, &o);
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "server"))
		return server_cmd(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "client"))
		return client_cmd(argc - 1, argv + 1);
	if (argc >= 2 && (!strcmp(argv[1], "--help") ||
			  !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return 0;
	}
	usage(stderr);
	return 2;
}
