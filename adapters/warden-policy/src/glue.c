/*
 * The glue: a compiled maelys_sandbox_policy_plan_t, read only through the
 * library's public accessors, copied value by value into the adapter's
 * decision type and lowered by the pure mapping. Every library enumeration
 * value is translated by an explicit switch whose default is an error, so a
 * newer library cannot slip an unknown access, scope, network or root mode
 * through (fail closed).
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "maelys/warden_policy_adapter.h"

#include "glue-internal.h"
#include "internal.h"

maelys_executor_result_t
maelys__warden_policy_library_fail(char** out_error, maelys_mir_result_t result,
                                   char* inner, const char* format, ...) {
  maelys_executor_result_t mapped;
  switch (result) {
  case MAELYS_MIR_ERR_MEMORY:
    mapped = MAELYS_EXECUTOR_ERR_MEMORY;
    break;
  case MAELYS_MIR_ERR_IO:
    mapped = MAELYS_EXECUTOR_ERR_IO;
    break;
  case MAELYS_MIR_ERR_UNSUPPORTED:
    mapped = MAELYS_EXECUTOR_ERR_UNSUPPORTED;
    break;
  case MAELYS_MIR_ERR_MISSING:
    mapped = MAELYS_EXECUTOR_ERR_NOT_FOUND;
    break;
  default:
    mapped = MAELYS_EXECUTOR_ERR_ARGUMENT;
    break;
  }
  if (out_error != NULL && *out_error == NULL) {
    char outer[1024];
    va_list ap;
    va_start(ap, format);
    vsnprintf(outer, sizeof outer, format, ap);
    va_end(ap);
    maelys__warden_policy_fail(out_error, mapped, "%s: %s (%s)", outer,
                               inner ? inner : "no diagnostic",
                               maelys_mir_result_name(result));
  }
  maelys_mir_error_free(inner);
  return mapped;
}

/* ---------------------------------------------------------- capabilities */

static const struct {
  uint64_t portable;
  maelys_sandbox_policy_capabilities_t library;
} library_bits[] = {
    {MAELYS_WARDEN_POLICY_CAP_FS_READ, MAELYS_SANDBOX_POLICY_CAP_FS_READ},
    {MAELYS_WARDEN_POLICY_CAP_FS_WRITE, MAELYS_SANDBOX_POLICY_CAP_FS_WRITE},
    {MAELYS_WARDEN_POLICY_CAP_FS_DENY, MAELYS_SANDBOX_POLICY_CAP_FS_DENY},
    {MAELYS_WARDEN_POLICY_CAP_NETWORK_NONE,
     MAELYS_SANDBOX_POLICY_CAP_NETWORK_NONE},
    {MAELYS_WARDEN_POLICY_CAP_NETWORK_DIRECT,
     MAELYS_SANDBOX_POLICY_CAP_NETWORK_DIRECT},
    {MAELYS_WARDEN_POLICY_CAP_NETWORK_MEDIATED,
     MAELYS_SANDBOX_POLICY_CAP_NETWORK_MEDIATED},
    {MAELYS_WARDEN_POLICY_CAP_PROCESS_TREE,
     MAELYS_SANDBOX_POLICY_CAP_PROCESS_TREE},
    {MAELYS_WARDEN_POLICY_CAP_ROOT_EPHEMERAL_WRITE,
     MAELYS_SANDBOX_POLICY_CAP_ROOT_EPHEMERAL_WRITE},
};

maelys_executor_result_t maelys_warden_policy_library_capabilities(
    uint64_t capabilities, maelys_sandbox_policy_capabilities_t* out,
    char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (out == NULL)
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "out is NULL");
  *out = 0;
  if (capabilities & ~MAELYS_WARDEN_POLICY_CAP_ALL)
    return maelys__warden_policy_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "portable capabilities 0x%llx hold bits this adapter does not define",
        (unsigned long long)(capabilities & ~MAELYS_WARDEN_POLICY_CAP_ALL));
  maelys_sandbox_policy_capabilities_t bits = 0;
  for (size_t i = 0; i < sizeof library_bits / sizeof library_bits[0]; i++)
    if (capabilities & library_bits[i].portable)
      bits |= library_bits[i].library;
  *out = bits;
  return MAELYS_EXECUTOR_OK;
}

/* ------------------------------------------------------------ host context */

static bool known_mediator(const char* id) {
  return strcmp(id, MAELYS_WARDEN_POLICY_FD4_MEDIATOR_ID) == 0 ||
         strcmp(id, MAELYS_WARDEN_POLICY_EGRESS_MEDIATOR_ID) == 0;
}

maelys_executor_result_t maelys_warden_policy_host_context_create(
    const maelys_warden_policy_host_t* host,
    maelys_sandbox_policy_host_t** out_context, char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (out_context == NULL)
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "out_context is NULL");
  *out_context = NULL;
  if (host == NULL || (host->minimal_runtime_root_count > 0 &&
                       host->minimal_runtime_roots == NULL))
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "the host roots are required");
  if (host->mediator_id != NULL && !known_mediator(host->mediator_id))
    return maelys__warden_policy_fail(
        out_error, MAELYS_EXECUTOR_ERR_DENIED,
        "mediator '%s' is neither '%s' nor '%s': an arbitrary mediator is "
        "never discarded or rebound",
        host->mediator_id, MAELYS_WARDEN_POLICY_FD4_MEDIATOR_ID,
        MAELYS_WARDEN_POLICY_EGRESS_MEDIATOR_ID);
  maelys_sandbox_policy_host_t* ctx = NULL;
  char* e = NULL;
  maelys_mir_result_t r = maelys_sandbox_policy_host_create(&ctx, &e);
  if (r != MAELYS_MIR_OK)
    return maelys__warden_policy_library_fail(out_error, r, e,
                                              "creating the host context");
  if (host->workspace != NULL) {
    r = maelys_sandbox_policy_host_set_workspace(ctx, host->workspace, &e);
    if (r != MAELYS_MIR_OK) {
      maelys_sandbox_policy_host_destroy(ctx);
      return maelys__warden_policy_library_fail(
          out_error, r, e, "workspace root '%s'", host->workspace);
    }
  }
  if (host->temp != NULL) {
    r = maelys_sandbox_policy_host_set_temp(ctx, host->temp, &e);
    if (r != MAELYS_MIR_OK) {
      maelys_sandbox_policy_host_destroy(ctx);
      return maelys__warden_policy_library_fail(out_error, r, e,
                                                "temp root '%s'", host->temp);
    }
  }
  for (size_t i = 0; i < host->minimal_runtime_root_count; i++) {
    const char* root = host->minimal_runtime_roots[i];
    r = maelys_sandbox_policy_host_add_minimal_runtime_root(ctx, root, &e);
    if (r != MAELYS_MIR_OK) {
      maelys_sandbox_policy_host_destroy(ctx);
      return maelys__warden_policy_library_fail(
          out_error, r, e, "minimal-runtime root '%s'", root ? root : "(null)");
    }
  }
  if (host->mediator_id != NULL) {
    r = maelys_sandbox_policy_host_set_network_mediator(ctx, host->mediator_id,
                                                        &e);
    if (r != MAELYS_MIR_OK) {
      maelys_sandbox_policy_host_destroy(ctx);
      return maelys__warden_policy_library_fail(out_error, r, e, "mediator");
    }
  }
  *out_context = ctx;
  return MAELYS_EXECUTOR_OK;
}

/* ------------------------------------------------------------- decisions */

typedef struct decision_store {
  maelys_warden_policy_decision_t decision;
  maelys_warden_policy_rule_t* rules;
  maelys_warden_policy_destination_t* destinations;
} decision_store_t;

static void store_free(decision_store_t* s) {
  free(s->rules);
  free(s->destinations);
}

/* What the resolved path is now. The library resolved every symbolic link at
 * compilation; a link found here appeared since, and is refused rather than
 * followed. */
static maelys_executor_result_t classify(const char* path, size_t index,
                                         maelys_warden_policy_node_t* out,
                                         char** out_error) {
  struct stat st;
  if (lstat(path, &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      *out = MAELYS_WARDEN_POLICY_NODE_ABSENT;
      return MAELYS_EXECUTOR_OK;
    }
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                      "policy rule %zu: cannot examine '%s': "
                                      "%s",
                                      index, path, strerror(errno));
  }
  if (S_ISLNK(st.st_mode))
    return maelys__warden_policy_fail(
        out_error, MAELYS_EXECUTOR_ERR_DENIED,
        "policy rule %zu: '%s' is a symbolic link now, but it was resolved at "
        "compilation: it changed, refused rather than followed",
        index, path);
  *out = S_ISDIR(st.st_mode) ? MAELYS_WARDEN_POLICY_NODE_DIRECTORY
                             : MAELYS_WARDEN_POLICY_NODE_FILE;
  return MAELYS_EXECUTOR_OK;
}

static maelys_executor_result_t
copy_rules(const maelys_sandbox_policy_plan_t* p, decision_store_t* s,
           char** out_error) {
  size_t n = maelys_sandbox_policy_plan_rule_count(p);
  if (n == 0)
    return MAELYS_EXECUTOR_OK;
  s->rules = calloc(n, sizeof *s->rules);
  if (s->rules == NULL)
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                      "out of memory copying the rules");
  for (size_t i = 0; i < n; i++) {
    maelys_sandbox_policy_resolved_rule_view_t v;
    memset(&v, 0, sizeof v);
    maelys_mir_result_t lr = maelys_sandbox_policy_plan_rule_at(p, i, &v);
    if (lr != MAELYS_MIR_OK)
      return maelys__warden_policy_library_fail(out_error, lr, NULL,
                                                "reading policy rule %zu", i);
    maelys_warden_policy_rule_t* r = &s->rules[i];
    switch ((int)v.access) {
    case MAELYS_MIR_FS_READ:
      r->access = MAELYS_WARDEN_POLICY_ACCESS_READ;
      break;
    case MAELYS_MIR_FS_WRITE:
      r->access = MAELYS_WARDEN_POLICY_ACCESS_WRITE;
      break;
    case MAELYS_MIR_FS_DENY:
      r->access = MAELYS_WARDEN_POLICY_ACCESS_DENY;
      break;
    default:
      return maelys__warden_policy_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "policy rule %zu on '%s': unknown access %d", i,
          v.path ? v.path : "(null)", (int)v.access);
    }
    switch ((int)v.scope) {
    case MAELYS_MIR_SCOPE_TREE:
      r->scope = MAELYS_WARDEN_POLICY_SCOPE_TREE;
      break;
    case MAELYS_MIR_SCOPE_EXACT:
      r->scope = MAELYS_WARDEN_POLICY_SCOPE_EXACT;
      break;
    default:
      return maelys__warden_policy_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "policy rule %zu on '%s': unknown scope %d", i,
          v.path ? v.path : "(null)", (int)v.scope);
    }
    if (v.path == NULL || v.path[0] != '/')
      return maelys__warden_policy_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "policy rule %zu: the path '%s' is not absolute", i,
          v.path ? v.path : "(null)");
    r->path = v.path;
    maelys_executor_result_t cr = classify(v.path, i, &r->node, out_error);
    if (cr != MAELYS_EXECUTOR_OK)
      return cr;
  }
  s->decision.rules = s->rules;
  s->decision.rule_count = n;
  return MAELYS_EXECUTOR_OK;
}

static maelys_executor_result_t
copy_network(const maelys_sandbox_policy_plan_t* p, decision_store_t* s,
             char** out_error) {
  maelys_mir_network_mode_t mode = maelys_sandbox_policy_plan_network(p);
  switch ((int)mode) {
  case MAELYS_MIR_NETWORK_NONE:
    s->decision.network = MAELYS_WARDEN_POLICY_NETWORK_NONE;
    break;
  case MAELYS_MIR_NETWORK_DIRECT:
    s->decision.network = MAELYS_WARDEN_POLICY_NETWORK_DIRECT;
    break;
  case MAELYS_MIR_NETWORK_MEDIATED:
    s->decision.network = MAELYS_WARDEN_POLICY_NETWORK_MEDIATED;
    break;
  default:
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "the policy plan's network mode %d is "
                                      "unknown",
                                      (int)mode);
  }
  s->decision.mediator_id = maelys_sandbox_policy_plan_network_mediator(p);
  size_t n = maelys_sandbox_policy_plan_network_destination_count(p);
  if (n == 0)
    return MAELYS_EXECUTOR_OK;
  s->destinations = calloc(n, sizeof *s->destinations);
  if (s->destinations == NULL)
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                      "out of memory copying destinations");
  for (size_t i = 0; i < n; i++) {
    maelys_mir_network_destination_view_t v;
    memset(&v, 0, sizeof v);
    maelys_mir_result_t lr =
        maelys_sandbox_policy_plan_network_destination_at(p, i, &v);
    if (lr != MAELYS_MIR_OK)
      return maelys__warden_policy_library_fail(
          out_error, lr, NULL, "reading network destination %zu", i);
    if ((int)v.protocol != MAELYS_MIR_NETWORK_PROTOCOL_TCP)
      return maelys__warden_policy_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "network destination %zu (%s:%u): unknown protocol %d", i,
          v.host ? v.host : "(null)", (unsigned)v.port, (int)v.protocol);
    s->destinations[i].protocol = MAELYS_WARDEN_POLICY_PROTOCOL_TCP;
    s->destinations[i].host = v.host;
    s->destinations[i].port = v.port;
  }
  s->decision.destinations = s->destinations;
  s->decision.destination_count = n;
  return MAELYS_EXECUTOR_OK;
}

static maelys_executor_result_t
copy_decision(const maelys_sandbox_policy_plan_t* p, decision_store_t* s,
              char** out_error) {
  memset(s, 0, sizeof *s);
  maelys_executor_result_t r = copy_rules(p, s, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = copy_network(p, s, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  maelys_mir_root_mode_t root = maelys_sandbox_policy_plan_root_mode(p);
  switch ((int)root) {
  case MAELYS_MIR_ROOT_READ_ONLY:
    s->decision.root = MAELYS_WARDEN_POLICY_ROOT_READ_ONLY;
    break;
  case MAELYS_MIR_ROOT_EPHEMERAL_WRITE:
    s->decision.root = MAELYS_WARDEN_POLICY_ROOT_EPHEMERAL_WRITE;
    break;
  default:
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "the policy plan's root mode %d is "
                                      "unknown",
                                      (int)root);
  }
  s->decision.process_tree_required =
      maelys_sandbox_policy_plan_process_tree_required(p) != 0;
  s->decision.mir_digest = maelys_sandbox_policy_plan_mir_digest(p);
  return MAELYS_EXECUTOR_OK;
}

/* ----------------------------------------------------------- source MIR */

/* realpath(), with an absent path (ENOENT, ENOTDIR: what the library skips)
 * told apart from every other failure (which it never skips). */
static maelys_executor_result_t resolve(const char* path, char** out,
                                        char** out_error) {
  *out = realpath(path, NULL);
  if (*out != NULL || errno == ENOENT || errno == ENOTDIR)
    return MAELYS_EXECUTOR_OK;
  return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                    "cannot resolve '%s': %s", path,
                                    strerror(errno));
}

static const char* root_name(maelys_mir_path_root_t root) {
  switch ((int)root) {
  case MAELYS_MIR_ROOT_MINIMAL_RUNTIME:
    return "minimal-runtime";
  case MAELYS_MIR_ROOT_WORKSPACE:
    return "workspace";
  case MAELYS_MIR_ROOT_TEMP:
    return "temp";
  case MAELYS_MIR_ROOT_HOST:
    return "host";
  default:
    return NULL;
  }
}

typedef struct deny_list {
  maelys_warden_policy_source_deny_t* items;
  char** strings; /* names and paths, owned */
  size_t count, capacity, string_count, string_capacity;
} deny_list_t;

static void deny_list_free(deny_list_t* l) {
  for (size_t i = 0; i < l->string_count; i++)
    free(l->strings[i]);
  free(l->strings);
  free(l->items);
}

static int keep_string(deny_list_t* l, char* s) {
  if (s == NULL)
    return -1;
  if (l->string_count == l->string_capacity) {
    size_t cap = l->string_capacity ? l->string_capacity * 2 : 16;
    char** p = realloc(l->strings, cap * sizeof *p);
    if (p == NULL) {
      free(s);
      return -1;
    }
    l->strings = p;
    l->string_capacity = cap;
  }
  l->strings[l->string_count++] = s;
  return 0;
}

/* One source DENY resolved against one root directory (NULL for host
 * rules, whose relative path is absolute). */
static maelys_executor_result_t
add_source_deny(deny_list_t* l, const maelys_mir_fs_rule_view_t* v,
                const char* root_dir, char** out_error) {
  char* candidate = NULL;
  char* root = NULL;
  maelys_executor_result_t r = MAELYS_EXECUTOR_OK;
  if (root_dir != NULL) {
    r = resolve(root_dir, &root, out_error);
    if (r != MAELYS_EXECUTOR_OK)
      return r;
    if (root == NULL)
      return maelys__warden_policy_fail(
          out_error, MAELYS_EXECUTOR_ERR_NOT_FOUND,
          "%s root '%s' does not exist", root_name(v->root), root_dir);
  }
  const char* rel = v->relative ? v->relative : "";
  size_t n = (root ? strlen(root) : 0) + 1 + strlen(rel) + 1;
  char* joined = malloc(n);
  if (joined == NULL) {
    free(root);
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                      "out of memory");
  }
  if (root != NULL && rel[0] != '\0')
    snprintf(joined, n, "%s/%s", root, rel);
  else
    snprintf(joined, n, "%s", root != NULL ? root : rel);
  r = resolve(joined, &candidate, out_error);
  free(joined);
  if (r != MAELYS_EXECUTOR_OK) {
    free(root);
    return r;
  }
  char name[PATH_MAX + 64];
  if (v->root == MAELYS_MIR_ROOT_MINIMAL_RUNTIME)
    snprintf(name, sizeof name, "deny minimal-runtime(%s):%s", root, rel);
  else
    snprintf(name, sizeof name, "deny %s:%s", root_name(v->root), rel);
  free(root);
  size_t len = strlen(name) + 1;
  char* name_copy = malloc(len);
  if (name_copy != NULL)
    memcpy(name_copy, name, len);
  /* keep_string() frees what it cannot keep. */
  if (keep_string(l, name_copy) != 0) {
    free(candidate);
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                      "out of memory");
  }
  if (candidate != NULL && keep_string(l, candidate) != 0)
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                      "out of memory");
  if (l->count == l->capacity) {
    size_t cap = l->capacity ? l->capacity * 2 : 8;
    maelys_warden_policy_source_deny_t* p = realloc(l->items, cap * sizeof *p);
    if (p == NULL)
      return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                        "out of memory");
    l->items = p;
    l->capacity = cap;
  }
  l->items[l->count++] = (maelys_warden_policy_source_deny_t){
      name_copy, candidate,
      v->scope == MAELYS_MIR_SCOPE_EXACT ? MAELYS_WARDEN_POLICY_SCOPE_EXACT
                                         : MAELYS_WARDEN_POLICY_SCOPE_TREE};
  return MAELYS_EXECUTOR_OK;
}

/* Every DENY of the source MIR, resolved against the host's roots as the
 * library resolves them. */
static maelys_executor_result_t
source_denies(const maelys_mir_t* mir, const maelys_warden_policy_host_t* host,
              deny_list_t* l, char** out_error) {
  size_t n = maelys_mir_fs_rule_count(mir);
  for (size_t i = 0; i < n; i++) {
    maelys_mir_fs_rule_view_t v;
    memset(&v, 0, sizeof v);
    maelys_mir_result_t lr = maelys_mir_fs_rule_at(mir, i, &v);
    if (lr != MAELYS_MIR_OK)
      return maelys__warden_policy_library_fail(out_error, lr, NULL,
                                                "reading source rule %zu", i);
    if ((int)v.access != MAELYS_MIR_FS_DENY)
      continue;
    if ((int)v.scope != MAELYS_MIR_SCOPE_EXACT &&
        (int)v.scope != MAELYS_MIR_SCOPE_TREE)
      return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                        "source rule %zu: unknown scope %d", i,
                                        (int)v.scope);
    const char* root = NULL;
    maelys_executor_result_t r = MAELYS_EXECUTOR_OK;
    switch ((int)v.root) {
    case MAELYS_MIR_ROOT_MINIMAL_RUNTIME:
      for (size_t j = 0;
           j < host->minimal_runtime_root_count && r == MAELYS_EXECUTOR_OK; j++)
        r = add_source_deny(l, &v, host->minimal_runtime_roots[j], out_error);
      if (r != MAELYS_EXECUTOR_OK)
        return r;
      continue;
    case MAELYS_MIR_ROOT_WORKSPACE:
      root = host->workspace;
      break;
    case MAELYS_MIR_ROOT_TEMP:
      root = host->temp;
      break;
    case MAELYS_MIR_ROOT_HOST:
      r = add_source_deny(l, &v, NULL, out_error);
      if (r != MAELYS_EXECUTOR_OK)
        return r;
      continue;
    default:
      return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                        "source rule %zu: unknown root %d", i,
                                        (int)v.root);
    }
    if (root == NULL)
      return maelys__warden_policy_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "source rule deny %s:%s: the host gives no %s root",
          root_name(v.root), v.relative ? v.relative : "", root_name(v.root));
    r = add_source_deny(l, &v, root, out_error);
    if (r != MAELYS_EXECUTOR_OK)
      return r;
  }
  return MAELYS_EXECUTOR_OK;
}

/* The run options plus a symbolic link for each minimal-runtime root that is
 * one on the host (merged-/usr: /lib -> usr/lib), unless the run already
 * places something there. The library resolves such a root to its target,
 * so without the link a program's interpreter path (/lib64/ld-linux...)
 * would not exist inside. */
static maelys_executor_result_t
with_runtime_links(const maelys_warden_policy_options_t* run,
                   const maelys_warden_policy_host_t* host,
                   maelys_warden_policy_options_t* out, char*** out_targets,
                   char** out_error) {
  *out = run ? *run : (maelys_warden_policy_options_t){0};
  *out_targets = NULL;
  size_t base = out->mount_count;
  size_t n = host->minimal_runtime_root_count;
  if (n == 0)
    return MAELYS_EXECUTOR_OK;
  maelys_warden_policy_mount_t* mounts = calloc(base + n, sizeof *mounts);
  char** targets = calloc(n + 1, sizeof *targets);
  if (mounts == NULL || targets == NULL) {
    free(mounts);
    free(targets);
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                      "out of memory");
  }
  if (base > 0)
    memcpy(mounts, out->mounts, base * sizeof *mounts);
  size_t count = base, t = 0;
  for (size_t i = 0; i < n; i++) {
    const char* root = host->minimal_runtime_roots[i];
    struct stat st;
    if (root == NULL || lstat(root, &st) != 0 || !S_ISLNK(st.st_mode))
      continue;
    bool placed = false;
    for (size_t j = 0; j < count && !placed; j++)
      placed = mounts[j].destination != NULL &&
               strcmp(mounts[j].destination, root) == 0;
    if (placed)
      continue;
    char text[PATH_MAX];
    ssize_t len = readlink(root, text, sizeof text - 1);
    if (len <= 0) {
      for (size_t k = 0; k < t; k++)
        free(targets[k]);
      free(targets);
      free(mounts);
      return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                        "minimal-runtime root '%s': cannot "
                                        "read the link: %s",
                                        root, strerror(errno));
    }
    text[len] = '\0';
    targets[t] = malloc((size_t)len + 1);
    if (targets[t] == NULL) {
      for (size_t k = 0; k < t; k++)
        free(targets[k]);
      free(targets);
      free(mounts);
      return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                        "out of memory");
    }
    memcpy(targets[t], text, (size_t)len + 1);
    mounts[count++] = (maelys_warden_policy_mount_t){
        MAELYS_WARDEN_POLICY_MOUNT_SYMLINK, root, targets[t], 0};
    t++;
  }
  out->mounts = mounts;
  out->mount_count = count;
  *out_targets = targets;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t maelys_warden_plan_from_sandbox_policy(
    const maelys_sandbox_policy_plan_t* policy_plan,
    const maelys_warden_sandbox_policy_options_t* options,
    maelys_executor_plan_t** out_sealed_plan, char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (out_sealed_plan == NULL)
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "out_sealed_plan is NULL");
  *out_sealed_plan = NULL;
  if (policy_plan == NULL || options == NULL)
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "the policy plan and options are "
                                      "required");
  if (options->source_mir == NULL)
    return maelys__warden_policy_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "the source MIR is required: Sandbox Policy ABI 4 drops an "
        "absent-path DENY from the compiled plan, so the plan alone cannot "
        "show it");
  if (options->host == NULL || (options->host->minimal_runtime_root_count > 0 &&
                                options->host->minimal_runtime_roots == NULL))
    return maelys__warden_policy_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "the host roots the plan was compiled with are required");

  /* The source MIR must be the one compiled: same canonical digest. */
  char digest[MAELYS_MIR_DIGEST_HEX_SIZE];
  char* e = NULL;
  maelys_mir_result_t lr =
      maelys_mir_digest_hex(options->source_mir, digest, &e);
  if (lr != MAELYS_MIR_OK)
    return maelys__warden_policy_library_fail(out_error, lr, e,
                                              "digest of the source MIR");
  const char* plan_digest = maelys_sandbox_policy_plan_mir_digest(policy_plan);
  if (plan_digest == NULL || strcmp(plan_digest, digest) != 0)
    return maelys__warden_policy_fail(
        out_error, MAELYS_EXECUTOR_ERR_DENIED,
        "the source MIR (sha256:%s) is not the one the plan was compiled from "
        "(sha256:%s)",
        digest, plan_digest ? plan_digest : "(none)");

  decision_store_t store;
  maelys_executor_result_t r = copy_decision(policy_plan, &store, out_error);
  deny_list_t denies;
  memset(&denies, 0, sizeof denies);
  if (r == MAELYS_EXECUTOR_OK)
    r = source_denies(options->source_mir, options->host, &denies, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_warden_policy_check_source_denies(denies.items, denies.count,
                                                 &store.decision, out_error);
  maelys_warden_policy_options_t run;
  char** targets = NULL;
  if (r == MAELYS_EXECUTOR_OK)
    r = with_runtime_links(options->run, options->host, &run, &targets,
                           out_error);
  if (r == MAELYS_EXECUTOR_OK) {
    r = maelys_warden_policy_lower(&store.decision, &run, out_sealed_plan,
                                   out_error);
    if (targets != NULL) {
      for (size_t i = 0; targets[i] != NULL; i++)
        free(targets[i]);
      free(targets);
      free((void*)run.mounts);
    }
  }
  deny_list_free(&denies);
  store_free(&store);
  return r;
}
