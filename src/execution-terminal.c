/*
 * The payload's pseudo-terminal (MAELYS_EXEC_IO_TTY): the master the
 * sandbox sends over the terminal rendezvous, who waits for it, and its
 * window size.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "execution-internal.h"
#include "terminal.h"

void maelys__exec_settle_terminal(maelys_execution_t* e) {
  if (e->terminal != TERMINAL_AWAITED)
    return;
  e->terminal = TERMINAL_SETTLED;
  if (e->terminal_poll != NULL)
    uv_poll_stop(e->terminal_poll);
  maelys__exec_arm_dispatch(e);
}

void maelys__exec_receive_terminal(maelys_execution_t* e) {
  if (e->terminal != TERMINAL_AWAITED || e->rendezvous_fd < 0)
    return;
  int master = -1;
  int r = maelys__terminal_receive(e->rendezvous_fd, &master);
  if (r == 0)
    return;
  if (r == 1) {
    e->streams[MAELYS_EXEC_STREAM_TERMINAL] =
        (stream_t){.present = true, .fd = master};
    if (e->resize_pending)
      maelys__terminal_set_size(master, e->resize_rows, e->resize_columns);
    e->resize_pending = false;
  } else if (r == -EPROTO) {
    /* Not a pseudo-terminal master: nothing is relayed through it, and a
     * payload with no terminal to talk to is ended rather than left
     * blocked. */
    char note[] = "the sandbox sent something other than the master of a "
                  "pseudo-terminal for the payload's terminal";
    maelys__exec_append_diag(e, note, sizeof note - 1);
    if (!maelys__exec_reaped(e))
      maelys__exec_send_forced(e);
  }
  /* One message settles it, whatever it held; so do end of file and a
   * failed socket (the execution's status says what went wrong). */
  maelys__exec_settle_terminal(e);
}

void maelys__exec_on_terminal(uv_poll_t* poll, int status, int events) {
  (void)status;
  (void)events;
  maelys__exec_receive_terminal(poll->data);
}

maelys_executor_result_t
maelys_execution_wait_terminal(maelys_execution_t* e,
                               maelys_execution_terminal_cb cb, void* data,
                               char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (e == NULL || cb == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "execution and callback are required");
  if (e->terminal == TERMINAL_NONE)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                                 "the execution's io mode is not TTY: it has "
                                 "no terminal");
  terminal_waiter_t* w = calloc(1, sizeof *w);
  if (w == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  w->cb = cb;
  w->data = data;
  terminal_waiter_t** p = &e->terminal_waiters;
  while (*p != NULL)
    p = &(*p)->next;
  *p = w;
  if (e->terminal == TERMINAL_SETTLED)
    maelys__exec_arm_dispatch(e);
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t maelys_execution_resize(maelys_execution_t* e,
                                                 unsigned rows,
                                                 unsigned columns,
                                                 char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (e == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "execution is NULL");
  if (rows < 1 || rows > 65535 || columns < 1 || columns > 65535)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "a terminal size is 1..65535 rows and columns (got %ux%u)", rows,
        columns);
  stream_t* s = &e->streams[MAELYS_EXEC_STREAM_TERMINAL];
  bool none = e->terminal == TERMINAL_NONE;
  if (none || s->taken || (e->terminal == TERMINAL_SETTLED && !s->present))
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_STATE, "%s",
        none       ? "the execution's io mode is not TTY: it has no terminal"
        : s->taken ? "the terminal was handed over with "
                     "maelys_execution_take_fd: resize that descriptor"
                   : "the execution has no terminal");
  if (!s->present) {
    e->resize_pending = true;
    e->resize_rows = rows;
    e->resize_columns = columns;
    return MAELYS_EXECUTOR_OK;
  }
  int fd = s->fd;
  if (s->opened && (s->handle == NULL ||
                    uv_fileno((uv_handle_t*)&s->handle->pipe, &fd) != 0))
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                                 "the terminal stream was closed");
  int r = maelys__terminal_set_size(fd, rows, columns);
  if (r != 0)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                 "resizing the payload's terminal: %s",
                                 strerror(-r));
  return MAELYS_EXECUTOR_OK;
}
