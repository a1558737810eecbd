/* A main() for the fuzz harnesses without libFuzzer: runs LLVMFuzzerTestOneInput over every file
 * named on the command line (directories: every file inside), so the checked-in corpora (and every
 * crash once turned into a corpus file) run in the ordinary test suite, under ASan/UBSan there. */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    return 1;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
  size_t got = buf ? fread(buf, 1, (size_t)(n > 0 ? n : 0), f) : 0;
  fclose(f);
  if (!buf || got != (size_t)(n > 0 ? n : 0)) {
    free(buf);
    fprintf(stderr, "cannot read %s\n", path);
    return 1;
  }
  LLVMFuzzerTestOneInput(buf, got);
  free(buf);
  return 0;
}

/* Every file of a directory, or one file. */
static int run_path(const char *p, int *files) {
  struct stat st;
  int bad = 0;
  if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
    DIR *d = opendir(p);
    struct dirent *e;
    while (d && (e = readdir(d))) {
      if (e->d_name[0] == '.') continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", p, e->d_name);
      bad |= run_file(path);
      ++*files;
    }
    if (d) closedir(d);
  } else {
    bad |= run_file(p);
    ++*files;
  }
  return bad;
}

/* Paths on the command line; arguments that name nothing (a test runner's "--jobs 1") are ignored.
 * Without a path: the corpus compiled in (TIGA_FUZZ_CORPUS), or ../../tests/fuzz/corpus/<name>
 * from a build folder's tests/ directory; none found: nothing to replay (success). */
int main(int argc, char **argv) {
  int bad = 0, files = 0, paths = 0;
  for (int a = 1; a < argc; a++) {
    struct stat st;
    if (stat(argv[a], &st) != 0) continue;
    paths++;
    bad |= run_path(argv[a], &files);
  }
#ifdef TIGA_FUZZ_CORPUS
  if (!paths) {
    struct stat st;
    const char *dflt[2] = {TIGA_FUZZ_CORPUS, "../../tests/fuzz/corpus/" TIGA_FUZZ_NAME};
    for (int i = 0; i < 2 && !paths; i++)
      if (stat(dflt[i], &st) == 0) {
        paths++;
        bad |= run_path(dflt[i], &files);
      }
  }
#endif
  printf("replayed %d inputs%s\n", files, paths ? "" : " (no corpus found)");
  return bad;
}
