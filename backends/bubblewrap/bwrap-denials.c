/*
 * The denial listener's status lines (helper/notify.c) as backend events.
 *
 *   maelys-denial listening
 *   maelys-denial example KIND CALL ERRNO COUNT DETAIL
 *   maelys-denial count KIND COUNT
 *   maelys-denial lost
 *
 * The listener runs outside the sandbox, but what it reports comes from
 * the sandbox, so every field is checked again here: a known kind, a call
 * of lowercase letters, a small errno, a detail of printable ASCII only. A
 * line that does not parse is an ordinary diagnostic.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bwrap-internal.h"

static const char prefix[] = "maelys-denial ";

static bool parse_kind(const char* s, size_t n,
                       maelys_execution_denial_kind_t* out) {
  if (n == 7 && memcmp(s, "network", 7) == 0)
    *out = MAELYS_EXEC_DENIAL_NETWORK;
  else if (n == 4 && memcmp(s, "exec", 4) == 0)
    *out = MAELYS_EXEC_DENIAL_EXEC;
  else
    return false;
  return true;
}

/* The next space-separated field of *p (advanced past it and its space). */
static const char* field(const char** p, size_t* n) {
  const char* s = *p;
  const char* sp = strchr(s, ' ');
  *n = sp ? (size_t)(sp - s) : strlen(s);
  *p = sp ? sp + 1 : s + *n;
  return *n > 0 ? s : NULL;
}

static bool parse_u64(const char* s, size_t n, uint64_t* out) {
  if (n == 0 || n > 20)
    return false;
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return false;
    uint64_t d = (uint64_t)(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10)
      return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

bool maelys__bwrap_denial_line(const char* line, maelys_backend_event_t* ev) {
  if (strncmp(line, prefix, sizeof prefix - 1) != 0)
    return false;
  const char* p = line + sizeof prefix - 1;
  if (strcmp(p, "listening") == 0) {
    ev->kind = MAELYS_BACKEND_EVENT_DENIAL;
    ev->denial_report = MAELYS_BACKEND_DENIAL_LISTENING;
    return true;
  }
  if (strcmp(p, "lost") == 0) {
    ev->kind = MAELYS_BACKEND_EVENT_DENIAL;
    ev->denial_report = MAELYS_BACKEND_DENIAL_LOST;
    return true;
  }
  size_t n;
  const char* what = field(&p, &n);
  bool example = what != NULL && n == 7 && memcmp(what, "example", 7) == 0;
  bool count = what != NULL && n == 5 && memcmp(what, "count", 5) == 0;
  if (!example && !count)
    return false;
  maelys_execution_denial_kind_t kind;
  const char* f = field(&p, &n);
  if (f == NULL || !parse_kind(f, n, &kind))
    return false;
  char call[sizeof ev->denial_call] = "";
  uint64_t err = 0, total = 0;
  if (example) {
    f = field(&p, &n);
    if (f == NULL || n >= sizeof call)
      return false;
    for (size_t i = 0; i < n; i++)
      if (f[i] < 'a' || f[i] > 'z')
        return false;
    memcpy(call, f, n);
    call[n] = '\0';
    f = field(&p, &n);
    if (f == NULL || !parse_u64(f, n, &err) || err == 0 || err > 4095)
      return false;
  }
  f = field(&p, &n);
  if (f == NULL || !parse_u64(f, n, &total) || total == 0)
    return false;
  if (example) {
    size_t len = strlen(p);
    if (len == 0 || len >= sizeof ev->message)
      return false;
    for (size_t i = 0; i < len; i++)
      if (p[i] <= 0x20 || p[i] >= 0x7f)
        return false;
    memcpy(ev->message, p, len + 1);
    memcpy(ev->denial_call, call, sizeof call);
    ev->error_number = (int)err;
  } else if (*p != '\0') {
    return false;
  }
  ev->kind = MAELYS_BACKEND_EVENT_DENIAL;
  ev->denial_report =
      example ? MAELYS_BACKEND_DENIAL_EXAMPLE : MAELYS_BACKEND_DENIAL_COUNT;
  ev->denial_kind = kind;
  ev->denial_count = total;
  return true;
}
