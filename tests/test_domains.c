/* The NaN-free domains (issue 15): host attention with f64 scores that overflow (1e160 x 1e160,
 * scale 1e308) stays finite, and GELU's gradient is finite at huge inputs (f64 on the host, f32 on
 * CUDA; the CUDA case skips without a GPU). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

typedef struct {
  double scale;
} attn_user;

static tg_id attn_sum(tg_tape *t, const tg_id *in, void *user) {
  const attn_user *u = user;
  tg_attention_options o;
  tg_attention_options_init(&o);
  o.scale = u->scale;
  tg_relation *rel = NULL;
  tg_relation_dense(tg_tape_runtime(t), 3, 3, &rel);
  tg_id y = tg_attention(t, in[0], in[1], in[2], rel, &o);
  tg_relation_destroy(rel);
  return tg_sum(t, tg_mul(t, y, in[3]));
}

/* Before: f64 scores like 1e160 * 1e160 or scale = 1e308 overflowed to inf and inf - inf gave NaN. */
static void attention_case(const double *q, const double *k, double scale, const double *want_out) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  const int64_t sh[4] = {1, 3, 1, 2};
  double v[6] = {1, 2, 3, 4, 5, 6}, r[6] = {1, -1, 0.5, 2, -3, 1};
  tg_id in[4] = {ts_input(t, TG_F64, 4, sh, q, TG_REQUIRES_GRAD), ts_input(t, TG_F64, 4, sh, k, TG_REQUIRES_GRAD),
                 ts_input(t, TG_F64, 4, sh, v, TG_REQUIRES_GRAD), ts_input(t, TG_F64, 4, sh, r, 0)};
  attn_user u = {scale};
  tg_id L = attn_sum(t, in, &u);
  tg_attention_options o;
  tg_attention_options_init(&o);
  o.scale = scale;
  tg_relation *rel = NULL;
  tg_relation_dense(rt, 3, 3, &rel);
  tg_id y = tg_attention(t, in[0], in[1], in[2], rel, &o);
  tg_relation_destroy(rel);
  cr_assert_eq(tg_tape_status(t), TG_OK, "%s", tg_tape_error(t));
  double out[6], g[6];
  ts_read(t, y, out, 6);
  for (int i = 0; i < 6; i++) {
    cr_expect(!isnan(out[i]), "out[%d] is NaN", i);
    if (want_out)
      cr_expect(fabs(out[i] - want_out[i]) <= 1e-12 * fabs(want_out[i]), "out[%d] %g vs %g", i, out[i], want_out[i]);
  }
  cr_assert_eq(tg_tape_backward(t, L), TG_OK, "%s", tg_tape_error(t));
  for (int a = 0; a < 3; a++) {
    ts_read_grad(t, in[a], g, 6);
    for (int i = 0; i < 6; i++)
      cr_expect(isfinite(g[i]), "gradient %d of input %d is %g", i, a, g[i]);
  }
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(attention_domain, f64_scores_that_overflow) {
  /* every score 1e160 * 1e160 * 2 / sqrt(2) = +inf: each row averages all values */
  double q[6] = {1e160, 1e160, 1e160, 1e160, 1e160, 1e160}, k[6] = {1e160, 1e160, 1e160, 1e160, 1e160, 1e160};
  double avg[6] = {3, 4, 3, 4, 3, 4};
  attention_case(q, k, TG_SCALE_AUTO, avg);
  /* key 1 at +inf, keys 0 and 2 at -inf: each row takes value 1 */
  double k2[6] = {-1e160, -1e160, 1e160, 1e160, -1e160, -1e160}, one[6] = {3, 4, 3, 4, 3, 4};
  attention_case(q, k2, TG_SCALE_AUTO, one);
  /* +inf and -inf products inside one dot (a NaN dot before) */
  double k3[6] = {1e200, -1e200, 1e200, 1e199, -1e200, 1e200}, q3[6] = {1e200, 1e200, 1, 2, 3, 4};
  attention_case(q3, k3, TG_SCALE_AUTO, NULL);
  /* scale 1e308 with ordinary inputs */
  double qs[6] = {0.5, -1, 2, 0.25, -3, 1}, ks[6] = {1, 2, -0.5, 1.5, 0.75, -2};
  attention_case(qs, ks, 1e308, NULL);
  /* every score -inf: treated as a row with no allowed key (output 0) */
  double kn[6] = {-1e160, -1e160, -1e160, -1e160, -1e160, -1e160}, zero[6] = {0, 0, 0, 0, 0, 0};
  attention_case(q, kn, TG_SCALE_AUTO, zero);
}

static tg_id gelu_sum(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_sum(t, tg_gelu(t, in[0]));
}

/* Before: GELU's f64 gradient at 1e200 was NaN (0 * inf). */
Test(gelu_domain, f64_gradient_at_huge_inputs) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  const int64_t s6[1] = {6};
  double x[6] = {1e200, -1e200, 1e300, -1e300, 1e103, 3}, g[6], y[6];
  tg_id xi = ts_input(t, TG_F64, 1, s6, x, TG_REQUIRES_GRAD);
  tg_id yi = tg_gelu(t, xi);
  cr_assert_eq(tg_tape_backward(t, tg_sum(t, yi)), TG_OK, "%s", tg_tape_error(t));
  ts_read_grad(t, xi, g, 6);
  ts_read(t, yi, y, 6);
  double want[5] = {1, 0, 1, 0, 1};
  for (int i = 0; i < 5; i++) {
    cr_expect_eq(g[i], want[i], "gelu'(%g) = %g", x[i], g[i]);
    cr_expect(!isnan(y[i]), "gelu(%g) = %g", x[i], y[i]);
  }
  /* away from saturation the gradient is unchanged: check it numerically */
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
  double xs[5] = {-7.5, -2, 0.3, 4, 9};
  const int64_t s5[1] = {5};
  tg_gradcheck_input in = ts_gc_input(TG_F64, 1, s5, xs);
  ts_gradcheck(gelu_sum, NULL, 1, &in);
}

/* CUDA f32 GELU gradient at 1e20 (x^3 overflows f32): 1, never NaN. */
Test(gelu_domain, cuda_f32_gradient_at_huge_inputs) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  tg_tape *t = ts_tape(rt);
  const int64_t s4[1] = {4};
  float x[4] = {1e20f, -1e20f, 3e38f, 2};
  double g[4];
  tg_id xi = ts_input(t, TG_F32, 1, s4, x, TG_REQUIRES_GRAD);
  cr_assert_eq(tg_tape_backward(t, tg_sum(t, tg_gelu(t, xi))), TG_OK, "%s", tg_tape_error(t));
  ts_read_grad(t, xi, g, 4);
  cr_expect(g[0] == 1 && g[1] == 0 && g[2] == 1 && fabs(g[3] - 1.0861) < 1e-3, "%g %g %g %g", g[0], g[1], g[2], g[3]);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}
