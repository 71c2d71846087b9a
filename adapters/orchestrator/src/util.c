/* Small helpers of the orchestrator adapter. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <sodium.h>

#include "orch-internal.h"

char* maelys__orch_strdup(const char* s) {
  if (s == NULL)
    return NULL;
  size_t n = strlen(s) + 1;
  char* c = malloc(n);
  if (c != NULL)
    memcpy(c, s, n);
  return c;
}

static char* vformat(const char* fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  char* s = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (s != NULL)
    vsnprintf(s, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return s;
}

char* maelys__orch_asprintf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char* s = vformat(fmt, ap);
  va_end(ap);
  return s;
}

maelys_executor_result_t maelys__orch_fail(char** out_error,
                                           maelys_executor_result_t r,
                                           const char* fmt, ...) {
  if (out_error != NULL && *out_error == NULL) {
    va_list ap;
    va_start(ap, fmt);
    *out_error = vformat(fmt, ap);
    va_end(ap);
  }
  return r;
}

bool maelys__orch_path_is_clean(const char* p) {
  if (p == NULL || p[0] != '/' || strlen(p) >= PATH_MAX)
    return false;
  if (strcmp(p, "/") == 0)
    return true;
  const char* c = p + 1;
  for (;;) {
    const char* end = strchr(c, '/');
    size_t n = end ? (size_t)(end - c) : strlen(c);
    if (n == 0 || (n == 1 && c[0] == '.') ||
        (n == 2 && c[0] == '.' && c[1] == '.'))
      return false;
    if (end == NULL)
      return true;
    c = end + 1;
  }
}

bool maelys__orch_within(const char* path, const char* base) {
  size_t n = strlen(base);
  if (strcmp(base, "/") == 0)
    return path[0] == '/';
  return strncmp(path, base, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

void maelys__orch_sha256(const void* data, size_t len, char out[72]) {
  unsigned char h[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(h, data, len);
  static const char digits[] = "0123456789abcdef";
  memcpy(out, "sha256:", 7);
  for (size_t i = 0; i < sizeof h; i++) {
    out[7 + 2 * i] = digits[h[i] >> 4];
    out[8 + 2 * i] = digits[h[i] & 15];
  }
  out[71] = '\0';
}

int maelys__orch_random_id(char out[33]) {
  unsigned char raw[16];
  size_t got = 0;
  while (got < sizeof raw) {
    ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return -1;
    got += (size_t)n;
  }
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < sizeof raw; i++) {
    out[2 * i] = digits[raw[i] >> 4];
    out[2 * i + 1] = digits[raw[i] & 15];
  }
  out[32] = '\0';
  return 0;
}

int maelys__orch_list_add(orch_list_t* l, const char* s) {
  if (l->count + 2 > l->capacity) {
    size_t cap = l->capacity ? l->capacity * 2 : 8;
    char** items = realloc(l->items, cap * sizeof *items);
    if (items == NULL)
      return -1;
    l->items = items;
    l->capacity = cap;
  }
  char* c = maelys__orch_strdup(s);
  if (c == NULL)
    return -1;
  l->items[l->count++] = c;
  l->items[l->count] = NULL;
  return 0;
}

void maelys__orch_list_free(orch_list_t* l) {
  for (size_t i = 0; i < l->count; i++)
    free(l->items[i]);
  free(l->items);
  memset(l, 0, sizeof *l);
}
