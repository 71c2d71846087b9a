/*
 * The execution handle's private parts, shared by the files that implement
 * it (execution.c: the handle, its callbacks, streams and release;
 * execution-check.c: spawn's checks and its dry run; execution-spawn.c;
 * execution-status.c: the status channel;
 * execution-stop.c: the stop forms and their escalation; execution-reap.c:
 * the exit watch, finishing, receipts and background reapers;
 * execution-terminal.c: the payload's pseudo-terminal).
 *
 * An execution's life is four small state machines.
 *
 * phase -- the launched image and what follows it:
 *
 *   spawn ──> RUNNING ──pidfd readable: reaped──> DRAINING
 *               │                                    │ the status channel and
 *               │                                    │ the terminal relays
 *               │                                    │ ended, or
 * STATUS_DRAIN_MS │                                    v │        finish():
 * final status, stop results, receipt rendered │              │ a receipt
 * directory          │ none, or the │              v │ pool refused │ WRITING
 * ──written (thread pool)──>│ │                                             v
 *               │                                            DONE
 *               │
 *   RUNNING, DRAINING or DONE ──begin_close()──> CLOSING ──last close
 *   callback──> freed. begin_close() runs when a finished execution is
 *   released (or finishes released), when its executor is destroyed while
 *   its released child still runs (abandon: a reaper thread takes the
 *   child), or when spawn cannot watch the child it started. It waits for
 *   WRITING to end.
 *
 * owner -- who holds the handle: CALLER until maelys_execution_release();
 *   then RELEASED, or ORPHAN while the child still runs (on the executor's
 *   orphan list, unref'd, until finish() or abandon make it RELEASED).
 *   Callbacks are delivered only to the CALLER.
 *
 * stop -- the stop forms (invariant 7):
 *
 *   IDLE ──graceful──> GRACEFUL_ONLY ──grace──> IDLE (STILL_RUNNING)
 *   IDLE ──graceful then forced──> GRACEFUL ──grace──> FORCED
 *   IDLE ──forced──> FORCED ──force budget──> CONTAINMENT (reported, never
 *   waited for); a stronger form asked for later moves forward, never back.
 *
 * terminal -- the payload's pseudo-terminal (MAELYS_EXEC_IO_TTY):
 *
 *   NONE: another io mode, no terminal.
 *   AWAITED ──the sandbox sent the master over the rendezvous (checked), or a
 *   message without one, end of file, a failed socket, or finish()──>
 *   SETTLED: the TERMINAL stream is present or never will be; terminal
 *   waiters are delivered from then on (before stops and waits).
 */
#ifndef MAELYS_EXECUTION_INTERNAL_H
#define MAELYS_EXECUTION_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>

#include "cgroup.h"
#include "denials.h"
#include "internal.h"
#include "proc.h"
#include "tty-relay.h"

/* execution-userdb.c: the user-database service of a launch. Answers the
 * questions the image asks on `fd` (consumed) from a thread of its own,
 * until the image closes its end: 0, or a negative errno (then the
 * descriptor is closed, and the image reads end-of-file). */
int maelys__userdb_start(int fd);

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

/* stdin, stdout, stderr, the protocol and the terminal
 * (maelys_exec_stream_t). */
#define MAELYS__EXEC_STREAMS 5

struct stream;

/* A stream's libuv handle, allocated when the host first asks for the
 * stream: most executions use one or two of their five, and 1000 of them
 * must stay small. The handle's data field is the caller's, so its close
 * callback finds the slot through `slot`. */
typedef struct stream_pipe {
  uv_pipe_t pipe;
  struct stream* slot;
} stream_pipe_t;

typedef struct stream {
  struct maelys_execution* owner;
  bool present;
  bool opened;
  bool taken;
  bool closing;
  int fd;
  stream_pipe_t* handle; /* while opened, until its close callback */
} stream_t;

typedef enum exec_phase {
  PHASE_RUNNING,
  PHASE_DRAINING,
  PHASE_WRITING,
  PHASE_DONE,
  PHASE_CLOSING
} exec_phase_t;

typedef enum exec_owner {
  OWNER_CALLER,
  OWNER_ORPHAN,
  OWNER_RELEASED
} exec_owner_t;

/* In the order a stop moves through them. */
typedef enum stop_phase {
  STOP_IDLE,
  STOP_GRACEFUL_ONLY,
  STOP_GRACEFUL, /* then forced */
  STOP_FORCED,
  STOP_CONTAINMENT
} stop_phase_t;

typedef enum terminal_phase {
  TERMINAL_NONE,
  TERMINAL_AWAITED,
  TERMINAL_SETTLED
} terminal_phase_t;

/* The first terminal line of the status channel (invariant 19: only that
 * one counts). */
typedef enum exec_report {
  REPORT_NONE,
  REPORT_EXIT,         /* the payload's own status */
  REPORT_LAUNCH_FAILED /* the payload could not be started */
} exec_report_t;

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

  exec_phase_t phase;
  exec_owner_t owner;
  stop_phase_t stop;
  terminal_phase_t terminal;

  maelys__proc_t proc;
  /* The host's end of the lifeline (see MAELYS_BACKEND_FD_LIFELINE), kept
   * until the launched image is reaped, or -1. */
  int lifeline_fd;
  maelys__cgroup_t cgroup; /* the execution's memory cgroup, if any */
  int64_t memory_peak;     /* bytes, -1 when unknown */
  bool identity_set;
  uint32_t identity_uid, identity_gid;
  maelys__denials_t* denials; /* allocated at the first denial report */
  int wait_status;
  /* The image's CPU time and peak RSS from its reaping (of the rusage, only
   * what the receipt records: 1000 executions hold 120 KB less). */
  struct timeval usage_user, usage_system;
  long usage_max_rss_kib;
  maelys__proc_t root;
  bool ready;
  bool pending_graceful;

  int status_fd;
  bool status_eof;
  char* line; /* a line a read left unfinished (execution-status.c) */
  size_t line_len;
  bool line_overflow;
  char* diag; /* allocated at the first diagnostic line: most executions
               * never have one, and 1000 of them must stay small */
  size_t diag_len;
  exec_report_t report;
  int exit_code, term_signal;            /* REPORT_EXIT */
  maelys_backend_event_t* launch_failed; /* REPORT_LAUNCH_FAILED */

  stream_t streams[MAELYS__EXEC_STREAMS];
  /* The host's terminals a confined payload writes to, through relays
   * (invariant 21): [0] its stdout, [1] its stderr. */
  maelys__tty_relay_t* terminals[2];

  /* The core's end of the terminal rendezvous (-1 in another io mode;
   * only read while AWAITED), the size to set once the master comes, and
   * who waits for it. */
  int rendezvous_fd;
  bool resize_pending;
  unsigned resize_rows, resize_columns;
  terminal_waiter_t* terminal_waiters;
  uv_poll_t* terminal_poll; /* MAELYS_EXEC_IO_TTY only, else NULL */

  maelys_execution_status_t status; /* final from PHASE_WRITING on */
  char status_step[32];
  char* status_message;

  bool stop_requested; /* recorded in the receipt */
  /* The result a stop reports (0: none yet, the execution ran to its end). */
  maelys_execution_stop_result_t stop_result;

  waiter_t* waiters;
  stopper_t* stoppers;

  uv_poll_t proc_poll;
  uv_poll_t status_poll;
  uv_timer_t stop_timer;
  uv_timer_t drain_timer;
  uv_timer_t dispatch_timer;
  /* Finishes an exit the loop turn's budget deferred (execution-reap.c). */
  uv_idle_t reap_idle;
  bool status_poll_init;
  int open_handles;
  maelys__orphan_t orphan; /* the executor's list node while ORPHAN */

  int64_t started_real_ns, ended_real_ns;
  uint64_t started_mono_ns, ended_mono_ns;

  char* receipt_json;
  char* receipt_path;
  uv_work_t* receipt_work; /* while the receipt is written */
  int receipt_errno;
  /* Receipt evidence, copied at spawn (receipt-evidence.c). */
  char* receipt_chain;
  char* receipt_context;
  bool receipt_signing;
  unsigned char receipt_key[64];
};

/* ------------------------------------------------ shared between the files */

/* The image was reaped (or handed to a reaper): nothing may be signalled
 * through its pid any more. */
static inline bool maelys__exec_reaped(const maelys_execution_t* e) {
  return e->phase != PHASE_RUNNING;
}
/* The image was reaped and what follows its exit is no longer waiting for a
 * loop turn with budget left (see maelys__exec_on_proc): the execution may
 * finish once the launch is drained. */
static inline bool maelys__exec_exit_taken(const maelys_execution_t* e) {
  return maelys__exec_reaped(e) &&
         !uv_is_active((const uv_handle_t*)&e->reap_idle);
}
/* The status is final (PHASE_WRITING or later). */
static inline bool maelys__exec_finished(const maelys_execution_t* e) {
  return e->phase >= PHASE_WRITING;
}

/* execution.c */
int64_t maelys__exec_realtime_ns(void);
void maelys__exec_free_vector(char** v);
/* The launched image is gone: closes the lifeline, reads the memory peak and
 * removes the execution's cgroup. */
void maelys__exec_release_launch(maelys_execution_t* e);
/* Starts closing every handle; memory goes with the last close callback. */
void maelys__exec_begin_close(maelys_execution_t* e);
/* Delivers completed stops and, once finished, the waits, from a zero
 * timer (never from inside the caller's call). */
void maelys__exec_arm_dispatch(maelys_execution_t* e);

/* execution-stop.c */
bool maelys__exec_wrapped(const maelys_execution_t* e);
void maelys__exec_send_forced(maelys_execution_t* e);
void maelys__exec_signal_tree(maelys_execution_t* e);
void maelys__exec_complete_stoppers(maelys_execution_t* e,
                                    maelys_execution_stop_result_t result);

/* execution-status.c */
/* Keeps a diagnostic line for the status message of a failed launch. */
void maelys__exec_append_diag(maelys_execution_t* e, const char* text,
                              size_t len);
bool maelys__exec_read_status(maelys_execution_t* e);
bool maelys__exec_drained(const maelys_execution_t* e);
void maelys__exec_on_status(uv_poll_t* poll, int status, int events);
void maelys__exec_on_terminal_done(maelys__tty_relay_t* relay, void* data);

/* execution-check.c */
/* The arguments of spawn and of its dry run. */
maelys_executor_result_t maelys__exec_check_arguments(
    maelys_executor_t* executor, const maelys_executor_plan_t* plan,
    const maelys_execution_request_t* request, char** out_error);
/* Every check spawn makes before it creates anything; a dry run has no side
 * effect. Otherwise *out_receipt_dirfd is the receipt directory opened (or
 * -1 without one): the caller owns it. */
maelys_executor_result_t maelys__exec_preflight(
    maelys_executor_t* executor, const maelys_executor_plan_t* plan,
    const maelys_execution_request_t* request, bool dry_run,
    int* out_receipt_dirfd, const maelys__backend_entry_t** out_backend,
    char** out_error);

/* execution-terminal.c */
/* Takes the master if the sandbox sent it; settles the terminal. */
void maelys__exec_receive_terminal(maelys_execution_t* e);
/* The master arrived, or never will: stop watching the rendezvous. */
void maelys__exec_settle_terminal(maelys_execution_t* e);
void maelys__exec_on_terminal(uv_poll_t* poll, int status, int events);

/* execution-reap.c */
void maelys__exec_finish(maelys_execution_t* e);
void maelys__exec_on_proc(uv_poll_t* poll, int status, int events);

#endif /* MAELYS_EXECUTION_INTERNAL_H */
