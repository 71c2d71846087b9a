/*
 * The ExecutionBoundary's checks and the expansion computation, as pure
 * functions over an in-memory filesystem: "..", symbolic links (in and out
 * of the sandbox's view, loops), a DENY inside a writable tree, new files,
 * paths the backend never binds, the network, merging, and that applying an
 * expansion makes a new sealed plan and never touches the old one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "orch-internal.h"

typedef struct node {
  const char* path;
  orch_kind_t kind;
  const char* target;
} node_t;

static const node_t tree[] = {
    {"/ws", ORCH_DIRECTORY, NULL},
    {"/ws/a.txt", ORCH_FILE, NULL},
    {"/ws/secret", ORCH_DIRECTORY, NULL},
    {"/ws/secret/key", ORCH_FILE, NULL},
    {"/ws/link-out", ORCH_SYMLINK, "/outside"},
    {"/ws/link-rel", ORCH_SYMLINK, "../outside/exist.txt"},
    {"/ws/link-in", ORCH_SYMLINK, "a.txt"},
    {"/ws/loop", ORCH_SYMLINK, "loop"},
    {"/ws/sock", ORCH_OTHER, NULL},
    {"/outside", ORCH_DIRECTORY, NULL},
    {"/outside/exist.txt", ORCH_FILE, NULL},
    {"/outside/sub", ORCH_DIRECTORY, NULL},
    {"/outside/to-ws", ORCH_SYMLINK, "/ws/a.txt"},
    {"/usr", ORCH_DIRECTORY, NULL},
    {"/usr/bin", ORCH_DIRECTORY, NULL},
    {"/usr/bin/python3", ORCH_FILE, NULL},
    {"/tmp", ORCH_DIRECTORY, NULL},
    {"/home", ORCH_DIRECTORY, NULL},
    {"/home/u", ORCH_DIRECTORY, NULL},
    {"/data", ORCH_DIRECTORY, NULL},
    {"/data/ro.txt", ORCH_FILE, NULL},
};

static const node_t* find(const char* p) {
  if (strcmp(p, "/") == 0) {
    static const node_t root = {"/", ORCH_DIRECTORY, NULL};
    return &root;
  }
  for (size_t i = 0; i < sizeof tree / sizeof tree[0]; i++)
    if (strcmp(tree[i].path, p) == 0)
      return &tree[i];
  return NULL;
}

static orch_kind_t fake_kind(void* ctx, const char* p) {
  (void)ctx;
  const node_t* n = find(p);
  return n ? n->kind : ORCH_ABSENT;
}

static int fake_readlink(void* ctx, const char* p, char* buf, size_t size) {
  (void)ctx;
  const node_t* n = find(p);
  if (n == NULL || n->target == NULL)
    return -1;
  snprintf(buf, size, "%s", n->target);
  return 0;
}

static const maelys__orch_fs_t fake_fs = {fake_kind, fake_readlink, NULL};

/* Root read-only; /usr bound read-only; a private /tmp; /ws writable with
 * /ws/secret denied; /data/ro.txt readable; no network. */
static maelys_orchestrator_boundary_t* make_boundary(void) {
  maelys_executor_plan_t* plan = NULL;
  assert_int_equal(maelys_executor_plan_create(&plan, NULL), 0);
  assert_int_equal(maelys_executor_plan_set_root(
                       plan, MAELYS_EXECUTOR_ROOT_READONLY, 0, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_bind(plan, "/usr", "/usr", 0,
                                                 MAELYS_EXECUTOR_MISSING_FAIL,
                                                 NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_tmpfs(plan, "/tmp", 1 << 20, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       plan, "/ws", MAELYS_EXECUTOR_ACCESS_WRITE,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       plan, "/ws/secret", MAELYS_EXECUTOR_ACCESS_DENY,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       plan, "/data/ro.txt", MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_LITERAL_FILE, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_set_network(
                       plan, MAELYS_EXECUTOR_NETWORK_NONE, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_seal(plan, NULL), 0);
  maelys_orchestrator_boundary_t* b = NULL;
  assert_int_equal(
      maelys_orchestrator_boundary_create(plan, "bubblewrap", &b, NULL), 0);
  maelys__orch_boundary_set_fs(b, &fake_fs);
  return b;
}

/* Checks `path` for `write` (or read) and returns the check. */
static maelys_orchestrator_check_t* ask(maelys_orchestrator_boundary_t* b,
                                        int write, const char* path) {
  maelys_orchestrator_check_t* c = NULL;
  char* err = NULL;
  maelys_executor_result_t r =
      write ? maelys_orchestrator_boundary_allows_write(b, path, &c, &err)
            : maelys_orchestrator_boundary_allows_read(b, path, &c, &err);
  if (r != MAELYS_EXECUTOR_OK)
    fail_msg("check %s: %s", path, err);
  return c;
}

static void expect(maelys_orchestrator_boundary_t* b, int write,
                   const char* path, maelys_orchestrator_verdict_t want,
                   const char* reason_has) {
  maelys_orchestrator_check_t* c = ask(b, write, path);
  if (maelys_orchestrator_check_verdict(c) != want)
    fail_msg("%s %s: verdict %d, want %d (%s)", write ? "write" : "read", path,
             maelys_orchestrator_check_verdict(c), want,
             maelys_orchestrator_check_reason(c));
  if (reason_has != NULL &&
      strstr(maelys_orchestrator_check_reason(c), reason_has) == NULL)
    fail_msg("%s: reason '%s' lacks '%s'", path,
             maelys_orchestrator_check_reason(c), reason_has);
  assert_true((maelys_orchestrator_check_expansion(c) != NULL) ==
              (want == MAELYS_ORCHESTRATOR_BOUNDARY_REQUIRED));
  maelys_orchestrator_check_destroy(c);
}

/* The expansion of `path` has exactly one grant: `grant` with `access` and
 * `scope`. */
static void expect_grant(maelys_orchestrator_boundary_t* b, int write,
                         const char* path, const char* grant,
                         const char* scope) {
  maelys_orchestrator_check_t* c = ask(b, write, path);
  assert_int_equal(maelys_orchestrator_check_verdict(c),
                   MAELYS_ORCHESTRATOR_BOUNDARY_REQUIRED);
  const maelys_orchestrator_expansion_t* e =
      maelys_orchestrator_check_expansion(c);
  assert_int_equal(e->grant_count, 1);
  assert_string_equal(e->grants[0].path, grant);
  assert_int_equal(e->grants[0].access, write ? ORCH_WRITE : ORCH_READ);
  assert_string_equal(e->grants[0].scope == MAELYS_EXECUTOR_SCOPE_LITERAL_FILE
                          ? "literal-file"
                          : "recursive-directory",
                      scope);
  assert_false(e->network_inherit);
  assert_non_null(strstr(maelys_orchestrator_expansion_json(e), grant));
  assert_int_equal(
      strncmp(maelys_orchestrator_expansion_digest(e), "sha256:", 7), 0);
  maelys_orchestrator_check_destroy(c);
}

static void test_inside_the_plan(void** state) {
  (void)state;
  maelys_orchestrator_boundary_t* b = make_boundary();
  expect(b, 1, "/ws/a.txt", MAELYS_ORCHESTRATOR_ALLOWED, NULL);
  expect(b, 1, "/ws/new.txt", MAELYS_ORCHESTRATOR_ALLOWED, NULL);
  expect(b, 1, "/ws/./deep/../new.txt", MAELYS_ORCHESTRATOR_REFUSED,
         "does not exist"); /* '..' after an absent directory: ENOENT */
  expect(b, 0, "/usr/bin/python3", MAELYS_ORCHESTRATOR_ALLOWED, NULL);
  expect(b, 0, "/data/ro.txt", MAELYS_ORCHESTRATOR_ALLOWED, NULL);
  expect(b, 1, "/tmp/scratch", MAELYS_ORCHESTRATOR_ALLOWED, "private");
  /* A link inside the workspace to a file inside it. */
  expect(b, 1, "/ws/link-in", MAELYS_ORCHESTRATOR_ALLOWED, "/ws/a.txt");
  maelys_orchestrator_boundary_destroy(b);
}

static void test_dot_dot(void** state) {
  (void)state;
  maelys_orchestrator_boundary_t* b = make_boundary();
  /* ".." leaves the workspace: the check answers for /outside. */
  expect_grant(b, 1, "/ws/../outside/new.txt", "/outside",
               "recursive-directory");
  expect_grant(b, 1, "/ws/../../../outside/exist.txt", "/outside/exist.txt",
               "literal-file");
  /* ".." back into the workspace stays allowed. */
  expect(b, 1, "/usr/../ws/a.txt", MAELYS_ORCHESTRATOR_ALLOWED, NULL);
  maelys_orchestrator_boundary_destroy(b);
}

static void test_symbolic_links(void** state) {
  (void)state;
  maelys_orchestrator_boundary_t* b = make_boundary();
  /* A link in the writable workspace pointing outside: the grant names the
   * resolved target, never the link (which the payload could swap). */
  maelys_orchestrator_check_t* c = ask(b, 1, "/ws/link-out/new.txt");
  assert_int_equal(maelys_orchestrator_check_verdict(c),
                   MAELYS_ORCHESTRATOR_BOUNDARY_REQUIRED);
  assert_string_equal(maelys_orchestrator_check_expansion(c)->grants[0].path,
                      "/outside");
  assert_non_null(strstr(maelys_orchestrator_check_reason(c), "/outside"));
  maelys_orchestrator_check_destroy(c);
  /* A relative link out of the workspace to an existing file. */
  expect_grant(b, 1, "/ws/link-rel", "/outside/exist.txt", "literal-file");
  /* A link outside the view that points back inside: refused, with the
   * path to use instead (a link is never bound). */
  expect(b, 1, "/outside/to-ws", MAELYS_ORCHESTRATOR_REFUSED, "/ws/a.txt");
  expect(b, 1, "/ws/loop", MAELYS_ORCHESTRATOR_REFUSED, "symbolic links");
  maelys_orchestrator_boundary_destroy(b);
}

static void test_deny_inside_writable_tree(void** state) {
  (void)state;
  maelys_orchestrator_boundary_t* b = make_boundary();
  expect(b, 1, "/ws/secret/key", MAELYS_ORCHESTRATOR_REFUSED, "DENY");
  expect(b, 0, "/ws/secret/key", MAELYS_ORCHESTRATOR_REFUSED, "DENY");
  expect(b, 1, "/ws/secret/new", MAELYS_ORCHESTRATOR_REFUSED, "DENY");
  /* Through the denied directory and back out: the kernel needs search
   * permission on it for "..", which a mode-000 overlay withholds. */
  expect(b, 1, "/ws/secret/../a.txt", MAELYS_ORCHESTRATOR_REFUSED, "DENY");
  maelys_orchestrator_boundary_destroy(b);
}

static void test_smallest_expansion(void** state) {
  (void)state;
  maelys_orchestrator_boundary_t* b = make_boundary();
  /* An existing file: that file only. A new file: its nearest existing
   * directory (a mount cannot grant what does not exist). A directory: it
   * and its contents. */
  expect_grant(b, 1, "/outside/exist.txt", "/outside/exist.txt",
               "literal-file");
  expect_grant(b, 1, "/outside/sub/new/deeper.txt", "/outside/sub",
               "recursive-directory");
  expect_grant(b, 1, "/outside/sub", "/outside/sub", "recursive-directory");
  expect_grant(b, 0, "/outside/exist.txt", "/outside/exist.txt",
               "literal-file");
  /* A readable file made writable: the grant upgrades that rule. */
  expect_grant(b, 1, "/data/ro.txt", "/data/ro.txt", "literal-file");
  /* Read-only runtime: a write there is a grant on the directory. */
  expect_grant(b, 1, "/usr/bin/newtool", "/usr/bin", "recursive-directory");
  maelys_orchestrator_boundary_destroy(b);
}

static void test_not_expressible(void** state) {
  (void)state;
  maelys_orchestrator_boundary_t* b = make_boundary();
  expect(b, 1, "/home/u/new.txt", MAELYS_ORCHESTRATOR_REFUSED, "never binds");
  expect(b, 1, "/newdir/file", MAELYS_ORCHESTRATOR_REFUSED, "never binds");
  expect(b, 0, "/outside/missing.txt", MAELYS_ORCHESTRATOR_REFUSED,
         "nothing to read");
  expect(b, 1, "/ws/sock/x", MAELYS_ORCHESTRATOR_REFUSED, "not a directory");
  expect(b, 1, "relative", MAELYS_ORCHESTRATOR_REFUSED, "absolute");
  expect(b, 1, "/proc/self/mem", MAELYS_ORCHESTRATOR_REFUSED, NULL);
  maelys_orchestrator_boundary_destroy(b);
}

static void test_network(void** state) {
  (void)state;
  maelys_orchestrator_boundary_t* b = make_boundary();
  maelys_orchestrator_check_t* c = NULL;
  assert_int_equal(maelys_orchestrator_boundary_allows_connect(b, "127.0.0.1",
                                                               443, &c, NULL),
                   0);
  assert_int_equal(maelys_orchestrator_check_verdict(c),
                   MAELYS_ORCHESTRATOR_BOUNDARY_REQUIRED);
  const maelys_orchestrator_expansion_t* e =
      maelys_orchestrator_check_expansion(c);
  assert_true(e->network_inherit);
  assert_int_equal(e->grant_count, 0);
  /* The event states exactly what will be granted: every destination. */
  assert_non_null(strstr(maelys_orchestrator_expansion_json(e), "inherit"));
  assert_non_null(strstr(maelys_orchestrator_check_reason(c), "whole network"));
  maelys_orchestrator_check_destroy(c);
  maelys_orchestrator_boundary_destroy(b);
}

static void test_merge_and_apply(void** state) {
  (void)state;
  maelys_orchestrator_boundary_t* b = make_boundary();
  orch_declared_t d[] = {{2, "/outside/sub/x", 0},
                         {2, "/outside/new.txt", 0},
                         {1, "/outside/exist.txt", 0},
                         {2, "/ws/a.txt", 0}};
  maelys_orchestrator_check_t* c = NULL;
  assert_int_equal(maelys__orch_check(b, d, 4, NULL, &c, NULL), 0);
  assert_int_equal(maelys_orchestrator_check_verdict(c),
                   MAELYS_ORCHESTRATOR_BOUNDARY_REQUIRED);
  const maelys_orchestrator_expansion_t* e =
      maelys_orchestrator_check_expansion(c);
  /* /outside covers /outside/sub and the read of exist.txt. */
  assert_int_equal(e->grant_count, 1);
  assert_string_equal(e->grants[0].path, "/outside");
  char* before = NULL;
  const maelys_executor_plan_t* base = maelys_orchestrator_boundary_plan(b);
  maelys_executor_plan_to_json(base, &before, NULL);
  char* base_digest = strdup(maelys_orchestrator_boundary_digest(b));
  maelys_executor_plan_t* next = NULL;
  assert_int_equal(
      maelys__orch_apply(base, e,
                         "sha256:00000000000000000000000000000000000000000000"
                         "00000000000000000000",
                         &next, NULL),
      0);
  assert_true(maelys_executor_plan_is_sealed(next));
  assert_int_equal(maelys_executor_plan_network(next),
                   MAELYS_EXECUTOR_NETWORK_NONE);
  char* after = NULL;
  maelys_executor_plan_to_json(base, &after, NULL);
  /* The sealed plan the decision was taken against is untouched. */
  assert_string_equal(before, after);
  char* nd = NULL;
  maelys_executor_plan_digest(next, &nd, NULL);
  assert_string_not_equal(nd, base_digest);
  json_t* rec = json_pack("{s:s}", "id", "d1");
  maelys__orch_boundary_record(b, rec, next);
  assert_string_equal(maelys_orchestrator_boundary_digest(b), nd);
  maelys_orchestrator_check_destroy(c);
  c = NULL;
  /* Under the new plan every declared access is allowed. */
  assert_int_equal(maelys__orch_check(b, d, 4, NULL, &c, NULL), 0);
  assert_int_equal(maelys_orchestrator_check_verdict(c),
                   MAELYS_ORCHESTRATOR_ALLOWED);
  maelys_orchestrator_check_destroy(c);
  char* record = NULL;
  maelys_orchestrator_boundary_to_json(b, &record, NULL);
  assert_non_null(strstr(record, base_digest));
  assert_non_null(strstr(record, nd));
  maelys_executor_string_free(record);
  maelys_executor_string_free(before);
  maelys_executor_string_free(after);
  maelys_executor_string_free(nd);
  free(base_digest);
  maelys_orchestrator_boundary_destroy(b);
}

static void test_refusal_wins(void** state) {
  (void)state;
  maelys_orchestrator_boundary_t* b = make_boundary();
  orch_declared_t d[] = {{2, "/outside/new.txt", 0}, {2, "/ws/secret/key", 0}};
  maelys_orchestrator_check_t* c = NULL;
  assert_int_equal(maelys__orch_check(b, d, 2, NULL, &c, NULL), 0);
  assert_int_equal(maelys_orchestrator_check_verdict(c),
                   MAELYS_ORCHESTRATOR_REFUSED);
  assert_null(maelys_orchestrator_check_expansion(c));
  char* json = NULL;
  assert_int_equal(maelys_orchestrator_check_to_json(c, &json, NULL), 0);
  assert_non_null(strstr(json, "\"refused\""));
  maelys_executor_string_free(json);
  maelys_orchestrator_check_destroy(c);
  maelys_orchestrator_boundary_destroy(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_inside_the_plan),
      cmocka_unit_test(test_dot_dot),
      cmocka_unit_test(test_symbolic_links),
      cmocka_unit_test(test_deny_inside_writable_tree),
      cmocka_unit_test(test_smallest_expansion),
      cmocka_unit_test(test_not_expressible),
      cmocka_unit_test(test_network),
      cmocka_unit_test(test_merge_and_apply),
      cmocka_unit_test(test_refusal_wins),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
