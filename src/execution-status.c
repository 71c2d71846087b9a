/*
 * The status channel of a wrapped launch: the launcher's, bwrap's and the
 * sandbox init's reports, read line by line on the loop and turned into
 * events by the backend's status_line slot. Only the first terminal line
 * counts (invariant 19).
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

/* The launcher's own diagnostics kept for a launch failure. */
#define DIAG_MAX 4096

void maelys__exec_append_diag(maelys_execution_t* e, const char* text,
                              size_t len) {
  if (e->diag == NULL && (e->diag = malloc(DIAG_MAX)) == NULL)
    return; /* the status message falls back to the launcher's exit status */
  if (e->diag_len + len + 2 >= DIAG_MAX)
    len = DIAG_MAX - e->diag_len > 2 ? DIAG_MAX - e->diag_len - 2 : 0;
  if (len == 0)
    return;
  if (e->diag_len > 0)
    e->diag[e->diag_len++] = '\n';
  memcpy(e->diag + e->diag_len, text, len);
  e->diag_len += len;
  e->diag[e->diag_len] = '\0';
}

/* ------------------------------------------------------ status channel */

static void handle_event(maelys_execution_t* e,
                         const maelys_backend_event_t* ev) {
  switch (ev->kind) {
  case MAELYS_BACKEND_EVENT_TREE_ROOT:
    if (e->root.pid <= 0 && ev->pid > 1) {
      if (maelys__proc_open_foreign(ev->pid, &e->root) == 0 &&
          e->stop >= STOP_FORCED)
        e->executor->proc_ops->signal(&e->root, SIGKILL);
    }
    break;
  case MAELYS_BACKEND_EVENT_READY:
    if (e->ready || e->report != REPORT_NONE)
      break;
    e->ready = true;
    if (e->pending_graceful) {
      e->pending_graceful = false;
      maelys__exec_signal_tree(e);
    }
    break;
  /* Invariant 19: only the first terminal line counts; anything after it
   * (whoever wrote it) changes nothing. */
  case MAELYS_BACKEND_EVENT_EXIT:
    if (e->report != REPORT_NONE)
      break;
    e->report = REPORT_EXIT;
    e->exit_code = ev->exit_code;
    e->term_signal = ev->term_signal;
    break;
  case MAELYS_BACKEND_EVENT_LAUNCH_FAILED:
    if (e->report != REPORT_NONE)
      break;
    e->launch_failed = malloc(sizeof *e->launch_failed);
    if (e->launch_failed != NULL) {
      *e->launch_failed = *ev;
      e->report = REPORT_LAUNCH_FAILED;
    } else {
      maelys__exec_append_diag(e, ev->message, strlen(ev->message));
    }
    break;
  case MAELYS_BACKEND_EVENT_IDENTITY:
    if (!e->identity_set && !e->ready) {
      e->identity_set = true;
      e->identity_uid = ev->uid;
      e->identity_gid = ev->gid;
    }
    break;
  case MAELYS_BACKEND_EVENT_DIAGNOSTIC:
    maelys__exec_append_diag(e, ev->message, strlen(ev->message));
    break;
  case MAELYS_BACKEND_EVENT_DENIAL:
    /* Recorded until the status is final (the receipt lists them); a
     * released handle calls back no more. */
    if (!maelys__exec_finished(e))
      maelys__denials_event(&e->denials, e->owner == OWNER_CALLER ? e : NULL,
                            e->plan, ev);
    break;
  case MAELYS_BACKEND_EVENT_NONE:
    break;
  }
}

static void handle_line(maelys_execution_t* e, const char* line, size_t len) {
  maelys_backend_event_t ev;
  memset(&ev, 0, sizeof ev);
  if (e->backend->vtable->status_line != NULL)
    e->backend->vtable->status_line(e->backend->state, line, len, &ev);
  ev.step[sizeof ev.step - 1] = '\0';
  ev.message[sizeof ev.message - 1] = '\0';
  handle_event(e, &ev);
}

/* A status line is at most this long (without its newline); a longer one is
 * dropped, never split. */
#define STATUS_LINE_MAX 1023

/* Adds bytes to the line a read left unfinished, kept on the heap only
 * while one is (lines come whole in one write, almost always, and 1000
 * executions must stay small). */
static void pend(maelys_execution_t* e, const char* bytes, size_t n) {
  if (e->line_overflow || n == 0)
    return;
  if (e->line_len + n > STATUS_LINE_MAX) {
    e->line_overflow = true; /* overlong lines are dropped, not split */
    return;
  }
  if (e->line == NULL) {
    e->line = malloc(STATUS_LINE_MAX + 1);
    if (e->line == NULL) {
      e->line_overflow = true; /* no memory: the line is lost, not split */
      return;
    }
  }
  memcpy(e->line + e->line_len, bytes, n);
  e->line_len += n;
  e->line[e->line_len] = '\0';
}

/* The unfinished line ended (at its newline, or at the end of file). */
static void end_pending(maelys_execution_t* e) {
  if (e->line_len > 0 && !e->line_overflow)
    handle_line(e, e->line, e->line_len);
  free(e->line);
  e->line = NULL;
  e->line_len = 0;
  e->line_overflow = false;
}

/* Reads what the status channel holds now. Returns true at end of file. */
bool maelys__exec_read_status(maelys_execution_t* e) {
  char buf[4096 + 1];
  for (;;) {
    ssize_t n = read(e->status_fd, buf, sizeof buf - 1);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        return false;
      return true;
    }
    if (n == 0) {
      end_pending(e);
      return true;
    }
    size_t start = 0;
    for (size_t i = 0; i < (size_t)n; i++) {
      if (buf[i] != '\n')
        continue;
      if (e->line_len > 0 || e->line_overflow) {
        pend(e, buf + start, i - start);
        end_pending(e);
      } else if (i - start <= STATUS_LINE_MAX) {
        buf[i] = '\0';
        handle_line(e, buf + start, i - start);
      }
      start = i + 1;
    }
    pend(e, buf + start, (size_t)n - start);
  }
}

/* The launcher's status channel and the terminal relays have reached their
 * end: what the launch said and printed is all in. */
bool maelys__exec_drained(const maelys_execution_t* e) {
  if (maelys__exec_wrapped(e) && !e->status_eof)
    return false;
  for (int i = 0; i < 2; i++)
    if (e->terminals[i] != NULL && !maelys__tty_relay_done(e->terminals[i]))
      return false;
  return true;
}

void maelys__exec_on_status(uv_poll_t* poll, int status, int events) {
  maelys_execution_t* e = poll->data;
  (void)status;
  (void)events;
  if (maelys__exec_read_status(e)) {
    e->status_eof = true;
    uv_poll_stop(&e->status_poll);
    if (maelys__exec_exit_taken(e) && maelys__exec_drained(e))
      maelys__exec_finish(e);
  }
}

void maelys__exec_on_terminal_done(maelys__tty_relay_t* relay, void* data) {
  maelys_execution_t* e = data;
  (void)relay;
  if (maelys__exec_exit_taken(e) && maelys__exec_drained(e))
    maelys__exec_finish(e);
}
