/*
 * The Node-API addon of Maelys Executor: executors bound to Node's own libuv
 * loop (napi_get_uv_event_loop), so that executions are handles on that loop
 * like a child process: no thread, no polling. It uses only the public
 * header; lib/index.js gives it its JavaScript shape.
 *
 * Lifetimes, the part that needs care:
 *
 * - An execution's JavaScript side is reached through `on_event`, a reference
 *   to a function that closes over the Execution object. The reference is
 *   strong while the child runs and the execution is referenced (so an
 *   Execution nobody holds stays alive, and keeps Node alive, like a
 *   ChildProcess); it becomes weak once the execution ended or is unref()'d.
 *   When the handle object is collected, its finalizer releases the execution:
 *   released, never killed (invariant 6).
 * - At process exit nothing the addon started may survive (invariant 22).
 *   Every spawn opens a pidfd on the launcher; kill_all() (called from
 *   process.on('exit') and from the environment's cleanup hook) sends SIGKILL
 *   through the core's forced stop to every execution still held and through
 *   that pidfd to every released one that still runs. A bubblewrap launcher
 *   takes its sandbox with it (--die-with-parent, the helper as pid 1).
 * - The environment's cleanup (process end, a Worker's end) is an async
 *   cleanup hook: it kills, waits (bounded) for the executions to report their
 *   end, releases them, destroys the executors and lets the loop close every
 *   handle before it tells Node it is done, because a Worker's loop is closed
 *   with a check that no handle is left.
 *
 * Every function here runs on the thread of the environment's loop.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <node_api.h>

#include "maelys/executor.h"

#ifndef P_PIDFD
#define P_PIDFD 3 /* waitid(2), Linux 5.4 */
#endif

/* How long the environment's cleanup waits for killed executions to report
 * their end (the core's force budget and status drain are 2 s each by
 * default), then for the loop to close their handles. */
#define TEARDOWN_END_MS 5000
#define TEARDOWN_CLOSE_MS 3000
#define TEARDOWN_TICK_MS 5

/* ------------------------------------------------------------ records */

typedef struct executor_rec executor_rec_t;
typedef struct execution_rec execution_rec_t;

typedef struct addon {
  napi_env env;
  uv_loop_t* loop;
  bool tearing_down;
  napi_async_cleanup_hook_handle cleanup;
  uv_timer_t teardown_timer;
  uint64_t teardown_started;
  bool teardown_released;
  executor_rec_t* executors;
  execution_rec_t* executions;
  size_t execution_count;
} addon_t;

struct executor_rec {
  addon_t* addon;
  maelys_executor_t* executor; /* NULL once destroyed */
  size_t unreleased;           /* executions spawned and not released */
  size_t released_running;     /* released, launcher not yet known gone */
  bool handle_gone;            /* its JavaScript handle was collected */
  bool closed;                 /* close() was called */
  executor_rec_t* prev;
  executor_rec_t* next;
};

typedef struct stop_req {
  execution_rec_t* rec;
  double token;
  struct stop_req* next;
} stop_req_t;

struct execution_rec {
  addon_t* addon;
  executor_rec_t* owner;
  maelys_execution_t* execution; /* NULL once released */
  int pid;                       /* the launcher's */
  int pidfd;                     /* the launcher's; -1 once known gone */
  bool ended;
  bool referenced; /* ref()/unref(): keeps the loop alive */
  bool strong;     /* on_event is a strong reference */
  bool handle_gone;
  napi_ref on_event;
  napi_async_context async;
  stop_req_t* stops;
  execution_rec_t* prev;
  execution_rec_t* next;
};

typedef struct plan_rec {
  maelys_executor_plan_t* plan;
} plan_rec_t;

static const napi_type_tag executor_tag = {0x6d61656c79735f65ULL,
                                           0x786563746f720001ULL};
static const napi_type_tag execution_tag = {0x6d61656c79735f65ULL,
                                            0x7865637574650002ULL};
static const napi_type_tag plan_tag = {0x6d61656c79735f65ULL,
                                       0x78706c616e000003ULL};

/* ------------------------------------------------------------- errors */

/* Throws the pending N-API failure as an Error, unless one is pending
 * already. Returns NULL for the caller to return. */
static napi_value napi_failed(napi_env env) {
  bool pending = false;
  napi_is_exception_pending(env, &pending);
  if (!pending) {
    const napi_extended_error_info* info = NULL;
    napi_get_last_error_info(env, &info);
    napi_throw_error(env, "NAPI",
                     info && info->error_message ? info->error_message
                                                 : "a Node-API call failed");
  }
  return NULL;
}

#define NAPI_CALL(env, call)                                                   \
  do {                                                                         \
    if ((call) != napi_ok)                                                     \
      return napi_failed(env);                                                 \
  } while (0)

/* Throws an Error whose code is the result's name and whose message is the
 * core's diagnostic, prefixed with `what` when given. Frees `error`. */
static napi_value throw_result(napi_env env, maelys_executor_result_t r,
                               const char* what, char* error) {
  const char* text = error ? error : maelys_executor_result_name(r);
  size_t n = strlen(text) + (what ? strlen(what) : 0) + 4;
  char* msg = malloc(n);
  if (msg != NULL)
    snprintf(msg, n, "%s%s%s", what ? what : "", what ? ": " : "", text);
  napi_throw_error(env, maelys_executor_result_name(r), msg ? msg : text);
  free(msg);
  maelys_executor_error_free(error);
  return NULL;
}

static napi_value throw_code(napi_env env, maelys_executor_result_t r,
                             const char* message) {
  napi_throw_error(env, maelys_executor_result_name(r), message);
  return NULL;
}

/* ---------------------------------------------------------- conversion */

static napi_value make_string(napi_env env, const char* s) {
  napi_value v = NULL;
  if (s == NULL)
    napi_get_null(env, &v);
  else
    napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &v);
  return v;
}

static napi_value make_int(napi_env env, int64_t i) {
  napi_value v = NULL;
  napi_create_int64(env, i, &v);
  return v;
}

static void set_named(napi_env env, napi_value obj, const char* key,
                      napi_value v) {
  if (v != NULL)
    napi_set_named_property(env, obj, key, v);
}

/* A string argument as a heap copy; NULL with an exception pending when it is
 * not a string. */
static char* get_string(napi_env env, napi_value v, const char* what) {
  size_t len = 0;
  if (napi_get_value_string_utf8(env, v, NULL, 0, &len) != napi_ok) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s must be a string", what);
    throw_code(env, MAELYS_EXECUTOR_ERR_ARGUMENT, msg);
    return NULL;
  }
  char* s = malloc(len + 1);
  if (s == NULL) {
    throw_code(env, MAELYS_EXECUTOR_ERR_MEMORY, "out of memory");
    return NULL;
  }
  napi_get_value_string_utf8(env, v, s, len + 1, &len);
  if (strlen(s) != len) {
    /* An embedded NUL would silently cut the string at the C boundary. */
    free(s);
    char msg[160];
    snprintf(msg, sizeof msg, "%s contains a NUL character", what);
    throw_code(env, MAELYS_EXECUTOR_ERR_ARGUMENT, msg);
    return NULL;
  }
  return s;
}

/* The member `key` of `obj`, or NULL when it is absent or undefined. */
static napi_value get_member(napi_env env, napi_value obj, const char* key) {
  bool has = false;
  if (napi_has_named_property(env, obj, key, &has) != napi_ok || !has)
    return NULL;
  napi_value v = NULL;
  if (napi_get_named_property(env, obj, key, &v) != napi_ok)
    return NULL;
  napi_valuetype t;
  napi_typeof(env, v, &t);
  return t == napi_undefined ? NULL : v;
}

static bool get_number(napi_env env, napi_value v, const char* what,
                       double* out) {
  if (napi_get_value_double(env, v, out) != napi_ok) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s must be a number", what);
    throw_code(env, MAELYS_EXECUTOR_ERR_ARGUMENT, msg);
    return false;
  }
  return true;
}

static void* unwrap(napi_env env, napi_value v, const napi_type_tag* tag,
                    const char* what) {
  bool ok = false;
  void* data = NULL;
  if (napi_check_object_type_tag(env, v, tag, &ok) != napi_ok || !ok ||
      napi_unwrap(env, v, &data) != napi_ok || data == NULL) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s is not a handle made by this addon", what);
    throw_code(env, MAELYS_EXECUTOR_ERR_ARGUMENT, msg);
    return NULL;
  }
  return data;
}

static addon_t* get_addon(napi_env env) {
  addon_t* a = NULL;
  napi_get_instance_data(env, (void**)&a);
  return a;
}

static napi_value capability_names(napi_env env, uint64_t mask) {
  napi_value arr = NULL;
  napi_create_array(env, &arr);
  uint32_t n = 0;
  for (int b = 0; b < 64; b++) {
    uint64_t bit = UINT64_C(1) << b;
    const char* name = maelys_executor_capability_name(bit);
    if ((mask & bit) && name != NULL)
      napi_set_element(env, arr, n++, make_string(env, name));
  }
  return arr;
}

/* ------------------------------------------------------------- pidfds */

static int pidfd_open_(int pid) {
  return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int pidfd_signal(int fd, int sig) {
  return (int)syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
}

/* ---------------------------------------------------------- executors */

static void executor_maybe_free(executor_rec_t* ex) {
  if (ex->executor != NULL || !ex->handle_gone)
    return;
  addon_t* a = ex->addon;
  if (ex->prev)
    ex->prev->next = ex->next;
  else
    a->executors = ex->next;
  if (ex->next)
    ex->next->prev = ex->prev;
  free(ex);
}

/* An executor closed or whose JavaScript handle is gone is destroyed once
 * its last execution is released (maelys_executor_destroy refuses before)
 * and every released one has ended. Destroying it earlier would hand the
 * still running ones to the core's background reapers, which close their
 * status pipes: a sandbox still being set up takes that for the death of
 * its host and ends itself, so a collected Executor would kill what
 * release() left running. It also keeps this loop's thread the only one
 * that reaps a launcher the addon tracks (see kill_all). */
static void executor_maybe_destroy(executor_rec_t* ex) {
  if (ex->executor != NULL && (ex->handle_gone || ex->closed) &&
      ex->unreleased == 0 && ex->released_running == 0) {
    maelys_executor_destroy(ex->executor, NULL);
    ex->executor = NULL;
  }
  executor_maybe_free(ex);
}

/* --------------------------------------------------------- executions */

static void execution_unlink_free(execution_rec_t* rec) {
  addon_t* a = rec->addon;
  if (rec->prev)
    rec->prev->next = rec->next;
  else
    a->executions = rec->next;
  if (rec->next)
    rec->next->prev = rec->prev;
  a->execution_count--;
  free(rec);
}

/* A record goes once the execution is released, its handle collected and its
 * launcher known gone (until then the exit kill may still need the pidfd). */
static void execution_maybe_free(execution_rec_t* rec) {
  if (rec->execution == NULL && rec->handle_gone && rec->pidfd < 0)
    execution_unlink_free(rec);
}

static void close_pidfd(execution_rec_t* rec) {
  if (rec->pidfd >= 0) {
    close(rec->pidfd);
    rec->pidfd = -1;
  }
}

/* Forgets the launchers of released executions that have been reaped: the
 * pidfd of a reaped process answers ESRCH. */
static void prune_released(addon_t* a) {
  execution_rec_t* rec = a->executions;
  while (rec != NULL) {
    execution_rec_t* next = rec->next;
    if (rec->execution == NULL && rec->pidfd >= 0 &&
        pidfd_signal(rec->pidfd, 0) != 0 && errno == ESRCH) {
      close_pidfd(rec);
      executor_rec_t* owner = rec->owner;
      owner->released_running--;
      execution_maybe_free(rec);
      executor_maybe_destroy(owner);
    }
    rec = next;
  }
}

static void set_strong(execution_rec_t* rec, bool strong) {
  if (rec->on_event == NULL || rec->strong == strong ||
      rec->addon->tearing_down)
    return;
  uint32_t count = 0;
  if (strong)
    napi_reference_ref(rec->addon->env, rec->on_event, &count);
  else
    napi_reference_unref(rec->addon->env, rec->on_event, &count);
  rec->strong = strong;
}

static void drop_js(execution_rec_t* rec) {
  napi_env env = rec->addon->env;
  if (rec->addon->tearing_down) {
    /* Node deletes every reference with the environment; an async context
     * is not destroyed while the environment is being torn down. */
    rec->on_event = NULL;
    rec->async = NULL;
    return;
  }
  if (rec->on_event != NULL)
    napi_delete_reference(env, rec->on_event);
  rec->on_event = NULL;
  if (rec->async != NULL)
    napi_async_destroy(env, rec->async);
  rec->async = NULL;
}

/* Releases the execution: never signals, never waits (invariant 6). A child
 * still running is reaped by the core in the background; its pidfd is kept
 * for the exit kill. */
static void execution_release(execution_rec_t* rec) {
  if (rec->execution == NULL)
    return;
  while (rec->stops != NULL) {
    stop_req_t* s = rec->stops;
    rec->stops = s->next;
    free(s);
  }
  maelys_execution_release(rec->execution);
  rec->execution = NULL;
  executor_rec_t* owner = rec->owner;
  if (rec->ended)
    close_pidfd(rec);
  else
    owner->released_running++;
  drop_js(rec);
  owner->unreleased--;
  executor_maybe_destroy(owner);
  execution_maybe_free(rec);
}

/* Calls the execution's JavaScript event function, in its async context, so
 * that promise reactions run before control returns to the loop. */
static void call_js(execution_rec_t* rec, size_t argc, napi_value* argv) {
  napi_env env = rec->addon->env;
  napi_value fn = NULL;
  if (rec->on_event == NULL ||
      napi_get_reference_value(env, rec->on_event, &fn) != napi_ok ||
      fn == NULL)
    return;
  /* napi_make_callback converts the receiver to an object: the global. */
  napi_value recv = NULL;
  napi_get_global(env, &recv);
  napi_status s =
      napi_make_callback(env, rec->async, recv, fn, argc, argv, NULL);
  if (s != napi_ok) {
    bool pending = false;
    napi_is_exception_pending(env, &pending);
    if (pending) {
      napi_value exception = NULL;
      napi_get_and_clear_last_exception(env, &exception);
      napi_fatal_exception(env, exception);
    }
  }
}

static const char* stop_result_name(maelys_execution_stop_result_t r) {
  switch (r) {
  case MAELYS_EXEC_STOPPED_ALREADY_EXITED:
    return "already-exited";
  case MAELYS_EXEC_STOPPED_GRACEFUL:
    return "graceful";
  case MAELYS_EXEC_STOPPED_FORCED:
    return "forced";
  case MAELYS_EXEC_STOPPED_STILL_RUNNING:
    return "still-running";
  case MAELYS_EXEC_STOPPED_CONTAINMENT_FAILED:
    return "containment-failed";
  }
  return "unknown";
}

static const char* outcome_name(maelys_execution_outcome_t o) {
  switch (o) {
  case MAELYS_EXEC_OUTCOME_EXITED:
    return "exited";
  case MAELYS_EXEC_OUTCOME_SIGNALED:
    return "signaled";
  case MAELYS_EXEC_OUTCOME_LAUNCH_FAILED:
    return "launch-failed";
  }
  return "unknown";
}

static const char* stop_stage_name(maelys_execution_stop_stage_t s) {
  switch (s) {
  case MAELYS_EXEC_STOP_STAGE_GRACEFUL:
    return "graceful";
  case MAELYS_EXEC_STOP_STAGE_FORCED:
    return "forced";
  case MAELYS_EXEC_STOP_STAGE_NONE:
    break;
  }
  return NULL;
}

/* The core's single waiter per execution: the end is recorded here and
 * handed to JavaScript, which keeps it for every wait(). */
static void on_end(maelys_execution_t* e, const maelys_execution_status_t* st,
                   void* data) {
  execution_rec_t* rec = data;
  rec->ended = true;
  addon_t* a = rec->addon;
  if (a->tearing_down)
    return;
  napi_env env = a->env;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok)
    return;
  napi_value status = NULL;
  napi_create_object(env, &status);
  set_named(env, status, "outcome",
            make_string(env, outcome_name(st->outcome)));
  set_named(env, status, "exitCode",
            st->outcome == MAELYS_EXEC_OUTCOME_EXITED
                ? make_int(env, st->exit_code)
                : make_string(env, NULL));
  set_named(env, status, "termSignal",
            st->outcome == MAELYS_EXEC_OUTCOME_SIGNALED
                ? make_int(env, st->term_signal)
                : make_string(env, NULL));
  set_named(env, status, "stopStage",
            make_string(env, stop_stage_name(st->stop_stage)));
  if (st->outcome == MAELYS_EXEC_OUTCOME_LAUNCH_FAILED) {
    set_named(env, status, "launchStep", make_string(env, st->launch_step));
    set_named(env, status, "launchErrno", make_int(env, st->launch_errno));
    set_named(env, status, "message", make_string(env, st->message));
  }
  char* receipt = NULL;
  maelys_execution_receipt(e, &receipt, NULL);
  set_named(env, status, "receipt", make_string(env, receipt));
  maelys_executor_string_free(receipt);
  set_named(env, status, "receiptPath",
            make_string(env, maelys_execution_receipt_path(e)));
  napi_value argv[2] = {make_string(env, "end"), status};
  call_js(rec, 2, argv);
  /* Ended: nothing more keeps the Execution alive but its holders. */
  if (rec->execution != NULL)
    set_strong(rec, false);
  napi_close_handle_scope(env, scope);
}

static void on_stopped(maelys_execution_t* e,
                       maelys_execution_stop_result_t result, void* data) {
  stop_req_t* req = data;
  execution_rec_t* rec = req->rec;
  (void)e;
  for (stop_req_t** p = &rec->stops; *p != NULL; p = &(*p)->next)
    if (*p == req) {
      *p = req->next;
      break;
    }
  double token = req->token;
  free(req);
  addon_t* a = rec->addon;
  if (a->tearing_down)
    return;
  napi_env env = a->env;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok)
    return;
  napi_value tok = NULL;
  napi_create_double(env, token, &tok);
  napi_value argv[3] = {make_string(env, "stop"), tok,
                        make_string(env, stop_result_name(result))};
  call_js(rec, 3, argv);
  napi_close_handle_scope(env, scope);
}

/* ------------------------------------------------------------ kill all */

/* Whether a launcher the addon tracks is still unreaped. Until it is
 * reaped its pid is also the id of its process group, which then names no
 * other group. Only this loop's thread reaps such a launcher (an executor
 * with released executions still running is not destroyed, so the core's
 * background reapers never hold one before the teardown), so the answer
 * still holds when the signal is sent. */
static bool launcher_unreaped(const execution_rec_t* rec) {
  siginfo_t info;
  memset(&info, 0, sizeof info);
  return waitid((idtype_t)P_PIDFD, (id_t)rec->pidfd, &info,
                WEXITED | WNOHANG | WNOWAIT) == 0;
}

/* SIGKILL for everything the addon started that may still run: the forced
 * stop of every execution still held (the payload's tree through the core),
 * and for every released one its launcher's process group (while bwrap
 * sets a sandbox up, its child has no parent-death signal yet: killing the
 * launcher alone could leave that child waiting forever) and the launcher
 * itself through its pidfd. Synchronous: safe from process.on('exit'). */
static void kill_all(addon_t* a) {
  for (execution_rec_t* rec = a->executions; rec != NULL; rec = rec->next) {
    if (rec->ended)
      continue;
    if (rec->execution != NULL) {
      maelys_execution_stop(rec->execution, MAELYS_EXEC_STOP_FORCED, NULL, NULL,
                            NULL);
    } else if (rec->pidfd >= 0) {
      if (launcher_unreaped(rec))
        kill(-rec->pid, SIGKILL);
      pidfd_signal(rec->pidfd, SIGKILL);
    }
  }
}

/* ------------------------------------------------------------ teardown */

static void on_teardown_closed(uv_handle_t* h) {
  addon_t* a = h->data;
  napi_remove_async_cleanup_hook(a->cleanup);
  a->cleanup = NULL;
}

static void on_teardown_tick(uv_timer_t* t) {
  addon_t* a = t->data;
  uint64_t elapsed = uv_now(a->loop) - a->teardown_started;
  if (!a->teardown_released) {
    bool waiting = false;
    for (execution_rec_t* r = a->executions; r != NULL; r = r->next)
      waiting = waiting || (r->execution != NULL && !r->ended);
    if (waiting && elapsed < TEARDOWN_END_MS)
      return;
    /* Release what is held (anything past the bound is reaped in the
     * background by the core) and destroy every executor. */
    for (execution_rec_t *r = a->executions, *next; r != NULL; r = next) {
      next = r->next;
      if (r->execution != NULL)
        execution_release(r);
    }
    for (executor_rec_t* ex = a->executors; ex != NULL; ex = ex->next)
      if (ex->executor != NULL) {
        maelys_executor_destroy(ex->executor, NULL);
        ex->executor = NULL;
      }
    a->teardown_released = true;
    a->teardown_started = uv_now(a->loop);
    return;
  }
  /* Done once nothing else is pending on the loop: closing handles, a
   * receipt being written in the thread pool. This timer does not count. */
  uv_unref((uv_handle_t*)t);
  bool alive = uv_loop_alive(a->loop) != 0;
  uv_ref((uv_handle_t*)t);
  if (alive && elapsed < TEARDOWN_CLOSE_MS)
    return;
  uv_timer_stop(t);
  uv_close((uv_handle_t*)t, on_teardown_closed);
}

static void teardown(napi_async_cleanup_hook_handle handle, void* arg) {
  addon_t* a = arg;
  (void)handle;
  a->tearing_down = true;
  if (a->executions == NULL) {
    /* Nothing was spawned: executors without executions hold no handle. */
    for (executor_rec_t* ex = a->executors; ex != NULL; ex = ex->next)
      if (ex->executor != NULL) {
        maelys_executor_destroy(ex->executor, NULL);
        ex->executor = NULL;
      }
    napi_remove_async_cleanup_hook(a->cleanup);
    a->cleanup = NULL;
    return;
  }
  kill_all(a);
  uv_update_time(a->loop);
  uv_timer_init(a->loop, &a->teardown_timer);
  a->teardown_timer.data = a;
  a->teardown_started = uv_now(a->loop);
  /* Referenced, so that Node's cleanup runs the loop without spinning. */
  uv_timer_start(&a->teardown_timer, on_teardown_tick, 0, TEARDOWN_TICK_MS);
}

static void finalize_addon(napi_env env, void* data, void* hint) {
  addon_t* a = data;
  (void)env;
  (void)hint;
  while (a->executions != NULL) {
    execution_rec_t* r = a->executions;
    close_pidfd(r);
    execution_unlink_free(r);
  }
  while (a->executors != NULL) {
    executor_rec_t* ex = a->executors;
    a->executors = ex->next;
    free(ex);
  }
  free(a);
}

/* -------------------------------------------------------- executor API */

static void finalize_executor(napi_env env, void* data, void* hint) {
  executor_rec_t* ex = data;
  (void)env;
  (void)hint;
  addon_t* a = ex->addon;
  ex->handle_gone = true;
  if (a->tearing_down) {
    executor_maybe_free(ex);
  } else {
    executor_maybe_destroy(ex); /* may free it */
    prune_released(a);          /* may destroy it, once its launchers ended */
  }
}

static napi_value js_create_executor(napi_env env, napi_callback_info info) {
  (void)info;
  addon_t* a = get_addon(env);
  executor_rec_t* ex = calloc(1, sizeof *ex);
  if (ex == NULL)
    return throw_code(env, MAELYS_EXECUTOR_ERR_MEMORY, "out of memory");
  char* error = NULL;
  maelys_executor_result_t r =
      maelys_executor_create(a->loop, &ex->executor, &error);
  if (r != MAELYS_EXECUTOR_OK) {
    free(ex);
    return throw_result(env, r, NULL, error);
  }
  ex->addon = a;
  napi_value handle = NULL;
  if (napi_create_object(env, &handle) != napi_ok ||
      napi_type_tag_object(env, handle, &executor_tag) != napi_ok ||
      napi_wrap(env, handle, ex, finalize_executor, NULL, NULL) != napi_ok) {
    maelys_executor_destroy(ex->executor, NULL);
    free(ex);
    return napi_failed(env);
  }
  ex->next = a->executors;
  if (a->executors)
    a->executors->prev = ex;
  a->executors = ex;
  return handle;
}

static executor_rec_t* live_executor(napi_env env, napi_value v) {
  executor_rec_t* ex = unwrap(env, v, &executor_tag, "executor");
  if (ex != NULL && (ex->executor == NULL || ex->closed)) {
    throw_code(env, MAELYS_EXECUTOR_ERR_STATE, "the executor was closed");
    return NULL;
  }
  return ex;
}

/* registerBackend(handle, name, {key: value}) */
static napi_value js_register_backend(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  NAPI_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  executor_rec_t* ex = live_executor(env, argv[0]);
  if (ex == NULL)
    return NULL;
  char* name = get_string(env, argv[1], "backend name");
  if (name == NULL)
    return NULL;
  const maelys_backend_t* backend = NULL;
  if (strcmp(name, "posix") == 0)
    backend = maelys_backend_posix();
  else if (strcmp(name, "bubblewrap") == 0)
    backend = maelys_backend_bubblewrap();
  if (backend == NULL) {
    char msg[256];
    snprintf(msg, sizeof msg,
             "unknown backend '%.64s' (the built-in backends are posix and "
             "bubblewrap)",
             name);
    free(name);
    return throw_code(env, MAELYS_EXECUTOR_ERR_NOT_FOUND, msg);
  }
  maelys_backend_options_t* options = NULL;
  char* error = NULL;
  maelys_executor_result_t r = maelys_backend_options_create(&options, &error);
  napi_value keys = NULL;
  uint32_t count = 0;
  if (r == MAELYS_EXECUTOR_OK &&
      (napi_get_property_names(env, argv[2], &keys) != napi_ok ||
       napi_get_array_length(env, keys, &count) != napi_ok)) {
    maelys_backend_options_destroy(options);
    free(name);
    return napi_failed(env);
  }
  for (uint32_t i = 0; r == MAELYS_EXECUTOR_OK && i < count; i++) {
    napi_value k = NULL, v = NULL;
    napi_get_element(env, keys, i, &k);
    char* key = get_string(env, k, "backend option name");
    char what[128];
    snprintf(what, sizeof what, "backend option '%.64s'", key ? key : "?");
    char* value = NULL;
    if (key != NULL && napi_get_property(env, argv[2], k, &v) == napi_ok)
      value = get_string(env, v, what);
    if (key == NULL || value == NULL) {
      free(key);
      maelys_backend_options_destroy(options);
      free(name);
      return NULL;
    }
    r = maelys_backend_options_set(options, key, value, &error);
    free(key);
    free(value);
  }
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_register_backend(ex->executor, backend, options,
                                         &error);
  maelys_backend_options_destroy(options);
  if (r != MAELYS_EXECUTOR_OK) {
    char what[96];
    snprintf(what, sizeof what, "registering backend %s", name);
    free(name);
    return throw_result(env, r, what, error);
  }
  free(name);
  napi_value undefined = NULL;
  napi_get_undefined(env, &undefined);
  return undefined;
}

static napi_value js_backend_names(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  NAPI_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  executor_rec_t* ex = live_executor(env, argv[0]);
  if (ex == NULL)
    return NULL;
  napi_value arr = NULL;
  NAPI_CALL(env, napi_create_array(env, &arr));
  size_t n = maelys_executor_backend_count(ex->executor);
  for (size_t i = 0; i < n; i++)
    napi_set_element(
        env, arr, (uint32_t)i,
        make_string(env, maelys_executor_backend_name(ex->executor, i)));
  return arr;
}

/* capabilities(handle, name) -> [names the probe proved] */
static napi_value js_capabilities(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  NAPI_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  executor_rec_t* ex = live_executor(env, argv[0]);
  char* name = ex ? get_string(env, argv[1], "backend name") : NULL;
  if (name == NULL)
    return NULL;
  uint64_t mask = 0;
  char* error = NULL;
  maelys_executor_result_t r =
      maelys_executor_backend_capabilities(ex->executor, name, &mask, &error);
  free(name);
  if (r != MAELYS_EXECUTOR_OK)
    return throw_result(env, r, NULL, error);
  return capability_names(env, mask);
}

/* diagnostic(handle, name) -> the probe's summary ("" when all proved) */
static napi_value js_diagnostic(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  NAPI_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  executor_rec_t* ex = live_executor(env, argv[0]);
  char* name = ex ? get_string(env, argv[1], "backend name") : NULL;
  if (name == NULL)
    return NULL;
  char* text = NULL;
  char* error = NULL;
  maelys_executor_result_t r =
      maelys_executor_backend_diagnostic(ex->executor, name, &text, &error);
  free(name);
  if (r != MAELYS_EXECUTOR_OK)
    return throw_result(env, r, NULL, error);
  napi_value v = make_string(env, text);
  maelys_executor_string_free(text);
  return v;
}

/* missingReason(handle, name, capability) -> why it was not proved, or null
 * when it was. */
static napi_value js_missing_reason(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  NAPI_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  executor_rec_t* ex = live_executor(env, argv[0]);
  char* name = ex ? get_string(env, argv[1], "backend name") : NULL;
  char* cap = name ? get_string(env, argv[2], "capability") : NULL;
  if (cap == NULL) {
    free(name);
    return NULL;
  }
  uint64_t bit = maelys_executor_capability_from_name(cap);
  uint64_t mask = 0;
  char* reason = NULL;
  char* error = NULL;
  maelys_executor_result_t r = MAELYS_EXECUTOR_OK;
  if (bit == 0) {
    char msg[160];
    snprintf(msg, sizeof msg, "'%.64s' is not a capability name", cap);
    free(name);
    free(cap);
    return throw_code(env, MAELYS_EXECUTOR_ERR_ARGUMENT, msg);
  }
  r = maelys_executor_backend_capabilities(ex->executor, name, &mask, &error);
  if (r == MAELYS_EXECUTOR_OK && !(mask & bit))
    r = maelys_executor_backend_missing_reason(ex->executor, name, bit, &reason,
                                               &error);
  free(name);
  free(cap);
  if (r != MAELYS_EXECUTOR_OK)
    return throw_result(env, r, NULL, error);
  napi_value v = make_string(env, reason); /* null when it was proved */
  maelys_executor_string_free(reason);
  return v;
}

static napi_value js_close_executor(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  NAPI_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  executor_rec_t* ex = unwrap(env, argv[0], &executor_tag, "executor");
  if (ex == NULL)
    return NULL;
  napi_value undefined = NULL;
  napi_get_undefined(env, &undefined);
  if (ex->executor == NULL || ex->closed)
    return undefined; /* closing twice is harmless */
  if (ex->unreleased > 0) {
    char msg[160];
    snprintf(msg, sizeof msg,
             "%zu executions are not released; release them before closing "
             "the executor",
             ex->unreleased);
    return throw_code(env, MAELYS_EXECUTOR_ERR_STATE, msg);
  }
  /* Closed now for JavaScript; destroyed once what release() left running
   * has ended (executor_maybe_destroy). */
  addon_t* a = ex->addon;
  ex->closed = true;
  executor_maybe_destroy(ex);
  prune_released(a);
  return undefined;
}

/* ------------------------------------------------------------ plan API */

static void finalize_plan(napi_env env, void* data, void* hint) {
  plan_rec_t* p = data;
  (void)env;
  (void)hint;
  maelys_executor_plan_destroy(p->plan);
  free(p);
}

/* sealPlan(json) -> {handle, digest, requiredCapabilities, json}: the plan
 * read strictly by the core (maelys-executor-plan/1) and sealed. */
static napi_value js_seal_plan(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  NAPI_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  char* json = get_string(env, argv[0], "plan JSON");
  if (json == NULL)
    return NULL;
  maelys_executor_plan_t* plan = NULL;
  char* error = NULL;
  maelys_executor_result_t r =
      maelys_executor_plan_from_json(json, strlen(json), &plan, &error);
  free(json);
  if (r == MAELYS_EXECUTOR_OK && !maelys_executor_plan_is_sealed(plan))
    r = maelys_executor_plan_seal(plan, &error);
  char* digest = NULL;
  char* sealed = NULL;
  uint64_t need = 0;
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_plan_digest(plan, &digest, &error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_plan_to_json(plan, &sealed, &error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_plan_required_capabilities(plan, &need, &error);
  plan_rec_t* p = r == MAELYS_EXECUTOR_OK ? calloc(1, sizeof *p) : NULL;
  if (r == MAELYS_EXECUTOR_OK && p == NULL)
    r = MAELYS_EXECUTOR_ERR_MEMORY;
  if (r != MAELYS_EXECUTOR_OK) {
    maelys_executor_plan_destroy(plan);
    maelys_executor_string_free(digest);
    maelys_executor_string_free(sealed);
    return throw_result(env, r, NULL, error);
  }
  p->plan = plan;
  napi_value handle = NULL, result = NULL;
  if (napi_create_object(env, &handle) != napi_ok ||
      napi_type_tag_object(env, handle, &plan_tag) != napi_ok ||
      napi_wrap(env, handle, p, finalize_plan, NULL, NULL) != napi_ok) {
    maelys_executor_plan_destroy(plan);
    free(p);
    maelys_executor_string_free(digest);
    maelys_executor_string_free(sealed);
    return napi_failed(env);
  }
  napi_create_object(env, &result);
  set_named(env, result, "handle", handle);
  set_named(env, result, "digest", make_string(env, digest));
  set_named(env, result, "json", make_string(env, sealed));
  set_named(env, result, "requiredCapabilities", capability_names(env, need));
  maelys_executor_string_free(digest);
  maelys_executor_string_free(sealed);
  return result;
}

/* ------------------------------------------------------------- request */

/* Reports a setter's failure as "request.<member>: <diagnostic>". */
static bool request_ok(napi_env env, maelys_executor_result_t r,
                       const char* member, char* error) {
  if (r == MAELYS_EXECUTOR_OK)
    return true;
  char what[160];
  snprintf(what, sizeof what, "request.%s", member);
  throw_result(env, r, what, error);
  return false;
}

static bool
request_string(napi_env env, napi_value obj, const char* member,
               maelys_execution_request_t* req,
               maelys_executor_result_t (*set)(maelys_execution_request_t*,
                                               const char*, char**)) {
  napi_value v = get_member(env, obj, member);
  if (v == NULL)
    return true;
  char what[64];
  snprintf(what, sizeof what, "request.%s", member);
  char* s = get_string(env, v, what);
  if (s == NULL)
    return false;
  char* error = NULL;
  maelys_executor_result_t r = set(req, s, &error);
  free(s);
  return request_ok(env, r, member, error);
}

static bool request_argv(napi_env env, napi_value obj,
                         maelys_execution_request_t* req) {
  napi_value v = get_member(env, obj, "argv");
  if (v == NULL)
    return true;
  uint32_t n = 0;
  bool is_array = false;
  napi_is_array(env, v, &is_array);
  if (!is_array || napi_get_array_length(env, v, &n) != napi_ok) {
    throw_code(env, MAELYS_EXECUTOR_ERR_ARGUMENT,
               "request.argv must be an array of strings");
    return false;
  }
  char** argv = calloc((size_t)n + 1, sizeof *argv);
  bool ok = argv != NULL;
  if (!ok)
    throw_code(env, MAELYS_EXECUTOR_ERR_MEMORY, "out of memory");
  for (uint32_t i = 0; ok && i < n; i++) {
    napi_value item = NULL;
    char what[48];
    snprintf(what, sizeof what, "request.argv[%u]", i);
    ok = napi_get_element(env, v, i, &item) == napi_ok &&
         (argv[i] = get_string(env, item, what)) != NULL;
  }
  if (ok) {
    char* error = NULL;
    ok = request_ok(env,
                    maelys_execution_request_set_argv(
                        req, (const char* const*)argv, &error),
                    "argv", error);
  }
  for (uint32_t i = 0; argv != NULL && i < n; i++)
    free(argv[i]);
  free(argv);
  return ok;
}

/* env: null for an empty environment, or [[name, value], ...] for exactly
 * those entries (invariant 4: the child sees nothing else). */
static bool request_env(napi_env env, napi_value obj,
                        maelys_execution_request_t* req) {
  napi_value v = get_member(env, obj, "env");
  napi_valuetype t = napi_null;
  if (v != NULL)
    napi_typeof(env, v, &t);
  char* error = NULL;
  if (v == NULL || t == napi_null)
    return request_ok(env,
                      maelys_execution_request_set_environment_mode(
                          req, MAELYS_EXEC_ENV_EMPTY, &error),
                      "env", error);
  if (!request_ok(env,
                  maelys_execution_request_set_environment_mode(
                      req, MAELYS_EXEC_ENV_EXPLICIT, &error),
                  "env", error))
    return false;
  uint32_t n = 0;
  if (napi_get_array_length(env, v, &n) != napi_ok) {
    throw_code(env, MAELYS_EXECUTOR_ERR_ARGUMENT,
               "request.env must be name/value pairs");
    return false;
  }
  for (uint32_t i = 0; i < n; i++) {
    napi_value pair = NULL, k = NULL, val = NULL;
    if (napi_get_element(env, v, i, &pair) != napi_ok ||
        napi_get_element(env, pair, 0, &k) != napi_ok ||
        napi_get_element(env, pair, 1, &val) != napi_ok) {
      napi_failed(env);
      return false;
    }
    char* name = get_string(env, k, "request.env name");
    if (name == NULL)
      return false;
    char what[128];
    snprintf(what, sizeof what, "request.env.%.64s", name);
    char* value = get_string(env, val, what);
    if (value == NULL) {
      free(name);
      return false;
    }
    maelys_executor_result_t r =
        maelys_execution_request_add_environment(req, name, value, &error);
    snprintf(what, sizeof what, "env.%.64s", name);
    free(name);
    free(value);
    if (!request_ok(env, r, what, error))
      return false;
  }
  return true;
}

/* A member holding a non-negative integer; *present tells whether it was
 * given. */
static bool request_uint(napi_env env, napi_value obj, const char* member,
                         double max, double* out, bool* present) {
  napi_value v = get_member(env, obj, member);
  *present = v != NULL;
  if (v == NULL)
    return true;
  char what[64];
  snprintf(what, sizeof what, "request.%s", member);
  if (!get_number(env, v, what, out))
    return false;
  if (!(*out >= 0 && *out <= max && *out == (double)(uint64_t)*out)) {
    char msg[128];
    snprintf(msg, sizeof msg, "request.%s must be an integer in 0..%.0f",
             member, max);
    throw_code(env, MAELYS_EXECUTOR_ERR_ARGUMENT, msg);
    return false;
  }
  return true;
}

/* The request from the object lib/index.js normalised: enum members are
 * numbers already; every value is judged by the core's setters. */
static bool build_request(napi_env env, napi_value obj,
                          maelys_execution_request_t** out) {
  *out = NULL;
  maelys_execution_request_t* req = NULL;
  char* error = NULL;
  maelys_executor_result_t r = maelys_execution_request_create(&req, &error);
  if (r != MAELYS_EXECUTOR_OK) {
    throw_result(env, r, NULL, error);
    return false;
  }
  double io = 0, fd = 0, err_mode = 0, scratch = 0, grace = 0, force = 0,
         uid = 0, gid = 0;
  bool has_io, has_fd, has_err, has_scratch, has_grace, has_force, has_uid,
      has_gid;
  bool ok =
      request_string(env, obj, "executable", req,
                     maelys_execution_request_set_executable) &&
      request_argv(env, obj, req) && request_env(env, obj, req) &&
      request_string(env, obj, "cwd", req, maelys_execution_request_set_cwd) &&
      request_string(env, obj, "backend", req,
                     maelys_execution_request_set_backend) &&
      request_string(env, obj, "platform", req,
                     maelys_execution_request_set_platform) &&
      request_string(env, obj, "receiptDir", req,
                     maelys_execution_request_set_receipt_dir) &&
      request_uint(env, obj, "io", 16, &io, &has_io) &&
      request_uint(env, obj, "protocolFd", 1 << 20, &fd, &has_fd) &&
      request_uint(env, obj, "stderr", 16, &err_mode, &has_err) &&
      request_uint(env, obj, "scratchSize", 9007199254740991.0, &scratch,
                   &has_scratch) &&
      request_uint(env, obj, "graceMs", 3600000, &grace, &has_grace) &&
      request_uint(env, obj, "forceMs", 3600000, &force, &has_force) &&
      request_uint(env, obj, "uid", 4294967295.0, &uid, &has_uid) &&
      request_uint(env, obj, "gid", 4294967295.0, &gid, &has_gid);
  if (ok && has_io)
    ok = request_ok(
        env,
        maelys_execution_request_set_io_mode(req, (maelys_exec_io_mode_t)io,
                                             has_fd ? (int)fd : -1, &error),
        "io", error);
  if (ok && has_err)
    ok = request_ok(env,
                    maelys_execution_request_set_stderr_mode(
                        req, (maelys_exec_stderr_mode_t)err_mode, &error),
                    "stderr", error);
  if (ok && has_scratch)
    ok = request_ok(env,
                    maelys_execution_request_set_scratch_size(
                        req, (uint64_t)scratch, &error),
                    "scratchSize", error);
  if (ok && (has_grace || has_force))
    ok = request_ok(env,
                    maelys_execution_request_set_stop_budget(
                        req, has_grace ? (uint64_t)grace : 2000,
                        has_force ? (uint64_t)force : 2000, &error),
                    has_grace ? "graceMs" : "forceMs", error);
  if (ok && (has_uid || has_gid)) {
    if (!(has_uid && has_gid)) {
      throw_code(env, MAELYS_EXECUTOR_ERR_ARGUMENT,
                 "request.identity needs both uid and gid");
      ok = false;
    } else {
      ok = request_ok(env,
                      maelys_execution_request_set_identity(
                          req, (uint32_t)uid, (uint32_t)gid, &error),
                      "identity", error);
    }
  }
  if (!ok) {
    maelys_execution_request_destroy(req);
    return false;
  }
  *out = req;
  return true;
}

/* ------------------------------------------------------- execution API */

static void finalize_execution(napi_env env, void* data, void* hint) {
  execution_rec_t* rec = data;
  (void)env;
  (void)hint;
  rec->handle_gone = true;
  /* Collected: released, never killed (invariant 6). */
  if (rec->execution != NULL)
    execution_release(rec);
  else
    drop_js(rec);
  execution_maybe_free(rec);
}

static void undo_spawn(maelys_execution_t* e, int fds[4]) {
  for (int i = 0; i < 4; i++)
    if (fds[i] >= 0)
      close(fds[i]);
  /* Nothing of it reached JavaScript: it must not run on unseen. */
  maelys_execution_stop(e, MAELYS_EXEC_STOP_FORCED, NULL, NULL, NULL);
  maelys_execution_release(e);
}

/* spawn(executor, plan, request, onEvent) -> {handle, id, pid, fds} */
static napi_value js_spawn(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  NAPI_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  addon_t* a = get_addon(env);
  executor_rec_t* ex = live_executor(env, argv[0]);
  if (ex == NULL)
    return NULL;
  plan_rec_t* plan = unwrap(env, argv[1], &plan_tag, "plan");
  if (plan == NULL)
    return NULL;
  napi_valuetype t;
  napi_typeof(env, argv[3], &t);
  if (t != napi_function)
    return throw_code(env, MAELYS_EXECUTOR_ERR_ARGUMENT,
                      "the event callback must be a function");
  maelys_execution_request_t* req = NULL;
  if (!build_request(env, argv[2], &req))
    return NULL;
  prune_released(a);

  execution_rec_t* rec = calloc(1, sizeof *rec);
  if (rec == NULL) {
    maelys_execution_request_destroy(req);
    return throw_code(env, MAELYS_EXECUTOR_ERR_MEMORY, "out of memory");
  }
  maelys_execution_t* e = NULL;
  char* error = NULL;
  maelys_executor_result_t r =
      maelys_execution_spawn(ex->executor, plan->plan, req, &e, &error);
  maelys_execution_request_destroy(req);
  if (r != MAELYS_EXECUTOR_OK) {
    free(rec);
    return throw_result(env, r, NULL, error);
  }

  /* The launcher is not reaped before the loop runs again, so its pid still
   * names it: the pidfd opened now is the launcher's for good. */
  int fds[4] = {-1, -1, -1, -1};
  int pidfd = pidfd_open_(maelys_execution_pid(e));
  if (pidfd < 0) {
    char msg[160];
    snprintf(msg, sizeof msg,
             "pidfd_open on the launcher failed (%s): without it the exit "
             "kill cannot be guaranteed, so the execution was stopped",
             strerror(errno));
    free(rec);
    undo_spawn(e, fds);
    return throw_code(env, MAELYS_EXECUTOR_ERR_IO, msg);
  }
  static const maelys_exec_stream_t streams[4] = {
      MAELYS_EXEC_STREAM_STDIN, MAELYS_EXEC_STREAM_STDOUT,
      MAELYS_EXEC_STREAM_STDERR, MAELYS_EXEC_STREAM_PROTOCOL};
  for (int i = 0; i < 4; i++) {
    r = maelys_execution_take_fd(e, streams[i], &fds[i], &error);
    if (r == MAELYS_EXECUTOR_ERR_NOT_FOUND) {
      maelys_executor_error_free(error);
      error = NULL;
      fds[i] = -1;
      continue;
    }
    if (r != MAELYS_EXECUTOR_OK) {
      close(pidfd);
      free(rec);
      undo_spawn(e, fds);
      return throw_result(env, r, "taking the execution's streams", error);
    }
  }

  rec->addon = a;
  rec->owner = ex;
  rec->execution = e;
  rec->pid = maelys_execution_pid(e);
  rec->pidfd = pidfd;
  rec->referenced = true;
  napi_value handle = NULL, result = NULL, fd_array = NULL, name = NULL;
  bool built =
      napi_create_object(env, &handle) == napi_ok &&
      napi_type_tag_object(env, handle, &execution_tag) == napi_ok &&
      napi_create_reference(env, argv[3], 1, &rec->on_event) == napi_ok &&
      napi_create_string_utf8(env, "MaelysExecution", NAPI_AUTO_LENGTH,
                              &name) == napi_ok &&
      napi_async_init(env, handle, name, &rec->async) == napi_ok &&
      maelys_execution_wait(e, on_end, rec, NULL) == MAELYS_EXECUTOR_OK &&
      napi_create_object(env, &result) == napi_ok &&
      napi_create_array(env, &fd_array) == napi_ok;
  if (built) {
    rec->strong = true;
    ex->unreleased++;
    rec->next = a->executions;
    if (a->executions)
      a->executions->prev = rec;
    a->executions = rec;
    a->execution_count++;
  }
  if (!built ||
      napi_wrap(env, handle, rec, finalize_execution, NULL, NULL) != napi_ok) {
    if (built) {
      /* Linked: the ordinary path releases it and frees the record. */
      rec->handle_gone = true;
      maelys_execution_stop(e, MAELYS_EXEC_STOP_FORCED, NULL, NULL, NULL);
      for (int i = 0; i < 4; i++)
        if (fds[i] >= 0)
          close(fds[i]);
      execution_release(rec);
    } else {
      drop_js(rec);
      close(pidfd);
      free(rec);
      undo_spawn(e, fds);
    }
    return napi_failed(env);
  }
  for (uint32_t i = 0; i < 4; i++)
    napi_set_element(env, fd_array, i, make_int(env, fds[i]));
  set_named(env, result, "handle", handle);
  set_named(env, result, "id", make_string(env, maelys_execution_id(e)));
  set_named(env, result, "pid", make_int(env, maelys_execution_pid(e)));
  set_named(env, result, "fds", fd_array);
  return result;
}

static execution_rec_t* get_execution(napi_env env, napi_value v) {
  return unwrap(env, v, &execution_tag, "execution");
}

/* stop(handle, mode, token): the result arrives as the event
 * ("stop", token, result). */
static napi_value js_stop(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  NAPI_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  execution_rec_t* rec = get_execution(env, argv[0]);
  if (rec == NULL)
    return NULL;
  if (rec->execution == NULL)
    return throw_code(env, MAELYS_EXECUTOR_ERR_STATE,
                      "the execution was released");
  double mode = 0, token = 0;
  if (!get_number(env, argv[1], "stop mode", &mode) ||
      !get_number(env, argv[2], "stop token", &token))
    return NULL;
  stop_req_t* req = calloc(1, sizeof *req);
  if (req == NULL)
    return throw_code(env, MAELYS_EXECUTOR_ERR_MEMORY, "out of memory");
  req->rec = rec;
  req->token = token;
  char* error = NULL;
  maelys_executor_result_t r = maelys_execution_stop(
      rec->execution, (maelys_execution_stop_mode_t)(int)mode, on_stopped, req,
      &error);
  if (r != MAELYS_EXECUTOR_OK) {
    free(req);
    return throw_result(env, r, NULL, error);
  }
  req->next = rec->stops;
  rec->stops = req;
  napi_value undefined = NULL;
  napi_get_undefined(env, &undefined);
  return undefined;
}

static napi_value js_release(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  NAPI_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  execution_rec_t* rec = get_execution(env, argv[0]);
  if (rec == NULL)
    return NULL;
  execution_release(rec);
  prune_released(get_addon(env));
  napi_value undefined = NULL;
  napi_get_undefined(env, &undefined);
  return undefined;
}

/* setRef(handle, referenced): ref() and unref(). */
static napi_value js_set_ref(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  NAPI_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  execution_rec_t* rec = get_execution(env, argv[0]);
  if (rec == NULL)
    return NULL;
  bool ref = false;
  NAPI_CALL(env, napi_get_value_bool(env, argv[1], &ref));
  if (rec->execution != NULL) {
    if (ref)
      maelys_execution_ref(rec->execution);
    else
      maelys_execution_unref(rec->execution);
    rec->referenced = ref;
    /* An unreferenced execution must not pin its Execution either: if
     * nobody holds it, it is collected and released. */
    set_strong(rec, ref && !rec->ended);
  }
  napi_value undefined = NULL;
  napi_get_undefined(env, &undefined);
  return undefined;
}

static napi_value js_pid(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  NAPI_CALL(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  execution_rec_t* rec = get_execution(env, argv[0]);
  if (rec == NULL)
    return NULL;
  return make_int(env,
                  rec->execution ? maelys_execution_pid(rec->execution) : -1);
}

static napi_value js_kill_all(napi_env env, napi_callback_info info) {
  (void)info;
  kill_all(get_addon(env));
  napi_value undefined = NULL;
  napi_get_undefined(env, &undefined);
  return undefined;
}

/* stats() -> {executions, executors}: records alive (tests: nothing leaks). */
static napi_value js_stats(napi_env env, napi_callback_info info) {
  (void)info;
  addon_t* a = get_addon(env);
  size_t executors = 0, held = 0, tracked = 0;
  for (executor_rec_t* ex = a->executors; ex != NULL; ex = ex->next)
    executors += ex->executor != NULL;
  for (execution_rec_t* r = a->executions; r != NULL; r = r->next) {
    held += r->execution != NULL;
    tracked += r->execution == NULL && r->pidfd >= 0;
  }
  napi_value o = NULL;
  NAPI_CALL(env, napi_create_object(env, &o));
  set_named(env, o, "records", make_int(env, (int64_t)a->execution_count));
  set_named(env, o, "held", make_int(env, (int64_t)held));
  set_named(env, o, "releasedRunning", make_int(env, (int64_t)tracked));
  set_named(env, o, "executors", make_int(env, (int64_t)executors));
  return o;
}

/* -------------------------------------------------------------- module */

static napi_value module_info(napi_env env) {
  napi_value o = NULL;
  napi_create_object(env, &o);
  set_named(env, o, "version", make_string(env, maelys_executor_version()));
  set_named(env, o, "packageVersion",
            make_string(env, MAELYS_NODE_PACKAGE_VERSION));
  set_named(env, o, "abiVersion",
            make_int(env, (int64_t)maelys_executor_abi_version()));
  set_named(env, o, "headerAbiVersion",
            make_int(env, MAELYS_EXECUTOR_ABI_VERSION));
  set_named(env, o, "napiVersion", make_int(env, NAPI_VERSION));
  /* The libuv the core calls, resolved when the addon was loaded: Node's. */
  set_named(env, o, "uvVersion", make_string(env, uv_version_string()));
  set_named(env, o, "uvHeaderVersion",
            make_string(env, MAELYS_NODE_HEADER_UV_VERSION));
  set_named(env, o, "capabilityNames", capability_names(env, ~(uint64_t)0));
  return o;
}

/* Node's macro defines these without a prior declaration. */
NAPI_MODULE_EXPORT int32_t NODE_API_MODULE_GET_API_VERSION(void);
NAPI_MODULE_EXPORT napi_value NAPI_MODULE_INITIALIZER(napi_env env,
                                                      napi_value exports);

NAPI_MODULE_INIT() {
  addon_t* a = calloc(1, sizeof *a);
  if (a == NULL) {
    napi_throw_error(env, "MEMORY", "out of memory");
    return NULL;
  }
  a->env = env;
  if (napi_get_uv_event_loop(env, &a->loop) != napi_ok || a->loop == NULL ||
      napi_set_instance_data(env, a, finalize_addon, NULL) != napi_ok) {
    free(a);
    return napi_failed(env);
  }
  if (napi_add_async_cleanup_hook(env, teardown, a, &a->cleanup) != napi_ok)
    return napi_failed(env);
  static const struct {
    const char* name;
    napi_callback fn;
  } functions[] = {
      {"createExecutor", js_create_executor},
      {"registerBackend", js_register_backend},
      {"backendNames", js_backend_names},
      {"capabilities", js_capabilities},
      {"diagnostic", js_diagnostic},
      {"missingReason", js_missing_reason},
      {"closeExecutor", js_close_executor},
      {"sealPlan", js_seal_plan},
      {"spawn", js_spawn},
      {"stop", js_stop},
      {"release", js_release},
      {"setRef", js_set_ref},
      {"pid", js_pid},
      {"killAll", js_kill_all},
      {"stats", js_stats},
  };
  for (size_t i = 0; i < sizeof functions / sizeof functions[0]; i++) {
    napi_value fn = NULL;
    NAPI_CALL(env,
              napi_create_function(env, functions[i].name, NAPI_AUTO_LENGTH,
                                   functions[i].fn, NULL, &fn));
    NAPI_CALL(env,
              napi_set_named_property(env, exports, functions[i].name, fn));
  }
  NAPI_CALL(env,
            napi_set_named_property(env, exports, "info", module_info(env)));
  return exports;
}
