/* reshape / transpose / concat / slice / split: forward values against index formulas written
 * here, gradcheck in f64, error paths, CUDA against the host reference. */
#include <stdlib.h>

#include "support.h"

static void expect_shape(tg_tape *t, tg_id id, int ndim, const int64_t *want) {
  int nd = -1;
  int64_t sh[TG_MAX_DIMS];
  cr_assert_eq(tg_tape_shape(t, id, &nd, sh, TG_MAX_DIMS), TG_OK, "%s", tg_tape_error(t));
  cr_expect_eq(nd, ndim, "ndim %d, expected %d", nd, ndim);
  for (int i = 0; i < ndim && i < nd; i++)
    cr_expect_eq(sh[i], want[i], "dim %d is %lld, expected %lld", i, (long long)sh[i], (long long)want[i]);
}

static double *iota(size_t n) {
  double *x = malloc(n * sizeof *x);
  for (size_t i = 0; i < n; i++)
    x[i] = (double)i;
  return x;
}

/* ------------------------------------------------------------ forward */

Test(shape, reshape_forward) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sx[3] = {2, 3, 4}, s46[2] = {4, -1}, w46[2] = {4, 6}, s1[1] = {1};
  double *x = iota(24), y[24];
  tg_id ix = ts_input(t, TG_F64, 3, sx, x, 0);
  tg_id iy = tg_reshape(t, ix, 2, s46);
  expect_shape(t, iy, 2, w46);
  ts_read(t, iy, y, 24);
  TS_EXPECT_CLOSE(y, x, 24, 0, 0);
  /* one element to a scalar and back */
  double one = 7.5, got;
  tg_id is = tg_reshape(t, ts_input(t, TG_F64, 1, s1, &one, 0), 0, NULL);
  expect_shape(t, is, 0, NULL);
  ts_read(t, is, &got, 1);
  cr_expect_eq(got, 7.5);
  /* integers move too */
  int32_t ids[6] = {5, 4, 3, 2, 1, 0};
  int64_t s6[1] = {6}, s23[2] = {2, 3};
  double gi[6], wi[6] = {5, 4, 3, 2, 1, 0};
  tg_id ii = tg_reshape(t, ts_input(t, TG_I32, 1, s6, ids, 0), 2, s23);
  expect_shape(t, ii, 2, s23);
  ts_read(t, ii, gi, 6);
  TS_EXPECT_CLOSE(gi, wi, 6, 0, 0);
  free(x);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(shape, transpose_forward) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sx[3] = {2, 3, 4};
  double *x = iota(24), y[24], w[24];
  tg_id ix = ts_input(t, TG_F64, 3, sx, x, 0);
  /* (0, 2): y[k][j][i] = x[i][j][k] */
  tg_id y02 = tg_transpose(t, ix, 0, 2);
  int64_t s02[3] = {4, 3, 2};
  expect_shape(t, y02, 3, s02);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 4; k++)
        w[(k * 3 + j) * 2 + i] = x[(i * 3 + j) * 4 + k];
  ts_read(t, y02, y, 24);
  TS_EXPECT_CLOSE(y, w, 24, 0, 0);
  /* (-1, -2): y[i][k][j] = x[i][j][k] */
  tg_id y12 = tg_transpose(t, ix, -1, -2);
  int64_t s12[3] = {2, 4, 3};
  expect_shape(t, y12, 3, s12);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 4; k++)
        w[(i * 4 + k) * 3 + j] = x[(i * 3 + j) * 4 + k];
  ts_read(t, y12, y, 24);
  TS_EXPECT_CLOSE(y, w, 24, 0, 0);
  /* a dim with itself: a copy */
  ts_read(t, tg_transpose(t, ix, 1, -2), y, 24);
  TS_EXPECT_CLOSE(y, x, 24, 0, 0);
  /* 4-D (1, 3) with dims before, between and after: y[a][d][c][b] = x[a][b][c][d] */
  int64_t s4[4] = {2, 3, 4, 5}, s4t[4] = {2, 5, 4, 3};
  double *x4 = iota(120), y4[120], w4[120];
  tg_id i4 = tg_transpose(t, ts_input(t, TG_F64, 4, s4, x4, 0), 3, 1);
  expect_shape(t, i4, 4, s4t);
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 3; b++)
      for (int c = 0; c < 4; c++)
        for (int d = 0; d < 5; d++)
          w4[((a * 5 + d) * 4 + c) * 3 + b] = x4[((a * 3 + b) * 4 + c) * 5 + d];
  ts_read(t, i4, y4, 120);
  TS_EXPECT_CLOSE(y4, w4, 120, 0, 0);
  cr_expect_eq(tg_tape_status(t), TG_OK, "%s", tg_tape_error(t));
  /* explain names the dims */
  char buf[4096];
  cr_expect_eq(tg_tape_explain(t, buf, sizeof buf, NULL), TG_OK);
  cr_expect(strstr(buf, "transpose") && strstr(buf, "dims=(0, 2)") && strstr(buf, "dims=(3, 1)"), "explain: %s", buf);
  free(x);
  free(x4);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(shape, concat_slice_split_forward) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  /* leading dims [2, 2], widths 2, 3, 1 */
  int64_t sa[3] = {2, 2, 2}, sb[3] = {2, 2, 3}, sc[3] = {2, 2, 1}, sy[3] = {2, 2, 6};
  float a[8], b[12], c[4];
  for (int i = 0; i < 8; i++)
    a[i] = (float)(100 + i);
  for (int i = 0; i < 12; i++)
    b[i] = (float)(200 + i);
  for (int i = 0; i < 4; i++)
    c[i] = (float)(300 + i);
  tg_id xs[3] = {ts_input(t, TG_F32, 3, sa, a, 0), ts_input(t, TG_F32, 3, sb, b, 0), ts_input(t, TG_F32, 3, sc, c, 0)};
  tg_id iy = tg_concat(t, 3, xs);
  expect_shape(t, iy, 3, sy);
  double y[24], w[24];
  for (int r = 0; r < 4; r++) {
    for (int j = 0; j < 2; j++)
      w[r * 6 + j] = a[r * 2 + j];
    for (int j = 0; j < 3; j++)
      w[r * 6 + 2 + j] = b[r * 3 + j];
    w[r * 6 + 5] = c[r];
  }
  ts_read(t, iy, y, 24);
  TS_EXPECT_CLOSE(y, w, 24, 0, 0);
  /* one value: a copy */
  double one[8], wa[8];
  for (int i = 0; i < 8; i++)
    wa[i] = a[i];
  ts_read(t, tg_concat(t, 1, xs), one, 8);
  TS_EXPECT_CLOSE(one, wa, 8, 0, 0);
  /* slice columns [1, 4) of y: a[.,1], b[.,0], b[.,1] */
  tg_id is = tg_slice(t, iy, 1, 3);
  int64_t ss[3] = {2, 2, 3};
  expect_shape(t, is, 3, ss);
  double s[12], ws[12];
  for (int r = 0; r < 4; r++)
    for (int j = 0; j < 3; j++)
      ws[r * 3 + j] = w[r * 6 + 1 + j];
  ts_read(t, is, s, 12);
  TS_EXPECT_CLOSE(s, ws, 12, 0, 0);
  /* split back into the pieces {2, 3, 1} */
  int64_t sizes[3] = {2, 3, 1};
  tg_id outs[3];
  tg_id first = tg_split(t, iy, 3, sizes, outs);
  cr_expect_eq(first, outs[0]);
  double pa[8], pb[12], pc[4], wb[12], wc[4];
  for (int i = 0; i < 12; i++)
    wb[i] = b[i];
  for (int i = 0; i < 4; i++)
    wc[i] = c[i];
  ts_read(t, outs[0], pa, 8);
  ts_read(t, outs[1], pb, 12);
  ts_read(t, outs[2], pc, 4);
  TS_EXPECT_CLOSE(pa, wa, 8, 0, 0);
  TS_EXPECT_CLOSE(pb, wb, 12, 0, 0);
  TS_EXPECT_CLOSE(pc, wc, 4, 0, 0);
  expect_shape(t, outs[2], 3, sc);
  /* integers through concat and slice */
  int32_t ia[4] = {1, 2, 3, 4}, ib[2] = {9, 8};
  int64_t s22[2] = {2, 2}, s21[2] = {2, 1};
  tg_id ixs[2] = {ts_input(t, TG_I32, 2, s22, ia, 0), ts_input(t, TG_I32, 2, s21, ib, 0)};
  double gi[6], wi[6] = {1, 2, 9, 3, 4, 8}, gs[2], wsl[2] = {2, 4};
  ts_read(t, tg_concat(t, 2, ixs), gi, 6);
  TS_EXPECT_CLOSE(gi, wi, 6, 0, 0);
  ts_read(t, tg_slice(t, ixs[0], 1, 1), gs, 2);
  TS_EXPECT_CLOSE(gs, wsl, 2, 0, 0);
  char buf[4096];
  cr_expect_eq(tg_tape_explain(t, buf, sizeof buf, NULL), TG_OK);
  cr_expect(strstr(buf, "concat") && strstr(buf, "n=3") && strstr(buf, "cols=[2, 5)"), "explain: %s", buf);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(shape, no_grad_mode_records_nothing) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  tg_tape_set_grad_enabled(t, 0, NULL);
  int64_t sx[2] = {2, 3}, sizes[2] = {1, 2};
  double x[6] = {1, 2, 3, 4, 5, 6}, y[6], w[6] = {1, 4, 2, 5, 3, 6};
  tg_id ix = ts_input(t, TG_F64, 2, sx, x, TG_REQUIRES_GRAD), outs[2];
  ts_read(t, tg_transpose(t, ix, 0, 1), y, 6);
  TS_EXPECT_CLOSE(y, w, 6, 0, 0);
  cr_expect_neq(tg_split(t, ix, 2, sizes, outs), TG_NO_ID, "%s", tg_tape_error(t));
  size_t nodes = 99;
  tg_tape_stats(t, &nodes, NULL);
  cr_expect_eq(nodes, 0);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* ------------------------------------------------------------ gradcheck
 * loss = sum(op(x) * w) with random w, so every element's gradient is distinct. */

typedef struct {
  int d0, d1;
} dims2;

static tg_id gc_transpose(tg_tape *t, const tg_id *in, void *user) {
  dims2 *d = user;
  return tg_sum(t, tg_mul(t, tg_transpose(t, in[0], d->d0, d->d1), in[1]));
}

Test(shape, gradcheck_transpose) {
  double x[120], w[120];
  ts_uniform(x, 120, 1, -1, 1);
  ts_uniform(w, 120, 2, -1, 1);
  int64_t s3[3] = {2, 3, 4}, s02[3] = {4, 3, 2}, s12[3] = {2, 4, 3}, s4[4] = {2, 3, 4, 5}, s13[4] = {2, 5, 4, 3};
  dims2 d02 = {0, 2}, dm = {-1, -2}, d13 = {1, 3}, d11 = {1, 1};
  tg_gradcheck_input a[2] = {ts_gc_input(TG_F64, 3, s3, x), ts_gc_input(TG_F64, 3, s02, w)};
  ts_gradcheck(gc_transpose, &d02, 2, a);
  tg_gradcheck_input b[2] = {ts_gc_input(TG_F64, 3, s3, x), ts_gc_input(TG_F64, 3, s12, w)};
  ts_gradcheck(gc_transpose, &dm, 2, b);
  tg_gradcheck_input c[2] = {ts_gc_input(TG_F64, 4, s4, x), ts_gc_input(TG_F64, 4, s13, w)};
  ts_gradcheck(gc_transpose, &d13, 2, c);
  tg_gradcheck_input e[2] = {ts_gc_input(TG_F64, 3, s3, x), ts_gc_input(TG_F64, 3, s3, w)};
  ts_gradcheck(gc_transpose, &d11, 2, e);
}

static tg_id gc_reshape(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  int64_t s[2] = {4, -1};
  return tg_sum(t, tg_mul(t, tg_reshape(t, in[0], 2, s), in[1]));
}

/* reshape then transpose then reshape back: a permutation of the elements */
static tg_id gc_reshape_chain(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  int64_t s[3] = {3, -1, 2}, back[2] = {2, 12};
  tg_id y = tg_reshape(t, tg_transpose(t, tg_reshape(t, in[0], 3, s), 0, 1), 2, back);
  return tg_sum(t, tg_mul(t, tg_mul(t, y, y), in[1]));
}

Test(shape, gradcheck_reshape) {
  double x[24], w[24];
  ts_uniform(x, 24, 3, -1, 1);
  ts_uniform(w, 24, 4, -1, 1);
  int64_t s3[3] = {2, 3, 4}, s46[2] = {4, 6}, s2[2] = {2, 12};
  tg_gradcheck_input a[2] = {ts_gc_input(TG_F64, 3, s3, x), ts_gc_input(TG_F64, 2, s46, w)};
  ts_gradcheck(gc_reshape, NULL, 2, a);
  tg_gradcheck_input b[2] = {ts_gc_input(TG_F64, 3, s3, x), ts_gc_input(TG_F64, 2, s2, w)};
  ts_gradcheck(gc_reshape_chain, NULL, 2, b);
}

static tg_id gc_concat3(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_sum(t, tg_mul(t, tg_concat(t, 3, in), in[3]));
}

/* the same value twice: both blocks' gradients accumulate into it */
static tg_id gc_concat_twice(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  tg_id xs[3] = {in[0], in[1], in[0]};
  return tg_sum(t, tg_mul(t, tg_concat(t, 3, xs), in[2]));
}

Test(shape, gradcheck_concat) {
  double a[8], b[12], c[4], w[24];
  ts_uniform(a, 8, 5, -1, 1);
  ts_uniform(b, 12, 6, -1, 1);
  ts_uniform(c, 4, 7, -1, 1);
  ts_uniform(w, 24, 8, -1, 1);
  int64_t sa[3] = {2, 2, 2}, sb[3] = {2, 2, 3}, sc[3] = {2, 2, 1}, sy[3] = {2, 2, 6}, s7[3] = {2, 2, 7};
  tg_gradcheck_input in[4] = {ts_gc_input(TG_F64, 3, sa, a), ts_gc_input(TG_F64, 3, sb, b),
                              ts_gc_input(TG_F64, 3, sc, c), ts_gc_input(TG_F64, 3, sy, w)};
  ts_gradcheck(gc_concat3, NULL, 4, in);
  double w7[28];
  ts_uniform(w7, 28, 9, -1, 1);
  tg_gradcheck_input in2[3] = {ts_gc_input(TG_F64, 3, sa, a), ts_gc_input(TG_F64, 3, sb, b),
                               ts_gc_input(TG_F64, 3, s7, w7)};
  ts_gradcheck(gc_concat_twice, NULL, 3, in2);
}

static tg_id gc_split(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  int64_t sizes[3] = {2, 3, 1};
  tg_id o[3];
  tg_split(t, in[0], 3, sizes, o);
  tg_id l = tg_sum(t, tg_mul(t, o[0], in[1]));
  l = tg_add(t, l, tg_sum(t, tg_mul(t, o[1], in[2])));
  return tg_add(t, l, tg_sum(t, tg_mul(t, tg_mul(t, o[2], o[2]), in[3])));
}

/* only the middle piece reaches the loss: the others' columns get zero gradient */
static tg_id gc_split_middle(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  int64_t sizes[3] = {2, 3, 1};
  tg_id o[3];
  tg_split(t, in[0], 3, sizes, o);
  return tg_sum(t, tg_mul(t, o[1], in[2]));
}

static tg_id gc_slice(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  tg_id a = tg_slice(t, in[0], 2, 3), b = tg_slice(t, in[0], 0, 3); /* overlapping columns */
  return tg_sum(t, tg_mul(t, tg_mul(t, a, b), in[2]));
}

Test(shape, gradcheck_split_slice) {
  double x[18], w0[6], w1[9], w2[3];
  ts_uniform(x, 18, 10, -1, 1);
  ts_uniform(w0, 6, 11, -1, 1);
  ts_uniform(w1, 9, 12, -1, 1);
  ts_uniform(w2, 3, 13, -1, 1);
  int64_t sx[2] = {3, 6}, s0[2] = {3, 2}, s1[2] = {3, 3}, s2[2] = {3, 1};
  tg_gradcheck_input in[4] = {ts_gc_input(TG_F64, 2, sx, x), ts_gc_input(TG_F64, 2, s0, w0),
                              ts_gc_input(TG_F64, 2, s1, w1), ts_gc_input(TG_F64, 2, s2, w2)};
  ts_gradcheck(gc_split, NULL, 4, in);
  ts_gradcheck(gc_split_middle, NULL, 4, in);
  ts_gradcheck(gc_slice, NULL, 4, in);
}

/* ------------------------------------------------------------ errors */

Test(shape, reshape_errors) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sx[3] = {2, 3, 4};
  float x[24] = {0};
  int64_t s55[2] = {5, 5}, mm[3] = {-1, 2, -1}, m5[2] = {-1, 5}, z[2] = {0, 24}, big[3] = {1LL << 40, 1LL << 40, -1};
  struct {
    int ndim;
    const int64_t *shape;
    tg_status st;
    const char *needle;
  } cases[] = {
      {2, s55, TG_ERR_SHAPE, "tg_reshape: argument 'shape' [5, 5] holds 25 elements; x [2, 3, 4] holds 24"},
      {3, mm, TG_ERR_SHAPE, "has -1 at dims 0 and 2; at most one dim may be inferred"},
      {2, m5, TG_ERR_SHAPE, "no size for the -1"},
      {2, z, TG_ERR_SHAPE, "has 0 at dim 0"},
      {3, big, TG_ERR_SHAPE, "holds more than the 24 elements"}, /* a product past int64 */
      {9, s55, TG_ERR_INVALID_ARGUMENT, "argument 'ndim' is 9"},
      {2, NULL, TG_ERR_INVALID_ARGUMENT, "argument 'shape' is NULL"},
  };
  tg_id ix = TG_NO_ID;
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    tg_tape_reset(t);
    ix = ts_input(t, TG_F32, 3, sx, x, 0);
    cr_expect_eq(tg_reshape(t, ix, cases[k].ndim, cases[k].shape), TG_NO_ID);
    TS_EXPECT_STICKY(t, cases[k].st, cases[k].needle);
  }
  tg_tape_reset(t);
  cr_expect_eq(tg_reshape(t, TG_NO_ID, 2, s55), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "argument 'x' is TG_NO_ID");
  tg_tape_reset(t);
  cr_expect_eq(tg_reshape(t, ix, 2, s55), TG_NO_ID); /* dropped by the reset */
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "stale");
  tg_tape_reset(t);
  uint16_t h[24] = {0};
  tg_id ih = ts_input(t, TG_F16, 3, sx, h, 0);
  int64_t s24[1] = {24};
  cr_expect_eq(tg_reshape(t, ih, 1, s24), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "argument 'x' has dtype f16; provider host takes f32, f64");
  tg_tape_reset(t);
  cr_expect_eq(tg_reshape(NULL, ix, 1, s24), TG_NO_ID);
  cr_expect(strstr(tg_last_error(), "argument 'tape' is NULL") != NULL);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(shape, transpose_errors) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sx[3] = {2, 3, 4};
  float x[24] = {0}, s = 1;
  tg_id ix = ts_input(t, TG_F32, 3, sx, x, 0);
  cr_expect_eq(tg_transpose(t, ix, 3, 0), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT,
                   "tg_transpose: argument 'd0' is 3; expected a dim in [-3, 2] for x [2, 3, 4]");
  tg_tape_reset(t);
  ix = ts_input(t, TG_F32, 3, sx, x, 0);
  cr_expect_eq(tg_transpose(t, ix, 0, -4), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "argument 'd1' is -4");
  tg_tape_reset(t);
  tg_id is = ts_input(t, TG_F32, 0, NULL, &s, 0);
  cr_expect_eq(tg_transpose(t, is, 0, 0), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "x is a scalar");
  tg_tape_reset(t);
  cr_expect_eq(tg_transpose(t, TG_NO_ID, 0, 1), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "argument 'x' is TG_NO_ID");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(shape, concat_errors) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t s23[2] = {2, 3}, s33[2] = {3, 3}, s3[1] = {3}, s213[3] = {2, 1, 3};
  float a[9] = {0};
  double d[6] = {0};
  tg_id xs[2] = {ts_input(t, TG_F32, 2, s23, a, 0), ts_input(t, TG_F32, 2, s33, a, 0)};
  cr_expect_eq(tg_concat(t, 2, xs), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE,
                   "tg_concat: argument 'xs[1]' has shape [3, 3]; expected the shape of 'xs[0]' [2, 3] in every dim");
  tg_tape_reset(t);
  xs[0] = ts_input(t, TG_F32, 2, s23, a, 0);
  xs[1] = ts_input(t, TG_F64, 2, s23, d, 0);
  cr_expect_eq(tg_concat(t, 2, xs), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "arguments 'xs[0]' (f32) and 'xs[1]' (f64) must have the same dtype");
  tg_tape_reset(t);
  xs[0] = ts_input(t, TG_F32, 2, s23, a, 0);
  xs[1] = ts_input(t, TG_F32, 3, s213, a, 0);
  cr_expect_eq(tg_concat(t, 2, xs), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "argument 'xs[1]' has shape [2, 1, 3]");
  tg_tape_reset(t);
  xs[0] = ts_input(t, TG_F32, 0, NULL, a, 0);
  xs[1] = ts_input(t, TG_F32, 1, s3, a, 0);
  cr_expect_eq(tg_concat(t, 2, xs), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "argument 'xs[0]' is a scalar");
  tg_tape_reset(t);
  xs[0] = ts_input(t, TG_F32, 2, s23, a, 0);
  xs[1] = TG_NO_ID;
  cr_expect_eq(tg_concat(t, 2, xs), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "argument 'xs[1]' is TG_NO_ID");
  tg_tape_reset(t);
  cr_expect_eq(tg_concat(t, 0, xs), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "argument 'n' is 0; expected at least 1 value");
  tg_tape_reset(t);
  cr_expect_eq(tg_concat(t, 2, NULL), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "argument 'xs' is NULL");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(shape, slice_errors) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t s26[2] = {2, 6};
  float x[12] = {0};
  tg_id ix = ts_input(t, TG_F32, 2, s26, x, 0);
  cr_expect_eq(tg_slice(t, ix, 4, 3), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT,
                   "tg_slice: arguments 'start' 4 and 'len' 3 do not fit x [2, 6]; expected 0 <= start, 1 <= len, "
                   "start + len <= 6");
  int64_t bad_slices[4][2] = {{-1, 2}, {0, 0}, {6, 1}, {1, INT64_MAX}};
  for (int k = 0; k < 4; k++) {
    tg_tape_reset(t);
    ix = ts_input(t, TG_F32, 2, s26, x, 0);
    cr_expect_eq(tg_slice(t, ix, bad_slices[k][0], bad_slices[k][1]), TG_NO_ID);
    TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "do not fit x [2, 6]");
  }
  tg_tape_reset(t);
  tg_id is = ts_input(t, TG_F32, 0, NULL, x, 0);
  cr_expect_eq(tg_slice(t, is, 0, 1), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "argument 'x' is a scalar");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(shape, split_errors) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t s26[2] = {2, 6};
  float x[12] = {0};
  int64_t short_sizes[2] = {2, 3}, over[3] = {4, 4, INT64_MAX}, zero[3] = {2, 0, 4}, ok[2] = {2, 4};
  struct {
    int n;
    const int64_t *sizes;
    int no_outs;
    tg_status st;
    const char *needle;
  } cases[] = {
      {2, short_sizes, 0, TG_ERR_SHAPE,
       "tg_split: argument 'sizes' (2 pieces) sums to 5; expected the last dim of x [2, 6], 6"},
      {3, over, 0, TG_ERR_SHAPE, "sums to more than 6"},
      {3, zero, 0, TG_ERR_INVALID_ARGUMENT, "argument 'sizes[1]' is 0"},
      {0, ok, 0, TG_ERR_INVALID_ARGUMENT, "argument 'n' is 0"},
      {2, ok, 1, TG_ERR_INVALID_ARGUMENT, "argument 'outs' is NULL"},
      {2, NULL, 0, TG_ERR_INVALID_ARGUMENT, "argument 'sizes' is NULL"},
  };
  /* every failure leaves all outs TG_NO_ID */
  tg_id outs[3], ix = TG_NO_ID;
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    tg_tape_reset(t);
    ix = ts_input(t, TG_F32, 2, s26, x, 0);
    outs[0] = outs[1] = outs[2] = 42;
    cr_expect_eq(tg_split(t, ix, cases[k].n, cases[k].sizes, cases[k].no_outs ? NULL : outs), TG_NO_ID);
    TS_EXPECT_STICKY(t, cases[k].st, cases[k].needle);
    for (int j = 0; j < cases[k].n && !cases[k].no_outs; j++)
      cr_expect_eq(outs[j], TG_NO_ID, "case %zu", k);
  }
  /* a tape that already holds an error: nothing runs, outs are cleared */
  tg_tape_reset(t);
  ix = ts_input(t, TG_F32, 2, s26, x, 0);
  tg_transpose(t, ix, 5, 0);
  outs[0] = outs[1] = 42;
  cr_expect_eq(tg_split(t, ix, 2, ok, outs), TG_NO_ID);
  cr_expect(outs[0] == TG_NO_ID && outs[1] == TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "tg_transpose");
  tg_tape_reset(t);
  cr_expect_eq(tg_split(t, ix, 2, ok, outs), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "stale");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* ------------------------------------------------------------ CUDA against the host (skips without a GPU) */

static tg_id cv_transpose(tg_tape *t, const tg_id *in, void *user) {
  dims2 *d = user;
  return tg_transpose(t, in[0], d->d0, d->d1);
}
static tg_id cv_reshape(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  int64_t s[2] = {-1, 13 * 37};
  return tg_reshape(t, in[0], 2, s);
}
static tg_id cv_concat(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_concat(t, 3, in);
}
static tg_id cv_slice(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_slice(t, in[0], 3, 29);
}
static tg_id cv_split(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  int64_t sizes[3] = {5, 31, 1};
  tg_id o[3];
  tg_split(t, in[0], 3, sizes, o);
  tg_id r[3] = {o[2], o[0], o[1]};
  return tg_concat(t, 3, r);
}

Test(shape_cuda, matches_host_odd_sizes) {
  int64_t s3[3] = {7, 13, 37}, s4[4] = {3, 5, 7, 9}, sm[3] = {5, 33, 65}, sz[3] = {66000, 3, 2};
  size_t n = 66000 * 6;
  double *x = malloc(n * sizeof *x);
  ts_uniform(x, n, 21, -2, 2);
  tg_dtype dts[2] = {TG_F32, TG_BF16};
  double tols[2] = {1e-6, 2e-2};
  for (int k = 0; k < 2; k++) {
    dims2 d02 = {0, 2}, dm = {-1, -2}, d13 = {1, 3}, d11 = {1, 1};
    tg_gradcheck_input a = ts_gc_input(TG_F64, 3, s3, x);
    ts_check_cuda_vs_host(cv_transpose, &d02, 1, &a, dts[k], TG_PROVIDER_CUDA, tols[k]);
    ts_check_cuda_vs_host(cv_transpose, &d11, 1, &a, dts[k], TG_PROVIDER_CUDA, tols[k]);
    ts_check_cuda_vs_host(cv_reshape, NULL, 1, &a, dts[k], TG_PROVIDER_CUDA, tols[k]);
    ts_check_cuda_vs_host(cv_slice, NULL, 1, &a, dts[k], TG_PROVIDER_CUDA, tols[k]);
    ts_check_cuda_vs_host(cv_split, NULL, 1, &a, dts[k], TG_PROVIDER_CUDA, tols[k]);
    tg_gradcheck_input m = ts_gc_input(TG_F64, 3, sm, x); /* the tiled kernel, partial tiles */
    ts_check_cuda_vs_host(cv_transpose, &dm, 1, &m, dts[k], TG_PROVIDER_CUDA, tols[k]);
    tg_gradcheck_input z = ts_gc_input(TG_F64, 3, sz, x); /* more matrices than grid.z holds */
    ts_check_cuda_vs_host(cv_transpose, &dm, 1, &z, dts[k], TG_PROVIDER_CUDA, tols[k]);
    tg_gradcheck_input f = ts_gc_input(TG_F64, 4, s4, x);
    ts_check_cuda_vs_host(cv_transpose, &d13, 1, &f, dts[k], TG_PROVIDER_CUDA, tols[k]);
    int64_t sa[3] = {7, 13, 5}, sb[3] = {7, 13, 37}, sc[3] = {7, 13, 1};
    tg_gradcheck_input c[3] = {ts_gc_input(TG_F64, 3, sa, x), ts_gc_input(TG_F64, 3, sb, x + 1000),
                               ts_gc_input(TG_F64, 3, sc, x + 5000)};
    ts_check_cuda_vs_host(cv_concat, NULL, 3, c, dts[k], TG_PROVIDER_CUDA, tols[k]);
    /* widths and offsets that are multiples of 8 elements: the vectorised column copy / add */
    int64_t va[3] = {7, 3, 16}, vb[3] = {7, 3, 8}, vc[3] = {7, 3, 24};
    tg_gradcheck_input v[3] = {ts_gc_input(TG_F64, 3, va, x), ts_gc_input(TG_F64, 3, vb, x + 1000),
                               ts_gc_input(TG_F64, 3, vc, x + 5000)};
    ts_check_cuda_vs_host(cv_concat, NULL, 3, v, dts[k], TG_PROVIDER_CUDA, tols[k]);
  }
  free(x);
}

Test(shape_cuda, integers_move_on_device) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  tg_tape *t = ts_tape(rt);
  tg_tape_set_provider(t, TG_PROVIDER_CUDA, NULL);
  int32_t v[15];
  for (int i = 0; i < 15; i++)
    v[i] = i * 7 - 20;
  int64_t s35[2] = {3, 5}, s15[1] = {15};
  tg_id ix = ts_input(t, TG_I32, 2, s35, v, 0);
  double y[15], w[15];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 5; j++)
      w[j * 3 + i] = v[i * 5 + j];
  ts_read(t, tg_reshape(t, tg_transpose(t, ix, 0, 1), 1, s15), y, 15);
  TS_EXPECT_CLOSE(y, w, 15, 0, 0);
  tg_id xs[2] = {ix, ix};
  double c[30], wc[30];
  for (int r = 0; r < 3; r++)
    for (int j = 0; j < 10; j++)
      wc[r * 10 + j] = v[r * 5 + j % 5];
  ts_read(t, tg_concat(t, 2, xs), c, 30);
  TS_EXPECT_CLOSE(c, wc, 30, 0, 0);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* ------------------------------------------------------------ reshapes of leaves share storage
 * A reshape of a parameter or input is a view: no copy, no device bytes; its gradient reaches the
 * leaf; after the leaf is rewritten, reading the view or running a backward through it is
 * TG_ERR_STATE (never the new bytes under the old name), in no-grad mode too. */

static void leaf_view_case(tg_runtime *rt, tg_provider p) {
  tg_tape *t = ts_tape(rt);
  tg_tape_set_provider(t, p, NULL);
  const bool dev = p != TG_PROVIDER_HOST;
  int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s6[1] = {6};
  float P0[6] = {1, -2, 3, -4, 5, -6}, P1[6] = {7, 8, 9, 10, 11, 12}, W[6] = {0.5f, 1, 1.5f, 2, 2.5f, 3};
  tg_id P = TG_NO_ID;
  cr_assert_eq(tg_tape_parameter(t, TG_F32, 2, s23, P0, sizeof P0, 0, &P), TG_OK, "%s", tg_tape_error(t));
  tg_id w = ts_input(t, TG_F32, 1, s6, W, 0);
  double got[6], want[6];
  if (dev) ts_read(t, tg_scale(t, P, 1.0), got, 6); /* P and w on the device before measuring */
  if (dev) ts_read(t, tg_scale(t, w, 1.0), got, 6);
  size_t before = 0, after = 0;
  tg_runtime_memory(rt, &before, NULL);
  tg_id y = tg_reshape(t, P, 2, s32), z = tg_reshape(t, y, 1, s6); /* a view of a view */
  tg_runtime_memory(rt, &after, NULL);
  cr_expect_eq(after, before, "%s: reshapes of a parameter took %zu device bytes", tg_provider_name(p), after - before);
  ts_read(t, z, got, 6);
  for (int i = 0; i < 6; i++)
    want[i] = P0[i];
  TS_EXPECT_CLOSE(got, want, 6, 0, 0);
  /* its gradient reaches the parameter: d sum(z * w) / dP = w */
  cr_assert_eq(tg_tape_backward(t, tg_sum(t, tg_mul(t, z, w))), TG_OK, "%s", tg_tape_error(t));
  ts_read_grad(t, P, got, 6);
  for (int i = 0; i < 6; i++)
    want[i] = W[i];
  TS_EXPECT_CLOSE(got, want, 6, 0, 0);
  /* the parameter rewritten: the views refuse to be read, and a backward through them */
  tg_id loss = tg_sum(t, tg_mul(t, z, w));
  cr_assert_eq(tg_tape_write(t, P, P1, sizeof P1), TG_OK, "%s", tg_tape_error(t));
  float buf[6];
  cr_expect_eq(tg_tape_read(t, y, buf, sizeof buf), TG_ERR_STATE);
  cr_expect(strstr(tg_tape_error(t), "rewritten after the reshape") != NULL, "%s", tg_tape_error(t));
  cr_expect_eq(tg_tape_read(t, z, buf, sizeof buf), TG_ERR_STATE);
  cr_expect_eq(tg_tape_backward(t, loss), TG_ERR_STATE);
  cr_expect(strstr(tg_tape_error(t), "shares the storage of parameter") != NULL, "%s", tg_tape_error(t));
  /* a fresh reshape reads the new bytes */
  ts_read(t, tg_reshape(t, P, 1, s6), got, 6);
  for (int i = 0; i < 6; i++)
    want[i] = P1[i];
  TS_EXPECT_CLOSE(got, want, 6, 0, 0);
  /* no-grad mode: no node, the same rule */
  tg_tape_set_grad_enabled(t, 0, NULL);
  tg_id v = tg_reshape(t, P, 2, s32);
  ts_read(t, v, got, 6);
  TS_EXPECT_CLOSE(got, want, 6, 0, 0);
  cr_assert_eq(tg_tape_write(t, P, P0, sizeof P0), TG_OK, "%s", tg_tape_error(t));
  cr_expect_eq(tg_tape_read(t, v, buf, sizeof buf), TG_ERR_STATE);
  /* an input: the same */
  tg_tape_set_grad_enabled(t, 1, NULL);
  tg_id x = ts_input(t, TG_F32, 1, s6, P0, TG_REQUIRES_GRAD), xv = tg_reshape(t, x, 2, s23);
  cr_assert_eq(tg_tape_write(t, x, P1, sizeof P1), TG_OK, "%s", tg_tape_error(t));
  cr_expect_eq(tg_tape_read(t, xv, buf, sizeof buf), TG_ERR_STATE);
  cr_expect(strstr(tg_tape_error(t), "is a reshape of input") != NULL, "%s", tg_tape_error(t));
  tg_tape_destroy(t);
}

Test(shape, reshape_of_a_leaf_is_a_view) {
  tg_runtime *rt = ts_host_runtime();
  leaf_view_case(rt, TG_PROVIDER_HOST);
  tg_runtime_destroy(rt);
}

Test(shape_cuda, reshape_of_a_leaf_is_a_view) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  leaf_view_case(rt, TG_PROVIDER_CUDA);
  tg_runtime_destroy(rt);
}
