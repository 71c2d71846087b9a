/*
 * The Landlock backend: confinement where no namespace can be had (user
 * namespaces blocked, as in unprivileged containers), written against
 * maelys/backend.h and backends/common/ alone.
 *
 * The glue around the pure lowering (landlock-lower.c): it checks the
 * launcher it executes, proves its capabilities with real probe runs at
 * registration, and fills the launch description: the launcher
 * (launcher/launcher.c) as the image, the Landlock ruleset -- built here,
 * from descriptors opened without following any symbolic link, and handed
 * over as a descriptor --, the seccomp filters (the shared baseline, and
 * under network NONE this backend's denial of AF_UNIX sockets) and the
 * payload's environment in sealed memfds, and a status channel.
 *
 * Options: "launcher" (path of maelys-landlock-launcher; default the
 * installed one), "cgroup" ("auto", the default: the host process's own
 * cgroup v2 directory when it is writable; "none": no cgroup, so no
 * process_tree; or a cgroup v2 directory), "staging_dir" (host uid 0 only;
 * default /run/maelys-executor, where the identity lock is shared with the
 * bubblewrap backend) and "identity_range" (host uid 0 only: FIRST:COUNT,
 * default 1879048192:65536, the bubblewrap backend's).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <seccomp.h>

#include "landlock-internal.h"
#include "seccomp-baseline.h"

#ifndef MAELYS_EXECUTOR_LANDLOCK_LAUNCHER_PATH
#define MAELYS_EXECUTOR_LANDLOCK_LAUNCHER_PATH                                 \
  "/usr/local/libexec/maelys-executor/maelys-landlock-launcher"
#endif
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_add_rule
#define SYS_landlock_add_rule 445
#endif

#define DEFAULT_STAGING_DIR "/run/maelys-executor"
#define DEFAULT_IDENTITY_FIRST 1879048192ULL /* 0x70000000 */
#define DEFAULT_IDENTITY_COUNT 65536ULL
#define IDENTITY_LOCK_FILE "identities.lock"
#define PROBE_TIMEOUT_MS 10000

/* The kernel's ruleset attribute (ABI 6 layout; shorter sizes for older
 * ABIs, which do not know the later members). */
typedef struct ll_ruleset_attr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net; /* ABI 4 */
  uint64_t scoped;             /* ABI 6 */
} ll_ruleset_attr_t;

typedef struct __attribute__((packed)) ll_path_beneath {
  uint64_t allowed_access;
  int32_t parent_fd;
} ll_path_beneath_t;

typedef struct ll_state {
  char* launcher_path;
  int launcher_fd; /* O_PATH, or -1 */
  char* launcher_refused;
  int abi; /* the Landlock ABI, or a negative errno */
  bool host_root;
  char* cgroup_option;  /* "auto", "none" or a directory */
  char* cgroup_dir;     /* the parent of execution cgroups the probe proved */
  char* cgroup_missing; /* why there is none */
  char* staging_dir;
  unsigned long long identity_first, identity_count;
  unsigned char* bpf[2]; /* the baseline: [0] network allowed, [1] denied */
  size_t bpf_len[2];
  /* This backend's own filter: [0] metadata changes by path, [1] the same
   * and AF_UNIX sockets (what the lowering asks for, always so far). */
  unsigned char* extra_bpf[2];
  size_t extra_bpf_len[2];
} ll_state_t;

/* ------------------------------------------------------------- resolver */

static bool kernel_fs(long type) {
  switch ((unsigned long)type) {
  case 0x9fa0:     /* PROC_SUPER_MAGIC */
  case 0x62656572: /* SYSFS_MAGIC */
  case 0x27e0eb:   /* CGROUP_SUPER_MAGIC */
  case 0x63677270: /* CGROUP2_SUPER_MAGIC */
  case 0x73636673: /* SECURITYFS_MAGIC */
  case 0x64626720: /* DEBUGFS_MAGIC */
  case 0x74726163: /* TRACEFS_MAGIC */
  case 0xcafe4a11: /* BPF_FS_MAGIC */
  case 0x6e736673: /* NSFS_MAGIC */
  case 0x42494e4d: /* BINFMTFS_MAGIC */
  case 0x6165676c: /* PSTOREFS_MAGIC */
  case 0xde5e81e4: /* EFIVARFS_MAGIC */
  case 0x67596969: /* RDTGROUP_SUPER_MAGIC */
    return true;
  default:
    return false;
  }
}

/* Every ancestor of `path` searchable by "other". */
static bool ancestors_searchable(const char* path) {
  char buf[PATH_MAX];
  snprintf(buf, sizeof buf, "%s", path);
  for (char* slash = strrchr(buf, '/'); slash != NULL;
       slash = strrchr(buf, '/')) {
    if (slash == buf)
      slash[1] = '\0';
    else
      *slash = '\0';
    struct stat a;
    if (stat(buf, &a) != 0 || !(a.st_mode & S_IXOTH))
      return false;
    if (slash == buf)
      break;
  }
  return true;
}

static int real_describe(void* ctx, const char* path, maelys__ll_node_t* out) {
  (void)ctx;
  /* The parent without following any symbolic link, then the last
   * component itself, which may be one. */
  char parent[PATH_MAX];
  snprintf(parent, sizeof parent, "%s", path);
  char* slash = strrchr(parent, '/');
  if (slash == NULL)
    return -EINVAL;
  const char* name = path + (slash - parent) + 1;
  if (slash == parent)
    parent[1] = '\0';
  else
    *slash = '\0';
  int dir = maelys_backend_open_nofollow(parent);
  if (dir < 0)
    return dir;
  struct stat st;
  int rc = 0;
  if (name[0] == '\0') { /* "/" */
    if (fstat(dir, &st) != 0)
      rc = -errno;
  } else if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) !=
             0) {
    rc = -errno;
  }
  if (rc == 0 && S_ISLNK(st.st_mode)) {
    ssize_t n = readlinkat(dir, name, out->link, sizeof out->link - 1);
    if (n < 0)
      rc = -errno;
    else
      out->link[n] = '\0';
  }
  struct statfs sf;
  if (rc == 0 && !S_ISLNK(st.st_mode)) {
    int fd =
        name[0] ? openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC) : dup(dir);
    if (fd >= 0) {
      if (fstatfs(fd, &sf) == 0)
        out->kernel_fs = kernel_fs((long)sf.f_type);
      close(fd);
    }
  }
  close(dir);
  if (rc != 0)
    return rc;
  out->kind = S_ISDIR(st.st_mode)   ? MAELYS__LL_DIRECTORY
              : S_ISREG(st.st_mode) ? MAELYS__LL_FILE
              : S_ISLNK(st.st_mode) ? MAELYS__LL_SYMLINK
              : S_ISCHR(st.st_mode) ? MAELYS__LL_DEVICE
                                    : MAELYS__LL_OTHER;
  out->owner = st.st_uid;
  out->mode = st.st_mode & 07777;
  bool reach = ancestors_searchable(path);
  bool dir_ok = !S_ISDIR(st.st_mode) || (st.st_mode & S_IXOTH);
  out->world_readable = reach && dir_ok && (st.st_mode & S_IROTH);
  out->world_writable = reach && dir_ok && (st.st_mode & S_IWOTH);
  return 0;
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

static int real_list(void* ctx, const char* path, size_t max, char*** names,
                     size_t* count) {
  (void)ctx;
  *names = NULL;
  *count = 0;
  int dfd = maelys_backend_open_dir_nofollow(path);
  if (dfd < 0)
    return dfd;
  DIR* d = fdopendir(dfd);
  if (d == NULL) {
    int e = errno;
    close(dfd);
    return -e;
  }
  int rc = 0;
  size_t cap = 0;
  struct dirent* ent;
  while (rc == 0 && (ent = readdir(d)) != NULL) {
    if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0)
      continue;
    if (*count == max)
      rc = -E2BIG;
    else if (maelys_backend_reserve((void**)names, &cap, sizeof **names,
                                    *count + 1) != 0 ||
             ((*names)[*count] = strdup(ent->d_name)) == NULL)
      rc = -ENOMEM;
    else
      (*count)++;
  }
  closedir(d);
  if (rc != 0) {
    for (size_t i = 0; i < *count; i++)
      free((*names)[i]);
    free(*names);
    *names = NULL;
    *count = 0;
  }
  return rc;
}

static const maelys__ll_resolver_t real_resolver = {NULL, real_describe,
                                                    real_create_dir, real_list};

/* -------------------------------------------------------------- state */

/* Who may own the launcher or a directory above it: root, or the host's
 * own uid when it is not root. */
static bool trusted_owner(uid_t owner, bool host_root) {
  return owner == 0 || (!host_root && owner == geteuid());
}

/* Opens the launcher without following any symbolic link and checks it as
 * the bubblewrap backend checks its helper (invariant 18): a regular
 * executable file owned by a trusted uid, writable by nobody else, below
 * directories likewise (a sticky directory excepted). */
static void open_launcher(ll_state_t* st, const char* path) {
  st->launcher_fd = -1;
  st->launcher_path = strdup(path);
  int fd = maelys_backend_open_nofollow(path);
  struct stat s;
  if (fd < 0) {
    st->launcher_refused = maelys_backend_asprintf(
        fd == -ELOOP ? "the launcher '%s' is or passes through a symbolic "
                       "link: name the resolved path"
                     : "the launcher '%s' cannot be opened: %s (set the "
                       "backend's 'launcher' option)",
        path, strerror(-fd));
    return;
  }
  if (fstat(fd, &s) != 0 || !S_ISREG(s.st_mode) || !(s.st_mode & 0111) ||
      !trusted_owner(s.st_uid, st->host_root) ||
      (s.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    st->launcher_refused = maelys_backend_asprintf(
        "the launcher '%s' is not an executable regular file owned by %s and "
        "writable by nobody else (invariant 18)",
        path, st->host_root ? "root" : "root or this user");
    close(fd);
    return;
  }
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", path);
  for (char* slash = strrchr(dir, '/'); slash != NULL;
       slash = strrchr(dir, '/')) {
    if (slash == dir)
      slash[1] = '\0';
    else
      *slash = '\0';
    struct stat ds;
    if (lstat(dir, &ds) != 0 || !S_ISDIR(ds.st_mode) ||
        !trusted_owner(ds.st_uid, st->host_root) ||
        ((ds.st_mode & (S_IWGRP | S_IWOTH)) != 0 &&
         (ds.st_mode & S_ISVTX) == 0)) {
      st->launcher_refused = maelys_backend_asprintf(
          "the launcher '%s' lies in '%s', which another user could change: "
          "refused (invariant 18)",
          path, dir);
      close(fd);
      return;
    }
    if (slash == dir)
      break;
  }
  st->launcher_fd = fd;
}

static void ll_destroy(void* ptr) {
  ll_state_t* st = ptr;
  if (st == NULL)
    return;
  if (st->launcher_fd >= 0)
    close(st->launcher_fd);
  free(st->launcher_path);
  free(st->launcher_refused);
  free(st->cgroup_option);
  free(st->cgroup_dir);
  free(st->cgroup_missing);
  free(st->staging_dir);
  free(st->bpf[0]);
  free(st->bpf[1]);
  free(st->extra_bpf[0]);
  free(st->extra_bpf[1]);
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

static maelys_executor_result_t
ll_create(const maelys_backend_options_t* options, void** out_state,
          char** out_error) {
  *out_state = NULL;
  static const char* const known[] = {"launcher", "cgroup", "staging_dir",
                                      "identity_range"};
  for (size_t i = 0; i < maelys_backend_options_count(options); i++) {
    const char* key = maelys_backend_options_key(options, i);
    bool ok = false;
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
      ok = ok || strcmp(known[k], key) == 0;
    if (!ok)
      return maelys_backend_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "landlock: unknown option '%s' (launcher, cgroup, staging_dir, "
          "identity_range)",
          key);
  }
  ll_state_t* st = calloc(1, sizeof *st);
  if (st == NULL)
    return maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                               "out of memory");
  st->launcher_fd = -1;
  st->host_root = maelys_backend_host_root();
  st->identity_first = DEFAULT_IDENTITY_FIRST;
  st->identity_count = DEFAULT_IDENTITY_COUNT;
  maelys_executor_result_t r = MAELYS_EXECUTOR_OK;
  const char* v = maelys_backend_options_get(options, "identity_range");
  if (v != NULL && parse_range(v, &st->identity_first, &st->identity_count))
    r = maelys_backend_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "landlock: identity_range '%s' is not FIRST:COUNT of non-zero host "
        "ids below 4294967295, without 65534 (nobody)",
        v);
  const char* cg = maelys_backend_options_get(options, "cgroup");
  if (r == MAELYS_EXECUTOR_OK && cg != NULL && strcmp(cg, "auto") != 0 &&
      strcmp(cg, "none") != 0 && !maelys_backend_path_is_clean(cg))
    r = maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                            "landlock: cgroup '%s' is not auto, none or a "
                            "clean absolute path",
                            cg);
  v = maelys_backend_options_get(options, "staging_dir");
  if (r == MAELYS_EXECUTOR_OK && v != NULL && !maelys_backend_path_is_clean(v))
    r = maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                            "landlock: staging_dir '%s' is not a clean "
                            "absolute path",
                            v);
  const char* launcher = maelys_backend_options_get(options, "launcher");
  if (launcher == NULL)
    launcher = MAELYS_EXECUTOR_LANDLOCK_LAUNCHER_PATH;
  if (r == MAELYS_EXECUTOR_OK && !maelys_backend_path_is_clean(launcher))
    r = maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                            "landlock: launcher '%s' is not a clean absolute "
                            "path",
                            launcher);
  if (r != MAELYS_EXECUTOR_OK) {
    ll_destroy(st);
    return r;
  }
  st->cgroup_option = strdup(cg ? cg : "auto");
  st->staging_dir = strdup(v ? v : DEFAULT_STAGING_DIR);
  if (st->cgroup_option == NULL || st->staging_dir == NULL) {
    ll_destroy(st);
    return maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                               "out of memory");
  }
  long abi = syscall(SYS_landlock_create_ruleset, NULL, 0,
                     MAELYS__LL_CREATE_RULESET_VERSION);
  st->abi = abi < 0 ? -errno : (int)abi;
  open_launcher(st, launcher);
  *out_state = st;
  return MAELYS_EXECUTOR_OK;
}

/* Why nothing can be launched, or NULL. */
static const char* unusable(const ll_state_t* st) {
  return st->launcher_refused;
}

/* ------------------------------------------------------------- seccomp */

/* Calls that change a file's metadata (mode, owner, extended attributes,
 * times) by path. Landlock (up to ABI 7) mediates none of them, and without
 * a read-only mount below every path the payload could chmod, chown or
 * retime any file this user owns anywhere -- make ~/.bashrc world-writable,
 * for one. Their descriptor forms (fchmod, fchown, fsetxattr, futimens) stay:
 * they need a file opened for reading or writing, which Landlock mediates
 * (an O_PATH descriptor does not do). The *at forms are denied whatever
 * their flags, since AT_EMPTY_PATH makes them work on an O_PATH
 * descriptor. */
static const char* const metadata_calls[] = {
    "chmod",        "fchmodat", "chown",     "lchown",
    "fchownat",     "setxattr", "lsetxattr", "removexattr",
    "lremovexattr", "utime",    "utimes",    "futimesat"};
#define SYS_FCHMODAT2 452 /* Linux 6.6; newer than Debian 12's libseccomp */

/* This backend's filter, stacked on the shared baseline (the kernel applies
 * the strictest answer): metadata changes by path refused, and with
 * deny_unix AF_UNIX sockets too, since Landlock (up to ABI 7) does not
 * mediate connect() to a pathname socket, and the user's docker.sock or
 * session bus would answer; socketpair() stays: it reaches nothing
 * outside. */
static int build_extra_filter(bool deny_unix, unsigned char** out,
                              size_t* out_len) {
  *out = NULL;
  *out_len = 0;
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  int rc = ctx == NULL ? -ENOMEM : 0;
  for (size_t i = 0;
       rc == 0 && i < sizeof metadata_calls / sizeof metadata_calls[0]; i++) {
    int nr = seccomp_syscall_resolve_name(metadata_calls[i]);
    if (nr != __NR_SCMP_ERROR)
      rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
  }
  if (rc == 0)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SYS_FCHMODAT2, 0);
  /* utimensat(fd, NULL, ...) is futimens(): only a path is refused. */
  if (rc == 0)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(utimensat), 1,
                          SCMP_A1_64(SCMP_CMP_NE, 0));
  if (rc == 0 && deny_unix)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
                          SCMP_A0_32(SCMP_CMP_EQ, AF_UNIX));
  int memfd =
      rc == 0 ? memfd_create("maelys-seccomp-landlock", MFD_CLOEXEC) : -1;
  if (rc == 0 && memfd < 0)
    rc = -errno;
  if (rc == 0)
    rc = seccomp_export_bpf(ctx, memfd);
  off_t len = rc == 0 ? lseek(memfd, 0, SEEK_END) : -1;
  if (rc == 0 && len <= 0)
    rc = -EIO;
  if (rc == 0 && (*out = malloc((size_t)len)) == NULL)
    rc = -ENOMEM;
  if (rc == 0 && pread(memfd, *out, (size_t)len, 0) != len) {
    free(*out);
    *out = NULL;
    rc = -EIO;
  }
  if (rc == 0)
    *out_len = (size_t)len;
  if (memfd >= 0)
    close(memfd);
  if (ctx != NULL)
    seccomp_release(ctx);
  return rc;
}

/* ------------------------------------------------------------- prepare */

static int sealed_memfd(const char* name, const void* data, size_t len) {
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0)
    return -errno;
  size_t done = 0;
  while (done < len) {
    ssize_t n = write(fd, (const char*)data + done, len - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int e = errno;
      close(fd);
      return -e;
    }
    done += (size_t)n;
  }
  /* Sealed: what the launcher reads is what was checked here. */
  if (fcntl(fd, F_ADD_SEALS,
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
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

/* The ruleset of `low` as a Landlock descriptor (or a negative errno and
 * *out_error naming the path at fault). Each rule's path is opened without
 * following any symbolic link: the rule lands on the object the lowering
 * looked at, or the launch is refused. */
static int build_ruleset(int abi, const maelys__ll_lowered_t* low,
                         char** out_error) {
  ll_ruleset_attr_t attr = {low->handled_fs, low->handled_net, low->scoped};
  size_t size = abi >= MAELYS__LL_SCOPE_ABI ? sizeof attr
                : abi >= MAELYS__LL_NET_ABI ? 2 * sizeof(uint64_t)
                                            : sizeof(uint64_t);
  int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
  if (rs < 0) {
    int e = errno;
    maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                        "landlock: creating the ruleset: %s", strerror(e));
    return -e;
  }
  for (size_t i = 0; i < low->rule_count; i++) {
    const maelys__ll_rule_t* r = &low->rules[i];
    int fd = maelys_backend_open_nofollow(r->path);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 ||
                    (S_ISDIR(st.st_mode) ? 1 : 0) != (r->directory ? 1 : 0))) {
      /* Replaced since the lowering looked (a directory for a file or the
       * other way round): the rights meant for one kind would land on the
       * other. */
      close(fd);
      fd = -ESTALE;
    }
    if (fd < 0) {
      maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_DENIED,
                          "landlock: '%s': %s", r->path,
                          fd == -ESTALE ? "replaced since the plan was lowered"
                                        : strerror(-fd));
      close(rs);
      return fd;
    }
    ll_path_beneath_t pb = {
        r->directory ? r->access : r->access & MAELYS__LL_FS_FILE_RIGHTS, fd};
    long rc = syscall(SYS_landlock_add_rule, rs, MAELYS__LL_RULE_PATH_BENEATH,
                      &pb, 0);
    int e = errno;
    close(fd);
    if (rc != 0) {
      maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                          "landlock: a rule for '%s': %s", r->path,
                          strerror(e));
      close(rs);
      return -e;
    }
  }
  return rs;
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

static const char* const rlimit_names[] = {"",      "cpu",    "fsize",  "data",
                                           "stack", "core",   "nofile", "as",
                                           "nproc", "memlock"};

/* The launcher's descriptors: the payload layout with 2 replaced by the
 * status channel, then from the limit up the payload's real stderr, the
 * lifeline, the ruleset, the environment and the filters. */
typedef struct ll_layout {
  int limit, stderr_fd, lifeline_fd, ruleset_fd, env_fd, first_filter_fd;
  int filter_count;
} ll_layout_t;

/* A sealed memfd of `data` at the launcher's descriptor `child_fd`. */
static maelys_executor_result_t add_memfd(maelys_backend_launch_t* launch,
                                          const char* name, const void* data,
                                          size_t len, int child_fd,
                                          char** out_error) {
  int fd = sealed_memfd(name, data, len);
  if (fd < 0)
    return maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                               "creating the %s memfd: %s", name,
                               strerror(-fd));
  return add_extra(launch, fd, child_fd, out_error);
}

/* Invariant 4: exactly the request's environment, NUL-separated. */
static maelys_executor_result_t
add_environment(const maelys_execution_request_t* request,
                maelys_backend_launch_t* launch, int child_fd,
                char** out_error) {
  const char* const* envp = maelys_execution_request_environment(request);
  size_t total = 0;
  for (size_t i = 0; envp != NULL && envp[i] != NULL; i++)
    total += strlen(envp[i]) + 1;
  char* blob = malloc(total + 1);
  if (blob == NULL)
    return maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                               "out of memory");
  size_t off = 0;
  for (size_t i = 0; envp != NULL && envp[i] != NULL; i++) {
    size_t n = strlen(envp[i]) + 1;
    memcpy(blob + off, envp[i], n);
    off += n;
  }
  maelys_executor_result_t r = add_memfd(launch, "maelys-landlock-env", blob,
                                         total, child_fd, out_error);
  free(blob);
  return r;
}

/* Everything the launcher is handed: the ruleset, the environment, the
 * filters and the descriptor map. */
static maelys_executor_result_t
install_fds(const ll_state_t* st, const maelys__ll_lowered_t* low,
            const maelys_execution_request_t* request,
            maelys_backend_launch_t* launch, ll_layout_t* l, char** out_error) {
  int rs = build_ruleset(st->abi, low, out_error);
  if (rs < 0)
    return MAELYS_EXECUTOR_ERR_DENIED;
  maelys_executor_result_t r = add_extra(launch, rs, l->ruleset_fd, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = add_environment(request, launch, l->env_fd, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = add_memfd(launch, "maelys-seccomp", st->bpf[low->deny_inet],
                  st->bpf_len[low->deny_inet],
                  l->first_filter_fd + l->filter_count++, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = add_memfd(launch, "maelys-seccomp-landlock",
                  st->extra_bpf[low->deny_unix],
                  st->extra_bpf_len[low->deny_unix],
                  l->first_filter_fd + l->filter_count++, out_error);
  for (int c = 0; c < l->limit && r == MAELYS_EXECUTOR_OK; c++) {
    if (c == 2)
      r = maelys_backend_launch_map_fd(launch, 2, MAELYS_BACKEND_FD_STATUS, 0,
                                       out_error);
    else if (maelys_backend_launch_payload_fd_present(launch, c))
      r = maelys_backend_launch_map_fd(launch, c, MAELYS_BACKEND_FD_PAYLOAD, c,
                                       out_error);
  }
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_backend_launch_map_fd(launch, l->stderr_fd,
                                     MAELYS_BACKEND_FD_PAYLOAD, 2, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_backend_launch_map_fd(launch, l->lifeline_fd,
                                     MAELYS_BACKEND_FD_LIFELINE, 0, out_error);
  return r;
}

/* The launcher's command line (launcher/launcher.c says what each option
 * does). */
static void launcher_argv(const ll_state_t* st,
                          const maelys_executor_plan_t* plan,
                          const maelys_execution_request_t* request,
                          const maelys_backend_launch_t* launch,
                          const ll_layout_t* l, argv_builder_t* a) {
  push(a, "maelys-landlock-launcher");
  push(a, "launch");
  push(a, "--lifeline-fd");
  pushf(a, "%d", l->lifeline_fd);
  push(a, "--stderr-fd");
  pushf(a, "%d", l->stderr_fd);
  push(a, "--limit");
  pushf(a, "%d", l->limit);
  for (int c = 3; c < l->limit; c++)
    if (maelys_backend_launch_payload_fd_present(launch, c)) {
      push(a, "--keep-fd");
      pushf(a, "%d", c);
    }
  push(a, "--ruleset-fd");
  pushf(a, "%d", l->ruleset_fd);
  push(a, "--env-fd");
  pushf(a, "%d", l->env_fd);
  for (int i = 0; i < l->filter_count; i++) {
    push(a, "--seccomp-fd");
    pushf(a, "%d", l->first_filter_fd + i);
  }
  if (st->cgroup_dir != NULL) {
    push(a, "--cgroup");
    push(a, st->cgroup_dir);
  }
  uint32_t uid = 0, gid = 0;
  if (st->host_root) {
    if (maelys_execution_request_identity(request, &uid, &gid) == 0) {
      push(a, "--identity");
      pushf(a, "%u:%u", uid, gid);
    } else {
      push(a, "--identity-range");
      pushf(a, "%llu:%llu", st->identity_first, st->identity_count);
    }
    push(a, "--identity-lock");
    pushf(a, "%s/" IDENTITY_LOCK_FILE, st->staging_dir);
  }
  for (int i = MAELYS_EXECUTOR_RLIMIT_CPU; i <= MAELYS_EXECUTOR_RLIMIT_MEMLOCK;
       i++) {
    uint64_t soft, hard;
    if (maelys_executor_plan_rlimit_get(plan, (maelys_executor_rlimit_t)i,
                                        &soft, &hard) != 0)
      continue;
    push(a, "--rlimit");
    char sbuf[24], hbuf[24];
    snprintf(sbuf, sizeof sbuf, "%llu", (unsigned long long)soft);
    snprintf(hbuf, sizeof hbuf, "%llu", (unsigned long long)hard);
    pushf(a, "%s:%s:%s", rlimit_names[i],
          soft == MAELYS_EXECUTOR_RLIMIT_INFINITY ? "inf" : sbuf,
          hard == MAELYS_EXECUTOR_RLIMIT_INFINITY ? "inf" : hbuf);
  }
  push(a, "--exec");
  push(a, maelys_execution_request_executable(request));
  push(a, "--");
  const char* const* argv = maelys_execution_request_argv(request);
  if (argv == NULL)
    push(a, maelys_execution_request_executable(request));
  for (size_t i = 0; argv != NULL && argv[i] != NULL; i++)
    push(a, argv[i]);
}

static maelys_executor_result_t
ll_prepare(void* state, uint64_t proved, const maelys_executor_plan_t* plan,
           const maelys_execution_request_t* request,
           maelys_backend_launch_t* launch, char** out_error) {
  ll_state_t* st = state;
  (void)proved; /* the lowering depends on the ABI, not on the mask */
  const char* why = unusable(st);
  if (why != NULL)
    return maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_NOT_FOUND, "%s",
                               why);
  if (st->abi < 0)
    return maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                               "landlock: Landlock is not available here: %s",
                               strerror(-st->abi));
  uint32_t fixed_uid = 0, fixed_gid = 0;
  bool fixed =
      maelys_execution_request_identity(request, &fixed_uid, &fixed_gid) == 0;
  maelys__ll_env_t env = {.resolver = &real_resolver,
                          .abi = st->abi,
                          .host_root = st->host_root,
                          .identity_fixed = st->host_root && fixed,
                          .identity_uid = fixed_uid};
  maelys__ll_lowered_t low;
  maelys_executor_result_t r = maelys__ll_lower(plan, &env, &low, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  const int limit = maelys_backend_launch_payload_fd_limit(launch);
  ll_layout_t l = {limit, limit, limit + 1, limit + 2, limit + 3, limit + 4, 0};
  argv_builder_t a;
  memset(&a, 0, sizeof a);
  int fd = -1;
  r = install_fds(st, &low, request, launch, &l, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    goto out;
  launcher_argv(st, plan, request, launch, &l, &a);
  if (a.oom) {
    r = maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                            "out of memory");
    goto out;
  }
  r = maelys_backend_launch_set_image(
      launch, st->launcher_path, (const char* const*)a.argv, NULL, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    goto out;
  fd = fcntl(st->launcher_fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) {
    r = maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                            "duplicating the launcher's descriptor: %s",
                            strerror(errno));
    goto out;
  }
  r = maelys_backend_launch_set_image_fd(launch, &fd, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    goto out;
  /* The core changes to the request's cwd (the payload inherits it); the
   * launcher applies the rlimits to the payload alone. */
  maelys_backend_launch_set_flags(launch,
                                  MAELYS_BACKEND_LAUNCH_NO_RLIMITS |
                                      MAELYS_BACKEND_LAUNCH_STATUS_CHANNEL);
out:
  argv_dispose(&a);
  maelys__ll_lowered_dispose(&low);
  return r;
}

/* ------------------------------------------------------ status channel */

static void ll_status_line(void* state, const char* line, size_t length,
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
      snprintf(ev->message, sizeof ev->message,
               "the payload could not be started under Landlock: %s: %s", step,
               strerror(v));
    }
    return;
  }
  ev->kind = MAELYS_BACKEND_EVENT_DIAGNOSTIC;
  snprintf(ev->message, sizeof ev->message, "%.500s", buf);
}

/* --------------------------------------------------------------- probe */

static bool has_line(const char* out, const char* line) {
  size_t n = strlen(line);
  for (const char* p = out; p != NULL && (p = strstr(p, line)) != NULL; p += n)
    if ((p == out || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
      return true;
  return false;
}

/* The probe's host directories, in a directory of this registration's own
 * below /tmp (sticky and world-writable for a root host, whose probe
 * payload runs as an identity of its own: what it cannot reach must be
 * refused by Landlock, not by the file modes). */
typedef struct probe_dirs {
  char root[PATH_MAX];
  char rw[PATH_MAX + 8], ro[PATH_MAX + 8], ro_file[PATH_MAX + 16],
      secret[PATH_MAX + 16], rw_new[PATH_MAX + 16], root_new[PATH_MAX + 16];
} probe_dirs_t;

static void remove_probe_dirs(probe_dirs_t* d) {
  if (d->root[0] == '\0')
    return;
  unlink(d->rw_new);
  unlink(d->root_new);
  unlink(d->ro_file);
  unlink(d->secret);
  rmdir(d->rw);
  rmdir(d->ro);
  rmdir(d->root);
  d->root[0] = '\0';
}

/* Removes this user's probe directories that a registration killed while it
 * probed left behind (a minute old: no probe takes that long), so that
 * nothing stays on disk (invariant 22). Only the layout made below is
 * removed, never anything followed through a link. */
static void sweep_probe_dirs(const char* prefix) {
  DIR* d = opendir("/tmp");
  if (d == NULL)
    return;
  struct dirent* e;
  static const char* const inner[] = {"rw/new", "new", "ro/file", "secret"};
  while ((e = readdir(d)) != NULL) {
    struct stat st;
    if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 ||
        fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
        time(NULL) - st.st_mtime < 60)
      continue;
    int dir = openat(dirfd(d), e->d_name,
                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0)
      continue;
    for (size_t i = 0; i < sizeof inner / sizeof inner[0]; i++)
      unlinkat(dir, inner[i], 0);
    unlinkat(dir, "rw", AT_REMOVEDIR);
    unlinkat(dir, "ro", AT_REMOVEDIR);
    close(dir);
    unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
  }
  closedir(d);
}

static int make_probe_dirs(const ll_state_t* st, probe_dirs_t* d) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "maelys-landlock-probe-%u-",
           (unsigned)geteuid());
  sweep_probe_dirs(prefix);
  snprintf(d->root, sizeof d->root, "/tmp/%sXXXXXX", prefix);
  if (mkdtemp(d->root) == NULL) {
    d->root[0] = '\0';
    return -errno;
  }
  snprintf(d->rw, sizeof d->rw, "%s/rw", d->root);
  snprintf(d->ro, sizeof d->ro, "%s/ro", d->root);
  snprintf(d->ro_file, sizeof d->ro_file, "%s/ro/file", d->root);
  snprintf(d->secret, sizeof d->secret, "%s/secret", d->root);
  snprintf(d->rw_new, sizeof d->rw_new, "%s/rw/new", d->root);
  snprintf(d->root_new, sizeof d->root_new, "%s/new", d->root);
  mode_t open_dir = st->host_root ? 01777 : 0700;
  if (chmod(d->root, open_dir) != 0 || mkdir(d->rw, 0700) != 0 ||
      chmod(d->rw, st->host_root ? 0777 : 0700) != 0 || mkdir(d->ro, 0755) != 0)
    return -errno;
  int f = open(d->ro_file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  int g = open(d->secret, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  int e = f < 0 || g < 0 ? errno : 0;
  if (f >= 0)
    close(f);
  if (g >= 0)
    close(g);
  return -e;
}

/* The cgroup v2 directory this process is in (where the launcher, its
 * child, starts), into out; 0 or a negative errno. */
static int own_cgroup_dir(char* out, size_t size) {
  char rel[PATH_MAX] = "";
  FILE* f = fopen("/proc/self/cgroup", "re");
  if (f == NULL)
    return -errno;
  char line[PATH_MAX + 64];
  while (fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, "0::", 3) == 0) {
      line[strcspn(line, "\n")] = '\0';
      snprintf(rel, sizeof rel, "%.4000s", line + 3);
    }
  fclose(f);
  if (rel[0] != '/')
    return -ENOENT;
  f = fopen("/proc/self/mountinfo", "re");
  if (f == NULL)
    return -errno;
  int rc = -ENOENT;
  char buf[4096];
  while (rc != 0 && fgets(buf, sizeof buf, f) != NULL) {
    /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS... - FSTYPE SOURCE ... */
    char root[PATH_MAX], point[PATH_MAX];
    const char* dash = strstr(buf, " - ");
    if (dash == NULL || strncmp(dash + 3, "cgroup2 ", 8) != 0 ||
        sscanf(buf, "%*s %*s %*s %4095s %4095s", root, point) != 2)
      continue;
    size_t n = strlen(root);
    const char* below =
        strcmp(root, "/") == 0 ? rel
        : strncmp(rel, root, n) == 0 && (rel[n] == '/' || rel[n] == '\0')
            ? rel + n
            : NULL;
    if (below == NULL)
      continue;
    snprintf(out, size, "%s%s", point, strcmp(below, "/") == 0 ? "" : below);
    rc = 0;
  }
  fclose(f);
  return rc;
}

/* Removes the execution cgroups below `dir` that a launcher killed with
 * its supervisor left behind (invariant 22: nothing stays): rmdir fails on
 * a cgroup that still holds a process, so only empty ones go, and only
 * those a minute old, never one a launch just made for its payload. */
static void sweep_cgroups(const char* dir) {
  DIR* d = opendir(dir);
  if (d == NULL)
    return;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    struct stat st;
    if (strncmp(e->d_name, "maelys-landlock-", 16) == 0 &&
        fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISDIR(st.st_mode) && time(NULL) - st.st_mtime > 60)
      unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
  }
  closedir(d);
}

/* The parent of the execution cgroups, or NULL with *why: a cgroup v2
 * directory where this process may create a child, move its own children
 * into it (cgroup.procs of the common ancestor) and end it (cgroup.kill). */
static char* find_cgroup(const ll_state_t* st, char** why) {
  *why = NULL;
  if (strcmp(st->cgroup_option, "none") == 0) {
    *why = maelys_backend_asprintf(
        "no cgroup (the backend's cgroup option is 'none')");
    return NULL;
  }
  char dir[PATH_MAX];
  if (strcmp(st->cgroup_option, "auto") == 0) {
    int rc = own_cgroup_dir(dir, sizeof dir);
    if (rc != 0) {
      *why = maelys_backend_asprintf(
          "no cgroup v2 hierarchy is mounted for this process (%s)",
          strerror(-rc));
      return NULL;
    }
  } else {
    snprintf(dir, sizeof dir, "%s", st->cgroup_option);
  }
  char procs[PATH_MAX + 16];
  snprintf(procs, sizeof procs, "%s/cgroup.procs", dir);
  if (access(dir, W_OK) != 0 || access(procs, W_OK) != 0) {
    *why = maelys_backend_asprintf(
        "the cgroup '%s' is not writable by this user (%s): the tree could "
        "not be held in a cgroup of its own; a delegated cgroup (systemd "
        "user session, a container with a writable cgroupfs) gives one",
        dir, strerror(errno));
    return NULL;
  }
  char test[PATH_MAX + 64], kill_file[PATH_MAX + 80];
  snprintf(test, sizeof test, "%s/maelys-landlock-probe-%d", dir,
           (int)getpid());
  snprintf(kill_file, sizeof kill_file, "%s/cgroup.kill", test);
  if (mkdir(test, 0755) != 0) {
    *why = maelys_backend_asprintf("creating a cgroup below '%s': %s", dir,
                                   strerror(errno));
    return NULL;
  }
  bool killable = access(kill_file, W_OK) == 0;
  rmdir(test);
  sweep_cgroups(dir);
  if (!killable) {
    *why = maelys_backend_asprintf(
        "the cgroups below '%s' have no cgroup.kill (Linux 5.14)", dir);
    return NULL;
  }
  return strdup(dir);
}

static maelys_executor_plan_t* probe_plan(const ll_state_t* st,
                                          const probe_dirs_t* d, bool channel) {
  maelys_executor_plan_t* p = NULL;
  if (maelys_executor_plan_create(&p, NULL) != MAELYS_EXECUTOR_OK)
    return NULL;
  bool ok =
      maelys_executor_plan_set_root(p, MAELYS_EXECUTOR_ROOT_READONLY, 0,
                                    NULL) == MAELYS_EXECUTOR_OK &&
      maelys_executor_plan_add_minimal_runtime(p, NULL) == MAELYS_EXECUTOR_OK &&
      maelys_executor_plan_add_dev(p, "/dev", NULL) == MAELYS_EXECUTOR_OK &&
      maelys_executor_plan_set_network(p, MAELYS_EXECUTOR_NETWORK_NONE, NULL) ==
          MAELYS_EXECUTOR_OK &&
      maelys_executor_plan_add_rule(
          p, st->launcher_path, MAELYS_EXECUTOR_ACCESS_READ,
          MAELYS_EXECUTOR_SCOPE_LITERAL_FILE, NULL) == MAELYS_EXECUTOR_OK &&
      maelys_executor_plan_add_rule(p, d->rw, MAELYS_EXECUTOR_ACCESS_WRITE,
                                    MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY,
                                    NULL) == MAELYS_EXECUTOR_OK &&
      maelys_executor_plan_add_rule(p, d->ro, MAELYS_EXECUTOR_ACCESS_READ,
                                    MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY,
                                    NULL) == MAELYS_EXECUTOR_OK &&
      maelys_executor_plan_add_rule(p, d->secret, MAELYS_EXECUTOR_ACCESS_DENY,
                                    MAELYS_EXECUTOR_SCOPE_LITERAL_FILE,
                                    NULL) == MAELYS_EXECUTOR_OK &&
      (!channel || maelys_executor_plan_add_channel(p, 4, "probe-tcp", NULL) ==
                       MAELYS_EXECUTOR_OK);
  if (!ok || maelys_executor_plan_seal(p, NULL) != MAELYS_EXECUTOR_OK) {
    maelys_executor_plan_destroy(p);
    return NULL;
  }
  return p;
}

static maelys_execution_request_t*
probe_request(const ll_state_t* st, const char* const* argv, int* tcp_fd) {
  maelys_execution_request_t* r = NULL;
  if (maelys_execution_request_create(&r, NULL) != MAELYS_EXECUTOR_OK)
    return NULL;
  if (maelys_execution_request_set_executable(r, st->launcher_path, NULL) !=
          MAELYS_EXECUTOR_OK ||
      maelys_execution_request_set_argv(r, argv, NULL) != MAELYS_EXECUTOR_OK ||
      maelys_execution_request_set_backend(r, "landlock", NULL) !=
          MAELYS_EXECUTOR_OK ||
      maelys_execution_request_set_stderr_mode(r, MAELYS_EXEC_STDERR_CAPTURE,
                                               NULL) != MAELYS_EXECUTOR_OK ||
      maelys_execution_request_set_stop_budget(r, 1000, 2000, NULL) !=
          MAELYS_EXECUTOR_OK ||
      (tcp_fd != NULL && maelys_execution_request_add_channel(
                             r, 4, tcp_fd, NULL) != MAELYS_EXECUTOR_OK)) {
    maelys_execution_request_destroy(r);
    return NULL;
  }
  return r;
}

/* A listening TCP socket on 127.0.0.1 (its port into *port) and an
 * unconnected one for the probe payload to connect() from: Landlock's TCP
 * rule, not the seccomp socket denial, must be what refuses it. */
static int tcp_pair(int* listener, int* client, unsigned* port) {
  *listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  *client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof sa;
  if (*listener < 0 || *client < 0 ||
      bind(*listener, (struct sockaddr*)&sa, sizeof sa) != 0 ||
      listen(*listener, 4) != 0 ||
      getsockname(*listener, (struct sockaddr*)&sa, &len) != 0)
    return -errno;
  *port = ntohs(sa.sin_port);
  return 0;
}

/* Why a probe run did not produce its report. */
static char* run_failure(const maelys_backend_probe_run_t* run) {
  if (!run->spawned)
    return maelys_backend_asprintf("the probe sandbox could not start: %s",
                                   run->spawn_error ? run->spawn_error : "");
  if (run->outcome == MAELYS_EXEC_OUTCOME_LAUNCH_FAILED)
    return maelys_backend_asprintf("the probe sandbox failed to set up: %s",
                                   run->message);
  return maelys_backend_asprintf(
      "the probe sandbox ended without its report (%s; %s %d%s%s)",
      run->timed_out ? "timed out" : "no output",
      run->outcome == MAELYS_EXEC_OUTCOME_SIGNALED ? "signal" : "exit code",
      run->outcome == MAELYS_EXEC_OUTCOME_SIGNALED ? run->term_signal
                                                   : run->exit_code,
      run->message[0] ? ": " : "", run->message);
}

static void refuse_all(maelys_backend_probe_t* probe, const char* why) {
  maelys_backend_probe_missing(probe, MAELYS_BACKEND_CAP_ALL, why);
  maelys_backend_probe_diagnostic(probe, why);
}

/* One verdict: the capability is proved when `ok`, else missing with why. */
static void verdict(maelys_backend_probe_t* probe, uint64_t* proved,
                    uint64_t cap, bool ok, const char* why) {
  if (ok)
    *proved |= cap;
  else
    maelys_backend_probe_missing(probe, cap, why);
}

/* What this backend never has, and why. */
static void never(maelys_backend_probe_t* probe) {
  static const struct {
    uint64_t cap;
    const char* why;
  } rows[] = {
      {MAELYS_BACKEND_CAP_USER_NAMESPACE | MAELYS_BACKEND_CAP_PID_NAMESPACE |
           MAELYS_BACKEND_CAP_MOUNT_NAMESPACE |
           MAELYS_BACKEND_CAP_NETWORK_NAMESPACE,
       "the landlock backend uses no namespace (it is for hosts where none "
       "can be had)"},
      {MAELYS_BACKEND_CAP_TMPFS_SIZE | MAELYS_BACKEND_CAP_ROOT_EPHEMERAL_WRITE,
       "without a mount namespace no tmpfs and no scratch root can be made"},
      {MAELYS_BACKEND_CAP_NETWORK_MEDIATED_FD4 |
           MAELYS_BACKEND_CAP_NETWORK_MEDIATED_EGRESS,
       "the landlock backend has no mediated network frontend; compose the "
       "egress adapter in the host"},
      {MAELYS_BACKEND_CAP_LIMIT_TASKS | MAELYS_BACKEND_CAP_LIMIT_MEMORY,
       "the landlock backend enforces no sandbox-wide ceiling yet (the "
       "per-process rlimits of a plan are applied)"},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    maelys_backend_probe_missing(probe, rows[i].cap, rows[i].why);
}

/* What registration checks before any probe run: the launcher, the ABI,
 * the filters, the staging directory, the cgroup. true when registration
 * ends here (*result says how; every capability refused, with why, or an
 * error). */
static bool probe_preflight(ll_state_t* st, maelys_backend_probe_t* probe,
                            maelys_executor_result_t* result,
                            char** out_error) {
  *result = MAELYS_EXECUTOR_OK;
  if (unusable(st) != NULL) {
    refuse_all(probe, unusable(st));
    return true;
  }
  if (st->abi < 0) {
    char* why = maelys_backend_asprintf(
        "Landlock is not available (%s): it needs Linux 5.13 with landlock "
        "in the kernel's lsm= list",
        strerror(-st->abi));
    refuse_all(probe, why);
    free(why);
    return true;
  }
  /* The lowering's own refusals (ABI too old for this host) hold for every
   * plan: say so once, for every capability. */
  if (st->abi < MAELYS__LL_MIN_ABI ||
      (st->abi < MAELYS__LL_SCOPE_ABI && !st->host_root)) {
    char* why = maelys_backend_asprintf(
        "Landlock ABI %d: %s", st->abi,
        st->abi < MAELYS__LL_MIN_ABI
            ? "truncate(2) is not mediated before ABI 3 (Linux 6.2)"
            : "signals are not scoped before ABI 6 (Linux 6.12), so a payload "
              "running as this user could kill its supervisor and forge its "
              "outcome (invariant 19)");
    refuse_all(probe, why);
    free(why);
    return true;
  }
  for (int i = 0; i < 2; i++)
    if (maelys__seccomp_baseline_build(i == 1, false, &st->bpf[i],
                                       &st->bpf_len[i], out_error) != 0)
      return (*result = MAELYS_EXECUTOR_ERR_UNSUPPORTED), true;
  int rc = 0;
  for (int i = 0; i < 2 && rc == 0; i++)
    rc = build_extra_filter(i == 1, &st->extra_bpf[i], &st->extra_bpf_len[i]);
  if (rc != 0) {
    *result = maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                                  "building the landlock seccomp filter: %s",
                                  strerror(-rc));
    return true;
  }
  if (st->host_root && mkdir(st->staging_dir, 0755) != 0 && errno != EEXIST) {
    char* why = maelys_backend_asprintf(
        "the staging directory '%s' cannot be created (%s): as uid 0 the "
        "backend keeps its identity locks there; set 'staging_dir'",
        st->staging_dir, strerror(errno));
    refuse_all(probe, why);
    free(why);
    return true;
  }
  free(st->cgroup_dir);
  free(st->cgroup_missing);
  st->cgroup_dir = find_cgroup(st, &st->cgroup_missing);

  return false;
}

/* The two probe runs (see ll_probe), into runs[2]: NULL, or why run A
 * produced no report. */
static char* run_probes(ll_state_t* st, maelys_backend_probe_run_t runs[2]) {
  memset(runs, 0, 2 * sizeof *runs);
  probe_dirs_t dirs;
  memset(&dirs, 0, sizeof dirs);
  int listener = -1, client = -1;
  unsigned port = 0;
  int rc = make_probe_dirs(st, &dirs);
  if (rc == 0)
    rc = tcp_pair(&listener, &client, &port);
  if (rc != 0) {
    remove_probe_dirs(&dirs);
    if (listener >= 0)
      close(listener);
    if (client >= 0)
      close(client);
    return maelys_backend_asprintf("preparing the probe: %s", strerror(-rc));
  }
  char portbuf[16];
  snprintf(portbuf, sizeof portbuf, "%u", port);
  const char* argv_a[] = {"maelys-landlock-launcher",
                          "probe",
                          "identity",
                          "seccomp",
                          "nnp",
                          "userns",
                          "signal",
                          "inet",
                          "unix",
                          "socketpair",
                          "connect",
                          "4",
                          portbuf,
                          "read",
                          "granted",
                          dirs.ro_file,
                          "read",
                          "denied",
                          dirs.secret,
                          "write",
                          "granted",
                          dirs.rw_new,
                          "write",
                          "denied",
                          dirs.root_new,
                          "child-read",
                          "denied",
                          dirs.secret,
                          "chmod",
                          "denied",
                          dirs.secret,
                          "tree",
                          NULL};
  const char* argv_b[] = {"maelys-landlock-launcher", "probe", "tree", NULL};
  char* failure = NULL;
  maelys_executor_plan_t* plans[2] = {probe_plan(st, &dirs, true),
                                      probe_plan(st, &dirs, false)};
  for (int attempt = 0; attempt < 2; attempt++) {
    int fd = fcntl(client, F_DUPFD_CLOEXEC, 0);
    maelys_execution_request_t* reqs[2] = {
        probe_request(st, argv_a, fd >= 0 ? &fd : NULL),
        probe_request(st, argv_b, NULL)};
    if (fd >= 0)
      close(fd);
    if (plans[0] == NULL || plans[1] == NULL || reqs[0] == NULL ||
        reqs[1] == NULL) {
      failure = strdup("out of memory building the probe");
      for (int i = 0; i < 2; i++)
        maelys_execution_request_destroy(reqs[i]);
      break;
    }
    maelys_backend_probe_run_t* list[2] = {&runs[0], &runs[1]};
    for (int i = 0; i < 2; i++) {
      maelys_backend_probe_run_init(&runs[i], plans[i], reqs[i]);
      runs[i].marker = "tree=ready";
      runs[i].timeout_ms = PROBE_TIMEOUT_MS;
    }
    /* Run A ends the way a host's death would (its lifeline dropped), run
     * B by a forced stop: after either, nothing the payload started may be
     * left holding its stdout. */
    runs[0].end_by_lifeline = 1;
    maelys_backend_probe_run(maelys_backend_landlock(), st,
                             MAELYS_BACKEND_CAP_ALL, list, 2, NULL);
    for (int i = 0; i < 2; i++)
      maelys_execution_request_destroy(reqs[i]);
    if (runs[0].marker_seen || st->cgroup_dir == NULL ||
        strcmp(runs[0].launch_step, "cgroup") != 0)
      break;
    /* The cgroup that looked usable refused the payload (a common ancestor
     * not writable): probe again without one, and say why. */
    free(st->cgroup_missing);
    st->cgroup_missing = maelys_backend_asprintf(
        "the payload could not join a cgroup below '%s': %s", st->cgroup_dir,
        runs[0].message);
    free(st->cgroup_dir);
    st->cgroup_dir = NULL;
    for (int i = 0; i < 2; i++)
      maelys_backend_probe_run_dispose(&runs[i]);
    memset(runs, 0, 2 * sizeof *runs);
  }
  for (int i = 0; i < 2; i++)
    maelys_executor_plan_destroy(plans[i]);
  close(client);
  close(listener);
  remove_probe_dirs(&dirs);

  if (failure == NULL && !runs[0].marker_seen)
    failure = run_failure(&runs[0]);
  return failure;
}

char* maelys__ll_tree_reason(const char* cgroup_dir, const char* cgroup_missing,
                             const maelys_backend_probe_run_t runs[2]) {
  /* Invariants 8 and 22: after the lifeline was dropped (run A) and after
   * a forced stop (run B), stdout ended, so the descendant that
   * double-forked into a session of its own was gone too. Only with a
   * cgroup, whose cgroup.kill ends everything in it, and with signals
   * scoped, so that the payload cannot kill its supervisor. */
  if (cgroup_dir == NULL)
    return maelys_backend_asprintf(
        "%s; without a cgroup the supervisor ends the tree only while it "
        "lives itself",
        cgroup_missing ? cgroup_missing : "no cgroup");
  if (!has_line(runs[0].output, "signal=errno:1"))
    return maelys_backend_asprintf(
        "the probe payload could signal its supervisor (signals not scoped)");
  /* Run B never reached its marker (a loaded host timed it out): it tested
   * no tree, and its own failure is the reason. */
  if (!runs[1].marker_seen)
    return run_failure(&runs[1]);
  if (!runs[0].output_eof || runs[0].timed_out)
    return maelys_backend_asprintf("a double-forked, setsid() descendant "
                                   "outlived the host's lifeline in the probe");
  if (!runs[1].output_eof || runs[1].timed_out)
    return maelys_backend_asprintf("a double-forked, setsid() descendant "
                                   "outlived a forced stop in the probe");
  return NULL;
}

/* The capabilities run A and run B proved, and why the others are
 * missing. */
static void probe_verdicts(const ll_state_t* st, maelys_backend_probe_t* probe,
                           const maelys_backend_probe_run_t runs[2]) {
  const char* out = runs[0].output;
  uint64_t proved = 0;
  bool seccomp = has_line(out, "seccomp=2") && has_line(out, "nnp=1");
  verdict(probe, &proved, MAELYS_BACKEND_CAP_SECCOMP, seccomp,
          "the seccomp filter was not in force in the probe payload");
  bool read_denied = has_line(out, "read.denied=errno:13");
  verdict(probe, &proved, MAELYS_BACKEND_CAP_FILESYSTEM_READ,
          has_line(out, "read.granted=ok") && read_denied,
          "a granted file was not readable, or a file outside the grants "
          "was, in the probe payload");
  verdict(probe, &proved, MAELYS_BACKEND_CAP_FILESYSTEM_DENY, read_denied,
          "a denied file was readable in the probe payload");
  bool write_denied = has_line(out, "write.denied=errno:13");
  verdict(probe, &proved, MAELYS_BACKEND_CAP_ROOT_READONLY, write_denied,
          "creating a file outside the grants did not fail with EACCES in the "
          "probe payload");
  verdict(probe, &proved, MAELYS_BACKEND_CAP_FILESYSTEM_WRITE,
          has_line(out, "write.granted=ok") && write_denied &&
              has_line(out, "chmod.denied=errno:1"),
          "writing into a granted directory failed, or writing (or a chmod) "
          "outside the grants succeeded, in the probe payload");
  /* Network NONE: every socket family refused by seccomp (AF_UNIX too,
   * socketpair kept), and a TCP socket handed in refused by Landlock. */
  verdict(probe, &proved, MAELYS_BACKEND_CAP_NETWORK_NONE,
          st->abi >= MAELYS__LL_NET_ABI && has_line(out, "inet=errno:1") &&
              has_line(out, "unix=errno:1") && has_line(out, "socketpair=ok") &&
              has_line(out, "connect=errno:13"),
          st->abi < MAELYS__LL_NET_ABI
              ? "Landlock has no TCP rules before ABI 4 (Linux 6.7)"
              : "a socket was not refused, or a TCP connect on a socket "
                "handed in was not refused by Landlock, in the probe payload");
  verdict(probe, &proved, MAELYS_BACKEND_CAP_DISABLE_USERNS,
          has_line(out, "userns=errno:1"),
          "the probe payload could create a user namespace");
  verdict(probe, &proved, MAELYS_BACKEND_CAP_PROCESS_CONFINEMENT,
          seccomp && has_line(out, "child-read.denied=errno:13"),
          "a child of the probe payload read a file outside the grants");
  verdict(probe, &proved, MAELYS_BACKEND_CAP_UNPRIVILEGED,
          has_line(out, "caps=none") && !has_line(out, "uid=0") &&
              runs[0].root_uid > 0 && runs[0].root_has_caps == 0,
          "the probe payload ran as uid 0 or held a capability");
  char* tree_why =
      maelys__ll_tree_reason(st->cgroup_dir, st->cgroup_missing, runs);
  verdict(probe, &proved, MAELYS_BACKEND_CAP_PROCESS_TREE, tree_why == NULL,
          tree_why);
  free(tree_why);
  never(probe);
  maelys_backend_probe_prove(probe, proved);
}

/* Registration: the preflight, two real probe runs on the SDK's private
 * loop (run A: every check, then the host's lifeline dropped; run B: a
 * forced stop), and one verdict per capability. */
static maelys_executor_result_t
ll_probe(void* state, maelys_backend_probe_t* probe, char** out_error) {
  ll_state_t* st = state;
  maelys_executor_result_t result;
  if (probe_preflight(st, probe, &result, out_error))
    return result;
  maelys_backend_probe_run_t runs[2];
  char* failure = run_probes(st, runs);
  if (failure != NULL)
    refuse_all(probe, failure);
  else
    probe_verdicts(st, probe, runs);
  free(failure);
  for (int i = 0; i < 2; i++)
    maelys_backend_probe_run_dispose(&runs[i]);
  return MAELYS_EXECUTOR_OK;
}

static const maelys_backend_t landlock_backend = {
    .abi_version = MAELYS_BACKEND_ABI_VERSION,
    .struct_size = sizeof(maelys_backend_t),
    .name = "landlock",
    .create = ll_create,
    .destroy = ll_destroy,
    .probe = ll_probe,
    .prepare = ll_prepare,
    .status_line = ll_status_line,
};

const maelys_backend_t* maelys_backend_landlock(void) {
  return &landlock_backend;
}
