/*
 * Host processes found by a marker in their command line: how the tests and
 * the benchmarks see what a sandbox left behind.
 */
#ifndef MAELYS_TESTS_MARKED_H
#define MAELYS_TESTS_MARKED_H

#include <stddef.h>

/* The pids (other than this process) whose command line contains `marker`:
 * up to `max` stored in `pids` (which may be NULL); returns how many there
 * are. */
int marked_pids(const char* marker, int* pids, size_t max);

#endif
