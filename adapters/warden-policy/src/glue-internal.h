/* Helpers of the glue sources, which see the policy library's types. */
#ifndef MAELYS_WARDEN_POLICY_GLUE_INTERNAL_H
#define MAELYS_WARDEN_POLICY_GLUE_INTERNAL_H

#include "maelys/warden_policy_adapter.h"

/* Maps a policy-library result to the Executor's, sets *out_error to the
 * formatted context, the library's diagnostic `inner` (freed here with
 * maelys_mir_error_free, NULL accepted) and the result's name. */
maelys_executor_result_t
maelys__warden_policy_library_fail(char** out_error, maelys_mir_result_t result,
                                   char* inner, const char* format, ...)
    __attribute__((format(printf, 4, 5)));

#endif
