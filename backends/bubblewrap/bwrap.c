/*
 * The bubblewrap backend: the glue around the pure lowering (bwrap-args.c)
 * and the seccomp filter (bwrap-seccomp.c). It locates bwrap and the helper,
 * proves its capabilities with real sandboxes at registration, and fills the
 * launch description: bwrap's arguments in a sealed memfd (--args), the BPF in
 * another (--seccomp), a status channel for bwrap's --json-status-fd, its
 * diagnostics and the helper's reports.
 *
 * Options: "bwrap" (path or name searched on PATH; default "bwrap"),
 * "helper" (path of maelys-executor-helper; default the installed one),
 * "staging_dir" (host uid 0 only; default /run/maelys-executor), "uid" and
 * "gid" (the unprivileged identity a uid-0 host runs payloads under; default
 * 65534:65534, "nobody", unless the request names one).
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>
#include <linux/openat2.h>

#include "bwrap-internal.h"
#include "internal.h"

#ifndef MAELYS_EXECUTOR_HELPER_PATH
#define MAELYS_EXECUTOR_HELPER_PATH                                            \
  "/usr/local/libexec/maelys-executor/maelys-executor-helper"
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif

#define DEFAULT_SANDBOX_ID 65534
#define DEFAULT_STAGING_DIR "/run/maelys-executor"
#define PROBE_TIMEOUT_MS 10000

typedef struct userns_entry {
  uint32_t owner, group, uid, gid;
  int fd;
} userns_entry_t;

typedef struct bwrap_state {
  char* bwrap_path; /* NULL when not found */
  char* bwrap_missing;
  char* helper_path;
  char* staging_dir;
  uint32_t uid, gid;
  bool host_root;
  unsigned char* bpf[2]; /* [0] network allowed, [1] network denied */
  size_t bpf_len[2];
  userns_entry_t* userns;
  size_t userns_count, userns_capacity;
} bwrap_state_t;

/* ------------------------------------------------------------- resolver */

static int real_open(void* ctx, const char* path,
                     maelys__bwrap_source_t* info) {
  (void)ctx;
  int fd = maelys__executor_open_nofollow(path);
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
          S_ISSOCK(st.st_mode)) {
        snprintf(name, 256, "%s", e->d_name);
        found = 1;
      }
    }
  }
  closedir(d);
  return found;
}

static const maelys__bwrap_resolver_t real_resolver = {
    NULL, real_open, real_create_dir, real_close, real_find_socket};

/* -------------------------------------------------------------- state */

static char* find_on_path(const char* name) {
  if (name[0] == '/')
    return access(name, X_OK) == 0 ? strdup(name) : NULL;
  const char* path = getenv("PATH");
  if (path == NULL || path[0] == '\0')
    path = "/usr/local/bin:/usr/bin:/bin";
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

static int parse_id(const char* s, uint32_t* out) {
  char* end;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (errno || end == s || *end || v == 0 || v >= UINT32_MAX)
    return -1;
  *out = (uint32_t)v;
  return 0;
}

/* uid 0 of the initial user namespace is host root. uid 0 of a nested one
 * (a rootless container) is some other host uid, and has no privilege to
 * stage or drop: bwrap then runs as it is, like for any unprivileged uid. */
static bool is_host_root(void) {
  if (geteuid() != 0)
    return false;
  FILE* f = fopen("/proc/self/uid_map", "r");
  if (f == NULL)
    return true;
  unsigned long inside = 1, outside = 1, count = 0;
  int n = fscanf(f, "%lu %lu %lu", &inside, &outside, &count);
  fclose(f);
  return n == 3 && inside == 0 && outside == 0 && count == 4294967295UL;
}

static void bwrap_destroy(void* p) {
  bwrap_state_t* st = p;
  if (st == NULL)
    return;
  free(st->bwrap_path);
  free(st->bwrap_missing);
  free(st->helper_path);
  free(st->staging_dir);
  free(st->bpf[0]);
  free(st->bpf[1]);
  for (size_t i = 0; i < st->userns_count; i++)
    close(st->userns[i].fd);
  free(st->userns);
  free(st);
}

static maelys_executor_result_t
bwrap_create(const maelys_backend_options_t* options, void** out_state,
             char** out_error) {
  *out_state = NULL;
  static const char* const known[] = {"bwrap", "helper", "staging_dir", "uid",
                                      "gid"};
  for (size_t i = 0; i < maelys_backend_options_count(options); i++) {
    const char* key = maelys_backend_options_key(options, i);
    bool ok = false;
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
      ok = ok || strcmp(known[k], key) == 0;
    if (!ok)
      return maelys__executor_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "bubblewrap: unknown option '%s' (bwrap, helper, staging_dir, uid, "
          "gid)",
          key);
  }
  bwrap_state_t* st = calloc(1, sizeof *st);
  if (st == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  st->host_root = is_host_root();
  st->uid = st->gid = DEFAULT_SANDBOX_ID;
  const char* v;
  if ((v = maelys_backend_options_get(options, "uid")) != NULL &&
      parse_id(v, &st->uid) != 0) {
    bwrap_destroy(st);
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "bubblewrap: uid '%s' is not a non-zero id",
                                 v);
  }
  if ((v = maelys_backend_options_get(options, "gid")) != NULL &&
      parse_id(v, &st->gid) != 0) {
    bwrap_destroy(st);
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "bubblewrap: gid '%s' is not a non-zero id",
                                 v);
  }
  const char* bwrap = maelys_backend_options_get(options, "bwrap");
  if (bwrap == NULL)
    bwrap = "bwrap";
  st->bwrap_path = find_on_path(bwrap);
  if (st->bwrap_path == NULL)
    st->bwrap_missing = maelys__executor_asprintf(
        "bwrap was not found (%s%s): install bubblewrap (Debian: apt-get "
        "install bubblewrap) or set the backend's 'bwrap' option",
        bwrap[0] == '/' ? "not executable: " : "searched PATH for ", bwrap);
  v = maelys_backend_options_get(options, "helper");
  st->helper_path = strdup(v ? v : MAELYS_EXECUTOR_HELPER_PATH);
  v = maelys_backend_options_get(options, "staging_dir");
  st->staging_dir = strdup(v ? v : DEFAULT_STAGING_DIR);
  if (st->helper_path == NULL || st->staging_dir == NULL) {
    bwrap_destroy(st);
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  }
  if (!maelys__executor_path_is_clean(st->helper_path) ||
      !maelys__executor_path_is_clean(st->staging_dir)) {
    maelys_executor_result_t r = maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "bubblewrap: helper '%s' and staging_dir '%s' must be clean absolute "
        "paths",
        st->helper_path, st->staging_dir);
    bwrap_destroy(st);
    return r;
  }
  *out_state = st;
  return MAELYS_EXECUTOR_OK;
}

/* A user namespace mapping owner:group to uid:gid, whose descriptor gives an
 * idmapped mount its mapping. Created once per pair and kept: a child made in
 * that namespace (clone with CLONE_NEWUSER, exit signal 0 so no host SIGCHLD
 * handler sees it) only lives until its maps are written. */
static int userns_for(bwrap_state_t* st, uint32_t owner, uint32_t group,
                      uint32_t uid, uint32_t gid) {
  for (size_t i = 0; i < st->userns_count; i++) {
    userns_entry_t* u = &st->userns[i];
    if (u->owner == owner && u->group == group && u->uid == uid &&
        u->gid == gid)
      return u->fd;
  }
  int sync[2];
  if (pipe2(sync, O_CLOEXEC) != 0)
    return -errno;
  pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER, NULL, NULL, NULL, NULL);
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
    char path[64], map[64];
    int n;
    snprintf(path, sizeof path, "/proc/%d/uid_map", (int)pid);
    n = snprintf(map, sizeof map, "%u %u 1\n", owner, uid);
    int f = open(path, O_WRONLY | O_CLOEXEC);
    if (f < 0 || write(f, map, (size_t)n) != n)
      err = errno ? errno : EIO;
    if (f >= 0)
      close(f);
    snprintf(path, sizeof path, "/proc/%d/setgroups", (int)pid);
    f = open(path, O_WRONLY | O_CLOEXEC);
    if (f >= 0) {
      if (write(f, "deny", 4) != 4 && err == 0)
        err = errno;
      close(f);
    }
    snprintf(path, sizeof path, "/proc/%d/gid_map", (int)pid);
    n = snprintf(map, sizeof map, "%u %u 1\n", group, gid);
    f = open(path, O_WRONLY | O_CLOEXEC);
    if (err == 0 && (f < 0 || write(f, map, (size_t)n) != n))
      err = errno ? errno : EIO;
    if (f >= 0)
      close(f);
    snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
    if (err == 0 && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
      err = errno;
  }
  close(sync[1]);
  if (pid > 0) {
    siginfo_t info;
    while (waitid(P_PID, (id_t)pid, &info, WEXITED | __WALL) != 0 &&
           errno == EINTR)
      ;
  }
  if (err != 0) {
    if (fd >= 0)
      close(fd);
    return -err;
  }
  if (maelys__executor_reserve((void**)&st->userns, &st->userns_capacity,
                               sizeof *st->userns, st->userns_count + 1)) {
    close(fd);
    return -ENOMEM;
  }
  st->userns[st->userns_count++] = (userns_entry_t){owner, group, uid, gid, fd};
  return fd;
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

static maelys_executor_result_t
bwrap_prepare(void* state, uint64_t proved, const maelys_executor_plan_t* plan,
              const maelys_execution_request_t* request,
              maelys_backend_launch_t* launch, char** out_error) {
  bwrap_state_t* st = state;
  if (st->bwrap_path == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_NOT_FOUND, "%s",
                                 st->bwrap_missing);
  uint32_t uid = st->uid, gid = st->gid;
  maelys_execution_request_identity(request, &uid, &gid);

  int limit = maelys_backend_launch_payload_fd_limit(launch);
  int keep[64];
  size_t keep_count = 0;
  for (int fd = 3; fd < limit && keep_count < 64; fd++)
    if (maelys_backend_launch_payload_fd_present(launch, fd))
      keep[keep_count++] = fd;
  /* The launched bwrap's descriptors: the payload layout with fd 2 replaced
   * by the status channel (bwrap's own diagnostics), then, from the limit
   * up: the payload's real stderr, the helper's status channel, the args,
   * the BPF, bwrap's json status, and the lowering's extra descriptors. */
  maelys__bwrap_env_t env = {
      .resolver = &real_resolver,
      .helper_path = st->helper_path,
      .host_root = st->host_root,
      .sandbox_uid = uid,
      .sandbox_gid = gid,
      .staging_dir = st->staging_dir,
      .disable_userns = (proved & MAELYS_BACKEND_CAP_DISABLE_USERNS) != 0,
      .payload_fd_limit = limit,
      .keep_fds = keep,
      .keep_count = keep_count,
      .stderr_fd = limit,
      .status_fd = limit + 1,
      .seccomp_fd = limit + 3,
      .json_status_fd = limit + 4,
      .first_extra_fd = limit + 5,
  };
  maelys__bwrap_lowered_t low;
  maelys_executor_result_t r =
      maelys__bwrap_lower(plan, request, &env, &low, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;

  /* The --args memfd: every argument, NUL-terminated. */
  size_t total = 0;
  for (size_t i = 0; i < low.argc; i++)
    total += strlen(low.args[i]) + 1;
  char* blob = malloc(total + 1);
  char** argv = calloc(1, sizeof *argv);
  char args_fd[16];
  int fd;
  if (blob == NULL || argv == NULL) {
    r = maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
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
    r = maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                              "creating the bwrap arguments memfd: %s",
                              strerror(-fd));
    goto out;
  }
  if ((r = add_extra(launch, fd, limit + 2, out_error)) != MAELYS_EXECUTOR_OK)
    goto out;
  bool deny_net =
      maelys_executor_plan_network(plan) != MAELYS_EXECUTOR_NETWORK_INHERIT;
  fd = sealed_memfd("maelys-seccomp", st->bpf[deny_net], st->bpf_len[deny_net]);
  if (fd < 0) {
    r = maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                              "creating the seccomp memfd: %s", strerror(-fd));
    goto out;
  }
  if ((r = add_extra(launch, fd, limit + 3, out_error)) != MAELYS_EXECUTOR_OK)
    goto out;
  for (size_t i = 0; i < low.fd_count; i++) {
    fd = low.fds[i];
    low.fds[i] = -1;
    if (fd < 0 && (fd = sealed_memfd("maelys-deny", "", 0)) < 0) {
      r = maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                "creating a deny overlay: %s", strerror(-fd));
      goto out;
    }
    if ((r = add_extra(launch, fd, env.first_extra_fd + (int)i, out_error)) !=
        MAELYS_EXECUTOR_OK)
      goto out;
  }
  for (int c = 0; c < limit && r == MAELYS_EXECUTOR_OK; c++) {
    if (c == 2)
      r = maelys_backend_launch_map_fd(launch, 2, MAELYS_BACKEND_FD_STATUS, 0,
                                       out_error);
    else if (maelys_backend_launch_payload_fd_present(launch, c))
      r = maelys_backend_launch_map_fd(launch, c, MAELYS_BACKEND_FD_PAYLOAD, c,
                                       out_error);
  }
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_backend_launch_map_fd(launch, limit, MAELYS_BACKEND_FD_PAYLOAD,
                                     2, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_backend_launch_map_fd(launch, limit + 1,
                                     MAELYS_BACKEND_FD_STATUS, 0, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_backend_launch_map_fd(launch, limit + 4,
                                     MAELYS_BACKEND_FD_STATUS, 0, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    goto out;

  /* argv of the launched image: bwrap reading its arguments from the memfd;
   * for a uid-0 host, the helper's stage step first, which stages the binds
   * and drops to the sandbox identity before it executes bwrap (never host
   * root inside). */
  size_t cap = low.command_argc + 16 + 8 * low.stage_count;
  char** stage_strings = calloc(7 * low.stage_count + 8, sizeof *stage_strings);
  size_t strings = 0;
  free(argv);
  argv = calloc(cap, sizeof *argv);
  if (argv == NULL || stage_strings == NULL) {
    free(stage_strings);
    r = maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                              "out of memory");
    goto out;
  }
  size_t a = 0;
  if (st->host_root) {
    argv[a++] = st->helper_path;
    argv[a++] = "stage";
    argv[a++] = "--staging-dir";
    argv[a++] = st->staging_dir;
    argv[a++] = "--uid";
    argv[a++] = stage_strings[strings++] = maelys__executor_asprintf("%u", uid);
    argv[a++] = "--gid";
    argv[a++] = stage_strings[strings++] = maelys__executor_asprintf("%u", gid);
    for (size_t i = 0; i < low.stage_count && r == MAELYS_EXECUTOR_OK; i++) {
      const maelys__bwrap_stage_t* sg = &low.stages[i];
      int ns = userns_for(st, sg->owner, sg->group, uid, gid);
      int dup = ns >= 0 ? fcntl(ns, F_DUPFD_CLOEXEC, 0) : -1;
      if (ns < 0 || dup < 0) {
        r = maelys__executor_fail(
            out_error, MAELYS_EXECUTOR_ERR_IO,
            "creating the idmapping %u:%u -> %u:%u for '%s': %s", sg->owner,
            sg->group, uid, gid, sg->source, strerror(ns < 0 ? -ns : errno));
        break;
      }
      int child = env.first_extra_fd + (int)low.fd_count + (int)i;
      r = add_extra(launch, dup, child, out_error);
      argv[a++] = "--stage";
      argv[a++] = stage_strings[strings++] =
          maelys__executor_asprintf("%zu", i);
      argv[a++] = sg->source;
      argv[a++] = stage_strings[strings++] =
          maelys__executor_asprintf("%llu", (unsigned long long)sg->dev);
      argv[a++] = stage_strings[strings++] =
          maelys__executor_asprintf("%llu", (unsigned long long)sg->ino);
      argv[a++] = sg->is_directory ? "d" : "f";
      argv[a++] = stage_strings[strings++] =
          maelys__executor_asprintf("%d", child);
    }
    argv[a++] = "--";
    argv[a++] = st->bwrap_path;
  }
  for (size_t i = 0; i < strings; i++)
    if (stage_strings[i] == NULL && r == MAELYS_EXECUTOR_OK)
      r = maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                "out of memory");
  snprintf(args_fd, sizeof args_fd, "%d", limit + 2);
  argv[a++] = "bwrap";
  argv[a++] = "--args";
  argv[a++] = args_fd;
  argv[a++] = "--";
  for (size_t i = 0; i < low.command_argc; i++)
    argv[a++] = low.command[i];
  argv[a] = NULL;
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_backend_launch_set_image(
        launch, st->host_root ? st->helper_path : st->bwrap_path,
        (const char* const*)argv, NULL, out_error);
  for (size_t i = 0; i < strings; i++)
    free(stage_strings[i]);
  free(stage_strings);
  if (r != MAELYS_EXECUTOR_OK)
    goto out;
  maelys_backend_launch_set_flags(launch,
                                  MAELYS_BACKEND_LAUNCH_NO_CHDIR |
                                      MAELYS_BACKEND_LAUNCH_NO_RLIMITS |
                                      MAELYS_BACKEND_LAUNCH_DIE_WITH_PARENT |
                                      MAELYS_BACKEND_LAUNCH_STATUS_CHANNEL);
out:
  free(blob);
  free(argv);
  maelys__bwrap_lowered_dispose(&low, &real_resolver, true);
  return r;
}

/* ------------------------------------------------------ status channel */

static void bwrap_status_line(void* state, const char* line, size_t length,
                              maelys_backend_event_t* ev) {
  (void)state;
  static const char init[] = "maelys-init ";
  char buf[600];
  size_t n = length < sizeof buf - 1 ? length : sizeof buf - 1;
  memcpy(buf, line, n);
  buf[n] = '\0';
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
               "the payload could not be started inside the sandbox: %s: %s",
               step, strerror(v));
    }
    return;
  }
  if (buf[0] == '{') {
    /* bwrap's --json-status-fd documents: the sandbox's pid 1 comes first. */
    json_t* doc = json_loads(buf, 0, NULL);
    json_t* pid = json_object_get(doc, "child-pid");
    if (json_is_integer(pid)) {
      ev->kind = MAELYS_BACKEND_EVENT_TREE_ROOT;
      ev->pid = (int)json_integer_value(pid);
    }
    json_decref(doc);
    return;
  }
  ev->kind = MAELYS_BACKEND_EVENT_DIAGNOSTIC;
  snprintf(ev->message, sizeof ev->message, "%.500s", buf);
}

/* --------------------------------------------------------------- probe */

static bool has_line(const char* out, const char* line) {
  size_t n = strlen(line);
  for (const char* p = out; (p = strstr(p, line)) != NULL; p += n)
    if ((p == out || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
      return true;
  return false;
}

typedef struct probe_dirs {
  char root[64];
  char rw[96], ro[96], ro_file[128], secret[128];
} probe_dirs_t;

static int make_probe_dirs(probe_dirs_t* d) {
  snprintf(d->root, sizeof d->root, "/tmp/maelys-probe-XXXXXX");
  if (mkdtemp(d->root) == NULL)
    return -errno;
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

static void remove_probe_dirs(const probe_dirs_t* d) {
  unlink(d->ro_file);
  unlink(d->secret);
  rmdir(d->rw);
  rmdir(d->ro);
  rmdir(d->root);
}

static maelys_executor_plan_t* probe_plan(const probe_dirs_t* d,
                                          bool ephemeral) {
  maelys_executor_plan_t* p = NULL;
  if (maelys_executor_plan_create(&p, NULL) != MAELYS_EXECUTOR_OK)
    return NULL;
  bool ok =
      maelys_executor_plan_set_root(
          p,
          ephemeral ? MAELYS_EXECUTOR_ROOT_EPHEMERAL_WRITE
                    : MAELYS_EXECUTOR_ROOT_READONLY,
          ephemeral ? 131072 : 0, NULL) == MAELYS_EXECUTOR_OK &&
      maelys_executor_plan_add_proc(p, "/proc", NULL) == MAELYS_EXECUTOR_OK &&
      maelys_executor_plan_add_dev(p, "/dev", NULL) == MAELYS_EXECUTOR_OK &&
      maelys_executor_plan_add_tmpfs(p, "/tmp", 65536, NULL) ==
          MAELYS_EXECUTOR_OK &&
      maelys_executor_plan_set_network(p, MAELYS_EXECUTOR_NETWORK_NONE, NULL) ==
          MAELYS_EXECUTOR_OK &&
      maelys_executor_plan_set_process_tree_required(p, 1, NULL) ==
          MAELYS_EXECUTOR_OK;
  if (ok && !ephemeral)
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
      (ephemeral && maelys_execution_request_set_scratch_size(
                        r, 131072, NULL) != MAELYS_EXECUTOR_OK)) {
    maelys_execution_request_destroy(r);
    return NULL;
  }
  return r;
}

/* Why a probe run did not produce its report. */
static char* run_failure(const maelys__probe_run_t* run) {
  if (!run->spawned)
    return maelys__executor_asprintf("the probe sandbox could not start: %s",
                                     run->spawn_error ? run->spawn_error : "");
  if (run->status.outcome == MAELYS_EXEC_OUTCOME_LAUNCH_FAILED)
    return maelys__executor_asprintf("the probe sandbox failed to set up: %s",
                                     run->status.message);
  return maelys__executor_asprintf(
      "the probe sandbox ended without its report (%s)",
      run->timed_out ? "timed out" : "no output");
}

static maelys_executor_result_t
bwrap_probe(void* state, maelys_backend_probe_t* probe, char** out_error) {
  bwrap_state_t* st = state;
  if (st->bwrap_path == NULL) {
    maelys_backend_probe_missing(probe, MAELYS_BACKEND_CAP_ALL,
                                 st->bwrap_missing);
    maelys_backend_probe_diagnostic(probe, st->bwrap_missing);
    return MAELYS_EXECUTOR_OK;
  }
  if (access(st->helper_path, X_OK) != 0) {
    char* why = maelys__executor_asprintf(
        "the sandbox helper '%s' is not executable (%s): install Maelys "
        "Executor completely or set the backend's 'helper' option",
        st->helper_path, strerror(errno));
    maelys_backend_probe_missing(probe, MAELYS_BACKEND_CAP_ALL, why);
    maelys_backend_probe_diagnostic(probe, why);
    free(why);
    return MAELYS_EXECUTOR_OK;
  }
  for (int i = 0; i < 2; i++)
    if (maelys__bwrap_seccomp_build(i == 1, &st->bpf[i], &st->bpf_len[i],
                                    out_error) != 0)
      return MAELYS_EXECUTOR_ERR_UNSUPPORTED;
  if (st->host_root && mkdir(st->staging_dir, 0755) != 0 && errno != EEXIST) {
    char* why = maelys__executor_asprintf(
        "the staging directory '%s' cannot be created (%s): as uid 0 the "
        "backend stages the sandbox's binds there; set 'staging_dir'",
        st->staging_dir, strerror(errno));
    maelys_backend_probe_missing(probe, MAELYS_BACKEND_CAP_ALL, why);
    maelys_backend_probe_diagnostic(probe, why);
    free(why);
    return MAELYS_EXECUTOR_OK;
  }

  probe_dirs_t dirs;
  int dr = make_probe_dirs(&dirs);
  if (dr != 0) {
    remove_probe_dirs(&dirs);
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                 "creating the probe directories: %s",
                                 strerror(-dr));
  }
  const char* argv_a[] = {
      "helper", "probe",      "identity", "seccomp",   "net",   "userns",
      "write",  "/",          "write",    dirs.rw,     "write", dirs.ro,
      "read",   dirs.ro_file, "read",     dirs.secret, "fill",  "/tmp",
      "65536",  "tree",       NULL};
  /* The same argv order matters below: "write" lines come as /, rw, ro and
   * "read" lines as the file, then the secret. Run B proves the
   * ephemeral-write root; both run at once. */
  const char* argv_b[] = {"helper", "probe", "write",  "/",
                          "fill",   "/",     "131072", NULL};
  maelys_executor_plan_t* plans[2] = {probe_plan(&dirs, false),
                                      probe_plan(&dirs, true)};
  maelys_execution_request_t* reqs[2] = {probe_request(argv_a, false),
                                         probe_request(argv_b, true)};
  maelys__probe_run_t runs[2];
  memset(runs, 0, sizeof runs);
  uint64_t assumed = MAELYS_BACKEND_CAP_ALL;
  char* failure = NULL;
  for (int attempt = 0; attempt < 2 && failure == NULL; attempt++) {
    if (plans[0] == NULL || plans[1] == NULL || reqs[0] == NULL ||
        reqs[1] == NULL) {
      failure = maelys__executor_strdup("out of memory building the probe");
      break;
    }
    runs[0].marker = "tree=ready";
    runs[0].timeout_ms = PROBE_TIMEOUT_MS;
    runs[1].timeout_ms = PROBE_TIMEOUT_MS;
    maelys__executor_probe_runs(maelys_backend_bubblewrap(), st, assumed, 2,
                                (const maelys_executor_plan_t* const*)plans,
                                reqs, runs);
    if (runs[0].marker_seen)
      break;
    char* why = run_failure(&runs[0]);
    for (int i = 0; i < 2; i++) {
      maelys__executor_probe_run_dispose(&runs[i]);
      maelys_execution_request_destroy(reqs[i]);
      reqs[i] = NULL;
    }
    memset(runs, 0, sizeof runs);
    if (attempt == 1) {
      failure = why;
      break;
    }
    /* An older bwrap refuses --disable-userns: try without it, and keep
     * that capability unproved. */
    maelys_backend_probe_missing(probe, MAELYS_BACKEND_CAP_DISABLE_USERNS, why);
    free(why);
    assumed &= ~MAELYS_BACKEND_CAP_DISABLE_USERNS;
    reqs[0] = probe_request(argv_a, false);
    reqs[1] = probe_request(argv_b, true);
  }
  for (int i = 0; i < 2; i++) {
    maelys_executor_plan_destroy(plans[i]);
    maelys_execution_request_destroy(reqs[i]);
  }
  maelys__probe_run_t run = runs[0];

  uint64_t proved = 0;
  if (failure != NULL) {
    char* why = maelys__executor_asprintf(
        "%s. If user namespaces are blocked (as in unprivileged containers), "
        "enable them (sysctl kernel.unprivileged_userns_clone=1, "
        "user.max_user_namespaces > 0) or run where they are allowed.",
        failure);
    maelys_backend_probe_missing(probe, MAELYS_BACKEND_CAP_ALL, why);
    maelys_backend_probe_diagnostic(probe, why);
    free(why);
    free(failure);
    maelys__executor_probe_run_dispose(&run);
    remove_probe_dirs(&dirs);
    return MAELYS_EXECUTOR_OK;
  }
  const char* out = run.output;
  /* The sandbox ran: its namespaces exist. The payload runs as pid 2 under
   * the helper. */
  proved |=
      MAELYS_BACKEND_CAP_USER_NAMESPACE | MAELYS_BACKEND_CAP_MOUNT_NAMESPACE;
  if (has_line(out, "pid=2"))
    proved |= MAELYS_BACKEND_CAP_PID_NAMESPACE;
  else
    maelys_backend_probe_missing(probe, MAELYS_BACKEND_CAP_PID_NAMESPACE,
                                 "the probe payload was not in a new pid "
                                 "namespace");
  bool seccomp = has_line(out, "seccomp=2");
  if (seccomp)
    proved |= MAELYS_BACKEND_CAP_SECCOMP;
  else
    maelys_backend_probe_missing(probe, MAELYS_BACKEND_CAP_SECCOMP,
                                 "the seccomp filter was not in force in the "
                                 "probe sandbox");
  bool netns = has_line(out, "only_loopback=yes");
  bool inet_denied = has_line(out, "inet=errno:1") && has_line(out, "unix=ok");
  if (netns)
    proved |= MAELYS_BACKEND_CAP_NETWORK_NAMESPACE;
  else
    maelys_backend_probe_missing(probe,
                                 MAELYS_BACKEND_CAP_NETWORK_NAMESPACE |
                                     MAELYS_BACKEND_CAP_NETWORK_NONE,
                                 "the probe sandbox saw a network interface "
                                 "other than loopback");
  /* Invariant 9: NONE needs both halves, proved. */
  if (netns && seccomp && inet_denied)
    proved |= MAELYS_BACKEND_CAP_NETWORK_NONE;
  else
    maelys_backend_probe_missing(probe, MAELYS_BACKEND_CAP_NETWORK_NONE,
                                 "an AF_INET socket was not refused with "
                                 "EPERM inside the probe sandbox (seccomp "
                                 "socket denial unproved); only the network "
                                 "namespace holds");
  if ((assumed & MAELYS_BACKEND_CAP_DISABLE_USERNS) &&
      !has_line(out, "userns=ok"))
    proved |= MAELYS_BACKEND_CAP_DISABLE_USERNS;
  else if (has_line(out, "userns=ok"))
    maelys_backend_probe_missing(probe, MAELYS_BACKEND_CAP_DISABLE_USERNS,
                                 "the probe sandbox could create a user "
                                 "namespace");
  /* write lines: /, rw, ro; read lines: file, secret. */
  const char* w = strstr(out, "write=");
  const char* w2 = w ? strstr(w + 1, "write=") : NULL;
  const char* w3 = w2 ? strstr(w2 + 1, "write=") : NULL;
  const char* r1 = strstr(out, "read=");
  const char* r2 = r1 ? strstr(r1 + 1, "read=") : NULL;
  bool root_ro = w && strncmp(w, "write=errno:30", 14) == 0;
  bool rw_ok = w2 && strncmp(w2, "write=ok", 8) == 0;
  bool ro_ro = w3 && strncmp(w3, "write=errno:30", 14) == 0;
  bool read_ok = r1 && strncmp(r1, "read=ok", 7) == 0;
  bool deny_ok = r2 && strncmp(r2, "read=errno:13", 13) == 0;
  if (root_ro)
    proved |= MAELYS_BACKEND_CAP_ROOT_READONLY;
  else
    maelys_backend_probe_missing(probe, MAELYS_BACKEND_CAP_ROOT_READONLY,
                                 "creating a file in the probe sandbox's / "
                                 "did not fail with EROFS");
  if (rw_ok)
    proved |= MAELYS_BACKEND_CAP_FILESYSTEM_WRITE;
  else
    maelys_backend_probe_missing(probe, MAELYS_BACKEND_CAP_FILESYSTEM_WRITE,
                                 "writing into a writable bind failed in the "
                                 "probe sandbox");
  if (read_ok && ro_ro)
    proved |= MAELYS_BACKEND_CAP_FILESYSTEM_READ;
  else
    maelys_backend_probe_missing(probe, MAELYS_BACKEND_CAP_FILESYSTEM_READ,
                                 "a read-only bind was not readable, or was "
                                 "writable, in the probe sandbox");
  if (deny_ok)
    proved |= MAELYS_BACKEND_CAP_FILESYSTEM_DENY;
  else
    maelys_backend_probe_missing(probe, MAELYS_BACKEND_CAP_FILESYSTEM_DENY,
                                 "a denied file was readable in the probe "
                                 "sandbox");
  long filled = -1;
  int fill_err = 0;
  const char* f = strstr(out, "fill=");
  if (f != NULL)
    sscanf(f, "fill=%ld:%d", &filled, &fill_err);
  if (filled >= 0 && filled <= 65536 && fill_err == ENOSPC)
    proved |= MAELYS_BACKEND_CAP_TMPFS_SIZE;
  else
    maelys_backend_probe_missing(probe, MAELYS_BACKEND_CAP_TMPFS_SIZE,
                                 "a 64 KiB tmpfs accepted more than 64 KiB");
  /* Invariant 8: after the forced stop, stdout reached end-of-file, so the
   * descendant that double-forked into its own session, which held it, was
   * gone too. */
  if (run.marker_seen && run.output_eof && !run.timed_out)
    proved |= MAELYS_BACKEND_CAP_PROCESS_TREE;
  else
    maelys_backend_probe_missing(probe, MAELYS_BACKEND_CAP_PROCESS_TREE,
                                 "a double-forked, setsid() descendant "
                                 "outlived the forced stop of the probe "
                                 "sandbox");
  /* Namespaces, seccomp and the mounts are inherited by every descendant. */
  if ((proved & MAELYS_BACKEND_CAP_SECCOMP) &&
      (proved & MAELYS_BACKEND_CAP_PID_NAMESPACE))
    proved |= MAELYS_BACKEND_CAP_PROCESS_CONFINEMENT;
  else
    maelys_backend_probe_missing(probe, MAELYS_BACKEND_CAP_PROCESS_CONFINEMENT,
                                 "seccomp or the pid namespace is unproved");
  bool no_caps = has_line(out, "caps=none");
  bool root_unprivileged = run.root_uid > 0 && run.root_has_caps == 0;
  if (no_caps && root_unprivileged)
    proved |= MAELYS_BACKEND_CAP_UNPRIVILEGED;
  else
    maelys_backend_probe_missing(probe, MAELYS_BACKEND_CAP_UNPRIVILEGED,
                                 no_caps ? "the sandbox's pid 1 ran as host "
                                           "uid 0 or held a capability"
                                         : "the probe payload held a "
                                           "capability");
  maelys__executor_probe_run_dispose(&run);

  /* The ephemeral-write root: writable, and bounded by its scratch size. */
  run = runs[1];
  filled = -1;
  fill_err = 0;
  f = run.output ? strstr(run.output, "fill=") : NULL;
  if (f != NULL)
    sscanf(f, "fill=%ld:%d", &filled, &fill_err);
  if (run.output && has_line(run.output, "write=ok") && filled >= 0 &&
      filled <= 131072 && fill_err == ENOSPC)
    proved |= MAELYS_BACKEND_CAP_ROOT_EPHEMERAL_WRITE;
  else {
    char* why = run.output && has_line(run.output, "write=ok")
                    ? maelys__executor_strdup(
                          "the ephemeral root accepted more than its scratch "
                          "size")
                    : run_failure(&run);
    maelys_backend_probe_missing(probe, MAELYS_BACKEND_CAP_ROOT_EPHEMERAL_WRITE,
                                 why);
    free(why);
  }
  maelys__executor_probe_run_dispose(&run);
  remove_probe_dirs(&dirs);

  maelys_backend_probe_missing(
      probe,
      MAELYS_BACKEND_CAP_NETWORK_MEDIATED_FD4 |
          MAELYS_BACKEND_CAP_NETWORK_MEDIATED_EGRESS,
      "the bubblewrap backend has no mediated network frontend; compose the "
      "egress adapter in the host");
  maelys_backend_probe_prove(probe, proved);
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
};

const maelys_backend_t* maelys_backend_bubblewrap(void) {
  return &bubblewrap_backend;
}
