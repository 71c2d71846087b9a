/* A ctest entry for a test that cannot be built here: prints why and exits
 * 77, which the entry's SKIP_RETURN_CODE turns into "Skipped" (never a
 * pass). */
#include <stdio.h>

int main(int argc, char** argv) {
  printf("SKIPPED: %s\n", argc > 1 ? argv[1] : "no reason given");
  return 77;
}
