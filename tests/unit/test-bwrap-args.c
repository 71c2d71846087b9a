/*
 * The bubblewrap lowering as a pure function, with a fake resolver: one test
 * per mount kind, rule kind, missing-path mode, root mode and network mode,
 * and one per rejected construct (invariant 11). No fork, no filesystem.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bwrap-internal.h"

/* -------------------------------------------------------- fake resolver */

typedef struct entry {
  const char* path;
  maelys__bwrap_kind_t kind;
  int error; /* a negative errno to return instead */
  bool world;
  unsigned owner;
  const char* socket; /* a socket directly inside, or NULL */
  unsigned nlink;     /* hard links; 0 means 1 */
  const char* linked; /* a file with 3 names somewhere below, or NULL */
} entry_t;

typedef struct fake {
  entry_t entries[32];
  size_t count;
  char created[8][256];
  size_t created_count;
  int opened[64];
  size_t opened_count;
  int closed[64];
  size_t closed_count;
} fake_t;

static void fake_add(fake_t* f, const char* path, maelys__bwrap_kind_t kind) {
  f->entries[f->count++] = (entry_t){path, kind, 0, true, 1000, NULL, 0, NULL};
}

static int fake_open(void* ctx, const char* path,
                     maelys__bwrap_source_t* info) {
  fake_t* f = ctx;
  for (size_t i = 0; i < f->count; i++) {
    if (strcmp(f->entries[i].path, path) != 0)
      continue;
    if (f->entries[i].error)
      return f->entries[i].error;
    info->kind = f->entries[i].kind;
    info->dev = 7;
    info->ino = 100 + i;
    info->owner = f->entries[i].owner;
    info->group = f->entries[i].owner;
    info->world_accessible = f->entries[i].world;
    info->nlink = f->entries[i].nlink ? f->entries[i].nlink : 1;
    int fd = 100 + (int)i * 10 + (int)f->opened_count;
    f->opened[f->opened_count++] = fd;
    return fd;
  }
  for (size_t i = 0; i < f->created_count; i++)
    if (strcmp(f->created[i], path) == 0) {
      info->kind = MAELYS__BWRAP_DIRECTORY;
      info->world_accessible = true;
      int fd = 900 + (int)f->opened_count;
      f->opened[f->opened_count++] = fd;
      return fd;
    }
  return -ENOENT;
}

static int fake_create(void* ctx, const char* path) {
  fake_t* f = ctx;
  snprintf(f->created[f->created_count++], 256, "%s", path);
  return 0;
}

static void fake_close(void* ctx, int fd) {
  fake_t* f = ctx;
  f->closed[f->closed_count++] = fd;
}

static int fake_find_socket(void* ctx, int fd, char* name) {
  fake_t* f = ctx;
  size_t i = (size_t)(fd - 100) / 10;
  if (fd < 100 || fd >= 900 || i >= f->count || f->entries[i].socket == NULL)
    return 0;
  snprintf(name, 256, "%s", f->entries[i].socket);
  return 1;
}

static int fake_find_hard_link(void* ctx, int fd, char* name, uint64_t* nlink) {
  fake_t* f = ctx;
  size_t i = (size_t)(fd - 100) / 10;
  if (fd < 100 || fd >= 900 || i >= f->count || f->entries[i].linked == NULL)
    return 0;
  snprintf(name, MAELYS__BWRAP_NAME_MAX, "%s", f->entries[i].linked);
  *nlink = 3;
  return 1;
}

typedef struct fixture {
  fake_t fake;
  maelys__bwrap_resolver_t resolver;
  maelys__bwrap_env_t env;
  maelys_executor_plan_t* plan;
  maelys_execution_request_t* request;
  maelys__bwrap_lowered_t out;
  char* error;
} fixture_t;

static int setup(void** state) {
  fixture_t* t = calloc(1, sizeof *t);
  t->resolver = (maelys__bwrap_resolver_t){
      &t->fake,   fake_open,        fake_create,
      fake_close, fake_find_socket, fake_find_hard_link};
  fake_add(&t->fake, "/helper", MAELYS__BWRAP_FILE);
  t->env = (maelys__bwrap_env_t){
      .resolver = &t->resolver,
      .helper_path = "/helper",
      .staging_dir = "/run/stage",
      .payload_fd_limit = 4,
      .stderr_fd = 4,
      .status_fd = 5,
      .seccomp_fd = 7,
      .json_status_fd = 8,
      .first_extra_fd = 9,
  };
  assert_int_equal(maelys_executor_plan_create(&t->plan, NULL), 0);
  assert_int_equal(maelys_executor_plan_set_network(
                       t->plan, MAELYS_EXECUTOR_NETWORK_INHERIT, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_set_root(
                       t->plan, MAELYS_EXECUTOR_ROOT_READONLY, 0, NULL),
                   0);
  assert_int_equal(maelys_execution_request_create(&t->request, NULL), 0);
  assert_int_equal(maelys_execution_request_set_executable(
                       t->request, "/usr/bin/prog", NULL),
                   0);
  const char* argv[] = {"prog", "arg one", NULL};
  assert_int_equal(maelys_execution_request_set_argv(t->request, argv, NULL),
                   0);
  *state = t;
  return 0;
}

static int teardown(void** state) {
  fixture_t* t = *state;
  maelys__bwrap_lowered_dispose(&t->out, &t->resolver, true);
  maelys_executor_plan_destroy(t->plan);
  maelys_execution_request_destroy(t->request);
  free(t->error);
  free(t);
  return 0;
}

static maelys_executor_result_t lower(fixture_t* t) {
  if (!maelys_executor_plan_is_sealed(t->plan))
    assert_int_equal(maelys_executor_plan_seal(t->plan, NULL), 0);
  maelys__bwrap_lowered_dispose(&t->out, &t->resolver, true);
  free(t->error);
  t->error = NULL;
  return maelys__bwrap_lower(t->plan, t->request, &t->env, &t->out, &t->error);
}

static void lower_ok(fixture_t* t) {
  maelys_executor_result_t r = lower(t);
  if (r != MAELYS_EXECUTOR_OK)
    fail_msg("lowering failed: %s", t->error);
}

/* The index where the sequence of arguments starts, or -1. */
static int find_seq(const fixture_t* t, ...) {
  const char* seq[16];
  size_t n = 0;
  va_list ap;
  va_start(ap, t);
  for (const char* s; (s = va_arg(ap, const char*)) != NULL && n < 16;)
    seq[n++] = s;
  va_end(ap);
  for (size_t i = 0; i + n <= t->out.argc; i++) {
    size_t k = 0;
    while (k < n && strcmp(t->out.args[i + k], seq[k]) == 0)
      k++;
    if (k == n)
      return (int)i;
  }
  return -1;
}

#define HAS(t, ...) assert_true(find_seq((t), __VA_ARGS__, NULL) >= 0)
#define HAS_NOT(t, ...) assert_int_equal(find_seq((t), __VA_ARGS__, NULL), -1)

static void expect_error(fixture_t* t, maelys_executor_result_t code,
                         const char* needle) {
  maelys_executor_result_t r = lower(t);
  if (r != code || t->error == NULL || strstr(t->error, needle) == NULL)
    fail_msg("expected %s mentioning '%s', got %s: %s",
             maelys_executor_result_name(code), needle,
             maelys_executor_result_name(r), t->error ? t->error : "");
  /* Nothing is left open after a refusal. */
  assert_int_equal(t->fake.opened_count, t->fake.closed_count);
}

/* ---------------------------------------------------------- mount kinds */

static void test_mount_ro_bind(void** state) {
  fixture_t* t = *state;
  fake_add(&t->fake, "/usr", MAELYS__BWRAP_DIRECTORY);
  assert_int_equal(maelys_executor_plan_add_bind(t->plan, "/usr", "/usr", 0,
                                                 MAELYS_EXECUTOR_MISSING_FAIL,
                                                 NULL),
                   0);
  lower_ok(t);
  HAS(t, "--ro-bind-fd", "9", "/usr");
  assert_int_equal(t->out.fds[0], t->fake.opened[0]);
}

static void test_mount_bind(void** state) {
  fixture_t* t = *state;
  fake_add(&t->fake, "/srv/ws", MAELYS__BWRAP_DIRECTORY);
  assert_int_equal(maelys_executor_plan_add_bind(t->plan, "/srv/ws", "/ws", 1,
                                                 MAELYS_EXECUTOR_MISSING_FAIL,
                                                 NULL),
                   0);
  lower_ok(t);
  HAS(t, "--bind-fd", "9", "/ws");
}

static void test_mount_tmpfs(void** state) {
  fixture_t* t = *state;
  assert_int_equal(maelys_executor_plan_add_tmpfs(t->plan, "/tmp", 65536, NULL),
                   0);
  lower_ok(t);
  HAS(t, "--size", "65536", "--tmpfs", "/tmp");
}

static void test_mount_proc_dev_symlink_dir(void** state) {
  fixture_t* t = *state;
  assert_int_equal(maelys_executor_plan_add_proc(t->plan, "/proc", NULL), 0);
  assert_int_equal(maelys_executor_plan_add_dev(t->plan, "/dev", NULL), 0);
  assert_int_equal(
      maelys_executor_plan_add_symlink(t->plan, "usr/bin", "/bin", NULL), 0);
  assert_int_equal(maelys_executor_plan_add_dir(t->plan, "/work", NULL), 0);
  lower_ok(t);
  HAS(t, "--proc", "/proc");
  HAS(t, "--dev", "/dev");
  HAS(t, "--symlink", "usr/bin", "/bin");
  HAS(t, "--dir", "/work");
  /* Mounts keep plan order. */
  assert_true(find_seq(t, "--proc", "/proc", NULL) <
              find_seq(t, "--dev", "/dev", NULL));
}

/* ---------------------------------------------------------- missing paths */

static void test_missing_fail(void** state) {
  fixture_t* t = *state;
  assert_int_equal(maelys_executor_plan_add_bind(t->plan, "/absent", "/a", 0,
                                                 MAELYS_EXECUTOR_MISSING_FAIL,
                                                 NULL),
                   0);
  expect_error(t, MAELYS_EXECUTOR_ERR_NOT_FOUND, "'/absent' does not exist");
}

static void test_missing_skip(void** state) {
  fixture_t* t = *state;
  assert_int_equal(maelys_executor_plan_add_bind(t->plan, "/absent", "/a", 0,
                                                 MAELYS_EXECUTOR_MISSING_SKIP,
                                                 NULL),
                   0);
  lower_ok(t);
  HAS_NOT(t, "/a");
}

static void test_missing_create(void** state) {
  fixture_t* t = *state;
  assert_int_equal(maelys_executor_plan_add_bind(t->plan, "/absent", "/a", 1,
                                                 MAELYS_EXECUTOR_MISSING_CREATE,
                                                 NULL),
                   0);
  lower_ok(t);
  assert_int_equal(t->fake.created_count, 1);
  assert_string_equal(t->fake.created[0], "/absent");
  HAS(t, "--bind-fd", "9", "/a");
}

/* ------------------------------------------------------------ rule kinds */

static void test_rule_read_write(void** state) {
  fixture_t* t = *state;
  fake_add(&t->fake, "/data", MAELYS__BWRAP_DIRECTORY);
  fake_add(&t->fake, "/data/out", MAELYS__BWRAP_DIRECTORY);
  fake_add(&t->fake, "/etc/hosts", MAELYS__BWRAP_FILE);
  /* Added deepest first: the lowering still binds the parent first. */
  assert_int_equal(maelys_executor_plan_add_rule(
                       t->plan, "/data/out", MAELYS_EXECUTOR_ACCESS_WRITE,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       t->plan, "/data", MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       t->plan, "/etc/hosts", MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_LITERAL_FILE, NULL),
                   0);
  lower_ok(t);
  int ro = find_seq(t, "--ro-bind-fd", "9", "/data", NULL);
  int rw = find_seq(t, "--bind-fd", "10", "/data/out", NULL);
  assert_true(ro >= 0 && rw > ro);
  HAS(t, "--ro-bind-fd", "11", "/etc/hosts");
}

static void test_rule_deny_directory(void** state) {
  fixture_t* t = *state;
  fake_add(&t->fake, "/home", MAELYS__BWRAP_DIRECTORY);
  fake_add(&t->fake, "/home/.ssh", MAELYS__BWRAP_DIRECTORY);
  assert_int_equal(maelys_executor_plan_add_rule(
                       t->plan, "/home/.ssh", MAELYS_EXECUTOR_ACCESS_DENY,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       t->plan, "/home", MAELYS_EXECUTOR_ACCESS_WRITE,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  lower_ok(t);
  int deny = find_seq(t, "--perms", "0000", "--size", "4096", "--tmpfs",
                      "/home/.ssh", "--remount-ro", "/home/.ssh", NULL);
  int bind = find_seq(t, "--bind-fd", "9", "/home", NULL);
  /* DENY is a final overlay: after every bind, before the root's remount. */
  assert_true(deny > bind && bind >= 0);
  assert_true(find_seq(t, "--remount-ro", "/", NULL) > deny);
}

static void test_rule_deny_file(void** state) {
  fixture_t* t = *state;
  fake_add(&t->fake, "/etc", MAELYS__BWRAP_DIRECTORY);
  fake_add(&t->fake, "/etc/shadow", MAELYS__BWRAP_FILE);
  assert_int_equal(maelys_executor_plan_add_rule(
                       t->plan, "/etc", MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       t->plan, "/etc/shadow", MAELYS_EXECUTOR_ACCESS_DENY,
                       MAELYS_EXECUTOR_SCOPE_LITERAL_FILE, NULL),
                   0);
  lower_ok(t);
  /* fd 9 is /etc, 10 the helper, 11 the empty data of the overlay. */
  HAS(t, "--perms", "0000", "--ro-bind-data", "11", "/etc/shadow");
  assert_int_equal(t->out.fds[2], -1);
}

/* A denied file with a second name (a hard link an earlier run planted in
 * the workspace) is refused at prepare: the overlay would hide only this
 * name. The message names the path, the link count and why. */
static void test_reject_deny_file_with_hard_links(void** state) {
  fixture_t* t = *state;
  fake_add(&t->fake, "/ws", MAELYS__BWRAP_DIRECTORY);
  fake_add(&t->fake, "/ws/.env", MAELYS__BWRAP_FILE);
  t->fake.entries[t->fake.count - 1].nlink = 2;
  assert_int_equal(maelys_executor_plan_add_rule(
                       t->plan, "/ws", MAELYS_EXECUTOR_ACCESS_WRITE,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       t->plan, "/ws/.env", MAELYS_EXECUTOR_ACCESS_DENY,
                       MAELYS_EXECUTOR_SCOPE_LITERAL_FILE, NULL),
                   0);
  expect_error(t, MAELYS_EXECUTOR_ERR_DENIED,
               "rule deny '/ws/.env' is refused: the file has 2 hard links");
  assert_non_null(strstr(t->error, "planted by an earlier run"));
}

/* The same below a denied directory: any file in the tree with a second
 * name is refused, naming it. */
static void test_reject_deny_directory_with_hard_links(void** state) {
  fixture_t* t = *state;
  fake_add(&t->fake, "/ws", MAELYS__BWRAP_DIRECTORY);
  fake_add(&t->fake, "/ws/secrets", MAELYS__BWRAP_DIRECTORY);
  t->fake.entries[t->fake.count - 1].linked = "keys/id";
  assert_int_equal(maelys_executor_plan_add_rule(
                       t->plan, "/ws", MAELYS_EXECUTOR_ACCESS_WRITE,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       t->plan, "/ws/secrets", MAELYS_EXECUTOR_ACCESS_DENY,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  expect_error(t, MAELYS_EXECUTOR_ERR_DENIED,
               "the file '/ws/secrets/keys/id' below it has 3 hard links");
}

static void test_rule_deny_absent_uncovered_is_vacuous(void** state) {
  fixture_t* t = *state;
  assert_int_equal(maelys_executor_plan_add_rule(
                       t->plan, "/nowhere", MAELYS_EXECUTOR_ACCESS_DENY,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  lower_ok(t);
  HAS_NOT(t, "/nowhere");
}

/* ------------------------------------------------------------ rejections */

static void test_reject_literal_directory(void** state) {
  fixture_t* t = *state;
  fake_add(&t->fake, "/data", MAELYS__BWRAP_DIRECTORY);
  assert_int_equal(maelys_executor_plan_add_rule(
                       t->plan, "/data", MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_LITERAL_DIRECTORY, NULL),
                   0);
  expect_error(t, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
               "rule read '/data' (literal-directory)");
  assert_int_equal(t->fake.opened_count, 0);
}

static void test_reject_protect_create(void** state) {
  fixture_t* t = *state;
  assert_int_equal(
      maelys_executor_plan_add_rule(t->plan, "/ws/.git/hooks",
                                    MAELYS_EXECUTOR_ACCESS_PROTECT_CREATE,
                                    MAELYS_EXECUTOR_SCOPE_LITERAL_FILE, NULL),
      0);
  expect_error(t, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
               "rule protect-create '/ws/.git/hooks'");
}

static void test_reject_deny_absent_covered(void** state) {
  fixture_t* t = *state;
  fake_add(&t->fake, "/ws", MAELYS__BWRAP_DIRECTORY);
  assert_int_equal(maelys_executor_plan_add_rule(
                       t->plan, "/ws", MAELYS_EXECUTOR_ACCESS_WRITE,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       t->plan, "/ws/.env", MAELYS_EXECUTOR_ACCESS_DENY,
                       MAELYS_EXECUTOR_SCOPE_LITERAL_FILE, NULL),
                   0);
  expect_error(t, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
               "rule deny '/ws/.env': the path does not exist");
}

static void test_reject_symlink_source(void** state) {
  fixture_t* t = *state;
  t->fake.entries[t->fake.count++] = (entry_t){
      "/lib", MAELYS__BWRAP_DIRECTORY, -ELOOP, true, 0, NULL, 0, NULL};
  assert_int_equal(maelys_executor_plan_add_bind(t->plan, "/lib", "/lib", 0,
                                                 MAELYS_EXECUTOR_MISSING_FAIL,
                                                 NULL),
                   0);
  expect_error(t, MAELYS_EXECUTOR_ERR_DENIED,
               "bind source '/lib' is or passes through a symbolic link");
}

static void test_reject_socket_source(void** state) {
  fixture_t* t = *state;
  fake_add(&t->fake, "/run/docker.sock", MAELYS__BWRAP_OTHER);
  assert_int_equal(maelys_executor_plan_add_bind(
                       t->plan, "/run/docker.sock", "/run/docker.sock", 0,
                       MAELYS_EXECUTOR_MISSING_FAIL, NULL),
                   0);
  expect_error(t, MAELYS_EXECUTOR_ERR_DENIED, "neither a directory");
}

/* Never bound: the host's /, /tmp, /run and below, a home directory, or a
 * directory holding a unix socket. */
static void test_reject_host_state(void** state) {
  fixture_t* t = *state;
  static const char* const refused[] = {
      "/",     "/tmp",           "/var/tmp",
      "/run",  "/run/user/1000", "/var/run/docker",
      "/root", "/home/alice"};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    fake_add(&t->fake, refused[i], MAELYS__BWRAP_DIRECTORY);
    maelys_executor_plan_destroy(t->plan);
    assert_int_equal(maelys_executor_plan_create(&t->plan, NULL), 0);
    assert_int_equal(maelys_executor_plan_set_network(
                         t->plan, MAELYS_EXECUTOR_NETWORK_INHERIT, NULL),
                     0);
    assert_int_equal(maelys_executor_plan_set_root(
                         t->plan, MAELYS_EXECUTOR_ROOT_READONLY, 0, NULL),
                     0);
    assert_int_equal(maelys_executor_plan_add_bind(t->plan, refused[i], "/x", 0,
                                                   MAELYS_EXECUTOR_MISSING_FAIL,
                                                   NULL),
                     0);
    char needle[64];
    snprintf(needle, sizeof needle, "'%s' is refused", refused[i]);
    expect_error(t, MAELYS_EXECUTOR_ERR_DENIED, needle);
  }
  /* A subdirectory of /tmp or of a home is fine. */
  fake_add(&t->fake, "/home/alice/project", MAELYS__BWRAP_DIRECTORY);
  maelys_executor_plan_destroy(t->plan);
  assert_int_equal(maelys_executor_plan_create(&t->plan, NULL), 0);
  assert_int_equal(maelys_executor_plan_set_network(
                       t->plan, MAELYS_EXECUTOR_NETWORK_INHERIT, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_set_root(
                       t->plan, MAELYS_EXECUTOR_ROOT_READONLY, 0, NULL),
                   0);
  assert_int_equal(
      maelys_executor_plan_add_bind(t->plan, "/home/alice/project", "/p", 1,
                                    MAELYS_EXECUTOR_MISSING_FAIL, NULL),
      0);
  lower_ok(t);
}

static void test_reject_directory_with_socket(void** state) {
  fixture_t* t = *state;
  fake_add(&t->fake, "/srv/agent", MAELYS__BWRAP_DIRECTORY);
  t->fake.entries[t->fake.count - 1].socket = "ssh-agent.sock";
  assert_int_equal(maelys_executor_plan_add_rule(
                       t->plan, "/srv/agent", MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  expect_error(t, MAELYS_EXECUTOR_ERR_DENIED,
               "holds the unix socket 'ssh-agent.sock'");
}

static void test_reject_scope_mismatch(void** state) {
  fixture_t* t = *state;
  fake_add(&t->fake, "/etc/hosts", MAELYS__BWRAP_FILE);
  assert_int_equal(maelys_executor_plan_add_rule(
                       t->plan, "/etc/hosts", MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  expect_error(t, MAELYS_EXECUTOR_ERR_ARGUMENT,
               "'/etc/hosts' is a file but the rule's scope is "
               "recursive-directory");
}

static void test_reject_rule_on_absent_path(void** state) {
  fixture_t* t = *state;
  assert_int_equal(maelys_executor_plan_add_rule(
                       t->plan, "/absent", MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  expect_error(t, MAELYS_EXECUTOR_ERR_NOT_FOUND, "rule path '/absent'");
}

/* ------------------------------------------------------------ root modes */

static void test_root_readonly(void** state) {
  fixture_t* t = *state;
  lower_ok(t);
  int root = find_seq(t, "--size", "1048576", "--tmpfs", "/", NULL);
  int ro = find_seq(t, "--remount-ro", "/", NULL);
  assert_true(root >= 0 && ro > root);
}

static void test_root_ephemeral(void** state) {
  fixture_t* t = *state;
  assert_int_equal(
      maelys_executor_plan_set_root(
          t->plan, MAELYS_EXECUTOR_ROOT_EPHEMERAL_WRITE, 8 << 20, NULL),
      0);
  lower_ok(t);
  HAS(t, "--size", "8388608", "--tmpfs", "/");
  HAS_NOT(t, "--remount-ro", "/");
}

static void test_root_host_rejected(void** state) {
  fixture_t* t = *state;
  assert_int_equal(maelys_executor_plan_set_root(
                       t->plan, MAELYS_EXECUTOR_ROOT_HOST, 0, NULL),
                   0);
  expect_error(t, MAELYS_EXECUTOR_ERR_UNSUPPORTED, "root host");
}

/* --------------------------------------------------------- network modes */

static void test_network_inherit(void** state) {
  fixture_t* t = *state;
  lower_ok(t);
  HAS_NOT(t, "--unshare-net");
}

static void test_network_none(void** state) {
  fixture_t* t = *state;
  assert_int_equal(maelys_executor_plan_set_network(
                       t->plan, MAELYS_EXECUTOR_NETWORK_NONE, NULL),
                   0);
  lower_ok(t);
  HAS(t, "--unshare-net");
  HAS(t, "--seccomp", "7");
}

static void test_network_external_channel(void** state) {
  fixture_t* t = *state;
  assert_int_equal(maelys_executor_plan_set_network(
                       t->plan, MAELYS_EXECUTOR_NETWORK_EXTERNAL_CHANNEL, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_channel(t->plan, 4, "egress", NULL),
                   0);
  lower_ok(t);
  HAS(t, "--unshare-net");
}

static void test_network_mediated_rejected(void** state) {
  fixture_t* t = *state;
  assert_int_equal(maelys_executor_plan_set_network(
                       t->plan, MAELYS_EXECUTOR_NETWORK_MEDIATED, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_network_destination(
                       t->plan, "example.com", 443, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_set_network_mediator(
                       t->plan, MAELYS_EXECUTOR_MEDIATOR_FD4, NULL),
                   0);
  expect_error(t, MAELYS_EXECUTOR_ERR_UNSUPPORTED, "network mediated");
}

/* ------------------------------------------------ process, env, command */

static void test_process_options_env_and_command(void** state) {
  fixture_t* t = *state;
  assert_int_equal(maelys_execution_request_set_environment_mode(
                       t->request, MAELYS_EXEC_ENV_EXPLICIT, NULL),
                   0);
  assert_int_equal(maelys_execution_request_add_environment(t->request, "PATH",
                                                            "/usr/bin", NULL),
                   0);
  assert_int_equal(
      maelys_execution_request_add_environment(t->request, "EQ", "a=b", NULL),
      0);
  assert_int_equal(maelys_execution_request_set_cwd(t->request, "/ws", NULL),
                   0);
  assert_int_equal(maelys_executor_plan_set_rlimit(
                       t->plan, MAELYS_EXECUTOR_RLIMIT_NOFILE, 64,
                       MAELYS_EXECUTOR_RLIMIT_INFINITY, NULL),
                   0);
  int keep[] = {3};
  t->env.keep_fds = keep;
  t->env.keep_count = 1;
  t->env.disable_userns = true;
  lower_ok(t);
  HAS(t, "--unshare-user");
  HAS(t, "--unshare-pid");
  HAS(t, "--disable-userns");
  HAS(t, "--die-with-parent");
  HAS(t, "--new-session");
  HAS(t, "--as-pid-1");
  HAS(t, "--cap-drop", "ALL");
  HAS(t, "--clearenv", "--setenv", "PATH", "/usr/bin", "--setenv", "EQ", "a=b");
  HAS(t, "--chdir", "/ws");
  HAS(t, "--json-status-fd", "8");
  HAS(t, "--ro-bind-fd", "9", MAELYS__BWRAP_HELPER_DEST);
  const char* expect[] = {MAELYS__BWRAP_HELPER_DEST,
                          "init",
                          "--status-fd",
                          "5",
                          "--stderr-fd",
                          "4",
                          "--limit",
                          "4",
                          "--keep-fd",
                          "3",
                          "--rlimit",
                          "nofile:64:inf",
                          "--unsetenv",
                          "PWD",
                          "--exec",
                          "/usr/bin/prog",
                          "--",
                          "prog",
                          "arg one",
                          NULL};
  for (size_t i = 0; expect[i] != NULL; i++) {
    assert_true(i < t->out.command_argc);
    assert_string_equal(t->out.command[i], expect[i]);
  }
  /* Nothing of the plan is in the command: it all goes through --args. */
  for (size_t i = 0; i < t->out.command_argc; i++)
    assert_null(strstr(t->out.command[i], "/usr/bin:"));
}

/* For a uid-0 host, writable and unreachable sources are staged; reachable
 * read-only ones are bound by descriptor. */
static void test_host_root_staging(void** state) {
  fixture_t* t = *state;
  t->env.host_root = true;
  fake_add(&t->fake, "/usr", MAELYS__BWRAP_DIRECTORY);
  fake_add(&t->fake, "/root/ws", MAELYS__BWRAP_DIRECTORY);
  t->fake.entries[t->fake.count - 1].world = false;
  fake_add(&t->fake, "/srv/pub", MAELYS__BWRAP_DIRECTORY);
  t->fake.entries[t->fake.count - 1].world = true;
  assert_int_equal(maelys_executor_plan_add_bind(t->plan, "/usr", "/usr", 0,
                                                 MAELYS_EXECUTOR_MISSING_FAIL,
                                                 NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       t->plan, "/root/ws", MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       t->plan, "/srv/pub", MAELYS_EXECUTOR_ACCESS_WRITE,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  lower_ok(t);
  HAS(t, "--ro-bind-fd", "9", "/usr");
  HAS(t, "--ro-bind", "/run/stage/0", "/root/ws");
  HAS(t, "--bind", "/run/stage/1", "/srv/pub");
  assert_int_equal(t->out.stage_count, 2);
  assert_string_equal(t->out.stages[0].source, "/root/ws");
  assert_true(t->out.stages[0].is_directory);
  assert_string_equal(t->out.stages[1].source, "/srv/pub");
  /* Staged sources are not kept open. */
  assert_int_equal(t->out.fd_count, 2); /* /usr and the helper */
}

/* A read-only rule nested in a writable one is staged like it, so that its
 * owner inside is the same (git checks that a .git file and its working tree
 * have one owner). */
static void test_host_root_stages_nested_read_only(void** state) {
  fixture_t* t = *state;
  t->env.host_root = true;
  fake_add(&t->fake, "/srv/ws", MAELYS__BWRAP_DIRECTORY);
  fake_add(&t->fake, "/srv/ws/.git", MAELYS__BWRAP_FILE);
  fake_add(&t->fake, "/srv/pub", MAELYS__BWRAP_DIRECTORY);
  for (size_t i = t->fake.count - 3; i < t->fake.count; i++)
    t->fake.entries[i].world = true;
  assert_int_equal(maelys_executor_plan_add_rule(
                       t->plan, "/srv/ws", MAELYS_EXECUTOR_ACCESS_WRITE,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       t->plan, "/srv/ws/.git", MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_LITERAL_FILE, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       t->plan, "/srv/pub", MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  lower_ok(t);
  HAS(t, "--bind", "/run/stage/0", "/srv/ws");
  HAS(t, "--ro-bind", "/run/stage/1", "/srv/ws/.git");
  assert_int_equal(t->out.stage_count, 2);
  assert_false(t->out.stages[1].is_directory);
  /* Read-only and outside every writable rule: by descriptor. */
  bool by_fd = false;
  for (size_t i = 2; i < t->out.argc; i++)
    by_fd = by_fd || (strcmp(t->out.args[i], "/srv/pub") == 0 &&
                      strcmp(t->out.args[i - 2], "--ro-bind-fd") == 0);
  assert_true(by_fd);
}

/* The index of `word` in the command (the helper's arguments), or -1. */
static int command_index(const fixture_t* t, const char* word) {
  for (size_t i = 0; i < t->out.command_argc; i++)
    if (strcmp(t->out.command[i], word) == 0)
      return (int)i;
  return -1;
}

/* A terminal session: the sandbox's init is told where the rendezvous is
 * and the size to start with; without one, nothing of it appears. */
static void test_terminal_session(void** state) {
  fixture_t* t = *state;
  t->env.terminal_fd = 12;
  assert_int_equal(maelys_executor_plan_add_dev(t->plan, "/dev", NULL), 0);
  lower_ok(t);
  assert_int_equal(command_index(t, "--terminal-fd"), -1);
  assert_int_equal(maelys_execution_request_set_io_mode(
                       t->request, MAELYS_EXEC_IO_TTY, -1, NULL),
                   0);
  assert_int_equal(
      maelys_execution_request_set_terminal_size(t->request, 33, 120, NULL), 0);
  lower_ok(t);
  int i = command_index(t, "--terminal-fd");
  assert_true(i > 0);
  assert_string_equal(t->out.command[i + 1], "12");
  assert_string_equal(t->out.command[i + 2], "--terminal-size");
  assert_string_equal(t->out.command[i + 3], "33x120");
  /* Before the payload's own arguments. */
  assert_true(i < command_index(t, "--exec"));
}

/* Without a /dev there is no devpts to make the terminal from: refused. */
static void test_terminal_needs_dev(void** state) {
  fixture_t* t = *state;
  t->env.terminal_fd = 12;
  assert_int_equal(maelys_execution_request_set_io_mode(
                       t->request, MAELYS_EXEC_IO_TTY, -1, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_dev(t->plan, "/devices", NULL), 0);
  expect_error(t, MAELYS_EXECUTOR_ERR_UNSUPPORTED, "mounts no /dev");
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_mount_ro_bind),
      T(test_mount_bind),
      T(test_mount_tmpfs),
      T(test_mount_proc_dev_symlink_dir),
      T(test_missing_fail),
      T(test_missing_skip),
      T(test_missing_create),
      T(test_rule_read_write),
      T(test_rule_deny_directory),
      T(test_rule_deny_file),
      T(test_reject_deny_file_with_hard_links),
      T(test_reject_deny_directory_with_hard_links),
      T(test_rule_deny_absent_uncovered_is_vacuous),
      T(test_reject_literal_directory),
      T(test_reject_protect_create),
      T(test_reject_deny_absent_covered),
      T(test_reject_symlink_source),
      T(test_reject_socket_source),
      T(test_reject_host_state),
      T(test_reject_directory_with_socket),
      T(test_reject_scope_mismatch),
      T(test_reject_rule_on_absent_path),
      T(test_root_readonly),
      T(test_root_ephemeral),
      T(test_root_host_rejected),
      T(test_network_inherit),
      T(test_network_none),
      T(test_network_external_channel),
      T(test_network_mediated_rejected),
      T(test_process_options_env_and_command),
      T(test_host_root_staging),
      T(test_host_root_stages_nested_read_only),
      T(test_terminal_session),
      T(test_terminal_needs_dev),
  };
  return cmocka_run_group_tests_name("bwrap-args", tests, NULL, NULL);
}
