/*
 * The proof cache (maelys_executor_set_proof_cache): what a backend's probe
 * proved, kept so that the next registration on the same host does not run
 * the probe's sandboxes again.
 *
 * A proof is reused only when everything it depends on is unchanged. The key
 * is the backend's own part (proof_key, ABI 6: the identities of the
 * programs its probe runs -- bwrap, the helper, the launcher -- as device,
 * inode, size, modification and change times, which change with any rewrite
 * or replacement, in place or not; a change time cannot be set back) and the
 * host's: the library's version, the kernel's release and version, the boot
 * id, the effective uid and gid, this process's cgroups, the sysctls that
 * allow or refuse user namespaces, the active LSMs and the seccomp actions.
 * The whole key text is stored in the record and compared byte for byte (the
 * file name is only its SHA-256). A record older than the cache's maximum
 * age (a minute until a second probe confirmed it: max_age), or dated in
 * the future, is not used.
 *
 * Authority (invariant 18): the directory and each record must belong to
 * this process's effective uid and be writable by nobody else, and are
 * opened without following a symbolic link; anything else is ignored (and
 * the probe runs). The host chooses a directory no sandbox can write (the
 * CLI's state directory, which no plan may make writable).
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "internal.h"

#define PROOF_FORMAT "maelys-proof/1"
#define PROOF_MAX_BYTES (256 * 1024)

/* A growing text. */
typedef struct text {
  char* s;
  size_t len, cap;
  bool oom;
} text_t;

static void add(text_t* t, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void add(text_t* t, const char* fmt, ...) {
  if (t->oom)
    return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || maelys__executor_reserve((void**)&t->s, &t->cap, 1,
                                        t->len + (size_t)n + 1) != 0) {
    t->oom = true;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(t->s + t->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  t->len += (size_t)n;
}

/* A small file's text, or "-" when it cannot be read. */
static void add_file(text_t* t, const char* label, const char* path) {
  char buf[4096];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
  if (fd >= 0)
    close(fd);
  if (n < 0)
    n = 0;
  buf[n] = '\0';
  if (n > 0 && buf[n - 1] == '\n')
    buf[n - 1] = '\0';
  add(t, "%s=%s\n", label, n > 0 ? buf : "-");
}

/* The host's part of the key. */
static void host_facts(text_t* t) {
  struct utsname u;
  if (uname(&u) == 0)
    add(t, "kernel=%s %s %s\n", u.release, u.version, u.machine);
  add(t, "library=%s\n", maelys_executor_version());
  add(t, "euid=%u egid=%u groups=", (unsigned)geteuid(), (unsigned)getegid());
  gid_t groups[256];
  int count = getgroups(256, groups);
  for (int i = 0; i < count; i++)
    add(t, "%s%u", i ? "," : "", (unsigned)groups[i]);
  add(t, "\n");
  add_file(t, "boot", "/proc/sys/kernel/random/boot_id");
  add_file(t, "cgroup", "/proc/self/cgroup");
  add_file(t, "userns_clone", "/proc/sys/kernel/unprivileged_userns_clone");
  add_file(t, "max_user_namespaces", "/proc/sys/user/max_user_namespaces");
  add_file(t, "apparmor_userns",
           "/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
  add_file(t, "lsm", "/sys/kernel/security/lsm");
  add_file(t, "seccomp", "/proc/sys/kernel/seccomp/actions_avail");
  /* What this process may do: a seccomp filter or a capability set of its
   * own (a container, a wrapper) changes what a backend can do from it. */
  char status[8192];
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, status, sizeof status - 1) : -1;
  if (fd >= 0)
    close(fd);
  status[n > 0 ? n : 0] = '\0';
  static const char* const fields[] = {
      "NoNewPrivs:", "Seccomp:", "Seccomp_filters:", "CapInh:", "CapPrm:",
      "CapEff:",     "CapBnd:",  "CapAmb:",          NULL};
  for (size_t i = 0; fields[i] != NULL; i++) {
    const char* at = strstr(status, fields[i]);
    const char* end = at ? strchr(at, '\n') : NULL;
    if (at != NULL && end != NULL)
      add(t, "%.*s\n", (int)(end - at), at);
    else
      add(t, "%s -\n", fields[i]);
  }
  /* The namespaces it runs in (a container's are not the host's). */
  static const char* const ns[] = {"user", "mnt", "pid", "net", "cgroup", NULL};
  for (size_t i = 0; ns[i] != NULL; i++) {
    char path[64], link[128];
    snprintf(path, sizeof path, "/proc/self/ns/%s", ns[i]);
    ssize_t l = readlink(path, link, sizeof link - 1);
    link[l > 0 ? l : 0] = '\0';
    add(t, "ns.%s=%s\n", ns[i], l > 0 ? link : "-");
  }
}

/* The full key of `entry`'s proof, or NULL when it cannot be cached. */
/* Whether this process runs under a seccomp filter of its own: the key
 * could name the filters' count but not what they allow (an adversarial
 * review reused a proof made under a harmless filter under one that denies
 * namespaces), so no proof is kept or reused there. */
static bool filtered(void) {
  char status[8192];
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, status, sizeof status - 1) : -1;
  if (fd >= 0)
    close(fd);
  if (n <= 0)
    return true;
  status[n] = '\0';
  const char* at = strstr(status, "\nSeccomp:");
  return at == NULL || strtol(at + strlen("\nSeccomp:"), NULL, 10) != 0;
}

static char* proof_key(const maelys__backend_entry_t* entry) {
  if (entry->vtable->abi_version < 6 || entry->vtable->proof_key == NULL ||
      filtered())
    return NULL;
  char own[4096];
  own[0] = '\0';
  if (entry->vtable->proof_key(entry->state, own, sizeof own) != 0)
    return NULL;
  own[sizeof own - 1] = '\0';
  text_t t = {0};
  add(&t, "format=%s\nbackend=%s abi=%u\n", PROOF_FORMAT, entry->vtable->name,
      (unsigned)entry->vtable->abi_version);
  host_facts(&t);
  add(&t, "backend-key=%s\n", own);
  if (t.oom) {
    free(t.s);
    return NULL;
  }
  return t.s;
}

/* The record's name: BACKEND-SHA256.json. */
static void record_name(const char* backend, const char* key, char* out,
                        size_t size) {
  unsigned char hash[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(hash, (const unsigned char*)key, strlen(key));
  char hex[crypto_hash_sha256_BYTES * 2 + 1];
  sodium_bin2hex(hex, sizeof hex, hash, sizeof hash);
  snprintf(out, size, "%s-%s.json", backend, hex);
}

/* The cache directory, opened without following a link and checked: this
 * uid's, writable by nobody else. -1 if not. */
static int open_dir(const char* dir) {
  int d = maelys_backend_open_dir_nofollow(dir);
  struct stat st;
  if (d < 0)
    return -1;
  if (fstat(d, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
    close(d);
    return -1;
  }
  return d;
}

/* 1 to 16 lower-case hexadecimal digits, nothing else (strtoull would take
 * a sign, blanks and a 0x). */
static bool mask_text(const char* s) {
  size_t n = strlen(s);
  if (n == 0 || n > 16)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return false;
  return true;
}

/* The record `name` of the directory `dir` (its owner's alone, not a link),
 * parsed, or NULL. */
static json_t* read_record(int dir, const char* name) {
  json_t* doc = NULL;
  /* O_NONBLOCK: a FIFO planted at the name must not hang the host. */
  int fd = dir >= 0 ? openat(dir, name,
                             O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
                    : -1;
  struct stat st;
  if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      st.st_uid == geteuid() && (st.st_mode & 022) == 0 &&
      st.st_size < PROOF_MAX_BYTES) {
    /* Read whole: jansson's json_loadfd reads one byte per call. */
    char* buf = malloc((size_t)st.st_size + 1);
    ssize_t n = buf != NULL ? read(fd, buf, (size_t)st.st_size) : -1;
    json_error_t jerr;
    if (n == (ssize_t)st.st_size)
      doc = json_loadb(buf, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
    free(buf);
  }
  if (fd >= 0)
    close(fd);
  return doc;
}

/* The fields of a proof record, borrowed from its document. */
typedef struct record {
  const char* mask;
  json_int_t written;
  json_t* reasons;
  json_t* diagnostic;
  int confirmed;
} record_t;

/* Whether `doc` is a well-formed proof record for `key`: a load reads
 * nothing else, and a store counts nothing else as the probe it
 * replaces. */
static bool record_fields(json_t* doc, const char* key, time_t now,
                          record_t* r) {
  const char *format = NULL, *stored_key = NULL;
  memset(r, 0, sizeof *r);
  /* Written at most a minute in the future (a clock set back). */
  return doc != NULL && now >= 0 &&
         json_unpack(doc, "{s:s, s:s, s:I, s:s, s:o, s?o, s?b}", "format",
                     &format, "key", &stored_key, "written", &r->written,
                     "proved", &r->mask, "reasons", &r->reasons, "diagnostic",
                     &r->diagnostic, "confirmed", &r->confirmed) == 0 &&
         strcmp(format, PROOF_FORMAT) == 0 && strcmp(stored_key, key) == 0 &&
         r->written >= 0 && r->written <= (json_int_t)now + 60 &&
         json_is_object(r->reasons) && mask_text(r->mask);
}

/*
 * How long a record is used, in seconds. A probe can fail for a passing
 * reason (under load, a step timed out: 27 of 50 runs started at once on a
 * fresh state directory were refused for process_tree in the adversarial
 * review), and its record would then refuse plans for the cache's whole
 * age. So a record is used for that long only once two probes in a row
 * proved the same (it is "confirmed"); until then for a minute, after which
 * the next registration probes again.
 */
#define PROOF_UNCONFIRMED_AGE 60
static json_int_t max_age(const maelys_executor_t* executor, int confirmed) {
  json_int_t age = (json_int_t)executor->proof_max_age;
  return confirmed || age < PROOF_UNCONFIRMED_AGE ? age : PROOF_UNCONFIRMED_AGE;
}

bool maelys__proof_cache_load(const maelys_executor_t* executor,
                              maelys__backend_entry_t* entry) {
  /* Max age 0: written, never read (a fresh probe that refreshes). */
  if (executor->proof_dir == NULL || executor->proof_max_age == 0)
    return false;
  char* key = proof_key(entry);
  if (key == NULL)
    return false;
  char name[256];
  record_name(entry->vtable->name, key, name, sizeof name);
  bool loaded = false;
  int dir = open_dir(executor->proof_dir);
  json_t* doc = read_record(dir, name);
  record_t r;
  time_t now = time(NULL);
  if (record_fields(doc, key, now, &r) &&
      (json_int_t)now - r.written <= max_age(executor, r.confirmed)) {
    entry->proved =
        (uint64_t)strtoull(r.mask, NULL, 16) & MAELYS_BACKEND_CAP_ALL;
    const char* bit;
    json_t* why;
    json_object_foreach(r.reasons, bit, why) {
      int b = atoi(bit);
      if (b >= 0 && b < 64 && json_is_string(why) &&
          !(entry->proved & (UINT64_C(1) << b)) && entry->reasons[b] == NULL)
        entry->reasons[b] = maelys__executor_strdup(json_string_value(why));
    }
    if (json_is_string(r.diagnostic))
      entry->diagnostic =
          maelys__executor_strdup(json_string_value(r.diagnostic));
    entry->proof_cached = true;
    loaded = true;
  }
  json_decref(doc);
  if (dir >= 0)
    close(dir);
  free(key);
  return loaded;
}

void maelys__proof_cache_store(const maelys_executor_t* executor,
                               const maelys__backend_entry_t* entry) {
  if (executor->proof_dir == NULL)
    return;
  /* A probe that proved nothing may have met a passing condition (a
   * timeout under load): it is not kept, and the next registration tries
   * again. */
  if (entry->proved == 0)
    return;
  char* key = proof_key(entry);
  if (key == NULL)
    return;
  char name[256], tmp[300], mask[24];
  record_name(entry->vtable->name, key, name, sizeof name);
  snprintf(mask, sizeof mask, "%" PRIx64, entry->proved);
  json_t* reasons = json_object();
  for (int b = 0; reasons != NULL && b < 64; b++)
    if (entry->reasons[b] != NULL) {
      char bit[8];
      snprintf(bit, sizeof bit, "%d", b);
      json_object_set_new(reasons, bit, json_string(entry->reasons[b]));
    }
  /* Confirmed when the record it replaces (of any age) proved the same. */
  int dir = open_dir(executor->proof_dir);
  json_t* before = read_record(dir, name);
  record_t was;
  bool confirmed = record_fields(before, key, time(NULL), &was) &&
                   strcmp(was.mask, mask) == 0;
  json_decref(before);
  json_t* doc =
      json_pack("{s:s, s:s, s:I, s:s, s:o, s:b}", "format", PROOF_FORMAT, "key",
                key, "written", (json_int_t)time(NULL), "proved", mask,
                "reasons", reasons, "confirmed", confirmed);
  if (doc != NULL && entry->diagnostic != NULL)
    json_object_set_new(doc, "diagnostic", json_string(entry->diagnostic));
  char* body = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
  json_decref(doc);
  if (body != NULL && dir >= 0) {
    snprintf(tmp, sizeof tmp, ".%s.%ld", name, (long)getpid());
    int fd = openat(dir, tmp,
                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    size_t len = strlen(body);
    bool ok = fd >= 0 && write(fd, body, len) == (ssize_t)len;
    if (fd >= 0)
      close(fd);
    /* Replaced at once: a reader sees the old record or the new one. */
    if (!ok || renameat(dir, tmp, dir, name) != 0)
      unlinkat(dir, tmp, 0);
  }
  if (dir >= 0)
    close(dir);
  free(body);
  free(key);
}
