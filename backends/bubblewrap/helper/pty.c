/*
 * The payload's pseudo-terminal, made by the sandbox's init (helper.c,
 * `init --terminal-fd S --terminal-size ROWSxCOLS`).
 *
 * No terminal the host holds ever enters a sandbox (invariant 21): the
 * terminal is made here, inside, from the devpts instance bwrap's --dev
 * mounted for this sandbox alone (/dev/ptmx points into /dev/pts), so that
 * the payload's ttyname() names /dev/pts/N, a file it can see, and its job
 * control works as on any terminal. Only the master leaves, over the unix
 * socket S the core created for this execution, once, before the payload
 * exists; init keeps neither end afterwards.
 *
 * The slave is opened from the master (TIOCGPTPEER, Linux 4.13), not by a
 * path lookup a payload could race, and it must belong to the devpts
 * mounted at /dev/pts: otherwise ttyname() would find nothing, and the
 * terminal is refused rather than handed out half-working.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "pty.h"

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

static int send_master(int sock, int master) {
  char byte = 'T';
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } control;
  memset(&control, 0, sizeof control);
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.buf,
                       .msg_controllen = sizeof control.buf};
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &master, sizeof master);
  ssize_t n;
  do
    n = sendmsg(sock, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n == 1 ? 0 : -(n < 0 ? errno : EIO);
}

int maelys__helper_terminal_make(int sock, unsigned rows, unsigned columns) {
  int master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0)
    return -errno;
  int err = 0;
  int unlock = 0;
  int slave = -1;
  struct winsize ws = {.ws_row = (unsigned short)rows,
                       .ws_col = (unsigned short)columns};
  if (ioctl(master, TIOCSPTLCK, &unlock) != 0 ||
      ioctl(master, TIOCSWINSZ, &ws) != 0)
    err = errno;
  if (err == 0) {
    slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (slave < 0)
      err = errno;
  }
  struct stat own, st;
  if (err == 0 && (stat("/dev/pts", &own) != 0 || fstat(slave, &st) != 0))
    err = errno;
  if (err == 0 && (!S_ISCHR(st.st_mode) || st.st_dev != own.st_dev))
    err = ENXIO; /* not of the sandbox's devpts: ttyname() would not work */
  if (err == 0) {
    int r = send_master(sock, master);
    if (r != 0)
      err = -r;
  }
  close(master);
  close(sock);
  if (err != 0) {
    if (slave >= 0)
      close(slave);
    return -err;
  }
  return slave;
}

int maelys__helper_terminal_attach(int slave) {
  /* The payload leads a session of its own whose controlling terminal is
   * the slave, so job control (the foreground group, ^C, ^Z) works inside
   * exactly as on the operator's terminal outside. */
  if (setsid() < 0 || ioctl(slave, TIOCSCTTY, 0) != 0)
    return -errno;
  for (int fd = 0; fd < 3; fd++)
    if (dup2(slave, fd) < 0)
      return -errno;
  if (slave > 2)
    close(slave);
  return 0;
}
