/*
 * The Warden Policy adapter, the part that needs no policy library: the pure
 * mapping from a resolved sandbox-policy decision (in this adapter's own
 * vocabulary) to a new sealed Executor plan, the capability converter, and
 * the five-step capability handshake (seeds/001).
 *
 * Everything here uses only <maelys/executor.h>. The glue that reads a
 * maelys_sandbox_policy_plan_t lives in <maelys/warden_policy_adapter.h> and
 * is built only against a real libmaelys-sandbox-policy.
 *
 * Conventions are the Executor's: a fallible call returns a
 * maelys_executor_result_t and takes an optional last `char** out_error`
 * (NULL on entry; on failure one heap-allocated diagnostic naming the rule,
 * path or capability at fault, freed with maelys_executor_error_free()).
 * Outputs are cleared on entry; a failed call leaves nothing half-made.
 * Strings passed in are borrowed for the duration of the call.
 */
#ifndef MAELYS_WARDEN_POLICY_H
#define MAELYS_WARDEN_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "maelys/executor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Adapter ABI 4: the explicit split of the trusted mediator identifier into
 * the FD4 and EGRESS frontends (seeds/001). */
#define MAELYS_WARDEN_POLICY_ADAPTER_ABI_VERSION 4

#if defined(MAELYS_WARDEN_POLICY_BUILDING) && defined(__GNUC__)
#define MAELYS_WARDEN_POLICY_API __attribute__((visibility("default")))
#else
#define MAELYS_WARDEN_POLICY_API
#endif

/* The only two trusted mediator identifiers a policy may be lowered with.
 * Any other identifier is an error: never silently discarded or rebound. */
#define MAELYS_WARDEN_POLICY_FD4_MEDIATOR_ID MAELYS_EXECUTOR_MEDIATOR_FD4
#define MAELYS_WARDEN_POLICY_EGRESS_MEDIATOR_ID MAELYS_EXECUTOR_MEDIATOR_EGRESS

/* ---------------------------------------------------------- capabilities */

/*
 * The portable sandbox-policy capabilities, in this adapter's names. The glue
 * translates them bit by bit to whatever values the linked policy library
 * uses, so these values are the adapter's own and carry no library ABI.
 */
#define MAELYS_WARDEN_POLICY_CAP_FS_READ (UINT64_C(1) << 0)
#define MAELYS_WARDEN_POLICY_CAP_FS_WRITE (UINT64_C(1) << 1)
#define MAELYS_WARDEN_POLICY_CAP_FS_DENY (UINT64_C(1) << 2)
#define MAELYS_WARDEN_POLICY_CAP_NETWORK_NONE (UINT64_C(1) << 3)
#define MAELYS_WARDEN_POLICY_CAP_NETWORK_DIRECT (UINT64_C(1) << 4)
#define MAELYS_WARDEN_POLICY_CAP_NETWORK_MEDIATED (UINT64_C(1) << 5)
/* Descendants inherit the confinement (MIR process_tree_required). */
#define MAELYS_WARDEN_POLICY_CAP_PROCESS_TREE (UINT64_C(1) << 6)
#define MAELYS_WARDEN_POLICY_CAP_ROOT_EPHEMERAL_WRITE (UINT64_C(1) << 7)
#define MAELYS_WARDEN_POLICY_CAP_ALL ((UINT64_C(1) << 8) - 1)

/*
 * Step 2 of the handshake: the portable capabilities a backend's proved
 * Executor mask supports, exactly:
 *
 *   FS_READ / FS_WRITE / FS_DENY   <- FILESYSTEM_READ / _WRITE / _DENY
 *   NETWORK_NONE                   <- NETWORK_NONE and NETWORK_NAMESPACE both
 *                                     (invariant 9: the namespace-only bit
 *                                     alone never gives it)
 *   NETWORK_DIRECT                 <- ROOT_READONLY (a backend that builds
 *                                     the filesystem view and can leave the
 *                                     host's network; POSIX proves nothing)
 *   NETWORK_MEDIATED               <- NETWORK_MEDIATED_FD4 or _EGRESS
 *   PROCESS_TREE                   <- PROCESS_CONFINEMENT (never the stronger
 *                                     Executor PROCESS_TREE lifecycle bit)
 *   ROOT_EPHEMERAL_WRITE           <- ROOT_EPHEMERAL_WRITE
 *
 * A bit outside MAELYS_BACKEND_CAP_ALL is an error naming it (fail closed on
 * a mask from a newer Executor than this adapter was built with).
 */
MAELYS_WARDEN_POLICY_API maelys_executor_result_t
maelys_warden_policy_capabilities_from_executor(uint64_t executor_mask,
                                                uint64_t* out_capabilities,
                                                char** out_error);

/* "fs-read", "network-none", ... for exactly one known bit; NULL otherwise. */
MAELYS_WARDEN_POLICY_API const char*
maelys_warden_policy_capability_name(uint64_t bit);

/* ---------------------------------------------------- resolved decisions */

typedef enum maelys_warden_policy_access {
  MAELYS_WARDEN_POLICY_ACCESS_READ = 1,
  MAELYS_WARDEN_POLICY_ACCESS_WRITE = 2, /* implies READ */
  MAELYS_WARDEN_POLICY_ACCESS_DENY = 3
} maelys_warden_policy_access_t;

typedef enum maelys_warden_policy_scope {
  MAELYS_WARDEN_POLICY_SCOPE_TREE = 1, /* the path and below */
  MAELYS_WARDEN_POLICY_SCOPE_EXACT = 2 /* exactly the path */
} maelys_warden_policy_scope_t;

/* What the resolved path is on the host when the decision is lowered. */
typedef enum maelys_warden_policy_node {
  MAELYS_WARDEN_POLICY_NODE_DIRECTORY = 1,
  MAELYS_WARDEN_POLICY_NODE_FILE = 2, /* anything that is not a directory */
  MAELYS_WARDEN_POLICY_NODE_ABSENT = 3
} maelys_warden_policy_node_t;

typedef struct maelys_warden_policy_rule {
  maelys_warden_policy_access_t access;
  maelys_warden_policy_scope_t scope;
  maelys_warden_policy_node_t node;
  const char* path; /* absolute, resolved host path */
} maelys_warden_policy_rule_t;

typedef enum maelys_warden_policy_network {
  MAELYS_WARDEN_POLICY_NETWORK_NONE = 1,
  MAELYS_WARDEN_POLICY_NETWORK_DIRECT = 2,
  MAELYS_WARDEN_POLICY_NETWORK_MEDIATED = 3
} maelys_warden_policy_network_t;

typedef enum maelys_warden_policy_protocol {
  MAELYS_WARDEN_POLICY_PROTOCOL_TCP = 1
} maelys_warden_policy_protocol_t;

typedef struct maelys_warden_policy_destination {
  maelys_warden_policy_protocol_t protocol;
  const char* host; /* canonical hostname */
  unsigned port;
} maelys_warden_policy_destination_t;

typedef enum maelys_warden_policy_root {
  MAELYS_WARDEN_POLICY_ROOT_READ_ONLY = 1,
  MAELYS_WARDEN_POLICY_ROOT_EPHEMERAL_WRITE = 2
} maelys_warden_policy_root_t;

/* A resolved policy decision (what a compiled sandbox-policy plan says),
 * every pointer borrowed. */
typedef struct maelys_warden_policy_decision {
  const maelys_warden_policy_rule_t* rules;
  size_t rule_count;
  maelys_warden_policy_network_t network;
  const maelys_warden_policy_destination_t* destinations;
  size_t destination_count;
  /* The trusted HostContext mediator identifier, for MEDIATED only. */
  const char* mediator_id;
  maelys_warden_policy_root_t root;
  /* MIR process_tree_required: descendants inherit the confinement. */
  int process_tree_required;
  /* The canonical MIR digest: 64 lowercase hex digits (SHA-256). */
  const char* mir_digest;
} maelys_warden_policy_decision_t;

/* --------------------------------------------------- trusted run options */

/*
 * Mechanical mounts the trusted run specification adds around the policy.
 * None of them exposes host content: every host path visible in the
 * sandbox comes from a policy rule.
 */
typedef enum maelys_warden_policy_mount_kind {
  MAELYS_WARDEN_POLICY_MOUNT_PROC = 1,    /* a procfs for the sandbox */
  MAELYS_WARDEN_POLICY_MOUNT_DEV = 2,     /* a minimal /dev */
  MAELYS_WARDEN_POLICY_MOUNT_TMPFS = 3,   /* a private tmpfs of size_bytes */
  MAELYS_WARDEN_POLICY_MOUNT_SYMLINK = 4, /* a link whose text is target */
  MAELYS_WARDEN_POLICY_MOUNT_DIR = 5      /* an empty directory */
} maelys_warden_policy_mount_kind_t;

typedef struct maelys_warden_policy_mount {
  maelys_warden_policy_mount_kind_t kind;
  const char* destination; /* absolute path inside the sandbox */
  const char* target;      /* SYMLINK only */
  uint64_t size_bytes;     /* TMPFS only */
} maelys_warden_policy_mount_t;

/* The trusted run specification: what the policy deliberately does not
 * carry. A NULL options pointer means all zero. */
typedef struct maelys_warden_policy_options {
  /* The scratch size of an EPHEMERAL_WRITE root (the execution request must
   * set the same value); must be 0 for a READ_ONLY root. Never taken from
   * the policy. */
  uint64_t scratch_bytes;
  /* The Executor's lifecycle promise (invariant 8): wait/stop cover an
   * adversarial descendant tree. Independent of the MIR flag. */
  int process_tree_required;
  const maelys_warden_policy_mount_t* mounts;
  size_t mount_count;
} maelys_warden_policy_options_t;

/* --------------------------------------------------------------- lowering */

/*
 * Copies every rule of `decision` into a new plan and seals it:
 *
 * - READ/WRITE on a directory with scope TREE -> a recursive-directory rule
 *   (a bind); on a file, TREE or EXACT -> a literal-file rule (a bind);
 * - DENY likewise -> the backend's final mode-000 overlay;
 * - EXACT on a directory (a literal-directory rule) and any rule on an ABSENT
 *   path (create-protection) are rejected with the rule named: bubblewrap
 *   mounts cannot represent them;
 * - two rules on one path merge by the policy's precedence (DENY over WRITE
 *   over READ); a grant inside a DENY tree is rejected (the deny overlay is
 *   laid last and would hide it);
 * - root READ_ONLY -> READONLY; EPHEMERAL_WRITE -> EPHEMERAL_WRITE with
 *   options->scratch_bytes;
 * - network NONE -> NONE, DIRECT -> INHERIT, MEDIATED -> MEDIATED with every
 *   TCP destination and the mediator, which must be one of the two IDs above;
 * - MIR process_tree_required -> a required PROCESS_CONFINEMENT capability;
 * - "sha256:" + mir_digest -> the plan's decision digest.
 *
 * Any unknown enumeration value is an error naming it. *out_sealed_plan is
 * new, sealed, and freed with maelys_executor_plan_destroy().
 */
MAELYS_WARDEN_POLICY_API maelys_executor_result_t maelys_warden_policy_lower(
    const maelys_warden_policy_decision_t* decision,
    const maelys_warden_policy_options_t* options,
    maelys_executor_plan_t** out_sealed_plan, char** out_error);

/*
 * A DENY rule of the source MIR, resolved against the host's roots: `path` is
 * the resolved host path, or NULL when the path is absent on the host. Sandbox
 * Policy ABI 4 drops an absent DENY from the compiled plan, so the plan alone
 * cannot show it; this check refuses when a source DENY has no DENY of the
 * same path and scope in the decision (an absent one, whose protection would
 * be create-protection, always).
 */
typedef struct maelys_warden_policy_source_deny {
  const char* name; /* how the source names it, for the diagnostic */
  const char* path; /* NULL: absent on the host */
  maelys_warden_policy_scope_t scope;
} maelys_warden_policy_source_deny_t;

MAELYS_WARDEN_POLICY_API maelys_executor_result_t
maelys_warden_policy_check_source_denies(
    const maelys_warden_policy_source_deny_t* denies, size_t deny_count,
    const maelys_warden_policy_decision_t* decision, char** out_error);

/* -------------------------------------------------------------- handshake */

/*
 * The capability handshake of seeds/001, as one object:
 *
 *   1. maelys_warden_policy_handshake_begin() queries the named backend's
 *      proved mask (maelys_executor_backend_capabilities) and
 *   2. converts it (maelys_warden_policy_capabilities_from_executor);
 *   3. the caller compiles the policy with
 *      maelys_warden_policy_handshake_capabilities() as the available set;
 *   4. the caller lowers the compiled plan;
 *   5. maelys_warden_policy_handshake_finish() refuses unless the backend
 *      name given for enforcement is the one checked in step 1, on the same
 *      executor, with the same proved mask and every capability the sealed
 *      plan requires, and then sets that name on the request.
 *
 * Nothing may set another backend on the request after step 5.
 */
typedef struct maelys_warden_policy_handshake maelys_warden_policy_handshake_t;

/* `executor` is borrowed and must outlive the handshake; the name is
 * copied. */
MAELYS_WARDEN_POLICY_API maelys_executor_result_t
maelys_warden_policy_handshake_begin(const maelys_executor_t* executor,
                                     const char* backend_name,
                                     maelys_warden_policy_handshake_t** out,
                                     char** out_error);

/* The converted (portable) capabilities of step 2. */
MAELYS_WARDEN_POLICY_API uint64_t maelys_warden_policy_handshake_capabilities(
    const maelys_warden_policy_handshake_t* handshake);

/* The Executor mask read in step 1. */
MAELYS_WARDEN_POLICY_API uint64_t maelys_warden_policy_handshake_executor_mask(
    const maelys_warden_policy_handshake_t* handshake);

/* The backend name of step 1; borrowed from the handshake. */
MAELYS_WARDEN_POLICY_API const char* maelys_warden_policy_handshake_backend(
    const maelys_warden_policy_handshake_t* handshake);

/* Step 5. `sealed_plan` and `executor` are borrowed; `request` gets the
 * backend name. MAELYS_EXECUTOR_ERR_DENIED when the name or executor differs
 * from step 1, MAELYS_EXECUTOR_ERR_STATE when the mask changed since,
 * MAELYS_EXECUTOR_ERR_CAPABILITY when the plan needs what was not proved. */
MAELYS_WARDEN_POLICY_API maelys_executor_result_t
maelys_warden_policy_handshake_finish(
    const maelys_warden_policy_handshake_t* handshake,
    const maelys_executor_t* executor, const char* backend_name,
    const maelys_executor_plan_t* sealed_plan,
    maelys_execution_request_t* request, char** out_error);

/* NULL is accepted. */
MAELYS_WARDEN_POLICY_API void
maelys_warden_policy_handshake_destroy(maelys_warden_policy_handshake_t* h);

/* ----------------------------------------------------- trusted host roots */

/*
 * The trusted HostContext of a policy compilation, in this adapter's terms.
 * The glue builds the library's HostContext from it and resolves the source
 * MIR's DENY rules against the same roots, so both come from one place.
 */
typedef struct maelys_warden_policy_host {
  const char* workspace; /* NULL: none */
  const char* temp;      /* NULL: none */
  const char* const* minimal_runtime_roots;
  size_t minimal_runtime_root_count;
  /* NULL, or MAELYS_WARDEN_POLICY_FD4_MEDIATOR_ID or _EGRESS_MEDIATOR_ID. */
  const char* mediator_id;
} maelys_warden_policy_host_t;

#ifdef __cplusplus
}
#endif

#endif /* MAELYS_WARDEN_POLICY_H */
