/* Host reference kernels for elementwise ops. Math in double, stored in the value's dtype. */
#include "elementwise.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#define SQRT_2_OVER_PI 0.7978845608028654

static inline double unary_f(host_unary_op op, double a, double x) {
  switch (op) {
  case HOST_SCALE: return a * x;
  case HOST_RELU: return x > 0 ? x : 0;
  case HOST_LEAKY_RELU: return x > 0 ? x : a * x;
  case HOST_GELU: return 0.5 * x * (1 + tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)));
  case HOST_TANH: return tanh(x);
  case HOST_ELU: return x > 0 ? x : a * expm1(x);
  }
  return 0;
}

/* f'(x); y = f(x) is passed for tanh. */
static inline double unary_df(host_unary_op op, double a, double x, double y) {
  switch (op) {
  case HOST_SCALE: return a;
  case HOST_RELU: return x > 0 ? 1 : 0;
  case HOST_LEAKY_RELU: return x > 0 ? 1 : a;
  case HOST_GELU: {
    /* d/dx 0.5 x (1 + tanh u), u = c (x + k x^3) */
    double u = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x);
    double th = tanh(u);
    double du = SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x);
    /* once tanh saturates (sech^2 u == 0, |x| > ~8) the second term is 0 exactly; computing it would
     * give 0 * inf = NaN where x^3 overflows (|x| > ~5e102) */
    double s2 = 1 - th * th;
    return 0.5 * (1 + th) + (s2 == 0 ? 0.0 : 0.5 * x * s2 * du);
  }
  case HOST_TANH: return 1 - y * y;
  case HOST_ELU: return x > 0 ? 1 : a * exp(x);
  }
  return 0;
}

static inline double binary_f(host_binary_op op, double a, double b) {
  return op == HOST_ADD ? a + b : op == HOST_SUB ? a - b : a * b;
}

#define DEFINE_KERNELS(T, S)                                                                                           \
  static void bin_fwd_##S(host_binary_op op, const T *a, int64_t na, const T *b, int64_t nb, T *y) {                   \
    int64_t n = na > nb ? na : nb;                                                                                     \
    if (na == nb) {                                                                                                    \
      for (int64_t i = 0; i < n; i++)                                                                                  \
        y[i] = (T)binary_f(op, a[i], b[i]);                                                                            \
    } else { /* the smaller count divides the larger: blocks of it, no division per element */                         \
      int64_t m = na < nb ? na : nb;                                                                                   \
      for (int64_t base = 0; base < n; base += m)                                                                      \
        for (int64_t k = 0; k < m; k++)                                                                                \
          y[base + k] = (T)binary_f(op, a[na == m ? k : base + k], b[nb == m ? k : base + k]);                         \
    }                                                                                                                  \
  }                                                                                                                    \
  static void bin_bwd_##S(host_binary_op op, const T *a, int64_t na, const T *b, int64_t nb, const T *gy, T *ga,       \
                          T *gb) {                                                                                     \
    int64_t n = na > nb ? na : nb, m = na < nb ? na : nb;                                                              \
    for (int64_t base = 0; base < n; base += m) /* the order of the old i % n loop, without divisions */               \
      for (int64_t k = 0; k < m; k++) {                                                                                \
        int64_t i = base + k, ia = na == m ? k : i, ib = nb == m ? k : i;                                              \
        double g = gy[i];                                                                                              \
        if (ga) ga[ia] += (T)(op == HOST_MUL ? g * b[ib] : g);                                                         \
        if (gb) gb[ib] += (T)(op == HOST_MUL ? g * a[ia] : op == HOST_SUB ? -g : g);                                   \
      }                                                                                                                \
  }                                                                                                                    \
  static void un_fwd_##S(host_unary_op op, double al, const T *x, T *y, int64_t n) {                                   \
    for (int64_t i = 0; i < n; i++)                                                                                    \
      y[i] = (T)unary_f(op, al, x[i]);                                                                                 \
  }                                                                                                                    \
  static void un_bwd_##S(host_unary_op op, double al, const T *x, const T *y, const T *gy, T *gx, int64_t n) {         \
    for (int64_t i = 0; i < n; i++)                                                                                    \
      gx[i] += (T)(gy[i] * unary_df(op, al, x[i], y ? y[i] : 0));                                                      \
  }

DEFINE_KERNELS(float, f32)
DEFINE_KERNELS(double, f64)

void host_binary_forward(tg_dtype dt, host_binary_op op, const void *a, int64_t na, const void *b, int64_t nb,
                         void *y) {
  if (dt == TG_F32)
    bin_fwd_f32(op, a, na, b, nb, y);
  else
    bin_fwd_f64(op, a, na, b, nb, y);
}

void host_binary_backward(tg_dtype dt, host_binary_op op, const void *a, int64_t na, const void *b, int64_t nb,
                          const void *gy, void *ga, void *gb) {
  if (dt == TG_F32)
    bin_bwd_f32(op, a, na, b, nb, gy, ga, gb);
  else
    bin_bwd_f64(op, a, na, b, nb, gy, ga, gb);
}

/* ------------------------------------------------------------ broadcasting */

int host_bcast_plan(host_bcast *p, int nda, const int64_t *sha, int ndb, const int64_t *shb, int *ndy, int64_t *shy) {
  int nd = nda > ndb ? nda : ndb;
  int64_t ea[TG_MAX_DIMS], eb[TG_MAX_DIMS]; /* sizes aligned from the right, 1 where missing */
  for (int d = 0; d < nd; d++) {
    ea[d] = d >= nd - nda ? sha[d - (nd - nda)] : 1;
    eb[d] = d >= nd - ndb ? shb[d - (nd - ndb)] : 1;
    if (ea[d] != eb[d] && ea[d] != 1 && eb[d] != 1) return d;
    shy[d] = ea[d] > eb[d] ? ea[d] : eb[d];
  }
  *ndy = nd;
  memset(p, 0, sizeof *p);
  bool pa[TG_MAX_DIMS], pb[TG_MAX_DIMS]; /* operand present (not broadcast) in merged dim */
  int m = 0;
  for (int d = 0; d < nd; d++) {
    if (shy[d] == 1) continue;
    bool xa = ea[d] == shy[d], xb = eb[d] == shy[d];
    if (m > 0 && xa == pa[m - 1] && xb == pb[m - 1]) {
      p->shape[m - 1] *= shy[d];
    } else {
      p->shape[m] = shy[d];
      pa[m] = xa;
      pb[m] = xb;
      m++;
    }
  }
  p->ndim = m;
  int64_t na = 1, nb = 1, n = 1;
  for (int d = m - 1; d >= 0; d--) {
    p->sa[d] = pa[d] ? na : 0;
    p->sb[d] = pb[d] ? nb : 0;
    if (pa[d]) na *= p->shape[d];
    if (pb[d]) nb *= p->shape[d];
    n *= p->shape[d];
  }
  p->n = n;
  p->na = na;
  p->nb = nb;
  /* Adjacent merged dims differ in pattern, so with one operand full the other is (0, 1) (repeats
   * along the leading dim: TRAIL) or (1, 0) (one value per row: ROWS) when m == 2. */
  if (na == n && nb == n)
    p->kind = HOST_BC_SAME;
  else if (m == 1)
    p->kind = HOST_BC_TRAIL; /* the other operand is a single element */
  else if (m == 2 && (na == n || nb == n)) {
    bool small_a = nb == n;
    bool rows = small_a ? pa[0] : pb[0];
    p->kind = rows ? HOST_BC_ROWS : HOST_BC_TRAIL;
    if (rows) {
      p->rows = p->shape[0];
      p->cols = p->shape[1];
      p->row_operand = small_a ? 0 : 1;
    }
  } else
    p->kind = HOST_BC_GENERAL;
  return -1;
}

/* A row-major walk over some dims of the plan carrying two element offsets (into y or the operand
 * being reduced, and into the other operand). */
typedef struct {
  int nd;
  int64_t shape[TG_MAX_DIMS], s0[TG_MAX_DIMS], s1[TG_MAX_DIMS];
  int64_t idx[TG_MAX_DIMS], o0, o1;
} walk;

static void walk_start(walk *w) {
  memset(w->idx, 0, sizeof w->idx);
  w->o0 = w->o1 = 0;
}
static void walk_next(walk *w) {
  for (int d = w->nd - 1; d >= 0; d--) {
    w->o0 += w->s0[d];
    w->o1 += w->s1[d];
    if (++w->idx[d] < w->shape[d]) return;
    w->o0 -= w->s0[d] * w->shape[d];
    w->o1 -= w->s1[d] * w->shape[d];
    w->idx[d] = 0;
  }
}
static void walk_add(walk *w, int64_t size, int64_t s0, int64_t s1) {
  w->shape[w->nd] = size;
  w->s0[w->nd] = s0;
  w->s1[w->nd] = s1;
  w->nd++;
}

/* d y / d x for x = operand `which` (0: a, 1: b): add 1, sub +1 / -1, mul the other operand. */
static inline double dpart(host_binary_op op, int which, double other) {
  return op == HOST_MUL ? other : (op == HOST_SUB && which == 1) ? -1 : 1;
}

#define DEFINE_BCAST(T, S)                                                                                             \
  static void bc_fwd_##S(host_binary_op op, const host_bcast *p, const T *a, const T *b, T *y) {                       \
    walk w = {0};                                                                                                      \
    for (int d = 0; d < p->ndim; d++)                                                                                  \
      walk_add(&w, p->shape[d], p->sa[d], p->sb[d]);                                                                   \
    walk_start(&w);                                                                                                    \
    for (int64_t i = 0; i < p->n; i++, walk_next(&w))                                                                  \
      y[i] = (T)binary_f(op, a[w.o0], b[w.o1]);                                                                        \
  }                                                                                                                    \
  /* gx[j] += sum over x's broadcast dims of gy * d(op)/dx: the outer walk runs over x's present dims                  \
   * (row-major, so j counts x's elements), the inner one over its broadcast dims; offsets are into y                  \
   * and into the other operand. */                                                                                    \
  static void bc_bwd_one_##S(host_binary_op op, int which, const host_bcast *p, const T *other, const T *gy, T *gx) {  \
    const int64_t *sx = which ? p->sb : p->sa, *so = which ? p->sa : p->sb;                                            \
    walk outer = {0}, inner = {0};                                                                                     \
    int64_t sy = 1, nx = 1;                                                                                            \
    int64_t ystride[TG_MAX_DIMS];                                                                                      \
    for (int d = p->ndim - 1; d >= 0; d--) {                                                                           \
      ystride[d] = sy;                                                                                                 \
      sy *= p->shape[d];                                                                                               \
    }                                                                                                                  \
    for (int d = 0; d < p->ndim; d++) {                                                                                \
      if (sx[d])                                                                                                       \
        walk_add(&outer, p->shape[d], ystride[d], so[d]);                                                              \
      else                                                                                                             \
        walk_add(&inner, p->shape[d], ystride[d], so[d]);                                                              \
      if (sx[d]) nx *= p->shape[d];                                                                                    \
    }                                                                                                                  \
    int64_t m = p->n / nx;                                                                                             \
    walk_start(&outer);                                                                                                \
    for (int64_t j = 0; j < nx; j++, walk_next(&outer)) {                                                              \
      double s = 0;                                                                                                    \
      walk_start(&inner);                                                                                              \
      for (int64_t k = 0; k < m; k++, walk_next(&inner)) {                                                             \
        int64_t iy = outer.o0 + inner.o0, io = outer.o1 + inner.o1;                                                    \
        s += (double)gy[iy] * dpart(op, which, op == HOST_MUL ? (double)other[io] : 0);                                \
      }                                                                                                                \
      gx[j] = (T)((double)gx[j] + s);                                                                                  \
    }                                                                                                                  \
  }

DEFINE_BCAST(float, f32)
DEFINE_BCAST(double, f64)

/* ROWS: one operand [rows, cols], the other one value per row. Plain loops (the walker's index
 * arithmetic dominated GAT's host step on its [E, 64] * [E, 1] product). */
#define DEFINE_ROWS(T, S)                                                                                              \
  static void rows_fwd_##S(host_binary_op op, const host_bcast *p, const T *a, const T *b, T *y) {                     \
    const T *full = p->row_operand == 0 ? b : a, *row = p->row_operand == 0 ? a : b;                                   \
    const bool row_first = p->row_operand == 0; /* sub is not symmetric */                                             \
    for (int64_t r = 0; r < p->rows; r++) {                                                                            \
      const double rv = (double)row[r];                                                                                \
      const T *f = full + r * p->cols;                                                                                 \
      T *o = y + r * p->cols;                                                                                          \
      if (op == HOST_MUL)                                                                                              \
        for (int64_t c = 0; c < p->cols; c++)                                                                          \
          o[c] = (T)((double)f[c] * rv);                                                                               \
      else if (op == HOST_ADD)                                                                                         \
        for (int64_t c = 0; c < p->cols; c++)                                                                          \
          o[c] = (T)((double)f[c] + rv);                                                                               \
      else                                                                                                             \
        for (int64_t c = 0; c < p->cols; c++)                                                                          \
          o[c] = (T)(row_first ? rv - (double)f[c] : (double)f[c] - rv);                                               \
    }                                                                                                                  \
  }                                                                                                                    \
  static void rows_bwd_##S(host_binary_op op, const host_bcast *p, const T *a, const T *b, const T *gy, T *ga,         \
                           T *gb) {                                                                                    \
    const T *full = p->row_operand == 0 ? b : a, *row = p->row_operand == 0 ? a : b;                                   \
    T *g_full = p->row_operand == 0 ? gb : ga, *g_row = p->row_operand == 0 ? ga : gb;                                 \
    int w_full = p->row_operand == 0, w_row = p->row_operand;                                                          \
    for (int64_t r = 0; r < p->rows; r++) {                                                                            \
      const int64_t o = r * p->cols;                                                                                   \
      if (g_full) {                                                                                                    \
        const double d = dpart(op, w_full, (double)row[r]);                                                            \
        for (int64_t c = 0; c < p->cols; c++)                                                                          \
          g_full[o + c] = (T)((double)g_full[o + c] + (double)gy[o + c] * d);                                          \
      }                                                                                                                \
      if (g_row) {                                                                                                     \
        double s = 0;                                                                                                  \
        if (op == HOST_MUL)                                                                                            \
          for (int64_t c = 0; c < p->cols; c++)                                                                        \
            s += (double)gy[o + c] * (double)full[o + c];                                                              \
        else                                                                                                           \
          for (int64_t c = 0; c < p->cols; c++)                                                                        \
            s += (double)gy[o + c] * dpart(op, w_row, 0);                                                              \
        g_row[r] = (T)((double)g_row[r] + s);                                                                          \
      }                                                                                                                \
    }                                                                                                                  \
  }
DEFINE_ROWS(float, f32)
DEFINE_ROWS(double, f64)

void host_binary_forward_bc(tg_dtype dt, host_binary_op op, const host_bcast *p, const void *a, const void *b,
                            void *y) {
  if (p->kind == HOST_BC_SAME || p->kind == HOST_BC_TRAIL) {
    host_binary_forward(dt, op, a, p->na, b, p->nb, y);
  } else if (p->kind == HOST_BC_ROWS) {
    if (dt == TG_F32)
      rows_fwd_f32(op, p, a, b, y);
    else
      rows_fwd_f64(op, p, a, b, y);
  } else if (dt == TG_F32)
    bc_fwd_f32(op, p, a, b, y);
  else
    bc_fwd_f64(op, p, a, b, y);
}

void host_binary_backward_bc(tg_dtype dt, host_binary_op op, const host_bcast *p, const void *a, const void *b,
                             const void *gy, void *ga, void *gb) {
  if (p->kind == HOST_BC_SAME || p->kind == HOST_BC_TRAIL) {
    host_binary_backward(dt, op, a, p->na, b, p->nb, gy, ga, gb);
    return;
  }
  if (p->kind == HOST_BC_ROWS) {
    if (dt == TG_F32)
      rows_bwd_f32(op, p, a, b, gy, ga, gb);
    else
      rows_bwd_f64(op, p, a, b, gy, ga, gb);
    return;
  }
  if (dt == TG_F32) {
    if (ga) bc_bwd_one_f32(op, 0, p, b, gy, ga);
    if (gb) bc_bwd_one_f32(op, 1, p, a, gy, gb);
  } else {
    if (ga) bc_bwd_one_f64(op, 0, p, b, gy, ga);
    if (gb) bc_bwd_one_f64(op, 1, p, a, gy, gb);
  }
}

void host_unary_forward(tg_dtype dt, host_unary_op op, double alpha, const void *x, void *y, int64_t n) {
  if (dt == TG_F32)
    un_fwd_f32(op, alpha, x, y, n);
  else
    un_fwd_f64(op, alpha, x, y, n);
}

void host_unary_backward(tg_dtype dt, host_unary_op op, double alpha, const void *x, const void *y, const void *gy,
                         void *gx, int64_t n) {
  if (dt == TG_F32)
    un_bwd_f32(op, alpha, x, y, gy, gx, n);
  else
    un_bwd_f64(op, alpha, x, y, gy, gx, n);
}
