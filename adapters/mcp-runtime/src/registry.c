/* The profile registry: named profiles, each a maelys-executor-plan/1
 * document with the backend that enforces it, read from the distribution's
 * own JSON. The registry is immutable once created, so its resolver is
 * thread-safe without a lock. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "mcpx.h"

#define REGISTRY_FORMAT "maelys-mcp-profiles/1"

typedef struct profile {
  char* name;
  char* backend;
  char* cwd;
  char* plan_json;
  char** env_names;
  char** env_values;
  size_t env_count;
} profile_t;

struct maelys_mcp_executor_registry {
  profile_t* profiles;
  size_t count;
  char* fallback; /* the "default" profile's name, or NULL */
};

static void profile_clear(profile_t* p) {
  free(p->name);
  free(p->backend);
  free(p->cwd);
  free(p->plan_json);
  for (size_t i = 0; i < p->env_count; i++) {
    free(p->env_names[i]);
    free(p->env_values[i]);
  }
  free(p->env_names);
  free(p->env_values);
}

void maelys_mcp_executor_registry_destroy(maelys_mcp_executor_registry_t* reg) {
  if (reg == NULL)
    return;
  for (size_t i = 0; i < reg->count; i++)
    profile_clear(&reg->profiles[i]);
  free(reg->profiles);
  free(reg->fallback);
  free(reg);
}

static maelys_executor_result_t plan_from(const char* text,
                                          maelys_executor_plan_t** out_plan,
                                          char** out_error) {
  char* error = NULL;
  maelys_executor_result_t r =
      maelys_executor_plan_from_json(text, strlen(text), out_plan, &error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_plan_seal(*out_plan, &error);
  if (r != MAELYS_EXECUTOR_OK) {
    maelys_executor_plan_destroy(*out_plan);
    *out_plan = NULL;
    return maelys__mcpx_fail_with(out_error, r, error, "plan");
  }
  return MAELYS_EXECUTOR_OK;
}

static maelys_executor_result_t
load_environment(json_t* env, unsigned abi, profile_t* p, char** out_error) {
  if (env == NULL)
    return MAELYS_EXECUTOR_OK;
  if (!json_is_array(env))
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "environment must be an array");
  if (json_array_size(env) > 0 && abi < 6)
    return maelys__mcpx_fail(
        out_error, MAELYS_EXECUTOR_ERR_DENIED,
        "environment additions need launcher ABI 6; ABI %u carries the "
        "runtime's closed environment exactly",
        abi);
  size_t n = json_array_size(env);
  p->env_names = calloc(n + 1, sizeof *p->env_names);
  p->env_values = calloc(n + 1, sizeof *p->env_values);
  if (p->env_names == NULL || p->env_values == NULL)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                             "out of memory");
  for (size_t i = 0; i < n; i++) {
    json_t* e = json_array_get(env, i);
    const char* name = json_string_value(json_object_get(e, "name"));
    const char* value = json_string_value(json_object_get(e, "value"));
    if (!json_is_object(e) || json_object_size(e) != 2 || name == NULL ||
        value == NULL || name[0] == '\0' || strchr(name, '=') != NULL)
      return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                               "environment[%zu] must be {\"name\", \"value\"} "
                               "with a name without '='",
                               i);
    p->env_names[i] = maelys__mcpx_strdup(name);
    p->env_values[i] = maelys__mcpx_strdup(value);
    p->env_count = i + 1;
    if (p->env_names[i] == NULL || p->env_values[i] == NULL)
      return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                               "out of memory");
  }
  return MAELYS_EXECUTOR_OK;
}

static maelys_executor_result_t load_profile(const char* name, json_t* o,
                                             unsigned abi, profile_t* p,
                                             char** out_error) {
  const char* key;
  json_t* value;
  json_object_foreach(o, key, value) {
    if (strcmp(key, "backend") != 0 && strcmp(key, "plan") != 0 &&
        strcmp(key, "cwd") != 0 && strcmp(key, "environment") != 0)
      return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                               "unknown member \"%s\"", key);
  }
  const char* backend = json_string_value(json_object_get(o, "backend"));
  json_t* plan = json_object_get(o, "plan");
  json_t* cwd = json_object_get(o, "cwd");
  if (backend == NULL || backend[0] == '\0')
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "backend must be a non-empty string");
  if (!json_is_object(plan))
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "plan must be a maelys-executor-plan/1 object");
  /* The network mode is never left to a default: a plan says it. */
  if (!json_is_object(json_object_get(plan, "network")))
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "plan.network must be set explicitly");
  if (cwd != NULL && (!json_is_string(cwd) || json_string_value(cwd)[0] != '/'))
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "cwd must be an absolute path");
  p->name = maelys__mcpx_strdup(name);
  p->backend = maelys__mcpx_strdup(backend);
  p->cwd = cwd != NULL ? maelys__mcpx_strdup(json_string_value(cwd)) : NULL;
  p->plan_json = json_dumps(plan, JSON_COMPACT | JSON_PRESERVE_ORDER);
  if (p->name == NULL || p->backend == NULL || p->plan_json == NULL ||
      (cwd != NULL && p->cwd == NULL))
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                             "out of memory");
  maelys_executor_result_t r =
      load_environment(json_object_get(o, "environment"), abi, p, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  /* Read and sealed now, so that a bad registry fails when the host starts
   * rather than at some provider's launch. */
  maelys_executor_plan_t* sealed = NULL;
  r = plan_from(p->plan_json, &sealed, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  maelys_executor_network_t network;
  r = maelys__mcpx_plan_network(sealed, &network, out_error);
  maelys_executor_plan_destroy(sealed);
  if (r == MAELYS_EXECUTOR_OK &&
      network == MAELYS_EXECUTOR_NETWORK_EXTERNAL_CHANNEL)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_DENIED,
                             "an EXTERNAL_CHANNEL plan needs an egress-aware "
                             "host; the MCP launcher adapter refuses it");
  return r;
}

static maelys_executor_result_t load(json_t* doc, unsigned abi,
                                     maelys_mcp_executor_registry_t* reg,
                                     char** out_error) {
  const char* key;
  json_t* value;
  if (!json_is_object(doc))
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "the profile registry must be a JSON object");
  json_object_foreach(doc, key, value) {
    if (strcmp(key, "format") != 0 && strcmp(key, "default") != 0 &&
        strcmp(key, "profiles") != 0)
      return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                               "profile registry: unknown member \"%s\"", key);
  }
  const char* format = json_string_value(json_object_get(doc, "format"));
  if (format == NULL || strcmp(format, REGISTRY_FORMAT) != 0)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "profile registry: format must be \"%s\"",
                             REGISTRY_FORMAT);
  json_t* profiles = json_object_get(doc, "profiles");
  if (!json_is_object(profiles) || json_object_size(profiles) == 0)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "profile registry: profiles must be a non-empty "
                             "object");
  reg->profiles = calloc(json_object_size(profiles), sizeof *reg->profiles);
  if (reg->profiles == NULL)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                             "out of memory");
  json_object_foreach(profiles, key, value) {
    profile_t* p = &reg->profiles[reg->count++];
    char* error = NULL;
    maelys_executor_result_t r =
        json_is_object(value)
            ? load_profile(key, value, abi, p, &error)
            : maelys__mcpx_fail(&error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                "must be an object");
    if (r != MAELYS_EXECUTOR_OK)
      return maelys__mcpx_fail_with(out_error, r, error,
                                    "profile registry: profiles.%s", key);
  }
  json_t* fallback = json_object_get(doc, "default");
  if (fallback != NULL) {
    const char* name = json_string_value(fallback);
    bool known = false;
    for (size_t i = 0; name != NULL && i < reg->count; i++)
      known = known || strcmp(reg->profiles[i].name, name) == 0;
    if (!known)
      return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                               "profile registry: default must name one of "
                               "its profiles");
    reg->fallback = maelys__mcpx_strdup(name);
    if (reg->fallback == NULL)
      return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                               "out of memory");
  }
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t maelys_mcp_executor_registry_create(
    const char* json, size_t length, unsigned runtime_abi,
    maelys_mcp_executor_registry_t** out_registry, char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (out_registry == NULL || json == NULL)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "a registry needs its JSON and out_registry");
  *out_registry = NULL;
  if (runtime_abi < MAELYS_MCP_EXECUTOR_RUNTIME_ABI_MIN ||
      runtime_abi > MAELYS_MCP_EXECUTOR_RUNTIME_ABI_MAX)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                             "launcher ABI %u is not implemented", runtime_abi);
  json_error_t jerr;
  json_t* doc = json_loadb(json, length, JSON_REJECT_DUPLICATES, &jerr);
  if (doc == NULL)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "profile registry: line %d: %s", jerr.line,
                             jerr.text);
  maelys_mcp_executor_registry_t* reg = calloc(1, sizeof *reg);
  maelys_executor_result_t r =
      reg == NULL ? maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                      "out of memory")
                  : load(doc, runtime_abi, reg, out_error);
  json_decref(doc);
  if (r != MAELYS_EXECUTOR_OK) {
    maelys_mcp_executor_registry_destroy(reg);
    return r;
  }
  *out_registry = reg;
  return MAELYS_EXECUTOR_OK;
}

static maelys_executor_result_t
registry_resolve(void* data, const char* name,
                 const maelys_mcp_executor_spec_t* spec,
                 maelys_mcp_executor_resolution_t* res, char** out_error) {
  (void)spec;
  const maelys_mcp_executor_registry_t* reg = data;
  if (name == NULL && reg->fallback == NULL)
    return maelys__mcpx_fail(
        out_error, MAELYS_EXECUTOR_ERR_NOT_FOUND,
        "no execution profile was named and the registry has no default");
  const char* wanted = name != NULL ? name : reg->fallback;
  const profile_t* p = NULL;
  for (size_t i = 0; p == NULL && i < reg->count; i++)
    if (strcmp(reg->profiles[i].name, wanted) == 0)
      p = &reg->profiles[i];
  if (p == NULL)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_NOT_FOUND,
                             "execution profile \"%s\" is not in the "
                             "registry",
                             wanted);
  maelys_executor_plan_t* plan = NULL;
  maelys_executor_result_t r = plan_from(p->plan_json, &plan, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_mcp_executor_resolution_set_plan(res, &plan, p->backend,
                                                out_error);
  if (r == MAELYS_EXECUTOR_OK && p->cwd != NULL)
    r = maelys_mcp_executor_resolution_set_cwd(res, p->cwd, out_error);
  for (size_t i = 0; r == MAELYS_EXECUTOR_OK && i < p->env_count; i++)
    r = maelys_mcp_executor_resolution_add_environment(
        res, p->env_names[i], p->env_values[i], out_error);
  return r;
}

static void registry_release(void* data) {
  maelys_mcp_executor_registry_destroy(data);
}

static const maelys_mcp_executor_resolver_t registry_resolver = {
    registry_resolve, registry_release};

const maelys_mcp_executor_resolver_t*
maelys_mcp_executor_registry_resolver(void) {
  return &registry_resolver;
}

maelys_executor_result_t
maelys_mcp_executor_registry_check(const maelys_mcp_executor_registry_t* reg,
                                   const maelys_executor_t* executor,
                                   char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (reg == NULL || executor == NULL)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "a registry check needs a registry and an "
                             "executor");
  for (size_t i = 0; i < reg->count; i++) {
    const profile_t* p = &reg->profiles[i];
    maelys_executor_plan_t* plan = NULL;
    uint64_t needed = 0, proved = 0;
    char* error = NULL;
    maelys_executor_result_t r = plan_from(p->plan_json, &plan, &error);
    if (r == MAELYS_EXECUTOR_OK)
      r = maelys_executor_plan_required_capabilities(plan, &needed, &error);
    maelys_executor_plan_destroy(plan);
    if (r == MAELYS_EXECUTOR_OK)
      r = maelys_executor_backend_capabilities(executor, p->backend, &proved,
                                               &error);
    if (r != MAELYS_EXECUTOR_OK)
      return maelys__mcpx_fail_with(out_error, r, error, "profile %s", p->name);
    uint64_t missing = needed & ~proved;
    if (missing == 0)
      continue;
    uint64_t bit = missing & (~missing + 1);
    char* reason = NULL;
    maelys_executor_backend_missing_reason(executor, p->backend, bit, &reason,
                                           NULL);
    r = maelys__mcpx_fail(
        out_error, MAELYS_EXECUTOR_ERR_CAPABILITY,
        "profile %s needs %s, which the %s backend did not prove here: %s",
        p->name, maelys_executor_capability_name(bit), p->backend,
        reason != NULL ? reason : "no reason given");
    maelys_executor_string_free(reason);
    return r;
  }
  return MAELYS_EXECUTOR_OK;
}
