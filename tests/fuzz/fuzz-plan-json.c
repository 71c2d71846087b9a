/*
 * Fuzz target: the plan JSON reader (maelys_executor_plan_from_json), the
 * one parser that reads a document a caller may have taken from anywhere.
 * Oracle: a refusal leaves no plan and gives a diagnostic; a plan that was
 * read writes back a document that reads again into the same plan (the
 * round trip is a fixed point), and sealing it either works or refuses.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "maelys/executor.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static char* write_back(const maelys_executor_plan_t* plan) {
  char* json = NULL;
  if (maelys_executor_plan_to_json(plan, &json, NULL) != MAELYS_EXECUTOR_OK)
    abort();
  return json;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  maelys_executor_plan_t* plan = NULL;
  char* error = NULL;
  if (maelys_executor_plan_from_json((const char*)data, size, &plan, &error) !=
      MAELYS_EXECUTOR_OK) {
    /* A failed call leaves nothing half-made and says why. */
    if (plan != NULL || error == NULL)
      abort();
    maelys_executor_error_free(error);
    return 0;
  }
  if (plan == NULL || error != NULL)
    abort();
  char* first = write_back(plan);
  maelys_executor_plan_t* again = NULL;
  if (maelys_executor_plan_from_json(first, strlen(first), &again, NULL) !=
      MAELYS_EXECUTOR_OK)
    abort();
  char* second = write_back(again);
  if (strcmp(first, second) != 0)
    abort();
  if (maelys_executor_plan_seal(plan, &error) == MAELYS_EXECUTOR_OK) {
    char* digest = NULL;
    if (maelys_executor_plan_digest(plan, &digest, NULL) != MAELYS_EXECUTOR_OK)
      abort();
    maelys_executor_string_free(digest);
  } else if (error == NULL) {
    abort();
  }
  maelys_executor_error_free(error);
  maelys_executor_string_free(first);
  maelys_executor_string_free(second);
  maelys_executor_plan_destroy(again);
  maelys_executor_plan_destroy(plan);
  return 0;
}
