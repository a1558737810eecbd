/* Writes checkpoints of ckpt_model.h's parameters in the current tg_tape_save format into the
 * directory argv[1]: fresh, after one and after three AdamW steps. tools/fuzz.sh runs it before the
 * checkpoint fuzzer, so its seeds always match the format the loader reads. */
#include <stdio.h>

#include "ckpt_model.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  tg_runtime *rt = NULL;
  tg_tape *t = NULL;
  tg_id ids[CKPT_NPARAMS];
  if (tg_runtime_create_host(&rt) || tg_tape_create(rt, &t) || ckpt_params(t, ids)) return 1;
  char path[4096];
  int rc = 0;
  for (int steps = 0, done = 0; steps <= 3; steps++) {
    while (done < steps) {
      if (ckpt_step(t, ids)) rc = 1;
      done++;
    }
    if (steps == 2) continue;
    snprintf(path, sizeof path, "%s/seed_steps_%d", argv[1], steps);
    if (tg_tape_save(t, path)) {
      fprintf(stderr, "%s: %s\n", path, tg_tape_error(t));
      rc = 1;
    }
  }
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
  return rc;
}
