// SPDX-License-Identifier: MIT
/*
 * lentoctl: ask a running lento (client or server) through its control
 * socket. See docs/man/lentoctl.8 and lento/ctl.h for the protocol.
 *
 *   lentoctl [-s SOCKET] [--json] [--timeout SEC] COMMAND [ARG...]
 *
 * Exit status: 0 done; 1 lento answered with an error (printed) or did not
 * answer in time; 2 bad usage or no lento at SOCKET.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_SOCKET	"/run/lento/lento.sock"
#define DEFAULT_TIMEOUT	60
#define REQ_MAX		65536

static void usage(FILE *f)
{
	fprintf(f,
		"usage: lentoctl [-s SOCKET] [--json] [--timeout SEC] COMMAND [ARG...]\n"
		"  -s, --socket PATH  lento's control socket (default $LENTO_SOCKET,\n"
		"                     else " DEFAULT_SOCKET ")\n"
		"  -j, --json         JSON output, for scripts\n"
		"  -t, --timeout SEC  give up after SEC seconds (default %d; 0: never)\n"
		"  lentoctl help      lists the commands this lento has\n",
		DEFAULT_TIMEOUT);
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static int connect_to(const char *path)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(un.sun_path)) {
		fprintf(stderr, "lentoctl: socket path too long: %s\n", path);
		return -1;
	}
	strcpy(un.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&un, sizeof(un))) {
		fprintf(stderr, "lentoctl: no lento at %s: %s\n", path,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -1;
		p += k;
		n -= k;
	}
	return 0;
}

/* Reads the whole response into a malloc'd buffer; NULL on timeout/error. */
static char *read_all(int fd, int timeout_s, size_t *len)
{
	long long deadline = now_ms() + timeout_s * 1000LL;
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);

	while (buf) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int wait = -1, r;
		ssize_t k;

		if (timeout_s) {
			long long left = deadline - now_ms();

			if (left <= 0)
				goto timeout;
			wait = left > 1000000 ? 1000000 : (int)left;
		}
		r = poll(&p, 1, wait);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		if (!r)
			goto timeout;
		if (n + 1 >= cap) {
			char *q = realloc(buf, cap * 2);

			if (!q)
				break;
			buf = q;
			cap *= 2;
		}
		k = recv(fd, buf + n, cap - n - 1, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			break;
		if (!k) {
			buf[n] = 0;
			*len = n;
			return buf;
		}
		n += k;
	}
	fprintf(stderr, "lentoctl: reading the answer: %s\n", strerror(errno));
	free(buf);
	return NULL;
timeout:
	fprintf(stderr, "lentoctl: no answer from lento within %d s\n",
		timeout_s);
	free(buf);
	return NULL;
}

/*
 * write's @FILE is read by lento, from its own directory: a relative one
 * is made absolute here, from the caller's. 0, or -1 said.
 */
static int absolute_at(const char *w, char *out, size_t size)
{
	char cwd[4096];

	if (!getcwd(cwd, sizeof(cwd))) {
		fprintf(stderr, "lentoctl: the current directory: %s\n",
			strerror(errno));
		return -1;
	}
	if ((size_t)snprintf(out, size, "@%s/%s", cwd, w + 1) >= size) {
		fprintf(stderr, "lentoctl: %s: path too long\n", w + 1);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const char *sock = getenv("LENTO_SOCKET");
	int json = 0, timeout_s = DEFAULT_TIMEOUT, fd, c, status, i;
	char req[REQ_MAX], at[4096 + 8], *resp, *body, *end;
	size_t n = 0, len;

	if (!sock || !*sock)
		sock = DEFAULT_SOCKET;
	while ((c = getopt_long(argc, argv, "+s:jt:h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			sock = optarg;
			break;
		case 'j':
			json = 1;
			break;
		case 't':
			timeout_s = (int)strtol(optarg, &end, 10);
			if (*end || timeout_s < 0) {
				fprintf(stderr, "lentoctl: bad timeout %s\n",
					optarg);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind == argc) {
		usage(stderr);
		return 2;
	}
	/* The request: format, command, arguments, each NUL-ended; a NUL. */
	for (i = optind - 1; i < argc; i++) {
		const char *w = i < optind ? (json ? "json" : "text") : argv[i];
		size_t wl;

		if (i == optind + 2 && !strcmp(argv[optind], "write") &&
		    w[0] == '@' && w[1] != '/') {
			if (absolute_at(w, at, sizeof(at)))
				return 2;
			w = at;
		}
		wl = strlen(w) + 1;

		if (wl == 1 || n + wl + 1 > sizeof(req)) {
			fprintf(stderr, "lentoctl: %s\n", wl == 1 ?
				"empty argument" : "request too long");
			return 2;
		}
		memcpy(req + n, w, wl);
		n += wl;
	}
	req[n++] = 0;
	fd = connect_to(sock);
	if (fd < 0)
		return 2;
	if (send_all(fd, req, n)) {
		fprintf(stderr, "lentoctl: sending to %s: %s\n", sock,
			strerror(errno));
		close(fd);
		return 2;
	}
	resp = read_all(fd, timeout_s, &len);
	close(fd);
	if (!resp)
		return 1;
	if (sscanf(resp, "status %d", &status) != 1 ||
	    !(body = memchr(resp, '\n', len))) {
		fprintf(stderr, "lentoctl: a garbled answer from %s\n", sock);
		free(resp);
		return 1;
	}
	body++;
	fwrite(body, 1, len - (body - resp), status && !json ? stderr : stdout);
	free(resp);
	return status ? 1 : 0;
}
