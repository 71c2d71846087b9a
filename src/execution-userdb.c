/*
 * The user-database service of a launch (MAELYS_BACKEND_FD_USERDB, backend
 * ABI 8): the launched image asks whether an id names a user or a group, and
 * the host process answers from its own user and group databases.
 *
 * A launcher that takes a host identity of the sandbox's own (invariant 20)
 * must know that no user or group of the databases has it: files of such a
 * user would be the sandbox's. The bubblewrap launcher is linked statically,
 * and glibc cannot load the NSS modules (systemd's, sss's) into a static
 * process, so it ran getent(1) twice per launch: two program starts, which
 * were 15-18% of a root launch's CPU and about 10 ms of its wall time (a CLI
 * run on a 2-core VM, with and without them). The host process is
 * dynamically linked and loads the modules once.
 *
 * The protocol, one question at a time on a unix stream socket:
 *   image -> core: "UID GID\n" (decimal)
 *   core -> image: "user\n"  UID names a user;
 *                  "group\n" GID names a group (and UID no user);
 *                  "none\n"  neither;
 *                  "error ERRNO\n" a database could not answer.
 * A malformed question ends the conversation: the core closes the socket,
 * and the image reads end-of-file (and must refuse: fail closed).
 *
 * Each launch is answered by a thread of its own, which owns the host's end
 * and ends with the conversation (the image closes its end once it has its
 * identity, or dies). Not the loop: a host may spawn and then wait for
 * something else before it runs its loop (the lifetime tests look for the
 * sandbox's processes that way), and the sandbox's start must not wait for
 * the loop; and a directory service may take its time, which must never be
 * the loop's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "execution-internal.h"

/* A question is two 32-bit decimals, a space and a newline. */
#define QUESTION_MAX 32
/* The most a lookup's buffer grows to: nss_files reads every line of the
 * file it scans into it, so one group of 100000 members (900 KB) made a
 * 1 MiB buffer answer ERANGE for every gid, which refused every launch;
 * getent grows its buffer without a bound. */
#define ENTRY_BUF_MAX (64u << 20)
/* The most threads that may be answering at once. A directory service that
 * never returns holds its thread (and the socket) for good, where getent
 * died with its launcher's pid namespace: past this many, a launch is
 * refused (the image reads end-of-file) instead of leaking one more. */
#define SERVICE_THREADS_MAX 64
/* NSS modules run on this thread's stack. */
#define SERVICE_STACK (256u * 1024)

/* 1 when `id` names an entry of the group database (`group`) or the user
 * database, 0 when it does not, or a negative errno. */
static int lookup(bool group, uint32_t id) {
  size_t size = 16384;
  char* buf = NULL;
  int rc;
  bool found = false;
  for (;;) {
    char* grown = realloc(buf, size);
    if (grown == NULL) {
      rc = ENOMEM;
      break;
    }
    buf = grown;
    if (group) {
      struct group gr, *res = NULL;
      rc = getgrgid_r((gid_t)id, &gr, buf, size, &res);
      found = res != NULL;
    } else {
      struct passwd pw, *res = NULL;
      rc = getpwuid_r((uid_t)id, &pw, buf, size, &res);
      found = res != NULL;
    }
    if (rc != ERANGE || size >= ENTRY_BUF_MAX)
      break;
    size *= 4;
  }
  free(buf);
  /* Not found is a success without an entry; any error (a service that
   * could not be reached) is no answer, never "none". */
  if (rc != 0)
    return -rc;
  return found ? 1 : 0;
}

/* The answer line to the question "uid gid". */
static void answer_for(uint32_t uid, uint32_t gid, char* out, size_t size) {
  int user = lookup(false, uid);
  int group = user == 0 ? lookup(true, gid) : 0;
  int err = user < 0 ? -user : group < 0 ? -group : 0;
  if (err != 0)
    snprintf(out, size, "error %d\n", err);
  else
    snprintf(out, size, "%s\n",
             user == 1    ? "user"
             : group == 1 ? "group"
                          : "none");
}

/* The next question from `buf` (`*len` bytes, topped up from `fd`): true
 * with *uid and *gid, false at end-of-file, on an error or a malformed or
 * overlong question. */
static bool next_question(int fd, char* buf, size_t* len, uint32_t* uid,
                          uint32_t* gid) {
  char* nl;
  while ((nl = memchr(buf, '\n', *len)) == NULL) {
    if (*len == QUESTION_MAX)
      return false;
    ssize_t n = read(fd, buf + *len, QUESTION_MAX - *len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    *len += (size_t)n;
  }
  *nl = '\0';
  unsigned long long u, g;
  int used = 0;
  /* Digits, one space, digits: nothing else sscanf would take. */
  const char* space = strchr(buf, ' ');
  bool ok = space != NULL && space != buf && space[1] != '\0' &&
            strspn(buf, "0123456789") == (size_t)(space - buf) &&
            strspn(space + 1, "0123456789") == strlen(space + 1) &&
            sscanf(buf, "%llu %llu%n", &u, &g, &used) == 2 &&
            (size_t)used == (size_t)(nl - buf) && u <= UINT32_MAX &&
            g <= UINT32_MAX;
  size_t rest = *len - (size_t)(nl + 1 - buf);
  memmove(buf, nl + 1, rest);
  *len = rest;
  *uid = (uint32_t)u;
  *gid = (uint32_t)g;
  return ok;
}

static atomic_int serving;

static void* serve(void* arg) {
  int fd = (int)(intptr_t)arg;
  char buf[QUESTION_MAX];
  size_t len = 0;
  uint32_t uid, gid;
  while (next_question(fd, buf, &len, &uid, &gid)) {
    char answer[32];
    answer_for(uid, gid, answer, sizeof answer);
    size_t n = strlen(answer);
    if (send(fd, answer, n, MSG_NOSIGNAL) != (ssize_t)n)
      break;
  }
  close(fd);
  atomic_fetch_sub(&serving, 1);
  return NULL;
}

int maelys__userdb_start(int fd) {
  pthread_attr_t attr;
  pthread_t thread;
  sigset_t all, old;
  if (atomic_fetch_add(&serving, 1) >= SERVICE_THREADS_MAX) {
    atomic_fetch_sub(&serving, 1);
    close(fd);
    return -EAGAIN;
  }
  if (pthread_attr_init(&attr) != 0) {
    atomic_fetch_sub(&serving, 1);
    close(fd);
    return -ENOMEM;
  }
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, SERVICE_STACK);
  /* The host's signals are never this thread's to take. */
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int r = pthread_create(&thread, &attr, serve, (void*)(intptr_t)fd);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  if (r != 0) {
    atomic_fetch_sub(&serving, 1);
    close(fd);
    return -r;
  }
  return 0;
}
