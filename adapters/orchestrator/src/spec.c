/*
 * The agent specification: the same shape for Codex, Claude Code or any
 * other agent process, set through the C API or read from its JSON form
 * (maelys-agent-spec/1), every member validated with its JSON path.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orch-internal.h"

#define SPEC_MAX_BYTES (1024 * 1024)
#define LIST_MAX 4096

#define CHECK_SPEC(spec)                                                       \
  do {                                                                         \
    if (out_error != NULL && *out_error != NULL)                               \
      return MAELYS_EXECUTOR_ERR_ARGUMENT;                                     \
    if ((spec) == NULL)                                                        \
      return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,        \
                               "spec is NULL");                                \
  } while (0)

static maelys_executor_result_t oom(char** out_error) {
  return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                           "out of memory");
}

maelys_executor_result_t
maelys_orchestrator_spec_create(maelys_orchestrator_spec_t** out_spec,
                                char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (out_spec == NULL)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "out_spec is NULL");
  *out_spec = calloc(1, sizeof **out_spec);
  if (*out_spec == NULL)
    return oom(out_error);
  (*out_spec)->runtime = MAELYS_ORCHESTRATOR_RUNTIME_SYSTEM;
  (*out_spec)->endpoint = MAELYS_ORCHESTRATOR_ENDPOINT_DUPLEX_STDIO;
  (*out_spec)->stderr_mode = MAELYS_EXEC_STDERR_INHERIT;
  (*out_spec)->backend = maelys__orch_strdup("bubblewrap");
  if ((*out_spec)->backend == NULL) {
    free(*out_spec);
    *out_spec = NULL;
    return oom(out_error);
  }
  return MAELYS_EXECUTOR_OK;
}

void maelys_orchestrator_spec_destroy(maelys_orchestrator_spec_t* spec) {
  if (spec == NULL)
    return;
  free(spec->executable);
  maelys__orch_list_free(&spec->argv);
  free(spec->workspace);
  maelys__orch_list_free(&spec->writable);
  maelys__orch_list_free(&spec->readable);
  maelys__orch_list_free(&spec->denied);
  for (size_t i = 0; i < spec->private_count; i++)
    free(spec->privates[i].path);
  free(spec->privates);
  maelys__orch_list_free(&spec->env_names);
  maelys__orch_list_free(&spec->env_values);
  maelys__orch_list_free(&spec->pass);
  free(spec->backend);
  free(spec);
}

static maelys_executor_result_t check_clean(const char* what, const char* path,
                                            char** out_error) {
  if (!maelys__orch_path_is_clean(path))
    return maelys__orch_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "%s '%s' is not a clean absolute path (no '.', '..', empty component "
        "or trailing '/')",
        what, path ? path : "(null)");
  return MAELYS_EXECUTOR_OK;
}

static maelys_executor_result_t replace(char** slot, const char* value,
                                        char** out_error) {
  char* c = maelys__orch_strdup(value);
  if (c == NULL)
    return oom(out_error);
  free(*slot);
  *slot = c;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_orchestrator_spec_set_executable(maelys_orchestrator_spec_t* spec,
                                        const char* path, char** out_error) {
  CHECK_SPEC(spec);
  maelys_executor_result_t r = check_clean("executable", path, out_error);
  return r ? r : replace(&spec->executable, path, out_error);
}

maelys_executor_result_t
maelys_orchestrator_spec_set_argv(maelys_orchestrator_spec_t* spec,
                                  const char* const* argv, char** out_error) {
  CHECK_SPEC(spec);
  if (argv == NULL || argv[0] == NULL)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "argv needs at least argv[0]");
  orch_list_t l = {0};
  for (size_t i = 0; argv[i] != NULL; i++)
    if (i >= LIST_MAX || maelys__orch_list_add(&l, argv[i]) != 0) {
      maelys__orch_list_free(&l);
      return i >= LIST_MAX
                 ? maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                     "argv has too many entries")
                 : oom(out_error);
    }
  maelys__orch_list_free(&spec->argv);
  spec->argv = l;
  spec->argv_set = true;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_orchestrator_spec_set_workspace(maelys_orchestrator_spec_t* spec,
                                       const char* path, int writable,
                                       char** out_error) {
  CHECK_SPEC(spec);
  maelys_executor_result_t r = check_clean("workspace", path, out_error);
  if (r == MAELYS_EXECUTOR_OK && strcmp(path, "/") == 0)
    r = maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_DENIED,
                          "the workspace cannot be '/'");
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  spec->workspace_writable = writable != 0;
  return replace(&spec->workspace, path, out_error);
}

static maelys_executor_result_t add_path(orch_list_t* l, const char* what,
                                         const char* path, char** out_error) {
  maelys_executor_result_t r = check_clean(what, path, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  if (l->count >= LIST_MAX)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "too many %s paths", what);
  return maelys__orch_list_add(l, path) ? oom(out_error) : MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_orchestrator_spec_add_writable(maelys_orchestrator_spec_t* spec,
                                      const char* path, char** out_error) {
  CHECK_SPEC(spec);
  return add_path(&spec->writable, "writable", path, out_error);
}

maelys_executor_result_t
maelys_orchestrator_spec_add_readable(maelys_orchestrator_spec_t* spec,
                                      const char* path, char** out_error) {
  CHECK_SPEC(spec);
  return add_path(&spec->readable, "readable", path, out_error);
}

maelys_executor_result_t
maelys_orchestrator_spec_add_denied(maelys_orchestrator_spec_t* spec,
                                    const char* path, char** out_error) {
  CHECK_SPEC(spec);
  return add_path(&spec->denied, "denied", path, out_error);
}

maelys_executor_result_t
maelys_orchestrator_spec_add_private(maelys_orchestrator_spec_t* spec,
                                     const char* path, uint64_t size_bytes,
                                     char** out_error) {
  CHECK_SPEC(spec);
  maelys_executor_result_t r = check_clean("private", path, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  if (size_bytes == 0)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "private directory '%s' needs a size", path);
  if (spec->private_count + 1 > spec->private_capacity) {
    size_t cap = spec->private_capacity ? spec->private_capacity * 2 : 4;
    orch_private_t* p = realloc(spec->privates, cap * sizeof *p);
    if (p == NULL)
      return oom(out_error);
    spec->privates = p;
    spec->private_capacity = cap;
  }
  char* c = maelys__orch_strdup(path);
  if (c == NULL)
    return oom(out_error);
  spec->privates[spec->private_count++] = (orch_private_t){c, size_bytes};
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_orchestrator_spec_set_runtime(maelys_orchestrator_spec_t* spec,
                                     maelys_orchestrator_runtime_t runtime,
                                     char** out_error) {
  CHECK_SPEC(spec);
  if (runtime != MAELYS_ORCHESTRATOR_RUNTIME_SYSTEM &&
      runtime != MAELYS_ORCHESTRATOR_RUNTIME_NONE)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "unknown runtime %d", (int)runtime);
  spec->runtime = runtime;
  return MAELYS_EXECUTOR_OK;
}

static bool env_name_is_valid(const char* n) {
  if (n == NULL || n[0] == '\0' || strlen(n) > 256)
    return false;
  for (const char* c = n; *c; c++)
    if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || *c == '_' ||
          (c != n && *c >= '0' && *c <= '9')))
      return false;
  return true;
}

static bool env_named(const maelys_orchestrator_spec_t* spec, const char* n) {
  for (size_t i = 0; i < spec->env_names.count; i++)
    if (strcmp(spec->env_names.items[i], n) == 0)
      return true;
  for (size_t i = 0; i < spec->pass.count; i++)
    if (strcmp(spec->pass.items[i], n) == 0)
      return true;
  return false;
}

maelys_executor_result_t
maelys_orchestrator_spec_set_environment(maelys_orchestrator_spec_t* spec,
                                         const char* name, const char* value,
                                         char** out_error) {
  CHECK_SPEC(spec);
  if (!env_name_is_valid(name) || value == NULL)
    return maelys__orch_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "environment name '%s' is not [A-Za-z_][A-Za-z0-9_]* "
        "or its value is NULL",
        name ? name : "(null)");
  if (env_named(spec, name))
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "environment name '%s' is given twice", name);
  if (maelys__orch_list_add(&spec->env_names, name) != 0)
    return oom(out_error);
  if (maelys__orch_list_add(&spec->env_values, value) != 0) {
    free(spec->env_names.items[--spec->env_names.count]);
    spec->env_names.items[spec->env_names.count] = NULL;
    return oom(out_error);
  }
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_orchestrator_spec_pass_environment(maelys_orchestrator_spec_t* spec,
                                          const char* name, char** out_error) {
  CHECK_SPEC(spec);
  if (!env_name_is_valid(name))
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "environment name '%s' is not valid",
                             name ? name : "(null)");
  if (env_named(spec, name))
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "environment name '%s' is given twice", name);
  return maelys__orch_list_add(&spec->pass, name) ? oom(out_error)
                                                  : MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_orchestrator_spec_set_network(maelys_orchestrator_spec_t* spec,
                                     maelys_executor_network_t mode,
                                     char** out_error) {
  CHECK_SPEC(spec);
  if (mode == MAELYS_EXECUTOR_NETWORK_MEDIATED ||
      mode == MAELYS_EXECUTOR_NETWORK_EXTERNAL_CHANNEL)
    return maelys__orch_fail(
        out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
        "network %s: the orchestrator adapter is a pure adapter; only a host "
        "that owns an egress broker composes mediated or external-channel "
        "plans (invariant 15)",
        mode == MAELYS_EXECUTOR_NETWORK_MEDIATED ? "mediated"
                                                 : "external-channel");
  if (mode != MAELYS_EXECUTOR_NETWORK_NONE &&
      mode != MAELYS_EXECUTOR_NETWORK_INHERIT)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "unknown network mode %d", (int)mode);
  spec->network = mode;
  spec->network_set = true;
  return MAELYS_EXECUTOR_OK;
}

/* Sandbox-wide limits: a coming core change makes them plan fields with their
 * own setter. Until this build has them, a spec that asks for one is refused
 * here, and only here, so that switching them on is one change. Nothing is
 * approximated with a per-process rlimit: RLIMIT_NPROC counts a uid's
 * processes, RLIMIT_AS one process's address space; neither bounds a
 * sandbox. */
static maelys_executor_result_t
sandbox_wide_limit(maelys_orchestrator_spec_t* spec,
                   maelys_orchestrator_limit_t limit, uint64_t value,
                   char** out_error) {
  (void)spec;
  (void)value;
  return maelys__orch_fail(
      out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
      "limit %s: sandbox-wide %s limits are not supported by this build (no "
      "plan field expresses them yet); per-process limits are cpu_seconds, "
      "file_size, open_files, address_space and core_size",
      limit == MAELYS_ORCHESTRATOR_LIMIT_TASKS ? "tasks" : "memory",
      limit == MAELYS_ORCHESTRATOR_LIMIT_TASKS ? "task" : "memory");
}

maelys_executor_result_t
maelys_orchestrator_spec_set_limit(maelys_orchestrator_spec_t* spec,
                                   maelys_orchestrator_limit_t limit,
                                   uint64_t value, char** out_error) {
  CHECK_SPEC(spec);
  if (limit < MAELYS_ORCHESTRATOR_LIMIT_CPU_SECONDS ||
      limit > MAELYS_ORCHESTRATOR_LIMIT_WALL_TIME_MS)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "unknown limit %d", (int)limit);
  if (limit == MAELYS_ORCHESTRATOR_LIMIT_TASKS ||
      limit == MAELYS_ORCHESTRATOR_LIMIT_MEMORY)
    return sandbox_wide_limit(spec, limit, value, out_error);
  if (limit == MAELYS_ORCHESTRATOR_LIMIT_WALL_TIME_MS &&
      (value == 0 || value == MAELYS_EXECUTOR_RLIMIT_INFINITY))
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "wall time must be a positive number of ms");
  spec->limit_set[limit] = true;
  spec->limits[limit] = value;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_orchestrator_spec_set_endpoint(maelys_orchestrator_spec_t* spec,
                                      maelys_orchestrator_endpoint_t endpoint,
                                      char** out_error) {
  CHECK_SPEC(spec);
  if (endpoint != MAELYS_ORCHESTRATOR_ENDPOINT_CAPTURED &&
      endpoint != MAELYS_ORCHESTRATOR_ENDPOINT_DUPLEX_STDIO)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "unknown endpoint %d", (int)endpoint);
  spec->endpoint = endpoint;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_orchestrator_spec_set_backend(maelys_orchestrator_spec_t* spec,
                                     const char* name, char** out_error) {
  CHECK_SPEC(spec);
  if (name == NULL || name[0] == '\0' || strlen(name) > 64)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "backend name is empty or too long");
  return replace(&spec->backend, name, out_error);
}

const char*
maelys_orchestrator_spec_backend(const maelys_orchestrator_spec_t* spec) {
  return spec ? spec->backend : NULL;
}

maelys_orchestrator_endpoint_t
maelys_orchestrator_spec_endpoint(const maelys_orchestrator_spec_t* spec) {
  return spec ? spec->endpoint : MAELYS_ORCHESTRATOR_ENDPOINT_DUPLEX_STDIO;
}

uint64_t
maelys_orchestrator_spec_wall_time_ms(const maelys_orchestrator_spec_t* spec) {
  return spec && spec->limit_set[MAELYS_ORCHESTRATOR_LIMIT_WALL_TIME_MS]
             ? spec->limits[MAELYS_ORCHESTRATOR_LIMIT_WALL_TIME_MS]
             : 0;
}

int maelys_orchestrator_spec_writes(const maelys_orchestrator_spec_t* spec,
                                    const char* path) {
  if (spec == NULL || path == NULL)
    return 0;
  if (spec->workspace && spec->workspace_writable &&
      maelys__orch_within(path, spec->workspace))
    return 1;
  for (size_t i = 0; i < spec->writable.count; i++)
    if (maelys__orch_within(path, spec->writable.items[i]))
      return 1;
  return 0;
}

/* ---------------------------------------------------------------- JSON */

typedef struct reader {
  char** out_error;
  maelys_executor_result_t result;
} reader_t;

static bool bad(reader_t* rd, const char* path, const char* fmt, ...)
    MAELYS__ORCH_PRINTF(3, 4);
static bool bad(reader_t* rd, const char* path, const char* fmt, ...) {
  if (rd->result == MAELYS_EXECUTOR_OK)
    rd->result = MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (rd->out_error != NULL && *rd->out_error == NULL) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    *rd->out_error = maelys__orch_asprintf("agent spec %s: %s", path, msg);
  }
  return false;
}

/* A setter's failure, re-labelled with the JSON path. */
/* `error` is read after the setter ran (an argument would be evaluated in an
 * unspecified order relative to the call). */
static bool apply(reader_t* rd, const char* path, maelys_executor_result_t r,
                  char** errorp) {
  char* error = *errorp;
  *errorp = NULL;
  if (r == MAELYS_EXECUTOR_OK)
    return true;
  rd->result = r;
  if (rd->out_error != NULL && *rd->out_error == NULL)
    *rd->out_error = maelys__orch_asprintf("agent spec %s: %s", path,
                                           error ? error : "invalid");
  maelys_executor_error_free(error);
  return false;
}

static bool only(reader_t* rd, const char* path, json_t* obj,
                 const char* const* allowed) {
  const char* key;
  json_t* v;
  json_object_foreach(obj, key, v) {
    bool ok = false;
    for (size_t i = 0; allowed[i] && !ok; i++)
      ok = strcmp(allowed[i], key) == 0;
    if (!ok)
      return bad(rd, path, "unknown member '%s'", key);
  }
  return true;
}

static const char* str(reader_t* rd, const char* path, json_t* v) {
  if (!json_is_string(v)) {
    bad(rd, path, "must be a string");
    return NULL;
  }
  return json_string_value(v);
}

typedef maelys_executor_result_t (*path_setter)(maelys_orchestrator_spec_t*,
                                                const char*, char**);

static bool read_paths(reader_t* rd, maelys_orchestrator_spec_t* spec,
                       json_t* doc, const char* member, path_setter set) {
  json_t* v = json_object_get(doc, member);
  if (v == NULL)
    return true;
  char path[64];
  snprintf(path, sizeof path, "$.%s", member);
  if (!json_is_array(v))
    return bad(rd, path, "must be an array of absolute paths");
  size_t i;
  json_t* item;
  json_array_foreach(v, i, item) {
    snprintf(path, sizeof path, "$.%s[%zu]", member, i);
    const char* s = str(rd, path, item);
    char* error = NULL;
    if (s == NULL || !apply(rd, path, set(spec, s, &error), &error))
      return false;
  }
  return true;
}

static bool read_limits(reader_t* rd, maelys_orchestrator_spec_t* spec,
                        json_t* v) {
  static const struct {
    const char* name;
    maelys_orchestrator_limit_t limit;
  } names[] = {{"cpu_seconds", MAELYS_ORCHESTRATOR_LIMIT_CPU_SECONDS},
               {"file_size", MAELYS_ORCHESTRATOR_LIMIT_FILE_SIZE},
               {"open_files", MAELYS_ORCHESTRATOR_LIMIT_OPEN_FILES},
               {"address_space", MAELYS_ORCHESTRATOR_LIMIT_ADDRESS_SPACE},
               {"core_size", MAELYS_ORCHESTRATOR_LIMIT_CORE_SIZE},
               {"tasks", MAELYS_ORCHESTRATOR_LIMIT_TASKS},
               {"memory", MAELYS_ORCHESTRATOR_LIMIT_MEMORY},
               {"wall_time_ms", MAELYS_ORCHESTRATOR_LIMIT_WALL_TIME_MS}};
  if (!json_is_object(v))
    return bad(rd, "$.limits", "must be an object");
  const char* key;
  json_t* val;
  json_object_foreach(v, key, val) {
    char path[64];
    snprintf(path, sizeof path, "$.limits.%s", key);
    size_t k = 0;
    while (k < sizeof names / sizeof names[0] &&
           strcmp(names[k].name, key) != 0)
      k++;
    if (k == sizeof names / sizeof names[0])
      return bad(rd, "$.limits", "unknown member '%s'", key);
    uint64_t n;
    if (json_is_string(val) &&
        strcmp(json_string_value(val), "unlimited") == 0 &&
        names[k].limit != MAELYS_ORCHESTRATOR_LIMIT_WALL_TIME_MS)
      n = MAELYS_EXECUTOR_RLIMIT_INFINITY;
    else if (json_is_integer(val) && json_integer_value(val) >= 0)
      n = (uint64_t)json_integer_value(val);
    else
      return bad(rd, path, "must be a non-negative integer%s",
                 names[k].limit == MAELYS_ORCHESTRATOR_LIMIT_WALL_TIME_MS
                     ? ""
                     : " or \"unlimited\"");
    char* error = NULL;
    if (!apply(
            rd, path,
            maelys_orchestrator_spec_set_limit(spec, names[k].limit, n, &error),
            &error))
      return false;
  }
  return true;
}

static bool read_environment(reader_t* rd, maelys_orchestrator_spec_t* spec,
                             json_t* v) {
  static const char* const allowed[] = {"set", "pass", NULL};
  if (!json_is_object(v))
    return bad(rd, "$.environment", "must be an object");
  if (!only(rd, "$.environment", v, allowed))
    return false;
  json_t* set = json_object_get(v, "set");
  if (set != NULL) {
    if (!json_is_object(set))
      return bad(rd, "$.environment.set", "must be an object of strings");
    const char* key;
    json_t* val;
    json_object_foreach(set, key, val) {
      char path[320];
      snprintf(path, sizeof path, "$.environment.set.%s", key);
      const char* s = str(rd, path, val);
      char* error = NULL;
      if (s == NULL ||
          !apply(rd, path,
                 maelys_orchestrator_spec_set_environment(spec, key, s, &error),
                 &error))
        return false;
    }
  }
  json_t* pass = json_object_get(v, "pass");
  if (pass != NULL) {
    if (!json_is_array(pass))
      return bad(rd, "$.environment.pass", "must be an array of names");
    size_t i;
    json_t* item;
    json_array_foreach(pass, i, item) {
      char path[64];
      snprintf(path, sizeof path, "$.environment.pass[%zu]", i);
      const char* s = str(rd, path, item);
      char* error = NULL;
      if (s == NULL ||
          !apply(rd, path,
                 maelys_orchestrator_spec_pass_environment(spec, s, &error),
                 &error))
        return false;
    }
  }
  return true;
}

static bool choice(reader_t* rd, json_t* doc, const char* member,
                   const char* const* names, int* out) {
  json_t* v = json_object_get(doc, member);
  if (v == NULL)
    return true;
  char path[64];
  snprintf(path, sizeof path, "$.%s", member);
  const char* s = str(rd, path, v);
  if (s == NULL)
    return false;
  for (int i = 0; names[i]; i++)
    if (strcmp(names[i], s) == 0) {
      *out = i;
      return true;
    }
  char list[256] = "";
  for (int i = 0; names[i]; i++) {
    strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
    strncat(list, names[i], sizeof list - strlen(list) - 1);
  }
  return bad(rd, path, "must be one of: %s (got \"%s\")", list, s);
}

static bool read_spec(reader_t* rd, maelys_orchestrator_spec_t* spec,
                      json_t* doc) {
  static const char* const allowed[] = {
      "format",   "executable",  "argv",    "workspace",
      "writable", "readable",    "denied",  "private",
      "runtime",  "environment", "network", "limits",
      "endpoint", "stderr",      "backend", NULL};
  if (!json_is_object(doc))
    return bad(rd, "$", "must be an object");
  if (!only(rd, "$", doc, allowed))
    return false;
  json_t* v = json_object_get(doc, "format");
  if (v == NULL)
    return bad(rd, "$.format",
               "is required (\"" MAELYS_ORCHESTRATOR_SPEC_FORMAT "\")");
  const char* s = str(rd, "$.format", v);
  if (s == NULL)
    return false;
  if (strcmp(s, MAELYS_ORCHESTRATOR_SPEC_FORMAT) != 0)
    return bad(rd, "$.format",
               "must be \"" MAELYS_ORCHESTRATOR_SPEC_FORMAT "\" (got \"%s\")",
               s);
  char* error = NULL;
  if ((v = json_object_get(doc, "executable")) == NULL)
    return bad(rd, "$.executable", "is required");
  if ((s = str(rd, "$.executable", v)) == NULL ||
      !apply(rd, "$.executable",
             maelys_orchestrator_spec_set_executable(spec, s, &error), &error))
    return false;
  if ((v = json_object_get(doc, "argv")) != NULL) {
    if (!json_is_array(v) || json_array_size(v) == 0)
      return bad(rd, "$.argv", "must be a non-empty array of strings");
    const char** argv = calloc(json_array_size(v) + 1, sizeof *argv);
    if (argv == NULL)
      return bad(rd, "$.argv", "out of memory");
    size_t i;
    json_t* item;
    json_array_foreach(v, i, item) {
      char path[48];
      snprintf(path, sizeof path, "$.argv[%zu]", i);
      if ((argv[i] = str(rd, path, item)) == NULL) {
        free(argv);
        return false;
      }
    }
    error = NULL;
    bool ok =
        apply(rd, "$.argv",
              maelys_orchestrator_spec_set_argv(spec, argv, &error), &error);
    free(argv);
    if (!ok)
      return false;
  }
  if ((v = json_object_get(doc, "workspace")) == NULL)
    return bad(rd, "$.workspace", "is required");
  static const char* const ws_allowed[] = {"path", "access", NULL};
  if (!json_is_object(v))
    return bad(rd, "$.workspace",
               "must be an object {\"path\": ..., \"access\": \"read\" | "
               "\"write\"}");
  if (!only(rd, "$.workspace", v, ws_allowed))
    return false;
  static const char* const access_names[] = {"read", "write", NULL};
  int access = -1;
  if (json_object_get(v, "access") == NULL)
    return bad(rd, "$.workspace.access", "is required (\"read\" or \"write\")");
  if (!choice(rd, v, "access", access_names, &access))
    return false;
  json_t* p = json_object_get(v, "path");
  if (p == NULL)
    return bad(rd, "$.workspace.path", "is required");
  error = NULL;
  if ((s = str(rd, "$.workspace.path", p)) == NULL ||
      !apply(
          rd, "$.workspace.path",
          maelys_orchestrator_spec_set_workspace(spec, s, access == 1, &error),
          &error))
    return false;
  if (!read_paths(rd, spec, doc, "writable",
                  maelys_orchestrator_spec_add_writable) ||
      !read_paths(rd, spec, doc, "readable",
                  maelys_orchestrator_spec_add_readable) ||
      !read_paths(rd, spec, doc, "denied", maelys_orchestrator_spec_add_denied))
    return false;
  if ((v = json_object_get(doc, "private")) != NULL) {
    if (!json_is_array(v))
      return bad(rd, "$.private", "must be an array");
    size_t i;
    json_t* item;
    json_array_foreach(v, i, item) {
      char path[48];
      snprintf(path, sizeof path, "$.private[%zu]", i);
      static const char* const pallowed[] = {"path", "size", NULL};
      if (!json_is_object(item))
        return bad(rd, path, "must be an object {\"path\", \"size\"}");
      if (!only(rd, path, item, pallowed))
        return false;
      json_t* size = json_object_get(item, "size");
      if (!json_is_integer(size) || json_integer_value(size) <= 0)
        return bad(rd, path, "size must be a positive number of bytes");
      const char* ps = str(rd, path, json_object_get(item, "path"));
      error = NULL;
      if (ps == NULL ||
          !apply(rd, path,
                 maelys_orchestrator_spec_add_private(
                     spec, ps, (uint64_t)json_integer_value(size), &error),
                 &error))
        return false;
    }
  }
  static const char* const runtimes[] = {"system", "none", NULL};
  int runtime = 0;
  if (!choice(rd, doc, "runtime", runtimes, &runtime))
    return false;
  spec->runtime = runtime == 0 ? MAELYS_ORCHESTRATOR_RUNTIME_SYSTEM
                               : MAELYS_ORCHESTRATOR_RUNTIME_NONE;
  if ((v = json_object_get(doc, "environment")) != NULL &&
      !read_environment(rd, spec, v))
    return false;
  static const char* const networks[] = {"none", "inherit", NULL};
  int network = -1;
  if (json_object_get(doc, "network") == NULL)
    return bad(rd, "$.network",
               "is required: \"none\" or \"inherit\" (never defaulted)");
  if (!choice(rd, doc, "network", networks, &network))
    return false;
  spec->network = network == 0 ? MAELYS_EXECUTOR_NETWORK_NONE
                               : MAELYS_EXECUTOR_NETWORK_INHERIT;
  spec->network_set = true;
  if ((v = json_object_get(doc, "limits")) != NULL && !read_limits(rd, spec, v))
    return false;
  static const char* const endpoints[] = {"captured", "duplex-stdio", NULL};
  int endpoint = 1;
  if (!choice(rd, doc, "endpoint", endpoints, &endpoint))
    return false;
  spec->endpoint = endpoint == 0 ? MAELYS_ORCHESTRATOR_ENDPOINT_CAPTURED
                                 : MAELYS_ORCHESTRATOR_ENDPOINT_DUPLEX_STDIO;
  static const char* const stderrs[] = {"inherit", "capture", "null", NULL};
  int se = 0;
  if (!choice(rd, doc, "stderr", stderrs, &se))
    return false;
  spec->stderr_mode = se == 0   ? MAELYS_EXEC_STDERR_INHERIT
                      : se == 1 ? MAELYS_EXEC_STDERR_CAPTURE
                                : MAELYS_EXEC_STDERR_NULL;
  if ((v = json_object_get(doc, "backend")) != NULL) {
    error = NULL;
    if ((s = str(rd, "$.backend", v)) == NULL ||
        !apply(rd, "$.backend",
               maelys_orchestrator_spec_set_backend(spec, s, &error), &error))
      return false;
  }
  return true;
}

maelys_executor_result_t
maelys_orchestrator_spec_from_json(const char* json, size_t length,
                                   maelys_orchestrator_spec_t** out_spec,
                                   char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (out_spec == NULL || json == NULL)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "json and out_spec are required");
  *out_spec = NULL;
  if (length > SPEC_MAX_BYTES)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "agent spec is larger than %d bytes",
                             SPEC_MAX_BYTES);
  json_error_t jerr;
  json_t* doc = json_loadb(json, length, JSON_REJECT_DUPLICATES, &jerr);
  if (doc == NULL)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "agent spec is not valid JSON (line %d, column "
                             "%d): %s",
                             jerr.line, jerr.column, jerr.text);
  maelys_orchestrator_spec_t* spec = NULL;
  maelys_executor_result_t r =
      maelys_orchestrator_spec_create(&spec, out_error);
  if (r != MAELYS_EXECUTOR_OK) {
    json_decref(doc);
    return r;
  }
  reader_t rd = {out_error, MAELYS_EXECUTOR_OK};
  bool ok = read_spec(&rd, spec, doc);
  json_decref(doc);
  if (!ok) {
    maelys_orchestrator_spec_destroy(spec);
    return rd.result ? rd.result : MAELYS_EXECUTOR_ERR_ARGUMENT;
  }
  *out_spec = spec;
  return MAELYS_EXECUTOR_OK;
}

/* Invariant 18: authority never comes from where a sandbox writes. Every
 * component is checked without following links; a directory writable by
 * group or others is accepted only when sticky and the next component
 * belongs to the caller or root (nobody else can replace it there). */
static maelys_executor_result_t trusted_file(const char* path, int* out_fd,
                                             char** out_error) {
  *out_fd = -1;
  if (!maelys__orch_path_is_clean(path))
    return maelys__orch_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "agent spec file '%s' must be named by a clean absolute path", path);
  uid_t me = geteuid();
  int dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                             "opening '/': %s", strerror(errno));
  struct stat parent;
  fstat(dir, &parent);
  char copy[PATH_MAX];
  snprintf(copy, sizeof copy, "%s", path);
  char* save = NULL;
  char* part = strtok_r(copy + 1, "/", &save);
  while (part != NULL) {
    char* next = strtok_r(NULL, "/", &save);
    int fd = openat(dir, part,
                    (next ? O_PATH | O_DIRECTORY : O_RDONLY) | O_NOFOLLOW |
                        O_CLOEXEC);
    int e = errno;
    close(dir);
    if (fd < 0)
      return maelys__orch_fail(
          out_error,
          e == ELOOP || e == ENOTDIR ? MAELYS_EXECUTOR_ERR_DENIED
          : e == ENOENT              ? MAELYS_EXECUTOR_ERR_NOT_FOUND
                                     : MAELYS_EXECUTOR_ERR_IO,
          "agent spec file '%s': component '%s' %s", path, part,
          e == ELOOP || e == ENOTDIR
              ? "is a symbolic link (refused: a sandbox could have planted it)"
              : strerror(e));
    struct stat st;
    fstat(fd, &st);
    bool open_parent = (parent.st_mode & (S_IWGRP | S_IWOTH)) != 0;
    if (open_parent &&
        (!(parent.st_mode & S_ISVTX) || (st.st_uid != me && st.st_uid != 0))) {
      close(fd);
      return maelys__orch_fail(
          out_error, MAELYS_EXECUTOR_ERR_DENIED,
          "agent spec file '%s': '%s' lies in a directory others can write "
          "(refused: it could have been planted)",
          path, part);
    }
    if (next == NULL) {
      if (!S_ISREG(st.st_mode) || (st.st_mode & (S_IWGRP | S_IWOTH)) ||
          (st.st_uid != me && st.st_uid != 0)) {
        close(fd);
        return maelys__orch_fail(
            out_error, MAELYS_EXECUTOR_ERR_DENIED,
            "agent spec file '%s' must be a regular file owned by you or root "
            "and writable by nobody else",
            path);
      }
      *out_fd = fd;
      return MAELYS_EXECUTOR_OK;
    }
    parent = st;
    dir = fd;
    part = next;
  }
  close(dir);
  return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                           "agent spec file '%s' names a directory", path);
}

maelys_executor_result_t maelys_orchestrator_spec_load_file(
    const char* path, maelys_orchestrator_spec_t** out_spec, char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (out_spec == NULL || path == NULL)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "path and out_spec are required");
  *out_spec = NULL;
  int fd;
  maelys_executor_result_t r = trusted_file(path, &fd, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  char* buf = malloc(SPEC_MAX_BYTES + 1);
  if (buf == NULL) {
    close(fd);
    return oom(out_error);
  }
  size_t len = 0;
  for (;;) {
    ssize_t n = read(fd, buf + len, SPEC_MAX_BYTES + 1 - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    len += (size_t)n;
    if (len > SPEC_MAX_BYTES)
      break;
  }
  close(fd);
  maelys_orchestrator_spec_t* spec = NULL;
  r = maelys_orchestrator_spec_from_json(buf, len, &spec, out_error);
  free(buf);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  if (maelys_orchestrator_spec_writes(spec, path)) {
    maelys_orchestrator_spec_destroy(spec);
    return maelys__orch_fail(
        out_error, MAELYS_EXECUTOR_ERR_DENIED,
        "agent spec file '%s' lies inside a path the spec makes writable: the "
        "agent could rewrite its own authority (invariant 18)",
        path);
  }
  *out_spec = spec;
  return MAELYS_EXECUTOR_OK;
}
