/*
 * The MCP Runtime launcher adapter: every process mcp-runtime starts (native
 * maelys-provider children and mcp-proxy upstreams alike) launched through
 * Maelys Executor, under a sealed plan that a trusted profile resolver
 * produced, never unconfined by default.
 *
 * mcp-runtime calls its launcher (include/maelys/mcp/process_launcher.h in
 * that project) from its own pthreads. The Executor is single-threaded and
 * lives on a libuv loop; this adapter gives it a private loop thread (the
 * "host") and carries every launcher operation across with uv_async, each
 * wait bounded. The adapter is the only component that includes both public
 * APIs; nothing here parses or buffers MCP frames (invariant 12).
 *
 * Conventions are the Executor's (include/maelys/executor.h): a fallible
 * call returns a maelys_executor_result_t and takes an optional last
 * `char** out_error` that must point to NULL on entry; free what it receives
 * with maelys_mcp_executor_error_free().
 */
#ifndef MAELYS_MCP_EXECUTOR_H
#define MAELYS_MCP_EXECUTOR_H

#include <stddef.h>

#include "maelys/executor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The mcp-runtime launcher ABIs this adapter implements. The one it is built
 * for is the pin's (adapters/mcp-runtime/MCP_RUNTIME_PIN), checked against
 * the checkout at configure time. ABI 6 (mcp-runtime v0.23.0) keeps ABI 5's
 * signatures and adds two permissions for a confining profile: environment
 * entries added to the runtime's closed environment (never replacing one of
 * its entries), and explicit channels at child descriptors 4 and up. */
#define MAELYS_MCP_EXECUTOR_RUNTIME_ABI_MIN 5
#define MAELYS_MCP_EXECUTOR_RUNTIME_ABI_MAX 6

/* The only environment platform token implemented: the runtime's
 * MAELYS_MCP_PROCESS_ENVIRONMENT_PLATFORM_LOCAL. */
#define MAELYS_MCP_EXECUTOR_PLATFORM_LOCAL "local"

/* Frees a diagnostic this adapter returned. NULL is accepted. */
void maelys_mcp_executor_error_free(char* error);

/* ------------------------------------------------------------- the spec */

/* The runtime's descriptor arrangement (its maelys_mcp_process_fd_layout_t,
 * same values). */
typedef enum maelys_mcp_executor_layout {
  /* fd 0 and 1 the protocol socket, fd 2 inherited: stock MCP stdio. */
  MAELYS_MCP_EXECUTOR_LAYOUT_STDIO = 0,
  /* fd 0 /dev/null, fd 1 = fd 2 (inherited), fd 3 the protocol socket. */
  MAELYS_MCP_EXECUTOR_LAYOUT_ISOLATED = 1
} maelys_mcp_executor_layout_t;

/* The runtime's stop rungs (its maelys_mcp_process_stop_t, same values). */
typedef enum maelys_mcp_executor_stop {
  MAELYS_MCP_EXECUTOR_STOP_GRACEFUL = 0, /* the graceful signal only */
  MAELYS_MCP_EXECUTOR_STOP_FORCED = 1    /* kill the whole tree now */
} maelys_mcp_executor_stop_t;

/* How a child ended (the runtime's maelys_mcp_process_exit_status_t). */
typedef struct maelys_mcp_executor_exit {
  int exited; /* 1 once termination was observed */
  int exit_code;
  int term_signal;
} maelys_mcp_executor_exit_t;

/*
 * The runtime's complete process specification, copied out of its request
 * during spawn. Everything is borrowed for the duration of the call that
 * receives it (a resolver copies what it keeps).
 */
typedef struct maelys_mcp_executor_spec {
  const char* executable;  /* absolute */
  const char* const* argv; /* the complete vector, argv[0] included */
  size_t argc;             /* >= 1 */
  const char* profile;     /* the execution profile; NULL: none named */
  maelys_mcp_executor_layout_t layout;
  /* The runtime's closed environment, in its order, no duplicate names. */
  const char* const* env_names;
  const char* const* env_values;
  size_t env_count;
  const char* platform; /* the environment platform token */
  unsigned spawn_timeout_ms;
  unsigned grace_timeout_ms;
  unsigned force_timeout_ms;
} maelys_mcp_executor_spec_t;

/* ---------------------------------------------------------- resolution */

/*
 * What a profile resolves to: a sealed plan, the backend that enforces it,
 * and optionally a working directory and (launcher ABI 6 only) environment
 * additions and channels. Filled by the resolver through the setters below;
 * the adapter owns it.
 */
typedef struct maelys_mcp_executor_resolution maelys_mcp_executor_resolution_t;

/* `*plan` is consumed (set to NULL) on success and on failure; it must be
 * sealed. `backend` is copied. Setting a plan twice is
 * MAELYS_EXECUTOR_ERR_STATE. */
maelys_executor_result_t maelys_mcp_executor_resolution_set_plan(
    maelys_mcp_executor_resolution_t* resolution, maelys_executor_plan_t** plan,
    const char* backend, char** out_error);

/* The payload's working directory (absolute; copied). Default "/". */
maelys_executor_result_t
maelys_mcp_executor_resolution_set_cwd(maelys_mcp_executor_resolution_t* res,
                                       const char* path, char** out_error);

/* An environment entry the profile adds (copied). Recorded here; the launch
 * refuses it under launcher ABI 5, and under ABI 6 when `name` is one of the
 * runtime's own entries (an addition never replaces a base entry). */
maelys_executor_result_t maelys_mcp_executor_resolution_add_environment(
    maelys_mcp_executor_resolution_t* res, const char* name, const char* value,
    char** out_error);

/* A channel the profile installs at `child_fd` (>= 4): *host_fd is consumed
 * (set to -1) on success and on failure. The plan must authorise it
 * (maelys_executor_plan_add_channel). Refused at launch under ABI 5. */
maelys_executor_result_t maelys_mcp_executor_resolution_add_channel(
    maelys_mcp_executor_resolution_t* res, int child_fd, int* host_fd,
    char** out_error);

/*
 * The trusted host's profile resolver. `profile` is the runtime's execution
 * profile (NULL when the manifest names none: the resolver decides what its
 * default is, or refuses). Return MAELYS_EXECUTOR_OK after setting a plan,
 * or an error with a diagnostic: an unknown or refused profile is an error,
 * never an unconfined launch. Called on the runtime's threads, possibly
 * concurrently: it must be thread-safe.
 */
typedef maelys_executor_result_t (*maelys_mcp_executor_resolve_fn)(
    void* data, const char* profile, const maelys_mcp_executor_spec_t* spec,
    maelys_mcp_executor_resolution_t* resolution, char** out_error);

typedef struct maelys_mcp_executor_resolver {
  maelys_mcp_executor_resolve_fn resolve;
  /* Called once with the resolver's data when the launcher that owns it is
   * freed; may be NULL. */
  void (*release)(void* data);
} maelys_mcp_executor_resolver_t;

/* ------------------------------------------------------ profile registry */

/*
 * A ready-made resolver: a registry of named profiles read from a JSON
 * document ("maelys-mcp-profiles/1") that the distribution owns:
 *
 *   {"format": "maelys-mcp-profiles/1",
 *    "default": "sandboxed",            optional: the profile for none named
 *    "profiles": {"sandboxed": {"backend": "bubblewrap",
 *                               "cwd": "/",                        optional
 *                               "environment": [{"name": "N",      optional,
 *                                                "value": "V"}],   ABI 6 only
 *                               "plan": {maelys-executor-plan/1}}}}
 *
 * Every plan is read and sealed once here, so a bad document fails now, and
 * again for each launch (a sealed plan is never shared across threads).
 * Without "default", a launch that names no profile is refused. The JSON is
 * borrowed. `runtime_abi` is the launcher ABI the registry serves:
 * environment additions are refused under 5.
 */
typedef struct maelys_mcp_executor_registry maelys_mcp_executor_registry_t;

maelys_executor_result_t maelys_mcp_executor_registry_create(
    const char* json, size_t length, unsigned runtime_abi,
    maelys_mcp_executor_registry_t** out_registry, char** out_error);

/* NULL is accepted. */
void maelys_mcp_executor_registry_destroy(
    maelys_mcp_executor_registry_t* registry);

/* Checks, on the executor's thread (a host's setup), that every profile's
 * backend is registered and proved every capability its plan needs: a
 * registry that cannot be enforced here fails the host now, rather than
 * each launch later. */
maelys_executor_result_t
maelys_mcp_executor_registry_check(const maelys_mcp_executor_registry_t* reg,
                                   const maelys_executor_t* executor,
                                   char** out_error);

/* The registry's resolver; its data is the registry, which release
 * destroys. */
const maelys_mcp_executor_resolver_t*
maelys_mcp_executor_registry_resolver(void);

/* ---------------------------------------------------------------- host */

/*
 * The private loop thread: a uv loop and an Executor on it. `setup` runs on
 * that thread once, with the new Executor, and registers the backends the
 * host permits (maelys_executor_register_backend); an error from it fails
 * the creation. The thread blocks every signal, so the embedder's handlers
 * never run on it. Reference counted: each launcher holds one. Stopping the
 * thread never signals a child (released children still running are reaped
 * in the background).
 */
typedef struct maelys_mcp_executor_host maelys_mcp_executor_host_t;

typedef maelys_executor_result_t (*maelys_mcp_executor_setup_fn)(
    maelys_executor_t* executor, void* data, char** out_error);

/* The setup runs now (its failure fails the creation) and again each time
 * the loop thread starts: the thread runs only while executions exist, so an
 * idle host holds no thread and no descriptor. `data` is borrowed for the
 * host's whole life. */
maelys_executor_result_t
maelys_mcp_executor_host_create(maelys_mcp_executor_setup_fn setup, void* data,
                                maelys_mcp_executor_host_t** out_host,
                                char** out_error);

void maelys_mcp_executor_host_retain(maelys_mcp_executor_host_t* host);
/* NULL is accepted. Bounded: waits at most a few seconds for the thread. */
void maelys_mcp_executor_host_release(maelys_mcp_executor_host_t* host);

/* ------------------------------------------------------------ launcher */

/* mcp-runtime's opaque launcher (a repeated typedef of the same type is
 * valid C11, so this header does not need the runtime's). */
typedef struct maelys_mcp_process_launcher maelys_mcp_process_launcher_t;

/*
 * A launcher, named "maelys-executor", whose four operations map onto the
 * Executor on `host` (retained). `resolver` is copied; `resolver_data` is
 * owned by the launcher on success (resolver->release runs when its last
 * reference goes) and stays the caller's on failure. *out_launcher holds one
 * reference: release it with maelys_mcp_process_launcher_release().
 * Only built against an mcp-runtime checkout (MCP_RUNTIME_DIR).
 */
maelys_executor_result_t maelys_mcp_executor_launcher_create(
    maelys_mcp_executor_host_t* host,
    const maelys_mcp_executor_resolver_t* resolver, void* resolver_data,
    maelys_mcp_process_launcher_t** out_launcher, char** out_error);

#ifdef __cplusplus
}
#endif

#endif /* MAELYS_MCP_EXECUTOR_H */
