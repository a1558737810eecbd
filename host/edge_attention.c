/* Host reference of tg_edge_attention's core: plain loops over the CSR, math in double. Math,
 * layouts and the backward formulas in host/edge_attention.h (from cuda/edge_attention.h). */
#include "edge_attention.h"
#include "../tape/alloc.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

static inline double ld(tg_dtype dt, const void *p, int64_t i) {
  return dt == TG_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}
static inline void st(tg_dtype dt, void *p, int64_t i, double v) {
  if (dt == TG_F32)
    ((float *)p)[i] = (float)v;
  else
    ((double *)p)[i] = v;
}
/* g[i] += acc[i] for i < n (g NULL: nothing). */
static void add_all(tg_dtype dt, void *g, const double *acc, int64_t n) {
  for (int64_t i = 0; g && i < n; i++) {
    if (dt == TG_F32)
      ((float *)g)[i] += (float)acc[i];
    else
      ((double *)g)[i] += acc[i];
  }
}

static int64_t max_degree(const host_graph *g) {
  int64_t d = 1;
  for (int64_t i = 0; i < g->nq; i++)
    if (g->row_ptr[i + 1] - g->row_ptr[i] > d) d = g->row_ptr[i + 1] - g->row_ptr[i];
  return d;
}

static inline double drop_w(const host_graph *g, const host_edge_attn *a, int64_t h, int64_t i, int64_t j) {
  if (!(a->drop.keep > 0 && a->drop.keep < 1)) return 1.0;
  return host_graph_kept(&a->drop, g->nq, g->nk, h, i, j) ? 1.0 / a->drop.keep : 0.0;
}

/* Row i's edges [b, b + n): pre-activations a [n, hid], z = LeakyReLU(a), scores s [n, H]. */
static void row_scores(tg_dtype dt, tg_dtype pdt, const host_graph *g, const host_edge_attn *ea,
                       const host_edge_inputs *in, int64_t i, double *a, double *z, double *s) {
  const int64_t hid = ea->hid, H = ea->H, Fe = ea->Fe, b = g->row_ptr[i], n = g->row_ptr[i + 1] - b;
  const int dim = ea->dim;
  for (int64_t k = 0; k < n; k++) {
    const int64_t e = b + k, j = g->col_idx[e];
    double dp[3] = {0, 0, 0};
    for (int d = 0; d < dim; d++)
      dp[d] = ld(pdt, in->ps, j * dim + d) - ld(pdt, in->pd, i * dim + d);
    for (int64_t u = 0; u < hid; u++) {
      double x = in->b1 ? ld(dt, in->b1, u) : 0;
      if (in->U) x += ld(dt, in->U, j * hid + u);
      if (in->V) x += ld(dt, in->V, i * hid + u);
      for (int d = 0; d < dim; d++)
        x += ld(dt, in->wp, d * hid + u) * dp[d];
      for (int64_t f = 0; f < Fe; f++)
        x += ld(dt, in->we, f * hid + u) * ld(dt, in->fe, e * Fe + f);
      a[k * hid + u] = x;
      z[k * hid + u] = x > 0 ? x : ea->slope * x;
    }
    for (int64_t h = 0; h < H; h++) {
      double y = in->b2 ? ld(dt, in->b2, h) : 0;
      for (int64_t u = 0; u < hid; u++)
        y += z[k * hid + u] * ld(dt, in->w2, u * H + h);
      s[k * H + h] = y;
    }
  }
}

/* Max that propagates NaN: once a NaN is seen it stays. */
static inline double nanmax(double m, double s) { return (s > m || isnan(s)) && !isnan(m) ? s : m; }

/* log sum exp of s[k * H + h], k < n; -inf for no score or all -inf; NaN if one is NaN. */
static double lse_col(const double *s, int64_t n, int64_t H, int64_t h) {
  double m = -INFINITY, l = 0;
  for (int64_t k = 0; k < n; k++)
    m = nanmax(m, s[k * H + h]);
  if (m == -INFINITY) return -INFINITY;
  for (int64_t k = 0; k < n; k++)
    l += exp(s[k * H + h] - m);
  return m + log(l);
}

tg_status host_edge_attention_forward(tg_dtype dt, tg_dtype pdt, const host_graph *g, const host_edge_attn *ea,
                                      const host_edge_inputs *in, void *out, double *lse) {
  const int64_t H = ea->H, F = ea->F, hid = ea->hid, deg = max_degree(g);
  double *a = tgi_malloc((size_t)(deg * hid) * sizeof *a), *z = tgi_malloc((size_t)(deg * hid) * sizeof *z);
  double *s = tgi_malloc((size_t)(deg * H) * sizeof *s), *acc = tgi_malloc((size_t)F * sizeof *acc);
  tg_status status = TG_ERR_OUT_OF_MEMORY;
  if (!a || !z || !s || !acc) goto done;
  for (int64_t i = 0; i < g->nq; i++) {
    const int64_t b = g->row_ptr[i], n = g->row_ptr[i + 1] - b;
    row_scores(dt, pdt, g, ea, in, i, a, z, s);
    for (int64_t h = 0; h < H; h++) {
      double L = lse_col(s, n, H, h);
      for (int64_t f = 0; f < F; f++)
        acc[f] = 0;
      for (int64_t k = 0; k < n && L != -INFINITY; k++) {
        const int64_t j = g->col_idx[b + k];
        const double pw = exp(s[k * H + h] - L) * drop_w(g, ea, h, i, j);
        for (int64_t f = 0; f < F; f++)
          acc[f] += pw * ld(dt, in->values, (j * H + h) * F + f);
      }
      for (int64_t f = 0; f < F; f++)
        st(dt, out, (i * H + h) * F + f, acc[f]);
      lse[h * g->nq + i] = L;
    }
  }
  status = TG_OK;
done:
  free(a), free(z), free(s), free(acc);
  return status;
}

/* Double accumulators of the wanted gradients (NULL: not wanted). */
typedef struct acc_set {
  double *U, *V, *ps, *pd, *fe, *values, *wp, *we, *b1, *w2, *b2;
} acc_set;

static double *acc_new(const void *want, int64_t n, bool *ok) {
  if (!want) return NULL;
  double *p = tgi_calloc(n > 0 ? (size_t)n : 1, sizeof *p);
  if (!p) *ok = false;
  return p;
}

tg_status host_edge_attention_backward(tg_dtype dt, tg_dtype pdt, const host_graph *g, const host_edge_attn *ea,
                                       const host_edge_inputs *in, const void *dout, const double *lse,
                                       const host_edge_grads *d) {
  const int64_t H = ea->H, F = ea->F, hid = ea->hid, Fe = ea->Fe, deg = max_degree(g), nq = g->nq, nk = g->nk;
  const int dim = ea->dim;
  bool ok = true;
  acc_set c = {.U = acc_new(d->U, nk * hid, &ok),
               .V = acc_new(d->V, nq * hid, &ok),
               .ps = acc_new(d->ps, nk * dim, &ok),
               .pd = acc_new(d->pd, nq * dim, &ok),
               .fe = acc_new(d->fe, g->nnz * Fe, &ok),
               .values = acc_new(d->values, nk * H * F, &ok),
               .wp = acc_new(d->wp, dim * hid, &ok),
               .we = acc_new(d->we, Fe * hid, &ok),
               .b1 = acc_new(d->b1, hid, &ok),
               .w2 = acc_new(d->w2, hid * H, &ok),
               .b2 = acc_new(d->b2, H, &ok)};
  double *a = tgi_malloc((size_t)(deg * hid) * sizeof *a), *z = tgi_malloc((size_t)(deg * hid) * sizeof *z);
  double *s = tgi_malloc((size_t)(deg * H) * sizeof *s), *ds = tgi_malloc((size_t)(deg * H) * sizeof *ds);
  double *p = tgi_malloc((size_t)deg * sizeof *p), *dp = tgi_malloc((size_t)deg * sizeof *dp);
  double *w = tgi_malloc((size_t)deg * sizeof *w), *da = tgi_malloc((size_t)hid * sizeof *da);
  tg_status status = TG_ERR_OUT_OF_MEMORY;
  if (!ok || !a || !z || !s || !ds || !p || !dp || !w || !da) goto done;
  for (int64_t i = 0; i < nq; i++) {
    const int64_t b = g->row_ptr[i], n = g->row_ptr[i + 1] - b;
    if (n == 0) continue;
    row_scores(dt, pdt, g, ea, in, i, a, z, s);
    /* ds [n, H] and dvalues, per head */
    for (int64_t h = 0; h < H; h++) {
      const double L = lse[h * nq + i];
      const int64_t oo = (i * H + h) * F;
      double D = 0;
      for (int64_t k = 0; k < n; k++)
        ds[k * H + h] = 0;
      if (L == -INFINITY) continue; /* all scores -inf: zero gradient */
      for (int64_t k = 0; k < n; k++) {
        const int64_t j = g->col_idx[b + k];
        p[k] = exp(s[k * H + h] - L);
        w[k] = drop_w(g, ea, h, i, j);
        double dot = 0;
        for (int64_t f = 0; f < F; f++)
          dot += ld(dt, dout, oo + f) * ld(dt, in->values, (j * H + h) * F + f);
        dp[k] = w[k] * dot;
        D += p[k] * dp[k];
      }
      for (int64_t k = 0; k < n; k++) {
        const int64_t j = g->col_idx[b + k];
        ds[k * H + h] = p[k] * (dp[k] - D);
        for (int64_t f = 0; c.values && f < F; f++)
          c.values[(j * H + h) * F + f] += p[k] * w[k] * ld(dt, dout, oo + f);
      }
    }
    /* back through the score MLP, per edge */
    for (int64_t k = 0; k < n; k++) {
      const int64_t e = b + k, j = g->col_idx[e];
      for (int64_t h = 0; h < H; h++) {
        if (c.b2) c.b2[h] += ds[k * H + h];
        for (int64_t u = 0; c.w2 && u < hid; u++)
          c.w2[u * H + h] += z[k * hid + u] * ds[k * H + h];
      }
      for (int64_t u = 0; u < hid; u++) {
        double dz = 0;
        for (int64_t h = 0; h < H; h++)
          dz += ds[k * H + h] * ld(dt, in->w2, u * H + h);
        da[u] = dz * (a[k * hid + u] > 0 ? 1.0 : ea->slope);
        if (c.U) c.U[j * hid + u] += da[u];
        if (c.V) c.V[i * hid + u] += da[u];
        if (c.b1) c.b1[u] += da[u];
      }
      for (int dd = 0; dd < dim; dd++) {
        const double delta = ld(pdt, in->ps, j * dim + dd) - ld(pdt, in->pd, i * dim + dd);
        double gp = 0;
        for (int64_t u = 0; u < hid; u++) {
          gp += ld(dt, in->wp, dd * hid + u) * da[u];
          if (c.wp) c.wp[dd * hid + u] += delta * da[u];
        }
        if (c.ps) c.ps[j * dim + dd] += gp;
        if (c.pd) c.pd[i * dim + dd] -= gp;
      }
      for (int64_t f = 0; f < Fe; f++) {
        const double x = ld(dt, in->fe, e * Fe + f);
        double gf = 0;
        for (int64_t u = 0; u < hid; u++) {
          gf += ld(dt, in->we, f * hid + u) * da[u];
          if (c.we) c.we[f * hid + u] += x * da[u];
        }
        if (c.fe) c.fe[e * Fe + f] += gf;
      }
    }
  }
  /* positions are read above before any is written, so ps and pd may alias */
  add_all(dt, d->U, c.U, nk * hid), add_all(dt, d->V, c.V, nq * hid);
  add_all(pdt, d->ps, c.ps, nk * dim), add_all(pdt, d->pd, c.pd, nq * dim);
  add_all(dt, d->fe, c.fe, g->nnz * Fe), add_all(dt, d->values, c.values, nk * H * F);
  add_all(dt, d->wp, c.wp, dim * hid), add_all(dt, d->we, c.we, Fe * hid), add_all(dt, d->b1, c.b1, hid);
  add_all(dt, d->w2, c.w2, hid * H), add_all(dt, d->b2, c.b2, H);
  status = TG_OK;
done:
  free(c.U), free(c.V), free(c.ps), free(c.pd), free(c.fe), free(c.values), free(c.wp), free(c.we), free(c.b1);
  free(c.w2), free(c.b2);
  free(a), free(z), free(s), free(ds), free(p), free(dp), free(w), free(da);
  return status;
}
