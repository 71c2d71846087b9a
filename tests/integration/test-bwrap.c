/*
 * The bubblewrap backend end to end: proved capabilities, escape attempts
 * from inside the sandbox (all blocked) and their positive twins, whole-tree
 * stop, no survivors, never host root inside.
 *
 * Where bwrap cannot run, each test is skipped with the reason, unless
 * MAELYS_BWRAP_MUST_WORK=1 (set by CI), which turns a skip into a failure.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <termios.h>
#include <unistd.h>

#include "harness.h"
#include "marked.h"

#define ARGS(...) ((const char* const[]){__VA_ARGS__, NULL})

static const uint64_t needed =
    MAELYS_BACKEND_CAP_FILESYSTEM_READ | MAELYS_BACKEND_CAP_FILESYSTEM_WRITE |
    MAELYS_BACKEND_CAP_FILESYSTEM_DENY | MAELYS_BACKEND_CAP_NETWORK_NONE |
    MAELYS_BACKEND_CAP_ROOT_READONLY | MAELYS_BACKEND_CAP_PROCESS_TREE |
    MAELYS_BACKEND_CAP_SECCOMP | MAELYS_BACKEND_CAP_TMPFS_SIZE |
    MAELYS_BACKEND_CAP_UNPRIVILEGED;

/* Registers bubblewrap; skips (or fails under MAELYS_BWRAP_MUST_WORK=1) when
 * it cannot confine here. */
static bool bwrap_or_skip(harness_t* h) {
  harness_bubblewrap_or_skip(h, needed);
  return true;
}

/* ------------------------------------------------------------ sandboxes */

typedef struct sandbox {
  char dir[64];
  char ws[256]; /* writable */
  char ro[256]; /* readable */
  char ro_file[256];
  char outside[256]; /* exists on the host, not bound */
  char key[256];     /* ws/private/key, denied file */
  char ssh[256];     /* ws/.ssh, denied directory */
} sandbox_t;

static void write_file(const char* path, const char* text) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
}

static void sandbox_dirs(sandbox_t* s) {
  snprintf(s->dir, sizeof s->dir, "/tmp/maelys-bwrap-XXXXXX");
  assert_non_null(mkdtemp(s->dir));
  snprintf(s->ws, sizeof s->ws, "%s/ws", s->dir);
  snprintf(s->ro, sizeof s->ro, "%s/ro", s->dir);
  snprintf(s->ro_file, sizeof s->ro_file, "%s/ro/readable", s->dir);
  snprintf(s->outside, sizeof s->outside, "%s/outside", s->dir);
  snprintf(s->key, sizeof s->key, "%s/ws/private/key", s->dir);
  snprintf(s->ssh, sizeof s->ssh, "%s/ws/.ssh", s->dir);
  assert_int_equal(mkdir(s->ws, 0755), 0);
  assert_int_equal(mkdir(s->ro, 0755), 0);
  char p[300];
  snprintf(p, sizeof p, "%s/private", s->ws);
  assert_int_equal(mkdir(p, 0755), 0);
  snprintf(p, sizeof p, "%s/sub", s->ws);
  assert_int_equal(mkdir(p, 0755), 0);
  assert_int_equal(mkdir(s->ssh, 0700), 0);
  write_file(s->ro_file, "readable\n");
  write_file(s->outside, "outside\n");
  write_file(s->key, "secret-key\n");
  snprintf(p, sizeof p, "%s/id", s->ssh);
  write_file(p, "ssh-secret\n");
}

static void rm_rf(const char* path) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
  int r = system(cmd);
  (void)r;
}

static maelys_executor_plan_t* sandbox_plan(const sandbox_t* s,
                                            maelys_executor_network_t net,
                                            maelys_executor_root_t root,
                                            uint64_t scratch, bool seal) {
  maelys_executor_plan_t* p = NULL;
  char* err = NULL;
  assert_int_equal(maelys_executor_plan_create(&p, NULL), 0);
  assert_int_equal(maelys_executor_plan_set_root(p, root, scratch, NULL), 0);
  assert_int_equal(maelys_executor_plan_add_proc(p, "/proc", NULL), 0);
  assert_int_equal(maelys_executor_plan_add_dev(p, "/dev", NULL), 0);
  /* No private /tmp here: the test's directories live under the host's
   * /tmp, and their parents must be the read-only root inside. */
  assert_int_equal(maelys_executor_plan_add_rule(
                       p, MAELYS_FIXTURE, MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_LITERAL_FILE, NULL),
                   0);
  if (s != NULL) {
    assert_int_equal(maelys_executor_plan_add_rule(
                         p, s->ws, MAELYS_EXECUTOR_ACCESS_WRITE,
                         MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                     0);
    assert_int_equal(maelys_executor_plan_add_rule(
                         p, s->ro, MAELYS_EXECUTOR_ACCESS_READ,
                         MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                     0);
    assert_int_equal(
        maelys_executor_plan_add_rule(p, s->key, MAELYS_EXECUTOR_ACCESS_DENY,
                                      MAELYS_EXECUTOR_SCOPE_LITERAL_FILE, NULL),
        0);
    assert_int_equal(maelys_executor_plan_add_rule(
                         p, s->ssh, MAELYS_EXECUTOR_ACCESS_DENY,
                         MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                     0);
  }
  assert_int_equal(maelys_executor_plan_set_network(p, net, NULL), 0);
  assert_int_equal(maelys_executor_plan_set_process_tree_required(p, 1, NULL),
                   0);
  if (seal && maelys_executor_plan_seal(p, &err) != MAELYS_EXECUTOR_OK)
    fail_msg("seal: %s", err);
  return p;
}

static maelys_execution_request_t* sandbox_request(const sandbox_t* s,
                                                   const char* const* args) {
  maelys_execution_request_t* r = request_fixture("bubblewrap", args);
  if (s != NULL)
    assert_int_equal(maelys_execution_request_set_cwd(r, s->ws, NULL), 0);
  return r;
}

static void run_in_sandbox(harness_t* h, const maelys_executor_plan_t* plan,
                           maelys_execution_request_t* req, collected_t* out,
                           waited_t* w) {
  run_capture(h, plan, req, out, w);
  if (w->status.outcome == MAELYS_EXEC_OUTCOME_LAUNCH_FAILED)
    fail_msg("launch failed: %s: %s", w->status.launch_step, w->status.message);
}

static void expect_line(const collected_t* out, const char* line) {
  char want[512];
  snprintf(want, sizeof want, "%s\n", line);
  if (strstr(out->data, want) == NULL)
    fail_msg("expected the line '%s' in:\n%s", line, out->data);
}

static void expect_blocked(const collected_t* out, const char* name) {
  char want[64];
  snprintf(want, sizeof want, "%s=blocked:", name);
  if (strstr(out->data, want) == NULL)
    fail_msg("'%s' was not blocked:\n%s", name, out->data);
}

/* Host processes whose command line contains `marker`. */
static int count_marked(const char* marker) {
  return marked_pids(marker, NULL, 0);
}

/* ---------------------------------------------------------------- tests */

static void test_capabilities_proved(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  uint64_t mask = 0;
  maelys_executor_backend_capabilities(h.executor, "bubblewrap", &mask, NULL);
  static const uint64_t expected[] = {MAELYS_BACKEND_CAP_USER_NAMESPACE,
                                      MAELYS_BACKEND_CAP_PID_NAMESPACE,
                                      MAELYS_BACKEND_CAP_MOUNT_NAMESPACE,
                                      MAELYS_BACKEND_CAP_NETWORK_NAMESPACE,
                                      MAELYS_BACKEND_CAP_NETWORK_NONE,
                                      MAELYS_BACKEND_CAP_SECCOMP,
                                      MAELYS_BACKEND_CAP_ROOT_READONLY,
                                      MAELYS_BACKEND_CAP_ROOT_EPHEMERAL_WRITE,
                                      MAELYS_BACKEND_CAP_PROCESS_TREE,
                                      MAELYS_BACKEND_CAP_PROCESS_CONFINEMENT,
                                      MAELYS_BACKEND_CAP_TMPFS_SIZE,
                                      MAELYS_BACKEND_CAP_UNPRIVILEGED,
                                      MAELYS_BACKEND_CAP_FILESYSTEM_DENY};
  for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
    if (!(mask & expected[i]))
      fail_msg("capability %s not proved",
               maelys_executor_capability_name(expected[i]));
  /* Never claimed: no mediated frontend exists. */
  assert_false(mask & MAELYS_BACKEND_CAP_NETWORK_MEDIATED_FD4);
  char* why = NULL;
  assert_int_equal(maelys_executor_backend_missing_reason(
                       h.executor, "bubblewrap",
                       MAELYS_BACKEND_CAP_NETWORK_MEDIATED_FD4, &why, NULL),
                   0);
  assert_non_null(strstr(why, "mediated"));
  maelys_executor_string_free(why);
  harness_finish(&h);
}

/* The payload's own status is reported, not bwrap's. */
static void test_exit_status_is_the_payloads(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  maelys_executor_plan_t* plan =
      sandbox_plan(NULL, MAELYS_EXECUTOR_NETWORK_NONE,
                   MAELYS_EXECUTOR_ROOT_READONLY, 0, true);
  collected_t out;
  waited_t w;
  maelys_execution_request_t* req = sandbox_request(NULL, ARGS("exit", "3"));
  run_in_sandbox(&h, plan, req, &out, &w);
  assert_int_equal(w.status.outcome, MAELYS_EXEC_OUTCOME_EXITED);
  assert_int_equal(w.status.exit_code, 3);
  collected_free(&out);
  maelys_execution_request_destroy(req);
  req = sandbox_request(NULL, ARGS("signal", "9"));
  run_in_sandbox(&h, plan, req, &out, &w);
  assert_int_equal(w.status.outcome, MAELYS_EXEC_OUTCOME_SIGNALED);
  assert_int_equal(w.status.term_signal, 9);
  collected_free(&out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

/* A launcher killed from outside before its payload started ran no payload:
 * that is a failed launch naming the signal, not the payload's death by it
 * (the CLI exited 137 and said nothing, as if the payload had been
 * killed). A forced stop during setup is still reported as the stop's
 * signal. */
static void test_launcher_killed_before_the_payload(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  maelys_executor_plan_t* plan =
      sandbox_plan(NULL, MAELYS_EXECUTOR_NETWORK_NONE,
                   MAELYS_EXECUTOR_ROOT_READONLY, 0, true);
  for (int stopped = 0; stopped < 2; stopped++) {
    maelys_execution_request_t* req = sandbox_request(NULL, ARGS("exit", "0"));
    maelys_execution_t* e = NULL;
    char* err = NULL;
    if (maelys_execution_spawn(h.executor, plan, req, &e, &err) !=
        MAELYS_EXECUTOR_OK)
      fail_msg("spawn: %s", err);
    if (stopped)
      assert_int_equal(
          maelys_execution_stop(e, MAELYS_EXEC_STOP_FORCED, NULL, NULL, NULL),
          0);
    else
      assert_int_equal(kill(maelys_execution_pid(e), SIGKILL), 0);
    waited_t w = {0};
    assert_int_equal(maelys_execution_wait(e, waited_cb, &w, NULL), 0);
    harness_run_until(&h, &w.done);
    if (stopped) {
      assert_int_equal(w.status.outcome, MAELYS_EXEC_OUTCOME_SIGNALED);
      assert_int_equal(w.status.term_signal, SIGKILL);
      assert_int_equal(w.status.stop_stage, MAELYS_EXEC_STOP_STAGE_FORCED);
    } else {
      if (w.status.outcome != MAELYS_EXEC_OUTCOME_LAUNCH_FAILED)
        fail_msg("outcome %d (signal %d), not a failed launch",
                 (int)w.status.outcome, w.status.term_signal);
      assert_string_equal(w.step, "sandbox-setup");
      if (strstr(w.message, "killed by signal 9 (SIGKILL) before the payload "
                            "started") == NULL)
        fail_msg("message: %s", w.message);
    }
    maelys_execution_release(e);
    maelys_execution_request_destroy(req);
  }
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

/* Launch errors inside the sandbox are launch errors, with their cause. */
static void test_launch_errors(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  maelys_executor_plan_t* plan =
      sandbox_plan(NULL, MAELYS_EXECUTOR_NETWORK_NONE,
                   MAELYS_EXECUTOR_ROOT_READONLY, 0, true);
  collected_t out;
  waited_t w;
  /* A program the sandbox does not contain: the helper reports execve. */
  maelys_execution_request_t* req = sandbox_request(NULL, ARGS("exit", "0"));
  assert_int_equal(
      maelys_execution_request_set_executable(req, "/usr/bin/absent", NULL), 0);
  run_capture(&h, plan, req, &out, &w);
  assert_int_equal(w.status.outcome, MAELYS_EXEC_OUTCOME_LAUNCH_FAILED);
  assert_string_equal(w.status.launch_step, "execve");
  assert_int_equal(w.status.launch_errno, ENOENT);
  collected_free(&out);
  maelys_execution_request_destroy(req);
  /* A sandbox that cannot be set up: bwrap's own message, not an exit
   * status. */
  req = sandbox_request(NULL, ARGS("exit", "0"));
  assert_int_equal(maelys_execution_request_set_cwd(req, "/no/such/dir", NULL),
                   0);
  run_capture(&h, plan, req, &out, &w);
  assert_int_equal(w.status.outcome, MAELYS_EXEC_OUTCOME_LAUNCH_FAILED);
  assert_string_equal(w.status.launch_step, "sandbox-setup");
  assert_non_null(strstr(w.status.message, "bwrap"));
  assert_non_null(strstr(w.status.message, "/no/such/dir"));
  collected_free(&out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

typedef struct listener {
  int tcp;
  int port;
  int abstract;
  char abstract_name[64];
} listener_t;

static void listen_loopback(listener_t* l) {
  l->tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(l->tcp, (struct sockaddr*)&a, sizeof a), 0);
  assert_int_equal(listen(l->tcp, 16), 0);
  socklen_t len = sizeof a;
  getsockname(l->tcp, (struct sockaddr*)&a, &len);
  l->port = ntohs(a.sin_port);
  static int serial;
  snprintf(l->abstract_name, sizeof l->abstract_name, "maelys-test-%d-%d",
           (int)getpid(), serial++);
  l->abstract = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un u;
  memset(&u, 0, sizeof u);
  u.sun_family = AF_UNIX;
  size_t n = strlen(l->abstract_name);
  memcpy(u.sun_path + 1, l->abstract_name, n);
  assert_int_equal(
      bind(l->abstract, (struct sockaddr*)&u,
           (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)),
      0);
  assert_int_equal(listen(l->abstract, 16), 0);
}

/* Escape attempts from inside the sandbox: every one is blocked. */
static void test_escapes_blocked(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  sandbox_t s;
  sandbox_dirs(&s);
  listener_t l;
  listen_loopback(&l);
  char port[16], hostpid[16], hostproc[64], via_dots[300], link_path[300],
      link_target[300], hard_path[300], ssh_id[300], ro_write[300];
  snprintf(port, sizeof port, "%d", l.port);
  snprintf(hostpid, sizeof hostpid, "%d", (int)getpid());
  /* "See" a host process: its /proc entry does not exist inside. */
  snprintf(hostproc, sizeof hostproc, "/proc/%d/status", (int)getpid());
  snprintf(via_dots, sizeof via_dots, "%s/sub/../private/key", s.ws);
  snprintf(link_path, sizeof link_path, "%s/link", s.ws);
  snprintf(link_target, sizeof link_target, "%s", s.key);
  snprintf(hard_path, sizeof hard_path, "%s/hard", s.ws);
  snprintf(ssh_id, sizeof ssh_id, "%s/id", s.ssh);
  snprintf(ro_write, sizeof ro_write, "%s/new", s.ro);
  /* A descriptor the host opened without O_CLOEXEC must not reach it. */
  int leak = open("/dev/null", O_RDONLY);
  int leak_high = fcntl(leak, F_DUPFD, 50);
  maelys_executor_plan_t* plan = sandbox_plan(
      &s, MAELYS_EXECUTOR_NETWORK_NONE, MAELYS_EXECUTOR_ROOT_READONLY, 0, true);
  maelys_execution_request_t* req = sandbox_request(
      &s,
      ARGS("escape", "write", s.outside, "write", ro_write, "write",
           "/created-in-root", "read", s.key, "read", via_dots, "read", ssh_id,
           "symlink", link_target, link_path, "hardlink", s.key, hard_path,
           "tcp", "127.0.0.1", port, "abstract", l.abstract_name, "tiocsti",
           "ptrace", "userns", "mount", "kill", hostpid, "proc-sys"));
  collected_t out;
  waited_t w;
  run_in_sandbox(&h, plan, req, &out, &w);
  print_message("%s", out.data);
  /* write outside the writable set, in a read-only bind, in the root */
  const char* p = out.data;
  assert_non_null(strstr(p, "write=blocked:"));
  assert_null(strstr(p, "write=open"));
  struct stat st;
  assert_int_equal(stat(s.outside, &st), 0);
  assert_int_equal(st.st_size, 8); /* unchanged */
  assert_int_equal(stat(ro_write, &st), -1);
  /* the DENY paths: directly, through "..", through a symlink and a
   * hardlink placed in the writable directory, and a denied directory */
  assert_null(strstr(p, "read=open"));
  expect_blocked(&out, "read");
  expect_blocked(&out, "symlink");
  expect_blocked(&out, "hardlink");
  expect_blocked(&out, "tcp");
  expect_blocked(&out, "abstract");
  expect_line(&out, "tiocsti=blocked:1");
  expect_blocked(&out, "ptrace");
  expect_blocked(&out, "userns");
  expect_blocked(&out, "mount");
  expect_blocked(&out, "kill");
  expect_blocked(&out, "proc-sys");
  assert_int_equal(w.status.exit_code, 0);
  collected_free(&out);
  maelys_execution_request_destroy(req);

  /* The layout: exactly 0, 1 and 2 in CAPTURED mode. */
  req = sandbox_request(&s, ARGS("fds"));
  run_in_sandbox(&h, plan, req, &out, &w);
  assert_string_equal(out.data, "fds=0,1,2\n");
  collected_free(&out);
  maelys_execution_request_destroy(req);

  /* The environment: exactly the request's. */
  setenv("MAELYS_HOST_SECRET", "leak", 1);
  req = sandbox_request(&s, ARGS("env"));
  assert_int_equal(maelys_execution_request_set_environment_mode(
                       req, MAELYS_EXEC_ENV_EXPLICIT, NULL),
                   0);
  assert_int_equal(
      maelys_execution_request_add_environment(req, "ONLY", "this", NULL), 0);
  run_in_sandbox(&h, plan, req, &out, &w);
  assert_string_equal(out.data, "ONLY=this\n");
  unsetenv("MAELYS_HOST_SECRET");
  collected_free(&out);
  maelys_execution_request_destroy(req);

  close(leak);
  close(leak_high);
  close(l.tcp);
  close(l.abstract);
  maelys_executor_plan_destroy(plan);
  rm_rf(s.dir);
  harness_finish(&h);
}

/* Files of the writable directory (not below denied ones) with a set-id bit
 * or a capability attribute. */
static int setid_files(const char* dir, char* first, size_t size) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "find '%s' \\( -perm -4000 -o -perm -2000 \\) -print; "
           "getfattr -R -m security.capability --absolute-names '%s' "
           "2>/dev/null | grep '^# file:'",
           dir, dir);
  FILE* f = popen(cmd, "r");
  assert_non_null(f);
  int n = 0;
  char line[512];
  while (fgets(line, sizeof line, f) != NULL) {
    if (n++ == 0)
      snprintf(first, size, "%s", line);
  }
  pclose(f);
  return n;
}

/* Invariant 17: no file leaves a sandbox set-user-id, set-group-id or with a
 * file capability, by any system-call route; ordinary modes still work. */
static void test_setid_never_leaves(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  sandbox_t s;
  sandbox_dirs(&s);
  maelys_executor_plan_t* plan =
      sandbox_plan(&s, MAELYS_EXECUTOR_NETWORK_INHERIT,
                   MAELYS_EXECUTOR_ROOT_READONLY, 0, true);
  maelys_execution_request_t* req =
      sandbox_request(&s, ARGS("escape", "setid", s.ws));
  collected_t out;
  waited_t w;
  run_in_sandbox(&h, plan, req, &out, &w);
  print_message("%s", out.data);
  static const char* const routes[] = {
      "setid-chmod-suid", "setid-chmod-sgid", "setid-chmod-both",
      "setid-fchmod",     "setid-fchmodat",   "setid-fchmodat2",
      "setid-open",       "setid-openat",     "setid-creat",
      "setid-tmpfile",    "setid-mknod",      "setid-mknodat",
      "setid-openat2",    "setid-dir-sgid",   "setid-fcap"};
  for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
    expect_blocked(&out, routes[i]);
  assert_null(strstr(out.data, "=open\n"));
  /* openat2 answers ENOSYS so that libc falls back to a filtered openat. */
  expect_line(&out, "setid-openat2=blocked:38");
  expect_line(&out, "setid-newer-call=blocked:38");
  expect_line(&out, "plain-modes=ok");
  char first[512] = "";
  int n = setid_files(s.ws, first, sizeof first);
  if (n != 0)
    fail_msg("%d set-id or capable files left on the host, first: %s", n,
             first);
  collected_free(&out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  rm_rf(s.dir);
  harness_finish(&h);
}

/* Invariant 18: no route makes a host system tree writable -- by name, and
 * (as root) through a bind mount of /etc elsewhere: /var (package databases,
 * spools), /opt, /srv, /tmp itself and a home's dot-entries included. */
static void test_system_trees_never_writable(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  char alias[] = "/tmp/maelys-alias-XXXXXX";
  assert_non_null(mkdtemp(alias));
  bool mounted =
      getuid() == 0 && mount("/etc", alias, "none", MS_BIND, NULL) == 0;
  const char* refused[] = {"/etc",
                           "/usr/share",
                           "/",
                           "/var",
                           "/var/lib/dpkg",
                           "/var/spool",
                           "/opt",
                           "/srv",
                           "/tmp",
                           "/var/tmp",
                           "/home",
                           "/root",
                           "/root/.ssh",
                           "/home/someone/.config",
                           "/lib",
                           "/run/user",
                           mounted ? alias : NULL};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    if (refused[i] == NULL)
      continue;
    for (int as_bind = 0; as_bind < 2; as_bind++) {
      maelys_executor_plan_t* p = NULL;
      assert_int_equal(maelys_executor_plan_create(&p, NULL), 0);
      assert_int_equal(maelys_executor_plan_set_root(
                           p, MAELYS_EXECUTOR_ROOT_READONLY, 0, NULL),
                       0);
      assert_int_equal(maelys_executor_plan_set_network(
                           p, MAELYS_EXECUTOR_NETWORK_NONE, NULL),
                       0);
      if (as_bind)
        assert_int_equal(
            maelys_executor_plan_add_bind(p, refused[i], "/w", 1,
                                          MAELYS_EXECUTOR_MISSING_SKIP, NULL),
            0);
      else
        assert_int_equal(maelys_executor_plan_add_rule(
                             p, refused[i], MAELYS_EXECUTOR_ACCESS_WRITE,
                             MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                         0);
      assert_int_equal(maelys_executor_plan_seal(p, NULL), 0);
      maelys_execution_request_t* req =
          request_fixture("bubblewrap", ARGS("exit", "0"));
      maelys_execution_t* e = NULL;
      char* err = NULL;
      assert_int_equal(maelys_execution_spawn(h.executor, p, req, &e, &err),
                       MAELYS_EXECUTOR_ERR_DENIED);
      if (strstr(err, "system tree") == NULL)
        fail_msg("%s: %s", refused[i], err);
      assert_null(e);
      maelys_executor_error_free(err);
      maelys_execution_request_destroy(req);
      maelys_executor_plan_destroy(p);
    }
  }
  if (mounted)
    umount2(alias, MNT_DETACH);
  rmdir(alias);
  harness_finish(&h);
}

/* Spawns `path` writable (a rule, or a file bind) with the bubblewrap backend;
 * returns the result and the error (free it). A launch that succeeds runs to
 * its end. */
static int spawn_writable(harness_t* h, const char* path, bool file,
                          char** err) {
  maelys_executor_plan_t* p = NULL;
  assert_int_equal(maelys_executor_plan_create(&p, NULL), 0);
  assert_int_equal(
      maelys_executor_plan_set_root(p, MAELYS_EXECUTOR_ROOT_READONLY, 0, NULL),
      0);
  assert_int_equal(
      maelys_executor_plan_set_network(p, MAELYS_EXECUTOR_NETWORK_NONE, NULL),
      0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       p, MAELYS_FIXTURE, MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_LITERAL_FILE, NULL),
                   0);
  if (file)
    assert_int_equal(maelys_executor_plan_add_bind(
                         p, path, "/w", 1, MAELYS_EXECUTOR_MISSING_FAIL, NULL),
                     0);
  else
    assert_int_equal(maelys_executor_plan_add_rule(
                         p, path, MAELYS_EXECUTOR_ACCESS_WRITE,
                         MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                     0);
  assert_int_equal(maelys_executor_plan_seal(p, NULL), 0);
  maelys_execution_request_t* req =
      request_fixture("bubblewrap", ARGS("exit", "0"));
  maelys_execution_t* e = NULL;
  *err = NULL;
  int r = maelys_execution_spawn(h->executor, p, req, &e, err);
  if (r == 0) {
    waited_t w = {0};
    maelys_execution_wait(e, waited_cb, &w, NULL);
    harness_run_until(h, &w.done);
    if (w.status.outcome != MAELYS_EXEC_OUTCOME_EXITED)
      fail_msg("%s: %s %s", path, w.step, w.message);
    assert_int_equal(w.status.exit_code, 0);
    maelys_execution_release(e);
  } else {
    assert_null(e);
  }
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(p);
  return r;
}

static void expect_refused(harness_t* h, const char* path, bool file,
                           const char* why) {
  char* err = NULL;
  assert_int_equal(spawn_writable(h, path, file, &err),
                   MAELYS_EXECUTOR_ERR_DENIED);
  if (err == NULL || strstr(err, why) == NULL)
    fail_msg("%s: expected '%s' in: %s", path, why, err ? err : "(none)");
  maelys_executor_error_free(err);
}

/* Invariants 17 and 18: what a writable tree may hold. A set-uid or set-gid
 * file already in it (a payload keeps the bit when it rewrites one through a
 * shared mapping), a file with capabilities, a mount below it, a writable file
 * with several names: each refuses the launch, naming the file. A clean
 * directory of one's own below /var/tmp is fine. */
static void test_writable_tree_contents(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  char dir[] = "/var/tmp/maelys-contents-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char sub[PATH_MAX], file[PATH_MAX + 16], other[PATH_MAX], cmd[3 * PATH_MAX];
  snprintf(sub, sizeof sub, "%s/a/b", dir);
  snprintf(cmd, sizeof cmd, "mkdir -p %s", sub);
  assert_int_equal(system(cmd), 0);
  char* err = NULL;
  assert_int_equal(spawn_writable(&h, dir, false, &err), 0);
  snprintf(file, sizeof file, "%s/tool", sub);
  int fd = open(file, O_CREAT | O_WRONLY | O_CLOEXEC, 0755);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(chmod(file, 04755), 0);
  expect_refused(&h, dir, false, "set-uid");
  assert_int_equal(chmod(file, 02755), 0);
  expect_refused(&h, dir, false, "set-gid");
  /* set-gid without group execute is mandatory locking's mark, not set-gid
   * execution: harmless. */
  assert_int_equal(chmod(file, 02745 & ~S_IXGRP), 0);
  assert_int_equal(spawn_writable(&h, dir, false, &err), 0);
  assert_int_equal(chmod(file, 0755), 0);
  if (getuid() == 0) {
    /* VFS_CAP_REVISION_2 with cap_net_raw permitted and effective. */
    const unsigned char cap[20] = {0x01, 0x00, 0x00, 0x02, 0x00, 0x20};
    assert_int_equal(setxattr(file, "security.capability", cap, sizeof cap, 0),
                     0);
    expect_refused(&h, dir, false, "capabilities");
    assert_int_equal(removexattr(file, "security.capability"), 0);
    assert_int_equal(mount("none", sub, "tmpfs", 0, "size=64k"), 0);
    expect_refused(&h, dir, false, "mount point");
    assert_int_equal(umount2(sub, MNT_DETACH), 0);
  }
  snprintf(other, sizeof other, "%s/alias", dir);
  assert_int_equal(link(file, other), 0);
  expect_refused(&h, other, true, "more than one name");
  assert_int_equal(unlink(other), 0);
  assert_int_equal(spawn_writable(&h, dir, false, &err), 0);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
  harness_finish(&h);
}

/* Registers bubblewrap with `helper` on a fresh executor; returns its mask
 * and diagnostic (free it). */
static uint64_t register_with_helper(harness_t* h, const char* helper,
                                     char** diag) {
  maelys_backend_options_t* o = NULL;
  assert_int_equal(maelys_backend_options_create(&o, NULL), 0);
  assert_int_equal(maelys_backend_options_set(o, "helper", helper, NULL), 0);
  assert_int_equal(maelys_executor_register_backend(
                       h->executor, maelys_backend_bubblewrap(), o, NULL),
                   0);
  maelys_backend_options_destroy(o);
  uint64_t mask = 0;
  maelys_executor_backend_capabilities(h->executor, "bubblewrap", &mask, NULL);
  maelys_executor_backend_diagnostic(h->executor, "bubblewrap", diag, NULL);
  return mask;
}

/* Invariant 18 for the programs the backend executes: a helper another user
 * could have replaced is refused; one inside a writable path of the plan is
 * refused; one swapped after the check is never executed. */
static void test_untrusted_programs_refused(void** state) {
  (void)state;
  harness_t probe;
  harness_init(&probe, 60000);
  if (!bwrap_or_skip(&probe))
    return;
  harness_finish(&probe);
  char dir[] = "/tmp/maelys-helpers-XXXXXX";
  assert_non_null(mkdtemp(dir));
  chmod(dir, 0755);
  char helper[128], cmd[512];
  snprintf(helper, sizeof helper, "%s/helper", dir);
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", MAELYS_HELPER, helper);
  assert_int_equal(system(cmd), 0);
  /* Group-writable: anyone of the group could replace what runs. */
  chmod(helper, 0775);
  harness_t h;
  harness_init(&h, 60000);
  char* diag = NULL;
  assert_int_equal(register_with_helper(&h, helper, &diag), 0);
  if (strstr(diag, "invariant 18") == NULL)
    fail_msg("diagnostic: %s", diag);
  maelys_executor_string_free(diag);
  harness_finish(&h);
  chmod(helper, 0755);
  if (getuid() == 0) {
    /* As root, a helper owned by anyone but root. */
    assert_int_equal(chown(helper, 12345, 12345), 0);
    harness_init(&h, 60000);
    diag = NULL;
    assert_int_equal(register_with_helper(&h, helper, &diag), 0);
    assert_non_null(strstr(diag, "owned by uid 12345"));
    maelys_executor_string_free(diag);
    harness_finish(&h);
    assert_int_equal(chown(helper, 0, 0), 0);
  }
  /* Trusted: then a plan that makes its directory writable is refused. */
  harness_init(&h, 60000);
  diag = NULL;
  uint64_t mask = register_with_helper(&h, helper, &diag);
  maelys_executor_string_free(diag);
  assert_true((mask & needed) == needed);
  maelys_executor_plan_t* p =
      sandbox_plan(NULL, MAELYS_EXECUTOR_NETWORK_NONE,
                   MAELYS_EXECUTOR_ROOT_READONLY, 0, false);
  assert_int_equal(maelys_executor_plan_add_rule(
                       p, dir, MAELYS_EXECUTOR_ACCESS_WRITE,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_seal(p, NULL), 0);
  maelys_execution_request_t* req = sandbox_request(NULL, ARGS("exit", "0"));
  maelys_execution_t* e = NULL;
  char* err = NULL;
  assert_int_equal(maelys_execution_spawn(h.executor, p, req, &e, &err),
                   MAELYS_EXECUTOR_ERR_DENIED);
  assert_non_null(strstr(err, "program the sandbox backend executes"));
  maelys_executor_error_free(err);
  err = NULL;
  maelys_executor_plan_destroy(p);
  /* Swapped after the check: never executed. */
  char moved[160];
  snprintf(moved, sizeof moved, "%s/original", dir);
  assert_int_equal(rename(helper, moved), 0);
  snprintf(cmd, sizeof cmd,
           "printf '#!/bin/sh\ntouch %s/swapped-ran\n' > '%s' && chmod 755 "
           "'%s'",
           dir, helper, helper);
  assert_int_equal(system(cmd), 0);
  p = sandbox_plan(NULL, MAELYS_EXECUTOR_NETWORK_NONE,
                   MAELYS_EXECUTOR_ROOT_READONLY, 0, true);
  assert_int_equal(maelys_execution_spawn(h.executor, p, req, &e, &err),
                   MAELYS_EXECUTOR_ERR_DENIED);
  assert_non_null(strstr(err, "replaced after it was checked"));
  maelys_executor_error_free(err);
  char ran[160];
  snprintf(ran, sizeof ran, "%s/swapped-ran", dir);
  assert_int_equal(access(ran, F_OK), -1);
  maelys_executor_plan_destroy(p);
  maelys_execution_request_destroy(req);
  harness_finish(&h);
  rm_rf(dir);
}

/* Reads the terminal's master side into a buffer, once the payload said it
 * got through its flood without anyone reading. */
typedef struct terminal_reader {
  uv_poll_t poll;
  int master;
  collected_t* out; /* the payload's stdout */
  char* seen;
  size_t len, cap;
} terminal_reader_t;

static void on_master(uv_poll_t* p, int status, int events) {
  terminal_reader_t* t = p->data;
  (void)status;
  (void)events;
  if (t->out->data == NULL || strstr(t->out->data, "flooded") == NULL)
    return; /* not yet: nobody reads the terminal during the flood */
  for (;;) {
    if (t->len + 65536 > t->cap) {
      t->cap = t->cap ? 2 * t->cap : 1 << 20;
      t->seen = realloc(t->seen, t->cap);
      assert_non_null(t->seen);
    }
    ssize_t r = read(t->master, t->seen + t->len, t->cap - t->len - 1);
    if (r <= 0)
      break;
    t->len += (size_t)r;
    t->seen[t->len] = '\0';
  }
}

/* Invariant 21: with the host's stderr a terminal, the confined payload gets
 * a pipe, not the terminal; its escape sequences arrive inert; a terminal
 * nobody reads never blocks it (output past the relay's bound is dropped,
 * and that is said). */
static void test_no_terminal_enters(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
  assert_true(master >= 0);
  assert_int_equal(grantpt(master), 0);
  assert_int_equal(unlockpt(master), 0);
  int slave = open(ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
  assert_true(slave >= 0);
  int saved = dup(2);
  assert_int_equal(dup2(slave, 2), 2);
  maelys_executor_plan_t* plan =
      sandbox_plan(NULL, MAELYS_EXECUTOR_NETWORK_NONE,
                   MAELYS_EXECUTOR_ROOT_READONLY, 0, true);
  maelys_execution_request_t* req = sandbox_request(NULL, ARGS("terminal"));
  maelys_execution_t* e = NULL;
  char* err = NULL;
  if (maelys_execution_spawn(h.executor, plan, req, &e, &err) != 0)
    fail_msg("spawn: %s", err);
  dup2(saved, 2);
  close(saved);
  collected_t out;
  uv_stream_t* s = NULL;
  maelys_execution_stream(e, MAELYS_EXEC_STREAM_STDOUT, &s, NULL);
  collect_start(s, &out);
  terminal_reader_t t = {.master = master, .out = &out};
  uv_poll_init(&h.loop, &t.poll, master);
  t.poll.data = &t;
  uv_poll_start(&t.poll, UV_READABLE, on_master);
  waited_t w;
  memset(&w, 0, sizeof w);
  maelys_execution_wait(e, waited_cb, &w, NULL);
  harness_run_until(&h, &w.done);
  on_master(&t.poll, 0, 0);
  uv_close((uv_handle_t*)&t.poll, NULL);
  expect_line(&out, "isatty=000 tcgetattr=0 winsize=0");
  expect_line(&out, "flooded");
  assert_int_equal(w.status.exit_code, 0);
  assert_non_null(t.seen);
  assert_non_null(strstr(t.seen, "osc52:\\x1b]52;c;SGVsbG8=\\x07"));
  assert_non_null(strstr(t.seen, "clear:\\x1b[2J"));
  assert_non_null(strstr(t.seen, "c1:\\u009b"));
  assert_null(strchr(t.seen, '\x1b'));
  assert_non_null(strstr(t.seen, "bytes of output dropped"));
  free(t.seen);
  maelys_execution_release(e);
  close(slave);
  close(master);
  collected_free(&out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

static void on_master_any(uv_poll_t* p, int status, int events) {
  terminal_reader_t* t = p->data;
  (void)status;
  (void)events;
  for (;;) {
    if (t->len + 4096 > t->cap) {
      t->cap = t->cap ? 2 * t->cap : 65536;
      t->seen = realloc(t->seen, t->cap);
      assert_non_null(t->seen);
    }
    ssize_t r = read(t->master, t->seen + t->len, t->cap - t->len - 1);
    if (r <= 0)
      break;
    t->len += (size_t)r;
    t->seen[t->len] = '\0';
  }
}

/* Invariant 21, byte by byte: with the host's stderr a terminal, raw 8-bit
 * C1 controls (CSI 0x9B, OSC 0x9D, ST 0x9C) and invalid UTF-8 reach it
 * escaped, and valid characters split across the payload's writes (so
 * across the relay's reads) reach it whole. */
static void test_terminal_gets_no_raw_c1(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
  assert_true(master >= 0);
  assert_int_equal(grantpt(master), 0);
  assert_int_equal(unlockpt(master), 0);
  int slave = open(ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
  assert_true(slave >= 0);
  /* The terminal passes bytes as they are (no output processing). */
  struct termios tio;
  assert_int_equal(tcgetattr(slave, &tio), 0);
  cfmakeraw(&tio);
  assert_int_equal(tcsetattr(slave, TCSANOW, &tio), 0);
  int saved = dup(2);
  assert_int_equal(dup2(slave, 2), 2);
  maelys_executor_plan_t* plan =
      sandbox_plan(NULL, MAELYS_EXECUTOR_NETWORK_NONE,
                   MAELYS_EXECUTOR_ROOT_READONLY, 0, true);
  maelys_execution_request_t* req =
      sandbox_request(NULL, ARGS("c1-bytes", "2"));
  maelys_execution_t* e = NULL;
  char* err = NULL;
  if (maelys_execution_spawn(h.executor, plan, req, &e, &err) != 0)
    fail_msg("spawn: %s", err);
  dup2(saved, 2);
  close(saved);
  collected_t out;
  memset(&out, 0, sizeof out);
  terminal_reader_t t = {.master = master, .out = &out};
  uv_poll_init(&h.loop, &t.poll, master);
  t.poll.data = &t;
  uv_poll_start(&t.poll, UV_READABLE, on_master_any);
  waited_t w;
  memset(&w, 0, sizeof w);
  maelys_execution_wait(e, waited_cb, &w, NULL);
  harness_run_until(&h, &w.done);
  while (t.seen == NULL || strstr(t.seen, "end\n") == NULL)
    uv_run(&h.loop, UV_RUN_ONCE);
  uv_close((uv_handle_t*)&t.poll, NULL);
  assert_int_equal(w.status.exit_code, 0);
  static const char want[] =
      "raw:\\x9b2J osc:\\x9d0;t\\x9c utf8:\\u009b2J e:\xc3\xa9 "
      "cjk:\xe6\x97\xa5 c1split:\\u009b2J bad:\\xe6\\x97X stray:\\xbf end\n";
  if (strstr(t.seen, want) == NULL)
    fail_msg("the terminal got '%s'", t.seen);
  free(t.seen);
  maelys_execution_release(e);
  close(slave);
  close(master);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

/* The positive twins: allowed reads and writes work, and network INHERIT
 * reaches the loopback listener. */
static void test_allowed_twins(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  sandbox_t s;
  sandbox_dirs(&s);
  listener_t l;
  listen_loopback(&l);
  char port[16], made[300];
  snprintf(port, sizeof port, "%d", l.port);
  snprintf(made, sizeof made, "%s/made-inside", s.ws);
  maelys_executor_plan_t* plan =
      sandbox_plan(&s, MAELYS_EXECUTOR_NETWORK_INHERIT,
                   MAELYS_EXECUTOR_ROOT_READONLY, 0, true);
  maelys_execution_request_t* req =
      sandbox_request(&s, ARGS("escape", "write", made, "read", s.ro_file,
                               "tcp", "127.0.0.1", port));
  collected_t out;
  waited_t w;
  run_in_sandbox(&h, plan, req, &out, &w);
  expect_line(&out, "write=open");
  expect_line(&out, "read=open");
  expect_line(&out, "tcp=open");
  /* The file landed on the host, owned by the workspace's owner. */
  struct stat st;
  assert_int_equal(stat(made, &st), 0);
  assert_int_equal(st.st_uid, getuid());
  collected_free(&out);
  maelys_execution_request_destroy(req);
  close(l.tcp);
  close(l.abstract);
  maelys_executor_plan_destroy(plan);
  rm_rf(s.dir);
  harness_finish(&h);
}

static maelys_execution_t* start_ready(harness_t* h,
                                       const maelys_executor_plan_t* plan,
                                       maelys_execution_request_t* req,
                                       collected_t* out);

/* Run as root: neither the payload nor any process of the sandbox has host
 * uid 0 or a capability, and a setuid binary grants nothing. */
static void test_never_host_root(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  sandbox_t s;
  sandbox_dirs(&s);
  /* A setuid copy of the fixture (owned by root when the test runs as root)
   * in a directory the plan makes readable. */
  char suid[300];
  snprintf(suid, sizeof suid, "%s/suid-fixture", s.ro);
  char cmd[1400];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s' && chmod 4755 '%s'", MAELYS_FIXTURE,
           suid, suid);
  assert_int_equal(system(cmd), 0);
  char marker[64];
  snprintf(marker, sizeof marker, "31337%d", (int)getpid() % 1000);
  maelys_executor_plan_t* plan = sandbox_plan(
      &s, MAELYS_EXECUTOR_NETWORK_NONE, MAELYS_EXECUTOR_ROOT_READONLY, 0, true);
  maelys_execution_request_t* req =
      sandbox_request(&s, ARGS("escape", "ids", "setuid", suid));
  collected_t out;
  waited_t w;
  run_in_sandbox(&h, plan, req, &out, &w);
  print_message("%s", out.data);
  expect_line(&out, "CapEff: 0000000000000000");
  expect_line(&out, "CapPrm: 0000000000000000");
  expect_line(&out, "NoNewPrivs: 1");
  expect_line(&out, "Seccomp: 2");
  /* Both the payload and the setuid child report the same, non-root euid. */
  const char* first = strstr(out.data, "euid=");
  assert_non_null(first);
  const char* second = strstr(first + 1, "euid=");
  assert_non_null(second);
  int e1 = atoi(first + 5), e2 = atoi(second + 5);
  assert_int_equal(e1, e2);
  collected_free(&out);
  maelys_execution_request_destroy(req);

  /* The host's view of every process of a running sandbox, once it is set
   * up (during its set-up bwrap's child briefly holds capabilities in the
   * sandbox's own user namespace, and the launcher's helpers come and go):
   * the launcher, bwrap's monitor, the sandbox's init and the payload. */
  req = sandbox_request(&s, ARGS("term-line", "1", marker));
  collected_t ready_out;
  maelys_execution_t* e = start_ready(&h, plan, req, &ready_out);
  int pids[64];
  int found = marked_pids(marker, pids, 64);
  int checked = 0;
  for (int i = 0; i < found && i < 64; i++) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", pids[i]);
    FILE* f = fopen(path, "r");
    if (f == NULL)
      continue;
    char line[256];
    long uid = -1;
    unsigned long long eff = 1;
    while (fgets(line, sizeof line, f)) {
      sscanf(line, "Uid: %ld", &uid);
      sscanf(line, "CapEff: %llx", &eff);
    }
    fclose(f);
    if (uid == 0 || eff != 0)
      fail_msg("process %d (marker %s) has host uid %ld, CapEff %llx", pids[i],
               marker, uid, eff);
    checked++;
  }
  assert_true(checked >= 4);
  stopped_t st;
  memset(&st, 0, sizeof st);
  maelys_execution_stop(e, MAELYS_EXEC_STOP_FORCED, stopped_cb, &st, NULL);
  harness_run_until(&h, &st.done);
  maelys_execution_release(e);
  collected_free(&ready_out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  rm_rf(s.dir);
  harness_finish(&h);
}

/* A directory of a cgroup mount (v1 or v2) where this process may make a
 * cgroup, in `out`; false when there is none (not root, no cgroupfs). */
static bool cgroup_mount(char* out, size_t size, bool* v2) {
  FILE* f = fopen("/proc/self/mountinfo", "re");
  if (f == NULL)
    return false;
  char line[4096];
  bool found = false;
  while (!found && fgets(line, sizeof line, f) != NULL) {
    char point[1024], type[64];
    const char* dash = strstr(line, " - ");
    if (dash == NULL || sscanf(dash + 3, "%63s", type) != 1 ||
        sscanf(line, "%*s %*s %*s %*s %1023s", point) != 1)
      continue;
    if (strcmp(type, "cgroup2") != 0 && strcmp(type, "cgroup") != 0)
      continue;
    if (access(point, W_OK) == 0) {
      snprintf(out, size, "%s", point);
      *v2 = strcmp(type, "cgroup2") == 0;
      found = true;
    }
  }
  fclose(f);
  return found;
}

/* The launcher joins the memory cgroup only through a cgroup.procs file: a
 * pid written to another cgroup file is accepted by the kernel and moves
 * nothing, so such a descriptor fails the launch before anything starts. */
static void test_launcher_refuses_a_file_not_cgroup_procs(void** state) {
  (void)state;
  char mount[1024], dir[1200], file[1300];
  bool v2 = false;
  if (getuid() != 0 || !cgroup_mount(mount, sizeof mount, &v2))
    harness_skip(NULL,
                 "the launcher joins a memory cgroup only for a root "
                 "host with a writable cgroupfs (uid %u here)",
                 (unsigned)getuid());
  snprintf(dir, sizeof dir, "%s/maelys-test-join-%d", mount, (int)getpid());
  assert_int_equal(mkdir(dir, 0755), 0);
  snprintf(file, sizeof file, "%s/%s", dir,
           v2 ? "cgroup.max.depth" : "notify_on_release");
  int wrong = open(file, O_WRONLY | O_CLOEXEC);
  assert_true(wrong >= 0);
  int life[2], err[2];
  assert_int_equal(pipe2(life, O_CLOEXEC), 0);
  assert_int_equal(pipe2(err, O_CLOEXEC), 0);
  pid_t p = fork();
  assert_true(p >= 0);
  if (p == 0) {
    /* lifeline 3 (its write end stays with the test), json 4, exec 5 (any
     * descriptor: the launch must stop before it), the wrong file at 6 */
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    /* Out of the way first: any of them may sit at 3 to 6 already. */
    int from[] = {
        fcntl(life[0], F_DUPFD_CLOEXEC, 100), fcntl(null, F_DUPFD_CLOEXEC, 100),
        fcntl(null, F_DUPFD_CLOEXEC, 100), fcntl(wrong, F_DUPFD_CLOEXEC, 100)};
    for (int k = 0; k < 4; k++)
      if (from[k] < 0 || dup2(from[k], 3 + k) < 0)
        _exit(126);
    if (dup2(err[1], 2) < 0)
      _exit(126);
    /* As the core starts it: pid 1 of a pid namespace of its own, whose
     * pid as written ("1") the kernel would take for any cgroup file. */
    if (unshare(CLONE_NEWPID) != 0)
      _exit(126);
    pid_t init = fork();
    if (init == 0) {
      execl(MAELYS_HELPER, "maelys-launch", "launch", "--lifeline-fd", "3",
            "--json-fd", "4", "--exec-fd", "5", "--cgroup-fd", "6", "--",
            "bwrap", (char*)NULL);
      _exit(126);
    }
    int st = 0;
    if (init < 0 || waitpid(init, &st, 0) != init || !WIFEXITED(st))
      _exit(126);
    _exit(WEXITSTATUS(st));
  }
  close(err[1]);
  char out[512] = "";
  size_t got = 0;
  ssize_t n;
  while (got + 1 < sizeof out &&
         (n = read(err[0], out + got, sizeof out - 1 - got)) > 0)
    got += (size_t)n;
  out[got] = '\0';
  int ws = 0;
  assert_int_equal(waitpid(p, &ws, 0), p);
  close(err[0]);
  close(life[0]);
  close(life[1]);
  close(wrong);
  assert_int_equal(rmdir(dir), 0);
  assert_true(WIFEXITED(ws));
  assert_int_equal(WEXITSTATUS(ws), 127);
  if (strstr(out, "join the memory cgroup") == NULL)
    fail_msg("the launcher said: %s", out);
}

/* The signal that ends the fixture's int 0x80 call (getpid through the
 * i386 entry point) run unconfined, or 0 when the call returns. Seen: a
 * guest whose hypervisor has no such entry (kernel 6.18, IA32 emulation
 * built in) delivers SIGSEGV for the instruction itself, outside any
 * sandbox; the call never reaches the kernel, so no filter sees it. The
 * fixture is executed (not called in a fork) so that under valgrind, which
 * emulates this process and not the programs it executes, the answer is
 * the machine's. */
static int int80_unconfined(void) {
  pid_t p = fork();
  assert_true(p >= 0);
  if (p == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0)
      dup2(null, 1);
    execl(MAELYS_FIXTURE, "maelys-fixture", "escape", "int80", (char*)NULL);
    _exit(127);
  }
  int ws = 0;
  assert_int_equal(waitpid(p, &ws, 0), p);
  if (WIFEXITED(ws) && WEXITSTATUS(ws) == 127)
    fail_msg("cannot execute %s", MAELYS_FIXTURE);
  return WIFSIGNALED(ws) ? WTERMSIG(ws) : 0;
}

/* The 32-bit entries of x86-64 cannot bypass the filter: both kill. Where
 * the machine itself has no int 0x80 entry (see int80_unconfined), that
 * call dies of the same signal inside the sandbox as outside it. */
static void test_32bit_entries_killed(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  maelys_executor_plan_t* plan =
      sandbox_plan(NULL, MAELYS_EXECUTOR_NETWORK_NONE,
                   MAELYS_EXECUTOR_ROOT_READONLY, 0, true);
  static const char* const entries[] = {"x32", "int80"};
  for (size_t i = 0; i < 2; i++) {
    maelys_execution_request_t* req =
        sandbox_request(NULL, ARGS("escape", entries[i]));
    collected_t out;
    waited_t w;
    run_in_sandbox(&h, plan, req, &out, &w);
    assert_int_equal(w.status.outcome, MAELYS_EXEC_OUTCOME_SIGNALED);
    int unconfined = i == 1 ? int80_unconfined() : 0;
    if (unconfined != 0) {
      print_message("int 0x80 kills an unconfined process here too (signal "
                    "%d): this machine has no i386 entry to filter\n",
                    unconfined);
      assert_int_equal(w.status.term_signal, unconfined);
    } else {
      assert_int_equal(w.status.term_signal, SIGSYS);
    }
    collected_free(&out);
    maelys_execution_request_destroy(req);
  }
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

static maelys_execution_t* start_ready(harness_t* h,
                                       const maelys_executor_plan_t* plan,
                                       maelys_execution_request_t* req,
                                       collected_t* out) {
  maelys_execution_t* e = NULL;
  char* err = NULL;
  if (maelys_execution_spawn(h->executor, plan, req, &e, &err) != 0)
    fail_msg("spawn: %s", err);
  uv_stream_t* s = NULL;
  assert_int_equal(
      maelys_execution_stream(e, MAELYS_EXEC_STREAM_STDOUT, &s, NULL), 0);
  collect_start(s, out);
  while (strstr(out->data, "ready") == NULL) {
    if (out->eof)
      fail_msg("the payload ended before it was ready: %s", out->data);
    uv_run(&h->loop, UV_RUN_ONCE);
  }
  return e;
}

/* The graceful signal reaches the sandboxed payload itself. */
static void test_sigterm_reaches_payload(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  maelys_executor_plan_t* plan =
      sandbox_plan(NULL, MAELYS_EXECUTOR_NETWORK_NONE,
                   MAELYS_EXECUTOR_ROOT_READONLY, 0, true);
  maelys_execution_request_t* req =
      sandbox_request(NULL, ARGS("term-line", "1"));
  collected_t out;
  maelys_execution_t* e = start_ready(&h, plan, req, &out);
  stopped_t st;
  waited_t w;
  memset(&st, 0, sizeof st);
  memset(&w, 0, sizeof w);
  maelys_execution_wait(e, waited_cb, &w, NULL);
  maelys_execution_stop(e, MAELYS_EXEC_STOP_GRACEFUL_THEN_FORCED, stopped_cb,
                        &st, NULL);
  harness_run_until(&h, &st.done);
  harness_run_until(&h, &w.done);
  harness_run_until(&h, &out.eof);
  assert_int_equal(st.result, MAELYS_EXEC_STOPPED_GRACEFUL);
  assert_non_null(strstr(out.data, "got-term"));
  assert_int_equal(w.status.outcome, MAELYS_EXEC_OUTCOME_EXITED);
  assert_int_equal(w.status.exit_code, 0);
  assert_int_equal(w.status.stop_stage, MAELYS_EXEC_STOP_STAGE_GRACEFUL);
  maelys_execution_release(e);
  collected_free(&out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

/* A SIGTERM-ignoring payload is killed within grace + 100 ms. */
static void test_sigterm_ignoring_killed(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  maelys_executor_plan_t* plan =
      sandbox_plan(NULL, MAELYS_EXECUTOR_NETWORK_NONE,
                   MAELYS_EXECUTOR_ROOT_READONLY, 0, true);
  maelys_execution_request_t* req =
      sandbox_request(NULL, ARGS("ignore-term", "60000"));
  assert_int_equal(
      maelys_execution_request_set_stop_budget(req, 300, 2000, NULL), 0);
  collected_t out;
  maelys_execution_t* e = start_ready(&h, plan, req, &out);
  stopped_t st;
  memset(&st, 0, sizeof st);
  uint64_t t0 = harness_now_ms();
  maelys_execution_stop(e, MAELYS_EXEC_STOP_GRACEFUL_THEN_FORCED, stopped_cb,
                        &st, NULL);
  harness_run_until(&h, &st.done);
  uint64_t took = st.at_ms - t0;
  assert_int_equal(st.result, MAELYS_EXEC_STOPPED_FORCED);
  if (took > 400)
    fail_msg("stop took %llu ms, more than grace (300) + 100 ms",
             (unsigned long long)took);
  harness_run_until(&h, &out.eof);
  maelys_execution_release(e);
  collected_free(&out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

/* Invariant 8: a descendant that double-forks and calls setsid() does not
 * survive the stop. */
static void test_daemon_does_not_survive(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  maelys_executor_plan_t* plan =
      sandbox_plan(NULL, MAELYS_EXECUTOR_NETWORK_NONE,
                   MAELYS_EXECUTOR_ROOT_READONLY, 0, true);
  char marker[32];
  snprintf(marker, sizeof marker, "daemon %d", (int)getpid());
  maelys_execution_request_t* req =
      sandbox_request(NULL, ARGS("daemon", marker));
  collected_t out;
  maelys_execution_t* e = start_ready(&h, plan, req, &out);
  assert_non_null(strstr(out.data, "daemon="));
  assert_true(count_marked(marker) >= 4); /* bwrap, helper, payload, daemon */
  stopped_t st;
  memset(&st, 0, sizeof st);
  maelys_execution_stop(e, MAELYS_EXEC_STOP_GRACEFUL_THEN_FORCED, stopped_cb,
                        &st, NULL);
  harness_run_until(&h, &st.done);
  /* stdout reaches end-of-file only once every holder, the daemon
   * included, is gone. */
  harness_run_until(&h, &out.eof);
  assert_int_equal(count_marked(marker), 0);
  maelys_execution_release(e);
  collected_free(&out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

/* No survivors, ever: a stop issued 0, 1, 3 and 5 ms after spawn, while bwrap
 * is still setting up, twenty times each. */
static void test_early_stops_leave_no_survivor(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 300000);
  if (!bwrap_or_skip(&h))
    return;
  maelys_executor_plan_t* plan =
      sandbox_plan(NULL, MAELYS_EXECUTOR_NETWORK_NONE,
                   MAELYS_EXECUTOR_ROOT_READONLY, 0, true);
  static const int delays[] = {0, 1, 3, 5};
  char marker[32];
  snprintf(marker, sizeof marker, "6%05d", (int)getpid() % 100000);
  for (size_t d = 0; d < 4; d++) {
    for (int i = 0; i < 20; i++) {
      maelys_execution_request_t* req =
          sandbox_request(NULL, ARGS("sleep", "60000", marker));
      maelys_execution_request_set_io_mode(req, MAELYS_EXEC_IO_INHERIT, -1,
                                           NULL);
      assert_int_equal(
          maelys_execution_request_set_stop_budget(req, 50, 2000, NULL), 0);
      maelys_execution_t* e = NULL;
      assert_int_equal(maelys_execution_spawn(h.executor, plan, req, &e, NULL),
                       0);
      if (delays[d] > 0)
        usleep((useconds_t)delays[d] * 1000);
      stopped_t st;
      waited_t w;
      memset(&st, 0, sizeof st);
      memset(&w, 0, sizeof w);
      maelys_execution_wait(e, waited_cb, &w, NULL);
      maelys_execution_stop(e, MAELYS_EXEC_STOP_GRACEFUL_THEN_FORCED,
                            stopped_cb, &st, NULL);
      harness_run_until(&h, &st.done);
      harness_run_until(&h, &w.done);
      assert_true(st.result == MAELYS_EXEC_STOPPED_GRACEFUL ||
                  st.result == MAELYS_EXEC_STOPPED_FORCED);
      int left = count_marked(marker);
      if (left != 0)
        fail_msg("%d process(es) survived a stop %d ms after spawn (run %d)",
                 left, delays[d], i);
      maelys_execution_release(e);
      maelys_execution_request_destroy(req);
    }
  }
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

/* The ephemeral root: writable, bounded, gone with the execution; the
 * scratch sizes must agree (invariant 10). */
static void test_ephemeral_root(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  maelys_executor_plan_t* plan =
      sandbox_plan(NULL, MAELYS_EXECUTOR_NETWORK_NONE,
                   MAELYS_EXECUTOR_ROOT_EPHEMERAL_WRITE, 1 << 20, true);
  maelys_execution_request_t* req =
      sandbox_request(NULL, ARGS("escape", "write", "/scratch-file"));
  char* err = NULL;
  maelys_execution_t* e = NULL;
  assert_int_equal(maelys_execution_spawn(h.executor, plan, req, &e, &err),
                   MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_non_null(strstr(err, "invariant 10"));
  maelys_executor_error_free(err);
  assert_int_equal(
      maelys_execution_request_set_scratch_size(req, 1 << 20, NULL), 0);
  collected_t out;
  waited_t w;
  run_in_sandbox(&h, plan, req, &out, &w);
  expect_line(&out, "write=open");
  collected_free(&out);
  struct stat st;
  assert_int_equal(stat("/scratch-file", &st), -1);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

/* Fail closed: without bwrap the backend registers with an empty mask and a
 * diagnostic, and every spawn on it is refused. */
static void test_missing_bwrap_refuses(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  maelys_backend_options_t* o = NULL;
  maelys_backend_options_create(&o, NULL);
  maelys_backend_options_set(o, "bwrap", "/nonexistent/bwrap", NULL);
  maelys_backend_options_set(o, "helper", MAELYS_HELPER, NULL);
  assert_int_equal(maelys_executor_register_backend(
                       h.executor, maelys_backend_bubblewrap(), o, NULL),
                   0);
  maelys_backend_options_destroy(o);
  uint64_t mask = 1;
  maelys_executor_backend_capabilities(h.executor, "bubblewrap", &mask, NULL);
  assert_int_equal(mask, 0);
  char* diag = NULL;
  maelys_executor_backend_diagnostic(h.executor, "bubblewrap", &diag, NULL);
  assert_non_null(strstr(diag, "bwrap was not found"));
  assert_non_null(strstr(diag, "apt-get install bubblewrap"));
  maelys_executor_string_free(diag);
  maelys_executor_plan_t* plan =
      sandbox_plan(NULL, MAELYS_EXECUTOR_NETWORK_NONE,
                   MAELYS_EXECUTOR_ROOT_READONLY, 0, true);
  maelys_execution_request_t* req = sandbox_request(NULL, ARGS("exit", "0"));
  char* err = NULL;
  maelys_execution_t* e = NULL;
  assert_int_equal(maelys_execution_spawn(h.executor, plan, req, &e, &err),
                   MAELYS_EXECUTOR_ERR_CAPABILITY);
  assert_non_null(strstr(err, "bwrap was not found"));
  assert_null(e);
  maelys_executor_error_free(err);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

/* Where user namespaces are blocked (simulated in a user namespace whose
 * user.max_user_namespaces is 0), the mask is empty and the diagnostic says
 * why and what would fix it. */
static void test_blocked_userns_refuses(void** state) {
  (void)state;
  /* Copies of the helper and bwrap owned by this user: inside the namespace
   * below, files of unmapped owners (root's, for an unprivileged run) show as
   * the overflow uid, and the backend refuses to execute a program it cannot
   * tell is trusted. */
  char dir[] = "/tmp/maelys-blocked-XXXXXX";
  assert_non_null(mkdtemp(dir));
  chmod(dir, 0755);
  char helper[128], bwrap[128], cmd[512];
  snprintf(helper, sizeof helper, "%s/helper", dir);
  snprintf(bwrap, sizeof bwrap, "%s/bwrap", dir);
  snprintf(cmd, sizeof cmd, "cp '%s' '%s' && cp \"$(command -v bwrap)\" '%s'",
           MAELYS_HELPER, helper, bwrap);
  assert_int_equal(system(cmd), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (unshare(CLONE_NEWUSER) != 0)
      _exit(10);
    char map[64];
    int fd = open("/proc/self/setgroups", O_WRONLY);
    if (fd >= 0) {
      if (write(fd, "deny", 4) < 0)
        _exit(11);
      close(fd);
    }
    snprintf(map, sizeof map, "0 %u 1", (unsigned)uid);
    fd = open("/proc/self/uid_map", O_WRONLY);
    if (fd < 0 || write(fd, map, strlen(map)) < 0)
      _exit(12);
    close(fd);
    snprintf(map, sizeof map, "0 %u 1", (unsigned)gid);
    fd = open("/proc/self/gid_map", O_WRONLY);
    if (fd < 0 || write(fd, map, strlen(map)) < 0)
      _exit(13);
    close(fd);
    fd = open("/proc/sys/user/max_user_namespaces", O_WRONLY);
    if (fd < 0 || write(fd, "0", 1) != 1)
      _exit(14);
    close(fd);
    uv_loop_t loop;
    uv_loop_init(&loop);
    maelys_executor_t* ex = NULL;
    maelys_executor_create(&loop, &ex, NULL);
    maelys_backend_options_t* o = NULL;
    maelys_backend_options_create(&o, NULL);
    maelys_backend_options_set(o, "helper", helper, NULL);
    maelys_backend_options_set(o, "bwrap", bwrap, NULL);
    maelys_backend_options_set(o, "staging_dir", "/tmp", NULL);
    if (maelys_executor_register_backend(ex, maelys_backend_bubblewrap(), o,
                                         NULL) != 0)
      _exit(15);
    uint64_t mask = 1;
    maelys_executor_backend_capabilities(ex, "bubblewrap", &mask, NULL);
    char* diag = NULL;
    maelys_executor_backend_diagnostic(ex, "bubblewrap", &diag, NULL);
    fprintf(stderr, "blocked-userns diagnostic: %s\n", diag);
    if (mask != 0)
      _exit(16);
    /* Run unprivileged, every directory above the copies (/, /tmp) is the
     * host root's, an owner this namespace does not map: the backend cannot
     * tell them from another user's and refuses on that ground first. Both
     * refusals name why. */
    bool userns_reason = strstr(diag, "user namespaces") != NULL &&
                         strstr(diag, "max_user_namespaces") != NULL;
    bool trust_reason = uid != 0 && strstr(diag, "invariant 18") != NULL;
    if (!userns_reason && !trust_reason)
      _exit(17);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  rm_rf(dir);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 10)
    harness_skip_sandbox(NULL, "no user namespace to simulate the blocked "
                               "case");
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

/* A bind source reached through a symbolic link is refused before anything
 * starts: a link swapped in cannot redirect or widen the mount. */
static void test_symlink_source_refused(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  sandbox_t s;
  sandbox_dirs(&s);
  char link[300];
  snprintf(link, sizeof link, "%s/link-to-ws", s.dir);
  assert_int_equal(symlink(s.ws, link), 0);
  maelys_executor_plan_t* plan =
      sandbox_plan(NULL, MAELYS_EXECUTOR_NETWORK_NONE,
                   MAELYS_EXECUTOR_ROOT_READONLY, 0, false);
  assert_int_equal(maelys_executor_plan_add_rule(
                       plan, link, MAELYS_EXECUTOR_ACCESS_WRITE,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_seal(plan, NULL), 0);
  maelys_execution_request_t* req = sandbox_request(NULL, ARGS("exit", "0"));
  char* err = NULL;
  maelys_execution_t* e = NULL;
  assert_int_equal(maelys_execution_spawn(h.executor, plan, req, &e, &err),
                   MAELYS_EXECUTOR_ERR_DENIED);
  assert_non_null(strstr(err, "symbolic link"));
  assert_null(e);
  maelys_executor_error_free(err);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  rm_rf(s.dir);
  harness_finish(&h);
}

/* More payload descriptors than the sandbox init keeps are refused before
 * anything starts, never dropped (invariants 1 and 5): the protocol socket
 * and MAELYS_EXECUTOR_MAX_CHANNELS channels are one too many. */
static void test_too_many_descriptors_refused(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  maelys_executor_plan_t* plan =
      sandbox_plan(NULL, MAELYS_EXECUTOR_NETWORK_NONE,
                   MAELYS_EXECUTOR_ROOT_READONLY, 0, false);
  maelys_execution_request_t* req = sandbox_request(NULL, ARGS("exit", "0"));
  assert_int_equal(maelys_execution_request_set_io_mode(
                       req, MAELYS_EXEC_IO_ISOLATED_DUPLEX, 3, NULL),
                   0);
  for (int c = 4; c < 4 + MAELYS_EXECUTOR_MAX_CHANNELS; c++) {
    char name[16];
    snprintf(name, sizeof name, "ch%d", c);
    assert_int_equal(maelys_executor_plan_add_channel(plan, c, name, NULL), 0);
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_int_equal(maelys_execution_request_add_channel(req, c, &fd, NULL),
                     0);
  }
  assert_int_equal(maelys_executor_plan_seal(plan, NULL), 0);
  char* err = NULL;
  maelys_execution_t* e = NULL;
  assert_int_equal(maelys_execution_spawn(h.executor, plan, req, &e, &err),
                   MAELYS_EXECUTOR_ERR_UNSUPPORTED);
  assert_null(e);
  if (strstr(err, "more than 64 descriptors") == NULL)
    fail_msg("unexpected refusal: %s", err);
  maelys_executor_error_free(err);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

/* A bwrap execution's receipt names the backend and its capabilities. */
static void test_receipt(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  maelys_executor_plan_t* plan =
      sandbox_plan(NULL, MAELYS_EXECUTOR_NETWORK_NONE,
                   MAELYS_EXECUTOR_ROOT_READONLY, 0, true);
  maelys_execution_request_t* req = sandbox_request(NULL, ARGS("exit", "0"));
  collected_t out;
  waited_t w;
  maelys_execution_t* e = NULL;
  assert_int_equal(maelys_execution_spawn(h.executor, plan, req, &e, NULL), 0);
  memset(&w, 0, sizeof w);
  maelys_execution_wait(e, waited_cb, &w, NULL);
  harness_run_until(&h, &w.done);
  char* json = NULL;
  assert_int_equal(maelys_execution_receipt(e, &json, NULL), 0);
  assert_non_null(strstr(json, "\"name\": \"bubblewrap\""));
  assert_non_null(strstr(json, "network_none"));
  maelys_executor_string_free(json);
  maelys_execution_release(e);
  (void)out;
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

static int open_fd_count(void) {
  DIR* d = opendir("/proc/self/fd");
  int n = 0;
  for (struct dirent* e; d != NULL && (e = readdir(d)) != NULL;)
    n += e->d_name[0] != '.';
  if (d != NULL)
    closedir(d);
  return n;
}

/* maelys_execution_check is spawn's dry run: for each plan it returns what
 * spawn returns, and leaves nothing behind (no descriptor, no receipt
 * directory). */
static void test_check_agrees_with_spawn(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  sandbox_t s;
  sandbox_dirs(&s);
  char missing_deny[300], receipts_inside[300], receipts_new[300],
      receipts_under_file[300];
  snprintf(missing_deny, sizeof missing_deny, "%s/absent", s.ws);
  snprintf(receipts_inside, sizeof receipts_inside, "%s/receipts", s.ws);
  snprintf(receipts_new, sizeof receipts_new, "%s/receipts/new", s.dir);
  snprintf(receipts_under_file, sizeof receipts_under_file, "%s/r", s.outside);
  enum {
    OK,
    SYSTEM_TREE,
    SHARED_TMP,
    MISSING_DENY,
    RECEIPT_INSIDE,
    RECEIPT_UNDER_FILE,
    POSIX_BACKEND,
    CASES
  };
  for (int c = 0; c < CASES; c++) {
    maelys_executor_plan_t* p =
        sandbox_plan(&s, MAELYS_EXECUTOR_NETWORK_NONE,
                     MAELYS_EXECUTOR_ROOT_READONLY, 0, false);
    const char* extra_write = c == SYSTEM_TREE  ? "/etc"
                              : c == SHARED_TMP ? "/tmp"
                                                : NULL;
    if (extra_write != NULL)
      assert_int_equal(maelys_executor_plan_add_rule(
                           p, extra_write, MAELYS_EXECUTOR_ACCESS_WRITE,
                           MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                       0);
    if (c == MISSING_DENY)
      assert_int_equal(maelys_executor_plan_add_rule(
                           p, missing_deny, MAELYS_EXECUTOR_ACCESS_DENY,
                           MAELYS_EXECUTOR_SCOPE_LITERAL_FILE, NULL),
                       0);
    assert_int_equal(maelys_executor_plan_seal(p, NULL), 0);
    maelys_execution_request_t* req = sandbox_request(&s, ARGS("exit", "0"));
    if (c == POSIX_BACKEND)
      assert_int_equal(maelys_execution_request_set_backend(req, "posix", NULL),
                       0);
    const char* receipts = c == RECEIPT_INSIDE       ? receipts_inside
                           : c == RECEIPT_UNDER_FILE ? receipts_under_file
                                                     : receipts_new;
    assert_int_equal(
        maelys_execution_request_set_receipt_dir(req, receipts, NULL), 0);
    int fds = open_fd_count();
    char* check_error = NULL;
    maelys_executor_result_t checked =
        maelys_execution_check(h.executor, p, req, &check_error);
    assert_int_equal(open_fd_count(), fds);
    struct stat st;
    assert_int_not_equal(stat(receipts_new, &st), 0);
    maelys_execution_t* e = NULL;
    char* spawn_error = NULL;
    maelys_executor_result_t spawned =
        maelys_execution_spawn(h.executor, p, req, &e, &spawn_error);
    if (checked != spawned)
      fail_msg(
          "case %d: check %s (%s), spawn %s (%s)", c,
          maelys_executor_result_name(checked), check_error ? check_error : "",
          maelys_executor_result_name(spawned), spawn_error ? spawn_error : "");
    assert_int_equal(
        checked, c == OK                   ? MAELYS_EXECUTOR_OK
                 : c == SYSTEM_TREE        ? MAELYS_EXECUTOR_ERR_DENIED
                 : c == SHARED_TMP         ? MAELYS_EXECUTOR_ERR_DENIED
                 : c == MISSING_DENY       ? MAELYS_EXECUTOR_ERR_UNSUPPORTED
                 : c == RECEIPT_INSIDE     ? MAELYS_EXECUTOR_ERR_DENIED
                 : c == RECEIPT_UNDER_FILE ? MAELYS_EXECUTOR_ERR_IO
                                           : MAELYS_EXECUTOR_ERR_CAPABILITY);
    if (checked != MAELYS_EXECUTOR_OK)
      assert_string_equal(check_error, spawn_error);
    if (e != NULL) {
      waited_t w;
      memset(&w, 0, sizeof w);
      maelys_execution_wait(e, waited_cb, &w, NULL);
      harness_run_until(&h, &w.done);
      assert_int_equal(w.status.outcome, MAELYS_EXEC_OUTCOME_EXITED);
      assert_int_equal(stat(receipts_new, &st), 0);
      maelys_execution_release(e);
    }
    maelys_executor_error_free(check_error);
    maelys_executor_error_free(spawn_error);
    maelys_execution_request_destroy(req);
    maelys_executor_plan_destroy(p);
    rm_rf(receipts_new);
  }
  rm_rf(s.dir);
  harness_finish(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_capabilities_proved),
      cmocka_unit_test(test_exit_status_is_the_payloads),
      cmocka_unit_test(test_launcher_killed_before_the_payload),
      cmocka_unit_test(test_launch_errors),
      cmocka_unit_test(test_escapes_blocked),
      cmocka_unit_test(test_setid_never_leaves),
      cmocka_unit_test(test_system_trees_never_writable),
      cmocka_unit_test(test_writable_tree_contents),
      cmocka_unit_test(test_untrusted_programs_refused),
      cmocka_unit_test(test_no_terminal_enters),
      cmocka_unit_test(test_terminal_gets_no_raw_c1),
      cmocka_unit_test(test_allowed_twins),
      cmocka_unit_test(test_never_host_root),
      cmocka_unit_test(test_32bit_entries_killed),
      cmocka_unit_test(test_sigterm_reaches_payload),
      cmocka_unit_test(test_sigterm_ignoring_killed),
      cmocka_unit_test(test_daemon_does_not_survive),
      cmocka_unit_test(test_early_stops_leave_no_survivor),
      cmocka_unit_test(test_ephemeral_root),
      cmocka_unit_test(test_missing_bwrap_refuses),
      cmocka_unit_test(test_blocked_userns_refuses),
      cmocka_unit_test(test_launcher_refuses_a_file_not_cgroup_procs),
      cmocka_unit_test(test_symlink_source_refused),
      cmocka_unit_test(test_too_many_descriptors_refused),
      cmocka_unit_test(test_receipt),
      cmocka_unit_test(test_check_agrees_with_spawn),
  };
  return harness_exit(
      cmocka_run_group_tests_name("bubblewrap", tests, NULL, NULL));
}
