/*
 * The POSIX backend: unconfined. It gives the payload the exact descriptor
 * layout, the closed environment, the working directory, the plan's rlimits
 * and its own process group, and nothing else; it proves no sandbox
 * capability, so a plan that requires one is refused before anything starts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "maelys/backend.h"

static const char unconfined[] =
    "the posix backend runs the payload unconfined: it enforces no sandbox "
    "capability (use the bubblewrap backend for confinement)";

static maelys_executor_result_t
posix_create(const maelys_backend_options_t* options, void** out_state,
             char** out_error) {
  /* No options are defined; a key given anyway is a configuration mistake
   * worth hearing about. */
  if (maelys_backend_options_count(options) > 0)
    return maelys_backend_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                               "the posix backend takes no options (got '%s')",
                               maelys_backend_options_key(options, 0));
  *out_state = NULL;
  return MAELYS_EXECUTOR_OK;
}

static void posix_destroy(void* state) {
  (void)state;
}

static maelys_executor_result_t
posix_probe(void* state, maelys_backend_probe_t* probe, char** out_error) {
  (void)state;
  (void)out_error;
  maelys_backend_probe_missing(probe, MAELYS_BACKEND_CAP_ALL, unconfined);
  maelys_backend_probe_diagnostic(probe, unconfined);
  return MAELYS_EXECUTOR_OK;
}

static maelys_executor_result_t
posix_prepare(void* state, uint64_t proved, const maelys_executor_plan_t* plan,
              const maelys_execution_request_t* request,
              maelys_backend_launch_t* launch, char** out_error) {
  (void)state;
  (void)proved;
  (void)plan;
  uint32_t uid, gid;
  if (maelys_execution_request_identity(request, &uid, &gid) == 0) {
    if (geteuid() == 0)
      return maelys_backend_launch_set_credentials(launch, uid, gid, out_error);
    if (uid != (uint32_t)geteuid() || gid != (uint32_t)getegid())
      return maelys_backend_fail(
          out_error, MAELYS_EXECUTOR_ERR_DENIED,
          "posix: the request names an identity other than the host's, which "
          "only uid 0 can assume");
  }
  return MAELYS_EXECUTOR_OK;
}

static const maelys_backend_t posix_backend = {
    .abi_version = MAELYS_BACKEND_ABI_VERSION,
    .struct_size = sizeof(maelys_backend_t),
    .name = "posix",
    .create = posix_create,
    .destroy = posix_destroy,
    .probe = posix_probe,
    .prepare = posix_prepare,
    .status_line = NULL,
};

const maelys_backend_t* maelys_backend_posix(void) {
  return &posix_backend;
}
