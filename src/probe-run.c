/*
 * Real launches for registration probes: the backend's production path
 * (prepare, the core's spawn, its stop) proves what it advertises, on a
 * private loop so that the host's loop is never touched.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* After the forced stop, how long stdout may stay open before the tree is
 * declared not contained. */
#define TREE_DEADLINE_MS 3000
#define OUTPUT_MAX (64 * 1024)

typedef struct probe_ctx {
  maelys__probe_run_t* run;
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

/* The first child of `pid` found in /proc, or -1 (registration only: a scan
 * of /proc is fine here, and needs no CONFIG_PROC_CHILDREN). */
static int first_child(int pid) {
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
        sscanf(close_paren + 1, " %c %d", &state, &ppid) == 2 && ppid == pid)
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
      pid = first_child(pid);
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
  maelys__probe_run_t* run = ctx->run;
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

static void on_timeout(uv_timer_t* t) {
  probe_ctx_t* ctx = t->data;
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
  maelys__probe_run_t* run = ctx->run;
  run->status = *s;
  snprintf(run->step, sizeof run->step, "%s", s->launch_step);
  snprintf(run->message, sizeof run->message, "%s", s->message);
  run->status.launch_step = run->step;
  run->status.message = run->message;
  ctx->waited = true;
  maybe_done(ctx);
}

static bool ctx_done(const probe_ctx_t* ctx) {
  return !ctx->spawned || ctx->abandon ||
         (ctx->waited && ctx->out_eof && ctx->err_eof);
}

void maelys__executor_probe_runs(const maelys_backend_t* vtable, void* state,
                                 uint64_t assumed, size_t count,
                                 const maelys_executor_plan_t* const* plans,
                                 maelys_execution_request_t* const* requests,
                                 maelys__probe_run_t* runs) {
  for (size_t i = 0; i < count; i++) {
    runs[i].spawned = false;
    runs[i].spawn_error = NULL;
    runs[i].root_uid = -1;
    runs[i].root_has_caps = -1;
    runs[i].output_len = 0;
    runs[i].output = calloc(1, OUTPUT_MAX + 1);
  }
  probe_ctx_t* ctxs = calloc(count, sizeof *ctxs);
  uv_loop_t loop;
  bool loop_ok = false;
  maelys_executor_t* executor = NULL;
  maelys__backend_entry_t* entry = NULL;
  const char* failure = "out of memory";
  bool memory_ok = ctxs != NULL;
  for (size_t i = 0; i < count; i++)
    memory_ok = memory_ok && runs[i].output != NULL;
  if (memory_ok) {
    failure = "cannot create a probe loop";
    loop_ok = uv_loop_init(&loop) == 0;
  }
  if (loop_ok) {
    failure = "out of memory";
    entry = calloc(1, sizeof *entry);
    if (entry != NULL &&
        maelys_executor_create(&loop, &executor, NULL) == MAELYS_EXECUTOR_OK &&
        maelys__executor_reserve((void**)&executor->backends,
                                 &executor->backend_capacity,
                                 sizeof *executor->backends, 1) == 0) {
      entry->vtable = vtable;
      entry->state = state;
      entry->borrowed = true;
      entry->proved = assumed;
      executor->backends[executor->backend_count++] = entry;
      entry = NULL;
      failure = NULL;
    }
  }
  if (failure != NULL) {
    free(entry);
    if (executor != NULL) {
      maelys_executor_destroy(executor, NULL);
      uv_run(&loop, UV_RUN_DEFAULT);
    }
    if (loop_ok)
      uv_loop_close(&loop);
    for (size_t i = 0; i < count; i++)
      runs[i].spawn_error = maelys__executor_strdup(failure);
    free(ctxs);
    return;
  }

  /* Every run at once on the one private loop: registration costs the
   * slowest sandbox, not their sum. */
  for (size_t i = 0; i < count; i++) {
    probe_ctx_t* ctx = &ctxs[i];
    maelys__probe_run_t* run = &runs[i];
    ctx->run = run;
    uv_timer_init(&loop, &ctx->timer);
    ctx->timer.data = ctx;
    char* error = NULL;
    if (maelys_execution_spawn(executor, plans[i], requests[i], &ctx->execution,
                               &error) != MAELYS_EXECUTOR_OK) {
      run->spawn_error =
          error ? error : maelys__executor_strdup("spawn failed");
      continue;
    }
    run->spawned = true;
    ctx->spawned = true;
    maelys_execution_stream(ctx->execution, MAELYS_EXEC_STREAM_STDOUT,
                            &ctx->out, NULL);
    maelys_execution_stream(ctx->execution, MAELYS_EXEC_STREAM_STDERR,
                            &ctx->err, NULL);
    ctx->out->data = ctx;
    ctx->err->data = ctx;
    uv_read_start(ctx->out, on_alloc, on_read);
    uv_read_start(ctx->err, on_alloc, on_read);
    maelys_execution_wait(ctx->execution, on_wait, ctx, NULL);
    uv_timer_start(&ctx->timer, on_timeout, run->timeout_ms, 0);
  }
  for (;;) {
    bool all = true;
    for (size_t i = 0; i < count; i++)
      all = all && ctx_done(&ctxs[i]);
    if (all)
      break;
    uv_run(&loop, UV_RUN_ONCE);
  }
  for (size_t i = 0; i < count; i++) {
    if (ctxs[i].spawned)
      maelys_execution_release(ctxs[i].execution);
    uv_timer_stop(&ctxs[i].timer);
    uv_close((uv_handle_t*)&ctxs[i].timer, NULL);
  }
  maelys_executor_destroy(executor, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  free(ctxs);
}

void maelys__executor_probe_run(const maelys_backend_t* vtable, void* state,
                                uint64_t assumed,
                                const maelys_executor_plan_t* plan,
                                maelys_execution_request_t* request,
                                maelys__probe_run_t* run) {
  maelys__executor_probe_runs(vtable, state, assumed, 1, &plan, &request, run);
}

void maelys__executor_probe_run_dispose(maelys__probe_run_t* run) {
  free(run->output);
  free(run->spawn_error);
  run->output = NULL;
  run->spawn_error = NULL;
}
