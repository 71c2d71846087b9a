/*
 * An example trusted registry host: the five-step capability handshake of
 * seeds/001, spelled out step by step, then one sandboxed run.
 *
 *   warden-policy-registry [--helper PATH] [--backend NAME]
 *       [--enforce-backend NAME] [--workspace DIR] [--temp DIR]
 *       [--runtime DIR]... [--mediator ID] [--proc] [--dev] [--tmp MIB]
 *       [--scratch BYTES] --policy FILE.mir -- PROGRAM [ARG...]
 *
 * 1. query the backend --backend (default bubblewrap) for its proved mask;
 * 2. convert that exact mask to portable capabilities;
 * 3. compile the canonical MIR of --policy against the trusted HostContext
 *    (--workspace, --temp, --runtime roots, --mediator) with them;
 * 4. lower the compiled plan into a new sealed Executor plan;
 * 5. set the same backend name on the request. --enforce-backend names
 *    another one for step 5, to show that the handshake refuses it.
 *
 * Then PROGRAM runs with the terminal's stdio, an empty environment and the
 * root directory as working directory; the exit status is the program's own
 * (128+N for signal N), 1 when anything before it failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "maelys/warden_policy_adapter.h"

#define MAX_ROOTS 64

typedef struct args {
  const char* helper;
  const char* backend;
  const char* enforce;
  const char* policy;
  const char* roots[MAX_ROOTS];
  maelys_warden_policy_host_t host;
  maelys_warden_policy_mount_t mounts[8];
  maelys_warden_policy_options_t run;
  char** argv;
} args_t;

static int die(const char* step, maelys_executor_result_t r, char* error) {
  fprintf(stderr, "warden-policy-registry: %s: %s: %s\n", step,
          maelys_executor_result_name(r), error ? error : "");
  maelys_executor_error_free(error);
  return 1;
}

static int usage(void) {
  fprintf(stderr,
          "usage: warden-policy-registry [--helper PATH] [--backend NAME] "
          "[--enforce-backend NAME]\n"
          "         [--workspace DIR] [--temp DIR] [--runtime DIR]... "
          "[--mediator ID]\n"
          "         [--proc] [--dev] [--tmp MIB] [--scratch BYTES]\n"
          "         --policy FILE.mir -- PROGRAM [ARG...]\n");
  return 2;
}

static int parse(int argc, char** argv, args_t* a) {
  memset(a, 0, sizeof *a);
  a->backend = "bubblewrap";
  a->host.minimal_runtime_roots = a->roots;
  a->run.mounts = a->mounts;
  for (int i = 1; i < argc; i++) {
    const char* o = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(o, "--") == 0) {
      a->argv = argv + i + 1;
      break;
    }
    if (a->run.mount_count == 8)
      return usage();
    if (strcmp(o, "--proc") == 0) {
      a->mounts[a->run.mount_count++] = (maelys_warden_policy_mount_t){
          MAELYS_WARDEN_POLICY_MOUNT_PROC, "/proc", NULL, 0};
      continue;
    }
    if (strcmp(o, "--dev") == 0) {
      a->mounts[a->run.mount_count++] = (maelys_warden_policy_mount_t){
          MAELYS_WARDEN_POLICY_MOUNT_DEV, "/dev", NULL, 0};
      continue;
    }
    if (v == NULL)
      return usage();
    i++;
    if (strcmp(o, "--helper") == 0)
      a->helper = v;
    else if (strcmp(o, "--backend") == 0)
      a->backend = v;
    else if (strcmp(o, "--enforce-backend") == 0)
      a->enforce = v;
    else if (strcmp(o, "--policy") == 0)
      a->policy = v;
    else if (strcmp(o, "--workspace") == 0)
      a->host.workspace = v;
    else if (strcmp(o, "--temp") == 0)
      a->host.temp = v;
    else if (strcmp(o, "--mediator") == 0)
      a->host.mediator_id = v;
    else if (strcmp(o, "--runtime") == 0 &&
             a->host.minimal_runtime_root_count < MAX_ROOTS)
      a->roots[a->host.minimal_runtime_root_count++] = v;
    else if (strcmp(o, "--tmp") == 0)
      a->mounts[a->run.mount_count++] = (maelys_warden_policy_mount_t){
          MAELYS_WARDEN_POLICY_MOUNT_TMPFS, "/tmp", NULL,
          strtoull(v, NULL, 10) << 20};
    else if (strcmp(o, "--scratch") == 0)
      a->run.scratch_bytes = strtoull(v, NULL, 10);
    else
      return usage();
  }
  if (a->policy == NULL || a->argv == NULL || a->argv[0] == NULL)
    return usage();
  if (a->enforce == NULL)
    a->enforce = a->backend;
  return 0;
}

/* Step 3's input: canonical MIR bytes from a file that is not a symbolic
 * link. (A real registry also refuses a file a sandbox could have written,
 * invariant 18.) */
static int read_mir(const char* path, maelys_mir_t** out) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_size > (off_t)MAELYS_MIR_MAX_BYTES) {
    fprintf(stderr, "warden-policy-registry: step 3: %s: %s\n", path,
            fd < 0 ? strerror(errno) : "not a regular file of MIR size");
    if (fd >= 0)
      close(fd);
    return -1;
  }
  uint8_t* bytes = malloc((size_t)st.st_size + 1);
  ssize_t n = bytes ? read(fd, bytes, (size_t)st.st_size + 1) : -1;
  close(fd);
  if (n != st.st_size) {
    fprintf(stderr, "warden-policy-registry: step 3: cannot read %s\n", path);
    free(bytes);
    return -1;
  }
  char* error = NULL;
  maelys_mir_result_t r = maelys_mir_decode(bytes, (size_t)n, out, &error);
  free(bytes);
  if (r != MAELYS_MIR_OK) {
    fprintf(stderr,
            "warden-policy-registry: step 3: %s is not canonical MIR: "
            "%s\n",
            path, error ? error : maelys_mir_result_name(r));
    maelys_mir_error_free(error);
    return -1;
  }
  return 0;
}

static bool done;
static maelys_execution_status_t final;

static void on_exit_cb(maelys_execution_t* e,
                       const maelys_execution_status_t* s, void* data) {
  (void)e;
  (void)data;
  final = *s;
  done = true;
}

static int launch(uv_loop_t* loop, maelys_executor_t* executor,
                  const maelys_warden_policy_handshake_t* h,
                  const maelys_executor_plan_t* plan, const args_t* a) {
  maelys_execution_request_t* req = NULL;
  char* error = NULL;
  maelys_executor_result_t r = maelys_execution_request_create(&req, &error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_execution_request_set_executable(req, a->argv[0], &error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_execution_request_set_argv(req, (const char* const*)a->argv,
                                          &error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_execution_request_set_io_mode(req, MAELYS_EXEC_IO_INHERIT, -1,
                                             &error);
  if (r == MAELYS_EXECUTOR_OK && a->run.scratch_bytes > 0)
    r = maelys_execution_request_set_scratch_size(req, a->run.scratch_bytes,
                                                  &error);
  if (r != MAELYS_EXECUTOR_OK) {
    maelys_execution_request_destroy(req);
    return die("request", r, error);
  }
  /* Step 5: the same backend name as in step 1, or nothing runs. */
  r = maelys_warden_policy_handshake_finish(h, executor, a->enforce, plan, req,
                                            &error);
  if (r != MAELYS_EXECUTOR_OK) {
    maelys_execution_request_destroy(req);
    return die("step 5", r, error);
  }
  maelys_execution_t* e = NULL;
  r = maelys_execution_spawn(executor, plan, req, &e, &error);
  maelys_execution_request_destroy(req);
  if (r != MAELYS_EXECUTOR_OK)
    return die("spawn", r, error);
  r = maelys_execution_wait(e, on_exit_cb, NULL, &error);
  if (r != MAELYS_EXECUTOR_OK) {
    maelys_execution_release(e);
    return die("wait", r, error);
  }
  while (!done)
    uv_run(loop, UV_RUN_ONCE);
  maelys_execution_release(e);
  if (final.outcome == MAELYS_EXEC_OUTCOME_EXITED)
    return final.exit_code;
  if (final.outcome == MAELYS_EXEC_OUTCOME_SIGNALED)
    return 128 + final.term_signal;
  fprintf(stderr, "warden-policy-registry: launch failed: %s: %s\n",
          final.launch_step ? final.launch_step : "", final.message);
  return 1;
}

int main(int argc, char** argv) {
  args_t a;
  if (parse(argc, argv, &a) != 0)
    return 2;
  uv_loop_t* loop = uv_default_loop();
  maelys_executor_t* executor = NULL;
  char* error = NULL;
  maelys_executor_result_t r = maelys_executor_create(loop, &executor, &error);
  if (r != MAELYS_EXECUTOR_OK)
    return die("executor", r, error);
  maelys_backend_options_t* bo = NULL;
  r = maelys_backend_options_create(&bo, &error);
  if (r == MAELYS_EXECUTOR_OK && a.helper != NULL)
    r = maelys_backend_options_set(bo, "helper", a.helper, &error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_register_backend(executor, maelys_backend_bubblewrap(),
                                         bo, &error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_executor_register_backend(executor, maelys_backend_posix(), NULL,
                                         &error);
  maelys_backend_options_destroy(bo);
  if (r != MAELYS_EXECUTOR_OK)
    return die("backends", r, error);

  int status = 1;
  maelys_warden_policy_handshake_t* h = NULL;
  maelys_mir_t* mir = NULL;
  maelys_sandbox_policy_host_t* context = NULL;
  maelys_sandbox_policy_plan_t* compiled = NULL;
  maelys_executor_plan_t* plan = NULL;
  maelys_sandbox_policy_capabilities_t available = 0;
  char* library_error = NULL;
  maelys_mir_result_t pr = MAELYS_MIR_OK;
  maelys_warden_sandbox_policy_options_t lower = {&a.run, NULL, &a.host};
  char* digest = NULL;

  /* Steps 1 and 2: the named backend's proved mask, converted. */
  r = maelys_warden_policy_handshake_begin(executor, a.backend, &h, &error);
  if (r != MAELYS_EXECUTOR_OK) {
    status = die("steps 1-2", r, error);
    goto done;
  }
  /* Step 3: compile the MIR against the trusted HostContext with exactly
   * those capabilities. */
  if (read_mir(a.policy, &mir) != 0)
    goto done;
  r = maelys_warden_policy_host_context_create(&a.host, &context, &error);
  if (r == MAELYS_EXECUTOR_OK)
    r = maelys_warden_policy_library_capabilities(
        maelys_warden_policy_handshake_capabilities(h), &available, &error);
  if (r != MAELYS_EXECUTOR_OK) {
    status = die("step 3", r, error);
    goto done;
  }
  pr = maelys_sandbox_policy_compile(mir, context, available, &compiled,
                                     &library_error);
  if (pr != MAELYS_MIR_OK) {
    fprintf(stderr, "warden-policy-registry: step 3: compiling for '%s': %s\n",
            a.backend,
            library_error ? library_error : maelys_mir_result_name(pr));
    maelys_mir_error_free(library_error);
    goto done;
  }
  /* Step 4: a new sealed Executor plan; the MIR goes along so that no DENY
   * the library dropped can vanish. */
  lower.source_mir = mir;
  r = maelys_warden_plan_from_sandbox_policy(compiled, &lower, &plan, &error);
  if (r != MAELYS_EXECUTOR_OK) {
    status = die("step 4", r, error);
    goto done;
  }
  if (maelys_executor_plan_digest(plan, &digest, NULL) == MAELYS_EXECUTOR_OK)
    fprintf(stderr,
            "warden-policy-registry: plan %s, decision sha256:%s, backend "
            "'%s'\n",
            digest, maelys_sandbox_policy_plan_mir_digest(compiled), a.backend);
  maelys_executor_string_free(digest);
  /* Step 5 and the run. */
  status = launch(loop, executor, h, plan, &a);

done:
  maelys_executor_plan_destroy(plan);
  maelys_sandbox_policy_plan_destroy(compiled);
  maelys_sandbox_policy_host_destroy(context);
  maelys_mir_destroy(mir);
  maelys_warden_policy_handshake_destroy(h);
  r = maelys_executor_destroy(executor, &error);
  if (r != MAELYS_EXECUTOR_OK)
    return die("destroy", r, error);
  uv_run(loop, UV_RUN_DEFAULT);
  return status;
}
