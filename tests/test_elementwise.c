/* add / sub / mul (broadcast), scale, relu, leaky_relu, gelu, tanh, elu: forward values against
 * formulas written here, gradcheck in f64, error paths. */
#include <math.h>

#include "support.h"

static const int64_t S23[2] = {2, 3}, S3[1] = {3}, S4[1] = {4};

Test(elementwise, add_broadcast_forward_f32) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30};
  tg_id ia = ts_input(t, TG_F32, 2, S23, a, 0), ib = ts_input(t, TG_F32, 1, S3, b, 0);
  double y[6], want[6] = {11, 22, 33, 14, 25, 36};
  ts_read(t, tg_add(t, ia, ib), y, 6);
  TS_EXPECT_CLOSE(y, want, 6, 0, 1e-7);
  double want_sub[6] = {-9, -18, -27, -6, -15, -24}, want_sub2[6] = {9, 18, 27, 6, 15, 24};
  ts_read(t, tg_sub(t, ia, ib), y, 6);
  TS_EXPECT_CLOSE(y, want_sub, 6, 0, 1e-7);
  ts_read(t, tg_sub(t, ib, ia), y, 6); /* the broadcast operand may come first */
  TS_EXPECT_CLOSE(y, want_sub2, 6, 0, 1e-7);
  double want_mul[6] = {10, 40, 90, 40, 100, 180};
  ts_read(t, tg_mul(t, ia, ib), y, 6);
  TS_EXPECT_CLOSE(y, want_mul, 6, 0, 1e-7);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(elementwise, unary_forward_f64) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double x[4] = {-2.0, -0.5, 0.25, 3.0};
  tg_id ix = ts_input(t, TG_F64, 1, S4, x, 0);
  double y[4], w[4];
  ts_read(t, tg_relu(t, ix), y, 4);
  for (int i = 0; i < 4; i++)
    w[i] = x[i] > 0 ? x[i] : 0;
  TS_EXPECT_CLOSE(y, w, 4, 0, 1e-15);
  ts_read(t, tg_leaky_relu(t, ix, 0.2), y, 4);
  for (int i = 0; i < 4; i++)
    w[i] = x[i] > 0 ? x[i] : 0.2 * x[i];
  TS_EXPECT_CLOSE(y, w, 4, 0, 1e-15);
  ts_read(t, tg_scale(t, ix, -1.5), y, 4);
  for (int i = 0; i < 4; i++)
    w[i] = -1.5 * x[i];
  TS_EXPECT_CLOSE(y, w, 4, 0, 1e-15);
  ts_read(t, tg_tanh(t, ix), y, 4);
  for (int i = 0; i < 4; i++)
    w[i] = (exp(2 * x[i]) - 1) / (exp(2 * x[i]) + 1);
  TS_EXPECT_CLOSE(y, w, 4, 1e-15, 1e-13);
  /* GELU tanh form; reference values computed with Python math.tanh from the formula */
  double gelu_ref[4] = {-0.04540230591222494, -0.15428599017485606, 0.149675350701685, 2.996362607918227};
  ts_read(t, tg_gelu(t, ix), y, 4);
  TS_EXPECT_CLOSE(y, gelu_ref, 4, 1e-9, 1e-8);
  ts_read(t, tg_elu(t, ix, 1.5), y, 4);
  for (int i = 0; i < 4; i++)
    w[i] = x[i] > 0 ? x[i] : 1.5 * (exp(x[i]) - 1);
  TS_EXPECT_CLOSE(y, w, 4, 1e-15, 1e-13);
  cr_expect_eq(tg_elu(t, ix, 0), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "tg_elu: argument 'alpha' is 0; expected a number > 0");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

typedef tg_id (*unary_fn)(tg_tape *, tg_id);
static tg_id gc_unary(tg_tape *t, const tg_id *in, void *user) {
  unary_fn f = *(unary_fn *)user;
  return tg_sum(t, tg_mul(t, f(t, in[0]), in[1]));
}
static tg_id leaky(tg_tape *t, tg_id x) { return tg_leaky_relu(t, x, 0.1); }
static tg_id scale(tg_tape *t, tg_id x) { return tg_scale(t, x, 0.7); }
static tg_id elu(tg_tape *t, tg_id x) { return tg_elu(t, x, 1.0); }

Test(elementwise, gradcheck_unary) {
  int64_t sh[2] = {3, 5};
  double x[15], w[15];
  ts_uniform(x, 15, 1, -2, 2);
  ts_uniform(w, 15, 2, -1, 1);
  for (int i = 0; i < 15; i++)
    if (fabs(x[i]) < 0.05) x[i] = 0.3; /* keep away from the kinks of relu */
  tg_gradcheck_input in[2] = {ts_gc_input(TG_F64, 2, sh, x), ts_gc_input(TG_F64, 2, sh, w)};
  unary_fn fns[] = {tg_relu, leaky, tg_gelu, tg_tanh, scale, elu};
  for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++)
    ts_gradcheck(gc_unary, &fns[k], 2, in);
}

typedef tg_id (*binary_fn)(tg_tape *, tg_id, tg_id);
static tg_id gc_binary(tg_tape *t, const tg_id *in, void *user) {
  binary_fn f = *(binary_fn *)user;
  tg_id y = f(t, in[0], in[1]);
  return tg_sum(t, tg_mul(t, y, y));
}

Test(elementwise, gradcheck_binary_broadcast) {
  int64_t sa[3] = {2, 3, 4}, sb[1] = {4}, sc[2] = {3, 4};
  double a[24], b[4], c[12];
  ts_uniform(a, 24, 3, -1, 1);
  ts_uniform(b, 4, 4, -1, 1);
  ts_uniform(c, 12, 5, -1, 1);
  binary_fn fns[] = {tg_add, tg_sub, tg_mul};
  for (int k = 0; k < 3; k++) {
    tg_gradcheck_input ab[2] = {ts_gc_input(TG_F64, 3, sa, a), ts_gc_input(TG_F64, 1, sb, b)};
    ts_gradcheck(gc_binary, &fns[k], 2, ab);
    tg_gradcheck_input ca[2] = {ts_gc_input(TG_F64, 2, sc, c), ts_gc_input(TG_F64, 3, sa, a)};
    ts_gradcheck(gc_binary, &fns[k], 2, ca);
  }
}

static tg_id gc_self_mul(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_sum(t, tg_mul(t, in[0], in[0])); /* same value on both sides */
}

Test(elementwise, gradcheck_same_value_twice) {
  double x[3] = {0.5, -1.5, 2};
  tg_gradcheck_input in = ts_gc_input(TG_F64, 1, S3, x);
  ts_gradcheck(gc_self_mul, NULL, 1, &in);
}

Test(elementwise, errors) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  float a[6] = {0}, b[4] = {0};
  int32_t ids[3] = {0, 1, 2};
  double d[3] = {0};
  tg_id ia = ts_input(t, TG_F32, 2, S23, a, 0), ib = ts_input(t, TG_F32, 1, S4, b, 0);
  tg_id ii = ts_input(t, TG_I32, 1, S3, ids, 0), id = ts_input(t, TG_F64, 1, S3, d, 0);
  cr_expect_eq(tg_add(t, ia, ib), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "tg_add: arguments 'a' [2, 3] and 'b' [4] do not broadcast");
  /* sticky: later ops do nothing, even valid ones; the first error is kept */
  cr_expect_eq(tg_relu(t, ia), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "tg_add");
  tg_tape_reset(t);
  ia = ts_input(t, TG_F32, 2, S23, a, 0);
  ii = ts_input(t, TG_I32, 1, S3, ids, 0);
  id = ts_input(t, TG_F64, 1, S3, d, 0);
  cr_expect_eq(tg_relu(t, ii), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "tg_relu: argument 'x' has dtype i32");
  tg_tape_reset(t);
  ia = ts_input(t, TG_F32, 2, S23, a, 0);
  id = ts_input(t, TG_F64, 1, S3, d, 0);
  cr_expect_eq(tg_mul(t, ia, id), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "same dtype");
  tg_tape_reset(t);
  ia = ts_input(t, TG_F32, 2, S23, a, 0);
  cr_expect_eq(tg_tanh(t, TG_NO_ID), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "argument 'x' is TG_NO_ID");
  tg_tape_reset(t);
  cr_expect_eq(tg_tanh(t, ia), TG_NO_ID); /* ia was dropped by the reset */
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "stale");
  tg_tape_reset(t);
  ia = ts_input(t, TG_F32, 2, S23, a, 0);
  cr_expect_eq(tg_scale(t, ia, NAN), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "argument 's' is nan");
  tg_tape_reset(t);
  cr_expect_eq(tg_relu(NULL, ia), TG_NO_ID);
  cr_expect(strstr(tg_last_error(), "argument 'tape' is NULL") != NULL);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* ---- CUDA provider against the host f64 reference (skips without a GPU) */

static tg_id cv_binary(tg_tape *t, const tg_id *in, void *user) {
  binary_fn f = *(binary_fn *)user;
  return f(t, in[0], in[1]);
}
static tg_id cv_unary(tg_tape *t, const tg_id *in, void *user) {
  unary_fn f = *(unary_fn *)user;
  return f(t, in[0]);
}
static tg_id cv_sum(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_add(t, tg_sum(t, in[0]), tg_mean(t, in[0]));
}

Test(elementwise_cuda, matches_host_f32_odd_sizes) {
  int64_t sa[3] = {7, 13, 37}, sb[1] = {37};
  size_t na = 7 * 13 * 37;
  double *a = malloc(na * sizeof(double)), b[37], *c = malloc(na * sizeof(double));
  ts_uniform(a, na, 11, -3, 3);
  ts_uniform(b, 37, 12, -3, 3);
  ts_uniform(c, na, 13, -3, 3);
  binary_fn bf[] = {tg_add, tg_sub, tg_mul};
  for (int k = 0; k < 3; k++) {
    tg_gradcheck_input ab[2] = {ts_gc_input(TG_F64, 3, sa, a), ts_gc_input(TG_F64, 1, sb, b)};
    ts_check_cuda_vs_host(cv_binary, &bf[k], 2, ab, TG_F32, TG_PROVIDER_CUDA, 1e-6);
    tg_gradcheck_input ba[2] = {ts_gc_input(TG_F64, 1, sb, b), ts_gc_input(TG_F64, 3, sa, a)};
    ts_check_cuda_vs_host(cv_binary, &bf[k], 2, ba, TG_F32, TG_PROVIDER_CUDA, 1e-6);
    tg_gradcheck_input ac[2] = {ts_gc_input(TG_F64, 3, sa, a), ts_gc_input(TG_F64, 3, sa, c)};
    ts_check_cuda_vs_host(cv_binary, &bf[k], 2, ac, TG_F32, TG_PROVIDER_CUDA, 1e-6);
  }
  unary_fn uf[] = {tg_relu, leaky, tg_gelu, tg_tanh, scale, elu};
  for (size_t k = 0; k < sizeof uf / sizeof uf[0]; k++) {
    tg_gradcheck_input in = ts_gc_input(TG_F64, 3, sa, a);
    ts_check_cuda_vs_host(cv_unary, &uf[k], 1, &in, TG_F32, TG_PROVIDER_CUDA, 1e-5);
    ts_check_cuda_vs_host(cv_unary, &uf[k], 1, &in, TG_BF16, TG_PROVIDER_CUDA, 2e-2);
  }
  tg_gradcheck_input in = ts_gc_input(TG_F64, 3, sa, a);
  ts_check_cuda_vs_host(cv_sum, NULL, 1, &in, TG_F32, TG_PROVIDER_CUDA, 1e-5);
  free(a);
  free(c);
}

/* Broadcast operands whose length is a multiple of the 16-byte vector (64 elements: the kernels'
 * vector path with wrap-around reads), full-size pairs with a scalar tail (5*64 + 3 elements), in
 * f32 and bf16. */
Test(elementwise_cuda, vector_paths_f32_and_bf16) {
  int64_t sa[3] = {9, 5, 64}, sb[1] = {64}, st[1] = {5 * 64 + 3};
  size_t na = 9 * 5 * 64;
  double *a = malloc(na * sizeof(double)), b[64], *c = malloc(na * sizeof(double));
  ts_uniform(a, na, 21, -3, 3);
  ts_uniform(b, 64, 22, -3, 3);
  ts_uniform(c, na, 23, -3, 3);
  tg_dtype dts[2] = {TG_F32, TG_BF16};
  double tols[2] = {1e-6, 2e-2};
  binary_fn bf[] = {tg_add, tg_sub, tg_mul};
  for (int d = 0; d < 2; d++)
    for (int k = 0; k < 3; k++) {
      tg_gradcheck_input ab[2] = {ts_gc_input(TG_F64, 3, sa, a), ts_gc_input(TG_F64, 1, sb, b)};
      ts_check_cuda_vs_host(cv_binary, &bf[k], 2, ab, dts[d], TG_PROVIDER_CUDA, tols[d]);
      tg_gradcheck_input ba[2] = {ts_gc_input(TG_F64, 1, sb, b), ts_gc_input(TG_F64, 3, sa, a)};
      ts_check_cuda_vs_host(cv_binary, &bf[k], 2, ba, dts[d], TG_PROVIDER_CUDA, tols[d]);
      tg_gradcheck_input tt[2] = {ts_gc_input(TG_F64, 1, st, a), ts_gc_input(TG_F64, 1, st, c)};
      ts_check_cuda_vs_host(cv_binary, &bf[k], 2, tt, dts[d], TG_PROVIDER_CUDA, tols[d]);
    }
  free(a);
  free(c);
}

/* ---- sum and mean (ops/reduce.c) */

static tg_id gc_sum_mean(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  tg_id x2 = tg_mul(t, in[0], in[0]);
  return tg_add(t, tg_sum(t, x2), tg_scale(t, tg_mean(t, tg_tanh(t, in[0])), 3.0));
}

Test(reduce, values_and_gradcheck) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sh[3] = {2, 3, 5};
  double x[30], s = 0;
  ts_uniform(x, 30, 21, -2, 2);
  for (int i = 0; i < 30; i++)
    s += x[i];
  tg_id ix = ts_input(t, TG_F64, 3, sh, x, 0);
  double v;
  cr_assert_eq(tg_tape_scalar(t, tg_sum(t, ix), &v), TG_OK);
  cr_expect(fabs(v - s) < 1e-12, "sum %g vs %g", v, s);
  cr_assert_eq(tg_tape_scalar(t, tg_mean(t, ix), &v), TG_OK);
  cr_expect(fabs(v - s / 30) < 1e-13, "mean %g vs %g", v, s / 30);
  int nd = -1;
  int64_t osh[TG_MAX_DIMS];
  cr_expect_eq(tg_tape_shape(t, tg_sum(t, ix), &nd, osh, TG_MAX_DIMS), TG_OK);
  cr_expect_eq(nd, 0, "a full reduction is a scalar (ndim 0)");
  int32_t ids[3] = {1, 2, 3};
  tg_id ii = ts_input(t, TG_I32, 1, S3, ids, 0);
  cr_expect_eq(tg_mean(t, ii), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "tg_mean: argument 'x' has dtype i32");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
  tg_gradcheck_input in = ts_gc_input(TG_F64, 3, sh, x);
  ts_gradcheck(gc_sum_mean, NULL, 1, &in);
}
