/*
 * What a writable workspace keeps from its own payload (issue 17, item 6):
 * the host's tools read some files of a workspace as instructions -- git
 * runs .git/hooks and the programs .git/config names on the user's next
 * `git commit` -- so a payload that may write the workspace must not be able
 * to write those, nor replace the directories that hold them, nor create
 * them where none existed. With the network inherited, well-known secrets in
 * the workspace are denied too (secrets plus a network is exfiltration).
 *
 * Protections are plan rules nested inside the workspace's rule: the
 * bubblewrap backend binds each on top of the workspace, so each is a mount
 * point inside the sandbox, and the kernel refuses to rename, remove or
 * replace a mount point (EBUSY) as well as to write a read-only one (EROFS).
 * A name that does not exist yet is *reserved*: an empty read-only
 * placeholder holds it for the run and is removed after the last run that
 * uses it (see protect.c for the locking). The landlock backend, which has
 * no mounts and whose rights only add up, freezes the directories that hold
 * them instead (backends/landlock/landlock-lower.c, "carving").
 */
#ifndef MAELYS_WARDEN_PROTECT_H
#define MAELYS_WARDEN_PROTECT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include <jansson.h>

#include "cli.h"
#include "maelys/executor.h"

typedef enum warden_protect_kind {
  /* An existing file or directory, bound read-only over itself. */
  WARDEN_PROTECT_READ_ONLY = 1,
  /* An existing directory bound writable over itself: a mount point the
   * payload can write in but cannot rename, remove or replace. */
  WARDEN_PROTECT_PINNED,
  /* An absent name held by an empty read-only placeholder for the run. */
  WARDEN_PROTECT_RESERVED,
  /* A secret, denied (a mode-000 overlay). */
  WARDEN_PROTECT_DENIED
} warden_protect_kind_t;

typedef struct warden_protect_item {
  char* path;
  warden_protect_kind_t kind;
  bool is_dir;
  const char* why; /* static text */
} warden_protect_item_t;

/* A name that did not exist at launch and that no mount can reserve without
 * breaking git (see protect.c): checked after the run. */
typedef struct warden_protect_watch {
  char* path;
  const char* why;
} warden_protect_watch_t;

typedef struct warden_placeholder {
  char* path;
  int fd; /* holds a shared flock while the run uses it */
  dev_t dev;
  ino_t ino;
  bool is_dir;
} warden_placeholder_t;

typedef struct warden_protection {
  warden_protect_item_t* items;
  size_t count, capacity;
  char** unprotected; /* the --unprotect paths, absolute */
  bool* unprotect_used;
  size_t unprotected_count;
  warden_protect_watch_t* watches;
  size_t watch_count, watch_capacity;
  warden_placeholder_t* held;
  size_t held_count;
  /* Identities of the protected paths at launch (for the audit). */
  dev_t* devs;
  ino_t* inos;
  /* The writable workspace whose nested repositories the audit checks
   * (NULL: none, or .git unprotected), and when the run began. */
  char* nested_root;
  struct timespec started;
} warden_protection_t;

void warden_protection_free(warden_protection_t* p);

/* Scans the directory `root` (absolute, physical) of a plan: when
 * `writable`, git's files and .maelys; when `network_inherit`, the secrets.
 * Then drops what `unprotect` names (paths relative to `root`, or absolute):
 * an --unprotect that names nothing protected is refused. */
int warden_protect_scan(warden_protection_t* p, const char* root, bool writable,
                        bool network_inherit, const char* const* unprotect,
                        size_t unprotect_count, cli_error_t* err);

/* Adds a rule per protected item to the unsealed `plan` (a path that already
 * has a rule of the plan keeps that rule). */
int warden_protect_add_rules(const warden_protection_t* p,
                             maelys_executor_plan_t* plan, cli_error_t* err);

/* For a plan read from a file: the protections it carries -- rules nested
 * strictly inside a writable rule (and denials inside any rule) -- so that
 * reservation, the audit and the receipt treat it like a built-in profile's
 * plan. */
int warden_protect_from_plan(warden_protection_t* p,
                             const maelys_executor_plan_t* plan,
                             cli_error_t* err);

/* The plan without the rules of the reserved names and of `also_drop` (a
 * path made only just before the spawn, such as a persistent home that does
 * not exist yet; may be NULL), sealed (NULL when there is nothing to drop):
 * spawn's checks run on it before any placeholder is made, so that a run
 * refused anyway (a workspace of /, /tmp, a home...) never creates one
 * there, and a dry run checks what it can without creating anything. */
int warden_protect_unreserved_plan(const warden_protection_t* p,
                                   const maelys_executor_plan_t* plan,
                                   const char* also_drop,
                                   maelys_executor_plan_t** out,
                                   cli_error_t* err);

/* A sealed plan made elsewhere (an agent spec's) with the protections' rules
 * added and sealed again: `plan` is unchanged, *out is the protected copy. A
 * path the plan already rules keeps its rule. */
int warden_protect_sealed_plan(const warden_protection_t* p,
                               const maelys_executor_plan_t* plan,
                               maelys_executor_plan_t** out, cli_error_t* err);

/* Creates (or joins) the placeholders of the reserved names and records the
 * identity of every protected path. Undo with warden_protect_release. */
int warden_protect_reserve(warden_protection_t* p, cli_error_t* err);
/* Removes the placeholders no other run uses any more. Idempotent. */
void warden_protect_release(warden_protection_t* p);

/* Whether `path` (absolute, with `st` from lstat) is a placeholder this
 * program makes: empty, with the placeholder's mode. */
bool warden_protect_is_placeholder(const char* path, const struct stat* st);

/* After the execution ended (nothing of it runs any more): a protected path
 * replaced or removed on the host during the run (the kernel then drops the
 * sandbox's mount on it), a watched name the payload created, or a nested
 * repository (a `.git` below the workspace's top) made, moved in or whose
 * configuration or hooks changed during the run: git run there by the user
 * would obey it (core.fsmonitor, hooks), and a gitlink the payload writes
 * in the top index makes `git status` enter it. A created name or such a
 * `.git` is moved aside to NAME.maelys-quarantine-ID so that git ignores it.
 * Calls `report` with one line per finding; returns the number of findings. */
size_t warden_protect_audit(warden_protection_t* p, const char* execution_id,
                            void (*report)(const char* line, void* data),
                            void* data);

/* {"protected": [{"path", "protection", "why"}...], "unprotected": [...]} */
json_t* warden_protect_json(const warden_protection_t* p);
const char* warden_protect_kind_name(warden_protect_kind_t kind);

#endif
