/*
 * An agent spec becomes a request and a sealed plan. Nothing is evaluated:
 * the spec is the decision a policy decision point made; this only lowers it,
 * and refuses what it cannot lower exactly.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orch-internal.h"

#define RUNTIME_TMP_SIZE (UINT64_C(256) << 20)

/* The system runtime: top-level directories (kept as symbolic links where
 * merged-/usr systems have them) and the few files of /etc a program needs to
 * start, resolve names and trust certificates. Never /run, /tmp or a home. */
static const char* const runtime_paths[] = {"/usr",
                                            "/bin",
                                            "/sbin",
                                            "/lib",
                                            "/lib32",
                                            "/lib64",
                                            "/libx32",
                                            "/etc/ld.so.cache",
                                            "/etc/ld.so.conf",
                                            "/etc/ld.so.conf.d",
                                            "/etc/alternatives",
                                            "/etc/ssl",
                                            "/etc/ca-certificates",
                                            "/etc/passwd",
                                            "/etc/group",
                                            "/etc/nsswitch.conf",
                                            "/etc/localtime",
                                            "/etc/hosts",
                                            "/etc/resolv.conf",
                                            NULL};

static maelys_executor_result_t add_runtime(maelys_executor_plan_t* plan,
                                            char** out_error) {
  for (size_t i = 0; runtime_paths[i]; i++) {
    const char* p = runtime_paths[i];
    struct stat st;
    if (lstat(p, &st) != 0)
      continue; /* absent on this host: nothing to bind */
    maelys_executor_result_t r = MAELYS_EXECUTOR_OK;
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      ssize_t n = readlink(p, target, sizeof target - 1);
      if (n <= 0)
        continue;
      target[n] = '\0';
      r = maelys_executor_plan_add_symlink(plan, target, p, out_error);
    } else if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) {
      r = maelys_executor_plan_add_bind(
          plan, p, p, 0, MAELYS_EXECUTOR_MISSING_SKIP, out_error);
    }
    if (r != MAELYS_EXECUTOR_OK)
      return r;
  }
  maelys_executor_result_t r =
      maelys_executor_plan_add_proc(plan, "/proc", out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_plan_add_dev(plan, "/dev", out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_plan_add_tmpfs(plan, "/tmp", RUNTIME_TMP_SIZE,
                                       out_error);
  return r;
}

/* A rule on a host path listed in the spec: a directory with what is below
 * it, or one file. The kind is read now, without following a link: a link
 * is refused here, by name, rather than at launch. */
static maelys_executor_result_t
add_path_rule(maelys_executor_plan_t* plan, const char* what, const char* path,
              maelys_executor_access_t access, char** out_error) {
  struct stat st;
  maelys_executor_scope_t scope = MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY;
  if (lstat(path, &st) != 0) {
    if (errno == ENOENT && access == MAELYS_EXECUTOR_ACCESS_DENY)
      goto add; /* nothing there to hide unless a bind makes it reachable */
    return maelys__orch_fail(out_error,
                             errno == ENOENT ? MAELYS_EXECUTOR_ERR_NOT_FOUND
                                             : MAELYS_EXECUTOR_ERR_IO,
                             "%s path '%s': %s", what, path, strerror(errno));
  }
  if (S_ISLNK(st.st_mode))
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_DENIED,
                             "%s path '%s' is a symbolic link: name the path "
                             "it resolves to",
                             what, path);
  if (S_ISREG(st.st_mode))
    scope = MAELYS_EXECUTOR_SCOPE_LITERAL_FILE;
  else if (!S_ISDIR(st.st_mode))
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_DENIED,
                             "%s path '%s' is neither a directory nor a "
                             "regular file",
                             what, path);
add:;
  char* error = NULL;
  maelys_executor_result_t r =
      maelys_executor_plan_add_rule(plan, path, access, scope, &error);
  if (r != MAELYS_EXECUTOR_OK) {
    maelys__orch_fail(out_error, r, "%s path '%s': %s", what, path,
                      error ? error : "refused");
    maelys_executor_error_free(error);
  }
  return r;
}

static const maelys_executor_rlimit_t rlimit_of[9] = {
    [MAELYS_ORCHESTRATOR_LIMIT_CPU_SECONDS] = MAELYS_EXECUTOR_RLIMIT_CPU,
    [MAELYS_ORCHESTRATOR_LIMIT_FILE_SIZE] = MAELYS_EXECUTOR_RLIMIT_FSIZE,
    [MAELYS_ORCHESTRATOR_LIMIT_OPEN_FILES] = MAELYS_EXECUTOR_RLIMIT_NOFILE,
    [MAELYS_ORCHESTRATOR_LIMIT_ADDRESS_SPACE] = MAELYS_EXECUTOR_RLIMIT_AS,
    [MAELYS_ORCHESTRATOR_LIMIT_CORE_SIZE] = MAELYS_EXECUTOR_RLIMIT_CORE,
};

static maelys_executor_result_t build_plan(const maelys_orchestrator_spec_t* s,
                                           maelys_executor_plan_t** out,
                                           char** out_error) {
  maelys_executor_plan_t* plan = NULL;
  maelys_executor_result_t r = maelys_executor_plan_create(&plan, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  r = maelys_executor_plan_set_root(plan, MAELYS_EXECUTOR_ROOT_READONLY, 0,
                                    out_error);
  if (r == MAELYS_EXECUTOR_OK &&
      s->runtime == MAELYS_ORCHESTRATOR_RUNTIME_SYSTEM)
    r = add_runtime(plan, out_error);
  for (size_t i = 0; r == MAELYS_EXECUTOR_OK && i < s->private_count; i++)
    r = maelys_executor_plan_add_tmpfs(plan, s->privates[i].path,
                                       s->privates[i].size, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = add_path_rule(plan, "workspace", s->workspace,
                      s->workspace_writable ? MAELYS_EXECUTOR_ACCESS_WRITE
                                            : MAELYS_EXECUTOR_ACCESS_READ,
                      out_error);
  for (size_t i = 0; r == MAELYS_EXECUTOR_OK && i < s->writable.count; i++)
    r = add_path_rule(plan, "writable", s->writable.items[i],
                      MAELYS_EXECUTOR_ACCESS_WRITE, out_error);
  for (size_t i = 0; r == MAELYS_EXECUTOR_OK && i < s->readable.count; i++)
    r = add_path_rule(plan, "readable", s->readable.items[i],
                      MAELYS_EXECUTOR_ACCESS_READ, out_error);
  for (size_t i = 0; r == MAELYS_EXECUTOR_OK && i < s->denied.count; i++)
    r = add_path_rule(plan, "denied", s->denied.items[i],
                      MAELYS_EXECUTOR_ACCESS_DENY, out_error);
  /* Always explicit: a plan's network is never a default. */
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_plan_set_network(plan, s->network, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_plan_set_process_tree_required(plan, 1, out_error);
  for (int l = 1; r == MAELYS_EXECUTOR_OK && l < 9; l++)
    if (s->limit_set[l] && rlimit_of[l] != 0)
      r = maelys_executor_plan_set_rlimit(plan, rlimit_of[l], s->limits[l],
                                          s->limits[l], out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_plan_seal(plan, out_error);
  if (r != MAELYS_EXECUTOR_OK) {
    maelys_executor_plan_destroy(plan);
    return r;
  }
  *out = plan;
  return MAELYS_EXECUTOR_OK;
}

static const char* lookup_env(const char* const* env, const char* name) {
  size_t n = strlen(name);
  for (size_t i = 0; env != NULL && env[i] != NULL; i++)
    if (strncmp(env[i], name, n) == 0 && env[i][n] == '=')
      return env[i] + n + 1;
  return NULL;
}

static maelys_executor_result_t
build_request(const maelys_orchestrator_spec_t* s,
              const char* const* host_environ, maelys_execution_request_t** out,
              char** out_error) {
  maelys_execution_request_t* req = NULL;
  maelys_executor_result_t r = maelys_execution_request_create(&req, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  r = maelys_execution_request_set_executable(req, s->executable, out_error);
  if (r == MAELYS_EXECUTOR_OK && s->argv_set)
    r = maelys_execution_request_set_argv(
        req, (const char* const*)s->argv.items, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_execution_request_set_environment_mode(
        req, MAELYS_EXEC_ENV_EXPLICIT, out_error);
  for (size_t i = 0; r == MAELYS_EXECUTOR_OK && i < s->env_names.count; i++)
    r = maelys_execution_request_add_environment(
        req, s->env_names.items[i], s->env_values.items[i], out_error);
  for (size_t i = 0; r == MAELYS_EXECUTOR_OK && i < s->pass.count; i++) {
    const char* v = lookup_env(host_environ, s->pass.items[i]);
    if (v != NULL)
      r = maelys_execution_request_add_environment(req, s->pass.items[i], v,
                                                   out_error);
  }
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_execution_request_set_cwd(req, s->workspace, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_execution_request_set_io_mode(
        req,
        s->endpoint == MAELYS_ORCHESTRATOR_ENDPOINT_CAPTURED
            ? MAELYS_EXEC_IO_CAPTURED
            : MAELYS_EXEC_IO_DUPLEX_STDIO,
        -1, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_execution_request_set_stderr_mode(req, s->stderr_mode,
                                                 out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_execution_request_set_backend(req, s->backend, out_error);
  if (r != MAELYS_EXECUTOR_OK) {
    maelys_execution_request_destroy(req);
    return r;
  }
  *out = req;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t maelys_orchestrator_prepare(
    const maelys_orchestrator_spec_t* spec, const char* const* host_environ,
    maelys_execution_request_t** out_request, maelys_executor_plan_t** out_plan,
    char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (out_request == NULL || out_plan == NULL)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "out_request and out_plan are required");
  *out_request = NULL;
  *out_plan = NULL;
  if (spec == NULL)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "spec is NULL");
  if (spec->executable == NULL)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "the agent spec has no executable");
  if (spec->workspace == NULL)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "the agent spec has no workspace");
  if (!spec->network_set)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "the agent spec sets no network mode: it is "
                             "never defaulted (none or inherit)");
  maelys_executor_plan_t* plan = NULL;
  maelys_execution_request_t* req = NULL;
  maelys_executor_result_t r = build_plan(spec, &plan, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = build_request(spec, host_environ, &req, out_error);
  if (r != MAELYS_EXECUTOR_OK) {
    maelys_executor_plan_destroy(plan);
    return r;
  }
  *out_request = req;
  *out_plan = plan;
  return MAELYS_EXECUTOR_OK;
}
