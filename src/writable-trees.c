/*
 * What a writable tree may hold (invariants 17 and 18), checked before every
 * launch that makes it writable:
 *
 * - no set-id file and no file with capabilities. The kernel clears S_ISUID
 *   and S_ISGID on write(), truncate, fallocate, copy_file_range and the
 *   other write routes, but keeps them on stores through a shared mapping
 *   (mmap MAP_SHARED + PROT_WRITE): the adversarial review rewrote a
 *   set-uid-root binary in a workspace that way and kept its bit. Seccomp
 *   cannot tell such a mapping from a database's, so such a file is never
 *   left in reach: the launch is refused with the file named.
 * - no mount below it. A writable bind is recursive: a system tree mounted
 *   inside a workspace (a chroot's /proc, a bind of /etc) would come along
 *   writable.
 * - a writable file has one name. A hard link of /etc/x elsewhere would let
 *   the payload write /etc/x.
 *
 * The walk never follows a symbolic link, compares mount ids (statx
 * STATX_MNT_ID) to see mounts, including bind mounts within one file
 * system, and skips a directory this process may not read: the payload has
 * no more access than the host process that launches it (an unprivileged
 * sandbox runs as its user; a root host reads everything). Its cost is one
 * statx per entry, one getxattr per executable file.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "internal.h"

#define MAX_DEPTH 256

typedef struct walk {
  uint64_t mnt_id; /* the tree's own mount */
  const char* root;
  char* out_path; /* PATH_MAX: the offending path */
  const char* why;
  size_t entries;
} walk_t;

static bool has_capabilities(int dir, const char* name) {
  char path[64 + NAME_MAX];
  if (dir == AT_FDCWD)
    return getxattr(name, "security.capability", NULL, 0) >= 0;
  snprintf(path, sizeof path, "/proc/self/fd/%d/%s", dir, name);
  return lgetxattr(path, "security.capability", NULL, 0) >= 0;
}

/* The reason `st` (the entry `name` of `dir`) may not be writable, or NULL. */
static const char* entry_problem(const walk_t* w, int dir, const char* name,
                                 const struct statx* st) {
  if ((st->stx_mask & STATX_MNT_ID) && st->stx_mnt_id != w->mnt_id)
    return "is a mount point below a writable tree (a writable bind takes "
           "every mount below it along, writable)";
  if (!S_ISREG(st->stx_mode))
    return NULL;
  if (st->stx_mode & S_ISUID)
    return "is a set-uid file: a payload could rewrite it through a shared "
           "mapping, which keeps the bit, and whoever runs it next would run "
           "the payload's code with its owner's rights";
  if ((st->stx_mode & S_ISGID) && (st->stx_mode & S_IXGRP))
    return "is a set-gid file: a payload could rewrite it through a shared "
           "mapping, which keeps the bit";
  if ((st->stx_mode & (S_IXUSR | S_IXGRP | S_IXOTH)) &&
      has_capabilities(dir, name))
    return "has file capabilities (security.capability): a payload could "
           "rewrite it through a shared mapping, which keeps them";
  return NULL;
}

static int statx_at(int dir, const char* name, struct statx* st) {
  return statx(dir, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
               STATX_TYPE | STATX_MODE | STATX_MNT_ID | STATX_NLINK, st);
}

/* Walks the directory `fd` (consumed) whose path is `path`. 0, or -1 with
 * w->out_path and w->why set. */
static int walk_dir(walk_t* w, int fd, char* path, size_t len, int depth) {
  if (depth > MAX_DEPTH) {
    close(fd);
    snprintf(w->out_path, PATH_MAX, "%s", path);
    w->why = "is nested too deeply to be checked";
    return -1;
  }
  DIR* d = fdopendir(fd);
  if (d == NULL) {
    close(fd);
    return 0;
  }
  int rc = 0;
  struct dirent* e;
  while (rc == 0 && (e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    w->entries++;
    struct statx st;
    if (statx_at(dirfd(d), e->d_name, &st) != 0)
      continue; /* gone since readdir */
    size_t n = strlen(e->d_name);
    if (len + 1 + n >= PATH_MAX) {
      snprintf(w->out_path, PATH_MAX, "%s", path);
      w->why = "holds a path too long to be checked";
      rc = -1;
      break;
    }
    path[len] = '/';
    memcpy(path + len + 1, e->d_name, n + 1);
    const char* why = entry_problem(w, dirfd(d), e->d_name, &st);
    if (why != NULL) {
      snprintf(w->out_path, PATH_MAX, "%s", path);
      w->why = why;
      rc = -1;
    } else if (S_ISDIR(st.stx_mode)) {
      int sub = openat(dirfd(d), e->d_name,
                       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0)
        rc = walk_dir(w, sub, path, len + 1 + n, depth + 1);
      /* EACCES: not readable by this process, so not writable by a payload
       * that has no more rights than it. */
    }
    path[len] = '\0';
  }
  closedir(d);
  return rc;
}

maelys_executor_result_t
maelys__executor_check_writable_tree(const char* path, char** out_error) {
  int fd = maelys__executor_open_nofollow(path);
  if (fd < 0)
    return MAELYS_EXECUTOR_OK; /* absent: the backend creates or refuses it */
  struct statx st;
  if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW,
            STATX_TYPE | STATX_MODE | STATX_MNT_ID | STATX_NLINK, &st) != 0) {
    close(fd);
    return MAELYS_EXECUTOR_OK;
  }
  char found[PATH_MAX];
  walk_t w = {.mnt_id = st.stx_mnt_id, .root = path, .out_path = found};
  const char* why = NULL;
  if (S_ISREG(st.stx_mode)) {
    if (st.stx_nlink > 1)
      why = "is a file with more than one name (hard links): writing it "
            "writes every other name too, wherever it is";
    else {
      /* entry_problem() through the descriptor's own /proc name (getxattr
       * follows that magic link to the file). */
      char self[64];
      snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
      st.stx_mask &= ~(unsigned)STATX_MNT_ID;
      why = entry_problem(&w, AT_FDCWD, self, &st);
    }
    snprintf(found, sizeof found, "%s", path);
    close(fd);
  } else if (S_ISDIR(st.stx_mode)) {
    int dir = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(fd);
    char walked[PATH_MAX];
    snprintf(walked, sizeof walked, "%s", path);
    if (dir >= 0 && walk_dir(&w, dir, walked, strlen(walked), 0) != 0)
      why = w.why;
  } else {
    close(fd);
  }
  if (why == NULL)
    return MAELYS_EXECUTOR_OK;
  return maelys__executor_fail(
      out_error, MAELYS_EXECUTOR_ERR_DENIED,
      "'%s' would be writable, but '%s' %s (invariants 17 and 18): remove "
      "it from that tree (or its set-id bits, capabilities, extra names or "
      "mount), or make the tree read-only",
      path, found, why);
}
