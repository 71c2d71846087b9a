/*
 * The backend interface of Maelys Executor, for out-of-tree backends.
 *
 * A backend translates a sealed plan and a request into a launch description
 * and proves, at registration, which capabilities it can enforce. It does
 * not run a loop: the core owns spawning, exit watching, signalling, stop
 * escalation, streams and reaping.
 *
 * The vtable grows only at its end. It starts with abi_version and
 * struct_size, and optional slots are checked for NULL (SQLite's vfs). Each
 * slot below names the backend ABI version that added it: the core accepts a
 * vtable of any version from 1 up to MAELYS_BACKEND_ABI_VERSION, reads only
 * the struct_size bytes it declares, and calls a slot only when the vtable's
 * version has it and the slot is not NULL.
 *
 * Everything a backend needs from the core is declared here, so that a
 * backend builds against the installed headers alone, in this tree or out of
 * it: the launch description, read access to sealed plans and requests,
 * recording what a probe proved, running probe sandboxes on a private loop
 * (maelys_backend_probe_run), diagnostics (maelys_backend_fail) and a few
 * string, path and file helpers.
 */
#ifndef MAELYS_BACKEND_H
#define MAELYS_BACKEND_H

#include <stdarg.h>

#include "maelys/executor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ABI 8: the user-database service (MAELYS_BACKEND_FD_USERDB): a launcher
 * that cannot ask the user and group databases itself asks the host process;
 * the vtable is unchanged.
 * ABI 7: the image may join the execution's memory cgroup itself
 * (MAELYS_BACKEND_LAUNCH_IMAGE_JOINS_CGROUP, MAELYS_BACKEND_FD_CGROUP); the
 * vtable is unchanged, and without the flag the core's child joins it, as
 * before.
 * ABI 6: maelys_backend_open_dir_nofollow, and the proof_key slot, with which
 * the core keeps what a probe proved in the host's proof cache
 * (maelys_executor_set_proof_cache) and reuses it while nothing the proof
 * depends on changed; a backend without it is probed at every registration, as
 * before. ABI 5: the denial event (MAELYS_BACKEND_EVENT_DENIAL), which grows
 * the event struct at its end; the core owns the struct a status_line fills, so
 * a backend of an earlier ABI still registers (and reports no denial).
 * ABI 4: the terminal rendezvous (MAELYS_BACKEND_FD_TERMINAL) and the
 * request's io mode and terminal size; a backend built for an earlier ABI
 * still registers, maps no terminal, and a TTY request on it is refused.
 * ABI 3: the backend SDK (maelys_backend_probe_run, maelys_backend_fail,
 * the string, path and file helpers); the vtable is unchanged, and vtables
 * of ABI 1 and 2 are still accepted.
 * ABI 2: the lifeline descriptor, pid-namespace launches, the execution's
 * memory cgroup, images executed from a descriptor and the identity event;
 * every addition is at the end of its enum, flag set or struct. */
#define MAELYS_BACKEND_ABI_VERSION 8

#if defined(__GNUC__)
#define MAELYS_BACKEND_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define MAELYS_BACKEND_PRINTF(f, a)
#endif

typedef struct maelys_backend_launch maelys_backend_launch_t;
typedef struct maelys_backend_probe maelys_backend_probe_t;

/* ------------------------------------------------------- status channel */

/*
 * A wrapped launch (a sandbox launcher that starts the payload itself) can
 * ask for a status channel: a pipe whose write end the core installs at the
 * child descriptors the backend maps to MAELYS_BACKEND_FD_STATUS. The core
 * reads it line by line on the loop and hands each line to the backend's
 * status_line slot, which turns it into one of these events.
 */
typedef enum maelys_backend_event_kind {
  MAELYS_BACKEND_EVENT_NONE = 0,
  /* The host pid of the process whose death takes the whole tree down; the
   * graceful signal is sent to it and it forwards the signal to the payload.
   */
  MAELYS_BACKEND_EVENT_TREE_ROOT = 1,
  /* The tree root can now receive the graceful signal. */
  MAELYS_BACKEND_EVENT_READY = 2,
  /* The payload's own exit status (exit_code or term_signal). */
  MAELYS_BACKEND_EVENT_EXIT = 3,
  /* The payload could not be started: step, error_number, message. */
  MAELYS_BACKEND_EVENT_LAUNCH_FAILED = 4,
  /* A line of the launcher's own diagnostics; kept for a launch failure. */
  MAELYS_BACKEND_EVENT_DIAGNOSTIC = 5,
  /* The host uid and gid the sandbox runs under (uid, gid); recorded in the
   * receipt (ABI 2). */
  MAELYS_BACKEND_EVENT_IDENTITY = 6,
  /* Something the sandbox refused, or the state of the recording: see
   * maelys_backend_denial_report_t (ABI 5). */
  MAELYS_BACKEND_EVENT_DENIAL = 7
} maelys_backend_event_kind_t;

/* What a MAELYS_BACKEND_EVENT_DENIAL reports (ABI 5). */
typedef enum maelys_backend_denial_report {
  /* Denials are recorded from now on: the execution's receipt has a
   * "denials" section. */
  MAELYS_BACKEND_DENIAL_LISTENING = 1,
  /* One denial, as an example: denial_kind, denial_call, error_number (what
   * the payload's call returned), message (the detail: printable ASCII) and
   * denial_count (of that kind so far, this one included). */
  MAELYS_BACKEND_DENIAL_EXAMPLE = 2,
  /* How many denials of denial_kind so far (denial_count). */
  MAELYS_BACKEND_DENIAL_COUNT = 3,
  /* The recording ended while the sandbox ran: later refusals still happen
   * but are not counted. */
  MAELYS_BACKEND_DENIAL_LOST = 4
} maelys_backend_denial_report_t;

typedef struct maelys_backend_event {
  maelys_backend_event_kind_t kind;
  int pid;
  int exit_code;
  int term_signal;
  int error_number;
  char step[32];
  char message[512];
  uint32_t uid, gid; /* MAELYS_BACKEND_EVENT_IDENTITY (ABI 2) */
  /* MAELYS_BACKEND_EVENT_DENIAL (ABI 5); see maelys_backend_denial_report_t */
  maelys_backend_denial_report_t denial_report;
  maelys_execution_denial_kind_t denial_kind;
  char denial_call[16];
  uint64_t denial_count;
} maelys_backend_event_t;

/* --------------------------------------------------------------- vtable */

struct maelys_backend {
  /* ABI 1 */
  uint32_t abi_version; /* MAELYS_BACKEND_ABI_VERSION when built */
  uint32_t struct_size; /* sizeof(maelys_backend_t) when built */
  const char* name;     /* [a-z0-9-]{1,32}, unique per executor */

  /* Creates the backend's state from its options (borrowed). */
  maelys_executor_result_t (*create)(const maelys_backend_options_t* options,
                                     void** out_state, char** out_error);
  void (*destroy)(void* state);

  /* Proves capabilities by running real checks; records each proved bit and a
   * reason for each missing one in `probe`. An error return registers the
   * backend with an empty mask and the error as its diagnostic. */
  maelys_executor_result_t (*probe)(void* state, maelys_backend_probe_t* probe,
                                    char** out_error);

  /* Fills `launch` for the sealed `plan` and `request`. Must refuse, with a
   * diagnostic naming the rule, anything it cannot enforce exactly. The
   * proved capability mask is passed so the lowering uses only what was
   * proved (e.g. --disable-userns). */
  maelys_executor_result_t (*prepare)(void* state, uint64_t proved,
                                      const maelys_executor_plan_t* plan,
                                      const maelys_execution_request_t* request,
                                      maelys_backend_launch_t* launch,
                                      char** out_error);

  /* Optional (NULL when the backend asks for no status channel): parses one
   * line (without its newline) of the status channel. */
  void (*status_line)(void* state, const char* line, size_t length,
                      maelys_backend_event_t* out_event);

  /* ABI 6. Optional: writes into `key` (a NUL-terminated text of at most
   * `size` bytes) what the outcome of this backend's probe depends on
   * besides the host facts the core adds itself (kernel, boot, uid, cgroups,
   * user-namespace sysctls, LSMs: see maelys_executor_set_proof_cache): the
   * identity of every program the probe runs (device, inode, size,
   * modification and change times -- any rewrite or replacement changes
   * them), its options. Returns 0, or -1 when this probe's outcome must not
   * be reused (then it runs at every registration). */
  int (*proof_key)(void* state, char* key, size_t size);

  /* Slots of later ABI versions go here, each marked with its version. */
};

/* --------------------------------------------------------------- probe */

/* Records that `capabilities` were proved. */
MAELYS_EXECUTOR_API void
maelys_backend_probe_prove(maelys_backend_probe_t* probe,
                           uint64_t capabilities);
/* Records why `capability` (one or more bits) could not be proved; copied.
 * The first reason recorded for a bit is kept. */
MAELYS_EXECUTOR_API void
maelys_backend_probe_missing(maelys_backend_probe_t* probe,
                             uint64_t capabilities, const char* reason);
/* Appends a line to the backend's registration diagnostic; copied. */
MAELYS_EXECUTOR_API void
maelys_backend_probe_diagnostic(maelys_backend_probe_t* probe,
                                const char* text);

/* ----------------------------------------------------------- probe runs */

/*
 * A real launch made to prove a capability: the backend's own prepare, the
 * core's spawn, exit watch and stop, run to completion on a private loop
 * while the caller's thread blocks (registration is setup; the host's loop is
 * never touched). The payload's stdout is collected (up to 64 KiB) when the
 * request's io mode captures it, and a captured stderr is drained and
 * dropped; when stdout contains `marker` the execution is ended -- by a forced
 * stop, or by dropping its lifeline as the host's death would (end_by_lifeline)
 * -- and the run waits (bounded) for stdout's end of file, which arrives only
 * once every process holding it, descendants included, is gone.
 *
 * The structure grows only at its end; struct_size says how much of it the
 * caller has, and the core writes nothing beyond it. Start one with
 * maelys_backend_probe_run_init(), which sets struct_size for the caller.
 */
typedef struct maelys_backend_probe_run {
  uint32_t struct_size; /* sizeof(maelys_backend_probe_run_t) when built */

  /* What to run; borrowed until maelys_backend_probe_run() returns. The
   * plan is sealed; the request's channels are consumed as by spawn. */
  const maelys_executor_plan_t* plan;
  maelys_execution_request_t* request;
  const char* marker;  /* NULL: run until the payload exits */
  uint64_t timeout_ms; /* until the marker, or the exit; then forced */
  int end_by_lifeline; /* end at the marker by dropping the lifeline */

  /* Results. */
  int spawned;       /* 0: spawn_error says why */
  char* spawn_error; /* heap; freed by maelys_backend_probe_run_dispose */
  maelys_execution_outcome_t outcome;
  int exit_code, term_signal, launch_errno;
  char launch_step[32];
  char message[1024]; /* the launch diagnostic */
  char* output;       /* stdout, NUL-terminated; heap, as spawn_error */
  size_t output_len;
  int marker_seen;
  int output_eof; /* stdout ended: nothing that held it is left */
  int timed_out;
  /* Host view of the sandbox's tree root while the marker was current (the
   * pid the backend reported with MAELYS_BACKEND_EVENT_TREE_ROOT, or else
   * the launched image's grandchild): its real uid and whether it held any
   * capability; -1 when unknown. */
  long root_uid;
  int root_has_caps;
} maelys_backend_probe_run_t;

/* Clears `run` and sets its struct_size (inline, so that the size is the
 * caller's). */
static inline void
maelys_backend_probe_run_init(maelys_backend_probe_run_t* run,
                              const maelys_executor_plan_t* plan,
                              maelys_execution_request_t* request) {
  maelys_backend_probe_run_t empty = {0};
  *run = empty;
  run->struct_size = (uint32_t)sizeof *run;
  run->plan = plan;
  run->request = request;
  run->timeout_ms = 10000;
}

/* Runs `count` probe launches at once on one private loop through `backend`
 * with its `state` (both borrowed), as if the backend had proved `assumed`.
 * Per-run failures are results (spawned, outcome, timed_out); the call fails
 * only on a bad argument or when no private loop can be made, and then
 * nothing ran. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_backend_probe_run(
    const maelys_backend_t* backend, void* state, uint64_t assumed,
    maelys_backend_probe_run_t* const* runs, size_t count, char** out_error);

/* Frees a run's results (output, spawn_error); the run can be reused. */
MAELYS_EXECUTOR_API void
maelys_backend_probe_run_dispose(maelys_backend_probe_run_t* run);

/* -------------------------------------------------------------- launch */

/* Where a child descriptor of the launched image comes from. */
typedef enum maelys_backend_fd_source {
  /* The payload's descriptor `value` as the io mode and channels lay it out
   * (0, 1, 2, the protocol fd, channels). */
  MAELYS_BACKEND_FD_PAYLOAD = 1,
  /* The write end of the status channel. */
  MAELYS_BACKEND_FD_STATUS = 2,
  /* A descriptor given to the launch with maelys_backend_launch_add_fd;
   * `value` is the index that call returned. */
  MAELYS_BACKEND_FD_EXTRA = 3,
  /* The read end of the execution's lifeline: a pipe whose only write end
   * the host process keeps (close-on-exec, never inherited) until it has
   * reaped the launched image. End of file on it means that the host process
   * is gone, however it died; a launcher that watches it can end everything
   * it started (ABI 2). */
  MAELYS_BACKEND_FD_LIFELINE = 4,
  /* MAELYS_EXEC_IO_TTY: one end of a unix stream socket whose other end the
   * core keeps. The backend's sandbox makes the payload's pseudo-terminal
   * inside the sandbox and sends its master over this socket, once, as a
   * single SCM_RIGHTS descriptor with one byte of data, before the payload
   * starts; the core checks that it is a pseudo-terminal master and offers
   * it as MAELYS_EXEC_STREAM_TERMINAL. A TTY request whose launch maps no
   * such descriptor is refused: the backend cannot make a terminal of the
   * payload's own (ABI 4). */
  MAELYS_BACKEND_FD_TERMINAL = 5,
  /* MAELYS_BACKEND_LAUNCH_IMAGE_JOINS_CGROUP: the `cgroup.procs` file of the
   * execution's memory cgroup, open for writing. It exists only when the
   * core creates that cgroup (the plan sets a memory ceiling and the launch
   * asks for MAELYS_BACKEND_LAUNCH_MEMORY_CGROUP): mapping it otherwise fails
   * the spawn (ABI 7). */
  MAELYS_BACKEND_FD_CGROUP = 6,
  /* One end of a unix stream socket on which the image asks the host
   * process's user and group databases (NSS) whether an id is someone's,
   * one question at a time: it writes "UID GID\n" (decimal) and reads one
   * line: "user\n" when UID names a user, "group\n" when GID names a group
   * (and UID no user), "none\n" when neither, "error ERRNO\n" when a
   * database could not answer. One thread of the host process answers
   * every launch, never the loop's (the answer does not wait for the host
   * to run its loop), until the image closes its end; a malformed question
   * ends the conversation (end-of-file), and so does the host process's
   * death. A directory service that does not return holds that thread: an
   * image should give up after a deadline of its own, and refuse. For a
   * launcher that cannot load NSS modules itself (a static one) and must know
   * that a host identity it takes is nobody's (ABI 8). */
  MAELYS_BACKEND_FD_USERDB = 7
} maelys_backend_fd_source_t;

/* Launch flags. */
/* The core does not chdir to the request's cwd (the launcher does). */
#define MAELYS_BACKEND_LAUNCH_NO_CHDIR (1u << 0)
/* The core does not apply the plan's rlimits (the launcher does). */
#define MAELYS_BACKEND_LAUNCH_NO_RLIMITS (1u << 1)
/* The launched image dies with the host thread that spawned it. */
#define MAELYS_BACKEND_LAUNCH_DIE_WITH_PARENT (1u << 2)
/* Create the status channel (see maelys_backend_event_kind_t). */
#define MAELYS_BACKEND_LAUNCH_STATUS_CHANNEL (1u << 3)
/* The launched image is pid 1 of a new pid namespace: when it dies, whatever
 * killed it, the kernel kills every process of that namespace, nested
 * namespaces included. A host without CAP_SYS_ADMIN gets a new user
 * namespace with it that maps its own uid and gid to themselves (ABI 2). */
#define MAELYS_BACKEND_LAUNCH_NEW_PID_NAMESPACE (1u << 4)
/* When the plan sets a memory ceiling, the core creates a cgroup of the
 * execution's own with that ceiling, starts the image in it, reports the
 * peak in the receipt and removes the cgroup once the image was reaped; the
 * spawn fails when no memory controller is writable here (ABI 2). */
#define MAELYS_BACKEND_LAUNCH_MEMORY_CGROUP (1u << 5)
/* With MAELYS_BACKEND_LAUNCH_MEMORY_CGROUP: the image moves itself into the
 * cgroup, by writing its pid to the descriptor mapped from
 * MAELYS_BACKEND_FD_CGROUP, before it starts anything the ceiling must
 * cover, and refuses to go on when that fails; the core's child does not.
 * A migration waits for the kernel (an RCU grace period of the cgroup
 * threadgroup lock, milliseconds), which the core's child would spend with
 * the host's thread held in spawn, and which an image can overlap with its
 * own start-up. The spawn fails when the core creates the cgroup and the
 * launch maps no MAELYS_BACKEND_FD_CGROUP (ABI 7). */
#define MAELYS_BACKEND_LAUNCH_IMAGE_JOINS_CGROUP (1u << 6)

/* The image the core executes: an absolute path, argv (NULL-terminated) and
 * envp (NULL-terminated; NULL for an empty environment); all copied. Without
 * this call the core executes the request's program, argv and environment. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_backend_launch_set_image(
    maelys_backend_launch_t* launch, const char* path, const char* const* argv,
    const char* const* envp, char** out_error);

MAELYS_EXECUTOR_API void
maelys_backend_launch_set_flags(maelys_backend_launch_t* launch,
                                unsigned flags);

/* Executes *fd (consumed; set to -1) with execveat(AT_EMPTY_PATH) instead of
 * the image path, which then only names it in diagnostics: a file swapped
 * after the backend checked the descriptor changes nothing (ABI 2). */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_backend_launch_set_image_fd(
    maelys_backend_launch_t* launch, int* fd, char** out_error);

/* Installs a descriptor at `child_fd` of the launched image. Without any
 * mapping the payload layout is installed as it is. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_backend_launch_map_fd(
    maelys_backend_launch_t* launch, int child_fd,
    maelys_backend_fd_source_t source, int value, char** out_error);

/* Gives *fd (consumed; set to -1) to the launch; *out_index names it for
 * MAELYS_BACKEND_FD_EXTRA. The core closes it after spawn. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_backend_launch_add_fd(
    maelys_backend_launch_t* launch, int* fd, int* out_index, char** out_error);

/* The most descriptors a payload layout has: 0-2, the protocol descriptor
 * and MAELYS_EXECUTOR_MAX_CHANNELS channels (ABI 3). */
#define MAELYS_BACKEND_PAYLOAD_FD_MAX (4 + MAELYS_EXECUTOR_MAX_CHANNELS)

/* The highest payload descriptor plus one (3 for CAPTURED, more with a
 * protocol fd and channels): extra descriptors go at or above it. */
MAELYS_EXECUTOR_API int
maelys_backend_launch_payload_fd_limit(const maelys_backend_launch_t* launch);

/* Whether the payload layout has descriptor `fd` (the io mode's 0-2, the
 * protocol descriptor, the channels). */
MAELYS_EXECUTOR_API int
maelys_backend_launch_payload_fd_present(const maelys_backend_launch_t* launch,
                                         int fd);

/* Run the launched image as uid/gid (supplementary groups cleared). Only
 * meaningful when the host is uid 0. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_backend_launch_set_credentials(maelys_backend_launch_t* launch,
                                      uint32_t uid, uint32_t gid,
                                      char** out_error);

/* ------------------------------------------ read access to sealed plans */

typedef struct maelys_executor_mount_view {
  maelys_executor_mount_kind_t kind;
  const char* source; /* binds: host path; symlink: target; else NULL */
  const char* destination;
  maelys_executor_missing_t missing; /* binds only */
  uint64_t size_bytes;               /* tmpfs only */
} maelys_executor_mount_view_t;

typedef struct maelys_executor_rule_view {
  const char* path;
  maelys_executor_access_t access;
  maelys_executor_scope_t scope;
} maelys_executor_rule_view_t;

/* Views borrow from the plan and stay valid while it lives. The index must be
 * below the count; *_get returns 0 on success and -1 otherwise. */
MAELYS_EXECUTOR_API size_t
maelys_executor_plan_mount_count(const maelys_executor_plan_t* plan);
MAELYS_EXECUTOR_API int
maelys_executor_plan_mount_get(const maelys_executor_plan_t* plan, size_t index,
                               maelys_executor_mount_view_t* out_view);
MAELYS_EXECUTOR_API size_t
maelys_executor_plan_rule_count(const maelys_executor_plan_t* plan);
MAELYS_EXECUTOR_API int
maelys_executor_plan_rule_get(const maelys_executor_plan_t* plan, size_t index,
                              maelys_executor_rule_view_t* out_view);
MAELYS_EXECUTOR_API maelys_executor_network_t
maelys_executor_plan_network(const maelys_executor_plan_t* plan);
MAELYS_EXECUTOR_API maelys_executor_root_t maelys_executor_plan_root(
    const maelys_executor_plan_t* plan, uint64_t* out_scratch_bytes);
MAELYS_EXECUTOR_API int
maelys_executor_plan_process_tree_required(const maelys_executor_plan_t* plan);
/* 0 and the limit when set, -1 when the resource has no limit in the plan. */
MAELYS_EXECUTOR_API int
maelys_executor_plan_rlimit_get(const maelys_executor_plan_t* plan,
                                maelys_executor_rlimit_t resource,
                                uint64_t* out_soft, uint64_t* out_hard);
/* 0 and the ceiling when set, -1 when the plan has none (ABI 11). */
MAELYS_EXECUTOR_API int
maelys_executor_plan_limit_get(const maelys_executor_plan_t* plan,
                               maelys_executor_limit_t limit,
                               uint64_t* out_value);

/* Read access to a request (borrowed strings). */
MAELYS_EXECUTOR_API const char*
maelys_execution_request_executable(const maelys_execution_request_t* request);
/* argv, NULL-terminated. */
MAELYS_EXECUTOR_API const char* const*
maelys_execution_request_argv(const maelys_execution_request_t* request);
/* "NAME=VALUE" entries, NULL-terminated (empty for MAELYS_EXEC_ENV_EMPTY). */
MAELYS_EXECUTOR_API const char* const*
maelys_execution_request_environment(const maelys_execution_request_t* request);
MAELYS_EXECUTOR_API const char*
maelys_execution_request_cwd(const maelys_execution_request_t* request);
/* 0 and the identity when one was set, -1 otherwise. */
MAELYS_EXECUTOR_API int
maelys_execution_request_identity(const maelys_execution_request_t* request,
                                  uint32_t* out_uid, uint32_t* out_gid);
MAELYS_EXECUTOR_API const char*
maelys_execution_request_receipt_dir(const maelys_execution_request_t* request);
/* The io mode (ABI 4). */
MAELYS_EXECUTOR_API maelys_exec_io_mode_t
maelys_execution_request_io_mode(const maelys_execution_request_t* request);
/* The pseudo-terminal's initial window size (24x80 unless set; ABI 4). */
MAELYS_EXECUTOR_API void maelys_execution_request_terminal_size(
    const maelys_execution_request_t* request, unsigned* out_rows,
    unsigned* out_columns);

/* ------------------------------------------------------------- services */

/* Fills *out_error (when out_error is not NULL and *out_error is NULL) with
 * the formatted diagnostic, allocated as maelys_executor_error_free() frees
 * it, and returns `result`: `return maelys_backend_fail(out_error,
 * MAELYS_EXECUTOR_ERR_ARGUMENT, "bad option '%s'", key);`. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_backend_fail(
    char** out_error, maelys_executor_result_t result, const char* format, ...)
    MAELYS_BACKEND_PRINTF(3, 4);

/* A formatted string (free()), or NULL when out of memory. */
MAELYS_EXECUTOR_API char* maelys_backend_asprintf(const char* format, ...)
    MAELYS_BACKEND_PRINTF(1, 2);
MAELYS_EXECUTOR_API char* maelys_backend_vasprintf(const char* format,
                                                   va_list ap)
    MAELYS_BACKEND_PRINTF(1, 0);

/* Grows the array *items (of elem_size bytes each, *capacity entries) so that
 * it holds at least `need` entries: 0, or -1 when out of memory (the array is
 * then unchanged). */
MAELYS_EXECUTOR_API int maelys_backend_reserve(void** items, size_t* capacity,
                                               size_t elem_size, size_t need);

/* Whether `path` is absolute, without ".", ".." or empty components and
 * without a trailing slash ("/" itself is clean), at most PATH_MAX bytes. */
MAELYS_EXECUTOR_API int maelys_backend_path_is_clean(const char* path);

/* Opens an absolute path with O_PATH | O_CLOEXEC, refusing a symbolic link as
 * any of its components, the last one included (-ELOOP): a descriptor, or a
 * negative errno. */
MAELYS_EXECUTOR_API int maelys_backend_open_nofollow(const char* path);

/* The same for a directory to read (O_RDONLY | O_DIRECTORY | O_CLOEXEC, for
 * fdopendir or *at calls): a descriptor, or a negative errno (-ENOTDIR for
 * anything but a directory, -ELOOP for a link). ABI 6. */
MAELYS_EXECUTOR_API int maelys_backend_open_dir_nofollow(const char* path);

/* Whether this process is uid 0 of the initial user namespace: the core then
 * starts NEW_PID_NAMESPACE launches without a user namespace of their own. */
MAELYS_EXECUTOR_API int maelys_backend_host_root(void);

#ifdef __cplusplus
}
#endif

#endif /* MAELYS_BACKEND_H */
