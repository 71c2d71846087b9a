/*
 * Denials: what the sandbox refused, kept as the backend reports it (counts
 * per kind, the first distinct examples), handed to the host's callback as
 * it happens, and rendered as the receipt's "denials" section with what
 * would allow each one, in plan terms.
 *
 * The reports travel from the sandbox's side, so they are bounded here
 * again: counts only ever grow (a report cannot lower one), at most
 * EXAMPLES_MAX examples are kept, each detail is printable ASCII (checked by
 * the backend's parser and again here).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "denials.h"
#include "internal.h"

#define EXAMPLES_MAX 16
#define KINDS 3 /* indexed by maelys_execution_denial_kind_t (1, 2) */

typedef struct example {
  maelys_execution_denial_kind_t kind;
  char call[16];
  int error_number;
  char* detail;
} example_t;

struct maelys__denials {
  bool listening; /* a listener reported: the receipt has the section */
  bool lost;      /* the recording ended while the sandbox ran */
  uint64_t counts[KINDS];
  /* EXAMPLES_MAX of them, allocated at the first: most sandboxes report
   * only that they listen, and 1000 of them must stay small. */
  example_t* examples;
  size_t example_count;
  uint64_t examples_omitted;
  maelys_execution_denial_cb cb;
  void* cb_data;
};

static const char* kind_name(maelys_execution_denial_kind_t kind) {
  switch (kind) {
  case MAELYS_EXEC_DENIAL_NETWORK:
    return "network";
  case MAELYS_EXEC_DENIAL_EXEC:
    return "exec";
  }
  return NULL;
}

static bool printable(const char* s) {
  for (; *s; s++)
    if (*s <= 0x20 || *s >= 0x7f)
      return false;
  return true;
}

/* What would allow a denial, in plan terms: `key` and `value` (into
 * `buf`), or false when nothing in a plan would. */
static bool allow_of(maelys_execution_denial_kind_t kind, const char* detail,
                     const maelys_executor_plan_t* plan, const char** key,
                     char* buf, size_t size) {
  if (kind == MAELYS_EXEC_DENIAL_NETWORK &&
      maelys_executor_plan_network(plan) != MAELYS_EXECUTOR_NETWORK_INHERIT) {
    *key = "network";
    snprintf(buf, size, "inherit");
    return true;
  }
  if (kind == MAELYS_EXEC_DENIAL_EXEC && detail[0] == '/') {
    /* The directory that holds it: binding it read-only brings it in. */
    const char* slash = strrchr(detail, '/');
    size_t n = slash == detail ? 1 : (size_t)(slash - detail);
    if (n >= size)
      return false;
    memcpy(buf, detail, n);
    buf[n] = '\0';
    *key = "read";
    return true;
  }
  return false;
}

static maelys__denials_t* ensure(maelys__denials_t** d) {
  if (*d == NULL)
    *d = calloc(1, sizeof **d);
  return *d;
}

void maelys__denials_event(maelys__denials_t** denials,
                           maelys_execution_t* execution,
                           const maelys_executor_plan_t* plan,
                           const maelys_backend_event_t* ev) {
  maelys__denials_t* d = ensure(denials);
  if (d == NULL)
    return;
  switch (ev->denial_report) {
  case MAELYS_BACKEND_DENIAL_LISTENING:
    d->listening = true;
    return;
  case MAELYS_BACKEND_DENIAL_LOST:
    d->lost = d->listening;
    return;
  case MAELYS_BACKEND_DENIAL_COUNT:
  case MAELYS_BACKEND_DENIAL_EXAMPLE:
    break;
  default:
    return;
  }
  maelys_execution_denial_kind_t kind = ev->denial_kind;
  if (kind_name(kind) == NULL)
    return;
  d->listening = true;
  if (ev->denial_count > d->counts[kind])
    d->counts[kind] = ev->denial_count;
  if (ev->denial_report != MAELYS_BACKEND_DENIAL_EXAMPLE)
    return;
  char call[sizeof ev->denial_call];
  memcpy(call, ev->denial_call, sizeof call);
  call[sizeof call - 1] = '\0';
  const char* detail = ev->message;
  if (!printable(detail) || !printable(call) || detail[0] == '\0')
    return;
  if (d->example_count < EXAMPLES_MAX) {
    if (d->examples == NULL)
      d->examples = calloc(EXAMPLES_MAX, sizeof *d->examples);
    example_t* x = d->examples != NULL ? &d->examples[d->example_count] : NULL;
    if (x != NULL && (x->detail = maelys__executor_strdup(detail)) != NULL) {
      x->kind = kind;
      memcpy(x->call, call, sizeof x->call);
      x->error_number = ev->error_number;
      d->example_count++;
    }
  } else {
    d->examples_omitted++;
  }
  if (d->cb == NULL || execution == NULL)
    return;
  char value[512];
  const char* key = NULL;
  bool allowed = allow_of(kind, detail, plan, &key, value, sizeof value);
  maelys_execution_denial_t out = {
      .kind = kind,
      .kind_name = kind_name(kind),
      .call = call,
      .error_number = ev->error_number,
      .detail = detail,
      .count = d->counts[kind],
      .allow_key = allowed ? key : NULL,
      .allow_value = allowed ? value : NULL,
  };
  d->cb(execution, &out, d->cb_data);
}

maelys_executor_result_t
maelys__denials_set_callback(maelys__denials_t** denials,
                             maelys_execution_denial_cb cb, void* data,
                             char** out_error) {
  maelys__denials_t* d = ensure(denials);
  if (d == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  d->cb = cb;
  d->cb_data = cb != NULL ? data : NULL;
  return MAELYS_EXECUTOR_OK;
}

json_t* maelys__denials_json(const maelys__denials_t* d,
                             const maelys_executor_plan_t* plan) {
  if (d == NULL || !d->listening)
    return NULL;
  json_t* counts = json_object();
  json_t* examples = json_array();
  json_t* doc = json_object();
  if (counts == NULL || examples == NULL || doc == NULL) {
    json_decref(counts);
    json_decref(examples);
    json_decref(doc);
    return NULL;
  }
  uint64_t total = 0;
  for (int k = 1; k < KINDS; k++) {
    json_object_set_new(counts, kind_name((maelys_execution_denial_kind_t)k),
                        json_integer((json_int_t)d->counts[k]));
    total += d->counts[k];
  }
  for (size_t i = 0; i < d->example_count; i++) {
    const example_t* x = &d->examples[i];
    const char* name = strerrorname_np(x->error_number);
    char value[512];
    const char* key = NULL;
    json_t* allow =
        allow_of(x->kind, x->detail, plan, &key, value, sizeof value)
            ? json_pack("{s:s}", key, value)
            : json_null();
    json_array_append_new(
        examples,
        json_pack("{s:s, s:s, s:i, s:s, s:s, s:o}", "kind", kind_name(x->kind),
                  "call", x->call, "errno", x->error_number, "error",
                  name ? name : "unknown", "detail", x->detail, "allow",
                  allow ? allow : json_null()));
  }
  json_object_set_new(doc, "recording",
                      json_string(d->lost ? "lost" : "complete"));
  json_object_set_new(doc, "total", json_integer((json_int_t)total));
  json_object_set_new(doc, "counts", counts);
  json_object_set_new(doc, "examples", examples);
  json_object_set_new(doc, "examples_omitted",
                      json_integer((json_int_t)d->examples_omitted));
  return doc;
}

void maelys__denials_free(maelys__denials_t* d) {
  if (d == NULL)
    return;
  for (size_t i = 0; i < d->example_count; i++)
    free(d->examples[i].detail);
  free(d->examples);
  free(d);
}
