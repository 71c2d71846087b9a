/*
 * The pure lowering of a sealed plan to a Landlock ruleset: exact or
 * refused, with the rule or mount that cannot be expressed named.
 *
 * What Landlock can say, and so what a plan means here:
 *   - The root is the host's. Nothing is readable, writable or executable
 *     except below the paths the plan grants; paths stay traversable, so the
 *     existence and metadata of any host path (stat, readlink) are visible,
 *     never its contents. That is READONLY here; EPHEMERAL_WRITE (a scratch
 *     root whose writes vanish) and a host root are refused.
 *   - Grants only add up (a ruleset is an allow-list, rights of nested rules
 *     are unioned): a DENY inside a granted tree and a granted path inside a
 *     DENY cannot be expressed and are refused. A DENY outside every grant
 *     needs no rule: the ruleset denies it already.
 *   - A READ path or a protected name (PROTECT_CREATE) strictly inside a
 *     WRITE tree -- what bubblewrap makes read-only by mounting it on top,
 *     such as the .git/hooks and .maelys that --rw keeps -- is expressed by
 *     carving the tree around it: every directory from the tree's top down
 *     to the path's parent is *frozen* (readable, no right to create,
 *     remove or rename any of its own entries, which also keeps the
 *     read-only path from being renamed away or a protected name from being
 *     created), and every other entry of a frozen directory, as it exists at
 *     launch, gets the tree's rights, whole. This is narrower than the plan,
 *     never wider: a new entry cannot be created in a frozen directory (the
 *     top of the workspace, .git itself), and an entry the host adds there
 *     during the run is not reachable. Symbolic links among the entries get
 *     no rule (Landlock checks what they resolve to).
 *   - Nothing is mounted: a bind is a grant on its own source, so its
 *     destination must be that path; a symlink or a directory must already
 *     be there on the host, as the plan describes it; a tmpfs and a procfs
 *     of the sandbox's own cannot be made. A DEV mount stands for the five
 *     data devices (maelys__ll_dev_files), granted one by one: no pts, no
 *     ptmx, no shm, no tty.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "landlock-internal.h"

const char* const maelys__ll_dev_files[] = {
    "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", NULL};

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

uint64_t maelys__ll_fs_rights(int abi) {
  uint64_t r = (MAELYS__LL_FS_MAKE_SYM << 1) - 1; /* ABI 1 */
  if (abi >= 2)
    r |= MAELYS__LL_FS_REFER;
  if (abi >= 3)
    r |= MAELYS__LL_FS_TRUNCATE;
  if (abi >= 5)
    r |= MAELYS__LL_FS_IOCTL_DEV;
  return r;
}

uint64_t maelys__ll_read_rights(int abi, bool directory) {
  uint64_t r =
      MAELYS__LL_FS_EXECUTE | MAELYS__LL_FS_READ_FILE | MAELYS__LL_FS_IOCTL_DEV;
  if (directory)
    r |= MAELYS__LL_FS_READ_DIR;
  return r & maelys__ll_fs_rights(abi);
}

uint64_t maelys__ll_write_rights(int abi, bool directory) {
  uint64_t r = maelys__ll_read_rights(abi, directory) |
               MAELYS__LL_FS_WRITE_FILE | MAELYS__LL_FS_TRUNCATE;
  if (directory)
    r |= MAELYS__LL_FS_REMOVE_DIR | MAELYS__LL_FS_REMOVE_FILE |
         MAELYS__LL_FS_MAKE_DIR | MAELYS__LL_FS_MAKE_REG |
         MAELYS__LL_FS_MAKE_SOCK | MAELYS__LL_FS_MAKE_FIFO |
         MAELYS__LL_FS_MAKE_SYM | MAELYS__LL_FS_REFER;
  return r & maelys__ll_fs_rights(abi);
}

/* ----------------------------------------------------------- the grants */

typedef enum grant_kind { GRANT_READ, GRANT_WRITE, GRANT_DEVICE } grant_kind_t;

/* A path the plan makes reachable, with what made it so (for diagnostics:
 * "rule read '/x'", "mount ro-bind '/usr'"). */
typedef struct grant {
  const char* path;
  grant_kind_t kind;
  bool directory;
  const char* what;
} grant_t;

typedef struct grants {
  grant_t* items;
  size_t count, capacity;
} grants_t;

static int add_grant(grants_t* g, const char* path, grant_kind_t kind,
                     bool directory, const char* what) {
  if (g->count == g->capacity) {
    size_t cap = g->capacity ? g->capacity * 2 : 32;
    grant_t* p = realloc(g->items, cap * sizeof *p);
    if (p == NULL)
      return -1;
    g->items = p;
    g->capacity = cap;
  }
  g->items[g->count++] = (grant_t){path, kind, directory, what};
  return 0;
}

/* Whether `path` is `tree` or lies below it. */
static bool within(const char* path, const char* tree) {
  size_t n = strlen(tree);
  if (strcmp(tree, "/") == 0)
    return true;
  return strncmp(path, tree, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static const char* access_name(maelys_executor_access_t a) {
  switch (a) {
  case MAELYS_EXECUTOR_ACCESS_READ:
    return "read";
  case MAELYS_EXECUTOR_ACCESS_WRITE:
    return "write";
  case MAELYS_EXECUTOR_ACCESS_DENY:
    return "deny";
  case MAELYS_EXECUTOR_ACCESS_PROTECT_CREATE:
    return "protect-create";
  }
  return "?";
}

/* ------------------------------------------- what needs no filesystem */

static maelys_executor_result_t
check_expressible(const maelys_executor_plan_t* plan,
                  const maelys__ll_env_t* env, char** out_error) {
  if (env->abi < MAELYS__LL_MIN_ABI)
    return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                "landlock: the kernel's Landlock ABI is %d; ABI %d (Linux "
                "6.2) is the oldest that mediates truncate(2), without which "
                "a file the plan only lets the payload read could be emptied",
                env->abi, MAELYS__LL_MIN_ABI);
  if (env->abi < MAELYS__LL_SCOPE_ABI && !env->host_root)
    return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                "landlock: the kernel's Landlock ABI is %d; signals are "
                "scoped from ABI %d (Linux 6.12) on, and without that the "
                "payload, which runs as this user, could kill its own "
                "supervisor and forge its outcome (invariant 19)",
                env->abi, MAELYS__LL_SCOPE_ABI);
  maelys_executor_network_t net = maelys_executor_plan_network(plan);
  if (net == MAELYS_EXECUTOR_NETWORK_MEDIATED)
    return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                "network mediated: the landlock backend has no mediated "
                "frontend; compose the egress adapter in the host");
  if ((net == MAELYS_EXECUTOR_NETWORK_NONE ||
       net == MAELYS_EXECUTOR_NETWORK_EXTERNAL_CHANNEL) &&
      env->abi < MAELYS__LL_NET_ABI)
    return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                "network none: Landlock ABI %d has no TCP rules (ABI %d, "
                "Linux 6.7, has them); the socket denial alone is not what "
                "this backend promises",
                env->abi, MAELYS__LL_NET_ABI);
  switch (maelys_executor_plan_root(plan, NULL)) {
  case MAELYS_EXECUTOR_ROOT_HOST:
    return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                "root host: the landlock backend confines the filesystem to "
                "the plan's grants; an unconfined host root is posix's");
  case MAELYS_EXECUTOR_ROOT_EPHEMERAL_WRITE:
    return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                "root ephemeral-write: without a mount namespace no scratch "
                "root can be made, and writes to the host's / would stay on "
                "its disk; use a readonly root (the host's, readable only "
                "where the plan grants)");
  case MAELYS_EXECUTOR_ROOT_READONLY:
    break;
  }
  for (size_t i = 0; i < maelys_executor_plan_mount_count(plan); i++) {
    maelys_executor_mount_view_t m;
    maelys_executor_plan_mount_get(plan, i, &m);
    switch (m.kind) {
    case MAELYS_EXECUTOR_MOUNT_TMPFS:
      return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                  "mount tmpfs '%s': without a mount namespace no private "
                  "tmpfs can be made, and the host's '%s' is shared with "
                  "every other process",
                  m.destination, m.destination);
    case MAELYS_EXECUTOR_MOUNT_PROC:
      return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                  "mount proc '%s': a procfs of the sandbox's own needs a pid "
                  "namespace; the host's would show the command line of "
                  "every host process",
                  m.destination);
    case MAELYS_EXECUTOR_MOUNT_DEV:
      if (strcmp(m.destination, "/dev") != 0)
        return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                    "mount dev '%s': nothing is mounted here; only the host's "
                    "own /dev can be granted",
                    m.destination);
      break;
    case MAELYS_EXECUTOR_MOUNT_RO_BIND:
    case MAELYS_EXECUTOR_MOUNT_BIND:
      if (strcmp(m.source, m.destination) != 0)
        return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                    "mount %s '%s' at '%s': nothing is mounted here, the root "
                    "is the host's; a bind can only grant its source at its "
                    "own path",
                    m.kind == MAELYS_EXECUTOR_MOUNT_BIND ? "bind" : "ro-bind",
                    m.source, m.destination);
      break;
    default:
      break;
    }
  }
  for (size_t i = 0; i < maelys_executor_plan_rule_count(plan); i++) {
    maelys_executor_rule_view_t r;
    maelys_executor_plan_rule_get(plan, i, &r);
    if (r.scope == MAELYS_EXECUTOR_SCOPE_LITERAL_DIRECTORY)
      return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                  "rule %s '%s' (literal-directory): a Landlock right on a "
                  "directory applies to everything below it, so a directory "
                  "cannot be granted without its contents",
                  access_name(r.access), r.path);
  }
  return MAELYS_EXECUTOR_OK;
}

/* ------------------------------------------------- what the host holds */

static maelys_executor_result_t describe(const maelys__ll_env_t* env,
                                         const char* what, const char* path,
                                         maelys__ll_node_t* node,
                                         char** out_error) {
  memset(node, 0, sizeof *node);
  int rc = env->resolver->describe(env->resolver->ctx, path, node);
  if (rc == -ELOOP)
    return fail(out_error, MAELYS_EXECUTOR_ERR_DENIED,
                "%s '%s' passes through a symbolic link: name the resolved "
                "path",
                what, path);
  if (rc == -ENOENT)
    return fail(out_error, MAELYS_EXECUTOR_ERR_NOT_FOUND,
                "%s '%s' does not exist", what, path);
  if (rc < 0)
    return fail(out_error, MAELYS_EXECUTOR_ERR_IO, "%s '%s': %s", what, path,
                strerror(-rc));
  return MAELYS_EXECUTOR_OK;
}

/* A grant of the host path `path` (READ or WRITE), checked against what the
 * payload's identity can reach. */
static maelys_executor_result_t grant_path(const maelys__ll_env_t* env,
                                           grants_t* g, const char* what,
                                           const char* path, grant_kind_t kind,
                                           int want_dir, char** out_error) {
  maelys__ll_node_t node;
  maelys_executor_result_t r = describe(env, what, path, &node, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  if (node.kind == MAELYS__LL_SYMLINK)
    return fail(out_error, MAELYS_EXECUTOR_ERR_DENIED,
                "%s '%s' is a symbolic link: name its target", what, path);
  bool dir = node.kind == MAELYS__LL_DIRECTORY;
  if (want_dir == 1 && !dir)
    return fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                "%s '%s' (recursive-directory) is not a directory", what, path);
  if (want_dir == 0 && dir)
    return fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                "%s '%s' (literal-file) is a directory", what, path);
  if (kind == GRANT_WRITE && node.kernel_fs)
    return fail(out_error, MAELYS_EXECUTOR_ERR_DENIED,
                "%s '%s' lies on a kernel interface filesystem (procfs, "
                "sysfs, cgroupfs...), where a write changes the system, not a "
                "file; refused",
                what, path);
  if (env->host_root) {
    /* Invariant 20: as root the payload runs as an identity of its own,
     * which reaches a path only as "other" does; no idmapped mount can
     * make root's files its own without CAP_SYS_ADMIN. */
    if (kind == GRANT_WRITE && !node.world_writable &&
        !(env->identity_fixed && node.owner == env->identity_uid))
      return fail(
          out_error, MAELYS_EXECUTOR_ERR_DENIED,
          "%s '%s' is owned by uid %u: as root the landlock backend runs "
          "the payload as an identity of its own, and without idmapped "
          "mounts it cannot write what another uid owns; make the path "
          "owned by the request's identity (and set that identity), or run "
          "as the workspace's owner, not as root",
          what, path, (unsigned)node.owner);
    if (kind == GRANT_READ && !node.world_readable &&
        !(env->identity_fixed && node.owner == env->identity_uid))
      return fail(out_error, MAELYS_EXECUTOR_ERR_DENIED,
                  "%s '%s' is not readable by other users (owner uid %u, "
                  "mode %04o, or an ancestor not searchable): as root the "
                  "payload runs as an identity of its own and could not read "
                  "it",
                  what, path, (unsigned)node.owner, (unsigned)node.mode);
  }
  if (add_grant(g, path, kind, dir, what) != 0)
    return fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY, "out of memory");
  return MAELYS_EXECUTOR_OK;
}

static maelys_executor_result_t
grant_mount(const maelys__ll_env_t* env, grants_t* g,
            const maelys_executor_mount_view_t* m, char** out_error) {
  maelys__ll_node_t node;
  maelys_executor_result_t r;
  switch (m->kind) {
  case MAELYS_EXECUTOR_MOUNT_RO_BIND:
  case MAELYS_EXECUTOR_MOUNT_BIND: {
    bool writable = m->kind == MAELYS_EXECUTOR_MOUNT_BIND;
    const char* what = writable ? "mount bind" : "mount ro-bind";
    memset(&node, 0, sizeof node);
    int rc = env->resolver->describe(env->resolver->ctx, m->source, &node);
    if (rc == -ENOENT && m->missing == MAELYS_EXECUTOR_MISSING_SKIP)
      return MAELYS_EXECUTOR_OK;
    if (rc == -ENOENT && m->missing == MAELYS_EXECUTOR_MISSING_CREATE) {
      rc = env->resolver->create_dir(env->resolver->ctx, m->source);
      if (rc < 0)
        return fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                    "%s '%s': creating the missing source: %s", what, m->source,
                    strerror(-rc));
    }
    return grant_path(env, g, what, m->source,
                      writable ? GRANT_WRITE : GRANT_READ, -1, out_error);
  }
  case MAELYS_EXECUTOR_MOUNT_SYMLINK:
    r = describe(env, "mount symlink", m->destination, &node, out_error);
    if (r != MAELYS_EXECUTOR_OK)
      return r;
    if (node.kind != MAELYS__LL_SYMLINK || strcmp(node.link, m->source) != 0)
      return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                  "mount symlink '%s' -> '%s': nothing is mounted here, and "
                  "the host's '%s' is not that symbolic link",
                  m->destination, m->source, m->destination);
    return MAELYS_EXECUTOR_OK;
  case MAELYS_EXECUTOR_MOUNT_DIR:
    /* The host's directory, traversable as every path is; its contents
     * stay out of reach unless a grant covers them. */
    r = describe(env, "mount dir", m->destination, &node, out_error);
    if (r != MAELYS_EXECUTOR_OK)
      return r;
    if (node.kind != MAELYS__LL_DIRECTORY)
      return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                  "mount dir '%s': nothing is mounted here, and the host's "
                  "'%s' is not a directory",
                  m->destination, m->destination);
    return MAELYS_EXECUTOR_OK;
  case MAELYS_EXECUTOR_MOUNT_DEV:
    for (size_t i = 0; maelys__ll_dev_files[i] != NULL; i++) {
      r = describe(env, "mount dev", maelys__ll_dev_files[i], &node, out_error);
      if (r != MAELYS_EXECUTOR_OK)
        return r;
      if (node.kind != MAELYS__LL_DEVICE)
        return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                    "mount dev '/dev': the host's '%s' is not a character "
                    "device",
                    maelys__ll_dev_files[i]);
      if (add_grant(g, maelys__ll_dev_files[i], GRANT_DEVICE, false,
                    "mount dev") != 0)
        return fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY, "out of memory");
    }
    return MAELYS_EXECUTOR_OK;
  default:
    /* Refused before (check_expressible). */
    return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                "mount '%s' cannot be expressed", m->destination);
  }
}

/* ----------------------------------------------------------- conflicts */

static maelys_executor_result_t
check_conflicts(const maelys_executor_plan_t* plan, const maelys__ll_env_t* env,
                const grants_t* g, char** out_error) {
  for (size_t i = 0; i < g->count; i++)
    for (size_t j = 0; j < g->count; j++) {
      const grant_t* a = &g->items[i];
      const grant_t* w = &g->items[j];
      /* Strictly inside: carved (see above); the very same path cannot. */
      if (a->kind != GRANT_READ || w->kind != GRANT_WRITE || !w->directory ||
          strcmp(a->path, w->path) != 0)
        continue;
      return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                  "%s '%s' is also the writable %s '%s': Landlock grants "
                  "only add up, so a writable tree cannot be made read-only",
                  a->what, a->path, w->what, w->path);
    }
  for (size_t i = 0; i < maelys_executor_plan_rule_count(plan); i++) {
    maelys_executor_rule_view_t r;
    maelys_executor_plan_rule_get(plan, i, &r);
    if (r.access == MAELYS_EXECUTOR_ACCESS_DENY) {
      for (size_t j = 0; j < g->count; j++) {
        const grant_t* a = &g->items[j];
        if ((a->directory && within(r.path, a->path)) ||
            strcmp(r.path, a->path) == 0)
          return fail(
              out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
              "rule deny '%s' lies inside the tree %s '%s' grants: Landlock "
              "rules only allow, and a denial cannot be carved out of an "
              "allowed tree (re-granting everything around it would lose the "
              "listing of the directories on the way and miss what is "
              "created there later)",
              r.path, a->what, a->path);
        if (within(a->path, r.path))
          return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                      "%s '%s' lies inside rule deny '%s': Landlock rules "
                      "only allow, and the grant would win",
                      a->what, a->path, r.path);
      }
      /* Outside every grant: the ruleset denies it already. */
    } else if (r.access == MAELYS_EXECUTOR_ACCESS_PROTECT_CREATE) {
      maelys__ll_node_t node;
      memset(&node, 0, sizeof node);
      int rc = env->resolver->describe(env->resolver->ctx, r.path, &node);
      if (rc != -ENOENT)
        return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                    "rule protect-create '%s': the path %s", r.path,
                    rc == 0 ? "exists" : "cannot be checked");
      for (size_t j = 0; j < g->count; j++) {
        const grant_t* a = &g->items[j];
        if (a->kind == GRANT_WRITE && a->directory &&
            strcmp(r.path, a->path) == 0)
          return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                      "rule protect-create '%s' is also the writable %s",
                      r.path, a->what);
      }
      /* Outside every writable tree nothing can be created there; inside
       * one, its directory is frozen (carve). */
    }
  }
  return MAELYS_EXECUTOR_OK;
}

/* ------------------------------------------------------------- carving */

typedef struct strset {
  char** items;
  size_t count, capacity;
} strset_t;

static bool strset_has(const strset_t* s, const char* path) {
  for (size_t i = 0; i < s->count; i++)
    if (strcmp(s->items[i], path) == 0)
      return true;
  return false;
}

static int strset_add(strset_t* s, const char* path) {
  if (strset_has(s, path))
    return 0;
  if (maelys_backend_reserve((void**)&s->items, &s->capacity, sizeof *s->items,
                             s->count + 1) != 0)
    return -1;
  char* copy = strdup(path);
  if (copy == NULL)
    return -1;
  s->items[s->count++] = copy;
  return 0;
}

static void strset_free(strset_t* s) {
  for (size_t i = 0; i < s->count; i++)
    free(s->items[i]);
  free(s->items);
  memset(s, 0, sizeof *s);
}

/* Cuts `path` (absolute, not "/") to its parent, in place. */
static void to_parent(char* path) {
  char* slash = strrchr(path, '/');
  if (slash == path)
    slash[1] = '\0';
  else if (slash != NULL)
    *slash = '\0';
}

static bool strictly_within(const char* path, const char* tree) {
  return strcmp(path, tree) != 0 && within(path, tree);
}

/* The outermost writable directory grant strictly above `path`, or NULL. */
static const grant_t* outer_write(const grants_t* g, const char* path) {
  const grant_t* best = NULL;
  for (size_t i = 0; i < g->count; i++) {
    const grant_t* w = &g->items[i];
    if (w->kind == GRANT_WRITE && w->directory &&
        strictly_within(path, w->path) &&
        (best == NULL || strlen(w->path) < strlen(best->path)))
      best = w;
  }
  return best;
}

/* Freezes every directory from the parent of the hole `hole` up to the
 * outermost writable tree above it. */
static int freeze_chain(const grants_t* g, const char* hole, strset_t* frozen) {
  const grant_t* w = outer_write(g, hole);
  if (w == NULL)
    return 0;
  char d[4096];
  snprintf(d, sizeof d, "%s", hole);
  do {
    to_parent(d);
    if (strset_add(frozen, d) != 0)
      return -1;
  } while (strcmp(d, w->path) != 0 && strcmp(d, "/") != 0);
  return 0;
}

/* The plan's meaning at `path`: the innermost grant that covers it (the
 * grant of that very path, or the deepest directory grant above it), as
 * bubblewrap's mounts stacked in order give it. NULL if none. */
static const grant_t* innermost(const grants_t* g, const char* path) {
  const grant_t* best = NULL;
  for (size_t i = 0; i < g->count; i++) {
    const grant_t* a = &g->items[i];
    if (a->kind == GRANT_DEVICE)
      continue;
    bool covers =
        strcmp(a->path, path) == 0 || (a->directory && within(path, a->path));
    if (covers && (best == NULL || strlen(a->path) > strlen(best->path)))
      best = a;
  }
  return best;
}

/* Whether `path` is the path of a grant or of a rule of the plan: such a
 * path gets its own rule (or, a DENY or protect-create, none). */
static bool named_by_plan(const maelys_executor_plan_t* plan, const grants_t* g,
                          const char* path) {
  for (size_t i = 0; i < g->count; i++)
    if (strcmp(g->items[i].path, path) == 0)
      return true;
  for (size_t i = 0; i < maelys_executor_plan_rule_count(plan); i++) {
    maelys_executor_rule_view_t r;
    maelys_executor_plan_rule_get(plan, i, &r);
    if (strcmp(r.path, path) == 0)
      return true;
  }
  return false;
}

static uint64_t rights_of(int abi, grant_kind_t kind, maelys__ll_kind_t node) {
  bool dir = node == MAELYS__LL_DIRECTORY;
  uint64_t r = kind == GRANT_WRITE ? maelys__ll_write_rights(abi, dir)
                                   : maelys__ll_read_rights(abi, dir);
  if (node != MAELYS__LL_DIRECTORY && node != MAELYS__LL_FILE)
    r &= ~MAELYS__LL_FS_IOCTL_DEV;
  return r;
}

/* The frozen directories: the read-only paths and protected names strictly
 * inside a writable tree, and every directory from each one's parent up to
 * the outermost writable tree above it. */
static maelys_executor_result_t find_frozen(const maelys_executor_plan_t* plan,
                                            const grants_t* g, strset_t* frozen,
                                            char** out_error) {
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < g->count; i++)
    if (g->items[i].kind == GRANT_READ)
      rc = freeze_chain(g, g->items[i].path, frozen);
  for (size_t i = 0; rc == 0 && i < maelys_executor_plan_rule_count(plan);
       i++) {
    maelys_executor_rule_view_t r;
    maelys_executor_plan_rule_get(plan, i, &r);
    if (r.access == MAELYS_EXECUTOR_ACCESS_PROTECT_CREATE)
      rc = freeze_chain(g, r.path, frozen);
  }
  if (rc != 0)
    return fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY, "out of memory");
  return MAELYS_EXECUTOR_OK;
}

/* ------------------------------------------------------------ lowering */

static int add_rule(maelys__ll_lowered_t* out, const char* path,
                    uint64_t access, bool directory) {
  for (size_t i = 0; i < out->rule_count; i++)
    if (strcmp(out->rules[i].path, path) == 0) {
      out->rules[i].access |= access;
      return 0;
    }
  if (out->rule_count == out->rule_capacity) {
    size_t cap = out->rule_capacity ? out->rule_capacity * 2 : 32;
    maelys__ll_rule_t* p = realloc(out->rules, cap * sizeof *p);
    if (p == NULL)
      return -1;
    out->rules = p;
    out->rule_capacity = cap;
  }
  char* copy = strdup(path);
  if (copy == NULL)
    return -1;
  out->rules[out->rule_count++] = (maelys__ll_rule_t){copy, access, directory};
  return 0;
}

/* Each entry of the frozen directory `dir` that the plan does not name
 * itself gets the rights the plan means there, whole. */
static maelys_executor_result_t
grant_entries(const maelys_executor_plan_t* plan, const maelys__ll_env_t* env,
              const grants_t* g, const strset_t* frozen, const char* dir,
              maelys__ll_lowered_t* out, char** out_error) {
  const grant_t* region = innermost(g, dir);
  if (region == NULL) /* not reached: a frozen directory is in a tree */
    return fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                "landlock: frozen '%s' lies in no grant", dir);
  if (env->resolver->list == NULL)
    return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                "landlock: '%s' would be frozen, but its entries cannot be "
                "listed here",
                dir);
  char** names = NULL;
  size_t count = 0;
  int rc = env->resolver->list(env->resolver->ctx, dir,
                               MAELYS__LL_MAX_FROZEN_ENTRIES, &names, &count);
  if (rc == -E2BIG)
    return fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                "landlock: '%s' holds more than %d entries; to keep a path "
                "inside the writable %s '%s' read-only, each of them would "
                "need a rule of its own",
                dir, MAELYS__LL_MAX_FROZEN_ENTRIES, region->what, region->path);
  if (rc < 0)
    return fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                "landlock: listing '%s' (frozen around a read-only path): %s",
                dir, strerror(-rc));
  maelys_executor_result_t res = MAELYS_EXECUTOR_OK;
  char path[4096];
  for (size_t i = 0; i < count; i++) {
    if (res != MAELYS_EXECUTOR_OK)
      break;
    int n = snprintf(path, sizeof path, "%s/%s",
                     strcmp(dir, "/") == 0 ? "" : dir, names[i]);
    if (n < 0 || (size_t)n >= sizeof path) {
      res = fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                 "landlock: an entry of '%s' has a path too long", dir);
      break;
    }
    if (strset_has(frozen, path) || named_by_plan(plan, g, path))
      continue;
    maelys__ll_node_t node;
    memset(&node, 0, sizeof node);
    rc = env->resolver->describe(env->resolver->ctx, path, &node);
    if (rc == -ENOENT || (rc == 0 && node.kind == MAELYS__LL_SYMLINK))
      continue; /* gone since, or a link: checked where it leads */
    if (rc < 0) {
      res = fail(out_error, MAELYS_EXECUTOR_ERR_IO, "landlock: '%s': %s", path,
                 strerror(-rc));
      break;
    }
    if (add_rule(out, path, rights_of(env->abi, region->kind, node.kind),
                 node.kind == MAELYS__LL_DIRECTORY) != 0)
      res = fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY, "out of memory");
  }
  for (size_t i = 0; i < count; i++)
    free(names[i]);
  free(names);
  return res;
}

maelys_executor_result_t maelys__ll_lower(const maelys_executor_plan_t* plan,
                                          const maelys__ll_env_t* env,
                                          maelys__ll_lowered_t* out,
                                          char** out_error) {
  memset(out, 0, sizeof *out);
  maelys_executor_result_t res = check_expressible(plan, env, out_error);
  if (res != MAELYS_EXECUTOR_OK)
    return res;
  grants_t g = {NULL, 0, 0};
  strset_t frozen = {NULL, 0, 0};
  for (size_t i = 0;
       res == MAELYS_EXECUTOR_OK && i < maelys_executor_plan_mount_count(plan);
       i++) {
    maelys_executor_mount_view_t m;
    maelys_executor_plan_mount_get(plan, i, &m);
    res = grant_mount(env, &g, &m, out_error);
  }
  for (size_t i = 0;
       res == MAELYS_EXECUTOR_OK && i < maelys_executor_plan_rule_count(plan);
       i++) {
    maelys_executor_rule_view_t r;
    maelys_executor_plan_rule_get(plan, i, &r);
    if (r.access != MAELYS_EXECUTOR_ACCESS_READ &&
        r.access != MAELYS_EXECUTOR_ACCESS_WRITE)
      continue;
    bool write = r.access == MAELYS_EXECUTOR_ACCESS_WRITE;
    res = grant_path(env, &g, write ? "rule write" : "rule read", r.path,
                     write ? GRANT_WRITE : GRANT_READ,
                     r.scope == MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY,
                     out_error);
  }
  if (res == MAELYS_EXECUTOR_OK)
    res = check_conflicts(plan, env, &g, out_error);
  if (res != MAELYS_EXECUTOR_OK)
    goto done;

  res = find_frozen(plan, &g, &frozen, out_error);
  if (res != MAELYS_EXECUTOR_OK)
    goto done;
  out->handled_fs = maelys__ll_fs_rights(env->abi);
  for (size_t i = 0; i < frozen.count; i++) {
    if (add_rule(out, frozen.items[i], maelys__ll_read_rights(env->abi, true),
                 true) != 0) {
      res = fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY, "out of memory");
      goto done;
    }
    res =
        grant_entries(plan, env, &g, &frozen, frozen.items[i], out, out_error);
    if (res != MAELYS_EXECUTOR_OK)
      goto done;
  }
  for (size_t i = 0; i < g.count; i++) {
    const grant_t* a = &g.items[i];
    /* A frozen directory has its rule already. */
    if (a->directory && strset_has(&frozen, a->path))
      continue;
    uint64_t access =
        a->kind == GRANT_WRITE ? maelys__ll_write_rights(env->abi, a->directory)
        : a->kind == GRANT_READ
            ? maelys__ll_read_rights(env->abi, a->directory)
            : (MAELYS__LL_FS_READ_FILE | MAELYS__LL_FS_WRITE_FILE |
               MAELYS__LL_FS_TRUNCATE | MAELYS__LL_FS_IOCTL_DEV) &
                  out->handled_fs;
    if (add_rule(out, a->path, access, a->directory) != 0) {
      res = fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY, "out of memory");
      goto done;
    }
  }

  /* Signals to processes outside the sandbox's domain are refused: the
   * payload cannot stop its supervisor or any other process of the user's
   * (bubblewrap's pid namespace gives the same). Below ABI 6 only a root
   * host (whose payload has an identity of its own) gets here. */
  if (env->abi >= MAELYS__LL_SCOPE_ABI)
    out->scoped |= MAELYS__LL_SCOPE_SIGNAL;
  /* AF_UNIX sockets are refused whatever the network mode: Landlock (up to
   * ABI 7) does not mediate connect() to a pathname socket, and with the
   * host's root every socket of the host -- docker.sock, the session bus,
   * an ssh agent -- would be reachable outside the plan's grants, which a
   * bubblewrap sandbox only reaches when a bind brings it in. socketpair()
   * and unix sockets handed in stay. */
  out->deny_unix = true;
  maelys_executor_network_t net = maelys_executor_plan_network(plan);
  if (net == MAELYS_EXECUTOR_NETWORK_NONE ||
      net == MAELYS_EXECUTOR_NETWORK_EXTERNAL_CHANNEL) {
    /* TCP bind and connect handled with no port allowed; every other socket
     * family denied by seccomp; abstract unix sockets scoped to the domain
     * as a second wall. */
    out->handled_net = MAELYS__LL_NET_BIND_TCP | MAELYS__LL_NET_CONNECT_TCP;
    out->deny_inet = true;
    if (env->abi >= MAELYS__LL_SCOPE_ABI)
      out->scoped |= MAELYS__LL_SCOPE_ABSTRACT_UNIX;
  }
  /* What was frozen, for the caller to report. */
  out->frozen = frozen.items;
  out->frozen_count = frozen.count;
  memset(&frozen, 0, sizeof frozen);
done:
  free(g.items);
  strset_free(&frozen);
  if (res != MAELYS_EXECUTOR_OK)
    maelys__ll_lowered_dispose(out);
  return res;
}

void maelys__ll_lowered_dispose(maelys__ll_lowered_t* o) {
  for (size_t i = 0; i < o->rule_count; i++)
    free(o->rules[i].path);
  free(o->rules);
  for (size_t i = 0; i < o->frozen_count; i++)
    free(o->frozen[i]);
  free(o->frozen);
  memset(o, 0, sizeof *o);
}
