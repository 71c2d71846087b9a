/*
 * The orchestrator example: a host that runs an agent-like payload under an
 * agent spec, serves its tool calls as sandboxed executions, and walks the
 * six steps of a boundary crossing when a call writes outside the approved
 * workspace: detect, raise (the event is printed), pause (checked: nothing
 * ran, other operations are refused), decide (scripted: approve the first,
 * deny the second), transform and run, return. At the end it closes the
 * session and verifies the signed receipt chain.
 *
 *   orchestrator-example --base DIR --agent agent.py --python /usr/bin/python3
 *                        [--helper PATH]
 *
 * Exit status 0 when every step behaved as described, 77 when bubblewrap
 * cannot run here (1 instead when MAELYS_BWRAP_MUST_WORK=1), 1 otherwise.
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "maelys/orchestrator.h"

typedef struct host {
  uv_loop_t* loop;
  maelys_executor_t* executor;
  maelys_orchestrator_session_t* session;
  uv_stream_t* agent; /* the agent's duplex socket */
  char line[65536];
  size_t line_len;
  char workspace[PATH_MAX], outside_a[PATH_MAX], outside_b[PATH_MAX];
  char receipts[PATH_MAX + 16];
  int boundary_requests;
  bool agent_done, agent_ended, failed;
  json_t* outcomes;
  char decisions[2][128];
  char approved_receipt[PATH_MAX];
} host_t;

static void fail(host_t* h, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void fail(host_t* h, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("example: FAILED: ", stdout);
  vprintf(fmt, ap);
  fputc('\n', stdout);
  va_end(ap);
  h->failed = true;
}

/* ---------------------------------------------------------- the agent */

typedef struct reply {
  uv_write_t req;
  char* text;
} reply_t;

static void on_written(uv_write_t* req, int status) {
  (void)status;
  reply_t* r = (reply_t*)req;
  free(r->text);
  free(r);
}

static void reply(host_t* h, const char* id, const char* outcome,
                  const char* detail) {
  json_t* doc = json_pack("{s:s, s:s, s:s, s:s}", "type", "tool_result", "id",
                          id, "outcome", outcome, "detail", detail);
  char* text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(doc);
  reply_t* r = malloc(sizeof *r);
  r->text = malloc(strlen(text) + 2);
  sprintf(r->text, "%s\n", text);
  free(text);
  uv_buf_t buf = uv_buf_init(r->text, (unsigned)strlen(r->text));
  uv_write(&r->req, h->agent, &buf, 1, on_written);
}

typedef struct call {
  host_t* host;
  char id[64];
  char path[PATH_MAX];
} call_t;

/* Step 6: the tool's result goes back to the agent like any execution's. */
static void on_tool_result(maelys_orchestrator_session_t* s,
                           const maelys_orchestrator_result_t* r, void* data) {
  (void)s;
  call_t* c = data;
  host_t* h = c->host;
  char detail[512];
  const char* outcome = "failed";
  if (r->kind == MAELYS_ORCHESTRATOR_RESULT_RAN) {
    bool ok = r->status->outcome == MAELYS_EXEC_OUTCOME_EXITED &&
              r->status->exit_code == 0;
    outcome = ok ? "ok" : "failed";
    snprintf(detail, sizeof detail, "exit %d, plan %.19s..., decision %s",
             r->status->exit_code, r->plan_digest,
             r->decision_id ? r->decision_id : "none");
    if (r->decision_id != NULL && r->receipt_path != NULL)
      snprintf(h->approved_receipt, sizeof h->approved_receipt, "%s",
               r->receipt_path);
  } else if (r->kind == MAELYS_ORCHESTRATOR_RESULT_DENIED) {
    outcome = "denied";
    snprintf(detail, sizeof detail, "%s (decision %s)", r->message,
             r->decision_id);
  } else {
    snprintf(detail, sizeof detail, "%s", r->message);
  }
  printf("tool %s (%s): %s: %s\n", c->id, r->operation_id, outcome, detail);
  json_object_set_new(h->outcomes, c->id, json_string(outcome));
  reply(h, c->id, outcome, detail);
  free(c);
}

/* A write_file tool call: /bin/sh in the sandbox, its target declared. */
static maelys_orchestrator_operation_t* tool_op(host_t* h, const char* path,
                                                const char* content) {
  maelys_execution_request_t* req = NULL;
  maelys_execution_request_create(&req, NULL);
  const char* argv[] = {"sh", "-c", "printf '%s' \"$CONTENT\" > \"$TARGET\"",
                        NULL};
  maelys_execution_request_set_executable(req, "/bin/sh", NULL);
  maelys_execution_request_set_argv(req, argv, NULL);
  maelys_execution_request_set_environment_mode(req, MAELYS_EXEC_ENV_EXPLICIT,
                                                NULL);
  maelys_execution_request_add_environment(req, "PATH", "/usr/bin:/bin", NULL);
  maelys_execution_request_add_environment(req, "TARGET", path, NULL);
  maelys_execution_request_add_environment(req, "CONTENT", content, NULL);
  maelys_execution_request_set_cwd(req, h->workspace, NULL);
  maelys_execution_request_set_stderr_mode(req, MAELYS_EXEC_STDERR_INHERIT,
                                           NULL);
  maelys_orchestrator_operation_t* op = NULL;
  maelys_orchestrator_operation_create("write_file", req, &op, NULL);
  maelys_orchestrator_operation_declare_write(op, path, NULL);
  maelys_orchestrator_operation_set_wall_time(op, 20000, NULL);
  return op;
}

typedef struct decision_timer {
  uv_timer_t timer;
  host_t* host;
  char request_id[160];
  char path[PATH_MAX];
  int approve;
} decision_timer_t;

static void on_timer_closed(uv_handle_t* t) {
  free(t->data);
}

/* Step 4, later, from a loop callback: the scripted decision. */
static void on_decide(uv_timer_t* t) {
  decision_timer_t* d = t->data;
  host_t* h = d->host;
  /* Step 3 held: nothing of the operation ran while it waited. */
  if (access(d->path, F_OK) == 0)
    fail(h, "%s exists before the decision", d->path);
  char* id = NULL;
  char* err = NULL;
  if (maelys_orchestrator_session_decide(h->session, d->request_id, d->approve,
                                         "example-script", &id, &err) != 0)
    fail(h, "decide: %s", err);
  else
    printf("decided %s: %s by example-script\n", id,
           d->approve ? "approved" : "denied");
  if (id != NULL)
    snprintf(h->decisions[d->approve ? 0 : 1], sizeof h->decisions[0], "%s",
             id);
  maelys_executor_string_free(id);
  maelys_executor_error_free(err);
  uv_close((uv_handle_t*)t, on_timer_closed);
}

static void on_event(maelys_orchestrator_session_t* s, const char* json,
                     void* data) {
  (void)s;
  (void)data;
  printf("event %s\n", json);
}

static void tool_call(host_t* h, json_t* msg) {
  const char* id = json_string_value(json_object_get(msg, "id"));
  const char* path = json_string_value(json_object_get(msg, "path"));
  const char* content = json_string_value(json_object_get(msg, "content"));
  if (id == NULL || path == NULL || content == NULL) {
    fail(h, "malformed tool call");
    return;
  }
  printf("agent asks %s: write_file %s\n", id, path);
  maelys_orchestrator_operation_t* op = tool_op(h, path, content);
  call_t* c = calloc(1, sizeof *c);
  c->host = h;
  snprintf(c->id, sizeof c->id, "%s", id);
  snprintf(c->path, sizeof c->path, "%s", path);
  /* Step 1: detect. */
  maelys_orchestrator_check_t* check = NULL;
  char* err = NULL;
  maelys_orchestrator_session_check(h->session, op, &check, &err);
  maelys_orchestrator_verdict_t v = maelys_orchestrator_check_verdict(check);
  if (v == MAELYS_ORCHESTRATOR_ALLOWED) {
    if (maelys_orchestrator_session_run(h->session, op, on_tool_result, c,
                                        &err) != 0) {
      fail(h, "run %s: %s", id, err);
      free(c);
    }
  } else if (v == MAELYS_ORCHESTRATOR_BOUNDARY_REQUIRED) {
    const maelys_orchestrator_expansion_t* e =
        maelys_orchestrator_check_expansion(check);
    printf("boundary required for %s: %s\n", id,
           maelys_orchestrator_check_reason(check));
    printf("expansion %s\n", maelys_orchestrator_expansion_json(e));
    /* Steps 2 and 3: raise; the session pauses. */
    char* rid = NULL;
    if (maelys_orchestrator_session_request_boundary(
            h->session, op, e, on_tool_result, c, &rid, &err) != 0) {
      fail(h, "request_boundary %s: %s", id, err);
      free(c);
    } else {
      /* Paused: another operation is refused, and the target is absent. */
      maelys_orchestrator_operation_t* other = tool_op(h, h->workspace, "x");
      char* e2 = NULL;
      if (maelys_orchestrator_session_run(h->session, other, NULL, NULL, &e2) !=
          MAELYS_EXECUTOR_ERR_STATE)
        fail(h, "a paused session accepted another operation");
      else
        printf("paused: another operation is refused (%s)\n", e2);
      maelys_executor_error_free(e2);
      decision_timer_t* d = calloc(1, sizeof *d);
      d->host = h;
      d->approve = h->boundary_requests++ == 0;
      snprintf(d->request_id, sizeof d->request_id, "%s", rid);
      snprintf(d->path, sizeof d->path, "%s", path);
      uv_timer_init(h->loop, &d->timer);
      d->timer.data = d;
      uv_timer_start(&d->timer, on_decide, 50, 0);
    }
    maelys_executor_string_free(rid);
  } else {
    printf("refused %s: %s\n", id, maelys_orchestrator_check_reason(check));
    maelys_orchestrator_operation_destroy(op);
    reply(h, id, "refused", maelys_orchestrator_check_reason(check));
    free(c);
  }
  maelys_executor_error_free(err);
  maelys_orchestrator_check_destroy(check);
}

static void on_alloc(uv_handle_t* handle, size_t size, uv_buf_t* buf) {
  (void)handle;
  buf->base = malloc(size);
  buf->len = buf->base ? size : 0;
}

static void on_agent_read(uv_stream_t* stream, ssize_t n, const uv_buf_t* buf) {
  host_t* h = stream->data;
  for (ssize_t i = 0; i < n; i++) {
    char ch = buf->base[i];
    if (ch != '\n') {
      if (h->line_len + 1 < sizeof h->line)
        h->line[h->line_len++] = ch;
      continue;
    }
    h->line[h->line_len] = '\0';
    h->line_len = 0;
    json_t* msg = json_loads(h->line, 0, NULL);
    const char* type = json_string_value(json_object_get(msg, "type"));
    if (type != NULL && strcmp(type, "tool_call") == 0) {
      tool_call(h, msg);
    } else if (type != NULL && strcmp(type, "done") == 0) {
      char* o = json_dumps(json_object_get(msg, "outcomes"), JSON_SORT_KEYS);
      printf("agent done: %s\n", o);
      free(o);
      h->agent_done = true;
    } else {
      fail(h, "unexpected line from the agent: %s", h->line);
    }
    json_decref(msg);
  }
  if (n < 0)
    uv_read_stop(stream);
  free(buf->base);
}

static void on_agent_start(maelys_orchestrator_operation_t* op,
                           maelys_execution_t* e, void* data) {
  host_t* h = data;
  printf("agent started: %s, execution %s\n",
         maelys_orchestrator_operation_id(op), maelys_execution_id(e));
  maelys_execution_stream(e, MAELYS_EXEC_STREAM_PROTOCOL, &h->agent, NULL);
  h->agent->data = h;
  uv_read_start(h->agent, on_alloc, on_agent_read);
}

static void on_agent_result(maelys_orchestrator_session_t* s,
                            const maelys_orchestrator_result_t* r, void* data) {
  (void)s;
  host_t* h = data;
  h->agent_ended = true;
  h->agent = NULL;
  if (r->kind != MAELYS_ORCHESTRATOR_RESULT_RAN ||
      r->status->outcome != MAELYS_EXEC_OUTCOME_EXITED ||
      r->status->exit_code != 0)
    fail(h, "the agent did not exit 0 (%s)",
         r->status && r->status->message ? r->status->message : r->message);
  else
    printf("agent exited 0; receipt %s\n", r->receipt_path);
}

/* ------------------------------------------------------------- set-up */

static int make_dir(const char* base, const char* name, char* out) {
  if (strlen(base) + strlen(name) + 2 > PATH_MAX)
    return -1;
  snprintf(out, PATH_MAX, "%.3000s/%.64s", base, name);
  return mkdir(out, 0755) == 0 ? 0 : -1;
}

static const char* arg(int argc, char** argv, const char* name) {
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], name) == 0)
      return argv[i + 1];
  return NULL;
}

int main(int argc, char** argv) {
  const char* base = arg(argc, argv, "--base");
  const char* agent = arg(argc, argv, "--agent");
  const char* python = arg(argc, argv, "--python");
  const char* helper = arg(argc, argv, "--helper");
  if (base == NULL || agent == NULL || python == NULL) {
    fprintf(stderr, "usage: orchestrator-example --base DIR --agent FILE "
                    "--python PATH [--helper PATH]\n");
    return 2;
  }
  bool must_work = getenv("MAELYS_BWRAP_MUST_WORK") &&
                   strcmp(getenv("MAELYS_BWRAP_MUST_WORK"), "1") == 0;
  static host_t h;
  h.loop = uv_default_loop();
  h.outcomes = json_object();
  mkdir(base, 0755);
  char run[PATH_MAX];
  snprintf(run, sizeof run, "%s/run-XXXXXX", base);
  if (mkdtemp(run) == NULL || chmod(run, 0755) != 0 ||
      make_dir(run, "workspace", h.workspace) ||
      make_dir(run, "outside-a", h.outside_a) ||
      make_dir(run, "outside-b", h.outside_b)) {
    perror("example: creating the directories");
    return 1;
  }
  snprintf(h.receipts, sizeof h.receipts, "%.4000s/receipts", run);
  char agent_dir[PATH_MAX];
  snprintf(agent_dir, sizeof agent_dir, "%s", agent);
  dirname(agent_dir);

  /* The executor, bubblewrap, and a signing key for this run. */
  char* err = NULL;
  maelys_executor_create(h.loop, &h.executor, NULL);
  maelys_backend_options_t* opts = NULL;
  maelys_backend_options_create(&opts, NULL);
  if (helper != NULL)
    maelys_backend_options_set(opts, "helper", helper, NULL);
  maelys_executor_register_backend(h.executor, maelys_backend_bubblewrap(),
                                   opts, NULL);
  maelys_backend_options_destroy(opts);
  unsigned char seed[MAELYS_EXECUTOR_RECEIPT_SEED_BYTES];
  if (getrandom(seed, sizeof seed, 0) != (ssize_t)sizeof seed)
    return 1;
  maelys_executor_set_receipt_key(h.executor, seed, sizeof seed, NULL);
  char* key = NULL;
  maelys_executor_receipt_public_key(seed, sizeof seed, &key, NULL);
  printf("receipt signing key %s\n", key);

  /* The agent spec: what a policy decision point approved. */
  maelys_orchestrator_spec_t* spec = NULL;
  maelys_orchestrator_spec_create(&spec, NULL);
  const char* agent_argv[] = {"python3", agent, NULL};
  maelys_orchestrator_spec_set_executable(spec, python, NULL);
  maelys_orchestrator_spec_set_argv(spec, agent_argv, NULL);
  maelys_orchestrator_spec_set_workspace(spec, h.workspace, 1, NULL);
  maelys_orchestrator_spec_add_readable(spec, agent_dir, NULL);
  maelys_orchestrator_spec_set_environment(spec, "WORKSPACE", h.workspace,
                                           NULL);
  maelys_orchestrator_spec_set_environment(spec, "OUTSIDE_A", h.outside_a,
                                           NULL);
  maelys_orchestrator_spec_set_environment(spec, "OUTSIDE_B", h.outside_b,
                                           NULL);
  maelys_orchestrator_spec_set_environment(spec, "PATH", "/usr/bin:/bin", NULL);
  maelys_orchestrator_spec_set_network(spec, MAELYS_EXECUTOR_NETWORK_NONE,
                                       NULL);
  maelys_orchestrator_spec_set_endpoint(
      spec, MAELYS_ORCHESTRATOR_ENDPOINT_DUPLEX_STDIO, NULL);
  maelys_orchestrator_spec_set_limit(
      spec, MAELYS_ORCHESTRATOR_LIMIT_WALL_TIME_MS, 60000, NULL);
  maelys_execution_request_t* req = NULL;
  maelys_executor_plan_t* plan = NULL;
  if (maelys_orchestrator_prepare(spec, NULL, &req, &plan, &err) != 0) {
    fprintf(stderr, "example: prepare: %s\n", err);
    return 1;
  }
  uint64_t need = 0, proved = 0;
  maelys_executor_plan_required_capabilities(plan, &need, NULL);
  maelys_executor_backend_capabilities(h.executor, "bubblewrap", &proved, NULL);
  if (need & ~proved) {
    char* why = NULL;
    maelys_executor_backend_diagnostic(h.executor, "bubblewrap", &why, NULL);
    printf("example: SKIPPED: bubblewrap did not prove what the plan needs: "
           "%s\n",
           why ? why : "");
    return must_work ? 1 : 77;
  }
  char* digest = NULL;
  maelys_executor_plan_digest(plan, &digest, NULL);
  printf("plan %s (network none, workspace writable)\n", digest);
  maelys_executor_string_free(digest);
  if (maelys_orchestrator_session_create(h.loop, h.executor, plan, "bubblewrap",
                                         h.receipts, &h.session, &err) != 0) {
    fprintf(stderr, "example: session: %s\n", err);
    return 1;
  }
  maelys_orchestrator_session_set_event_cb(h.session, on_event, &h);
  printf("session %s\n", maelys_orchestrator_session_id(h.session));

  /* The agent itself is the session's first operation. */
  maelys_orchestrator_operation_t* op = NULL;
  maelys_orchestrator_operation_create("agent", req, &op, NULL);
  maelys_orchestrator_operation_set_start_cb(op, on_agent_start, &h, NULL);
  maelys_orchestrator_operation_set_wall_time(
      op, maelys_orchestrator_spec_wall_time_ms(spec), NULL);
  if (maelys_orchestrator_session_run(h.session, op, on_agent_result, &h,
                                      &err) != 0) {
    fprintf(stderr, "example: running the agent: %s\n", err);
    return 1;
  }
  while (!h.agent_ended)
    uv_run(h.loop, UV_RUN_ONCE);

  /* What happened on the host. */
  char path[PATH_MAX * 2];
  snprintf(path, sizeof path, "%s/notes.txt", h.workspace);
  if (access(path, F_OK) != 0)
    fail(&h, "the workspace write did not happen");
  snprintf(path, sizeof path, "%s/report.txt", h.outside_a);
  if (access(path, F_OK) != 0)
    fail(&h, "the approved write did not happen");
  snprintf(path, sizeof path, "%s/secret.txt", h.outside_b);
  if (access(path, F_OK) == 0)
    fail(&h, "the denied write happened");
  const char* want[][2] = {{"c1", "ok"}, {"c2", "ok"}, {"c3", "denied"}};
  for (int i = 0; i < 3; i++) {
    const char* got =
        json_string_value(json_object_get(h.outcomes, want[i][0]));
    if (got == NULL || strcmp(got, want[i][1]) != 0)
      fail(&h, "tool %s: %s, expected %s", want[i][0], got ? got : "none",
           want[i][1]);
  }
  if (!h.agent_done)
    fail(&h, "the agent never said it was done");

  /* The approved call's receipt names its decision and the plan before. */
  FILE* f = fopen(h.approved_receipt, "r");
  json_t* receipt = f ? json_loadf(f, 0, NULL) : NULL;
  if (f)
    fclose(f);
  json_t* ctx = json_object_get(receipt, "context");
  const char* did = json_string_value(
      json_object_get(json_object_get(ctx, "decision"), "id"));
  if (did == NULL || strcmp(did, h.decisions[0]) != 0 ||
      json_string_value(json_object_get(ctx, "previous_plan_digest")) == NULL)
    fail(&h, "the approved call's receipt lacks its decision or previous plan");
  else
    printf("approved receipt: decision %s, previous plan %.23s...\n", did,
           json_string_value(json_object_get(ctx, "previous_plan_digest")));
  json_decref(receipt);

  char* record = NULL;
  maelys_orchestrator_boundary_to_json(
      maelys_orchestrator_session_boundary(h.session), &record, NULL);
  printf("boundary record %s\n", record);
  maelys_executor_string_free(record);

  char* closing = NULL;
  if (maelys_orchestrator_session_close(h.session, &closing, &err) != 0)
    fail(&h, "close: %s", err);
  const char* paths[] = {h.receipts};
  char* report = NULL;
  maelys_executor_error_free(err);
  err = NULL;
  if (maelys_executor_verify_receipts(paths, 1, key, &report, &err) != 0)
    fail(&h, "the receipt chain does not verify: %s", err);
  else
    printf("receipt chain verified (%s): %s\n", closing, report);
  maelys_executor_string_free(report);
  maelys_executor_string_free(closing);
  maelys_executor_error_free(err);

  maelys_orchestrator_session_destroy(h.session);
  maelys_orchestrator_spec_destroy(spec);
  maelys_executor_destroy(h.executor, NULL);
  uv_run(h.loop, UV_RUN_DEFAULT);
  int closed = uv_loop_close(h.loop);
  maelys_executor_string_free(key);
  json_decref(h.outcomes);
  if (closed != 0)
    fail(&h, "the loop did not close cleanly");
  printf(h.failed ? "example: FAILED\n" : "example: all six steps held\n");
  return h.failed ? 1 : 0;
}
