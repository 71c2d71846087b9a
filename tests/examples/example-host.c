/*
 * A minimal host of the library, using only the public headers: it runs one
 * command in a bubblewrap sandbox whose workspace (the current directory) is
 * writable, with no network, and prints the outcome and the receipt.
 *
 *   example-host HELPER RECEIPT_DIR -- PROGRAM [ARG...]
 *
 * PROGRAM must be an absolute path inside the read-only minimal runtime
 * (/usr, /bin, /lib, /lib64, /etc).
 */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "maelys/executor.h"

static int check(maelys_executor_result_t r, char* error, const char* what) {
  if (r == MAELYS_EXECUTOR_OK)
    return 0;
  fprintf(stderr, "example-host: %s: %s: %s\n", what,
          maelys_executor_result_name(r), error ? error : "");
  maelys_executor_error_free(error);
  exit(1);
}

static void runtime(maelys_executor_plan_t* plan, const char* path) {
  struct stat st;
  char* error = NULL;
  if (lstat(path, &st) != 0)
    return;
  if (S_ISLNK(st.st_mode)) {
    char target[PATH_MAX];
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0)
      return;
    target[n] = '\0';
    check(maelys_executor_plan_add_symlink(plan, target, path, &error), error,
          "symlink");
  } else {
    check(maelys_executor_plan_add_bind(plan, path, path, 0,
                                        MAELYS_EXECUTOR_MISSING_SKIP, &error),
          error, "bind");
  }
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

int main(int argc, char** argv) {
  if (argc < 5 || strcmp(argv[3], "--") != 0) {
    fprintf(stderr,
            "usage: example-host HELPER RECEIPT_DIR -- PROGRAM [ARG...]\n");
    return 2;
  }
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof cwd) == NULL)
    return 1;
  uv_loop_t* loop = uv_default_loop();
  maelys_executor_t* executor = NULL;
  char* error = NULL;
  check(maelys_executor_create(loop, &executor, &error), error, "executor");
  maelys_backend_options_t* options = NULL;
  check(maelys_backend_options_create(&options, &error), error, "options");
  check(maelys_backend_options_set(options, "helper", argv[1], &error), error,
        "options");
  check(maelys_executor_register_backend(executor, maelys_backend_bubblewrap(),
                                         options, &error),
        error, "register");
  maelys_backend_options_destroy(options);

  maelys_executor_plan_t* plan = NULL;
  check(maelys_executor_plan_create(&plan, &error), error, "plan");
  check(maelys_executor_plan_set_root(plan, MAELYS_EXECUTOR_ROOT_READONLY, 0,
                                      &error),
        error, "root");
  static const char* const paths[] = {"/usr", "/bin",   "/sbin",
                                      "/lib", "/lib64", "/etc"};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
    runtime(plan, paths[i]);
  check(maelys_executor_plan_add_proc(plan, "/proc", &error), error, "proc");
  check(maelys_executor_plan_add_dev(plan, "/dev", &error), error, "dev");
  check(maelys_executor_plan_add_tmpfs(plan, "/tmp", 64 << 20, &error), error,
        "tmpfs");
  check(maelys_executor_plan_add_rule(plan, cwd, MAELYS_EXECUTOR_ACCESS_WRITE,
                                      MAELYS_EXECUTOR_SCOPE_RECURSIVE_DIRECTORY,
                                      &error),
        error, "workspace");
  check(maelys_executor_plan_set_network(plan, MAELYS_EXECUTOR_NETWORK_NONE,
                                         &error),
        error, "network");
  check(maelys_executor_plan_seal(plan, &error), error, "seal");

  maelys_execution_request_t* request = NULL;
  check(maelys_execution_request_create(&request, &error), error, "request");
  check(maelys_execution_request_set_executable(request, argv[4], &error),
        error, "executable");
  check(maelys_execution_request_set_argv(
            request, (const char* const*)(argv + 4), &error),
        error, "argv");
  check(maelys_execution_request_set_environment_mode(
            request, MAELYS_EXEC_ENV_EXPLICIT, &error),
        error, "env");
  check(maelys_execution_request_add_environment(request, "PATH",
                                                 "/usr/bin:/bin", &error),
        error, "env");
  check(maelys_execution_request_set_cwd(request, cwd, &error), error, "cwd");
  check(maelys_execution_request_set_io_mode(request, MAELYS_EXEC_IO_INHERIT,
                                             -1, &error),
        error, "io");
  check(maelys_execution_request_set_backend(request, "bubblewrap", &error),
        error, "backend");
  check(maelys_execution_request_set_receipt_dir(request, argv[2], &error),
        error, "receipt dir");

  maelys_execution_t* execution = NULL;
  check(maelys_execution_spawn(executor, plan, request, &execution, &error),
        error, "spawn");
  check(maelys_execution_wait(execution, on_exit_cb, NULL, &error), error,
        "wait");
  while (!done)
    uv_run(loop, UV_RUN_ONCE);
  char* receipt = NULL;
  check(maelys_execution_receipt(execution, &receipt, &error), error,
        "receipt");
  printf("receipt %s:\n%s\n", maelys_execution_receipt_path(execution),
         receipt);
  maelys_executor_string_free(receipt);
  int code = final.outcome == MAELYS_EXEC_OUTCOME_EXITED ? final.exit_code
             : final.outcome == MAELYS_EXEC_OUTCOME_SIGNALED
                 ? 128 + final.term_signal
                 : 1;
  if (final.outcome == MAELYS_EXEC_OUTCOME_LAUNCH_FAILED)
    fprintf(stderr, "example-host: launch failed: %s: %s\n", final.launch_step,
            final.message);
  maelys_execution_release(execution);
  maelys_execution_request_destroy(request);
  maelys_executor_plan_destroy(plan);
  check(maelys_executor_destroy(executor, &error), error, "destroy");
  uv_run(loop, UV_RUN_DEFAULT);
  uv_loop_close(loop);
  return code;
}
