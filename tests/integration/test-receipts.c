/*
 * Receipt evidence: signatures over the exact bytes, chains in the order
 * executions end, closing records, and the verifier naming the first file
 * that fails (a modified byte, whitespace included; a removed receipt; a
 * dropped tail; another key).
 */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define ARGS(...) ((const char* const[]){__VA_ARGS__, NULL})

static const unsigned char seed[MAELYS_EXECUTOR_RECEIPT_SEED_BYTES] = {
    1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
    17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};

static maelys_executor_plan_t* plan_posix(void) {
  maelys_executor_plan_t* plan = NULL;
  assert_int_equal(maelys_executor_plan_create(&plan, NULL), 0);
  assert_int_equal(maelys_executor_plan_set_network(
                       plan, MAELYS_EXECUTOR_NETWORK_INHERIT, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_seal(plan, NULL), 0);
  return plan;
}

/* Runs the fixture (exit `code`) into `dir` on chain `chain`; returns the
 * receipt's path (caller frees). */
static char* run_one(harness_t* h, const maelys_executor_plan_t* plan,
                     const char* dir, const char* chain, const char* code,
                     const char* context) {
  maelys_execution_request_t* req =
      request_fixture("posix", ARGS("exit", code));
  assert_int_equal(maelys_execution_request_set_receipt_dir(req, dir, NULL), 0);
  if (chain != NULL)
    assert_int_equal(
        maelys_execution_request_set_receipt_chain(req, chain, NULL), 0);
  if (context != NULL)
    assert_int_equal(
        maelys_execution_request_set_receipt_context(req, context, NULL), 0);
  maelys_execution_t* e = NULL;
  char* err = NULL;
  if (maelys_execution_spawn(h->executor, plan, req, &e, &err) != 0)
    fail_msg("spawn: %s", err);
  waited_t w;
  memset(&w, 0, sizeof w);
  maelys_execution_wait(e, waited_cb, &w, NULL);
  harness_run_until(h, &w.done);
  assert_non_null(maelys_execution_receipt_path(e));
  char* path = strdup(maelys_execution_receipt_path(e));
  maelys_execution_release(e);
  maelys_execution_request_destroy(req);
  return path;
}

static char* slurp(const char* path, size_t* len) {
  FILE* f = fopen(path, "rb");
  assert_non_null(f);
  char* buf = malloc(1 << 20);
  *len = fread(buf, 1, (1 << 20) - 1, f);
  buf[*len] = '\0';
  fclose(f);
  return buf;
}

static void spit(const char* path, const char* data, size_t len) {
  FILE* f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, len, f), len);
  fclose(f);
}

/* Verifies `dir`; expects `want` and, on failure, that the diagnostic
 * starts with `names` (the first file that fails). */
static void expect_verify(const char* dir, const char* key,
                          maelys_executor_result_t want, const char* names,
                          const char* reason) {
  const char* paths[] = {dir};
  char* report = NULL;
  char* err = NULL;
  maelys_executor_result_t r =
      maelys_executor_verify_receipts(paths, 1, key, &report, &err);
  if (r != want)
    fail_msg("verify: %s (%s)", maelys_executor_result_name(r), err ? err : "");
  assert_non_null(report);
  if (want != MAELYS_EXECUTOR_OK) {
    assert_non_null(err);
    if (strncmp(err, names, strlen(names)) != 0)
      fail_msg("diagnostic '%s' does not start with '%s'", err, names);
    if (reason != NULL && strstr(err, reason) == NULL)
      fail_msg("diagnostic '%s' does not say '%s'", err, reason);
  }
  maelys_executor_string_free(report);
  maelys_executor_error_free(err);
}

static void test_unsigned_receipts_unchanged(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 10000);
  char dir[] = "/tmp/maelys-evidence-XXXXXX";
  assert_non_null(mkdtemp(dir));
  maelys_executor_plan_t* plan = plan_posix();
  char* path = run_one(&h, plan, dir, NULL, "0", NULL);
  size_t len;
  char* text = slurp(path, &len);
  assert_null(strstr(text, "\"signature\""));
  assert_null(strstr(text, "\"chain\""));
  assert_null(strstr(text, "\"context\""));
  /* Not evidence: the verifier says so rather than passing it. */
  expect_verify(dir, NULL, MAELYS_EXECUTOR_ERR_DENIED, path, "not signed");
  unlink(path);
  free(text);
  free(path);
  rmdir(dir);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

/* The receipt directory is opened once, at spawn: swapped for a symbolic
 * link while the execution runs (as a sandbox that can write its parent
 * could), it redirects nothing -- the receipt lands in the directory that was
 * opened, and the link's target stays empty. */
static void test_receipt_dir_swapped_for_a_link(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 10000);
  char top[] = "/tmp/maelys-swap-XXXXXX";
  assert_non_null(mkdtemp(top));
  char dir[PATH_MAX], moved[PATH_MAX], target[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/receipts", top);
  snprintf(moved, sizeof moved, "%s/receipts.old", top);
  snprintf(target, sizeof target, "%s/target", top);
  assert_int_equal(mkdir(target, 0700), 0);
  maelys_executor_plan_t* plan = plan_posix();
  maelys_execution_request_t* req =
      request_fixture("posix", ARGS("sleep", "200"));
  assert_int_equal(maelys_execution_request_set_receipt_dir(req, dir, NULL), 0);
  maelys_execution_t* e = NULL;
  char* err = NULL;
  if (maelys_execution_spawn(h.executor, plan, req, &e, &err) != 0)
    fail_msg("spawn: %s", err);
  assert_int_equal(rename(dir, moved), 0);
  assert_int_equal(symlink(target, dir), 0);
  waited_t w;
  memset(&w, 0, sizeof w);
  maelys_execution_wait(e, waited_cb, &w, NULL);
  harness_run_until(&h, &w.done);
  assert_int_equal(maelys_execution_receipt_errno(e), 0);
  DIR* d = opendir(target);
  assert_non_null(d);
  struct dirent* entry;
  int in_target = 0;
  while ((entry = readdir(d)) != NULL)
    in_target += entry->d_name[0] != '.';
  closedir(d);
  assert_int_equal(in_target, 0);
  char receipt[PATH_MAX + 64];
  snprintf(receipt, sizeof receipt, "%s/%s.json", moved,
           maelys_execution_id(e));
  assert_int_equal(access(receipt, F_OK), 0);
  maelys_execution_release(e);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof cmd, "rm -rf %s", top);
  assert_int_equal(system(cmd), 0);
  harness_finish(&h);
}

static void test_signed_chain(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 20000);
  char dir[] = "/tmp/maelys-evidence-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char* err = NULL;
  assert_int_equal(maelys_executor_set_receipt_key(h.executor, seed, 31, &err),
                   MAELYS_EXECUTOR_ERR_ARGUMENT);
  maelys_executor_error_free(err);
  err = NULL;
  assert_int_equal(
      maelys_executor_set_receipt_key(h.executor, seed, sizeof seed, NULL), 0);
  char* key = NULL;
  assert_int_equal(
      maelys_executor_receipt_public_key(seed, sizeof seed, &key, NULL), 0);
  assert_int_equal(strlen(key), 8 + 64);
  maelys_executor_plan_t* plan = plan_posix();

  /* A context must be one object. */
  maelys_execution_request_t* req = request_fixture("posix", ARGS("exit", "0"));
  assert_int_equal(
      maelys_execution_request_set_receipt_context(req, "[1]", &err),
      MAELYS_EXECUTOR_ERR_ARGUMENT);
  maelys_executor_error_free(err);
  err = NULL;
  assert_int_equal(
      maelys_execution_request_set_receipt_chain(req, "../x", &err),
      MAELYS_EXECUTOR_ERR_ARGUMENT);
  maelys_executor_error_free(err);
  err = NULL;
  /* A chained receipt needs a file to land in. */
  assert_int_equal(maelys_execution_request_set_receipt_chain(req, "s1", NULL),
                   0);
  maelys_execution_t* e = NULL;
  assert_int_equal(maelys_execution_spawn(h.executor, plan, req, &e, &err),
                   MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_non_null(strstr(err, "receipt directory"));
  maelys_executor_error_free(err);
  err = NULL;
  maelys_execution_request_destroy(req);

  char* r1 = run_one(&h, plan, dir, "s1", "0", "{\"decision\":\"d-1\"}");
  char* r2 = run_one(&h, plan, dir, "s1", "3", NULL);
  char* closing = NULL;
  assert_int_equal(maelys_executor_close_receipt_chain(h.executor, "s1", dir,
                                                       &closing, NULL),
                   0);
  /* Closed: no more receipts on it, no second closing record. */
  req = request_fixture("posix", ARGS("exit", "0"));
  maelys_execution_request_set_receipt_dir(req, dir, NULL);
  maelys_execution_request_set_receipt_chain(req, "s1", NULL);
  assert_int_equal(maelys_execution_spawn(h.executor, plan, req, &e, &err),
                   MAELYS_EXECUTOR_ERR_STATE);
  maelys_executor_error_free(err);
  err = NULL;
  maelys_execution_request_destroy(req);
  assert_int_equal(
      maelys_executor_close_receipt_chain(h.executor, "s1", dir, NULL, &err),
      MAELYS_EXECUTOR_ERR_STATE);
  maelys_executor_error_free(err);
  err = NULL;

  size_t len1, len2, lenc;
  char* t1 = slurp(r1, &len1);
  char* t2 = slurp(r2, &len2);
  char* tc = slurp(closing, &lenc);
  assert_non_null(strstr(t1, "\"sequence\": 1"));
  assert_non_null(strstr(t1, "\"previous\": null"));
  assert_non_null(strstr(t1, "\"decision\": \"d-1\""));
  assert_non_null(strstr(t1, key));
  assert_non_null(strstr(t2, "\"sequence\": 2"));
  assert_non_null(strstr(tc, "\"receipts\": 2"));

  expect_verify(dir, key, MAELYS_EXECUTOR_OK, NULL, NULL);
  expect_verify(dir, NULL, MAELYS_EXECUTOR_OK, NULL, NULL);
  /* Another key: named at the first file. */
  char* other = NULL;
  unsigned char seed2[32] = {9};
  maelys_executor_receipt_public_key(seed2, sizeof seed2, &other, NULL);
  expect_verify(dir, other, MAELYS_EXECUTOR_ERR_DENIED, dir, "signed by");

  /* One whitespace byte more in receipt 1. */
  char* mod = malloc(len1 + len2 + 2);
  memcpy(mod, t1, 2);
  mod[2] = ' ';
  memcpy(mod + 3, t1 + 2, len1 - 2);
  spit(r1, mod, len1 + 1);
  expect_verify(dir, key, MAELYS_EXECUTOR_ERR_DENIED, r1, "modified");
  /* A changed byte inside the signed text (the exit code). */
  memcpy(mod, t2, len2);
  char* code = strstr(mod, "\"exit_code\": 3");
  assert_non_null(code);
  code[13] = '0';
  spit(r1, t1, len1);
  spit(r2, mod, len2);
  expect_verify(dir, key, MAELYS_EXECUTOR_ERR_DENIED, r2, "modified");
  spit(r2, t2, len2);
  expect_verify(dir, key, MAELYS_EXECUTOR_OK, NULL, NULL);

  /* Removed receipts and a dropped tail. */
  unlink(r2);
  expect_verify(dir, key, MAELYS_EXECUTOR_ERR_DENIED, closing, "missing");
  spit(r2, t2, len2);
  unlink(r1);
  expect_verify(dir, key, MAELYS_EXECUTOR_ERR_DENIED, r2, "missing");
  spit(r1, t1, len1);
  unlink(closing);
  expect_verify(dir, key, MAELYS_EXECUTOR_ERR_DENIED, r2, "tail");
  spit(closing, tc, lenc);
  expect_verify(dir, key, MAELYS_EXECUTOR_OK, NULL, NULL);

  unlink(r1);
  unlink(r2);
  unlink(closing);
  rmdir(dir);
  free(mod);
  free(t1);
  free(t2);
  free(tc);
  free(r1);
  free(r2);
  maelys_executor_string_free(closing);
  maelys_executor_string_free(key);
  maelys_executor_string_free(other);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

/* Receipts link in the order executions end, not the order they started:
 * a long execution spawned first joins the chain after a short one. Long
 * enough that the short one ends first under valgrind on a loaded machine
 * (with 300 ms, clean-clone CI's uid 65534 stage saw the long one end
 * first). */
static void test_chain_order_is_end_order(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 20000);
  char dir[] = "/tmp/maelys-evidence-XXXXXX";
  assert_non_null(mkdtemp(dir));
  maelys_executor_set_receipt_key(h.executor, seed, sizeof seed, NULL);
  maelys_executor_plan_t* plan = plan_posix();
  maelys_execution_request_t* slow =
      request_fixture("posix", ARGS("sleep", "2000"));
  maelys_execution_request_set_receipt_dir(slow, dir, NULL);
  maelys_execution_request_set_receipt_chain(slow, "s2", NULL);
  maelys_execution_t* e = NULL;
  assert_int_equal(maelys_execution_spawn(h.executor, plan, slow, &e, NULL), 0);
  char* err = NULL;
  assert_int_equal(
      maelys_executor_close_receipt_chain(h.executor, "s2", dir, NULL, &err),
      MAELYS_EXECUTOR_ERR_STATE);
  maelys_executor_error_free(err);
  char* fast = run_one(&h, plan, dir, "s2", "0", NULL);
  waited_t w;
  memset(&w, 0, sizeof w);
  maelys_execution_wait(e, waited_cb, &w, NULL);
  harness_run_until(&h, &w.done);
  size_t len;
  char* t = slurp(maelys_execution_receipt_path(e), &len);
  assert_non_null(strstr(t, "\"sequence\": 2"));
  char* p2 = strdup(maelys_execution_receipt_path(e));
  maelys_execution_release(e);
  char* closing = NULL;
  assert_int_equal(maelys_executor_close_receipt_chain(h.executor, "s2", dir,
                                                       &closing, NULL),
                   0);
  expect_verify(dir, NULL, MAELYS_EXECUTOR_OK, NULL, NULL);
  unlink(fast);
  unlink(p2);
  unlink(closing);
  rmdir(dir);
  free(t);
  free(fast);
  free(p2);
  maelys_executor_string_free(closing);
  maelys_execution_request_destroy(slow);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unsigned_receipts_unchanged),
      cmocka_unit_test(test_receipt_dir_swapped_for_a_link),
      cmocka_unit_test(test_signed_chain),
      cmocka_unit_test(test_chain_order_is_end_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
