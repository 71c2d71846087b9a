/* What the sandbox refused, told on stderr: a notice at the first denial of
 * each kind, a summary line when the run ends (denials.c). */
#ifndef WARDEN_DENIALS_H
#define WARDEN_DENIALS_H

#include <stdbool.h>

#include "maelys/executor.h"

/* Tells, on stderr, the first denial of each kind of `execution` as it
 * happens (nothing when `quiet`), with what would allow it: an option of
 * `run`, or, when the plan came from a file (`source`: "plan", "policy"),
 * what to add there, since the built-in profile's options do not apply.
 * Call right after spawn. */
void warden_denials_watch(maelys_execution_t* execution, bool quiet,
                          const char* source);

/* Once the execution has ended: one line on stderr with the counts from its
 * receipt, when anything was refused (nothing when `quiet`). */
void warden_denials_summary(const maelys_execution_t* execution, bool quiet);

#endif /* WARDEN_DENIALS_H */
