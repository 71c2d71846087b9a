/*
 * The built-in profiles --ro and --rw, compiled into the binary: the minimal
 * runtime read-only, /proc, a minimal /dev, a private sized /tmp holding
 * HOME, no network unless asked, the workspace read-only or writable, and
 * the caller's extra reads and denials.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "warden.h"

/* The minimal runtime: top-level directories (or the symlinks merged-/usr
 * systems have there) and the few files of /etc a program needs to start,
 * resolve users and trust certificates. Nothing else of /etc, and never
 * /run, /tmp or a home directory. */
static const char* const runtime_dirs[] = {
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", NULL};
static const char* const runtime_etc[] = {
    "/etc/ld.so.cache",  "/etc/ld.so.conf", "/etc/ld.so.conf.d",
    "/etc/alternatives", "/etc/ssl",        "/etc/ca-certificates",
    "/etc/passwd",       "/etc/group",      "/etc/nsswitch.conf",
    "/etc/localtime",    "/etc/hosts",      NULL};

#define PROFILE_TMP_SIZE (UINT64_C(256) << 20)

static int plan_error(cli_error_t* err, maelys_executor_result_t r, char* error,
                      const char* what) {
  cli_fail(
      err, r == MAELYS_EXECUTOR_ERR_MEMORY ? "UNEXPECTED" : "VALIDATION_FAILED",
      NULL, "%s: %s", what, error ? error : maelys_executor_result_name(r));
  maelys_executor_error_free(error);
  return -1;
}

/* A runtime path as it is on the host: a symlink stays a symlink (with the
 * same text) so that nothing is bound through a link; a directory or file is
 * bound read-only; an absent one is left out. */
static int add_runtime(maelys_executor_plan_t* plan, const char* path,
                       cli_error_t* err) {
  struct stat st;
  char* error = NULL;
  maelys_executor_result_t r = MAELYS_EXECUTOR_OK;
  if (lstat(path, &st) != 0)
    return 0;
  if (S_ISLNK(st.st_mode)) {
    char target[PATH_MAX];
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0)
      return 0;
    target[n] = '\0';
    r = maelys_executor_plan_add_symlink(plan, target, path, &error);
  } else if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) {
    r = maelys_executor_plan_add_bind(plan, path, path, 0,
                                      MAELYS_EXECUTOR_MISSING_SKIP, &error);
  }
  return r == MAELYS_EXECUTOR_OK ? 0 : plan_error(err, r, error, path);
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

/* A path the caller named, as the canonical host path the plan records:
 * symlinks resolved now, at plan time, so that a link appearing later is
 * refused by the backend rather than followed. */
static int canonical(const char* option, const char* path, char* out,
                     bool must_exist, struct stat* st, cli_error_t* err) {
  char abs[PATH_MAX];
  if (warden_absolute(path, abs, sizeof abs) != 0)
    return cli_fail(err, "VALIDATION_FAILED", NULL, "%s '%s': path too long",
                    option, path);
  if (realpath(abs, out) == NULL) {
    if (must_exist || errno != ENOENT)
      return cli_fail(err, "NOT_FOUND", "Check the path.", "%s '%s': %s",
                      option, path, strerror(errno));
    snprintf(out, PATH_MAX, "%s", abs);
    memset(st, 0, sizeof *st);
    return 0;
  }
  if (stat(out, st) != 0)
    return cli_fail(err, "NOT_FOUND", NULL, "%s '%s': %s", option, path,
                    strerror(errno));
  return 0;
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
  for (size_t i = 0; r == MAELYS_EXECUTOR_OK && runtime_dirs[i]; i++)
    if (add_runtime(plan, runtime_dirs[i], err) != 0)
      goto fail;
  for (size_t i = 0; r == MAELYS_EXECUTOR_OK && runtime_etc[i]; i++)
    if (add_runtime(plan, runtime_etc[i], err) != 0)
      goto fail;
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_plan_add_proc(plan, "/proc", &error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_plan_add_dev(plan, "/dev", &error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_plan_add_tmpfs(plan, "/tmp", PROFILE_TMP_SIZE, &error);
  if (r == MAELYS_EXECUTOR_OK)
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
    if (canonical("--allow-read", policy->allow_read[i], path, true, &st,
                  err) != 0)
      goto fail;
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
  for (size_t i = 0; i < policy->deny_count; i++) {
    char path[PATH_MAX];
    struct stat st;
    if (canonical("--deny", policy->deny[i], path, false, &st, err) != 0)
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
  r = maelys_executor_plan_set_network(plan,
                                       policy->network_inherit
                                           ? MAELYS_EXECUTOR_NETWORK_INHERIT
                                           : MAELYS_EXECUTOR_NETWORK_NONE,
                                       &error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_plan_set_process_tree_required(plan, 1, &error);
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

int warden_file_plan(const char* file, maelys_executor_plan_t** out,
                     cli_error_t* err) {
  FILE* f = fopen(file, "r");
  if (f == NULL)
    return cli_fail(err, errno == ENOENT ? "NOT_FOUND" : "IO_FAILED",
                    "Give a readable plan file.", "--plan '%s': %s", file,
                    strerror(errno));
  char* buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len + 65536 > cap) {
      cap = cap ? cap * 2 : 65536;
      if (cap > (16u << 20)) {
        free(buf);
        fclose(f);
        return cli_fail(err, "PROTOCOL_FAILED", NULL,
                        "--plan '%s': larger than 16 MiB", file);
      }
      char* n = realloc(buf, cap);
      if (n == NULL) {
        free(buf);
        fclose(f);
        return cli_fail(err, "UNEXPECTED", NULL, "out of memory");
      }
      buf = n;
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0)
      break;
  }
  bool failed = ferror(f);
  int read_errno = errno;
  fclose(f);
  if (failed) {
    free(buf);
    return cli_fail(err, "IO_FAILED", NULL, "--plan '%s': %s", file,
                    strerror(read_errno));
  }
  maelys_executor_plan_t* plan = NULL;
  char* error = NULL;
  maelys_executor_result_t r =
      maelys_executor_plan_from_json(buf, len, &plan, &error);
  free(buf);
  if (r == MAELYS_EXECUTOR_OK && !maelys_executor_plan_is_sealed(plan))
    r = maelys_executor_plan_seal(plan, &error);
  if (r != MAELYS_EXECUTOR_OK) {
    cli_fail(err, "PROTOCOL_FAILED",
             "Write the plan in the maelys-executor-plan/1 format ('maelys-"
             "warden plan --rw' prints one).",
             "--plan '%s': %s", file, error ? error : "invalid");
    maelys_executor_error_free(error);
    maelys_executor_plan_destroy(plan);
    return -1;
  }
  *out = plan;
  return 0;
}

int warden_policy_from(const invocation_t* inv, warden_policy_t* policy,
                       cli_error_t* err) {
  memset(policy, 0, sizeof *policy);
  policy->plan_file = cli_value(inv, "--plan");
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
  const char* ws = cli_value(inv, "--workspace");
  struct stat st;
  if (canonical("--workspace", ws ? ws : ".", policy->workspace, true, &st,
                err) != 0)
    return -1;
  if (!S_ISDIR(st.st_mode))
    return cli_fail(err, "VALIDATION_FAILED", NULL,
                    "--workspace '%s' is not a directory", policy->workspace);
  return 0;
}

int warden_build_plan(const warden_policy_t* policy,
                      maelys_executor_plan_t** out, cli_error_t* err) {
  if (policy->plan_file != NULL)
    return warden_file_plan(policy->plan_file, out, err);
  return warden_profile_plan(policy, out, err);
}
