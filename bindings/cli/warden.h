/* maelys-warden's commands, profiles and relay. Only the library's public
 * headers are used (the way minijail0 uses only libminijail.h). */
#ifndef MAELYS_WARDEN_H
#define MAELYS_WARDEN_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "cli.h"
#include "maelys/executor.h"
#include "profiles.h"
#include "protect.h"

/* HOME inside the built-in profiles: a directory of the private /tmp. */
#define WARDEN_HOME "/tmp/home"

/* The built-in profiles' default sandbox-wide ceilings: tasks everywhere
 * (RLIMIT_NPROC in the sandbox's own user namespace is provable wherever
 * bubblewrap runs), memory where the backend proved a memory cgroup. */
#define WARDEN_DEFAULT_TASKS 1024
#define WARDEN_DEFAULT_MEMORY (UINT64_C(4) << 30)

typedef struct warden_policy {
  const char* plan_file;      /* --plan, or NULL for a built-in profile */
  const char* policy_file;    /* --policy (canonical MIR), or NULL */
  const char* mediator;       /* --mediator, or NULL */
  char policy_temp[PATH_MAX]; /* --policy-temp (physical), or "" */
  struct maelys_warden_policy_handshake* handshake; /* --policy, step 1-4 */
  const char* handshake_backend; /* the backend the handshake checked */
  const char* plan_digest;       /* --plan-digest, or NULL */
  char plan_path[PATH_MAX];      /* the plan file as read */
  bool writable;                 /* --rw */
  bool network_inherit;
  const char* const* allow_read;
  size_t allow_read_count;
  const char* const* deny;
  size_t deny_count;
  const char* const* unprotect; /* --unprotect */
  size_t unprotect_count;
  /* What the plan keeps from the payload (protect.h); owned, freed by
   * warden_policy_dispose. */
  warden_protection_t* protection;
  char workspace[PATH_MAX]; /* physical, no symbolic link in it */
  /* Ceilings and per-process limits (0: the profile's default, or none). */
  uint64_t tasks, memory, cpu_seconds, open_files, file_size;
  bool memory_proved; /* the backend proved limit_memory: default it */
  /* --profile, --allow-write, --home and the inherited network's files
   * (profiles.h); freed by warden_extras_release(). */
  struct warden_extras* extras;
} warden_policy_t;

/* policy-file.c: --policy. warden_policy_plan() reads the MIR file as an
 * authority file, does steps 1-4 of the capability handshake with
 * `backend` and seals the lowered plan; warden_policy_finish() is step 5
 * (it sets that same backend on the request). Without the adapter built in,
 * both refuse with what to rebuild. */
int warden_policy_plan(warden_policy_t* policy, maelys_executor_t* ex,
                       const char* backend, maelys_executor_plan_t** out,
                       cli_error_t* err);
int warden_policy_finish(warden_policy_t* policy, maelys_executor_t* ex,
                         const char* backend,
                         const maelys_executor_plan_t* plan,
                         maelys_execution_request_t* req, cli_error_t* err);
void warden_policy_release(warden_policy_t* policy);

/* Files and directories no plan may make writable (invariant 18). */
typedef struct warden_protected_item {
  char label[64];
  char path[PATH_MAX];
} warden_protected_item_t;
typedef struct warden_protected {
  warden_protected_item_t items[64];
  size_t count;
} warden_protected_t;

/* paths.c: a path the user named, made absolute against the physical working
 * directory, with no symbolic link in any existing component (a link is
 * refused with its target named); *st is zeroed when it does not exist
 * (refused when must_exist). `out` holds PATH_MAX bytes. */
int warden_user_path(const char* option, const char* path, bool must_exist,
                     char* out, struct stat* st, cli_error_t* err);
/* --workspace, or the physical working directory (refused when $PWD reached
 * it through a symbolic link). */
int warden_workspace_path(const char* given, char* out, struct stat* st,
                          cli_error_t* err);
/* Reads a file that defines authority (a plan, policy, profile or spec) from
 * one descriptor, after checking that nobody but its owner (this user or
 * root) could have written it or any directory above it. *out_data is
 * NUL-terminated; free it. */
int warden_read_authority(const char* option, const char* path, size_t max,
                          char** out_data, size_t* out_len, char* out_path,
                          cli_error_t* err);
void warden_protect(warden_protected_t* list, const char* label,
                    const char* path);
/* The configuration and state directories, this program, its library and
 * the helper. */
void warden_protect_defaults(warden_protected_t* list, const char* state_dir,
                             const char* helper);
/* Refuses a plan that makes any protected item (or a directory above one)
 * writable. */
int warden_check_protected(const maelys_executor_plan_t* plan,
                           const warden_protected_t* list, cli_error_t* err);

int warden_policy_from(const invocation_t* inv, warden_policy_t* policy,
                       cli_error_t* err);
/* Releases the policy's placeholders and frees what it owns. */
void warden_policy_dispose(warden_policy_t* policy);
/* protect.c's part of a built-in profile: scans the workspace and adds the
 * protections' rules to the unsealed plan. */
int warden_protect_profile(const warden_policy_t* policy,
                           maelys_executor_plan_t* plan, cli_error_t* err);
int warden_build_plan(warden_policy_t* policy, maelys_executor_plan_t** out,
                      cli_error_t* err);
int warden_profile_plan(const warden_policy_t* policy,
                        maelys_executor_plan_t** out, cli_error_t* err);
int warden_file_plan(warden_policy_t* policy, maelys_executor_plan_t** out,
                     cli_error_t* err);
/* An absolute, lexically normalised form of path (relative to the cwd). */
int warden_absolute(const char* path, char* out, size_t size);

/* ---------------------------------------------------------------- relay */

typedef struct relay relay_t;

/* Relays this process's stdin to `socket` and `socket` to this process's
 * stdout: bytes only, 64 KiB reads, backpressure both ways (a direction
 * stops reading while its destination holds more than a high-water mark),
 * half-close (stdin's end-of-file shuts the socket's write side; the
 * socket's end-of-file closes stdout). `socket` is borrowed. When stdout is
 * a terminal and not raw_output, control characters are made visible and
 * inert ("\x1b") on their way to it (invariant 21). */
relay_t* relay_start(uv_loop_t* loop, uv_stream_t* socket, bool raw_output);
/* True once the socket reached end-of-file and stdout was flushed and
 * closed. */
bool relay_output_done(const relay_t* relay);
/* Stops relaying and closes this process's stdin and stdout handles (on the
 * next turn of the loop). */
void relay_close(relay_t* relay);
/* Frees the relay once the loop has run to completion (every write on the
 * socket completed or was cancelled when its handle closed). */
void relay_free(relay_t* relay);
/* Peak bytes held in the relay's queues, for diagnostics. */
size_t relay_peak_queued(const relay_t* relay);

int warden_run(const invocation_t* inv);
/* Receipt evidence and the orchestrator (evidence.c, agent.c). */
int warden_verify(const invocation_t* inv);
int warden_agent(const invocation_t* inv);
int warden_state_dir(const invocation_t* inv, char* out, size_t size,
                     cli_error_t* err);
int warden_receipt_dir(const invocation_t* inv, char* out, size_t size,
                       cli_error_t* err);
/* mkdir -p with mode 0700 for what it creates. 0 or -1 (errno). */
int warden_mkdir_private(const char* dir);

/* written.c: where sandboxes could write, remembered in the state directory
 * (invariant 18 across runs). warden_written_use() names the state
 * directory; warden_written_check() refuses `path` (absolute, no link) at or
 * below a path an earlier run made writable (outside what that run kept
 * read-only), `what` saying what it would have been used for;
 * warden_written_record() appends the plan's writable paths before a launch. */
void warden_written_use(const char* state_dir);
int warden_written_check(const char* option, const char* path, const char* what,
                         cli_error_t* err);
int warden_written_record(const maelys_executor_plan_t* plan, cli_error_t* err);
/* registry.c: the user's running executions, `ps`, `stop` and `receipts`.
 * warden_registry_add() records a run that started (in
 * STATE_DIR/running/ID.json: this process's pid and start time, the
 * launcher's, the program, workspace, backend, grace); a failure to record
 * is said on stderr and does not stop the run. warden_registry_remove()
 * deletes the record when the run ends. */
void warden_registry_add(const invocation_t* inv,
                         const maelys_execution_t* execution,
                         const char* program, const char* workspace,
                         const char* backend, int64_t grace_ms);
void warden_registry_remove(const invocation_t* inv,
                            const maelys_execution_t* execution);
int warden_ps(const invocation_t* inv);
int warden_stop(const invocation_t* inv);
int warden_receipts(const invocation_t* inv);
int warden_signing_seed(const char* state_dir, unsigned char seed[32],
                        cli_error_t* err);
int warden_signing_start(const invocation_t* inv, maelys_executor_t* executor,
                         const maelys_executor_plan_t* plan, cli_error_t* err);
int warden_chain_start(maelys_execution_request_t* req, char chain[40],
                       cli_error_t* err);
void warden_chain_close(maelys_executor_t* executor, const char* chain,
                        const char* receipt_dir);
char* warden_public_key(const invocation_t* inv, cli_error_t* err);
int warden_plan(const invocation_t* inv);
/* hints.c: what the user can do about a diagnostic of the library, or NULL
 * when no hint fits it. */
const char* warden_hint_for(const char* message);
/* explain.c: plan --explain's summary (heap; free it). */
char* warden_explain(const maelys_executor_plan_t* plan,
                     const warden_protection_t* protection, const char* backend,
                     uint64_t proved, const char* memory_note);
int warden_probe(const invocation_t* inv);

#endif
