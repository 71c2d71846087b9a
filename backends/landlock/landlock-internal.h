/* Internals of the Landlock backend, shared with its unit tests. */
#ifndef MAELYS_LANDLOCK_INTERNAL_H
#define MAELYS_LANDLOCK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "maelys/backend.h"

/*
 * The kernel's Landlock interface, up to ABI 7. The values are the kernel's
 * (include/uapi/linux/landlock.h); they are spelt out here because the
 * system header of older distributions stops at ABI 2 and lacks the network
 * and scope members of the ruleset attribute.
 */
#define MAELYS__LL_FS_EXECUTE (UINT64_C(1) << 0)
#define MAELYS__LL_FS_WRITE_FILE (UINT64_C(1) << 1)
#define MAELYS__LL_FS_READ_FILE (UINT64_C(1) << 2)
#define MAELYS__LL_FS_READ_DIR (UINT64_C(1) << 3)
#define MAELYS__LL_FS_REMOVE_DIR (UINT64_C(1) << 4)
#define MAELYS__LL_FS_REMOVE_FILE (UINT64_C(1) << 5)
#define MAELYS__LL_FS_MAKE_CHAR (UINT64_C(1) << 6)
#define MAELYS__LL_FS_MAKE_DIR (UINT64_C(1) << 7)
#define MAELYS__LL_FS_MAKE_REG (UINT64_C(1) << 8)
#define MAELYS__LL_FS_MAKE_SOCK (UINT64_C(1) << 9)
#define MAELYS__LL_FS_MAKE_FIFO (UINT64_C(1) << 10)
#define MAELYS__LL_FS_MAKE_BLOCK (UINT64_C(1) << 11)
#define MAELYS__LL_FS_MAKE_SYM (UINT64_C(1) << 12)
#define MAELYS__LL_FS_REFER (UINT64_C(1) << 13)     /* ABI 2 */
#define MAELYS__LL_FS_TRUNCATE (UINT64_C(1) << 14)  /* ABI 3 */
#define MAELYS__LL_FS_IOCTL_DEV (UINT64_C(1) << 15) /* ABI 5 */

#define MAELYS__LL_NET_BIND_TCP (UINT64_C(1) << 0)    /* ABI 4 */
#define MAELYS__LL_NET_CONNECT_TCP (UINT64_C(1) << 1) /* ABI 4 */

#define MAELYS__LL_SCOPE_ABSTRACT_UNIX (UINT64_C(1) << 0) /* ABI 6 */
#define MAELYS__LL_SCOPE_SIGNAL (UINT64_C(1) << 1)        /* ABI 6 */

#define MAELYS__LL_RULE_PATH_BENEATH 1
#define MAELYS__LL_CREATE_RULESET_VERSION (1U << 0)

/* The oldest ABI the backend runs on: before ABI 3 truncate(2) is not
 * mediated, so a file the plan only lets the payload read could still be
 * emptied through its path. */
#define MAELYS__LL_MIN_ABI 3
/* Network NONE needs the TCP rules (ABI 4); the process tree and the
 * scoping of abstract unix sockets need the scopes (ABI 6). */
#define MAELYS__LL_NET_ABI 4
#define MAELYS__LL_SCOPE_ABI 6

/* Rights that only apply to files (a rule on a file may hold no other). */
#define MAELYS__LL_FS_FILE_RIGHTS                                              \
  (MAELYS__LL_FS_EXECUTE | MAELYS__LL_FS_WRITE_FILE |                          \
   MAELYS__LL_FS_READ_FILE | MAELYS__LL_FS_TRUNCATE | MAELYS__LL_FS_IOCTL_DEV)

/* Every filesystem right the kernel's ABI `abi` knows: the ruleset handles
 * all of them, so that whatever no rule grants is denied. */
uint64_t maelys__ll_fs_rights(int abi);

/* The rights a READ grant gives (listing, reading, executing: what a
 * read-only bind gives under bubblewrap), for a directory or a file. */
uint64_t maelys__ll_read_rights(int abi, bool directory);
/* The rights a WRITE grant gives: READ's plus creating, removing, renaming
 * within, truncating; never device nodes. */
uint64_t maelys__ll_write_rights(int abi, bool directory);

typedef enum maelys__ll_kind {
  MAELYS__LL_DIRECTORY = 1,
  MAELYS__LL_FILE = 2,
  MAELYS__LL_SYMLINK = 3,
  MAELYS__LL_DEVICE = 4, /* a character device */
  MAELYS__LL_OTHER = 5   /* socket, fifo, block device */
} maelys__ll_kind_t;

/* What the resolver learnt of a host path. */
typedef struct maelys__ll_node {
  maelys__ll_kind_t kind;
  uint32_t owner;
  uint32_t mode; /* st_mode & 07777 */
  /* Every ancestor is searchable and the object readable (and, for a
   * directory, searchable) by "other": an unrelated uid reaches it. */
  bool world_readable;
  /* The object is writable by "other" and every ancestor searchable. */
  bool world_writable;
  /* On a kernel interface filesystem (procfs, sysfs, cgroupfs, securityfs,
   * debugfs...), where a write is not a write to a file. */
  bool kernel_fs;
  char link[256]; /* SYMLINK: the link's text */
} maelys__ll_node_t;

/*
 * The lowering's only view of the filesystem, injectable so that the unit
 * tests run it without one. describe() looks at `path` without following any
 * symbolic link: a link as its last component is reported as SYMLINK, a link
 * before it is -ELOOP, an absent path -ENOENT. create_dir() creates a
 * directory (0700) and its missing parents, for MISSING_CREATE binds.
 */
typedef struct maelys__ll_resolver {
  void* ctx;
  int (*describe)(void* ctx, const char* path, maelys__ll_node_t* out);
  int (*create_dir)(void* ctx, const char* path);
  /* The names in the directory `dir` (no "." or ".."), opened without
   * following any symbolic link, at most `max` of them: *names (malloc'd
   * strings in a malloc'd array, freed by the caller) and *count; -E2BIG
   * when there are more. */
  int (*list)(void* ctx, const char* dir, size_t max, char*** names,
              size_t* count);
} maelys__ll_resolver_t;

typedef struct maelys__ll_env {
  const maelys__ll_resolver_t* resolver;
  int abi; /* the kernel's Landlock ABI */
  /* The host is uid 0: the payload runs as a per-execution identity, which
   * has no right of its own on anything root owns. */
  bool host_root;
  /* The identity the request fixed (host_root only), or none. */
  bool identity_fixed;
  uint32_t identity_uid;
} maelys__ll_env_t;

/* One Landlock path-beneath rule. */
typedef struct maelys__ll_rule {
  char* path;
  uint64_t access;
  bool directory;
} maelys__ll_rule_t;

typedef struct maelys__ll_lowered {
  /* The ruleset's handled rights and scopes. */
  uint64_t handled_fs, handled_net, scoped;
  maelys__ll_rule_t* rules;
  size_t rule_count, rule_capacity;
  /* The directories of a writable tree frozen around a read-only path or a
   * protected name inside it (see landlock-lower.c, "carving"): readable,
   * their entries granted one by one, no entry of their own created,
   * removed or renamed. */
  char** frozen;
  size_t frozen_count;
  /* Seccomp: the baseline's denial of every socket family but AF_UNIX
   * (network NONE), and this backend's denial of AF_UNIX sockets (always:
   * with the host's root, a pathname socket such as docker.sock or the
   * session bus would otherwise be reachable with the user's rights). */
  bool deny_inet;
  bool deny_unix;
} maelys__ll_lowered_t;

/*
 * The pure lowering: a sealed plan to a Landlock ruleset description and
 * the seccomp denials, exact or refused with a diagnostic naming the rule or
 * mount that cannot be expressed. Nothing is opened; the resolver is only
 * asked what exists (and, for MISSING_CREATE, to create a directory).
 */
maelys_executor_result_t maelys__ll_lower(const maelys_executor_plan_t* plan,
                                          const maelys__ll_env_t* env,
                                          maelys__ll_lowered_t* out,
                                          char** out_error);

void maelys__ll_lowered_dispose(maelys__ll_lowered_t* lowered);

/* The most entries a frozen directory may hold: each is a rule. */
#define MAELYS__LL_MAX_FROZEN_ENTRIES 4096

/* The character devices a DEV mount stands for (NULL-terminated). */
extern const char* const maelys__ll_dev_files[];

/* Why the probe's two runs did not prove PROCESS_TREE (heap), or NULL when
 * they did: a cgroup to end the tree (`cgroup_dir`, or `cgroup_missing`
 * says why there is none), signals scoped in run A's report, and both runs'
 * stdout ended after their end (run A: the lifeline dropped; run B: a
 * forced stop). A run B that never reached its marker tested nothing, and
 * its own failure is the reason. */
char* maelys__ll_tree_reason(const char* cgroup_dir, const char* cgroup_missing,
                             const maelys_backend_probe_run_t runs[2]);

#endif /* MAELYS_LANDLOCK_INTERNAL_H */
