/*
 * The terminal session's output filter (bindings/cli/term-filter.c): every
 * escape sequence but clipboard access (OSC 52) passes unchanged, whatever
 * the reads it arrives in; the modes left set are undone on request.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "term-filter.h"

#define S(lit) lit, sizeof lit - 1

typedef struct text {
  char data[8192];
  size_t len;
} text_t;

/* Feeds `in` cut at `cuts` (ascending offsets), checking each call's bound. */
static void feed_cut(term_filter_t* f, const char* in, size_t n,
                     const size_t* cuts, size_t ncuts, text_t* out) {
  size_t at = 0;
  for (size_t k = 0; k <= ncuts; k++) {
    size_t end = k < ncuts ? cuts[k] : n;
    char buf[8192 + TERM_FILTER_SLACK];
    size_t got = term_filter_feed(f, in + at, end - at, buf);
    assert_true(got <= end - at + TERM_FILTER_SLACK);
    assert_true(out->len + got <= sizeof out->data);
    memcpy(out->data + out->len, buf, got);
    out->len += got;
    at = end;
  }
}

static void filtered(const char* in, size_t n, bool allow, text_t* out) {
  term_filter_t f;
  term_filter_init(&f, allow);
  out->len = 0;
  feed_cut(&f, in, n, NULL, 0, out);
}

/* The output does not depend on how the input was cut: at every single
 * offset, at every pair, and byte by byte. */
static void same_whatever_the_reads(const char* in, size_t n, bool allow) {
  text_t whole, cut;
  filtered(in, n, allow, &whole);
  for (size_t a = 0; a <= n; a++)
    for (size_t b = a; b <= n; b++) {
      size_t cuts[2] = {a, b};
      term_filter_t f;
      term_filter_init(&f, allow);
      cut.len = 0;
      feed_cut(&f, in, n, cuts, 2, &cut);
      if (cut.len != whole.len || memcmp(cut.data, whole.data, cut.len) != 0)
        fail_msg("output differs when cut at %zu and %zu", a, b);
    }
  term_filter_t f;
  term_filter_init(&f, allow);
  cut.len = 0;
  for (size_t i = 0; i < n; i++)
    feed_cut(&f, in + i, 1, NULL, 0, &cut);
  assert_int_equal(cut.len, whole.len);
  assert_memory_equal(cut.data, whole.data, cut.len);
}

static void expect(const char* in, size_t n, const char* want, size_t wn) {
  text_t out;
  filtered(in, n, false, &out);
  if (out.len != wn || memcmp(out.data, want, wn) != 0)
    fail_msg("filtered output differs (%zu bytes, wanted %zu)", out.len, wn);
  same_whatever_the_reads(in, n, false);
}

static void test_passes_everything_but_the_clipboard(void** state) {
  (void)state;
  static const char tui[] =
      "plain text\r\n\x1b[1;31mred\x1b[0m \x1b[2J\x1b[H\x1b]0;title\x07"
      "\x1b]8;;https://example.org\x1b\\link\x1b]8;;\x1b\\"
      "\x1bP1$r0m\x1b\\\x1b(B\x1b"
      "7\x1b"
      "8 \xc2\xa9 \xe2\x80\x9d \xf0\x9f\x92\x9d"
      "\x1b[?1049h\x1b[?1049l\t\x08\x07";
  expect(S(tui), S(tui));
}

static void test_drops_clipboard_access(void** state) {
  (void)state;
  expect(S("A\x1b]52;c;SGVsbG8=\x07"
           "B"),
         S("AB"));
  expect(S("A\x1b]52;c;?\x1b\\B"), S("AB")); /* a read */
  expect(S("A\x1b]052;c;SGk=\x07"
           "B"),
         S("AB")); /* leading 0 */
  expect(S("A\x1b]52\x07"
           "B"),
         S("AB")); /* no params */
  expect(S("A\xc2\x9d"
           "52;p;SGk=\xc2\x9c"
           "B"),
         S("AB")); /* UTF-8 C1 */
  expect(S("A\x9d"
           "52;p;SGk=\x9c"
           "B"),
         S("AB")); /* 8-bit C1 */
  /* Cancelled: CAN ends it, and is dropped with it. */
  expect(S("A\x1b]52;c;SGk=\x18"
           "B"),
         S("AB"));
  /* An ESC ends it and starts the next escape, which passes. */
  expect(S("A\x1b]52;c;SGk=\x1b[1mB"), S("A\x1b[1mB"));
  /* Inside another string: tmux's and screen's passthrough. */
  text_t out;
  static const char tmux[] = "\x1bPtmux;\x1b\x1b]52;c;SGk=\x07\x1b\\";
  filtered(S(tmux), false, &out);
  out.data[out.len] = '\0';
  assert_null(memmem(out.data, out.len, "52;", 3));
  same_whatever_the_reads(S(tmux), false);
  static const char screen[] = "\x1bP\x1b]52;c;SGk=\x07\x1b\\";
  filtered(S(screen), false, &out);
  assert_null(memmem(out.data, out.len, "52;", 3));
  /* Behind a C1 CSI or within a DCS as UTF-8 C1. */
  static const char c1[] = "\x1b[\xc2\x9d"
                           "52;c;SGk=\x07\x1bP\xc2\x9d"
                           "52;c;x\x07";
  filtered(S(c1), false, &out);
  assert_null(memmem(out.data, out.len, "52;", 3));
  same_whatever_the_reads(S(c1), false);
  /* Other numbers that start like it pass. */
  expect(S("\x1b]521;x\x07\x1b]5;x\x07"), S("\x1b]521;x\x07\x1b]5;x\x07"));
}

static void test_clipboard_allowed(void** state) {
  (void)state;
  static const char in[] = "A\x1b]52;c;SGVsbG8=\x07"
                           "B";
  text_t out;
  filtered(S(in), true, &out);
  assert_int_equal(out.len, sizeof in - 1);
  assert_memory_equal(out.data, in, out.len);
  same_whatever_the_reads(S(in), true);
}

static size_t resets_of(const char* in, size_t n, char* out) {
  term_filter_t f;
  term_filter_init(&f, false);
  char buf[4096 + TERM_FILTER_SLACK];
  term_filter_feed(&f, in, n, buf);
  size_t len = term_filter_resets(&f, out);
  out[len] = '\0';
  return len;
}

static void test_modes_left_set_are_undone(void** state) {
  (void)state;
  char r[TERM_FILTER_RESETS_MAX + 1];
  resets_of(S("\x1b[?1049h\x1b[?25l\x1b[?1000;1006h\x1b[?2004h\x1b[?1004h"
              "\x1b[?1h\x1b=\x1b[>1u\x1b[>4;2m\x1b[31m"),
            r);
  for (const char *
           want[] = {"\x1b[?1049l", "\x1b[?25h", "\x1b[?1000l", "\x1b[?1006l",
                     "\x1b[?2004l", "\x1b[?1004l", "\x1b[?1l", "\x1b>",
                     "\x1b[<1u", "\x1b[>4;0m", "\x1b[0m", NULL},
          **w = want;
       *w != NULL; w++)
    if (strstr(r, *w) == NULL)
      fail_msg("a reset is missing");
  /* Leaving the alternate screen last, after the input modes. */
  assert_true(strstr(r, "\x1b[?1000l") < strstr(r, "\x1b[?1049l"));
  /* A payload that undid them itself needs nothing. */
  assert_int_equal(resets_of(S("\x1b[?1049h\x1b[?25l\x1b[?1000h\x1b[?2004h"
                               "\x1b[>1u\x1b[31m\x1b[?1049l\x1b[?25h"
                               "\x1b[?1000l\x1b[?2004l\x1b[<u\x1b[m"),
                             r),
                   0);
  /* RIS resets the terminal, and with it every mode. */
  assert_int_equal(resets_of(S("\x1b[?1049h\x1b"
                               "c"),
                             r),
                   0);
  /* An unfinished sequence is cancelled first (it would swallow what
   * follows). */
  assert_true(resets_of(S("\x1b]0;half a title"), r) >= 1);
  assert_int_equal(r[0], 0x18);
  assert_true(resets_of(S("\x1b[?1049h\x1b[1;2"), r) > 1);
  assert_int_equal(r[0], 0x18);
  assert_non_null(strstr(r, "\x1b[?1049l"));
}

/* Random bytes, random reads: the bound holds and the output is the same. */
static void test_random_input(void** state) {
  (void)state;
  uint32_t seed = 12345;
  static const unsigned char alphabet[] = {0x1b, ']',  '[',  '5',  '2',  ';',
                                           0x07, '\\', 0xc2, 0x9d, 0x9c, 'P',
                                           0x18, 'a',  '?',  'h',  0xe2, 0x80};
  for (int round = 0; round < 300; round++) {
    char in[512];
    size_t n = 1 + round % 500;
    for (size_t i = 0; i < n; i++) {
      seed = seed * 1103515245 + 12345;
      in[i] = (char)alphabet[(seed >> 16) % sizeof alphabet];
    }
    text_t whole, cut;
    filtered(in, n, false, &whole);
    assert_true(whole.len <= n + TERM_FILTER_SLACK);
    term_filter_t f;
    term_filter_init(&f, false);
    cut.len = 0;
    for (size_t at = 0; at < n;) {
      seed = seed * 1103515245 + 12345;
      size_t k = 1 + (seed >> 16) % 7;
      if (k > n - at)
        k = n - at;
      feed_cut(&f, in + at, k, NULL, 0, &cut);
      at += k;
    }
    assert_int_equal(cut.len, whole.len);
    assert_memory_equal(cut.data, whole.data, cut.len);
    char r[TERM_FILTER_RESETS_MAX];
    assert_true(term_filter_resets(&f, r) < TERM_FILTER_RESETS_MAX);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_passes_everything_but_the_clipboard),
      cmocka_unit_test(test_drops_clipboard_access),
      cmocka_unit_test(test_clipboard_allowed),
      cmocka_unit_test(test_modes_left_set_are_undone),
      cmocka_unit_test(test_random_input),
  };
  return cmocka_run_group_tests_name("term-filter", tests, NULL, NULL);
}
