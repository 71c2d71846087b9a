/*
 * The Landlock lowering as a pure function, with a fake resolver: what each
 * mount kind, rule kind, root and network mode becomes, and one test per
 * construct that cannot be expressed, whose diagnostic must name it. No
 * fork, no filesystem.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "landlock-internal.h"

/* -------------------------------------------------------- fake resolver */

typedef struct entry {
  const char* path;
  maelys__ll_kind_t kind;
  unsigned owner;
  bool world;
  bool kernel_fs;
  const char* link;
  bool world_writable;
} entry_t;

typedef struct fake {
  entry_t entries[48];
  size_t count;
  char created[4][256];
  size_t created_count;
} fake_t;

static entry_t* fake_add(fake_t* f, const char* path, maelys__ll_kind_t kind) {
  f->entries[f->count] = (entry_t){path, kind, 1000, true, false, NULL, false};
  return &f->entries[f->count++];
}

static int fake_describe(void* ctx, const char* path, maelys__ll_node_t* out) {
  fake_t* f = ctx;
  if (strncmp(path, "/link/", 6) == 0)
    return -ELOOP;
  for (size_t i = 0; i < f->count; i++) {
    const entry_t* e = &f->entries[i];
    if (strcmp(e->path, path) != 0)
      continue;
    out->kind = e->kind;
    out->owner = e->owner;
    out->mode = e->world ? 0755 : 0700;
    out->world_readable = e->world;
    out->kernel_fs = e->kernel_fs;
    out->world_writable = e->world_writable;
    if (e->link)
      snprintf(out->link, sizeof out->link, "%s", e->link);
    return 0;
  }
  for (size_t i = 0; i < f->created_count; i++)
    if (strcmp(f->created[i], path) == 0) {
      out->kind = MAELYS__LL_DIRECTORY;
      out->world_readable = true;
      return 0;
    }
  return -ENOENT;
}

/* The entries whose parent is `dir`. */
static int fake_list(void* ctx, const char* dir, size_t max, char*** names,
                     size_t* count) {
  fake_t* f = ctx;
  *names = calloc(48, sizeof **names);
  *count = 0;
  size_t n = strlen(dir);
  for (size_t i = 0; i < f->count; i++) {
    const char* p = f->entries[i].path;
    if (strncmp(p, dir, n) != 0 || p[n] != '/' || strchr(p + n + 1, '/'))
      continue;
    if (*count == max) {
      for (size_t j = 0; j < *count; j++)
        free((*names)[j]);
      free(*names);
      *names = NULL;
      *count = 0;
      return -E2BIG;
    }
    (*names)[(*count)++] = strdup(p + n + 1);
  }
  return 0;
}

static int fake_list_huge(void* ctx, const char* dir, size_t max, char*** names,
                          size_t* count) {
  (void)ctx;
  (void)dir;
  (void)max;
  *names = NULL;
  *count = 0;
  return -E2BIG;
}

static int fake_create(void* ctx, const char* path) {
  fake_t* f = ctx;
  snprintf(f->created[f->created_count++], 256, "%s", path);
  return 0;
}

typedef struct fixture {
  fake_t fake;
  maelys__ll_resolver_t resolver;
  maelys__ll_env_t env;
  maelys_executor_plan_t* plan;
  maelys__ll_lowered_t out;
  char* error;
} fixture_t;

static int setup(void** state) {
  fixture_t* t = calloc(1, sizeof *t);
  assert_non_null(t);
  t->resolver =
      (maelys__ll_resolver_t){&t->fake, fake_describe, fake_create, fake_list};
  t->env = (maelys__ll_env_t){.resolver = &t->resolver, .abi = 7};
  fake_add(&t->fake, "/usr", MAELYS__LL_DIRECTORY);
  fake_add(&t->fake, "/ws", MAELYS__LL_DIRECTORY);
  fake_add(&t->fake, "/ws/sub", MAELYS__LL_DIRECTORY);
  fake_add(&t->fake, "/ws/secret", MAELYS__LL_FILE);
  fake_add(&t->fake, "/etc/hosts", MAELYS__LL_FILE);
  fake_add(&t->fake, "/tmp", MAELYS__LL_DIRECTORY);
  fake_add(&t->fake, "/bin", MAELYS__LL_SYMLINK)->link = "usr/bin";
  fake_add(&t->fake, "/proc/sys", MAELYS__LL_DIRECTORY)->kernel_fs = true;
  for (size_t i = 0; maelys__ll_dev_files[i] != NULL; i++)
    fake_add(&t->fake, maelys__ll_dev_files[i], MAELYS__LL_DEVICE);
  assert_int_equal(maelys_executor_plan_create(&t->plan, NULL), 0);
  assert_int_equal(maelys_executor_plan_set_root(
                       t->plan, MAELYS_EXECUTOR_ROOT_READONLY, 0, NULL),
                   0);
  *state = t;
  return 0;
}

static int teardown(void** state) {
  fixture_t* t = *state;
  maelys__ll_lowered_dispose(&t->out);
  maelys_executor_plan_destroy(t->plan);
  maelys_executor_error_free(t->error);
  free(t);
  return 0;
}

static void net(fixture_t* t, maelys_executor_network_t mode) {
  assert_int_equal(maelys_executor_plan_set_network(t->plan, mode, NULL), 0);
}

static void rule(fixture_t* t, const char* path, maelys_executor_access_t a,
                 maelys_executor_scope_t s) {
  assert_int_equal(maelys_executor_plan_add_rule(t->plan, path, a, s, NULL), 0);
}

static maelys_executor_result_t lower(fixture_t* t) {
  if (!maelys_executor_plan_is_sealed(t->plan)) {
    char* e = NULL;
    maelys_executor_result_t r = maelys_executor_plan_seal(t->plan, &e);
    if (r != 0)
      fail_msg("seal: %s", e ? e : "?");
  }
  return maelys__ll_lower(t->plan, &t->env, &t->out, &t->error);
}

static const maelys__ll_rule_t* find(const fixture_t* t, const char* path) {
  for (size_t i = 0; i < t->out.rule_count; i++)
    if (strcmp(t->out.rules[i].path, path) == 0)
      return &t->out.rules[i];
  return NULL;
}

/* The refusal names the rule and says why. */
static void refused(fixture_t* t, maelys_executor_result_t expected,
                    const char* part1, const char* part2) {
  maelys_executor_result_t r = lower(t);
  if (r != expected)
    fail_msg("expected %s, got %s (%s)", maelys_executor_result_name(expected),
             maelys_executor_result_name(r), t->error ? t->error : "");
  assert_non_null(t->error);
  if (strstr(t->error, part1) == NULL || strstr(t->error, part2) == NULL)
    fail_msg("'%s' lacks '%s' or '%s'", t->error, part1, part2);
  assert_int_equal(t->out.rule_count, 0);
}

/* ------------------------------------------------------------- grants */

static void test_rights_by_abi(void** state) {
  (void)state;
  assert_int_equal(maelys__ll_fs_rights(1), (UINT64_C(1) << 13) - 1);
  assert_true(maelys__ll_fs_rights(2) & MAELYS__LL_FS_REFER);
  assert_false(maelys__ll_fs_rights(2) & MAELYS__LL_FS_TRUNCATE);
  assert_true(maelys__ll_fs_rights(3) & MAELYS__LL_FS_TRUNCATE);
  assert_false(maelys__ll_fs_rights(4) & MAELYS__LL_FS_IOCTL_DEV);
  assert_int_equal(maelys__ll_fs_rights(7), (UINT64_C(1) << 16) - 1);
  /* A file rule may only hold file rights. */
  assert_int_equal(
      maelys__ll_read_rights(7, false) & ~MAELYS__LL_FS_FILE_RIGHTS, 0);
  assert_int_equal(
      maelys__ll_write_rights(7, false) & ~MAELYS__LL_FS_FILE_RIGHTS, 0);
  /* Never device nodes, even in a writable tree. */
  assert_false(maelys__ll_write_rights(7, true) &
               (MAELYS__LL_FS_MAKE_CHAR | MAELYS__LL_FS_MAKE_BLOCK));
}

static void test_read_and_write_rules(void** state) {
  fixture_t* t = *state;
  net(t, MAELYS_EXECUTOR_NETWORK_INHERIT);
  rule(t, "/usr", MAELYS_EXECUTOR_ACCESS_READ,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  rule(t, "/etc/hosts", MAELYS_EXECUTOR_ACCESS_READ,
       MAELYS_EXECUTOR_SCOPE_LITERAL_FILE);
  rule(t, "/ws", MAELYS_EXECUTOR_ACCESS_WRITE,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  assert_int_equal(lower(t), MAELYS_EXECUTOR_OK);
  assert_int_equal(t->out.handled_fs, maelys__ll_fs_rights(7));
  assert_int_equal(t->out.rule_count, 3);
  const maelys__ll_rule_t* r = find(t, "/usr");
  assert_non_null(r);
  assert_true(r->directory);
  assert_int_equal(r->access, maelys__ll_read_rights(7, true));
  assert_false(r->access & MAELYS__LL_FS_WRITE_FILE);
  r = find(t, "/etc/hosts");
  assert_false(r->directory);
  assert_int_equal(r->access, maelys__ll_read_rights(7, false));
  r = find(t, "/ws");
  assert_int_equal(r->access, maelys__ll_write_rights(7, true));
  assert_true(r->access & MAELYS__LL_FS_REFER);
  assert_true(r->access & MAELYS__LL_FS_TRUNCATE);
  /* INHERIT: no network rules, no denial of other socket families, no
   * abstract scope; AF_UNIX sockets are refused and signals scoped always. */
  assert_int_equal(t->out.handled_net, 0);
  assert_false(t->out.deny_inet);
  assert_true(t->out.deny_unix);
  assert_int_equal(t->out.scoped, MAELYS__LL_SCOPE_SIGNAL);
}

static void test_binds_symlink_dir_dev(void** state) {
  fixture_t* t = *state;
  net(t, MAELYS_EXECUTOR_NETWORK_INHERIT);
  assert_int_equal(maelys_executor_plan_add_bind(t->plan, "/usr", "/usr", 0,
                                                 MAELYS_EXECUTOR_MISSING_FAIL,
                                                 NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_bind(t->plan, "/lib64", "/lib64", 0,
                                                 MAELYS_EXECUTOR_MISSING_SKIP,
                                                 NULL),
                   0);
  assert_int_equal(
      maelys_executor_plan_add_bind(t->plan, "/ws/new", "/ws/new", 1,
                                    MAELYS_EXECUTOR_MISSING_CREATE, NULL),
      0);
  assert_int_equal(
      maelys_executor_plan_add_symlink(t->plan, "usr/bin", "/bin", NULL), 0);
  assert_int_equal(maelys_executor_plan_add_dir(t->plan, "/tmp", NULL), 0);
  assert_int_equal(maelys_executor_plan_add_dev(t->plan, "/dev", NULL), 0);
  assert_int_equal(lower(t), MAELYS_EXECUTOR_OK);
  assert_non_null(find(t, "/usr"));
  assert_null(find(t, "/lib64")); /* skipped */
  assert_string_equal(t->fake.created[0], "/ws/new");
  assert_int_equal(find(t, "/ws/new")->access,
                   maelys__ll_write_rights(7, true));
  /* The symlink and the directory are the host's: checked, not granted. */
  assert_null(find(t, "/bin"));
  assert_null(find(t, "/tmp"));
  for (size_t i = 0; maelys__ll_dev_files[i] != NULL; i++) {
    const maelys__ll_rule_t* r = find(t, maelys__ll_dev_files[i]);
    assert_non_null(r);
    assert_false(r->directory);
    assert_true(r->access & MAELYS__LL_FS_WRITE_FILE);
    assert_false(r->access & MAELYS__LL_FS_EXECUTE);
  }
  assert_null(find(t, "/dev"));
}

static void test_network_none(void** state) {
  fixture_t* t = *state;
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  assert_int_equal(lower(t), MAELYS_EXECUTOR_OK);
  assert_int_equal(t->out.handled_net,
                   MAELYS__LL_NET_BIND_TCP | MAELYS__LL_NET_CONNECT_TCP);
  assert_true(t->out.deny_inet);
  assert_true(t->out.deny_unix);
  assert_int_equal(t->out.scoped,
                   MAELYS__LL_SCOPE_SIGNAL | MAELYS__LL_SCOPE_ABSTRACT_UNIX);
}

static void test_external_channel_is_none(void** state) {
  fixture_t* t = *state;
  net(t, MAELYS_EXECUTOR_NETWORK_EXTERNAL_CHANNEL);
  assert_int_equal(maelys_executor_plan_add_channel(t->plan, 4, "egress", NULL),
                   0);
  assert_int_equal(lower(t), MAELYS_EXECUTOR_OK);
  assert_true(t->out.deny_unix);
  assert_int_equal(t->out.handled_net,
                   MAELYS__LL_NET_BIND_TCP | MAELYS__LL_NET_CONNECT_TCP);
}

/* A DENY outside every grant needs no rule: the ruleset denies it. */
static void test_deny_outside_grants(void** state) {
  fixture_t* t = *state;
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  rule(t, "/usr", MAELYS_EXECUTOR_ACCESS_READ,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  rule(t, "/ws/secret", MAELYS_EXECUTOR_ACCESS_DENY,
       MAELYS_EXECUTOR_SCOPE_LITERAL_FILE);
  assert_int_equal(lower(t), MAELYS_EXECUTOR_OK);
  assert_int_equal(t->out.rule_count, 1);
  assert_null(find(t, "/ws/secret"));
}

static void test_protect_create_outside_writable(void** state) {
  fixture_t* t = *state;
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  rule(t, "/usr", MAELYS_EXECUTOR_ACCESS_READ,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  rule(t, "/usr/absent", MAELYS_EXECUTOR_ACCESS_PROTECT_CREATE,
       MAELYS_EXECUTOR_SCOPE_LITERAL_FILE);
  assert_int_equal(lower(t), MAELYS_EXECUTOR_OK);
}

/* As root: an identity of its own reads what "other" reads, and writes
 * only what the fixed identity owns. */
static void test_root_identity_owned_write(void** state) {
  fixture_t* t = *state;
  t->env.host_root = true;
  t->env.identity_fixed = true;
  t->env.identity_uid = 1000;
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  rule(t, "/ws", MAELYS_EXECUTOR_ACCESS_WRITE,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  assert_int_equal(lower(t), MAELYS_EXECUTOR_OK);
}

/* As root, a world-writable directory is one the identity can write. */
static void test_root_world_writable(void** state) {
  fixture_t* t = *state;
  t->env.host_root = true;
  fake_add(&t->fake, "/shared", MAELYS__LL_DIRECTORY)->world_writable = true;
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  rule(t, "/shared", MAELYS_EXECUTOR_ACCESS_WRITE,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  assert_int_equal(lower(t), MAELYS_EXECUTOR_OK);
}

/* ABI 3..5 as root: no scopes, but the payload's identity is its own. */
static void test_root_below_scope_abi(void** state) {
  fixture_t* t = *state;
  t->env.host_root = true;
  t->env.abi = 4;
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  rule(t, "/usr", MAELYS_EXECUTOR_ACCESS_READ,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  assert_int_equal(lower(t), MAELYS_EXECUTOR_OK);
  assert_int_equal(t->out.scoped, 0);
  assert_int_equal(t->out.handled_fs, maelys__ll_fs_rights(4));
  assert_false(find(t, "/usr")->access & MAELYS__LL_FS_IOCTL_DEV);
}

/* ------------------------------------------------------------ refusals */

static void test_refuse_deny_inside_tree(void** state) {
  fixture_t* t = *state;
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  rule(t, "/ws", MAELYS_EXECUTOR_ACCESS_READ,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  rule(t, "/ws/secret", MAELYS_EXECUTOR_ACCESS_DENY,
       MAELYS_EXECUTOR_SCOPE_LITERAL_FILE);
  refused(t, MAELYS_EXECUTOR_ERR_UNSUPPORTED, "rule deny '/ws/secret'",
          "rule read '/ws'");
}

static void test_refuse_grant_inside_deny(void** state) {
  fixture_t* t = *state;
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  rule(t, "/ws/sub", MAELYS_EXECUTOR_ACCESS_READ,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  rule(t, "/ws", MAELYS_EXECUTOR_ACCESS_DENY,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  refused(t, MAELYS_EXECUTOR_ERR_UNSUPPORTED, "rule read '/ws/sub'",
          "rule deny '/ws'");
}

/* A workspace as --rw protects it: .git writable (pinned) with its hooks
 * and config read-only, .maelys read-only. */
static void workspace(fixture_t* t) {
  fake_add(&t->fake, "/ws/README", MAELYS__LL_FILE);
  fake_add(&t->fake, "/ws/link", MAELYS__LL_SYMLINK)->link = "/etc";
  fake_add(&t->fake, "/ws/.maelys", MAELYS__LL_DIRECTORY);
  fake_add(&t->fake, "/ws/.git", MAELYS__LL_DIRECTORY);
  fake_add(&t->fake, "/ws/.git/objects", MAELYS__LL_DIRECTORY);
  fake_add(&t->fake, "/ws/.git/HEAD", MAELYS__LL_FILE);
  fake_add(&t->fake, "/ws/.git/hooks", MAELYS__LL_DIRECTORY);
  fake_add(&t->fake, "/ws/.git/config", MAELYS__LL_FILE);
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  rule(t, "/ws", MAELYS_EXECUTOR_ACCESS_WRITE,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  rule(t, "/ws/.maelys", MAELYS_EXECUTOR_ACCESS_READ,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  rule(t, "/ws/.git", MAELYS_EXECUTOR_ACCESS_WRITE,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  rule(t, "/ws/.git/hooks", MAELYS_EXECUTOR_ACCESS_READ,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  rule(t, "/ws/.git/config", MAELYS_EXECUTOR_ACCESS_READ,
       MAELYS_EXECUTOR_SCOPE_LITERAL_FILE);
}

static bool is_frozen(const fixture_t* t, const char* path) {
  for (size_t i = 0; i < t->out.frozen_count; i++)
    if (strcmp(t->out.frozen[i], path) == 0)
      return true;
  return false;
}

/* Read-only paths inside a writable tree: the tree is carved around them.
 * No rule that can create, remove, rename or write is on any of them or on
 * any directory above them; every other entry keeps the tree's rights. */
static void test_read_inside_write_is_carved(void** state) {
  fixture_t* t = *state;
  workspace(t);
  assert_int_equal(lower(t), MAELYS_EXECUTOR_OK);
  const uint64_t rd = maelys__ll_read_rights(7, true);
  const uint64_t wd = maelys__ll_write_rights(7, true);
  const uint64_t wf = maelys__ll_write_rights(7, false);
  assert_int_equal(t->out.frozen_count, 2);
  assert_true(is_frozen(t, "/ws"));
  assert_true(is_frozen(t, "/ws/.git"));
  /* The frozen directories: readable only. */
  assert_int_equal(find(t, "/ws")->access, rd);
  assert_int_equal(find(t, "/ws/.git")->access, rd);
  /* The read-only paths: their READ rule. */
  assert_int_equal(find(t, "/ws/.maelys")->access, rd);
  assert_int_equal(find(t, "/ws/.git/hooks")->access, rd);
  assert_int_equal(find(t, "/ws/.git/config")->access,
                   maelys__ll_read_rights(7, false));
  /* Everything else the tree's, whole. */
  assert_int_equal(find(t, "/ws/sub")->access, wd);
  assert_true(find(t, "/ws/sub")->directory);
  assert_int_equal(find(t, "/ws/secret")->access, wf);
  assert_int_equal(find(t, "/ws/README")->access, wf);
  assert_int_equal(find(t, "/ws/.git/objects")->access, wd);
  assert_int_equal(find(t, "/ws/.git/HEAD")->access, wf);
  /* A symbolic link gets no rule (Landlock checks where it leads). */
  assert_null(find(t, "/ws/link"));
  assert_int_equal(t->out.rule_count, 10);
  /* The invariant, rule by rule: no right to write, create, remove or
   * rename lands on a protected path or above one. */
  static const char* const kept[] = {"/ws/.maelys", "/ws/.git/hooks",
                                     "/ws/.git/config", NULL};
  for (size_t i = 0; i < t->out.rule_count; i++)
    for (size_t k = 0; kept[k] != NULL; k++) {
      const char* p = t->out.rules[i].path;
      size_t n = strlen(p);
      bool above = strncmp(kept[k], p, n) == 0 &&
                   (kept[k][n] == '/' || kept[k][n] == '\0');
      if (above &&
          (t->out.rules[i].access & ~rd & ~maelys__ll_read_rights(7, false)))
        fail_msg("rule '%s' gives more than reading above '%s'", p, kept[k]);
    }
}

/* Read inside write inside read inside write: each path gets what its
 * innermost rule means, as bubblewrap's stacked mounts give it. */
static void test_carving_follows_the_innermost_rule(void** state) {
  fixture_t* t = *state;
  fake_add(&t->fake, "/ws/sub/f", MAELYS__LL_FILE);
  fake_add(&t->fake, "/ws/sub/t", MAELYS__LL_DIRECTORY);
  fake_add(&t->fake, "/ws/sub/t/x", MAELYS__LL_FILE);
  fake_add(&t->fake, "/ws/sub/t/y", MAELYS__LL_FILE);
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  rule(t, "/ws", MAELYS_EXECUTOR_ACCESS_WRITE,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  rule(t, "/ws/sub", MAELYS_EXECUTOR_ACCESS_READ,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  rule(t, "/ws/sub/t", MAELYS_EXECUTOR_ACCESS_WRITE,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  rule(t, "/ws/sub/t/x", MAELYS_EXECUTOR_ACCESS_READ,
       MAELYS_EXECUTOR_SCOPE_LITERAL_FILE);
  assert_int_equal(lower(t), MAELYS_EXECUTOR_OK);
  assert_true(is_frozen(t, "/ws"));
  assert_true(is_frozen(t, "/ws/sub"));
  assert_true(is_frozen(t, "/ws/sub/t"));
  /* In the read-only /ws/sub, its other entries stay read-only. */
  assert_int_equal(find(t, "/ws/sub/f")->access,
                   maelys__ll_read_rights(7, false));
  /* In the writable /ws/sub/t, writable. */
  assert_int_equal(find(t, "/ws/sub/t/y")->access,
                   maelys__ll_write_rights(7, false));
  assert_int_equal(find(t, "/ws/sub/t/x")->access,
                   maelys__ll_read_rights(7, false));
  assert_int_equal(find(t, "/ws/secret")->access,
                   maelys__ll_write_rights(7, false));
}

/* The very path both writable and read-only cannot be carved. */
static void test_refuse_read_and_write_same_path(void** state) {
  fixture_t* t = *state;
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  rule(t, "/ws", MAELYS_EXECUTOR_ACCESS_WRITE,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  assert_int_equal(maelys_executor_plan_add_bind(t->plan, "/ws", "/ws", 0,
                                                 MAELYS_EXECUTOR_MISSING_FAIL,
                                                 NULL),
                   0);
  refused(t, MAELYS_EXECUTOR_ERR_UNSUPPORTED, "'/ws'", "read-only");
}

/* Too many entries to grant one by one: refused, naming the directory. */
static void test_refuse_carving_a_huge_directory(void** state) {
  fixture_t* t = *state;
  fake_add(&t->fake, "/ws/sub/ro", MAELYS__LL_DIRECTORY);
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  rule(t, "/ws", MAELYS_EXECUTOR_ACCESS_WRITE,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  rule(t, "/ws/sub/ro", MAELYS_EXECUTOR_ACCESS_READ,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  maelys__ll_resolver_t r = t->resolver;
  r.list = fake_list_huge;
  t->env.resolver = &r;
  refused(t, MAELYS_EXECUTOR_ERR_UNSUPPORTED, "'/ws'", "entries");
}

/* A protected name inside a writable tree: its directory is frozen, so
 * nothing can be created there. */
static void test_protect_create_in_writable_freezes(void** state) {
  fixture_t* t = *state;
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  rule(t, "/ws", MAELYS_EXECUTOR_ACCESS_WRITE,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  rule(t, "/ws/never", MAELYS_EXECUTOR_ACCESS_PROTECT_CREATE,
       MAELYS_EXECUTOR_SCOPE_LITERAL_FILE);
  assert_int_equal(lower(t), MAELYS_EXECUTOR_OK);
  assert_true(is_frozen(t, "/ws"));
  assert_int_equal(find(t, "/ws")->access, maelys__ll_read_rights(7, true));
  assert_false(find(t, "/ws")->access & MAELYS__LL_FS_MAKE_REG);
  assert_null(find(t, "/ws/never"));
  assert_int_equal(find(t, "/ws/sub")->access,
                   maelys__ll_write_rights(7, true));
}

static void test_refuse_literal_directory(void** state) {
  fixture_t* t = *state;
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  rule(t, "/ws", MAELYS_EXECUTOR_ACCESS_READ,
       MAELYS_EXECUTOR_SCOPE_LITERAL_DIRECTORY);
  refused(t, MAELYS_EXECUTOR_ERR_UNSUPPORTED, "rule read '/ws'",
          "literal-directory");
}

static void test_refuse_tmpfs(void** state) {
  fixture_t* t = *state;
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  assert_int_equal(maelys_executor_plan_add_tmpfs(t->plan, "/tmp", 4096, NULL),
                   0);
  refused(t, MAELYS_EXECUTOR_ERR_UNSUPPORTED, "mount tmpfs '/tmp'",
          "mount namespace");
}

static void test_refuse_proc(void** state) {
  fixture_t* t = *state;
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  assert_int_equal(maelys_executor_plan_add_proc(t->plan, "/proc", NULL), 0);
  refused(t, MAELYS_EXECUTOR_ERR_UNSUPPORTED, "mount proc '/proc'",
          "pid namespace");
}

static void test_refuse_bind_elsewhere(void** state) {
  fixture_t* t = *state;
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  assert_int_equal(maelys_executor_plan_add_bind(t->plan, "/ws", "/work", 1,
                                                 MAELYS_EXECUTOR_MISSING_FAIL,
                                                 NULL),
                   0);
  refused(t, MAELYS_EXECUTOR_ERR_UNSUPPORTED, "mount bind '/ws' at '/work'",
          "own path");
}

static void test_refuse_symlink_not_on_host(void** state) {
  fixture_t* t = *state;
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  assert_int_equal(
      maelys_executor_plan_add_symlink(t->plan, "usr/lib", "/bin", NULL), 0);
  refused(t, MAELYS_EXECUTOR_ERR_UNSUPPORTED, "mount symlink '/bin'",
          "not that symbolic link");
}

static void test_refuse_dir_absent(void** state) {
  fixture_t* t = *state;
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  assert_int_equal(maelys_executor_plan_add_dir(t->plan, "/nowhere", NULL), 0);
  refused(t, MAELYS_EXECUTOR_ERR_NOT_FOUND, "mount dir '/nowhere'",
          "does not exist");
}

static void test_refuse_dev_elsewhere(void** state) {
  fixture_t* t = *state;
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  assert_int_equal(maelys_executor_plan_add_dev(t->plan, "/sandbox/dev", NULL),
                   0);
  refused(t, MAELYS_EXECUTOR_ERR_UNSUPPORTED, "mount dev '/sandbox/dev'",
          "host's own /dev");
}

static void test_refuse_root_ephemeral(void** state) {
  fixture_t* t = *state;
  assert_int_equal(
      maelys_executor_plan_set_root(
          t->plan, MAELYS_EXECUTOR_ROOT_EPHEMERAL_WRITE, 65536, NULL),
      0);
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  refused(t, MAELYS_EXECUTOR_ERR_UNSUPPORTED, "root ephemeral-write",
          "scratch");
}

static void test_refuse_root_host(void** state) {
  fixture_t* t = *state;
  assert_int_equal(maelys_executor_plan_set_root(
                       t->plan, MAELYS_EXECUTOR_ROOT_HOST, 0, NULL),
                   0);
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  refused(t, MAELYS_EXECUTOR_ERR_UNSUPPORTED, "root host", "posix");
}

static void test_refuse_mediated(void** state) {
  fixture_t* t = *state;
  net(t, MAELYS_EXECUTOR_NETWORK_MEDIATED);
  assert_int_equal(maelys_executor_plan_add_network_destination(
                       t->plan, "example.org", 443, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_set_network_mediator(
                       t->plan, MAELYS_EXECUTOR_MEDIATOR_FD4, NULL),
                   0);
  refused(t, MAELYS_EXECUTOR_ERR_UNSUPPORTED, "network mediated", "egress");
}

static void test_refuse_symlink_in_path(void** state) {
  fixture_t* t = *state;
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  rule(t, "/link/x", MAELYS_EXECUTOR_ACCESS_READ,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  refused(t, MAELYS_EXECUTOR_ERR_DENIED, "rule read '/link/x'",
          "symbolic link");
}

static void test_refuse_write_on_kernel_fs(void** state) {
  fixture_t* t = *state;
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  rule(t, "/proc/sys", MAELYS_EXECUTOR_ACCESS_WRITE,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  refused(t, MAELYS_EXECUTOR_ERR_DENIED, "rule write '/proc/sys'",
          "kernel interface");
}

static void test_refuse_root_write_not_owned(void** state) {
  fixture_t* t = *state;
  t->env.host_root = true;
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  rule(t, "/ws", MAELYS_EXECUTOR_ACCESS_WRITE,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  refused(t, MAELYS_EXECUTOR_ERR_DENIED, "rule write '/ws'", "idmapped");
}

static void test_refuse_root_read_private(void** state) {
  fixture_t* t = *state;
  t->env.host_root = true;
  fake_add(&t->fake, "/private", MAELYS__LL_DIRECTORY)->world = false;
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  rule(t, "/private", MAELYS_EXECUTOR_ACCESS_READ,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  refused(t, MAELYS_EXECUTOR_ERR_DENIED, "rule read '/private'",
          "not readable by other users");
}

static void test_refuse_old_abi(void** state) {
  fixture_t* t = *state;
  t->env.abi = 2;
  net(t, MAELYS_EXECUTOR_NETWORK_INHERIT);
  refused(t, MAELYS_EXECUTOR_ERR_UNSUPPORTED, "ABI is 2", "truncate");
}

/* Without signal scoping the payload, as this user, could kill its own
 * supervisor (invariant 19). */
static void test_refuse_unscoped_signals_as_user(void** state) {
  fixture_t* t = *state;
  t->env.abi = 5;
  net(t, MAELYS_EXECUTOR_NETWORK_INHERIT);
  refused(t, MAELYS_EXECUTOR_ERR_UNSUPPORTED, "ABI is 5", "invariant 19");
}

static void test_refuse_none_without_tcp_rules(void** state) {
  fixture_t* t = *state;
  t->env.abi = 3;
  t->env.host_root = true;
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  refused(t, MAELYS_EXECUTOR_ERR_UNSUPPORTED, "network none", "TCP rules");
}

static void test_refuse_kind_mismatch(void** state) {
  fixture_t* t = *state;
  net(t, MAELYS_EXECUTOR_NETWORK_NONE);
  rule(t, "/ws/secret", MAELYS_EXECUTOR_ACCESS_READ,
       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY);
  refused(t, MAELYS_EXECUTOR_ERR_ARGUMENT, "rule read '/ws/secret'",
          "not a directory");
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

/* The process-tree verdict of the probe's two runs: proved only with a
 * cgroup, scoped signals and both runs' stdout ended; a run B that never
 * reached its marker (a loaded host timed it out) tested nothing, and says
 * so rather than that a descendant outlived anything. */
static void expect_reason(const maelys_backend_probe_run_t runs[2],
                          const char* cgroup, const char* needle) {
  char* why = maelys__ll_tree_reason(cgroup, "no writable cgroup", runs);
  if (needle == NULL) {
    if (why != NULL)
      fail_msg("not proved: %s", why);
    return;
  }
  if (why == NULL || strstr(why, needle) == NULL)
    fail_msg("reason '%s' does not say '%s'", why ? why : "(proved)", needle);
  if (strstr(needle, "outlived") == NULL && strstr(why, "outlived") != NULL)
    fail_msg("reason '%s' blames a descendant", why);
  free(why);
}

static void test_tree_reason(void** state) {
  (void)state;
  static char report[] = "caps=none\nsignal=errno:1\n";
  maelys_backend_probe_run_t runs[2];
  for (int i = 0; i < 2; i++) {
    maelys_backend_probe_run_init(&runs[i], NULL, NULL);
    runs[i].spawned = 1;
    runs[i].marker_seen = 1;
    runs[i].output_eof = 1;
    runs[i].outcome = MAELYS_EXEC_OUTCOME_SIGNALED;
    runs[i].term_signal = 9;
  }
  runs[0].output = report;
  const char* cg = "/sys/fs/cgroup/maelys";
  expect_reason(runs, cg, NULL);
  expect_reason(runs, NULL, "no writable cgroup; without a cgroup");
  runs[1].marker_seen = 0;
  runs[1].timed_out = 1;
  runs[1].output_eof = 0;
  expect_reason(runs, cg, "ended without its report (timed out");
  runs[1].marker_seen = 1;
  expect_reason(runs, cg,
                "double-forked, setsid() descendant outlived a "
                "forced stop");
  runs[1].timed_out = 0;
  runs[1].output_eof = 1;
  runs[0].output_eof = 0;
  expect_reason(runs, cg, "outlived the host's lifeline");
  runs[0].output_eof = 1;
  static char unscoped[] = "caps=none\nsignal=ok\n";
  runs[0].output = unscoped;
  expect_reason(runs, cg, "signals not scoped");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tree_reason),
      cmocka_unit_test(test_rights_by_abi),
      T(test_read_and_write_rules),
      T(test_binds_symlink_dir_dev),
      T(test_network_none),
      T(test_external_channel_is_none),
      T(test_deny_outside_grants),
      T(test_protect_create_outside_writable),
      T(test_root_identity_owned_write),
      T(test_root_world_writable),
      T(test_root_below_scope_abi),
      T(test_refuse_deny_inside_tree),
      T(test_refuse_grant_inside_deny),
      T(test_read_inside_write_is_carved),
      T(test_carving_follows_the_innermost_rule),
      T(test_refuse_read_and_write_same_path),
      T(test_refuse_carving_a_huge_directory),
      T(test_protect_create_in_writable_freezes),
      T(test_refuse_literal_directory),
      T(test_refuse_tmpfs),
      T(test_refuse_proc),
      T(test_refuse_bind_elsewhere),
      T(test_refuse_symlink_not_on_host),
      T(test_refuse_dir_absent),
      T(test_refuse_dev_elsewhere),
      T(test_refuse_root_ephemeral),
      T(test_refuse_root_host),
      T(test_refuse_mediated),
      T(test_refuse_symlink_in_path),
      T(test_refuse_write_on_kernel_fs),
      T(test_refuse_root_write_not_owned),
      T(test_refuse_root_read_private),
      T(test_refuse_old_abi),
      T(test_refuse_unscoped_signals_as_user),
      T(test_refuse_none_without_tcp_rules),
      T(test_refuse_kind_mismatch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
