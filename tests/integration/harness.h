/* Shared scaffolding of the integration tests: a real loop with a watchdog,
 * an executor, sealed plans, fixture requests, stream collectors. */
#ifndef MAELYS_TEST_HARNESS_H
#define MAELYS_TEST_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "maelys/executor.h"

typedef struct harness {
  uv_loop_t loop;
  uv_timer_t watchdog;
  uv_prepare_t until;
  maelys_executor_t* executor;
} harness_t;

/* A loop, a watchdog that fails the test after watchdog_ms, and an executor
 * with the posix backend registered. */
void harness_init(harness_t* h, unsigned watchdog_ms);
/* Registers the bubblewrap backend (bwrap from PATH, the helper built next to
 * the tests) and returns its proved mask. */
uint64_t harness_register_bubblewrap(harness_t* h);
/* Registers bubblewrap and returns its mask when it proved every bit of
 * `need`; otherwise the test cannot run here: a failure when
 * MAELYS_BWRAP_MUST_WORK=1 (CI) says it must, else h is finished and the test
 * is skipped (harness_skip), naming the backend's diagnostic. */
uint64_t harness_bubblewrap_or_skip(harness_t* h, uint64_t need);
/* The test cannot run here, for an explicitly optional reason: finishes h
 * (when not NULL), prints "SKIPPED: reason", counts the skip and reports it
 * to cmocka with skip(), which leaves the test. */
void harness_skip(harness_t* h, const char* format, ...)
    __attribute__((format(printf, 2, 3), noreturn));
/* As harness_skip for a sandbox that cannot confine here, but a failure when
 * MAELYS_BWRAP_MUST_WORK=1. */
void harness_skip_sandbox(harness_t* h, const char* format, ...)
    __attribute__((format(printf, 2, 3), noreturn));
/* main()'s status from cmocka's count of failed tests: the failures, else 77
 * (ctest's SKIP_RETURN_CODE: the entry shows as skipped, not passed) when a
 * test was skipped, else 0. */
int harness_exit(int failed);
/* Destroys the executor, closes the watchdog and asserts that the loop
 * closes cleanly: uv_loop_close() returns 0. */
void harness_finish(harness_t* h);
/* Runs the loop until *flag is true. */
void harness_run_until(harness_t* h, const bool* flag);

uint64_t harness_now_ms(void);

/* A sealed plan with no rule (host root, network inherit). */
maelys_executor_plan_t* plan_unconfined(void);
/* A request for the fixture: argv = {fixture, args...}, on `backend`. */
maelys_execution_request_t* request_fixture(const char* backend,
                                            const char* const* args);

typedef struct collected {
  char* data;
  size_t len, cap;
  bool eof;
} collected_t;
void collect_start(uv_stream_t* stream, collected_t* c);
void collected_free(collected_t* c);

typedef struct waited {
  bool done;
  int calls;
  maelys_execution_status_t status;
  char step[32];
  char message[1024];
} waited_t;
/* A wait callback recording the status into a waited_t (data). */
void waited_cb(maelys_execution_t* e, const maelys_execution_status_t* s,
               void* data);

typedef struct stopped {
  bool done;
  int calls;
  maelys_execution_stop_result_t result;
  uint64_t at_ms;
} stopped_t;
void stopped_cb(maelys_execution_t* e, maelys_execution_stop_result_t r,
                void* data);

/* Spawns, waits for the end and collects stdout (CAPTURED) into *out. */
void run_capture(harness_t* h, const maelys_executor_plan_t* plan,
                 maelys_execution_request_t* req, collected_t* out,
                 waited_t* w);

/* Whether process `pid` exists at all (zombies included) in /proc. */
bool process_exists(int pid);
/* Whether process `pid` is a zombie. */
bool process_is_zombie(int pid);

#endif
