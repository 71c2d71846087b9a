/*
 * Descriptor-layout resolution (maelys__launch_resolve_fds), without
 * forking: a backend's descriptor map against the payload layout, the status
 * channel, the lifeline and its extra descriptors gives the launched image's
 * descriptors, and an entry that resolves to nothing is refused naming the
 * backend and the child descriptor (invariant 5).
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"
#include "proc.h"

/* The isolated-duplex layout: stdin /dev/null (host 10), stdout and stderr
 * the same pipe (host 11), the protocol socket at 3 (host 12), a channel at
 * 4 (host 13). */
static const maelys__proc_fd_t payload[] = {
    {0, 10}, {1, 11}, {2, 11}, {3, 12}, {4, 13}};

static maelys__fd_sources_t sources(int status_fd, int lifeline_fd) {
  return (maelys__fd_sources_t){payload, 5, status_fd, lifeline_fd, -1, -1, -1};
}

static int source_of(const maelys__proc_fd_t* fds, size_t n, int child) {
  for (size_t i = 0; i < n; i++)
    if (fds[i].child_fd == child)
      return fds[i].source_fd;
  return -1;
}

/* Nothing mapped: the payload layout as it is. */
static void test_unmapped_is_the_payload_layout(void** state) {
  (void)state;
  maelys_backend_launch_t launch;
  maelys__executor_launch_init(&launch, 5);
  maelys__proc_fd_t out[8];
  size_t n = 99;
  maelys__fd_sources_t src = sources(-1, -1);
  assert_int_equal(
      maelys__launch_resolve_fds(&launch, &src, "posix", out, 8, &n, NULL),
      MAELYS_EXECUTOR_OK);
  assert_int_equal(n, 5);
  assert_memory_equal(out, payload, sizeof payload);
  assert_false(maelys__launch_maps(&launch, MAELYS_BACKEND_FD_LIFELINE));
  maelys__executor_launch_dispose(&launch);
}

/* A wrapped launch: fd 2 becomes the status channel, the payload's stderr
 * moves up, the lifeline and an extra descriptor sit above the layout. */
static void test_map_of_a_wrapped_launch(void** state) {
  (void)state;
  maelys_backend_launch_t launch;
  maelys__executor_launch_init(&launch, 5);
  int extra = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int host_extra = extra, index = -1;
  assert_true(extra >= 0);
  assert_int_equal(maelys_backend_launch_add_fd(&launch, &extra, &index, NULL),
                   0);
  assert_int_equal(extra, -1);
  const struct {
    int child;
    maelys_backend_fd_source_t source;
    int value;
  } map[] = {
      {0, MAELYS_BACKEND_FD_PAYLOAD, 0},  {1, MAELYS_BACKEND_FD_PAYLOAD, 1},
      {2, MAELYS_BACKEND_FD_STATUS, 0},   {3, MAELYS_BACKEND_FD_PAYLOAD, 3},
      {4, MAELYS_BACKEND_FD_PAYLOAD, 4},  {5, MAELYS_BACKEND_FD_PAYLOAD, 2},
      {6, MAELYS_BACKEND_FD_LIFELINE, 0}, {7, MAELYS_BACKEND_FD_EXTRA, index},
  };
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    assert_int_equal(maelys_backend_launch_map_fd(&launch, map[i].child,
                                                  map[i].source, map[i].value,
                                                  NULL),
                     0);
  assert_true(maelys__launch_maps(&launch, MAELYS_BACKEND_FD_LIFELINE));
  assert_true(maelys__launch_maps(&launch, MAELYS_BACKEND_FD_STATUS));
  maelys__proc_fd_t out[8];
  size_t n = 0;
  maelys__fd_sources_t src = sources(20, 21);
  assert_int_equal(
      maelys__launch_resolve_fds(&launch, &src, "bubblewrap", out, 8, &n, NULL),
      MAELYS_EXECUTOR_OK);
  assert_int_equal(n, 8);
  assert_int_equal(source_of(out, n, 0), 10);
  assert_int_equal(source_of(out, n, 1), 11);
  assert_int_equal(source_of(out, n, 2), 20);
  assert_int_equal(source_of(out, n, 3), 12);
  assert_int_equal(source_of(out, n, 4), 13);
  assert_int_equal(source_of(out, n, 5), 11);
  assert_int_equal(source_of(out, n, 6), 21);
  assert_int_equal(source_of(out, n, 7), host_extra);
  maelys__executor_launch_dispose(&launch);
}

static void expect_refused(maelys_backend_launch_t* launch,
                           maelys__fd_sources_t src, const char* needle) {
  maelys__proc_fd_t out[8];
  size_t n = 99;
  char* err = NULL;
  assert_int_equal(
      maelys__launch_resolve_fds(launch, &src, "example", out, 8, &n, &err),
      MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_int_equal(n, 0);
  assert_non_null(err);
  if (strstr(err, needle) == NULL)
    fail_msg("'%s' does not mention '%s'", err, needle);
  maelys_executor_error_free(err);
}

/* An entry that names nothing is refused, never left out. */
static void test_unresolvable_entries_refused(void** state) {
  (void)state;
  maelys_backend_launch_t launch;
  /* A payload descriptor below the limit that the layout does not have
   * (CAPTURED has no 3). */
  maelys__executor_launch_init(&launch, 5);
  assert_int_equal(maelys_backend_launch_map_fd(
                       &launch, 3, MAELYS_BACKEND_FD_PAYLOAD, 3, NULL),
                   0);
  maelys__fd_sources_t captured = {payload, 3, -1, -1, -1, -1, -1};
  expect_refused(&launch, captured,
                 "backend 'example' maps child fd 3 to a descriptor");
  maelys__executor_launch_dispose(&launch);
  /* The status channel of a launch that did not ask for one. */
  maelys__executor_launch_init(&launch, 5);
  assert_int_equal(maelys_backend_launch_map_fd(
                       &launch, 2, MAELYS_BACKEND_FD_STATUS, 0, NULL),
                   0);
  expect_refused(&launch, sources(-1, -1), "child fd 2");
  maelys__executor_launch_dispose(&launch);
  /* A lifeline that was not made. */
  maelys__executor_launch_init(&launch, 5);
  assert_int_equal(maelys_backend_launch_map_fd(
                       &launch, 9, MAELYS_BACKEND_FD_LIFELINE, 0, NULL),
                   0);
  expect_refused(&launch, sources(20, -1), "child fd 9");
  maelys__executor_launch_dispose(&launch);
  /* A terminal rendezvous outside a terminal session. */
  maelys__executor_launch_init(&launch, 5);
  assert_int_equal(maelys_backend_launch_map_fd(
                       &launch, 12, MAELYS_BACKEND_FD_TERMINAL, 0, NULL),
                   0);
  expect_refused(&launch, sources(20, 21), "child fd 12");
  maelys__executor_launch_dispose(&launch);
  /* A memory cgroup's procs file where the core made no cgroup (the plan
   * sets no ceiling): the image cannot be told to join one. */
  maelys__executor_launch_init(&launch, 5);
  assert_int_equal(maelys_backend_launch_map_fd(
                       &launch, 13, MAELYS_BACKEND_FD_CGROUP, 0, NULL),
                   0);
  expect_refused(&launch, sources(20, 21), "child fd 13");
  maelys__executor_launch_dispose(&launch);
}

/* `source` mapped at child fd 12 (and the payload's 0) resolves to the
 * core's descriptor 22 of that kind. */
static void resolves_to_the_cores(maelys_backend_fd_source_t source,
                                  maelys__fd_sources_t src) {
  maelys_backend_launch_t launch;
  maelys__executor_launch_init(&launch, 5);
  assert_int_equal(maelys_backend_launch_map_fd(
                       &launch, 0, MAELYS_BACKEND_FD_PAYLOAD, 0, NULL),
                   0);
  assert_int_equal(maelys_backend_launch_map_fd(&launch, 12, source, 0, NULL),
                   0);
  assert_true(maelys__launch_maps(&launch, source));
  maelys__proc_fd_t out[8];
  size_t n = 0;
  assert_int_equal(
      maelys__launch_resolve_fds(&launch, &src, "bubblewrap", out, 8, &n, NULL),
      MAELYS_EXECUTOR_OK);
  assert_int_equal(n, 2);
  assert_int_equal(source_of(out, n, 0), 10);
  assert_int_equal(source_of(out, n, 12), 22);
  maelys__executor_launch_dispose(&launch);
}

/* MAELYS_EXEC_IO_TTY: the terminal source is the rendezvous' child end. */
static void test_terminal_rendezvous_resolved(void** state) {
  (void)state;
  maelys__fd_sources_t src = sources(20, 21);
  src.terminal_fd = 22;
  resolves_to_the_cores(MAELYS_BACKEND_FD_TERMINAL, src);
}

/* MAELYS_BACKEND_LAUNCH_IMAGE_JOINS_CGROUP: the cgroup source is the core's
 * descriptor of the cgroup's procs file. */
static void test_cgroup_procs_resolved(void** state) {
  (void)state;
  maelys__fd_sources_t src = sources(20, 21);
  src.cgroup_fd = 22;
  resolves_to_the_cores(MAELYS_BACKEND_FD_CGROUP, src);
}

static void test_too_small_an_output(void** state) {
  (void)state;
  maelys_backend_launch_t launch;
  maelys__executor_launch_init(&launch, 5);
  maelys__proc_fd_t out[4];
  size_t n = 99;
  char* err = NULL;
  maelys__fd_sources_t src = sources(-1, -1);
  assert_int_equal(
      maelys__launch_resolve_fds(&launch, &src, "posix", out, 4, &n, &err),
      MAELYS_EXECUTOR_ERR_MEMORY);
  assert_int_equal(n, 0);
  maelys_executor_error_free(err);
  maelys__executor_launch_dispose(&launch);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unmapped_is_the_payload_layout),
      cmocka_unit_test(test_map_of_a_wrapped_launch),
      cmocka_unit_test(test_unresolvable_entries_refused),
      cmocka_unit_test(test_terminal_rendezvous_resolved),
      cmocka_unit_test(test_cgroup_procs_resolved),
      cmocka_unit_test(test_too_small_an_output),
  };
  return cmocka_run_group_tests_name("launch-fds", tests, NULL, NULL);
}
