/*
 * What the sandbox refused, told the way a person at a terminal needs it: a
 * silent hang (a client retrying a network it does not have, a program
 * looking for a tool that is not there) explains itself with one notice at
 * the first denial of each kind, naming the option that would allow it;
 * the end of the run sums them up from the receipt, which lists them.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "catalog.h"
#include "denials.h"

typedef struct watch {
  bool quiet;
  const char* source; /* NULL: a built-in profile, whose options apply */
  bool told[3];       /* by maelys_execution_denial_kind_t */
} watch_t;

/* One execution per process: the notices are about it. */
static watch_t watch;

static const char* errno_name(int e) {
  const char* name = strerrorname_np(e);
  return name != NULL ? name : "an error";
}

/* " Allow it with OPTION." -- the option of `maelys-warden run` that would
 * allow it, or what to add to the plan file `source` -- or "". */
static void allow_hint(const maelys_execution_denial_t* d, const char* source,
                       char* out, size_t size) {
  out[0] = '\0';
  if (d->allow_key == NULL || d->allow_value == NULL)
    return;
  bool network = strcmp(d->allow_key, "network") == 0;
  if (!network && strcmp(d->allow_key, "read") != 0)
    return;
  if (source == NULL)
    snprintf(out, size, " Allow it with %s %s.",
             network ? "--network" : "--allow-read", d->allow_value);
  else if (network)
    snprintf(out, size, " Allow it in the %s: network %s.", source,
             d->allow_value);
  else
    snprintf(out, size, " Allow it in the %s: a read rule for %s.", source,
             d->allow_value);
}

static void on_denial(maelys_execution_t* execution,
                      const maelys_execution_denial_t* d, void* data) {
  watch_t* w = data;
  (void)execution;
  if (w->quiet || (d->kind != MAELYS_EXEC_DENIAL_NETWORK &&
                   d->kind != MAELYS_EXEC_DENIAL_EXEC))
    return;
  if (w->told[d->kind])
    return;
  w->told[d->kind] = true;
  const char* why;
  if (d->kind == MAELYS_EXEC_DENIAL_NETWORK)
    why = strcmp(d->call, "connect") == 0
              ? "that abstract socket is on the host's network, which this "
                "sandbox does not share"
              : "this sandbox has no network";
  else if (strcmp(d->call, "interpreter") == 0)
    why = "a program run here needs this interpreter, which exists on the "
          "host but not in the sandbox";
  else
    why = "it exists on the host but not in the sandbox";
  char hint[700];
  allow_hint(d, w->source, hint, sizeof hint);
  /* During a terminal session the operator's terminal is in raw mode,
   * which turns no LF into CR LF: the line ends with both itself (in cooked
   * mode the extra CR changes nothing). */
  fprintf(stderr,
          WARDEN_PROGRAM ": denied: %s(%s) -> %s: %s.%s Further %s denials "
                         "are counted in the receipt.%s",
          strcmp(d->call, "interpreter") == 0 ? "execve" : d->call, d->detail,
          errno_name(d->error_number), why, hint, d->kind_name,
          isatty(STDERR_FILENO) ? "\r\n" : "\n");
  fflush(stderr);
}

void warden_denials_watch(maelys_execution_t* execution, bool quiet,
                          const char* source) {
  memset(&watch, 0, sizeof watch);
  watch.quiet = quiet;
  watch.source = source;
  maelys_execution_on_denial(execution, on_denial, &watch, NULL);
}

void warden_denials_summary(const maelys_execution_t* execution, bool quiet) {
  char* text = NULL;
  if (quiet ||
      maelys_execution_receipt(execution, &text, NULL) != MAELYS_EXECUTOR_OK)
    return;
  json_t* doc = json_loads(text, 0, NULL);
  maelys_executor_string_free(text);
  json_t* denials = json_object_get(doc, "denials");
  json_t* counts = json_object_get(denials, "counts");
  json_int_t total = json_integer_value(json_object_get(denials, "total"));
  bool lost = json_is_string(json_object_get(denials, "recording")) &&
              strcmp(json_string_value(json_object_get(denials, "recording")),
                     "lost") == 0;
  if (total > 0 || lost) {
    char list[256] = "";
    size_t off = 0;
    const char* key;
    json_t* value;
    json_object_foreach(counts, key, value) {
      if (json_integer_value(value) <= 0 || off >= sizeof list)
        continue;
      off += (size_t)snprintf(list + off, sizeof list - off, "%s%lld %s",
                              off ? ", " : "",
                              (long long)json_integer_value(value), key);
    }
    const char* path = maelys_execution_receipt_path(execution);
    fprintf(stderr,
            WARDEN_PROGRAM ": denials: %s%s%s (the receipt%s%s lists them "
                           "under \"denials\")\n",
            total > 0 ? list : "none counted",
            lost ? "; recording stopped early (the denial listener ended), "
                   "later refusals were not counted"
                 : "",
            "", path ? " " : "", path ? path : "");
    fflush(stderr);
  }
  json_decref(doc);
}
