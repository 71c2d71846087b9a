/* The terminal relay of a confined payload's output (see tty-relay.c). */
#ifndef MAELYS_EXECUTOR_TTY_RELAY_H
#define MAELYS_EXECUTOR_TTY_RELAY_H

#include <stdbool.h>

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

#endif /* MAELYS_EXECUTOR_TTY_RELAY_H */
