/*
 * The glue against a real libmaelys-sandbox-policy: MIR built with the
 * library's builder, compiled against a HostContext of temporary
 * directories, lowered with maelys_warden_plan_from_sandbox_policy() and read
 * back through the sealed plan's JSON. No sandbox runs here.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "maelys/warden_policy_adapter.h"

/* ---------------------------------------------------------- the host */

typedef struct tree {
  char dir[64];
  char ws[128], data[160], file[192], secret[160], git[160], temp[128];
  char rt[128], real[160], link[160];
  const char* roots[1];
  maelys_warden_policy_host_t host;
} tree_t;

static void write_text(const char* path, const char* text, mode_t mode) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
}

static int tree_setup(void** state) {
  tree_t* t = calloc(1, sizeof *t);
  assert_non_null(t);
  snprintf(t->dir, sizeof t->dir, "/tmp/maelys-wp-glue.XXXXXX");
  assert_non_null(mkdtemp(t->dir));
  snprintf(t->ws, sizeof t->ws, "%s/ws", t->dir);
  snprintf(t->data, sizeof t->data, "%s/data", t->ws);
  snprintf(t->file, sizeof t->file, "%s/a.txt", t->data);
  snprintf(t->secret, sizeof t->secret, "%s/secret.txt", t->ws);
  snprintf(t->git, sizeof t->git, "%s/.git", t->ws);
  snprintf(t->temp, sizeof t->temp, "%s/temp", t->dir);
  snprintf(t->rt, sizeof t->rt, "%s/rt", t->dir);
  snprintf(t->real, sizeof t->real, "%s/real", t->rt);
  snprintf(t->link, sizeof t->link, "%s/lnk", t->rt);
  assert_int_equal(mkdir(t->ws, 0700), 0);
  assert_int_equal(mkdir(t->data, 0700), 0);
  assert_int_equal(mkdir(t->temp, 0700), 0);
  assert_int_equal(mkdir(t->rt, 0700), 0);
  assert_int_equal(mkdir(t->real, 0700), 0);
  assert_int_equal(symlink("real", t->link), 0);
  write_text(t->file, "a\n", 0600);
  write_text(t->secret, "s\n", 0600);
  t->roots[0] = t->link;
  t->host.workspace = t->ws;
  t->host.temp = t->temp;
  t->host.minimal_runtime_roots = t->roots;
  t->host.minimal_runtime_root_count = 1;
  *state = t;
  return 0;
}

static int remove_one(const char* path, const struct stat* st, int flag,
                      struct FTW* ftw) {
  (void)st;
  (void)ftw;
  return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static int tree_teardown(void** state) {
  tree_t* t = *state;
  /* Depth first, never following a link (the tree holds one). */
  assert_int_equal(nftw(t->dir, remove_one, 16, FTW_DEPTH | FTW_PHYS), 0);
  free(t);
  return 0;
}

/* ------------------------------------------------------------ helpers */

typedef struct fs_rule {
  maelys_mir_fs_access_t access;
  maelys_mir_path_root_t root;
  const char* relative;
  maelys_mir_path_scope_t scope;
  maelys_mir_missing_path_t missing;
} fs_rule_t;

static maelys_mir_t* build_mir(const fs_rule_t* rules, size_t n,
                               maelys_mir_network_mode_t net,
                               maelys_mir_root_mode_t root, int tree) {
  maelys_mir_builder_t* b = NULL;
  assert_int_equal(maelys_mir_builder_create(&b, NULL), 0);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(maelys_mir_builder_add_fs_rule(
                         b, rules[i].access, rules[i].root, rules[i].relative,
                         rules[i].scope, rules[i].missing, NULL),
                     0);
  assert_int_equal(maelys_mir_builder_set_network(b, net, NULL), 0);
  if (net == MAELYS_MIR_NETWORK_MEDIATED) {
    assert_int_equal(
        maelys_mir_builder_add_network_destination(
            b, MAELYS_MIR_NETWORK_PROTOCOL_TCP, "GitHub.COM", 443, NULL),
        0);
    assert_int_equal(
        maelys_mir_builder_add_network_destination(
            b, MAELYS_MIR_NETWORK_PROTOCOL_TCP, "api.github.com", 443, NULL),
        0);
  }
  assert_int_equal(maelys_mir_builder_set_root_mode(b, root, NULL), 0);
  assert_int_equal(maelys_mir_builder_set_process_tree_required(b, tree, NULL),
                   0);
  maelys_mir_t* mir = NULL;
  assert_int_equal(maelys_mir_builder_build(b, &mir, NULL), 0);
  maelys_mir_builder_destroy(b);
  return mir;
}

/* Every capability the library knows, as the adapter translates them. */
static maelys_sandbox_policy_capabilities_t all_capabilities(void) {
  maelys_sandbox_policy_capabilities_t caps = 0;
  assert_int_equal(maelys_warden_policy_library_capabilities(
                       MAELYS_WARDEN_POLICY_CAP_ALL, &caps, NULL),
                   0);
  return caps;
}

static maelys_sandbox_policy_plan_t*
compile(const maelys_mir_t* mir, const maelys_warden_policy_host_t* host) {
  maelys_sandbox_policy_host_t* ctx = NULL;
  char* error = NULL;
  if (maelys_warden_policy_host_context_create(host, &ctx, &error) != 0)
    fail_msg("host context: %s", error ? error : "");
  maelys_sandbox_policy_plan_t* plan = NULL;
  char* perr = NULL;
  maelys_mir_result_t r =
      maelys_sandbox_policy_compile(mir, ctx, all_capabilities(), &plan, &perr);
  if (r != MAELYS_MIR_OK)
    fail_msg("compile: %s", perr ? perr : "");
  maelys_sandbox_policy_host_destroy(ctx);
  return plan;
}

static maelys_executor_result_t glue(const maelys_sandbox_policy_plan_t* p,
                                     const maelys_mir_t* mir,
                                     const maelys_warden_policy_host_t* host,
                                     const maelys_warden_policy_options_t* run,
                                     maelys_executor_plan_t** out,
                                     char** error) {
  maelys_warden_sandbox_policy_options_t o = {run, mir, host};
  return maelys_warden_plan_from_sandbox_policy(p, &o, out, error);
}

static json_t* to_json(const maelys_executor_plan_t* plan) {
  char* text = NULL;
  assert_int_equal(maelys_executor_plan_to_json(plan, &text, NULL), 0);
  json_t* doc = json_loads(text, 0, NULL);
  assert_non_null(doc);
  maelys_executor_string_free(text);
  return doc;
}

/* The rule of the plan on `path`, or NULL. */
static json_t* rule_on(json_t* doc, const char* path) {
  json_t* rules = json_object_get(doc, "rules");
  for (size_t i = 0; i < json_array_size(rules); i++) {
    json_t* r = json_array_get(rules, i);
    if (strcmp(json_string_value(json_object_get(r, "path")), path) == 0)
      return r;
  }
  return NULL;
}

static void expect_rule(json_t* doc, const char* path, const char* access,
                        const char* scope) {
  json_t* r = rule_on(doc, path);
  if (r == NULL)
    fail_msg("no rule on %s", path);
  assert_string_equal(json_string_value(json_object_get(r, "access")), access);
  assert_string_equal(json_string_value(json_object_get(r, "scope")), scope);
}

static void expect_failure(maelys_executor_result_t got,
                           maelys_executor_result_t want, char* error,
                           const char* a, const char* b) {
  if (got != want) {
    print_error("expected %s, got %s: %s\n", maelys_executor_result_name(want),
                maelys_executor_result_name(got), error ? error : "");
    fail();
  }
  const char* text = error ? error : "";
  if (a != NULL && strstr(text, a) == NULL)
    fail_msg("diagnostic '%s' lacks '%s'", text, a);
  if (b != NULL && strstr(text, b) == NULL)
    fail_msg("diagnostic '%s' lacks '%s'", text, b);
  maelys_executor_error_free(error);
}

/* -------------------------------------------------------------- tests */

static void test_every_rule_copied(void** state) {
  tree_t* t = *state;
  char host_rel[256];
  snprintf(host_rel, sizeof host_rel, "%s", t->secret);
  const fs_rule_t rules[] = {
      {MAELYS_MIR_FS_READ, MAELYS_MIR_ROOT_WORKSPACE, "data",
       MAELYS_MIR_SCOPE_TREE, MAELYS_MIR_MISSING_ERROR},
      {MAELYS_MIR_FS_DENY, MAELYS_MIR_ROOT_WORKSPACE, "data/a.txt",
       MAELYS_MIR_SCOPE_EXACT, MAELYS_MIR_MISSING_ERROR},
      {MAELYS_MIR_FS_WRITE, MAELYS_MIR_ROOT_TEMP, "", MAELYS_MIR_SCOPE_TREE,
       MAELYS_MIR_MISSING_ERROR},
      {MAELYS_MIR_FS_READ, MAELYS_MIR_ROOT_HOST, host_rel,
       MAELYS_MIR_SCOPE_EXACT, MAELYS_MIR_MISSING_ERROR},
      {MAELYS_MIR_FS_READ, MAELYS_MIR_ROOT_MINIMAL_RUNTIME, "",
       MAELYS_MIR_SCOPE_TREE, MAELYS_MIR_MISSING_ERROR},
  };
  maelys_mir_t* mir = build_mir(rules, 5, MAELYS_MIR_NETWORK_NONE,
                                MAELYS_MIR_ROOT_READ_ONLY, 1);
  maelys_sandbox_policy_plan_t* p = compile(mir, &t->host);
  maelys_executor_plan_t* plan = NULL;
  char* error = NULL;
  if (glue(p, mir, &t->host, NULL, &plan, &error) != 0)
    fail_msg("glue: %s", error ? error : "");
  json_t* doc = to_json(plan);
  assert_int_equal(json_array_size(json_object_get(doc, "rules")), 5);
  expect_rule(doc, t->data, "read", "recursive-directory");
  expect_rule(doc, t->file, "deny", "literal-file");
  expect_rule(doc, t->temp, "write", "recursive-directory");
  expect_rule(doc, t->secret, "read", "literal-file");
  /* The minimal-runtime root was a link: its target is the rule, and the
   * link itself is recreated inside. */
  expect_rule(doc, t->real, "read", "recursive-directory");
  json_t* mounts = json_object_get(doc, "mounts");
  assert_int_equal(json_array_size(mounts), 1);
  json_t* m = json_array_get(mounts, 0);
  assert_string_equal(json_string_value(json_object_get(m, "kind")), "symlink");
  assert_string_equal(json_string_value(json_object_get(m, "destination")),
                      t->link);
  assert_string_equal(json_string_value(json_object_get(m, "target")), "real");
  /* Both digests: the MIR's is the plan's decision digest. */
  char hex[MAELYS_MIR_DIGEST_HEX_SIZE];
  assert_int_equal(maelys_mir_digest_hex(mir, hex, NULL), 0);
  char want[80];
  snprintf(want, sizeof want, "sha256:%s", hex);
  assert_string_equal(
      json_string_value(json_object_get(doc, "decision_digest")), want);
  assert_string_equal(json_string_value(json_object_get(
                          json_object_get(doc, "network"), "mode")),
                      "none");
  uint64_t need = 0;
  assert_int_equal(
      maelys_executor_plan_required_capabilities(plan, &need, NULL), 0);
  assert_true(need & MAELYS_BACKEND_CAP_PROCESS_CONFINEMENT);
  assert_true(need & MAELYS_BACKEND_CAP_NETWORK_NONE);
  assert_true(need & MAELYS_BACKEND_CAP_FILESYSTEM_DENY);
  json_decref(doc);
  maelys_executor_plan_destroy(plan);
  /* The source plan is still the caller's, and intact. */
  assert_int_equal(maelys_sandbox_policy_plan_rule_count(p), 5);
  maelys_sandbox_policy_plan_destroy(p);
  maelys_mir_destroy(mir);
}

/* Sandbox Policy ABI 4 drops a DENY of an absent path with missing: skip
 * from the plan; the glue finds it in the source MIR and refuses. */
static void test_absent_deny_never_vanishes(void** state) {
  tree_t* t = *state;
  const fs_rule_t rules[] = {
      {MAELYS_MIR_FS_READ, MAELYS_MIR_ROOT_WORKSPACE, "", MAELYS_MIR_SCOPE_TREE,
       MAELYS_MIR_MISSING_ERROR},
      {MAELYS_MIR_FS_DENY, MAELYS_MIR_ROOT_WORKSPACE, ".git",
       MAELYS_MIR_SCOPE_TREE, MAELYS_MIR_MISSING_SKIP},
  };
  maelys_mir_t* mir = build_mir(rules, 2, MAELYS_MIR_NETWORK_NONE,
                                MAELYS_MIR_ROOT_READ_ONLY, 0);
  maelys_sandbox_policy_plan_t* p = compile(mir, &t->host);
  /* The library really did drop it. */
  assert_int_equal(maelys_sandbox_policy_plan_rule_count(p), 1);
  maelys_executor_plan_t* plan = (void*)1;
  char* error = NULL;
  maelys_executor_result_t got = glue(p, mir, &t->host, NULL, &plan, &error);
  expect_failure(got, MAELYS_EXECUTOR_ERR_UNSUPPORTED, error,
                 "deny workspace:.git", "create-protection");
  assert_null(plan);
  maelys_sandbox_policy_plan_destroy(p);

  /* Once the path exists, the deny is in the plan and lowered. */
  assert_int_equal(mkdir(t->git, 0700), 0);
  p = compile(mir, &t->host);
  error = NULL;
  if (glue(p, mir, &t->host, NULL, &plan, &error) != 0)
    fail_msg("glue: %s", error ? error : "");
  json_t* doc = to_json(plan);
  expect_rule(doc, t->git, "deny", "recursive-directory");
  json_decref(doc);
  maelys_executor_plan_destroy(plan);

  /* A deny present at compilation and gone before lowering is refused too:
   * it would otherwise be create-protection. */
  assert_int_equal(rmdir(t->git), 0);
  error = NULL;
  got = glue(p, mir, &t->host, NULL, &plan, &error);
  expect_failure(got, MAELYS_EXECUTOR_ERR_UNSUPPORTED, error,
                 "deny workspace:.git", "create-protection");
  maelys_sandbox_policy_plan_destroy(p);
  maelys_mir_destroy(mir);
}

static void test_source_mir_and_host_required(void** state) {
  tree_t* t = *state;
  const fs_rule_t rules[] = {{MAELYS_MIR_FS_READ, MAELYS_MIR_ROOT_WORKSPACE, "",
                              MAELYS_MIR_SCOPE_TREE, MAELYS_MIR_MISSING_ERROR}};
  maelys_mir_t* mir = build_mir(rules, 1, MAELYS_MIR_NETWORK_NONE,
                                MAELYS_MIR_ROOT_READ_ONLY, 0);
  maelys_mir_t* other = build_mir(rules, 1, MAELYS_MIR_NETWORK_NONE,
                                  MAELYS_MIR_ROOT_READ_ONLY, 1);
  maelys_sandbox_policy_plan_t* p = compile(mir, &t->host);
  maelys_executor_plan_t* plan = NULL;
  char* error = NULL;
  maelys_executor_result_t got = glue(p, NULL, &t->host, NULL, &plan, &error);
  expect_failure(got, MAELYS_EXECUTOR_ERR_ARGUMENT, error, "source MIR",
                 "absent-path DENY");
  error = NULL;
  got = glue(p, mir, NULL, NULL, &plan, &error);
  expect_failure(got, MAELYS_EXECUTOR_ERR_ARGUMENT, error, "host roots", NULL);
  error = NULL;
  got = glue(p, other, &t->host, NULL, &plan, &error);
  expect_failure(got, MAELYS_EXECUTOR_ERR_DENIED, error, "not the one", NULL);
  error = NULL;
  got = maelys_warden_plan_from_sandbox_policy(p, NULL, &plan, &error);
  expect_failure(got, MAELYS_EXECUTOR_ERR_ARGUMENT, error, "required", NULL);
  assert_null(plan);
  maelys_sandbox_policy_plan_destroy(p);
  maelys_mir_destroy(other);
  maelys_mir_destroy(mir);
}

static void test_exact_directory_rejected(void** state) {
  tree_t* t = *state;
  const fs_rule_t rules[] = {{MAELYS_MIR_FS_READ, MAELYS_MIR_ROOT_WORKSPACE,
                              "data", MAELYS_MIR_SCOPE_EXACT,
                              MAELYS_MIR_MISSING_ERROR}};
  maelys_mir_t* mir = build_mir(rules, 1, MAELYS_MIR_NETWORK_NONE,
                                MAELYS_MIR_ROOT_READ_ONLY, 0);
  maelys_sandbox_policy_plan_t* p = compile(mir, &t->host);
  maelys_executor_plan_t* plan = NULL;
  char* error = NULL;
  maelys_executor_result_t got = glue(p, mir, &t->host, NULL, &plan, &error);
  expect_failure(got, MAELYS_EXECUTOR_ERR_UNSUPPORTED, error, t->data,
                 "literal-directory");
  maelys_sandbox_policy_plan_destroy(p);
  maelys_mir_destroy(mir);
}

static void check_mediated(tree_t* t, const char* mediator) {
  maelys_mir_t* mir = build_mir(NULL, 0, MAELYS_MIR_NETWORK_MEDIATED,
                                MAELYS_MIR_ROOT_READ_ONLY, 0);
  maelys_warden_policy_host_t host = t->host;
  host.mediator_id = mediator;
  maelys_sandbox_policy_plan_t* p = compile(mir, &host);
  maelys_executor_plan_t* plan = NULL;
  char* error = NULL;
  if (glue(p, mir, &host, NULL, &plan, &error) != 0)
    fail_msg("glue: %s", error ? error : "");
  json_t* doc = to_json(plan);
  json_t* net = json_object_get(doc, "network");
  assert_string_equal(json_string_value(json_object_get(net, "mode")),
                      "mediated");
  assert_string_equal(json_string_value(json_object_get(net, "mediator")),
                      mediator);
  json_t* d = json_object_get(net, "destinations");
  assert_int_equal(json_array_size(d), 2);
  /* Canonical (lowercase) hostnames, in the library's order. */
  assert_string_equal(
      json_string_value(json_object_get(json_array_get(d, 0), "host")),
      "api.github.com");
  assert_string_equal(
      json_string_value(json_object_get(json_array_get(d, 1), "host")),
      "github.com");
  json_decref(doc);
  maelys_executor_plan_destroy(plan);
  maelys_sandbox_policy_plan_destroy(p);
  maelys_mir_destroy(mir);
}

static void test_mediated_fd4_and_egress(void** state) {
  check_mediated(*state, MAELYS_WARDEN_POLICY_FD4_MEDIATOR_ID);
  check_mediated(*state, MAELYS_WARDEN_POLICY_EGRESS_MEDIATOR_ID);
}

static void test_other_mediator_refused(void** state) {
  tree_t* t = *state;
  maelys_warden_policy_host_t host = t->host;
  host.mediator_id = "corp-proxy";
  maelys_sandbox_policy_host_t* ctx = NULL;
  char* error = NULL;
  maelys_executor_result_t got =
      maelys_warden_policy_host_context_create(&host, &ctx, &error);
  expect_failure(got, MAELYS_EXECUTOR_ERR_DENIED, error, "'corp-proxy'",
                 "rebound");
  assert_null(ctx);
  /* A HostContext built without the adapter may name anything; the lowering
   * still refuses it. */
  assert_int_equal(maelys_sandbox_policy_host_create(&ctx, NULL), 0);
  assert_int_equal(
      maelys_sandbox_policy_host_set_network_mediator(ctx, "corp-proxy", NULL),
      0);
  maelys_mir_t* mir = build_mir(NULL, 0, MAELYS_MIR_NETWORK_MEDIATED,
                                MAELYS_MIR_ROOT_READ_ONLY, 0);
  maelys_sandbox_policy_plan_t* p = NULL;
  assert_int_equal(
      maelys_sandbox_policy_compile(mir, ctx, all_capabilities(), &p, NULL), 0);
  maelys_executor_plan_t* plan = NULL;
  error = NULL;
  got = glue(p, mir, &t->host, NULL, &plan, &error);
  expect_failure(got, MAELYS_EXECUTOR_ERR_DENIED, error, "'corp-proxy'",
                 MAELYS_WARDEN_POLICY_FD4_MEDIATOR_ID);
  maelys_sandbox_policy_plan_destroy(p);
  maelys_sandbox_policy_host_destroy(ctx);
  maelys_mir_destroy(mir);
}

static void test_root_and_direct_network(void** state) {
  tree_t* t = *state;
  maelys_mir_t* mir = build_mir(NULL, 0, MAELYS_MIR_NETWORK_DIRECT,
                                MAELYS_MIR_ROOT_EPHEMERAL_WRITE, 0);
  maelys_sandbox_policy_plan_t* p = compile(mir, &t->host);
  maelys_executor_plan_t* plan = NULL;
  char* error = NULL;
  maelys_executor_result_t got = glue(p, mir, &t->host, NULL, &plan, &error);
  expect_failure(got, MAELYS_EXECUTOR_ERR_ARGUMENT, error, "ephemeral-write",
                 "scratch");
  maelys_warden_policy_options_t run = {.scratch_bytes = 32u << 20};
  error = NULL;
  if (glue(p, mir, &t->host, &run, &plan, &error) != 0)
    fail_msg("glue: %s", error ? error : "");
  json_t* doc = to_json(plan);
  json_t* root = json_object_get(doc, "root");
  assert_string_equal(json_string_value(json_object_get(root, "disposition")),
                      "ephemeral-write");
  assert_int_equal(json_integer_value(json_object_get(root, "scratch")),
                   32 << 20);
  assert_string_equal(json_string_value(json_object_get(
                          json_object_get(doc, "network"), "mode")),
                      "inherit");
  json_decref(doc);
  maelys_executor_plan_destroy(plan);
  maelys_sandbox_policy_plan_destroy(p);
  maelys_mir_destroy(mir);
}

static void test_library_capabilities(void** state) {
  (void)state;
  static const struct {
    uint64_t portable;
    maelys_sandbox_policy_capabilities_t library;
  } rows[] = {
      {MAELYS_WARDEN_POLICY_CAP_FS_READ, MAELYS_SANDBOX_POLICY_CAP_FS_READ},
      {MAELYS_WARDEN_POLICY_CAP_FS_WRITE, MAELYS_SANDBOX_POLICY_CAP_FS_WRITE},
      {MAELYS_WARDEN_POLICY_CAP_FS_DENY, MAELYS_SANDBOX_POLICY_CAP_FS_DENY},
      {MAELYS_WARDEN_POLICY_CAP_NETWORK_NONE,
       MAELYS_SANDBOX_POLICY_CAP_NETWORK_NONE},
      {MAELYS_WARDEN_POLICY_CAP_NETWORK_DIRECT,
       MAELYS_SANDBOX_POLICY_CAP_NETWORK_DIRECT},
      {MAELYS_WARDEN_POLICY_CAP_NETWORK_MEDIATED,
       MAELYS_SANDBOX_POLICY_CAP_NETWORK_MEDIATED},
      {MAELYS_WARDEN_POLICY_CAP_PROCESS_TREE,
       MAELYS_SANDBOX_POLICY_CAP_PROCESS_TREE},
      {MAELYS_WARDEN_POLICY_CAP_ROOT_EPHEMERAL_WRITE,
       MAELYS_SANDBOX_POLICY_CAP_ROOT_EPHEMERAL_WRITE},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    maelys_sandbox_policy_capabilities_t got = 0;
    assert_int_equal(
        maelys_warden_policy_library_capabilities(rows[i].portable, &got, NULL),
        0);
    assert_int_equal(got, rows[i].library);
  }
  maelys_sandbox_policy_capabilities_t got = 7;
  char* error = NULL;
  maelys_executor_result_t r = maelys_warden_policy_library_capabilities(
      UINT64_C(1) << 40, &got, &error);
  expect_failure(r, MAELYS_EXECUTOR_ERR_ARGUMENT, error, "does not define",
                 NULL);
  assert_int_equal(got, 0);
}

/* What POSIX proves (nothing) compiles nothing: the library refuses. */
static void test_missing_capability_refused_by_the_library(void** state) {
  tree_t* t = *state;
  maelys_mir_t* mir =
      build_mir(NULL, 0, MAELYS_MIR_NETWORK_NONE, MAELYS_MIR_ROOT_READ_ONLY, 0);
  uint64_t portable = 0;
  assert_int_equal(
      maelys_warden_policy_capabilities_from_executor(0, &portable, NULL), 0);
  maelys_sandbox_policy_capabilities_t caps = 0;
  assert_int_equal(
      maelys_warden_policy_library_capabilities(portable, &caps, NULL), 0);
  maelys_sandbox_policy_host_t* ctx = NULL;
  assert_int_equal(
      maelys_warden_policy_host_context_create(&t->host, &ctx, NULL), 0);
  maelys_sandbox_policy_plan_t* p = NULL;
  char* perr = NULL;
  assert_int_equal(maelys_sandbox_policy_compile(mir, ctx, caps, &p, &perr),
                   MAELYS_MIR_ERR_UNSUPPORTED);
  assert_non_null(strstr(perr ? perr : "", "network none"));
  maelys_mir_error_free(perr);
  assert_null(p);
  maelys_sandbox_policy_host_destroy(ctx);
  maelys_mir_destroy(mir);
}

static void test_host_context_errors(void** state) {
  tree_t* t = *state;
  maelys_warden_policy_host_t host = t->host;
  char missing[200];
  snprintf(missing, sizeof missing, "%s/nowhere", t->dir);
  host.workspace = missing;
  maelys_sandbox_policy_host_t* ctx = NULL;
  char* error = NULL;
  maelys_executor_result_t got =
      maelys_warden_policy_host_context_create(&host, &ctx, &error);
  expect_failure(got, MAELYS_EXECUTOR_ERR_IO, error, "workspace root", missing);
  host = t->host;
  host.minimal_runtime_roots = NULL;
  error = NULL;
  got = maelys_warden_policy_host_context_create(&host, &ctx, &error);
  expect_failure(got, MAELYS_EXECUTOR_ERR_ARGUMENT, error, "host roots", NULL);
  assert_null(ctx);
}

/* from_file refusals that need no sandbox: a posix-only executor for the
 * handshake (whose capabilities are then empty). */
static void test_policy_file_refusals(void** state) {
  tree_t* t = *state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  maelys_executor_t* ex = NULL;
  assert_int_equal(maelys_executor_create(&loop, &ex, NULL), 0);
  assert_int_equal(
      maelys_executor_register_backend(ex, maelys_backend_posix(), NULL, NULL),
      0);
  maelys_warden_policy_handshake_t* h = NULL;
  assert_int_equal(maelys_warden_policy_handshake_begin(ex, "posix", &h, NULL),
                   0);
  maelys_mir_t* mir =
      build_mir(NULL, 0, MAELYS_MIR_NETWORK_NONE, MAELYS_MIR_ROOT_READ_ONLY, 0);
  uint8_t* bytes = NULL;
  size_t n = 0;
  assert_int_equal(maelys_mir_encode(mir, &bytes, &n, NULL), 0);
  char good[200], link[200], loose[200], bad[200], big[200], fifo[200];
  snprintf(good, sizeof good, "%s/p.mir", t->dir);
  snprintf(link, sizeof link, "%s/link.mir", t->dir);
  snprintf(loose, sizeof loose, "%s/loose.mir", t->dir);
  snprintf(bad, sizeof bad, "%s/bad.mir", t->dir);
  snprintf(big, sizeof big, "%s/big.mir", t->dir);
  snprintf(fifo, sizeof fifo, "%s/fifo.mir", t->dir);
  int fd = open(good, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, bytes, n), (ssize_t)n);
  close(fd);
  assert_int_equal(symlink("p.mir", link), 0);
  fd = open(loose, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  assert_int_equal(write(fd, bytes, n), (ssize_t)n);
  close(fd);
  assert_int_equal(chmod(loose, 0620), 0);
  /* Not canonical: a byte of the header's reserved field set. */
  bytes[6] = 1;
  fd = open(bad, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  assert_int_equal(write(fd, bytes, n), (ssize_t)n);
  close(fd);
  fd = open(big, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  assert_int_equal(ftruncate(fd, (off_t)MAELYS_MIR_MAX_BYTES + 1), 0);
  close(fd);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  maelys_mir_bytes_free(bytes);

  static const struct {
    int which;
    maelys_executor_result_t want;
    const char* needle;
  } cases[] = {
      {0, MAELYS_EXECUTOR_ERR_UNSUPPORTED, "network none"}, /* posix: nothing */
      {1, MAELYS_EXECUTOR_ERR_DENIED, "symbolic link"},
      {2, MAELYS_EXECUTOR_ERR_DENIED, "writable by its group"},
      {3, MAELYS_EXECUTOR_ERR_ARGUMENT, "not canonical MIR"},
      {4, MAELYS_EXECUTOR_ERR_ARGUMENT, "exceeds"},
      {5, MAELYS_EXECUTOR_ERR_ARGUMENT, "not a regular file"},
      {6, MAELYS_EXECUTOR_ERR_NOT_FOUND, "No such file"},
  };
  char absent[200];
  snprintf(absent, sizeof absent, "%s/absent.mir", t->dir);
  const char* paths[] = {good, link, loose, bad, big, fifo, absent};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    maelys_executor_plan_t* plan = NULL;
    char* error = NULL;
    maelys_executor_result_t got = maelys_warden_policy_plan_from_file(
        paths[cases[i].which], h, &t->host, NULL, &plan, &error);
    expect_failure(got, cases[i].want, error, paths[cases[i].which],
                   cases[i].needle);
    assert_null(plan);
  }
  maelys_executor_plan_t* plan = NULL;
  assert_int_equal(maelys_warden_policy_plan_from_file(good, NULL, &t->host,
                                                       NULL, &plan, NULL),
                   MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_int_equal(
      maelys_warden_policy_plan_from_fd(-1, h, &t->host, NULL, &plan, NULL),
      MAELYS_EXECUTOR_ERR_ARGUMENT);
  maelys_mir_destroy(mir);
  maelys_warden_policy_handshake_destroy(h);
  assert_int_equal(maelys_executor_destroy(ex, NULL), 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_every_rule_copied, tree_setup,
                                      tree_teardown),
      cmocka_unit_test_setup_teardown(test_absent_deny_never_vanishes,
                                      tree_setup, tree_teardown),
      cmocka_unit_test_setup_teardown(test_source_mir_and_host_required,
                                      tree_setup, tree_teardown),
      cmocka_unit_test_setup_teardown(test_exact_directory_rejected, tree_setup,
                                      tree_teardown),
      cmocka_unit_test_setup_teardown(test_mediated_fd4_and_egress, tree_setup,
                                      tree_teardown),
      cmocka_unit_test_setup_teardown(test_other_mediator_refused, tree_setup,
                                      tree_teardown),
      cmocka_unit_test_setup_teardown(test_root_and_direct_network, tree_setup,
                                      tree_teardown),
      cmocka_unit_test(test_library_capabilities),
      cmocka_unit_test_setup_teardown(
          test_missing_capability_refused_by_the_library, tree_setup,
          tree_teardown),
      cmocka_unit_test_setup_teardown(test_host_context_errors, tree_setup,
                                      tree_teardown),
      cmocka_unit_test_setup_teardown(test_policy_file_refusals, tree_setup,
                                      tree_teardown),
  };
  return cmocka_run_group_tests_name("warden-policy glue", tests, NULL, NULL);
}
