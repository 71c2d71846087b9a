/*
 * The processes of an execution, found by what they cannot hide: the pid
 * namespace the launcher created (every process of the execution lives in it
 * or in a namespace nested in it), and, for processes whose namespace this
 * process may not read (non-dumpable ones of another user), the marker in
 * their command line.
 */
#ifndef MAELYS_TESTS_TREE_H
#define MAELYS_TESTS_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The inode of the pid namespace `pid` lives in, or 0 when it cannot be
 * read. */
uint64_t tree_pidns(int pid);

/* The inode of the pid namespace that is the parent of the one `pid` lives
 * in, or 0. */
uint64_t tree_parent_pidns(int pid);

/* The processes (other than this one) in the pid namespace `ns` or one
 * nested in it, or, when their namespace cannot be read, whose command line
 * holds `marker` (NULL: none); up to `max` stored in `pids` (may be NULL).
 * Returns how many there are. */
int tree_members(uint64_t ns, const char* marker, int* pids, size_t max);

/* Whether `pid` still runs (exists and is not a zombie awaiting its
 * reaper). */
bool tree_alive(int pid);
/* Whether the kernel is already ending `pid` (PF_EXITING): it runs no code
 * of its own again, only the kernel's release of what it held. */
bool tree_exiting(int pid);
/* "pid N (comm) state S ppid P flags 0x..." from /proc/PID/stat, for a
 * failure message ("exiting" when the kernel is already ending it). */
void tree_describe(int pid, char* out, size_t size);

/* The real uid of `pid`, or -1. */
long tree_uid(int pid);

/* Waits until every pid of `pids` is gone (through pidfds, no polling of
 * /proc), at most `timeout_ms`; returns how many are left. */
int tree_wait_gone(const int* pids, size_t count, int timeout_ms);

#endif
