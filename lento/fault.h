/* SPDX-License-Identifier: MIT */
/*
 * Failures injected by tests, where nothing else can make them happen
 * (a COMMIT that fails after the files it describes were changed).
 *
 * LENTO_TEST_FAULTS names a file. A test arms a failure by writing a
 * point's name into it; the next fault_at() of that point removes the
 * file and returns true, once. Without the variable, as in use,
 * fault_at() is false at the cost of a test of a static variable.
 * Some points stand for a crash: there lento kills itself (SIGKILL), as
 * the kernel would kill it, with its work on the disk half done.
 */
#ifndef LENTO_FAULT_H
#define LENTO_FAULT_H

#include <stdbool.h>

bool fault_at(const char *point);
/*
 * A window instead of a failure: at an armed @point the thread stops for
 * @ms (once; a test hook only) -- long enough, say, for a test that saw
 * the file go to change the cache's tree behind lento's back there.
 * FAULT_HOLD_MS, on the loop's thread, is short of a server's heartbeat
 * timeout.
 */
#define FAULT_HOLD_MS	500
void fault_hold(const char *point, unsigned int ms);
/*
 * True while @point is armed, which it stays until the test disarms it:
 * for a window held open as long as a test needs (the caller waits
 * between looks without holding anything up).
 */
bool fault_armed(const char *point);

#endif /* LENTO_FAULT_H */
