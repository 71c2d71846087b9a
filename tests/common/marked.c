#include "marked.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int marked_pids(const char* marker, int* pids, size_t max) {
  DIR* d = opendir("/proc");
  int count = 0;
  struct dirent* e;
  while (d != NULL && (e = readdir(d)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    int pid = atoi(e->d_name);
    if (pid == getpid())
      continue;
    char path[300], buf[4096];
    snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      continue;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
      continue;
    for (ssize_t i = 0; i < n; i++)
      if (buf[i] == '\0')
        buf[i] = ' ';
    buf[n] = '\0';
    if (strstr(buf, marker) == NULL)
      continue;
    if (pids != NULL && (size_t)count < max)
      pids[count] = pid;
    count++;
  }
  if (d != NULL)
    closedir(d);
  return count;
}
