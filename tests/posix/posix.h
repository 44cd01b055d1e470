/*
 * The POSIX behaviour suite: shared declarations.
 *
 * Every case is a function run in a child process of its own, with its
 * working directory set to a fresh, empty directory on the file system
 * under test. A check that fails prints where and why and ends the case.
 */
#ifndef POSIX_H
#define POSIX_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

struct posix_env {
	bool presto;		/* the file system under test is presto */
	const char *dir;	/* this case's directory (absolute) */
	const char *lower;	/* with presto: the same directory in the lower */
	const char *root;	/* with presto: the mount's root */
	const char *lower_root;	/* with presto: the lower of the mount's root */
};

extern struct posix_env env;

#define CASE_PRESTO_ONLY 1

struct posix_case {
	const char *name;
	void (*fn)(void);
	unsigned int flags;
};

/* Each file of cases ends with a table of them, NULL-terminated. */
extern const struct posix_case ns_cases[];
extern const struct posix_case data_cases[];
extern const struct posix_case presto_cases[];

void posix_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));

/* CHECK(cond): cond must hold. */
#define CHECK(cond)							\
	do {								\
		if (!(cond))						\
			posix_fail(__FILE__, __LINE__, "%s (errno %s)",	\
				   #cond, strerrorname_np(errno) ?: "0"); \
	} while (0)

/* CHECK_OK(call): the call must return >= 0. Evaluates to its result. */
#define CHECK_OK(call)							\
	({								\
		long _r = (long)(call);					\
		if (_r < 0)						\
			posix_fail(__FILE__, __LINE__, "%s failed: %s",	\
				   #call, strerrorname_np(errno) ?: "?"); \
		_r;							\
	})

/* CHECK_ERR(call, E): the call must fail (return < 0) with errno E. */
#define CHECK_ERR(call, e)						\
	do {								\
		long _r;						\
		errno = 0;						\
		_r = (long)(call);					\
		if (_r >= 0 || errno != (e))				\
			posix_fail(__FILE__, __LINE__,			\
				   "%s: returned %ld errno %s, expected %s", \
				   #call, _r,				\
				   strerrorname_np(errno) ?: "0",	\
				   strerrorname_np(e));			\
	} while (0)

/* CHECK_EQ(a, b): two integers must be equal. */
#define CHECK_EQ(a, b)							\
	do {								\
		long long _a = (long long)(a), _b = (long long)(b);	\
		if (_a != _b)						\
			posix_fail(__FILE__, __LINE__,			\
				   "%s == %s: %lld != %lld", #a, #b, _a, _b); \
	} while (0)

/*
 * Run fn(arg) in a child as uid/gid (no supplementary groups); returns
 * true when every check in it passed.
 */
bool as_user(uid_t uid, gid_t gid, void (*fn)(void *), void *arg);

/* Small helpers every case file uses. */
void write_file(const char *path, const char *data, size_t len, mode_t mode);
size_t read_file(const char *path, char *buf, size_t size);
void path_in(char *buf, size_t size, const char *base, const char *name);

#endif
