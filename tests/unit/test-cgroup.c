/* The sweep of stale execution cgroups never takes one a live host is
 * about to use (a concurrent host's launch once failed with "join the
 * execution's cgroup: No such file or directory"). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cgroup.h"

static void test_sweep_keeps_a_live_hosts_empty_cgroup(void** state) {
  (void)state;
  maelys__cgroup_parent_t parent;
  maelys__cgroup_find_memory(&parent);
  assert_true(parent.path[0] != '\0');
  maelys__cgroup_t cg;
  char error[256] = "";
  assert_int_equal(maelys__cgroup_create(&parent, "sweep-test", 1 << 26, &cg,
                                         error, sizeof error),
                   0);
  assert_non_null(strstr(cg.name, "maelys-"));
  /* Another host (a child process) starts up and sweeps. */
  pid_t child = fork();
  if (child == 0) {
    maelys__cgroup_parent_t other;
    maelys__cgroup_find_memory(&other);
    _exit(0);
  }
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  struct stat st;
  assert_int_equal(fstatat(cg.parent_fd, cg.name, &st, 0), 0);
  maelys__cgroup_remove(&cg);
}

int main(void) {
  maelys__cgroup_parent_t parent;
  maelys__cgroup_find_memory(&parent);
  if (parent.path[0] == '\0') {
    /* Optional: without a writable memory cgroup there is nothing to sweep
     * (ctest shows this as Skipped, with the reason). */
    printf("skipped: %s\n", parent.why);
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sweep_keeps_a_live_hosts_empty_cgroup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
