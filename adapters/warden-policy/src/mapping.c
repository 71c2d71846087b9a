/*
 * The pure mapping of the Warden Policy adapter (seeds/001): capabilities
 * and resolved decisions in this adapter's own vocabulary, lowered into a new
 * sealed Executor plan. No policy-library type appears here, so this file is
 * always built and unit-tested, and a newer policy ABI changes only the glue.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---------------------------------------------------------- capabilities */

static const struct {
  uint64_t bit;
  const char* name;
} capability_names[] = {
    {MAELYS_WARDEN_POLICY_CAP_FS_READ, "fs-read"},
    {MAELYS_WARDEN_POLICY_CAP_FS_WRITE, "fs-write"},
    {MAELYS_WARDEN_POLICY_CAP_FS_DENY, "fs-deny"},
    {MAELYS_WARDEN_POLICY_CAP_NETWORK_NONE, "network-none"},
    {MAELYS_WARDEN_POLICY_CAP_NETWORK_DIRECT, "network-direct"},
    {MAELYS_WARDEN_POLICY_CAP_NETWORK_MEDIATED, "network-mediated"},
    {MAELYS_WARDEN_POLICY_CAP_PROCESS_TREE, "process-tree"},
    {MAELYS_WARDEN_POLICY_CAP_ROOT_EPHEMERAL_WRITE, "root-ephemeral-write"},
};

const char* maelys_warden_policy_capability_name(uint64_t bit) {
  for (size_t i = 0; i < sizeof capability_names / sizeof capability_names[0];
       i++)
    if (capability_names[i].bit == bit)
      return capability_names[i].name;
  return NULL;
}

/*
 * One row per portable capability: it is given when the Executor mask holds
 * every bit of `all` and at least one bit of `any` (when `any` is not 0).
 * The rows are the whole conversion; a capability without a row is never
 * given.
 */
static const struct {
  uint64_t portable;
  uint64_t all;
  uint64_t any;
} conversion[] = {
    {MAELYS_WARDEN_POLICY_CAP_FS_READ, MAELYS_BACKEND_CAP_FILESYSTEM_READ, 0},
    {MAELYS_WARDEN_POLICY_CAP_FS_WRITE, MAELYS_BACKEND_CAP_FILESYSTEM_WRITE, 0},
    {MAELYS_WARDEN_POLICY_CAP_FS_DENY, MAELYS_BACKEND_CAP_FILESYSTEM_DENY, 0},
    /* Invariant 9: the Executor's NETWORK_NONE already means namespace and
     * seccomp socket denial, both proved; requiring the namespace bit too
     * keeps a backend that reports them inconsistently from qualifying. */
    {MAELYS_WARDEN_POLICY_CAP_NETWORK_NONE,
     MAELYS_BACKEND_CAP_NETWORK_NONE | MAELYS_BACKEND_CAP_NETWORK_NAMESPACE, 0},
    /* Leaving the host's network is something every backend can do, but only
     * one that builds the filesystem view itself enforces the rest of a
     * policy around it; POSIX proves nothing and maps to nothing. */
    {MAELYS_WARDEN_POLICY_CAP_NETWORK_DIRECT, MAELYS_BACKEND_CAP_ROOT_READONLY,
     0},
    {MAELYS_WARDEN_POLICY_CAP_NETWORK_MEDIATED, 0,
     MAELYS_BACKEND_CAP_NETWORK_MEDIATED_FD4 |
         MAELYS_BACKEND_CAP_NETWORK_MEDIATED_EGRESS},
    /* MIR process_tree_required is confinement inheritance, never the
     * Executor's stronger lifecycle promise (PROCESS_TREE). */
    {MAELYS_WARDEN_POLICY_CAP_PROCESS_TREE,
     MAELYS_BACKEND_CAP_PROCESS_CONFINEMENT, 0},
    {MAELYS_WARDEN_POLICY_CAP_ROOT_EPHEMERAL_WRITE,
     MAELYS_BACKEND_CAP_ROOT_EPHEMERAL_WRITE, 0},
};

maelys_executor_result_t maelys_warden_policy_capabilities_from_executor(
    uint64_t executor_mask, uint64_t* out_capabilities, char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (out_capabilities == NULL)
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "out_capabilities is NULL");
  *out_capabilities = 0;
  uint64_t unknown = executor_mask & ~MAELYS_BACKEND_CAP_ALL;
  if (unknown != 0) {
    int bit = 0;
    while (!(unknown & (UINT64_C(1) << bit)))
      bit++;
    return maelys__warden_policy_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "executor capability bit %d (0x%llx) is unknown to this adapter, "
        "built for Executor ABI %d: refusing to convert a mask it cannot read",
        bit, (unsigned long long)(UINT64_C(1) << bit),
        MAELYS_EXECUTOR_ABI_VERSION);
  }
  uint64_t caps = 0;
  for (size_t i = 0; i < sizeof conversion / sizeof conversion[0]; i++) {
    if ((executor_mask & conversion[i].all) != conversion[i].all)
      continue;
    if (conversion[i].any != 0 && (executor_mask & conversion[i].any) == 0)
      continue;
    caps |= conversion[i].portable;
  }
  *out_capabilities = caps;
  return MAELYS_EXECUTOR_OK;
}

/* -------------------------------------------------------------- lowering */

typedef struct lowered {
  const char* path;
  maelys_executor_access_t access;
  maelys_executor_scope_t scope;
  size_t index; /* in the decision, for diagnostics and a stable order */
} lowered_t;

static int by_path(const void* a, const void* b) {
  const lowered_t* x = a;
  const lowered_t* y = b;
  int c = strcmp(x->path, y->path);
  if (c != 0)
    return c;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* Is `path` strictly below the directory `base`? */
static bool strictly_within(const char* path, const char* base) {
  size_t n = strlen(base);
  if (n == 1 && base[0] == '/')
    return path[1] != '\0';
  return strncmp(path, base, n) == 0 && path[n] == '/';
}

static const char* executor_access_name(maelys_executor_access_t a) {
  return a == MAELYS_EXECUTOR_ACCESS_READ    ? "read"
         : a == MAELYS_EXECUTOR_ACCESS_WRITE ? "write"
                                             : "deny";
}

/* One decision rule as an Executor rule, or the reason it cannot be one. */
static maelys_executor_result_t lower_rule(const maelys_warden_policy_rule_t* r,
                                           size_t index, lowered_t* out,
                                           char** out_error) {
  const char* access = maelys__warden_policy_access_name((int)r->access);
  const char* scope = maelys__warden_policy_scope_name((int)r->scope);
  if (access == NULL)
    return maelys__warden_policy_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "policy rule %zu on '%s': unknown access %d", index,
        r->path ? r->path : "(null)", (int)r->access);
  if (scope == NULL)
    return maelys__warden_policy_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "policy rule %zu (%s) on '%s': unknown scope %d", index, access,
        r->path ? r->path : "(null)", (int)r->scope);
  if (r->path == NULL || r->path[0] != '/')
    return maelys__warden_policy_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "policy rule %zu (%s %s): the path '%s' is not an absolute resolved "
        "path",
        index, access, scope, r->path ? r->path : "(null)");
  switch (r->node) {
  case MAELYS_WARDEN_POLICY_NODE_ABSENT:
    if (r->access == MAELYS_WARDEN_POLICY_ACCESS_DENY)
      return maelys__warden_policy_fail(
          out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
          "policy rule deny %s '%s': the path does not exist, and keeping it "
          "from being created (create-protection) cannot be represented with "
          "bubblewrap mounts: rejected (invariant 11)",
          scope, r->path);
    return maelys__warden_policy_fail(
        out_error, MAELYS_EXECUTOR_ERR_NOT_FOUND,
        "policy rule %s %s '%s': the resolved path no longer exists on the "
        "host",
        access, scope, r->path);
  case MAELYS_WARDEN_POLICY_NODE_DIRECTORY:
    if (r->scope == MAELYS_WARDEN_POLICY_SCOPE_EXACT)
      return maelys__warden_policy_fail(
          out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
          "policy rule %s exact '%s': the path is a directory, and a "
          "literal-directory rule (the directory without its contents) cannot "
          "be represented with bubblewrap mounts: rejected (invariant 11)",
          access, r->path);
    out->scope = MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY;
    break;
  case MAELYS_WARDEN_POLICY_NODE_FILE:
    /* A tree rooted at a file is the file itself. */
    out->scope = MAELYS_EXECUTOR_SCOPE_LITERAL_FILE;
    break;
  default:
    return maelys__warden_policy_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "policy rule %zu (%s %s) on '%s': unknown node kind %d", index, access,
        scope, r->path, (int)r->node);
  }
  out->path = r->path;
  out->index = index;
  out->access = r->access == MAELYS_WARDEN_POLICY_ACCESS_READ
                    ? MAELYS_EXECUTOR_ACCESS_READ
                : r->access == MAELYS_WARDEN_POLICY_ACCESS_WRITE
                    ? MAELYS_EXECUTOR_ACCESS_WRITE
                    : MAELYS_EXECUTOR_ACCESS_DENY;
  return MAELYS_EXECUTOR_OK;
}

/* Lowers, sorts by path and merges the rules; *out_count is the number kept.
 * Precedence on one path is the policy's own: DENY over WRITE over READ
 * (the Executor accepts one rule per path). */
static maelys_executor_result_t
lower_rules(const maelys_warden_policy_decision_t* d, lowered_t** out,
            size_t* out_count, char** out_error) {
  *out = NULL;
  *out_count = 0;
  if (d->rule_count == 0)
    return MAELYS_EXECUTOR_OK;
  if (d->rules == NULL)
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "the decision has %zu rules but no "
                                      "rule array",
                                      d->rule_count);
  if (d->rule_count > MAELYS_EXECUTOR_MAX_ENTRIES)
    return maelys__warden_policy_fail(
        out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
        "the policy resolves to %zu rules; an Executor plan holds at most %d",
        d->rule_count, MAELYS_EXECUTOR_MAX_ENTRIES);
  lowered_t* v = calloc(d->rule_count, sizeof *v);
  if (v == NULL)
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                      "out of memory lowering the rules");
  maelys_executor_result_t r = MAELYS_EXECUTOR_OK;
  for (size_t i = 0; i < d->rule_count && r == MAELYS_EXECUTOR_OK; i++)
    r = lower_rule(&d->rules[i], i, &v[i], out_error);
  if (r != MAELYS_EXECUTOR_OK) {
    free(v);
    return r;
  }
  qsort(v, d->rule_count, sizeof *v, by_path);
  size_t n = 0;
  for (size_t i = 0; i < d->rule_count; i++) {
    if (n > 0 && strcmp(v[n - 1].path, v[i].path) == 0) {
      if (v[n - 1].scope != v[i].scope) {
        r = maelys__warden_policy_fail(
            out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
            "policy rules %zu and %zu on '%s' disagree about what the path is "
            "(a directory and a file): it changed while the policy was read",
            v[n - 1].index, v[i].index, v[i].path);
        break;
      }
      if (v[i].access > v[n - 1].access)
        v[n - 1].access = v[i].access;
      continue;
    }
    v[n++] = v[i];
  }
  /* The deny overlays are laid after every bind, so a grant inside a denied
   * tree would be hidden, where Sandbox Policy ABI 4 (most specific wins)
   * grants it: refuse instead of silently denying more. */
  for (size_t i = 0; i < n && r == MAELYS_EXECUTOR_OK; i++) {
    if (v[i].access != MAELYS_EXECUTOR_ACCESS_DENY ||
        v[i].scope != MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY)
      continue;
    for (size_t j = 0; j < n; j++) {
      if (v[j].access == MAELYS_EXECUTOR_ACCESS_DENY ||
          !strictly_within(v[j].path, v[i].path))
        continue;
      r = maelys__warden_policy_fail(
          out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
          "policy rule %s '%s' lies inside the denied tree '%s': the deny is "
          "laid over every bind, so the grant could not be honoured; narrow "
          "the deny or remove the grant",
          executor_access_name(v[j].access), v[j].path, v[i].path);
      break;
    }
  }
  if (r != MAELYS_EXECUTOR_OK) {
    free(v);
    return r;
  }
  *out = v;
  *out_count = n;
  return MAELYS_EXECUTOR_OK;
}

static bool digest_is_sha256_hex(const char* s) {
  if (s == NULL || strlen(s) != 64)
    return false;
  for (size_t i = 0; i < 64; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return false;
  return true;
}

/* Every check that needs no plan, so that nothing is built for a decision
 * that cannot be lowered. */
static maelys_executor_result_t
check_decision(const maelys_warden_policy_decision_t* d,
               const maelys_warden_policy_options_t* o, char** out_error) {
  switch (d->root) {
  case MAELYS_WARDEN_POLICY_ROOT_READ_ONLY:
    if (o->scratch_bytes != 0)
      return maelys__warden_policy_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "the run specification gives a scratch size of %llu bytes but the "
          "policy's root is read-only: plan and request would disagree",
          (unsigned long long)o->scratch_bytes);
    break;
  case MAELYS_WARDEN_POLICY_ROOT_EPHEMERAL_WRITE:
    if (o->scratch_bytes == 0)
      return maelys__warden_policy_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "the policy's root is ephemeral-write but the run specification "
          "gives no scratch size (options scratch_bytes): the policy "
          "deliberately carries none");
    break;
  default:
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "the policy's root mode %d is unknown",
                                      (int)d->root);
  }
  switch (d->network) {
  case MAELYS_WARDEN_POLICY_NETWORK_NONE:
  case MAELYS_WARDEN_POLICY_NETWORK_DIRECT:
    if (d->destination_count != 0)
      return maelys__warden_policy_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "the policy's network is %s but it lists %zu destinations: they "
          "would be dropped",
          d->network == MAELYS_WARDEN_POLICY_NETWORK_NONE ? "none" : "direct",
          d->destination_count);
    if (d->mediator_id != NULL)
      return maelys__warden_policy_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "the policy's network is %s but it names the mediator '%s': it "
          "would be dropped",
          d->network == MAELYS_WARDEN_POLICY_NETWORK_NONE ? "none" : "direct",
          d->mediator_id);
    break;
  case MAELYS_WARDEN_POLICY_NETWORK_MEDIATED:
    if (d->mediator_id == NULL)
      return maelys__warden_policy_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "the policy's network is mediated but no trusted mediator "
          "identifier was given");
    if (strcmp(d->mediator_id, MAELYS_WARDEN_POLICY_FD4_MEDIATOR_ID) != 0 &&
        strcmp(d->mediator_id, MAELYS_WARDEN_POLICY_EGRESS_MEDIATOR_ID) != 0)
      return maelys__warden_policy_fail(
          out_error, MAELYS_EXECUTOR_ERR_DENIED,
          "mediator '%s' is neither '%s' nor '%s': an arbitrary mediator is "
          "never discarded or rebound",
          d->mediator_id, MAELYS_WARDEN_POLICY_FD4_MEDIATOR_ID,
          MAELYS_WARDEN_POLICY_EGRESS_MEDIATOR_ID);
    if (d->destination_count == 0 || d->destinations == NULL)
      return maelys__warden_policy_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "the policy's network is mediated but it lists no destination");
    for (size_t i = 0; i < d->destination_count; i++)
      if (d->destinations[i].protocol != MAELYS_WARDEN_POLICY_PROTOCOL_TCP)
        return maelys__warden_policy_fail(
            out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
            "network destination %zu (%s:%u): unknown protocol %d", i,
            d->destinations[i].host ? d->destinations[i].host : "(null)",
            d->destinations[i].port, (int)d->destinations[i].protocol);
    break;
  default:
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "the policy's network mode %d is "
                                      "unknown",
                                      (int)d->network);
  }
  if (!digest_is_sha256_hex(d->mir_digest))
    return maelys__warden_policy_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "the MIR digest '%s' is not 64 lowercase hex digits (SHA-256)",
        d->mir_digest ? d->mir_digest : "(null)");
  if (o->mount_count > 0 && o->mounts == NULL)
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "options give %zu mounts but no mount "
                                      "array",
                                      o->mount_count);
  for (size_t i = 0; i < o->mount_count; i++) {
    const maelys_warden_policy_mount_t* m = &o->mounts[i];
    if (m->kind < MAELYS_WARDEN_POLICY_MOUNT_PROC ||
        m->kind > MAELYS_WARDEN_POLICY_MOUNT_DIR)
      return maelys__warden_policy_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "run mount %zu at '%s': unknown kind %d (only proc, dev, tmpfs, "
          "symlink and dir, which expose no host content)",
          i, m->destination ? m->destination : "(null)", (int)m->kind);
  }
  return MAELYS_EXECUTOR_OK;
}

static maelys_executor_result_t add_mount(maelys_executor_plan_t* plan,
                                          const maelys_warden_policy_mount_t* m,
                                          char** error) {
  switch (m->kind) {
  case MAELYS_WARDEN_POLICY_MOUNT_PROC:
    return maelys_executor_plan_add_proc(plan, m->destination, error);
  case MAELYS_WARDEN_POLICY_MOUNT_DEV:
    return maelys_executor_plan_add_dev(plan, m->destination, error);
  case MAELYS_WARDEN_POLICY_MOUNT_TMPFS:
    return maelys_executor_plan_add_tmpfs(plan, m->destination, m->size_bytes,
                                          error);
  case MAELYS_WARDEN_POLICY_MOUNT_SYMLINK:
    return maelys_executor_plan_add_symlink(plan, m->target, m->destination,
                                            error);
  case MAELYS_WARDEN_POLICY_MOUNT_DIR:
    return maelys_executor_plan_add_dir(plan, m->destination, error);
  }
  return MAELYS_EXECUTOR_ERR_ARGUMENT; /* excluded by check_decision */
}

/* Builds the plan from checked input; the diagnostic names the step. */
static maelys_executor_result_t build(const maelys_warden_policy_decision_t* d,
                                      const maelys_warden_policy_options_t* o,
                                      const lowered_t* rules, size_t rule_count,
                                      maelys_executor_plan_t* plan,
                                      char** out_error) {
  char* e = NULL;
  maelys_executor_result_t r = maelys_executor_plan_set_root(
      plan,
      d->root == MAELYS_WARDEN_POLICY_ROOT_EPHEMERAL_WRITE
          ? MAELYS_EXECUTOR_ROOT_EPHEMERAL_WRITE
          : MAELYS_EXECUTOR_ROOT_READONLY,
      o->scratch_bytes, &e);
  if (r != MAELYS_EXECUTOR_OK)
    return maelys__warden_policy_wrap(out_error, r, e, "root");
  for (size_t i = 0; i < o->mount_count; i++) {
    r = add_mount(plan, &o->mounts[i], &e);
    if (r != MAELYS_EXECUTOR_OK)
      return maelys__warden_policy_wrap(out_error, r, e, "run mount %zu", i);
  }
  for (size_t i = 0; i < rule_count; i++) {
    r = maelys_executor_plan_add_rule(plan, rules[i].path, rules[i].access,
                                      rules[i].scope, &e);
    if (r != MAELYS_EXECUTOR_OK)
      return maelys__warden_policy_wrap(out_error, r, e, "policy rule %zu",
                                        rules[i].index);
  }
  maelys_executor_network_t net =
      d->network == MAELYS_WARDEN_POLICY_NETWORK_NONE
          ? MAELYS_EXECUTOR_NETWORK_NONE
      : d->network == MAELYS_WARDEN_POLICY_NETWORK_DIRECT
          ? MAELYS_EXECUTOR_NETWORK_INHERIT
          : MAELYS_EXECUTOR_NETWORK_MEDIATED;
  r = maelys_executor_plan_set_network(plan, net, &e);
  if (r != MAELYS_EXECUTOR_OK)
    return maelys__warden_policy_wrap(out_error, r, e, "network");
  if (net == MAELYS_EXECUTOR_NETWORK_MEDIATED) {
    for (size_t i = 0; i < d->destination_count; i++) {
      r = maelys_executor_plan_add_network_destination(
          plan, d->destinations[i].host, d->destinations[i].port, &e);
      if (r != MAELYS_EXECUTOR_OK)
        return maelys__warden_policy_wrap(out_error, r, e,
                                          "network destination %zu", i);
    }
    r = maelys_executor_plan_set_network_mediator(plan, d->mediator_id, &e);
    if (r != MAELYS_EXECUTOR_OK)
      return maelys__warden_policy_wrap(out_error, r, e, "mediator");
  }
  if (d->process_tree_required) {
    r = maelys_executor_plan_require_capabilities(
        plan, MAELYS_BACKEND_CAP_PROCESS_CONFINEMENT, &e);
    if (r != MAELYS_EXECUTOR_OK)
      return maelys__warden_policy_wrap(out_error, r, e,
                                        "process-tree confinement");
  }
  r = maelys_executor_plan_set_process_tree_required(
      plan, o->process_tree_required ? 1 : 0, &e);
  if (r != MAELYS_EXECUTOR_OK)
    return maelys__warden_policy_wrap(out_error, r, e, "process tree");
  char digest[7 + 64 + 1];
  memcpy(digest, "sha256:", 7);
  memcpy(digest + 7, d->mir_digest, 65);
  r = maelys_executor_plan_set_decision_digest(plan, digest, &e);
  if (r != MAELYS_EXECUTOR_OK)
    return maelys__warden_policy_wrap(out_error, r, e, "decision digest");
  r = maelys_executor_plan_seal(plan, &e);
  if (r != MAELYS_EXECUTOR_OK)
    return maelys__warden_policy_wrap(out_error, r, e, "sealing the plan");
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_warden_policy_lower(const maelys_warden_policy_decision_t* decision,
                           const maelys_warden_policy_options_t* options,
                           maelys_executor_plan_t** out_sealed_plan,
                           char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (out_sealed_plan == NULL)
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "out_sealed_plan is NULL");
  *out_sealed_plan = NULL;
  if (decision == NULL)
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "decision is NULL");
  static const maelys_warden_policy_options_t none;
  const maelys_warden_policy_options_t* o = options ? options : &none;
  maelys_executor_result_t r = check_decision(decision, o, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  lowered_t* rules = NULL;
  size_t rule_count = 0;
  r = lower_rules(decision, &rules, &rule_count, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  maelys_executor_plan_t* plan = NULL;
  char* e = NULL;
  r = maelys_executor_plan_create(&plan, &e);
  if (r != MAELYS_EXECUTOR_OK)
    r = maelys__warden_policy_wrap(out_error, r, e, "creating the plan");
  else
    r = build(decision, o, rules, rule_count, plan, out_error);
  free(rules);
  if (r != MAELYS_EXECUTOR_OK) {
    maelys_executor_plan_destroy(plan);
    return r;
  }
  *out_sealed_plan = plan;
  return MAELYS_EXECUTOR_OK;
}

/* ------------------------------------------------------ source deny check */

maelys_executor_result_t maelys_warden_policy_check_source_denies(
    const maelys_warden_policy_source_deny_t* denies, size_t deny_count,
    const maelys_warden_policy_decision_t* decision, char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (decision == NULL || (deny_count > 0 && denies == NULL))
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "the source denies and the decision are "
                                      "required");
  if (decision->rule_count > 0 && decision->rules == NULL)
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "the decision has %zu rules but no "
                                      "rule array",
                                      decision->rule_count);
  for (size_t i = 0; i < deny_count; i++) {
    const maelys_warden_policy_source_deny_t* s = &denies[i];
    const char* name = s->name ? s->name : "(unnamed)";
    const char* scope = maelys__warden_policy_scope_name((int)s->scope);
    if (scope == NULL)
      return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                        "source rule %s: unknown scope %d",
                                        name, (int)s->scope);
    if (s->path == NULL)
      return maelys__warden_policy_fail(
          out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
          "source rule %s (%s) names a path that does not exist on this host: "
          "protecting it would be create-protection, which bubblewrap mounts "
          "cannot represent, and the compiled plan dropped it; rejected "
          "rather than lose the deny (invariant 11)",
          name, scope);
    bool found = false;
    for (size_t j = 0; j < decision->rule_count && !found; j++) {
      const maelys_warden_policy_rule_t* r = &decision->rules[j];
      found = r->access == MAELYS_WARDEN_POLICY_ACCESS_DENY &&
              r->scope == s->scope && r->path != NULL &&
              strcmp(r->path, s->path) == 0;
    }
    if (!found)
      return maelys__warden_policy_fail(
          out_error, MAELYS_EXECUTOR_ERR_DENIED,
          "source rule %s (%s, resolved to '%s') has no deny in the compiled "
          "plan: the plan does not come from this source on these roots, or "
          "the path changed since compilation",
          name, scope, s->path);
  }
  return MAELYS_EXECUTOR_OK;
}
