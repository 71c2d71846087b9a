/*
 * Per-execution memory cgroups (see cgroup.h).
 *
 * Why the core owns this, like pidfds: a ceiling that a backend sets up in
 * its own child could not be measured or removed once that child is gone,
 * and a host that dies leaves only what a later sweep can find. The core
 * creates the cgroup before the launch, the child joins it before it
 * executes (so every process the launch starts is charged to it), and the
 * core removes it after it reaped the launch.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"

#define NAME_PREFIX "maelys-"

/* The mount point and the root (inside the hierarchy) of the cgroup mount
 * whose type is `fstype` and, for v1, whose super options name `option`. */
static bool find_mount(const char* fstype, const char* option, char* point,
                       size_t point_size, char* root, size_t root_size) {
  FILE* f = fopen("/proc/self/mountinfo", "re");
  if (f == NULL)
    return false;
  char line[4096];
  bool found = false;
  while (!found && fgets(line, sizeof line, f) != NULL) {
    char* dash = strstr(line, " - ");
    if (dash == NULL)
      continue;
    char type[64], source[256], opts[1024];
    if (sscanf(dash + 3, "%63s %255s %1023s", type, source, opts) != 3 ||
        strcmp(type, fstype) != 0)
      continue;
    if (option != NULL) {
      bool has = false;
      for (char *save = NULL, *o = strtok_r(opts, ",", &save); o != NULL;
           o = strtok_r(NULL, ",", &save))
        has = has || strcmp(o, option) == 0;
      if (!has)
        continue;
    }
    char r[2048], p[2048];
    if (sscanf(line, "%*s %*s %*s %2047s %2047s", r, p) != 2)
      continue;
    snprintf(point, point_size, "%s", p);
    snprintf(root, root_size, "%s", r);
    found = true;
  }
  fclose(f);
  return found;
}

/* This process's cgroup path in the hierarchy that `controller` names in
 * /proc/self/cgroup ("" for the v2 line). */
static bool own_cgroup(const char* controller, char* out, size_t size) {
  FILE* f = fopen("/proc/self/cgroup", "re");
  if (f == NULL)
    return false;
  char line[4096];
  bool found = false;
  while (!found && fgets(line, sizeof line, f) != NULL) {
    line[strcspn(line, "\n")] = '\0';
    char* c1 = strchr(line, ':');
    char* c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (c2 == NULL)
      continue;
    *c2 = '\0';
    const char* list = c1 + 1;
    bool match = controller[0] == '\0' ? list[0] == '\0' : false;
    char copy[256];
    snprintf(copy, sizeof copy, "%s", list);
    for (char *save = NULL, *c = strtok_r(copy, ",", &save);
         !match && controller[0] != '\0' && c != NULL;
         c = strtok_r(NULL, ",", &save))
      match = strcmp(c, controller) == 0;
    if (match) {
      snprintf(out, size, "%s", c2 + 1);
      found = true;
    }
  }
  fclose(f);
  return found;
}

/* mount point + (own path relative to the mount's root). */
static void join_path(char* out, size_t size, const char* point,
                      const char* root, const char* own) {
  size_t n = strlen(root);
  const char* rel = own;
  if (strcmp(root, "/") != 0 && strncmp(own, root, n) == 0)
    rel = own + n;
  snprintf(out, size, "%s%s%s", point, rel[0] == '/' ? "" : "/",
           strcmp(rel, "/") == 0 ? "" : rel);
}

static bool has_word(const char* file, const char* word) {
  FILE* f = fopen(file, "re");
  if (f == NULL)
    return false;
  char text[1024] = "";
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose(f);
  for (char *save = NULL, *w = strtok_r(text, " \n", &save); w != NULL;
       w = strtok_r(NULL, " \n", &save))
    if (strcmp(w, word) == 0)
      return true;
  return false;
}

/* A cgroup is named maelys-<host pid>-<execution id>. Between its mkdir and
 * the moment the child joins it, a cgroup is empty yet in use: removing
 * every empty one (as this once did) made a concurrent host's launch fail
 * with "join the execution's cgroup: No such file or directory". So a sweep
 * removes only what a host that is gone left behind: its pid no longer
 * exists here, and the cgroup is more than a few seconds old (a host in
 * another pid namespace cannot be seen; its launch window is milliseconds).
 * rmdir still refuses (EBUSY) a cgroup that holds processes. */
static bool stale(int dir, const char* name) {
  unsigned long pid = 0;
  if (sscanf(name + strlen(NAME_PREFIX), "%lu-", &pid) != 1 || pid == 0 ||
      pid > INT32_MAX)
    return true; /* not a name this code makes: an older layout */
  if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
    return false;
  struct stat st;
  struct timespec now;
  if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
      clock_gettime(CLOCK_REALTIME, &now) != 0)
    return false;
  return now.tv_sec - st.st_ctim.tv_sec > 5;
}

static void sweep(const char* parent) {
  DIR* d = opendir(parent);
  if (d == NULL)
    return;
  struct dirent* e;
  while ((e = readdir(d)) != NULL)
    if (strncmp(e->d_name, NAME_PREFIX, strlen(NAME_PREFIX)) == 0 &&
        e->d_type == DT_DIR && stale(dirfd(d), e->d_name))
      unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR); /* EBUSY while in use */
  closedir(d);
}

void maelys__cgroup_find_memory(maelys__cgroup_parent_t* out) {
  memset(out, 0, sizeof *out);
  char point[PATH_MAX], root[PATH_MAX], own[PATH_MAX], dir[PATH_MAX * 2];
  /* cgroup v2, where this process's cgroup already hands the memory
   * controller to its children (a delegated subtree). */
  if (find_mount("cgroup2", NULL, point, sizeof point, root, sizeof root) &&
      own_cgroup("", own, sizeof own)) {
    join_path(dir, sizeof dir, point, root, own);
    char control[PATH_MAX * 2 + 32];
    snprintf(control, sizeof control, "%s/cgroup.subtree_control", dir);
    if (has_word(control, "memory") && access(dir, W_OK) == 0 &&
        strlen(dir) < sizeof out->path) {
      memcpy(out->path, dir, strlen(dir) + 1);
      out->version = 2;
      sweep(out->path);
      return;
    }
  }
  /* The v1 memory hierarchy, below this process's own memory cgroup. */
  if (find_mount("cgroup", "memory", point, sizeof point, root, sizeof root) &&
      own_cgroup("memory", own, sizeof own)) {
    join_path(dir, sizeof dir, point, root, own);
    if (access(dir, W_OK) == 0 && strlen(dir) < sizeof out->path) {
      memcpy(out->path, dir, strlen(dir) + 1);
      out->version = 1;
      sweep(out->path);
      return;
    }
    snprintf(out->why, sizeof out->why,
             "no writable cgroup: the memory cgroup %.150s is not writable "
             "by this user",
             dir);
    return;
  }
  snprintf(out->why, sizeof out->why,
           "no writable cgroup: neither a cgroup v2 subtree delegating the "
           "memory controller nor a v1 memory hierarchy was found");
}

static int write_at(int dir, const char* file, const char* text) {
  int fd = openat(dir, file, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  ssize_t n = write(fd, text, strlen(text));
  int e = errno;
  close(fd);
  return n == (ssize_t)strlen(text) ? 0 : -(n < 0 ? e : EIO);
}

int maelys__cgroup_create(const maelys__cgroup_parent_t* parent,
                          const char* name, uint64_t max_bytes,
                          maelys__cgroup_t* out, char* error,
                          size_t error_size) {
  out->dir_fd = out->parent_fd = -1;
  out->version = parent->version;
  snprintf(out->name, sizeof out->name, NAME_PREFIX "%ld-%.32s", (long)getpid(),
           name);
  if (parent->path[0] == '\0') {
    snprintf(error, error_size, "%s", parent->why);
    return -ENOTSUP;
  }
  int pfd = open(parent->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (pfd < 0 || mkdirat(pfd, out->name, 0755) != 0) {
    int e = errno;
    snprintf(error, error_size, "creating the execution's cgroup in %s: %s",
             parent->path, strerror(e));
    if (pfd >= 0)
      close(pfd);
    return -e;
  }
  out->parent_fd = pfd;
  out->dir_fd = openat(pfd, out->name, O_PATH | O_DIRECTORY | O_CLOEXEC);
  char value[32];
  snprintf(value, sizeof value, "%llu", (unsigned long long)max_bytes);
  int r = out->dir_fd < 0 ? -errno : 0;
  /* The ceiling, then swap: without it the ceiling only bounds what stays in
   * memory. A controller that does not account swap has no such file. */
  if (r == 0 && parent->version == 2) {
    r = write_at(out->dir_fd, "memory.max", value);
    int s = write_at(out->dir_fd, "memory.swap.max", "0");
    if (r == 0 && s != 0 && s != -ENOENT)
      r = s;
  } else if (r == 0) {
    r = write_at(out->dir_fd, "memory.limit_in_bytes", value);
    int s = write_at(out->dir_fd, "memory.memsw.limit_in_bytes", value);
    if (r == 0 && s != 0 && s != -ENOENT)
      r = s;
  }
  if (r != 0) {
    snprintf(error, error_size,
             "setting the memory ceiling of the execution's cgroup %s/%s: %s",
             parent->path, out->name, strerror(-r));
    maelys__cgroup_remove(out);
    return r;
  }
  return 0;
}

int64_t maelys__cgroup_memory_peak(const maelys__cgroup_t* cg) {
  if (cg->dir_fd < 0)
    return -1;
  int fd =
      openat(cg->dir_fd,
             cg->version == 2 ? "memory.peak" : "memory.max_usage_in_bytes",
             O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  char text[32];
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0)
    return -1;
  text[n] = '\0';
  char* end;
  long long v = strtoll(text, &end, 10);
  return end == text ? -1 : (int64_t)v;
}

void maelys__cgroup_remove(maelys__cgroup_t* cg) {
  if (cg->dir_fd >= 0)
    close(cg->dir_fd);
  if (cg->parent_fd >= 0) {
    unlinkat(cg->parent_fd, cg->name, AT_REMOVEDIR);
    close(cg->parent_fd);
  }
  cg->dir_fd = cg->parent_fd = -1;
}
