/*
 * Invariants 20 and 22 through the bubblewrap backend: nothing outlives its
 * execution, whatever dies when (the host process, bwrap's monitor, the
 * sandbox's init, a host in the middle of a registration probe); every
 * sandbox has ceilings that are enforced or refused; and, for runs started by
 * root, each sandbox has a host identity of its own.
 *
 * Survivors are looked for by what they cannot hide: the pid namespace the
 * launcher made (every process of an execution lives in it or below it), and
 * the uid of a root-started execution, as well as the marker in their
 * command line. Waits are on pidfds, never on sleeps.
 *
 * MAELYS_SOAK_ROUNDS=N repeats each kill-timing matrix N times (the soak
 * command, ci/soak); CI runs one round.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "marked.h"
#include "tree.h"

#define ARGS(...) ((const char* const[]){__VA_ARGS__, NULL})
/* How long a tree may take to go once what holds it died (invariant 22). */
#define GONE_MS 1000

static int rounds(void) {
  const char* r = getenv("MAELYS_SOAK_ROUNDS");
  int n = r ? atoi(r) : 1;
  return n > 0 ? n : 1;
}

static bool bwrap_or_skip(harness_t* h) {
  harness_bubblewrap_or_skip(h, MAELYS_BACKEND_CAP_PROCESS_TREE |
                                    MAELYS_BACKEND_CAP_FILESYSTEM_READ |
                                    MAELYS_BACKEND_CAP_LIMIT_TASKS);
  return true;
}

static maelys_executor_plan_t* fixture_plan(uint64_t tasks, uint64_t memory) {
  maelys_executor_plan_t* p = NULL;
  char* err = NULL;
  assert_int_equal(maelys_executor_plan_create(&p, NULL), 0);
  assert_int_equal(
      maelys_executor_plan_set_root(p, MAELYS_EXECUTOR_ROOT_READONLY, 0, NULL),
      0);
  assert_int_equal(maelys_executor_plan_add_proc(p, "/proc", NULL), 0);
  assert_int_equal(maelys_executor_plan_add_dev(p, "/dev", NULL), 0);
  assert_int_equal(maelys_executor_plan_add_rule(
                       p, MAELYS_FIXTURE, MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_LITERAL_FILE, NULL),
                   0);
  assert_int_equal(
      maelys_executor_plan_set_network(p, MAELYS_EXECUTOR_NETWORK_NONE, NULL),
      0);
  assert_int_equal(maelys_executor_plan_set_process_tree_required(p, 1, NULL),
                   0);
  if (tasks > 0)
    assert_int_equal(maelys_executor_plan_set_limit(
                         p, MAELYS_EXECUTOR_LIMIT_TASKS, tasks, NULL),
                     0);
  if (memory > 0)
    assert_int_equal(maelys_executor_plan_set_limit(
                         p, MAELYS_EXECUTOR_LIMIT_MEMORY, memory, NULL),
                     0);
  if (maelys_executor_plan_seal(p, &err) != MAELYS_EXECUTOR_OK)
    fail_msg("seal: %s", err);
  return p;
}

/* The pid namespace an execution's launcher made, found from its launcher
 * (readable as root) or from any process of it below the host's own
 * namespace (bwrap's monitor and the payload are dumpable). 0 if none is
 * seen yet. */
static uint64_t execution_ns(int launcher, const char* marker) {
  uint64_t mine = tree_pidns(getpid());
  if (launcher > 0) {
    uint64_t ns = tree_pidns(launcher);
    if (ns != 0 && ns != mine)
      return ns;
  }
  int pids[64];
  int n = marked_pids(marker, pids, 64);
  for (int i = 0; i < n && i < 64; i++) {
    uint64_t ns = tree_pidns(pids[i]);
    if (ns == 0 || ns == mine)
      continue;
    /* bwrap's monitor lives in the launcher's namespace, whose parent is
     * the host's; the sandbox's processes one level further down. */
    uint64_t parent = tree_parent_pidns(pids[i]);
    return parent == mine || parent == 0 ? ns : parent;
  }
  return 0;
}

/* Asserts that nothing of the execution (namespace `ns`, marker, and for a
 * root-started run its uid) is left GONE_MS after whatever held it died. */
static void assert_nothing_left(uint64_t ns, const char* marker, long uid,
                                const char* what) {
  int pids[256];
  /* Scanned again until the deadline: a member the dying tree forked after
   * a scan (seen under ASan on a loaded machine) counts too, and must be
   * gone by the same deadline. */
  uint64_t deadline = harness_now_ms() + GONE_MS;
  int n = tree_members(ns, marker, pids, 256);
  int left = 0;
  while (n > 0) {
    int64_t rest = (int64_t)(deadline - harness_now_ms());
    left = tree_wait_gone(pids, n < 256 ? (size_t)n : 256,
                          rest > 0 ? (int)rest : 0);
    if (left != 0 || harness_now_ms() >= deadline)
      break;
    n = tree_members(ns, marker, pids, 256);
  }
  n = tree_members(ns, marker, pids, 256);
  /* A member this last scan found before the deadline (the loop above
   * ended on an empty scan, and a dying process whose namespaces the
   * kernel had already released was missed by it) is waited for until the
   * deadline too. */
  int64_t rest = (int64_t)(deadline - harness_now_ms());
  if (n > 0 && rest > 0) {
    left = tree_wait_gone(pids, n < 256 ? (size_t)n : 256, (int)rest);
    n = tree_members(ns, marker, pids, 256);
  }
  /* One the kernel is already ending runs nothing of the sandbox again. */
  int alive = 0;
  for (int i = 0; i < n && i < 256; i++)
    if (!tree_exiting(pids[i]))
      pids[alive++] = pids[i];
  n = alive;
  int by_uid = 0;
  if (uid > 0) {
    DIR* d = opendir("/proc");
    struct dirent* e;
    while (d != NULL && (e = readdir(d)) != NULL)
      if (e->d_name[0] >= '1' && e->d_name[0] <= '9' &&
          tree_uid(atoi(e->d_name)) == uid && tree_alive(atoi(e->d_name)) &&
          !tree_exiting(atoi(e->d_name)))
        by_uid++;
    if (d != NULL)
      closedir(d);
  }
  /* The verdict is the last scan's: a pid the waits saw still there and
   * that is neither a member any more nor alive has ended. */
  if (n != 0 || by_uid != 0) {
    char first[256] = "none";
    if (n > 0)
      tree_describe(pids[0], first, sizeof first);
    fail_msg("%s: %d processes of the execution outlived it by %d ms (%d "
             "still after; %d of its uid %ld), first: %s",
             what, left, GONE_MS, n, by_uid, uid, first);
  }
}

/* ------------------------------------------------------------ the host */

/* A host process: its own loop and executor, bubblewrap registered. It
 * writes 'S' on `report` just before it spawns `sleep 600000 MARKER` (or
 * the daemon variant), then the launcher's pid as text, then runs its loop
 * until it is killed. */
static void host_main(int report, const char* marker, bool daemon) {
  uv_loop_t loop;
  maelys_executor_t* ex = NULL;
  if (uv_loop_init(&loop) != 0 ||
      maelys_executor_create(&loop, &ex, NULL) != MAELYS_EXECUTOR_OK)
    _exit(2);
  maelys_backend_options_t* o = NULL;
  maelys_backend_options_create(&o, NULL);
  maelys_backend_options_set(o, "helper", MAELYS_HELPER, NULL);
  if (maelys_executor_register_backend(ex, maelys_backend_bubblewrap(), o,
                                       NULL) != MAELYS_EXECUTOR_OK)
    _exit(3);
  maelys_executor_plan_t* plan = NULL;
  maelys_executor_plan_create(&plan, NULL);
  maelys_executor_plan_set_root(plan, MAELYS_EXECUTOR_ROOT_READONLY, 0, NULL);
  maelys_executor_plan_add_proc(plan, "/proc", NULL);
  maelys_executor_plan_add_rule(plan, MAELYS_FIXTURE,
                                MAELYS_EXECUTOR_ACCESS_READ,
                                MAELYS_EXECUTOR_SCOPE_LITERAL_FILE, NULL);
  maelys_executor_plan_set_network(plan, MAELYS_EXECUTOR_NETWORK_NONE, NULL);
  maelys_executor_plan_set_process_tree_required(plan, 1, NULL);
  if (maelys_executor_plan_seal(plan, NULL) != MAELYS_EXECUTOR_OK)
    _exit(4);
  maelys_execution_request_t* req = NULL;
  maelys_execution_request_create(&req, NULL);
  maelys_execution_request_set_executable(req, MAELYS_FIXTURE, NULL);
  const char* sleeper[] = {MAELYS_FIXTURE, "sleep", "600000", marker, NULL};
  const char* daemoner[] = {MAELYS_FIXTURE, "daemon", marker, NULL};
  maelys_execution_request_set_argv(req, daemon ? daemoner : sleeper, NULL);
  maelys_execution_request_set_backend(req, "bubblewrap", NULL);
  maelys_execution_request_set_stderr_mode(req, MAELYS_EXEC_STDERR_NULL, NULL);
  if (write(report, "S", 1) != 1)
    _exit(5);
  maelys_execution_t* e = NULL;
  char* err = NULL;
  if (maelys_execution_spawn(ex, plan, req, &e, &err) != MAELYS_EXECUTOR_OK) {
    fprintf(stderr, "host spawn: %s\n", err);
    _exit(6);
  }
  char pid[32];
  int n = snprintf(pid, sizeof pid, "%d\n", maelys_execution_pid(e));
  if (write(report, pid, (size_t)n) != n)
    _exit(7);
  for (;;)
    uv_run(&loop, UV_RUN_ONCE);
}

/* The launcher's pid the host reported, or -1 (read without waiting). */
static int read_launcher(int report) {
  char buf[32];
  ssize_t n = read(report, buf, sizeof buf - 1);
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  return atoi(buf);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

/* The host process is SIGKILLed 0..15 ms after it started a sandbox: the
 * whole tree is gone within GONE_MS, whatever step the launch was at. */
static void test_host_killed_at_every_step(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 240000);
  if (!bwrap_or_skip(&h))
    return;
  for (int r = 0; r < rounds(); r++)
    for (int step = 0; step <= 15; step++) {
      bool daemon = step % 4 == 3;
      char marker[64];
      snprintf(marker, sizeof marker, "host-kill-%d-%d-%d", (int)getpid(), r,
               step);
      int p[2];
      assert_int_equal(pipe2(p, O_CLOEXEC), 0);
      pid_t host = fork();
      assert_true(host >= 0);
      if (host == 0) {
        close(p[0]);
        host_main(p[1], marker, daemon);
      }
      close(p[1]);
      char c;
      assert_int_equal(read(p[0], &c, 1), 1); /* about to spawn */
      sleep_ms(step);
      fcntl(p[0], F_SETFL, O_NONBLOCK);
      int launcher = read_launcher(p[0]);
      uint64_t ns = execution_ns(launcher, marker);
      long uid = -1;
      int pids[8];
      if (getuid() == 0 && marked_pids(marker, pids, 8) > 0) {
        long u = tree_uid(pids[0]);
        uid = u > 0 ? u : -1; /* the execution's own identity */
      }
      kill(host, SIGKILL);
      waitpid(host, NULL, 0);
      close(p[0]);
      char what[96];
      snprintf(what, sizeof what, "host killed %d ms after spawn%s", step,
               daemon ? " (a daemonized payload)" : "");
      assert_nothing_left(ns, marker, uid, what);
    }
  harness_finish(&h);
}

/* The first marked process whose command line starts with `prefix`. */
static int marked_starting(const char* marker, const char* prefix) {
  int pids[64];
  int n = marked_pids(marker, pids, 64);
  for (int i = 0; i < n && i < 64; i++) {
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/cmdline", pids[i]);
    FILE* f = fopen(path, "re");
    if (f == NULL)
      continue;
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = '\0';
    if (strncmp(buf, prefix, strlen(prefix)) == 0)
      return pids[i];
  }
  return -1;
}

/* bwrap's monitor, or the sandbox's init, is killed 0..15 ms after it
 * appeared: the execution ends, and nothing of it is left. */
static void kill_member_at_every_step(const char* prefix, const char* name) {
  harness_t h;
  harness_init(&h, 240000);
  if (!bwrap_or_skip(&h))
    return;
  maelys_executor_plan_t* plan = fixture_plan(0, 0);
  for (int r = 0; r < rounds(); r++)
    for (int step = 0; step <= 15; step++) {
      char marker[64];
      snprintf(marker, sizeof marker, "%s-kill-%d-%d-%d", name, (int)getpid(),
               r, step);
      maelys_execution_request_t* req =
          request_fixture("bubblewrap", ARGS("sleep", "600000", marker));
      maelys_execution_t* e = NULL;
      char* err = NULL;
      if (maelys_execution_spawn(h.executor, plan, req, &e, &err) != 0)
        fail_msg("spawn: %s", err);
      waited_t w;
      memset(&w, 0, sizeof w);
      maelys_execution_wait(e, waited_cb, &w, NULL);
      int target = -1;
      for (int tries = 0; tries < 2000 && target < 0; tries++) {
        target = marked_starting(marker, prefix);
        if (target < 0)
          sleep_ms(1);
      }
      if (target < 0)
        fail_msg("no %s appeared", name);
      sleep_ms(step);
      uint64_t ns = execution_ns(maelys_execution_pid(e), marker);
      long uid = getuid() == 0 ? tree_uid(target) : -1;
      kill(target, SIGKILL);
      harness_run_until(&h, &w.done);
      char what[96];
      snprintf(what, sizeof what, "%s killed %d ms after it appeared", name,
               step);
      assert_nothing_left(ns, marker, uid, what);
      maelys_execution_release(e);
      maelys_execution_request_destroy(req);
    }
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

static void test_bwrap_monitor_killed(void** state) {
  (void)state;
  kill_member_at_every_step("bwrap", "bwrap's monitor");
}

static void test_sandbox_init_killed(void** state) {
  (void)state;
  kill_member_at_every_step("/.maelys/helper", "the sandbox's init");
}

/* This user's probe directories. */
static int probe_dirs(char names[][256], int max) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "maelys-probe-%u-", (unsigned)geteuid());
  DIR* d = opendir("/tmp");
  int n = 0;
  struct dirent* e;
  while (d != NULL && (e = readdir(d)) != NULL)
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && n < max)
      snprintf(names[n++], 256, "%s", e->d_name);
  if (d != NULL)
    closedir(d);
  return n;
}

/* Every process below `pid` (a /proc scan of parent pids). */
static int descendants(int pid, int* out, int max) {
  int n = 0;
  out[n++] = pid;
  for (int i = 0; i < n; i++) {
    DIR* d = opendir("/proc");
    struct dirent* e;
    while (d != NULL && (e = readdir(d)) != NULL) {
      if (e->d_name[0] < '1' || e->d_name[0] > '9')
        continue;
      char path[300], text[512];
      snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
      FILE* f = fopen(path, "re");
      if (f == NULL)
        continue;
      size_t got = fread(text, 1, sizeof text - 1, f);
      fclose(f);
      text[got] = '\0';
      const char* paren = strrchr(text, ')');
      int ppid = 0;
      char st;
      if (paren != NULL && sscanf(paren + 1, " %c %d", &st, &ppid) == 2 &&
          ppid == out[i] && n < max)
        out[n++] = atoi(e->d_name);
    }
    if (d != NULL)
      closedir(d);
  }
  return n;
}

/* Reaps this process's children (orphans it adopted as a subreaper) until
 * there are none; false if some are still running after `ms`. */
static bool reap_all_children(long ms) {
  for (long waited = 0;; waited += 5) {
    int status;
    pid_t r;
    while ((r = waitpid(-1, &status, WNOHANG)) > 0)
      ;
    if (r < 0 && errno == ECHILD)
      return true;
    if (waited >= ms)
      return false;
    sleep_ms(5);
  }
}

/* A host killed 0..15 ms into a registration probe leaves no process, and
 * the next registration removes the probe's directory. */
static void test_host_killed_during_probe(void** state) {
  (void)state;
  harness_t check;
  harness_init(&check, 240000);
  if (!bwrap_or_skip(&check))
    return;
  harness_finish(&check);
  /* What the host forked after the scan below (a launcher between its fork
   * and its exec, which still shares the probe directory's lock) is
   * adopted here when the host dies, and must go too. */
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  for (int r = 0; r < rounds(); r++)
    for (int step = 0; step <= 15; step++) {
      char before[64][256], after[64][256];
      int nbefore = probe_dirs(before, 64);
      int p[2];
      assert_int_equal(pipe2(p, O_CLOEXEC), 0);
      pid_t host = fork();
      assert_true(host >= 0);
      if (host == 0) {
        close(p[0]);
        if (write(p[1], "R", 1) != 1)
          _exit(2);
        uv_loop_t loop;
        maelys_executor_t* ex = NULL;
        uv_loop_init(&loop);
        maelys_executor_create(&loop, &ex, NULL);
        maelys_backend_options_t* o = NULL;
        maelys_backend_options_create(&o, NULL);
        maelys_backend_options_set(o, "helper", MAELYS_HELPER, NULL);
        maelys_executor_register_backend(ex, maelys_backend_bubblewrap(), o,
                                         NULL);
        for (;;)
          pause();
      }
      close(p[1]);
      char c;
      assert_int_equal(read(p[0], &c, 1), 1);
      close(p[0]);
      sleep_ms(step);
      /* What the probe started so far: the launchers' namespaces. */
      int tree[256];
      int n = descendants(host, tree, 256);
      uint64_t spaces[64];
      int nspaces = 0;
      uint64_t mine = tree_pidns(getpid());
      for (int i = 1; i < n && nspaces < 64; i++) {
        uint64_t ns = tree_pidns(tree[i]);
        if (ns != 0 && ns != mine)
          spaces[nspaces++] = ns;
      }
      kill(host, SIGKILL);
      waitpid(host, NULL, 0);
      int left = tree_wait_gone(tree + 1, (size_t)(n - 1), GONE_MS);
      if (left != 0)
        fail_msg("a registration killed %d ms in left %d processes", step,
                 left);
      for (int i = 0; i < nspaces; i++)
        if (tree_members(spaces[i], NULL, NULL, 0) != 0)
          fail_msg("a registration killed %d ms in left a process in its "
                   "launcher's pid namespace",
                   step);
      if (!reap_all_children(GONE_MS))
        fail_msg("a registration killed %d ms in left a process it forked "
                 "after the scan",
                 step);
      /* The next registration sweeps what the killed one left on disk. */
      harness_t next;
      harness_init(&next, 60000);
      harness_register_bubblewrap(&next);
      harness_finish(&next);
      int nafter = probe_dirs(after, 64);
      for (int i = 0; i < nafter; i++) {
        bool old = false;
        for (int k = 0; k < nbefore; k++)
          old = old || strcmp(after[i], before[k]) == 0;
        /* This build's directories name their creator
         * (maelys-probe-UID-PID-START-XXXXXX): the killed host's, and any
         * other dead creator's, must be gone; a live creator's (another
         * test's, another suite's registration) is in use. A name without
         * a creator is another build's (other suites share /tmp on a
         * development machine) and is not judged here. */
        int creator = 0;
        unsigned long long start = 0;
        char prefix[64];
        snprintf(prefix, sizeof prefix, "maelys-probe-%u-",
                 (unsigned)geteuid());
        bool named = sscanf(after[i] + strlen(prefix), "%d-%llu-", &creator,
                            &start) == 2 &&
                     creator > 0;
        bool dead = named && (creator == host || !process_exists(creator));
        if (!old && dead)
          fail_msg("the probe directory /tmp/%s of a registration killed %d "
                   "ms in outlived the next registration",
                   after[i], step);
      }
    }
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

/* Registrations that probe at once, as every process of a user does (the
 * probe directories of one uid share /tmp): one's sweep of what dead
 * registrations left must never take the directory another is still making.
 * Each child registers REG_ROUNDS times; any failure is reported. */
#define REG_HOSTS 4
#define REG_ROUNDS 12

static int register_repeatedly(int rounds_left) {
  int failures = 0;
  for (int i = 0; i < rounds_left; i++) {
    uv_loop_t loop;
    maelys_executor_t* ex = NULL;
    char* err = NULL;
    if (uv_loop_init(&loop) != 0 ||
        maelys_executor_create(&loop, &ex, &err) != MAELYS_EXECUTOR_OK)
      return 100;
    maelys_backend_options_t* o = NULL;
    maelys_backend_options_create(&o, NULL);
    maelys_backend_options_set(o, "helper", MAELYS_HELPER, NULL);
    maelys_executor_result_t r = maelys_executor_register_backend(
        ex, maelys_backend_bubblewrap(), o, &err);
    maelys_backend_options_destroy(o);
    uint64_t mask = 0;
    char* diag = NULL;
    if (r == MAELYS_EXECUTOR_OK)
      maelys_executor_backend_capabilities(ex, "bubblewrap", &mask, NULL);
    if (r != MAELYS_EXECUTOR_OK ||
        !(mask & MAELYS_BACKEND_CAP_FILESYSTEM_READ)) {
      if (r == MAELYS_EXECUTOR_OK)
        maelys_executor_backend_diagnostic(ex, "bubblewrap", &diag, NULL);
      fprintf(stderr, "registration %d of pid %d: %s\n", i, (int)getpid(),
              r != MAELYS_EXECUTOR_OK ? (err ? err : "?")
                                      : (diag ? diag : "?"));
      failures++;
    }
    maelys_executor_string_free(diag);
    maelys_executor_error_free(err);
    maelys_executor_destroy(ex, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
  }
  return failures;
}

static void test_concurrent_registrations(void** state) {
  (void)state;
  harness_t check;
  harness_init(&check, 240000);
  if (!bwrap_or_skip(&check))
    return;
  harness_finish(&check);
  for (int r = 0; r < rounds(); r++) {
    pid_t hosts[REG_HOSTS];
    for (int i = 0; i < REG_HOSTS; i++) {
      hosts[i] = fork();
      assert_true(hosts[i] >= 0);
      if (hosts[i] == 0)
        _exit(register_repeatedly(REG_ROUNDS));
    }
    int failed = 0;
    for (int i = 0; i < REG_HOSTS; i++) {
      int status = 0;
      assert_int_equal(waitpid(hosts[i], &status, 0), hosts[i]);
      failed += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    if (failed != 0)
      fail_msg("%d of %d hosts registering bubblewrap at once saw a "
               "registration fail (their messages are above)",
               failed, REG_HOSTS);
  }
}

/* ---------------------------------------------------------- identities */

static bool root_or_skip(const char* what) {
  if (getuid() == 0)
    return true;
  /* Explicitly optional: invariant 20 is about runs started by root. An
   * unprivileged user's sandbox necessarily runs as that user, since bwrap
   * maps only the caller's own uid. */
  harness_skip(NULL,
               "%s: invariant 20 applies to runs started by root (this run "
               "is uid %u)",
               what, (unsigned)getuid());
}

/* The receipt's identity uid, or -1. */
static long receipt_uid(maelys_execution_t* e) {
  char* json = NULL;
  if (maelys_execution_receipt(e, &json, NULL) != MAELYS_EXECUTOR_OK)
    return -1;
  const char* at = strstr(json, "\"identity\"");
  long uid = -1;
  if (at != NULL && (at = strstr(at, "\"uid\":")) != NULL)
    uid = atol(at + 6);
  maelys_executor_string_free(json);
  return uid;
}

#define PER_HOST 100

/* Starts PER_HOST sandboxes at once, waits until all run, writes their
 * identities (one per line) on `out` once `go` says the other host's are
 * running too, then stops them. */
static void identity_host(int out, int ready_fd, int go_fd) {
  harness_t h;
  harness_init(&h, 240000);
  harness_register_bubblewrap(&h);
  maelys_executor_plan_t* plan = fixture_plan(0, 0);
  maelys_execution_t* e[PER_HOST];
  maelys_execution_request_t* req[PER_HOST];
  collected_t col[PER_HOST];
  for (int i = 0; i < PER_HOST; i++) {
    req[i] = request_fixture("bubblewrap", ARGS("term-line", "1"));
    char* err = NULL;
    if (maelys_execution_spawn(h.executor, plan, req[i], &e[i], &err) != 0) {
      fprintf(stderr, "spawn %d: %s\n", i, err);
      _exit(3);
    }
    uv_stream_t* s = NULL;
    maelys_execution_stream(e[i], MAELYS_EXEC_STREAM_STDOUT, &s, NULL);
    collect_start(s, &col[i]);
  }
  for (int i = 0; i < PER_HOST; i++)
    while (strstr(col[i].data ? col[i].data : "", "ready") == NULL)
      uv_run(&h.loop, UV_RUN_ONCE);
  char c = 'r';
  if (write(ready_fd, &c, 1) != 1 || read(go_fd, &c, 1) != 1)
    _exit(4);
  waited_t w[PER_HOST];
  memset(w, 0, sizeof w);
  for (int i = 0; i < PER_HOST; i++) {
    maelys_execution_wait(e[i], waited_cb, &w[i], NULL);
    maelys_execution_stop(e[i], MAELYS_EXEC_STOP_FORCED, NULL, NULL, NULL);
  }
  for (int i = 0; i < PER_HOST; i++) {
    harness_run_until(&h, &w[i].done);
    char line[32];
    int n = snprintf(line, sizeof line, "%ld\n", receipt_uid(e[i]));
    if (write(out, line, (size_t)n) != n)
      _exit(5);
    maelys_execution_release(e[i]);
    maelys_execution_request_destroy(req[i]);
    collected_free(&col[i]);
  }
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
  _exit(0);
}

/* Two hosts start 100 sandboxes each at once: 200 distinct host uids, none
 * 65534, all inside the backend's identity range. */
static void test_identities_are_distinct(void** state) {
  (void)state;
  if (!root_or_skip("per-execution identities"))
    return;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  harness_finish(&h);
  int out[2], ready[2], go[2];
  assert_int_equal(pipe(out), 0);
  assert_int_equal(pipe(ready), 0);
  assert_int_equal(pipe(go), 0);
  pid_t hosts[2];
  for (int k = 0; k < 2; k++) {
    hosts[k] = fork();
    assert_true(hosts[k] >= 0);
    if (hosts[k] == 0) {
      close(out[0]);
      close(ready[0]);
      close(go[1]);
      identity_host(out[1], ready[1], go[0]);
    }
  }
  close(out[1]);
  close(ready[1]);
  close(go[0]);
  char c;
  for (int k = 0; k < 2; k++)
    assert_int_equal(read(ready[0], &c, 1), 1);
  /* All 200 run at this point. */
  assert_int_equal(write(go[1], "gg", 2), 2);
  FILE* f = fdopen(out[0], "r");
  long uids[2 * PER_HOST];
  int n = 0;
  char line[32];
  while (n < 2 * PER_HOST && fgets(line, sizeof line, f) != NULL)
    uids[n++] = atol(line);
  fclose(f);
  for (int k = 0; k < 2; k++) {
    int st = 0;
    waitpid(hosts[k], &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  assert_int_equal(n, 2 * PER_HOST);
  for (int i = 0; i < n; i++) {
    if (uids[i] < 1879048192L || uids[i] >= 1879048192L + 65536)
      fail_msg("identity %ld is outside the default range", uids[i]);
    for (int j = i + 1; j < n; j++)
      if (uids[i] == uids[j])
        fail_msg("two simultaneous sandboxes shared the host uid %ld", uids[i]);
  }
  close(ready[0]);
  close(go[1]);
}

/* With a small range of identities, a host is killed while its sandbox
 * holds one: a new start (at once, and its registration probe's sandboxes)
 * never gets an identity while any process of the dead host's sandbox still
 * has it. */
static void test_identity_not_reused_while_alive(void** state) {
  (void)state;
  if (!root_or_skip("identity reuse"))
    return;
  static const char* range = "1879900000:6";
  for (int r = 0; r < 4 * rounds(); r++) {
    char marker[64];
    snprintf(marker, sizeof marker, "reuse-%d-%d", (int)getpid(), r);
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    pid_t host = fork();
    assert_true(host >= 0);
    if (host == 0) {
      close(p[0]);
      harness_t hh;
      harness_init(&hh, 60000);
      maelys_backend_options_t* o = NULL;
      maelys_backend_options_create(&o, NULL);
      maelys_backend_options_set(o, "helper", MAELYS_HELPER, NULL);
      maelys_backend_options_set(o, "identity_range", range, NULL);
      maelys_executor_register_backend(hh.executor, maelys_backend_bubblewrap(),
                                       o, NULL);
      maelys_executor_plan_t* plan = fixture_plan(0, 0);
      maelys_execution_request_t* req =
          request_fixture("bubblewrap", ARGS("term-line", "1", marker));
      collected_t out;
      maelys_execution_t* e = NULL;
      if (maelys_execution_spawn(hh.executor, plan, req, &e, NULL) != 0)
        _exit(3);
      uv_stream_t* s = NULL;
      maelys_execution_stream(e, MAELYS_EXEC_STREAM_STDOUT, &s, NULL);
      collect_start(s, &out);
      /* Until it runs, or its output ended without (its launch failed, e.g.
       * every identity of the range in use by another process). */
      while (!out.eof && strstr(out.data ? out.data : "", "ready") == NULL)
        uv_run(&hh.loop, UV_RUN_ONCE);
      if (strstr(out.data ? out.data : "", "ready") == NULL)
        _exit(5);
      if (write(p[1], "R", 1) != 1)
        _exit(4);
      for (;;)
        pause();
    }
    close(p[1]);
    char c;
    if (read(p[0], &c, 1) != 1) {
      int status = 0;
      waitpid(host, &status, 0);
      fail_msg("round %d: the first host's sandbox did not start (the host "
               "exited with %d; is the identity range %s in use by another "
               "process?)",
               r, WIFEXITED(status) ? WEXITSTATUS(status) : -1, range);
    }
    close(p[0]);
    kill(host, SIGKILL);
    waitpid(host, NULL, 0);
    /* At once, a new start with the same single identity. */
    harness_t h;
    harness_init(&h, 60000);
    maelys_backend_options_t* o = NULL;
    maelys_backend_options_create(&o, NULL);
    maelys_backend_options_set(o, "helper", MAELYS_HELPER, NULL);
    maelys_backend_options_set(o, "identity_range", range, NULL);
    assert_int_equal(maelys_executor_register_backend(
                         h.executor, maelys_backend_bubblewrap(), o, NULL),
                     0);
    maelys_backend_options_destroy(o);
    maelys_executor_plan_t* plan = fixture_plan(0, 0);
    char mine[64];
    snprintf(mine, sizeof mine, "reuse-new-%d-%d", (int)getpid(), r);
    maelys_execution_request_t* req =
        request_fixture("bubblewrap", ARGS("term-line", "1", mine));
    collected_t out;
    maelys_execution_t* e = NULL;
    assert_int_equal(maelys_execution_spawn(h.executor, plan, req, &e, NULL),
                     0);
    uv_stream_t* s = NULL;
    maelys_execution_stream(e, MAELYS_EXEC_STREAM_STDOUT, &s, NULL);
    collect_start(s, &out);
    waited_t w;
    memset(&w, 0, sizeof w);
    maelys_execution_wait(e, waited_cb, &w, NULL);
    while (!out.eof && !w.done &&
           strstr(out.data ? out.data : "", "ready") == NULL)
      uv_run(&h.loop, UV_RUN_ONCE);
    if (strstr(out.data ? out.data : "", "ready") != NULL) {
      /* It runs: no process of the dead host's sandbox that is still alive
       * may have its identity. */
      int pids[64], old[64];
      int n = marked_pids(mine, pids, 64);
      int nold = marked_pids(marker, old, 64);
      for (int i = 0; i < n && i < 64; i++)
        for (int k = 0; k < nold && k < 64; k++)
          if (tree_alive(old[k]) && tree_uid(old[k]) == tree_uid(pids[i]))
            fail_msg("round %d: the identity %ld was given to a new sandbox "
                     "while a process of the killed host's sandbox still "
                     "had it",
                     r, tree_uid(pids[i]));
      maelys_execution_stop(e, MAELYS_EXEC_STOP_FORCED, NULL, NULL, NULL);
    } else {
      /* Refused, never shared. Usually said as "in use"; when every
       * identity of the small range is held by the killed hosts' dying
       * sandboxes, bwrap itself sometimes fails instead ("open /proc/N/ns
       * failed": its sandbox child gone before it looked) -- a launch
       * failure too, never a shared identity. Not yet understood: noted in
       * the closing note of this wave. */
      harness_run_until(&h, &w.done);
      assert_int_equal(w.status.outcome, MAELYS_EXEC_OUTCOME_LAUNCH_FAILED);
      if (strstr(w.message, "in use") == NULL)
        print_message("round %d: launch refused otherwise: %s\n", r, w.message);
    }
    harness_run_until(&h, &w.done);
    maelys_execution_release(e);
    collected_free(&out);
    maelys_execution_request_destroy(req);
    maelys_executor_plan_destroy(plan);
    harness_finish(&h);
    int pids[8];
    assert_int_equal(
        tree_wait_gone(pids, (size_t)marked_pids(marker, pids, 8), GONE_MS), 0);
  }
}

/* A process that holds host ids the way a container manager's does: in a
 * user namespace that root created, whose uid_map and gid_map are `map`;
 * when `become` it takes the namespace's uid and gid 0 (host id: the map's
 * first outside id), else it stays host root and only the mapping holds the
 * range. Killed and reaped by the caller. */
static pid_t holders[4];

/* Ends whatever holder a failed assertion left running (cmocka leaves the
 * test at once). */
static int end_holders(void** state) {
  (void)state;
  for (size_t i = 0; i < sizeof holders / sizeof holders[0]; i++)
    if (holders[i] > 0) {
      kill(holders[i], SIGKILL);
      waitpid(holders[i], NULL, 0);
      holders[i] = 0;
    }
  return 0;
}

static void end_holder(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  for (size_t i = 0; i < sizeof holders / sizeof holders[0]; i++)
    if (holders[i] == pid)
      holders[i] = 0;
}

static void keep_holder(pid_t pid) {
  for (size_t i = 0; i < sizeof holders / sizeof holders[0]; i++)
    if (holders[i] == 0) {
      holders[i] = pid;
      return;
    }
  fail_msg("too many holders");
}

static pid_t userns_holder(const char* map, bool become) {
  int ready[2], go[2];
  assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
  assert_int_equal(pipe2(go, O_CLOEXEC), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    char c = 'u';
    if (unshare(CLONE_NEWUSER) != 0 || write(ready[1], &c, 1) != 1 ||
        read(go[0], &c, 1) != 1)
      _exit(3);
    if (become && (setresgid(0, 0, 0) != 0 || setresuid(0, 0, 0) != 0))
      _exit(4);
    /* After the change of ids, which clears a parent-death signal. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (write(ready[1], &c, 1) != 1)
      _exit(5);
    for (;;)
      pause();
  }
  keep_holder(pid);
  char c;
  assert_int_equal(read(ready[0], &c, 1), 1);
  static const char* const files[] = {"uid_map", "setgroups", "gid_map"};
  for (int i = 0; i < 3; i++) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, files[i]);
    const char* text = i == 1 ? "deny" : map;
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
  }
  assert_int_equal(write(go[1], "g", 1), 1);
  assert_int_equal(read(ready[0], &c, 1), 1);
  close(ready[0]);
  close(ready[1]);
  close(go[0]);
  close(go[1]);
  return pid;
}

/* Runs the fixture under the fixed identity uid:gid, or (uid 0) under one
 * of the backend's identity_range `range`; returns the outcome, with the
 * launch failure's message in `message` and the identity's uid in *got. */
static maelys_execution_outcome_t run_identity(uint32_t uid, uint32_t gid,
                                               const char* range, long* got,
                                               char* message, size_t size) {
  harness_t h;
  harness_init(&h, 60000);
  maelys_backend_options_t* o = NULL;
  maelys_backend_options_create(&o, NULL);
  maelys_backend_options_set(o, "helper", MAELYS_HELPER, NULL);
  if (range != NULL)
    maelys_backend_options_set(o, "identity_range", range, NULL);
  assert_int_equal(maelys_executor_register_backend(
                       h.executor, maelys_backend_bubblewrap(), o, NULL),
                   0);
  maelys_backend_options_destroy(o);
  maelys_executor_plan_t* plan = fixture_plan(0, 0);
  maelys_execution_request_t* req =
      request_fixture("bubblewrap", ARGS("exit", "0"));
  if (uid != 0)
    assert_int_equal(maelys_execution_request_set_identity(req, uid, gid, NULL),
                     0);
  maelys_execution_t* e = NULL;
  char* err = NULL;
  if (maelys_execution_spawn(h.executor, plan, req, &e, &err) != 0)
    fail_msg("spawn: %s", err);
  waited_t w;
  memset(&w, 0, sizeof w);
  maelys_execution_wait(e, waited_cb, &w, NULL);
  harness_run_until(&h, &w.done);
  snprintf(message, size, "%s", w.message);
  if (got != NULL)
    *got = receipt_uid(e);
  maelys_execution_release(e);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
  return w.status.outcome;
}

static void expect_identity_refused(uint32_t uid, uint32_t gid,
                                    const char* needle) {
  char message[1024];
  maelys_execution_outcome_t o =
      run_identity(uid, gid, NULL, NULL, message, sizeof message);
  if (o != MAELYS_EXEC_OUTCOME_LAUNCH_FAILED ||
      strstr(message, "in use") == NULL || strstr(message, needle) == NULL)
    fail_msg("identity %u:%u should be refused as in use (%s), got outcome "
             "%d: %s",
             (unsigned)uid, (unsigned)gid, needle, (int)o, message);
}

/* Whether any process the host's /proc shows has `uid` (any of its four). */
static bool uid_has_process(unsigned uid) {
  DIR* d = opendir("/proc");
  assert_non_null(d);
  bool found = false;
  struct dirent* e;
  while (!found && (e = readdir(d)) != NULL) {
    char path[300], text[4096];
    snprintf(path, sizeof path, "/proc/%.255s/status", e->d_name);
    FILE* f = fopen(path, "r");
    if (f == NULL)
      continue;
    while (fgets(text, sizeof text, f) != NULL) {
      unsigned a, b, c, x;
      if (sscanf(text, "Uid: %u %u %u %u", &a, &b, &c, &x) == 4)
        found = a == uid || b == uid || c == uid || x == uid;
    }
    fclose(f);
  }
  closedir(d);
  return found;
}

/* Invariant 20 against ids held where the kernel's per-uid count does not
 * look: a process of host uid X inside a user namespace root created (it is
 * charged to the namespace's owner, root), a mapped range no process runs in
 * yet, a process holding only the gid, and a user of the user database with
 * no process. Each is refused, saying why; once released, the same ids run. */
static void test_identity_held_elsewhere_is_refused(void** state) {
  (void)state;
  if (!root_or_skip("identities held elsewhere"))
    return;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  harness_finish(&h);
  uint32_t x = 1879300000u + (uint32_t)(getpid() % 1000) * 40u;
  char map[64];

  /* The attack of the review: uid X inside a root-made user namespace. */
  snprintf(map, sizeof map, "0 %u 1\n", (unsigned)x);
  pid_t holder = userns_holder(map, true);
  expect_identity_refused(x, x, "has uid");
  end_holder(holder);

  /* A mapping over X+10..X+19, nobody running as any of them yet. */
  snprintf(map, sizeof map, "0 %u 10\n", (unsigned)x + 10);
  holder = userns_holder(map, false);
  expect_identity_refused(x + 15, x + 15, "maps host uids");
  /* From a range the mapping mostly covers, X+10..X+23, only X+20 to X+23
   * are given. Four, not two: the registration's probe runs two sandboxes
   * at once, and with two free ids it found none free in 1 of 2 runs under
   * load (ctest -j2; which check refused them is not reported, only the
   * last refusal: probably the previous round's identities still counted
   * for a moment). */
  char range[64], message[1024];
  snprintf(range, sizeof range, "%u:14", (unsigned)x + 10);
  for (int i = 0; i < 4; i++) {
    long got = -1;
    assert_int_equal(run_identity(0, 0, range, &got, message, sizeof message),
                     MAELYS_EXEC_OUTCOME_EXITED);
    if (got < (long)x + 20 || got > (long)x + 23)
      fail_msg("the identity %ld lies in a range a user namespace maps", got);
  }
  end_holder(holder);

  /* Only the gid: a plain process of another uid whose group is X+30. */
  pid_t g = fork();
  assert_true(g >= 0);
  if (g == 0) {
    if (setgroups(0, NULL) != 0 || setresgid(x + 30, x + 30, x + 30) != 0 ||
        setresuid(x + 31, x + 31, x + 31) != 0)
      _exit(3);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (;;)
      pause();
  }
  keep_holder(g);
  for (int i = 0; i < 1000 && !uid_has_process(x + 31); i++)
    usleep(1000);
  expect_identity_refused(x + 30, x + 30, "has gid");
  end_holder(g);

  /* A user of the database with no process (a system account). */
  unsigned user = 0;
  setpwent();
  for (struct passwd* pw; user == 0 && (pw = getpwent()) != NULL;)
    if (pw->pw_uid != 0 && pw->pw_uid < 60000 && !uid_has_process(pw->pw_uid))
      user = pw->pw_uid;
  endpwent();
  if (user != 0)
    expect_identity_refused(user, x + 35, "user database");

  /* Released: the same ids are free again. */
  assert_int_equal(run_identity(x, x, NULL, NULL, message, sizeof message),
                   MAELYS_EXEC_OUTCOME_EXITED);
  assert_int_equal(
      run_identity(x + 15, x + 15, NULL, NULL, message, sizeof message),
      MAELYS_EXEC_OUTCOME_EXITED);
}

/* A host process running as 65534 (nobody, which every sandbox was before)
 * cannot enter a root-started sandbox: not its root, not its namespaces. */
static void test_nobody_cannot_enter(void** state) {
  (void)state;
  if (!root_or_skip("nobody entering a sandbox"))
    return;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  maelys_executor_plan_t* plan = fixture_plan(0, 0);
  char marker[64];
  snprintf(marker, sizeof marker, "enter-%d", (int)getpid());
  maelys_execution_request_t* req =
      request_fixture("bubblewrap", ARGS("term-line", "1", marker));
  maelys_execution_t* e = NULL;
  assert_int_equal(maelys_execution_spawn(h.executor, plan, req, &e, NULL), 0);
  uv_stream_t* s = NULL;
  collected_t out;
  maelys_execution_stream(e, MAELYS_EXEC_STREAM_STDOUT, &s, NULL);
  collect_start(s, &out);
  while (strstr(out.data ? out.data : "", "ready") == NULL)
    uv_run(&h.loop, UV_RUN_ONCE);
  int pids[16];
  int n = marked_pids(marker, pids, 16);
  assert_true(n >= 3);
  pid_t child = fork();
  if (child == 0) {
    if (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
        setresuid(65534, 65534, 65534) != 0)
      _exit(2);
    for (int i = 0; i < n; i++) {
      char path[64];
      snprintf(path, sizeof path, "/proc/%d/root/", pids[i]);
      int fd = open(path, O_RDONLY | O_DIRECTORY);
      if (fd >= 0)
        _exit(10 + i);
      static const char* const spaces[] = {"mnt", "pid", "user", "net"};
      for (int k = 0; k < 4; k++) {
        snprintf(path, sizeof path, "/proc/%d/ns/%s", pids[i], spaces[k]);
        fd = open(path, O_RDONLY);
        if (fd >= 0 && setns(fd, 0) == 0)
          _exit(40 + i);
        if (fd >= 0)
          close(fd);
      }
      if (kill(pids[i], 0) == 0)
        _exit(70 + i);
    }
    _exit(0);
  }
  int st = 0;
  waitpid(child, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    fail_msg("uid 65534 reached into the sandbox (code %d)",
             WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  waited_t w;
  memset(&w, 0, sizeof w);
  maelys_execution_wait(e, waited_cb, &w, NULL);
  maelys_execution_stop(e, MAELYS_EXEC_STOP_FORCED, NULL, NULL, NULL);
  harness_run_until(&h, &w.done);
  maelys_execution_release(e);
  collected_free(&out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

/* ------------------------------------------------------------- ceilings */

/* A fork bomb stops at the task ceiling, and the host can still fork. */
static void test_fork_bomb_stops_at_ceiling(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  maelys_executor_plan_t* plan = fixture_plan(64, 0);
  maelys_execution_request_t* req =
      request_fixture("bubblewrap", ARGS("forkbomb"));
  collected_t out;
  waited_t w;
  run_capture(&h, plan, req, &out, &w);
  int forked = -1, err = 0;
  const char* at = strstr(out.data ? out.data : "", "forked=");
  if (at == NULL || sscanf(at, "forked=%d:%d", &forked, &err) != 2)
    fail_msg("no fork count: %s", out.data ? out.data : "");
  if (forked >= 64 || err != EAGAIN)
    fail_msg("the sandbox forked %d times (errno %d) under a ceiling of 64",
             forked, err);
  pid_t p = fork();
  assert_true(p >= 0);
  if (p == 0)
    _exit(0);
  waitpid(p, NULL, 0);
  collected_free(&out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

/* 50 children allocating memory are stopped by the sandbox-wide memory
 * ceiling where the backend proved it; where it did not, a plan with an
 * explicit memory ceiling is refused, naming the capability. Either way the
 * receipt of a run records the limits. */
static void test_memory_ceiling(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 120000);
  if (!bwrap_or_skip(&h))
    return;
  uint64_t mask = 0;
  maelys_executor_backend_capabilities(h.executor, "bubblewrap", &mask, NULL);
  maelys_executor_plan_t* plan = fixture_plan(256, UINT64_C(64) << 20);
  maelys_execution_request_t* req =
      request_fixture("bubblewrap", ARGS("children-alloc", "50", "4"));
  if (!(mask & MAELYS_BACKEND_CAP_LIMIT_MEMORY)) {
    char* why = NULL;
    maelys_executor_backend_missing_reason(
        h.executor, "bubblewrap", MAELYS_BACKEND_CAP_LIMIT_MEMORY, &why, NULL);
    print_message("memory ceiling not proved here: %s\n", why);
    assert_non_null(strstr(why, "memory: unbounded"));
    maelys_executor_string_free(why);
    maelys_execution_t* e = NULL;
    char* err = NULL;
    assert_int_equal(maelys_execution_spawn(h.executor, plan, req, &e, &err),
                     MAELYS_EXECUTOR_ERR_CAPABILITY);
    assert_non_null(strstr(err, "limit_memory"));
    assert_null(e);
    maelys_executor_error_free(err);
  } else {
    maelys_execution_t* e = NULL;
    char* err = NULL;
    if (maelys_execution_spawn(h.executor, plan, req, &e, &err) != 0)
      fail_msg("spawn: %s", err);
    uv_stream_t* s = NULL;
    collected_t out;
    maelys_execution_stream(e, MAELYS_EXEC_STREAM_STDOUT, &s, NULL);
    collect_start(s, &out);
    waited_t w;
    memset(&w, 0, sizeof w);
    maelys_execution_wait(e, waited_cb, &w, NULL);
    maelys_execution_stop(e, MAELYS_EXEC_STOP_GRACEFUL_THEN_FORCED, NULL, NULL,
                          NULL);
    /* Stopped only after a grace long enough for 200 MiB. */
    harness_run_until(&h, &w.done);
    if (strstr(out.data ? out.data : "", "allocated=50") != NULL)
      fail_msg("50 children touched 200 MiB under a 64 MiB ceiling");
    char* receipt = NULL;
    assert_int_equal(maelys_execution_receipt(e, &receipt, NULL), 0);
    assert_non_null(strstr(receipt, "\"memory\": 67108864"));
    assert_non_null(strstr(receipt, "\"tasks\": 256"));
    const char* peak = strstr(receipt, "\"memory_peak_bytes\": ");
    assert_non_null(peak);
    /* The recorded peak is the cgroup's high-water mark, which the kernel's
     * per-CPU charge batching lets pass the limit by a little (seen once in
     * CI on a loaded machine); the ceiling itself is the check above: 200
     * MiB were never allocated. */
    long long peak_bytes = atoll(peak + 21);
    if (peak_bytes > (64LL << 20) + (8LL << 20))
      fail_msg("memory peak %lld bytes under a 64 MiB ceiling", peak_bytes);
    maelys_executor_string_free(receipt);
    maelys_execution_release(e);
    collected_free(&out);
  }
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

/* The memory cgroup line of /proc/PID/cgroup ("N:memory:/path", or the v2
 * line "0::/path" when there is no v1 memory hierarchy); false when gone. */
static bool memory_cgroup_of(int pid, char* out, size_t size) {
  char path[64], line[1024];
  snprintf(path, sizeof path, "/proc/%d/cgroup", pid);
  FILE* f = fopen(path, "re");
  if (f == NULL)
    return false;
  out[0] = '\0';
  while (fgets(line, sizeof line, f) != NULL) {
    line[strcspn(line, "\n")] = '\0';
    const char* c = strchr(line, ':');
    if (c != NULL && strncmp(c, ":memory:", 8) == 0) {
      snprintf(out, size, "%s", line);
      break;
    }
    if (strncmp(line, "0::", 3) == 0)
      snprintf(out, size, "%s", line);
  }
  fclose(f);
  return out[0] != '\0';
}

/* With a memory ceiling every process of the execution is in the cgroup the
 * core made for it: the launcher, which joins it itself (backend ABI 7),
 * and everything it started, the payload included. */
static void test_memory_cgroup_holds_every_process(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  uint64_t mask = 0;
  maelys_executor_backend_capabilities(h.executor, "bubblewrap", &mask, NULL);
  if (!(mask & MAELYS_BACKEND_CAP_LIMIT_MEMORY)) {
    /* test_memory_ceiling checks the refusal there. */
    harness_skip(&h, "no memory ceiling is proved here (not root?)");
  }
  char marker[64];
  snprintf(marker, sizeof marker, "cgroup-tree-%d", (int)getpid());
  maelys_executor_plan_t* plan = fixture_plan(256, UINT64_C(64) << 20);
  maelys_execution_request_t* req =
      request_fixture("bubblewrap", ARGS("sleep", "600000", marker));
  maelys_execution_t* e = NULL;
  char* err = NULL;
  if (maelys_execution_spawn(h.executor, plan, req, &e, &err) != 0)
    fail_msg("spawn: %s", err);
  /* The launcher's command line has the marker too: wait for the payload
   * itself, which runs only once the launcher joined. */
  int pids[16];
  int n = 0;
  bool payload = false;
  for (int tries = 0; tries < 5000 && !payload; tries++) {
    n = marked_pids(marker, pids, 16);
    for (int i = 0; i < n && i < 16 && !payload; i++) {
      char path[64], comm[32] = "";
      snprintf(path, sizeof path, "/proc/%d/comm", pids[i]);
      FILE* f = fopen(path, "re");
      if (f != NULL) {
        payload = fgets(comm, sizeof comm, f) != NULL &&
                  strncmp(comm, "maelys-fixture", 14) == 0;
        fclose(f);
      }
    }
    if (!payload)
      sleep_ms(1);
  }
  if (!payload)
    fail_msg("the payload never appeared");
  char launcher[1024], mine[1024], other[1024];
  assert_true(
      memory_cgroup_of(maelys_execution_pid(e), launcher, sizeof launcher));
  assert_true(memory_cgroup_of(getpid(), mine, sizeof mine));
  if (strstr(launcher, "/maelys-") == NULL || strcmp(launcher, mine) == 0)
    fail_msg("the launcher is in '%s', not an execution's cgroup", launcher);
  for (int i = 0; i < n && i < 16; i++)
    if (memory_cgroup_of(pids[i], other, sizeof other) &&
        strcmp(other, launcher) != 0)
      fail_msg("process %d is in '%s', the launcher in '%s'", pids[i], other,
               launcher);
  waited_t w;
  memset(&w, 0, sizeof w);
  maelys_execution_wait(e, waited_cb, &w, NULL);
  maelys_execution_stop(e, MAELYS_EXEC_STOP_FORCED, NULL, NULL, NULL);
  harness_run_until(&h, &w.done);
  maelys_execution_release(e);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  harness_finish(&h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_host_killed_at_every_step),
      cmocka_unit_test(test_bwrap_monitor_killed),
      cmocka_unit_test(test_sandbox_init_killed),
      cmocka_unit_test(test_host_killed_during_probe),
      cmocka_unit_test(test_concurrent_registrations),
      cmocka_unit_test(test_identities_are_distinct),
      cmocka_unit_test(test_identity_not_reused_while_alive),
      cmocka_unit_test_teardown(test_identity_held_elsewhere_is_refused,
                                end_holders),
      cmocka_unit_test(test_nobody_cannot_enter),
      cmocka_unit_test(test_fork_bomb_stops_at_ceiling),
      cmocka_unit_test(test_memory_ceiling),
      cmocka_unit_test(test_memory_cgroup_holds_every_process),
  };
  return harness_exit(
      cmocka_run_group_tests_name("lifetime", tests, NULL, NULL));
}
