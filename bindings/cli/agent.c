/*
 * `maelys-warden agent SPEC.json`: runs an agent from its approved
 * specification (maelys-agent-spec/1) as a session of the orchestrator
 * adapter, relaying this process's stdin and stdout to the agent's duplex
 * stdio, and signs and chains its receipts. A stream command like `run`:
 * once the agent started, stdout carries only its bytes and the exit status
 * is its own.
 */
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "maelys/backend.h"
#include "maelys/orchestrator.h"
#include "protect.h"
#include "warden.h"

extern char** environ;

typedef struct agent_state {
  uv_loop_t* loop;
  maelys_orchestrator_session_t* session;
  relay_t* relay;
  uv_signal_t signals[3];
  bool ended;
  int code;
  bool launch_failed;
  char message[2048];
  char receipt[PATH_MAX];
  char execution_id[64];
  bool wall;
} agent_state_t;

static void on_signal(uv_signal_t* h, int signum) {
  agent_state_t* st = h->data;
  (void)signum;
  maelys_orchestrator_session_stop(st->session);
}

static void on_start(maelys_orchestrator_operation_t* op, maelys_execution_t* e,
                     void* data) {
  agent_state_t* st = data;
  (void)op;
  snprintf(st->execution_id, sizeof st->execution_id, "%s",
           maelys_execution_id(e));
  uv_stream_t* socket = NULL;
  maelys_execution_stream(e, MAELYS_EXEC_STREAM_PROTOCOL, &socket, NULL);
  st->relay = relay_start(st->loop, socket, false);
}

static void on_result(maelys_orchestrator_session_t* s,
                      const maelys_orchestrator_result_t* r, void* data) {
  agent_state_t* st = data;
  (void)s;
  st->ended = true;
  st->wall = r->wall_time_expired;
  if (r->receipt_path != NULL)
    snprintf(st->receipt, sizeof st->receipt, "%s", r->receipt_path);
  if (r->kind != MAELYS_ORCHESTRATOR_RESULT_RAN) {
    st->launch_failed = true;
    snprintf(st->message, sizeof st->message, "%s", r->message);
    st->code = 1;
  } else if (r->status->outcome == MAELYS_EXEC_OUTCOME_EXITED) {
    st->code = r->status->exit_code;
  } else if (r->status->outcome == MAELYS_EXEC_OUTCOME_SIGNALED) {
    st->code = 128 + r->status->term_signal;
  } else {
    st->launch_failed = true;
    st->code = 1;
    snprintf(st->message, sizeof st->message, "%s: %s", r->status->launch_step,
             r->status->message);
  }
}

static void helper_option(maelys_backend_options_t* opts) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0)
    return;
  exe[n] = '\0';
  char helper[PATH_MAX + 32];
  snprintf(helper, sizeof helper, "%s/maelys-executor-helper", dirname(exe));
  if (access(helper, X_OK) == 0)
    maelys_backend_options_set(opts, "helper", helper, NULL);
}

static const char* code_of(maelys_executor_result_t r) {
  switch (r) {
  case MAELYS_EXECUTOR_ERR_NOT_FOUND:
    return "NOT_FOUND";
  case MAELYS_EXECUTOR_ERR_DENIED:
    return "ACCESS_DENIED";
  case MAELYS_EXECUTOR_ERR_UNSUPPORTED:
  case MAELYS_EXECUTOR_ERR_CAPABILITY:
    return "POLICY_FAILED";
  case MAELYS_EXECUTOR_ERR_IO:
    return "IO_FAILED";
  case MAELYS_EXECUTOR_ERR_SPAWN:
    return "PROCESS_FAILED";
  default:
    return "VALIDATION_FAILED";
  }
}

static void report_finding(const char* line, void* data) {
  (void)data;
  fprintf(stderr, WARDEN_PROGRAM ": warning: %s\n", line);
}

static int refuse(cli_error_t* err, maelys_executor_result_t r, char* error) {
  cli_fail(err, code_of(r), warden_hint_for(error), "%s",
           error ? error : maelys_executor_result_name(r));
  maelys_executor_error_free(error);
  return -1;
}

/*
 * The checks run makes, on the spec's plan: nothing of maelys-warden's own
 * writable (invariant 18), spawn's checks before any placeholder is made
 * (a workspace of /, /tmp or a home is refused before anything is created
 * there), and what a workspace keeps from its payload (protect.h): with the
 * workspace writable, git's hooks and configuration, .git and .maelys; with
 * the network inherited, its secrets. The spec's plan is sealed, so the
 * protected plan is a copy with the protections' rules added and sealed
 * again; *plan becomes that copy. The placeholders are reserved last.
 */
static int protect_agent(const invocation_t* inv, maelys_executor_t* ex,
                         maelys_executor_plan_t** plan,
                         maelys_execution_request_t* req, const char* spec,
                         const char* receipts, warden_protection_t* p,
                         cli_error_t* err) {
  char state[PATH_MAX];
  if (warden_state_dir(inv, state, sizeof state, err) != 0)
    return -1;
  warden_protected_t own = {.count = 0};
  warden_protect_defaults(&own, state, NULL);
  warden_protect(&own, "the receipt directory", receipts);
  warden_protect(&own, "the agent spec", spec);
  if (warden_check_protected(*plan, &own, err) != 0)
    return -1;
  char* error = NULL;
  maelys_executor_result_t r =
      maelys_execution_request_set_receipt_dir(req, receipts, &error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_execution_check(ex, *plan, req, &error);
  if (r != MAELYS_EXECUTOR_OK)
    return refuse(err, r, error);

  const char* workspace = maelys_execution_request_cwd(req);
  bool writable = false;
  for (size_t i = 0; i < maelys_executor_plan_rule_count(*plan); i++) {
    maelys_executor_rule_view_t rule;
    if (maelys_executor_plan_rule_get(*plan, i, &rule) == 0 &&
        workspace != NULL && strcmp(rule.path, workspace) == 0)
      writable = rule.access == MAELYS_EXECUTOR_ACCESS_WRITE;
  }
  bool inherit =
      maelys_executor_plan_network(*plan) == MAELYS_EXECUTOR_NETWORK_INHERIT;
  const given_option_t* g = cli_option(inv, "--unprotect");
  if (workspace == NULL ||
      warden_protect_scan(p, workspace, writable, inherit,
                          g ? (const char* const*)g->values : NULL,
                          g ? g->count : 0, err) != 0)
    return workspace == NULL ? cli_fail(err, "VALIDATION_FAILED", NULL,
                                        "the spec's request has no workspace")
                             : -1;
  if (p->count == 0)
    return 0;
  maelys_executor_plan_t* protected = NULL;
  if (warden_protect_sealed_plan(p, *plan, &protected, err) != 0)
    return -1;
  maelys_executor_plan_destroy(*plan);
  *plan = protected;
  /* Spawn's checks again, on the protected plan without its reserved
   * names (which exist only once reserved). */
  maelys_executor_plan_t* unreserved = NULL;
  if (warden_protect_unreserved_plan(p, *plan, NULL, &unreserved, err) != 0)
    return -1;
  r = maelys_execution_check(ex, unreserved ? unreserved : *plan, req, &error);
  maelys_executor_plan_destroy(unreserved);
  if (r != MAELYS_EXECUTOR_OK)
    return refuse(err, r, error);
  return warden_protect_reserve(p, err);
}

int warden_agent(const invocation_t* inv) {
  cli_error_t err = {0};
  err.command = "agent";
  bool trace = cli_flag(inv, "--trace");
  uv_loop_t* loop = uv_default_loop();
  maelys_orchestrator_spec_t* spec = NULL;
  maelys_execution_request_t* req = NULL;
  maelys_executor_plan_t* plan = NULL;
  maelys_executor_t* ex = NULL;
  static agent_state_t st;
  warden_protection_t protection = {0};
  char* error = NULL;
  char file[PATH_MAX], receipts[PATH_MAX];
  maelys_executor_result_t r = MAELYS_EXECUTOR_OK;

  if (warden_absolute(inv->operands[0], file, sizeof file) != 0) {
    cli_fail(&err, "VALIDATION_FAILED", NULL, "SPEC path too long");
    goto fail;
  }
  r = maelys_orchestrator_spec_load_file(file, &spec, &error);
  if (r != MAELYS_EXECUTOR_OK) {
    cli_fail(&err, code_of(r),
             "Write the spec in the maelys-agent-spec/1 format, in a file "
             "only you (or root) can write.",
             "%s", error ? error : "");
    goto fail;
  }
  /* Authority is never taken from where an earlier sandbox wrote (the
   * library refused any symbolic link on the way). */
  if (warden_written_check("SPEC", file,
                           "what defines a run's authority (a plan, policy, "
                           "profile or spec) is never read from there",
                           &err) != 0)
    goto fail;
  if (maelys_orchestrator_spec_endpoint(spec) !=
      MAELYS_ORCHESTRATOR_ENDPOINT_DUPLEX_STDIO) {
    cli_fail(&err, "VALIDATION_FAILED",
             "Set \"endpoint\": \"duplex-stdio\" for maelys-warden agent.",
             "maelys-warden relays one duplex stream: the spec's endpoint "
             "must be duplex-stdio");
    goto fail;
  }
  if (warden_receipt_dir(inv, receipts, sizeof receipts, &err) != 0 ||
      warden_written_check("--receipt-dir", receipts,
                           "receipts are never written there", &err) != 0)
    goto fail;
  if (maelys_orchestrator_spec_writes(spec, receipts)) {
    cli_fail(&err, "ACCESS_DENIED",
             "Choose a --receipt-dir the agent cannot write.",
             "the receipt directory '%s' lies inside a path the spec makes "
             "writable",
             receipts);
    goto fail;
  }
  r = maelys_orchestrator_prepare(spec, (const char* const*)environ, &req,
                                  &plan, &error);
  if (r != MAELYS_EXECUTOR_OK) {
    cli_fail(&err, code_of(r), NULL, "%s: %s", file, error ? error : "");
    goto fail;
  }
  maelys_executor_create(loop, &ex, NULL);
  const char* backend = maelys_orchestrator_spec_backend(spec);
  maelys_backend_options_t* opts = NULL;
  maelys_backend_options_create(&opts, NULL);
  helper_option(opts);
  r = maelys_executor_register_backend(ex,
                                       strcmp(backend, "posix") == 0
                                           ? maelys_backend_posix()
                                           : maelys_backend_bubblewrap(),
                                       opts, &error);
  maelys_backend_options_destroy(opts);
  if (r != MAELYS_EXECUTOR_OK ||
      (strcmp(backend, "posix") != 0 && strcmp(backend, "bubblewrap") != 0)) {
    cli_fail(&err, "NOT_FOUND", "Use backend bubblewrap.", "backend '%s': %s",
             backend, error ? error : "unknown");
    goto fail;
  }
  uint64_t need = 0, proved = 0;
  maelys_executor_plan_required_capabilities(plan, &need, NULL);
  maelys_executor_backend_capabilities(ex, backend, &proved, NULL);
  if (need & ~proved) {
    char* why = NULL;
    maelys_executor_backend_diagnostic(ex, backend, &why, NULL);
    cli_fail(&err, "POLICY_FAILED",
             "'maelys-warden probe' shows what each backend proved.",
             "the spec's plan cannot be enforced by %s: %s", backend,
             why ? why : "capabilities missing");
    maelys_executor_string_free(why);
    goto fail;
  }
  if (protect_agent(inv, ex, &plan, req, file, receipts, &protection, &err) !=
      0)
    goto fail;
  if (trace)
    for (size_t i = 0; i < protection.count; i++)
      fprintf(stderr, "%s: protected %s (%s)\n", WARDEN_PROGRAM,
              protection.items[i].path,
              warden_protect_kind_name(protection.items[i].kind));
  if (warden_signing_start(inv, ex, plan, &err) != 0)
    goto fail;
  maelys_executor_plan_t* owned = plan;
  plan = NULL;
  r = maelys_orchestrator_session_create(loop, ex, owned, backend, receipts,
                                         &st.session, &error);
  if (r != MAELYS_EXECUTOR_OK) {
    cli_fail(&err, code_of(r), NULL, "%s", error ? error : "");
    goto fail;
  }
  st.loop = loop;
  maelys_orchestrator_operation_t* op = NULL;
  maelys_orchestrator_operation_create("agent", req, &op, NULL);
  req = NULL;
  maelys_orchestrator_operation_set_start_cb(op, on_start, &st, NULL);
  /* The receipt says what the agent's workspace kept from it. */
  json_t* host =
      json_pack("{s:o}", "protection", warden_protect_json(&protection));
  char* host_text = host ? json_dumps(host, JSON_COMPACT) : NULL;
  json_decref(host);
  r = host_text ? maelys_orchestrator_operation_set_host_context(op, host_text,
                                                                 &error)
                : MAELYS_EXECUTOR_ERR_MEMORY;
  free(host_text);
  if (r != MAELYS_EXECUTOR_OK) {
    maelys_orchestrator_operation_destroy(op);
    cli_fail(&err, code_of(r), NULL, "the receipt's context: %s",
             error ? error : maelys_executor_result_name(r));
    goto fail;
  }
  maelys_orchestrator_operation_set_wall_time(
      op, maelys_orchestrator_spec_wall_time_ms(spec), NULL);
  if (trace)
    fprintf(stderr, "%s: session %s, plan %s\n", WARDEN_PROGRAM,
            maelys_orchestrator_session_id(st.session),
            maelys_orchestrator_boundary_digest(
                maelys_orchestrator_session_boundary(st.session)));
  /* Remembered before anything runs, as run does: an authority file or
   * receipt directory below what the agent may write is refused by every
   * later run. */
  if (warden_written_record(
          maelys_orchestrator_boundary_plan(
              maelys_orchestrator_session_boundary(st.session)),
          &err) != 0) {
    maelys_orchestrator_operation_destroy(op);
    goto fail;
  }
  r = maelys_orchestrator_session_run(st.session, op, on_result, &st, &error);
  if (r != MAELYS_EXECUTOR_OK) {
    cli_fail(&err, code_of(r), NULL, "%s", error ? error : "");
    goto fail;
  }
  static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
  for (int i = 0; i < 3; i++) {
    uv_signal_init(loop, &st.signals[i]);
    st.signals[i].data = &st;
    uv_signal_start(&st.signals[i], on_signal, sigs[i]);
    uv_unref((uv_handle_t*)&st.signals[i]);
  }
  while (!st.ended || (st.relay != NULL && !relay_output_done(st.relay)))
    if (uv_run(loop, UV_RUN_ONCE) == 0 && st.ended)
      break;
  /* Nothing of the agent runs any more: what it may have left where the
   * host's tools look is checked now. */
  warden_protect_audit(&protection, st.execution_id[0] ? st.execution_id : NULL,
                       report_finding, NULL);
  if (st.wall)
    fprintf(stderr,
            "%s: the agent was stopped at its wall time (limits.wall_time_ms)"
            "\n",
            WARDEN_PROGRAM);
  if (st.launch_failed) {
    cli_fail(&err, "PROCESS_FAILED", NULL, "the agent did not start: %s",
             st.message);
    cli_emit_failure(inv, &err);
  }
  char* closing = NULL;
  if (maelys_orchestrator_session_close(st.session, &closing, &error) != 0)
    fprintf(stderr, "%s: warning: %s\n", WARDEN_PROGRAM, error ? error : "");
  else if (trace)
    fprintf(stderr, "%s: receipt %s, chain closed by %s\n", WARDEN_PROGRAM,
            st.receipt, closing);
  maelys_executor_string_free(closing);
  maelys_executor_error_free(error);
  fflush(stdout);
  if (st.relay != NULL)
    relay_close(st.relay);
  for (int i = 0; i < 3; i++)
    uv_close((uv_handle_t*)&st.signals[i], NULL);
  maelys_orchestrator_session_destroy(st.session);
  maelys_executor_destroy(ex, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
  if (st.relay != NULL)
    relay_free(st.relay);
  uv_loop_close(loop);
  maelys_orchestrator_spec_destroy(spec);
  warden_protection_free(&protection);
  return st.code;

fail:
  maelys_executor_error_free(error);
  cli_emit_failure(inv, &err);
  if (st.session != NULL)
    maelys_orchestrator_session_destroy(st.session);
  if (ex != NULL) {
    maelys_executor_destroy(ex, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
  }
  uv_loop_close(loop);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  maelys_orchestrator_spec_destroy(spec);
  warden_protection_free(&protection);
  return 1;
}
