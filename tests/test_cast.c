/* tg_cast: rounding to f16 / bf16 (nearest even, subnormals, overflow), gradients flowing back in
 * the input's dtype, gradcheck, errors, and CUDA against the host. */
#include <math.h>
#include <stdlib.h>

#include "support.h"

static const int64_t S6[1] = {6};

Test(cast, rounding_to_bf16_and_f16) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  /* 1 + 2^-8 is a bf16 tie: rounds to even (1.0); 1 + 3*2^-9 rounds up to 1 + 2^-7 */
  float x[6] = {1.0f + 0x1.0p-8f, 1.0f + 3 * 0x1.0p-9f, -2.5f, 65520.0f, 0x1.0p-24f, 0x1.8p-25f};
  tg_id ix = ts_input(t, TG_F32, 1, S6, x, 0);
  uint16_t b[6], h[6];
  cr_assert_eq(tg_tape_read(t, tg_cast(t, ix, TG_BF16), b, sizeof b), TG_OK, "%s", tg_tape_error(t));
  cr_expect_eq(b[0], 0x3F80); /* 1.0 */
  cr_expect_eq(b[1], 0x3F81); /* 1 + 2^-7 */
  cr_expect_eq(b[2], 0xC020); /* -2.5 */
  cr_assert_eq(tg_tape_read(t, tg_cast(t, ix, TG_F16), h, sizeof h), TG_OK, "%s", tg_tape_error(t));
  cr_expect_eq(h[0], 0x3C04); /* f16 has 10 mantissa bits: 1 + 2^-8 is exact (4 ulps of 2^-10) */
  cr_expect_eq(h[2], 0xC100); /* -2.5 */
  cr_expect_eq(h[3], 0x7C00); /* 65520 rounds to infinity in f16 */
  cr_expect_eq(h[4], 0x0001); /* 2^-24: the smallest subnormal */
  cr_expect_eq(h[5], 0x0001); /* 1.5 * 2^-25 = 0.75 of the subnormal step 2^-24: rounds up to 1 step */
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(cast, gradient_comes_back_in_the_input_dtype) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double x[6] = {0.5, -1.25, 3, 4, -5, 6};
  tg_id ix = ts_input(t, TG_F64, 1, S6, x, TG_REQUIRES_GRAD);
  /* y = sum(cast(x, f32) * 2) + sum(cast(x, bf16) cast back): dy/dx = 2 + 1 */
  tg_id a = tg_scale(t, tg_cast(t, ix, TG_F32), 2.0);
  tg_id bsum = tg_sum(t, tg_cast(t, tg_cast(t, ix, TG_BF16), TG_F32));
  tg_id y = tg_add(t, tg_sum(t, a), bsum);
  cr_assert_eq(tg_tape_backward(t, y), TG_OK, "%s", tg_tape_error(t));
  double g[6], want[6] = {3, 3, 3, 3, 3, 3};
  ts_read_grad(t, ix, g, 6);
  TS_EXPECT_CLOSE(g, want, 6, 0, 0);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

static tg_id gc_cast(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_sum(t, tg_mul(t, tg_cast(t, in[0], TG_F64), in[0]));
}

Test(cast, gradcheck_f64) {
  double x[6];
  ts_uniform(x, 6, 9, -2, 2);
  tg_gradcheck_input in = ts_gc_input(TG_F64, 1, S6, x);
  ts_gradcheck(gc_cast, NULL, 1, &in);
}

Test(cast, errors) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int32_t ids[6] = {0};
  float x[6] = {0};
  tg_id ii = ts_input(t, TG_I32, 1, S6, ids, 0);
  cr_expect_eq(tg_cast(t, ii, TG_F32), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "cannot cast i32 to f32");
  tg_tape_reset(t);
  tg_id ix = ts_input(t, TG_F32, 1, S6, x, 0);
  cr_expect_eq(tg_cast(t, ix, TG_U8), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "cannot cast f32 to u8");
  tg_tape_reset(t);
  cr_expect_eq(tg_cast(t, TG_NO_ID, TG_F32), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "argument 'x'");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

static tg_id cv_cast(tg_tape *t, const tg_id *in, void *user) {
  tg_dtype to = *(tg_dtype *)user;
  return tg_cast(t, tg_cast(t, in[0], to), TG_F32);
}

Test(cast_cuda, matches_host) {
  int64_t sh[2] = {37, 53};
  double *x = malloc(37 * 53 * sizeof(double));
  ts_uniform(x, 37 * 53, 4, -100, 100);
  tg_gradcheck_input in = ts_gc_input(TG_F64, 2, sh, x);
  tg_dtype to[2] = {TG_BF16, TG_F16};
  for (int k = 0; k < 2; k++)
    ts_check_cuda_vs_host(cv_cast, &to[k], 1, &in, TG_F32, TG_PROVIDER_CUDA, 1e-2);
  free(x);
}
