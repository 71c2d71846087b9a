/*
 * What a writable workspace keeps from its own payload: see protect.h.
 *
 * Kernel behaviour this relies on, each checked by tests/cli/test_protect.py:
 *
 *  - A mount point cannot be renamed, removed or replaced from the mount
 *    namespace that holds the mount (EBUSY), whatever the permissions of its
 *    directory: `mv .git .g` fails once .git is bound over itself, although
 *    renaming an ancestor of a mount point within the same mount is allowed
 *    (which is why .git itself is pinned, not only .git/hooks and config).
 *  - A read-only bind refuses writes (EROFS) and creation inside it.
 *  - bubblewrap creates a missing mount point in the sandbox's view, which
 *    for a path inside a writable bind is the host's directory, and never
 *    removes it. So a reserved name is created here, by the warden, as an
 *    empty read-only placeholder, and removed after the run.
 *  - The other way round, a rename or unlink of a mount point's path done on
 *    the HOST (outside the sandbox's mount namespace) succeeds and silently
 *    detaches the sandbox's mount on it (Linux 3.18, "lazily remove mounts on
 *    unlinked files"): a host-side `git config ...` during the run rewrites
 *    .git/config by rename, and from then on the sandbox sees the new file
 *    through the writable .git. No mount can stop that, so the audit after
 *    the run reports every protected path whose identity changed.
 *
 * Placeholders. Several runs may share a workspace, and removing a
 * placeholder another run still has mounted would detach that run's mount
 * (see above), so each run holds a shared flock on every placeholder it
 * uses, and a run removes one only when it can take the lock exclusively.
 * A warden killed before removing its placeholders leaves empty read-only
 * directories (or empty files) that git ignores; the next run that uses the
 * workspace recognises them (empty, mode 0555 or 0444) and removes them.
 *
 * The workspace is hostile (invariant 18): every path here is walked without
 * following a symbolic link, and a `gitdir:` file is only followed where it
 * stays inside the workspace, through no link.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "maelys/backend.h"
#include "protect.h"
#include "warden.h"

#define PLACEHOLDER_DIR_MODE 0555
#define PLACEHOLDER_FILE_MODE 0444
/* Bounds of the scans: git directories below .git/modules and .git/worktrees,
 * secrets, the directories the secret scan reads and how deep it goes. */
#define MAX_ITEMS 512
/* Each protection that is not a denial is a bind the bubblewrap backend
 * stages when the host is root (its launcher takes at most 64), so those are
 * kept well below that. */
#define MAX_BINDS 48
#define MAX_GIT_DIRS 12
#define MAX_SCANNED_DIRS 20000
#define SECRET_DEPTH 4

/* --------------------------------------------------------------- paths */

static bool within(const char* path, const char* base) {
  size_t n = strlen(base);
  if (n == 1)
    return true;
  return strncmp(path, base, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static char* join(const char* dir, const char* name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char* s = malloc(n);
  if (s != NULL)
    snprintf(s, n, "%s%s%s", dir, strcmp(dir, "/") == 0 ? "" : "/", name);
  return s;
}

static const char* base_name(const char* path) {
  const char* slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* An O_PATH descriptor of `abs` (absolute, lexically normal) reached without
 * following a symbolic link in any component but the last, which is opened
 * as it is (a link stays a link). -errno on failure (-ELOOP: a directory on
 * the way is a link). */
static int walk(const char* abs) {
  int dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0)
    return -errno;
  const char* p = abs;
  for (;;) {
    while (*p == '/')
      p++;
    if (*p == '\0')
      return dir;
    size_t n = strcspn(p, "/");
    char name[NAME_MAX + 1];
    if (n > NAME_MAX) {
      close(dir);
      return -ENAMETOOLONG;
    }
    memcpy(name, p, n);
    name[n] = '\0';
    p += n;
    bool last = strspn(p, "/") == strlen(p);
    int next = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    close(dir);
    if (next < 0)
      return -e;
    struct stat st = {0};
    if (!last && (fstat(next, &st) != 0 || !S_ISDIR(st.st_mode))) {
      bool link = S_ISLNK(st.st_mode);
      close(next);
      return link ? -ELOOP : -ENOTDIR;
    }
    dir = next;
  }
}

/* lstat through `walk`: 0, or -errno. */
static int lstat_walk(const char* abs, struct stat* st) {
  int fd = walk(abs);
  if (fd < 0)
    return fd;
  int r = fstat(fd, st) == 0 ? 0 : -errno;
  close(fd);
  return r;
}

/* The directory holding `abs`, opened through `walk`, and the last name. */
static int open_parent(const char* abs, char* name, size_t size) {
  char parent[PATH_MAX];
  snprintf(parent, sizeof parent, "%s", abs);
  char* slash = strrchr(parent, '/');
  if (slash == NULL || slash[1] == '\0')
    return -EINVAL;
  snprintf(name, size, "%s", slash + 1);
  if (slash == parent)
    slash[1] = '\0';
  else
    *slash = '\0';
  int fd = walk(parent);
  if (fd < 0)
    return fd;
  /* An O_PATH descriptor serves *at() calls; a directory is needed. */
  int dir = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int e = errno;
  close(fd);
  return dir >= 0 ? dir : -e;
}

static bool dir_is_empty(int dirfd, const char* name) {
  int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return false;
  DIR* d = fdopendir(fd);
  if (d == NULL) {
    close(fd);
    return false;
  }
  bool empty = true;
  for (struct dirent* e; empty && (e = readdir(d)) != NULL;)
    empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
  closedir(d);
  return empty;
}

/* A placeholder this program made (now or in a run that was killed before
 * removing it): empty, with the placeholder's mode. */
bool warden_protect_is_placeholder(const char* abs, const struct stat* st) {
  if (S_ISREG(st->st_mode))
    return (st->st_mode & 07777) == PLACEHOLDER_FILE_MODE && st->st_size == 0;
  if (!S_ISDIR(st->st_mode) || (st->st_mode & 07777) != PLACEHOLDER_DIR_MODE)
    return false;
  char name[NAME_MAX + 1];
  int parent = open_parent(abs, name, sizeof name);
  if (parent < 0)
    return false;
  bool empty = dir_is_empty(parent, name);
  close(parent);
  return empty;
}

/* --------------------------------------------------------------- items */

void warden_protection_free(warden_protection_t* p) {
  warden_protect_release(p);
  for (size_t i = 0; i < p->count; i++)
    free(p->items[i].path);
  free(p->items);
  for (size_t i = 0; i < p->unprotected_count; i++)
    free(p->unprotected[i]);
  free(p->unprotected);
  free(p->unprotect_used);
  for (size_t i = 0; i < p->watch_count; i++)
    free(p->watches[i].path);
  free(p->watches);
  free(p->held);
  free(p->devs);
  free(p->inos);
  free(p->nested_root);
  memset(p, 0, sizeof *p);
}

static int oom(cli_error_t* err) {
  return cli_fail(err, "UNEXPECTED", NULL, "out of memory");
}

/* Whether an --unprotect names `path` (or a directory above it); marks it
 * used. */
static bool unprotected(warden_protection_t* p, const char* path) {
  bool hit = false;
  for (size_t i = 0; i < p->unprotected_count; i++)
    if (within(path, p->unprotected[i])) {
      p->unprotect_used[i] = true;
      hit = true;
    }
  return hit;
}

static const warden_protect_item_t* find_item(const warden_protection_t* p,
                                              const char* path) {
  for (size_t i = 0; i < p->count; i++)
    if (strcmp(p->items[i].path, path) == 0)
      return &p->items[i];
  return NULL;
}

static int add_item(warden_protection_t* p, const char* path,
                    warden_protect_kind_t kind, bool is_dir, const char* why,
                    cli_error_t* err) {
  if (find_item(p, path) != NULL || unprotected(p, path))
    return 0;
  size_t binds = 0;
  for (size_t i = 0; i < p->count; i++)
    binds += p->items[i].kind != WARDEN_PROTECT_DENIED;
  if (kind != WARDEN_PROTECT_DENIED && binds >= MAX_BINDS)
    return cli_fail(err, "POLICY_FAILED",
                    "Pass --unprotect for the directories that hold most of "
                    "them (.git/modules, .git/worktrees), or a plan file "
                    "(--plan) that says exactly what to protect.",
                    "the workspace needs more than %d protected paths (git "
                    "directories, hooks, configurations)",
                    MAX_BINDS);
  if (p->count >= MAX_ITEMS)
    return cli_fail(err, "POLICY_FAILED",
                    "Pass --unprotect for the directories that hold most of "
                    "them, or a plan file (--plan) that says exactly what to "
                    "protect.",
                    "the workspace needs more than %d protections", MAX_ITEMS);
  if (p->count == p->capacity) {
    size_t cap = p->capacity ? p->capacity * 2 : 16;
    warden_protect_item_t* items = realloc(p->items, cap * sizeof *items);
    if (items == NULL)
      return oom(err);
    p->items = items;
    p->capacity = cap;
  }
  char* copy = strdup(path);
  if (copy == NULL)
    return oom(err);
  p->items[p->count++] = (warden_protect_item_t){copy, kind, is_dir, why};
  return 0;
}

static int add_watch(warden_protection_t* p, const char* path, const char* why,
                     cli_error_t* err) {
  if (unprotected(p, path))
    return 0;
  for (size_t i = 0; i < p->watch_count; i++)
    if (strcmp(p->watches[i].path, path) == 0)
      return 0;
  if (p->watch_count == p->watch_capacity) {
    size_t cap = p->watch_capacity ? p->watch_capacity * 2 : 8;
    warden_protect_watch_t* w = realloc(p->watches, cap * sizeof *w);
    if (w == NULL)
      return oom(err);
    p->watches = w;
    p->watch_capacity = cap;
  }
  char* copy = strdup(path);
  if (copy == NULL)
    return oom(err);
  p->watches[p->watch_count++] = (warden_protect_watch_t){copy, why};
  return 0;
}

/* An absent name is reserved only where this user could create it: where
 * the user cannot, neither can the payload (it never has more rights on a
 * host directory than the user who started it), and a placeholder could
 * not be made anyway. */
static int add_reserved(warden_protection_t* p, const char* path, bool is_dir,
                        const char* why, cli_error_t* err) {
  char parent[PATH_MAX];
  snprintf(parent, sizeof parent, "%s", path);
  char* slash = strrchr(parent, '/');
  if (slash != NULL && slash != parent)
    *slash = '\0';
  if (faccessat(AT_FDCWD, parent, W_OK | X_OK, AT_EACCESS) != 0)
    return 0;
  return add_item(p, path, WARDEN_PROTECT_RESERVED, is_dir, why, err);
}

static const char* const why_git_reserved =
    "no repository existed: the payload must not create one for the host's "
    "git to use";
static const char* const why_git_pinned =
    "git's directory: a mount point, so it cannot be moved aside and replaced";
static const char* const why_git_file =
    "a gitdir: file tells the host's git where the repository is";
static const char* const why_hooks = "git runs these programs on the host";
static const char* const why_config =
    "git's configuration names programs the host runs (core.fsmonitor, "
    "core.hooksPath, aliases, filters)";
static const char* const why_commondir =
    "redirects git to another directory's configuration and hooks";
static const char* const why_git_subdir =
    "a git directory below .git (a submodule or linked worktree): a mount "
    "point, so it cannot be replaced";
static const char* const why_maelys = "maelys-warden's project files";
/* Why a watched name matters, as a clause. */
static const char* const why_watch_commondir =
    "it would redirect git to another directory's configuration and hooks";
static const char* const why_watch_config =
    "it would add to git's configuration";
static const char* const why_secret =
    "a well-known secret, and the network is inherited";
static const char* const why_plan = "a rule of the plan";

/* Why `path` is protected, for a plan read from a file. */
static const char* why_by_name(const char* path, warden_protect_kind_t kind) {
  const char* name = base_name(path);
  if (kind == WARDEN_PROTECT_DENIED)
    return why_secret;
  if (strcmp(name, ".git") == 0)
    return kind == WARDEN_PROTECT_RESERVED ? why_git_reserved
           : kind == WARDEN_PROTECT_PINNED ? why_git_pinned
                                           : why_git_file;
  if (strcmp(name, "hooks") == 0)
    return why_hooks;
  if (strcmp(name, "config") == 0 || strcmp(name, "config.worktree") == 0)
    return why_config;
  if (strcmp(name, "commondir") == 0)
    return why_commondir;
  if (strcmp(name, ".maelys") == 0)
    return why_maelys;
  return why_plan;
}

/* Names a reserved placeholder may hold, and as what. */
static bool reservable(const char* path, bool is_dir) {
  const char* name = base_name(path);
  if (is_dir)
    return strcmp(name, ".git") == 0 || strcmp(name, ".maelys") == 0 ||
           strcmp(name, "hooks") == 0;
  return strcmp(name, "config") == 0 || strcmp(name, "config.worktree") == 0;
}

static int refuse_link(warden_protection_t* p, const char* root,
                       const char* path, const char* what, cli_error_t* err) {
  if (unprotected(p, path))
    return 0;
  char hint[512];
  const char* rel = path + strlen(root);
  while (*rel == '/')
    rel++;
  snprintf(hint, sizeof hint,
           "Replace the link with what it names, or pass --unprotect %s to "
           "run without this protection.",
           rel);
  return cli_fail(err, "ACCESS_DENIED", hint,
                  "'%s' is %s: the payload could replace it (a mount cannot "
                  "hold a symbolic link in place), so the writable workspace "
                  "is refused with it",
                  path, what);
}

/* -------------------------------------------------------------- git */

typedef struct scan {
  warden_protection_t* p;
  const char* root;
  size_t git_dirs;
  cli_error_t* err;
} scan_t;

static int protect_git_dir(scan_t* s, const char* dir, const char* why);

/* Follows the text of a `gitdir:` or `commondir` file, relative to `base`,
 * the way git would, but only through directories inside the workspace and
 * through no symbolic link: `out` receives the directory. 1 when it names
 * an existing directory inside the workspace, 0 when it leads outside the
 * workspace or to nothing (nothing there for the sandbox to write), -1 after
 * filling err. */
static int follow_pointer(scan_t* s, const char* file, const char* base,
                          const char* text, char* out, size_t size) {
  char cur[PATH_MAX];
  if (text[0] == '/')
    snprintf(cur, sizeof cur, "/");
  else
    snprintf(cur, sizeof cur, "%s", base);
  char copy[PATH_MAX];
  snprintf(copy, sizeof copy, "%s", text);
  for (char *save = NULL, *c = strtok_r(copy, "/", &save); c != NULL;
       c = strtok_r(NULL, "/", &save)) {
    if (strcmp(c, ".") == 0)
      continue;
    if (strcmp(c, "..") == 0) {
      char* slash = strrchr(cur, '/');
      if (slash == cur)
        cur[1] = '\0';
      else if (slash != NULL)
        *slash = '\0';
      continue;
    }
    size_t len = strlen(cur);
    if (len + strlen(c) + 2 >= sizeof cur)
      return 0;
    snprintf(cur + len, sizeof cur - len, "%s%s", len > 1 ? "/" : "", c);
    struct stat st;
    int r = lstat_walk(cur, &st);
    if (r == -ENOENT || r == -ENOTDIR)
      return 0;
    if (r == -ELOOP || (r == 0 && S_ISLNK(st.st_mode))) {
      if (!within(cur, s->root))
        return 0; /* outside the workspace: the sandbox cannot write there */
      return cli_fail(s->err, "ACCESS_DENIED",
                      "Point the file at the directory itself, or pass "
                      "--unprotect for it.",
                      "'%s' leads through the symbolic link '%s': git would "
                      "follow it, so it cannot be protected",
                      file, cur);
    }
    if (r != 0)
      return 0;
  }
  struct stat st;
  if (!within(cur, s->root) || lstat_walk(cur, &st) != 0 ||
      !S_ISDIR(st.st_mode))
    return 0;
  snprintf(out, size, "%s", cur);
  return 1;
}

/* Opens the regular file `abs` for reading through `walk` (no link in any
 * component, the file itself included). -1 when that fails. */
static int open_regular(const char* abs) {
  char name[NAME_MAX + 1];
  int parent = open_parent(abs, name, sizeof name);
  if (parent < 0)
    return -1;
  int fd = openat(parent, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  close(parent);
  struct stat st;
  if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    close(fd);
    fd = -1;
  }
  return fd;
}

/* The first line of a small regular file, after `prefix` (when not NULL),
 * trimmed; "" when absent or malformed. */
static void first_line(const char* path, const char* prefix, char* out,
                       size_t size) {
  out[0] = '\0';
  int fd = open_regular(path);
  if (fd < 0)
    return;
  char buf[PATH_MAX + 64];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return;
  buf[n] = '\0';
  buf[strcspn(buf, "\r\n")] = '\0';
  const char* v = buf;
  if (prefix != NULL) {
    if (strncmp(v, prefix, strlen(prefix)) != 0)
      return;
    v += strlen(prefix);
  }
  while (*v == ' ' || *v == '\t')
    v++;
  size_t len = strlen(v);
  if (len >= size)
    return; /* longer than any path: git could not follow it either */
  memcpy(out, v, len + 1);
  while (len > 0 && (out[len - 1] == ' ' || out[len - 1] == '\t'))
    out[--len] = '\0';
}

/* Whether the configuration file mentions worktreeConfig (then git reads
 * config.worktree too). Case-insensitive, anywhere in its first MiB: a false
 * positive only reserves an empty file. */
static bool mentions_worktree_config(const char* config) {
  int fd = open_regular(config);
  if (fd < 0)
    return false;
  size_t size = 1u << 20;
  char* buf = malloc(size + 1);
  ssize_t n = buf != NULL ? read(fd, buf, size) : -1;
  close(fd);
  bool found = false;
  if (n > 0) {
    for (ssize_t i = 0; i < n; i++)
      if (buf[i] == '\0')
        buf[i] = ' ';
    buf[n] = '\0';
    found = strcasestr(buf, "worktreeconfig") != NULL;
  }
  free(buf);
  return found;
}

/* One file of a git directory that git reads as instructions: read-only
 * when it exists; reserved (an empty file) or watched when it does not. */
static int git_file(scan_t* s, const char* dir, const char* name,
                    const char* why, bool reserve, bool watch) {
  char* path = join(dir, name);
  if (path == NULL)
    return oom(s->err);
  struct stat st;
  int r = lstat_walk(path, &st), rc = 0;
  if (r == 0 && S_ISREG(st.st_mode))
    rc = add_item(s->p, path,
                  warden_protect_is_placeholder(path, &st)
                      ? WARDEN_PROTECT_RESERVED
                      : WARDEN_PROTECT_READ_ONLY,
                  false, why, s->err);
  else if (r == 0 && S_ISLNK(st.st_mode))
    rc = refuse_link(s->p, s->root, path, "a symbolic link", s->err);
  else if (r == 0 && !unprotected(s->p, path))
    rc = cli_fail(s->err, "ACCESS_DENIED", NULL,
                  "'%s' is not a regular file: git's file cannot be protected",
                  path);
  else if (r == -ENOENT && reserve)
    rc = add_reserved(s->p, path, false, why, s->err);
  else if (r == -ENOENT && watch)
    rc = add_watch(s->p, path,
                   strcmp(name, "commondir") == 0 ? why_watch_commondir
                                                  : why_watch_config,
                   s->err);
  free(path);
  return rc;
}

/* Git directories below `dir` (submodules' in .git/modules, nested by
 * name): each directory that holds a HEAD file. */
static int git_dirs_below(scan_t* s, const char* dir, int depth) {
  if (depth > 8 || unprotected(s->p, dir))
    return 0;
  int fd = walk(dir);
  if (fd < 0)
    return 0;
  int d = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  close(fd);
  DIR* dp = d >= 0 ? fdopendir(d) : NULL;
  if (dp == NULL) {
    if (d >= 0)
      close(d);
    return 0;
  }
  int rc = 0;
  for (struct dirent* e; rc == 0 && (e = readdir(dp)) != NULL;) {
    if (e->d_name[0] == '.' &&
        (e->d_name[1] == '\0' || strcmp(e->d_name, "..") == 0))
      continue;
    struct stat st, head;
    if (fstatat(dirfd(dp), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISDIR(st.st_mode))
      continue;
    char* sub = join(dir, e->d_name);
    char* head_path = sub ? join(sub, "HEAD") : NULL;
    if (head_path == NULL) {
      free(sub);
      rc = oom(s->err);
      break;
    }
    if (lstat_walk(head_path, &head) == 0 && S_ISREG(head.st_mode))
      rc = protect_git_dir(s, sub, why_git_subdir);
    else
      rc = git_dirs_below(s, sub, depth + 1);
    free(head_path);
    free(sub);
  }
  closedir(dp);
  return rc;
}

/* A linked worktree's administrative directory: pinned, and the files that
 * redirect git read-only (its hooks and configuration are the common
 * directory's). */
static int worktrees(scan_t* s, const char* git_dir) {
  char* dir = join(git_dir, "worktrees");
  if (dir == NULL)
    return oom(s->err);
  if (unprotected(s->p, dir)) {
    free(dir);
    return 0;
  }
  int fd = walk(dir);
  int d = fd >= 0 ? openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  if (fd >= 0)
    close(fd);
  DIR* dp = d >= 0 ? fdopendir(d) : NULL;
  int rc = 0;
  if (dp == NULL && d >= 0)
    close(d);
  for (struct dirent* e; dp != NULL && rc == 0 && (e = readdir(dp)) != NULL;) {
    struct stat st;
    if (e->d_name[0] == '.' ||
        fstatat(dirfd(dp), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISDIR(st.st_mode))
      continue;
    char* wt = join(dir, e->d_name);
    if (wt == NULL) {
      rc = oom(s->err);
      break;
    }
    if (++s->git_dirs > MAX_GIT_DIRS)
      rc = cli_fail(s->err, "POLICY_FAILED",
                    "Pass --unprotect .git/worktrees (or .git/modules).",
                    "more than %d git directories to protect below '%s'",
                    MAX_GIT_DIRS, git_dir);
    if (rc == 0)
      rc = add_item(s->p, wt, WARDEN_PROTECT_PINNED, true, why_git_subdir,
                    s->err);
    if (rc == 0)
      rc = git_file(s, wt, "commondir", why_commondir, false, false);
    if (rc == 0)
      rc = git_file(s, wt, "config.worktree", why_config, false, true);
    free(wt);
  }
  if (dp != NULL)
    closedir(dp);
  free(dir);
  return rc;
}

static int protect_git_dir(scan_t* s, const char* dir, const char* why) {
  if (find_item(s->p, dir) != NULL || unprotected(s->p, dir))
    return 0;
  if (++s->git_dirs > MAX_GIT_DIRS)
    return cli_fail(s->err, "POLICY_FAILED",
                    "Pass --unprotect .git/modules (the submodules' git "
                    "directories).",
                    "more than %d git directories to protect below '%s'",
                    MAX_GIT_DIRS, s->root);
  /* The workspace itself (a `gitdir: .`) is already its own mount point. */
  int rc = strcmp(dir, s->root) == 0
               ? 0
               : add_item(s->p, dir, WARDEN_PROTECT_PINNED, true, why, s->err);
  char* hooks = join(dir, "hooks");
  char* config = join(dir, "config");
  if (hooks == NULL || config == NULL) {
    free(hooks);
    free(config);
    return oom(s->err);
  }
  struct stat st;
  int r = lstat_walk(hooks, &st);
  if (rc == 0 && r == 0 && S_ISDIR(st.st_mode))
    rc = add_item(s->p, hooks,
                  warden_protect_is_placeholder(hooks, &st)
                      ? WARDEN_PROTECT_RESERVED
                      : WARDEN_PROTECT_READ_ONLY,
                  true, why_hooks, s->err);
  else if (rc == 0 && r == 0)
    rc = refuse_link(
        s->p, s->root, hooks,
        S_ISLNK(st.st_mode) ? "a symbolic link" : "not a directory", s->err);
  else if (rc == 0 && r == -ENOENT)
    rc = add_reserved(s->p, hooks, true, why_hooks, s->err);
  bool worktree_config = mentions_worktree_config(config);
  free(hooks);
  free(config);
  if (rc == 0)
    rc = git_file(s, dir, "config", why_config, true, false);
  if (rc == 0)
    rc = git_file(s, dir, "config.worktree", why_config, worktree_config,
                  !worktree_config);
  /* commondir: a file that names another directory whose configuration and
   * hooks git uses instead. An empty placeholder would make git fail ("failed
   * to read commondir") for every host process using the repository during
   * the run, so an absent one is watched, and one that exists is read-only
   * and its target (inside the workspace) protected like this directory. */
  if (rc == 0)
    rc = git_file(s, dir, "commondir", why_commondir, false, true);
  char* commondir = join(dir, "commondir");
  char text[PATH_MAX], target[PATH_MAX];
  if (commondir == NULL)
    return oom(s->err);
  first_line(commondir, NULL, text, sizeof text);
  if (rc == 0 && text[0] != '\0') {
    int f = follow_pointer(s, commondir, dir, text, target, sizeof target);
    if (f < 0)
      rc = -1;
    else if (f == 1)
      rc = protect_git_dir(s, target, why_commondir);
  }
  free(commondir);
  char* modules = join(dir, "modules");
  if (modules == NULL)
    return oom(s->err);
  if (rc == 0)
    rc = git_dirs_below(s, modules, 0);
  free(modules);
  if (rc == 0)
    rc = worktrees(s, dir);
  return rc;
}

static int scan_git(scan_t* s) {
  char* maelys = join(s->root, ".maelys");
  char* git = join(s->root, ".git");
  if (maelys == NULL || git == NULL) {
    free(maelys);
    free(git);
    return oom(s->err);
  }
  struct stat st;
  int rc = 0, r = lstat_walk(maelys, &st);
  if (r == -ENOENT)
    rc = add_reserved(s->p, maelys, true, why_maelys, s->err);
  else if (r == 0 && (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)))
    rc = add_item(s->p, maelys,
                  warden_protect_is_placeholder(maelys, &st)
                      ? WARDEN_PROTECT_RESERVED
                      : WARDEN_PROTECT_READ_ONLY,
                  S_ISDIR(st.st_mode), why_maelys, s->err);
  else if (r == 0)
    rc = refuse_link(s->p, s->root, maelys,
                     S_ISLNK(st.st_mode) ? "a symbolic link"
                                         : "neither a file nor a directory",
                     s->err);
  if (rc == 0) {
    r = lstat_walk(git, &st);
    if (r == -ENOENT) {
      rc = add_reserved(s->p, git, true, why_git_reserved, s->err);
    } else if (r == 0 && warden_protect_is_placeholder(git, &st)) {
      rc = add_item(s->p, git, WARDEN_PROTECT_RESERVED, true, why_git_reserved,
                    s->err);
    } else if (r == 0 && S_ISDIR(st.st_mode)) {
      rc = protect_git_dir(s, git, why_git_pinned);
    } else if (r == 0 && S_ISREG(st.st_mode)) {
      /* A worktree's or submodule's checkout: the file stays as it is, and
       * the directory it names is protected where the sandbox could write
       * it (inside the workspace); outside, nothing of it is bound. */
      rc = add_item(s->p, git, WARDEN_PROTECT_READ_ONLY, false, why_git_file,
                    s->err);
      char text[PATH_MAX], target[PATH_MAX];
      first_line(git, "gitdir:", text, sizeof text);
      if (rc == 0 && text[0] != '\0') {
        int f = follow_pointer(s, git, s->root, text, target, sizeof target);
        if (f < 0)
          rc = -1;
        else if (f == 1)
          rc = protect_git_dir(s, target, why_git_file);
      }
    } else if (r == 0) {
      rc = refuse_link(s->p, s->root, git,
                       S_ISLNK(st.st_mode) ? "a symbolic link"
                                           : "neither a file nor a directory",
                       s->err);
    }
  }
  free(maelys);
  free(git);
  return rc;
}

/* ----------------------------------------------------------- secrets */

static bool secret_name(const char* name, bool is_dir) {
  if (fnmatch(".env*", name, 0) == 0)
    return true;
  if (is_dir)
    return strcmp(name, ".aws") == 0 || strcmp(name, ".ssh") == 0;
  return strcmp(name, ".npmrc") == 0 || strcmp(name, ".netrc") == 0 ||
         strcmp(name, ".git-credentials") == 0 || strcmp(name, ".aws") == 0 ||
         strcmp(name, ".ssh") == 0;
}

/* A secret that is a symbolic link: what the sandbox reads through it is its
 * target, when that lies in the workspace. */
static int secret_link(scan_t* s, const char* path) {
  if (unprotected(s->p, path))
    return 0;
  char text[PATH_MAX];
  char name[NAME_MAX + 1];
  int parent = open_parent(path, name, sizeof name);
  if (parent < 0)
    return 0;
  ssize_t n = readlinkat(parent, name, text, sizeof text - 1);
  close(parent);
  if (n <= 0)
    return 0;
  text[n] = '\0';
  char dir[PATH_MAX], target[PATH_MAX * 2], norm[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", path);
  *strrchr(dir, '/') = '\0';
  snprintf(target, sizeof target, "%s/%s", text[0] == '/' ? "" : dir, text);
  if (warden_absolute(target, norm, sizeof norm) != 0 || !within(norm, s->root))
    return 0; /* outside the workspace: not bound by the workspace's rule */
  struct stat st;
  int r = lstat_walk(norm, &st);
  if (r == -ENOENT)
    return 0;
  if (r != 0 || S_ISLNK(st.st_mode))
    return cli_fail(s->err, "ACCESS_DENIED",
                    "Deny its target with --deny, or pass --unprotect for "
                    "the link.",
                    "the secret '%s' is a symbolic link to '%s', which the "
                    "sandbox could read and which cannot be resolved without "
                    "following another link",
                    path, text);
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
    return 0;
  return add_item(s->p, norm, WARDEN_PROTECT_DENIED, S_ISDIR(st.st_mode),
                  why_secret, s->err);
}

static int scan_secrets(scan_t* s, const char* dir, int depth,
                        size_t* scanned) {
  if (depth > 0 && unprotected(s->p, dir))
    return 0;
  if (++*scanned > MAX_SCANNED_DIRS)
    return cli_fail(s->err, "POLICY_FAILED",
                    "Use a smaller workspace, or keep the network off (the "
                    "secrets are only denied with --network inherit).",
                    "the workspace holds more than %d directories to search "
                    "for secrets",
                    MAX_SCANNED_DIRS);
  int fd = walk(dir);
  int d = fd >= 0 ? openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  if (fd >= 0)
    close(fd);
  DIR* dp = d >= 0 ? fdopendir(d) : NULL;
  if (dp == NULL) {
    if (d >= 0)
      close(d);
    return 0;
  }
  int rc = 0;
  for (struct dirent* e; rc == 0 && (e = readdir(dp)) != NULL;) {
    const char* name = e->d_name;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
      continue;
    struct stat st;
    if (fstatat(dirfd(dp), name, &st, AT_SYMLINK_NOFOLLOW) != 0)
      continue;
    char* path = join(dir, name);
    if (path == NULL) {
      rc = oom(s->err);
      break;
    }
    bool is_dir = S_ISDIR(st.st_mode);
    if (S_ISLNK(st.st_mode) && secret_name(name, false))
      rc = secret_link(s, path);
    else if ((is_dir || S_ISREG(st.st_mode)) && secret_name(name, is_dir))
      rc = add_item(s->p, path, WARDEN_PROTECT_DENIED, is_dir, why_secret,
                    s->err);
    else if (is_dir && depth + 1 < SECRET_DEPTH && strcmp(name, ".git") != 0 &&
             strcmp(name, "node_modules") != 0)
      rc = scan_secrets(s, path, depth + 1, scanned);
    free(path);
  }
  closedir(dp);
  return rc;
}

/* ---------------------------------------------------------- interface */

/* The --unprotect paths, absolute, before the scan: what they name is
 * neither protected nor refused, nor searched. */
static int unprotect_prepare(warden_protection_t* p, const char* root,
                             const char* const* paths, size_t count,
                             cli_error_t* err) {
  if (count == 0)
    return 0;
  p->unprotected = calloc(count, sizeof *p->unprotected);
  p->unprotect_used = calloc(count, sizeof *p->unprotect_used);
  if (p->unprotected == NULL || p->unprotect_used == NULL)
    return oom(err);
  for (size_t i = 0; i < count; i++) {
    char joined[PATH_MAX * 2], abs[PATH_MAX];
    snprintf(joined, sizeof joined, "%s/%s", paths[i][0] == '/' ? "" : root,
             paths[i]);
    if (warden_absolute(joined, abs, sizeof abs) != 0)
      return cli_fail(err, "VALIDATION_FAILED", NULL,
                      "--unprotect '%s': path too long", paths[i]);
    p->unprotected[i] = strdup(abs);
    if (p->unprotected[i] == NULL)
      return oom(err);
    p->unprotected_count++;
  }
  return 0;
}

/* An --unprotect that names nothing protected is a mistake to say. */
static int unprotect_check(const warden_protection_t* p,
                           const char* const* paths, cli_error_t* err) {
  for (size_t i = 0; i < p->unprotected_count; i++) {
    bool used = p->unprotect_used[i];
    for (size_t k = 0; !used && k < p->unprotected_count; k++)
      used = k != i && p->unprotect_used[k] &&
             within(p->unprotected[i], p->unprotected[k]);
    if (!used)
      return cli_fail(err, "VALIDATION_FAILED",
                      "'maelys-warden plan --explain' with the same options "
                      "lists what is protected.",
                      "--unprotect '%s': '%s' is not protected (nothing at or "
                      "below it is)",
                      paths[i], p->unprotected[i]);
  }
  return 0;
}

int warden_protect_scan(warden_protection_t* p, const char* root, bool writable,
                        bool network_inherit, const char* const* unprotect_list,
                        size_t unprotect_count, cli_error_t* err) {
  scan_t s = {p, root, 0, err};
  size_t scanned = 0;
  if (unprotect_prepare(p, root, unprotect_list, unprotect_count, err) != 0)
    return -1;
  if (writable && scan_git(&s) != 0)
    return -1;
  if (network_inherit && scan_secrets(&s, root, 0, &scanned) != 0)
    return -1;
  char* git = join(root, ".git");
  if (git == NULL)
    return oom(err);
  bool lifted = unprotected(p, git);
  free(git);
  free(p->nested_root);
  p->nested_root = NULL;
  if (writable && !lifted && (p->nested_root = strdup(root)) == NULL)
    return oom(err);
  return unprotect_check(p, unprotect_list, err);
}

static bool has_rule(const maelys_executor_plan_t* plan, const char* path) {
  for (size_t i = 0; i < maelys_executor_plan_rule_count(plan); i++) {
    maelys_executor_rule_view_t r;
    if (maelys_executor_plan_rule_get(plan, i, &r) == 0 &&
        strcmp(r.path, path) == 0)
      return true;
  }
  return false;
}

int warden_protect_add_rules(const warden_protection_t* p,
                             maelys_executor_plan_t* plan, cli_error_t* err) {
  for (size_t i = 0; i < p->count; i++) {
    const warden_protect_item_t* it = &p->items[i];
    if (has_rule(plan, it->path))
      continue;
    maelys_executor_access_t access =
        it->kind == WARDEN_PROTECT_PINNED   ? MAELYS_EXECUTOR_ACCESS_WRITE
        : it->kind == WARDEN_PROTECT_DENIED ? MAELYS_EXECUTOR_ACCESS_DENY
                                            : MAELYS_EXECUTOR_ACCESS_READ;
    char* error = NULL;
    maelys_executor_result_t r = maelys_executor_plan_add_rule(
        plan, it->path, access,
        it->is_dir ? MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY
                   : MAELYS_EXECUTOR_SCOPE_LITERAL_FILE,
        &error);
    if (r != MAELYS_EXECUTOR_OK) {
      cli_fail(err, "VALIDATION_FAILED", NULL, "protecting '%s': %s", it->path,
               error ? error : maelys_executor_result_name(r));
      maelys_executor_error_free(error);
      return -1;
    }
  }
  return 0;
}

int warden_protect_from_plan(warden_protection_t* p,
                             const maelys_executor_plan_t* plan,
                             cli_error_t* err) {
  size_t n = maelys_executor_plan_rule_count(plan);
  for (size_t i = 0; i < n; i++) {
    maelys_executor_rule_view_t r;
    if (maelys_executor_plan_rule_get(plan, i, &r) != 0)
      continue;
    bool in_write = false, in_any = false;
    for (size_t k = 0; k < n; k++) {
      maelys_executor_rule_view_t o;
      if (k == i || maelys_executor_plan_rule_get(plan, k, &o) != 0 ||
          strcmp(o.path, r.path) == 0 || !within(r.path, o.path))
        continue;
      in_write = in_write || o.access == MAELYS_EXECUTOR_ACCESS_WRITE;
      in_any = in_any || o.access == MAELYS_EXECUTOR_ACCESS_WRITE ||
               o.access == MAELYS_EXECUTOR_ACCESS_READ;
    }
    bool is_dir = r.scope != MAELYS_EXECUTOR_SCOPE_LITERAL_FILE;
    warden_protect_kind_t kind = 0;
    if (r.access == MAELYS_EXECUTOR_ACCESS_DENY && in_any) {
      kind = WARDEN_PROTECT_DENIED;
    } else if (r.access == MAELYS_EXECUTOR_ACCESS_WRITE && in_write) {
      kind = WARDEN_PROTECT_PINNED;
    } else if (r.access == MAELYS_EXECUTOR_ACCESS_READ && in_write) {
      struct stat st;
      int e = lstat_walk(r.path, &st);
      kind = ((e == -ENOENT) ||
              (e == 0 && warden_protect_is_placeholder(r.path, &st))) &&
                     reservable(r.path, is_dir)
                 ? WARDEN_PROTECT_RESERVED
                 : WARDEN_PROTECT_READ_ONLY;
    }
    if (kind != 0 &&
        add_item(p, r.path, kind, is_dir, why_by_name(r.path, kind), err) != 0)
      return -1;
    /* A protected git directory's commondir is watched like the built-in
     * profile's. */
    if (kind == WARDEN_PROTECT_READ_ONLY && !is_dir &&
        strcmp(base_name(r.path), "config") == 0) {
      char dir[PATH_MAX];
      snprintf(dir, sizeof dir, "%s", r.path);
      *strrchr(dir, '/') = '\0';
      char* cd = join(dir, "commondir");
      struct stat st;
      int rc = cd == NULL ? oom(err)
               : lstat_walk(cd, &st) == -ENOENT
                   ? add_watch(p, cd, why_watch_commondir, err)
                   : 0;
      free(cd);
      if (rc != 0)
        return -1;
    }
  }
  return 0;
}

/* ------------------------------------------------------ placeholders */

/* Creates or joins the placeholder at `path` and takes its shared lock. */
static int hold(warden_protection_t* p, const char* path, bool is_dir,
                cli_error_t* err) {
  for (int attempt = 0; attempt < 8; attempt++) {
    char name[NAME_MAX + 1];
    int parent = open_parent(path, name, sizeof name);
    if (parent < 0)
      return cli_fail(err, "IO_FAILED", NULL,
                      "reserving '%s': its directory: %s", path,
                      strerror(-parent));
    int made =
        is_dir ? mkdirat(parent, name, PLACEHOLDER_DIR_MODE)
               : openat(parent, name,
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                        PLACEHOLDER_FILE_MODE);
    int e = errno;
    if (made >= 0 && !is_dir)
      close(made);
    if (made >= 0) /* the mode, whatever the umask */
      fchmodat(parent, name,
               is_dir ? PLACEHOLDER_DIR_MODE : PLACEHOLDER_FILE_MODE, 0);
    if (made < 0 && e != EEXIST) {
      close(parent);
      return cli_fail(err,
                      e == EACCES || e == EROFS ? "ACCESS_DENIED" : "IO_FAILED",
                      "Make the workspace writable for yourself, or pass "
                      "--unprotect for the path.",
                      "reserving '%s' (an empty read-only placeholder that "
                      "keeps the payload from creating it): %s",
                      path, strerror(e));
    }
    int fd =
        openat(parent, name,
               O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (is_dir ? O_DIRECTORY : 0));
    struct stat held, now;
    bool ok = fd >= 0 && flock(fd, LOCK_SH) == 0 && fstat(fd, &held) == 0 &&
              fstatat(parent, name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
              held.st_dev == now.st_dev && held.st_ino == now.st_ino;
    close(parent);
    if (ok && !warden_protect_is_placeholder(path, &now)) {
      /* Something real took the name since the scan. */
      close(fd);
      return cli_fail(err, "IO_FAILED", "Run it again.",
                      "'%s' appeared while the run was being prepared", path);
    }
    if (!ok) {
      /* The last user removed it between our open and our lock: again. */
      if (fd >= 0)
        close(fd);
      continue;
    }
    warden_placeholder_t* h =
        realloc(p->held, (p->held_count + 1) * sizeof *p->held);
    char* copy = strdup(path);
    if (h == NULL || copy == NULL) {
      free(copy);
      if (h != NULL)
        p->held = h;
      close(fd);
      return oom(err);
    }
    p->held = h;
    p->held[p->held_count++] =
        (warden_placeholder_t){copy, fd, held.st_dev, held.st_ino, is_dir};
    return 0;
  }
  return cli_fail(err, "IO_FAILED", "Run it again.",
                  "reserving '%s': it kept disappearing", path);
}

int warden_protect_reserve(warden_protection_t* p, cli_error_t* err) {
  for (size_t i = 0; i < p->count; i++)
    if (p->items[i].kind == WARDEN_PROTECT_RESERVED &&
        hold(p, p->items[i].path, p->items[i].is_dir, err) != 0) {
      warden_protect_release(p);
      return -1;
    }
  free(p->devs);
  free(p->inos);
  p->devs = calloc(p->count + 1, sizeof *p->devs);
  p->inos = calloc(p->count + 1, sizeof *p->inos);
  if (p->devs == NULL || p->inos == NULL) {
    warden_protect_release(p);
    return oom(err);
  }
  for (size_t i = 0; i < p->count; i++) {
    struct stat st;
    if (lstat_walk(p->items[i].path, &st) == 0) {
      p->devs[i] = st.st_dev;
      p->inos[i] = st.st_ino;
    }
  }
  clock_gettime(CLOCK_REALTIME, &p->started);
  return 0;
}

void warden_protect_release(warden_protection_t* p) {
  for (size_t i = 0; i < p->held_count; i++) {
    warden_placeholder_t* h = &p->held[i];
    /* Only the last run that uses it removes it: another one holding its
     * shared lock still has it mounted, and removing it would detach that
     * mount. */
    if (flock(h->fd, LOCK_EX | LOCK_NB) == 0) {
      char name[NAME_MAX + 1];
      int parent = open_parent(h->path, name, sizeof name);
      struct stat st;
      if (parent >= 0 && fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          st.st_dev == h->dev && st.st_ino == h->ino &&
          warden_protect_is_placeholder(h->path, &st))
        unlinkat(parent, name, h->is_dir ? AT_REMOVEDIR : 0);
      if (parent >= 0)
        close(parent);
    }
    close(h->fd);
    free(h->path);
  }
  free(p->held);
  p->held = NULL;
  p->held_count = 0;
}

/* ------------------------------------------------------------- audit */

/* ------------------------------------------------- nested repositories */

/* Bounds of the walk after the run: beyond them the audit says it stopped. */
#define NESTED_MAX_ENTRIES 2000000
#define NESTED_MAX_DEPTH 64

typedef struct nested_walk {
  const warden_protection_t* p;
  const char* execution_id;
  void (*report)(const char* line, void* data);
  void* data;
  dev_t dev;
  size_t visited, findings;
  bool truncated;
} nested_walk_t;

/* Changed at or after the run's start. File times come from the kernel's
 * coarse clock, up to a tick behind the one read at the start: 100 ms of
 * margin. A rename or a new link changes the ctime of what it names, and
 * nothing lets a process set a ctime back. */
static bool changed_since(const struct stat* st, const struct timespec* t0) {
  long long c =
      (long long)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec;
  long long s = (long long)t0->tv_sec * 1000000000LL + t0->tv_nsec;
  return c >= s - 100000000LL;
}

/* Whether the `.git` named `name` in `dir_fd` (a directory or a gitdir file,
 * or anything else) was made, moved in, or had what git runs or obeys
 * changed during the run. */
static bool nested_git_changed(int dir_fd, const char* name,
                               const struct stat* st,
                               const struct timespec* t0) {
  if (changed_since(st, t0) || !S_ISDIR(st->st_mode))
    return changed_since(st, t0);
  int g = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (g < 0)
    return true;
  static const char* const obeyed[] = {"config", "config.worktree", "commondir",
                                       "hooks", NULL};
  bool changed = false;
  for (size_t i = 0; !changed && obeyed[i] != NULL; i++) {
    struct stat o;
    if (fstatat(g, obeyed[i], &o, AT_SYMLINK_NOFOLLOW) == 0)
      changed = changed_since(&o, t0);
  }
  int h = openat(g, "hooks", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR* hd = h >= 0 ? fdopendir(h) : NULL;
  if (h >= 0 && hd == NULL)
    close(h);
  struct dirent* e;
  while (!changed && hd != NULL && (e = readdir(hd)) != NULL) {
    struct stat o;
    if (e->d_name[0] != '.' &&
        fstatat(dirfd(hd), e->d_name, &o, AT_SYMLINK_NOFOLLOW) == 0)
      changed = changed_since(&o, t0);
  }
  if (hd != NULL)
    closedir(hd);
  close(g);
  return changed;
}

static void nested_quarantine(nested_walk_t* w, int dir_fd, const char* path) {
  char aside[NAME_MAX + 1], line[PATH_MAX * 2 + 512];
  snprintf(aside, sizeof aside, ".git.maelys-quarantine-%.64s",
           w->execution_id ? w->execution_id : "run");
  bool moved = renameat(dir_fd, ".git", dir_fd, aside) == 0;
  int e = errno;
  if (moved)
    snprintf(line, sizeof line,
             "'%s' is a repository made or changed during the run (git run "
             "there, or a gitlink in the workspace's index, would obey its "
             "configuration and hooks): moved aside to '%s', where git "
             "ignores it ('--unprotect .git' keeps repositories the payload "
             "makes)",
             path, aside);
  else
    snprintf(line, sizeof line,
             "'%s' is a repository made or changed during the run and could "
             "not be moved aside (%s): remove it before using git there",
             path, strerror(e));
  w->report(line, w->data);
  w->findings++;
}

/* Walks the directory `fd` (`path`, consumed), never through a link, never
 * into another filesystem or a git directory. */
static void nested_walk(nested_walk_t* w, int fd, const char* path, int depth) {
  DIR* d = fdopendir(fd);
  if (d == NULL) {
    close(fd);
    return;
  }
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    if (++w->visited > NESTED_MAX_ENTRIES) {
      w->truncated = true;
      break;
    }
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
      continue;
    char sub[PATH_MAX];
    if (snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) >= (int)sizeof sub)
      continue;
    if (strcmp(e->d_name, ".git") == 0) {
      if (depth > 0 &&
          nested_git_changed(dirfd(d), e->d_name, &st, &w->p->started))
        nested_quarantine(w, dirfd(d), sub);
      continue; /* a git directory is git's, never a workspace */
    }
    if (!S_ISDIR(st.st_mode) || st.st_dev != w->dev)
      continue;
    if (depth + 1 >= NESTED_MAX_DEPTH) {
      w->truncated = true;
      continue;
    }
    int sfd = openat(dirfd(d), e->d_name,
                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd >= 0)
      nested_walk(w, sfd, sub, depth + 1);
  }
  closedir(d);
}

static size_t audit_nested(const warden_protection_t* p,
                           const char* execution_id,
                           void (*report)(const char* line, void* data),
                           void* data) {
  if (p->nested_root == NULL || p->started.tv_sec == 0)
    return 0;
  int dfd = maelys_backend_open_dir_nofollow(p->nested_root);
  struct stat st;
  if (dfd < 0 || fstat(dfd, &st) != 0) {
    if (dfd >= 0)
      close(dfd);
    return 0;
  }
  nested_walk_t w = {p, execution_id, report, data, st.st_dev, 0, 0, false};
  nested_walk(&w, dfd, p->nested_root, 0);
  if (w.truncated) {
    char line[PATH_MAX + 256];
    snprintf(line, sizeof line,
             "the search of '%s' for repositories made during the run "
             "stopped at %d entries or %d levels: check nested .git before "
             "using git below it",
             p->nested_root, NESTED_MAX_ENTRIES, NESTED_MAX_DEPTH);
    report(line, data);
    w.findings++;
  }
  return w.findings;
}

size_t warden_protect_audit(warden_protection_t* p, const char* execution_id,
                            void (*report)(const char* line, void* data),
                            void* data) {
  size_t findings = 0;
  char line[PATH_MAX * 2 + 512];
  for (size_t i = 0; p->devs != NULL && i < p->count; i++) {
    struct stat st;
    if (p->devs[i] == 0 && p->inos[i] == 0)
      continue;
    if (lstat_walk(p->items[i].path, &st) == 0 && st.st_dev == p->devs[i] &&
        st.st_ino == p->inos[i])
      continue;
    snprintf(line, sizeof line,
             "'%s' was replaced or removed on the host during the run (git "
             "rewrites its files by renaming), which lifts the sandbox's "
             "protection of it from then on: check it before using git there",
             p->items[i].path);
    report(line, data);
    findings++;
  }
  for (size_t i = 0; i < p->watch_count; i++) {
    const char* path = p->watches[i].path;
    struct stat st;
    if (lstat_walk(path, &st) != 0)
      continue;
    char name[NAME_MAX + 1], aside[NAME_MAX + 1];
    int parent = open_parent(path, name, sizeof name);
    snprintf(aside, sizeof aside, "%.150s.maelys-quarantine-%.64s", name,
             execution_id ? execution_id : "run");
    bool moved = parent >= 0 && renameat(parent, name, parent, aside) == 0;
    int e = errno;
    if (parent >= 0)
      close(parent);
    if (moved)
      snprintf(line, sizeof line,
               "'%s' appeared during the run (%s): moved aside to '%s', "
               "where git ignores it",
               path, p->watches[i].why, aside);
    else
      snprintf(line, sizeof line,
               "'%s' appeared during the run (%s) and could not be moved "
               "aside (%s): remove it before using git there",
               path, p->watches[i].why, strerror(e));
    report(line, data);
    findings++;
  }
  return findings + audit_nested(p, execution_id, report, data);
}

/* --------------------------------------------------------------- JSON */

const char* warden_protect_kind_name(warden_protect_kind_t kind) {
  switch (kind) {
  case WARDEN_PROTECT_READ_ONLY:
    return "read-only";
  case WARDEN_PROTECT_PINNED:
    return "pinned";
  case WARDEN_PROTECT_RESERVED:
    return "reserved";
  case WARDEN_PROTECT_DENIED:
    return "denied";
  }
  return "?";
}

json_t* warden_protect_json(const warden_protection_t* p) {
  json_t* items = json_array();
  for (size_t i = 0; i < p->count; i++)
    json_array_append_new(
        items,
        json_pack("{s:s, s:s, s:s, s:s}", "path", p->items[i].path, "type",
                  p->items[i].is_dir ? "directory" : "file", "protection",
                  warden_protect_kind_name(p->items[i].kind), "why",
                  p->items[i].why));
  json_t* watched = json_array();
  for (size_t i = 0; i < p->watch_count; i++)
    json_array_append_new(watched, json_string(p->watches[i].path));
  json_t* unprotected = json_array();
  for (size_t i = 0; i < p->unprotected_count; i++)
    json_array_append_new(unprotected, json_string(p->unprotected[i]));
  return json_pack("{s:o, s:o, s:o}", "protected", items, "checked_after_run",
                   watched, "unprotected", unprotected);
}

/* ------------------------------------------------------- the profile */

int warden_protect_profile(const warden_policy_t* policy,
                           maelys_executor_plan_t* plan, cli_error_t* err) {
  if (warden_protect_scan(policy->protection, policy->workspace,
                          policy->writable, policy->network_inherit,
                          policy->unprotect, policy->unprotect_count, err) != 0)
    return -1;
  return warden_protect_add_rules(policy->protection, plan, err);
}

int warden_protect_unreserved_plan(const warden_protection_t* p,
                                   const maelys_executor_plan_t* plan,
                                   const char* also_drop,
                                   maelys_executor_plan_t** out,
                                   cli_error_t* err) {
  *out = NULL;
  bool any = also_drop != NULL;
  for (size_t i = 0; i < p->count; i++)
    any = any || p->items[i].kind == WARDEN_PROTECT_RESERVED;
  if (!any)
    return 0;
  char* text = NULL;
  if (maelys_executor_plan_to_json(plan, &text, NULL) != MAELYS_EXECUTOR_OK)
    return oom(err);
  json_t* doc = json_loads(text, 0, NULL);
  maelys_executor_string_free(text);
  json_t* rules = json_object_get(doc, "rules");
  if (doc == NULL || !json_is_array(rules)) {
    json_decref(doc);
    return cli_fail(err, "UNEXPECTED", NULL, "the plan's JSON has no rules");
  }
  /* The digest covers the rules that are dropped here. */
  json_object_del(doc, "digest");
  for (size_t i = json_array_size(rules); i-- > 0;) {
    const char* path =
        json_string_value(json_object_get(json_array_get(rules, i), "path"));
    const warden_protect_item_t* it = path ? find_item(p, path) : NULL;
    if ((it != NULL && it->kind == WARDEN_PROTECT_RESERVED) ||
        (path != NULL && also_drop != NULL && strcmp(path, also_drop) == 0))
      json_array_remove(rules, i);
  }
  text = json_dumps(doc, JSON_COMPACT);
  json_decref(doc);
  char* error = NULL;
  maelys_executor_result_t r =
      text ? maelys_executor_plan_from_json(text, strlen(text), out, &error)
           : MAELYS_EXECUTOR_ERR_MEMORY;
  free(text);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_plan_seal(*out, &error);
  if (r != MAELYS_EXECUTOR_OK) {
    cli_fail(err, "UNEXPECTED", NULL, "the plan without its reserved names: %s",
             error ? error : maelys_executor_result_name(r));
    maelys_executor_error_free(error);
    maelys_executor_plan_destroy(*out);
    *out = NULL;
    return -1;
  }
  return 0;
}

int warden_protect_sealed_plan(const warden_protection_t* p,
                               const maelys_executor_plan_t* plan,
                               maelys_executor_plan_t** out, cli_error_t* err) {
  *out = NULL;
  char* text = NULL;
  if (maelys_executor_plan_to_json(plan, &text, NULL) != MAELYS_EXECUTOR_OK)
    return oom(err);
  json_t* doc = json_loads(text, 0, NULL);
  maelys_executor_string_free(text);
  if (doc == NULL)
    return cli_fail(err, "UNEXPECTED", NULL, "the plan's JSON does not parse");
  /* The digest covers the rules; the plan gets new ones. */
  json_object_del(doc, "digest");
  text = json_dumps(doc, JSON_COMPACT);
  json_decref(doc);
  char* error = NULL;
  maelys_executor_result_t r =
      text ? maelys_executor_plan_from_json(text, strlen(text), out, &error)
           : MAELYS_EXECUTOR_ERR_MEMORY;
  free(text);
  if (r == MAELYS_EXECUTOR_OK && warden_protect_add_rules(p, *out, err) != 0) {
    maelys_executor_plan_destroy(*out);
    *out = NULL;
    return -1;
  }
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_plan_seal(*out, &error);
  if (r != MAELYS_EXECUTOR_OK) {
    cli_fail(err, "UNEXPECTED", NULL, "the plan with its protections: %s",
             error ? error : maelys_executor_result_name(r));
    maelys_executor_error_free(error);
    maelys_executor_plan_destroy(*out);
    *out = NULL;
    return -1;
  }
  return 0;
}
