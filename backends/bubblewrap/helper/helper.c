/*
 * maelys-executor-helper: runs inside the bubblewrap sandbox.
 *
 *   helper init --status-fd S --stderr-fd E --limit L [--keep-fd N]...
 *               [--rlimit NAME:SOFT:HARD]... [--setenv NAME VALUE]...
 *               [--unsetenv NAME]... --exec PATH -- ARGV...
 *
 * As the sandbox's pid 1 (bwrap --as-pid-1) it
 *   - forwards the graceful signals it receives from the host to every
 *     process of the sandbox (kill(-1)): bwrap forwards nothing, and a pid 1
 *     only receives signals it has a handler for;
 *   - starts the payload with the exact descriptor layout (the payload's
 *     stderr moved back from E to 2, every descriptor outside 0..L-1 and the
 *     kept ones closed) and the plan's rlimits, and with no capability;
 *   - reports on S, one line each: "maelys-init ready" once it can forward
 *     signals, "maelys-init launch-failed STEP ERRNO" if the payload cannot be
 *     executed, "maelys-init exit code N" / "maelys-init exit signal N";
 *   - reaps every orphan, and exits when the payload does, which makes the
 *     kernel kill whatever the payload left behind in the pid namespace.
 *
 *   helper stage --staging-dir DIR --uid UID --gid GID
 *                [--stage INDEX SOURCE DEV INO d|f USERNS_FD]...
 *                -- BWRAP ARGV...
 *
 * For a host running as uid 0 (never host root inside, issue #3): in a
 * private mount namespace it mounts a small tmpfs on DIR and attaches there,
 * as DIR/INDEX, a clone of each SOURCE idmapped through USERNS_FD (which maps
 * the source's owner to the sandbox identity), after checking that SOURCE,
 * resolved again without following any symbolic link, is still the object
 * DEV:INO the backend saw. It then drops to UID:GID with no supplementary
 * group, re-arms the parent-death signal the identity change cleared, and
 * executes bwrap, which binds DIR/INDEX. Files written through such a mount
 * land on disk with the owner's ids; the host's mount table is untouched.
 * (bwrap 0.8's --bind-fd refuses a detached mount, hence the attached
 * staging paths; they are reached by path, so DIR must be searchable.)
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
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <grp.h>

#include <cap-ng.h>
#include <linux/mount.h>

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

enum { STEP_FORK = 1, STEP_DUP, STEP_RLIMIT, STEP_CAPABILITIES, STEP_EXECVE };

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

static int init_main(int argc, char** argv) {
  int stderr_fd = -1, limit = -1;
  int keep[64];
  size_t keep_count = 0;
  rlimit_arg_t limits[16];
  size_t limit_count = 0;
  const char* exec_path = NULL;
  int i = 2;
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
    } else if (strcmp(a, "--setenv") == 0) {
      if (i + 2 >= argc || setenv(argv[i + 1], argv[i + 2], 1) != 0)
        goto usage;
      i += 2;
    } else if (strcmp(a, "--unsetenv") == 0) {
      if (unsetenv(argv[++i]) != 0)
        goto usage;
    } else if (strcmp(a, "--exec") == 0) {
      exec_path = argv[++i];
    } else {
      goto usage;
    }
  }
  if (status_fd < 0 || stderr_fd < 0 || limit < 3 || exec_path == NULL ||
      i >= argc)
    goto usage;
  char** payload_argv = argv + i;
  fcntl(status_fd, F_SETFD, FD_CLOEXEC);

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

/* ----------------------------------------------------------------- stage */

static int stage_fail(const char* step, const char* what, int err) {
  /* stderr is the launch's status channel: this line becomes the launch
   * error the host reports. */
  fprintf(stderr, "maelys-stage: %s%s%s: %s\n", step, what ? " " : "",
          what ? what : "", strerror(err));
  return 127;
}

static int parse_u64(const char* s, unsigned long long* out) {
  char* end;
  errno = 0;
  *out = strtoull(s, &end, 10);
  return errno != 0 || end == s || *end != '\0' ? -1 : 0;
}

static int stage_main(int argc, char** argv) {
  const char* dir = NULL;
  int uid = -1, gid = -1;
  pid_t parent = getppid();
  int i = 2;
  int mounted = 0;
  int userns_fds[64];
  size_t userns_count = 0;
  for (; i < argc; i++) {
    const char* a = argv[i];
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if (strcmp(a, "--staging-dir") == 0 && i + 1 < argc) {
      dir = argv[++i];
    } else if (strcmp(a, "--uid") == 0 && i + 1 < argc) {
      if (parse_int(argv[++i], &uid) != 0 || uid == 0)
        goto usage;
    } else if (strcmp(a, "--gid") == 0 && i + 1 < argc) {
      if (parse_int(argv[++i], &gid) != 0 || gid == 0)
        goto usage;
    } else if (strcmp(a, "--stage") == 0 && i + 6 < argc && dir != NULL) {
      const char* index = argv[i + 1];
      const char* source = argv[i + 2];
      unsigned long long dev, ino;
      int is_dir = strcmp(argv[i + 5], "d") == 0;
      int ns = -1;
      if (parse_u64(argv[i + 3], &dev) || parse_u64(argv[i + 4], &ino) ||
          parse_int(argv[i + 6], &ns))
        goto usage;
      i += 6;
      if (!mounted) {
        /* A private namespace, slave so nothing propagates back to the host,
         * with a small tmpfs on the staging directory: the clones live there
         * and vanish with it. */
        if (unshare(CLONE_NEWNS) != 0)
          return stage_fail("unshare mount namespace", NULL, errno);
        if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0)
          return stage_fail("make mounts slave", NULL, errno);
        if (mount("maelys-staging", dir, "tmpfs",
                  MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "size=65536,mode=0755") != 0)
          return stage_fail("mount staging tmpfs on", dir, errno);
        mounted = 1;
      }
      int src = maelys__executor_open_nofollow(source);
      if (src < 0)
        return stage_fail("open without following symlinks", source, -src);
      struct stat st;
      if (fstat(src, &st) != 0)
        return stage_fail("stat", source, errno);
      if ((unsigned long long)st.st_dev != dev ||
          (unsigned long long)st.st_ino != ino ||
          (S_ISDIR(st.st_mode) != 0) != is_dir)
        return stage_fail("source changed since it was checked", source,
                          ESTALE);
      int tree = (int)syscall(SYS_open_tree, src, "",
                              OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
                                  AT_EMPTY_PATH | AT_RECURSIVE);
      if (tree < 0)
        return stage_fail("clone (open_tree)", source, errno);
      if (ns >= 0) {
        struct mount_attr attr;
        memset(&attr, 0, sizeof attr);
        attr.attr_set = MOUNT_ATTR_IDMAP;
        attr.userns_fd = (unsigned)ns;
        if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE,
                    &attr, sizeof attr) != 0)
          return stage_fail("idmap (mount_setattr; does the filesystem support "
                            "idmapped mounts?)",
                            source, errno);
        if (userns_count < 64)
          userns_fds[userns_count++] = ns;
      }
      char target[4096];
      snprintf(target, sizeof target, "%s/%s", dir, index);
      if (is_dir) {
        if (mkdir(target, 0755) != 0)
          return stage_fail("create", target, errno);
      } else {
        int f = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (f < 0)
          return stage_fail("create", target, errno);
        close(f);
      }
      if (syscall(SYS_move_mount, tree, "", AT_FDCWD, target,
                  MOVE_MOUNT_F_EMPTY_PATH) != 0)
        return stage_fail("attach (move_mount)", target, errno);
      close(tree);
      close(src);
    } else {
      goto usage;
    }
  }
  if (uid <= 0 || gid <= 0 || i >= argc)
    goto usage;
  for (size_t k = 0; k < userns_count; k++)
    close(userns_fds[k]);
  if (setgroups(0, NULL) != 0)
    return stage_fail("setgroups", NULL, errno);
  if (setresgid((gid_t)gid, (gid_t)gid, (gid_t)gid) != 0)
    return stage_fail("setresgid", NULL, errno);
  if (setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid) != 0)
    return stage_fail("setresuid", NULL, errno);
  /* The identity change cleared the parent-death signal: armed again, and
   * checked against a parent that died in between. */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
    return stage_fail("set parent-death signal", NULL, errno);
  if (getppid() != parent)
    return stage_fail("parent", NULL, ESRCH);
  execve(argv[i], argv + i + 1, environ);
  return stage_fail("execve", argv[i], errno);
usage:
  fprintf(stderr, "maelys-stage: invalid arguments\n");
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
  if (argc >= 2 && strcmp(argv[1], "stage") == 0)
    return stage_main(argc, argv);
  fprintf(stderr, "usage: maelys-executor-helper init|stage|probe ...\n"
                  "(runs inside a Maelys Executor sandbox; not for direct "
                  "use)\n");
  return 2;
}
