/*
 * maelys-bench: spawn latency, many executions on one loop, protocol
 * throughput, stop precision and registration cost, each against a bare
 * reference measured in the same run. The machine is shared and noisy, so
 * every figure is a ratio against its reference, sampled interleaved
 * (A B A B ...) and summarised by the median of several rounds. Benchmarks
 * report; they never fail.
 *
 *   maelys-bench --fixture PATH --helper PATH --warden PATH [--quick]
 *                [--only NAME]
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bwrap-internal.h"
#include "marked.h"
#include "maelys/backend.h"
#include "maelys/executor.h"

static const char* fixture;
static const char* helper;
static const char* warden;
static const char* bwrap_path = "/usr/bin/bwrap";
static bool quick;
static const char* only;

/* ------------------------------------------------------------- helpers */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static double percentile(double* v, size_t n, double p) {
  if (n == 0)
    return NAN;
  qsort(v, n, sizeof *v, cmp_double);
  size_t i = (size_t)ceil(p / 100.0 * (double)n);
  if (i == 0)
    i = 1;
  return v[i - 1];
}

static double median(double* v, size_t n) {
  return percentile(v, n, 50);
}

typedef struct row {
  char what[96];
  char value[48];
  char reference[48];
  char ratio[24];
  char target[40];
} row_t;

static row_t rows[128];
static size_t row_count;

static void add_row(const char* what, const char* value, const char* ref,
                    double ratio, const char* target) {
  row_t* r = &rows[row_count++];
  snprintf(r->what, sizeof r->what, "%s", what);
  snprintf(r->value, sizeof r->value, "%s", value);
  snprintf(r->reference, sizeof r->reference, "%s", ref ? ref : "");
  if (!isfinite(ratio))
    snprintf(r->ratio, sizeof r->ratio, "-");
  else
    snprintf(r->ratio, sizeof r->ratio, "%.2fx", ratio);
  snprintf(r->target, sizeof r->target, "%s", target ? target : "");
  printf("  %-56s %-14s %-14s %-8s %s\n", r->what, r->value, r->reference,
         r->ratio, r->target);
  fflush(stdout);
}

__attribute__((format(printf, 1, 2))) static char* fmt(const char* f, ...) {
  static char bufs[8][48];
  static int next;
  char* b = bufs[next++ % 8];
  va_list ap;
  va_start(ap, f);
  vsnprintf(b, 48, f, ap);
  va_end(ap);
  return b;
}

/* ------------------------------------------------------------- executor */

typedef struct env {
  uv_loop_t loop;
  maelys_executor_t* ex;
  maelys_executor_plan_t* unconfined;
  maelys_executor_plan_t* sandbox;
  /* The same with a memory ceiling: a cgroup of the execution's own. */
  maelys_executor_plan_t* sandbox_ceiling;
} env_t;

/* The sandbox equivalent to the bare bwrap reference below, with a memory
 * ceiling unless `memory` is 0. */
static maelys_executor_plan_t* sandbox_plan(uint64_t memory) {
  maelys_executor_plan_t* p = NULL;
  maelys_executor_plan_create(&p, NULL);
  maelys_executor_plan_set_root(p, MAELYS_EXECUTOR_ROOT_READONLY, 0, NULL);
  maelys_executor_plan_add_proc(p, "/proc", NULL);
  maelys_executor_plan_add_dev(p, "/dev", NULL);
  maelys_executor_plan_add_rule(p, fixture, MAELYS_EXECUTOR_ACCESS_READ,
                                MAELYS_EXECUTOR_SCOPE_LITERAL_FILE, NULL);
  maelys_executor_plan_set_network(p, MAELYS_EXECUTOR_NETWORK_NONE, NULL);
  if (memory > 0)
    maelys_executor_plan_set_limit(p, MAELYS_EXECUTOR_LIMIT_MEMORY, memory,
                                   NULL);
  maelys_executor_plan_seal(p, NULL);
  return p;
}

static void env_init(env_t* e, bool with_bwrap) {
  uv_loop_init(&e->loop);
  maelys_executor_create(&e->loop, &e->ex, NULL);
  maelys_executor_register_backend(e->ex, maelys_backend_posix(), NULL, NULL);
  if (with_bwrap) {
    maelys_backend_options_t* o = NULL;
    maelys_backend_options_create(&o, NULL);
    maelys_backend_options_set(o, "helper", helper, NULL);
    char* err = NULL;
    if (maelys_executor_register_backend(e->ex, maelys_backend_bubblewrap(), o,
                                         &err) != 0) {
      fprintf(stderr, "bench: registering bubblewrap: %s\n", err);
      exit(2);
    }
    maelys_backend_options_destroy(o);
  }
  maelys_executor_plan_create(&e->unconfined, NULL);
  maelys_executor_plan_set_network(e->unconfined,
                                   MAELYS_EXECUTOR_NETWORK_INHERIT, NULL);
  maelys_executor_plan_seal(e->unconfined, NULL);
  e->sandbox = sandbox_plan(0);
  e->sandbox_ceiling = sandbox_plan(UINT64_C(256) << 20);
}

static void env_free(env_t* e) {
  maelys_executor_plan_destroy(e->unconfined);
  maelys_executor_plan_destroy(e->sandbox);
  maelys_executor_plan_destroy(e->sandbox_ceiling);
  maelys_executor_destroy(e->ex, NULL);
  uv_run(&e->loop, UV_RUN_DEFAULT);
  uv_loop_close(&e->loop);
}

static maelys_execution_request_t* request(const char* backend,
                                           const char* const* args,
                                           maelys_exec_io_mode_t io) {
  maelys_execution_request_t* r = NULL;
  maelys_execution_request_create(&r, NULL);
  maelys_execution_request_set_executable(r, fixture, NULL);
  const char* argv[16] = {fixture};
  size_t n = 1;
  for (size_t i = 0; args[i] && n < 15; i++)
    argv[n++] = args[i];
  argv[n] = NULL;
  maelys_execution_request_set_argv(r, argv, NULL);
  maelys_execution_request_set_backend(r, backend, NULL);
  maelys_execution_request_set_io_mode(
      r, io, io == MAELYS_EXEC_IO_ISOLATED_DUPLEX ? 3 : -1, NULL);
  return r;
}

/* ------------------------------------------------- bare references */

static unsigned char* bpf;
static size_t bpf_len;

static int bpf_fd(void) {
  int fd = memfd_create("bench-seccomp", MFD_CLOEXEC);
  if (write(fd, bpf, bpf_len) != (ssize_t)bpf_len)
    abort();
  lseek(fd, 0, SEEK_SET);
  return fd;
}

/* The bare references. REF_UV: the payload through uv_spawn. REF_BWRAP:
 * bwrap with the flags the backend's lowering uses for the sandbox plan,
 * running the payload directly. REF_BWRAP_INIT: the same plus what the
 * backend adds to every sandbox (the helper bound read-only and run as the
 * sandbox's pid 1), so that the difference to the library is the library's
 * own work. */
typedef enum ref_kind { REF_UV, REF_BWRAP, REF_BWRAP_INIT } ref_kind_t;

static size_t bare_bwrap_argv(char** argv, ref_kind_t kind,
                              const char* seccomp_fd,
                              const char* const* payload) {
  static const char* const flags[] = {"--unshare-user",
                                      "--unshare-pid",
                                      "--unshare-ipc",
                                      "--unshare-uts",
                                      "--unshare-cgroup-try",
                                      "--unshare-net",
                                      "--disable-userns",
                                      "--die-with-parent",
                                      "--new-session",
                                      "--as-pid-1",
                                      "--cap-drop",
                                      "ALL",
                                      "--clearenv",
                                      "--size",
                                      "1048576",
                                      "--tmpfs",
                                      "/",
                                      "--proc",
                                      "/proc",
                                      "--dev",
                                      "/dev",
                                      NULL};
  size_t n = 0;
  argv[n++] = (char*)"bwrap";
  for (size_t i = 0; flags[i]; i++)
    argv[n++] = (char*)flags[i];
  argv[n++] = (char*)"--ro-bind";
  argv[n++] = (char*)fixture;
  argv[n++] = (char*)fixture;
  if (kind == REF_BWRAP_INIT) {
    argv[n++] = (char*)"--ro-bind";
    argv[n++] = (char*)helper;
    argv[n++] = (char*)"/.maelys/helper";
  }
  argv[n++] = (char*)"--remount-ro";
  argv[n++] = (char*)"/";
  argv[n++] = (char*)"--chdir";
  argv[n++] = (char*)"/";
  argv[n++] = (char*)"--seccomp";
  argv[n++] = (char*)seccomp_fd;
  argv[n++] = (char*)"--";
  if (kind == REF_BWRAP_INIT) {
    static const char* const init[] = {
        "/.maelys/helper", "init", "--status-fd", "4", "--stderr-fd", "3",
        "--limit",         "3",    "--exec",      NULL};
    for (size_t i = 0; init[i]; i++)
      argv[n++] = (char*)init[i];
    argv[n++] = (char*)fixture;
    argv[n++] = (char*)"--";
  }
  argv[n++] = (char*)fixture;
  for (size_t i = 0; payload[i]; i++)
    argv[n++] = (char*)payload[i];
  argv[n] = NULL;
  return n;
}

typedef struct bare {
  uv_process_t proc;
  bool exited;
  double t_exit;
  int64_t status;
} bare_t;

static void on_bare_exit(uv_process_t* p, int64_t status, int sig) {
  bare_t* b = p->data;
  b->exited = true;
  b->status = sig ? -sig : status;
  b->t_exit = now_ms();
  uv_close((uv_handle_t*)p, NULL);
}

/* Spawns a bare reference. Returns the time the loop was blocked: the
 * reference's own preparation (its seccomp memfd) and the uv_spawn call. */
static double bare_spawn(uv_loop_t* loop, bare_t* b, ref_kind_t kind,
                         const char* const* payload, uv_stdio_container_t* io,
                         int io_count) {
  char* argv[64];
  uv_process_options_t o;
  memset(&o, 0, sizeof o);
  int sfd = -1, null_fd = -1;
  char seccomp_fd[16]; /* argv points into it until uv_spawn returns */
  uv_stdio_container_t stdio[8];
  int n = 0;
  for (; n < io_count; n++)
    stdio[n] = io[n];
  for (; n < 3; n++) {
    stdio[n].flags = UV_INHERIT_FD;
    stdio[n].data.fd = n;
  }
  double t0 = now_ms();
  if (kind != REF_UV) {
    if (kind == REF_BWRAP_INIT) {
      null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
      stdio[3].flags = UV_INHERIT_FD;
      stdio[3].data.fd = 2;
      stdio[4].flags = UV_INHERIT_FD;
      stdio[4].data.fd = null_fd;
      n = 5;
    }
    snprintf(seccomp_fd, sizeof seccomp_fd, "%d", n);
    bare_bwrap_argv(argv, kind, seccomp_fd, payload);
    o.file = bwrap_path;
    sfd = bpf_fd();
    stdio[n].flags = UV_INHERIT_FD;
    stdio[n].data.fd = sfd;
    n++;
  } else {
    argv[0] = (char*)fixture;
    size_t k = 1;
    for (size_t i = 0; payload[i]; i++)
      argv[k++] = (char*)payload[i];
    argv[k] = NULL;
    o.file = fixture;
    if (io_count > 3)
      n = io_count;
  }
  o.args = argv;
  char* envp[] = {NULL};
  o.env = envp;
  o.stdio = stdio;
  o.stdio_count = n;
  o.exit_cb = on_bare_exit;
  memset(b, 0, sizeof *b);
  b->proc.data = b;
  int r = uv_spawn(loop, &b->proc, &o);
  if (sfd >= 0)
    close(sfd);
  if (null_fd >= 0)
    close(null_fd);
  double t1 = now_ms();
  if (r != 0) {
    fprintf(stderr, "bench: uv_spawn: %s\n", uv_strerror(r));
    exit(2);
  }
  return t1 - t0;
}

/* ---------------------------------------------------- spawn latency */

typedef struct lib_run {
  bool done;
  double t_exit;
} lib_run_t;

static void on_lib_exit(maelys_execution_t* e,
                        const maelys_execution_status_t* s, void* data) {
  (void)e;
  (void)s;
  lib_run_t* l = data;
  l->done = true;
  l->t_exit = now_ms();
}

/* One library spawn-to-exit: total and blocked (the spawn call). */
static void lib_once(env_t* env, const char* backend,
                     const maelys_executor_plan_t* plan, double* total,
                     double* blocked) {
  static const char* const args[] = {"exit", "0", NULL};
  maelys_execution_request_t* r =
      request(backend, args, MAELYS_EXEC_IO_INHERIT);
  maelys_execution_t* e = NULL;
  lib_run_t l = {0};
  double t0 = now_ms();
  char* err = NULL;
  if (maelys_execution_spawn(env->ex, plan, r, &e, &err) != 0) {
    fprintf(stderr, "bench: spawn on %s: %s\n", backend, err);
    exit(2);
  }
  double t1 = now_ms();
  maelys_execution_wait(e, on_lib_exit, &l, NULL);
  while (!l.done)
    uv_run(&env->loop, UV_RUN_ONCE);
  *total = l.t_exit - t0;
  *blocked = t1 - t0;
  maelys_execution_release(e);
  maelys_execution_request_destroy(r);
}

static void bare_once(env_t* env, ref_kind_t kind, double* total,
                      double* blocked) {
  static const char* const args[] = {"exit", "0", NULL};
  bare_t b;
  double t0 = now_ms();
  *blocked = bare_spawn(&env->loop, &b, kind, args, NULL, 0);
  while (!b.exited)
    uv_run(&env->loop, UV_RUN_ONCE);
  if (b.status != 0) {
    fprintf(stderr, "bench: the bare reference failed (status %lld)\n",
            (long long)b.status);
    exit(2);
  }
  *total = b.t_exit - t0;
  uv_run(&env->loop, UV_RUN_NOWAIT);
}

static void bench_spawn(env_t* env, const char* label, const char* backend,
                        const maelys_executor_plan_t* plan, ref_kind_t kind,
                        const char* target) {
  int rounds = quick ? 3 : 7, per = quick ? 10 : 30;
  size_t n = (size_t)(rounds * per);
  double* a = calloc(n, sizeof *a);
  double* b = calloc(n, sizeof *b);
  double* ab = calloc(n, sizeof *ab);
  double* bb = calloc(n, sizeof *bb);
  double ratios[16];
  size_t k = 0;
  for (int r = 0; r < rounds; r++) {
    double ra[64], rb[64];
    for (int i = 0; i < per; i++) {
      lib_once(env, backend, plan, &a[k], &ab[k]);
      bare_once(env, kind, &b[k], &bb[k]);
      ra[i] = a[k];
      rb[i] = b[k];
      k++;
    }
    ratios[r] = median(ra, (size_t)per) / median(rb, (size_t)per);
  }
  double ratio = median(ratios, (size_t)rounds);
  char what[96];
  snprintf(what, sizeof what, "%s spawn-to-exit p50", label);
  double a50 = percentile(a, n, 50), b50 = percentile(b, n, 50);
  add_row(what, fmt("%.2f ms", a50), fmt("%.2f ms", b50), ratio, target);
  snprintf(what, sizeof what, "%s spawn-to-exit p99", label);
  double a99 = percentile(a, n, 99), b99 = percentile(b, n, 99);
  add_row(what, fmt("%.2f ms", a99), fmt("%.2f ms", b99), a99 / b99, "");
  snprintf(what, sizeof what, "%s loop blocked per spawn p50", label);
  double ab50 = percentile(ab, n, 50), bb50 = percentile(bb, n, 50);
  add_row(what, fmt("%.3f ms", ab50), fmt("%.3f ms", bb50), ab50 / bb50,
          "<= 0.5 ms");
  snprintf(what, sizeof what, "%s loop blocked per spawn p99", label);
  add_row(what, fmt("%.3f ms", percentile(ab, n, 99)),
          fmt("%.3f ms", percentile(bb, n, 99)), NAN, "");
  free(a);
  free(b);
  free(ab);
  free(bb);
}

/* maelys-warden run vs bare bwrap from the shell: whole processes. */
/* Runs argv to its end: its wall time, and in *cpu_ms (when not NULL) the
 * CPU time, user and system, of it and every descendant it or they waited
 * for (wait4's usage: the sandbox's processes are reaped inside it). */
static double process_cpu_ms(char* const* argv, double* cpu_ms) {
  double t0 = now_ms();
  pid_t p = fork();
  if (p == 0) {
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    if (strcmp(argv[0], "bwrap") == 0) {
      int s = bpf_fd();
      dup2(s, 3);
      execv(bwrap_path, argv);
    } else {
      execv(argv[0], argv);
    }
    _exit(127);
  }
  int st;
  struct rusage ru;
  wait4(p, &st, 0, &ru);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "bench: %s failed (status %d)\n", argv[0], st);
    exit(2);
  }
  if (cpu_ms != NULL)
    *cpu_ms = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
              (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
  return now_ms() - t0;
}

/* `maelys-warden run --rw` on a fresh workspace, running the fixture with
 * `payload`. */
typedef struct warden_cmd {
  char ws[64];
  char* argv[32];
} warden_cmd_t;

/* io: NULL for the default (--io auto: plain pipes here), else --io's value. */
static void warden_cmd_init(warden_cmd_t* c, const char* io,
                            const char* const* payload) {
  snprintf(c->ws, sizeof c->ws, "/tmp/maelys-bench-ws-XXXXXX");
  if (mkdtemp(c->ws) == NULL || chmod(c->ws, 0755) != 0) {
    fprintf(stderr, "bench: workspace: %s\n", strerror(errno));
    exit(2);
  }
  static const char* const head[] = {
      "run",          "--rw", "--workspace",   NULL,
      "--allow-read", NULL,   "--receipt-dir", "/tmp/maelys-bench-receipts",
      "--quiet",      "--"};
  size_t n = 0;
  c->argv[n++] = (char*)warden;
  for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
    c->argv[n++] = (char*)head[i];
  c->argv[4] = c->ws;
  c->argv[6] = (char*)fixture;
  if (io != NULL) {
    c->argv[n - 1] = "--io";
    c->argv[n++] = (char*)io;
    c->argv[n++] = "--";
  }
  c->argv[n++] = (char*)fixture;
  for (size_t i = 0; payload[i] && n < 31; i++)
    c->argv[n++] = (char*)payload[i];
  c->argv[n] = NULL;
}

static void warden_cmd_free(warden_cmd_t* c) {
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf %s /tmp/maelys-bench-receipts", c->ws);
  if (system(cmd) != 0)
    fprintf(stderr, "bench: cleanup failed\n");
}

static void bench_warden(void) {
  int rounds = quick ? 3 : 7, per = quick ? 4 : 10;
  double ratios[16], all_a[160], all_b[160];
  double cpu_ratios[16], cpu_a[160], cpu_b[160];
  size_t k = 0;
  static const char* const payload[] = {"exit", "0", NULL};
  warden_cmd_t wc;
  warden_cmd_init(&wc, NULL, payload);
  char** wargv = wc.argv;
  char* bargv[64];
  bare_bwrap_argv(bargv, REF_BWRAP, "3", payload);
  for (int r = 0; r < rounds; r++) {
    double a[32], b[32], ca[32], cb[32];
    for (int i = 0; i < per; i++) {
      a[i] = all_a[k] = process_cpu_ms(wargv, &ca[i]);
      b[i] = all_b[k] = process_cpu_ms(bargv, &cb[i]);
      cpu_a[k] = ca[i];
      cpu_b[k] = cb[i];
      k++;
    }
    ratios[r] = median(a, (size_t)per) / median(b, (size_t)per);
    cpu_ratios[r] = median(ca, (size_t)per) / median(cb, (size_t)per);
  }
  add_row("maelys-warden run vs bare bwrap (process) p50",
          fmt("%.2f ms", percentile(all_a, k, 50)),
          fmt("%.2f ms", percentile(all_b, k, 50)),
          median(ratios, (size_t)rounds), "<= 1.25x");
  add_row("maelys-warden run vs bare bwrap (process) CPU p50",
          fmt("%.2f ms", percentile(cpu_a, k, 50)),
          fmt("%.2f ms", percentile(cpu_b, k, 50)),
          median(cpu_ratios, (size_t)rounds), "<= 1.5x");
  warden_cmd_free(&wc);
}

/* ------------------------------------------- many executions, one loop */

static long vm_hwm_kib(void) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmHWM: %ld", &v) == 1)
      break;
  if (f)
    fclose(f);
  return v;
}

typedef struct many {
  uv_loop_t* loop;
  int n, spawned, ready, exited, stopped;
  bool library;
  const char* backend;
  const maelys_executor_plan_t* plan;
  maelys_executor_t* ex;
  maelys_execution_t** e;
  bare_t* bare;
  uv_pipe_t* pipes;
  char (*bufs)[64];
  double t0, t_running, t_stop0, t_stopped;
  double max_stall;
  uint64_t last_prepare_ns, last_idle_ns;
  uv_idle_t idle;
  uv_prepare_t prepare;
  char marker[32];
} many_t;

static void on_alloc(uv_handle_t* h, size_t s, uv_buf_t* buf) {
  (void)s;
  many_t* m = h->loop->data;
  size_t i = (size_t)(uintptr_t)h->data;
  *buf = uv_buf_init(m->bufs[i], sizeof m->bufs[i]);
}

static void on_ready(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
  (void)buf;
  many_t* m = s->loop->data;
  if (n > 0) {
    if (++m->ready == m->n)
      m->t_running = now_ms();
    uv_read_stop(s);
  }
}

static void on_many_exit(maelys_execution_t* e,
                         const maelys_execution_status_t* s, void* data) {
  (void)e;
  (void)s;
  many_t* m = data;
  if (++m->exited == m->n)
    m->t_stopped = now_ms();
}

static void on_bare_many_exit(uv_process_t* p, int64_t status, int sig) {
  (void)status;
  (void)sig;
  many_t* m = p->loop->data;
  if (++m->exited == m->n)
    m->t_stopped = now_ms();
  uv_close((uv_handle_t*)p, NULL);
}

static void spawn_one(many_t* m) {
  int i = m->spawned;
  const char* payload[] = {"term-line", m->library ? "3" : "1", m->marker,
                           NULL};
  if (m->library) {
    maelys_execution_request_t* r =
        request(m->backend, payload, MAELYS_EXEC_IO_ISOLATED_DUPLEX);
    maelys_execution_request_set_stop_budget(r, 500, 2000, NULL);
    char* err = NULL;
    if (maelys_execution_spawn(m->ex, m->plan, r, &m->e[i], &err) != 0) {
      fprintf(stderr, "bench: spawn %d: %s\n", i, err);
      exit(2);
    }
    maelys_execution_request_destroy(r);
    uv_stream_t* s = NULL;
    maelys_execution_stream(m->e[i], MAELYS_EXEC_STREAM_PROTOCOL, &s, NULL);
    s->data = (void*)(uintptr_t)i;
    uv_read_start(s, on_alloc, on_ready);
    maelys_execution_wait(m->e[i], on_many_exit, m, NULL);
  } else {
    uv_pipe_init(m->loop, &m->pipes[i], 0);
    m->pipes[i].data = (void*)(uintptr_t)i;
    uv_stdio_container_t io[3];
    io[0].flags = UV_IGNORE;
    io[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    io[1].data.stream = (uv_stream_t*)&m->pipes[i];
    io[2].flags = UV_INHERIT_FD;
    io[2].data.fd = 2;
    bare_spawn(m->loop, &m->bare[i],
               strcmp(m->backend, "bubblewrap") == 0 ? REF_BWRAP : REF_UV,
               payload, io, 3);
    m->bare[i].proc.exit_cb = NULL;
    uv_process_t* p = &m->bare[i].proc;
    p->exit_cb = on_bare_many_exit;
    uv_read_start((uv_stream_t*)&m->pipes[i], on_alloc, on_ready);
  }
  m->spawned++;
}

/* One spawn per loop turn, as a host that stays responsive would. */
static void on_idle(uv_idle_t* h) {
  many_t* m = h->loop->data;
  if (m->spawned < m->n)
    spawn_one(m);
  if (m->spawned == m->n)
    uv_idle_stop(h);
}

/* The loop's stall: from one prepare phase to the next, the time it was
 * not waiting in its poll (libuv's idle-time metric), i.e. the time spent
 * running callbacks (I/O, timers, idle, check, close) in one iteration. */
static void stall_sample(many_t* m) {
  uint64_t t = uv_hrtime(), idle = uv_metrics_idle_time(m->loop);
  if (m->last_prepare_ns != 0) {
    double stall =
        (double)((t - m->last_prepare_ns) - (idle - m->last_idle_ns)) / 1e6;
    if (stall > m->max_stall)
      m->max_stall = stall;
  }
  m->last_prepare_ns = t;
  m->last_idle_ns = idle;
}

/* A new phase: its first iteration is measured from now. */
static void stall_reset(many_t* m) {
  m->max_stall = 0;
  m->last_prepare_ns = uv_hrtime();
  m->last_idle_ns = uv_metrics_idle_time(m->loop);
}

static void on_prepare(uv_prepare_t* h) {
  stall_sample(h->loop->data);
}

typedef struct many_result {
  double running_ms, stop_ms, stall_ms, stop_calls_ms, stop_stall_ms;
  long rss_kib;
  int survivors;
} many_result_t;

/* The body of one many-executions run, in a fresh process (see many_run):
 * writes its many_result_t to `out_fd`. */
static int many_child(int n, bool library, const char* backend, int out_fd) {
  env_t env;
  memset(&env, 0, sizeof env);
  bool bw = strcmp(backend, "bubblewrap") == 0;
  if (library)
    env_init(&env, bw);
  else
    uv_loop_init(&env.loop);
  uv_loop_configure(&env.loop, UV_METRICS_IDLE_TIME);
  many_t m;
  memset(&m, 0, sizeof m);
  m.loop = &env.loop;
  env.loop.data = &m;
  m.n = n;
  m.library = library;
  m.backend = backend;
  m.ex = env.ex;
  m.plan = bw ? env.sandbox : env.unconfined;
  m.e = calloc((size_t)n, sizeof *m.e);
  m.bare = calloc((size_t)n, sizeof *m.bare);
  m.pipes = calloc((size_t)n, sizeof *m.pipes);
  m.bufs = calloc((size_t)n, sizeof *m.bufs);
  snprintf(m.marker, sizeof m.marker, "bench-%d-%d", (int)getpid(), n);
  uv_idle_init(m.loop, &m.idle);
  uv_prepare_init(m.loop, &m.prepare);
  uv_prepare_start(&m.prepare, on_prepare);
  m.t0 = now_ms();
  stall_reset(&m);
  uv_idle_start(&m.idle, on_idle);
  while (m.ready < n)
    uv_run(m.loop, UV_RUN_ONCE);
  stall_sample(&m); /* the last iteration ended without a prepare */
  many_result_t r;
  memset(&r, 0, sizeof r);
  r.stall_ms = m.max_stall;
  m.t_stop0 = now_ms();
  for (int i = 0; i < n; i++) {
    if (library)
      maelys_execution_stop(m.e[i], MAELYS_EXEC_STOP_GRACEFUL_THEN_FORCED, NULL,
                            NULL, NULL);
    else
      uv_process_kill(&m.bare[i].proc, SIGKILL);
  }
  r.stop_calls_ms = now_ms() - m.t_stop0;
  /* The stop phase's stalls are the loop's own: the stop calls above ran
   * outside it. */
  stall_reset(&m);
  while (m.exited < n)
    uv_run(m.loop, UV_RUN_ONCE);
  stall_sample(&m);
  r.running_ms = m.t_running - m.t0;
  r.stop_ms = m.t_stopped - m.t_stop0;
  r.stop_stall_ms = m.max_stall;
  r.rss_kib = vm_hwm_kib();
  /* Survivors: nothing carrying the marker may remain. */
  double deadline = now_ms() + 200;
  do
    r.survivors = marked_pids(m.marker, NULL, 0);
  while (r.survivors > 0 && now_ms() < deadline);
  return write(out_fd, &r, sizeof r) == (ssize_t)sizeof r ? 0 : 1;
}

/* Runs one many-executions measure in a freshly executed copy of this
 * program, so that its peak RSS is the supervisor's alone (a forked child
 * would inherit, and count, everything this process has touched). */
static void many_run(int n, bool library, const char* backend,
                     many_result_t* out) {
  int pfd[2];
  if (pipe(pfd) != 0)
    abort();
  pid_t pid = fork();
  if (pid == 0) {
    close(pfd[0]);
    char ns[16], fds[16];
    snprintf(ns, sizeof ns, "%d", n);
    snprintf(fds, sizeof fds, "%d", pfd[1]);
    char* argv[] = {(char*)"maelys-bench",
                    (char*)"--many-child",
                    ns,
                    library ? "1" : "0",
                    (char*)backend,
                    fds,
                    (char*)"--fixture",
                    (char*)fixture,
                    (char*)"--helper",
                    (char*)helper,
                    (char*)"--warden",
                    (char*)warden,
                    NULL};
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  close(pfd[1]);
  memset(out, 0, sizeof *out);
  if (read(pfd[0], out, sizeof *out) != (ssize_t)sizeof *out)
    out->survivors = -1;
  close(pfd[0]);
  waitpid(pid, NULL, 0);
}

/* --many-size N: the many-executions rows for N alone. */
static int many_size;

static void bench_many(void) {
  static const int sizes_full[] = {100, 500, 1000};
  static const int sizes_quick[] = {50};
  const int* sizes = quick ? sizes_quick : sizes_full;
  int count = quick ? 1 : 3;
  if (many_size > 0) {
    sizes = &many_size;
    count = 1;
  }
  for (int s = 0; s < count; s++) {
    int n = sizes[s];
    static const char* const backends[] = {"bubblewrap", "posix"};
    for (int k = 0; k < 2; k++) {
      const char* be = backends[k];
      many_result_t lib, ref;
      many_run(n, true, be, &lib);
      many_run(n, false, be, &ref);
      bool bw = k == 0;
      char what[96];
      snprintf(what, sizeof what, "N=%d %s: all running (vs bare %s)", n, be,
               bw ? "bwrap" : "uv_spawn");
      add_row(what, fmt("%.0f ms", lib.running_ms),
              fmt("%.0f ms", ref.running_ms), lib.running_ms / ref.running_ms,
              n == 1000 && bw ? "<= 1.10x" : "");
      snprintf(what, sizeof what, "N=%d %s: stop all, graceful then forced", n,
               be);
      add_row(what, fmt("%.0f ms", lib.stop_ms),
              fmt("%.0f ms kill", ref.stop_ms), lib.stop_ms / ref.stop_ms,
              "<= 1 s");
      snprintf(what, sizeof what, "N=%d %s: the %d stop calls", n, be, n);
      add_row(what, fmt("%.1f ms", lib.stop_calls_ms),
              fmt("%.1f ms kill", ref.stop_calls_ms),
              lib.stop_calls_ms / ref.stop_calls_ms, "");
      snprintf(what, sizeof what, "N=%d %s: supervisor peak RSS", n, be);
      add_row(what, fmt("%.1f MiB", (double)lib.rss_kib / 1024),
              fmt("%.1f MiB", (double)ref.rss_kib / 1024),
              (double)lib.rss_kib / (double)ref.rss_kib, "<= 8 MiB");
      snprintf(what, sizeof what, "N=%d %s: longest loop stall, starting", n,
               be);
      add_row(what, fmt("%.2f ms", lib.stall_ms), fmt("%.2f ms", ref.stall_ms),
              lib.stall_ms / ref.stall_ms, "");
      snprintf(what, sizeof what, "N=%d %s: longest loop stall, stopping", n,
               be);
      add_row(what, fmt("%.2f ms", lib.stop_stall_ms),
              fmt("%.2f ms", ref.stop_stall_ms),
              lib.stop_stall_ms / ref.stop_stall_ms, "");
      snprintf(what, sizeof what, "N=%d %s: survivors after stop", n, be);
      add_row(what, fmt("%d", lib.survivors), fmt("%d", ref.survivors), NAN,
              "0");
    }
  }
}

/* ------------------------------------------------------------ throughput */

typedef struct pump {
  uv_stream_t* s;
  size_t total, sent, got;
  char* data;
  uv_write_t wr;
  uv_shutdown_t sd;
  bool done;
  char buf[65536];
} pump_t;

static void pump_alloc(uv_handle_t* h, size_t s, uv_buf_t* b) {
  (void)s;
  pump_t* p = h->data;
  *b = uv_buf_init(p->buf, sizeof p->buf);
}

static void pump_read(uv_stream_t* s, ssize_t n, const uv_buf_t* b) {
  (void)b;
  pump_t* p = s->data;
  if (n > 0)
    p->got += (size_t)n;
  else if (n < 0) {
    p->done = true;
    uv_read_stop(s);
  }
}

static void pump_write_next(pump_t* p);

static void pump_written(uv_write_t* w, int status) {
  pump_t* p = w->data;
  if (status < 0) {
    fprintf(stderr, "bench: write: %s\n", uv_strerror(status));
    exit(2);
  }
  pump_write_next(p);
}

static void pump_write_next(pump_t* p) {
  if (p->sent >= p->total) {
    uv_shutdown(&p->sd, p->s, NULL);
    return;
  }
  size_t n = p->total - p->sent < (1u << 20) ? p->total - p->sent : 1u << 20;
  uv_buf_t b = uv_buf_init(p->data, (unsigned)n);
  p->sent += n;
  p->wr.data = p;
  uv_write(&p->wr, p->s, &b, 1, pump_written);
}

static void ping_written(uv_write_t* w, int status) {
  (void)w;
  if (status < 0) {
    fprintf(stderr, "bench: write: %s\n", uv_strerror(status));
    exit(2);
  }
}

/* `total` bytes out and back through `s`: MiB/s. A one-byte ping goes
 * first, so the payload's start-up is not counted as transfer time. */
static double pump_through(uv_loop_t* loop, uv_stream_t* s, size_t total) {
  static pump_t p;
  memset(&p, 0, sizeof p);
  static char* data;
  if (data == NULL) {
    data = malloc(1u << 20);
    memset(data, 'x', 1u << 20);
  }
  p.data = data;
  p.s = s;
  s->data = &p;
  uv_read_start(s, pump_alloc, pump_read);
  uv_buf_t ping = uv_buf_init(data, 1);
  uv_write(&p.wr, s, &ping, 1, ping_written);
  while (p.got < 1 && !p.done)
    uv_run(loop, UV_RUN_ONCE);
  p.got = 0;
  p.total = total;
  double t0 = now_ms();
  pump_write_next(&p);
  while (!p.done)
    uv_run(loop, UV_RUN_ONCE);
  double t = now_ms() - t0;
  if (p.got != total)
    fprintf(stderr, "bench: echoed %zu of %zu bytes\n", p.got, total);
  return (double)total / (1 << 20) / (t / 1000.0);
}

static double lib_throughput(env_t* env, const char* backend, size_t total) {
  static const char* const args[] = {"echo", "3", "3", NULL};
  maelys_execution_request_t* r =
      request(backend, args, MAELYS_EXEC_IO_ISOLATED_DUPLEX);
  maelys_execution_t* e = NULL;
  const maelys_executor_plan_t* plan =
      strcmp(backend, "posix") == 0 ? env->unconfined : env->sandbox;
  maelys_execution_spawn(env->ex, plan, r, &e, NULL);
  uv_stream_t* s = NULL;
  maelys_execution_stream(e, MAELYS_EXEC_STREAM_PROTOCOL, &s, NULL);
  double mibs = pump_through(&env->loop, s, total);
  lib_run_t l = {0};
  maelys_execution_wait(e, on_lib_exit, &l, NULL);
  while (!l.done)
    uv_run(&env->loop, UV_RUN_ONCE);
  maelys_execution_release(e);
  maelys_execution_request_destroy(r);
  return mibs;
}

/* A bare child on the same kind of socketpair, at fd 3. */
static double bare_throughput(env_t* env, ref_kind_t kind, size_t total) {
  static const char* const args[] = {"echo", "3", "3", NULL};
  uv_pipe_t pipe;
  uv_pipe_init(&env->loop, &pipe, 0);
  uv_stdio_container_t io[4];
  io[0].flags = UV_IGNORE;
  io[1].flags = UV_INHERIT_FD;
  io[1].data.fd = 2;
  io[2].flags = UV_INHERIT_FD;
  io[2].data.fd = 2;
  io[3].flags = UV_CREATE_PIPE | UV_READABLE_PIPE | UV_WRITABLE_PIPE;
  io[3].data.stream = (uv_stream_t*)&pipe;
  bare_t b;
  bare_spawn(&env->loop, &b, kind, args, io, 4);
  double mibs = pump_through(&env->loop, (uv_stream_t*)&pipe, total);
  while (!b.exited)
    uv_run(&env->loop, UV_RUN_ONCE);
  uv_close((uv_handle_t*)&pipe, NULL);
  uv_run(&env->loop, UV_RUN_NOWAIT);
  return mibs;
}

static void* echo_thread(void* arg) {
  int fd = *(int*)arg;
  static char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0)
    for (ssize_t off = 0; off < n;) {
      ssize_t w = write(fd, buf + off, (size_t)(n - off));
      if (w <= 0)
        return NULL;
      off += w;
    }
  close(fd);
  return NULL;
}

/* The ceiling: the same copy through a socketpair inside this process,
 * echoed by a thread. */
static double inproc_throughput(env_t* env, size_t total) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    abort();
  pthread_t t;
  pthread_create(&t, NULL, echo_thread, &sv[1]);
  uv_pipe_t pipe;
  uv_pipe_init(&env->loop, &pipe, 0);
  uv_pipe_open(&pipe, sv[0]);
  double mibs = pump_through(&env->loop, (uv_stream_t*)&pipe, total);
  pthread_join(t, NULL);
  uv_close((uv_handle_t*)&pipe, NULL);
  uv_run(&env->loop, UV_RUN_NOWAIT);
  return mibs;
}

/* A process driven through its stdin/stdout: MiB/s for `total` bytes. */
/* `total` bytes through argv's stdin and back from its stdout, through
 * pipes of the default size or, with `pipe_size`, of that size. */
static double process_throughput(char* const* argv, size_t total,
                                 int pipe_size) {
  int in[2], out[2];
  if (pipe(in) != 0 || pipe(out) != 0)
    abort();
  if (pipe_size > 0 && (fcntl(in[1], F_SETPIPE_SZ, pipe_size) < 0 ||
                        fcntl(out[1], F_SETPIPE_SZ, pipe_size) < 0)) {
    fprintf(stderr, "bench: F_SETPIPE_SZ %d: %s\n", pipe_size, strerror(errno));
    exit(2);
  }
  pid_t p = fork();
  if (p == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[1]);
    close(out[0]);
    if (strcmp(argv[0], "bwrap") == 0) {
      int sfd = bpf_fd();
      dup2(sfd, 3);
      execv(bwrap_path, argv);
    } else {
      execv(argv[0], argv);
    }
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  /* A one-byte ping first: start-up is not transfer time. */
  char ping = 'p';
  if (write(in[1], &ping, 1) != 1 || read(out[0], &ping, 1) != 1) {
    fprintf(stderr, "bench: %s did not echo\n", argv[0]);
    exit(2);
  }
  double t0 = now_ms();
  pid_t writer = fork();
  if (writer == 0) {
    close(out[0]);
    static char buf[1 << 16];
    memset(buf, 'y', sizeof buf);
    for (size_t sent = 0; sent < total; sent += sizeof buf)
      if (write(in[1], buf, sizeof buf) != (ssize_t)sizeof buf)
        _exit(1);
    _exit(0);
  }
  close(in[1]);
  static char rbuf[1 << 16];
  size_t got = 0;
  ssize_t n;
  while ((n = read(out[0], rbuf, sizeof rbuf)) > 0)
    got += (size_t)n;
  double t = now_ms() - t0;
  close(out[0]);
  waitpid(writer, NULL, 0);
  waitpid(p, NULL, 0);
  if (got != total)
    fprintf(stderr, "bench: %s relayed %zu of %zu bytes\n", argv[0], got,
            total);
  return (double)total / (1 << 20) / (t / 1000.0);
}

static void bench_throughput(env_t* env) {
  size_t total = quick ? (32u << 20) : (256u << 20);
  int rounds = quick ? 3 : 5;
  double px[8], px_ref[8], px_r[8], bw[8], bw_ref[8], bw_r[8], in[8], in_r[8];
  for (int r = 0; r < rounds; r++) {
    px[r] = lib_throughput(env, "posix", total);
    px_ref[r] = bare_throughput(env, REF_UV, total);
    bw[r] = lib_throughput(env, "bubblewrap", total);
    bw_ref[r] = bare_throughput(env, REF_BWRAP, total);
    in[r] = inproc_throughput(env, total);
    px_r[r] = px[r] / px_ref[r];
    bw_r[r] = bw[r] / bw_ref[r];
    in_r[r] = px[r] / in[r];
  }
  size_t n = (size_t)rounds;
  char what[96];
  snprintf(what, sizeof what, "ISOLATED_DUPLEX posix %zu MiB vs bare child",
           total >> 20);
  add_row(what, fmt("%.0f MiB/s", median(px, n)),
          fmt("%.0f MiB/s", median(px_ref, n)), median(px_r, n), ">= 0.95x");
  snprintf(what, sizeof what,
           "ISOLATED_DUPLEX bubblewrap %zu MiB vs bare bwrap child",
           total >> 20);
  add_row(what, fmt("%.0f MiB/s", median(bw, n)),
          fmt("%.0f MiB/s", median(bw_ref, n)), median(bw_r, n), ">= 0.95x");
  snprintf(what, sizeof what,
           "ISOLATED_DUPLEX posix %zu MiB vs in-process copy", total >> 20);
  add_row(what, fmt("%.0f MiB/s", median(px, n)),
          fmt("%.0f MiB/s", median(in, n)), median(in_r, n), "");

  /* The CLI's relay vs the same payload driven directly: its plain pipes
   * (--io auto, the default off a terminal) and its protocol socket
   * (--io isolated). */
  static const char* const echo_sock[] = {"echo", "3", "3", NULL};
  static const char* const echo_io[] = {"echo", "0", "1", NULL};
  warden_cmd_t wp, ws;
  warden_cmd_init(&wp, NULL, echo_io);
  warden_cmd_init(&ws, "isolated", echo_sock);
  char* dargv[] = {(char*)fixture, "echo", "0", "1", NULL};
  double cli[8], clis[8], direct[8], cr[8], csr[8], viab[8], cbr[8];
  double direct_big[8], cbig[8];
  char* bargv[64];
  bare_bwrap_argv(bargv, REF_BWRAP, "3", echo_io);
  for (int r = 0; r < rounds; r++) {
    cli[r] = process_throughput(wp.argv, total, 0);
    direct[r] = process_throughput(dargv, total, 0);
    direct_big[r] = process_throughput(dargv, total, 1 << 20);
    clis[r] = process_throughput(ws.argv, total, 0);
    viab[r] = process_throughput(bargv, total, 0);
    cr[r] = cli[r] / direct[r];
    cbig[r] = cli[r] / direct_big[r];
    csr[r] = clis[r] / direct[r];
    cbr[r] = cli[r] / viab[r];
  }
  snprintf(what, sizeof what, "maelys-warden relay %zu MiB vs payload direct",
           total >> 20);
  add_row(what, fmt("%.0f MiB/s", median(cli, (size_t)rounds)),
          fmt("%.0f MiB/s", median(direct, (size_t)rounds)),
          median(cr, (size_t)rounds), ">= 0.9x");
  /* The relay grows the pipes it is given to 1 MiB (relay.c): the same
   * payload on pipes of that size, for a like-for-like figure. */
  snprintf(what, sizeof what, "  the same vs payload direct, 1 MiB pipes");
  add_row(what, fmt("%.0f MiB/s", median(cli, (size_t)rounds)),
          fmt("%.0f MiB/s", median(direct_big, (size_t)rounds)),
          median(cbig, (size_t)rounds), "");
  snprintf(what, sizeof what, "  the same, --io isolated (socket)");
  add_row(what, fmt("%.0f MiB/s", median(clis, (size_t)rounds)),
          fmt("%.0f MiB/s", median(direct, (size_t)rounds)),
          median(csr, (size_t)rounds), "");
  snprintf(what, sizeof what, "maelys-warden relay %zu MiB vs bare bwrap",
           total >> 20);
  add_row(what, fmt("%.0f MiB/s", median(cli, (size_t)rounds)),
          fmt("%.0f MiB/s", median(viab, (size_t)rounds)),
          median(cbr, (size_t)rounds), "");
  warden_cmd_free(&wp);
  warden_cmd_free(&ws);
}

/* --------------------------------------------------------- stop precision */

typedef struct stop_probe {
  bool stopped, term_seen, got_ready;
  double t_stopped;
  char buf[256];
  size_t len;
} stop_probe_t;

static void sp_alloc(uv_handle_t* h, size_t s, uv_buf_t* b) {
  (void)s;
  stop_probe_t* p = h->data;
  *b = uv_buf_init(p->buf + p->len, (unsigned)(sizeof p->buf - 1 - p->len));
}

static void sp_read(uv_stream_t* s, ssize_t n, const uv_buf_t* b) {
  (void)b;
  stop_probe_t* p = s->data;
  if (n > 0) {
    p->len += (size_t)n;
    p->buf[p->len] = '\0';
    p->got_ready = strstr(p->buf, "ready") != NULL;
    p->term_seen = strstr(p->buf, "got-term") != NULL;
  } else if (n < 0) {
    uv_read_stop(s);
  }
}

static void sp_stopped(maelys_execution_t* e, maelys_execution_stop_result_t r,
                       void* data) {
  (void)e;
  (void)r;
  stop_probe_t* p = data;
  p->stopped = true;
  p->t_stopped = now_ms();
}

/* Library stop of a fixture: completion latency. */
static double lib_stop(env_t* env, const char* backend, bool ignore,
                       uint64_t grace, bool* term_seen) {
  const char* const term_args[] = {"term-line", "3", NULL};
  const char* const ign_args[] = {"ignore-term", "60000", NULL};
  maelys_execution_request_t* r = request(
      backend, ignore ? ign_args : term_args,
      ignore ? MAELYS_EXEC_IO_CAPTURED : MAELYS_EXEC_IO_ISOLATED_DUPLEX);
  maelys_execution_request_set_stop_budget(r, grace, 2000, NULL);
  maelys_execution_t* e = NULL;
  const maelys_executor_plan_t* plan =
      strcmp(backend, "posix") == 0 ? env->unconfined : env->sandbox;
  maelys_execution_spawn(env->ex, plan, r, &e, NULL);
  uv_stream_t* s = NULL;
  maelys_execution_stream(
      e, ignore ? MAELYS_EXEC_STREAM_STDOUT : MAELYS_EXEC_STREAM_PROTOCOL, &s,
      NULL);
  stop_probe_t p;
  memset(&p, 0, sizeof p);
  s->data = &p;
  uv_read_start(s, sp_alloc, sp_read);
  while (!p.got_ready)
    uv_run(&env->loop, UV_RUN_ONCE);
  double t0 = now_ms();
  maelys_execution_stop(e, MAELYS_EXEC_STOP_GRACEFUL_THEN_FORCED, sp_stopped,
                        &p, NULL);
  while (!p.stopped)
    uv_run(&env->loop, UV_RUN_ONCE);
  lib_run_t l = {0};
  maelys_execution_wait(e, on_lib_exit, &l, NULL);
  while (!l.done)
    uv_run(&env->loop, UV_RUN_ONCE);
  uv_run(&env->loop, UV_RUN_NOWAIT);
  if (term_seen)
    *term_seen = p.term_seen;
  maelys_execution_release(e);
  maelys_execution_request_destroy(r);
  return p.t_stopped - t0;
}

typedef struct bare_stop {
  bare_t b;
  uv_timer_t t;
  double t0;
} bare_stop_t;

static void bare_kill(uv_timer_t* t) {
  bare_stop_t* s = t->data;
  if (!s->b.exited)
    uv_process_kill(&s->b.proc, SIGKILL);
}

/* The same escalation done by hand with bare libuv on a bare child. */
static double bare_stop_ms(env_t* env, uint64_t grace) {
  const char* const args[] = {"ignore-term", "60000", NULL};
  uv_pipe_t pipe;
  uv_pipe_init(&env->loop, &pipe, 0);
  uv_stdio_container_t io[2];
  io[0].flags = UV_IGNORE;
  io[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  io[1].data.stream = (uv_stream_t*)&pipe;
  bare_stop_t s;
  bare_spawn(&env->loop, &s.b, REF_UV, args, io, 2);
  stop_probe_t p;
  memset(&p, 0, sizeof p);
  pipe.data = &p;
  uv_read_start((uv_stream_t*)&pipe, sp_alloc, sp_read);
  while (!p.got_ready)
    uv_run(&env->loop, UV_RUN_ONCE);
  s.t0 = now_ms();
  uv_update_time(&env->loop);
  uv_process_kill(&s.b.proc, SIGTERM);
  uv_timer_init(&env->loop, &s.t);
  s.t.data = &s;
  uv_timer_start(&s.t, bare_kill, grace, 0);
  while (!s.b.exited)
    uv_run(&env->loop, UV_RUN_ONCE);
  uv_close((uv_handle_t*)&s.t, NULL);
  uv_close((uv_handle_t*)&pipe, NULL);
  uv_run(&env->loop, UV_RUN_NOWAIT);
  return s.b.t_exit - s.t0;
}

static void bench_stop(env_t* env) {
  int n = quick ? 5 : 20;
  const uint64_t grace = 100;
  double over[32], bare_over[32], term_lat[32], bw_term[32];
  int reached = 0;
  for (int i = 0; i < n; i++) {
    over[i] = lib_stop(env, "bubblewrap", true, grace, NULL) - (double)grace;
    bare_over[i] = bare_stop_ms(env, grace) - (double)grace;
    bool seen = false;
    bw_term[i] = lib_stop(env, "bubblewrap", false, grace, &seen);
    reached += seen;
    term_lat[i] = lib_stop(env, "posix", false, grace, NULL);
  }
  double o99 = percentile(over, (size_t)n, 99);
  double b99 = percentile(bare_over, (size_t)n, 99);
  add_row("stop overshoot past grace, bubblewrap p50",
          fmt("%.1f ms", percentile(over, (size_t)n, 50)),
          fmt("%.1f ms", percentile(bare_over, (size_t)n, 50)), NAN, "");
  add_row("stop overshoot past grace, bubblewrap p99", fmt("%.1f ms", o99),
          fmt("%.1f ms", b99), NAN, "<= 20 ms");
  add_row("stop latency, SIGTERM-handling payload bwrap",
          fmt("%.1f ms", median(bw_term, (size_t)n)),
          fmt("%.1f ms posix", median(term_lat, (size_t)n)),
          median(bw_term, (size_t)n) / median(term_lat, (size_t)n), "");
  char v[32];
  snprintf(v, sizeof v, "%d/%d", reached, n);
  add_row("SIGTERM reached the sandboxed payload", v, "", NAN, "100%");
}

/* ---------------------------------------------------------- registration */

static void bench_register(void) {
  int n = quick ? 3 : 9;
  double px[16], bw[16], ref[16];
  for (int i = 0; i < n; i++) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    maelys_executor_t* ex = NULL;
    maelys_executor_create(&loop, &ex, NULL);
    double t0 = now_ms();
    maelys_executor_register_backend(ex, maelys_backend_posix(), NULL, NULL);
    double t1 = now_ms();
    maelys_backend_options_t* o = NULL;
    maelys_backend_options_create(&o, NULL);
    maelys_backend_options_set(o, "helper", helper, NULL);
    maelys_executor_register_backend(ex, maelys_backend_bubblewrap(), o, NULL);
    double t2 = now_ms();
    maelys_backend_options_destroy(o);
    maelys_executor_destroy(ex, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    env_t e;
    memset(&e, 0, sizeof e);
    uv_loop_init(&e.loop);
    double dummy;
    bare_once(&e, REF_BWRAP, &ref[i], &dummy);
    uv_run(&e.loop, UV_RUN_DEFAULT);
    uv_loop_close(&e.loop);
    px[i] = t1 - t0;
    bw[i] = t2 - t1;
  }
  add_row("register posix (probe)", fmt("%.3f ms", median(px, (size_t)n)), "",
          NAN, "");
  double r = median(ref, (size_t)n);
  add_row("register bubblewrap (probe: 2 sandboxes)",
          fmt("%.1f ms", median(bw, (size_t)n)), fmt("%.1f ms 1 bwrap", r),
          median(bw, (size_t)n) / r, "");
}

/* ------------------------------------------------------------------ main */

static void machine_line(void) {
  struct utsname u;
  uname(&u);
  char cpu[128] = "?";
  FILE* f = fopen("/proc/cpuinfo", "r");
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "model name", 10) == 0) {
      char* c = strchr(line, ':');
      snprintf(cpu, sizeof cpu, "%.100s", c ? c + 2 : line);
      cpu[strcspn(cpu, "\n")] = '\0';
      break;
    }
  if (f)
    fclose(f);
  double load[3] = {0};
  getloadavg(load, 3);
  time_t t = time(NULL);
  char date[32];
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
  printf("machine: %s %s, %s, %ld cpus, uid %d, load %.2f, libmaelys-executor "
         "%s, %s%s\n",
         u.sysname, u.release, cpu, sysconf(_SC_NPROCESSORS_ONLN),
         (int)getuid(), load[0], maelys_executor_version(), date,
         quick ? ", quick" : "");
}

static bool want(const char* name) {
  return only == NULL || strcmp(only, name) == 0;
}

/* A whole decimal number from 1 to `max`, or -1. */
static int whole_number(const char* text, long max) {
  char* end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < 1 || v > max)
    return -1;
  return (int)v;
}

int main(int argc, char** argv) {
  int child_n = 0, child_fd = -1;
  bool child_library = false;
  const char* child_backend = NULL;
  int i0 = 1;
  if (argc > 5 && strcmp(argv[1], "--many-child") == 0) {
    /* many_run's fresh process: --many-child N LIBRARY BACKEND FD ... */
    child_n = atoi(argv[2]);
    child_library = strcmp(argv[3], "1") == 0;
    child_backend = argv[4];
    child_fd = atoi(argv[5]);
    i0 = 6;
  }
  for (int i = i0; i < argc; i++) {
    if (strcmp(argv[i], "--fixture") == 0 && i + 1 < argc)
      fixture = argv[++i];
    else if (strcmp(argv[i], "--helper") == 0 && i + 1 < argc)
      helper = argv[++i];
    else if (strcmp(argv[i], "--warden") == 0 && i + 1 < argc)
      warden = argv[++i];
    else if (strcmp(argv[i], "--bwrap") == 0 && i + 1 < argc)
      bwrap_path = argv[++i];
    else if (strcmp(argv[i], "--quick") == 0)
      quick = true;
    else if (strcmp(argv[i], "--many-size") == 0 && i + 1 < argc) {
      many_size = whole_number(argv[++i], 100000);
      if (many_size < 0) {
        fprintf(stderr,
                "maelys-bench: --many-size takes a number of executions "
                "from 1 to 100000, not '%s'\n",
                argv[i]);
        return 2;
      }
    } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
      only = argv[++i];
    else {
      fprintf(stderr,
              "usage: maelys-bench --fixture PATH --helper PATH --warden "
              "PATH [--bwrap PATH] [--quick] [--many-size N] [--only "
              "spawn|warden|many|throughput|stop|register]\n");
      return 2;
    }
  }
  if (!fixture || !helper || !warden) {
    fprintf(stderr, "maelys-bench: --fixture, --helper and --warden are "
                    "required\n");
    return 2;
  }
  /* The backend wants clean absolute paths; so does the warden. */
  static char abs_paths[3][PATH_MAX];
  const char** paths[] = {&fixture, &helper, &warden};
  for (int i = 0; i < 3; i++) {
    if (!realpath(*paths[i], abs_paths[i])) {
      fprintf(stderr, "maelys-bench: %s: %s\n", *paths[i], strerror(errno));
      return 2;
    }
    *paths[i] = abs_paths[i];
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (child_backend != NULL) {
    struct rlimit cl;
    getrlimit(RLIMIT_NOFILE, &cl);
    cl.rlim_cur = cl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &cl);
    signal(SIGPIPE, SIG_IGN);
    char* cerr = NULL;
    if (maelys__seccomp_baseline_build(true, false, &bpf, &bpf_len, &cerr) !=
        0) {
      fprintf(stderr, "bench: %s\n", cerr);
      return 2;
    }
    return many_child(child_n, child_library, child_backend, child_fd);
  }
  struct rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  signal(SIGPIPE, SIG_IGN);
  char* err = NULL;
  if (maelys__seccomp_baseline_build(true, false, &bpf, &bpf_len, &err) != 0) {
    fprintf(stderr, "bench: %s\n", err);
    return 2;
  }
  machine_line();
  printf("  %-56s %-14s %-14s %-8s %s\n", "measure", "maelys", "reference",
         "ratio", "target");
  env_t env;
  env_init(&env, true);
  uint64_t mask = 0;
  maelys_executor_backend_capabilities(env.ex, "bubblewrap", &mask, NULL);
  if (!(mask & MAELYS_BACKEND_CAP_NETWORK_NONE)) {
    char* diag = NULL;
    maelys_executor_backend_diagnostic(env.ex, "bubblewrap", &diag, NULL);
    fprintf(stderr, "bench: bubblewrap cannot confine here: %s\n", diag);
    return 2;
  }
  if (want("spawn")) {
    bench_spawn(&env, "posix vs uv_spawn", "posix", env.unconfined, REF_UV,
                "<= 1.10x");
    bench_spawn(&env, "bubblewrap vs bare bwrap", "bubblewrap", env.sandbox,
                REF_BWRAP, "<= 1.10x");
    bench_spawn(&env, "bubblewrap vs bare bwrap+init", "bubblewrap",
                env.sandbox, REF_BWRAP_INIT, "");
    /* What a memory ceiling adds (its cgroup made, joined and removed),
     * where one can be enforced (root here). */
    if (mask & MAELYS_BACKEND_CAP_LIMIT_MEMORY)
      bench_spawn(&env, "bubblewrap, memory ceiling, vs bare bwrap",
                  "bubblewrap", env.sandbox_ceiling, REF_BWRAP, "");
  }
  if (want("warden"))
    bench_warden();
  if (want("throughput"))
    bench_throughput(&env);
  if (want("stop"))
    bench_stop(&env);
  if (want("register"))
    bench_register();
  env_free(&env);
  if (want("many"))
    bench_many();
  return 0;
}
