/*
 * The seccomp baseline as the build compiled it (see seccomp-baseline.h):
 * the rules and their reasons are in seccomp-baseline.c, the generator in
 * seccomp-baseline-gen.c, and test-seccomp-baseline checks that the copy
 * is byte for byte what libseccomp compiles from those rules.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "seccomp-baseline.h"

int maelys__seccomp_baseline_build(bool deny_network, bool notified,
                                   unsigned char** out, size_t* out_len,
                                   char** out_error) {
  size_t n = maelys__seccomp_baseline_size[deny_network][notified];
  *out = malloc(n);
  *out_len = 0;
  if (*out == NULL) {
    if (out_error != NULL && *out_error == NULL)
      *out_error = strdup("building the seccomp filter: out of memory");
    return -ENOMEM;
  }
  memcpy(*out, maelys__seccomp_baseline_data[deny_network][notified], n);
  *out_len = n;
  return 0;
}
