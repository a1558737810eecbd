/* Host-only check of the radius-graph builder (host/radius.c, compiled into this program) against
 * brute force, and its time on 100k uniform points.
 *   check_radius            every case, then the timing (exit 1 on any mismatch, a FAIL line each)
 *   check_radius --big N    also builds N uniform points (e.g. 10000000) once and prints the time
 * Brute force: every pair, d2 = ((s0 + s1) + s2) rounded per operation, no FMA, the same rule. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "host/radius.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

static int g_fail = 0, g_cases = 0;

static uint64_t rng_s = 0x1234567;
static double uni(void) {
  uint64_t z = (rng_s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (double)(z >> 11) * 0x1.0p-53;
}

static double clock_ms(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}
static double now_ms(void) { return clock_ms(CLOCK_MONOTONIC); }
static double cpu_ms(void) { return clock_ms(CLOCK_PROCESS_CPUTIME_ID); }

/* A point set stored in dtype (f32 rounds the generated doubles); at() reads it back exactly. */
typedef struct pts {
  int64_t n;
  int dim;
  tg_dtype dt;
  void *p;
} pts;
static pts pts_new(int64_t n, int dim, tg_dtype dt) {
  pts s = {n, dim, dt, calloc((size_t)(n > 0 ? n : 1) * dim, dt == TG_F32 ? 4 : 8)};
  return s;
}
static void put(pts *s, int64_t i, int d, double x) {
  if (s->dt == TG_F32)
    ((float *)s->p)[i * s->dim + d] = (float)x;
  else
    ((double *)s->p)[i * s->dim + d] = x;
}
static double at(const pts *s, int64_t i, int d) {
  return s->dt == TG_F32 ? ((float *)s->p)[i * s->dim + d] : ((double *)s->p)[i * s->dim + d];
}

typedef struct cd {
  double d2;
  int32_t j;
} cd;
static int cd_cmp(const void *x, const void *y) {
  const cd *a = x, *b = y;
  if (a->d2 != b->d2) return a->d2 < b->d2 ? -1 : 1;
  return (a->j > b->j) - (a->j < b->j);
}
static int i32c(const void *x, const void *y) {
  int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
  return (a > b) - (a < b);
}

/* Brute force CSR (malloc'd). */
static void brute(const pts *D, const pts *S, double c, int64_t k, int square, int loops, int64_t **rp_out,
                  int32_t **col_out) {
  int64_t nd = D->n, ns = S->n, cap = 1024, nnz = 0;
  int64_t *rp = malloc((size_t)(nd + 1) * sizeof *rp);
  int32_t *col = malloc((size_t)cap * sizeof *col);
  cd *row = malloc((size_t)(ns > 0 ? ns : 1) * sizeof *row);
  double cc = c * c;
  rp[0] = 0;
  for (int64_t i = 0; i < nd; i++) {
    int64_t m = 0;
    for (int64_t j = 0; j < ns; j++) {
      if (square && !loops && i == j) continue;
      double s = 0;
      for (int d = 0; d < D->dim; d++) {
        double df = at(S, j, d) - at(D, i, d);
        double sq = df * df;
        s = d == 0 ? sq : s + sq;
      }
      if (s <= cc) row[m].d2 = s, row[m].j = (int32_t)j, m++;
    }
    if (k > 0 && m > k) {
      qsort(row, (size_t)m, sizeof *row, cd_cmp);
      m = k;
    }
    if (nnz + m > cap) {
      while (nnz + m > cap)
        cap *= 2;
      col = realloc(col, (size_t)cap * sizeof *col);
    }
    for (int64_t e = 0; e < m; e++)
      col[nnz + e] = row[e].j;
    qsort(col + nnz, (size_t)m, sizeof *col, i32c);
    nnz += m;
    rp[i + 1] = nnz;
  }
  free(row);
  *rp_out = rp;
  *col_out = col;
}

/* Morton codes re-derived from the header's definition, to check the permutation. */
static uint64_t morton_ref(const pts *D, int64_t i, const double *h0, double E) {
  int B = 63 / D->dim;
  uint64_t code = 0;
  for (int d = 0; d < D->dim; d++) {
    uint64_t q = 0;
    if (E > 0) {
      double u = 0.5 * at(D, i, d) - h0[d];
      double f = floor((u / E) * ldexp(1.0, B));
      q = f >= ldexp(1.0, B) ? (1ull << B) - 1 : (uint64_t)f;
    }
    for (int b = 0; b < B; b++)
      if (q >> b & 1) code |= 1ull << (b * D->dim + d);
  }
  return code;
}
static int check_perm(const pts *D, const int64_t *perm, const char *name) {
  int64_t n = D->n;
  double lo[3] = {0}, hi[3] = {0}, h0[3] = {0}, E = 0;
  for (int d = 0; d < D->dim; d++) {
    lo[d] = INFINITY, hi[d] = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
      double x = at(D, i, d);
      if (x < lo[d] || (x == 0 && lo[d] == 0 && signbit(x))) lo[d] = x;
      if (x > hi[d] || (x == 0 && hi[d] == 0 && !signbit(x))) hi[d] = x;
    }
    h0[d] = 0.5 * lo[d];
    double e = 0.5 * hi[d] - h0[d];
    if (n > 0 && e > E) E = e;
  }
  char *seen = calloc((size_t)(n > 0 ? n : 1), 1);
  int ok = 1;
  for (int64_t r = 0; r < n && ok; r++) {
    if (perm[r] < 0 || perm[r] >= n || seen[perm[r]]++) ok = 0;
    if (ok && r > 0) {
      uint64_t a = morton_ref(D, perm[r - 1], h0, E), b = morton_ref(D, perm[r], h0, E);
      if (a > b || (a == b && perm[r - 1] > perm[r])) ok = 0;
    }
  }
  free(seen);
  if (!ok) printf("FAIL %s: Morton permutation not sorted by (code, index) or not a permutation\n", name);
  return ok;
}

/* Builds with the host builder and compares with brute force. */
static void run_case(const char *name, const pts *D, const pts *S, double c, int64_t k, int square, int loops) {
  g_cases++;
  host_radius_args a = {D->n, square ? D->n : S->n, D->dim, D->dt, D->p, square ? NULL : S->p, c, k, square, loops};
  int64_t *rp = NULL, nnz = -1, *perm = malloc((size_t)(D->n > 0 ? D->n : 1) * sizeof *perm);
  int32_t *col = NULL;
  char msg[256] = "";
  tg_status st = host_radius_build(&a, &rp, &col, &nnz, perm, msg, sizeof msg);
  if (st != TG_OK) {
    printf("FAIL %s: status %d: %s\n", name, (int)st, msg);
    g_fail++;
    free(perm);
    return;
  }
  int64_t *brp;
  int32_t *bcol;
  brute(D, square ? D : S, c, k, square, loops, &brp, &bcol);
  int ok = 1;
  for (int64_t i = 0; i <= D->n && ok; i++)
    if (rp[i] != brp[i]) {
      printf("FAIL %s: row_ptr[%lld] = %lld, brute force %lld\n", name, (long long)i, (long long)rp[i],
             (long long)brp[i]);
      ok = 0;
    }
  if (ok && nnz != brp[D->n]) printf("FAIL %s: nnz %lld != %lld\n", name, (long long)nnz, (long long)brp[D->n]), ok = 0;
  for (int64_t e = 0; e < nnz && ok; e++)
    if (col[e] != bcol[e]) {
      printf("FAIL %s: col_idx[%lld] = %d, brute force %d\n", name, (long long)e, col[e], bcol[e]);
      ok = 0;
    }
  if (ok) ok = check_perm(D, perm, name);
  if (!ok) g_fail++;
  printf("%s %-44s n_dst %6lld n_src %6lld nnz %9lld\n", ok ? "ok  " : "BAD ", name, (long long)D->n,
         (long long)a.n_src, (long long)nnz);
  free(rp), free(col), free(brp), free(bcol), free(perm);
}

static void expect_error(const char *name, const host_radius_args *a, const char *needle) {
  g_cases++;
  int64_t *rp = (int64_t *)1, nnz = 7;
  int32_t *col = (int32_t *)1;
  char msg[256] = "";
  tg_status st = host_radius_build(a, &rp, &col, &nnz, NULL, msg, sizeof msg);
  int ok = st == TG_ERR_INVALID_ARGUMENT && rp == NULL && col == NULL && nnz == 0 && (!needle || strstr(msg, needle));
  if (!ok) {
    printf("FAIL %s: status %d, message \"%s\" (expected TG_ERR_INVALID_ARGUMENT naming \"%s\")\n", name, (int)st, msg,
           needle ? needle : "");
    g_fail++;
  } else
    printf("ok   %-44s -> %s\n", name, msg);
}

static pts uniform(int64_t n, int dim, tg_dtype dt, double lo, double hi) {
  pts s = pts_new(n, dim, dt);
  for (int64_t i = 0; i < n; i++)
    for (int d = 0; d < dim; d++)
      put(&s, i, d, lo + (hi - lo) * uni());
  return s;
}
/* m^dim lattice points at origin + spacing * index, in a shuffled order */
static pts lattice(int m, int dim, tg_dtype dt, double origin, double spacing) {
  int64_t n = 1;
  for (int d = 0; d < dim; d++)
    n *= m;
  pts s = pts_new(n, dim, dt);
  int64_t *ord = malloc((size_t)n * sizeof *ord);
  for (int64_t i = 0; i < n; i++)
    ord[i] = i;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)(uni() * (double)(i + 1));
    int64_t t = ord[i];
    ord[i] = ord[j], ord[j] = t;
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t v = ord[i];
    for (int d = 0; d < dim; d++, v /= m)
      put(&s, i, d, origin + spacing * (double)(v % m));
  }
  free(ord);
  return s;
}

/* square and bipartite random cases in every dim and dtype */
static void random_cases(void) {
  const tg_dtype dts[2] = {TG_F32, TG_F64};
  for (int dim = 1; dim <= 3; dim++)
    for (int t = 0; t < 2; t++) {
      char name[96];
      double c = dim == 1 ? 0.004 : dim == 2 ? 0.04 : 0.1;
      pts D = uniform(1500, dim, dts[t], -0.3, 0.7), S = uniform(1100, dim, dts[t], -0.5, 0.6);
      for (int loops = 0; loops < 2; loops++)
        for (int kk = 0; kk < 3; kk++) {
          int64_t k = kk == 0 ? 0 : kk == 1 ? 5 : 1;
          snprintf(name, sizeof name, "uniform %dD %s square loops=%d k=%lld", dim, dts[t] == TG_F32 ? "f32" : "f64",
                   loops, (long long)k);
          run_case(name, &D, NULL, c, k, 1, loops);
        }
      for (int kk = 0; kk < 2; kk++) {
        snprintf(name, sizeof name, "uniform %dD %s bipartite k=%d", dim, dts[t] == TG_F32 ? "f32" : "f64", kk * 7);
        run_case(name, &D, &S, c, kk * 7, 0, 0);
      }
      free(D.p), free(S.p);
    }
}

/* Above the builder's threading threshold (16384 destinations, chunks of 2048 taken by several
 * threads): the same brute-force comparison, so the parallel path is checked bit for bit too. */
static void threaded_cases(void) {
  pts D = uniform(20000, 3, TG_F32, 0, 1), D2 = uniform(20000, 2, TG_F64, -1, 1), S = uniform(4000, 3, TG_F64, 0, 1);
  pts D3 = uniform(20000, 3, TG_F64, 0.1, 0.9);
  run_case("threaded 3D f32 square k=0", &D, NULL, 0.05, 0, 1, 0);
  run_case("threaded 2D f64 square loops=1 k=5", &D2, NULL, 0.02, 5, 1, 1);
  run_case("threaded 3D f64 bipartite k=0", &D3, &S, 0.08, 0, 0, 0);
  free(D.p), free(D2.p), free(S.p), free(D3.p);
}

/* Exactly representable lattices: many pairs at exactly the cutoff (d2 == c * c), ties for k. */
static void lattice_cases(void) {
  const double cs[3] = {0.25, 0.1, 1.0};
  for (int dim = 1; dim <= 3; dim++)
    for (int ci = 0; ci < 3; ci++)
      for (int t = 0; t < 2; t++) {
        char name[96];
        tg_dtype dt = t ? TG_F64 : TG_F32;
        int m = dim == 1 ? 300 : dim == 2 ? 30 : 10;
        pts L = lattice(m, dim, dt, ci == 2 ? -3.0 : 0.0, cs[ci]);
        for (int kk = 0; kk < 3; kk++) {
          int64_t k = kk == 0 ? 0 : kk == 1 ? 3 : 7;
          snprintf(name, sizeof name, "lattice %dD c=%g %s k=%lld", dim, cs[ci], t ? "f64" : "f32", (long long)k);
          run_case(name, &L, NULL, cs[ci], k, 1, kk == 2);
        }
        /* diagonal: c = spacing * sqrt(dim) lands exactly on (or next to) the diagonal neighbours */
        double diag = cs[ci] * sqrt((double)dim);
        snprintf(name, sizeof name, "lattice %dD c=diag(%g) %s", dim, cs[ci], t ? "f64" : "f32");
        run_case(name, &L, NULL, diag, 0, 1, 0);
        free(L.p);
      }
  /* points on the grid's cell borders: the cell edge is c (1 + 2^-16) from the minimum */
  for (int dim = 1; dim <= 3; dim++) {
    int m = dim == 1 ? 200 : dim == 2 ? 20 : 8;
    pts A = lattice(m, dim, TG_F64, 0.0, 1.0 + 0x1p-16), B = lattice(m, dim, TG_F64, 0.0, 1.0);
    char name[96];
    snprintf(name, sizeof name, "cell borders %dD bipartite", dim);
    run_case(name, &A, &B, 1.0, 0, 0, 0);
    snprintf(name, sizeof name, "cell borders %dD square", dim);
    run_case(name, &A, NULL, 1.0 + 0x1p-16, 0, 1, 0);
    free(A.p), free(B.p);
  }
}

static void degenerate_cases(void) {
  char name[96];
  for (int dim = 1; dim <= 3; dim++) {
    /* duplicates: 300 points on 10 distinct sites */
    pts sites = uniform(10, dim, TG_F64, 0, 1), D = pts_new(300, dim, TG_F64);
    for (int64_t i = 0; i < 300; i++)
      for (int d = 0; d < dim; d++)
        put(&D, i, d, at(&sites, (int64_t)(uni() * 10), d));
    for (int loops = 0; loops < 2; loops++)
      for (int k = 0; k < 12; k += 4) {
        snprintf(name, sizeof name, "duplicates %dD loops=%d k=%d", dim, loops, k);
        run_case(name, &D, NULL, 0.2, k, 1, loops);
      }
    /* every point identical: one cell holds everything */
    pts I = pts_new(400, dim, TG_F32), J = pts_new(300, dim, TG_F32);
    for (int64_t i = 0; i < 400; i++)
      for (int d = 0; d < dim; d++)
        put(&I, i, d, 0.3), put(&J, i % 300, d, 0.3);
    for (int k = 0; k < 20; k += 10) {
      snprintf(name, sizeof name, "identical %dD square loops k=%d", dim, k);
      run_case(name, &I, NULL, 0.01, k, 1, 1);
      snprintf(name, sizeof name, "identical %dD bipartite k=%d", dim, k);
      run_case(name, &I, &J, 0.01, k, 0, 0);
    }
    /* one point, no points */
    pts one = uniform(1, dim, TG_F64, 0, 1), none = pts_new(0, dim, TG_F64);
    snprintf(name, sizeof name, "N=1 %dD loops", dim);
    run_case(name, &one, NULL, 0.5, 0, 1, 1);
    snprintf(name, sizeof name, "N=1 %dD no loops", dim);
    run_case(name, &one, NULL, 0.5, 0, 1, 0);
    snprintf(name, sizeof name, "n_dst=0 %dD", dim);
    run_case(name, &none, &D, 0.5, 0, 0, 0);
    snprintf(name, sizeof name, "n_src=0 %dD", dim);
    run_case(name, &D, &none, 0.5, 0, 0, 0);
    snprintf(name, sizeof name, "N=0 %dD square", dim);
    run_case(name, &none, NULL, 0.5, 0, 1, 1);
    free(sites.p), free(D.p), free(I.p), free(J.p), free(one.p), free(none.p);
  }
}

static void extreme_cases(void) {
  char name[96];
  for (int dim = 1; dim <= 3; dim++) {
    /* huge offset: integer lattice around 1e15 (exact), c = 1 */
    int m = dim == 1 ? 100 : dim == 2 ? 12 : 6;
    pts L = lattice(m, dim, TG_F64, 1e15, 1.0);
    snprintf(name, sizeof name, "lattice at 1e15 %dD", dim);
    run_case(name, &L, NULL, 1.0, 0, 1, 0);
    /* spread over [-1e300, 1e300] with close pairs: the grid is clamped to few cells */
    pts W = pts_new(600, dim, TG_F64);
    for (int64_t i = 0; i < 600; i += 2)
      for (int d = 0; d < dim; d++) {
        double x = (uni() * 2 - 1) * 1e300;
        put(&W, i, d, x), put(&W, i + 1, d, x + fabs(x) * 1e-15 * uni());
      }
    snprintf(name, sizeof name, "spread 1e300 %dD c=1e285", dim);
    run_case(name, &W, NULL, 1e285, 0, 1, 0);
    snprintf(name, sizeof name, "spread 1e300 %dD c=1e200 (c*c = inf)", dim);
    run_case(name, &W, NULL, 1e200, 3, 1, 0);
    snprintf(name, sizeof name, "spread 1e300 %dD c=1e154 (c*c finite)", dim);
    run_case(name, &W, NULL, 1e154, 0, 1, 1);
    /* DBL_MAX corners: differences overflow to inf */
    pts X = pts_new(4, dim, TG_F64);
    for (int d = 0; d < dim; d++)
      put(&X, 0, d, -1.7e308), put(&X, 1, d, 1.7e308), put(&X, 2, d, 1.7e308), put(&X, 3, d, 0.0);
    snprintf(name, sizeof name, "+-1.7e308 %dD", dim);
    run_case(name, &X, NULL, 1.0, 0, 1, 1);
    snprintf(name, sizeof name, "+-1.7e308 %dD c=1e300", dim);
    run_case(name, &X, NULL, 1e300, 0, 1, 1);
    /* cell-count overflow: 1e12 box, c = 1e-3, close pairs */
    pts O = pts_new(400, dim, TG_F64);
    for (int64_t i = 0; i < 400; i += 2)
      for (int d = 0; d < dim; d++) {
        double x = uni() * 1e12;
        put(&O, i, d, x), put(&O, i + 1, d, x + (uni() - 0.5) * 1e-3);
      }
    snprintf(name, sizeof name, "1e12 box c=1e-3 %dD", dim);
    run_case(name, &O, NULL, 1e-3, 0, 1, 0);
    /* tiny cutoffs: c * c near and below the subnormal range */
    pts T = pts_new(300, dim, TG_F64);
    for (int64_t i = 0; i < 300; i++)
      for (int d = 0; d < dim; d++)
        put(&T, i, d, (double)(i % 7) * 1e-201 + (double)(i % 3) * 1e-160);
    const double tiny[3] = {1e-200, 1e-160, 3e-154};
    for (int q = 0; q < 3; q++) {
      snprintf(name, sizeof name, "tiny c=%g %dD", tiny[q], dim);
      run_case(name, &T, NULL, tiny[q], 0, 1, 0);
    }
    /* negative zero and zero */
    pts Z = pts_new(6, dim, TG_F64);
    for (int64_t i = 0; i < 6; i++)
      for (int d = 0; d < dim; d++)
        put(&Z, i, d, i % 2 ? -0.0 : 0.0);
    snprintf(name, sizeof name, "signed zeros %dD", dim);
    run_case(name, &Z, NULL, 1e-300, 2, 1, 1);
    /* two tight clusters far apart */
    pts K = pts_new(500, dim, TG_F32);
    for (int64_t i = 0; i < 500; i++)
      for (int d = 0; d < dim; d++)
        put(&K, i, d, (i < 250 ? -1000.0 : 5000.0) + uni() * 0.5);
    snprintf(name, sizeof name, "two clusters %dD", dim);
    run_case(name, &K, NULL, 0.05, 0, 1, 0);
    free(L.p), free(W.p), free(X.p), free(O.p), free(T.p), free(Z.p), free(K.p);
  }
}

/* Random small configurations: mixtures of uniform, lattice and duplicate points, random cutoffs
 * (often exactly a lattice distance), max_neighbors, square / bipartite. */
static void fill_mixed(pts *s, double spacing) {
  for (int64_t i = 0; i < s->n; i++) {
    double r = uni();
    for (int d = 0; d < s->dim; d++) {
      double x = r < 0.4 ? uni() : r < 0.8 ? spacing * (double)(int)(uni() * 8) : (i > 0 ? at(s, i - 1, d) : 0.5);
      put(s, i, d, x);
    }
  }
}
static void fuzz_cases(int count) {
  char name[96];
  for (int q = 0; q < count; q++) {
    int dim = 1 + (int)(uni() * 3), sq = uni() < 0.6, loops = sq && uni() < 0.5;
    tg_dtype dt = uni() < 0.5 ? TG_F32 : TG_F64;
    double spacing = uni() < 0.5 ? 0.125 : 0.1;
    double c = uni() < 0.5 ? spacing * (double)(1 + (int)(uni() * 3)) : 0.02 + uni() * 0.3;
    int64_t k = uni() < 0.5 ? 0 : 1 + (int64_t)(uni() * 12);
    pts D = pts_new(1 + (int64_t)(uni() * 400), dim, dt), S = pts_new((int64_t)(uni() * 400), dim, dt);
    fill_mixed(&D, spacing);
    fill_mixed(&S, spacing);
    snprintf(name, sizeof name, "fuzz %d: %dD %s %s c=%.4g k=%lld", q, dim, dt == TG_F32 ? "f32" : "f64",
             sq ? (loops ? "square+loops" : "square") : "bipartite", c, (long long)k);
    run_case(name, &D, sq ? NULL : &S, c, k, sq, loops);
    free(D.p), free(S.p);
  }
}

static void error_cases(void) {
  pts D = uniform(20, 3, TG_F64, 0, 1), S = uniform(10, 3, TG_F32, 0, 1);
  host_radius_args a = {20, 10, 3, TG_F64, D.p, NULL, 0.3, 0, 1, 0};
  a.n_src = 20;
  ((double *)D.p)[7 * 3 + 1] = NAN;
  expect_error("NaN in pos_dst point 7", &a, "pos_dst point 7 ");
  ((double *)D.p)[7 * 3 + 1] = 0.5;
  ((double *)D.p)[19 * 3 + 2] = -INFINITY;
  expect_error("-inf in pos_dst point 19", &a, "pos_dst point 19 ");
  ((double *)D.p)[19 * 3 + 2] = 0.5;
  pts D32 = uniform(20, 3, TG_F32, 0, 1);
  host_radius_args b = {20, 10, 3, TG_F32, D32.p, S.p, 0.3, 0, 0, 0};
  ((float *)S.p)[3 * 3] = INFINITY;
  expect_error("inf in pos_src point 3 (f32)", &b, "pos_src point 3 ");
  ((float *)S.p)[3 * 3] = 0.5f;
  host_radius_args c = b;
  c.dim = 4;
  expect_error("dim 4", &c, "dim");
  c = b, c.dtype = TG_F16;
  expect_error("dtype f16", &c, "f32 or f64");
  c = b, c.cutoff = 0;
  expect_error("cutoff 0", &c, "cutoff");
  c = b, c.cutoff = NAN;
  expect_error("cutoff NaN", &c, "cutoff");
  c = b, c.cutoff = INFINITY;
  expect_error("cutoff inf", &c, "cutoff");
  c = b, c.max_neighbors = -1;
  expect_error("max_neighbors -1", &c, "max_neighbors");
  c = b, c.square = 1;
  expect_error("square with n_src != n_dst", &c, "square");
  c = b, c.self_loops = 1;
  expect_error("self loops on a bipartite graph", &c, "self loops");
  c = b, c.pos_src = NULL;
  expect_error("NULL pos_src", &c, "NULL");
  c = b, c.n_dst = -1;
  expect_error("n_dst -1", &c, "counts");
  c = b, c.n_src = (int64_t)INT32_MAX + 1;
  expect_error("n_src 2^31", &c, "counts");
  expect_error("NULL args", NULL, "NULL");
  free(D.p), free(S.p), free(D32.p);
}

static int dcmp(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

static void timing(int64_t n, double c, int reps) {
  pts P = uniform(n, 3, TG_F32, 0, 1);
  host_radius_args a = {n, n, 3, TG_F32, P.p, NULL, c, 0, 1, 0};
  double t[16], tc[16], tp[16];
  int64_t nnz = 0, *perm = malloc((size_t)n * sizeof *perm);
  for (int r = 0; r < reps; r++) {
    int64_t *rp;
    int32_t *col;
    double t0 = now_ms(), c0 = cpu_ms();
    tg_status st = host_radius_build(&a, &rp, &col, &nnz, NULL, NULL, 0);
    t[r] = now_ms() - t0;
    tc[r] = cpu_ms() - c0;
    if (st != TG_OK) {
      printf("FAIL timing: status %d\n", (int)st);
      g_fail++;
      return;
    }
    free(rp), free(col);
    t0 = now_ms();
    host_radius_morton(n, 3, TG_F32, P.p, perm, NULL, 0);
    tp[r] = now_ms() - t0;
  }
  qsort(t, (size_t)reps, sizeof *t, dcmp);
  qsort(tc, (size_t)reps, sizeof *tc, dcmp);
  qsort(tp, (size_t)reps, sizeof *tp, dcmp);
  printf("TIME host radius n=%lld c=%g: nnz %lld (%.1f per point), build median %.2f ms wall (min %.2f), "
         "%.2f ms cpu; Morton order %.2f ms\n",
         (long long)n, c, (long long)nnz, (double)nnz / n, t[reps / 2], t[0], tc[reps / 2], tp[reps / 2]);
  free(P.p), free(perm);
}

int main(int argc, char **argv) {
  random_cases();
  lattice_cases();
  degenerate_cases();
  extreme_cases();
  fuzz_cases(300);
  error_cases();
  threaded_cases();
  printf("%d cases, %d failed\n", g_cases, g_fail);
  timing(100000, 0.035, 7);
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--big")) timing(atoll(argv[i + 1]), 0.035 * cbrt(100000.0 / atof(argv[i + 1])), 1);
  printf(g_fail ? "FAIL check_radius: %d failures\n" : "PASS check_radius\n", g_fail);
  return g_fail ? 1 : 0;
}
