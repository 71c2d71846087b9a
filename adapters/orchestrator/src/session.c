/*
 * Sessions: the boundary-crossing workflow made mechanical. A session owns
 * the ExecutionBoundary; operations run under its active plan; a boundary
 * request pauses the session until the host decides; an approval seals a
 * new plan and runs the operation under it; every receipt joins the
 * session's chain with the decision that authorised it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "orch-internal.h"

typedef struct running {
  maelys_orchestrator_session_t* session;
  maelys_orchestrator_operation_t* op;
  maelys_execution_t* execution;
  maelys_orchestrator_result_cb cb;
  void* data;
  uv_timer_t wall;
  bool wall_expired;
  char* decision_id;
  char* plan_digest;
  struct running* next;
} running_t;

typedef struct pending {
  maelys_orchestrator_operation_t* op;
  char* request_id;
  char* expansion_json;
  char expansion_digest[72];
  char* base_digest;
  maelys_orchestrator_expansion_t* expansion; /* a private copy */
  maelys_orchestrator_check_t* check;         /* owns the expansion */
  maelys_orchestrator_result_cb cb;
  void* data;
} pending_t;

struct maelys_orchestrator_session {
  uv_loop_t* loop;
  maelys_executor_t* executor;
  char id[33];
  char* receipt_dir;
  maelys_orchestrator_boundary_t* boundary;
  maelys_orchestrator_event_cb event_cb;
  void* event_data;
  unsigned op_counter, request_counter;
  pending_t* pending;
  running_t* running;
  bool closed;
};

/* ------------------------------------------------------------ operations */

maelys_executor_result_t maelys_orchestrator_operation_create(
    const char* name, maelys_execution_request_t* request,
    maelys_orchestrator_operation_t** out, char** out_error) {
  if (out != NULL)
    *out = NULL;
  if ((out_error != NULL && *out_error != NULL) || out == NULL ||
      request == NULL || name == NULL || name[0] == '\0') {
    maelys_execution_request_destroy(request);
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "an operation needs a name, a request and out");
  }
  maelys_orchestrator_operation_t* op = calloc(1, sizeof *op);
  if (op == NULL || (op->name = maelys__orch_strdup(name)) == NULL) {
    free(op);
    maelys_execution_request_destroy(request);
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                             "out of memory");
  }
  op->request = request;
  *out = op;
  return MAELYS_EXECUTOR_OK;
}

void maelys_orchestrator_operation_destroy(
    maelys_orchestrator_operation_t* op) {
  if (op == NULL)
    return;
  maelys_execution_request_destroy(op->request);
  for (size_t i = 0; i < op->declared_count; i++)
    free(op->declared[i].path_or_host);
  free(op->declared);
  free(op->name);
  json_decref(op->host_context);
  free(op);
}

static maelys_executor_result_t declare(maelys_orchestrator_operation_t* op,
                                        int kind, const char* what,
                                        unsigned port, char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (op == NULL || what == NULL)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "operation and path (or host) are required");
  if (kind != 3 && what[0] != '/')
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "declared path '%s' is not absolute", what);
  if (kind == 3 && (port == 0 || port > 65535))
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "port %u is not in 1..65535", port);
  if (op->declared_count + 1 > op->declared_capacity) {
    size_t cap = op->declared_capacity ? op->declared_capacity * 2 : 4;
    orch_declared_t* d = realloc(op->declared, cap * sizeof *d);
    if (d == NULL)
      return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                               "out of memory");
    op->declared = d;
    op->declared_capacity = cap;
  }
  char* c = maelys__orch_strdup(what);
  if (c == NULL)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                             "out of memory");
  op->declared[op->declared_count++] = (orch_declared_t){kind, c, port};
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_orchestrator_operation_declare_read(maelys_orchestrator_operation_t* op,
                                           const char* path, char** out_error) {
  return declare(op, 1, path, 0, out_error);
}

maelys_executor_result_t maelys_orchestrator_operation_declare_write(
    maelys_orchestrator_operation_t* op, const char* path, char** out_error) {
  return declare(op, 2, path, 0, out_error);
}

maelys_executor_result_t maelys_orchestrator_operation_declare_connect(
    maelys_orchestrator_operation_t* op, const char* host, unsigned port,
    char** out_error) {
  return declare(op, 3, host, port, out_error);
}

maelys_executor_result_t
maelys_orchestrator_operation_set_wall_time(maelys_orchestrator_operation_t* op,
                                            uint64_t ms, char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (op == NULL)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "operation is NULL");
  op->wall_ms = ms;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t maelys_orchestrator_operation_set_host_context(
    maelys_orchestrator_operation_t* op, const char* json_object,
    char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (op == NULL || json_object == NULL)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "operation and context are required");
  json_t* doc = json_loads(json_object, JSON_REJECT_DUPLICATES, NULL);
  if (!json_is_object(doc)) {
    json_decref(doc);
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "the host context is not a JSON object");
  }
  json_decref(op->host_context);
  op->host_context = doc;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_orchestrator_operation_set_start_cb(maelys_orchestrator_operation_t* op,
                                           maelys_orchestrator_start_cb cb,
                                           void* data, char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (op == NULL)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "operation is NULL");
  op->start_cb = cb;
  op->start_data = data;
  return MAELYS_EXECUTOR_OK;
}

const char*
maelys_orchestrator_operation_id(const maelys_orchestrator_operation_t* op) {
  return op ? op->id : NULL;
}

const char*
maelys_orchestrator_operation_name(const maelys_orchestrator_operation_t* op) {
  return op ? op->name : NULL;
}

/* -------------------------------------------------------------- session */

maelys_executor_result_t maelys_orchestrator_session_create(
    uv_loop_t* loop, maelys_executor_t* executor, maelys_executor_plan_t* plan,
    const char* backend, const char* receipt_dir,
    maelys_orchestrator_session_t** out_session, char** out_error) {
  if (out_session != NULL)
    *out_session = NULL;
  if ((out_error != NULL && *out_error != NULL) || out_session == NULL ||
      loop == NULL || executor == NULL || receipt_dir == NULL ||
      !maelys__orch_path_is_clean(receipt_dir)) {
    maelys_executor_plan_destroy(plan);
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "a session needs a loop, an executor, a sealed "
                             "plan, a backend and a clean absolute receipt "
                             "directory");
  }
  uint64_t proved = 0;
  char* error = NULL;
  maelys_executor_result_t r =
      maelys_executor_backend_capabilities(executor, backend, &proved, &error);
  if (r != MAELYS_EXECUTOR_OK) {
    maelys_executor_plan_destroy(plan);
    r = maelys__orch_fail(out_error, r, "backend '%s': %s", backend,
                          error ? error : "not registered");
    maelys_executor_error_free(error);
    return r;
  }
  maelys_orchestrator_session_t* s = calloc(1, sizeof *s);
  if (s == NULL || maelys__orch_random_id(s->id) != 0 ||
      (s->receipt_dir = maelys__orch_strdup(receipt_dir)) == NULL) {
    if (s)
      free(s->receipt_dir);
    free(s);
    maelys_executor_plan_destroy(plan);
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                             "out of memory creating a session");
  }
  r = maelys_orchestrator_boundary_create(plan, backend, &s->boundary,
                                          out_error);
  if (r != MAELYS_EXECUTOR_OK) {
    free(s->receipt_dir);
    free(s);
    return r;
  }
  s->loop = loop;
  s->executor = executor;
  *out_session = s;
  return MAELYS_EXECUTOR_OK;
}

const char*
maelys_orchestrator_session_id(const maelys_orchestrator_session_t* s) {
  return s ? s->id : NULL;
}

const maelys_orchestrator_boundary_t*
maelys_orchestrator_session_boundary(const maelys_orchestrator_session_t* s) {
  return s ? s->boundary : NULL;
}

void maelys_orchestrator_session_set_event_cb(maelys_orchestrator_session_t* s,
                                              maelys_orchestrator_event_cb cb,
                                              void* data) {
  if (s == NULL)
    return;
  s->event_cb = cb;
  s->event_data = data;
}

int maelys_orchestrator_session_paused(const maelys_orchestrator_session_t* s) {
  return s != NULL && s->pending != NULL;
}

static void pending_free(pending_t* p) {
  if (p == NULL)
    return;
  maelys_orchestrator_operation_destroy(p->op);
  free(p->request_id);
  free(p->expansion_json);
  free(p->base_digest);
  maelys_orchestrator_check_destroy(p->check);
  free(p);
}

static void on_running_closed(uv_handle_t* h) {
  running_t* r = h->data;
  maelys_orchestrator_operation_destroy(r->op);
  free(r->decision_id);
  free(r->plan_digest);
  free(r);
}

static void unlink_running(running_t* r) {
  running_t** p = &r->session->running;
  while (*p != NULL && *p != r)
    p = &(*p)->next;
  if (*p == r)
    *p = r->next;
}

void maelys_orchestrator_session_destroy(maelys_orchestrator_session_t* s) {
  if (s == NULL)
    return;
  while (s->running != NULL) {
    running_t* r = s->running;
    s->running = r->next;
    /* Never signals, never waits (invariant 6). */
    maelys_execution_release(r->execution);
    uv_timer_stop(&r->wall);
    uv_close((uv_handle_t*)&r->wall, on_running_closed);
  }
  pending_free(s->pending);
  maelys_orchestrator_boundary_destroy(s->boundary);
  free(s->receipt_dir);
  free(s);
}

maelys_executor_result_t maelys_orchestrator_session_check(
    maelys_orchestrator_session_t* s, const maelys_orchestrator_operation_t* op,
    maelys_orchestrator_check_t** out_check, char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (out_check != NULL)
    *out_check = NULL;
  if (s == NULL || op == NULL || out_check == NULL)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "session, operation and out_check are required");
  return maelys__orch_check(s->boundary, op->declared, op->declared_count,
                            op->request, out_check, out_error);
}

static maelys_executor_result_t
refuse_when_busy(maelys_orchestrator_session_t* s, char** out_error) {
  if (s->closed)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                             "session %s is closed", s->id);
  if (s->pending != NULL)
    return maelys__orch_fail(
        out_error, MAELYS_EXECUTOR_ERR_STATE,
        "session %s waits for the decision on boundary request %s (operation "
        "%s): nothing else runs until then",
        s->id, s->pending->request_id, s->pending->op->id);
  return MAELYS_EXECUTOR_OK;
}

static void timestamp(char out[96]) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  snprintf(out, 96, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
           tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
           (int)(ts.tv_nsec / 1000000));
}

static void emit(maelys_orchestrator_session_t* s, json_t* doc) {
  if (s->event_cb != NULL && doc != NULL) {
    char* text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (text != NULL)
      s->event_cb(s, text, s->event_data);
    free(text);
  }
  json_decref(doc);
}

/* ------------------------------------------------------------- running */

static void on_wall(uv_timer_t* t) {
  running_t* r = t->data;
  r->wall_expired = true;
  maelys_execution_stop(r->execution, MAELYS_EXEC_STOP_GRACEFUL_THEN_FORCED,
                        NULL, NULL, NULL);
}

static void on_op_exit(maelys_execution_t* e,
                       const maelys_execution_status_t* st, void* data) {
  running_t* r = data;
  maelys_orchestrator_session_t* s = r->session;
  char* receipt = NULL;
  maelys_execution_receipt(e, &receipt, NULL);
  maelys_orchestrator_result_t res;
  memset(&res, 0, sizeof res);
  res.kind = MAELYS_ORCHESTRATOR_RESULT_RAN;
  res.operation_id = r->op->id;
  res.operation_name = r->op->name;
  res.status = st;
  res.receipt_json = receipt;
  res.receipt_path = maelys_execution_receipt_path(e);
  res.plan_digest = r->plan_digest;
  res.decision_id = r->decision_id;
  res.message = "";
  res.wall_time_expired = r->wall_expired;
  unlink_running(r);
  uv_timer_stop(&r->wall);
  if (r->cb != NULL)
    r->cb(s, &res, r->data);
  maelys_executor_string_free(receipt);
  maelys_execution_release(e);
  uv_close((uv_handle_t*)&r->wall, on_running_closed);
}

/* Spawns op (consumed on success) under the active plan. `decision` (may be
 * NULL) is the record that authorised this plan. */
static maelys_executor_result_t
spawn_op(maelys_orchestrator_session_t* s, maelys_orchestrator_operation_t* op,
         json_t* decision, const char* previous_digest,
         maelys_orchestrator_result_cb cb, void* data, char** out_error) {
  const char* digest = maelys_orchestrator_boundary_digest(s->boundary);
  json_t* ctx =
      json_pack("{s:s, s:{s:s, s:s}, s:s, s:O?, s:s?, s:O?}", "session", s->id,
                "operation", "id", op->id, "name", op->name, "plan_digest",
                digest, "decision", decision, "previous_plan_digest",
                previous_digest, "host", op->host_context);
  char* ctx_text =
      ctx ? json_dumps(ctx, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  json_decref(ctx);
  running_t* r = calloc(1, sizeof *r);
  if (ctx_text == NULL || r == NULL) {
    free(ctx_text);
    free(r);
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                             "out of memory");
  }
  /* The same backend name the boundary's capability check used (inv. 2). */
  maelys_executor_result_t res = maelys_execution_request_set_backend(
      op->request, maelys__orch_boundary_backend(s->boundary), out_error);
  if (res == MAELYS_EXECUTOR_OK)
    res = maelys_execution_request_set_receipt_dir(op->request, s->receipt_dir,
                                                   out_error);
  if (res == MAELYS_EXECUTOR_OK)
    res = maelys_execution_request_set_receipt_chain(op->request, s->id,
                                                     out_error);
  if (res == MAELYS_EXECUTOR_OK)
    res = maelys_execution_request_set_receipt_context(op->request, ctx_text,
                                                       out_error);
  free(ctx_text);
  maelys_execution_t* e = NULL;
  if (res == MAELYS_EXECUTOR_OK)
    res = maelys_execution_spawn(s->executor,
                                 maelys_orchestrator_boundary_plan(s->boundary),
                                 op->request, &e, out_error);
  if (res != MAELYS_EXECUTOR_OK) {
    free(r);
    return res;
  }
  r->session = s;
  r->op = op;
  r->execution = e;
  r->cb = cb;
  r->data = data;
  r->plan_digest = maelys__orch_strdup(digest);
  const char* did =
      decision ? json_string_value(json_object_get(decision, "id")) : NULL;
  r->decision_id = did ? maelys__orch_strdup(did) : NULL;
  uv_timer_init(s->loop, &r->wall);
  r->wall.data = r;
  if (op->wall_ms > 0)
    uv_timer_start(&r->wall, on_wall, op->wall_ms, 0);
  r->next = s->running;
  s->running = r;
  maelys_execution_wait(e, on_op_exit, r, NULL);
  if (op->start_cb != NULL)
    op->start_cb(op, e, op->start_data);
  return MAELYS_EXECUTOR_OK;
}

static void assign_id(maelys_orchestrator_session_t* s,
                      maelys_orchestrator_operation_t* op) {
  if (op->id[0] == '\0')
    snprintf(op->id, sizeof op->id, "op-%u", ++s->op_counter);
}

maelys_executor_result_t maelys_orchestrator_session_run(
    maelys_orchestrator_session_t* s, maelys_orchestrator_operation_t* op,
    maelys_orchestrator_result_cb cb, void* data, char** out_error) {
  if ((out_error != NULL && *out_error != NULL) || s == NULL || op == NULL) {
    maelys_orchestrator_operation_destroy(op);
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "session and operation are required");
  }
  maelys_executor_result_t r = refuse_when_busy(s, out_error);
  maelys_orchestrator_check_t* check = NULL;
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_orchestrator_session_check(s, op, &check, out_error);
  if (r == MAELYS_EXECUTOR_OK &&
      maelys_orchestrator_check_verdict(check) != MAELYS_ORCHESTRATOR_ALLOWED)
    r = maelys__orch_fail(
        out_error, MAELYS_EXECUTOR_ERR_DENIED, "operation '%s': %s: %s",
        op->name,
        maelys_orchestrator_check_verdict(check) == MAELYS_ORCHESTRATOR_REFUSED
            ? "refused"
            : "boundary required (nothing ran; raise a boundary request)",
        maelys_orchestrator_check_reason(check));
  maelys_orchestrator_check_destroy(check);
  if (r == MAELYS_EXECUTOR_OK) {
    assign_id(s, op);
    r = spawn_op(s, op, NULL, NULL, cb, data, out_error);
  }
  if (r != MAELYS_EXECUTOR_OK)
    maelys_orchestrator_operation_destroy(op);
  return r;
}

static json_t* grants_summary(const maelys_orchestrator_expansion_t* e) {
  json_t* a = json_array();
  for (size_t i = 0; i < e->grant_count; i++) {
    const orch_grant_t* g = &e->grants[i];
    json_array_append_new(
        a, json_sprintf(
               "%s %s '%s'%s", g->access == ORCH_WRITE ? "write" : "read",
               g->scope == MAELYS_EXECUTOR_SCOPE_LITERAL_FILE ? "the file"
                                                              : "the directory",
               g->path,
               g->scope == MAELYS_EXECUTOR_SCOPE_LITERAL_FILE
                   ? ""
                   : " and everything below it"));
  }
  if (e->network_inherit)
    json_array_append_new(
        a, json_string("the host's whole network (every destination)"));
  return a;
}

maelys_executor_result_t maelys_orchestrator_session_request_boundary(
    maelys_orchestrator_session_t* s, maelys_orchestrator_operation_t* op,
    const maelys_orchestrator_expansion_t* expansion,
    maelys_orchestrator_result_cb cb, void* data, char** out_request_id,
    char** out_error) {
  if (out_request_id != NULL)
    *out_request_id = NULL;
  if ((out_error != NULL && *out_error != NULL) || s == NULL || op == NULL ||
      expansion == NULL) {
    maelys_orchestrator_operation_destroy(op);
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "session, operation and expansion are required");
  }
  maelys_executor_result_t r = refuse_when_busy(s, out_error);
  maelys_orchestrator_check_t* check = NULL;
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_orchestrator_session_check(s, op, &check, out_error);
  /* The expansion must be exactly the one computed for this operation
   * against this session's active plan: never a wider one, never one that
   * was computed for another operation, plan or session. */
  const maelys_orchestrator_expansion_t* mine =
      check ? maelys_orchestrator_check_expansion(check) : NULL;
  if (r == MAELYS_EXECUTOR_OK && mine == NULL)
    r = maelys__orch_fail(
        out_error, MAELYS_EXECUTOR_ERR_STATE,
        "operation '%s' needs no boundary request: %s", op->name,
        maelys_orchestrator_check_verdict(check) == MAELYS_ORCHESTRATOR_ALLOWED
            ? "the active plan allows it"
            : maelys_orchestrator_check_reason(check));
  if (r == MAELYS_EXECUTOR_OK && strcmp(mine->digest, expansion->digest) != 0)
    r = maelys__orch_fail(
        out_error, MAELYS_EXECUTOR_ERR_DENIED,
        "the expansion %s is not the one this operation needs against the "
        "active plan %s (%s): refused",
        expansion->digest, maelys_orchestrator_boundary_digest(s->boundary),
        mine->digest);
  pending_t* p = NULL;
  if (r == MAELYS_EXECUTOR_OK &&
      ((p = calloc(1, sizeof *p)) == NULL ||
       (p->expansion_json = maelys__orch_strdup(mine->json)) == NULL ||
       (p->base_digest = maelys__orch_strdup(
            maelys_orchestrator_boundary_digest(s->boundary))) == NULL))
    r = maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                          "out of memory");
  if (r == MAELYS_EXECUTOR_OK) {
    assign_id(s, op);
    p->request_id =
        maelys__orch_asprintf("%s.r%u", s->id, ++s->request_counter);
    if (p->request_id == NULL)
      r = maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                            "out of memory");
  }
  if (r == MAELYS_EXECUTOR_OK && out_request_id != NULL &&
      (*out_request_id = maelys__orch_strdup(p->request_id)) == NULL)
    r = maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                          "out of memory");
  if (r != MAELYS_EXECUTOR_OK) {
    if (p != NULL)
      p->op = NULL;
    pending_free(p);
    maelys_orchestrator_check_destroy(check);
    maelys_orchestrator_operation_destroy(op);
    return r;
  }
  memcpy(p->expansion_digest, mine->digest, sizeof p->expansion_digest);
  p->expansion = (maelys_orchestrator_expansion_t*)mine;
  p->check = check;
  p->op = op;
  p->cb = cb;
  p->data = data;
  s->pending = p;
  /* Step 2: the event, in its stable form. Step 3 is the state above. */
  json_t* argv = json_array();
  const char* const* av = maelys_execution_request_argv(op->request);
  for (size_t i = 0; av != NULL && av[i] != NULL; i++)
    json_array_append_new(argv, json_string(av[i]));
  char* check_text = NULL;
  maelys_orchestrator_check_to_json(check, &check_text, NULL);
  json_t* check_doc = check_text ? json_loads(check_text, 0, NULL) : NULL;
  maelys_executor_string_free(check_text);
  emit(s,
       json_pack("{s:s, s:s, s:s, s:{s:s, s:s, s:s, s:o}, s:s, s:o, s:o, "
                 "s:s, s:o}",
                 "event", "boundary-required", "session", s->id, "request_id",
                 p->request_id, "operation", "id", op->id, "name", op->name,
                 "executable", maelys_execution_request_executable(op->request),
                 "argv", argv, "base_plan_digest", p->base_digest, "grants",
                 grants_summary(mine), "expansion",
                 json_loads(mine->json, 0, NULL), "expansion_digest",
                 mine->digest, "check", check_doc ? check_doc : json_null()));
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t maelys_orchestrator_session_decide(
    maelys_orchestrator_session_t* s, const char* request_id, int approve,
    const char* decided_by, char** out_decision_id, char** out_error) {
  if (out_decision_id != NULL)
    *out_decision_id = NULL;
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (s == NULL || request_id == NULL || decided_by == NULL ||
      decided_by[0] == '\0')
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "session, request id and decided_by are "
                             "required");
  pending_t* p = s->pending;
  if (p == NULL || strcmp(p->request_id, request_id) != 0)
    return maelys__orch_fail(
        out_error, MAELYS_EXECUTOR_ERR_NOT_FOUND,
        "session %s has no pending boundary request '%s': a decision applies "
        "only to the request, operation and session it was raised for",
        s->id, request_id);
  /* The plan the expansion was computed against must still be active. */
  if (strcmp(p->base_digest,
             maelys_orchestrator_boundary_digest(s->boundary)) != 0)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                             "boundary request %s was computed against plan "
                             "%s, which is no longer active",
                             request_id, p->base_digest);
  char when[96];
  timestamp(when);
  unsigned n = maelys__orch_boundary_next_decision(s->boundary);
  char* id = maelys__orch_asprintf("%s.d%u", s->id, n);
  json_t* record = json_pack(
      "{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "id", id ? id : "",
      "request_id", p->request_id, "session", s->id, "operation", p->op->id,
      "expansion_digest", p->expansion_digest, "outcome",
      approve ? "approved" : "denied", "decided_by", decided_by, "decided_at",
      when, "previous_plan_digest", p->base_digest);
  if (id == NULL || record == NULL) {
    free(id);
    json_decref(record);
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                             "out of memory");
  }
  /* The decision's digest binds it into the new plan's digest (and so
   * into every receipt made under that plan). */
  char* canon = json_dumps(record, JSON_COMPACT | JSON_SORT_KEYS);
  char ddigest[72];
  maelys__orch_sha256(canon, canon ? strlen(canon) : 0, ddigest);
  free(canon);
  json_object_set_new(record, "digest", json_string(ddigest));
  maelys_executor_plan_t* next = NULL;
  if (approve) {
    maelys_executor_result_t r =
        maelys__orch_apply(maelys_orchestrator_boundary_plan(s->boundary),
                           p->expansion, ddigest, &next, out_error);
    if (r != MAELYS_EXECUTOR_OK) {
      free(id);
      json_decref(record);
      return r;
    }
    char* nd = NULL;
    maelys_executor_plan_digest(next, &nd, NULL);
    json_object_set_new(record, "plan_digest", json_string(nd));
    maelys_executor_string_free(nd);
  }
  s->pending = NULL;
  json_incref(record);
  maelys__orch_boundary_record(s->boundary, record, next);
  emit(s,
       json_pack("{s:s, s:s, s:s, s:O}", "event", "boundary-decided", "session",
                 s->id, "request_id", p->request_id, "decision", record));
  maelys_executor_result_t r = MAELYS_EXECUTOR_OK;
  maelys_orchestrator_operation_t* op = p->op;
  p->op = NULL;
  maelys_orchestrator_result_t res;
  memset(&res, 0, sizeof res);
  res.operation_id = op->id;
  res.operation_name = op->name;
  res.decision_id = id;
  res.plan_digest = maelys_orchestrator_boundary_digest(s->boundary);
  if (!approve) {
    res.kind = MAELYS_ORCHESTRATOR_RESULT_DENIED;
    res.message = "the boundary request was denied; the operation never ran";
    if (p->cb != NULL)
      p->cb(s, &res, p->data);
    maelys_orchestrator_operation_destroy(op);
  } else {
    /* Re-check under the new plan: the expansion must now allow it. */
    maelys_orchestrator_check_t* check = NULL;
    char* error = NULL;
    r = maelys_orchestrator_session_check(s, op, &check, &error);
    if (r == MAELYS_EXECUTOR_OK &&
        maelys_orchestrator_check_verdict(check) != MAELYS_ORCHESTRATOR_ALLOWED)
      r = maelys__orch_fail(&error, MAELYS_EXECUTOR_ERR_STATE,
                            "the approved plan does not allow the operation: "
                            "%s",
                            maelys_orchestrator_check_reason(check));
    maelys_orchestrator_check_destroy(check);
    if (r == MAELYS_EXECUTOR_OK)
      r = spawn_op(s, op, record, p->base_digest, p->cb, p->data, &error);
    if (r != MAELYS_EXECUTOR_OK) {
      res.kind = MAELYS_ORCHESTRATOR_RESULT_FAILED;
      res.message = error ? error : "the operation could not be started";
      if (p->cb != NULL)
        p->cb(s, &res, p->data);
      maelys__orch_fail(out_error, r, "%s", res.message);
      maelys_executor_error_free(error);
      maelys_orchestrator_operation_destroy(op);
    }
  }
  json_decref(record);
  if (out_decision_id != NULL)
    *out_decision_id = id;
  else
    free(id);
  pending_free(p);
  return r;
}

void maelys_orchestrator_session_stop(maelys_orchestrator_session_t* s) {
  for (running_t* r = s ? s->running : NULL; r != NULL; r = r->next)
    maelys_execution_stop(r->execution, MAELYS_EXEC_STOP_GRACEFUL_THEN_FORCED,
                          NULL, NULL, NULL);
}

maelys_executor_result_t
maelys_orchestrator_session_close(maelys_orchestrator_session_t* s,
                                  char** out_path, char** out_error) {
  if (out_path != NULL)
    *out_path = NULL;
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (s == NULL)
    return maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                             "session is NULL");
  maelys_executor_result_t r = refuse_when_busy(s, out_error);
  if (r == MAELYS_EXECUTOR_OK && s->running != NULL)
    r = maelys__orch_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                          "session %s still runs operation %s", s->id,
                          s->running->op->id);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_close_receipt_chain(s->executor, s->id, s->receipt_dir,
                                            out_path, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    s->closed = true;
  return r;
}
