/*
 * The terminal rendezvous (src/terminal.c): only one message holding exactly
 * one pseudo-terminal master, opened for reading and writing, is accepted;
 * everything else is closed and refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include <cmocka.h>

#include "terminal.h"

static void send_fds(int sock, const int* fds, size_t count) {
  char byte = 'T';
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(8 * sizeof(int))];
  } control;
  memset(&control, 0, sizeof control);
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  if (count > 0) {
    msg.msg_control = control.buf;
    msg.msg_controllen = CMSG_SPACE(count * sizeof(int));
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(count * sizeof(int));
    memcpy(CMSG_DATA(c), fds, count * sizeof(int));
  }
  assert_int_equal(sendmsg(sock, &msg, 0), 1);
}

static int open_master(int flags) {
  int fd = open("/dev/ptmx", flags | O_NOCTTY | O_CLOEXEC);
  assert_true(fd >= 0);
  return fd;
}

/* How many descriptors this process has open, to see that refused ones are
 * closed. */
static int open_count(void) {
  int n = 0;
  for (int fd = 0; fd < 1024; fd++)
    if (fcntl(fd, F_GETFD) >= 0)
      n++;
  return n;
}

static void test_accepts_one_master(void** state) {
  (void)state;
  int host, child;
  assert_int_equal(maelys__terminal_rendezvous(&host, &child), 0);
  int master = -1;
  assert_int_equal(maelys__terminal_receive(host, &master), 0);
  assert_int_equal(master, -1);
  int sent = open_master(O_RDWR);
  send_fds(child, &sent, 1);
  close(sent);
  assert_int_equal(maelys__terminal_receive(host, &master), 1);
  assert_true(master >= 0);
  assert_true(fcntl(master, F_GETFD) & FD_CLOEXEC);
  assert_int_equal(maelys__terminal_set_size(master, 40, 120), 0);
  struct winsize ws;
  assert_int_equal(ioctl(master, TIOCGWINSZ, &ws), 0);
  assert_int_equal(ws.ws_row, 40);
  assert_int_equal(ws.ws_col, 120);
  close(master);
  close(child);
  assert_int_equal(maelys__terminal_receive(host, &master), -EPIPE);
  close(host);
}

static void test_refuses_anything_else(void** state) {
  (void)state;
  int before = open_count();
  int p[2];
  assert_int_equal(pipe2(p, O_CLOEXEC), 0);
  int read_only = open_master(O_RDONLY);
  int rw = open_master(O_RDWR);
  int slave_name;
  assert_int_equal(ioctl(rw, TIOCGPTN, &slave_name), 0);
  int unlock = 0;
  assert_int_equal(ioctl(rw, TIOCSPTLCK, &unlock), 0);
  int slave = ioctl(rw, _IO('T', 0x41), O_RDWR | O_NOCTTY | O_CLOEXEC);
  assert_true(slave >= 0);
  struct {
    int fds[2];
    size_t count;
  } cases[] = {
      {{p[0], -1}, 1},      /* a pipe */
      {{read_only, -1}, 1}, /* a master not open for writing */
      {{slave, -1}, 1},     /* the slave side */
      {{rw, p[1]}, 2},      /* two descriptors */
      {{-1, -1}, 0},        /* none */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int host, child;
    assert_int_equal(maelys__terminal_rendezvous(&host, &child), 0);
    send_fds(child, cases[i].fds, cases[i].count);
    int master = -1;
    assert_int_equal(maelys__terminal_receive(host, &master), -EPROTO);
    assert_int_equal(master, -1);
    close(host);
    close(child);
  }
  close(p[0]);
  close(p[1]);
  close(read_only);
  close(slave);
  close(rw);
  /* Every descriptor that arrived with a refused message was closed. */
  assert_int_equal(open_count(), before);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_accepts_one_master),
      cmocka_unit_test(test_refuses_anything_else),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
