/*
 * The three stop forms and their escalation: the graceful signal (held
 * until a wrapped launch says it can forward it), the grace timer, the
 * forced kill of the whole tree, and a tree that outlives the force budget
 * reported as a containment failure, never waited for (invariant 7).
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

/* --------------------------------------------------------------- stops */

bool maelys__exec_wrapped(const maelys_execution_t* e) {
  return (e->launch_flags & MAELYS_BACKEND_LAUNCH_STATUS_CHANNEL) != 0;
}

/* Where the graceful signal of a wrapped launch goes: the tree root the
 * backend named, or else the launched image itself (a launcher that forwards
 * it, such as the bubblewrap backend's, pid 1 of its own namespace). */
void maelys__exec_signal_tree(maelys_execution_t* e) {
  if (e->root.pid > 0)
    e->executor->proc_ops->signal(&e->root, SIGTERM);
  else if (!maelys__exec_reaped(e))
    e->executor->proc_ops->signal(&e->proc, SIGTERM);
}

static void send_graceful(maelys_execution_t* e) {
  if (maelys__exec_wrapped(e)) {
    /* The signal goes once the sandbox said it can forward it; until then
     * it waits. */
    if (e->ready)
      maelys__exec_signal_tree(e);
    else
      e->pending_graceful = true;
    return;
  }
  if (!maelys__exec_reaped(e)) {
    e->executor->proc_ops->signal_group(e->proc.pid, SIGTERM);
    e->executor->proc_ops->signal(&e->proc, SIGTERM);
  }
}

void maelys__exec_send_forced(maelys_execution_t* e) {
  e->pending_graceful = false;
  if (e->root.pid > 0)
    e->executor->proc_ops->signal(&e->root, SIGKILL);
  /* The group is signalled only while its leader is unreaped: until then its
   * id cannot name anyone else's group. It also reaches a sandbox child that
   * has not yet left the launcher's group. */
  if (!maelys__exec_reaped(e)) {
    e->executor->proc_ops->signal_group(e->proc.pid, SIGKILL);
    e->executor->proc_ops->signal(&e->proc, SIGKILL);
  }
}

static void on_stop_timer(uv_timer_t* timer) {
  maelys_execution_t* e = timer->data;
  if (maelys__exec_finished(e))
    return;
  if (e->stop == STOP_GRACEFUL_ONLY) {
    e->stop = STOP_IDLE;
    e->pending_graceful = false;
    maelys__exec_complete_stoppers(e, MAELYS_EXEC_STOPPED_STILL_RUNNING);
    /* Still running: a later stop starts afresh, and no result stands. */
    e->stop_result = 0;
  } else if (e->stop == STOP_GRACEFUL) {
    e->stop = STOP_FORCED;
    maelys__exec_send_forced(e);
    uv_timer_start(&e->stop_timer, on_stop_timer, e->force_ms, 0);
  } else if (e->stop == STOP_FORCED) {
    /* The tree outlived the force budget: reported, not waited for. */
    e->stop = STOP_CONTAINMENT;
    maelys__exec_complete_stoppers(e, MAELYS_EXEC_STOPPED_CONTAINMENT_FAILED);
  }
}

void maelys__exec_complete_stoppers(maelys_execution_t* e,
                                    maelys_execution_stop_result_t result) {
  for (stopper_t* s = e->stoppers; s != NULL; s = s->next)
    if (!s->done) {
      s->done = true;
      s->result = result;
    }
  e->stop_result = result;
  maelys__exec_arm_dispatch(e);
}

maelys_executor_result_t
maelys_execution_stop(maelys_execution_t* e, maelys_execution_stop_mode_t mode,
                      maelys_execution_stop_cb cb, void* data,
                      char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (e == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "execution is NULL");
  if (mode != MAELYS_EXEC_STOP_GRACEFUL && mode != MAELYS_EXEC_STOP_FORCED &&
      mode != MAELYS_EXEC_STOP_GRACEFUL_THEN_FORCED)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "unknown stop mode %d", (int)mode);
  stopper_t* s = calloc(1, sizeof *s);
  if (s == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  s->cb = cb;
  s->data = data;
  stopper_t** p = &e->stoppers;
  while (*p != NULL)
    p = &(*p)->next;
  *p = s;

  if (maelys__exec_reaped(e)) {
    /* Nothing runs any more. A stop that was in progress owns the result;
     * otherwise there was nothing to stop. */
    if (maelys__exec_finished(e) || e->stop == STOP_IDLE) {
      s->done = true;
      s->result = e->stop_result != 0 ? e->stop_result
                                      : MAELYS_EXEC_STOPPED_ALREADY_EXITED;
      if (e->phase != PHASE_WRITING)
        maelys__exec_arm_dispatch(e);
    }
    return MAELYS_EXECUTOR_OK;
  }
  e->stop_requested = true;
  /* Called from outside the loop's callbacks, the loop's cached time may be
   * stale; the budgets count from now. */
  uv_update_time(e->executor->loop);
  switch (e->stop) {
  case STOP_IDLE:
    e->stop_result = 0;
    if (mode == MAELYS_EXEC_STOP_FORCED) {
      e->stop = STOP_FORCED;
      maelys__exec_send_forced(e);
      uv_timer_start(&e->stop_timer, on_stop_timer, e->force_ms, 0);
    } else {
      e->stop = mode == MAELYS_EXEC_STOP_GRACEFUL ? STOP_GRACEFUL_ONLY
                                                  : STOP_GRACEFUL;
      send_graceful(e);
      uv_timer_start(&e->stop_timer, on_stop_timer, e->grace_ms, 0);
    }
    break;
  case STOP_GRACEFUL_ONLY:
  case STOP_GRACEFUL:
    if (mode == MAELYS_EXEC_STOP_FORCED) {
      e->stop = STOP_FORCED;
      maelys__exec_send_forced(e);
      uv_timer_start(&e->stop_timer, on_stop_timer, e->force_ms, 0);
    } else if (mode == MAELYS_EXEC_STOP_GRACEFUL_THEN_FORCED) {
      e->stop = STOP_GRACEFUL;
    }
    break;
  case STOP_FORCED:
    break;
  case STOP_CONTAINMENT:
    s->done = true;
    s->result = MAELYS_EXEC_STOPPED_CONTAINMENT_FAILED;
    maelys__exec_arm_dispatch(e);
    break;
  }
  return MAELYS_EXECUTOR_OK;
}
