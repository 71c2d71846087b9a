/* The executor: one per loop, a registry of backends with proved masks. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "proc.h"

void maelys__execution_abandon(maelys__execution_t* execution);

maelys_executor_result_t
maelys_executor_create(uv_loop_t* loop, maelys_executor_t** out_executor,
                       char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (out_executor == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "out_executor is NULL");
  *out_executor = NULL;
  if (loop == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "loop is NULL");
  maelys_executor_t* e = calloc(1, sizeof *e);
  if (e == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory creating an executor");
  e->loop = loop;
  e->proc_ops = &maelys__proc_default_ops;
  e->unfinished = 1; /* the executor's own reference */
  *out_executor = e;
  return MAELYS_EXECUTOR_OK;
}

static void free_entry(maelys__backend_entry_t* entry) {
  if (!entry->borrowed && entry->vtable->destroy != NULL &&
      entry->state != NULL)
    entry->vtable->destroy(entry->state);
  for (int b = 0; b < 64; b++)
    free(entry->reasons[b]);
  free(entry->diagnostic);
  free(entry);
}

static void executor_free(maelys_executor_t* executor) {
  maelys__executor_evidence_dispose(executor);
  for (size_t i = 0; i < executor->backend_count; i++)
    free_entry(executor->backends[i]);
  free(executor->backends);
  free(executor->memory_cgroup);
  free(executor);
}

void maelys__executor_set_proc_ops(maelys_executor_t* executor,
                                   const maelys__proc_ops_t* ops) {
  executor->proc_ops = ops ? ops : &maelys__proc_default_ops;
}

void maelys__executor_execution_gone(maelys_executor_t* executor) {
  if (--executor->unfinished == 0)
    executor_free(executor);
}

maelys_executor_result_t maelys_executor_destroy(maelys_executor_t* executor,
                                                 char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (executor == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "executor is NULL");
  if (executor->destroyed)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                                 "the executor was already destroyed");
  if (executor->live > 0)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_STATE,
        "%zu executions are not released; release them before destroying the "
        "executor",
        executor->live);
  executor->destroyed = true;
  /* Released children that still run are handed to background reapers; their
   * handles close on the next turn of the loop. */
  while (executor->orphans != NULL)
    maelys__execution_abandon(executor->orphans);
  maelys__executor_execution_gone(executor);
  return MAELYS_EXECUTOR_OK;
}

/* -------------------------------------------------------------- options */

maelys_executor_result_t
maelys_backend_options_create(maelys_backend_options_t** out_options,
                              char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (out_options == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "out_options is NULL");
  *out_options = calloc(1, sizeof **out_options);
  if (*out_options == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_backend_options_set(maelys_backend_options_t* options, const char* key,
                           const char* value, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (options == NULL || key == NULL || key[0] == '\0' || value == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "options, key and value are required");
  char* v = maelys__executor_strdup(value);
  if (v == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  for (size_t i = 0; i < options->count; i++)
    if (strcmp(options->keys[i], key) == 0) {
      free(options->values[i]);
      options->values[i] = v;
      return MAELYS_EXECUTOR_OK;
    }
  size_t cap = options->capacity;
  char* k = maelys__executor_strdup(key);
  if (k == NULL ||
      maelys__executor_reserve((void**)&options->keys, &cap,
                               sizeof *options->keys, options->count + 1) ||
      maelys__executor_reserve((void**)&options->values, &options->capacity,
                               sizeof *options->values, options->count + 1)) {
    free(k);
    free(v);
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  }
  options->keys[options->count] = k;
  options->values[options->count++] = v;
  return MAELYS_EXECUTOR_OK;
}

const char* maelys_backend_options_get(const maelys_backend_options_t* options,
                                       const char* key) {
  if (options == NULL || key == NULL)
    return NULL;
  for (size_t i = 0; i < options->count; i++)
    if (strcmp(options->keys[i], key) == 0)
      return options->values[i];
  return NULL;
}

size_t maelys_backend_options_count(const maelys_backend_options_t* options) {
  return options ? options->count : 0;
}

const char* maelys_backend_options_key(const maelys_backend_options_t* options,
                                       size_t index) {
  if (options == NULL || index >= options->count)
    return NULL;
  return options->keys[index];
}

void maelys_backend_options_destroy(maelys_backend_options_t* options) {
  if (options == NULL)
    return;
  for (size_t i = 0; i < options->count; i++) {
    free(options->keys[i]);
    free(options->values[i]);
  }
  free(options->keys);
  free(options->values);
  free(options);
}

/* ------------------------------------------------------------- registry */

static bool backend_name_is_valid(const char* name) {
  if (name == NULL)
    return false;
  size_t n = strlen(name);
  if (n == 0 || n > 32)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((name[i] >= 'a' && name[i] <= 'z') ||
          (name[i] >= '0' && name[i] <= '9') || name[i] == '-'))
      return false;
  return true;
}

const maelys__backend_entry_t*
maelys__executor_find_backend(const maelys_executor_t* executor,
                              const char* name) {
  if (executor == NULL || name == NULL)
    return NULL;
  for (size_t i = 0; i < executor->backend_count; i++)
    if (strcmp(executor->backends[i]->vtable->name, name) == 0)
      return executor->backends[i];
  return NULL;
}

maelys_executor_result_t maelys_executor_register_backend(
    maelys_executor_t* executor, const maelys_backend_t* backend,
    const maelys_backend_options_t* options, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (executor == NULL || backend == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "executor and backend are required");
  if (executor->destroyed)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                                 "the executor was destroyed");
  /* ABI 3 only added an fd source and request accessors: a backend built
   * for ABI 2 still works, and never maps a terminal (its TTY requests are
   * refused at spawn). */
  if (backend->abi_version != MAELYS_BACKEND_ABI_VERSION &&
      backend->abi_version != 2)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
        "backend '%s' was built for backend ABI %u; this library speaks 2 "
        "and %u",
        backend_name_is_valid(backend->name) ? backend->name : "?",
        backend->abi_version, MAELYS_BACKEND_ABI_VERSION);
  if (backend->struct_size <
      offsetof(maelys_backend_t, status_line) + sizeof backend->status_line)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "backend vtable is too small (%u bytes)",
                                 backend->struct_size);
  if (!backend_name_is_valid(backend->name))
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "backend name is not [a-z0-9-]{1,32}");
  if (backend->create == NULL || backend->probe == NULL ||
      backend->prepare == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "backend '%s' lacks create, probe or prepare",
                                 backend->name);
  if (maelys__executor_find_backend(executor, backend->name) != NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                                 "backend '%s' is already registered",
                                 backend->name);
  if (maelys__executor_reserve(
          (void**)&executor->backends, &executor->backend_capacity,
          sizeof *executor->backends, executor->backend_count + 1))
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  maelys__backend_entry_t* entry = calloc(1, sizeof *entry);
  if (entry == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  entry->vtable = backend;
  maelys_executor_result_t r =
      backend->create(options, &entry->state, out_error);
  if (r != MAELYS_EXECUTOR_OK) {
    free(entry);
    return r;
  }
  maelys_backend_probe_t probe;
  memset(&probe, 0, sizeof probe);
  char* probe_error = NULL;
  r = backend->probe(entry->state, &probe, &probe_error);
  if (r != MAELYS_EXECUTOR_OK) {
    /* A failed probe proves nothing: the backend stays registered with an
     * empty mask, and every spawn on it is refused with this diagnostic. */
    entry->proved = 0;
    entry->diagnostic = maelys__executor_asprintf(
        "%s%s%s", probe_error ? probe_error : "the probe failed",
        probe.diagnostic ? "\n" : "", probe.diagnostic ? probe.diagnostic : "");
  } else {
    entry->proved = probe.proved;
    entry->diagnostic = probe.diagnostic;
    probe.diagnostic = NULL;
  }
  free(probe_error);
  for (int b = 0; b < 64; b++) {
    if (!(entry->proved & (UINT64_C(1) << b))) {
      entry->reasons[b] = probe.reasons[b];
      probe.reasons[b] = NULL;
    }
  }
  maelys__executor_probe_dispose(&probe);
  executor->backends[executor->backend_count++] = entry;
  return MAELYS_EXECUTOR_OK;
}

static maelys_executor_result_t lookup(const maelys_executor_t* executor,
                                       const char* name,
                                       const maelys__backend_entry_t** out,
                                       char** out_error) {
  if (executor == NULL || name == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "executor and name are required");
  *out = maelys__executor_find_backend(executor, name);
  if (*out == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_NOT_FOUND,
                                 "no backend named '%s' is registered", name);
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_executor_backend_capabilities(const maelys_executor_t* executor,
                                     const char* name, uint64_t* out_mask,
                                     char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (out_mask == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "out_mask is NULL");
  *out_mask = 0;
  const maelys__backend_entry_t* entry;
  maelys_executor_result_t r = lookup(executor, name, &entry, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    *out_mask = entry->proved;
  return r;
}

maelys_executor_result_t
maelys_executor_backend_diagnostic(const maelys_executor_t* executor,
                                   const char* name, char** out_text,
                                   char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (out_text == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "out_text is NULL");
  *out_text = NULL;
  const maelys__backend_entry_t* entry;
  maelys_executor_result_t r = lookup(executor, name, &entry, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  *out_text =
      maelys__executor_strdup(entry->diagnostic ? entry->diagnostic : "");
  if (*out_text == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_executor_backend_missing_reason(const maelys_executor_t* executor,
                                       const char* name, uint64_t capability,
                                       char** out_reason, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (out_reason == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "out_reason is NULL");
  *out_reason = NULL;
  if (maelys_executor_capability_name(capability) == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "0x%llx is not exactly one capability bit",
                                 (unsigned long long)capability);
  const maelys__backend_entry_t* entry;
  maelys_executor_result_t r = lookup(executor, name, &entry, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  if (entry->proved & capability)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_NOT_FOUND,
                                 "backend '%s' proved %s", name,
                                 maelys_executor_capability_name(capability));
  int bit = __builtin_ctzll(capability);
  const char* reason = entry->reasons[bit];
  if (reason == NULL)
    reason = entry->diagnostic && entry->diagnostic[0]
                 ? entry->diagnostic
                 : "the backend does not offer this capability";
  *out_reason = maelys__executor_strdup(reason);
  if (*out_reason == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  return MAELYS_EXECUTOR_OK;
}

size_t maelys_executor_backend_count(const maelys_executor_t* executor) {
  return executor ? executor->backend_count : 0;
}

const char* maelys_executor_backend_name(const maelys_executor_t* executor,
                                         size_t index) {
  if (executor == NULL || index >= executor->backend_count)
    return NULL;
  return executor->backends[index]->vtable->name;
}
