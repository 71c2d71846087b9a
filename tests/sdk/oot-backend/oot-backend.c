/*
 * An out-of-tree backend, written against the installed maelys/backend.h
 * alone: "pidns-example" starts the request's program as pid 1 of a new pid
 * namespace (the core's MAELYS_BACKEND_LAUNCH_NEW_PID_NAMESPACE) and proves
 * MAELYS_BACKEND_CAP_PID_NAMESPACE at registration with a real probe run
 * (maelys_backend_probe_run). The host below registers it, checks what it
 * proved, spawns a plan that requires the capability and one that requires
 * what it never proves.
 *
 *   oot-host          the host; exit 0 when every check holds
 *   oot-host pid      the payload: prints "pid=N"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <maelys/backend.h>

#define BACKEND_NAME "pidns-example"

typedef struct state {
  char* payload; /* the probe's payload: a program that prints "pid=N" */
} state_t;

/* ---------------------------------------------------------------- backend */

static maelys_executor_result_t
example_create(const maelys_backend_options_t* options, void** out_state,
               char** out_error) {
  *out_state = NULL;
  const char* payload = maelys_backend_options_get(options, "payload");
  if (payload == NULL || !maelys_backend_path_is_clean(payload))
    return maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                               BACKEND_NAME ": option 'payload' must be a "
                                            "clean absolute path (got '%s')",
                               payload ? payload : "(none)");
  state_t* st = calloc(1, sizeof *st);
  char* copy = maelys_backend_asprintf("%s", payload);
  if (st == NULL || copy == NULL) {
    free(st);
    free(copy);
    return maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                               "out of memory");
  }
  st->payload = copy;
  *out_state = st;
  return MAELYS_EXECUTOR_OK;
}

static void example_destroy(void* state) {
  state_t* st = state;
  if (st != NULL)
    free(st->payload);
  free(st);
}

static maelys_executor_plan_t* probe_plan(void) {
  maelys_executor_plan_t* plan = NULL;
  if (maelys_executor_plan_create(&plan, NULL) != MAELYS_EXECUTOR_OK)
    return NULL;
  if (maelys_executor_plan_set_network(plan, MAELYS_EXECUTOR_NETWORK_INHERIT,
                                       NULL) != MAELYS_EXECUTOR_OK ||
      maelys_executor_plan_seal(plan, NULL) != MAELYS_EXECUTOR_OK) {
    maelys_executor_plan_destroy(plan);
    return NULL;
  }
  return plan;
}

static maelys_execution_request_t* payload_request(const char* payload) {
  const char* argv[] = {payload, "pid", NULL};
  maelys_execution_request_t* r = NULL;
  if (maelys_execution_request_create(&r, NULL) != MAELYS_EXECUTOR_OK)
    return NULL;
  if (maelys_execution_request_set_executable(r, payload, NULL) !=
          MAELYS_EXECUTOR_OK ||
      maelys_execution_request_set_argv(r, argv, NULL) != MAELYS_EXECUTOR_OK ||
      maelys_execution_request_set_backend(r, BACKEND_NAME, NULL) !=
          MAELYS_EXECUTOR_OK) {
    maelys_execution_request_destroy(r);
    return NULL;
  }
  return r;
}

static const maelys_backend_t* example_backend(void);

/* The capability is proved by what a real launch printed: its pid is 1. */
static maelys_executor_result_t
example_probe(void* state, maelys_backend_probe_t* probe, char** out_error) {
  state_t* st = state;
  maelys_executor_plan_t* plan = probe_plan();
  maelys_execution_request_t* request = payload_request(st->payload);
  if (plan == NULL || request == NULL) {
    maelys_executor_plan_destroy(plan);
    maelys_execution_request_destroy(request);
    return maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                               "out of memory building the probe");
  }
  maelys_backend_probe_run_t run;
  maelys_backend_probe_run_init(&run, plan, request);
  run.timeout_ms = 10000;
  maelys_backend_probe_run_t* runs[] = {&run};
  maelys_executor_result_t r = maelys_backend_probe_run(
      example_backend(), state, MAELYS_BACKEND_CAP_PID_NAMESPACE, runs, 1,
      out_error);
  if (r == MAELYS_EXECUTOR_OK) {
    if (run.spawned && run.outcome == MAELYS_EXEC_OUTCOME_EXITED &&
        run.exit_code == 0 && strstr(run.output, "pid=1\n") == run.output) {
      maelys_backend_probe_prove(probe, MAELYS_BACKEND_CAP_PID_NAMESPACE);
    } else {
      char* why = maelys_backend_asprintf(
          "the probe payload was not pid 1 of a new pid namespace (%s%s)",
          run.spawned ? "it printed: " : "it did not start: ",
          run.spawned ? run.output : run.spawn_error);
      maelys_backend_probe_missing(probe, MAELYS_BACKEND_CAP_PID_NAMESPACE,
                                   why ? why : "out of memory");
      free(why);
    }
  }
  maelys_backend_probe_missing(
      probe, MAELYS_BACKEND_CAP_ALL & ~MAELYS_BACKEND_CAP_PID_NAMESPACE,
      BACKEND_NAME " only starts a new pid namespace");
  maelys_backend_probe_run_dispose(&run);
  maelys_execution_request_destroy(request);
  maelys_executor_plan_destroy(plan);
  return r;
}

static maelys_executor_result_t
example_prepare(void* state, uint64_t proved,
                const maelys_executor_plan_t* plan,
                const maelys_execution_request_t* request,
                maelys_backend_launch_t* launch, char** out_error) {
  (void)state;
  (void)proved;
  (void)request;
  /* Mounts and rules cannot be enforced here: refused, never dropped. */
  if (maelys_executor_plan_mount_count(plan) > 0 ||
      maelys_executor_plan_rule_count(plan) > 0)
    return maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                               BACKEND_NAME " cannot enforce mounts or "
                                            "filesystem rules");
  maelys_backend_launch_set_flags(launch,
                                  MAELYS_BACKEND_LAUNCH_NEW_PID_NAMESPACE |
                                      MAELYS_BACKEND_LAUNCH_DIE_WITH_PARENT);
  return MAELYS_EXECUTOR_OK;
}

static const maelys_backend_t example = {
    .abi_version = MAELYS_BACKEND_ABI_VERSION,
    .struct_size = sizeof(maelys_backend_t),
    .name = BACKEND_NAME,
    .create = example_create,
    .destroy = example_destroy,
    .probe = example_probe,
    .prepare = example_prepare,
};

static const maelys_backend_t* example_backend(void) {
  return &example;
}

/* ------------------------------------------------------------------- host */

static int failures;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "FAIL: " __VA_ARGS__);                                   \
      fputc('\n', stderr);                                                     \
      failures++;                                                              \
    }                                                                          \
  } while (0)

typedef struct spawn_result {
  char output[256];
  size_t len;
  int eof, waited;
  maelys_execution_status_t status;
} spawn_result_t;

static void on_alloc(uv_handle_t* h, size_t suggested, uv_buf_t* buf) {
  spawn_result_t* res = h->data;
  (void)suggested;
  *buf = uv_buf_init(res->output + res->len,
                     (unsigned)(sizeof res->output - 1 - res->len));
}

static void on_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
  spawn_result_t* res = s->data;
  (void)buf;
  if (n < 0 || res->len + 1 >= sizeof res->output) {
    uv_read_stop(s);
    res->eof = 1;
    return;
  }
  res->len += (size_t)n;
  res->output[res->len] = '\0';
}

static void on_wait(maelys_execution_t* e, const maelys_execution_status_t* s,
                    void* data) {
  spawn_result_t* res = data;
  (void)e;
  res->status = *s;
  res->waited = 1;
}

static maelys_executor_plan_t* plan_requiring(uint64_t capabilities) {
  maelys_executor_plan_t* plan = NULL;
  maelys_executor_plan_create(&plan, NULL);
  maelys_executor_plan_set_network(plan, MAELYS_EXECUTOR_NETWORK_INHERIT, NULL);
  maelys_executor_plan_require_capabilities(plan, capabilities, NULL);
  maelys_executor_plan_seal(plan, NULL);
  return plan;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "pid") == 0) {
    printf("pid=%d\n", (int)getpid());
    return 0;
  }
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    return 2;
  self[n] = '\0';

  uv_loop_t loop;
  uv_loop_init(&loop);
  maelys_executor_t* executor = NULL;
  maelys_executor_create(&loop, &executor, NULL);
  maelys_backend_options_t* options = NULL;
  maelys_backend_options_create(&options, NULL);
  maelys_backend_options_set(options, "payload", self, NULL);
  char* error = NULL;
  maelys_executor_result_t r = maelys_executor_register_backend(
      executor, example_backend(), options, &error);
  maelys_backend_options_destroy(options);
  CHECK(r == MAELYS_EXECUTOR_OK, "registration: %s", error ? error : "");
  maelys_executor_error_free(error);
  error = NULL;

  uint64_t mask = 0;
  maelys_executor_backend_capabilities(executor, BACKEND_NAME, &mask, NULL);
  char* reason = NULL;
  maelys_executor_backend_missing_reason(
      executor, BACKEND_NAME, MAELYS_BACKEND_CAP_PID_NAMESPACE, &reason, NULL);
  CHECK(mask == MAELYS_BACKEND_CAP_PID_NAMESPACE,
        "proved mask 0x%llx, expected pid-namespace alone (%s)",
        (unsigned long long)mask, reason ? reason : "");
  maelys_executor_string_free(reason);

  /* The proved capability lets a plan that requires it run, in a pid
   * namespace of its own. */
  maelys_executor_plan_t* plan =
      plan_requiring(MAELYS_BACKEND_CAP_PID_NAMESPACE);
  maelys_execution_request_t* request = payload_request(self);
  maelys_execution_t* execution = NULL;
  r = maelys_execution_spawn(executor, plan, request, &execution, &error);
  CHECK(r == MAELYS_EXECUTOR_OK, "spawn: %s", error ? error : "");
  maelys_executor_error_free(error);
  error = NULL;
  spawn_result_t res;
  memset(&res, 0, sizeof res);
  if (execution != NULL) {
    uv_stream_t* out = NULL;
    maelys_execution_stream(execution, MAELYS_EXEC_STREAM_STDOUT, &out, NULL);
    out->data = &res;
    uv_read_start(out, on_alloc, on_read);
    maelys_execution_wait(execution, on_wait, &res, NULL);
    while (!(res.waited && res.eof))
      uv_run(&loop, UV_RUN_ONCE);
    CHECK(res.status.outcome == MAELYS_EXEC_OUTCOME_EXITED &&
              res.status.exit_code == 0 && strcmp(res.output, "pid=1\n") == 0,
          "the payload printed '%s'", res.output);
    maelys_execution_release(execution);
  }
  maelys_execution_request_destroy(request);
  maelys_executor_plan_destroy(plan);

  /* What it never proved refuses the launch (invariant 1). */
  plan = plan_requiring(MAELYS_BACKEND_CAP_SECCOMP);
  request = payload_request(self);
  execution = NULL;
  r = maelys_execution_spawn(executor, plan, request, &execution, &error);
  CHECK(r == MAELYS_EXECUTOR_ERR_CAPABILITY && execution == NULL &&
            error != NULL && strstr(error, "only starts a new pid namespace"),
        "a plan requiring seccomp was not refused: %s", error ? error : "");
  maelys_executor_error_free(error);
  maelys_execution_request_destroy(request);
  maelys_executor_plan_destroy(plan);

  maelys_executor_destroy(executor, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(uv_loop_close(&loop) == 0, "the loop did not close cleanly");
  if (failures == 0)
    printf("%s proved pid-namespace with a real probe run\n", BACKEND_NAME);
  return failures == 0 ? 0 : 1;
}
