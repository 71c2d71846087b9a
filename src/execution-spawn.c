/*
 * Spawn: every check that can refuse before anything starts, the payload's
 * descriptor layout, the backend's launch description, the status channel,
 * the lifeline and the cgroup, then one clone() and the loop handles.
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
#include "terminal.h"

/* ---------------------------------------------------------------- spawn */

static char** copy_vector(char* const* v) {
  size_t n = 0;
  while (v[n] != NULL)
    n++;
  char** out = calloc(n + 1, sizeof *out);
  if (out == NULL)
    return NULL;
  for (size_t i = 0; i < n; i++)
    if ((out[i] = maelys__executor_strdup(v[i])) == NULL) {
      maelys__exec_free_vector(out);
      return NULL;
    }
  return out;
}

typedef struct layout {
  maelys__proc_fd_t
      fds[MAELYS_BACKEND_PAYLOAD_FD_MAX]; /* payload descriptors */
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
    if (add_payload_fd(l, r->channels[i].child_fd, r->channels[i].host_fd) != 0)
      return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                                   "the payload layout has no room for the "
                                   "channel at child fd %d",
                                   r->channels[i].child_fd);
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

/* The execution's memory cgroup, under the parent the executor found (once,
 * on first use). */
static maelys_executor_result_t
create_cgroup(maelys_execution_t* e, uint64_t memory_max, char** out_error) {
  maelys__cgroup_parent_t* parent =
      maelys__executor_memory_cgroups(e->executor);
  if (parent == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  char error[512];
  int r = maelys__cgroup_create(parent, e->id, memory_max, &e->cgroup, error,
                                sizeof error);
  if (r == 0)
    return MAELYS_EXECUTOR_OK;
  return maelys__executor_fail(out_error,
                               r == -ENOTSUP ? MAELYS_EXECUTOR_ERR_UNSUPPORTED
                                             : MAELYS_EXECUTOR_ERR_IO,
                               "the memory ceiling of %llu bytes cannot be "
                               "enforced: %s",
                               (unsigned long long)memory_max, error);
}

static int init_handles(maelys_execution_t* e, uv_loop_t* loop) {
  uv_handle_t* hs[] = {
      (uv_handle_t*)&e->stop_timer, (uv_handle_t*)&e->drain_timer,
      (uv_handle_t*)&e->dispatch_timer, (uv_handle_t*)&e->reap_idle};
  uv_timer_init(loop, &e->stop_timer);
  uv_timer_init(loop, &e->drain_timer);
  uv_timer_init(loop, &e->dispatch_timer);
  uv_idle_init(loop, &e->reap_idle);
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
    /* Allocated in a terminal session only: most executions have none. */
    e->terminal_poll = malloc(sizeof *e->terminal_poll);
    if (e->terminal_poll == NULL)
      return UV_ENOMEM;
    r = uv_poll_init(loop, e->terminal_poll, e->rendezvous_fd);
    if (r != 0) {
      free(e->terminal_poll);
      e->terminal_poll = NULL;
      return r;
    }
    e->terminal_poll->data = e;
    e->open_handles++;
  }
  return 0;
}

/* What a spawn holds until the child has its descriptors; released by
 * spawn_dispose() on success (what the child took and the host keeps was
 * moved out first) and on failure alike. */
typedef struct spawn {
  layout_t layout;
  maelys_backend_launch_t launch;
  int payload_fds[MAELYS_BACKEND_PAYLOAD_FD_MAX];
  int status_pipe[2];
  int lifeline[2];
  int cgroup_procs;       /* MAELYS_BACKEND_FD_CGROUP, when the image joins */
  int userdb[2];          /* MAELYS_BACKEND_FD_USERDB: [0] ours, [1] its */
  maelys__proc_fd_t* fds; /* the launched image's descriptors */
  size_t fd_count;
  maelys__proc_rlimit_t rlimits[MAELYS__RLIMIT_COUNT];
  size_t rlimit_count;
} spawn_t;

static void spawn_init(spawn_t* s) {
  memset(s, 0, sizeof *s);
  s->layout.null_fd = -1;
  s->layout.terminal_child = -1;
  maelys__executor_launch_init(&s->launch, 0);
  s->status_pipe[0] = s->status_pipe[1] = -1;
  s->lifeline[0] = s->lifeline[1] = -1;
  s->userdb[0] = s->userdb[1] = -1;
  s->cgroup_procs = -1;
}

static void close_fd(int* fd) {
  if (*fd >= 0)
    close(*fd);
  *fd = -1;
}

static void spawn_dispose(spawn_t* s) {
  layout_dispose(&s->layout);
  for (int i = 0; i < 2; i++) {
    close_fd(&s->status_pipe[i]);
    close_fd(&s->lifeline[i]);
    close_fd(&s->userdb[i]);
  }
  close_fd(&s->cgroup_procs);
  maelys__executor_launch_dispose(&s->launch);
  free(s->fds);
  s->fds = NULL;
}

/* Frees what execution_create() made, and the streams and relays a failed
 * spawn made; nothing of it reached a loop. */
static void execution_discard(maelys_execution_t* e) {
  maelys__cgroup_remove(&e->cgroup);
  for (int i = 0; i < 2; i++)
    if (e->terminals[i] != NULL)
      maelys__tty_relay_close(e->terminals[i], NULL, NULL);
  for (int i = 0; i < MAELYS__EXEC_STREAMS; i++)
    if (e->streams[i].fd >= 0)
      close(e->streams[i].fd);
  if (e->rendezvous_fd >= 0)
    close(e->rendezvous_fd);
  free(e->executable);
  maelys__exec_free_vector(e->argv);
  free(e->receipt_dir);
  if (e->receipt_dirfd >= 0)
    close(e->receipt_dirfd);
  free(e->receipt_chain);
  free(e->receipt_context);
  sodium_memzero(e->receipt_key, sizeof e->receipt_key);
  free(e);
}

/* A new execution with what it keeps of the request (copied) and the
 * receipt directory preflight opened (consumed). */
static maelys_execution_t*
execution_create(maelys_executor_t* executor,
                 const maelys__backend_entry_t* backend,
                 const maelys_execution_request_t* request, int receipt_dirfd,
                 char** out_error) {
  maelys_execution_t* e = calloc(1, sizeof *e);
  if (e == NULL) {
    if (receipt_dirfd >= 0)
      close(receipt_dirfd);
    maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                          "out of memory creating an execution");
    return NULL;
  }
  e->receipt_dirfd = receipt_dirfd;
  e->executor = executor;
  e->backend = backend;
  e->orphan.execution = e;
  e->proc.watch_fd = -1;
  e->root.watch_fd = -1;
  e->root.pid = -1;
  e->status_fd = -1;
  e->lifeline_fd = -1;
  e->rendezvous_fd = -1;
  e->terminal =
      request->io_mode == MAELYS_EXEC_IO_TTY ? TERMINAL_AWAITED : TERMINAL_NONE;
  e->cgroup.dir_fd = e->cgroup.parent_fd = -1;
  e->memory_peak = -1;
  for (int i = 0; i < MAELYS__EXEC_STREAMS; i++)
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
    execution_discard(e);
    maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                          "out of memory creating an execution");
    return NULL;
  }
  return e;
}

/* The payload's descriptor layout, then the backend's launch description
 * for it. */
static maelys_executor_result_t
spawn_prepare(maelys_execution_t* e, spawn_t* s,
              const maelys_executor_plan_t* plan,
              const maelys_execution_request_t* request, char** out_error) {
  uint64_t needed = 0;
  maelys_executor_plan_required_capabilities(plan, &needed, NULL);
  maelys_executor_result_t res =
      build_layout(e, request, &s->layout, needed != 0, out_error);
  if (res != MAELYS_EXECUTOR_OK)
    return res;
  for (size_t i = 0; i < s->layout.count; i++)
    s->payload_fds[i] = s->layout.fds[i].child_fd;
  s->launch.payload_fd_limit = s->layout.limit;
  s->launch.payload_fds = s->payload_fds;
  s->launch.payload_fd_count = s->layout.count;
  const maelys__backend_entry_t* b = e->backend;
  res = b->vtable->prepare(b->state, b->proved, plan, request, &s->launch,
                           out_error);
  e->launch_flags = s->launch.flags;
  /* Invariant 21: a terminal session needs a terminal the sandbox makes
   * itself; a backend that cannot is refused, never given the host's. */
  if (res == MAELYS_EXECUTOR_OK && e->terminal != TERMINAL_NONE &&
      !maelys__launch_maps(&s->launch, MAELYS_BACKEND_FD_TERMINAL))
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
        "backend '%s' cannot give the payload a pseudo-terminal of its own "
        "(MAELYS_EXEC_IO_TTY), and a terminal of the host's never enters a "
        "sandbox (invariant 21)",
        b->vtable->name);
  return res;
}

/* The status channel and the lifeline when the launch wants them, and the
 * launched image's descriptors (maelys__launch_resolve_fds). */
static maelys_executor_result_t
spawn_descriptors(maelys_execution_t* e, spawn_t* s, char** out_error) {
  if ((s->launch.flags & MAELYS_BACKEND_LAUNCH_STATUS_CHANNEL) &&
      pipe2(s->status_pipe, O_CLOEXEC) != 0)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                 "creating the status channel: %s",
                                 strerror(errno));
  if (maelys__launch_maps(&s->launch, MAELYS_BACKEND_FD_LIFELINE) &&
      pipe2(s->lifeline, O_CLOEXEC) != 0)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                 "creating the lifeline: %s", strerror(errno));
  if (maelys__launch_maps(&s->launch, MAELYS_BACKEND_FD_USERDB) &&
      socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s->userdb) != 0)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                 "creating the user-database socket: %s",
                                 strerror(errno));
  size_t capacity = s->launch.map_count > s->layout.count ? s->launch.map_count
                                                          : s->layout.count;
  s->fds = calloc(capacity + 1, sizeof *s->fds);
  if (s->fds == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  maelys__fd_sources_t sources = {
      s->layout.fds,  s->layout.count,          s->status_pipe[1],
      s->lifeline[0], s->layout.terminal_child, s->cgroup_procs,
      s->userdb[1]};
  return maelys__launch_resolve_fds(&s->launch, &sources,
                                    e->backend->vtable->name, s->fds, capacity,
                                    &s->fd_count, out_error);
}

/* Whether the launched image joins its memory cgroup itself (ABI 7). */
static bool image_joins_cgroup(const maelys_execution_t* e, const spawn_t* s) {
  return e->backend->vtable->abi_version >= 7 &&
         (s->launch.flags & MAELYS_BACKEND_LAUNCH_IMAGE_JOINS_CGROUP) != 0;
}

/* The plan's rlimits (unless the launcher applies them) and the memory
 * cgroup the launch asks for, with its procs file for an image that joins
 * it itself. */
static maelys_executor_result_t
spawn_ceilings(maelys_execution_t* e, spawn_t* s,
               const maelys_executor_plan_t* plan, char** out_error) {
  if (!(s->launch.flags & MAELYS_BACKEND_LAUNCH_NO_RLIMITS)) {
    for (int i = 1; i < MAELYS__RLIMIT_COUNT; i++)
      if (plan->rlimits[i].set)
        s->rlimits[s->rlimit_count++] = (maelys__proc_rlimit_t){
            maelys__executor_rlimit_native((maelys_executor_rlimit_t)i),
            plan->rlimits[i].soft, plan->rlimits[i].hard};
  }
  uint64_t memory_max = plan->limits[MAELYS_EXECUTOR_LIMIT_MEMORY];
  if (!(s->launch.flags & MAELYS_BACKEND_LAUNCH_MEMORY_CGROUP) ||
      memory_max == 0)
    return MAELYS_EXECUTOR_OK;
  maelys_executor_result_t r = create_cgroup(e, memory_max, out_error);
  if (r != MAELYS_EXECUTOR_OK || !image_joins_cgroup(e, s))
    return r;
  /* Nothing may run outside the ceiling unnoticed: an image that said it
   * joins the cgroup must be given the means to. */
  if (!maelys__launch_maps(&s->launch, MAELYS_BACKEND_FD_CGROUP))
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "backend '%s' joins the memory cgroup itself but maps no "
        "MAELYS_BACKEND_FD_CGROUP descriptor",
        e->backend->vtable->name);
  s->cgroup_procs =
      openat(e->cgroup.dir_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
  if (s->cgroup_procs < 0)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                 "opening the memory cgroup's cgroup.procs: %s",
                                 strerror(errno));
  return MAELYS_EXECUTOR_OK;
}

/* The one clone(): the launch's image (or the request's program) with its
 * descriptors, limits, identity and namespaces. */
static maelys_executor_result_t
spawn_clone(maelys_execution_t* e, spawn_t* s,
            const maelys_execution_request_t* request, char** out_error) {
  const maelys_backend_launch_t* l = &s->launch;
  char* empty_env[1] = {NULL};
  bool new_pid_namespace =
      (l->flags & MAELYS_BACKEND_LAUNCH_NEW_PID_NAMESPACE) != 0;
  maelys__proc_spec_t spec = {
      .path = l->image_set ? l->path : request->executable,
      .argv = l->image_set ? l->argv : e->argv,
      .envp = l->image_set ? (l->envp ? l->envp : empty_env) : request->env,
      .fds = s->fds,
      .fd_count = s->fd_count,
      .cwd = (l->flags & MAELYS_BACKEND_LAUNCH_NO_CHDIR) ? NULL : request->cwd,
      .rlimits = s->rlimits,
      .rlimit_count = s->rlimit_count,
      .new_process_group = true,
      .die_with_parent =
          (l->flags & MAELYS_BACKEND_LAUNCH_DIE_WITH_PARENT) != 0,
      .set_credentials = l->credentials_set,
      .uid = l->uid,
      .gid = l->gid,
      .new_pid_namespace = new_pid_namespace,
      .new_user_namespace = new_pid_namespace && !maelys__proc_host_root(),
      .map_uid = geteuid(),
      .map_gid = getegid(),
      .image_fd = l->image_fd,
      .cgroup_fd = image_joins_cgroup(e, s) ? -1 : e->cgroup.dir_fd,
  };
  char spawn_error[512];
  e->started_real_ns = maelys__exec_realtime_ns();
  e->started_mono_ns = uv_hrtime();
  if (maelys__proc_spawn(&spec, &e->proc, spawn_error, sizeof spawn_error) != 0)
    /* Launch errors are not exit codes: the step and errno come back from
     * the child before it could execute anything. */
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_SPAWN, "cannot start '%s'%s%s: %s",
        spec.path, l->image_set ? " for " : "",
        l->image_set ? request->executable : "", spawn_error);
  return MAELYS_EXECUTOR_OK;
}

/* The child holds its ends now: the host keeps only its own, and the
 * request's channel descriptors are consumed. */
static void spawn_adopt(maelys_execution_t* e, spawn_t* s,
                        maelys_execution_request_t* request) {
  e->lifeline_fd = s->lifeline[1];
  s->lifeline[1] = -1;
  if (s->userdb[0] >= 0) {
    /* An image that cannot be answered reads end-of-file and refuses. */
    (void)maelys__userdb_start(s->userdb[0]);
    s->userdb[0] = -1;
  }
  e->status_fd = s->status_pipe[0];
  s->status_pipe[0] = -1;
  if (e->status_fd >= 0)
    fcntl(e->status_fd, F_SETFL, fcntl(e->status_fd, F_GETFL) | O_NONBLOCK);
  for (size_t i = 0; i < request->channel_count; i++) {
    close(request->channels[i].host_fd);
    request->channels[i].host_fd = -1;
  }
  request->channel_count = 0;
}

/* Watches the running child on the loop. A child that cannot be watched is
 * killed (it never started its payload for the caller), reaped, and the
 * execution closed. */
static maelys_executor_result_t spawn_watch(maelys_execution_t* e,
                                            const maelys_executor_plan_t* plan,
                                            char** out_error) {
  maelys_executor_t* executor = e->executor;
  maelys__executor_plan_retain(plan);
  e->plan = plan;
  maelys__executor_execution_started(executor);
  int ur = init_handles(e, executor->loop);
  if (ur != 0) {
    maelys__proc_signal_group(e->proc.pid, SIGKILL);
    maelys__proc_signal(&e->proc, SIGKILL);
    maelys__proc_reap_blocking(&e->proc);
    e->phase = PHASE_DONE;
    e->owner = OWNER_RELEASED;
    maelys__executor_execution_released(executor, NULL);
    maelys__exec_begin_close(e);
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                 "watching the child on the loop: %s",
                                 uv_strerror(ur));
  }
  uv_poll_start(&e->proc_poll, UV_READABLE, maelys__exec_on_proc);
  for (int i = 0; i < 2; i++)
    if (e->terminals[i] != NULL) {
      e->open_handles++; /* one for the relay, closed in begin_close */
      maelys__tty_relay_start(e->terminals[i], maelys__exec_on_terminal_done,
                              e);
    }
  if (e->status_poll_init)
    uv_poll_start(&e->status_poll, UV_READABLE, maelys__exec_on_status);
  if (e->terminal_poll != NULL)
    uv_poll_start(e->terminal_poll, UV_READABLE, maelys__exec_on_terminal);
  if (e->receipt_chain != NULL)
    maelys__executor_chain_join(executor, e->receipt_chain);
  return MAELYS_EXECUTOR_OK;
}

/* Spawn, as its outline: each phase one call and one way out. */
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
  maelys_executor_result_t res =
      maelys__exec_check_arguments(executor, plan, request, out_error);
  if (res != MAELYS_EXECUTOR_OK)
    return res;
  const maelys__backend_entry_t* backend = NULL;
  int receipt_dirfd = -1;
  res = maelys__exec_preflight(executor, plan, request, false, &receipt_dirfd,
                               &backend, out_error);
  if (res != MAELYS_EXECUTOR_OK)
    return res;
  maelys_execution_t* e =
      execution_create(executor, backend, request, receipt_dirfd, out_error);
  if (e == NULL)
    return MAELYS_EXECUTOR_ERR_MEMORY;
  spawn_t s;
  spawn_init(&s);
  if ((res = spawn_prepare(e, &s, plan, request, out_error)) !=
          MAELYS_EXECUTOR_OK ||
      (res = spawn_ceilings(e, &s, plan, out_error)) != MAELYS_EXECUTOR_OK ||
      (res = spawn_descriptors(e, &s, out_error)) != MAELYS_EXECUTOR_OK ||
      (res = spawn_clone(e, &s, request, out_error)) != MAELYS_EXECUTOR_OK)
    goto fail;
  spawn_adopt(e, &s, request);
  spawn_dispose(&s);
  res = spawn_watch(e, plan, out_error);
  if (res == MAELYS_EXECUTOR_OK)
    *out_execution = e;
  return res;

fail:
  spawn_dispose(&s);
  execution_discard(e);
  return res;
}
