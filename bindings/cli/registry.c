/*
 * The user's running executions (`ps`, `stop ID`) and their receipts
 * (`receipts [ID]`).
 *
 * A run records itself in STATE_DIR/running/ID.json once its payload was
 * spawned and deletes the record when it ends. The state directory is
 * private (0700) and protected: no plan may make it writable (invariant 18),
 * so a record was written by this user's own maelys-warden. A record
 * outlives a run only when that maelys-warden was killed; `ps` and `stop`
 * recognise such a record because the recorded process is gone, or is
 * another process now (its start time differs), and remove it.
 *
 * `stop` signals the run's maelys-warden, not the sandbox: the warden stops
 * its payload gracefully (SIGTERM to the sandbox's init), by force after its
 * --grace, writes the receipt and exits. Should the warden itself not exit
 * in time, it is killed; its launcher's lifeline then kills the sandbox (the
 * lifetime guarantee), which `stop` waits to see.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "warden.h"

#define RECORD_MAX (64 * 1024)
#define RECEIPT_MAX (1024 * 1024)
/* After the warden's own stop budget: how long `stop` waits before it kills
 * the warden, and then for the sandbox to go. */
#define STOP_SLACK_MS 5000
#define LIFELINE_WAIT_MS 10000

/* ------------------------------------------------------------- processes */

/* The start time of `pid` in clock ticks since boot (field 22 of
 * /proc/PID/stat), or 0 when it does not exist. */
static unsigned long long start_time(pid_t pid) {
  char path[64], text[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0)
    return 0;
  text[n] = '\0';
  /* The command name may hold spaces and parentheses: fields count from
   * the last ')'. */
  char* p = strrchr(text, ')');
  if (p == NULL)
    return 0;
  unsigned long long value = 0;
  int field = 2;
  for (char *save = NULL, *tok = strtok_r(p + 1, " ", &save); tok != NULL;
       tok = strtok_r(NULL, " ", &save))
    if (++field == 22) {
      value = strtoull(tok, NULL, 10);
      break;
    }
  return value;
}

static int pidfd_open_(pid_t pid) {
  return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int pidfd_signal(int pidfd, int sig) {
  return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

/* A descriptor of the process the record names, or -1 when that process is
 * gone (or the pid now names another process). The start time is checked
 * after the pidfd is open, so the pidfd refers to the recorded process. */
static int live_pidfd(pid_t pid, unsigned long long started) {
  if (pid <= 0 || started == 0)
    return -1;
  int fd = pidfd_open_(pid);
  if (fd < 0)
    return -1;
  if (start_time(pid) != started) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Whether the pidfd's process exited within `ms`. */
static bool exited_within(int pidfd, int ms) {
  struct pollfd p = {.fd = pidfd, .events = POLLIN};
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    int r = poll(&p, 1, ms);
    if (r > 0)
      return true;
    if (r == 0 || errno != EINTR)
      return false;
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long spent =
        (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    if (spent >= ms)
      return false;
    ms -= (int)spent;
    t0 = t1;
  }
}

/* ------------------------------------------------------------- records */

static int running_dir(const invocation_t* inv, char* out, size_t size,
                       bool create, cli_error_t* err) {
  char state[PATH_MAX];
  if (warden_state_dir(inv, state, sizeof state, err) != 0)
    return -1;
  snprintf(out, size, "%.4000s/running", state);
  if (create && warden_mkdir_private(out) != 0)
    return cli_fail(err, "IO_FAILED", "Give --state-dir DIR you can write.",
                    "creating '%s': %s", out, strerror(errno));
  return 0;
}

void warden_registry_add(const invocation_t* inv,
                         const maelys_execution_t* execution,
                         const char* program, const char* workspace,
                         const char* backend, int64_t grace_ms) {
  cli_error_t err = {0};
  char dir[PATH_MAX];
  if (running_dir(inv, dir, sizeof dir, true, &err) != 0) {
    fprintf(stderr, "maelys-warden: this run is not listed by 'ps' (%s)\n",
            err.message);
    return;
  }
  pid_t launcher = maelys_execution_pid(execution);
  json_t* doc = json_pack(
      "{s:s, s:i, s:I, s:i, s:I, s:s, s:s, s:s, s:I, s:I}", "id",
      maelys_execution_id(execution), "pid", (int)getpid(), "pid_start",
      (json_int_t)start_time(getpid()), "launcher_pid", (int)launcher,
      "launcher_start", (json_int_t)start_time(launcher), "program", program,
      "workspace", workspace, "backend", backend, "started",
      (json_int_t)time(NULL), "grace_ms", (json_int_t)grace_ms);
  char* text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
  json_decref(doc);
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/%s.json", dir,
           maelys_execution_id(execution));
  int fd =
      text ? open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  0600)
           : -1;
  bool ok = fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text);
  if (fd >= 0)
    close(fd);
  if (!ok)
    fprintf(stderr,
            "maelys-warden: this run is not listed by 'ps' (writing '%s': "
            "%s)\n",
            path, strerror(errno ? errno : EIO));
  free(text);
}

void warden_registry_remove(const invocation_t* inv,
                            const maelys_execution_t* execution) {
  cli_error_t err = {0};
  char dir[PATH_MAX];
  if (running_dir(inv, dir, sizeof dir, false, &err) != 0)
    return;
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/%s.json", dir,
           maelys_execution_id(execution));
  unlink(path);
}

/* A JSON file of at most `max` bytes, read through one descriptor that is a
 * regular file owned by this user and reached without a final link. */
static json_t* load_own(int dirfd, const char* name, size_t max) {
  int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  struct stat st;
  json_t* doc = NULL;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
      (size_t)st.st_size <= max)
    doc = json_loadfd(fd, 0, NULL);
  close(fd);
  return doc;
}

typedef struct record {
  json_t* doc;
  char name[300];
  int pidfd; /* the live warden, or -1 */
} record_t;

typedef struct records {
  record_t* items;
  size_t count;
  int dirfd;
} records_t;

static void records_free(records_t* r) {
  for (size_t i = 0; i < r->count; i++) {
    json_decref(r->items[i].doc);
    if (r->items[i].pidfd >= 0)
      close(r->items[i].pidfd);
  }
  free(r->items);
  if (r->dirfd >= 0)
    close(r->dirfd);
  memset(r, 0, sizeof *r);
  r->dirfd = -1;
}

static int by_start(const void* a, const void* b) {
  json_int_t x =
      json_integer_value(json_object_get(((const record_t*)a)->doc, "started"));
  json_int_t y =
      json_integer_value(json_object_get(((const record_t*)b)->doc, "started"));
  return x < y ? -1 : x > y;
}

/* The live records, oldest first; stale ones are removed on the way. */
static int load_records(const invocation_t* inv, records_t* out,
                        cli_error_t* err) {
  memset(out, 0, sizeof *out);
  out->dirfd = -1;
  char dir[PATH_MAX];
  if (running_dir(inv, dir, sizeof dir, false, err) != 0)
    return -1;
  out->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (out->dirfd < 0)
    return errno == ENOENT ? 0
                           : cli_fail(err, "IO_FAILED", NULL,
                                      "reading '%s': %s", dir, strerror(errno));
  DIR* d = fdopendir(dup(out->dirfd));
  if (d == NULL)
    return cli_fail(err, "IO_FAILED", NULL, "reading '%s': %s", dir,
                    strerror(errno));
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0 ||
        len >= sizeof out->items[0].name)
      continue;
    json_t* doc = load_own(out->dirfd, e->d_name, RECORD_MAX);
    json_t* pid = json_object_get(doc, "pid");
    json_t* started = json_object_get(doc, "pid_start");
    int pidfd =
        json_is_integer(pid) && json_is_integer(started)
            ? live_pidfd((pid_t)json_integer_value(pid),
                         (unsigned long long)json_integer_value(started))
            : -1;
    if (pidfd < 0 || !json_is_string(json_object_get(doc, "id"))) {
      /* Its warden is gone: a record left by a killed run. */
      json_decref(doc);
      if (pidfd >= 0)
        close(pidfd);
      unlinkat(out->dirfd, e->d_name, 0);
      continue;
    }
    record_t* grown = realloc(out->items, (out->count + 1) * sizeof *grown);
    if (grown == NULL) {
      json_decref(doc);
      close(pidfd);
      closedir(d);
      return cli_fail(err, "UNEXPECTED", NULL, "out of memory");
    }
    out->items = grown;
    record_t* r = &out->items[out->count++];
    r->doc = doc;
    r->pidfd = pidfd;
    snprintf(r->name, sizeof r->name, "%s", e->d_name);
  }
  closedir(d);
  /* qsort's array must not be NULL, even for no element (UBSan). */
  if (out->count > 1)
    qsort(out->items, out->count, sizeof *out->items, by_start);
  return 0;
}

static const char* str(json_t* doc, const char* key) {
  const char* s = json_string_value(json_object_get(doc, key));
  return s ? s : "";
}

static json_int_t num(json_t* doc, const char* key) {
  return json_integer_value(json_object_get(doc, key));
}

/* ------------------------------------------------------------------- ps */

static void uptime_text(long long seconds, char* out, size_t size) {
  if (seconds < 0)
    seconds = 0;
  if (seconds >= 86400)
    snprintf(out, size, "%lldd%lldh", seconds / 86400, seconds % 86400 / 3600);
  else if (seconds >= 3600)
    snprintf(out, size, "%lldh%lldm", seconds / 3600, seconds % 3600 / 60);
  else if (seconds >= 60)
    snprintf(out, size, "%lldm%llds", seconds / 60, seconds % 60);
  else
    snprintf(out, size, "%llds", seconds);
}

int warden_ps(const invocation_t* inv) {
  cli_error_t err = {0};
  err.command = "ps";
  records_t recs;
  if (load_records(inv, &recs, &err) != 0) {
    records_free(&recs);
    return cli_emit_failure(inv, &err);
  }
  json_t* list = json_array();
  size_t size = 256 + recs.count * (PATH_MAX * 2 + 128);
  char* text = malloc(size);
  if (text == NULL) {
    records_free(&recs);
    cli_fail(&err, "UNEXPECTED", NULL, "out of memory");
    return cli_emit_failure(inv, &err);
  }
  size_t off = (size_t)snprintf(text, size, "%-32s %8s %8s  %s\n", "ID", "PID",
                                "UPTIME", "PROGRAM (WORKSPACE)");
  time_t now = time(NULL);
  for (size_t i = 0; i < recs.count; i++) {
    json_t* d = recs.items[i].doc;
    char up[32];
    uptime_text((long long)(now - (time_t)num(d, "started")), up, sizeof up);
    json_array_append_new(
        list,
        json_pack("{s:s, s:I, s:I, s:s, s:s, s:s, s:I, s:I}", "id",
                  str(d, "id"), "pid", num(d, "pid"), "launcher_pid",
                  num(d, "launcher_pid"), "program", str(d, "program"),
                  "workspace", str(d, "workspace"), "backend",
                  str(d, "backend"), "started", num(d, "started"),
                  "uptime_seconds", (json_int_t)(now - num(d, "started"))));
    off += (size_t)snprintf(text + off, size - off,
                            "%-32s %8" JSON_INTEGER_FORMAT " %8s  %s (%s)\n",
                            str(d, "id"), num(d, "pid"), up, str(d, "program"),
                            str(d, "workspace"));
  }
  if (recs.count == 0)
    snprintf(text, size, "no running executions\n");
  records_free(&recs);
  int r = cli_emit_success(inv, json_pack("{s:o}", "executions", list), text);
  free(text);
  return r;
}

/* ----------------------------------------------------------------- stop */

/* The one live record whose id starts with `prefix`. */
static record_t* find_record(records_t* recs, const char* prefix,
                             cli_error_t* err) {
  record_t* found = NULL;
  size_t matches = 0;
  for (size_t i = 0; i < recs->count; i++)
    if (strncmp(str(recs->items[i].doc, "id"), prefix, strlen(prefix)) == 0) {
      found = &recs->items[i];
      matches++;
    }
  if (matches == 1)
    return found;
  if (matches == 0)
    cli_fail(
        err, "NOT_FOUND", "'maelys-warden ps' lists your running executions.",
        "no running execution of yours has an id starting with '%s'", prefix);
  else
    cli_fail(err, "VALIDATION_FAILED", "Give more of the id.",
             "%zu running executions have ids starting with '%s'", matches,
             prefix);
  return NULL;
}

int warden_stop(const invocation_t* inv) {
  cli_error_t err = {0};
  err.command = "stop";
  const char* prefix = inv->operands[0];
  if (strlen(prefix) < 4 ||
      strspn(prefix, "0123456789abcdef") != strlen(prefix)) {
    cli_fail(&err, "VALIDATION_FAILED",
             "Give at least 4 hex digits of an id 'maelys-warden ps' shows.",
             "'%s' is not the start of an execution id", prefix);
    return cli_emit_failure(inv, &err);
  }
  records_t recs;
  record_t* rec = NULL;
  if (load_records(inv, &recs, &err) != 0 ||
      (rec = find_record(&recs, prefix, &err)) == NULL) {
    records_free(&recs);
    return cli_emit_failure(inv, &err);
  }
  char id[64];
  snprintf(id, sizeof id, "%s", str(rec->doc, "id"));
  json_int_t grace = num(rec->doc, "grace_ms");
  if (grace <= 0 || grace > 3600000)
    grace = 2000;
  /* The launcher, to see the sandbox go should the warden be killed. */
  int launcher =
      live_pidfd((pid_t)num(rec->doc, "launcher_pid"),
                 (unsigned long long)num(rec->doc, "launcher_start"));
  const char* how = "graceful";
  if (pidfd_signal(rec->pidfd, SIGTERM) != 0) {
    int e = errno;
    if (launcher >= 0)
      close(launcher);
    records_free(&recs);
    cli_fail(&err, e == EPERM ? "ACCESS_DENIED" : "PROCESS_FAILED", NULL,
             "signalling the maelys-warden of %s: %s", id, strerror(e));
    return cli_emit_failure(inv, &err);
  }
  if (!exited_within(rec->pidfd, (int)grace + STOP_SLACK_MS)) {
    how = "forced";
    pidfd_signal(rec->pidfd, SIGKILL);
    exited_within(rec->pidfd, LIFELINE_WAIT_MS);
  }
  bool sandbox_gone = launcher < 0 || exited_within(launcher, LIFELINE_WAIT_MS);
  if (launcher >= 0)
    close(launcher);
  unlinkat(recs.dirfd, rec->name, 0);
  records_free(&recs);
  if (!sandbox_gone) {
    cli_fail(&err, "PROCESS_FAILED", NULL,
             "the maelys-warden of %s was stopped, but its sandbox's "
             "launcher is still running",
             id);
    return cli_emit_failure(inv, &err);
  }
  /* The receipt the warden wrote, when it had the time to. */
  char receipts[PATH_MAX], path[PATH_MAX + 64];
  cli_error_t ignored = {0};
  json_t* receipt = NULL;
  if (warden_receipt_dir(inv, receipts, sizeof receipts, &ignored) == 0) {
    snprintf(path, sizeof path, "%.4000s/%.64s.json", receipts, id);
    int dirfd = open(receipts, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char name[96];
    snprintf(name, sizeof name, "%s.json", id);
    if (dirfd >= 0) {
      receipt = load_own(dirfd, name, RECEIPT_MAX);
      close(dirfd);
    }
  }
  json_t* outcome = json_object_get(receipt, "outcome");
  char text[PATH_MAX + 256];
  snprintf(text, sizeof text, "stopped %s (%s)%s%s\n", id, how,
           receipt ? ", receipt " : "", receipt ? path : "");
  json_t* data =
      json_pack("{s:s, s:s, s:s?, s:O?}", "id", id, "stopped", how, "receipt",
                receipt ? path : NULL, "outcome", outcome);
  json_decref(receipt);
  return cli_emit_success(inv, data, text);
}

/* ------------------------------------------------------------- receipts */

typedef struct receipt_file {
  char name[96];
  struct timespec mtime;
} receipt_file_t;

static int newest_first(const void* a, const void* b) {
  const struct timespec* x = &((const receipt_file_t*)a)->mtime;
  const struct timespec* y = &((const receipt_file_t*)b)->mtime;
  if (x->tv_sec != y->tv_sec)
    return x->tv_sec < y->tv_sec ? 1 : -1;
  return x->tv_nsec < y->tv_nsec ? 1 : x->tv_nsec > y->tv_nsec ? -1 : 0;
}

static json_t* receipt_summary(json_t* doc, const char* name) {
  json_t* outcome = json_object_get(doc, "outcome");
  return json_pack("{s:s, s:s, s:s, s:O?, s:O?, s:O?, s:O?}", "file", name,
                   "id", str(doc, "execution_id"), "executable",
                   str(doc, "executable"), "outcome", outcome, "started_at",
                   json_object_get(doc, "started_at"), "duration_ms",
                   json_object_get(doc, "duration_ms"), "plan_digest",
                   json_object_get(doc, "plan_digest"));
}

static void outcome_text(json_t* outcome, char* out, size_t size) {
  const char* kind = json_string_value(json_object_get(outcome, "kind"));
  json_t* code = json_object_get(outcome, "exit_code");
  json_t* sig = json_object_get(outcome, "signal");
  if (kind == NULL)
    snprintf(out, size, "?");
  else if (json_is_integer(code))
    snprintf(out, size, "%s %" JSON_INTEGER_FORMAT, kind,
             json_integer_value(code));
  else if (json_is_integer(sig))
    snprintf(out, size, "%s %" JSON_INTEGER_FORMAT, kind,
             json_integer_value(sig));
  else
    snprintf(out, size, "%s", kind);
}

int warden_receipts(const invocation_t* inv) {
  cli_error_t err = {0};
  err.command = "receipts";
  char dir[PATH_MAX];
  if (warden_receipt_dir(inv, dir, sizeof dir, &err) != 0)
    return cli_emit_failure(inv, &err);
  const char* limit_text = cli_value(inv, "--limit");
  long limit = limit_text ? strtol(limit_text, NULL, 10) : 10;
  if (limit <= 0 || limit > 100000) {
    cli_fail(&err, "VALIDATION_FAILED", NULL,
             "--limit must be between 1 and 100000");
    return cli_emit_failure(inv, &err);
  }
  int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dirfd < 0) {
    if (errno == ENOENT && inv->operand_count == 0)
      return cli_emit_success(
          inv, json_pack("{s:s, s:[]}", "directory", dir, "receipts"),
          "no receipts yet\n");
    cli_fail(&err, errno == ENOENT ? "NOT_FOUND" : "IO_FAILED",
             "Give the --receipt-dir the runs used.", "reading '%s': %s", dir,
             strerror(errno));
    return cli_emit_failure(inv, &err);
  }
  /* One receipt: the newest whose id starts with the operand ("latest" is
   * the newest of all). */
  const char* want = inv->operand_count > 0 ? inv->operands[0] : NULL;
  bool latest = want != NULL && strcmp(want, "latest") == 0;
  DIR* d = fdopendir(dup(dirfd));
  receipt_file_t* files = NULL;
  size_t count = 0;
  struct dirent* e;
  while (d != NULL && (e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    struct stat st;
    if (len < 6 || len >= sizeof files[0].name ||
        strcmp(e->d_name + len - 5, ".json") != 0 ||
        fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode))
      continue;
    if (want != NULL && !latest && strncmp(e->d_name, want, strlen(want)) != 0)
      continue;
    receipt_file_t* grown = realloc(files, (count + 1) * sizeof *files);
    if (grown == NULL)
      break;
    files = grown;
    /* len < sizeof name, checked above (snprintf would make GCC warn of a
     * truncation it cannot rule out). */
    memcpy(files[count].name, e->d_name, len + 1);
    files[count++].mtime = st.st_mtim;
  }
  if (d != NULL)
    closedir(d);
  if (count > 1)
    qsort(files, count, sizeof *files, newest_first);
  int r;
  if (want != NULL) {
    json_t* doc =
        count > 0 ? load_own(dirfd, files[0].name, RECEIPT_MAX) : NULL;
    if (doc == NULL) {
      cli_fail(&err, "NOT_FOUND",
               "'maelys-warden receipts' lists the latest receipts.",
               count > 0 ? "the receipt '%s' could not be read"
                         : "no receipt in '%s' matches '%s'",
               count > 0 ? files[0].name : dir, want);
      r = cli_emit_failure(inv, &err);
    } else {
      char* text = json_dumps(doc, JSON_INDENT(2));
      size_t n = text ? strlen(text) + 2 : 0;
      char* line = text ? malloc(n) : NULL;
      if (line)
        snprintf(line, n, "%s\n", text);
      r = cli_emit_success(
          inv, json_pack("{s:s, s:o}", "file", files[0].name, "receipt", doc),
          line ? line : "");
      free(line);
      free(text);
    }
  } else {
    json_t* list = json_array();
    size_t shown = count < (size_t)limit ? count : (size_t)limit;
    size_t size = 128 + shown * (PATH_MAX + 256);
    char* text = malloc(size);
    size_t off =
        text ? (size_t)snprintf(text, size, "%-32s %-19s %-14s %s\n", "ID",
                                "STARTED", "OUTCOME", "EXECUTABLE")
             : 0;
    for (size_t i = 0; i < shown; i++) {
      json_t* doc = load_own(dirfd, files[i].name, RECEIPT_MAX);
      if (doc == NULL)
        continue;
      json_array_append_new(list, receipt_summary(doc, files[i].name));
      char outcome[64];
      outcome_text(json_object_get(doc, "outcome"), outcome, sizeof outcome);
      if (text)
        off += (size_t)snprintf(
            text + off, size - off, "%-32s %-19.19s %-14s %s\n",
            str(doc, "execution_id"), str(doc, "started_at"), outcome,
            str(doc, "executable"));
      json_decref(doc);
    }
    if (text && shown == 0)
      snprintf(text, size, "no receipts yet in %s\n", dir);
    r = cli_emit_success(
        inv, json_pack("{s:s, s:o}", "directory", dir, "receipts", list),
        text ? text : "");
    free(text);
  }
  free(files);
  close(dirfd);
  return r;
}
