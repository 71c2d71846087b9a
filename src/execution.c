/*
 * The execution handle: its memory and the closing of its handles, the
 * delivery of callbacks, wait, streams, release, ref and queries. Spawn, the
 * status channel, stops and reaping are in execution-*.c.
 *
 * Lifetime: the caller owns the handle until maelys_execution_release().
 * Memory is freed only once every libuv handle of the execution has been
 * closed (libuv's rule), and never while a callback of ours is running.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "execution-internal.h"

int64_t maelys__exec_realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void maelys__exec_free_vector(char** v) {
  if (v == NULL)
    return;
  for (size_t i = 0; v[i] != NULL; i++)
    free(v[i]);
  free(v);
}

/* ------------------------------------------------------------ freeing */

/* The launched image is gone: what only existed for it goes too. With a pid
 * namespace launch its death took every process of the tree with it, so the
 * cgroup is empty and can be removed. */
void maelys__exec_release_launch(maelys_execution_t* e) {
  if (e->lifeline_fd >= 0) {
    close(e->lifeline_fd);
    e->lifeline_fd = -1;
  }
  if (e->cgroup.dir_fd >= 0) {
    e->memory_peak = maelys__cgroup_memory_peak(&e->cgroup);
    maelys__cgroup_remove(&e->cgroup);
  }
}

static void free_terminal_waiters(maelys_execution_t* e) {
  while (e->terminal_waiters) {
    terminal_waiter_t* w = e->terminal_waiters;
    e->terminal_waiters = w->next;
    free(w);
  }
}

static void execution_free(maelys_execution_t* e) {
  maelys__exec_release_launch(e);
  maelys__proc_close(&e->proc);
  maelys__proc_close(&e->root);
  if (e->status_fd >= 0)
    close(e->status_fd);
  if (e->rendezvous_fd >= 0)
    close(e->rendezvous_fd);
  for (int i = 0; i < MAELYS__EXEC_STREAMS; i++)
    if (e->streams[i].fd >= 0 && !e->streams[i].opened)
      close(e->streams[i].fd);
  free_terminal_waiters(e);
  while (e->waiters) {
    waiter_t* w = e->waiters;
    e->waiters = w->next;
    free(w);
  }
  while (e->stoppers) {
    stopper_t* s = e->stoppers;
    e->stoppers = s->next;
    free(s);
  }
  free(e->executable);
  maelys__exec_free_vector(e->argv);
  free(e->receipt_dir);
  if (e->receipt_dirfd >= 0)
    close(e->receipt_dirfd);
  free(e->status_message);
  free(e->diag);
  free(e->line);
  free(e->launch_failed);
  free(e->receipt_json);
  free(e->receipt_path);
  free(e->receipt_chain);
  free(e->receipt_context);
  maelys__denials_free(e->denials);
  sodium_memzero(e->receipt_key, sizeof e->receipt_key);
  if (e->plan != NULL)
    maelys__executor_plan_release(e->plan);
  maelys_executor_t* executor = e->executor;
  free(e);
  maelys__executor_execution_gone(executor);
}

static void on_handle_closed(uv_handle_t* handle) {
  maelys_execution_t* e = handle->data;
  if (--e->open_handles == 0)
    execution_free(e);
}

/* The terminal rendezvous' watch, allocated apart (see init_handles). */
static void on_terminal_poll_closed(uv_handle_t* handle) {
  maelys_execution_t* e = handle->data;
  free(handle);
  e->terminal_poll = NULL;
  if (--e->open_handles == 0)
    execution_free(e);
}

static void close_handle(maelys_execution_t* e, uv_handle_t* h) {
  if (h->data == e && !uv_is_closing(h))
    uv_close(h, on_handle_closed);
}

/* A stream handle belongs to the caller while it is open, data field
 * included, so its close callback finds the execution through the slot. */
static void on_stream_closed(uv_handle_t* handle) {
  stream_pipe_t* h = (stream_pipe_t*)handle;
  stream_t* s = h->slot;
  s->handle = NULL;
  free(h);
  maelys_execution_t* e = s->owner;
  if (--e->open_handles == 0)
    execution_free(e);
}

static void close_stream(stream_t* s) {
  if (s->opened && !s->closing) {
    s->closing = true;
    uv_close((uv_handle_t*)&s->handle->pipe, on_stream_closed);
  }
}

/* Starts closing everything; memory goes once the last close callback ran. A
 * pending receipt write defers this until it completes. */
static void on_terminal_closed(maelys__tty_relay_t* relay, void* data) {
  maelys_execution_t* e = data;
  (void)relay;
  if (--e->open_handles == 0)
    execution_free(e);
}

void maelys__exec_begin_close(maelys_execution_t* e) {
  if (e->phase == PHASE_CLOSING || e->phase == PHASE_WRITING)
    return;
  e->phase = PHASE_CLOSING;
  for (int i = 0; i < 2; i++)
    if (e->terminals[i] != NULL) {
      maelys__tty_relay_close(e->terminals[i], on_terminal_closed, e);
      e->terminals[i] = NULL;
    }
  for (int i = 0; i < MAELYS__EXEC_STREAMS; i++)
    close_stream(&e->streams[i]);
  close_handle(e, (uv_handle_t*)&e->proc_poll);
  if (e->status_poll_init)
    close_handle(e, (uv_handle_t*)&e->status_poll);
  if (e->terminal_poll != NULL &&
      !uv_is_closing((uv_handle_t*)e->terminal_poll))
    uv_close((uv_handle_t*)e->terminal_poll, on_terminal_poll_closed);
  close_handle(e, (uv_handle_t*)&e->stop_timer);
  close_handle(e, (uv_handle_t*)&e->drain_timer);
  close_handle(e, (uv_handle_t*)&e->dispatch_timer);
  close_handle(e, (uv_handle_t*)&e->reap_idle);
}

/* ------------------------------------------------------------ dispatch */

static void on_dispatch(uv_timer_t* timer);

void maelys__exec_arm_dispatch(maelys_execution_t* e) {
  if (e->owner != OWNER_CALLER || e->phase == PHASE_CLOSING)
    return;
  if (!uv_is_active((uv_handle_t*)&e->dispatch_timer))
    uv_timer_start(&e->dispatch_timer, on_dispatch, 0, 0);
}

static void on_dispatch(uv_timer_t* timer) {
  maelys_execution_t* e = timer->data;
  /* The terminal first (a host starts relaying it before anything ends),
   * then completed stops, then waiters: a stop's completion precedes the
   * exit it caused. A callback may release the execution; delivery stops
   * there (memory is still valid: it is freed only in close callbacks). */
  while (e->terminal == TERMINAL_SETTLED && e->terminal_waiters != NULL &&
         e->owner == OWNER_CALLER) {
    terminal_waiter_t* w = e->terminal_waiters;
    e->terminal_waiters = w->next;
    stream_t* t = &e->streams[MAELYS_EXEC_STREAM_TERMINAL];
    w->cb(e, t->present ? MAELYS_EXECUTOR_OK : MAELYS_EXECUTOR_ERR_SPAWN,
          w->data);
    free(w);
  }
  for (;;) {
    stopper_t** p = &e->stoppers;
    while (*p != NULL && !(*p)->done)
      p = &(*p)->next;
    if (*p == NULL || e->owner != OWNER_CALLER)
      break;
    stopper_t* s = *p;
    *p = s->next;
    if (s->cb != NULL)
      s->cb(e, s->result, s->data);
    free(s);
  }
  while (e->phase == PHASE_DONE && e->waiters != NULL &&
         e->owner == OWNER_CALLER) {
    waiter_t* w = e->waiters;
    e->waiters = w->next;
    w->cb(e, &e->status, w->data);
    free(w);
  }
}

/* ------------------------------------------------------------ waiting */

maelys_executor_result_t maelys_execution_wait(maelys_execution_t* execution,
                                               maelys_execution_wait_cb cb,
                                               void* data, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (execution == NULL || cb == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "execution and callback are required");
  waiter_t* w = calloc(1, sizeof *w);
  if (w == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  w->cb = cb;
  w->data = data;
  /* Appended, so waiters are called in the order they asked. */
  waiter_t** p = &execution->waiters;
  while (*p != NULL)
    p = &(*p)->next;
  *p = w;
  if (execution->phase == PHASE_DONE)
    maelys__exec_arm_dispatch(execution);
  return MAELYS_EXECUTOR_OK;
}

/* ------------------------------------------------------------- streams */

static maelys_executor_result_t stream_slot(maelys_execution_t* e,
                                            maelys_exec_stream_t id,
                                            stream_t** out, char** out_error) {
  if (e == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "execution is NULL");
  if ((int)id < 0 || id > MAELYS_EXEC_STREAM_TERMINAL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "unknown stream %d", (int)id);
  stream_t* s = &e->streams[id];
  if (!s->present && id == MAELYS_EXEC_STREAM_TERMINAL &&
      e->terminal == TERMINAL_AWAITED)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_STATE,
        "the payload's terminal has not reached the host yet: take it in "
        "maelys_execution_wait_terminal's callback");
  if (!s->present)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_NOT_FOUND,
        "the execution has no stream %d in its io and stderr modes", (int)id);
  if (s->taken)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                                 "stream %d was handed over with "
                                 "maelys_execution_take_fd",
                                 (int)id);
  *out = s;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t maelys_execution_stream(maelys_execution_t* e,
                                                 maelys_exec_stream_t id,
                                                 uv_stream_t** out_stream,
                                                 char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (out_stream == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "out_stream is NULL");
  *out_stream = NULL;
  stream_t* s = NULL;
  maelys_executor_result_t r = stream_slot(e, id, &s, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  if (!s->opened) {
    stream_pipe_t* h = calloc(1, sizeof *h);
    if (h == NULL)
      return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                   "out of memory");
    int ur = uv_pipe_init(e->executor->loop, &h->pipe, 0);
    if (ur != 0) {
      free(h);
      return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                   "opening stream %d on the loop: %s", (int)id,
                                   uv_strerror(ur));
    }
    h->slot = s;
    s->handle = h;
    s->owner = e;
    e->open_handles++;
    s->opened = true;
    ur = uv_pipe_open(&h->pipe, s->fd);
    if (ur != 0)
      return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                   "opening stream %d on the loop: %s", (int)id,
                                   uv_strerror(ur));
  }
  if (s->handle == NULL || s->closing)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                                 "stream %d was closed", (int)id);
  *out_stream = (uv_stream_t*)&s->handle->pipe;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t maelys_execution_take_fd(maelys_execution_t* e,
                                                  maelys_exec_stream_t id,
                                                  int* out_fd,
                                                  char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (out_fd == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "out_fd is NULL");
  *out_fd = -1;
  stream_t* s = NULL;
  maelys_executor_result_t r = stream_slot(e, id, &s, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  if (s->opened)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                                 "stream %d is already a libuv stream of the "
                                 "execution",
                                 (int)id);
  int fd = s->fd;
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0)
    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  s->fd = -1;
  s->taken = true;
  *out_fd = fd;
  return MAELYS_EXECUTOR_OK;
}

void maelys_execution_release(maelys_execution_t* e) {
  if (e == NULL || e->owner != OWNER_CALLER)
    return;
  bool running = !maelys__exec_finished(e);
  e->owner = running ? OWNER_ORPHAN : OWNER_RELEASED;
  maelys__executor_execution_released(e->executor, running ? &e->orphan : NULL);
  while (e->waiters) {
    waiter_t* w = e->waiters;
    e->waiters = w->next;
    free(w);
  }
  while (e->stoppers) {
    stopper_t* s = e->stoppers;
    e->stoppers = s->next;
    free(s);
  }
  free_terminal_waiters(e);
  uv_timer_stop(&e->dispatch_timer);
  if (!running) {
    maelys__exec_begin_close(e);
    return;
  }
  /* Still running: never signalled, never waited for. Any stop in progress
   * is abandoned; the exit watch stays, unreferenced, to reap it. */
  uv_timer_stop(&e->stop_timer);
  e->pending_graceful = false;
  if (e->terminal_poll != NULL)
    uv_unref((uv_handle_t*)e->terminal_poll);
  for (int i = 0; i < MAELYS__EXEC_STREAMS; i++) {
    stream_t* s = &e->streams[i];
    if (s->opened)
      close_stream(s);
    else if (s->fd >= 0) {
      close(s->fd);
      s->fd = -1;
    }
  }
  uv_unref((uv_handle_t*)&e->proc_poll);
  if (e->status_poll_init)
    uv_unref((uv_handle_t*)&e->status_poll);
  uv_unref((uv_handle_t*)&e->drain_timer);
  uv_unref((uv_handle_t*)&e->reap_idle);
  for (int i = 0; i < 2; i++)
    if (e->terminals[i] != NULL)
      maelys__tty_relay_unref(e->terminals[i]);
}

/* ---------------------------------------------------------------- ref */

static void set_ref(maelys_execution_t* e, bool ref) {
  if (e == NULL || e->owner != OWNER_CALLER || e->phase == PHASE_CLOSING)
    return;
  uv_handle_t* hs[] = {(uv_handle_t*)&e->proc_poll,
                       (uv_handle_t*)&e->stop_timer,
                       (uv_handle_t*)&e->drain_timer,
                       (uv_handle_t*)&e->dispatch_timer,
                       (uv_handle_t*)&e->reap_idle,
                       e->status_poll_init ? (uv_handle_t*)&e->status_poll
                                           : NULL,
                       (uv_handle_t*)e->terminal_poll};
  for (size_t i = 0; i < MAELYS__ARRAY_SIZE(hs); i++) {
    if (hs[i] == NULL)
      continue;
    if (ref)
      uv_ref(hs[i]);
    else
      uv_unref(hs[i]);
  }
  /* The relays that copy a confined payload's output to the host's
   * terminal are the execution's too. */
  for (int i = 0; i < 2; i++) {
    if (e->terminals[i] == NULL)
      continue;
    if (ref)
      maelys__tty_relay_ref(e->terminals[i]);
    else
      maelys__tty_relay_unref(e->terminals[i]);
  }
}

void maelys_execution_ref(maelys_execution_t* e) {
  set_ref(e, true);
}

void maelys_execution_unref(maelys_execution_t* e) {
  set_ref(e, false);
}

/* --------------------------------------------------------------- query */

void maelys__execution_drop_lifeline(maelys_execution_t* e) {
  if (e != NULL && e->lifeline_fd >= 0) {
    close(e->lifeline_fd);
    e->lifeline_fd = -1;
  }
}

int maelys__execution_root_pid(const maelys_execution_t* e) {
  return e && e->root.pid > 0 ? e->root.pid : -1;
}

const char* maelys_execution_id(const maelys_execution_t* e) {
  return e ? e->id : NULL;
}

maelys_executor_result_t
maelys_execution_on_denial(maelys_execution_t* e, maelys_execution_denial_cb cb,
                           void* data, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (e == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "maelys_execution_on_denial: execution is "
                                 "NULL");
  return maelys__denials_set_callback(&e->denials, cb, data, out_error);
}

int maelys_execution_pid(const maelys_execution_t* e) {
  return e && !maelys__exec_reaped(e) ? e->proc.pid : -1;
}

maelys_executor_result_t maelys_execution_receipt(const maelys_execution_t* e,
                                                  char** out_json,
                                                  char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (out_json == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "out_json is NULL");
  *out_json = NULL;
  if (e == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "execution is NULL");
  if (!maelys__exec_finished(e) || e->receipt_json == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                                 "the execution has not ended yet");
  *out_json = maelys__executor_strdup(e->receipt_json);
  if (*out_json == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  return MAELYS_EXECUTOR_OK;
}

int maelys_execution_receipt_errno(const maelys_execution_t* e) {
  return e != NULL ? e->receipt_errno : EINVAL;
}

const char* maelys_execution_receipt_path(const maelys_execution_t* e) {
  return e ? e->receipt_path : NULL;
}
