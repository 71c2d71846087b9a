#include "harness.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void on_watchdog(uv_timer_t* t) {
  (void)t;
  fail_msg("watchdog: the test did not finish in time");
}

void harness_init(harness_t* h, unsigned watchdog_ms) {
  memset(h, 0, sizeof *h);
  assert_int_equal(uv_loop_init(&h->loop), 0);
  uv_timer_init(&h->loop, &h->watchdog);
  uv_timer_start(&h->watchdog, on_watchdog, watchdog_ms, 0);
  uv_unref((uv_handle_t*)&h->watchdog);
  uv_prepare_init(&h->loop, &h->until);
  uv_unref((uv_handle_t*)&h->until);
  char* err = NULL;
  assert_int_equal(maelys_executor_create(&h->loop, &h->executor, &err),
                   MAELYS_EXECUTOR_OK);
  assert_int_equal(maelys_executor_register_backend(
                       h->executor, maelys_backend_posix(), NULL, &err),
                   MAELYS_EXECUTOR_OK);
}

uint64_t harness_register_bubblewrap(harness_t* h) {
  maelys_backend_options_t* o = NULL;
  char* err = NULL;
  assert_int_equal(maelys_backend_options_create(&o, &err), 0);
  assert_int_equal(maelys_backend_options_set(o, "helper", MAELYS_HELPER, &err),
                   0);
  maelys_executor_result_t r = maelys_executor_register_backend(
      h->executor, maelys_backend_bubblewrap(), o, &err);
  maelys_backend_options_destroy(o);
  if (r != MAELYS_EXECUTOR_OK)
    fail_msg("registering bubblewrap: %s", err ? err : "?");
  uint64_t mask = 0;
  assert_int_equal(maelys_executor_backend_capabilities(
                       h->executor, "bubblewrap", &mask, &err),
                   0);
  return mask;
}

/* Tests skipped in this process (harness_skip). */
static int skipped;

__attribute__((noreturn)) static void skip_now(harness_t* h, bool sandbox,
                                               const char* format, va_list ap) {
  char reason[2048];
  vsnprintf(reason, sizeof reason, format, ap);
  const char* must = getenv("MAELYS_BWRAP_MUST_WORK");
  if (sandbox && must != NULL && strcmp(must, "1") == 0)
    fail_msg("%s, and MAELYS_BWRAP_MUST_WORK=1 says it must", reason);
  if (h != NULL)
    harness_finish(h);
  print_message("SKIPPED: %s\n", reason);
  skipped++;
  skip();
  abort(); /* skip() does not return */
}

void harness_skip(harness_t* h, const char* format, ...) {
  va_list ap;
  va_start(ap, format);
  skip_now(h, false, format, ap);
}

void harness_skip_sandbox(harness_t* h, const char* format, ...) {
  va_list ap;
  va_start(ap, format);
  skip_now(h, true, format, ap);
}

uint64_t harness_bubblewrap_or_skip(harness_t* h, uint64_t need) {
  uint64_t mask = harness_register_bubblewrap(h);
  if ((mask & need) == need)
    return mask;
  char* diag = NULL;
  maelys_executor_backend_diagnostic(h->executor, "bubblewrap", &diag, NULL);
  char reason[1536];
  snprintf(reason, sizeof reason, "bubblewrap cannot confine here: %s",
           diag ? diag : "");
  maelys_executor_string_free(diag);
  harness_skip_sandbox(h, "%s", reason);
}

int harness_exit(int failed) {
  if (failed != 0)
    return failed;
  return skipped > 0 ? 77 : 0;
}

void harness_finish(harness_t* h) {
  char* err = NULL;
  maelys_executor_result_t r = maelys_executor_destroy(h->executor, &err);
  if (r != MAELYS_EXECUTOR_OK)
    fail_msg("destroying the executor: %s", err ? err : "?");
  uv_close((uv_handle_t*)&h->watchdog, NULL);
  uv_close((uv_handle_t*)&h->until, NULL);
  uv_run(&h->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&h->loop), 0);
}

/* Stops the loop right before it would poll once the condition holds, so a
 * callback run in an earlier phase of the same turn never leaves the loop
 * blocked in poll. */
static void on_until(uv_prepare_t* p) {
  if (*(const bool*)p->data)
    uv_stop(p->loop);
}

void harness_run_until(harness_t* h, const bool* flag) {
  h->until.data = (void*)flag;
  uv_prepare_start(&h->until, on_until);
  uv_ref((uv_handle_t*)&h->watchdog);
  while (!*flag) {
    if (uv_run(&h->loop, UV_RUN_DEFAULT) == 0 && !*flag)
      fail_msg("the loop ran out of work before the awaited event");
  }
  uv_unref((uv_handle_t*)&h->watchdog);
  uv_prepare_stop(&h->until);
}

uint64_t harness_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

maelys_executor_plan_t* plan_unconfined(void) {
  maelys_executor_plan_t* p = NULL;
  assert_int_equal(maelys_executor_plan_create(&p, NULL), 0);
  assert_int_equal(maelys_executor_plan_set_network(
                       p, MAELYS_EXECUTOR_NETWORK_INHERIT, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_seal(p, NULL), 0);
  return p;
}

maelys_execution_request_t* request_fixture(const char* backend,
                                            const char* const* args) {
  maelys_execution_request_t* r = NULL;
  char* err = NULL;
  assert_int_equal(maelys_execution_request_create(&r, &err), 0);
  assert_int_equal(
      maelys_execution_request_set_executable(r, MAELYS_FIXTURE, &err), 0);
  const char* argv[64];
  size_t n = 0;
  argv[n++] = MAELYS_FIXTURE;
  for (size_t i = 0; args != NULL && args[i] != NULL && n < 63; i++)
    argv[n++] = args[i];
  argv[n] = NULL;
  assert_int_equal(maelys_execution_request_set_argv(r, argv, &err), 0);
  assert_int_equal(maelys_execution_request_set_backend(r, backend, &err), 0);
  return r;
}

static void on_alloc(uv_handle_t* h, size_t suggested, uv_buf_t* buf) {
  collected_t* c = h->data;
  if (c->cap - c->len < suggested + 1) {
    size_t cap = c->cap ? c->cap : 65536;
    while (cap - c->len < suggested + 1)
      cap *= 2;
    c->data = realloc(c->data, cap);
    assert_non_null(c->data);
    c->cap = cap;
  }
  *buf = uv_buf_init(c->data + c->len, (unsigned)(c->cap - c->len - 1));
}

static void on_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
  collected_t* c = s->data;
  (void)buf;
  if (n < 0) {
    c->eof = true;
    uv_read_stop(s);
    return;
  }
  c->len += (size_t)n;
  c->data[c->len] = '\0';
}

void collect_start(uv_stream_t* stream, collected_t* c) {
  memset(c, 0, sizeof *c);
  c->data = calloc(1, 1);
  c->cap = 1;
  stream->data = c;
  assert_int_equal(uv_read_start(stream, on_alloc, on_read), 0);
}

void collected_free(collected_t* c) {
  free(c->data);
  memset(c, 0, sizeof *c);
}

void waited_cb(maelys_execution_t* e, const maelys_execution_status_t* s,
               void* data) {
  (void)e;
  waited_t* w = data;
  w->calls++;
  w->status = *s;
  snprintf(w->step, sizeof w->step, "%s", s->launch_step);
  snprintf(w->message, sizeof w->message, "%s", s->message);
  w->status.launch_step = w->step;
  w->status.message = w->message;
  w->done = true;
}

void stopped_cb(maelys_execution_t* e, maelys_execution_stop_result_t r,
                void* data) {
  (void)e;
  stopped_t* s = data;
  s->calls++;
  s->result = r;
  s->at_ms = harness_now_ms();
  s->done = true;
}

void run_capture(harness_t* h, const maelys_executor_plan_t* plan,
                 maelys_execution_request_t* req, collected_t* out,
                 waited_t* w) {
  maelys_execution_t* e = NULL;
  char* err = NULL;
  maelys_executor_result_t r =
      maelys_execution_spawn(h->executor, plan, req, &e, &err);
  if (r != MAELYS_EXECUTOR_OK)
    fail_msg("spawn: %s: %s", maelys_executor_result_name(r), err);
  uv_stream_t* s = NULL;
  assert_int_equal(
      maelys_execution_stream(e, MAELYS_EXEC_STREAM_STDOUT, &s, &err), 0);
  collect_start(s, out);
  memset(w, 0, sizeof *w);
  assert_int_equal(maelys_execution_wait(e, waited_cb, w, &err), 0);
  harness_run_until(h, &w->done);
  harness_run_until(h, &out->eof);
  maelys_execution_release(e);
}

static char proc_state(int pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (f == NULL)
    return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char* p = strrchr(buf, ')');
  return p && p[1] == ' ' ? p[2] : '?';
}

bool process_exists(int pid) {
  return proc_state(pid) != 0;
}

bool process_is_zombie(int pid) {
  return proc_state(pid) == 'Z';
}
