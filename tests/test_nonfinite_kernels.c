/* Anomaly mode's in-kernel checks (issue 15; cuda/finite.cuh): on a device runtime the cast,
 * unary, binary, dropout and layer-norm kernels test what they store and raise the tape's flag
 * themselves, and the tape then skips its own check of those buffers. Each case here makes one
 * node of such an op produce (forward) or compute (backward) the first non-finite value from
 * finite inputs, and expects the sticky error to name that node — alone, and mixed with values
 * that cuBLAS wrote and the tape's check kernels read. The largest finite values must not count.
 * Every case is CUDA only and skips without a GPU (the host checks are in test_nonfinite.c). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

static tg_tape *anomaly_tape(tg_runtime *rt) {
  tg_tape *t = ts_tape(rt);
  cr_assert_eq(tg_tape_set_check_finite(t, 1, NULL), TG_OK);
  return t;
}

static void expect_forward(tg_tape *t, const char *needle) {
  TS_EXPECT_STICKY(t, TG_ERR_NONFINITE, needle);
  cr_expect(strstr(tg_tape_error(t), "produced") != NULL, "%s", tg_tape_error(t));
}

static void expect_backward(tg_tape *t, tg_id loss, const char *needle) {
  cr_assert_eq(tg_tape_status(t), TG_OK, "forward: %s", tg_tape_error(t));
  cr_expect_eq(tg_tape_backward(t, loss), TG_ERR_NONFINITE, "%s", tg_tape_error(t));
  TS_EXPECT_STICKY(t, TG_ERR_NONFINITE, needle);
  cr_expect(strstr(tg_tape_error(t), "computed") != NULL, "%s", tg_tape_error(t));
}

static float *filled(int64_t n, float v) {
  float *p = malloc((size_t)n * sizeof *p);
  cr_assert(p);
  for (int64_t i = 0; i < n; i++)
    p[i] = v;
  return p;
}

/* ------------------------------------------------------------ forward */

Test(in_kernel, cast_to_f16_overflows) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  tg_tape *t = anomaly_tape(rt);
  const int64_t n = 37;
  float *x = filled(n, 1);
  x[n - 1] = 1e5f; /* finite in f32, inf in f16 */
  tg_id y = tg_cast(t, tg_scale(t, ts_input(t, TG_F32, 1, &n, x, 0), 1), TG_F16);
  (void)y;
  expect_forward(t, "node #1 (cast, cuda");
  free(x);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(in_kernel, unary_binary_dropout_layernorm_forward) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  for (int c = 0; c < 5; c++) {
    tg_tape *t = anomaly_tape(rt);
    const int64_t n = 1000, shp[2] = {125, 8}, eight = 8;
    float *x = filled(n, c == 0 ? 1e10f : 3e38f);
    tg_id xi = ts_input(t, TG_F32, 1, &n, x, 0);
    const char *want = NULL;
    if (c == 0) { /* 1e10 * 1e30 */
      tg_scale(t, xi, 1e30);
      want = "node #0 (scale, cuda";
    } else if (c == 1) { /* 3e38 + 3e38 */
      tg_add(t, xi, xi);
      want = "node #0 (add, cuda";
    } else if (c == 2) { /* 3e38 / keep */
      tg_dropout(t, xi, 0.5);
      want = "node #0 (dropout, cuda";
    } else if (c == 3) { /* 3e38 * 3e38, after a finite node */
      tg_mul(t, tg_scale(t, xi, 1), xi);
      want = "node #1 (mul, cuda";
    } else { /* rows of 0, 1, 0, 1, ...: layer norm gives +-w = +-1e38 (finite), the scale 4e38 */
      for (int64_t i = 0; i < n; i++)
        x[i] = (float)(i % 2);
      float *w = filled(8, 1e38f), *b = filled(8, 0);
      tg_id y = tg_layernorm(t, ts_input(t, TG_F32, 2, shp, x, 0), ts_input(t, TG_F32, 1, &eight, w, 0),
                             ts_input(t, TG_F32, 1, &eight, b, 0), 1e-5);
      tg_scale(t, y, 4);
      want = "node #1 (scale, cuda";
      free(w), free(b);
    }
    (void)xi;
    expect_forward(t, want);
    free(x);
    tg_tape_destroy(t);
  }
  tg_runtime_destroy(rt);
}

Test(in_kernel, layernorm_forward_overflows) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  /* a row of 3 (the generic kernel) and rows of 8 (the register-cached one) */
  const int64_t widths[2] = {3, 8};
  for (int k = 0; k < 2; k++) {
    tg_tape *t = anomaly_tape(rt);
    const int64_t C = widths[k], shp[2] = {5, C};
    float *x = filled(5 * C, 0);
    for (int64_t i = 0; i < 5 * C; i++)
      x[i] = (float)(i % C); /* |xhat| up to ~1.2 (C = 3) or ~1.5 (C = 8) */
    float *w = filled(C, 3e38f), *b = filled(C, 0);
    tg_id y = tg_layernorm(t, ts_input(t, TG_F32, 2, shp, x, 0), ts_input(t, TG_F32, 1, &C, w, 0),
                           ts_input(t, TG_F32, 1, &C, b, 0), 1e-5);
    (void)y;
    expect_forward(t, "node #0 (layernorm, cuda");
    free(x), free(w), free(b);
    tg_tape_destroy(t);
  }
  tg_runtime_destroy(rt);
}

/* cuBLAS's output is read by the tape's check kernels, the ops around it check themselves: the
 * first node wins either way. */
Test(in_kernel, mixed_with_cublas_forward) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  const int64_t xs[2] = {2, 3}, ws[2] = {3, 4};
  for (int first_gemm = 0; first_gemm < 2; first_gemm++) {
    tg_tape *t = anomaly_tape(rt);
    float *x = filled(6, first_gemm ? 1e20f : 3e38f), *w = filled(12, first_gemm ? 1e20f : 1);
    tg_id xi = ts_input(t, TG_F32, 2, xs, x, 0), wi = ts_input(t, TG_F32, 2, ws, w, 0);
    if (first_gemm) { /* 3e40 from the GEMM (node #0), then the gelu and add of it */
      tg_id h = tg_linear(t, xi, wi, TG_ABSENT);
      tg_add(t, tg_gelu(t, h), h);
      expect_forward(t, "node #0 (linear, cuda");
    } else { /* inf from the add (node #0), then the GEMM of it */
      tg_linear(t, tg_add(t, xi, xi), wi, TG_ABSENT);
      expect_forward(t, "node #0 (add, cuda");
    }
    free(x), free(w);
    tg_tape_destroy(t);
  }
  tg_runtime_destroy(rt);
}

Test(in_kernel, largest_finite_values_do_not_count) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  tg_tape *t = anomaly_tape(rt);
  const int64_t n = 101, shp[2] = {1, 101};
  float *x = filled(n, FLT_MAX), *h = filled(n, 65504.f), *zero = filled(n, 0);
  tg_id xi = ts_input(t, TG_F32, 1, &n, x, TG_REQUIRES_GRAD);
  tg_id z = ts_input(t, TG_F32, 1, &n, zero, 0);
  tg_id a = tg_add(t, tg_scale(t, xi, 1), z);                     /* FLT_MAX */
  tg_id d = tg_dropout(t, tg_scale(t, a, 0.5), 0.5);              /* FLT_MAX or 0 */
  tg_id c = tg_cast(t, ts_input(t, TG_F32, 1, &n, h, 0), TG_F16); /* 65504: the largest f16 */
  /* layer norm of a row 0 .. 100 times w = FLT_MAX / 4: |xhat| <= 1.72, no overflow */
  for (int64_t i = 0; i < n; i++)
    x[i] = (float)i;
  float *w = filled(n, FLT_MAX / 4);
  tg_id ln = tg_layernorm(t, ts_input(t, TG_F32, 2, shp, x, 0), ts_input(t, TG_F32, 1, &n, w, 0),
                          ts_input(t, TG_F32, 1, &n, zero, 0), 1e-5);
  tg_id L = tg_add(t, tg_sum(t, tg_scale(t, d, 1e-38)), tg_sum(t, tg_cast(t, c, TG_F32)));
  L = tg_add(t, L, tg_sum(t, tg_scale(t, ln, 1e-38)));
  cr_assert_eq(tg_tape_status(t), TG_OK, "%s", tg_tape_error(t));
  cr_expect_eq(tg_tape_backward(t, L), TG_OK, "%s", tg_tape_error(t));
  free(x), free(h), free(zero), free(w);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* ------------------------------------------------------------ backward */

/* x = 1e-38 stays finite forward; the gradient 2e38 reaching the dropout doubles to inf. */
Test(in_kernel, dropout_backward_overflows) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  tg_tape *t = anomaly_tape(rt);
  const int64_t n = 999;
  float *x = filled(n, 1e-38f);
  tg_id L = tg_sum(t, tg_scale(t, tg_dropout(t, ts_input(t, TG_F32, 1, &n, x, TG_REQUIRES_GRAD), 0.5), 2e38));
  expect_backward(t, L, "node #0 (dropout, cuda");
  free(x);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* the f32 gradient 1e5 of a cast from f16 is inf in the f16 input's gradient */
Test(in_kernel, cast_backward_overflows) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  tg_tape *t = anomaly_tape(rt);
  const int64_t n = 19;
  double *one = malloc((size_t)n * sizeof *one);
  for (int64_t i = 0; i < n; i++)
    one[i] = 1;
  void *h = ts_convert(one, (size_t)n, TG_F16);
  tg_id L = tg_sum(t, tg_scale(t, tg_cast(t, ts_input(t, TG_F16, 1, &n, h, TG_REQUIRES_GRAD), TG_F32), 1e5));
  expect_backward(t, L, "node #0 (cast, cuda");
  free(one), free(h);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* scale(scale(x, 1e20), 1e20) of x = 1e-38 is 100; its gradient 1e40 is not */
Test(in_kernel, unary_backward_overflows) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  tg_tape *t = anomaly_tape(rt);
  const int64_t n = 1001;
  float *x = filled(n, 1e-38f);
  tg_id L = tg_sum(t, tg_scale(t, tg_scale(t, ts_input(t, TG_F32, 1, &n, x, TG_REQUIRES_GRAD), 1e20), 1e20));
  expect_backward(t, L, "node #0 (scale, cuda");
  free(x);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* a's gradient is 3e38 after scale (#1) and overflows when add (#0) adds its 3e38 */
Test(in_kernel, binary_backward_accumulation_overflows) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  tg_tape *t = anomaly_tape(rt);
  const int64_t n = 67;
  float *x = filled(n, 1e-38f);
  tg_id a = ts_input(t, TG_F32, 1, &n, x, TG_REQUIRES_GRAD), b = ts_input(t, TG_F32, 1, &n, x, TG_REQUIRES_GRAD);
  tg_id y = tg_add(t, a, b);
  tg_id z = tg_scale(t, a, 3e38);
  tg_id L = tg_sum(t, tg_add(t, tg_scale(t, y, 3e38), z));
  expect_backward(t, L, "node #0 (add, cuda");
  free(x);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* rows x = 0, 1, 0, 1, ...: the forward sums y = +-w to 0 exactly; the backward's row sum of
 * gy w = 2e38 overflows in the dx kernel (generic rows of 2, register-cached rows of 8) */
Test(in_kernel, layernorm_backward_overflows) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  const int64_t widths[2] = {2, 8};
  for (int k = 0; k < 2; k++) {
    tg_tape *t = anomaly_tape(rt);
    const int64_t C = widths[k], shp[2] = {3, C};
    float *x = filled(3 * C, 0);
    for (int64_t i = 0; i < 3 * C; i++)
      x[i] = (float)(i % 2);
    float *w = filled(C, 2e38f), *b = filled(C, 0);
    tg_id y = tg_layernorm(t, ts_input(t, TG_F32, 2, shp, x, TG_REQUIRES_GRAD), ts_input(t, TG_F32, 1, &C, w, 0),
                           ts_input(t, TG_F32, 1, &C, b, 0), 1e-5);
    expect_backward(t, tg_sum(t, y), "node #0 (layernorm, cuda");
    free(x), free(w), free(b);
    tg_tape_destroy(t);
  }
  tg_runtime_destroy(rt);
}

/* cuBLAS's dX (linear, #1: two columns of 3e38) overflows first; the scale below it (#0) then
 * computes inf from it in its own kernel: the sweep's first node, the linear, is named */
Test(in_kernel, mixed_with_cublas_backward) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  tg_tape *t = anomaly_tape(rt);
  const int64_t xs[2] = {4, 3}, ws[2] = {3, 2};
  float *x = filled(12, 1e-38f), *w = filled(6, 3e38f);
  tg_id xi = ts_input(t, TG_F32, 2, xs, x, TG_REQUIRES_GRAD), wi = ts_input(t, TG_F32, 2, ws, w, 0);
  tg_id L = tg_sum(t, tg_linear(t, tg_scale(t, xi, 1), wi, TG_ABSENT));
  expect_backward(t, L, "node #1 (linear, cuda");
  free(x), free(w);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}
