/*
 * The byte relays between maelys-warden's stdio and the payload.
 *
 * A relay is a set of directions, each from one end to another: this
 * process's stdin, stdout and stderr, and the payload's side (the protocol
 * socket, its stdin, stdout and stderr pipes, the master of its terminal).
 * Bytes are transported as they are (invariant 12), except where a
 * direction writes to a terminal: outside a terminal session the payload's
 * control characters are made visible and inert there (invariant 21), and
 * in a session a filter drops clipboard access (term-filter.c).
 *
 * Each direction reads 64 KiB at a time and stops reading while its
 * destination holds more than RELAY_HIGH_WATER unwritten bytes, resuming
 * below RELAY_LOW_WATER: the relay never buffers without bound (invariant
 * 16), however fast one side and slow the other. Regular files and
 * character devices (/dev/null), which cannot be polled, are read and
 * written through libuv's file operations, one chunk at a time.
 *
 * Plain stdio (relay_start_stdio) between pipes and regular files, where no
 * byte is transformed, is moved by splice(2) instead: the payload's pipe
 * straight into our stdout's pipe or file, our stdin's pipe or file into the
 * payload's stdin pipe. No byte enters this process, so nothing is queued
 * here at all; the kernel's pipe buffers are the bound and the backpressure
 * (a full destination pipe stops the splicing until it is writable). Never
 * towards a terminal, and never in a terminal session (session.c builds its
 * own relay): those bytes go through the filters above. A regular file end
 * cannot be polled and is spliced on the loop's thread (page-cache speed,
 * where the copy used the thread pool): the wait is then on the pipe end.
 * The isolated mode's socket (relay_start) is spliced the same way to and
 * from a pipe of ours: 0.43-0.47x the payload's own rate through libuv's
 * reads and writes, 0.88-1.14x spliced (ci/bench, 256 MiB).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "term-filter.h"
#include "warden.h"

#define RELAY_CHUNK (64 * 1024)
#define RELAY_HIGH_WATER (1024 * 1024)
#define RELAY_LOW_WATER (256 * 1024)
/* six for plain stdio, two more should a splice end be undone */
#define RELAY_ENDS 8
#define RELAY_DIRECTIONS 4

typedef enum end_kind {
  END_NONE,
  END_STREAM,
  END_FILE,
  END_SPLICE /* a pipe (polled) or a regular file, moved by splice(2) */
} end_kind_t;

typedef struct end {
  end_kind_t kind;
  int fd;
  bool pty_master; /* END_STREAM: a pseudo-terminal's master */
  int saved_flags; /* the descriptor's flags before libuv changed them */
  bool owned;      /* a handle of ours, closed at the end */
  union {
    uv_pipe_t pipe;
    uv_tty_t tty;
    uv_tcp_t tcp;
    uv_poll_t poll; /* END_SPLICE, a pipe */
  } h;
  bool pollable; /* END_SPLICE: a pipe or a socket, not a regular file */
  bool socket;   /* END_SPLICE: a socket (a duplicate of the payload's) */
  uv_stream_t* stream;
  bool closed;
} end_t;

typedef struct direction {
  struct relay* relay;
  end_t* src;
  end_t* dst;
  relay_direction_options_t options;
  bool reading;
  bool paused; /* backpressure: the destination is full */
  bool held;   /* relay_hold: not read until released */
  bool src_eof;
  bool finished;
  bool failed;
  size_t pending;
  bool copy; /* END_SPLICE ends that refused splice: read and write */
  /* inert: the start of a UTF-8 sequence split across reads (make_inert). */
  unsigned char pending_utf8[4];
  unsigned char have, need;
  int last_byte; /* the last byte read, -1 before any */
  /* file operations, one chunk in flight */
  uv_fs_t read_req;
  uv_fs_t write_req;
  char* file_buf;
  size_t file_len, file_off;
  /* a file destination: what is still to be written, in order */
  struct out_block* out_head;
  struct out_block* out_tail;
  uv_shutdown_t shutdown_req;
} direction_t;

typedef struct out_block {
  struct out_block* next;
  size_t len, off;
  char data[];
} out_block_t;

typedef struct chunk {
  uv_write_t req;
  direction_t* dir;
  size_t len;
  struct chunk* next; /* in the relay's pool */
  char data[];
} chunk_t;

/* Chunks kept for reuse: enough for two directions at their high-water
 * mark. Freeing each chunk after its write let glibc trim the heap and the
 * next read fault the pages in again: page faults were a tenth of the
 * relay's time (perf), and reusing chunks took the relay from 0.37-0.44x
 * to 0.56x of the payload driven directly (ci/bench, 256 MiB). */
#define RELAY_POOL_MAX (2 * (RELAY_HIGH_WATER / RELAY_CHUNK) + 4)

struct relay {
  uv_loop_t* loop;
  end_t ends[RELAY_ENDS];
  size_t end_count;
  direction_t dirs[RELAY_DIRECTIONS];
  size_t dir_count;
  size_t peak;
  bool closing;
  chunk_t* pool;
  size_t pooled;
  uint64_t spliced; /* bytes moved by splice(2) */
};

/*
 * Makes `in` inert for a terminal (`out` holds 4 * n + 16 bytes). What
 * reaches it is valid UTF-8 without a control character: C0 controls but
 * tab and newline, and DEL, become "\xHH"; the C1 controls (U+0080..U+009F)
 * "\u00HH"; and every byte that is not part of a valid UTF-8 sequence
 * "\xHH" -- in particular a raw 8-bit C1 control (0x9B is CSI to a terminal
 * that reads 8-bit controls), but also overlong forms, surrogates and stray
 * continuation bytes. A sequence split across reads is held in the relay
 * until it completes or proves invalid. (The library's terminal relay,
 * src/tty-relay.c, applies the same rule; this program uses only the public
 * API, so the decoder is its own.)
 */
static size_t make_inert(direction_t* r, const char* in, size_t n, char* out) {
  size_t o = 0;
  for (size_t i = 0; in != NULL && i < n; i++) {
    unsigned char c = (unsigned char)in[i];
    if (r->have > 0) {
      bool ok = (c & 0xc0) == 0x80;
      if (ok && r->have == 1) {
        /* No overlong form, no surrogate, nothing past U+10FFFF. */
        unsigned char lead = r->pending_utf8[0];
        ok = !((lead == 0xe0 && c < 0xa0) || (lead == 0xed && c > 0x9f) ||
               (lead == 0xf0 && c < 0x90) || (lead == 0xf4 && c > 0x8f));
      }
      if (ok) {
        r->pending_utf8[r->have++] = c;
        if (r->have < r->need)
          continue;
        if (r->need == 2 && r->pending_utf8[0] == 0xc2 &&
            r->pending_utf8[1] <= 0x9f)
          o += (size_t)snprintf(out + o, 7, "\\u%04x", r->pending_utf8[1]);
        else
          for (unsigned k = 0; k < r->have; k++)
            out[o++] = (char)r->pending_utf8[k];
        r->have = 0;
        continue;
      }
      /* Not a continuation: what was held is no character. */
      for (unsigned k = 0; k < r->have; k++)
        o += (size_t)snprintf(out + o, 5, "\\x%02x", r->pending_utf8[k]);
      r->have = 0;
    }
    if (c < 0x80) {
      if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
        o += (size_t)snprintf(out + o, 5, "\\x%02x", c);
      else
        out[o++] = (char)c;
      continue;
    }
    r->need = c >= 0xc2 && c <= 0xdf   ? 2
              : c >= 0xe0 && c <= 0xef ? 3
              : c >= 0xf0 && c <= 0xf4 ? 4
                                       : 0;
    if (r->need == 0) {
      o += (size_t)snprintf(out + o, 5, "\\x%02x", c);
      continue;
    }
    r->pending_utf8[0] = c;
    r->have = 1;
  }
  if (in == NULL) {
    for (unsigned k = 0; k < r->have; k++)
      o += (size_t)snprintf(out + o, 5, "\\x%02x", r->pending_utf8[k]);
    r->have = 0;
  }
  return o;
}

static chunk_t* chunk_get(relay_t* r) {
  chunk_t* c = r->pool;
  if (c != NULL) {
    r->pool = c->next;
    r->pooled--;
    return c;
  }
  return malloc(sizeof *c + RELAY_CHUNK);
}

static void chunk_put(relay_t* r, chunk_t* c) {
  if (c == NULL)
    return;
  if (r->pooled < RELAY_POOL_MAX) {
    c->next = r->pool;
    r->pool = c;
    r->pooled++;
  } else {
    free(c);
  }
}

static void dir_pump(direction_t* d);
static void dir_finish(direction_t* d);

static void track(relay_t* r) {
  size_t q = 0;
  for (size_t i = 0; i < r->dir_count; i++)
    q += r->dirs[i].pending;
  if (q > r->peak)
    r->peak = q;
}

/* ---------------------------------------------------------------- ends */

static void open_end(relay_t* r, end_t* e, int fd) {
  e->fd = fd;
  e->saved_flags = fcntl(fd, F_GETFL);
  if (e->saved_flags < 0) {
    e->kind = END_NONE;
    return;
  }
  switch (uv_guess_handle(fd)) {
  case UV_TTY:
    if (uv_tty_init(r->loop, &e->h.tty, fd, 0) == 0) {
      e->kind = END_STREAM;
      e->stream = (uv_stream_t*)&e->h.tty;
      e->owned = true;
      return;
    }
    break;
  case UV_NAMED_PIPE:
    if (uv_pipe_init(r->loop, &e->h.pipe, 0) == 0) {
      e->owned = true;
      if (uv_pipe_open(&e->h.pipe, fd) == 0) {
        e->kind = END_STREAM;
        e->stream = (uv_stream_t*)&e->h.pipe;
        return;
      }
    }
    break;
  case UV_TCP:
    if (uv_tcp_init(r->loop, &e->h.tcp) == 0) {
      e->owned = true;
      if (uv_tcp_open(&e->h.tcp, fd) == 0) {
        e->kind = END_STREAM;
        e->stream = (uv_stream_t*)&e->h.tcp;
        return;
      }
    }
    break;
  case UV_FILE:
    e->kind = END_FILE;
    return;
  default:
    break;
  }
  e->kind = END_FILE; /* anything else: plain reads and writes */
}

static void close_end(end_t* e) {
  if (e->closed)
    return;
  e->closed = true;
  if (e->owned && e->stream != NULL) {
    /* Leave the descriptor's flags as we found them (a shared pipe or a
     * terminal outlives us). libuv never closes descriptors 0 to 2. */
    if (e->saved_flags >= 0)
      fcntl(e->fd, F_SETFL, e->saved_flags);
    uv_close((uv_handle_t*)e->stream, NULL);
  } else if (e->kind == END_SPLICE) {
    if (e->saved_flags >= 0)
      fcntl(e->fd, F_SETFL, e->saved_flags);
    if (e->pollable)
      uv_close((uv_handle_t*)&e->h.poll, NULL); /* stops polling first */
    if (e->fd > 2)
      close(e->fd);
  } else if (e->kind == END_FILE) {
    close(e->fd);
  }
}

relay_t* relay_new(uv_loop_t* loop) {
  relay_t* r = calloc(1, sizeof *r);
  if (r != NULL)
    r->loop = loop;
  return r;
}

int relay_end_fd(relay_t* r, int fd) {
  if (r->end_count >= RELAY_ENDS)
    return -1;
  end_t* e = &r->ends[r->end_count];
  open_end(r, e, fd);
  return (int)r->end_count++;
}

int relay_end_stream(relay_t* r, uv_stream_t* stream) {
  if (r->end_count >= RELAY_ENDS || stream == NULL)
    return -1;
  end_t* e = &r->ends[r->end_count];
  e->kind = END_STREAM;
  e->stream = stream;
  e->saved_flags = -1;
  uv_fileno((uv_handle_t*)stream, &e->fd);
  unsigned pty = 0;
  e->pty_master = ioctl(e->fd, TIOCGPTN, &pty) == 0;
  return (int)r->end_count++;
}

bool relay_end_is_terminal(const relay_t* r, int end) {
  const end_t* e = &r->ends[end];
  return e->kind == END_STREAM && e->stream->type == UV_TTY;
}

/* ------------------------------------------------------------ writing */

static void on_stream_written(uv_write_t* req, int status) {
  chunk_t* c = (chunk_t*)req;
  direction_t* d = c->dir;
  d->pending -= c->len;
  chunk_put(d->relay, c);
  if (status < 0 && !d->failed) {
    d->failed = true;
    if (d->options.output) {
      /* The destination is gone: make the payload's writes fail instead of
       * filling its side forever (a socket's read side is shut, a pipe of
       * ours closed). */
      shutdown(d->src->fd, SHUT_RD);
      if (d->src->owned && d->reading)
        uv_read_stop(d->src->stream);
      d->reading = false;
      if (d->src->owned)
        close_end(d->src);
    }
  }
  if (d->failed || (d->src_eof && d->pending == 0)) {
    dir_finish(d);
    return;
  }
  if (d->paused && d->pending <= RELAY_LOW_WATER)
    dir_pump(d);
}

static void on_file_written(uv_fs_t* req);

static void out_drop(direction_t* d) {
  while (d->out_head != NULL) {
    out_block_t* b = d->out_head;
    d->out_head = b->next;
    free(b);
  }
  d->out_tail = NULL;
  d->pending = 0;
}

static void file_write_next(direction_t* d) {
  out_block_t* o = d->out_head;
  uv_buf_t b = uv_buf_init(o->data + o->off, (unsigned)(o->len - o->off));
  if (uv_fs_write(d->relay->loop, &d->write_req, d->dst->fd, &b, 1, -1,
                  on_file_written) != 0) {
    d->failed = true;
    out_drop(d);
    dir_finish(d);
  }
}

static void on_file_written(uv_fs_t* req) {
  direction_t* d = req->data;
  ssize_t n = req->result;
  uv_fs_req_cleanup(req);
  if (n < 0) {
    d->failed = true;
    out_drop(d);
    if (d->options.output) {
      shutdown(d->src->fd, SHUT_RD);
      if (d->src->owned)
        close_end(d->src);
    }
    dir_finish(d);
    return;
  }
  out_block_t* o = d->out_head;
  o->off += (size_t)n;
  d->pending -= (size_t)n;
  if (o->off == o->len) {
    d->out_head = o->next;
    if (d->out_head == NULL)
      d->out_tail = NULL;
    free(o);
  }
  if (d->out_head != NULL) {
    file_write_next(d);
    return;
  }
  if (d->src_eof) {
    dir_finish(d);
    return;
  }
  dir_pump(d);
}

static void deliver_bytes(direction_t* d, char* data, size_t len, chunk_t* c);

/* Sends `len` bytes of `data` (owned by a chunk when from a stream read) to
 * the destination, through the direction's transformation: in chunks of
 * what they become. */
static void deliver(direction_t* d, char* data, size_t len, chunk_t* c) {
  relay_transform_t t = d->options.transform;
  if (len > 0)
    d->last_byte = (unsigned char)data[len - 1];
  if (t == RELAY_AS_IS || d->failed || d->dst->kind == END_NONE) {
    deliver_bytes(d, data, len, c);
    return;
  }
  char* copy = malloc(len);
  if (copy == NULL)
    abort();
  memcpy(copy, data, len);
  chunk_put(d->relay, c);
  if (t == RELAY_INERT) {
    char out[6 * 1024];
    for (size_t off = 0; off < len; off += 1024) {
      size_t n = len - off < 1024 ? len - off : 1024;
      deliver_bytes(d, out, make_inert(d, copy + off, n, out), NULL);
    }
  } else {
    char out[4096 + TERM_FILTER_SLACK];
    for (size_t off = 0; off < len; off += 4096) {
      size_t n = len - off < 4096 ? len - off : 4096;
      size_t m = term_filter_feed(d->options.filter, copy + off, n, out);
      /* What undoes the modes is brought up to date before the bytes that
       * set them are written: a fatal signal in between then undoes a mode
       * the terminal has not seen yet (harmless), never misses one it has
       * (seen under load: a SIGQUIT right after the output left nothing to
       * write). */
      if (d->options.on_filtered != NULL)
        d->options.on_filtered(d->options.on_filtered_data);
      if (m > 0)
        deliver_bytes(d, out, m, NULL);
    }
  }
  free(copy);
}

static void deliver_bytes(direction_t* d, char* data, size_t len, chunk_t* c) {
  if (d->failed || d->dst->kind == END_NONE || d->dst->closed) {
    chunk_put(d->relay, c);
    return;
  }
  if (d->dst->kind == END_STREAM) {
    if (c == NULL) {
      c = chunk_get(d->relay);
      if (c == NULL)
        abort();
      memcpy(c->data, data, len);
    }
    c->dir = d;
    c->len = len;
    d->pending += len;
    track(d->relay);
    uv_buf_t b = uv_buf_init(c->data, (unsigned)len);
    if (uv_write(&c->req, d->dst->stream, &b, 1, on_stream_written) != 0) {
      d->pending -= len;
      chunk_put(d->relay, c);
      d->failed = true;
      dir_finish(d);
      return;
    }
    if (d->pending > RELAY_HIGH_WATER) {
      /* Backpressure: the destination is slower; stop reading the source
       * until it has drained (on_stream_written resumes it). */
      if (d->reading && d->src->kind == END_STREAM)
        uv_read_stop(d->src->stream);
      d->reading = false;
      d->paused = true;
    } else if (d->src->kind == END_FILE && !d->src_eof) {
      /* A file source reads one chunk per request: ask for the next (the
       * chunk was copied, so the file buffer is free again). */
      dir_pump(d);
    }
    return;
  }
  /* A file destination: one write in flight (a direction has one request),
   * the rest queued in order, the source paused until all is written. One
   * read can arrive here in several parts (a filter's output goes 4 KiB at
   * a time; a terminal's drain reads until EIO): each is queued, never
   * written over one in flight (which crashed `run --tty > file`). */
  out_block_t* o = malloc(sizeof *o + len);
  if (o == NULL)
    abort();
  o->next = NULL;
  o->len = len;
  o->off = 0;
  memcpy(o->data, data, len);
  chunk_put(d->relay, c);
  bool idle = d->out_head == NULL;
  if (idle)
    d->out_head = o;
  else
    d->out_tail->next = o;
  d->out_tail = o;
  d->pending += len;
  if (d->reading && d->src->kind == END_STREAM) {
    uv_read_stop(d->src->stream);
    d->reading = false;
  }
  d->paused = true;
  if (idle)
    file_write_next(d);
}

/* ------------------------------------------------------------ reading */

static void on_alloc(uv_handle_t* h, size_t suggested, uv_buf_t* buf) {
  direction_t* d = h->data;
  (void)suggested;
  chunk_t* c = chunk_get(d->relay);
  if (c == NULL) {
    *buf = uv_buf_init(NULL, 0);
    return;
  }
  *buf = uv_buf_init(c->data, RELAY_CHUNK);
}

/* At the end of the payload's output: a sequence it cut short is shown
 * escaped, never left half-written on the terminal. */
static void flush_inert(direction_t* d) {
  if (d->options.transform != RELAY_INERT || d->have == 0 || d->failed ||
      d->dst->kind == END_NONE)
    return;
  char out[32];
  deliver_bytes(d, out, make_inert(d, NULL, 0, out), NULL);
}

/* Bytes a terminal's drain reads at most: more than the kernel keeps for
 * a pseudo-terminal (its flip buffers hold 64 KiB, the line discipline
 * 4 KiB), so the bound only matters should a new writer appear. */
#define PTY_DRAIN_MAX (1u << 20)

/*
 * libuv ends a stream when a poll says POLLHUP after a short read: right for
 * pipes and sockets, whose bytes are all readable before the hang-up, not
 * for a pseudo-terminal's master. There the slave's last close sets POLLHUP
 * while what the payload wrote just before it exited can still be in the
 * kernel's flip buffers, not yet moved to the master's line discipline: the
 * short read took only what had been moved. (Measured: `run --tty` with a
 * payload writing 17 KB and exiting lost its tail in 31 of 200 runs.) A
 * read of the master once the slave is closed flushes that work first and
 * answers EIO only when nothing is left, so the rest is read here, directly,
 * until EIO.
 */
static void drain_pty(direction_t* d) {
  for (size_t total = 0; total < PTY_DRAIN_MAX && !d->failed;) {
    chunk_t* c = chunk_get(d->relay);
    if (c == NULL)
      abort();
    ssize_t n;
    do
      n = read(d->src->fd, c->data, RELAY_CHUNK);
    while (n < 0 && errno == EINTR);
    if (n <= 0) { /* EIO: all read; EAGAIN: a slave open again */
      chunk_put(d->relay, c);
      return;
    }
    deliver(d, c->data, (size_t)n, c);
    total += (size_t)n;
  }
}

static void on_stream_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
  direction_t* d = s->data;
  chunk_t* c =
      buf->base ? (chunk_t*)(buf->base - offsetof(chunk_t, data)) : NULL;
  if (n > 0) {
    deliver(d, buf->base, (size_t)n, c);
    return;
  }
  chunk_put(d->relay, c);
  if (n == 0)
    return;
  if (n == UV_EOF && d->src->pty_master)
    drain_pty(d);
  /* End of file, or an error (a terminal's master answers EIO once no
   * process holds its slave), which ends the direction the same way. */
  uv_read_stop(s);
  d->reading = false;
  flush_inert(d);
  d->src_eof = true;
  if (d->pending == 0)
    dir_finish(d);
}

static void on_file_read(uv_fs_t* req) {
  direction_t* d = req->data;
  ssize_t n = req->result;
  uv_fs_req_cleanup(req);
  d->reading = false;
  if (n <= 0) {
    flush_inert(d);
    d->src_eof = true;
    if (d->pending == 0)
      dir_finish(d);
    return;
  }
  deliver(d, d->file_buf, (size_t)n, NULL);
}

/* ------------------------------------------------------------- splice */

#define SPLICE_MAX (1 << 20)
/* Bytes one direction moves per turn of the loop before it lets the other
 * directions and the execution's events have theirs. */
#define SPLICE_TURN (8u << 20)

static void splice_pump(direction_t* d);

static void on_splice_poll(uv_poll_t* h, int status, int events) {
  (void)status; /* an error on the descriptor shows in the next splice */
  (void)events;
  splice_pump(h->data);
}

static void splice_stop(direction_t* d) {
  end_t* ends[2] = {d->src, d->dst};
  for (int i = 0; i < 2; i++)
    if (ends[i]->kind == END_SPLICE && ends[i]->pollable && !ends[i]->closed)
      uv_poll_stop(&ends[i]->h.poll);
  d->reading = false;
}

/* Waits until the source is readable (for_dst false) or the destination
 * writable. A regular file cannot be polled, and never has to be: it is
 * always ready, so the wait is on the other end, which is a pipe. */
static void splice_wait(direction_t* d, bool for_dst) {
  end_t* on = for_dst ? d->dst : d->src;
  end_t* off = for_dst ? d->src : d->dst;
  if (!on->pollable) {
    on = off;
    off = for_dst ? d->dst : d->src;
    for_dst = !for_dst;
  }
  if (off->pollable && !off->closed)
    uv_poll_stop(&off->h.poll);
  on->h.poll.data = d;
  if (uv_poll_start(&on->h.poll, for_dst ? UV_WRITABLE : UV_READABLE,
                    on_splice_poll) == 0)
    d->reading = true;
}

/* The destination refused a write: as on_stream_written does. */
static void splice_failed(direction_t* d) {
  splice_stop(d);
  d->failed = true;
  d->pending = 0;
  if (d->options.output) {
    /* The payload's next write fails (EPIPE): its pipe's read end closed,
     * or its socket shut for reading (our descriptor is a duplicate: closing
     * it alone would not end the socket). */
    if (d->src->socket)
      shutdown(d->src->fd, SHUT_RD);
    close_end(d->src);
  }
  dir_finish(d);
}

static void splice_eof(direction_t* d) {
  splice_stop(d);
  d->src_eof = true;
  d->pending = 0;
  dir_finish(d);
}

/* One read and write of the copy a descriptor that refused splice falls
 * back to (a destination opened with O_APPEND answers EINVAL): 1 when it
 * moved bytes, 0 when it waits or finished. */
static int splice_copy_step(direction_t* d, size_t* moved) {
  if (d->file_off == d->file_len) {
    ssize_t n = read(d->src->fd, d->file_buf, RELAY_CHUNK);
    if (n < 0 && errno == EINTR)
      return 1;
    if (n < 0 && errno == EAGAIN) {
      splice_wait(d, false);
      return 0;
    }
    if (n <= 0) { /* an error ends the direction as end-of-file does */
      splice_eof(d);
      return 0;
    }
    d->file_len = (size_t)n;
    d->file_off = 0;
  }
  ssize_t w =
      write(d->dst->fd, d->file_buf + d->file_off, d->file_len - d->file_off);
  if (w < 0 && errno == EINTR)
    return 1;
  if (w < 0 && errno == EAGAIN) {
    d->pending = d->file_len - d->file_off;
    splice_wait(d, true);
    return 0;
  }
  if (w <= 0) {
    splice_failed(d);
    return 0;
  }
  d->file_off += (size_t)w;
  d->pending = d->file_len - d->file_off;
  *moved += (size_t)w;
  return 1;
}

static void splice_pump(direction_t* d) {
  d->paused = false;
  if (d->finished || d->failed || d->held || d->relay->closing) {
    splice_stop(d);
    return;
  }
  size_t moved = 0;
  while (moved < SPLICE_TURN) {
    if (d->copy) {
      if (splice_copy_step(d, &moved) == 0)
        return;
      continue;
    }
    ssize_t n = splice(d->src->fd, NULL, d->dst->fd, NULL, SPLICE_MAX,
                       SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n > 0) {
      moved += (size_t)n;
      d->relay->spliced += (uint64_t)n;
      continue;
    }
    if (n == 0 && d->src->socket) {
      /* A socket's end of file is the one a plain read reports (should
       * splice ever answer 0 at an out-of-band mark, as it does for TCP's
       * urgent data, nothing after the mark is lost). */
      d->copy = true;
      continue;
    }
    if (n == 0) {
      splice_eof(d);
      return;
    }
    if (errno == EINTR)
      continue;
    if (errno == EINVAL) {
      /* Nothing was moved by the failed call: copy from here on. */
      d->copy = true;
      continue;
    }
    if (errno == EAGAIN) {
      /* Either the source is empty or the destination full (both
       * non-blocking): which one, the source tells. A pipe's queued byte
       * count; a socket's count also holds an out-of-band byte, which
       * splice (like a read) passes over and never moves, so a socket is
       * asked whether a byte of the stream itself is there (counting it
       * made the relay wait for a writable destination, at once, for as
       * long as the payload lived). A byte arriving in between only costs
       * one more turn. */
      int queued = 0;
      char peek;
      bool dst_full =
          !d->src->pollable ||
          (d->src->socket
               ? recv(d->src->fd, &peek, 1, MSG_PEEK | MSG_DONTWAIT) == 1
               : ioctl(d->src->fd, FIONREAD, &queued) == 0 && queued > 0);
      splice_wait(d, dst_full);
      return;
    }
    splice_failed(d); /* EPIPE: our reader is gone; or a file's error */
    return;
  }
  /* This turn's share is spent: come back when the loop has turned. */
  splice_wait(d, false);
}

/* Whether `from` and `to` can be relayed by splice(2): pipes, regular files
 * or unix stream sockets, at least one of them a pipe (what splice needs),
 * and a socket only with a pipe (a socket and a file would need a pipe
 * between them). A terminal or a character device is relayed as before,
 * and so is a TCP socket: its splice stops at urgent data and then takes
 * the peer's end for the end of the stream, dropping what follows. */
static bool splice_pair(int from, int to) {
  struct stat a, b;
  if (fstat(from, &a) != 0 || fstat(to, &b) != 0)
    return false;
  if (S_ISSOCK(a.st_mode) || S_ISSOCK(b.st_mode)) {
    int type = 0, domain = 0;
    socklen_t len = sizeof type, dlen = sizeof domain;
    int sock = S_ISSOCK(a.st_mode) ? from : to;
    return (S_ISFIFO(a.st_mode) || S_ISFIFO(b.st_mode)) &&
           getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &len) == 0 &&
           type == SOCK_STREAM &&
           getsockopt(sock, SOL_SOCKET, SO_DOMAIN, &domain, &dlen) == 0 &&
           domain == AF_UNIX;
  }
  bool ok_a = S_ISFIFO(a.st_mode) || S_ISREG(a.st_mode);
  bool ok_b = S_ISFIFO(b.st_mode) || S_ISREG(b.st_mode);
  return ok_a && ok_b && (S_ISFIFO(a.st_mode) || S_ISFIFO(b.st_mode));
}

/* An end for splice(2) on `fd` (see splice_pair); -1 on failure. */
static int relay_end_splice(relay_t* r, int fd) {
  if (r->end_count >= RELAY_ENDS)
    return -1;
  end_t* e = &r->ends[r->end_count];
  struct stat st;
  if (fstat(fd, &st) != 0)
    return -1;
  *e = (end_t){.kind = END_SPLICE, .fd = fd, .saved_flags = -1};
  e->socket = S_ISSOCK(st.st_mode);
  e->pollable = S_ISFIFO(st.st_mode) || e->socket;
  if (e->pollable) {
    /* Non-blocking, as libuv makes the pipes it opens: a full destination
     * or an empty source answers EAGAIN instead of stalling the loop. The
     * flags are put back at the end (a shared pipe outlives us). */
    e->saved_flags = fcntl(fd, F_GETFL);
    if (e->saved_flags < 0 ||
        fcntl(fd, F_SETFL, e->saved_flags | O_NONBLOCK) != 0 ||
        uv_poll_init(r->loop, &e->h.poll, fd) != 0) {
      if (e->saved_flags >= 0)
        fcntl(fd, F_SETFL, e->saved_flags);
      *e = (end_t){0};
      return -1;
    }
  }
  if (S_ISFIFO(st.st_mode) && fcntl(fd, F_GETPIPE_SZ) < RELAY_HIGH_WATER)
    /* Each pipe, the payload's and the operator's, holds as much as the
     * copy queued at most (RELAY_HIGH_WATER): fewer, larger splices and
     * fewer wake-ups on both sides. Through the operator's 64 KiB pipes the
     * relay moved 0.6-0.7x what the payload did driven directly (ci/bench,
     * 256 MiB); grown, 1.2x. A pipe is only ever grown (one the operator
     * made larger is left so), and kept as it is when the kernel refuses
     * (the per-user pipe budget). It stays grown after this process: a
     * larger buffer changes no byte and no order. */
    (void)fcntl(fd, F_SETPIPE_SZ, RELAY_HIGH_WATER);
  return (int)r->end_count++;
}

uint64_t relay_spliced_bytes(const relay_t* r) {
  return r->spliced;
}

static void dir_pump(direction_t* d) {
  if (d->src->kind == END_SPLICE) {
    splice_pump(d);
    return;
  }
  d->paused = false;
  if (d->src_eof || d->failed || d->reading || d->held || d->relay->closing)
    return;
  if (d->src->kind == END_STREAM) {
    d->src->stream->data = d;
    if (uv_read_start(d->src->stream, on_alloc, on_stream_read) == 0)
      d->reading = true;
    else {
      d->src_eof = true;
      dir_finish(d);
    }
    return;
  }
  if (d->src->kind == END_FILE) {
    uv_buf_t b = uv_buf_init(d->file_buf, RELAY_CHUNK);
    d->reading = true;
    if (uv_fs_read(d->relay->loop, &d->read_req, d->src->fd, &b, 1, -1,
                   on_file_read) != 0) {
      d->reading = false;
      d->src_eof = true;
      dir_finish(d);
    }
    return;
  }
  d->src_eof = true; /* no source at all: an immediate end-of-file */
  dir_finish(d);
}

/* ---------------------------------------------------------- finishing */

static void on_shutdown(uv_shutdown_t* req, int status) {
  (void)req;
  (void)status;
}

static void dir_finish(direction_t* d) {
  if (d->finished)
    return;
  d->finished = true;
  if (d->reading && d->src->kind == END_STREAM)
    uv_read_stop(d->src->stream);
  d->reading = false;
  switch (d->options.at_end) {
  case RELAY_END_CLOSE:
    /* The source's end-of-file closes the destination: our stdout, or the
     * payload's stdin pipe (its end-of-file). */
    close_end(d->dst);
    break;
  case RELAY_END_SHUTDOWN:
    /* Our stdin's end-of-file shuts the socket's write side. */
    if (!d->relay->closing && d->dst->kind == END_STREAM && !d->dst->closed)
      uv_shutdown(&d->shutdown_req, d->dst->stream, on_shutdown);
    else if (!d->relay->closing && d->dst->kind == END_SPLICE &&
             d->dst->socket && !d->dst->closed)
      shutdown(d->dst->fd, SHUT_WR); /* nothing of ours is queued */
    break;
  case RELAY_END_KEEP:
    break;
  }
  if (d->options.on_end != NULL)
    d->options.on_end(d->options.on_end_data);
}

int relay_direction(relay_t* r, int src, int dst,
                    const relay_direction_options_t* options) {
  if (r->dir_count >= RELAY_DIRECTIONS || src < 0 || dst < 0 ||
      (size_t)src >= r->end_count || (size_t)dst >= r->end_count)
    return -1;
  direction_t* d = &r->dirs[r->dir_count];
  *d = (direction_t){
      .relay = r, .src = &r->ends[src], .dst = &r->ends[dst], .last_byte = -1};
  if (options != NULL)
    d->options = *options;
  d->held = d->options.start_held;
  if (d->src->kind == END_FILE || d->dst->kind == END_FILE ||
      d->src->kind == END_SPLICE) {
    d->file_buf = malloc(RELAY_CHUNK);
    if (d->file_buf == NULL)
      return -1;
  }
  d->read_req.data = d->write_req.data = d;
  if (d->dst->kind == END_NONE)
    d->failed = true;
  int index = (int)r->dir_count++;
  dir_pump(d);
  return index;
}

void relay_hold(relay_t* r, int dir, bool held) {
  direction_t* d = &r->dirs[dir];
  d->held = held;
  if (held && d->src->kind == END_SPLICE) {
    splice_stop(d);
    return;
  }
  if (held) {
    if (d->reading && d->src->kind == END_STREAM)
      uv_read_stop(d->src->stream);
    if (d->src->kind == END_STREAM)
      d->reading = false;
    return;
  }
  if (!d->paused)
    dir_pump(d);
}

void relay_inject(relay_t* r, int dir, const char* data, size_t len) {
  direction_t* d = &r->dirs[dir];
  while (len > 0 && d->dst->kind == END_STREAM) {
    size_t n = len < RELAY_CHUNK ? len : RELAY_CHUNK;
    deliver_bytes(d, (char*)data, n, NULL);
    data += n;
    len -= n;
  }
}

bool relay_direction_failed(const relay_t* r, int dir) {
  return r->dirs[dir].failed;
}

int relay_last_byte(const relay_t* r, int dir) {
  return r->dirs[dir].last_byte;
}

bool relay_direction_done(const relay_t* r, int dir) {
  const direction_t* d = &r->dirs[dir];
  return d->finished && d->pending == 0;
}

/* ----------------------------------------------------- configurations */

/* Opens `from` and `to` as splice ends when nothing is transformed and the
 * pair allows it (splice_pair): true, with their indexes. Otherwise false,
 * and nothing stays open (a slot may be spent). */
static bool splice_ends(relay_t* r, int from, int to,
                        const relay_direction_options_t* o, int* src,
                        int* dst) {
  if (o->transform != RELAY_AS_IS || !splice_pair(from, to))
    return false;
  *src = relay_end_splice(r, from);
  *dst = *src < 0 ? -1 : relay_end_splice(r, to);
  if (*src >= 0 && *dst < 0) {
    /* Undone (its slot stays spent, the descriptor open). */
    end_t* e = &r->ends[*src];
    if (e->saved_flags >= 0)
      fcntl(e->fd, F_SETFL, e->saved_flags);
    if (e->pollable)
      uv_close((uv_handle_t*)&e->h.poll, NULL);
    e->kind = END_NONE;
    e->closed = true;
  }
  return *src >= 0 && *dst >= 0;
}

/* The isolated mode's two directions between our stdio and the payload's
 * socket: by splice(2) where the other end is a pipe (socket to pipe, pipe
 * to socket), each on a duplicate of the socket's descriptor, so that each
 * direction polls one of its own (libuv watches a descriptor once); else
 * through the socket's stream, shared. Nothing is transformed on the way
 * to a pipe, and both directions keep their half-close: our stdin's end
 * shuts the socket for writing; the payload's end ends the direction to our
 * stdout (descriptors 0-2 themselves stay open until this process exits,
 * as on the stream path). */
relay_t* relay_start(uv_loop_t* loop, uv_stream_t* socket, bool raw_output) {
  relay_t* r = relay_new(loop);
  if (r == NULL)
    return NULL;
  int sock_fd = -1;
  uv_fileno((uv_handle_t*)socket, &sock_fd);
  relay_direction_options_t up = {.at_end = RELAY_END_SHUTDOWN};
  relay_direction_options_t down = {
      .output = true,
      .at_end = RELAY_END_CLOSE,
      .transform = !raw_output && isatty(1) ? RELAY_INERT : RELAY_AS_IS};
  relay_direction_options_t* opts[2] = {&up, &down};
  int ends[2][2]; /* [up, down][src, dst] */
  int sock = -1;  /* the stream end, when a direction needs it */
  for (int k = 0; k < 2; k++) {
    int dup_fd = sock_fd >= 0 ? fcntl(sock_fd, F_DUPFD_CLOEXEC, 3) : -1;
    int from = k == 0 ? 0 : dup_fd, to = k == 0 ? dup_fd : 1;
    if (dup_fd >= 0 &&
        splice_ends(r, from, to, opts[k], &ends[k][0], &ends[k][1]))
      continue;
    if (dup_fd >= 0)
      close(dup_fd);
    if (sock < 0)
      sock = relay_end_stream(r, socket);
    int std_end = relay_end_fd(r, k == 0 ? 0 : 1);
    ends[k][0] = k == 0 ? std_end : sock;
    ends[k][1] = k == 0 ? sock : std_end;
  }
  if (relay_direction(r, ends[0][0], ends[0][1], &up) < 0 ||
      relay_direction(r, ends[1][0], ends[1][1], &down) < 0)
    relay_close(r);
  return r;
}

/* The direction from descriptor `from` to `to`: by splice(2) when nothing
 * is transformed and both allow it, else through the ends above. */
static void stdio_direction(relay_t* r, int from, int to,
                            relay_direction_options_t* o) {
  int src = -1, dst = -1;
  if (!splice_ends(r, from, to, o, &src, &dst)) {
    src = relay_end_fd(r, from);
    dst = relay_end_fd(r, to);
  }
  relay_direction(r, src, dst, o);
}

relay_t* relay_start_stdio(uv_loop_t* loop, int stdin_fd, int stdout_fd,
                           int stderr_fd, bool raw_output) {
  relay_t* r = relay_new(loop);
  if (r == NULL)
    return NULL;
  relay_direction_options_t o = {.output = true, .at_end = RELAY_END_CLOSE};
  o.transform = !raw_output && isatty(1) ? RELAY_INERT : RELAY_AS_IS;
  stdio_direction(r, stdout_fd, 1, &o);
  o.transform = !raw_output && isatty(2) ? RELAY_INERT : RELAY_AS_IS;
  stdio_direction(r, stderr_fd, 2, &o);
  if (stdin_fd >= 0) {
    /* Half-close: our stdin's end-of-file closes the payload's stdin. */
    relay_direction_options_t i = {.at_end = RELAY_END_CLOSE};
    stdio_direction(r, 0, stdin_fd, &i);
  }
  return r;
}

bool relay_output_done(const relay_t* r) {
  for (size_t i = 0; i < r->dir_count; i++)
    if (r->dirs[i].options.output && !relay_direction_done(r, (int)i))
      return false;
  return true;
}

size_t relay_peak_queued(const relay_t* r) {
  return r->peak;
}

void relay_close(relay_t* r) {
  r->closing = true;
  for (size_t i = 0; i < r->dir_count; i++) {
    direction_t* d = &r->dirs[i];
    if (d->reading && d->src->kind == END_STREAM)
      uv_read_stop(d->src->stream);
    d->reading = false;
  }
  for (size_t i = 0; i < r->end_count; i++)
    close_end(&r->ends[i]);
}

void relay_free(relay_t* r) {
  if (r == NULL)
    return;
  for (size_t i = 0; i < r->dir_count; i++) {
    free(r->dirs[i].file_buf);
    out_drop(&r->dirs[i]);
  }
  while (r->pool != NULL) {
    chunk_t* c = r->pool;
    r->pool = c->next;
    free(c);
  }
  free(r);
}
