/*
 * `plan --explain`: the sealed plan as a person reads it. Every line comes
 * from the plan itself (and what was protected), never from the options
 * that produced it, so it describes a --plan file exactly as it describes a
 * built-in profile.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "maelys/backend.h"
#include "warden.h"

typedef struct out {
  char* data;
  size_t len, cap;
} out_t;

static void put(out_t* o, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void put(out_t* o, const char* fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n >= 0 && o->len + (size_t)n + 1 > o->cap) {
    size_t cap = o->cap ? o->cap : 2048;
    while (o->len + (size_t)n + 1 > cap)
      cap *= 2;
    char* d = realloc(o->data, cap);
    if (d == NULL) {
      va_end(ap2);
      return;
    }
    o->data = d;
    o->cap = cap;
  }
  if (n >= 0)
    vsnprintf(o->data + o->len, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  if (n >= 0)
    o->len += (size_t)n;
}

/* One labelled section: the label on its first line only. */
static void row(out_t* o, bool* first, const char* label, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void row(out_t* o, bool* first, const char* label, const char* fmt,
                ...) {
  char text[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  put(o, "%-12s %s\n", *first ? label : "", text);
  *first = false;
}

static void size_text(uint64_t bytes, char* out, size_t size) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    u++;
  }
  snprintf(out, size, "%llu %s", (unsigned long long)bytes, units[u]);
}

static const warden_protect_item_t* protection_of(const warden_protection_t* p,
                                                  const char* path) {
  for (size_t i = 0; p != NULL && i < p->count; i++)
    if (strcmp(p->items[i].path, path) == 0)
      return &p->items[i];
  return NULL;
}

static void rules(out_t* o, const maelys_executor_plan_t* plan,
                  const warden_protection_t* p, maelys_executor_access_t access,
                  const char* label) {
  bool first = true;
  for (size_t i = 0; i < maelys_executor_plan_rule_count(plan); i++) {
    maelys_executor_rule_view_t r;
    if (maelys_executor_plan_rule_get(plan, i, &r) != 0 || r.access != access ||
        protection_of(p, r.path) != NULL)
      continue;
    row(o, &first, label, "%s%s", r.path,
        r.scope == MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY ? "/ (and below)"
                                                             : "");
  }
  if (access == MAELYS_EXECUTOR_ACCESS_READ) {
    for (size_t i = 0; i < maelys_executor_plan_mount_count(plan); i++) {
      maelys_executor_mount_view_t m;
      if (maelys_executor_plan_mount_get(plan, i, &m) != 0)
        continue;
      switch (m.kind) {
      case MAELYS_EXECUTOR_MOUNT_RO_BIND:
        if (strcmp(m.source, m.destination) == 0)
          row(o, &first, label, "%s", m.destination);
        else
          row(o, &first, label, "%s (the host's %s)", m.destination, m.source);
        break;
      case MAELYS_EXECUTOR_MOUNT_SYMLINK:
        row(o, &first, label, "%s -> %s", m.destination, m.source);
        break;
      case MAELYS_EXECUTOR_MOUNT_PROC:
        row(o, &first, label, "%s (the sandbox's own processes)",
            m.destination);
        break;
      case MAELYS_EXECUTOR_MOUNT_DEV:
        row(o, &first, label, "%s (a minimal set of devices)", m.destination);
        break;
      default:
        break;
      }
    }
  }
  if (access == MAELYS_EXECUTOR_ACCESS_WRITE) {
    for (size_t i = 0; i < maelys_executor_plan_mount_count(plan); i++) {
      maelys_executor_mount_view_t m;
      if (maelys_executor_plan_mount_get(plan, i, &m) != 0)
        continue;
      char size[32];
      if (m.kind == MAELYS_EXECUTOR_MOUNT_BIND)
        row(o, &first, label, "%s (the host's %s)", m.destination, m.source);
      if (m.kind == MAELYS_EXECUTOR_MOUNT_TMPFS) {
        size_text(m.size_bytes, size, sizeof size);
        row(o, &first, label,
            "%s (private to the sandbox, %s, gone when it ends)", m.destination,
            size);
      }
    }
  }
  if (first)
    row(o, &first, label, "nothing");
}

char* warden_explain(const maelys_executor_plan_t* plan,
                     const warden_protection_t* protection, const char* backend,
                     uint64_t proved, const char* memory_note) {
  out_t o = {0};
  char* digest = NULL;
  maelys_executor_plan_digest(plan, &digest, NULL);
  bool first = true;
  row(&o, &first, "plan", "%s", digest ? digest : "?");
  maelys_executor_string_free(digest);
  uint64_t scratch = 0;
  maelys_executor_root_t root = maelys_executor_plan_root(plan, &scratch);
  char size[32];
  size_text(scratch, size, sizeof size);
  first = true;
  if (root == MAELYS_EXECUTOR_ROOT_HOST)
    row(&o, &first, "root", "the host's own: nothing is confined");
  else if (root == MAELYS_EXECUTOR_ROOT_READONLY)
    row(&o, &first, "root",
        "read-only, holding only what is listed below; anything else of the "
        "host does not exist inside");
  else
    row(&o, &first, "root",
        "writable scratch of %s that vanishes with the run, holding only what "
        "is listed below",
        size);
  rules(&o, plan, protection, MAELYS_EXECUTOR_ACCESS_READ, "readable");
  rules(&o, plan, protection, MAELYS_EXECUTOR_ACCESS_WRITE, "writable");
  first = true;
  for (size_t i = 0; protection != NULL && i < protection->count; i++) {
    const warden_protect_item_t* it = &protection->items[i];
    if (it->kind != WARDEN_PROTECT_DENIED)
      row(&o, &first, "protected", "%s%s: %s (%s)", it->path,
          it->is_dir ? "/" : "", warden_protect_kind_name(it->kind), it->why);
  }
  for (size_t i = 0; protection != NULL && i < protection->watch_count; i++)
    row(&o, &first, "protected",
        "%s: checked after the run, moved aside if it appeared (%s)",
        protection->watches[i].path, protection->watches[i].why);
  if (first)
    row(&o, &first, "protected", "nothing");
  first = true;
  for (size_t i = 0; i < maelys_executor_plan_rule_count(plan); i++) {
    maelys_executor_rule_view_t r;
    if (maelys_executor_plan_rule_get(plan, i, &r) != 0 ||
        r.access != MAELYS_EXECUTOR_ACCESS_DENY)
      continue;
    const warden_protect_item_t* it = protection_of(protection, r.path);
    row(&o, &first, "denied", "%s%s%s%s", r.path,
        r.scope == MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY ? "/" : "",
        it ? ": " : "", it ? it->why : "");
  }
  if (first)
    row(&o, &first, "denied", "nothing");
  first = true;
  for (size_t i = 0; protection != NULL && i < protection->unprotected_count;
       i++)
    row(&o, &first, "unprotected", "%s (--unprotect)",
        protection->unprotected[i]);
  first = true;
  switch (maelys_executor_plan_network(plan)) {
  case MAELYS_EXECUTOR_NETWORK_NONE:
    row(&o, &first, "network",
        "none: no interface but loopback, no socket but AF_UNIX");
    break;
  case MAELYS_EXECUTOR_NETWORK_INHERIT:
    row(&o, &first, "network", "the host's network, unconfined");
    break;
  case MAELYS_EXECUTOR_NETWORK_MEDIATED:
    row(&o, &first, "network", "mediated: only through the egress channel");
    break;
  default:
    row(&o, &first, "network", "an external channel only");
    break;
  }
  first = true;
  uint64_t v = 0, soft = 0, hard = 0;
  if (maelys_executor_plan_limit_get(plan, MAELYS_EXECUTOR_LIMIT_TASKS, &v) ==
      0)
    row(&o, &first, "limits",
        "%llu tasks (processes and threads) at once, the whole sandbox",
        (unsigned long long)v);
  if (maelys_executor_plan_limit_get(plan, MAELYS_EXECUTOR_LIMIT_MEMORY, &v) ==
      0) {
    size_text(v, size, sizeof size);
    row(&o, &first, "limits", "%s of memory, the whole sandbox", size);
  } else if (memory_note != NULL) {
    row(&o, &first, "limits", "memory %s", memory_note);
  }
  static const struct {
    maelys_executor_rlimit_t r;
    const char* what;
    bool bytes;
  } rl[] = {{MAELYS_EXECUTOR_RLIMIT_CPU, "seconds of CPU time", false},
            {MAELYS_EXECUTOR_RLIMIT_NOFILE, "open descriptors", false},
            {MAELYS_EXECUTOR_RLIMIT_FSIZE, "file size", true},
            {MAELYS_EXECUTOR_RLIMIT_AS, "address space", true}};
  for (size_t i = 0; i < sizeof rl / sizeof rl[0]; i++) {
    if (maelys_executor_plan_rlimit_get(plan, rl[i].r, &soft, &hard) != 0)
      continue;
    if (rl[i].bytes) {
      size_text(hard, size, sizeof size);
      row(&o, &first, "limits", "%s of %s, per process", size, rl[i].what);
    } else {
      row(&o, &first, "limits", "%llu %s, per process",
          (unsigned long long)hard, rl[i].what);
    }
  }
  if (first)
    row(&o, &first, "limits", "none");
  first = true;
  char caps[1024] = "";
  for (int b = 0; b < 64; b++)
    if (proved & (UINT64_C(1) << b)) {
      const char* n = maelys_executor_capability_name(UINT64_C(1) << b);
      strncat(caps, caps[0] ? ", " : "", sizeof caps - strlen(caps) - 1);
      strncat(caps, n ? n : "?", sizeof caps - strlen(caps) - 1);
    }
  row(&o, &first, "backend", "%s", backend);
  row(&o, &first, "backend", "proved: %s", caps[0] ? caps : "nothing");
  return o.data;
}
