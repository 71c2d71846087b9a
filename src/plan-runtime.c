/*
 * maelys_executor_plan_add_minimal_runtime: the host's runtime, read-only, at
 * the same paths (see executor.h for the list and why).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

static const char* const runtime_paths[] = {
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/localtime",
    "/etc/hosts",
};

/* One runtime path as it is on the host: a symlink stays a symlink with the
 * same text, a directory or regular file is bound read-only, anything else
 * (absent, a device, a socket) is left out. */
static maelys_executor_result_t add_one(maelys_executor_plan_t* plan,
                                        const char* path, char** out_error) {
  struct stat st;
  if (lstat(path, &st) != 0)
    return MAELYS_EXECUTOR_OK;
  if (S_ISLNK(st.st_mode)) {
    char target[PATH_MAX];
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0)
      return MAELYS_EXECUTOR_OK;
    target[n] = '\0';
    return maelys_executor_plan_add_symlink(plan, target, path, out_error);
  }
  if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))
    return maelys_executor_plan_add_bind(
        plan, path, path, 0, MAELYS_EXECUTOR_MISSING_SKIP, out_error);
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_executor_plan_add_minimal_runtime(maelys_executor_plan_t* plan,
                                         char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (plan == NULL)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "maelys_executor_plan_add_minimal_runtime: plan is NULL");
  if (plan->sealed)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_SEALED,
        "maelys_executor_plan_add_minimal_runtime: the plan is sealed and "
        "can no longer change");
  /* All or nothing: a failure (a destination the plan already has, the
   * mount limit) removes what this call added. */
  size_t before = plan->mount_count;
  maelys_executor_result_t r = MAELYS_EXECUTOR_OK;
  for (size_t i = 0; r == MAELYS_EXECUTOR_OK &&
                     i < sizeof runtime_paths / sizeof runtime_paths[0];
       i++)
    r = add_one(plan, runtime_paths[i], out_error);
  if (r != MAELYS_EXECUTOR_OK)
    while (plan->mount_count > before) {
      maelys__mount_t* m = &plan->mounts[--plan->mount_count];
      free(m->source);
      free(m->destination);
    }
  return r;
}
