/*
 * Refusals through mcp-runtime's own public entry points, linked with the
 * example hook. Each is an error naming what is at fault, and none launches
 * anything: every spawn carries this run's marker in its argv, and no
 * process with it may exist afterwards.
 *
 * Built twice. With the working hook: an unknown profile (native and proxy),
 * a resolver error and an EXTERNAL_CHANNEL plan, plus the positive twin (the
 * same provider, no profile named, launched sandboxed and answering). With
 * MCPX_BROKEN_HOOK, a hook whose sandbox cannot be proved: every launch,
 * whatever its profile, fails with the hook's diagnostic and nothing falls
 * back to the stock launcher (which is not linked).
 */
#include <setjmp.h>
#include <stdbool.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "maelys/mcp.h"
#include "maelys/mcp-executor.h"
#include "marked.h"

static char marker[64];

static maelys_mcp_provider_process_options_t native(void) {
  maelys_mcp_provider_process_options_t o = {.executable_path =
                                                 MCPX_EXAMPLE_PROVIDER,
                                             .max_message_bytes = 65536,
                                             .describe_timeout_ms = 20000,
                                             .call_timeout_ms = 10000,
                                             .shutdown_timeout_ms = 2000};
  return o;
}

static void expect_refused(maelys_mcp_result_t r, maelys_mcp_provider_t* p,
                           char* error, const char* needle) {
  if (r == MAELYS_MCP_OK || p != NULL)
    fail_msg("launched, wanted a refusal naming '%s'", needle);
  if (error == NULL || strstr(error, needle) == NULL)
    fail_msg("diagnostic '%s' does not name '%s'", error ? error : "", needle);
  free(error);
  assert_int_equal(marked_pids(marker, NULL, 0), 0);
}

#ifndef MCPX_BROKEN_HOOK

static void test_unknown_profile(void** state) {
  (void)state;
  maelys_mcp_provider_process_options_t o = native();
  char* const args[] = {marker, NULL};
  maelys_mcp_provider_t* p = NULL;
  char* error = NULL;
  maelys_mcp_result_t r = maelys_mcp_provider_spawn_with_args(
      &o, args, "seatbelt-readonly", &p, &error);
  assert_int_equal(r, MAELYS_MCP_ERR_ARGUMENT);
  expect_refused(r, p, error, "\"seatbelt-readonly\"");
  char* const argv[] = {(char*)MCPX_EXAMPLE_PROVIDER, marker, NULL};
  maelys_mcp_proxy_options_t proxy = {.executable_path = MCPX_EXAMPLE_PROVIDER,
                                      .argv = argv,
                                      .max_message_bytes = 65536,
                                      .connect_timeout_ms = 5000,
                                      .call_timeout_ms = 5000};
  error = NULL;
  r = maelys_mcp_provider_proxy_spawn_with_profile(&proxy, "no-such-profile",
                                                   &p, NULL, &error);
  expect_refused(r, p, error, "\"no-such-profile\"");
}

static maelys_executor_result_t setup(maelys_executor_t* executor, void* data,
                                      char** out_error) {
  (void)data;
  maelys_backend_options_t* o = NULL;
  maelys_executor_result_t r = maelys_backend_options_create(&o, out_error);
  if (r == 0)
    r = maelys_backend_options_set(o, "helper", MAELYS_HELPER, out_error);
  if (r == 0)
    r = maelys_executor_register_backend(executor, maelys_backend_bubblewrap(),
                                         o, out_error);
  maelys_backend_options_destroy(o);
  return r;
}

static maelys_executor_result_t resolve(void* data, const char* profile,
                                        const maelys_mcp_executor_spec_t* spec,
                                        maelys_mcp_executor_resolution_t* res,
                                        char** out_error) {
  (void)data;
  (void)profile;
  /* A native provider's argv is {path, "--provider"}: its profile store
   * "fails"; anything else (the proxy upstream) gets an EXTERNAL_CHANNEL
   * plan. */
  if (spec->argc >= 2 && strcmp(spec->argv[1], "--provider") == 0) {
    if (out_error != NULL)
      *out_error = strdup("the policy service did not answer");
    return MAELYS_EXECUTOR_ERR_IO;
  }
  maelys_executor_plan_t* plan = NULL;
  maelys_executor_plan_create(&plan, NULL);
  maelys_executor_plan_set_root(plan, MAELYS_EXECUTOR_ROOT_READONLY, 0, NULL);
  maelys_executor_plan_add_bind(plan, "/usr", "/usr", 0,
                                MAELYS_EXECUTOR_MISSING_FAIL, NULL);
  maelys_executor_plan_set_network(
      plan, MAELYS_EXECUTOR_NETWORK_EXTERNAL_CHANNEL, NULL);
  maelys_executor_plan_add_channel(plan, 4, "egress", NULL);
  maelys_executor_result_t r = maelys_executor_plan_seal(plan, out_error);
  if (r != 0) {
    maelys_executor_plan_destroy(plan);
    return r;
  }
  return maelys_mcp_executor_resolution_set_plan(res, &plan, "bubblewrap",
                                                 out_error);
}

static const maelys_mcp_executor_resolver_t resolver = {resolve, NULL};

static void test_resolver_error_and_external_channel(void** state) {
  (void)state;
  maelys_mcp_executor_host_t* host = NULL;
  char* err = NULL;
  if (maelys_mcp_executor_host_create(setup, NULL, &host, &err) != 0)
    fail_msg("host: %s", err);
  maelys_mcp_process_launcher_t* launcher = NULL;
  assert_int_equal(maelys_mcp_executor_launcher_create(host, &resolver, NULL,
                                                       &launcher, NULL),
                   0);
  maelys_mcp_executor_host_release(host);
  /* The native provider names no profile: this resolver fails. */
  maelys_mcp_provider_process_options_t o = native();
  maelys_mcp_provider_t* p = NULL;
  char* error = NULL;
  maelys_mcp_result_t r =
      maelys_mcp_provider_spawn_with_launcher(&o, launcher, &p, &error);
  expect_refused(r, p, error, "the policy service did not answer");
  /* A proxy upstream: the profile resolves to an EXTERNAL_CHANNEL plan. */
  char* const argv[] = {(char*)MCPX_EXAMPLE_PROVIDER, marker, NULL};
  maelys_mcp_proxy_options_t proxy = {.executable_path = MCPX_EXAMPLE_PROVIDER,
                                      .argv = argv,
                                      .max_message_bytes = 65536,
                                      .connect_timeout_ms = 5000,
                                      .call_timeout_ms = 5000};
  error = NULL;
  r = maelys_mcp_provider_proxy_spawn_with_launcher(&proxy, launcher, &p, NULL,
                                                    &error);
  expect_refused(r, p, error, "EXTERNAL_CHANNEL");
  maelys_mcp_process_launcher_release(launcher);
}

static void test_positive_twin(void** state) {
  (void)state;
  /* The same provider, no profile named: the registry's sandboxed default
   * launches it, it describes itself, and teardown leaves nothing. */
  maelys_mcp_provider_process_options_t o = native();
  char tag[96];
  snprintf(tag, sizeof tag, "%s-twin", marker);
  char* const args[] = {tag, NULL};
  maelys_mcp_provider_t* p = NULL;
  char* error = NULL;
  maelys_mcp_result_t r =
      maelys_mcp_provider_spawn_with_args(&o, args, NULL, &p, &error);
  if (r != MAELYS_MCP_OK)
    fail_msg("the sandboxed default did not launch: %s", error);
  /* Sandboxed: the provider (the marked process whose image is the
   * provider, not the sandbox's helper) is in a pid namespace of its own. */
  int pids[8];
  int n = marked_pids(tag, pids, 8);
  bool namespaced = false;
  for (int i = 0; i < n && i < 8; i++) {
    char path[64], exe[4096], line[256];
    snprintf(path, sizeof path, "/proc/%d/exe", pids[i]);
    ssize_t len = readlink(path, exe, sizeof exe - 1);
    if (len <= 0)
      continue;
    exe[len] = '\0';
    if (strstr(exe, "adversarial-provider") == NULL &&
        strstr(exe, "example-provider") == NULL)
      continue;
    snprintf(path, sizeof path, "/proc/%d/status", pids[i]);
    FILE* f = fopen(path, "r");
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
      if (strncmp(line, "NSpid:", 6) == 0) {
        /* "NSpid:\t<host pid>\t<pid inside>": one tab per namespace. */
        int tabs = 0;
        for (const char* c = line; *c != '\0'; c++)
          tabs += *c == '\t';
        namespaced = namespaced || tabs >= 2;
      }
    if (f != NULL)
      fclose(f);
  }
  assert_true(namespaced);
  maelys_mcp_provider_destroy(p);
  assert_int_equal(marked_pids(tag, NULL, 0), 0);
}

#else

static void test_failed_hook(void** state) {
  (void)state;
  maelys_mcp_process_launcher_t* launcher = NULL;
  char* error = NULL;
  maelys_mcp_result_t r = maelys_mcp_posix_launcher_create(&launcher, &error);
  assert_int_not_equal(r, MAELYS_MCP_OK);
  assert_null(launcher);
  if (error == NULL || strstr(error, "profile sandboxed needs") == NULL)
    fail_msg("hook diagnostic: '%s'", error ? error : "");
  free(error);
  /* Every provider entry point that uses the hook fails with it: the
   * sandboxed default, the explicit unconfined profile, a proxy. */
  maelys_mcp_provider_process_options_t o = native();
  char* const args[] = {marker, NULL};
  maelys_mcp_provider_t* p = NULL;
  error = NULL;
  r = maelys_mcp_provider_spawn_with_args(&o, args, NULL, &p, &error);
  expect_refused(r, p, error, "needs");
  error = NULL;
  r = maelys_mcp_provider_spawn_with_args(&o, args, "trusted-local", &p,
                                          &error);
  expect_refused(r, p, error, "needs");
  char* const argv[] = {(char*)MCPX_EXAMPLE_PROVIDER, marker, NULL};
  maelys_mcp_proxy_options_t proxy = {.executable_path = MCPX_EXAMPLE_PROVIDER,
                                      .argv = argv,
                                      .max_message_bytes = 65536,
                                      .connect_timeout_ms = 5000,
                                      .call_timeout_ms = 5000};
  error = NULL;
  r = maelys_mcp_provider_proxy_spawn(&proxy, &p, NULL, &error);
  expect_refused(r, p, error, "needs");
}

#endif

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  snprintf(marker, sizeof marker, "mcpx-refusal-%d", (int)getpid());
  const struct CMUnitTest tests[] = {
#ifndef MCPX_BROKEN_HOOK
      cmocka_unit_test(test_unknown_profile),
      cmocka_unit_test(test_resolver_error_and_external_channel),
      cmocka_unit_test(test_positive_twin),
#else
      cmocka_unit_test(test_failed_hook),
#endif
  };
  return cmocka_run_group_tests_name("mcp-runtime-refusals", tests, NULL, NULL);
}
