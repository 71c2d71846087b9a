/*
 * Opening a path without following any symbolic link in it. Shared by the
 * library (the bubblewrap backend resolves mount sources with it) and by the
 * sandbox helper (which resolves them again before staging), so that a
 * symlink swapped into a source can neither redirect nor widen a mount.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/openat2.h>

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

int maelys__executor_open_nofollow(const char* path);

/* openat2(RESOLVE_NO_SYMLINKS), or, where that call is missing (kernels
 * before 5.6, valgrind), a walk from / that opens each component with
 * O_NOFOLLOW and refuses one that is a link. A descriptor, or -errno (-ELOOP
 * for a symbolic link). */
int maelys__executor_open_nofollow(const char* path) {
  struct open_how how;
  memset(&how, 0, sizeof how);
  how.flags = O_PATH | O_CLOEXEC | O_NOFOLLOW;
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
  if (fd >= 0)
    return (int)fd;
  if (errno != ENOSYS)
    return -errno;
  if (path[0] != '/')
    return -EINVAL;
  int dir = open("/", O_PATH | O_CLOEXEC | O_DIRECTORY);
  if (dir < 0)
    return -errno;
  const char* p = path;
  for (;;) {
    while (*p == '/')
      p++;
    if (*p == '\0')
      return dir;
    char name[256];
    size_t n = 0;
    while (p[n] != '/' && p[n] != '\0') {
      if (n + 1 >= sizeof name) {
        close(dir);
        return -ENAMETOOLONG;
      }
      name[n] = p[n];
      n++;
    }
    name[n] = '\0';
    p += n;
    int next = openat(dir, name, O_PATH | O_CLOEXEC | O_NOFOLLOW);
    int err = errno;
    close(dir);
    if (next < 0)
      return -err;
    struct stat st;
    if (fstat(next, &st) != 0 || S_ISLNK(st.st_mode)) {
      close(next);
      return -ELOOP;
    }
    dir = next;
  }
}
