/*
 * The ExecutionBoundary: the authority record of a session (the active sealed
 * plan, its digest, the decisions so far) and the pure checks against it.
 *
 * A check looks at a path the way the kernel would inside the sandbox: the
 * plan is lowered to the stack of mounts the mount-based backend builds (the
 * root, the plan's mounts in order, READ and WRITE rules shallowest first,
 * DENY overlays last; bwrap-args.c documents that order), and the path is
 * walked one component at a time through that stack, following symbolic
 * links and "..", so that neither can make a check answer for a different
 * file than the one the payload would open. The filesystem is reached
 * through an operations table, so the unit tests run on an in-memory tree.
 *
 * An expansion is the smallest change the backend can express exactly:
 * mounts cannot grant a path that does not exist yet (the nearest existing
 * directory is granted instead, and the event says so), nor a directory
 * without its contents, nor lift a DENY overlay, nor bind a symbolic link.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orch-internal.h"

#define EXPANSION_FORMAT "maelys-boundary-expansion/1"
#define MAX_LINK_HOPS 40

/* ----------------------------------------------------------- host fs */

static orch_kind_t host_kind(void* ctx, const char* path) {
  (void)ctx;
  struct stat st;
  if (lstat(path, &st) != 0)
    return errno == ENOENT || errno == ENOTDIR ? ORCH_ABSENT : ORCH_OTHER;
  if (S_ISLNK(st.st_mode))
    return ORCH_SYMLINK;
  if (S_ISDIR(st.st_mode))
    return ORCH_DIRECTORY;
  if (S_ISREG(st.st_mode))
    return ORCH_FILE;
  return ORCH_OTHER;
}

static int host_readlink(void* ctx, const char* path, char* buf, size_t size) {
  (void)ctx;
  ssize_t n = readlink(path, buf, size - 1);
  if (n < 0)
    return -1;
  buf[n] = '\0';
  return 0;
}

const maelys__orch_fs_t maelys__orch_host_fs = {host_kind, host_readlink, NULL};

/* ---------------------------------------------------------- the record */

struct maelys_orchestrator_boundary {
  maelys_executor_plan_t* plan;
  char* digest;
  char* backend;
  json_t* plans;     /* digests, oldest first */
  json_t* decisions; /* decision records, in order */
  unsigned decision_count;
  maelys__orch_fs_t fs;
};

maelys_executor_result_t maelys_orchestrator_boundary_create(
    maelys_executor_plan_t* plan, const char* backend,
    maelys_orchestrator_boundary_t** out, char** out_error) {
  if (out_error != NULL && *out_error != NULL) {
    maelys_executor_plan_destroy(plan);
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  }
  if (out != NULL)
    *out = NULL;
  if (out == NULL || plan == NULL || backend == NULL ||
      !maelys_executor_plan_is_sealed(plan)) {
    maelys_executor_plan_destroy(plan);
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "a boundary needs a sealed plan, a backend name "
                             "and out");
  }
  maelys_orchestrator_boundary_t* b = calloc(1, sizeof *b);
  char* digest = NULL;
  if (b == NULL || maelys_executor_plan_digest(plan, &digest, NULL) != 0 ||
      (b->backend = maelys__orch_strdup(backend)) == NULL ||
      (b->plans = json_array()) == NULL ||
      (b->decisions = json_array()) == NULL) {
    maelys_executor_string_free(digest);
    if (b != NULL) {
      free(b->backend);
      json_decref(b->plans);
      json_decref(b->decisions);
    }
    free(b);
    maelys_executor_plan_destroy(plan);
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                             "out of memory");
  }
  b->plan = plan;
  b->digest = digest;
  json_array_append_new(b->plans, json_string(digest));
  b->fs = maelys__orch_host_fs;
  *out = b;
  return MAELYS_EXECUTOR_OK;
}

void maelys_orchestrator_boundary_destroy(maelys_orchestrator_boundary_t* b) {
  if (b == NULL)
    return;
  maelys_executor_plan_destroy(b->plan);
  maelys_executor_string_free(b->digest);
  free(b->backend);
  json_decref(b->plans);
  json_decref(b->decisions);
  free(b);
}

void maelys__orch_boundary_set_fs(maelys_orchestrator_boundary_t* b,
                                  const maelys__orch_fs_t* fs) {
  b->fs = fs ? *fs : maelys__orch_host_fs;
}

const maelys_executor_plan_t*
maelys_orchestrator_boundary_plan(const maelys_orchestrator_boundary_t* b) {
  return b ? b->plan : NULL;
}

const char*
maelys_orchestrator_boundary_digest(const maelys_orchestrator_boundary_t* b) {
  return b ? b->digest : NULL;
}

const char*
maelys__orch_boundary_backend(const maelys_orchestrator_boundary_t* b) {
  return b->backend;
}

unsigned
maelys__orch_boundary_next_decision(maelys_orchestrator_boundary_t* b) {
  return ++b->decision_count;
}

void maelys__orch_boundary_record(maelys_orchestrator_boundary_t* b,
                                  json_t* decision,
                                  maelys_executor_plan_t* new_plan) {
  json_array_append_new(b->decisions, decision);
  if (new_plan == NULL)
    return;
  char* digest = NULL;
  maelys_executor_plan_digest(new_plan, &digest, NULL);
  /* The old plan object is dropped, never changed: executions spawned under
   * it hold their own reference. */
  maelys_executor_plan_destroy(b->plan);
  maelys_executor_string_free(b->digest);
  b->plan = new_plan;
  b->digest = digest;
  json_array_append_new(b->plans, json_string(digest));
}

maelys_executor_result_t
maelys_orchestrator_boundary_to_json(const maelys_orchestrator_boundary_t* b,
                                     char** out_json, char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (out_json == NULL || b == NULL)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "boundary and out_json are required");
  json_t* doc = json_pack("{s:s, s:s, s:s, s:O, s:O}", "format",
                          "maelys-execution-boundary/1", "backend", b->backend,
                          "active_plan_digest", b->digest, "plan_digests",
                          b->plans, "decisions", b->decisions);
  *out_json =
      doc ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
  json_decref(doc);
  return *out_json ? MAELYS_EXECUTOR_OK
                   : maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                       "out of memory");
}

/* ------------------------------------------------------------ the view */

typedef enum lkind {
  LY_ROOT,
  LY_TMPFS,
  LY_PROC,
  LY_DEV,
  LY_DIROBJ,  /* an empty directory made in whatever is below it */
  LY_LINKOBJ, /* a symbolic link made likewise; source is its text */
  LY_RO,
  LY_RW,
  LY_DENY
} lkind_t;

typedef struct layer {
  lkind_t kind;
  const char* dest;
  const char* source; /* binds: the host path; links: the text */
  bool rule;
} layer_t;

typedef struct view {
  layer_t* v;
  size_t n;
  maelys_executor_root_t root;
  const maelys__orch_fs_t* fs;
} view_t;

static size_t depth(const char* p) {
  size_t d = 0;
  for (; *p; p++)
    d += *p == '/';
  return d;
}

/* The stack of mounts the backend builds for `plan`, with `extra` grants
 * added as rules would be (they sort among the rules by depth). */
static int view_build(view_t* w, const maelys_executor_plan_t* plan,
                      const orch_grant_t* extra, size_t extra_count,
                      const maelys__orch_fs_t* fs) {
  size_t nm = maelys_executor_plan_mount_count(plan);
  size_t nr = maelys_executor_plan_rule_count(plan);
  w->v = calloc(1 + nm + nr + extra_count, sizeof *w->v);
  if (w->v == NULL)
    return -1;
  w->n = 0;
  w->fs = fs;
  w->root = maelys_executor_plan_root(plan, NULL);
  w->v[w->n++] = (layer_t){LY_ROOT, "/", "/", false};
  for (size_t i = 0; i < nm; i++) {
    maelys_executor_mount_view_t m;
    maelys_executor_plan_mount_get(plan, i, &m);
    lkind_t k = m.kind == MAELYS_EXECUTOR_MOUNT_RO_BIND   ? LY_RO
                : m.kind == MAELYS_EXECUTOR_MOUNT_BIND    ? LY_RW
                : m.kind == MAELYS_EXECUTOR_MOUNT_TMPFS   ? LY_TMPFS
                : m.kind == MAELYS_EXECUTOR_MOUNT_PROC    ? LY_PROC
                : m.kind == MAELYS_EXECUTOR_MOUNT_DEV     ? LY_DEV
                : m.kind == MAELYS_EXECUTOR_MOUNT_SYMLINK ? LY_LINKOBJ
                                                          : LY_DIROBJ;
    w->v[w->n++] = (layer_t){k, m.destination, m.source, false};
  }
  /* READ and WRITE rules (and the extra grants, replacing a rule on the
   * same path), shallowest first, stable. */
  size_t first = w->n;
  for (size_t i = 0; i < nr; i++) {
    maelys_executor_rule_view_t r;
    maelys_executor_plan_rule_get(plan, i, &r);
    if (r.access != MAELYS_EXECUTOR_ACCESS_READ &&
        r.access != MAELYS_EXECUTOR_ACCESS_WRITE)
      continue;
    lkind_t k = r.access == MAELYS_EXECUTOR_ACCESS_WRITE ? LY_RW : LY_RO;
    for (size_t g = 0; g < extra_count; g++)
      if (strcmp(extra[g].path, r.path) == 0 && extra[g].access == ORCH_WRITE)
        k = LY_RW;
    w->v[w->n++] = (layer_t){k, r.path, r.path, true};
  }
  for (size_t g = 0; g < extra_count; g++) {
    bool replaced = false;
    for (size_t i = first; i < w->n && !replaced; i++)
      replaced = strcmp(w->v[i].dest, extra[g].path) == 0;
    if (!replaced)
      w->v[w->n++] = (layer_t){extra[g].access == ORCH_WRITE ? LY_RW : LY_RO,
                               extra[g].path, extra[g].path, true};
  }
  for (size_t i = first + 1; i < w->n; i++) {
    layer_t k = w->v[i];
    size_t j = i;
    while (j > first && depth(w->v[j - 1].dest) > depth(k.dest)) {
      w->v[j] = w->v[j - 1];
      j--;
    }
    w->v[j] = k;
  }
  for (size_t i = 0; i < nr; i++) {
    maelys_executor_rule_view_t r;
    maelys_executor_plan_rule_get(plan, i, &r);
    if (r.access == MAELYS_EXECUTOR_ACCESS_DENY)
      w->v[w->n++] = (layer_t){LY_DENY, r.path, r.path, true};
  }
  return 0;
}

/* The host's filesystem as a view of its own (for paths that leave the
 * sandbox's view: the expansion is computed on the host). */
static void view_host(view_t* w, layer_t* one, const maelys__orch_fs_t* fs) {
  *one = (layer_t){LY_RO, "/", "/", true};
  w->v = one;
  w->n = 1;
  w->root = MAELYS_EXECUTOR_ROOT_READONLY;
  w->fs = fs;
}

/* The mount that decides what `p` is: the last one covering it (a later
 * mount over an ancestor hides what was below), or an object made exactly
 * at `p`. */
static const layer_t* effective(const view_t* w, const char* p) {
  for (size_t i = w->n; i-- > 0;) {
    const layer_t* l = &w->v[i];
    if (l->kind == LY_DIROBJ || l->kind == LY_LINKOBJ) {
      if (strcmp(l->dest, p) == 0)
        return l;
    } else if (maelys__orch_within(p, l->dest)) {
      return l;
    }
  }
  return &w->v[0];
}

/* Whether a mount point below `p` makes the backend create `p`. */
static bool is_mount_parent(const view_t* w, const char* p) {
  for (size_t i = 0; i < w->n; i++)
    if (strcmp(w->v[i].dest, p) != 0 && maelys__orch_within(w->v[i].dest, p))
      return true;
  return false;
}

typedef struct found {
  orch_kind_t kind;
  const layer_t* layer;
  char target[PATH_MAX];
} found_t;

static void lookup(const view_t* w, const char* p, found_t* f) {
  f->layer = effective(w, p);
  f->target[0] = '\0';
  const layer_t* l = f->layer;
  switch (l->kind) {
  case LY_ROOT:
  case LY_TMPFS:
    f->kind = strcmp(p, l->dest) == 0 || is_mount_parent(w, p) ? ORCH_DIRECTORY
                                                               : ORCH_ABSENT;
    return;
  case LY_PROC:
  case LY_DEV:
    f->kind = strcmp(p, l->dest) == 0 ? ORCH_DIRECTORY : ORCH_OTHER;
    return;
  case LY_DIROBJ:
    f->kind = ORCH_DIRECTORY;
    return;
  case LY_LINKOBJ:
    f->kind = ORCH_SYMLINK;
    snprintf(f->target, sizeof f->target, "%s", l->source);
    return;
  case LY_RO:
  case LY_RW:
  case LY_DENY: {
    char host[PATH_MAX * 2];
    const char* rest = p + (strcmp(l->dest, "/") == 0 ? 0 : strlen(l->dest));
    snprintf(host, sizeof host, "%s%s",
             strcmp(l->source, "/") == 0 && rest[0] == '/' ? "" : l->source,
             rest);
    f->kind = w->fs->kind(w->fs->ctx, host);
    if (f->kind == ORCH_SYMLINK &&
        w->fs->readlink(w->fs->ctx, host, f->target, sizeof f->target) != 0)
      f->kind = ORCH_OTHER;
    return;
  }
  }
}

typedef struct resolved {
  char path[PATH_MAX];
  orch_kind_t kind;
  const layer_t* layer;  /* of the final path */
  const layer_t* denied; /* a DENY met on the way */
  char error[PATH_MAX + 64];
} resolved_t;

static void parent_of(char* p) {
  char* s = strrchr(p, '/');
  if (s == p)
    p[1] = '\0';
  else if (s != NULL)
    *s = '\0';
}

static bool join(char* out, const char* dir, const char* name) {
  int n =
      snprintf(out, PATH_MAX, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", name);
  return n > 0 && n < PATH_MAX;
}

/* Walks `path` through the view as the kernel would: "." and ".." on the
 * resolved prefix (which holds no link), symbolic links followed (the last
 * one too: open(2) with O_CREAT follows it), an absent component ending the
 * walk (what follows is appended as it is; a ".." after it is refused, as the
 * kernel would fail it with ENOENT). */
static void resolve(const view_t* w, const char* path, resolved_t* out) {
  memset(out, 0, sizeof *out);
  char rest[PATH_MAX * 2];
  snprintf(rest, sizeof rest, "%s", path);
  char cur[PATH_MAX] = "/";
  out->kind = ORCH_DIRECTORY;
  out->layer = effective(w, "/");
  int hops = 0;
  char* r = rest;
  while (*r != '\0') {
    while (*r == '/')
      r++;
    if (*r == '\0')
      break;
    char* end = strchr(r, '/');
    size_t n = end ? (size_t)(end - r) : strlen(r);
    char comp[NAME_MAX + 1];
    if (n > NAME_MAX) {
      snprintf(out->error, sizeof out->error, "a component is too long");
      return;
    }
    memcpy(comp, r, n);
    comp[n] = '\0';
    r += n;
    if (strcmp(comp, ".") == 0)
      continue;
    if (strcmp(comp, "..") == 0) {
      parent_of(cur);
      continue;
    }
    char cand[PATH_MAX];
    if (!join(cand, cur, comp)) {
      snprintf(out->error, sizeof out->error, "the path is too long");
      return;
    }
    found_t f;
    lookup(w, cand, &f);
    if (f.layer->kind == LY_DENY && out->denied == NULL)
      out->denied = f.layer;
    bool more = strspn(r, "/") < strlen(r);
    if (f.kind == ORCH_SYMLINK) {
      if (++hops > MAX_LINK_HOPS) {
        snprintf(out->error, sizeof out->error,
                 "too many levels of symbolic links");
        return;
      }
      char next[PATH_MAX * 2];
      int k = snprintf(next, sizeof next, "%s%s%s", f.target, *r ? "/" : "", r);
      if (k < 0 || (size_t)k >= sizeof next) {
        snprintf(out->error, sizeof out->error, "the path is too long");
        return;
      }
      snprintf(rest, sizeof rest, "%s", next);
      r = rest;
      if (f.target[0] == '/')
        snprintf(cur, sizeof cur, "/");
      continue;
    }
    snprintf(cur, sizeof cur, "%s", cand);
    out->kind = f.kind;
    out->layer = f.layer;
    if (f.kind == ORCH_ABSENT && more) {
      /* The rest does not exist either; append it, refusing "..". */
      for (char *save = NULL, *c = strtok_r(r, "/", &save); c != NULL;
           c = strtok_r(NULL, "/", &save)) {
        if (strcmp(c, ".") == 0)
          continue;
        if (strcmp(c, "..") == 0) {
          snprintf(out->error, sizeof out->error,
                   "'..' follows '%s', which does not exist", cur);
          return;
        }
        char next[PATH_MAX];
        if (!join(next, cur, c)) {
          snprintf(out->error, sizeof out->error, "the path is too long");
          return;
        }
        snprintf(cur, sizeof cur, "%s", next);
      }
      out->layer = effective(w, cur);
      if (out->layer->kind == LY_DENY && out->denied == NULL)
        out->denied = out->layer;
      break;
    }
    if ((f.kind == ORCH_FILE || f.kind == ORCH_OTHER) && more) {
      snprintf(out->error, sizeof out->error, "'%s' is not a directory", cand);
      return;
    }
  }
  snprintf(out->path, sizeof out->path, "%s", cur);
  if (out->layer->kind == LY_DENY && out->denied == NULL)
    out->denied = out->layer;
}

/* --------------------------------------------------------------- checks */

struct maelys_orchestrator_check {
  maelys_orchestrator_verdict_t verdict;
  char* reason;
  maelys_orchestrator_expansion_t* expansion;
  json_t* items;
};

typedef struct item {
  maelys_orchestrator_verdict_t verdict;
  char reason[1024];
  char resolved[PATH_MAX];
  bool has_grant;
  orch_grant_t grant; /* borrowed strings in the item; copied when kept */
  char grant_path[PATH_MAX];
  bool network;
} item_t;

static void set_item(item_t* it, maelys_orchestrator_verdict_t v,
                     const char* fmt, ...) MAELYS__ORCH_PRINTF(3, 4);
static void set_item(item_t* it, maelys_orchestrator_verdict_t v,
                     const char* fmt, ...) {
  it->verdict = v;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(it->reason, sizeof it->reason, fmt, ap);
  va_end(ap);
}

/* Paths a mount-based backend never binds (bwrap-args.c refuses them). */
static const char* never_bound(const char* p) {
  if (strcmp(p, "/") == 0)
    return "the host's root is never bound";
  if (strcmp(p, "/tmp") == 0 || strcmp(p, "/var/tmp") == 0)
    return "the host's shared temporary directory holds other users' files";
  if (maelys__orch_within(p, "/run") || maelys__orch_within(p, "/var/run"))
    return "/run holds the host's service sockets";
  if (maelys__orch_within(p, "/proc") || maelys__orch_within(p, "/sys") ||
      maelys__orch_within(p, "/dev"))
    return "kernel interfaces are never granted from the host";
  if (strcmp(p, "/root") == 0 || strcmp(p, "/home") == 0 ||
      (strncmp(p, "/home/", 6) == 0 && strchr(p + 6, '/') == NULL))
    return "a home directory holds agent sockets and credentials";
  return NULL;
}

static bool is_writable_layer(const view_t* w, const layer_t* l) {
  if (l->kind == LY_RW || l->kind == LY_TMPFS || l->kind == LY_DEV)
    return true;
  return (l->kind == LY_ROOT || l->kind == LY_DIROBJ ||
          l->kind == LY_LINKOBJ) &&
         w->root == MAELYS_EXECUTOR_ROOT_EPHEMERAL_WRITE;
}

static const char* access_name(orch_access_t a) {
  return a == ORCH_WRITE ? "write" : "read";
}

/* One path against one view: allowed, or not (without an expansion). */
static maelys_orchestrator_verdict_t path_verdict(const view_t* w,
                                                  orch_access_t access,
                                                  const char* path,
                                                  resolved_t* res) {
  resolve(w, path, res);
  if (res->error[0] || res->denied)
    return MAELYS_ORCHESTRATOR_REFUSED;
  if (access == ORCH_READ)
    return res->kind != ORCH_ABSENT ? MAELYS_ORCHESTRATOR_ALLOWED
                                    : MAELYS_ORCHESTRATOR_BOUNDARY_REQUIRED;
  return is_writable_layer(w, res->layer)
             ? MAELYS_ORCHESTRATOR_ALLOWED
             : MAELYS_ORCHESTRATOR_BOUNDARY_REQUIRED;
}

static void check_path(const maelys_orchestrator_boundary_t* b, const view_t* w,
                       orch_access_t access, const char* path, item_t* it) {
  memset(it, 0, sizeof *it);
  if (path == NULL || path[0] != '/') {
    set_item(it, MAELYS_ORCHESTRATOR_REFUSED, "'%s' is not an absolute path",
             path ? path : "(null)");
    return;
  }
  resolved_t res;
  maelys_orchestrator_verdict_t v = path_verdict(w, access, path, &res);
  snprintf(it->resolved, sizeof it->resolved, "%s", res.path);
  if (res.error[0]) {
    set_item(it, MAELYS_ORCHESTRATOR_REFUSED, "%s: %s", path, res.error);
    return;
  }
  if (res.denied) {
    set_item(it, MAELYS_ORCHESTRATOR_REFUSED,
             "'%s' resolves to '%s', under the plan's DENY rule on '%s': an "
             "expansion never lifts a DENY",
             path, res.path, res.denied->dest);
    return;
  }
  if (v == MAELYS_ORCHESTRATOR_ALLOWED) {
    set_item(it, v, "%s '%s' is allowed (as '%s'%s)", access_name(access), path,
             res.path,
             access == ORCH_WRITE && res.layer->kind == LY_TMPFS
                 ? ", in a private directory that vanishes with the sandbox"
                 : "");
    return;
  }
  if (access == ORCH_WRITE && res.layer->kind == LY_PROC) {
    set_item(it, MAELYS_ORCHESTRATOR_REFUSED, "'%s' is in the sandbox's procfs",
             path);
    return;
  }
  if (access == ORCH_READ && res.kind == ORCH_ABSENT &&
      res.layer->kind != LY_ROOT && res.layer->kind != LY_DIROBJ) {
    set_item(it, MAELYS_ORCHESTRATOR_REFUSED,
             "'%s' (as '%s') does not exist: there is nothing to grant", path,
             res.path);
    return;
  }
  /* A bind that maps another host path cannot be widened by a rule, which
   * binds a host path at the same path. */
  const layer_t* l = res.layer;
  if ((l->kind == LY_RO || l->kind == LY_RW) &&
      strcmp(l->source, l->dest) != 0) {
    set_item(it, MAELYS_ORCHESTRATOR_REFUSED,
             "'%s' is reached through the bind of '%s' at '%s': a rule "
             "cannot widen a bind of another host path",
             res.path, l->source, l->dest);
    return;
  }
  /* What the path is on the host: a grant names that, links resolved. */
  view_t hw;
  layer_t one;
  view_host(&hw, &one, &b->fs);
  resolved_t host;
  resolve(&hw, res.path, &host);
  if (host.error[0]) {
    set_item(it, MAELYS_ORCHESTRATOR_REFUSED, "%s on the host: %s", res.path,
             host.error);
    return;
  }
  if (strcmp(host.path, res.path) != 0) {
    resolved_t again;
    if (path_verdict(w, access, host.path, &again) ==
        MAELYS_ORCHESTRATOR_ALLOWED) {
      set_item(it, MAELYS_ORCHESTRATOR_REFUSED,
               "'%s' resolves on the host to '%s', which the plan already "
               "allows: use that path (a symbolic link is never bound into "
               "the sandbox)",
               path, host.path);
      return;
    }
    if (again.denied) {
      set_item(it, MAELYS_ORCHESTRATOR_REFUSED,
               "'%s' resolves on the host to '%s', under the plan's DENY rule "
               "on '%s'",
               path, host.path, again.denied->dest);
      return;
    }
  }
  const char* why = NULL;
  it->grant.access = access;
  it->grant.scope = MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY;
  if (host.kind == ORCH_FILE) {
    snprintf(it->grant_path, sizeof it->grant_path, "%s", host.path);
    it->grant.scope = MAELYS_EXECUTOR_SCOPE_LITERAL_FILE;
    why = "the file exists: exactly this file";
  } else if (host.kind == ORCH_DIRECTORY) {
    snprintf(it->grant_path, sizeof it->grant_path, "%s", host.path);
    why = "a directory: it and everything below it (a mount cannot grant a "
          "directory without its contents)";
  } else if (host.kind == ORCH_ABSENT && access == ORCH_WRITE) {
    /* Nearest existing ancestor on the host. */
    char a[PATH_MAX];
    snprintf(a, sizeof a, "%s", host.path);
    orch_kind_t k = ORCH_ABSENT;
    while (strcmp(a, "/") != 0 && k == ORCH_ABSENT) {
      parent_of(a);
      k = b->fs.kind(b->fs.ctx, a);
    }
    if (k != ORCH_DIRECTORY) {
      set_item(it, MAELYS_ORCHESTRATOR_REFUSED,
               "'%s' does not exist and its nearest existing ancestor '%s' is "
               "not a directory",
               host.path, a);
      return;
    }
    snprintf(it->grant_path, sizeof it->grant_path, "%s", a);
    why = "the path does not exist yet and a mount cannot grant a path that "
          "does not exist: the smallest expressible grant is its nearest "
          "existing directory, with everything below it";
  } else {
    set_item(it, MAELYS_ORCHESTRATOR_REFUSED, "'%s' (on the host '%s') %s",
             path, host.path,
             host.kind == ORCH_ABSENT ? "does not exist: nothing to read"
                                      : "is neither a file nor a directory");
    return;
  }
  const char* never = never_bound(it->grant_path);
  if (never != NULL) {
    set_item(it, MAELYS_ORCHESTRATOR_REFUSED,
             "%s '%s' would need a grant on '%s', which the backend never "
             "binds (%s)",
             access_name(access), path, it->grant_path, never);
    return;
  }
  for (size_t i = 0; i < maelys_executor_plan_rule_count(b->plan); i++) {
    maelys_executor_rule_view_t r;
    maelys_executor_plan_rule_get(b->plan, i, &r);
    if (strcmp(r.path, it->grant_path) == 0 &&
        r.access == MAELYS_EXECUTOR_ACCESS_DENY) {
      set_item(it, MAELYS_ORCHESTRATOR_REFUSED,
               "the grant '%s' is the plan's DENY rule", it->grant_path);
      return;
    }
  }
  it->grant.path = it->grant_path;
  it->has_grant = true;
  set_item(it, MAELYS_ORCHESTRATOR_BOUNDARY_REQUIRED,
           "%s '%s'%s%s: grant %s on '%s' (%s)", access_name(access), path,
           strcmp(host.path, path) ? " resolves to " : "",
           strcmp(host.path, path) ? host.path : "", access_name(access),
           it->grant_path, why);
}

static void check_connect(const maelys_orchestrator_boundary_t* b,
                          const char* host, unsigned port, item_t* it) {
  memset(it, 0, sizeof *it);
  snprintf(it->resolved, sizeof it->resolved, "%s:%u", host ? host : "", port);
  if (host == NULL || host[0] == '\0' || port == 0 || port > 65535) {
    set_item(it, MAELYS_ORCHESTRATOR_REFUSED, "not a host and a TCP port");
    return;
  }
  switch (maelys_executor_plan_network(b->plan)) {
  case MAELYS_EXECUTOR_NETWORK_INHERIT:
    set_item(it, MAELYS_ORCHESTRATOR_ALLOWED,
             "the plan inherits the host's network");
    return;
  case MAELYS_EXECUTOR_NETWORK_NONE:
    it->network = true;
    set_item(it, MAELYS_ORCHESTRATOR_BOUNDARY_REQUIRED,
             "connect %s:%u: the plan has no network; %s cannot limit a "
             "sandbox to one destination, so the smallest expressible change "
             "is the host's whole network (inherit), every destination",
             host, port, b->backend);
    return;
  default:
    set_item(it, MAELYS_ORCHESTRATOR_REFUSED,
             "connect %s:%u: the plan's network is mediated or an external "
             "channel; only the host that owns the egress broker can widen it",
             host, port);
    return;
  }
}

/* ----------------------------------------------------------- expansions */

static void grant_free(orch_grant_t* g) {
  free(g->path);
  free(g->asked);
  free(g->reason);
}

static void expansion_free(maelys_orchestrator_expansion_t* e) {
  if (e == NULL)
    return;
  for (size_t i = 0; i < e->grant_count; i++)
    grant_free(&e->grants[i]);
  free(e->grants);
  free(e->network_reason);
  free(e->base_digest);
  free(e->backend);
  free(e->json);
  free(e);
}

static const char* scope_name(maelys_executor_scope_t s) {
  return s == MAELYS_EXECUTOR_SCOPE_LITERAL_FILE ? "literal-file"
                                                 : "recursive-directory";
}

/* The canonical text (sorted keys, compact) and its digest. */
static int expansion_seal(maelys_orchestrator_expansion_t* e) {
  json_t* grants = json_array();
  for (size_t i = 0; i < e->grant_count; i++)
    json_array_append_new(
        grants,
        json_pack("{s:s, s:s, s:s, s:s, s:s}", "path", e->grants[i].path,
                  "access", access_name(e->grants[i].access), "scope",
                  scope_name(e->grants[i].scope), "asked", e->grants[i].asked,
                  "reason", e->grants[i].reason));
  json_t* doc =
      json_pack("{s:s, s:s, s:s, s:o, s:o}", "format", EXPANSION_FORMAT,
                "base_plan_digest", e->base_digest, "backend", e->backend,
                "grants", grants, "network",
                e->network_inherit ? json_pack("{s:s, s:s}", "mode", "inherit",
                                               "reason", e->network_reason)
                                   : json_null());
  e->json = doc ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  json_decref(doc);
  if (e->json == NULL)
    return -1;
  maelys__orch_sha256(e->json, strlen(e->json), e->digest);
  return 0;
}

/* Adds a grant, merging: a grant inside a recursive grant of at least the
 * same access adds nothing; a stronger one replaces what it covers. */
static int add_grant(maelys_orchestrator_expansion_t* e, const orch_grant_t* g,
                     const char* asked, const char* reason) {
  for (size_t i = 0; i < e->grant_count; i++) {
    orch_grant_t* o = &e->grants[i];
    if (o->scope == MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY &&
        maelys__orch_within(g->path, o->path) && o->access >= g->access)
      return 0;
  }
  size_t k = 0;
  for (size_t i = 0; i < e->grant_count; i++) {
    orch_grant_t* o = &e->grants[i];
    if (g->scope == MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY &&
        maelys__orch_within(o->path, g->path) && g->access >= o->access)
      grant_free(o);
    else
      e->grants[k++] = *o;
  }
  e->grant_count = k;
  orch_grant_t* n = realloc(e->grants, (k + 1) * sizeof *n);
  if (n == NULL)
    return -1;
  e->grants = n;
  n[k] =
      (orch_grant_t){maelys__orch_strdup(g->path), g->access, g->scope,
                     maelys__orch_strdup(asked), maelys__orch_strdup(reason)};
  if (!n[k].path || !n[k].asked || !n[k].reason) {
    grant_free(&n[k]);
    return -1;
  }
  e->grant_count++;
  return 0;
}

maelys_executor_result_t
maelys__orch_check(const maelys_orchestrator_boundary_t* b,
                   const orch_declared_t* declared, size_t count,
                   const maelys_execution_request_t* request,
                   maelys_orchestrator_check_t** out_check, char** out_error) {
  *out_check = NULL;
  view_t w;
  if (view_build(&w, b->plan, NULL, 0, &b->fs) != 0)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                             "out of memory");
  maelys_orchestrator_check_t* c = calloc(1, sizeof *c);
  maelys_orchestrator_expansion_t* e = calloc(1, sizeof *e);
  size_t total = count + (request ? 2 : 0);
  item_t* items = calloc(total + 1, sizeof *items);
  const char** kinds = calloc(total + 1, sizeof *kinds);
  const char** asked = calloc(total + 1, sizeof *asked);
  maelys_executor_result_t res = MAELYS_EXECUTOR_OK;
  if (c == NULL || e == NULL || items == NULL || kinds == NULL ||
      asked == NULL || (c->items = json_array()) == NULL ||
      (e->base_digest = maelys__orch_strdup(b->digest)) == NULL ||
      (e->backend = maelys__orch_strdup(b->backend)) == NULL) {
    res = maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                            "out of memory");
    goto out;
  }
  size_t n = 0;
  if (request != NULL) {
    kinds[n] = "execute";
    asked[n] = maelys_execution_request_executable(request);
    check_path(b, &w, ORCH_READ, asked[n], &items[n]);
    n++;
    kinds[n] = "cwd";
    asked[n] = maelys_execution_request_cwd(request);
    check_path(b, &w, ORCH_READ, asked[n], &items[n]);
    n++;
  }
  for (size_t i = 0; i < count; i++, n++) {
    const orch_declared_t* d = &declared[i];
    asked[n] = d->path_or_host;
    if (d->kind == 3) {
      kinds[n] = "connect";
      check_connect(b, d->path_or_host, d->port, &items[n]);
    } else {
      kinds[n] = d->kind == 2 ? "write" : "read";
      check_path(b, &w, d->kind == 2 ? ORCH_WRITE : ORCH_READ, d->path_or_host,
                 &items[n]);
    }
  }
  c->verdict = MAELYS_ORCHESTRATOR_ALLOWED;
  const char* first_reason = NULL;
  for (size_t i = 0; i < n; i++) {
    json_array_append_new(
        c->items,
        json_pack("{s:s, s:s, s:s, s:s, s:s}", "operation", kinds[i], "asked",
                  asked[i] ? asked[i] : "", "resolved", items[i].resolved,
                  "verdict",
                  items[i].verdict == MAELYS_ORCHESTRATOR_ALLOWED ? "allowed"
                  : items[i].verdict == MAELYS_ORCHESTRATOR_REFUSED
                      ? "refused"
                      : "boundary-required",
                  "reason", items[i].reason));
    if (items[i].verdict == MAELYS_ORCHESTRATOR_REFUSED &&
        c->verdict != MAELYS_ORCHESTRATOR_REFUSED) {
      c->verdict = MAELYS_ORCHESTRATOR_REFUSED;
      first_reason = items[i].reason;
    }
    if (items[i].verdict == MAELYS_ORCHESTRATOR_BOUNDARY_REQUIRED) {
      if (c->verdict == MAELYS_ORCHESTRATOR_ALLOWED) {
        c->verdict = MAELYS_ORCHESTRATOR_BOUNDARY_REQUIRED;
        first_reason = items[i].reason;
      }
      if (items[i].network) {
        e->network_inherit = true;
        free(e->network_reason);
        e->network_reason = maelys__orch_strdup(items[i].reason);
      } else if (items[i].has_grant &&
                 add_grant(e, &items[i].grant, asked[i], items[i].reason)) {
        res = maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                "out of memory");
        goto out;
      }
    }
  }
  if (c->verdict == MAELYS_ORCHESTRATOR_BOUNDARY_REQUIRED) {
    /* The expansion must allow every access, applied the way the backend
     * applies rules; if it does not, nothing expressible does. */
    view_t after;
    if (view_build(&after, b->plan, e->grants, e->grant_count, &b->fs) != 0) {
      res = maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                              "out of memory");
      goto out;
    }
    for (size_t i = 0; i < n && c->verdict != MAELYS_ORCHESTRATOR_REFUSED;
         i++) {
      if (items[i].verdict != MAELYS_ORCHESTRATOR_BOUNDARY_REQUIRED ||
          items[i].network)
        continue;
      resolved_t r;
      orch_access_t a = strcmp(kinds[i], "write") == 0 ? ORCH_WRITE : ORCH_READ;
      if (path_verdict(&after, a, items[i].resolved, &r) !=
          MAELYS_ORCHESTRATOR_ALLOWED) {
        c->verdict = MAELYS_ORCHESTRATOR_REFUSED;
        snprintf(items[i].reason, sizeof items[i].reason,
                 "%s '%s': no grant the backend can express allows it (a "
                 "deeper rule of the plan would still cover it)",
                 kinds[i], asked[i]);
        first_reason = items[i].reason;
      }
    }
    free(after.v);
  }
  if (first_reason == NULL && n == 1)
    first_reason = items[0].reason;
  c->reason = maelys__orch_strdup(
      first_reason ? first_reason : "every access is allowed by the plan");
  if (c->verdict == MAELYS_ORCHESTRATOR_BOUNDARY_REQUIRED) {
    if (expansion_seal(e) != 0) {
      res = maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                              "out of memory");
      goto out;
    }
    c->expansion = e;
    e = NULL;
  }
  *out_check = c;
  c = NULL;
out:
  free(w.v);
  free(items);
  free(kinds);
  free(asked);
  expansion_free(e);
  maelys_orchestrator_check_destroy(c);
  return res;
}

static maelys_executor_result_t one(const maelys_orchestrator_boundary_t* b,
                                    int kind, const char* what, unsigned port,
                                    maelys_orchestrator_check_t** out_check,
                                    char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (out_check == NULL || b == NULL)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "boundary and out_check are required");
  orch_declared_t d = {kind, (char*)what, port};
  return maelys__orch_check(b, &d, 1, NULL, out_check, out_error);
}

maelys_executor_result_t maelys_orchestrator_boundary_allows_read(
    const maelys_orchestrator_boundary_t* b, const char* path,
    maelys_orchestrator_check_t** out, char** out_error) {
  return one(b, 1, path, 0, out, out_error);
}

maelys_executor_result_t maelys_orchestrator_boundary_allows_write(
    const maelys_orchestrator_boundary_t* b, const char* path,
    maelys_orchestrator_check_t** out, char** out_error) {
  return one(b, 2, path, 0, out, out_error);
}

maelys_executor_result_t maelys_orchestrator_boundary_allows_connect(
    const maelys_orchestrator_boundary_t* b, const char* host, unsigned port,
    maelys_orchestrator_check_t** out, char** out_error) {
  return one(b, 3, host, port, out, out_error);
}

maelys_executor_result_t maelys_orchestrator_boundary_allows_request(
    const maelys_orchestrator_boundary_t* b,
    const maelys_execution_request_t* request,
    maelys_orchestrator_check_t** out, char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (out == NULL || b == NULL || request == NULL)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "boundary, request and out are required");
  return maelys__orch_check(b, NULL, 0, request, out, out_error);
}

maelys_orchestrator_verdict_t
maelys_orchestrator_check_verdict(const maelys_orchestrator_check_t* c) {
  return c ? c->verdict : MAELYS_ORCHESTRATOR_REFUSED;
}

const char*
maelys_orchestrator_check_reason(const maelys_orchestrator_check_t* c) {
  return c ? c->reason : NULL;
}

const maelys_orchestrator_expansion_t*
maelys_orchestrator_check_expansion(const maelys_orchestrator_check_t* c) {
  return c ? c->expansion : NULL;
}

maelys_executor_result_t
maelys_orchestrator_check_to_json(const maelys_orchestrator_check_t* c,
                                  char** out_json, char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (c == NULL || out_json == NULL)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "check and out_json are required");
  json_t* exp =
      c->expansion ? json_loads(c->expansion->json, 0, NULL) : json_null();
  json_t* doc = json_pack(
      "{s:s, s:s, s:O, s:o, s:o}", "verdict",
      c->verdict == MAELYS_ORCHESTRATOR_ALLOWED   ? "allowed"
      : c->verdict == MAELYS_ORCHESTRATOR_REFUSED ? "refused"
                                                  : "boundary-required",
      "reason", c->reason, "checks", c->items, "expansion",
      exp ? exp : json_null(), "expansion_digest",
      c->expansion ? json_string(c->expansion->digest) : json_null());
  *out_json =
      doc ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
  json_decref(doc);
  return *out_json ? MAELYS_EXECUTOR_OK
                   : maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                       "out of memory");
}

void maelys_orchestrator_check_destroy(maelys_orchestrator_check_t* c) {
  if (c == NULL)
    return;
  free(c->reason);
  expansion_free(c->expansion);
  json_decref(c->items);
  free(c);
}

const char*
maelys_orchestrator_expansion_json(const maelys_orchestrator_expansion_t* e) {
  return e ? e->json : NULL;
}

const char*
maelys_orchestrator_expansion_digest(const maelys_orchestrator_expansion_t* e) {
  return e ? e->digest : NULL;
}

/* ------------------------------------------------------------ transform */

maelys_executor_result_t
maelys__orch_apply(const maelys_executor_plan_t* base,
                   const maelys_orchestrator_expansion_t* e,
                   const char* decision_digest, maelys_executor_plan_t** out,
                   char** out_error) {
  *out = NULL;
  char* text = NULL;
  maelys_executor_result_t r =
      maelys_executor_plan_to_json(base, &text, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  json_t* doc = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
  maelys_executor_string_free(text);
  if (doc == NULL)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                             "cannot read the active plan's JSON form");
  /* A copy without its digest: a new, unsealed plan. */
  json_object_del(doc, "digest");
  json_object_set_new(doc, "decision_digest", json_string(decision_digest));
  json_t* rules = json_object_get(doc, "rules");
  if (rules == NULL) {
    rules = json_array();
    json_object_set_new(doc, "rules", rules);
  }
  for (size_t g = 0; g < e->grant_count; g++) {
    const orch_grant_t* gr = &e->grants[g];
    bool replaced = false;
    size_t i;
    json_t* rule;
    json_array_foreach(rules, i, rule) {
      const char* p = json_string_value(json_object_get(rule, "path"));
      if (p != NULL && strcmp(p, gr->path) == 0) {
        json_object_set_new(rule, "access",
                            json_string(access_name(gr->access)));
        replaced = true;
      }
    }
    if (!replaced)
      json_array_append_new(rules,
                            json_pack("{s:s, s:s, s:s}", "path", gr->path,
                                      "access", access_name(gr->access),
                                      "scope", scope_name(gr->scope)));
  }
  maelys_executor_network_t net = maelys_executor_plan_network(base);
  if (e->network_inherit) {
    net = MAELYS_EXECUTOR_NETWORK_INHERIT;
    json_t* n = json_object_get(doc, "network");
    if (json_is_object(n))
      json_object_set_new(n, "mode", json_string("inherit"));
  }
  text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(doc);
  if (text == NULL)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                             "out of memory");
  maelys_executor_plan_t* plan = NULL;
  r = maelys_executor_plan_from_json(text, strlen(text), &plan, out_error);
  free(text);
  /* The network is always set explicitly, never left to a default. */
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_plan_set_network(plan, net, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_plan_seal(plan, out_error);
  if (r != MAELYS_EXECUTOR_OK) {
    maelys_executor_plan_destroy(plan);
    return r;
  }
  *out = plan;
  return MAELYS_EXECUTOR_OK;
}
