/*
 * The bubblewrap probe's verdict, without forking: canned reports, as the
 * helper prints them, through maelys__bwrap_probe_verdict(). Each row of the
 * probe's table is proved by a healthy report and refused, with its own
 * reason, by a report that breaks it.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bwrap-internal.h"

#define ALL_BUT_MEDIATED                                                       \
  (MAELYS_BACKEND_CAP_ALL & ~(MAELYS_BACKEND_CAP_NETWORK_MEDIATED_FD4 |        \
                              MAELYS_BACKEND_CAP_NETWORK_MEDIATED_EGRESS))

/* What a healthy probe prints, line by line, in the helper's order. */
static const char main_report[] =
    "uid=0\neuid=0\npid=2\ncaps=none\n"
    "seccomp=2\n"
    "inet=errno:1\nunix=ok\ninterfaces=1\nonly_loopback=yes\n"
    "userns=errno:1\n"
    "write=errno:30\n" /* / */
    "write=ok\n"       /* the writable bind */
    "write=errno:30\n" /* the read-only bind */
    "read=ok\n"        /* a file in it */
    "read=errno:13\n"  /* the denied file */
    "fill=65536:28\n"
    "tasks=13:11\n"
    "tree=ready\n";
static const char ephemeral_report[] = "write=ok\nfill=131072:28\n";

typedef struct probe {
  char out[3][2048];
  maelys_backend_probe_run_t runs[MAELYS__BWRAP_PROBE_RUNS];
  maelys__bwrap_verdict_t verdict;
} probe_t;

/* A healthy set of results: every run started, the main run saw its
 * marker and its stdout ended, the memory run was killed by the ceiling. */
static probe_t* healthy(void) {
  probe_t* p = calloc(1, sizeof *p);
  assert_non_null(p);
  snprintf(p->out[0], sizeof p->out[0], "%s", main_report);
  snprintf(p->out[1], sizeof p->out[1], "%s", ephemeral_report);
  snprintf(p->out[2], sizeof p->out[2], "%s", "");
  for (int i = 0; i < MAELYS__BWRAP_PROBE_RUNS; i++) {
    maelys_backend_probe_run_t* r = &p->runs[i];
    maelys_backend_probe_run_init(r, NULL, NULL);
    r->spawned = 1;
    r->output = p->out[i];
    r->output_len = strlen(p->out[i]);
    r->output_eof = 1;
    r->outcome = MAELYS_EXEC_OUTCOME_EXITED;
    r->root_uid = -1;
    r->root_has_caps = -1;
  }
  p->runs[0].marker_seen = 1;
  p->runs[0].outcome = MAELYS_EXEC_OUTCOME_SIGNALED;
  p->runs[0].term_signal = SIGKILL;
  p->runs[0].root_uid = 1879048193;
  p->runs[0].root_has_caps = 0;
  p->runs[2].outcome = MAELYS_EXEC_OUTCOME_SIGNALED;
  p->runs[2].term_signal = SIGKILL;
  return p;
}

static const maelys__bwrap_verdict_t* judge(probe_t* p, uint64_t assumed) {
  const maelys_backend_probe_run_t* runs[MAELYS__BWRAP_PROBE_RUNS];
  for (int i = 0; i < MAELYS__BWRAP_PROBE_RUNS; i++)
    runs[i] = &p->runs[i];
  maelys__bwrap_probe_verdict(runs, assumed, &p->verdict);
  return &p->verdict;
}

/* Replaces the first occurrence of `line` (a whole line) in run `run`. */
static void edit(probe_t* p, int run, const char* line, const char* with) {
  char* out = p->out[run];
  char* at = strstr(out, line);
  assert_non_null(at);
  char rest[2048];
  snprintf(rest, sizeof rest, "%s", at + strlen(line));
  snprintf(at, sizeof p->out[run] - (size_t)(at - out), "%s%s", with, rest);
  p->runs[run].output_len = strlen(out);
}

/* Exactly `bits` are unproved among those the healthy report proves, each
 * with a reason that mentions `needle`. */
static void expect_missing(const maelys__bwrap_verdict_t* v, uint64_t bits,
                           const char* needle) {
  if ((v->proved & ALL_BUT_MEDIATED) != (ALL_BUT_MEDIATED & ~bits))
    fail_msg("proved 0x%llx, expected 0x%llx", (unsigned long long)v->proved,
             (unsigned long long)(ALL_BUT_MEDIATED & ~bits));
  for (int b = 0; b < 64; b++) {
    if (!(bits & (UINT64_C(1) << b)))
      continue;
    const char* why = v->reasons[b];
    if (why == NULL || strstr(why, needle) == NULL)
      fail_msg("bit %d: reason '%s' does not mention '%s'", b, why ? why : "",
               needle);
  }
}

static void test_healthy_report_proves_everything(void** state) {
  (void)state;
  probe_t* p = healthy();
  const maelys__bwrap_verdict_t* v = judge(p, MAELYS_BACKEND_CAP_ALL);
  assert_int_equal(v->proved, ALL_BUT_MEDIATED);
  for (int b = 0; b < 64; b++) {
    uint64_t bit = UINT64_C(1) << b;
    if (bit == MAELYS_BACKEND_CAP_NETWORK_MEDIATED_FD4 ||
        bit == MAELYS_BACKEND_CAP_NETWORK_MEDIATED_EGRESS)
      assert_non_null(strstr(v->reasons[b], "no mediated network frontend"));
    else
      assert_null(v->reasons[b]);
  }
  free(p);
}

/* The argv comes from the same steps the verdict reads: the order of the
 * "write" and "read" checks is the order of their lines. */
static void test_argv_from_the_steps(void** state) {
  (void)state;
  const char* paths[MAELYS__BWRAP_PROBE_PATH_COUNT] = {
      [MAELYS__BWRAP_PROBE_PATH_RW] = "/p/rw",
      [MAELYS__BWRAP_PROBE_PATH_RO] = "/p/ro",
      [MAELYS__BWRAP_PROBE_PATH_RO_FILE] = "/p/ro/file",
      [MAELYS__BWRAP_PROBE_PATH_SECRET] = "/p/ro/secret",
  };
  static const char* const main_argv[] = {
      "helper",       "probe", "identity", "seccomp",    "net",
      "userns",       "write", "/",        "write",      "/p/rw",
      "write",        "/p/ro", "read",     "/p/ro/file", "read",
      "/p/ro/secret", "fill",  "/tmp",     "65536",      "tasks",
      "tree",         NULL};
  static const char* const ephemeral_argv[] = {
      "helper", "probe", "write", "/", "fill", "/", "131072", NULL};
  static const char* const memory_argv[] = {"helper", "probe", "alloc", "128",
                                            NULL};
  const char* const* expected[] = {main_argv, ephemeral_argv, memory_argv};
  for (int run = 0; run < MAELYS__BWRAP_PROBE_RUNS; run++) {
    const char* argv[32];
    size_t n = maelys__bwrap_probe_argv(run, paths, argv, 32);
    assert_true(n > 0);
    for (size_t i = 0; i <= n; i++) {
      if (expected[run][i] == NULL || argv[i] == NULL)
        assert_true(expected[run][i] == NULL && argv[i] == NULL);
      else
        assert_string_equal(argv[i], expected[run][i]);
    }
  }
  const char* small[4];
  assert_int_equal(maelys__bwrap_probe_argv(0, paths, small, 4), 0);
}

static void test_namespaces_and_seccomp(void** state) {
  (void)state;
  probe_t* p = healthy();
  edit(p, 0, "pid=2\n", "pid=1\n");
  expect_missing(judge(p, MAELYS_BACKEND_CAP_ALL),
                 MAELYS_BACKEND_CAP_PID_NAMESPACE |
                     MAELYS_BACKEND_CAP_PROCESS_CONFINEMENT,
                 "pid namespace");
  assert_non_null(strstr(
      p->verdict.reasons[__builtin_ctzll(MAELYS_BACKEND_CAP_PID_NAMESPACE)],
      "not in a new pid namespace"));
  free(p);

  /* Without seccomp: NONE keeps only its namespace half (invariant 9), and
   * confinement needs both. */
  p = healthy();
  edit(p, 0, "seccomp=2\n", "seccomp=0\n");
  expect_missing(judge(p, MAELYS_BACKEND_CAP_ALL),
                 MAELYS_BACKEND_CAP_SECCOMP | MAELYS_BACKEND_CAP_NETWORK_NONE |
                     MAELYS_BACKEND_CAP_PROCESS_CONFINEMENT,
                 "");
  assert_non_null(strstr(
      p->verdict.reasons[__builtin_ctzll(MAELYS_BACKEND_CAP_NETWORK_NONE)],
      "only the network namespace holds"));
  free(p);

  p = healthy();
  edit(p, 0, "only_loopback=yes\n", "only_loopback=no\n");
  expect_missing(judge(p, MAELYS_BACKEND_CAP_ALL),
                 MAELYS_BACKEND_CAP_NETWORK_NAMESPACE |
                     MAELYS_BACKEND_CAP_NETWORK_NONE,
                 "other than loopback");
  free(p);

  p = healthy();
  edit(p, 0, "inet=errno:1\n", "inet=ok\n");
  expect_missing(judge(p, MAELYS_BACKEND_CAP_ALL),
                 MAELYS_BACKEND_CAP_NETWORK_NONE, "AF_INET");
  free(p);
}

/* Each filesystem line is the one its step printed, by its place among the
 * lines with the same key; a value is a whole line, not a prefix. */
static void test_filesystem_lines(void** state) {
  (void)state;
  probe_t* p = healthy();
  edit(p, 0, "write=ok\n", "write=errno:13\n");
  expect_missing(judge(p, MAELYS_BACKEND_CAP_ALL),
                 MAELYS_BACKEND_CAP_FILESYSTEM_WRITE, "writable bind");
  free(p);

  p = healthy();
  edit(p, 0, "write=errno:30\n", "write=errno:300\n");
  expect_missing(judge(p, MAELYS_BACKEND_CAP_ALL),
                 MAELYS_BACKEND_CAP_ROOT_READONLY, "EROFS");
  free(p);

  /* The file in the read-only bind could not be read... */
  p = healthy();
  edit(p, 0, "read=ok\n", "read=errno:2\n");
  expect_missing(judge(p, MAELYS_BACKEND_CAP_ALL),
                 MAELYS_BACKEND_CAP_FILESYSTEM_READ, "read-only bind");
  free(p);

  /* ...or the third write, into that bind, succeeded. */
  p = healthy();
  edit(p, 0, "write=ok\nwrite=errno:30\n", "write=ok\nwrite=ok\n");
  expect_missing(judge(p, MAELYS_BACKEND_CAP_ALL),
                 MAELYS_BACKEND_CAP_FILESYSTEM_READ, "read-only bind");
  free(p);

  p = healthy();
  edit(p, 0, "read=errno:13\n", "read=ok\n");
  expect_missing(judge(p, MAELYS_BACKEND_CAP_ALL),
                 MAELYS_BACKEND_CAP_FILESYSTEM_DENY, "denied file");
  free(p);

  /* A missing line is a failure, never a pass. */
  p = healthy();
  edit(p, 0, "read=errno:13\n", "");
  expect_missing(judge(p, MAELYS_BACKEND_CAP_ALL),
                 MAELYS_BACKEND_CAP_FILESYSTEM_DENY, "denied file");
  free(p);
}

static void test_ceilings(void** state) {
  (void)state;
  probe_t* p = healthy();
  edit(p, 0, "fill=65536:28\n", "fill=131072:0\n");
  expect_missing(judge(p, MAELYS_BACKEND_CAP_ALL),
                 MAELYS_BACKEND_CAP_TMPFS_SIZE, "64 KiB");
  free(p);

  p = healthy();
  edit(p, 0, "tasks=13:11\n", "tasks=16:11\n");
  expect_missing(judge(p, MAELYS_BACKEND_CAP_ALL),
                 MAELYS_BACKEND_CAP_LIMIT_TASKS, "16 tasks");
  free(p);

  p = healthy();
  edit(p, 0, "tasks=13:11\n", "tasks=13:12\n");
  expect_missing(judge(p, MAELYS_BACKEND_CAP_ALL),
                 MAELYS_BACKEND_CAP_LIMIT_TASKS, "16 tasks");
  free(p);

  /* The memory run finished its allocation: no ceiling. */
  p = healthy();
  snprintf(p->out[2], sizeof p->out[2], "alloc=done:128\n");
  p->runs[2].outcome = MAELYS_EXEC_OUTCOME_EXITED;
  p->runs[2].term_signal = 0;
  expect_missing(judge(p, MAELYS_BACKEND_CAP_ALL),
                 MAELYS_BACKEND_CAP_LIMIT_MEMORY, "touched 128 MiB");
  free(p);

  p = healthy();
  p->runs[2].spawned = 0;
  p->runs[2].output = NULL;
  p->runs[2].spawn_error = "no memory controller";
  expect_missing(judge(p, MAELYS_BACKEND_CAP_ALL),
                 MAELYS_BACKEND_CAP_LIMIT_MEMORY,
                 "memory: unbounded (no memory controller)");
  free(p);

  p = healthy();
  p->runs[2].outcome = MAELYS_EXEC_OUTCOME_EXITED;
  p->runs[2].term_signal = 0;
  expect_missing(judge(p, MAELYS_BACKEND_CAP_ALL),
                 MAELYS_BACKEND_CAP_LIMIT_MEMORY, "ended without its report");
  free(p);
}

static void test_tree_identity_and_userns(void** state) {
  (void)state;
  probe_t* p = healthy();
  p->runs[0].output_eof = 0;
  expect_missing(judge(p, MAELYS_BACKEND_CAP_ALL),
                 MAELYS_BACKEND_CAP_PROCESS_TREE, "double-forked");
  free(p);

  /* A run that never reached the point where the tree is tested (a loaded
   * host timed it out, or it ended early) says so: it does not claim that a
   * descendant outlived anything. */
  int tree = __builtin_ctzll(MAELYS_BACKEND_CAP_PROCESS_TREE);
  p = healthy();
  p->runs[0].marker_seen = 0;
  p->runs[0].timed_out = 1;
  p->runs[0].output_eof = 0;
  const char* why = judge(p, MAELYS_BACKEND_CAP_ALL)->reasons[tree];
  assert_non_null(why);
  assert_non_null(
      strstr(why, "ended without its report (timed out after 10000 ms"));
  assert_null(strstr(why, "double-forked"));
  free(p);

  p = healthy();
  p->runs[0].marker_seen = 0;
  why = judge(p, MAELYS_BACKEND_CAP_ALL)->reasons[tree];
  assert_non_null(why);
  assert_non_null(strstr(why, "ended without its report (no output)"));
  free(p);

  p = healthy();
  edit(p, 0, "caps=none\n", "caps=some\n");
  expect_missing(judge(p, MAELYS_BACKEND_CAP_ALL),
                 MAELYS_BACKEND_CAP_UNPRIVILEGED, "payload held a capability");
  free(p);

  p = healthy();
  p->runs[0].root_uid = 0;
  expect_missing(judge(p, MAELYS_BACKEND_CAP_ALL),
                 MAELYS_BACKEND_CAP_UNPRIVILEGED, "host uid 0");
  free(p);

  p = healthy();
  edit(p, 0, "userns=errno:1\n", "userns=ok\n");
  expect_missing(judge(p, MAELYS_BACKEND_CAP_ALL),
                 MAELYS_BACKEND_CAP_DISABLE_USERNS, "could create a user");
  free(p);

  /* Runs prepared without --disable-userns prove nothing about it. */
  p = healthy();
  judge(p, MAELYS_BACKEND_CAP_ALL & ~MAELYS_BACKEND_CAP_DISABLE_USERNS);
  assert_false(p->verdict.proved & MAELYS_BACKEND_CAP_DISABLE_USERNS);
  free(p);
}

static void test_ephemeral_root(void** state) {
  (void)state;
  probe_t* p = healthy();
  edit(p, 1, "fill=131072:28\n", "fill=262144:0\n");
  expect_missing(judge(p, MAELYS_BACKEND_CAP_ALL),
                 MAELYS_BACKEND_CAP_ROOT_EPHEMERAL_WRITE, "scratch size");
  free(p);

  p = healthy();
  p->runs[1].spawned = 0;
  p->runs[1].output = NULL;
  p->runs[1].spawn_error = "bwrap: tmpfs";
  expect_missing(judge(p, MAELYS_BACKEND_CAP_ALL),
                 MAELYS_BACKEND_CAP_ROOT_EPHEMERAL_WRITE,
                 "could not start: bwrap: tmpfs");
  free(p);

  p = healthy();
  snprintf(p->out[1], sizeof p->out[1], "%s", "");
  p->runs[1].outcome = MAELYS_EXEC_OUTCOME_LAUNCH_FAILED;
  snprintf(p->runs[1].message, sizeof p->runs[1].message, "%s",
           "no overlay here");
  expect_missing(judge(p, MAELYS_BACKEND_CAP_ALL),
                 MAELYS_BACKEND_CAP_ROOT_EPHEMERAL_WRITE,
                 "failed to set up: no overlay here");
  free(p);
}

/* A main run that never reached its marker proves nothing of its own. */
static void test_main_run_without_report(void** state) {
  (void)state;
  probe_t* p = healthy();
  p->runs[0].marker_seen = 0;
  p->runs[0].timed_out = 1;
  judge(p, MAELYS_BACKEND_CAP_ALL);
  assert_false(p->verdict.proved & (MAELYS_BACKEND_CAP_USER_NAMESPACE |
                                    MAELYS_BACKEND_CAP_PROCESS_TREE));
  assert_non_null(strstr(
      p->verdict.reasons[__builtin_ctzll(MAELYS_BACKEND_CAP_USER_NAMESPACE)],
      "ended without its report (timed out after"));
  free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_healthy_report_proves_everything),
      cmocka_unit_test(test_argv_from_the_steps),
      cmocka_unit_test(test_namespaces_and_seccomp),
      cmocka_unit_test(test_filesystem_lines),
      cmocka_unit_test(test_ceilings),
      cmocka_unit_test(test_tree_identity_and_userns),
      cmocka_unit_test(test_ephemeral_root),
      cmocka_unit_test(test_main_run_without_report),
  };
  return cmocka_run_group_tests_name("bwrap-probe", tests, NULL, NULL);
}
