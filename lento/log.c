// SPDX-License-Identifier: MIT
/* lento's log (see log.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "log.h"

static FILE *log_file;
static char log_role[16] = "lento";
static enum log_level log_max = LOG_INFO;

int log_open(const char *role, const char *path, enum log_level level)
{
	snprintf(log_role, sizeof(log_role), "%s", role);
	log_max = level;
	if (!path) {
		log_file = NULL;
		return 0;
	}
	log_file = fopen(path, "ae");
	if (!log_file)
		return -errno;
	setvbuf(log_file, NULL, _IOLBF, 0);
	return 0;
}

void log_close(void)
{
	if (log_file)
		fclose(log_file);
	log_file = NULL;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warning", "info",
					     "debug" };
	FILE *f = log_file ? log_file : stderr;
	struct timespec ts;
	struct tm tm;
	char when[32];
	va_list ap;

	if (level > log_max)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	flockfile(f);
	fprintf(f, "%s.%03ldZ lento %s %s: ", when, ts.tv_nsec / 1000000,
		log_role, names[level]);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	funlockfile(f);
}

void log_stall(void *arg, const char *what, uint64_t ms)
{
	(void)arg;
	log_warn("the event loop was held %" PRIu64 " ms by a %s callback",
		 ms, what);
}
