/* SPDX-License-Identifier: MIT */
/*
 * Failures injected by tests, where nothing else can make them happen
 * (a COMMIT that fails after the files it describes were changed).
 *
 * LENTO_TEST_FAULTS names a file. A test arms a failure by writing a
 * point's name into it; the next fault_at() of that point removes the
 * file and returns true, once. Without the variable, as in use,
 * fault_at() is false at the cost of a test of a static variable.
 */
#ifndef LENTO_FAULT_H
#define LENTO_FAULT_H

#include <stdbool.h>

bool fault_at(const char *point);

#endif /* LENTO_FAULT_H */
