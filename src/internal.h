/* Internal declarations of the core. Nothing here is installed. */
#ifndef MAELYS_EXECUTOR_INTERNAL_H
#define MAELYS_EXECUTOR_INTERNAL_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "maelys/backend.h"
#include "maelys/executor.h"

#define MAELYS__ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#if defined(__GNUC__)
#define MAELYS__PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define MAELYS__PRINTF(f, a)
#endif

/* ------------------------------------------------------------- errors */

/* Fills *out_error (when out_error is not NULL and *out_error is NULL) with a
 * formatted diagnostic and returns `result`. */
maelys_executor_result_t maelys__executor_fail(char** out_error,
                                               maelys_executor_result_t result,
                                               const char* format, ...)
    MAELYS__PRINTF(3, 4);

/* Public calls start with this: a non-NULL *out_error on entry is a caller
 * bug reported without touching it. */
#define MAELYS__CHECK_OUT_ERROR(out_error)                                     \
  do {                                                                         \
    if ((out_error) != NULL && *(out_error) != NULL)                           \
      return MAELYS_EXECUTOR_ERR_ARGUMENT;                                     \
  } while (0)

/* ------------------------------------------------------------ strings */

char* maelys__executor_strdup(const char* s);
char* maelys__executor_asprintf(const char* format, ...) MAELYS__PRINTF(1, 2);
char* maelys__executor_vasprintf(const char* format, va_list ap)
    MAELYS__PRINTF(1, 0);

/* Grows *items (of elem_size) so it can hold `need` entries. 0 or -1. */
int maelys__executor_reserve(void** items, size_t* capacity, size_t elem_size,
                             size_t need);

/* An absolute path without ".", ".." or empty components and without a
 * trailing slash ("/" itself is allowed), at most PATH_MAX bytes. */
bool maelys__executor_path_is_clean(const char* path);

/* True when `path` equals `base` or lies below it (component-wise). */
bool maelys__executor_path_within(const char* path, const char* base);

/* Lowercase hex of `len` bytes into out (2*len+1). */
void maelys__executor_hex(const unsigned char* bytes, size_t len, char* out);

/* 16 random bytes as 32 hex digits. 0 or -1. */
int maelys__executor_random_id(char out[33]);

/* -------------------------------------------------------------- plan */

typedef struct maelys__mount {
  maelys_executor_mount_kind_t kind;
  char* source;
  char* destination;
  maelys_executor_missing_t missing;
  uint64_t size_bytes;
} maelys__mount_t;

typedef struct maelys__rule {
  char* path;
  maelys_executor_access_t access;
  maelys_executor_scope_t scope;
} maelys__rule_t;

typedef struct maelys__destination {
  char* host;
  unsigned port;
} maelys__destination_t;

typedef struct maelys__channel {
  int child_fd;
  char* name;
} maelys__channel_t;

typedef struct maelys__rlimit {
  bool set;
  uint64_t soft;
  uint64_t hard;
} maelys__rlimit_t;

#define MAELYS__RLIMIT_COUNT 10 /* indices 1..9 are used */
#define MAELYS__LIMIT_COUNT 3   /* indices 1..2 are used */

struct maelys_executor_plan {
  atomic_int refcount;
  bool sealed;

  maelys__mount_t* mounts;
  size_t mount_count, mount_capacity;
  maelys__rule_t* rules;
  size_t rule_count, rule_capacity;
  maelys_executor_network_t network;
  bool network_set; /* sealing refuses a plan that never chose a network */
  maelys__destination_t* destinations;
  size_t destination_count, destination_capacity;
  char* mediator;
  maelys_executor_root_t root;
  uint64_t scratch_bytes;
  uint64_t required;
  bool process_tree_required;
  maelys__rlimit_t rlimits[MAELYS__RLIMIT_COUNT];
  uint64_t limits[MAELYS__LIMIT_COUNT]; /* 0: no ceiling */
  char* decision_digest;
  maelys__channel_t* channels;
  size_t channel_count, channel_capacity;

  char digest[72]; /* "sha256:" + 64 hex, once sealed */
};

void maelys__executor_plan_retain(const maelys_executor_plan_t* plan);
void maelys__executor_plan_release(const maelys_executor_plan_t* plan);

/* The canonical encoding the digest is computed over; exported for the unit
 * test of its stability. Caller frees *out. */
int maelys__executor_plan_encode(const maelys_executor_plan_t* plan,
                                 unsigned char** out, size_t* out_len);

/* The paths a plan lets the sandbox write on the host (writable binds and
 * WRITE rules); borrowed. Returns the count written (at most max). */
size_t maelys__executor_plan_writable_paths(const maelys_executor_plan_t* plan,
                                            const char** out, size_t max);

/* Invariant 18: refuses a plan that makes a host system tree writable (by
 * name, and by identity for paths that exist). */
/* writable-trees.c: refuses a writable `path` that holds a set-id file, a
 * file with capabilities or a mount below it, or is a file with several
 * names (invariants 17 and 18). */
maelys_executor_result_t maelys__executor_check_writable_tree(const char* path,
                                                              char** out_error);
maelys_executor_result_t
maelys__executor_check_system_trees(const maelys_executor_plan_t* plan,
                                    char** out_error);

/* Names of rlimit resources, "" for index 0. */
extern const char* const maelys__executor_rlimit_names[MAELYS__RLIMIT_COUNT];
/* The RLIMIT_* value of a maelys_executor_rlimit_t. */
int maelys__executor_rlimit_native(maelys_executor_rlimit_t resource);

const char* maelys__executor_mount_kind_name(maelys_executor_mount_kind_t k);
const char* maelys__executor_missing_name(maelys_executor_missing_t m);
const char* maelys__executor_access_name(maelys_executor_access_t a);
const char* maelys__executor_scope_name(maelys_executor_scope_t s);
const char* maelys__executor_network_name(maelys_executor_network_t n);
const char* maelys__executor_root_name(maelys_executor_root_t r);
const char* maelys__executor_limit_name(maelys_executor_limit_t limit);

/* ----------------------------------------------------------- request */

typedef struct maelys__request_channel {
  int child_fd;
  int host_fd;
} maelys__request_channel_t;

struct maelys_execution_request {
  char* executable;
  char** argv; /* NULL-terminated */
  size_t argc;
  maelys_exec_env_mode_t env_mode;
  char** env; /* "NAME=VALUE", NULL-terminated */
  size_t env_count, env_capacity;
  char* cwd;
  maelys_exec_io_mode_t io_mode;
  int protocol_fd;
  maelys_exec_stderr_mode_t stderr_mode;
  char* backend;
  uint64_t scratch_bytes;
  char* platform;
  uint64_t grace_ms;
  uint64_t force_ms;
  char* receipt_dir;
  maelys__request_channel_t* channels;
  size_t channel_count, channel_capacity;
  bool identity_set;
  uint32_t uid, gid;
  char* receipt_chain;   /* maelys_execution_request_set_receipt_chain */
  char* receipt_context; /* a JSON object's text */
  bool terminal_raw;     /* relay a terminal's output without making it inert */
  maelys_exec_stdin_mode_t stdin_mode;
  unsigned terminal_rows, terminal_columns; /* MAELYS_EXEC_IO_TTY */
};

/* ------------------------------------------------------------ launch */

typedef struct maelys__fd_map {
  int child_fd;
  maelys_backend_fd_source_t source;
  int value;
} maelys__fd_map_t;

struct maelys_backend_launch {
  int payload_fd_limit;
  const int* payload_fds; /* the layout's child descriptors */
  size_t payload_fd_count;
  bool image_set;
  char* path;
  char** argv;
  char** envp;
  unsigned flags;
  maelys__fd_map_t* map;
  size_t map_count, map_capacity;
  int* extra_fds;
  size_t extra_count, extra_capacity;
  bool credentials_set;
  uint32_t uid, gid;
  int image_fd; /* -1: execute `path` */
};

void maelys__executor_launch_init(maelys_backend_launch_t* launch,
                                  int payload_fd_limit);
void maelys__executor_launch_dispose(maelys_backend_launch_t* launch);

struct maelys__proc_fd; /* proc.h */

/* What a launch's descriptor map draws from: the payload layout (child
 * descriptor -> host descriptor) and the core's ends of the status channel,
 * of the lifeline and of the terminal rendezvous, and the memory cgroup's
 * procs file (-1 when absent). */
typedef struct maelys__fd_sources {
  const struct maelys__proc_fd* payload;
  size_t payload_count;
  int status_fd;
  int lifeline_fd;
  int terminal_fd; /* the rendezvous' child end (MAELYS_EXEC_IO_TTY) */
  int cgroup_fd;   /* the memory cgroup's cgroup.procs, open for writing */
  int userdb_fd;   /* the user-database socket's child end */
} maelys__fd_sources_t;

/* Whether the launch maps a child descriptor from `source`. */
bool maelys__launch_maps(const maelys_backend_launch_t* launch,
                         maelys_backend_fd_source_t source);

/* The descriptors the launched image starts with: the launch's map resolved
 * against `sources` and its extra descriptors, or the payload layout as it
 * is when the backend mapped nothing. Writes at most `capacity` entries to
 * out. Pure (it opens, closes and allocates nothing): ARGUMENT, naming the
 * backend and the child descriptor, when an entry resolves to no
 * descriptor; MEMORY when out is too small. */
maelys_executor_result_t maelys__launch_resolve_fds(
    const maelys_backend_launch_t* launch, const maelys__fd_sources_t* sources,
    const char* backend, struct maelys__proc_fd* out, size_t capacity,
    size_t* out_count, char** out_error);

/* Opens an absolute path with O_PATH, refusing any symbolic link in it
 * (-ELOOP). A descriptor or -errno. (src/open-nofollow.c, shared with the
 * bubblewrap helper.) */
int maelys__executor_open_nofollow(const char* path);

/* ------------------------------------------------------------- probe */

struct maelys_backend_probe {
  uint64_t proved;
  char* reasons[64];
  char* diagnostic;
};

void maelys__executor_probe_dispose(maelys_backend_probe_t* probe);

/* ---------------------------------------------------------- executor */

typedef struct maelys__backend_entry {
  /* Points at `slots`: the backend's vtable as its ABI version and
   * struct_size declare it, every slot it does not have NULL. */
  const maelys_backend_t* vtable;
  maelys_backend_t slots;
  void* state;
  bool borrowed; /* the state belongs to another registration (probes) */
  uint64_t proved;
  char* diagnostic;
  char* reasons[64];
  bool proof_cached; /* proved, reasons and diagnostic came from the cache */
} maelys__backend_entry_t;

struct maelys_backend_options {
  char** keys;
  char** values;
  size_t count, capacity;
};

typedef struct maelys_execution maelys__execution_t;
typedef struct maelys__proc_ops maelys__proc_ops_t;
typedef struct maelys__cgroup_parent maelys__cgroup_parent_t;

/* A released execution whose child still runs, on its executor's orphan
 * list: the node lives in the execution, the list belongs to the executor
 * (libuv's intrusive queues). */
typedef struct maelys__orphan {
  struct maelys__orphan* next;
  maelys__execution_t* execution;
} maelys__orphan_t;

struct maelys_executor {
  uv_loop_t* loop;
  const maelys__proc_ops_t* proc_ops;
  maelys__backend_entry_t** backends;
  size_t backend_count, backend_capacity;
  size_t live; /* executions not yet released */
  /* Released executions whose child has not exited yet; handed to reaper
   * threads at destroy. */
  maelys__orphan_t* orphans;
  size_t unfinished; /* executions whose memory is not freed yet */
  bool destroyed;
  /* Where per-execution memory cgroups go, found on first use. */
  maelys__cgroup_parent_t* memory_cgroup;
  /* Receipt evidence: the Ed25519 secret key (libsodium's 64-byte form) and
   * the chains receipts link into. */
  bool receipt_signing;
  unsigned char receipt_key[64];
  struct maelys__receipt_chain* chains;
  size_t chain_count, chain_capacity;
  /* The proof cache (proof-cache.c), or NULL. */
  char* proof_dir;
  unsigned proof_max_age;
  /* Exits finished in the loop turn that began at reap_turn (uv_now). */
  uint64_t reap_turn;
  unsigned reaped;
};

/* proof-cache.c: fills entry's proof from the cache (true) or not. */
bool maelys__proof_cache_load(const maelys_executor_t* executor,
                              maelys__backend_entry_t* entry);
/* Keeps entry's proof in the cache, when it may be kept. */
void maelys__proof_cache_store(const maelys_executor_t* executor,
                               const maelys__backend_entry_t* entry);

/* One receipt chain of an executor: the digest of its last receipt, how many
 * it has, and how many of its executions have not ended yet. */
typedef struct maelys__receipt_chain {
  char* id;
  uint64_t sequence;
  char previous[72]; /* "" before the first receipt */
  size_t live;
  bool closed;
} maelys__receipt_chain_t;

/* The chain named `id`, created when `create` (NULL on allocation failure or
 * when absent). */
maelys__receipt_chain_t* maelys__executor_chain(maelys_executor_t* executor,
                                                const char* id, bool create);

const maelys__backend_entry_t*
maelys__executor_find_backend(const maelys_executor_t* executor,
                              const char* name);

/* Replaces the signalling operations (tests only). */
void maelys__executor_set_proc_ops(maelys_executor_t* executor,
                                   const maelys__proc_ops_t* ops);

/* What executions ask of their executor: only executor.c (and, for receipt
 * chains, receipt-evidence.c) writes executor state. */

/* An execution was spawned: it counts as live until released and as
 * unfinished until its memory is freed. */
void maelys__executor_execution_started(maelys_executor_t* executor);
/* Whether one more exit may be finished in this loop turn: at most
 * MAELYS__REAP_PER_TURN per turn, so that a thousand executions ending at
 * once never hold the host's loop for one long turn (the rest wait for the
 * next turns, each bounded). Counts it when it may. */
#define MAELYS__REAP_PER_TURN 16u
bool maelys__executor_reap_budget(maelys_executor_t* executor);
/* The caller released an execution; one whose child still runs passes its
 * `orphan` node (else NULL) and stays on the orphan list until it finishes
 * (maelys__executor_orphan_done) or the executor is destroyed. */
void maelys__executor_execution_released(maelys_executor_t* executor,
                                         maelys__orphan_t* orphan);
void maelys__executor_orphan_done(maelys_executor_t* executor,
                                  maelys__orphan_t* orphan);
/* Called by an execution when its memory is freed. */
void maelys__executor_execution_gone(maelys_executor_t* executor);
/* Where per-execution memory cgroups go, found on first use; NULL when out
 * of memory. */
maelys__cgroup_parent_t*
maelys__executor_memory_cgroups(maelys_executor_t* executor);

/* An execution joins receipt chain `id` (created at spawn's check). */
void maelys__executor_chain_join(maelys_executor_t* executor, const char* id);
/* An execution of chain `id` ended with receipt `json` (NULL when none could
 * be rendered): the chain takes it as its last link. */
void maelys__executor_chain_link(maelys_executor_t* executor, const char* id,
                                 const char* json);

/* The executions' side of the same interface (execution-reap.c): hands a
 * released execution whose child still runs to a background reaper, never
 * signalling it (invariant 6), and closes it. */
void maelys__execution_abandon(maelys__execution_t* execution);

/* Names of capability bits, for diagnostics: "a, b, c". Caller frees. */
char* maelys__executor_capability_list(uint64_t mask);

/* ------------------------------------------------------------ probes */

/* Registers `vtable` with `state` on `executor` as already proved `assumed`,
 * without create or probe: the executor borrows both (the private executor
 * of maelys_backend_probe_run). */
maelys_executor_result_t
maelys__executor_adopt_backend(maelys_executor_t* executor,
                               const maelys_backend_t* vtable, void* state,
                               uint64_t assumed, char** out_error);

/* The host pid of an execution's tree root, or -1. */
int maelys__execution_root_pid(const maelys_execution_t* execution);

/* Closes the host's end of the execution's lifeline now, as the host's death
 * would (the probes prove with it that nothing outlives the host). */
void maelys__execution_drop_lifeline(maelys_execution_t* execution);

/* ----------------------------------------------------------- receipt */

/* What network NONE does not cover, said wherever it is promised. */
#define MAELYS__NETWORK_NONE_NOTE                                              \
  "no socket of any family but AF_UNIX, and no interface but loopback; a "     \
  "pathname unix socket that a bound directory holds stays connectable, so "   \
  "a directory the plan binds must hold none"

typedef struct maelys__receipt_input {
  const char* execution_id;
  const char* backend;
  uint64_t capabilities;
  const char* plan_digest;
  const char* decision_digest;
  const char* executable;
  const char* const* argv;
  int64_t started_ns; /* CLOCK_REALTIME */
  int64_t ended_ns;
  int64_t duration_ns; /* CLOCK_MONOTONIC difference */
  const maelys_execution_status_t* status;
  bool stop_requested;
  maelys_execution_stop_result_t stop_result;
  double user_seconds, system_seconds;
  int64_t max_rss_kib;
  /* The plan's ceilings and per-process limits, and what was observed. */
  const maelys_executor_plan_t* plan;
  int64_t memory_peak_bytes; /* -1: not measured */
  bool identity_set;
  uint32_t identity_uid, identity_gid;
  /* What the sandbox refused (denials.h); NULL when nothing recorded. */
  const struct maelys__denials* denials;
  /* Evidence, all optional: the chain link, the caller's context object and
   * the signing key (64 bytes). */
  const char* chain_id;
  uint64_t chain_sequence;
  const char* chain_previous; /* NULL for the first */
  const char* context_json;
  const unsigned char* secret_key;
} maelys__receipt_input_t;

/* The receipt document (JSON text). NULL on allocation failure. */
char* maelys__executor_receipt_render(const maelys__receipt_input_t* input);

/* The argv digest "sha256:…" of an executable and argv. */
void maelys__executor_argv_digest(const char* executable,
                                  const char* const* argv, char out[72]);

/* Renders `doc` (a reference is taken) as a record's text: with its
 * "signature" member when `secret_key` is not NULL. NULL on failure. */
char* maelys__executor_record_render(json_t* doc,
                                     const unsigned char* secret_key);

/* "2026-01-02T03:04:05.678Z" of a CLOCK_REALTIME time in ns. */
json_t* maelys__executor_receipt_timestamp(int64_t ns);

/* Frees the executor's evidence state (wipes the key). */
void maelys__executor_evidence_dispose(maelys_executor_t* executor);

/* "sha256:<hex>" of a record file's bytes: `text` and its final newline. */
void maelys__executor_record_digest(const char* text, char out[72]);

/* A chain identifier as maelys_execution_request_set_receipt_chain takes. */
bool maelys__executor_chain_id_is_valid(const char* id);

/* Writes `json` to dir/<name><suffix> atomically (temporary file, fsync,
 * rename, fsync of the directory): suffix ".json" for receipts. Returns 0 or
 * a negative errno; *out_path is the final path on success (caller frees). */
int maelys__executor_record_write(const char* dir, const char* name,
                                  const char* suffix, const char* json,
                                  char** out_path);
/* The same through the directory's descriptor `dfd` (its name `dir` only
 * names the result). */
int maelys__executor_record_write_at(int dfd, const char* dir, const char* name,
                                     const char* suffix, const char* json,
                                     char** out_path);
/* Creates the receipt directory (0700, with its parents), opens it and
 * checks that this process can write there: the descriptor, or a negative
 * errno. Receipts are written through it, never by path again. */
int maelys__executor_receipt_dir_open(const char* dir);
/* What maelys__executor_receipt_dir_open would find, creating and opening
 * nothing (maelys_execution_check): 0 or the negative errno it would fail
 * with. */
int maelys__executor_receipt_dir_could_be_ready(const char* dir);

#endif /* MAELYS_EXECUTOR_INTERNAL_H */
