/*
 * The execution's own cgroup: where the sandbox-wide memory ceiling is
 * enforced (DESIGN invariant 22), and where its peak is read for the
 * receipt. cgroup-linux.c finds a memory controller this process may create
 * child cgroups in -- cgroup v2 when the process's own cgroup delegates the
 * memory controller to its children, otherwise the v1 memory hierarchy --
 * and creates, measures and removes the per-execution cgroup.
 */
#ifndef MAELYS_EXECUTOR_CGROUP_H
#define MAELYS_EXECUTOR_CGROUP_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

typedef struct maelys__cgroup_parent {
  char path[PATH_MAX]; /* "" when there is none */
  int version;         /* 1 or 2 */
  char why[256];       /* why there is none */
} maelys__cgroup_parent_t;

typedef struct maelys__cgroup {
  int dir_fd;    /* the execution's cgroup, or -1 */
  int parent_fd; /* its parent directory, for the removal */
  int version;
  char name[72];
} maelys__cgroup_t;

/* Finds the parent directory of per-execution cgroups (never fails: an
 * absent controller leaves path empty and says why). Stale per-execution
 * cgroups of hosts that died are removed from it (an rmdir of a cgroup that
 * still holds a process fails, so only empty ones go). */
void maelys__cgroup_find_memory(maelys__cgroup_parent_t* out);

/* Creates parent/NAME with the memory ceiling max_bytes (swap included where
 * the controller accounts it). 0, or a negative errno and `error`. */
int maelys__cgroup_create(const maelys__cgroup_parent_t* parent,
                          const char* name, uint64_t max_bytes,
                          maelys__cgroup_t* out, char* error,
                          size_t error_size);

/* The highest memory usage the cgroup saw, in bytes, or -1 when the
 * controller does not report it. */
int64_t maelys__cgroup_memory_peak(const maelys__cgroup_t* cgroup);

/* Removes the cgroup (it must hold no process any more) and closes it. */
void maelys__cgroup_remove(maelys__cgroup_t* cgroup);

#endif /* MAELYS_EXECUTOR_CGROUP_H */
