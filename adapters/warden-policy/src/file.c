/*
 * Steps 3 and 4 of the handshake from a canonical MIR file, for a command
 * line (maelys-warden run/plan --policy): decode, build the trusted
 * HostContext, compile with the handshake's capabilities, lower, seal.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "maelys/warden_policy_adapter.h"

#include "glue-internal.h"
#include "internal.h"

/* Reads `fd` from its offset to its end, at most MAELYS_MIR_MAX_BYTES. */
static maelys_executor_result_t read_all(int fd, uint8_t** out, size_t* out_n,
                                         char** out_error) {
  *out = NULL;
  *out_n = 0;
  struct stat st;
  if (fstat(fd, &st) != 0)
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                      "the MIR file: %s", strerror(errno));
  if (!S_ISREG(st.st_mode))
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "the MIR file is not a regular file");
  size_t cap = MAELYS_MIR_MAX_BYTES + 1;
  uint8_t* buf = malloc(cap);
  if (buf == NULL)
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                      "out of memory");
  size_t n = 0;
  /* One byte more than the limit tells a file at the limit from a longer
   * one, whatever fstat said (the file may grow while it is read). */
  while (n < cap) {
    ssize_t got = read(fd, buf + n, cap - n);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      int err = errno;
      free(buf);
      return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                        "reading the MIR file: %s",
                                        strerror(err));
    }
    if (got == 0)
      break;
    n += (size_t)got;
  }
  if (n > MAELYS_MIR_MAX_BYTES) {
    free(buf);
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "the MIR file exceeds %u bytes",
                                      MAELYS_MIR_MAX_BYTES);
  }
  *out = buf;
  *out_n = n;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t maelys_warden_policy_plan_from_fd(
    int fd, const maelys_warden_policy_handshake_t* handshake,
    const maelys_warden_policy_host_t* host,
    const maelys_warden_policy_options_t* run,
    maelys_executor_plan_t** out_sealed_plan, char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (out_sealed_plan == NULL)
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "out_sealed_plan is NULL");
  *out_sealed_plan = NULL;
  if (fd < 0 || handshake == NULL || host == NULL)
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "a descriptor, the handshake and the "
                                      "host roots are required");
  uint8_t* bytes = NULL;
  size_t n = 0;
  maelys_executor_result_t r = read_all(fd, &bytes, &n, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    return r;
  maelys_mir_t* mir = NULL;
  maelys_sandbox_policy_host_t* context = NULL;
  maelys_sandbox_policy_plan_t* compiled = NULL;
  char* e = NULL;
  /* Only canonical MIR v3 is accepted: decode refuses any other encoding of
   * the same decision, so the digest names exactly these bytes. */
  maelys_mir_result_t lr = maelys_mir_decode(bytes, n, &mir, &e);
  free(bytes);
  if (lr != MAELYS_MIR_OK) {
    r = maelys__warden_policy_library_fail(out_error, lr, e,
                                           "the policy is not canonical MIR "
                                           "v%u",
                                           MAELYS_MIR_FORMAT_VERSION);
    goto done;
  }
  r = maelys_warden_policy_host_context_create(host, &context, out_error);
  if (r != MAELYS_EXECUTOR_OK)
    goto done;
  maelys_sandbox_policy_capabilities_t available = 0;
  r = maelys_warden_policy_library_capabilities(
      maelys_warden_policy_handshake_capabilities(handshake), &available,
      out_error);
  if (r != MAELYS_EXECUTOR_OK)
    goto done;
  lr = maelys_sandbox_policy_compile(mir, context, available, &compiled, &e);
  if (lr != MAELYS_MIR_OK) {
    r = maelys__warden_policy_library_fail(
        out_error, lr, e, "compiling the policy for backend '%s'",
        maelys_warden_policy_handshake_backend(handshake));
    goto done;
  }
  maelys_warden_sandbox_policy_options_t options = {run, mir, host};
  r = maelys_warden_plan_from_sandbox_policy(compiled, &options,
                                             out_sealed_plan, out_error);
done:
  maelys_sandbox_policy_plan_destroy(compiled);
  maelys_sandbox_policy_host_destroy(context);
  maelys_mir_destroy(mir);
  return r;
}

maelys_executor_result_t maelys_warden_policy_plan_from_file(
    const char* mir_path, const maelys_warden_policy_handshake_t* handshake,
    const maelys_warden_policy_host_t* host,
    const maelys_warden_policy_options_t* run,
    maelys_executor_plan_t** out_sealed_plan, char** out_error) {
  if (out_error != NULL && *out_error != NULL)
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  if (out_sealed_plan == NULL)
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "out_sealed_plan is NULL");
  *out_sealed_plan = NULL;
  if (mir_path == NULL || mir_path[0] == '\0')
    return maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                      "the MIR path is required");
  /* O_NONBLOCK: opening a FIFO planted at the path must not block; it is
   * then refused as not a regular file. */
  int fd =
      open(mir_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP)
      return maelys__warden_policy_fail(
          out_error, MAELYS_EXECUTOR_ERR_DENIED,
          "policy file '%s' is a symbolic link: name the file itself",
          mir_path);
    return maelys__warden_policy_fail(
        out_error,
        err == ENOENT ? MAELYS_EXECUTOR_ERR_NOT_FOUND : MAELYS_EXECUTOR_ERR_IO,
        "policy file '%s': %s", mir_path, strerror(err));
  }
  struct stat st;
  maelys_executor_result_t r = MAELYS_EXECUTOR_OK;
  if (fstat(fd, &st) != 0)
    r = maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_IO,
                                   "policy file '%s': %s", mir_path,
                                   strerror(errno));
  else if (!S_ISREG(st.st_mode))
    r = maelys__warden_policy_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                   "policy file '%s' is not a regular file",
                                   mir_path);
  else if (st.st_mode & (S_IWGRP | S_IWOTH))
    r = maelys__warden_policy_fail(
        out_error, MAELYS_EXECUTOR_ERR_DENIED,
        "policy file '%s' is writable by its group or others (mode %04o): "
        "authority never comes from a file others could have written",
        mir_path, (unsigned)(st.st_mode & 07777));
  if (r == MAELYS_EXECUTOR_OK) {
    char* inner = NULL;
    r = maelys_warden_policy_plan_from_fd(fd, handshake, host, run,
                                          out_sealed_plan, &inner);
    if (r != MAELYS_EXECUTOR_OK)
      maelys__warden_policy_fail(out_error, r, "policy file '%s': %s", mir_path,
                                 inner ? inner : "");
    free(inner);
  }
  close(fd);
  return r;
}
