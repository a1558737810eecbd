/* tg_relation_radius: the edge sets against brute force written here (points exactly at the cutoff,
 * duplicates, 1/2/3-D, max_neighbors cuts, bipartite, self loops), the permutation, errors, and on
 * a GPU the device builder equal to the host builder bit for bit. */
#include "support.h"

#include <math.h>

/* No FMA contraction in d2 below (GCC in ISO C mode never contracts; clang needs the pragma). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

typedef struct pts {
  int64_t n;
  int dim;
  double *p;
} pts;

/* d2 as tiga.h states it: each difference, square and sum one rounded double operation. */
static double d2(const double *a, const double *b, int dim) {
  double s = 0;
  for (int d = 0; d < dim; d++) {
    double x = b[d] - a[d];
    double sq = x * x;
    s = s + sq;
  }
  return s;
}

/* Brute force CSR: row_ptr [nd + 1], col_idx (allocated), with the tiga.h rules. */
static int64_t brute(const pts *dst, const pts *src, int square, int loops, double c, int64_t k, int64_t *rp,
                     int32_t **ci_out) {
  int64_t cap = dst->n * src->n + 1, nnz = 0;
  int32_t *ci = malloc((size_t)cap * sizeof *ci);
  double *dd = malloc((size_t)src->n * sizeof *dd);
  int32_t *js = malloc((size_t)src->n * sizeof *js);
  double c2 = c * c;
  rp[0] = 0;
  for (int64_t i = 0; i < dst->n; i++) {
    int64_t m = 0;
    for (int64_t j = 0; j < src->n; j++) {
      if (square && j == i && !loops) continue;
      double v = d2(dst->p + i * dst->dim, src->p + j * src->dim, dst->dim);
      if (v <= c2) dd[m] = v, js[m] = (int32_t)j, m++;
    }
    if (k > 0 && m > k) { /* keep the k smallest (d2, j): selection by repeated minimum */
      for (int64_t a = 0; a < k; a++) {
        int64_t best = a;
        for (int64_t b = a + 1; b < m; b++)
          if (dd[b] < dd[best] || (dd[b] == dd[best] && js[b] < js[best])) best = b;
        double td = dd[a];
        int32_t tj = js[a];
        dd[a] = dd[best], js[a] = js[best], dd[best] = td, js[best] = tj;
      }
      m = k;
    }
    for (int64_t a = 1; a < m; a++) /* columns ascending */
      for (int64_t b = a; b > 0 && js[b] < js[b - 1]; b--) {
        int32_t tj = js[b];
        js[b] = js[b - 1], js[b - 1] = tj;
      }
    for (int64_t a = 0; a < m; a++)
      ci[nnz++] = js[a];
    rp[i + 1] = nnz;
  }
  free(dd), free(js);
  *ci_out = ci;
  return nnz;
}

static void expect_same_graph(const tg_relation *r, const pts *dst, const pts *src, int square, int loops, double c,
                              int64_t k, const char *what) {
  int64_t *want_rp = malloc((size_t)(dst->n + 1) * sizeof *want_rp), *rp = malloc((size_t)(dst->n + 1) * sizeof *rp);
  int32_t *want_ci;
  int64_t nnz = brute(dst, src, square, loops, c, k, want_rp, &want_ci);
  cr_assert_eq(tg_relation_read_csr(r, 0, rp, (size_t)(dst->n + 1) * sizeof *rp, NULL, 0), TG_OK, "%s",
               tg_last_error());
  int64_t nq, nk, allowed;
  tg_relation_info(r, NULL, &nq, &nk, &allowed);
  cr_expect_eq(allowed, nnz, "%s: %lld edges, brute force %lld", what, (long long)allowed, (long long)nnz);
  cr_expect_eq(nq, dst->n);
  cr_expect_eq(nk, src->n);
  int32_t *ci = malloc((size_t)(rp[dst->n] + 1) * sizeof *ci);
  cr_assert_eq(tg_relation_read_csr(r, 0, rp, (size_t)(dst->n + 1) * sizeof *rp, ci, (size_t)rp[dst->n] * sizeof *ci),
               TG_OK);
  int bad = 0;
  for (int64_t i = 0; i <= dst->n && !bad; i++)
    if (rp[i] != want_rp[i]) {
      bad = 1;
      cr_expect_eq(rp[i], want_rp[i], "%s: row_ptr[%lld]", what, (long long)i);
    }
  for (int64_t e = 0; e < nnz && !bad; e++)
    if (ci[e] != want_ci[e]) {
      bad = 1;
      cr_expect_eq(ci[e], want_ci[e], "%s: col_idx[%lld]", what, (long long)e);
    }
  free(want_rp), free(rp), free(want_ci), free(ci);
}

static pts random_pts(int64_t n, int dim, uint64_t seed) {
  pts p = {n, dim, malloc((size_t)(n * dim) * sizeof(double))};
  ts_uniform(p.p, (size_t)(n * dim), seed, 0, 1);
  return p;
}

/* A lattice with spacing exactly the cutoff (so pairs sit exactly at it), plus duplicates. */
static pts lattice_pts(int dim, int side, double step) {
  int64_t n = 1;
  for (int d = 0; d < dim; d++)
    n *= side;
  pts p = {n + 3, dim, malloc((size_t)((n + 3) * dim) * sizeof(double))};
  for (int64_t i = 0; i < n; i++) {
    int64_t r = i;
    for (int d = 0; d < dim; d++, r /= side)
      p.p[i * dim + d] = step * (double)(r % side);
  }
  for (int e = 0; e < 3; e++) /* duplicates of points 0, 1, n - 1 */
    for (int d = 0; d < dim; d++)
      p.p[(n + e) * dim + d] = p.p[(e == 2 ? n - 1 : e) * dim + d];
  return p;
}

static tg_relation *build(tg_runtime *rt, const pts *dst, const pts *src, double c, int64_t k, unsigned flags,
                          int64_t *perm) {
  tg_radius_options o;
  tg_radius_options_init(&o);
  o.max_neighbors = k;
  o.flags = flags;
  if (perm) o.perm_out = perm, o.perm_out_bytes = (size_t)dst->n * sizeof *perm;
  tg_relation *r = NULL;
  size_t bd = (size_t)(dst->n * dst->dim) * sizeof(double);
  tg_status s = src ? tg_relation_radius(rt, dst->dim, TG_F64, dst->n, dst->p, bd, src->n, src->p,
                                         (size_t)(src->n * src->dim) * sizeof(double), c, &o, &r)
                    : tg_relation_radius(rt, dst->dim, TG_F64, dst->n, dst->p, bd, 0, NULL, 0, c, &o, &r);
  cr_assert_eq(s, TG_OK, "%s", tg_last_error());
  return r;
}

static void check_all(tg_runtime *rt) {
  for (int dim = 1; dim <= 3; dim++) {
    pts a = random_pts(300, dim, 10 + (uint64_t)dim), b = random_pts(211, dim, 20 + (uint64_t)dim);
    double c = dim == 1 ? 0.01 : dim == 2 ? 0.08 : 0.17;
    for (int loops = 0; loops < 2; loops++) {
      tg_relation *r = build(rt, &a, NULL, c, 0, loops ? TG_RADIUS_SELF_LOOPS : 0, NULL);
      expect_same_graph(r, &a, &a, 1, loops, c, 0, "square");
      tg_relation_destroy(r);
    }
    tg_relation *r = build(rt, &a, &b, c, 0, 0, NULL);
    expect_same_graph(r, &a, &b, 0, 0, c, 0, "bipartite");
    tg_relation_destroy(r);
    r = build(rt, &a, NULL, c, 3, TG_RADIUS_SELF_LOOPS, NULL);
    expect_same_graph(r, &a, &a, 1, 1, c, 3, "max_neighbors 3 with self loops");
    tg_relation_destroy(r);
    pts l = lattice_pts(dim, dim == 1 ? 40 : dim == 2 ? 9 : 5, 0.125);
    r = build(rt, &l, NULL, 0.125, 0, 0, NULL); /* neighbours exactly at the cutoff, and duplicates */
    expect_same_graph(r, &l, &l, 1, 0, 0.125, 0, "lattice");
    tg_relation_destroy(r);
    r = build(rt, &l, NULL, 0.125, 2, TG_RADIUS_SELF_LOOPS, NULL); /* ties cut by the smaller index */
    expect_same_graph(r, &l, &l, 1, 1, 0.125, 2, "lattice, ties at k = 2");
    tg_relation_destroy(r);
    free(a.p), free(b.p), free(l.p);
  }
}

Test(radius, host_equals_brute_force) {
  tg_runtime *rt = ts_host_runtime();
  check_all(rt);
  tg_runtime_destroy(rt);
}

Test(radius, permutation_value_positions_and_use) {
  tg_runtime *rt = ts_host_runtime();
  pts a = random_pts(97, 3, 5);
  int64_t perm[97];
  tg_relation *r = build(rt, &a, NULL, 0.3, 0, 0, perm);
  uint8_t seen[97] = {0};
  for (int i = 0; i < 97; i++) {
    cr_assert(perm[i] >= 0 && perm[i] < 97);
    cr_expect(!seen[perm[i]], "perm repeats %lld", (long long)perm[i]);
    seen[perm[i]] = 1;
  }
  /* from a tape value (f32 positions): the same graph as from the host array */
  tg_tape *t = ts_tape(rt);
  float f[97 * 3];
  for (int i = 0; i < 97 * 3; i++)
    f[i] = (float)a.p[i], a.p[i] = (double)f[i];
  int64_t sh[2] = {97, 3};
  tg_id pv = ts_input(t, TG_F32, 2, sh, f, 0);
  tg_relation *rv = NULL;
  cr_assert_eq(tg_relation_radius_value(t, pv, TG_ABSENT, 0.3, NULL, &rv), TG_OK, "%s", tg_tape_error(t));
  expect_same_graph(rv, &a, &a, 1, 0, 0.3, 0, "from a tape value");
  /* the relation drives attention like any CSR relation */
  int64_t sq[4] = {1, 97, 1, 3};
  tg_id q = ts_input(t, TG_F32, 4, sq, f, 0);
  cr_expect_neq(tg_attention(t, q, q, q, rv, NULL), TG_NO_ID, "%s", tg_tape_error(t));
  tg_relation_destroy(rv);
  tg_relation_destroy(r);
  tg_tape_destroy(t);
  free(a.p);
  tg_runtime_destroy(rt);
}

Test(radius, errors) {
  tg_runtime *rt = ts_host_runtime();
  double p[6] = {0, 0, 1, 1, 2, 2};
  tg_relation *r = NULL;
#define EXPECT_RADIUS(st, needle, ...)                                                                                 \
  do {                                                                                                                 \
    tg_status s_ = tg_relation_radius(__VA_ARGS__);                                                                    \
    cr_expect_eq(s_, (st), "got %s (%s)", tg_status_string(s_), tg_last_error());                                      \
    cr_expect(strstr(tg_last_error(), (needle)) != NULL, "message '%s' lacks '%s'", tg_last_error(), (needle));        \
    cr_expect(r == NULL);                                                                                              \
  } while (0)
  EXPECT_RADIUS(TG_ERR_INVALID_ARGUMENT, "argument 'cutoff' is 0", rt, 2, TG_F64, 3, p, sizeof p, 0, NULL, 0, 0.0, NULL,
                &r);
  EXPECT_RADIUS(TG_ERR_INVALID_ARGUMENT, "argument 'cutoff' is inf", rt, 2, TG_F64, 3, p, sizeof p, 0, NULL, 0,
                INFINITY, NULL, &r);
  EXPECT_RADIUS(TG_ERR_INVALID_ARGUMENT, "argument 'dim' is 4", rt, 4, TG_F64, 3, p, sizeof p, 0, NULL, 0, 1.0, NULL,
                &r);
  EXPECT_RADIUS(TG_ERR_DTYPE, "expected f32 or f64", rt, 2, TG_I32, 3, p, sizeof p, 0, NULL, 0, 1.0, NULL, &r);
  EXPECT_RADIUS(TG_ERR_INVALID_ARGUMENT, "argument 'pos_dst_bytes' is 40", rt, 2, TG_F64, 3, p, 40, 0, NULL, 0, 1.0,
                NULL, &r);
  double bad[6] = {0, 0, NAN, 1, 2, 2};
  EXPECT_RADIUS(TG_ERR_INVALID_ARGUMENT, "point 1", rt, 2, TG_F64, 3, bad, sizeof bad, 0, NULL, 0, 1.0, NULL, &r);
  tg_radius_options o;
  tg_radius_options_init(&o);
  o.flags = TG_RADIUS_SELF_LOOPS;
  EXPECT_RADIUS(TG_ERR_INVALID_ARGUMENT, "TG_RADIUS_SELF_LOOPS needs a square graph", rt, 2, TG_F64, 3, p, sizeof p, 3,
                p, sizeof p, 1.0, &o, &r);
  tg_radius_options_init(&o);
  o.max_neighbors = -1;
  EXPECT_RADIUS(TG_ERR_INVALID_ARGUMENT, "option 'max_neighbors' is -1", rt, 2, TG_F64, 3, p, sizeof p, 0, NULL, 0, 1.0,
                &o, &r);
  int64_t perm[2];
  tg_radius_options_init(&o);
  o.perm_out = perm, o.perm_out_bytes = sizeof perm;
  EXPECT_RADIUS(TG_ERR_INVALID_ARGUMENT, "option 'perm_out_bytes' is 16", rt, 2, TG_F64, 3, p, sizeof p, 0, NULL, 0,
                1.0, &o, &r);
  memset(&o, 0, sizeof o);
  EXPECT_RADIUS(TG_ERR_INVALID_ARGUMENT, "struct_size is 0", rt, 2, TG_F64, 3, p, sizeof p, 0, NULL, 0, 1.0, &o, &r);
  tg_runtime_destroy(rt);
}

/* On a GPU the device builder gives the host builder's graph bit for bit (checked here against
 * brute force, which the host test also matches), from host and from device positions. */
Test(radius_cuda, device_builder_equals_brute_force) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  check_all(rt);
  tg_tape *t = ts_tape(rt);
  pts a = random_pts(500, 3, 77);
  int64_t sh[2] = {500, 3};
  float f[1500]; /* CUDA ops take f32: the brute force reads the same rounded values */
  for (int i = 0; i < 1500; i++)
    f[i] = (float)a.p[i], a.p[i] = (double)f[i];
  tg_id pv = ts_param(t, TG_F32, 2, sh, f); /* a parameter: uploaded once, then read on the device */
  tg_id y = tg_scale(t, pv, 1.0);           /* an op result that lives on the device */
  tg_relation *r = NULL;
  cr_assert_eq(tg_relation_radius_value(t, y, TG_ABSENT, 0.12, NULL, &r), TG_OK, "%s", tg_tape_error(t));
  expect_same_graph(r, &a, &a, 1, 0, 0.12, 0, "from device positions");
  tg_relation_destroy(r);
  tg_tape_destroy(t);
  free(a.p);
  tg_runtime_destroy(rt);
}
