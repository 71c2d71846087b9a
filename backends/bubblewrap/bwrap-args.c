/*
 * The pure lowering of a sealed plan to bwrap arguments ("setup as data, one
 * interpreter": bwrap executes the ordered operations this produces).
 *
 * Order of operations, each after the previous:
 *   namespaces and process options, the closed environment,
 *   a size-limited tmpfs as /, the plan's mounts in plan order,
 *   READ/WRITE rules from the shallowest path to the deepest (so that a
 *   nested rule lands on top of its parent), the helper, the mode-000 DENY
 *   overlays last (so nothing can cover them), then --remount-ro / for a
 *   read-only root.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bwrap-internal.h"

static maelys_executor_result_t
fail(char** out_error, maelys_executor_result_t r, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

static maelys_executor_result_t
fail(char** out_error, maelys_executor_result_t r, const char* fmt, ...) {
  if (out_error != NULL && *out_error == NULL) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char* s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s != NULL)
      vsnprintf(s, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    *out_error = s;
  }
  return r;
}

static int grow(void** items, size_t* capacity, size_t elem, size_t need) {
  if (need <= *capacity)
    return 0;
  size_t cap = *capacity ? *capacity * 2 : 32;
  while (cap < need)
    cap *= 2;
  void* p = realloc(*items, cap * elem);
  if (p == NULL)
    return -1;
  *items = p;
  *capacity = cap;
  return 0;
}

typedef struct builder {
  maelys__bwrap_lowered_t* out;
  const maelys__bwrap_env_t* env;
  char** out_error;
  bool oom;
} builder_t;

static void push_to(builder_t* b, char*** v, size_t* n, size_t* cap,
                    const char* s) {
  if (b->oom)
    return;
  char* copy = strdup(s);
  if (copy == NULL || grow((void**)v, cap, sizeof **v, *n + 2)) {
    free(copy);
    b->oom = true;
    return;
  }
  (*v)[(*n)++] = copy;
  (*v)[*n] = NULL;
}

static void arg(builder_t* b, const char* s) {
  push_to(b, &b->out->args, &b->out->argc, &b->out->args_capacity, s);
}

static void argf(builder_t* b, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void argf(builder_t* b, const char* fmt, ...) {
  char buf[4200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  arg(b, buf);
}

static void cmd(builder_t* b, const char* s) {
  push_to(b, &b->out->command, &b->out->command_argc, &b->out->command_capacity,
          s);
}

static void cmdf(builder_t* b, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void cmdf(builder_t* b, const char* fmt, ...) {
  char buf[128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  cmd(b, buf);
}

/* Records an extra descriptor; returns its child fd number. */
static int add_fd(builder_t* b, int fd) {
  maelys__bwrap_lowered_t* o = b->out;
  if (b->oom ||
      grow((void**)&o->fds, &o->fd_capacity, sizeof *o->fds, o->fd_count + 1)) {
    b->oom = true;
    if (fd >= 0)
      b->env->resolver->close(b->env->resolver->ctx, fd);
    return -1;
  }
  o->fds[o->fd_count] = fd;
  return b->env->first_extra_fd + (int)o->fd_count++;
}

static int add_stage(builder_t* b, const char* source,
                     const maelys__bwrap_source_t* info) {
  maelys__bwrap_lowered_t* o = b->out;
  char* copy = strdup(source);
  if (b->oom || copy == NULL ||
      grow((void**)&o->stages, &o->stage_capacity, sizeof *o->stages,
           o->stage_count + 1)) {
    free(copy);
    b->oom = true;
    return -1;
  }
  o->stages[o->stage_count] = (maelys__bwrap_stage_t){
      copy,        info->dev,  info->ino, info->kind == MAELYS__BWRAP_DIRECTORY,
      info->owner, info->group};
  return (int)o->stage_count++;
}

/* Opens a source, creating it first for MISSING_CREATE. Returns the fd, 0
 * with *skipped for MISSING_SKIP, or a negative value after setting the
 * error. */
static int open_source(builder_t* b, const char* what, const char* source,
                       maelys_executor_missing_t missing,
                       maelys__bwrap_source_t* info, bool* skipped,
                       maelys_executor_result_t* res) {
  const maelys__bwrap_resolver_t* rs = b->env->resolver;
  *skipped = false;
  int fd = rs->open(rs->ctx, source, info);
  if (fd == -ENOENT && missing == MAELYS_EXECUTOR_MISSING_SKIP) {
    *skipped = true;
    return 0;
  }
  if (fd == -ENOENT && missing == MAELYS_EXECUTOR_MISSING_CREATE) {
    int c = rs->create_dir(rs->ctx, source);
    if (c != 0) {
      *res = fail(b->out_error, MAELYS_EXECUTOR_ERR_IO,
                  "%s '%s' is missing and could not be created: %s", what,
                  source, strerror(-c));
      return -1;
    }
    fd = rs->open(rs->ctx, source, info);
  }
  if (fd == -ENOENT) {
    *res =
        fail(b->out_error, MAELYS_EXECUTOR_ERR_NOT_FOUND,
             "%s '%s' does not exist (missing-path mode: fail)", what, source);
    return -1;
  }
  if (fd == -ELOOP) {
    *res = fail(b->out_error, MAELYS_EXECUTOR_ERR_DENIED,
                "%s '%s' is or passes through a symbolic link: refused so "
                "that a swapped link can neither widen access nor redirect "
                "the mount; name the resolved path",
                what, source);
    return -1;
  }
  if (fd < 0) {
    *res = fail(b->out_error, MAELYS_EXECUTOR_ERR_IO, "cannot open %s '%s': %s",
                what, source, strerror(-fd));
    return -1;
  }
  return fd;
}

/* Host paths that are never bound: why, or NULL. */
static const char* refused_source(const char* path) {
  if (strcmp(path, "/") == 0)
    return "the host's root is never bound";
  if (strcmp(path, "/tmp") == 0 || strcmp(path, "/var/tmp") == 0)
    return "the host's shared temporary directory holds other users' sockets "
           "and files";
  if (strcmp(path, "/run") == 0 || strncmp(path, "/run/", 5) == 0 ||
      strcmp(path, "/var/run") == 0 || strncmp(path, "/var/run/", 9) == 0)
    return "/run holds the host's service sockets";
  if (strcmp(path, "/root") == 0)
    return "a home directory holds agent sockets and credentials";
  if (strncmp(path, "/home/", 6) == 0 && strchr(path + 6, '/') == NULL)
    return "a home directory holds agent sockets and credentials";
  return NULL;
}

/* A bind of `source` at `dest`: by descriptor, or staged for a privileged
 * host that drops to the sandbox uid (which must own what it may write, and
 * reach what it may read, through an idmapped clone). `like_writable`: a
 * read-only bind nested in a writable one is staged like its surroundings,
 * so that its owner is the same one inside (git refuses a repository whose
 * `.git` file has another owner than its working tree: "dubious
 * ownership"). */
static maelys_executor_result_t
bind_source(builder_t* b, const char* what, const char* source,
            const char* dest, bool writable, bool like_writable,
            maelys_executor_missing_t missing, int expect_kind) {
  maelys__bwrap_source_t info;
  memset(&info, 0, sizeof info);
  bool skipped;
  maelys_executor_result_t res = MAELYS_EXECUTOR_OK;
  int fd = open_source(b, what, source, missing, &info, &skipped, &res);
  if (fd < 0)
    return res;
  if (skipped)
    return MAELYS_EXECUTOR_OK;
  const maelys__bwrap_resolver_t* rs = b->env->resolver;
  if (info.kind == MAELYS__BWRAP_OTHER) {
    rs->close(rs->ctx, fd);
    return fail(b->out_error, MAELYS_EXECUTOR_ERR_DENIED,
                "%s '%s' is neither a directory nor a regular file (a socket "
                "or device is never bound into the sandbox)",
                what, source);
  }
  /* Never the host's /, /run, /tmp or a home directory: they hold host
   * sockets and state, and a read-only bind does not stop connect() on a
   * socket. A directory with a live socket directly inside it is refused for
   * the same reason (deeper levels are the plan author's to keep clean); a
   * stale socket file, which connects to nothing, is not (see
   * socket_live in bwrap.c). */
  const char* why = refused_source(source);
  char sock[256];
  if (why == NULL && info.kind == MAELYS__BWRAP_DIRECTORY &&
      rs->find_socket(rs->ctx, fd, sock) == 1) {
    rs->close(rs->ctx, fd);
    return fail(b->out_error, MAELYS_EXECUTOR_ERR_DENIED,
                "%s '%s' is refused: it holds the unix socket '%s', which a "
                "read-only bind would still let the sandbox connect to",
                what, source, sock);
  }
  if (why != NULL) {
    rs->close(rs->ctx, fd);
    return fail(b->out_error, MAELYS_EXECUTOR_ERR_DENIED,
                "%s '%s' is refused: %s; bind a subdirectory instead", what,
                source, why);
  }
  /* Invariant 18: a writable bind never covers a program the backend
   * executes (a build tree inside the workspace is a normal layout): the
   * payload could replace what the next run executes. */
  for (size_t i = 0; writable && i < b->env->protected_count; i++)
    if (b->env->protected_ids[i].dev == info.dev &&
        b->env->protected_ids[i].ino == info.ino) {
      rs->close(rs->ctx, fd);
      return fail(b->out_error, MAELYS_EXECUTOR_ERR_DENIED,
                  "%s '%s' would be writable, but it is or contains a program "
                  "the sandbox backend executes (bwrap or the helper): the "
                  "payload could replace it for the next run (invariant 18)",
                  what, source);
    }
  if (expect_kind == -1) {
    /* The helper: exactly the file the backend checked. */
    if ((b->env->helper_id.dev != 0 || b->env->helper_id.ino != 0) &&
        (b->env->helper_id.dev != info.dev ||
         b->env->helper_id.ino != info.ino)) {
      rs->close(rs->ctx, fd);
      return fail(b->out_error, MAELYS_EXECUTOR_ERR_DENIED,
                  "the helper '%s' was replaced after it was checked", source);
    }
    expect_kind = MAELYS__BWRAP_FILE;
  }
  if (expect_kind != 0 && (int)info.kind != expect_kind) {
    rs->close(rs->ctx, fd);
    return fail(b->out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                "%s '%s' is a %s but the rule's scope is %s", what, source,
                info.kind == MAELYS__BWRAP_DIRECTORY ? "directory" : "file",
                expect_kind == MAELYS__BWRAP_DIRECTORY ? "recursive-directory"
                                                       : "literal-file");
  }
  if (b->env->host_root &&
      (writable || like_writable || !info.world_accessible)) {
    rs->close(rs->ctx, fd);
    int idx = add_stage(b, source, &info);
    if (idx < 0)
      return MAELYS_EXECUTOR_ERR_MEMORY;
    arg(b, writable ? "--bind" : "--ro-bind");
    argf(b, "%s/%d", b->env->staging_dir, idx);
    arg(b, dest);
    return MAELYS_EXECUTOR_OK;
  }
  int child = add_fd(b, fd);
  if (child < 0)
    return MAELYS_EXECUTOR_ERR_MEMORY;
  arg(b, writable ? "--bind-fd" : "--ro-bind-fd");
  argf(b, "%d", child);
  arg(b, dest);
  return MAELYS_EXECUTOR_OK;
}

static size_t depth(const char* path) {
  size_t d = 0;
  for (; *path; path++)
    d += *path == '/';
  return d;
}

static bool within(const char* path, const char* base) {
  size_t n = strlen(base);
  if (n == 1)
    return true;
  return strncmp(path, base, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Is `path` inside the sandbox's view through some bind? */
static bool covered(const maelys_executor_plan_t* plan, const char* path) {
  for (size_t i = 0; i < maelys_executor_plan_mount_count(plan); i++) {
    maelys_executor_mount_view_t m;
    maelys_executor_plan_mount_get(plan, i, &m);
    if ((m.kind == MAELYS_EXECUTOR_MOUNT_BIND ||
         m.kind == MAELYS_EXECUTOR_MOUNT_RO_BIND) &&
        within(path, m.destination))
      return true;
  }
  for (size_t i = 0; i < maelys_executor_plan_rule_count(plan); i++) {
    maelys_executor_rule_view_t r;
    maelys_executor_plan_rule_get(plan, i, &r);
    if ((r.access == MAELYS_EXECUTOR_ACCESS_READ ||
         r.access == MAELYS_EXECUTOR_ACCESS_WRITE) &&
        within(path, r.path))
      return true;
  }
  return false;
}

/* Whether `path` lies strictly inside the path of a WRITE rule. */
static bool inside_writable_rule(const maelys_executor_plan_t* plan,
                                 const char* path) {
  for (size_t i = 0; i < maelys_executor_plan_rule_count(plan); i++) {
    maelys_executor_rule_view_t r;
    maelys_executor_plan_rule_get(plan, i, &r);
    if (r.access == MAELYS_EXECUTOR_ACCESS_WRITE && strcmp(r.path, path) != 0 &&
        within(path, r.path))
      return true;
  }
  return false;
}

/*
 * A DENY hides one name: the overlay covers a path, not the file. A file
 * with a second name (a hard link) is still read through that name wherever
 * a bind reaches it -- and the payload of an earlier run with a writable
 * workspace can plant exactly that: create the empty file the operator later
 * fills with a secret, keep a link to it under another name, and read the
 * secret through the link once the file is denied. Where the other names are
 * cannot be known without walking every bind, so the sound rule is the
 * simple one: every non-directory a DENY covers (the file itself, or each
 * one below a denied directory, at any depth) must have exactly one name,
 * or the plan is refused, naming the file and its link count. A payload
 * that can read a file never gets to make a new name for it during a run in
 * which it is denied: the overlay leaves it no path to the file to link.
 */
static maelys_executor_result_t
deny_has_one_name(builder_t* b, const char* path, int fd,
                  const maelys__bwrap_source_t* info) {
  const maelys__bwrap_resolver_t* rs = b->env->resolver;
  static const char why[] =
      "a hard link elsewhere would still read it (one may have been planted "
      "by an earlier run); remove the other names (find -samefile) or "
      "replace the file with a copy";
  if (info->kind != MAELYS__BWRAP_DIRECTORY) {
    if (info->nlink <= 1)
      return MAELYS_EXECUTOR_OK;
    return fail(b->out_error, MAELYS_EXECUTOR_ERR_DENIED,
                "rule deny '%s' is refused: the file has %llu hard links, "
                "and %s",
                path, (unsigned long long)info->nlink, why);
  }
  char name[MAELYS__BWRAP_NAME_MAX];
  uint64_t nlink = 0;
  int found = rs->find_hard_link(rs->ctx, fd, name, &nlink);
  if (found < 0)
    return fail(b->out_error, MAELYS_EXECUTOR_ERR_IO,
                "rule deny '%s' is refused: its tree could not be checked "
                "for hard links (%s)",
                path, strerror(-found));
  if (found == 0)
    return MAELYS_EXECUTOR_OK;
  return fail(b->out_error, MAELYS_EXECUTOR_ERR_DENIED,
              "rule deny '%s' is refused: the file '%s/%s' below it has %llu "
              "hard links, and %s",
              path, path, name, (unsigned long long)nlink, why);
}

/* DENY: a final mode-000 read-only overlay over the path (invariant 11). */
static maelys_executor_result_t deny(builder_t* b,
                                     const maelys_executor_plan_t* plan,
                                     const maelys_executor_rule_view_t* r) {
  const maelys__bwrap_resolver_t* rs = b->env->resolver;
  maelys__bwrap_source_t info;
  memset(&info, 0, sizeof info);
  int fd = rs->open(rs->ctx, r->path, &info);
  if (fd == -ENOENT) {
    /* Denying an absent path means keeping it from being created, which a
     * mount cannot express. Only a path no bind makes reachable needs
     * nothing: it does not exist in the sandbox. */
    if (covered(plan, r->path))
      return fail(b->out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                  "rule deny '%s': the path does not exist, and keeping an "
                  "absent path from being created (create-protection) cannot "
                  "be expressed with bubblewrap mounts (invariant 11)",
                  r->path);
    return MAELYS_EXECUTOR_OK;
  }
  if (fd == -ELOOP)
    return fail(b->out_error, MAELYS_EXECUTOR_ERR_DENIED,
                "rule deny '%s' is or passes through a symbolic link: name "
                "the resolved path",
                r->path);
  if (fd < 0)
    return fail(b->out_error, MAELYS_EXECUTOR_ERR_IO,
                "cannot open the path of rule deny '%s': %s", r->path,
                strerror(-fd));
  bool is_dir = info.kind == MAELYS__BWRAP_DIRECTORY;
  maelys_executor_result_t res = MAELYS_EXECUTOR_OK;
  if (is_dir && r->scope != MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY)
    res = fail(b->out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
               "rule deny '%s' is a directory but its scope is %s", r->path,
               r->scope == MAELYS_EXECUTOR_SCOPE_LITERAL_FILE
                   ? "literal-file"
                   : "literal-directory");
  else if (!is_dir && r->scope != MAELYS_EXECUTOR_SCOPE_LITERAL_FILE)
    res = fail(b->out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
               "rule deny '%s' is not a directory but its scope is "
               "recursive-directory",
               r->path);
  else
    res = deny_has_one_name(b, r->path, fd, &info);
  rs->close(rs->ctx, fd);
  if (res != MAELYS_EXECUTOR_OK)
    return res;
  arg(b, "--perms");
  arg(b, "0000");
  if (is_dir) {
    arg(b, "--size");
    argf(b, "%d", MAELYS__BWRAP_DENY_SIZE);
    arg(b, "--tmpfs");
    arg(b, r->path);
    arg(b, "--remount-ro");
    arg(b, r->path);
  } else {
    int child = add_fd(b, -1); /* an empty data file */
    if (child < 0)
      return MAELYS_EXECUTOR_ERR_MEMORY;
    arg(b, "--ro-bind-data");
    argf(b, "%d", child);
    arg(b, r->path);
  }
  return MAELYS_EXECUTOR_OK;
}

static maelys_executor_result_t mount(builder_t* b,
                                      const maelys_executor_mount_view_t* m) {
  switch (m->kind) {
  case MAELYS_EXECUTOR_MOUNT_RO_BIND:
  case MAELYS_EXECUTOR_MOUNT_BIND:
    return bind_source(b, "bind source", m->source, m->destination,
                       m->kind == MAELYS_EXECUTOR_MOUNT_BIND, false, m->missing,
                       0);
  case MAELYS_EXECUTOR_MOUNT_TMPFS:
    arg(b, "--size");
    argf(b, "%llu", (unsigned long long)m->size_bytes);
    arg(b, "--tmpfs");
    arg(b, m->destination);
    break;
  case MAELYS_EXECUTOR_MOUNT_PROC:
    arg(b, "--proc");
    arg(b, m->destination);
    break;
  case MAELYS_EXECUTOR_MOUNT_DEV:
    arg(b, "--dev");
    arg(b, m->destination);
    break;
  case MAELYS_EXECUTOR_MOUNT_SYMLINK:
    arg(b, "--symlink");
    arg(b, m->source);
    arg(b, m->destination);
    break;
  case MAELYS_EXECUTOR_MOUNT_DIR:
    arg(b, "--dir");
    arg(b, m->destination);
    break;
  }
  return MAELYS_EXECUTOR_OK;
}

/* A terminal session: the sandbox's init makes the payload's terminal from
 * the devpts instance of the plan's /dev (bwrap's --dev mounts a new one,
 * with /dev/ptmx pointing into it), so a plan without one cannot have a
 * terminal, and is refused rather than given any other. */
static maelys_executor_result_t
check_terminal(const maelys_executor_plan_t* plan, char** out_error) {
  for (size_t i = 0; i < maelys_executor_plan_mount_count(plan); i++) {
    maelys_executor_mount_view_t m;
    maelys_executor_plan_mount_get(plan, i, &m);
    if (m.kind == MAELYS_EXECUTOR_MOUNT_DEV &&
        strcmp(m.destination, "/dev") == 0)
      return MAELYS_EXECUTOR_OK;
  }
  return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
              "the plan mounts no /dev (a dev mount at /dev), so the sandbox "
              "has no devpts instance to make the payload a pseudo-terminal "
              "of its own from; a terminal of the host's never enters a "
              "sandbox (invariant 21): add a dev mount at /dev, or run "
              "without a terminal session");
}

/* Rejections that do not depend on the filesystem, so that a plan bubblewrap
 * cannot express is refused before anything is opened. */
static maelys_executor_result_t
check_expressible(const maelys_executor_plan_t* plan, bool tty,
                  char** out_error) {
  maelys_executor_network_t net = maelys_executor_plan_network(plan);
  if (net == MAELYS_EXECUTOR_NETWORK_MEDIATED)
    return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                "network mediated: the bubblewrap backend has no mediated "
                "frontend; compose the egress adapter in the host");
  if (maelys_executor_plan_root(plan, NULL) == MAELYS_EXECUTOR_ROOT_HOST)
    return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                "root host: the bubblewrap backend builds the root from "
                "explicit read-only binds and never binds the host's /; use a "
                "readonly or ephemeral-write root");
  for (size_t i = 0; i < maelys_executor_plan_rule_count(plan); i++) {
    maelys_executor_rule_view_t r;
    maelys_executor_plan_rule_get(plan, i, &r);
    if (r.access == MAELYS_EXECUTOR_ACCESS_PROTECT_CREATE)
      return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                  "rule protect-create '%s': create-protection for absent "
                  "paths cannot be expressed with bubblewrap mounts and is "
                  "rejected (invariant 11)",
                  r.path);
    if (r.scope == MAELYS_EXECUTOR_SCOPE_LITERAL_DIRECTORY)
      return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                  "rule %s '%s' (literal-directory): a bubblewrap mount "
                  "cannot grant a directory without its contents, so "
                  "literal-directory rules are rejected (invariant 11)",
                  r.access == MAELYS_EXECUTOR_ACCESS_READ    ? "read"
                  : r.access == MAELYS_EXECUTOR_ACCESS_WRITE ? "write"
                                                             : "deny",
                  r.path);
  }
  return tty ? check_terminal(plan, out_error) : MAELYS_EXECUTOR_OK;
}

/* The init's descriptors: the status channel, the payload's stderr, the
 * layout's limit and kept descriptors, and in a terminal session the
 * rendezvous and the terminal's initial size. */
static void init_descriptor_args(builder_t* b,
                                 const maelys_execution_request_t* request) {
  const maelys__bwrap_env_t* env = b->env;
  cmd(b, "--status-fd");
  cmdf(b, "%d", env->status_fd);
  cmd(b, "--stderr-fd");
  cmdf(b, "%d", env->stderr_fd);
  cmd(b, "--limit");
  cmdf(b, "%d", env->payload_fd_limit);
  for (size_t i = 0; i < env->keep_count; i++) {
    cmd(b, "--keep-fd");
    cmdf(b, "%d", env->keep_fds[i]);
  }
  if (maelys_execution_request_io_mode(request) == MAELYS_EXEC_IO_TTY) {
    unsigned rows = 0, columns = 0;
    maelys_execution_request_terminal_size(request, &rows, &columns);
    cmd(b, "--terminal-fd");
    cmdf(b, "%d", env->terminal_fd);
    cmd(b, "--terminal-size");
    cmdf(b, "%ux%u", rows, columns);
  }
}

static const char* const rlimit_names[] = {"",      "cpu",    "fsize",  "data",
                                           "stack", "core",   "nofile", "as",
                                           "nproc", "memlock"};

maelys_executor_result_t
maelys__bwrap_lower(const maelys_executor_plan_t* plan,
                    const maelys_execution_request_t* request,
                    const maelys__bwrap_env_t* env,
                    maelys__bwrap_lowered_t* out, char** out_error) {
  memset(out, 0, sizeof *out);
  maelys_executor_result_t res = check_expressible(
      plan, maelys_execution_request_io_mode(request) == MAELYS_EXEC_IO_TTY,
      out_error);
  if (res != MAELYS_EXECUTOR_OK)
    return res;
  builder_t b = {out, env, out_error, false};
  maelys_executor_network_t net = maelys_executor_plan_network(plan);
  uint64_t scratch = 0;
  maelys_executor_root_t root = maelys_executor_plan_root(plan, &scratch);

  /* Namespaces: always user, pid (whole-tree stop, invariant 8), ipc, uts
   * and cgroup; network unless the plan inherits it. */
  arg(&b, "--unshare-user");
  arg(&b, "--unshare-pid");
  arg(&b, "--unshare-ipc");
  arg(&b, "--unshare-uts");
  arg(&b, "--unshare-cgroup-try");
  if (net != MAELYS_EXECUTOR_NETWORK_INHERIT)
    arg(&b, "--unshare-net");
  if (env->disable_userns)
    arg(&b, "--disable-userns");
  arg(&b, "--die-with-parent");
  arg(&b, "--new-session");
  /* The helper is pid 1: it forwards the graceful signal to every process
   * of the sandbox, which bwrap's own init does not do. */
  arg(&b, "--as-pid-1");
  /* bwrap run with privileges keeps every capability unless told. */
  arg(&b, "--cap-drop");
  arg(&b, "ALL");

  /* Invariant 4: exactly the request's environment. */
  arg(&b, "--clearenv");
  const char* const* envp = maelys_execution_request_environment(request);
  for (size_t i = 0; envp != NULL && envp[i] != NULL; i++) {
    const char* eq = strchr(envp[i], '=');
    char name[1024];
    size_t n = eq != NULL ? (size_t)(eq - envp[i]) : sizeof name;
    if (n >= sizeof name) {
      res = fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                 "environment entry %zu is malformed or its name too long", i);
      goto fail;
    }
    memcpy(name, envp[i], n);
    name[n] = '\0';
    arg(&b, "--setenv");
    arg(&b, name);
    arg(&b, eq + 1);
  }

  /* Every tmpfs has a size, the root included. */
  arg(&b, "--size");
  argf(&b, "%llu",
       (unsigned long long)(root == MAELYS_EXECUTOR_ROOT_EPHEMERAL_WRITE
                                ? scratch
                                : MAELYS__BWRAP_RO_ROOT_SIZE));
  arg(&b, "--tmpfs");
  arg(&b, "/");

  for (size_t i = 0; i < maelys_executor_plan_mount_count(plan); i++) {
    maelys_executor_mount_view_t m;
    maelys_executor_plan_mount_get(plan, i, &m);
    res = mount(&b, &m);
    if (res != MAELYS_EXECUTOR_OK)
      goto fail;
  }

  /* READ and WRITE rules, shallowest first (stable). */
  size_t nrules = maelys_executor_plan_rule_count(plan);
  size_t* order = calloc(nrules + 1, sizeof *order);
  if (order == NULL) {
    res = fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY, "out of memory");
    goto fail;
  }
  for (size_t i = 0; i < nrules; i++)
    order[i] = i;
  for (size_t i = 1; i < nrules; i++) {
    size_t k = order[i], j = i;
    maelys_executor_rule_view_t rk, rj;
    maelys_executor_plan_rule_get(plan, k, &rk);
    while (j > 0) {
      maelys_executor_plan_rule_get(plan, order[j - 1], &rj);
      if (depth(rj.path) <= depth(rk.path))
        break;
      order[j] = order[j - 1];
      j--;
    }
    order[j] = k;
  }
  for (size_t i = 0; i < nrules && res == MAELYS_EXECUTOR_OK; i++) {
    maelys_executor_rule_view_t r;
    maelys_executor_plan_rule_get(plan, order[i], &r);
    if (r.access != MAELYS_EXECUTOR_ACCESS_READ &&
        r.access != MAELYS_EXECUTOR_ACCESS_WRITE)
      continue;
    res = bind_source(&b, "rule path", r.path, r.path,
                      r.access == MAELYS_EXECUTOR_ACCESS_WRITE,
                      inside_writable_rule(plan, r.path),
                      MAELYS_EXECUTOR_MISSING_FAIL,
                      r.scope == MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY
                          ? MAELYS__BWRAP_DIRECTORY
                          : MAELYS__BWRAP_FILE);
  }
  free(order);
  if (res != MAELYS_EXECUTOR_OK)
    goto fail;

  res = bind_source(&b, "helper", env->helper_path, MAELYS__BWRAP_HELPER_DEST,
                    false, false, MAELYS_EXECUTOR_MISSING_FAIL, -1);
  if (res != MAELYS_EXECUTOR_OK)
    goto fail;

  for (size_t i = 0; i < nrules; i++) {
    maelys_executor_rule_view_t r;
    maelys_executor_plan_rule_get(plan, i, &r);
    if (r.access != MAELYS_EXECUTOR_ACCESS_DENY)
      continue;
    res = deny(&b, plan, &r);
    if (res != MAELYS_EXECUTOR_OK)
      goto fail;
  }

  if (root == MAELYS_EXECUTOR_ROOT_READONLY) {
    arg(&b, "--remount-ro");
    arg(&b, "/");
  }
  arg(&b, "--chdir");
  arg(&b, maelys_execution_request_cwd(request));
  arg(&b, "--seccomp");
  argf(&b, "%d", env->seccomp_fd);
  arg(&b, "--json-status-fd");
  argf(&b, "%d", env->json_status_fd);

  /* The command: the helper as pid 1, then the payload. */
  cmd(&b, MAELYS__BWRAP_HELPER_DEST);
  cmd(&b, "init");
  init_descriptor_args(&b, request);
  uint64_t tasks = 0;
  if (maelys_executor_plan_limit_get(plan, MAELYS_EXECUTOR_LIMIT_TASKS,
                                     &tasks) == 0) {
    cmd(&b, "--tasks");
    cmdf(&b, "%llu", (unsigned long long)tasks);
  }
  for (int i = MAELYS_EXECUTOR_RLIMIT_CPU; i <= MAELYS_EXECUTOR_RLIMIT_MEMLOCK;
       i++) {
    uint64_t soft, hard;
    if (maelys_executor_plan_rlimit_get(plan, (maelys_executor_rlimit_t)i,
                                        &soft, &hard) != 0)
      continue;
    char sbuf[24], hbuf[24];
    if (soft == MAELYS_EXECUTOR_RLIMIT_INFINITY)
      snprintf(sbuf, sizeof sbuf, "inf");
    else
      snprintf(sbuf, sizeof sbuf, "%llu", (unsigned long long)soft);
    if (hard == MAELYS_EXECUTOR_RLIMIT_INFINITY)
      snprintf(hbuf, sizeof hbuf, "inf");
    else
      snprintf(hbuf, sizeof hbuf, "%llu", (unsigned long long)hard);
    cmd(&b, "--rlimit");
    cmdf(&b, "%s:%s:%s", rlimit_names[i], sbuf, hbuf);
  }
  /* bwrap sets PWD after --clearenv; the helper gives the payload back
   * exactly the request's environment (invariant 4). */
  const char* pwd = NULL;
  for (size_t i = 0; envp != NULL && envp[i] != NULL; i++)
    if (strncmp(envp[i], "PWD=", 4) == 0)
      pwd = envp[i] + 4;
  if (pwd != NULL) {
    cmd(&b, "--setenv");
    cmd(&b, "PWD");
    cmd(&b, pwd);
  } else {
    cmd(&b, "--unsetenv");
    cmd(&b, "PWD");
  }
  /* The denial listener (helper/notify.c): the same network rules as the
   * BPF, so that every call it refuses is seen. */
  if (env->notify_fd > 0) {
    cmd(&b, "--notify-fd");
    cmdf(&b, "%d", env->notify_fd);
    cmd(&b, "--notify-network");
    cmd(&b, net != MAELYS_EXECUTOR_NETWORK_INHERIT ? "deny" : "allow");
  }
  cmd(&b, "--exec");
  cmd(&b, maelys_execution_request_executable(request));
  cmd(&b, "--");
  const char* const* argv = maelys_execution_request_argv(request);
  if (argv == NULL)
    cmd(&b, maelys_execution_request_executable(request));
  for (size_t i = 0; argv != NULL && argv[i] != NULL; i++)
    cmd(&b, argv[i]);

  if (b.oom) {
    res = fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
               "out of memory lowering the plan");
    goto fail;
  }
  return MAELYS_EXECUTOR_OK;
fail:
  maelys__bwrap_lowered_dispose(out, env->resolver, true);
  return res;
}

void maelys__bwrap_lowered_dispose(maelys__bwrap_lowered_t* o,
                                   const maelys__bwrap_resolver_t* resolver,
                                   bool close_fds) {
  for (size_t i = 0; i < o->argc; i++)
    free(o->args[i]);
  free(o->args);
  for (size_t i = 0; i < o->command_argc; i++)
    free(o->command[i]);
  free(o->command);
  if (close_fds && resolver != NULL)
    for (size_t i = 0; i < o->fd_count; i++)
      if (o->fds[i] >= 0)
        resolver->close(resolver->ctx, o->fds[i]);
  free(o->fds);
  for (size_t i = 0; i < o->stage_count; i++)
    free(o->stages[i].source);
  free(o->stages);
  memset(o, 0, sizeof *o);
}
