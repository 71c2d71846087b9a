/*
 * maelys-warden's receipt evidence: the per-user Ed25519 key (created on
 * first use under the state directory, mode 0600), signing and chaining the
 * receipts of a run, `verify`, and the public key `probe` prints.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "maelys/backend.h"
#include "warden.h"

#define KEY_FILE "receipt-signing.key"

/* --state-dir, else $XDG_STATE_HOME/maelys, else $HOME/.local/state/maelys. */
int warden_state_dir(const invocation_t* inv, char* out, size_t size,
                     cli_error_t* err) {
  const char* given = cli_value(inv, "--state-dir");
  char candidate[PATH_MAX];
  const char* xdg = getenv("XDG_STATE_HOME");
  const char* home = getenv("HOME");
  if (given != NULL)
    snprintf(candidate, sizeof candidate, "%s", given);
  else if (xdg != NULL && xdg[0] == '/')
    snprintf(candidate, sizeof candidate, "%.4000s/maelys", xdg);
  else if (home != NULL && home[0] == '/')
    snprintf(candidate, sizeof candidate, "%.4000s/.local/state/maelys", home);
  else
    return cli_fail(err, "VALIDATION_FAILED",
                    "Give --state-dir DIR (a directory only you can write).",
                    "neither XDG_STATE_HOME nor HOME is set, so there is no "
                    "state directory for the receipt signing key");
  struct stat st;
  if (size < PATH_MAX)
    return cli_fail(err, "UNEXPECTED", NULL, "state directory buffer");
  return warden_user_path("--state-dir", candidate, false, out, &st, err);
}

int warden_mkdir_private(const char* dir) {
  char copy[PATH_MAX];
  snprintf(copy, sizeof copy, "%s", dir);
  for (char* p = copy + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(copy, 0700) != 0 && errno != EEXIST)
      return -1;
    *p = '/';
  }
  return mkdir(copy, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

static int parse_hex(const char* text, unsigned char* out, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned v;
    if (sscanf(text + 2 * i, "%2x", &v) != 1)
      return -1;
    out[i] = (unsigned char)v;
  }
  return 0;
}

/* The user's signing seed, created on first use. The file is refused
 * (never repaired) when it is a link, not the user's, or readable by
 * anyone else. */
int warden_signing_seed(const char* state_dir,
                        unsigned char seed[MAELYS_EXECUTOR_RECEIPT_SEED_BYTES],
                        cli_error_t* err) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/%s", state_dir, KEY_FILE);
  if (warden_mkdir_private(state_dir) != 0)
    return cli_fail(err, "IO_FAILED", "Give a writable --state-dir.",
                    "creating the state directory '%s': %s", state_dir,
                    strerror(errno));
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    unsigned char fresh[MAELYS_EXECUTOR_RECEIPT_SEED_BYTES];
    if (getrandom(fresh, sizeof fresh, 0) != (ssize_t)sizeof fresh)
      return cli_fail(err, "IO_FAILED", NULL, "no randomness for a new key");
    char hex[2 * sizeof fresh + 2];
    for (size_t i = 0; i < sizeof fresh; i++)
      snprintf(hex + 2 * i, 3, "%02x", fresh[i]);
    strcat(hex, "\n");
    /* O_EXCL: a racing first use loses cleanly and reads the winner's. */
    int w =
        open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (w >= 0) {
      ssize_t n = write(w, hex, strlen(hex));
      int ok = n == (ssize_t)strlen(hex) && fsync(w) == 0;
      close(w);
      if (!ok) {
        unlink(path);
        return cli_fail(err, "IO_FAILED", NULL, "writing '%s' failed", path);
      }
    } else if (errno != EEXIST) {
      return cli_fail(err, "IO_FAILED", "Give a writable --state-dir.",
                      "creating '%s': %s", path, strerror(errno));
    }
    fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  }
  if (fd < 0)
    return cli_fail(err, errno == ELOOP ? "ACCESS_DENIED" : "IO_FAILED", NULL,
                    "reading the signing key '%s': %s", path, strerror(errno));
  struct stat st;
  char text[128] = "";
  ssize_t n = fstat(fd, &st) == 0 ? read(fd, text, sizeof text - 1) : -1;
  close(fd);
  if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0)
    return cli_fail(err, "ACCESS_DENIED",
                    "The key file must be a regular file of yours with mode "
                    "0600.",
                    "the signing key '%s' is not a private file of this user",
                    path);
  if (n < 64 || parse_hex(text, seed, MAELYS_EXECUTOR_RECEIPT_SEED_BYTES) != 0)
    return cli_fail(err, "PROTOCOL_FAILED", NULL,
                    "the signing key '%s' is malformed", path);
  return 0;
}

/* The key signs every receipt of `executor` and the state directory lies
 * outside everything `plan` makes writable (a sandbox must never reach the
 * key that vouches for its receipts). */
int warden_signing_start(const invocation_t* inv, maelys_executor_t* executor,
                         const maelys_executor_plan_t* plan, cli_error_t* err) {
  char dir[PATH_MAX];
  if (warden_state_dir(inv, dir, sizeof dir, err) != 0)
    return -1;
  for (size_t i = 0; plan && i < maelys_executor_plan_rule_count(plan); i++) {
    maelys_executor_rule_view_t r;
    maelys_executor_plan_rule_get(plan, i, &r);
    size_t n = strlen(r.path);
    if (r.access == MAELYS_EXECUTOR_ACCESS_WRITE &&
        strncmp(dir, r.path, n) == 0 && (dir[n] == '\0' || dir[n] == '/'))
      return cli_fail(err, "ACCESS_DENIED",
                      "Choose a --state-dir the sandbox cannot write.",
                      "the state directory '%s' lies inside '%s', which the "
                      "plan makes writable",
                      dir, r.path);
  }
  for (size_t i = 0; plan && i < maelys_executor_plan_mount_count(plan); i++) {
    maelys_executor_mount_view_t m;
    maelys_executor_plan_mount_get(plan, i, &m);
    size_t n = m.source ? strlen(m.source) : 0;
    if (m.kind == MAELYS_EXECUTOR_MOUNT_BIND && n > 0 &&
        strncmp(dir, m.source, n) == 0 && (dir[n] == '\0' || dir[n] == '/'))
      return cli_fail(err, "ACCESS_DENIED",
                      "Choose a --state-dir the sandbox cannot write.",
                      "the state directory '%s' lies inside the writable bind "
                      "'%s'",
                      dir, m.source);
  }
  unsigned char seed[MAELYS_EXECUTOR_RECEIPT_SEED_BYTES];
  if (warden_signing_seed(dir, seed, err) != 0)
    return -1;
  char* error = NULL;
  maelys_executor_result_t r =
      maelys_executor_set_receipt_key(executor, seed, sizeof seed, &error);
  memset(seed, 0, sizeof seed);
  if (r != MAELYS_EXECUTOR_OK) {
    cli_fail(err, "UNEXPECTED", NULL, "setting the signing key: %s",
             error ? error : "");
    maelys_executor_error_free(error);
    return -1;
  }
  return 0;
}

/* A run is a session of one: its receipt joins a fresh chain, closed after
 * it (the closing record lands beside it as <chain>.close). */
int warden_chain_start(maelys_execution_request_t* req, char chain[40],
                       cli_error_t* err) {
  unsigned char raw[16];
  if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
    return cli_fail(err, "IO_FAILED", NULL, "no randomness for a chain id");
  for (size_t i = 0; i < sizeof raw; i++)
    snprintf(chain + 2 * i, 3, "%02x", raw[i]);
  if (maelys_execution_request_set_receipt_chain(req, chain, NULL) != 0)
    return cli_fail(err, "UNEXPECTED", NULL, "setting the receipt chain");
  return 0;
}

void warden_chain_close(maelys_executor_t* executor, const char* chain,
                        const char* receipt_dir) {
  char* error = NULL;
  if (maelys_executor_close_receipt_chain(executor, chain, receipt_dir, NULL,
                                          &error) != MAELYS_EXECUTOR_OK)
    fprintf(stderr, "%s: warning: the receipt chain was not closed: %s\n",
            WARDEN_PROGRAM, error ? error : "");
  maelys_executor_error_free(error);
}

/* "ed25519:<hex>" of the user's key (created on first use), or NULL. */
char* warden_public_key(const invocation_t* inv, cli_error_t* err) {
  char dir[PATH_MAX];
  unsigned char seed[MAELYS_EXECUTOR_RECEIPT_SEED_BYTES];
  if (warden_state_dir(inv, dir, sizeof dir, err) != 0 ||
      warden_signing_seed(dir, seed, err) != 0)
    return NULL;
  char* text = NULL;
  maelys_executor_receipt_public_key(seed, sizeof seed, &text, NULL);
  memset(seed, 0, sizeof seed);
  return text;
}

/* --key: "ed25519:<hex>", bare hex, or a file holding either. */
static int read_key(const char* given, char out[80], cli_error_t* err) {
  char text[256];
  snprintf(text, sizeof text, "%s", given);
  if (strncmp(text, "ed25519:", 8) != 0 && strlen(text) != 64) {
    FILE* f = fopen(given, "r");
    if (f == NULL)
      return cli_fail(err, "VALIDATION_FAILED",
                      "Give the key 'maelys-warden probe' prints, or a file "
                      "holding it.",
                      "--key '%s' is neither a public key nor a readable file",
                      given);
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    text[strcspn(text, " \r\n")] = '\0';
  }
  /* "ed25519:" and 64 hex digits, whichever way it came; the library refuses
   * any other length (a longer text is cut to 79, never to 72). */
  if (strncmp(text, "ed25519:", 8) == 0) {
    size_t n = strnlen(text, 79);
    memcpy(out, text, n);
    out[n] = '\0';
  } else {
    snprintf(out, 80, "ed25519:%.64s", text);
  }
  return 0;
}

int warden_verify(const invocation_t* inv) {
  cli_error_t err = {0};
  err.command = "verify";
  char key[80];
  const char* given = cli_value(inv, "--key");
  if (given != NULL && read_key(given, key, &err) != 0)
    return cli_emit_failure(inv, &err);
  char* report = NULL;
  char* error = NULL;
  maelys_executor_result_t r = maelys_executor_verify_receipts(
      (const char* const*)inv->operands, inv->operand_count, given ? key : NULL,
      &report, &error);
  if (r != MAELYS_EXECUTOR_OK) {
    cli_fail(&err,
             r == MAELYS_EXECUTOR_ERR_DENIED     ? "VERIFICATION_FAILED"
             : r == MAELYS_EXECUTOR_ERR_ARGUMENT ? "VALIDATION_FAILED"
                                                 : "IO_FAILED",
             r != MAELYS_EXECUTOR_ERR_DENIED ? NULL
             : error != NULL && strstr(error, "no receipt in it") != NULL
                 ? "Name receipt files or a receipt directory that holds "
                   "some ('maelys-warden receipts' lists yours)."
                 : "The named file, or one the chain needs at that point, was "
                   "modified, removed or signed by another key.",
             "%s", error ? error : maelys_executor_result_name(r));
    maelys_executor_error_free(error);
    maelys_executor_string_free(report);
    return cli_emit_failure(inv, &err);
  }
  json_t* doc = json_loads(report, 0, NULL);
  maelys_executor_string_free(report);
  char text[1024];
  snprintf(text, sizeof text,
           "verified: %lld records in %zu chains, every one closed, signed by "
           "%s%s\n",
           (long long)json_integer_value(json_object_get(doc, "records")),
           json_array_size(json_object_get(doc, "chains")),
           json_string_value(json_object_get(doc, "key")),
           given ? ""
                 : " (no --key: compare it with 'maelys-warden probe' on "
                   "the host that signed)");
  return cli_emit_success(inv, doc, text);
}

/* --receipt-dir, else $XDG_STATE_HOME/maelys/receipts, else
 * $HOME/.local/state/maelys/receipts (as `run` chooses it). */
int warden_receipt_dir(const invocation_t* inv, char* out, size_t size,
                       cli_error_t* err) {
  const char* given = cli_value(inv, "--receipt-dir");
  const char* xdg = getenv("XDG_STATE_HOME");
  const char* home = getenv("HOME");
  char candidate[PATH_MAX];
  if (given != NULL)
    snprintf(candidate, sizeof candidate, "%s", given);
  else if (xdg != NULL && xdg[0] == '/')
    snprintf(candidate, sizeof candidate, "%.4000s/maelys/receipts", xdg);
  else if (home != NULL && home[0] == '/')
    snprintf(candidate, sizeof candidate,
             "%.4000s/.local/state/maelys/receipts", home);
  else
    return cli_fail(err, "VALIDATION_FAILED", "Give --receipt-dir DIR.",
                    "neither XDG_STATE_HOME nor HOME is set, so there is no "
                    "default receipt directory");
  struct stat st;
  if (size < PATH_MAX)
    return cli_fail(err, "UNEXPECTED", NULL, "receipt directory buffer");
  /* No symbolic link in it: receipts never land where a link planted by a
   * run points. */
  return warden_user_path("--receipt-dir", candidate, false, out, &st, err);
}
