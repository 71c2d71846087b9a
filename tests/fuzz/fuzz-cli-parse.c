/*
 * Fuzz target: maelys-warden's command-line parser (bindings/cli/parse.c)
 * and the duration and size readers it uses. The input is an argument
 * vector, NUL-separated (argv[0] is the program); the parser must accept or
 * refuse every line with a diagnostic code, and free what it built.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char* copy = malloc(size + 1);
  if (copy == NULL)
    return 0;
  memcpy(copy, data, size);
  copy[size] = '\0';
  char* argv[MAX_ARGS + 2];
  int argc = 0;
  argv[argc++] = "maelys-warden";
  for (size_t i = 0; i < size && argc < MAX_ARGS;) {
    argv[argc++] = copy + i;
    i += strlen(copy + i) + 1;
  }
  argv[argc] = NULL;
  invocation_t inv;
  cli_error_t err;
  if (cli_parse(argc, argv, &inv, &err) != 0 &&
      (err.code == NULL || err.code[0] == '\0'))
    abort();
  cli_invocation_free(&inv);
  for (int i = 1; i < argc; i++) {
    (void)cli_duration_ms(argv[i]);
    (void)cli_size_bytes(argv[i]);
  }
  free(copy);
  return 0;
}
