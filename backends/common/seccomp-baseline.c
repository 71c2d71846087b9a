/*
 * The seccomp baseline every confining backend installs (the bubblewrap
 * backend hands it to bwrap with --seccomp), built with libseccomp (never
 * hand-written BPF). Default: allow; each rule below closes one door and says
 * which.
 *
 * Only the native ABI is in the filter, and its bad-architecture action kills
 * the process. That covers both 32-bit entries of x86-64: i386 calls through
 * int 0x80 (where socket arguments would hide in memory behind socketcall)
 * carry another audit arch, and x32 calls, which carry the x86-64 arch with
 * the x32 bit set in the syscall number, are sent to the same action by the
 * x86-64 filter libseccomp generates (checked by the escape tests: both die
 * with SIGSYS). No 32-bit entry point can reach a call the rules deny.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <seccomp.h>

#include "seccomp-baseline.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif

typedef struct denial {
  const char* name;
  const char* closes;
} denial_t;

/* Calls denied outright with EPERM, one line each for what it closes. */
static const denial_t denied[] = {
    /* Kernel keyrings are not namespaced: a sandbox could read or plant
     * secrets in keyrings shared with the host user. */
    {"keyctl", "access to shared kernel keyrings"},
    {"add_key", "planting keys in shared kernel keyrings"},
    {"request_key", "reading keys from shared kernel keyrings"},
    /* Tracing and cross-process memory access. */
    {"ptrace", "tracing or injecting into other processes"},
    {"process_vm_readv", "reading another process's memory"},
    {"process_vm_writev", "writing another process's memory"},
    /* Kernel attack surface with a long history of privilege escalations. */
    {"perf_event_open", "perf events (kernel attack surface, side channels)"},
    {"bpf", "loading BPF programs into the kernel"},
    {"userfaultfd", "userfaultfd (used to win kernel races)"},
    {"io_uring_setup", "io_uring, which bypasses per-syscall filtering"},
    {"io_uring_enter", "io_uring, which bypasses per-syscall filtering"},
    {"io_uring_register", "io_uring, which bypasses per-syscall filtering"},
    /* The mount family: the sandbox's view of the filesystem is final. */
    {"mount", "changing mounts"},
    {"umount2", "removing the mounts that confine the view"},
    {"pivot_root", "replacing the root"},
    {"chroot", "changing the root"},
    {"open_tree", "cloning mount trees"},
    {"move_mount", "attaching mount trees"},
    {"fsopen", "creating filesystem contexts"},
    {"fsconfig", "configuring filesystem contexts"},
    {"fsmount", "creating mounts from filesystem contexts"},
    {"fspick", "reconfiguring existing mounts"},
    {"mount_setattr", "changing mount attributes (idmaps, read-only)"},
    /* Joining other namespaces. */
    {"setns", "joining another namespace"},
    /* Another process's descriptors and memory: the helper's status channel
     * must stay out of reach (invariant 19). */
    {"pidfd_getfd", "copying another process's descriptors"},
    {"process_madvise", "advising on another process's memory"},
};

/* Invariant 17: no file leaves a sandbox set-user-id or set-group-id. A
 * writable bind is the host's filesystem, where the payload owns what it
 * creates (as root, through an idmapped mount: root's files), and nosuid
 * inside the sandbox protects only the inside. Every call that sets a mode
 * is refused with EPERM when the mode carries S_ISUID or S_ISGID, files and
 * directories alike (the filter sees the mode, not the object: a directory
 * cannot be made set-group-id inside either; one created below a set-group-id
 * directory still inherits the bit from the kernel, which only the host can
 * have set). `mode_arg` is the index of the mode argument. */
typedef struct mode_call {
  const char* name;
  int number; /* used when the name is newer than libseccomp */
  unsigned mode_arg;
} mode_call_t;

#define SYS_FCHMODAT2 452 /* Linux 6.6; Debian 12's libseccomp predates it */

static const mode_call_t mode_calls[] = {
    {"chmod", -1, 1},    {"fchmod", -1, 1},
    {"fchmodat", -1, 2}, {"fchmodat2", SYS_FCHMODAT2, 2},
    {"creat", -1, 1},    {"mknod", -1, 1},
    {"mknodat", -1, 2},
};

/* The calls whose mode only counts with O_CREAT or O_TMPFILE: `flags_arg`
 * and `mode_arg` index their arguments. */
static const struct {
  const char* name;
  unsigned flags_arg, mode_arg;
} open_calls[] = {{"open", 1, 2}, {"openat", 2, 3}};

/* The highest system call number the filter was written against. Anything
 * above it answers ENOSYS (up to NEWEST_REFUSED), so that a mode-setting
 * call added by a later kernel cannot pass unfiltered. */
#define NEWEST_KNOWN 450
#define NEWEST_REFUSED 1023

/* Namespace flags refused on unshare and clone. */
static const unsigned long ns_flags[] = {
    CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,    CLONE_NEWUSER,
    CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP, CLONE_NEWTIME};

static int deny_name(scmp_filter_ctx ctx, const char* name, uint32_t action) {
  int nr = seccomp_syscall_resolve_name(name);
  /* A name the native ABI does not have is a call that cannot be made. */
  if (nr == __NR_SCMP_ERROR)
    return 0;
  return seccomp_rule_add(ctx, action, nr, 0);
}

static int syscall_number(const char* name, int fallback) {
  int nr = seccomp_syscall_resolve_name(name);
  return nr == __NR_SCMP_ERROR ? fallback : nr;
}

static int add_setid_rules(scmp_filter_ctx ctx) {
  static const unsigned bits[] = {S_ISUID, S_ISGID};
  int rc;
  for (size_t i = 0; i < sizeof mode_calls / sizeof mode_calls[0]; i++) {
    int nr = syscall_number(mode_calls[i].name, mode_calls[i].number);
    if (nr < 0)
      continue; /* not a call of the native ABI */
    for (size_t b = 0; b < 2; b++) {
      struct scmp_arg_cmp cmp = {mode_calls[i].mode_arg, SCMP_CMP_MASKED_EQ,
                                 bits[b], bits[b]};
      if ((rc = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1,
                                       &cmp)) != 0)
        return rc;
    }
  }
  static const unsigned creating[] = {O_CREAT, __O_TMPFILE};
  for (size_t i = 0; i < sizeof open_calls / sizeof open_calls[0]; i++) {
    int nr = syscall_number(open_calls[i].name, -1);
    if (nr < 0)
      continue;
    for (size_t f = 0; f < 2; f++)
      for (size_t b = 0; b < 2; b++) {
        struct scmp_arg_cmp cmp[2] = {
            {open_calls[i].flags_arg, SCMP_CMP_MASKED_EQ, creating[f],
             creating[f]},
            {open_calls[i].mode_arg, SCMP_CMP_MASKED_EQ, bits[b], bits[b]}};
        if ((rc = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EPERM), nr, 2,
                                         cmp)) != 0)
          return rc;
      }
  }
  /* openat2 passes its flags and mode in memory, where a filter cannot look:
   * answer ENOSYS, so that libc falls back to openat, filtered above. */
  if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS),
                             syscall_number("openat2", 437), 0)) != 0)
    return rc;
  for (int nr = NEWEST_KNOWN + 1; nr <= NEWEST_REFUSED; nr++) {
    if (nr == SYS_FCHMODAT2)
      continue; /* filtered by its mode above */
    if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0)) != 0)
      return rc;
  }
  return 0;
}

int maelys__seccomp_baseline_compile(bool deny_network, bool notified,
                                     unsigned char** out, size_t* out_len,
                                     char** out_error) {
  *out = NULL;
  *out_len = 0;
  int rc = 0;
  int memfd = -1;
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == NULL) {
    rc = -ENOMEM;
    goto done;
  }
  /* Any ABI but the native one is killed (see the comment at the top).
   * libseccomp accepts KILL_PROCESS only once it has seen the kernel's API
   * level; where it cannot (the seccomp() call is hidden from it, as under
   * valgrind) the filter kills the calling thread instead, which stops the
   * call all the same. */
  rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  if (rc == -EINVAL)
    rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_THREAD);
  if (rc != 0)
    goto done;

  /* A binary tree of system call numbers rather than a linear list: every
   * call of the sandbox walks this filter, and the ENOSYS range below adds
   * hundreds of entries. */
  if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) != 0)
    goto done;

  for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++)
    if ((rc = deny_name(ctx, denied[i].name, SCMP_ACT_ERRNO(EPERM))) != 0)
      goto done;

  if ((rc = add_setid_rules(ctx)) != 0)
    goto done;

  /* TIOCSTI pushes characters into a terminal's input queue and TIOCLINUX
   * can do the same on a virtual console: both let a sandbox type commands
   * into the host's shell. The kernel reads the command as 32 bits, so the
   * rule masks the upper half away: setting high bits cannot slip past it. */
  if ((rc = seccomp_rule_add(
           ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
           SCMP_A1_64(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI))) != 0)
    goto done;
  if ((rc = seccomp_rule_add(
           ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
           SCMP_A1_64(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX))) != 0)
    goto done;

  /* personality() can disable address-space randomisation or make readable
   * memory executable; only the query (0xffffffff) is allowed. */
  if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality),
                             1, SCMP_A0_32(SCMP_CMP_NE, 0xffffffffu))) != 0)
    goto done;

  /* New namespaces (a nested user namespace grants a fresh set of
   * capabilities over new objects): refused on unshare and clone, one rule
   * per flag because a rule compares one masked value. */
  for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0]; i++) {
    if ((rc = seccomp_rule_add(
             ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
             SCMP_A0_64(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]))) != 0)
      goto done;
    if ((rc = seccomp_rule_add(
             ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
             SCMP_A0_64(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]))) != 0)
      goto done;
  }
  /* clone3 passes its flags in memory, where a filter cannot look: answer
   * ENOSYS so that libc falls back to clone, which the rules above filter. */
  if ((rc = deny_name(ctx, "clone3", SCMP_ACT_ERRNO(ENOSYS))) != 0)
    goto done;

  if (deny_network) {
    /* Network NONE, second half (the first is the network namespace): every
     * socket family but AF_UNIX is refused, so even a namespace that gained
     * an interface could not be used (invariant 9).
     *
     * With `notified` (bubblewrap), refused with SECCOMP_RET_TRACE, not
     * ERRNO: with no tracer (ptrace is refused inside) it answers ENOSYS,
     * and it is the one action below USER_NOTIF, so the notification filter
     * the sandbox's init stacks on top for the same calls is the one that
     * answers -- EPERM, as ERRNO does, and the denial is recorded
     * (bubblewrap/helper/notify.c). An ERRNO here would win over every
     * stacked USER_NOTIF and the denial would stay invisible. Should that
     * filter be missing or its listener gone, the call is still refused:
     * TRACE or a USER_NOTIF without a listener both answer ENOSYS.
     * USER_NOTIF itself cannot be written here: this filter is built in the
     * host process, where libseccomp accepts it only once it has seen the
     * kernel's API level (never under valgrind). A backend that stacks no
     * such filter (Landlock) gets ERRNO. */
    uint32_t refuse = notified ? SCMP_ACT_TRACE(0) : SCMP_ACT_ERRNO(EPERM);
    if ((rc = seccomp_rule_add(ctx, refuse, SCMP_SYS(socket), 1,
                               SCMP_A0_32(SCMP_CMP_NE, AF_UNIX))) != 0)
      goto done;
    if ((rc = seccomp_rule_add(ctx, refuse, SCMP_SYS(socketpair), 1,
                               SCMP_A0_32(SCMP_CMP_NE, AF_UNIX))) != 0)
      goto done;
  }

  memfd = memfd_create("maelys-seccomp", MFD_CLOEXEC);
  if (memfd < 0) {
    rc = -errno;
    goto done;
  }
  if ((rc = seccomp_export_bpf(ctx, memfd)) != 0)
    goto done;
  off_t len = lseek(memfd, 0, SEEK_END);
  if (len <= 0 || lseek(memfd, 0, SEEK_SET) != 0) {
    rc = -EIO;
    goto done;
  }
  unsigned char* buf = malloc((size_t)len);
  if (buf == NULL) {
    rc = -ENOMEM;
    goto done;
  }
  size_t got = 0;
  while (got < (size_t)len) {
    ssize_t n = read(memfd, buf + got, (size_t)len - got);
    if (n <= 0) {
      free(buf);
      rc = -EIO;
      goto done;
    }
    got += (size_t)n;
  }
  *out = buf;
  *out_len = got;
done:
  if (memfd >= 0)
    close(memfd);
  if (ctx != NULL)
    seccomp_release(ctx);
  if (rc != 0 && out_error != NULL && *out_error == NULL) {
    char msg[160];
    snprintf(msg, sizeof msg, "building the seccomp filter: %s", strerror(-rc));
    *out_error = strdup(msg);
  }
  return rc;
}
