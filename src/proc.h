/*
 * The one internal interface behind which process creation, exit watching,
 * signalling and reaping live. proc-linux.c implements it with clone(2) and
 * pidfds; a macOS implementation (kqueue EVFILT_PROC) replaces only that file.
 *
 * The contract:
 * - maelys__proc_spawn starts exactly one child and returns only once the
 *   child has executed its image or failed; a failure carries the step and
 *   errno that failed in the child, never an exit status.
 * - watch_fd becomes readable when the child exits; the caller polls it on
 *   its loop. Nothing here ever waits on a process it did not start (no
 *   waitpid(-1)) and no signal handler is installed.
 */
#ifndef MAELYS_EXECUTOR_PROC_H
#define MAELYS_EXECUTOR_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

typedef struct maelys__proc_fd {
  int child_fd;
  int source_fd; /* a descriptor of the parent, borrowed */
} maelys__proc_fd_t;

typedef struct maelys__proc_rlimit {
  int resource; /* RLIMIT_* */
  uint64_t soft, hard;
} maelys__proc_rlimit_t;

typedef struct maelys__proc_spec {
  const char* path;
  char* const* argv;
  char* const* envp;
  const maelys__proc_fd_t* fds;
  size_t fd_count;
  const char* cwd; /* NULL: no chdir */
  const maelys__proc_rlimit_t* rlimits;
  size_t rlimit_count;
  bool new_process_group;
  bool die_with_parent;
  bool set_credentials;
  uid_t uid;
  gid_t gid;
  /* The image is pid 1 of a new pid namespace: when it dies, the kernel
   * kills every other process of that namespace. Without CAP_SYS_ADMIN a
   * new user namespace comes with it, mapping the caller's own uid and gid
   * to themselves (the child writes the maps before it executes). */
  bool new_pid_namespace;
  bool new_user_namespace;
  uid_t map_uid;
  gid_t map_gid;
  /* >= 0: execute this descriptor (execveat AT_EMPTY_PATH) instead of
   * `path`, so a file swapped after it was checked changes nothing. */
  int image_fd;
  /* >= 0: a cgroup directory the child moves itself into before it
   * executes, so that everything it starts is charged there. */
  int cgroup_fd;
} maelys__proc_spec_t;

typedef struct maelys__proc {
  pid_t pid;    /* -1: none */
  int watch_fd; /* readable once the child exited; close-on-exec; -1 for a
                   foreign process where pidfds are missing */
} maelys__proc_t;

/* 0 on success; on failure a negative errno and `error` holds "step: reason".
 */
int maelys__proc_spawn(const maelys__proc_spec_t* spec, maelys__proc_t* out,
                       char* error, size_t error_size);

/* Signals the process behind watch_fd. 0 or a negative errno (-ESRCH once it
 * has exited). */
int maelys__proc_signal(const maelys__proc_t* proc, int sig);

/* kill(-pgid, sig); only while the group leader is not reaped. */
int maelys__proc_signal_group(pid_t pgid, int sig);

/* Non-blocking reap: 1 and the wait status when it has exited (the process is
 * then gone), 0 while it runs, a negative errno on error. */
int maelys__proc_reap(maelys__proc_t* proc, int* out_status,
                      struct rusage* out_usage);

/* Blocking reap, for a background reaper; 0 or a negative errno. */
int maelys__proc_reap_blocking(maelys__proc_t* proc);

/* Opens a watch on a process the executor did not fork but that belongs to
 * its launch (the sandbox's tree root, a child of the launcher). Refused when
 * the pid is in the caller's own pid namespace, which is how a recycled pid
 * is told apart from the sandbox's pid 1. 0 or a negative errno. */
int maelys__proc_open_foreign(pid_t pid, maelys__proc_t* out);

void maelys__proc_close(maelys__proc_t* proc);

/* Whether this process is uid 0 of the initial user namespace (host root,
 * which may create pid namespaces without a user namespace of its own). */
bool maelys__proc_host_root(void);

/* The signalling operations, as a table the executor calls through, so that
 * tests reach failure paths (a tree that outlives its forced kill) on
 * purpose rather than by luck. */
typedef struct maelys__proc_ops {
  int (*signal)(const maelys__proc_t* proc, int sig);
  int (*signal_group)(pid_t pgid, int sig);
} maelys__proc_ops_t;

extern const maelys__proc_ops_t maelys__proc_default_ops;

#endif /* MAELYS_EXECUTOR_PROC_H */
