/* Plans: validation, sealing, the digest, the JSON form. No fork, no loop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "internal.h"

#define MAELYS_GOLDEN_DIGEST                                                   \
  "847e58ad8313de07721689fa77918a011299308c81f40d5c5a225884cef05a25"
#define MAELYS_GOLDEN_EMPTY_DIGEST                                             \
  "dd6123d3bbffc70471e8cacde80b113375eb43e1152f9357f6f6df2c19d2cb90"
#define DD                                                                     \
  "sha256:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

/* A plan using every part of the vocabulary once. */
static maelys_executor_plan_t* full_plan(void) {
  maelys_executor_plan_t* p = NULL;
  assert_int_equal(maelys_executor_plan_create(&p, NULL), 0);
  assert_int_equal(maelys_executor_plan_add_bind(p, "/usr", "/usr", 0,
                                                 MAELYS_EXECUTOR_MISSING_FAIL,
                                                 NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_bind(p, "/srv/ws", "/ws", 1,
                                                 MAELYS_EXECUTOR_MISSING_CREATE,
                                                 NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_tmpfs(p, "/tmp", 1 << 20, NULL), 0);
  assert_int_equal(maelys_executor_plan_add_proc(p, "/proc", NULL), 0);
  assert_int_equal(maelys_executor_plan_add_dev(p, "/dev", NULL), 0);
  assert_int_equal(maelys_executor_plan_add_symlink(p, "usr/bin", "/bin", NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_dir(p, "/run", NULL), 0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       p, "/etc", MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       p, "/etc/shadow", MAELYS_EXECUTOR_ACCESS_DENY,
                       MAELYS_EXECUTOR_SCOPE_LITERAL_FILE, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_set_network(
                       p, MAELYS_EXECUTOR_NETWORK_MEDIATED, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_network_destination(
                       p, "api.example.com", 443, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_set_network_mediator(
                       p, MAELYS_EXECUTOR_MEDIATOR_FD4, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_set_root(
                       p, MAELYS_EXECUTOR_ROOT_EPHEMERAL_WRITE, 1 << 24, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_require_capabilities(
                       p, MAELYS_BACKEND_CAP_SECCOMP, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_set_process_tree_required(p, 1, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_set_rlimit(
                       p, MAELYS_EXECUTOR_RLIMIT_NOFILE, 256, 512, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_set_decision_digest(p, DD, NULL), 0);
  assert_int_equal(maelys_executor_plan_add_channel(p, 4, "egress", NULL), 0);
  assert_int_equal(
      maelys_executor_plan_set_limit(p, MAELYS_EXECUTOR_LIMIT_TASKS, 512, NULL),
      0);
  assert_int_equal(maelys_executor_plan_set_limit(
                       p, MAELYS_EXECUTOR_LIMIT_MEMORY, 1 << 30, NULL),
                   0);
  return p;
}

static char* sealed_digest(maelys_executor_plan_t* p) {
  char* err = NULL;
  if (maelys_executor_plan_seal(p, &err) != MAELYS_EXECUTOR_OK)
    fail_msg("seal: %s", err);
  char* d = NULL;
  assert_int_equal(maelys_executor_plan_digest(p, &d, NULL), 0);
  return d;
}

/* The digest of a fixed plan is stable across builds and machines: a golden
 * value. Changing the canonical encoding must change its version tag and
 * this value together. */
static void test_digest_golden(void** state) {
  (void)state;
  maelys_executor_plan_t* p = full_plan();
  char* d = sealed_digest(p);
  assert_string_equal(d, "sha256:" MAELYS_GOLDEN_DIGEST);
  maelys_executor_string_free(d);
  maelys_executor_plan_destroy(p);

  maelys_executor_plan_t* empty = NULL;
  assert_int_equal(maelys_executor_plan_create(&empty, NULL), 0);
  assert_int_equal(maelys_executor_plan_set_network(
                       empty, MAELYS_EXECUTOR_NETWORK_INHERIT, NULL),
                   0);
  d = sealed_digest(empty);
  assert_string_equal(d, "sha256:" MAELYS_GOLDEN_EMPTY_DIGEST);
  maelys_executor_string_free(d);
  maelys_executor_plan_destroy(empty);
}

typedef void (*mutation_t)(maelys_executor_plan_t* p);

static void m_bind_ro(maelys_executor_plan_t* p) {
  p->mounts[0].kind = MAELYS_EXECUTOR_MOUNT_BIND;
}
static void m_bind_source(maelys_executor_plan_t* p) {
  p->mounts[0].source[1] = 'v';
}
static void m_bind_dest(maelys_executor_plan_t* p) {
  p->mounts[1].destination[1] = 'x';
}
static void m_missing(maelys_executor_plan_t* p) {
  p->mounts[1].missing = MAELYS_EXECUTOR_MISSING_SKIP;
}
static void m_tmpfs_size(maelys_executor_plan_t* p) {
  p->mounts[2].size_bytes++;
}
static void m_symlink_target(maelys_executor_plan_t* p) {
  p->mounts[5].source[0] = 'x';
}
static void m_mount_order(maelys_executor_plan_t* p) {
  maelys__mount_t t = p->mounts[3];
  p->mounts[3] = p->mounts[4];
  p->mounts[4] = t;
}
static void m_rule_access(maelys_executor_plan_t* p) {
  p->rules[0].access = MAELYS_EXECUTOR_ACCESS_WRITE;
}
static void m_rule_scope(maelys_executor_plan_t* p) {
  p->rules[1].scope = MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY;
}
static void m_rule_path(maelys_executor_plan_t* p) {
  p->rules[1].path[5] = 'S';
}
static void m_network(maelys_executor_plan_t* p) {
  /* The network rule as a whole: NONE has no destination and no mediator. */
  p->network = MAELYS_EXECUTOR_NETWORK_NONE;
  free(p->destinations[0].host);
  p->destination_count = 0;
  free(p->mediator);
  p->mediator = NULL;
}
static void m_dest_port(maelys_executor_plan_t* p) {
  p->destinations[0].port = 80;
}
static void m_dest_host(maelys_executor_plan_t* p) {
  p->destinations[0].host[0] = 'b';
}
static void m_mediator(maelys_executor_plan_t* p) {
  free(p->mediator);
  p->mediator = strdup(MAELYS_EXECUTOR_MEDIATOR_EGRESS);
}
static void m_root(maelys_executor_plan_t* p) {
  p->scratch_bytes++;
}
static void m_caps(maelys_executor_plan_t* p) {
  p->required |= MAELYS_BACKEND_CAP_TMPFS_SIZE;
}
static void m_tree(maelys_executor_plan_t* p) {
  p->process_tree_required = false;
}
static void m_rlimit(maelys_executor_plan_t* p) {
  p->rlimits[MAELYS_EXECUTOR_RLIMIT_NOFILE].soft = 255;
}
static void m_rlimit_set(maelys_executor_plan_t* p) {
  p->rlimits[MAELYS_EXECUTOR_RLIMIT_CPU].set = true;
}
static void m_decision(maelys_executor_plan_t* p) {
  p->decision_digest[strlen(p->decision_digest) - 1] = '0';
}
static void m_channel_fd(maelys_executor_plan_t* p) {
  p->channels[0].child_fd = 5;
}
static void m_channel_name(maelys_executor_plan_t* p) {
  p->channels[0].name[0] = 'f';
}
static void m_limit_tasks(maelys_executor_plan_t* p) {
  p->limits[MAELYS_EXECUTOR_LIMIT_TASKS]++;
}
static void m_limit_memory(maelys_executor_plan_t* p) {
  p->limits[MAELYS_EXECUTOR_LIMIT_MEMORY] = 0;
}

/* The digest binds every rule: changing any single one changes it, and no two
 * single changes collide. */
static void test_digest_binds_every_rule(void** state) {
  (void)state;
  static const mutation_t mutations[] = {
      m_bind_ro,    m_bind_source,    m_bind_dest,   m_missing,
      m_tmpfs_size, m_symlink_target, m_mount_order, m_rule_access,
      m_rule_scope, m_rule_path,      m_network,     m_dest_port,
      m_dest_host,  m_mediator,       m_root,        m_caps,
      m_tree,       m_rlimit,         m_rlimit_set,  m_decision,
      m_channel_fd, m_channel_name,   m_limit_tasks, m_limit_memory};
  enum { N = sizeof mutations / sizeof mutations[0] };
  char* digests[N + 1];
  maelys_executor_plan_t* base = full_plan();
  digests[N] = sealed_digest(base);
  maelys_executor_plan_destroy(base);
  for (size_t i = 0; i < N; i++) {
    maelys_executor_plan_t* p = full_plan();
    mutations[i](p);
    digests[i] = sealed_digest(p);
    maelys_executor_plan_destroy(p);
  }
  for (size_t i = 0; i <= N; i++)
    for (size_t j = i + 1; j <= N; j++)
      if (strcmp(digests[i], digests[j]) == 0)
        fail_msg("mutations %zu and %zu give the same digest", i, j);
  for (size_t i = 0; i <= N; i++)
    maelys_executor_string_free(digests[i]);
}

/* Every setter fails with its own error code once the plan is sealed. */
static void test_setters_after_seal(void** state) {
  (void)state;
  maelys_executor_plan_t* p = NULL;
  assert_int_equal(maelys_executor_plan_create(&p, NULL), 0);
  assert_int_equal(
      maelys_executor_plan_set_network(p, MAELYS_EXECUTOR_NETWORK_NONE, NULL),
      0);
  assert_int_equal(maelys_executor_plan_seal(p, NULL), 0);
  char* err = NULL;
#define SEALED(call)                                                           \
  do {                                                                         \
    assert_int_equal((call), MAELYS_EXECUTOR_ERR_SEALED);                      \
    assert_non_null(strstr(err, "sealed"));                                    \
    maelys_executor_error_free(err);                                           \
    err = NULL;                                                                \
  } while (0)
  SEALED(maelys_executor_plan_add_bind(p, "/a", "/a", 0,
                                       MAELYS_EXECUTOR_MISSING_FAIL, &err));
  SEALED(maelys_executor_plan_add_tmpfs(p, "/t", 4096, &err));
  SEALED(maelys_executor_plan_add_proc(p, "/proc", &err));
  SEALED(maelys_executor_plan_add_dev(p, "/dev", &err));
  SEALED(maelys_executor_plan_add_symlink(p, "x", "/x", &err));
  SEALED(maelys_executor_plan_add_dir(p, "/d", &err));
  SEALED(maelys_executor_plan_add_rule(p, "/a", MAELYS_EXECUTOR_ACCESS_READ,
                                       MAELYS_EXECUTOR_SCOPE_LITERAL_FILE,
                                       &err));
  SEALED(
      maelys_executor_plan_set_network(p, MAELYS_EXECUTOR_NETWORK_NONE, &err));
  SEALED(maelys_executor_plan_add_network_destination(p, "h", 1, &err));
  SEALED(maelys_executor_plan_set_network_mediator(
      p, MAELYS_EXECUTOR_MEDIATOR_FD4, &err));
  SEALED(
      maelys_executor_plan_set_root(p, MAELYS_EXECUTOR_ROOT_READONLY, 0, &err));
  SEALED(maelys_executor_plan_require_capabilities(p, 0, &err));
  SEALED(maelys_executor_plan_set_process_tree_required(p, 1, &err));
  SEALED(maelys_executor_plan_set_rlimit(p, MAELYS_EXECUTOR_RLIMIT_CPU, 1, 1,
                                         &err));
  SEALED(maelys_executor_plan_set_decision_digest(p, DD, &err));
  SEALED(maelys_executor_plan_add_channel(p, 4, "c", &err));
  SEALED(maelys_executor_plan_seal(p, &err));
#undef SEALED
  maelys_executor_plan_destroy(p);
}

/* Each bad input to each setter returns a specific error with a diagnostic
 * naming the culprit, and leaves the plan unchanged. */
static void test_bad_inputs(void** state) {
  (void)state;
  maelys_executor_plan_t* p = NULL;
  char* err = NULL;
  assert_int_equal(maelys_executor_plan_create(NULL, &err),
                   MAELYS_EXECUTOR_ERR_ARGUMENT);
  maelys_executor_error_free(err);
  err = NULL;
  assert_int_equal(maelys_executor_plan_create(&p, NULL), 0);
#define BAD(call, code, needle)                                                \
  do {                                                                         \
    assert_int_equal((call), (code));                                          \
    if (strstr(err, (needle)) == NULL)                                         \
      fail_msg("diagnostic '%s' does not mention '%s'", err, (needle));        \
    maelys_executor_error_free(err);                                           \
    err = NULL;                                                                \
  } while (0)
  const int A = MAELYS_EXECUTOR_ERR_ARGUMENT;
  BAD(maelys_executor_plan_add_bind(NULL, "/a", "/a", 0,
                                    MAELYS_EXECUTOR_MISSING_FAIL, &err),
      A, "plan is NULL");
  BAD(maelys_executor_plan_add_bind(p, "relative", "/a", 0,
                                    MAELYS_EXECUTOR_MISSING_FAIL, &err),
      A, "relative");
  BAD(maelys_executor_plan_add_bind(p, "/a/../b", "/a", 0,
                                    MAELYS_EXECUTOR_MISSING_FAIL, &err),
      A, "/a/../b");
  BAD(maelys_executor_plan_add_bind(p, "/a", "/a/", 0,
                                    MAELYS_EXECUTOR_MISSING_FAIL, &err),
      A, "/a/");
  BAD(maelys_executor_plan_add_bind(p, "/a", "//a", 0,
                                    MAELYS_EXECUTOR_MISSING_FAIL, &err),
      A, "//a");
  BAD(maelys_executor_plan_add_bind(p, "/a", "/a", 0,
                                    (maelys_executor_missing_t)9, &err),
      A, "missing-path mode");
  BAD(maelys_executor_plan_add_bind(p, "/a", "/a", 2,
                                    MAELYS_EXECUTOR_MISSING_FAIL, &err),
      A, "writable");
  BAD(maelys_executor_plan_add_bind(p, NULL, "/a", 0,
                                    MAELYS_EXECUTOR_MISSING_FAIL, &err),
      A, "source is NULL");
  BAD(maelys_executor_plan_add_tmpfs(p, "/tmp", 0, &err), A,
      "every tmpfs must have a size");
  BAD(maelys_executor_plan_add_tmpfs(p, "tmp", 4096, &err), A, "tmp");
  BAD(maelys_executor_plan_add_proc(p, "/proc/./x", &err), A, "/proc/./x");
  BAD(maelys_executor_plan_add_dev(p, "", &err), A, "clean absolute");
  BAD(maelys_executor_plan_add_dir(p, NULL, &err), A, "NULL");
  BAD(maelys_executor_plan_add_symlink(p, "", "/bin", &err), A,
      "non-empty target");
  BAD(maelys_executor_plan_add_rule(p, "/x", (maelys_executor_access_t)0,
                                    MAELYS_EXECUTOR_SCOPE_LITERAL_FILE, &err),
      A, "unknown access");
  BAD(maelys_executor_plan_add_rule(p, "/x", MAELYS_EXECUTOR_ACCESS_READ,
                                    (maelys_executor_scope_t)7, &err),
      A, "unknown scope");
  assert_int_equal(maelys_executor_plan_add_rule(
                       p, "/x", MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  BAD(maelys_executor_plan_add_rule(p, "/x", MAELYS_EXECUTOR_ACCESS_DENY,
                                    MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY,
                                    &err),
      A, "conflicts");
  BAD(maelys_executor_plan_set_network(p, (maelys_executor_network_t)9, &err),
      A, "unknown network mode");
  BAD(maelys_executor_plan_add_network_destination(p, "bad host!", 443, &err),
      A, "bad host!");
  BAD(maelys_executor_plan_add_network_destination(p, "h", 0, &err), A,
      "port 0");
  BAD(maelys_executor_plan_add_network_destination(p, "h", 70000, &err), A,
      "port 70000");
  BAD(maelys_executor_plan_set_network_mediator(p, "someone-else", &err), A,
      "someone-else");
  BAD(maelys_executor_plan_set_root(p, MAELYS_EXECUTOR_ROOT_EPHEMERAL_WRITE, 0,
                                    &err),
      A, "scratch size");
  BAD(maelys_executor_plan_set_root(p, MAELYS_EXECUTOR_ROOT_READONLY, 5, &err),
      A, "no scratch");
  BAD(maelys_executor_plan_set_root(p, (maelys_executor_root_t)7, 0, &err), A,
      "unknown root");
  BAD(maelys_executor_plan_require_capabilities(p, UINT64_C(1) << 60, &err), A,
      "unknown capability");
  BAD(maelys_executor_plan_set_process_tree_required(p, 3, &err), A, "0 or 1");
  BAD(maelys_executor_plan_set_rlimit(p, MAELYS_EXECUTOR_RLIMIT_NOFILE, 10, 5,
                                      &err),
      A, "exceeds");
  BAD(maelys_executor_plan_set_rlimit(p, (maelys_executor_rlimit_t)42, 1, 1,
                                      &err),
      A, "unknown rlimit");
  BAD(maelys_executor_plan_set_decision_digest(p, "md5:abc", &err), A,
      "md5:abc");
  BAD(maelys_executor_plan_set_decision_digest(p, "sha256:ABCDEF", &err), A,
      "ALGORITHM:HEX");
  BAD(maelys_executor_plan_add_channel(p, 3, "c", &err), A, "outside 4..1023");
  BAD(maelys_executor_plan_add_channel(p, 4, "Bad Name", &err), A, "Bad Name");
  assert_int_equal(maelys_executor_plan_add_channel(p, 4, "c", NULL), 0);
  BAD(maelys_executor_plan_add_channel(p, 4, "d", &err), A, "duplicates");
  BAD(maelys_executor_plan_digest(p, NULL, &err), A, "out_digest");
  char* d = NULL;
  BAD(maelys_executor_plan_digest(p, &d, &err), MAELYS_EXECUTOR_ERR_STATE,
      "not sealed");
  /* A non-NULL *out_error on entry is a caller bug, reported untouched. */
  char* preset = (char*)"preset";
  assert_int_equal(maelys_executor_plan_add_dir(p, "/d", &preset),
                   MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_string_equal(preset, "preset");
  /* Seal-time consistency. */
  assert_int_equal(maelys_executor_plan_set_network(
                       p, MAELYS_EXECUTOR_NETWORK_MEDIATED, NULL),
                   0);
  BAD(maelys_executor_plan_seal(p, &err), A, "mediator");
  assert_int_equal(maelys_executor_plan_set_network_mediator(
                       p, MAELYS_EXECUTOR_MEDIATOR_EGRESS, NULL),
                   0);
  BAD(maelys_executor_plan_seal(p, &err), A, "destination");
  assert_int_equal(
      maelys_executor_plan_set_network(p, MAELYS_EXECUTOR_NETWORK_NONE, NULL),
      0);
  BAD(maelys_executor_plan_seal(p, &err), A, "mediator is named");
  assert_false(maelys_executor_plan_is_sealed(p));
#undef BAD
  maelys_executor_plan_destroy(p);

  maelys_executor_plan_t* ext = NULL;
  assert_int_equal(maelys_executor_plan_create(&ext, NULL), 0);
  assert_int_equal(maelys_executor_plan_set_network(
                       ext, MAELYS_EXECUTOR_NETWORK_EXTERNAL_CHANNEL, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_seal(ext, &err),
                   MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_non_null(strstr(err, "EXTERNAL_CHANNEL"));
  maelys_executor_error_free(err);
  maelys_executor_plan_destroy(ext);
}

/* A mount namespace is required only by what must be built: a bind to
 * another path, a tmpfs, a procfs, a scratch root. A read-only root of
 * same-path binds, symlinks, directories and /dev is what a backend without
 * namespaces (Landlock) grants exactly, or refuses in prepare. */
static void test_required_capabilities_without_mounts(void** state) {
  (void)state;
  maelys_executor_plan_t* p = NULL;
  uint64_t caps = 0;
  assert_int_equal(maelys_executor_plan_create(&p, NULL), 0);
  assert_int_equal(
      maelys_executor_plan_set_root(p, MAELYS_EXECUTOR_ROOT_READONLY, 0, NULL),
      0);
  assert_int_equal(maelys_executor_plan_add_bind(p, "/usr", "/usr", 0,
                                                 MAELYS_EXECUTOR_MISSING_FAIL,
                                                 NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_symlink(p, "usr/bin", "/bin", NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_dir(p, "/tmp", NULL), 0);
  assert_int_equal(maelys_executor_plan_add_dev(p, "/dev", NULL), 0);
  assert_int_equal(
      maelys_executor_plan_set_network(p, MAELYS_EXECUTOR_NETWORK_NONE, NULL),
      0);
  assert_int_equal(maelys_executor_plan_required_capabilities(p, &caps, NULL),
                   0);
  assert_int_equal(caps, MAELYS_BACKEND_CAP_ROOT_READONLY |
                             MAELYS_BACKEND_CAP_FILESYSTEM_READ |
                             MAELYS_BACKEND_CAP_NETWORK_NONE);
  assert_int_equal(maelys_executor_plan_add_bind(p, "/srv/ws", "/work", 1,
                                                 MAELYS_EXECUTOR_MISSING_FAIL,
                                                 NULL),
                   0);
  assert_int_equal(maelys_executor_plan_required_capabilities(p, &caps, NULL),
                   0);
  assert_true(caps & MAELYS_BACKEND_CAP_MOUNT_NAMESPACE);
  maelys_executor_plan_destroy(p);
}

static void test_required_capabilities(void** state) {
  (void)state;
  maelys_executor_plan_t* p = NULL;
  uint64_t caps = 99;
  assert_int_equal(maelys_executor_plan_create(&p, NULL), 0);
  assert_int_equal(maelys_executor_plan_required_capabilities(p, &caps, NULL),
                   0);
  assert_int_equal(caps, 0); /* an unconfined plan needs nothing */
  maelys_executor_plan_destroy(p);
  p = full_plan();
  assert_int_equal(maelys_executor_plan_required_capabilities(p, &caps, NULL),
                   0);
  uint64_t want =
      MAELYS_BACKEND_CAP_FILESYSTEM_READ | MAELYS_BACKEND_CAP_FILESYSTEM_WRITE |
      MAELYS_BACKEND_CAP_FILESYSTEM_DENY | MAELYS_BACKEND_CAP_MOUNT_NAMESPACE |
      MAELYS_BACKEND_CAP_TMPFS_SIZE | MAELYS_BACKEND_CAP_PID_NAMESPACE |
      MAELYS_BACKEND_CAP_NETWORK_MEDIATED_FD4 |
      MAELYS_BACKEND_CAP_ROOT_EPHEMERAL_WRITE | MAELYS_BACKEND_CAP_SECCOMP |
      MAELYS_BACKEND_CAP_PROCESS_TREE | MAELYS_BACKEND_CAP_LIMIT_TASKS |
      MAELYS_BACKEND_CAP_LIMIT_MEMORY;
  assert_int_equal(caps, want);
  maelys_executor_plan_destroy(p);
  for (int b = 0; b < 20; b++) {
    const char* name = maelys_executor_capability_name(UINT64_C(1) << b);
    assert_non_null(name);
    assert_int_equal(maelys_executor_capability_from_name(name), UINT64_C(1)
                                                                     << b);
  }
  assert_null(maelys_executor_capability_name(3));
  assert_int_equal(maelys_executor_capability_from_name("nope"), 0);
}

/* The JSON form round-trips to the same digest and is read strictly. */
static void test_json(void** state) {
  (void)state;
  maelys_executor_plan_t* p = full_plan();
  char* digest = sealed_digest(p);
  char* json = NULL;
  assert_int_equal(maelys_executor_plan_to_json(p, &json, NULL), 0);
  assert_non_null(strstr(json, digest));
  maelys_executor_plan_t* q = NULL;
  char* err = NULL;
  /* With its digest: returned sealed, verified. */
  if (maelys_executor_plan_from_json(json, strlen(json), &q, &err) != 0)
    fail_msg("from_json: %s", err);
  assert_true(maelys_executor_plan_is_sealed(q));
  char* again = NULL;
  assert_int_equal(maelys_executor_plan_digest(q, &again, NULL), 0);
  assert_string_equal(again, digest);
  maelys_executor_string_free(again);
  maelys_executor_plan_destroy(q);
  /* A tampered rule no longer matches the digest. */
  char* tampered = strdup(json);
  char* at = strstr(tampered, "\"/etc/shadow\"");
  assert_non_null(at);
  at[5] = 'S';
  assert_int_equal(
      maelys_executor_plan_from_json(tampered, strlen(tampered), &q, &err),
      MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_non_null(strstr(err, "altered"));
  assert_null(q);
  maelys_executor_error_free(err);
  err = NULL;
  free(tampered);
  maelys_executor_string_free(json);
  maelys_executor_string_free(digest);
  maelys_executor_plan_destroy(p);

  static const struct {
    const char* doc;
    const char* needle;
  } bad[] = {
      {"{", "malformed"},
      {"[]", "$: must be an object"},
      {"{}", "$.format"},
      {"{\"format\":\"other/1\"}", "$.format"},
      {"{\"format\":\"maelys-executor-plan/1\",\"extra\":1}", "$.extra"},
      {"{\"format\":\"maelys-executor-plan/1\",\"mounts\":{}}", "$.mounts"},
      {"{\"format\":\"maelys-executor-plan/1\",\"mounts\":[{\"kind\":\"nfs\","
       "\"destination\":\"/x\"}]}",
       "$.mounts[0]"},
      {"{\"format\":\"maelys-executor-plan/1\",\"mounts\":[{\"kind\":\"tmpfs\","
       "\"destination\":\"/x\"}]}",
       "size is required"},
      {"{\"format\":\"maelys-executor-plan/1\",\"mounts\":[{\"kind\":\"proc\","
       "\"destination\":\"/x\",\"source\":\"/y\"}]}",
       "source is only meaningful"},
      {"{\"format\":\"maelys-executor-plan/1\",\"mounts\":[{\"kind\":\"bind\","
       "\"source\":\"/a\",\"destination\":\"/a\",\"missing\":\"maybe\"}]}",
       "missing must be"},
      {"{\"format\":\"maelys-executor-plan/1\",\"rules\":[{\"path\":\"/a\","
       "\"access\":\"exec\",\"scope\":\"literal-file\"}]}",
       "access must be"},
      {"{\"format\":\"maelys-executor-plan/1\",\"rules\":[{\"path\":\"a\","
       "\"access\":\"read\",\"scope\":\"literal-file\"}]}",
       "$.rules[0]"},
      {"{\"format\":\"maelys-executor-plan/1\",\"network\":{\"mode\":\"all\"}}",
       "$.network.mode"},
      {"{\"format\":\"maelys-executor-plan/1\",\"root\":{\"disposition\":"
       "\"readonly\",\"scratch\":-1}}",
       "$.root.scratch"},
      {"{\"format\":\"maelys-executor-plan/1\",\"rlimits\":{\"files\":"
       "{\"soft\":1,\"hard\":1}}}",
       "$.rlimits.files"},
      {"{\"format\":\"maelys-executor-plan/1\",\"required_capabilities\":"
       "[\"magic\"]}",
       "$.required_capabilities[0]"},
      {"{\"format\":\"maelys-executor-plan/1\",\"process_tree_required\":1}",
       "must be a boolean"},
      {"{\"format\":\"maelys-executor-plan/1\",\"format\":\"x\"}", "malformed"},
      /* Integers are range-checked before any narrowing. */
      {"{\"format\":\"maelys-executor-plan/1\",\"channels\":[{\"fd\":"
       "4294967300,\"name\":\"x\"}]}",
       "$.channels[0].fd: must be an integer in 0..2147483647"},
      {"{\"format\":\"maelys-executor-plan/1\",\"limits\":{\"tasks\":0}}",
       "$.limits.tasks: limit tasks: 0 is outside"},
      {"{\"format\":\"maelys-executor-plan/1\",\"limits\":{\"cpu\":1}}",
       "$.limits.cpu: unknown member"},
      {"{\"format\":\"maelys-executor-plan/1\",\"limits\":{\"memory\":"
       "-5}}",
       "$.limits.memory: must be a non-negative integer"},
      /* Explicit beats a silent grant: no network member, no seal. */
      {"{\"format\":\"maelys-executor-plan/1\",\"digest\":\"sha256:00\"}",
       "network mode was never set"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    q = NULL;
    maelys_executor_result_t r = maelys_executor_plan_from_json(
        bad[i].doc, strlen(bad[i].doc), &q, &err);
    if (r != MAELYS_EXECUTOR_ERR_ARGUMENT || err == NULL ||
        strstr(err, bad[i].needle) == NULL)
      fail_msg("document %zu: result %d, diagnostic '%s' lacks '%s'", i, r,
               err ? err : "(none)", bad[i].needle);
    assert_null(q);
    maelys_executor_error_free(err);
    err = NULL;
  }
}

/* A plan that never chose a network is refused at seal, whatever else it
 * holds; each ceiling is range-checked and implies its capability. */
static void test_network_must_be_set_and_limits(void** state) {
  (void)state;
  maelys_executor_plan_t* p = NULL;
  char* err = NULL;
  assert_int_equal(maelys_executor_plan_create(&p, NULL), 0);
  assert_int_equal(maelys_executor_plan_seal(p, &err),
                   MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_non_null(strstr(err, "network mode was never set"));
  assert_false(maelys_executor_plan_is_sealed(p));
  maelys_executor_error_free(err);
  err = NULL;
  assert_int_equal(
      maelys_executor_plan_set_limit(p, MAELYS_EXECUTOR_LIMIT_TASKS, 0, &err),
      MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_non_null(strstr(err, "tasks"));
  maelys_executor_error_free(err);
  err = NULL;
  assert_int_equal(maelys_executor_plan_set_limit(
                       p, MAELYS_EXECUTOR_LIMIT_MEMORY, 4096, &err),
                   MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_non_null(strstr(err, "1 MiB"));
  maelys_executor_error_free(err);
  err = NULL;
  assert_int_equal(
      maelys_executor_plan_set_limit(p, (maelys_executor_limit_t)7, 1, &err),
      MAELYS_EXECUTOR_ERR_ARGUMENT);
  maelys_executor_error_free(err);
  err = NULL;
  uint64_t v = 0;
  assert_int_equal(
      maelys_executor_plan_limit_get(p, MAELYS_EXECUTOR_LIMIT_TASKS, &v), -1);
  assert_int_equal(
      maelys_executor_plan_set_limit(p, MAELYS_EXECUTOR_LIMIT_TASKS, 64, NULL),
      0);
  assert_int_equal(
      maelys_executor_plan_limit_get(p, MAELYS_EXECUTOR_LIMIT_TASKS, &v), 0);
  assert_int_equal(v, 64);
  uint64_t caps = 0;
  assert_int_equal(maelys_executor_plan_required_capabilities(p, &caps, NULL),
                   0);
  assert_int_equal(caps, MAELYS_BACKEND_CAP_LIMIT_TASKS);
  assert_int_equal(maelys_executor_plan_set_network(
                       p, MAELYS_EXECUTOR_NETWORK_INHERIT, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_seal(p, NULL), 0);
  assert_int_equal(
      maelys_executor_plan_set_limit(p, MAELYS_EXECUTOR_LIMIT_TASKS, 65, &err),
      MAELYS_EXECUTOR_ERR_SEALED);
  maelys_executor_error_free(err);
  maelys_executor_plan_destroy(p);
}

/* The minimal runtime: what exists on this host, symlinks kept as symlinks,
 * all or nothing, and the usual refusals. */
static void test_minimal_runtime(void** state) {
  (void)state;
  maelys_executor_plan_t* plan = NULL;
  char* err = NULL;
  assert_int_equal(maelys_executor_plan_create(&plan, NULL), 0);
  assert_int_equal(maelys_executor_plan_add_minimal_runtime(plan, &err), 0);
  assert_null(err);
  struct stat st;
  bool saw_usr = false, saw_bin = false;
  for (size_t i = 0; i < plan->mount_count; i++) {
    const maelys__mount_t* m = &plan->mounts[i];
    if (strcmp(m->destination, "/usr") == 0)
      saw_usr = m->kind == MAELYS_EXECUTOR_MOUNT_RO_BIND;
    if (strcmp(m->destination, "/bin") == 0) {
      assert_int_equal(lstat("/bin", &st), 0);
      saw_bin =
          m->kind == (S_ISLNK(st.st_mode) ? MAELYS_EXECUTOR_MOUNT_SYMLINK
                                          : MAELYS_EXECUTOR_MOUNT_RO_BIND);
    }
    assert_true(m->kind == MAELYS_EXECUTOR_MOUNT_RO_BIND ||
                m->kind == MAELYS_EXECUTOR_MOUNT_SYMLINK);
    assert_true(strcmp(m->destination, "/etc/shadow") != 0);
    assert_true(strcmp(m->destination, "/tmp") != 0 &&
                strcmp(m->destination, "/run") != 0 &&
                strcmp(m->destination, "/etc") != 0);
  }
  assert_true(saw_usr);
  assert_true(saw_bin);
  /* All or nothing: with room for only two more mounts, nothing is left. */
  maelys_executor_plan_t* full = NULL;
  assert_int_equal(maelys_executor_plan_create(&full, NULL), 0);
  char dest[64];
  for (int i = 0; i < MAELYS_EXECUTOR_MAX_ENTRIES - 2; i++) {
    snprintf(dest, sizeof dest, "/d%d", i);
    assert_int_equal(maelys_executor_plan_add_dir(full, dest, NULL), 0);
  }
  size_t before = full->mount_count;
  assert_int_equal(maelys_executor_plan_add_minimal_runtime(full, &err),
                   MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_non_null(strstr(err, "mounts"));
  maelys_executor_error_free(err);
  err = NULL;
  assert_int_equal(full->mount_count, before);
  maelys_executor_plan_destroy(full);
  assert_int_equal(maelys_executor_plan_add_minimal_runtime(NULL, &err),
                   MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_non_null(strstr(err, "plan is NULL"));
  maelys_executor_error_free(err);
  err = NULL;
  assert_int_equal(
      maelys_executor_plan_set_network(plan, MAELYS_EXECUTOR_NETWORK_NONE, 0),
      0);
  assert_int_equal(maelys_executor_plan_seal(plan, NULL), 0);
  assert_int_equal(maelys_executor_plan_add_minimal_runtime(plan, &err),
                   MAELYS_EXECUTOR_ERR_SEALED);
  assert_non_null(strstr(err, "sealed"));
  maelys_executor_error_free(err);
  maelys_executor_plan_destroy(plan);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_minimal_runtime),
      cmocka_unit_test(test_network_must_be_set_and_limits),
      cmocka_unit_test(test_digest_golden),
      cmocka_unit_test(test_digest_binds_every_rule),
      cmocka_unit_test(test_setters_after_seal),
      cmocka_unit_test(test_bad_inputs),
      cmocka_unit_test(test_required_capabilities),
      cmocka_unit_test(test_required_capabilities_without_mounts),
      cmocka_unit_test(test_json),
  };
  return cmocka_run_group_tests_name("plan", tests, NULL, NULL);
}
