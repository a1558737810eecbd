/* Host reference graph kernels: plain loops over the CSR in a fixed order, math in double.
 * Obviously correct first (the CUDA provider's oracle). Math and special values in host/graph.h. */
#include "graph.h"
#include "../tape/alloc.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static inline double ld(tg_dtype dt, const void *p, int64_t i) {
  return dt == TG_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}
static inline void st(tg_dtype dt, void *p, int64_t i, double v) {
  if (dt == TG_F32)
    ((float *)p)[i] = (float)v;
  else
    ((double *)p)[i] = v;
}
static inline void add(tg_dtype dt, void *p, int64_t i, double v) {
  if (dt == TG_F32)
    ((float *)p)[i] += (float)v;
  else
    ((double *)p)[i] += v;
}
/* g[i] += acc[i] for i < n (g NULL: nothing). */
static void add_all(tg_dtype dt, void *g, const double *acc, int64_t n) {
  for (int64_t i = 0; g && i < n; i++)
    add(dt, g, i, acc[i]);
}

/* ------------------------------------------------------------ gather */

void host_graph_gather_forward(tg_dtype dt, const host_graph *g, host_graph_side side, int64_t W, const void *x,
                               void *out) {
  size_t es = dt == TG_F32 ? sizeof(float) : sizeof(double);
  for (int64_t i = 0; i < g->nq; i++)
    for (int64_t e = g->row_ptr[i]; e < g->row_ptr[i + 1]; e++) {
      int64_t n = side == HOST_GRAPH_SOURCE ? g->col_idx[e] : i;
      memcpy((char *)out + (size_t)(e * W) * es, (const char *)x + (size_t)(n * W) * es, (size_t)W * es);
    }
}

tg_status host_graph_gather_backward(tg_dtype dt, const host_graph *g, host_graph_side side, int64_t W,
                                     const void *dout, void *dx) {
  if (!dx) return TG_OK;
  int64_t N = side == HOST_GRAPH_SOURCE ? g->nk : g->nq;
  double *acc = tgi_calloc(N * W > 0 ? (size_t)(N * W) : 1, sizeof *acc);
  if (!acc) return TG_ERR_OUT_OF_MEMORY;
  for (int64_t i = 0; i < g->nq; i++) /* edges in e order: a fixed summation order per node */
    for (int64_t e = g->row_ptr[i]; e < g->row_ptr[i + 1]; e++) {
      int64_t n = side == HOST_GRAPH_SOURCE ? g->col_idx[e] : i;
      for (int64_t c = 0; c < W; c++)
        acc[n * W + c] += ld(dt, dout, e * W + c);
    }
  add_all(dt, dx, acc, N * W);
  free(acc);
  return TG_OK;
}

/* ------------------------------------------------------------ reduce */

/* The edge of row i that column c's max comes from: the first NaN if any, else the first edge
 * attaining the max. The row must not be empty. */
static int64_t argmax(tg_dtype dt, const host_graph *g, int64_t W, const void *vals, int64_t i, int64_t c) {
  int64_t best = g->row_ptr[i];
  double bv = ld(dt, vals, best * W + c);
  for (int64_t e = best + 1; e < g->row_ptr[i + 1] && !isnan(bv); e++) {
    double v = ld(dt, vals, e * W + c);
    if (isnan(v) || v > bv) bv = v, best = e;
  }
  return best;
}

void host_graph_reduce_forward(tg_dtype dt, const host_graph *g, host_graph_reduce kind, int64_t W, const void *vals,
                               void *out) {
  double *acc = kind == HOST_GRAPH_MAX ? NULL : tgi_malloc((size_t)(W > 0 ? W : 1) * sizeof *acc);
  for (int64_t i = 0; i < g->nq; i++) {
    int64_t b = g->row_ptr[i], n = g->row_ptr[i + 1] - b;
    if (kind == HOST_GRAPH_MAX || !acc) { /* (no scratch: the column-by-column loop, same sums) */
      for (int64_t c = 0; c < W; c++) {
        double r = 0;
        if (n > 0 && kind == HOST_GRAPH_MAX) {
          r = ld(dt, vals, argmax(dt, g, W, vals, i, c) * W + c);
        } else if (n > 0) {
          for (int64_t e = b; e < b + n; e++)
            r += ld(dt, vals, e * W + c);
          if (kind == HOST_GRAPH_MEAN) r /= (double)n;
        }
        st(dt, out, i * W + c, r);
      }
      continue;
    }
    /* each element still sums its edges in e order; walking rows of vals keeps the reads contiguous */
    for (int64_t c = 0; c < W; c++)
      acc[c] = 0;
    if (dt == TG_F32) {
      const float *v = vals;
      for (int64_t e = b; e < b + n; e++)
        for (int64_t c = 0; c < W; c++)
          acc[c] += v[e * W + c];
    } else {
      const double *v = vals;
      for (int64_t e = b; e < b + n; e++)
        for (int64_t c = 0; c < W; c++)
          acc[c] += v[e * W + c];
    }
    for (int64_t c = 0; c < W; c++)
      st(dt, out, i * W + c, kind == HOST_GRAPH_MEAN && n > 0 ? acc[c] / (double)n : acc[c]);
  }
  free(acc);
}

void host_graph_reduce_backward(tg_dtype dt, const host_graph *g, host_graph_reduce kind, int64_t W, const void *vals,
                                const void *dout, void *dvals) {
  if (!dvals) return;
  for (int64_t i = 0; i < g->nq; i++) {
    int64_t b = g->row_ptr[i], n = g->row_ptr[i + 1] - b;
    if (n == 0) continue;
    if (kind == HOST_GRAPH_MAX) {
      for (int64_t c = 0; c < W; c++)
        add(dt, dvals, argmax(dt, g, W, vals, i, c) * W + c, ld(dt, dout, i * W + c));
      continue;
    }
    double dn = kind == HOST_GRAPH_MEAN ? (double)n : 1.0;
    if (dt == TG_F32) {
      const float *gy = (const float *)dout + i * W;
      float *dv = dvals;
      for (int64_t e = b; e < b + n; e++)
        for (int64_t c = 0; c < W; c++)
          dv[e * W + c] += (float)((double)gy[c] / dn);
    } else {
      const double *gy = (const double *)dout + i * W;
      double *dv = dvals;
      for (int64_t e = b; e < b + n; e++)
        for (int64_t c = 0; c < W; c++)
          dv[e * W + c] += gy[c] / dn;
    }
  }
}

/* ------------------------------------------------------------ softmax */

/* Max of a row's scores that propagates NaN: once a NaN is seen it stays. */
static inline double nanmax(double m, double s) { return (s > m || isnan(s)) && !isnan(m) ? s : m; }

/* log sum exp of s[0..n); -inf for no score or all -inf; NaN if one is NaN. */
static double lse_of(const double *s, int64_t n) {
  double m = -INFINITY, l = 0;
  for (int64_t k = 0; k < n; k++)
    m = nanmax(m, s[k]);
  if (m == -INFINITY) return -INFINITY;
  for (int64_t k = 0; k < n; k++)
    l += exp(s[k] - m);
  return m + log(l);
}

static int64_t max_degree(const host_graph *g) {
  int64_t d = 1;
  for (int64_t i = 0; i < g->nq; i++)
    if (g->row_ptr[i + 1] - g->row_ptr[i] > d) d = g->row_ptr[i + 1] - g->row_ptr[i];
  return d;
}

void host_graph_softmax_forward(tg_dtype dt, const host_graph *g, int64_t H, const void *scores, void *p, double *lse) {
  for (int64_t i = 0; i < g->nq; i++) {
    int64_t b = g->row_ptr[i], n = g->row_ptr[i + 1] - b;
    for (int64_t h = 0; h < H; h++) {
      double m = -INFINITY, l = 0, L = -INFINITY;
      for (int64_t e = b; e < b + n; e++)
        m = nanmax(m, ld(dt, scores, e * H + h));
      if (m != -INFINITY) {
        for (int64_t e = b; e < b + n; e++)
          l += exp(ld(dt, scores, e * H + h) - m);
        L = m + log(l);
      }
      for (int64_t e = b; e < b + n; e++)
        st(dt, p, e * H + h, L == -INFINITY ? 0.0 : exp(ld(dt, scores, e * H + h) - L));
      if (lse) lse[h * g->nq + i] = L;
    }
  }
}

void host_graph_softmax_backward(tg_dtype dt, const host_graph *g, int64_t H, const void *p, const void *dp, void *ds) {
  if (!ds) return;
  for (int64_t i = 0; i < g->nq; i++) {
    int64_t b = g->row_ptr[i], n = g->row_ptr[i + 1] - b;
    for (int64_t h = 0; h < H; h++) {
      double D = 0;
      for (int64_t e = b; e < b + n; e++)
        D += ld(dt, p, e * H + h) * ld(dt, dp, e * H + h);
      for (int64_t e = b; e < b + n; e++)
        add(dt, ds, e * H + h, ld(dt, p, e * H + h) * (ld(dt, dp, e * H + h) - D));
    }
  }
}

/* ------------------------------------------------------------ attend and gat */

/* Where a row's scores come from: scores [E, H] (attend), or e_dst / e_src (gat). */
typedef struct src_in {
  const void *scores, *e_dst, *e_src;
} src_in;

/* Pre-activation of edge e = (j -> i), head h: the score (attend) or e_dst[i] + e_src[j] (gat). */
static inline double pre_of(tg_dtype dt, const src_in *in, int64_t H, int64_t i, int64_t e, int64_t j, int64_t h) {
  return in->scores ? ld(dt, in->scores, e * H + h) : ld(dt, in->e_dst, i * H + h) + ld(dt, in->e_src, j * H + h);
}
static inline double score_of(const src_in *in, double slope, double x) { return in->scores || x > 0 ? x : slope * x; }

static inline double drop_w(const host_graph *g, const host_graph_attn *a, int64_t h, int64_t i, int64_t j) {
  if (!(a->keep > 0 && a->keep < 1)) return 1.0;
  return host_graph_kept(a, g->nq, g->nk, h, i, j) ? 1.0 / a->keep : 0.0;
}

static void attn_forward(tg_dtype dt, const host_graph *g, const host_graph_attn *a, const src_in *in,
                         const void *values, void *out, double *lse, double *s, double *acc) {
  const int64_t H = a->H, F = a->F;
  for (int64_t i = 0; i < g->nq; i++) {
    int64_t b = g->row_ptr[i], n = g->row_ptr[i + 1] - b;
    for (int64_t h = 0; h < H; h++) {
      for (int64_t k = 0; k < n; k++)
        s[k] = score_of(in, a->slope, pre_of(dt, in, H, i, b + k, g->col_idx[b + k], h));
      double L = lse_of(s, n);
      for (int64_t f = 0; f < F; f++)
        acc[f] = 0;
      for (int64_t k = 0; k < n && L != -INFINITY; k++) {
        int64_t j = g->col_idx[b + k];
        double pw = exp(s[k] - L) * drop_w(g, a, h, i, j);
        for (int64_t f = 0; f < F; f++)
          acc[f] += pw * ld(dt, values, (j * H + h) * F + f);
      }
      for (int64_t f = 0; f < F; f++)
        st(dt, out, (i * H + h) * F + f, acc[f]);
      lse[h * g->nq + i] = L;
    }
  }
}

static tg_status forward(tg_dtype dt, const host_graph *g, const host_graph_attn *a, const src_in *in,
                         const void *values, void *out, double *lse) {
  double *s = tgi_malloc((size_t)max_degree(g) * sizeof *s), *acc = tgi_malloc((size_t)a->F * sizeof *acc);
  if (s && acc) attn_forward(dt, g, a, in, values, out, lse, s, acc);
  tg_status status = s && acc ? TG_OK : TG_ERR_OUT_OF_MEMORY;
  free(s), free(acc);
  return status;
}

tg_status host_graph_attend_forward(tg_dtype dt, const host_graph *g, const host_graph_attn *a, const void *scores,
                                    const void *values, void *out, double *lse) {
  src_in in = {scores, NULL, NULL};
  return forward(dt, g, a, &in, values, out, lse);
}

tg_status host_graph_gat_forward(tg_dtype dt, const host_graph *g, const host_graph_attn *a, const void *e_dst,
                                 const void *e_src, const void *values, void *out, double *lse) {
  src_in in = {NULL, e_dst, e_src};
  return forward(dt, g, a, &in, values, out, lse);
}

/* Backward of attend (in->scores set: dscores) or gat (de_dst, de_src). Per (i, h): the pre-
 * activation x, p, w and dp of the row's edges in scratch, then ds = p (dp - D). Per-source sums
 * (dvalues, de_src) accumulate in double in e order and are added to the gradients at the end. */
typedef struct attn_grads {
  void *dscores, *de_dst, *de_src, *dvalues;
} attn_grads;

static tg_status backward(tg_dtype dt, const host_graph *g, const host_graph_attn *a, const src_in *in,
                          const void *values, const void *dout, const double *lse, const attn_grads *gr) {
  const int64_t H = a->H, F = a->F, deg = max_degree(g);
  const bool gat = in->scores == NULL;
  double *p = tgi_malloc((size_t)deg * sizeof *p), *w = tgi_malloc((size_t)deg * sizeof *w);
  double *dp = tgi_malloc((size_t)deg * sizeof *dp), *x = tgi_malloc((size_t)deg * sizeof *x);
  double *gv = gr->dvalues ? tgi_calloc((size_t)(g->nk * H * F), sizeof *gv) : NULL;
  double *gs = gr->de_src ? tgi_calloc((size_t)(g->nk * H), sizeof *gs) : NULL;
  tg_status status = TG_ERR_OUT_OF_MEMORY;
  if (!p || !w || !dp || !x || (gr->dvalues && !gv) || (gr->de_src && !gs)) goto done;
  for (int64_t i = 0; i < g->nq; i++) {
    int64_t b = g->row_ptr[i], n = g->row_ptr[i + 1] - b;
    for (int64_t h = 0; h < H; h++) {
      double L = lse[h * g->nq + i], D = 0, gd = 0;
      if (n == 0 || L == -INFINITY) continue; /* no edge, or all scores -inf: zero gradient */
      const int64_t oo = (i * H + h) * F;
      for (int64_t k = 0; k < n; k++) {
        int64_t j = g->col_idx[b + k];
        x[k] = pre_of(dt, in, H, i, b + k, j, h);
        p[k] = exp(score_of(in, a->slope, x[k]) - L);
        w[k] = drop_w(g, a, h, i, j);
        double dot = 0;
        for (int64_t f = 0; f < F; f++)
          dot += ld(dt, dout, oo + f) * ld(dt, values, (j * H + h) * F + f);
        dp[k] = w[k] * dot;
        D += p[k] * dp[k];
      }
      for (int64_t k = 0; k < n; k++) {
        int64_t j = g->col_idx[b + k];
        double ds = p[k] * (dp[k] - D);
        if (gr->dscores) add(dt, gr->dscores, (b + k) * H + h, ds);
        if (gat) {
          ds *= x[k] > 0 ? 1.0 : a->slope;
          gd += ds;
          if (gs) gs[j * H + h] += ds;
        }
        for (int64_t f = 0; gv && f < F; f++)
          gv[(j * H + h) * F + f] += p[k] * w[k] * ld(dt, dout, oo + f);
      }
      if (gr->de_dst) add(dt, gr->de_dst, i * H + h, gd);
    }
  }
  add_all(dt, gr->de_src, gs, g->nk * H);
  add_all(dt, gr->dvalues, gv, g->nk * H * F);
  status = TG_OK;
done:
  free(p), free(w), free(dp), free(x), free(gv), free(gs);
  return status;
}

tg_status host_graph_attend_backward(tg_dtype dt, const host_graph *g, const host_graph_attn *a, const void *scores,
                                     const void *values, const void *dout, const double *lse, void *dscores,
                                     void *dvalues) {
  src_in in = {scores, NULL, NULL};
  attn_grads gr = {dscores, NULL, NULL, dvalues};
  return backward(dt, g, a, &in, values, dout, lse, &gr);
}

tg_status host_graph_gat_backward(tg_dtype dt, const host_graph *g, const host_graph_attn *a, const void *e_dst,
                                  const void *e_src, const void *values, const void *dout, const double *lse,
                                  void *de_dst, void *de_src, void *dvalues) {
  src_in in = {NULL, e_dst, e_src};
  attn_grads gr = {NULL, de_dst, de_src, dvalues};
  return backward(dt, g, a, &in, values, dout, lse, &gr);
}
