/*
 * The terminal rendezvous: how the master of a payload's pseudo-terminal,
 * made inside the sandbox, reaches the host (see terminal.h).
 *
 * What arrives is checked before the host relays a byte through it: exactly
 * one descriptor, the pseudo-terminal multiplexer's device (5:2) opened for
 * reading and writing, that names its terminal (TIOCGPTN): the master side
 * of a Unix 98 pseudo-terminal. Anything else is closed and refused: a host
 * never relays through a descriptor whose kind it did not check.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <termios.h>
#include <unistd.h>

#include "terminal.h"

/* At most this many descriptors are read from one message; a message
 * carrying more is refused and every one read is closed. */
#define RECEIVE_FDS_MAX 4

int maelys__terminal_rendezvous(int* out_host, int* out_child) {
  int sv[2];
  *out_host = *out_child = -1;
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return -errno;
  int fl = fcntl(sv[0], F_GETFL);
  if (fl < 0 || fcntl(sv[0], F_SETFL, fl | O_NONBLOCK) != 0) {
    int e = errno;
    close(sv[0]);
    close(sv[1]);
    return -e;
  }
  /* The sandbox only ever sends: the core's end never writes, and a write
   * from the sandbox's end is the one message it reads. */
  shutdown(sv[1], SHUT_RD);
  *out_host = sv[0];
  *out_child = sv[1];
  return 0;
}

static int is_master(int fd) {
  /* A master is the device /dev/ptmx (or a devpts instance's pts/ptmx)
   * opened: 5:2, the slaves are 136 and up. */
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISCHR(st.st_mode) || major(st.st_rdev) != 5 ||
      minor(st.st_rdev) != 2)
    return 0;
  int mode = fcntl(fd, F_GETFL);
  if (mode < 0 || (mode & O_ACCMODE) != O_RDWR)
    return 0;
  unsigned number;
  return ioctl(fd, TIOCGPTN, &number) == 0;
}

int maelys__terminal_receive(int sock, int* out_master) {
  *out_master = -1;
  char byte;
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(RECEIVE_FDS_MAX * sizeof(int))];
  } control;
  memset(&control, 0, sizeof control);
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.buf,
                       .msg_controllen = sizeof control.buf};
  ssize_t n;
  do
    n = recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
  if (n == 0)
    return -EPIPE;
  int fds[RECEIVE_FDS_MAX];
  size_t count = 0;
  bool other = (msg.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) != 0;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != NULL;
       c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
      other = true;
      continue;
    }
    size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (count < RECEIVE_FDS_MAX)
        fds[count++] = fd;
      else
        close(fd);
    }
  }
  if (other || count != 1 || !is_master(fds[0])) {
    for (size_t i = 0; i < count; i++)
      close(fds[i]);
    return -EPROTO;
  }
  *out_master = fds[0];
  return 1;
}

int maelys__terminal_set_size(int master, unsigned rows, unsigned columns) {
  struct winsize ws = {.ws_row = (unsigned short)rows,
                       .ws_col = (unsigned short)columns};
  return ioctl(master, TIOCSWINSZ, &ws) == 0 ? 0 : -errno;
}
