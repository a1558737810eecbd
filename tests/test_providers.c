/* Per-node provider choice on a CUDA runtime: a tape alternating HOST and CUDA nodes gives the same
 * values and gradients as an all-HOST tape; explain shows each node's provider and the transfers it
 * caused; an injected device allocation failure is an out-of-memory status and the tape stays
 * usable. Skips (with the reason) without a GPU. */
#include <math.h>
#include <stdlib.h>

#include "support.h"

enum { ROWS = 37, COLS = 29 };

/* y = mean(tanh(gelu(x * w + b) - x) * x): every node's provider taken from `provs` in order. */
static tg_id chain(tg_tape *t, tg_id x, tg_id w, tg_id b, const tg_provider *provs) {
  int k = 0;
#define NEXT() tg_tape_set_provider(t, provs[k++], NULL)
  NEXT();
  tg_id h = tg_mul(t, x, w);
  NEXT();
  h = tg_add(t, h, b);
  NEXT();
  h = tg_gelu(t, h);
  NEXT();
  h = tg_sub(t, h, x);
  NEXT();
  h = tg_tanh(t, h);
  NEXT();
  h = tg_mul(t, h, x);
  NEXT();
  return tg_mean(t, h);
#undef NEXT
}

static void run(tg_runtime *rt, const tg_provider *provs, double *loss, double *gx, double *gw, double *gb,
                char **explain) {
  tg_tape *t = ts_tape(rt);
  int64_t sx[2] = {ROWS, COLS}, sb[1] = {COLS};
  double *x = malloc(ROWS * COLS * sizeof(double)), *w = malloc(ROWS * COLS * sizeof(double)), b[COLS];
  ts_uniform(x, ROWS * COLS, 1, -2, 2);
  ts_uniform(w, ROWS * COLS, 2, -2, 2);
  ts_uniform(b, COLS, 3, -1, 1);
  float *xf = ts_convert(x, ROWS * COLS, TG_F32), *wf = ts_convert(w, ROWS * COLS, TG_F32),
        *bf = ts_convert(b, COLS, TG_F32);
  tg_id ix = ts_input(t, TG_F32, 2, sx, xf, TG_REQUIRES_GRAD);
  tg_id iw = ts_param(t, TG_F32, 2, sx, wf);
  tg_id ib = ts_param(t, TG_F32, 1, sb, bf);
  tg_id y = chain(t, ix, iw, ib, provs);
  cr_assert_eq(tg_tape_status(t), TG_OK, "%s", tg_tape_error(t));
  cr_assert_eq(tg_tape_backward(t, y), TG_OK, "%s", tg_tape_error(t));
  cr_assert_eq(tg_tape_scalar(t, y, loss), TG_OK);
  ts_read_grad(t, ix, gx, ROWS * COLS);
  ts_read_grad(t, iw, gw, ROWS * COLS);
  ts_read_grad(t, ib, gb, COLS);
  if (explain) {
    size_t len;
    tg_tape_explain(t, NULL, 0, &len);
    *explain = malloc(len + 1);
    tg_tape_explain(t, *explain, len + 1, NULL);
  }
  free(x), free(w), free(xf), free(wf), free(bf);
  tg_tape_destroy(t);
}

Test(providers, mixed_tape_matches_all_host) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  const tg_provider H = TG_PROVIDER_HOST, C = TG_PROVIDER_CUDA;
  tg_provider all_host[7] = {H, H, H, H, H, H, H}, mixed[7] = {C, H, C, H, C, H, C},
              all_cuda[7] = {C, C, C, C, C, C, C};
  static double gx0[ROWS * COLS], gw0[ROWS * COLS], gb0[COLS], gx1[ROWS * COLS], gw1[ROWS * COLS], gb1[COLS];
  double l0, l1;
  run(rt, all_host, &l0, gx0, gw0, gb0, NULL);
  char *text = NULL;
  run(rt, mixed, &l1, gx1, gw1, gb1, &text);
  cr_expect(fabs(l1 - l0) <= 1e-5 * fabs(l0) + 1e-7, "loss %g vs %g", l1, l0);
  cr_expect(ts_rel_l2(gx1, gx0, ROWS * COLS) < 1e-5);
  cr_expect(ts_rel_l2(gw1, gw0, ROWS * COLS) < 1e-5);
  cr_expect(ts_rel_l2(gb1, gb0, COLS) < 1e-5);
  /* explain: both providers appear and the alternation caused transfers */
  cr_expect(strstr(text, "cuda_fused") && strstr(text, "host"), "%s", text);
  cr_expect(strstr(text, "h2d=") != NULL, "%s", text);
  free(text);
  run(rt, all_cuda, &l1, gx1, gw1, gb1, NULL);
  cr_expect(fabs(l1 - l0) <= 1e-5 * fabs(l0) + 1e-7, "loss %g vs %g", l1, l0);
  cr_expect(ts_rel_l2(gw1, gw0, ROWS * COLS) < 1e-5);
  tg_runtime_destroy(rt);
}

Test(providers, auto_is_cuda_on_a_device_runtime) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  tg_tape *t = ts_tape(rt);
  double x[3] = {1, -2, 3};
  int64_t s[1] = {3};
  float xf[3] = {1, -2, 3};
  (void)x;
  tg_id ix = ts_input(t, TG_F32, 1, s, xf, 0);
  tg_id y = tg_relu(t, ix);
  char buf[512];
  tg_tape_explain(t, buf, sizeof buf, NULL);
  cr_expect(strstr(buf, "cuda_fused") != NULL, "%s", buf);
  double out[3];
  ts_read(t, y, out, 3);
  cr_expect(out[0] == 1 && out[1] == 0 && out[2] == 3);
  /* f64 is host-only: asking CUDA for it is an error, not a fallback */
  double d[3] = {1, 2, 3};
  tg_id id = ts_input(t, TG_F64, 1, s, d, 0);
  cr_expect_eq(tg_relu(t, id), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "f64 is computed on the HOST provider");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(providers, injected_oom_is_a_status_and_tape_stays_usable) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  tg_tape *t = ts_tape(rt);
  int64_t s[1] = {1 << 20};
  float *x = calloc(1 << 20, sizeof(float));
  for (int i = 0; i < (1 << 20); i++)
    x[i] = (float)(i % 7) - 3;
  tg_tape_set_provider(t, TG_PROVIDER_CUDA, NULL);
  tg_id ix = ts_input(t, TG_F32, 1, s, x, 0);
  cr_assert_eq(tg_runtime_inject_alloc_failure(rt, 0), TG_OK);
  /* the arena needs a device chunk for the copy of x or the result: that allocation fails */
  cr_expect_eq(tg_relu(t, ix), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_OUT_OF_MEMORY, "out of device memory");
  cr_expect_eq(tg_tape_reset(t), TG_OK);
  ix = ts_input(t, TG_F32, 1, s, x, 0);
  tg_id y = tg_sum(t, tg_relu(t, ix));
  double v;
  cr_assert_eq(tg_tape_scalar(t, y, &v), TG_OK, "%s", tg_tape_error(t));
  double want = 0;
  for (int i = 0; i < (1 << 20); i++)
    want += x[i] > 0 ? x[i] : 0;
  cr_expect(fabs(v - want) <= 1e-4 * want, "%g vs %g", v, want);
  size_t cur = 0, peak = 0;
  cr_expect_eq(tg_runtime_memory(rt, &cur, &peak), TG_OK);
  cr_expect(peak >= (1u << 22), "peak %zu", peak);
  free(x);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* Parameter gradients on the device across sweeps (tgi_grad_zero_params zeroes the small ones that
 * tg_tape_zero_grad invalidated in one launch at the start of a sweep): without zero_grad they
 * accumulate (u, used twice per sweep, within rounding; the others exactly); after it each restarts from zero,
 * including one that an earlier sweep did not reach and whose buffer still holds that sweep's gradient. */
static tg_id zg_forward(tg_tape *t, tg_id iw, tg_id ib, tg_id iu, const float *x, bool with_u) {
  int64_t sx[2] = {ROWS, COLS};
  tg_id ix = ts_input(t, TG_F32, 2, sx, x, 0);
  tg_id y = tg_mean(t, tg_tanh(t, tg_add(t, tg_mul(t, ix, iw), ib)));
  if (with_u) y = tg_add(t, y, tg_sum(t, tg_mul(t, iu, iu)));
  cr_assert_eq(tg_tape_status(t), TG_OK, "%s", tg_tape_error(t));
  return y;
}

Test(providers, param_grads_restart_from_zero_after_zero_grad) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  tg_tape *t = ts_tape(rt);
  tg_tape_set_provider(t, TG_PROVIDER_CUDA, NULL);
  int64_t sx[2] = {ROWS, COLS}, sb[1] = {COLS};
  double *d = malloc(ROWS * COLS * sizeof(double));
  ts_uniform(d, ROWS * COLS, 11, -2, 2);
  float *x = ts_convert(d, ROWS * COLS, TG_F32);
  ts_uniform(d, ROWS * COLS, 12, -2, 2);
  float *w = ts_convert(d, ROWS * COLS, TG_F32);
  ts_uniform(d, COLS, 13, -1, 1);
  float *b = ts_convert(d, COLS, TG_F32), *u = ts_convert(d, COLS, TG_F32);
  tg_id iw = ts_param(t, TG_F32, 2, sx, w), ib = ts_param(t, TG_F32, 1, sb, b), iu = ts_param(t, TG_F32, 1, sb, u);
  double *g1w = malloc(ROWS * COLS * sizeof(double)), *gw = malloc(ROWS * COLS * sizeof(double));
  double g1b[COLS], g1u[COLS], gb[COLS], gu[COLS];
  /* sweep 1: the reference gradients */
  cr_assert_eq(tg_tape_backward(t, zg_forward(t, iw, ib, iu, x, true)), TG_OK, "%s", tg_tape_error(t));
  ts_read_grad(t, iw, g1w, ROWS * COLS);
  ts_read_grad(t, ib, g1b, COLS);
  ts_read_grad(t, iu, g1u, COLS);
  /* sweep 2 without zero_grad: twice the reference */
  cr_assert_eq(tg_tape_reset(t), TG_OK);
  cr_assert_eq(tg_tape_backward(t, zg_forward(t, iw, ib, iu, x, true)), TG_OK, "%s", tg_tape_error(t));
  ts_read_grad(t, iw, gw, ROWS * COLS);
  ts_read_grad(t, iu, gu, COLS);
  for (int i = 0; i < ROWS * COLS; i++)
    cr_expect(gw[i] == 2 * g1w[i], "w[%d]: %g vs 2 x %g", i, gw[i], g1w[i]);
  for (int i = 0; i < COLS; i++)
    cr_expect(fabs(gu[i] - 2 * g1u[i]) <= 1e-6 * fabs(g1u[i]), "u[%d]: %g vs 2 x %g", i, gu[i], g1u[i]);
  /* sweep 3 after zero_grad, u not used: w and b restart from zero */
  cr_assert_eq(tg_tape_zero_grad(t), TG_OK);
  cr_assert_eq(tg_tape_reset(t), TG_OK);
  cr_assert_eq(tg_tape_backward(t, zg_forward(t, iw, ib, iu, x, false)), TG_OK, "%s", tg_tape_error(t));
  ts_read_grad(t, iw, gw, ROWS * COLS);
  ts_read_grad(t, ib, gb, COLS);
  for (int i = 0; i < ROWS * COLS; i++)
    cr_expect(gw[i] == g1w[i], "w[%d]: %g vs %g", i, gw[i], g1w[i]);
  for (int i = 0; i < COLS; i++)
    cr_expect(gb[i] == g1b[i], "b[%d]: %g vs %g", i, gb[i], g1b[i]);
  /* sweep 4 after zero_grad with u again: its buffer held 2 x g1u, its gradient is g1u */
  cr_assert_eq(tg_tape_zero_grad(t), TG_OK);
  cr_assert_eq(tg_tape_reset(t), TG_OK);
  cr_assert_eq(tg_tape_backward(t, zg_forward(t, iw, ib, iu, x, true)), TG_OK, "%s", tg_tape_error(t));
  ts_read_grad(t, iu, gu, COLS);
  ts_read_grad(t, ib, gb, COLS);
  for (int i = 0; i < COLS; i++)
    cr_expect(gu[i] == g1u[i] && gb[i] == g1b[i], "u[%d]: %g vs %g, b: %g vs %g", i, gu[i], g1u[i], gb[i], g1b[i]);
  free(d), free(x), free(w), free(b), free(u), free(g1w), free(gw);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}
