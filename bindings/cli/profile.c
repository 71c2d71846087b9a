/*
 * The built-in profiles --ro and --rw, compiled into the binary: the minimal
 * runtime read-only, /proc, a minimal /dev, a private sized /tmp holding
 * HOME, no network unless asked, the workspace read-only or writable, and
 * the caller's extra reads and denials. For a backend without namespaces
 * (landlock) the same without /proc, /tmp and HOME, which only a mount
 * namespace can give.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "warden.h"

#define PROFILE_TMP_SIZE (UINT64_C(256) << 20)

static int plan_error(cli_error_t* err, maelys_executor_result_t r, char* error,
                      const char* what) {
  cli_fail(
      err, r == MAELYS_EXECUTOR_ERR_MEMORY ? "UNEXPECTED" : "VALIDATION_FAILED",
      NULL, "%s: %s", what, error ? error : maelys_executor_result_name(r));
  maelys_executor_error_free(error);
  return -1;
}

int warden_absolute(const char* path, char* out, size_t size) {
  char joined[PATH_MAX * 2];
  if (path[0] == '/') {
    snprintf(joined, sizeof joined, "%s", path);
  } else {
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd) == NULL)
      return -1;
    snprintf(joined, sizeof joined, "%s/%s", cwd, path);
  }
  /* Lexical normalisation: ".", ".." and doubled slashes. */
  char* parts[PATH_MAX / 2];
  size_t n = 0;
  for (char *save = NULL, *tok = strtok_r(joined, "/", &save); tok != NULL;
       tok = strtok_r(NULL, "/", &save)) {
    if (strcmp(tok, ".") == 0)
      continue;
    if (strcmp(tok, "..") == 0) {
      if (n > 0)
        n--;
      continue;
    }
    parts[n++] = tok;
  }
  size_t len = 0;
  out[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    int w = snprintf(out + len, size - len, "/%s", parts[i]);
    if (w < 0 || (size_t)w >= size - len)
      return -1;
    len += (size_t)w;
  }
  if (n == 0)
    snprintf(out, size, "/");
  return 0;
}

/* Whether a socket (in any network namespace) is bound to the socket file
 * `name` in `dir`: a datagram connect() through an O_PATH descriptor of that
 * very file fails with ECONNREFUSED only when none is (EPROTOTYPE for a
 * stream socket, which sees nothing of it). A stale socket file (an earlier
 * run's) connects to nothing, and must not lock a directory out of every
 * later run; any other answer counts as live. The backend makes the same
 * test (socket_live in the bubblewrap backend). */
static bool socket_live(int dir, const char* name) {
  int fd = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return errno != ENOENT;
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  snprintf(addr.sun_path, sizeof addr.sun_path, "/proc/self/fd/%d", fd);
  int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int rc = s < 0 ? -1 : connect(s, (struct sockaddr*)&addr, sizeof addr);
  int e = rc == 0 ? 0 : errno;
  if (s >= 0)
    close(s);
  close(fd);
  return !(s >= 0 && rc != 0 && (e == ECONNREFUSED || e == ENOENT));
}

/* Invariant 18 and DESIGN's note on network NONE: a pathname unix socket
 * below a bound directory stays connectable (a read-only bind does not stop
 * connect()), so a readable directory may hold no live one within two
 * levels. The socket found, into `found`, or "". */
void warden_find_socket(int dir, const char* prefix, int depth, char* found,
                        size_t size) {
  DIR* d = fdopendir(dir);
  if (d == NULL) {
    close(dir);
    return;
  }
  struct dirent* e;
  while (found[0] == '\0' && (e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
      continue;
    if (S_ISSOCK(st.st_mode)) {
      if (socket_live(dirfd(d), e->d_name))
        snprintf(found, size, "%s/%s", prefix, e->d_name);
    } else if (S_ISDIR(st.st_mode) && depth > 1) {
      int sub = openat(dirfd(d), e->d_name,
                       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      char next[PATH_MAX];
      snprintf(next, sizeof next, "%.3000s/%.255s", prefix, e->d_name);
      if (sub >= 0)
        warden_find_socket(sub, next, depth - 1, found, size);
    }
  }
  closedir(d);
}

static int option_value(const invocation_t* inv, const char* name,
                        int64_t (*parse)(const char*), uint64_t* out) {
  const char* v = cli_value(inv, name);
  *out = 0;
  if (v == NULL)
    return 0;
  int64_t x = parse(v);
  if (x <= 0)
    return -1;
  *out = (uint64_t)x;
  return 0;
}

static int64_t parse_count(const char* v) {
  char* end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  return errno || end == v || *end || x <= 0 ? -1 : x;
}

static int64_t parse_seconds(const char* v) {
  int64_t ms = cli_duration_ms(v);
  return ms < 0 ? -1 : (ms + 999) / 1000;
}

int warden_profile_plan(const warden_policy_t* policy,
                        maelys_executor_plan_t** out, cli_error_t* err) {
  maelys_executor_plan_t* plan = NULL;
  char* error = NULL;
  maelys_executor_result_t r = maelys_executor_plan_create(&plan, &error);
  if (r != MAELYS_EXECUTOR_OK)
    return plan_error(err, r, error, "creating the plan");
  r = maelys_executor_plan_set_root(plan, MAELYS_EXECUTOR_ROOT_READONLY, 0,
                                    &error);
  /* The minimal runtime (the library's list: executor.h). */
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_plan_add_minimal_runtime(plan, &error);
  /* An inherited network resolves names and verifies TLS (netfiles.c). */
  if (r == MAELYS_EXECUTOR_OK && policy->network_inherit &&
      warden_network_files(plan, err) != 0)
    goto fail;
  /* Without namespaces nothing can be mounted: no procfs of the sandbox's
   * own, no private /tmp holding HOME; the host's devices are granted one
   * by one. */
  if (r == MAELYS_EXECUTOR_OK && !policy->no_namespaces)
    r = maelys_executor_plan_add_proc(plan, "/proc", &error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_plan_add_dev(plan, "/dev", &error);
  if (r == MAELYS_EXECUTOR_OK && !policy->no_namespaces)
    r = maelys_executor_plan_add_tmpfs(plan, "/tmp", PROFILE_TMP_SIZE, &error);
  if (r == MAELYS_EXECUTOR_OK && !policy->no_namespaces)
    r = maelys_executor_plan_add_dir(plan, WARDEN_HOME, &error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_plan_add_rule(
        plan, policy->workspace,
        policy->writable ? MAELYS_EXECUTOR_ACCESS_WRITE
                         : MAELYS_EXECUTOR_ACCESS_READ,
        MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, &error);
  if (r != MAELYS_EXECUTOR_OK) {
    plan_error(err, r, error, "the profile");
    goto fail;
  }
  for (size_t i = 0; i < policy->allow_read_count; i++) {
    char path[PATH_MAX];
    struct stat st;
    if (warden_user_path("--allow-read", policy->allow_read[i], true, path, &st,
                         err) != 0)
      goto fail;
    if (S_ISDIR(st.st_mode)) {
      char sock[PATH_MAX] = "";
      int dir = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (dir >= 0)
        warden_find_socket(dir, path, 2, sock, sizeof sock);
      if (sock[0] != '\0') {
        cli_fail(err, "ACCESS_DENIED",
                 "Allow a directory that holds no socket, or the files you "
                 "need one by one.",
                 "--allow-read '%s' holds the unix socket '%s': a read-only "
                 "bind would still let the sandbox connect to it, even with "
                 "network none",
                 policy->allow_read[i], sock);
        goto fail;
      }
    }
    r = maelys_executor_plan_add_rule(
        plan, path, MAELYS_EXECUTOR_ACCESS_READ,
        S_ISDIR(st.st_mode) ? MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY
                            : MAELYS_EXECUTOR_SCOPE_LITERAL_FILE,
        &error);
    if (r != MAELYS_EXECUTOR_OK) {
      plan_error(err, r, error, "--allow-read");
      goto fail;
    }
  }
  /* --allow-write, --home and the CA files (profiles.c, netfiles.c). */
  if (warden_extras_plan(policy, plan, err) != 0)
    goto fail;
  for (size_t i = 0; i < policy->deny_count; i++) {
    char path[PATH_MAX];
    struct stat st;
    if (warden_user_path("--deny", policy->deny[i], false, path, &st, err) != 0)
      goto fail;
    r = maelys_executor_plan_add_rule(
        plan, path, MAELYS_EXECUTOR_ACCESS_DENY,
        S_ISREG(st.st_mode) ? MAELYS_EXECUTOR_SCOPE_LITERAL_FILE
                            : MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY,
        &error);
    if (r != MAELYS_EXECUTOR_OK) {
      plan_error(err, r, error, "--deny");
      goto fail;
    }
  }
  /* What the workspace keeps from its payload (protect.c), after the
   * caller's own rules: a path the caller ruled keeps the caller's rule. */
  if (warden_protect_profile(policy, plan, err) != 0)
    goto fail;
  r = maelys_executor_plan_set_network(plan,
                                       policy->network_inherit
                                           ? MAELYS_EXECUTOR_NETWORK_INHERIT
                                           : MAELYS_EXECUTOR_NETWORK_NONE,
                                       &error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_plan_set_process_tree_required(plan, 1, &error);
  /* Ceilings by default where they were proved (where one was not, the run
   * says "unbounded" rather than refusing); asked for, always. */
  if (r == MAELYS_EXECUTOR_OK && (policy->tasks || policy->tasks_proved))
    r = maelys_executor_plan_set_limit(
        plan, MAELYS_EXECUTOR_LIMIT_TASKS,
        policy->tasks ? policy->tasks : WARDEN_DEFAULT_TASKS, &error);
  if (r == MAELYS_EXECUTOR_OK && (policy->memory || policy->memory_proved))
    r = maelys_executor_plan_set_limit(
        plan, MAELYS_EXECUTOR_LIMIT_MEMORY,
        policy->memory ? policy->memory : WARDEN_DEFAULT_MEMORY, &error);
  if (r == MAELYS_EXECUTOR_OK && policy->cpu_seconds)
    r = maelys_executor_plan_set_rlimit(plan, MAELYS_EXECUTOR_RLIMIT_CPU,
                                        policy->cpu_seconds,
                                        policy->cpu_seconds, &error);
  if (r == MAELYS_EXECUTOR_OK && policy->open_files)
    r = maelys_executor_plan_set_rlimit(plan, MAELYS_EXECUTOR_RLIMIT_NOFILE,
                                        policy->open_files, policy->open_files,
                                        &error);
  if (r == MAELYS_EXECUTOR_OK && policy->file_size)
    r = maelys_executor_plan_set_rlimit(plan, MAELYS_EXECUTOR_RLIMIT_FSIZE,
                                        policy->file_size, policy->file_size,
                                        &error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_plan_seal(plan, &error);
  if (r != MAELYS_EXECUTOR_OK) {
    plan_error(err, r, error, "the profile");
    goto fail;
  }
  *out = plan;
  return 0;
fail:
  maelys_executor_plan_destroy(plan);
  return -1;
}

int warden_file_plan(warden_policy_t* policy, maelys_executor_plan_t** out,
                     cli_error_t* err) {
  char* buf = NULL;
  size_t len = 0;
  if (warden_read_authority("--plan", policy->plan_file, 16u << 20, &buf, &len,
                            policy->plan_path, err) != 0)
    return -1;
  maelys_executor_plan_t* plan = NULL;
  char* error = NULL;
  maelys_executor_result_t r =
      maelys_executor_plan_from_json(buf, len, &plan, &error);
  free(buf);
  if (r == MAELYS_EXECUTOR_OK && !maelys_executor_plan_is_sealed(plan))
    r = maelys_executor_plan_seal(plan, &error);
  if (r != MAELYS_EXECUTOR_OK) {
    cli_fail(err, "PROTOCOL_FAILED",
             "Write the plan in the maelys-executor-plan/1 format: "
             "'maelys-warden plan --ro --format jsonl --field plan > "
             "~/agent-plan.json' writes one that --plan loads (keep plan "
             "files where no sandbox writes).",
             "--plan '%s': %s", policy->plan_file, error ? error : "invalid");
    maelys_executor_error_free(error);
    maelys_executor_plan_destroy(plan);
    return -1;
  }
  /* --plan-digest: the caller pins the plan it reviewed. */
  char* digest = NULL;
  maelys_executor_plan_digest(plan, &digest, NULL);
  if (policy->plan_digest != NULL &&
      (digest == NULL || strcmp(digest, policy->plan_digest) != 0)) {
    cli_fail(err, "ACCESS_DENIED",
             "Review the plan again and pin its new digest, or restore the "
             "one you reviewed.",
             "--plan '%s' seals to %s, not to the pinned --plan-digest %s",
             policy->plan_file, digest ? digest : "?", policy->plan_digest);
    maelys_executor_string_free(digest);
    maelys_executor_plan_destroy(plan);
    return -1;
  }
  maelys_executor_string_free(digest);
  *out = plan;
  return 0;
}

int warden_policy_from(const invocation_t* inv, warden_policy_t* policy,
                       cli_error_t* err) {
  memset(policy, 0, sizeof *policy);
  policy->plan_file = cli_value(inv, "--plan");
  policy->policy_file = cli_value(inv, "--policy");
  policy->mediator = cli_value(inv, "--mediator");
  policy->writable = cli_flag(inv, "--rw");
  const char* net = cli_value(inv, "--network");
  policy->network_inherit = net != NULL && strcmp(net, "inherit") == 0;
  const given_option_t* g = cli_option(inv, "--allow-read");
  if (g) {
    policy->allow_read = (const char* const*)g->values;
    policy->allow_read_count = g->count;
  }
  g = cli_option(inv, "--deny");
  if (g) {
    policy->deny = (const char* const*)g->values;
    policy->deny_count = g->count;
  }
  g = cli_option(inv, "--unprotect");
  if (g) {
    policy->unprotect = (const char* const*)g->values;
    policy->unprotect_count = g->count;
  }
  policy->protection = calloc(1, sizeof *policy->protection);
  if (policy->protection == NULL)
    return cli_fail(err, "UNEXPECTED", NULL, "out of memory");
  policy->plan_digest = cli_value(inv, "--plan-digest");
  struct stat st;
  if (warden_workspace_path(cli_value(inv, "--workspace"), policy->workspace,
                            &st, err) != 0)
    return -1;
  /* The temp root a policy may grant: a directory no symbolic link reaches,
   * refused where a workspace would be (/, /tmp, a home...). */
  const char* temp = cli_value(inv, "--policy-temp");
  if (temp != NULL &&
      warden_workspace_path(temp, policy->policy_temp, &st, err) != 0)
    return -1;
  static const struct {
    const char* option;
    int64_t (*parse)(const char*);
    size_t offset;
    const char* what;
  } limits[] = {
      {"--tasks", parse_count, offsetof(warden_policy_t, tasks), "a count"},
      {"--memory", cli_size_bytes, offsetof(warden_policy_t, memory), "a size"},
      {"--cpu-time", parse_seconds, offsetof(warden_policy_t, cpu_seconds),
       "a duration"},
      {"--open-files", parse_count, offsetof(warden_policy_t, open_files),
       "a count"},
      {"--file-size", cli_size_bytes, offsetof(warden_policy_t, file_size),
       "a size"},
  };
  for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++)
    if (option_value(inv, limits[i].option, limits[i].parse,
                     (uint64_t*)((char*)policy + limits[i].offset)) != 0)
      return cli_fail(err, "VALIDATION_FAILED", NULL,
                      "%s must be %s above zero", limits[i].option,
                      limits[i].what);
  return warden_extras_from(inv, policy, err);
}

int warden_build_plan(warden_policy_t* policy, maelys_executor_plan_t** out,
                      cli_error_t* err) {
  if (policy->plan_file != NULL)
    return warden_file_plan(policy, out, err) != 0 ||
                   warden_protect_from_plan(policy->protection, *out, err) != 0
               ? -1
               : 0;
  return warden_profile_plan(policy, out, err);
}

void warden_policy_dispose(warden_policy_t* policy) {
  if (policy->protection != NULL)
    warden_protection_free(policy->protection);
  free(policy->protection);
  policy->protection = NULL;
}
