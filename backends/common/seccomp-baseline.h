/* The seccomp baseline shared by the confining backends (bubblewrap now,
 * Landlock next): one filter, built once, so that every backend closes the
 * same doors (seccomp-baseline.c says which). */
#ifndef MAELYS_SECCOMP_BASELINE_H
#define MAELYS_SECCOMP_BASELINE_H

#include <stdbool.h>
#include <stddef.h>

/* The filter as BPF bytes (malloc'd): a copy of the one compiled when this
 * library was built (seccomp-baseline-gen.c), which libseccomp's compilation
 * of ~600 rules made the largest cost of a command-line run (9 ms of every
 * `maelys-warden run` on a 2-core VM). deny_network adds the denial of every
 * socket family but AF_UNIX: with ERRNO (EPERM), or, when `notified` (the
 * backend's sandbox stacks a user-notification filter for the same calls,
 * as bubblewrap's init does), with SECCOMP_RET_TRACE, which that filter
 * outranks and which answers ENOSYS without it (see seccomp-baseline.c).
 * 0 or a negative errno (and *out_error, when it is not NULL and points to
 * NULL, says what failed). */
int maelys__seccomp_baseline_build(bool deny_network, bool notified,
                                   unsigned char** out, size_t* out_len,
                                   char** out_error);

/* The same filter compiled now by libseccomp (its rules are in
 * seccomp-baseline.c): what the build embeds, and what the tests compare
 * the embedded copy with. */
int maelys__seccomp_baseline_compile(bool deny_network, bool notified,
                                     unsigned char** out, size_t* out_len,
                                     char** out_error);

/* The embedded copies, [deny_network][notified] (the generated
 * seccomp-baseline-data.c). */
extern const unsigned char* const maelys__seccomp_baseline_data[2][2];
extern const size_t maelys__seccomp_baseline_size[2][2];

#endif /* MAELYS_SECCOMP_BASELINE_H */
