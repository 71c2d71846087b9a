#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "marked.h"

static uint64_t ns_inode(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

static int open_ns(int pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/ns/pid", pid);
  return open(path, O_RDONLY | O_CLOEXEC);
}

uint64_t tree_pidns(int pid) {
  int fd = open_ns(pid);
  if (fd < 0)
    return 0;
  uint64_t ino = ns_inode(fd);
  close(fd);
  return ino;
}

uint64_t tree_parent_pidns(int pid) {
  int fd = open_ns(pid);
  if (fd < 0)
    return 0;
  int parent = ioctl(fd, NS_GET_PARENT);
  close(fd);
  if (parent < 0)
    return 0;
  uint64_t ino = ns_inode(parent);
  close(parent);
  return ino;
}

/* 1 when pid's namespace is `ns` or nested in it, 0 when not, -1 when it
 * cannot be read. The walk up stops at this process's own namespace, whose
 * parent it may not see. */
static int in_ns(int pid, uint64_t ns) {
  int fd = open_ns(pid);
  if (fd < 0)
    return -1;
  uint64_t mine = tree_pidns(getpid());
  for (int depth = 0; depth < 40; depth++) {
    uint64_t ino = ns_inode(fd);
    if (ino == ns) {
      close(fd);
      return 1;
    }
    if (ino == mine)
      break;
    int parent = ioctl(fd, NS_GET_PARENT);
    close(fd);
    if (parent < 0)
      return 0;
    fd = parent;
  }
  close(fd);
  return 0;
}

/* Whether `pid` is a zombie: it has exited and holds nothing but its entry
 * until its parent (init, once its own parent died) reaps it. */
static bool zombie(int pid) {
  char path[64], text[512];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = fopen(path, "re");
  if (f == NULL)
    return true; /* already gone */
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  const char* paren = strrchr(text, ')');
  return paren == NULL || paren[1] == '\0' || paren[2] == 'Z' ||
         paren[2] == 'X';
}

int tree_members(uint64_t ns, const char* marker, int* pids, size_t max) {
  int marked[4096];
  int nmarked = marker != NULL ? marked_pids(marker, marked,
                                             sizeof marked / sizeof *marked)
                               : 0;
  DIR* d = opendir("/proc");
  int count = 0;
  struct dirent* e;
  while (d != NULL && (e = readdir(d)) != NULL) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9')
      continue;
    int pid = atoi(e->d_name);
    if (pid == getpid() || zombie(pid))
      continue;
    int r = ns != 0 ? in_ns(pid, ns) : -1;
    bool member = r == 1;
    if (r == -1)
      for (int i = 0; i < nmarked && !member; i++)
        member = marked[i] == pid;
    if (!member)
      continue;
    if (pids != NULL && (size_t)count < max)
      pids[count] = pid;
    count++;
  }
  if (d != NULL)
    closedir(d);
  return count;
}

/* The fields of /proc/PID/stat this file reads: the command's "(comm)"
 * span (comm_len 0 when unreadable), state, ppid and flags. */
typedef struct stat_line {
  char text[512];
  const char* comm;
  int comm_len;
  char state;
  int ppid;
  unsigned long flags;
} stat_line_t;

static void read_stat(int pid, stat_line_t* s) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = fopen(path, "re");
  size_t n = f != NULL ? fread(s->text, 1, sizeof s->text - 1, f) : 0;
  if (f != NULL)
    fclose(f);
  s->text[n] = '\0';
  s->comm = "";
  s->comm_len = 0;
  s->state = '?';
  s->ppid = 0;
  s->flags = 0;
  /* comm, then after ")": state ppid pgrp session tty tpgid flags */
  const char* open = strchr(s->text, '(');
  const char* close = strrchr(s->text, ')');
  if (open == NULL || close == NULL || close < open)
    return;
  s->comm = open;
  s->comm_len = (int)(close - open + 1);
  sscanf(close + 1, " %c %d %*d %*d %*d %*d %lu", &s->state, &s->ppid,
         &s->flags);
}

void tree_describe(int pid, char* out, size_t size) {
  stat_line_t s;
  read_stat(pid, &s);
  snprintf(out, size, "pid %d %.*s state %c ppid %d flags 0x%lx%s", pid,
           s.comm_len, s.comm, s.state, s.ppid, s.flags,
           s.flags & 0x4 ? " (exiting)" : "");
}

bool tree_exiting(int pid) {
  stat_line_t s;
  read_stat(pid, &s);
  return (s.flags & 0x4) != 0; /* PF_EXITING */
}

bool tree_alive(int pid) {
  return !zombie(pid);
}

long tree_uid(int pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", pid);
  FILE* f = fopen(path, "re");
  if (f == NULL)
    return -1;
  long uid = -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "Uid: %ld", &uid) == 1)
      break;
  fclose(f);
  return uid;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int tree_wait_gone(const int* pids, size_t count, int timeout_ms) {
  struct pollfd fds[256];
  size_t n = 0;
  for (size_t i = 0; i < count && n < sizeof fds / sizeof *fds; i++) {
    int fd = (int)syscall(SYS_pidfd_open, pids[i], 0);
    if (fd >= 0)
      fds[n++] = (struct pollfd){.fd = fd, .events = POLLIN};
  }
  int64_t deadline = now_ms() + timeout_ms;
  size_t left = n;
  while (left > 0) {
    int64_t wait = deadline - now_ms();
    if (wait <= 0)
      break;
    if (poll(fds, n, (int)wait) < 0 && errno != EINTR)
      break;
    left = 0;
    for (size_t i = 0; i < n; i++) {
      if (fds[i].fd >= 0 && (fds[i].revents & POLLIN)) {
        close(fds[i].fd);
        fds[i].fd = -1;
      }
      if (fds[i].fd >= 0)
        left++;
    }
  }
  for (size_t i = 0; i < n; i++)
    if (fds[i].fd >= 0)
      close(fds[i].fd);
  return (int)left;
}
