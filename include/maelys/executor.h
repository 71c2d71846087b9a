/*
 * Maelys Executor: launch and supervise untrusted processes inside
 * operating-system sandboxes, as libuv handles on the host's own loop.
 *
 * The library is mechanism, not policy. A trusted caller builds a plan,
 * seals it, describes one launch in a request and spawns it through a
 * backend registered on an executor. Every object here is opaque.
 *
 * Conventions (shared with the sibling Maelys libraries):
 *
 * - A fallible call returns a maelys_executor_result_t (MAELYS_EXECUTOR_OK is
 *   0) and takes an optional last parameter `char** out_error`. When it is not
 *   NULL it must point to NULL on entry; on failure it receives one
 *   heap-allocated, human-readable diagnostic that names the rule, path or
 *   capability at fault. Free it with maelys_executor_error_free().
 * - Outputs are cleared on entry; a failed call leaves nothing half-made.
 * - Strings passed in are copied unless a parameter says "borrowed".
 *   Descriptors passed in are borrowed unless the parameter says "consumed";
 *   a call that consumes a descriptor consumes it on failure too and sets the
 *   caller's variable to -1.
 * - Nothing here is thread-safe on its own: like libuv, every call on an
 *   executor and on its executions is made from the thread that runs the
 *   executor's loop. Plans and requests are plain data and may be built on any
 *   thread. Several executors on several loops (and threads) may coexist: the
 *   library keeps no global state and installs no signal handler.
 */
#ifndef MAELYS_EXECUTOR_H
#define MAELYS_EXECUTOR_H

#include <stddef.h>
#include <stdint.h>

/* uv.h needs POSIX types (pthread_rwlock_t...) that a strict -std=c11 hides:
 * say so here rather than let the first error point inside uv.h. */
#if defined(__STRICT_ANSI__) && !defined(_POSIX_C_SOURCE) &&                   \
    !defined(_XOPEN_SOURCE) && !defined(_GNU_SOURCE) &&                        \
    !defined(_DEFAULT_SOURCE)
#error                                                                         \
    "maelys/executor.h needs POSIX: with -std=c11 also pass -D_GNU_SOURCE (or -D_POSIX_C_SOURCE=200809L), as libuv's uv.h does"
#endif

#include <uv.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI generation of this header. ABI 14: the proof cache
 * (maelys_executor_set_proof_cache, maelys_executor_backend_proof_cached).
 * ABI 13: what the sandbox refused
 * (maelys_execution_on_denial, the receipt's "denials" section). ABI 12: the
 * pseudo-terminal io mode (MAELYS_EXEC_IO_TTY, the TERMINAL stream,
 * maelys_execution_wait_terminal, maelys_execution_resize) and the stdin mode
 * (MAELYS_EXEC_STDIN_NULL). ABI 11: sealing refuses a plan whose network mode
 * was never set (explicit beats a silent grant), plans carry sandbox-wide
 * ceilings (maelys_executor_plan_set_limit) and the LIMIT_TASKS/LIMIT_MEMORY
 * capability bits. ABI 10 owns maelys_executor_plan_t (seeds/000); ABI 9
 * introduced the EPHEMERAL_WRITE root capability bit. */
#define MAELYS_EXECUTOR_ABI_VERSION 14

#define MAELYS_EXECUTOR_VERSION_MAJOR 0
#define MAELYS_EXECUTOR_VERSION_MINOR 10
#define MAELYS_EXECUTOR_VERSION_PATCH 0

#if defined(MAELYS_EXECUTOR_BUILDING) && defined(__GNUC__)
#define MAELYS_EXECUTOR_API __attribute__((visibility("default")))
#else
#define MAELYS_EXECUTOR_API
#endif

/* ---------------------------------------------------------------- errors */

typedef enum maelys_executor_result {
  MAELYS_EXECUTOR_OK = 0,
  /* A parameter is invalid (NULL, out of range, malformed). */
  MAELYS_EXECUTOR_ERR_ARGUMENT = 1,
  /* An allocation failed. */
  MAELYS_EXECUTOR_ERR_MEMORY = 2,
  /* A system call on a file, pipe or descriptor failed. */
  MAELYS_EXECUTOR_ERR_IO = 3,
  /* The object is not in a state that allows the call. */
  MAELYS_EXECUTOR_ERR_STATE = 4,
  /* Refused for safety: the call would weaken a guarantee. */
  MAELYS_EXECUTOR_ERR_DENIED = 5,
  /* The backend or platform cannot express the request exactly. */
  MAELYS_EXECUTOR_ERR_UNSUPPORTED = 6,
  /* A named thing (backend, path) does not exist. */
  MAELYS_EXECUTOR_ERR_NOT_FOUND = 7,
  /* A plan setter was called after maelys_executor_plan_seal(). */
  MAELYS_EXECUTOR_ERR_SEALED = 8,
  /* The backend did not prove a capability the plan requires. */
  MAELYS_EXECUTOR_ERR_CAPABILITY = 9,
  /* The child could not be started; the diagnostic names the step and errno.
   */
  MAELYS_EXECUTOR_ERR_SPAWN = 10
} maelys_executor_result_t;

/* The constant's name without its prefix ("ARGUMENT", "SEALED", ...); never
 * NULL. */
MAELYS_EXECUTOR_API const char*
maelys_executor_result_name(maelys_executor_result_t result);

/* Frees a diagnostic returned through out_error. NULL is accepted. */
MAELYS_EXECUTOR_API void maelys_executor_error_free(char* error);

/* Frees any other string the library returns (digests, JSON documents). */
MAELYS_EXECUTOR_API void maelys_executor_string_free(char* string);

/* "0.10.0"; static storage. */
MAELYS_EXECUTOR_API const char* maelys_executor_version(void);

/* MAELYS_EXECUTOR_ABI_VERSION of the library actually loaded. */
MAELYS_EXECUTOR_API unsigned maelys_executor_abi_version(void);

/* ---------------------------------------------------------- capabilities */

/*
 * What a backend's probe proved at registration. A plan derives the set it
 * needs (maelys_executor_plan_required_capabilities); spawn refuses a plan
 * whose needs are not all in the proved mask of the request's backend.
 */
/* READ rules are enforced: nothing outside the readable set is visible. */
#define MAELYS_BACKEND_CAP_FILESYSTEM_READ (UINT64_C(1) << 0)
/* WRITE rules are enforced: writes outside the writable set fail. */
#define MAELYS_BACKEND_CAP_FILESYSTEM_WRITE (UINT64_C(1) << 1)
/* DENY rules are enforced. */
#define MAELYS_BACKEND_CAP_FILESYSTEM_DENY (UINT64_C(1) << 2)
/* Network NONE: a network namespace *and* a seccomp denial of every socket
 * family but AF_UNIX, both proved (invariant 9). */
#define MAELYS_BACKEND_CAP_NETWORK_NONE (UINT64_C(1) << 3)
/* A network namespace alone; weaker than NETWORK_NONE and never a substitute
 * for it. */
#define MAELYS_BACKEND_CAP_NETWORK_NAMESPACE (UINT64_C(1) << 4)
/* Mediated network through the egress channel-v1 protocol at child fd 4. */
#define MAELYS_BACKEND_CAP_NETWORK_MEDIATED_FD4 (UINT64_C(1) << 5)
/* Mediated network through the standard proxy route bridged into the network
 * namespace. */
#define MAELYS_BACKEND_CAP_NETWORK_MEDIATED_EGRESS (UINT64_C(1) << 6)
/* The root is built read-only from explicit binds. */
#define MAELYS_BACKEND_CAP_ROOT_READONLY (UINT64_C(1) << 7)
/* The root is a size-limited scratch whose writes vanish with the execution
 * (ABI 9). */
#define MAELYS_BACKEND_CAP_ROOT_EPHEMERAL_WRITE (UINT64_C(1) << 8)
/* wait and stop cover the whole descendant tree, including a descendant that
 * double-forks and calls setsid() (invariant 8). */
#define MAELYS_BACKEND_CAP_PROCESS_TREE (UINT64_C(1) << 9)
/* Descendants inherit the confinement of the payload. */
#define MAELYS_BACKEND_CAP_PROCESS_CONFINEMENT (UINT64_C(1) << 10)
/* A seccomp filter loads and is enforced. */
#define MAELYS_BACKEND_CAP_SECCOMP (UINT64_C(1) << 11)
/* User, pid and mount namespaces are usable. */
#define MAELYS_BACKEND_CAP_USER_NAMESPACE (UINT64_C(1) << 12)
#define MAELYS_BACKEND_CAP_PID_NAMESPACE (UINT64_C(1) << 13)
#define MAELYS_BACKEND_CAP_MOUNT_NAMESPACE (UINT64_C(1) << 14)
/* tmpfs mounts honour their size limit. */
#define MAELYS_BACKEND_CAP_TMPFS_SIZE (UINT64_C(1) << 15)
/* The sandbox cannot create further user namespaces. */
#define MAELYS_BACKEND_CAP_DISABLE_USERNS (UINT64_C(1) << 16)
/* The payload never runs with host uid 0 and holds no capability. */
#define MAELYS_BACKEND_CAP_UNPRIVILEGED (UINT64_C(1) << 17)
/* The sandbox-wide task ceiling (MAELYS_EXECUTOR_LIMIT_TASKS) is enforced:
 * processes and threads of the whole sandbox together (ABI 11). */
#define MAELYS_BACKEND_CAP_LIMIT_TASKS (UINT64_C(1) << 18)
/* The sandbox-wide memory ceiling (MAELYS_EXECUTOR_LIMIT_MEMORY) is enforced
 * (ABI 11). */
#define MAELYS_BACKEND_CAP_LIMIT_MEMORY (UINT64_C(1) << 19)
/* Every bit defined by this ABI. */
#define MAELYS_BACKEND_CAP_ALL ((UINT64_C(1) << 20) - 1)

/* The stable lowercase name of one capability bit ("network_none"), or NULL
 * for a value that is not exactly one known bit. */
MAELYS_EXECUTOR_API const char* maelys_executor_capability_name(uint64_t bit);

/* The bit named `name`, or 0. */
MAELYS_EXECUTOR_API uint64_t
maelys_executor_capability_from_name(const char* name);

/* ------------------------------------------------------------------ plan */

/*
 * The mechanical launch contract. Built through the setters below, then
 * sealed: sealing validates the whole plan, freezes it (every setter then
 * fails with MAELYS_EXECUTOR_ERR_SEALED) and computes its SHA-256 digest over
 * a canonical, versioned encoding of every rule and the decision digest.
 * Order is significant and is part of the digest: mounts are applied in the
 * order they were added.
 */
typedef struct maelys_executor_plan maelys_executor_plan_t;

typedef enum maelys_executor_mount_kind {
  MAELYS_EXECUTOR_MOUNT_RO_BIND = 1, /* host source, read-only */
  MAELYS_EXECUTOR_MOUNT_BIND = 2,    /* host source, writable */
  MAELYS_EXECUTOR_MOUNT_TMPFS = 3,   /* private tmpfs with a size */
  MAELYS_EXECUTOR_MOUNT_PROC = 4,    /* a procfs for the sandbox */
  MAELYS_EXECUTOR_MOUNT_DEV = 5,     /* a minimal /dev */
  MAELYS_EXECUTOR_MOUNT_SYMLINK = 6, /* source is the link's target text */
  MAELYS_EXECUTOR_MOUNT_DIR = 7      /* an empty directory */
} maelys_executor_mount_kind_t;

/* What to do when a bind source does not exist at launch. */
typedef enum maelys_executor_missing {
  MAELYS_EXECUTOR_MISSING_FAIL = 1,  /* refuse the launch */
  MAELYS_EXECUTOR_MISSING_SKIP = 2,  /* leave the mount out */
  MAELYS_EXECUTOR_MISSING_CREATE = 3 /* create the source directory (0700) */
} maelys_executor_missing_t;

typedef enum maelys_executor_access {
  MAELYS_EXECUTOR_ACCESS_READ = 1,
  MAELYS_EXECUTOR_ACCESS_WRITE = 2, /* implies READ */
  MAELYS_EXECUTOR_ACCESS_DENY = 3,
  /* The path does not exist and must not be created. */
  MAELYS_EXECUTOR_ACCESS_PROTECT_CREATE = 4
} maelys_executor_access_t;

typedef enum maelys_executor_scope {
  MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY = 1, /* the path and below */
  MAELYS_EXECUTOR_SCOPE_LITERAL_FILE = 2,        /* exactly this file */
  MAELYS_EXECUTOR_SCOPE_LITERAL_DIRECTORY = 3    /* this directory, not below */
} maelys_executor_scope_t;

typedef enum maelys_executor_network {
  MAELYS_EXECUTOR_NETWORK_INHERIT = 0, /* the host's network, unconfined */
  MAELYS_EXECUTOR_NETWORK_NONE = 1,    /* no network at all */
  /* Only the plan's TCP destinations, through the named mediator. */
  MAELYS_EXECUTOR_NETWORK_MEDIATED = 2,
  /* No network; the host hands an egress channel in explicitly. Only a host
   * that owns an egress broker composes such a plan (invariant 15). */
  MAELYS_EXECUTOR_NETWORK_EXTERNAL_CHANNEL = 3
} maelys_executor_network_t;

typedef enum maelys_executor_root {
  /* The host's root as it is: no filesystem confinement (POSIX). */
  MAELYS_EXECUTOR_ROOT_HOST = 0,
  /* A read-only root built only from the plan's mounts and rules. */
  MAELYS_EXECUTOR_ROOT_READONLY = 1,
  /* Like READONLY, but / is a size-limited scratch whose writes vanish with
   * the execution. The request's scratch size must equal the plan's. */
  MAELYS_EXECUTOR_ROOT_EPHEMERAL_WRITE = 2
} maelys_executor_root_t;

/* Per-process limits (setrlimit): each process of the sandbox has its own
 * budget; they are not sandbox ceilings (see maelys_executor_limit_t). */
typedef enum maelys_executor_rlimit {
  MAELYS_EXECUTOR_RLIMIT_CPU = 1,    /* seconds */
  MAELYS_EXECUTOR_RLIMIT_FSIZE = 2,  /* bytes */
  MAELYS_EXECUTOR_RLIMIT_DATA = 3,   /* bytes */
  MAELYS_EXECUTOR_RLIMIT_STACK = 4,  /* bytes */
  MAELYS_EXECUTOR_RLIMIT_CORE = 5,   /* bytes */
  MAELYS_EXECUTOR_RLIMIT_NOFILE = 6, /* descriptors */
  /* Address space: only when a plan names it (it breaks JIT runtimes such
   * as Node, which reserve far more than they use). */
  MAELYS_EXECUTOR_RLIMIT_AS = 7, /* bytes */
  /* Processes of the payload's uid; prefer MAELYS_EXECUTOR_LIMIT_TASKS, the
   * sandbox-wide ceiling. */
  MAELYS_EXECUTOR_RLIMIT_NPROC = 8,
  MAELYS_EXECUTOR_RLIMIT_MEMLOCK = 9 /* bytes */
} maelys_executor_rlimit_t;

/* "Unlimited" for maelys_executor_plan_set_rlimit(). */
#define MAELYS_EXECUTOR_RLIMIT_INFINITY UINT64_MAX

/* Sandbox-wide ceilings: one budget shared by every process of the sandbox.
 * A plan that sets one requires the matching capability
 * (MAELYS_BACKEND_CAP_LIMIT_*), so a ceiling is either enforced by a
 * mechanism the backend proved or the launch is refused (invariant 22). */
typedef enum maelys_executor_limit {
  /* Tasks (processes and threads) alive at once, 1..4194304. */
  MAELYS_EXECUTOR_LIMIT_TASKS = 1,
  /* Memory charged to the sandbox (anonymous memory, page cache and its
   * tmpfs files), in bytes, at least 1 MiB. */
  MAELYS_EXECUTOR_LIMIT_MEMORY = 2
} maelys_executor_limit_t;

/* The maximum number of entries of each list in a plan or a request. */
#define MAELYS_EXECUTOR_MAX_ENTRIES 4096

/* A new, empty, unsealed plan: host root, no network mode (sealing refuses
 * it until maelys_executor_plan_set_network() chose one, INHERIT included),
 * nothing required. Free with maelys_executor_plan_destroy(). */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_executor_plan_create(
    maelys_executor_plan_t** out_plan, char** out_error);

/* Drops the caller's reference. Executions keep their own reference to the
 * sealed plan they were spawned with. NULL is accepted. */
MAELYS_EXECUTOR_API void
maelys_executor_plan_destroy(maelys_executor_plan_t* plan);

/*
 * Mounts. Paths are absolute and normalised (no "." or ".." component, no
 * doubled or trailing slash). `destination` is the path inside the sandbox.
 */
/* A bind of the host path `source` at `destination`. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_executor_plan_add_bind(
    maelys_executor_plan_t* plan, const char* source, const char* destination,
    int writable, maelys_executor_missing_t missing, char** out_error);
/* A private tmpfs; size_bytes must be > 0 (every tmpfs has a size). */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_executor_plan_add_tmpfs(
    maelys_executor_plan_t* plan, const char* destination, uint64_t size_bytes,
    char** out_error);
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_executor_plan_add_proc(
    maelys_executor_plan_t* plan, const char* destination, char** out_error);
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_executor_plan_add_dev(
    maelys_executor_plan_t* plan, const char* destination, char** out_error);
/* A symbolic link at `destination` whose text is `target` (relative or
 * absolute, interpreted inside the sandbox). */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_executor_plan_add_symlink(
    maelys_executor_plan_t* plan, const char* target, const char* destination,
    char** out_error);
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_executor_plan_add_dir(
    maelys_executor_plan_t* plan, const char* destination, char** out_error);

/*
 * The minimal runtime a dynamically linked program needs to start, read-only
 * and at the same paths: /usr, /bin, /sbin, /lib, /lib32, /lib64 and /libx32
 * where they exist (a merged-/usr symlink such as /bin -> usr/bin is added
 * as the same symlink, so nothing is bound through a link), and from /etc
 * only ld.so.cache, ld.so.conf(.d), alternatives, ssl, ca-certificates,
 * passwd, group, nsswitch.conf, localtime and hosts. Nothing else of /etc,
 * never /run, /tmp or a home directory, and no /proc, /dev or /tmp (add them
 * with the calls above). Binding /usr alone is not enough on a merged-/usr
 * system: /bin/echo is reached through the /bin symlink.
 */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_executor_plan_add_minimal_runtime(maelys_executor_plan_t* plan,
                                         char** out_error);

/* A filesystem rule on the host path `path` (visible at the same path inside
 * the sandbox). */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_executor_plan_add_rule(maelys_executor_plan_t* plan, const char* path,
                              maelys_executor_access_t access,
                              maelys_executor_scope_t scope, char** out_error);

MAELYS_EXECUTOR_API maelys_executor_result_t maelys_executor_plan_set_network(
    maelys_executor_plan_t* plan, maelys_executor_network_t mode,
    char** out_error);
/* A TCP destination for MEDIATED: a hostname or IP literal (1..253
 * characters of [A-Za-z0-9.:-]) and a port in 1..65535. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_executor_plan_add_network_destination(maelys_executor_plan_t* plan,
                                             const char* host, unsigned port,
                                             char** out_error);
/* The two mediator identifiers a MEDIATED plan may name. They select the
 * frontend, and with it the capability the backend must have proved; any other
 * identifier is refused at seal rather than silently discarded or rebound. */
#define MAELYS_EXECUTOR_MEDIATOR_FD4 "maelys-egress.fd4"
#define MAELYS_EXECUTOR_MEDIATOR_EGRESS "maelys-egress.proxy"

/* The trusted mediator identifier for MEDIATED: one of the two above. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_executor_plan_set_network_mediator(maelys_executor_plan_t* plan,
                                          const char* mediator_id,
                                          char** out_error);

/* scratch_bytes must be > 0 for EPHEMERAL_WRITE and 0 otherwise. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_executor_plan_set_root(
    maelys_executor_plan_t* plan, maelys_executor_root_t root,
    uint64_t scratch_bytes, char** out_error);

/* Adds capabilities the plan requires beyond what its rules imply. Unknown
 * bits are refused. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_executor_plan_require_capabilities(maelys_executor_plan_t* plan,
                                          uint64_t capabilities,
                                          char** out_error);

/* Require that wait/stop cover the whole descendant tree (invariant 8). */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_executor_plan_set_process_tree_required(maelys_executor_plan_t* plan,
                                               int required, char** out_error);

/* soft <= hard; MAELYS_EXECUTOR_RLIMIT_INFINITY for unlimited. Setting the
 * same resource twice replaces the earlier value. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_executor_plan_set_rlimit(
    maelys_executor_plan_t* plan, maelys_executor_rlimit_t resource,
    uint64_t soft, uint64_t hard, char** out_error);

/* A sandbox-wide ceiling (see maelys_executor_limit_t); setting it twice
 * replaces the earlier value. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_executor_plan_set_limit(
    maelys_executor_plan_t* plan, maelys_executor_limit_t limit, uint64_t value,
    char** out_error);

/* The digest of whatever decided the policy, copied verbatim and bound into
 * the plan digest: "ALGORITHM:HEX", the algorithm [a-z0-9-]{1,16}, the hex
 * lowercase, 32..128 digits, e.g. "sha256:…". */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_executor_plan_set_decision_digest(maelys_executor_plan_t* plan,
                                         const char* digest, char** out_error);

/* An explicit channel the plan authorises at child descriptor `child_fd`
 * (>= 4); the request supplies the descriptor. `name` is [a-z0-9._-],
 * 1..64. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_executor_plan_add_channel(maelys_executor_plan_t* plan, int child_fd,
                                 const char* name, char** out_error);

/* Validates and freezes the plan and computes its digest. Sealing twice is
 * MAELYS_EXECUTOR_ERR_SEALED; a plan whose network mode was never set is
 * MAELYS_EXECUTOR_ERR_ARGUMENT. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_executor_plan_seal(maelys_executor_plan_t* plan, char** out_error);

MAELYS_EXECUTOR_API int
maelys_executor_plan_is_sealed(const maelys_executor_plan_t* plan);

/* "sha256:<64 hex>" of a sealed plan; free with
 * maelys_executor_string_free(). */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_executor_plan_digest(
    const maelys_executor_plan_t* plan, char** out_digest, char** out_error);

/* The capabilities a backend must have proved to enforce this plan exactly:
 * those its rules, network, root and flags imply, plus the explicitly
 * required ones. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_executor_plan_required_capabilities(const maelys_executor_plan_t* plan,
                                           uint64_t* out_capabilities,
                                           char** out_error);

/* The plan as a JSON document in the executor's own vocabulary (the format
 * maelys_executor_plan_from_json reads, "maelys-executor-plan/1"). A sealed
 * plan also carries its digest. Free with maelys_executor_string_free(). */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_executor_plan_to_json(
    const maelys_executor_plan_t* plan, char** out_json, char** out_error);

/* A new *unsealed* plan from a JSON document. Unknown members, wrong types
 * and invalid values are refused with the JSON path at fault. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_executor_plan_from_json(
    const char* json, size_t length, maelys_executor_plan_t** out_plan,
    char** out_error);

/* --------------------------------------------------------------- request */

typedef struct maelys_execution_request maelys_execution_request_t;

typedef enum maelys_exec_env_mode {
  MAELYS_EXEC_ENV_EMPTY = 0,   /* the child's environment is empty */
  MAELYS_EXEC_ENV_EXPLICIT = 1 /* exactly the entries added */
} maelys_exec_env_mode_t;

typedef enum maelys_exec_io_mode {
  /* stdin, stdout and stderr are pipes to the host (stderr per its mode). */
  MAELYS_EXEC_IO_CAPTURED = 0,
  /* stdin and stdout are one socket: stdio protocols (stock MCP servers). */
  MAELYS_EXEC_IO_DUPLEX_STDIO = 1,
  /* The protocol socket at the child fd the request names (3); stdin is
   * /dev/null and stdout is stderr, so a stray print can never corrupt the
   * protocol and is never lost. */
  MAELYS_EXEC_IO_ISOLATED_DUPLEX = 2,
  /* The host's own 0, 1 and 2. */
  MAELYS_EXEC_IO_INHERIT = 3,
  /* A pseudo-terminal of the payload's own (ABI 12), made inside the
   * sandbox from the sandbox's own devpts instance (so ttyname(), `tty` and
   * job control work there): its slave is the payload's 0, 1 and 2, its
   * controlling terminal, in a session of its own. The host gets the master
   * as MAELYS_EXEC_STREAM_TERMINAL once the sandbox made it (see
   * maelys_execution_wait_terminal). Never a terminal of the host's
   * (invariant 21). A backend that cannot make one, or a plan without a
   * /dev to make it from, refuses the launch; the stderr mode must be
   * MAELYS_EXEC_STDERR_INHERIT (stderr is the terminal too). */
  MAELYS_EXEC_IO_TTY = 4
} maelys_exec_io_mode_t;

/* Where a CAPTURED payload's stdin comes from (ABI 12). */
typedef enum maelys_exec_stdin_mode {
  MAELYS_EXEC_STDIN_PIPE = 0, /* a pipe: MAELYS_EXEC_STREAM_STDIN (default) */
  MAELYS_EXEC_STDIN_NULL = 1  /* /dev/null, and no stdin stream */
} maelys_exec_stdin_mode_t;

typedef enum maelys_exec_stderr_mode {
  MAELYS_EXEC_STDERR_INHERIT = 0, /* the host's stderr (the default) */
  MAELYS_EXEC_STDERR_CAPTURE = 1, /* a pipe: MAELYS_EXEC_STREAM_STDERR */
  MAELYS_EXEC_STDERR_NULL = 2     /* /dev/null */
} maelys_exec_stderr_mode_t;

MAELYS_EXECUTOR_API maelys_executor_result_t maelys_execution_request_create(
    maelys_execution_request_t** out_request, char** out_error);

/* Frees the request and closes every channel descriptor it still owns. NULL
 * is accepted. */
MAELYS_EXECUTOR_API void
maelys_execution_request_destroy(maelys_execution_request_t* request);

/* The program to execute: an absolute path (no search of PATH happens). */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_execution_request_set_executable(maelys_execution_request_t* request,
                                        const char* path, char** out_error);

/* The complete argv, argv[0] included, NULL-terminated; copied. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_execution_request_set_argv(maelys_execution_request_t* request,
                                  const char* const* argv, char** out_error);

/* EMPTY (the default) or EXPLICIT. Switching to EMPTY while entries exist is
 * MAELYS_EXECUTOR_ERR_STATE. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_execution_request_set_environment_mode(
    maelys_execution_request_t* request, maelys_exec_env_mode_t mode,
    char** out_error);

/* One entry of an EXPLICIT environment. `name` is non-empty, without '='; a
 * name given twice is refused (the child sees exactly what was asked). */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_execution_request_add_environment(maelys_execution_request_t* request,
                                         const char* name, const char* value,
                                         char** out_error);

/* The working directory of the payload, absolute; "/" by default. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_execution_request_set_cwd(
    maelys_execution_request_t* request, const char* path, char** out_error);

/* `child_fd` is the protocol descriptor for ISOLATED_DUPLEX (3 or more, below
 * any channel), and -1 for the other modes. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_execution_request_set_io_mode(maelys_execution_request_t* request,
                                     maelys_exec_io_mode_t mode, int child_fd,
                                     char** out_error);

MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_execution_request_set_stderr_mode(maelys_execution_request_t* request,
                                         maelys_exec_stderr_mode_t mode,
                                         char** out_error);

/* PIPE (the default) or NULL. NULL needs the CAPTURED io mode (ISOLATED's
 * stdin is /dev/null already); spawn refuses it with any other (ABI 12). */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_execution_request_set_stdin_mode(maelys_execution_request_t* request,
                                        maelys_exec_stdin_mode_t mode,
                                        char** out_error);

/* The window size the payload's pseudo-terminal starts with
 * (MAELYS_EXEC_IO_TTY): 1..65535 rows and columns; 24x80 unless set. The
 * sandbox sets it before the payload starts, so the payload never sees
 * another (ABI 12). */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_execution_request_set_terminal_size(maelys_execution_request_t* request,
                                           unsigned rows, unsigned columns,
                                           char** out_error);

/* The backend that enforces the plan. Required: nothing is launched without
 * one. The capability check and the enforcement use this same name
 * (invariant 2). */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_execution_request_set_backend(maelys_execution_request_t* request,
                                     const char* name, char** out_error);

/* For an EPHEMERAL_WRITE root: must equal the plan's scratch size exactly. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_execution_request_set_scratch_size(maelys_execution_request_t* request,
                                          uint64_t bytes, char** out_error);

/* Only "local" is accepted (the default); any other token is refused with
 * MAELYS_EXECUTOR_ERR_UNSUPPORTED, never guessed or translated. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_execution_request_set_platform(maelys_execution_request_t* request,
                                      const char* token, char** out_error);

/* The stop budgets in milliseconds: grace between the graceful signal and the
 * forced kill (default 2000), and how long a forced kill may take before it is
 * reported as a containment failure (default 2000). 1..3600000 each. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_execution_request_set_stop_budget(maelys_execution_request_t* request,
                                         uint64_t grace_ms, uint64_t force_ms,
                                         char** out_error);

/* Where the receipt is written (absolute; created 0700 if absent). Spawn is
 * refused when it lies inside a path the plan makes writable, or when it
 * cannot be created or written. Without one, no receipt file is written (the
 * receipt is still available in memory). */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_execution_request_set_receipt_dir(maelys_execution_request_t* request,
                                         const char* path, char** out_error);

/* The most channels a request carries. */
#define MAELYS_EXECUTOR_MAX_CHANNELS 64

/* Installs *host_fd (consumed; set to -1) at `child_fd` (>= 4). The plan must
 * authorise that child descriptor with maelys_executor_plan_add_channel. At
 * most MAELYS_EXECUTOR_MAX_CHANNELS: one more is refused, never dropped. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_execution_request_add_channel(maelys_execution_request_t* request,
                                     int child_fd, int* host_fd,
                                     char** out_error);

/* A confined payload never holds a terminal of the host (invariant 21): when
 * its stdout or inherited stderr would be one, it gets a pipe, and the
 * executor copies what arrives to the terminal on its loop (bounded: a slow
 * terminal never blocks the payload; excess output is dropped and counted).
 * By default control characters are made visible and inert on the way
 * ("\x1b"); raw = 1 passes them through (a host that trusts the bytes, or
 * filters them itself). */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_execution_request_set_terminal_raw(maelys_execution_request_t* request,
                                          int raw, char** out_error);

/* The unprivileged identity a sandboxing backend runs the payload under when
 * the host is uid 0 (never 0 itself). Unset: the backend's documented
 * default. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_execution_request_set_identity(maelys_execution_request_t* request,
                                      uint32_t uid, uint32_t gid,
                                      char** out_error);

/* -------------------------------------------------------------- executor */

typedef struct maelys_executor maelys_executor_t;
typedef struct maelys_backend maelys_backend_t; /* see backend.h */
typedef struct maelys_backend_options maelys_backend_options_t;

/* An executor bound to `loop`, which the caller owns and must keep alive
 * until maelys_executor_destroy() returned and the loop ran once more. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_executor_create(
    uv_loop_t* loop, maelys_executor_t** out_executor, char** out_error);

/*
 * Destroys the executor. Every execution must have been released
 * (MAELYS_EXECUTOR_ERR_STATE otherwise, and nothing changes). Released
 * executions whose child still runs are handed to a background reaper so that
 * they never become zombies; they are not signalled. The executor's handles
 * finish closing on the next turn of the loop.
 */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_executor_destroy(maelys_executor_t* executor, char** out_error);

/* Key/value configuration handed to a backend at registration. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_backend_options_create(
    maelys_backend_options_t** out_options, char** out_error);
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_backend_options_set(maelys_backend_options_t* options, const char* key,
                           const char* value, char** out_error);
/* The value of `key`, or NULL; borrowed from the options. */
MAELYS_EXECUTOR_API const char*
maelys_backend_options_get(const maelys_backend_options_t* options,
                           const char* key);
/* The keys, in the order they were first set (for a backend that refuses
 * keys it does not know). */
MAELYS_EXECUTOR_API size_t
maelys_backend_options_count(const maelys_backend_options_t* options);
MAELYS_EXECUTOR_API const char*
maelys_backend_options_key(const maelys_backend_options_t* options,
                           size_t index);
MAELYS_EXECUTOR_API void
maelys_backend_options_destroy(maelys_backend_options_t* options);

/*
 * Keeps what each backend's probe proved in `directory` (absolute; created
 * 0700 if absent; it and its records must belong to this process's effective
 * uid and be writable by nobody else, or they are not used) and, at a later
 * registration, reuses a record no older than `max_age_seconds` whose key is
 * unchanged instead of running the probe's sandboxes again. The key is the
 * backend's own (its proof_key slot, backend ABI 6: the identities of the
 * programs its probe runs) and the host's (library version, kernel release
 * and version, boot id, effective uid and gid, this process's cgroups, the
 * user-namespace sysctls, the active LSMs, the seccomp actions): any change
 * runs the probe again. A probe that proved nothing is not kept, and a
 * record is reused for `max_age_seconds` only once two probes in a row
 * proved the same (until then for at most 60 s: a probe that failed for a
 * passing reason, a step timed out under load, heals within a minute). With
 * `max_age_seconds` 0, records are written but never read (a fresh probe
 * that refreshes them). Choose a directory no sandbox can ever write: a
 * proof planted there would advertise what was never proved. Call before
 * registering; `directory` NULL turns the cache off.
 */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_executor_set_proof_cache(
    maelys_executor_t* executor, const char* directory,
    unsigned max_age_seconds, char** out_error);

/* Whether the registration of `name` reused a cached proof (*out_cached 1)
 * or ran its probe (0). */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_executor_backend_proof_cached(const maelys_executor_t* executor,
                                     const char* name, int* out_cached,
                                     char** out_error);

/*
 * Registers `backend` (borrowed; must outlive the executor) under its name
 * and runs its probe now; the proved capability mask is kept. A probe that
 * proves nothing still registers the backend, with an empty mask and a
 * diagnostic saying why: every spawn on it is then refused. `options` is
 * borrowed for the duration of the call and may be NULL. Registering a name
 * twice is MAELYS_EXECUTOR_ERR_STATE.
 */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_executor_register_backend(
    maelys_executor_t* executor, const maelys_backend_t* backend,
    const maelys_backend_options_t* options, char** out_error);

/* The capability mask the backend's probe proved at registration. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_executor_backend_capabilities(const maelys_executor_t* executor,
                                     const char* name, uint64_t* out_mask,
                                     char** out_error);

/* The probe's summary diagnostic (empty when everything was proved). Free
 * with maelys_executor_string_free(). */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_executor_backend_diagnostic(
    const maelys_executor_t* executor, const char* name, char** out_text,
    char** out_error);

/* Why `capability` (one bit) was not proved, or NOT_FOUND when it was. Free
 * with maelys_executor_string_free(). */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_executor_backend_missing_reason(const maelys_executor_t* executor,
                                       const char* name, uint64_t capability,
                                       char** out_reason, char** out_error);

/* Registered backends in registration order; the name is borrowed. */
MAELYS_EXECUTOR_API size_t
maelys_executor_backend_count(const maelys_executor_t* executor);
MAELYS_EXECUTOR_API const char*
maelys_executor_backend_name(const maelys_executor_t* executor, size_t index);

/* The built-in backends (static storage). */
MAELYS_EXECUTOR_API const maelys_backend_t* maelys_backend_posix(void);
MAELYS_EXECUTOR_API const maelys_backend_t* maelys_backend_bubblewrap(void);
/* Landlock and seccomp, without namespaces: for hosts where user namespaces
 * are blocked (README, "Backends", says what it can and cannot express). */
MAELYS_EXECUTOR_API const maelys_backend_t* maelys_backend_landlock(void);

/* ------------------------------------------------------------- execution */

typedef struct maelys_execution maelys_execution_t;

/* Named streams of an execution. */
typedef enum maelys_exec_stream {
  MAELYS_EXEC_STREAM_STDIN = 0,  /* CAPTURED: the child's stdin, writable */
  MAELYS_EXEC_STREAM_STDOUT = 1, /* CAPTURED: the child's stdout, readable */
  MAELYS_EXEC_STREAM_STDERR = 2, /* STDERR_CAPTURE: the child's stderr */
  /* DUPLEX_STDIO and ISOLATED_DUPLEX: the host end of the protocol socket */
  MAELYS_EXEC_STREAM_PROTOCOL = 3,
  /* TTY: the master of the payload's pseudo-terminal, readable and
   * writable, present once maelys_execution_wait_terminal's callback said
   * so. Reads end (UV_EIO) once no process of the sandbox holds the
   * terminal any more; it has no half-close (ABI 12). libuv may end a read
   * with UV_EOF earlier, when the last close of the terminal raises POLLHUP
   * while the payload's last output is still in the kernel's buffers: a host
   * that wants every byte reads the descriptor (uv_fileno) until EIO then,
   * as maelys-warden does. */
  MAELYS_EXEC_STREAM_TERMINAL = 4
} maelys_exec_stream_t;

typedef enum maelys_execution_outcome {
  MAELYS_EXEC_OUTCOME_EXITED = 1,   /* exit_code is valid */
  MAELYS_EXEC_OUTCOME_SIGNALED = 2, /* term_signal is valid */
  /* The payload never ran: launch_step, launch_errno and message say why
   * (a sandbox setup failure reported after spawn returned, or a sandbox
   * launcher that something other than a stop killed before the payload
   * started: step "sandbox-setup", the message names the signal). */
  MAELYS_EXEC_OUTCOME_LAUNCH_FAILED = 3
} maelys_execution_outcome_t;

typedef enum maelys_execution_stop_stage {
  MAELYS_EXEC_STOP_STAGE_NONE = 0,     /* it ended on its own */
  MAELYS_EXEC_STOP_STAGE_GRACEFUL = 1, /* the graceful signal ended it */
  MAELYS_EXEC_STOP_STAGE_FORCED = 2    /* the forced kill ended it */
} maelys_execution_stop_stage_t;

/* Valid only during the callback that receives it. May grow at its end. */
typedef struct maelys_execution_status {
  maelys_execution_outcome_t outcome;
  int exit_code;
  int term_signal;
  int launch_errno;
  const char* launch_step; /* "execve", "chdir", "sandbox-setup", ... */
  const char* message;     /* the launch diagnostic; "" otherwise */
  maelys_execution_stop_stage_t stop_stage;
} maelys_execution_status_t;

typedef void (*maelys_execution_wait_cb)(
    maelys_execution_t* execution, const maelys_execution_status_t* status,
    void* data);

typedef enum maelys_execution_stop_mode {
  /* Send the graceful signal only (SIGTERM to the payload itself). Completes
   * when the tree has exited, or with STILL_RUNNING after the grace. */
  MAELYS_EXEC_STOP_GRACEFUL = 1,
  /* Kill the whole tree now (SIGKILL). */
  MAELYS_EXEC_STOP_FORCED = 2,
  /* The graceful signal, then the forced kill once the grace has elapsed. */
  MAELYS_EXEC_STOP_GRACEFUL_THEN_FORCED = 3
} maelys_execution_stop_mode_t;

typedef enum maelys_execution_stop_result {
  MAELYS_EXEC_STOPPED_ALREADY_EXITED = 1, /* nothing was running */
  MAELYS_EXEC_STOPPED_GRACEFUL = 2,       /* the graceful signal sufficed */
  MAELYS_EXEC_STOPPED_FORCED = 3,         /* the forced kill was needed */
  /* A graceful-only stop whose grace elapsed; the tree still runs. */
  MAELYS_EXEC_STOPPED_STILL_RUNNING = 4,
  /* The tree was still alive when the force budget ran out: the backend could
   * not terminate what it started. Never a hang; reported, not hidden. */
  MAELYS_EXEC_STOPPED_CONTAINMENT_FAILED = 5
} maelys_execution_stop_result_t;

typedef void (*maelys_execution_stop_cb)(maelys_execution_t* execution,
                                         maelys_execution_stop_result_t result,
                                         void* data);

/*
 * Launches `request` under `plan` (borrowed; must be sealed; the execution
 * keeps its own reference) through the request's backend. Refused, with
 * nothing launched, when the plan is not sealed, the backend is unknown or
 * did not prove a capability the plan needs, the request contradicts the
 * plan, or the child cannot be started (MAELYS_EXECUTOR_ERR_SPAWN, with the
 * step and errno that failed). `request` is borrowed; the channel descriptors
 * it holds are consumed on success. The execution keeps the loop alive, as an
 * active handle does, until it has exited or is released.
 */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_execution_spawn(
    maelys_executor_t* executor, const maelys_executor_plan_t* plan,
    maelys_execution_request_t* request, maelys_execution_t** out_execution,
    char** out_error);

/*
 * A dry run of maelys_execution_spawn: every check spawn makes before it
 * launches anything -- the plan sealed, no system tree writable, the receipt
 * directory outside the writable set and able to take a receipt, the request
 * against the plan, the backend's proved capabilities, and the backend's own
 * preparation (which opens every bind source and refuses what it cannot
 * enforce) -- with nothing launched and nothing left behind: no descriptor,
 * no receipt directory, no chain. The one exception is a bind whose missing
 * mode is MAELYS_EXECUTOR_MISSING_CREATE: its source is created, as spawn
 * would create it. MAELYS_EXECUTOR_OK when spawn would get past its checks;
 * otherwise the error spawn would return. `plan` and `request` are borrowed.
 */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_execution_check(
    maelys_executor_t* executor, const maelys_executor_plan_t* plan,
    const maelys_execution_request_t* request, char** out_error);

/* Calls `cb` once the execution has ended (or failed to launch). Never
 * synchronously; every waiter gets the same status. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_execution_wait(
    maelys_execution_t* execution, maelys_execution_wait_cb cb, void* data,
    char** out_error);

/* Stops the execution; `cb` (may be NULL) receives which stage ended it.
 * Idempotent: a repeated stop joins the one in progress (a stronger mode
 * escalates it) or reports the recorded result. Bounded: grace + force budget
 * + a small constant. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_execution_stop(
    maelys_execution_t* execution, maelys_execution_stop_mode_t mode,
    maelys_execution_stop_cb cb, void* data, char** out_error);

/* The stream `stream` as a libuv stream owned by the execution (valid until
 * maelys_execution_release, which closes it; the caller never closes it).
 * Its data field is the caller's. Fails once the descriptor was taken. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_execution_stream(
    maelys_execution_t* execution, maelys_exec_stream_t stream,
    uv_stream_t** out_stream, char** out_error);

/* Hands the host end of `stream` to the caller for good: close-on-exec, in
 * blocking mode, and (for the protocol socket) a socket, so MSG_NOSIGNAL
 * writes cannot raise SIGPIPE. The executor never touches it again. Fails
 * once the stream was opened with maelys_execution_stream or taken. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_execution_take_fd(
    maelys_execution_t* execution, maelys_exec_stream_t stream, int* out_fd,
    char** out_error);

/*
 * Frees the caller's handle. Never signals and never waits (invariant 6): a
 * child still running is left alone and reaped in the background when it
 * exits (no zombie), without keeping the loop alive. Pending wait and stop
 * callbacks are dropped. Streams obtained from maelys_execution_stream are
 * closed. NULL is accepted.
 */
MAELYS_EXECUTOR_API void
maelys_execution_release(maelys_execution_t* execution);

/* The payload's pseudo-terminal (MAELYS_EXEC_IO_TTY, ABI 12). The sandbox
 * makes it, so it reaches the host only after spawn returned.
 * `result` is MAELYS_EXECUTOR_OK once MAELYS_EXEC_STREAM_TERMINAL is present
 * (take it with maelys_execution_stream or maelys_execution_take_fd), or
 * MAELYS_EXECUTOR_ERR_SPAWN when the execution ended without one (its wait
 * status says why). */
typedef void (*maelys_execution_terminal_cb)(maelys_execution_t* execution,
                                             maelys_executor_result_t result,
                                             void* data);

/* Calls `cb` once, never synchronously, when the payload's pseudo-terminal
 * reached the host or the execution ended without one; before the
 * execution's wait callbacks. MAELYS_EXECUTOR_ERR_STATE for an execution
 * whose io mode is not TTY. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_execution_wait_terminal(
    maelys_execution_t* execution, maelys_execution_terminal_cb cb, void* data,
    char** out_error);

/* Gives the payload's pseudo-terminal a new window size (TIOCSWINSZ on the
 * master: the kernel sends SIGWINCH to the terminal's foreground process
 * group). Before the terminal reached the host the size is kept and set on
 * arrival. MAELYS_EXECUTOR_ERR_STATE once the stream was handed over with
 * maelys_execution_take_fd (resize that descriptor itself) or without a
 * terminal. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_execution_resize(maelys_execution_t* execution, unsigned rows,
                        unsigned columns, char** out_error);

/*
 * Whether the execution keeps its loop alive while it runs. By default it
 * does, as an active libuv handle does. maelys_execution_unref() makes every
 * handle the execution owns stop counting (uv_unref), so a host's loop can
 * end while the child still runs, as with a child process the host does not
 * wait for; maelys_execution_ref() restores the default. Pending wait and stop
 * callbacks are still delivered while the loop runs. Streams obtained from
 * maelys_execution_stream are the caller's to ref or unref. Idempotent; NULL
 * and a released execution are accepted and left alone.
 */
MAELYS_EXECUTOR_API void maelys_execution_ref(maelys_execution_t* execution);
MAELYS_EXECUTOR_API void maelys_execution_unref(maelys_execution_t* execution);

/* The execution's identifier (32 lowercase hex digits); borrowed. */
MAELYS_EXECUTOR_API const char*
maelys_execution_id(const maelys_execution_t* execution);

/* The host pid of the process the executor started (for a sandboxing backend:
 * the sandbox launcher), or -1 once it was reaped. */
MAELYS_EXECUTOR_API int
maelys_execution_pid(const maelys_execution_t* execution);

/* The receipt (JSON) once the execution has ended; MAELYS_EXECUTOR_ERR_STATE
 * before. Free with maelys_executor_string_free(). */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_execution_receipt(
    const maelys_execution_t* execution, char** out_json, char** out_error);

/* Why the receipt file could not be written: 0 once it was (or without a
 * receipt directory), else the errno of the step that failed. Spawn refuses a
 * receipt directory it cannot create or write, so this only reports what
 * failed afterwards (a full disk, a directory removed meanwhile). */
MAELYS_EXECUTOR_API int
maelys_execution_receipt_errno(const maelys_execution_t* execution);

/* The path of the receipt file once written; borrowed; NULL before or
 * without a receipt directory. */
MAELYS_EXECUTOR_API const char*
maelys_execution_receipt_path(const maelys_execution_t* execution);

/* ------------------------------------------------------- receipt evidence */

/*
 * Receipts become evidence for whoever reads them away from the host. A host
 * that supplies an Ed25519 key (libsodium) gets every receipt signed; a host
 * that supplies none gets unsigned receipts, exactly as before.
 *
 * A signed receipt ends with the member "signature": {"algorithm":
 * "ed25519", "key": "ed25519:<64 hex>", "value": "<128 hex>"}. The signature
 * covers every byte of the receipt file (the document and its final newline)
 * with the 128 digits of "value" replaced by '0', so any modified byte,
 * whitespace included, is detected.
 *
 * Chains: the receipts of executions whose requests name the same chain on
 * one executor carry {"chain": {"id", "sequence", "previous"}}: the sequence
 * number (1, 2, ... in the order the executions ended) and the SHA-256 of the
 * previous receipt file's bytes (null for the first). Closing the chain writes
 * a closing record that names the last receipt, so a dropped tail is
 * detected; a removed or altered receipt breaks the next link.
 */

/* The size of an Ed25519 seed: the secret the host keeps. */
#define MAELYS_EXECUTOR_RECEIPT_SEED_BYTES 32

/* Signs the receipt of every execution spawned on `executor` after this call
 * (and the closing records of its chains) with the key derived from `seed`
 * (MAELYS_EXECUTOR_RECEIPT_SEED_BYTES, copied; the copy is wiped when
 * replaced or when the executor is freed). NULL removes the key. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_executor_set_receipt_key(
    maelys_executor_t* executor, const unsigned char* seed, size_t seed_length,
    char** out_error);

/* The public key of `seed` as "ed25519:<64 hex>", the form receipts name and
 * maelys_executor_verify_receipts takes. Free with
 * maelys_executor_string_free(). */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_executor_receipt_public_key(
    const unsigned char* seed, size_t seed_length, char** out_text,
    char** out_error);

/* The chain this execution's receipt joins: [A-Za-z0-9_-] then
 * [A-Za-z0-9._-], 1..64 characters. A chained request needs a receipt
 * directory; a chain that was closed takes no more executions. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_execution_request_set_receipt_chain(maelys_execution_request_t* request,
                                           const char* chain_id,
                                           char** out_error);

/* A JSON object (at most 64 KiB) the receipt carries verbatim under
 * "context", e.g. the decision that authorised the plan. Copied. */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_execution_request_set_receipt_context(
    maelys_execution_request_t* request, const char* json_object,
    char** out_error);

/* Ends chain `chain_id`: writes its closing record
 * ({"format": "maelys-executor-receipt-close/1", "chain": {...}, "receipts":
 * N, "closed_at": ...}, signed like the receipts) atomically to
 * `dir`/<chain_id>.close, and refuses further executions on it. STATE while an
 * execution of the chain has not ended. *out_path (may be NULL) receives the
 * path; free with maelys_executor_string_free(). */
MAELYS_EXECUTOR_API maelys_executor_result_t
maelys_executor_close_receipt_chain(maelys_executor_t* executor,
                                    const char* chain_id, const char* dir,
                                    char** out_path, char** out_error);

/* Verifies receipt files and closing records (`paths`: files, or directories
 * whose *.json and *.close files are read): every signature (made by
 * `public_key`, "ed25519:<64 hex>", when not NULL; otherwise all by the one
 * key the records name), every chain's sequence and links, and that every
 * chain ends with its closing record. An unsigned or unchained receipt fails.
 * MAELYS_EXECUTOR_OK when everything verifies; MAELYS_EXECUTOR_ERR_DENIED
 * with a diagnostic that names the first file that fails otherwise. In both
 * cases *out_report (may be NULL) receives a JSON report; free with
 * maelys_executor_string_free(). */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_executor_verify_receipts(
    const char* const* paths, size_t count, const char* public_key,
    char** out_report, char** out_error);

/* --------------------------------------------------------------- denials */

/*
 * What the sandbox refused, as it happens. A backend that records denials
 * (bubblewrap) reports each kind's first denials as examples while the
 * payload runs, and the receipt carries a "denials" section: the count of
 * each kind, the first examples (bounded), and what would allow each one in
 * plan terms. The payload's own view is unchanged: the refused call returns
 * the error it always did.
 */
typedef enum maelys_execution_denial_kind {
  /* A network call the plan's network mode refuses: a socket or socketpair
   * of any family but AF_UNIX (EPERM), or a connect to an abstract unix
   * socket that only the host's network namespace has (ECONNREFUSED). */
  MAELYS_EXEC_DENIAL_NETWORK = 1,
  /* An execve or execveat of a path, or of the interpreter a script or an
   * ELF program names, that the sandbox does not hold and the host does
   * (ENOENT). A path found nowhere is a PATH search, not a denial. */
  MAELYS_EXEC_DENIAL_EXEC = 2
} maelys_execution_denial_kind_t;

/* Valid only during the callback that receives it. May grow at its end. */
typedef struct maelys_execution_denial {
  maelys_execution_denial_kind_t kind;
  const char* kind_name; /* "network", "exec" */
  /* "socket", "socketpair", "connect", "execve", "execveat", or
   * "interpreter" (the program exists; the interpreter it names does not) */
  const char* call;
  int error_number; /* what the payload's call returned */
  /* "AF_INET", "@name" (an abstract socket), a path: printable ASCII, any
   * other byte written \xNN */
  const char* detail;
  uint64_t count; /* denials of this kind so far, this one included */
  /* What would allow it, in plan terms: "network" (allow_value "inherit":
   * the host's network) or "read" (allow_value: the directory to make
   * readable); both NULL when nothing in a plan would. */
  const char* allow_key;
  const char* allow_value;
} maelys_execution_denial_t;

typedef void (*maelys_execution_denial_cb)(
    maelys_execution_t* execution, const maelys_execution_denial_t* denial,
    void* data);

/* Calls `cb` for each denial example the backend reports while the
 * execution runs (the first denial of each kind always is one), on the
 * loop's thread; NULL removes it. Set it right after spawn: nothing is
 * reported before the loop runs. Never called after release. */
MAELYS_EXECUTOR_API maelys_executor_result_t maelys_execution_on_denial(
    maelys_execution_t* execution, maelys_execution_denial_cb cb, void* data,
    char** out_error);

#ifdef __cplusplus
}
#endif

#endif /* MAELYS_EXECUTOR_H */
