/* Internals of the bubblewrap backend, shared with its unit tests. */
#ifndef MAELYS_BWRAP_INTERNAL_H
#define MAELYS_BWRAP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "maelys/backend.h"
#include "seccomp-baseline.h"

/* Where the helper is visible inside the sandbox. */
#define MAELYS__BWRAP_HELPER_DEST "/.maelys/helper"
/* Size of the read-only root tmpfs: it only holds mount points. */
#define MAELYS__BWRAP_RO_ROOT_SIZE 1048576
/* Size of each mode-000 DENY overlay. */
#define MAELYS__BWRAP_DENY_SIZE 4096

typedef enum maelys__bwrap_kind {
  MAELYS__BWRAP_DIRECTORY = 1,
  MAELYS__BWRAP_FILE = 2,
  MAELYS__BWRAP_OTHER = 3 /* socket, device, fifo */
} maelys__bwrap_kind_t;

/* A file's identity on the host. */
typedef struct maelys__bwrap_devino {
  uint64_t dev, ino;
} maelys__bwrap_devino_t;

/* The most path components a checked program's ancestry records. */
#define MAELYS__BWRAP_CHAIN_MAX 64

/* What the resolver learnt of a host path it opened. */
typedef struct maelys__bwrap_source {
  maelys__bwrap_kind_t kind;
  uint64_t dev, ino;
  uint32_t owner, group;
  /* Every ancestor is searchable and the object readable by "other": an
   * unprivileged uid can reach it by path. */
  bool world_accessible;
  /* The number of names the object has (st_nlink): a DENY of a file with
   * another name is refused, since the other name still reads it. */
  uint64_t nlink;
} maelys__bwrap_source_t;

/*
 * The side effects of the lowering, injectable so that unit tests run it
 * without touching the filesystem. open() opens `path` with O_PATH without
 * following any symbolic link (a symlink anywhere in it is -ELOOP), returning
 * a descriptor or a negative errno.
 */
typedef struct maelys__bwrap_resolver {
  void* ctx;
  int (*open)(void* ctx, const char* path, maelys__bwrap_source_t* info);
  int (*create_dir)(void* ctx, const char* path);
  void (*close)(void* ctx, int fd);
  /* The name of a live unix socket (one something is bound to) directly
   * inside the directory `fd` refers to (into name, 256 bytes): 1 when there
   * is one, 0 otherwise. */
  int (*find_socket)(void* ctx, int fd, char* name);
  /* The first non-directory below the directory `fd` refers to (any depth,
   * no symbolic link followed) that has more than one name: its path
   * relative to `fd` into name (MAELYS__BWRAP_NAME_MAX bytes) and its link
   * count into *nlink. 1 when there is one, 0 otherwise, a negative errno
   * when the tree could not be read to the end. */
  int (*find_hard_link)(void* ctx, int fd, char* name, uint64_t* nlink);
} maelys__bwrap_resolver_t;

/* The size of the name find_hard_link() reports. */
#define MAELYS__BWRAP_NAME_MAX 4096

typedef struct maelys__bwrap_env {
  const maelys__bwrap_resolver_t* resolver;
  const char* helper_path; /* host path of the helper */
  /* The helper the backend checked: the bind of helper_path must still be
   * that file (0:0 skips the check, for tests that have no such file). */
  maelys__bwrap_devino_t helper_id;
  /* Files and directories a writable bind must never cover: the programs
   * the backend executes and their ancestors (invariant 18). */
  const maelys__bwrap_devino_t* protected_ids;
  size_t protected_count;
  bool host_root; /* stage binds for the sandbox's own identity */
  const char* staging_dir;
  bool disable_userns;
  /* Payload descriptors from 3 up that the helper keeps (protocol,
   * channels); everything else from 3 to payload_fd_limit-1 is closed. */
  int payload_fd_limit;
  const int* keep_fds;
  size_t keep_count;
  /* Child descriptors of the launched bwrap: */
  int stderr_fd;      /* the payload's real stderr */
  int status_fd;      /* the helper's status channel */
  int seccomp_fd;     /* the BPF program */
  int json_status_fd; /* bwrap's --json-status-fd */
  /* The sandbox's end of the denial listener's socket, handed to the
   * sandbox's init (--notify-fd); 0 for none (unit tests). */
  int notify_fd;
  int first_extra_fd; /* the first descriptor the lowering asks for */
  /* The terminal rendezvous (MAELYS_BACKEND_FD_TERMINAL), used only when
   * the request's io mode is MAELYS_EXEC_IO_TTY. */
  int terminal_fd;
} maelys__bwrap_env_t;

/* A host path the child stages for a privileged host (see backend.h). */
typedef struct maelys__bwrap_stage {
  char* source;
  uint64_t dev, ino;
  bool is_directory;
  uint32_t owner, group;
} maelys__bwrap_stage_t;

/* An extra descriptor: an opened source, or -1 for an empty data file (the
 * glue creates an empty memfd there). */
typedef struct maelys__bwrap_lowered {
  char** args; /* the --args memfd content, NUL-separated */
  size_t argc, args_capacity;
  char** command; /* after "--": the helper, its options, the payload argv */
  size_t command_argc, command_capacity;
  int* fds; /* child fd = first_extra_fd + index */
  size_t fd_count, fd_capacity;
  maelys__bwrap_stage_t* stages;
  size_t stage_count, stage_capacity;
} maelys__bwrap_lowered_t;

/*
 * The pure lowering: sealed plan + request -> bwrap arguments, the command,
 * the descriptors they name and the paths to stage. Refuses, with a
 * diagnostic naming the rule, anything bwrap cannot express exactly
 * (invariant 11). On failure nothing is left open.
 */
maelys_executor_result_t
maelys__bwrap_lower(const maelys_executor_plan_t* plan,
                    const maelys_execution_request_t* request,
                    const maelys__bwrap_env_t* env,
                    maelys__bwrap_lowered_t* out, char** out_error);

/* Frees the vectors; closes the descriptors through the resolver when
 * close_fds is true. */
void maelys__bwrap_lowered_dispose(maelys__bwrap_lowered_t* lowered,
                                   const maelys__bwrap_resolver_t* resolver,
                                   bool close_fds);

/* ------------------------------------------------------------ the probe */

/* The probe sandboxes of registration, run at once (bwrap-probe.c). */
enum {
  MAELYS__BWRAP_PROBE_MAIN,      /* namespaces, seccomp, mounts, the tree */
  MAELYS__BWRAP_PROBE_EPHEMERAL, /* the ephemeral-write root */
  MAELYS__BWRAP_PROBE_MEMORY,    /* the memory ceiling */
  MAELYS__BWRAP_PROBE_RUNS
};

/* The main run's /tmp, the ephemeral run's scratch, the main run's task
 * ceiling, the memory run's ceiling and what it touches. */
#define MAELYS__BWRAP_PROBE_TMPFS_BYTES 65536
#define MAELYS__BWRAP_PROBE_SCRATCH_BYTES 131072
#define MAELYS__BWRAP_PROBE_TASKS 16
#define MAELYS__BWRAP_PROBE_MEMORY_BYTES (UINT64_C(32) << 20)
#define MAELYS__BWRAP_PROBE_ALLOC_MIB 128
/* The main run prints it once its double-forked descendant is in place. */
#define MAELYS__BWRAP_PROBE_MARKER "tree=ready"

/* The host paths a probe step works on ("/" and "/tmp" are the sandbox's). */
typedef enum maelys__bwrap_probe_path {
  MAELYS__BWRAP_PROBE_PATH_NONE,
  MAELYS__BWRAP_PROBE_PATH_ROOT,
  MAELYS__BWRAP_PROBE_PATH_TMP,
  MAELYS__BWRAP_PROBE_PATH_RW,      /* a writable bind */
  MAELYS__BWRAP_PROBE_PATH_RO,      /* a read-only bind */
  MAELYS__BWRAP_PROBE_PATH_RO_FILE, /* a file in it */
  MAELYS__BWRAP_PROBE_PATH_SECRET,  /* a file in it the plan denies */
  MAELYS__BWRAP_PROBE_PATH_COUNT
} maelys__bwrap_probe_path_t;

/* The helper's argv for probe run `run` ("helper", "probe", its steps), NULL
 * terminated, with paths[] the host paths of the probe's directories
 * (borrowed into argv). The count, or 0 when max is too small. */
size_t maelys__bwrap_probe_argv(int run, const char* const* paths,
                                const char** argv, size_t max);

#define MAELYS__BWRAP_VERDICT_TEXTS 6

/* What the probe's report proves. */
typedef struct maelys__bwrap_verdict {
  uint64_t proved;
  /* Why each bit not proved is missing (NULL: not probed here), pointing to
   * static text or into text[]. */
  const char* reasons[64];
  char text[MAELYS__BWRAP_VERDICT_TEXTS][1200];
} maelys__bwrap_verdict_t;

/* The pure verdict over the three runs' results, as if the runs had
 * `assumed` (the capabilities the launch was prepared with). */
void maelys__bwrap_probe_verdict(
    const maelys_backend_probe_run_t* const runs[MAELYS__BWRAP_PROBE_RUNS],
    uint64_t assumed, maelys__bwrap_verdict_t* out);

/* Why a probe run gave no report, into out. */
void maelys__bwrap_probe_run_failure(const maelys_backend_probe_run_t* run,
                                     char* out, size_t size);

/* A denial listener's status line (bwrap-denials.c) as a
 * MAELYS_BACKEND_EVENT_DENIAL in *ev: true when `line` is one and parses. */
bool maelys__bwrap_denial_line(const char* line, maelys_backend_event_t* ev);

#endif /* MAELYS_BWRAP_INTERNAL_H */
