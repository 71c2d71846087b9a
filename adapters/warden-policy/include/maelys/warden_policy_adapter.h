/*
 * The Warden Policy adapter's glue: the only header that includes both the
 * Executor's and the sandbox-policy library's public headers (seeds/001). It
 * reads a compiled maelys_sandbox_policy_plan_t through the library's public
 * accessors, copies every resolved rule into the adapter's decision type and
 * lowers it into a new sealed maelys_executor_plan_t. Neither plan type is
 * cast, aliased or passed to the other library; the source plan stays owned
 * by its caller.
 *
 * Built only against a real libmaelys-sandbox-policy whose ABI the adapter
 * was built for (adapters/warden-policy/sandbox-policy.pin, checked at
 * configure time and again below).
 */
#ifndef MAELYS_WARDEN_POLICY_ADAPTER_H
#define MAELYS_WARDEN_POLICY_ADAPTER_H

#include <maelys/sandbox_policy.h>

#include "maelys/warden_policy.h"

/* Refuse at compile time a policy library the glue was not written for. A
 * header that states a compatibility floor (ABI 5 onwards) must still serve
 * ABI 4 consumers; one that does not (ABI 4 itself) must be ABI 4. */
#if defined(MAELYS_SANDBOX_POLICY_ABI_COMPATIBLE_SINCE)
#if MAELYS_SANDBOX_POLICY_ABI_COMPATIBLE_SINCE > 4 ||                          \
    MAELYS_SANDBOX_POLICY_ABI_VERSION < 4
#error "the Warden Policy adapter is built for Sandbox Policy ABI 4"
#endif
#elif MAELYS_SANDBOX_POLICY_ABI_VERSION != 4
#error "the Warden Policy adapter is built for Sandbox Policy ABI 4"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The Sandbox Policy ABI this glue was compiled against. */
#define MAELYS_WARDEN_POLICY_SANDBOX_POLICY_ABI 4

/* The portable capabilities `capabilities` (MAELYS_WARDEN_POLICY_CAP_*) as
 * the linked library's bits, for maelys_sandbox_policy_compile(). */
MAELYS_WARDEN_POLICY_API maelys_executor_result_t
maelys_warden_policy_library_capabilities(
    uint64_t capabilities, maelys_sandbox_policy_capabilities_t* out,
    char** out_error);

/* A new HostContext built from `host` (workspace, temp, minimal-runtime
 * roots, mediator). The mediator, when given, must be one of the two IDs of
 * <maelys/warden_policy.h>. Free with maelys_sandbox_policy_host_destroy(). */
MAELYS_WARDEN_POLICY_API maelys_executor_result_t
maelys_warden_policy_host_context_create(
    const maelys_warden_policy_host_t* host,
    maelys_sandbox_policy_host_t** out_context, char** out_error);

typedef struct maelys_warden_sandbox_policy_options {
  /* The trusted run specification (scratch size, the Executor's lifecycle
   * flag, mechanical mounts); NULL: none. */
  const maelys_warden_policy_options_t* run;
  /* Required: the MIR the plan was compiled from. Sandbox Policy ABI 4 drops
   * an absent-path DENY inside the library, so the plan alone cannot show
   * it; every DENY of this MIR must have its counterpart in the plan. Its
   * digest must equal the plan's. */
  const maelys_mir_t* source_mir;
  /* Required: the roots the plan's HostContext was built from (build both
   * with maelys_warden_policy_host_context_create from this struct).
   * Minimal-runtime roots that are symbolic links on the host (merged-/usr:
   * /lib -> usr/lib) are recreated as links in the sandbox; they grant
   * nothing, the policy's rules name what they point to. */
  const maelys_warden_policy_host_t* host;
} maelys_warden_sandbox_policy_options_t;

/*
 * Step 4 of the handshake: `policy_plan` (borrowed, still the caller's)
 * lowered into a new sealed plan (*out_sealed_plan, freed with
 * maelys_executor_plan_destroy()). See maelys_warden_policy_lower() for the
 * mapping; every value of the policy plan the adapter does not know is an
 * error naming it.
 */
MAELYS_WARDEN_POLICY_API maelys_executor_result_t
maelys_warden_plan_from_sandbox_policy(
    const maelys_sandbox_policy_plan_t* policy_plan,
    const maelys_warden_sandbox_policy_options_t* options,
    maelys_executor_plan_t** out_sealed_plan, char** out_error);

/*
 * Steps 3 and 4 from canonical MIR bytes, for a command line: decode the MIR
 * (non-canonical bytes are refused), build the HostContext from `host`,
 * compile it with the capabilities `handshake` converted (steps 1-2 done by
 * the caller), lower and seal. The caller then runs step 5,
 * maelys_warden_policy_handshake_finish(), with the same handshake.
 *
 * `fd` is borrowed, read from its current offset to its end; it must be a
 * regular file of at most MAELYS_MIR_MAX_BYTES.
 */
MAELYS_WARDEN_POLICY_API maelys_executor_result_t
maelys_warden_policy_plan_from_fd(
    int fd, const maelys_warden_policy_handshake_t* handshake,
    const maelys_warden_policy_host_t* host,
    const maelys_warden_policy_options_t* run,
    maelys_executor_plan_t** out_sealed_plan, char** out_error);

/*
 * maelys_warden_policy_plan_from_fd() on `mir_path`, opened with O_NOFOLLOW
 * (a symbolic link as the last component is refused) and refused when it is
 * not a regular file or is writable by group or others. It does not judge
 * the ancestors or the sandboxes that could write there: a command line must
 * first apply its own rule that authority files never come from where a
 * sandbox writes (invariant 18), or open the file itself and use _from_fd.
 */
MAELYS_WARDEN_POLICY_API maelys_executor_result_t
maelys_warden_policy_plan_from_file(
    const char* mir_path, const maelys_warden_policy_handshake_t* handshake,
    const maelys_warden_policy_host_t* host,
    const maelys_warden_policy_options_t* run,
    maelys_executor_plan_t** out_sealed_plan, char** out_error);

#ifdef __cplusplus
}
#endif

#endif /* MAELYS_WARDEN_POLICY_ADAPTER_H */
