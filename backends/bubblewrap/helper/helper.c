/*
 * maelys-executor-helper: runs inside the bubblewrap sandbox.
 *
 *   helper init --status-fd S --stderr-fd E --limit L [--keep-fd N]...
 *               [--rlimit NAME:SOFT:HARD]... [--tasks N]
 *               [--terminal-fd T --terminal-size ROWSxCOLS]
 *               [--setenv NAME VALUE]... [--unsetenv NAME]...
 *               [--notify-fd N --notify-network deny|allow]
 *               --exec PATH -- ARGV...
 *
 * As the sandbox's pid 1 (bwrap --as-pid-1) it
 *   - forwards the graceful signals it receives from the host to every
 *     process of the sandbox (kill(-1)): bwrap forwards nothing, and a pid 1
 *     only receives signals it has a handler for;
 *   - with T, makes the payload a pseudo-terminal of its own from the
 *     sandbox's devpts instance, sends its master to the host over T and
 *     gives the payload the slave as 0, 1 and 2, in a session of its own
 *     with that terminal as its controlling terminal (pty.c);
 *   - starts the payload with the exact descriptor layout (the payload's
 *     stderr moved back from E to 2, every descriptor outside 0..L-1 and the
 *     kept ones closed), the plan's rlimits and its task ceiling (N, as
 *     RLIMIT_NPROC: counted per user namespace since Linux 5.14, and this
 *     sandbox's user namespace holds only this sandbox), with no capability;
 *   - is not dumpable, so that nothing in the sandbox can reach its
 *     descriptors (the status channel) through /proc or ptrace
 *     (invariant 19);
 *   - reports on S, one line each: "maelys-init ready" once it can forward
 *     signals, "maelys-init launch-failed STEP ERRNO" if the payload cannot be
 *     executed, "maelys-init exit code N" / "maelys-init exit signal N";
 *   - reaps every orphan, and exits when the payload does, which makes the
 *     kernel kill whatever the payload left behind in the pid namespace;
 *   - with --notify-fd, before the payload exists, stacks the denial filter
 *     and sends its listener out of the sandbox over N (notify.c).
 *
 *   helper launch --lifeline-fd F --json-fd J --exec-fd X
 *                 [--notify-fd L --notify-peer-fd P] [--cgroup-fd C]
 *                 [--identity UID:GID | --identity-range FIRST:COUNT]
 *                 [--identity-lock PATH] [--userdb-fd U] [--staging-dir DIR]
 *                 [--stage INDEX SOURCE DEV INO d|f]... -- BWRAP ARGV...
 *
 * The launcher. The core starts it as pid 1 of a pid namespace of its own
 * (in a user namespace of its own when the host is not root), so that when
 * it dies, for whatever reason, the kernel kills every process it started:
 * bwrap's monitor, the sandbox and everything in it (invariant 22). It dies
 *   - when the host process is gone: F is the read end of a pipe whose only
 *     write end the host process holds, so end-of-file on F means the host
 *     died (or dropped the execution's lifeline) -- a process-wide signal,
 *     unlike a parent-death signal, which fires when the host *thread* that
 *     forked exits;
 *   - when bwrap exits (with bwrap's status);
 *   - when the host kills it (the forced stop: one SIGKILL ends the tree).
 * It forwards the graceful signals it receives to the sandbox's pid 1 (whose
 * pid in this namespace bwrap reports on its --json-status-fd, J), and
 * executes bwrap from the descriptor X checked by the backend.
 * For a host running as uid 0 (never host root inside, invariant 20) it
 * first takes a host identity of the sandbox's own: UID:GID, or one of the
 * range FIRST..FIRST+COUNT-1 that no other process uses (a lock byte per uid
 * in PATH, held while this launcher lives; the kernel's own count of the
 * uid's processes, which covers sandboxes whose launcher just died; and
 * every process's ids, every user namespace's mapping and the user and
 * group databases, see identity_conflict, asked through the host process's
 * service on the socket U, which an identity requires). Then,
 * in a private mount namespace, it mounts a small tmpfs on DIR and attaches
 * there, as DIR/INDEX, a clone of each SOURCE idmapped so that the source's
 * owner appears as that identity, after checking that SOURCE, resolved again
 * without following any symbolic link, is still the object DEV:INO the
 * backend saw; then it takes that identity itself, and bwrap, run under it,
 * binds DIR/INDEX. Files
 * written through such a mount land on disk with the owner's ids; the
 * host's mount table is untouched. It reports "maelys-launch identity U G"
 * on its stderr (the status channel).
 * With --cgroup-fd it joins the execution's memory cgroup, whose
 * cgroup.procs C is, before it starts bwrap or the listener, and refuses to
 * go on when it cannot (see start_join).
 * With --notify-fd it starts the denial listener (notify.c), a process of
 * its own outside the sandbox that receives the sandbox's listener on L
 * (whose peer P goes to bwrap, for the sandbox's init), and reports
 * "maelys-denial lost" if that process ends while the sandbox runs.
 *
 *   helper probe CHECK...
 *
 * As the payload of the backend's registration probes it performs checks and
 * prints "name=value" lines on stdout (see the probe in bwrap.c).
 *
 * It holds none of the payload's descriptors while the payload runs, so that
 * the host sees end-of-file when the payload closes its side.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>
#include <grp.h>
#include <stdint.h>
#include <time.h>

#include <cap-ng.h>
#include <jansson.h>
#include <linux/magic.h>
#include <linux/mount.h>

#include "pty.h"
#include "notify.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef MOUNT_ATTR_IDMAP
#define MOUNT_ATTR_IDMAP 0x00100000
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif

int maelys__executor_open_nofollow(const char* path);

static int status_fd = -1;

static void report(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char* fmt, ...) {
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0 || status_fd < 0)
    return;
  if ((size_t)n > sizeof line - 2)
    n = (int)sizeof line - 2;
  line[n++] = '\n';
  /* One write per line, below PIPE_BUF, so lines never interleave with the
   * launcher's own writes to the same channel. */
  ssize_t w;
  do
    w = write(status_fd, line, (size_t)n);
  while (w < 0 && errno == EINTR);
}

static const int forwarded[] = {SIGTERM, SIGINT,  SIGHUP,
                                SIGQUIT, SIGUSR1, SIGUSR2};

static void forward(int sig) {
  int saved = errno;
  /* As pid 1, kill(-1) reaches every other process of the namespace,
   * including descendants that double-forked into a new session. */
  kill(-1, sig);
  errno = saved;
}

static int parse_int(const char* s, int* out) {
  char* end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < 0 || v > 1 << 20)
    return -1;
  *out = (int)v;
  return 0;
}

static int parse_limit(const char* s, rlim_t* out) {
  if (strcmp(s, "inf") == 0) {
    *out = RLIM_INFINITY;
    return 0;
  }
  char* end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0')
    return -1;
  *out = (rlim_t)v;
  return 0;
}

static const struct {
  const char* name;
  int resource;
} rlimit_table[] = {
    {"cpu", RLIMIT_CPU},         {"fsize", RLIMIT_FSIZE},
    {"data", RLIMIT_DATA},       {"stack", RLIMIT_STACK},
    {"core", RLIMIT_CORE},       {"nofile", RLIMIT_NOFILE},
    {"as", RLIMIT_AS},           {"nproc", RLIMIT_NPROC},
    {"memlock", RLIMIT_MEMLOCK},
};

typedef struct rlimit_arg {
  int resource;
  struct rlimit value;
} rlimit_arg_t;

static int parse_rlimit(const char* s, rlimit_arg_t* out) {
  char buf[96];
  snprintf(buf, sizeof buf, "%s", s);
  char* c1 = strchr(buf, ':');
  char* c2 = c1 ? strchr(c1 + 1, ':') : NULL;
  if (c2 == NULL)
    return -1;
  *c1 = '\0';
  *c2 = '\0';
  out->resource = -1;
  for (size_t i = 0; i < sizeof rlimit_table / sizeof rlimit_table[0]; i++)
    if (strcmp(rlimit_table[i].name, buf) == 0)
      out->resource = rlimit_table[i].resource;
  if (out->resource < 0 || parse_limit(c1 + 1, &out->value.rlim_cur) != 0 ||
      parse_limit(c2 + 1, &out->value.rlim_max) != 0)
    return -1;
  return 0;
}

enum {
  STEP_FORK = 1,
  STEP_DUP,
  STEP_RLIMIT,
  STEP_CAPABILITIES,
  STEP_EXECVE,
  STEP_TERMINAL,
  STEP_LISTENER
};

static const char* step_name(int step) {
  switch (step) {
  case STEP_FORK:
    return "fork";
  case STEP_DUP:
    return "install-descriptors";
  case STEP_RLIMIT:
    return "setrlimit";
  case STEP_CAPABILITIES:
    return "drop-capabilities";
  case STEP_EXECVE:
    return "execve";
  case STEP_TERMINAL:
    return "terminal";
  case STEP_LISTENER:
    return "denial-listener";
  }
  return "unknown";
}

/* Closes every descriptor but `a` and `b`. */
static void close_all_but(int a, int b) {
  int lo = a < b ? a : b, hi = a < b ? b : a;
  if (lo > 0)
    syscall(SYS_close_range, 0u, (unsigned)lo - 1, 0u);
  if (hi > lo + 1)
    syscall(SYS_close_range, (unsigned)lo + 1, (unsigned)hi - 1, 0u);
  syscall(SYS_close_range, (unsigned)hi + 1, ~0U, 0u);
}

/* The terminal exists, and its master is the host's, before the payload
 * does; its slave waits far above the layout, like the pipe. The slave, or
 * -1 once the failure is reported. */
static int make_terminal(int terminal_fd, unsigned rows, unsigned columns,
                         int limit) {
  int slave = -1;
  int made = maelys__helper_terminal_make(terminal_fd, rows, columns);
  int made_errno = made < 0 ? -made : 0;
  if (made >= 0) {
    slave = fcntl(made, F_DUPFD_CLOEXEC, limit + 64);
    if (slave < 0)
      made_errno = errno;
    close(made);
  }
  if (slave < 0)
    report("maelys-init launch-failed %s %d", step_name(STEP_TERMINAL),
           made_errno);
  return slave;
}

static int init_main(int argc, char** argv) {
  int stderr_fd = -1, limit = -1;
  int keep[64];
  size_t keep_count = 0;
  rlimit_arg_t limits[16];
  size_t limit_count = 0;
  const char* exec_path = NULL;
  int tasks = 0;
  int terminal_fd = -1;
  unsigned rows = 0, columns = 0;
  int notify_fd = -1;
  bool notify_network = false;
  int i = 2;
  /* Before anything of the sandbox can look: /proc/1/fd and ptrace need a
   * dumpable target, and this process holds the status channel. */
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  for (; i < argc; i++) {
    const char* a = argv[i];
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if (i + 1 >= argc)
      goto usage;
    if (strcmp(a, "--status-fd") == 0) {
      if (parse_int(argv[++i], &status_fd) != 0)
        goto usage;
    } else if (strcmp(a, "--stderr-fd") == 0) {
      if (parse_int(argv[++i], &stderr_fd) != 0)
        goto usage;
    } else if (strcmp(a, "--limit") == 0) {
      if (parse_int(argv[++i], &limit) != 0)
        goto usage;
    } else if (strcmp(a, "--keep-fd") == 0) {
      if (keep_count >= 64 || parse_int(argv[++i], &keep[keep_count++]) != 0)
        goto usage;
    } else if (strcmp(a, "--rlimit") == 0) {
      if (limit_count >= 16 || parse_rlimit(argv[++i], &limits[limit_count++]))
        goto usage;
    } else if (strcmp(a, "--tasks") == 0) {
      if (parse_int(argv[++i], &tasks) != 0 || tasks < 1)
        goto usage;
    } else if (strcmp(a, "--setenv") == 0) {
      if (i + 2 >= argc || setenv(argv[i + 1], argv[i + 2], 1) != 0)
        goto usage;
      i += 2;
    } else if (strcmp(a, "--unsetenv") == 0) {
      if (unsetenv(argv[++i]) != 0)
        goto usage;
    } else if (strcmp(a, "--terminal-fd") == 0) {
      if (parse_int(argv[++i], &terminal_fd) != 0)
        goto usage;
    } else if (strcmp(a, "--terminal-size") == 0) {
      if (sscanf(argv[++i], "%ux%u", &rows, &columns) != 2 || rows < 1 ||
          rows > 65535 || columns < 1 || columns > 65535)
        goto usage;
    } else if (strcmp(a, "--exec") == 0) {
      exec_path = argv[++i];
    } else if (strcmp(a, "--notify-fd") == 0) {
      if (parse_int(argv[++i], &notify_fd) != 0 || notify_fd < 3)
        goto usage;
    } else if (strcmp(a, "--notify-network") == 0) {
      notify_network = strcmp(argv[++i], "deny") == 0;
      if (!notify_network && strcmp(argv[i], "allow") != 0)
        goto usage;
    } else {
      goto usage;
    }
  }
  if (status_fd < 0 || stderr_fd < 0 || limit < 3 || exec_path == NULL ||
      i >= argc || (terminal_fd >= 0) != (rows > 0))
    goto usage;
  char** payload_argv = argv + i;
  fcntl(status_fd, F_SETFD, FD_CLOEXEC);
  if (terminal_fd >= 0)
    fcntl(terminal_fd, F_SETFD, FD_CLOEXEC);

  /* Die with the supervisor, without a window. bwrap arms the sandbox's
   * parent-death signal only just before it execs us, and does not check
   * that its monitor is still there: a supervisor killed during the
   * sandbox's setup took the monitor with it and left this process, the
   * namespace's pid 1, and its payload running, reparented to the host's
   * init (test_sigkill_of_cli_leaves_nothing caught it). So: arm the signal
   * again, then look at the supervisor itself, which holds the only read
   * end of the status pipe. If it is gone, end the namespace now; if it
   * goes later, the monitor dies with it and the armed signal kills us. */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
    return 127;
  struct pollfd supervisor = {.fd = status_fd, .events = 0};
  if (poll(&supervisor, 1, 0) < 0 ||
      (supervisor.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0)
    return 127;

  /* Handlers first, so that from "ready" on a graceful signal is never lost.
   */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = forward;
  sa.sa_flags = SA_RESTART;
  sigfillset(&sa.sa_mask);
  for (size_t k = 0; k < sizeof forwarded / sizeof forwarded[0]; k++)
    sigaction(forwarded[k], &sa, NULL);

  /* The denial listener: stacked before the payload exists, and out of the
   * sandbox before it does (notify.c). A launch that cannot attach it fails:
   * the calls it watches would still be refused, but unseen, and the
   * network calls with ENOSYS instead of the promised EPERM. */
  if (notify_fd >= 0) {
    int r = maelys__notify_attach(notify_fd, notify_network);
    if (r != 0) {
      report("maelys-init launch-failed %s %d", step_name(STEP_LISTENER), -r);
      return 127;
    }
  }

  /* The exec-error pipe lives far above the layout so the payload's
   * descriptor work cannot touch it. */
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    report("maelys-init launch-failed %s %d", step_name(STEP_FORK), errno);
    return 127;
  }
  int rd = fcntl(pipefd[0], F_DUPFD_CLOEXEC, limit + 64);
  int wr = fcntl(pipefd[1], F_DUPFD_CLOEXEC, limit + 64);
  close(pipefd[0]);
  close(pipefd[1]);

  int slave = -1;
  if (terminal_fd >= 0 &&
      (slave = make_terminal(terminal_fd, rows, columns, limit)) < 0)
    return 127;

  sigset_t all, old;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, &old);
  pid_t child = fork();
  if (child == 0) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++)
      sigaction(sig, &dfl, NULL);
    int step = 0, err = 0;
    if (dup2(stderr_fd, 2) < 0) {
      step = STEP_DUP;
      err = errno;
    }
    /* Invariant 5 inside the sandbox: below the limit only the layout and
     * the kept descriptors survive; above it everything closes on exec. */
    for (int fd = 3; step == 0 && fd < limit; fd++) {
      bool kept = false;
      for (size_t k = 0; k < keep_count; k++)
        if (keep[k] == fd)
          kept = true;
      if (!kept)
        close(fd);
    }
    if (step == 0 && slave >= 0 &&
        (err = -maelys__helper_terminal_attach(slave)) != 0)
      step = STEP_TERMINAL;
    if (step == 0 && syscall(SYS_close_range, (unsigned)limit, ~0U,
                             CLOSE_RANGE_CLOEXEC) != 0) {
      for (int fd = limit; fd < 65536; fd++)
        if (fd != wr)
          fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    for (size_t k = 0; step == 0 && k < limit_count; k++)
      if (setrlimit(limits[k].resource, &limits[k].value) != 0) {
        step = STEP_RLIMIT;
        err = errno;
      }
    /* The sandbox-wide task ceiling: the user namespace is the sandbox's
     * own, so its count of this uid's tasks is the sandbox's (this init
     * included). A lower plan rlimit for nproc, set above, still wins. */
    struct rlimit nproc;
    if (step == 0 && tasks > 0 && getrlimit(RLIMIT_NPROC, &nproc) == 0 &&
        (nproc.rlim_max == RLIM_INFINITY || nproc.rlim_max > (rlim_t)tasks)) {
      nproc.rlim_cur = nproc.rlim_max = (rlim_t)tasks;
      if (setrlimit(RLIMIT_NPROC, &nproc) != 0) {
        step = STEP_RLIMIT;
        err = errno;
      }
    }
    /* bwrap --cap-drop ALL already left none; checked again here with
     * libcap-ng, and cleared if any survived, before the payload runs. */
    if (step == 0) {
      capng_get_caps_process();
      if (capng_have_capabilities(CAPNG_SELECT_BOTH) != CAPNG_NONE) {
        capng_clear(CAPNG_SELECT_BOTH);
        if (capng_apply(CAPNG_SELECT_BOTH) != 0) {
          step = STEP_CAPABILITIES;
          err = EPERM;
        }
      }
    }
    if (step == 0) {
      sigset_t empty;
      sigemptyset(&empty);
      sigprocmask(SIG_SETMASK, &empty, NULL);
      execve(exec_path, payload_argv, environ);
      step = STEP_EXECVE;
      err = errno;
    }
    int rec[2] = {step, err};
    ssize_t w = write(wr, rec, sizeof rec);
    (void)w;
    _exit(127);
  }
  int fork_errno = errno;
  sigprocmask(SIG_SETMASK, &old, NULL);
  close(wr);
  if (child < 0) {
    report("maelys-init launch-failed %s %d", step_name(STEP_FORK), fork_errno);
    return 127;
  }
  /* The payload's descriptors are the payload's: holding them here would
   * hide its end-of-file from the host. */
  close_all_but(status_fd, rd);
  report("maelys-init ready");

  int rec[2];
  ssize_t n;
  do
    n = read(rd, rec, sizeof rec);
  while (n < 0 && errno == EINTR);
  close(rd);
  int status = 0;
  if (n == (ssize_t)sizeof rec) {
    report("maelys-init launch-failed %s %d", step_name(rec[0]), rec[1]);
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
      ;
    return 127;
  }

  /* Reap everything; stop when the payload itself is gone. */
  for (;;) {
    pid_t p = wait(&status);
    if (p < 0) {
      if (errno == EINTR)
        continue;
      report("maelys-init exit code 127");
      return 127;
    }
    if (p == child)
      break;
  }
  if (WIFSIGNALED(status)) {
    report("maelys-init exit signal %d", WTERMSIG(status));
    return 128 + WTERMSIG(status);
  }
  report("maelys-init exit code %d", WEXITSTATUS(status));
  return WEXITSTATUS(status);
usage:
  report("maelys-init launch-failed usage %d", EINVAL);
  fprintf(stderr, "maelys-executor-helper: init: invalid arguments\n");
  return 127;
}

/* ---------------------------------------------------------------- launch */

static int launch_fail(const char* step, const char* what, int err) {
  /* stderr is the launch's status channel: this line becomes the launch
   * error the host reports. */
  fprintf(stderr, "maelys-launch: %s%s%s: %s\n", step, what ? " " : "",
          what ? what : "", strerror(err));
  return 127;
}

/*
 * Starts fn(arg) in a child that borrows this process's memory until it
 * executes a program or exits, on a stack of its own (clone with CLONE_VM
 * and CLONE_VFORK, as posix_spawn does); this process waits meanwhile. A
 * fork copies the launcher's page tables: about a millisecond per child on
 * a paravirtualised 2-core guest, where a launch starts children that
 * only execute a program (the uid probe, bwrap). fn makes only
 * system calls -- no allocation and no stdio, whose locks and buffers are
 * this process's (child_fail writes its line itself) -- and ends by
 * executing a program or returning its exit status. The caller has every
 * signal it handles blocked, so no handler runs on the borrowed memory.
 */
static pid_t spawn_vm(int (*fn)(void*), void* arg) {
  static unsigned char stack[64 * 1024] __attribute__((aligned(16)));
  return clone(fn, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, arg);
}

/* launch_fail for a spawn_vm child: the same line, written without stdio. */
static int child_fail(const char* step, const char* what, int err) {
  char line[512];
  int n = snprintf(line, sizeof line, "maelys-launch: %s%s%s: %s\n", step,
                   what ? " " : "", what ? what : "", strerror(err));
  if (n > 0 &&
      write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0)
    return 127;
  return 127;
}

static int parse_u64(const char* s, unsigned long long* out) {
  char* end;
  errno = 0;
  *out = strtoull(s, &end, 10);
  return errno != 0 || end == s || *end != '\0' ? -1 : 0;
}

static int parse_pair(const char* s, unsigned long long* a,
                      unsigned long long* b) {
  char buf[64];
  snprintf(buf, sizeof buf, "%s", s);
  char* colon = strchr(buf, ':');
  if (colon == NULL)
    return -1;
  *colon = '\0';
  return parse_u64(buf, a) || parse_u64(colon + 1, b) ? -1 : 0;
}

/* Whether any process of uid runs anywhere on the host (in any pid or user
 * namespace): the kernel counts a uid's tasks across user namespaces, and a
 * set*uid() that takes a uid already at its RLIMIT_NPROC makes the next
 * execve fail with EAGAIN. With the limit at 0, "at the limit" means "one
 * other task". This sees what a lock cannot: the processes of a sandbox
 * whose launcher died a moment ago and that the kernel is still killing. */
typedef struct uid_probe {
  uid_t uid;
  gid_t gid;
} uid_probe_t;

static int uid_probe_child(void* arg) {
  const uid_probe_t* p = arg;
  struct rlimit none = {0, 0};
  char* empty[] = {NULL};
  /* Raw calls: glibc's setresuid would signal the threads of the memory
   * this child borrows. The credentials and the limit are this child's. */
  if (syscall(SYS_prlimit64, 0, RLIMIT_NPROC, &none, NULL) != 0 ||
      syscall(SYS_setresgid, p->gid, p->gid, p->gid) != 0 ||
      syscall(SYS_setresuid, p->uid, p->uid, p->uid) != 0)
    return 3;
  syscall(SYS_execveat, -1, "", empty, empty, AT_EMPTY_PATH);
  return errno == EAGAIN ? 1 : errno == EBADF ? 0 : 3;
}

static int identity_in_use(uid_t uid, gid_t gid) {
  uid_probe_t probe = {uid, gid};
  pid_t pid = spawn_vm(uid_probe_child, &probe);
  if (pid < 0)
    return -errno;
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return -errno;
  if (!WIFEXITED(status) || WEXITSTATUS(status) > 1)
    return -EIO;
  return WEXITSTATUS(status);
}

/* Host ids an identity must not take: [first, first + count). */
typedef struct id_span {
  unsigned long long first, count;
} id_span_t;

/* Whether `id` lies in one of the fields after `key` in a /proc status
 * text ("Uid:\t0\t0\t0\t0"). */
static bool status_holds(const char* text, const char* key,
                         unsigned long long id) {
  const char* line = strstr(text, key);
  if (line == NULL)
    return false;
  const char* p = line + strlen(key);
  for (;;) {
    while (*p == ' ' || *p == '\t')
      p++;
    if (*p < '0' || *p > '9')
      return false;
    char* end;
    unsigned long long v = strtoull(p, &end, 10);
    if (v == id)
      return true;
    p = end;
  }
}

/* Reads a small /proc file of process `pid` into buf; false when the
 * process is gone (or the file unreadable). */
static bool read_proc_file(int proc, const char* pid, const char* name,
                           char* buf, size_t size) {
  char path[300];
  snprintf(path, sizeof path, "%.255s/%.32s", pid, name);
  int fd = openat(proc, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  size_t n = 0;
  ssize_t r;
  while (n + 1 < size && (r = read(fd, buf + n, size - 1 - n)) != 0) {
    if (r < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    n += (size_t)r;
  }
  close(fd);
  buf[n] = '\0';
  return n > 0;
}

/* The span of a uid_map or gid_map line ("inside outside count") whose
 * outside range holds `id`; false when none does. The outside ids are read
 * in this process's user namespace, the host's. */
static bool map_holds(const char* text, unsigned long long id, id_span_t* out) {
  for (const char* line = text; line != NULL && *line != '\0';) {
    unsigned long long inside, outside, count;
    if (sscanf(line, "%llu %llu %llu", &inside, &outside, &count) == 3 &&
        id >= outside && id - outside < count) {
      out->first = outside;
      out->count = count;
      return true;
    }
    line = strchr(line, '\n');
    if (line != NULL)
      line++;
  }
  return false;
}

/* The host process's user-database service (--userdb-fd, see
 * MAELYS_BACKEND_FD_USERDB in backend.h), required with an identity. This
 * helper is linked statically, and glibc then loads the NSS modules
 * (systemd's, sss's) into a static process, where they crash (seen:
 * _nss_systemd_is_blocked, SIGSEGV). The host answers from its own
 * databases: it is dynamically linked and loads the modules once, where
 * getent(1), asked before, was two program starts per launch (15% of a
 * root launch's CPU). */
static int userdb_fd = -1;
/* The error a database answered with ("error N"), reported as such. */
static int userdb_error;
/* How long an answer may take: a directory service that never returns (the
 * host's one thread that answers waits in it) refuses the launch instead of
 * holding it for good. */
#define USERDB_ANSWER_MS 10000

/* Asks the host whether uid names a user or gid a group: 0, or a negative
 * errno. */
static int userdb_ask(uid_t uid, gid_t gid) {
  char q[48];
  int n = snprintf(q, sizeof q, "%u %u\n", (unsigned)uid, (unsigned)gid);
  ssize_t w;
  do
    w = send(userdb_fd, q, (size_t)n, MSG_NOSIGNAL);
  while (w < 0 && errno == EINTR);
  return w == n ? 0 : w < 0 ? -errno : -EIO;
}

/* The host's answer to the question userdb_ask sent (`sent`, what it
 * returned): 'u' (uid names a user), 'g' (gid names a group), 0 (neither),
 * or a negative errno: -EREMOTEIO when a database could not answer (its
 * error in userdb_error), -ECONNRESET or -EPIPE when the host hung up (a
 * malformed question, or the host is gone), -ETIMEDOUT past
 * USERDB_ANSWER_MS, -EBADMSG for an answer that is none of these. One question
 * is in flight at a time, so a read never takes more than its answer. */
static int userdb_answer(int sent) {
  if (sent < 0)
    return sent;
  char line[32];
  size_t len = 0;
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  while (len == 0 || line[len - 1] != '\n') {
    if (len + 1 >= sizeof line)
      return -EBADMSG;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long spent = (now.tv_sec - start.tv_sec) * 1000 +
                 (now.tv_nsec - start.tv_nsec) / 1000000;
    struct pollfd p = {.fd = userdb_fd, .events = POLLIN};
    int ready = spent < USERDB_ANSWER_MS
                    ? poll(&p, 1, (int)(USERDB_ANSWER_MS - spent))
                    : 0;
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready == 0)
      return -ETIMEDOUT;
    ssize_t r = read(userdb_fd, line + len, sizeof line - 1 - len);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return -errno;
    if (r == 0)
      return -ECONNRESET;
    len += (size_t)r;
  }
  line[len] = '\0';
  int err = 0;
  if (strcmp(line, "user\n") == 0)
    return 'u';
  if (strcmp(line, "group\n") == 0)
    return 'g';
  if (strcmp(line, "none\n") == 0)
    return 0;
  if (sscanf(line, "error %d\n", &err) == 1) {
    userdb_error = err > 0 && err < 4096 ? err : EIO;
    return -EREMOTEIO;
  }
  return -EBADMSG;
}

/* Nothing more to ask, and nothing started from here on may inherit the
 * socket. The host closes its end first (its service sees this end shut
 * for writing), and this launcher waits for that, a second at most: so the
 * host's descriptor is gone before anything of the sandbox starts, and an
 * execution leaves no descriptor in the host once it ended (test-mcp-host
 * counts them; the service's close came late under ASan). */
static void userdb_hang_up(void) {
  shutdown(userdb_fd, SHUT_WR);
  struct pollfd p = {.fd = userdb_fd, .events = POLLIN};
  char c;
  if (poll(&p, 1, 1000) > 0 && read(userdb_fd, &c, 1) < 0)
    c = 0;
  close(userdb_fd);
  userdb_fd = -1;
}

/*
 * Whether a host process, a user namespace or the user database already has
 * uid or gid (invariant 20). The kernel's count of a uid's processes (see
 * identity_in_use) is kept per user namespace *owner*: a process that runs
 * as host uid X inside a user namespace root created (as container managers
 * do, with a mapping /etc/subuid does not list) is charged to root, not to
 * X, and that probe misses it. So every process the host's /proc shows is
 * read too:
 *   - its Uid and Gid lines (real, effective, saved and filesystem ids) and
 *     its supplementary groups;
 *   - the uid_map and gid_map of its user namespace, when that is not this
 *     process's own (whose map is the identity): a mapped range covers host
 *     ids some process of that namespace can take at any time, even if none
 *     runs as them yet;
 * and the user and group databases (NSS, asked of the host: see userdb_fd),
 * which name ids no process holds yet. Returns 1 with `why` (and, in *span, the
 * host ids known to be taken along with it) when the identity is not free, 0
 * when it is, or a negative errno.
 */
/* The user namespaces whose maps one walk has read: a set of nsfs inode
 * numbers (never 0), open-addressed, with room for every namespace of a
 * host that runs thousands of sandboxes (one or two each). It held 256:
 * past that, every process of every other sandbox had both its maps read
 * again, which made each launch beside a thousand sandboxes read thousands
 * of maps. When full, a namespace is read again: slower, never wrong. */
#define NS_SEEN_SLOTS 16384u
typedef struct ns_seen {
  uint64_t slot[NS_SEEN_SLOTS];
  size_t count;
} ns_seen_t;

/* Whether `ino` is in the set; added when it is not (while there is room). */
static bool ns_seen_add(ns_seen_t* s, uint64_t ino) {
  size_t h = (size_t)(ino * 0x9E3779B97F4A7C15ULL);
  for (size_t i = 0; i < NS_SEEN_SLOTS; i++) {
    uint64_t* p = &s->slot[(h + i) & (NS_SEEN_SLOTS - 1)];
    if (*p == ino)
      return true;
    if (*p == 0) {
      if (s->count < NS_SEEN_SLOTS / 4 * 3) {
        *p = ino;
        s->count++;
      }
      return false;
    }
  }
  return false;
}

static int proc_conflict(uid_t uid, gid_t gid, char* why, size_t size,
                         id_span_t* span) {
  struct stat self_ns;
  bool know_self = stat("/proc/self/ns/user", &self_ns) == 0;
  int proc = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (proc < 0)
    return -errno;
  DIR* d = fdopendir(proc);
  if (d == NULL) {
    int e = errno;
    close(proc);
    return -e;
  }
  /* The user namespaces whose maps were read already. */
  static ns_seen_t seen;
  memset(&seen, 0, sizeof seen);
  int found = 0;
  static char text[16384];
  struct dirent* e;
  while (found == 0 && (e = readdir(d)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    const char* pid = e->d_name;
    if (read_proc_file(proc, pid, "status", text, sizeof text)) {
      /* A zombie holds nothing any more: it runs no code and its user
       * namespace is gone with it. Orphaned sandboxes of a killed host stay
       * zombies until init reaps them, which some inits do seconds late;
       * counting them ran a small identity range dry. */
      if (strstr(text, "\nState:\tZ") != NULL)
        continue;
      bool by_uid = status_holds(text, "\nUid:", uid);
      if (by_uid || status_holds(text, "\nGid:", gid) ||
          status_holds(text, "\nGroups:", gid)) {
        snprintf(why, size, "process %s has %s %u", pid, by_uid ? "uid" : "gid",
                 by_uid ? (unsigned)uid : (unsigned)gid);
        found = 1;
        break;
      }
    }
    char path[300];
    struct stat ns;
    snprintf(path, sizeof path, "%.255s/ns/user", pid);
    if (fstatat(proc, path, &ns, 0) == 0) {
      if (know_self && ns.st_dev == self_ns.st_dev &&
          ns.st_ino == self_ns.st_ino)
        continue;
      if (ns_seen_add(&seen, (uint64_t)ns.st_ino))
        continue;
    }
    static const char* const maps[] = {"uid_map", "gid_map"};
    for (int m = 0; m < 2 && found == 0; m++) {
      unsigned long long id = m == 0 ? uid : gid;
      id_span_t hit;
      if (!read_proc_file(proc, pid, maps[m], text, sizeof text) ||
          !map_holds(text, id, &hit))
        continue;
      /* The whole id space mapped onto itself is this namespace's own map
       * (read where the namespace could not be compared). */
      if (hit.first == 0 && hit.count == 4294967295ULL)
        continue;
      snprintf(why, size,
               "the user namespace of process %s maps host %ss %llu-%llu", pid,
               m == 0 ? "uid" : "gid", hit.first, hit.first + hit.count - 1);
      if (m == 0)
        *span = hit;
      found = 1;
    }
  }
  closedir(d);
  return found;
}

static int identity_conflict(uid_t uid, gid_t gid, char* why, size_t size,
                             id_span_t* span) {
  span->first = uid;
  span->count = 1;
  /* The user and group databases: an id that names a user or a group is
   * someone's, whether or not a process has it now. The host is asked
   * first, and answers while /proc is read. */
  int sent = userdb_ask(uid, gid);
  int found = proc_conflict(uid, gid, why, size, span);
  /* The host's answer is read even then: the next question's answer must
   * not be taken for this one's. An answer that did not come (the deadline
   * passed, the host hung up) or made no sense refuses the launch even
   * when the scan refused this identity already: a late answer would
   * otherwise be read as the next identity's (the review took a uid the
   * user database names that way). */
  int answer = userdb_answer(sent);
  if (answer < 0)
    return answer;
  if (found != 0)
    return found;
  if (answer == 'u')
    snprintf(why, size, "uid %u names a user in the user database",
             (unsigned)uid);
  if (answer == 'g')
    snprintf(why, size, "gid %u names a group in the group database",
             (unsigned)gid);
  return answer != 0;
}

/* Takes a host identity no other process holds: the lock byte of each uid
 * (offset uid in the lock file, an OFD lock held by this process until it
 * exits), then the kernel's count of the uid's processes, then every process,
 * user namespace and database entry (identity_conflict). The uid and gid
 * of candidate k are uid_first + k and gid_first + k. Ids found taken in a
 * span (a mapped range) are skipped without another scan; `why` says why
 * the last one was refused. */
static int take_identity(int lock_fd, unsigned long long uid_first,
                         unsigned long long gid_first, unsigned long long count,
                         uid_t* uid, gid_t* gid, char* why, size_t why_size) {
  unsigned long long start = 0;
  if (count > 1) {
    unsigned int seed = 0;
    if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed)
      seed = (unsigned)getpid() ^ (unsigned)time(NULL);
    start = seed % count;
  }
  snprintf(why, why_size, "another launcher holds it");
  id_span_t taken[64];
  size_t taken_count = 0;
  for (unsigned long long k = 0; k < count; k++) {
    unsigned long long off = (start + k) % count;
    unsigned long long id = uid_first + off;
    bool known = false;
    for (size_t t = 0; t < taken_count && !known; t++)
      known = id >= taken[t].first && id - taken[t].first < taken[t].count;
    if (known)
      continue;
    struct flock lock = {.l_type = F_WRLCK,
                         .l_whence = SEEK_SET,
                         .l_start = (off_t)id,
                         .l_len = 1};
    if (fcntl(lock_fd, F_OFD_SETLK, &lock) != 0) {
      if (errno == EAGAIN || errno == EACCES)
        continue; /* another launcher holds it */
      return -errno;
    }
    int used = identity_in_use((uid_t)id, (gid_t)(gid_first + off));
    if (used == 1)
      snprintf(why, why_size, "a process of uid %llu runs", id);
    id_span_t span = {id, 1};
    if (used == 0)
      used = identity_conflict((uid_t)id, (gid_t)(gid_first + off), why,
                               why_size, &span);
    if (used == 0) {
      *uid = (uid_t)id;
      *gid = (gid_t)(gid_first + off);
      return 0;
    }
    lock.l_type = F_UNLCK;
    fcntl(lock_fd, F_OFD_SETLK, &lock);
    if (used < 0)
      return used;
    if (span.count > 1 && taken_count < sizeof taken / sizeof taken[0])
      taken[taken_count++] = span;
  }
  return -EBUSY;
}

/* The cgroup a join is for: the directory of the cgroup.procs file the
 * core opened, as this process's mount table names it. */
typedef struct join {
  pid_t child;
  char dir[PATH_MAX];
} join_t;

/*
 * Joins the memory cgroup whose cgroup.procs is `fd`, from a child that
 * writes this process's pid there while this one goes on taking its
 * identity: every migration waits for an RCU grace period of the kernel's
 * cgroup threadgroup lock (measured 5-13 ms on a v1 hierarchy here), which
 * the core's spawning child used to spend with the host's thread held.
 * Forks meanwhile are not held for that wait, only for the move itself. 0
 * or a negative errno; join_wait says whether it joined. The descriptor
 * must be a cgroup.procs file: a write of a pid to any other cgroup file
 * (cgroup.clone_children, cgroup.max.depth) succeeds without moving
 * anything, and to anything else proves nothing either.
 */
static int start_join(int fd, join_t* j) {
  struct statfs fs;
  if (fstatfs(fd, &fs) != 0)
    return -errno;
  if (fs.f_type != CGROUP_SUPER_MAGIC && fs.f_type != CGROUP2_SUPER_MAGIC)
    return -EBADF;
  char link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, j->dir, sizeof j->dir - 1);
  if (n <= 0 || (size_t)n >= sizeof j->dir - 1)
    return -EBADF;
  j->dir[n] = '\0';
  char* slash = strrchr(j->dir, '/');
  if (slash == NULL || strcmp(slash, "/cgroup.procs") != 0)
    return -EBADF;
  *slash = '\0';
  /* This process as its own pid namespace names it (1 for the namespace's
   * init), which is how cgroup.procs reads a pid written from the same
   * namespace; the child writes it only while this process is its parent,
   * and dies with it. */
  pid_t self = getpid();
  pid_t pid = fork();
  if (pid < 0)
    return -errno;
  if (pid == 0) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != self)
      _exit(125);
    char buf[24];
    int len = snprintf(buf, sizeof buf, "%d", (int)self);
    if (write(fd, buf, (size_t)len) == (ssize_t)len)
      _exit(0);
    _exit(errno > 0 && errno < 125 ? errno : 125);
  }
  j->child = pid;
  return 0;
}

/* Whether /proc/self/cgroup places this process in the cgroup whose
 * directory (a path under a cgroup mount) is `dir`: some hierarchy's path
 * for it, not the root, ends `dir`. */
static bool in_cgroup(const char* dir) {
  FILE* f = fopen("/proc/self/cgroup", "re");
  if (f == NULL)
    return false;
  char line[PATH_MAX + 128];
  size_t dlen = strlen(dir);
  bool found = false;
  while (!found && fgets(line, sizeof line, f) != NULL) {
    line[strcspn(line, "\n")] = '\0';
    char* path = strchr(line, ':');
    path = path != NULL ? strchr(path + 1, ':') : NULL;
    if (path == NULL || strcmp(++path, "/") == 0)
      continue;
    size_t plen = strlen(path);
    found = plen <= dlen && strcmp(dir + dlen - plen, path) == 0;
  }
  fclose(f);
  return found;
}

/* 0 once the child of start_join moved this process and the kernel says
 * this process is in that cgroup, else an errno. */
static int join_wait(const join_t* j) {
  int status;
  while (waitpid(j->child, &status, 0) < 0)
    if (errno != EINTR)
      return errno;
  if (!WIFEXITED(status) || WEXITSTATUS(status) == 125)
    return EIO;
  if (WEXITSTATUS(status) != 0)
    return WEXITSTATUS(status);
  return in_cgroup(j->dir) ? 0 : ESRCH;
}

/* A user namespace mapping owner:group to uid:gid, whose descriptor gives an
 * idmapped mount its mapping. A child created in it lives only until its
 * maps are written. */
static int idmap_userns(uid_t owner, gid_t group, uid_t uid, gid_t gid) {
  int sync[2];
  if (pipe2(sync, O_CLOEXEC) != 0)
    return -errno;
  pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL,
                             NULL, NULL);
  if (pid == 0) {
    char c;
    close(sync[1]);
    while (read(sync[0], &c, 1) < 0 && errno == EINTR)
      ;
    _exit(0);
  }
  int err = pid < 0 ? errno : 0;
  close(sync[0]);
  int fd = -1;
  if (pid > 0) {
    static const char* const files[] = {"uid_map", "setgroups", "gid_map"};
    for (int f = 0; f < 3 && err == 0; f++) {
      char path[64], text[64];
      snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, files[f]);
      int n = f == 0   ? snprintf(text, sizeof text, "%u %u 1\n", owner, uid)
              : f == 1 ? snprintf(text, sizeof text, "deny")
                       : snprintf(text, sizeof text, "%u %u 1\n", group, gid);
      int m = open(path, O_WRONLY | O_CLOEXEC);
      if (m < 0 || write(m, text, (size_t)n) != n)
        err = errno ? errno : EIO;
      if (m >= 0)
        close(m);
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
    if (err == 0 && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
      err = errno;
  }
  close(sync[1]);
  if (pid > 0)
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
      ;
  if (err != 0 && fd >= 0)
    close(fd);
  return err != 0 ? -err : fd;
}

typedef struct stage_arg {
  const char* index;
  const char* source;
  unsigned long long dev, ino;
  bool is_dir;
} stage_arg_t;

/* Stages every bind that the sandbox identity needs through an idmapped
 * clone (see the launch comment at the top). */
static int stage_binds(const char* dir, const stage_arg_t* stages, size_t count,
                       uid_t uid, gid_t gid) {
  if (count == 0)
    return 0;
  /* A private namespace, slave so nothing propagates back to the host, with
   * a small tmpfs on the staging directory: the clones live there and
   * vanish with it. */
  if (unshare(CLONE_NEWNS) != 0)
    return launch_fail("unshare mount namespace", NULL, errno);
  if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0)
    return launch_fail("make mounts slave", NULL, errno);
  /* This process is pid 1 of its own pid namespace, but /proc is still the
   * host's: pids this process sees (its children's) would name other
   * processes there. A procfs of this namespace, in this private mount
   * namespace only, makes /proc/PID mean what the pid says. */
  if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) !=
      0)
    return launch_fail("mount the launcher's /proc", NULL, errno);
  if (mount("maelys-staging", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
            "size=65536,mode=0755") != 0)
    return launch_fail("mount staging tmpfs on", dir, errno);
  struct {
    uid_t owner;
    gid_t group;
    int fd;
  } maps[16];
  size_t map_count = 0;
  int r = 0;
  for (size_t i = 0; i < count && r == 0; i++) {
    const stage_arg_t* sg = &stages[i];
    int src = maelys__executor_open_nofollow(sg->source);
    if (src < 0) {
      r = launch_fail("open without following symlinks", sg->source, -src);
      break;
    }
    struct stat st;
    if (fstat(src, &st) != 0) {
      r = launch_fail("stat", sg->source, errno);
    } else if ((unsigned long long)st.st_dev != sg->dev ||
               (unsigned long long)st.st_ino != sg->ino ||
               (S_ISDIR(st.st_mode) != 0) != sg->is_dir) {
      r = launch_fail("source changed since it was checked", sg->source,
                      ESTALE);
    }
    int ns = -1;
    for (size_t m = 0; r == 0 && m < map_count; m++)
      if (maps[m].owner == st.st_uid && maps[m].group == st.st_gid)
        ns = maps[m].fd;
    if (r == 0 && ns < 0) {
      ns = idmap_userns(st.st_uid, st.st_gid, uid, gid);
      if (ns < 0)
        r = launch_fail("create the idmapping user namespace for", sg->source,
                        -ns);
      else if (map_count < sizeof maps / sizeof maps[0])
        maps[map_count++] = (typeof(maps[0])){st.st_uid, st.st_gid, ns};
    }
    int tree = -1;
    if (r == 0) {
      tree = (int)syscall(SYS_open_tree, src, "",
                          OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH |
                              AT_RECURSIVE);
      if (tree < 0)
        r = launch_fail("clone (open_tree)", sg->source, errno);
    }
    if (r == 0) {
      struct mount_attr attr;
      memset(&attr, 0, sizeof attr);
      attr.attr_set = MOUNT_ATTR_IDMAP;
      attr.userns_fd = (unsigned)ns;
      if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE,
                  &attr, sizeof attr) != 0)
        r = launch_fail("idmap (mount_setattr; does the filesystem support "
                        "idmapped mounts?)",
                        sg->source, errno);
    }
    char target[4096];
    snprintf(target, sizeof target, "%s/%s", dir, sg->index);
    if (r == 0 && sg->is_dir && mkdir(target, 0755) != 0)
      r = launch_fail("create", target, errno);
    if (r == 0 && !sg->is_dir) {
      int f = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (f < 0)
        r = launch_fail("create", target, errno);
      else
        close(f);
    }
    if (r == 0 && syscall(SYS_move_mount, tree, "", AT_FDCWD, target,
                          MOVE_MOUNT_F_EMPTY_PATH) != 0)
      r = launch_fail("attach (move_mount)", target, errno);
    if (tree >= 0)
      close(tree);
    close(src);
  }
  for (size_t m = 0; m < map_count; m++)
    close(maps[m].fd);
  return r;
}

static const int launch_forwarded[] = {SIGTERM, SIGINT,  SIGHUP,
                                       SIGQUIT, SIGUSR1, SIGUSR2};

/* Takes the sandbox's host identity (--identity or --identity-range, see
 * take_identity) under the lock file at `lock_path`, and reports it on the
 * status channel: 0, or launch_fail's status. The lock's descriptor stays
 * open, and locked, until this process exits. */
static int become_identity(const char* lock_path, bool fixed,
                           unsigned long long id_a, unsigned long long id_b,
                           uid_t* uid, gid_t* gid) {
  int lock_fd =
      open(lock_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  struct stat lst;
  if (lock_fd < 0)
    return launch_fail("open the identity lock", lock_path, errno);
  if (fstat(lock_fd, &lst) != 0 || !S_ISREG(lst.st_mode) || lst.st_uid != 0 ||
      (lst.st_mode & 022) != 0)
    return launch_fail("the identity lock is not a root-owned file", lock_path,
                       EPERM);
  char why[512], what[600];
  fcntl(userdb_fd, F_SETFD, FD_CLOEXEC);
  int r = take_identity(lock_fd, id_a, fixed ? id_b : id_a, fixed ? 1 : id_b,
                        uid, gid, why, sizeof why);
  userdb_hang_up();
  snprintf(what, sizeof what, fixed ? "%s" : "(the last one refused: %s)", why);
  if (r == -EBUSY)
    return launch_fail(fixed ? "the requested identity is in use:"
                             : "every identity of the range is in use",
                       what, EBUSY);
  if (r == -EREMOTEIO)
    return launch_fail("the host's user and group databases could not say "
                       "whether the identity is someone's",
                       NULL, userdb_error);
  if (r == -ECONNRESET || r == -EPIPE || r == -EBADMSG || r == -ETIMEDOUT)
    return launch_fail("ask the host's user and group databases about the "
                       "identity",
                       NULL, -r);
  if (r != 0)
    return launch_fail("take a host identity", NULL, -r);
  fprintf(stderr, "maelys-launch identity %u %u\n", (unsigned)*uid,
          (unsigned)*gid);
  fflush(stderr);
  return 0;
}

/* Host root is needed no longer: this launcher lives on as the sandbox's
 * identity too (it still signals the sandbox's pid 1 and holds the
 * identity's lock), so no process of the execution keeps host uid 0 or a
 * capability. 0, or launch_fail's status. */
static int drop_to_identity(uid_t uid, gid_t gid) {
  if (setgroups(0, NULL) != 0 || setresgid(gid, gid, gid) != 0 ||
      setresuid(uid, uid, uid) != 0)
    return launch_fail("change to the sandbox identity", NULL, errno);
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  return 0;
}

static void ignore_signal(int sig) {
  (void)sig;
}

/* bwrap's first --json-status-fd document, {"child-pid": N, ...}, collected
 * up to its newline: bwrap writes a document in several pieces. */
typedef struct json_line {
  char text[2048];
  size_t len;
} json_line_t;

/* The sandbox's pid 1 in this namespace: > 1 once the first document is
 * complete, 0 while it is not, -1 at end of file or for a document without
 * it. */
static int read_child_pid(int fd, json_line_t* line) {
  ssize_t n =
      read(fd, line->text + line->len, sizeof line->text - 1 - line->len);
  if (n == 0)
    return -1;
  if (n < 0)
    return errno == EAGAIN || errno == EINTR ? 0 : -1;
  line->len += (size_t)n;
  line->text[line->len] = '\0';
  char* nl = strchr(line->text, '\n');
  if (nl == NULL)
    return line->len + 1 < sizeof line->text ? 0 : -1;
  *nl = '\0';
  json_t* doc = json_loads(line->text, 0, NULL);
  json_t* pid = json_object_get(doc, "child-pid");
  int r = json_is_integer(pid) && json_integer_value(pid) > 1 &&
                  json_integer_value(pid) < INT32_MAX
              ? (int)json_integer_value(pid)
              : -1;
  json_decref(doc);
  return r;
}

/* How long the launcher waits, once bwrap is gone, for the denial listener
 * to write its last counts (it ends as soon as the sandbox's last task is
 * gone, which is before bwrap exits). */
#define LISTENER_DRAIN_MS 1000

/* Starts the denial listener: a child of this launcher (pid 1 of the
 * execution's namespace, so it dies with it) that keeps only its socket
 * `sock` and the status channel (fd 2) -- none of the payload's descriptors,
 * whose end of file the host waits for. Returns its pid or -1. */
static pid_t start_listener(int sock, int peer, const sigset_t* old) {
  pid_t pid = fork();
  if (pid != 0)
    return pid;
  sigprocmask(SIG_SETMASK, old, NULL);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; sig++)
    sigaction(sig, &dfl, NULL);
  prctl(PR_SET_NAME, "maelys-notify", 0, 0, 0);
  close(peer);
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  for (int fd = 0; fd < 2; fd++)
    if (null < 0 || dup2(null, fd) < 0)
      close(fd);
  if (sock != 3 && (dup2(sock, 3) < 0 || close(sock) != 0))
    _exit(1);
  syscall(SYS_close_range, 4u, ~0U, 0u);
  _exit(maelys__notify_serve(3, 2));
}

typedef struct bwrap_child {
  const sigset_t* old;
  int json_write, json_fd, lifeline, exec_fd;
  char** argv;
} bwrap_child_t;

/* bwrap's monitor: the identity (this launcher's, taken already), then bwrap
 * from the checked descriptor. bwrap's own --die-with-parent ties it to this
 * launcher. The handlers go back to their defaults before the signals are
 * unblocked: none of this launcher's runs in the child. */
static int bwrap_child(void* arg) {
  const bwrap_child_t* c = arg;
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; sig++)
    sigaction(sig, &dfl, NULL);
  sigprocmask(SIG_SETMASK, c->old, NULL);
  if (dup2(c->json_write, c->json_fd) < 0)
    return child_fail("install the status descriptor", NULL, errno);
  close(c->lifeline);
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
    return child_fail("set parent-death signal", NULL, errno);
  syscall(SYS_execveat, c->exec_fd, "", c->argv, environ, AT_EMPTY_PATH);
  return child_fail("execute bwrap", c->argv[0], errno);
}

/* Whether the host is gone already: its lifeline `fd` hung up. */
static bool host_gone(int fd) {
  struct pollfd host = {.fd = fd, .events = POLLIN};
  return poll(&host, 1, 0) < 0 || (host.revents & (POLLHUP | POLLERR)) != 0;
}

static int launch_main(int argc, char** argv) {
  int lifeline = -1, json_fd = -1, exec_fd = -1;
  int notify_fd = -1, notify_peer_fd = -1, cgroup_fd = -1;
  const char* lock_path = NULL;
  const char* staging_dir = NULL;
  bool fixed = false, ranged = false;
  unsigned long long id_a = 0, id_b = 0;
  stage_arg_t stages[64];
  size_t stage_count = 0;
  int i = 2;
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  for (; i < argc; i++) {
    const char* a = argv[i];
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if (i + 1 >= argc)
      goto usage;
    if (strcmp(a, "--lifeline-fd") == 0) {
      if (parse_int(argv[++i], &lifeline) != 0)
        goto usage;
    } else if (strcmp(a, "--json-fd") == 0) {
      if (parse_int(argv[++i], &json_fd) != 0)
        goto usage;
    } else if (strcmp(a, "--exec-fd") == 0) {
      if (parse_int(argv[++i], &exec_fd) != 0)
        goto usage;
    } else if (strcmp(a, "--notify-fd") == 0) {
      if (parse_int(argv[++i], &notify_fd) != 0)
        goto usage;
    } else if (strcmp(a, "--notify-peer-fd") == 0) {
      if (parse_int(argv[++i], &notify_peer_fd) != 0)
        goto usage;
    } else if (strcmp(a, "--cgroup-fd") == 0 || strcmp(a, "--userdb-fd") == 0) {
      int* fd = a[2] == 'c' ? &cgroup_fd : &userdb_fd;
      if (parse_int(argv[++i], fd) != 0 || *fd < 3)
        goto usage;
    } else if (strcmp(a, "--identity") == 0) {
      if (parse_pair(argv[++i], &id_a, &id_b) != 0 || id_a == 0 || id_b == 0 ||
          id_a >= UINT32_MAX || id_b >= UINT32_MAX)
        goto usage;
      fixed = true;
    } else if (strcmp(a, "--identity-range") == 0) {
      if (parse_pair(argv[++i], &id_a, &id_b) != 0 || id_a == 0 || id_b == 0 ||
          id_a + id_b >= UINT32_MAX)
        goto usage;
      ranged = true;
    } else if (strcmp(a, "--identity-lock") == 0) {
      lock_path = argv[++i];
    } else if (strcmp(a, "--staging-dir") == 0) {
      staging_dir = argv[++i];
    } else if (strcmp(a, "--stage") == 0 && i + 5 < argc &&
               stage_count < sizeof stages / sizeof stages[0]) {
      stage_arg_t* sg = &stages[stage_count++];
      sg->index = argv[i + 1];
      sg->source = argv[i + 2];
      sg->is_dir = strcmp(argv[i + 5], "d") == 0;
      if (parse_u64(argv[i + 3], &sg->dev) || parse_u64(argv[i + 4], &sg->ino))
        goto usage;
      i += 5;
    } else {
      goto usage;
    }
  }
  if (lifeline < 0 || json_fd < 3 || exec_fd < 0 || i >= argc ||
      (fixed && ranged) || ((fixed || ranged) && lock_path == NULL) ||
      (stage_count > 0 && (staging_dir == NULL || !(fixed || ranged))) ||
      (notify_fd >= 0) != (notify_peer_fd >= 0) ||
      (notify_fd >= 0 && (notify_fd < 3 || notify_peer_fd < 3)) ||
      (userdb_fd >= 0) != (fixed || ranged))
    goto usage;

  /* Signals first: as the namespace's pid 1 this process receives from the
   * host only the signals it handles (or blocks) -- SIGKILL always. They are
   * blocked and read from a signalfd; the handlers only make sure none is
   * ever ignored. */
  sigset_t mask;
  sigemptyset(&mask);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = ignore_signal;
  for (size_t k = 0; k < sizeof launch_forwarded / sizeof launch_forwarded[0];
       k++) {
    sigaddset(&mask, launch_forwarded[k]);
    sigaction(launch_forwarded[k], &sa, NULL);
  }
  sigaddset(&mask, SIGCHLD);
  sigset_t old;
  sigprocmask(SIG_BLOCK, &mask, &old);
  int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0)
    return launch_fail("signalfd", NULL, errno);
  fcntl(lifeline, F_SETFD, FD_CLOEXEC);
  fcntl(exec_fd, F_SETFD, FD_CLOEXEC);
  if (notify_fd >= 0)
    fcntl(notify_fd, F_SETFD, FD_CLOEXEC); /* the peer goes on to bwrap */
  if (host_gone(lifeline))
    return 127;
  join_t join = {.child = 0};
  if (cgroup_fd >= 0) {
    int jr = start_join(cgroup_fd, &join);
    if (jr < 0)
      return launch_fail("join the memory cgroup", NULL, -jr);
    close(cgroup_fd);
  }

  uid_t uid = getuid();
  gid_t gid = getgid();
  if (fixed || ranged) {
    int r = become_identity(lock_path, fixed, id_a, id_b, &uid, &gid);
    if (r == 0)
      r = stage_binds(staging_dir, stages, stage_count, uid, gid);
    if (r == 0)
      r = drop_to_identity(uid, gid);
    if (r != 0)
      return r;
  }
  /* In the cgroup before anything of the sandbox starts: the listener,
   * bwrap and all they start are charged there. */
  if (join.child > 0) {
    int jr = join_wait(&join);
    if (jr != 0)
      return launch_fail("join the memory cgroup", NULL, jr);
  }

  /* The denial listener runs under the sandbox's identity too: it reads
   * the sandbox's memory and looks paths up on its behalf, with no more
   * right than the sandbox's own uid. */
  pid_t listener = -1;
  if (notify_fd >= 0) {
    listener = start_listener(notify_fd, notify_peer_fd, &old);
    if (listener < 0)
      return launch_fail("start the denial listener", NULL, errno);
    close(notify_fd);
  }

  int json[2];
  if (pipe2(json, O_CLOEXEC | O_NONBLOCK) != 0)
    return launch_fail("pipe", NULL, errno);
  bwrap_child_t child = {&old, json[1], json_fd, lifeline, exec_fd, argv + i};
  pid_t bwrap = spawn_vm(bwrap_child, &child);
  if (bwrap < 0)
    return launch_fail("start bwrap", NULL, errno);
  close(json[1]);
  close(exec_fd);
  /* Only the sandbox's init keeps the peer: when it ends without sending a
   * listener, the listener sees end of file. */
  if (notify_peer_fd >= 0)
    close(notify_peer_fd);

  int child_pidfd = -1; /* the sandbox's pid 1 */
  json_line_t json_line = {.len = 0};
  int pending[NSIG];
  size_t pending_count = 0;
  int status = 0;
  bool bwrap_gone = false, listener_gone = listener < 0;
  struct timespec gone_at = {0, 0};
  for (;;) {
    struct pollfd fds[3] = {{.fd = lifeline, .events = POLLIN},
                            {.fd = sfd, .events = POLLIN},
                            {.fd = json[0], .events = POLLIN}};
    int timeout = -1;
    if (bwrap_gone) {
      struct timespec now;
      clock_gettime(CLOCK_MONOTONIC, &now);
      long spent = (now.tv_sec - gone_at.tv_sec) * 1000 +
                   (now.tv_nsec - gone_at.tv_nsec) / 1000000;
      if (spent >= LISTENER_DRAIN_MS)
        break;
      timeout = (int)(LISTENER_DRAIN_MS - spent);
    }
    int n = poll(fds, json[0] >= 0 ? 3 : 2, timeout);
    if (n < 0 && errno != EINTR)
      return launch_fail("poll", NULL, errno);
    if (n <= 0)
      continue;
    /* The host is gone: end the namespace (this process's death is the
     * kernel's cue to kill every other process in it). */
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR))
      return 127;
    if (json[0] >= 0 && (fds[2].revents & (POLLIN | POLLHUP | POLLERR))) {
      int pid = read_child_pid(json[0], &json_line);
      if (pid != 0) {
        close(json[0]);
        json[0] = -1;
      }
      if (pid > 0) {
        child_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        for (size_t k = 0; child_pidfd >= 0 && k < pending_count; k++)
          syscall(SYS_pidfd_send_signal, child_pidfd, pending[k], NULL, 0);
        pending_count = 0;
      }
    }
    if (fds[1].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
        int sig = (int)si.ssi_signo;
        if (sig != SIGCHLD) {
          /* The graceful signal, for the sandbox's pid 1, which forwards it
           * to every process of the sandbox. */
          if (child_pidfd >= 0)
            syscall(SYS_pidfd_send_signal, child_pidfd, sig, NULL, 0);
          else if (pending_count < sizeof pending / sizeof pending[0])
            pending[pending_count++] = sig;
          continue;
        }
        /* Reap everything: this is the namespace's init. */
        int ws;
        pid_t p;
        while ((p = waitpid(-1, &ws, WNOHANG)) > 0) {
          if (p == bwrap) {
            status = ws;
            bwrap_gone = true;
            clock_gettime(CLOCK_MONOTONIC, &gone_at);
          } else if (p == listener) {
            listener_gone = true;
            /* Killed, or failed, while the sandbox runs: what it watched is
             * still refused (with ENOSYS), but no longer counted. */
            if (!bwrap_gone && !(WIFEXITED(ws) && WEXITSTATUS(ws) == 0)) {
              static const char lost[] = "maelys-denial lost\n";
              ssize_t w = write(2, lost, sizeof lost - 1);
              (void)w;
            }
          }
        }
      }
    }
    if (bwrap_gone && listener_gone)
      break;
  }
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
usage:
  fprintf(stderr, "maelys-launch: invalid arguments\n");
  return 127;
}

/* ----------------------------------------------------------------- probe */

static void say(const char* key, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void say(const char* key, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s=", key);
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
}

static void say_errno(const char* key, int ok, int err) {
  if (ok)
    say(key, "ok");
  else
    say(key, "errno:%d", err);
}

static int probe_main(int argc, char** argv) {
  for (int i = 2; i < argc; i++) {
    const char* c = argv[i];
    if (strcmp(c, "identity") == 0) {
      capng_get_caps_process();
      say("uid", "%d", (int)getuid());
      say("euid", "%d", (int)geteuid());
      say("pid", "%d", (int)getpid());
      say("caps", "%s",
          capng_have_capabilities(CAPNG_SELECT_BOTH) == CAPNG_NONE ? "none"
                                                                   : "some");
    } else if (strcmp(c, "seccomp") == 0) {
      FILE* f = fopen("/proc/self/status", "r");
      char line[256];
      int mode = -1;
      while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Seccomp: %d", &mode) == 1)
          break;
      if (f)
        fclose(f);
      say("seccomp", "%d", mode);
    } else if (strcmp(c, "net") == 0) {
      int s = socket(AF_INET, SOCK_STREAM, 0);
      say_errno("inet", s >= 0, errno);
      if (s >= 0)
        close(s);
      s = socket(AF_UNIX, SOCK_STREAM, 0);
      say_errno("unix", s >= 0, errno);
      if (s >= 0)
        close(s);
      FILE* f = fopen("/proc/net/dev", "r");
      int ifaces = 0;
      char line[512];
      while (f && fgets(line, sizeof line, f))
        if (strchr(line, ':') != NULL)
          ifaces++;
      bool only_lo = true;
      if (f) {
        rewind(f);
        while (fgets(line, sizeof line, f))
          if (strchr(line, ':') != NULL && strstr(line, "lo:") == NULL)
            only_lo = false;
        fclose(f);
      }
      say("interfaces", "%d", f ? ifaces : -1);
      say("only_loopback", "%s", f && only_lo ? "yes" : "no");
    } else if (strcmp(c, "userns") == 0) {
      int r = unshare(CLONE_NEWUSER);
      say_errno("userns", r == 0, errno);
    } else if (strcmp(c, "write") == 0 && i + 1 < argc) {
      char path[4096];
      snprintf(path, sizeof path, "%s/.maelys-probe", argv[++i]);
      int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
      say_errno("write", fd >= 0, errno);
      if (fd >= 0) {
        close(fd);
        unlink(path);
      }
    } else if (strcmp(c, "read") == 0 && i + 1 < argc) {
      int fd = open(argv[++i], O_RDONLY);
      say_errno("read", fd >= 0, errno);
      if (fd >= 0)
        close(fd);
    } else if (strcmp(c, "fill") == 0 && i + 2 < argc) {
      /* Writes up to twice the size; a working size limit stops it. */
      char path[4096];
      snprintf(path, sizeof path, "%s/.maelys-fill", argv[++i]);
      long want = atol(argv[++i]) * 2;
      int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
      long done = 0;
      int err = 0;
      char block[4096];
      memset(block, 'x', sizeof block);
      while (fd >= 0 && done < want) {
        ssize_t n = write(fd, block, sizeof block);
        if (n <= 0) {
          err = errno;
          break;
        }
        done += n;
      }
      if (fd < 0)
        err = errno;
      else
        close(fd);
      unlink(path);
      say("fill", "%ld:%d", done, err);
    } else if (strcmp(c, "tasks") == 0) {
      /* Forks until the task ceiling refuses: "tasks=FORKED:ERRNO". */
      static pid_t kids[8192];
      int n = 0, err = 0;
      fflush(stdout);
      while (n < (int)(sizeof kids / sizeof kids[0])) {
        pid_t p = fork();
        if (p == 0) {
          for (;;)
            pause();
        }
        if (p < 0) {
          err = errno;
          break;
        }
        kids[n++] = p;
      }
      for (int k = 0; k < n; k++)
        kill(kids[k], SIGKILL);
      for (int k = 0; k < n; k++)
        waitpid(kids[k], NULL, 0);
      say("tasks", "%d:%d", n, err);
    } else if (strcmp(c, "alloc") == 0 && i + 1 < argc) {
      /* Touches MIB mebibytes; a working memory ceiling kills it first. */
      long mib = atol(argv[++i]);
      for (long k = 0; k < mib; k++) {
        char* block = malloc(1 << 20);
        if (block == NULL) {
          say("alloc", "failed:%ld", k);
          return 0;
        }
        memset(block, 'x', 1 << 20);
      }
      say("alloc", "done:%ld", mib);
    } else if (strcmp(c, "tree") == 0) {
      /* A descendant that double-forks into its own session and keeps
       * stdout open: it is gone only if the stop covered the whole tree. */
      pid_t p = fork();
      if (p == 0) {
        setsid();
        if (fork() == 0) {
          for (;;)
            pause();
        }
        _exit(0);
      }
      waitpid(p, NULL, 0);
      say("tree", "ready");
      for (;;)
        pause();
    } else {
      fprintf(stderr, "maelys-executor-helper: unknown probe '%s'\n", c);
      return 2;
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "init") == 0)
    return init_main(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "probe") == 0)
    return probe_main(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "launch") == 0)
    return launch_main(argc, argv);
  fprintf(stderr, "usage: maelys-executor-helper init|launch|probe ...\n"
                  "(runs inside a Maelys Executor sandbox; not for direct "
                  "use)\n");
  return 2;
}
