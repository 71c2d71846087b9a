/*
 * What the bubblewrap backend's registration probe runs and what its report
 * proves, as data: the steps each probe sandbox's payload (the helper's
 * "probe" command) performs, which give the helper's argv, and one row per
 * check {capabilities, run, line the probe prints, reason when missing},
 * read by one pure function. A new capability is a row (and a step when it
 * needs a new check) and a unit test (tests/unit/test-bwrap-probe.c); the
 * glue in bwrap.c only runs the sandboxes.
 *
 * The helper prints "key=value" lines in the order of its arguments, and
 * names neither the path of a "write" nor of a "read": the line of step S is
 * the n-th line with its key, n being the number of earlier steps that print
 * that key. Steps and rows name each other through one enum, so the argv and
 * the reading cannot drift apart.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bwrap-internal.h"

/* ------------------------------------------------------------ the steps */

/* Every step of every probe run, in the order each run performs them. */
typedef enum step {
  /* MAELYS__BWRAP_PROBE_MAIN */
  STEP_IDENTITY, /* uid=, euid=, pid=, caps= */
  STEP_SECCOMP,  /* seccomp=MODE */
  STEP_NET,      /* inet=, unix=, interfaces=, only_loopback= */
  STEP_USERNS,   /* userns= */
  STEP_WRITE_ROOT,
  STEP_WRITE_RW,
  STEP_WRITE_RO,
  STEP_READ_FILE,
  STEP_READ_SECRET,
  STEP_FILL_TMP, /* fill=BYTES:ERRNO */
  STEP_TASKS,    /* tasks=FORKED:ERRNO */
  STEP_TREE,     /* tree=ready (the marker), then waits */
  /* MAELYS__BWRAP_PROBE_EPHEMERAL */
  STEP_EPHEMERAL_WRITE,
  STEP_EPHEMERAL_FILL,
  /* MAELYS__BWRAP_PROBE_MEMORY */
  STEP_ALLOC, /* alloc=done:MIB, unless the ceiling kills it first */
  STEP_COUNT
} step_t;

#define STR_(x) #x
#define STR(x) STR_(x)

static const struct {
  int run;
  const char* name; /* the helper's probe argument, and the key it prints */
  maelys__bwrap_probe_path_t path;
  const char* extra; /* a further argument, or NULL */
} steps[STEP_COUNT] = {
    [STEP_IDENTITY] = {MAELYS__BWRAP_PROBE_MAIN, "identity", 0, NULL},
    [STEP_SECCOMP] = {MAELYS__BWRAP_PROBE_MAIN, "seccomp", 0, NULL},
    [STEP_NET] = {MAELYS__BWRAP_PROBE_MAIN, "net", 0, NULL},
    [STEP_USERNS] = {MAELYS__BWRAP_PROBE_MAIN, "userns", 0, NULL},
    [STEP_WRITE_ROOT] = {MAELYS__BWRAP_PROBE_MAIN, "write",
                         MAELYS__BWRAP_PROBE_PATH_ROOT, NULL},
    [STEP_WRITE_RW] = {MAELYS__BWRAP_PROBE_MAIN, "write",
                       MAELYS__BWRAP_PROBE_PATH_RW, NULL},
    [STEP_WRITE_RO] = {MAELYS__BWRAP_PROBE_MAIN, "write",
                       MAELYS__BWRAP_PROBE_PATH_RO, NULL},
    [STEP_READ_FILE] = {MAELYS__BWRAP_PROBE_MAIN, "read",
                        MAELYS__BWRAP_PROBE_PATH_RO_FILE, NULL},
    [STEP_READ_SECRET] = {MAELYS__BWRAP_PROBE_MAIN, "read",
                          MAELYS__BWRAP_PROBE_PATH_SECRET, NULL},
    [STEP_FILL_TMP] = {MAELYS__BWRAP_PROBE_MAIN, "fill",
                       MAELYS__BWRAP_PROBE_PATH_TMP,
                       STR(MAELYS__BWRAP_PROBE_TMPFS_BYTES)},
    [STEP_TASKS] = {MAELYS__BWRAP_PROBE_MAIN, "tasks", 0, NULL},
    [STEP_TREE] = {MAELYS__BWRAP_PROBE_MAIN, "tree", 0, NULL},
    [STEP_EPHEMERAL_WRITE] = {MAELYS__BWRAP_PROBE_EPHEMERAL, "write",
                              MAELYS__BWRAP_PROBE_PATH_ROOT, NULL},
    [STEP_EPHEMERAL_FILL] = {MAELYS__BWRAP_PROBE_EPHEMERAL, "fill",
                             MAELYS__BWRAP_PROBE_PATH_ROOT,
                             STR(MAELYS__BWRAP_PROBE_SCRATCH_BYTES)},
    [STEP_ALLOC] = {MAELYS__BWRAP_PROBE_MEMORY, "alloc", 0,
                    STR(MAELYS__BWRAP_PROBE_ALLOC_MIB)},
};

static const char* const fixed_paths[MAELYS__BWRAP_PROBE_PATH_COUNT] = {
    [MAELYS__BWRAP_PROBE_PATH_ROOT] = "/",
    [MAELYS__BWRAP_PROBE_PATH_TMP] = "/tmp",
};

size_t maelys__bwrap_probe_argv(int run, const char* const* paths,
                                const char** argv, size_t max) {
  size_t n = 0;
  if (max < 3)
    return 0;
  argv[n++] = "helper";
  argv[n++] = "probe";
  for (int s = 0; s < STEP_COUNT; s++) {
    if (steps[s].run != run)
      continue;
    if (n + 4 > max)
      return 0;
    argv[n++] = steps[s].name;
    if (steps[s].path != MAELYS__BWRAP_PROBE_PATH_NONE)
      argv[n++] = fixed_paths[steps[s].path] ? fixed_paths[steps[s].path]
                                             : paths[steps[s].path];
    if (steps[s].extra != NULL)
      argv[n++] = steps[s].extra;
  }
  argv[n] = NULL;
  return n;
}

/* ------------------------------------------------------------- the rows */

typedef enum check {
  CHECK_RAN,               /* the run reached its marker: the sandbox exists */
  CHECK_LINE,              /* the step printed key=value */
  CHECK_NO_LINE,           /* the run printed no line key=value */
  CHECK_AT_MOST,           /* key=N:ERRNO with N <= limit and ERRNO == error */
  CHECK_BELOW,             /* key=N:ERRNO with N < limit and ERRNO == error */
  CHECK_TREE_GONE,         /* stdout ended once the lifeline was dropped */
  CHECK_ROOT_UNPRIVILEGED, /* the sandbox's pid 1: a non-zero host uid, no
                              capability */
  CHECK_PROVED,            /* every bit of `requires` was proved above */
  CHECK_ASSUMED,           /* the runs assumed the capability */
  CHECK_SPAWNED,           /* the run started (its error follows the reason) */
  CHECK_KILLED,            /* the run ended by SIGKILL */
  CHECK_NEVER              /* not offered */
} check_t;

/* A row's reason when the run gave no report: why it did not. */
#define RUN_FAILURE NULL

typedef struct row {
  uint64_t capabilities;
  int run;
  check_t check;
  step_t step;       /* CHECK_LINE, CHECK_AT_MOST, CHECK_BELOW */
  const char* key;   /* the line's key (for CHECK_LINE, CHECK_NO_LINE) */
  const char* value; /* the line's value */
  long limit;
  int error;
  uint64_t requires; /* CHECK_PROVED */
  const char* reason;
} row_t;

#define MAIN MAELYS__BWRAP_PROBE_MAIN
#define EPHEMERAL MAELYS__BWRAP_PROBE_EPHEMERAL
#define MEMORY MAELYS__BWRAP_PROBE_MEMORY

static const char none_only_namespace[] =
    "an AF_INET socket was not refused with EPERM inside the probe sandbox "
    "(seccomp socket denial unproved); only the network namespace holds";
static const char read_only_bind[] =
    "a read-only bind was not readable, or was writable, in the probe "
    "sandbox";

/* A capability is proved when every one of its rows holds; the first row
 * that fails gives its reason. */
static const row_t rows[] = {
    /* The sandbox ran: its namespaces exist. */
    {MAELYS_BACKEND_CAP_USER_NAMESPACE | MAELYS_BACKEND_CAP_MOUNT_NAMESPACE,
     MAIN, CHECK_RAN, .reason = RUN_FAILURE},
    /* The payload runs as pid 2, under the helper as the sandbox's init. */
    {MAELYS_BACKEND_CAP_PID_NAMESPACE, MAIN, CHECK_LINE, STEP_IDENTITY, "pid",
     "2", .reason = "the probe payload was not in a new pid namespace"},
    {MAELYS_BACKEND_CAP_SECCOMP, MAIN, CHECK_LINE, STEP_SECCOMP, "seccomp", "2",
     .reason = "the seccomp filter was not in force in the probe sandbox"},
    {MAELYS_BACKEND_CAP_NETWORK_NAMESPACE | MAELYS_BACKEND_CAP_NETWORK_NONE,
     MAIN, CHECK_LINE, STEP_NET, "only_loopback", "yes",
     .reason = "the probe sandbox saw a network interface other than "
               "loopback"},
    /* Invariant 9: NONE needs both halves, proved. */
    {MAELYS_BACKEND_CAP_NETWORK_NONE, MAIN, CHECK_PROVED,
     .requires = MAELYS_BACKEND_CAP_SECCOMP, .reason = none_only_namespace},
    {MAELYS_BACKEND_CAP_NETWORK_NONE, MAIN, CHECK_LINE, STEP_NET, "inet",
     "errno:1", .reason = none_only_namespace},
    {MAELYS_BACKEND_CAP_NETWORK_NONE, MAIN, CHECK_LINE, STEP_NET, "unix", "ok",
     .reason = none_only_namespace},
    /* Tried only while bwrap takes --disable-userns (the glue drops the
     * assumption, with its reason, for an older bwrap). */
    {MAELYS_BACKEND_CAP_DISABLE_USERNS, MAIN, CHECK_ASSUMED,
     .reason = "bwrap refused --disable-userns"},
    {MAELYS_BACKEND_CAP_DISABLE_USERNS, MAIN, CHECK_NO_LINE, .key = "userns",
     .value = "ok",
     .reason = "the probe sandbox could create a user namespace"},
    {MAELYS_BACKEND_CAP_ROOT_READONLY, MAIN, CHECK_LINE, STEP_WRITE_ROOT,
     "write", "errno:30",
     .reason = "creating a file in the probe sandbox's / did not fail with "
               "EROFS"},
    {MAELYS_BACKEND_CAP_FILESYSTEM_WRITE, MAIN, CHECK_LINE, STEP_WRITE_RW,
     "write", "ok",
     .reason = "writing into a writable bind failed in the probe sandbox"},
    {MAELYS_BACKEND_CAP_FILESYSTEM_READ, MAIN, CHECK_LINE, STEP_READ_FILE,
     "read", "ok", .reason = read_only_bind},
    {MAELYS_BACKEND_CAP_FILESYSTEM_READ, MAIN, CHECK_LINE, STEP_WRITE_RO,
     "write", "errno:30", .reason = read_only_bind},
    {MAELYS_BACKEND_CAP_FILESYSTEM_DENY, MAIN, CHECK_LINE, STEP_READ_SECRET,
     "read", "errno:13",
     .reason = "a denied file was readable in the probe sandbox"},
    {MAELYS_BACKEND_CAP_TMPFS_SIZE, MAIN, CHECK_AT_MOST, STEP_FILL_TMP, "fill",
     .limit = MAELYS__BWRAP_PROBE_TMPFS_BYTES, .error = ENOSPC,
     .reason = "a 64 KiB tmpfs accepted more than 64 KiB"},
    /* Invariants 8 and 22: once the lifeline was dropped (as a host's death
     * drops it), stdout reached end-of-file, so the descendant that
     * double-forked into its own session, which held it, was gone too: the
     * launcher's death ends the whole tree, and a forced stop is that
     * death. */
    {MAELYS_BACKEND_CAP_PROCESS_TREE, MAIN, CHECK_TREE_GONE,
     .reason = "a double-forked, setsid() descendant outlived the end of the "
               "probe sandbox's launcher"},
    /* The task ceiling: forks stopped with EAGAIN below it. */
    {MAELYS_BACKEND_CAP_LIMIT_TASKS, MAIN, CHECK_BELOW, STEP_TASKS, "tasks",
     .limit = MAELYS__BWRAP_PROBE_TASKS, .error = EAGAIN,
     .reason = "a probe sandbox with a ceiling of 16 tasks forked past it"},
    /* Namespaces, seccomp and the mounts are inherited by every
     * descendant. */
    {MAELYS_BACKEND_CAP_PROCESS_CONFINEMENT, MAIN, CHECK_PROVED,
     .requires = MAELYS_BACKEND_CAP_SECCOMP | MAELYS_BACKEND_CAP_PID_NAMESPACE,
     .reason = "seccomp or the pid namespace is unproved"},
    {MAELYS_BACKEND_CAP_UNPRIVILEGED, MAIN, CHECK_LINE, STEP_IDENTITY, "caps",
     "none", .reason = "the probe payload held a capability"},
    {MAELYS_BACKEND_CAP_UNPRIVILEGED, MAIN, CHECK_ROOT_UNPRIVILEGED,
     .reason = "the sandbox's pid 1 ran as host uid 0 or held a capability"},
    /* The ephemeral-write root: writable, and bounded by its scratch
     * size. */
    {MAELYS_BACKEND_CAP_ROOT_EPHEMERAL_WRITE, EPHEMERAL, CHECK_LINE,
     STEP_EPHEMERAL_WRITE, "write", "ok", .reason = RUN_FAILURE},
    {MAELYS_BACKEND_CAP_ROOT_EPHEMERAL_WRITE, EPHEMERAL, CHECK_AT_MOST,
     STEP_EPHEMERAL_FILL, "fill", .limit = MAELYS__BWRAP_PROBE_SCRATCH_BYTES,
     .error = ENOSPC,
     .reason = "the ephemeral root accepted more than its scratch size"},
    /* The memory ceiling: the probe that touches 128 MiB under a 32 MiB
     * ceiling is killed before it finishes. */
    {MAELYS_BACKEND_CAP_LIMIT_MEMORY, MEMORY, CHECK_SPAWNED,
     .reason = "memory: unbounded"},
    {MAELYS_BACKEND_CAP_LIMIT_MEMORY, MEMORY, CHECK_NO_LINE, .key = "alloc",
     .value = "done:" STR(MAELYS__BWRAP_PROBE_ALLOC_MIB),
     .reason = "a probe sandbox touched 128 MiB under a 32 MiB memory "
               "ceiling"},
    {MAELYS_BACKEND_CAP_LIMIT_MEMORY, MEMORY, CHECK_KILLED,
     .reason = RUN_FAILURE},
    {MAELYS_BACKEND_CAP_NETWORK_MEDIATED_FD4 |
         MAELYS_BACKEND_CAP_NETWORK_MEDIATED_EGRESS,
     MAIN, CHECK_NEVER,
     .reason = "the bubblewrap backend has no mediated network frontend; "
               "compose the egress adapter in the host"},
};

/* ---------------------------------------------------------- the reading */

/* The `nth` (0-based) whole line of `out` that starts with "key=": its value
 * (up to the end of the line) in `value`, or false. */
static bool nth_line(const char* out, const char* key, int nth, char* value,
                     size_t size) {
  size_t klen = strlen(key);
  for (const char* p = out; p != NULL && *p != '\0';) {
    const char* end = strchr(p, '\n');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len > klen && strncmp(p, key, klen) == 0 && p[klen] == '=' &&
        nth-- == 0) {
      size_t vlen = len - klen - 1;
      if (vlen >= size)
        return false;
      memcpy(value, p + klen + 1, vlen);
      value[vlen] = '\0';
      return true;
    }
    p = end ? end + 1 : NULL;
  }
  return false;
}

/* The line step `s` printed with `key`: earlier steps of the same run that
 * print that key come first. */
static bool step_line(const char* out, step_t s, const char* key, char* value,
                      size_t size) {
  int nth = 0;
  for (int t = 0; t < (int)s; t++)
    if (steps[t].run == steps[s].run && strcmp(steps[t].name, key) == 0)
      nth++;
  return out != NULL && nth_line(out, key, nth, value, size);
}

static bool has_line(const char* out, const char* key, const char* value) {
  char v[256];
  for (int nth = 0; out != NULL && nth_line(out, key, nth, v, sizeof v); nth++)
    if (strcmp(v, value) == 0)
      return true;
  return false;
}

void maelys__bwrap_probe_run_failure(const maelys_backend_probe_run_t* run,
                                     char* out, size_t size) {
  if (!run->spawned)
    snprintf(out, size, "the probe sandbox could not start: %s",
             run->spawn_error ? run->spawn_error : "");
  else if (run->outcome == MAELYS_EXEC_OUTCOME_LAUNCH_FAILED)
    snprintf(out, size, "the probe sandbox failed to set up: %s", run->message);
  else if (run->timed_out)
    snprintf(out, size,
             "the probe sandbox ended without its report (timed out after "
             "%llu ms; a heavily loaded host can cause this, and the next "
             "registration probes again)",
             (unsigned long long)run->timeout_ms);
  else
    snprintf(out, size,
             "the probe sandbox ended without its report (no output)");
}

static bool row_holds(const row_t* r, const maelys_backend_probe_run_t* run,
                      uint64_t assumed, uint64_t proved) {
  char value[256];
  long n = -1;
  int err = 0;
  switch (r->check) {
  case CHECK_RAN:
    return run->spawned && run->marker_seen;
  case CHECK_LINE:
    return step_line(run->output, r->step, r->key, value, sizeof value) &&
           strcmp(value, r->value) == 0;
  case CHECK_NO_LINE:
    return run->output != NULL && !has_line(run->output, r->key, r->value);
  case CHECK_AT_MOST:
  case CHECK_BELOW:
    if (!step_line(run->output, r->step, r->key, value, sizeof value) ||
        sscanf(value, "%ld:%d", &n, &err) != 2 || n < 0 || err != r->error)
      return false;
    return r->check == CHECK_AT_MOST ? n <= r->limit : n < r->limit;
  case CHECK_TREE_GONE:
    return run->marker_seen && run->output_eof && !run->timed_out;
  case CHECK_ROOT_UNPRIVILEGED:
    return run->root_uid > 0 && run->root_has_caps == 0;
  case CHECK_PROVED:
    return (proved & r->requires) == r->requires
    ;
  case CHECK_ASSUMED:
    return (assumed & r->capabilities) == r->capabilities;
  case CHECK_SPAWNED:
    return run->spawned;
  case CHECK_KILLED:
    return run->spawned && run->outcome == MAELYS_EXEC_OUTCOME_SIGNALED &&
           run->term_signal == SIGKILL;
  case CHECK_NEVER:
    return false;
  }
  return false;
}

/* The text of a failed row's reason (static, or written into `buf`). */
static const char* row_reason(const row_t* r,
                              const maelys_backend_probe_run_t* run, char* buf,
                              size_t size) {
  /* A tree row whose run never reached its marker tested no tree: the run's
   * own failure is the reason, not a descendant that outlived anything. */
  if (r->reason == RUN_FAILURE ||
      (r->check == CHECK_TREE_GONE && !run->marker_seen)) {
    maelys__bwrap_probe_run_failure(run, buf, size);
    return buf;
  }
  if (r->check == CHECK_SPAWNED) {
    snprintf(buf, size, "%s (%s)", r->reason,
             run->spawn_error ? run->spawn_error : "");
    return buf;
  }
  return r->reason;
}

void maelys__bwrap_probe_verdict(
    const maelys_backend_probe_run_t* const runs[MAELYS__BWRAP_PROBE_RUNS],
    uint64_t assumed, maelys__bwrap_verdict_t* out) {
  memset(out, 0, sizeof *out);
  uint64_t failed = 0;
  size_t used = 0;
  /* Rows are read in order, so a row may rely on what the rows above it
   * proved (CHECK_PROVED); a capability stays proved only if none of its
   * rows failed. */
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    const row_t* r = &rows[i];
    uint64_t open = r->capabilities & ~failed;
    if (open == 0)
      continue;
    if (row_holds(r, runs[r->run], assumed, out->proved)) {
      out->proved |= open;
      continue;
    }
    char* buf = out->text[used];
    const char* why = row_reason(r, runs[r->run], buf, sizeof out->text[0]);
    if (why == buf && used + 1 < MAELYS__BWRAP_VERDICT_TEXTS)
      used++;
    for (int b = 0; b < 64; b++)
      if (open & (UINT64_C(1) << b))
        out->reasons[b] = why;
    failed |= open;
    out->proved &= ~failed;
  }
}
