/* The seccomp baseline shared by the confining backends (bubblewrap now,
 * Landlock next): one filter, built once, so that every backend closes the
 * same doors (seccomp-baseline.c says which). */
#ifndef MAELYS_SECCOMP_BASELINE_H
#define MAELYS_SECCOMP_BASELINE_H

#include <stdbool.h>
#include <stddef.h>

/* The filter as BPF bytes (malloc'd). deny_network adds the denial of every
 * socket family but AF_UNIX: with ERRNO (EPERM), or, when `notified` (the
 * backend's sandbox stacks a user-notification filter for the same calls,
 * as bubblewrap's init does), with SECCOMP_RET_TRACE, which that filter
 * outranks and which answers ENOSYS without it (see seccomp-baseline.c).
 * 0 or a negative errno (and *out_error, when it is not NULL and points to
 * NULL, says what failed). */
int maelys__seccomp_baseline_build(bool deny_network, bool notified,
                                   unsigned char** out, size_t* out_len,
                                   char** out_error);

#endif /* MAELYS_SECCOMP_BASELINE_H */
