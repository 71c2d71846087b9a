/*
 * Denials made visible: what the sandbox refused, seen through a seccomp
 * user-notification listener, reported on the launch's status channel.
 *
 * The filters. bwrap loads the backend's filter (bwrap-seccomp.c), in which
 * the network calls a plan refuses (socket and socketpair of any family but
 * AF_UNIX) answer SECCOMP_RET_TRACE: with no tracer that is ENOSYS, a
 * refusal. The sandbox's init then stacks the filter built here, in which
 * the same calls, plus connect, execve and execveat, answer
 * SECCOMP_RET_USER_NOTIF, with a new listener. Between stacked filters the
 * kernel keeps the most restrictive action: ERRNO would beat USER_NOTIF
 * (which is why bwrap's filter must not answer these calls with ERRNO any
 * more: the listener would never see them), USER_NOTIF beats TRACE, so the
 * listener is asked. A USER_NOTIF whose listener was closed, or whose
 * process died, answers ENOSYS, and so does a pending notification when the
 * listener goes; a missing init filter leaves TRACE, ENOSYS again. A
 * refused call stays refused whatever happens to the listener: fail closed
 * (tests/integration/test-denials.c kills the listener and checks it).
 * TRACE rather than USER_NOTIF in bwrap's filter: that filter is built by
 * the host process, where libseccomp refuses USER_NOTIF unless it has seen
 * the kernel's API level (under valgrind it cannot); TRACE is accepted at
 * every level and is as closed without a tracer, and ptrace is refused
 * inside the sandbox; and with this filter stacked (every task of the
 * sandbox has it), USER_NOTIF outranks TRACE, so TRACE is never what
 * answers.
 *
 * The listener leaves the sandbox at once. init stacks the filter before
 * the payload exists, sends the listener over a socket to the launcher's
 * listener process (outside the sandbox and its pid namespace) and closes
 * every copy it held: nothing inside the sandbox can reach it, so the
 * payload can never answer its own notifications. Nor can it stack a
 * listener of its own, which would be asked instead of this one (between
 * equal actions the newest filter wins): the filter refuses it (see
 * maelys__notify_attach).
 *
 * The answers. The network calls get EPERM, the errno the ERRNO rule gave
 * before (the registration probe checks it). connect, execve and execveat
 * always continue (SECCOMP_USER_NOTIF_FLAG_CONTINUE): the kernel's own
 * answer, in the sandbox's own namespaces, decides, and this process only
 * looks. What it reads from the sandbox (a path, a socket address, the
 * start of a program, its socket table) is read while the caller waits --
 * its namespaces live then -- is bounded, and decides nothing but whether a
 * report is written; the host is looked at after the answer.
 *
 * What is a denial. A socket or socketpair of a refused family. A connect to
 * an abstract unix socket that the sandbox's network namespace does not
 * have and the host's does (network none keeps the sandbox off it). An
 * execve of an absolute path (or of the interpreter a script or an ELF
 * program names) that the sandbox does not hold and the host does: a path
 * that exists nowhere is a search, not a denial (execvp and libuv try every
 * PATH entry in turn). Looking on the host never triggers an automount and
 * never leaves the local filesystems, so a hostile name never reaches a
 * network filesystem or an automounter.
 *
 * The reports, one line each on the status channel (fd 2, a pipe shared
 * with the launcher and the sandbox's init; every line is written whole, far
 * below PIPE_BUF, and only when the pipe has room, so a host that stops
 * reading never blocks this process):
 *   maelys-denial listening
 *   maelys-denial example KIND CALL ERRNO COUNT DETAIL
 *   maelys-denial count KIND COUNT
 * Examples are the first EXAMPLES_PER_KIND distinct ones of each kind; the
 * counts follow at most every COUNT_INTERVAL_MS, and once more at the end.
 * DETAIL is printable ASCII: any other byte is written \xNN.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <seccomp.h>

#include "notify.h"

#ifndef SECCOMP_USER_NOTIF_FLAG_CONTINUE
#define SECCOMP_USER_NOTIF_FLAG_CONTINUE (1UL << 0)
#endif
#ifndef STATX_ATTR_AUTOMOUNT
#define STATX_ATTR_AUTOMOUNT 0x00001000
#endif
#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif

#define EXAMPLES_PER_KIND 8
#define DISTINCT_PER_KIND 64
#define COUNT_INTERVAL_MS 200
/* The most bytes of a path read from the sandbox, and of a detail written. */
#define PATH_READ_MAX 4096
#define DETAIL_MAX 400
/* The most lines of a /proc/net/unix looked through. */
#define UNIX_LINES_MAX 65536

/* ------------------------------------------------------------ in init */

static int add_notify(scmp_filter_ctx ctx, const char* name, bool not_unix) {
  int nr = seccomp_syscall_resolve_name(name);
  if (nr == __NR_SCMP_ERROR)
    return 0; /* not a call of the native ABI */
  if (not_unix)
    return seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, nr, 1,
                            SCMP_A0_32(SCMP_CMP_NE, AF_UNIX));
  return seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, nr, 0);
}

int maelys__notify_attach(int sock, bool deny_network) {
  int rc = 0, listener = -1;
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == NULL) {
    rc = -ENOMEM;
    goto out;
  }
  /* The same network rules as bwrap's filter (same condition, same
   * comparison), so that every call it refuses reaches the listener. */
  if (deny_network && ((rc = add_notify(ctx, "socket", true)) != 0 ||
                       (rc = add_notify(ctx, "socketpair", true)) != 0 ||
                       (rc = add_notify(ctx, "connect", false)) != 0))
    goto out;
  if ((rc = add_notify(ctx, "execve", false)) != 0 ||
      (rc = add_notify(ctx, "execveat", false)) != 0)
    goto out;
  /* No listener of the sandbox's own, ever. Between stacked filters that
   * both answer USER_NOTIF the newest one's listener is asked, so a payload
   * holding one could answer "continue" to the very calls refused here and
   * in bwrap's filter. The kernel refuses a second listener in a chain
   * (EBUSY) only while this one is open: once the listener process is gone
   * it would accept the payload's, and the network calls would open. ERRNO
   * outranks every other filter's USER_NOTIF and outlives the listener. */
  if ((rc = seccomp_rule_add(
           ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(seccomp), 2,
           SCMP_A0_32(SCMP_CMP_EQ, SECCOMP_SET_MODE_FILTER),
           SCMP_A1_32(SCMP_CMP_MASKED_EQ, SECCOMP_FILTER_FLAG_NEW_LISTENER,
                      SECCOMP_FILTER_FLAG_NEW_LISTENER))) != 0)
    goto out;
  /* With a notification rule, seccomp_load asks for a new listener. */
  if ((rc = seccomp_load(ctx)) != 0)
    goto out;
  listener = seccomp_notify_fd(ctx);
  if (listener < 0) {
    rc = listener;
    goto out;
  }
  char byte = 'L';
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    struct cmsghdr header;
    char space[CMSG_SPACE(sizeof(int))];
  } control;
  memset(&control, 0, sizeof control);
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.space,
                       .msg_controllen = sizeof control.space};
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &listener, sizeof listener);
  ssize_t n;
  do
    n = sendmsg(sock, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n != 1)
    rc = n < 0 ? -errno : -EIO;
out:
  /* No copy of the listener stays in the sandbox. */
  if (listener >= 0)
    close(listener);
  if (sock >= 0)
    close(sock);
  if (ctx != NULL)
    seccomp_release(ctx);
  return rc;
}

/* ------------------------------------------------ in the launcher: state */

enum { KIND_NETWORK, KIND_EXEC, KIND_COUNT };
static const char* const kind_names[KIND_COUNT] = {"network", "exec"};

typedef struct kind_state {
  uint64_t count;
  uint64_t reported; /* the count the last line of this kind carried */
  uint64_t seen[DISTINCT_PER_KIND];
  size_t seen_count;
  unsigned examples;
} kind_state_t;

typedef struct listener {
  int fd;
  int status_fd;
  uint32_t arch;
  int nr_socket, nr_socketpair, nr_connect, nr_execve, nr_execveat;
  kind_state_t kinds[KIND_COUNT];
  uint64_t last_count_ms;
  /* The sandbox's root (O_PATH), opened at the first exec: every task of
   * the sandbox has the same one (chroot, pivot_root, setns and new mount
   * namespaces are refused inside), so one lookup of /proc serves them
   * all. Only looked through while a caller waits, when its mounts are
   * certainly attached. -1 until then. */
  int root;
} listener_t;

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* One whole line on the status channel, or nothing when the pipe is full:
 * a host that stops reading must not stop the answers. */
static bool emit(const listener_t* l, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
static bool emit(const listener_t* l, const char* fmt, ...) {
  char line[DETAIL_MAX + 160];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof line - 1)
    return false;
  line[n++] = '\n';
  struct pollfd p = {.fd = l->status_fd, .events = POLLOUT};
  if (poll(&p, 1, 0) != 1 || !(p.revents & POLLOUT))
    return false;
  ssize_t w;
  do
    w = write(l->status_fd, line, (size_t)n);
  while (w < 0 && errno == EINTR);
  return w == n;
}

/* Printable ASCII, every other byte (and the backslash) as \xNN; cut with
 * "..." past DETAIL_MAX. */
static void sanitize(const char* in, size_t len, char out[DETAIL_MAX + 1]) {
  size_t o = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)in[i];
    bool plain = c > 0x20 && c < 0x7f && c != '\\';
    if (o + (plain ? 1 : 4) > DETAIL_MAX - 3) {
      memcpy(out + o, "...", 3);
      o += 3;
      break;
    }
    if (plain)
      out[o++] = (char)c;
    else
      o += (size_t)snprintf(out + o, 5, "\\x%02x", c);
  }
  out[o] = '\0';
}

static uint64_t fnv1a(const char* a, const char* b) {
  uint64_t h = 1469598103934665603ULL;
  for (const char* s = a; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  h = (h ^ 0xff) * 1099511628211ULL;
  for (const char* s = b; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

/* Writes the counts that changed, at most every COUNT_INTERVAL_MS unless
 * `now`; returns how long to wait before the next try, or -1 when nothing
 * is left to write. */
static int flush_counts(listener_t* l, bool now) {
  bool pending = false;
  for (int k = 0; k < KIND_COUNT; k++)
    pending = pending || l->kinds[k].count != l->kinds[k].reported;
  if (!pending)
    return -1;
  uint64_t t = now_ms();
  if (!now && t - l->last_count_ms < COUNT_INTERVAL_MS)
    return (int)(COUNT_INTERVAL_MS - (t - l->last_count_ms));
  l->last_count_ms = t;
  pending = false;
  for (int k = 0; k < KIND_COUNT; k++) {
    kind_state_t* s = &l->kinds[k];
    if (s->count == s->reported)
      continue;
    if (emit(l, "maelys-denial count %s %llu", kind_names[k],
             (unsigned long long)s->count))
      s->reported = s->count;
    else
      pending = true;
  }
  return pending ? COUNT_INTERVAL_MS : -1;
}

static void record(listener_t* l, int kind, const char* call, int err,
                   const char* raw, size_t raw_len) {
  kind_state_t* s = &l->kinds[kind];
  s->count++;
  char detail[DETAIL_MAX + 1];
  sanitize(raw, raw_len, detail);
  uint64_t h = fnv1a(call, detail);
  bool fresh = s->seen_count < DISTINCT_PER_KIND;
  for (size_t i = 0; fresh && i < s->seen_count; i++)
    fresh = s->seen[i] != h;
  if (fresh)
    s->seen[s->seen_count++] = h;
  /* The first denial of each kind is always written at once, as an
   * example: that is the line a silent hang is explained by. */
  if (fresh && s->examples < EXAMPLES_PER_KIND &&
      emit(l, "maelys-denial example %s %s %d %llu %s", kind_names[kind], call,
           err, (unsigned long long)s->count, detail[0] ? detail : "-")) {
    s->examples++;
    s->reported = s->count;
    return;
  }
  flush_counts(l, false);
}

/* ------------------------------------------- in the launcher: the sandbox */

/* The pid of `tid` (a pid of this process's namespace, as notifications
 * carry it) in the namespace of the procfs mounted on /proc, which may be
 * the host's: a pidfd's fdinfo says it. -1 when it cannot be known. */
static int proc_pid(int tid) {
  int pfd = (int)syscall(SYS_pidfd_open, tid, PIDFD_THREAD);
  if (pfd < 0 && errno == EINVAL) /* before Linux 6.9: leaders only */
    pfd = (int)syscall(SYS_pidfd_open, tid, 0);
  if (pfd < 0)
    return -1;
  char path[64], text[1024];
  snprintf(path, sizeof path, "/proc/self/fdinfo/%d", pfd);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, text, sizeof text - 1) : -1;
  if (fd >= 0)
    close(fd);
  close(pfd);
  if (n <= 0)
    return -1;
  text[n] = '\0';
  const char* p = strstr(text, "\nPid:");
  int pid = -1;
  if (p == NULL || sscanf(p + 5, "%d", &pid) != 1 || pid <= 0)
    return -1;
  return pid;
}

static int open_proc(int pid, const char* what, int flags) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/%s", pid, what);
  return open(path, flags | O_CLOEXEC);
}

/* Reads `len` bytes at `addr` of the task `tid` (a pid of this process's
 * namespace, as notifications carry it): one call, no /proc lookup, the
 * same access check as /proc/PID/mem (the sandbox's uid, a dumpable
 * task). The count read, or -1. */
static ssize_t read_task(int tid, uint64_t addr, void* buf, size_t len) {
  struct iovec local = {.iov_base = buf, .iov_len = len};
  struct iovec remote = {.iov_base = (void*)(uintptr_t)addr, .iov_len = len};
  return process_vm_readv(tid, &local, 1, &remote, 1, 0);
}

/* Reads a NUL-terminated string of at most max-1 bytes at `addr`, page by
 * page (the string may end just before an unmapped page). Its length, or -1
 * when it is unreadable or longer. */
static ssize_t read_string(int tid, uint64_t addr, char* buf, size_t max) {
  size_t got = 0;
  while (got < max - 1) {
    uint64_t at = addr + got;
    size_t chunk = 4096 - (size_t)(at % 4096);
    if (chunk > max - 1 - got)
      chunk = max - 1 - got;
    ssize_t n = read_task(tid, at, buf + got, chunk);
    if (n <= 0)
      return -1;
    char* nul = memchr(buf + got, '\0', (size_t)n);
    if (nul != NULL)
      return nul - buf;
    got += (size_t)n;
  }
  return -1;
}

/* Whether `path` names something from the sandbox's root `root`, resolved
 * as the sandbox resolves it (absolute symbolic links and ".." stay inside):
 * 1 yes, 0 no (ENOENT), -1 unknown. */
static int sandbox_has(int root, const char* path) {
  struct open_how how;
  memset(&how, 0, sizeof how);
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  int fd = (int)syscall(SYS_openat2, root, path, &how, sizeof how);
  if (fd >= 0) {
    close(fd);
    return 1;
  }
  return errno == ENOENT ? 0 : -1;
}

/* A path whose meaning depends on the pid namespace that looks (the
 * sandbox's /proc/self, /dev/fd): this process is not in the sandbox's pid
 * namespace, so it cannot tell whether the sandbox holds it. */
static bool per_process_path(const char* path) {
  return strstr(path, "/proc/") != NULL || strncmp(path, "/dev/fd/", 8) == 0 ||
         strncmp(path, "/dev/std", 8) == 0;
}

/* Filesystems where looking a name up asks nothing of another machine or
 * another process. */
static bool local_filesystem(int dir) {
  static const unsigned long local[] = {
      0xEF53,     /* ext2/3/4 */
      0x58465342, /* xfs */
      0x9123683E, /* btrfs */
      0x01021994, /* tmpfs */
      0x858458F6, /* ramfs */
      0x794C7630, /* overlayfs */
      0x73717368, /* squashfs */
      0xE0F5E1E2, /* erofs */
      0xF2F52010, /* f2fs */
      0x2FC12FC1, /* zfs */
      0xCA451A4E, /* bcachefs */
      0x4D44,     /* msdos/vfat */
      0x2011BAB0, /* exfat */
  };
  struct statfs st;
  if (fstatfs(dir, &st) != 0)
    return false;
  for (size_t i = 0; i < sizeof local / sizeof local[0]; i++)
    if ((unsigned long)st.f_type == local[i])
      return true;
  return false;
}

/* Whether the host (this process's mount namespace) has `path`, following
 * symbolic links as exec would: 1 yes, 0 no (ENOENT), -1 unknown. Walked one
 * component at a time, so that the walk stops before an automount trigger
 * (never fired for the payload) and before any filesystem that is not local
 * (a hostile name never reaches NFS, FUSE or another machine). */
static int host_has(const char* path) {
  char work[2 * PATH_MAX];
  if (snprintf(work, sizeof work, "%s", path) >= (int)sizeof work)
    return -1;
  int dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0)
    return -1;
  int result = -1, hops = 0;
  const char* rest = work;
  for (;;) {
    while (*rest == '/')
      rest++;
    if (*rest == '\0') {
      result = 1;
      break;
    }
    size_t len = strcspn(rest, "/");
    char name[NAME_MAX + 1];
    if (len > NAME_MAX)
      break;
    memcpy(name, rest, len);
    name[len] = '\0';
    rest += len;
    bool last = rest[strspn(rest, "/")] == '\0';
    if (strcmp(name, ".") == 0)
      continue;
    if (!local_filesystem(dir))
      break;
    struct statx sx;
    if (statx(dir, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_TYPE,
              &sx) != 0) {
      result = errno == ENOENT ? 0 : -1;
      break;
    }
    if (sx.stx_attributes & STATX_ATTR_AUTOMOUNT)
      break;
    if (S_ISLNK(sx.stx_mode)) {
      char target[PATH_MAX];
      ssize_t n = readlinkat(dir, name, target, sizeof target - 1);
      if (++hops > 40 || n <= 0)
        break;
      target[n] = '\0';
      char next[2 * PATH_MAX];
      if (snprintf(next, sizeof next, "%s/%s", target, rest) >=
          (int)sizeof next)
        break;
      memcpy(work, next, strlen(next) + 1);
      rest = work;
      if (target[0] == '/') {
        close(dir);
        if ((dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
          return -1;
      }
      continue;
    }
    if (last) {
      result = 1;
      break;
    }
    if (!S_ISDIR(sx.stx_mode))
      break; /* ENOTDIR, not a missing path */
    int next = openat(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0)
      break;
    close(dir);
    dir = next;
  }
  close(dir);
  return result;
}

/* The interpreter the kernel will look for when executing the regular file
 * `path` (from the sandbox's root): a script's "#!" line or an ELF
 * program's PT_INTERP; 0 with `out` filled, -1 when there is none. The file
 * is opened without following magic links, checked to be a regular file
 * before it is read (never a FIFO or a device), and only its first 4 KiB
 * are read. */
static int interpreter_of(int root, const char* path, char* out, size_t size) {
  struct open_how how;
  memset(&how, 0, sizeof how);
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  int opath = (int)syscall(SYS_openat2, root, path, &how, sizeof how);
  if (opath < 0)
    return -1;
  struct stat st;
  char self[64];
  snprintf(self, sizeof self, "/proc/self/fd/%d", opath);
  int fd = fstat(opath, &st) == 0 && S_ISREG(st.st_mode)
               ? open(self, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
               : -1;
  close(opath);
  if (fd < 0)
    return -1;
  static unsigned char head[4096];
  ssize_t n = pread(fd, head, sizeof head, 0);
  close(fd);
  if (n < 4)
    return -1;
  if (head[0] == '#' && head[1] == '!') {
    size_t i = 2;
    while (i < (size_t)n && (head[i] == ' ' || head[i] == '\t'))
      i++;
    size_t start = i;
    while (i < (size_t)n && head[i] != ' ' && head[i] != '\t' &&
           head[i] != '\n' && head[i] != '\0')
      i++;
    if (i == start || i - start >= size)
      return -1;
    memcpy(out, head + start, i - start);
    out[i - start] = '\0';
    return 0;
  }
  if ((size_t)n < sizeof(Elf64_Ehdr) || memcmp(head, ELFMAG, SELFMAG) != 0 ||
      head[EI_CLASS] != ELFCLASS64)
    return -1;
  Elf64_Ehdr eh;
  memcpy(&eh, head, sizeof eh);
  for (unsigned i = 0; i < eh.e_phnum; i++) {
    uint64_t at = eh.e_phoff + (uint64_t)i * eh.e_phentsize;
    Elf64_Phdr ph;
    if (eh.e_phentsize < sizeof ph || at > (uint64_t)n - sizeof ph)
      return -1;
    memcpy(&ph, head + at, sizeof ph);
    if (ph.p_type != PT_INTERP)
      continue;
    if (ph.p_filesz < 2 || ph.p_filesz > size || ph.p_offset > (uint64_t)n ||
        ph.p_filesz > (uint64_t)n - ph.p_offset)
      return -1;
    memcpy(out, head + ph.p_offset, ph.p_filesz);
    out[ph.p_filesz - 1] = '\0';
    return out[0] == '/' ? 0 : -1;
  }
  return -1;
}

/* Whether the unix-socket table `table` (a /proc/PID/net/unix) has a socket
 * bound to `name` ("@..." for an abstract name): 1, 0, or -1 unknown. */
static int unix_table_has(FILE* table, const char* name) {
  if (table == NULL)
    return -1;
  char line[512];
  size_t want = strlen(name);
  for (int i = 0; i < UNIX_LINES_MAX && fgets(line, sizeof line, table); i++) {
    size_t n = strcspn(line, "\n");
    line[n] = '\0';
    if (n > want && line[n - want - 1] == ' ' &&
        memcmp(line + n - want, name, want) == 0)
      return 1;
  }
  return feof(table) ? 0 : -1;
}

/* -------------------------------------- in the launcher: the notifications */

static void respond(listener_t* l, struct seccomp_notif_resp* resp) {
  /* The task may have gone meanwhile (a signal): nothing to answer then.
   * But an answer the kernel refuses while the caller still waits (a kernel
   * without SECCOMP_USER_NOTIF_FLAG_CONTINUE, before Linux 5.5) would leave
   * it waiting for ever: it gets ENOSYS instead, a refusal, never a pass. */
  if (seccomp_notify_respond(l->fd, resp) != 0 &&
      seccomp_notify_id_valid(l->fd, resp->id) == 0) {
    resp->flags = 0;
    resp->val = 0;
    resp->error = -ENOSYS;
    (void)seccomp_notify_respond(l->fd, resp);
  }
}

static const char* family_name(unsigned family) {
  static const struct {
    unsigned family;
    const char* name;
  } names[] = {
      {AF_INET, "AF_INET"},
      {AF_INET6, "AF_INET6"},
      {AF_NETLINK, "AF_NETLINK"},
      {AF_PACKET, "AF_PACKET"},
      {AF_KEY, "AF_KEY"},
      {AF_ALG, "AF_ALG"},
      {AF_VSOCK, "AF_VSOCK"},
      {AF_BLUETOOTH, "AF_BLUETOOTH"},
      {AF_CAN, "AF_CAN"},
      {AF_TIPC, "AF_TIPC"},
      {AF_RDS, "AF_RDS"},
      {AF_XDP, "AF_XDP"},
      {AF_APPLETALK, "AF_APPLETALK"},
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (names[i].family == family)
      return names[i].name;
  return NULL;
}

static void on_network_call(listener_t* l, const struct seccomp_notif* req,
                            struct seccomp_notif_resp* resp) {
  /* Reported before it is answered: once the caller sees its EPERM the
   * denial is on the status channel, so a listener killed right after (the
   * host, the test that kills it) loses no denial the payload observed. A
   * kill between the two found the count 0 under ctest -j2. */
  unsigned family = (unsigned)(req->data.args[0] & 0xffffffffu);
  char detail[32];
  const char* name = family_name(family);
  if (name != NULL)
    snprintf(detail, sizeof detail, "%s", name);
  else
    snprintf(detail, sizeof detail, "AF_%u", family);
  record(l, KIND_NETWORK,
         req->data.nr == l->nr_socket ? "socket" : "socketpair", EPERM, detail,
         strlen(detail));
  resp->error = -EPERM;
  respond(l, resp);
}

/* connect: continues; a denial when the address is an abstract unix name
 * the host's network namespace has and the sandbox's has not. Every connect
 * of the sandbox comes here (a filter cannot read the address), so the
 * common case -- a path, an address of another family -- is answered after
 * one read of the caller's memory. */
static void on_connect(listener_t* l, const struct seccomp_notif* req,
                       struct seccomp_notif_resp* resp) {
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  uint64_t len = req->data.args[2];
  /* /proc/net/unix writes an abstract name as '@' and its bytes: only names
   * of printable bytes without spaces can be compared there exactly. */
  char name[sizeof addr.sun_path + 2];
  size_t n = 0;
  bool comparable = false;
  if (len > offsetof(struct sockaddr_un, sun_path) + 1 && len <= sizeof addr &&
      read_task((int)req->pid, req->data.args[1], &addr, (size_t)len) ==
          (ssize_t)len &&
      seccomp_notify_id_valid(l->fd, req->id) == 0 &&
      addr.sun_family == AF_UNIX && addr.sun_path[0] == '\0') {
    n = (size_t)len - offsetof(struct sockaddr_un, sun_path) - 1;
    comparable = true;
    name[0] = '@';
    for (size_t i = 0; comparable && i < n; i++) {
      unsigned char c = (unsigned char)addr.sun_path[1 + i];
      comparable = c > 0x20 && c < 0x7f;
      name[1 + i] = (char)c;
    }
    name[1 + n] = '\0';
  }
  int in_sandbox = -1, pid;
  /* The table of the caller's own network namespace, read while it waits:
   * its pid cannot have been reused as long as the notification is
   * valid. */
  if (comparable && (pid = proc_pid((int)req->pid)) > 0) {
    FILE* table = NULL;
    int t = open_proc(pid, "net/unix", O_RDONLY);
    if (t >= 0 && (table = fdopen(t, "r")) == NULL)
      close(t);
    if (table != NULL && seccomp_notify_id_valid(l->fd, req->id) == 0)
      in_sandbox = unix_table_has(table, name);
    if (table != NULL)
      fclose(table);
  }
  resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
  respond(l, resp);
  if (in_sandbox != 0)
    return;
  FILE* host_table = fopen("/proc/self/net/unix", "re");
  int on_host = unix_table_has(host_table, name);
  if (host_table != NULL)
    fclose(host_table);
  if (on_host == 1)
    record(l, KIND_NETWORK, "connect", ECONNREFUSED, name, 1 + n);
}

/* execve, execveat: continue; a denial when the absolute path (or the
 * interpreter it names) is missing in the sandbox and present on the host.
 * The sandbox is looked at before the answer, while the caller waits and
 * its namespaces certainly live (once the sandbox's last task is gone its
 * mounts are detached, and a held root would show none of its binds); the
 * host, after it. */
static void on_exec(listener_t* l, const struct seccomp_notif* req,
                    struct seccomp_notif_resp* resp) {
  bool at = req->data.nr == l->nr_execveat;
  uint64_t addr = at ? req->data.args[1] : req->data.args[0];
  static char path[PATH_READ_MAX];
  static char interp[PATH_MAX];
  int has = -1, interp_has = -1;
  ssize_t len = read_string((int)req->pid, addr, path, sizeof path);
  if (len > 0 && path[0] == '/' &&
      seccomp_notify_id_valid(l->fd, req->id) == 0) {
    if (l->root < 0) {
      /* Opened, then checked: the caller still waits, so the pid was its
       * own all along. */
      int pid = proc_pid((int)req->pid);
      int root = pid > 0 ? open_proc(pid, "root", O_PATH | O_DIRECTORY) : -1;
      if (root >= 0 && seccomp_notify_id_valid(l->fd, req->id) == 0)
        l->root = root;
      else if (root >= 0)
        close(root);
    }
    if (l->root >= 0) {
      has = sandbox_has(l->root, path);
      /* The program is there; the interpreter it needs may not be, and
       * the kernel says ENOENT for that too. */
      if (has == 1 && interpreter_of(l->root, path, interp, sizeof interp) == 0)
        interp_has = sandbox_has(l->root, interp);
    }
  }
  resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
  respond(l, resp);
  const char* call = at ? "execveat" : "execve";
  if (has == 0 && !per_process_path(path) && host_has(path) == 1)
    record(l, KIND_EXEC, call, ENOENT, path, (size_t)len);
  else if (interp_has == 0 && !per_process_path(interp) &&
           host_has(interp) == 1)
    record(l, KIND_EXEC, "interpreter", ENOENT, interp, strlen(interp));
}

static void handle(listener_t* l, const struct seccomp_notif* req,
                   struct seccomp_notif_resp* resp) {
  memset(resp, 0, sizeof *resp);
  resp->id = req->id;
  int nr = req->data.nr;
  if (req->data.arch != l->arch) {
    /* bwrap's filter kills every foreign ABI first; refuse anyway. */
    resp->error = -EPERM;
    respond(l, resp);
  } else if (nr == l->nr_socket || nr == l->nr_socketpair) {
    on_network_call(l, req, resp);
  } else if (nr == l->nr_connect) {
    on_connect(l, req, resp);
  } else if (nr == l->nr_execve || nr == l->nr_execveat) {
    on_exec(l, req, resp);
  } else {
    resp->error = -ENOSYS;
    respond(l, resp);
  }
}

/* The listener sent by init: exactly one descriptor, and a seccomp one. */
static int receive_listener(int sock) {
  char byte;
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    struct cmsghdr header;
    char space[CMSG_SPACE(4 * sizeof(int))];
  } control;
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.space,
                       .msg_controllen = sizeof control.space};
  ssize_t n;
  do
    n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n <= 0)
    return -1;
  int fds[4], count = 0;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != NULL;
       c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
      continue;
    size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k && count < 4; i++)
      memcpy(&fds[count++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
  }
  int fd = -1;
  if (count == 1 && !(msg.msg_flags & MSG_CTRUNC)) {
    char link[64], target[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fds[0]);
    ssize_t t = readlink(link, target, sizeof target - 1);
    if (t > 0) {
      target[t] = '\0';
      if (strcmp(target, "anon_inode:seccomp notify") == 0)
        fd = fds[0];
    }
  }
  for (int i = 0; i < count; i++)
    if (fds[i] != fd)
      close(fds[i]);
  return fd;
}

static int syscall_nr(const char* name) {
  int nr = seccomp_syscall_resolve_name(name);
  return nr == __NR_SCMP_ERROR ? -1000 : nr;
}

int maelys__notify_serve(int sock, int status_fd) {
  listener_t l;
  memset(&l, 0, sizeof l);
  l.status_fd = status_fd;
  l.root = -1;
  l.arch = seccomp_arch_native();
  l.nr_socket = syscall_nr("socket");
  l.nr_socketpair = syscall_nr("socketpair");
  l.nr_connect = syscall_nr("connect");
  l.nr_execve = syscall_nr("execve");
  l.nr_execveat = syscall_nr("execveat");
  /* End of file: init ended without a listener (its launch failure is
   * reported by init itself). */
  l.fd = receive_listener(sock);
  close(sock);
  if (l.fd < 0)
    return 0;
  struct seccomp_notif* req = NULL;
  struct seccomp_notif_resp* resp = NULL;
  if (seccomp_notify_alloc(&req, &resp) != 0)
    return 1;
  emit(&l, "maelys-denial listening");
  int wait_ms = -1;
  for (;;) {
    struct pollfd p = {.fd = l.fd, .events = POLLIN};
    int n = poll(&p, 1, wait_ms);
    if (n < 0 && errno != EINTR)
      break;
    if (n > 0 && (p.revents & POLLIN)) {
      /* Zeroed before each receive, as the kernel requires. */
      memset(req, 0, sizeof *req);
      if (seccomp_notify_receive(l.fd, req) == 0)
        handle(&l, req, resp);
    } else if (n > 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL))) {
      /* Every task of the filter is gone: the sandbox has ended. */
      break;
    }
    wait_ms = flush_counts(&l, false);
  }
  flush_counts(&l, true);
  seccomp_notify_free(req, resp);
  if (l.root >= 0)
    close(l.root);
  close(l.fd);
  return 0;
}
