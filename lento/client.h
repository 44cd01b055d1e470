/* SPDX-License-Identifier: MIT */
/*
 * lento in client mode: the cache manager of a cache directory (cache.h)
 * talking to one server (conn.h): it fetches what is missed, keeps the
 * changes made to the cache in its modification log (cml.h), holds the
 * volumes' write-back permits and reintegrates the log. Until presto's
 * journal feeds it (a later issue), changes come through the control
 * socket (lentoctl mkdir, write, ...). See docs/man/lento.8.
 */
#ifndef LENTO_CLIENT_H
#define LENTO_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#define CLIENT_VOLUMES_MAX	32
#define CLIENT_AGE_MS		5000	/* a record ships once this old */
/* A watched fileset is revalidated this long after a volume break. */
#define CLIENT_WATCH_MS		5000
#define CLIENT_CACHE_SIZE	(1ull << 30)	/* bytes of cached content */
/*
 * Fetched bodies' chunks in memory, on their way to a disk slower than
 * the line: the server's frames are left unread above this, read again
 * below half of it. At least two DATA chunks (LP_CHUNK_MAX).
 */
#define CLIENT_FETCH_MEMORY	(32ull << 20)
#define CLIENT_FETCH_MEMORY_MIN	(2ull << 20)
#define CLIENT_FETCH_MEMORY_MAX	(4ull << 30)

struct client_opts {
	const char *cache;		/* the cache directory */
	const char *server;		/* its address (loop.h) */
	const char *control;		/* NULL: CACHE/.lento/control.sock */
	const char *volumes[CLIENT_VOLUMES_MAX];	/* looked up at start */
	int nvolumes;
	/* presto filesets served: each mounts CACHE/VOLUME (KERNEL.md) */
	const char *filesets[CLIENT_VOLUMES_MAX];
	int nfilesets;
	uint32_t age_ms;		/* 0: CLIENT_AGE_MS */
	uint32_t watch_ms;		/* if watch_ms_set; else CLIENT_WATCH_MS */
	bool watch_ms_set;
	uint64_t cache_size;		/* 0: CLIENT_CACHE_SIZE */
	uint64_t fetch_memory;		/* 0: CLIENT_FETCH_MEMORY */
	unsigned int fds;		/* descriptors it may open (0: 1024) */
};

/* Runs until SIGTERM or SIGINT; returns the process's exit status. */
int client_main(const struct client_opts *o);

#endif /* LENTO_CLIENT_H */
