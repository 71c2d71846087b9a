/*
 * The bubblewrap backend: the glue around the pure lowering (bwrap-args.c)
 * and the seccomp filter (bwrap-seccomp.c). It checks bwrap and the helper
 * it executes, proves its capabilities with real sandboxes at registration,
 * and fills the launch description: the helper as the launcher (pid 1 of a
 * pid namespace of its own, watching the host through the lifeline: nothing
 * outlives an execution, invariant 22), bwrap's arguments in a sealed memfd
 * (--args), the BPF in another (--seccomp), and a status channel for the
 * launcher's, bwrap's and the sandbox's reports.
 *
 * Options: "bwrap" (an absolute path, or a name searched in the system's
 * directories, never $PATH; default "bwrap"),
 * "helper" (path of maelys-executor-helper; default the installed one),
 * "staging_dir" (host uid 0 only; default /run/maelys-executor) and
 * "identity_range" (host uid 0 only: FIRST:COUNT, the host uids and gids
 * from which each execution takes one that nothing else uses; default
 * 1879048192:65536, i.e. 0x70000000, above the container ranges and never
 * overlapping /etc/subuid, /etc/subgid, /etc/passwd or /etc/group, which is
 * checked at registration).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/openat2.h>
#include <seccomp.h>

#include "bwrap-internal.h"

#ifndef MAELYS_EXECUTOR_HELPER_PATH
#define MAELYS_EXECUTOR_HELPER_PATH                                            \
  "/usr/local/libexec/maelys-executor/maelys-executor-helper"
#endif

#define DEFAULT_STAGING_DIR "/run/maelys-executor"
#define DEFAULT_IDENTITY_FIRST 1879048192ULL /* 0x70000000 */
#define DEFAULT_IDENTITY_COUNT 65536ULL
#define IDENTITY_LOCK_FILE "identities.lock"
#define PROBE_TIMEOUT_MS 10000

/* A program the backend executes (bwrap, and the helper as root before it
 * takes the sandbox identity): opened once, checked once (invariant 18),
 * executed from that descriptor every time. */
typedef struct program {
  char* path;
  int fd; /* O_PATH, or -1 */
  /* The file and every ancestor directory: no writable bind may cover any
   * of them. */
  maelys__bwrap_devino_t chain[MAELYS__BWRAP_CHAIN_MAX];
  size_t chain_len;
  char* refused; /* why it cannot be trusted, or NULL */
} program_t;

typedef struct bwrap_state {
  program_t bwrap;
  char* bwrap_missing; /* bwrap was not found */
  program_t helper;
  char* staging_dir;
  unsigned long long identity_first, identity_count;
  bool host_root;
  unsigned char* bpf[2]; /* [0] network allowed, [1] network denied */
  size_t bpf_len[2];
} bwrap_state_t;

/* ------------------------------------------------------------- resolver */

static int real_open(void* ctx, const char* path,
                     maelys__bwrap_source_t* info) {
  (void)ctx;
  int fd = maelys_backend_open_nofollow(path);
  if (fd < 0)
    return fd;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  if (S_ISLNK(st.st_mode)) {
    close(fd);
    return -ELOOP;
  }
  info->kind = S_ISDIR(st.st_mode)   ? MAELYS__BWRAP_DIRECTORY
               : S_ISREG(st.st_mode) ? MAELYS__BWRAP_FILE
                                     : MAELYS__BWRAP_OTHER;
  info->dev = (uint64_t)st.st_dev;
  info->ino = (uint64_t)st.st_ino;
  info->owner = st.st_uid;
  info->group = st.st_gid;
  info->nlink = (uint64_t)st.st_nlink;
  /* Reachable by an unrelated uid: every ancestor searchable by "other",
   * the object itself readable (and searchable, for a directory). */
  bool ok = (st.st_mode & S_IROTH) &&
            (!S_ISDIR(st.st_mode) || (st.st_mode & S_IXOTH));
  char buf[PATH_MAX];
  snprintf(buf, sizeof buf, "%s", path);
  for (char* slash = strrchr(buf, '/'); ok && slash != NULL;
       slash = strrchr(buf, '/')) {
    if (slash == buf)
      slash[1] = '\0';
    else
      *slash = '\0';
    struct stat a;
    if (stat(buf, &a) != 0 || !(a.st_mode & S_IXOTH))
      ok = false;
    if (slash == buf)
      break;
  }
  info->world_accessible = ok;
  return fd;
}

static int real_create_dir(void* ctx, const char* path) {
  (void)ctx;
  char buf[PATH_MAX];
  snprintf(buf, sizeof buf, "%s", path);
  for (char* p = buf + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(buf, 0700) != 0 && errno != EEXIST)
      return -errno;
    *p = '/';
  }
  if (mkdir(buf, 0700) != 0 && errno != EEXIST)
    return -errno;
  return 0;
}

static void real_close(void* ctx, int fd) {
  (void)ctx;
  close(fd);
}

/*
 * Whether the socket file `name` in `dir` is live: a socket, in any network
 * namespace, is bound to it. A pathname socket is reached through the
 * filesystem, so a bind (even read-only) lets the sandbox connect() to
 * whatever listens there -- which is why a bound directory may hold no
 * socket. But a socket file whose socket was closed (one an earlier run left
 * in the workspace) connects to nothing: refusing it would lock every later
 * run out of that workspace. Only the kernel can say which it is, across
 * network namespaces (a socket bound in a sandbox's own namespace is in no
 * list the host can read, such as /proc/net/unix): a datagram connect() to
 * the file fails with ECONNREFUSED when no socket is bound to it, EPROTOTYPE
 * when a stream or seqpacket socket is (listening or not yet), and succeeds
 * when a datagram socket is. A datagram connect only records a peer: a
 * stream listener sees nothing. It goes through an O_PATH descriptor of the
 * very file checked (/proc/self/fd/N), never a path a sandbox could change.
 * Any other answer counts as live (fail closed). A stale file stays
 * harmless for the run: a new socket at that path needs the file unlinked
 * first.
 */
static bool socket_live(int dir, const char* name) {
  int fd = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return errno != ENOENT;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
    close(fd);
    return false; /* replaced meanwhile: no socket any more */
  }
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  snprintf(addr.sun_path, sizeof addr.sun_path, "/proc/self/fd/%d", fd);
  int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) {
    close(fd);
    return true;
  }
  int rc = connect(s, (struct sockaddr*)&addr, sizeof addr);
  int e = rc == 0 ? 0 : errno;
  close(s);
  close(fd);
  return !(rc != 0 && (e == ECONNREFUSED || e == ENOENT));
}

static int real_find_socket(void* ctx, int fd, char* name) {
  (void)ctx;
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return 0;
  DIR* d = fdopendir(dfd);
  if (d == NULL) {
    close(dfd);
    return 0;
  }
  int found = 0;
  struct dirent* e;
  while (!found && (e = readdir(d)) != NULL) {
    if (e->d_type == DT_SOCK ||
        (e->d_type == DT_UNKNOWN && e->d_name[0] != '.')) {
      struct stat st;
      if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISSOCK(st.st_mode) && socket_live(dirfd(d), e->d_name)) {
        snprintf(name, 256, "%s", e->d_name);
        found = 1;
      }
    }
  }
  closedir(d);
  return found;
}

/* The deepest a denied tree is walked; a deeper one is refused rather than
 * half checked. */
#define HARD_LINK_WALK_DEPTH 64

/* Walks the directory `dfd` (consumed) for a non-directory with more than
 * one name; `name` holds the path so far (`len` bytes). Each level is opened
 * relative to its parent with O_NOFOLLOW, so a symbolic link is never
 * followed out of the tree. */
static int walk_hard_links(int dfd, char* name, size_t len, int depth,
                           uint64_t* nlink) {
  DIR* d = fdopendir(dfd);
  if (d == NULL) {
    int e = errno;
    close(dfd);
    return -e;
  }
  int found = 0;
  struct dirent* e;
  errno = 0;
  while (found == 0 && (e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      found = errno == ENOENT ? 0 : -errno; /* gone meanwhile: no name */
      continue;
    }
    int n = snprintf(name + len, MAELYS__BWRAP_NAME_MAX - len, "%s%s",
                     len > 0 ? "/" : "", e->d_name);
    if (n < 0 || (size_t)n >= MAELYS__BWRAP_NAME_MAX - len) {
      found = -ENAMETOOLONG;
      break;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (st.st_nlink > 1) {
        *nlink = (uint64_t)st.st_nlink;
        found = 1;
      }
    } else if (faccessat(dirfd(d), e->d_name, X_OK, AT_EACCESS) != 0) {
      /* Not searchable: passed over (see real_find_hard_link). */
      found = errno == EACCES || errno == ENOENT ? 0 : -errno;
    } else if (depth >= HARD_LINK_WALK_DEPTH) {
      found = -ELOOP;
    } else {
      int sub = openat(dirfd(d), e->d_name,
                       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      found = sub < 0 ? -errno
                      : walk_hard_links(sub, name, len + (size_t)n, depth + 1,
                                        nlink);
    }
    if (found == 0)
      name[len] = '\0';
    errno = 0;
  }
  if (found == 0 && errno != 0)
    found = -errno;
  closedir(d);
  return found;
}

/* A directory this process cannot search is passed over: as root the walk
 * never meets one (CAP_DAC_READ_SEARCH), and an unprivileged host's sandbox
 * runs as the host's own uid, so no run of it could reach a file below one
 * to plant a second name for it (the kernel's protected_hardlinks also
 * wants the linker to own the file or be able to read and write it). A
 * directory it can search but not read is refused: its files cannot be
 * checked. */
static int real_find_hard_link(void* ctx, int fd, char* name, uint64_t* nlink) {
  (void)ctx;
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  name[0] = '\0';
  if (faccessat(AT_FDCWD, path, X_OK, AT_EACCESS) != 0)
    return errno == EACCES ? 0 : -errno;
  int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return -errno;
  return walk_hard_links(dfd, name, 0, 0, nlink);
}

static const maelys__bwrap_resolver_t real_resolver = {
    NULL,       real_open,        real_create_dir,
    real_close, real_find_socket, real_find_hard_link};

/* -------------------------------------------------------------- state */

/* The directories a bare program name is looked up in: the system's, never
 * the environment's PATH. A directory on a user's PATH may be one a sandbox
 * wrote (as root, the payload's files land root-owned in an idmapped
 * workspace, so ownership checks cannot tell): the adversarial review
 * planted a `bwrap` that way, and the next run executed it outside any
 * sandbox. A host that wants another bwrap names it by its absolute path in
 * the "bwrap" option. */
#define SYSTEM_PROGRAM_PATH "/usr/bin:/bin:/usr/sbin:/sbin:/usr/local/bin"

static char* find_on_path(const char* name) {
  if (name[0] == '/')
    return access(name, X_OK) == 0 ? strdup(name) : NULL;
  const char* path = SYSTEM_PROGRAM_PATH;
  char* copy = strdup(path);
  if (copy == NULL)
    return NULL;
  char* save = NULL;
  for (char* dir = strtok_r(copy, ":", &save); dir != NULL;
       dir = strtok_r(NULL, ":", &save)) {
    if (dir[0] != '/')
      continue;
    char candidate[PATH_MAX];
    snprintf(candidate, sizeof candidate, "%s/%s", dir, name);
    if (access(candidate, X_OK) == 0) {
      free(copy);
      char resolved[PATH_MAX];
      return strdup(realpath(candidate, resolved) ? resolved : candidate);
    }
  }
  free(copy);
  return NULL;
}

/* Who may own a program the backend executes, or a directory above it: root,
 * or the host's own uid when it is not root (a program another user could
 * replace is refused either way). */
static bool trusted_owner(uid_t owner, bool host_root) {
  return owner == 0 || (!host_root && owner == geteuid());
}

/* Opens `path` without following any symbolic link and checks it the way
 * OpenSSH checks its configuration: a regular executable file, owned by a
 * trusted uid, writable by nobody else, below directories owned by a trusted
 * uid and writable by nobody else (a sticky directory such as /tmp excepted:
 * nobody can rename what another user made in it). */
static void open_program(const char* what, const char* path, bool host_root,
                         program_t* p) {
  p->fd = -1;
  p->chain_len = 0;
  p->path = strdup(path);
  int fd = maelys_backend_open_nofollow(path);
  struct stat st;
  if (fd < 0) {
    p->refused = maelys_backend_asprintf(
        fd == -ELOOP ? "%s '%s' is or passes through a symbolic link: name "
                       "the resolved path"
                     : "%s '%s' cannot be opened: %s",
        what, path, strerror(-fd));
    return;
  }
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !(st.st_mode & 0111)) {
    p->refused = maelys_backend_asprintf(
        "%s '%s' is not an executable regular file", what, path);
    close(fd);
    return;
  }
  if (!trusted_owner(st.st_uid, host_root) ||
      (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    p->refused = maelys_backend_asprintf(
        "%s '%s' is owned by uid %u with mode %04o: a program %s executes "
        "must be owned by %s and writable by nobody else (invariant 18)",
        what, path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
        host_root ? "root" : "this user",
        host_root ? "root" : "root or this user");
    close(fd);
    return;
  }
  p->chain[p->chain_len++] =
      (maelys__bwrap_devino_t){(uint64_t)st.st_dev, (uint64_t)st.st_ino};
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", path);
  for (;;) {
    char* slash = strrchr(dir, '/');
    if (slash == NULL)
      break;
    if (slash == dir)
      slash[1] = '\0';
    else
      *slash = '\0';
    struct stat ds;
    if (lstat(dir, &ds) != 0 || !S_ISDIR(ds.st_mode) ||
        !trusted_owner(ds.st_uid, host_root) ||
        ((ds.st_mode & (S_IWGRP | S_IWOTH)) != 0 &&
         (ds.st_mode & S_ISVTX) == 0)) {
      p->refused = maelys_backend_asprintf(
          "%s '%s' lies in '%s', which another user could change (owner uid "
          "%u, mode %04o): refused (invariant 18)",
          what, path, dir, (unsigned)ds.st_uid, (unsigned)(ds.st_mode & 07777));
      close(fd);
      return;
    }
    if (p->chain_len < MAELYS__BWRAP_CHAIN_MAX)
      p->chain[p->chain_len++] =
          (maelys__bwrap_devino_t){(uint64_t)ds.st_dev, (uint64_t)ds.st_ino};
    if (strcmp(dir, "/") == 0)
      break;
  }
  p->fd = fd;
}

static void close_program(program_t* p) {
  if (p->fd >= 0)
    close(p->fd);
  free(p->path);
  free(p->refused);
  memset(p, 0, sizeof *p);
  p->fd = -1;
}

static void bwrap_destroy(void* ptr) {
  bwrap_state_t* st = ptr;
  if (st == NULL)
    return;
  close_program(&st->bwrap);
  close_program(&st->helper);
  free(st->bwrap_missing);
  free(st->staging_dir);
  free(st->bpf[0]);
  free(st->bpf[1]);
  free(st);
}

static int parse_range(const char* s, unsigned long long* first,
                       unsigned long long* count) {
  char* end;
  errno = 0;
  *first = strtoull(s, &end, 10);
  if (errno || end == s || *end != ':')
    return -1;
  const char* c = end + 1;
  *count = strtoull(c, &end, 10);
  if (errno || end == c || *end != '\0' || *first == 0 || *count == 0 ||
      *first + *count > 0xfffffffeULL ||
      (*first <= 65534 && 65534 < *first + *count))
    return -1;
  return 0;
}

/* The first entry of `file` whose ids overlap FIRST..FIRST+COUNT-1, as
 * "file: line", or NULL. subuid/subgid lines are NAME:START:COUNT, passwd
 * and group lines carry one id in their third field. */
static char* range_conflict(const char* file, bool ranges,
                            unsigned long long first,
                            unsigned long long count) {
  FILE* f = fopen(file, "re");
  if (f == NULL)
    return NULL;
  char line[1024];
  char* found = NULL;
  while (found == NULL && fgets(line, sizeof line, f) != NULL) {
    line[strcspn(line, "\n")] = '\0';
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", line);
    char* fields[4] = {NULL};
    char* save = NULL;
    char* t = strtok_r(copy, ":", &save);
    for (int i = 0; i < 4 && t != NULL; i++, t = strtok_r(NULL, ":", &save))
      fields[i] = t;
    unsigned long long lo, n = 1;
    if (ranges) {
      if (fields[1] == NULL || fields[2] == NULL)
        continue;
      lo = strtoull(fields[1], NULL, 10);
      n = strtoull(fields[2], NULL, 10);
    } else {
      if (fields[2] == NULL)
        continue;
      lo = strtoull(fields[2], NULL, 10);
    }
    if (lo < first + count && first < lo + n)
      found = maelys_backend_asprintf("%s: %s", file, line);
  }
  fclose(f);
  return found;
}

static maelys_executor_result_t
bwrap_create(const maelys_backend_options_t* options, void** out_state,
             char** out_error) {
  *out_state = NULL;
  static const char* const known[] = {"bwrap", "helper", "staging_dir",
                                      "identity_range"};
  for (size_t i = 0; i < maelys_backend_options_count(options); i++) {
    const char* key = maelys_backend_options_key(options, i);
    bool ok = false;
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
      ok = ok || strcmp(known[k], key) == 0;
    if (!ok)
      return maelys_backend_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "bubblewrap: unknown option '%s' (bwrap, helper, staging_dir, "
          "identity_range)",
          key);
  }
  bwrap_state_t* st = calloc(1, sizeof *st);
  if (st == NULL)
    return maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                               "out of memory");
  st->bwrap.fd = st->helper.fd = -1;
  st->host_root = maelys_backend_host_root();
  st->identity_first = DEFAULT_IDENTITY_FIRST;
  st->identity_count = DEFAULT_IDENTITY_COUNT;
  const char* v = maelys_backend_options_get(options, "identity_range");
  if (v != NULL && parse_range(v, &st->identity_first, &st->identity_count)) {
    bwrap_destroy(st);
    return maelys_backend_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "bubblewrap: identity_range '%s' is not FIRST:COUNT of non-zero host "
        "ids below 4294967295, without 65534 (nobody)",
        v);
  }
  const char* bwrap = maelys_backend_options_get(options, "bwrap");
  if (bwrap == NULL)
    bwrap = "bwrap";
  char* found = find_on_path(bwrap);
  if (found == NULL)
    st->bwrap_missing = maelys_backend_asprintf(
        "bwrap was not found (%s%s): install bubblewrap (Debian: apt-get "
        "install bubblewrap) or set the backend's 'bwrap' option to its "
        "absolute path",
        bwrap[0] == '/' ? "not executable: "
                        : "searched " SYSTEM_PROGRAM_PATH " for ",
        bwrap);
  else
    open_program("bwrap", found, st->host_root, &st->bwrap);
  free(found);
  v = maelys_backend_options_get(options, "helper");
  const char* helper = v ? v : MAELYS_EXECUTOR_HELPER_PATH;
  v = maelys_backend_options_get(options, "staging_dir");
  st->staging_dir = strdup(v ? v : DEFAULT_STAGING_DIR);
  if (st->staging_dir == NULL) {
    bwrap_destroy(st);
    return maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                               "out of memory");
  }
  if (!maelys_backend_path_is_clean(helper) ||
      !maelys_backend_path_is_clean(st->staging_dir)) {
    maelys_executor_result_t r = maelys_backend_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "bubblewrap: helper '%s' and staging_dir '%s' must be clean absolute "
        "paths",
        helper, st->staging_dir);
    bwrap_destroy(st);
    return r;
  }
  open_program("the sandbox helper", helper, st->host_root, &st->helper);
  *out_state = st;
  return MAELYS_EXECUTOR_OK;
}

/* ------------------------------------------------------------- prepare */

static int sealed_memfd(const char* name, const void* data, size_t len) {
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0)
    return -errno;
  size_t done = 0;
  while (done < len) {
    ssize_t n = write(fd, (const char*)data + done, len - done);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      int e = errno;
      close(fd);
      return -e;
    }
    done += (size_t)n;
  }
  /* Sealed: nothing can be added to or changed in what bwrap will read. */
  if (fcntl(fd, F_ADD_SEALS,
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0 ||
      lseek(fd, 0, SEEK_SET) != 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

static maelys_executor_result_t add_extra(maelys_backend_launch_t* launch,
                                          int fd, int child_fd,
                                          char** out_error) {
  int index;
  maelys_executor_result_t r =
      maelys_backend_launch_add_fd(launch, &fd, &index, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_backend_launch_map_fd(launch, child_fd, MAELYS_BACKEND_FD_EXTRA,
                                     index, out_error);
  return r;
}

/* The denial listener's socket (bwrap-denials.c): its ends at `listen_fd`
 * of the launcher and `peer_fd`, which bwrap hands on to the sandbox's
 * init. SOCK_SEQPACKET: one message, its descriptor, nothing else. */
static maelys_executor_result_t
add_notify_socket(maelys_backend_launch_t* launch, int listen_fd, int peer_fd,
                  char** out_error) {
  int sp[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0)
    return maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                               "creating the denial listener's socket: %s",
                               strerror(errno));
  maelys_executor_result_t r = add_extra(launch, sp[0], listen_fd, out_error);
  if (r != MAELYS_EXECUTOR_OK) {
    close(sp[1]);
    return r;
  }
  return add_extra(launch, sp[1], peer_fd, out_error);
}

/* Why the backend cannot launch anything, or NULL. */
static const char* unusable(const bwrap_state_t* st) {
  if (st->bwrap_missing != NULL)
    return st->bwrap_missing;
  if (st->bwrap.refused != NULL)
    return st->bwrap.refused;
  return st->helper.refused;
}

/* The launcher's argv, built with the strings it owns. */
typedef struct argv_builder {
  char** argv;
  size_t count, capacity;
  char** owned;
  size_t owned_count, owned_capacity;
  bool oom;
} argv_builder_t;

static void push(argv_builder_t* a, const char* s) {
  if (a->oom || maelys_backend_reserve((void**)&a->argv, &a->capacity,
                                       sizeof *a->argv, a->count + 2)) {
    a->oom = true;
    return;
  }
  a->argv[a->count++] = (char*)s;
  a->argv[a->count] = NULL;
}

static void pushf(argv_builder_t* a, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void pushf(argv_builder_t* a, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char* s = maelys_backend_vasprintf(fmt, ap);
  va_end(ap);
  if (s == NULL ||
      maelys_backend_reserve((void**)&a->owned, &a->owned_capacity,
                             sizeof *a->owned, a->owned_count + 1)) {
    free(s);
    a->oom = true;
    return;
  }
  a->owned[a->owned_count++] = s;
  push(a, s);
}

static void argv_dispose(argv_builder_t* a) {
  for (size_t i = 0; i < a->owned_count; i++)
    free(a->owned[i]);
  free(a->owned);
  free(a->argv);
}

/* The most --keep-fd options the sandbox init takes (helper.c). */
#define HELPER_KEEP_MAX 64

/* The payload descriptors from 3 up, which the launcher keeps (every other
 * one below `limit` it closes). A descriptor left out would be closed:
 * refused, never dropped (invariants 1 and 5); so is one more than the
 * sandbox init can keep, before anything starts. */
static maelys_executor_result_t
kept_payload_fds(const maelys_backend_launch_t* launch, int limit,
                 int keep[MAELYS_BACKEND_PAYLOAD_FD_MAX], size_t* count,
                 char** out_error) {
  for (int fd = 3; fd < limit; fd++) {
    if (!maelys_backend_launch_payload_fd_present(launch, fd))
      continue;
    if (*count == MAELYS_BACKEND_PAYLOAD_FD_MAX || *count == HELPER_KEEP_MAX)
      return maelys_backend_fail(
          out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
          "bubblewrap: the payload has more than %d descriptors from 3 up "
          "(its protocol descriptor and channels)",
          HELPER_KEEP_MAX);
    keep[(*count)++] = fd;
  }
  return MAELYS_EXECUTOR_OK;
}

/* The launcher's descriptors, which it hands on to bwrap: the payload
 * layout with fd 2 replaced by the status channel (diagnostics of the
 * launcher and of bwrap), then these, as offsets from the payload's
 * descriptor limit. */
typedef enum launcher_fd {
  LAUNCHER_STDERR,      /* the payload's real stderr */
  LAUNCHER_STATUS,      /* the sandbox init's status channel */
  LAUNCHER_ARGS,        /* bwrap's arguments (--args), a sealed memfd */
  LAUNCHER_SECCOMP,     /* the BPF (--seccomp), a sealed memfd */
  LAUNCHER_JSON_STATUS, /* bwrap's --json-status-fd: a pipe the launcher
                           makes here */
  LAUNCHER_LIFELINE,    /* the lifeline: the launcher's alone */
  LAUNCHER_EXEC,        /* bwrap itself, executed by the launcher */
  /* The two ends of the denial listener's socket: the launcher's listener
   * process keeps the first, the sandbox's init gets the other. */
  LAUNCHER_NOTIFY,
  LAUNCHER_NOTIFY_PEER,
  /* The memory cgroup's cgroup.procs, when the plan sets a memory ceiling:
   * the launcher joins the cgroup itself (MAELYS_BACKEND_FD_CGROUP). */
  LAUNCHER_CGROUP,
  /* For a host running as uid 0, the host's user-database service
   * (MAELYS_BACKEND_FD_USERDB): the launcher asks it whether an identity
   * is someone's instead of starting getent twice per launch. */
  LAUNCHER_USERDB,
  /* In a terminal session (MAELYS_EXEC_IO_TTY) the terminal rendezvous, then
   * the lowering's descriptors, in its order; without one they start here. */
  LAUNCHER_TERMINAL
} launcher_fd_t;

/* The launcher's arguments for a host running as uid 0: the identity (the
 * request's own or one of the range), its lock, the host's user-database
 * service at `userdb_fd` and the binds to stage. */
static void push_identity_args(argv_builder_t* a, const bwrap_state_t* st,
                               const maelys_execution_request_t* request,
                               const maelys__bwrap_lowered_t* low,
                               int userdb_fd) {
  uint32_t fixed_uid = 0, fixed_gid = 0;
  bool fixed =
      maelys_execution_request_identity(request, &fixed_uid, &fixed_gid) == 0;
  if (fixed) {
    push(a, "--identity");
    pushf(a, "%u:%u", fixed_uid, fixed_gid);
  } else {
    push(a, "--identity-range");
    pushf(a, "%llu:%llu", st->identity_first, st->identity_count);
  }
  push(a, "--identity-lock");
  pushf(a, "%s/" IDENTITY_LOCK_FILE, st->staging_dir);
  push(a, "--userdb-fd");
  pushf(a, "%d", userdb_fd);
  if (low->stage_count > 0) {
    push(a, "--staging-dir");
    push(a, st->staging_dir);
  }
  for (size_t i = 0; i < low->stage_count; i++) {
    const maelys__bwrap_stage_t* sg = &low->stages[i];
    push(a, "--stage");
    pushf(a, "%zu", i);
    push(a, sg->source);
    pushf(a, "%llu", (unsigned long long)sg->dev);
    pushf(a, "%llu", (unsigned long long)sg->ino);
    push(a, sg->is_directory ? "d" : "f");
  }
}

/* The launcher's descriptor map: the payload layout below `limit` with fd 2
 * replaced by the status channel, then the launcher's own (launcher_fd_t). */
static maelys_executor_result_t
map_launcher_fds(maelys_backend_launch_t* launch, int limit, bool tty,
                 bool cgroup, bool userdb, char** out_error) {
  maelys_executor_result_t r = MAELYS_EXECUTOR_OK;
  for (int c = 0; c < limit && r == MAELYS_EXECUTOR_OK; c++) {
    if (c == 2)
      r = maelys_backend_launch_map_fd(launch, 2, MAELYS_BACKEND_FD_STATUS, 0,
                                       out_error);
    else if (maelys_backend_launch_payload_fd_present(launch, c))
      r = maelys_backend_launch_map_fd(launch, c, MAELYS_BACKEND_FD_PAYLOAD, c,
                                       out_error);
  }
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_backend_launch_map_fd(launch, limit + LAUNCHER_STDERR,
                                     MAELYS_BACKEND_FD_PAYLOAD, 2, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_backend_launch_map_fd(launch, limit + LAUNCHER_STATUS,
                                     MAELYS_BACKEND_FD_STATUS, 0, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_backend_launch_map_fd(launch, limit + LAUNCHER_LIFELINE,
                                     MAELYS_BACKEND_FD_LIFELINE, 0, out_error);
  /* The rendezvous goes through the launcher and bwrap to the sandbox's
   * init, which sends the master of the terminal it makes back over it. */
  if (r == MAELYS_EXECUTOR_OK && tty)
    r = maelys_backend_launch_map_fd(launch, limit + LAUNCHER_TERMINAL,
                                     MAELYS_BACKEND_FD_TERMINAL, 0, out_error);
  if (r == MAELYS_EXECUTOR_OK && cgroup)
    r = maelys_backend_launch_map_fd(launch, limit + LAUNCHER_CGROUP,
                                     MAELYS_BACKEND_FD_CGROUP, 0, out_error);
  if (r == MAELYS_EXECUTOR_OK && userdb)
    r = maelys_backend_launch_map_fd(launch, limit + LAUNCHER_USERDB,
                                     MAELYS_BACKEND_FD_USERDB, 0, out_error);
  return r;
}

/* A sealed memfd of the shared seccomp baseline for network allowed or
 * denied, or a negative errno (-ENOEXEC: it could not be compiled) with
 * *out_error. Compiled on first use, once per variant: libseccomp's
 * compilation is most of what a launch costs the host process. */
static int seccomp_memfd(bwrap_state_t* st, bool deny_net, char** out_error) {
  if (st->bpf[deny_net] == NULL &&
      maelys__seccomp_baseline_build(deny_net, true, &st->bpf[deny_net],
                                     &st->bpf_len[deny_net], out_error) != 0)
    return -ENOEXEC;
  int fd =
      sealed_memfd("maelys-seccomp", st->bpf[deny_net], st->bpf_len[deny_net]);
  if (fd < 0)
    maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                        "creating the seccomp memfd: %s", strerror(-fd));
  return fd;
}

/* What no writable bind may cover (invariant 18): every object on the paths
 * of bwrap and of the helper, into `out`; their count. */
static size_t protected_programs(const bwrap_state_t* st,
                                 maelys__bwrap_devino_t* out) {
  size_t n = 0;
  for (size_t i = 0; i < st->bwrap.chain_len; i++)
    out[n++] = st->bwrap.chain[i];
  for (size_t i = 0; i < st->helper.chain_len; i++)
    out[n++] = st->helper.chain[i];
  return n;
}

static maelys_executor_result_t
bwrap_prepare(void* state, uint64_t proved, const maelys_executor_plan_t* plan,
              const maelys_execution_request_t* request,
              maelys_backend_launch_t* launch, char** out_error) {
  bwrap_state_t* st = state;
  const char* why = unusable(st);
  if (why != NULL)
    return maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_NOT_FOUND, "%s",
                               why);

  int limit = maelys_backend_launch_payload_fd_limit(launch);
  int keep[MAELYS_BACKEND_PAYLOAD_FD_MAX];
  size_t keep_count = 0;
  maelys_executor_result_t r =
      kept_payload_fds(launch, limit, keep, &keep_count, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  maelys__bwrap_devino_t protected_ids[2 * MAELYS__BWRAP_CHAIN_MAX];
  size_t protected_count = protected_programs(st, protected_ids);
  const bool tty =
      maelys_execution_request_io_mode(request) == MAELYS_EXEC_IO_TTY;
  /* The core makes a memory cgroup exactly when the plan sets a ceiling
   * (MAELYS_BACKEND_LAUNCH_MEMORY_CGROUP). */
  uint64_t memory = 0;
  const bool memory_cgroup =
      maelys_executor_plan_limit_get(plan, MAELYS_EXECUTOR_LIMIT_MEMORY,
                                     &memory) == 0 &&
      memory > 0;
  const int stderr_fd = limit + LAUNCHER_STDERR,
            status_fd = limit + LAUNCHER_STATUS,
            args_fd = limit + LAUNCHER_ARGS,
            seccomp_fd = limit + LAUNCHER_SECCOMP,
            json_fd = limit + LAUNCHER_JSON_STATUS,
            lifeline_fd = limit + LAUNCHER_LIFELINE,
            exec_fd = limit + LAUNCHER_EXEC,
            notify_fd = limit + LAUNCHER_NOTIFY,
            notify_peer_fd = limit + LAUNCHER_NOTIFY_PEER,
            terminal_fd = tty ? limit + LAUNCHER_TERMINAL : -1,
            first_extra_fd = limit + LAUNCHER_TERMINAL + (tty ? 1 : 0);
  maelys__bwrap_env_t env = {
      .resolver = &real_resolver,
      .helper_path = st->helper.path,
      .helper_id = st->helper.chain[0],
      .protected_ids = protected_ids,
      .protected_count = protected_count,
      .host_root = st->host_root,
      .staging_dir = st->staging_dir,
      .disable_userns = (proved & MAELYS_BACKEND_CAP_DISABLE_USERNS) != 0,
      .payload_fd_limit = limit,
      .keep_fds = keep,
      .keep_count = keep_count,
      .stderr_fd = stderr_fd,
      .status_fd = status_fd,
      .seccomp_fd = seccomp_fd,
      .json_status_fd = json_fd,
      .notify_fd = notify_peer_fd,
      .first_extra_fd = first_extra_fd,
      .terminal_fd = terminal_fd,
  };
  maelys__bwrap_lowered_t low;
  r = maelys__bwrap_lower(plan, request, &env, &low, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;

  argv_builder_t a;
  memset(&a, 0, sizeof a);
  char* blob = NULL;
  int fd;
  /* The --args memfd: every argument, NUL-terminated. */
  size_t total = 0;
  for (size_t i = 0; i < low.argc; i++)
    total += strlen(low.args[i]) + 1;
  blob = malloc(total + 1);
  if (blob == NULL) {
    r = maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                            "out of memory");
    goto out;
  }
  size_t off = 0;
  for (size_t i = 0; i < low.argc; i++) {
    size_t n = strlen(low.args[i]) + 1;
    memcpy(blob + off, low.args[i], n);
    off += n;
  }
  fd = sealed_memfd("maelys-bwrap-args", blob, total);
  if (fd < 0) {
    r = maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                            "creating the bwrap arguments memfd: %s",
                            strerror(-fd));
    goto out;
  }
  if ((r = add_extra(launch, fd, args_fd, out_error)) != MAELYS_EXECUTOR_OK)
    goto out;
  bool deny_net =
      maelys_executor_plan_network(plan) != MAELYS_EXECUTOR_NETWORK_INHERIT;
  fd = seccomp_memfd(st, deny_net, out_error);
  if (fd < 0) {
    r = fd == -ENOEXEC ? MAELYS_EXECUTOR_ERR_UNSUPPORTED
                       : MAELYS_EXECUTOR_ERR_IO;
    goto out;
  }
  if ((r = add_extra(launch, fd, seccomp_fd, out_error)) != MAELYS_EXECUTOR_OK)
    goto out;
  if ((r = add_notify_socket(launch, notify_fd, notify_peer_fd, out_error)) !=
      MAELYS_EXECUTOR_OK)
    goto out;
  fd = fcntl(st->bwrap.fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0 ||
      (r = add_extra(launch, fd, exec_fd, out_error)) != MAELYS_EXECUTOR_OK) {
    if (fd < 0)
      r = maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                              "duplicating bwrap's descriptor: %s",
                              strerror(errno));
    goto out;
  }
  for (size_t i = 0; i < low.fd_count; i++) {
    fd = low.fds[i];
    low.fds[i] = -1;
    if (fd < 0 && (fd = sealed_memfd("maelys-deny", "", 0)) < 0) {
      r = maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                              "creating a deny overlay: %s", strerror(-fd));
      goto out;
    }
    if ((r = add_extra(launch, fd, first_extra_fd + (int)i, out_error)) !=
        MAELYS_EXECUTOR_OK)
      goto out;
  }
  if (r == MAELYS_EXECUTOR_OK)
    r = map_launcher_fds(launch, limit, tty, memory_cgroup, st->host_root,
                         out_error);
  if (r != MAELYS_EXECUTOR_OK)
    goto out;

  /* The launcher: pid 1 of the execution's own pid namespace, then bwrap.
   * As root it first takes the sandbox's own host identity and stages the
   * binds that identity could not reach (never host root inside). */
  push(&a, "maelys-launch");
  push(&a, "launch");
  push(&a, "--lifeline-fd");
  pushf(&a, "%d", lifeline_fd);
  push(&a, "--json-fd");
  pushf(&a, "%d", json_fd);
  push(&a, "--exec-fd");
  pushf(&a, "%d", exec_fd);
  push(&a, "--notify-fd");
  pushf(&a, "%d", notify_fd);
  push(&a, "--notify-peer-fd");
  pushf(&a, "%d", notify_peer_fd);
  if (memory_cgroup) {
    push(&a, "--cgroup-fd");
    pushf(&a, "%d", limit + LAUNCHER_CGROUP);
  }
  if (st->host_root)
    push_identity_args(&a, st, request, &low, limit + LAUNCHER_USERDB);
  push(&a, "--");
  push(&a, "bwrap");
  push(&a, "--args");
  pushf(&a, "%d", args_fd);
  push(&a, "--");
  for (size_t i = 0; i < low.command_argc; i++)
    push(&a, low.command[i]);
  if (a.oom) {
    r = maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                            "out of memory");
    goto out;
  }
  r = maelys_backend_launch_set_image(
      launch, st->helper.path, (const char* const*)a.argv, NULL, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    goto out;
  fd = fcntl(st->helper.fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) {
    r = maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                            "duplicating the helper's descriptor: %s",
                            strerror(errno));
    goto out;
  }
  r = maelys_backend_launch_set_image_fd(launch, &fd, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    goto out;
  maelys_backend_launch_set_flags(launch,
                                  MAELYS_BACKEND_LAUNCH_NO_CHDIR |
                                      MAELYS_BACKEND_LAUNCH_NO_RLIMITS |
                                      MAELYS_BACKEND_LAUNCH_STATUS_CHANNEL |
                                      MAELYS_BACKEND_LAUNCH_NEW_PID_NAMESPACE |
                                      MAELYS_BACKEND_LAUNCH_MEMORY_CGROUP |
                                      MAELYS_BACKEND_LAUNCH_IMAGE_JOINS_CGROUP);
out:
  free(blob);
  argv_dispose(&a);
  maelys__bwrap_lowered_dispose(&low, &real_resolver, true);
  return r;
}

/* ------------------------------------------------------ status channel */

static void bwrap_status_line(void* state, const char* line, size_t length,
                              maelys_backend_event_t* ev) {
  (void)state;
  static const char init[] = "maelys-init ";
  static const char launch[] = "maelys-launch identity ";
  char buf[600];
  size_t n = length < sizeof buf - 1 ? length : sizeof buf - 1;
  memcpy(buf, line, n);
  buf[n] = '\0';
  unsigned uid, gid;
  if (strncmp(buf, launch, sizeof launch - 1) == 0 &&
      sscanf(buf + sizeof launch - 1, "%u %u", &uid, &gid) == 2) {
    ev->kind = MAELYS_BACKEND_EVENT_IDENTITY;
    ev->uid = uid;
    ev->gid = gid;
    return;
  }
  if (strncmp(buf, init, sizeof init - 1) == 0) {
    const char* rest = buf + sizeof init - 1;
    char step[32];
    int v;
    if (strcmp(rest, "ready") == 0) {
      ev->kind = MAELYS_BACKEND_EVENT_READY;
    } else if (sscanf(rest, "exit code %d", &v) == 1) {
      ev->kind = MAELYS_BACKEND_EVENT_EXIT;
      ev->exit_code = v;
    } else if (sscanf(rest, "exit signal %d", &v) == 1) {
      ev->kind = MAELYS_BACKEND_EVENT_EXIT;
      ev->term_signal = v;
    } else if (sscanf(rest, "launch-failed %31s %d", step, &v) == 2) {
      ev->kind = MAELYS_BACKEND_EVENT_LAUNCH_FAILED;
      snprintf(ev->step, sizeof ev->step, "%s", step);
      ev->error_number = v;
      if (strcmp(step, "terminal") == 0)
        snprintf(ev->message, sizeof ev->message,
                 "the sandbox could not make the payload a pseudo-terminal of "
                 "its own from its /dev/ptmx (its devpts instance): %s; a "
                 "terminal of the host's never enters a sandbox",
                 strerror(v));
      else
        snprintf(ev->message, sizeof ev->message,
                 "the payload could not be started inside the sandbox: %s: %s",
                 step, strerror(v));
    }
    return;
  }
  if (maelys__bwrap_denial_line(buf, ev))
    return;
  ev->kind = MAELYS_BACKEND_EVENT_DIAGNOSTIC;
  snprintf(ev->message, sizeof ev->message, "%.500s", buf);
}

/* --------------------------------------------------------------- probe */

/* The probe's host directories. Each registration makes a private one under
 * a parent where a later registration can sweep what a registration that
 * died left behind (invariant 22: nothing stays): the directory holds a lock
 * file its registration keeps locked while it runs. */
typedef struct probe_dirs {
  char root[PATH_MAX];
  char rw[PATH_MAX + 8], ro[PATH_MAX + 8], ro_file[PATH_MAX + 16],
      secret[PATH_MAX + 16];
  int lock_fd;
} probe_dirs_t;

/* Removes everything below the directory `dir` (consumed), following no
 * symbolic link. */
static void remove_tree(int dir);

/* Removes a probe directory's contents, its lock file last: a registration
 * killed while it cleans up (or sweeps) leaves a directory the next one
 * still recognises as stale by its free lock, not one without a lock that
 * would wait a minute. The test that kills registrations at every
 * millisecond found that window. */
static void remove_probe_tree(int dir) {
  int copy = dup(dir);
  DIR* d = fdopendir(dir);
  if (d == NULL) {
    close(dir);
    if (copy >= 0)
      close(copy);
    return;
  }
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
        strcmp(e->d_name, ".lock") == 0)
      continue;
    if (unlinkat(dirfd(d), e->d_name, 0) == 0)
      continue;
    int sub = openat(dirfd(d), e->d_name,
                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub >= 0) {
      remove_tree(sub);
      unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
    }
  }
  closedir(d);
  if (copy >= 0) {
    unlinkat(copy, ".lock", 0);
    close(copy);
  }
}

static void remove_tree(int dir) {
  DIR* d = fdopendir(dir);
  if (d == NULL) {
    close(dir);
    return;
  }
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    if (unlinkat(dirfd(d), e->d_name, 0) == 0)
      continue;
    int sub = openat(dirfd(d), e->d_name,
                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub >= 0) {
      remove_tree(sub);
      unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
    }
  }
  closedir(d);
}

static void probe_prefix(char* out, size_t size) {
  snprintf(out, size, "maelys-probe-%u-", (unsigned)geteuid());
}

/* The start time of process `pid` (field 22 of /proc/PID/stat, clock ticks
 * since boot), or 0 when it does not exist. With the pid it names a process
 * for good: a pid reused later has another start time. */
static unsigned long long process_start(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  const char* p = strrchr(buf, ')'); /* the command name may hold spaces */
  unsigned long long start = 0;
  for (int field = 2; p != NULL && *p != '\0'; p++)
    if (*p == ' ' && ++field == 22) {
      start = strtoull(p + 1, NULL, 10);
      break;
    }
  return start;
}

/* Sweeps this user's probe directories whose registration is gone. A name
 * carries its creator (maelys-probe-UID-PID-START-XXXXXX): the directory is
 * stale once that process is dead, whatever instant it died at -- even
 * between creating the directory and locking it, a window no lock can
 * close. While the creator lives, a free lock (the registration finished
 * without removing it) makes it stale too. Names without a creator (older
 * versions) fall back to the lock, or a minute's age without one. */
static void sweep_probe_dirs(const char* parent) {
  char prefix[64];
  probe_prefix(prefix, sizeof prefix);
  size_t plen = strlen(prefix);
  DIR* d = opendir(parent);
  if (d == NULL)
    return;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, prefix, plen) != 0)
      continue;
    int dir = openat(dirfd(d), e->d_name,
                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (dir < 0)
      continue;
    if (fstat(dir, &st) != 0 || st.st_uid != geteuid()) {
      close(dir);
      continue;
    }
    int pid = 0;
    unsigned long long start = 0;
    bool named = sscanf(e->d_name + plen, "%d-%llu-", &pid, &start) == 2 &&
                 pid > 0 && start > 0;
    bool creator_dead = named && process_start(pid) != start;
    int lock = openat(dir, ".lock", O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    bool stale =
        creator_dead || (lock >= 0 ? flock(lock, LOCK_EX | LOCK_NB) == 0
                                   : !named && time(NULL) - st.st_mtime > 60);
    if (lock >= 0)
      close(lock);
    if (!stale) {
      close(dir);
      continue;
    }
    remove_probe_tree(dir);
    /* A dead creator's probe sandbox may still be dying (the kernel tears
     * its pid namespace down asynchronously) and write one more file:
     * removed again, briefly, rather than left for the next sweep. */
    for (int tries = 0; unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR) != 0 &&
                        errno == ENOTEMPTY && creator_dead && tries < 50;
         tries++) {
      struct timespec pause = {0, 10 * 1000 * 1000};
      nanosleep(&pause, NULL);
      int again = openat(dirfd(d), e->d_name,
                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (again < 0)
        break;
      remove_probe_tree(again);
    }
  }
  closedir(d);
}

static int make_probe_dirs(const bwrap_state_t* st, probe_dirs_t* d) {
  d->lock_fd = -1;
  (void)st; /* the same parent for every user: the names carry the uid */
  const char* parent = "/tmp";
  sweep_probe_dirs(parent);
  char prefix[64];
  probe_prefix(prefix, sizeof prefix);
  snprintf(d->root, sizeof d->root, "%s/%s%d-%llu-XXXXXX", parent, prefix,
           (int)getpid(), process_start(getpid()));
  if (mkdtemp(d->root) == NULL) {
    d->root[0] = '\0';
    return -errno;
  }
  char lock[PATH_MAX + 8];
  snprintf(lock, sizeof lock, "%s/.lock", d->root);
  /* The lock file appears already locked: made anonymous (O_TMPFILE),
   * locked, then linked in. Created by name and then locked, another
   * registration's sweep could take the free lock in between and remove a
   * live directory (seen on a machine where several users' suites run). */
  d->lock_fd = open(d->root, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (d->lock_fd >= 0) {
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", d->lock_fd);
    if (flock(d->lock_fd, LOCK_EX) != 0 ||
        linkat(AT_FDCWD, self, AT_FDCWD, lock, AT_SYMLINK_FOLLOW) != 0)
      return -errno;
  } else {
    d->lock_fd = open(lock, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (d->lock_fd < 0 || flock(d->lock_fd, LOCK_EX) != 0)
      return -errno;
  }
  snprintf(d->rw, sizeof d->rw, "%s/rw", d->root);
  snprintf(d->ro, sizeof d->ro, "%s/ro", d->root);
  snprintf(d->ro_file, sizeof d->ro_file, "%s/ro/file", d->root);
  snprintf(d->secret, sizeof d->secret, "%s/ro/secret", d->root);
  if (mkdir(d->rw, 0700) != 0 || mkdir(d->ro, 0700) != 0)
    return -errno;
  int f = open(d->ro_file, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  int g = open(d->secret, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (f >= 0)
    close(f);
  if (g >= 0)
    close(g);
  return f < 0 || g < 0 ? -EIO : 0;
}

static void remove_probe_dirs(probe_dirs_t* d) {
  if (d->root[0] != '\0') {
    int dir = open(d->root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir >= 0)
      remove_probe_tree(dir);
    rmdir(d->root);
  }
  if (d->lock_fd >= 0)
    close(d->lock_fd);
  d->lock_fd = -1;
}

static maelys_executor_plan_t* probe_plan(const probe_dirs_t* d, int kind) {
  bool ephemeral = kind == MAELYS__BWRAP_PROBE_EPHEMERAL;
  maelys_executor_plan_t* p = NULL;
  if (maelys_executor_plan_create(&p, NULL) != MAELYS_EXECUTOR_OK)
    return NULL;
  bool ok =
      maelys_executor_plan_set_root(
          p,
          ephemeral ? MAELYS_EXECUTOR_ROOT_EPHEMERAL_WRITE
                    : MAELYS_EXECUTOR_ROOT_READONLY,
          ephemeral ? MAELYS__BWRAP_PROBE_SCRATCH_BYTES : 0,
          NULL) == MAELYS_EXECUTOR_OK &&
      maelys_executor_plan_add_proc(p, "/proc", NULL) == MAELYS_EXECUTOR_OK &&
      maelys_executor_plan_add_dev(p, "/dev", NULL) == MAELYS_EXECUTOR_OK &&
      maelys_executor_plan_add_tmpfs(p, "/tmp", MAELYS__BWRAP_PROBE_TMPFS_BYTES,
                                     NULL) == MAELYS_EXECUTOR_OK &&
      maelys_executor_plan_set_network(p, MAELYS_EXECUTOR_NETWORK_NONE, NULL) ==
          MAELYS_EXECUTOR_OK &&
      maelys_executor_plan_set_process_tree_required(p, 1, NULL) ==
          MAELYS_EXECUTOR_OK;
  if (ok && kind == MAELYS__BWRAP_PROBE_MAIN)
    ok = maelys_executor_plan_set_limit(p, MAELYS_EXECUTOR_LIMIT_TASKS,
                                        MAELYS__BWRAP_PROBE_TASKS,
                                        NULL) == MAELYS_EXECUTOR_OK;
  if (ok && kind == MAELYS__BWRAP_PROBE_MEMORY)
    ok = maelys_executor_plan_set_limit(p, MAELYS_EXECUTOR_LIMIT_MEMORY,
                                        MAELYS__BWRAP_PROBE_MEMORY_BYTES,
                                        NULL) == MAELYS_EXECUTOR_OK;
  if (ok && kind == MAELYS__BWRAP_PROBE_MAIN)
    ok =
        maelys_executor_plan_add_rule(p, d->rw, MAELYS_EXECUTOR_ACCESS_WRITE,
                                      MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY,
                                      NULL) == MAELYS_EXECUTOR_OK &&
        maelys_executor_plan_add_rule(p, d->ro, MAELYS_EXECUTOR_ACCESS_READ,
                                      MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY,
                                      NULL) == MAELYS_EXECUTOR_OK &&
        maelys_executor_plan_add_rule(p, d->secret, MAELYS_EXECUTOR_ACCESS_DENY,
                                      MAELYS_EXECUTOR_SCOPE_LITERAL_FILE,
                                      NULL) == MAELYS_EXECUTOR_OK;
  if (!ok || maelys_executor_plan_seal(p, NULL) != MAELYS_EXECUTOR_OK) {
    maelys_executor_plan_destroy(p);
    return NULL;
  }
  return p;
}

static maelys_execution_request_t* probe_request(const char* const* argv,
                                                 bool ephemeral) {
  maelys_execution_request_t* r = NULL;
  if (maelys_execution_request_create(&r, NULL) != MAELYS_EXECUTOR_OK)
    return NULL;
  if (maelys_execution_request_set_executable(r, MAELYS__BWRAP_HELPER_DEST,
                                              NULL) != MAELYS_EXECUTOR_OK ||
      maelys_execution_request_set_argv(r, argv, NULL) != MAELYS_EXECUTOR_OK ||
      maelys_execution_request_set_backend(r, "bubblewrap", NULL) !=
          MAELYS_EXECUTOR_OK ||
      maelys_execution_request_set_stderr_mode(r, MAELYS_EXEC_STDERR_CAPTURE,
                                               NULL) != MAELYS_EXECUTOR_OK ||
      maelys_execution_request_set_stop_budget(r, 1000, 2000, NULL) !=
          MAELYS_EXECUTOR_OK ||
      (ephemeral &&
       maelys_execution_request_set_scratch_size(
           r, MAELYS__BWRAP_PROBE_SCRATCH_BYTES, NULL) != MAELYS_EXECUTOR_OK)) {
    maelys_execution_request_destroy(r);
    return NULL;
  }
  return r;
}

/* Registration refuses everything, with `why`. */
static void refuse_all(maelys_backend_probe_t* probe, const char* why) {
  maelys_backend_probe_missing(probe, MAELYS_BACKEND_CAP_ALL, why);
  maelys_backend_probe_diagnostic(probe, why);
}

/* As root: the identity range must be no one else's (invariant 20). */
static char* identity_range_conflict(const bwrap_state_t* st) {
  static const struct {
    const char* file;
    bool ranges;
  } files[] = {{"/etc/subuid", true},
               {"/etc/subgid", true},
               {"/etc/passwd", false},
               {"/etc/group", false}};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char* c = range_conflict(files[i].file, files[i].ranges, st->identity_first,
                             st->identity_count);
    if (c != NULL) {
      char* why = maelys_backend_asprintf(
          "the identity range %llu:%llu overlaps %s, so a sandbox could share "
          "a host identity with a user or a container: set the backend's "
          "identity_range option to ids nothing else uses (invariant 20)",
          st->identity_first, st->identity_count, c);
      free(c);
      return why;
    }
  }
  return NULL;
}

/* As root, what must hold before a probe sandbox runs: an identity range
 * no one else uses (invariant 20) and the staging directory. Why not
 * (caller frees), or NULL. */
static char* root_preconditions(const bwrap_state_t* st) {
  char* conflict = identity_range_conflict(st);
  if (conflict != NULL)
    return conflict;
  if (mkdir(st->staging_dir, 0755) != 0 && errno != EEXIST)
    return maelys_backend_asprintf(
        "the staging directory '%s' cannot be created (%s): as uid 0 the "
        "backend stages the sandbox's binds and keeps its identity locks "
        "there; set 'staging_dir'",
        st->staging_dir, strerror(errno));
  return NULL;
}

/* The probe sandboxes' plans and requests, and their results. */
typedef struct probe_set {
  maelys_executor_plan_t* plans[MAELYS__BWRAP_PROBE_RUNS];
  maelys_execution_request_t* requests[MAELYS__BWRAP_PROBE_RUNS];
  maelys_backend_probe_run_t runs[MAELYS__BWRAP_PROBE_RUNS];
} probe_set_t;

/* (Re)builds the requests: a request's channels are consumed by a run. */
static bool probe_requests(probe_set_t* set, const probe_dirs_t* dirs) {
  const char* paths[MAELYS__BWRAP_PROBE_PATH_COUNT] = {
      [MAELYS__BWRAP_PROBE_PATH_RW] = dirs->rw,
      [MAELYS__BWRAP_PROBE_PATH_RO] = dirs->ro,
      [MAELYS__BWRAP_PROBE_PATH_RO_FILE] = dirs->ro_file,
      [MAELYS__BWRAP_PROBE_PATH_SECRET] = dirs->secret,
  };
  bool built = true;
  for (int i = 0; i < MAELYS__BWRAP_PROBE_RUNS; i++) {
    const char* argv[32];
    maelys_execution_request_destroy(set->requests[i]);
    set->requests[i] =
        maelys__bwrap_probe_argv(i, paths, argv, 32) > 0
            ? probe_request(argv, i == MAELYS__BWRAP_PROBE_EPHEMERAL)
            : NULL;
    built = built && set->plans[i] != NULL && set->requests[i] != NULL;
  }
  return built;
}

static void probe_set_dispose(probe_set_t* set) {
  for (int i = 0; i < MAELYS__BWRAP_PROBE_RUNS; i++) {
    maelys_backend_probe_run_dispose(&set->runs[i]);
    maelys_execution_request_destroy(set->requests[i]);
    maelys_executor_plan_destroy(set->plans[i]);
  }
}

/* Runs every probe sandbox at once. An older bwrap refuses
 * --disable-userns: then the runs go again without it, and that capability
 * stays unproved with the reason. Why the main run gave no report after
 * both tries (caller frees), or NULL; *assumed is what the runs assumed. */
static char* run_probes(bwrap_state_t* st, probe_set_t* set,
                        const probe_dirs_t* dirs, uint64_t* assumed,
                        maelys_backend_probe_t* probe) {
  *assumed = MAELYS_BACKEND_CAP_ALL;
  for (int attempt = 0; attempt < 2; attempt++) {
    if (!probe_requests(set, dirs))
      return strdup("out of memory building the probe");
    maelys_backend_probe_run_t* list[MAELYS__BWRAP_PROBE_RUNS];
    for (int i = 0; i < MAELYS__BWRAP_PROBE_RUNS; i++) {
      maelys_backend_probe_run_dispose(&set->runs[i]);
      maelys_backend_probe_run_init(&set->runs[i], set->plans[i],
                                    set->requests[i]);
      set->runs[i].timeout_ms = PROBE_TIMEOUT_MS;
      list[i] = &set->runs[i];
    }
    /* The main run ends the way a host's death would: its lifeline is
     * dropped once the double-forked descendant is in place, and
     * everything must go. */
    set->runs[MAELYS__BWRAP_PROBE_MAIN].marker = MAELYS__BWRAP_PROBE_MARKER;
    set->runs[MAELYS__BWRAP_PROBE_MAIN].end_by_lifeline = true;
    maelys_backend_probe_run(maelys_backend_bubblewrap(), st, *assumed, list,
                             MAELYS__BWRAP_PROBE_RUNS, NULL);
    if (set->runs[MAELYS__BWRAP_PROBE_MAIN].marker_seen)
      return NULL;
    char why[1200];
    maelys__bwrap_probe_run_failure(&set->runs[MAELYS__BWRAP_PROBE_MAIN], why,
                                    sizeof why);
    if (attempt == 1)
      return strdup(why);
    maelys_backend_probe_missing(probe, MAELYS_BACKEND_CAP_DISABLE_USERNS, why);
    *assumed &= ~MAELYS_BACKEND_CAP_DISABLE_USERNS;
  }
  return NULL;
}

/* ---------------------------------------------------------- proof key */

/* What identifies a program's file: any rewrite or replacement, in place or
 * not, changes one of these (a change time cannot be set back). */
static void program_identity(const program_t* p, char* out, size_t size) {
  struct stat st;
  if (p->fd < 0 || fstat(p->fd, &st) != 0) {
    snprintf(out, size, "none");
    return;
  }
  snprintf(out, size,
           "%s dev=%llu ino=%llu size=%lld mtime=%lld.%09ld ctime=%lld.%09ld "
           "mode=%o uid=%u",
           p->path ? p->path : "?", (unsigned long long)st.st_dev,
           (unsigned long long)st.st_ino, (long long)st.st_size,
           (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
           (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec,
           (unsigned)st.st_mode, (unsigned)st.st_uid);
}

/* The backend's part of the proof cache's key (backend.h, ABI 6). A cached
 * proof skips bwrap_probe, so what the probe sets up for prepare is set up
 * here too: as root, the staging directory (the seccomp filters are
 * compiled by prepare when first needed). A backend that cannot run here is
 * probed every time (that is cheap). */
static int bwrap_proof_key(void* state, char* key, size_t size) {
  bwrap_state_t* st = state;
  if (unusable(st) != NULL)
    return -1;
  char* why = st->host_root ? root_preconditions(st) : NULL;
  if (why != NULL) {
    free(why);
    return -1;
  }
  char bwrap[PATH_MAX + 256], helper[PATH_MAX + 256];
  program_identity(&st->bwrap, bwrap, sizeof bwrap);
  program_identity(&st->helper, helper, sizeof helper);
  const struct scmp_version* v = seccomp_version();
  int n = snprintf(key, size,
                   "bwrap=%s\nhelper=%s\nstaging=%s\nidentities=%llu+%llu\n"
                   "libseccomp=%u.%u.%u",
                   bwrap, helper, st->staging_dir ? st->staging_dir : "-",
                   st->identity_first, st->identity_count, v ? v->major : 0,
                   v ? v->minor : 0, v ? v->micro : 0);
  return n < 0 || (size_t)n >= size ? -1 : 0;
}

static maelys_executor_result_t
bwrap_probe(void* state, maelys_backend_probe_t* probe, char** out_error) {
  bwrap_state_t* st = state;
  const char* why_unusable = unusable(st);
  if (why_unusable != NULL) {
    refuse_all(probe, why_unusable);
    return MAELYS_EXECUTOR_OK;
  }
  for (int i = 0; i < 2; i++)
    if (st->bpf[i] == NULL &&
        maelys__seccomp_baseline_build(i == 1, true, &st->bpf[i],
                                       &st->bpf_len[i], out_error) != 0)
      return MAELYS_EXECUTOR_ERR_UNSUPPORTED;
  char* why = st->host_root ? root_preconditions(st) : NULL;
  if (why != NULL) {
    refuse_all(probe, why);
    free(why);
    return MAELYS_EXECUTOR_OK;
  }
  probe_dirs_t dirs;
  int dr = make_probe_dirs(st, &dirs);
  if (dr != 0) {
    remove_probe_dirs(&dirs);
    return maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                               "creating the probe directories: %s",
                               strerror(-dr));
  }
  probe_set_t set;
  memset(&set, 0, sizeof set);
  for (int i = 0; i < MAELYS__BWRAP_PROBE_RUNS; i++)
    set.plans[i] = probe_plan(&dirs, i);
  uint64_t assumed;
  char* failure = run_probes(st, &set, &dirs, &assumed, probe);
  if (failure != NULL) {
    why = maelys_backend_asprintf(
        "%s. If user namespaces are blocked (as in unprivileged containers), "
        "enable them (sysctl kernel.unprivileged_userns_clone=1, "
        "user.max_user_namespaces > 0) or run where they are allowed.",
        failure);
    refuse_all(probe, why ? why : failure);
    free(why);
    free(failure);
  } else {
    const maelys_backend_probe_run_t* runs[MAELYS__BWRAP_PROBE_RUNS];
    for (int i = 0; i < MAELYS__BWRAP_PROBE_RUNS; i++)
      runs[i] = &set.runs[i];
    maelys__bwrap_verdict_t* v = malloc(sizeof *v);
    if (v == NULL) {
      refuse_all(probe, "out of memory reading the probe's report");
    } else {
      maelys__bwrap_probe_verdict(runs, assumed, v);
      for (int b = 0; b < 64; b++)
        if (!(v->proved & (UINT64_C(1) << b)) && v->reasons[b] != NULL)
          maelys_backend_probe_missing(probe, UINT64_C(1) << b, v->reasons[b]);
      maelys_backend_probe_prove(probe, v->proved);
      free(v);
    }
  }
  probe_set_dispose(&set);
  remove_probe_dirs(&dirs);
  return MAELYS_EXECUTOR_OK;
}

static const maelys_backend_t bubblewrap_backend = {
    .abi_version = MAELYS_BACKEND_ABI_VERSION,
    .struct_size = sizeof(maelys_backend_t),
    .name = "bubblewrap",
    .create = bwrap_create,
    .destroy = bwrap_destroy,
    .probe = bwrap_probe,
    .prepare = bwrap_prepare,
    .status_line = bwrap_status_line,
    .proof_key = bwrap_proof_key,
};

const maelys_backend_t* maelys_backend_bubblewrap(void) {
  return &bubblewrap_backend;
}
