/* The core and the POSIX backend on a real loop with the fixture. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define ARGS(...) ((const char* const[]){__VA_ARGS__, NULL})

static maelys_execution_t* spawn_ok(harness_t* h,
                                    const maelys_executor_plan_t* plan,
                                    maelys_execution_request_t* req) {
  maelys_execution_t* e = NULL;
  char* err = NULL;
  maelys_executor_result_t r =
      maelys_execution_spawn(h->executor, plan, req, &e, &err);
  if (r != MAELYS_EXECUTOR_OK)
    fail_msg("spawn: %s: %s", maelys_executor_result_name(r), err);
  return e;
}

static void run_fixture(harness_t* h, const char* const* args, waited_t* w) {
  maelys_executor_plan_t* plan = plan_unconfined();
  maelys_execution_request_t* req = request_fixture("posix", args);
  maelys_execution_t* e = spawn_ok(h, plan, req);
  memset(w, 0, sizeof *w);
  assert_int_equal(maelys_execution_wait(e, waited_cb, w, NULL), 0);
  harness_run_until(h, &w->done);
  maelys_execution_release(e);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
}

static void test_exit_codes(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 10000);
  static const char* const codes[] = {"0", "3", "255"};
  for (size_t i = 0; i < 3; i++) {
    waited_t w;
    run_fixture(&h, ARGS("exit", codes[i]), &w);
    assert_int_equal(w.status.outcome, MAELYS_EXEC_OUTCOME_EXITED);
    assert_int_equal(w.status.exit_code, atoi(codes[i]));
    assert_int_equal(w.status.stop_stage, MAELYS_EXEC_STOP_STAGE_NONE);
  }
  harness_finish(&h);
}

static void test_signals(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 10000);
  waited_t w;
  run_fixture(&h, ARGS("signal", "9"), &w);
  assert_int_equal(w.status.outcome, MAELYS_EXEC_OUTCOME_SIGNALED);
  assert_int_equal(w.status.term_signal, SIGKILL);
  run_fixture(&h, ARGS("signal", "15"), &w);
  assert_int_equal(w.status.outcome, MAELYS_EXEC_OUTCOME_SIGNALED);
  assert_int_equal(w.status.term_signal, SIGTERM);
  harness_finish(&h);
}

/* Launch errors are not exit codes: the caller gets a spawn error naming the
 * step and the errno, and nothing runs. */
static void test_spawn_errors(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 10000);
  maelys_executor_plan_t* plan = plan_unconfined();
  char* err = NULL;
  maelys_execution_t* e = NULL;

  maelys_execution_request_t* req = request_fixture("posix", ARGS("exit", "0"));
  assert_int_equal(maelys_execution_request_set_executable(
                       req, "/nonexistent/maelys-program", NULL),
                   0);
  assert_int_equal(maelys_execution_spawn(h.executor, plan, req, &e, &err),
                   MAELYS_EXECUTOR_ERR_SPAWN);
  assert_null(e);
  assert_non_null(strstr(err, "execve"));
  assert_non_null(strstr(err, strerror(ENOENT)));
  maelys_executor_error_free(err);
  err = NULL;

  char path[] = "/tmp/maelys-noexec-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  chmod(path, 0644);
  assert_int_equal(maelys_execution_request_set_executable(req, path, NULL), 0);
  assert_int_equal(maelys_execution_spawn(h.executor, plan, req, &e, &err),
                   MAELYS_EXECUTOR_ERR_SPAWN);
  assert_non_null(strstr(err, "execve"));
  assert_non_null(strstr(err, strerror(EACCES)));
  maelys_executor_error_free(err);
  err = NULL;
  unlink(path);

  assert_int_equal(
      maelys_execution_request_set_executable(req, MAELYS_FIXTURE, NULL), 0);
  assert_int_equal(
      maelys_execution_request_set_cwd(req, "/nonexistent/cwd", NULL), 0);
  assert_int_equal(maelys_execution_spawn(h.executor, plan, req, &e, &err),
                   MAELYS_EXECUTOR_ERR_SPAWN);
  assert_non_null(strstr(err, "chdir"));
  assert_non_null(strstr(err, strerror(ENOENT)));
  maelys_executor_error_free(err);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

/* Refusals that happen before anything starts (invariants 1, 2, 3, 10). */
static void test_refusals(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 10000);
  char* err = NULL;
  maelys_execution_t* e = NULL;
  maelys_execution_request_t* req = request_fixture("posix", ARGS("exit", "0"));

  maelys_executor_plan_t* unsealed = NULL;
  assert_int_equal(maelys_executor_plan_create(&unsealed, NULL), 0);
  assert_int_equal(maelys_executor_plan_set_network(
                       unsealed, MAELYS_EXECUTOR_NETWORK_INHERIT, NULL),
                   0);
  assert_int_equal(maelys_execution_spawn(h.executor, unsealed, req, &e, &err),
                   MAELYS_EXECUTOR_ERR_STATE);
  assert_non_null(strstr(err, "not sealed"));
  maelys_executor_error_free(err);
  err = NULL;

  maelys_executor_plan_t* none = NULL;
  assert_int_equal(maelys_executor_plan_create(&none, NULL), 0);
  assert_int_equal(maelys_executor_plan_set_network(
                       none, MAELYS_EXECUTOR_NETWORK_NONE, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_seal(none, NULL), 0);
  assert_int_equal(maelys_execution_spawn(h.executor, none, req, &e, &err),
                   MAELYS_EXECUTOR_ERR_CAPABILITY);
  assert_non_null(strstr(err, "network_none"));
  assert_non_null(strstr(err, "posix"));
  maelys_executor_error_free(err);
  err = NULL;

  maelys_executor_plan_t* plan = plan_unconfined();
  assert_int_equal(maelys_execution_request_set_backend(req, "nosuch", NULL),
                   0);
  assert_int_equal(maelys_execution_spawn(h.executor, plan, req, &e, &err),
                   MAELYS_EXECUTOR_ERR_NOT_FOUND);
  assert_non_null(strstr(err, "nosuch"));
  maelys_executor_error_free(err);
  err = NULL;

  maelys_execution_request_t* nobackend = NULL;
  assert_int_equal(maelys_execution_request_create(&nobackend, NULL), 0);
  assert_int_equal(
      maelys_execution_request_set_executable(nobackend, MAELYS_FIXTURE, NULL),
      0);
  assert_int_equal(
      maelys_execution_spawn(h.executor, plan, nobackend, &e, &err),
      MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_non_null(strstr(err, "no backend"));
  maelys_executor_error_free(err);
  err = NULL;

  assert_int_equal(maelys_execution_request_set_backend(req, "posix", NULL), 0);
  assert_int_equal(maelys_execution_request_set_scratch_size(req, 4096, NULL),
                   0);
  assert_int_equal(maelys_execution_spawn(h.executor, plan, req, &e, &err),
                   MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_non_null(strstr(err, "scratch"));
  maelys_executor_error_free(err);
  err = NULL;
  assert_int_equal(maelys_execution_request_set_scratch_size(req, 0, NULL), 0);

  /* A channel the plan does not authorise is refused (invariant 5). */
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  assert_int_equal(maelys_execution_request_add_channel(req, 4, &sv[0], NULL),
                   0);
  assert_int_equal(sv[0], -1);
  assert_int_equal(maelys_execution_spawn(h.executor, plan, req, &e, &err),
                   MAELYS_EXECUTOR_ERR_DENIED);
  assert_non_null(strstr(err, "fd 4"));
  maelys_executor_error_free(err);
  close(sv[1]);
  assert_null(e);

  maelys_execution_request_destroy(nobackend);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  maelys_executor_plan_destroy(none);
  maelys_executor_plan_destroy(unsealed);
  harness_finish(&h);
}

static bool sync_called;
static void sync_wait_cb(maelys_execution_t* e,
                         const maelys_execution_status_t* s, void* data) {
  (void)e;
  (void)s;
  (void)data;
  sync_called = true;
}

/* wait twice: the same status for every waiter, and never synchronously. */
static void test_wait_twice(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 10000);
  maelys_executor_plan_t* plan = plan_unconfined();
  maelys_execution_request_t* req = request_fixture("posix", ARGS("exit", "7"));
  maelys_execution_t* e = spawn_ok(&h, plan, req);
  waited_t a, b, c;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  memset(&c, 0, sizeof c);
  assert_int_equal(maelys_execution_wait(e, waited_cb, &a, NULL), 0);
  assert_int_equal(maelys_execution_wait(e, waited_cb, &b, NULL), 0);
  harness_run_until(&h, &b.done);
  assert_true(a.done);
  /* After the end: still asynchronous. */
  sync_called = false;
  assert_int_equal(maelys_execution_wait(e, sync_wait_cb, NULL, NULL), 0);
  assert_false(sync_called);
  assert_int_equal(maelys_execution_wait(e, waited_cb, &c, NULL), 0);
  assert_false(c.done);
  harness_run_until(&h, &c.done);
  assert_true(sync_called);
  assert_int_equal(a.status.exit_code, 7);
  assert_int_equal(b.status.exit_code, 7);
  assert_int_equal(c.status.exit_code, 7);
  assert_int_equal(a.calls + b.calls + c.calls, 3);
  maelys_execution_release(e);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

/* Starts a fixture and waits until it printed "ready" on stdout. */
static maelys_execution_t* start_ready(harness_t* h,
                                       const maelys_executor_plan_t* plan,
                                       maelys_execution_request_t* req,
                                       collected_t* out) {
  maelys_execution_t* e = spawn_ok(h, plan, req);
  uv_stream_t* s = NULL;
  assert_int_equal(
      maelys_execution_stream(e, MAELYS_EXEC_STREAM_STDOUT, &s, NULL), 0);
  collect_start(s, out);
  while (strstr(out->data, "ready") == NULL) {
    assert_false(out->eof);
    uv_run(&h->loop, UV_RUN_ONCE);
  }
  return e;
}

/* Invariant 7: a SIGTERM-ignoring child is killed after the grace, and the
 * stop completes within grace + 100 ms. */
static void test_stop_ignoring_child(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 20000);
  maelys_executor_plan_t* plan = plan_unconfined();
  maelys_execution_request_t* req =
      request_fixture("posix", ARGS("ignore-term", "60000"));
  assert_int_equal(
      maelys_execution_request_set_stop_budget(req, 300, 1000, NULL), 0);
  collected_t out;
  maelys_execution_t* e = start_ready(&h, plan, req, &out);
  stopped_t s;
  memset(&s, 0, sizeof s);
  waited_t w;
  memset(&w, 0, sizeof w);
  assert_int_equal(maelys_execution_wait(e, waited_cb, &w, NULL), 0);
  uint64_t t0 = harness_now_ms();
  assert_int_equal(maelys_execution_stop(e,
                                         MAELYS_EXEC_STOP_GRACEFUL_THEN_FORCED,
                                         stopped_cb, &s, NULL),
                   0);
  harness_run_until(&h, &s.done);
  uint64_t took = s.at_ms - t0;
  assert_int_equal(s.result, MAELYS_EXEC_STOPPED_FORCED);
  assert_true(took >= 300);
  if (took > 400)
    fail_msg("stop took %llu ms, more than grace (300) + 100 ms",
             (unsigned long long)took);
  harness_run_until(&h, &w.done);
  assert_int_equal(w.status.outcome, MAELYS_EXEC_OUTCOME_SIGNALED);
  assert_int_equal(w.status.term_signal, SIGKILL);
  assert_int_equal(w.status.stop_stage, MAELYS_EXEC_STOP_STAGE_FORCED);
  maelys_execution_release(e);
  collected_free(&out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

/* A child that exits on SIGTERM is reported as stopped gracefully. */
static void test_stop_graceful(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 20000);
  maelys_executor_plan_t* plan = plan_unconfined();
  maelys_execution_request_t* req =
      request_fixture("posix", ARGS("term-line", "1"));
  collected_t out;
  maelys_execution_t* e = start_ready(&h, plan, req, &out);
  stopped_t s;
  memset(&s, 0, sizeof s);
  waited_t w;
  memset(&w, 0, sizeof w);
  assert_int_equal(maelys_execution_wait(e, waited_cb, &w, NULL), 0);
  assert_int_equal(maelys_execution_stop(e,
                                         MAELYS_EXEC_STOP_GRACEFUL_THEN_FORCED,
                                         stopped_cb, &s, NULL),
                   0);
  harness_run_until(&h, &s.done);
  harness_run_until(&h, &w.done);
  harness_run_until(&h, &out.eof);
  assert_int_equal(s.result, MAELYS_EXEC_STOPPED_GRACEFUL);
  assert_int_equal(w.status.outcome, MAELYS_EXEC_OUTCOME_EXITED);
  assert_int_equal(w.status.exit_code, 0);
  assert_int_equal(w.status.stop_stage, MAELYS_EXEC_STOP_STAGE_GRACEFUL);
  assert_non_null(strstr(out.data, "got-term"));
  maelys_execution_release(e);
  collected_free(&out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

/* Each of the three stop forms, twice, is harmless; a stop after the end
 * reports that nothing was running. */
static void test_stop_forms_twice(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 30000);
  maelys_executor_plan_t* plan = plan_unconfined();
  static const maelys_execution_stop_mode_t modes[] = {
      MAELYS_EXEC_STOP_GRACEFUL, MAELYS_EXEC_STOP_FORCED,
      MAELYS_EXEC_STOP_GRACEFUL_THEN_FORCED};
  static const maelys_execution_stop_result_t expect[] = {
      MAELYS_EXEC_STOPPED_GRACEFUL, MAELYS_EXEC_STOPPED_FORCED,
      MAELYS_EXEC_STOPPED_GRACEFUL};
  for (size_t i = 0; i < 3; i++) {
    maelys_execution_request_t* req =
        request_fixture("posix", ARGS("term-line", "1"));
    collected_t out;
    maelys_execution_t* e = start_ready(&h, plan, req, &out);
    stopped_t s1, s2, s3;
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    memset(&s3, 0, sizeof s3);
    assert_int_equal(maelys_execution_stop(e, modes[i], stopped_cb, &s1, NULL),
                     0);
    assert_int_equal(maelys_execution_stop(e, modes[i], stopped_cb, &s2, NULL),
                     0);
    harness_run_until(&h, &s1.done);
    harness_run_until(&h, &s2.done);
    assert_int_equal(s1.result, expect[i]);
    assert_int_equal(s2.result, expect[i]);
    assert_int_equal(s1.calls, 1);
    assert_int_equal(s2.calls, 1);
    /* After the end: the recorded result, asynchronously. */
    assert_int_equal(maelys_execution_stop(e, modes[i], stopped_cb, &s3, NULL),
                     0);
    assert_false(s3.done);
    harness_run_until(&h, &s3.done);
    assert_int_equal(s3.result, expect[i]);
    harness_run_until(&h, &out.eof);
    maelys_execution_release(e);
    collected_free(&out);
    maelys_execution_request_destroy(req);
  }
  /* A stop on an execution that ended by itself. */
  maelys_execution_request_t* req = request_fixture("posix", ARGS("exit", "0"));
  maelys_execution_t* e = spawn_ok(&h, plan, req);
  waited_t w;
  memset(&w, 0, sizeof w);
  maelys_execution_wait(e, waited_cb, &w, NULL);
  harness_run_until(&h, &w.done);
  stopped_t s;
  memset(&s, 0, sizeof s);
  assert_int_equal(
      maelys_execution_stop(e, MAELYS_EXEC_STOP_FORCED, stopped_cb, &s, NULL),
      0);
  harness_run_until(&h, &s.done);
  assert_int_equal(s.result, MAELYS_EXEC_STOPPED_ALREADY_EXITED);
  maelys_execution_release(e);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

/* A graceful-only stop on a child that ignores it reports STILL_RUNNING after
 * the grace; a forced stop then ends it. */
static void test_stop_graceful_only_still_running(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 20000);
  maelys_executor_plan_t* plan = plan_unconfined();
  maelys_execution_request_t* req =
      request_fixture("posix", ARGS("ignore-term", "60000"));
  assert_int_equal(
      maelys_execution_request_set_stop_budget(req, 200, 1000, NULL), 0);
  collected_t out;
  maelys_execution_t* e = start_ready(&h, plan, req, &out);
  stopped_t s, f;
  memset(&s, 0, sizeof s);
  memset(&f, 0, sizeof f);
  assert_int_equal(
      maelys_execution_stop(e, MAELYS_EXEC_STOP_GRACEFUL, stopped_cb, &s, NULL),
      0);
  harness_run_until(&h, &s.done);
  assert_int_equal(s.result, MAELYS_EXEC_STOPPED_STILL_RUNNING);
  assert_true(maelys_execution_pid(e) > 0);
  assert_int_equal(
      maelys_execution_stop(e, MAELYS_EXEC_STOP_FORCED, stopped_cb, &f, NULL),
      0);
  harness_run_until(&h, &f.done);
  assert_int_equal(f.result, MAELYS_EXEC_STOPPED_FORCED);
  harness_run_until(&h, &out.eof);
  maelys_execution_release(e);
  collected_free(&out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

static void write_all(int fd, const void* p, size_t n) {
  const char* c = p;
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    assert_true(w > 0);
    c += w;
    n -= (size_t)w;
  }
}

/* take_fd hands the host end over for good: blocking, close-on-exec, and
 * still open after the executor released and destroyed everything. */
static void test_take_fd(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 10000);
  maelys_executor_plan_t* plan = plan_unconfined();
  maelys_execution_request_t* req =
      request_fixture("posix", ARGS("echo", "3", "3"));
  assert_int_equal(maelys_execution_request_set_io_mode(
                       req, MAELYS_EXEC_IO_ISOLATED_DUPLEX, 3, NULL),
                   0);
  maelys_execution_t* e = spawn_ok(&h, plan, req);
  int fd = -1;
  char* err = NULL;
  assert_int_equal(
      maelys_execution_take_fd(e, MAELYS_EXEC_STREAM_PROTOCOL, &fd, &err), 0);
  assert_true(fd >= 0);
  assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
  assert_false(fcntl(fd, F_GETFL) & O_NONBLOCK);
  int again = -1;
  assert_int_equal(
      maelys_execution_take_fd(e, MAELYS_EXEC_STREAM_PROTOCOL, &again, &err),
      MAELYS_EXECUTOR_ERR_STATE);
  maelys_executor_error_free(err);
  err = NULL;
  uv_stream_t* s = NULL;
  assert_int_equal(
      maelys_execution_stream(e, MAELYS_EXEC_STREAM_PROTOCOL, &s, &err),
      MAELYS_EXECUTOR_ERR_STATE);
  maelys_executor_error_free(err);
  write_all(fd, "ping", 4);
  char buf[8];
  ssize_t n = read(fd, buf, 4);
  assert_int_equal(n, 4);
  assert_memory_equal(buf, "ping", 4);
  shutdown(fd, SHUT_WR);
  waited_t w;
  memset(&w, 0, sizeof w);
  maelys_execution_wait(e, waited_cb, &w, NULL);
  harness_run_until(&h, &w.done);
  maelys_execution_release(e);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
  /* Everything of the executor is gone; the descriptor is the caller's. */
  assert_true(fcntl(fd, F_GETFD) >= 0);
  assert_int_equal(read(fd, buf, sizeof buf), 0);
  close(fd);
}

typedef struct zombie_watch {
  int pid;
  bool gone;
  uv_timer_t timer;
} zombie_watch_t;

static void on_zombie_poll(uv_timer_t* t) {
  zombie_watch_t* z = t->data;
  if (!process_exists(z->pid)) {
    z->gone = true;
    uv_timer_stop(t);
  }
}

/* Invariant 6: release never signals and never waits; a child still running
 * is reaped in the background when it exits (no zombie), and the released
 * execution does not keep the loop alive. */
static void test_release_running(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 20000);
  maelys_executor_plan_t* plan = plan_unconfined();
  maelys_execution_request_t* req =
      request_fixture("posix", ARGS("sleep", "300"));
  maelys_execution_t* e = spawn_ok(&h, plan, req);
  int pid = maelys_execution_pid(e);
  assert_true(pid > 0);
  uint64_t t0 = harness_now_ms();
  maelys_execution_release(e);
  assert_true(harness_now_ms() - t0 < 50); /* it did not wait */
  assert_true(process_exists(pid));        /* it did not signal */
  assert_false(process_is_zombie(pid));
  /* Nothing keeps the loop alive: a bare run returns at once. */
  t0 = harness_now_ms();
  uv_run(&h.loop, UV_RUN_DEFAULT);
  assert_true(harness_now_ms() - t0 < 200);
  zombie_watch_t z = {.pid = pid};
  uv_timer_init(&h.loop, &z.timer);
  z.timer.data = &z;
  uv_timer_start(&z.timer, on_zombie_poll, 20, 20);
  harness_run_until(&h, &z.gone);
  uv_close((uv_handle_t*)&z.timer, NULL);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

/* A released child still running when the executor is destroyed is reaped
 * by a background reaper: no zombie, never signalled. */
static void test_destroy_with_orphan(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 20000);
  maelys_executor_plan_t* plan = plan_unconfined();
  maelys_execution_request_t* req =
      request_fixture("posix", ARGS("sleep", "300"));
  maelys_execution_t* e = spawn_ok(&h, plan, req);
  int pid = maelys_execution_pid(e);
  char* err = NULL;
  assert_int_equal(maelys_executor_destroy(h.executor, &err),
                   MAELYS_EXECUTOR_ERR_STATE);
  assert_non_null(strstr(err, "not released"));
  maelys_executor_error_free(err);
  maelys_execution_release(e);
  harness_finish(&h);
  assert_true(process_exists(pid));
  for (int i = 0; i < 200 && process_exists(pid); i++)
    usleep(10000);
  assert_false(process_exists(pid));
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
}

/* Invariant 5: the child sees exactly the layout; a descriptor the host
 * opened without O_CLOEXEC is not among them. */
static void test_fd_layout(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 10000);
  int leak = open("/dev/null", O_RDONLY); /* deliberately without O_CLOEXEC */
  int leak_high = fcntl(leak, F_DUPFD, 40);
  assert_true(leak >= 0 && leak_high >= 40);
  assert_false(fcntl(leak_high, F_GETFD) & FD_CLOEXEC);

  maelys_executor_plan_t* plan = plan_unconfined();
  collected_t out;
  waited_t w;
  maelys_execution_request_t* req = request_fixture("posix", ARGS("fds"));
  run_capture(&h, plan, req, &out, &w);
  assert_string_equal(out.data, "fds=0,1,2\n");
  collected_free(&out);
  maelys_execution_request_destroy(req);

  /* Isolated duplex with a channel at 5: 0-2, the protocol at 3, 5. */
  maelys_executor_plan_t* chplan = NULL;
  assert_int_equal(maelys_executor_plan_create(&chplan, NULL), 0);
  assert_int_equal(maelys_executor_plan_set_network(
                       chplan, MAELYS_EXECUTOR_NETWORK_INHERIT, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_channel(chplan, 5, "egress", NULL),
                   0);
  assert_int_equal(maelys_executor_plan_seal(chplan, NULL), 0);
  req = request_fixture("posix", ARGS("fds"));
  assert_int_equal(maelys_execution_request_set_io_mode(
                       req, MAELYS_EXEC_IO_ISOLATED_DUPLEX, 3, NULL),
                   0);
  assert_int_equal(maelys_execution_request_set_stderr_mode(
                       req, MAELYS_EXEC_STDERR_CAPTURE, NULL),
                   0);
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  assert_int_equal(maelys_execution_request_add_channel(req, 5, &sv[0], NULL),
                   0);
  maelys_execution_t* e = spawn_ok(&h, chplan, req);
  uv_stream_t* errs = NULL;
  /* Isolated: stdout is stderr, so the listing arrives on stderr. */
  assert_int_equal(
      maelys_execution_stream(e, MAELYS_EXEC_STREAM_STDERR, &errs, NULL), 0);
  collect_start(errs, &out);
  memset(&w, 0, sizeof w);
  maelys_execution_wait(e, waited_cb, &w, NULL);
  harness_run_until(&h, &w.done);
  harness_run_until(&h, &out.eof);
  assert_string_equal(out.data, "fds=0,1,2,3,5\n");
  maelys_execution_release(e);
  collected_free(&out);
  close(sv[1]);
  close(leak);
  close(leak_high);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(chplan);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

/* Invariant 4: the child sees exactly the request's environment. */
static void test_environment(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 10000);
  setenv("MAELYS_HOST_SECRET", "leak", 1);
  maelys_executor_plan_t* plan = plan_unconfined();
  collected_t out;
  waited_t w;
  maelys_execution_request_t* req = request_fixture("posix", ARGS("env"));
  run_capture(&h, plan, req, &out, &w);
  assert_string_equal(out.data, "");
  collected_free(&out);
  maelys_execution_request_destroy(req);

  req = request_fixture("posix", ARGS("env"));
  assert_int_equal(maelys_execution_request_set_environment_mode(
                       req, MAELYS_EXEC_ENV_EXPLICIT, NULL),
                   0);
  assert_int_equal(
      maelys_execution_request_add_environment(req, "A", "1", NULL), 0);
  assert_int_equal(
      maelys_execution_request_add_environment(req, "B", "two words", NULL), 0);
  run_capture(&h, plan, req, &out, &w);
  assert_string_equal(out.data, "A=1\nB=two words\n");
  collected_free(&out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  unsetenv("MAELYS_HOST_SECRET");
  harness_finish(&h);
}

static void test_cwd_and_rlimit(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 10000);
  maelys_executor_plan_t* plan = plan_unconfined();
  collected_t out;
  waited_t w;
  maelys_execution_request_t* req = request_fixture("posix", ARGS("cwd"));
  assert_int_equal(maelys_execution_request_set_cwd(req, "/tmp", NULL), 0);
  run_capture(&h, plan, req, &out, &w);
  assert_string_equal(out.data, "/tmp\n");
  collected_free(&out);
  maelys_execution_request_destroy(req);

  if (getenv("MAELYS_TEST_UNDER_VALGRIND") != NULL) {
    /* valgrind emulates setrlimit in the forked child and refuses it; the
     * plain run of this binary checks the limit. */
    print_message("skipping the rlimit half under valgrind: it emulates "
                  "setrlimit in the child\n");
    maelys_executor_plan_destroy(plan);
    harness_finish(&h);
    return;
  }
  maelys_executor_plan_t* limited = NULL;
  assert_int_equal(maelys_executor_plan_create(&limited, NULL), 0);
  assert_int_equal(maelys_executor_plan_set_network(
                       limited, MAELYS_EXECUTOR_NETWORK_INHERIT, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_set_rlimit(
                       limited, MAELYS_EXECUTOR_RLIMIT_NOFILE, 64, 128, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_seal(limited, NULL), 0);
  req = request_fixture("posix", ARGS("nofile"));
  run_capture(&h, limited, req, &out, &w);
  assert_string_equal(out.data, "nofile=64:128\n");
  collected_free(&out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(limited);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

/* --------------------------------------------------------- 1 MiB echoes */

typedef struct echo_state {
  unsigned char* sent;
  size_t size;
  collected_t got;
  uv_write_t wr;
  uv_shutdown_t sd;
} echo_state_t;

static void on_written(uv_write_t* req, int status) {
  assert_int_equal(status, 0);
  echo_state_t* st = req->data;
  st->sd.data = st;
  uv_shutdown(&st->sd, req->handle, NULL);
}

static void echo_through(harness_t* h, maelys_exec_io_mode_t mode,
                         const char* const* args) {
  maelys_executor_plan_t* plan = plan_unconfined();
  maelys_execution_request_t* req = request_fixture("posix", args);
  assert_int_equal(
      maelys_execution_request_set_io_mode(
          req, mode, mode == MAELYS_EXEC_IO_ISOLATED_DUPLEX ? 3 : -1, NULL),
      0);
  maelys_execution_t* e = spawn_ok(h, plan, req);
  uv_stream_t* s = NULL;
  assert_int_equal(
      maelys_execution_stream(e, MAELYS_EXEC_STREAM_PROTOCOL, &s, NULL), 0);
  echo_state_t st;
  memset(&st, 0, sizeof st);
  st.size = 1 << 20;
  st.sent = malloc(st.size);
  for (size_t i = 0; i < st.size; i++)
    st.sent[i] = (unsigned char)(rand() & 0xff);
  collect_start(s, &st.got);
  uv_buf_t buf = uv_buf_init((char*)st.sent, (unsigned)st.size);
  st.wr.data = &st;
  assert_int_equal(uv_write(&st.wr, s, &buf, 1, on_written), 0);
  harness_run_until(h, &st.got.eof);
  assert_int_equal(st.got.len, st.size);
  assert_memory_equal(st.got.data, st.sent, st.size);
  waited_t w;
  memset(&w, 0, sizeof w);
  maelys_execution_wait(e, waited_cb, &w, NULL);
  harness_run_until(h, &w.done);
  assert_int_equal(w.status.exit_code, 0);
  maelys_execution_release(e);
  collected_free(&st.got);
  free(st.sent);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
}

static void test_echo_1mib(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 20000);
  echo_through(&h, MAELYS_EXEC_IO_DUPLEX_STDIO, ARGS("echo", "0", "1"));
  echo_through(&h, MAELYS_EXEC_IO_ISOLATED_DUPLEX, ARGS("echo", "3", "3"));
  harness_finish(&h);
}

/* 200 concurrent executions on one loop, all reaped. */
static void test_200_concurrent(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  maelys_executor_plan_t* plan = plan_unconfined();
  enum { N = 200 };
  maelys_execution_t* e[N];
  waited_t w[N];
  int pids[N];
  for (int i = 0; i < N; i++) {
    char code[8];
    snprintf(code, sizeof code, "%d", i % 256);
    maelys_execution_request_t* req =
        request_fixture("posix", ARGS("exit", code));
    maelys_execution_request_set_io_mode(req, MAELYS_EXEC_IO_INHERIT, -1, NULL);
    e[i] = spawn_ok(&h, plan, req);
    pids[i] = maelys_execution_pid(e[i]);
    memset(&w[i], 0, sizeof w[i]);
    maelys_execution_wait(e[i], waited_cb, &w[i], NULL);
    maelys_execution_request_destroy(req);
  }
  for (int i = 0; i < N; i++) {
    harness_run_until(&h, &w[i].done);
    assert_int_equal(w[i].status.exit_code, i % 256);
  }
  for (int i = 0; i < N; i++) {
    maelys_execution_release(e[i]);
    assert_false(process_exists(pids[i]) && process_is_zombie(pids[i]));
  }
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

/* Receipts: written atomically with the plan digest; refused inside a path
 * the plan makes writable (invariant 13). */
static void test_receipts(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 10000);
  char dir[] = "/tmp/maelys-receipts-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char sub[256];
  snprintf(sub, sizeof sub, "%s/nested/receipts", dir);
  maelys_executor_plan_t* plan = NULL;
  assert_int_equal(maelys_executor_plan_create(&plan, NULL), 0);
  assert_int_equal(maelys_executor_plan_set_network(
                       plan, MAELYS_EXECUTOR_NETWORK_INHERIT, NULL),
                   0);
  assert_int_equal(
      maelys_executor_plan_set_decision_digest(
          plan,
          "sha256:00112233445566778899aabbccddeeff00112233445566778899"
          "aabbccddeeff",
          NULL),
      0);
  assert_int_equal(maelys_executor_plan_seal(plan, NULL), 0);
  char* digest = NULL;
  assert_int_equal(maelys_executor_plan_digest(plan, &digest, NULL), 0);
  maelys_execution_request_t* req = request_fixture("posix", ARGS("exit", "4"));
  assert_int_equal(maelys_execution_request_set_receipt_dir(req, sub, NULL), 0);
  maelys_execution_t* e = spawn_ok(&h, plan, req);
  waited_t w;
  memset(&w, 0, sizeof w);
  maelys_execution_wait(e, waited_cb, &w, NULL);
  harness_run_until(&h, &w.done);
  const char* path = maelys_execution_receipt_path(e);
  assert_non_null(path);
  FILE* f = fopen(path, "r");
  assert_non_null(f);
  char text[8192];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  assert_non_null(strstr(text, digest));
  assert_non_null(strstr(text, "\"exit_code\": 4"));
  assert_non_null(strstr(text, "00112233445566778899aabbccddeeff"));
  assert_non_null(strstr(text, maelys_execution_id(e)));
  char* json = NULL;
  assert_int_equal(maelys_execution_receipt(e, &json, NULL), 0);
  assert_non_null(strstr(json, "argv_digest"));
  maelys_executor_string_free(json);
  struct stat st;
  assert_int_equal(stat(sub, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);
  unlink(path);
  maelys_execution_release(e);
  maelys_execution_request_destroy(req);
  maelys_executor_string_free(digest);
  maelys_executor_plan_destroy(plan);

  /* Inside a writable path: refused before anything runs. */
  maelys_executor_plan_t* rw = NULL;
  assert_int_equal(maelys_executor_plan_create(&rw, NULL), 0);
  assert_int_equal(maelys_executor_plan_set_network(
                       rw, MAELYS_EXECUTOR_NETWORK_INHERIT, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       rw, dir, MAELYS_EXECUTOR_ACCESS_WRITE,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_seal(rw, NULL), 0);
  req = request_fixture("posix", ARGS("exit", "0"));
  assert_int_equal(maelys_execution_request_set_receipt_dir(req, sub, NULL), 0);
  char* err = NULL;
  e = NULL;
  assert_int_equal(maelys_execution_spawn(h.executor, rw, req, &e, &err),
                   MAELYS_EXECUTOR_ERR_DENIED);
  assert_non_null(strstr(err, "writable"));
  maelys_executor_error_free(err);
  assert_null(e);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(rw);
  rmdir(sub);
  snprintf(sub, sizeof sub, "%s/nested", dir);
  rmdir(sub);
  rmdir(dir);
  harness_finish(&h);
}

static void test_stderr_capture(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 10000);
  maelys_executor_plan_t* plan = plan_unconfined();
  /* Isolated: what the payload prints on stdout lands on stderr, never on
   * the protocol socket. */
  maelys_execution_request_t* req = request_fixture("posix", ARGS("cwd"));
  assert_int_equal(maelys_execution_request_set_io_mode(
                       req, MAELYS_EXEC_IO_ISOLATED_DUPLEX, 3, NULL),
                   0);
  assert_int_equal(maelys_execution_request_set_stderr_mode(
                       req, MAELYS_EXEC_STDERR_CAPTURE, NULL),
                   0);
  maelys_execution_t* e = spawn_ok(&h, plan, req);
  uv_stream_t *err_s = NULL, *proto = NULL;
  assert_int_equal(
      maelys_execution_stream(e, MAELYS_EXEC_STREAM_STDERR, &err_s, NULL), 0);
  assert_int_equal(
      maelys_execution_stream(e, MAELYS_EXEC_STREAM_PROTOCOL, &proto, NULL), 0);
  uv_stream_t* none = NULL;
  assert_int_equal(
      maelys_execution_stream(e, MAELYS_EXEC_STREAM_STDOUT, &none, NULL),
      MAELYS_EXECUTOR_ERR_NOT_FOUND);
  collected_t e_out, p_out;
  collect_start(err_s, &e_out);
  collect_start(proto, &p_out);
  harness_run_until(&h, &e_out.eof);
  harness_run_until(&h, &p_out.eof);
  assert_string_equal(e_out.data, "/\n");
  assert_int_equal(p_out.len, 0);
  maelys_execution_release(e);
  collected_free(&e_out);
  collected_free(&p_out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exit_codes),
      cmocka_unit_test(test_signals),
      cmocka_unit_test(test_spawn_errors),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_wait_twice),
      cmocka_unit_test(test_stop_ignoring_child),
      cmocka_unit_test(test_stop_graceful),
      cmocka_unit_test(test_stop_forms_twice),
      cmocka_unit_test(test_stop_graceful_only_still_running),
      cmocka_unit_test(test_take_fd),
      cmocka_unit_test(test_release_running),
      cmocka_unit_test(test_destroy_with_orphan),
      cmocka_unit_test(test_fd_layout),
      cmocka_unit_test(test_environment),
      cmocka_unit_test(test_cwd_and_rlimit),
      cmocka_unit_test(test_echo_1mib),
      cmocka_unit_test(test_200_concurrent),
      cmocka_unit_test(test_receipts),
      cmocka_unit_test(test_stderr_capture),
  };
  return cmocka_run_group_tests_name("posix", tests, NULL, NULL);
}
