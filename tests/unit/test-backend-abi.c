/*
 * The backend ABI and the backend SDK, through the public headers alone:
 * registration accepts every backend ABI version from 1 up, refuses a future
 * one and a vtable smaller than its version needs, reads nothing beyond the
 * struct_size a vtable declares, and the SDK services behave as backend.h
 * says.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "maelys/backend.h"

#define BAD(call, code, needle)                                                \
  do {                                                                         \
    char* err = NULL;                                                          \
    maelys_executor_result_t r_ = (call);                                      \
    if ((int)r_ != (int)(code))                                                \
      fail_msg("%s: got %s", #call, maelys_executor_result_name(r_));          \
    if (err == NULL || strstr(err, (needle)) == NULL)                          \
      fail_msg("diagnostic '%s' does not mention '%s'", err ? err : "",        \
               (needle));                                                      \
    maelys_executor_error_free(err);                                           \
  } while (0)

/* The size of a vtable as a backend built for ABI 1 declares it: its last
 * slot is status_line. */
#define ABI1_SIZE                                                              \
  (offsetof(maelys_backend_t, status_line) +                                   \
   sizeof(((maelys_backend_t*)0)->status_line))

static int probes;

static maelys_executor_result_t
old_create(const maelys_backend_options_t* options, void** out_state,
           char** out_error) {
  (void)options;
  (void)out_error;
  *out_state = NULL;
  return MAELYS_EXECUTOR_OK;
}

static maelys_executor_result_t
old_probe(void* state, maelys_backend_probe_t* probe, char** out_error) {
  (void)state;
  (void)out_error;
  probes++;
  maelys_backend_probe_prove(probe, MAELYS_BACKEND_CAP_SECCOMP);
  return MAELYS_EXECUTOR_OK;
}

static maelys_executor_result_t
old_prepare(void* state, uint64_t proved, const maelys_executor_plan_t* plan,
            const maelys_execution_request_t* request,
            maelys_backend_launch_t* launch, char** out_error) {
  (void)state;
  (void)proved;
  (void)plan;
  (void)request;
  (void)launch;
  (void)out_error;
  return MAELYS_EXECUTOR_OK;
}

/* A vtable of `size` bytes whose last byte is the last readable byte of a
 * mapping: a read past it faults. */
typedef struct guarded {
  void* map;
  size_t map_size;
  maelys_backend_t* vt;
} guarded_t;

static void guarded_init(guarded_t* g, uint32_t version, size_t size) {
  long page = sysconf(_SC_PAGESIZE);
  g->map_size = 2 * (size_t)page;
  g->map = mmap(NULL, g->map_size, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(g->map != MAP_FAILED);
  assert_int_equal(mprotect((char*)g->map + page, (size_t)page, PROT_NONE), 0);
  /* Only the first `size` bytes are written: a backend built for an older
   * ABI has nothing of the newer slots. */
  maelys_backend_t full = {
      .abi_version = version,
      .struct_size = (uint32_t)size,
      .name = "old-backend",
      .create = old_create,
      .probe = old_probe,
      .prepare = old_prepare,
  };
  g->vt = (maelys_backend_t*)((char*)g->map + page - size);
  memcpy(g->vt, &full, size);
}

static void guarded_dispose(guarded_t* g) {
  munmap(g->map, g->map_size);
}

static void test_older_abi_versions_register(void** state) {
  (void)state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  for (uint32_t version = 1; version <= MAELYS_BACKEND_ABI_VERSION; version++) {
    maelys_executor_t* ex = NULL;
    assert_int_equal(maelys_executor_create(&loop, &ex, NULL), 0);
    guarded_t g;
    guarded_init(&g, version, ABI1_SIZE);
    probes = 0;
    char* err = NULL;
    if (maelys_executor_register_backend(ex, g.vt, NULL, &err) != 0)
      fail_msg("ABI %u: %s", version, err);
    assert_int_equal(probes, 1);
    uint64_t mask = 0;
    assert_int_equal(
        maelys_executor_backend_capabilities(ex, "old-backend", &mask, NULL),
        0);
    assert_int_equal(mask, MAELYS_BACKEND_CAP_SECCOMP);
    assert_int_equal(maelys_executor_destroy(ex, NULL), 0);
    guarded_dispose(&g);
  }
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_abi_refusals(void** state) {
  (void)state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  maelys_executor_t* ex = NULL;
  assert_int_equal(maelys_executor_create(&loop, &ex, NULL), 0);
  maelys_backend_t vt = {
      .abi_version = MAELYS_BACKEND_ABI_VERSION + 1,
      .struct_size = sizeof(maelys_backend_t),
      .name = "future",
      .create = old_create,
      .probe = old_probe,
      .prepare = old_prepare,
  };
  /* A future version may have slots whose meaning this library cannot
   * know: refused, naming both versions. */
  BAD(maelys_executor_register_backend(ex, &vt, NULL, &err),
      MAELYS_EXECUTOR_ERR_UNSUPPORTED, "this library speaks 1 to");
  vt.abi_version = 0;
  BAD(maelys_executor_register_backend(ex, &vt, NULL, &err),
      MAELYS_EXECUTOR_ERR_UNSUPPORTED, "backend ABI 0");
  /* A vtable smaller than its version's slots. */
  vt.abi_version = 1;
  vt.struct_size = (uint32_t)offsetof(maelys_backend_t, prepare);
  BAD(maelys_executor_register_backend(ex, &vt, NULL, &err),
      MAELYS_EXECUTOR_ERR_ARGUMENT, "too small for backend ABI 1");
  assert_int_equal(maelys_executor_backend_count(ex), 0);
  assert_int_equal(maelys_executor_destroy(ex, NULL), 0);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* maelys_backend_probe_run refuses what it cannot run, before running
 * anything. */
static void test_probe_run_refusals(void** state) {
  (void)state;
  maelys_backend_probe_run_t run;
  memset(&run, 0, sizeof run);
  maelys_backend_probe_run_t* runs[] = {&run};
  BAD(maelys_backend_probe_run(NULL, NULL, 0, runs, 1, &err),
      MAELYS_EXECUTOR_ERR_ARGUMENT, "backend and runs are required");
  /* Not set up with maelys_backend_probe_run_init: no struct_size. */
  BAD(maelys_backend_probe_run(maelys_backend_posix(), NULL, 0, runs, 1, &err),
      MAELYS_EXECUTOR_ERR_ARGUMENT, "maelys_backend_probe_run_init");
  maelys_backend_probe_run_init(&run, NULL, NULL);
  assert_int_equal(run.struct_size, sizeof run);
  assert_true(run.timeout_ms > 0);
  BAD(maelys_backend_probe_run(maelys_backend_posix(), NULL, 0, runs, 1, &err),
      MAELYS_EXECUTOR_ERR_ARGUMENT, "has no plan or request");
  assert_null(run.output);
  assert_null(run.spawn_error);
  maelys_backend_probe_run_dispose(&run);
  maelys_backend_probe_run_dispose(NULL);
}

static void test_sdk_services(void** state) {
  (void)state;
  /* maelys_backend_fail fills an empty slot once and returns the code. */
  char* err = NULL;
  assert_int_equal(maelys_backend_fail(&err, MAELYS_EXECUTOR_ERR_DENIED,
                                       "rule %d at '%s'", 3, "/x"),
                   MAELYS_EXECUTOR_ERR_DENIED);
  assert_string_equal(err, "rule 3 at '/x'");
  assert_int_equal(maelys_backend_fail(&err, MAELYS_EXECUTOR_ERR_IO, "second"),
                   MAELYS_EXECUTOR_ERR_IO);
  assert_string_equal(err, "rule 3 at '/x'");
  maelys_executor_error_free(err);
  assert_int_equal(maelys_backend_fail(NULL, MAELYS_EXECUTOR_ERR_IO, "x"),
                   MAELYS_EXECUTOR_ERR_IO);

  char* s = maelys_backend_asprintf("%s-%u", "abi", 3u);
  assert_string_equal(s, "abi-3");
  free(s);

  int* items = NULL;
  size_t capacity = 0;
  assert_int_equal(
      maelys_backend_reserve((void**)&items, &capacity, sizeof *items, 100), 0);
  assert_true(capacity >= 100);
  items[99] = 7;
  free(items);

  assert_true(maelys_backend_path_is_clean("/usr/bin"));
  assert_true(maelys_backend_path_is_clean("/"));
  assert_false(maelys_backend_path_is_clean("usr/bin"));
  assert_false(maelys_backend_path_is_clean("/usr/../bin"));
  assert_false(maelys_backend_path_is_clean("/usr/"));
  assert_false(maelys_backend_path_is_clean(NULL));

  /* The no-follow open refuses a symbolic link in any component. */
  char dir[] = "/tmp/maelys-sdk-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char link[64], file[64], through[96];
  snprintf(file, sizeof file, "%s/file", dir);
  snprintf(link, sizeof link, "%s/link", dir);
  snprintf(through, sizeof through, "%s/link/file", dir);
  int fd = open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(symlink(dir, link), 0);
  fd = maelys_backend_open_nofollow(file);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(maelys_backend_open_nofollow(link), -ELOOP);
  assert_int_equal(maelys_backend_open_nofollow(through), -ELOOP);
  unlink(link);
  unlink(file);
  rmdir(dir);

  /* Host root: uid 0 whose user namespace maps every uid to itself. */
  unsigned long inside = 1, outside = 1, count = 0;
  FILE* f = fopen("/proc/self/uid_map", "re");
  if (f != NULL) {
    if (fscanf(f, "%lu %lu %lu", &inside, &outside, &count) != 3)
      count = 0;
    fclose(f);
  }
  int initial = inside == 0 && outside == 0 && count == 4294967295UL;
  assert_int_equal(maelys_backend_host_root() != 0, geteuid() == 0 && initial);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_older_abi_versions_register),
      cmocka_unit_test(test_abi_refusals),
      cmocka_unit_test(test_probe_run_refusals),
      cmocka_unit_test(test_sdk_services),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
