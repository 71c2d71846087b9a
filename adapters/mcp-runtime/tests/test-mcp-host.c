/*
 * The adapter's host side on real backends, without the runtime: the
 * fixture launched through maelys__mcpx_launch() (the path every runtime
 * spawn takes after its request is copied) under posix and bubblewrap, and
 * driven with the runtime's own sequence of operations from the test's
 * thread while the Executor runs on the adapter's loop thread.
 *
 * Checked: exit codes and signals through the sandbox, wait idempotence,
 * the runtime's ladder (GRACEFUL is the signal only; FORCED kills the tree),
 * the exact environment, the protocol descriptor's properties, refusals
 * that launch nothing, several threads at once, a forked child refused,
 * descriptors 0-2 untouched, release never signalling, a host whose setup or
 * registry check fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "marked.h"
#include "mcpx.h"

static maelys_mcp_executor_host_t* host;
static bool bwrap_works;
static char marker[64];

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------- plans */

static maelys_executor_plan_t* plan_posix(void) {
  maelys_executor_plan_t* plan = NULL;
  assert_int_equal(maelys_executor_plan_create(&plan, NULL), 0);
  assert_int_equal(maelys_executor_plan_set_network(
                       plan, MAELYS_EXECUTOR_NETWORK_INHERIT, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_seal(plan, NULL), 0);
  return plan;
}

static maelys_executor_plan_t* plan_sandbox(maelys_executor_network_t net) {
  maelys_executor_plan_t* plan = NULL;
  char* err = NULL;
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", MAELYS_FIXTURE);
  *strrchr(dir, '/') = '\0';
  assert_int_equal(maelys_executor_plan_create(&plan, NULL), 0);
  assert_int_equal(maelys_executor_plan_set_root(
                       plan, MAELYS_EXECUTOR_ROOT_READONLY, 0, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_bind(plan, "/usr", "/usr", 0,
                                                 MAELYS_EXECUTOR_MISSING_SKIP,
                                                 NULL),
                   0);
  static const char* const links[][2] = {
      {"usr/bin", "/bin"}, {"usr/lib", "/lib"}, {"usr/lib64", "/lib64"}};
  for (size_t i = 0; i < 3; i++)
    assert_int_equal(
        maelys_executor_plan_add_symlink(plan, links[i][0], links[i][1], NULL),
        0);
  assert_int_equal(maelys_executor_plan_add_bind(
                       plan, dir, dir, 0, MAELYS_EXECUTOR_MISSING_FAIL, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_proc(plan, "/proc", NULL), 0);
  assert_int_equal(maelys_executor_plan_add_dev(plan, "/dev", NULL), 0);
  assert_int_equal(maelys_executor_plan_set_network(plan, net, NULL), 0);
  if (net == MAELYS_EXECUTOR_NETWORK_EXTERNAL_CHANNEL)
    assert_int_equal(maelys_executor_plan_add_channel(plan, 4, "egress", NULL),
                     0);
  assert_int_equal(
      maelys_executor_plan_set_process_tree_required(plan, 1, NULL), 0);
  if (maelys_executor_plan_seal(plan, &err) != MAELYS_EXECUTOR_OK)
    fail_msg("seal: %s", err);
  return plan;
}

/* ---------------------------------------------------------- resolver */

static int resolve_calls;

static maelys_executor_result_t
test_resolve(void* data, const char* profile,
             const maelys_mcp_executor_spec_t* spec,
             maelys_mcp_executor_resolution_t* res, char** out_error) {
  (void)data;
  (void)spec;
  __atomic_add_fetch(&resolve_calls, 1, __ATOMIC_SEQ_CST);
  maelys_executor_plan_t* plan = NULL;
  const char* backend = NULL;
  if (profile == NULL)
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_NOT_FOUND,
                             "this host has no default profile");
  if (strcmp(profile, "posix") == 0) {
    plan = plan_posix();
    backend = "posix";
  } else if (strcmp(profile, "bubblewrap") == 0) {
    plan = plan_sandbox(MAELYS_EXECUTOR_NETWORK_NONE);
    backend = "bubblewrap";
  } else if (strcmp(profile, "external") == 0) {
    plan = plan_sandbox(MAELYS_EXECUTOR_NETWORK_EXTERNAL_CHANNEL);
    backend = "bubblewrap";
  } else if (strcmp(profile, "resolver-error") == 0) {
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                             "the profile store is unreadable");
  } else if (strcmp(profile, "no-plan") == 0) {
    return MAELYS_EXECUTOR_OK;
  } else {
    return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_NOT_FOUND,
                             "unknown profile %s", profile);
  }
  return maelys_mcp_executor_resolution_set_plan(res, &plan, backend,
                                                 out_error);
}

static const maelys_mcp_executor_resolver_t resolver = {test_resolve, NULL};

static const char* const env_names[] = {"PATH", "LANG", "LC_ALL"};
static const char* const env_values[] = {"/usr/local/bin:/usr/bin:/bin", "C",
                                         "C"};

typedef struct launched {
  maelys__mcpx_instance_t* instance;
  int fd;
} launched_t;

static maelys_executor_result_t launch_v(const char* profile,
                                         const char* platform, launched_t* out,
                                         char** err, const char* const* args) {
  const char* argv[16] = {MAELYS_FIXTURE};
  size_t argc = 1;
  while (args[argc - 1] != NULL && argc < 15) {
    argv[argc] = args[argc - 1];
    argc++;
  }
  maelys_mcp_executor_spec_t spec = {
      .executable = MAELYS_FIXTURE,
      .argv = argv,
      .argc = argc,
      .profile = profile,
      .layout = MAELYS_MCP_EXECUTOR_LAYOUT_STDIO,
      .env_names = env_names,
      .env_values = env_values,
      .env_count = 3,
      .platform = platform,
      .spawn_timeout_ms = 20000,
      .grace_timeout_ms = 300,
      .force_timeout_ms = 2000,
  };
  out->instance = NULL;
  out->fd = -1;
  return maelys__mcpx_launch(host, &resolver, NULL, 5, &spec, &out->instance,
                             &out->fd, err);
}

#define LAUNCH(profile, out, ...)                                              \
  do {                                                                         \
    char* err_ = NULL;                                                         \
    const char* const args_[] = {__VA_ARGS__, NULL};                           \
    if (launch_v((profile), "local", (out), &err_, args_) !=                   \
        MAELYS_EXECUTOR_OK)                                                    \
      fail_msg("launch %s: %s", (profile), err_);                              \
  } while (0)

/* Reads the socket until `needle` arrived (or EOF, or the deadline). */
static bool read_until(int fd, const char* needle, char* buf, size_t cap,
                       unsigned ms) {
  size_t len = 0;
  buf[0] = '\0';
  uint64_t end = now_ms() + ms;
  while (len + 1 < cap) {
    if (needle != NULL && strstr(buf, needle) != NULL)
      return true;
    int left = (int)(end > now_ms() ? end - now_ms() : 0);
    struct pollfd p = {fd, POLLIN, 0};
    if (left == 0 || poll(&p, 1, left) <= 0)
      return false;
    ssize_t n = read(fd, buf + len, cap - 1 - len);
    if (n <= 0)
      return needle == NULL;
    len += (size_t)n;
    buf[len] = '\0';
  }
  return needle == NULL || strstr(buf, needle) != NULL;
}

static maelys_mcp_executor_exit_t wait_for(launched_t* l, unsigned ms) {
  maelys_mcp_executor_exit_t e;
  assert_int_equal(maelys__mcpx_instance_wait(l->instance, ms, &e, NULL), 0);
  return e;
}

static void finish(launched_t* l) {
  if (l->fd >= 0)
    close(l->fd);
  maelys__mcpx_instance_release(l->instance);
  l->instance = NULL;
  l->fd = -1;
}

static const char* const backends[] = {"posix", "bubblewrap"};

static bool skip_backend(const char* name) {
  if (strcmp(name, "bubblewrap") != 0 || bwrap_works)
    return false;
  const char* must = getenv("MAELYS_BWRAP_MUST_WORK");
  if (must != NULL && strcmp(must, "1") == 0)
    fail_msg("bubblewrap cannot run here and MAELYS_BWRAP_MUST_WORK=1");
  printf("bubblewrap cannot run here: its cases are skipped\n");
  return true;
}

/* -------------------------------------------------------------- tests */

static void test_exit_codes_and_signals(void** state) {
  (void)state;
  for (size_t b = 0; b < 2; b++) {
    if (skip_backend(backends[b]))
      continue;
    launched_t l;
    LAUNCH(backends[b], &l, "exit", "3");
    /* Blocking and close-on-exec, and a socket: the descriptor contract. */
    int fl = fcntl(l.fd, F_GETFL);
    assert_true(fl >= 0 && (fl & O_NONBLOCK) == 0);
    assert_true(fcntl(l.fd, F_GETFD) & FD_CLOEXEC);
    struct stat st;
    assert_int_equal(fstat(l.fd, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    maelys_mcp_executor_exit_t e = wait_for(&l, 10000);
    assert_true(e.exited == 1 && e.exit_code == 3 && e.term_signal == 0);
    e = wait_for(&l, 0); /* remembered, replayed */
    assert_true(e.exited == 1 && e.exit_code == 3 && e.term_signal == 0);
    /* A stop after the end is not an error, in either mode. */
    assert_int_equal(maelys__mcpx_instance_stop(
                         l.instance, MAELYS_MCP_EXECUTOR_STOP_GRACEFUL, NULL),
                     0);
    assert_int_equal(maelys__mcpx_instance_stop(
                         l.instance, MAELYS_MCP_EXECUTOR_STOP_FORCED, NULL),
                     0);
    finish(&l);
    LAUNCH(backends[b], &l, "signal", "9");
    e = wait_for(&l, 10000);
    assert_true(e.exited == 1 && e.exit_code == 0 && e.term_signal == 9);
    finish(&l);
  }
}

static void test_runtime_ladder(void** state) {
  (void)state;
  char buf[256];
  for (size_t b = 0; b < 2; b++) {
    if (skip_backend(backends[b]))
      continue;
    /* A child that answers SIGTERM: the graceful rung alone ends it, and
     * nothing escalates behind the runtime's back. */
    launched_t l;
    LAUNCH(backends[b], &l, "term-line", "1");
    assert_true(read_until(l.fd, "ready", buf, sizeof buf, 10000));
    assert_int_equal(maelys__mcpx_instance_stop(
                         l.instance, MAELYS_MCP_EXECUTOR_STOP_GRACEFUL, NULL),
                     0);
    maelys_mcp_executor_exit_t e = wait_for(&l, 5000);
    assert_true(e.exited == 1 && e.exit_code == 0 && e.term_signal == 0);
    assert_true(read_until(l.fd, "got-term", buf, sizeof buf, 2000));
    finish(&l);
    /* A child that ignores it: the graceful rung does not end it, even well
     * past the request's grace (300 ms): GRACEFUL never becomes a kill. */
    LAUNCH(backends[b], &l, "ignore-term", "60000");
    assert_true(read_until(l.fd, "ready", buf, sizeof buf, 10000));
    assert_int_equal(maelys__mcpx_instance_stop(
                         l.instance, MAELYS_MCP_EXECUTOR_STOP_GRACEFUL, NULL),
                     0);
    e = wait_for(&l, 700);
    assert_int_equal(e.exited, 0);
    uint64_t t0 = now_ms();
    assert_int_equal(maelys__mcpx_instance_stop(
                         l.instance, MAELYS_MCP_EXECUTOR_STOP_FORCED, NULL),
                     0);
    e = wait_for(&l, 2000);
    assert_true(e.exited == 1 && e.term_signal == SIGKILL);
    assert_true(now_ms() - t0 < 2000);
    finish(&l);
  }
}

static void test_environment_exact(void** state) {
  (void)state;
  char buf[4096];
  for (size_t b = 0; b < 2; b++) {
    if (skip_backend(backends[b]))
      continue;
    launched_t l;
    LAUNCH(backends[b], &l, "env");
    assert_true(read_until(l.fd, NULL, buf, sizeof buf, 10000));
    /* The child's own environment, read back from inside: exactly the
     * runtime's entries, in its order, nothing added by any layer. */
    assert_string_equal(buf, "PATH=/usr/local/bin:/usr/bin:/bin\nLANG=C\n"
                             "LC_ALL=C\n");
    maelys_mcp_executor_exit_t e = wait_for(&l, 10000);
    assert_true(e.exited == 1 && e.exit_code == 0);
    finish(&l);
  }
}

static void refused(const char* profile, const char* platform,
                    maelys_executor_result_t code, const char* needle) {
  launched_t l;
  char* err = NULL;
  const char* const args[] = {"sleep", "5000", marker, NULL};
  maelys_executor_result_t r = launch_v(profile, platform, &l, &err, args);
  if (r != code || err == NULL || strstr(err, needle) == NULL)
    fail_msg("%s: got %s '%s', wanted %s '%s'", profile ? profile : "(none)",
             maelys_executor_result_name(r), err ? err : "",
             maelys_executor_result_name(code), needle);
  assert_null(l.instance);
  assert_int_equal(l.fd, -1);
  maelys_mcp_executor_error_free(err);
  /* Nothing was launched: no process carries this run's marker. */
  assert_int_equal(marked_pids(marker, NULL, 0), 0);
}

static void test_refusals_launch_nothing(void** state) {
  (void)state;
  refused("seatbelt-readonly", "local", MAELYS_EXECUTOR_ERR_NOT_FOUND,
          "execution profile \"seatbelt-readonly\" refused");
  refused(NULL, "local", MAELYS_EXECUTOR_ERR_NOT_FOUND, "no default profile");
  refused("resolver-error", "local", MAELYS_EXECUTOR_ERR_IO,
          "the profile store is unreadable");
  refused("no-plan", "local", MAELYS_EXECUTOR_ERR_STATE, "no plan");
  refused("posix", "linux-musl-aarch64", MAELYS_EXECUTOR_ERR_UNSUPPORTED,
          "\"linux-musl-aarch64\"");
  refused("external", "local", MAELYS_EXECUTOR_ERR_DENIED, "EXTERNAL_CHANNEL");
}

typedef struct worker {
  const char* backend;
  int code;
  bool ok;
} worker_t;

static void* worker_main(void* arg) {
  worker_t* w = arg;
  char code[16];
  snprintf(code, sizeof code, "%d", w->code);
  for (int round = 0; round < 3; round++) {
    launched_t l;
    const char* const args[] = {"exit", code, NULL};
    if (launch_v(w->backend, "local", &l, NULL, args) != 0)
      return NULL;
    maelys_mcp_executor_exit_t e;
    if (maelys__mcpx_instance_wait(l.instance, 20000, &e, NULL) != 0 ||
        e.exited != 1 || e.exit_code != w->code)
      return NULL;
    finish(&l);
  }
  w->ok = true;
  return NULL;
}

static void test_threads(void** state) {
  (void)state;
  worker_t w[4];
  pthread_t t[4];
  for (int i = 0; i < 4; i++) {
    w[i] = (worker_t){(i % 2 && bwrap_works) ? "bubblewrap" : "posix", 10 + i,
                      false};
    assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    assert_true(w[i].ok);
  }
}

static void test_forked_child_refused(void** state) {
  (void)state;
  launched_t l;
  LAUNCH("posix", &l, "sleep", "60000");
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* The loop thread does not exist here: everything is refused, nothing
     * blocks, and the parent's loop is never woken. */
    launched_t m;
    char* err = NULL;
    const char* const args[] = {"exit", "0", NULL};
    int bad = 0;
    if (launch_v("posix", "local", &m, &err, args) !=
            MAELYS_EXECUTOR_ERR_STATE ||
        strstr(err, "forked child") == NULL)
      bad |= 1;
    maelys_mcp_executor_exit_t e;
    if (maelys__mcpx_instance_wait(l.instance, 10, &e, NULL) !=
        MAELYS_EXECUTOR_ERR_STATE)
      bad |= 2;
    if (maelys__mcpx_instance_stop(l.instance, MAELYS_MCP_EXECUTOR_STOP_FORCED,
                                   NULL) != MAELYS_EXECUTOR_ERR_STATE)
      bad |= 4;
    maelys__mcpx_instance_release(l.instance);
    maelys_mcp_executor_host_release(host);
    _exit(bad);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  /* The parent's execution is untouched by the child's attempts. */
  maelys_mcp_executor_exit_t e = wait_for(&l, 50);
  assert_int_equal(e.exited, 0);
  assert_int_equal(maelys__mcpx_instance_stop(
                       l.instance, MAELYS_MCP_EXECUTOR_STOP_FORCED, NULL),
                   0);
  e = wait_for(&l, 5000);
  assert_true(e.exited == 1 && e.term_signal == SIGKILL);
  finish(&l);
}

static int open_fds(void) {
  int n = 0;
  for (int fd = 0; fd < 1024; fd++)
    n += fcntl(fd, F_GETFD) >= 0;
  return n;
}

static void test_descriptors(void** state) {
  (void)state;
  struct stat before[3], after[3];
  int flags[3];
  for (int i = 0; i < 3; i++) {
    assert_int_equal(fstat(i, &before[i]), 0);
    flags[i] = fcntl(i, F_GETFL);
  }
  int count = open_fds();
  for (size_t b = 0; b < 2; b++) {
    if (skip_backend(backends[b]))
      continue;
    launched_t l;
    LAUNCH(backends[b], &l, "exit", "0");
    (void)wait_for(&l, 10000);
    finish(&l);
  }
  /* Every descriptor of the executions is gone once release returned, and
   * 0-2 are what they were. */
  assert_int_equal(open_fds(), count);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(fstat(i, &after[i]), 0);
    assert_true(before[i].st_dev == after[i].st_dev &&
                before[i].st_ino == after[i].st_ino);
    assert_int_equal(fcntl(i, F_GETFL), flags[i]);
  }
}

static void test_release_never_signals(void** state) {
  (void)state;
  char tag[96];
  snprintf(tag, sizeof tag, "%s-release", marker);
  launched_t l;
  LAUNCH("posix", &l, "sleep", "60000", tag);
  int pids[2];
  uint64_t end = now_ms() + 5000;
  while (marked_pids(tag, pids, 2) != 1 && now_ms() < end)
    usleep(10000);
  assert_int_equal(marked_pids(tag, pids, 2), 1);
  finish(&l);
  /* Released, still running: release neither signalled nor waited. */
  usleep(200000);
  assert_int_equal(marked_pids(tag, NULL, 0), 1);
  char state_path[64], st[512];
  snprintf(state_path, sizeof state_path, "/proc/%d/stat", pids[0]);
  kill(pids[0], SIGKILL);
  /* Reaped in the background: gone entirely, never a zombie. */
  end = now_ms() + 5000;
  bool gone = false;
  while (!gone && now_ms() < end) {
    FILE* f = fopen(state_path, "r");
    gone = f == NULL;
    if (f != NULL) {
      if (fgets(st, sizeof st, f) == NULL)
        gone = true;
      fclose(f);
      usleep(10000);
    }
  }
  assert_true(gone);
}

static maelys_executor_result_t setup_fails(maelys_executor_t* executor,
                                            void* data, char** out_error) {
  (void)executor;
  (void)data;
  return maelys__mcpx_fail(out_error, MAELYS_EXECUTOR_ERR_DENIED,
                           "this distribution permits no backend here");
}

typedef struct registry_setup {
  maelys_mcp_executor_registry_t* registry;
  const char* bwrap;
} registry_setup_t;

static maelys_executor_result_t setup_registry(maelys_executor_t* executor,
                                               void* data, char** out_error) {
  registry_setup_t* s = data;
  maelys_backend_options_t* o = NULL;
  maelys_executor_result_t r = maelys_backend_options_create(&o, out_error);
  if (r == 0)
    r = maelys_backend_options_set(o, "helper", MAELYS_HELPER, out_error);
  if (r == 0)
    r = maelys_backend_options_set(o, "bwrap", s->bwrap, out_error);
  if (r == 0)
    r = maelys_executor_register_backend(executor, maelys_backend_bubblewrap(),
                                         o, out_error);
  maelys_backend_options_destroy(o);
  if (r == 0)
    r = maelys_mcp_executor_registry_check(s->registry, executor, out_error);
  return r;
}

static void test_failed_host(void** state) {
  (void)state;
  maelys_mcp_executor_host_t* h = NULL;
  char* err = NULL;
  int count = open_fds();
  assert_int_equal(maelys_mcp_executor_host_create(setup_fails, NULL, &h, &err),
                   MAELYS_EXECUTOR_ERR_DENIED);
  assert_null(h);
  assert_non_null(strstr(err, "permits no backend"));
  maelys_mcp_executor_error_free(err);
  err = NULL;
  /* A registry whose sandbox profile this host cannot enforce (bwrap is not
   * there, so its probe proved nothing) fails the host: no launcher, no
   * fallback. */
  const char* json =
      "{\"format\":\"maelys-mcp-profiles/1\",\"profiles\":{\"s\":{"
      "\"backend\":\"bubblewrap\",\"plan\":{\"format\":"
      "\"maelys-executor-plan/1\",\"network\":{\"mode\":\"none\"},"
      "\"root\":{\"disposition\":\"readonly\"}}}}}";
  registry_setup_t s = {NULL, "/nonexistent/bwrap"};
  assert_int_equal(maelys_mcp_executor_registry_create(json, strlen(json), 5,
                                                       &s.registry, NULL),
                   0);
  assert_int_equal(
      maelys_mcp_executor_host_create(setup_registry, &s, &h, &err),
      MAELYS_EXECUTOR_ERR_CAPABILITY);
  assert_null(h);
  assert_non_null(strstr(err, "profile s needs"));
  maelys_mcp_executor_error_free(err);
  maelys_mcp_executor_registry_destroy(s.registry);
  /* Its thread and loop are gone. (Under valgrind, which lacks openat2 and
   * seccomp, one pipe pair appears at the first failing registration and
   * stays for the process; it does not appear natively and was not traced
   * further. There, the count is taken again and a second failing host must
   * add nothing.) */
  if (open_fds() != count && getenv("MAELYS_TEST_UNDER_VALGRIND") != NULL) {
    count = open_fds();
    assert_int_equal(
        maelys_mcp_executor_host_create(setup_fails, NULL, &h, NULL),
        MAELYS_EXECUTOR_ERR_DENIED);
  }
  assert_int_equal(open_fds(), count);
}

/* --------------------------------------------------------------- main */

static maelys_executor_result_t setup_both(maelys_executor_t* executor,
                                           void* data, char** out_error) {
  (void)data;
  maelys_backend_options_t* o = NULL;
  maelys_executor_result_t r = maelys_executor_register_backend(
      executor, maelys_backend_posix(), NULL, out_error);
  if (r == 0)
    r = maelys_backend_options_create(&o, out_error);
  if (r == 0)
    r = maelys_backend_options_set(o, "helper", MAELYS_HELPER, out_error);
  if (r == 0)
    r = maelys_executor_register_backend(executor, maelys_backend_bubblewrap(),
                                         o, out_error);
  maelys_backend_options_destroy(o);
  uint64_t mask = 0;
  if (r == 0)
    r = maelys_executor_backend_capabilities(executor, "bubblewrap", &mask,
                                             out_error);
  const uint64_t needed =
      MAELYS_BACKEND_CAP_NETWORK_NONE | MAELYS_BACKEND_CAP_PROCESS_TREE |
      MAELYS_BACKEND_CAP_ROOT_READONLY | MAELYS_BACKEND_CAP_FILESYSTEM_READ;
  bwrap_works = (mask & needed) == needed;
  return r;
}

static int group_setup(void** state) {
  (void)state;
  char* err = NULL;
  snprintf(marker, sizeof marker, "mcpx-marker-%d", (int)getpid());
  if (maelys_mcp_executor_host_create(setup_both, NULL, &host, &err) != 0) {
    fprintf(stderr, "host: %s\n", err);
    return -1;
  }
  return 0;
}

static int group_teardown(void** state) {
  (void)state;
  maelys_mcp_executor_host_release(host);
  return 0;
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exit_codes_and_signals),
      cmocka_unit_test(test_runtime_ladder),
      cmocka_unit_test(test_environment_exact),
      cmocka_unit_test(test_refusals_launch_nothing),
      cmocka_unit_test(test_threads),
      cmocka_unit_test(test_forked_child_refused),
      cmocka_unit_test(test_descriptors),
      cmocka_unit_test(test_release_never_signals),
      cmocka_unit_test(test_failed_host),
  };
  return cmocka_run_group_tests_name("mcp-host", tests, group_setup,
                                     group_teardown);
}
