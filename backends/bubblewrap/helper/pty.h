/* The payload's pseudo-terminal, made inside the sandbox (see pty.c). */
#ifndef MAELYS_HELPER_PTY_H
#define MAELYS_HELPER_PTY_H

/* Opens a new terminal from the sandbox's /dev/ptmx with the window size
 * ROWS x COLUMNS, sends its master over `sock` (consumed, like the master)
 * and returns its slave (close-on-exec), or a negative errno. */
int maelys__helper_terminal_make(int sock, unsigned rows, unsigned columns);

/* In the payload's process, before it executes: a new session whose
 * controlling terminal is `slave` (consumed), installed as 0, 1 and 2.
 * 0 or a negative errno. */
int maelys__helper_terminal_attach(int slave);

#endif
