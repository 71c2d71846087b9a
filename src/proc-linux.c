/*
 * Linux process mechanics: clone(2) with CLONE_VM|CLONE_VFORK|CLONE_PIDFD,
 * a pidfd to watch and signal the child, waitid(P_PIDFD) to reap it.
 *
 * Why this shape:
 * - CLONE_VFORK suspends only the calling thread until the child has executed
 *   its image (or died), as posix_spawn does, so the loop is blocked for the
 *   exec and nothing else; no copy of the host's page tables is made.
 * - The child's exit signal is 0, not SIGCHLD: such a child is only visible
 *   to waitid with __WALL, so a host (or another library) that calls
 *   waitpid(-1) without __WALL can never steal its exit status, and no SIGCHLD
 *   handler is needed or disturbed.
 * - CLONE_PIDFD hands back a pidfd atomically, so no pid can be recycled
 *   between the fork and the watch.
 * - The child shares the parent's memory until it executes. It therefore
 *   calls only raw system calls (no malloc, no stdio, no glibc set*id wrapper,
 *   which would broadcast to the *parent's* threads), touches only memory the
 *   parent prepared, and is not instrumented by the sanitizers.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pthread.h>

#if defined(MAELYS__TSAN_BUILD)
#include <dlfcn.h>
#endif

#include "proc.h"

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

#if defined(__GNUC__) || defined(__clang__)
#define CHILD_CODE                                                             \
  __attribute__((no_sanitize("address", "undefined"), noinline))
#else
#define CHILD_CODE
#endif

#define CHILD_STACK_SIZE (256 * 1024)

/*
 * The child's stack, one per thread that spawns, kept for its next spawn: a
 * vfork child is done with it before the thread that started it resumes.
 * Mapping and unmapping it at every spawn held the loop 0.15-0.3 ms of each
 * spawn's ~1.7 ms on a 2-core VM (the unmap of a multi-threaded process
 * shoots down the TLB of every CPU it ran on). A thread's stack is unmapped
 * when the thread exits; when the library is unloaded, the key goes and the
 * stacks of threads still running are left mapped.
 */
static pthread_key_t stack_key;
static bool stack_key_made;
static pthread_once_t stack_once = PTHREAD_ONCE_INIT;

static void stack_unmap(void* stack) {
  munmap(stack, CHILD_STACK_SIZE);
}

static void stack_key_make(void) {
  stack_key_made = pthread_key_create(&stack_key, stack_unmap) == 0;
}

__attribute__((destructor)) static void stack_key_drop(void) {
  if (stack_key_made)
    pthread_key_delete(stack_key);
  stack_key_made = false;
}

/* This thread's child stack, or NULL. *kept is false when the caller must
 * unmap it after the spawn (no thread key). */
static void* child_stack(bool* kept) {
  pthread_once(&stack_once, stack_key_make);
  void* stack = stack_key_made ? pthread_getspecific(stack_key) : NULL;
  *kept = stack != NULL;
  if (stack != NULL)
    return stack;
  stack = mmap(NULL, CHILD_STACK_SIZE, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED)
    return NULL;
  *kept = stack_key_made && pthread_setspecific(stack_key, stack) == 0;
  return stack;
}

/* The steps of the child, reported back on failure. */
enum step {
  STEP_SIGNALS = 1,
  STEP_SETPGID,
  STEP_DUP,
  STEP_CLOSE,
  STEP_RLIMIT,
  STEP_CHDIR,
  STEP_SETGROUPS,
  STEP_SETRESGID,
  STEP_SETRESUID,
  STEP_PDEATHSIG,
  STEP_USERNS_MAP,
  STEP_CGROUP,
  STEP_EXECVE
};

static const char* step_name(int step) {
  switch (step) {
  case STEP_SIGNALS:
    return "reset signals";
  case STEP_SETPGID:
    return "setpgid";
  case STEP_DUP:
    return "install descriptors";
  case STEP_CLOSE:
    return "close other descriptors";
  case STEP_RLIMIT:
    return "setrlimit";
  case STEP_CHDIR:
    return "chdir";
  case STEP_SETGROUPS:
    return "setgroups";
  case STEP_SETRESGID:
    return "setresgid";
  case STEP_SETRESUID:
    return "setresuid";
  case STEP_PDEATHSIG:
    return "set parent-death signal";
  case STEP_USERNS_MAP:
    return "map the launcher's user namespace";
  case STEP_CGROUP:
    return "join the execution's cgroup";
  case STEP_EXECVE:
    return "execve";
  }
  return "unknown step";
}

typedef struct child_report {
  int32_t step;
  int32_t error;
  int32_t index; /* the descriptor or resource concerned, or -1 */
} child_report_t;

typedef struct child_ctx {
  const maelys__proc_spec_t* spec;
  int report_fd;
  pid_t parent_pid;
  int* scratch; /* fd_count entries */
} child_ctx_t;

CHILD_CODE static void child_fail(child_ctx_t* ctx, int step, int error,
                                  int index) {
  child_report_t r = {step, error, index};
  ssize_t n;
  do
    n = write(ctx->report_fd, &r, sizeof r);
  while (n < 0 && errno == EINTR);
  _exit(127);
}

CHILD_CODE static void child_fds(child_ctx_t* ctx) {
  const maelys__proc_spec_t* spec = ctx->spec;
  int max_target = 2;
  for (size_t i = 0; i < spec->fd_count; i++)
    if (spec->fds[i].child_fd > max_target)
      max_target = spec->fds[i].child_fd;
  int limit = max_target + 1;
  /* Move the report pipe and every source above the layout first, so that
   * installing one target can never clobber a source still to be used. */
  int report = (int)syscall(SYS_fcntl, ctx->report_fd, F_DUPFD_CLOEXEC, limit);
  if (report < 0)
    child_fail(ctx, STEP_DUP, errno, -1);
  ctx->report_fd = report;
  for (size_t i = 0; i < spec->fd_count; i++) {
    int t =
        (int)syscall(SYS_fcntl, spec->fds[i].source_fd, F_DUPFD_CLOEXEC, limit);
    if (t < 0)
      child_fail(ctx, STEP_DUP, errno, spec->fds[i].child_fd);
    ctx->scratch[i] = t;
  }
  for (size_t i = 0; i < spec->fd_count; i++)
    if (syscall(SYS_dup2, ctx->scratch[i], spec->fds[i].child_fd) < 0)
      child_fail(ctx, STEP_DUP, errno, spec->fds[i].child_fd);
  /* Invariant 5: every descriptor outside the layout is closed before the
   * image starts, including those the host opened without O_CLOEXEC. Below
   * the limit they are closed now; above it they are marked close-on-exec
   * (the report pipe must survive until execve). */
  for (int fd = 0; fd <= max_target; fd++) {
    bool wanted = false;
    for (size_t i = 0; i < spec->fd_count; i++)
      if (spec->fds[i].child_fd == fd)
        wanted = true;
    if (!wanted)
      syscall(SYS_close, fd);
  }
  if (syscall(SYS_close_range, (unsigned)limit, ~0U, CLOSE_RANGE_CLOEXEC) !=
      0) {
    /* Kernels before 5.11: mark each descriptor up to the limit. */
    struct rlimit rl;
    if (syscall(SYS_getrlimit, RLIMIT_NOFILE, &rl) != 0)
      child_fail(ctx, STEP_CLOSE, errno, -1);
    for (long fd = limit; fd < (long)rl.rlim_cur && fd < 1048576; fd++)
      syscall(SYS_fcntl, (int)fd, F_SETFD, FD_CLOEXEC);
  }
}

/* Writes `text` to /proc/self/NAME (a raw open/write/close: this child shares
 * its parent's memory and must not enter libc). */
CHILD_CODE static int write_self(const char* name, const char* text,
                                 size_t len) {
  int fd = (int)syscall(SYS_openat, AT_FDCWD, name, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  long n = syscall(SYS_write, fd, text, len);
  syscall(SYS_close, fd);
  return n == (long)len ? 0 : -1;
}

/* "ID ID 1": the single identity mapping a process may write for itself in
 * a user namespace it created, without any capability. */
CHILD_CODE static size_t identity_map(char* out, unsigned id) {
  char digits[12];
  size_t n = 0, len = 0;
  do {
    digits[n++] = (char)('0' + id % 10);
    id /= 10;
  } while (id != 0);
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < n; i++)
      out[len++] = digits[n - 1 - i];
    out[len++] = ' ';
  }
  out[len++] = '1';
  out[len] = '\0';
  return len;
}

CHILD_CODE static int child_main(void* arg) {
  child_ctx_t* ctx = arg;
  const maelys__proc_spec_t* spec = ctx->spec;

  /* Dispositions survive execve when ignored, and the parent's handlers must
   * never run in this child (it shares the parent's memory): every signal
   * goes back to its default while all stay blocked, and the mask is emptied
   * only right before execve. */
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; sig++)
    if (sig != SIGKILL && sig != SIGSTOP)
      sigaction(sig, &dfl, NULL);

  if (spec->new_user_namespace) {
    /* The child holds every capability of its new namespace but no mapped
     * identity yet; it maps its own before it does anything else. */
    char map[40];
    size_t n = identity_map(map, (unsigned)spec->map_gid);
    if (write_self("/proc/self/setgroups", "deny", 4) != 0 ||
        write_self("/proc/self/gid_map", map, n) != 0)
      child_fail(ctx, STEP_USERNS_MAP, errno, -1);
    n = identity_map(map, (unsigned)spec->map_uid);
    if (write_self("/proc/self/uid_map", map, n) != 0)
      child_fail(ctx, STEP_USERNS_MAP, errno, -1);
  }
  if (spec->cgroup_fd >= 0) {
    /* Measured: every migration waits for an RCU grace period of the
     * kernel's cgroup threadgroup lock, 5-13 ms on a v1 hierarchy and
     * 13-36 ms on v2 on the 2-core test machine, and the calling thread of
     * the host waits with this vfork child: the largest single cost of a
     * launch with a memory ceiling (README, Performance). clone3's
     * CLONE_INTO_CGROUP (v2 only) would avoid the migration. */
    int fd = (int)syscall(SYS_openat, spec->cgroup_fd, "cgroup.procs",
                          O_WRONLY | O_CLOEXEC);
    if (fd < 0 || syscall(SYS_write, fd, "0", 1) != 1)
      child_fail(ctx, STEP_CGROUP, errno, -1);
    syscall(SYS_close, fd);
  }
  if (spec->new_process_group && syscall(SYS_setpgid, 0, 0) != 0)
    child_fail(ctx, STEP_SETPGID, errno, -1);
  child_fds(ctx);
  for (size_t i = 0; i < spec->rlimit_count; i++) {
    struct rlimit rl;
    rl.rlim_cur = spec->rlimits[i].soft == UINT64_MAX
                      ? RLIM_INFINITY
                      : (rlim_t)spec->rlimits[i].soft;
    rl.rlim_max = spec->rlimits[i].hard == UINT64_MAX
                      ? RLIM_INFINITY
                      : (rlim_t)spec->rlimits[i].hard;
    if (syscall(SYS_prlimit64, 0, spec->rlimits[i].resource, &rl, NULL) != 0)
      child_fail(ctx, STEP_RLIMIT, errno, spec->rlimits[i].resource);
  }
  if (spec->cwd != NULL && syscall(SYS_chdir, spec->cwd) != 0)
    child_fail(ctx, STEP_CHDIR, errno, -1);
  if (spec->set_credentials) {
    if (syscall(SYS_setgroups, 0, NULL) != 0)
      child_fail(ctx, STEP_SETGROUPS, errno, -1);
    if (syscall(SYS_setresgid, spec->gid, spec->gid, spec->gid) != 0)
      child_fail(ctx, STEP_SETRESGID, errno, -1);
    if (syscall(SYS_setresuid, spec->uid, spec->uid, spec->uid) != 0)
      child_fail(ctx, STEP_SETRESUID, errno, -1);
  }
  if (spec->die_with_parent) {
    /* Armed after the credential change (which clears it) and checked
     * against a parent that died before it was armed. */
    if (syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
      child_fail(ctx, STEP_PDEATHSIG, errno, -1);
    /* pid 1 of a new pid namespace reads its parent as 0 (it lies outside
     * the namespace), dead or alive, so the check is only made outside one.
     * Inside, the spawning thread is still blocked in maelys__proc_spawn
     * until this child executes, so only the host process's own death can
     * precede the prctl; the lifeline covers that for launchers. */
    if (!spec->new_pid_namespace && syscall(SYS_getppid) != ctx->parent_pid)
      child_fail(ctx, STEP_PDEATHSIG, ESRCH, -1);
  }
  uint64_t empty = 0;
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &empty, NULL, sizeof empty);
  if (spec->image_fd >= 0)
    syscall(SYS_execveat, spec->image_fd, "", spec->argv, spec->envp,
            AT_EMPTY_PATH);
  else
    syscall(SYS_execve, spec->path, spec->argv, spec->envp);
  child_fail(ctx, STEP_EXECVE, errno, -1);
  return 127;
}

typedef int clone_fn_t(int (*fn)(void*), void* stack, int flags, void* arg,
                       ...);

/* glibc's clone(). ThreadSanitizer intercepts clone() and handles the child
 * as a forked process, which a CLONE_VM child is not: run in the parent's
 * memory, that handling marks the parent itself as a child after a
 * multi-threaded fork (its next thread dies) and drops what it knew of the
 * parent's synchronisation (false races). A ThreadSanitizer build calls the
 * real clone() past the interceptor; the child's code is uninstrumented
 * (CMakeLists.txt). */
static clone_fn_t* libc_clone(void) {
#if defined(MAELYS__TSAN_BUILD)
  clone_fn_t* real = (clone_fn_t*)dlsym(RTLD_NEXT, "clone");
  if (real != NULL)
    return real;
#endif
  return clone;
}

int maelys__proc_spawn(const maelys__proc_spec_t* spec, maelys__proc_t* out,
                       char* error, size_t error_size) {
  out->pid = -1;
  out->watch_fd = -1;
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    int e = errno;
    snprintf(error, error_size, "pipe: %s", strerror(e));
    return -e;
  }
  int* scratch = calloc(spec->fd_count + 1, sizeof *scratch);
  bool stack_kept = false;
  void* stack = child_stack(&stack_kept);
  if (scratch == NULL || stack == NULL) {
    free(scratch);
    if (stack != NULL && !stack_kept)
      munmap(stack, CHILD_STACK_SIZE);
    close(pipefd[0]);
    close(pipefd[1]);
    snprintf(error, error_size, "out of memory preparing the child");
    return -ENOMEM;
  }
  child_ctx_t ctx = {spec, pipefd[1], getpid(), scratch};
  clone_fn_t* clone_call = libc_clone();

  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int pidfd = -1;
  int ns_flags = (spec->new_pid_namespace ? CLONE_NEWPID : 0) |
                 (spec->new_user_namespace ? CLONE_NEWUSER : 0);
  pid_t pid =
      clone_call(child_main, (char*)stack + CHILD_STACK_SIZE,
                 CLONE_VM | CLONE_VFORK | CLONE_PIDFD | ns_flags, &ctx, &pidfd);
  if (pid < 0 && errno == EINVAL) {
    /* A kernel (or an emulator such as valgrind) without CLONE_PIDFD: open
     * the pidfd afterwards. The child cannot be reaped in between, because
     * its exit signal is 0 and nothing but this code waits for it. */
    pidfd = -1;
    pid = clone_call(child_main, (char*)stack + CHILD_STACK_SIZE,
                     CLONE_VM | CLONE_VFORK | ns_flags, &ctx, NULL);
  }
  int clone_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (!stack_kept)
    munmap(stack, CHILD_STACK_SIZE);
  free(scratch);
  close(pipefd[1]);
  if (pid < 0) {
    close(pipefd[0]);
    snprintf(error, error_size, "clone%s: %s",
             (ns_flags & CLONE_NEWUSER) ? " (new user and pid namespaces)"
             : ns_flags                 ? " (new pid namespace)"
                                        : "",
             strerror(clone_errno));
    return -clone_errno;
  }

  child_report_t report;
  ssize_t n;
  do
    n = read(pipefd[0], &report, sizeof report);
  while (n < 0 && errno == EINTR);
  close(pipefd[0]);
  if (n == (ssize_t)sizeof report) {
    /* The child failed before its image started; it has exited or is about
     * to. Reap it now so it never lingers as a zombie. */
    siginfo_t info;
    while (waitid(P_PID, (id_t)pid, &info, WEXITED | __WALL) != 0 &&
           errno == EINTR)
      ;
    if (pidfd >= 0)
      close(pidfd);
    if (report.index >= 0)
      snprintf(error, error_size, "%s (%d): %s", step_name(report.step),
               report.index, strerror(report.error));
    else
      snprintf(error, error_size, "%s: %s", step_name(report.step),
               strerror(report.error));
    return report.error > 0 ? -report.error : -EIO;
  }
  if (pidfd < 0) {
    pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) {
      int e = errno;
      /* Without a watch the child cannot be supervised: kill and reap it. */
      kill(pid, SIGKILL);
      siginfo_t info;
      while (waitid(P_PID, (id_t)pid, &info, WEXITED | __WALL) != 0 &&
             errno == EINTR)
        ;
      snprintf(error, error_size, "pidfd_open: %s", strerror(e));
      return -e;
    }
  }
  out->pid = pid;
  out->watch_fd = pidfd;
  return 0;
}

int maelys__proc_signal(const maelys__proc_t* proc, int sig) {
  if (proc->pid <= 0)
    return -ESRCH;
  if (proc->watch_fd >= 0 &&
      syscall(SYS_pidfd_send_signal, proc->watch_fd, sig, NULL, 0) == 0)
    return 0;
  if (proc->watch_fd >= 0 && errno != ENOSYS)
    return -errno;
  /* Only where pidfd_send_signal is missing (valgrind emulates no such
   * call): the pid is signalled, which is exact for a child of ours that is
   * not reaped yet, since its pid cannot be recycled before we reap it. */
  if (kill(proc->pid, sig) != 0)
    return -errno;
  return 0;
}

int maelys__proc_signal_group(pid_t pgid, int sig) {
  if (pgid <= 1)
    return -EINVAL;
  if (kill(-pgid, sig) != 0)
    return -errno;
  return 0;
}

static int status_from_info(const siginfo_t* info) {
  switch (info->si_code) {
  case CLD_EXITED:
    return (info->si_status & 0xff) << 8;
  case CLD_KILLED:
  case CLD_DUMPED:
    return info->si_status & 0x7f;
  default:
    return 0;
  }
}

int maelys__proc_reap(maelys__proc_t* proc, int* out_status,
                      struct rusage* out_usage) {
  if (proc->watch_fd < 0)
    return -EBADF;
  siginfo_t info;
  memset(&info, 0, sizeof info);
  struct rusage usage;
  memset(&usage, 0, sizeof usage);
  /* The raw system call takes a struct rusage that glibc's waitid does not
   * expose: the usage of the child and of the descendants it reaped. */
  if (syscall(SYS_waitid, P_PIDFD, proc->watch_fd, &info,
              WEXITED | WNOHANG | __WALL, &usage) != 0)
    return -errno;
  if (info.si_pid == 0)
    return 0;
  if (out_status != NULL)
    *out_status = status_from_info(&info);
  if (out_usage != NULL)
    *out_usage = usage;
  return 1;
}

int maelys__proc_reap_blocking(maelys__proc_t* proc) {
  siginfo_t info;
  for (;;) {
    memset(&info, 0, sizeof info);
    if (syscall(SYS_waitid, P_PIDFD, proc->watch_fd, &info, WEXITED | __WALL,
                NULL) == 0)
      return 0;
    if (errno != EINTR)
      return -errno;
  }
}

static int ns_inode(const char* path, ino_t* out) {
  struct stat st;
  if (stat(path, &st) != 0)
    return -errno;
  *out = st.st_ino;
  return 0;
}

int maelys__proc_open_foreign(pid_t pid, maelys__proc_t* out) {
  out->pid = -1;
  out->watch_fd = -1;
  if (pid <= 1)
    return -EINVAL;
  int fd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (fd < 0 && errno != ENOSYS)
    return -errno;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)pid);
  ino_t theirs = 0, ours = 0;
  int r = ns_inode(path, &theirs);
  if (r == 0)
    r = ns_inode("/proc/self/ns/pid", &ours);
  /* Checked after the pidfd was opened: if the pid is still the sandbox's
   * pid 1 now, the pidfd refers to it for good. Without pidfds (valgrind
   * emulates none) only the pid is kept, checked the same way. */
  if (r == 0 && fd >= 0 && syscall(SYS_pidfd_send_signal, fd, 0, NULL, 0) != 0)
    r = -errno;
  if (r == 0 && fd < 0 && kill(pid, 0) != 0)
    r = -errno;
  if (r == 0 && theirs == ours)
    r = -ESRCH;
  if (r != 0) {
    if (fd >= 0)
      close(fd);
    return r;
  }
  out->pid = pid;
  out->watch_fd = fd;
  return 0;
}

void maelys__proc_close(maelys__proc_t* proc) {
  if (proc->watch_fd >= 0)
    close(proc->watch_fd);
  proc->watch_fd = -1;
  proc->pid = -1;
}

bool maelys__proc_host_root(void) {
  if (geteuid() != 0)
    return false;
  FILE* f = fopen("/proc/self/uid_map", "re");
  if (f == NULL)
    return true;
  unsigned long inside = 1, outside = 1, count = 0;
  int n = fscanf(f, "%lu %lu %lu", &inside, &outside, &count);
  fclose(f);
  return n == 3 && inside == 0 && outside == 0 && count == 4294967295UL;
}

const maelys__proc_ops_t maelys__proc_default_ops = {maelys__proc_signal,
                                                     maelys__proc_signal_group};
