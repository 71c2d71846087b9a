/*
 * The agent spec: its JSON form validated member by member (errors name the
 * JSON path), sandbox-wide limits refused in one place, and prepare giving a
 * request and a sealed plan whose network was set explicitly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "orch-internal.h"

static char ws[64];

static int setup(void** state) {
  (void)state;
  snprintf(ws, sizeof ws, "/tmp/maelys-spec-XXXXXX");
  return mkdtemp(ws) ? 0 : -1;
}

static int teardown(void** state) {
  (void)state;
  return rmdir(ws);
}

/* Parses `json` (with %s for the workspace) and expects `want` and a
 * diagnostic containing `has`. */
/* `json` with its first "%s" replaced by the workspace. */
static void fill(char* out, size_t size, const char* json) {
  const char* at = strstr(json, "%s");
  if (at == NULL)
    snprintf(out, size, "%s", json);
  else
    snprintf(out, size, "%.*s%s%s", (int)(at - json), json, ws, at + 2);
}

static void expect_json(const char* json, maelys_executor_result_t want,
                        const char* has) {
  char text[4096];
  fill(text, sizeof text, json);
  maelys_orchestrator_spec_t* spec = NULL;
  char* err = NULL;
  maelys_executor_result_t r =
      maelys_orchestrator_spec_from_json(text, strlen(text), &spec, &err);
  if (r != want)
    fail_msg("%s: got %s (%s)", text, maelys_executor_result_name(r),
             err ? err : "");
  if (has != NULL && (err == NULL || strstr(err, has) == NULL))
    fail_msg("diagnostic '%s' lacks '%s'", err ? err : "", has);
  maelys_executor_error_free(err);
  maelys_orchestrator_spec_destroy(spec);
}

#define HEAD                                                                   \
  "{\"format\":\"maelys-agent-spec/1\",\"executable\":\"/usr/bin/env\","       \
  "\"workspace\":{\"path\":\"%s\",\"access\":\"write\"},"

static void test_json_errors_name_the_path(void** state) {
  (void)state;
  expect_json(HEAD "\"network\":\"none\"}", MAELYS_EXECUTOR_OK, NULL);
  expect_json(HEAD "\"network\":\"none\",\"bogus\":1}",
              MAELYS_EXECUTOR_ERR_ARGUMENT, "$: unknown member 'bogus'");
  expect_json(HEAD "\"network\":\"none\",\"writable\":[\"/a\",3]}",
              MAELYS_EXECUTOR_ERR_ARGUMENT, "$.writable[1]");
  expect_json(HEAD "\"network\":\"none\",\"readable\":[\"/a/../b\"]}",
              MAELYS_EXECUTOR_ERR_ARGUMENT, "$.readable[0]");
  expect_json(HEAD "\"network\":\"maybe\"}", MAELYS_EXECUTOR_ERR_ARGUMENT,
              "$.network");
  expect_json(HEAD "\"endpoint\":\"captured\"}", MAELYS_EXECUTOR_ERR_ARGUMENT,
              "$.network: is required");
  expect_json(HEAD "\"network\":\"none\",\"environment\":{\"set\":{\"A\":1}}}",
              MAELYS_EXECUTOR_ERR_ARGUMENT, "$.environment.set.A");
  expect_json(HEAD
              "\"network\":\"none\",\"environment\":{\"set\":{\"A\":\"1\"},"
              "\"pass\":[\"A\"]}}",
              MAELYS_EXECUTOR_ERR_ARGUMENT, "$.environment.pass[0]");
  expect_json(HEAD "\"network\":\"none\",\"private\":[{\"path\":\"/s\"}]}",
              MAELYS_EXECUTOR_ERR_ARGUMENT, "$.private[0]");
  expect_json(HEAD "\"network\":\"none\",\"limits\":{\"cpu_seconds\":-1}}",
              MAELYS_EXECUTOR_ERR_ARGUMENT, "$.limits.cpu_seconds");
  expect_json(HEAD "\"network\":\"none\",\"limits\":{\"nproc\":1}}",
              MAELYS_EXECUTOR_ERR_ARGUMENT, "unknown member 'nproc'");
  expect_json(HEAD "\"network\":\"none\",\"argv\":[]}",
              MAELYS_EXECUTOR_ERR_ARGUMENT, "$.argv");
  expect_json("{\"format\":\"maelys-agent-spec/2\"}",
              MAELYS_EXECUTOR_ERR_ARGUMENT, "$.format");
  expect_json("{\"format\":\"maelys-agent-spec/1\",\"executable\":\"env\"}",
              MAELYS_EXECUTOR_ERR_ARGUMENT, "$.executable");
  expect_json("[1", MAELYS_EXECUTOR_ERR_ARGUMENT, "not valid JSON");
}

static void test_sandbox_wide_limits_refused(void** state) {
  (void)state;
  expect_json(HEAD "\"network\":\"none\",\"limits\":{\"tasks\":64}}",
              MAELYS_EXECUTOR_ERR_UNSUPPORTED,
              "$.limits.tasks: limit tasks: sandbox-wide task limits are not "
              "supported by this build");
  expect_json(HEAD "\"network\":\"none\",\"limits\":{\"memory\":1048576}}",
              MAELYS_EXECUTOR_ERR_UNSUPPORTED, "not supported by this build");
  expect_json(HEAD "\"network\":\"none\",\"limits\":{\"open_files\":64,"
                   "\"cpu_seconds\":\"unlimited\",\"wall_time_ms\":1000}}",
              MAELYS_EXECUTOR_OK, NULL);
}

static void test_prepare(void** state) {
  (void)state;
  char text[4096];
  fill(text, sizeof text,
       HEAD "\"argv\":[\"env\"],\"network\":\"inherit\",\"environment\":{"
            "\"set\":{\"HOME\":\"/state\"},\"pass\":[\"MAELYS_T\"]},"
            "\"private\":[{\"path\":\"/state\",\"size\":1048576}],"
            "\"limits\":{\"open_files\":64,\"wall_time_ms\":5000},"
            "\"endpoint\":\"captured\"}");
  maelys_orchestrator_spec_t* spec = NULL;
  assert_int_equal(
      maelys_orchestrator_spec_from_json(text, strlen(text), &spec, NULL), 0);
  assert_int_equal(maelys_orchestrator_spec_wall_time_ms(spec), 5000);
  assert_true(maelys_orchestrator_spec_writes(spec, ws));
  assert_false(maelys_orchestrator_spec_writes(spec, "/etc"));
  const char* env[] = {"MAELYS_T=yes", "SECRET=no", NULL};
  maelys_execution_request_t* req = NULL;
  maelys_executor_plan_t* plan = NULL;
  char* err = NULL;
  if (maelys_orchestrator_prepare(spec, env, &req, &plan, &err) != 0)
    fail_msg("prepare: %s", err);
  assert_true(maelys_executor_plan_is_sealed(plan));
  assert_int_equal(maelys_executor_plan_network(plan),
                   MAELYS_EXECUTOR_NETWORK_INHERIT);
  uint64_t soft, hard;
  assert_int_equal(maelys_executor_plan_rlimit_get(
                       plan, MAELYS_EXECUTOR_RLIMIT_NOFILE, &soft, &hard),
                   0);
  assert_int_equal(soft, 64);
  const char* const* e = maelys_execution_request_environment(req);
  size_t n = 0;
  for (; e[n]; n++)
    assert_null(strstr(e[n], "SECRET"));
  assert_int_equal(n, 2);
  assert_string_equal(maelys_execution_request_cwd(req), ws);
  bool has_ws = false;
  for (size_t i = 0; i < maelys_executor_plan_rule_count(plan); i++) {
    maelys_executor_rule_view_t r;
    maelys_executor_plan_rule_get(plan, i, &r);
    has_ws |=
        strcmp(r.path, ws) == 0 && r.access == MAELYS_EXECUTOR_ACCESS_WRITE;
  }
  assert_true(has_ws);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);

  /* A path the spec lists must exist and be no symbolic link. */
  maelys_orchestrator_spec_add_readable(spec, "/nonexistent/maelys", NULL);
  assert_int_equal(maelys_orchestrator_prepare(spec, NULL, &req, &plan, &err),
                   MAELYS_EXECUTOR_ERR_NOT_FOUND);
  assert_non_null(strstr(err, "/nonexistent/maelys"));
  maelys_executor_error_free(err);
  maelys_orchestrator_spec_destroy(spec);

  /* The C API: no network set, no prepare. */
  assert_int_equal(maelys_orchestrator_spec_create(&spec, NULL), 0);
  maelys_orchestrator_spec_set_executable(spec, "/usr/bin/env", NULL);
  maelys_orchestrator_spec_set_workspace(spec, ws, 0, NULL);
  err = NULL;
  assert_int_equal(maelys_orchestrator_prepare(spec, NULL, &req, &plan, &err),
                   MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_non_null(strstr(err, "network"));
  maelys_executor_error_free(err);
  err = NULL;
  assert_int_equal(maelys_orchestrator_spec_set_network(
                       spec, MAELYS_EXECUTOR_NETWORK_EXTERNAL_CHANNEL, &err),
                   MAELYS_EXECUTOR_ERR_UNSUPPORTED);
  maelys_executor_error_free(err);
  maelys_orchestrator_spec_destroy(spec);
}

static void test_spec_file_trust(void** state) {
  (void)state;
  char path[128];
  snprintf(path, sizeof path, "%s/spec.json", ws);
  char text[1024];
  fill(text, sizeof text, HEAD "\"network\":\"none\"}");
  FILE* f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
  chmod(path, 0644);
  maelys_orchestrator_spec_t* spec = NULL;
  char* err = NULL;
  /* Inside the workspace the spec makes writable: the agent could rewrite
   * its own authority. (The temporary directory is in sticky /tmp, owned by
   * this user: accepted as an ancestor.) */
  assert_int_equal(maelys_orchestrator_spec_load_file(path, &spec, &err),
                   MAELYS_EXECUTOR_ERR_DENIED);
  assert_non_null(strstr(err, "writable"));
  maelys_executor_error_free(err);
  err = NULL;
  chmod(path, 0666);
  assert_int_equal(maelys_orchestrator_spec_load_file(path, &spec, &err),
                   MAELYS_EXECUTOR_ERR_DENIED);
  assert_non_null(strstr(err, "writable by nobody else"));
  maelys_executor_error_free(err);
  err = NULL;
  char link[160];
  snprintf(link, sizeof link, "%s/link.json", ws);
  symlink(path, link);
  assert_int_equal(maelys_orchestrator_spec_load_file(link, &spec, &err),
                   MAELYS_EXECUTOR_ERR_DENIED);
  assert_non_null(strstr(err, "symbolic link"));
  maelys_executor_error_free(err);
  unlink(link);
  unlink(path);
}

/* The host's receipt context: a JSON object, kept as given; nothing else. */
static void test_operation_host_context(void** state) {
  (void)state;
  maelys_orchestrator_operation_t* op = NULL;
  maelys_execution_request_t* req = NULL;
  assert_int_equal(maelys_execution_request_create(&req, NULL), 0);
  assert_int_equal(maelys_orchestrator_operation_create("op", req, &op, NULL),
                   0);
  char* error = NULL;
  assert_int_equal(
      maelys_orchestrator_operation_set_host_context(op, "[1]", &error),
      MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_non_null(strstr(error, "not a JSON object"));
  maelys_executor_error_free(error);
  error = NULL;
  assert_int_equal(
      maelys_orchestrator_operation_set_host_context(op, "{\"a\":", NULL),
      MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_int_equal(maelys_orchestrator_operation_set_host_context(
                       op, "{\"protection\": {\"protected\": []}}", NULL),
                   0);
  assert_non_null(json_object_get(op->host_context, "protection"));
  maelys_orchestrator_operation_destroy(op);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_json_errors_name_the_path),
      cmocka_unit_test(test_sandbox_wide_limits_refused),
      cmocka_unit_test(test_prepare),
      cmocka_unit_test(test_spec_file_trust),
      cmocka_unit_test(test_operation_host_context),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
