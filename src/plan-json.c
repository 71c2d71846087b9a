/*
 * The plan's JSON form ("maelys-executor-plan/1"), read strictly: an unknown
 * member, a wrong type or an invalid value is refused with its JSON path, so a
 * typo in a policy file can never silently drop a rule (invariant 1).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "internal.h"

#define PLAN_FORMAT "maelys-executor-plan/1"

/* ------------------------------------------------------------- writing */

static json_t* size_value(uint64_t v) {
  if (v == MAELYS_EXECUTOR_RLIMIT_INFINITY)
    return json_string("unlimited");
  return json_integer((json_int_t)v);
}

maelys_executor_result_t
maelys_executor_plan_to_json(const maelys_executor_plan_t* plan,
                             char** out_json, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (out_json == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "out_json is NULL");
  *out_json = NULL;
  if (plan == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "plan is NULL");
  json_t* doc = json_object();
  json_t* mounts = json_array();
  json_t* rules = json_array();
  json_t* network = json_object();
  json_t* dests = json_array();
  json_t* root = json_object();
  json_t* caps = json_array();
  json_t* limits = json_object();
  json_t* channels = json_array();
  if (!doc || !mounts || !rules || !network || !dests || !root || !caps ||
      !limits || !channels)
    goto oom;
  json_object_set_new(doc, "format", json_string(PLAN_FORMAT));
  for (size_t i = 0; i < plan->mount_count; i++) {
    const maelys__mount_t* m = &plan->mounts[i];
    json_t* o = json_object();
    if (o == NULL)
      goto oom;
    json_object_set_new(o, "kind",
                        json_string(maelys__executor_mount_kind_name(m->kind)));
    if (m->kind == MAELYS_EXECUTOR_MOUNT_SYMLINK)
      json_object_set_new(o, "target", json_string(m->source));
    else if (m->source != NULL)
      json_object_set_new(o, "source", json_string(m->source));
    json_object_set_new(o, "destination", json_string(m->destination));
    if (m->kind == MAELYS_EXECUTOR_MOUNT_BIND ||
        m->kind == MAELYS_EXECUTOR_MOUNT_RO_BIND)
      json_object_set_new(
          o, "missing", json_string(maelys__executor_missing_name(m->missing)));
    if (m->kind == MAELYS_EXECUTOR_MOUNT_TMPFS)
      json_object_set_new(o, "size", json_integer((json_int_t)m->size_bytes));
    json_array_append_new(mounts, o);
  }
  json_object_set_new(doc, "mounts", mounts);
  mounts = NULL;
  for (size_t i = 0; i < plan->rule_count; i++) {
    const maelys__rule_t* r = &plan->rules[i];
    json_t* o = json_pack("{s:s, s:s, s:s}", "path", r->path, "access",
                          maelys__executor_access_name(r->access), "scope",
                          maelys__executor_scope_name(r->scope));
    if (o == NULL)
      goto oom;
    json_array_append_new(rules, o);
  }
  json_object_set_new(doc, "rules", rules);
  rules = NULL;
  json_object_set_new(
      network, "mode",
      json_string(maelys__executor_network_name(plan->network)));
  for (size_t i = 0; i < plan->destination_count; i++) {
    json_t* o = json_pack("{s:s, s:i}", "host", plan->destinations[i].host,
                          "port", (int)plan->destinations[i].port);
    if (o == NULL)
      goto oom;
    json_array_append_new(dests, o);
  }
  if (plan->destination_count > 0)
    json_object_set_new(network, "destinations", dests);
  else
    json_decref(dests);
  dests = NULL;
  if (plan->mediator != NULL)
    json_object_set_new(network, "mediator", json_string(plan->mediator));
  json_object_set_new(doc, "network", network);
  network = NULL;
  json_object_set_new(root, "disposition",
                      json_string(maelys__executor_root_name(plan->root)));
  if (plan->root == MAELYS_EXECUTOR_ROOT_EPHEMERAL_WRITE)
    json_object_set_new(root, "scratch",
                        json_integer((json_int_t)plan->scratch_bytes));
  json_object_set_new(doc, "root", root);
  root = NULL;
  for (int b = 0; b < 64; b++) {
    uint64_t bit = UINT64_C(1) << b;
    if (plan->required & bit)
      json_array_append_new(caps,
                            json_string(maelys_executor_capability_name(bit)));
  }
  json_object_set_new(doc, "required_capabilities", caps);
  caps = NULL;
  json_object_set_new(doc, "process_tree_required",
                      json_boolean(plan->process_tree_required));
  for (int i = 1; i < MAELYS__RLIMIT_COUNT; i++) {
    if (!plan->rlimits[i].set)
      continue;
    json_t* o = json_object();
    if (o == NULL)
      goto oom;
    json_object_set_new(o, "soft", size_value(plan->rlimits[i].soft));
    json_object_set_new(o, "hard", size_value(plan->rlimits[i].hard));
    json_object_set_new(limits, maelys__executor_rlimit_names[i], o);
  }
  json_object_set_new(doc, "rlimits", limits);
  limits = NULL;
  for (int i = 1; i < MAELYS__LIMIT_COUNT; i++) {
    if (plan->limits[i] == 0)
      continue;
    json_t* ceilings = json_object_get(doc, "limits");
    if (ceilings == NULL) {
      ceilings = json_object();
      if (ceilings == NULL || json_object_set_new(doc, "limits", ceilings))
        goto oom;
    }
    json_object_set_new(ceilings,
                        maelys__executor_limit_name((maelys_executor_limit_t)i),
                        json_integer((json_int_t)plan->limits[i]));
  }
  if (plan->decision_digest != NULL)
    json_object_set_new(doc, "decision_digest",
                        json_string(plan->decision_digest));
  for (size_t i = 0; i < plan->channel_count; i++) {
    json_t* o = json_pack("{s:i, s:s}", "fd", plan->channels[i].child_fd,
                          "name", plan->channels[i].name);
    if (o == NULL)
      goto oom;
    json_array_append_new(channels, o);
  }
  json_object_set_new(doc, "channels", channels);
  channels = NULL;
  if (plan->sealed)
    json_object_set_new(doc, "digest", json_string(plan->digest));
  *out_json = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(doc);
  if (*out_json == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory rendering the plan");
  return MAELYS_EXECUTOR_OK;
oom:
  json_decref(doc);
  json_decref(mounts);
  json_decref(rules);
  json_decref(network);
  json_decref(dests);
  json_decref(root);
  json_decref(caps);
  json_decref(limits);
  json_decref(channels);
  return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                               "out of memory rendering the plan");
}

/* ------------------------------------------------------------- reading */

typedef struct reader {
  char** out_error;
  maelys_executor_result_t result;
} reader_t;

static bool bad(reader_t* rd, const char* path, const char* what) {
  rd->result =
      maelys__executor_fail(rd->out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                            "plan JSON %s: %s", path, what);
  return false;
}

/* Refuses members of `obj` not listed in `allowed` (NULL-terminated). */
static bool only_members(reader_t* rd, const char* path, json_t* obj,
                         const char* const* allowed) {
  const char* key;
  json_t* value;
  json_object_foreach(obj, key, value) {
    bool ok = false;
    for (size_t i = 0; allowed[i] != NULL; i++)
      if (strcmp(allowed[i], key) == 0)
        ok = true;
    if (!ok) {
      char* p = maelys__executor_asprintf("%s.%s", path, key);
      bad(rd, p ? p : path, "unknown member");
      free(p);
      return false;
    }
  }
  return true;
}

static const char* get_string(reader_t* rd, const char* path, json_t* obj,
                              const char* key, bool required) {
  json_t* v = json_object_get(obj, key);
  if (v == NULL) {
    if (required) {
      char* p = maelys__executor_asprintf("%s.%s", path, key);
      bad(rd, p ? p : path, "is required");
      free(p);
    }
    return NULL;
  }
  if (!json_is_string(v)) {
    char* p = maelys__executor_asprintf("%s.%s", path, key);
    bad(rd, p ? p : path, "must be a string");
    free(p);
    return NULL;
  }
  return json_string_value(v);
}

/* A non-negative integer, or "unlimited" when allow_unlimited. */
static bool get_size(reader_t* rd, const char* path, json_t* v,
                     bool allow_unlimited, uint64_t* out) {
  if (allow_unlimited && json_is_string(v) &&
      strcmp(json_string_value(v), "unlimited") == 0) {
    *out = MAELYS_EXECUTOR_RLIMIT_INFINITY;
    return true;
  }
  if (!json_is_integer(v) || json_integer_value(v) < 0)
    return bad(rd, path,
               allow_unlimited ? "must be a non-negative integer or "
                                 "\"unlimited\""
                               : "must be a non-negative integer");
  *out = (uint64_t)json_integer_value(v);
  return true;
}

static int lookup(const char* s, const char* (*name)(int), int first,
                  int last) {
  for (int i = first; i <= last; i++)
    if (strcmp(name(i), s) == 0)
      return i;
  return -1;
}

static const char* mount_name(int i) {
  return maelys__executor_mount_kind_name((maelys_executor_mount_kind_t)i);
}
static const char* missing_name(int i) {
  return maelys__executor_missing_name((maelys_executor_missing_t)i);
}
static const char* access_name(int i) {
  return maelys__executor_access_name((maelys_executor_access_t)i);
}
static const char* scope_name(int i) {
  return maelys__executor_scope_name((maelys_executor_scope_t)i);
}
static const char* network_name(int i) {
  return maelys__executor_network_name((maelys_executor_network_t)i);
}
static const char* root_name(int i) {
  return maelys__executor_root_name((maelys_executor_root_t)i);
}

/* Takes a setter's result; on failure prefixes its diagnostic with the JSON
 * path. The diagnostic is passed by address: it is read here, after the
 * setter ran, whatever order the caller's arguments were evaluated in. */
static bool apply(reader_t* rd, const char* path, maelys_executor_result_t r,
                  char** error) {
  if (r == MAELYS_EXECUTOR_OK)
    return true;
  rd->result = maelys__executor_fail(rd->out_error, r, "plan JSON %s: %s", path,
                                     *error ? *error : "invalid");
  free(*error);
  *error = NULL;
  return false;
}

static bool read_mount(reader_t* rd, maelys_executor_plan_t* plan,
                       const char* path, json_t* o) {
  static const char* const allowed[] = {
      "kind", "source", "target", "destination", "missing", "size", NULL};
  if (!json_is_object(o))
    return bad(rd, path, "must be an object");
  if (!only_members(rd, path, o, allowed))
    return false;
  const char* kind_s = get_string(rd, path, o, "kind", true);
  if (kind_s == NULL)
    return false;
  int kind = lookup(kind_s, mount_name, MAELYS_EXECUTOR_MOUNT_RO_BIND,
                    MAELYS_EXECUTOR_MOUNT_DIR);
  if (kind < 0)
    return bad(rd, path,
               "kind must be ro-bind, bind, tmpfs, proc, dev, symlink or dir");
  const char* dest = get_string(rd, path, o, "destination", true);
  if (dest == NULL)
    return false;
  bool is_bind = kind == MAELYS_EXECUTOR_MOUNT_BIND ||
                 kind == MAELYS_EXECUTOR_MOUNT_RO_BIND;
  /* Members that do not belong to the kind are refused, not ignored. */
  if (!is_bind && json_object_get(o, "source"))
    return bad(rd, path, "source is only meaningful for ro-bind and bind");
  if (!is_bind && json_object_get(o, "missing"))
    return bad(rd, path, "missing is only meaningful for ro-bind and bind");
  if (kind != MAELYS_EXECUTOR_MOUNT_SYMLINK && json_object_get(o, "target"))
    return bad(rd, path, "target is only meaningful for symlink");
  if (kind != MAELYS_EXECUTOR_MOUNT_TMPFS && json_object_get(o, "size"))
    return bad(rd, path, "size is only meaningful for tmpfs");
  char* error = NULL;
  maelys_executor_result_t r;
  switch (kind) {
  case MAELYS_EXECUTOR_MOUNT_RO_BIND:
  case MAELYS_EXECUTOR_MOUNT_BIND: {
    const char* src = get_string(rd, path, o, "source", true);
    if (src == NULL)
      return false;
    const char* miss_s = get_string(rd, path, o, "missing", false);
    if (miss_s == NULL && rd->result != MAELYS_EXECUTOR_OK)
      return false;
    int miss = MAELYS_EXECUTOR_MISSING_FAIL;
    if (miss_s != NULL &&
        (miss = lookup(miss_s, missing_name, MAELYS_EXECUTOR_MISSING_FAIL,
                       MAELYS_EXECUTOR_MISSING_CREATE)) < 0)
      return bad(rd, path, "missing must be fail, skip or create");
    r = maelys_executor_plan_add_bind(plan, src, dest,
                                      kind == MAELYS_EXECUTOR_MOUNT_BIND,
                                      (maelys_executor_missing_t)miss, &error);
    break;
  }
  case MAELYS_EXECUTOR_MOUNT_TMPFS: {
    json_t* sz = json_object_get(o, "size");
    uint64_t size = 0;
    if (sz == NULL)
      return bad(rd, path, "size is required for tmpfs");
    if (!get_size(rd, path, sz, false, &size))
      return false;
    r = maelys_executor_plan_add_tmpfs(plan, dest, size, &error);
    break;
  }
  case MAELYS_EXECUTOR_MOUNT_SYMLINK: {
    const char* target = get_string(rd, path, o, "target", true);
    if (target == NULL)
      return false;
    r = maelys_executor_plan_add_symlink(plan, target, dest, &error);
    break;
  }
  case MAELYS_EXECUTOR_MOUNT_PROC:
    r = maelys_executor_plan_add_proc(plan, dest, &error);
    break;
  case MAELYS_EXECUTOR_MOUNT_DEV:
    r = maelys_executor_plan_add_dev(plan, dest, &error);
    break;
  default:
    r = maelys_executor_plan_add_dir(plan, dest, &error);
    break;
  }
  return apply(rd, path, r, &error);
}

static bool read_rule(reader_t* rd, maelys_executor_plan_t* plan,
                      const char* path, json_t* o) {
  static const char* const allowed[] = {"path", "access", "scope", NULL};
  if (!json_is_object(o))
    return bad(rd, path, "must be an object");
  if (!only_members(rd, path, o, allowed))
    return false;
  const char* p = get_string(rd, path, o, "path", true);
  const char* a = p ? get_string(rd, path, o, "access", true) : NULL;
  const char* s = a ? get_string(rd, path, o, "scope", true) : NULL;
  if (s == NULL)
    return false;
  int access = lookup(a, access_name, MAELYS_EXECUTOR_ACCESS_READ,
                      MAELYS_EXECUTOR_ACCESS_PROTECT_CREATE);
  if (access < 0)
    return bad(rd, path, "access must be read, write, deny or protect-create");
  int scope = lookup(s, scope_name, MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY,
                     MAELYS_EXECUTOR_SCOPE_LITERAL_DIRECTORY);
  if (scope < 0)
    return bad(rd, path,
               "scope must be recursive-directory, literal-file or "
               "literal-directory");
  char* error = NULL;
  return apply(
      rd, path,
      maelys_executor_plan_add_rule(plan, p, (maelys_executor_access_t)access,
                                    (maelys_executor_scope_t)scope, &error),
      &error);
}

static bool read_network(reader_t* rd, maelys_executor_plan_t* plan,
                         json_t* o) {
  static const char* const allowed[] = {"mode", "destinations", "mediator",
                                        NULL};
  const char* path = "$.network";
  if (!json_is_object(o))
    return bad(rd, path, "must be an object");
  if (!only_members(rd, path, o, allowed))
    return false;
  const char* mode_s = get_string(rd, path, o, "mode", true);
  if (mode_s == NULL)
    return false;
  int mode = lookup(mode_s, network_name, MAELYS_EXECUTOR_NETWORK_INHERIT,
                    MAELYS_EXECUTOR_NETWORK_EXTERNAL_CHANNEL);
  if (mode < 0)
    return bad(rd, "$.network.mode",
               "must be inherit, none, mediated or external-channel");
  char* error = NULL;
  if (!apply(rd, path,
             maelys_executor_plan_set_network(
                 plan, (maelys_executor_network_t)mode, &error),
             &error))
    return false;
  json_t* dests = json_object_get(o, "destinations");
  if (dests != NULL) {
    if (!json_is_array(dests))
      return bad(rd, "$.network.destinations", "must be an array");
    size_t i;
    json_t* d;
    json_array_foreach(dests, i, d) {
      char p[64];
      snprintf(p, sizeof p, "$.network.destinations[%zu]", i);
      static const char* const dallowed[] = {"host", "port", NULL};
      if (!json_is_object(d))
        return bad(rd, p, "must be an object");
      if (!only_members(rd, p, d, dallowed))
        return false;
      const char* host = get_string(rd, p, d, "host", true);
      if (host == NULL)
        return false;
      json_t* port = json_object_get(d, "port");
      if (!json_is_integer(port) || json_integer_value(port) < 1 ||
          json_integer_value(port) > 65535)
        return bad(rd, p, "port must be an integer in 1..65535");
      error = NULL;
      if (!apply(rd, p,
                 maelys_executor_plan_add_network_destination(
                     plan, host, (unsigned)json_integer_value(port), &error),
                 &error))
        return false;
    }
  }
  const char* mediator = get_string(rd, path, o, "mediator", false);
  if (mediator == NULL)
    return rd->result == MAELYS_EXECUTOR_OK;
  error = NULL;
  return apply(
      rd, "$.network.mediator",
      maelys_executor_plan_set_network_mediator(plan, mediator, &error),
      &error);
}

static bool read_root(reader_t* rd, maelys_executor_plan_t* plan, json_t* o) {
  static const char* const allowed[] = {"disposition", "scratch", NULL};
  const char* path = "$.root";
  if (!json_is_object(o))
    return bad(rd, path, "must be an object");
  if (!only_members(rd, path, o, allowed))
    return false;
  const char* d = get_string(rd, path, o, "disposition", true);
  if (d == NULL)
    return false;
  int root = lookup(d, root_name, MAELYS_EXECUTOR_ROOT_HOST,
                    MAELYS_EXECUTOR_ROOT_EPHEMERAL_WRITE);
  if (root < 0)
    return bad(rd, "$.root.disposition",
               "must be host, readonly or ephemeral-write");
  uint64_t scratch = 0;
  json_t* s = json_object_get(o, "scratch");
  if (s != NULL && !get_size(rd, "$.root.scratch", s, false, &scratch))
    return false;
  char* error = NULL;
  return apply(rd, path,
               maelys_executor_plan_set_root(plan, (maelys_executor_root_t)root,
                                             scratch, &error),
               &error);
}

static bool read_rlimits(reader_t* rd, maelys_executor_plan_t* plan,
                         json_t* o) {
  if (!json_is_object(o))
    return bad(rd, "$.rlimits", "must be an object");
  const char* key;
  json_t* v;
  json_object_foreach(o, key, v) {
    char p[96];
    snprintf(p, sizeof p, "$.rlimits.%.64s", key);
    int res = -1;
    for (int i = 1; i < MAELYS__RLIMIT_COUNT; i++)
      if (strcmp(maelys__executor_rlimit_names[i], key) == 0)
        res = i;
    if (res < 0)
      return bad(rd, p,
                 "unknown resource (cpu, fsize, data, stack, core, nofile, "
                 "as, nproc, memlock)");
    static const char* const allowed[] = {"soft", "hard", NULL};
    if (!json_is_object(v))
      return bad(rd, p, "must be an object with soft and hard");
    if (!only_members(rd, p, v, allowed))
      return false;
    json_t* sv = json_object_get(v, "soft");
    json_t* hv = json_object_get(v, "hard");
    if (sv == NULL || hv == NULL)
      return bad(rd, p, "needs both soft and hard");
    uint64_t soft, hard;
    if (!get_size(rd, p, sv, true, &soft) || !get_size(rd, p, hv, true, &hard))
      return false;
    char* error = NULL;
    if (!apply(rd, p,
               maelys_executor_plan_set_rlimit(
                   plan, (maelys_executor_rlimit_t)res, soft, hard, &error),
               &error))
      return false;
  }
  return true;
}

static bool read_limits(reader_t* rd, maelys_executor_plan_t* plan, json_t* o) {
  static const char* const allowed[] = {"tasks", "memory", NULL};
  if (!json_is_object(o))
    return bad(rd, "$.limits", "must be an object");
  if (!only_members(rd, "$.limits", o, allowed))
    return false;
  for (int i = 1; i < MAELYS__LIMIT_COUNT; i++) {
    const char* name = maelys__executor_limit_name((maelys_executor_limit_t)i);
    json_t* v = json_object_get(o, name);
    if (v == NULL)
      continue;
    char p[48];
    snprintf(p, sizeof p, "$.limits.%s", name);
    uint64_t value = 0;
    if (!get_size(rd, p, v, false, &value))
      return false;
    char* error = NULL;
    if (!apply(rd, p,
               maelys_executor_plan_set_limit(plan, (maelys_executor_limit_t)i,
                                              value, &error),
               &error))
      return false;
  }
  return true;
}

static bool read_document(reader_t* rd, maelys_executor_plan_t* plan,
                          json_t* doc, const char** out_digest) {
  static const char* const allowed[] = {"format",
                                        "mounts",
                                        "rules",
                                        "network",
                                        "root",
                                        "required_capabilities",
                                        "process_tree_required",
                                        "rlimits",
                                        "limits",
                                        "decision_digest",
                                        "channels",
                                        "digest",
                                        NULL};
  if (!json_is_object(doc))
    return bad(rd, "$", "must be an object");
  if (!only_members(rd, "$", doc, allowed))
    return false;
  const char* format = get_string(rd, "$", doc, "format", true);
  if (format == NULL)
    return false;
  if (strcmp(format, PLAN_FORMAT) != 0)
    return bad(rd, "$.format", "must be \"" PLAN_FORMAT "\"");
  json_t* v;
  size_t i;
  json_t* item;
  if ((v = json_object_get(doc, "mounts")) != NULL) {
    if (!json_is_array(v))
      return bad(rd, "$.mounts", "must be an array");
    json_array_foreach(v, i, item) {
      char p[48];
      snprintf(p, sizeof p, "$.mounts[%zu]", i);
      if (!read_mount(rd, plan, p, item))
        return false;
    }
  }
  if ((v = json_object_get(doc, "rules")) != NULL) {
    if (!json_is_array(v))
      return bad(rd, "$.rules", "must be an array");
    json_array_foreach(v, i, item) {
      char p[48];
      snprintf(p, sizeof p, "$.rules[%zu]", i);
      if (!read_rule(rd, plan, p, item))
        return false;
    }
  }
  if ((v = json_object_get(doc, "network")) != NULL &&
      !read_network(rd, plan, v))
    return false;
  if ((v = json_object_get(doc, "root")) != NULL && !read_root(rd, plan, v))
    return false;
  if ((v = json_object_get(doc, "required_capabilities")) != NULL) {
    if (!json_is_array(v))
      return bad(rd, "$.required_capabilities", "must be an array");
    uint64_t mask = 0;
    json_array_foreach(v, i, item) {
      char p[64];
      snprintf(p, sizeof p, "$.required_capabilities[%zu]", i);
      uint64_t bit =
          json_is_string(item)
              ? maelys_executor_capability_from_name(json_string_value(item))
              : 0;
      if (bit == 0)
        return bad(rd, p, "is not a known capability name");
      mask |= bit;
    }
    char* error = NULL;
    if (!apply(rd, "$.required_capabilities",
               maelys_executor_plan_require_capabilities(plan, mask, &error),
               &error))
      return false;
  }
  if ((v = json_object_get(doc, "process_tree_required")) != NULL) {
    if (!json_is_boolean(v))
      return bad(rd, "$.process_tree_required", "must be a boolean");
    char* error = NULL;
    if (!apply(rd, "$.process_tree_required",
               maelys_executor_plan_set_process_tree_required(
                   plan, json_is_true(v), &error),
               &error))
      return false;
  }
  if ((v = json_object_get(doc, "rlimits")) != NULL &&
      !read_rlimits(rd, plan, v))
    return false;
  if ((v = json_object_get(doc, "limits")) != NULL && !read_limits(rd, plan, v))
    return false;
  const char* dd = get_string(rd, "$", doc, "decision_digest", false);
  if (dd == NULL && rd->result != MAELYS_EXECUTOR_OK)
    return false;
  if (dd != NULL) {
    char* error = NULL;
    if (!apply(rd, "$.decision_digest",
               maelys_executor_plan_set_decision_digest(plan, dd, &error),
               &error))
      return false;
  }
  if ((v = json_object_get(doc, "channels")) != NULL) {
    if (!json_is_array(v))
      return bad(rd, "$.channels", "must be an array");
    json_array_foreach(v, i, item) {
      char p[48];
      snprintf(p, sizeof p, "$.channels[%zu]", i);
      static const char* const callowed[] = {"fd", "name", NULL};
      if (!json_is_object(item))
        return bad(rd, p, "must be an object");
      if (!only_members(rd, p, item, callowed))
        return false;
      json_t* fd = json_object_get(item, "fd");
      const char* name = get_string(rd, p, item, "name", true);
      if (name == NULL)
        return false;
      /* Range-checked before the cast: 4294967300 must never become fd 4. */
      if (!json_is_integer(fd) || json_integer_value(fd) < 0 ||
          json_integer_value(fd) > INT_MAX) {
        char fp[64];
        snprintf(fp, sizeof fp, "%s.fd", p);
        return bad(rd, fp, "must be an integer in 0..2147483647");
      }
      char* error = NULL;
      if (!apply(rd, p,
                 maelys_executor_plan_add_channel(
                     plan, (int)json_integer_value(fd), name, &error),
                 &error))
        return false;
    }
  }
  *out_digest = get_string(rd, "$", doc, "digest", false);
  return rd->result == MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_executor_plan_from_json(const char* json, size_t length,
                               maelys_executor_plan_t** out_plan,
                               char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (out_plan == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "out_plan is NULL");
  *out_plan = NULL;
  if (json == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "json is NULL");
  json_error_t jerr;
  json_t* doc = json_loadb(json, length, JSON_REJECT_DUPLICATES, &jerr);
  if (doc == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "plan JSON is malformed at line %d column "
                                 "%d: %s",
                                 jerr.line, jerr.column, jerr.text);
  maelys_executor_plan_t* plan = NULL;
  maelys_executor_result_t r = maelys_executor_plan_create(&plan, out_error);
  if (r != MAELYS_EXECUTOR_OK) {
    json_decref(doc);
    return r;
  }
  reader_t rd = {out_error, MAELYS_EXECUTOR_OK};
  const char* expected = NULL;
  if (!read_document(&rd, plan, doc, &expected)) {
    json_decref(doc);
    maelys_executor_plan_destroy(plan);
    return rd.result != MAELYS_EXECUTOR_OK ? rd.result
                                           : MAELYS_EXECUTOR_ERR_ARGUMENT;
  }
  if (expected != NULL) {
    /* A document that carries its digest is verified: it is returned sealed
     * only when every rule hashes to exactly that digest. */
    r = maelys_executor_plan_seal(plan, out_error);
    if (r == MAELYS_EXECUTOR_OK && strcmp(plan->digest, expected) != 0)
      r = maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                "plan JSON $.digest is %s but the rules hash "
                                "to %s: the document was altered",
                                expected, plan->digest);
    if (r != MAELYS_EXECUTOR_OK) {
      json_decref(doc);
      maelys_executor_plan_destroy(plan);
      return r;
    }
  }
  json_decref(doc);
  *out_plan = plan;
  return MAELYS_EXECUTOR_OK;
}
