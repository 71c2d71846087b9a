/*
 * Receipts (DESIGN §6): one JSON record per execution, written by the host
 * atomically (temporary file, fsync, rename, fsync of the directory) and never
 * where the sandbox can write (checked at spawn).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "denials.h"
#include "internal.h"

#define RECEIPT_FORMAT "maelys-executor-receipt/1"

void maelys__executor_argv_digest(const char* executable,
                                  const char* const* argv, char out[72]) {
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  /* Length-prefixed, so that argument boundaries are part of what is hashed.
   */
  const char* parts[1] = {executable ? executable : ""};
  for (size_t i = 0;; i++) {
    const char* s = i == 0 ? parts[0] : argv ? argv[i - 1] : NULL;
    if (s == NULL)
      break;
    unsigned char len[8];
    uint64_t n = strlen(s);
    for (int k = 0; k < 8; k++)
      len[k] = (unsigned char)(n >> (56 - 8 * k));
    crypto_hash_sha256_update(&st, len, sizeof len);
    crypto_hash_sha256_update(&st, (const unsigned char*)s, n);
  }
  unsigned char h[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&st, h);
  memcpy(out, "sha256:", 7);
  maelys__executor_hex(h, sizeof h, out + 7);
}

json_t* maelys__executor_receipt_timestamp(int64_t ns) {
  time_t sec = (time_t)(ns / 1000000000);
  int ms = (int)((ns % 1000000000) / 1000000);
  struct tm tm;
  gmtime_r(&sec, &tm);
  char buf[64];
  snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
           tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
           tm.tm_sec, ms);
  return json_string(buf);
}

static const char* outcome_name(maelys_execution_outcome_t o) {
  switch (o) {
  case MAELYS_EXEC_OUTCOME_EXITED:
    return "exited";
  case MAELYS_EXEC_OUTCOME_SIGNALED:
    return "signaled";
  case MAELYS_EXEC_OUTCOME_LAUNCH_FAILED:
    return "launch-failed";
  }
  return "unknown";
}

static const char* stop_name(maelys_execution_stop_result_t r) {
  switch (r) {
  case MAELYS_EXEC_STOPPED_ALREADY_EXITED:
    return "already-exited";
  case MAELYS_EXEC_STOPPED_GRACEFUL:
    return "graceful";
  case MAELYS_EXEC_STOPPED_FORCED:
    return "forced";
  case MAELYS_EXEC_STOPPED_STILL_RUNNING:
    return "still-running";
  case MAELYS_EXEC_STOPPED_CONTAINMENT_FAILED:
    return "containment-failed";
  }
  return "none";
}

/* The limits the plan applied: the sandbox-wide ceilings ("unbounded" where
 * the plan sets none) and the per-process ones. */
static json_t* limits_json(const maelys_executor_plan_t* plan) {
  json_t* o = json_object();
  if (o == NULL || plan == NULL)
    return o ? o : json_null();
  for (int i = 1; i < MAELYS__LIMIT_COUNT; i++) {
    uint64_t v = 0;
    const char* name = maelys__executor_limit_name((maelys_executor_limit_t)i);
    if (maelys_executor_plan_limit_get(plan, (maelys_executor_limit_t)i, &v) ==
        0)
      json_object_set_new(o, name, json_integer((json_int_t)v));
    else
      json_object_set_new(o, name, json_string("unbounded"));
  }
  json_t* per = json_object();
  for (int i = 1; per != NULL && i < MAELYS__RLIMIT_COUNT; i++) {
    uint64_t soft, hard;
    if (maelys_executor_plan_rlimit_get(plan, (maelys_executor_rlimit_t)i,
                                        &soft, &hard) != 0)
      continue;
    json_object_set_new(per, maelys__executor_rlimit_names[i],
                        json_pack("{s:o, s:o}", "soft",
                                  soft == MAELYS_EXECUTOR_RLIMIT_INFINITY
                                      ? json_string("unlimited")
                                      : json_integer((json_int_t)soft),
                                  "hard",
                                  hard == MAELYS_EXECUTOR_RLIMIT_INFINITY
                                      ? json_string("unlimited")
                                      : json_integer((json_int_t)hard)));
  }
  json_object_set_new(o, "per_process", per ? per : json_null());
  return o;
}

/* The signature member's value while the document is signed: 128 zeros,
 * replaced by the signature's hex digits in the text afterwards (same length,
 * so nothing else moves). */
#define SIGNATURE_HEX (2 * crypto_sign_BYTES)

void maelys__executor_record_digest(const char* text, char out[72]) {
  crypto_hash_sha256_state st;
  unsigned char h[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_init(&st);
  crypto_hash_sha256_update(&st, (const unsigned char*)text, strlen(text));
  crypto_hash_sha256_update(&st, (const unsigned char*)"\n", 1);
  crypto_hash_sha256_final(&st, h);
  memcpy(out, "sha256:", 7);
  maelys__executor_hex(h, sizeof h, out + 7);
}

char* maelys__executor_record_render(json_t* doc,
                                     const unsigned char* secret_key) {
  if (doc == NULL)
    return NULL;
  const size_t flags =
      JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6);
  if (secret_key == NULL) {
    char* text = json_dumps(doc, flags);
    json_decref(doc);
    return text;
  }
  /* libsodium's secret key ends with the public key. */
  char key[80];
  memcpy(key, "ed25519:", 8);
  maelys__executor_hex(secret_key + crypto_sign_SEEDBYTES,
                       crypto_sign_PUBLICKEYBYTES, key + 8);
  /* The value is 128 zeros while the text is signed, then replaced by the
   * signature's digits (same length, so nothing else moves). */
  char zero_signature[SIGNATURE_HEX + 1];
  memset(zero_signature, '0', SIGNATURE_HEX);
  zero_signature[SIGNATURE_HEX] = '\0';
  json_object_set_new(doc, "signature",
                      json_pack("{s:s, s:s, s:s}", "algorithm", "ed25519",
                                "key", key, "value", zero_signature));
  char* text = json_dumps(doc, flags);
  json_decref(doc);
  if (text == NULL)
    return NULL;
  /* The signed message is the file's bytes: the text and its newline. The
   * last run of zeros of that length is the value (the member is last). */
  size_t len = strlen(text);
  char* value = NULL;
  for (char* p = strstr(text, zero_signature); p != NULL;
       p = strstr(p + 1, zero_signature))
    value = p;
  unsigned char* message = malloc(len + 1);
  if (value == NULL || message == NULL) {
    free(message);
    free(text);
    return NULL;
  }
  memcpy(message, text, len);
  message[len] = '\n';
  unsigned char sig[crypto_sign_BYTES];
  crypto_sign_detached(sig, NULL, message, len + 1, secret_key);
  free(message);
  char hex[SIGNATURE_HEX + 1];
  maelys__executor_hex(sig, sizeof sig, hex);
  memcpy(value, hex, SIGNATURE_HEX);
  return text;
}

char* maelys__executor_receipt_render(const maelys__receipt_input_t* in) {
  char argv_digest[72];
  maelys__executor_argv_digest(in->executable, in->argv, argv_digest);
  json_t* caps = json_array();
  json_t* doc = json_object();
  if (caps == NULL || doc == NULL) {
    json_decref(caps);
    json_decref(doc);
    return NULL;
  }
  for (int b = 0; b < 64; b++) {
    uint64_t bit = UINT64_C(1) << b;
    if ((in->capabilities & bit) && maelys_executor_capability_name(bit))
      json_array_append_new(caps,
                            json_string(maelys_executor_capability_name(bit)));
  }
  const maelys_execution_status_t* s = in->status;
  json_t* outcome = json_pack("{s:s}", "kind", outcome_name(s->outcome));
  if (outcome != NULL) {
    if (s->outcome == MAELYS_EXEC_OUTCOME_EXITED)
      json_object_set_new(outcome, "exit_code", json_integer(s->exit_code));
    else if (s->outcome == MAELYS_EXEC_OUTCOME_SIGNALED)
      json_object_set_new(outcome, "signal", json_integer(s->term_signal));
    else {
      json_object_set_new(outcome, "step", json_string(s->launch_step));
      json_object_set_new(outcome, "errno", json_integer(s->launch_errno));
      json_object_set_new(outcome, "message", json_string(s->message));
    }
  }
  const char* stage =
      s->stop_stage == MAELYS_EXEC_STOP_STAGE_GRACEFUL ? "graceful"
      : s->stop_stage == MAELYS_EXEC_STOP_STAGE_FORCED ? "forced"
                                                       : "none";
  json_t* stop = json_pack(
      "{s:b, s:s, s:s}", "requested", in->stop_requested, "ended_by", stage,
      "result", in->stop_requested ? stop_name(in->stop_result) : "none");
  json_t* usage = json_pack("{s:f, s:f, s:I}", "user_seconds", in->user_seconds,
                            "system_seconds", in->system_seconds, "max_rss_kib",
                            (json_int_t)in->max_rss_kib);
  if (usage != NULL && in->memory_peak_bytes >= 0)
    json_object_set_new(usage, "memory_peak_bytes",
                        json_integer((json_int_t)in->memory_peak_bytes));
  json_object_set_new(doc, "format", json_string(RECEIPT_FORMAT));
  json_object_set_new(doc, "execution_id", json_string(in->execution_id));
  json_object_set_new(
      doc, "backend",
      json_pack("{s:s, s:o}", "name", in->backend, "capabilities", caps));
  json_object_set_new(doc, "plan_digest", json_string(in->plan_digest));
  json_object_set_new(doc, "decision_digest",
                      in->decision_digest ? json_string(in->decision_digest)
                                          : json_null());
  json_object_set_new(doc, "executable", json_string(in->executable));
  json_object_set_new(doc, "argv_digest", json_string(argv_digest));
  json_object_set_new(doc, "started_at",
                      maelys__executor_receipt_timestamp(in->started_ns));
  json_object_set_new(doc, "ended_at",
                      maelys__executor_receipt_timestamp(in->ended_ns));
  json_object_set_new(doc, "duration_ms",
                      json_real((double)in->duration_ns / 1e6));
  json_object_set_new(doc, "outcome", outcome ? outcome : json_null());
  json_object_set_new(doc, "stop", stop ? stop : json_null());
  json_object_set_new(doc, "resource_usage", usage ? usage : json_null());
  json_object_set_new(doc, "limits", limits_json(in->plan));
  if (in->plan != NULL) {
    maelys_executor_network_t net = maelys_executor_plan_network(in->plan);
    json_t* n = json_pack("{s:s}", "mode", maelys__executor_network_name(net));
    if (n != NULL && net != MAELYS_EXECUTOR_NETWORK_INHERIT)
      json_object_set_new(n, "note", json_string(MAELYS__NETWORK_NONE_NOTE));
    json_object_set_new(doc, "network", n ? n : json_null());
  }
  if (in->identity_set)
    json_object_set_new(doc, "identity",
                        json_pack("{s:I, s:I}", "uid",
                                  (json_int_t)in->identity_uid, "gid",
                                  (json_int_t)in->identity_gid));
  /* What the sandbox refused: only when the backend recorded it. */
  json_t* denials = maelys__denials_json(in->denials, in->plan);
  if (denials != NULL)
    json_object_set_new(doc, "denials", denials);
  /* Evidence members only when asked for, so that a host that uses none of
   * them gets the same receipt as before. */
  if (in->chain_id != NULL)
    json_object_set_new(
        doc, "chain",
        json_pack("{s:s, s:I, s:o}", "id", in->chain_id, "sequence",
                  (json_int_t)in->chain_sequence, "previous",
                  in->chain_previous ? json_string(in->chain_previous)
                                     : json_null()));
  if (in->context_json != NULL) {
    json_t* ctx = json_loads(in->context_json, JSON_REJECT_DUPLICATES, NULL);
    if (ctx == NULL) {
      json_decref(doc);
      return NULL;
    }
    json_object_set_new(doc, "context", ctx);
  }
  return maelys__executor_record_render(doc, in->secret_key);
}

static int mkdir_p(const char* dir) {
  char* copy = maelys__executor_strdup(dir);
  if (copy == NULL)
    return -ENOMEM;
  for (char* p = copy + 1; *p != '\0'; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(copy, 0700) != 0 && errno != EEXIST) {
      int e = errno;
      free(copy);
      return -e;
    }
    *p = '/';
  }
  int r = 0;
  if (mkdir(copy, 0700) != 0 && errno != EEXIST)
    r = -errno;
  free(copy);
  return r;
}

int maelys__executor_receipt_dir_open(const char* dir) {
  int r = mkdir_p(dir);
  if (r != 0)
    return r;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  if (faccessat(fd, ".", W_OK | X_OK, 0) != 0) {
    r = -errno;
    close(fd);
    return r;
  }
  return fd;
}

/* What maelys__executor_receipt_dir_open would find, without creating
 * anything: an existing directory must be writable and searchable; a missing
 * one, its nearest existing ancestor (where mkdir_p would start). */
int maelys__executor_receipt_dir_could_be_ready(const char* dir) {
  char probe[PATH_MAX];
  if (snprintf(probe, sizeof probe, "%s", dir) >= (int)sizeof probe)
    return -ENAMETOOLONG;
  for (;;) {
    struct stat st;
    /* Followed, as open() follows it. */
    if (stat(probe, &st) == 0) {
      if (!S_ISDIR(st.st_mode))
        return -ENOTDIR;
      return access(probe, W_OK | X_OK) != 0 ? -errno : 0;
    }
    if (errno != ENOENT)
      return -errno;
    char* slash = strrchr(probe, '/');
    if (slash == NULL)
      return -ENOENT;
    if (slash == probe)
      slash[1] = '\0';
    else
      *slash = '\0';
  }
}

int maelys__executor_record_write(const char* dir, const char* id,
                                  const char* suffix, const char* json,
                                  char** out_path) {
  *out_path = NULL;
  int dfd = maelys__executor_receipt_dir_open(dir);
  if (dfd < 0)
    return dfd;
  int r =
      maelys__executor_record_write_at(dfd, dir, id, suffix, json, out_path);
  close(dfd);
  return r;
}

/* Through the directory's descriptor only: a directory swapped for a link
 * after it was opened (by a sandbox that can write its parent) redirects
 * nothing. */
int maelys__executor_record_write_at(int dfd, const char* dir, const char* id,
                                     const char* suffix, const char* json,
                                     char** out_path) {
  *out_path = NULL;
  int r = 0;
  char* final_path = maelys__executor_asprintf("%s/%s%s", dir, id, suffix);
  char* final_name = maelys__executor_asprintf("%s%s", id, suffix);
  char* tmp_name = maelys__executor_asprintf(".%s%s.tmp", id, suffix);
  if (final_path == NULL || final_name == NULL || tmp_name == NULL) {
    r = -ENOMEM;
    goto out;
  }
  int fd = openat(dfd, tmp_name,
                  O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    r = -errno;
    goto out;
  }
  size_t len = strlen(json);
  size_t done = 0;
  while (done < len) {
    ssize_t n = write(fd, json + done, len - done);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      r = -errno;
      break;
    }
    done += (size_t)n;
  }
  if (r == 0 && write(fd, "\n", 1) != 1)
    r = -EIO;
  if (r == 0 && fsync(fd) != 0)
    r = -errno;
  close(fd);
  if (r == 0 && renameat(dfd, tmp_name, dfd, final_name) != 0)
    r = -errno;
  if (r != 0) {
    unlinkat(dfd, tmp_name, 0);
    goto out;
  }
  fsync(dfd);
  *out_path = final_path;
  final_path = NULL;
out:
  free(final_path);
  free(final_name);
  free(tmp_name);
  return r;
}
