/*
 * The confining backends against one table of promises (read denied, write
 * denied, write allowed, network none, tree stop, fd layout, closed
 * environment, SIGTERM delivery, no survivors when the host dies), each
 * promise a test per backend: bubblewrap and landlock. Then what is the
 * landlock backend's own: what it refuses (naming the rule), what it proves
 * without a cgroup, and the fallback where user namespaces are blocked --
 * bubblewrap refuses while landlock confines.
 *
 * Run as root and as an unprivileged uid; MAELYS_BWRAP_MUST_WORK=1 makes a
 * backend that cannot confine here a failure instead of a skip.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "marked.h"
#include "maelys/backend.h"

#define ARGS(...) ((const char* const[]){__VA_ARGS__, NULL})

/* What the conformance table needs of a backend; the tree promises also
 * need process_tree, which landlock proves only with a cgroup this user can
 * write (as root here; not as an unprivileged uid without a delegated
 * one), so they are skipped where it is not proved. */
static const uint64_t needed =
    MAELYS_BACKEND_CAP_FILESYSTEM_READ | MAELYS_BACKEND_CAP_FILESYSTEM_WRITE |
    MAELYS_BACKEND_CAP_FILESYSTEM_DENY | MAELYS_BACKEND_CAP_NETWORK_NONE |
    MAELYS_BACKEND_CAP_ROOT_READONLY | MAELYS_BACKEND_CAP_SECCOMP;

/* Whether the plans of this process require the tree (set per test from
 * what the backend proved). */
static bool tree_required = true;

static uint64_t register_landlock(harness_t* h, const char* cgroup) {
  maelys_backend_options_t* o = NULL;
  char* err = NULL;
  assert_int_equal(maelys_backend_options_create(&o, &err), 0);
  assert_int_equal(
      maelys_backend_options_set(o, "launcher", MAELYS_LANDLOCK_LAUNCHER, &err),
      0);
  if (cgroup != NULL)
    assert_int_equal(maelys_backend_options_set(o, "cgroup", cgroup, &err), 0);
  maelys_executor_result_t r = maelys_executor_register_backend(
      h->executor, maelys_backend_landlock(), o, &err);
  maelys_backend_options_destroy(o);
  if (r != MAELYS_EXECUTOR_OK)
    fail_msg("registering landlock: %s", err ? err : "?");
  uint64_t mask = 0;
  assert_int_equal(maelys_executor_backend_capabilities(h->executor, "landlock",
                                                        &mask, NULL),
                   0);
  return mask;
}

/* Registers `backend`; skips (a failure under MAELYS_BWRAP_MUST_WORK=1)
 * when it cannot confine here. */
static uint64_t backend_or_skip(harness_t* h, const char* backend) {
  if (strcmp(backend, "bubblewrap") == 0)
    return harness_bubblewrap_or_skip(h, needed);
  uint64_t mask = register_landlock(h, NULL);
  if ((mask & needed) == needed)
    return mask;
  char* why = NULL;
  maelys_executor_backend_missing_reason(
      h->executor, "landlock", (uint64_t)1 << __builtin_ctzll(needed & ~mask),
      &why, NULL);
  char reason[1024];
  snprintf(reason, sizeof reason, "%s", why ? why : "");
  maelys_executor_string_free(why);
  harness_skip_sandbox(h, "landlock cannot confine here: %s", reason);
}

/* ------------------------------------------------------------ sandboxes */

typedef struct sandbox {
  char dir[64];
  char ws[128];      /* writable */
  char ro[128];      /* readable */
  char ro_file[160]; /* ro/readable */
  char outside[128]; /* exists on the host, granted by nothing */
  char secret[128];  /* denied by a rule, outside every grant */
} sandbox_t;

static void write_file(const char* path, const char* text) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
}

/* The directories, reachable by an unrelated uid (a root host's landlock
 * payload runs as an identity of its own; the workspace is then
 * world-writable, which is what such an identity can write). */
static void sandbox_dirs(sandbox_t* s) {
  snprintf(s->dir, sizeof s->dir, "/tmp/maelys-landlock-test-XXXXXX");
  assert_non_null(mkdtemp(s->dir));
  assert_int_equal(chmod(s->dir, 0755), 0);
  snprintf(s->ws, sizeof s->ws, "%s/ws", s->dir);
  snprintf(s->ro, sizeof s->ro, "%s/ro", s->dir);
  snprintf(s->ro_file, sizeof s->ro_file, "%s/ro/readable", s->dir);
  snprintf(s->outside, sizeof s->outside, "%s/outside", s->dir);
  snprintf(s->secret, sizeof s->secret, "%s/secret", s->dir);
  assert_int_equal(mkdir(s->ws, 0755), 0);
  if (getuid() == 0)
    assert_int_equal(chmod(s->ws, 0777), 0);
  assert_int_equal(mkdir(s->ro, 0755), 0);
  write_file(s->ro_file, "readable\n");
  write_file(s->outside, "outside\n");
  write_file(s->secret, "secret\n");
}

static void rm_rf(const char* path) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
  int r = system(cmd);
  (void)r;
}

/* The plan both backends express: a read-only root, the fixture, /dev, the
 * workspace writable, ro readable, a denied file, network none, the tree. */
static maelys_executor_plan_t* sandbox_plan(const sandbox_t* s) {
  maelys_executor_plan_t* p = NULL;
  char* err = NULL;
  assert_int_equal(maelys_executor_plan_create(&p, NULL), 0);
  assert_int_equal(
      maelys_executor_plan_set_root(p, MAELYS_EXECUTOR_ROOT_READONLY, 0, NULL),
      0);
  assert_int_equal(maelys_executor_plan_add_dev(p, "/dev", NULL), 0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       p, MAELYS_FIXTURE, MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_LITERAL_FILE, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       p, s->ws, MAELYS_EXECUTOR_ACCESS_WRITE,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       p, s->ro, MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  assert_int_equal(
      maelys_executor_plan_add_rule(p, s->secret, MAELYS_EXECUTOR_ACCESS_DENY,
                                    MAELYS_EXECUTOR_SCOPE_LITERAL_FILE, NULL),
      0);
  assert_int_equal(
      maelys_executor_plan_set_network(p, MAELYS_EXECUTOR_NETWORK_NONE, NULL),
      0);
  assert_int_equal(
      maelys_executor_plan_set_process_tree_required(p, tree_required, NULL),
      0);
  if (maelys_executor_plan_seal(p, &err) != MAELYS_EXECUTOR_OK)
    fail_msg("seal: %s", err);
  return p;
}

static void expect_line(const collected_t* out, const char* line) {
  char want[512];
  snprintf(want, sizeof want, "%s\n", line);
  if (out->data == NULL || strstr(out->data, want) == NULL)
    fail_msg("expected the line '%s' in:\n%s", line,
             out->data ? out->data : "");
}

static void expect_blocked(const collected_t* out, const char* name) {
  char want[64];
  snprintf(want, sizeof want, "%s=blocked:", name);
  if (out->data == NULL || strstr(out->data, want) == NULL)
    fail_msg("'%s' was not blocked:\n%s", name, out->data ? out->data : "");
}

/* Runs the fixture with `args` on `backend` under the sandbox's plan. */
static void run_fixture(harness_t* h, const char* backend, const sandbox_t* s,
                        const char* const* args, collected_t* out,
                        waited_t* w) {
  maelys_executor_plan_t* plan = sandbox_plan(s);
  maelys_execution_request_t* req = request_fixture(backend, args);
  assert_int_equal(maelys_execution_request_set_cwd(req, s->ws, NULL), 0);
  run_capture(h, plan, req, out, w);
  if (w->status.outcome == MAELYS_EXEC_OUTCOME_LAUNCH_FAILED)
    fail_msg("launch failed: %s: %s", w->status.launch_step, w->status.message);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
}

static maelys_execution_t* start_ready(harness_t* h,
                                       const maelys_executor_plan_t* plan,
                                       maelys_execution_request_t* req,
                                       collected_t* out) {
  maelys_execution_t* e = NULL;
  char* err = NULL;
  if (maelys_execution_spawn(h->executor, plan, req, &e, &err) != 0)
    fail_msg("spawn: %s", err);
  uv_stream_t* st = NULL;
  assert_int_equal(
      maelys_execution_stream(e, MAELYS_EXEC_STREAM_STDOUT, &st, NULL), 0);
  collect_start(st, out);
  while (out->data == NULL || strstr(out->data, "ready") == NULL) {
    if (out->eof)
      fail_msg("the payload ended before it was ready: %s",
               out->data ? out->data : "");
    uv_run(&h->loop, UV_RUN_ONCE);
  }
  return e;
}

/* ------------------------------------------------------------ promises */

typedef void (*promise_fn)(harness_t* h, const char* backend,
                           const sandbox_t* s);

static void promise_read_denied(harness_t* h, const char* backend,
                                const sandbox_t* s) {
  collected_t out;
  waited_t w;
  run_fixture(h, backend, s,
              ARGS("escape", "read", s->ro_file, "read", s->outside, "read",
                   s->secret, "read", "/etc/passwd"),
              &out, &w);
  const char* first = strstr(out.data, "read=");
  assert_non_null(first);
  assert_int_equal(strncmp(first, "read=open", 9), 0); /* ro/readable */
  const char* rest = strchr(first, '\n');
  for (int i = 0; i < 3; i++) {
    rest = strstr(rest, "read=");
    assert_non_null(rest);
    if (strncmp(rest, "read=blocked:", 13) != 0)
      fail_msg("read %d outside the grants was not blocked:\n%s", i + 1,
               out.data);
    rest++;
  }
  collected_free(&out);
}

static void promise_write_denied(harness_t* h, const char* backend,
                                 const sandbox_t* s) {
  char path[256], ro_path[256];
  snprintf(path, sizeof path, "%s/new", s->dir);
  snprintf(ro_path, sizeof ro_path, "%s/new", s->ro);
  collected_t out;
  waited_t w;
  run_fixture(h, backend, s, ARGS("escape", "write", path), &out, &w);
  expect_blocked(&out, "write");
  collected_free(&out);
  run_fixture(h, backend, s, ARGS("escape", "write", ro_path), &out, &w);
  expect_blocked(&out, "write");
  collected_free(&out);
  assert_int_not_equal(access(path, F_OK), 0);
  assert_int_not_equal(access(ro_path, F_OK), 0);
}

static void promise_write_allowed(harness_t* h, const char* backend,
                                  const sandbox_t* s) {
  char path[256];
  snprintf(path, sizeof path, "%s/written", s->ws);
  collected_t out;
  waited_t w;
  run_fixture(h, backend, s, ARGS("escape", "write", path), &out, &w);
  expect_line(&out, "write=open");
  collected_free(&out);
  assert_int_equal(access(path, F_OK), 0);
}

static void promise_network_none(harness_t* h, const char* backend,
                                 const sandbox_t* s) {
  int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  assert_int_equal(bind(l, (struct sockaddr*)&a, sizeof a), 0);
  assert_int_equal(listen(l, 4), 0);
  assert_int_equal(getsockname(l, (struct sockaddr*)&a, &len), 0);
  char port[16];
  snprintf(port, sizeof port, "%u", (unsigned)ntohs(a.sin_port));
  collected_t out;
  waited_t w;
  run_fixture(h, backend, s, ARGS("escape", "tcp", "127.0.0.1", port), &out,
              &w);
  expect_blocked(&out, "tcp");
  collected_free(&out);
  close(l);
}

/* Invariant 8: a descendant that double-forks and calls setsid() does not
 * survive the stop. */
static void promise_tree_stop(harness_t* h, const char* backend,
                              const sandbox_t* s) {
  char marker[64];
  snprintf(marker, sizeof marker, "daemon-%s-%d", backend, (int)getpid());
  maelys_executor_plan_t* plan = sandbox_plan(s);
  maelys_execution_request_t* req =
      request_fixture(backend, ARGS("daemon", marker));
  collected_t out;
  maelys_execution_t* e = start_ready(h, plan, req, &out);
  assert_non_null(strstr(out.data, "daemon="));
  assert_true(marked_pids(marker, NULL, 0) >= 2);
  stopped_t st;
  memset(&st, 0, sizeof st);
  maelys_execution_stop(e, MAELYS_EXEC_STOP_GRACEFUL_THEN_FORCED, stopped_cb,
                        &st, NULL);
  harness_run_until(h, &st.done);
  harness_run_until(h, &out.eof);
  assert_int_equal(marked_pids(marker, NULL, 0), 0);
  maelys_execution_release(e);
  collected_free(&out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
}

static void promise_fd_layout(harness_t* h, const char* backend,
                              const sandbox_t* s) {
  collected_t out;
  waited_t w;
  run_fixture(h, backend, s, ARGS("fds"), &out, &w);
  expect_line(&out, "fds=0,1,2");
  collected_free(&out);
}

static void promise_closed_env(harness_t* h, const char* backend,
                               const sandbox_t* s) {
  maelys_executor_plan_t* plan = sandbox_plan(s);
  maelys_execution_request_t* req = request_fixture(backend, ARGS("env"));
  assert_int_equal(maelys_execution_request_set_environment_mode(
                       req, MAELYS_EXEC_ENV_EXPLICIT, NULL),
                   0);
  assert_int_equal(
      maelys_execution_request_add_environment(req, "A", "1", NULL), 0);
  assert_int_equal(
      maelys_execution_request_add_environment(req, "B", "two words", NULL), 0);
  collected_t out;
  waited_t w;
  run_capture(h, plan, req, &out, &w);
  assert_string_equal(out.data, "A=1\nB=two words\n");
  collected_free(&out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
}

/* The graceful signal reaches the payload itself. */
static void promise_sigterm(harness_t* h, const char* backend,
                            const sandbox_t* s) {
  maelys_executor_plan_t* plan = sandbox_plan(s);
  maelys_execution_request_t* req =
      request_fixture(backend, ARGS("term-line", "1"));
  collected_t out;
  maelys_execution_t* e = start_ready(h, plan, req, &out);
  stopped_t st;
  waited_t w;
  memset(&st, 0, sizeof st);
  memset(&w, 0, sizeof w);
  maelys_execution_wait(e, waited_cb, &w, NULL);
  maelys_execution_stop(e, MAELYS_EXEC_STOP_GRACEFUL_THEN_FORCED, stopped_cb,
                        &st, NULL);
  harness_run_until(h, &st.done);
  harness_run_until(h, &w.done);
  harness_run_until(h, &out.eof);
  assert_int_equal(st.result, MAELYS_EXEC_STOPPED_GRACEFUL);
  assert_non_null(strstr(out.data, "got-term"));
  assert_int_equal(w.status.outcome, MAELYS_EXEC_OUTCOME_EXITED);
  assert_int_equal(w.status.exit_code, 0);
  maelys_execution_release(e);
  collected_free(&out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
}

/* Whether a cgroup of the landlock launcher `pid` is still there, below
 * this process's cgroup v2 directory (the backend's default parent). */
static bool landlock_cgroup_left(int pid) {
  char rel[1024] = "", point[1024] = "", line[4096];
  FILE* f = fopen("/proc/self/cgroup", "re");
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, "0::", 3) == 0)
      sscanf(line + 3, "%1023s", rel);
  if (f != NULL)
    fclose(f);
  f = fopen("/proc/self/mountinfo", "re");
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    char root[1024], mnt[1024];
    const char* dash = strstr(line, " - ");
    if (dash != NULL && strncmp(dash + 3, "cgroup2 ", 8) == 0 &&
        sscanf(line, "%*s %*s %*s %1023s %1023s", root, mnt) == 2 &&
        strcmp(root, "/") == 0)
      snprintf(point, sizeof point, "%s", mnt);
  }
  if (f != NULL)
    fclose(f);
  if (point[0] == '\0' || rel[0] != '/')
    return false;
  char dir[2100], prefix[64];
  snprintf(dir, sizeof dir, "%s%s", point, strcmp(rel, "/") ? rel : "");
  snprintf(prefix, sizeof prefix, "maelys-landlock-%d-", pid);
  DIR* d = opendir(dir);
  bool found = false;
  struct dirent* e;
  while (d != NULL && !found && (e = readdir(d)) != NULL)
    found = strncmp(e->d_name, prefix, strlen(prefix)) == 0;
  if (d != NULL)
    closedir(d);
  return found;
}

/* Invariant 22: the host process dies (nothing is stopped, nothing is
 * released) while a double-forked daemon runs; nothing survives it. */
static void promise_no_survivors(harness_t* h, const char* backend,
                                 const sandbox_t* s) {
  char marker[64];
  snprintf(marker, sizeof marker, "orphan-%s-%d", backend, (int)getpid());
  int ready[2];
  assert_int_equal(pipe(ready), 0);
  pid_t host = fork();
  assert_true(host >= 0);
  if (host == 0) {
    close(ready[0]);
    harness_t c;
    harness_init(&c, 30000);
    if (strcmp(backend, "landlock") == 0)
      register_landlock(&c, NULL);
    else
      harness_register_bubblewrap(&c);
    maelys_executor_plan_t* plan = sandbox_plan(s);
    maelys_execution_request_t* req =
        request_fixture(backend, ARGS("daemon", marker));
    collected_t out;
    maelys_execution_t* e = start_ready(&c, plan, req, &out);
    int launcher = maelys_execution_pid(e);
    if (write(ready[1], &launcher, sizeof launcher) != sizeof launcher)
      _exit(3);
    _exit(0); /* the host dies with everything still running */
  }
  close(ready[1]);
  int launcher = 0;
  assert_int_equal(read(ready[0], &launcher, sizeof launcher), sizeof launcher);
  close(ready[0]);
  int status = 0;
  waitpid(host, &status, 0);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  uint64_t t0 = harness_now_ms();
  while (marked_pids(marker, NULL, 0) > 0) {
    if (harness_now_ms() - t0 > 5000)
      fail_msg("%d processes of the sandbox outlived their host",
               marked_pids(marker, NULL, 0));
    struct timespec pause = {0, 10 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  /* Nothing stays on disk either: the execution's cgroup is removed. */
  if (strcmp(backend, "landlock") == 0) {
    t0 = harness_now_ms();
    while (landlock_cgroup_left(launcher)) {
      if (harness_now_ms() - t0 > 3000)
        fail_msg("the cgroup of launcher %d outlived its host", launcher);
      struct timespec pause = {0, 10 * 1000 * 1000};
      nanosleep(&pause, NULL);
    }
  }
  (void)h;
}

typedef struct conformance {
  const char* backend;
  const char* promise;
  promise_fn fn;
  bool tree; /* a promise about the whole tree */
} conformance_t;

static void test_conformance(void** state) {
  const conformance_t* c = *state;
  harness_t h;
  harness_init(&h, 60000);
  uint64_t mask = backend_or_skip(&h, c->backend);
  tree_required = (mask & MAELYS_BACKEND_CAP_PROCESS_TREE) != 0;
  if (c->tree && !tree_required) {
    char* why = NULL;
    maelys_executor_backend_missing_reason(
        h.executor, c->backend, MAELYS_BACKEND_CAP_PROCESS_TREE, &why, NULL);
    char reason[1024];
    snprintf(reason, sizeof reason, "%s", why ? why : "");
    maelys_executor_string_free(why);
    harness_skip(&h, "%s does not promise the tree here: %s", c->backend,
                 reason);
  }
  sandbox_t s;
  sandbox_dirs(&s);
  c->fn(&h, c->backend, &s);
  rm_rf(s.dir);
  harness_finish(&h);
}

#define PROMISE(name, tree)                                                    \
  {"bubblewrap", #name, promise_##name, tree}, {                               \
    "landlock", #name, promise_##name, tree                                    \
  }

/* clang-format off */
static conformance_t table[] = {
    PROMISE(read_denied, false),
    PROMISE(write_denied, false),
    PROMISE(write_allowed, false),
    PROMISE(network_none, false),
    PROMISE(tree_stop, true),
    PROMISE(fd_layout, false),
    PROMISE(closed_env, false),
    PROMISE(sigterm, false),
    PROMISE(no_survivors, true),
};
/* clang-format on */

/* --------------------------------------------------------- landlock's own */

/* A plan landlock cannot express is refused at spawn, naming the rule; the
 * launch never starts. */
static void test_refusals_name_the_rule(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  backend_or_skip(&h, "landlock");
  sandbox_t s;
  sandbox_dirs(&s);
  char inside[200];
  snprintf(inside, sizeof inside, "%s/private", s.ws);
  write_file(inside, "private\n");
  maelys_executor_plan_t* p = NULL;
  assert_int_equal(maelys_executor_plan_create(&p, NULL), 0);
  assert_int_equal(
      maelys_executor_plan_set_root(p, MAELYS_EXECUTOR_ROOT_READONLY, 0, NULL),
      0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       p, MAELYS_FIXTURE, MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_LITERAL_FILE, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       p, s.ws, MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  assert_int_equal(
      maelys_executor_plan_add_rule(p, inside, MAELYS_EXECUTOR_ACCESS_DENY,
                                    MAELYS_EXECUTOR_SCOPE_LITERAL_FILE, NULL),
      0);
  assert_int_equal(
      maelys_executor_plan_set_network(p, MAELYS_EXECUTOR_NETWORK_NONE, NULL),
      0);
  assert_int_equal(maelys_executor_plan_seal(p, NULL), 0);
  maelys_execution_request_t* req =
      request_fixture("landlock", ARGS("exit", "0"));
  maelys_execution_t* e = NULL;
  char* err = NULL;
  assert_int_equal(maelys_execution_spawn(h.executor, p, req, &e, &err),
                   MAELYS_EXECUTOR_ERR_UNSUPPORTED);
  assert_null(e);
  char want[256];
  snprintf(want, sizeof want, "rule deny '%s'", inside);
  if (strstr(err, want) == NULL || strstr(err, s.ws) == NULL)
    fail_msg("the refusal does not name the rules: %s", err);
  maelys_executor_error_free(err);
  err = NULL;
  maelys_executor_plan_destroy(p);
  /* What needs a namespace is refused by the capability check, naming
   * what is missing. */
  assert_int_equal(maelys_executor_plan_create(&p, NULL), 0);
  assert_int_equal(
      maelys_executor_plan_set_root(p, MAELYS_EXECUTOR_ROOT_READONLY, 0, NULL),
      0);
  assert_int_equal(maelys_executor_plan_add_tmpfs(p, "/tmp", 65536, NULL), 0);
  assert_int_equal(
      maelys_executor_plan_set_network(p, MAELYS_EXECUTOR_NETWORK_NONE, NULL),
      0);
  assert_int_equal(maelys_executor_plan_seal(p, NULL), 0);
  assert_int_equal(maelys_execution_spawn(h.executor, p, req, &e, &err),
                   MAELYS_EXECUTOR_ERR_CAPABILITY);
  assert_non_null(strstr(err, "tmpfs_size"));
  maelys_executor_error_free(err);
  maelys_executor_plan_destroy(p);
  maelys_execution_request_destroy(req);
  rm_rf(s.dir);
  harness_finish(&h);
}

/* The launch failures of the payload are reported with their step. */
static void test_launch_errors(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  uint64_t mask = backend_or_skip(&h, "landlock");
  tree_required = (mask & MAELYS_BACKEND_CAP_PROCESS_TREE) != 0;
  sandbox_t s;
  sandbox_dirs(&s);
  maelys_executor_plan_t* plan = sandbox_plan(&s);
  maelys_execution_request_t* req =
      request_fixture("landlock", ARGS("exit", "0"));
  /* Exists on the host, but the plan grants nothing there. */
  assert_int_equal(
      maelys_execution_request_set_executable(req, "/bin/true", NULL), 0);
  collected_t out;
  waited_t w;
  run_capture(&h, plan, req, &out, &w);
  assert_int_equal(w.status.outcome, MAELYS_EXEC_OUTCOME_LAUNCH_FAILED);
  assert_string_equal(w.status.launch_step, "execve");
  assert_int_equal(w.status.launch_errno, EACCES);
  collected_free(&out);
  maelys_execution_request_destroy(req);
  req = request_fixture("landlock", ARGS("exit", "7"));
  run_capture(&h, plan, req, &out, &w);
  assert_int_equal(w.status.outcome, MAELYS_EXEC_OUTCOME_EXITED);
  assert_int_equal(w.status.exit_code, 7);
  collected_free(&out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  rm_rf(s.dir);
  harness_finish(&h);
}

/* Without a cgroup (the hierarchy unavailable, as in a container whose
 * cgroupfs is read-only) process_tree is not proved, and a plan that
 * requires it is refused; everything else still confines. */
static void test_no_cgroup_refuses_tree_plans(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  uint64_t mask = register_landlock(&h, "none");
  uint64_t rest = needed & ~MAELYS_BACKEND_CAP_PROCESS_TREE;
  if ((mask & rest) != rest)
    harness_skip_sandbox(&h, "landlock cannot confine here");
  assert_false(mask & MAELYS_BACKEND_CAP_PROCESS_TREE);
  char* why = NULL;
  assert_int_equal(
      maelys_executor_backend_missing_reason(
          h.executor, "landlock", MAELYS_BACKEND_CAP_PROCESS_TREE, &why, NULL),
      0);
  assert_non_null(strstr(why, "cgroup"));
  maelys_executor_string_free(why);
  sandbox_t s;
  sandbox_dirs(&s);
  tree_required = true;
  maelys_executor_plan_t* plan = sandbox_plan(&s);
  maelys_execution_request_t* req =
      request_fixture("landlock", ARGS("exit", "0"));
  maelys_execution_t* e = NULL;
  char* err = NULL;
  assert_int_equal(maelys_execution_spawn(h.executor, plan, req, &e, &err),
                   MAELYS_EXECUTOR_ERR_CAPABILITY);
  assert_non_null(strstr(err, "process_tree"));
  maelys_executor_error_free(err);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  rm_rf(s.dir);
  harness_finish(&h);
}

/* Where user namespaces are blocked (the wrapper denies them by seccomp and
 * drops CAP_SYS_ADMIN, as an unprivileged container does), bubblewrap
 * proves nothing and landlock confines: a read outside the grants is
 * refused in a payload started through it. */
static void test_blocked_userns_falls_back(void** state) {
  (void)state;
  sandbox_t s;
  sandbox_dirs(&s);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* The wrapper re-executes this test binary in child mode. */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
      _exit(20);
    self[n] = '\0';
    execl(MAELYS_NO_USERNS, MAELYS_NO_USERNS, self, "--blocked-child", s.dir,
          (char*)NULL);
    _exit(21);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  rm_rf(s.dir);
  assert_true(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77)
    harness_skip_sandbox(NULL, "landlock cannot confine here");
  if (WEXITSTATUS(status) != 0)
    fail_msg("the blocked-userns child failed with %d", WEXITSTATUS(status));
}

/* In the wrapper: bubblewrap proves nothing, landlock confines. */
static int blocked_child(const char* dir) {
  sandbox_t s;
  memset(&s, 0, sizeof s);
  snprintf(s.dir, sizeof s.dir, "%s", dir);
  snprintf(s.ws, sizeof s.ws, "%s/ws", dir);
  snprintf(s.ro, sizeof s.ro, "%s/ro", dir);
  snprintf(s.ro_file, sizeof s.ro_file, "%s/ro/readable", dir);
  snprintf(s.outside, sizeof s.outside, "%s/outside", dir);
  snprintf(s.secret, sizeof s.secret, "%s/secret", dir);
  harness_t h;
  harness_init(&h, 60000);
  uint64_t bw = harness_register_bubblewrap(&h);
  if (bw & MAELYS_BACKEND_CAP_FILESYSTEM_READ) {
    fprintf(stderr, "bubblewrap confined with user namespaces blocked\n");
    return 1;
  }
  char* diag = NULL;
  maelys_executor_backend_diagnostic(h.executor, "bubblewrap", &diag, NULL);
  if (diag == NULL || strstr(diag, "user namespaces") == NULL) {
    fprintf(stderr, "bubblewrap's refusal does not say why: %s\n",
            diag ? diag : "");
    return 2;
  }
  maelys_executor_string_free(diag);
  uint64_t ll = register_landlock(&h, NULL);
  if ((ll & needed) != needed)
    return 77;
  tree_required = (ll & MAELYS_BACKEND_CAP_PROCESS_TREE) != 0;
  collected_t out;
  waited_t w;
  run_fixture(&h, "landlock", &s,
              ARGS("escape", "read", s.outside, "write", s.secret, "userns"),
              &out, &w);
  int rc = strstr(out.data, "read=blocked:") &&
                   strstr(out.data, "write=blocked:") &&
                   strstr(out.data, "userns=blocked:")
               ? 0
               : 3;
  if (rc != 0)
    fprintf(stderr, "not confined:\n%s", out.data);
  collected_free(&out);
  harness_finish(&h);
  return rc;
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "--blocked-child") == 0)
    return blocked_child(argv[2]);
  struct CMUnitTest tests[sizeof table / sizeof table[0] + 4];
  size_t n = 0;
  static char names[sizeof table / sizeof table[0]][64];
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    snprintf(names[i], sizeof names[i], "%s/%s", table[i].backend,
             table[i].promise);
    tests[n++] =
        (struct CMUnitTest){names[i], test_conformance, NULL, NULL, &table[i]};
  }
  tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_refusals_name_the_rule);
  tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_launch_errors);
  tests[n++] =
      (struct CMUnitTest)cmocka_unit_test(test_no_cgroup_refuses_tree_plans);
  tests[n++] =
      (struct CMUnitTest)cmocka_unit_test(test_blocked_userns_falls_back);
  return harness_exit(
      _cmocka_run_group_tests("test-landlock", tests, n, NULL, NULL));
}
