/*
 * Reaping: the exit watch on the launched image's pidfd, finishing (the
 * final status, stop results, the receipt rendered on the loop and written
 * on the thread pool) and the background reapers of released executions
 * that still run when their executor is destroyed (invariant 6).
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

#include <assert.h>

#include "execution-internal.h"

/* How long the status channel may stay open after the launcher exited before
 * the execution is finalised anyway (a killed launcher's sandbox child dies
 * with it, asynchronously). */
#define STATUS_DRAIN_MS 2000

/* A released execution leaves its executor's orphan list: it finished, or
 * a reaper took its child. */
static void unlink_orphan(maelys_execution_t* e) {
  if (e->owner != OWNER_ORPHAN)
    return;
  maelys__executor_orphan_done(e->executor, &e->orphan);
  e->owner = OWNER_RELEASED;
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
  free(req);
  e->receipt_work = NULL;
  e->phase = PHASE_DONE;
  if (e->owner != OWNER_CALLER)
    maelys__exec_begin_close(e);
  else
    maelys__exec_arm_dispatch(e);
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
  if (!maelys__exec_wrapped(e)) {
    if (main_signaled) {
      s->outcome = MAELYS_EXEC_OUTCOME_SIGNALED;
      s->term_signal = main_signal;
    } else {
      s->outcome = MAELYS_EXEC_OUTCOME_EXITED;
      s->exit_code = main_code;
    }
  } else if (e->report == REPORT_EXIT) {
    /* The payload's own status, as the tree root reported it. */
    if (e->term_signal > 0) {
      s->outcome = MAELYS_EXEC_OUTCOME_SIGNALED;
      s->term_signal = e->term_signal;
    } else {
      s->outcome = MAELYS_EXEC_OUTCOME_EXITED;
      s->exit_code = e->exit_code;
    }
  } else if (e->report == REPORT_LAUNCH_FAILED) {
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
  } else if (main_signaled && e->stop != STOP_IDLE) {
    /* A stop killed the launcher before the payload started: the stop's
     * signal ended it. */
    s->outcome = MAELYS_EXEC_OUTCOME_SIGNALED;
    s->term_signal = main_signal;
  } else if (main_signaled) {
    /* Something outside killed the launcher before the payload started:
     * the payload never ran, so this is a failed launch. Reported as the
     * payload's death by that signal, it read as if the payload had been
     * killed (the CLI exited 137 and said nothing). */
    s->outcome = MAELYS_EXEC_OUTCOME_LAUNCH_FAILED;
    snprintf(e->status_step, sizeof e->status_step, "sandbox-setup");
    s->launch_errno = 0;
    const char* name = sigabbrev_np(main_signal);
    e->status_message = maelys__executor_asprintf(
        "the sandbox launcher was killed by signal %d%s%s%s before the "
        "payload started",
        main_signal, name != NULL ? " (SIG" : "", name != NULL ? name : "",
        name != NULL ? ")" : "");
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
  switch (e->stop) {
  case STOP_GRACEFUL_ONLY:
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

/* A stop in progress when the image ended completes with how far it got. */
static void settle_stop(maelys_execution_t* e) {
  switch (e->stop) {
  case STOP_GRACEFUL_ONLY:
  case STOP_GRACEFUL:
    maelys__exec_complete_stoppers(e, MAELYS_EXEC_STOPPED_GRACEFUL);
    break;
  case STOP_FORCED:
    maelys__exec_complete_stoppers(e, MAELYS_EXEC_STOPPED_FORCED);
    break;
  case STOP_CONTAINMENT:
    e->stop_result = MAELYS_EXEC_STOPPED_FORCED;
    break;
  default:
    break;
  }
}

/* The receipt document, rendered on the loop's thread. */
static void render_receipt(maelys_execution_t* e) {
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
      e->stop_result != 0 ? e->stop_result : MAELYS_EXEC_STOPPED_ALREADY_EXITED;
  in.user_seconds =
      (double)e->usage_user.tv_sec + (double)e->usage_user.tv_usec / 1e6;
  in.system_seconds =
      (double)e->usage_system.tv_sec + (double)e->usage_system.tv_usec / 1e6;
  in.max_rss_kib = e->usage_max_rss_kib;
  in.plan = e->plan;
  in.memory_peak_bytes = e->memory_peak;
  in.identity_set = e->identity_set;
  in.identity_uid = e->identity_uid;
  in.identity_gid = e->identity_gid;
  in.denials = e->denials;
  in.context_json = e->receipt_context;
  in.secret_key = e->receipt_signing ? e->receipt_key : NULL;
  /* The chain links receipts in the order executions end, on the loop's
   * thread: a receipt names the digest of the one rendered before it. */
  const maelys__receipt_chain_t* chain =
      e->receipt_chain
          ? maelys__executor_chain(e->executor, e->receipt_chain, false)
          : NULL;
  if (chain != NULL) {
    in.chain_id = chain->id;
    in.chain_sequence = chain->sequence + 1;
    in.chain_previous = chain->previous[0] ? chain->previous : NULL;
  }
  e->receipt_json = maelys__executor_receipt_render(&in);
  if (chain != NULL)
    maelys__executor_chain_link(e->executor, e->receipt_chain, e->receipt_json);
}

void maelys__exec_finish(maelys_execution_t* e) {
  if (maelys__exec_finished(e))
    return;
  /* A master sent before the payload ended is offered even when the exit
   * was seen first on the loop. */
  maelys__exec_receive_terminal(e);
  maelys__exec_settle_terminal(e);
  e->phase = PHASE_DONE;
  uv_timer_stop(&e->stop_timer);
  uv_timer_stop(&e->drain_timer);
  if (e->status_poll_init)
    uv_poll_stop(&e->status_poll);
  compute_status(e);
  settle_stop(e);
  maelys__proc_close(&e->root);
  unlink_orphan(e);
  render_receipt(e);
  if (e->receipt_dir != NULL && e->receipt_json != NULL) {
    /* Allocated for the write only: most of an execution's life has none. */
    e->receipt_work = malloc(sizeof *e->receipt_work);
    if (e->receipt_work != NULL) {
      e->receipt_work->data = e;
      if (uv_queue_work(e->executor->loop, e->receipt_work, on_receipt_work,
                        on_receipt_done) == 0) {
        e->phase = PHASE_WRITING;
        return;
      }
      free(e->receipt_work);
      e->receipt_work = NULL;
    }
    e->receipt_errno = EIO;
  }
  if (e->owner != OWNER_CALLER)
    maelys__exec_begin_close(e);
  else
    maelys__exec_arm_dispatch(e);
}

static void on_drain_timeout(uv_timer_t* timer) {
  maelys__exec_finish(timer->data);
}

/* ----------------------------------------------------------- exit watch */

/* What follows an exit once the turn's budget allows it: the launch's
 * resources released, the status channel drained, the execution finished
 * (its status, stop results and receipt). */
static void after_exit(maelys_execution_t* e) {
  maelys__exec_release_launch(e);
  if (maelys__exec_wrapped(e) && !e->status_eof &&
      maelys__exec_read_status(e)) {
    e->status_eof = true;
    uv_poll_stop(&e->status_poll);
  }
  if (!maelys__exec_drained(e)) {
    /* Bounded: a writer that outlives the launcher (only possible without
     * a pid namespace) cannot hold the execution open. */
    uv_timer_start(&e->drain_timer, on_drain_timeout, STATUS_DRAIN_MS, 0);
    if (e->owner != OWNER_CALLER)
      uv_unref((uv_handle_t*)&e->drain_timer);
    return;
  }
  maelys__exec_finish(e);
}

static void on_reap_idle(uv_idle_t* idle) {
  maelys_execution_t* e = idle->data;
  if (!maelys__executor_reap_budget(e->executor))
    return; /* the next turn */
  uv_idle_stop(idle);
  after_exit(e);
}

void maelys__exec_on_proc(uv_poll_t* poll, int status, int events) {
  maelys_execution_t* e = poll->data;
  (void)status;
  (void)events;
  int ws = 0;
  struct rusage usage;
  memset(&usage, 0, sizeof usage);
  int r = maelys__proc_reap(&e->proc, &ws, &usage);
  if (r == 0)
    return;
  e->usage_user = usage.ru_utime;
  e->usage_system = usage.ru_stime;
  e->usage_max_rss_kib = usage.ru_maxrss;
  /* r < 0 cannot happen for a pidfd we own; treat it as an exit so the
   * execution can never hang on it. The exit is taken (and timed) now; what
   * follows it waits for a turn with budget left (see
   * maelys__executor_reap_budget): thousands of executions stopped at once
   * end in the same turn, and finishing them all there held the loop for
   * 100 ms (N=500, ci/bench --only many: 340 exits in one turn). */
  e->phase = PHASE_DRAINING;
  e->wait_status = r > 0 ? ws : 0;
  e->ended_real_ns = maelys__exec_realtime_ns();
  e->ended_mono_ns = uv_hrtime();
  uv_poll_stop(&e->proc_poll);
  if (maelys__executor_reap_budget(e->executor)) {
    after_exit(e);
    return;
  }
  uv_idle_start(&e->reap_idle, on_reap_idle);
  if (e->owner != OWNER_CALLER)
    uv_unref((uv_handle_t*)&e->reap_idle);
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
void maelys__execution_abandon(maelys_execution_t* e) {
  unlink_orphan(e);
  if (!maelys__exec_reaped(e) && e->proc.watch_fd >= 0) {
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
  /* An orphan never reaches PHASE_WRITING (finish() takes it off the
   * list first), so closing starts now. */
  assert(e->phase != PHASE_WRITING);
  maelys__exec_begin_close(e);
}
