/*
 * Denials made visible (issue 17, item 7) through the bubblewrap backend:
 * what the sandbox refused is recorded -- each refused socket, socketpair and
 * connect of network none, each execve of a path (or of the interpreter a
 * script names) that the host has and the sandbox does not -- reported to
 * the host as it happens and listed in the receipt, while the payload sees
 * exactly the errors it always saw. The recording never opens anything: with
 * its listener killed, or with only bwrap's own filter, the calls are still
 * refused.
 *
 * Where bwrap cannot run, each test is skipped with the reason, unless
 * MAELYS_BWRAP_MUST_WORK=1 (set by CI), which turns a skip into a failure.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>

#include "seccomp-baseline.h"
#include "harness.h"

#define ARGS(...) ((const char* const[]){__VA_ARGS__, NULL})

static char self_path[PATH_MAX];

static bool bwrap_or_skip(harness_t* h) {
  uint64_t need = MAELYS_BACKEND_CAP_NETWORK_NONE |
                  MAELYS_BACKEND_CAP_FILESYSTEM_READ |
                  MAELYS_BACKEND_CAP_PROCESS_TREE;
  uint64_t mask = harness_register_bubblewrap(h);
  if ((mask & need) == need)
    return true;
  char* diag = NULL;
  maelys_executor_backend_diagnostic(h->executor, "bubblewrap", &diag, NULL);
  const char* must = getenv("MAELYS_BWRAP_MUST_WORK");
  if (must != NULL && strcmp(must, "1") == 0)
    fail_msg("bubblewrap cannot confine here and MAELYS_BWRAP_MUST_WORK=1: %s",
             diag ? diag : "");
  print_message("SKIPPED: bubblewrap cannot confine here: %s\n",
                diag ? diag : "");
  maelys_executor_string_free(diag);
  harness_finish(h);
  return false;
}

/* ---------------------------------------------------------- the host side */

/* A host directory the sandbox does not bind, with programs in it, and a
 * read-only one it binds, holding a script whose interpreter is only on the
 * host. Every level is searchable by any uid: a root-started sandbox's
 * listener runs under the sandbox's own uid. */
typedef struct scene {
  char dir[64];
  char hidden[300]; /* DIR/hidden/bin/tool: on the host only */
  char interp[300]; /* DIR/hidden/bin/interp: on the host only */
  char ro[300];     /* DIR/ro, bound read-only */
  char script[320]; /* DIR/ro/script: "#!DIR/hidden/bin/interp" */
  char abstract[64];
  int listener; /* an abstract unix socket listening on the host */
} scene_t;

static void write_file(const char* path, const char* text, mode_t mode) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  assert_int_equal(chmod(path, mode), 0);
}

static void scene_make(scene_t* s) {
  snprintf(s->dir, sizeof s->dir, "/tmp/maelys-denials-XXXXXX");
  assert_non_null(mkdtemp(s->dir));
  assert_int_equal(chmod(s->dir, 0755), 0);
  char p[300];
  snprintf(p, sizeof p, "%s/hidden", s->dir);
  assert_int_equal(mkdir(p, 0755), 0);
  snprintf(p, sizeof p, "%s/hidden/bin", s->dir);
  assert_int_equal(mkdir(p, 0755), 0);
  snprintf(s->hidden, sizeof s->hidden, "%s/hidden/bin/tool", s->dir);
  snprintf(s->interp, sizeof s->interp, "%s/hidden/bin/interp", s->dir);
  write_file(s->hidden, "#!/bin/sh\nexit 0\n", 0755);
  write_file(s->interp, "#!/bin/sh\nexit 0\n", 0755);
  snprintf(s->ro, sizeof s->ro, "%s/ro", s->dir);
  assert_int_equal(mkdir(s->ro, 0755), 0);
  snprintf(s->script, sizeof s->script, "%s/script", s->ro);
  char text[400];
  snprintf(text, sizeof text, "#!%s\n", s->interp);
  write_file(s->script, text, 0755);
  /* An abstract socket of the host's network namespace: network none keeps
   * the sandbox off it. */
  snprintf(s->abstract, sizeof s->abstract, "maelys-denials-%d", (int)getpid());
  s->listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(s->listener >= 0);
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  memcpy(a.sun_path + 1, s->abstract, strlen(s->abstract));
  assert_int_equal(bind(s->listener, (struct sockaddr*)&a,
                        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
                                    strlen(s->abstract))),
                   0);
  assert_int_equal(listen(s->listener, 4), 0);
}

static void scene_remove(scene_t* s) {
  close(s->listener);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
  int r = system(cmd);
  (void)r;
}

static maelys_executor_plan_t* plan_for(const scene_t* s,
                                        maelys_executor_network_t net) {
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
  assert_int_equal(maelys_executor_plan_add_rule(
                       p, s->ro, MAELYS_EXECUTOR_ACCESS_READ,
                       MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_set_network(p, net, NULL), 0);
  assert_int_equal(maelys_executor_plan_set_process_tree_required(p, 1, NULL),
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

/* The payload's own notification filter was refused, and no socket of a
 * refused family opened through it. */
static void expect_refused_selfnotify(const collected_t* out) {
  if (out->data != NULL && strstr(out->data, "selfnotify=open\n") != NULL)
    fail_msg("the payload let its own socket(AF_INET) through:\n%s", out->data);
  if (out->data == NULL ||
      strstr(out->data, "selfnotify-load=blocked:") == NULL)
    fail_msg("the payload stacked a notification filter of its own:\n%s",
             out->data ? out->data : "");
}

/* The receipt's "denials" member (a reference into *doc). */
static json_t* receipt_denials(maelys_execution_t* e, json_t** doc) {
  char* json = NULL;
  assert_int_equal(maelys_execution_receipt(e, &json, NULL), 0);
  *doc = json_loads(json, 0, NULL);
  maelys_executor_string_free(json);
  assert_non_null(*doc);
  json_t* d = json_object_get(*doc, "denials");
  if (!json_is_object(d))
    fail_msg("the receipt has no \"denials\" section");
  return d;
}

static json_int_t count_of(json_t* denials, const char* kind) {
  json_t* c = json_object_get(json_object_get(denials, "counts"), kind);
  assert_true(json_is_integer(c));
  return json_integer_value(c);
}

/* The example with this call and detail, or NULL. */
static json_t* example(json_t* denials, const char* call, const char* detail) {
  size_t i;
  json_t* x;
  json_array_foreach(json_object_get(denials, "examples"), i, x) {
    if (strcmp(json_string_value(json_object_get(x, "call")), call) == 0 &&
        strcmp(json_string_value(json_object_get(x, "detail")), detail) == 0)
      return x;
  }
  return NULL;
}

static void expect_example(json_t* denials, const char* kind, const char* call,
                           const char* detail, int err, const char* error,
                           const char* allow_key, const char* allow_value) {
  json_t* x = example(denials, call, detail);
  if (x == NULL) {
    char* text = json_dumps(denials, JSON_INDENT(1));
    fail_msg("no example %s(%s) in %s", call, detail, text);
  }
  assert_string_equal(json_string_value(json_object_get(x, "kind")), kind);
  assert_int_equal(json_integer_value(json_object_get(x, "errno")), err);
  assert_string_equal(json_string_value(json_object_get(x, "error")), error);
  json_t* allow = json_object_get(x, "allow");
  if (allow_key == NULL) {
    assert_true(json_is_null(allow));
  } else {
    assert_string_equal(json_string_value(json_object_get(allow, allow_key)),
                        allow_value);
  }
}

/* What the host's denial callback saw. */
typedef struct seen {
  int calls;
  int first_count[3];
  char first_call[3][16];
  char first_allow[3][300];
} seen_t;

static void on_denial(maelys_execution_t* e, const maelys_execution_denial_t* d,
                      void* data) {
  seen_t* s = data;
  (void)e;
  s->calls++;
  assert_true(d->kind == MAELYS_EXEC_DENIAL_NETWORK ||
              d->kind == MAELYS_EXEC_DENIAL_EXEC);
  if (s->first_count[d->kind] != 0)
    return;
  s->first_count[d->kind] = (int)d->count;
  snprintf(s->first_call[d->kind], sizeof s->first_call[0], "%s", d->call);
  snprintf(s->first_allow[d->kind], sizeof s->first_allow[0], "%s=%s",
           d->allow_key ? d->allow_key : "",
           d->allow_value ? d->allow_value : "");
}

/* ---------------------------------------------------------------- tests */

/* Network none: every refused call gets the error it always got, and is
 * recorded -- counted, one example per distinct call, each with what would
 * allow it. A path that exists nowhere is not a denial. */
static void test_denials_recorded(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  scene_t s;
  scene_make(&s);
  maelys_executor_plan_t* plan = plan_for(&s, MAELYS_EXECUTOR_NETWORK_NONE);
  maelys_execution_request_t* req = request_fixture(
      "bubblewrap",
      ARGS("deny", "socket", "socket", "socketpair", "unix", "abstract",
           s.abstract, "exec", "missing", "/opt/nonexistent/bin/x", "exec",
           "hidden", s.hidden, "exec", "script", s.script));
  maelys_execution_t* e = NULL;
  char* err = NULL;
  if (maelys_execution_spawn(h.executor, plan, req, &e, &err) != 0)
    fail_msg("spawn: %s", err);
  seen_t seen;
  memset(&seen, 0, sizeof seen);
  assert_int_equal(maelys_execution_on_denial(e, on_denial, &seen, NULL), 0);
  uv_stream_t* stream = NULL;
  assert_int_equal(
      maelys_execution_stream(e, MAELYS_EXEC_STREAM_STDOUT, &stream, NULL), 0);
  collected_t out;
  collect_start(stream, &out);
  waited_t w;
  memset(&w, 0, sizeof w);
  maelys_execution_wait(e, waited_cb, &w, NULL);
  harness_run_until(&h, &w.done);
  harness_run_until(&h, &out.eof);
  if (w.status.outcome != MAELYS_EXEC_OUTCOME_EXITED || w.status.exit_code != 0)
    fail_msg("the payload did not exit 0 (%d/%d: %s):\n%s", w.status.outcome,
             w.status.exit_code, w.status.message, out.data ? out.data : "");

  /* What the payload saw: the same errors as without any recording. */
  expect_line(&out, "socket=blocked:1");
  expect_line(&out, "socketpair=blocked:1");
  expect_line(&out, "unix=open");
  expect_line(&out, "connect=blocked:111");
  expect_line(&out, "exec-missing=blocked:2");
  expect_line(&out, "exec-hidden=blocked:2");
  expect_line(&out, "exec-script=blocked:2");

  json_t* doc = NULL;
  json_t* d = receipt_denials(e, &doc);
  assert_string_equal(json_string_value(json_object_get(d, "recording")),
                      "complete");
  /* Two sockets, a socketpair and the connect; the hidden program and the
   * script's interpreter. Not the path that exists nowhere. */
  assert_int_equal(count_of(d, "network"), 4);
  assert_int_equal(count_of(d, "exec"), 2);
  assert_int_equal(json_integer_value(json_object_get(d, "total")), 6);
  expect_example(d, "network", "socket", "AF_INET", 1, "EPERM", "network",
                 "inherit");
  expect_example(d, "network", "socketpair", "AF_INET", 1, "EPERM", "network",
                 "inherit");
  char at[80];
  snprintf(at, sizeof at, "@%s", s.abstract);
  expect_example(d, "network", "connect", at, 111, "ECONNREFUSED", "network",
                 "inherit");
  char dir[300];
  snprintf(dir, sizeof dir, "%s/hidden/bin", s.dir);
  expect_example(d, "exec", "execve", s.hidden, 2, "ENOENT", "read", dir);
  expect_example(d, "exec", "interpreter", s.interp, 2, "ENOENT", "read", dir);
  assert_null(example(d, "execve", "/opt/nonexistent/bin/x"));
  /* One example per distinct denial: the second socket() only counted. */
  assert_int_equal(json_array_size(json_object_get(d, "examples")), 5);

  /* The host heard of each kind as it happened, first denial first. */
  assert_int_equal(seen.calls, 5);
  assert_int_equal(seen.first_count[MAELYS_EXEC_DENIAL_NETWORK], 1);
  assert_string_equal(seen.first_call[MAELYS_EXEC_DENIAL_NETWORK], "socket");
  assert_string_equal(seen.first_allow[MAELYS_EXEC_DENIAL_NETWORK],
                      "network=inherit");
  assert_int_equal(seen.first_count[MAELYS_EXEC_DENIAL_EXEC], 1);
  assert_string_equal(seen.first_call[MAELYS_EXEC_DENIAL_EXEC], "execve");
  char allow[320];
  snprintf(allow, sizeof allow, "read=%s", dir);
  assert_string_equal(seen.first_allow[MAELYS_EXEC_DENIAL_EXEC], allow);

  json_decref(doc);
  maelys_execution_release(e);
  collected_free(&out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  scene_remove(&s);
  harness_finish(&h);
}

/* Network inherit: the network is the host's and nothing of it is a
 * denial; a hidden program still is. */
static void test_inherit_records_only_exec(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  scene_t s;
  scene_make(&s);
  maelys_executor_plan_t* plan = plan_for(&s, MAELYS_EXECUTOR_NETWORK_INHERIT);
  maelys_execution_request_t* req = request_fixture(
      "bubblewrap", ARGS("deny", "socket", "abstract", s.abstract, "exec",
                         "hidden", s.hidden));
  collected_t out;
  waited_t w;
  maelys_execution_t* e = NULL;
  assert_int_equal(maelys_execution_spawn(h.executor, plan, req, &e, NULL), 0);
  uv_stream_t* stream = NULL;
  assert_int_equal(
      maelys_execution_stream(e, MAELYS_EXEC_STREAM_STDOUT, &stream, NULL), 0);
  collect_start(stream, &out);
  memset(&w, 0, sizeof w);
  maelys_execution_wait(e, waited_cb, &w, NULL);
  harness_run_until(&h, &w.done);
  harness_run_until(&h, &out.eof);
  expect_line(&out, "socket=open");
  expect_line(&out, "connect=open");
  expect_line(&out, "exec-hidden=blocked:2");
  json_t* doc = NULL;
  json_t* d = receipt_denials(e, &doc);
  assert_int_equal(count_of(d, "network"), 0);
  assert_int_equal(count_of(d, "exec"), 1);
  json_decref(doc);
  maelys_execution_release(e);
  collected_free(&out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  scene_remove(&s);
  harness_finish(&h);
}

/* The recording never opens anything: a payload that stacks its own
 * notification filter would be the one asked (between filters that both
 * say USER_NOTIF, the newest wins) and could answer "continue" to the very
 * calls the sandbox refuses. Such a filter is refused, and the call with it. */
static void test_payload_cannot_answer_itself(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  scene_t s;
  scene_make(&s);
  maelys_executor_plan_t* plan = plan_for(&s, MAELYS_EXECUTOR_NETWORK_NONE);
  maelys_execution_request_t* req =
      request_fixture("bubblewrap", ARGS("deny", "selfnotify", "socket"));
  maelys_execution_t* e = NULL;
  char* err = NULL;
  if (maelys_execution_spawn(h.executor, plan, req, &e, &err) != 0)
    fail_msg("spawn: %s", err);
  uv_stream_t* stream = NULL;
  assert_int_equal(
      maelys_execution_stream(e, MAELYS_EXEC_STREAM_STDOUT, &stream, NULL), 0);
  collected_t out;
  collect_start(stream, &out);
  waited_t w;
  memset(&w, 0, sizeof w);
  maelys_execution_wait(e, waited_cb, &w, NULL);
  harness_run_until(&h, &w.done);
  harness_run_until(&h, &out.eof);
  expect_refused_selfnotify(&out);
  expect_line(&out, "socket=blocked:1");
  assert_int_equal(w.status.outcome, MAELYS_EXEC_OUTCOME_EXITED);
  assert_int_equal(w.status.exit_code, 0);
  maelys_execution_release(e);
  collected_free(&out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  scene_remove(&s);
  harness_finish(&h);
}

/* The denial listener: the child of the launcher named maelys-notify. */
static int find_listener(int launcher) {
  DIR* d = opendir("/proc");
  int found = -1;
  struct dirent* ent;
  while (d != NULL && found < 0 && (ent = readdir(d)) != NULL) {
    if (ent->d_name[0] < '1' || ent->d_name[0] > '9')
      continue;
    char path[300], text[512];
    snprintf(path, sizeof path, "/proc/%s/stat", ent->d_name);
    FILE* f = fopen(path, "re");
    if (f == NULL)
      continue;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char* open_paren = strchr(text, '(');
    const char* close_paren = strrchr(text, ')');
    int ppid = 0;
    char st;
    if (open_paren != NULL && close_paren != NULL &&
        sscanf(close_paren + 1, " %c %d", &st, &ppid) == 2 &&
        ppid == launcher && strncmp(open_paren + 1, "maelys-notify)", 14) == 0)
      found = atoi(ent->d_name);
  }
  if (d != NULL)
    closedir(d);
  return found;
}

/* Whether `pid` has exited (a zombie, or reaped) within `timeout_ms`: its
 * descriptors, a seccomp listener among them, are closed by then. A pidfd
 * says so without polling; valgrind has no pidfd_open, so there /proc is
 * looked at every millisecond. */
static bool wait_exited(int pid, int timeout_ms) {
  int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (pidfd >= 0) {
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    int n = poll(&p, 1, timeout_ms);
    close(pidfd);
    return n == 1;
  }
  for (int waited = 0; waited < timeout_ms; waited++) {
    char path[64], text[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE* f = fopen(path, "re");
    if (f == NULL)
      return true;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char* close_paren = strrchr(text, ')');
    if (close_paren != NULL && close_paren[1] == ' ' && close_paren[2] == 'Z')
      return true;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  return false;
}

/* Fail closed: the listener killed while the sandbox runs, the calls it
 * answered are refused still (ENOSYS now), execve included, and the receipt
 * says the recording was lost. */
static void test_listener_killed_still_refuses(void** state) {
  (void)state;
  harness_t h;
  harness_init(&h, 60000);
  if (!bwrap_or_skip(&h))
    return;
  scene_t s;
  scene_make(&s);
  maelys_executor_plan_t* plan = plan_for(&s, MAELYS_EXECUTOR_NETWORK_NONE);
  maelys_execution_request_t* req = request_fixture(
      "bubblewrap",
      ARGS("deny", "socket", "ready", "wait", "socket", "socketpair", "unix",
           "selfnotify", "exec", "after", MAELYS_FIXTURE));
  maelys_execution_t* e = NULL;
  char* err = NULL;
  if (maelys_execution_spawn(h.executor, plan, req, &e, &err) != 0)
    fail_msg("spawn: %s", err);
  int in = -1;
  assert_int_equal(
      maelys_execution_take_fd(e, MAELYS_EXEC_STREAM_STDIN, &in, NULL), 0);
  uv_stream_t* stream = NULL;
  assert_int_equal(
      maelys_execution_stream(e, MAELYS_EXEC_STREAM_STDOUT, &stream, NULL), 0);
  collected_t out;
  collect_start(stream, &out);
  waited_t w;
  memset(&w, 0, sizeof w);
  maelys_execution_wait(e, waited_cb, &w, NULL);
  while (out.data == NULL || strstr(out.data, "ready\n") == NULL) {
    if (out.eof || w.done)
      fail_msg("the payload ended before it was ready: %s",
               out.data ? out.data : "");
    uv_run(&h.loop, UV_RUN_ONCE);
  }
  expect_line(&out, "socket=blocked:1");

  int listener = find_listener(maelys_execution_pid(e));
  if (listener <= 0)
    fail_msg("no denial listener (maelys-notify) under launcher %d",
             maelys_execution_pid(e));
  assert_int_equal(kill(listener, SIGKILL), 0);
  if (!wait_exited(listener, 10000))
    fail_msg("the denial listener %d outlived SIGKILL", listener);
  assert_int_equal(write(in, "go\n", 3), 3);
  close(in);
  harness_run_until(&h, &w.done);
  harness_run_until(&h, &out.eof);
  expect_line(&out, "socket=blocked:38");
  expect_line(&out, "socketpair=blocked:38");
  expect_line(&out, "unix=open");
  /* With the sandbox's listener gone, nothing in the chain holds one any
   * more, and the kernel would accept the payload's own: refused still. */
  expect_refused_selfnotify(&out);
  expect_line(&out, "exec-after=blocked:38");
  assert_int_equal(w.status.outcome, MAELYS_EXEC_OUTCOME_EXITED);
  assert_int_equal(w.status.exit_code, 0);
  json_t* doc = NULL;
  json_t* d = receipt_denials(e, &doc);
  assert_string_equal(json_string_value(json_object_get(d, "recording")),
                      "lost");
  assert_int_equal(count_of(d, "network"), 1);
  json_decref(doc);
  maelys_execution_release(e);
  collected_free(&out);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  scene_remove(&s);
  harness_finish(&h);
}

/* The kernel's side, without bwrap: the backend's own filter alone (no
 * notification filter on top, as before the sandbox's init stacked it)
 * refuses a socket of network none, and so does a notification filter whose
 * listener was closed. Run in a child executed afresh (natively even under
 * valgrind, which cannot load seccomp filters), which prints
 * "alone=ERRNO unix=ERRNO|ok closed=ERRNO". */
static int kernel_child(void) {
  unsigned char* bpf = NULL;
  size_t len = 0;
  if (maelys__seccomp_baseline_build(true, true, &bpf, &len, NULL) != 0)
    return 2;
  struct sock_fprog prog = {.len = (unsigned short)(len / 8),
                            .filter = (struct sock_filter*)bpf};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
    return 3;
  int s = socket(AF_INET, SOCK_STREAM, 0);
  int alone = s >= 0 ? 0 : errno;
  int u = socket(AF_UNIX, SOCK_STREAM, 0);
  int unix_err = u >= 0 ? 0 : errno;
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == NULL ||
      seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(socket), 1,
                       SCMP_A0_32(SCMP_CMP_NE, AF_UNIX)) != 0 ||
      seccomp_load(ctx) != 0)
    return 4;
  int fd = seccomp_notify_fd(ctx);
  if (fd < 0)
    return 5;
  close(fd);
  s = socket(AF_INET, SOCK_STREAM, 0);
  int closed = s >= 0 ? 0 : errno;
  printf("alone=%d unix=%s closed=%d\n", alone, unix_err ? "error" : "ok",
         closed);
  return 0;
}

static void test_without_listener_still_refused(void** state) {
  (void)state;
  int p[2];
  assert_int_equal(pipe2(p, O_CLOEXEC), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(p[1], 1);
    execl(self_path, self_path, "--kernel-child", (char*)NULL);
    _exit(127);
  }
  close(p[1]);
  char buf[256];
  size_t got = 0;
  ssize_t n;
  while (got < sizeof buf - 1 &&
         (n = read(p[0], buf + got, sizeof buf - 1 - got)) > 0)
    got += (size_t)n;
  buf[got] = '\0';
  close(p[0]);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail_msg("the kernel check failed (status %d): %s", status, buf);
  assert_string_equal(buf, "alone=38 unix=ok closed=38\n");
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "--kernel-child") == 0)
    return kernel_child();
  if (realpath("/proc/self/exe", self_path) == NULL)
    snprintf(self_path, sizeof self_path, "%s", argv[0]);
  if (getenv("MAELYS_TEST_UNDER_VALGRIND") != NULL)
    snprintf(self_path, sizeof self_path, "%s", argv[0]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_denials_recorded),
      cmocka_unit_test(test_inherit_records_only_exec),
      cmocka_unit_test(test_listener_killed_still_refuses),
      cmocka_unit_test(test_payload_cannot_answer_itself),
      cmocka_unit_test(test_without_listener_still_refused),
  };
  return cmocka_run_group_tests_name("denials", tests, NULL, NULL);
}
