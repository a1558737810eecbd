/* Radius graphs from point positions, host builder (host/radius.h).
 *
 * Cell list. The sources are binned into a grid over their bounding box; a pair within the cutoff
 * always lies in neighbouring cells (|cell_d(i) - cell_d(j)| <= 1 in every dimension), so a
 * destination scans its 3^dim neighbour cells and tests each candidate with the exact d2 of the
 * header. The grid only limits which pairs are tested, never which pass: the result is the brute
 * force result.
 * Why neighbouring cells suffice. Cell coordinates are t = floor((0.5 x - 0.5 lo) * k), k = 1 / hh,
 * hh = r (1 + 2^-16) / 2 (or larger), r = max(cutoff, 2^-500). A passing pair has
 * fl((x_j - x_i)^2) <= fl(c * c), so |x_j - x_i| <= r (1 + 2^-51); the rounding of t adds at most
 * 3 * 2^-53 * (t_i + t_j) <= 2^-21 cells with at most 2^30 cells per dimension, well inside the
 * 2^-16 slack, so |t_j - t_i| <= 1 and the floors differ by at most 1. (r >= 2^-500 covers c * c
 * near or below the subnormal range, where fl(diff^2) <= c * c only bounds |diff| by about 2^-537.)
 * When c * c overflows every pair passes and the grid is one cell. Half scale keeps 0.5 x - 0.5 lo
 * finite for every finite input.
 * Grid size. At most cap = min(2^30, max(4096, 4 n_src)) cells; the cell edge grows (x 1.25, x 2,
 * x 2^60 when far off) until the grid fits, so huge coordinates give fewer, larger cells. */
#if defined(__linux__)
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity */
#endif
#endif
#include "radius.h"
#include "../tape/alloc.h"

#if defined(__unix__) || defined(__APPLE__)
#define RADIUS_THREADS 1
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#endif

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every d2 and grid computation here must round each product before it is added (the GPU builder
 * uses __dmul_rn / __dadd_rn). GCC honours -ffp-contract per function through this pragma (ISO C
 * mode already defaults to off); clang through the standard pragma. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

static tg_status fail(tg_status st, char *msg, size_t cap, const char *fmt, ...) {
  if (msg && cap) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
  }
  return st;
}

static inline double coord(const void *p, tg_dtype dt, int64_t i) {
  return dt == TG_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

/* First point of [n, dim] with a non-finite coordinate, or -1. */
static int64_t first_bad(const void *p, tg_dtype dt, int64_t n, int dim) {
  for (int64_t i = 0; i < n * dim; i++)
    if (!isfinite(coord(p, dt, i))) return i / dim;
  return -1;
}

/* Order-preserving map of a double onto uint64 (-0.0 below +0.0): min / max with the same result
 * bits on host and GPU. */
static inline uint64_t okey(double x) {
  uint64_t u;
  memcpy(&u, &x, 8);
  return (u >> 63) ? ~u : u | 0x8000000000000000ull;
}
static inline double unkey(uint64_t k) {
  uint64_t u = (k >> 63) ? k & 0x7fffffffffffffffull : ~k;
  double x;
  memcpy(&x, &u, 8);
  return x;
}

static void bbox(const void *p, tg_dtype dt, int64_t n, int dim, double lo[3], double hi[3]) {
  uint64_t kl[3] = {UINT64_MAX, UINT64_MAX, UINT64_MAX}, kh[3] = {0, 0, 0};
  for (int64_t i = 0; i < n; i++)
    for (int d = 0; d < dim; d++) {
      uint64_t k = okey(coord(p, dt, i * dim + d));
      if (k < kl[d]) kl[d] = k;
      if (k > kh[d]) kh[d] = k;
    }
  for (int d = 0; d < 3; d++) {
    lo[d] = d < dim && n > 0 ? unkey(kl[d]) : 0.0;
    hi[d] = d < dim && n > 0 ? unkey(kh[d]) : 0.0;
  }
}

typedef struct grid {
  double lo[3]; /* 0.5 * source minimum */
  double k;     /* cells per half-scale unit */
  int64_t g[3]; /* cells per dimension (1 beyond dim) */
} grid;

static int64_t grid_cap(int64_t n_src) {
  int64_t c = 4 * n_src > 4096 ? 4 * n_src : 4096;
  return c < ((int64_t)1 << 30) ? c : (int64_t)1 << 30;
}

static void grid_make(grid *G, const double lo[3], const double hi[3], int dim, double cutoff, int64_t cap) {
  double e[3];
  for (int d = 0; d < 3; d++) {
    double h1 = 0.5 * hi[d], h0 = 0.5 * lo[d];
    G->lo[d] = h0;
    e[d] = d < dim ? h1 - h0 : 0.0;
    G->g[d] = 1;
  }
  double cc = cutoff * cutoff;
  if (isinf(cc)) {
    G->k = 0.0;
    return;
  }
  double r = cutoff > 0x1p-500 ? cutoff : 0x1p-500;
  double hh = (r * (1.0 + 0x1p-16)) * 0.5;
  for (;;) {
    double k = 1.0 / hh, prod = 1.0;
    for (int d = 0; d < dim; d++)
      prod *= floor(e[d] * k) + 1.0;
    if (prod <= (double)cap) {
      G->k = k;
      for (int d = 0; d < dim; d++)
        G->g[d] = (int64_t)(floor(e[d] * k) + 1.0);
      return;
    }
    hh *= prod > ldexp((double)cap, 60 * dim) ? 0x1p60 : prod > ldexp((double)cap, dim) ? 2.0 : 1.25;
  }
}

/* Cell coordinate of x in dimension d, clamped to [lo, hi]. */
static inline int64_t cell_of(const grid *G, int d, double x, int64_t lo, int64_t hi) {
  double h = 0.5 * x;
  double u = h - G->lo[d];
  double t = floor(u * G->k);
  if (!(t >= (double)lo)) return lo;
  if (t > (double)hi) return hi;
  return (int64_t)t;
}

#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline double
dist2(const double *a, const double *b, int dim) {
  double d0 = b[0] - a[0];
  double s = d0 * d0;
  if (dim > 1) {
    double d1 = b[1] - a[1];
    double s1 = d1 * d1;
    s = s + s1;
  }
  if (dim > 2) {
    double d2 = b[2] - a[2];
    double s2 = d2 * d2;
    s = s + s2;
  }
  return s;
}

typedef struct cand {
  double d2;
  int32_t j;
} cand;

static inline int cand_less(const cand *a, const cand *b) { return a->d2 < b->d2 || (a->d2 == b->d2 && a->j < b->j); }
static int cand_cmp(const void *x, const void *y) {
  const cand *a = x, *b = y;
  return cand_less(a, b) ? -1 : cand_less(b, a) ? 1 : 0;
}
static int i32_cmp(const void *x, const void *y) {
  int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
  return (a > b) - (a < b);
}

static void sort_cands(cand *c, int64_t m) {
  if (m > 48) {
    qsort(c, (size_t)m, sizeof *c, cand_cmp);
    return;
  }
  for (int64_t a = 1; a < m; a++) {
    cand v = c[a];
    int64_t b = a;
    for (; b > 0 && cand_less(&v, &c[b - 1]); b--)
      c[b] = c[b - 1];
    c[b] = v;
  }
}

/* Rows are short (tens of columns): up to 32 are sorted by rank (each value's position is the number
 * of values before it, ties by position), which has no data-dependent branch to mispredict. */
static void sort_cols(int32_t *c, int64_t m) {
  if (m > 48) {
    qsort(c, (size_t)m, sizeof *c, i32_cmp);
    return;
  }
  if (m <= 32) {
    int32_t v[32];
    memcpy(v, c, (size_t)m * sizeof *v);
    for (int a = 0; a < m; a++) {
      int r = 0;
      for (int b = 0; b < m; b++)
        r += (v[b] < v[a]) | ((v[b] == v[a]) & (b < a));
      c[r] = v[a];
    }
    return;
  }
  for (int64_t a = 1; a < m; a++) {
    int32_t v = c[a];
    int64_t b = a;
    for (; b > 0 && v < c[b - 1]; b--)
      c[b] = c[b - 1];
    c[b] = v;
  }
}

/* A growable array; returns 0 when the allocation fails. */
static int grow(void **p, int64_t *cap, int64_t need, size_t elem) {
  if (need <= *cap) return 1;
  int64_t c = *cap > 0 ? *cap : 64;
  while (c < need)
    c *= 2;
  void *q = tgi_realloc(*p, (size_t)c * elem);
  if (!q) return 0;
  *p = q;
  *cap = c;
  return 1;
}

typedef struct cells {
  grid G;
  uint32_t *start; /* [ncells + 1]: sources of cell c are sorted positions start[c] .. start[c + 1] */
  double *pos;     /* [n_src, dim] in cell order */
  int32_t *idx;    /* [n_src] original index of each sorted source */
} cells;

static tg_status cells_build(cells *C, const host_radius_args *a, const void *ps, int64_t n_src) {
  int dim = a->dim;
  double lo[3], hi[3];
  bbox(ps, a->dtype, n_src, dim, lo, hi);
  grid_make(&C->G, lo, hi, dim, a->cutoff, grid_cap(n_src));
  int64_t nc = C->G.g[0] * C->G.g[1] * C->G.g[2];
  C->start = tgi_calloc((size_t)nc + 1, sizeof *C->start);
  C->pos = tgi_malloc((size_t)(n_src > 0 ? n_src : 1) * dim * sizeof *C->pos);
  C->idx = tgi_malloc((size_t)(n_src > 0 ? n_src : 1) * sizeof *C->idx);
  uint32_t *cell = tgi_malloc((size_t)(n_src > 0 ? n_src : 1) * sizeof *cell);
  if (!C->start || !C->pos || !C->idx || !cell) {
    free(cell);
    return TG_ERR_OUT_OF_MEMORY;
  }
  for (int64_t j = 0; j < n_src; j++) {
    int64_t id = 0;
    for (int d = dim - 1; d >= 0; d--)
      id = id * C->G.g[d] + cell_of(&C->G, d, coord(ps, a->dtype, j * dim + d), 0, C->G.g[d] - 1);
    cell[j] = (uint32_t)id;
    C->start[id + 1]++;
  }
  for (int64_t c = 0; c < nc; c++)
    C->start[c + 1] += C->start[c];
  /* stable counting sort: within a cell, sources by index */
  uint32_t *fill = tgi_malloc((size_t)nc * sizeof *fill);
  if (!fill) {
    free(cell);
    return TG_ERR_OUT_OF_MEMORY;
  }
  memcpy(fill, C->start, (size_t)nc * sizeof *fill);
  for (int64_t j = 0; j < n_src; j++) {
    uint32_t s = fill[cell[j]]++;
    C->idx[s] = (int32_t)j;
    for (int d = 0; d < dim; d++)
      C->pos[(int64_t)s * dim + d] = coord(ps, a->dtype, j * dim + d);
  }
  free(fill);
  free(cell);
  return TG_OK;
}

#if defined(__GNUC__)
#define RADIUS_INLINE static inline __attribute__((always_inline))
#else
#define RADIUS_INLINE static inline
#endif

/* Appends the passing candidates of the destination point p (index i): (d2, source) pairs to *cb
 * when keep_d2 (max_neighbors needs d2), else the sources alone to *jb from position jat. Inlined per
 * dim and keep_d2 (constants at each call), so the inner loop carries no dim tests. */
RADIUS_INLINE int64_t scan_point(const cells *C, int dim, int keep_d2, const double *p, int64_t i, int skip_self,
                                 double cc, cand **cb, int64_t *cbcap, int32_t **jb, int64_t *jbcap, int64_t jat,
                                 int *oom) {
  const grid *G = &C->G;
  int64_t c[3] = {0, 0, 0};
  for (int d = 0; d < dim; d++)
    c[d] = cell_of(G, d, p[d], -2, G->g[d] + 1);
  int64_t m = 0;
  int64_t z0 = dim > 2 ? c[2] - 1 : 0, z1 = dim > 2 ? c[2] + 1 : 0;
  int64_t y0 = dim > 1 ? c[1] - 1 : 0, y1 = dim > 1 ? c[1] + 1 : 0;
  int64_t x0 = c[0] - 1 > 0 ? c[0] - 1 : 0, x1 = c[0] + 1 < G->g[0] - 1 ? c[0] + 1 : G->g[0] - 1;
  if (x0 > x1) return 0;
  for (int64_t z = z0; z <= z1; z++) {
    if (z < 0 || z >= G->g[2]) continue;
    for (int64_t y = y0; y <= y1; y++) {
      if (y < 0 || y >= G->g[1]) continue;
      int64_t base = (z * G->g[1] + y) * G->g[0];
      uint32_t s0 = C->start[base + x0], s1 = C->start[base + x1 + 1];
      if (s0 == s1) continue;
      int64_t need = (keep_d2 ? 0 : jat) + m + (int64_t)(s1 - s0);
      if (keep_d2 ? need > *cbcap && !grow((void **)cb, cbcap, need, sizeof **cb)
                  : need > *jbcap && !grow((void **)jb, jbcap, need, sizeof **jb)) {
        *oom = 1;
        return m;
      }
      /* branch-free: every candidate is written, m advances past the passing ones */
      if (keep_d2) {
        cand *out = *cb;
        for (uint32_t s = s0; s < s1; s++) {
          double d2 = dist2(p, C->pos + (int64_t)s * dim, dim);
          int32_t j = C->idx[s];
          out[m].d2 = d2;
          out[m].j = j;
          m += (d2 <= cc) & !(skip_self & (j == i));
        }
      } else {
        int32_t *out = *jb + jat;
        for (uint32_t s = s0; s < s1; s++) {
          double d2 = dist2(p, C->pos + (int64_t)s * dim, dim);
          int32_t j = C->idx[s];
          out[m] = j;
          m += (d2 <= cc) & !(skip_self & (j == i));
        }
      }
    }
  }
  return m;
}

static tg_status check_args(const host_radius_args *a, char *msg, size_t cap) {
  if (!a) return fail(TG_ERR_INVALID_ARGUMENT, msg, cap, "radius: NULL arguments");
  if (a->dim < 1 || a->dim > 3) return fail(TG_ERR_INVALID_ARGUMENT, msg, cap, "radius: dim %d not in 1..3", a->dim);
  if (a->dtype != TG_F32 && a->dtype != TG_F64)
    return fail(TG_ERR_INVALID_ARGUMENT, msg, cap, "radius: positions must be f32 or f64");
  if (a->n_dst < 0 || a->n_dst > INT32_MAX || a->n_src < 0 || a->n_src > INT32_MAX)
    return fail(TG_ERR_INVALID_ARGUMENT, msg, cap, "radius: point counts %lld, %lld not in 0..INT32_MAX",
                (long long)a->n_dst, (long long)a->n_src);
  if (!(isfinite(a->cutoff) && a->cutoff > 0))
    return fail(TG_ERR_INVALID_ARGUMENT, msg, cap, "radius: cutoff %g must be finite and > 0", a->cutoff);
  if (a->max_neighbors < 0)
    return fail(TG_ERR_INVALID_ARGUMENT, msg, cap, "radius: max_neighbors %lld < 0", (long long)a->max_neighbors);
  if (a->square && a->n_src != a->n_dst)
    return fail(TG_ERR_INVALID_ARGUMENT, msg, cap, "radius: square graph with n_src %lld != n_dst %lld",
                (long long)a->n_src, (long long)a->n_dst);
  if (a->self_loops && !a->square)
    return fail(TG_ERR_INVALID_ARGUMENT, msg, cap, "radius: self loops need a square graph");
  if ((a->n_dst > 0 && !a->pos_dst) || (!a->square && a->n_src > 0 && !a->pos_src))
    return fail(TG_ERR_INVALID_ARGUMENT, msg, cap, "radius: NULL positions");
  int64_t b = first_bad(a->pos_dst, a->dtype, a->n_dst, a->dim);
  if (b >= 0)
    return fail(TG_ERR_INVALID_ARGUMENT, msg, cap, "radius: pos_dst point %lld has a non-finite coordinate",
                (long long)b);
  if (!a->square && (b = first_bad(a->pos_src, a->dtype, a->n_src, a->dim)) >= 0)
    return fail(TG_ERR_INVALID_ARGUMENT, msg, cap, "radius: pos_src point %lld has a non-finite coordinate",
                (long long)b);
  return TG_OK;
}

/* Rows are built in chunks of destinations (in the order ord, NULL = 0, 1, ...), each chunk into
 * its own column buffer, by the caller's thread and helpers taking chunks from a shared counter; a
 * second pass of the same kind copies each chunk's rows to their CSR place. Every row is computed
 * alone, so the result does not depend on the thread count or the schedule. */
enum { ROWS_CHUNK = 2048, ROWS_MIN_PARALLEL = 16384, ROWS_MAX_THREADS = 64 };

typedef struct rows_job {
  const host_radius_args *a;
  const cells *C;
  const int32_t *ord;
  int64_t nchunks;
  int32_t **col; /* [nchunks] column buffers */
  int64_t *cap;  /* [nchunks] their capacities */
  int64_t *at;   /* [n_dst] row ord[t] starts at col[t / ROWS_CHUNK][at[t]] */
  int64_t *len;  /* [n_dst] row i has len[i] entries */
  int64_t next;  /* next chunk to take (atomic) */
  int oom;       /* an allocation failed (atomic) */
  /* second pass (out != NULL): each chunk's rows are copied to out + rp[i] */
  const int64_t *rp;
  int32_t *out;
} rows_job;

/* Rows [t0, t1) of the order into the buffer col / cap; returns 0 when out of memory. */
static int build_chunk(rows_job *J, int64_t t0, int64_t t1, int32_t **col, int64_t *colcap, cand **cb, int64_t *cbcap) {
  const host_radius_args *a = J->a;
  const cells *C = J->C;
  int dim = a->dim, oom = 0;
  double cc = a->cutoff * a->cutoff;
  int64_t k = a->max_neighbors, nnz = 0;
  int skip = a->square && !a->self_loops;
  for (int64_t t = t0; t < t1; t++) {
    int64_t i = J->ord ? J->ord[t] : t, m = 0;
    double q[3] = {0, 0, 0};
    const double *p = q;
    if (J->ord) /* square: destination t in cell order is source t */
      p = C->pos + t * dim;
    else
      for (int d = 0; d < dim; d++)
        q[d] = coord(a->pos_dst, a->dtype, i * dim + d);
#define SCAN(D, K) scan_point(C, D, K, p, i, skip, cc, cb, cbcap, col, colcap, nnz, &oom)
    if (a->n_src > 0) switch (dim * 2 + (k > 0)) {
      case 2: m = SCAN(1, 0); break;
      case 3: m = SCAN(1, 1); break;
      case 4: m = SCAN(2, 0); break;
      case 5: m = SCAN(2, 1); break;
      case 6: m = SCAN(3, 0); break;
      default: m = SCAN(3, 1); break;
      }
#undef SCAN
    if (oom) return 0;
    if (k > 0) { /* the k smallest (d2, j), then their sources */
      if (m > k) {
        sort_cands(*cb, m);
        m = k;
      }
      if (!grow((void **)col, colcap, nnz + m, sizeof **col)) return 0;
      for (int64_t e = 0; e < m; e++)
        (*col)[nnz + e] = (*cb)[e].j;
    }
    if (m > 1) sort_cols(*col + nnz, m);
    J->at[t] = nnz;
    J->len[i] = m;
    nnz += m;
  }
  return 1;
}

/* Takes chunks until none is left (or one failed). */
static void *rows_worker(void *arg) {
  rows_job *J = arg;
  cand *cb = NULL;
  int64_t cbcap = 0;
  for (;;) {
    if (__atomic_load_n(&J->oom, __ATOMIC_RELAXED)) break;
    int64_t c = __atomic_fetch_add(&J->next, 1, __ATOMIC_RELAXED);
    if (c >= J->nchunks) break;
    int64_t t0 = c * ROWS_CHUNK, t1 = t0 + ROWS_CHUNK < J->a->n_dst ? t0 + ROWS_CHUNK : J->a->n_dst;
    if (J->out) {
      for (int64_t t = t0; t < t1; t++) {
        int64_t i = J->ord ? J->ord[t] : t;
        if (J->len[i]) memcpy(J->out + J->rp[i], J->col[c] + J->at[t], (size_t)J->len[i] * sizeof *J->out);
      }
      continue;
    }
    if (!build_chunk(J, t0, t1, &J->col[c], &J->cap[c], &cb, &cbcap)) {
      __atomic_store_n(&J->oom, 1, __ATOMIC_RELAXED);
      break;
    }
  }
  free(cb);
  return NULL;
}

/* Processors this process may run on (1 when unknown). */
static int64_t cpu_count(void) {
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
#if defined(RADIUS_THREADS)
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? n : 1;
#else
  return 1;
#endif
}

/* Runs the job: the caller's thread and, for large inputs, helper threads (a helper that cannot be
 * started only leaves more chunks to the others). Small inputs stay on the caller's thread, where
 * host fault injection (thread-local) sees every allocation. */
static void rows_run(rows_job *J) {
  int64_t nt = J->a->n_dst >= ROWS_MIN_PARALLEL ? cpu_count() : 1;
  if (nt > J->nchunks) nt = J->nchunks;
  if (nt > ROWS_MAX_THREADS) nt = ROWS_MAX_THREADS;
#if defined(RADIUS_THREADS)
  pthread_t th[ROWS_MAX_THREADS];
  int started[ROWS_MAX_THREADS] = {0};
  for (int64_t w = 1; w < nt; w++)
    started[w] = pthread_create(&th[w], NULL, rows_worker, J) == 0;
  rows_worker(J);
  for (int64_t w = 1; w < nt; w++)
    if (started[w]) pthread_join(th[w], NULL);
#else
  (void)nt;
  rows_worker(J);
#endif
}

/* Bit b of q moved to bit b * dim (q < 2^(63 / dim)). */
static inline uint64_t spread(uint64_t q, int dim) {
  if (dim == 2) {
    q &= 0x7fffffffull;
    q = (q | q << 16) & 0x0000ffff0000ffffull;
    q = (q | q << 8) & 0x00ff00ff00ff00ffull;
    q = (q | q << 4) & 0x0f0f0f0f0f0f0f0full;
    q = (q | q << 2) & 0x3333333333333333ull;
    q = (q | q << 1) & 0x5555555555555555ull;
  } else if (dim == 3) {
    q &= 0x1fffffull;
    q = (q | q << 32) & 0x001f00000000ffffull;
    q = (q | q << 16) & 0x001f0000ff0000ffull;
    q = (q | q << 8) & 0x100f00f00f00f00full;
    q = (q | q << 4) & 0x10c30c30c30c30c3ull;
    q = (q | q << 2) & 0x1249249249249249ull;
  }
  return q;
}

static void morton_codes(int64_t n, int dim, tg_dtype dt, const void *pos, uint64_t *code) {
  double lo[3], hi[3], e = 0.0;
  bbox(pos, dt, n, dim, lo, hi);
  double h0[3];
  for (int d = 0; d < dim; d++) {
    double h1 = 0.5 * hi[d];
    h0[d] = 0.5 * lo[d];
    double ed = h1 - h0[d];
    if (ed > e) e = ed;
  }
  int B = 63 / dim;
  double scale = ldexp(1.0, B);
  for (int64_t i = 0; i < n; i++) {
    uint64_t c = 0;
    for (int d = 0; d < dim; d++) {
      uint64_t q = 0;
      if (e > 0.0) {
        double h = 0.5 * coord(pos, dt, i * dim + d);
        double u = h - h0[d];
        double f = floor((u / e) * scale);
        q = f >= scale ? ((uint64_t)1 << B) - 1 : f > 0.0 ? (uint64_t)f : 0;
      }
      c |= spread(q, dim) << d;
    }
    code[i] = c;
  }
}

tg_status host_radius_morton(int64_t n, int dim, tg_dtype dtype, const void *pos, int64_t *perm, char *msg,
                             size_t msg_cap) {
  if (n < 0 || dim < 1 || dim > 3 || (dtype != TG_F32 && dtype != TG_F64) || (n > 0 && (!pos || !perm)))
    return fail(TG_ERR_INVALID_ARGUMENT, msg, msg_cap, "radius: bad Morton arguments");
  int64_t b = first_bad(pos, dtype, n, dim);
  if (b >= 0)
    return fail(TG_ERR_INVALID_ARGUMENT, msg, msg_cap, "radius: pos_dst point %lld has a non-finite coordinate",
                (long long)b);
  if (n == 0) return TG_OK;
  uint64_t *code = tgi_malloc((size_t)n * 2 * sizeof *code);
  int64_t *tmp = tgi_malloc((size_t)n * sizeof *tmp);
  size_t *hist = tgi_malloc(256 * sizeof *hist);
  if (!code || !tmp || !hist) {
    free(code), free(tmp), free(hist);
    return fail(TG_ERR_OUT_OF_MEMORY, msg, msg_cap, "radius: out of host memory (Morton order of %lld points)",
                (long long)n);
  }
  morton_codes(n, dim, dtype, pos, code);
  /* LSD radix sort of (code, index), 8 bits a pass: stable, so ties stay by index */
  uint64_t *ck = code, *ck2 = code + n;
  int64_t *iv = perm, *iv2 = tmp;
  for (int64_t i = 0; i < n; i++)
    iv[i] = i;
  for (int shift = 0; shift < 64; shift += 8) {
    memset(hist, 0, 256 * sizeof *hist);
    for (int64_t i = 0; i < n; i++)
      hist[(ck[i] >> shift) & 255]++;
    if (hist[(ck[0] >> shift) & 255] == (size_t)n) continue; /* one digit value: pass is the identity */
    size_t sum = 0;
    for (int v = 0; v < 256; v++) {
      size_t h = hist[v];
      hist[v] = sum;
      sum += h;
    }
    for (int64_t i = 0; i < n; i++) {
      size_t s = hist[(ck[i] >> shift) & 255]++;
      ck2[s] = ck[i];
      iv2[s] = iv[i];
    }
    uint64_t *tk = ck;
    ck = ck2, ck2 = tk;
    int64_t *ti = iv;
    iv = iv2, iv2 = ti;
  }
  if (iv != perm) memcpy(perm, iv, (size_t)n * sizeof *perm);
  free(code), free(tmp), free(hist);
  return TG_OK;
}

tg_status host_radius_build(const host_radius_args *a, int64_t **row_ptr, int32_t **col_idx, int64_t *nnz,
                            int64_t *perm, char *msg, size_t msg_cap) {
  if (row_ptr) *row_ptr = NULL;
  if (col_idx) *col_idx = NULL;
  if (nnz) *nnz = 0;
  if (!row_ptr || !col_idx || !nnz) return fail(TG_ERR_INVALID_ARGUMENT, msg, msg_cap, "radius: NULL outputs");
  tg_status st = check_args(a, msg, msg_cap);
  if (st != TG_OK) return st;
  int64_t n_dst = a->n_dst, n_src = a->square ? a->n_dst : a->n_src;
  const void *ps = a->square ? a->pos_dst : a->pos_src;

  cells C = {0};
  int64_t nchunks = (n_dst + ROWS_CHUNK - 1) / ROWS_CHUNK;
  int64_t *rp = tgi_malloc((size_t)(n_dst + 1) * sizeof *rp);
  int64_t *at = tgi_malloc((size_t)(n_dst > 0 ? n_dst : 1) * sizeof *at);
  int64_t *len = tgi_malloc((size_t)(n_dst > 0 ? n_dst : 1) * sizeof *len);
  int32_t **cols = tgi_calloc((size_t)(nchunks > 0 ? nchunks : 1), sizeof *cols);
  int64_t *caps = tgi_calloc((size_t)(nchunks > 0 ? nchunks : 1), sizeof *caps);
  int32_t *col = NULL;
  int64_t total = 0;
  st = rp && at && len && cols && caps ? cells_build(&C, a, ps, n_src) : TG_ERR_OUT_OF_MEMORY;
  /* square: destinations in cell order (the sources' order), for locality; rows are put back in
   * index order by the second pass */
  rows_job J = {a, &C, NULL, nchunks, cols, caps, at, len, 0, 0, NULL, NULL};
  if (st == TG_OK) {
    J.ord = a->square ? C.idx : NULL;
    rows_run(&J);
    if (J.oom) st = TG_ERR_OUT_OF_MEMORY;
  }
  if (st == TG_OK) {
    rp[0] = 0;
    for (int64_t i = 0; i < n_dst; i++)
      rp[i + 1] = rp[i] + len[i];
    total = rp[n_dst];
    col = tgi_malloc((size_t)(total > 0 ? total : 1) * sizeof *col);
    if (!col) st = TG_ERR_OUT_OF_MEMORY;
  }
  if (st == TG_OK) {
    J.next = 0, J.rp = rp, J.out = col;
    rows_run(&J);
  }
  for (int64_t c = 0; cols && c < nchunks; c++)
    free(cols[c]);
  free(cols), free(caps);
  if (st == TG_OK && perm) st = host_radius_morton(n_dst, a->dim, a->dtype, a->pos_dst, perm, msg, msg_cap);
  free(C.start), free(C.pos), free(C.idx), free(at), free(len);
  if (st != TG_OK) {
    free(rp), free(col);
    if (st == TG_ERR_OUT_OF_MEMORY)
      fail(st, msg, msg_cap, "radius: out of host memory (%lld destinations, %lld sources)", (long long)n_dst,
           (long long)n_src);
    return st;
  }
  *row_ptr = rp;
  *col_idx = col;
  *nnz = total;
  return TG_OK;
}
