/* tg_softmax: forward against exp(x) / sum exp(x) written here, rows of large magnitude,
 * gradcheck in f64 through a random weighting, the f32 backward against its formula, error
 * paths, and the CUDA provider against the host f64 reference (skips without a GPU). */
#include <math.h>
#include <stdlib.h>

#include "support.h"

/* Plain definition, no max shift: fine for the |x| <= 3 the tests feed it. */
static void naive_softmax(const double *x, double *y, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; r++) {
    double s = 0;
    for (int64_t j = 0; j < n; j++)
      s += exp(x[r * n + j]);
    for (int64_t j = 0; j < n; j++)
      y[r * n + j] = exp(x[r * n + j]) / s;
  }
}

Test(softmax, forward_f64) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sh[2] = {3, 7};
  double x[21], y[21], want[21];
  ts_uniform(x, 21, 1, -3, 3);
  naive_softmax(x, want, 3, 7);
  ts_read(t, tg_softmax(t, ts_input(t, TG_F64, 2, sh, x, 0)), y, 21);
  TS_EXPECT_CLOSE(y, want, 21, 0, 1e-13);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(softmax, forward_f32_3d) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sh[3] = {2, 3, 5};
  float xf[30];
  double x[30], y[30], want[30];
  ts_uniform_f32(xf, 30, 2, -3, 3);
  for (int i = 0; i < 30; i++)
    x[i] = xf[i];
  naive_softmax(x, want, 6, 5);
  tg_id iy = tg_softmax(t, ts_input(t, TG_F32, 3, sh, xf, 0));
  ts_read(t, iy, y, 30);
  TS_EXPECT_CLOSE(y, want, 30, 1e-7, 1e-6);
  int nd;
  int64_t ysh[TG_MAX_DIMS];
  cr_expect_eq(tg_tape_shape(t, iy, &nd, ysh, TG_MAX_DIMS), TG_OK);
  cr_expect(nd == 3 && ysh[0] == 2 && ysh[1] == 3 && ysh[2] == 5);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* Rows at |x| ~ 1e3: exp(1000) overflows, so only a max-shifted softmax stays finite. The
 * expected values come from the shift done by hand: e.g. [1000, 999, -1000, 0] ->
 * [1, e^-1, 0, 0] / (1 + e^-1). The gradient stays finite too. */
static void large_magnitudes(tg_dtype dt, double tol) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sh[2] = {3, 4};
  double x[12] = {1000, 999, -1000, 0, -1000, -1001, -1002, -999, 1e3, 1e3, 1e3, 1e3};
  double e1 = exp(-1), e2 = exp(-2), e3 = exp(-3), s2 = 1 + e1 + e2 + e3;
  double want[12] = {1 / (1 + e1), e1 / (1 + e1), 0, 0, e1 / s2, e2 / s2, e3 / s2, 1 / s2, .25, .25, .25, .25};
  double w[12];
  ts_uniform(w, 12, 3, -1, 1);
  void *xc = ts_convert(x, 12, dt), *wc = ts_convert(w, 12, dt);
  tg_id ix = ts_input(t, dt, 2, sh, xc, TG_REQUIRES_GRAD), iw = ts_input(t, dt, 2, sh, wc, 0);
  tg_id iy = tg_softmax(t, ix);
  double y[12], g[12];
  ts_read(t, iy, y, 12);
  for (int i = 0; i < 12; i++)
    cr_expect(isfinite(y[i]), "%s y[%d] = %g", tg_dtype_name(dt), i, y[i]);
  TS_EXPECT_CLOSE(y, want, 12, 1e-30, tol);
  cr_assert_eq(tg_tape_backward(t, tg_sum(t, tg_mul(t, iy, iw))), TG_OK, "%s", tg_tape_error(t));
  ts_read_grad(t, ix, g, 12);
  for (int i = 0; i < 12; i++)
    cr_expect(isfinite(g[i]), "%s grad[%d] = %g", tg_dtype_name(dt), i, g[i]);
  free(xc);
  free(wc);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(softmax, large_magnitudes_f64) { large_magnitudes(TG_F64, 1e-14); }
Test(softmax, large_magnitudes_f32) { large_magnitudes(TG_F32, 1e-6); }

/* sum(softmax(x) * w): with w random the gradient dx = y (w - <w, y>) is not zero. */
static tg_id gc_weighted(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_sum(t, tg_mul(t, tg_softmax(t, in[0]), in[1]));
}

Test(softmax, gradcheck) {
  int64_t s2[2] = {3, 5}, s3[3] = {2, 2, 3}, s1[1] = {6}, sn1[2] = {4, 1};
  double x[15], w[15];
  ts_uniform(x, 15, 4, -2, 2);
  ts_uniform(w, 15, 5, -1, 1);
  const int64_t *shapes[4] = {s2, s3, s1, sn1};
  int ndims[4] = {2, 3, 1, 2};
  for (int k = 0; k < 4; k++) {
    tg_gradcheck_input in[2] = {ts_gc_input(TG_F64, ndims[k], shapes[k], x),
                                ts_gc_input(TG_F64, ndims[k], shapes[k], w)};
    ts_gradcheck(gc_weighted, NULL, 2, in);
  }
}

/* The f32 host backward against dx = y (w - sum_k w_k y_k) evaluated here in double. */
Test(softmax, backward_f32_formula) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sh[2] = {4, 9};
  float xf[36], wf[36];
  double x[36], w[36], y[36], want[36], g[36];
  ts_uniform_f32(xf, 36, 6, -3, 3);
  ts_uniform_f32(wf, 36, 7, -1, 1);
  for (int i = 0; i < 36; i++)
    x[i] = xf[i], w[i] = wf[i];
  naive_softmax(x, y, 4, 9);
  for (int r = 0; r < 4; r++) {
    double dot = 0;
    for (int j = 0; j < 9; j++)
      dot += w[r * 9 + j] * y[r * 9 + j];
    for (int j = 0; j < 9; j++)
      want[r * 9 + j] = y[r * 9 + j] * (w[r * 9 + j] - dot);
  }
  tg_id ix = ts_input(t, TG_F32, 2, sh, xf, TG_REQUIRES_GRAD), iw = ts_input(t, TG_F32, 2, sh, wf, 0);
  tg_id loss = tg_sum(t, tg_mul(t, tg_softmax(t, ix), iw));
  cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
  ts_read_grad(t, ix, g, 36);
  TS_EXPECT_CLOSE(g, want, 36, 1e-7, 1e-5);
  /* a second sweep accumulates into the leaf gradient */
  cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
  ts_read_grad(t, ix, g, 36);
  for (int i = 0; i < 36; i++)
    want[i] *= 2;
  TS_EXPECT_CLOSE(g, want, 36, 1e-7, 1e-5);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(softmax, saves_nothing_and_explains) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sh[2] = {2, 3};
  double x[6] = {1, 2, 3, 4, 5, 6};
  tg_id iy = tg_softmax(t, ts_input(t, TG_F64, 2, sh, x, TG_REQUIRES_GRAD));
  cr_assert_neq(iy, TG_NO_ID, "%s", tg_tape_error(t));
  size_t nodes = 0, saved = 1;
  cr_expect_eq(tg_tape_stats(t, &nodes, &saved), TG_OK);
  cr_expect_eq(nodes, 1);
  cr_expect_eq(saved, 0, "softmax saved %zu bytes; it should reuse its output", saved);
  char buf[512];
  cr_expect_eq(tg_tape_explain(t, buf, sizeof buf, NULL), TG_OK);
  cr_expect(strstr(buf, "softmax") && strstr(buf, "saved=0") && strstr(buf, "n=3"), "explain: %s", buf);
  /* no-grad mode: same values, no node */
  tg_tape_reset(t);
  tg_tape_set_grad_enabled(t, 0, NULL);
  double y[6], want[6];
  naive_softmax(x, want, 2, 3);
  ts_read(t, tg_softmax(t, ts_input(t, TG_F64, 2, sh, x, TG_REQUIRES_GRAD)), y, 6);
  TS_EXPECT_CLOSE(y, want, 6, 0, 1e-14);
  cr_expect_eq(tg_tape_stats(t, &nodes, &saved), TG_OK);
  cr_expect_eq(nodes, 0);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(softmax, errors) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sh[2] = {2, 3};
  float a[6] = {0};
  int32_t ids[6] = {0};
  double one = 1;
  cr_expect_eq(tg_softmax(t, TG_NO_ID), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "tg_softmax: argument 'x' is TG_NO_ID");
  tg_tape_reset(t);
  cr_expect_eq(tg_softmax(t, (tg_id)12345), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "never issued");
  tg_tape_reset(t);
  tg_id ia = ts_input(t, TG_F32, 2, sh, a, 0);
  tg_tape_reset(t);
  cr_expect_eq(tg_softmax(t, ia), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "stale");
  tg_tape_reset(t);
  cr_expect_eq(tg_softmax(t, ts_input(t, TG_I32, 2, sh, ids, 0)), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "tg_softmax: argument 'x' has dtype i32; expected f32 or f64");
  tg_tape_reset(t);
  cr_expect_eq(tg_softmax(t, ts_input(t, TG_F64, 0, NULL, &one, 0)), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "argument 'x' is a scalar");
  /* sticky: a valid call afterwards does nothing and the first error is kept */
  cr_expect_eq(tg_softmax(t, ts_input(t, TG_F32, 2, sh, a, 0)), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "scalar");
  tg_tape_reset(t);
  tg_tape_set_provider(t, TG_PROVIDER_CUDA, NULL);
  cr_expect_eq(tg_softmax(t, ts_input(t, TG_F32, 2, sh, a, 0)), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_NO_DEVICE, "host-only");
  tg_tape_reset(t);
  cr_expect_eq(tg_softmax(NULL, 0), TG_NO_ID);
  cr_expect(strstr(tg_last_error(), "tg_softmax: argument 'tape' is NULL") != NULL, "%s", tg_last_error());
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* ---- CUDA provider against the host f64 reference (skips without a GPU) */

static tg_id cv_softmax(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_softmax(t, in[0]);
}

static void cuda_case(int64_t rows, int64_t n, double lo, double hi, int quantize, const tg_dtype *dts,
                      const double *tols, int ndt) {
  int64_t sh[2] = {rows, n};
  size_t cnt = (size_t)(rows * n);
  double *x = malloc(cnt * sizeof(double));
  ts_uniform(x, cnt, (uint64_t)(rows * 131 + n), lo, hi);
  if (quantize) /* multiples of 1/16: exact in f32 even near 1e3 */
    for (size_t i = 0; i < cnt; i++)
      x[i] = round(x[i] * 16) / 16;
  tg_gradcheck_input in = ts_gc_input(TG_F64, 2, sh, x);
  for (int k = 0; k < ndt; k++)
    ts_check_cuda_vs_host(cv_softmax, NULL, 1, &in, dts[k], TG_PROVIDER_CUDA, tols[k]);
  free(x);
}

Test(softmax_cuda, matches_host_odd_sizes) {
  tg_dtype dts[3] = {TG_F32, TG_BF16, TG_F16};
  double tols[3] = {1e-5, 2e-2, 2e-2};
  int64_t ns[4] = {1, 5, 129, 1000};
  for (int k = 0; k < 4; k++)
    cuda_case(37, ns[k], -3, 3, 0, dts, tols, 3);
}

Test(softmax_cuda, matches_host_long_rows) {
  /* block-per-row path (n > 1024), including the 1024-thread blocks */
  tg_dtype dts[2] = {TG_F32, TG_BF16};
  double tols[2] = {1e-5, 2e-2};
  cuda_case(5, 3001, -3, 3, 0, dts, tols, 2);
  cuda_case(3, 20011, -3, 3, 0, dts, tols, 2);
  cuda_case(20000, 7, -3, 3, 0, dts, tols, 2); /* many rows: grid over row groups */
}

Test(softmax_cuda, large_magnitudes) {
  tg_dtype dt = TG_F32;
  double tol = 1e-5, loose = 1e-3;
  cuda_case(37, 2000, 990, 1000, 1, &dt, &tol, 1);
  /* nearly one-hot rows: their (tiny) gradient is a difference of nearly equal f32 terms */
  cuda_case(37, 129, -1000, 1000, 1, &dt, &loose, 1);
}

Test(softmax_cuda, rejects_f64) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  tg_tape *t = ts_tape(rt);
  int64_t sh[2] = {2, 3};
  double x[6] = {0};
  tg_tape_set_provider(t, TG_PROVIDER_CUDA, NULL);
  cr_expect_eq(tg_softmax(t, ts_input(t, TG_F64, 2, sh, x, 0)), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "f64 is computed on the HOST provider");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}
