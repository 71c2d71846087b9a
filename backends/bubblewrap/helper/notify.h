/*
 * The denial listener of the sandbox helper: what the sandbox refused, seen
 * through a seccomp user-notification listener and reported on the launch's
 * status channel (see notify.c for the whole design).
 */
#ifndef MAELYS_HELPER_NOTIFY_H
#define MAELYS_HELPER_NOTIFY_H

#include <stdbool.h>

/* In the sandbox's init, before the payload exists: stacks the notification
 * filter (the network calls the plan refuses when deny_network, execve and
 * execveat) with a new listener and sends that listener over the socket
 * `sock` to the launcher's listener process. Both descriptors are closed on
 * return, whatever happens. 0, or a negative errno. */
int maelys__notify_attach(int sock, bool deny_network);

/* The launcher's listener process: receives the listener on `sock` (a
 * SOCK_SEQPACKET socket), answers every notification and writes its reports
 * on `status_fd`, until the sandbox is gone. Returns the process's exit
 * status. */
int maelys__notify_serve(int sock, int status_fd);

#endif /* MAELYS_HELPER_NOTIFY_H */
