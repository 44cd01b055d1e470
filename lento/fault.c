// SPDX-License-Identifier: MIT
/* Failures injected by tests (fault.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <unistd.h>

#include "fault.h"

static const char *file;
static pthread_once_t looked = PTHREAD_ONCE_INIT;

static void look(void)
{
	file = getenv("LENTO_TEST_FAULTS");
}

/* From any thread: the worker's jobs have points too. */
bool fault_armed(const char *point)
{
	char armed[64];
	ssize_t n;
	int fd;

	pthread_once(&looked, look);
	if (!file)
		return false;
	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, armed, sizeof(armed) - 1);
	close(fd);
	if (n <= 0)
		return false;
	armed[n] = 0;
	armed[strcspn(armed, "\n")] = 0;
	return !strcmp(armed, point);
}

bool fault_at(const char *point)
{
	/* Once: a race lost to another taker is not ours. */
	return fault_armed(point) && unlink(file) == 0;
}

void fault_hold(const char *point, unsigned int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	if (!fault_at(point))
		return;
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}
