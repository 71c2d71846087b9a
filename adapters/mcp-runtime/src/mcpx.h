/* The adapter's internals: the pure conversion and mapping functions (over
 * this project's own types, unit-tested without the runtime) and the private
 * loop thread's instance operations. Not installed. */
#ifndef MAELYS_MCPX_H
#define MAELYS_MCPX_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "maelys/mcp-executor.h"

/* ------------------------------------------------------------- errors */

/* Sets *out_error (when out_error is not NULL) to a formatted diagnostic and
 * returns `result`. */
maelys_executor_result_t maelys__mcpx_fail(char** out_error,
                                           maelys_executor_result_t result,
                                           const char* format, ...)
    __attribute__((format(printf, 3, 4)));

/* Like maelys__mcpx_fail, followed by ": " and `cause` (an Executor
 * diagnostic, which this frees with maelys_executor_error_free). */
maelys_executor_result_t
maelys__mcpx_fail_with(char** out_error, maelys_executor_result_t result,
                       char* cause, const char* format, ...)
    __attribute__((format(printf, 4, 5)));

char* maelys__mcpx_strdup(const char* s);

/* ---------------------------------------------------------- resolution */

typedef struct maelys__mcpx_channel {
  int child_fd;
  int host_fd;
} maelys__mcpx_channel_t;

struct maelys_mcp_executor_resolution {
  maelys_executor_plan_t* plan;
  char* backend;
  char* cwd;
  char** env_names;
  char** env_values;
  size_t env_count;
  maelys__mcpx_channel_t* channels;
  size_t channel_count;
};

void maelys__mcpx_resolution_init(maelys_mcp_executor_resolution_t* res);
/* Frees what the resolution still owns (its plan, channel descriptors). */
void maelys__mcpx_resolution_clear(maelys_mcp_executor_resolution_t* res);

/* ----------------------------------------------------- pure conversions */

/* The Executor io mode and protocol child fd for a runtime layout. */
maelys_executor_result_t
maelys__mcpx_io_mode(maelys_mcp_executor_layout_t layout,
                     maelys_exec_io_mode_t* out_mode, int* out_child_fd,
                     char** out_error);

/* GRACEFUL -> the graceful signal only; FORCED -> the forced kill of the
 * whole tree. Never GRACEFUL_THEN_FORCED: the runtime runs its own ladder. */
maelys_executor_result_t
maelys__mcpx_stop_mode(maelys_mcp_executor_stop_t stop,
                       maelys_execution_stop_mode_t* out_mode,
                       char** out_error);

/* The runtime's exit status for an Executor status. */
void maelys__mcpx_exit_status(const maelys_execution_status_t* status,
                              maelys_mcp_executor_exit_t* out_exit);

/* The network mode of a sealed plan, read from its public JSON form. */
maelys_executor_result_t
maelys__mcpx_plan_network(const maelys_executor_plan_t* plan,
                          maelys_executor_network_t* out_mode,
                          char** out_error);

/* A runtime stop budget as an Executor one (1..3600000 ms). */
unsigned maelys__mcpx_budget_ms(unsigned runtime_ms);

/*
 * The complete conversion: the runtime's spec plus the profile's resolution
 * into an Executor request, under launcher ABI `abi` (5 or 6). Checks the
 * platform token, the plan (present, sealed, not EXTERNAL_CHANNEL) and the
 * environment and channel rules of that ABI. On success the channel
 * descriptors move from the resolution into the request.
 */
maelys_executor_result_t
maelys__mcpx_convert(unsigned abi, const maelys_mcp_executor_spec_t* spec,
                     maelys_mcp_executor_resolution_t* res,
                     maelys_execution_request_t** out_request,
                     char** out_error);

/* -------------------------------------------------------- the host side */

typedef struct maelys__mcpx_instance maelys__mcpx_instance_t;

/* The bound of a spawn whose runtime budget is 0 ("none stated"). */
#define MAELYS__MCPX_DEFAULT_SPAWN_MS 30000u
/* How long a stop or a release waits for the loop thread to take it. The
 * loop never blocks on a child, so this only bounds a loop busy elsewhere. */
#define MAELYS__MCPX_ACK_MS 5000u

/*
 * Spawns on the loop thread: `*plan` and `*request` are consumed (set to
 * NULL). Waits at most `timeout_ms` for the loop; on timeout the launch is
 * abandoned (if it happens later it is stopped by force and released) and
 * an error returned. On success *out_fd is the protocol descriptor
 * (blocking, close-on-exec), now the caller's.
 */
maelys_executor_result_t maelys__mcpx_host_spawn(
    maelys_mcp_executor_host_t* host, maelys_executor_plan_t** plan,
    maelys_execution_request_t** request, unsigned timeout_ms,
    maelys__mcpx_instance_t** out_instance, int* out_fd, char** out_error);

/* Waits at most timeout_ms for the end; OK with exited 0 when none was seen
 * within it. Never touches the loop. */
maelys_executor_result_t
maelys__mcpx_instance_wait(maelys__mcpx_instance_t* instance,
                           unsigned timeout_ms, maelys_mcp_executor_exit_t* out,
                           char** out_error);

/* Hands the stop to the loop thread and returns once the Executor took it;
 * never waits for the child. Idempotent; a stop after the end is OK. */
maelys_executor_result_t
maelys__mcpx_instance_stop(maelys__mcpx_instance_t* instance,
                           maelys_mcp_executor_stop_t stop, char** out_error);

/* Local release only: the Executor releases the execution (never signals,
 * never waits; a running child is reaped in the background). Waits a bounded
 * time for the loop to have closed the execution's descriptors. */
void maelys__mcpx_instance_release(maelys__mcpx_instance_t* instance);

/* Resolves spec->profile with `resolver`, converts under launcher ABI `abi`
 * and spawns on `host`. Any refusal is an error with nothing launched. */
maelys_executor_result_t maelys__mcpx_launch(
    maelys_mcp_executor_host_t* host,
    const maelys_mcp_executor_resolver_t* resolver, void* resolver_data,
    unsigned abi, const maelys_mcp_executor_spec_t* spec,
    maelys__mcpx_instance_t** out_instance, int* out_fd, char** out_error);

/* Whether the calling process is the one that created the host (a forked
 * child is refused everything: the loop thread does not exist there). */
bool maelys__mcpx_host_owned(const maelys_mcp_executor_host_t* host);

#endif
