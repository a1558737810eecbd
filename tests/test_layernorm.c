/* tg_layernorm: forward against mean / biased variance loops written here, large magnitudes,
 * saved row statistics (tg_tape_stats, explain), gradcheck in f64 for x, w and b, gradient
 * accumulation, error paths, and the CUDA provider against the host f64 reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "support.h"

static void naive_layernorm(const double *x, const double *w, const double *b, double eps, double *y, int64_t rows,
                            int64_t n) {
  for (int64_t r = 0; r < rows; r++) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; j++)
      mean += x[r * n + j];
    mean /= (double)n;
    for (int64_t j = 0; j < n; j++)
      var += (x[r * n + j] - mean) * (x[r * n + j] - mean);
    var /= (double)n;
    for (int64_t j = 0; j < n; j++)
      y[r * n + j] = (x[r * n + j] - mean) / sqrt(var + eps) * w[j] + b[j];
  }
}

/* Runs tg_layernorm on a host tape in dt and returns it (y read as doubles into y). */
static void run_forward(tg_dtype dt, int ndim, const int64_t *sh, const double *x, const double *w, const double *b,
                        double eps, double *y) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t numel = 1, n = sh[ndim - 1];
  for (int d = 0; d < ndim; d++)
    numel *= sh[d];
  void *xc = ts_convert(x, (size_t)numel, dt), *wc = ts_convert(w, (size_t)n, dt), *bc = ts_convert(b, (size_t)n, dt);
  tg_id iy = tg_layernorm(t, ts_input(t, dt, ndim, sh, xc, 0), ts_param(t, dt, 1, &sh[ndim - 1], wc),
                          ts_param(t, dt, 1, &sh[ndim - 1], bc), eps);
  ts_read(t, iy, y, numel);
  free(xc);
  free(wc);
  free(bc);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* Rounds through dt so the reference sees exactly the values the op sees. */
static void round_to(double *v, size_t n, tg_dtype dt) {
  if (dt == TG_F32)
    for (size_t i = 0; i < n; i++)
      v[i] = (float)v[i];
}

Test(layernorm, forward) {
  int64_t s2[2] = {3, 5}, s3[3] = {2, 3, 4};
  double x[24], w[5], b[5], y[24], want[24];
  tg_dtype dts[2] = {TG_F64, TG_F32};
  double tols[2] = {1e-13, 1e-6};
  for (int k = 0; k < 2; k++) {
    ts_uniform(x, 24, 1, -3, 3);
    ts_uniform(w, 5, 2, 0.5, 1.5);
    ts_uniform(b, 5, 3, -1, 1);
    round_to(x, 24, dts[k]);
    round_to(w, 5, dts[k]);
    round_to(b, 5, dts[k]);
    naive_layernorm(x, w, b, 1e-5, want, 3, 5);
    run_forward(dts[k], 2, s2, x, w, b, 1e-5, y);
    TS_EXPECT_CLOSE(y, want, 15, 1e-6, tols[k]);
    naive_layernorm(x, w, b, 0.25, want, 6, 4); /* 3-D, a large eps */
    run_forward(dts[k], 3, s3, x, w, b, 0.25, y);
    TS_EXPECT_CLOSE(y, want, 24, 1e-6, tols[k]);
  }
}

/* Rows near 1e3 with a small spread, a wide row (|x| up to 1e3) and a constant row (variance 0:
 * y = b): all finite and as the reference says; gradients finite. */
static void large_magnitudes(tg_dtype dt, double tol) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sh[2] = {4, 8}, sn[1] = {8};
  double x[32], w[8], b[8], y[32], want[32], g[32], R[32];
  ts_uniform(x, 8, 4, 1000 - 1, 1000 + 1);
  ts_uniform(x + 8, 8, 5, -1000.5, -999.5);
  ts_uniform(x + 16, 8, 6, -1000, 1000);
  for (int j = 24; j < 32; j++)
    x[j] = 1000;
  ts_uniform(w, 8, 7, 0.5, 1.5);
  ts_uniform(b, 8, 8, -1, 1);
  ts_uniform(R, 32, 9, -1, 1);
  round_to(x, 32, dt);
  round_to(w, 8, dt);
  round_to(b, 8, dt);
  naive_layernorm(x, w, b, 1e-5, want, 4, 8);
  void *xc = ts_convert(x, 32, dt), *wc = ts_convert(w, 8, dt), *bc = ts_convert(b, 8, dt), *rc = ts_convert(R, 32, dt);
  tg_id ix = ts_input(t, dt, 2, sh, xc, TG_REQUIRES_GRAD), iw = ts_param(t, dt, 1, sn, wc);
  tg_id ib = ts_param(t, dt, 1, sn, bc), ir = ts_input(t, dt, 2, sh, rc, 0);
  tg_id iy = tg_layernorm(t, ix, iw, ib, 1e-5);
  ts_read(t, iy, y, 32);
  for (int i = 0; i < 32; i++)
    cr_expect(isfinite(y[i]), "%s y[%d] = %g", tg_dtype_name(dt), i, y[i]);
  TS_EXPECT_CLOSE(y, want, 32, tol, tol);
  cr_assert_eq(tg_tape_backward(t, tg_sum(t, tg_mul(t, iy, ir))), TG_OK, "%s", tg_tape_error(t));
  tg_id leaves[3] = {ix, iw, ib};
  int counts[3] = {32, 8, 8};
  for (int k = 0; k < 3; k++) {
    ts_read_grad(t, leaves[k], g, 32);
    for (int i = 0; i < counts[k]; i++)
      cr_expect(isfinite(g[i]), "%s grad %d [%d] = %g", tg_dtype_name(dt), k, i, g[i]);
  }
  free(xc);
  free(wc);
  free(bc);
  free(rc);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(layernorm, large_magnitudes_f64) { large_magnitudes(TG_F64, 1e-9); }
Test(layernorm, large_magnitudes_f32) { large_magnitudes(TG_F32, 1e-5); }

/* Mean and rstd per row are saved only when a gradient can flow: f32 rows save 2 x 4 bytes,
 * f64 rows 2 x 8. */
static size_t saved_after(tg_dtype dt, unsigned x_flags, int params, int grad_enabled, size_t *nodes) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  tg_tape_set_grad_enabled(t, grad_enabled, NULL);
  int64_t sh[3] = {2, 3, 6}, sn[1] = {6};
  double x[36], wb[6];
  ts_uniform(x, 36, 10, -1, 1);
  ts_uniform(wb, 6, 11, -1, 1);
  void *xc = ts_convert(x, 36, dt), *wc = ts_convert(wb, 6, dt);
  tg_id iw = params ? ts_param(t, dt, 1, sn, wc) : ts_input(t, dt, 1, sn, wc, 0);
  tg_id iy = tg_layernorm(t, ts_input(t, dt, 3, sh, xc, x_flags), iw, iw, 1e-5);
  cr_expect_neq(iy, TG_NO_ID, "%s", tg_tape_error(t));
  size_t saved = 99;
  cr_expect_eq(tg_tape_stats(t, nodes, &saved), TG_OK);
  if (saved) {
    char buf[1024];
    cr_expect_eq(tg_tape_explain(t, buf, sizeof buf, NULL), TG_OK);
    char want[64];
    snprintf(want, sizeof want, "saved=%zu", saved);
    cr_expect(strstr(buf, "layernorm") && strstr(buf, want) && strstr(buf, "eps=1e-05") && strstr(buf, "mean,rstd"),
              "explain: %s", buf);
  }
  free(xc);
  free(wc);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
  return saved;
}

Test(layernorm, saved_bytes) {
  size_t nodes = 0;
  cr_expect_eq(saved_after(TG_F32, TG_REQUIRES_GRAD, 0, 1, &nodes), 6 * 2 * sizeof(float));
  cr_expect_eq(nodes, 1);
  cr_expect_eq(saved_after(TG_F64, TG_REQUIRES_GRAD, 0, 1, &nodes), 6 * 2 * sizeof(double));
  cr_expect_eq(saved_after(TG_F32, 0, 1, 1, &nodes), 6 * 2 * sizeof(float), "w, b parameters need the stats too");
  cr_expect_eq(saved_after(TG_F32, 0, 0, 1, &nodes), 0, "nothing requires grad: nothing saved");
  cr_expect_eq(nodes, 1, "the node is still recorded for explain");
  cr_expect_eq(saved_after(TG_F64, TG_REQUIRES_GRAD, 1, 0, &nodes), 0, "grad disabled: nothing saved");
  cr_expect_eq(nodes, 0);
}

/* sum(layernorm(x, w, b) * R) with a random R. */
static tg_id gc_ln(tg_tape *t, const tg_id *in, void *user) {
  double eps = *(const double *)user;
  return tg_sum(t, tg_mul(t, tg_layernorm(t, in[0], in[1], in[2], eps), in[3]));
}
/* w and b are one value (both gradients land in it). */
static tg_id gc_ln_shared(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_sum(t, tg_mul(t, tg_layernorm(t, in[0], in[1], in[1], 1e-5), in[2]));
}
/* x [n] is also the weight. */
static tg_id gc_ln_self(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_sum(t, tg_mul(t, tg_layernorm(t, in[0], in[0], in[1], 1e-3), in[2]));
}

Test(layernorm, gradcheck) {
  double x[40], w[8], b[8], R[40];
  ts_uniform(x, 40, 12, -2, 2);
  ts_uniform(w, 8, 13, 0.5, 1.5);
  ts_uniform(b, 8, 14, -1, 1);
  ts_uniform(R, 40, 15, -1, 1);
  int64_t s2[2] = {5, 8}, s3[3] = {2, 2, 5}, s1[2] = {6, 1}, sv[1] = {8};
  const int64_t *shapes[3] = {s2, s3, s1};
  int ndims[3] = {2, 3, 2};
  double epss[2] = {1e-5, 0.3};
  for (int k = 0; k < 3; k++) {
    int nd = ndims[k];
    for (int e = 0; e < 2; e++) {
      tg_gradcheck_input in[4] = {ts_gc_input(TG_F64, nd, shapes[k], x), ts_gc_input(TG_F64, 1, &shapes[k][nd - 1], w),
                                  ts_gc_input(TG_F64, 1, &shapes[k][nd - 1], b), ts_gc_input(TG_F64, nd, shapes[k], R)};
      ts_gradcheck(gc_ln, &epss[e], 4, in);
    }
  }
  tg_gradcheck_input sh[3] = {ts_gc_input(TG_F64, 2, s2, x), ts_gc_input(TG_F64, 1, sv, w),
                              ts_gc_input(TG_F64, 2, s2, R)};
  ts_gradcheck(gc_ln_shared, NULL, 3, sh);
  tg_gradcheck_input self[3] = {ts_gc_input(TG_F64, 1, sv, x), ts_gc_input(TG_F64, 1, sv, b),
                                ts_gc_input(TG_F64, 1, sv, R)};
  ts_gradcheck(gc_ln_self, NULL, 3, self);
}

/* f32 gradients: once with every leaf requiring grad, once with only the parameters; a second
 * sweep doubles the leaf gradients. Compared with the f64 run. */
Test(layernorm, backward_f32_accumulates) {
  int64_t sh[2] = {7, 6}, sn[1] = {6};
  double x[42], w[6], b[6], R[42], gx64[42], gw64[6], gb64[6], g[42];
  ts_uniform(x, 42, 16, -2, 2);
  ts_uniform(w, 6, 17, 0.5, 1.5);
  ts_uniform(b, 6, 18, -1, 1);
  ts_uniform(R, 42, 19, -1, 1);
  tg_dtype dts[2] = {TG_F64, TG_F32};
  for (int k = 0; k < 2; k++) {
    tg_dtype dt = dts[k];
    for (int with_x = 1; with_x >= 0; with_x--) {
      tg_runtime *rt = ts_host_runtime();
      tg_tape *t = ts_tape(rt);
      void *xc = ts_convert(x, 42, dt), *wc = ts_convert(w, 6, dt), *bc = ts_convert(b, 6, dt);
      void *rc = ts_convert(R, 42, dt);
      tg_id ix = ts_input(t, dt, 2, sh, xc, with_x ? TG_REQUIRES_GRAD : 0);
      tg_id iw = ts_param(t, dt, 1, sn, wc), ib = ts_param(t, dt, 1, sn, bc), ir = ts_input(t, dt, 2, sh, rc, 0);
      tg_id loss = tg_sum(t, tg_mul(t, tg_layernorm(t, ix, iw, ib, 1e-5), ir));
      for (int sweep = 1; sweep <= 2; sweep++) {
        cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
        if (dt == TG_F64 && sweep == 1) {
          if (with_x) ts_read_grad(t, ix, gx64, 42);
          ts_read_grad(t, iw, gw64, 6);
          ts_read_grad(t, ib, gb64, 6);
          continue;
        }
        double want[42];
        if (with_x) {
          ts_read_grad(t, ix, g, 42);
          for (int i = 0; i < 42; i++)
            want[i] = sweep * gx64[i];
          TS_EXPECT_CLOSE(g, want, 42, 1e-5, 1e-4);
        }
        ts_read_grad(t, iw, g, 6);
        for (int i = 0; i < 6; i++)
          want[i] = sweep * gw64[i];
        TS_EXPECT_CLOSE(g, want, 6, 1e-5, 1e-4);
        ts_read_grad(t, ib, g, 6);
        for (int i = 0; i < 6; i++)
          want[i] = sweep * gb64[i];
        TS_EXPECT_CLOSE(g, want, 6, 1e-5, 1e-4);
      }
      free(xc);
      free(wc);
      free(bc);
      free(rc);
      tg_tape_destroy(t);
      tg_runtime_destroy(rt);
    }
  }
}

Test(layernorm, errors) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sh[2] = {2, 3}, s3[1] = {3}, s4[1] = {4}, s13[2] = {1, 3};
  float xf[6] = {0}, wf[4] = {1, 1, 1, 1};
  double wd[3] = {1, 1, 1};
  int32_t xi[6] = {0};
  float one = 1;
#define FRESH()                                                                                                        \
  tg_tape_reset(t);                                                                                                    \
  tg_id x = ts_input(t, TG_F32, 2, sh, xf, 0), w = ts_input(t, TG_F32, 1, s3, wf, 0),                                  \
        b = ts_input(t, TG_F32, 1, s3, wf, 0);                                                                         \
  (void)x, (void)w, (void)b
  {
    FRESH();
    cr_expect_eq(tg_layernorm(t, x, ts_input(t, TG_F32, 1, s4, wf, 0), b, 1e-5), TG_NO_ID);
    TS_EXPECT_STICKY(t, TG_ERR_SHAPE,
                     "tg_layernorm: argument 'w' has shape [4]; expected [n=3] (the last dim of 'x' [2, 3])");
    /* sticky: later calls do nothing */
    cr_expect_eq(tg_layernorm(t, x, w, b, 1e-5), TG_NO_ID);
    TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "argument 'w'");
  }
  {
    FRESH();
    cr_expect_eq(tg_layernorm(t, x, w, ts_input(t, TG_F32, 2, s13, wf, 0), 1e-5), TG_NO_ID);
    TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "argument 'b' has shape [1, 3]; expected [n=3]");
  }
  {
    FRESH();
    cr_expect_eq(tg_layernorm(t, x, w, ts_input(t, TG_F32, 1, s4, wf, 0), 1e-5), TG_NO_ID);
    TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "argument 'b' has shape [4]");
  }
  double bad_eps[4] = {0, -1e-5, NAN, INFINITY};
  for (int k = 0; k < 4; k++) {
    FRESH();
    cr_expect_eq(tg_layernorm(t, x, w, b, bad_eps[k]), TG_NO_ID);
    TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "argument 'eps' is");
    TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "expected a finite number > 0");
  }
  {
    FRESH();
    cr_expect_eq(tg_layernorm(t, x, ts_input(t, TG_F64, 1, s3, wd, 0), b, 1e-5), TG_NO_ID);
    TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "arguments 'x' (f32) and 'w' (f64) must have the same dtype");
  }
  {
    FRESH();
    cr_expect_eq(tg_layernorm(t, x, w, ts_input(t, TG_F64, 1, s3, wd, 0), 1e-5), TG_NO_ID);
    TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "arguments 'x' (f32) and 'b' (f64)");
  }
  {
    FRESH();
    cr_expect_eq(tg_layernorm(t, ts_input(t, TG_I32, 2, sh, xi, 0), w, b, 1e-5), TG_NO_ID);
    TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "argument 'x' has dtype i32");
  }
  {
    FRESH();
    cr_expect_eq(tg_layernorm(t, ts_input(t, TG_F32, 0, NULL, &one, 0), w, b, 1e-5), TG_NO_ID);
    TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "argument 'x' is a scalar");
  }
  const char *names[3] = {"argument 'x' is TG_NO_ID", "argument 'w' is TG_NO_ID", "argument 'b' is TG_NO_ID"};
  for (int k = 0; k < 3; k++) {
    FRESH();
    tg_id args[3] = {x, w, b};
    args[k] = TG_NO_ID;
    cr_expect_eq(tg_layernorm(t, args[0], args[1], args[2], 1e-5), TG_NO_ID);
    TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, names[k]);
  }
  {
    FRESH();
    tg_id old_w = w;
    tg_tape_reset(t);
    x = ts_input(t, TG_F32, 2, sh, xf, 0);
    b = ts_input(t, TG_F32, 1, s3, wf, 0);
    cr_expect_eq(tg_layernorm(t, x, old_w, b, 1e-5), TG_NO_ID);
    TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "argument 'w' is id");
    TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "stale");
  }
  {
    FRESH();
    tg_tape_set_provider(t, TG_PROVIDER_CUDA, NULL);
    cr_expect_eq(tg_layernorm(t, x, w, b, 1e-5), TG_NO_ID);
    TS_EXPECT_STICKY(t, TG_ERR_NO_DEVICE, "host-only");
    tg_tape_set_provider(t, TG_PROVIDER_AUTO, NULL);
  }
#undef FRESH
  cr_expect_eq(tg_layernorm(NULL, 0, 1, 2, 1e-5), TG_NO_ID);
  cr_expect(strstr(tg_last_error(), "tg_layernorm: argument 'tape' is NULL") != NULL, "%s", tg_last_error());
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* ---- CUDA provider against the host f64 reference (skips without a GPU) */

static tg_id cv_ln(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_layernorm(t, in[0], in[1], in[2], 1e-5);
}

/* x [rows, n] uniform in [lo, hi) (multiples of 1/16 when quantize: exact in f32 near 1e3). */
static void cuda_case(int64_t rows, int64_t n, double lo, double hi, int quantize, tg_dtype dt, double tol) {
  int64_t sh[2] = {rows, n};
  size_t cnt = (size_t)(rows * n);
  double *x = malloc(cnt * sizeof(double)), *w = malloc((size_t)n * sizeof(double)),
         *b = malloc((size_t)n * sizeof(double));
  ts_uniform(x, cnt, (uint64_t)(rows * 7919 + n), lo, hi);
  if (quantize)
    for (size_t i = 0; i < cnt; i++)
      x[i] = round(x[i] * 16) / 16;
  ts_uniform(w, (size_t)n, 20, 0.5, 1.5);
  ts_uniform(b, (size_t)n, 21, -1, 1);
  tg_gradcheck_input in[3] = {ts_gc_input(TG_F64, 2, sh, x), ts_gc_input(TG_F64, 1, &sh[1], w),
                              ts_gc_input(TG_F64, 1, &sh[1], b)};
  ts_check_cuda_vs_host(cv_ln, NULL, 3, in, dt, TG_PROVIDER_CUDA, tol);
  free(x);
  free(w);
  free(b);
}

Test(layernorm_cuda, matches_host_odd_sizes) {
  /* 64, 384, 1000: the register-cached vector kernels (2, 4 and 8 vectors per lane) */
  int64_t ns[6] = {1, 5, 129, 1000, 64, 384};
  for (int k = 0; k < 6; k++) {
    /* dx = rstd (g - mean(g) - xhat mean(g xhat)) cancels: f32 rounding of the two means is
     * amplified relative to the small result (measured 2.1e-5 on the H200 for these rows) */
    cuda_case(37, ns[k], -3, 3, 0, TG_F32, 5e-5);
    cuda_case(37, ns[k], -3, 3, 0, TG_BF16, 2e-2);
    cuda_case(37, ns[k], -3, 3, 0, TG_F16, 2e-2);
  }
}

Test(layernorm_cuda, matches_host_long_rows_and_many_rows) {
  cuda_case(5, 8192, -3, 3, 0, TG_F32, 1e-5); /* block per row */
  cuda_case(3, 3001, -3, 3, 0, TG_BF16, 2e-2);
  cuda_case(70001, 3, -3, 3, 0, TG_F32, 1e-5); /* ~1000 row chunks in the dw / db reduction */
  cuda_case(1200, 1000, -3, 3, 0, TG_F32, 1e-5);
}

Test(layernorm_cuda, large_magnitudes) {
  /* rows near 1e3 with a spread of a few units: f32 keeps the mean to ~6e-5 there */
  cuda_case(37, 129, 995, 1005, 1, TG_F32, 1e-4);
  cuda_case(37, 1000, -1000, 1000, 1, TG_F32, 1e-5);
}

Test(layernorm_cuda, rejects_f64_and_saves_on_device) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  tg_tape *t = ts_tape(rt);
  int64_t sh[2] = {4, 3}, sn[1] = {3};
  double xd[12] = {0}, wd[3] = {1, 1, 1};
  float xf[12], wf[3] = {1, 1, 1};
  for (int i = 0; i < 12; i++)
    xf[i] = (float)i;
  tg_tape_set_provider(t, TG_PROVIDER_CUDA, NULL);
  cr_expect_eq(tg_layernorm(t, ts_input(t, TG_F64, 2, sh, xd, 0), ts_input(t, TG_F64, 1, sn, wd, 0),
                            ts_input(t, TG_F64, 1, sn, wd, 0), 1e-5),
               TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "f64 is computed on the HOST provider");
  tg_tape_reset(t);
  tg_id y = tg_layernorm(t, ts_input(t, TG_F32, 2, sh, xf, TG_REQUIRES_GRAD), ts_input(t, TG_F32, 1, sn, wf, 0),
                         ts_input(t, TG_F32, 1, sn, wf, 0), 1e-5);
  cr_expect_neq(y, TG_NO_ID, "%s", tg_tape_error(t));
  size_t saved = 0;
  tg_tape_stats(t, NULL, &saved);
  cr_expect_eq(saved, 4 * 2 * sizeof(float));
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}
