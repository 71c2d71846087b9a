/* Internal declarations of the orchestrator adapter. Nothing here is
 * installed; the unit tests use it to reach the pure functions. */
#ifndef MAELYS_ORCH_INTERNAL_H
#define MAELYS_ORCH_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "maelys/backend.h"
#include "maelys/executor.h"
#include "maelys/orchestrator.h"

#if defined(__GNUC__)
#define MAELYS__ORCH_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define MAELYS__ORCH_PRINTF(f, a)
#endif

/* Fills *out_error (when wanted and still NULL) and returns `r`. */
maelys_executor_result_t maelys__orch_fail(char** out_error,
                                           maelys_executor_result_t r,
                                           const char* fmt, ...)
    MAELYS__ORCH_PRINTF(3, 4);
char* maelys__orch_asprintf(const char* fmt, ...) MAELYS__ORCH_PRINTF(1, 2);
char* maelys__orch_strdup(const char* s);
/* Absolute, no "." or ".." or empty component, no trailing '/'. */
bool maelys__orch_path_is_clean(const char* path);
bool maelys__orch_within(const char* path, const char* base);
/* "sha256:<hex>" of `len` bytes. */
void maelys__orch_sha256(const void* data, size_t len, char out[72]);
/* 32 random hex digits. 0 or -1. */
int maelys__orch_random_id(char out[33]);

/* ------------------------------------------------------------ the spec */

typedef struct orch_private {
  char* path;
  uint64_t size;
} orch_private_t;

typedef struct orch_list {
  char** items;
  size_t count, capacity;
} orch_list_t;

struct maelys_orchestrator_spec {
  char* executable;
  orch_list_t argv;
  bool argv_set;
  char* workspace;
  bool workspace_writable;
  orch_list_t writable, readable, denied;
  orch_private_t* privates;
  size_t private_count, private_capacity;
  maelys_orchestrator_runtime_t runtime;
  orch_list_t env_names, env_values;
  orch_list_t pass;
  bool network_set;
  maelys_executor_network_t network;
  bool limit_set[9];
  uint64_t limits[9];
  maelys_orchestrator_endpoint_t endpoint;
  maelys_exec_stderr_mode_t stderr_mode;
  char* backend;
};

int maelys__orch_list_add(orch_list_t* l, const char* s);
void maelys__orch_list_free(orch_list_t* l);

/* -------------------------------------------- the filesystem, injectable */

typedef enum orch_kind {
  ORCH_ABSENT = 0,
  ORCH_DIRECTORY,
  ORCH_FILE,
  ORCH_SYMLINK,
  ORCH_OTHER /* a socket, device or fifo; also "cannot tell" */
} orch_kind_t;

/* How the checks see the host's filesystem. The default uses lstat and
 * readlink; the unit tests install an in-memory tree. */
typedef struct maelys__orch_fs {
  orch_kind_t (*kind)(void* ctx, const char* path);
  /* The link's text into buf (NUL-terminated); -1 on failure. */
  int (*readlink)(void* ctx, const char* path, char* buf, size_t size);
  void* ctx;
} maelys__orch_fs_t;

extern const maelys__orch_fs_t maelys__orch_host_fs;

void maelys__orch_boundary_set_fs(maelys_orchestrator_boundary_t* b,
                                  const maelys__orch_fs_t* fs);

/* ------------------------------------------------------------ boundary */

typedef enum orch_access { ORCH_READ = 1, ORCH_WRITE = 2 } orch_access_t;

typedef struct orch_grant {
  char* path;
  orch_access_t access;
  maelys_executor_scope_t scope;
  char* asked;
  char* reason;
} orch_grant_t;

struct maelys_orchestrator_expansion {
  orch_grant_t* grants;
  size_t grant_count;
  bool network_inherit;
  char* network_reason;
  char* base_digest;
  char* backend;
  char* json;
  char digest[72];
};

/* One declared access of an operation. */
typedef struct orch_declared {
  int kind; /* 1 read, 2 write, 3 connect */
  char* path_or_host;
  unsigned port;
} orch_declared_t;

struct maelys_orchestrator_operation {
  char* name;
  char id[24];
  maelys_execution_request_t* request;
  orch_declared_t* declared;
  size_t declared_count, declared_capacity;
  uint64_t wall_ms;
  maelys_orchestrator_start_cb start_cb;
  void* start_data;
  json_t* host_context; /* the receipt's context.host, or NULL */
};

/* The check of a list of declared accesses (and, when not NULL, a request)
 * against the boundary's active plan: the pure core of everything above. */
maelys_executor_result_t
maelys__orch_check(const maelys_orchestrator_boundary_t* b,
                   const orch_declared_t* declared, size_t count,
                   const maelys_execution_request_t* request,
                   maelys_orchestrator_check_t** out_check, char** out_error);

/* The plan `base` (sealed) plus `e`, with decision digest `decision`,
 * sealed: a new object; `base` is never touched. */
maelys_executor_result_t
maelys__orch_apply(const maelys_executor_plan_t* base,
                   const maelys_orchestrator_expansion_t* e,
                   const char* decision_digest, maelys_executor_plan_t** out,
                   char** out_error);

/* Records a decision and, for an approval, swaps in the new plan (consumed).
 */
void maelys__orch_boundary_record(maelys_orchestrator_boundary_t* b,
                                  json_t* decision,
                                  maelys_executor_plan_t* new_plan);
/* The next decision number of the boundary (1, 2, ...). */
unsigned maelys__orch_boundary_next_decision(maelys_orchestrator_boundary_t* b);
const char*
maelys__orch_boundary_backend(const maelys_orchestrator_boundary_t* b);

#endif
