/*
 * The services backend.h gives every backend, in this tree or out of it:
 * diagnostics, string and array helpers, the no-follow open and whether the
 * host is root. Thin wrappers over the core's own helpers, so that a backend
 * and the core format, allocate and resolve alike.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "proc.h"

maelys_executor_result_t maelys_backend_fail(char** out_error,
                                             maelys_executor_result_t result,
                                             const char* format, ...) {
  if (out_error != NULL && *out_error == NULL && format != NULL) {
    va_list ap;
    va_start(ap, format);
    *out_error = maelys__executor_vasprintf(format, ap);
    va_end(ap);
  }
  return result;
}

char* maelys_backend_asprintf(const char* format, ...) {
  va_list ap;
  va_start(ap, format);
  char* s = maelys__executor_vasprintf(format, ap);
  va_end(ap);
  return s;
}

char* maelys_backend_vasprintf(const char* format, va_list ap) {
  return maelys__executor_vasprintf(format, ap);
}

int maelys_backend_reserve(void** items, size_t* capacity, size_t elem_size,
                           size_t need) {
  return maelys__executor_reserve(items, capacity, elem_size, need);
}

int maelys_backend_path_is_clean(const char* path) {
  return path != NULL && maelys__executor_path_is_clean(path);
}

/* openat2(RESOLVE_NO_SYMLINKS) with O_PATH | O_NOFOLLOW opens a final
 * symbolic link as itself rather than refusing it (and the fallback walk
 * refuses it): the SDK answers -ELOOP for both, so a backend never mistakes
 * the link for what it names. */
int maelys_backend_open_nofollow(const char* path) {
  if (path == NULL)
    return -EINVAL;
  int fd = maelys__executor_open_nofollow(path);
  struct stat st;
  if (fd >= 0 && fstat(fd, &st) == 0 && S_ISLNK(st.st_mode)) {
    close(fd);
    return -ELOOP;
  }
  return fd;
}

int maelys_backend_open_dir_nofollow(const char* path) {
  int fd = maelys_backend_open_nofollow(path);
  if (fd < 0)
    return fd;
  /* An O_PATH descriptor serves *at() calls only: reopen the directory. */
  int dir = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int e = errno;
  close(fd);
  return dir >= 0 ? dir : -e;
}

int maelys_backend_host_root(void) {
  return maelys__proc_host_root();
}
