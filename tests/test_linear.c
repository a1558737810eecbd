/* linear and matmul: forward against naive triple loops in double written here, backward values
 * against the closed forms, gradcheck in f64, error paths, CUDA vs host. */
#define _POSIX_C_SOURCE 200809L /* setenv: switch the CUDA fallbacks on in one test */
#include <math.h>
#include <stdlib.h>

#include "support.h"

/* ---- independent references (double, naive loops) */

/* y[r, j] = sum_k x[r, k] w[k, j] (+ b[j]) */
static void ref_linear(const double *x, const double *w, const double *b, double *y, int64_t rows, int64_t in,
                       int64_t out) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < out; j++) {
      double s = b ? b[j] : 0;
      for (int64_t k = 0; k < in; k++)
        s += x[r * in + k] * w[k * out + j];
      y[r * out + j] = s;
    }
}

static void ref_matmul(const double *a, const double *b, double *y, int64_t batch, int64_t M, int64_t K, int64_t N,
                       int shared) {
  for (int64_t i = 0; i < batch; i++)
    ref_linear(a + i * M * K, b + (shared ? 0 : i * K * N), NULL, y + i * M * N, M, K, N);
}

/* Rounds to f32 so the reference sees exactly the inputs an f32 run sees. */
static void round_f32(double *x, size_t n) {
  for (size_t i = 0; i < n; i++)
    x[i] = (float)x[i];
}

static tg_id input_as(tg_tape *t, tg_dtype dt, int ndim, const int64_t *shape, const double *x, size_t n,
                      unsigned flags) {
  void *c = ts_convert(x, n, dt);
  tg_id id = ts_input(t, dt, ndim, shape, c, flags);
  free(c);
  return id;
}

static tg_id param_as(tg_tape *t, tg_dtype dt, int ndim, const int64_t *shape, const double *x, size_t n) {
  void *c = ts_convert(x, n, dt);
  tg_id id = ts_param(t, dt, ndim, shape, c);
  free(c);
  return id;
}

/* ---- forward */

static void check_linear_forward(tg_dtype dt, int xdim, const int64_t *xs, int64_t in, int64_t out, int bias) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t rows = 1;
  for (int i = 0; i < xdim - 1; i++)
    rows *= xs[i];
  size_t nx = (size_t)(rows * in), nw = (size_t)(in * out), ny = (size_t)(rows * out);
  double *x = malloc(nx * sizeof *x), *w = malloc(nw * sizeof *w), b[512], *y = malloc(ny * sizeof *y),
         *want = malloc(ny * sizeof *want);
  cr_assert(out <= 512);
  ts_uniform(x, nx, 1, -1, 1);
  ts_uniform(w, nw, 2, -1, 1);
  ts_uniform(b, (size_t)out, 3, -1, 1);
  if (dt == TG_F32) {
    round_f32(x, nx);
    round_f32(w, nw);
    round_f32(b, (size_t)out);
  }
  int64_t ws[2] = {in, out}, bs[1] = {out};
  tg_id ix = input_as(t, dt, xdim, xs, x, nx, 0), iw = input_as(t, dt, 2, ws, w, nw, 0);
  tg_id ib = bias ? input_as(t, dt, 1, bs, b, (size_t)out, 0) : TG_ABSENT;
  tg_id iy = tg_linear(t, ix, iw, ib);
  cr_assert_eq(tg_tape_status(t), TG_OK, "%s", tg_tape_error(t));
  int ndim;
  int64_t shape[TG_MAX_DIMS];
  tg_tape_shape(t, iy, &ndim, shape, TG_MAX_DIMS);
  cr_expect_eq(ndim, xdim);
  for (int i = 0; i < xdim - 1; i++)
    cr_expect_eq(shape[i], xs[i]);
  cr_expect_eq(shape[xdim - 1], out);
  ts_read(t, iy, y, (int64_t)ny);
  ref_linear(x, w, bias ? b : NULL, want, rows, in, out);
  double tol = dt == TG_F32 ? 2e-6 * sqrt((double)in) : 1e-13;
  TS_EXPECT_CLOSE(y, want, ny, tol, tol);
  free(x);
  free(w);
  free(y);
  free(want);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(linear, forward_small) {
  int64_t xs[3] = {2, 3, 5}, x1[1] = {5};
  for (int dt = TG_F32; dt <= TG_F64; dt++) {
    check_linear_forward((tg_dtype)dt, 3, xs, 5, 4, 1);
    check_linear_forward((tg_dtype)dt, 3, xs, 5, 4, 0);
    check_linear_forward((tg_dtype)dt, 1, x1, 5, 7, 1); /* 1-D x: one row */
  }
}

Test(linear, forward_exact_values) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  float x[4] = {1, 2, 3, 4}, w[6] = {1, 0, -1, 2, 1, 0}, b[3] = {10, 20, 30};
  int64_t xs[2] = {2, 2}, ws[2] = {2, 3}, bs[1] = {3};
  tg_id y = tg_linear(t, ts_input(t, TG_F32, 2, xs, x, 0), ts_input(t, TG_F32, 2, ws, w, 0),
                      ts_input(t, TG_F32, 1, bs, b, 0));
  /* [1 2; 3 4] · [1 0 -1; 2 1 0] = [5 2 -1; 11 4 -3] */
  double got[6], want[6] = {15, 22, 29, 21, 24, 27};
  ts_read(t, y, got, 6);
  TS_EXPECT_CLOSE(got, want, 6, 0, 0);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* Sizes that cross the host kernel's K blocks (128), N panels (256) and register tiles. */
Test(linear, forward_blocked_odd_sizes) {
  int64_t xs[2] = {67, 300};
  for (int dt = TG_F32; dt <= TG_F64; dt++)
    check_linear_forward((tg_dtype)dt, 2, xs, 300, 270, 1);
  int64_t xs2[3] = {3, 5, 129};
  for (int dt = TG_F32; dt <= TG_F64; dt++)
    check_linear_forward((tg_dtype)dt, 3, xs2, 129, 9, 0);
}

static void check_matmul_forward(tg_dtype dt, int nd, const int64_t *as, int bnd, const int64_t *bs) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t M = as[nd - 2], K = as[nd - 1], N = bs[bnd - 1], batch = 1;
  for (int i = 0; i < nd - 2; i++)
    batch *= as[i];
  int shared = bnd == 2;
  size_t na = (size_t)(batch * M * K), nb = (size_t)((shared ? 1 : batch) * K * N), ny = (size_t)(batch * M * N);
  double *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *y = malloc(ny * sizeof *y),
         *want = malloc(ny * sizeof *want);
  ts_uniform(a, na, 4, -1, 1);
  ts_uniform(b, nb, 5, -1, 1);
  if (dt == TG_F32) {
    round_f32(a, na);
    round_f32(b, nb);
  }
  tg_id iy = tg_matmul(t, input_as(t, dt, nd, as, a, na, 0), input_as(t, dt, bnd, bs, b, nb, 0));
  cr_assert_eq(tg_tape_status(t), TG_OK, "%s", tg_tape_error(t));
  int ndim;
  int64_t shape[TG_MAX_DIMS];
  tg_tape_shape(t, iy, &ndim, shape, TG_MAX_DIMS);
  cr_expect_eq(ndim, nd);
  for (int i = 0; i < nd - 1; i++)
    cr_expect_eq(shape[i], as[i]);
  cr_expect_eq(shape[nd - 1], N);
  ts_read(t, iy, y, (int64_t)ny);
  ref_matmul(a, b, want, batch, M, K, N, shared);
  double tol = dt == TG_F32 ? 2e-6 * sqrt((double)K) : 1e-13;
  TS_EXPECT_CLOSE(y, want, ny, tol, tol);
  free(a);
  free(b);
  free(y);
  free(want);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(matmul, forward) {
  int64_t a4[4] = {2, 3, 4, 5}, b4[4] = {2, 3, 5, 6}, b2[2] = {5, 6}, a2[2] = {7, 5};
  int64_t a3[3] = {3, 9, 131}, b3[3] = {3, 131, 13};
  for (int dt = TG_F32; dt <= TG_F64; dt++) {
    check_matmul_forward((tg_dtype)dt, 4, a4, 4, b4); /* per-batch b */
    check_matmul_forward((tg_dtype)dt, 4, a4, 2, b2); /* shared b */
    check_matmul_forward((tg_dtype)dt, 2, a2, 2, b2); /* plain 2-D */
    check_matmul_forward((tg_dtype)dt, 3, a3, 3, b3);
  }
}

/* ---- backward values: loss = sum(y * R) gives dy = R, so
 *   dx = R·Wᵀ, dW = xᵀ·R, db = column sums of R; x without TG_REQUIRES_GRAD gets nothing. */
Test(linear, backward_values_f32) {
  enum { ROWS = 6, IN = 5, OUT = 4 };
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double x[ROWS * IN], w[IN * OUT], b[OUT], R[ROWS * OUT];
  ts_uniform(x, ROWS * IN, 7, -1, 1);
  ts_uniform(w, IN * OUT, 8, -1, 1);
  ts_uniform(b, OUT, 9, -1, 1);
  ts_uniform(R, ROWS * OUT, 10, -1, 1);
  round_f32(x, ROWS * IN);
  round_f32(w, IN * OUT);
  round_f32(R, ROWS * OUT);
  int64_t xs[2] = {ROWS, IN}, ws[2] = {IN, OUT}, bs[1] = {OUT}, ys[2] = {ROWS, OUT};
  for (int x_grad = 0; x_grad <= 1; x_grad++) {
    tg_id ix = input_as(t, TG_F32, 2, xs, x, ROWS * IN, x_grad ? TG_REQUIRES_GRAD : 0);
    tg_id iw = param_as(t, TG_F32, 2, ws, w, IN * OUT), ib = param_as(t, TG_F32, 1, bs, b, OUT);
    tg_id ir = input_as(t, TG_F32, 2, ys, R, ROWS * OUT, 0);
    tg_id loss = tg_sum(t, tg_mul(t, tg_linear(t, ix, iw, ib), ir));
    cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
    double gx[ROWS * IN], gw[IN * OUT], gb[OUT], wx[ROWS * IN] = {0}, ww[IN * OUT] = {0}, wb[OUT] = {0};
    for (int r = 0; r < ROWS; r++)
      for (int k = 0; k < IN; k++)
        for (int j = 0; j < OUT; j++) {
          wx[r * IN + k] += x_grad ? R[r * OUT + j] * w[k * OUT + j] : 0;
          ww[k * OUT + j] += x[r * IN + k] * R[r * OUT + j];
        }
    for (int r = 0; r < ROWS; r++)
      for (int j = 0; j < OUT; j++)
        wb[j] += R[r * OUT + j];
    ts_read_grad(t, ix, gx, ROWS * IN);
    ts_read_grad(t, iw, gw, IN * OUT);
    ts_read_grad(t, ib, gb, OUT);
    TS_EXPECT_CLOSE(gx, wx, ROWS * IN, 1e-6, 1e-5);
    TS_EXPECT_CLOSE(gw, ww, IN * OUT, 1e-6, 1e-5);
    TS_EXPECT_CLOSE(gb, wb, OUT, 1e-6, 1e-5);
    tg_tape_destroy(t);
    t = ts_tape(rt);
  }
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(linear, explain_and_no_grad) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double x[30] = {0}, w[20] = {0}, b[4] = {0};
  int64_t xs[3] = {2, 3, 5}, ws[2] = {5, 4}, bs[1] = {4};
  tg_id iw = ts_param(t, TG_F64, 2, ws, w), ib = ts_param(t, TG_F64, 1, bs, b);
  tg_linear(t, ts_input(t, TG_F64, 3, xs, x, 0), iw, ib);
  char buf[2048];
  cr_assert_eq(tg_tape_explain(t, buf, sizeof buf, NULL), TG_OK);
  cr_expect(strstr(buf, "linear") && strstr(buf, "host") && strstr(buf, "rows=6 in=5 out=4 +bias"), "%s", buf);
  tg_tape_reset(t);
  tg_tape_set_grad_enabled(t, 0, NULL);
  tg_id y = tg_linear(t, ts_input(t, TG_F64, 3, xs, x, 0), iw, ib);
  cr_expect_neq(y, TG_NO_ID, "%s", tg_tape_error(t));
  size_t nodes = 99;
  tg_tape_stats(t, &nodes, NULL);
  cr_expect_eq(nodes, 0, "no node in no-grad mode");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* ---- gradcheck (f64): loss = sum(y * y) so every gradient depends on every input */

typedef struct {
  int bias;
  int twice; /* use w twice: gradients of a shared weight must add up */
} lin_cfg;

static tg_id gc_linear(tg_tape *t, const tg_id *in, void *user) {
  const lin_cfg *c = user;
  tg_id y = tg_linear(t, in[0], in[1], c->bias ? in[2] : TG_ABSENT);
  if (c->twice) y = tg_linear(t, tg_tanh(t, y), in[1], c->bias ? in[2] : TG_ABSENT);
  return tg_sum(t, tg_mul(t, y, y));
}

Test(linear, gradcheck) {
  int64_t xs[3] = {2, 3, 4}, ws[2] = {4, 5}, bs[1] = {5}, sq[2] = {4, 4}, bq[1] = {4};
  double x[24], w[20], b[5];
  ts_uniform(x, 24, 11, -1, 1);
  ts_uniform(w, 20, 12, -1, 1);
  ts_uniform(b, 5, 13, -1, 1);
  tg_gradcheck_input in[3] = {ts_gc_input(TG_F64, 3, xs, x), ts_gc_input(TG_F64, 2, ws, w),
                              ts_gc_input(TG_F64, 1, bs, b)};
  lin_cfg with_b = {1, 0}, no_b = {0, 0};
  ts_gradcheck(gc_linear, &with_b, 3, in);
  ts_gradcheck(gc_linear, &no_b, 2, in);
  in[0].differentiable = 0; /* x without requires_grad: W and b still get theirs */
  ts_gradcheck(gc_linear, &with_b, 3, in);
  /* square weight used twice */
  tg_gradcheck_input sq_in[3] = {ts_gc_input(TG_F64, 3, (int64_t[]){2, 3, 4}, x), ts_gc_input(TG_F64, 2, sq, w),
                                 ts_gc_input(TG_F64, 1, bq, b)};
  lin_cfg twice = {1, 1};
  ts_gradcheck(gc_linear, &twice, 3, sq_in);
}

static tg_id gc_self_linear(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  tg_id y = tg_linear(t, in[0], in[0], TG_ABSENT); /* x · x: one value as both operands */
  return tg_sum(t, tg_mul(t, y, y));
}

static tg_id gc_matmul(tg_tape *t, const tg_id *in, void *user) {
  int self = user != NULL;
  tg_id y = tg_matmul(t, in[0], self ? in[0] : in[1]);
  return tg_sum(t, tg_mul(t, y, y));
}

Test(matmul, gradcheck) {
  double a[48], b[60];
  ts_uniform(a, 48, 21, -1, 1);
  ts_uniform(b, 60, 22, -1, 1);
  int64_t a3[3] = {2, 3, 4}, b3[3] = {2, 4, 5}, b2[2] = {4, 5};
  int64_t a4[4] = {2, 2, 3, 4}, b4[4] = {2, 2, 4, 3}, a2[2] = {3, 4}, s3[2] = {3, 3};
  tg_gradcheck_input batched[2] = {ts_gc_input(TG_F64, 3, a3, a), ts_gc_input(TG_F64, 3, b3, b)};
  ts_gradcheck(gc_matmul, NULL, 2, batched);
  tg_gradcheck_input shared[2] = {ts_gc_input(TG_F64, 3, a3, a), ts_gc_input(TG_F64, 2, b2, b)};
  ts_gradcheck(gc_matmul, NULL, 2, shared);
  tg_gradcheck_input four[2] = {ts_gc_input(TG_F64, 4, a4, a), ts_gc_input(TG_F64, 4, b4, b)};
  ts_gradcheck(gc_matmul, NULL, 2, four);
  tg_gradcheck_input plain[2] = {ts_gc_input(TG_F64, 2, a2, a), ts_gc_input(TG_F64, 2, b2, b)};
  ts_gradcheck(gc_matmul, NULL, 2, plain);
  shared[1].differentiable = 0; /* only a wants a gradient */
  ts_gradcheck(gc_matmul, NULL, 2, shared);
  shared[1].differentiable = 1;
  shared[0].differentiable = 0; /* only the shared b */
  ts_gradcheck(gc_matmul, NULL, 2, shared);
  tg_gradcheck_input self = ts_gc_input(TG_F64, 2, s3, a);
  ts_gradcheck(gc_matmul, &self, 1, &self);
  ts_gradcheck(gc_self_linear, NULL, 1, &self);
}

/* ---- errors */

Test(linear, errors) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double d[64] = {0};
  float f[64] = {0};
  int32_t ints[64] = {0};
  int64_t xs[2] = {2, 5}, ws[2] = {5, 4}, wbad[2] = {3, 4}, w3[3] = {1, 5, 4}, bs[1] = {4}, bbad[1] = {3};
  tg_id x, w, b;
#define FRESH()                                                                                                        \
  do {                                                                                                                 \
    tg_tape_reset(t);                                                                                                  \
    x = ts_input(t, TG_F64, 2, xs, d, 0);                                                                              \
    w = ts_input(t, TG_F64, 2, ws, d, 0);                                                                              \
    b = ts_input(t, TG_F64, 1, bs, d, 0);                                                                              \
  } while (0)
  FRESH();
  cr_expect_eq(tg_linear(t, x, ts_input(t, TG_F64, 2, wbad, d, 0), b), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE,
                   "tg_linear: argument 'w' has shape [3, 4]; expected [in=5, out] (in from 'x' [2, 5])");
  FRESH();
  cr_expect_eq(tg_linear(t, x, ts_input(t, TG_F64, 3, w3, d, 0), b), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "argument 'w' has shape [1, 5, 4]");
  FRESH();
  cr_expect_eq(tg_linear(t, x, w, ts_input(t, TG_F64, 1, bbad, d, 0)), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "tg_linear: argument 'b' has shape [3]; expected [out=4]");
  FRESH();
  cr_expect_eq(tg_linear(t, x, w, ts_input(t, TG_F64, 2, xs, d, 0)), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "argument 'b' has shape [2, 5]; expected [out=4]");
  FRESH();
  cr_expect_eq(tg_linear(t, ts_input(t, TG_F64, 0, NULL, d, 0), w, b), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "argument 'x' is a scalar");
  FRESH();
  cr_expect_eq(tg_linear(t, x, ts_input(t, TG_F32, 2, ws, f, 0), b), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "arguments 'x' (f64) and 'w' (f32) must have the same dtype");
  FRESH();
  cr_expect_eq(tg_linear(t, x, w, ts_input(t, TG_F32, 1, bs, f, 0)), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "arguments 'x' (f64) and 'b' (f32)");
  FRESH();
  cr_expect_eq(tg_linear(t, ts_input(t, TG_I32, 2, xs, ints, 0), w, b), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "tg_linear: argument 'x' has dtype i32");
  FRESH();
  cr_expect_eq(tg_linear(t, TG_NO_ID, w, b), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "argument 'x' is TG_NO_ID");
  FRESH();
  cr_expect_eq(tg_linear(t, x, TG_NO_ID, b), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "argument 'w' is TG_NO_ID");
  FRESH();
  tg_id stale = x;
  tg_tape_reset(t);
  w = ts_input(t, TG_F64, 2, ws, d, 0);
  cr_expect_eq(tg_linear(t, stale, w, TG_ABSENT), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "argument 'x' is id");
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "stale");
  FRESH();
  cr_expect_eq(tg_linear(t, x, w, b + 1000), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "argument 'b' is id");
  /* sticky: a valid call after a failure does nothing */
  cr_expect_eq(tg_linear(t, x, w, b), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "argument 'b'");
  FRESH();
  tg_tape_set_provider(t, TG_PROVIDER_CUDA, NULL);
  cr_expect_eq(tg_linear(t, x, w, b), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_NO_DEVICE, "host-only");
  tg_tape_set_provider(t, TG_PROVIDER_AUTO, NULL);
  cr_expect_eq(tg_linear(NULL, x, w, b), TG_NO_ID);
  cr_expect(strstr(tg_last_error(), "tg_linear: argument 'tape' is NULL") != NULL);
#undef FRESH
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(matmul, errors) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double d[128] = {0};
  float f[128] = {0};
  int32_t ints[128] = {0};
  int64_t a3[3] = {2, 3, 4}, b3[3] = {2, 4, 5}, bk[3] = {2, 3, 5}, bbatch[3] = {3, 4, 5}, b2[2] = {4, 5};
  int64_t v4[1] = {4}, b4[4] = {1, 2, 4, 5}, a2[2] = {3, 4};
  tg_id a = ts_input(t, TG_F64, 3, a3, d, 0);
  cr_expect_eq(tg_matmul(t, a, ts_input(t, TG_F64, 3, bk, d, 0)), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE,
                   "tg_matmul: argument 'b' has shape [2, 3, 5]; expected [..., K=4, N] (K from 'a' [2, 3, 4])");
  tg_tape_reset(t);
  a = ts_input(t, TG_F64, 3, a3, d, 0);
  cr_expect_eq(tg_matmul(t, a, ts_input(t, TG_F64, 3, bbatch, d, 0)), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "arguments 'a' [2, 3, 4] and 'b' [3, 4, 5] have different batch dims");
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "batch dims [2] of 'a'");
  tg_tape_reset(t);
  a = ts_input(t, TG_F64, 3, a3, d, 0);
  cr_expect_eq(tg_matmul(t, a, ts_input(t, TG_F64, 4, b4, d, 0)), TG_NO_ID); /* more batch dims in b */
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "different batch dims");
  tg_tape_reset(t);
  cr_expect_eq(tg_matmul(t, ts_input(t, TG_F64, 2, a2, d, 0), ts_input(t, TG_F64, 3, b3, d, 0)), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "different batch dims"); /* a 2-D, b batched: not broadcast */
  tg_tape_reset(t);
  cr_expect_eq(tg_matmul(t, ts_input(t, TG_F64, 1, v4, d, 0), ts_input(t, TG_F64, 2, b2, d, 0)), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "argument 'a' has shape [4]; expected at least 2 dims [..., M, K]");
  tg_tape_reset(t);
  a = ts_input(t, TG_F64, 3, a3, d, 0);
  cr_expect_eq(tg_matmul(t, a, ts_input(t, TG_F64, 1, v4, d, 0)), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "argument 'b' has shape [4]; expected at least 2 dims [..., K, N]");
  tg_tape_reset(t);
  a = ts_input(t, TG_F64, 3, a3, d, 0);
  cr_expect_eq(tg_matmul(t, a, ts_input(t, TG_F32, 2, b2, f, 0)), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "arguments 'a' (f64) and 'b' (f32) must have the same dtype");
  tg_tape_reset(t);
  cr_expect_eq(tg_matmul(t, ts_input(t, TG_I32, 3, a3, ints, 0), ts_input(t, TG_F64, 2, b2, d, 0)), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "tg_matmul: argument 'a' has dtype i32");
  tg_tape_reset(t);
  a = ts_input(t, TG_F64, 3, a3, d, 0);
  cr_expect_eq(tg_matmul(t, a, TG_NO_ID), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "argument 'b' is TG_NO_ID");
  tg_tape_reset(t);
  cr_expect_eq(tg_matmul(t, a, a), TG_NO_ID); /* a was dropped by the reset */
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "stale");
  tg_tape_reset(t);
  cr_expect_eq(tg_matmul(NULL, a, a), TG_NO_ID);
  cr_expect(strstr(tg_last_error(), "tg_matmul: argument 'tape' is NULL") != NULL);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* ---- CUDA provider against the host f64 reference (skips without a GPU) */

static tg_id cv_linear(tg_tape *t, const tg_id *in, void *user) {
  int bias = *(const int *)user;
  return tg_linear(t, in[0], in[1], bias ? in[2] : TG_ABSENT);
}
static tg_id cv_matmul(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_matmul(t, in[0], in[1]);
}

static double *uniform_new(size_t n, uint64_t seed) {
  double *x = malloc(n * sizeof *x);
  ts_uniform(x, n, seed, -1, 1);
  return x;
}

Test(linear_cuda, matches_host_odd_sizes) {
  int64_t xs[3] = {3, 37, 53}, ws[2] = {53, 29}, bs[1] = {29};
  double *x = uniform_new(3 * 37 * 53, 31), *w = uniform_new(53 * 29, 32), *b = uniform_new(29, 33);
  tg_gradcheck_input in[3] = {ts_gc_input(TG_F64, 3, xs, x), ts_gc_input(TG_F64, 2, ws, w),
                              ts_gc_input(TG_F64, 1, bs, b)};
  int with_b = 1, no_b = 0;
  ts_check_cuda_vs_host(cv_linear, &with_b, 3, in, TG_F32, TG_PROVIDER_CUDA, 1e-5);
  ts_check_cuda_vs_host(cv_linear, &with_b, 3, in, TG_BF16, TG_PROVIDER_CUDA, 2e-2);
  ts_check_cuda_vs_host(cv_linear, &with_b, 3, in, TG_F16, TG_PROVIDER_CUDA, 2e-2);
  ts_check_cuda_vs_host(cv_linear, &no_b, 2, in, TG_F32, TG_PROVIDER_CUDA, 1e-5);
  /* many rows: the bias gradient runs over several row chunks */
  int64_t xl[2] = {1000, 53};
  double *xlong = uniform_new(1000 * 53, 34);
  tg_gradcheck_input inl[3] = {ts_gc_input(TG_F64, 2, xl, xlong), in[1], in[2]};
  ts_check_cuda_vs_host(cv_linear, &with_b, 3, inl, TG_F32, TG_PROVIDER_CUDA, 1e-5);
  ts_check_cuda_vs_host(cv_linear, &with_b, 3, inl, TG_BF16, TG_PROVIDER_CUDA, 2e-2);
  free(x);
  free(w);
  free(b);
  free(xlong);
}

Test(matmul_cuda, matches_host_odd_sizes) {
  int64_t a4[4] = {2, 3, 37, 53}, b4[4] = {2, 3, 53, 29}, b2[2] = {53, 29};
  double *a = uniform_new(6 * 37 * 53, 41), *b = uniform_new(6 * 53 * 29, 42);
  tg_gradcheck_input batched[2] = {ts_gc_input(TG_F64, 4, a4, a), ts_gc_input(TG_F64, 4, b4, b)};
  tg_gradcheck_input shared[2] = {ts_gc_input(TG_F64, 4, a4, a), ts_gc_input(TG_F64, 2, b2, b)};
  tg_dtype dts[3] = {TG_F32, TG_BF16, TG_F16};
  double tols[3] = {1e-5, 2e-2, 2e-2};
  for (int k = 0; k < 3; k++) {
    ts_check_cuda_vs_host(cv_matmul, NULL, 2, batched, dts[k], TG_PROVIDER_CUDA, tols[k]);
    ts_check_cuda_vs_host(cv_matmul, NULL, 2, shared, dts[k], TG_PROVIDER_CUDA, tols[k]);
  }
  free(a);
  free(b);
}

Test(linear_cuda, errors) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  tg_tape *t = ts_tape(rt);
  double d[20] = {0};
  int64_t xs[2] = {5, 4}, ws[2] = {4, 5};
  tg_tape_set_provider(t, TG_PROVIDER_CUDA, NULL);
  tg_id x = ts_input(t, TG_F64, 2, xs, d, 0), w = ts_input(t, TG_F64, 2, ws, d, 0);
  cr_expect_eq(tg_linear(t, x, w, TG_ABSENT), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "f64 is computed on the HOST provider");
  tg_tape_reset(t);
  x = ts_input(t, TG_F64, 2, xs, d, 0);
  w = ts_input(t, TG_F64, 2, ws, d, 0);
  cr_expect_eq(tg_matmul(t, x, w), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "provider cuda");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* ---- CUDA gradient paths: a gradient buffer that does not exist yet is overwritten (GEMM beta = 0,
 * the bias-gradient epilogue or an overwriting column sum), one that exists is added to (beta = 1).
 * Graphs where a leaf feeds two nodes, a second backward (leaves accumulate) and zero_grad (leaves
 * are overwritten again, their old values must not leak in) run on CUDA and on the host in f64. */

enum { L_X, L_W, L_B, L_X2W2, L_B2, L_N };

typedef struct {
  int mode; /* 0: w, b in two nodes (x, x2); 1: x in two nodes (w, b and w2, b2); 2: linear(tanh(linear)) */
  int x_grad, w_grad, b_grad;
  int64_t rows, in, out; /* mode 2: in == out */
} lin2_cfg;

/* Reads a value or gradient of any float dtype as doubles (malloc'd). */
static double *read_as_f64(tg_tape *t, tg_id id, int grad, int64_t n) {
  tg_dtype dt;
  cr_assert_eq(tg_tape_dtype(t, id, &dt), TG_OK);
  size_t bytes = (size_t)n * tg_dtype_size(dt);
  void *raw = malloc(bytes);
  double *out = malloc((size_t)n * sizeof *out);
  tg_status s = grad ? tg_tape_read_grad(t, id, raw, bytes) : tg_tape_read(t, id, raw, bytes);
  cr_assert_eq(s, TG_OK, "%s", tg_tape_error(t));
  for (int64_t i = 0; i < n; i++)
    out[i] = dt == TG_F32    ? ((float *)raw)[i]
             : dt == TG_F64  ? ((double *)raw)[i]
             : dt == TG_BF16 ? ts_bf16_to_f32(((uint16_t *)raw)[i])
                             : ts_f16_to_f32(((uint16_t *)raw)[i]);
  free(raw);
  return out;
}

typedef struct {
  double *y, *g2[L_N], *g1[L_N]; /* y; leaf gradients after two backward passes, after zero_grad + one */
} lin2_out;

static void lin2_run(tg_runtime *rt, tg_provider prov, tg_dtype dt, const lin2_cfg *c, double *const *data,
                     const int64_t *numel, lin2_out *o) {
  tg_tape *t = ts_tape(rt);
  tg_tape_set_provider(t, prov, NULL);
  int64_t xs[2] = {c->rows, c->in}, ws[2] = {c->in, c->out}, bs[1] = {c->out}, ys[2] = {c->rows, c->out};
  const int64_t *shapes[L_N] = {xs, ws, bs, c->mode == 0 ? xs : ws, bs};
  int ndims[L_N] = {2, 2, 1, 2, 1},
      wants[L_N] = {c->x_grad, c->w_grad, c->b_grad, c->mode ? c->w_grad : c->x_grad, c->b_grad};
  int used = c->mode == 0 ? 4 : c->mode == 1 ? 5 : 3;
  tg_id id[L_N];
  for (int i = 0; i < used; i++)
    id[i] = input_as(t, dt, ndims[i], shapes[i], data[i], (size_t)numel[i], wants[i] ? TG_REQUIRES_GRAD : 0);
  tg_id y;
  if (c->mode == 0)
    y = tg_add(t, tg_linear(t, id[L_X], id[L_W], id[L_B]), tg_linear(t, id[L_X2W2], id[L_W], id[L_B]));
  else if (c->mode == 1)
    y = tg_add(t, tg_linear(t, id[L_X], id[L_W], id[L_B]), tg_linear(t, id[L_X], id[L_X2W2], id[L_B2]));
  else
    y = tg_linear(t, tg_tanh(t, tg_linear(t, id[L_X], id[L_W], id[L_B])), id[L_W], id[L_B]);
  int64_t ny = c->rows * c->out;
  tg_id r = input_as(t, dt, 2, ys, data[L_N], (size_t)ny, 0);
  tg_id loss = tg_sum(t, tg_mul(t, y, r));
  cr_assert_eq(tg_tape_status(t), TG_OK, "%s", tg_tape_error(t));
  o->y = read_as_f64(t, y, 0, ny);
  for (int pass = 0; pass < 2; pass++) {
    cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
    if (pass == 0) cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t)); /* leaves add up */
    for (int i = 0; i < used; i++)
      (pass ? o->g1 : o->g2)[i] = wants[i] ? read_as_f64(t, id[i], 1, numel[i]) : NULL;
    if (pass == 0) cr_assert_eq(tg_tape_zero_grad(t), TG_OK);
  }
  tg_tape_destroy(t);
}

static void lin2_free(lin2_out *o) {
  free(o->y);
  for (int i = 0; i < L_N; i++) {
    free(o->g1[i]);
    free(o->g2[i]);
  }
}

static void lin2_check(tg_runtime *crt, tg_runtime *hrt, const lin2_cfg *c, tg_dtype dt, double tol) {
  int64_t numel[L_N + 1] = {c->rows * c->in, c->in * c->out,  c->out, c->mode == 0 ? c->rows * c->in : c->in * c->out,
                            c->out,          c->rows * c->out};
  double *data[L_N + 1];
  for (int i = 0; i <= L_N; i++) {
    data[i] = uniform_new((size_t)numel[i], 100 + (uint64_t)i);
    if (i == L_W || i == L_X2W2) /* weights ~ 1/sqrt(in): tanh stays out of saturation */
      for (int64_t k = 0; k < numel[i]; k++)
        data[i][k] /= sqrt((double)c->in);
  }
  lin2_out h = {0}, d = {0};
  lin2_run(hrt, TG_PROVIDER_HOST, TG_F64, c, data, numel, &h);
  lin2_run(crt, TG_PROVIDER_CUDA, dt, c, data, numel, &d);
  double e = ts_rel_l2(d.y, h.y, (size_t)numel[L_N]);
  cr_expect(e <= tol, "%s mode %d forward: rel L2 %.3g > %.3g", tg_dtype_name(dt), c->mode, e, tol);
  for (int i = 0; i < L_N; i++) {
    if (!h.g1[i]) continue;
    double e2 = ts_rel_l2(d.g2[i], h.g2[i], (size_t)numel[i]), e1 = ts_rel_l2(d.g1[i], h.g1[i], (size_t)numel[i]);
    cr_expect(e2 <= tol && e1 <= tol,
              "%s mode %d (x %d w %d b %d, %lldx%lldx%lld) leaf %d: rel L2 %.3g after two passes, %.3g after "
              "zero_grad (tol %.3g)",
              tg_dtype_name(dt), c->mode, c->x_grad, c->w_grad, c->b_grad, (long long)c->rows, (long long)c->in,
              (long long)c->out, i, e2, e1, tol);
  }
  lin2_free(&h);
  lin2_free(&d);
  for (int i = 0; i <= L_N; i++)
    free(data[i]);
}

/* Every mode, aligned and odd sizes, and the leaf subsets that change which outputs the backward
 * launcher writes (bias without weight gradient: the column sum overwrites; no x gradient). */
static void lin2_all(tg_dtype dt, double tol) {
  static const int flags[4][3] = {{1, 1, 1}, {0, 0, 1}, {0, 1, 1}, {1, 1, 0}};
  static const int64_t sizes[2][3] = {{300, 64, 40}, {77, 53, 29}};
  tg_runtime *crt = ts_cuda_runtime_or_skip(), *hrt = ts_host_runtime();
  for (int mode = 0; mode < 3; mode++)
    for (int s = 0; s < 2; s++)
      for (int f = 0; f < 4; f++) {
        lin2_cfg c = {mode, flags[f][0], flags[f][1], flags[f][2], sizes[s][0], sizes[s][1], sizes[s][2]};
        if (mode == 2) c.in = c.out;
        lin2_check(crt, hrt, &c, dt, tol);
      }
  tg_runtime_destroy(crt);
  tg_runtime_destroy(hrt);
}

Test(linear_cuda, fresh_and_accumulated_gradients) {
  lin2_all(TG_F32, 1e-5);
  lin2_all(TG_BF16, 2e-2);
  lin2_all(TG_F16, 2e-2);
}

/* The same with the bias gradient fused into the weight-gradient GEMM whenever cuBLASLt can (by
 * default only large outputs take it), with cuBLASLt switched off (cublasGemmEx, bias broadcast,
 * column sums), and with only the fusion switched off. */
Test(linear_cuda, bias_gradient_epilogue) {
  setenv("TIGA_LINEAR_BGRAD", "2", 1);
  lin2_all(TG_F32, 1e-5);
  lin2_all(TG_BF16, 2e-2);
  lin2_all(TG_F16, 2e-2);
  unsetenv("TIGA_LINEAR_BGRAD");
}

/* Tall-and-skinny f32 products (cuda/linear_tall.cu: at least 8192 rows, K and N multiples of 4,
 * K * N <= 1024): every mode and leaf subset, fresh and accumulated gradients, odd row counts (not a
 * multiple of a block's rows), on the tall kernels (at K 4 or 8 the forward on a resident grid,
 * k_tall_ab_k, and the backward in one pass, k_tall_bwd, where N / 4 is a power of two from K to 32:
 * the last three sizes), again on the first forms (TIGA_TALL_AB=0, TIGA_TALL_BWD=0: k_tall_ab, and
 * k_tall_ab + k_tall_atb + a column sum) and on cuBLAS (TIGA_LINEAR_TALL=0). */
Test(linear_cuda, tall_skinny_products) {
  static const int flags[4][3] = {{1, 1, 1}, {0, 0, 1}, {0, 1, 1}, {1, 1, 0}};
  static const int64_t sizes[6][3] = {{20011, 8, 16}, {8192, 16, 8},  {9001, 4, 4},
                                      {12007, 8, 64}, {8193, 8, 128}, {10007, 4, 16}};
  /* TIGA_TALL_TEST_QUICK=1 (racecheck): the tall kernels in mode 0 on three sizes, separate kernels
   * and k_tall_bwd at K 4 and 8 */
  static const int quick_sizes[3] = {2, 5, 4};
  const char *qe = getenv("TIGA_TALL_TEST_QUICK");
  const int quick = qe && *qe == '1';
  tg_runtime *crt = ts_cuda_runtime_or_skip(), *hrt = ts_host_runtime();
  for (int off = 0; off < 3 - 2 * quick; off++) {
    if (off == 1) setenv("TIGA_TALL_BWD", "0", 1), setenv("TIGA_TALL_AB", "0", 1);
    if (off == 2) setenv("TIGA_LINEAR_TALL", "0", 1);
    for (int mode = 0; mode < 3 - 2 * quick; mode++)
      for (int zi = 0; zi < (quick ? 3 : 6); zi++)
        for (int f = 0; f < 4; f++) {
          const int sz = quick ? quick_sizes[zi] : zi;
          lin2_cfg c = {mode, flags[f][0], flags[f][1], flags[f][2], sizes[sz][0], sizes[sz][1], sizes[sz][2]};
          if (mode == 2) c.in = c.out;
          lin2_check(crt, hrt, &c, TG_F32, 1e-5);
        }
    unsetenv("TIGA_TALL_BWD");
    unsetenv("TIGA_TALL_AB");
    unsetenv("TIGA_LINEAR_TALL");
  }
  tg_runtime_destroy(crt);
  tg_runtime_destroy(hrt);
}

Test(linear_cuda, fallback_paths) {
  setenv("TIGA_LINEAR_LT", "0", 1);
  lin2_all(TG_F32, 1e-5);
  lin2_all(TG_BF16, 2e-2);
  unsetenv("TIGA_LINEAR_LT");
  setenv("TIGA_LINEAR_BGRAD", "0", 1);
  lin2_all(TG_BF16, 2e-2);
  unsetenv("TIGA_LINEAR_BGRAD");
}

static tg_id cv_self(tg_tape *t, const tg_id *in, void *user) {
  return user ? tg_matmul(t, in[0], in[0]) : tg_linear(t, in[0], in[0], TG_ABSENT);
}

/* One value as both operands: its gradient is overwritten by the first product and added to by the
 * second. */
Test(linear_cuda, same_value_as_both_operands) {
  int64_t sq[2] = {37, 37}, bsq[4] = {2, 3, 37, 37};
  double *a = uniform_new(6 * 37 * 37, 51);
  tg_gradcheck_input lin = ts_gc_input(TG_F64, 2, sq, a), mm = ts_gc_input(TG_F64, 4, bsq, a);
  ts_check_cuda_vs_host(cv_self, NULL, 1, &lin, TG_F32, TG_PROVIDER_CUDA, 1e-5);
  ts_check_cuda_vs_host(cv_self, NULL, 1, &lin, TG_BF16, TG_PROVIDER_CUDA, 2e-2);
  ts_check_cuda_vs_host(cv_self, &lin, 1, &mm, TG_F32, TG_PROVIDER_CUDA, 1e-5);
  ts_check_cuda_vs_host(cv_self, &lin, 1, &mm, TG_BF16, TG_PROVIDER_CUDA, 2e-2);
  free(a);
}

static tg_id cv_reduce(tg_tape *t, const tg_id *in, void *user) { return user ? tg_mean(t, in[0]) : tg_sum(t, in[0]); }

/* tg_sum / tg_mean on CUDA (16-byte loads and stores with a scalar tail): sizes with and without a
 * tail; the check's loss puts the sum's incoming gradient on the device, lin2 above feeds it from the
 * host seed. */
Test(linear_cuda, sum_and_mean) {
  int64_t odd[3] = {3, 37, 53}, even[2] = {64, 1000};
  double *x = uniform_new(64 * 1000, 61);
  tg_gradcheck_input in[2] = {ts_gc_input(TG_F64, 3, odd, x), ts_gc_input(TG_F64, 2, even, x)};
  int mean = 1;
  for (int k = 0; k < 2; k++) {
    ts_check_cuda_vs_host(cv_reduce, NULL, 1, &in[k], TG_F32, TG_PROVIDER_CUDA, 1e-5);
    ts_check_cuda_vs_host(cv_reduce, &mean, 1, &in[k], TG_F32, TG_PROVIDER_CUDA, 1e-5);
    ts_check_cuda_vs_host(cv_reduce, NULL, 1, &in[k], TG_BF16, TG_PROVIDER_CUDA, 2e-2);
    ts_check_cuda_vs_host(cv_reduce, &mean, 1, &in[k], TG_F16, TG_PROVIDER_CUDA, 2e-2);
  }
  free(x);
}
