/*
 * Receipt evidence: the host's signing key, receipt chains and their closing
 * records. Rendering and signing are in receipt.c, verification in
 * receipt-verify.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <sodium.h>

#include "internal.h"

#define CONTEXT_MAX (64 * 1024)
#define CLOSE_FORMAT "maelys-executor-receipt-close/1"

maelys_executor_result_t
maelys_executor_set_receipt_key(maelys_executor_t* executor,
                                const unsigned char* seed, size_t seed_length,
                                char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (executor == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "executor is NULL");
  if (seed != NULL && seed_length != MAELYS_EXECUTOR_RECEIPT_SEED_BYTES)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "a receipt signing seed has %d bytes, not %zu",
                                 MAELYS_EXECUTOR_RECEIPT_SEED_BYTES,
                                 seed_length);
  if (sodium_init() < 0)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                                 "libsodium could not be initialised");
  sodium_memzero(executor->receipt_key, sizeof executor->receipt_key);
  executor->receipt_signing = false;
  if (seed == NULL)
    return MAELYS_EXECUTOR_OK;
  unsigned char pk[crypto_sign_PUBLICKEYBYTES];
  crypto_sign_seed_keypair(pk, executor->receipt_key, seed);
  executor->receipt_signing = true;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t
maelys_executor_receipt_public_key(const unsigned char* seed,
                                   size_t seed_length, char** out_text,
                                   char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (out_text == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "out_text is NULL");
  *out_text = NULL;
  if (seed == NULL || seed_length != MAELYS_EXECUTOR_RECEIPT_SEED_BYTES)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "a receipt signing seed has %d bytes",
                                 MAELYS_EXECUTOR_RECEIPT_SEED_BYTES);
  if (sodium_init() < 0)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_UNSUPPORTED,
                                 "libsodium could not be initialised");
  unsigned char pk[crypto_sign_PUBLICKEYBYTES];
  unsigned char sk[crypto_sign_SECRETKEYBYTES];
  crypto_sign_seed_keypair(pk, sk, seed);
  sodium_memzero(sk, sizeof sk);
  char* text = malloc(8 + 2 * sizeof pk + 1);
  if (text == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  memcpy(text, "ed25519:", 8);
  maelys__executor_hex(pk, sizeof pk, text + 8);
  *out_text = text;
  return MAELYS_EXECUTOR_OK;
}

bool maelys__executor_chain_id_is_valid(const char* id) {
  size_t n = id ? strlen(id) : 0;
  if (n == 0 || n > 64 || id[0] == '.')
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = id[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
      return false;
  }
  return true;
}

maelys_executor_result_t
maelys_execution_request_set_receipt_chain(maelys_execution_request_t* request,
                                           const char* chain_id,
                                           char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (request == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "request is NULL");
  if (!maelys__executor_chain_id_is_valid(chain_id))
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "receipt chain id '%s' is not 1..64 characters of [A-Za-z0-9._-] "
        "(not starting with '.')",
        chain_id ? chain_id : "(null)");
  char* copy = maelys__executor_strdup(chain_id);
  if (copy == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  free(request->receipt_chain);
  request->receipt_chain = copy;
  return MAELYS_EXECUTOR_OK;
}

maelys_executor_result_t maelys_execution_request_set_receipt_context(
    maelys_execution_request_t* request, const char* json_object,
    char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (request == NULL || json_object == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "request and json_object are required");
  size_t len = strlen(json_object);
  if (len > CONTEXT_MAX)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "the receipt context is %zu bytes; at most "
                                 "%d are accepted",
                                 len, CONTEXT_MAX);
  json_error_t jerr;
  json_t* doc = json_loadb(json_object, len, JSON_REJECT_DUPLICATES, &jerr);
  bool is_object = json_is_object(doc);
  json_decref(doc);
  if (!is_object)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "the receipt context must be one JSON object%s%s",
        doc == NULL ? ": " : "", doc == NULL ? jerr.text : "");
  char* copy = maelys__executor_strdup(json_object);
  if (copy == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  free(request->receipt_context);
  request->receipt_context = copy;
  return MAELYS_EXECUTOR_OK;
}

maelys__receipt_chain_t* maelys__executor_chain(maelys_executor_t* executor,
                                                const char* id, bool create) {
  for (size_t i = 0; i < executor->chain_count; i++)
    if (strcmp(executor->chains[i].id, id) == 0)
      return &executor->chains[i];
  if (!create)
    return NULL;
  if (maelys__executor_reserve(
          (void**)&executor->chains, &executor->chain_capacity,
          sizeof *executor->chains, executor->chain_count + 1) != 0)
    return NULL;
  maelys__receipt_chain_t* c = &executor->chains[executor->chain_count];
  memset(c, 0, sizeof *c);
  if ((c->id = maelys__executor_strdup(id)) == NULL)
    return NULL;
  executor->chain_count++;
  return c;
}

void maelys__executor_chain_join(maelys_executor_t* executor, const char* id) {
  maelys__receipt_chain_t* c = maelys__executor_chain(executor, id, false);
  if (c != NULL)
    c->live++;
}

void maelys__executor_chain_link(maelys_executor_t* executor, const char* id,
                                 const char* json) {
  maelys__receipt_chain_t* c = maelys__executor_chain(executor, id, false);
  if (c == NULL)
    return;
  c->live--;
  if (json != NULL) {
    c->sequence++;
    maelys__executor_record_digest(json, c->previous);
  }
}

void maelys__executor_evidence_dispose(maelys_executor_t* executor) {
  sodium_memzero(executor->receipt_key, sizeof executor->receipt_key);
  for (size_t i = 0; i < executor->chain_count; i++)
    free(executor->chains[i].id);
  free(executor->chains);
  executor->chains = NULL;
  executor->chain_count = executor->chain_capacity = 0;
}

maelys_executor_result_t
maelys_executor_close_receipt_chain(maelys_executor_t* executor,
                                    const char* chain_id, const char* dir,
                                    char** out_path, char** out_error) {
  MAELYS__CHECK_OUT_ERROR(out_error);
  if (out_path != NULL)
    *out_path = NULL;
  if (executor == NULL || dir == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "executor and dir are required");
  if (!maelys__executor_chain_id_is_valid(chain_id))
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
                                 "receipt chain id '%s' is not valid",
                                 chain_id ? chain_id : "(null)");
  if (!maelys__executor_path_is_clean(dir))
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_ARGUMENT,
        "receipt directory '%s' is not a clean absolute path", dir);
  maelys__receipt_chain_t* c = maelys__executor_chain(executor, chain_id, true);
  if (c == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory");
  if (c->closed)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_STATE,
                                 "receipt chain '%s' is already closed",
                                 chain_id);
  if (c->live > 0)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_STATE,
        "receipt chain '%s' still has %zu executions that have not ended: "
        "their receipts would follow the closing record",
        chain_id, c->live);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  json_t* doc = json_pack(
      "{s:s, s:{s:s, s:I, s:o}, s:I, s:o}", "format", CLOSE_FORMAT, "chain",
      "id", chain_id, "sequence", (json_int_t)c->sequence + 1, "previous",
      c->previous[0] ? json_string(c->previous) : json_null(), "receipts",
      (json_int_t)c->sequence, "closed_at",
      maelys__executor_receipt_timestamp((int64_t)ts.tv_sec * 1000000000 +
                                         ts.tv_nsec));
  char* text = maelys__executor_record_render(
      doc, executor->receipt_signing ? executor->receipt_key : NULL);
  if (text == NULL)
    return maelys__executor_fail(out_error, MAELYS_EXECUTOR_ERR_MEMORY,
                                 "out of memory rendering the closing record");
  char* path = NULL;
  int r = maelys__executor_record_write(dir, chain_id, ".close", text, &path);
  free(text);
  if (r != 0)
    return maelys__executor_fail(
        out_error, MAELYS_EXECUTOR_ERR_IO,
        "writing the closing record of chain '%s' in '%s': %s", chain_id, dir,
        strerror(-r));
  c->closed = true;
  if (out_path != NULL)
    *out_path = path;
  else
    free(path);
  return MAELYS_EXECUTOR_OK;
}
