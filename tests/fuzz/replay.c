/*
 * Replays a fuzz target's corpus without libFuzzer, so that any compiler
 * (gcc too) and any build (ASan, valgrind) runs every input ctest knows:
 *
 *   fuzz-replay-TARGET FILE_OR_DIRECTORY...
 *
 * Each file is one input, handed to LLVMFuzzerTestOneInput as libFuzzer
 * would; a target that finds a bug aborts. Exit 0 when every input ran.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static int run_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) {
    perror(path);
    return -1;
  }
  size_t cap = 4096, len = 0;
  unsigned char* buf = malloc(cap);
  size_t n;
  while (buf != NULL && (n = fread(buf + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len == cap) {
      unsigned char* bigger = realloc(buf, cap *= 2);
      if (bigger == NULL)
        free(buf);
      buf = bigger;
    }
  }
  fclose(f);
  if (buf == NULL)
    return -1;
  LLVMFuzzerTestOneInput(buf, len);
  free(buf);
  return 0;
}

static int by_name(const struct dirent** a, const struct dirent** b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char** argv) {
  int inputs = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      perror(argv[i]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (run_file(argv[i]) != 0)
        return 1;
      inputs++;
      continue;
    }
    struct dirent** names = NULL;
    int n = scandir(argv[i], &names, NULL, by_name);
    if (n < 0) {
      perror(argv[i]);
      return 1;
    }
    for (int k = 0; k < n; k++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[i], names[k]->d_name);
      if (names[k]->d_name[0] != '.' && stat(path, &st) == 0 &&
          S_ISREG(st.st_mode)) {
        if (run_file(path) != 0)
          return 1;
        inputs++;
      }
      free(names[k]);
    }
    free(names);
  }
  printf("replayed %d inputs\n", inputs);
  return inputs > 0 ? 0 : 1;
}
