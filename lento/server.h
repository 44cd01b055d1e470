/* SPDX-License-Identifier: MIT */
/*
 * lento in server mode: the store (store.h) served over the wire protocol
 * (protocol/PROTOCOL.md) to clients, with callbacks, write-back permits
 * and reintegration; administered through its control socket (lentoctl).
 */
#ifndef LENTO_SERVER_H
#define LENTO_SERVER_H

#include <stdint.h>

#define SERVER_LISTEN_MAX	8
#define SERVER_LEASE_MS		30000	/* a write-back permit's lease */
#define SERVER_CLIENTS_MAX	1024	/* clients served at once */
/* Connections waiting for their HELLO, at least (and as many as clients). */
#define SERVER_GREETING_MIN	64
/* Client identities the store registers, ever (ids are never reused). */
#define SERVER_IDENTITIES_MAX	65536

struct server_opts {
	const char *store;		/* the store directory */
	const char *listen[SERVER_LISTEN_MAX];	/* addresses (loop.h) */
	int nlisten;			/* 0: loopback, port 4770 */
	const char *control;		/* NULL: STORE/control.sock */
	uint32_t lease_ms;		/* 0: SERVER_LEASE_MS */
	uint32_t heartbeat_ms;		/* 0: LP_PING_MS */
	unsigned int fds;		/* descriptors it may open (0: 1024) */
	unsigned int clients_max;	/* 0: SERVER_CLIENTS_MAX */
	unsigned int identities_max;	/* 0: SERVER_IDENTITIES_MAX */
};

/* Runs until SIGTERM or SIGINT; returns the process's exit status. */
int server_main(const struct server_opts *o);

#endif /* LENTO_SERVER_H */
