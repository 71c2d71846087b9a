/* The pure half of the adapter: the runtime's process specification and a
 * profile's resolution become an Executor request; stop modes and exit
 * statuses map between the two vocabularies. No loop, no fork, no runtime
 * header: these are unit-tested on their own. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "mcpx.h"

/* ------------------------------------------------------------- errors */

void maelys_mcp_executor_error_free(char* error) {
  free(error);
}

char* maelys__mcpx_strdup(const char* s) {
  size_t n = strlen(s) + 1;
  char* copy = malloc(n);
  if (copy != NULL)
    memcpy(copy, s, n);
  return copy;
}

static char* vformat(const char* format, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  int n = vsnprintf(NULL, 0, format, copy);
  va_end(copy);
  if (n < 0)
    return NULL;
  char* s = malloc((size_t)n + 1);
  if (s != NULL)
    vsnprintf(s, (size_t)n + 1, format, ap);
  return s;
}

maelys_executor_result_t maelys__mcpx_fail(char** out_error,
                                           maelys_executor_result_t result,
                                           const char* format, ...) {
  if (out_error != NULL && *out_error == NULL) {
    va_list ap;
    va_start(ap, format);
    *out_error = vformat(format, ap);
    va_end(ap);
  }
  return result;
}

maelys_executor_result_t maelys__mcpx_fail_with(char** out_error,
                                                maelys_executor_result_t result,
                                                char* cause, const char* format,
                                                ...) {
  if (out_error != NULL && *out_error == NULL) {
    va_list ap;
    va_start(ap, format);
    char* head = vformat(format, ap);
    va_end(ap);
    const char* tail =
        cause != NULL ? cause : maelys_executor_result_name(result);
    if (head != NULL) {
      size_t n = strlen(head) + strlen(tail) + 3;
      *out_error = malloc(n);
      if (*out_error != NULL)
        snprintf(*out_error, n, "%s: %s", head, tail);
      free(head);
    }
  }
  maelys_executor_error_free(cause);
  return result;
}

/* ---------------------------------------------------------- resolution */

void maelys__mcpx_resolution_init(maelys_mcp_executor_resolution_t* res) {
  memset(res, 0, sizeof *res);
}

void maelys__mcpx_resolution_clear(maelys_mcp_executor_resolution_t* res) {
  maelys_executor_plan_destroy(res->plan);
  free(res->backend);
  free(res->cwd);
  for (size_t i = 0; i < res->env_count; i++) {
    free(res->env_names[i]);
    free(res->env_values[i]);
  }
  free(res->env_names);
  free(res->env_values);
  for (size_t i = 0; i < res->channel_count; i++)
    if (res->channels[i].host_fd >= 0)
      close(res->channels[i].host_fd);
  free(res->channels);
  maelys__mcpx_resolution_init(res);
}

maelys_executor_result_t
maelys_mcp_executor_resolution_set_plan(maelys_mcp_executor_resolution_t* res,
                                        maelys_executor_plan_t** plan,
                                        const char* backend, char** out_error) {
  maelys_executor_plan_t* taken = plan != NULL ? *plan : NULL;
  if (plan != NULL)
    *plan = NULL;
  if (res == NULL || taken == NULL || backend == NULL || backend[0] == '\0') {
    maelys_executor_plan_destroy(taken);
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "a resolution needs a plan and a backend name");
  }
  if (res->plan != NULL) {
    maelys_executor_plan_destroy(taken);
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                             "the resolution already has a plan");
  }
  if (!maelys_executor_plan_is_sealed(taken)) {
    maelys_executor_plan_destroy(taken);
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                             "the profile's plan is not sealed");
  }
  char* name = maelys__mcpx_strdup(backend);
  if (name == NULL) {
    maelys_executor_plan_destroy(taken);
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                             "out of memory");
  }
  res->plan = taken;
  res->backend = name;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_mcp_executor_resolution_set_cwd(maelys_mcp_executor_resolution_t* res,
                                       const char* path, char** out_error) {
  if (res == NULL || path == NULL || path[0] != '/')
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "the working directory must be absolute");
  char* copy = maelys__mcpx_strdup(path);
  if (copy == NULL)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                             "out of memory");
  free(res->cwd);
  res->cwd = copy;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t maelys_mcp_executor_resolution_add_environment(
    maelys_mcp_executor_resolution_t* res, const char* name, const char* value,
    char** out_error) {
  if (res == NULL || name == NULL || name[0] == '\0' ||
      strchr(name, '=') != NULL || value == NULL)
    return maelys__mcpx_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "an environment entry needs a non-empty name without '=' and a value");
  for (size_t i = 0; i < res->env_count; i++)
    if (strcmp(res->env_names[i], name) == 0)
      return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                               "the profile adds %s twice", name);
  char** names = realloc(res->env_names, (res->env_count + 1) * sizeof *names);
  if (names == NULL)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                             "out of memory");
  res->env_names = names;
  char** values =
      realloc(res->env_values, (res->env_count + 1) * sizeof *values);
  if (values == NULL)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                             "out of memory");
  res->env_values = values;
  char* n = maelys__mcpx_strdup(name);
  char* v = maelys__mcpx_strdup(value);
  if (n == NULL || v == NULL) {
    free(n);
    free(v);
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                             "out of memory");
  }
  res->env_names[res->env_count] = n;
  res->env_values[res->env_count] = v;
  res->env_count++;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t maelys_mcp_executor_resolution_add_channel(
    maelys_mcp_executor_resolution_t* res, int child_fd, int* host_fd,
    char** out_error) {
  int fd = host_fd != NULL ? *host_fd : -1;
  if (host_fd != NULL)
    *host_fd = -1;
  maelys_executor_result_t r = MAELYS_EXECUTOR_OK;
  if (res == NULL || fd < 0)
    r = maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                          "a channel needs a resolution and a host descriptor");
  else if (child_fd < 4)
    r = maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                          "channel child descriptor %d: channels start at 4 "
                          "(0-2 are the io mode's, 3 the protocol's)",
                          child_fd);
  for (size_t i = 0; r == MAELYS_EXECUTOR_OK && i < res->channel_count; i++)
    if (res->channels[i].child_fd == child_fd)
      r = maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                            "channel child descriptor %d given twice",
                            child_fd);
  if (r == MAELYS_EXECUTOR_OK) {
    maelys__mcpx_channel_t* grown = realloc(
        res->channels, (res->channel_count + 1) * sizeof *res->channels);
    if (grown == NULL)
      r = maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                            "out of memory");
    else {
      res->channels = grown;
      res->channels[res->channel_count].child_fd = child_fd;
      res->channels[res->channel_count].host_fd = fd;
      res->channel_count++;
      return MAELYS_EXECUTOR_OK;
    }
  }
  if (fd >= 0)
    close(fd);
  return r;
}

/* ----------------------------------------------------------- mappings */

maelys_executor_result_t
maelys__mcpx_io_mode(maelys_mcp_executor_layout_t layout,
                     maelys_exec_io_mode_t* out_mode, int* out_child_fd,
                     char** out_error) {
  switch (layout) {
  case MAELYS_MCP_EXECUTOR_LAYOUT_STDIO:
    /* One socket as stdin and stdout, stderr inherited: MCP's stdio
     * transport, which a proxied upstream speaks by specification. */
    *out_mode = MAELYS_EXEC_IO_DUPLEX_STDIO;
    *out_child_fd = -1;
    return MAELYS_EXECUTOR_OK;
  case MAELYS_MCP_EXECUTOR_LAYOUT_ISOLATED:
    /* The runtime's ISOLATED arrangement is exactly the Executor's: fd 3 the
     * socket, stdin /dev/null, stdout joined to the inherited stderr. */
    *out_mode = MAELYS_EXEC_IO_ISOLATED_DUPLEX;
    *out_child_fd = 3;
    return MAELYS_EXECUTOR_OK;
  }
  return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                           "descriptor layout %d is not implemented by the "
                           "maelys-executor launcher",
                           (int)layout);
}

maelys_executor_result_t
maelys__mcpx_stop_mode(maelys_mcp_executor_stop_t stop,
                       maelys_execution_stop_mode_t* out_mode,
                       char** out_error) {
  switch (stop) {
  case MAELYS_MCP_EXECUTOR_STOP_GRACEFUL:
    *out_mode = MAELYS_EXEC_STOP_GRACEFUL;
    return MAELYS_EXECUTOR_OK;
  case MAELYS_MCP_EXECUTOR_STOP_FORCED:
    *out_mode = MAELYS_EXEC_STOP_FORCED;
    return MAELYS_EXECUTOR_OK;
  }
  return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                           "stop mode %d is neither graceful nor forced",
                           (int)stop);
}

void maelys__mcpx_exit_status(const maelys_execution_status_t* status,
                              maelys_mcp_executor_exit_t* out_exit) {
  out_exit->exited = 1;
  out_exit->exit_code = 0;
  out_exit->term_signal = 0;
  switch (status->outcome) {
  case MAELYS_EXEC_OUTCOME_EXITED:
    out_exit->exit_code = status->exit_code;
    break;
  case MAELYS_EXEC_OUTCOME_SIGNALED:
    out_exit->term_signal = status->term_signal;
    break;
  case MAELYS_EXEC_OUTCOME_LAUNCH_FAILED:
  default:
    /* The payload never ran. The stock POSIX launcher reports that case as
     * its child's _exit(127) after a failed execve and _exit(126) after a
     * failed descriptor setup; the same codes keep the runtime's reports
     * alike whichever launcher is linked. */
    out_exit->exit_code = status->launch_step != NULL &&
                                  strcmp(status->launch_step, "execve") == 0
                              ? 127
                              : 126;
    break;
  }
}

unsigned maelys__mcpx_budget_ms(unsigned runtime_ms) {
  /* The Executor's budgets only decide when a graceful-only stop reports
   * STILL_RUNNING and when a forced one reports a containment failure; the
   * runtime's own ladder times its rungs. 0 has no Executor spelling, and
   * 1 ms reports the same thing. */
  if (runtime_ms == 0)
    return 1;
  return runtime_ms > 3600000u ? 3600000u : runtime_ms;
}

maelys_executor_result_t
maelys__mcpx_plan_network(const maelys_executor_plan_t* plan,
                          maelys_executor_network_t* out_mode,
                          char** out_error) {
  /* The public header has no getter for the mode; the plan's JSON form
   * (maelys-executor-plan/1) is its public, stable description. */
  char* text = NULL;
  char* error = NULL;
  maelys_executor_result_t r =
      maelys_executor_plan_to_json(plan, &text, &error);
  if (r != MAELYS_EXECUTOR_OK)
    return maelys__mcpx_fail_with(out_error, r, error,
                                  "cannot read the profile's plan");
  json_error_t jerr;
  json_t* doc = json_loads(text, 0, &jerr);
  maelys_executor_string_free(text);
  const char* mode = json_string_value(
      json_object_get(json_object_get(doc, "network"), "mode"));
  static const struct {
    const char* name;
    maelys_executor_network_t mode;
  } modes[] = {{"inherit", MAELYS_EXECUTOR_NETWORK_INHERIT},
               {"none", MAELYS_EXECUTOR_NETWORK_NONE},
               {"mediated", MAELYS_EXECUTOR_NETWORK_MEDIATED},
               {"external-channel", MAELYS_EXECUTOR_NETWORK_EXTERNAL_CHANNEL}};
  for (size_t i = 0; mode != NULL && i < sizeof modes / sizeof modes[0]; i++)
    if (strcmp(mode, modes[i].name) == 0) {
      *out_mode = modes[i].mode;
      json_decref(doc);
      return MAELYS_EXECUTOR_OK;
    }
  r = maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                        "the profile's plan has an unknown network mode %s",
                        mode != NULL ? mode : "(none)");
  json_decref(doc);
  return r;
}

/* ---------------------------------------------------------- conversion */

static maelys_executor_result_t
check_plan(const maelys_mcp_executor_resolution_t* res, char** out_error) {
  if (res->plan == NULL || res->backend == NULL)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                             "the profile resolved to no plan");
  if (!maelys_executor_plan_is_sealed(res->plan))
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                             "the profile's plan is not sealed");
  maelys_executor_network_t network;
  maelys_executor_result_t r =
      maelys__mcpx_plan_network(res->plan, &network, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  /* Invariant 15 (seed: "Published MCP contract"): only a host that owns an
   * egress broker can create the authenticated connector and keep it for the
   * execution; this pure adapter owns none, and environment injection is
   * never a substitute for the channel. */
  if (network == MAELYS_EXECUTOR_NETWORK_EXTERNAL_CHANNEL)
    return maelys__mcpx_fail(
        out_error, MAELYS_EXECUTOR_ERR_DENIED,
        "the profile's plan has an EXTERNAL_CHANNEL network: the MCP "
        "launcher adapter does not compose egress channels; an egress-aware "
        "host must compose that plan");
  return MAELYS_EXECUTOR_OK;
}

static maelys_executor_result_t
add_environment(unsigned abi, const maelys_mcp_executor_spec_t* spec,
                const maelys_mcp_executor_resolution_t* res,
                maelys_execution_request_t* request, char** out_error) {
  /* The LOCAL environment platform rule: the runtime's closed environment is
   * copied exactly, entry for entry, in order. */
  size_t total = spec->env_count + res->env_count;
  char* error = NULL;
  maelys_executor_result_t r = maelys_execution_request_set_environment_mode(
      request, total > 0 ? MAELYS_EXEC_ENV_EXPLICIT : MAELYS_EXEC_ENV_EMPTY,
      &error);
  if (r != MAELYS_EXECUTOR_OK)
    return maelys__mcpx_fail_with(out_error, r, error, "environment");
  for (size_t i = 0; i < spec->env_count; i++) {
    r = maelys_execution_request_add_environment(request, spec->env_names[i],
                                                 spec->env_values[i], &error);
    if (r != MAELYS_EXECUTOR_OK)
      return maelys__mcpx_fail_with(out_error, r, error,
                                    "the runtime's environment entry %s",
                                    spec->env_names[i]);
  }
  if (res->env_count > 0 && abi < 6)
    /* Launcher ABI 5 hands the child exactly the runtime's environment (the
     * stock launcher's behaviour); ABI 6 is what authorises additions. */
    return maelys__mcpx_fail(
        out_error, MAELYS_EXECUTOR_ERR_DENIED,
        "the profile adds the environment entry %s, but launcher ABI %u "
        "carries the runtime's closed environment exactly (additions need "
        "ABI 6)",
        res->env_names[0], abi);
  for (size_t i = 0; i < res->env_count; i++) {
    for (size_t j = 0; j < spec->env_count; j++)
      if (strcmp(res->env_names[i], spec->env_names[j]) == 0)
        return maelys__mcpx_fail(
            out_error, MAELYS_EXECUTOR_ERR_DENIED,
            "the profile's environment entry %s would replace the runtime's "
            "own (a profile may add entries, never replace one)",
            res->env_names[i]);
    r = maelys_execution_request_add_environment(request, res->env_names[i],
                                                 res->env_values[i], &error);
    if (r != MAELYS_EXECUTOR_OK)
      return maelys__mcpx_fail_with(out_error, r, error,
                                    "the profile's environment entry %s",
                                    res->env_names[i]);
  }
  return MAELYS_EXECUTOR_OK;
}

static maelys_executor_result_t
add_channels(unsigned abi, maelys_mcp_executor_resolution_t* res,
             maelys_execution_request_t* request, char** out_error) {
  if (res->channel_count > 0 && abi < 6)
    /* ABI 5's child has descriptors 0-3 only, as the stock launcher gives
     * it; ABI 6 reserves 4 and up for profile-installed channels. */
    return maelys__mcpx_fail(
        out_error, MAELYS_EXECUTOR_ERR_DENIED,
        "the profile installs a channel at child descriptor %d, but launcher "
        "ABI %u gives the child no descriptor above 3 (channels need ABI 6)",
        res->channels[0].child_fd, abi);
  for (size_t i = 0; i < res->channel_count; i++) {
    char* error = NULL;
    maelys_executor_result_t r = maelys_execution_request_add_channel(
        request, res->channels[i].child_fd, &res->channels[i].host_fd, &error);
    if (r != MAELYS_EXECUTOR_OK)
      return maelys__mcpx_fail_with(out_error, r, error,
                                    "the profile's channel at child fd %d",
                                    res->channels[i].child_fd);
  }
  return MAELYS_EXECUTOR_OK;
}

static maelys_executor_result_t fill(unsigned abi,
                                     const maelys_mcp_executor_spec_t* spec,
                                     maelys_mcp_executor_resolution_t* res,
                                     maelys_execution_request_t* request,
                                     char** out_error) {
  char* error = NULL;
  maelys_executor_result_t r;
  maelys_exec_io_mode_t io = MAELYS_EXEC_IO_DUPLEX_STDIO;
  int child_fd = -1;
#define STEP(call, ...)                                                        \
  do {                                                                         \
    r = (call);                                                                \
    if (r != MAELYS_EXECUTOR_OK)                                               \
      return maelys__mcpx_fail_with(out_error, r, error, __VA_ARGS__);         \
  } while (0)
  STEP(maelys_execution_request_set_executable(request, spec->executable,
                                               &error),
       "executable %s", spec->executable);
  /* The complete vector, argv[0] included, as given: a proxy's argv is
   * never reordered, prefixed or interpreted, and never runs outside the
   * request. */
  const char** argv = calloc(spec->argc + 1, sizeof *argv);
  if (argv == NULL)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                             "out of memory");
  memcpy(argv, spec->argv, spec->argc * sizeof *argv);
  r = maelys_execution_request_set_argv(request, argv, &error);
  free(argv);
  if (r != MAELYS_EXECUTOR_OK)
    return maelys__mcpx_fail_with(out_error, r, error, "argv");
  r = maelys__mcpx_io_mode(spec->layout, &io, &child_fd, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  STEP(maelys_execution_request_set_io_mode(request, io, child_fd, &error),
       "io mode");
  /* Inherited stderr: the runtime never drains a pipe, and a noisy provider
   * must not block on one. */
  STEP(maelys_execution_request_set_stderr_mode(
           request, MAELYS_EXEC_STDERR_INHERIT, &error),
       "stderr");
  STEP(maelys_execution_request_set_platform(
           request, MAELYS_MCP_EXECUTOR_PLATFORM_LOCAL, &error),
       "platform");
  STEP(maelys_execution_request_set_backend(request, res->backend, &error),
       "backend %s", res->backend);
  STEP(maelys_execution_request_set_cwd(
           request, res->cwd != NULL ? res->cwd : "/", &error),
       "working directory");
  STEP(maelys_execution_request_set_stop_budget(
           request, maelys__mcpx_budget_ms(spec->grace_timeout_ms),
           maelys__mcpx_budget_ms(spec->force_timeout_ms), &error),
       "stop budget");
#undef STEP
  r = add_environment(abi, spec, res, request, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  return add_channels(abi, res, request, out_error);
}

maelys_executor_result_t
maelys__mcpx_convert(unsigned abi, const maelys_mcp_executor_spec_t* spec,
                     maelys_mcp_executor_resolution_t* res,
                     maelys_execution_request_t** out_request,
                     char** out_error) {
  *out_request = NULL;
  if (abi < MAELYS_MCP_EXECUTOR_RUNTIME_ABI_MIN ||
      abi > MAELYS_MCP_EXECUTOR_RUNTIME_ABI_MAX)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                             "launcher ABI %u is not implemented (%d..%d are)",
                             abi, MAELYS_MCP_EXECUTOR_RUNTIME_ABI_MIN,
                             MAELYS_MCP_EXECUTOR_RUNTIME_ABI_MAX);
  if (spec->executable == NULL || spec->argv == NULL || spec->argc == 0 ||
      (spec->env_count > 0 &&
       (spec->env_names == NULL || spec->env_values == NULL)))
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "the process specification is incomplete");
  /* Invariant 14: only "local" is implemented. Any other token names a
   * target whose PATH its profile must produce (the OCI target contract does
   * not define that yet); nothing is guessed, dropped or translated. */
  if (spec->platform == NULL ||
      strcmp(spec->platform, MAELYS_MCP_EXECUTOR_PLATFORM_LOCAL) != 0)
    return maelys__mcpx_fail(
        out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
        "environment platform \"%s\" is not implemented by the "
        "maelys-executor launcher (only \"local\" is; nothing is translated)",
        spec->platform != NULL ? spec->platform : "");
  maelys_executor_result_t r = check_plan(res, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  maelys_execution_request_t* request = NULL;
  char* error = NULL;
  r = maelys_execution_request_create(&request, &error);
  if (r != MAELYS_EXECUTOR_OK)
    return maelys__mcpx_fail_with(out_error, r, error, "request");
  r = fill(abi, spec, res, request, out_error);
  if (r != MAELYS_EXECUTOR_OK) {
    maelys_execution_request_destroy(request);
    return r;
  }
  *out_request = request;
  return MAELYS_EXECUTOR_OK;
}
