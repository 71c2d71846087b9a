/*
 * --policy FILE.mir: a plan compiled by libmaelys-sandbox-policy from
 * canonical MIR and lowered by the Warden Policy adapter (adapters/
 * warden-policy), with the five-step capability handshake of seeds/001:
 * the backend checked here is the one set on the request (step 5).
 *
 * The MIR file is an authority file: read once, from one descriptor, after
 * the same checks as --plan (nobody but its owner could have written it or
 * a directory above it; warden_check_protected then refuses a plan that
 * makes it writable). The bytes go to the adapter through a sealed memfd, so
 * what was checked is what is compiled.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "warden.h"

#ifdef MAELYS_WARDEN_HAVE_POLICY
#include "maelys/warden_policy.h"
#include "maelys/warden_policy_adapter.h"

/* The minimal-runtime roots the HostContext offers the policy: those that
 * exist here (a merged-/usr link is recreated as a link by the adapter). */
static const char* const runtime_roots[] = {
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};

#define POLICY_TMP_SIZE (UINT64_C(256) << 20)

static int memfd_with(const char* data, size_t len) {
  int fd =
      memfd_create("maelys-warden-policy", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0)
    return -1;
  size_t off = 0;
  while (off < len) {
    ssize_t n = write(fd, data + off, len - off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      close(fd);
      return -1;
    }
    off += (size_t)n;
  }
  if (fcntl(fd, F_ADD_SEALS,
            F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) != 0 ||
      lseek(fd, 0, SEEK_SET) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int warden_policy_plan(warden_policy_t* policy, maelys_executor_t* ex,
                       const char* backend, maelys_executor_plan_t** out,
                       cli_error_t* err) {
  char* data = NULL;
  size_t len = 0;
  if (warden_read_authority("--policy", policy->policy_file,
                            MAELYS_MIR_MAX_BYTES, &data, &len,
                            policy->plan_path, err) != 0)
    return -1;
  int fd = memfd_with(data, len);
  free(data);
  if (fd < 0)
    return cli_fail(err, "IO_FAILED", NULL,
                    "--policy '%s': copying it to a sealed memory file: %s",
                    policy->policy_file, strerror(errno));
  char* error = NULL;
  maelys_warden_policy_handshake_t* h = NULL;
  maelys_executor_result_t r =
      maelys_warden_policy_handshake_begin(ex, backend, &h, &error);
  if (r != MAELYS_EXECUTOR_OK) {
    close(fd);
    cli_fail(err, "POLICY_FAILED",
             "'maelys-warden probe' shows what each backend proved.",
             "--policy: the capability handshake with backend %s: %s", backend,
             error ? error : maelys_executor_result_name(r));
    maelys_executor_error_free(error);
    return -1;
  }
  const char* roots[sizeof runtime_roots / sizeof runtime_roots[0]];
  size_t n = 0;
  struct stat st;
  for (size_t i = 0; i < sizeof runtime_roots / sizeof runtime_roots[0]; i++)
    if (lstat(runtime_roots[i], &st) == 0)
      roots[n++] = runtime_roots[i];
  maelys_warden_policy_host_t host = {
      .workspace = policy->workspace,
      .temp = policy->policy_temp[0] ? policy->policy_temp : NULL,
      .minimal_runtime_roots = roots,
      .minimal_runtime_root_count = n,
      .mediator_id = policy->mediator};
  /* The trusted run specification: what the policy does not carry. */
  const maelys_warden_policy_mount_t mounts[] = {
      {MAELYS_WARDEN_POLICY_MOUNT_PROC, "/proc", NULL, 0},
      {MAELYS_WARDEN_POLICY_MOUNT_DEV, "/dev", NULL, 0},
      {MAELYS_WARDEN_POLICY_MOUNT_TMPFS, "/tmp", NULL, POLICY_TMP_SIZE},
      {MAELYS_WARDEN_POLICY_MOUNT_DIR, WARDEN_HOME, NULL, 0},
  };
  maelys_warden_policy_options_t run = {.scratch_bytes = 0,
                                        .process_tree_required = 1,
                                        .mounts = mounts,
                                        .mount_count =
                                            sizeof mounts / sizeof mounts[0]};
  r = maelys_warden_policy_plan_from_fd(fd, h, &host, &run, out, &error);
  close(fd);
  if (r != MAELYS_EXECUTOR_OK) {
    cli_fail(err,
             r == MAELYS_EXECUTOR_ERR_CAPABILITY ||
                     r == MAELYS_EXECUTOR_ERR_UNSUPPORTED
                 ? "POLICY_FAILED"
                 : "VALIDATION_FAILED",
             "Check the policy with the library that compiled it; "
             "'maelys-warden probe' shows what each backend proved.",
             "--policy '%s': %s", policy->policy_file,
             error ? error : maelys_executor_result_name(r));
    maelys_executor_error_free(error);
    maelys_warden_policy_handshake_destroy(h);
    return -1;
  }
  policy->handshake = h;
  policy->handshake_backend = backend;
  return 0;
}

int warden_policy_finish(warden_policy_t* policy, maelys_executor_t* ex,
                         const char* backend,
                         const maelys_executor_plan_t* plan,
                         maelys_execution_request_t* req, cli_error_t* err) {
  char* error = NULL;
  maelys_executor_result_t r = maelys_warden_policy_handshake_finish(
      policy->handshake, ex, backend, plan, req, &error);
  if (r == MAELYS_EXECUTOR_OK)
    return 0;
  cli_fail(err, "POLICY_FAILED", NULL, "--policy: %s",
           error ? error : maelys_executor_result_name(r));
  maelys_executor_error_free(error);
  return -1;
}

void warden_policy_release(warden_policy_t* policy) {
  maelys_warden_policy_handshake_destroy(policy->handshake);
  policy->handshake = NULL;
}

#else

static const char* const missing =
    "this maelys-warden was built without the Warden Policy adapter "
    "(libmaelys-sandbox-policy was not found at configure time)";

int warden_policy_plan(warden_policy_t* policy, maelys_executor_t* ex,
                       const char* backend, maelys_executor_plan_t** out,
                       cli_error_t* err) {
  (void)ex, (void)backend, (void)out;
  return cli_fail(err, "UNSUPPORTED",
                  "Rebuild with -DMAELYS_SANDBOX_POLICY_DIR=PREFIX (an "
                  "install of libmaelys-sandbox-policy v0.4.x), or use --plan.",
                  "--policy '%s': %s", policy->policy_file, missing);
}

int warden_policy_finish(warden_policy_t* policy, maelys_executor_t* ex,
                         const char* backend,
                         const maelys_executor_plan_t* plan,
                         maelys_execution_request_t* req, cli_error_t* err) {
  (void)policy, (void)ex, (void)backend, (void)plan, (void)req;
  return cli_fail(err, "UNSUPPORTED", NULL, "--policy: %s", missing);
}

void warden_policy_release(warden_policy_t* policy) {
  (void)policy;
}

#endif
