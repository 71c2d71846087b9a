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
 * One thread of the host process answers every launch's questions, from
 * the first launch that asks on: it watches each conversation's socket and
 * answers a question as soon as it is whole. Not the loop: a host may spawn
 * and then wait for something else before it runs its loop (the lifetime
 * tests look for the sandbox's processes that way), and the sandbox's start
 * must not wait for it; and a directory service may take its time, which
 * must never be the loop's. Not a thread per launch: a thousand launches at
 * once had dozens alive together, each with its stack (peak RSS of the
 * N = 1000 supervisor 7.4 -> 9.3 MiB), and a directory service that never
 * returns would have kept each of them. Such a service now stalls this one
 * thread; the launcher gives up on an answer after its own deadline and
 * refuses.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
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

/* The next question of a conversation's buffer (`*len` bytes): 1 with
 * *uid and *gid (the question taken out of the buffer), 0 when none is whole
 * yet, -1 for a malformed question or one longer than any. */
static int take_question(char* buf, size_t* len, uint32_t* uid, uint32_t* gid) {
  char* nl = memchr(buf, '\n', *len);
  if (nl == NULL)
    return *len == QUESTION_MAX ? -1 : 0;
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
  return ok ? 1 : -1;
}

typedef struct conversation {
  int fd;
  size_t len;
  char buf[QUESTION_MAX];
} conversation_t;

/* Reads what the image sent and answers every whole question: false when
 * the conversation is over (end-of-file, an error, a malformed question,
 * an answer that could not be sent). */
static bool converse(conversation_t* c) {
  ssize_t n = recv(c->fd, c->buf + c->len, QUESTION_MAX - c->len, MSG_DONTWAIT);
  if (n < 0)
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  if (n == 0)
    return false;
  c->len += (size_t)n;
  uint32_t uid, gid;
  int q;
  while ((q = take_question(c->buf, &c->len, &uid, &gid)) == 1) {
    char answer[32];
    answer_for(uid, gid, answer, sizeof answer);
    size_t len = strlen(answer);
    if (send(c->fd, answer, len, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)len)
      return false;
  }
  return q == 0;
}

/* The conversations handed to the service and not taken yet, the
 * service's wake-up (an eventfd) and the process it runs in: a forked
 * child has no such thread, and starts its own. */
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static int* queued;
static size_t queued_count, queued_capacity;
static int wake_fd = -1;
static pid_t service_pid;

/* Moves the queued conversations into `*convs`; a conversation there is
 * no room for is closed (its image reads end-of-file and refuses). */
static void take_queued(conversation_t** convs, size_t* count,
                        size_t* capacity) {
  pthread_mutex_lock(&queue_lock);
  for (size_t i = 0; i < queued_count; i++) {
    if (*count == *capacity) {
      size_t grown = *capacity ? 2 * *capacity : 16;
      conversation_t* c = realloc(*convs, grown * sizeof *c);
      if (c == NULL) {
        close(queued[i]);
        continue;
      }
      *convs = c;
      *capacity = grown;
    }
    (*convs)[(*count)++] = (conversation_t){.fd = queued[i]};
  }
  queued_count = 0;
  pthread_mutex_unlock(&queue_lock);
}

/* The service thread's own state. Static, so that what it holds stays
 * reachable in a forked child, which has the memory but not the thread. */
typedef struct service {
  conversation_t* convs;
  size_t count, capacity;
  struct pollfd* fds;
  size_t fds_capacity;
} service_t;
static service_t svc;

static void* serve(void* arg) {
  int wake = (int)(intptr_t)arg;
  for (;;) {
    if (svc.count + 1 > svc.fds_capacity) {
      /* Under the lock, as take_queued grows its list: a fork never finds
       * an array moved but not yet recorded. */
      size_t want = 2 * (svc.count + 1);
      pthread_mutex_lock(&queue_lock);
      struct pollfd* grown = realloc(svc.fds, want * sizeof *grown);
      if (grown != NULL) {
        svc.fds = grown;
        svc.fds_capacity = want;
      }
      pthread_mutex_unlock(&queue_lock);
      if (grown == NULL && svc.fds == NULL) {
        usleep(1000); /* no memory for even the wake-up: look again */
        continue;
      }
    }
    /* Without memory for all, those that fit are watched meanwhile. */
    size_t watched =
        svc.count < svc.fds_capacity ? svc.count : svc.fds_capacity - 1;
    svc.fds[0] = (struct pollfd){.fd = wake, .events = POLLIN};
    for (size_t i = 0; i < watched; i++)
      svc.fds[i + 1] = (struct pollfd){.fd = svc.convs[i].fd, .events = POLLIN};
    if (poll(svc.fds, watched + 1, -1) < 0)
      continue; /* EINTR; EINVAL or ENOMEM: look again */
    for (size_t i = watched; i-- > 0;) {
      if (svc.fds[i + 1].revents == 0 || converse(&svc.convs[i]))
        continue;
      close(svc.convs[i].fd);
      svc.convs[i] = svc.convs[--svc.count];
    }
    if (svc.fds[0].revents & POLLIN) {
      uint64_t n;
      ssize_t r = read(wake, &n, sizeof n);
      (void)r;
      take_queued(&svc.convs, &svc.count, &svc.capacity);
    }
  }
  return NULL;
}

/* Starts this process's service thread: 0 or a negative errno. Called with
 * queue_lock held. */
/* A fork while another thread holds queue_lock would leave the child a
 * lock nobody releases (its first launch then waited for good: the review
 * forked while the service took its queue). The lock is taken around every
 * fork; the child releases it and starts from nothing: its copies of the
 * parent's queue are closed (consistent, under the lock), and the
 * conversations the parent's thread was serving are forgotten, not closed
 * (that thread may have been changing the list; the copies are
 * close-on-exec), while the arrays themselves, which grow only under the
 * lock, are kept for the child's own thread, started by its first launch. */
static void before_fork(void) {
  pthread_mutex_lock(&queue_lock);
}

static void after_fork_parent(void) {
  pthread_mutex_unlock(&queue_lock);
}

static void after_fork_child(void) {
  if (wake_fd >= 0)
    close(wake_fd);
  wake_fd = -1;
  for (size_t i = 0; i < queued_count; i++)
    close(queued[i]);
  queued_count = 0;
  svc.count = 0;
  service_pid = 0;
  pthread_mutex_unlock(&queue_lock);
}

static void register_fork_handlers(void) {
  pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

static int start_service(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, register_fork_handlers);
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0)
    return -errno;
  pthread_attr_t attr;
  pthread_t thread;
  sigset_t all, old;
  if (pthread_attr_init(&attr) != 0) {
    close(wake);
    return -ENOMEM;
  }
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, SERVICE_STACK);
  /* The host's signals are never this thread's to take. */
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int r = pthread_create(&thread, &attr, serve, (void*)(intptr_t)wake);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  if (r != 0) {
    close(wake);
    return -r;
  }
  wake_fd = wake;
  service_pid = getpid();
  return 0;
}

int maelys__userdb_start(int fd) {
  pthread_mutex_lock(&queue_lock);
  int r = service_pid == getpid() ? 0 : start_service();
  if (r == 0 && queued_count == queued_capacity) {
    size_t grown = queued_capacity ? 2 * queued_capacity : 16;
    int* q = realloc(queued, grown * sizeof *q);
    if (q == NULL)
      r = -ENOMEM;
    else {
      queued = q;
      queued_capacity = grown;
    }
  }
  if (r == 0)
    queued[queued_count++] = fd;
  int wake = wake_fd;
  pthread_mutex_unlock(&queue_lock);
  if (r != 0) {
    close(fd);
    return r;
  }
  uint64_t one = 1;
  ssize_t w = write(wake, &one, sizeof one);
  (void)w; /* a full counter still wakes the service */
  return 0;
}
