/*
 * The backend ABI and the backend SDK, through the public headers alone:
 * registration accepts every backend ABI version from 1 up, refuses a future
 * one and a vtable smaller than its version needs, reads nothing beyond the
 * struct_size a vtable declares, and the SDK services behave as backend.h
 * says.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
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

/* ABI 6 adds proof_key. */
#define ABI6_SIZE                                                              \
  (offsetof(maelys_backend_t, proof_key) +                                     \
   sizeof(((maelys_backend_t*)0)->proof_key))

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
    /* Slots up to ABI 5 are ABI 1's; ABI 6 adds proof_key. */
    guarded_init(&g, version, version >= 6 ? ABI6_SIZE : ABI1_SIZE);
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
  /* The directory form: readable, and only a directory. */
  fd = maelys_backend_open_dir_nofollow(dir);
  assert_true(fd >= 0);
  assert_int_equal(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
  close(fd);
  assert_int_equal(maelys_backend_open_dir_nofollow(file), -ENOTDIR);
  assert_int_equal(maelys_backend_open_dir_nofollow(link), -ELOOP);
  assert_int_equal(maelys_backend_open_dir_nofollow(NULL), -EINVAL);
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

/* ------------------------------------------------------------ proof cache */

static char cache_key[64] = "helper=1";
static uint64_t cache_proves = MAELYS_BACKEND_CAP_SECCOMP;

static int keyed_proof_key(void* state, char* key, size_t size) {
  (void)state;
  snprintf(key, size, "%s", cache_key);
  return cache_key[0] == '\0' ? -1 : 0;
}

static maelys_executor_result_t
keyed_probe(void* state, maelys_backend_probe_t* probe, char** out_error) {
  (void)state;
  (void)out_error;
  probes++;
  maelys_backend_probe_prove(probe, cache_proves);
  maelys_backend_probe_missing(probe, MAELYS_BACKEND_CAP_NETWORK_NONE,
                               "no network here");
  return MAELYS_EXECUTOR_OK;
}

static const maelys_backend_t keyed = {
    .abi_version = 6,
    .struct_size = sizeof(maelys_backend_t),
    .name = "keyed",
    .create = old_create,
    .probe = keyed_probe,
    .prepare = old_prepare,
    .proof_key = keyed_proof_key,
};

/* Registers `vt` on a new executor with the cache `dir` (max age `age`):
 * whether the proof came from the cache; *mask what it proved. */
static int register_cached(const maelys_backend_t* vt, const char* dir,
                           unsigned age, uint64_t* mask, char** why) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  maelys_executor_t* ex = NULL;
  assert_int_equal(maelys_executor_create(&loop, &ex, NULL), 0);
  char* err = NULL;
  if (maelys_executor_set_proof_cache(ex, dir, age, &err) != 0)
    fail_msg("set_proof_cache: %s", err);
  if (maelys_executor_register_backend(ex, vt, NULL, &err) != 0)
    fail_msg("register: %s", err);
  int cached = -1;
  assert_int_equal(
      maelys_executor_backend_proof_cached(ex, vt->name, &cached, NULL), 0);
  assert_int_equal(
      maelys_executor_backend_capabilities(ex, vt->name, mask, NULL), 0);
  if (why != NULL)
    assert_int_equal(
        maelys_executor_backend_missing_reason(
            ex, vt->name, MAELYS_BACKEND_CAP_NETWORK_NONE, why, NULL),
        0);
  assert_int_equal(maelys_executor_destroy(ex, NULL), 0);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
  return cached;
}

/* The one record of the cache directory `dir` (its path into `out`). */
static void only_record(const char* dir, char* out, size_t size) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "ls %s/keyed-*.json", dir);
  FILE* f = popen(cmd, "r");
  assert_non_null(f);
  assert_non_null(fgets(out, (int)size, f));
  out[strcspn(out, "\n")] = '\0';
  pclose(f);
}

/* Rewrites the value of `field` in the record at `path` (compact JSON) to
 * `value`, in place, keeping the record's owner and mode. */
static void rewrite_field(const char* path, const char* field,
                          const char* value) {
  char buf[8192], out[8192], pat[64];
  FILE* f = fopen(path, "r");
  assert_non_null(f);
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  snprintf(pat, sizeof pat, "\"%s\":", field);
  char* at = strstr(buf, pat);
  assert_non_null(at);
  char* v = at + strlen(pat);
  char* end = v;
  while (*end != ',' && *end != '}')
    end++;
  snprintf(out, sizeof out, "%.*s%s%s", (int)(v - buf), buf, value, end);
  f = fopen(path, "w");
  assert_non_null(f);
  fputs(out, f);
  fclose(f);
}

static void test_proof_cache(void** state) {
  (void)state;
  char dir[] = "/tmp/maelys-proof-test-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char cache[128], record[512];
  snprintf(cache, sizeof cache, "%s/proofs", dir);
  uint64_t mask = 0;
  char* why = NULL;
  snprintf(cache_key, sizeof cache_key, "helper=1");
  cache_proves = MAELYS_BACKEND_CAP_SECCOMP;

  /* First registration probes and keeps the proof; the next reuses it,
   * with the reasons of what was not proved. */
  probes = 0;
  assert_int_equal(register_cached(&keyed, cache, 3600, &mask, NULL), 0);
  assert_int_equal(probes, 1);
  assert_int_equal(register_cached(&keyed, cache, 3600, &mask, &why), 1);
  assert_int_equal(probes, 1);
  assert_int_equal(mask, MAELYS_BACKEND_CAP_SECCOMP);
  assert_string_equal(why, "no network here");
  maelys_executor_string_free(why);
  why = NULL;
  struct stat st;
  assert_int_equal(stat(cache, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);

  /* What the proof depends on changed (the backend's key): probed again. */
  snprintf(cache_key, sizeof cache_key, "helper=2");
  assert_int_equal(register_cached(&keyed, cache, 3600, &mask, NULL), 0);
  assert_int_equal(probes, 2);
  assert_int_equal(register_cached(&keyed, cache, 3600, &mask, NULL), 1);
  assert_int_equal(probes, 2);

  /* Max age 0: always probed (and the record refreshed). */
  assert_int_equal(register_cached(&keyed, cache, 0, &mask, NULL), 0);
  assert_int_equal(probes, 3);

  /* A record anybody else could have written is not trusted. */
  char rm[600];
  snprintf(rm, sizeof rm, "rm -f %s/keyed-*.json", cache);
  assert_int_equal(system(rm), 0);
  assert_int_equal(register_cached(&keyed, cache, 3600, &mask, NULL), 0);
  only_record(cache, record, sizeof record);
  assert_int_equal(chmod(record, 0666), 0);
  assert_int_equal(register_cached(&keyed, cache, 3600, &mask, NULL), 0);
  /* ... and a planted one (a symbolic link to a record) neither. */
  char elsewhere[600];
  snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere.json", dir);
  assert_int_equal(rename(record, elsewhere), 0);
  assert_int_equal(symlink(elsewhere, record), 0);
  int before = probes;
  assert_int_equal(register_cached(&keyed, cache, 3600, &mask, NULL), 0);
  assert_int_equal(probes, before + 1);
  /* A forged record (another mask, same key) under the right owner is
   * still the user's own: what the cache guards against is other users
   * and sandboxes, by the directory's and the record's owner and mode. */

  /* A record whose fields were tampered with is not used: a mask that is
   * not plain hexadecimal, a date that would overflow the age check. */
  assert_int_equal(system(rm), 0);
  assert_int_equal(register_cached(&keyed, cache, 3600, &mask, NULL), 0);
  only_record(cache, record, sizeof record);
  rewrite_field(record, "proved", "\"-1\"");
  assert_int_equal(register_cached(&keyed, cache, 3600, &mask, NULL), 0);
  assert_int_equal(mask, MAELYS_BACKEND_CAP_SECCOMP);
  rewrite_field(record, "written", "-9223372036854775808");
  assert_int_equal(register_cached(&keyed, cache, 3600, &mask, NULL), 0);
  /* A FIFO at the record's name does not hang the registration. */
  assert_int_equal(unlink(record), 0);
  assert_int_equal(mkfifo(record, 0600), 0);
  assert_int_equal(register_cached(&keyed, cache, 3600, &mask, NULL), 0);

  /* A probe that proved nothing is not kept. */
  assert_int_equal(system(rm), 0);
  cache_proves = 0;
  assert_int_equal(register_cached(&keyed, cache, 3600, &mask, NULL), 0);
  assert_int_equal(register_cached(&keyed, cache, 3600, &mask, NULL), 0);
  cache_proves = MAELYS_BACKEND_CAP_SECCOMP;

  /* A backend without a key (or whose key is refused) is always probed. */
  cache_key[0] = '\0';
  before = probes;
  assert_int_equal(register_cached(&keyed, cache, 3600, &mask, NULL), 0);
  assert_int_equal(register_cached(&keyed, cache, 3600, &mask, NULL), 0);
  assert_int_equal(probes, before + 2);

  /* A cache directory others can write is refused, naming why. */
  assert_int_equal(chmod(cache, 0777), 0);
  uv_loop_t loop;
  uv_loop_init(&loop);
  maelys_executor_t* ex = NULL;
  assert_int_equal(maelys_executor_create(&loop, &ex, NULL), 0);
  BAD(maelys_executor_set_proof_cache(ex, cache, 60, &err),
      MAELYS_EXECUTOR_ERR_DENIED, "nobody else can write");
  BAD(maelys_executor_set_proof_cache(ex, "relative", 60, &err),
      MAELYS_EXECUTOR_ERR_ARGUMENT, "not an absolute path");
  BAD(maelys_executor_set_proof_cache(NULL, cache, 60, &err),
      MAELYS_EXECUTOR_ERR_ARGUMENT, "executor is required");
  int cached = -1;
  BAD(maelys_executor_backend_proof_cached(ex, "keyed", NULL, &err),
      MAELYS_EXECUTOR_ERR_ARGUMENT, "out_cached is NULL");
  BAD(maelys_executor_backend_proof_cached(ex, "nothing", &cached, &err),
      MAELYS_EXECUTOR_ERR_NOT_FOUND, "no backend named");
  assert_int_equal(cached, 0);
  assert_int_equal(maelys_executor_destroy(ex, NULL), 0);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
  snprintf(rm, sizeof rm, "rm -rf %s", dir);
  assert_int_equal(system(rm), 0);
}

/* A backend that says its image joins the memory cgroup itself (ABI 7):
 * with `map` it maps the cgroup's procs file at 3, without it it does not. */
static bool joiner_maps;

static maelys_executor_result_t
joiner_probe(void* state, maelys_backend_probe_t* probe, char** out_error) {
  (void)state;
  (void)out_error;
  maelys_backend_probe_prove(probe, ~UINT64_C(0));
  return MAELYS_EXECUTOR_OK;
}

static maelys_executor_result_t
joiner_prepare(void* state, uint64_t proved, const maelys_executor_plan_t* plan,
               const maelys_execution_request_t* request,
               maelys_backend_launch_t* launch, char** out_error) {
  (void)state;
  (void)proved;
  (void)plan;
  (void)request;
  static const char* const argv[] = {"true", NULL};
  maelys_executor_result_t r = maelys_backend_launch_set_image(
      launch, "/bin/true", argv, NULL, out_error);
  if (r == MAELYS_EXECUTOR_OK && joiner_maps)
    r = maelys_backend_launch_map_fd(launch, 3, MAELYS_BACKEND_FD_CGROUP, 0,
                                     out_error);
  maelys_backend_launch_set_flags(launch,
                                  MAELYS_BACKEND_LAUNCH_MEMORY_CGROUP |
                                      MAELYS_BACKEND_LAUNCH_IMAGE_JOINS_CGROUP);
  return r;
}

static const maelys_backend_t joiner = {
    .abi_version = MAELYS_BACKEND_ABI_VERSION,
    .struct_size = sizeof(maelys_backend_t),
    .name = "joiner",
    .create = old_create,
    .probe = joiner_probe,
    .prepare = joiner_prepare,
};

/* A sealed plan (read-only root, no network, an optional memory ceiling)
 * and a request for /bin/true on the backend `name`. */
static void plan_and_request(const char* name, uint64_t memory,
                             maelys_executor_plan_t** plan,
                             maelys_execution_request_t** req) {
  assert_int_equal(maelys_executor_plan_create(plan, NULL), 0);
  assert_int_equal(maelys_executor_plan_set_root(
                       *plan, MAELYS_EXECUTOR_ROOT_READONLY, 0, NULL),
                   0);
  assert_int_equal(maelys_executor_plan_set_network(
                       *plan, MAELYS_EXECUTOR_NETWORK_NONE, NULL),
                   0);
  if (memory > 0)
    assert_int_equal(maelys_executor_plan_set_limit(
                         *plan, MAELYS_EXECUTOR_LIMIT_MEMORY, memory, NULL),
                     0);
  char* seal_error = NULL;
  if (maelys_executor_plan_seal(*plan, &seal_error) != MAELYS_EXECUTOR_OK)
    fail_msg("seal: %s", seal_error);
  assert_int_equal(maelys_execution_request_create(req, NULL), 0);
  static const char* const argv[] = {"true", NULL};
  assert_int_equal(
      maelys_execution_request_set_executable(*req, "/bin/true", NULL), 0);
  assert_int_equal(maelys_execution_request_set_argv(*req, argv, NULL), 0);
  assert_int_equal(maelys_execution_request_set_backend(*req, name, NULL), 0);
}

static maelys_executor_result_t joiner_spawn(maelys_executor_t* ex,
                                             uint64_t memory, char** err) {
  maelys_executor_plan_t* plan = NULL;
  maelys_execution_request_t* req = NULL;
  plan_and_request("joiner", memory, &plan, &req);
  maelys_execution_t* e = NULL;
  maelys_executor_result_t r = maelys_execution_spawn(ex, plan, req, &e, err);
  assert_null(e);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  return r;
}

/* A backend whose image joins the memory cgroup itself must be given the
 * cgroup's procs file when the core makes one, and cannot be given one
 * when it makes none: either way nothing is launched. (Only uid 0 can make
 * a memory cgroup here; elsewhere the spawn fails earlier, saying so.) */
static void test_image_joins_cgroup_refusals(void** state) {
  (void)state;
  uv_loop_t loop;
  uv_loop_init(&loop);
  maelys_executor_t* ex = NULL;
  assert_int_equal(maelys_executor_create(&loop, &ex, NULL), 0);
  assert_int_equal(maelys_executor_register_backend(ex, &joiner, NULL, NULL),
                   0);
  char* err = NULL;
  joiner_maps = false;
  maelys_executor_result_t r = joiner_spawn(ex, UINT64_C(64) << 20, &err);
  if (geteuid() != 0) {
    print_message("not root: no memory cgroup to join (%s)\n", err);
    assert_int_not_equal(r, MAELYS_EXECUTOR_OK);
    assert_non_null(strstr(err, "memory ceiling"));
  } else {
    assert_int_equal(r, MAELYS_EXECUTOR_ERR_ARGUMENT);
    assert_non_null(strstr(err, "joins the memory cgroup itself but maps no "
                                "MAELYS_BACKEND_FD_CGROUP"));
  }
  maelys_executor_error_free(err);
  err = NULL;
  joiner_maps = true;
  assert_int_equal(joiner_spawn(ex, 0, &err), MAELYS_EXECUTOR_ERR_ARGUMENT);
  assert_non_null(strstr(err, "maps child fd 3 to a descriptor that does not"));
  maelys_executor_error_free(err);
  assert_int_equal(maelys_executor_destroy(ex, NULL), 0);
  uv_loop_close(&loop);
}

/* A backend whose launcher writes its status channel in awkward pieces: the
 * core hands status_line each whole line once, a line split across writes
 * as one, the last line even without its newline, and drops (never splits)
 * a line longer than 1023 bytes. */
#define LINER_MAX 16
static struct {
  size_t count;
  size_t length[LINER_MAX];
  char first[LINER_MAX];
  bool uniform[LINER_MAX];
} liner_seen;

static void liner_status_line(void* state, const char* line, size_t length,
                              maelys_backend_event_t* out_event) {
  (void)state;
  (void)out_event;
  if (liner_seen.count >= LINER_MAX)
    return;
  size_t k = liner_seen.count++;
  liner_seen.length[k] = length;
  liner_seen.first[k] = length > 0 ? line[0] : '\0';
  liner_seen.uniform[k] = true;
  for (size_t i = 1; i < length; i++)
    if (line[i] != line[0])
      liner_seen.uniform[k] = false;
}

/* The launch of a wrapped image that is `/bin/sh -c script`, with the
 * payload's stdio and the status channel at 3. */
static maelys_executor_result_t shell_launch(maelys_backend_launch_t* launch,
                                             const char* script,
                                             char** out_error) {
  const char* const argv[] = {"sh", "-c", script, NULL};
  maelys_executor_result_t r =
      maelys_backend_launch_set_image(launch, "/bin/sh", argv, NULL, out_error);
  for (int fd = 0; fd < 3 && r == MAELYS_EXECUTOR_OK; fd++)
    r = maelys_backend_launch_map_fd(launch, fd, MAELYS_BACKEND_FD_PAYLOAD, fd,
                                     out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_backend_launch_map_fd(launch, 3, MAELYS_BACKEND_FD_STATUS, 0,
                                     out_error);
  maelys_backend_launch_set_flags(launch, MAELYS_BACKEND_LAUNCH_STATUS_CHANNEL);
  return r;
}

static maelys_executor_result_t
liner_prepare(void* state, uint64_t proved, const maelys_executor_plan_t* plan,
              const maelys_execution_request_t* request,
              maelys_backend_launch_t* launch, char** out_error) {
  (void)state;
  (void)proved;
  (void)plan;
  (void)request;
  /* "ab" arrives 50 ms before "cd": one line. Then lines of 1023 and 1024
   * bytes, one of 5000 (longer than one read), a short one, and "ef" with
   * no newline before the end of file. */
  return shell_launch(
      launch,
      "exec 1>&3; printf ab; sleep 0.05; printf 'cd\\n'; "
      "line() { head -c $1 /dev/zero | tr '\\0' $2; printf '\\n'; }; "
      "line 1023 x; line 1024 y; line 5000 z; printf 'gh\\n'; printf ef",
      out_error);
}

static const maelys_backend_t liner = {
    .abi_version = MAELYS_BACKEND_ABI_VERSION,
    .struct_size = sizeof(maelys_backend_t),
    .name = "liner",
    .create = old_create,
    .probe = joiner_probe,
    .prepare = liner_prepare,
    .status_line = liner_status_line,
};

static void liner_done(maelys_execution_t* e,
                       const maelys_execution_status_t* status, void* data) {
  (void)status;
  *(bool*)data = true;
  maelys_execution_release(e);
}

/* Runs one execution of `backend` to its end on a loop of its own. With
 * `exit_first`, the image's exit is awaited before the loop runs at all. */
static void run_to_end(const maelys_backend_t* backend, bool exit_first) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  maelys_executor_t* ex = NULL;
  assert_int_equal(maelys_executor_create(&loop, &ex, NULL), 0);
  assert_int_equal(maelys_executor_register_backend(ex, backend, NULL, NULL),
                   0);
  maelys_executor_plan_t* plan = NULL;
  maelys_execution_request_t* req = NULL;
  plan_and_request(backend->name, 0, &plan, &req);
  maelys_execution_t* e = NULL;
  char* err = NULL;
  if (maelys_execution_spawn(ex, plan, req, &e, &err) != MAELYS_EXECUTOR_OK)
    fail_msg("spawn: %s", err);
  if (exit_first) {
    int pidfd = (int)syscall(SYS_pidfd_open, maelys_execution_pid(e), 0);
    assert_true(pidfd >= 0);
    struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
    assert_int_equal(poll(&pfd, 1, 20000), 1);
    close(pidfd);
  }
  bool done = false;
  assert_int_equal(maelys_execution_wait(e, liner_done, &done, NULL), 0);
  while (!done)
    uv_run(&loop, UV_RUN_ONCE);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
  assert_int_equal(maelys_executor_destroy(ex, NULL), 0);
  assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_status_lines_whole_and_bounded(void** state) {
  (void)state;
  memset(&liner_seen, 0, sizeof liner_seen);
  run_to_end(&liner, false);
  assert_int_equal(liner_seen.count, 4);
  static const size_t lengths[] = {4, 1023, 2, 2};
  static const char firsts[] = {'a', 'x', 'g', 'e'};
  for (size_t k = 0; k < 4; k++) {
    assert_int_equal(liner_seen.length[k], lengths[k]);
    assert_int_equal(liner_seen.first[k], firsts[k]);
  }
  assert_true(liner_seen.uniform[1]);
}

/* A probe whose loop stalls past the tree's deadline while the output's end
 * is already waiting (a loaded or instrumented host): the end is read
 * before the deadline is judged, so the tree is not taken for one that
 * outlived its end. The stall is this backend's status callback, which
 * sleeps through the 3 s deadline on the line the image writes after its
 * marker; the image has exited by then. */
static void staller_status_line(void* state, const char* line, size_t length,
                                maelys_backend_event_t* out_event) {
  (void)state;
  (void)out_event;
  if (length == 4 && memcmp(line, "slow", 4) == 0)
    usleep(3500 * 1000);
}

static maelys_executor_result_t
staller_prepare(void* state, uint64_t proved,
                const maelys_executor_plan_t* plan,
                const maelys_execution_request_t* request,
                maelys_backend_launch_t* launch, char** out_error) {
  (void)state;
  (void)proved;
  (void)plan;
  (void)request;
  return shell_launch(launch, "echo marker; sleep 0.2; echo slow >&3; exit 0",
                      out_error);
}

static const maelys_backend_t staller = {
    .abi_version = MAELYS_BACKEND_ABI_VERSION,
    .struct_size = sizeof(maelys_backend_t),
    .name = "staller",
    .create = old_create,
    .probe = joiner_probe,
    .prepare = staller_prepare,
    .status_line = staller_status_line,
};

static void test_probe_stall_does_not_fake_a_survivor(void** state) {
  (void)state;
  maelys_executor_plan_t* plan = NULL;
  maelys_execution_request_t* req = NULL;
  plan_and_request("staller", 0, &plan, &req);
  assert_int_equal(maelys_execution_request_set_io_mode(
                       req, MAELYS_EXEC_IO_CAPTURED, -1, NULL),
                   0);
  maelys_backend_probe_run_t run;
  maelys_backend_probe_run_init(&run, plan, req);
  run.marker = "marker";
  run.end_by_lifeline = 1; /* no lifeline here: the image ends by itself */
  maelys_backend_probe_run_t* runs[] = {&run};
  char* err = NULL;
  if (maelys_backend_probe_run(&staller, NULL, MAELYS_BACKEND_CAP_ALL, runs, 1,
                               &err) != MAELYS_EXECUTOR_OK)
    fail_msg("probe run: %s", err);
  if (!run.spawned)
    fail_msg("not spawned: %s", run.spawn_error ? run.spawn_error : "");
  if (!run.marker_seen)
    fail_msg("no marker (outcome %d, message '%s', output '%s')",
             (int)run.outcome, run.message, run.output ? run.output : "");
  if (run.timed_out || !run.output_eof)
    fail_msg("timed out %d, output ended %d: the stall was taken for a "
             "survivor",
             run.timed_out, run.output_eof);
  maelys_backend_probe_run_dispose(&run);
  maelys_execution_request_destroy(req);
  maelys_executor_plan_destroy(plan);
}

/* The user-database service (ABI 8): an image that maps
 * MAELYS_BACKEND_FD_USERDB asks, one question at a time, whether a uid names
 * a user or a gid a group, and the host answers from its own databases --
 * without the loop turning (the image's questions are answered while the
 * test waits outside it). A malformed question, and one longer than any
 * question, end the conversation: the image reads end-of-file. Each answer
 * comes back on the status channel as "A:answer". */
#define ASKER_MAX 8
static struct {
  size_t count;
  char line[ASKER_MAX][64];
} asker_seen;
static const char* asker_script;

static void asker_status_line(void* state, const char* line, size_t length,
                              maelys_backend_event_t* out_event) {
  (void)state;
  (void)out_event;
  if (asker_seen.count < ASKER_MAX && length < 64) {
    memcpy(asker_seen.line[asker_seen.count], line, length);
    asker_seen.line[asker_seen.count++][length] = '\0';
  }
}

static maelys_executor_result_t
asker_prepare(void* state, uint64_t proved, const maelys_executor_plan_t* plan,
              const maelys_execution_request_t* request,
              maelys_backend_launch_t* launch, char** out_error) {
  (void)state;
  (void)proved;
  (void)plan;
  (void)request;
  maelys_executor_result_t r = shell_launch(launch, asker_script, out_error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_backend_launch_map_fd(launch, 5, MAELYS_BACKEND_FD_USERDB, 0,
                                     out_error);
  return r;
}

static const maelys_backend_t asker = {
    .abi_version = MAELYS_BACKEND_ABI_VERSION,
    .struct_size = sizeof(maelys_backend_t),
    .name = "asker",
    .create = old_create,
    .probe = joiner_probe,
    .prepare = asker_prepare,
    .status_line = asker_status_line,
};

/* Runs the asker with `script` to its end: what it reported. The answers
 * do not wait for the loop: the image finishes its questions while the
 * loop stands still. */
static void run_asker(const char* script) {
  memset(&asker_seen, 0, sizeof asker_seen);
  asker_script = script;
  run_to_end(&asker, true);
}

static void expect_answers(const char* const* want, size_t count) {
  for (size_t i = 0; i < count && i < asker_seen.count; i++)
    if (strcmp(asker_seen.line[i], want[i]) != 0)
      fail_msg("answer %zu: '%s', expected '%s'", i, asker_seen.line[i],
               want[i]);
  if (asker_seen.count != count)
    fail_msg("%zu answers, expected %zu", asker_seen.count, count);
}

static void test_userdb_service_answers(void** state) {
  (void)state;
  /* An id no database names: above every range a system gives out. */
  const uint32_t nobody_id = 4000000001u;
  if (getpwuid(nobody_id) != NULL || getgrgid(nobody_id) != NULL ||
      getpwuid(nobody_id - 1) != NULL || getpwuid(0) == NULL ||
      getgrgid(0) == NULL)
    fail_msg("this host's databases name ids the test takes as unused, or "
             "lack root");
  run_asker("ask() { printf '%s\\n' \"$1\" >&5; "
            "if IFS= read -r a <&5; then echo \"A:$a\" >&3; "
            "else echo A:EOF >&3; fi; }; "
            "ask '0 0'; ask '4000000000 0'; ask '4000000001 4000000001'; "
            "ask '4000000001 4000000001'; ask 'x y'");
  static const char* const answers[] = {"A:user", "A:group", "A:none", "A:none",
                                        "A:EOF"};
  expect_answers(answers, 5);
  /* Past any question's length without a newline; a sign; past 32 bits. */
  run_asker("head -c 40 /dev/zero | tr '\\0' 1 >&5; "
            "if IFS= read -r a <&5; then echo \"A:$a\" >&3; "
            "else echo A:EOF >&3; fi");
  static const char* const overlong[] = {"A:EOF"};
  expect_answers(overlong, 1);
  run_asker("printf '0 +0\\n' >&5; "
            "if IFS= read -r a <&5; then echo \"A:$a\" >&3; "
            "else echo A:EOF >&3; fi");
  expect_answers(overlong, 1);
  run_asker("printf '4294967296 0\\n' >&5; "
            "if IFS= read -r a <&5; then echo \"A:$a\" >&3; "
            "else echo A:EOF >&3; fi");
  expect_answers(overlong, 1);
}

/* A host that forks once its service runs: the child's launches are
 * answered by a service of its own (the parent's thread is not in the
 * child), and the parent's still by its own. */
static void test_userdb_service_after_fork(void** state) {
  (void)state;
  static const char* const script =
      "printf '0 0\\n' >&5; if IFS= read -r a <&5; then echo \"A:$a\" >&3; "
      "else echo A:EOF >&3; fi";
  static const char* const user[] = {"A:user"};
  run_asker(script);
  expect_answers(user, 1);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    run_asker(script);
    _exit(asker_seen.count == 1 && strcmp(asker_seen.line[0], "A:user") == 0
              ? 0
              : 1);
  }
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail_msg("the forked host's launch was not answered (status %d)", status);
  run_asker(script);
  expect_answers(user, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_image_joins_cgroup_refusals),
      cmocka_unit_test(test_older_abi_versions_register),
      cmocka_unit_test(test_abi_refusals),
      cmocka_unit_test(test_proof_cache),
      cmocka_unit_test(test_probe_run_refusals),
      cmocka_unit_test(test_sdk_services),
      cmocka_unit_test(test_status_lines_whole_and_bounded),
      cmocka_unit_test(test_probe_stall_does_not_fake_a_survivor),
      cmocka_unit_test(test_userdb_service_answers),
      cmocka_unit_test(test_userdb_service_after_fork),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
