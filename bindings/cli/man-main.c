/* Writes the man page generated from the catalog (a build step). */
#include <stdio.h>

#include "cli.h"

int main(int argc, char** argv) {
  FILE* out = argc > 1 ? fopen(argv[1], "w") : stdout;
  if (out == NULL) {
    perror(argv[1]);
    return 1;
  }
  cli_man_page(out, cli_version());
  return fclose(out) == 0 ? 0 : 1;
}
