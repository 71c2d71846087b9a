/*
 * The terminal session of `maelys-warden run`: the payload has a
 * pseudo-terminal of its own, made inside the sandbox (MAELYS_EXEC_IO_TTY),
 * and this process relays between it and the operator's terminal, which is
 * never handed to the payload (invariant 21).
 *
 * - The operator's terminal is put in raw mode, so that every key (Ctrl-C,
 *   Ctrl-Z included) is a byte for the payload's terminal, whose own line
 *   discipline and job control act on it as a local terminal's would.
 * - A warden in the background (its process group is not the terminal's
 *   foreground group) neither changes the terminal's mode nor reads it; it
 *   starts to once it is brought to the foreground (SIGCONT).
 * - SIGWINCH: the operator's window size goes to the payload's terminal.
 * - Output passes through the session filter: escape sequences pass, except
 *   clipboard access (OSC 52) unless allowed; the modes the payload leaves
 *   set (alternate screen, mouse reporting, bracketed paste, hidden cursor,
 *   keyboard protocols) are undone when the session ends, however it ends.
 * - The operator's terminal mode is restored on every exit path this
 *   process survives: the payload's end (a SIGKILLed payload included), the
 *   warden's own stop signals, errors, and a fatal signal of its own (an
 *   async-signal-safe handler restores it and writes the resets, then lets
 *   the signal take its course). Only a SIGKILL of the warden itself cannot
 *   be answered.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "term-filter.h"
#include "warden.h"

/* What a signal handler needs to leave the operator's terminal as it was:
 * process-wide, because a fatal signal is. The reset text is double
 * buffered, so that a handler never reads one being written. */
static struct {
  int fd; /* the terminal whose mode was saved, or -1 */
  struct termios saved;
  volatile sig_atomic_t raw;
  int out_fd; /* where the resets go (stdout, a terminal), or -1 */
  char resets[2][TERM_FILTER_RESETS_MAX];
  volatile sig_atomic_t resets_len[2];
  volatile sig_atomic_t current;
  bool handlers;
} g = {.fd = -1, .out_fd = -1};

static void write_all(int fd, const char* data, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, data, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return;
    data += n;
    len -= (size_t)n;
  }
}

/* tcsetattr from a process that is (or became) a background job would stop
 * it with SIGTTOU; restoring must work from there too. */
static void set_mode(const struct termios* mode) {
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGTTOU);
  sigprocmask(SIG_BLOCK, &block, &old);
  tcsetattr(g.fd, TCSADRAIN, mode);
  sigprocmask(SIG_SETMASK, &old, NULL);
}

/* Async-signal-safe: write(), tcsetattr() and sigprocmask() only. */
static void emergency_restore(void) {
  if (g.out_fd >= 0) {
    int i = g.current;
    write_all(g.out_fd, g.resets[i], (size_t)g.resets_len[i]);
    g.resets_len[i] = 0;
  }
  if (g.raw) {
    set_mode(&g.saved);
    g.raw = 0;
  }
}

static const int fatal_signals[] = {SIGSEGV, SIGBUS,  SIGFPE,
                                    SIGILL,  SIGABRT, SIGQUIT};

static void on_fatal(int sig) {
  int saved = errno;
  emergency_restore();
  signal(sig, SIG_DFL);
  errno = saved;
  raise(sig);
}

static void on_exit_restore(void) {
  emergency_restore();
}

static void install_handlers(void) {
  if (g.handlers)
    return;
  g.handlers = true;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_fatal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_NODEFER;
  for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++)
    sigaction(fatal_signals[i], &sa, NULL);
  atexit(on_exit_restore);
}

static bool foreground(int fd) {
  pid_t group = tcgetpgrp(fd);
  return group > 0 && group == getpgrp();
}

/* Raw mode: every byte reaches the payload's terminal as typed, and its
 * output reaches the screen as written (the payload's terminal does the
 * output processing). */
static void enter_raw(void) {
  if (g.raw || g.fd < 0)
    return;
  struct termios mode;
  if (tcgetattr(g.fd, &mode) != 0)
    return;
  g.saved = mode;
  cfmakeraw(&mode);
  mode.c_cc[VMIN] = 1;
  mode.c_cc[VTIME] = 0;
  g.raw = 1;
  set_mode(&mode);
}

static void leave_raw(void) {
  if (!g.raw)
    return;
  set_mode(&g.saved);
  g.raw = 0;
}

struct session {
  uv_loop_t* loop;
  maelys_execution_t* execution;
  term_filter_t filter;
  relay_t* relay;
  int in_end, out_end, term_end;
  int in_dir, out_dir;
  bool input_terminal; /* stdin is a terminal: raw mode, foreground only */
  bool no_terminal;    /* the execution ended without one */
  bool output_ended;
  bool closed;
  uv_signal_t winch, cont, tstp;
  int handles;
  void (*broken)(void* data);
  void* broken_data;
};

void session_initial_size(unsigned* rows, unsigned* columns) {
  struct winsize ws = {0};
  *rows = 24;
  *columns = 80;
  for (int fd = 1; fd >= 0; fd--)
    if (isatty(fd) && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 &&
        ws.ws_col > 0) {
      *rows = ws.ws_row;
      *columns = ws.ws_col;
      return;
    }
}

static void resize(session_t* s) {
  unsigned rows, columns;
  session_initial_size(&rows, &columns);
  maelys_execution_resize(s->execution, rows, columns, NULL);
}

/* The resets a fatal signal would write, brought up to date. */
static void on_filtered(void* data) {
  session_t* s = data;
  int next = 1 - g.current;
  g.resets_len[next] =
      (sig_atomic_t)term_filter_resets(&s->filter, g.resets[next]);
  g.current = next;
}

static void on_output_end(void* data) {
  session_t* s = data;
  s->output_ended = true;
  /* The payload's terminal is gone: whatever modes it left set on the
   * operator's are undone, after everything it wrote. */
  char resets[TERM_FILTER_RESETS_MAX];
  size_t n = term_filter_resets(&s->filter, resets);
  if (g.out_fd >= 0 && n > 0)
    relay_inject(s->relay, s->out_dir, resets, n);
  term_filter_reset(&s->filter);
  g.resets_len[0] = g.resets_len[1] = 0;
  /* Our stdout went away: nothing reads what the payload writes any more,
   * so it is stopped, as a pipeline's writer would be. */
  if (relay_direction_failed(s->relay, s->out_dir) && s->broken != NULL)
    s->broken(s->broken_data);
}

static void on_input_end(void* data) {
  session_t* s = data;
  if (s->input_terminal)
    return;
  /* Input from a pipe or a file ended: the payload's terminal gets its
   * end-of-file character (in canonical mode, where it means something),
   * at the start of a line, where it reads as end-of-file. */
  int fd = -1;
  uv_stream_t* master = NULL;
  if (maelys_execution_stream(s->execution, MAELYS_EXEC_STREAM_TERMINAL,
                              &master, NULL) != MAELYS_EXECUTOR_OK ||
      uv_fileno((uv_handle_t*)master, &fd) != 0)
    return;
  struct termios t;
  if (tcgetattr(fd, &t) != 0 || !(t.c_lflag & ICANON))
    return;
  char eof[2] = {(char)t.c_cc[VEOF], (char)t.c_cc[VEOF]};
  int last = relay_last_byte(s->relay, s->in_dir);
  relay_inject(s->relay, s->in_dir, eof, last < 0 || last == '\n' ? 1 : 2);
}

/* Reads the operator's terminal only in the foreground. */
static void follow_foreground(session_t* s) {
  if (!s->input_terminal || s->in_dir < 0)
    return;
  bool fg = foreground(0);
  if (fg)
    enter_raw();
  relay_hold(s->relay, s->in_dir, !fg);
}

static void on_winch(uv_signal_t* h, int sig) {
  (void)sig;
  resize(h->data);
}

static void on_cont(uv_signal_t* h, int sig) {
  session_t* s = h->data;
  (void)sig;
  follow_foreground(s);
  resize(s);
}

/* A stop request (only `kill -TSTP`: in raw mode Ctrl-Z is the payload's):
 * give the terminal back as it was, then stop. */
static void on_tstp(uv_signal_t* h, int sig) {
  session_t* s = h->data;
  (void)sig;
  if (s->in_dir >= 0)
    relay_hold(s->relay, s->in_dir, true);
  leave_raw();
  kill(getpid(), SIGSTOP);
}

static void on_terminal(maelys_execution_t* e, maelys_executor_result_t r,
                        void* data) {
  session_t* s = data;
  uv_stream_t* master = NULL;
  if (r != MAELYS_EXECUTOR_OK ||
      maelys_execution_stream(e, MAELYS_EXEC_STREAM_TERMINAL, &master, NULL) !=
          MAELYS_EXECUTOR_OK ||
      (s->term_end = relay_end_stream(s->relay, master)) < 0) {
    s->no_terminal = true; /* the execution's status says why */
    return;
  }
  relay_direction_options_t out = {
      .output = true,
      .transform = RELAY_FILTER,
      .filter = &s->filter,
      .at_end = RELAY_END_KEEP,
      .on_end = on_output_end,
      .on_end_data = s,
      .on_filtered = on_filtered,
      .on_filtered_data = s,
  };
  s->out_dir = relay_direction(s->relay, s->term_end, s->out_end, &out);
  relay_direction_options_t in = {
      .at_end = RELAY_END_KEEP,
      .start_held = s->input_terminal,
      .on_end = on_input_end,
      .on_end_data = s,
  };
  if (s->in_end >= 0)
    s->in_dir = relay_direction(s->relay, s->in_end, s->term_end, &in);
  follow_foreground(s);
  resize(s);
}

static void start_signal(session_t* s, uv_signal_t* h, uv_signal_cb cb,
                         int sig) {
  uv_signal_init(s->loop, h);
  h->data = s;
  s->handles++;
  uv_signal_start(h, cb, sig);
  uv_unref((uv_handle_t*)h);
}

session_t* session_start(uv_loop_t* loop, maelys_execution_t* execution,
                         const session_options_t* options) {
  session_t* s = calloc(1, sizeof *s);
  if (s == NULL)
    return NULL;
  s->loop = loop;
  s->execution = execution;
  s->in_end = s->term_end = s->in_dir = s->out_dir = -1;
  s->broken = options->broken;
  s->broken_data = options->broken_data;
  term_filter_init(&s->filter, options->allow_clipboard);
  s->relay = relay_new(loop);
  if (s->relay == NULL) {
    free(s);
    return NULL;
  }
  s->input_terminal = options->read_input && isatty(0);
  g.fd = s->input_terminal ? 0 : -1;
  g.out_fd = isatty(1) ? 1 : -1;
  install_handlers();
  s->out_end = relay_end_fd(s->relay, 1);
  if (options->read_input)
    s->in_end = relay_end_fd(s->relay, 0);
  start_signal(s, &s->winch, on_winch, SIGWINCH);
  start_signal(s, &s->cont, on_cont, SIGCONT);
  start_signal(s, &s->tstp, on_tstp, SIGTSTP);
  if (maelys_execution_wait_terminal(execution, on_terminal, s, NULL) !=
      MAELYS_EXECUTOR_OK)
    s->no_terminal = true;
  return s;
}

bool session_output_done(const session_t* s) {
  return s->no_terminal || (s->out_dir >= 0 && s->output_ended &&
                            relay_direction_done(s->relay, s->out_dir));
}

void session_close(session_t* s) {
  if (s == NULL || s->closed)
    return;
  s->closed = true;
  /* What the payload left set was undone when its terminal ended; if it did
   * not end (an error, a stop that outlived the drain), it is undone now. */
  if (!s->output_ended && g.out_fd >= 0) {
    char resets[TERM_FILTER_RESETS_MAX];
    size_t n = term_filter_resets(&s->filter, resets);
    write_all(g.out_fd, resets, n);
  }
  g.resets_len[0] = g.resets_len[1] = 0;
  leave_raw();
  relay_close(s->relay);
  uv_close((uv_handle_t*)&s->winch, NULL);
  uv_close((uv_handle_t*)&s->cont, NULL);
  uv_close((uv_handle_t*)&s->tstp, NULL);
}

void session_free(session_t* s) {
  if (s == NULL)
    return;
  relay_free(s->relay);
  free(s);
}
