/*
 * Where sandboxes could write, remembered across runs (DESIGN invariant 18:
 * authority never comes from where a sandbox writes, in this run or an
 * earlier one).
 *
 * Why a record: as root, a writable bind is idmapped, so a file the payload
 * creates lands owned by the workspace's owner -- root, or the invoking user.
 * The owner and mode checks of warden_read_authority() cannot tell it from
 * the operator's own file: the adversarial review planted a plan that way and
 * the next run used it. So before every launch, each path the plan makes
 * writable is appended to `STATE/writable-paths` (one JSON object per line:
 * the path, its device and inode, and the read-only paths the plan kept
 * inside it), and a later run refuses an authority file (plan, policy,
 * profile, spec) or a receipt directory at or below any recorded path --
 * matched by name and, for what exists, by identity (a recorded directory
 * moved elsewhere is still recognised) -- unless it lies inside a path that
 * run kept read-only.
 *
 * The record lives in the state directory, which no plan may make writable;
 * it covers the runs of this state directory (another user's runs keep their
 * own). A file the operator reviewed is used by copying it out of the
 * workspace first.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "maelys/backend.h"
#include "protect.h"
#include "warden.h"

#define RECORD_FILE "writable-paths"
#define RECORD_MAX (4u << 20)
#define MAELYS__CLI_MAX_KEPT MAELYS_EXECUTOR_MAX_ENTRIES

static char g_state[PATH_MAX];

static json_t* g_loaded;

void warden_written_use(const char* state_dir) {
  snprintf(g_state, sizeof g_state, "%s", state_dir ? state_dir : "");
  json_decref(g_loaded);
  g_loaded = NULL;
}

static bool within(const char* path, const char* base) {
  size_t n = strlen(base);
  if (n == 1 && base[0] == '/')
    return true;
  return strncmp(path, base, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* The recorded entries, or NULL when there are none (an absent record). */
/* g_loaded: the record as last read by this process (a reference each
 * caller drops), read again after this process appended to it. */

static json_t* load_file(cli_error_t* err, bool* failed);

static json_t* load(cli_error_t* err, bool* failed) {
  *failed = false;
  if (g_loaded == NULL)
    g_loaded = load_file(err, failed);
  return json_incref(g_loaded);
}

static json_t* load_file(cli_error_t* err, bool* failed) {
  *failed = false;
  if (g_state[0] == '\0')
    return NULL;
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/%s", g_state, RECORD_FILE);
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT)
    return NULL;
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_uid != geteuid() || (st.st_mode & 077) != 0 ||
      (size_t)st.st_size > RECORD_MAX) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    *failed = true;
    cli_fail(err, "ACCESS_DENIED",
             "Remove the file if you trust every file below the paths "
             "earlier runs made writable.",
             "the record of paths earlier sandboxes could write ('%s') is "
             "unreadable, too large, not yours or readable by others%s%s: "
             "authority files cannot be checked against it (invariant 18)",
             path, fd < 0 ? ": " : "", fd < 0 ? strerror(e) : "");
    return NULL;
  }
  json_t* all = json_array();
  FILE* f = fdopen(fd, "r");
  char* line = NULL;
  size_t cap = 0;
  while (f != NULL && getline(&line, &cap, f) > 0) {
    json_t* e = json_loads(line, 0, NULL);
    if (json_is_object(e))
      json_array_append_new(all, e);
    else
      json_decref(e); /* a torn last line of a killed run */
  }
  free(line);
  if (f != NULL)
    fclose(f);
  else
    close(fd);
  return all;
}

/* The birth time of what `fd` (or `path` relative to it) names, as
 * nanoseconds, or -1 where the file system does not keep one. With the
 * device and inode it names one directory for good: an inode number is
 * reused once its directory is removed (a test suite's temporary
 * directories did exactly that), a birth time is not. */
static long long birth(int fd, const char* path, int flags) {
  struct statx sx;
  if (statx(fd, path, flags | AT_SYMLINK_NOFOLLOW, STATX_BTIME, &sx) != 0 ||
      !(sx.stx_mask & STATX_BTIME))
    return -1;
  return (long long)sx.stx_btime.tv_sec * 1000000000LL + sx.stx_btime.tv_nsec;
}

static bool same(const struct stat* st, int fd, dev_t dev, ino_t ino,
                 long long born) {
  return st->st_dev == dev && st->st_ino == ino &&
         birth(fd, "", AT_EMPTY_PATH) == born;
}

/* What `path` (absolute, no link) lies in, by identity: itself when it is a
 * file, then its nearest existing directory and every directory above it,
 * walked up through "..". */
typedef struct id_chain {
  struct {
    dev_t dev;
    ino_t ino;
    long long born;
  } at[256];
  size_t count;
} id_chain_t;

static void chain_add(id_chain_t* c, int fd, const struct stat* st) {
  if (c->count < sizeof c->at / sizeof c->at[0]) {
    c->at[c->count].dev = st->st_dev;
    c->at[c->count].ino = st->st_ino;
    c->at[c->count].born = birth(fd, "", AT_EMPTY_PATH);
    c->count++;
  }
}

static void identity_chain(const char* path, id_chain_t* c) {
  c->count = 0;
  char probe[PATH_MAX];
  snprintf(probe, sizeof probe, "%s", path);
  struct stat st;
  while (lstat(probe, &st) != 0) {
    char* slash = strrchr(probe, '/');
    if (slash == NULL || slash == probe) {
      snprintf(probe, sizeof probe, "/");
      break;
    }
    *slash = '\0';
  }
  int fd = open(probe, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  /* A file: itself (a recorded writable file), then up from its directory
   * (".." of a file is ENOTDIR). */
  if (fd >= 0 && fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) {
    chain_add(c, fd, &st);
    close(fd);
    char* slash = strrchr(probe, '/');
    if (slash == NULL)
      return;
    *(slash == probe ? slash + 1 : slash) = '\0';
    fd = open(probe, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
  }
  for (int depth = 0; fd >= 0 && depth < 256; depth++) {
    if (fstat(fd, &st) != 0)
      break;
    chain_add(c, fd, &st);
    int parent = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat ps;
    bool top = parent < 0 || fstat(parent, &ps) != 0 ||
               (ps.st_dev == st.st_dev && ps.st_ino == st.st_ino);
    close(fd);
    fd = top ? -1 : parent;
    if (top && parent >= 0)
      close(parent);
  }
  if (fd >= 0)
    close(fd);
}

static bool in_chain(const id_chain_t* c, dev_t dev, ino_t ino,
                     long long born) {
  for (size_t i = 0; i < c->count; i++)
    if (c->at[i].dev == dev && c->at[i].ino == ino && c->at[i].born == born)
      return true;
  return false;
}

int warden_written_check(const char* option, const char* path, const char* what,
                         cli_error_t* err) {
  bool failed = false;
  json_t* all = load(err, &failed);
  if (failed)
    return -1;
  size_t i;
  json_t* e;
  int rc = 0;
  /* Walked once; each recorded identity is then looked up in it. */
  static id_chain_t chain;
  bool walked = false;
  json_array_foreach(all, i, e) {
    const char* w = json_string_value(json_object_get(e, "path"));
    json_t* dev = json_object_get(e, "dev");
    json_t* ino = json_object_get(e, "ino");
    if (w == NULL)
      continue;
    bool in = within(path, w);
    json_t* born = json_object_get(e, "born");
    /* By identity only with a birth time: without one a reused inode
     * number would match. */
    if (!in && json_is_integer(dev) && json_is_integer(ino) &&
        json_is_integer(born)) {
      if (!walked)
        identity_chain(path, &chain);
      walked = true;
      in = in_chain(&chain, (dev_t)json_integer_value(dev),
                    (ino_t)json_integer_value(ino),
                    (long long)json_integer_value(born));
    }
    if (!in)
      continue;
    /* A kept path counts only while it is still the very directory that
     * was kept: the payload cannot write below a read-only mount, but it
     * can rename the mount point's parent away and build the same names
     * anew (the adversarial review did). Old records (a bare name) are
     * not trusted. */
    bool kept = false;
    size_t k;
    json_t* ro;
    json_array_foreach(json_object_get(e, "readonly"), k, ro) {
      const char* r = json_string_value(json_object_get(ro, "path"));
      json_t* rdev = json_object_get(ro, "dev");
      json_t* rino = json_object_get(ro, "ino");
      json_t* rborn = json_object_get(ro, "born");
      struct stat rs;
      int rfd = r != NULL && within(path, r) && json_is_integer(rdev) &&
                        json_is_integer(rino) && json_is_integer(rborn)
                    ? open(r, O_PATH | O_NOFOLLOW | O_CLOEXEC)
                    : -1;
      if (rfd >= 0 && fstat(rfd, &rs) == 0 &&
          same(&rs, rfd, (dev_t)json_integer_value(rdev),
               (ino_t)json_integer_value(rino),
               (long long)json_integer_value(rborn)))
        kept = true;
      if (rfd >= 0)
        close(rfd);
    }
    if (kept)
      continue;
    rc = cli_fail(
        err, "ACCESS_DENIED",
        "Review the file and copy it somewhere no sandbox writes (or choose "
        "another directory).",
        "%s '%s' lies in '%s', which an earlier sandbox could write: %s "
        "(invariant 18; the record is %s/" RECORD_FILE ")",
        option, path, w, what, g_state);
    break;
  }
  json_decref(all);
  return rc;
}

/* The entry without its kept paths, as text: two entries with one key
 * record the same writable path, by name and identity. */
static char* entry_key(json_t* e) {
  json_t* copy = json_copy(e);
  json_object_del(copy, "readonly");
  char* key = json_dumps(copy, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(copy);
  return key;
}

/* Whether the kept path `ro` recorded is still the very file that was kept
 * (what warden_written_check requires before it trusts a file below it). */
static bool kept_alive(json_t* ro) {
  const char* r = json_string_value(json_object_get(ro, "path"));
  json_t* dev = json_object_get(ro, "dev");
  json_t* ino = json_object_get(ro, "ino");
  json_t* born = json_object_get(ro, "born");
  struct stat st;
  return r != NULL && json_is_integer(dev) && json_is_integer(ino) &&
         json_is_integer(born) && lstat(r, &st) == 0 &&
         st.st_dev == (dev_t)json_integer_value(dev) &&
         st.st_ino == (ino_t)json_integer_value(ino) &&
         birth(AT_FDCWD, r, 0) == (long long)json_integer_value(born);
}

/* Appends `entry` (its reference) to `array` unless an equal one is there. */
static void append_unique(json_t* array, json_t* entry) {
  bool seen = false;
  size_t j;
  json_t* o;
  json_array_foreach(array, j, o) seen = seen || json_equal(o, entry);
  if (seen)
    json_decref(entry);
  else
    json_array_append_new(array, entry);
}

/* Whether some writable path is recorded more than once in `all`. */
static bool repeats(json_t* all) {
  json_t* keys = json_object();
  bool again = false;
  size_t i;
  json_t* e;
  json_array_foreach(all, i, e) {
    char* key = entry_key(e);
    if (key == NULL || json_object_get(keys, key) != NULL)
      again = true;
    else
      json_object_set_new(keys, key, json_true());
    free(key);
    if (again)
      break;
  }
  json_decref(keys);
  return again;
}

/*
 * The record, compacted: a kept path that is no longer the file that was
 * kept (a placeholder removed after its run, a directory deleted) can never
 * exempt anything again (birth times are not reused), so it is dropped, and
 * entries that are then equal are written once. Both only ever refuse as
 * much as before: nothing a sandbox could write becomes trusted. Without
 * this the record grew by a line per run of the same workspace (each run's
 * placeholders had new identities) and every check read all of it.
 */
static json_t* compacted(json_t* all) {
  json_t* out = json_array();
  size_t i;
  json_t* e;
  json_array_foreach(all, i, e) {
    json_t* entry = json_deep_copy(e);
    json_t* ro = json_object_get(entry, "readonly");
    for (size_t k = json_array_size(ro); k-- > 0;)
      if (!kept_alive(json_array_get(ro, k)))
        json_array_remove(ro, k);
    append_unique(out, entry);
  }
  return out;
}

/* Writes `lines` (one JSON object per line) to `fd`: 0 or -1 (errno). */
static int write_lines(int fd, json_t* lines) {
  size_t i;
  json_t* e;
  json_array_foreach(lines, i, e) {
    char* line = json_dumps(e, JSON_COMPACT);
    char* full = line ? malloc(strlen(line) + 2) : NULL;
    if (full != NULL)
      sprintf(full, "%s\n", line);
    /* One write per line (O_APPEND): concurrent runs never interleave. */
    ssize_t w = full != NULL ? write(fd, full, strlen(full)) : -1;
    bool ok = full != NULL && w == (ssize_t)strlen(full);
    if (full == NULL)
      errno = ENOMEM;
    else if (!ok && w >= 0)
      errno = ENOSPC; /* a short write: the file system is full */
    free(full);
    free(line);
    if (!ok)
      return -1;
  }
  return fsync(fd);
}

/*
 * Appends `lines` to the record open on `fd` (under the lock). A last line
 * left without its end (a full disk cut a write short, a run was killed in
 * it) is ended first: appended to, it would swallow the next line, and the
 * reader drops a line it cannot parse -- a sandbox that filled the disk
 * could have had the next run's writable path forgotten (the adversarial
 * review did). A failed write is cut back off, so no fragment stays.
 */
static int append_lines(int fd, json_t* lines) {
  struct stat st;
  char last = '\n';
  if (fstat(fd, &st) != 0 ||
      (st.st_size > 0 && pread(fd, &last, 1, st.st_size - 1) != 1))
    return -1;
  off_t size = st.st_size;
  if (last != '\n') {
    if (write(fd, "\n", 1) != 1) {
      int e = errno;
      (void)ftruncate(fd, size);
      errno = e;
      return -1;
    }
    size++;
  }
  if (write_lines(fd, lines) != 0) {
    int e = errno;
    (void)ftruncate(fd, size);
    errno = e;
    return -1;
  }
  return 0;
}

/* Replaces the record by `lines`, atomically (a reader sees the old record
 * or the new one, never a part). */
static int rewrite(const char* path, json_t* lines) {
  char tmp[PATH_MAX + 48];
  snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0)
    return -1;
  int rc = write_lines(fd, lines);
  int e = errno;
  close(fd);
  if (rc == 0 && rename(tmp, path) != 0) {
    rc = -1;
    e = errno;
  }
  if (rc != 0)
    unlink(tmp);
  errno = e;
  return rc;
}

/* The entries the plan's writable paths need (each with the identities of
 * what the plan keeps read-only inside it). */
static json_t* plan_entries(const maelys_executor_plan_t* plan) {
  size_t mounts = maelys_executor_plan_mount_count(plan);
  size_t rules = maelys_executor_plan_rule_count(plan);
  const char* readable[MAELYS__CLI_MAX_KEPT];
  size_t nread = 0;
  /* Kept from the payload inside a writable tree: the plan's read and deny
   * rules (over a writable rule, each is its own read-only or mode-000
   * mount, which the payload cannot move: a mount point is busy). */
  for (size_t i = 0; i < rules && nread < MAELYS__CLI_MAX_KEPT; i++) {
    maelys_executor_rule_view_t r;
    if (maelys_executor_plan_rule_get(plan, i, &r) == 0 &&
        r.access != MAELYS_EXECUTOR_ACCESS_WRITE)
      readable[nread++] = r.path;
  }
  json_t* fresh = json_array();
  for (size_t i = 0; i < mounts + rules; i++) {
    const char* w = NULL;
    if (i < mounts) {
      maelys_executor_mount_view_t m;
      if (maelys_executor_plan_mount_get(plan, i, &m) == 0 &&
          m.kind == MAELYS_EXECUTOR_MOUNT_BIND)
        w = m.source;
    } else {
      maelys_executor_rule_view_t r;
      if (maelys_executor_plan_rule_get(plan, i - mounts, &r) == 0 &&
          r.access == MAELYS_EXECUTOR_ACCESS_WRITE)
        w = r.path;
    }
    if (w == NULL)
      continue;
    json_t* entry = json_pack("{s:s}", "path", w);
    struct stat st;
    if (lstat(w, &st) == 0) {
      json_object_set_new(entry, "dev", json_integer((json_int_t)st.st_dev));
      json_object_set_new(entry, "ino", json_integer((json_int_t)st.st_ino));
      long long born = birth(AT_FDCWD, w, 0);
      if (born >= 0)
        json_object_set_new(entry, "born", json_integer((json_int_t)born));
    }
    json_t* ro = json_array();
    for (size_t k = 0; k < nread; k++) {
      struct stat rs;
      long long rborn;
      /* A placeholder (protect.h) is removed after the last run that uses
       * it, so it never exempts anything later: recording it would only
       * add a line per run. */
      if (strcmp(readable[k], w) == 0 || !within(readable[k], w) ||
          lstat(readable[k], &rs) != 0 ||
          warden_protect_is_placeholder(readable[k], &rs) ||
          (rborn = birth(AT_FDCWD, readable[k], 0)) < 0)
        continue; /* kept by no identity: never trusted later */
      json_array_append_new(
          ro, json_pack("{s:s, s:I, s:I, s:I}", "path", readable[k], "dev",
                        (json_int_t)rs.st_dev, "ino", (json_int_t)rs.st_ino,
                        "born", (json_int_t)rborn));
    }
    json_object_set_new(entry, "readonly", ro);
    append_unique(fresh, entry);
  }
  return fresh;
}

int warden_written_record(const maelys_executor_plan_t* plan,
                          cli_error_t* err) {
  if (g_state[0] == '\0')
    return cli_fail(err, "UNEXPECTED", NULL,
                    "no state directory to record writable paths in");
  json_t* fresh = plan_entries(plan);
  bool failed = false;
  json_t* known = load(err, &failed);
  if (failed) {
    json_decref(fresh);
    return -1;
  }
  /* Nothing new (the common case: the same workspace again): no write, no
   * lock. */
  size_t i, j;
  json_t *e, *k;
  json_array_foreach(fresh, i, e) {
    bool seen = false;
    json_array_foreach(known, j, k) seen = seen || json_equal(k, e);
    if (seen)
      json_array_remove(fresh, i--);
  }
  json_decref(known);
  if (json_array_size(fresh) == 0) {
    json_decref(fresh);
    return 0;
  }
  json_decref(g_loaded);
  g_loaded = NULL;
  char path[PATH_MAX + 32], lock_path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/%s", g_state, RECORD_FILE);
  snprintf(lock_path, sizeof lock_path, "%s/%s.lock", g_state, RECORD_FILE);
  int lock = -1, rc = -1, e2 = 0;
  const char* where = g_state;
  /* Appends and rewrites of this program hold the lock, so that a rewrite
   * never loses a line another run appended meanwhile. */
  if (warden_mkdir_private(g_state) == 0 && (where = lock_path) != NULL &&
      (lock = open(lock_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
                   0600)) >= 0 &&
      flock(lock, LOCK_EX) == 0) {
    where = path;
    known = load_file(err, &failed);
    if (failed) {
      close(lock);
      json_decref(fresh);
      return -1;
    }
    json_t* all = known != NULL ? json_copy(known) : json_array();
    json_array_extend(all, fresh);
    if (repeats(all)) {
      json_t* lines = compacted(all);
      rc = rewrite(path, lines);
      json_decref(lines);
    } else {
      int fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
                    0600);
      rc = fd >= 0 ? append_lines(fd, fresh) : -1;
      e2 = errno;
      if (fd >= 0)
        close(fd);
      errno = e2;
    }
    json_decref(all);
    json_decref(known);
  }
  e2 = errno;
  if (lock >= 0)
    close(lock);
  json_decref(fresh);
  if (rc != 0)
    return cli_fail(err, "IO_FAILED", "Give a writable --state-dir.",
                    "recording the paths this run makes writable in '%s': %s "
                    "(nothing was launched)",
                    where, strerror(e2));
  return 0;
}
