/*
 * The private loop thread. mcp-runtime calls its launcher from its own
 * pthreads, and the Executor, like libuv, is used only from the thread that
 * runs its loop. So the host owns one thread with one uv loop and one
 * Executor; each launcher operation becomes a command, queued under a mutex
 * and signalled with uv_async_send (the one libuv call that is safe from any
 * thread), and the calling thread waits on a condition variable, always with
 * a bound.
 *
 * Nothing here is process-wide: no global, no signal handler, no atfork
 * handler. A forked child of the embedder inherits the memory but not the
 * thread, so every entry point first checks that it runs in the process that
 * created the host and refuses otherwise (it never locks, never wakes the
 * parent's loop through the shared eventfd). Descriptors 0-2 are never read,
 * written, closed or duplicated here.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mcpx.h"

typedef struct runner runner_t;

typedef enum cmd_kind { CMD_SPAWN, CMD_STOP, CMD_RELEASE } cmd_kind_t;

typedef struct cmd {
  cmd_kind_t kind;
  struct cmd* next;
  maelys__mcpx_instance_t* instance;
  /* CMD_SPAWN, owned by the command until the loop takes them */
  maelys_executor_plan_t* plan;
  maelys_execution_request_t* request;
  int fd;
  /* CMD_STOP */
  maelys_execution_stop_mode_t mode;
  /* Under the host's mutex. A command whose waiter gave up (abandoned) is
   * finished and freed by the loop thread instead. */
  bool done;
  bool abandoned;
  maelys_executor_result_t result;
  char* error;
} cmd_t;

struct maelys__mcpx_instance {
  maelys_mcp_executor_host_t* owner_host;
  runner_t* host;
  /* Loop thread only. */
  maelys_execution_t* execution;
  maelys__mcpx_instance_t* next;
  maelys__mcpx_instance_t* prev;
  /* Under the host's mutex. */
  bool finished;
  maelys_mcp_executor_exit_t exit;
};

typedef enum host_state {
  HOST_STARTING,
  HOST_RUNNING,
  HOST_FAILED,
  HOST_STOPPED
} host_state_t;

struct runner {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* Under mu. */
  cmd_t* head;
  cmd_t** tail;
  host_state_t state;
  bool shutdown;
  bool orphaned;
  maelys_executor_result_t setup_result;
  char* setup_error;
  /* Loop thread only. */
  uv_loop_t loop;
  uv_async_t async;
  uv_timer_t ack_timer;
  maelys_executor_t* executor;
  cmd_t* acks;
  maelys__mcpx_instance_t* live;
  bool closing;
  maelys_mcp_executor_setup_fn setup;
  void* setup_data;
};

static void deadline_after(struct timespec* ts, unsigned ms) {
  clock_gettime(CLOCK_MONOTONIC, ts);
  ts->tv_sec += ms / 1000;
  ts->tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  }
}

/* Waits on the host's condition until *flag or the deadline; mu held. */
static bool wait_flag(runner_t* host, const bool* flag,
                      const struct timespec* deadline) {
  while (!*flag)
    if (pthread_cond_timedwait(&host->cv, &host->mu, deadline) == ETIMEDOUT)
      return *flag;
  return true;
}

/* ------------------------------------------------------- loop thread side */

static void instance_unlink(maelys__mcpx_instance_t* inst) {
  runner_t* host = inst->host;
  if (inst->prev != NULL)
    inst->prev->next = inst->next;
  else if (host->live == inst)
    host->live = inst->next;
  if (inst->next != NULL)
    inst->next->prev = inst->prev;
  inst->next = inst->prev = NULL;
}

static void on_exit_status(maelys_execution_t* execution,
                           const maelys_execution_status_t* status,
                           void* data) {
  (void)execution;
  maelys__mcpx_instance_t* inst = data;
  maelys_mcp_executor_exit_t exit;
  maelys__mcpx_exit_status(status, &exit);
  pthread_mutex_lock(&inst->host->mu);
  inst->exit = exit;
  inst->finished = true;
  pthread_cond_broadcast(&inst->host->cv);
  pthread_mutex_unlock(&inst->host->mu);
}

/* Local release on the loop: the Executor never signals or waits here. */
static void instance_drop(maelys__mcpx_instance_t* inst) {
  instance_unlink(inst);
  maelys_execution_release(inst->execution);
  free(inst);
}

/* A command whose waiter gave up: the loop undoes what it did. A launch that
 * nobody will ever see is killed (it was never handed to the runtime, so no
 * ladder will run for it) and released. */
static void cleanup_abandoned(cmd_t* c) {
  if (c->kind == CMD_SPAWN && c->result == MAELYS_EXECUTOR_OK &&
      c->instance != NULL) {
    if (c->fd >= 0)
      close(c->fd);
    maelys_execution_stop(c->instance->execution, MAELYS_EXEC_STOP_FORCED, NULL,
                          NULL, NULL);
    instance_drop(c->instance);
  } else if (c->kind == CMD_SPAWN) {
    free(c->instance);
  }
  maelys_executor_plan_destroy(c->plan);
  maelys_execution_request_destroy(c->request);
  free(c->error);
  free(c);
}

static void complete(runner_t* host, cmd_t* c) {
  pthread_mutex_lock(&host->mu);
  bool abandoned = c->abandoned;
  if (!abandoned) {
    c->done = true;
    pthread_cond_broadcast(&host->cv);
  }
  pthread_mutex_unlock(&host->mu);
  if (abandoned)
    cleanup_abandoned(c);
}

static void do_spawn(runner_t* host, cmd_t* c) {
  maelys__mcpx_instance_t* inst = c->instance;
  char* error = NULL;
  maelys_execution_t* execution = NULL;
  c->fd = -1;
  maelys_executor_result_t r = maelys_execution_spawn(
      host->executor, c->plan, c->request, &execution, &error);
  /* The execution keeps its own reference to the plan; the request's channel
   * descriptors were consumed. */
  maelys_executor_plan_destroy(c->plan);
  c->plan = NULL;
  maelys_execution_request_destroy(c->request);
  c->request = NULL;
  if (r != MAELYS_EXECUTOR_OK) {
    c->result = maelys__mcpx_fail_with(&c->error, r, error,
                                       "the Executor refused the launch");
    return;
  }
  inst->execution = execution;
  inst->next = host->live;
  if (host->live != NULL)
    host->live->prev = inst;
  host->live = inst;
  /* Only the protocol descriptor crosses to the runtime: blocking,
   * close-on-exec, a socket (MSG_NOSIGNAL writes cannot raise SIGPIPE), and
   * the Executor keeps no copy, so the runtime sees EOF when the child dies. */
  r = maelys_execution_take_fd(execution, MAELYS_EXEC_STREAM_PROTOCOL, &c->fd,
                               &error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_execution_wait(execution, on_exit_status, inst, &error);
  if (r != MAELYS_EXECUTOR_OK) {
    c->result = maelys__mcpx_fail_with(&c->error, r, error,
                                       "cannot take the protocol descriptor");
    if (c->fd >= 0)
      close(c->fd);
    c->fd = -1;
    maelys_execution_stop(execution, MAELYS_EXEC_STOP_FORCED, NULL, NULL, NULL);
    instance_drop(inst);
    c->instance = NULL;
    return;
  }
  c->result = MAELYS_EXECUTOR_OK;
}

static void on_ack_timer(uv_timer_t* timer) {
  runner_t* host = timer->data;
  /* A release's handles were closed a loop turn ago; their close callbacks
   * (which free what libuv has not closed synchronously) have run. */
  while (host->acks != NULL) {
    cmd_t* c = host->acks;
    host->acks = c->next;
    complete(host, c);
  }
}

static void process(runner_t* host, cmd_t* c) {
  switch (c->kind) {
  case CMD_SPAWN:
    do_spawn(host, c);
    complete(host, c);
    return;
  case CMD_STOP: {
    char* error = NULL;
    maelys_executor_result_t r = maelys_execution_stop(
        c->instance->execution, c->mode, NULL, NULL, &error);
    c->result = r == MAELYS_EXECUTOR_OK
                    ? r
                    : maelys__mcpx_fail_with(&c->error, r, error,
                                             "the Executor refused the stop");
    complete(host, c);
    return;
  }
  case CMD_RELEASE:
    instance_drop(c->instance);
    c->instance = NULL;
    c->result = MAELYS_EXECUTOR_OK;
    c->next = host->acks;
    host->acks = c;
    if (!uv_is_active((uv_handle_t*)&host->ack_timer))
      uv_timer_start(&host->ack_timer, on_ack_timer, 0, 0);
    return;
  }
}

static void teardown(runner_t* host) {
  if (host->closing)
    return;
  host->closing = true;
  on_ack_timer(&host->ack_timer);
  /* The runtime releases every handle before its last launcher reference
   * goes; anything left is released the same local way. */
  while (host->live != NULL)
    instance_drop(host->live);
  if (host->executor != NULL)
    maelys_executor_destroy(host->executor, NULL);
  host->executor = NULL;
  uv_close((uv_handle_t*)&host->async, NULL);
  uv_close((uv_handle_t*)&host->ack_timer, NULL);
}

static void on_async(uv_async_t* async) {
  runner_t* host = async->data;
  pthread_mutex_lock(&host->mu);
  cmd_t* list = host->head;
  host->head = NULL;
  host->tail = &host->head;
  bool shutdown = host->shutdown;
  pthread_mutex_unlock(&host->mu);
  while (list != NULL) {
    cmd_t* c = list;
    list = c->next;
    c->next = NULL;
    if (c->kind == CMD_SPAWN) {
      pthread_mutex_lock(&host->mu);
      bool abandoned = c->abandoned;
      pthread_mutex_unlock(&host->mu);
      if (abandoned) {
        c->result = MAELYS_EXECUTOR_ERR_STATE;
        cleanup_abandoned(c);
        continue;
      }
    }
    process(host, c);
  }
  if (shutdown)
    teardown(host);
}

static void close_any(uv_handle_t* handle, void* arg) {
  (void)arg;
  if (!uv_is_closing(handle))
    uv_close(handle, NULL);
}

static void* host_main(void* arg) {
  runner_t* host = arg;
  char* error = NULL;
  maelys_executor_result_t r = MAELYS_EXECUTOR_OK;
  int uv = uv_loop_init(&host->loop);
  if (uv != 0) {
    r = maelys__mcpx_fail(&error, MAELYS_EXECUTOR_ERR_IO,
                          "cannot create the launcher's loop: %s",
                          uv_strerror(uv));
    pthread_mutex_lock(&host->mu);
    host->setup_result = r;
    host->setup_error = error;
    host->state = HOST_STOPPED;
    pthread_cond_broadcast(&host->cv);
    pthread_mutex_unlock(&host->mu);
    return NULL;
  }
  uv_async_init(&host->loop, &host->async, on_async);
  host->async.data = host;
  uv_timer_init(&host->loop, &host->ack_timer);
  host->ack_timer.data = host;
  char* cause = NULL;
  r = maelys_executor_create(&host->loop, &host->executor, &cause);
  if (r != MAELYS_EXECUTOR_OK)
    maelys__mcpx_fail_with(&error, r, cause, "cannot create the Executor");
  else {
    r = host->setup(host->executor, host->setup_data, &cause);
    if (r != MAELYS_EXECUTOR_OK)
      maelys__mcpx_fail_with(&error, r, cause,
                             "the launcher's backend setup failed");
  }
  host->setup = NULL;
  host->setup_data = NULL;
  pthread_mutex_lock(&host->mu);
  host->setup_result = r;
  host->setup_error = error;
  host->state = r == MAELYS_EXECUTOR_OK ? HOST_RUNNING : HOST_FAILED;
  pthread_cond_broadcast(&host->cv);
  pthread_mutex_unlock(&host->mu);
  if (r != MAELYS_EXECUTOR_OK)
    teardown(host);
  uv_run(&host->loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&host->loop) == UV_EBUSY) {
    uv_walk(&host->loop, close_any, NULL);
    uv_run(&host->loop, UV_RUN_DEFAULT);
    uv_loop_close(&host->loop);
  }
  pthread_mutex_lock(&host->mu);
  host->state = HOST_STOPPED;
  bool orphaned = host->orphaned;
  pthread_cond_broadcast(&host->cv);
  pthread_mutex_unlock(&host->mu);
  if (orphaned) {
    /* Nobody joins: the host is this thread's to free. */
    pthread_mutex_destroy(&host->mu);
    pthread_cond_destroy(&host->cv);
    free(host->setup_error);
    free(host);
  }
  return NULL;
}

/* ------------------------------------------------------------ runners */

static void runner_free(runner_t* runner) {
  pthread_mutex_destroy(&runner->mu);
  pthread_cond_destroy(&runner->cv);
  free(runner->setup_error);
  free(runner);
}

/* Asks the thread to stop and joins it if it does so within the bound;
 * otherwise leaves it to free the runner itself. */
static void runner_stop(runner_t* runner) {
  pthread_mutex_lock(&runner->mu);
  runner->shutdown = true;
  /* A runner whose setup failed has already closed its async handle. */
  bool running = runner->state == HOST_RUNNING;
  pthread_mutex_unlock(&runner->mu);
  if (running)
    uv_async_send(&runner->async);
  pthread_mutex_lock(&runner->mu);
  struct timespec deadline;
  deadline_after(&deadline, MAELYS__MCPX_ACK_MS);
  while (runner->state != HOST_STOPPED)
    if (pthread_cond_timedwait(&runner->cv, &runner->mu, &deadline) ==
        ETIMEDOUT)
      break;
  bool stopped = runner->state == HOST_STOPPED;
  if (!stopped)
    runner->orphaned = true;
  pthread_mutex_unlock(&runner->mu);
  if (stopped) {
    pthread_join(runner->thread, NULL);
    runner_free(runner);
  } else {
    pthread_detach(runner->thread);
  }
}

static maelys_executor_result_t runner_start(maelys_mcp_executor_setup_fn setup,
                                             void* data, runner_t** out,
                                             char** out_error) {
  runner_t* runner = calloc(1, sizeof *runner);
  if (runner == NULL)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                             "out of memory");
  runner->tail = &runner->head;
  runner->state = HOST_STARTING;
  runner->setup = setup;
  runner->setup_data = data;
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&runner->cv, &attr);
  pthread_condattr_destroy(&attr);
  pthread_mutex_init(&runner->mu, NULL);
  /* The thread starts with every signal blocked, so no handler of the
   * embedder's ever runs on it and a process-directed signal goes to one of
   * the embedder's own threads. The Executor resets the mask in children. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int err = pthread_create(&runner->thread, NULL, host_main, runner);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (err != 0) {
    runner_free(runner);
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                             "cannot start the launcher's loop thread: %s",
                             strerror(err));
  }
  /* The setup registers backends, whose probes run real sandboxes under the
   * Executor's own deadlines; this wait lasts as long as the setup. */
  pthread_mutex_lock(&runner->mu);
  while (runner->state == HOST_STARTING)
    pthread_cond_wait(&runner->cv, &runner->mu);
  maelys_executor_result_t r = runner->setup_result;
  char* error = runner->setup_error;
  runner->setup_error = NULL;
  pthread_mutex_unlock(&runner->mu);
  if (r != MAELYS_EXECUTOR_OK) {
    runner_stop(runner);
    if (out_error != NULL && *out_error == NULL)
      *out_error = error;
    else
      free(error);
    return r;
  }
  *out = runner;
  return MAELYS_EXECUTOR_OK;
}

/* ------------------------------------------------------------ the host */

/*
 * The loop thread runs only while the host has work: it is started (and the
 * setup, with its probes, run again) by the first launch, and stopped when
 * the last execution is released. An idle launcher therefore holds no
 * thread and no descriptor, which is what mcp-runtime's suites measure: the
 * open-descriptor count around a launcher's launches must not move.
 *
 * Surprise kept in mind: bwrap's --die-with-parent is PR_SET_PDEATHSIG,
 * which fires when the *thread* that forked it exits, not the process. A
 * sandbox therefore dies with this loop thread. The thread only stops once
 * every execution was released, and the runtime releases after its own
 * ladder (a FORCED rung included), so this only ever takes down a sandbox
 * that already survived a forced stop (invariant 22), never a live one.
 *
 * libuv closes descriptors 0-2 nowhere (uv__close asserts they are above
 * 2), and every descriptor the loop or the Executor creates takes the lowest
 * free number. So while the thread runs, a standard descriptor the embedder
 * left closed is held on /dev/null (close-on-exec) and released with the
 * thread; the embedder's open descriptors 0-2 are never read, written,
 * closed or replaced.
 */
struct maelys_mcp_executor_host {
  atomic_uint refs;
  pid_t owner;
  pthread_mutex_t life;
  /* Under life. */
  runner_t* runner;
  size_t users;
  bool held[3];
  struct stat held_stat[3];
  maelys_mcp_executor_setup_fn setup;
  void* setup_data;
};

bool maelys__mcpx_host_owned(const maelys_mcp_executor_host_t* host) {
  return host != NULL && host->owner == getpid();
}

static void hold_standard_fds(maelys_mcp_executor_host_t* host) {
  for (int fd = 0; fd < 3; fd++) {
    host->held[fd] = false;
    if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
      continue;
    int got = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (got == fd && fstat(fd, &host->held_stat[fd]) == 0)
      host->held[fd] = true;
    else if (got >= 0 && got != fd)
      close(got); /* another thread took the slot first */
  }
}

static void release_standard_fds(maelys_mcp_executor_host_t* host) {
  for (int fd = 0; fd < 3; fd++) {
    struct stat st;
    /* Only our own placeholder, still in place, is closed. */
    if (host->held[fd] && fstat(fd, &st) == 0 &&
        st.st_dev == host->held_stat[fd].st_dev &&
        st.st_ino == host->held_stat[fd].st_ino)
      close(fd);
    host->held[fd] = false;
  }
}

/* One more user of the thread, starting it when there was none. */
static maelys_executor_result_t host_acquire(maelys_mcp_executor_host_t* host,
                                             runner_t** out, char** out_error) {
  pthread_mutex_lock(&host->life);
  maelys_executor_result_t r = MAELYS_EXECUTOR_OK;
  if (host->runner == NULL) {
    hold_standard_fds(host);
    r = runner_start(host->setup, host->setup_data, &host->runner, out_error);
    if (r != MAELYS_EXECUTOR_OK)
      release_standard_fds(host);
  }
  if (r == MAELYS_EXECUTOR_OK) {
    host->users++;
    *out = host->runner;
  }
  pthread_mutex_unlock(&host->life);
  return r;
}

/* One fewer; the last stops the thread (bounded). */
static void host_unuse(maelys_mcp_executor_host_t* host) {
  pthread_mutex_lock(&host->life);
  if (host->users > 0 && --host->users == 0 && host->runner != NULL) {
    runner_stop(host->runner);
    host->runner = NULL;
    release_standard_fds(host);
  }
  pthread_mutex_unlock(&host->life);
}

maelys_executor_result_t
maelys_mcp_executor_host_create(maelys_mcp_executor_setup_fn setup, void* data,
                                maelys_mcp_executor_host_t** out_host,
                                char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (out_host == NULL || setup == NULL)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "a host needs a setup function and out_host");
  *out_host = NULL;
  maelys_mcp_executor_host_t* host = calloc(1, sizeof *host);
  if (host == NULL)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                             "out of memory");
  atomic_init(&host->refs, 1);
  host->owner = getpid();
  host->setup = setup;
  host->setup_data = data;
  pthread_mutex_init(&host->life, NULL);
  /* The setup runs once now, so that a host whose backends cannot enforce
   * what it promises fails at creation (a failed hook), not at a launch. */
  runner_t* runner = NULL;
  maelys_executor_result_t r = host_acquire(host, &runner, out_error);
  if (r != MAELYS_EXECUTOR_OK) {
    pthread_mutex_destroy(&host->life);
    free(host);
    return r;
  }
  host_unuse(host);
  *out_host = host;
  return MAELYS_EXECUTOR_OK;
}

void maelys_mcp_executor_host_retain(maelys_mcp_executor_host_t* host) {
  if (host != NULL)
    atomic_fetch_add(&host->refs, 1);
}

void maelys_mcp_executor_host_release(maelys_mcp_executor_host_t* host) {
  if (host == NULL || atomic_fetch_sub(&host->refs, 1) != 1)
    return;
  /* In a forked child the thread does not exist and a mutex may have been
   * held at the fork: the memory is left as it is (the child's copy). */
  if (!maelys__mcpx_host_owned(host))
    return;
  pthread_mutex_lock(&host->life);
  runner_t* runner = host->runner;
  host->runner = NULL;
  pthread_mutex_unlock(&host->life);
  /* Executions still unreleased (a runtime that broke the contract) are
   * released locally by the stopping thread. */
  if (runner != NULL) {
    runner_stop(runner);
    release_standard_fds(host);
  }
  pthread_mutex_destroy(&host->life);
  free(host);
}

/* ------------------------------------------------------------ commands */

static maelys_executor_result_t
refuse_foreign(const maelys_mcp_executor_host_t* host, char** out_error) {
  return maelys__mcpx_fail(
      out_error, MAELYS_EXECUTOR_ERR_STATE,
      "the maelys-executor launcher belongs to process %d; a forked child "
      "cannot use it (its loop thread was not forked)",
      (int)host->owner);
}

static maelys_executor_result_t post(runner_t* runner, cmd_t* c,
                                     char** out_error) {
  pthread_mutex_lock(&runner->mu);
  if (runner->state != HOST_RUNNING || runner->shutdown) {
    pthread_mutex_unlock(&runner->mu);
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                             "the launcher's loop thread is not running");
  }
  c->next = NULL;
  *runner->tail = c;
  runner->tail = &c->next;
  pthread_mutex_unlock(&runner->mu);
  uv_async_send(&runner->async);
  return MAELYS_EXECUTOR_OK;
}

/* Waits for the command within `ms`; true when done (the caller then owns
 * it again), false when abandoned to the loop. */
static bool await(runner_t* runner, cmd_t* c, unsigned ms) {
  struct timespec deadline;
  deadline_after(&deadline, ms);
  pthread_mutex_lock(&runner->mu);
  bool done = wait_flag(runner, &c->done, &deadline);
  if (!done)
    c->abandoned = true;
  pthread_mutex_unlock(&runner->mu);
  return done;
}

maelys_executor_result_t maelys__mcpx_host_spawn(
    maelys_mcp_executor_host_t* host, maelys_executor_plan_t** plan,
    maelys_execution_request_t** request, unsigned timeout_ms,
    maelys__mcpx_instance_t** out_instance, int* out_fd, char** out_error) {
  maelys_executor_plan_t* p = *plan;
  maelys_execution_request_t* q = *request;
  *plan = NULL;
  *request = NULL;
  maelys_executor_result_t r;
  cmd_t* c = NULL;
  maelys__mcpx_instance_t* inst = NULL;
  runner_t* runner = NULL;
  if (!maelys__mcpx_host_owned(host)) {
    r = refuse_foreign(host, out_error);
    goto fail;
  }
  c = calloc(1, sizeof *c);
  inst = calloc(1, sizeof *inst);
  if (c == NULL || inst == NULL) {
    r = maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                          "out of memory");
    goto fail;
  }
  r = host_acquire(host, &runner, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    goto fail;
  inst->owner_host = host;
  inst->host = runner;
  c->kind = CMD_SPAWN;
  c->instance = inst;
  c->plan = p;
  c->request = q;
  c->fd = -1;
  p = NULL;
  q = NULL;
  r = post(runner, c, out_error);
  if (r != MAELYS_EXECUTOR_OK) {
    p = c->plan;
    q = c->request;
    host_unuse(host);
    goto fail;
  }
  if (timeout_ms == 0)
    timeout_ms = MAELYS__MCPX_DEFAULT_SPAWN_MS;
  if (!await(runner, c, timeout_ms)) {
    /* The loop owns the command now: a launch it still makes is stopped by
     * force and released there, never handed out. */
    host_unuse(host);
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                             "the launch did not complete within its %u ms "
                             "spawn budget and was abandoned",
                             timeout_ms);
  }
  r = c->result;
  if (r != MAELYS_EXECUTOR_OK) {
    if (out_error != NULL && *out_error == NULL) {
      *out_error = c->error;
      c->error = NULL;
    }
    free(c->error);
    free(c->instance);
    free(c);
    host_unuse(host);
    return r;
  }
  *out_instance = c->instance;
  *out_fd = c->fd;
  free(c);
  return MAELYS_EXECUTOR_OK;
fail:
  free(c);
  free(inst);
  maelys_executor_plan_destroy(p);
  maelys_execution_request_destroy(q);
  return r;
}

maelys_executor_result_t
maelys__mcpx_instance_wait(maelys__mcpx_instance_t* inst, unsigned timeout_ms,
                           maelys_mcp_executor_exit_t* out, char** out_error) {
  out->exited = 0;
  out->exit_code = 0;
  out->term_signal = 0;
  if (inst == NULL)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "no execution to wait for");
  if (!maelys__mcpx_host_owned(inst->owner_host))
    return refuse_foreign(inst->owner_host, out_error);
  runner_t* runner = inst->host;
  struct timespec deadline;
  deadline_after(&deadline, timeout_ms);
  pthread_mutex_lock(&runner->mu);
  /* The status was recorded by the Executor's wait callback when the child
   * (through the sandbox: the payload's own status) ended; it is replayed to
   * every later wait. */
  if (wait_flag(runner, &inst->finished, &deadline))
    *out = inst->exit;
  pthread_mutex_unlock(&runner->mu);
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys__mcpx_instance_stop(maelys__mcpx_instance_t* inst,
                           maelys_mcp_executor_stop_t stop, char** out_error) {
  maelys_execution_stop_mode_t mode;
  maelys_executor_result_t r = maelys__mcpx_stop_mode(stop, &mode, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  if (inst == NULL)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "no execution to stop");
  if (!maelys__mcpx_host_owned(inst->owner_host))
    return refuse_foreign(inst->owner_host, out_error);
  runner_t* runner = inst->host;
  cmd_t* c = calloc(1, sizeof *c);
  if (c == NULL)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                             "out of memory");
  c->kind = CMD_STOP;
  c->instance = inst;
  c->mode = mode;
  r = post(runner, c, out_error);
  if (r != MAELYS_EXECUTOR_OK) {
    free(c);
    return r;
  }
  /* Waits for the Executor to have taken the stop, not for the child: the
   * signal is sent (or the kill started) when this returns. */
  if (!await(runner, c, MAELYS__MCPX_ACK_MS))
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                             "the launcher's loop did not take the stop "
                             "within %u ms (it stays queued)",
                             MAELYS__MCPX_ACK_MS);
  r = c->result;
  if (r != MAELYS_EXECUTOR_OK && out_error != NULL && *out_error == NULL) {
    *out_error = c->error;
    c->error = NULL;
  }
  free(c->error);
  free(c);
  return r;
}

void maelys__mcpx_instance_release(maelys__mcpx_instance_t* inst) {
  if (inst == NULL)
    return;
  maelys_mcp_executor_host_t* host = inst->owner_host;
  /* A forked child must not touch the parent's loop: its copy is dropped. */
  if (!maelys__mcpx_host_owned(host))
    return;
  runner_t* runner = inst->host;
  cmd_t* c = calloc(1, sizeof *c);
  if (c != NULL) {
    c->kind = CMD_RELEASE;
    c->instance = inst;
    if (post(runner, c, NULL) != MAELYS_EXECUTOR_OK) {
      free(c);
    } else if (await(runner, c, MAELYS__MCPX_ACK_MS)) {
      free(c->error);
      free(c);
    }
  }
  /* Without memory for the command the execution stays with the loop, which
   * releases it when it stops. Either way this user is gone. */
  host_unuse(host);
}
