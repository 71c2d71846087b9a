/*
 * What an inherited network needs to be a whole one: name resolution and
 * TLS. The minimal runtime of the built-in profiles already holds /etc/hosts,
 * /etc/nsswitch.conf and the Debian CA store; an inherited network adds the
 * resolver's configuration and the CA stores of other distributions, and
 * passes the caller's standard CA variables with the files they name.
 *
 * Under network none none of this is bound or passed: with nothing to
 * resolve or to connect to, it would only be more of the host to read.
 *
 * A CA file decides whom TLS trusts, so it is authority (invariant 18): no
 * symbolic link in its path, owned by the caller or root and writable by
 * nobody else (nor any directory above it), and never inside the workspace,
 * anything this run makes writable, anything an earlier run made writable
 * (written.c) or the sandboxes' staging directory. A
 * variable that names a path failing any of this refuses the run rather than
 * being dropped: a silent TLS failure inside is harder to understand than a
 * refusal that names the variable.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "maelys/backend.h"
#include "warden.h"

/* Resolution (what the runtime does not hold already) and the CA stores. On
 * systemd-resolved hosts /etc/resolv.conf is a link into /run, which is
 * never bound: its target is bound in its place. */
static const char* const network_files[] = {
    "/etc/resolv.conf", "/etc/host.conf", "/etc/gai.conf", "/etc/services",
    "/etc/protocols", "/etc/hosts", "/etc/nsswitch.conf",
    /* CA stores: Debian and derivatives, Fedora and RHEL (with the crypto
     * policies OpenSSL reads there), SUSE's are links into /var/lib. */
    "/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/etc/crypto-policies",
    NULL};

static const char* const ca_variables[] = {"SSL_CERT_FILE", "SSL_CERT_DIR",
                                           "NODE_EXTRA_CA_CERTS",
                                           "REQUESTS_CA_BUNDLE"};

static bool already_bound(const maelys_executor_plan_t* plan,
                          const char* destination) {
  size_t n = maelys_executor_plan_mount_count(plan);
  for (size_t i = 0; i < n; i++) {
    maelys_executor_mount_view_t m;
    if (maelys_executor_plan_mount_get(plan, i, &m) == 0 &&
        strcmp(m.destination, destination) == 0)
      return true;
  }
  return false;
}

/* Binds the host's `path` read-only at the same place; a link is bound from
 * its target, which must be a root-owned file or directory that nobody else
 * can change, reached without any further link. Absent: left out. */
static int bind_host_path(maelys_executor_plan_t* plan, const char* path,
                          cli_error_t* err) {
  struct stat st;
  if (already_bound(plan, path) || lstat(path, &st) != 0)
    return 0;
  char source[PATH_MAX];
  snprintf(source, sizeof source, "%s", path);
  if (S_ISLNK(st.st_mode)) {
    char resolved[PATH_MAX];
    if (realpath(path, resolved) == NULL)
      return 0; /* dangling: the host has none either */
    char phys[PATH_MAX];
    if (warden_user_path("--network inherit", resolved, true, phys, &st, err) !=
        0)
      return -1;
    if (st.st_uid != 0)
      return cli_fail(err, "ACCESS_DENIED",
                      "Point the link at a file root owns.",
                      "--network inherit: '%s' links to '%s', owned by uid "
                      "%u: only root's files are bound in its place",
                      path, phys, (unsigned)st.st_uid);
    if (warden_check_owner_chain("--network inherit", path, phys, err) != 0)
      return -1;
    snprintf(source, sizeof source, "%s", phys);
  }
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
    return 0;
  char* error = NULL;
  maelys_executor_result_t r = maelys_executor_plan_add_bind(
      plan, source, path, 0, MAELYS_EXECUTOR_MISSING_SKIP, &error);
  if (r != MAELYS_EXECUTOR_OK) {
    cli_fail(err, "VALIDATION_FAILED", NULL, "--network inherit: %s: %s", path,
             error ? error : maelys_executor_result_name(r));
    maelys_executor_error_free(error);
    return -1;
  }
  return 0;
}

int warden_network_files(maelys_executor_plan_t* plan, cli_error_t* err) {
  for (size_t i = 0; network_files[i] != NULL; i++)
    if (bind_host_path(plan, network_files[i], err) != 0)
      return -1;
  return 0;
}

static bool given_by_env_option(const invocation_t* inv, const char* name) {
  const given_option_t* g = cli_option(inv, "--env");
  size_t n = strlen(name);
  for (size_t i = 0; g != NULL && i < g->count; i++)
    if (strncmp(g->values[i], name, n) == 0 && g->values[i][n] == '=')
      return true;
  return false;
}

/* Where a sandbox of this run may write, if `path` lies there. */
static const char* writable_place(const warden_policy_t* policy,
                                  const char* path, const char** base) {
  const warden_extras_t* x = policy->extras;
  if (warden_path_inside(path, policy->workspace)) {
    *base = policy->workspace;
    return "the workspace";
  }
  for (size_t i = 0; i < x->write_count; i++)
    if (warden_path_inside(path, x->write_paths[i])) {
      *base = x->write_paths[i];
      return "a directory this run makes writable (--allow-write)";
    }
  if (x->home[0] != '\0' && warden_path_inside(path, x->home)) {
    *base = x->home;
    return "the home directory this run makes writable (--home)";
  }
  if (warden_path_inside(path, WARDEN_STAGING_DIR)) {
    *base = WARDEN_STAGING_DIR;
    return "the sandboxes' staging directory";
  }
  return NULL;
}

static int check_ca_path(const warden_policy_t* policy, const char* name,
                         const char* piece, bool want_dir, warden_ca_var_t* v,
                         cli_error_t* err) {
  const char* hint = "Point the variable at a CA file or directory outside "
                     "every workspace, yours or root's, or unset it for this "
                     "run.";
  if (piece[0] != '/')
    return cli_fail(err, "VALIDATION_FAILED", hint,
                    "%s='%s' is not an absolute path: the sandbox would read "
                    "it relative to another directory",
                    name, piece);
  if (v->path_count >= sizeof v->paths / sizeof v->paths[0])
    return cli_fail(err, "VALIDATION_FAILED", hint,
                    "%s names more than %zu directories", name,
                    sizeof v->paths / sizeof v->paths[0]);
  char* phys = v->paths[v->path_count];
  struct stat st;
  if (warden_user_path(name, piece, true, phys, &st, err) != 0)
    return -1;
  if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
    return cli_fail(err, "VALIDATION_FAILED", hint, "%s='%s' is not a %s", name,
                    piece, want_dir ? "directory" : "regular file");
  const char* base = NULL;
  const char* where = writable_place(policy, phys, &base);
  if (where != NULL)
    return cli_fail(err, "ACCESS_DENIED", hint,
                    "%s='%s' lies inside %s ('%s'), where a sandbox could "
                    "write its own CA: refused (invariant 18)",
                    name, piece, where, base);
  if (warden_check_owner_chain(name, piece, phys, err) != 0 ||
      warden_written_check(
          name, phys, "whom TLS trusts is never read from there", err) != 0)
    return -1;
  v->is_dir[v->path_count++] = want_dir;
  return 0;
}

int warden_ca_vars(const invocation_t* inv, warden_policy_t* policy,
                   cli_error_t* err) {
  warden_extras_t* x = policy->extras;
  for (size_t i = 0; i < sizeof ca_variables / sizeof ca_variables[0]; i++) {
    const char* name = ca_variables[i];
    const char* value = getenv(name);
    if (value == NULL || value[0] == '\0' || given_by_env_option(inv, name))
      continue;
    warden_ca_var_t* v = &x->ca[x->ca_count];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->value = value;
    bool dirs = strcmp(name, "SSL_CERT_DIR") == 0;
    if (!dirs) {
      if (check_ca_path(policy, name, value, false, v, err) != 0)
        return -1;
    } else {
      /* OpenSSL reads SSL_CERT_DIR as a colon-separated list. */
      char copy[PATH_MAX * 2];
      snprintf(copy, sizeof copy, "%s", value);
      for (char *save = NULL, *piece = strtok_r(copy, ":", &save);
           piece != NULL; piece = strtok_r(NULL, ":", &save))
        if (check_ca_path(policy, name, piece, true, v, err) != 0)
          return -1;
    }
    x->ca_count++;
  }
  return 0;
}

/* Whether the plan has a rule on `path` already (the same CA file named by
 * two variables, or also given with --allow-read): one rule per path. */
static bool has_rule(const maelys_executor_plan_t* plan, const char* path) {
  size_t n = maelys_executor_plan_rule_count(plan);
  for (size_t i = 0; i < n; i++) {
    maelys_executor_rule_view_t r;
    if (maelys_executor_plan_rule_get(plan, i, &r) == 0 &&
        strcmp(r.path, path) == 0)
      return true;
  }
  return false;
}

int warden_ca_plan(const warden_policy_t* policy, maelys_executor_plan_t* plan,
                   cli_error_t* err) {
  const warden_extras_t* x = policy->extras;
  for (size_t i = 0; i < x->ca_count; i++)
    for (size_t k = 0; k < x->ca[i].path_count; k++) {
      if (has_rule(plan, x->ca[i].paths[k]))
        continue;
      char* error = NULL;
      maelys_executor_result_t r = maelys_executor_plan_add_rule(
          plan, x->ca[i].paths[k], MAELYS_EXECUTOR_ACCESS_READ,
          x->ca[i].is_dir[k] ? MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY
                             : MAELYS_EXECUTOR_SCOPE_LITERAL_FILE,
          &error);
      if (r != MAELYS_EXECUTOR_OK) {
        cli_fail(err, "VALIDATION_FAILED", NULL, "%s: %s", x->ca[i].name,
                 error ? error : maelys_executor_result_name(r));
        maelys_executor_error_free(error);
        return -1;
      }
    }
  return 0;
}
