/* The launch description a backend fills, and the probe report. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "proc.h"

void maelys__executor_launch_init(maelys_backend_launch_t* launch,
                                  int payload_fd_limit) {
  memset(launch, 0, sizeof *launch);
  launch->payload_fd_limit = payload_fd_limit;
  launch->image_fd = -1;
}

static void free_vector(char** v) {
  if (v == NULL)
    return;
  for (size_t i = 0; v[i] != NULL; i++)
    free(v[i]);
  free(v);
}

void maelys__executor_launch_dispose(maelys_backend_launch_t* launch) {
  free(launch->path);
  free_vector(launch->argv);
  free_vector(launch->envp);
  free(launch->map);
  for (size_t i = 0; i < launch->extra_count; i++)
    if (launch->extra_fds[i] >= 0)
      close(launch->extra_fds[i]);
  free(launch->extra_fds);
  if (launch->image_fd >= 0)
    close(launch->image_fd);
  memset(launch, 0, sizeof *launch);
  launch->image_fd = -1;
}

static char** copy_vector(const char* const* v, bool* failed) {
  size_t n = 0;
  if (v != NULL)
    while (v[n] != NULL)
      n++;
  char** out = calloc(n + 1, sizeof *out);
  if (out == NULL) {
    *failed = true;
    return NULL;
  }
  for (size_t i = 0; i < n; i++)
    if ((out[i] = maelys__executor_strdup(v[i])) == NULL) {
      free_vector(out);
      *failed = true;
      return NULL;
    }
  return out;
}

maelys_executor_result_t
maelys_backend_launch_set_image(maelys_backend_launch_t* launch,
                                const char* path, const char* const* argv,
                                const char* const* envp, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (launch == NULL || path == NULL || path[0] != '/' || argv == NULL ||
      argv[0] == NULL)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "a launch image needs an absolute path and at least argv[0]");
  bool failed = false;
  char* p = maelys__executor_strdup(path);
  char** a = copy_vector(argv, &failed);
  char** e = copy_vector(envp, &failed);
  if (p == NULL || failed) {
    free(p);
    free_vector(a);
    free_vector(e);
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory copying the launch image");
  }
  free(launch->path);
  free_vector(launch->argv);
  free_vector(launch->envp);
  launch->path = p;
  launch->argv = a;
  launch->envp = e;
  launch->image_set = true;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_backend_launch_set_image_fd(maelys_backend_launch_t* launch, int* fd,
                                   char** out_error) {
  int taken = -1;
  if (fd != NULL) {
    taken = *fd;
    *fd = -1;
  }
  if (out_error != NULL && *out_error != NULL) {
    if (taken >= 0)
      close(taken);
    return MAELYS_EXECUTOR_ERR_ARGUMENT;
  }
  if (launch == NULL || taken < 0) {
    if (taken >= 0)
      close(taken);
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "set_image_fd needs a launch and a "
                                 "descriptor");
  }
  if (launch->image_fd >= 0)
    close(launch->image_fd);
  launch->image_fd = taken;
  return MAELYS_EXECUTOR_OK;
}

void maelys_backend_launch_set_flags(maelys_backend_launch_t* launch,
                                     unsigned flags) {
  if (launch != NULL)
    launch->flags = flags;
}

maelys_executor_result_t
maelys_backend_launch_map_fd(maelys_backend_launch_t* launch, int child_fd,
                             maelys_backend_fd_source_t source, int value,
                             char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (launch == NULL || child_fd < 0 || child_fd > 4095)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "child descriptor %d is out of range",
                                 child_fd);
  switch (source) {
  case MAELYS_BACKEND_FD_PAYLOAD:
    if (value < 0 || value >= launch->payload_fd_limit)
      return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                   "payload descriptor %d is not in the "
                                   "payload layout",
                                   value);
    break;
  case MAELYS_BACKEND_FD_STATUS:
  case MAELYS_BACKEND_FD_LIFELINE:
  case MAELYS_BACKEND_FD_TERMINAL:
  case MAELYS_BACKEND_FD_CGROUP:
  case MAELYS_BACKEND_FD_USERDB:
    break;
  case MAELYS_BACKEND_FD_EXTRA:
    if (value < 0 || (size_t)value >= launch->extra_count)
      return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                   "extra descriptor index %d is unknown",
                                   value);
    break;
  default:
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "unknown descriptor source %d", (int)source);
  }
  for (size_t i = 0; i < launch->map_count; i++)
    if (launch->map[i].child_fd == child_fd)
      return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                   "child descriptor %d is mapped twice",
                                   child_fd);
  if (maelys__executor_reserve((void**)&launch->map, &launch->map_capacity,
                               sizeof *launch->map, launch->map_count + 1))
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  launch->map[launch->map_count++] =
      (maelys__fd_map_t){child_fd, source, value};
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_backend_launch_add_fd(maelys_backend_launch_t* launch, int* fd,
                             int* out_index, char** out_error) {
  int taken = -1;
  if (fd != NULL) {
    taken = *fd;
    *fd = -1;
  }
  maelys_executor_result_t r = MAELYS_EXECUTOR_OK;
  if (out_error != NULL && *out_error != NULL)
    r = MAELYS_EXECUTOR_ERR_ARGUMENT;
  else if (launch == NULL || fd == NULL || taken < 0 || out_index == NULL)
    r = maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                              "add_fd needs a launch, a descriptor and "
                              "out_index");
  else if (maelys__executor_reserve(
               (void**)&launch->extra_fds, &launch->extra_capacity,
               sizeof *launch->extra_fds, launch->extra_count + 1))
    r = maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                              "out of memory");
  if (r != MAELYS_EXECUTOR_OK) {
    if (taken >= 0)
      close(taken);
    return r;
  }
  *out_index = (int)launch->extra_count;
  launch->extra_fds[launch->extra_count++] = taken;
  return MAELYS_EXECUTOR_OK;
}

int maelys_backend_launch_payload_fd_limit(
    const maelys_backend_launch_t* launch) {
  return launch ? launch->payload_fd_limit : 0;
}

int maelys_backend_launch_payload_fd_present(
    const maelys_backend_launch_t* launch, int fd) {
  if (launch == NULL)
    return 0;
  for (size_t i = 0; i < launch->payload_fd_count; i++)
    if (launch->payload_fds[i] == fd)
      return 1;
  return 0;
}

maelys_executor_result_t
maelys_backend_launch_set_credentials(maelys_backend_launch_t* launch,
                                      uint32_t uid, uint32_t gid,
                                      char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (launch == NULL || uid == 0 || gid == 0)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "launch credentials must not be uid/gid 0");
  launch->credentials_set = true;
  launch->uid = uid;
  launch->gid = gid;
  return MAELYS_EXECUTOR_OK;
}

/* ----------------------------------------------------------------- probe */

void maelys_backend_probe_prove(maelys_backend_probe_t* probe,
                                uint64_t capabilities) {
  if (probe != NULL)
    probe->proved |= capabilities & MAELYS_BACKEND_CAP_ALL;
}

void maelys_backend_probe_missing(maelys_backend_probe_t* probe,
                                  uint64_t capabilities, const char* reason) {
  if (probe == NULL || reason == NULL)
    return;
  for (int b = 0; b < 64; b++)
    if ((capabilities & (UINT64_C(1) << b)) && probe->reasons[b] == NULL)
      probe->reasons[b] = maelys__executor_strdup(reason);
}

void maelys_backend_probe_diagnostic(maelys_backend_probe_t* probe,
                                     const char* text) {
  if (probe == NULL || text == NULL)
    return;
  char* joined =
      probe->diagnostic == NULL
          ? maelys__executor_strdup(text)
          : maelys__executor_asprintf("%s\n%s", probe->diagnostic, text);
  if (joined == NULL)
    return;
  free(probe->diagnostic);
  probe->diagnostic = joined;
}

void maelys__executor_probe_dispose(maelys_backend_probe_t* probe) {
  for (int b = 0; b < 64; b++)
    free(probe->reasons[b]);
  free(probe->diagnostic);
  memset(probe, 0, sizeof *probe);
}

/* ------------------------------------------------- descriptor resolution */

bool maelys__launch_maps(const maelys_backend_launch_t* launch,
                         maelys_backend_fd_source_t source) {
  for (size_t i = 0; i < launch->map_count; i++)
    if (launch->map[i].source == source)
      return true;
  return false;
}

/* The host descriptor a map entry names, or -1. */
static int map_source(const maelys_backend_launch_t* launch,
                      const maelys__fd_sources_t* src,
                      const maelys__fd_map_t* m) {
  switch (m->source) {
  case MAELYS_BACKEND_FD_PAYLOAD:
    for (size_t k = 0; k < src->payload_count; k++)
      if (src->payload[k].child_fd == m->value)
        return src->payload[k].source_fd;
    return -1;
  case MAELYS_BACKEND_FD_STATUS:
    return src->status_fd;
  case MAELYS_BACKEND_FD_LIFELINE:
    return src->lifeline_fd;
  case MAELYS_BACKEND_FD_TERMINAL:
    return src->terminal_fd;
  case MAELYS_BACKEND_FD_CGROUP:
    return src->cgroup_fd;
  case MAELYS_BACKEND_FD_USERDB:
    return src->userdb_fd;
  case MAELYS_BACKEND_FD_EXTRA:
    return m->value >= 0 && (size_t)m->value < launch->extra_count
               ? launch->extra_fds[m->value]
               : -1;
  }
  return -1;
}

maelys_executor_result_t maelys__launch_resolve_fds(
    const maelys_backend_launch_t* launch, const maelys__fd_sources_t* sources,
    const char* backend, maelys__proc_fd_t* out, size_t capacity,
    size_t* out_count, char** out_error) {
  *out_count = 0;
  size_t need = launch->map_count ? launch->map_count : sources->payload_count;
  if (need > capacity)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "%zu descriptors for the launched image, "
                                 "room for %zu",
                                 need, capacity);
  if (launch->map_count == 0) {
    memcpy(out, sources->payload, need * sizeof *out);
    *out_count = need;
    return MAELYS_EXECUTOR_OK;
  }
  for (size_t i = 0; i < launch->map_count; i++) {
    const maelys__fd_map_t* m = &launch->map[i];
    int src = map_source(launch, sources, m);
    if (src < 0)
      return maelys__executor_fail(
          out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
          "backend '%s' maps child fd %d to a descriptor that does not "
          "exist",
          backend, m->child_fd);
    out[i] = (maelys__proc_fd_t){m->child_fd, src};
  }
  *out_count = need;
  return MAELYS_EXECUTOR_OK;
}
