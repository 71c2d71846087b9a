#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static char* vformat(const char* format, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  int n = vsnprintf(NULL, 0, format, copy);
  va_end(copy);
  if (n < 0)
    return NULL;
  char* s = malloc((size_t)n + 1);
  if (s != NULL)
    vsnprintf(s, (size_t)n + 1, format, ap);
  return s;
}

maelys_executor_result_t
maelys__warden_policy_fail(char** out_error, maelys_executor_result_t result,
                           const char* format, ...) {
  if (out_error != NULL && *out_error == NULL) {
    va_list ap;
    va_start(ap, format);
    *out_error = vformat(format, ap);
    va_end(ap);
  }
  return result;
}

maelys_executor_result_t
maelys__warden_policy_wrap(char** out_error, maelys_executor_result_t result,
                           char* inner, const char* format, ...) {
  if (out_error != NULL && *out_error == NULL) {
    va_list ap;
    va_start(ap, format);
    char* outer = vformat(format, ap);
    va_end(ap);
    const char* why =
        inner != NULL ? inner : maelys_executor_result_name(result);
    if (outer != NULL) {
      size_t n = strlen(outer) + 2 + strlen(why) + 1;
      *out_error = malloc(n);
      if (*out_error != NULL)
        snprintf(*out_error, n, "%s: %s", outer, why);
      free(outer);
    }
  }
  maelys_executor_error_free(inner);
  return result;
}

const char* maelys__warden_policy_access_name(int access) {
  switch (access) {
  case MAELYS_WARDEN_POLICY_ACCESS_READ:
    return "read";
  case MAELYS_WARDEN_POLICY_ACCESS_WRITE:
    return "write";
  case MAELYS_WARDEN_POLICY_ACCESS_DENY:
    return "deny";
  default:
    return NULL;
  }
}

const char* maelys__warden_policy_scope_name(int scope) {
  switch (scope) {
  case MAELYS_WARDEN_POLICY_SCOPE_TREE:
    return "tree";
  case MAELYS_WARDEN_POLICY_SCOPE_EXACT:
    return "exact";
  default:
    return NULL;
  }
}
