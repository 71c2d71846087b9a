/*
 * The host's side of a payload's pseudo-terminal (MAELYS_EXEC_IO_TTY).
 *
 * The terminal is made inside the sandbox, from the sandbox's own devpts
 * instance, so that the payload's ttyname() names a file it can see; only
 * its master comes out, over a unix socket the core creates for the launch
 * (MAELYS_BACKEND_FD_TERMINAL). These are the plain descriptor operations;
 * execution.c watches the socket on the loop.
 */
#ifndef MAELYS_EXECUTOR_TERMINAL_H
#define MAELYS_EXECUTOR_TERMINAL_H

/* A connected pair: *out_host (non-blocking, close-on-exec) stays with the
 * core, *out_child goes to the launch. 0 or a negative errno. */
int maelys__terminal_rendezvous(int* out_host, int* out_child);

/* Receives the master from the rendezvous without blocking: 1 and
 * *out_master (close-on-exec, the caller owns it) when it came; 0 when
 * nothing is there yet; -EPIPE at end of file; -EPROTO for anything but one
 * byte with exactly one descriptor that is the master of a pseudo-terminal
 * (whatever else arrived is closed); another negative errno on failure. */
int maelys__terminal_receive(int sock, int* out_master);

/* TIOCSWINSZ on the master; 0 or a negative errno. */
int maelys__terminal_set_size(int master, unsigned rows, unsigned columns);

#endif /* MAELYS_EXECUTOR_TERMINAL_H */
