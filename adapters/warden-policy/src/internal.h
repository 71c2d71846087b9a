/* Helpers shared by the adapter's sources; never installed. Every non-static
 * symbol is maelys__warden_policy_*: the adapter is linked into the same
 * programs as the Executor and the policy library, which have helpers of
 * their own (invariant: no exported symbol outside our prefixes). */
#ifndef MAELYS_WARDEN_POLICY_INTERNAL_H
#define MAELYS_WARDEN_POLICY_INTERNAL_H

#include <stdarg.h>

#include "maelys/warden_policy.h"

/* Sets *out_error (when it is not NULL and still NULL) to a formatted
 * diagnostic and returns `result`. */
maelys_executor_result_t
maelys__warden_policy_fail(char** out_error, maelys_executor_result_t result,
                           const char* format, ...)
    __attribute__((format(printf, 3, 4)));

/* Like maelys__warden_policy_fail, with ": <inner>" appended; `inner` is a
 * diagnostic of the Executor (or NULL) and is freed here in every case. */
maelys_executor_result_t
maelys__warden_policy_wrap(char** out_error, maelys_executor_result_t result,
                           char* inner, const char* format, ...)
    __attribute__((format(printf, 4, 5)));

/* The name of a value, or NULL for an unknown one. */
const char* maelys__warden_policy_access_name(int access);
const char* maelys__warden_policy_scope_name(int scope);

#endif
