/*
 * No terminal the host holds ever enters a sandbox (invariant 21). When a
 * confined payload's stdout or stderr would be the host's terminal, it gets
 * the write end of a pipe instead, and this relay copies what arrives to the
 * terminal on the executor's loop.
 *
 * The terminal is written through libuv's tty handle, which reopens it so
 * that it can be non-blocking without changing the mode shared with the
 * host's shell. A terminal slower than the payload never blocks the payload
 * (a provider that writes a lot must never stall, as the MCP seam requires)
 * and never grows a buffer without bound (invariant 16): past RELAY_MAX
 * queued bytes, output is dropped and counted, and the count is said on the
 * terminal once the stream ends. Unless asked for raw output, control
 * characters, and bytes that are not valid UTF-8, are made visible and
 * inert (ESC becomes "\x1b", a raw 0x9B "\x9b"), so that a
 * payload cannot move the cursor, rewrite the title, reach the clipboard
 * (OSC 52) or otherwise drive the operator's terminal.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tty-relay.h"

#define RELAY_MAX (1024 * 1024)
#define READ_CHUNK (16 * 1024)

typedef struct write_req {
  uv_write_t req;
  size_t len;
  char data[];
} write_req_t;

struct maelys__tty_relay {
  uv_pipe_t pipe;
  uv_tty_t tty;
  bool sanitize;
  bool eof;
  bool done_called;
  int handles; /* open handles of ours */
  size_t queued;
  uint64_t dropped;
  maelys__tty_inert_t inert;
  char in[READ_CHUNK];
  maelys__tty_relay_cb done_cb;
  maelys__tty_relay_cb closed_cb;
  void* data;
};

/*
 * Makes `in` inert for a terminal. What reaches it is valid UTF-8 without a
 * control character: C0 controls but tab and newline, and DEL, become
 * "\xHH"; the C1 controls (U+0080..U+009F, UTF-8 0xC2 0x80..0x9F) become
 * "\u00HH"; and every byte that is not part of a valid UTF-8 sequence
 * becomes "\xHH" -- in particular a raw 8-bit C1 control (0x9B is CSI, 0x9D
 * OSC, 0x9C ST to a terminal that reads 8-bit controls, as xterm can be set
 * to), but also overlong forms, surrogates and stray continuation bytes,
 * which terminals decode in different ways. A sequence split across reads
 * is held until it completes (or proves invalid), so the same bytes give the
 * same result however the pipe delivers them.
 */
size_t maelys__tty_inert(maelys__tty_inert_t* st, const char* in, size_t n,
                         char* out) {
  size_t o = 0;
  for (size_t i = 0; in != NULL && i < n; i++) {
    unsigned char c = (unsigned char)in[i];
    if (st->have > 0) {
      bool ok = (c & 0xc0) == 0x80;
      if (ok && st->have == 1) {
        /* The second byte bounds what the lead allows: no overlong form,
         * no surrogate, nothing past U+10FFFF. */
        unsigned char lead = st->pending[0];
        ok = !((lead == 0xe0 && c < 0xa0) || (lead == 0xed && c > 0x9f) ||
               (lead == 0xf0 && c < 0x90) || (lead == 0xf4 && c > 0x8f));
      }
      if (ok) {
        st->pending[st->have++] = c;
        if (st->have < st->need)
          continue;
        if (st->need == 2 && st->pending[0] == 0xc2 && st->pending[1] <= 0x9f)
          o += (size_t)sprintf(out + o, "\\u%04x", st->pending[1]);
        else
          for (unsigned k = 0; k < st->have; k++)
            out[o++] = (char)st->pending[k];
        st->have = 0;
        continue;
      }
      /* Not a continuation: what was held is no character. */
      for (unsigned k = 0; k < st->have; k++)
        o += (size_t)sprintf(out + o, "\\x%02x", st->pending[k]);
      st->have = 0;
    }
    if (c < 0x80) {
      if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
        o += (size_t)sprintf(out + o, "\\x%02x", c);
      else
        out[o++] = (char)c;
      continue;
    }
    st->need = c >= 0xc2 && c <= 0xdf   ? 2
               : c >= 0xe0 && c <= 0xef ? 3
               : c >= 0xf0 && c <= 0xf4 ? 4
                                        : 0;
    if (st->need == 0) {
      o += (size_t)sprintf(out + o, "\\x%02x", c);
      continue;
    }
    st->pending[0] = c;
    st->have = 1;
  }
  if (in == NULL) {
    for (unsigned k = 0; k < st->have; k++)
      o += (size_t)sprintf(out + o, "\\x%02x", st->pending[k]);
    st->have = 0;
  }
  return o;
}

static void maybe_done(maelys__tty_relay_t* r) {
  if (r->eof && r->queued == 0 && !r->done_called) {
    r->done_called = true;
    if (r->done_cb != NULL)
      r->done_cb(r, r->data);
  }
}

static void on_written(uv_write_t* req, int status) {
  write_req_t* w = (write_req_t*)req;
  maelys__tty_relay_t* r = req->data;
  (void)status; /* a terminal that went away: the bytes are gone */
  r->queued -= w->len;
  free(w);
  maybe_done(r);
}

/* Queues `len` bytes for the terminal; past RELAY_MAX they are dropped and
 * counted, unless `always` (the short note that says so). */
static void put_bounded(maelys__tty_relay_t* r, const char* data, size_t len,
                        bool always) {
  if (len == 0)
    return;
  if ((r->queued + len > RELAY_MAX && !always) ||
      uv_is_closing((uv_handle_t*)&r->tty)) {
    r->dropped += len;
    return;
  }
  write_req_t* w = malloc(sizeof *w + len);
  if (w == NULL) {
    r->dropped += len;
    return;
  }
  memcpy(w->data, data, len);
  w->len = len;
  w->req.data = r;
  uv_buf_t b = uv_buf_init(w->data, (unsigned)len);
  if (uv_write(&w->req, (uv_stream_t*)&r->tty, &b, 1, on_written) != 0) {
    r->dropped += len;
    free(w);
    return;
  }
  r->queued += len;
}

static void put(maelys__tty_relay_t* r, const char* data, size_t len) {
  put_bounded(r, data, len, false);
}

static void on_alloc(uv_handle_t* h, size_t suggested, uv_buf_t* buf) {
  maelys__tty_relay_t* r = h->data;
  (void)suggested;
  *buf = uv_buf_init(r->in, sizeof r->in);
}

static void on_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
  maelys__tty_relay_t* r = s->data;
  if (n > 0) {
    if (!r->sanitize) {
      put(r, buf->base, (size_t)n);
      return;
    }
    char out[MAELYS__TTY_INERT_MAX(READ_CHUNK)];
    put(r, out, maelys__tty_inert(&r->inert, buf->base, (size_t)n, out));
    return;
  }
  if (n == 0)
    return;
  uv_read_stop(s);
  r->eof = true;
  if (r->sanitize) {
    char tail[MAELYS__TTY_INERT_MAX(0)];
    put(r, tail, maelys__tty_inert(&r->inert, NULL, 0, tail));
  }
  if (r->dropped > 0) {
    char note[128];
    int len = snprintf(note, sizeof note,
                       "\n[maelys: %llu bytes of output dropped: the terminal "
                       "was slower than the sandbox]\n",
                       (unsigned long long)r->dropped);
    r->dropped = 0;
    put_bounded(r, note, (size_t)len, true);
  }
  maybe_done(r);
}

int maelys__tty_relay_create(uv_loop_t* loop, int host_fd, bool sanitize_output,
                             maelys__tty_relay_t** out, int* out_child_fd) {
  *out = NULL;
  *out_child_fd = -1;
  maelys__tty_relay_t* r = calloc(1, sizeof *r);
  if (r == NULL)
    return -ENOMEM;
  r->sanitize = sanitize_output;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    int e = errno;
    free(r);
    return -e;
  }
  int rc = uv_tty_init(loop, &r->tty, host_fd, 0);
  if (rc != 0) {
    close(p[0]);
    close(p[1]);
    free(r);
    return rc;
  }
  r->tty.data = r;
  r->handles++;
  rc = uv_pipe_init(loop, &r->pipe, 0);
  if (rc == 0) {
    r->pipe.data = r;
    r->handles++;
    rc = uv_pipe_open(&r->pipe, p[0]);
  }
  if (rc != 0) {
    /* Neither a failed init nor a failed open took the read end. */
    close(p[0]);
    close(p[1]);
    /* The handles close on the loop; the caller frees nothing. */
    maelys__tty_relay_close(r, NULL, NULL);
    return rc;
  }
  *out = r;
  *out_child_fd = p[1];
  return 0;
}

int maelys__tty_relay_start(maelys__tty_relay_t* r, maelys__tty_relay_cb done,
                            void* data) {
  r->done_cb = done;
  r->data = data;
  return uv_read_start((uv_stream_t*)&r->pipe, on_alloc, on_read);
}

bool maelys__tty_relay_done(const maelys__tty_relay_t* r) {
  return r->done_called;
}

void maelys__tty_relay_unref(maelys__tty_relay_t* r) {
  uv_unref((uv_handle_t*)&r->pipe);
  uv_unref((uv_handle_t*)&r->tty);
}

void maelys__tty_relay_ref(maelys__tty_relay_t* r) {
  uv_ref((uv_handle_t*)&r->pipe);
  uv_ref((uv_handle_t*)&r->tty);
}

static void on_closed(uv_handle_t* h) {
  maelys__tty_relay_t* r = h->data;
  if (--r->handles == 0) {
    if (r->closed_cb != NULL)
      r->closed_cb(r, r->data);
    free(r);
  }
}

void maelys__tty_relay_close(maelys__tty_relay_t* r,
                             maelys__tty_relay_cb closed, void* data) {
  r->closed_cb = closed;
  r->data = data;
  if (r->handles >= 2 && !uv_is_closing((uv_handle_t*)&r->pipe))
    uv_close((uv_handle_t*)&r->pipe, on_closed);
  if (!uv_is_closing((uv_handle_t*)&r->tty)) {
    /* Leave the terminal's mode as libuv found it. */
    uv_close((uv_handle_t*)&r->tty, on_closed);
  }
}
