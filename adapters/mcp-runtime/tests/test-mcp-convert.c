/*
 * The adapter's pure half, without the runtime, a loop or a fork: the
 * process specification and a profile's resolution into an Executor request
 * under launcher ABI 5 and 6, every refusal with its diagnostic, the stop,
 * layout and exit-status mappings, and the profile registry. The request is
 * read back through the Executor's public accessors (maelys/backend.h).
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "maelys/backend.h"
#include "mcpx.h"

#define REFUSED(call, code, needle)                                            \
  do {                                                                         \
    char* err = NULL;                                                          \
    maelys_executor_result_t r_ = (call);                                      \
    if ((int)r_ != (int)(code))                                                \
      fail_msg("%s: got %s", #call, maelys_executor_result_name(r_));          \
    if (err == NULL || strstr(err, (needle)) == NULL)                          \
      fail_msg("diagnostic '%s' does not mention '%s'", err ? err : "",        \
               (needle));                                                      \
    maelys_mcp_executor_error_free(err);                                       \
  } while (0)

static const char* const base_names[] = {"PATH", "LANG", "LC_ALL",
                                         "MAELYS_PROVIDER_FD"};
static const char* const base_values[] = {"/usr/local/bin:/usr/bin:/bin", "C",
                                          "C", "3"};
static const char* const argv[] = {"/opt/provider", "--provider", "a b", ""};

static maelys_mcp_executor_spec_t spec_isolated(void) {
  maelys_mcp_executor_spec_t s = {
      .executable = "/opt/provider",
      .argv = argv,
      .argc = 4,
      .profile = "sandboxed",
      .layout = MAELYS_MCP_EXECUTOR_LAYOUT_ISOLATED,
      .env_names = base_names,
      .env_values = base_values,
      .env_count = 4,
      .platform = "local",
      .spawn_timeout_ms = 5000,
      .grace_timeout_ms = 500,
      .force_timeout_ms = 700,
  };
  return s;
}

static maelys_executor_plan_t* sealed_plan(maelys_executor_network_t network) {
  maelys_executor_plan_t* plan = NULL;
  assert_int_equal(maelys_executor_plan_create(&plan, NULL), 0);
  assert_int_equal(maelys_executor_plan_set_root(
                       plan, MAELYS_EXECUTOR_ROOT_READONLY, 0, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_bind(plan, "/usr", "/usr", 0,
                                                 MAELYS_EXECUTOR_MISSING_SKIP,
                                                 NULL),
                   0);
  assert_int_equal(maelys_executor_plan_set_network(plan, network, NULL), 0);
  if (network == MAELYS_EXECUTOR_NETWORK_EXTERNAL_CHANNEL)
    assert_int_equal(maelys_executor_plan_add_channel(plan, 4, "egress", NULL),
                     0);
  char* err = NULL;
  if (maelys_executor_plan_seal(plan, &err) != MAELYS_EXECUTOR_OK)
    fail_msg("seal: %s", err);
  return plan;
}

static void resolved(maelys_mcp_executor_resolution_t* res,
                     maelys_executor_network_t network) {
  maelys__mcpx_resolution_init(res);
  maelys_executor_plan_t* plan = sealed_plan(network);
  assert_int_equal(
      maelys_mcp_executor_resolution_set_plan(res, &plan, "bubblewrap", NULL),
      0);
  assert_null(plan);
}

/* -------------------------------------------------------------- mappings */

static void test_layouts(void** state) {
  (void)state;
  maelys_exec_io_mode_t mode;
  int fd = 0;
  assert_int_equal(
      maelys__mcpx_io_mode(MAELYS_MCP_EXECUTOR_LAYOUT_STDIO, &mode, &fd, NULL),
      0);
  assert_int_equal(mode, MAELYS_EXEC_IO_DUPLEX_STDIO);
  assert_int_equal(fd, -1);
  assert_int_equal(maelys__mcpx_io_mode(MAELYS_MCP_EXECUTOR_LAYOUT_ISOLATED,
                                        &mode, &fd, NULL),
                   0);
  assert_int_equal(mode, MAELYS_EXEC_IO_ISOLATED_DUPLEX);
  assert_int_equal(fd, 3);
  REFUSED(
      maelys__mcpx_io_mode((maelys_mcp_executor_layout_t)2, &mode, &fd, &err),
      MAELYS_EXECUTOR_ERR_UNSUPPORTED, "descriptor layout 2");
}

static void test_stop_modes(void** state) {
  (void)state;
  maelys_execution_stop_mode_t mode;
  assert_int_equal(
      maelys__mcpx_stop_mode(MAELYS_MCP_EXECUTOR_STOP_GRACEFUL, &mode, NULL),
      0);
  /* The graceful signal only, never the Executor's own escalation: the
   * runtime's ladder sends FORCED itself. */
  assert_int_equal(mode, MAELYS_EXEC_STOP_GRACEFUL);
  assert_int_equal(
      maelys__mcpx_stop_mode(MAELYS_MCP_EXECUTOR_STOP_FORCED, &mode, NULL), 0);
  assert_int_equal(mode, MAELYS_EXEC_STOP_FORCED);
  REFUSED(maelys__mcpx_stop_mode((maelys_mcp_executor_stop_t)2, &mode, &err),
          MAELYS_EXECUTOR_ERR_ARGUMENT, "stop mode 2");
}

static void test_exit_statuses(void** state) {
  (void)state;
  maelys_mcp_executor_exit_t e;
  maelys_execution_status_t s = {.outcome = MAELYS_EXEC_OUTCOME_EXITED,
                                 .exit_code = 3};
  maelys__mcpx_exit_status(&s, &e);
  assert_true(e.exited == 1 && e.exit_code == 3 && e.term_signal == 0);
  s = (maelys_execution_status_t){.outcome = MAELYS_EXEC_OUTCOME_SIGNALED,
                                  .term_signal = 9};
  maelys__mcpx_exit_status(&s, &e);
  assert_true(e.exited == 1 && e.exit_code == 0 && e.term_signal == 9);
  s = (maelys_execution_status_t){.outcome = MAELYS_EXEC_OUTCOME_LAUNCH_FAILED,
                                  .launch_step = "execve"};
  maelys__mcpx_exit_status(&s, &e);
  assert_true(e.exited == 1 && e.exit_code == 127 && e.term_signal == 0);
  s.launch_step = "sandbox-setup";
  maelys__mcpx_exit_status(&s, &e);
  assert_true(e.exited == 1 && e.exit_code == 126 && e.term_signal == 0);
}

static void test_budgets(void** state) {
  (void)state;
  assert_int_equal(maelys__mcpx_budget_ms(0), 1);
  assert_int_equal(maelys__mcpx_budget_ms(500), 500);
  assert_int_equal(maelys__mcpx_budget_ms(4000000u), 3600000);
}

/* ------------------------------------------------------------ conversion */

static void test_convert_isolated_exactly(void** state) {
  (void)state;
  for (unsigned abi = 5; abi <= 6; abi++) {
    maelys_mcp_executor_spec_t spec = spec_isolated();
    maelys_mcp_executor_resolution_t res;
    resolved(&res, MAELYS_EXECUTOR_NETWORK_NONE);
    maelys_execution_request_t* req = NULL;
    char* err = NULL;
    if (maelys__mcpx_convert(abi, &spec, &res, &req, &err) != 0)
      fail_msg("convert: %s", err);
    assert_string_equal(maelys_execution_request_executable(req),
                        "/opt/provider");
    const char* const* got = maelys_execution_request_argv(req);
    for (size_t i = 0; i < 4; i++)
      assert_string_equal(got[i], argv[i]);
    assert_null(got[4]);
    const char* const* env = maelys_execution_request_environment(req);
    assert_string_equal(env[0], "PATH=/usr/local/bin:/usr/bin:/bin");
    assert_string_equal(env[1], "LANG=C");
    assert_string_equal(env[2], "LC_ALL=C");
    assert_string_equal(env[3], "MAELYS_PROVIDER_FD=3");
    assert_null(env[4]);
    assert_string_equal(maelys_execution_request_cwd(req), "/");
    maelys_execution_request_destroy(req);
    maelys__mcpx_resolution_clear(&res);
  }
}

static void test_convert_empty_environment_and_cwd(void** state) {
  (void)state;
  maelys_mcp_executor_spec_t spec = spec_isolated();
  spec.env_count = 0;
  spec.layout = MAELYS_MCP_EXECUTOR_LAYOUT_STDIO;
  maelys_mcp_executor_resolution_t res;
  resolved(&res, MAELYS_EXECUTOR_NETWORK_INHERIT);
  assert_int_equal(maelys_mcp_executor_resolution_set_cwd(&res, "/srv", NULL),
                   0);
  maelys_execution_request_t* req = NULL;
  assert_int_equal(maelys__mcpx_convert(5, &spec, &res, &req, NULL), 0);
  assert_null(maelys_execution_request_environment(req)[0]);
  assert_string_equal(maelys_execution_request_cwd(req), "/srv");
  maelys_execution_request_destroy(req);
  maelys__mcpx_resolution_clear(&res);
}

static void test_convert_environment_additions_by_abi(void** state) {
  (void)state;
  maelys_mcp_executor_spec_t spec = spec_isolated();
  maelys_mcp_executor_resolution_t res;
  maelys_execution_request_t* req = NULL;
  /* ABI 5: the runtime's environment exactly; an addition is refused. */
  resolved(&res, MAELYS_EXECUTOR_NETWORK_NONE);
  assert_int_equal(maelys_mcp_executor_resolution_add_environment(
                       &res, "TMPDIR", "/tmp", NULL),
                   0);
  REFUSED(maelys__mcpx_convert(5, &spec, &res, &req, &err),
          MAELYS_EXECUTOR_ERR_DENIED, "TMPDIR");
  assert_null(req);
  /* ABI 6: added after the base entries, in order. */
  if (maelys__mcpx_convert(6, &spec, &res, &req, NULL) != 0)
    fail_msg("ABI 6 refused an addition");
  const char* const* env = maelys_execution_request_environment(req);
  assert_string_equal(env[3], "MAELYS_PROVIDER_FD=3");
  assert_string_equal(env[4], "TMPDIR=/tmp");
  assert_null(env[5]);
  maelys_execution_request_destroy(req);
  maelys__mcpx_resolution_clear(&res);
  /* ABI 6 never lets an addition replace a base entry. */
  resolved(&res, MAELYS_EXECUTOR_NETWORK_NONE);
  assert_int_equal(maelys_mcp_executor_resolution_add_environment(
                       &res, "PATH", "/evil", NULL),
                   0);
  REFUSED(maelys__mcpx_convert(6, &spec, &res, &req, &err),
          MAELYS_EXECUTOR_ERR_DENIED, "would replace the runtime's");
  maelys__mcpx_resolution_clear(&res);
  /* Nor add one twice. */
  resolved(&res, MAELYS_EXECUTOR_NETWORK_NONE);
  assert_int_equal(
      maelys_mcp_executor_resolution_add_environment(&res, "A", "1", NULL), 0);
  REFUSED(maelys_mcp_executor_resolution_add_environment(&res, "A", "2", &err),
          MAELYS_EXECUTOR_ERR_ARGUMENT, "twice");
  REFUSED(
      maelys_mcp_executor_resolution_add_environment(&res, "B=C", "2", &err),
      MAELYS_EXECUTOR_ERR_ARGUMENT, "without '='");
  maelys__mcpx_resolution_clear(&res);
}

static bool fd_open(int fd) {
  return fcntl(fd, F_GETFD) >= 0;
}

static void test_convert_channels_by_abi(void** state) {
  (void)state;
  maelys_mcp_executor_spec_t spec = spec_isolated();
  maelys_mcp_executor_resolution_t res;
  maelys_execution_request_t* req = NULL;
  int p[2];
  assert_int_equal(pipe2(p, O_CLOEXEC), 0);
  close(p[1]);
  resolved(&res, MAELYS_EXECUTOR_NETWORK_NONE);
  int fd = p[0];
  assert_int_equal(
      maelys_mcp_executor_resolution_add_channel(&res, 4, &fd, NULL), 0);
  assert_int_equal(fd, -1);
  REFUSED(maelys__mcpx_convert(5, &spec, &res, &req, &err),
          MAELYS_EXECUTOR_ERR_DENIED, "child descriptor 4");
  assert_true(fd_open(p[0]));
  /* ABI 6: the descriptor moves into the request, which closes it. */
  assert_int_equal(maelys__mcpx_convert(6, &spec, &res, &req, NULL), 0);
  maelys__mcpx_resolution_clear(&res);
  assert_true(fd_open(p[0]));
  maelys_execution_request_destroy(req);
  assert_false(fd_open(p[0]));
  /* Below 4 is the io mode's and the protocol's: refused, and consumed. */
  assert_int_equal(pipe2(p, O_CLOEXEC), 0);
  close(p[1]);
  resolved(&res, MAELYS_EXECUTOR_NETWORK_NONE);
  fd = p[0];
  REFUSED(maelys_mcp_executor_resolution_add_channel(&res, 3, &fd, &err),
          MAELYS_EXECUTOR_ERR_ARGUMENT, "start at 4");
  assert_int_equal(fd, -1);
  assert_false(fd_open(p[0]));
  maelys__mcpx_resolution_clear(&res);
}

static void test_convert_refusals(void** state) {
  (void)state;
  maelys_mcp_executor_spec_t spec = spec_isolated();
  maelys_mcp_executor_resolution_t res;
  maelys_execution_request_t* req = NULL;
  /* Invariant 14: a non-local platform is refused by name, never
   * translated. */
  resolved(&res, MAELYS_EXECUTOR_NETWORK_NONE);
  spec.platform = "linux-musl-aarch64";
  REFUSED(maelys__mcpx_convert(5, &spec, &res, &req, &err),
          MAELYS_EXECUTOR_ERR_UNSUPPORTED, "\"linux-musl-aarch64\"");
  spec.platform = NULL;
  REFUSED(maelys__mcpx_convert(5, &spec, &res, &req, &err),
          MAELYS_EXECUTOR_ERR_UNSUPPORTED, "only \"local\"");
  spec = spec_isolated();
  REFUSED(maelys__mcpx_convert(4, &spec, &res, &req, &err),
          MAELYS_EXECUTOR_ERR_UNSUPPORTED, "launcher ABI 4");
  REFUSED(maelys__mcpx_convert(7, &spec, &res, &req, &err),
          MAELYS_EXECUTOR_ERR_UNSUPPORTED, "launcher ABI 7");
  spec.argc = 0;
  REFUSED(maelys__mcpx_convert(5, &spec, &res, &req, &err),
          MAELYS_EXECUTOR_ERR_ARGUMENT, "incomplete");
  spec = spec_isolated();
  spec.executable = "relative";
  REFUSED(maelys__mcpx_convert(5, &spec, &res, &req, &err),
          MAELYS_EXECUTOR_ERR_ARGUMENT, "executable relative");
  spec = spec_isolated();
  spec.layout = (maelys_mcp_executor_layout_t)9;
  REFUSED(maelys__mcpx_convert(5, &spec, &res, &req, &err),
          MAELYS_EXECUTOR_ERR_UNSUPPORTED, "descriptor layout 9");
  maelys__mcpx_resolution_clear(&res);
  assert_null(req);
  /* Invariant 15: EXTERNAL_CHANNEL plans are refused by the pure adapter. */
  spec = spec_isolated();
  resolved(&res, MAELYS_EXECUTOR_NETWORK_EXTERNAL_CHANNEL);
  REFUSED(maelys__mcpx_convert(6, &spec, &res, &req, &err),
          MAELYS_EXECUTOR_ERR_DENIED, "EXTERNAL_CHANNEL");
  maelys__mcpx_resolution_clear(&res);
  /* No plan at all. */
  maelys__mcpx_resolution_init(&res);
  REFUSED(maelys__mcpx_convert(5, &spec, &res, &req, &err),
          MAELYS_EXECUTOR_ERR_STATE, "no plan");
  assert_null(req);
}

static void test_resolution_setters(void** state) {
  (void)state;
  maelys_mcp_executor_resolution_t res;
  maelys__mcpx_resolution_init(&res);
  maelys_executor_plan_t* unsealed = NULL;
  assert_int_equal(maelys_executor_plan_create(&unsealed, NULL), 0);
  REFUSED(maelys_mcp_executor_resolution_set_plan(&res, &unsealed, "bubblewrap",
                                                  &err),
          MAELYS_EXECUTOR_ERR_STATE, "not sealed");
  assert_null(unsealed); /* consumed on failure too */
  maelys_executor_plan_t* plan = sealed_plan(MAELYS_EXECUTOR_NETWORK_NONE);
  REFUSED(maelys_mcp_executor_resolution_set_plan(&res, &plan, "", &err),
          MAELYS_EXECUTOR_ERR_ARGUMENT, "backend");
  assert_null(plan);
  plan = sealed_plan(MAELYS_EXECUTOR_NETWORK_NONE);
  assert_int_equal(
      maelys_mcp_executor_resolution_set_plan(&res, &plan, "posix", NULL), 0);
  plan = sealed_plan(MAELYS_EXECUTOR_NETWORK_NONE);
  REFUSED(maelys_mcp_executor_resolution_set_plan(&res, &plan, "posix", &err),
          MAELYS_EXECUTOR_ERR_STATE, "already");
  REFUSED(maelys_mcp_executor_resolution_set_cwd(&res, "tmp", &err),
          MAELYS_EXECUTOR_ERR_ARGUMENT, "absolute");
  maelys_executor_network_t network;
  assert_int_equal(maelys__mcpx_plan_network(res.plan, &network, NULL), 0);
  assert_int_equal(network, MAELYS_EXECUTOR_NETWORK_NONE);
  maelys__mcpx_resolution_clear(&res);
}

/* -------------------------------------------------------------- registry */

#define PLAN_RO                                                                \
  "{\"format\":\"maelys-executor-plan/1\",\"mounts\":[{\"kind\":\"ro-bind\","  \
  "\"source\":\"/usr\",\"destination\":\"/usr\",\"missing\":\"skip\"}],"       \
  "\"network\":{\"mode\":\"none\"},\"root\":{\"disposition\":\"readonly\"}}"

static maelys_executor_result_t registry(const char* json, unsigned abi,
                                         maelys_mcp_executor_registry_t** reg,
                                         char** err) {
  return maelys_mcp_executor_registry_create(json, strlen(json), abi, reg, err);
}

static void test_registry_resolves(void** state) {
  (void)state;
  const char* json =
      "{\"format\":\"maelys-mcp-profiles/1\",\"default\":\"sandboxed\","
      "\"profiles\":{\"sandboxed\":{\"backend\":\"bubblewrap\",\"cwd\":\"/"
      "usr\","
      "\"plan\":" PLAN_RO "}}}";
  maelys_mcp_executor_registry_t* reg = NULL;
  char* error = NULL;
  if (registry(json, 5, &reg, &error) != 0)
    fail_msg("registry: %s", error);
  const maelys_mcp_executor_resolver_t* resolver =
      maelys_mcp_executor_registry_resolver();
  maelys_mcp_executor_spec_t spec = spec_isolated();
  maelys_mcp_executor_resolution_t res;
  /* None named: the registry's default. */
  maelys__mcpx_resolution_init(&res);
  assert_int_equal(resolver->resolve(reg, NULL, &spec, &res, NULL), 0);
  assert_string_equal(res.backend, "bubblewrap");
  assert_string_equal(res.cwd, "/usr");
  assert_true(maelys_executor_plan_is_sealed(res.plan));
  maelys__mcpx_resolution_clear(&res);
  /* Unknown: refused by name. */
  maelys__mcpx_resolution_init(&res);
  REFUSED(resolver->resolve(reg, "seatbelt-readonly", &spec, &res, &err),
          MAELYS_EXECUTOR_ERR_NOT_FOUND, "\"seatbelt-readonly\"");
  assert_null(res.plan);
  resolver->release(reg);
}

static void test_registry_without_default_refuses_none(void** state) {
  (void)state;
  const char* json =
      "{\"format\":\"maelys-mcp-profiles/1\",\"profiles\":{"
      "\"x\":{\"backend\":\"bubblewrap\",\"plan\":" PLAN_RO "}}}";
  maelys_mcp_executor_registry_t* reg = NULL;
  assert_int_equal(registry(json, 5, &reg, NULL), 0);
  maelys_mcp_executor_spec_t spec = spec_isolated();
  maelys_mcp_executor_resolution_t res;
  maelys__mcpx_resolution_init(&res);
  REFUSED(maelys_mcp_executor_registry_resolver()->resolve(reg, NULL, &spec,
                                                           &res, &err),
          MAELYS_EXECUTOR_ERR_NOT_FOUND, "no default");
  maelys_mcp_executor_registry_destroy(reg);
}

static void test_registry_refusals(void** state) {
  (void)state;
  maelys_mcp_executor_registry_t* reg = NULL;
  const int A = MAELYS_EXECUTOR_ERR_ARGUMENT;
  REFUSED(registry("{", 5, &reg, &err), A, "line 1");
  REFUSED(registry("{\"format\":\"x\",\"profiles\":{}}", 5, &reg, &err), A,
          "maelys-mcp-profiles/1");
  REFUSED(registry("{\"format\":\"maelys-mcp-profiles/1\",\"profiles\":{}}", 5,
                   &reg, &err),
          A, "non-empty");
  REFUSED(registry("{\"format\":\"maelys-mcp-profiles/1\",\"extra\":1,"
                   "\"profiles\":{}}",
                   5, &reg, &err),
          A, "\"extra\"");
  REFUSED(
      registry("{\"format\":\"maelys-mcp-profiles/1\",\"default\":\"y\","
               "\"profiles\":{\"x\":{\"backend\":\"posix\",\"plan\":" PLAN_RO
               "}}}",
               5, &reg, &err),
      A, "default must name");
  REFUSED(registry("{\"format\":\"maelys-mcp-profiles/1\",\"profiles\":{\"x\":{"
                   "\"backend\":\"posix\",\"plan\":{\"format\":"
                   "\"maelys-executor-plan/1\"}}}}",
                   5, &reg, &err),
          A, "network must be set explicitly");
  REFUSED(registry("{\"format\":\"maelys-mcp-profiles/1\",\"profiles\":{\"x\":{"
                   "\"backend\":\"posix\",\"plan\":{\"format\":"
                   "\"maelys-executor-plan/1\",\"network\":{\"mode\":\"none\"},"
                   "\"rules\":[{\"path\":\"rel\"}]}}}}",
                   5, &reg, &err),
          A, "profiles.x: plan");
  REFUSED(registry("{\"format\":\"maelys-mcp-profiles/1\",\"profiles\":{\"x\":{"
                   "\"backend\":\"bubblewrap\",\"plan\":{\"format\":"
                   "\"maelys-executor-plan/1\",\"network\":{\"mode\":"
                   "\"external-channel\"},\"channels\":[{\"fd\":4,\"name\":"
                   "\"egress\"}]}}}}",
                   6, &reg, &err),
          MAELYS_EXECUTOR_ERR_DENIED, "EXTERNAL_CHANNEL");
  const char* with_env =
      "{\"format\":\"maelys-mcp-profiles/1\",\"profiles\":{\"x\":{"
      "\"backend\":\"bubblewrap\",\"environment\":[{\"name\":\"TMPDIR\","
      "\"value\":\"/tmp\"}],\"plan\":" PLAN_RO "}}}";
  REFUSED(registry(with_env, 5, &reg, &err), MAELYS_EXECUTOR_ERR_DENIED,
          "need launcher ABI 6");
  assert_int_equal(registry(with_env, 6, &reg, NULL), 0);
  maelys_mcp_executor_registry_destroy(reg);
  REFUSED(registry(with_env, 7, &reg, &err), MAELYS_EXECUTOR_ERR_UNSUPPORTED,
          "ABI 7");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layouts),
      cmocka_unit_test(test_stop_modes),
      cmocka_unit_test(test_exit_statuses),
      cmocka_unit_test(test_budgets),
      cmocka_unit_test(test_convert_isolated_exactly),
      cmocka_unit_test(test_convert_empty_environment_and_cwd),
      cmocka_unit_test(test_convert_environment_additions_by_abi),
      cmocka_unit_test(test_convert_channels_by_abi),
      cmocka_unit_test(test_convert_refusals),
      cmocka_unit_test(test_resolution_setters),
      cmocka_unit_test(test_registry_resolves),
      cmocka_unit_test(test_registry_without_default_refuses_none),
      cmocka_unit_test(test_registry_refusals),
  };
  return cmocka_run_group_tests_name("mcp-convert", tests, NULL, NULL);
}
