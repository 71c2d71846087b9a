/*
 * Everything spawn checks before it creates anything (the request against
 * the plan and the backend's proved capabilities, the receipt directory and
 * chain, the host's system trees), and maelys_execution_check(), the same
 * checks as a dry run that launches nothing and leaves nothing behind.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "execution-internal.h"

/* Checks the request against the plan before anything is created. */
static maelys_executor_result_t
check_request(maelys_executor_t* executor, const maelys_executor_plan_t* plan,
              const maelys_execution_request_t* r,
              const maelys__backend_entry_t** out_backend, char** out_error) {
  if (!plan->sealed)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_STATE,
        "the plan is not sealed: seal it before spawning (invariant 3)");
  if (r->executable == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "the request names no executable");
  if (r->backend == NULL)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "the request names no backend: nothing is launched without one");
  if (strcmp(r->platform, "local") != 0)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                                 "platform token '%s' is refused", r->platform);
  const maelys__backend_entry_t* backend =
      maelys__executor_find_backend(executor, r->backend);
  if (backend == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_NOT_FOUND,
                                 "no backend named '%s' is registered",
                                 r->backend);
  uint64_t need = 0;
  maelys_executor_plan_required_capabilities(plan, &need, NULL);
  uint64_t missing = need & ~backend->proved;
  if (missing != 0) {
    /* Invariant 1: a capability that was not proved refuses the launch,
     * naming each missing capability and why the probe could not prove it. */
    char* names = maelys__executor_capability_list(missing);
    int bit = __builtin_ctzll(missing);
    const char* why = backend->reasons[bit] ? backend->reasons[bit]
                      : backend->diagnostic ? backend->diagnostic
                                            : "not offered by the backend";
    maelys_executor_result_t res = maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_CAPABILITY,
        "backend '%s' did not prove %s, which the plan requires (%s: %s)",
        r->backend, names ? names : "capabilities",
        maelys_executor_capability_name(UINT64_C(1) << bit), why);
    free(names);
    return res;
  }
  uint64_t scratch = 0;
  maelys_executor_root_t root = maelys_executor_plan_root(plan, &scratch);
  if (root == MAELYS_EXECUTOR_ROOT_EPHEMERAL_WRITE &&
      r->scratch_bytes != scratch)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "the request's scratch size (%llu bytes) does not equal the plan's "
        "(%llu bytes) (invariant 10)",
        (unsigned long long)r->scratch_bytes, (unsigned long long)scratch);
  if (root != MAELYS_EXECUTOR_ROOT_EPHEMERAL_WRITE && r->scratch_bytes != 0)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "the request asks for %llu bytes of scratch but the plan's root is "
        "%s, which has none",
        (unsigned long long)r->scratch_bytes, maelys__executor_root_name(root));
  /* Invariant 5: descriptors from 4 up are exactly the plan's channels. */
  for (size_t i = 0; i < r->channel_count; i++) {
    bool found = false;
    for (size_t k = 0; k < plan->channel_count; k++)
      if (plan->channels[k].child_fd == r->channels[i].child_fd)
        found = true;
    if (!found)
      return maelys__executor_fail(
          out_error, MAELYS_EXECUTOR_ERR_DENIED,
          "the request installs a channel at child fd %d that the plan does "
          "not authorise",
          r->channels[i].child_fd);
    if (r->io_mode == MAELYS_EXEC_IO_ISOLATED_DUPLEX &&
        r->channels[i].child_fd == r->protocol_fd)
      return maelys__executor_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "channel fd %d collides with the protocol descriptor",
          r->protocol_fd);
  }
  for (size_t k = 0; k < plan->channel_count; k++) {
    bool found = false;
    for (size_t i = 0; i < r->channel_count; i++)
      if (plan->channels[k].child_fd == r->channels[i].child_fd)
        found = true;
    if (!found)
      return maelys__executor_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "the plan's channel '%s' at fd %d has no descriptor in the request",
          plan->channels[k].name, plan->channels[k].child_fd);
  }
  *out_backend = backend;
  return MAELYS_EXECUTOR_OK;
}

/* Invariant 13: the receipt directory must lie outside every path the plan
 * makes writable. Both sides are compared after resolving symlinks. */
static maelys_executor_result_t
check_receipt_dir(const maelys_executor_plan_t* plan, int dirfd,
                  const char* dir, char** out_error) {
  char resolved_dir[PATH_MAX];
  /* Resolve the deepest existing ancestor, then append the rest. */
  char probe[PATH_MAX];
  snprintf(probe, sizeof probe, "%s", dir);
  char suffix[PATH_MAX] = "";
  while (realpath(probe, resolved_dir) == NULL) {
    char* slash = strrchr(probe, '/');
    if (slash == NULL || slash == probe) {
      snprintf(resolved_dir, sizeof resolved_dir, "/");
      break;
    }
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s%s", slash, suffix);
    snprintf(suffix, sizeof suffix, "%s", tmp);
    *slash = '\0';
  }
  char full[PATH_MAX * 2];
  snprintf(full, sizeof full, "%s%s",
           strcmp(resolved_dir, "/") == 0 && suffix[0] ? "" : resolved_dir,
           suffix);
  /* Once opened: the directory the descriptor holds, wherever a link swapped
   * in since pointed. */
  if (dirfd >= 0) {
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", dirfd);
    ssize_t n = readlink(self, full, sizeof full - 1);
    if (n <= 0)
      return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                   "the receipt directory '%s': %s", dir,
                                   n < 0 ? strerror(errno) : "no name");
    full[n] = '\0';
  }
  if (full[0] == '\0')
    snprintf(full, sizeof full, "/");
  const char* paths[2 * MAELYS_EXECUTOR_MAX_ENTRIES];
  size_t n = maelys__executor_plan_writable_paths(plan, paths,
                                                  MAELYS__ARRAY_SIZE(paths));
  for (size_t i = 0; i < n; i++) {
    char resolved[PATH_MAX];
    const char* w = realpath(paths[i], resolved) ? resolved : paths[i];
    if (maelys__executor_path_within(full, w) ||
        maelys__executor_path_within(dir, paths[i]))
      return maelys__executor_fail(
          out_error, MAELYS_EXECUTOR_ERR_DENIED,
          "receipt directory '%s' lies inside '%s', which the plan makes "
          "writable: the sandbox could forge its own receipt (invariant 13)",
          dir, paths[i]);
  }
  return MAELYS_EXECUTOR_OK;
}

/* A chained receipt must land in a file (a chain with a receipt only in
 * memory would have a hole no reader could explain), and a closed chain
 * takes no more receipts. The chain is created here, so that linking at the
 * end cannot fail for want of memory. */
static maelys_executor_result_t
check_receipt_chain(maelys_executor_t* executor,
                    const maelys_execution_request_t* request, bool dry_run,
                    char** out_error) {
  if (request->receipt_dir == NULL)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "the request joins receipt chain '%s' but has no receipt directory",
        request->receipt_chain);
  maelys__receipt_chain_t* c =
      maelys__executor_chain(executor, request->receipt_chain, !dry_run);
  if (c == NULL && dry_run)
    return MAELYS_EXECUTOR_OK; /* a new chain: spawn would create it */
  if (c == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  if (c->closed)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                                 "receipt chain '%s' was closed",
                                 request->receipt_chain);
  return MAELYS_EXECUTOR_OK;
}

/* The arguments of spawn and of its dry run. */
maelys_executor_result_t maelys__exec_check_arguments(
    maelys_executor_t* executor, const maelys_executor_plan_t* plan,
    const maelys_execution_request_t* request, char** out_error) {
  if (executor == NULL || plan == NULL || request == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "executor, plan and request are required");
  if (executor->destroyed)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                                 "the executor was destroyed");
  return MAELYS_EXECUTOR_OK;
}

/* Every check spawn makes before it creates anything. A dry run (`dry_run`)
 * makes them without side effects: the receipt directory is judged as
 * spawn's mkdir would find it (neither created nor opened), and a new
 * receipt chain is not recorded. Otherwise *out_receipt_dirfd is the
 * receipt directory opened (or -1 without one): the caller owns it. */
maelys_executor_result_t maelys__exec_preflight(
    maelys_executor_t* executor, const maelys_executor_plan_t* plan,
    const maelys_execution_request_t* request, bool dry_run,
    int* out_receipt_dirfd, const maelys__backend_entry_t** out_backend,
    char** out_error) {
  *out_receipt_dirfd = -1;
  maelys_executor_result_t res = MAELYS_EXECUTOR_OK;
  if (plan->sealed)
    res = maelys__executor_check_system_trees(plan, out_error);
  if (res == MAELYS_EXECUTOR_OK && plan->sealed && request->receipt_dir != NULL)
    res = check_receipt_dir(plan, -1, request->receipt_dir, out_error);
  /* A receipt that could not be written must never be silent: a directory
   * that cannot take one refuses the launch before anything runs. */
  int receipt_dirfd = -1;
  if (res == MAELYS_EXECUTOR_OK && plan->sealed &&
      request->receipt_dir != NULL) {
    int rr =
        dry_run
            ? maelys__executor_receipt_dir_could_be_ready(request->receipt_dir)
            : (receipt_dirfd =
                   maelys__executor_receipt_dir_open(request->receipt_dir));
    if (rr < 0) {
      receipt_dirfd = -1;
      res = maelys__executor_fail(
          out_error, MAELYS_EXECUTOR_ERR_IO,
          "the receipt directory '%s' cannot take a receipt: %s",
          request->receipt_dir, strerror(-rr));
    } else if (receipt_dirfd >= 0) {
      res = check_receipt_dir(plan, receipt_dirfd, request->receipt_dir,
                              out_error);
    }
  }
  if (res == MAELYS_EXECUTOR_OK)
    res = check_request(executor, plan, request, out_backend, out_error);
  if (res == MAELYS_EXECUTOR_OK && request->receipt_chain != NULL)
    res = check_receipt_chain(executor, request, dry_run, out_error);
  if (res != MAELYS_EXECUTOR_OK) {
    if (receipt_dirfd >= 0)
      close(receipt_dirfd);
    return res;
  }
  *out_receipt_dirfd = receipt_dirfd;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t maelys_execution_check(
    maelys_executor_t* executor, const maelys_executor_plan_t* plan,
    const maelys_execution_request_t* request, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  maelys_executor_result_t res =
      maelys__exec_check_arguments(executor, plan, request, out_error);
  if (res != MAELYS_EXECUTOR_OK)
    return res;
  const maelys__backend_entry_t* backend = NULL;
  int no_fd = -1; /* a dry run opens no receipt directory */
  res = maelys__exec_preflight(executor, plan, request, true, &no_fd, &backend,
                               out_error);
  if (res != MAELYS_EXECUTOR_OK)
    return res;
  /* The payload's descriptor numbers as build_layout lays them out, without
   * creating the pipes and sockets behind them: the backend's preparation
   * only needs which child descriptors exist. A terminal stdin is refused
   * exactly as build_layout refuses it. */
  uint64_t needed = 0;
  maelys_executor_plan_required_capabilities(plan, &needed, NULL);
  if (request->io_mode == MAELYS_EXEC_IO_INHERIT && needed != 0 && isatty(0))
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_DENIED,
        "the host's stdin is a terminal, and a sandbox never receives a "
        "terminal the host holds (invariant 21): use the captured io mode, "
        "or a pseudo-terminal session");
  int fds[MAELYS_BACKEND_PAYLOAD_FD_MAX];
  size_t count = 0;
  int limit = 3;
  for (int fd = 0; fd < 3; fd++)
    fds[count++] = fd;
  if (request->io_mode == MAELYS_EXEC_IO_ISOLATED_DUPLEX)
    fds[count++] = request->protocol_fd;
  for (size_t i = 0;
       i < request->channel_count && count < MAELYS__ARRAY_SIZE(fds); i++)
    fds[count++] = request->channels[i].child_fd;
  for (size_t i = 0; i < count; i++)
    if (fds[i] + 1 > limit)
      limit = fds[i] + 1;
  maelys_backend_launch_t launch;
  maelys__executor_launch_init(&launch, 0);
  launch.payload_fd_limit = limit;
  launch.payload_fds = fds;
  launch.payload_fd_count = count;
  res = backend->vtable->prepare(backend->state, backend->proved, plan, request,
                                 &launch, out_error);
  maelys__executor_launch_dispose(&launch);
  return res;
}
