/*
 * The consumer contract of maelys-code-runner (docs/executor-integration.md):
 * the three calls exactly as that document spells them, an absolute
 * executable, an empty environment, the protocol socket at fd 3 taken after
 * spawn, stderr captured, network NONE, the runner read-only and a temporary
 * working directory writable, and a bounded graceful/forced stop in which
 * SIGTERM reaches the runner, which answers with a final frame.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "maelys/executor.h"

static maelys_executor_plan_t* runner_plan(const char* tmpdir) {
  maelys_executor_plan_t* plan = NULL;
  char* error = NULL;
  assert_int_equal(maelys_executor_plan_create(&plan, &error), 0);
  assert_int_equal(maelys_executor_plan_set_root(
                       plan, MAELYS_EXECUTOR_ROOT_READONLY, 0, &error),
                   0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       plan, MAELYS_FIXTURE, MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_LITERAL_FILE, &error),
                   0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       plan, tmpdir, MAELYS_EXECUTOR_ACCESS_WRITE,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, &error),
                   0);
  maelys_executor_plan_set_network(plan, MAELYS_EXECUTOR_NETWORK_NONE, &error);
  assert_null(error);
  assert_int_equal(maelys_executor_plan_seal(plan, &error), 0);
  return plan;
}

static maelys_execution_request_t* runner_request(const char* tmpdir,
                                                  const char* const* argv) {
  maelys_execution_request_t* request = NULL;
  char* error = NULL;
  assert_int_equal(maelys_execution_request_create(&request, &error), 0);
  assert_int_equal(
      maelys_execution_request_set_executable(request, MAELYS_FIXTURE, &error),
      0);
  assert_int_equal(maelys_execution_request_set_argv(request, argv, &error), 0);
  assert_int_equal(maelys_execution_request_set_cwd(request, tmpdir, &error),
                   0);
  maelys_execution_request_set_io_mode(request, MAELYS_EXEC_IO_ISOLATED_DUPLEX,
                                       3, &error);
  maelys_execution_request_set_environment_mode(request, MAELYS_EXEC_ENV_EMPTY,
                                                &error);
  assert_null(error);
  assert_int_equal(maelys_execution_request_set_stderr_mode(
                       request, MAELYS_EXEC_STDERR_CAPTURE, &error),
                   0);
  assert_int_equal(
      maelys_execution_request_set_backend(request, "bubblewrap", &error), 0);
  assert_int_equal(
      maelys_execution_request_set_stop_budget(request, 2000, 2000, &error), 0);
  return request;
}

static size_t read_line(int fd, char* buf, size_t size) {
  size_t n = 0;
  while (n + 1 < size) {
    ssize_t r = read(fd, buf + n, 1);
    if (r <= 0)
      break;
    if (buf[n++] == '\n')
      break;
  }
  buf[n] = '\0';
  return n;
}

static void test_code_runner_contract(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  harness_bubblewrap_or_skip(&h, MAELYS_BACKEND_CAP_NETWORK_NONE);
  char tmpdir[] = "/tmp/maelys-runner-XXXXXX";
  assert_non_null(mkdtemp(tmpdir));
  maelys_executor_plan_t* plan = runner_plan(tmpdir);

  /* A frame goes in on the protocol descriptor and comes back. */
  maelys_execution_request_t* request = runner_request(
      tmpdir, (const char* const[]){"runner", "echo", "3", "3", NULL});
  maelys_execution_t* execution = NULL;
  char* error = NULL;
  if (maelys_execution_spawn(h.executor, plan, request, &execution, &error) !=
      MAELYS_EXECUTOR_OK)
    fail_msg("spawn: %s", error);
  int protocol = -1;
  assert_int_equal(maelys_execution_take_fd(execution,
                                            MAELYS_EXEC_STREAM_PROTOCOL,
                                            &protocol, &error),
                   0);
  const char frame[] = "{\"type\":\"execute\",\"code\":\"1+1\"}\n";
  assert_int_equal(send(protocol, frame, sizeof frame - 1, MSG_NOSIGNAL),
                   (ssize_t)sizeof frame - 1);
  char line[256];
  read_line(protocol, line, sizeof line);
  assert_string_equal(line, frame);
  shutdown(protocol, SHUT_WR);
  waited_t w;
  memset(&w, 0, sizeof w);
  maelys_execution_wait(execution, waited_cb, &w, NULL);
  harness_run_until(&h, &w.done);
  assert_int_equal(w.status.outcome, MAELYS_EXEC_OUTCOME_EXITED);
  assert_int_equal(w.status.exit_code, 0);
  close(protocol);
  maelys_execution_release(execution);
  maelys_execution_request_destroy(request);

  /* Bounded graceful/forced stop: SIGTERM reaches the runner itself, which
   * answers with its final frame on the protocol descriptor. */
  request = runner_request(
      tmpdir, (const char* const[]){"runner", "term-line", "3", NULL});
  assert_int_equal(
      maelys_execution_spawn(h.executor, plan, request, &execution, &error), 0);
  assert_int_equal(maelys_execution_take_fd(execution,
                                            MAELYS_EXEC_STREAM_PROTOCOL,
                                            &protocol, &error),
                   0);
  read_line(protocol, line, sizeof line);
  assert_string_equal(line, "ready\n");
  stopped_t st;
  memset(&st, 0, sizeof st);
  maelys_execution_stop(execution, MAELYS_EXEC_STOP_GRACEFUL_THEN_FORCED,
                        stopped_cb, &st, NULL);
  harness_run_until(&h, &st.done);
  assert_int_equal(st.result, MAELYS_EXEC_STOPPED_GRACEFUL);
  read_line(protocol, line, sizeof line);
  assert_string_equal(line, "got-term\n");
  assert_int_equal(read_line(protocol, line, sizeof line), 0); /* EOF */
  close(protocol);
  maelys_execution_release(execution);
  maelys_execution_request_destroy(request);
  maelys_executor_plan_destroy(plan);
  rmdir(tmpdir);
  harness_finish(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_code_runner_contract),
  };
  return harness_exit(
      cmocka_run_group_tests_name("consumer", tests, NULL, NULL));
}
