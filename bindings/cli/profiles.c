/*
 * Named profiles (--profile), more writable paths (--allow-write) and a
 * persistent home (--home): what a run adds to the built-in profiles.
 *
 * A profile is authority, like a plan: it says what a sandbox may read,
 * write and reach. So it obeys invariant 18 as a plan file does: it is read
 * from one descriptor, with no symbolic link in any component of its path,
 * owned by the caller or root and writable by nobody else, and never from
 * where a sandbox writes (the workspace, anything this run makes writable,
 * the backend's staging directory); and no plan may make it writable. Its
 * format (maelys-warden-profile/1, docs/profiles.md) is read strictly: an
 * unknown member or a wrong type is an error naming it, so a typo can never
 * silently drop a rule (invariant 1).
 *
 * --allow-write and --home get the refusals of a writable workspace (the
 * host's root, its shared temporary directories, the caller's home itself;
 * the system trees are refused by the library; maelys-warden's own files by
 * warden_check_protected). A home is the caller's private directory: owned
 * by them, writable by nobody else, never their real home, never the
 * workspace or inside it or around it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "warden.h"

#ifndef MAELYS_WARDEN_SYSTEM_PROFILE_DIR
#error "MAELYS_WARDEN_SYSTEM_PROFILE_DIR is set by bindings/cli/CMakeLists.txt"
#endif

#define PROFILE_MAX_BYTES (1u << 20)
#define PROFILE_MAX_ENTRIES 256

static const char* const shared_tmp[] = {"/tmp", "/var/tmp", "/dev/shm"};

/* ------------------------------------------------------------- storage */

/* Keeps a heap string for the lifetime of the policy (consumes `s`). */
static const char* keep(warden_extras_t* x, char* s) {
  if (s == NULL)
    return NULL;
  char** v = realloc(x->strings, (x->string_count + 1) * sizeof *v);
  if (v == NULL) {
    free(s);
    return NULL;
  }
  x->strings = v;
  x->strings[x->string_count++] = s;
  return s;
}

static int push(const char*** list, size_t* count, const char* value) {
  const char** v = realloc(*list, (*count + 1) * sizeof *v);
  if (v == NULL)
    return -1;
  *list = v;
  (*list)[(*count)++] = value;
  return 0;
}

static int oom(cli_error_t* err) {
  return cli_fail(err, "UNEXPECTED", NULL, "out of memory");
}

/* ------------------------------------------------------------- helpers */

const char* warden_invoking_home(void) {
  const char* home = getenv("HOME");
  if (home != NULL && home[0] == '/')
    return home;
  struct passwd* pw = getpwuid(getuid());
  return pw != NULL && pw->pw_dir != NULL && pw->pw_dir[0] == '/' ? pw->pw_dir
                                                                  : NULL;
}

static bool within_by_name(const char* path, const char* base) {
  size_t n = strlen(base);
  if (n == 1 && base[0] == '/')
    return true;
  return strncmp(path, base, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

bool warden_path_inside(const char* path, const char* base) {
  char a[PATH_MAX], b[PATH_MAX];
  if (warden_absolute(path, a, sizeof a) != 0 ||
      warden_absolute(base, b, sizeof b) != 0)
    return false;
  if (within_by_name(a, b))
    return true;
  /* By identity: `path` or one of its physical ancestors (walked through
   * "..", which never follows a link) is `base`. */
  struct stat bs;
  int bfd = open(b, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (bfd < 0)
    return false;
  int ok = fstat(bfd, &bs);
  close(bfd);
  if (ok != 0)
    return false;
  int fd = open(a, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  for (int depth = 0; fd >= 0 && depth < 256; depth++) {
    struct stat st;
    if (fstat(fd, &st) != 0)
      break;
    if (st.st_dev == bs.st_dev && st.st_ino == bs.st_ino) {
      close(fd);
      return true;
    }
    int parent = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat ps;
    bool top = parent < 0 || fstat(parent, &ps) != 0 ||
               (ps.st_dev == st.st_dev && ps.st_ino == st.st_ino);
    close(fd);
    fd = parent;
    if (top) {
      if (fd >= 0)
        close(fd);
      fd = -1;
    }
  }
  if (fd >= 0)
    close(fd);
  return false;
}

/* The same object (by name or, when both exist, by identity). */
static bool same_place(const char* a, const char* b) {
  return warden_path_inside(a, b) && warden_path_inside(b, a);
}

/* A directory above something that steers a run: owned by this user or root
 * and writable by nobody else, unless sticky (as paths.c judges the
 * directories above a plan file). */
static bool dir_trusted(const struct stat* st) {
  bool owner = st->st_uid == 0 || st->st_uid == geteuid();
  bool shared = (st->st_mode & (S_IWGRP | S_IWOTH)) != 0;
  return owner && (!shared || (st->st_mode & S_ISVTX) != 0);
}

/* Every existing directory strictly above `path`. */
static int check_ancestors(const char* option, const char* shown,
                           const char* path, cli_error_t* err) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", path);
  for (char* slash = strrchr(dir, '/'); slash != NULL;
       slash = strrchr(dir, '/')) {
    if (slash == dir)
      slash[1] = '\0';
    else
      *slash = '\0';
    struct stat ds;
    if (lstat(dir, &ds) == 0 && !dir_trusted(&ds))
      return cli_fail(
          err, "ACCESS_DENIED",
          "Use a path whose directories only you (or root) can change.",
          "%s '%s' lies in '%s' (owner uid %u, mode %04o), which another user "
          "could change: refused (invariant 18)",
          option, shown, dir, (unsigned)ds.st_uid,
          (unsigned)(ds.st_mode & 07777));
    if (strcmp(dir, "/") == 0)
      break;
  }
  return 0;
}

int warden_check_owner_chain(const char* option, const char* shown,
                             const char* path, cli_error_t* err) {
  struct stat st;
  if (lstat(path, &st) != 0)
    return cli_fail(err, "NOT_FOUND", "Check the path.", "%s '%s': %s", option,
                    shown, strerror(errno));
  if ((st.st_uid != 0 && st.st_uid != geteuid()) ||
      (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return cli_fail(
        err, "ACCESS_DENIED",
        "Keep what steers a sandbox private: yours (or root's) and writable "
        "only by its owner.",
        "%s '%s' is owned by uid %u with mode %04o: it steers what a sandbox "
        "trusts, so it must belong to you or root and be writable by nobody "
        "else (invariant 18)",
        option, shown, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
  return check_ancestors(option, shown, path, err);
}

/* The refusals every writable path shares with a writable workspace that
 * maelys-warden checks itself (the library refuses the system trees when a
 * run starts, warden_check_protected maelys-warden's own files). */
static int check_writable(const char* option, const char* shown,
                          const char* phys, cli_error_t* err) {
  const char* hint = "Name a directory of a project, or one made for this "
                     "purpose.";
  if (strcmp(phys, "/") == 0)
    return cli_fail(err, "ACCESS_DENIED", hint,
                    "%s '%s' is the host's root: never writable", option,
                    shown);
  for (size_t i = 0; i < sizeof shared_tmp / sizeof shared_tmp[0]; i++)
    if (same_place(phys, shared_tmp[i]))
      return cli_fail(err, "ACCESS_DENIED", hint,
                      "%s '%s' is %s, the host's shared temporary directory: "
                      "it holds other users' sockets and files; name a "
                      "subdirectory instead",
                      option, shown, shared_tmp[i]);
  const char* homes[2] = {getenv("HOME"), NULL};
  struct passwd* pw = getpwuid(getuid());
  homes[1] = pw != NULL ? pw->pw_dir : NULL;
  for (size_t i = 0; i < 2; i++) {
    if (homes[i] == NULL || homes[i][0] != '/')
      continue;
    if (same_place(phys, homes[i]))
      return cli_fail(err, "ACCESS_DENIED", hint,
                      "%s '%s' is your home directory ('%s'): it holds your "
                      "credentials, shell startup files and maelys-warden's "
                      "own configuration, so it is never writable",
                      option, shown, homes[i]);
    /* The home's dot-entries are what the user's shell and tools run
     * (~/.bashrc, ~/.config, ~/.local/bin): the library refuses them as
     * system trees below /root and /home; here wherever the home is, and
     * before anything is created. */
    char home[PATH_MAX];
    if (warden_absolute(homes[i], home, sizeof home) != 0)
      continue;
    size_t n = strlen(home);
    if (n > 1 && strncmp(phys, home, n) == 0 && phys[n] == '/' &&
        phys[n + 1] == '.')
      return cli_fail(err, "ACCESS_DENIED",
                      "Use a directory of your home that is not a dot-entry, "
                      "e.g. ~/maelys-homes/NAME for a --home.",
                      "%s '%s' lies in a dot-entry of your home ('%s'): "
                      "dot-entries hold what your shell and tools run and "
                      "trust, so they are never writable",
                      option, shown, home);
  }
  return 0;
}

/* "~" and "~/..." are the invoking user's home; anything else must be
 * absolute. The result is kept in `x`. */
static const char* expand(warden_extras_t* x, const char* value) {
  if (value[0] == '~' && (value[1] == '\0' || value[1] == '/')) {
    const char* home = warden_invoking_home();
    if (home == NULL)
      return NULL;
    size_t n = strlen(home) + strlen(value) + 1;
    char* s = malloc(n);
    if (s != NULL)
      snprintf(s, n, "%s%s", home, value + 1);
    return keep(x, s);
  }
  if (value[0] != '/')
    return NULL;
  return keep(x, strdup(value));
}

/* ------------------------------------------------------------- profile */

typedef struct reader {
  warden_extras_t* x;
  warden_policy_t* policy;
  const invocation_t* inv;
  cli_error_t* err;
  const char* home; /* the profile's home, expanded, or NULL */
} reader_t;

static int bad(reader_t* rd, const char* member, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(reader_t* rd, const char* member, const char* fmt, ...) {
  char what[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return cli_fail(rd->err, "PROTOCOL_FAILED",
                  "Write the profile in the " WARDEN_PROFILE_FORMAT
                  " format (see PROFILES in maelys-warden(1)).",
                  "--profile %s ('%s'): %s%s%s", rd->x->profile_name,
                  rd->x->profile_path, member, member[0] ? ": " : "", what);
}

static bool valid_env_name(const char* s) {
  size_t n = strlen(s);
  if (n == 0 || n > 255 || (s[0] >= '0' && s[0] <= '9'))
    return false;
  for (const char* p = s; *p; p++)
    if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
          (*p >= '0' && *p <= '9') || *p == '_'))
      return false;
  return true;
}

/* An array of strings: paths (expanded) or environment names. */
static int read_list(reader_t* rd, json_t* v, const char* member, bool paths,
                     const char*** list, size_t* count) {
  if (!json_is_array(v))
    return bad(rd, member, "must be an array of strings");
  if (json_array_size(v) > PROFILE_MAX_ENTRIES)
    return bad(rd, member, "has more than %d entries", PROFILE_MAX_ENTRIES);
  size_t i;
  json_t* item;
  json_array_foreach(v, i, item) {
    if (!json_is_string(item))
      return bad(rd, member, "entry %zu must be a string", i);
    const char* s = json_string_value(item);
    const char* value = NULL;
    if (paths) {
      value = expand(rd->x, s);
      if (value == NULL)
        return bad(rd, member,
                   "'%s' must be an absolute path or start with ~/ (the "
                   "invoking user's home)",
                   s);
    } else {
      if (!valid_env_name(s))
        return bad(rd, member, "'%s' is not an environment variable name", s);
      value = s;
    }
    if (push(list, count, value) != 0)
      return oom(rd->err);
  }
  return 0;
}

static int read_env(reader_t* rd, json_t* v) {
  if (!json_is_object(v))
    return bad(rd, "env", "must be an object of NAME: \"value\"");
  const char* key;
  json_t* value;
  json_object_foreach(v, key, value) {
    char member[300];
    snprintf(member, sizeof member, "env.%.256s", key);
    if (!valid_env_name(key))
      return bad(rd, member, "'%s' is not an environment variable name", key);
    if (!json_is_string(value))
      return bad(rd, member, "must be a string");
    warden_env_entry_t* e =
        realloc(rd->x->env, (rd->x->env_count + 1) * sizeof *e);
    if (e == NULL)
      return oom(rd->err);
    rd->x->env = e;
    e[rd->x->env_count++] = (warden_env_entry_t){key, json_string_value(value)};
  }
  return 0;
}

static int64_t count_of(const char* s) {
  char* end;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  return errno || end == s || *end || x <= 0 ? -1 : x;
}

static int64_t seconds_of(const char* s) {
  int64_t ms = cli_duration_ms(s);
  return ms <= 0 ? -1 : (ms + 999) / 1000;
}

/* The ceilings and per-process limits, in the command line's syntax; a
 * value the command line gave wins. */
static int read_limits(reader_t* rd, json_t* v) {
  static const struct {
    const char* name;
    const char* option;
    int64_t (*parse)(const char*);
    size_t offset;
    const char* what;
  } limits[] = {
      {"tasks", "--tasks", count_of, offsetof(warden_policy_t, tasks),
       "a count"},
      {"memory", "--memory", cli_size_bytes, offsetof(warden_policy_t, memory),
       "a size (4G)"},
      {"cpu-time", "--cpu-time", seconds_of,
       offsetof(warden_policy_t, cpu_seconds), "a duration (30m)"},
      {"open-files", "--open-files", count_of,
       offsetof(warden_policy_t, open_files), "a count"},
      {"file-size", "--file-size", cli_size_bytes,
       offsetof(warden_policy_t, file_size), "a size (1G)"},
  };
  size_t n = sizeof limits / sizeof limits[0];
  if (!json_is_object(v))
    return bad(rd, "limits", "must be an object");
  const char* key;
  json_t* value;
  json_object_foreach(v, key, value) {
    size_t k = 0;
    while (k < n && strcmp(limits[k].name, key) != 0)
      k++;
    char member[300];
    snprintf(member, sizeof member, "limits.%.256s", key);
    if (k == n)
      return bad(rd, member,
                 "unknown member (tasks, memory, cpu-time, open-files, "
                 "file-size)");
    int64_t x = -1;
    if (json_is_integer(value) && json_integer_value(value) > 0) {
      x = json_integer_value(value);
      /* An integer is a count, bytes or seconds. */
    } else if (json_is_string(value)) {
      x = limits[k].parse(json_string_value(value));
    }
    if (x <= 0)
      return bad(rd, member, "must be %s above zero", limits[k].what);
    uint64_t* slot = (uint64_t*)((char*)rd->policy + limits[k].offset);
    if (cli_value(rd->inv, limits[k].option) == NULL)
      *slot = (uint64_t)x;
  }
  return 0;
}

static int read_profile(reader_t* rd, json_t* doc) {
  if (!json_is_object(doc))
    return bad(rd, "", "the document must be a JSON object");
  static const char* const members[] = {
      "format",      "description", "extends", "network",  "allow-read",
      "allow-write", "deny",        "env",     "pass-env", "limits",
      "home",        "protect",     NULL};
  const char* key;
  json_t* v;
  json_object_foreach(doc, key, v) {
    size_t k = 0;
    while (members[k] != NULL && strcmp(members[k], key) != 0)
      k++;
    if (members[k] == NULL)
      return bad(rd, key,
                 "unknown member (format, description, extends, network, "
                 "allow-read, allow-write, deny, env, pass-env, limits, home, "
                 "protect)");
  }
  v = json_object_get(doc, "format");
  if (v != NULL && (!json_is_string(v) ||
                    strcmp(json_string_value(v), WARDEN_PROFILE_FORMAT) != 0))
    return bad(rd, "format", "must be \"" WARDEN_PROFILE_FORMAT "\"");
  v = json_object_get(doc, "description");
  if (v != NULL && !json_is_string(v))
    return bad(rd, "description", "must be a string");
  v = json_object_get(doc, "extends");
  const char* extends = json_is_string(v) ? json_string_value(v) : NULL;
  if (extends == NULL ||
      (strcmp(extends, "ro") != 0 && strcmp(extends, "rw") != 0))
    return bad(rd, "extends",
               "is required: \"ro\" (the workspace read-only) or \"rw\" (the "
               "workspace writable)");
  rd->policy->writable = strcmp(extends, "rw") == 0;
  v = json_object_get(doc, "network");
  if (v != NULL) {
    const char* net = json_is_string(v) ? json_string_value(v) : "";
    if (strcmp(net, "none") != 0 && strcmp(net, "inherit") != 0)
      return bad(rd, "network", "must be \"none\" or \"inherit\"");
    if (cli_value(rd->inv, "--network") == NULL)
      rd->policy->network_inherit = strcmp(net, "inherit") == 0;
  }
  warden_extras_t* x = rd->x;
  static const struct {
    const char* member;
    bool paths;
    size_t list, count;
  } lists[] = {
      {"allow-read", true, offsetof(warden_extras_t, allow_read),
       offsetof(warden_extras_t, allow_read_count)},
      {"deny", true, offsetof(warden_extras_t, deny),
       offsetof(warden_extras_t, deny_count)},
      {"protect", true, offsetof(warden_extras_t, protect),
       offsetof(warden_extras_t, protect_count)},
      {"pass-env", false, offsetof(warden_extras_t, pass_env),
       offsetof(warden_extras_t, pass_env_count)},
  };
  for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
    v = json_object_get(doc, lists[i].member);
    if (v != NULL && read_list(rd, v, lists[i].member, lists[i].paths,
                               (const char***)((char*)x + lists[i].list),
                               (size_t*)((char*)x + lists[i].count)) != 0)
      return -1;
  }
  if ((v = json_object_get(doc, "env")) != NULL && read_env(rd, v) != 0)
    return -1;
  if ((v = json_object_get(doc, "limits")) != NULL && read_limits(rd, v) != 0)
    return -1;
  if ((v = json_object_get(doc, "home")) != NULL) {
    if (!json_is_string(v) ||
        (rd->home = expand(x, json_string_value(v))) == NULL)
      return bad(rd, "home",
                 "must be a string: an absolute path or one that starts with "
                 "~/");
  }
  return 0;
}

/* The directories searched, in order: the user's, then the system's. */
static int profile_dirs(char dirs[2][PATH_MAX], cli_error_t* err) {
  const char* xdg = getenv("XDG_CONFIG_HOME");
  const char* home = warden_invoking_home();
  if (xdg != NULL && xdg[0] == '/')
    snprintf(dirs[0], PATH_MAX, "%.4000s/maelys/profiles", xdg);
  else if (home != NULL)
    snprintf(dirs[0], PATH_MAX, "%.4000s/.config/maelys/profiles", home);
  else
    dirs[0][0] = '\0';
  const char* sys = getenv("MAELYS_WARDEN_SYSTEM_PROFILES");
  if (sys != NULL && sys[0] != '\0' && sys[0] != '/')
    return cli_fail(err, "VALIDATION_FAILED",
                    "Set MAELYS_WARDEN_SYSTEM_PROFILES to an absolute path.",
                    "MAELYS_WARDEN_SYSTEM_PROFILES='%s' is not an absolute "
                    "path",
                    sys);
  snprintf(dirs[1], PATH_MAX, "%s",
           sys != NULL && sys[0] != '\0' ? sys
                                         : MAELYS_WARDEN_SYSTEM_PROFILE_DIR);
  return 0;
}

/* Finds NAME.json (the first directory that has it wins; a symbolic link
 * anywhere on the way is refused, never skipped, so that a link cannot
 * silently swap the user's profile for the system's) and reads it. */
static int load_profile(reader_t* rd, const char* name) {
  warden_extras_t* x = rd->x;
  cli_error_t* err = rd->err;
  x->profile_name = name;
  char dirs[2][PATH_MAX];
  if (profile_dirs(dirs, err) != 0)
    return -1;
  char* data = NULL;
  size_t len = 0;
  for (size_t i = 0; i < 2 && data == NULL; i++) {
    if (dirs[i][0] == '\0')
      continue;
    char candidate[PATH_MAX + 80];
    snprintf(candidate, sizeof candidate, "%.4000s/%.64s.json", dirs[i], name);
    char phys[PATH_MAX];
    struct stat st;
    if (warden_user_path("--profile", candidate, false, phys, &st, err) != 0)
      return -1;
    if (st.st_mode == 0)
      continue;
    if (warden_read_authority("--profile", candidate, PROFILE_MAX_BYTES, &data,
                              &len, x->profile_path, err) != 0)
      return -1;
    snprintf(x->profile_dir, sizeof x->profile_dir, "%.4000s", dirs[i]);
  }
  if (data == NULL)
    return cli_fail(err, "NOT_FOUND",
                    "Write the profile there ('maelys-warden help run' names "
                    "the format), or use --ro or --rw.",
                    "--profile %s: no %s.json in '%s' or in '%s'", name, name,
                    dirs[0][0] ? dirs[0] : "(no configuration directory)",
                    dirs[1]);
  json_error_t jerr;
  json_t* doc = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
  free(data);
  if (doc == NULL)
    return bad(rd, "", "malformed JSON at line %d column %d: %s", jerr.line,
               jerr.column, jerr.text);
  /* The document's strings (env, pass-env) live as long as the policy. */
  x->doc = doc;
  return read_profile(rd, doc);
}

static int compare_names(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

void warden_profile_candidates(const char* prefix, json_t* records) {
  char dirs[2][PATH_MAX];
  cli_error_t ignored = {0};
  if (profile_dirs(dirs, &ignored) != 0)
    dirs[1][0] = '\0';
  char* names[512];
  size_t count = 0;
  for (size_t i = 0; i < 2; i++) {
    DIR* d = dirs[i][0] != '\0' ? opendir(dirs[i]) : NULL;
    struct dirent* e;
    while (d != NULL && (e = readdir(d)) != NULL &&
           count < sizeof names / sizeof names[0]) {
      size_t n = strlen(e->d_name);
      /* What --profile accepts: [A-Za-z0-9][A-Za-z0-9_-]{0,63}. */
      if (n <= 5 || n - 5 > 64 || strcmp(e->d_name + n - 5, ".json") != 0 ||
          strspn(e->d_name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstu"
                            "vwxyz0123456789_-") != n - 5 ||
          e->d_name[0] == '_' || e->d_name[0] == '-' ||
          strncmp(e->d_name, prefix, strlen(prefix)) != 0)
        continue;
      char* name = strndup(e->d_name, n - 5);
      if (name != NULL)
        names[count++] = name;
    }
    if (d != NULL)
      closedir(d);
  }
  qsort(names, count, sizeof names[0], compare_names);
  for (size_t i = 0; i < count; i++)
    if (i == 0 || strcmp(names[i], names[i - 1]) != 0)
      json_array_append_new(records, json_pack("{s:s}", "word", names[i]));
  for (size_t i = 0; i < count; i++)
    free(names[i]);
}

/* The profile was found where a sandbox may write: refused (invariant 18).
 * The protected list also keeps every writable rule off it; this says why in
 * the caller's terms. */
static int check_profile_place(const warden_policy_t* policy,
                               cli_error_t* err) {
  const warden_extras_t* x = policy->extras;
  const char* path = x->profile_path;
  const char* where = NULL;
  const char* base = NULL;
  if (warden_path_inside(path, policy->workspace)) {
    where = "the workspace";
    base = policy->workspace;
  }
  for (size_t i = 0; where == NULL && i < x->write_count; i++)
    if (warden_path_inside(path, x->write_paths[i])) {
      where = "a directory this run makes writable (--allow-write)";
      base = x->write_paths[i];
    }
  if (where == NULL && x->home[0] && warden_path_inside(path, x->home)) {
    where = "the home directory this run makes writable (--home)";
    base = x->home;
  }
  if (where == NULL && warden_path_inside(path, WARDEN_STAGING_DIR)) {
    where = "the sandboxes' staging directory";
    base = WARDEN_STAGING_DIR;
  }
  if (where == NULL)
    return 0;
  return cli_fail(err, "ACCESS_DENIED",
                  "Keep profiles in your configuration directory, outside "
                  "every workspace (unset XDG_CONFIG_HOME if a project set "
                  "it).",
                  "--profile %s: '%s' lies inside %s ('%s'), where a sandbox "
                  "could have written it: refused (invariant 18)",
                  x->profile_name, path, where, base);
}

/* --------------------------------------------------------- allow-write */

static int resolve_writes(const warden_policy_t* policy, const char** given,
                          size_t count, cli_error_t* err) {
  warden_extras_t* x = policy->extras;
  x->write_paths = calloc(count ? count : 1, sizeof *x->write_paths);
  x->write_is_dir = calloc(count ? count : 1, sizeof *x->write_is_dir);
  if (x->write_paths == NULL || x->write_is_dir == NULL)
    return oom(err);
  for (size_t i = 0; i < count; i++) {
    char phys[PATH_MAX];
    struct stat st;
    if (warden_user_path("--allow-write", given[i], true, phys, &st, err) != 0)
      return -1;
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
      return cli_fail(err, "VALIDATION_FAILED", NULL,
                      "--allow-write '%s' is neither a directory nor a "
                      "regular file",
                      given[i]);
    if (check_writable("--allow-write", given[i], phys, err) != 0)
      return -1;
    if (S_ISDIR(st.st_mode)) {
      /* As for --allow-read: a pathname socket below stays connectable
       * whatever the network mode. */
      char sock[PATH_MAX] = "";
      int dir = open(phys, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (dir >= 0)
        warden_find_socket(dir, phys, 2, sock, sizeof sock);
      if (sock[0] != '\0')
        return cli_fail(err, "ACCESS_DENIED",
                        "Allow a directory that holds no socket.",
                        "--allow-write '%s' holds the unix socket '%s': the "
                        "sandbox could connect to it, even with network none",
                        given[i], sock);
    }
    x->write_paths[i] = strdup(phys);
    if (keep(x, x->write_paths[i]) == NULL)
      return oom(err);
    x->write_is_dir[i] = S_ISDIR(st.st_mode);
    x->write_count = i + 1;
  }
  return 0;
}

/* ---------------------------------------------------------------- home */

/* Creates the missing components of `path` (absolute, physical, checked) as
 * 0700 directories, one descriptor at a time, never following a link: one
 * planted since the check makes the creation fail rather than land
 * elsewhere. The first directory it made goes to `created` ("" if none). */
static int make_home(const char* path, char* created, size_t size) {
  created[0] = '\0';
  int dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  const char* p = path;
  while (dir >= 0) {
    while (*p == '/')
      p++;
    if (*p == '\0')
      break;
    char name[NAME_MAX + 1];
    size_t n = strcspn(p, "/");
    if (n > NAME_MAX) {
      errno = ENAMETOOLONG;
      break;
    }
    memcpy(name, p, n);
    name[n] = '\0';
    p += n;
    int next =
        openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0 && errno == ENOENT) {
      if (mkdirat(dir, name, 0700) != 0 && errno != EEXIST)
        break;
      if (created[0] == '\0')
        snprintf(created, size, "%.*s", (int)(p - path), path);
      next = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      /* Exactly 0700, whatever the umask. */
      if (next >= 0 && fchmod(next, 0700) != 0) {
        close(next);
        next = -1;
      }
    }
    close(dir);
    dir = next;
  }
  if (dir < 0 || *p != '\0') {
    int e = errno;
    if (dir >= 0)
      close(dir);
    errno = e;
    return -1;
  }
  close(dir);
  return 0;
}

int warden_home_create(warden_policy_t* policy, cli_error_t* err) {
  warden_extras_t* x = policy->extras;
  if (x == NULL || !x->home_missing)
    return 0;
  if (make_home(x->home, x->home_created, sizeof x->home_created) != 0) {
    int e = errno;
    warden_home_abandon(policy);
    return cli_fail(err, "IO_FAILED", NULL, "--home: cannot create '%s': %s",
                    x->home, strerror(e));
  }
  return 0;
}

void warden_home_started(const invocation_t* inv,
                         const warden_policy_t* policy) {
  const warden_extras_t* x = policy->extras;
  if (x != NULL && x->home_created[0] != '\0' && !cli_flag(inv, "--quiet"))
    fprintf(stderr,
            WARDEN_PROGRAM ": created the home directory '%s' (mode 0700); "
                           "it persists between runs\n",
            x->home);
}

/* Removes, deepest first, the directories warden_home_create() made, up to
 * the first one it made: each is empty unless someone else wrote in it since,
 * and then rmdir leaves it (and those above it) alone. */
void warden_home_abandon(warden_policy_t* policy) {
  warden_extras_t* x = policy->extras;
  if (x == NULL || x->home_created[0] == '\0')
    return;
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", x->home);
  size_t top = strlen(x->home_created);
  while (strlen(dir) >= top && rmdir(dir) == 0) {
    char* slash = strrchr(dir, '/');
    if (slash == NULL || slash == dir)
      break;
    *slash = '\0';
  }
  x->home_created[0] = '\0';
}

static int resolve_home(warden_policy_t* policy, const char* given,
                        cli_error_t* err) {
  warden_extras_t* x = policy->extras;
  const char* hint = "Give --home a directory of its own, outside the "
                     "workspace, e.g. ~/maelys-homes/NAME.";
  char phys[PATH_MAX];
  struct stat st;
  if (warden_user_path("--home", given, false, phys, &st, err) != 0)
    return -1;
  bool exists = st.st_mode != 0;
  if (exists && !S_ISDIR(st.st_mode))
    return cli_fail(err, "VALIDATION_FAILED", hint,
                    "--home '%s' is not a directory", given);
  if (check_writable("--home", given, phys, err) != 0)
    return -1;
  const char* real = warden_invoking_home();
  struct passwd* pw = getpwuid(getuid());
  const char* homes[2] = {real, pw != NULL ? pw->pw_dir : NULL};
  for (size_t i = 0; i < 2; i++)
    if (homes[i] != NULL && homes[i][0] == '/' &&
        warden_path_inside(homes[i], phys))
      return cli_fail(err, "ACCESS_DENIED", hint,
                      "--home '%s' holds your home directory ('%s'): a "
                      "sandbox's home is a directory of its own",
                      given, homes[i]);
  if (warden_path_inside(phys, policy->workspace) ||
      warden_path_inside(policy->workspace, phys))
    return cli_fail(err, "ACCESS_DENIED", hint,
                    "--home '%s' %s the workspace ('%s'): a home outlives "
                    "the run and holds the agent's credentials, so it is "
                    "kept apart from the project",
                    given,
                    warden_path_inside(phys, policy->workspace)
                        ? "is or lies in"
                        : "contains",
                    policy->workspace);
  if (exists &&
      (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0))
    return cli_fail(err, "ACCESS_DENIED", hint,
                    "--home '%s' is owned by uid %u with mode %04o: a home "
                    "must be yours and writable by nobody else",
                    given, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
  if (check_ancestors("--home", given, phys, err) != 0)
    return -1;
  snprintf(x->home, sizeof x->home, "%s", phys);
  /* Created by `run` just before the spawn (warden_home_create), once every
   * check, the library's included, had its say; `plan` creates nothing. */
  x->home_missing = !exists;
  return 0;
}

/* -------------------------------------------------------------- public */

static int merge_option(const invocation_t* inv, const char* option,
                        const char*** list, size_t* count, cli_error_t* err) {
  const given_option_t* g = cli_option(inv, option);
  for (size_t i = 0; g != NULL && i < g->count; i++)
    if (push(list, count, g->values[i]) != 0)
      return oom(err);
  return 0;
}

int warden_extras_from(const invocation_t* inv, warden_policy_t* policy,
                       cli_error_t* err) {
  warden_extras_t* x = calloc(1, sizeof *x);
  if (x == NULL)
    return oom(err);
  policy->extras = x;
  reader_t rd = {x, policy, inv, err, NULL};
  const char* name = cli_value(inv, "--profile");
  if (name != NULL && load_profile(&rd, name) != 0)
    return -1;
  /* The profile's lists first, then the command line's. */
  const char** writes = NULL;
  size_t write_count = 0;
  if (name != NULL) {
    json_t* w = json_object_get(x->doc, "allow-write");
    if (w != NULL &&
        read_list(&rd, w, "allow-write", true, &writes, &write_count) != 0)
      goto fail;
  }
  if (merge_option(inv, "--allow-read", &x->allow_read, &x->allow_read_count,
                   err) != 0 ||
      merge_option(inv, "--deny", &x->deny, &x->deny_count, err) != 0 ||
      merge_option(inv, "--allow-write", &writes, &write_count, err) != 0)
    goto fail;
  policy->allow_read = x->allow_read;
  policy->allow_read_count = x->allow_read_count;
  policy->deny = x->deny;
  policy->deny_count = x->deny_count;
  if (resolve_writes(policy, writes, write_count, err) != 0)
    goto fail;
  free(writes);
  writes = NULL;
  const char* home =
      cli_value(inv, "--home") ? cli_value(inv, "--home") : rd.home;
  if (home != NULL && resolve_home(policy, home, err) != 0)
    return -1;
  if (name != NULL && check_profile_place(policy, err) != 0)
    return -1;
  if (policy->network_inherit && warden_ca_vars(inv, policy, err) != 0)
    return -1;
  return 0;
fail:
  free(writes);
  return -1;
}

void warden_extras_release(warden_policy_t* policy) {
  warden_extras_t* x = policy->extras;
  if (x == NULL)
    return;
  for (size_t i = 0; i < x->string_count; i++)
    free(x->strings[i]);
  free(x->strings);
  free(x->allow_read);
  free(x->deny);
  free(x->protect);
  free(x->pass_env);
  free(x->env);
  free(x->write_paths);
  free(x->write_is_dir);
  json_decref(x->doc);
  free(x);
  policy->extras = NULL;
  policy->allow_read = policy->deny = NULL;
  policy->allow_read_count = policy->deny_count = 0;
}

int warden_extras_plan(const warden_policy_t* policy,
                       maelys_executor_plan_t* plan, cli_error_t* err) {
  const warden_extras_t* x = policy->extras;
  if (x == NULL)
    return 0;
  char* error = NULL;
  maelys_executor_result_t r = MAELYS_EXECUTOR_OK;
  const char* what = "--allow-write";
  for (size_t i = 0; r == MAELYS_EXECUTOR_OK && i < x->write_count; i++)
    r = maelys_executor_plan_add_rule(
        plan, x->write_paths[i], MAELYS_EXECUTOR_ACCESS_WRITE,
        x->write_is_dir[i] ? MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY
                           : MAELYS_EXECUTOR_SCOPE_LITERAL_FILE,
        &error);
  if (r == MAELYS_EXECUTOR_OK && x->home[0] != '\0') {
    what = "--home";
    r = maelys_executor_plan_add_rule(
        plan, x->home, MAELYS_EXECUTOR_ACCESS_WRITE,
        MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, &error);
  }
  if (r != MAELYS_EXECUTOR_OK) {
    cli_fail(err, "VALIDATION_FAILED", NULL, "%s: %s", what,
             error ? error : maelys_executor_result_name(r));
    maelys_executor_error_free(error);
    return -1;
  }
  return warden_ca_plan(policy, plan, err);
}

static int protect_one(warden_protected_t* list, const char* label,
                       const char* path, cli_error_t* err) {
  if (list->count >= sizeof list->items / sizeof list->items[0])
    return cli_fail(err, "VALIDATION_FAILED",
                    "Protect fewer paths (a parent directory protects "
                    "everything below it).",
                    "too many protected paths: '%s' does not fit", path);
  size_t before = list->count;
  warden_protect(list, label, path);
  if (list->count == before)
    return cli_fail(err, "VALIDATION_FAILED", NULL,
                    "protected path '%s' is not an absolute path", path);
  return 0;
}

int warden_extras_protect(const warden_policy_t* policy,
                          warden_protected_t* list, cli_error_t* err) {
  const warden_extras_t* x = policy->extras;
  if (x == NULL)
    return 0;
  /* Both directories profiles are read from, on every run, whether or not it
   * uses a profile: a file the payload of a run started by a user writes is
   * that user's, so the owner check cannot tell a planted profile from a
   * real one; only never letting a run write there can (invariant 18). An
   * invalid system directory is never read, so there is nothing to keep. */
  char dirs[2][PATH_MAX];
  cli_error_t ignored = {0};
  if (profile_dirs(dirs, &ignored) == 0) {
    if (dirs[0][0] != '\0' &&
        protect_one(list, "the user's profile directory", dirs[0], err) != 0)
      return -1;
    if (protect_one(list, "the system profile directory", dirs[1], err) != 0)
      return -1;
  }
  if (x->profile_path[0] != '\0' &&
      (protect_one(list, "the profile file", x->profile_path, err) != 0 ||
       protect_one(list, "the profile directory", x->profile_dir, err) != 0))
    return -1;
  for (size_t i = 0; i < x->protect_count; i++)
    if (protect_one(list, "a path the profile protects", x->protect[i], err) !=
        0)
      return -1;
  for (size_t i = 0; i < x->ca_count; i++)
    for (size_t k = 0; k < x->ca[i].path_count; k++)
      if (protect_one(list, "a CA file the network trusts", x->ca[i].paths[k],
                      err) != 0)
        return -1;
  return 0;
}

static bool named(const char** names, size_t count, const char* name) {
  for (size_t i = 0; i < count; i++)
    if (strcmp(names[i], name) == 0)
      return true;
  return false;
}

int warden_extras_env(const warden_policy_t* policy,
                      maelys_execution_request_t* req, const char** names,
                      size_t* count, size_t max, char* path_out,
                      size_t path_size, cli_error_t* err) {
  const warden_extras_t* x = policy->extras;
  if (x == NULL)
    return 0;
  /* In order of precedence: the profile's entries, the profile's pass-env,
   * the CA variables, the home. */
  size_t total = x->env_count + x->pass_env_count + x->ca_count + 1;
  for (size_t i = 0; i < total; i++) {
    const char* name;
    const char* value;
    if (i < x->env_count) {
      name = x->env[i].name;
      value = x->env[i].value;
    } else if (i < x->env_count + x->pass_env_count) {
      name = x->pass_env[i - x->env_count];
      value = getenv(name);
    } else if (i < total - 1) {
      name = x->ca[i - x->env_count - x->pass_env_count].name;
      value = x->ca[i - x->env_count - x->pass_env_count].value;
    } else {
      name = "HOME";
      value = x->home[0] ? x->home : NULL;
    }
    if (value == NULL || named(names, *count, name))
      continue;
    char* error = NULL;
    maelys_executor_result_t r =
        maelys_execution_request_add_environment(req, name, value, &error);
    if (r != MAELYS_EXECUTOR_OK) {
      cli_fail(err, "VALIDATION_FAILED", NULL, "environment %s: %s", name,
               error ? error : maelys_executor_result_name(r));
      maelys_executor_error_free(error);
      return -1;
    }
    if (*count < max)
      names[(*count)++] = name;
    if (strcmp(name, "PATH") == 0)
      snprintf(path_out, path_size, "%s", value);
  }
  return 0;
}
