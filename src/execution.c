/*
 * The execution handle: spawn through a backend's launch description, exit
 * watching on the loop, the status channel of wrapped launches, the three
 * stop forms, streams, receipts and release.
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
#include <stddef.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "cgroup.h"
#include "internal.h"
#include "proc.h"
#include "terminal.h"
#include "tty-relay.h"

/* How long the status channel may stay open after the launcher exited before
 * the execution is finalised anyway (a killed launcher's sandbox child dies
 * with it, asynchronously). */
#define STATUS_DRAIN_MS 2000
/* The launcher's own diagnostics kept for a launch failure. */
#define DIAG_MAX 4096

typedef struct waiter {
  maelys_execution_wait_cb cb;
  void* data;
  struct waiter* next;
} waiter_t;

typedef struct terminal_waiter {
  maelys_execution_terminal_cb cb;
  void* data;
  struct terminal_waiter* next;
} terminal_waiter_t;

typedef struct stopper {
  maelys_execution_stop_cb cb;
  void* data;
  bool done;
  maelys_execution_stop_result_t result;
  struct stopper* next;
} stopper_t;

typedef struct stream {
  struct maelys_execution* owner;
  bool present;
  bool opened;
  bool taken;
  bool closing;
  int fd;
  uv_pipe_t pipe;
} stream_t;

enum stop_phase { STOP_IDLE, STOP_GRACEFUL, STOP_FORCED, STOP_CONTAINMENT };

struct maelys_execution {
  maelys_executor_t* executor;
  const maelys__backend_entry_t* backend;
  const maelys_executor_plan_t* plan;
  char id[33];
  char* executable;
  char** argv;
  char* receipt_dir;
  int receipt_dirfd; /* opened once at spawn; -1 without receipts */
  uint64_t grace_ms, force_ms;
  unsigned launch_flags;

  maelys__proc_t proc;
  bool main_reaped;
  /* The host's end of the lifeline (see MAELYS_BACKEND_FD_LIFELINE), kept
   * until the launched image is reaped, or -1. */
  int lifeline_fd;
  maelys__cgroup_t cgroup; /* the execution's memory cgroup, if any */
  int64_t memory_peak;     /* bytes, -1 when unknown */
  bool identity_set;
  uint32_t identity_uid, identity_gid;
  int wait_status;
  struct rusage usage;
  maelys__proc_t root;
  bool ready;
  bool pending_graceful;

  int status_fd;
  bool status_eof;
  char line[1024];
  size_t line_len;
  bool line_overflow;
  char* diag; /* allocated at the first diagnostic line: most executions
               * never have one, and 1000 of them must stay small */
  size_t diag_len;
  bool have_exit;
  int exit_code, term_signal;
  maelys_backend_event_t* launch_failed; /* allocated when one is reported */

  stream_t streams[5];
  /* The host's terminals a confined payload writes to, through relays
   * (invariant 21): [0] its stdout, [1] its stderr. */
  maelys__tty_relay_t* terminals[2];

  /* MAELYS_EXEC_IO_TTY: the core's end of the terminal rendezvous (until
   * the master came, or -1), whether the master came or will not come any
   * more, the size to set once it comes, and who waits for it. */
  bool tty;
  int rendezvous_fd;
  bool terminal_settled;
  bool resize_pending;
  unsigned resize_rows, resize_columns;
  terminal_waiter_t* terminal_waiters;
  uv_poll_t terminal_poll;
  bool terminal_poll_init;

  bool finished;
  maelys_execution_status_t status;
  char status_step[32];
  char* status_message;

  enum stop_phase stop_phase;
  bool stop_graceful_only;
  bool stop_requested;
  bool stop_result_set;
  maelys_execution_stop_result_t stop_result;

  waiter_t* waiters;
  stopper_t* stoppers;

  uv_poll_t proc_poll;
  uv_poll_t status_poll;
  uv_timer_t stop_timer;
  uv_timer_t drain_timer;
  uv_timer_t dispatch_timer;
  bool status_poll_init;
  int open_handles;
  bool closing;
  bool released;
  bool orphaned;
  struct maelys_execution* orphan_next;

  int64_t started_real_ns, ended_real_ns;
  uint64_t started_mono_ns, ended_mono_ns;

  char* receipt_json;
  char* receipt_path;
  uv_work_t receipt_work;
  int receipt_errno;
  bool receipt_pending;
  /* Receipt evidence, copied at spawn (receipt-evidence.c). */
  char* receipt_chain;
  char* receipt_context;
  bool receipt_signing;
  unsigned char receipt_key[64];
};

static int64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void free_vector(char** v) {
  if (v == NULL)
    return;
  for (size_t i = 0; v[i] != NULL; i++)
    free(v[i]);
  free(v);
}

static char** copy_vector(char* const* v) {
  size_t n = 0;
  while (v[n] != NULL)
    n++;
  char** out = calloc(n + 1, sizeof *out);
  if (out == NULL)
    return NULL;
  for (size_t i = 0; i < n; i++)
    if ((out[i] = maelys__executor_strdup(v[i])) == NULL) {
      free_vector(out);
      return NULL;
    }
  return out;
}

/* ------------------------------------------------------------ freeing */

/* The launched image is gone: what only existed for it goes too. With a pid
 * namespace launch its death took every process of the tree with it, so the
 * cgroup is empty and can be removed. */
static void release_launch_resources(maelys_execution_t* e) {
  if (e->lifeline_fd >= 0) {
    close(e->lifeline_fd);
    e->lifeline_fd = -1;
  }
  if (e->cgroup.dir_fd >= 0) {
    e->memory_peak = maelys__cgroup_memory_peak(&e->cgroup);
    maelys__cgroup_remove(&e->cgroup);
  }
}

static void execution_free(maelys_execution_t* e) {
  release_launch_resources(e);
  maelys__proc_close(&e->proc);
  maelys__proc_close(&e->root);
  if (e->status_fd >= 0)
    close(e->status_fd);
  if (e->rendezvous_fd >= 0)
    close(e->rendezvous_fd);
  for (int i = 0; i < 5; i++)
    if (e->streams[i].fd >= 0 && !e->streams[i].opened)
      close(e->streams[i].fd);
  while (e->terminal_waiters) {
    terminal_waiter_t* w = e->terminal_waiters;
    e->terminal_waiters = w->next;
    free(w);
  }
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
  free_vector(e->argv);
  free(e->receipt_dir);
  if (e->receipt_dirfd >= 0)
    close(e->receipt_dirfd);
  free(e->status_message);
  free(e->diag);
  free(e->launch_failed);
  free(e->receipt_json);
  free(e->receipt_path);
  free(e->receipt_chain);
  free(e->receipt_context);
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

static void close_handle(maelys_execution_t* e, uv_handle_t* h) {
  if (h->data == e && !uv_is_closing(h))
    uv_close(h, on_handle_closed);
}

/* A stream handle belongs to the caller while it is open, data field
 * included, so its close callback finds the execution through the slot. */
static void on_stream_closed(uv_handle_t* handle) {
  stream_t* s = (stream_t*)((char*)handle - offsetof(stream_t, pipe));
  maelys_execution_t* e = s->owner;
  if (--e->open_handles == 0)
    execution_free(e);
}

static void close_stream(stream_t* s) {
  if (s->opened && !s->closing) {
    s->closing = true;
    uv_close((uv_handle_t*)&s->pipe, on_stream_closed);
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

static void begin_close(maelys_execution_t* e) {
  if (e->closing || e->receipt_pending)
    return;
  e->closing = true;
  for (int i = 0; i < 2; i++)
    if (e->terminals[i] != NULL) {
      maelys__tty_relay_close(e->terminals[i], on_terminal_closed, e);
      e->terminals[i] = NULL;
    }
  for (int i = 0; i < 5; i++)
    close_stream(&e->streams[i]);
  close_handle(e, (uv_handle_t*)&e->proc_poll);
  if (e->status_poll_init)
    close_handle(e, (uv_handle_t*)&e->status_poll);
  if (e->terminal_poll_init)
    close_handle(e, (uv_handle_t*)&e->terminal_poll);
  close_handle(e, (uv_handle_t*)&e->stop_timer);
  close_handle(e, (uv_handle_t*)&e->drain_timer);
  close_handle(e, (uv_handle_t*)&e->dispatch_timer);
}

static void unlink_orphan(maelys_execution_t* e) {
  if (!e->orphaned)
    return;
  maelys__execution_t** p = &e->executor->orphans;
  while (*p != NULL && *p != e)
    p = &(*p)->orphan_next;
  if (*p == e)
    *p = e->orphan_next;
  e->orphaned = false;
}

/* ------------------------------------------------------------ dispatch */

static void on_dispatch(uv_timer_t* timer);

static void arm_dispatch(maelys_execution_t* e) {
  if (e->released || e->closing)
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
  while (e->terminal_settled && e->terminal_waiters != NULL && !e->released) {
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
    if (*p == NULL || e->released)
      break;
    stopper_t* s = *p;
    *p = s->next;
    if (s->cb != NULL)
      s->cb(e, s->result, s->data);
    free(s);
  }
  while (e->finished && !e->receipt_pending && e->waiters != NULL &&
         !e->released) {
    waiter_t* w = e->waiters;
    e->waiters = w->next;
    w->cb(e, &e->status, w->data);
    free(w);
  }
}

static void complete_stoppers(maelys_execution_t* e,
                              maelys_execution_stop_result_t result) {
  for (stopper_t* s = e->stoppers; s != NULL; s = s->next)
    if (!s->done) {
      s->done = true;
      s->result = result;
    }
  e->stop_result = result;
  e->stop_result_set = true;
  arm_dispatch(e);
}

/* --------------------------------------------------------------- stops */

static bool wrapped(const maelys_execution_t* e) {
  return (e->launch_flags & MAELYS_BACKEND_LAUNCH_STATUS_CHANNEL) != 0;
}

/* Where the graceful signal of a wrapped launch goes: the tree root the
 * backend named, or else the launched image itself (a launcher that forwards
 * it, such as the bubblewrap backend's, pid 1 of its own namespace). */
static void signal_tree_gracefully(maelys_execution_t* e) {
  if (e->root.pid > 0)
    e->executor->proc_ops->signal(&e->root, SIGTERM);
  else if (!e->main_reaped)
    e->executor->proc_ops->signal(&e->proc, SIGTERM);
}

static void send_graceful(maelys_execution_t* e) {
  if (wrapped(e)) {
    /* The signal goes once the sandbox said it can forward it; until then
     * it waits. */
    if (e->ready)
      signal_tree_gracefully(e);
    else
      e->pending_graceful = true;
    return;
  }
  if (!e->main_reaped) {
    e->executor->proc_ops->signal_group(e->proc.pid, SIGTERM);
    e->executor->proc_ops->signal(&e->proc, SIGTERM);
  }
}

static void send_forced(maelys_execution_t* e) {
  e->pending_graceful = false;
  if (e->root.pid > 0)
    e->executor->proc_ops->signal(&e->root, SIGKILL);
  /* The group is signalled only while its leader is unreaped: until then its
   * id cannot name anyone else's group. It also reaches a sandbox child that
   * has not yet left the launcher's group. */
  if (!e->main_reaped) {
    e->executor->proc_ops->signal_group(e->proc.pid, SIGKILL);
    e->executor->proc_ops->signal(&e->proc, SIGKILL);
  }
}

static void on_stop_timer(uv_timer_t* timer) {
  maelys_execution_t* e = timer->data;
  if (e->finished)
    return;
  if (e->stop_phase == STOP_GRACEFUL) {
    if (e->stop_graceful_only) {
      e->stop_phase = STOP_IDLE;
      e->pending_graceful = false;
      complete_stoppers(e, MAELYS_EXEC_STOPPED_STILL_RUNNING);
      e->stop_result_set = false;
      return;
    }
    e->stop_phase = STOP_FORCED;
    send_forced(e);
    uv_timer_start(&e->stop_timer, on_stop_timer, e->force_ms, 0);
  } else if (e->stop_phase == STOP_FORCED) {
    /* The tree outlived the force budget: reported, not waited for. */
    e->stop_phase = STOP_CONTAINMENT;
    complete_stoppers(e, MAELYS_EXEC_STOPPED_CONTAINMENT_FAILED);
  }
}

/* ---------------------------------------------------------- finishing */

static void on_receipt_work(uv_work_t* req) {
  maelys_execution_t* e = req->data;
  char* path = NULL;
  int r = e->receipt_dirfd >= 0
              ? maelys__executor_record_write_at(e->receipt_dirfd,
                                                 e->receipt_dir, e->id, ".json",
                                                 e->receipt_json, &path)
              : maelys__executor_record_write(e->receipt_dir, e->id, ".json",
                                              e->receipt_json, &path);
  e->receipt_errno = r < 0 ? -r : 0;
  e->receipt_path = path;
}

static void on_receipt_done(uv_work_t* req, int status) {
  maelys_execution_t* e = req->data;
  (void)status;
  e->receipt_pending = false;
  if (e->released)
    begin_close(e);
  else
    arm_dispatch(e);
}

static void append_diag(maelys_execution_t* e, const char* text, size_t len) {
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

static void compute_status(maelys_execution_t* e) {
  maelys_execution_status_t* s = &e->status;
  memset(s, 0, sizeof *s);
  s->launch_step = "";
  s->message = "";
  int ws = e->wait_status;
  bool main_signaled = WIFSIGNALED(ws);
  int main_code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 0;
  int main_signal = main_signaled ? WTERMSIG(ws) : 0;
  if (!wrapped(e)) {
    if (main_signaled) {
      s->outcome = MAELYS_EXEC_OUTCOME_SIGNALED;
      s->term_signal = main_signal;
    } else {
      s->outcome = MAELYS_EXEC_OUTCOME_EXITED;
      s->exit_code = main_code;
    }
  } else if (e->have_exit) {
    /* The payload's own status, as the tree root reported it. */
    if (e->term_signal > 0) {
      s->outcome = MAELYS_EXEC_OUTCOME_SIGNALED;
      s->term_signal = e->term_signal;
    } else {
      s->outcome = MAELYS_EXEC_OUTCOME_EXITED;
      s->exit_code = e->exit_code;
    }
  } else if (e->launch_failed != NULL) {
    s->outcome = MAELYS_EXEC_OUTCOME_LAUNCH_FAILED;
    snprintf(e->status_step, sizeof e->status_step, "%s",
             e->launch_failed->step);
    s->launch_errno = e->launch_failed->error_number;
    e->status_message = maelys__executor_strdup(e->launch_failed->message);
  } else if (e->ready) {
    /* The tree root died without reporting: it was killed (by our forced stop
     * or from outside), and the payload's tree died with it. The launcher
     * reports its child's death by signal N as status 128+N. */
    s->outcome = MAELYS_EXEC_OUTCOME_SIGNALED;
    if (main_signaled)
      s->term_signal = main_signal;
    else if (main_code > 128 && main_code < 128 + 65)
      s->term_signal = main_code - 128;
    else
      s->term_signal = SIGKILL;
  } else if (main_signaled) {
    /* The launcher was killed before the payload started. */
    s->outcome = MAELYS_EXEC_OUTCOME_SIGNALED;
    s->term_signal = main_signal;
  } else {
    /* The launcher exited before the payload started: its own diagnostics
     * are the launch error, never an exit status of the payload. */
    s->outcome = MAELYS_EXEC_OUTCOME_LAUNCH_FAILED;
    snprintf(e->status_step, sizeof e->status_step, "sandbox-setup");
    s->launch_errno = 0;
    e->status_message =
        e->diag_len > 0
            ? maelys__executor_strdup(e->diag)
            : maelys__executor_asprintf(
                  "the sandbox launcher exited with status %d before the "
                  "payload started",
                  main_code);
  }
  if (s->outcome == MAELYS_EXEC_OUTCOME_LAUNCH_FAILED) {
    s->launch_step = e->status_step;
    s->message = e->status_message ? e->status_message : "";
  }
  switch (e->stop_phase) {
  case STOP_GRACEFUL:
    s->stop_stage = MAELYS_EXEC_STOP_STAGE_GRACEFUL;
    break;
  case STOP_FORCED:
  case STOP_CONTAINMENT:
    s->stop_stage = MAELYS_EXEC_STOP_STAGE_FORCED;
    break;
  default:
    s->stop_stage = MAELYS_EXEC_STOP_STAGE_NONE;
  }
}

/* ------------------------------------------------------------ terminal */

/* The master arrived, or never will: stop watching the rendezvous. */
static void settle_terminal(maelys_execution_t* e) {
  if (e->terminal_settled)
    return;
  e->terminal_settled = true;
  if (e->terminal_poll_init)
    uv_poll_stop(&e->terminal_poll);
  arm_dispatch(e);
}

/* Takes the master if the sandbox sent it. */
static void receive_terminal(maelys_execution_t* e) {
  if (e->terminal_settled || e->rendezvous_fd < 0)
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
    append_diag(e, note, sizeof note - 1);
    if (!e->main_reaped)
      send_forced(e);
  }
  /* One message settles it, whatever it held; so do end of file and a
   * failed socket (the execution's status says what went wrong). */
  settle_terminal(e);
}

static void on_terminal(uv_poll_t* poll, int status, int events) {
  (void)status;
  (void)events;
  receive_terminal(poll->data);
}

static void finish(maelys_execution_t* e) {
  if (e->finished)
    return;
  /* A master sent before the payload ended is offered even when the exit
   * was seen first on the loop. */
  receive_terminal(e);
  if (e->tty)
    settle_terminal(e);
  e->finished = true;
  uv_timer_stop(&e->stop_timer);
  uv_timer_stop(&e->drain_timer);
  if (e->status_poll_init)
    uv_poll_stop(&e->status_poll);
  compute_status(e);
  switch (e->stop_phase) {
  case STOP_GRACEFUL:
    complete_stoppers(e, MAELYS_EXEC_STOPPED_GRACEFUL);
    break;
  case STOP_FORCED:
    complete_stoppers(e, MAELYS_EXEC_STOPPED_FORCED);
    break;
  case STOP_CONTAINMENT:
    e->stop_result = MAELYS_EXEC_STOPPED_FORCED;
    e->stop_result_set = true;
    break;
  default:
    break;
  }
  maelys__proc_close(&e->root);
  unlink_orphan(e);

  maelys__receipt_input_t in;
  memset(&in, 0, sizeof in);
  in.execution_id = e->id;
  in.backend = e->backend->vtable->name;
  in.capabilities = e->backend->proved;
  in.plan_digest = e->plan->digest;
  in.decision_digest = e->plan->decision_digest;
  in.executable = e->executable;
  in.argv = (const char* const*)e->argv;
  in.started_ns = e->started_real_ns;
  in.ended_ns = e->ended_real_ns;
  in.duration_ns = (int64_t)(e->ended_mono_ns - e->started_mono_ns);
  in.status = &e->status;
  in.stop_requested = e->stop_requested;
  in.stop_result =
      e->stop_result_set ? e->stop_result : MAELYS_EXEC_STOPPED_ALREADY_EXITED;
  in.user_seconds = (double)e->usage.ru_utime.tv_sec +
                    (double)e->usage.ru_utime.tv_usec / 1e6;
  in.system_seconds = (double)e->usage.ru_stime.tv_sec +
                      (double)e->usage.ru_stime.tv_usec / 1e6;
  in.max_rss_kib = e->usage.ru_maxrss;
  in.plan = e->plan;
  in.memory_peak_bytes = e->memory_peak;
  in.identity_set = e->identity_set;
  in.identity_uid = e->identity_uid;
  in.identity_gid = e->identity_gid;
  in.context_json = e->receipt_context;
  in.secret_key = e->receipt_signing ? e->receipt_key : NULL;
  /* The chain links receipts in the order executions end, on the loop's
   * thread: a receipt names the digest of the one rendered before it. */
  maelys__receipt_chain_t* chain =
      e->receipt_chain
          ? maelys__executor_chain(e->executor, e->receipt_chain, false)
          : NULL;
  if (chain != NULL) {
    in.chain_id = chain->id;
    in.chain_sequence = chain->sequence + 1;
    in.chain_previous = chain->previous[0] ? chain->previous : NULL;
  }
  e->receipt_json = maelys__executor_receipt_render(&in);
  if (chain != NULL) {
    chain->live--;
    if (e->receipt_json != NULL) {
      chain->sequence++;
      maelys__executor_record_digest(e->receipt_json, chain->previous);
    }
  }

  if (e->receipt_dir != NULL && e->receipt_json != NULL) {
    e->receipt_work.data = e;
    if (uv_queue_work(e->executor->loop, &e->receipt_work, on_receipt_work,
                      on_receipt_done) == 0) {
      e->receipt_pending = true;
      return;
    }
    e->receipt_errno = EIO;
  }
  if (e->released)
    begin_close(e);
  else
    arm_dispatch(e);
}

static void on_drain_timeout(uv_timer_t* timer) {
  finish(timer->data);
}

/* ------------------------------------------------------ status channel */

static void handle_event(maelys_execution_t* e,
                         const maelys_backend_event_t* ev) {
  switch (ev->kind) {
  case MAELYS_BACKEND_EVENT_TREE_ROOT:
    if (e->root.pid <= 0 && ev->pid > 1) {
      if (maelys__proc_open_foreign(ev->pid, &e->root) == 0 &&
          e->stop_phase >= STOP_FORCED)
        e->executor->proc_ops->signal(&e->root, SIGKILL);
    }
    break;
  case MAELYS_BACKEND_EVENT_READY:
    if (e->ready || e->have_exit || e->launch_failed != NULL)
      break;
    e->ready = true;
    if (e->pending_graceful) {
      e->pending_graceful = false;
      signal_tree_gracefully(e);
    }
    break;
  /* Invariant 19: only the first terminal line counts; anything after it
   * (whoever wrote it) changes nothing. */
  case MAELYS_BACKEND_EVENT_EXIT:
    if (e->have_exit || e->launch_failed != NULL)
      break;
    e->have_exit = true;
    e->exit_code = ev->exit_code;
    e->term_signal = ev->term_signal;
    break;
  case MAELYS_BACKEND_EVENT_LAUNCH_FAILED:
    if (e->have_exit || e->launch_failed != NULL)
      break;
    e->launch_failed = malloc(sizeof *e->launch_failed);
    if (e->launch_failed != NULL)
      *e->launch_failed = *ev;
    else
      append_diag(e, ev->message, strlen(ev->message));
    break;
  case MAELYS_BACKEND_EVENT_IDENTITY:
    if (!e->identity_set && !e->ready) {
      e->identity_set = true;
      e->identity_uid = ev->uid;
      e->identity_gid = ev->gid;
    }
    break;
  case MAELYS_BACKEND_EVENT_DIAGNOSTIC:
    append_diag(e, ev->message, strlen(ev->message));
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

/* Reads what the status channel holds now. Returns true at end of file. */
static bool read_status(maelys_execution_t* e) {
  char buf[4096];
  for (;;) {
    ssize_t n = read(e->status_fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        return false;
      return true;
    }
    if (n == 0) {
      if (e->line_len > 0 && !e->line_overflow)
        handle_line(e, e->line, e->line_len);
      e->line_len = 0;
      return true;
    }
    for (ssize_t i = 0; i < n; i++) {
      if (buf[i] == '\n') {
        if (!e->line_overflow)
          handle_line(e, e->line, e->line_len);
        e->line_len = 0;
        e->line_overflow = false;
      } else if (e->line_len + 1 < sizeof e->line) {
        e->line[e->line_len++] = buf[i];
        e->line[e->line_len] = '\0';
      } else {
        e->line_overflow = true; /* overlong lines are dropped, not split */
      }
    }
  }
}

/* The launcher's status channel and the terminal relays have reached their
 * end: what the launch said and printed is all in. */
static bool drained(const maelys_execution_t* e) {
  if (wrapped(e) && !e->status_eof)
    return false;
  for (int i = 0; i < 2; i++)
    if (e->terminals[i] != NULL && !maelys__tty_relay_done(e->terminals[i]))
      return false;
  return true;
}

static void on_status(uv_poll_t* poll, int status, int events) {
  maelys_execution_t* e = poll->data;
  (void)status;
  (void)events;
  if (read_status(e)) {
    e->status_eof = true;
    uv_poll_stop(&e->status_poll);
    if (e->main_reaped && drained(e))
      finish(e);
  }
}

static void on_terminal_done(maelys__tty_relay_t* relay, void* data) {
  maelys_execution_t* e = data;
  (void)relay;
  if (e->main_reaped && drained(e))
    finish(e);
}

/* ----------------------------------------------------------- exit watch */

static void on_proc(uv_poll_t* poll, int status, int events) {
  maelys_execution_t* e = poll->data;
  (void)status;
  (void)events;
  int ws = 0;
  int r = maelys__proc_reap(&e->proc, &ws, &e->usage);
  if (r == 0)
    return;
  /* r < 0 cannot happen for a pidfd we own; treat it as an exit so the
   * execution can never hang on it. */
  e->main_reaped = true;
  e->wait_status = r > 0 ? ws : 0;
  e->ended_real_ns = realtime_ns();
  e->ended_mono_ns = uv_hrtime();
  uv_poll_stop(&e->proc_poll);
  release_launch_resources(e);
  if (wrapped(e) && !e->status_eof && read_status(e)) {
    e->status_eof = true;
    uv_poll_stop(&e->status_poll);
  }
  if (!drained(e)) {
    /* Bounded: a writer that outlives the launcher (only possible without
     * a pid namespace) cannot hold the execution open. */
    uv_timer_start(&e->drain_timer, on_drain_timeout, STATUS_DRAIN_MS, 0);
    if (e->released)
      uv_unref((uv_handle_t*)&e->drain_timer);
    return;
  }
  finish(e);
}

/* ---------------------------------------------------------------- spawn */

typedef struct layout {
  maelys__proc_fd_t fds[8 + 64]; /* payload descriptors */
  size_t count;
  int limit;
  int close_after[16]; /* child ends, closed after spawn */
  size_t close_count;
  int null_fd;
  int terminal_child; /* MAELYS_BACKEND_FD_TERMINAL, in close_after */
} layout_t;

static int add_payload_fd(layout_t* l, int child_fd, int source) {
  if (l->count >= MAELYS__ARRAY_SIZE(l->fds))
    return -1;
  l->fds[l->count++] = (maelys__proc_fd_t){child_fd, source};
  if (child_fd + 1 > l->limit)
    l->limit = child_fd + 1;
  return 0;
}

/* Whether the host's descriptor `fd` is an anonymous inode (an epoll
 * instance, eventfd, signalfd, timerfd or pidfd): never a standard stream,
 * but what a host that started with 0, 1 or 2 closed finds there once its
 * loop opened one. Handing it to a payload would give it the host's own
 * machinery (the adversarial review stole libuv's epoll through fd 2). */
static bool anonymous_inode(int fd) {
  char link[64], target[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0)
    return false;
  target[n] = '\0';
  return strncmp(target, "anon_inode:", 11) == 0;
}

/* The host's standard descriptor `fd` for the payload, /dev/null when it is
 * closed, or -2 (after filling out_error) when it is no standard stream. */
static int host_fd_or_null(layout_t* l, int fd, char** out_error) {
  if (fcntl(fd, F_GETFD) < 0)
    return l->null_fd;
  if (anonymous_inode(fd)) {
    maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_STATE,
        "the host's descriptor %d is not a standard stream but an anonymous "
        "inode (the host started with it closed and something, perhaps its "
        "loop, reused the number): open /dev/null on 0, 1 and 2 before "
        "creating the loop",
        fd);
    return -2;
  }
  return fd;
}

/* Creates the pipes and sockets of the io mode. The host ends go to the
 * execution's streams, the child ends to the layout. */
/* The child's end for host descriptor `fd` (1 or 2) of a confined payload:
 * the host's own descriptor, or -- when it is a terminal -- a relay's pipe
 * (invariant 21). After filling out_error: -2 when the host's descriptor is
 * no standard stream, -1 for another failure. */
static int output_source(maelys_execution_t* e,
                         const maelys_execution_request_t* r, layout_t* l,
                         int fd, bool confined, char** out_error) {
  int src = host_fd_or_null(l, fd, out_error);
  if (src < 0 || !confined || src != fd || !isatty(fd))
    return src;
  int child = -1;
  int rc = maelys__tty_relay_create(e->executor->loop, fd, !r->terminal_raw,
                                    &e->terminals[fd - 1], &child);
  if (rc != 0) {
    maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                          "relaying the host's terminal (fd %d): %s", fd,
                          uv_strerror(rc));
    return -1;
  }
  l->close_after[l->close_count++] = child;
  return child;
}

/* MAELYS_EXEC_IO_TTY: the sandbox replaces 0, 1 and 2 with the slave of the
 * terminal it makes, so the layout holds /dev/null there until then; the
 * rendezvous' child end goes to the launch. */
static maelys_executor_result_t
build_terminal_layout(maelys_execution_t* e,
                      const maelys_execution_request_t* r, layout_t* l,
                      char** out_error) {
  if (r->stderr_mode != MAELYS_EXEC_STDERR_INHERIT)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "the TTY io mode makes the terminal the payload's stderr too: the "
        "stderr mode must be MAELYS_EXEC_STDERR_INHERIT");
  int host = -1, child = -1;
  int rc = maelys__terminal_rendezvous(&host, &child);
  if (rc != 0)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                 "creating the terminal rendezvous: %s",
                                 strerror(-rc));
  e->rendezvous_fd = host;
  l->terminal_child = child;
  l->close_after[l->close_count++] = child;
  for (int fd = 0; fd < 3; fd++)
    add_payload_fd(l, fd, l->null_fd);
  return MAELYS_EXECUTOR_OK;
}

static maelys_executor_result_t
build_layout(maelys_execution_t* e, const maelys_execution_request_t* r,
             layout_t* l, bool confined, char** out_error) {
  l->null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (l->null_fd < 0)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                 "open /dev/null: %s", strerror(errno));
  if (r->stdin_mode == MAELYS_EXEC_STDIN_NULL &&
      r->io_mode != MAELYS_EXEC_IO_CAPTURED &&
      r->io_mode != MAELYS_EXEC_IO_ISOLATED_DUPLEX)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "a /dev/null stdin (MAELYS_EXEC_STDIN_NULL) needs the CAPTURED io "
        "mode: in this io mode stdin is something else");
  if (r->io_mode == MAELYS_EXEC_IO_TTY) {
    maelys_executor_result_t res = build_terminal_layout(e, r, l, out_error);
    if (res != MAELYS_EXECUTOR_OK)
      return res;
    goto channels;
  }
  int stderr_src;
  switch (r->stderr_mode) {
  case MAELYS_EXEC_STDERR_CAPTURE: {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
      goto io_error;
    e->streams[MAELYS_EXEC_STREAM_STDERR] =
        (stream_t){.present = true, .fd = p[0]};
    l->close_after[l->close_count++] = p[1];
    stderr_src = p[1];
    break;
  }
  case MAELYS_EXEC_STDERR_NULL:
    stderr_src = l->null_fd;
    break;
  default:
    stderr_src = output_source(e, r, l, 2, confined, out_error);
    if (stderr_src < 0)
      return stderr_src == -2 ? MAELYS_EXECUTOR_ERR_STATE
                              : MAELYS_EXECUTOR_ERR_IO;
    break;
  }
  switch (r->io_mode) {
  case MAELYS_EXEC_IO_CAPTURED: {
    int in[2] = {-1, -1}, out[2];
    if (r->stdin_mode == MAELYS_EXEC_STDIN_PIPE && pipe2(in, O_CLOEXEC) != 0)
      goto io_error;
    if (pipe2(out, O_CLOEXEC) != 0) {
      if (in[0] >= 0) {
        close(in[0]);
        close(in[1]);
      }
      goto io_error;
    }
    if (in[0] >= 0) {
      e->streams[MAELYS_EXEC_STREAM_STDIN] =
          (stream_t){.present = true, .fd = in[1]};
      l->close_after[l->close_count++] = in[0];
    }
    e->streams[MAELYS_EXEC_STREAM_STDOUT] =
        (stream_t){.present = true, .fd = out[0]};
    l->close_after[l->close_count++] = out[1];
    add_payload_fd(l, 0, in[0] >= 0 ? in[0] : l->null_fd);
    add_payload_fd(l, 1, out[1]);
    add_payload_fd(l, 2, stderr_src);
    break;
  }
  case MAELYS_EXEC_IO_DUPLEX_STDIO:
  case MAELYS_EXEC_IO_ISOLATED_DUPLEX: {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
      goto io_error;
    e->streams[MAELYS_EXEC_STREAM_PROTOCOL] =
        (stream_t){.present = true, .fd = sv[0]};
    l->close_after[l->close_count++] = sv[1];
    if (r->io_mode == MAELYS_EXEC_IO_DUPLEX_STDIO) {
      add_payload_fd(l, 0, sv[1]);
      add_payload_fd(l, 1, sv[1]);
      add_payload_fd(l, 2, stderr_src);
    } else {
      /* Isolated: stdin is /dev/null and stdout *is* stderr, so a stray print
       * is a visible diagnostic and can never corrupt the protocol. */
      add_payload_fd(l, 0, l->null_fd);
      add_payload_fd(l, 1, stderr_src);
      add_payload_fd(l, 2, stderr_src);
      add_payload_fd(l, r->protocol_fd, sv[1]);
    }
    break;
  }
  case MAELYS_EXEC_IO_INHERIT: {
    if (confined && isatty(0))
      return maelys__executor_fail(
          out_error, MAELYS_EXECUTOR_ERR_DENIED,
          "the host's stdin is a terminal, and a sandbox never receives a "
          "terminal the host holds (invariant 21): use the captured io mode, "
          "or a pseudo-terminal session");
    int out_src = output_source(e, r, l, 1, confined, out_error);
    if (out_src < 0)
      return out_src == -2 ? MAELYS_EXECUTOR_ERR_STATE : MAELYS_EXECUTOR_ERR_IO;
    int in_src = host_fd_or_null(l, 0, out_error);
    if (in_src == -2)
      return MAELYS_EXECUTOR_ERR_STATE;
    add_payload_fd(l, 0, in_src);
    add_payload_fd(l, 1, out_src);
    add_payload_fd(l, 2, stderr_src);
    break;
  }
  case MAELYS_EXEC_IO_TTY:
    break; /* build_terminal_layout */
  }
channels:
  for (size_t i = 0; i < r->channel_count; i++)
    add_payload_fd(l, r->channels[i].child_fd, r->channels[i].host_fd);
  if (l->limit < 3)
    l->limit = 3;
  return MAELYS_EXECUTOR_OK;
io_error:
  return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                               "creating the child's streams: %s",
                               strerror(errno));
}

static void layout_dispose(layout_t* l) {
  for (size_t i = 0; i < l->close_count; i++)
    close(l->close_after[i]);
  l->close_count = 0;
  if (l->null_fd >= 0)
    close(l->null_fd);
  l->null_fd = -1;
}

/* Checks the request against the plan before anything is created. */
static maelys_executor_result_t
check_request(maelys_executor_t* executor, const maelys_executor_plan_t* plan,
              const maelys_execution_request_t* r,
              const maelys__backend_entry_t** out_backend, char** out_error) {
  if (!plan->sealed)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_STATE,
        "the plan is not sealed: seal it before spawning (invariant 3)");
  if (r->executable == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "the request names no executable");
  if (r->backend == NULL)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "the request names no backend: nothing is launched without one");
  if (strcmp(r->platform, "local") != 0)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                                 "platform token '%s' is refused", r->platform);
  const maelys__backend_entry_t* backend =
      maelys__executor_find_backend(executor, r->backend);
  if (backend == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_NOT_FOUND,
                                 "no backend named '%s' is registered",
                                 r->backend);
  uint64_t need = 0;
  maelys_executor_plan_required_capabilities(plan, &need, NULL);
  uint64_t missing = need & ~backend->proved;
  if (missing != 0) {
    /* Invariant 1: a capability that was not proved refuses the launch,
     * naming each missing capability and why the probe could not prove it. */
    char* names = maelys__executor_capability_list(missing);
    int bit = __builtin_ctzll(missing);
    const char* why = backend->reasons[bit] ? backend->reasons[bit]
                      : backend->diagnostic ? backend->diagnostic
                                            : "not offered by the backend";
    maelys_executor_result_t res = maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_CAPABILITY,
        "backend '%s' did not prove %s, which the plan requires (%s: %s)",
        r->backend, names ? names : "capabilities",
        maelys_executor_capability_name(UINT64_C(1) << bit), why);
    free(names);
    return res;
  }
  uint64_t scratch = 0;
  maelys_executor_root_t root = maelys_executor_plan_root(plan, &scratch);
  if (root == MAELYS_EXECUTOR_ROOT_EPHEMERAL_WRITE &&
      r->scratch_bytes != scratch)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "the request's scratch size (%llu bytes) does not equal the plan's "
        "(%llu bytes) (invariant 10)",
        (unsigned long long)r->scratch_bytes, (unsigned long long)scratch);
  if (root != MAELYS_EXECUTOR_ROOT_EPHEMERAL_WRITE && r->scratch_bytes != 0)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "the request asks for %llu bytes of scratch but the plan's root is "
        "%s, which has none",
        (unsigned long long)r->scratch_bytes, maelys__executor_root_name(root));
  /* Invariant 5: descriptors from 4 up are exactly the plan's channels. */
  for (size_t i = 0; i < r->channel_count; i++) {
    bool found = false;
    for (size_t k = 0; k < plan->channel_count; k++)
      if (plan->channels[k].child_fd == r->channels[i].child_fd)
        found = true;
    if (!found)
      return maelys__executor_fail(
          out_error, MAELYS_EXECUTOR_ERR_DENIED,
          "the request installs a channel at child fd %d that the plan does "
          "not authorise",
          r->channels[i].child_fd);
    if (r->io_mode == MAELYS_EXEC_IO_ISOLATED_DUPLEX &&
        r->channels[i].child_fd == r->protocol_fd)
      return maelys__executor_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "channel fd %d collides with the protocol descriptor",
          r->protocol_fd);
  }
  for (size_t k = 0; k < plan->channel_count; k++) {
    bool found = false;
    for (size_t i = 0; i < r->channel_count; i++)
      if (plan->channels[k].child_fd == r->channels[i].child_fd)
        found = true;
    if (!found)
      return maelys__executor_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "the plan's channel '%s' at fd %d has no descriptor in the request",
          plan->channels[k].name, plan->channels[k].child_fd);
  }
  *out_backend = backend;
  return MAELYS_EXECUTOR_OK;
}

/* Invariant 13: the receipt directory must lie outside every path the plan
 * makes writable. Both sides are compared after resolving symlinks. */
static maelys_executor_result_t
check_receipt_dir(const maelys_executor_plan_t* plan, int dirfd,
                  const char* dir, char** out_error) {
  char resolved_dir[PATH_MAX];
  /* Resolve the deepest existing ancestor, then append the rest. */
  char probe[PATH_MAX];
  snprintf(probe, sizeof probe, "%s", dir);
  char suffix[PATH_MAX] = "";
  while (realpath(probe, resolved_dir) == NULL) {
    char* slash = strrchr(probe, '/');
    if (slash == NULL || slash == probe) {
      snprintf(resolved_dir, sizeof resolved_dir, "/");
      break;
    }
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s%s", slash, suffix);
    snprintf(suffix, sizeof suffix, "%s", tmp);
    *slash = '\0';
  }
  char full[PATH_MAX * 2];
  snprintf(full, sizeof full, "%s%s",
           strcmp(resolved_dir, "/") == 0 && suffix[0] ? "" : resolved_dir,
           suffix);
  /* Once opened: the directory the descriptor holds, wherever a link swapped
   * in since pointed. */
  if (dirfd >= 0) {
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", dirfd);
    ssize_t n = readlink(self, full, sizeof full - 1);
    if (n <= 0)
      return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                   "the receipt directory '%s': %s", dir,
                                   n < 0 ? strerror(errno) : "no name");
    full[n] = '\0';
  }
  if (full[0] == '\0')
    snprintf(full, sizeof full, "/");
  const char* paths[2 * MAELYS_EXECUTOR_MAX_ENTRIES];
  size_t n = maelys__executor_plan_writable_paths(plan, paths,
                                                  MAELYS__ARRAY_SIZE(paths));
  for (size_t i = 0; i < n; i++) {
    char resolved[PATH_MAX];
    const char* w = realpath(paths[i], resolved) ? resolved : paths[i];
    if (maelys__executor_path_within(full, w) ||
        maelys__executor_path_within(dir, paths[i]))
      return maelys__executor_fail(
          out_error, MAELYS_EXECUTOR_ERR_DENIED,
          "receipt directory '%s' lies inside '%s', which the plan makes "
          "writable: the sandbox could forge its own receipt (invariant 13)",
          dir, paths[i]);
  }
  return MAELYS_EXECUTOR_OK;
}

/* The execution's memory cgroup, under the parent the executor found (once,
 * on first use). */
static maelys_executor_result_t
create_cgroup(maelys_execution_t* e, uint64_t memory_max, char** out_error) {
  maelys_executor_t* ex = e->executor;
  if (ex->memory_cgroup == NULL) {
    ex->memory_cgroup = malloc(sizeof *ex->memory_cgroup);
    if (ex->memory_cgroup == NULL)
      return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                   "out of memory");
    maelys__cgroup_find_memory(ex->memory_cgroup);
  }
  char error[512];
  int r = maelys__cgroup_create(ex->memory_cgroup, e->id, memory_max,
                                &e->cgroup, error, sizeof error);
  if (r == 0)
    return MAELYS_EXECUTOR_OK;
  return maelys__executor_fail(out_error,
                               r == -ENOTSUP ? MAELYS_EXECUTOR_ERR_UNSUPPORTED
                                             : MAELYS_EXECUTOR_ERR_IO,
                               "the memory ceiling of %llu bytes cannot be "
                               "enforced: %s",
                               (unsigned long long)memory_max, error);
}

/* A chained receipt must land in a file (a chain with a receipt only in
 * memory would have a hole no reader could explain), and a closed chain
 * takes no more receipts. The chain is created here, so that linking at the
 * end cannot fail for want of memory. */
static maelys_executor_result_t
check_receipt_chain(maelys_executor_t* executor,
                    const maelys_execution_request_t* request, bool dry_run,
                    char** out_error) {
  if (request->receipt_dir == NULL)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "the request joins receipt chain '%s' but has no receipt directory",
        request->receipt_chain);
  maelys__receipt_chain_t* c =
      maelys__executor_chain(executor, request->receipt_chain, !dry_run);
  if (c == NULL && dry_run)
    return MAELYS_EXECUTOR_OK; /* a new chain: spawn would create it */
  if (c == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  if (c->closed)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                                 "receipt chain '%s' was closed",
                                 request->receipt_chain);
  return MAELYS_EXECUTOR_OK;
}

static int init_handles(maelys_execution_t* e, uv_loop_t* loop) {
  uv_handle_t* hs[] = {(uv_handle_t*)&e->stop_timer,
                       (uv_handle_t*)&e->drain_timer,
                       (uv_handle_t*)&e->dispatch_timer};
  uv_timer_init(loop, &e->stop_timer);
  uv_timer_init(loop, &e->drain_timer);
  uv_timer_init(loop, &e->dispatch_timer);
  for (size_t i = 0; i < MAELYS__ARRAY_SIZE(hs); i++) {
    hs[i]->data = e;
    e->open_handles++;
  }
  int r = uv_poll_init(loop, &e->proc_poll, e->proc.watch_fd);
  if (r != 0)
    return r;
  e->proc_poll.data = e;
  e->open_handles++;
  if (e->status_fd >= 0) {
    r = uv_poll_init(loop, &e->status_poll, e->status_fd);
    if (r != 0)
      return r;
    e->status_poll.data = e;
    e->status_poll_init = true;
    e->open_handles++;
  }
  if (e->rendezvous_fd >= 0) {
    r = uv_poll_init(loop, &e->terminal_poll, e->rendezvous_fd);
    if (r != 0)
      return r;
    e->terminal_poll.data = e;
    e->terminal_poll_init = true;
    e->open_handles++;
  }
  return 0;
}

/* Every check spawn makes before it creates anything. A dry run (`dry_run`)
 * makes them without side effects: the receipt directory is judged as
 * spawn's mkdir would find it (neither created nor opened), and a new
 * receipt chain is not recorded. Otherwise *out_receipt_dirfd is the
 * receipt directory opened (or -1 without one): the caller owns it. */
static maelys_executor_result_t
preflight(maelys_executor_t* executor, const maelys_executor_plan_t* plan,
          const maelys_execution_request_t* request, bool dry_run,
          int* out_receipt_dirfd, const maelys__backend_entry_t** out_backend,
          char** out_error) {
  *out_receipt_dirfd = -1;
  maelys_executor_result_t res = MAELYS_EXECUTOR_OK;
  if (plan->sealed)
    res = maelys__executor_check_system_trees(plan, out_error);
  if (res == MAELYS_EXECUTOR_OK && plan->sealed && request->receipt_dir != NULL)
    res = check_receipt_dir(plan, -1, request->receipt_dir, out_error);
  /* A receipt that could not be written must never be silent: a directory
   * that cannot take one refuses the launch before anything runs. */
  int receipt_dirfd = -1;
  if (res == MAELYS_EXECUTOR_OK && plan->sealed &&
      request->receipt_dir != NULL) {
    int rr =
        dry_run
            ? maelys__executor_receipt_dir_could_be_ready(request->receipt_dir)
            : (receipt_dirfd =
                   maelys__executor_receipt_dir_open(request->receipt_dir));
    if (rr < 0) {
      receipt_dirfd = -1;
      res = maelys__executor_fail(
          out_error, MAELYS_EXECUTOR_ERR_IO,
          "the receipt directory '%s' cannot take a receipt: %s",
          request->receipt_dir, strerror(-rr));
    } else if (receipt_dirfd >= 0) {
      res = check_receipt_dir(plan, receipt_dirfd, request->receipt_dir,
                              out_error);
    }
  }
  if (res == MAELYS_EXECUTOR_OK)
    res = check_request(executor, plan, request, out_backend, out_error);
  if (res == MAELYS_EXECUTOR_OK && request->receipt_chain != NULL)
    res = check_receipt_chain(executor, request, dry_run, out_error);
  if (res != MAELYS_EXECUTOR_OK) {
    if (receipt_dirfd >= 0)
      close(receipt_dirfd);
    return res;
  }
  *out_receipt_dirfd = receipt_dirfd;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t maelys_execution_check(
    maelys_executor_t* executor, const maelys_executor_plan_t* plan,
    const maelys_execution_request_t* request, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (executor == NULL || plan == NULL || request == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "executor, plan and request are required");
  if (executor->destroyed)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                                 "the executor was destroyed");
  const maelys__backend_entry_t* backend = NULL;
  int no_fd = -1; /* a dry run opens no receipt directory */
  maelys_executor_result_t res =
      preflight(executor, plan, request, true, &no_fd, &backend, out_error);
  if (res != MAELYS_EXECUTOR_OK)
    return res;
  /* The payload's descriptor numbers as build_layout lays them out, without
   * creating the pipes and sockets behind them: the backend's preparation
   * only needs which child descriptors exist. A terminal stdin is refused
   * exactly as build_layout refuses it. */
  uint64_t needed = 0;
  maelys_executor_plan_required_capabilities(plan, &needed, NULL);
  if (request->io_mode == MAELYS_EXEC_IO_INHERIT && needed != 0 && isatty(0))
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_DENIED,
        "the host's stdin is a terminal, and a sandbox never receives a "
        "terminal the host holds (invariant 21): use the captured io mode, "
        "or a pseudo-terminal session");
  int fds[8 + 64];
  size_t count = 0;
  int limit = 3;
  for (int fd = 0; fd < 3; fd++)
    fds[count++] = fd;
  if (request->io_mode == MAELYS_EXEC_IO_ISOLATED_DUPLEX)
    fds[count++] = request->protocol_fd;
  for (size_t i = 0;
       i < request->channel_count && count < MAELYS__ARRAY_SIZE(fds); i++)
    fds[count++] = request->channels[i].child_fd;
  for (size_t i = 0; i < count; i++)
    if (fds[i] + 1 > limit)
      limit = fds[i] + 1;
  maelys_backend_launch_t launch;
  maelys__executor_launch_init(&launch, 0);
  launch.payload_fd_limit = limit;
  launch.payload_fds = fds;
  launch.payload_fd_count = count;
  res = backend->vtable->prepare(backend->state, backend->proved, plan, request,
                                 &launch, out_error);
  maelys__executor_launch_dispose(&launch);
  return res;
}

maelys_executor_result_t
maelys_execution_spawn(maelys_executor_t* executor,
                       const maelys_executor_plan_t* plan,
                       maelys_execution_request_t* request,
                       maelys_execution_t** out_execution, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (out_execution == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "out_execution is NULL");
  *out_execution = NULL;
  if (executor == NULL || plan == NULL || request == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "executor, plan and request are required");
  if (executor->destroyed)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                                 "the executor was destroyed");
  const maelys__backend_entry_t* backend = NULL;
  int receipt_dirfd = -1;
  maelys_executor_result_t res = preflight(executor, plan, request, false,
                                           &receipt_dirfd, &backend, out_error);
  if (res != MAELYS_EXECUTOR_OK)
    return res;

  maelys_execution_t* e = calloc(1, sizeof *e);
  if (e == NULL) {
    if (receipt_dirfd >= 0)
      close(receipt_dirfd);
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory creating an execution");
  }
  e->receipt_dirfd = receipt_dirfd;
  e->executor = executor;
  e->backend = backend;
  e->proc.watch_fd = -1;
  e->root.watch_fd = -1;
  e->root.pid = -1;
  e->status_fd = -1;
  e->lifeline_fd = -1;
  e->rendezvous_fd = -1;
  e->tty = request->io_mode == MAELYS_EXEC_IO_TTY;
  e->cgroup.dir_fd = e->cgroup.parent_fd = -1;
  e->memory_peak = -1;
  for (int i = 0; i < 5; i++)
    e->streams[i].fd = -1;
  e->grace_ms = request->grace_ms;
  e->force_ms = request->force_ms;
  char* default_argv[2] = {request->executable, NULL};
  e->executable = maelys__executor_strdup(request->executable);
  e->argv = copy_vector(request->argv ? request->argv : default_argv);
  e->receipt_dir = request->receipt_dir
                       ? maelys__executor_strdup(request->receipt_dir)
                       : NULL;
  e->receipt_chain = request->receipt_chain
                         ? maelys__executor_strdup(request->receipt_chain)
                         : NULL;
  e->receipt_context = request->receipt_context
                           ? maelys__executor_strdup(request->receipt_context)
                           : NULL;
  if (executor->receipt_signing) {
    memcpy(e->receipt_key, executor->receipt_key, sizeof e->receipt_key);
    e->receipt_signing = true;
  }
  if (e->executable == NULL || e->argv == NULL ||
      (request->receipt_dir && e->receipt_dir == NULL) ||
      (request->receipt_chain && e->receipt_chain == NULL) ||
      (request->receipt_context && e->receipt_context == NULL) ||
      maelys__executor_random_id(e->id) != 0) {
    free(e->executable);
    free_vector(e->argv);
    free(e->receipt_dir);
    free(e->receipt_chain);
    free(e->receipt_context);
    if (receipt_dirfd >= 0)
      close(receipt_dirfd);
    sodium_memzero(e->receipt_key, sizeof e->receipt_key);
    free(e);
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory creating an execution");
  }

  layout_t layout;
  memset(&layout, 0, sizeof layout);
  layout.null_fd = -1;
  layout.terminal_child = -1;
  maelys_backend_launch_t launch;
  maelys__executor_launch_init(&launch, 0);
  int status_pipe[2] = {-1, -1};
  int lifeline[2] = {-1, -1};
  maelys__proc_fd_t* fds = NULL;
  maelys__proc_rlimit_t rlimits[MAELYS__RLIMIT_COUNT];
  size_t rlimit_count = 0;

  uint64_t needed = 0;
  maelys_executor_plan_required_capabilities(plan, &needed, NULL);
  res = build_layout(e, request, &layout, needed != 0, out_error);
  if (res != MAELYS_EXECUTOR_OK)
    goto fail;
  int payload_fds[MAELYS__ARRAY_SIZE(layout.fds)];
  for (size_t i = 0; i < layout.count; i++)
    payload_fds[i] = layout.fds[i].child_fd;
  launch.payload_fd_limit = layout.limit;
  launch.payload_fds = payload_fds;
  launch.payload_fd_count = layout.count;
  res = backend->vtable->prepare(backend->state, backend->proved, plan, request,
                                 &launch, out_error);
  if (res != MAELYS_EXECUTOR_OK)
    goto fail;
  e->launch_flags = launch.flags;
  if (e->tty) {
    /* Invariant 21: a terminal session needs a terminal the sandbox makes
     * itself; a backend that cannot is refused, never given the host's. */
    bool mapped = false;
    for (size_t i = 0; i < launch.map_count; i++)
      mapped = mapped || launch.map[i].source == MAELYS_BACKEND_FD_TERMINAL;
    if (!mapped) {
      res = maelys__executor_fail(
          out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
          "backend '%s' cannot give the payload a pseudo-terminal of its own "
          "(MAELYS_EXEC_IO_TTY), and a terminal of the host's never enters a "
          "sandbox (invariant 21)",
          backend->vtable->name);
      goto fail;
    }
  }

  if (launch.flags & MAELYS_BACKEND_LAUNCH_STATUS_CHANNEL) {
    if (pipe2(status_pipe, O_CLOEXEC) != 0) {
      res = maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                  "creating the status channel: %s",
                                  strerror(errno));
      goto fail;
    }
  }

  /* The descriptors of the launched image: the backend's map, or the payload
   * layout as it is. */
  size_t fd_count = launch.map_count ? launch.map_count : layout.count;
  fds = calloc(fd_count + 1, sizeof *fds);
  if (fds == NULL) {
    res = maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                "out of memory");
    goto fail;
  }
  if (launch.map_count == 0) {
    memcpy(fds, layout.fds, layout.count * sizeof *fds);
  } else {
    for (size_t i = 0; i < launch.map_count; i++) {
      const maelys__fd_map_t* m = &launch.map[i];
      int src = -1;
      if (m->source == MAELYS_BACKEND_FD_PAYLOAD) {
        for (size_t k = 0; k < layout.count; k++)
          if (layout.fds[k].child_fd == m->value)
            src = layout.fds[k].source_fd;
      } else if (m->source == MAELYS_BACKEND_FD_STATUS) {
        src = status_pipe[1];
      } else if (m->source == MAELYS_BACKEND_FD_TERMINAL) {
        src = layout.terminal_child;
      } else if (m->source == MAELYS_BACKEND_FD_LIFELINE) {
        if (lifeline[0] < 0 && pipe2(lifeline, O_CLOEXEC) != 0) {
          res = maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                      "creating the lifeline: %s",
                                      strerror(errno));
          goto fail;
        }
        src = lifeline[0];
      } else {
        src = launch.extra_fds[m->value];
      }
      if (src < 0) {
        res = maelys__executor_fail(
            out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
            "backend '%s' maps child fd %d to a descriptor that does not "
            "exist",
            backend->vtable->name, m->child_fd);
        goto fail;
      }
      fds[i] = (maelys__proc_fd_t){m->child_fd, src};
    }
  }

  if (!(launch.flags & MAELYS_BACKEND_LAUNCH_NO_RLIMITS)) {
    for (int i = 1; i < MAELYS__RLIMIT_COUNT; i++)
      if (plan->rlimits[i].set)
        rlimits[rlimit_count++] = (maelys__proc_rlimit_t){
            maelys__executor_rlimit_native((maelys_executor_rlimit_t)i),
            plan->rlimits[i].soft, plan->rlimits[i].hard};
  }
  uint64_t memory_max = plan->limits[MAELYS_EXECUTOR_LIMIT_MEMORY];
  if ((launch.flags & MAELYS_BACKEND_LAUNCH_MEMORY_CGROUP) && memory_max > 0) {
    res = create_cgroup(e, memory_max, out_error);
    if (res != MAELYS_EXECUTOR_OK)
      goto fail;
  }
  char* const* image_argv = launch.image_set ? launch.argv : e->argv;
  char* empty_env[1] = {NULL};
  char* const* image_env =
      launch.image_set ? (launch.envp ? launch.envp : empty_env) : request->env;
  maelys__proc_spec_t spec = {
      .path = launch.image_set ? launch.path : request->executable,
      .argv = image_argv,
      .envp = image_env,
      .fds = fds,
      .fd_count = fd_count,
      .cwd =
          (launch.flags & MAELYS_BACKEND_LAUNCH_NO_CHDIR) ? NULL : request->cwd,
      .rlimits = rlimits,
      .rlimit_count = rlimit_count,
      .new_process_group = true,
      .die_with_parent =
          (launch.flags & MAELYS_BACKEND_LAUNCH_DIE_WITH_PARENT) != 0,
      .set_credentials = launch.credentials_set,
      .uid = launch.uid,
      .gid = launch.gid,
      .new_pid_namespace =
          (launch.flags & MAELYS_BACKEND_LAUNCH_NEW_PID_NAMESPACE) != 0,
      .new_user_namespace =
          (launch.flags & MAELYS_BACKEND_LAUNCH_NEW_PID_NAMESPACE) != 0 &&
          !maelys__proc_host_root(),
      .map_uid = geteuid(),
      .map_gid = getegid(),
      .image_fd = launch.image_fd,
      .cgroup_fd = e->cgroup.dir_fd,
  };
  char spawn_error[512];
  e->started_real_ns = realtime_ns();
  e->started_mono_ns = uv_hrtime();
  int sr = maelys__proc_spawn(&spec, &e->proc, spawn_error, sizeof spawn_error);
  if (sr != 0) {
    /* Launch errors are not exit codes: the step and errno come back from
     * the child before it could execute anything. */
    res = maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_SPAWN, "cannot start '%s'%s%s: %s",
        spec.path, launch.image_set ? " for " : "",
        launch.image_set ? request->executable : "", spawn_error);
    goto fail;
  }

  /* The child holds its ends now; the host keeps only its own. */
  layout_dispose(&layout);
  if (status_pipe[1] >= 0)
    close(status_pipe[1]);
  if (lifeline[0] >= 0)
    close(lifeline[0]);
  e->lifeline_fd = lifeline[1];
  e->status_fd = status_pipe[0];
  if (e->status_fd >= 0)
    fcntl(e->status_fd, F_SETFL, fcntl(e->status_fd, F_GETFL) | O_NONBLOCK);
  for (size_t i = 0; i < request->channel_count; i++) {
    close(request->channels[i].host_fd);
    request->channels[i].host_fd = -1;
  }
  request->channel_count = 0;
  maelys__executor_launch_dispose(&launch);
  free(fds);

  maelys__executor_plan_retain(plan);
  e->plan = plan;
  executor->live++;
  executor->unfinished++;
  int ur = init_handles(e, executor->loop);
  if (ur != 0) {
    /* The child runs but cannot be watched on this loop: kill it (it never
     * started its payload for the caller) and refuse. */
    maelys__proc_signal_group(e->proc.pid, SIGKILL);
    maelys__proc_signal(&e->proc, SIGKILL);
    maelys__proc_reap_blocking(&e->proc);
    e->main_reaped = true;
    e->released = true;
    executor->live--;
    e->finished = true;
    e->closing = false;
    begin_close(e);
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                 "watching the child on the loop: %s",
                                 uv_strerror(ur));
  }
  uv_poll_start(&e->proc_poll, UV_READABLE, on_proc);
  for (int i = 0; i < 2; i++)
    if (e->terminals[i] != NULL) {
      e->open_handles++; /* one for the relay, closed in begin_close */
      maelys__tty_relay_start(e->terminals[i], on_terminal_done, e);
    }
  if (e->status_poll_init)
    uv_poll_start(&e->status_poll, UV_READABLE, on_status);
  if (e->terminal_poll_init)
    uv_poll_start(&e->terminal_poll, UV_READABLE, on_terminal);
  if (e->receipt_chain != NULL)
    maelys__executor_chain(executor, e->receipt_chain, false)->live++;
  *out_execution = e;
  return MAELYS_EXECUTOR_OK;

fail:
  layout_dispose(&layout);
  if (status_pipe[0] >= 0)
    close(status_pipe[0]);
  if (status_pipe[1] >= 0)
    close(status_pipe[1]);
  if (lifeline[0] >= 0)
    close(lifeline[0]);
  if (lifeline[1] >= 0)
    close(lifeline[1]);
  maelys__cgroup_remove(&e->cgroup);
  for (int i = 0; i < 2; i++)
    if (e->terminals[i] != NULL)
      maelys__tty_relay_close(e->terminals[i], NULL, NULL);
  maelys__executor_launch_dispose(&launch);
  free(fds);
  for (int i = 0; i < 5; i++)
    if (e->streams[i].fd >= 0)
      close(e->streams[i].fd);
  if (e->rendezvous_fd >= 0)
    close(e->rendezvous_fd);
  free(e->executable);
  free_vector(e->argv);
  free(e->receipt_dir);
  free(e->receipt_chain);
  free(e->receipt_context);
  sodium_memzero(e->receipt_key, sizeof e->receipt_key);
  free(e);
  return res;
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
  if (execution->finished && !execution->receipt_pending)
    arm_dispatch(execution);
  return MAELYS_EXECUTOR_OK;
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

  if (e->main_reaped) {
    /* Nothing runs any more. A stop that was in progress owns the result;
     * otherwise there was nothing to stop. */
    if (e->finished || e->stop_phase == STOP_IDLE) {
      s->done = true;
      s->result = e->stop_result_set ? e->stop_result
                                     : MAELYS_EXEC_STOPPED_ALREADY_EXITED;
      if (!e->receipt_pending)
        arm_dispatch(e);
    }
    return MAELYS_EXECUTOR_OK;
  }
  e->stop_requested = true;
  /* Called from outside the loop's callbacks, the loop's cached time may be
   * stale; the budgets count from now. */
  uv_update_time(e->executor->loop);
  switch (e->stop_phase) {
  case STOP_IDLE:
    e->stop_result_set = false;
    if (mode == MAELYS_EXEC_STOP_FORCED) {
      e->stop_phase = STOP_FORCED;
      send_forced(e);
      uv_timer_start(&e->stop_timer, on_stop_timer, e->force_ms, 0);
    } else {
      e->stop_phase = STOP_GRACEFUL;
      e->stop_graceful_only = mode == MAELYS_EXEC_STOP_GRACEFUL;
      send_graceful(e);
      uv_timer_start(&e->stop_timer, on_stop_timer, e->grace_ms, 0);
    }
    break;
  case STOP_GRACEFUL:
    if (mode == MAELYS_EXEC_STOP_FORCED) {
      e->stop_phase = STOP_FORCED;
      send_forced(e);
      uv_timer_start(&e->stop_timer, on_stop_timer, e->force_ms, 0);
    } else if (mode == MAELYS_EXEC_STOP_GRACEFUL_THEN_FORCED) {
      e->stop_graceful_only = false;
    }
    break;
  case STOP_FORCED:
    break;
  case STOP_CONTAINMENT:
    s->done = true;
    s->result = MAELYS_EXEC_STOPPED_CONTAINMENT_FAILED;
    arm_dispatch(e);
    break;
  }
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
  if (!s->present && id == MAELYS_EXEC_STREAM_TERMINAL && e->tty &&
      !e->terminal_settled)
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
    int ur = uv_pipe_init(e->executor->loop, &s->pipe, 0);
    if (ur == 0) {
      s->owner = e;
      s->pipe.data = NULL;
      e->open_handles++;
      s->opened = true;
      ur = uv_pipe_open(&s->pipe, s->fd);
    }
    if (ur != 0)
      return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                   "opening stream %d on the loop: %s", (int)id,
                                   uv_strerror(ur));
  }
  *out_stream = (uv_stream_t*)&s->pipe;
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

/* ------------------------------------------------------------- release */

/* What a background reaper owns: the watch, and what lives as long as the
 * launched image (the lifeline, the cgroup). */
typedef struct reaper {
  maelys__proc_t proc;
  int lifeline_fd;
  maelys__cgroup_t cgroup;
} reaper_t;

static void* reaper_main(void* arg) {
  reaper_t* r = arg;
  maelys__proc_reap_blocking(&r->proc);
  maelys__proc_close(&r->proc);
  if (r->lifeline_fd >= 0)
    close(r->lifeline_fd);
  maelys__cgroup_remove(&r->cgroup);
  free(r);
  return NULL;
}

/* Called at executor destruction for a released child that still runs: a
 * detached thread reaps it when it exits, so it never becomes a zombie. It is
 * not signalled (invariant 6), and its lifeline stays open with the reaper:
 * the host process still lives. */
void maelys__execution_abandon(maelys_execution_t* e);
void maelys__execution_abandon(maelys_execution_t* e) {
  unlink_orphan(e);
  if (!e->main_reaped && e->proc.watch_fd >= 0) {
    reaper_t* r = calloc(1, sizeof *r);
    int fd = r ? fcntl(e->proc.watch_fd, F_DUPFD_CLOEXEC, 0) : -1;
    if (fd >= 0) {
      /* libuv made the pidfd non-blocking; a blocking waitid needs it back. */
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      r->proc = (maelys__proc_t){e->proc.pid, fd};
      r->lifeline_fd = e->lifeline_fd;
      r->cgroup = e->cgroup;
      pthread_attr_t attr;
      pthread_t thread;
      pthread_attr_init(&attr);
      pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
      pthread_attr_setstacksize(&attr, 64 * 1024);
      if (pthread_create(&thread, &attr, reaper_main, r) == 0) {
        e->lifeline_fd = -1;
        e->cgroup.dir_fd = e->cgroup.parent_fd = -1;
        r = NULL;
      } else {
        close(fd);
      }
      pthread_attr_destroy(&attr);
    }
    free(r);
  }
  e->main_reaped = true;
  e->receipt_pending = false;
  begin_close(e);
}

void maelys_execution_release(maelys_execution_t* e) {
  if (e == NULL || e->released)
    return;
  e->released = true;
  e->executor->live--;
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
  while (e->terminal_waiters) {
    terminal_waiter_t* w = e->terminal_waiters;
    e->terminal_waiters = w->next;
    free(w);
  }
  uv_timer_stop(&e->dispatch_timer);
  if (e->finished) {
    begin_close(e);
    return;
  }
  /* Still running: never signalled, never waited for. Any stop in progress
   * is abandoned; the exit watch stays, unreferenced, to reap it. */
  uv_timer_stop(&e->stop_timer);
  e->pending_graceful = false;
  if (e->terminal_poll_init)
    uv_unref((uv_handle_t*)&e->terminal_poll);
  for (int i = 0; i < 5; i++) {
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
  for (int i = 0; i < 2; i++)
    if (e->terminals[i] != NULL)
      maelys__tty_relay_unref(e->terminals[i]);
  e->orphaned = true;
  e->orphan_next = e->executor->orphans;
  e->executor->orphans = e;
}

/* ------------------------------------------------------------ terminal */

maelys_executor_result_t
maelys_execution_wait_terminal(maelys_execution_t* e,
                               maelys_execution_terminal_cb cb, void* data,
                               char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (e == NULL || cb == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "execution and callback are required");
  if (!e->tty)
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
  if (e->terminal_settled)
    arm_dispatch(e);
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
  if (!e->tty || s->taken || (e->terminal_settled && !s->present))
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_STATE, "%s",
        !e->tty    ? "the execution's io mode is not TTY: it has no terminal"
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
  if (s->opened && uv_fileno((uv_handle_t*)&s->pipe, &fd) != 0)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                                 "the terminal stream was closed");
  int r = maelys__terminal_set_size(fd, rows, columns);
  if (r != 0)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                 "resizing the payload's terminal: %s",
                                 strerror(-r));
  return MAELYS_EXECUTOR_OK;
}

/* ---------------------------------------------------------------- ref */

static void set_ref(maelys_execution_t* e, bool ref) {
  if (e == NULL || e->released || e->closing)
    return;
  uv_handle_t* hs[] = {
      (uv_handle_t*)&e->proc_poll,
      (uv_handle_t*)&e->stop_timer,
      (uv_handle_t*)&e->drain_timer,
      (uv_handle_t*)&e->dispatch_timer,
      e->status_poll_init ? (uv_handle_t*)&e->status_poll : NULL,
      e->terminal_poll_init ? (uv_handle_t*)&e->terminal_poll : NULL};
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

int maelys_execution_pid(const maelys_execution_t* e) {
  return e && !e->main_reaped ? e->proc.pid : -1;
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
  if (!e->finished || e->receipt_json == NULL)
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
