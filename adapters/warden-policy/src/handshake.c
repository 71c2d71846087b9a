/*
 * The five-step capability handshake of seeds/001 as one object, so that the
 * capability check (steps 1-2) and the enforcement (step 5) cannot name two
 * different backends (invariant 2). Steps 3 and 4 are the caller's: compile
 * with the converted capabilities, lower the result.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct maelys_warden_policy_handshake {
  const maelys_executor_t* executor;
  char* backend;
  uint64_t executor_mask;
  uint64_t capabilities;
};

maelys_executor_result_t maelys_warden_policy_handshake_begin(
    const maelys_executor_t* executor, const char* backend_name,
    maelys_warden_policy_handshake_t** out, char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (out == NULL)
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "out is NULL");
  *out = NULL;
  if (executor == NULL || backend_name == NULL || backend_name[0] == '\0')
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "the executor and a backend name are "
                                      "required");
  /* Step 1: the mask the named backend's probe proved. */
  uint64_t mask = 0;
  char* e = NULL;
  maelys_executor_result_t r =
      maelys_executor_backend_capabilities(executor, backend_name, &mask, &e);
  if (r != MAELYS_EXECUTOR_OK)
    return maelys__warden_policy_wrap(out_error, r, e,
                                      "capability handshake, step 1 (backend "
                                      "'%s')",
                                      backend_name);
  /* Step 2: that exact mask, converted. */
  uint64_t caps = 0;
  r = maelys_warden_policy_capabilities_from_executor(mask, &caps, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  maelys_warden_policy_handshake_t* h = calloc(1, sizeof *h);
  size_t n = strlen(backend_name) + 1;
  char* name = malloc(n);
  if (h == NULL || name == NULL) {
    free(h);
    free(name);
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                      "out of memory");
  }
  memcpy(name, backend_name, n);
  h->executor = executor;
  h->backend = name;
  h->executor_mask = mask;
  h->capabilities = caps;
  *out = h;
  return MAELYS_EXECUTOR_OK;
}

uint64_t maelys_warden_policy_handshake_capabilities(
    const maelys_warden_policy_handshake_t* handshake) {
  return handshake ? handshake->capabilities : 0;
}

uint64_t maelys_warden_policy_handshake_executor_mask(
    const maelys_warden_policy_handshake_t* handshake) {
  return handshake ? handshake->executor_mask : 0;
}

const char* maelys_warden_policy_handshake_backend(
    const maelys_warden_policy_handshake_t* handshake) {
  return handshake ? handshake->backend : NULL;
}

maelys_executor_result_t maelys_warden_policy_handshake_finish(
    const maelys_warden_policy_handshake_t* h,
    const maelys_executor_t* executor, const char* backend_name,
    const maelys_executor_plan_t* sealed_plan,
    maelys_execution_request_t* request, char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (h == NULL || executor == NULL || backend_name == NULL ||
      sealed_plan == NULL || request == NULL)
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "the handshake, executor, backend name, "
                                      "sealed plan and request are required");
  /* Invariant 2: the capability check and the enforcement use the same
   * backend name, on the same executor. */
  if (strcmp(backend_name, h->backend) != 0)
    return maelys__warden_policy_fail(
        out_error, MAELYS_EXECUTOR_ERR_DENIED,
        "capability handshake, step 5: the request would be enforced by "
        "backend '%s' but the capabilities were checked against backend '%s' "
        "(invariant 2: the same backend name in steps 1 and 5)",
        backend_name, h->backend);
  if (executor != h->executor)
    return maelys__warden_policy_fail(
        out_error, MAELYS_EXECUTOR_ERR_DENIED,
        "capability handshake, step 5: backend '%s' of another executor than "
        "the one checked in step 1",
        backend_name);
  if (!maelys_executor_plan_is_sealed(sealed_plan))
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                                      "capability handshake, step 5: the plan "
                                      "is not sealed");
  uint64_t mask = 0;
  char* e = NULL;
  maelys_executor_result_t r =
      maelys_executor_backend_capabilities(executor, backend_name, &mask, &e);
  if (r != MAELYS_EXECUTOR_OK)
    return maelys__warden_policy_wrap(out_error, r, e,
                                      "capability handshake, step 5 (backend "
                                      "'%s')",
                                      backend_name);
  if (mask != h->executor_mask)
    return maelys__warden_policy_fail(
        out_error, MAELYS_EXECUTOR_ERR_STATE,
        "capability handshake, step 5: backend '%s' proves 0x%llx now but "
        "0x%llx when it was checked",
        backend_name, (unsigned long long)mask,
        (unsigned long long)h->executor_mask);
  uint64_t need = 0;
  r = maelys_executor_plan_required_capabilities(sealed_plan, &need, &e);
  if (r != MAELYS_EXECUTOR_OK)
    return maelys__warden_policy_wrap(out_error, r, e,
                                      "capability handshake, step 5");
  uint64_t missing = need & ~mask;
  if (missing != 0) {
    uint64_t bit = missing & (~missing + 1);
    const char* name = maelys_executor_capability_name(bit);
    return maelys__warden_policy_fail(
        out_error, MAELYS_EXECUTOR_ERR_CAPABILITY,
        "capability handshake, step 5: the plan requires '%s', which backend "
        "'%s' did not prove",
        name ? name : "an unknown capability", backend_name);
  }
  r = maelys_execution_request_set_backend(request, h->backend, &e);
  if (r != MAELYS_EXECUTOR_OK)
    return maelys__warden_policy_wrap(out_error, r, e,
                                      "capability handshake, step 5");
  return MAELYS_EXECUTOR_OK;
}

void maelys_warden_policy_handshake_destroy(
    maelys_warden_policy_handshake_t* h) {
  if (h == NULL)
    return;
  free(h->backend);
  free(h);
}
