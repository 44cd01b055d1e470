// SPDX-License-Identifier: MIT
/*
 * lento: presto's cache manager on a client, the file server on a server.
 *
 *   lento server --store DIR [--listen ADDR]... [--control PATH]
 *                [--lease-ms N] [--heartbeat-ms N] [--log FILE] [--debug]
 *
 * See docs/man/lento.8.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "server.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: lento server --store DIR [--listen ADDR]... [--control PATH]\n"
		"                    [--lease-ms N] [--heartbeat-ms N] [--log FILE] [--debug]\n"
		"  --store DIR        the server's store (made if missing)\n"
		"  --listen ADDR      HOST:PORT or [IPv6]:PORT; repeatable (default\n"
		"                     127.0.0.1:4770 and [::1]:4770: loopback only)\n"
		"  --control PATH     lentoctl's socket (default DIR/control.sock)\n"
		"  --lease-ms N       a write-back permit's lease (default 30000)\n"
		"  --heartbeat-ms N   the PING interval clients are told (default 5000);\n"
		"                     a client silent for three is gone\n"
		"  --log FILE         log there instead of standard error\n"
		"  --debug            log more\n");
}

static int parse_ms(const char *s, uint32_t *out)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (*end || end == s || v < 100 || v > 86400000) {
		fprintf(stderr, "lento: %s: a number of milliseconds from 100 to 86400000\n",
			s);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

static int server_cmd(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "store", required_argument, NULL, 's' },
		{ "listen", required_argument, NULL, 'l' },
		{ "control", required_argument, NULL, 'c' },
		{ "lease-ms", required_argument, NULL, 'L' },
		{ "heartbeat-ms", required_argument, NULL, 'H' },
		{ "log", required_argument, NULL, 'o' },
		{ "debug", no_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct server_opts o = { 0 };
	const char *logfile = NULL;
	enum log_level level = LOG_INFO;
	int c, e;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			o.store = optarg;
			break;
		case 'l':
			if (o.nlisten == SERVER_LISTEN_MAX) {
				fprintf(stderr, "lento: at most %d --listen\n",
					SERVER_LISTEN_MAX);
				return 2;
			}
			o.listen[o.nlisten++] = optarg;
			break;
		case 'c':
			o.control = optarg;
			break;
		case 'L':
			if (parse_ms(optarg, &o.lease_ms))
				return 2;
			break;
		case 'H':
			if (parse_ms(optarg, &o.heartbeat_ms))
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
	e = log_open("server", logfile, level);
	if (e) {
		fprintf(stderr, "lento: cannot log to %s: %s\n", logfile,
			strerror(-e));
		return 1;
	}
	e = server_main(&o);
	log_close();
	return e;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "server"))
		return server_cmd(argc - 1, argv + 1);
	if (argc >= 2 && (!strcmp(argv[1], "--help") ||
			  !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return 0;
	}
	usage(stderr);
	return 2;
}
