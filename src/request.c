/* The execution request: what to run, with which layout, on which backend. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define DEFAULT_GRACE_MS 2000
#define DEFAULT_FORCE_MS 2000
#define MAX_BUDGET_MS 3600000

maelys_executor_result_t
maelys_execution_request_create(maelys_execution_request_t** out_request,
                                char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (out_request == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "out_request is NULL");
  *out_request = NULL;
  maelys_execution_request_t* r = calloc(1, sizeof *r);
  if (r == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory creating a request");
  r->env = calloc(1, sizeof *r->env);
  r->cwd = maelys__executor_strdup("/");
  r->platform = maelys__executor_strdup("local");
  if (r->env == NULL || r->cwd == NULL || r->platform == NULL) {
    maelys_execution_request_destroy(r);
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory creating a request");
  }
  r->env_capacity = 1;
  r->env_mode = MAELYS_EXEC_ENV_EMPTY;
  r->io_mode = MAELYS_EXEC_IO_CAPTURED;
  r->protocol_fd = -1;
  r->stderr_mode = MAELYS_EXEC_STDERR_INHERIT;
  r->stdin_mode = MAELYS_EXEC_STDIN_PIPE;
  r->terminal_rows = 24;
  r->terminal_columns = 80;
  r->grace_ms = DEFAULT_GRACE_MS;
  r->force_ms = DEFAULT_FORCE_MS;
  *out_request = r;
  return MAELYS_EXECUTOR_OK;
}

static void free_vector(char** v) {
  if (v == NULL)
    return;
  for (size_t i = 0; v[i] != NULL; i++)
    free(v[i]);
  free(v);
}

void maelys_execution_request_destroy(maelys_execution_request_t* request) {
  if (request == NULL)
    return;
  free(request->executable);
  free_vector(request->argv);
  free_vector(request->env);
  free(request->cwd);
  free(request->backend);
  free(request->platform);
  free(request->receipt_dir);
  free(request->receipt_chain);
  free(request->receipt_context);
  for (size_t i = 0; i < request->channel_count; i++)
    if (request->channels[i].host_fd >= 0)
      close(request->channels[i].host_fd);
  free(request->channels);
  free(request);
}

#define CHECK_REQUEST(request, setter)                                         \
  do {                                                                         \
    MAELYS__CHECK_OUT_ERROR(out_error);                                        \
    if ((request) == NULL)                                                     \
      return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,    \
                                   "%s: request is NULL", setter);             \
  } while (0)

/* Replaces *slot with a copy of value. */
static maelys_executor_result_t replace(char** slot, const char* value,
                                        char** out_error) {
  char* copy = maelys__executor_strdup(value);
  if (copy == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  free(*slot);
  *slot = copy;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_execution_request_set_executable(maelys_execution_request_t* request,
                                        const char* path, char** out_error) {
  CHECK_REQUEST(request, "maelys_execution_request_set_executable");
  if (path == NULL || path[0] != '/' || strlen(path) >= PATH_MAX)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "executable '%s' is not an absolute path (PATH is never searched)",
        path ? path : "(null)");
  return replace(&request->executable, path, out_error);
}

maelys_executor_result_t
maelys_execution_request_set_argv(maelys_execution_request_t* request,
                                  const char* const* argv, char** out_error) {
  CHECK_REQUEST(request, "maelys_execution_request_set_argv");
  if (argv == NULL || argv[0] == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "argv must hold at least argv[0]");
  size_t n = 0;
  while (argv[n] != NULL)
    n++;
  if (n > 65536)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "argv has %zu entries (at most 65536)", n);
  char** copy = calloc(n + 1, sizeof *copy);
  if (copy == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory copying argv");
  for (size_t i = 0; i < n; i++) {
    if ((copy[i] = maelys__executor_strdup(argv[i])) == NULL) {
      free_vector(copy);
      return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                   "out of memory copying argv");
    }
  }
  free_vector(request->argv);
  request->argv = copy;
  request->argc = n;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t maelys_execution_request_set_environment_mode(
    maelys_execution_request_t* request, maelys_exec_env_mode_t mode,
    char** out_error) {
  CHECK_REQUEST(request, "maelys_execution_request_set_environment_mode");
  if (mode != MAELYS_EXEC_ENV_EMPTY && mode != MAELYS_EXEC_ENV_EXPLICIT)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "unknown environment mode %d", (int)mode);
  if (mode == MAELYS_EXEC_ENV_EMPTY && request->env_count > 0)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_STATE,
        "the environment already holds %zu entries; an EMPTY environment "
        "cannot have any",
        request->env_count);
  request->env_mode = mode;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_execution_request_add_environment(maelys_execution_request_t* request,
                                         const char* name, const char* value,
                                         char** out_error) {
  CHECK_REQUEST(request, "maelys_execution_request_add_environment");
  if (request->env_mode != MAELYS_EXEC_ENV_EXPLICIT)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_STATE,
        "the environment mode is EMPTY: set MAELYS_EXEC_ENV_EXPLICIT before "
        "adding entries");
  if (name == NULL || name[0] == '\0' || strchr(name, '=') != NULL)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "environment name '%s' is empty or contains '='",
        name ? name : "(null)");
  if (value == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "environment value of %s is NULL", name);
  size_t nl = strlen(name);
  for (size_t i = 0; i < request->env_count; i++)
    if (strncmp(request->env[i], name, nl) == 0 && request->env[i][nl] == '=')
      return maelys__executor_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "environment entry %s is given twice; the child must see exactly "
          "one value",
          name);
  if (request->env_count >= MAELYS_EXECUTOR_MAX_ENTRIES)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "the environment already has %d entries",
                                 MAELYS_EXECUTOR_MAX_ENTRIES);
  if (maelys__executor_reserve((void**)&request->env, &request->env_capacity,
                               sizeof *request->env, request->env_count + 2))
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  char* entry = maelys__executor_asprintf("%s=%s", name, value);
  if (entry == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  request->env[request->env_count++] = entry;
  request->env[request->env_count] = NULL;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_execution_request_set_cwd(maelys_execution_request_t* request,
                                 const char* path, char** out_error) {
  CHECK_REQUEST(request, "maelys_execution_request_set_cwd");
  if (path == NULL || path[0] != '/' || strlen(path) >= PATH_MAX)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "cwd '%s' is not an absolute path",
                                 path ? path : "(null)");
  return replace(&request->cwd, path, out_error);
}

maelys_executor_result_t
maelys_execution_request_set_io_mode(maelys_execution_request_t* request,
                                     maelys_exec_io_mode_t mode, int child_fd,
                                     char** out_error) {
  CHECK_REQUEST(request, "maelys_execution_request_set_io_mode");
  if (mode < MAELYS_EXEC_IO_CAPTURED || mode > MAELYS_EXEC_IO_TTY)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "unknown io mode %d", (int)mode);
  if (mode == MAELYS_EXEC_IO_ISOLATED_DUPLEX) {
    if (child_fd < 3 || child_fd > 1023)
      return maelys__executor_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "the isolated protocol descriptor must be in 3..1023 (got %d)",
          child_fd);
  } else if (child_fd != -1) {
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "only MAELYS_EXEC_IO_ISOLATED_DUPLEX takes a protocol descriptor; "
        "pass -1 (got %d)",
        child_fd);
  }
  request->io_mode = mode;
  request->protocol_fd = child_fd;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_execution_request_set_stderr_mode(maelys_execution_request_t* request,
                                         maelys_exec_stderr_mode_t mode,
                                         char** out_error) {
  CHECK_REQUEST(request, "maelys_execution_request_set_stderr_mode");
  if (mode < MAELYS_EXEC_STDERR_INHERIT || mode > MAELYS_EXEC_STDERR_NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "unknown stderr mode %d", (int)mode);
  request->stderr_mode = mode;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_execution_request_set_stdin_mode(maelys_execution_request_t* request,
                                        maelys_exec_stdin_mode_t mode,
                                        char** out_error) {
  CHECK_REQUEST(request, "maelys_execution_request_set_stdin_mode");
  if (mode != MAELYS_EXEC_STDIN_PIPE && mode != MAELYS_EXEC_STDIN_NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "unknown stdin mode %d", (int)mode);
  request->stdin_mode = mode;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_execution_request_set_terminal_size(maelys_execution_request_t* request,
                                           unsigned rows, unsigned columns,
                                           char** out_error) {
  CHECK_REQUEST(request, "maelys_execution_request_set_terminal_size");
  if (rows < 1 || rows > 65535 || columns < 1 || columns > 65535)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "a terminal size is 1..65535 rows and columns (got %ux%u)", rows,
        columns);
  request->terminal_rows = rows;
  request->terminal_columns = columns;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_execution_request_set_backend(maelys_execution_request_t* request,
                                     const char* name, char** out_error) {
  CHECK_REQUEST(request, "maelys_execution_request_set_backend");
  if (name == NULL || name[0] == '\0' || strlen(name) > 32)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "backend name '%s' is empty or too long",
                                 name ? name : "(null)");
  return replace(&request->backend, name, out_error);
}

maelys_executor_result_t
maelys_execution_request_set_scratch_size(maelys_execution_request_t* request,
                                          uint64_t bytes, char** out_error) {
  CHECK_REQUEST(request, "maelys_execution_request_set_scratch_size");
  request->scratch_bytes = bytes;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_execution_request_set_platform(maelys_execution_request_t* request,
                                      const char* token, char** out_error) {
  CHECK_REQUEST(request, "maelys_execution_request_set_platform");
  if (token == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "platform token is NULL");
  /* Invariant 14: only the local platform is defined; any other token is
   * refused rather than guessed, dropped or translated. */
  if (strcmp(token, "local") != 0)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
        "platform token '%s' is refused: only \"local\" is supported", token);
  return replace(&request->platform, token, out_error);
}

maelys_executor_result_t
maelys_execution_request_set_stop_budget(maelys_execution_request_t* request,
                                         uint64_t grace_ms, uint64_t force_ms,
                                         char** out_error) {
  CHECK_REQUEST(request, "maelys_execution_request_set_stop_budget");
  if (grace_ms < 1 || grace_ms > MAX_BUDGET_MS || force_ms < 1 ||
      force_ms > MAX_BUDGET_MS)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "stop budgets must be in 1..%d ms (grace %llu, force %llu)",
        MAX_BUDGET_MS, (unsigned long long)grace_ms,
        (unsigned long long)force_ms);
  request->grace_ms = grace_ms;
  request->force_ms = force_ms;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_execution_request_set_receipt_dir(maelys_execution_request_t* request,
                                         const char* path, char** out_error) {
  CHECK_REQUEST(request, "maelys_execution_request_set_receipt_dir");
  if (path == NULL || !maelys__executor_path_is_clean(path))
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "receipt directory '%s' is not a clean absolute path",
        path ? path : "(null)");
  return replace(&request->receipt_dir, path, out_error);
}

maelys_executor_result_t
maelys_execution_request_add_channel(maelys_execution_request_t* request,
                                     int child_fd, int* host_fd,
                                     char** out_error) {
  int fd = -1;
  if (host_fd != NULL) {
    fd = *host_fd;
    *host_fd = -1;
  }
  maelys_executor_result_t r = MAELYS_EXECUTOR_OK;
  if (out_error != NULL && *out_error != NULL)
    r = MAELYS_EXECUTOR_ERR_ARGUMENT;
  else if (request == NULL)
    r = maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                              "request is NULL");
  else if (host_fd == NULL || fd < 0 || fcntl(fd, F_GETFD) < 0)
    r = maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                              "channel at child fd %d: the host descriptor is "
                              "not an open descriptor",
                              child_fd);
  else if (child_fd < 4 || child_fd > 1023)
    r = maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                              "channel descriptor %d is outside 4..1023",
                              child_fd);
  if (r == MAELYS_EXECUTOR_OK) {
    for (size_t i = 0; i < request->channel_count; i++)
      if (request->channels[i].child_fd == child_fd)
        r = maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                  "child descriptor %d already has a channel",
                                  child_fd);
  }
  /* The payload's descriptor layout has room for this many: one more is
   * refused here rather than dropped at spawn. */
  if (r == MAELYS_EXECUTOR_OK &&
      request->channel_count >= MAELYS_EXECUTOR_MAX_CHANNELS)
    r = maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                              "channel at child fd %d: a request carries at "
                              "most %d channels",
                              child_fd, MAELYS_EXECUTOR_MAX_CHANNELS);
  if (r == MAELYS_EXECUTOR_OK &&
      maelys__executor_reserve(
          (void**)&request->channels, &request->channel_capacity,
          sizeof *request->channels, request->channel_count + 1))
    r = maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                              "out of memory");
  if (r != MAELYS_EXECUTOR_OK) {
    if (fd >= 0)
      close(fd);
    return r;
  }
  request->channels[request->channel_count++] =
      (maelys__request_channel_t){child_fd, fd};
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_execution_request_set_identity(maelys_execution_request_t* request,
                                      uint32_t uid, uint32_t gid,
                                      char** out_error) {
  CHECK_REQUEST(request, "maelys_execution_request_set_identity");
  if (uid == 0 || gid == 0 || uid == UINT32_MAX || gid == UINT32_MAX)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "identity %u:%u is refused: the payload must never run as uid or gid 0",
        uid, gid);
  request->identity_set = true;
  request->uid = uid;
  request->gid = gid;
  return MAELYS_EXECUTOR_OK;
}

/* ----------------------------------------------------------- read access */

const char*
maelys_execution_request_executable(const maelys_execution_request_t* request) {
  return request ? request->executable : NULL;
}

const char* const*
maelys_execution_request_argv(const maelys_execution_request_t* request) {
  return request ? (const char* const*)request->argv : NULL;
}

const char* const* maelys_execution_request_environment(
    const maelys_execution_request_t* request) {
  return request ? (const char* const*)request->env : NULL;
}

const char*
maelys_execution_request_cwd(const maelys_execution_request_t* request) {
  return request ? request->cwd : NULL;
}

int maelys_execution_request_identity(const maelys_execution_request_t* request,
                                      uint32_t* out_uid, uint32_t* out_gid) {
  if (request == NULL || !request->identity_set)
    return -1;
  if (out_uid)
    *out_uid = request->uid;
  if (out_gid)
    *out_gid = request->gid;
  return 0;
}

const char* maelys_execution_request_receipt_dir(
    const maelys_execution_request_t* request) {
  return request ? request->receipt_dir : NULL;
}

maelys_exec_io_mode_t
maelys_execution_request_io_mode(const maelys_execution_request_t* request) {
  return request ? request->io_mode : MAELYS_EXEC_IO_CAPTURED;
}

void maelys_execution_request_terminal_size(
    const maelys_execution_request_t* request, unsigned* out_rows,
    unsigned* out_columns) {
  if (out_rows != NULL)
    *out_rows = request ? request->terminal_rows : 24;
  if (out_columns != NULL)
    *out_columns = request ? request->terminal_columns : 80;
}

maelys_executor_result_t
maelys_execution_request_set_terminal_raw(maelys_execution_request_t* request,
                                          int raw, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (request == NULL || (raw != 0 && raw != 1))
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "set_terminal_raw needs a request and 0 or 1");
  request->terminal_raw = raw == 1;
  return MAELYS_EXECUTOR_OK;
}
