// SPDX-License-Identifier: MIT
/* Failures injected by tests (fault.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <unistd.h>

#include "fault.h"

bool fault_at(const char *point)
{
	static const char *file;
	static bool looked;
	char armed[64];
	ssize_t n;
	int fd;

	if (!looked) {
		file = getenv("LENTO_TEST_FAULTS");
		looked = true;
	}
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
	if (strcmp(armed, point))
		return false;
	return unlink(file) == 0;	/* once: a race lost is not ours */
}

void fault_hold(const char *point)
{
	struct timespec ts = { FAULT_HOLD_MS / 1000,
			       (FAULT_HOLD_MS % 1000) * 1000000L };

	if (!fault_at(point))
		return;
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}
