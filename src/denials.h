/* Denials: what the sandbox refused, as the backend reports it (internal). */
#ifndef MAELYS_EXECUTOR_DENIALS_H
#define MAELYS_EXECUTOR_DENIALS_H

#include <jansson.h>

#include "maelys/backend.h"
#include "maelys/executor.h"

typedef struct maelys__denials maelys__denials_t;

/* Applies one MAELYS_BACKEND_EVENT_DENIAL to *denials (allocated at the
 * first one) and, for an example, calls the execution's denial callback
 * (not when `execution` is NULL: a released handle). */
void maelys__denials_event(maelys__denials_t** denials,
                           maelys_execution_t* execution,
                           const maelys_executor_plan_t* plan,
                           const maelys_backend_event_t* event);

/* Sets (or, with NULL, removes) the callback of maelys_execution_on_denial. */
maelys_executor_result_t
maelys__denials_set_callback(maelys__denials_t** denials,
                             maelys_execution_denial_cb cb, void* data,
                             char** out_error);

/* The receipt's "denials" member (a new reference), or NULL when nothing
 * recorded denials for this execution. */
json_t* maelys__denials_json(const maelys__denials_t* denials,
                             const maelys_executor_plan_t* plan);

void maelys__denials_free(maelys__denials_t* denials);

#endif /* MAELYS_EXECUTOR_DENIALS_H */
