/* SPDX-License-Identifier: MIT */
/*
 * lento's log: one line per event on stderr (or a file), with the time,
 * the level and the role ("server", "client"). A daemon's log is how an
 * operator learns why a connection was closed or a batch refused, so
 * every such decision is logged once, with its reason.
 */
#ifndef LENTO_LOG_H
#define LENTO_LOG_H

enum log_level { LOG_ERR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* Where and what to log; @path NULL: stderr. 0 or -errno. */
int log_open(const char *role, const char *path, enum log_level level);
void log_close(void);
void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_err(...)	log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...)	log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)	log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...)	log_msg(LOG_DEBUG, __VA_ARGS__)

#endif /* LENTO_LOG_H */
