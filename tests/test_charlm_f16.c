/* The char model (examples/charlm.c) in f16 mixed precision with dynamic loss scaling, as
 * train_charlm --dtype f16 runs it: the loss must fall as in f32, and a scale that overflows f16 must
 * make steps skip (parameters untouched) and back off until training proceeds. CUDA only (skips
 * without a GPU: the host kernels have no f16). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../examples/charlm.c"
#include "support.h"

static void load_corpus(charlm_data *d) {
  char path[4096], err[CHARLM_ERR];
  const char *slash = strrchr(__FILE__, '/');
  int dir = slash ? (int)(slash - __FILE__) : 0;
  snprintf(path, sizeof path, "%.*s%s../examples/data/input.txt", dir, __FILE__, slash ? "/" : "");
  cr_assert_eq(charlm_data_load(d, path, err), 0, "%s", err);
}

static const charlm_train_opts OPTS = {1e-2, 0.1, 0.9, 0.99, 1e-8, 1.0, 7};

static double train(charlm_model *m, const charlm_data *d, charlm_rng *r, int64_t steps) {
  int32_t x[8 * 16], y[8 * 16];
  char err[CHARLM_ERR];
  double v = NAN;
  for (int64_t s = 0; s < steps; s++) {
    tg_id loss;
    charlm_batch(d, 0, 8, 16, r, x, y);
    cr_assert_eq(charlm_train_step(m, x, y, 8, 16, &OPTS, charlm_lr(s, 5, steps, OPTS.lr, 1e-3), s, &loss, err), 0,
                 "%s", err);
    cr_assert_eq(tg_tape_scalar(m->tape, loss, &v), TG_OK, "%s", tg_tape_error(m->tape));
  }
  return v;
}

Test(charlm_f16, loss_falls_with_loss_scaling, .timeout = 300) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  charlm_data d;
  charlm_model m;
  char err[CHARLM_ERR];
  load_corpus(&d);
  charlm_config c = {1, 2, 32, 16, d.vocab, 0.0, TG_F16, TG_PROVIDER_AUTO, TG_PROVIDER_CUDA_FUSED, 0};
  cr_assert_eq(charlm_model_init(&m, rt, &c, 7, err), 0, "%s", err);
  cr_assert_not_null(m.scaler);
  charlm_rng r;
  charlm_rng_seed(&r, 7);
  const int quick = ts_under_sanitizer(); /* 12 steps: the kernels of a step, not the loss curve */
  train(&m, &d, &r, quick ? 12 : 120);
  double after, scale;
  cr_assert_eq(charlm_evaluate(&m, &d, 1, 8, 8, &r, &after, err), 0, "%s", err);
  tg_loss_scaler_state(m.scaler, &scale, NULL);
  cr_log_info("f16: val loss %.4f after %d steps, loss scale %g, %lld steps skipped", after, quick ? 12 : 120, scale,
              (long long)m.skipped);
  if (!quick) {
    cr_expect(after < 3.45, "val loss after 120 f16 steps is %.4f; expected < 3.45 (as f32)", after);
    cr_expect_leq(m.skipped, 5, "%lld of 120 steps skipped at a sane scale", (long long)m.skipped);
  }
  charlm_model_free(&m);
  charlm_data_free(&d);
  tg_runtime_destroy(rt);
}

/* A scale of 2^100 overflows f16 at once: steps skip without touching the parameters, the scale
 * halves each time, and training resumes once it fits. */
Test(charlm_f16, overflowing_scale_backs_off_and_skips, .timeout = 300) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  charlm_data d;
  charlm_model m;
  char err[CHARLM_ERR];
  load_corpus(&d);
  charlm_config c = {1, 2, 32, 16, d.vocab, 0.0, TG_F16, TG_PROVIDER_AUTO, TG_PROVIDER_CUDA_FUSED, 0};
  cr_assert_eq(charlm_model_init(&m, rt, &c, 7, err), 0, "%s", err);
  tg_loss_scaler_destroy(m.scaler);
  tg_loss_scaler_options so;
  tg_loss_scaler_options_init(&so);
  so.init_scale = 0x1p100;
  cr_assert_eq(tg_loss_scaler_create(&so, &m.scaler), TG_OK);
  float w0[32], w1[32];
  int64_t n = 32;
  cr_assert_eq(tg_tape_read(m.tape, m.lnf_b, w0, sizeof w0), TG_OK, "%s", tg_tape_error(m.tape));
  charlm_rng r;
  charlm_rng_seed(&r, 3);
  train(&m, &d, &r, 1);
  cr_expect_eq(m.skipped, 1, "the first step at 2^100 must skip");
  cr_assert_eq(tg_tape_read(m.tape, m.lnf_b, w1, sizeof w1), TG_OK);
  cr_expect_eq(memcmp(w0, w1, (size_t)n * 4), 0, "a skipped step changed a parameter");
  const int quick = ts_under_sanitizer(); /* 20 steps: all skip, the scale halves each time */
  train(&m, &d, &r, quick ? 20 : 200);
  double scale;
  tg_loss_scaler_state(m.scaler, &scale, NULL);
  cr_log_info("2^100 start: %lld skipped, scale now %g", (long long)m.skipped, scale);
  if (quick) {
    cr_expect_eq(m.skipped, 21, "%lld of 21 steps skipped", (long long)m.skipped);
    cr_expect(scale == 0x1p79, "scale %g after 21 halvings of 2^100", scale);
  } else {
    cr_expect(m.skipped >= 80 && m.skipped < 200, "%lld steps skipped", (long long)m.skipped);
    cr_expect(scale < 0x1p24, "scale %g did not back off", scale);
  }
  charlm_model_free(&m);
  charlm_data_free(&d);
  tg_runtime_destroy(rt);
}
