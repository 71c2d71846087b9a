/*
 * Real launches for registration probes (maelys_backend_probe_run in
 * backend.h): the backend's production path (prepare, the core's spawn, its
 * stop) proves what it advertises, on a private loop so that the host's loop
 * is never touched.
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* After the forced stop, how long stdout may stay open before the tree is
 * declared not contained. */
#define TREE_DEADLINE_MS 3000
#define OUTPUT_MAX (64 * 1024)

typedef struct probe_ctx {
  maelys_backend_probe_run_t* run;
  maelys_execution_t* execution;
  uv_timer_t timer;
  uv_stream_t* out;
  uv_stream_t* err;
  bool spawned;
  bool waited;
  bool out_eof;
  bool err_eof;
  bool stopping;
  bool abandon;
  int late_looks; /* deadlines deferred for output already pending */
  char buffer[4096];
} probe_ctx_t;

static void on_timeout(uv_timer_t* t);

static void on_alloc(uv_handle_t* h, size_t suggested, uv_buf_t* buf) {
  probe_ctx_t* ctx = h->data;
  (void)suggested;
  /* One read at a time on this private loop; on_read copies the bytes out
   * before the next read. */
  *buf = uv_buf_init(ctx->buffer, sizeof ctx->buffer);
}

/* The first child of `pid` found in /proc that has a child itself when
 * `parent` (the launcher has two children: bwrap's monitor, which has one,
 * and the denial listener, which has none), or -1 (registration only: a
 * scan of /proc is fine here, and needs no CONFIG_PROC_CHILDREN). */
static int first_child(int pid, bool parent) {
  DIR* d = opendir("/proc");
  if (d == NULL)
    return -1;
  int found = -1;
  struct dirent* e;
  while (found < 0 && (e = readdir(d)) != NULL) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9')
      continue;
    char path[300], text[512];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    FILE* f = fopen(path, "re");
    if (f == NULL)
      continue;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char* close_paren = strrchr(text, ')');
    int ppid = 0;
    char state;
    if (close_paren != NULL &&
        sscanf(close_paren + 1, " %c %d", &state, &ppid) == 2 && ppid == pid &&
        (!parent || first_child(atoi(e->d_name), false) > 0))
      found = atoi(e->d_name);
  }
  closedir(d);
  return found;
}

static void read_root_identity(probe_ctx_t* ctx) {
  int pid = maelys__execution_root_pid(ctx->execution);
  if (pid <= 0) {
    /* A launcher that is pid 1 of its own namespace: its child is bwrap's
     * monitor, whose child is the sandbox's pid 1. */
    pid = maelys_execution_pid(ctx->execution);
    for (int depth = 0; pid > 0 && depth < 2; depth++)
      pid = first_child(pid, depth == 0);
  }
  if (pid <= 0)
    return;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/status", pid);
  FILE* f = fopen(path, "r");
  if (f == NULL)
    return;
  char line[256];
  while (fgets(line, sizeof line, f)) {
    long uid;
    unsigned long long eff;
    if (sscanf(line, "Uid: %ld", &uid) == 1)
      ctx->run->root_uid = uid;
    else if (sscanf(line, "CapEff: %llx", &eff) == 1)
      ctx->run->root_has_caps = eff != 0;
  }
  fclose(f);
}

static void maybe_done(probe_ctx_t* ctx) {
  if (ctx->waited && ctx->out_eof && ctx->err_eof) {
    ctx->run->output_eof = true;
    uv_timer_stop(&ctx->timer);
  }
}

static void on_stopped(maelys_execution_t* e, maelys_execution_stop_result_t r,
                       void* data) {
  (void)e;
  (void)r;
  (void)data;
}

static void on_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
  probe_ctx_t* ctx = s->data;
  maelys_backend_probe_run_t* run = ctx->run;
  if (n < 0) {
    uv_read_stop(s);
    if (s == ctx->out)
      ctx->out_eof = true;
    else
      ctx->err_eof = true;
    maybe_done(ctx);
    return;
  }
  if (s != ctx->out || n == 0)
    return;
  size_t room = OUTPUT_MAX - run->output_len;
  size_t take = (size_t)n < room ? (size_t)n : room;
  memcpy(run->output + run->output_len, buf->base, take);
  run->output_len += take;
  run->output[run->output_len] = '\0';
  if (run->marker != NULL && !ctx->stopping &&
      strstr(run->output, run->marker) != NULL) {
    run->marker_seen = true;
    read_root_identity(ctx);
    ctx->stopping = true;
    if (run->end_by_lifeline)
      maelys__execution_drop_lifeline(ctx->execution);
    else
      maelys_execution_stop(ctx->execution, MAELYS_EXEC_STOP_FORCED, on_stopped,
                            NULL, NULL);
    uv_timer_start(&ctx->timer, on_timeout, TREE_DEADLINE_MS, 0);
  }
}

/* Whether `s` has bytes or its end waiting to be read. */
static bool input_pending(uv_stream_t* s, bool eof) {
  int fd = -1;
  if (s == NULL || eof || uv_fileno((uv_handle_t*)s, &fd) != 0)
    return false;
  struct pollfd p = {.fd = fd, .events = POLLIN};
  return poll(&p, 1, 0) == 1;
}

static void on_timeout(uv_timer_t* t) {
  probe_ctx_t* ctx = t->data;
  /* libuv runs expired timers before it polls. After a stall of this loop
   * (a loaded host, an instrumented one: seen under valgrind in CI), the
   * deadline can pass with the output's end already waiting, which would be
   * taken for a tree that outlived its end. Output that is pending is read
   * first: the deadline is looked at again after this turn's poll, a few
   * times at most (a payload that keeps writing cannot defer it long). */
  if (ctx->late_looks < 5 && (input_pending(ctx->out, ctx->out_eof) ||
                              input_pending(ctx->err, ctx->err_eof))) {
    ctx->late_looks++;
    uv_timer_start(&ctx->timer, on_timeout, 10, 0);
    return;
  }
  if (ctx->run->timed_out) {
    /* Even the forced stop did not end it in time: give up waiting (the
     * execution is released and reaped in the background). */
    ctx->abandon = true;
    return;
  }
  ctx->run->timed_out = true;
  if (!ctx->stopping) {
    ctx->stopping = true;
    maelys_execution_stop(ctx->execution, MAELYS_EXEC_STOP_FORCED, on_stopped,
                          NULL, NULL);
  }
  uv_timer_start(&ctx->timer, on_timeout, TREE_DEADLINE_MS, 0);
}

static void on_wait(maelys_execution_t* e, const maelys_execution_status_t* s,
                    void* data) {
  (void)e;
  probe_ctx_t* ctx = data;
  maelys_backend_probe_run_t* run = ctx->run;
  run->outcome = s->outcome;
  run->exit_code = s->exit_code;
  run->term_signal = s->term_signal;
  run->launch_errno = s->launch_errno;
  snprintf(run->launch_step, sizeof run->launch_step, "%s", s->launch_step);
  snprintf(run->message, sizeof run->message, "%s", s->message);
  ctx->waited = true;
  maybe_done(ctx);
}

static bool ctx_done(const probe_ctx_t* ctx) {
  return !ctx->spawned || ctx->abandon ||
         (ctx->waited && ctx->out_eof && ctx->err_eof);
}

/* The private loop, and an executor on it that borrows the backend. */
typedef struct probe_loop {
  uv_loop_t loop;
  bool loop_ok;
  maelys_executor_t* executor;
} probe_loop_t;

static void probe_loop_close(probe_loop_t* pl) {
  if (pl->executor != NULL) {
    maelys_executor_destroy(pl->executor, NULL);
    uv_run(&pl->loop, UV_RUN_DEFAULT);
  }
  if (pl->loop_ok)
    uv_loop_close(&pl->loop);
}

static maelys_executor_result_t probe_loop_open(probe_loop_t* pl,
                                                const maelys_backend_t* backend,
                                                void* state, uint64_t assumed,
                                                char** out_error) {
  pl->loop_ok = uv_loop_init(&pl->loop) == 0;
  if (!pl->loop_ok)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                 "cannot create a probe loop");
  maelys_executor_result_t r =
      maelys_executor_create(&pl->loop, &pl->executor, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys__executor_adopt_backend(pl->executor, backend, state, assumed,
                                       out_error);
  return r;
}

static void start_run(probe_ctx_t* ctx, maelys_executor_t* executor,
                      uv_loop_t* loop, maelys_backend_probe_run_t* run) {
  ctx->run = run;
  uv_timer_init(loop, &ctx->timer);
  ctx->timer.data = ctx;
  char* error = NULL;
  if (run->output == NULL) {
    run->spawn_error = maelys__executor_strdup("out of memory");
    return;
  }
  if (maelys_execution_spawn(executor, run->plan, run->request, &ctx->execution,
                             &error) != MAELYS_EXECUTOR_OK) {
    run->spawn_error = error ? error : maelys__executor_strdup("spawn failed");
    return;
  }
  run->spawned = true;
  ctx->spawned = true;
  /* A stream the request's modes do not capture is one with nothing to
   * wait for. */
  if (maelys_execution_stream(ctx->execution, MAELYS_EXEC_STREAM_STDOUT,
                              &ctx->out, NULL) == MAELYS_EXECUTOR_OK) {
    ctx->out->data = ctx;
    uv_read_start(ctx->out, on_alloc, on_read);
  } else {
    ctx->out_eof = true;
  }
  if (maelys_execution_stream(ctx->execution, MAELYS_EXEC_STREAM_STDERR,
                              &ctx->err, NULL) == MAELYS_EXECUTOR_OK) {
    ctx->err->data = ctx;
    uv_read_start(ctx->err, on_alloc, on_read);
  } else {
    ctx->err_eof = true;
  }
  maelys_execution_wait(ctx->execution, on_wait, ctx, NULL);
  uv_timer_start(&ctx->timer, on_timeout, run->timeout_ms, 0);
}

maelys_executor_result_t maelys_backend_probe_run(
    const maelys_backend_t* backend, void* state, uint64_t assumed,
    maelys_backend_probe_run_t* const* runs, size_t count, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (backend == NULL || (runs == NULL && count > 0))
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "backend and runs are required");
  for (size_t i = 0; i < count; i++)
    if (runs[i] == NULL || runs[i]->struct_size < sizeof *runs[i] ||
        runs[i]->plan == NULL || runs[i]->request == NULL)
      return maelys__executor_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "probe run %zu is NULL, has no plan or request, or was not set up "
          "with maelys_backend_probe_run_init",
          i);
  for (size_t i = 0; i < count; i++) {
    maelys_backend_probe_run_t* run = runs[i];
    run->spawned = false;
    run->spawn_error = NULL;
    run->marker_seen = run->output_eof = run->timed_out = false;
    run->root_uid = -1;
    run->root_has_caps = -1;
    run->output_len = 0;
    run->output = calloc(1, OUTPUT_MAX + 1);
  }
  probe_ctx_t* ctxs = calloc(count ? count : 1, sizeof *ctxs);
  probe_loop_t pl;
  memset(&pl, 0, sizeof pl);
  char* failure = NULL;
  if (ctxs == NULL || probe_loop_open(&pl, backend, state, assumed, &failure) !=
                          MAELYS_EXECUTOR_OK) {
    /* Nothing ran: each run says why, as a spawn that failed would. */
    probe_loop_close(&pl);
    for (size_t i = 0; i < count; i++)
      runs[i]->spawn_error =
          maelys__executor_strdup(failure ? failure : "out of memory");
    free(failure);
    free(ctxs);
    return MAELYS_EXECUTOR_OK;
  }
  /* Every run at once on the one private loop: registration costs the
   * slowest sandbox, not their sum. */
  for (size_t i = 0; i < count; i++)
    start_run(&ctxs[i], pl.executor, &pl.loop, runs[i]);
  for (;;) {
    bool all = true;
    for (size_t i = 0; i < count; i++)
      all = all && ctx_done(&ctxs[i]);
    if (all)
      break;
    uv_run(&pl.loop, UV_RUN_ONCE);
  }
  for (size_t i = 0; i < count; i++) {
    if (ctxs[i].spawned)
      maelys_execution_release(ctxs[i].execution);
    uv_timer_stop(&ctxs[i].timer);
    uv_close((uv_handle_t*)&ctxs[i].timer, NULL);
  }
  probe_loop_close(&pl);
  free(ctxs);
  return MAELYS_EXECUTOR_OK;
}

void maelys_backend_probe_run_dispose(maelys_backend_probe_run_t* run) {
  if (run == NULL)
    return;
  free(run->output);
  free(run->spawn_error);
  run->output = NULL;
  run->spawn_error = NULL;
}
