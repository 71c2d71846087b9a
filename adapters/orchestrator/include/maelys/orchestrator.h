/*
 * Maelys Orchestrator adapter: agent specifications, and the boundary-crossing
 * approval workflow, on top of the public API of Maelys Executor alone.
 *
 * The adapter is mechanism, not policy. A policy decision point (outside this
 * library) produces an agent specification; maelys_orchestrator_prepare turns
 * it into a request and a sealed plan. A session keeps the authority record
 * (the ExecutionBoundary: the active sealed plan, its digest, the decisions so
 * far) and makes the six steps of a boundary crossing mechanical:
 *
 *   1. detect   maelys_orchestrator_boundary_allows_*()  -> a check: allowed,
 *               boundary-required (with the smallest expansion the backend can
 *               express), or refused (nothing can be granted);
 *   2. raise    maelys_orchestrator_session_request_boundary() -> an event in
 *               a stable JSON form to the host's callback;
 *   3. pause    the operation is not spawned; the session refuses other
 *               operations until the decision;
 *   4. decide   maelys_orchestrator_session_decide(): approve or deny,
 *               recorded with its id, time, the expansion's digest, the
 *               outcome and who decided;
 *   5. run      on approval a new plan (active + expansion) is sealed and the
 *               operation runs under it on the same backend name;
 *   6. return   the result comes back like any execution's; its receipt
 *               carries the decision id and the previous plan digest, in the
 *               session's receipt chain.
 *
 * Conventions are those of maelys/executor.h: a maelys_executor_result_t and
 * an optional `char** out_error` (NULL on entry, freed with
 * maelys_executor_error_free()); outputs cleared on entry; strings copied
 * unless "borrowed". Sessions are used from the thread of the executor's loop.
 */
#ifndef MAELYS_ORCHESTRATOR_H
#define MAELYS_ORCHESTRATOR_H

#include <stddef.h>
#include <stdint.h>

#include "maelys/executor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MAELYS_ORCHESTRATOR_ABI_VERSION 1
/* The JSON form of an agent specification (adapters/orchestrator/docs). */
#define MAELYS_ORCHESTRATOR_SPEC_FORMAT "maelys-agent-spec/1"

/* ------------------------------------------------------------------ spec */

typedef struct maelys_orchestrator_spec maelys_orchestrator_spec_t;

/* How the host reaches the agent. */
typedef enum maelys_orchestrator_endpoint {
  /* stdin, stdout and stderr are pipes (MAELYS_EXEC_IO_CAPTURED). */
  MAELYS_ORCHESTRATOR_ENDPOINT_CAPTURED = 1,
  /* stdin and stdout are one socket (MAELYS_EXEC_IO_DUPLEX_STDIO). */
  MAELYS_ORCHESTRATOR_ENDPOINT_DUPLEX_STDIO = 2
} maelys_orchestrator_endpoint_t;

/* What the system runtime of the sandbox is. */
typedef enum maelys_orchestrator_runtime {
  /* /usr, /bin, /lib*, the few files of /etc a program needs, read-only;
   * /proc, a minimal /dev and a private 256 MiB /tmp (the default). */
  MAELYS_ORCHESTRATOR_RUNTIME_SYSTEM = 1,
  /* Nothing but what the spec lists. */
  MAELYS_ORCHESTRATOR_RUNTIME_NONE = 2
} maelys_orchestrator_runtime_t;

typedef enum maelys_orchestrator_limit {
  /* Per process (setrlimit in the sandbox). */
  MAELYS_ORCHESTRATOR_LIMIT_CPU_SECONDS = 1,
  MAELYS_ORCHESTRATOR_LIMIT_FILE_SIZE = 2,     /* bytes */
  MAELYS_ORCHESTRATOR_LIMIT_OPEN_FILES = 3,    /* descriptors */
  MAELYS_ORCHESTRATOR_LIMIT_ADDRESS_SPACE = 4, /* bytes */
  MAELYS_ORCHESTRATOR_LIMIT_CORE_SIZE = 5,     /* bytes */
  /* Sandbox-wide: refused with MAELYS_EXECUTOR_ERR_UNSUPPORTED by this build
   * (no plan field expresses them yet). */
  MAELYS_ORCHESTRATOR_LIMIT_TASKS = 6,
  MAELYS_ORCHESTRATOR_LIMIT_MEMORY = 7, /* bytes */
  /* The host stops the agent (gracefully, then by force) after this many
   * milliseconds. */
  MAELYS_ORCHESTRATOR_LIMIT_WALL_TIME_MS = 8
} maelys_orchestrator_limit_t;

MAELYS_EXECUTOR_API maelys_executor_result_t maelys_orchestrator_spec_create(
    maelys_orchestrator_spec_t** out_spec, char** out_error);
MAELYS_EXECUTOR_API void
maelys_orchestrator_spec_destroy(maelys_orchestrator_spec_t* spec);

/* Absolute path of the agent's program. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_spec_set_executable(maelys_orchestrator_spec_t* spec,
                                        const char* path, char** out_error);
/* argv, argv[0] included, NULL-terminated; default {executable}. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_spec_set_argv(maelys_orchestrator_spec_t* spec,
                                  const char* const* argv, char** out_error);
/* The approved workspace (absolute, clean), read-only or writable; it is the
 * working directory. Required. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_spec_set_workspace(maelys_orchestrator_spec_t* spec,
                                       const char* path, int writable,
                                       char** out_error);
/* Further host paths (absolute, clean, existing at launch) the agent may
 * write, read, or never see; directories with what is below them, or single
 * files. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_spec_add_writable(maelys_orchestrator_spec_t* spec,
                                      const char* path, char** out_error);
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_spec_add_readable(maelys_orchestrator_spec_t* spec,
                                      const char* path, char** out_error);
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_spec_add_denied(maelys_orchestrator_spec_t* spec,
                                    const char* path, char** out_error);
/* A private, empty, size-limited writable directory at `path` inside the
 * sandbox (a tmpfs): the agent's own state, gone with the sandbox. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_spec_add_private(maelys_orchestrator_spec_t* spec,
                                     const char* path, uint64_t size_bytes,
                                     char** out_error);
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_spec_set_runtime(maelys_orchestrator_spec_t* spec,
                                     maelys_orchestrator_runtime_t runtime,
                                     char** out_error);
/* One explicit environment entry; a name given twice is refused. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_spec_set_environment(maelys_orchestrator_spec_t* spec,
                                         const char* name, const char* value,
                                         char** out_error);
/* A name whose value is taken from `host_environ` at prepare time (absent
 * there: left out). Nothing else of the host's environment passes. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_spec_pass_environment(maelys_orchestrator_spec_t* spec,
                                          const char* name, char** out_error);
/* MAELYS_EXECUTOR_NETWORK_NONE or _INHERIT; required (never defaulted). */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_spec_set_network(maelys_orchestrator_spec_t* spec,
                                     maelys_executor_network_t mode,
                                     char** out_error);
/* `value` for `limit`; MAELYS_EXECUTOR_RLIMIT_INFINITY is "unlimited". */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_orchestrator_spec_set_limit(
    maelys_orchestrator_spec_t* spec, maelys_orchestrator_limit_t limit,
    uint64_t value, char** out_error);
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_spec_set_endpoint(maelys_orchestrator_spec_t* spec,
                                      maelys_orchestrator_endpoint_t endpoint,
                                      char** out_error);
/* The backend that enforces the plan; default "bubblewrap". */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_spec_set_backend(maelys_orchestrator_spec_t* spec,
                                     const char* name, char** out_error);

/* A spec from its JSON form. Unknown members, wrong types and invalid values
 * are refused with the JSON path at fault ("$.limits.tasks: ..."). */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_orchestrator_spec_from_json(
    const char* json, size_t length, maelys_orchestrator_spec_t** out_spec,
    char** out_error);
/* A spec from a file, refused when a sandbox could have written or planted it
 * (invariant 18): a symbolic link in any component, a file or ancestor
 * writable by group or others, a file not owned by the caller or root, or a
 * file inside a path the spec itself makes writable. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_orchestrator_spec_load_file(
    const char* path, maelys_orchestrator_spec_t** out_spec, char** out_error);

/* Read access (borrowed). */
MAELYS_EXECUTOR_API const char*
maelys_orchestrator_spec_backend(const maelys_orchestrator_spec_t* spec);
MAELYS_EXECUTOR_API maelys_orchestrator_endpoint_t
maelys_orchestrator_spec_endpoint(const maelys_orchestrator_spec_t* spec);
/* The wall time in ms, 0 when none. */
MAELYS_EXECUTOR_API uint64_t
maelys_orchestrator_spec_wall_time_ms(const maelys_orchestrator_spec_t* spec);
/* Whether `path` lies inside a path the spec makes writable (the workspace
 * when writable, the writable paths). */
MAELYS_EXECUTOR_API int
maelys_orchestrator_spec_writes(const maelys_orchestrator_spec_t* spec,
                                const char* path);

/*
 * The request (executable, argv, the closed environment, cwd = the
 * workspace, io mode of the endpoint, backend name) and the SEALED plan of
 * `spec`: a read-only root, the runtime, the workspace and paths as rules,
 * private directories, the network mode set explicitly, the per-process
 * limits. The environment of `host_environ` (NULL-terminated "NAME=VALUE",
 * may be NULL) supplies the passed names. Nothing is evaluated: the spec is
 * the decision. Free the outputs with maelys_execution_request_destroy and
 * maelys_executor_plan_destroy.
 */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_orchestrator_prepare(
    const maelys_orchestrator_spec_t* spec, const char* const* host_environ,
    maelys_execution_request_t** out_request, maelys_executor_plan_t** out_plan,
    char** out_error);

/* ------------------------------------------------------ boundary checks */

typedef struct maelys_orchestrator_boundary maelys_orchestrator_boundary_t;
typedef struct maelys_orchestrator_check maelys_orchestrator_check_t;
typedef struct maelys_orchestrator_expansion maelys_orchestrator_expansion_t;

typedef enum maelys_orchestrator_verdict {
  MAELYS_ORCHESTRATOR_ALLOWED = 0,
  /* Not allowed; the check carries the smallest expansion that would allow
   * it. */
  MAELYS_ORCHESTRATOR_BOUNDARY_REQUIRED = 1,
  /* Not allowed, and no expansion can allow it (a DENY rule, a path the
   * backend never binds, a path that does not exist to be read, ...). */
  MAELYS_ORCHESTRATOR_REFUSED = 2
} maelys_orchestrator_verdict_t;

/* An authority record over `plan` (consumed: sealed, the boundary owns it;
 * destroyed on failure too) enforced by the backend `backend`. Sessions make
 * their own; this is for hosts and tests that only ask questions. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_boundary_create(maelys_executor_plan_t* plan,
                                    const char* backend,
                                    maelys_orchestrator_boundary_t** out,
                                    char** out_error);
MAELYS_EXECUTOR_API void
maelys_orchestrator_boundary_destroy(maelys_orchestrator_boundary_t* boundary);

/* The active sealed plan (borrowed: valid until the next approval) and its
 * digest (borrowed). */
MAELYS_EXECUTOR_API const maelys_executor_plan_t*
maelys_orchestrator_boundary_plan(const maelys_orchestrator_boundary_t* b);
MAELYS_EXECUTOR_API const char*
maelys_orchestrator_boundary_digest(const maelys_orchestrator_boundary_t* b);
/* The record as JSON: backend, active digest, the plan digests in order, the
 * decisions so far. Free with maelys_executor_string_free(). */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_boundary_to_json(const maelys_orchestrator_boundary_t* b,
                                     char** out_json, char** out_error);

/*
 * Whether the payload may read or write `path` (absolute; "..", "." and
 * symbolic links are resolved the way the kernel would inside the sandbox,
 * and links on the host when the path leaves the sandbox's view), or open a
 * TCP connection to host:port, under the active plan. *out_check is always
 * set on MAELYS_EXECUTOR_OK; free it with maelys_orchestrator_check_destroy.
 */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_boundary_allows_read(
    const maelys_orchestrator_boundary_t* b, const char* path,
    maelys_orchestrator_check_t** out_check, char** out_error);
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_boundary_allows_write(
    const maelys_orchestrator_boundary_t* b, const char* path,
    maelys_orchestrator_check_t** out_check, char** out_error);
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_boundary_allows_connect(
    const maelys_orchestrator_boundary_t* b, const char* host, unsigned port,
    maelys_orchestrator_check_t** out_check, char** out_error);
/* A whole request: its executable is readable and its working directory
 * visible. (A session sets the request's backend to the boundary's own, so
 * the capability check and the enforcement use the same name, invariant 2;
 * the public API has no getter for a request's backend to compare.) */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_boundary_allows_request(
    const maelys_orchestrator_boundary_t* b,
    const maelys_execution_request_t* request,
    maelys_orchestrator_check_t** out_check, char** out_error);

MAELYS_EXECUTOR_API maelys_orchestrator_verdict_t
maelys_orchestrator_check_verdict(const maelys_orchestrator_check_t* check);
/* Why (borrowed). */
MAELYS_EXECUTOR_API const char*
maelys_orchestrator_check_reason(const maelys_orchestrator_check_t* check);
/* The expansion for BOUNDARY_REQUIRED, NULL otherwise (borrowed). */
MAELYS_EXECUTOR_API const maelys_orchestrator_expansion_t*
maelys_orchestrator_check_expansion(const maelys_orchestrator_check_t* check);
/* {"verdict", "checks": [{"operation", "asked", "resolved", "verdict",
 * "reason"}], "expansion"}. Free with maelys_executor_string_free(). */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_check_to_json(const maelys_orchestrator_check_t* check,
                                  char** out_json, char** out_error);
MAELYS_EXECUTOR_API void
maelys_orchestrator_check_destroy(maelys_orchestrator_check_t* check);

/* The expansion's canonical JSON ("maelys-boundary-expansion/1": the base
 * plan digest, the backend, the grants with their scope and reason, the
 * network change) and its digest ("sha256:..." of that text); borrowed. */
MAELYS_EXECUTOR_API const char* maelys_orchestrator_expansion_json(
    const maelys_orchestrator_expansion_t* expansion);
MAELYS_EXECUTOR_API const char* maelys_orchestrator_expansion_digest(
    const maelys_orchestrator_expansion_t* expansion);

/* ------------------------------------------------------------ operations */

/* One operation the host declares before it runs: a request (a tool call, a
 * command) and what it will touch. */
typedef struct maelys_orchestrator_operation maelys_orchestrator_operation_t;

/* `request` is consumed (destroyed on failure too); its backend, receipt
 * directory, chain and context are set by the session. `name` is the host's
 * label ("write_file"). */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_operation_create(const char* name,
                                     maelys_execution_request_t* request,
                                     maelys_orchestrator_operation_t** out,
                                     char** out_error);
MAELYS_EXECUTOR_API void
maelys_orchestrator_operation_destroy(maelys_orchestrator_operation_t* op);
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_operation_declare_read(maelys_orchestrator_operation_t* op,
                                           const char* path, char** out_error);
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_operation_declare_write(maelys_orchestrator_operation_t* op,
                                            const char* path, char** out_error);
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_operation_declare_connect(
    maelys_orchestrator_operation_t* op, const char* host, unsigned port,
    char** out_error);
/* Stop it (gracefully, then by force) after `ms` milliseconds; 0: never. */
/* A JSON object of the host's (what it protected, for one) that the receipt
 * of this operation carries in its context under "host", beside what the
 * session records there. Anything but a JSON object is refused. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_operation_set_host_context(
    maelys_orchestrator_operation_t* op, const char* json_object,
    char** out_error);
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_operation_set_wall_time(maelys_orchestrator_operation_t* op,
                                            uint64_t ms, char** out_error);
/* Called once the execution started (the execution is borrowed until the
 * result callback returned): the place to take its streams. */
typedef void (*maelys_orchestrator_start_cb)(
    maelys_orchestrator_operation_t* op, maelys_execution_t* execution,
    void* data);
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_operation_set_start_cb(maelys_orchestrator_operation_t* op,
                                           maelys_orchestrator_start_cb cb,
                                           void* data, char** out_error);
/* "op-N" once the operation was handed to a session, else ""; borrowed. */
MAELYS_EXECUTOR_API const char*
maelys_orchestrator_operation_id(const maelys_orchestrator_operation_t* op);
MAELYS_EXECUTOR_API const char*
maelys_orchestrator_operation_name(const maelys_orchestrator_operation_t* op);

/* -------------------------------------------------------------- sessions */

typedef struct maelys_orchestrator_session maelys_orchestrator_session_t;

typedef enum maelys_orchestrator_result_kind {
  MAELYS_ORCHESTRATOR_RESULT_RAN = 1,    /* status and receipt are set */
  MAELYS_ORCHESTRATOR_RESULT_DENIED = 2, /* the decision denied it: never ran */
  MAELYS_ORCHESTRATOR_RESULT_FAILED = 3  /* could not be spawned: message */
} maelys_orchestrator_result_kind_t;

/* Valid only during the callback. */
typedef struct maelys_orchestrator_result {
  maelys_orchestrator_result_kind_t kind;
  const char* operation_id;
  const char* operation_name;
  const maelys_execution_status_t* status; /* RAN */
  const char* receipt_json;                /* RAN */
  const char* receipt_path;                /* RAN */
  const char* plan_digest;                 /* the plan it ran (or not) under */
  const char* decision_id;                 /* NULL without a decision */
  const char* message;                     /* DENIED, FAILED */
  int wall_time_expired;
} maelys_orchestrator_result_t;

typedef void (*maelys_orchestrator_result_cb)(
    maelys_orchestrator_session_t* session,
    const maelys_orchestrator_result_t* result, void* data);

/* Events in their stable JSON form ("boundary-required",
 * "boundary-decided"); `json` is borrowed for the call. */
typedef void (*maelys_orchestrator_event_cb)(
    maelys_orchestrator_session_t* session, const char* json, void* data);

/*
 * A session on `executor` (borrowed; the backend must be registered), whose
 * loop is `loop` (borrowed; the wall-time timers run there), whose
 * boundary starts at `plan` (consumed; sealed) on backend `backend`. Every
 * execution's receipt goes to `receipt_dir` (absolute, outside anything the
 * plans make writable) in the receipt chain named after the session id.
 */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_orchestrator_session_create(
    uv_loop_t* loop, maelys_executor_t* executor, maelys_executor_plan_t* plan,
    const char* backend, const char* receipt_dir,
    maelys_orchestrator_session_t** out_session, char** out_error);
/* Releases running executions (never signals them) and frees the session;
 * a session that was not closed leaves its chain without its closing record.
 */
MAELYS_EXECUTOR_API void
maelys_orchestrator_session_destroy(maelys_orchestrator_session_t* session);
/* 32 hex digits; borrowed. */
MAELYS_EXECUTOR_API const char*
maelys_orchestrator_session_id(const maelys_orchestrator_session_t* session);
MAELYS_EXECUTOR_API const maelys_orchestrator_boundary_t*
maelys_orchestrator_session_boundary(
    const maelys_orchestrator_session_t* session);
MAELYS_EXECUTOR_API void
maelys_orchestrator_session_set_event_cb(maelys_orchestrator_session_t* session,
                                         maelys_orchestrator_event_cb cb,
                                         void* data);

/* Step 1 for an operation: every declared access and the request itself
 * against the active plan, one combined expansion. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_orchestrator_session_check(
    maelys_orchestrator_session_t* session,
    const maelys_orchestrator_operation_t* op,
    maelys_orchestrator_check_t** out_check, char** out_error);

/* Runs `op` (consumed) now under the active plan when the check allows it.
 * MAELYS_EXECUTOR_ERR_DENIED (boundary required or refused, nothing ran) or
 * MAELYS_EXECUTOR_ERR_STATE (the session waits for a decision) otherwise. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_orchestrator_session_run(
    maelys_orchestrator_session_t* session, maelys_orchestrator_operation_t* op,
    maelys_orchestrator_result_cb cb, void* data, char** out_error);

/* Steps 2 and 3: raises a boundary request for `op` (consumed) with
 * `expansion`, which must be exactly the one the check of `op` against the
 * active plan computes (its digest is compared). The event goes to the event
 * callback before this returns; nothing runs, and the session refuses other
 * operations until the decision. *out_request_id (may be NULL) receives the
 * request id (free with maelys_executor_string_free). */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_orchestrator_session_request_boundary(
    maelys_orchestrator_session_t* session, maelys_orchestrator_operation_t* op,
    const maelys_orchestrator_expansion_t* expansion,
    maelys_orchestrator_result_cb cb, void* data, char** out_request_id,
    char** out_error);

/* Steps 4-6: the host's decision on the pending request `request_id` (from
 * any callback of the loop). `decided_by` is the host's opaque label of who
 * decided. A denial is recorded, leaves the boundary unchanged and reports
 * DENIED to the operation's callback before this returns. An approval seals
 * a new plan (the active one plus the expansion), makes it active and runs
 * the operation under it on the same backend; its receipt carries the
 * decision id and the previous plan digest. *out_decision_id may be NULL. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_orchestrator_session_decide(
    maelys_orchestrator_session_t* session, const char* request_id, int approve,
    const char* decided_by, char** out_decision_id, char** out_error);

/* Whether a boundary request waits for its decision. */
MAELYS_EXECUTOR_API int
maelys_orchestrator_session_paused(const maelys_orchestrator_session_t* s);

/* Stops every running operation gracefully then by force (their results
 * follow). */
MAELYS_EXECUTOR_API void
maelys_orchestrator_session_stop(maelys_orchestrator_session_t* session);

/* Writes the closing record of the session's receipt chain. STATE while an
 * operation runs or a request waits. *out_path may be NULL. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_orchestrator_session_close(
    maelys_orchestrator_session_t* session, char** out_path, char** out_error);

#ifdef __cplusplus
}
#endif

#endif /* MAELYS_ORCHESTRATOR_H */
