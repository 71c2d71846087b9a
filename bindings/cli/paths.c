/*
 * Paths maelys-warden resolves, and the files that give a run its authority
 * (DESIGN invariant 18: authority never comes from where a sandbox writes).
 *
 * The threat: the payload of an earlier run could write anything a plan made
 * writable -- a symbolic link in a workspace, a plan file, a profile, the
 * helper in a build tree. So every path the user names is resolved without
 * following a symbolic link in any component (a link is refused, naming its
 * target, so that the user can pass the target if that is what they meant);
 * every file that defines authority is read from one descriptor after its
 * owner and mode, and those of every directory above it, were checked; and
 * no plan may make writable any of the files and directories that steer a
 * later run.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "maelys/backend.h"
#include "warden.h"

/* Walks `abs` (absolute, lexically normal) from /, one component at a time,
 * never following a symbolic link. Returns the descriptor (O_PATH) of the
 * whole path, or -1 with *missing set when a component does not exist (the
 * prefix that exists is in `existing`), or -1 after filling err. */
static int walk_nofollow(const char* option, const char* shown, const char* abs,
                         bool* missing, char* existing, size_t existing_size,
                         cli_error_t* err) {
  *missing = false;
  int dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0)
    return cli_fail(err, "IO_FAILED", NULL, "open /: %s", strerror(errno));
  snprintf(existing, existing_size, "/");
  char done[4096 + 255 + 2] = "";
  const char* p = abs;
  for (;;) {
    while (*p == '/')
      p++;
    if (*p == '\0')
      return dir;
    char name[NAME_MAX + 1];
    size_t n = strcspn(p, "/");
    if (n > NAME_MAX) {
      close(dir);
      return cli_fail(err, "VALIDATION_FAILED", NULL,
                      "%s '%s': a component is too long", option, shown);
    }
    memcpy(name, p, n);
    name[n] = '\0';
    p += n;
    char here[4096 + 255 + 2];
    snprintf(here, sizeof here, "%.4096s/%.255s", done, name);
    int next = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0 && errno == ENOENT) {
      close(dir);
      *missing = true;
      return -1;
    }
    if (next < 0) {
      int e = errno;
      close(dir);
      return cli_fail(err, e == EACCES ? "ACCESS_DENIED" : "IO_FAILED", NULL,
                      "%s '%s': %s: %s", option, shown, here, strerror(e));
    }
    struct stat st;
    if (fstat(next, &st) == 0 && S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      ssize_t t = readlinkat(dir, name, target, sizeof target - 1);
      target[t > 0 ? t : 0] = '\0';
      close(next);
      close(dir);
      return cli_fail(
          err, "ACCESS_DENIED",
          "A symbolic link may have been planted by an earlier run: name the "
          "target itself if that is what you mean.",
          "%s '%s': '%s' is a symbolic link to '%s'; paths are never resolved "
          "through a symbolic link (invariant 18)",
          option, shown, here, target);
    }
    close(dir);
    dir = next;
    snprintf(done, sizeof done, "%.4096s", here);
    snprintf(existing, existing_size, "%.4095s", here);
  }
}

int warden_user_path(const char* option, const char* path, bool must_exist,
                     char* out, struct stat* st, cli_error_t* err) {
  if (warden_absolute(path, out, PATH_MAX) != 0)
    return cli_fail(err, "VALIDATION_FAILED", NULL, "%s '%s': path too long",
                    option, path);
  bool missing = false;
  char existing[PATH_MAX];
  int fd = walk_nofollow(option, path, out, &missing, existing, sizeof existing,
                         err);
  if (fd < 0 && !missing)
    return -1;
  if (fd < 0) {
    if (must_exist)
      return cli_fail(err, "NOT_FOUND", "Check the path.", "%s '%s': %s",
                      option, path, strerror(ENOENT));
    memset(st, 0, sizeof *st);
    return 0;
  }
  int r = fstat(fd, st);
  close(fd);
  if (r != 0)
    return cli_fail(err, "IO_FAILED", NULL, "%s '%s': %s", option, path,
                    strerror(errno));
  return 0;
}

int warden_workspace_path(const char* given, char* out, struct stat* st,
                          cli_error_t* err) {
  if (given != NULL) {
    if (warden_user_path("--workspace", given, true, out, st, err) != 0)
      return -1;
  } else {
    /* The physical working directory: getcwd never names a link. */
    if (getcwd(out, PATH_MAX) == NULL)
      return cli_fail(err, "IO_FAILED", "Give --workspace DIR.",
                      "the working directory: %s", strerror(errno));
    /* A shell that went `cd sub/build` with sub/build a link to /etc says
     * PWD=.../sub/build while the physical directory is /etc: the user
     * believes they are somewhere else, so refuse rather than guess. A PWD
     * that names another directory entirely (a stale one, as MCP clients
     * pass on) is ignored. */
    const char* pwd = getenv("PWD");
    char resolved[PATH_MAX];
    if (pwd != NULL && pwd[0] == '/' && strcmp(pwd, out) != 0 &&
        realpath(pwd, resolved) != NULL && strcmp(resolved, out) == 0)
      return cli_fail(
          err, "ACCESS_DENIED",
          "Give --workspace with the directory you mean (the physical one, "
          "if that is it).",
          "the working directory was reached through a symbolic link ($PWD "
          "is '%s', which is '%s'): refused unless --workspace is given "
          "(invariant 18)",
          pwd, out);
    if (warden_user_path("the working directory", out, true, out, st, err) != 0)
      return -1;
  }
  if (!S_ISDIR(st->st_mode))
    return cli_fail(err, "VALIDATION_FAILED", NULL,
                    "--workspace '%s' is not a directory", out);
  return 0;
}

/* A directory above an authority file: owned by this user or root, and
 * writable by nobody else unless it is sticky (nobody can then rename what
 * another user put in it, as OpenSSH judges /tmp). */
static bool dir_trusted(const struct stat* st) {
  bool owner = st->st_uid == 0 || st->st_uid == geteuid();
  bool shared = (st->st_mode & (S_IWGRP | S_IWOTH)) != 0;
  return owner && (!shared || (st->st_mode & S_ISVTX) != 0);
}

int warden_read_authority(const char* option, const char* path, size_t max,
                          char** out_data, size_t* out_len, char* out_path,
                          cli_error_t* err) {
  *out_data = NULL;
  *out_len = 0;
  struct stat st;
  if (warden_user_path(option, path, true, out_path, &st, err) != 0 ||
      warden_written_check(option, out_path,
                           "what defines a run's authority (a plan, policy, "
                           "profile or spec) is never read from there",
                           err) != 0)
    return -1;
  int fd = open(out_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return cli_fail(err, errno == EACCES ? "IO_FAILED" : "IO_FAILED",
                    "Give a readable file.", "%s '%s': %s", option, path,
                    strerror(errno));
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return cli_fail(err, "VALIDATION_FAILED", NULL,
                    "%s '%s' is not a regular file", option, path);
  }
  if ((st.st_uid != 0 && st.st_uid != geteuid()) ||
      (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    close(fd);
    return cli_fail(
        err, "ACCESS_DENIED",
        "Keep files that define a run's authority private: yours (or "
        "root's) and writable only by their owner.",
        "%s '%s' is owned by uid %u with mode %04o: it defines what a sandbox "
        "may do, so it must belong to you or root and be writable by nobody "
        "else (invariant 18)",
        option, path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
  }
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", out_path);
  for (char* slash = strrchr(dir, '/'); slash != NULL;
       slash = strrchr(dir, '/')) {
    if (slash == dir)
      slash[1] = '\0';
    else
      *slash = '\0';
    struct stat ds;
    if (lstat(dir, &ds) != 0 || !dir_trusted(&ds)) {
      close(fd);
      return cli_fail(
          err, "ACCESS_DENIED",
          "Move the file to a directory only you (or root) can write.",
          "%s '%s' lies in '%s' (owner uid %u, mode %04o), which another user "
          "could change: refused (invariant 18)",
          option, path, dir, (unsigned)ds.st_uid,
          (unsigned)(ds.st_mode & 07777));
    }
    if (strcmp(dir, "/") == 0)
      break;
  }
  if ((size_t)st.st_size > max) {
    close(fd);
    return cli_fail(err, "PROTOCOL_FAILED", NULL,
                    "%s '%s' is larger than %zu bytes", option, path, max);
  }
  char* data = malloc((size_t)st.st_size + 1);
  size_t len = 0;
  while (data != NULL && len <= (size_t)st.st_size) {
    ssize_t n = read(fd, data + len, (size_t)st.st_size + 1 - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    len += (size_t)n;
  }
  close(fd);
  if (data == NULL)
    return cli_fail(err, "UNEXPECTED", NULL, "out of memory");
  if (len != (size_t)st.st_size) {
    free(data);
    return cli_fail(err, "IO_FAILED", NULL, "%s '%s' changed while it was read",
                    option, path);
  }
  data[len] = '\0';
  *out_data = data;
  *out_len = len;
  return 0;
}

/* ------------------------------------------------------------ protected */

void warden_protect(warden_protected_t* list, const char* label,
                    const char* path) {
  if (path == NULL || path[0] != '/' ||
      list->count >= sizeof list->items / sizeof list->items[0])
    return;
  warden_protected_item_t* it = &list->items[list->count++];
  snprintf(it->label, sizeof it->label, "%s", label);
  if (warden_absolute(path, it->path, sizeof it->path) != 0)
    list->count--;
}

/* `label` at BASE/SUFFIX when the environment variable `base` holds an
 * absolute path. */
static void protect_under(warden_protected_t* list, const char* label,
                          const char* base, const char* suffix) {
  const char* dir = getenv(base);
  char path[PATH_MAX];
  if (dir != NULL && dir[0] == '/') {
    snprintf(path, sizeof path, "%.4000s/%s", dir, suffix);
    warden_protect(list, label, path);
  }
}

void warden_protect_defaults(warden_protected_t* list, const char* state_dir,
                             const char* helper) {
  protect_under(list, "the configuration directory", "XDG_CONFIG_HOME",
                "maelys");
  protect_under(list, "the configuration directory", "HOME", ".config/maelys");
  warden_protect(list, "the state directory (receipts, signing key)",
                 state_dir);
  /* The default state directories too, whichever this run uses: a run with
   * --state-dir elsewhere must not make the default one writable, where a
   * later run's proofs, record of writable paths and signing key live (an
   * adversarial review planted a proof that way). */
  protect_under(list, "the default state directory", "XDG_STATE_HOME",
                "maelys");
  protect_under(list, "the default state directory", "HOME",
                ".local/state/maelys");
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    warden_protect(list, "the maelys-warden program", exe);
  }
  Dl_info info;
  char lib[PATH_MAX];
  if (dladdr((void*)maelys_executor_version, &info) != 0 &&
      info.dli_fname != NULL && realpath(info.dli_fname, lib) != NULL)
    warden_protect(list, "the Maelys Executor library", lib);
  warden_protect(list, "the sandbox helper", helper);
}

/* Whether the existing writable path `w` (its descriptor) is `item` or one
 * of its existing ancestors, by identity. */
static bool covers_by_identity(int w, const char* item) {
  struct stat ws;
  if (fstat(w, &ws) != 0)
    return false;
  char probe[PATH_MAX];
  snprintf(probe, sizeof probe, "%s", item);
  /* The item, or else its nearest existing ancestor. */
  for (;;) {
    struct stat st;
    if (lstat(probe, &st) == 0)
      break;
    char* slash = strrchr(probe, '/');
    if (slash == NULL || slash == probe) {
      snprintf(probe, sizeof probe, "/");
      break;
    }
    *slash = '\0';
  }
  int fd = open(probe, O_PATH | O_CLOEXEC);
  for (int depth = 0; fd >= 0 && depth < 256; depth++) {
    struct stat st;
    if (fstat(fd, &st) != 0)
      break;
    if (st.st_dev == ws.st_dev && st.st_ino == ws.st_ino) {
      close(fd);
      return true;
    }
    int parent = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat ps;
    bool top = parent < 0 || fstat(parent, &ps) != 0 ||
               (ps.st_dev == st.st_dev && ps.st_ino == st.st_ino);
    close(fd);
    fd = top ? -1 : parent;
    if (top && parent >= 0)
      close(parent);
  }
  if (fd >= 0)
    close(fd);
  return false;
}

static bool path_within(const char* path, const char* base) {
  size_t n = strlen(base);
  if (n == 1)
    return true;
  return strncmp(path, base, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

int warden_check_protected(const maelys_executor_plan_t* plan,
                           const warden_protected_t* list, cli_error_t* err) {
  size_t mounts = maelys_executor_plan_mount_count(plan);
  size_t rules = maelys_executor_plan_rule_count(plan);
  for (size_t i = 0; i < mounts + rules; i++) {
    const char* w = NULL;
    if (i < mounts) {
      maelys_executor_mount_view_t m;
      if (maelys_executor_plan_mount_get(plan, i, &m) == 0 &&
          m.kind == MAELYS_EXECUTOR_MOUNT_BIND)
        w = m.source;
    } else {
      maelys_executor_rule_view_t r;
      if (maelys_executor_plan_rule_get(plan, i - mounts, &r) == 0 &&
          r.access == MAELYS_EXECUTOR_ACCESS_WRITE)
        w = r.path;
    }
    if (w == NULL)
      continue;
    int wfd = open(w, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    for (size_t k = 0; k < list->count; k++) {
      const warden_protected_item_t* it = &list->items[k];
      if (path_within(it->path, w) ||
          (wfd >= 0 && covers_by_identity(wfd, it->path))) {
        if (wfd >= 0)
          close(wfd);
        return cli_fail(
            err, "ACCESS_DENIED",
            "Choose a workspace and writable paths that hold none of "
            "maelys-warden's own files.",
            "'%s' would be writable, but it holds %s ('%s'): a payload could "
            "change what steers a later run (invariant 18)",
            w, it->label, it->path);
      }
    }
    if (wfd >= 0)
      close(wfd);
  }
  return 0;
}
