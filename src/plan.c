/*
 * The plan: a builder whose setters record intent, one seal step that
 * validates and freezes it, and a digest over a canonical encoding (the
 * minijail shape: setters record, a separate step applies).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <sodium.h>

#include "internal.h"

/* Version tag of the canonical encoding. Changing the encoding in any way
 * changes this tag, so that a digest never silently changes meaning. */
#define PLAN_ENCODING_MAGIC "maelys-executor-plan/2"

static const struct {
  uint64_t bit;
  const char* name;
} capability_names[] = {
    {MAELYS_BACKEND_CAP_FILESYSTEM_READ, "filesystem_read"},
    {MAELYS_BACKEND_CAP_FILESYSTEM_WRITE, "filesystem_write"},
    {MAELYS_BACKEND_CAP_FILESYSTEM_DENY, "filesystem_deny"},
    {MAELYS_BACKEND_CAP_NETWORK_NONE, "network_none"},
    {MAELYS_BACKEND_CAP_NETWORK_NAMESPACE, "network_namespace"},
    {MAELYS_BACKEND_CAP_NETWORK_MEDIATED_FD4, "network_mediated_fd4"},
    {MAELYS_BACKEND_CAP_NETWORK_MEDIATED_EGRESS, "network_mediated_egress"},
    {MAELYS_BACKEND_CAP_ROOT_READONLY, "root_readonly"},
    {MAELYS_BACKEND_CAP_ROOT_EPHEMERAL_WRITE, "root_ephemeral_write"},
    {MAELYS_BACKEND_CAP_PROCESS_TREE, "process_tree"},
    {MAELYS_BACKEND_CAP_PROCESS_CONFINEMENT, "process_confinement"},
    {MAELYS_BACKEND_CAP_SECCOMP, "seccomp"},
    {MAELYS_BACKEND_CAP_USER_NAMESPACE, "user_namespace"},
    {MAELYS_BACKEND_CAP_PID_NAMESPACE, "pid_namespace"},
    {MAELYS_BACKEND_CAP_MOUNT_NAMESPACE, "mount_namespace"},
    {MAELYS_BACKEND_CAP_TMPFS_SIZE, "tmpfs_size"},
    {MAELYS_BACKEND_CAP_DISABLE_USERNS, "disable_userns"},
    {MAELYS_BACKEND_CAP_UNPRIVILEGED, "unprivileged"},
    {MAELYS_BACKEND_CAP_LIMIT_TASKS, "limit_tasks"},
    {MAELYS_BACKEND_CAP_LIMIT_MEMORY, "limit_memory"},
};

const char* maelys_executor_capability_name(uint64_t bit) {
  for (size_t i = 0; i < MAELYS__ARRAY_SIZE(capability_names); i++)
    if (capability_names[i].bit == bit)
      return capability_names[i].name;
  return NULL;
}

uint64_t maelys_executor_capability_from_name(const char* name) {
  if (name == NULL)
    return 0;
  for (size_t i = 0; i < MAELYS__ARRAY_SIZE(capability_names); i++)
    if (strcmp(capability_names[i].name, name) == 0)
      return capability_names[i].bit;
  return 0;
}

char* maelys__executor_capability_list(uint64_t mask) {
  size_t len = 1;
  for (size_t i = 0; i < MAELYS__ARRAY_SIZE(capability_names); i++)
    if (mask & capability_names[i].bit)
      len += strlen(capability_names[i].name) + 2;
  char* out = malloc(len);
  if (out == NULL)
    return NULL;
  out[0] = '\0';
  for (size_t i = 0; i < MAELYS__ARRAY_SIZE(capability_names); i++) {
    if (!(mask & capability_names[i].bit))
      continue;
    if (out[0] != '\0')
      strcat(out, ", ");
    strcat(out, capability_names[i].name);
  }
  return out;
}

const char* const maelys__executor_rlimit_names[MAELYS__RLIMIT_COUNT] = {
    "",     "cpu",    "fsize", "data",  "stack",
    "core", "nofile", "as",    "nproc", "memlock"};

int maelys__executor_rlimit_native(maelys_executor_rlimit_t resource) {
  switch (resource) {
  case MAELYS_EXECUTOR_RLIMIT_CPU:
    return RLIMIT_CPU;
  case MAELYS_EXECUTOR_RLIMIT_FSIZE:
    return RLIMIT_FSIZE;
  case MAELYS_EXECUTOR_RLIMIT_DATA:
    return RLIMIT_DATA;
  case MAELYS_EXECUTOR_RLIMIT_STACK:
    return RLIMIT_STACK;
  case MAELYS_EXECUTOR_RLIMIT_CORE:
    return RLIMIT_CORE;
  case MAELYS_EXECUTOR_RLIMIT_NOFILE:
    return RLIMIT_NOFILE;
  case MAELYS_EXECUTOR_RLIMIT_AS:
    return RLIMIT_AS;
  case MAELYS_EXECUTOR_RLIMIT_NPROC:
    return RLIMIT_NPROC;
  case MAELYS_EXECUTOR_RLIMIT_MEMLOCK:
    return RLIMIT_MEMLOCK;
  }
  return -1;
}

const char* maelys__executor_mount_kind_name(maelys_executor_mount_kind_t k) {
  switch (k) {
  case MAELYS_EXECUTOR_MOUNT_RO_BIND:
    return "ro-bind";
  case MAELYS_EXECUTOR_MOUNT_BIND:
    return "bind";
  case MAELYS_EXECUTOR_MOUNT_TMPFS:
    return "tmpfs";
  case MAELYS_EXECUTOR_MOUNT_PROC:
    return "proc";
  case MAELYS_EXECUTOR_MOUNT_DEV:
    return "dev";
  case MAELYS_EXECUTOR_MOUNT_SYMLINK:
    return "symlink";
  case MAELYS_EXECUTOR_MOUNT_DIR:
    return "dir";
  }
  return "?";
}

const char* maelys__executor_missing_name(maelys_executor_missing_t m) {
  switch (m) {
  case MAELYS_EXECUTOR_MISSING_FAIL:
    return "fail";
  case MAELYS_EXECUTOR_MISSING_SKIP:
    return "skip";
  case MAELYS_EXECUTOR_MISSING_CREATE:
    return "create";
  }
  return "?";
}

const char* maelys__executor_access_name(maelys_executor_access_t a) {
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

const char* maelys__executor_scope_name(maelys_executor_scope_t s) {
  switch (s) {
  case MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY:
    return "recursive-directory";
  case MAELYS_EXECUTOR_SCOPE_LITERAL_FILE:
    return "literal-file";
  case MAELYS_EXECUTOR_SCOPE_LITERAL_DIRECTORY:
    return "literal-directory";
  }
  return "?";
}

const char* maelys__executor_network_name(maelys_executor_network_t n) {
  switch (n) {
  case MAELYS_EXECUTOR_NETWORK_INHERIT:
    return "inherit";
  case MAELYS_EXECUTOR_NETWORK_NONE:
    return "none";
  case MAELYS_EXECUTOR_NETWORK_MEDIATED:
    return "mediated";
  case MAELYS_EXECUTOR_NETWORK_EXTERNAL_CHANNEL:
    return "external-channel";
  }
  return "?";
}

const char* maelys__executor_root_name(maelys_executor_root_t r) {
  switch (r) {
  case MAELYS_EXECUTOR_ROOT_HOST:
    return "host";
  case MAELYS_EXECUTOR_ROOT_READONLY:
    return "readonly";
  case MAELYS_EXECUTOR_ROOT_EPHEMERAL_WRITE:
    return "ephemeral-write";
  }
  return "?";
}

/* ------------------------------------------------------------ lifetime */

maelys_executor_result_t
maelys_executor_plan_create(maelys_executor_plan_t** out_plan,
                            char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (out_plan == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "out_plan is NULL");
  *out_plan = NULL;
  maelys_executor_plan_t* plan = calloc(1, sizeof *plan);
  if (plan == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory creating a plan");
  atomic_init(&plan->refcount, 1);
  plan->network = MAELYS_EXECUTOR_NETWORK_INHERIT;
  plan->root = MAELYS_EXECUTOR_ROOT_HOST;
  *out_plan = plan;
  return MAELYS_EXECUTOR_OK;
}

static void plan_free(maelys_executor_plan_t* plan) {
  for (size_t i = 0; i < plan->mount_count; i++) {
    free(plan->mounts[i].source);
    free(plan->mounts[i].destination);
  }
  free(plan->mounts);
  for (size_t i = 0; i < plan->rule_count; i++)
    free(plan->rules[i].path);
  free(plan->rules);
  for (size_t i = 0; i < plan->destination_count; i++)
    free(plan->destinations[i].host);
  free(plan->destinations);
  for (size_t i = 0; i < plan->channel_count; i++)
    free(plan->channels[i].name);
  free(plan->channels);
  free(plan->mediator);
  free(plan->decision_digest);
  free(plan);
}

void maelys__executor_plan_retain(const maelys_executor_plan_t* plan) {
  atomic_fetch_add(&((maelys_executor_plan_t*)plan)->refcount, 1);
}

void maelys__executor_plan_release(const maelys_executor_plan_t* plan) {
  maelys_executor_plan_t* p = (maelys_executor_plan_t*)plan;
  if (atomic_fetch_sub(&p->refcount, 1) == 1)
    plan_free(p);
}

void maelys_executor_plan_destroy(maelys_executor_plan_t* plan) {
  if (plan != NULL)
    maelys__executor_plan_release(plan);
}

/* ------------------------------------------------------------- setters */

/* Every setter starts here: argument and seal checks. */
static maelys_executor_result_t writable(maelys_executor_plan_t* plan,
                                         const char* setter, char** out_error) {
  if (plan == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "%s: plan is NULL", setter);
  if (plan->sealed)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_SEALED,
        "%s: the plan is sealed and can no longer change", setter);
  return MAELYS_EXECUTOR_OK;
}

static maelys_executor_result_t check_path(const char* what, const char* path,
                                           char** out_error) {
  if (path == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "%s is NULL", what);
  if (!maelys__executor_path_is_clean(path))
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "%s '%s' is not a clean absolute path (no '.', '..', empty component "
        "or trailing '/', at most PATH_MAX bytes)",
        what, path);
  return MAELYS_EXECUTOR_OK;
}

static maelys_executor_result_t
add_mount(maelys_executor_plan_t* plan, maelys_executor_mount_kind_t kind,
          const char* source, const char* destination,
          maelys_executor_missing_t missing, uint64_t size, char** out_error) {
  if (plan->mount_count >= MAELYS_EXECUTOR_MAX_ENTRIES)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "the plan already has %d mounts",
                                 MAELYS_EXECUTOR_MAX_ENTRIES);
  if (maelys__executor_reserve((void**)&plan->mounts, &plan->mount_capacity,
                               sizeof *plan->mounts, plan->mount_count + 1))
    goto oom;
  maelys__mount_t m = {kind, NULL, NULL, missing, size};
  if (source != NULL && (m.source = maelys__executor_strdup(source)) == NULL)
    goto oom;
  if ((m.destination = maelys__executor_strdup(destination)) == NULL) {
    free(m.source);
    goto oom;
  }
  plan->mounts[plan->mount_count++] = m;
  return MAELYS_EXECUTOR_OK;
oom:
  return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                               "out of memory adding a mount");
}

maelys_executor_result_t maelys_executor_plan_add_bind(
    maelys_executor_plan_t* plan, const char* source, const char* destination,
    int writable_bind, maelys_executor_missing_t missing, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  maelys_executor_result_t r =
      writable(plan, "maelys_executor_plan_add_bind", out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = check_path("bind source", source, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = check_path("bind destination", destination, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  if (missing != MAELYS_EXECUTOR_MISSING_FAIL &&
      missing != MAELYS_EXECUTOR_MISSING_SKIP &&
      missing != MAELYS_EXECUTOR_MISSING_CREATE)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "bind of '%s': unknown missing-path mode %d",
                                 source, (int)missing);
  if (writable_bind != 0 && writable_bind != 1)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "bind of '%s': writable must be 0 or 1",
                                 source);
  return add_mount(plan,
                   writable_bind ? MAELYS_EXECUTOR_MOUNT_BIND
                                 : MAELYS_EXECUTOR_MOUNT_RO_BIND,
                   source, destination, missing, 0, out_error);
}

maelys_executor_result_t
maelys_executor_plan_add_tmpfs(maelys_executor_plan_t* plan,
                               const char* destination, uint64_t size_bytes,
                               char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  maelys_executor_result_t r =
      writable(plan, "maelys_executor_plan_add_tmpfs", out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = check_path("tmpfs destination", destination, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  if (size_bytes == 0)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "tmpfs at '%s' has no size: every tmpfs must have a size", destination);
  return add_mount(plan, MAELYS_EXECUTOR_MOUNT_TMPFS, NULL, destination,
                   MAELYS_EXECUTOR_MISSING_FAIL, size_bytes, out_error);
}

static maelys_executor_result_t
add_simple_mount(maelys_executor_plan_t* plan,
                 maelys_executor_mount_kind_t kind, const char* setter,
                 const char* destination, char** out_error) {
  maelys_executor_result_t r = writable(plan, setter, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = check_path("mount destination", destination, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  return add_mount(plan, kind, NULL, destination, MAELYS_EXECUTOR_MISSING_FAIL,
                   0, out_error);
}

maelys_executor_result_t
maelys_executor_plan_add_proc(maelys_executor_plan_t* plan,
                              const char* destination, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  return add_simple_mount(plan, MAELYS_EXECUTOR_MOUNT_PROC,
                          "maelys_executor_plan_add_proc", destination,
                          out_error);
}

maelys_executor_result_t
maelys_executor_plan_add_dev(maelys_executor_plan_t* plan,
                             const char* destination, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  return add_simple_mount(plan, MAELYS_EXECUTOR_MOUNT_DEV,
                          "maelys_executor_plan_add_dev", destination,
                          out_error);
}

maelys_executor_result_t
maelys_executor_plan_add_dir(maelys_executor_plan_t* plan,
                             const char* destination, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  return add_simple_mount(plan, MAELYS_EXECUTOR_MOUNT_DIR,
                          "maelys_executor_plan_add_dir", destination,
                          out_error);
}

maelys_executor_result_t
maelys_executor_plan_add_symlink(maelys_executor_plan_t* plan,
                                 const char* target, const char* destination,
                                 char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  maelys_executor_result_t r =
      writable(plan, "maelys_executor_plan_add_symlink", out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = check_path("symlink destination", destination, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  if (target == NULL || target[0] == '\0' || strlen(target) >= PATH_MAX)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "symlink at '%s' needs a non-empty target shorter than PATH_MAX",
        destination);
  return add_mount(plan, MAELYS_EXECUTOR_MOUNT_SYMLINK, target, destination,
                   MAELYS_EXECUTOR_MISSING_FAIL, 0, out_error);
}

maelys_executor_result_t
maelys_executor_plan_add_rule(maelys_executor_plan_t* plan, const char* path,
                              maelys_executor_access_t access,
                              maelys_executor_scope_t scope, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  maelys_executor_result_t r =
      writable(plan, "maelys_executor_plan_add_rule", out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = check_path("rule path", path, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  if (access < MAELYS_EXECUTOR_ACCESS_READ ||
      access > MAELYS_EXECUTOR_ACCESS_PROTECT_CREATE)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "rule on '%s': unknown access %d", path,
                                 (int)access);
  if (scope < MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY ||
      scope > MAELYS_EXECUTOR_SCOPE_LITERAL_DIRECTORY)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "rule on '%s': unknown scope %d", path,
                                 (int)scope);
  if (plan->rule_count >= MAELYS_EXECUTOR_MAX_ENTRIES)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "the plan already has %d rules",
                                 MAELYS_EXECUTOR_MAX_ENTRIES);
  for (size_t i = 0; i < plan->rule_count; i++)
    if (strcmp(plan->rules[i].path, path) == 0)
      return maelys__executor_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "rule on '%s' (%s) conflicts with an earlier rule on the same path "
          "(%s): give one rule per path",
          path, maelys__executor_access_name(access),
          maelys__executor_access_name(plan->rules[i].access));
  if (maelys__executor_reserve((void**)&plan->rules, &plan->rule_capacity,
                               sizeof *plan->rules, plan->rule_count + 1))
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory adding a rule");
  char* copy = maelys__executor_strdup(path);
  if (copy == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory adding a rule");
  plan->rules[plan->rule_count++] = (maelys__rule_t){copy, access, scope};
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_executor_plan_set_network(maelys_executor_plan_t* plan,
                                 maelys_executor_network_t mode,
                                 char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  maelys_executor_result_t r =
      writable(plan, "maelys_executor_plan_set_network", out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  if (mode < MAELYS_EXECUTOR_NETWORK_INHERIT ||
      mode > MAELYS_EXECUTOR_NETWORK_EXTERNAL_CHANNEL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "unknown network mode %d", (int)mode);
  plan->network = mode;
  plan->network_set = true;
  return MAELYS_EXECUTOR_OK;
}

static bool host_is_valid(const char* host) {
  size_t n = strlen(host);
  if (n == 0 || n > 253)
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = host[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '.' || c == '-' || c == ':'))
      return false;
  }
  return true;
}

maelys_executor_result_t
maelys_executor_plan_add_network_destination(maelys_executor_plan_t* plan,
                                             const char* host, unsigned port,
                                             char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  maelys_executor_result_t r =
      writable(plan, "maelys_executor_plan_add_network_destination", out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  if (host == NULL || !host_is_valid(host))
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "network destination host '%s' is not a hostname or IP literal",
        host ? host : "(null)");
  if (port == 0 || port > 65535)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "network destination %s: port %u is not in "
                                 "1..65535",
                                 host, port);
  if (plan->destination_count >= MAELYS_EXECUTOR_MAX_ENTRIES)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "the plan already has %d destinations",
                                 MAELYS_EXECUTOR_MAX_ENTRIES);
  for (size_t i = 0; i < plan->destination_count; i++)
    if (plan->destinations[i].port == port &&
        strcmp(plan->destinations[i].host, host) == 0)
      return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                   "network destination %s:%u is listed twice",
                                   host, port);
  if (maelys__executor_reserve(
          (void**)&plan->destinations, &plan->destination_capacity,
          sizeof *plan->destinations, plan->destination_count + 1))
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory adding a destination");
  char* copy = maelys__executor_strdup(host);
  if (copy == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory adding a destination");
  plan->destinations[plan->destination_count++] =
      (maelys__destination_t){copy, port};
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t maelys_executor_plan_set_network_mediator(
    maelys_executor_plan_t* plan, const char* mediator_id, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  maelys_executor_result_t r =
      writable(plan, "maelys_executor_plan_set_network_mediator", out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  if (mediator_id == NULL ||
      (strcmp(mediator_id, MAELYS_EXECUTOR_MEDIATOR_FD4) != 0 &&
       strcmp(mediator_id, MAELYS_EXECUTOR_MEDIATOR_EGRESS) != 0))
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "mediator '%s' is not one of '%s' or '%s': an unknown mediator is "
        "refused, never rebound",
        mediator_id ? mediator_id : "(null)", MAELYS_EXECUTOR_MEDIATOR_FD4,
        MAELYS_EXECUTOR_MEDIATOR_EGRESS);
  char* copy = maelys__executor_strdup(mediator_id);
  if (copy == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  free(plan->mediator);
  plan->mediator = copy;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_executor_plan_set_root(maelys_executor_plan_t* plan,
                              maelys_executor_root_t root,
                              uint64_t scratch_bytes, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  maelys_executor_result_t r =
      writable(plan, "maelys_executor_plan_set_root", out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  if (root < MAELYS_EXECUTOR_ROOT_HOST ||
      root > MAELYS_EXECUTOR_ROOT_EPHEMERAL_WRITE)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "unknown root disposition %d", (int)root);
  if (root == MAELYS_EXECUTOR_ROOT_EPHEMERAL_WRITE && scratch_bytes == 0)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "an ephemeral-write root needs a scratch size greater than 0");
  if (root != MAELYS_EXECUTOR_ROOT_EPHEMERAL_WRITE && scratch_bytes != 0)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "a %s root takes no scratch size (got %llu bytes)",
        maelys__executor_root_name(root), (unsigned long long)scratch_bytes);
  plan->root = root;
  plan->scratch_bytes = scratch_bytes;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t maelys_executor_plan_require_capabilities(
    maelys_executor_plan_t* plan, uint64_t capabilities, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  maelys_executor_result_t r =
      writable(plan, "maelys_executor_plan_require_capabilities", out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  if (capabilities & ~MAELYS_BACKEND_CAP_ALL)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "unknown capability bits 0x%llx",
        (unsigned long long)(capabilities & ~MAELYS_BACKEND_CAP_ALL));
  plan->required |= capabilities;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_executor_plan_set_process_tree_required(maelys_executor_plan_t* plan,
                                               int required, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  maelys_executor_result_t r = writable(
      plan, "maelys_executor_plan_set_process_tree_required", out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  if (required != 0 && required != 1)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "process_tree_required must be 0 or 1");
  plan->process_tree_required = required;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t maelys_executor_plan_set_rlimit(
    maelys_executor_plan_t* plan, maelys_executor_rlimit_t resource,
    uint64_t soft, uint64_t hard, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  maelys_executor_result_t r =
      writable(plan, "maelys_executor_plan_set_rlimit", out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  if (resource < MAELYS_EXECUTOR_RLIMIT_CPU ||
      resource > MAELYS_EXECUTOR_RLIMIT_MEMLOCK)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "unknown rlimit resource %d", (int)resource);
  if (soft > hard)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "rlimit %s: soft limit %llu exceeds hard limit %llu",
        maelys__executor_rlimit_names[resource], (unsigned long long)soft,
        (unsigned long long)hard);
  plan->rlimits[resource] = (maelys__rlimit_t){true, soft, hard};
  return MAELYS_EXECUTOR_OK;
}

#define LIMIT_TASKS_MAX 4194304 /* the kernel's pid_max ceiling */
#define LIMIT_MEMORY_MIN (UINT64_C(1) << 20)

const char* maelys__executor_limit_name(maelys_executor_limit_t limit) {
  switch (limit) {
  case MAELYS_EXECUTOR_LIMIT_TASKS:
    return "tasks";
  case MAELYS_EXECUTOR_LIMIT_MEMORY:
    return "memory";
  }
  return "unknown";
}

maelys_executor_result_t
maelys_executor_plan_set_limit(maelys_executor_plan_t* plan,
                               maelys_executor_limit_t limit, uint64_t value,
                               char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  maelys_executor_result_t r =
      writable(plan, "maelys_executor_plan_set_limit", out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  switch (limit) {
  case MAELYS_EXECUTOR_LIMIT_TASKS:
    if (value < 1 || value > LIMIT_TASKS_MAX)
      return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                   "limit tasks: %llu is outside 1..%d",
                                   (unsigned long long)value, LIMIT_TASKS_MAX);
    break;
  case MAELYS_EXECUTOR_LIMIT_MEMORY:
    if (value < LIMIT_MEMORY_MIN)
      return maelys__executor_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "limit memory: %llu bytes is below the minimum of 1 MiB",
          (unsigned long long)value);
    break;
  default:
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "unknown limit %d", (int)limit);
  }
  plan->limits[limit] = value;
  return MAELYS_EXECUTOR_OK;
}

static bool digest_is_valid(const char* d) {
  const char* colon = strchr(d, ':');
  if (colon == NULL)
    return false;
  size_t alg = (size_t)(colon - d);
  if (alg == 0 || alg > 16)
    return false;
  for (size_t i = 0; i < alg; i++)
    if (!((d[i] >= 'a' && d[i] <= 'z') || (d[i] >= '0' && d[i] <= '9') ||
          d[i] == '-'))
      return false;
  const char* hex = colon + 1;
  size_t n = strlen(hex);
  if (n < 32 || n > 128)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f')))
      return false;
  return true;
}

maelys_executor_result_t
maelys_executor_plan_set_decision_digest(maelys_executor_plan_t* plan,
                                         const char* digest, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  maelys_executor_result_t r =
      writable(plan, "maelys_executor_plan_set_decision_digest", out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  if (digest == NULL || !digest_is_valid(digest))
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "decision digest '%s' is not ALGORITHM:HEX (lowercase hex, 32..128 "
        "digits)",
        digest ? digest : "(null)");
  char* copy = maelys__executor_strdup(digest);
  if (copy == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  free(plan->decision_digest);
  plan->decision_digest = copy;
  return MAELYS_EXECUTOR_OK;
}

static bool name_is_valid(const char* s, size_t max) {
  size_t n = strlen(s);
  if (n == 0 || n > max)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
          s[i] == '.' || s[i] == '_' || s[i] == '-'))
      return false;
  return true;
}

maelys_executor_result_t
maelys_executor_plan_add_channel(maelys_executor_plan_t* plan, int child_fd,
                                 const char* name, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  maelys_executor_result_t r =
      writable(plan, "maelys_executor_plan_add_channel", out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  if (child_fd < 4 || child_fd > 1023)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "channel descriptor %d is outside 4..1023: 0-2 are stdio and 3 is the "
        "protocol socket",
        child_fd);
  if (name == NULL || !name_is_valid(name, 64))
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "channel name '%s' is not [a-z0-9._-]{1,64}",
                                 name ? name : "(null)");
  for (size_t i = 0; i < plan->channel_count; i++)
    if (plan->channels[i].child_fd == child_fd ||
        strcmp(plan->channels[i].name, name) == 0)
      return maelys__executor_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "channel %s at fd %d duplicates channel %s at fd %d", name, child_fd,
          plan->channels[i].name, plan->channels[i].child_fd);
  if (plan->channel_count >= 64)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "the plan already has 64 channels");
  if (maelys__executor_reserve((void**)&plan->channels, &plan->channel_capacity,
                               sizeof *plan->channels, plan->channel_count + 1))
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory adding a channel");
  char* copy = maelys__executor_strdup(name);
  if (copy == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory adding a channel");
  plan->channels[plan->channel_count++] = (maelys__channel_t){child_fd, copy};
  return MAELYS_EXECUTOR_OK;
}

/* ------------------------------------------------------------- encoding */

typedef struct buffer {
  unsigned char* data;
  size_t len, cap;
  bool failed;
} buffer_t;

static void put(buffer_t* b, const void* p, size_t n) {
  if (b->failed)
    return;
  if (maelys__executor_reserve((void**)&b->data, &b->cap, 1, b->len + n)) {
    b->failed = true;
    return;
  }
  memcpy(b->data + b->len, p, n);
  b->len += n;
}

static void put_u8(buffer_t* b, unsigned v) {
  unsigned char c = (unsigned char)v;
  put(b, &c, 1);
}

static void put_u64(buffer_t* b, uint64_t v) {
  unsigned char x[8];
  for (int i = 0; i < 8; i++)
    x[i] = (unsigned char)(v >> (56 - 8 * i));
  put(b, x, 8);
}

/* Strings are length-prefixed, optional ones behind a presence byte, so no
 * two different plans can encode to the same bytes. */
static void put_str(buffer_t* b, const char* s) {
  size_t n = strlen(s);
  put_u64(b, n);
  put(b, s, n);
}

static void put_opt_str(buffer_t* b, const char* s) {
  put_u8(b, s != NULL);
  if (s != NULL)
    put_str(b, s);
}

int maelys__executor_plan_encode(const maelys_executor_plan_t* plan,
                                 unsigned char** out, size_t* out_len) {
  buffer_t b = {0};
  put_str(&b, PLAN_ENCODING_MAGIC);
  put_u8(&b, 'M');
  put_u64(&b, plan->mount_count);
  for (size_t i = 0; i < plan->mount_count; i++) {
    const maelys__mount_t* m = &plan->mounts[i];
    put_u8(&b, m->kind);
    put_opt_str(&b, m->source);
    put_str(&b, m->destination);
    put_u8(&b, m->missing);
    put_u64(&b, m->size_bytes);
  }
  put_u8(&b, 'R');
  put_u64(&b, plan->rule_count);
  for (size_t i = 0; i < plan->rule_count; i++) {
    put_str(&b, plan->rules[i].path);
    put_u8(&b, plan->rules[i].access);
    put_u8(&b, plan->rules[i].scope);
  }
  put_u8(&b, 'N');
  put_u8(&b, plan->network);
  put_u64(&b, plan->destination_count);
  for (size_t i = 0; i < plan->destination_count; i++) {
    put_str(&b, plan->destinations[i].host);
    put_u64(&b, plan->destinations[i].port);
  }
  put_opt_str(&b, plan->mediator);
  put_u8(&b, 'O');
  put_u8(&b, plan->root);
  put_u64(&b, plan->scratch_bytes);
  put_u8(&b, 'C');
  put_u64(&b, plan->required);
  put_u8(&b, 'T');
  put_u8(&b, plan->process_tree_required);
  put_u8(&b, 'L');
  for (int i = 1; i < MAELYS__RLIMIT_COUNT; i++) {
    put_u8(&b, plan->rlimits[i].set);
    put_u64(&b, plan->rlimits[i].soft);
    put_u64(&b, plan->rlimits[i].hard);
  }
  put_u8(&b, 'X');
  for (int i = 1; i < MAELYS__LIMIT_COUNT; i++)
    put_u64(&b, plan->limits[i]);
  put_u8(&b, 'D');
  put_opt_str(&b, plan->decision_digest);
  put_u8(&b, 'H');
  put_u64(&b, plan->channel_count);
  for (size_t i = 0; i < plan->channel_count; i++) {
    put_u64(&b, (uint64_t)plan->channels[i].child_fd);
    put_str(&b, plan->channels[i].name);
  }
  if (b.failed) {
    free(b.data);
    return -1;
  }
  *out = b.data;
  *out_len = b.len;
  return 0;
}

/* ----------------------------------------------------------------- seal */

maelys_executor_result_t maelys_executor_plan_seal(maelys_executor_plan_t* plan,
                                                   char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  maelys_executor_result_t r =
      writable(plan, "maelys_executor_plan_seal", out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;

  if (!plan->network_set)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "the plan's network mode was never set: choose one with "
        "maelys_executor_plan_set_network (INHERIT, the host's network, must "
        "be asked for explicitly)");
  bool mediated = plan->network == MAELYS_EXECUTOR_NETWORK_MEDIATED;
  if (mediated && plan->mediator == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "a MEDIATED network needs a mediator id");
  if (mediated && plan->destination_count == 0)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "a MEDIATED network needs at least one TCP destination");
  if (!mediated && plan->destination_count > 0)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "network destinations are given but the network mode is %s, not "
        "mediated: they would be dropped",
        maelys__executor_network_name(plan->network));
  if (!mediated && plan->mediator != NULL)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "a mediator is named but the network mode is %s, not mediated",
        maelys__executor_network_name(plan->network));
  if (plan->network == MAELYS_EXECUTOR_NETWORK_EXTERNAL_CHANNEL &&
      plan->channel_count == 0)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "an EXTERNAL_CHANNEL network needs the channel it is reached through");

  unsigned char* enc = NULL;
  size_t enc_len = 0;
  if (maelys__executor_plan_encode(plan, &enc, &enc_len))
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory encoding the plan");
  unsigned char hash[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(hash, enc, enc_len);
  free(enc);
  memcpy(plan->digest, "sha256:", 7);
  maelys__executor_hex(hash, sizeof hash, plan->digest + 7);
  plan->sealed = true;
  return MAELYS_EXECUTOR_OK;
}

int maelys_executor_plan_is_sealed(const maelys_executor_plan_t* plan) {
  return plan != NULL && plan->sealed;
}

maelys_executor_result_t
maelys_executor_plan_digest(const maelys_executor_plan_t* plan,
                            char** out_digest, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (out_digest == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "out_digest is NULL");
  *out_digest = NULL;
  if (plan == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "plan is NULL");
  if (!plan->sealed)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                                 "the plan is not sealed, so it has no digest");
  *out_digest = maelys__executor_strdup(plan->digest);
  if (*out_digest == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_executor_plan_required_capabilities(const maelys_executor_plan_t* plan,
                                           uint64_t* out_capabilities,
                                           char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (out_capabilities == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "out_capabilities is NULL");
  *out_capabilities = 0;
  if (plan == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "plan is NULL");
  uint64_t need = plan->required;
  /* A mount namespace is required by what only one can build: a bind to
   * another path, a tmpfs, a procfs, a scratch root. A same-path bind, a
   * symlink, a directory and /dev can also be what the host already holds,
   * granted as it is (the Landlock backend checks and grants them exactly,
   * or refuses the plan in prepare, naming the mount). */
  for (size_t i = 0; i < plan->mount_count; i++) {
    const maelys__mount_t* m = &plan->mounts[i];
    switch (m->kind) {
    case MAELYS_EXECUTOR_MOUNT_RO_BIND:
    case MAELYS_EXECUTOR_MOUNT_BIND:
      need |= m->kind == MAELYS_EXECUTOR_MOUNT_BIND
                  ? MAELYS_BACKEND_CAP_FILESYSTEM_WRITE
                  : MAELYS_BACKEND_CAP_FILESYSTEM_READ;
      if (strcmp(m->source, m->destination) != 0)
        need |= MAELYS_BACKEND_CAP_MOUNT_NAMESPACE;
      break;
    case MAELYS_EXECUTOR_MOUNT_TMPFS:
      need |=
          MAELYS_BACKEND_CAP_TMPFS_SIZE | MAELYS_BACKEND_CAP_MOUNT_NAMESPACE;
      break;
    case MAELYS_EXECUTOR_MOUNT_PROC:
      need |=
          MAELYS_BACKEND_CAP_PID_NAMESPACE | MAELYS_BACKEND_CAP_MOUNT_NAMESPACE;
      break;
    default:
      break;
    }
  }
  for (size_t i = 0; i < plan->rule_count; i++) {
    switch (plan->rules[i].access) {
    case MAELYS_EXECUTOR_ACCESS_READ:
      need |= MAELYS_BACKEND_CAP_FILESYSTEM_READ;
      break;
    case MAELYS_EXECUTOR_ACCESS_WRITE:
      need |= MAELYS_BACKEND_CAP_FILESYSTEM_READ |
              MAELYS_BACKEND_CAP_FILESYSTEM_WRITE;
      break;
    case MAELYS_EXECUTOR_ACCESS_DENY:
    case MAELYS_EXECUTOR_ACCESS_PROTECT_CREATE:
      need |= MAELYS_BACKEND_CAP_FILESYSTEM_DENY;
      break;
    }
  }
  switch (plan->network) {
  case MAELYS_EXECUTOR_NETWORK_INHERIT:
    break;
  case MAELYS_EXECUTOR_NETWORK_NONE:
  case MAELYS_EXECUTOR_NETWORK_EXTERNAL_CHANNEL:
    need |= MAELYS_BACKEND_CAP_NETWORK_NONE;
    break;
  case MAELYS_EXECUTOR_NETWORK_MEDIATED:
    if (plan->mediator != NULL &&
        strcmp(plan->mediator, MAELYS_EXECUTOR_MEDIATOR_EGRESS) == 0)
      need |= MAELYS_BACKEND_CAP_NETWORK_MEDIATED_EGRESS;
    else
      need |= MAELYS_BACKEND_CAP_NETWORK_MEDIATED_FD4;
    break;
  }
  switch (plan->root) {
  case MAELYS_EXECUTOR_ROOT_HOST:
    break;
  case MAELYS_EXECUTOR_ROOT_READONLY:
    /* Nothing writable but what the plan grants: bubblewrap builds such a
     * root from binds, Landlock leaves the host's unwritable (each backend
     * states what its bit means). */
    need |= MAELYS_BACKEND_CAP_ROOT_READONLY;
    break;
  case MAELYS_EXECUTOR_ROOT_EPHEMERAL_WRITE:
    need |= MAELYS_BACKEND_CAP_ROOT_EPHEMERAL_WRITE |
            MAELYS_BACKEND_CAP_MOUNT_NAMESPACE | MAELYS_BACKEND_CAP_TMPFS_SIZE;
    break;
  }
  if (plan->process_tree_required)
    need |= MAELYS_BACKEND_CAP_PROCESS_TREE;
  if (plan->limits[MAELYS_EXECUTOR_LIMIT_TASKS] != 0)
    need |= MAELYS_BACKEND_CAP_LIMIT_TASKS;
  if (plan->limits[MAELYS_EXECUTOR_LIMIT_MEMORY] != 0)
    need |= MAELYS_BACKEND_CAP_LIMIT_MEMORY;
  *out_capabilities = need;
  return MAELYS_EXECUTOR_OK;
}

size_t maelys__executor_plan_writable_paths(const maelys_executor_plan_t* plan,
                                            const char** out, size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < plan->mount_count && n < max; i++)
    if (plan->mounts[i].kind == MAELYS_EXECUTOR_MOUNT_BIND)
      out[n++] = plan->mounts[i].source;
  for (size_t i = 0; i < plan->rule_count && n < max; i++)
    if (plan->rules[i].access == MAELYS_EXECUTOR_ACCESS_WRITE)
      out[n++] = plan->rules[i].path;
  return n;
}

/* --------------------------------------------------------- read access */

size_t maelys_executor_plan_mount_count(const maelys_executor_plan_t* plan) {
  return plan ? plan->mount_count : 0;
}

int maelys_executor_plan_mount_get(const maelys_executor_plan_t* plan,
                                   size_t index,
                                   maelys_executor_mount_view_t* out_view) {
  if (plan == NULL || out_view == NULL || index >= plan->mount_count)
    return -1;
  const maelys__mount_t* m = &plan->mounts[index];
  *out_view = (maelys_executor_mount_view_t){m->kind, m->source, m->destination,
                                             m->missing, m->size_bytes};
  return 0;
}

size_t maelys_executor_plan_rule_count(const maelys_executor_plan_t* plan) {
  return plan ? plan->rule_count : 0;
}

int maelys_executor_plan_rule_get(const maelys_executor_plan_t* plan,
                                  size_t index,
                                  maelys_executor_rule_view_t* out_view) {
  if (plan == NULL || out_view == NULL || index >= plan->rule_count)
    return -1;
  const maelys__rule_t* r = &plan->rules[index];
  *out_view = (maelys_executor_rule_view_t){r->path, r->access, r->scope};
  return 0;
}

maelys_executor_network_t
maelys_executor_plan_network(const maelys_executor_plan_t* plan) {
  return plan ? plan->network : MAELYS_EXECUTOR_NETWORK_INHERIT;
}

maelys_executor_root_t
maelys_executor_plan_root(const maelys_executor_plan_t* plan,
                          uint64_t* out_scratch_bytes) {
  if (out_scratch_bytes != NULL)
    *out_scratch_bytes = plan ? plan->scratch_bytes : 0;
  return plan ? plan->root : MAELYS_EXECUTOR_ROOT_HOST;
}

int maelys_executor_plan_process_tree_required(
    const maelys_executor_plan_t* plan) {
  return plan ? plan->process_tree_required : 0;
}

int maelys_executor_plan_rlimit_get(const maelys_executor_plan_t* plan,
                                    maelys_executor_rlimit_t resource,
                                    uint64_t* out_soft, uint64_t* out_hard) {
  if (plan == NULL || resource < MAELYS_EXECUTOR_RLIMIT_CPU ||
      resource > MAELYS_EXECUTOR_RLIMIT_MEMLOCK || !plan->rlimits[resource].set)
    return -1;
  if (out_soft != NULL)
    *out_soft = plan->rlimits[resource].soft;
  if (out_hard != NULL)
    *out_hard = plan->rlimits[resource].hard;
  return 0;
}

int maelys_executor_plan_limit_get(const maelys_executor_plan_t* plan,
                                   maelys_executor_limit_t limit,
                                   uint64_t* out_value) {
  if (plan == NULL || limit < 1 || (int)limit >= MAELYS__LIMIT_COUNT ||
      plan->limits[limit] == 0)
    return -1;
  if (out_value != NULL)
    *out_value = plan->limits[limit];
  return 0;
}
