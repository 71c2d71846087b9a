/*
 * What a run adds to the built-in profiles: a named profile (--profile), more
 * writable paths (--allow-write), a persistent home (--home), and what an
 * inherited network needs to be a whole one (netfiles.c). Every input here is
 * held to invariant 18: authority never comes from where a sandbox writes.
 */
#ifndef MAELYS_WARDEN_PROFILES_H
#define MAELYS_WARDEN_PROFILES_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "cli.h"
#include "maelys/executor.h"

struct warden_policy;
struct warden_protected;

/* The JSON format of a profile file. */
#define WARDEN_PROFILE_FORMAT "maelys-warden-profile/1"
/* The bubblewrap backend's default staging directory, which maelys-warden
 * never changes: sandboxes write below it (idmapped binds). */
#define WARDEN_STAGING_DIR "/run/maelys-executor"

/* One environment entry a profile or the inherited network adds. */
typedef struct warden_env_entry {
  const char* name;
  const char* value;
} warden_env_entry_t;

/* A CA variable of the caller's environment, passed with its file(s) when
 * the network is inherited. */
typedef struct warden_ca_var {
  const char* name;
  const char* value; /* the caller's value, passed as it is */
  char paths[8][PATH_MAX];
  bool is_dir[8];
  size_t path_count;
} warden_ca_var_t;

typedef struct warden_extras {
  /* --profile: its name and the file it was read from. */
  const char* profile_name;
  char profile_path[PATH_MAX];
  char profile_dir[PATH_MAX];
  /* Lists merged from the profile (first) and the command line. Every
   * string is owned by `strings`. */
  const char** allow_read;
  size_t allow_read_count;
  const char** deny;
  size_t deny_count;
  const char** protect;
  size_t protect_count;
  const char** pass_env;
  size_t pass_env_count;
  warden_env_entry_t* env;
  size_t env_count;
  /* --allow-write (the profile's, then the command line's) as physical
   * paths, resolved and checked; whether each is a directory. */
  char** write_paths;
  bool* write_is_dir;
  size_t write_count;
  /* --home (or the profile's), physical; "" when none. */
  char home[PATH_MAX];
  bool home_missing; /* to be created by warden_home_create() */
  /* The first directory warden_home_create() made (the top of what it
   * made), or "": what warden_home_abandon() removes. */
  char home_created[PATH_MAX];
  /* The inherited network's CA variables that were set. */
  warden_ca_var_t ca[4];
  size_t ca_count;
  /* The profile's document (its env and pass-env strings live in it). */
  json_t* doc;
  /* Every other heap string above. */
  char** strings;
  size_t string_count;
} warden_extras_t;

/* profiles.c. Called at the end of warden_policy_from(): reads --profile
 * (merging it with the command line into `policy`), resolves and checks
 * --allow-write and --home (creating the home, 0700, when `run` needs it),
 * and the inherited network's CA variables. */
int warden_extras_from(const invocation_t* inv, struct warden_policy* policy,
                       cli_error_t* err);
/* The persistent home is created only for a run that starts: `run` calls
 * warden_home_create() just before the spawn (0700, each missing component,
 * never through a link), then warden_home_started() when the payload started
 * (which says on stderr that it was created), or warden_home_abandon() when
 * the spawn was refused (which removes what was created: a refused run leaves
 * nothing on disk). */
int warden_home_create(struct warden_policy* policy, cli_error_t* err);
void warden_home_started(const invocation_t* inv,
                         const struct warden_policy* policy);
void warden_home_abandon(struct warden_policy* policy);
/* Shell completion of --profile NAME: appends {"word": NAME} to `records`
 * for each NAME.json of the user's and the system profile directory whose
 * name starts with `prefix` (each name once, sorted). Only names are
 * listed; nothing is read. */
void warden_profile_candidates(const char* prefix, json_t* records);
/* Frees what warden_extras_from() made. */
void warden_extras_release(struct warden_policy* policy);
/* Adds the writable paths and the home to a built-in profile's plan (before
 * its denials). */
int warden_extras_plan(const struct warden_policy* policy,
                       maelys_executor_plan_t* plan, cli_error_t* err);
/* Adds the profile's file and directory, its protected paths and the CA
 * files to what no plan may make writable. */
int warden_extras_protect(const struct warden_policy* policy,
                          struct warden_protected* list, cli_error_t* err);
/* Adds the profile's environment, the inherited network's CA variables and
 * HOME (the persistent home) to a request, each only when the caller did not
 * name it already (`names`, `*count`; the new names are appended, up to
 * `max`). PATH, when one is added, is copied to `path_out`. A profile's
 * pass-env name that is not set is left out silently: profiles list
 * optional credentials. */
int warden_extras_env(const struct warden_policy* policy,
                      maelys_execution_request_t* req, const char** names,
                      size_t* count, size_t max, char* path_out,
                      size_t path_size, cli_error_t* err);

/* netfiles.c. What name resolution and TLS need when the network is
 * inherited: the resolver's files of /etc and the CA stores, bound
 * read-only (a link such as systemd-resolved's /etc/resolv.conf is bound from
 * its target, which must be root's). */
int warden_network_files(maelys_executor_plan_t* plan, cli_error_t* err);
/* The caller's SSL_CERT_FILE, SSL_CERT_DIR, NODE_EXTRA_CA_CERTS and
 * REQUESTS_CA_BUNDLE (those set, and not given with --env), checked against
 * the authority rule: no symbolic link, owned by the caller or root and
 * writable by nobody else, not inside the workspace or anything the run makes
 * writable. */
int warden_ca_vars(const invocation_t* inv, struct warden_policy* policy,
                   cli_error_t* err);
/* READ rules for the CA files. */
int warden_ca_plan(const struct warden_policy* policy,
                   maelys_executor_plan_t* plan, cli_error_t* err);

/* profile.c: a live pathname unix socket (one a socket is bound to; a stale
 * socket file is passed over) within `depth` levels of the directory
 * `dir` (consumed), into `found` (or ""). */
void warden_find_socket(int dir, const char* prefix, int depth, char* found,
                        size_t size);

/* Helpers shared by profiles.c and netfiles.c. */
/* Whether `path` is `base` or lies below it: by name (both physical), or by
 * identity when both exist (a bind mount of the base elsewhere). */
bool warden_path_inside(const char* path, const char* base);
/* Checks what a file that steers the sandbox (a CA file or directory) and
 * every directory above it must be: owned by this user or root, writable by
 * nobody else (a sticky directory above excepted). `path` is physical. */
int warden_check_owner_chain(const char* option, const char* shown,
                             const char* path, cli_error_t* err);
/* The invoking user's home directory ($HOME, else the password database),
 * or NULL. */
const char* warden_invoking_home(void);

#endif
