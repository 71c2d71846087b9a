/*
 * Runs inside the sandbox and reports one attempt by its exit status only:
 *   probe read PATH [EXPECTED]  0 read (and equal to EXPECTED when given),
 *                               3 EACCES/EPERM, 4 ENOENT, 6 other content
 *   probe write PATH            0 written, 3 EACCES/EPERM/EROFS, 4 ENOENT
 *   probe socket                0 an AF_INET socket was created, 3 refused
 *   5: any other failure (errno printed on stderr).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int status(int err) {
  fprintf(stderr, "probe: %s\n", strerror(err));
  if (err == EACCES || err == EPERM || err == EROFS)
    return 3;
  if (err == ENOENT)
    return 4;
  return 5;
}

int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], "read") == 0) {
    int fd = open(argv[2], O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return status(errno);
    char buf[256];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    int err = errno;
    close(fd);
    if (n < 0)
      return status(err);
    buf[n] = '\0';
    return argc >= 4 && strcmp(buf, argv[3]) != 0 ? 6 : 0;
  }
  if (argc >= 3 && strcmp(argv[1], "write") == 0) {
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
      return status(errno);
    ssize_t n = write(fd, "x", 1);
    int err = errno;
    close(fd);
    return n == 1 ? 0 : status(err);
  }
  if (argc >= 2 && strcmp(argv[1], "socket") == 0) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
      return status(errno);
    close(s);
    return 0;
  }
  fprintf(stderr, "usage: probe read PATH [EXPECTED] | write PATH | socket\n");
  return 2;
}
