/* Requests, options and small helpers: each bad input gives its own error. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"

#define BAD(call, code, needle)                                                \
  do {                                                                         \
    char* err = NULL;                                                          \
    maelys_executor_result_t r_ = (call);                                      \
    if ((int)r_ != (int)(code))                                                \
      fail_msg("%s: got %s", #call, maelys_executor_result_name(r_));          \
    if (err == NULL || strstr(err, (needle)) == NULL)                          \
      fail_msg("diagnostic '%s' does not mention '%s'", err ? err : "",        \
               (needle));                                                      \
    maelys_executor_error_free(err);                                           \
  } while (0)

static void test_request_bad_inputs(void** state) {
  (void)state;
  maelys_execution_request_t* r = NULL;
  const int A = MAELYS_EXECUTOR_ERR_ARGUMENT;
  BAD(maelys_execution_request_create(NULL, &err), A, "out_request");
  assert_int_equal(maelys_execution_request_create(&r, NULL), 0);
  BAD(maelys_execution_request_set_executable(NULL, "/bin/true", &err), A,
      "request is NULL");
  BAD(maelys_execution_request_set_executable(r, "true", &err), A,
      "not an absolute path");
  BAD(maelys_execution_request_set_executable(r, NULL, &err), A, "(null)");
  BAD(maelys_execution_request_set_argv(r, NULL, &err), A, "argv[0]");
  const char* empty[] = {NULL};
  BAD(maelys_execution_request_set_argv(r, empty, &err), A, "argv[0]");
  BAD(maelys_execution_request_set_environment_mode(
          r, (maelys_exec_env_mode_t)5, &err),
      A, "unknown environment mode");
  BAD(maelys_execution_request_add_environment(r, "A", "1", &err),
      MAELYS_EXECUTOR_ERR_STATE, "EMPTY");
  assert_int_equal(maelys_execution_request_set_environment_mode(
                       r, MAELYS_EXEC_ENV_EXPLICIT, NULL),
                   0);
  BAD(maelys_execution_request_add_environment(r, "", "1", &err), A,
      "empty or contains '='");
  BAD(maelys_execution_request_add_environment(r, "A=B", "1", &err), A, "A=B");
  BAD(maelys_execution_request_add_environment(r, "A", NULL, &err), A,
      "value of A");
  assert_int_equal(maelys_execution_request_add_environment(r, "A", "1", NULL),
                   0);
  BAD(maelys_execution_request_add_environment(r, "A", "2", &err), A,
      "given twice");
  BAD(maelys_execution_request_set_environment_mode(r, MAELYS_EXEC_ENV_EMPTY,
                                                    &err),
      MAELYS_EXECUTOR_ERR_STATE, "already holds 1");
  BAD(maelys_execution_request_set_cwd(r, "rel", &err), A, "rel");
  BAD(maelys_execution_request_set_io_mode(r, MAELYS_EXEC_IO_ISOLATED_DUPLEX, 2,
                                           &err),
      A, "3..1023");
  BAD(maelys_execution_request_set_io_mode(r, MAELYS_EXEC_IO_CAPTURED, 3, &err),
      A, "pass -1");
  BAD(maelys_execution_request_set_io_mode(r, (maelys_exec_io_mode_t)9, -1,
                                           &err),
      A, "unknown io mode");
  BAD(maelys_execution_request_set_stderr_mode(r, (maelys_exec_stderr_mode_t)9,
                                               &err),
      A, "unknown stderr mode");
  BAD(maelys_execution_request_set_backend(r, "", &err), A, "backend name");
  /* Invariant 14: a non-local platform is refused, never translated. */
  BAD(maelys_execution_request_set_platform(r, "oci", &err),
      MAELYS_EXECUTOR_ERR_UNSUPPORTED, "'oci' is refused");
  BAD(maelys_execution_request_set_platform(r, NULL, &err), A, "NULL");
  assert_int_equal(maelys_execution_request_set_platform(r, "local", NULL), 0);
  BAD(maelys_execution_request_set_stop_budget(r, 0, 100, &err), A,
      "stop budgets");
  BAD(maelys_execution_request_set_stop_budget(r, 100, 3600001, &err), A,
      "stop budgets");
  BAD(maelys_execution_request_set_receipt_dir(r, "receipts", &err), A,
      "receipts");
  BAD(maelys_execution_request_set_identity(r, 0, 100, &err), A,
      "uid or gid 0");
  BAD(maelys_execution_request_set_identity(r, 100, 0, &err), A,
      "uid or gid 0");
  /* A channel descriptor is consumed even when refused. */
  int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int keep = fd;
  BAD(maelys_execution_request_add_channel(r, 3, &fd, &err), A,
      "outside 4..1023");
  assert_int_equal(fd, -1);
  assert_true(fcntl(keep, F_GETFD) < 0);
  int bogus = 987;
  BAD(maelys_execution_request_add_channel(r, 4, &bogus, &err), A,
      "not an open descriptor");
  fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  assert_int_equal(maelys_execution_request_add_channel(r, 4, &fd, NULL), 0);
  fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  BAD(maelys_execution_request_add_channel(r, 4, &fd, &err), A,
      "already has a channel");
  assert_int_equal(fd, -1);
  /* The layout holds MAELYS_EXECUTOR_MAX_CHANNELS: one more is refused, and
   * its descriptor consumed, instead of being dropped at spawn. */
  for (int c = 5; c < 4 + MAELYS_EXECUTOR_MAX_CHANNELS; c++) {
    fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_int_equal(maelys_execution_request_add_channel(r, c, &fd, NULL), 0);
  }
  fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  keep = fd;
  BAD(maelys_execution_request_add_channel(r, 4 + MAELYS_EXECUTOR_MAX_CHANNELS,
                                           &fd, &err),
      MAELYS_EXECUTOR_ERR_UNSUPPORTED, "at most 64 channels");
  assert_int_equal(fd, -1);
  assert_true(fcntl(keep, F_GETFD) < 0);
  maelys_execution_request_destroy(r);
}

static void test_request_read_access(void** state) {
  (void)state;
  maelys_execution_request_t* r = NULL;
  assert_int_equal(maelys_execution_request_create(&r, NULL), 0);
  assert_string_equal(maelys_execution_request_cwd(r), "/");
  assert_null(maelys_execution_request_executable(r));
  assert_null(maelys_execution_request_environment(r)[0]);
  uint32_t uid = 0, gid = 0;
  assert_int_equal(maelys_execution_request_identity(r, &uid, &gid), -1);
  const char* argv[] = {"prog", "a b", "", NULL};
  assert_int_equal(maelys_execution_request_set_argv(r, argv, NULL), 0);
  const char* const* got = maelys_execution_request_argv(r);
  assert_string_equal(got[1], "a b");
  assert_string_equal(got[2], "");
  assert_null(got[3]);
  assert_int_equal(maelys_execution_request_set_identity(r, 1000, 1001, NULL),
                   0);
  assert_int_equal(maelys_execution_request_identity(r, &uid, &gid), 0);
  assert_int_equal(uid, 1000);
  assert_int_equal(gid, 1001);
  maelys_execution_request_destroy(r);
}

static void test_options_and_names(void** state) {
  (void)state;
  maelys_backend_options_t* o = NULL;
  assert_int_equal(maelys_backend_options_create(&o, NULL), 0);
  BAD(maelys_backend_options_set(o, "", "v", &err),
      MAELYS_EXECUTOR_ERR_ARGUMENT, "required");
  assert_int_equal(maelys_backend_options_set(o, "k", "1", NULL), 0);
  assert_int_equal(maelys_backend_options_set(o, "k", "2", NULL), 0);
  assert_string_equal(maelys_backend_options_get(o, "k"), "2");
  assert_int_equal(maelys_backend_options_count(o), 1);
  assert_string_equal(maelys_backend_options_key(o, 0), "k");
  assert_null(maelys_backend_options_get(o, "missing"));
  maelys_backend_options_destroy(o);
  assert_string_equal(maelys_executor_result_name(MAELYS_EXECUTOR_ERR_SEALED),
                      "SEALED");
  assert_string_equal(maelys_executor_result_name((maelys_executor_result_t)99),
                      "UNKNOWN");
  assert_int_equal(maelys_executor_abi_version(), MAELYS_EXECUTOR_ABI_VERSION);
  assert_true(maelys__executor_path_is_clean("/"));
  assert_true(maelys__executor_path_is_clean("/a/b.c/..d"));
  assert_false(maelys__executor_path_is_clean("/a/./b"));
  assert_false(maelys__executor_path_is_clean("/a\nb"));
  assert_true(maelys__executor_path_within("/a/b", "/a"));
  assert_true(maelys__executor_path_within("/a", "/a"));
  assert_false(maelys__executor_path_within("/ab", "/a"));
  assert_true(maelys__executor_path_within("/x", "/"));
}

/* Registration refuses a malformed backend table and unknown options. */
static void test_registration_refusals(void** state) {
  (void)state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  maelys_executor_t* ex = NULL;
  assert_int_equal(maelys_executor_create(&loop, &ex, NULL), 0);
  maelys_executor_t* none = (maelys_executor_t*)&loop;
  BAD(maelys_executor_create(NULL, &none, &err), MAELYS_EXECUTOR_ERR_ARGUMENT,
      "loop is NULL");
  assert_null(none);
  maelys_backend_t bad = *maelys_backend_posix();
  bad.abi_version = 99;
  BAD(maelys_executor_register_backend(ex, &bad, NULL, &err),
      MAELYS_EXECUTOR_ERR_UNSUPPORTED, "backend ABI 99");
  bad = *maelys_backend_posix();
  bad.struct_size = 8;
  BAD(maelys_executor_register_backend(ex, &bad, NULL, &err),
      MAELYS_EXECUTOR_ERR_ARGUMENT, "too small");
  bad = *maelys_backend_posix();
  bad.name = "Bad Name";
  BAD(maelys_executor_register_backend(ex, &bad, NULL, &err),
      MAELYS_EXECUTOR_ERR_ARGUMENT, "[a-z0-9-]");
  bad = *maelys_backend_posix();
  bad.prepare = NULL;
  BAD(maelys_executor_register_backend(ex, &bad, NULL, &err),
      MAELYS_EXECUTOR_ERR_ARGUMENT, "lacks");
  maelys_backend_options_t* o = NULL;
  maelys_backend_options_create(&o, NULL);
  maelys_backend_options_set(o, "colour", "blue", NULL);
  BAD(maelys_executor_register_backend(ex, maelys_backend_posix(), o, &err),
      MAELYS_EXECUTOR_ERR_ARGUMENT, "colour");
  BAD(maelys_executor_register_backend(ex, maelys_backend_bubblewrap(), o,
                                       &err),
      MAELYS_EXECUTOR_ERR_ARGUMENT, "unknown option 'colour'");
  maelys_backend_options_destroy(o);
  assert_int_equal(
      maelys_executor_register_backend(ex, maelys_backend_posix(), NULL, NULL),
      0);
  BAD(maelys_executor_register_backend(ex, maelys_backend_posix(), NULL, &err),
      MAELYS_EXECUTOR_ERR_STATE, "already registered");
  uint64_t mask = 1;
  assert_int_equal(
      maelys_executor_backend_capabilities(ex, "posix", &mask, NULL), 0);
  assert_int_equal(mask, 0);
  BAD(maelys_executor_backend_capabilities(ex, "nosuch", &mask, &err),
      MAELYS_EXECUTOR_ERR_NOT_FOUND, "nosuch");
  char* reason = NULL;
  assert_int_equal(
      maelys_executor_backend_missing_reason(
          ex, "posix", MAELYS_BACKEND_CAP_NETWORK_NONE, &reason, NULL),
      0);
  assert_non_null(strstr(reason, "unconfined"));
  maelys_executor_string_free(reason);
  BAD(maelys_executor_backend_missing_reason(ex, "posix", 3, &reason, &err),
      MAELYS_EXECUTOR_ERR_ARGUMENT, "exactly one");
  assert_int_equal(maelys_executor_backend_count(ex), 1);
  assert_string_equal(maelys_executor_backend_name(ex, 0), "posix");
  assert_null(maelys_executor_backend_name(ex, 1));
  assert_int_equal(maelys_executor_destroy(ex, NULL), 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_request_bad_inputs),
      cmocka_unit_test(test_request_read_access),
      cmocka_unit_test(test_options_and_names),
      cmocka_unit_test(test_registration_refusals),
  };
  return cmocka_run_group_tests_name("request", tests, NULL, NULL);
}
