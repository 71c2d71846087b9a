/* Errors, strings and small helpers shared by the core. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "internal.h"

static const char* const result_names[] = {
    "OK",          "ARGUMENT",  "MEMORY", "IO",         "STATE", "DENIED",
    "UNSUPPORTED", "NOT_FOUND", "SEALED", "CAPABILITY", "SPAWN"};

const char* maelys_executor_result_name(maelys_executor_result_t result) {
  if ((unsigned)result < MAELYS__ARRAY_SIZE(result_names))
    return result_names[result];
  return "UNKNOWN";
}

void maelys_executor_error_free(char* error) {
  free(error);
}

void maelys_executor_string_free(char* string) {
  free(string);
}

const char* maelys_executor_version(void) {
  return "0.10.0";
}

unsigned maelys_executor_abi_version(void) {
  return MAELYS_EXECUTOR_ABI_VERSION;
}

char* maelys__executor_vasprintf(const char* format, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  int n = vsnprintf(NULL, 0, format, copy);
  va_end(copy);
  if (n < 0)
    return NULL;
  char* s = malloc((size_t)n + 1);
  if (s == NULL)
    return NULL;
  vsnprintf(s, (size_t)n + 1, format, ap);
  return s;
}

char* maelys__executor_asprintf(const char* format, ...) {
  va_list ap;
  va_start(ap, format);
  char* s = maelys__executor_vasprintf(format, ap);
  va_end(ap);
  return s;
}

maelys_executor_result_t maelys__executor_fail(char** out_error,
                                               maelys_executor_result_t result,
                                               const char* format, ...) {
  if (out_error != NULL && *out_error == NULL) {
    va_list ap;
    va_start(ap, format);
    *out_error = maelys__executor_vasprintf(format, ap);
    va_end(ap);
  }
  return result;
}

char* maelys__executor_strdup(const char* s) {
  if (s == NULL)
    return NULL;
  size_t n = strlen(s) + 1;
  char* d = malloc(n);
  if (d != NULL)
    memcpy(d, s, n);
  return d;
}

int maelys__executor_reserve(void** items, size_t* capacity, size_t elem_size,
                             size_t need) {
  if (need <= *capacity)
    return 0;
  size_t cap = *capacity ? *capacity : 4;
  while (cap < need) {
    if (cap > SIZE_MAX / 2 / elem_size)
      return -1;
    cap *= 2;
  }
  void* p = realloc(*items, cap * elem_size);
  if (p == NULL)
    return -1;
  *items = p;
  *capacity = cap;
  return 0;
}

bool maelys__executor_path_is_clean(const char* path) {
  if (path == NULL || path[0] != '/')
    return false;
  size_t len = strlen(path);
  if (len >= PATH_MAX)
    return false;
  if (len == 1)
    return true;
  if (path[len - 1] == '/')
    return false;
  const char* p = path;
  while (*p != '\0') {
    /* p points at a '/' introducing a component. */
    const char* c = p + 1;
    const char* end = strchr(c, '/');
    size_t n = end ? (size_t)(end - c) : strlen(c);
    if (n == 0)
      return false;
    if (n == 1 && c[0] == '.')
      return false;
    if (n == 2 && c[0] == '.' && c[1] == '.')
      return false;
    for (size_t i = 0; i < n; i++)
      if ((unsigned char)c[i] < 0x20 || c[i] == 0x7f)
        return false;
    if (end == NULL)
      break;
    p = end;
  }
  return true;
}

bool maelys__executor_path_within(const char* path, const char* base) {
  size_t bl = strlen(base);
  if (bl == 1 && base[0] == '/')
    return path[0] == '/';
  if (strncmp(path, base, bl) != 0)
    return false;
  return path[bl] == '\0' || path[bl] == '/';
}

void maelys__executor_hex(const unsigned char* bytes, size_t len, char* out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < len; i++) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 15];
  }
  out[2 * len] = '\0';
}

int maelys__executor_random_id(char out[33]) {
  unsigned char raw[16];
  size_t got = 0;
  while (got < sizeof raw) {
    ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    got += (size_t)n;
  }
  maelys__executor_hex(raw, sizeof raw, out);
  return 0;
}
