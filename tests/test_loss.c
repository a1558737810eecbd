/* cross_entropy and mse: forward values against formulas written here, gradcheck in f64, the
 * all-ignored case, saved state, error paths, and the CUDA provider against the host. */
#include <math.h>
#include <stdlib.h>

#include "support.h"

/* ---------------------------------------------------------------- cross-entropy values */

/* logits [3, 3]: rows {1, 2, 3} -> class 2, {0.5, -1, 0} -> class 0, {4, 4, 4} ignored (-100). */
static const double CE_X[9] = {1, 2, 3, 0.5, -1, 0, 4, 4, 4};
static const int32_t CE_T[3] = {2, 0, -100};

/* Hand-worked: loss_r = log(sum_j exp(x_rj)) - x_r,t_r, mean over the two counted rows. */
static double ce_hand_loss(void) {
  double l0 = log(exp(1.0) + exp(2.0) + exp(3.0)) - 3.0;  /* = 0.40760596444... */
  double l1 = log(exp(0.5) + exp(-1.0) + exp(0.0)) - 0.5; /* = 0.60413060533... */
  return (l0 + l1) / 2;
}

Test(loss, ce_forward_and_grad_hand_computed_f64) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sx[2] = {3, 3}, st[1] = {3};
  tg_id x = ts_input(t, TG_F64, 2, sx, CE_X, TG_REQUIRES_GRAD), tg = ts_input(t, TG_I32, 1, st, CE_T, 0);
  tg_id L = tg_cross_entropy(t, x, tg, -100);
  double y;
  ts_read(t, L, &y, 1);
  double want = ce_hand_loss();
  cr_expect(fabs(y - want) < 1e-14, "loss %.17g, want %.17g", y, want);
  cr_expect(fabs(want - 0.5058682848905542) < 1e-12, "hand value %.17g",
            want); /* (0.40760596444 + 0.60413060533) / 2 */
  cr_assert_eq(tg_tape_backward(t, L), TG_OK, "%s", tg_tape_error(t));
  /* d loss / d x_rj = (softmax_rj - [j == t_r]) / 2 for counted rows, 0 for the ignored row */
  double g[9], w[9] = {0};
  ts_read_grad(t, x, g, 9);
  double z0 = exp(1.0) + exp(2.0) + exp(3.0), z1 = exp(0.5) + exp(-1.0) + exp(0.0);
  w[0] = exp(1.0) / z0 / 2, w[1] = exp(2.0) / z0 / 2, w[2] = (exp(3.0) / z0 - 1) / 2;
  w[3] = (exp(0.5) / z1 - 1) / 2, w[4] = exp(-1.0) / z1 / 2, w[5] = exp(0.0) / z1 / 2;
  TS_EXPECT_CLOSE(g, w, 9, 1e-15, 1e-13);
  /* saved state: one lse (double) per row, counted */
  size_t nodes = 0, saved = 0;
  tg_tape_stats(t, &nodes, &saved);
  cr_expect_eq(saved, 3 * sizeof(double));
  char buf[1024];
  tg_tape_explain(t, buf, sizeof buf, NULL);
  cr_expect(strstr(buf, "cross_entropy") && strstr(buf, "counted=2 ignore_index=-100"), "%s", buf);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(loss, ce_forward_f32_and_no_ignore) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  float xf[9];
  for (int i = 0; i < 9; i++)
    xf[i] = (float)CE_X[i];
  int32_t tgs[3] = {2, 0, 1};
  int64_t sx[2] = {3, 3}, st[1] = {3};
  tg_id x = ts_input(t, TG_F32, 2, sx, xf, 0), tg = ts_input(t, TG_I32, 1, st, tgs, 0);
  double y, want = (log(exp(1.0) + exp(2.0) + exp(3.0)) - 3.0 + log(exp(0.5) + exp(-1.0) + 1.0) - 0.5 +
                    log(3 * exp(4.0)) - 4.0) /
                   3;
  ts_read(t, tg_cross_entropy(t, x, tg, TG_NO_IGNORE), &y, 1);
  cr_expect(fabs(y - want) < 1e-6, "loss %.9g, want %.9g", y, want);
  /* huge logits: log-sum-exp is shifted by the row max, so nothing overflows */
  float big[3] = {1000.f, 1001.f, 999.f};
  int32_t one = 1;
  int64_t s3[1] = {3};
  tg_id xb = ts_input(t, TG_F32, 1, s3, big, 0), tb = ts_input(t, TG_I32, 0, NULL, &one, 0);
  ts_read(t, tg_cross_entropy(t, xb, tb, TG_NO_IGNORE), &y, 1);
  want = log(exp(-1.0) + 1.0 + exp(-2.0));
  cr_expect(fabs(y - want) < 1e-6, "big logits: loss %.9g, want %.9g", y, want);
  /* no saved state when nothing requires grad */
  size_t saved = 1;
  tg_tape_stats(t, NULL, &saved);
  cr_expect_eq(saved, 0);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(loss, ce_all_ignored_is_zero_with_zero_grad) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int32_t tgs[3] = {7, 7, 7}; /* ignore_index may lie outside [0, C) */
  int64_t sx[2] = {3, 3}, st[1] = {3};
  tg_id x = ts_input(t, TG_F64, 2, sx, CE_X, TG_REQUIRES_GRAD), tg = ts_input(t, TG_I32, 1, st, tgs, 0);
  tg_id L = tg_cross_entropy(t, x, tg, 7);
  double y = -1, g[9], zero[9] = {0};
  ts_read(t, L, &y, 1);
  cr_expect_eq(y, 0.0);
  cr_assert_eq(tg_tape_backward(t, L), TG_OK, "%s", tg_tape_error(t));
  ts_read_grad(t, x, g, 9);
  TS_EXPECT_CLOSE(g, zero, 9, 1e-300, 0);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* ---------------------------------------------------------------- cross-entropy gradcheck */

typedef struct {
  int32_t ignore;
} ce_args;

static tg_id gc_ce(tg_tape *t, const tg_id *in, void *user) {
  const ce_args *a = user;
  return tg_scale(t, tg_cross_entropy(t, in[0], in[1], a->ignore), 1.7); /* upstream gradient != 1 */
}

Test(loss, ce_gradcheck_f64) {
  int64_t sx[2] = {4, 5}, st[1] = {4};
  double x[20];
  ts_uniform(x, 20, 21, -3, 3);
  int32_t tgs[4] = {0, 4, 2, 2};
  ce_args none = {TG_NO_IGNORE};
  tg_gradcheck_input in[2] = {ts_gc_input(TG_F64, 2, sx, x), ts_gc_input(TG_I32, 1, st, tgs)};
  ts_gradcheck(gc_ce, &none, 2, in);
  /* ignored rows (-100), and an ignore_index that is also a valid class (2) */
  int32_t tgi[4] = {-100, 4, -100, 1};
  ce_args ign = {-100};
  in[1].data = tgi;
  ts_gradcheck(gc_ce, &ign, 2, in);
  ce_args ign2 = {2};
  in[1].data = tgs;
  ts_gradcheck(gc_ce, &ign2, 2, in);
}

Test(loss, ce_gradcheck_3d_logits) {
  int64_t sx[3] = {2, 3, 4}, st[2] = {2, 3};
  double x[24];
  ts_uniform(x, 24, 22, -2, 2);
  int32_t tgs[6] = {3, -1, 0, 1, 2, -1};
  ce_args ign = {-1};
  tg_gradcheck_input in[2] = {ts_gc_input(TG_F64, 3, sx, x), ts_gc_input(TG_I32, 2, st, tgs)};
  ts_gradcheck(gc_ce, &ign, 2, in);
  /* 1-D logits [C] with a scalar target */
  int64_t s1[1] = {6};
  int32_t one = 5;
  tg_gradcheck_input in1[2] = {ts_gc_input(TG_F64, 1, s1, x), ts_gc_input(TG_I32, 0, NULL, &one)};
  ts_gradcheck(gc_ce, &ign, 2, in1);
}

/* ---------------------------------------------------------------- mse */

Test(loss, mse_forward_values) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t s[2] = {2, 3};
  double a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1.5, 2, 1, 4, -5, 6.25};
  double want = (0.25 + 0 + 4 + 0 + 100 + 0.0625) / 6;
  double y;
  ts_read(t, tg_mse(t, ts_input(t, TG_F64, 2, s, a, 0), ts_input(t, TG_F64, 2, s, b, 0)), &y, 1);
  cr_expect(fabs(y - want) < 1e-14, "mse %.17g, want %.17g", y, want);
  float af[6], bf[6];
  for (int i = 0; i < 6; i++)
    af[i] = (float)a[i], bf[i] = (float)b[i];
  ts_read(t, tg_mse(t, ts_input(t, TG_F32, 2, s, af, 0), ts_input(t, TG_F32, 2, s, bf, 0)), &y, 1);
  cr_expect(fabs(y - want) < 1e-5, "mse f32 %.9g, want %.9g", y, want);
  /* gradient 2 (a - b) / n and its negative */
  tg_id ia = ts_input(t, TG_F64, 2, s, a, TG_REQUIRES_GRAD), ib = ts_input(t, TG_F64, 2, s, b, TG_REQUIRES_GRAD);
  cr_assert_eq(tg_tape_backward(t, tg_mse(t, ia, ib)), TG_OK, "%s", tg_tape_error(t));
  double ga[6], gb[6], wa[6], wb[6];
  ts_read_grad(t, ia, ga, 6);
  ts_read_grad(t, ib, gb, 6);
  for (int i = 0; i < 6; i++)
    wa[i] = 2 * (a[i] - b[i]) / 6, wb[i] = -wa[i];
  TS_EXPECT_CLOSE(ga, wa, 6, 1e-15, 1e-14);
  TS_EXPECT_CLOSE(gb, wb, 6, 1e-15, 1e-14);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

static tg_id gc_mse(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_scale(t, tg_mse(t, in[0], in[1]), -0.6);
}
static tg_id gc_mse_self(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_add(t, tg_mse(t, in[0], in[0]), tg_mse(t, tg_tanh(t, in[0]), in[0])); /* same value on both sides */
}

Test(loss, mse_gradcheck_f64) {
  int64_t s[3] = {2, 3, 2};
  double a[12], b[12];
  ts_uniform(a, 12, 31, -2, 2);
  ts_uniform(b, 12, 32, -2, 2);
  tg_gradcheck_input in[2] = {ts_gc_input(TG_F64, 3, s, a), ts_gc_input(TG_F64, 3, s, b)};
  ts_gradcheck(gc_mse, NULL, 2, in);
  ts_gradcheck(gc_mse_self, NULL, 1, in);
  double sa = 0.3, sb = -1.1; /* scalars */
  tg_gradcheck_input sc[2] = {ts_gc_input(TG_F64, 0, NULL, &sa), ts_gc_input(TG_F64, 0, NULL, &sb)};
  ts_gradcheck(gc_mse, NULL, 2, sc);
}

/* ---------------------------------------------------------------- errors */

Test(loss, ce_errors) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sx[2] = {2, 3}, s2[1] = {2}, s3[1] = {3}, s23[2] = {2, 3}, sx3[3] = {2, 3, 4};
  double x[24] = {0};
  float tf[2] = {0, 1};
  int32_t ok[2] = {0, 2}, bad[2] = {1, 3}, neg[2] = {0, -1}, imin[2] = {INT32_MIN, 0}, bad3[6] = {0, 1, 2, 3, 3, 4};
#define FRESH() (tg_tape_reset(t), ix = ts_input(t, TG_F64, 2, sx, x, 0))
  tg_id ix, it;
  FRESH();
  it = ts_input(t, TG_F32, 1, s2, tf, 0);
  cr_expect_eq(tg_cross_entropy(t, ix, it, TG_NO_IGNORE), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "tg_cross_entropy: argument 'targets' has dtype f32; expected i32");
  FRESH();
  it = ts_input(t, TG_I32, 1, s3, bad3, 0);
  cr_expect_eq(tg_cross_entropy(t, ix, it, TG_NO_IGNORE), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE,
                   "argument 'targets' has shape [3]; expected [2] (the leading dims of 'logits' [2, 3])");
  FRESH();
  it = ts_input(t, TG_I32, 2, s23, bad3, 0);
  cr_expect_eq(tg_cross_entropy(t, ix, it, TG_NO_IGNORE), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "argument 'targets' has shape [2, 3]; expected [2]");
  FRESH();
  it = ts_input(t, TG_I32, 1, s2, bad, 0);
  cr_expect_eq(tg_cross_entropy(t, ix, it, -100), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT,
                   "argument 'targets' holds 3 at [1] (row 1); expected a class in [0, 3) or ignore_index -100");
  FRESH();
  it = ts_input(t, TG_I32, 1, s2, neg, 0);
  cr_expect_eq(tg_cross_entropy(t, ix, it, TG_NO_IGNORE), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "holds -1 at [1] (row 1); expected a class in [0, 3)");
  cr_expect(strstr(tg_tape_error(t), "ignore_index") == NULL, "%s", tg_tape_error(t));
  FRESH();
  it = ts_input(t, TG_I32, 1, s2, imin, 0); /* INT32_MIN is TG_NO_IGNORE, not an ignored target */
  cr_expect_eq(tg_cross_entropy(t, ix, it, TG_NO_IGNORE), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "holds -2147483648 at [0] (row 0)");
  /* 3-D logits: the bad target is named by its index into targets */
  tg_tape_reset(t);
  tg_id i3 = ts_input(t, TG_F64, 3, sx3, x, 0);
  int32_t t3[6] = {0, 1, 2, 3, 4, 3};
  it = ts_input(t, TG_I32, 2, s23, t3, 0);
  cr_expect_eq(tg_cross_entropy(t, i3, it, 3), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT,
                   "holds 4 at [1, 1] (row 4); expected a class in [0, 4) or ignore_index 3");
  tg_tape_reset(t);
  double sc = 1;
  tg_id isc = ts_input(t, TG_F64, 0, NULL, &sc, 0), it0 = ts_input(t, TG_I32, 0, NULL, ok, 0);
  cr_expect_eq(tg_cross_entropy(t, isc, it0, TG_NO_IGNORE), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "argument 'logits' is a scalar");
  tg_tape_reset(t);
  it = ts_input(t, TG_I32, 1, s2, ok, 0);
  cr_expect_eq(tg_cross_entropy(t, it, it, TG_NO_IGNORE), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "argument 'logits' has dtype i32");
  FRESH();
  cr_expect_eq(tg_cross_entropy(t, ix, TG_NO_ID, TG_NO_IGNORE), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "argument 'targets' is TG_NO_ID");
  FRESH();
  it = ts_input(t, TG_I32, 1, s2, ok, 0);
  tg_tape_reset(t);
  cr_expect_eq(tg_cross_entropy(t, ix, it, TG_NO_IGNORE), TG_NO_ID); /* both dropped by the reset */
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "stale");
  tg_tape_reset(t);
  cr_expect_eq(tg_cross_entropy(NULL, ix, it, TG_NO_IGNORE), TG_NO_ID);
  cr_expect(strstr(tg_last_error(), "tg_cross_entropy: argument 'tape' is NULL") != NULL, "%s", tg_last_error());
  /* the CUDA provider on a host-only runtime */
  FRESH();
  it = ts_input(t, TG_I32, 1, s2, ok, 0);
  tg_tape_set_provider(t, TG_PROVIDER_CUDA, NULL);
  cr_expect_eq(tg_cross_entropy(t, ix, it, TG_NO_IGNORE), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_NO_DEVICE, "host-only");
#undef FRESH
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(loss, mse_errors) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t s6[1] = {6}, s23[2] = {2, 3}, s32[2] = {3, 2};
  double d[6] = {0};
  float f[6] = {0};
  int32_t i6[6] = {0};
  tg_id a = ts_input(t, TG_F64, 2, s23, d, 0), b = ts_input(t, TG_F64, 2, s32, d, 0);
  cr_expect_eq(tg_mse(t, a, b), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "tg_mse: arguments 'a' [2, 3] and 'b' [3, 2] must have the same shape");
  tg_tape_reset(t);
  a = ts_input(t, TG_F64, 2, s23, d, 0), b = ts_input(t, TG_F64, 1, s6, d, 0);
  cr_expect_eq(tg_mse(t, a, b), TG_NO_ID); /* same numel is not enough */
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "must have the same shape");
  tg_tape_reset(t);
  a = ts_input(t, TG_F64, 2, s23, d, 0), b = ts_input(t, TG_F32, 2, s23, f, 0);
  cr_expect_eq(tg_mse(t, a, b), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "same dtype");
  tg_tape_reset(t);
  a = ts_input(t, TG_I32, 2, s23, i6, 0);
  cr_expect_eq(tg_mse(t, a, a), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "argument 'a' has dtype i32");
  tg_tape_reset(t);
  a = ts_input(t, TG_F64, 2, s23, d, 0);
  cr_expect_eq(tg_mse(t, a, TG_NO_ID), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "argument 'b' is TG_NO_ID");
  tg_tape_reset(t);
  cr_expect_eq(tg_mse(t, a, a), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "stale");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* ---------------------------------------------------------------- CUDA against the host */

static tg_id cv_ce(tg_tape *t, const tg_id *in, void *user) {
  const ce_args *a = user;
  return tg_cross_entropy(t, in[0], in[1], a->ignore);
}

/* rows 37 with every 7th row ignored; targets spread over [0, C). */
static void ce_cuda_case(int64_t rows, int64_t C, tg_dtype dt, double tol, uint64_t seed) {
  int64_t sx[2] = {rows, C}, st[1] = {rows};
  double *x = malloc((size_t)(rows * C) * sizeof(double));
  int32_t *tg = malloc((size_t)rows * sizeof(int32_t));
  ts_uniform(x, (size_t)(rows * C), seed, -4, 4);
  uint64_t s = seed;
  for (int64_t r = 0; r < rows; r++)
    tg[r] = r % 7 == 3 ? -100 : (int32_t)(ts_next(&s) % (uint64_t)C);
  ce_args ign = {-100};
  tg_gradcheck_input in[2] = {ts_gc_input(TG_F64, 2, sx, x), ts_gc_input(TG_I32, 1, st, tg)};
  ts_check_cuda_vs_host(cv_ce, &ign, 2, in, dt, TG_PROVIDER_CUDA, tol);
  free(x);
  free(tg);
}

Test(loss_cuda, ce_matches_host_odd_sizes) {
  int64_t Cs[3] = {1, 5, 1001};
  for (int k = 0; k < 3; k++) {
    ce_cuda_case(37, Cs[k], TG_F32, 1e-5, 40 + (uint64_t)k);
    ce_cuda_case(37, Cs[k], TG_BF16, 2e-2, 50 + (uint64_t)k);
  }
  ce_cuda_case(3, 50257, TG_F32, 1e-5, 60); /* a GPT-2 vocabulary: block-per-row kernel */
  ce_cuda_case(1025, 3, TG_F32, 1e-5, 61);  /* many rows: warp-per-row kernel over several blocks */
}

Test(loss_cuda, ce_all_ignored_and_3d) {
  int64_t sx[3] = {3, 5, 7}, st[2] = {3, 5};
  double x[105];
  ts_uniform(x, 105, 70, -2, 2);
  int32_t tg[15];
  for (int i = 0; i < 15; i++)
    tg[i] = -1;
  ce_args ign = {-1};
  tg_gradcheck_input in[2] = {ts_gc_input(TG_F64, 3, sx, x), ts_gc_input(TG_I32, 2, st, tg)};
  ts_check_cuda_vs_host(cv_ce, &ign, 2, in, TG_F32, TG_PROVIDER_CUDA, 1e-6);
  for (int i = 0; i < 15; i++)
    tg[i] = i % 4 ? i % 7 : -1;
  ts_check_cuda_vs_host(cv_ce, &ign, 2, in, TG_F32, TG_PROVIDER_CUDA, 1e-5);
}

static tg_id cv_mse(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_mse(t, in[0], in[1]);
}

Test(loss_cuda, mse_matches_host_odd_sizes) {
  int64_t sizes[3] = {1, 37, 7 * 13 * 37 * 11};
  for (int k = 0; k < 3; k++) {
    size_t n = (size_t)sizes[k];
    double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double));
    ts_uniform(a, n, 80 + (uint64_t)k, -3, 3);
    ts_uniform(b, n, 90 + (uint64_t)k, -3, 3);
    tg_gradcheck_input in[2] = {ts_gc_input(TG_F64, 1, &sizes[k], a), ts_gc_input(TG_F64, 1, &sizes[k], b)};
    ts_check_cuda_vs_host(cv_mse, NULL, 2, in, TG_F32, TG_PROVIDER_CUDA, 1e-5);
    ts_check_cuda_vs_host(cv_mse, NULL, 2, in, TG_BF16, TG_PROVIDER_CUDA, 2e-2);
    free(a);
    free(b);
  }
}
