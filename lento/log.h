/* SPDX-License-Identifier: MIT */
/*
 * lento's log: one line per event on stderr (or a file), with the time,
 * the level and the role ("server", "client"). A daemon's log is how an
 * operator learns why a connection was closed or a batch refused, so
 * every such decision is logged once, with its reason.
 */
#ifndef LENTO_LOG_H
#define LENTO_LOG_H

#include <stdint.h>

enum log_level { LOG_ERR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* Where and what to log; @path NULL: stderr. 0 or -errno. */
int log_open(const char *role, const char *path, enum log_level level);
void log_close(void);
void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * A lo_stall_fn (loop.h): a callback held the event loop @ms milliseconds.
 * Held longer than LOG_STALL_MS, every lease, heartbeat and upcall waits.
 */
#define LOG_STALL_MS	1000
void log_stall(void *arg, const char *what, uint64_t ms);

#define log_err(...)	log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...)	log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)	log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...)	log_msg(LOG_DEBUG, __VA_ARGS__)

#endif /* LENTO_LOG_H */
