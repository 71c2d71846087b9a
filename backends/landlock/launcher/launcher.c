/*
 * maelys-landlock-launcher: starts a payload under Landlock and seccomp,
 * where no namespace can be had.
 *
 *   launcher launch --lifeline-fd F --stderr-fd E --limit L [--keep-fd N]...
 *                   --ruleset-fd R --seccomp-fd B [--seccomp-fd B]...
 *                   --env-fd V [--cgroup DIR]
 *                   [--identity UID:GID | --identity-range FIRST:COUNT]
 *                   [--identity-lock PATH] [--rlimit NAME:SOFT:HARD]...
 *                   --exec PATH -- ARGV...
 *
 * Three processes, because none of them may be the one whose death leaves
 * the payload's tree behind:
 *
 *   the launcher (this image, which the core starts, watches and, on a
 *   forced stop, kills with SIGKILL together with its process group)
 *     forwards the graceful signals it receives to the supervisor, exits
 *     at once when the lifeline F reaches end of file (the host is gone),
 *     and, being a child subreaper, inherits and kills the tree should the
 *     supervisor die first;
 *   the supervisor (its child, in a session of its own so that the core's
 *     group kill misses it; a child subreaper)
 *     creates the execution's cgroup below DIR, starts the payload in it,
 *     forwards graceful signals to every process of it, and ends the whole
 *     tree -- cgroup.kill, or without a cgroup, SIGKILL to every descendant
 *     until none is left -- when the payload exits or the launcher dies,
 *     then reports and removes the cgroup;
 *   the payload (its child)
 *     takes the descriptor layout, the cgroup, the rlimits and, for a root
 *     host, an identity of its own, then no_new_privs, the Landlock ruleset
 *     R (built by the backend), the seccomp filters B (built by the backend
 *     with libseccomp) and executes PATH with the environment of V.
 *
 * Neither the launcher nor the supervisor is in the payload's Landlock
 * domain, so the payload can neither signal them (the ruleset scopes
 * signals, ABI 6) nor trace them or read their descriptors through /proc
 * (Landlock refuses ptrace access to processes outside the domain); both
 * are not dumpable either. Both hold the status channel (fd 2) and nothing
 * else of the payload's, so the host sees the payload's streams end when
 * the payload's tree is gone, and the status channel end when the
 * supervisor has finished killing it.
 *
 * Status lines (one write each): "maelys-init ready", "maelys-init exit code
 * N", "maelys-init exit signal N", "maelys-init launch-failed STEP ERRNO",
 * "maelys-launch identity UID GID"; anything else is a diagnostic.
 *
 *   launcher probe CHECK...
 *
 * As the payload of the backend's registration probes it performs checks
 * and prints "name=value" lines on stdout (see the probe in landlock.c):
 * read|write|chmod|child-read LABEL PATH ("read.LABEL=ok" or "=errno:N"),
 * inet,
 * unix, socketpair, connect FD PORT (127.0.0.1), seccomp, nnp, userns,
 * signal (to its parent), identity (uid and capabilities), tree (a
 * double-forked descendant in a session of its own holds stdout; then
 * "tree=ready" and it waits to be ended).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif

#define STATUS_FD 2
#define MAX_FILTERS 4
#define MAX_RLIMITS 16
#define MAX_KEEP 64
/* How long the supervisor waits for a killed cgroup to empty. */
#define KILL_WAIT_MS 10000

static const int forwarded[] = {SIGTERM, SIGINT,  SIGHUP,
                                SIGQUIT, SIGUSR1, SIGUSR2};

/* ------------------------------------------------------------- report */

static void report(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char* fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t)n > sizeof line - 2)
    n = (int)sizeof line - 2;
  line[n++] = '\n';
  /* One write per line, below PIPE_BUF, so that the launcher's and the
   * supervisor's lines never interleave. */
  ssize_t w;
  do
    w = write(STATUS_FD, line, (size_t)n);
  while (w < 0 && errno == EINTR);
}

static int usage(const char* why) {
  report("maelys-landlock-launcher: %s", why);
  return 125;
}

/* ----------------------------------------------------------- arguments */

typedef struct rlimit_arg {
  int resource;
  struct rlimit value;
} rlimit_arg_t;

typedef struct filter {
  unsigned char* bpf;
  size_t len;
} filter_t;

typedef struct args {
  int lifeline_fd, stderr_fd, limit, ruleset_fd, env_fd;
  int keep[MAX_KEEP];
  size_t keep_count;
  int seccomp_fds[MAX_FILTERS];
  size_t seccomp_count;
  const char* cgroup;
  bool identity_fixed, identity_range;
  unsigned long long id_a, id_b;
  const char* identity_lock;
  rlimit_arg_t rlimits[MAX_RLIMITS];
  size_t rlimit_count;
  const char* exec;
  char** argv;
} args_t;

static int parse_fd(const char* s, int* out) {
  char* end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < 0 || v > 1 << 20)
    return -1;
  *out = (int)v;
  return 0;
}

static int parse_u64(const char* s, unsigned long long* out) {
  char* end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || s[0] == '-')
    return -1;
  *out = v;
  return 0;
}

static int parse_pair(const char* s, unsigned long long* a,
                      unsigned long long* b) {
  const char* colon = strchr(s, ':');
  char buf[64];
  if (colon == NULL || (size_t)(colon - s) >= sizeof buf)
    return -1;
  memcpy(buf, s, (size_t)(colon - s));
  buf[colon - s] = '\0';
  return parse_u64(buf, a) || parse_u64(colon + 1, b) ? -1 : 0;
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

static int parse_limit(const char* s, rlim_t* out) {
  if (strcmp(s, "inf") == 0) {
    *out = RLIM_INFINITY;
    return 0;
  }
  unsigned long long v;
  if (parse_u64(s, &v) != 0)
    return -1;
  *out = (rlim_t)v;
  return 0;
}

static int parse_rlimit(const char* s, rlimit_arg_t* out) {
  char buf[128];
  snprintf(buf, sizeof buf, "%s", s);
  char* soft = strchr(buf, ':');
  char* hard = soft ? strchr(soft + 1, ':') : NULL;
  if (hard == NULL)
    return -1;
  *soft++ = '\0';
  *hard++ = '\0';
  for (size_t i = 0; i < sizeof rlimit_table / sizeof rlimit_table[0]; i++)
    if (strcmp(rlimit_table[i].name, buf) == 0) {
      out->resource = rlimit_table[i].resource;
      return parse_limit(soft, &out->value.rlim_cur) ||
                     parse_limit(hard, &out->value.rlim_max)
                 ? -1
                 : 0;
    }
  return -1;
}

static int parse_args(int argc, char** argv, args_t* a) {
  memset(a, 0, sizeof *a);
  a->lifeline_fd = a->stderr_fd = a->ruleset_fd = a->env_fd = a->limit = -1;
  int i = 2;
  for (; i < argc; i++) {
    const char* o = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(o, "--") == 0) {
      i++;
      break;
    }
    if (v == NULL)
      return -1;
    int fd;
    if (strcmp(o, "--lifeline-fd") == 0) {
      if (parse_fd(v, &a->lifeline_fd))
        return -1;
    } else if (strcmp(o, "--stderr-fd") == 0) {
      if (parse_fd(v, &a->stderr_fd))
        return -1;
    } else if (strcmp(o, "--limit") == 0) {
      if (parse_fd(v, &a->limit))
        return -1;
    } else if (strcmp(o, "--keep-fd") == 0) {
      if (parse_fd(v, &fd) || a->keep_count == MAX_KEEP)
        return -1;
      a->keep[a->keep_count++] = fd;
    } else if (strcmp(o, "--ruleset-fd") == 0) {
      if (parse_fd(v, &a->ruleset_fd))
        return -1;
    } else if (strcmp(o, "--seccomp-fd") == 0) {
      if (parse_fd(v, &fd) || a->seccomp_count == MAX_FILTERS)
        return -1;
      a->seccomp_fds[a->seccomp_count++] = fd;
    } else if (strcmp(o, "--env-fd") == 0) {
      if (parse_fd(v, &a->env_fd))
        return -1;
    } else if (strcmp(o, "--cgroup") == 0) {
      a->cgroup = v;
    } else if (strcmp(o, "--identity") == 0) {
      if (parse_pair(v, &a->id_a, &a->id_b))
        return -1;
      a->identity_fixed = true;
    } else if (strcmp(o, "--identity-range") == 0) {
      if (parse_pair(v, &a->id_a, &a->id_b) || a->id_b == 0)
        return -1;
      a->identity_range = true;
    } else if (strcmp(o, "--identity-lock") == 0) {
      a->identity_lock = v;
    } else if (strcmp(o, "--rlimit") == 0) {
      if (a->rlimit_count == MAX_RLIMITS ||
          parse_rlimit(v, &a->rlimits[a->rlimit_count++]))
        return -1;
    } else if (strcmp(o, "--exec") == 0) {
      a->exec = v;
    } else {
      return -1;
    }
    i++;
  }
  if (i >= argc || a->exec == NULL || a->exec[0] != '/' || a->lifeline_fd < 0 ||
      a->stderr_fd < 0 || a->limit < 3 || a->ruleset_fd < 0 || a->env_fd < 0 ||
      a->seccomp_count == 0 || (a->identity_fixed && a->identity_range))
    return -1;
  a->argv = argv + i;
  return 0;
}

/* Reads all of fd (a sealed memfd) into a heap buffer. */
static unsigned char* slurp(int fd, size_t* out_len) {
  size_t cap = 4096, len = 0;
  unsigned char* buf = malloc(cap);
  if (buf == NULL)
    return NULL;
  for (;;) {
    if (len == cap) {
      unsigned char* p = realloc(buf, cap * 2);
      if (p == NULL) {
        free(buf);
        return NULL;
      }
      buf = p;
      cap *= 2;
    }
    ssize_t n = pread(fd, buf + len, cap - len, (off_t)len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      free(buf);
      return NULL;
    }
    if (n == 0)
      break;
    len += (size_t)n;
  }
  *out_len = len;
  return buf;
}

/* The NUL-separated "NAME=VALUE" entries of the env memfd as an envp. */
static char** parse_env(unsigned char* buf, size_t len) {
  size_t count = 0;
  for (size_t i = 0; i < len; i++)
    count += buf[i] == '\0';
  char** envp = calloc(count + 1, sizeof *envp);
  if (envp == NULL || (len > 0 && buf[len - 1] != '\0')) {
    free(envp);
    return NULL;
  }
  size_t k = 0;
  for (size_t i = 0; i < len; i += strlen((char*)buf + i) + 1)
    envp[k++] = (char*)buf + i;
  return envp;
}

/* ----------------------------------------------------------- identity */

/* Whether any process of uid runs anywhere on the host: with RLIMIT_NPROC
 * at 0, a set*uid() to a uid that already has a task makes the next execve
 * fail with EAGAIN (the kernel counts the uid's tasks across namespaces).
 * The same check as the bubblewrap helper's, so that both backends agree on
 * what "in use" means. */
static int identity_in_use(uid_t uid, gid_t gid) {
  pid_t pid = fork();
  if (pid < 0)
    return -errno;
  if (pid == 0) {
    struct rlimit none = {0, 0};
    char* empty[] = {NULL};
    if (setrlimit(RLIMIT_NPROC, &none) != 0 ||
        syscall(SYS_setresgid, gid, gid, gid) != 0 ||
        syscall(SYS_setresuid, uid, uid, uid) != 0)
      _exit(3);
    syscall(SYS_execveat, -1, "", empty, empty, AT_EMPTY_PATH);
    _exit(errno == EAGAIN ? 1 : errno == EBADF ? 0 : 3);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return -errno;
  if (!WIFEXITED(status) || WEXITSTATUS(status) > 1)
    return -EIO;
  return WEXITSTATUS(status);
}

/* Takes an identity no other process holds: its byte in the lock file (the
 * bubblewrap backend's file, so that no sandbox of either backend shares
 * one; an OFD lock this process holds until it exits), then the kernel's
 * count of the uid's tasks. */
static int take_identity(int lock_fd, unsigned long long first,
                         unsigned long long count, uid_t* uid, gid_t* gid) {
  unsigned long long start = 0;
  if (count > 1) {
    unsigned int seed = 0;
    if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed)
      seed = (unsigned)getpid() ^ (unsigned)time(NULL);
    start = seed % count;
  }
  for (unsigned long long k = 0; k < count; k++) {
    unsigned long long id = first + (start + k) % count;
    struct flock lock = {.l_type = F_WRLCK,
                         .l_whence = SEEK_SET,
                         .l_start = (off_t)id,
                         .l_len = 1};
    if (fcntl(lock_fd, F_OFD_SETLK, &lock) != 0) {
      if (errno == EAGAIN || errno == EACCES)
        continue;
      return -errno;
    }
    int used = identity_in_use((uid_t)id, (gid_t)id);
    if (used == 0) {
      *uid = (uid_t)id;
      *gid = (gid_t)id;
      return 0;
    }
    lock.l_type = F_UNLCK;
    fcntl(lock_fd, F_OFD_SETLK, &lock);
    if (used < 0)
      return used;
  }
  return -EBUSY;
}

/* ------------------------------------------------------------- cgroup */

typedef struct cgroup {
  int dir_fd;    /* the execution's cgroup, or -1 */
  int parent_fd; /* DIR, for the removal */
  char name[64];
} cgroup_t;

static int cgroup_create(const char* parent, cgroup_t* cg) {
  cg->dir_fd = cg->parent_fd = -1;
  cg->parent_fd = open(parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (cg->parent_fd < 0)
    return -errno;
  unsigned char rnd[8];
  if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
    return -EIO;
  /* Named after the launcher, so that a test can tell its own. */
  snprintf(cg->name, sizeof cg->name,
           "maelys-landlock-%d-%02x%02x%02x%02x%02x%02x%02x%02x", (int)getpid(),
           rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
  if (mkdirat(cg->parent_fd, cg->name, 0755) != 0)
    return -errno;
  cg->dir_fd = openat(cg->parent_fd, cg->name,
                      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (cg->dir_fd < 0) {
    int e = errno;
    unlinkat(cg->parent_fd, cg->name, AT_REMOVEDIR);
    return -e;
  }
  /* cgroup.kill (Linux 5.14) is what ends the tree; without it the cgroup
   * would hold the tree without a way to end it at once. */
  if (faccessat(cg->dir_fd, "cgroup.kill", W_OK, 0) != 0) {
    int e = errno;
    close(cg->dir_fd);
    cg->dir_fd = -1;
    unlinkat(cg->parent_fd, cg->name, AT_REMOVEDIR);
    return -e;
  }
  return 0;
}

static int cgroup_write(const cgroup_t* cg, const char* file,
                        const char* text) {
  int fd = openat(cg->dir_fd, file, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  ssize_t n = write(fd, text, strlen(text));
  int e = n < 0 ? errno : 0;
  close(fd);
  return n < 0 ? -e : 0;
}

static bool cgroup_populated(const cgroup_t* cg) {
  int fd = openat(cg->dir_fd, "cgroup.events", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  char buf[256];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return false;
  buf[n] = '\0';
  return strstr(buf, "populated 1") != NULL;
}

static void cgroup_signal(const cgroup_t* cg, int sig) {
  int fd = openat(cg->dir_fd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  FILE* f = fdopen(fd, "re");
  if (f == NULL) {
    close(fd);
    return;
  }
  long pid;
  while (fscanf(f, "%ld", &pid) == 1)
    if (pid > 0)
      kill((pid_t)pid, sig);
  fclose(f);
}

/* Removes the (emptied) cgroup. A task that has exited still counts for
 * rmdir until its parent reaped it, and cgroup.events says "populated 0"
 * before that: an orphan whose parent was killed in the same instant is
 * reparented to this subreaper a moment later. So rmdir is retried (EBUSY),
 * reaping whatever came here, for up to a second. */
static void cgroup_remove(cgroup_t* cg) {
  if (cg->dir_fd >= 0)
    close(cg->dir_fd);
  cg->dir_fd = -1;
  if (cg->parent_fd >= 0) {
    for (int i = 0; i < 200; i++) {
      if (unlinkat(cg->parent_fd, cg->name, AT_REMOVEDIR) == 0 ||
          errno != EBUSY)
        break;
      while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
      struct timespec pause = {0, 5000000};
      nanosleep(&pause, NULL);
    }
    close(cg->parent_fd);
  }
  cg->parent_fd = -1;
}

/* Moves a descriptor of this process's own above every descriptor of the
 * payload's layout (consumed; -1 on failure), so that closing the layout
 * never closes it. */
static int high(int fd, int limit) {
  if (fd < 0 || fd >= limit + 8)
    return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, limit + 8);
  close(fd);
  return moved;
}

/* ---------------------------------------------------------- the tree */

/* Reaps whatever child has exited, without blocking; remembers `watched`'s
 * status. */
static void reap_all(pid_t watched, int* watched_status, bool* watched_done) {
  for (;;) {
    int st;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p <= 0)
      return;
    if (p == watched) {
      *watched_status = st;
      *watched_done = true;
    }
  }
}

/* The pids of this process's children (a child subreaper: every orphaned
 * descendant is one), from /proc/self/task/TID/children. */
static size_t children(pid_t* out, size_t max) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
  FILE* f = fopen(path, "re");
  size_t n = 0;
  if (f == NULL)
    return 0;
  long pid;
  while (n < max && fscanf(f, "%ld", &pid) == 1)
    out[n++] = (pid_t)pid;
  fclose(f);
  return n;
}

/* Ends every process of the tree below this subreaper: cgroup.kill when
 * there is a cgroup (nothing in it can leave it), and in any case SIGKILL
 * to every child, again and again, reaping as they go: a killed process's
 * children become ours, so the loop ends only once no descendant is left.
 * A process with SIGKILL pending cannot complete a fork, so the tree cannot
 * outgrow the loop. */
static void kill_tree(cgroup_t* cg, pid_t watched, int* watched_status,
                      bool* watched_done) {
  if (cg != NULL && cg->dir_fd >= 0)
    cgroup_write(cg, "cgroup.kill", "1");
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    pid_t kids[256];
    size_t n = children(kids, 256);
    for (size_t i = 0; i < n; i++)
      kill(kids[i], SIGKILL);
    int st;
    pid_t p = waitpid(-1, &st, n > 0 ? 0 : WNOHANG);
    if (p == watched && p > 0) {
      *watched_status = st;
      *watched_done = true;
    }
    bool populated = cg != NULL && cg->dir_fd >= 0 && cgroup_populated(cg);
    if (p < 0 && errno == ECHILD && !populated)
      break;
    if (p == 0 && n == 0 && !populated)
      break;
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long ms =
        (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    if (ms > KILL_WAIT_MS)
      break; /* reported by the core as a containment failure */
    if (p <= 0) {
      struct timespec pause = {0, 2000000};
      nanosleep(&pause, NULL);
    }
  }
}

/* ---------------------------------------------------------- the payload */

typedef struct failure {
  char step[32];
  int error_number;
} failure_t;

static void fail_to(int sync_fd, const char* step, int err) {
  failure_t f;
  memset(&f, 0, sizeof f);
  snprintf(f.step, sizeof f.step, "%s", step);
  f.error_number = err;
  ssize_t w = write(sync_fd, &f, sizeof f);
  (void)w;
  _exit(127);
}

static bool kept(const args_t* a, int fd) {
  for (size_t i = 0; i < a->keep_count; i++)
    if (a->keep[i] == fd)
      return true;
  return false;
}

/* The payload's side of the fork: never returns. */
static void start_payload(const args_t* a, const cgroup_t* cg, bool identity,
                          uid_t uid, gid_t gid, const filter_t* filters,
                          char** envp, int sync_fd, const sigset_t* old_mask) {
  if (cg->dir_fd >= 0 && cgroup_write(cg, "cgroup.procs", "0") != 0)
    fail_to(sync_fd, "cgroup", errno);
  /* Its own process group in the supervisor's session: graceful signals
   * reach the group, and it has no controlling terminal (invariant 21). */
  if (setpgid(0, 0) != 0)
    fail_to(sync_fd, "setpgid", errno);
  for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
    signal(forwarded[i], SIG_DFL);
  signal(SIGCHLD, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  if (sigprocmask(SIG_SETMASK, old_mask, NULL) != 0)
    fail_to(sync_fd, "sigprocmask", errno);
  /* The payload's stderr back at 2 (the status channel leaves it), the
   * layout's descriptors kept, every other one closed at exec. */
  if (dup2(a->stderr_fd, 2) < 0)
    fail_to(sync_fd, "dup2", errno);
  for (int fd = 3; fd < a->limit; fd++)
    if (!kept(a, fd))
      close(fd);
  if (syscall(SYS_close_range, (unsigned)a->limit, ~0U, CLOSE_RANGE_CLOEXEC) !=
      0)
    fail_to(sync_fd, "close_range", errno);
  for (size_t i = 0; i < a->rlimit_count; i++)
    if (setrlimit(a->rlimits[i].resource, &a->rlimits[i].value) != 0)
      fail_to(sync_fd, "setrlimit", errno);
  if (identity) {
    /* Invariant 20: never host root; setresuid from 0 to another uid also
     * clears every capability. */
    if (setgroups(0, NULL) != 0 || syscall(SYS_setresgid, gid, gid, gid) != 0 ||
        syscall(SYS_setresuid, uid, uid, uid) != 0)
      fail_to(sync_fd, "identity", errno);
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    fail_to(sync_fd, "no_new_privs", errno);
  if (syscall(SYS_landlock_restrict_self, a->ruleset_fd, 0) != 0)
    fail_to(sync_fd, "landlock", errno);
  for (size_t i = 0; i < a->seccomp_count; i++) {
    struct sock_fprog prog = {
        .len = (unsigned short)(filters[i].len / sizeof(struct sock_filter)),
        .filter = (struct sock_filter*)filters[i].bpf};
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0)
      fail_to(sync_fd, "seccomp", errno);
  }
  execve(a->exec, a->argv, envp);
  fail_to(sync_fd, "execve", errno);
}

/* -------------------------------------------------------- supervisor */

static int exit_status_of(int st) {
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The supervisor: never returns. */
static void supervise(const args_t* a, pid_t launcher, cgroup_t* cg_in,
                      const filter_t* filters, char** envp,
                      const sigset_t* old_mask) {
  /* Out of the launcher's process group and session: the core's forced stop
   * kills that group, and this process must outlive it to end the tree. */
  if (setsid() < 0) {
    report("maelys-init launch-failed setsid %d", errno);
    _exit(125);
  }
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  close(a->lifeline_fd);
  int launcher_fd = high((int)syscall(SYS_pidfd_open, launcher, 0), a->limit);
  if (launcher_fd < 0 || getppid() != launcher) {
    /* The launcher is already gone: nothing was started; its cgroup goes
     * too. */
    cgroup_remove(cg_in);
    _exit(125);
  }
  sigset_t mask;
  sigemptyset(&mask);
  for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
    sigaddset(&mask, forwarded[i]);
  sigaddset(&mask, SIGCHLD);
  int sfd = high(signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK), a->limit);
  if (sfd < 0) {
    report("maelys-init launch-failed signalfd %d", errno);
    _exit(125);
  }
  cgroup_t cg = *cg_in;
  bool identity = a->identity_fixed || a->identity_range;
  uid_t uid = 0;
  gid_t gid = 0;
  if (identity) {
    int lock_fd =
        a->identity_lock
            ? high(open(a->identity_lock,
                        O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600),
                   a->limit)
            : -1;
    struct stat st;
    int rc = lock_fd < 0 ? -errno
             : fstat(lock_fd, &st) != 0 || st.st_uid != 0 ||
                     !S_ISREG(st.st_mode) || (st.st_mode & 022)
                 ? -EPERM
                 : 0;
    if (rc == 0)
      rc = take_identity(lock_fd, a->id_a, a->identity_fixed ? 1 : a->id_b,
                         &uid, &gid);
    if (rc != 0) {
      report("maelys-landlock-launcher: taking a host identity of the "
             "sandbox's own: %s",
             rc == -EBUSY ? "every identity asked for is in use"
                          : strerror(-rc));
      report("maelys-init launch-failed identity %d", -rc);
      cgroup_remove(&cg);
      _exit(125);
    }
    report("maelys-launch identity %u %u", (unsigned)uid, (unsigned)gid);
  }

  int sync[2];
  if (pipe2(sync, O_CLOEXEC) != 0 || (sync[0] = high(sync[0], a->limit)) < 0 ||
      (sync[1] = high(sync[1], a->limit)) < 0) {
    report("maelys-init launch-failed pipe %d", errno);
    cgroup_remove(&cg);
    _exit(125);
  }
  pid_t payload = fork();
  if (payload < 0) {
    report("maelys-init launch-failed fork %d", errno);
    cgroup_remove(&cg);
    _exit(125);
  }
  if (payload == 0) {
    close(sync[0]);
    start_payload(a, &cg, identity, uid, gid, filters, envp, sync[1], old_mask);
  }
  close(sync[1]);
  /* Nothing of the payload's stays here: its streams end with its tree. */
  int null_fd = high(open("/dev/null", O_RDWR | O_CLOEXEC), a->limit);
  for (int fd = 0; fd < a->limit; fd++)
    if (fd != STATUS_FD)
      null_fd >= 0 && fd < 2 ? dup2(null_fd, fd) : close(fd);
  close(a->stderr_fd);
  close(a->ruleset_fd);
  report("maelys-init ready");

  failure_t failed;
  memset(&failed, 0, sizeof failed);
  bool have_failure = false, done = false, launcher_gone = false;
  int status = 0;
  struct pollfd p[3] = {{.fd = sfd, .events = POLLIN},
                        {.fd = launcher_fd, .events = POLLIN},
                        {.fd = sync[0], .events = POLLIN}};
  while (!done && !launcher_gone) {
    if (poll(p, 3, -1) < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    if (p[2].revents) {
      ssize_t n = read(sync[0], &failed, sizeof failed);
      have_failure = n == (ssize_t)sizeof failed;
      close(sync[0]);
      p[2].fd = -1;
    }
    if (p[1].revents)
      launcher_gone = true;
    struct signalfd_siginfo si;
    while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
      if (si.ssi_signo == SIGCHLD)
        continue;
      /* Graceful signals go to every process of the tree, as the
       * bubblewrap helper's kill(-1) does inside its pid namespace. */
      if (cg.dir_fd >= 0) {
        cgroup_signal(&cg, (int)si.ssi_signo);
      } else {
        kill(-payload, (int)si.ssi_signo);
        kill(payload, (int)si.ssi_signo);
      }
    }
    reap_all(payload, &status, &done);
  }
  /* The payload exited, or the launcher died (a forced stop, the host's
   * death through the lifeline): whatever the payload left behind ends
   * now, as the kernel ends a pid namespace with its init. */
  kill_tree(&cg, payload, &status, &done);
  if (p[2].fd >= 0) {
    ssize_t n = read(sync[0], &failed, sizeof failed);
    have_failure = n == (ssize_t)sizeof failed;
  }
  if (have_failure)
    report("maelys-init launch-failed %s %d", failed.step, failed.error_number);
  else if (done && WIFSIGNALED(status))
    report("maelys-init exit signal %d", WTERMSIG(status));
  else if (done)
    report("maelys-init exit code %d", WEXITSTATUS(status));
  cgroup_remove(&cg);
  _exit(done ? exit_status_of(status) : 128 + SIGKILL);
}

/* ----------------------------------------------------------- launcher */

static int launch(int argc, char** argv) {
  args_t a;
  if (parse_args(argc, argv, &a) != 0)
    return usage("bad arguments");
  /* Invariant 19: nothing in the sandbox reaches this process's
   * descriptors through /proc or ptrace. */
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  /* The status channel's reader is the host: once it is gone, a report
   * must fail with EPIPE, not kill the supervisor before it has ended the
   * tree and removed the cgroup (the payload gets SIGPIPE back). */
  signal(SIGPIPE, SIG_IGN);

  filter_t filters[MAX_FILTERS];
  for (size_t i = 0; i < a.seccomp_count; i++) {
    filters[i].bpf = slurp(a.seccomp_fds[i], &filters[i].len);
    if (filters[i].bpf == NULL || filters[i].len == 0 ||
        filters[i].len % sizeof(struct sock_filter) != 0)
      return usage("reading a seccomp filter");
    close(a.seccomp_fds[i]);
  }
  size_t env_len = 0;
  unsigned char* env_buf = slurp(a.env_fd, &env_len);
  char** envp = env_buf ? parse_env(env_buf, env_len) : NULL;
  if (envp == NULL)
    return usage("reading the environment");
  close(a.env_fd);

  sigset_t mask, old_mask;
  sigemptyset(&mask);
  for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
    sigaddset(&mask, forwarded[i]);
  sigaddset(&mask, SIGCHLD);
  if (sigprocmask(SIG_BLOCK, &mask, &old_mask) != 0)
    return usage("blocking signals");
  int sfd = high(signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK), a.limit);
  if (sfd < 0)
    return usage("signalfd");

  /* The execution's cgroup, made here so that whichever of the launcher
   * and the supervisor outlives the other can end and remove it. */
  cgroup_t cg = {.dir_fd = -1, .parent_fd = -1};
  if (a.cgroup != NULL) {
    int rc = cgroup_create(a.cgroup, &cg);
    if (rc == 0 && ((cg.dir_fd = high(cg.dir_fd, a.limit)) < 0 ||
                    (cg.parent_fd = high(cg.parent_fd, a.limit)) < 0))
      rc = -EMFILE;
    if (rc != 0) {
      report("maelys-landlock-launcher: creating the execution's cgroup "
             "below %s: %s",
             a.cgroup, strerror(-rc));
      report("maelys-init launch-failed cgroup %d", -rc);
      cgroup_remove(&cg);
      return 125;
    }
  }

  pid_t self = getpid();
  pid_t supervisor = fork();
  if (supervisor < 0) {
    report("maelys-init launch-failed fork %d", errno);
    cgroup_remove(&cg);
    return 125;
  }
  if (supervisor == 0) {
    close(sfd);
    supervise(&a, self, &cg, filters, envp, &old_mask);
  }
  /* Nothing of the payload's stays here either. */
  int null_fd = high(open("/dev/null", O_RDWR | O_CLOEXEC), a.limit);
  for (int fd = 0; fd < a.limit; fd++)
    if (fd != STATUS_FD)
      null_fd >= 0 && fd < 2 ? dup2(null_fd, fd) : close(fd);
  close(a.stderr_fd);
  close(a.ruleset_fd);

  struct pollfd p[2] = {{.fd = sfd, .events = POLLIN},
                        {.fd = a.lifeline_fd, .events = POLLIN}};
  for (;;) {
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      return 125;
    }
    /* The host is gone (or dropped the execution): this process ends, and
     * the supervisor, which watches it, ends the tree. */
    if (p[1].revents)
      _exit(128 + SIGKILL);
    struct signalfd_siginfo si;
    while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
      if (si.ssi_signo != SIGCHLD)
        kill(supervisor, (int)si.ssi_signo);
    for (;;) {
      int st;
      pid_t w = waitpid(-1, &st, WNOHANG);
      if (w <= 0)
        break;
      if (w != supervisor)
        continue; /* an orphan that came here */
      if (WIFEXITED(st))
        _exit(WEXITSTATUS(st));
      /* The supervisor was killed from outside: its orphans are ours now,
       * and so is the end of the tree. */
      bool dummy_done = false;
      int dummy = 0;
      kill_tree(&cg, -1, &dummy, &dummy_done);
      cgroup_remove(&cg);
      _exit(128 + WTERMSIG(st));
    }
  }
}

/* -------------------------------------------------------------- probe */

static void line(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void line(const char* fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t)n > sizeof buf - 2)
    n = (int)sizeof buf - 2;
  buf[n++] = '\n';
  ssize_t w = write(1, buf, (size_t)n);
  (void)w;
}

static void result(const char* name, int rc) {
  if (rc == 0)
    line("%s=ok", name);
  else
    line("%s=errno:%d", name, rc);
}

static int try_read(const char* path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno;
  close(fd);
  return 0;
}

static int try_write(const char* path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return errno;
  close(fd);
  unlink(path);
  return 0;
}

static int try_socket(int family, int type) {
  int fd = socket(family, type | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return errno;
  close(fd);
  return 0;
}

static int try_connect(int fd, unsigned port) {
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  return connect(fd, (struct sockaddr*)&sa, sizeof sa) == 0 ? 0 : errno;
}

/* A descendant that double-forks into a session of its own and holds
 * stdout: the host sees stdout end only once it is gone. */
static void tree(void) {
  int ready[2];
  if (pipe(ready) != 0) {
    line("tree=errno:%d", errno);
    return;
  }
  pid_t child = fork();
  if (child == 0) {
    if (fork() == 0) {
      setsid();
      close(ready[0]);
      close(ready[1]);
      for (;;)
        pause();
    }
    _exit(0);
  }
  close(ready[1]);
  waitpid(child, NULL, 0);
  line("tree=ready");
  for (;;)
    pause();
}

static int probe(int argc, char** argv) {
  for (int i = 2; i < argc; i++) {
    const char* c = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    const char* w = i + 2 < argc ? argv[i + 2] : "";
    char name[64];
    snprintf(name, sizeof name, "%s.%s", c, v);
    if (strcmp(c, "read") == 0) {
      result(name, try_read(w));
      i += 2;
    } else if (strcmp(c, "write") == 0) {
      result(name, try_write(w));
      i += 2;
    } else if (strcmp(c, "chmod") == 0) {
      result(name, chmod(w, 0600) == 0 ? 0 : errno);
      i += 2;
    } else if (strcmp(c, "child-read") == 0) {
      pid_t p = fork();
      if (p == 0)
        _exit(try_read(w));
      int st = 0;
      waitpid(p, &st, 0);
      result(name, WIFEXITED(st) ? WEXITSTATUS(st) : 255);
      i += 2;
    } else if (strcmp(c, "inet") == 0) {
      result("inet", try_socket(AF_INET, SOCK_STREAM));
    } else if (strcmp(c, "unix") == 0) {
      result("unix", try_socket(AF_UNIX, SOCK_STREAM));
    } else if (strcmp(c, "socketpair") == 0) {
      int sv[2];
      int rc = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
      if (rc == 0) {
        close(sv[0]);
        close(sv[1]);
      }
      result("socketpair", rc == 0 ? 0 : errno);
    } else if (strcmp(c, "connect") == 0 && i + 2 < argc) {
      int fd = atoi(argv[i + 1]);
      result("connect", try_connect(fd, (unsigned)atoi(argv[i + 2])));
      i += 2;
    } else if (strcmp(c, "seccomp") == 0) {
      line("seccomp=%d", prctl(PR_GET_SECCOMP, 0, 0, 0, 0));
    } else if (strcmp(c, "nnp") == 0) {
      line("nnp=%d", prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
    } else if (strcmp(c, "userns") == 0) {
      result("userns", unshare(CLONE_NEWUSER) == 0 ? 0 : errno);
    } else if (strcmp(c, "signal") == 0) {
      result("signal", kill(getppid(), 0) == 0 ? 0 : errno);
    } else if (strcmp(c, "identity") == 0) {
      struct {
        uint32_t version;
        int pid;
      } hdr = {0x20080522, 0};
      struct {
        uint32_t effective, permitted, inheritable;
      } data[2];
      memset(data, 0, sizeof data);
      bool caps = syscall(SYS_capget, &hdr, data) != 0 || data[0].effective ||
                  data[0].permitted || data[1].effective || data[1].permitted;
      line("uid=%u", (unsigned)getuid());
      line("caps=%s", caps ? "some" : "none");
    } else if (strcmp(c, "tree") == 0) {
      tree();
    } else {
      line("unknown=%s", c);
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "launch") == 0)
    return launch(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "probe") == 0)
    return probe(argc, argv);
  return usage("usage: maelys-landlock-launcher launch|probe ...");
}
