/* Fuzzes the checkpoint loader through the public API only (tg_tape_load on a file holding the
 * fuzzer's bytes), so it serves whatever format tg_tape_save writes. Promises checked: no crash,
 * no UB, no leak for any file; a file that loads can be trained on (a backward and an AdamW step
 * run or fail with a status), saved, and loaded again with the same values. Seeds: tools/fuzz.sh
 * writes fresh checkpoints of ckpt_model.h's parameters (gen_checkpoint_seeds.c) next to the
 * checked-in corpus. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt_model.h"
#include "fuzz.h"

static void trap(void) { __builtin_trap(); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char path[64], back[64];
  if (!path[0]) {
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(path, sizeof path, "%s/tiga_fuzz_%d.ckpt", dir, (int)getpid());
    snprintf(back, sizeof back, "%s/tiga_fuzz_%d.back", dir, (int)getpid());
  }
  FILE *f = fopen(path, "wb");
  if (!f) return 0;
  if (size && fwrite(data, 1, size, f) != size) {
    fclose(f);
    return 0;
  }
  fclose(f);
  tg_runtime *rt = NULL;
  tg_tape *t = NULL;
  tg_id ids[CKPT_NPARAMS];
  if (tg_runtime_create_host(&rt) || tg_tape_create(rt, &t) || ckpt_params(t, ids)) trap();
  if (tg_tape_load(t, path) == TG_OK) {
    /* loaded values are readable, and saving + loading them again gives the same bytes */
    unsigned char before[64], after[64];
    size_t off = 0;
    const size_t bytes[CKPT_NPARAMS] = {24, 32, 4};
    for (int i = 0; i < CKPT_NPARAMS; i++, off += bytes[i - 1])
      if (tg_tape_read(t, ids[i], before + off, bytes[i])) trap();
    if (tg_tape_save(t, back) != TG_OK) trap();
    tg_tape *u = NULL;
    tg_id uid[CKPT_NPARAMS];
    if (tg_tape_create(rt, &u) || ckpt_params(u, uid) || tg_tape_load(u, back) != TG_OK) trap();
    off = 0;
    for (int i = 0; i < CKPT_NPARAMS; i++, off += bytes[i - 1])
      if (tg_tape_read(u, uid[i], after + off, bytes[i])) trap();
    if (memcmp(before, after, off)) trap();
    tg_tape_destroy(u);
    remove(back);
    /* training goes on or fails with a status (step counts near INT64_MAX, NaN moments, ...) */
    for (int k = 0; k < 2; k++)
      ckpt_step(t, ids);
  }
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
  return 0;
}
