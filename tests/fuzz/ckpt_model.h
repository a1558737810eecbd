/* The parameters the checkpoint fuzzer loads into (and its seed generator saves from). */
#ifndef TIGA_FUZZ_CKPT_MODEL_H
#define TIGA_FUZZ_CKPT_MODEL_H
#include "tiga.h"

#define CKPT_NPARAMS 3
/* p0 f32 [2, 3], p1 f64 [4] (no weight decay), p2 f32 scalar. 0 on success. */
static int ckpt_params(tg_tape *t, tg_id *ids) {
  const int64_t s0[2] = {2, 3}, s1[1] = {4};
  float a[6] = {0.5f, -1, 2, 0.25f, 3, -0.75f}, c = 1.5f;
  double b[4] = {1, -2, 0.125, 4};
  return tg_tape_parameter(t, TG_F32, 2, s0, a, sizeof a, 0, &ids[0]) ||
         tg_tape_parameter(t, TG_F64, 1, s1, b, sizeof b, TG_NO_WEIGHT_DECAY, &ids[1]) ||
         tg_tape_parameter(t, TG_F32, 0, NULL, &c, sizeof c, 0, &ids[2]);
}

/* One AdamW step on L = sum over the parameters of sum(p * p) (f64 cast). */
static tg_status ckpt_step(tg_tape *t, const tg_id *ids) {
  tg_tape_reset(t);
  tg_tape_zero_grad(t);
  tg_id L = TG_NO_ID;
  for (int i = 0; i < CKPT_NPARAMS; i++) {
    tg_id p = tg_cast(t, ids[i], TG_F64);
    tg_id s = tg_sum(t, tg_mul(t, p, p));
    L = i ? tg_add(t, L, s) : s;
  }
  tg_status st = tg_tape_backward(t, L);
  if (st) return st;
  tg_adamw_options o;
  tg_adamw_options_init(&o);
  return tg_adamw_step(t, &o);
}
#endif
