/*
 * End to end under bubblewrap, with the real policy library: a policy whose
 * READ rule must be readable, whose DENY must be denied and whose network
 * NONE must refuse a socket, compiled through the five-step handshake,
 * lowered by the glue (and by the MIR-file entry point, and by the example
 * registry host) and enforced by a real sandbox. Runs as root (the payload
 * then runs under the backend's unprivileged identity) and as an
 * unprivileged user. Exit 77 (skipped) when bubblewrap cannot confine here,
 * unless MAELYS_BWRAP_MUST_WORK=1 makes that a failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "maelys/warden_policy_adapter.h"

extern char** environ;

/* What a policy needs from the backend in these tests. */
static const uint64_t needed = MAELYS_WARDEN_POLICY_CAP_FS_READ |
                               MAELYS_WARDEN_POLICY_CAP_FS_DENY |
                               MAELYS_WARDEN_POLICY_CAP_NETWORK_NONE |
                               MAELYS_WARDEN_POLICY_CAP_PROCESS_TREE;

typedef struct world {
  uv_loop_t loop;
  uv_timer_t watchdog;
  maelys_executor_t* executor;
  char dir[64];
  char ws[128], data[160], pub[192], secret[192], outside[128], mir_path[128];
  const char* roots[8];
  maelys_warden_policy_host_t host;
  maelys_warden_policy_mount_t mounts[3];
  maelys_warden_policy_options_t run;
  maelys_mir_t* mir;
} world_t;

static world_t w;

static void on_watchdog(uv_timer_t* t) {
  (void)t;
  fail_msg("watchdog: the test did not finish in time");
}

static void write_text(const char* path, const char* text) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
}

static maelys_mir_t* policy(void) {
  maelys_mir_builder_t* b = NULL;
  assert_int_equal(maelys_mir_builder_create(&b, NULL), 0);
  assert_int_equal(maelys_mir_builder_add_fs_rule(
                       b, MAELYS_MIR_FS_READ, MAELYS_MIR_ROOT_MINIMAL_RUNTIME,
                       "", MAELYS_MIR_SCOPE_TREE, MAELYS_MIR_MISSING_ERROR,
                       NULL),
                   0);
  assert_int_equal(maelys_mir_builder_add_fs_rule(
                       b, MAELYS_MIR_FS_READ, MAELYS_MIR_ROOT_WORKSPACE, "data",
                       MAELYS_MIR_SCOPE_TREE, MAELYS_MIR_MISSING_ERROR, NULL),
                   0);
  assert_int_equal(maelys_mir_builder_add_fs_rule(
                       b, MAELYS_MIR_FS_DENY, MAELYS_MIR_ROOT_WORKSPACE,
                       "data/secret.txt", MAELYS_MIR_SCOPE_EXACT,
                       MAELYS_MIR_MISSING_ERROR, NULL),
                   0);
  /* The probe itself, wherever the build put it. */
  assert_int_equal(maelys_mir_builder_add_fs_rule(
                       b, MAELYS_MIR_FS_READ, MAELYS_MIR_ROOT_HOST,
                       WARDEN_POLICY_PROBE, MAELYS_MIR_SCOPE_EXACT,
                       MAELYS_MIR_MISSING_ERROR, NULL),
                   0);
  assert_int_equal(
      maelys_mir_builder_set_network(b, MAELYS_MIR_NETWORK_NONE, NULL), 0);
  assert_int_equal(
      maelys_mir_builder_set_root_mode(b, MAELYS_MIR_ROOT_READ_ONLY, NULL), 0);
  assert_int_equal(maelys_mir_builder_set_process_tree_required(b, 1, NULL), 0);
  maelys_mir_t* mir = NULL;
  assert_int_equal(maelys_mir_builder_build(b, &mir, NULL), 0);
  maelys_mir_builder_destroy(b);
  return mir;
}

static int setup(void** state) {
  (void)state;
  memset(&w, 0, sizeof w);
  assert_int_equal(uv_loop_init(&w.loop), 0);
  uv_timer_init(&w.loop, &w.watchdog);
  uv_timer_start(&w.watchdog, on_watchdog, 240000, 0);
  uv_unref((uv_handle_t*)&w.watchdog);
  assert_int_equal(maelys_executor_create(&w.loop, &w.executor, NULL), 0);
  assert_int_equal(maelys_executor_register_backend(
                       w.executor, maelys_backend_posix(), NULL, NULL),
                   0);
  maelys_backend_options_t* o = NULL;
  assert_int_equal(maelys_backend_options_create(&o, NULL), 0);
  assert_int_equal(maelys_backend_options_set(o, "helper", MAELYS_HELPER, NULL),
                   0);
  assert_int_equal(maelys_executor_register_backend(
                       w.executor, maelys_backend_bubblewrap(), o, NULL),
                   0);
  maelys_backend_options_destroy(o);

  snprintf(w.dir, sizeof w.dir, "/tmp/maelys-wp-sandbox.XXXXXX");
  assert_non_null(mkdtemp(w.dir));
  snprintf(w.ws, sizeof w.ws, "%s/ws", w.dir);
  snprintf(w.data, sizeof w.data, "%s/data", w.ws);
  snprintf(w.pub, sizeof w.pub, "%s/public.txt", w.data);
  snprintf(w.secret, sizeof w.secret, "%s/secret.txt", w.data);
  snprintf(w.outside, sizeof w.outside, "%s/outside.txt", w.dir);
  snprintf(w.mir_path, sizeof w.mir_path, "%s/policy.mir", w.dir);
  assert_int_equal(mkdir(w.ws, 0700), 0);
  assert_int_equal(mkdir(w.data, 0700), 0);
  write_text(w.pub, "hello");
  write_text(w.secret, "secret");
  write_text(w.outside, "outside");

  /* The minimal runtime: whichever of these exist (merged-/usr systems have
   * links at /lib, /lib64 and /bin, which the glue recreates inside). */
  static const char* const candidates[] = {"/usr", "/lib", "/lib64", "/bin"};
  size_t n = 0;
  for (size_t i = 0; i < 4; i++)
    if (access(candidates[i], F_OK) == 0)
      w.roots[n++] = candidates[i];
  w.host.workspace = w.ws;
  w.host.minimal_runtime_roots = w.roots;
  w.host.minimal_runtime_root_count = n;
  w.mounts[0] = (maelys_warden_policy_mount_t){MAELYS_WARDEN_POLICY_MOUNT_PROC,
                                               "/proc", NULL, 0};
  w.mounts[1] = (maelys_warden_policy_mount_t){MAELYS_WARDEN_POLICY_MOUNT_DEV,
                                               "/dev", NULL, 0};
  w.mounts[2] = (maelys_warden_policy_mount_t){MAELYS_WARDEN_POLICY_MOUNT_TMPFS,
                                               "/tmp", NULL, 1u << 20};
  w.run.mounts = w.mounts;
  w.run.mount_count = 3;
  w.mir = policy();
  uint8_t* bytes = NULL;
  size_t size = 0;
  assert_int_equal(maelys_mir_encode(w.mir, &bytes, &size, NULL), 0);
  int fd = open(w.mir_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, bytes, size), (ssize_t)size);
  close(fd);
  maelys_mir_bytes_free(bytes);
  return 0;
}

static int remove_one(const char* path, const struct stat* st, int flag,
                      struct FTW* ftw) {
  (void)st;
  (void)ftw;
  return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static int teardown(void** state) {
  (void)state;
  maelys_mir_destroy(w.mir);
  assert_int_equal(nftw(w.dir, remove_one, 16, FTW_DEPTH | FTW_PHYS), 0);
  assert_int_equal(maelys_executor_destroy(w.executor, NULL), 0);
  uv_close((uv_handle_t*)&w.watchdog, NULL);
  uv_run(&w.loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&w.loop), 0);
  return 0;
}

/* ------------------------------------------------------------- running */

static bool exited;
static maelys_execution_status_t status;

static void on_exit_cb(maelys_execution_t* e,
                       const maelys_execution_status_t* s, void* data) {
  (void)e;
  (void)data;
  status = *s;
  exited = true;
}

static maelys_execution_request_t* probe_request(const char* a, const char* b,
                                                 const char* c) {
  maelys_execution_request_t* req = NULL;
  assert_int_equal(maelys_execution_request_create(&req, NULL), 0);
  const char* argv[] = {WARDEN_POLICY_PROBE, a, b, c, NULL};
  assert_int_equal(
      maelys_execution_request_set_executable(req, WARDEN_POLICY_PROBE, NULL),
      0);
  assert_int_equal(maelys_execution_request_set_argv(req, argv, NULL), 0);
  assert_int_equal(maelys_execution_request_set_io_mode(
                       req, MAELYS_EXEC_IO_INHERIT, -1, NULL),
                   0);
  return req;
}

/* Step 5 on a new request, the run, and the probe's exit status. */
static int run_probe(const maelys_warden_policy_handshake_t* h,
                     const maelys_executor_plan_t* plan, const char* a,
                     const char* b, const char* c) {
  maelys_execution_request_t* req = probe_request(a, b, c);
  char* error = NULL;
  if (maelys_warden_policy_handshake_finish(h, w.executor, "bubblewrap", plan,
                                            req, &error) != 0)
    fail_msg("step 5: %s", error ? error : "");
  maelys_execution_t* e = NULL;
  if (maelys_execution_spawn(w.executor, plan, req, &e, &error) != 0)
    fail_msg("spawn: %s", error ? error : "");
  exited = false;
  assert_int_equal(maelys_execution_wait(e, on_exit_cb, NULL, NULL), 0);
  uv_ref((uv_handle_t*)&w.watchdog);
  while (!exited)
    uv_run(&w.loop, UV_RUN_ONCE);
  uv_unref((uv_handle_t*)&w.watchdog);
  maelys_execution_release(e);
  maelys_execution_request_destroy(req);
  if (status.outcome != MAELYS_EXEC_OUTCOME_EXITED)
    fail_msg("probe %s did not exit: outcome %d, %s: %s", a,
             (int)status.outcome, status.launch_step ? status.launch_step : "",
             status.message ? status.message : "");
  return status.exit_code;
}

/* The three promises of the policy, and two of what it leaves out. */
static void check_enforced(const maelys_warden_policy_handshake_t* h,
                           const maelys_executor_plan_t* plan) {
  assert_int_equal(run_probe(h, plan, "read", w.pub, "hello"), 0);
  assert_int_equal(run_probe(h, plan, "read", w.secret, NULL), 3);
  assert_int_equal(run_probe(h, plan, "socket", NULL, NULL), 3);
  assert_int_equal(run_probe(h, plan, "read", w.outside, NULL), 4);
  assert_int_equal(run_probe(h, plan, "write", w.pub, NULL), 3);
}

static maelys_warden_policy_handshake_t* begin(void) {
  maelys_warden_policy_handshake_t* h = NULL;
  char* error = NULL;
  if (maelys_warden_policy_handshake_begin(w.executor, "bubblewrap", &h,
                                           &error) != 0)
    fail_msg("steps 1-2: %s", error ? error : "");
  return h;
}

/* ---------------------------------------------------------------- tests */

static void test_glue_enforced_by_bubblewrap(void** state) {
  (void)state;
  maelys_warden_policy_handshake_t* h = begin();
  maelys_sandbox_policy_host_t* ctx = NULL;
  assert_int_equal(
      maelys_warden_policy_host_context_create(&w.host, &ctx, NULL), 0);
  maelys_sandbox_policy_capabilities_t caps = 0;
  assert_int_equal(
      maelys_warden_policy_library_capabilities(
          maelys_warden_policy_handshake_capabilities(h), &caps, NULL),
      0);
  maelys_sandbox_policy_plan_t* compiled = NULL;
  char* perr = NULL;
  if (maelys_sandbox_policy_compile(w.mir, ctx, caps, &compiled, &perr) != 0)
    fail_msg("step 3: %s", perr ? perr : "");
  maelys_warden_sandbox_policy_options_t o = {&w.run, w.mir, &w.host};
  maelys_executor_plan_t* plan = NULL;
  char* error = NULL;
  if (maelys_warden_plan_from_sandbox_policy(compiled, &o, &plan, &error) != 0)
    fail_msg("step 4: %s", error ? error : "");
  check_enforced(h, plan);
  maelys_executor_plan_destroy(plan);
  maelys_sandbox_policy_plan_destroy(compiled);
  maelys_sandbox_policy_host_destroy(ctx);
  maelys_warden_policy_handshake_destroy(h);
}

static void test_policy_file_enforced_by_bubblewrap(void** state) {
  (void)state;
  maelys_warden_policy_handshake_t* h = begin();
  maelys_executor_plan_t* plan = NULL;
  char* error = NULL;
  if (maelys_warden_policy_plan_from_file(w.mir_path, h, &w.host, &w.run, &plan,
                                          &error) != 0)
    fail_msg("from file: %s", error ? error : "");
  check_enforced(h, plan);
  maelys_executor_plan_destroy(plan);
  maelys_warden_policy_handshake_destroy(h);
}

/* Checked against bubblewrap, enforced by posix: refused by the handshake,
 * and by the Executor itself when a host skips the handshake. */
static void test_backend_changed_between_steps_refused(void** state) {
  (void)state;
  maelys_warden_policy_handshake_t* h = begin();
  maelys_executor_plan_t* plan = NULL;
  assert_int_equal(maelys_warden_policy_plan_from_file(w.mir_path, h, &w.host,
                                                       &w.run, &plan, NULL),
                   0);
  maelys_execution_request_t* req = probe_request("socket", NULL, NULL);
  char* error = NULL;
  assert_int_equal(maelys_warden_policy_handshake_finish(h, w.executor, "posix",
                                                         plan, req, &error),
                   MAELYS_EXECUTOR_ERR_DENIED);
  assert_non_null(strstr(error ? error : "", "invariant 2"));
  maelys_executor_error_free(error);
  error = NULL;
  assert_int_equal(maelys_execution_request_set_backend(req, "posix", NULL), 0);
  maelys_execution_t* e = NULL;
  assert_int_equal(maelys_execution_spawn(w.executor, plan, req, &e, &error),
                   MAELYS_EXECUTOR_ERR_CAPABILITY);
  assert_null(e);
  maelys_executor_error_free(error);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  maelys_warden_policy_handshake_destroy(h);
}

/* Runs the example registry host; returns its exit status and keeps the
 * first bytes of its standard error in `err`. */
static int registry(const char* enforce, const char* what, const char* path,
                    const char* expected, char* err, size_t errsize) {
  const char* argv[32];
  size_t n = 0;
  argv[n++] = WARDEN_POLICY_REGISTRY;
  argv[n++] = "--helper";
  argv[n++] = MAELYS_HELPER;
  if (enforce != NULL) {
    argv[n++] = "--enforce-backend";
    argv[n++] = enforce;
  }
  argv[n++] = "--workspace";
  argv[n++] = w.ws;
  for (size_t i = 0; i < w.host.minimal_runtime_root_count; i++) {
    argv[n++] = "--runtime";
    argv[n++] = w.roots[i];
  }
  argv[n++] = "--proc";
  argv[n++] = "--policy";
  argv[n++] = w.mir_path;
  argv[n++] = "--";
  argv[n++] = WARDEN_POLICY_PROBE;
  argv[n++] = what;
  if (path != NULL)
    argv[n++] = path;
  if (expected != NULL)
    argv[n++] = expected;
  argv[n] = NULL;
  int fds[2];
  assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  pid_t pid = 0;
  assert_int_equal(posix_spawn(&pid, WARDEN_POLICY_REGISTRY, &fa, NULL,
                               (char* const*)argv, environ),
                   0);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  size_t got = 0;
  for (;;) {
    char buf[512];
    ssize_t r = read(fds[0], buf, sizeof buf);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    size_t k = (size_t)r < errsize - 1 - got ? (size_t)r : errsize - 1 - got;
    memcpy(err + got, buf, k);
    got += k;
  }
  err[got] = '\0';
  close(fds[0]);
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  return WEXITSTATUS(st);
}

static void test_registry_host_example(void** state) {
  (void)state;
  char err[4096];
  int rc = registry(NULL, "read", w.pub, "hello", err, sizeof err);
  if (rc != 0)
    fail_msg("registry host, readable: exit %d: %s", rc, err);
  assert_non_null(strstr(err, "decision sha256:"));
  assert_int_equal(registry(NULL, "read", w.secret, NULL, err, sizeof err), 3);
  assert_int_equal(registry(NULL, "socket", NULL, NULL, err, sizeof err), 3);
  /* The backend name changed between steps 1 and 5: refused, nothing ran. */
  rc = registry("posix", "read", w.pub, "hello", err, sizeof err);
  assert_int_equal(rc, 1);
  if (strstr(err, "step 5: DENIED") == NULL || strstr(err, "'posix'") == NULL ||
      strstr(err, "'bubblewrap'") == NULL)
    fail_msg("registry host, changed backend: %s", err);
}

int main(void) {
  /* Skip (77) when bubblewrap cannot confine here, before any test runs. */
  uv_loop_t loop;
  maelys_executor_t* ex = NULL;
  uint64_t mask = 0, caps = 0;
  char* diag = NULL;
  maelys_backend_options_t* o = NULL;
  if (uv_loop_init(&loop) != 0 || maelys_executor_create(&loop, &ex, NULL) ||
      maelys_backend_options_create(&o, NULL) ||
      maelys_backend_options_set(o, "helper", MAELYS_HELPER, NULL) ||
      maelys_executor_register_backend(ex, maelys_backend_bubblewrap(), o,
                                       NULL) ||
      maelys_executor_backend_capabilities(ex, "bubblewrap", &mask, NULL) ||
      maelys_warden_policy_capabilities_from_executor(mask, &caps, NULL)) {
    fprintf(stderr, "cannot set up an executor\n");
    return 1;
  }
  maelys_backend_options_destroy(o);
  if ((caps & needed) != needed) {
    maelys_executor_backend_diagnostic(ex, "bubblewrap", &diag, NULL);
    const char* must = getenv("MAELYS_BWRAP_MUST_WORK");
    bool required = must != NULL && strcmp(must, "1") == 0;
    printf("%s: bubblewrap cannot confine here: %s\n",
           required ? "FAILED (MAELYS_BWRAP_MUST_WORK=1)" : "SKIPPED",
           diag ? diag : "");
    maelys_executor_string_free(diag);
    return required ? 1 : 77;
  }
  maelys_executor_destroy(ex, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);

  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_glue_enforced_by_bubblewrap, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_policy_file_enforced_by_bubblewrap,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_backend_changed_between_steps_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_registry_host_example, setup,
                                      teardown),
  };
  return cmocka_run_group_tests_name("warden-policy sandbox", tests, NULL,
                                     NULL);
}
