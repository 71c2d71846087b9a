/* The terminal relay's inert form of a payload's bytes (invariant 21): raw
 * 8-bit C1 controls and invalid UTF-8 are escaped, valid characters pass,
 * and the result does not depend on where the reads split the stream. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tty-relay.h"

/* The stream `in` fed in pieces of `step` bytes, then ended. */
static char* inert(const char* in, size_t len, size_t step) {
  maelys__tty_inert_t st;
  memset(&st, 0, sizeof st);
  char* out = malloc(MAELYS__TTY_INERT_MAX(len) + 1);
  assert_non_null(out);
  size_t o = 0;
  for (size_t off = 0; off < len; off += step) {
    size_t n = len - off < step ? len - off : step;
    o += maelys__tty_inert(&st, in + off, n, out + o);
  }
  o += maelys__tty_inert(&st, NULL, 0, out + o);
  out[o] = '\0';
  return out;
}

static void expect(const char* in, const char* want) {
  size_t len = strlen(in);
  for (size_t step = 1; step <= len + 1; step++) {
    char* got = inert(in, len, step);
    if (strcmp(got, want) != 0)
      fail_msg("'%s' in pieces of %zu became '%s', not '%s'", in, step, got,
               want);
    free(got);
  }
}

static void test_raw_c1_is_escaped(void** state) {
  (void)state;
  expect("a\x9b"
         "2J\x9d"
         "0;t\x9c",
         "a\\x9b2J\\x9d0;t\\x9c");
}

static void test_encoded_c1_is_escaped(void** state) {
  (void)state;
  expect("u:\xc2\x9b"
         "2J \xc2\x80",
         "u:\\u009b2J \\u0080");
}

static void test_c0_and_del(void** state) {
  (void)state;
  expect("\x1b[2J\r\x7f\tx\n", "\\x1b[2J\\x0d\\x7f\tx\n");
}

static void test_valid_utf8_passes_whole(void** state) {
  (void)state;
  /* é, 日, U+00A0 (0xC2 0xA0 is no control), an emoji (4 bytes). */
  expect("\xc3\xa9 \xe6\x97\xa5 \xc2\xa0 \xf0\x9f\x98\x80",
         "\xc3\xa9 \xe6\x97\xa5 \xc2\xa0 \xf0\x9f\x98\x80");
}

static void test_invalid_utf8_is_escaped(void** state) {
  (void)state;
  /* A cut sequence, a stray continuation, overlong, surrogate, past
   * U+10FFFF, bytes no sequence starts with. */
  expect("\xe6\x97X", "\\xe6\\x97X");
  expect("\xbf", "\\xbf");
  expect("\xc0\xaf \xe0\x80\xaf", "\\xc0\\xaf \\xe0\\x80\\xaf");
  expect("\xed\xa0\x80", "\\xed\\xa0\\x80");
  expect("\xf4\x90\x80\x80 \xff\xf5", "\\xf4\\x90\\x80\\x80 \\xff\\xf5");
  /* Cut short by the end of the stream. */
  expect("end\xe6\x97", "end\\xe6\\x97");
  expect("end\xc2", "end\\xc2");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_raw_c1_is_escaped),
      cmocka_unit_test(test_encoded_c1_is_escaped),
      cmocka_unit_test(test_c0_and_del),
      cmocka_unit_test(test_valid_utf8_passes_whole),
      cmocka_unit_test(test_invalid_utf8_is_escaped),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
