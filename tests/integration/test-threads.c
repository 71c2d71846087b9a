/*
 * No process-wide state: several executors on several loops, each driven by
 * its own thread, run side by side (the MCP runtime calls its launcher from
 * its own pthreads).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

enum { THREADS = 4, PER_THREAD = 25 };

typedef struct worker {
  int index;
  int completed;
  int wrong;
  char error[256];
} worker_t;

static void on_done(maelys_execution_t* e, const maelys_execution_status_t* s,
                    void* data) {
  worker_t* w = data;
  (void)e;
  w->completed++;
  if (s->outcome != MAELYS_EXEC_OUTCOME_EXITED || s->exit_code != w->index)
    w->wrong++;
}

static void* run_worker(void* arg) {
  worker_t* w = arg;
  uv_loop_t loop;
  uv_loop_init(&loop);
  maelys_executor_t* ex = NULL;
  char* err = NULL;
  if (maelys_executor_create(&loop, &ex, &err) != 0 ||
      maelys_executor_register_backend(ex, maelys_backend_posix(), NULL,
                                       &err) != 0) {
    snprintf(w->error, sizeof w->error, "setup: %s", err ? err : "?");
    return NULL;
  }
  maelys_executor_plan_t* plan = NULL;
  maelys_executor_plan_create(&plan, NULL);
  maelys_executor_plan_set_network(plan, MAELYS_EXECUTOR_NETWORK_INHERIT, NULL);
  maelys_executor_plan_seal(plan, NULL);
  maelys_execution_t* e[PER_THREAD];
  char code[8];
  snprintf(code, sizeof code, "%d", w->index);
  for (int i = 0; i < PER_THREAD; i++) {
    maelys_execution_request_t* r = NULL;
    maelys_execution_request_create(&r, NULL);
    maelys_execution_request_set_executable(r, MAELYS_FIXTURE, NULL);
    const char* argv[] = {MAELYS_FIXTURE, "exit", code, NULL};
    maelys_execution_request_set_argv(r, argv, NULL);
    maelys_execution_request_set_backend(r, "posix", NULL);
    maelys_execution_request_set_io_mode(r, MAELYS_EXEC_IO_INHERIT, -1, NULL);
    if (maelys_execution_spawn(ex, plan, r, &e[i], &err) != 0) {
      snprintf(w->error, sizeof w->error, "spawn: %s", err ? err : "?");
      return NULL;
    }
    maelys_execution_wait(e[i], on_done, w, NULL);
    maelys_execution_request_destroy(r);
  }
  while (w->completed < PER_THREAD)
    uv_run(&loop, UV_RUN_ONCE);
  for (int i = 0; i < PER_THREAD; i++)
    maelys_execution_release(e[i]);
  maelys_executor_plan_destroy(plan);
  maelys_executor_destroy(ex, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&loop) != 0)
    snprintf(w->error, sizeof w->error, "uv_loop_close failed");
  return NULL;
}

static void test_executors_on_threads(void** state) {
  (void)state;
  pthread_t t[THREADS];
  worker_t w[THREADS];
  for (int i = 0; i < THREADS; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].index = 10 + i;
    assert_int_equal(pthread_create(&t[i], NULL, run_worker, &w[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(t[i], NULL);
    if (w[i].error[0])
      fail_msg("thread %d: %s", i, w[i].error);
    assert_int_equal(w[i].completed, PER_THREAD);
    assert_int_equal(w[i].wrong, 0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_executors_on_threads),
  };
  return cmocka_run_group_tests_name("threads", tests, NULL, NULL);
}
