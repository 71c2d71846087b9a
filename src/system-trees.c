/*
 * The host's system trees are never writable from a sandbox (invariant 18),
 * whatever route produced the plan: a profile, a plan file, a policy, a
 * symbolic link planted by an earlier run, a bind mount of /etc elsewhere.
 *
 * Refused as writable sources: at or below /etc, /usr, /bin, /sbin, /lib*
 * (every /lib... name at the root), /boot, /proc, /sys, /dev, /run, /opt,
 * /srv and /var (package databases, logs, spools, crontabs: what root's
 * tools run or trust) except below /var/tmp; exactly /, /tmp, /var/tmp,
 * /home and /root; and a home's dot-entries (/root/.ssh, /home/u/.config:
 * what a user's shell and tools run). A project under a home is fine.
 * Checked by name and, for a path that exists, by identity: the path (for a
 * file, its directory) and each of its physical ancestors (walked through
 * "..", never through a symbolic link) are compared with those trees by
 * device and inode, so a bind mount or a hard-to-spot alias of /etc is
 * refused too. What a writable tree may hold is checked next
 * (writable-trees.c: set-id files, mounts below it, hard links).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

static const char* const below[] = {"/etc",  "/usr",  "/bin", "/sbin",
                                    "/boot", "/proc", "/sys", "/dev",
                                    "/run",  "/opt",  "/srv", "/var"};
static const char* const exactly[] = {"/", "/tmp", "/var/tmp", "/home",
                                      "/root"};
/* Below these, the trees above no longer apply (a directory of one's own in
 * /var/tmp is fine). */
static const char* const except_below[] = {"/var/tmp"};

/* Whether `path` is a dot-entry of a home (or below one): /root/.x... or
 * /home/USER/.x... */
static bool in_home_dot_entry(const char* path) {
  const char* rest = NULL;
  if (strncmp(path, "/root/", 6) == 0)
    rest = path + 6;
  else if (strncmp(path, "/home/", 6) == 0 && path[6] != '\0') {
    rest = strchr(path + 6, '/');
    if (rest == NULL)
      return false;
    rest++;
  }
  return rest != NULL && rest[0] == '.';
}

/* At or below a top-level name that starts with "lib": /lib, /lib32,
 * /lib64, /libx32, ... */
static bool is_lib_tree(const char* path) {
  return strncmp(path, "/lib", 4) == 0;
}

/* The system tree `path` lies at or below (by name), or NULL. */
static const char* tree_by_name(const char* path, bool* exact) {
  for (size_t i = 0; i < MAELYS__ARRAY_SIZE(exactly); i++)
    if (strcmp(path, exactly[i]) == 0) {
      *exact = true;
      return exactly[i];
    }
  *exact = false;
  for (size_t i = 0; i < MAELYS__ARRAY_SIZE(except_below); i++)
    if (maelys__executor_path_within(path, except_below[i]))
      return NULL;
  if (in_home_dot_entry(path))
    return "a home's dot-entries";
  for (size_t i = 0; i < MAELYS__ARRAY_SIZE(below); i++)
    if (maelys__executor_path_within(path, below[i]))
      return below[i];
  if (is_lib_tree(path))
    return "/lib*";
  return NULL;
}

typedef struct tree_id {
  const char* name;
  bool exact;
  bool except; /* below it, nothing above applies */
  dev_t dev;
  ino_t ino;
} tree_id_t;

static size_t tree_ids(tree_id_t* out, size_t max) {
  size_t n = 0;
  struct stat st;
  for (size_t i = 0; i < MAELYS__ARRAY_SIZE(below) && n < max; i++)
    if (stat(below[i], &st) == 0)
      out[n++] = (tree_id_t){below[i], false, false, st.st_dev, st.st_ino};
  for (size_t i = 0; i < MAELYS__ARRAY_SIZE(exactly) && n < max; i++)
    if (stat(exactly[i], &st) == 0)
      out[n++] = (tree_id_t){exactly[i], true, false, st.st_dev, st.st_ino};
  for (size_t i = 0; i < MAELYS__ARRAY_SIZE(except_below) && n < max; i++)
    if (stat(except_below[i], &st) == 0)
      out[n++] =
          (tree_id_t){except_below[i], false, true, st.st_dev, st.st_ino};
  /* root's dot-entries (its shell's start files, .ssh, .config...). */
  DIR* home = opendir("/root");
  struct dirent* h;
  while (home != NULL && (h = readdir(home)) != NULL && n < max) {
    if (h->d_name[0] != '.' || strcmp(h->d_name, ".") == 0 ||
        strcmp(h->d_name, "..") == 0)
      continue;
    char path[300];
    snprintf(path, sizeof path, "/root/%s", h->d_name);
    if (lstat(path, &st) == 0 && !S_ISLNK(st.st_mode))
      out[n++] = (tree_id_t){"a home's dot-entries", false, false, st.st_dev,
                             st.st_ino};
  }
  if (home != NULL)
    closedir(home);
  /* The /lib* names at the root, through their links on merged-/usr
   * systems: what they designate is a system tree either way. */
  DIR* d = opendir("/");
  struct dirent* e;
  while (d != NULL && (e = readdir(d)) != NULL && n < max) {
    if (strncmp(e->d_name, "lib", 3) != 0)
      continue;
    char path[300];
    snprintf(path, sizeof path, "/%s", e->d_name);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
      out[n++] = (tree_id_t){"/lib*", false, false, st.st_dev, st.st_ino};
  }
  if (d != NULL)
    closedir(d);
  return n;
}

/* The system tree the existing path `path` is, or lies below, by identity;
 * NULL when none (or when it cannot be opened). */
static const char* tree_by_identity(const char* path, const tree_id_t* ids,
                                    size_t count) {
  int fd = maelys__executor_open_nofollow(path);
  if (fd < 0)
    return NULL;
  /* A file: its directory is what the walk starts from ("..": a file has
   * none, and the walk once stopped there, accepting a file in a bind mount
   * of /etc). */
  struct stat first;
  int depth0 = 0;
  if (fstat(fd, &first) == 0 && !S_ISDIR(first.st_mode)) {
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    char real[PATH_MAX];
    ssize_t n = readlink(self, real, sizeof real - 1);
    close(fd);
    if (n <= 0)
      return NULL;
    real[n] = '\0';
    char* slash = strrchr(real, '/');
    if (slash == NULL)
      return NULL;
    *(slash == real ? slash + 1 : slash) = '\0';
    fd = maelys__executor_open_nofollow(real);
    if (fd < 0)
      return NULL;
    depth0 = 1;
  }
  const char* found = NULL;
  bool excepted = false;
  for (int depth = depth0; depth < 256 && found == NULL && !excepted; depth++) {
    struct stat st;
    if (fstat(fd, &st) != 0)
      break;
    for (size_t i = 0; i < count && found == NULL && !excepted; i++)
      if (ids[i].dev == st.st_dev && ids[i].ino == st.st_ino) {
        if (ids[i].except)
          excepted = depth > 0;
        else if (!ids[i].exact || depth == 0)
          found = ids[i].name;
      }
    int parent = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat ps;
    bool top = parent < 0 || fstat(parent, &ps) != 0 ||
               (ps.st_dev == st.st_dev && ps.st_ino == st.st_ino);
    close(fd);
    fd = parent;
    if (top)
      break;
  }
  if (fd >= 0)
    close(fd);
  return found;
}

maelys_executor_result_t
maelys__executor_check_system_trees(const maelys_executor_plan_t* plan,
                                    char** out_error) {
  const char* paths[2 * MAELYS_EXECUTOR_MAX_ENTRIES];
  size_t n = maelys__executor_plan_writable_paths(plan, paths,
                                                  MAELYS__ARRAY_SIZE(paths));
  if (n == 0)
    return MAELYS_EXECUTOR_OK;
  tree_id_t ids[64];
  size_t count = tree_ids(ids, MAELYS__ARRAY_SIZE(ids));
  for (size_t i = 0; i < n; i++) {
    bool exact = false;
    const char* tree = tree_by_name(paths[i], &exact);
    if (tree == NULL)
      tree = tree_by_identity(paths[i], ids, count);
    if (tree == NULL) {
      maelys_executor_result_t r =
          maelys__executor_check_writable_tree(paths[i], out_error);
      if (r != MAELYS_EXECUTOR_OK)
        return r;
      continue;
    }
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_DENIED,
        "'%s' would be writable, but it %s the host's system tree %s: system "
        "trees are never writable from a sandbox (invariant 18); make a "
        "directory of your own writable instead",
        paths[i], exact || strcmp(tree, paths[i]) == 0 ? "is" : "lies inside",
        tree);
  }
  return MAELYS_EXECUTOR_OK;
}
