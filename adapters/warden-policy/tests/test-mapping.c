/*
 * The pure mapping of the Warden Policy adapter (seeds/001, issue 12): one
 * test per row of the mapping — capabilities both ways, each rule kind, the
 * root, the network with both mediator identifiers and a wrong one, the
 * digest, the rejections. cmocka, no fork, no loop: the decisions are built
 * by hand and the lowered plan is read back through its JSON form.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "maelys/warden_policy.h"

#define DIGEST_A                                                               \
  "7264c09c287103d64585a1fad2a214728f0e1cc90b5f8a329d0a9512c4a9f42d"
#define DIGEST_B                                                               \
  "136db2b0b8fc837b8744d922dddb9a5d1f6a48868ebd3ca501e995c6fbf8d52b"

/* ------------------------------------------------------------ helpers */

static maelys_warden_policy_decision_t base(void) {
  maelys_warden_policy_decision_t d;
  memset(&d, 0, sizeof d);
  d.network = MAELYS_WARDEN_POLICY_NETWORK_NONE;
  d.root = MAELYS_WARDEN_POLICY_ROOT_READ_ONLY;
  d.mir_digest = DIGEST_A;
  return d;
}

static maelys_warden_policy_rule_t rule(maelys_warden_policy_access_t a,
                                        maelys_warden_policy_scope_t s,
                                        maelys_warden_policy_node_t n,
                                        const char* path) {
  maelys_warden_policy_rule_t r = {a, s, n, path};
  return r;
}

/* Lowers and expects success; returns the plan's JSON (decref it). */
static json_t* lower_ok(const maelys_warden_policy_decision_t* d,
                        const maelys_warden_policy_options_t* o,
                        maelys_executor_plan_t** keep) {
  maelys_executor_plan_t* plan = NULL;
  char* error = NULL;
  maelys_executor_result_t r = maelys_warden_policy_lower(d, o, &plan, &error);
  if (r != MAELYS_EXECUTOR_OK)
    fail_msg("lowering failed: %s: %s", maelys_executor_result_name(r),
             error ? error : "");
  assert_non_null(plan);
  assert_true(maelys_executor_plan_is_sealed(plan));
  char* text = NULL;
  assert_int_equal(maelys_executor_plan_to_json(plan, &text, NULL), 0);
  json_error_t je;
  json_t* doc = json_loads(text, 0, &je);
  assert_non_null(doc);
  maelys_executor_string_free(text);
  if (keep != NULL)
    *keep = plan;
  else
    maelys_executor_plan_destroy(plan);
  return doc;
}

/* Lowers and expects `want`, with a diagnostic holding every `needle`. */
static void lower_fails(const maelys_warden_policy_decision_t* d,
                        const maelys_warden_policy_options_t* o,
                        maelys_executor_result_t want, ...) {
  maelys_executor_plan_t* plan = (maelys_executor_plan_t*)1;
  char* error = NULL;
  maelys_executor_result_t r = maelys_warden_policy_lower(d, o, &plan, &error);
  if (r != want)
    fail_msg("expected %s, got %s: %s", maelys_executor_result_name(want),
             maelys_executor_result_name(r), error ? error : "");
  assert_null(plan);
  assert_non_null(error);
  const char* text = error ? error : "";
  va_list ap;
  va_start(ap, want);
  for (const char* needle = va_arg(ap, const char*); needle != NULL;
       needle = va_arg(ap, const char*))
    if (strstr(text, needle) == NULL)
      fail_msg("diagnostic '%s' lacks '%s'", text, needle);
  va_end(ap);
  maelys_executor_error_free(error);
}

static json_t* only_rule(json_t* doc) {
  json_t* rules = json_object_get(doc, "rules");
  assert_int_equal(json_array_size(rules), 1);
  return json_array_get(rules, 0);
}

static const char* str(json_t* o, const char* key) {
  const char* s = json_string_value(json_object_get(o, key));
  assert_non_null(s);
  return s;
}

static uint64_t required(const maelys_executor_plan_t* plan) {
  uint64_t need = 0;
  assert_int_equal(
      maelys_executor_plan_required_capabilities(plan, &need, NULL), 0);
  return need;
}

static uint64_t convert(uint64_t mask) {
  uint64_t caps = UINT64_MAX;
  char* error = NULL;
  maelys_executor_result_t r =
      maelys_warden_policy_capabilities_from_executor(mask, &caps, &error);
  if (r != MAELYS_EXECUTOR_OK)
    fail_msg("conversion failed: %s", error ? error : "");
  return caps;
}

/* ---------------------------------------------------- capabilities: in */

static void test_posix_maps_to_nothing(void** state) {
  (void)state;
  /* The POSIX backend proves no capability at all. */
  assert_int_equal(convert(0), 0);
}

static void test_filesystem_bits(void** state) {
  (void)state;
  assert_int_equal(convert(MAELYS_BACKEND_CAP_FILESYSTEM_READ),
                   MAELYS_WARDEN_POLICY_CAP_FS_READ);
  assert_int_equal(convert(MAELYS_BACKEND_CAP_FILESYSTEM_WRITE),
                   MAELYS_WARDEN_POLICY_CAP_FS_WRITE);
  assert_int_equal(convert(MAELYS_BACKEND_CAP_FILESYSTEM_DENY),
                   MAELYS_WARDEN_POLICY_CAP_FS_DENY);
}

static void test_network_none_needs_both_halves(void** state) {
  (void)state;
  /* Invariant 9: the namespace alone is a distinct, weaker capability. */
  assert_int_equal(convert(MAELYS_BACKEND_CAP_NETWORK_NAMESPACE), 0);
  assert_int_equal(convert(MAELYS_BACKEND_CAP_NETWORK_NAMESPACE |
                           MAELYS_BACKEND_CAP_SECCOMP),
                   0);
  assert_int_equal(convert(MAELYS_BACKEND_CAP_NETWORK_NONE), 0);
  assert_int_equal(convert(MAELYS_BACKEND_CAP_NETWORK_NONE |
                           MAELYS_BACKEND_CAP_NETWORK_NAMESPACE),
                   MAELYS_WARDEN_POLICY_CAP_NETWORK_NONE);
}

static void test_network_mediated_either_frontend(void** state) {
  (void)state;
  assert_int_equal(convert(MAELYS_BACKEND_CAP_NETWORK_MEDIATED_FD4),
                   MAELYS_WARDEN_POLICY_CAP_NETWORK_MEDIATED);
  assert_int_equal(convert(MAELYS_BACKEND_CAP_NETWORK_MEDIATED_EGRESS),
                   MAELYS_WARDEN_POLICY_CAP_NETWORK_MEDIATED);
  assert_int_equal(convert(MAELYS_BACKEND_CAP_NETWORK_MEDIATED_FD4 |
                           MAELYS_BACKEND_CAP_NETWORK_MEDIATED_EGRESS),
                   MAELYS_WARDEN_POLICY_CAP_NETWORK_MEDIATED);
}

static void test_network_direct_needs_a_confining_root(void** state) {
  (void)state;
  assert_int_equal(convert(MAELYS_BACKEND_CAP_ROOT_READONLY),
                   MAELYS_WARDEN_POLICY_CAP_NETWORK_DIRECT);
}

static void test_process_tree_is_confinement(void** state) {
  (void)state;
  /* MIR process_tree_required is inheritance of the confinement; the
   * Executor's PROCESS_TREE lifecycle bit never gives it. */
  assert_int_equal(convert(MAELYS_BACKEND_CAP_PROCESS_TREE), 0);
  assert_int_equal(convert(MAELYS_BACKEND_CAP_PROCESS_CONFINEMENT),
                   MAELYS_WARDEN_POLICY_CAP_PROCESS_TREE);
}

static void test_root_ephemeral_write_bit(void** state) {
  (void)state;
  assert_int_equal(convert(MAELYS_BACKEND_CAP_ROOT_EPHEMERAL_WRITE),
                   MAELYS_WARDEN_POLICY_CAP_ROOT_EPHEMERAL_WRITE);
}

static void test_bits_without_a_portable_meaning(void** state) {
  (void)state;
  assert_int_equal(
      convert(
          MAELYS_BACKEND_CAP_SECCOMP | MAELYS_BACKEND_CAP_USER_NAMESPACE |
          MAELYS_BACKEND_CAP_PID_NAMESPACE |
          MAELYS_BACKEND_CAP_MOUNT_NAMESPACE | MAELYS_BACKEND_CAP_TMPFS_SIZE |
          MAELYS_BACKEND_CAP_DISABLE_USERNS | MAELYS_BACKEND_CAP_UNPRIVILEGED),
      0);
}

static void test_every_known_bit(void** state) {
  (void)state;
  assert_int_equal(convert(MAELYS_BACKEND_CAP_ALL),
                   MAELYS_WARDEN_POLICY_CAP_ALL);
}

static void test_unknown_executor_bit_refused(void** state) {
  (void)state;
  uint64_t caps = 99;
  char* error = NULL;
  assert_int_equal(maelys_warden_policy_capabilities_from_executor(
                       MAELYS_BACKEND_CAP_FILESYSTEM_READ | (UINT64_C(1) << 62),
                       &caps, &error),
                   MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_int_equal(caps, 0);
  assert_non_null(strstr(error, "bit 62"));
  maelys_executor_error_free(error);
  /* A diagnostic slot that is not empty on entry is refused. */
  char* busy = "x";
  assert_int_equal(
      maelys_warden_policy_capabilities_from_executor(0, &caps, &busy),
      MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_int_equal(
      maelys_warden_policy_capabilities_from_executor(0, NULL, NULL),
      MAELYS_EXECUTOR_ERR_ARGUMENT);
}

static void test_capability_names(void** state) {
  (void)state;
  static const char* const names[] = {"fs-read",        "fs-write",
                                      "fs-deny",        "network-none",
                                      "network-direct", "network-mediated",
                                      "process-tree",   "root-ephemeral-write"};
  for (int b = 0; b < 8; b++)
    assert_string_equal(maelys_warden_policy_capability_name(UINT64_C(1) << b),
                        names[b]);
  assert_null(maelys_warden_policy_capability_name(UINT64_C(1) << 8));
  assert_null(maelys_warden_policy_capability_name(3));
  assert_null(maelys_warden_policy_capability_name(0));
}

/* ------------------------------------------------------ rules: lowering */

static void check_one_rule(maelys_warden_policy_access_t a,
                           maelys_warden_policy_scope_t s,
                           maelys_warden_policy_node_t n, const char* access,
                           const char* scope, uint64_t need) {
  maelys_warden_policy_decision_t d = base();
  maelys_warden_policy_rule_t r = rule(a, s, n, "/srv/data");
  d.rules = &r;
  d.rule_count = 1;
  maelys_executor_plan_t* plan = NULL;
  json_t* doc = lower_ok(&d, NULL, &plan);
  json_t* only = only_rule(doc);
  assert_string_equal(str(only, "path"), "/srv/data");
  assert_string_equal(str(only, "access"), access);
  assert_string_equal(str(only, "scope"), scope);
  assert_true((required(plan) & need) == need);
  json_decref(doc);
  maelys_executor_plan_destroy(plan);
}

static void test_read_tree_directory_is_a_recursive_bind(void** state) {
  (void)state;
  check_one_rule(MAELYS_WARDEN_POLICY_ACCESS_READ,
                 MAELYS_WARDEN_POLICY_SCOPE_TREE,
                 MAELYS_WARDEN_POLICY_NODE_DIRECTORY, "read",
                 "recursive-directory", MAELYS_BACKEND_CAP_FILESYSTEM_READ);
}

static void test_write_tree_directory_is_a_writable_bind(void** state) {
  (void)state;
  check_one_rule(MAELYS_WARDEN_POLICY_ACCESS_WRITE,
                 MAELYS_WARDEN_POLICY_SCOPE_TREE,
                 MAELYS_WARDEN_POLICY_NODE_DIRECTORY, "write",
                 "recursive-directory", MAELYS_BACKEND_CAP_FILESYSTEM_WRITE);
}

static void test_exact_file_is_a_literal_file(void** state) {
  (void)state;
  check_one_rule(MAELYS_WARDEN_POLICY_ACCESS_READ,
                 MAELYS_WARDEN_POLICY_SCOPE_EXACT,
                 MAELYS_WARDEN_POLICY_NODE_FILE, "read", "literal-file",
                 MAELYS_BACKEND_CAP_FILESYSTEM_READ);
  check_one_rule(MAELYS_WARDEN_POLICY_ACCESS_WRITE,
                 MAELYS_WARDEN_POLICY_SCOPE_EXACT,
                 MAELYS_WARDEN_POLICY_NODE_FILE, "write", "literal-file",
                 MAELYS_BACKEND_CAP_FILESYSTEM_WRITE);
}

static void test_tree_on_a_file_is_the_file(void** state) {
  (void)state;
  check_one_rule(MAELYS_WARDEN_POLICY_ACCESS_READ,
                 MAELYS_WARDEN_POLICY_SCOPE_TREE,
                 MAELYS_WARDEN_POLICY_NODE_FILE, "read", "literal-file",
                 MAELYS_BACKEND_CAP_FILESYSTEM_READ);
}

static void test_deny_is_the_final_overlay(void** state) {
  (void)state;
  check_one_rule(MAELYS_WARDEN_POLICY_ACCESS_DENY,
                 MAELYS_WARDEN_POLICY_SCOPE_TREE,
                 MAELYS_WARDEN_POLICY_NODE_DIRECTORY, "deny",
                 "recursive-directory", MAELYS_BACKEND_CAP_FILESYSTEM_DENY);
  check_one_rule(MAELYS_WARDEN_POLICY_ACCESS_DENY,
                 MAELYS_WARDEN_POLICY_SCOPE_EXACT,
                 MAELYS_WARDEN_POLICY_NODE_FILE, "deny", "literal-file",
                 MAELYS_BACKEND_CAP_FILESYSTEM_DENY);
}

static void test_literal_directory_rejected(void** state) {
  (void)state;
  static const maelys_warden_policy_access_t accesses[] = {
      MAELYS_WARDEN_POLICY_ACCESS_READ, MAELYS_WARDEN_POLICY_ACCESS_WRITE,
      MAELYS_WARDEN_POLICY_ACCESS_DENY};
  static const char* const names[] = {"read exact", "write exact",
                                      "deny exact"};
  for (int i = 0; i < 3; i++) {
    maelys_warden_policy_decision_t d = base();
    maelys_warden_policy_rule_t r[2] = {
        rule(MAELYS_WARDEN_POLICY_ACCESS_READ, MAELYS_WARDEN_POLICY_SCOPE_TREE,
             MAELYS_WARDEN_POLICY_NODE_DIRECTORY, "/srv"),
        rule(accesses[i], MAELYS_WARDEN_POLICY_SCOPE_EXACT,
             MAELYS_WARDEN_POLICY_NODE_DIRECTORY, "/srv/dir")};
    d.rules = r;
    d.rule_count = 2;
    lower_fails(&d, NULL, MAELYS_EXECUTOR_ERR_UNSUPPORTED, names[i],
                "'/srv/dir'", "literal-directory", NULL);
  }
}

static void test_absent_deny_is_create_protection(void** state) {
  (void)state;
  maelys_warden_policy_decision_t d = base();
  maelys_warden_policy_rule_t r =
      rule(MAELYS_WARDEN_POLICY_ACCESS_DENY, MAELYS_WARDEN_POLICY_SCOPE_TREE,
           MAELYS_WARDEN_POLICY_NODE_ABSENT, "/srv/ws/.git");
  d.rules = &r;
  d.rule_count = 1;
  lower_fails(&d, NULL, MAELYS_EXECUTOR_ERR_UNSUPPORTED, "deny tree",
              "/srv/ws/.git", "create-protection", NULL);
}

static void test_absent_grant_refused(void** state) {
  (void)state;
  maelys_warden_policy_decision_t d = base();
  maelys_warden_policy_rule_t r =
      rule(MAELYS_WARDEN_POLICY_ACCESS_READ, MAELYS_WARDEN_POLICY_SCOPE_TREE,
           MAELYS_WARDEN_POLICY_NODE_ABSENT, "/srv/gone");
  d.rules = &r;
  d.rule_count = 1;
  lower_fails(&d, NULL, MAELYS_EXECUTOR_ERR_NOT_FOUND, "/srv/gone",
              "no longer exists", NULL);
}

static void test_unknown_rule_values_refused(void** state) {
  (void)state;
  maelys_warden_policy_decision_t d = base();
  maelys_warden_policy_rule_t r =
      rule((maelys_warden_policy_access_t)4, MAELYS_WARDEN_POLICY_SCOPE_TREE,
           MAELYS_WARDEN_POLICY_NODE_DIRECTORY, "/srv");
  d.rules = &r;
  d.rule_count = 1;
  lower_fails(&d, NULL, MAELYS_EXECUTOR_ERR_ARGUMENT, "unknown access 4",
              "/srv", NULL);
  r = rule(MAELYS_WARDEN_POLICY_ACCESS_READ, (maelys_warden_policy_scope_t)9,
           MAELYS_WARDEN_POLICY_NODE_DIRECTORY, "/srv");
  lower_fails(&d, NULL, MAELYS_EXECUTOR_ERR_ARGUMENT, "unknown scope 9", NULL);
  r = rule(MAELYS_WARDEN_POLICY_ACCESS_READ, MAELYS_WARDEN_POLICY_SCOPE_TREE,
           (maelys_warden_policy_node_t)0, "/srv");
  lower_fails(&d, NULL, MAELYS_EXECUTOR_ERR_ARGUMENT, "unknown node kind 0",
              NULL);
  r = rule(MAELYS_WARDEN_POLICY_ACCESS_READ, MAELYS_WARDEN_POLICY_SCOPE_TREE,
           MAELYS_WARDEN_POLICY_NODE_DIRECTORY, "srv/relative");
  lower_fails(&d, NULL, MAELYS_EXECUTOR_ERR_ARGUMENT, "srv/relative",
              "absolute", NULL);
  d.rules = NULL;
  lower_fails(&d, NULL, MAELYS_EXECUTOR_ERR_ARGUMENT, "no rule array", NULL);
}

static void test_one_path_merges_by_precedence(void** state) {
  (void)state;
  maelys_warden_policy_decision_t d = base();
  maelys_warden_policy_rule_t r[3] = {
      rule(MAELYS_WARDEN_POLICY_ACCESS_WRITE, MAELYS_WARDEN_POLICY_SCOPE_TREE,
           MAELYS_WARDEN_POLICY_NODE_DIRECTORY, "/srv/a"),
      rule(MAELYS_WARDEN_POLICY_ACCESS_READ, MAELYS_WARDEN_POLICY_SCOPE_TREE,
           MAELYS_WARDEN_POLICY_NODE_DIRECTORY, "/srv/a"),
      rule(MAELYS_WARDEN_POLICY_ACCESS_READ, MAELYS_WARDEN_POLICY_SCOPE_TREE,
           MAELYS_WARDEN_POLICY_NODE_DIRECTORY, "/srv/b")};
  d.rules = r;
  d.rule_count = 3;
  json_t* doc = lower_ok(&d, NULL, NULL);
  json_t* rules = json_object_get(doc, "rules");
  assert_int_equal(json_array_size(rules), 2);
  assert_string_equal(str(json_array_get(rules, 0), "path"), "/srv/a");
  assert_string_equal(str(json_array_get(rules, 0), "access"), "write");
  assert_string_equal(str(json_array_get(rules, 1), "access"), "read");
  json_decref(doc);

  /* A deny on the same path as a grant wins. */
  r[1] =
      rule(MAELYS_WARDEN_POLICY_ACCESS_DENY, MAELYS_WARDEN_POLICY_SCOPE_EXACT,
           MAELYS_WARDEN_POLICY_NODE_FILE, "/srv/f");
  r[0] = rule(MAELYS_WARDEN_POLICY_ACCESS_READ, MAELYS_WARDEN_POLICY_SCOPE_TREE,
              MAELYS_WARDEN_POLICY_NODE_FILE, "/srv/f");
  doc = lower_ok(&d, NULL, NULL);
  rules = json_object_get(doc, "rules");
  assert_int_equal(json_array_size(rules), 2);
  assert_string_equal(str(json_array_get(rules, 1), "path"), "/srv/f");
  assert_string_equal(str(json_array_get(rules, 1), "access"), "deny");
  json_decref(doc);

  /* One path seen as a directory and as a file: it changed meanwhile. */
  r[0] = rule(MAELYS_WARDEN_POLICY_ACCESS_READ, MAELYS_WARDEN_POLICY_SCOPE_TREE,
              MAELYS_WARDEN_POLICY_NODE_DIRECTORY, "/srv/f");
  lower_fails(&d, NULL, MAELYS_EXECUTOR_ERR_ARGUMENT, "'/srv/f'", "disagree",
              NULL);
}

static void test_grant_inside_deny_tree_rejected(void** state) {
  (void)state;
  maelys_warden_policy_decision_t d = base();
  maelys_warden_policy_rule_t r[2] = {
      rule(MAELYS_WARDEN_POLICY_ACCESS_DENY, MAELYS_WARDEN_POLICY_SCOPE_TREE,
           MAELYS_WARDEN_POLICY_NODE_DIRECTORY, "/home"),
      rule(MAELYS_WARDEN_POLICY_ACCESS_READ, MAELYS_WARDEN_POLICY_SCOPE_TREE,
           MAELYS_WARDEN_POLICY_NODE_DIRECTORY, "/home/me/project")};
  d.rules = r;
  d.rule_count = 2;
  lower_fails(&d, NULL, MAELYS_EXECUTOR_ERR_UNSUPPORTED, "/home/me/project",
              "inside the denied tree '/home'", NULL);
  /* The other way round (a deny inside a grant) is the usual case. */
  r[0].path = "/home/me/project/.git";
  r[1].path = "/home/me/project";
  json_t* doc = lower_ok(&d, NULL, NULL);
  assert_int_equal(json_array_size(json_object_get(doc, "rules")), 2);
  json_decref(doc);
  /* A sibling sharing a prefix is not inside. */
  r[0].path = "/home/me/pro";
  doc = lower_ok(&d, NULL, NULL);
  json_decref(doc);
}

/* ------------------------------------------------------------------ root */

static void test_root_read_only(void** state) {
  (void)state;
  maelys_warden_policy_decision_t d = base();
  maelys_executor_plan_t* plan = NULL;
  json_t* doc = lower_ok(&d, NULL, &plan);
  json_t* root = json_object_get(doc, "root");
  assert_string_equal(str(root, "disposition"), "readonly");
  assert_null(json_object_get(root, "scratch"));
  assert_true(required(plan) & MAELYS_BACKEND_CAP_ROOT_READONLY);
  json_decref(doc);
  maelys_executor_plan_destroy(plan);

  maelys_warden_policy_options_t o = {.scratch_bytes = 1 << 20};
  lower_fails(&d, &o, MAELYS_EXECUTOR_ERR_ARGUMENT, "read-only", "1048576",
              NULL);
}

static void test_root_ephemeral_write_takes_the_run_scratch(void** state) {
  (void)state;
  maelys_warden_policy_decision_t d = base();
  d.root = MAELYS_WARDEN_POLICY_ROOT_EPHEMERAL_WRITE;
  maelys_warden_policy_options_t o = {.scratch_bytes = 64u << 20};
  maelys_executor_plan_t* plan = NULL;
  json_t* doc = lower_ok(&d, &o, &plan);
  json_t* root = json_object_get(doc, "root");
  assert_string_equal(str(root, "disposition"), "ephemeral-write");
  assert_int_equal(json_integer_value(json_object_get(root, "scratch")),
                   64 << 20);
  assert_true(required(plan) & MAELYS_BACKEND_CAP_ROOT_EPHEMERAL_WRITE);
  json_decref(doc);
  maelys_executor_plan_destroy(plan);
  /* The policy carries no size, so none given is an error. */
  lower_fails(&d, NULL, MAELYS_EXECUTOR_ERR_ARGUMENT, "ephemeral-write",
              "scratch", NULL);
}

static void test_unknown_root_refused(void** state) {
  (void)state;
  maelys_warden_policy_decision_t d = base();
  d.root = (maelys_warden_policy_root_t)3;
  lower_fails(&d, NULL, MAELYS_EXECUTOR_ERR_ARGUMENT, "root mode 3", NULL);
}

/* --------------------------------------------------------------- network */

static void test_network_none(void** state) {
  (void)state;
  maelys_warden_policy_decision_t d = base();
  maelys_executor_plan_t* plan = NULL;
  json_t* doc = lower_ok(&d, NULL, &plan);
  assert_string_equal(str(json_object_get(doc, "network"), "mode"), "none");
  assert_true(required(plan) & MAELYS_BACKEND_CAP_NETWORK_NONE);
  json_decref(doc);
  maelys_executor_plan_destroy(plan);
}

static void test_network_direct_inherits(void** state) {
  (void)state;
  maelys_warden_policy_decision_t d = base();
  d.network = MAELYS_WARDEN_POLICY_NETWORK_DIRECT;
  json_t* doc = lower_ok(&d, NULL, NULL);
  assert_string_equal(str(json_object_get(doc, "network"), "mode"), "inherit");
  json_decref(doc);
}

static const maelys_warden_policy_destination_t destinations[] = {
    {MAELYS_WARDEN_POLICY_PROTOCOL_TCP, "api.github.com", 443},
    {MAELYS_WARDEN_POLICY_PROTOCOL_TCP, "github.com", 443},
    {MAELYS_WARDEN_POLICY_PROTOCOL_TCP, "github.com", 22}};

static void check_mediated(const char* mediator, uint64_t need) {
  maelys_warden_policy_decision_t d = base();
  d.network = MAELYS_WARDEN_POLICY_NETWORK_MEDIATED;
  d.destinations = destinations;
  d.destination_count = 3;
  d.mediator_id = mediator;
  maelys_executor_plan_t* plan = NULL;
  json_t* doc = lower_ok(&d, NULL, &plan);
  json_t* net = json_object_get(doc, "network");
  assert_string_equal(str(net, "mode"), "mediated");
  assert_string_equal(str(net, "mediator"), mediator);
  json_t* dests = json_object_get(net, "destinations");
  assert_int_equal(json_array_size(dests), 3);
  for (size_t i = 0; i < 3; i++) {
    json_t* o = json_array_get(dests, i);
    assert_string_equal(str(o, "host"), destinations[i].host);
    assert_int_equal(json_integer_value(json_object_get(o, "port")),
                     destinations[i].port);
  }
  assert_true(required(plan) & need);
  json_decref(doc);
  maelys_executor_plan_destroy(plan);
}

static void test_network_mediated_fd4(void** state) {
  (void)state;
  check_mediated(MAELYS_WARDEN_POLICY_FD4_MEDIATOR_ID,
                 MAELYS_BACKEND_CAP_NETWORK_MEDIATED_FD4);
}

static void test_network_mediated_egress(void** state) {
  (void)state;
  check_mediated(MAELYS_WARDEN_POLICY_EGRESS_MEDIATOR_ID,
                 MAELYS_BACKEND_CAP_NETWORK_MEDIATED_EGRESS);
}

static void test_wrong_mediator_refused(void** state) {
  (void)state;
  maelys_warden_policy_decision_t d = base();
  d.network = MAELYS_WARDEN_POLICY_NETWORK_MEDIATED;
  d.destinations = destinations;
  d.destination_count = 3;
  d.mediator_id = "corp-proxy";
  lower_fails(&d, NULL, MAELYS_EXECUTOR_ERR_DENIED, "'corp-proxy'",
              MAELYS_WARDEN_POLICY_FD4_MEDIATOR_ID,
              MAELYS_WARDEN_POLICY_EGRESS_MEDIATOR_ID, "rebound", NULL);
  d.mediator_id = NULL;
  lower_fails(&d, NULL, MAELYS_EXECUTOR_ERR_ARGUMENT, "no trusted mediator",
              NULL);
}

static void test_network_inconsistencies_refused(void** state) {
  (void)state;
  maelys_warden_policy_decision_t d = base();
  d.destinations = destinations;
  d.destination_count = 1;
  lower_fails(&d, NULL, MAELYS_EXECUTOR_ERR_ARGUMENT, "none", "dropped", NULL);
  d.destination_count = 0;
  d.mediator_id = MAELYS_WARDEN_POLICY_FD4_MEDIATOR_ID;
  lower_fails(&d, NULL, MAELYS_EXECUTOR_ERR_ARGUMENT, "mediator", "dropped",
              NULL);
  d.network = MAELYS_WARDEN_POLICY_NETWORK_MEDIATED;
  lower_fails(&d, NULL, MAELYS_EXECUTOR_ERR_ARGUMENT, "no destination", NULL);
  maelys_warden_policy_destination_t udp = {(maelys_warden_policy_protocol_t)2,
                                            "dns.example", 53};
  d.destinations = &udp;
  d.destination_count = 1;
  lower_fails(&d, NULL, MAELYS_EXECUTOR_ERR_ARGUMENT, "unknown protocol 2",
              "dns.example", NULL);
  d = base();
  d.network = (maelys_warden_policy_network_t)0;
  lower_fails(&d, NULL, MAELYS_EXECUTOR_ERR_ARGUMENT, "network mode 0", NULL);
}

/* ------------------------------------------------- digest, process, run */

static void test_digest_is_the_decision_digest(void** state) {
  (void)state;
  maelys_warden_policy_decision_t d = base();
  maelys_executor_plan_t* a = NULL;
  maelys_executor_plan_t* b = NULL;
  json_t* doc = lower_ok(&d, NULL, &a);
  assert_string_equal(str(doc, "decision_digest"), "sha256:" DIGEST_A);
  json_decref(doc);
  d.mir_digest = DIGEST_B;
  doc = lower_ok(&d, NULL, &b);
  assert_string_equal(str(doc, "decision_digest"), "sha256:" DIGEST_B);
  json_decref(doc);
  /* The plan digest binds the decision digest. */
  char* da = NULL;
  char* db = NULL;
  assert_int_equal(maelys_executor_plan_digest(a, &da, NULL), 0);
  assert_int_equal(maelys_executor_plan_digest(b, &db, NULL), 0);
  assert_string_not_equal(da, db);
  maelys_executor_string_free(da);
  maelys_executor_string_free(db);
  maelys_executor_plan_destroy(a);
  maelys_executor_plan_destroy(b);

  d.mir_digest = "sha256:" DIGEST_A;
  lower_fails(&d, NULL, MAELYS_EXECUTOR_ERR_ARGUMENT, "64 lowercase hex", NULL);
  d.mir_digest =
      "7264C09C287103D64585A1FAD2A214728F0E1CC90B5F8A329D0A9512C4A9F4"
      "2D";
  lower_fails(&d, NULL, MAELYS_EXECUTOR_ERR_ARGUMENT, "64 lowercase hex", NULL);
  d.mir_digest = NULL;
  lower_fails(&d, NULL, MAELYS_EXECUTOR_ERR_ARGUMENT, "(null)", NULL);
}

static void test_mir_process_tree_requires_confinement(void** state) {
  (void)state;
  maelys_warden_policy_decision_t d = base();
  d.process_tree_required = 1;
  maelys_executor_plan_t* plan = NULL;
  json_t* doc = lower_ok(&d, NULL, &plan);
  uint64_t need = required(plan);
  assert_true(need & MAELYS_BACKEND_CAP_PROCESS_CONFINEMENT);
  /* Never the Executor's stronger lifecycle flag. */
  assert_false(need & MAELYS_BACKEND_CAP_PROCESS_TREE);
  assert_false(
      json_boolean_value(json_object_get(doc, "process_tree_required")));
  json_decref(doc);
  maelys_executor_plan_destroy(plan);

  d.process_tree_required = 0;
  doc = lower_ok(&d, NULL, &plan);
  assert_false(required(plan) & MAELYS_BACKEND_CAP_PROCESS_CONFINEMENT);
  json_decref(doc);
  maelys_executor_plan_destroy(plan);
}

static void test_run_process_tree_is_the_lifecycle_flag(void** state) {
  (void)state;
  maelys_warden_policy_decision_t d = base();
  maelys_warden_policy_options_t o = {.process_tree_required = 1};
  maelys_executor_plan_t* plan = NULL;
  json_t* doc = lower_ok(&d, &o, &plan);
  assert_true(
      json_boolean_value(json_object_get(doc, "process_tree_required")));
  assert_true(required(plan) & MAELYS_BACKEND_CAP_PROCESS_TREE);
  assert_false(required(plan) & MAELYS_BACKEND_CAP_PROCESS_CONFINEMENT);
  json_decref(doc);
  maelys_executor_plan_destroy(plan);
}

static void test_run_mounts(void** state) {
  (void)state;
  maelys_warden_policy_decision_t d = base();
  const maelys_warden_policy_mount_t mounts[] = {
      {MAELYS_WARDEN_POLICY_MOUNT_PROC, "/proc", NULL, 0},
      {MAELYS_WARDEN_POLICY_MOUNT_DEV, "/dev", NULL, 0},
      {MAELYS_WARDEN_POLICY_MOUNT_TMPFS, "/tmp", NULL, 1 << 20},
      {MAELYS_WARDEN_POLICY_MOUNT_SYMLINK, "/lib", "usr/lib", 0},
      {MAELYS_WARDEN_POLICY_MOUNT_DIR, "/home", NULL, 0}};
  maelys_warden_policy_options_t o = {.mounts = mounts, .mount_count = 5};
  json_t* doc = lower_ok(&d, &o, NULL);
  json_t* m = json_object_get(doc, "mounts");
  assert_int_equal(json_array_size(m), 5);
  static const char* const kinds[] = {"proc", "dev", "tmpfs", "symlink", "dir"};
  for (size_t i = 0; i < 5; i++) {
    assert_string_equal(str(json_array_get(m, i), "kind"), kinds[i]);
    assert_string_equal(str(json_array_get(m, i), "destination"),
                        mounts[i].destination);
  }
  assert_string_equal(str(json_array_get(m, 3), "target"), "usr/lib");
  json_decref(doc);

  /* No kind that exposes host content is accepted from the run. */
  const maelys_warden_policy_mount_t bind = {
      (maelys_warden_policy_mount_kind_t)0, "/etc", NULL, 0};
  o.mounts = &bind;
  o.mount_count = 1;
  lower_fails(&d, &o, MAELYS_EXECUTOR_ERR_ARGUMENT, "'/etc'", "unknown kind 0",
              NULL);
  /* An Executor refusal is passed on with where it happened. */
  const maelys_warden_policy_mount_t tmp0 = {MAELYS_WARDEN_POLICY_MOUNT_TMPFS,
                                             "/tmp", NULL, 0};
  o.mounts = &tmp0;
  lower_fails(&d, &o, MAELYS_EXECUTOR_ERR_ARGUMENT, "run mount 0", NULL);
}

static void test_plan_is_new_and_sealed(void** state) {
  (void)state;
  maelys_warden_policy_decision_t d = base();
  maelys_executor_plan_t* plan = NULL;
  json_t* doc = lower_ok(&d, NULL, &plan);
  json_decref(doc);
  char* error = NULL;
  assert_int_equal(maelys_executor_plan_add_rule(
                       plan, "/etc", MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, &error),
                   MAELYS_EXECUTOR_ERR_SEALED);
  maelys_executor_error_free(error);
  maelys_executor_plan_destroy(plan);
}

static void test_bad_arguments(void** state) {
  (void)state;
  maelys_warden_policy_decision_t d = base();
  maelys_executor_plan_t* plan = NULL;
  assert_int_equal(maelys_warden_policy_lower(NULL, NULL, &plan, NULL),
                   MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_int_equal(maelys_warden_policy_lower(&d, NULL, NULL, NULL),
                   MAELYS_EXECUTOR_ERR_ARGUMENT);
  char* busy = "x";
  assert_int_equal(maelys_warden_policy_lower(&d, NULL, &plan, &busy),
                   MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_null(plan);
}

/* ----------------------------------------------------- source deny check */

static void test_source_denies(void** state) {
  (void)state;
  maelys_warden_policy_decision_t d = base();
  maelys_warden_policy_rule_t r[2] = {
      rule(MAELYS_WARDEN_POLICY_ACCESS_READ, MAELYS_WARDEN_POLICY_SCOPE_TREE,
           MAELYS_WARDEN_POLICY_NODE_DIRECTORY, "/ws"),
      rule(MAELYS_WARDEN_POLICY_ACCESS_DENY, MAELYS_WARDEN_POLICY_SCOPE_TREE,
           MAELYS_WARDEN_POLICY_NODE_DIRECTORY, "/ws/.git")};
  d.rules = r;
  d.rule_count = 2;
  maelys_warden_policy_source_deny_t present = {
      "deny workspace:.git", "/ws/.git", MAELYS_WARDEN_POLICY_SCOPE_TREE};
  assert_int_equal(
      maelys_warden_policy_check_source_denies(&present, 1, &d, NULL), 0);
  assert_int_equal(maelys_warden_policy_check_source_denies(NULL, 0, &d, NULL),
                   0);

  /* Absent on the host: the ABI 4 library dropped it from the plan. */
  maelys_warden_policy_source_deny_t absent = {
      "deny workspace:.env", NULL, MAELYS_WARDEN_POLICY_SCOPE_EXACT};
  char* error = NULL;
  assert_int_equal(
      maelys_warden_policy_check_source_denies(&absent, 1, &d, &error),
      MAELYS_EXECUTOR_ERR_UNSUPPORTED);
  assert_non_null(strstr(error, "deny workspace:.env"));
  assert_non_null(strstr(error, "create-protection"));
  maelys_executor_error_free(error);
  error = NULL;

  /* Present on the host but missing from the plan. */
  maelys_warden_policy_source_deny_t missing = {
      "deny workspace:secrets", "/ws/secrets", MAELYS_WARDEN_POLICY_SCOPE_TREE};
  assert_int_equal(
      maelys_warden_policy_check_source_denies(&missing, 1, &d, &error),
      MAELYS_EXECUTOR_ERR_DENIED);
  assert_non_null(strstr(error, "deny workspace:secrets"));
  assert_non_null(strstr(error, "/ws/secrets"));
  maelys_executor_error_free(error);
  error = NULL;

  /* Same path, other scope: not its counterpart. */
  present.scope = MAELYS_WARDEN_POLICY_SCOPE_EXACT;
  assert_int_equal(
      maelys_warden_policy_check_source_denies(&present, 1, &d, &error),
      MAELYS_EXECUTOR_ERR_DENIED);
  maelys_executor_error_free(error);
  error = NULL;
  present.scope = (maelys_warden_policy_scope_t)7;
  assert_int_equal(
      maelys_warden_policy_check_source_denies(&present, 1, &d, &error),
      MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_non_null(strstr(error, "unknown scope 7"));
  maelys_executor_error_free(error);
  /* A read of the same path is not a deny. */
  r[1].access = MAELYS_WARDEN_POLICY_ACCESS_READ;
  present.scope = MAELYS_WARDEN_POLICY_SCOPE_TREE;
  assert_int_equal(
      maelys_warden_policy_check_source_denies(&present, 1, &d, NULL),
      MAELYS_EXECUTOR_ERR_DENIED);
  assert_int_equal(maelys_warden_policy_check_source_denies(NULL, 1, &d, NULL),
                   MAELYS_EXECUTOR_ERR_ARGUMENT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_posix_maps_to_nothing),
      cmocka_unit_test(test_filesystem_bits),
      cmocka_unit_test(test_network_none_needs_both_halves),
      cmocka_unit_test(test_network_mediated_either_frontend),
      cmocka_unit_test(test_network_direct_needs_a_confining_root),
      cmocka_unit_test(test_process_tree_is_confinement),
      cmocka_unit_test(test_root_ephemeral_write_bit),
      cmocka_unit_test(test_bits_without_a_portable_meaning),
      cmocka_unit_test(test_every_known_bit),
      cmocka_unit_test(test_unknown_executor_bit_refused),
      cmocka_unit_test(test_capability_names),
      cmocka_unit_test(test_read_tree_directory_is_a_recursive_bind),
      cmocka_unit_test(test_write_tree_directory_is_a_writable_bind),
      cmocka_unit_test(test_exact_file_is_a_literal_file),
      cmocka_unit_test(test_tree_on_a_file_is_the_file),
      cmocka_unit_test(test_deny_is_the_final_overlay),
      cmocka_unit_test(test_literal_directory_rejected),
      cmocka_unit_test(test_absent_deny_is_create_protection),
      cmocka_unit_test(test_absent_grant_refused),
      cmocka_unit_test(test_unknown_rule_values_refused),
      cmocka_unit_test(test_one_path_merges_by_precedence),
      cmocka_unit_test(test_grant_inside_deny_tree_rejected),
      cmocka_unit_test(test_root_read_only),
      cmocka_unit_test(test_root_ephemeral_write_takes_the_run_scratch),
      cmocka_unit_test(test_unknown_root_refused),
      cmocka_unit_test(test_network_none),
      cmocka_unit_test(test_network_direct_inherits),
      cmocka_unit_test(test_network_mediated_fd4),
      cmocka_unit_test(test_network_mediated_egress),
      cmocka_unit_test(test_wrong_mediator_refused),
      cmocka_unit_test(test_network_inconsistencies_refused),
      cmocka_unit_test(test_digest_is_the_decision_digest),
      cmocka_unit_test(test_mir_process_tree_requires_confinement),
      cmocka_unit_test(test_run_process_tree_is_the_lifecycle_flag),
      cmocka_unit_test(test_run_mounts),
      cmocka_unit_test(test_plan_is_new_and_sealed),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_source_denies),
  };
  return cmocka_run_group_tests_name("warden-policy mapping", tests, NULL,
                                     NULL);
}
