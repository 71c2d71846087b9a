/*
 * The launcher: mcp-runtime's four process operations on the Executor.
 *
 * spawn   the runtime's complete request is copied out through its getters
 *         (their pointers die with the call), the resolver turns the profile
 *         into a sealed plan, the pure conversion builds the Executor
 *         request, and the loop thread spawns it and hands back only the
 *         protocol descriptor.
 * wait    a bounded wait on the status the Executor recorded; never touches
 *         the loop.
 * stop    GRACEFUL is the graceful signal only and FORCED the forced kill of
 *         the whole tree: the runtime climbs its own ladder (stop GRACEFUL,
 *         wait, stop FORCED, wait), so the Executor's graceful-then-forced
 *         form would escalate twice. Returns once the Executor took it.
 * release local only: the Executor's release never signals or waits.
 *
 * Built only against a checkout of mcp-runtime at the pinned release.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "maelys/mcp/process_launcher.h"

#include "mcpx.h"

#ifndef MAELYS_MCP_EXECUTOR_PINNED_ABI
#error "MAELYS_MCP_EXECUTOR_PINNED_ABI comes from MCP_RUNTIME_PIN (CMake)"
#endif

/* The header this unit is compiled against must be the pinned one: the ops
 * table's abi_version is its macro, and the runtime requires exact
 * equality. */
_Static_assert(MAELYS_MCP_ABI_VERSION == MAELYS_MCP_EXECUTOR_PINNED_ABI,
               "the mcp-runtime checkout is not the pinned launcher ABI");
/* The adapter's own enums mirror the runtime's values, so that the pure half
 * never includes the runtime. */
_Static_assert((int)MAELYS_MCP_PROCESS_FD_STDIO ==
                       (int)MAELYS_MCP_EXECUTOR_LAYOUT_STDIO &&
                   (int)MAELYS_MCP_PROCESS_FD_ISOLATED ==
                       (int)MAELYS_MCP_EXECUTOR_LAYOUT_ISOLATED,
               "fd layouts");
_Static_assert((int)MAELYS_MCP_PROCESS_STOP_GRACEFUL ==
                       (int)MAELYS_MCP_EXECUTOR_STOP_GRACEFUL &&
                   (int)MAELYS_MCP_PROCESS_STOP_FORCED ==
                       (int)MAELYS_MCP_EXECUTOR_STOP_FORCED,
               "stop modes");

#define LAUNCHER_NAME "maelys-executor"

typedef struct launcher_ctx {
  maelys_mcp_executor_host_t* host;
  maelys_mcp_executor_resolver_t resolver;
  void* resolver_data;
} launcher_ctx_t;

/* Hands a diagnostic to the runtime, which frees it with free(). */
static maelys_mcp_result_t to_runtime(maelys_executor_result_t r, char* error,
                                      char** out_error) {
  if (out_error != NULL && error != NULL) {
    free(*out_error);
    *out_error = maelys__mcpx_strdup(error);
  }
  maelys_mcp_executor_error_free(error);
  switch (r) {
  case MAELYS_EXECUTOR_OK:
    return MAELYS_MCP_OK;
  case MAELYS_EXECUTOR_ERR_MEMORY:
    return MAELYS_MCP_ERR_MEMORY;
  case MAELYS_EXECUTOR_ERR_IO:
  case MAELYS_EXECUTOR_ERR_SPAWN:
    return MAELYS_MCP_ERR_IO;
  case MAELYS_EXECUTOR_ERR_STATE:
    return MAELYS_MCP_ERR_STATE;
  case MAELYS_EXECUTOR_ERR_DENIED:
  case MAELYS_EXECUTOR_ERR_CAPABILITY:
    return MAELYS_MCP_ERR_DENIED;
  case MAELYS_EXECUTOR_ERR_NOT_FOUND:
  case MAELYS_EXECUTOR_ERR_ARGUMENT:
  case MAELYS_EXECUTOR_ERR_UNSUPPORTED:
  case MAELYS_EXECUTOR_ERR_SEALED:
  default:
    /* The stock launcher answers an unknown profile or platform with
     * ARGUMENT, and the runtime's callers test for it. */
    return MAELYS_MCP_ERR_ARGUMENT;
  }
}

/* The spec borrows the request's strings; only the two vectors are built
 * (the getters have no array to borrow). */
typedef struct spec_copy {
  maelys_mcp_executor_spec_t spec;
  const char** argv;
  const char** names;
  const char** values;
} spec_copy_t;

static void spec_free(spec_copy_t* c) {
  free(c->argv);
  free(c->names);
  free(c->values);
}

static bool spec_read(const maelys_mcp_process_request_t* request,
                      spec_copy_t* c) {
  memset(c, 0, sizeof *c);
  maelys_mcp_executor_spec_t* s = &c->spec;
  s->executable = maelys_mcp_process_request_executable(request);
  s->argc = maelys_mcp_process_request_arg_count(request);
  s->profile = maelys_mcp_process_request_execution_profile(request);
  s->layout =
      (maelys_mcp_executor_layout_t)maelys_mcp_process_request_fd_layout(
          request);
  s->platform = maelys_mcp_process_request_environment_platform(request);
  s->spawn_timeout_ms = maelys_mcp_process_request_spawn_timeout_ms(request);
  s->grace_timeout_ms = maelys_mcp_process_request_grace_timeout_ms(request);
  s->force_timeout_ms = maelys_mcp_process_request_force_timeout_ms(request);
  s->env_count = maelys_mcp_process_request_environment_count(request);
  c->argv = calloc(s->argc + 1, sizeof *c->argv);
  c->names = calloc(s->env_count + 1, sizeof *c->names);
  c->values = calloc(s->env_count + 1, sizeof *c->values);
  if (c->argv == NULL || c->names == NULL || c->values == NULL)
    return false;
  for (size_t i = 0; i < s->argc; i++)
    if ((c->argv[i] = maelys_mcp_process_request_arg_at(request, i)) == NULL)
      return false;
  for (size_t i = 0; i < s->env_count; i++)
    /* A gap would end the environment early; refused, never truncated. */
    if (!maelys_mcp_process_request_environment_at(request, i, &c->names[i],
                                                   &c->values[i]))
      return false;
  s->argv = c->argv;
  s->env_names = c->names;
  s->env_values = c->values;
  return true;
}

static maelys_mcp_result_t op_spawn(void* context,
                                    const maelys_mcp_process_request_t* request,
                                    void** out_handle, int* out_protocol_fd,
                                    char** out_error) {
  launcher_ctx_t* ctx = context;
  char* error = NULL;
  if (request == NULL || out_handle == NULL || out_protocol_fd == NULL)
    return to_runtime(maelys__mcpx_fail(&error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                        "process launch request is "
                                        "incomplete"),
                      error, out_error);
  spec_copy_t copy;
  maelys_executor_result_t r;
  if (!spec_read(request, &copy))
    r = maelys__mcpx_fail(&error, MAELYS_EXECUTOR_ERR_MEMORY,
                          "cannot copy the process request");
  else {
    maelys__mcpx_instance_t* instance = NULL;
    int fd = -1;
    r = maelys__mcpx_launch(ctx->host, &ctx->resolver, ctx->resolver_data,
                            MAELYS_MCP_EXECUTOR_PINNED_ABI, &copy.spec,
                            &instance, &fd, &error);
    if (r == MAELYS_EXECUTOR_OK) {
      /* Written only on success: a failed spawn leaves the runtime's own
       * initialisers alone, and nothing was left running. */
      *out_handle = instance;
      *out_protocol_fd = fd;
    }
  }
  spec_free(&copy);
  return to_runtime(r, error, out_error);
}

static maelys_mcp_result_t op_wait(void* context, void* handle,
                                   unsigned int timeout_ms,
                                   maelys_mcp_process_exit_status_t* out_status,
                                   char** out_error) {
  (void)context;
  char* error = NULL;
  if (out_status == NULL)
    return to_runtime(maelys__mcpx_fail(&error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                        "process wait needs somewhere to "
                                        "report the exit status"),
                      error, out_error);
  maelys_mcp_executor_exit_t exit;
  maelys_executor_result_t r =
      maelys__mcpx_instance_wait(handle, timeout_ms, &exit, &error);
  out_status->exited = r == MAELYS_EXECUTOR_OK ? exit.exited : 0;
  out_status->exit_code = r == MAELYS_EXECUTOR_OK ? exit.exit_code : 0;
  out_status->term_signal = r == MAELYS_EXECUTOR_OK ? exit.term_signal : 0;
  return to_runtime(r, error, out_error);
}

static maelys_mcp_result_t op_stop(void* context, void* handle,
                                   maelys_mcp_process_stop_t mode,
                                   char** out_error) {
  (void)context;
  char* error = NULL;
  maelys_executor_result_t r = maelys__mcpx_instance_stop(
      handle, (maelys_mcp_executor_stop_t)mode, &error);
  return to_runtime(r, error, out_error);
}

static void op_release(void* context, void* handle) {
  (void)context;
  maelys__mcpx_instance_release(handle);
}

static const maelys_mcp_process_ops_t executor_ops = {
    .abi_version = MAELYS_MCP_ABI_VERSION,
    .spawn = op_spawn,
    .wait = op_wait,
    .stop = op_stop,
    .release = op_release};

static void ctx_release(void* context) {
  launcher_ctx_t* ctx = context;
  /* The host first: its setup may use the resolver's data. */
  maelys_mcp_executor_host_release(ctx->host);
  if (ctx->resolver.release != NULL)
    ctx->resolver.release(ctx->resolver_data);
  free(ctx);
}

maelys_executor_result_t maelys_mcp_executor_launcher_create(
    maelys_mcp_executor_host_t* host,
    const maelys_mcp_executor_resolver_t* resolver, void* resolver_data,
    maelys_mcp_process_launcher_t** out_launcher, char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (out_launcher == NULL || host == NULL || resolver == NULL ||
      resolver->resolve == NULL)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "a launcher needs a host, a resolver and "
                             "out_launcher");
  *out_launcher = NULL;
  if (!maelys__mcpx_host_owned(host))
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                             "the host belongs to another process");
  launcher_ctx_t* ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                             "out of memory");
  ctx->host = host;
  ctx->resolver = *resolver;
  ctx->resolver_data = resolver_data;
  char* error = NULL;
  maelys_mcp_result_t m = maelys_mcp_process_launcher_create(
      LAUNCHER_NAME, &executor_ops, ctx, ctx_release, out_launcher, &error);
  if (m != MAELYS_MCP_OK) {
    free(ctx);
    maelys_executor_result_t r =
        maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                          "mcp-runtime refused the launcher: %s",
                          error != NULL ? error : "no diagnostic");
    free(error);
    return r;
  }
  maelys_mcp_executor_host_retain(host);
  return MAELYS_EXECUTOR_OK;
}
