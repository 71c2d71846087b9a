/*
 * The payload's pseudo-terminal (MAELYS_EXEC_IO_TTY) and the /dev/null
 * stdin (MAELYS_EXEC_STDIN_NULL), end to end on the bubblewrap backend:
 * the terminal comes from the sandbox's own devpts (ttyname() works inside),
 * the payload leads its session in the foreground, the window size is the
 * request's and changes reach it as SIGWINCH; every refusal is one before
 * anything runs (invariant 21: never a terminal of the host's).
 *
 * Where bwrap cannot run, each bubblewrap test is skipped with the reason,
 * unless MAELYS_BWRAP_MUST_WORK=1 (set by CI), which makes it a failure.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define ARGS(...) ((const char* const[]){__VA_ARGS__, NULL})

static bool bwrap_or_skip(harness_t* h) {
  uint64_t need =
      MAELYS_BACKEND_CAP_FILESYSTEM_READ | MAELYS_BACKEND_CAP_NETWORK_NONE |
      MAELYS_BACKEND_CAP_ROOT_READONLY | MAELYS_BACKEND_CAP_PROCESS_TREE;
  uint64_t mask = harness_register_bubblewrap(h);
  if ((mask & need) == need)
    return true;
  char* diag = NULL;
  maelys_executor_backend_diagnostic(h->executor, "bubblewrap", &diag, NULL);
  /* The first missing capability and why, when the probe proved some. */
  char* why = NULL;
  uint64_t missing = need & ~mask;
  maelys_executor_backend_missing_reason(h->executor, "bubblewrap",
                                         missing & (~missing + 1), &why, NULL);
  const char* must = getenv("MAELYS_BWRAP_MUST_WORK");
  if (must != NULL && strcmp(must, "1") == 0)
    fail_msg("bubblewrap cannot confine here and MAELYS_BWRAP_MUST_WORK=1: "
             "%s (missing 0x%llx: %s)",
             diag ? diag : "", (unsigned long long)missing, why ? why : "?");
  maelys_executor_string_free(why);
  print_message("SKIPPED: bubblewrap cannot confine here: %s\n",
                diag ? diag : "");
  maelys_executor_string_free(diag);
  harness_finish(h);
  return false;
}

/* A read-only root with /proc, the fixture and, unless without_dev, /dev. */
static maelys_executor_plan_t* terminal_plan(bool without_dev) {
  maelys_executor_plan_t* p = NULL;
  char* err = NULL;
  assert_int_equal(maelys_executor_plan_create(&p, NULL), 0);
  assert_int_equal(
      maelys_executor_plan_set_root(p, MAELYS_EXECUTOR_ROOT_READONLY, 0, NULL),
      0);
  assert_int_equal(maelys_executor_plan_add_proc(p, "/proc", NULL), 0);
  if (!without_dev)
    assert_int_equal(maelys_executor_plan_add_dev(p, "/dev", NULL), 0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       p, MAELYS_FIXTURE, MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_LITERAL_FILE, NULL),
                   0);
  assert_int_equal(
      maelys_executor_plan_set_network(p, MAELYS_EXECUTOR_NETWORK_NONE, NULL),
      0);
  assert_int_equal(maelys_executor_plan_set_process_tree_required(p, 1, NULL),
                   0);
  if (maelys_executor_plan_seal(p, &err) != MAELYS_EXECUTOR_OK)
    fail_msg("seal: %s", err);
  return p;
}

static maelys_execution_request_t* tty_request(const char* backend,
                                               const char* const* args,
                                               unsigned rows, unsigned cols) {
  maelys_execution_request_t* r = request_fixture(backend, args);
  assert_int_equal(
      maelys_execution_request_set_io_mode(r, MAELYS_EXEC_IO_TTY, -1, NULL), 0);
  assert_int_equal(
      maelys_execution_request_set_terminal_size(r, rows, cols, NULL), 0);
  return r;
}

typedef struct session {
  harness_t* h;
  maelys_execution_t* e;
  int terminal_calls;
  maelys_executor_result_t terminal_result;
  bool terminal_before_exit;
  waited_t waited;
  collected_t out;
  bool resized;
} session_t;

static void on_terminal(maelys_execution_t* e, maelys_executor_result_t r,
                        void* data) {
  session_t* s = data;
  s->terminal_calls++;
  s->terminal_result = r;
  s->terminal_before_exit = !s->waited.done;
  if (r != MAELYS_EXECUTOR_OK)
    return;
  uv_stream_t* stream = NULL;
  char* err = NULL;
  if (maelys_execution_stream(e, MAELYS_EXEC_STREAM_TERMINAL, &stream, &err))
    fail_msg("terminal stream: %s", err);
  collect_start(stream, &s->out);
}

static void session_start(session_t* s, harness_t* h,
                          const maelys_executor_plan_t* plan,
                          maelys_execution_request_t* req) {
  memset(s, 0, sizeof *s);
  s->h = h;
  char* err = NULL;
  if (maelys_execution_spawn(h->executor, plan, req, &s->e, &err))
    fail_msg("spawn: %s", err);
  /* Before the sandbox made it, the stream is not there yet. */
  uv_stream_t* stream = NULL;
  assert_int_equal(
      maelys_execution_stream(s->e, MAELYS_EXEC_STREAM_TERMINAL, &stream, NULL),
      MAELYS_EXECUTOR_ERR_STATE);
  assert_int_equal(maelys_execution_wait_terminal(s->e, on_terminal, s, &err),
                   0);
  assert_int_equal(maelys_execution_wait(s->e, waited_cb, &s->waited, &err), 0);
}

static void test_terminal_is_the_sandboxs_own(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 30000);
  if (!bwrap_or_skip(&h))
    return;
  maelys_executor_plan_t* plan = terminal_plan(false);
  maelys_execution_request_t* req =
      tty_request("bubblewrap", ARGS("tty-info"), 30, 100);
  session_t s;
  session_start(&s, &h, plan, req);
  /* A size given before the terminal reached the host is kept and set on
   * arrival (whether before or after the payload read its size is a race
   * this test does not look at). */
  assert_int_equal(maelys_execution_resize(s.e, 30, 100, NULL), 0);
  harness_run_until(&h, &s.waited.done);
  harness_run_until(&h, &s.out.eof);
  assert_int_equal(s.terminal_calls, 1);
  assert_int_equal(s.terminal_result, MAELYS_EXECUTOR_OK);
  assert_true(s.terminal_before_exit);
  assert_int_equal(s.waited.status.outcome, MAELYS_EXEC_OUTCOME_EXITED);
  assert_int_equal(s.waited.status.exit_code, 0);
  /* The terminal does its own output processing: "\n" becomes "\r\n". */
  if (strstr(s.out.data, "ttyname=/dev/pts/0 size=30x100 leader=1 "
                         "foreground=1\r\n") == NULL)
    fail_msg("the payload saw: %s", s.out.data);
  maelys_execution_release(s.e);
  collected_free(&s.out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

static void on_first_line(uv_prepare_t* p) {
  session_t* s = p->data;
  if (s->resized || s->out.data == NULL || strstr(s->out.data, "\n") == NULL)
    return;
  char* err = NULL;
  if (maelys_execution_resize(s->e, 50, 132, &err) != MAELYS_EXECUTOR_OK)
    fail_msg("resize: %s", err);
  s->resized = true;
  uv_prepare_stop(p);
}

static void test_resize_reaches_the_payload(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 30000);
  if (!bwrap_or_skip(&h))
    return;
  maelys_executor_plan_t* plan = terminal_plan(false);
  maelys_execution_request_t* req =
      tty_request("bubblewrap", ARGS("tty-info", "winch"), 24, 80);
  session_t s;
  session_start(&s, &h, plan, req);
  uv_prepare_t watch;
  uv_prepare_init(&h.loop, &watch);
  watch.data = &s;
  uv_prepare_start(&watch, on_first_line);
  harness_run_until(&h, &s.waited.done);
  harness_run_until(&h, &s.out.eof);
  uv_close((uv_handle_t*)&watch, NULL);
  assert_true(s.resized);
  assert_int_equal(s.waited.status.exit_code, 0);
  if (strstr(s.out.data, "resized=50x132\r\n") == NULL)
    fail_msg("the payload saw: %s", s.out.data);
  maelys_execution_release(s.e);
  collected_free(&s.out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

static void test_launch_failure_ends_the_terminal(void** state) {
  /* The terminal exists before the payload; a payload that cannot start
   * leaves it with no process: the host's reads end, the status says why. */
  (void)state;
  harness_t h;
  harness_init(&h, 30000);
  if (!bwrap_or_skip(&h))
    return;
  maelys_executor_plan_t* plan = terminal_plan(false);
  maelys_execution_request_t* req =
      tty_request("bubblewrap", ARGS("exit", "0"), 24, 80);
  assert_int_equal(maelys_execution_request_set_executable(
                       req, "/nonexistent/program", NULL),
                   0);
  session_t s;
  session_start(&s, &h, plan, req);
  harness_run_until(&h, &s.waited.done);
  assert_int_equal(s.terminal_calls, 1);
  if (s.terminal_result == MAELYS_EXECUTOR_OK)
    harness_run_until(&h, &s.out.eof);
  assert_int_equal(s.waited.status.outcome, MAELYS_EXEC_OUTCOME_LAUNCH_FAILED);
  assert_string_equal(s.waited.status.launch_step, "execve");
  maelys_execution_release(s.e);
  collected_free(&s.out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

static void never_called(maelys_execution_t* e, maelys_executor_result_t r,
                         void* data) {
  (void)e;
  (void)r;
  (void)data;
  fail_msg("a terminal callback was called for an execution without one");
}

static void expect_refused(harness_t* h, const maelys_executor_plan_t* plan,
                           maelys_execution_request_t* req,
                           maelys_executor_result_t code, const char* text) {
  maelys_execution_t* e = NULL;
  char* err = NULL;
  maelys_executor_result_t r =
      maelys_execution_spawn(h->executor, plan, req, &e, &err);
  if (r != code || err == NULL || strstr(err, text) == NULL)
    fail_msg("expected %s with '%s', got %s: %s",
             maelys_executor_result_name(code), text,
             maelys_executor_result_name(r), err ? err : "");
  assert_null(e);
  maelys_executor_error_free(err);
}

static void test_refusals(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 30000);
  maelys_executor_plan_t* host = plan_unconfined();
  /* The posix backend cannot make a terminal of the payload's own. */
  maelys_execution_request_t* req =
      tty_request("posix", ARGS("tty-info"), 24, 80);
  expect_refused(&h, host, req, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                 "pseudo-terminal of its own");
  /* Stderr is the terminal too. */
  assert_int_equal(maelys_execution_request_set_stderr_mode(
                       req, MAELYS_EXEC_STDERR_CAPTURE, NULL),
                   0);
  expect_refused(&h, host, req, MAELYS_EXECUTOR_ERR_ARGUMENT, "stderr mode");
  maelys_execution_request_destroy(req);
  /* A /dev/null stdin where stdin is the protocol socket. */
  req = request_fixture("posix", ARGS("exit", "0"));
  assert_int_equal(maelys_execution_request_set_io_mode(
                       req, MAELYS_EXEC_IO_DUPLEX_STDIO, -1, NULL),
                   0);
  assert_int_equal(maelys_execution_request_set_stdin_mode(
                       req, MAELYS_EXEC_STDIN_NULL, NULL),
                   0);
  expect_refused(&h, host, req, MAELYS_EXECUTOR_ERR_ARGUMENT, "CAPTURED");
  /* Bad values. */
  char* err = NULL;
  assert_int_equal(maelys_execution_request_set_terminal_size(req, 0, 80, &err),
                   MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_non_null(strstr(err, "1..65535"));
  maelys_executor_error_free(err);
  assert_int_equal(maelys_execution_request_set_stdin_mode(
                       req, (maelys_exec_stdin_mode_t)7, NULL),
                   MAELYS_EXECUTOR_ERR_ARGUMENT);
  maelys_execution_request_destroy(req);
  /* An execution without a terminal has none to wait for or resize. */
  req = request_fixture("posix", ARGS("exit", "0"));
  maelys_execution_t* e = NULL;
  assert_int_equal(maelys_execution_spawn(h.executor, host, req, &e, NULL), 0);
  assert_int_equal(maelys_execution_wait_terminal(e, NULL, NULL, NULL),
                   MAELYS_EXECUTOR_ERR_ARGUMENT);
  err = NULL;
  assert_int_equal(maelys_execution_wait_terminal(e, never_called, NULL, &err),
                   MAELYS_EXECUTOR_ERR_STATE);
  maelys_executor_error_free(err);
  assert_int_equal(maelys_execution_resize(e, 24, 80, NULL),
                   MAELYS_EXECUTOR_ERR_STATE);
  waited_t w = {0};
  assert_int_equal(maelys_execution_wait(e, waited_cb, &w, NULL), 0);
  harness_run_until(&h, &w.done);
  maelys_execution_release(e);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(host);
  /* A sandbox without /dev has no devpts to make one from. */
  if (bwrap_or_skip(&h)) {
    maelys_executor_plan_t* plan = terminal_plan(true);
    req = tty_request("bubblewrap", ARGS("tty-info"), 24, 80);
    expect_refused(&h, plan, req, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                   "mounts no /dev");
    maelys_execution_request_destroy(req);
    maelys_executor_plan_destroy(plan);
    harness_finish(&h);
  }
}

static void test_stdin_null(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 30000);
  maelys_executor_plan_t* host = plan_unconfined();
  maelys_execution_request_t* req =
      request_fixture("posix", ARGS("stdin-kind"));
  assert_int_equal(maelys_execution_request_set_stdin_mode(
                       req, MAELYS_EXEC_STDIN_NULL, NULL),
                   0);
  maelys_execution_t* e = NULL;
  assert_int_equal(maelys_execution_spawn(h.executor, host, req, &e, NULL), 0);
  uv_stream_t* in = NULL;
  assert_int_equal(
      maelys_execution_stream(e, MAELYS_EXEC_STREAM_STDIN, &in, NULL),
      MAELYS_EXECUTOR_ERR_NOT_FOUND);
  uv_stream_t* out = NULL;
  assert_int_equal(
      maelys_execution_stream(e, MAELYS_EXEC_STREAM_STDOUT, &out, NULL), 0);
  collected_t c;
  collect_start(out, &c);
  waited_t w = {0};
  assert_int_equal(maelys_execution_wait(e, waited_cb, &w, NULL), 0);
  harness_run_until(&h, &w.done);
  harness_run_until(&h, &c.eof);
  assert_string_equal(c.data, "stdin=null\n");
  maelys_execution_release(e);
  collected_free(&c);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(host);
  harness_finish(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_terminal_is_the_sandboxs_own),
      cmocka_unit_test(test_resize_reaches_the_payload),
      cmocka_unit_test(test_launch_failure_ends_the_terminal),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_stdin_null),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
