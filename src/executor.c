/* The executor: one per loop, a registry of backends with proved masks. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "internal.h"
#include "proc.h"

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
  free(executor->proof_dir);
  free(executor);
}

void maelys__executor_set_proc_ops(maelys_executor_t* executor,
                                   const maelys__proc_ops_t* ops) {
  executor->proc_ops = ops ? ops : &maelys__proc_default_ops;
}

bool maelys__executor_reap_budget(maelys_executor_t* executor) {
  /* A turn is known by the loop's time, which libuv updates once per turn
   * before the callbacks run: turns shorter than a millisecond share one
   * budget, which bounds the work per millisecond all the same. */
  uint64_t now = uv_now(executor->loop);
  if (executor->reap_turn != now) {
    executor->reap_turn = now;
    executor->reaped = 0;
  }
  if (executor->reaped >= MAELYS__REAP_PER_TURN)
    return false;
  executor->reaped++;
  return true;
}

void maelys__executor_execution_started(maelys_executor_t* executor) {
  executor->live++;
  executor->unfinished++;
}

void maelys__executor_execution_released(maelys_executor_t* executor,
                                         maelys__orphan_t* orphan) {
  executor->live--;
  if (orphan != NULL) {
    orphan->next = executor->orphans;
    executor->orphans = orphan;
  }
}

void maelys__executor_orphan_done(maelys_executor_t* executor,
                                  maelys__orphan_t* orphan) {
  maelys__orphan_t** p = &executor->orphans;
  while (*p != NULL && *p != orphan)
    p = &(*p)->next;
  if (*p == orphan)
    *p = orphan->next;
  orphan->next = NULL;
}

void maelys__executor_execution_gone(maelys_executor_t* executor) {
  if (--executor->unfinished == 0)
    executor_free(executor);
}

maelys__cgroup_parent_t*
maelys__executor_memory_cgroups(maelys_executor_t* executor) {
  if (executor->memory_cgroup == NULL) {
    executor->memory_cgroup = malloc(sizeof *executor->memory_cgroup);
    if (executor->memory_cgroup != NULL)
      maelys__cgroup_find_memory(executor->memory_cgroup);
  }
  return executor->memory_cgroup;
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
    maelys__execution_abandon(executor->orphans->execution);
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

/*
 * Backend ABI versions (SQLite's iVersion): every slot of the vtable with the
 * version that added it. A vtable of version N must hold every slot up to
 * version N; slots of later versions are never read from it, and a slot is
 * read only when it lies inside the struct_size the backend declared. The
 * copy made at registration has exactly those slots, every other one NULL,
 * so the rest of the core calls through it after a NULL check alone. ABI 3
 * (the SDK), ABI 4 (the terminal rendezvous and the request's io mode and
 * terminal size) and ABI 5 (the denial event, at the end of the event
 * struct the core owns) added no slot: a backend of ABI 1 to 3 never maps a
 * terminal, and spawn refuses its TTY requests; one of ABI 1 to 4 reports
 * no denial.
 */
#define SLOT(field, since)                                                     \
  {                                                                            \
    offsetof(maelys_backend_t, field), sizeof(((maelys_backend_t*)0)->field),  \
        since, #field                                                          \
  }
static const struct {
  size_t offset, size;
  uint32_t since;
  const char* name;
} vtable_slots[] = {
    SLOT(create, 1),  SLOT(destroy, 1),     SLOT(probe, 1),
    SLOT(prepare, 1), SLOT(status_line, 1), SLOT(proof_key, 6),
};
#undef SLOT

/* The bytes a vtable of `version` has at least: the end of its last slot. */
static size_t vtable_size(uint32_t version) {
  size_t size = offsetof(maelys_backend_t, name) + sizeof(const char*);
  for (size_t i = 0; i < sizeof vtable_slots / sizeof vtable_slots[0]; i++)
    if (vtable_slots[i].since <= version &&
        vtable_slots[i].offset + vtable_slots[i].size > size)
      size = vtable_slots[i].offset + vtable_slots[i].size;
  return size;
}

/* Checks the header of `backend` and copies the slots its version has into
 * *out; nothing is read beyond its struct_size. */
static maelys_executor_result_t vtable_copy(const maelys_backend_t* backend,
                                            maelys_backend_t* out,
                                            char** out_error) {
  const char* name = backend_name_is_valid(backend->name) ? backend->name : "?";
  if (backend->abi_version < 1 ||
      backend->abi_version > MAELYS_BACKEND_ABI_VERSION)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
        "backend '%s' was built for backend ABI %u; this library speaks 1 to "
        "%u",
        name, backend->abi_version, MAELYS_BACKEND_ABI_VERSION);
  if (backend->struct_size < vtable_size(backend->abi_version))
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "backend '%s' declares a vtable of %u bytes, too small for backend "
        "ABI %u (%zu bytes)",
        name, backend->struct_size, backend->abi_version,
        vtable_size(backend->abi_version));
  memset(out, 0, sizeof *out);
  out->abi_version = backend->abi_version;
  out->struct_size = (uint32_t)sizeof *out;
  out->name = backend->name;
  for (size_t i = 0; i < sizeof vtable_slots / sizeof vtable_slots[0]; i++)
    if (vtable_slots[i].since <= backend->abi_version &&
        vtable_slots[i].offset + vtable_slots[i].size <= backend->struct_size)
      memcpy((char*)out + vtable_slots[i].offset,
             (const char*)backend + vtable_slots[i].offset,
             vtable_slots[i].size);
  return MAELYS_EXECUTOR_OK;
}

/* A new entry for `backend` (vtable checked and copied), or NULL and an
 * error. */
static maelys__backend_entry_t* entry_create(const maelys_backend_t* backend,
                                             maelys_executor_result_t* out_r,
                                             char** out_error) {
  maelys__backend_entry_t* entry = calloc(1, sizeof *entry);
  if (entry == NULL) {
    *out_r = maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                   "out of memory");
    return NULL;
  }
  *out_r = vtable_copy(backend, &entry->slots, out_error);
  if (*out_r != MAELYS_EXECUTOR_OK) {
    free(entry);
    return NULL;
  }
  entry->vtable = &entry->slots;
  return entry;
}

/* Checks what registration needs before anything is created. */
static maelys_executor_result_t check_registration(maelys_executor_t* executor,
                                                   const maelys_backend_t* vt,
                                                   char** out_error) {
  if (!backend_name_is_valid(vt->name))
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "backend name is not [a-z0-9-]{1,32}");
  if (vt->create == NULL || vt->probe == NULL || vt->prepare == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "backend '%s' lacks create, probe or prepare",
                                 vt->name);
  if (maelys__executor_find_backend(executor, vt->name) != NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                                 "backend '%s' is already registered",
                                 vt->name);
  if (maelys__executor_reserve(
          (void**)&executor->backends, &executor->backend_capacity,
          sizeof(maelys__backend_entry_t*), executor->backend_count + 1))
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  return MAELYS_EXECUTOR_OK;
}

/* Runs the backend's probe and keeps what it proved and why the rest was
 * not. */
static void run_probe(maelys__backend_entry_t* entry) {
  maelys_backend_probe_t probe;
  memset(&probe, 0, sizeof probe);
  char* probe_error = NULL;
  maelys_executor_result_t r =
      entry->vtable->probe(entry->state, &probe, &probe_error);
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
}

static maelys_executor_result_t lookup(const maelys_executor_t* executor,
                                       const char* name,
                                       const maelys__backend_entry_t** out,
                                       char** out_error);

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
  maelys_executor_result_t r;
  maelys__backend_entry_t* entry = entry_create(backend, &r, out_error);
  if (entry == NULL)
    return r;
  r = check_registration(executor, entry->vtable, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = entry->vtable->create(options, &entry->state, out_error);
  if (r != MAELYS_EXECUTOR_OK) {
    free(entry);
    return r;
  }
  if (!maelys__proof_cache_load(executor, entry)) {
    run_probe(entry);
    maelys__proof_cache_store(executor, entry);
  }
  executor->backends[executor->backend_count++] = entry;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_executor_set_proof_cache(maelys_executor_t* executor,
                                const char* directory, unsigned max_age_seconds,
                                char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (executor == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "executor is required");
  free(executor->proof_dir);
  executor->proof_dir = NULL;
  if (directory == NULL)
    return MAELYS_EXECUTOR_OK;
  if (directory[0] != '/')
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "the proof cache '%s' is not an absolute path",
                                 directory);
  if (mkdir(directory, 0700) != 0 && errno != EEXIST)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                 "creating the proof cache '%s': %s", directory,
                                 strerror(errno));
  int fd = maelys__executor_open_nofollow(directory);
  struct stat st;
  bool ok = fd >= 0 && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) &&
            st.st_uid == geteuid() && (st.st_mode & 022) == 0;
  if (fd >= 0)
    close(fd);
  if (!ok)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_DENIED,
        "the proof cache '%s' is not a directory of uid %u that nobody else "
        "can write (reached through no symbolic link): a proof planted there "
        "would advertise what was never proved",
        directory, (unsigned)geteuid());
  executor->proof_dir = maelys__executor_strdup(directory);
  if (executor->proof_dir == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  executor->proof_max_age = max_age_seconds;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_executor_backend_proof_cached(const maelys_executor_t* executor,
                                     const char* name, int* out_cached,
                                     char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (out_cached == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "out_cached is NULL");
  *out_cached = 0;
  const maelys__backend_entry_t* entry;
  maelys_executor_result_t r = lookup(executor, name, &entry, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    *out_cached = entry->proof_cached ? 1 : 0;
  return r;
}

maelys_executor_result_t
maelys__executor_adopt_backend(maelys_executor_t* executor,
                               const maelys_backend_t* vtable, void* state,
                               uint64_t assumed, char** out_error) {
  maelys_executor_result_t r;
  maelys__backend_entry_t* entry = entry_create(vtable, &r, out_error);
  if (entry == NULL)
    return r;
  r = check_registration(executor, entry->vtable, out_error);
  if (r != MAELYS_EXECUTOR_OK) {
    free(entry);
    return r;
  }
  entry->state = state;
  entry->borrowed = true;
  entry->proved = assumed;
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
