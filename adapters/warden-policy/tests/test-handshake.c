/*
 * The five-step capability handshake (seeds/001) on a real executor with the
 * posix and bubblewrap backends registered: step 1 reads the named backend's
 * proved mask, step 2 converts exactly that mask, and step 5 refuses any
 * other backend name, another executor, a changed mask, an unsealed plan or
 * a plan needing what was not proved (invariant 2). Steps 3-4 (compile,
 * lower) are the glue's and are tested with the policy library.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "maelys/warden_policy.h"

typedef struct fixture {
  uv_loop_t loop;
  uv_timer_t watchdog;
  maelys_executor_t* executor;
} fixture_t;

static void on_watchdog(uv_timer_t* t) {
  (void)t;
  fail_msg("watchdog: the test did not finish in time");
}

static void fixture_init(fixture_t* f, bool bubblewrap) {
  memset(f, 0, sizeof *f);
  assert_int_equal(uv_loop_init(&f->loop), 0);
  uv_timer_init(&f->loop, &f->watchdog);
  uv_timer_start(&f->watchdog, on_watchdog, 60000, 0);
  uv_unref((uv_handle_t*)&f->watchdog);
  assert_int_equal(maelys_executor_create(&f->loop, &f->executor, NULL), 0);
  assert_int_equal(maelys_executor_register_backend(
                       f->executor, maelys_backend_posix(), NULL, NULL),
                   0);
  if (bubblewrap) {
    maelys_backend_options_t* o = NULL;
    assert_int_equal(maelys_backend_options_create(&o, NULL), 0);
    assert_int_equal(
        maelys_backend_options_set(o, "helper", MAELYS_HELPER, NULL), 0);
    /* A probe that proves nothing still registers (empty mask); the
     * conversion below is checked against whatever was proved. */
    assert_int_equal(maelys_executor_register_backend(
                         f->executor, maelys_backend_bubblewrap(), o, NULL),
                     0);
    maelys_backend_options_destroy(o);
  }
}

static void fixture_finish(fixture_t* f) {
  assert_int_equal(maelys_executor_destroy(f->executor, NULL), 0);
  uv_close((uv_handle_t*)&f->watchdog, NULL);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&f->loop), 0);
}

/* A sealed plan that needs no capability at all. */
static maelys_executor_plan_t* plan_needing_nothing(void) {
  maelys_executor_plan_t* p = NULL;
  assert_int_equal(maelys_executor_plan_create(&p, NULL), 0);
  assert_int_equal(maelys_executor_plan_set_network(
                       p, MAELYS_EXECUTOR_NETWORK_INHERIT, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_seal(p, NULL), 0);
  return p;
}

/* A sealed plan that needs a filesystem view (what every lowered policy
 * needs). */
static maelys_executor_plan_t* plan_needing_a_sandbox(void) {
  maelys_executor_plan_t* p = NULL;
  assert_int_equal(maelys_executor_plan_create(&p, NULL), 0);
  assert_int_equal(
      maelys_executor_plan_set_root(p, MAELYS_EXECUTOR_ROOT_READONLY, 0, NULL),
      0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       p, "/usr", MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  assert_int_equal(
      maelys_executor_plan_set_network(p, MAELYS_EXECUTOR_NETWORK_NONE, NULL),
      0);
  assert_int_equal(maelys_executor_plan_seal(p, NULL), 0);
  return p;
}

static void expect(maelys_executor_result_t got, maelys_executor_result_t want,
                   char* error, const char* a, const char* b) {
  if (got != want) {
    print_error("expected %s, got %s: %s\n", maelys_executor_result_name(want),
                maelys_executor_result_name(got), error ? error : "");
    fail();
  }
  assert_non_null(error);
  const char* text = error ? error : "";
  if (a != NULL && strstr(text, a) == NULL)
    fail_msg("diagnostic '%s' lacks '%s'", text, a);
  if (b != NULL && strstr(text, b) == NULL)
    fail_msg("diagnostic '%s' lacks '%s'", text, b);
  maelys_executor_error_free(error);
}

static void test_steps_1_and_2_convert_the_named_mask(void** state) {
  (void)state;
  maelys_executor_result_t got;
  fixture_t f;
  fixture_init(&f, true);
  const char* names[] = {"posix", "bubblewrap"};
  for (int i = 0; i < 2; i++) {
    maelys_warden_policy_handshake_t* h = NULL;
    char* error = NULL;
    if (maelys_warden_policy_handshake_begin(f.executor, names[i], &h,
                                             &error) != 0)
      fail_msg("begin %s: %s", names[i], error ? error : "");
    uint64_t mask = 0;
    assert_int_equal(
        maelys_executor_backend_capabilities(f.executor, names[i], &mask, NULL),
        0);
    uint64_t caps = 0;
    assert_int_equal(
        maelys_warden_policy_capabilities_from_executor(mask, &caps, NULL), 0);
    assert_int_equal(maelys_warden_policy_handshake_executor_mask(h), mask);
    assert_int_equal(maelys_warden_policy_handshake_capabilities(h), caps);
    assert_string_equal(maelys_warden_policy_handshake_backend(h), names[i]);
    if (i == 0)
      assert_int_equal(caps, 0); /* POSIX maps to nothing portable */
    maelys_warden_policy_handshake_destroy(h);
  }
  maelys_warden_policy_handshake_t* h = (void*)1;
  char* error = NULL;
  got =
      maelys_warden_policy_handshake_begin(f.executor, "landlock", &h, &error);
  expect(got, MAELYS_EXECUTOR_ERR_NOT_FOUND, error, "'landlock'", NULL);
  assert_null(h);
  fixture_finish(&f);
}

/* The test the issue asks for: the name changes between steps 1 and 5. */
static void test_step_5_refuses_another_backend_name(void** state) {
  (void)state;
  maelys_executor_result_t got;
  fixture_t f;
  fixture_init(&f, true);
  maelys_warden_policy_handshake_t* h = NULL;
  assert_int_equal(
      maelys_warden_policy_handshake_begin(f.executor, "bubblewrap", &h, NULL),
      0);
  maelys_executor_plan_t* plan = plan_needing_nothing();
  maelys_execution_request_t* req = NULL;
  assert_int_equal(maelys_execution_request_create(&req, NULL), 0);
  char* error = NULL;
  got = maelys_warden_policy_handshake_finish(h, f.executor, "posix", plan, req,
                                              &error);
  expect(got, MAELYS_EXECUTOR_ERR_DENIED, error, "'posix'", "'bubblewrap'");
  /* Nothing was set on the request: spawning it is refused (no backend). */
  maelys_execution_t* e = NULL;
  error = NULL;
  assert_int_not_equal(
      maelys_execution_spawn(f.executor, plan, req, &e, &error), 0);
  assert_null(e);
  maelys_executor_error_free(error);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  maelys_warden_policy_handshake_destroy(h);
  fixture_finish(&f);
}

static void test_step_5_refuses_another_executor(void** state) {
  (void)state;
  maelys_executor_result_t got;
  fixture_t f, g;
  fixture_init(&f, false);
  fixture_init(&g, false);
  maelys_warden_policy_handshake_t* h = NULL;
  assert_int_equal(
      maelys_warden_policy_handshake_begin(f.executor, "posix", &h, NULL), 0);
  maelys_executor_plan_t* plan = plan_needing_nothing();
  maelys_execution_request_t* req = NULL;
  assert_int_equal(maelys_execution_request_create(&req, NULL), 0);
  char* error = NULL;
  got = maelys_warden_policy_handshake_finish(h, g.executor, "posix", plan, req,
                                              &error);
  expect(got, MAELYS_EXECUTOR_ERR_DENIED, error, "another executor", NULL);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  maelys_warden_policy_handshake_destroy(h);
  fixture_finish(&g);
  fixture_finish(&f);
}

static void test_step_5_refuses_what_was_not_proved(void** state) {
  (void)state;
  maelys_executor_result_t got;
  fixture_t f;
  fixture_init(&f, false);
  maelys_warden_policy_handshake_t* h = NULL;
  assert_int_equal(
      maelys_warden_policy_handshake_begin(f.executor, "posix", &h, NULL), 0);
  maelys_executor_plan_t* plan = plan_needing_a_sandbox();
  maelys_execution_request_t* req = NULL;
  assert_int_equal(maelys_execution_request_create(&req, NULL), 0);
  char* error = NULL;
  got = maelys_warden_policy_handshake_finish(h, f.executor, "posix", plan, req,
                                              &error);
  expect(got, MAELYS_EXECUTOR_ERR_CAPABILITY, error, "'posix'",
         "did not prove");
  maelys_executor_plan_destroy(plan);

  /* An unsealed plan is refused before anything is looked up. */
  assert_int_equal(maelys_executor_plan_create(&plan, NULL), 0);
  error = NULL;
  got = maelys_warden_policy_handshake_finish(h, f.executor, "posix", plan, req,
                                              &error);
  expect(got, MAELYS_EXECUTOR_ERR_STATE, error, "not sealed", NULL);
  maelys_executor_plan_destroy(plan);
  maelys_execution_request_destroy(req);
  maelys_warden_policy_handshake_destroy(h);
  fixture_finish(&f);
}

static bool exited;
static int exit_code = -1;

static void on_exit_cb(maelys_execution_t* e,
                       const maelys_execution_status_t* s, void* data) {
  (void)e;
  (void)data;
  exited = true;
  exit_code = s->outcome == MAELYS_EXEC_OUTCOME_EXITED ? s->exit_code : -1;
}

static void test_step_5_sets_the_checked_name(void** state) {
  (void)state;
  fixture_t f;
  fixture_init(&f, false);
  maelys_warden_policy_handshake_t* h = NULL;
  assert_int_equal(
      maelys_warden_policy_handshake_begin(f.executor, "posix", &h, NULL), 0);
  maelys_executor_plan_t* plan = plan_needing_nothing();
  maelys_execution_request_t* req = NULL;
  assert_int_equal(maelys_execution_request_create(&req, NULL), 0);
  const char* argv[] = {"/usr/bin/true", NULL};
  assert_int_equal(maelys_execution_request_set_executable(req, argv[0], NULL),
                   0);
  assert_int_equal(maelys_execution_request_set_argv(req, argv, NULL), 0);
  char* error = NULL;
  if (maelys_warden_policy_handshake_finish(h, f.executor, "posix", plan, req,
                                            &error) != 0)
    fail_msg("finish: %s", error ? error : "");
  /* The request now names the backend: it spawns. */
  maelys_execution_t* e = NULL;
  if (maelys_execution_spawn(f.executor, plan, req, &e, &error) != 0)
    fail_msg("spawn: %s", error ? error : "");
  exited = false;
  assert_int_equal(maelys_execution_wait(e, on_exit_cb, NULL, NULL), 0);
  uv_ref((uv_handle_t*)&f.watchdog);
  while (!exited)
    uv_run(&f.loop, UV_RUN_ONCE);
  uv_unref((uv_handle_t*)&f.watchdog);
  assert_int_equal(exit_code, 0);
  maelys_execution_release(e);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  maelys_warden_policy_handshake_destroy(h);
  fixture_finish(&f);
}

static void test_bad_arguments(void** state) {
  (void)state;
  fixture_t f;
  fixture_init(&f, false);
  maelys_warden_policy_handshake_t* h = NULL;
  assert_int_equal(
      maelys_warden_policy_handshake_begin(NULL, "posix", &h, NULL),
      MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_int_equal(
      maelys_warden_policy_handshake_begin(f.executor, "", &h, NULL),
      MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_int_equal(
      maelys_warden_policy_handshake_begin(f.executor, "posix", NULL, NULL),
      MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_int_equal(
      maelys_warden_policy_handshake_begin(f.executor, "posix", &h, NULL), 0);
  assert_int_equal(maelys_warden_policy_handshake_finish(h, f.executor, NULL,
                                                         NULL, NULL, NULL),
                   MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_int_equal(maelys_warden_policy_handshake_capabilities(NULL), 0);
  assert_null(maelys_warden_policy_handshake_backend(NULL));
  maelys_warden_policy_handshake_destroy(h);
  maelys_warden_policy_handshake_destroy(NULL);
  fixture_finish(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_steps_1_and_2_convert_the_named_mask),
      cmocka_unit_test(test_step_5_refuses_another_backend_name),
      cmocka_unit_test(test_step_5_refuses_another_executor),
      cmocka_unit_test(test_step_5_refuses_what_was_not_proved),
      cmocka_unit_test(test_step_5_sets_the_checked_name),
      cmocka_unit_test(test_bad_arguments),
  };
  return cmocka_run_group_tests_name("warden-policy handshake", tests, NULL,
                                     NULL);
}
