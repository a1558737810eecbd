/* tg_dot_last: values and gradients against loops written here (full shapes, either operand
 * broadcast, both broadcast, 1-D, n = 1) with random output gradients, gradcheck in f64, every error
 * path, CUDA against the host (f32, f16, bf16) and CUDA run to run bit for bit. */
#include <math.h>
#include <stdlib.h>

#include "support.h"

/* One case: a [la..., n], b [lb..., n]. */
typedef struct {
  int nda, ndb;
  int64_t sa[4], sb[4];
} dot_case;

static int64_t numel(int nd, const int64_t *s) {
  int64_t k = 1;
  for (int d = 0; d < nd; d++)
    k *= s[d];
  return k;
}

/* The reference, written without the library's plan: y's leading shape is the right-aligned
 * broadcast of a's and b's; a row of y reads a's row at the index with broadcast dims set to 0.
 * ga[ra, c] += R[i] b[rb, c], gb likewise. Returns y's numel and fills ys / ndy. */
static int64_t reference(const dot_case *k, const double *a, const double *b, const double *R, double *y, double *ga,
                         double *gb, int *ndy, int64_t *ys) {
  const int la = k->nda - 1, lb = k->ndb - 1, nd = la > lb ? la : lb;
  const int64_t n = k->sa[k->nda - 1];
  int64_t ea[4], eb[4];
  for (int d = 0; d < nd; d++) {
    ea[d] = d >= nd - la ? k->sa[d - (nd - la)] : 1;
    eb[d] = d >= nd - lb ? k->sb[d - (nd - lb)] : 1;
    ys[d] = ea[d] > eb[d] ? ea[d] : eb[d];
  }
  *ndy = nd;
  const int64_t ny = numel(nd, ys);
  if (ga) memset(ga, 0, sizeof(double) * (size_t)(numel(la, k->sa) * n));
  if (gb) memset(gb, 0, sizeof(double) * (size_t)(numel(lb, k->sb) * n));
  for (int64_t i = 0; i < ny; i++) {
    int64_t rem = i, ra = 0, rb = 0, ma = 1, mb = 1;
    for (int d = nd - 1; d >= 0; d--) {
      int64_t x = rem % ys[d];
      rem /= ys[d];
      ra += (ea[d] == 1 ? 0 : x) * ma;
      rb += (eb[d] == 1 ? 0 : x) * mb;
      ma *= ea[d];
      mb *= eb[d];
    }
    double s = 0;
    for (int64_t c = 0; c < n; c++) {
      s += a[ra * n + c] * b[rb * n + c];
      if (ga) ga[ra * n + c] += R[i] * b[rb * n + c];
      if (gb) gb[rb * n + c] += R[i] * a[ra * n + c];
    }
    y[i] = s;
  }
  return ny;
}

static const dot_case CASES[] = {
    {3, 3, {3, 5, 7}, {3, 5, 7}}, /* full shapes */
    {3, 2, {3, 5, 7}, {5, 7}},    /* b [H, C] broadcast */
    {2, 3, {5, 7}, {3, 5, 7}},    /* a broadcast (swapped) */
    {3, 3, {1, 5, 7}, {3, 5, 7}}, /* a [1, H, C] */
    {3, 3, {3, 1, 7}, {1, 5, 7}}, /* both broadcast */
    {3, 2, {3, 5, 7}, {1, 7}},    /* one row of b against every row */
    {1, 1, {7}, {7}},             /* 1-D: a scalar */
    {3, 2, {3, 5, 1}, {5, 1}},    /* n = 1 */
    {2, 1, {4, 9}, {9}},
};
#define NCASES (sizeof CASES / sizeof CASES[0])

static void check_host(tg_dtype dt, double tol) {
  for (size_t q = 0; q < NCASES; q++) {
    const dot_case *k = &CASES[q];
    const int64_t na = numel(k->nda, k->sa), nb = numel(k->ndb, k->sb);
    double a[256], b[256], R[256], y[256], ga[256], gb[256], got[256];
    ts_uniform(a, (size_t)na, 10 + q, -1, 1);
    ts_uniform(b, (size_t)nb, 20 + q, -1, 1);
    ts_uniform(R, 256, 30 + q, -1, 1);
    int ndy;
    int64_t ys[4];
    const int64_t ny = reference(k, a, b, R, y, ga, gb, &ndy, ys);
    tg_runtime *rt = ts_host_runtime();
    tg_tape *t = ts_tape(rt);
    void *ca = ts_convert(a, (size_t)na, dt), *cb = ts_convert(b, (size_t)nb, dt), *cr = ts_convert(R, (size_t)ny, dt);
    tg_id ia = ts_input(t, dt, k->nda, k->sa, ca, TG_REQUIRES_GRAD),
          ib = ts_input(t, dt, k->ndb, k->sb, cb, TG_REQUIRES_GRAD);
    tg_id iy = tg_dot_last(t, ia, ib), ir = ts_input(t, dt, ndy, ys, cr, 0);
    cr_assert_neq(iy, TG_NO_ID, "case %zu: %s", q, tg_tape_error(t));
    int nd;
    int64_t sh[TG_MAX_DIMS];
    cr_assert_eq(tg_tape_shape(t, iy, &nd, sh, TG_MAX_DIMS), TG_OK);
    cr_expect_eq(nd, ndy, "case %zu: ndim %d, expected %d", q, nd, ndy);
    for (int d = 0; d < nd && d < ndy; d++)
      cr_expect_eq(sh[d], ys[d], "case %zu: dim %d", q, d);
    cr_assert_eq(ts_read(t, iy, got, 256), ny);
    cr_expect(ts_close_ratio(got, y, (size_t)ny, tol, tol) <= 1, "case %zu: y", q);
    cr_assert_eq(tg_tape_backward_with(t, iy, ir), TG_OK, "case %zu: %s", q, tg_tape_error(t));
    cr_assert_eq(ts_read_grad(t, ia, got, 256), na);
    cr_expect(ts_close_ratio(got, ga, (size_t)na, tol, tol) <= 1, "case %zu: grad a", q);
    cr_assert_eq(ts_read_grad(t, ib, got, 256), nb);
    cr_expect(ts_close_ratio(got, gb, (size_t)nb, tol, tol) <= 1, "case %zu: grad b", q);
    free(ca);
    free(cb);
    free(cr);
    tg_tape_destroy(t);
    tg_runtime_destroy(rt);
  }
}

Test(dot, host_f64_matches_loops) { check_host(TG_F64, 1e-14); }
Test(dot, host_f32_matches_loops) { check_host(TG_F32, 1e-6); }

/* The same value as both operands: y = |x|^2 per row, gx = 2 R x. */
Test(dot, same_value_twice) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sx[2] = {3, 4}, sy[1] = {3};
  double x[12], R[3] = {0.5, -1.5, 2.0}, y[3], g[12];
  ts_uniform(x, 12, 5, -1, 1);
  tg_id ix = ts_input(t, TG_F64, 2, sx, x, TG_REQUIRES_GRAD), iy = tg_dot_last(t, ix, ix);
  cr_assert_eq(ts_read(t, iy, y, 3), 3);
  cr_assert_eq(tg_tape_backward_with(t, iy, ts_input(t, TG_F64, 1, sy, R, 0)), TG_OK, "%s", tg_tape_error(t));
  cr_assert_eq(ts_read_grad(t, ix, g, 12), 12);
  for (int r = 0; r < 3; r++) {
    double s = 0;
    for (int c = 0; c < 4; c++) {
      s += x[r * 4 + c] * x[r * 4 + c];
      cr_expect(fabs(g[r * 4 + c] - 2 * R[r] * x[r * 4 + c]) < 1e-14);
    }
    cr_expect(fabs(y[r] - s) < 1e-14);
  }
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

static tg_id dot_loss(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_sum(t, tg_mul(t, tg_dot_last(t, in[0], in[1]), in[2]));
}
static tg_id dot_self_loss(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_sum(t, tg_mul(t, tg_dot_last(t, in[0], in[0]), in[1]));
}

Test(dot, gradcheck_f64) {
  const dot_case gc[3] = {{3, 2, {3, 2, 5}, {2, 5}}, {3, 3, {3, 1, 4}, {1, 2, 4}}, {2, 3, {2, 3}, {4, 2, 3}}};
  for (int q = 0; q < 3; q++) {
    const dot_case *k = &gc[q];
    double a[64], b[64], R[64], y[64];
    int ndy;
    int64_t ys[4];
    ts_uniform(a, 64, 40 + (uint64_t)q, -1, 1);
    ts_uniform(b, 64, 50 + (uint64_t)q, -1, 1);
    ts_uniform(R, 64, 60 + (uint64_t)q, -1, 1);
    reference(k, a, b, R, y, NULL, NULL, &ndy, ys);
    tg_gradcheck_input in[3] = {ts_gc_input(TG_F64, k->nda, k->sa, a), ts_gc_input(TG_F64, k->ndb, k->sb, b),
                                ts_gc_input(TG_F64, ndy, ys, R)};
    ts_gradcheck(dot_loss, NULL, 3, in);
  }
  int64_t sx[2] = {3, 4}, sr[1] = {3};
  double x[12], R[3];
  ts_uniform(x, 12, 70, -1, 1);
  ts_uniform(R, 3, 71, -1, 1);
  tg_gradcheck_input in[2] = {ts_gc_input(TG_F64, 2, sx, x), ts_gc_input(TG_F64, 1, sr, R)};
  ts_gradcheck(dot_self_loss, NULL, 2, in);
}

static void expect_nothing_recorded(tg_tape *t) {
  size_t nodes = 99;
  tg_tape_stats(t, &nodes, NULL);
  cr_expect_eq(nodes, 0, "%zu nodes recorded", nodes);
}

/* Each bad call on a fresh tape: TG_NO_ID, the sticky status and message, no node. */
#define EXPECT_REFUSED(call, st, needle)                                                                               \
  do {                                                                                                                 \
    cr_expect_eq((call), TG_NO_ID);                                                                                    \
    TS_EXPECT_STICKY(t, st, needle);                                                                                   \
    expect_nothing_recorded(t);                                                                                        \
    tg_tape_reset(t);                                                                                                  \
  } while (0)

Test(dot, errors) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double d[128] = {0};
  int32_t k[128] = {0};
  float f[128] = {0};
  const int64_t s347[3] = {3, 4, 7}, s46[2] = {4, 6}, s27[2] = {2, 7}, s0[1] = {1};
#define IN(dt, nd, sh, p) ts_input(t, dt, nd, sh, p, 0)
  EXPECT_REFUSED(tg_dot_last(t, IN(TG_F64, 3, s347, d), IN(TG_F64, 2, s46, d)), TG_ERR_SHAPE,
                 "tg_dot_last: arguments 'a' [3, 4, 7] and 'b' [4, 6] differ in the last dim (7 and 6)");
  EXPECT_REFUSED(tg_dot_last(t, IN(TG_F64, 3, s347, d), IN(TG_F64, 2, s27, d)), TG_ERR_SHAPE,
                 "the leading dims do not broadcast: dim 1 has 4 and 2");
  EXPECT_REFUSED(tg_dot_last(t, IN(TG_I32, 3, s347, k), IN(TG_F64, 3, s347, d)), TG_ERR_DTYPE, "'a'");
  EXPECT_REFUSED(tg_dot_last(t, IN(TG_F64, 3, s347, d), IN(TG_I32, 3, s347, k)), TG_ERR_DTYPE, "'b'");
  EXPECT_REFUSED(tg_dot_last(t, IN(TG_F32, 3, s347, f), IN(TG_F64, 3, s347, d)), TG_ERR_DTYPE, "'b'");
  EXPECT_REFUSED(tg_dot_last(t, TG_ABSENT, IN(TG_F64, 3, s347, d)), TG_ERR_INVALID_ID, "'a'");
  EXPECT_REFUSED(tg_dot_last(t, IN(TG_F64, 3, s347, d), TG_NO_ID), TG_ERR_INVALID_ID, "'b'");
  EXPECT_REFUSED(tg_dot_last(t, IN(TG_F64, 3, s347, d), (tg_id)123456789), TG_ERR_INVALID_ID, "'b'");
  tg_id scalar = tg_sum(t, IN(TG_F64, 1, s0, d));
  cr_assert_neq(scalar, TG_NO_ID);
  cr_expect_eq(tg_dot_last(t, scalar, scalar), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "tg_dot_last: argument 'a' is a scalar (ndim 0); expected at least one dim");
  size_t nodes = 0;
  tg_tape_stats(t, &nodes, NULL);
  cr_expect_eq(nodes, 1); /* the sum only */
#undef IN
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* ---- CUDA */

typedef struct {
  int nda, ndb;
  int64_t sa[4], sb[4];
} cuda_case;

static tg_id dot_fn(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_dot_last(t, in[0], in[1]);
}

Test(dot_cuda, matches_host) {
  tg_runtime_destroy(ts_cuda_runtime_or_skip());
  const cuda_case cs[] = {
      {3, 3, {37, 3, 7}, {37, 3, 7}},  /* full: one kernel for both gradients */
      {3, 2, {301, 5, 7}, {5, 7}},     /* TRAIL, 5 chunks: partials + the chunk sum */
      {2, 3, {5, 7}, {301, 5, 7}},     /* swapped */
      {3, 3, {1, 8, 8}, {2708, 8, 8}}, /* GAT layer 1, [1, H, C] */
      {3, 3, {2708, 1, 7}, {1, 1, 7}}, /* GAT layer 2 */
      {3, 2, {50, 3, 45}, {3, 45}},    /* a warp per row; one chunk writes straight */
      {3, 3, {9, 1, 5}, {1, 6, 5}},    /* both broadcast: the general reduction */
      {3, 3, {4, 6, 33}, {4, 1, 33}},  /* ROWS plan */
      {1, 1, {77}, {77}},              /* a scalar */
      {3, 2, {13, 5, 1}, {5, 1}},      /* n = 1 */
  };
  for (size_t q = 0; q < sizeof cs / sizeof cs[0]; q++) {
    const cuda_case *k = &cs[q];
    const int64_t na = numel(k->nda, k->sa), nb = numel(k->ndb, k->sb);
    double *a = malloc(sizeof(double) * (size_t)na), *b = malloc(sizeof(double) * (size_t)nb);
    ts_uniform(a, (size_t)na, 80 + q, -1, 1);
    ts_uniform(b, (size_t)nb, 90 + q, -1, 1);
    tg_gradcheck_input in[2] = {ts_gc_input(TG_F64, k->nda, k->sa, a), ts_gc_input(TG_F64, k->ndb, k->sb, b)};
    cr_log_info("dot_cuda case %zu", q);
    ts_check_cuda_vs_host(dot_fn, NULL, 2, in, TG_F32, TG_PROVIDER_CUDA, 1e-5);
    ts_check_cuda_vs_host(dot_fn, NULL, 2, in, TG_F16, TG_PROVIDER_CUDA, 1e-2);
    ts_check_cuda_vs_host(dot_fn, NULL, 2, in, TG_BF16, TG_PROVIDER_CUDA, 2e-2);
    free(a);
    free(b);
  }
}

/* One GAT-sized forward + backward (z [2708, 8, 8] . a [1, 8, 8], random output gradient) on a CUDA
 * tape; returns y, gz, ga as f32 bits in one buffer. */
static void gat_run(tg_runtime *rt, float *out) {
  const int64_t sz[3] = {2708, 8, 8}, sa[3] = {1, 8, 8}, sy[2] = {2708, 8};
  const size_t nz = 2708 * 64, ny = 2708 * 8;
  float *z = malloc(sizeof(float) * nz), a[64], *R = malloc(sizeof(float) * ny);
  ts_uniform_f32(z, nz, 1, -1, 1);
  ts_uniform_f32(a, 64, 2, -1, 1);
  ts_uniform_f32(R, ny, 3, -1, 1);
  tg_tape *t = ts_tape(rt);
  tg_id iz = ts_input(t, TG_F32, 3, sz, z, TG_REQUIRES_GRAD), ia = ts_param(t, TG_F32, 3, sa, a);
  tg_id iy = tg_dot_last(t, iz, ia);
  cr_assert_neq(iy, TG_NO_ID, "%s", tg_tape_error(t));
  cr_assert_eq(tg_tape_backward_with(t, iy, ts_input(t, TG_F32, 2, sy, R, 0)), TG_OK, "%s", tg_tape_error(t));
  cr_assert_eq(tg_tape_read(t, iy, out, sizeof(float) * ny), TG_OK);
  cr_assert_eq(tg_tape_read_grad(t, iz, out + ny, sizeof(float) * nz), TG_OK);
  cr_assert_eq(tg_tape_read_grad(t, ia, out + ny + nz, sizeof(float) * 64), TG_OK);
  tg_tape_destroy(t);
  free(z);
  free(R);
}

Test(dot_cuda, bit_identical_runs) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  const size_t n = 2708 * 8 + 2708 * 64 + 64;
  float *r0 = malloc(sizeof(float) * n), *r1 = malloc(sizeof(float) * n);
  gat_run(rt, r0);
  for (int rep = 0; rep < 5; rep++) {
    gat_run(rt, r1);
    cr_expect(memcmp(r0, r1, sizeof(float) * n) == 0, "run %d differs from run 0", rep + 1);
  }
  free(r0);
  free(r1);
  tg_runtime_destroy(rt);
}
