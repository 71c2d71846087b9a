/*
 * The receipt verifier: signatures over the exact bytes of each file, then
 * each chain's sequence, links and closing record. It names the first file
 * that fails, so a reviewer knows where the evidence stops.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "internal.h"

#define RECORD_MAX (16 * 1024 * 1024)
#define RECEIPT_FORMAT "maelys-executor-receipt/1"
#define CLOSE_FORMAT "maelys-executor-receipt-close/1"

typedef struct record {
  char* path;
  char* bytes;
  size_t len;
  bool closing;
  const char* chain; /* borrowed from doc */
  uint64_t sequence;
  const char* previous; /* NULL for the first */
  uint64_t receipts;    /* closing records */
  char digest[72];
  json_t* doc;
} record_t;

typedef struct verifier {
  record_t* records;
  size_t count, capacity;
  char key[80]; /* the expected key, or the first one seen */
  bool key_given;
  char* failure_path;
  char* failure;
} verifier_t;

static bool fail_at(verifier_t* v, const char* path, const char* fmt, ...)
    MAELYS__PRINTF(3, 4);
static bool fail_at(verifier_t* v, const char* path, const char* fmt, ...) {
  if (v->failure != NULL)
    return false;
  va_list ap;
  va_start(ap, fmt);
  v->failure = maelys__executor_vasprintf(fmt, ap);
  va_end(ap);
  v->failure_path = maelys__executor_strdup(path ? path : "");
  return false;
}

static bool is_hex(const char* s, size_t n) {
  if (s == NULL || strlen(s) != n)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return false;
  return true;
}

static bool is_key_text(const char* s) {
  return s != NULL && strncmp(s, "ed25519:", 8) == 0 && is_hex(s + 8, 64);
}

static bool is_digest(const char* s) {
  return s != NULL && strncmp(s, "sha256:", 7) == 0 && is_hex(s + 7, 64);
}

static void unhex(const char* s, unsigned char* out, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned hi =
        (unsigned)(s[2 * i] <= '9' ? s[2 * i] - '0' : s[2 * i] - 'a' + 10);
    unsigned lo = (unsigned)(s[2 * i + 1] <= '9' ? s[2 * i + 1] - '0'
                                                 : s[2 * i + 1] - 'a' + 10);
    out[i] = (unsigned char)(hi << 4 | lo);
  }
}

static int add_file(verifier_t* v, const char* path) {
  if (maelys__executor_reserve((void**)&v->records, &v->capacity,
                               sizeof *v->records, v->count + 1) != 0)
    return -ENOMEM;
  record_t* r = &v->records[v->count];
  memset(r, 0, sizeof *r);
  if ((r->path = maelys__executor_strdup(path)) == NULL)
    return -ENOMEM;
  v->count++;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return -errno;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > RECORD_MAX) {
    close(fd);
    return -EINVAL;
  }
  r->bytes = malloc((size_t)st.st_size + 1);
  if (r->bytes == NULL) {
    close(fd);
    return -ENOMEM;
  }
  size_t got = 0;
  while (got < (size_t)st.st_size) {
    ssize_t n = read(fd, r->bytes + got, (size_t)st.st_size - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got += (size_t)n;
  }
  close(fd);
  r->bytes[got] = '\0';
  r->len = got;
  return 0;
}

static int by_name(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

static bool has_suffix(const char* s, const char* suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n > m && strcmp(s + n - m, suffix) == 0;
}

/* A directory's *.json and *.close files, sorted by name. */
static int add_directory(verifier_t* v, const char* dir) {
  DIR* d = opendir(dir);
  if (d == NULL)
    return -errno;
  char** names = NULL;
  size_t n = 0, cap = 0;
  int r = 0;
  struct dirent* de;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.' ||
        !(has_suffix(de->d_name, ".json") || has_suffix(de->d_name, ".close")))
      continue;
    char* p = maelys__executor_asprintf("%s/%s", dir, de->d_name);
    if (p == NULL ||
        maelys__executor_reserve((void**)&names, &cap, sizeof *names, n + 1)) {
      free(p);
      r = -ENOMEM;
      break;
    }
    names[n++] = p;
  }
  closedir(d);
  if (n > 0)
    qsort(names, n, sizeof *names, by_name);
  for (size_t i = 0; i < n; i++) {
    if (r == 0) {
      int a = add_file(v, names[i]);
      if (a == -ENOMEM)
        r = a;
    }
    free(names[i]);
  }
  free(names);
  return r;
}

/* The signature: over the file's bytes with the value's digits zeroed. */
static bool check_signature(verifier_t* v, record_t* r) {
  json_t* sig = json_object_get(r->doc, "signature");
  if (sig == NULL)
    return fail_at(v, r->path, "%s: not signed", r->path);
  const char* alg = json_string_value(json_object_get(sig, "algorithm"));
  const char* key = json_string_value(json_object_get(sig, "key"));
  const char* value = json_string_value(json_object_get(sig, "value"));
  if (!json_is_object(sig) || alg == NULL || strcmp(alg, "ed25519") != 0 ||
      !is_key_text(key) || !is_hex(value, 2 * crypto_sign_BYTES))
    return fail_at(v, r->path, "%s: the signature member is malformed",
                   r->path);
  if (v->key[0] == '\0')
    snprintf(v->key, sizeof v->key, "%s", key);
  if (strcmp(key, v->key) != 0)
    return fail_at(v, r->path, "%s: signed by %s, not by %s%s", r->path, key,
                   v->key, v->key_given ? " (the key given)" : "");
  /* The member is the document's last, so its value is the last occurrence
   * of those digits; a second occurrence anywhere is refused rather than
   * guessed at. */
  char* at = strstr(r->bytes, value);
  if (at == NULL || strstr(at + 1, value) != NULL)
    return fail_at(v, r->path,
                   "%s: the signature value does not occur exactly once in "
                   "the file",
                   r->path);
  char* message = malloc(r->len);
  if (message == NULL)
    return fail_at(v, r->path, "%s: out of memory", r->path);
  memcpy(message, r->bytes, r->len);
  memset(message + (at - r->bytes), '0', 2 * crypto_sign_BYTES);
  unsigned char pk[crypto_sign_PUBLICKEYBYTES];
  unsigned char sg[crypto_sign_BYTES];
  unhex(key + 8, pk, sizeof pk);
  unhex(value, sg, sizeof sg);
  int ok = crypto_sign_verify_detached(sg, (const unsigned char*)message,
                                       r->len, pk);
  free(message);
  if (ok != 0)
    return fail_at(v, r->path,
                   "%s: the signature does not match the file's bytes (the "
                   "file was modified after it was signed)",
                   r->path);
  return true;
}

static bool check_record(verifier_t* v, record_t* r) {
  if (r->len == 0 || r->bytes[r->len - 1] != '\n' || strlen(r->bytes) != r->len)
    return fail_at(v, r->path,
                   "%s: not a receipt file (it must be one JSON document and "
                   "a final newline)",
                   r->path);
  json_error_t jerr;
  r->doc = json_loadb(r->bytes, r->len, JSON_REJECT_DUPLICATES, &jerr);
  if (!json_is_object(r->doc))
    return fail_at(v, r->path, "%s: not a JSON object (line %d: %s)", r->path,
                   jerr.line, r->doc ? "not an object" : jerr.text);
  const char* format = json_string_value(json_object_get(r->doc, "format"));
  if (format == NULL || (strcmp(format, RECEIPT_FORMAT) != 0 &&
                         strcmp(format, CLOSE_FORMAT) != 0))
    return fail_at(v, r->path, "%s: unknown format '%s'", r->path,
                   format ? format : "(none)");
  r->closing = strcmp(format, CLOSE_FORMAT) == 0;
  if (!check_signature(v, r))
    return false;
  json_t* chain = json_object_get(r->doc, "chain");
  json_t* seq = json_object_get(chain, "sequence");
  json_t* prev = json_object_get(chain, "previous");
  r->chain = json_string_value(json_object_get(chain, "id"));
  if (chain == NULL)
    return fail_at(v, r->path,
                   "%s: not part of a receipt chain, so its removal or that "
                   "of its neighbours could not be detected",
                   r->path);
  if (!maelys__executor_chain_id_is_valid(r->chain) || !json_is_integer(seq) ||
      json_integer_value(seq) < 1 ||
      !(json_is_null(prev) || is_digest(json_string_value(prev))))
    return fail_at(v, r->path, "%s: the chain member is malformed", r->path);
  r->sequence = (uint64_t)json_integer_value(seq);
  r->previous = json_string_value(prev);
  if (r->closing) {
    json_t* n = json_object_get(r->doc, "receipts");
    if (!json_is_integer(n) ||
        (uint64_t)json_integer_value(n) + 1 != r->sequence)
      return fail_at(v, r->path,
                     "%s: the closing record's receipt count does not match "
                     "its sequence",
                     r->path);
    r->receipts = (uint64_t)json_integer_value(n);
  }
  /* The digest the next record must name: the file's bytes as they are. */
  crypto_hash_sha256_state st;
  unsigned char h[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_init(&st);
  crypto_hash_sha256_update(&st, (const unsigned char*)r->bytes, r->len);
  crypto_hash_sha256_final(&st, h);
  memcpy(r->digest, "sha256:", 7);
  maelys__executor_hex(h, sizeof h, r->digest + 7);
  return true;
}

static int by_chain_position(const void* a, const void* b) {
  const record_t* x = *(record_t* const*)a;
  const record_t* y = *(record_t* const*)b;
  return x->sequence < y->sequence ? -1 : x->sequence > y->sequence;
}

/* One chain: receipts 1..N in order, each naming its predecessor's digest,
 * then exactly one closing record naming the last. */
static bool check_chain(verifier_t* v, const char* id, json_t* chains) {
  record_t** members = calloc(v->count, sizeof(record_t*));
  if (members == NULL)
    return fail_at(v, NULL, "out of memory");
  size_t n = 0;
  for (size_t i = 0; i < v->count; i++)
    if (strcmp(v->records[i].chain, id) == 0)
      members[n++] = &v->records[i];
  qsort(members, n, sizeof(record_t*), by_chain_position);
  bool ok = true;
  const record_t* prev = NULL;
  const record_t* closing = NULL;
  for (size_t i = 0; ok && i < n; i++) {
    const record_t* r = members[i];
    uint64_t want = prev ? prev->sequence + 1 : 1;
    if (closing != NULL)
      ok = fail_at(v, r->path,
                   "%s: chain '%s' continues after its closing record %s",
                   r->path, id, closing->path);
    else if (prev != NULL && r->sequence == prev->sequence)
      ok = fail_at(v, r->path, "%s: chain '%s' has two records numbered %llu",
                   r->path, id, (unsigned long long)r->sequence);
    else if (r->sequence != want)
      ok = fail_at(
          v, r->path,
          "%s: record %llu of chain '%s' follows %s: record %llu is missing",
          r->path, (unsigned long long)r->sequence, id,
          prev ? prev->path : "the chain's start", (unsigned long long)want);
    else if (prev == NULL && r->previous != NULL)
      ok = fail_at(v, r->path,
                   "%s: the first record of chain '%s' names a predecessor",
                   r->path, id);
    else if (prev != NULL &&
             (r->previous == NULL || strcmp(r->previous, prev->digest) != 0))
      ok =
          fail_at(v, r->path,
                  "%s: record %llu of chain '%s' names the predecessor "
                  "digest %s, but %s has the digest %s (modified or "
                  "replaced)",
                  r->path, (unsigned long long)r->sequence, id,
                  r->previous ? r->previous : "null", prev->path, prev->digest);
    if (r->closing)
      closing = r;
    prev = r;
  }
  if (ok && closing == NULL)
    ok = fail_at(v, prev->path,
                 "%s: chain '%s' has no closing record after it: its tail "
                 "may have been dropped",
                 prev->path, id);
  if (ok)
    json_array_append_new(chains,
                          json_pack("{s:s, s:I, s:s}", "id", id, "receipts",
                                    (json_int_t)closing->receipts, "closing",
                                    closing->path));
  free(members);
  return ok;
}

maelys_executor_result_t
maelys_executor_verify_receipts(const char* const* paths, size_t count,
                                const char* public_key, char** out_report,
                                char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (out_report != NULL)
    *out_report = NULL;
  if (paths == NULL || count == 0)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "no receipt file or directory to verify");
  if (public_key != NULL && !is_key_text(public_key))
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "public key '%s' is not \"ed25519:\" and 64 lowercase hex digits",
        public_key);
  if (sodium_init() < 0)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                                 "libsodium could not be initialised");
  verifier_t v;
  memset(&v, 0, sizeof v);
  if (public_key != NULL) {
    snprintf(v.key, sizeof v.key, "%s", public_key);
    v.key_given = true;
  }
  maelys_executor_result_t res = MAELYS_EXECUTOR_OK;
  for (size_t i = 0; i < count && res == MAELYS_EXECUTOR_OK; i++) {
    struct stat st;
    int r = paths[i] == NULL           ? -EINVAL
            : stat(paths[i], &st) != 0 ? -errno
            : S_ISDIR(st.st_mode)      ? add_directory(&v, paths[i])
                                       : add_file(&v, paths[i]);
    if (r != 0)
      res = maelys__executor_fail(out_error,
                                  r == -ENOMEM ? MAELYS_EXECUTOR_ERR_MEMORY
                                               : MAELYS_EXECUTOR_ERR_IO,
                                  "%s: cannot be read: %s",
                                  paths[i] ? paths[i] : "(null)", strerror(-r));
  }
  json_t* chains = json_array();
  if (res == MAELYS_EXECUTOR_OK && v.count == 0)
    fail_at(&v, paths[0], "%s: no receipt in it", paths[0]);
  for (size_t i = 0;
       res == MAELYS_EXECUTOR_OK && v.failure == NULL && i < v.count; i++)
    check_record(&v, &v.records[i]);
  for (size_t i = 0;
       res == MAELYS_EXECUTOR_OK && v.failure == NULL && i < v.count; i++) {
    bool seen = false;
    for (size_t k = 0; k < i && !seen; k++)
      seen = strcmp(v.records[k].chain, v.records[i].chain) == 0;
    if (!seen)
      check_chain(&v, v.records[i].chain, chains);
  }
  if (res == MAELYS_EXECUTOR_OK) {
    json_t* report =
        json_pack("{s:b, s:I, s:s, s:b, s:o}", "verified", v.failure == NULL,
                  "records", (json_int_t)v.count, "key", v.key, "key_given",
                  v.key_given, "chains", chains);
    chains = NULL;
    if (report != NULL && v.failure != NULL)
      json_object_set_new(
          report, "failure",
          json_pack("{s:s, s:s}", "path", v.failure_path, "reason", v.failure));
    if (out_report != NULL && report != NULL)
      *out_report = json_dumps(report, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(report);
    if (v.failure != NULL)
      res = maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_DENIED, "%s",
                                  v.failure);
  }
  json_decref(chains);
  for (size_t i = 0; i < v.count; i++) {
    free(v.records[i].path);
    free(v.records[i].bytes);
    json_decref(v.records[i].doc);
  }
  free(v.records);
  free(v.failure);
  free(v.failure_path);
  return res;
}
