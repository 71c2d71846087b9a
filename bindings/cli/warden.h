/* maelys-warden's commands, profiles and relay. Only the library's public
 * headers are used (the way minijail0 uses only libminijail.h). */
#ifndef MAELYS_WARDEN_H
#define MAELYS_WARDEN_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "cli.h"
#include "maelys/executor.h"
#include "profiles.h"
#include "protect.h"

/* HOME inside the built-in profiles: a directory of the private /tmp. */
#define WARDEN_HOME "/tmp/home"

/* The built-in profiles' default sandbox-wide ceilings, each where the
 * backend proved it: tasks (RLIMIT_NPROC in the sandbox's own user
 * namespace, wherever bubblewrap runs), memory (a memory cgroup). */
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
  bool tasks_proved;  /* the backend proved limit_tasks: default it */
  /* The built-in profile for a backend without namespaces (landlock): no
   * /proc, no private /tmp and HOME, nothing mounted (the host's root,
   * readable only where the profile grants). */
  bool no_namespaces;
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
struct term_filter;

/* Relays this process's stdin to `socket` and `socket` to this process's
 * stdout: bytes only, 64 KiB reads, backpressure both ways (a direction
 * stops reading while its destination holds more than a high-water mark),
 * half-close (stdin's end-of-file shuts the socket's write side; the
 * socket's end-of-file closes stdout). `socket` is borrowed. When stdout is
 * a terminal and not raw_output, control characters are made visible and
 * inert ("\x1b") on their way to it (invariant 21). */
relay_t* relay_start(uv_loop_t* loop, uv_stream_t* socket, bool raw_output);
/* Plain stdio: the payload's stdout pipe to this process's stdout, its
 * stderr pipe to stderr and, when stdin_fd >= 0, this process's stdin to
 * the payload's stdin pipe (whose end-of-file closes it: half-close). The
 * three descriptors are consumed. Output to a terminal is made inert unless
 * raw_output, as above. */
relay_t* relay_start_stdio(uv_loop_t* loop, int stdin_fd, int stdout_fd,
                           int stderr_fd, bool raw_output);
/* True once every direction towards this process's output reached
 * end-of-file and was flushed. */
bool relay_output_done(const relay_t* relay);
/* Stops relaying and closes every handle of the relay (on the next turn of
 * the loop). */
void relay_close(relay_t* relay);
/* Frees the relay once the loop has run to completion (every write on the
 * socket completed or was cancelled when its handle closed). */
void relay_free(relay_t* relay);
/* Peak bytes held in the relay's queues, for diagnostics. */
size_t relay_peak_queued(const relay_t* relay);
/* Bytes moved by splice(2), without passing through this process: plain
 * stdio between pipes and regular files, nothing transformed. */
uint64_t relay_spliced_bytes(const relay_t* relay);

/* The parts the configurations above are made of (the terminal session
 * builds its own). */
typedef enum relay_transform {
  RELAY_AS_IS = 0,
  RELAY_INERT, /* control characters visible and inert (invariant 21) */
  RELAY_FILTER /* through a term_filter (a terminal session) */
} relay_transform_t;
typedef enum relay_end_action {
  RELAY_END_KEEP = 0, /* the source's end changes nothing else */
  RELAY_END_CLOSE,    /* it closes the destination */
  RELAY_END_SHUTDOWN  /* it shuts the destination socket's write side */
} relay_end_action_t;
typedef struct relay_direction_options {
  bool output; /* towards this process: a failed write closes the source */
  relay_transform_t transform;
  struct term_filter* filter; /* RELAY_FILTER; borrowed */
  relay_end_action_t at_end;
  bool start_held;            /* not read until relay_hold(..., false) */
  void (*on_end)(void* data); /* the direction reached its end */
  void* on_end_data;
  /* RELAY_FILTER: after each feed, before what it gave out is written */
  void (*on_filtered)(void* data);
  void* on_filtered_data;
} relay_direction_options_t;
relay_t* relay_new(uv_loop_t* loop);
/* An end on descriptor `fd` (a terminal, pipe, socket or file; a
 * descriptor above 2 is closed with it), or on a borrowed stream. The
 * index, or -1. */
int relay_end_fd(relay_t* relay, int fd);
int relay_end_stream(relay_t* relay, uv_stream_t* stream);
bool relay_end_is_terminal(const relay_t* relay, int end);
/* Starts relaying from end `src` to end `dst`; the direction's index, or
 * -1. */
int relay_direction(relay_t* relay, int src, int dst,
                    const relay_direction_options_t* options);
/* Stops (held) or resumes reading a direction's source. */
void relay_hold(relay_t* relay, int dir, bool held);
/* Queues bytes on a direction's destination after what it holds. */
void relay_inject(relay_t* relay, int dir, const char* data, size_t len);
/* The direction reached its end and wrote everything. */
bool relay_direction_done(const relay_t* relay, int dir);
/* A write to the direction's destination failed. */
bool relay_direction_failed(const relay_t* relay, int dir);
/* The last byte the direction read (-1 before any). */
int relay_last_byte(const relay_t* relay, int dir);

/* -------------------------------------------------------------- session */

/* The terminal session (session.c): the payload's own pseudo-terminal
 * relayed to the operator's (see MAELYS_EXEC_IO_TTY). */
typedef struct session session_t;
typedef struct session_options {
  bool read_input;      /* relay stdin (not with --stdin null) */
  bool allow_clipboard; /* let OSC 52 through */
  /* Called when the operator's side stopped taking output (the payload is
   * then stopped, as a pipeline's writer would be). */
  void (*broken)(void* data);
  void* broken_data;
} session_options_t;
/* The window size the payload's terminal starts with: the operator's
 * terminal's (stdout's, else stdin's), else 24x80. */
void session_initial_size(unsigned* rows, unsigned* columns);
/* Relays once the execution's terminal arrives; the operator's terminal
 * enters raw mode then, when it is stdin and this process is in its
 * foreground. */
session_t* session_start(uv_loop_t* loop, maelys_execution_t* execution,
                         const session_options_t* options);
/* True once the payload's terminal ended (or never came) and everything,
 * the resets included, was written. */
bool session_output_done(const session_t* session);
/* Restores the operator's terminal (mode and the payload's modes) now and
 * closes the session's handles on the next turn of the loop. */
void session_close(session_t* session);
/* After the loop ran to completion. */
void session_free(session_t* session);

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
