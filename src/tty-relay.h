/* The terminal relay of a confined payload's output (see tty-relay.c). */
#ifndef MAELYS_EXECUTOR_TTY_RELAY_H
#define MAELYS_EXECUTOR_TTY_RELAY_H

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

typedef struct maelys__tty_relay maelys__tty_relay_t;
typedef void (*maelys__tty_relay_cb)(maelys__tty_relay_t* relay, void* data);

/* A relay from a new pipe to the terminal `host_fd` (borrowed). The pipe's
 * write end, for the child, is in *out_child_fd (close-on-exec; the caller
 * closes it once the child holds it). 0 or a negative errno. */
int maelys__tty_relay_create(uv_loop_t* loop, int host_fd, bool sanitize,
                             maelys__tty_relay_t** out, int* out_child_fd);
/* Starts copying; `done` runs once every writer closed the pipe and what
 * was read reached the terminal (or was dropped). */
int maelys__tty_relay_start(maelys__tty_relay_t* relay,
                            maelys__tty_relay_cb done, void* data);
bool maelys__tty_relay_done(const maelys__tty_relay_t* relay);
/* The relay no longer keeps the loop alive (a released or unreferenced
 * execution); maelys__tty_relay_ref undoes it. */
void maelys__tty_relay_unref(maelys__tty_relay_t* relay);
void maelys__tty_relay_ref(maelys__tty_relay_t* relay);
/* Closes its handles; `closed` runs once they are, and the relay is then
 * freed. */
void maelys__tty_relay_close(maelys__tty_relay_t* relay,
                             maelys__tty_relay_cb closed, void* data);

/* What makes a payload's bytes inert for a terminal, as a stream: a UTF-8
 * sequence may be split across reads. */
typedef struct maelys__tty_inert {
  unsigned char pending[4]; /* the start of a sequence not yet complete */
  unsigned char have, need;
} maelys__tty_inert_t;
/* The longest output of maelys__tty_inert() for `n` bytes of input. */
#define MAELYS__TTY_INERT_MAX(n) (4 * (n) + 16)
/* Writes what `in` becomes into `out` (MAELYS__TTY_INERT_MAX(n) bytes);
 * returns its length. in == NULL ends the stream (a sequence cut short is
 * escaped). */
size_t maelys__tty_inert(maelys__tty_inert_t* st, const char* in, size_t n,
                         char* out);

#endif /* MAELYS_EXECUTOR_TTY_RELAY_H */
