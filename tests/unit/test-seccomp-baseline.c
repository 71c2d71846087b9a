/*
 * The seccomp baseline the library embeds (backends/common/seccomp-baseline.h)
 * is byte for byte what libseccomp compiles from the rules in
 * seccomp-baseline.c, for each of its four variants: a rule changed without
 * a rebuild of the copy, or a copy from another libseccomp, is caught here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "seccomp-baseline.h"

static void test_embedded_is_what_libseccomp_compiles(void** state) {
  (void)state;
  for (int deny = 0; deny < 2; deny++)
    for (int notified = 0; notified < 2; notified++) {
      unsigned char *compiled = NULL, *embedded = NULL;
      size_t compiled_len = 0, embedded_len = 0;
      char* err = NULL;
      assert_int_equal(maelys__seccomp_baseline_compile(
                           deny, notified, &compiled, &compiled_len, &err),
                       0);
      assert_int_equal(maelys__seccomp_baseline_build(deny, notified, &embedded,
                                                      &embedded_len, &err),
                       0);
      assert_null(err);
      /* At least the 600 rules' worth of instructions (8 bytes each). */
      assert_true(compiled_len > 600 * 8);
      assert_int_equal(embedded_len, compiled_len);
      assert_memory_equal(embedded, compiled, compiled_len);
      free(compiled);
      free(embedded);
    }
}

static void test_variants_differ(void** state) {
  (void)state;
  /* Network denied adds rules; notified changes their action. */
  assert_true(maelys__seccomp_baseline_size[1][0] >
              maelys__seccomp_baseline_size[0][0]);
  assert_int_equal(maelys__seccomp_baseline_size[0][0],
                   maelys__seccomp_baseline_size[0][1]);
  assert_memory_equal(maelys__seccomp_baseline_data[0][0],
                      maelys__seccomp_baseline_data[0][1],
                      maelys__seccomp_baseline_size[0][0]);
  assert_true(maelys__seccomp_baseline_size[1][1] !=
                  maelys__seccomp_baseline_size[1][0] ||
              memcmp(maelys__seccomp_baseline_data[1][1],
                     maelys__seccomp_baseline_data[1][0],
                     maelys__seccomp_baseline_size[1][0]) != 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_embedded_is_what_libseccomp_compiles),
      cmocka_unit_test(test_variants_differ),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
