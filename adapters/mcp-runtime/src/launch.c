/* One launch, whatever calls it: the profile is resolved on the calling
 * thread, the specification converted, and the sealed plan and request
 * handed to the loop thread. Every refusal happens before anything reaches
 * the loop: nothing is launched on an error. */
#include <stdlib.h>

#include "mcpx.h"

#define LAUNCHER "launcher maelys-executor"

maelys_executor_result_t maelys__mcpx_launch(
    maelys_mcp_executor_host_t* host,
    const maelys_mcp_executor_resolver_t* resolver, void* resolver_data,
    unsigned abi, const maelys_mcp_executor_spec_t* spec,
    maelys__mcpx_instance_t** out_instance, int* out_fd, char** out_error) {
  const char* shown = spec->profile != NULL ? spec->profile : "(none)";
  maelys_mcp_executor_resolution_t res;
  maelys__mcpx_resolution_init(&res);
  char* error = NULL;
  maelys_executor_result_t r =
      resolver->resolve(resolver_data, spec->profile, spec, &res, &error);
  if (r == MAELYS_EXECUTOR_OK && res.plan == NULL)
    r = maelys__mcpx_fail(&error, MAELYS_EXECUTOR_ERR_STATE,
                          "the resolver returned no plan");
  if (r == MAELYS_EXECUTOR_OK && error != NULL) {
    /* A resolver that succeeded has nothing to say. */
    maelys_mcp_executor_error_free(error);
    error = NULL;
  }
  if (r != MAELYS_EXECUTOR_OK) {
    maelys__mcpx_resolution_clear(&res);
    return maelys__mcpx_fail_with(out_error, r, error,
                                  LAUNCHER ": execution profile \"%s\" refused",
                                  shown);
  }
  maelys_execution_request_t* request = NULL;
  r = maelys__mcpx_convert(abi, spec, &res, &request, &error);
  if (r != MAELYS_EXECUTOR_OK) {
    maelys__mcpx_resolution_clear(&res);
    return maelys__mcpx_fail_with(out_error, r, error,
                                  LAUNCHER ": execution profile \"%s\"", shown);
  }
  maelys_executor_plan_t* plan = res.plan;
  res.plan = NULL;
  maelys__mcpx_resolution_clear(&res);
  r = maelys__mcpx_host_spawn(host, &plan, &request, spec->spawn_timeout_ms,
                              out_instance, out_fd, &error);
  if (r != MAELYS_EXECUTOR_OK)
    return maelys__mcpx_fail_with(out_error, r, error, LAUNCHER ": %s",
                                  spec->executable);
  return MAELYS_EXECUTOR_OK;
}
