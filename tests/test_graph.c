/* Graph ops (tg_graph_gather, tg_graph_reduce, tg_graph_softmax, tg_graph_attend, tg_gat_attention):
 * HOST against float64 references written here (loops over a CSR built here from each relation
 * kind's definition in tiga.h), for every relation kind and again on the CSR of the same pairs;
 * gradcheck in f64 for every differentiable input with random output weights R (loss = sum(y * R));
 * f32 against f64; attention dropout against the rule of tiga.h; special values; errors; explain;
 * lifetimes. Then the CUDA providers against HOST (these skip without a GPU). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "support.h"
#include "../host/philox.h"
#include "ops/relation.h" /* struct tg_tape (rng_calls) for the "nothing changed on failure" checks */

/* ------------------------------------------------------------ relations */

/* A relation described by the data it is built from. */
typedef struct gr_spec {
  tg_relation_kind kind;
  int64_t nq, nk, mask_batch;
  const uint8_t *mask;
  int n_seqs, causal;
  const int32_t *cu_q, *cu_k;
  const int64_t *row_ptr;
  const int32_t *col_idx;
  int n_parts;
  const struct gr_spec *parts;
} gr_spec;

static void gr_dims(const gr_spec *s, int64_t *nq, int64_t *nk) {
  if (s->kind == TG_REL_VARLEN) {
    *nq = s->cu_q[s->n_seqs], *nk = (s->cu_k ? s->cu_k : s->cu_q)[s->n_seqs];
  } else if (s->kind == TG_REL_CONCAT) {
    *nq = *nk = 0;
    for (int p = 0; p < s->n_parts; p++) {
      int64_t a, b;
      gr_dims(&s->parts[p], &a, &b);
      *nq += a, *nk += b;
    }
  } else {
    *nq = s->nq, *nk = s->nk;
  }
}

/* A[i * nk + j] = 1 when tiga.h's definition of the kind allows (i, j) (batch entry 0). */
static void gr_allow(const gr_spec *s, uint8_t *A) {
  int64_t nq, nk;
  gr_dims(s, &nq, &nk);
  memset(A, 0, (size_t)(nq * nk));
  switch (s->kind) {
  case TG_REL_DENSE: memset(A, 1, (size_t)(nq * nk)); break;
  case TG_REL_CAUSAL:
    for (int64_t i = 0; i < nq; i++)
      for (int64_t j = 0; j < nk; j++)
        A[i * nk + j] = j <= i + nk - nq;
    break;
  case TG_REL_MASK:
    for (int64_t e = 0; e < nq * nk; e++)
      A[e] = s->mask[e] != 0;
    break;
  case TG_REL_VARLEN:
    for (int q = 0; q < s->n_seqs; q++) {
      const int32_t *ck = s->cu_k ? s->cu_k : s->cu_q;
      int64_t lq = s->cu_q[q + 1] - s->cu_q[q], lk = ck[q + 1] - ck[q];
      for (int64_t a = 0; a < lq; a++)
        for (int64_t c = 0; c < lk; c++)
          A[(s->cu_q[q] + a) * nk + ck[q] + c] = !s->causal || c <= a + lk - lq;
    }
    break;
  case TG_REL_CSR:
    for (int64_t i = 0; i < nq; i++)
      for (int64_t e = s->row_ptr[i]; e < s->row_ptr[i + 1]; e++)
        A[i * nk + s->col_idx[e]] = 1;
    break;
  case TG_REL_CONCAT: {
    int64_t qo = 0, ko = 0;
    for (int p = 0; p < s->n_parts; p++) {
      int64_t pq, pk;
      gr_dims(&s->parts[p], &pq, &pk);
      uint8_t *P = malloc((size_t)(pq * pk));
      gr_allow(&s->parts[p], P);
      for (int64_t i = 0; i < pq; i++)
        memcpy(A + (qo + i) * nk + ko, P + i * pk, (size_t)pk);
      free(P);
      qo += pq, ko += pk;
    }
    break;
  }
  }
}

/* The reference graph: edges of the allow matrix, destination-major, sources ascending. */
typedef struct gr_ref {
  int64_t nq, nk, E;
  int64_t *rp;
  int32_t *ci;
} gr_ref;

static gr_ref gr_ref_of(const gr_spec *s) {
  gr_ref g;
  gr_dims(s, &g.nq, &g.nk);
  uint8_t *A = malloc((size_t)(g.nq * g.nk));
  gr_allow(s, A);
  g.rp = malloc((size_t)(g.nq + 1) * sizeof *g.rp);
  g.ci = malloc((size_t)(g.nq * g.nk + 1) * sizeof *g.ci);
  g.E = 0;
  for (int64_t i = 0; i < g.nq; i++) {
    g.rp[i] = g.E;
    for (int64_t j = 0; j < g.nk; j++)
      if (A[i * g.nk + j]) g.ci[g.E++] = (int32_t)j;
  }
  g.rp[g.nq] = g.E;
  free(A);
  return g;
}
static void gr_ref_free(gr_ref *g) { free(g->rp), free(g->ci); }

static tg_relation *gr_build(tg_runtime *rt, const gr_spec *s) {
  tg_relation *r = NULL, *parts[8];
  tg_status st = TG_ERR_INTERNAL;
  switch (s->kind) {
  case TG_REL_DENSE: st = tg_relation_dense(rt, s->nq, s->nk, &r); break;
  case TG_REL_CAUSAL: st = tg_relation_causal(rt, s->nq, s->nk, &r); break;
  case TG_REL_MASK:
    st = tg_relation_mask(rt, s->mask_batch, s->nq, s->nk, s->mask,
                          (size_t)((s->mask_batch ? s->mask_batch : 1) * s->nq * s->nk), &r);
    break;
  case TG_REL_VARLEN:
    st = tg_relation_varlen(rt, s->n_seqs, s->cu_q, (size_t)(s->n_seqs + 1) * sizeof(int32_t), s->cu_k,
                            s->cu_k ? (size_t)(s->n_seqs + 1) * sizeof(int32_t) : 0, s->causal, &r);
    break;
  case TG_REL_CSR:
    st = tg_relation_csr(rt, s->nq, s->nk, s->row_ptr, (size_t)(s->nq + 1) * sizeof(int64_t), s->col_idx,
                         (size_t)s->row_ptr[s->nq] * sizeof(int32_t), &r);
    break;
  case TG_REL_CONCAT:
    cr_assert(s->n_parts <= 8);
    for (int p = 0; p < s->n_parts; p++)
      parts[p] = gr_build(rt, &s->parts[p]);
    st = tg_relation_concat(rt, s->n_parts, parts, &r);
    for (int p = 0; p < s->n_parts; p++)
      tg_relation_destroy(parts[p]);
    break;
  }
  cr_assert_eq(st, TG_OK, "building relation: %s", tg_runtime_error(rt));
  return r;
}

/* The same pairs as a CSR relation (from the reference graph). */
static tg_relation *gr_build_csr(tg_runtime *rt, const gr_ref *g) {
  tg_relation *r = NULL;
  cr_assert_eq(tg_relation_csr(rt, g->nq, g->nk, g->rp, (size_t)(g->nq + 1) * sizeof(int64_t), g->ci,
                               (size_t)g->E * sizeof(int32_t), &r),
               TG_OK, "%s", tg_runtime_error(rt));
  return r;
}

/* ------------------------------------------------------------ cases */

/* Nq = 7 destinations, Nk = 5 sources (bipartite): row 0 empty (first), row 3 empty (middle), row 6
 * empty (last); row 2 is a hub (every source); self loops (1, 1) and (4, 4); E = 11. */
static int64_t G_RP[8] = {0, 0, 3, 8, 8, 10, 11, 11};
static int32_t G_CI[11] = {0, 1, 3, /* hub */ 0, 1, 2, 3, 4, /* */ 2, 4, /* */ 1};
static uint8_t MASK75[7 * 5] = {1, 0, 1, 0, 0, /**/ 0, 1, 1,      1, 0, /**/ 1, 1, 1,      1, 1, /**/ 0, 0, 0,
                                0, 0, 0, 0, 0, 0,      1, /**/ 1, 0, 0, 1,      0, /**/ 0, 1, 0, 0,      1};
static uint8_t MASK34[3 * 4] = {1, 0, 1, 1, /**/ 0, 0, 0, 0, /**/ 0, 1, 1, 0};
static int32_t CUQ[4] = {0, 1, 4, 6}, CUK[4] = {0, 2, 3, 6};
static const gr_spec PARTS[3] = {{.kind = TG_REL_CSR, .nq = 7, .nk = 5, .row_ptr = G_RP, .col_idx = G_CI},
                                 {.kind = TG_REL_CAUSAL, .nq = 2, .nk = 3},
                                 {.kind = TG_REL_DENSE, .nq = 1, .nk = 2}};

typedef struct gr_case {
  const char *name;
  gr_spec rel;
} gr_case;

static const gr_case KINDS[] = {
    {"csr 7x5 (empty first/middle/last rows, hub, self loops)",
     {.kind = TG_REL_CSR, .nq = 7, .nk = 5, .row_ptr = G_RP, .col_idx = G_CI}},
    {"dense 4x3", {.kind = TG_REL_DENSE, .nq = 4, .nk = 3}},
    {"causal 5x3 (two empty rows)", {.kind = TG_REL_CAUSAL, .nq = 5, .nk = 3}},
    {"mask shared 7x5", {.kind = TG_REL_MASK, .nq = 7, .nk = 5, .mask_batch = 0, .mask = MASK75}},
    {"mask batch 1 3x4", {.kind = TG_REL_MASK, .nq = 3, .nk = 4, .mask_batch = 1, .mask = MASK34}},
    {"varlen causal", {.kind = TG_REL_VARLEN, .n_seqs = 3, .cu_q = CUQ, .cu_k = CUK, .causal = 1}},
    {"concat", {.kind = TG_REL_CONCAT, .n_parts = 3, .parts = PARTS}},
};
#define NKINDS (sizeof KINDS / sizeof KINDS[0])

/* ------------------------------------------------------------ one op call */

enum { OP_GATHER, OP_REDUCE, OP_SOFTMAX, OP_ATTEND, OP_GAT };

typedef struct gr_ctx {
  gr_spec rel;
  int use_csr; /* call on the CSR relation of the same pairs */
  int op, side, kind;
  int64_t H, F;
  double keep, slope; /* keep 1: no dropout */
  int with_r;         /* return sum(y * R), R the input after the differentiable ones */
  tg_runtime *rts[16];
  tg_relation *rels[16];
  int nrel;
} gr_ctx;

static const char *op_name(const gr_ctx *x) {
  static const char *n[] = {"gather", "reduce", "softmax", "attend", "gat"};
  return n[x->op];
}

static tg_relation *gr_rel(gr_ctx *x, tg_runtime *rt) {
  for (int i = 0; i < x->nrel; i++)
    if (x->rts[i] == rt) return x->rels[i];
  cr_assert(x->nrel < 16);
  x->rts[x->nrel] = rt;
  if (x->use_csr) {
    gr_ref g = gr_ref_of(&x->rel);
    x->rels[x->nrel] = gr_build_csr(rt, &g);
    gr_ref_free(&g);
  } else {
    x->rels[x->nrel] = gr_build(rt, &x->rel);
  }
  return x->rels[x->nrel++];
}

/* Relations are host data: destroying them after their runtime is fine. */
static void gr_free_rels(gr_ctx *x) {
  for (int i = 0; i < x->nrel; i++)
    tg_relation_destroy(x->rels[i]);
  x->nrel = 0;
}

static tg_graph_attention_options gr_opts(const gr_ctx *x, tg_id *lse_out) {
  tg_graph_attention_options o;
  tg_graph_attention_options_init(&o);
  o.dropout_keep = x->keep;
  o.negative_slope = x->slope;
  o.lse_out = lse_out;
  return o;
}

static int gr_n_in(const gr_ctx *x) { return x->op == OP_ATTEND ? 2 : x->op == OP_GAT ? 3 : 1; }

static tg_id gr_call(gr_ctx *x, tg_tape *t, const tg_id *in, tg_id *lse) {
  tg_relation *r = gr_rel(x, tg_tape_runtime(t));
  tg_graph_attention_options o = gr_opts(x, lse);
  switch (x->op) {
  case OP_GATHER: return tg_graph_gather(t, r, in[0], (tg_graph_side)x->side);
  case OP_REDUCE: return tg_graph_reduce(t, r, in[0], (tg_graph_reduce_kind)x->kind);
  case OP_SOFTMAX: return tg_graph_softmax(t, r, in[0]);
  case OP_ATTEND: return tg_graph_attend(t, r, in[0], in[1], &o);
  default: return tg_gat_attention(t, r, in[0], in[1], in[2], &o);
  }
}

static tg_id gr_fn(tg_tape *t, const tg_id *in, void *user) {
  gr_ctx *x = user;
  tg_id y = gr_call(x, t, in, NULL);
  return x->with_r ? tg_sum(t, tg_mul(t, y, in[gr_n_in(x)])) : y;
}

/* Shapes of input k (k = n_in: the output) for the reference graph g. Gather / reduce carry a
 * trailing shape [2, 3]. */
static int gr_shape(const gr_ctx *x, const gr_ref *g, int k, int64_t *s) {
  int out = k == gr_n_in(x);
  switch (x->op) {
  case OP_GATHER: s[0] = out ? g->E : x->side == TG_GRAPH_SOURCE ? g->nk : g->nq, s[1] = 2, s[2] = 3; return 3;
  case OP_REDUCE: s[0] = out ? g->nq : g->E, s[1] = 2, s[2] = 3; return 3;
  case OP_SOFTMAX: s[0] = g->E, s[1] = x->H; return 2;
  case OP_ATTEND:
    if (k == 0) return s[0] = g->E, s[1] = x->H, 2;
    break;
  default:
    if (k == 0) return s[0] = g->nq, s[1] = x->H, 2;
    if (k == 1) return s[0] = g->nk, s[1] = x->H, 2;
    break;
  }
  s[0] = out ? g->nq : g->nk, s[1] = x->H, s[2] = x->F;
  return 3;
}

static int64_t numel(int nd, const int64_t *s) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++)
    n *= s[i];
  return n;
}

/* Inputs (random) and output weights R for one call. */
typedef struct gr_data {
  int n;         /* differentiable inputs; in[n] is R */
  double *in[4]; /* in[n] = R */
  int nd[4];     /* dims of input k (k = n: the output) */
  int64_t sh[4][TG_MAX_DIMS];
  int64_t cnt[4];
} gr_data;

static void gr_data_init(gr_data *d, const gr_ctx *x, const gr_ref *g, uint64_t seed, double amp) {
  d->n = gr_n_in(x);
  for (int k = 0; k <= d->n; k++) {
    d->nd[k] = gr_shape(x, g, k, d->sh[k]);
    d->cnt[k] = numel(d->nd[k], d->sh[k]);
    d->in[k] = malloc((size_t)d->cnt[k] * sizeof(double));
    ts_uniform(d->in[k], (size_t)d->cnt[k], seed + 1000 * (uint64_t)k, k < d->n ? -amp : -1, k < d->n ? amp : 1);
  }
}
static void gr_data_free(gr_data *d) {
  for (int k = 0; k <= d->n; k++)
    free(d->in[k]);
}

static void gr_gc_inputs(const gr_data *d, tg_gradcheck_input *in) {
  for (int k = 0; k <= d->n; k++) {
    in[k] = ts_gc_input(TG_F64, d->nd[k], d->sh[k], d->in[k]);
    in[k].differentiable = k < d->n;
  }
}

/* ------------------------------------------------------------ references (float64) */

/* tiga.h's attention dropout rule, B = 1: R = h * Nq + i, key j. */
static int rule_kept(uint64_t seed, uint64_t call, double keep, uint64_t R, uint64_t j, uint64_t Nk) {
  uint32_t w[4];
  tg_philox4x32(seed, (R / 2) * ((Nk + 1) / 2) + j / 2, call | (1ull << 63), w);
  return (double)w[2 * (R % 2) + j % 2] < keep * 4294967296.0;
}

typedef struct gr_drop {
  uint64_t seed, call;
} gr_drop;

/* y = op(inputs); lse [H, Nq] for attend / gat (may be NULL). */
static void ref_forward(const gr_ctx *x, const gr_ref *g, const gr_data *d, gr_drop dr, double *y, double *lse) {
  const int64_t W = 6, H = x->H, F = x->F;
  const double *a = d->in[0];
  memset(y, 0, (size_t)d->cnt[d->n] * sizeof *y);
  for (int64_t i = 0; i < g->nq; i++) {
    const int64_t b = g->rp[i], n = g->rp[i + 1] - b;
    for (int64_t e = b; e < b + n; e++) {
      int64_t j = g->ci[e];
      if (x->op == OP_GATHER)
        for (int64_t c = 0; c < W; c++)
          y[e * W + c] = a[(x->side == TG_GRAPH_SOURCE ? j : i) * W + c];
    }
    if (x->op == OP_REDUCE)
      for (int64_t c = 0; c < W; c++) {
        double r = x->kind == TG_REDUCE_MAX && n ? -INFINITY : 0;
        for (int64_t e = b; e < b + n; e++)
          r = x->kind == TG_REDUCE_MAX ? fmax(r, a[e * W + c]) : r + a[e * W + c];
        y[i * W + c] = x->kind == TG_REDUCE_MEAN && n ? r / (double)n : r;
      }
    if (x->op < OP_SOFTMAX) continue;
    for (int64_t h = 0; h < H; h++) {
      double s[64], m = -INFINITY, z = 0;
      cr_assert(n <= 64);
      for (int64_t k = 0; k < n; k++) {
        int64_t e = b + k, j = g->ci[e];
        if (x->op == OP_GAT) {
          double v = a[i * H + h] + d->in[1][j * H + h];
          s[k] = v > 0 ? v : x->slope * v;
        } else {
          s[k] = a[e * H + h];
        }
        m = fmax(m, s[k]);
      }
      for (int64_t k = 0; k < n; k++)
        z += exp(s[k] - m);
      if (lse) lse[h * g->nq + i] = n ? m + log(z) : -INFINITY;
      for (int64_t k = 0; k < n; k++) {
        int64_t e = b + k, j = g->ci[e];
        double p = exp(s[k] - m) / z;
        if (x->op == OP_SOFTMAX) {
          y[e * H + h] = p;
          continue;
        }
        if (x->keep < 1)
          p = rule_kept(dr.seed, dr.call, x->keep, (uint64_t)(h * g->nq + i), (uint64_t)j, (uint64_t)g->nk)
                  ? p / x->keep
                  : 0;
        const double *v = d->in[x->op == OP_GAT ? 2 : 1];
        for (int64_t f = 0; f < F; f++)
          y[(i * H + h) * F + f] += p * v[(j * H + h) * F + f];
      }
    }
  }
}

/* Gradient of sum(y * R) for gather / reduce / softmax into dx (zeroed here). */
static void ref_backward(const gr_ctx *x, const gr_ref *g, const gr_data *d, double *dx) {
  const int64_t W = 6, H = x->H;
  const double *a = d->in[0], *R = d->in[1];
  memset(dx, 0, (size_t)d->cnt[0] * sizeof *dx);
  double *p = malloc((size_t)(g->E * H + 1) * sizeof *p);
  if (x->op == OP_SOFTMAX) ref_forward(x, g, d, (gr_drop){0, 0}, p, NULL);
  for (int64_t i = 0; i < g->nq; i++) {
    const int64_t b = g->rp[i], n = g->rp[i + 1] - b;
    for (int64_t e = b; e < b + n; e++) {
      int64_t j = g->ci[e];
      if (x->op == OP_GATHER)
        for (int64_t c = 0; c < W; c++)
          dx[(x->side == TG_GRAPH_SOURCE ? j : i) * W + c] += R[e * W + c];
      if (x->op == OP_REDUCE && x->kind != TG_REDUCE_MAX)
        for (int64_t c = 0; c < W; c++)
          dx[e * W + c] += R[i * W + c] / (x->kind == TG_REDUCE_MEAN ? (double)n : 1.0);
    }
    if (x->op == OP_REDUCE && x->kind == TG_REDUCE_MAX && n)
      for (int64_t c = 0; c < W; c++) {
        int64_t best = b;
        for (int64_t e = b + 1; e < b + n; e++)
          if (a[e * W + c] > a[best * W + c]) best = e;
        dx[best * W + c] += R[i * W + c];
      }
    if (x->op == OP_SOFTMAX)
      for (int64_t h = 0; h < H; h++) {
        double D = 0;
        for (int64_t e = b; e < b + n; e++)
          D += p[e * H + h] * R[e * H + h];
        for (int64_t e = b; e < b + n; e++)
          dx[e * H + h] = p[e * H + h] * (R[e * H + h] - D);
      }
  }
  free(p);
}

/* ------------------------------------------------------------ running on HOST */

typedef struct gr_run {
  double *y, *g[3], *lse;
  int64_t ny;
} gr_run;

static double *read_new(tg_tape *t, tg_id id, int grad, int64_t n) {
  double *o = malloc((size_t)n * sizeof *o);
  if (grad)
    ts_read_grad(t, id, o, n);
  else
    ts_read(t, id, o, n);
  return o;
}

/* y, lse and the gradients of sum(y * R) on runtime rt (provider p) with inputs in dt. */
static void gr_run_on(tg_runtime *rt, tg_provider p, gr_ctx *x, const gr_data *d, tg_dtype dt, uint64_t seed,
                      gr_run *o) {
  tg_tape *t = ts_tape(rt);
  tg_tape_set_seed(t, seed);
  tg_tape_set_provider(t, p, NULL);
  tg_id ids[4], lse = TG_NO_ID;
  for (int k = 0; k <= d->n; k++) {
    void *c = ts_convert(d->in[k], (size_t)d->cnt[k], k < d->n ? dt : TG_F64);
    ids[k] = ts_input(t, k < d->n ? dt : TG_F64, d->nd[k], d->sh[k], c, k < d->n ? TG_REQUIRES_GRAD : 0);
    free(c);
  }
  int attn = x->op >= OP_ATTEND;
  tg_id y = gr_call(x, t, ids, attn ? &lse : NULL);
  cr_assert_neq(y, TG_NO_ID, "%s: %s", op_name(x), tg_tape_error(t));
  tg_id yw = dt == TG_F64 ? y : tg_cast(t, y, TG_F64);
  cr_assert_eq(tg_tape_backward(t, tg_sum(t, tg_mul(t, yw, ids[d->n]))), TG_OK, "%s", tg_tape_error(t));
  o->ny = d->cnt[d->n];
  o->y = read_new(t, yw, 0, o->ny);
  for (int k = 0; k < d->n; k++)
    o->g[k] = read_new(t, ids[k], 1, d->cnt[k]);
  o->lse = attn ? read_new(t, lse, 0, x->H * d->sh[d->n][0]) : NULL;
  tg_tape_destroy(t);
}

static void gr_run_host(gr_ctx *x, const gr_data *d, tg_dtype dt, uint64_t seed, gr_run *o) {
  tg_runtime *rt = ts_host_runtime();
  gr_run_on(rt, TG_PROVIDER_HOST, x, d, dt, seed, o);
  tg_runtime_destroy(rt);
}

static void gr_run_free(gr_run *o, int n) {
  free(o->y), free(o->lse);
  for (int k = 0; k < n; k++)
    free(o->g[k]);
}

/* lse: -inf exactly where expected, close elsewhere. */
static void expect_lse(const char *what, const double *got, const double *want, int64_t n, double tol) {
  for (int64_t i = 0; i < n; i++) {
    if (isinf(want[i]) || isinf(got[i])) {
      cr_expect(got[i] == want[i], "%s: lse[%lld] = %g, expected %g", what, (long long)i, got[i], want[i]);
      continue;
    }
    cr_expect(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i])), "%s: lse[%lld] = %.9g, expected %.9g", what,
              (long long)i, got[i], want[i]);
  }
}

/* The op contexts run on every relation kind: gather both sides, reduce three kinds, softmax,
 * attend and gat with and without dropout. */
static gr_ctx op_ctx(int c, const gr_spec *rel) {
  gr_ctx x = {.rel = *rel, .H = 3, .F = 5, .keep = 1, .slope = 0.2};
  static const int ops[10] = {OP_GATHER,  OP_GATHER, OP_REDUCE, OP_REDUCE, OP_REDUCE,
                              OP_SOFTMAX, OP_ATTEND, OP_ATTEND, OP_GAT,    OP_GAT};
  x.op = ops[c];
  x.side = c == 1 ? TG_GRAPH_DEST : TG_GRAPH_SOURCE;
  x.kind = c == 3 ? TG_REDUCE_MEAN : c == 4 ? TG_REDUCE_MAX : TG_REDUCE_SUM;
  if (c == 7 || c == 9) x.keep = 0.6;
  if (c == 9) x.slope = 0.05;
  return x;
}
#define NOPS 10

/* ------------------------------------------------------------ forward, gradients, kinds */

Test(graph, host_matches_reference_every_kind_and_csr_of_same_pairs) {
  const gr_drop dr = {0x1234, 0};
  for (size_t k = 0; k < NKINDS; k++)
    for (int c = 0; c < NOPS; c++) {
      gr_ctx x = op_ctx(c, &KINDS[k].rel);
      gr_ref g = gr_ref_of(&x.rel);
      gr_data d;
      gr_data_init(&d, &x, &g, 100 * k + (uint64_t)c, 1.5);
      int64_t ny = d.cnt[d.n], nl = x.H * g.nq;
      double *want = malloc((size_t)ny * sizeof *want), *wl = malloc((size_t)nl * sizeof *wl);
      double *wg = malloc((size_t)d.cnt[0] * sizeof *wg);
      ref_forward(&x, &g, &d, dr, want, wl);
      if (x.op <= OP_SOFTMAX) ref_backward(&x, &g, &d, wg);
      gr_run r64, r32, rcsr;
      gr_run_host(&x, &d, TG_F64, dr.seed, &r64);
      gr_run_host(&x, &d, TG_F32, dr.seed, &r32);
      char what[256];
      snprintf(what, sizeof what, "%s on %s (keep %g)", op_name(&x), KINDS[k].name, x.keep);
      double e = ts_close_ratio(r64.y, want, (size_t)ny, 1e-12, 1e-12);
      cr_expect(e <= 1, "%s f64: out off by %.3g x tolerance", what, e);
      e = ts_close_ratio(r32.y, want, (size_t)ny, 2e-6, 2e-5);
      cr_expect(e <= 1, "%s f32: out off by %.3g x tolerance", what, e);
      if (x.op <= OP_SOFTMAX) {
        e = ts_close_ratio(r64.g[0], wg, (size_t)d.cnt[0], 1e-12, 1e-12);
        cr_expect(e <= 1, "%s f64: gradient off by %.3g x tolerance", what, e);
      }
      if (r64.lse) {
        expect_lse(what, r64.lse, wl, nl, 1e-6);
        expect_lse(what, r32.lse, wl, nl, 1e-5);
      }
      for (int i = 0; i < d.n; i++) { /* f32 against f64 */
        e = ts_close_ratio(r32.g[i], r64.g[i], (size_t)d.cnt[i], 1e-5, 1e-4);
        cr_expect(e <= 1, "%s: f32 gradient of input %d off by %.3g x tolerance", what, i, e);
      }
      /* the same pairs given as CSR: the same edges in the same order, so the same bits */
      x.use_csr = 1;
      gr_run_host(&x, &d, TG_F64, dr.seed, &rcsr);
      cr_expect(memcmp(rcsr.y, r64.y, (size_t)ny * sizeof(double)) == 0, "%s: CSR of the same pairs differs", what);
      for (int i = 0; i < d.n; i++)
        cr_expect(memcmp(rcsr.g[i], r64.g[i], (size_t)d.cnt[i] * sizeof(double)) == 0,
                  "%s: CSR of the same pairs, gradient %d differs", what, i);
      gr_run_free(&r64, d.n), gr_run_free(&r32, d.n), gr_run_free(&rcsr, d.n);
      free(want), free(wl), free(wg);
      gr_data_free(&d);
      gr_ref_free(&g);
      gr_free_rels(&x);
    }
}

Test(graph, gradcheck_every_kind_every_input) {
  for (size_t k = 0; k < NKINDS; k++)
    for (int c = 0; c < NOPS; c++) {
      gr_ctx x = op_ctx(c, &KINDS[k].rel);
      x.with_r = 1;
      gr_ref g = gr_ref_of(&x.rel);
      gr_data d;
      gr_data_init(&d, &x, &g, 500 + 100 * k + (uint64_t)c, 1.0);
      tg_gradcheck_input in[4];
      gr_gc_inputs(&d, in);
      cr_log_info("gradcheck: %s on %s (keep %g)", op_name(&x), KINDS[k].name, x.keep);
      ts_gradcheck(gr_fn, &x, d.n + 1, in);
      gr_data_free(&d);
      gr_ref_free(&g);
      gr_free_rels(&x);
    }
}

/* gat with e_dst and e_src the same value (Nq == Nk): both gradients land in one buffer. */
static tg_id gat_self_fn(tg_tape *t, const tg_id *in, void *user) {
  gr_ctx *x = user;
  tg_graph_attention_options o = gr_opts(x, NULL);
  tg_id y = tg_gat_attention(t, gr_rel(x, tg_tape_runtime(t)), in[0], in[0], in[1], &o);
  return tg_sum(t, tg_mul(t, y, in[2]));
}

Test(graph, gradcheck_gat_same_value_for_e_dst_and_e_src) {
  gr_ctx x = {.rel = {.kind = TG_REL_CAUSAL, .nq = 4, .nk = 4}, .H = 2, .F = 3, .keep = 0.7, .slope = 0.2};
  double e[8], v[24], R[24];
  ts_uniform(e, 8, 1, -1, 1), ts_uniform(v, 24, 2, -1, 1), ts_uniform(R, 24, 3, -1, 1);
  int64_t se[2] = {4, 2}, sv[3] = {4, 2, 3};
  tg_gradcheck_input in[3] = {ts_gc_input(TG_F64, 2, se, e), ts_gc_input(TG_F64, 3, sv, v),
                              ts_gc_input(TG_F64, 3, sv, R)};
  in[2].differentiable = 0;
  ts_gradcheck(gat_self_fn, &x, 3, in);
  gr_free_rels(&x);
}

/* ------------------------------------------------------------ special values */

/* MAX: ties (and -0 / +0) go to the first edge; a NaN makes the max NaN and takes the gradient. */
Test(graph, reduce_max_ties_and_nan) {
  int64_t rp[3] = {0, 3, 5};
  int32_t ci[5] = {0, 1, 2, 0, 2};
  const double vals[10] = {1, -0.0, 3, 0.0, 3, -1, NAN, 2, 5, NAN};
  const double R[4] = {10, 20, 30, 40};
  for (int pass = 0; pass < 2; pass++) {
    tg_dtype dt = pass ? TG_F32 : TG_F64;
    tg_runtime *rt = ts_host_runtime();
    tg_tape *t = ts_tape(rt);
    tg_relation *r = NULL;
    cr_assert_eq(tg_relation_csr(rt, 2, 3, rp, sizeof rp, ci, sizeof ci, &r), TG_OK);
    int64_t sv[2] = {5, 2}, so[2] = {2, 2};
    void *cv = ts_convert(vals, 10, dt), *cr = ts_convert(R, 4, dt);
    tg_id v = ts_input(t, dt, 2, sv, cv, TG_REQUIRES_GRAD), w = ts_input(t, dt, 2, so, cr, 0);
    free(cv), free(cr);
    tg_id y = tg_graph_reduce(t, r, v, TG_REDUCE_MAX);
    cr_assert_eq(tg_tape_backward(t, tg_sum(t, tg_mul(t, y, w))), TG_OK, "%s", tg_tape_error(t));
    double out[4], g[10];
    ts_read(t, y, out, 4);
    ts_read_grad(t, v, g, 10);
    cr_expect(out[0] == 3 && out[1] == 0 && signbit(out[1]), "row 0: max 3 and -0 (first of -0 / +0): %g %g", out[0],
              out[1]);
    cr_expect(isnan(out[2]) && isnan(out[3]), "row 1: NaN propagates: %g %g", out[2], out[3]);
    const double want[10] = {0, 20, 10, 0, 0, 0, 30, 0, 0, 40};
    for (int i = 0; i < 10; i++)
      cr_expect_eq(g[i], want[i], "%s: gradient[%d] = %g, expected %g", tg_dtype_name(dt), i, g[i], want[i]);
    tg_relation_destroy(r);
    tg_tape_destroy(t);
    tg_runtime_destroy(rt);
  }
}

/* Empty rows and rows whose scores are all -inf: out 0, lse -inf, zero and finite gradients;
 * |scores| ~ 1e3 stay finite. */
Test(graph, attend_empty_and_minus_inf_rows_and_large_scores) {
  gr_ctx x = op_ctx(6, &KINDS[0].rel);
  gr_ref g = gr_ref_of(&x.rel);
  gr_data d;
  gr_data_init(&d, &x, &g, 31, 1.0);
  for (int64_t e = g.rp[4]; e < g.rp[5]; e++) /* row 4, head 0: every score -inf */
    d.in[0][e * x.H] = -INFINITY;
  for (int64_t e = g.rp[2]; e < g.rp[3]; e++) /* hub row, head 1: scores ~ 1e3 */
    d.in[0][e * x.H + 1] *= 1e3;
  gr_run r;
  gr_run_host(&x, &d, TG_F64, 1, &r);
  for (int64_t i = 0; i < g.nq; i++)
    for (int64_t h = 0; h < x.H; h++) {
      int empty = g.rp[i] == g.rp[i + 1] || (i == 4 && h == 0);
      double L = r.lse[h * g.nq + i];
      cr_expect(empty ? L == -INFINITY : isfinite(L), "row %lld head %lld: lse %g", (long long)i, (long long)h, L);
      for (int64_t f = 0; empty && f < x.F; f++)
        cr_expect_eq(r.y[(i * x.H + h) * x.F + f], 0.0);
    }
  for (int64_t i = 0; i < r.ny; i++)
    cr_expect(isfinite(r.y[i]), "out[%lld] = %g", (long long)i, r.y[i]);
  for (int k = 0; k < 2; k++)
    for (int64_t i = 0; i < d.cnt[k]; i++)
      cr_expect(isfinite(r.g[k][i]), "gradient %d [%lld] = %g", k, (long long)i, r.g[k][i]);
  for (int64_t e = g.rp[4]; e < g.rp[5]; e++)
    cr_expect_eq(r.g[0][e * x.H], 0.0, "a -inf score gets no gradient");
  /* softmax of the same row: p = 0 */
  gr_ctx xs = op_ctx(5, &KINDS[0].rel);
  gr_run rs;
  gr_data ds = d;
  ds.n = 1, ds.in[1] = d.in[2], ds.nd[1] = 2, ds.cnt[1] = g.E * x.H;
  memcpy(ds.sh[1], d.sh[0], sizeof ds.sh[1]);
  gr_run_host(&xs, &ds, TG_F64, 1, &rs);
  for (int64_t e = g.rp[4]; e < g.rp[5]; e++)
    cr_expect_eq(rs.y[e * x.H], 0.0, "softmax of an all -inf row is 0");
  for (int64_t i = 0; i < rs.ny; i++)
    cr_expect(isfinite(rs.y[i]) && isfinite(rs.g[0][i]), "softmax p / grad [%lld] = %g / %g", (long long)i, rs.y[i],
              rs.g[0][i]);
  gr_run_free(&r, 2), gr_run_free(&rs, 1);
  gr_data_free(&d);
  gr_ref_free(&g);
  gr_free_rels(&x), gr_free_rels(&xs);
}

/* A relation without edges: attend has no per-edge input; gat gives 0 and lse -inf; gather refuses. */
Test(graph, relation_without_edges) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t rp[4] = {0, 0, 0, 0};
  tg_relation *r = NULL;
  cr_assert_eq(tg_relation_csr(rt, 3, 2, rp, sizeof rp, NULL, 0, &r), TG_OK, "%s", tg_runtime_error(rt));
  int64_t sd[2] = {3, 2}, ss[2] = {2, 2}, sv[3] = {2, 2, 4};
  double z[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  tg_id ed = ts_input(t, TG_F64, 2, sd, z, TG_REQUIRES_GRAD), es = ts_input(t, TG_F64, 2, ss, z, TG_REQUIRES_GRAD);
  tg_id v = ts_input(t, TG_F64, 3, sv, z, TG_REQUIRES_GRAD), lse = TG_NO_ID;
  tg_graph_attention_options o;
  tg_graph_attention_options_init(&o);
  o.lse_out = &lse;
  tg_id y = tg_gat_attention(t, r, ed, es, v, &o);
  cr_assert_neq(y, TG_NO_ID, "%s", tg_tape_error(t));
  cr_assert_eq(tg_tape_backward(t, tg_sum(t, y)), TG_OK, "%s", tg_tape_error(t));
  double out[24], l[6], gv[16];
  ts_read(t, y, out, 24);
  ts_read(t, lse, l, 6);
  ts_read_grad(t, v, gv, 16);
  for (int i = 0; i < 24; i++)
    cr_expect_eq(out[i], 0.0);
  for (int i = 0; i < 6; i++)
    cr_expect_eq(l[i], -INFINITY);
  for (int i = 0; i < 16; i++)
    cr_expect_eq(gv[i], 0.0);
  cr_expect_eq(tg_graph_gather(t, r, v, TG_GRAPH_SOURCE), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "csr relation over nq = 3, nk = 2 with E = 0 edges; the per-edge result");
  tg_relation_destroy(r);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* ------------------------------------------------------------ attention dropout */

/* One-hot values (F = Nk, values[j, h, f] = [f == j]) make out[i, h, j] = p_e w_e for the edge
 * e = (j -> i): the output shows which edges the mask dropped. */
static void one_hot(double *v, int64_t nk, int64_t H) {
  for (int64_t j = 0; j < nk; j++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t f = 0; f < nk; f++)
        v[(j * H + h) * nk + f] = f == j;
}

/* Checks out against the rule for (seed, call, keep); returns the number of dropped (edge, head). */
static int64_t expect_mask(const char *what, const gr_ref *g, int64_t H, const double *out, uint64_t seed,
                           uint64_t call, double keep) {
  int64_t dropped = 0;
  for (int64_t i = 0; i < g->nq; i++)
    for (int64_t e = g->rp[i]; e < g->rp[i + 1]; e++)
      for (int64_t h = 0; h < H; h++) {
        int64_t j = g->ci[e];
        int kept = rule_kept(seed, call, keep, (uint64_t)(h * g->nq + i), (uint64_t)j, (uint64_t)g->nk);
        double o = out[(i * H + h) * g->nk + j];
        cr_expect(kept ? o > 0 : o == 0, "%s: edge %lld (%lld -> %lld) head %lld: out %g, rule says %s", what,
                  (long long)e, (long long)j, (long long)i, (long long)h, o, kept ? "kept" : "dropped");
        dropped += !kept;
      }
  return dropped;
}

Test(graph, dropout_mask_is_the_rule_counter_advances_no_grad_is_off) {
  const uint64_t seed = 0xdecafbad;
  for (int gat = 0; gat < 2; gat++) {
    gr_ctx x = op_ctx(gat ? 9 : 7, &KINDS[0].rel);
    x.keep = 0.5, x.F = 5;
    gr_ref g = gr_ref_of(&x.rel);
    gr_data d;
    gr_data_init(&d, &x, &g, 41, 1.0);
    one_hot(d.in[d.n - 1], g.nk, x.H);
    tg_runtime *rt = ts_host_runtime();
    tg_tape *t = ts_tape(rt);
    tg_tape_set_seed(t, seed);
    tg_id ids[3];
    for (int k = 0; k < d.n; k++)
      ids[k] = ts_input(t, TG_F64, d.nd[k], d.sh[k], d.in[k], TG_REQUIRES_GRAD);
    int64_t ny = d.cnt[d.n], dropped = 0;
    double *out = malloc((size_t)ny * sizeof *out), *want = malloc((size_t)ny * sizeof *want);
    for (uint64_t call = 0; call < 3; call++) {
      cr_expect_eq(t->rng_calls, call);
      tg_id y = gr_call(&x, t, ids, NULL);
      cr_assert_neq(y, TG_NO_ID, "%s", tg_tape_error(t));
      ts_read(t, y, out, ny);
      dropped += expect_mask(op_name(&x), &g, x.H, out, seed, call, 0.5);
      ref_forward(&x, &g, &d, (gr_drop){seed, call}, want, NULL);
      double e = ts_close_ratio(out, want, (size_t)ny, 1e-12, 1e-12);
      cr_expect(e <= 1, "%s call %llu: out off by %.3g x tolerance", op_name(&x), (unsigned long long)call, e);
    }
    cr_expect(dropped > 0 && dropped < 3 * g.E * x.H, "%s: %lld of %lld dropped", op_name(&x), (long long)dropped,
              (long long)(3 * g.E * x.H));
    /* no grad: dropout off, the counter still advances */
    tg_tape_set_grad_enabled(t, 0, NULL);
    tg_id y = gr_call(&x, t, ids, NULL);
    cr_expect_eq(t->rng_calls, 4);
    ts_read(t, y, out, ny);
    gr_ctx x1 = x;
    x1.keep = 1;
    ref_forward(&x1, &g, &d, (gr_drop){0, 0}, want, NULL);
    cr_expect(ts_close_ratio(out, want, (size_t)ny, 1e-12, 1e-12) <= 1, "%s: no-grad mode has no dropout", op_name(&x));
    /* keep 1 takes no call */
    tg_tape_set_grad_enabled(t, 1, NULL);
    gr_call(&x1, t, ids, NULL);
    cr_expect_eq(t->rng_calls, 4);
    free(out), free(want);
    tg_tape_destroy(t);
    tg_runtime_destroy(rt);
    gr_data_free(&d);
    gr_ref_free(&g);
    gr_free_rels(&x);
  }
}

/* ------------------------------------------------------------ errors */

static tg_id in_nd(tg_tape *t, tg_dtype dt, int nd, int64_t a, int64_t b, int64_t c) {
  int64_t s[3] = {a, b, c};
  static double z[1024];
  cr_assert(numel(nd, s) <= 1024);
  void *cz = ts_convert(z, (size_t)numel(nd, s), dt == TG_I32 ? TG_F64 : dt);
  if (dt == TG_I32) memset(cz, 0, (size_t)numel(nd, s) * 4);
  tg_id id = ts_input(t, dt, nd, s, cz, 0);
  free(cz);
  return id;
}

/* The failed call left the tape as it was: no node, no RNG call, the sticky status. */
#define EXPECT_FAIL(call, st, needle)                                                                                  \
  do {                                                                                                                 \
    cr_expect_eq((call), TG_NO_ID, "%s should fail", #call);                                                           \
    TS_EXPECT_STICKY(t, st, needle);                                                                                   \
    size_t nodes_;                                                                                                     \
    tg_tape_stats(t, &nodes_, NULL);                                                                                   \
    cr_expect_eq(nodes_, 0, "%s recorded %zu nodes", #call, nodes_);                                                   \
    cr_expect_eq(t->rng_calls, 0, "%s took an RNG call", #call);                                                       \
  } while (0)

Test(graph, errors) {
  tg_runtime *rt = ts_host_runtime(), *other = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  tg_relation *g75 = NULL, *foreign = NULL, *mask2 = NULL;
  cr_assert_eq(tg_relation_csr(rt, 7, 5, G_RP, sizeof G_RP, G_CI, sizeof G_CI, &g75), TG_OK);
  cr_assert_eq(tg_relation_dense(other, 7, 5, &foreign), TG_OK);
  uint8_t m[2 * 7 * 5] = {1};
  cr_assert_eq(tg_relation_mask(rt, 2, 7, 5, m, sizeof m, &mask2), TG_OK);
  tg_id s, v, ed, es, x5, lse = 42;
  tg_graph_attention_options o;
  tg_graph_attention_options_init(&o);
  o.lse_out = &lse;
#define FRESH()                                                                                                        \
  (tg_tape_reset(t), s = in_nd(t, TG_F64, 2, 11, 3, 0), v = in_nd(t, TG_F64, 3, 5, 3, 4),                              \
   ed = in_nd(t, TG_F64, 2, 7, 3, 0), es = in_nd(t, TG_F64, 2, 5, 3, 0), x5 = in_nd(t, TG_F64, 2, 5, 2, 0))
  /* gather */
  FRESH();
  EXPECT_FAIL(tg_graph_gather(t, g75, ed, TG_GRAPH_SOURCE), TG_ERR_SHAPE,
              "tg_graph_gather: argument 'x' has shape [7, 3]; expected [Nk = 5, ...] (side TG_GRAPH_SOURCE");
  FRESH();
  EXPECT_FAIL(tg_graph_gather(t, g75, x5, TG_GRAPH_DEST), TG_ERR_SHAPE,
              "argument 'x' has shape [5, 2]; expected [Nq = 7, ...] (side TG_GRAPH_DEST: one row per destination of "
              "argument 'rel', csr relation over nq = 7, nk = 5 with E = 11 edges)");
  FRESH();
  EXPECT_FAIL(tg_graph_gather(t, g75, x5, (tg_graph_side)2), TG_ERR_INVALID_ARGUMENT,
              "argument 'side' is 2; expected TG_GRAPH_SOURCE (0) or TG_GRAPH_DEST (1)");
  FRESH();
  EXPECT_FAIL(tg_graph_gather(t, NULL, x5, TG_GRAPH_SOURCE), TG_ERR_INVALID_ARGUMENT, "argument 'rel' is NULL");
  FRESH();
  EXPECT_FAIL(tg_graph_gather(t, foreign, x5, TG_GRAPH_SOURCE), TG_ERR_INVALID_ARGUMENT,
              "argument 'rel' (dense) was built on another runtime");
  FRESH();
  EXPECT_FAIL(tg_graph_gather(t, mask2, x5, TG_GRAPH_SOURCE), TG_ERR_INVALID_ARGUMENT,
              "argument 'rel' is a mask over 2 batch entries (one graph per entry)");
  FRESH();
  EXPECT_FAIL(tg_graph_gather(t, g75, in_nd(t, TG_I32, 1, 5, 0, 0), TG_GRAPH_SOURCE), TG_ERR_DTYPE,
              "argument 'x' has dtype i32; expected f32 or f64");
  FRESH();
  EXPECT_FAIL(tg_graph_gather(t, g75, TG_NO_ID, TG_GRAPH_SOURCE), TG_ERR_INVALID_ID, "argument 'x' is TG_NO_ID");
  /* reduce */
  FRESH();
  EXPECT_FAIL(tg_graph_reduce(t, g75, s, (tg_graph_reduce_kind)3), TG_ERR_INVALID_ARGUMENT,
              "argument 'kind' is 3; expected TG_REDUCE_SUM (0), TG_REDUCE_MEAN (1) or TG_REDUCE_MAX (2)");
  FRESH();
  EXPECT_FAIL(tg_graph_reduce(t, g75, ed, TG_REDUCE_SUM), TG_ERR_SHAPE,
              "tg_graph_reduce: argument 'edge_values' has shape [7, 3]; expected [E = 11, ...]");
  FRESH();
  EXPECT_FAIL(tg_graph_reduce(t, mask2, s, TG_REDUCE_SUM), TG_ERR_INVALID_ARGUMENT, "mask over 2 batch entries");
  /* softmax */
  FRESH();
  EXPECT_FAIL(tg_graph_softmax(t, g75, v), TG_ERR_SHAPE,
              "tg_graph_softmax: argument 'scores' has shape [5, 3, 4]; expected [E = 11, H]");
  FRESH();
  EXPECT_FAIL(tg_graph_softmax(t, g75, in_nd(t, TG_F32, 2, 10, 3, 0)), TG_ERR_SHAPE,
              "argument 'scores' has shape [10, 3]; expected [E = 11, H]");
  /* attend */
  FRESH();
  EXPECT_FAIL(tg_graph_attend(t, g75, in_nd(t, TG_F64, 2, 12, 3, 0), v, &o), TG_ERR_SHAPE,
              "tg_graph_attend: argument 'scores' has shape [12, 3]; expected [E = 11, H] (argument 'rel' is a csr "
              "relation over nq = 7, nk = 5 with E = 11 edges)");
  cr_expect_eq(lse, TG_NO_ID, "lse_out is TG_NO_ID after a failure");
  FRESH();
  EXPECT_FAIL(tg_graph_attend(t, g75, s, in_nd(t, TG_F64, 3, 5, 2, 4), &o), TG_ERR_SHAPE,
              "argument 'values' has shape [5, 2, 4]; expected [Nk = 5, H = 3, F] (Nk of argument 'rel', H from "
              "argument 'scores' [11, 3])");
  FRESH();
  EXPECT_FAIL(tg_graph_attend(t, g75, s, in_nd(t, TG_F64, 3, 7, 3, 4), &o), TG_ERR_SHAPE,
              "argument 'values' has shape [7, 3, 4]; expected [Nk = 5, H = 3, F]");
  FRESH();
  EXPECT_FAIL(tg_graph_attend(t, g75, s, in_nd(t, TG_F64, 2, 5, 3, 0), &o), TG_ERR_SHAPE,
              "argument 'values' has shape [5, 3]; expected [Nk = 5, H = 3, F]");
  FRESH();
  EXPECT_FAIL(tg_graph_attend(t, g75, s, in_nd(t, TG_F32, 3, 5, 3, 4), &o), TG_ERR_DTYPE,
              "arguments 'scores' (f64) and 'values' (f32) must have the same dtype");
  FRESH();
  EXPECT_FAIL(tg_graph_attend(t, g75, in_nd(t, TG_I32, 2, 11, 3, 0), v, &o), TG_ERR_DTYPE,
              "argument 'scores' has dtype i32");
  FRESH();
  EXPECT_FAIL(tg_graph_attend(t, mask2, s, v, &o), TG_ERR_INVALID_ARGUMENT, "mask over 2 batch entries");
  FRESH();
  EXPECT_FAIL(tg_graph_attend(t, NULL, s, v, &o), TG_ERR_INVALID_ARGUMENT, "argument 'rel' is NULL");
  FRESH();
  EXPECT_FAIL(tg_graph_attend(t, foreign, s, v, &o), TG_ERR_INVALID_ARGUMENT, "built on another runtime");
  double bad_keep[4] = {0, -0.5, 1.5, NAN};
  for (int i = 0; i < 4; i++) {
    FRESH();
    tg_graph_attention_options b = o;
    b.dropout_keep = bad_keep[i];
    EXPECT_FAIL(tg_graph_attend(t, g75, s, v, &b), TG_ERR_INVALID_ARGUMENT, "option 'dropout_keep' is");
  }
  FRESH();
  tg_graph_attention_options z = o;
  z.struct_size = 0;
  lse = 42;
  EXPECT_FAIL(tg_graph_attend(t, g75, s, v, &z), TG_ERR_INVALID_ARGUMENT,
              "argument 'opts' (tg_graph_attention_options): its struct_size is 0");
  cr_expect_eq(lse, 42, "an options struct that was refused is not written");
  FRESH();
  z.struct_size = sizeof z + 8;
  EXPECT_FAIL(tg_graph_attend(t, g75, s, v, &z), TG_ERR_INVALID_ARGUMENT, "built against a newer tiga.h");
  FRESH();
  tg_tape_set_provider(t, TG_PROVIDER_CUDA_FUSED, NULL);
  EXPECT_FAIL(tg_graph_attend(t, g75, s, v, &o), TG_ERR_NO_DEVICE, "host-only");
  FRESH();
  tg_tape_set_provider(t, TG_PROVIDER_CUDA_COMPOSED, NULL);
  EXPECT_FAIL(tg_gat_attention(t, g75, ed, es, v, &o), TG_ERR_NO_DEVICE, "host-only");
  FRESH();
  EXPECT_FAIL(tg_graph_gather(t, g75, x5, TG_GRAPH_SOURCE), TG_ERR_NO_DEVICE, "host-only");
  tg_tape_set_provider(t, TG_PROVIDER_AUTO, NULL);
  /* gat */
  FRESH();
  EXPECT_FAIL(tg_gat_attention(t, g75, es, es, v, &o), TG_ERR_SHAPE,
              "tg_gat_attention: argument 'e_dst' has shape [5, 3]; expected [Nq = 7, H]");
  FRESH();
  EXPECT_FAIL(tg_gat_attention(t, g75, ed, in_nd(t, TG_F64, 2, 5, 2, 0), v, &o), TG_ERR_SHAPE,
              "argument 'e_src' has shape [5, 2]; expected [Nk = 5, H = 3] (H from argument 'e_dst' [7, 3])");
  FRESH();
  EXPECT_FAIL(tg_gat_attention(t, g75, ed, es, in_nd(t, TG_F64, 3, 5, 4, 4), &o), TG_ERR_SHAPE,
              "argument 'values' has shape [5, 4, 4]; expected [Nk = 5, H = 3, F] (Nk of argument 'rel', H from "
              "argument 'e_dst' [7, 3])");
  FRESH();
  EXPECT_FAIL(tg_gat_attention(t, g75, ed, in_nd(t, TG_F32, 2, 5, 3, 0), v, &o), TG_ERR_DTYPE,
              "arguments 'e_dst' (f64) and 'e_src' (f32) must have the same dtype");
  double bad_slope[4] = {NAN, INFINITY, -0.1, -INFINITY};
  for (int i = 0; i < 4; i++) {
    FRESH();
    tg_graph_attention_options b = o;
    b.negative_slope = bad_slope[i];
    b.dropout_keep = 0.5; /* a refused call takes no RNG call */
    EXPECT_FAIL(tg_gat_attention(t, g75, ed, es, v, &b), TG_ERR_INVALID_ARGUMENT, "option 'negative_slope' is");
  }
  FRESH();
  EXPECT_FAIL(tg_gat_attention(t, g75, ed, TG_ABSENT, v, &o), TG_ERR_INVALID_ID, "argument 'e_src' is TG_ABSENT");
  /* a sticky tape does nothing */
  FRESH();
  tg_graph_gather(t, NULL, x5, TG_GRAPH_SOURCE);
  cr_expect_eq(tg_graph_gather(t, g75, x5, TG_GRAPH_SOURCE), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "argument 'rel' is NULL");
  cr_expect_eq(tg_graph_attend(NULL, g75, s, v, NULL), TG_NO_ID);
  cr_expect(strstr(tg_last_error(), "tg_graph_attend: argument 'tape' is NULL") != NULL, "%s", tg_last_error());
  /* slope 0 (ReLU) and any finite slope >= 0 are accepted */
  FRESH();
  o.negative_slope = 0;
  cr_expect_neq(tg_gat_attention(t, g75, ed, es, v, &o), TG_NO_ID, "%s", tg_tape_error(t));
  o.negative_slope = 3.5;
  cr_expect_neq(tg_gat_attention(t, g75, ed, es, v, &o), TG_NO_ID, "%s", tg_tape_error(t));
#undef FRESH
  tg_tape_destroy(t);
  tg_relation_destroy(g75), tg_relation_destroy(foreign), tg_relation_destroy(mask2);
  tg_runtime_destroy(rt), tg_runtime_destroy(other);
}

Test(graph, options_init) {
  tg_graph_attention_options o;
  memset(&o, 0xff, sizeof o);
  tg_graph_attention_options_init(&o);
  cr_expect_eq(o.struct_size, sizeof o);
  cr_expect_eq(o.negative_slope, 0.2);
  cr_expect_eq(o.dropout_keep, 1.0);
  cr_expect_null(o.lse_out);
  tg_graph_attention_options_init(NULL); /* a no-op */
}

/* ------------------------------------------------------------ explain, saved state, lifetimes */

Test(graph, explain_saved_bytes_and_lse) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  tg_relation *r = NULL;
  cr_assert_eq(tg_relation_csr(rt, 7, 5, G_RP, sizeof G_RP, G_CI, sizeof G_CI, &r), TG_OK);
  double z[256];
  ts_uniform(z, 256, 3, -1, 1);
  int64_t sx[3] = {5, 2, 3}, ss[2] = {11, 3}, sv[3] = {5, 3, 4}, sd[2] = {7, 3}, se[2] = {5, 3};
  tg_id x = ts_input(t, TG_F64, 3, sx, z, TG_REQUIRES_GRAD), s = ts_input(t, TG_F64, 2, ss, z, TG_REQUIRES_GRAD);
  tg_id v = ts_input(t, TG_F64, 3, sv, z, TG_REQUIRES_GRAD), ed = ts_input(t, TG_F64, 2, sd, z, TG_REQUIRES_GRAD);
  tg_id es = ts_input(t, TG_F64, 2, se, z, TG_REQUIRES_GRAD), lse = TG_NO_ID;
  tg_id gx = tg_graph_gather(t, r, x, TG_GRAPH_SOURCE);
  tg_graph_reduce(t, r, gx, TG_REDUCE_MAX);
  tg_graph_softmax(t, r, s);
  tg_graph_attention_options o;
  tg_graph_attention_options_init(&o);
  o.dropout_keep = 0.5;
  o.lse_out = &lse;
  tg_id y = tg_graph_attend(t, r, s, v, &o);
  o.lse_out = NULL;
  o.negative_slope = 0.3;
  tg_gat_attention(t, r, ed, es, v, &o);
  cr_assert_eq(tg_tape_status(t), TG_OK, "%s", tg_tape_error(t));
  size_t nodes, saved;
  tg_tape_stats(t, &nodes, &saved);
  cr_expect_eq(nodes, 5);
  cr_expect_eq(saved, 2 * (size_t)(3 * 7) * sizeof(double), "HOST attend and gat save lse f64 [H, Nq]: %zu", saved);
  char buf[4096];
  tg_tape_explain(t, buf, sizeof buf, NULL);
  cr_expect(strstr(buf, "graph_gather") && strstr(buf, "rel=csr nnz=11 rel_dev=0B side=source W=6"), "%s", buf);
  cr_expect(strstr(buf, "graph_reduce") && strstr(buf, "kind=max W=6"), "%s", buf);
  cr_expect(strstr(buf, "graph_softmax") && strstr(buf, "rel=csr nnz=11 rel_dev=0B H=3"), "%s", buf);
  cr_expect(strstr(buf, "graph_attend     host") && strstr(buf, "H=3 F=4 dropout keep=0.5 call=0"), "%s", buf);
  cr_expect(strstr(buf, "gat_attention") && strstr(buf, "H=3 F=4 slope=0.3 dropout keep=0.5 call=1"), "%s", buf);
  cr_expect(strstr(buf, " saved=168") != NULL, "%s", buf);
  /* lse: f32 [H, Nq], no gradient */
  tg_dtype ldt;
  int nd;
  int64_t sh[TG_MAX_DIMS];
  tg_tape_dtype(t, lse, &ldt);
  tg_tape_shape(t, lse, &nd, sh, TG_MAX_DIMS);
  cr_expect(ldt == TG_F32 && nd == 2 && sh[0] == 3 && sh[1] == 7, "lse is f32 [H, Nq]");
  cr_expect_eq(tg_tape_backward(t, tg_sum(t, lse)), TG_ERR_STATE, "lse carries no gradient");
  cr_expect_eq(tg_tape_backward(t, tg_sum(t, y)), TG_OK, "%s", tg_tape_error(t));
  /* nothing requires grad: nodes recorded, nothing saved; no grad mode: no node */
  tg_tape_reset(t);
  s = ts_input(t, TG_F64, 2, ss, z, 0), v = ts_input(t, TG_F64, 3, sv, z, 0);
  tg_graph_attend(t, r, s, v, NULL);
  tg_tape_stats(t, &nodes, &saved);
  cr_expect(nodes == 1 && saved == 0, "nodes %zu saved %zu", nodes, saved);
  tg_tape_reset(t);
  tg_tape_set_grad_enabled(t, 0, NULL);
  s = ts_input(t, TG_F64, 2, ss, z, TG_REQUIRES_GRAD), v = ts_input(t, TG_F64, 3, sv, z, TG_REQUIRES_GRAD);
  cr_expect_neq(tg_graph_attend(t, r, s, v, NULL), TG_NO_ID);
  tg_tape_stats(t, &nodes, &saved);
  cr_expect(nodes == 0 && saved == 0);
  tg_relation_destroy(r);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* Every graph node holds its relation: destroying it right after the calls, before backward, is
 * fine, and the gradients equal those of a run that keeps it. */
static void chain(tg_runtime *rt, int destroy_early, tg_provider p, tg_dtype dt, double *out, double *grads) {
  tg_tape *t = ts_tape(rt);
  tg_tape_set_provider(t, p, NULL);
  tg_relation *r = NULL;
  cr_assert_eq(tg_relation_csr(rt, 7, 5, G_RP, sizeof G_RP, G_CI, sizeof G_CI, &r), TG_OK);
  double z[256];
  ts_uniform(z, 256, 9, -1, 1);
  int64_t sd[2] = {7, 3}, se[2] = {5, 3}, sv[3] = {5, 3, 4};
  void *c = ts_convert(z, 256, dt);
  tg_id ed = ts_input(t, dt, 2, sd, c, TG_REQUIRES_GRAD), es = ts_input(t, dt, 2, se, c, TG_REQUIRES_GRAD);
  tg_id v = ts_input(t, dt, 3, sv, c, TG_REQUIRES_GRAD);
  free(c);
  tg_graph_attention_options o;
  tg_graph_attention_options_init(&o);
  o.dropout_keep = 0.7;
  tg_id a = tg_gat_attention(t, r, ed, es, v, &o);                                          /* [7, 3, 4] */
  tg_id m = tg_graph_reduce(t, r, tg_graph_gather(t, r, a, TG_GRAPH_DEST), TG_REDUCE_MEAN); /* [7, 3, 4] */
  tg_id sc = tg_graph_softmax(t, r, tg_graph_gather(t, r, ed, TG_GRAPH_DEST));              /* [11, 3] */
  tg_id y = tg_add(t, m, tg_graph_attend(t, r, sc, v, &o));
  if (destroy_early) tg_relation_destroy(r);
  int64_t sy[3] = {7, 3, 4};
  double w[84];
  ts_uniform(w, 84, 10, -1, 1);
  tg_dtype wide = dt == TG_F64 ? TG_F64 : TG_F32;
  tg_id y32 = dt == wide ? y : tg_cast(t, y, wide);
  void *cw = ts_convert(w, 84, wide);
  tg_id loss = tg_sum(t, tg_mul(t, y32, ts_input(t, wide, 3, sy, cw, 0)));
  free(cw);
  cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
  ts_read(t, y32, out, 84);
  tg_id ids[3] = {ed, es, v};
  int64_t n[3] = {21, 15, 60};
  for (int i = 0, off = 0; i < 3; off += (int)n[i], i++) {
    double *tmp = malloc((size_t)n[i] * sizeof *tmp);
    if (dt == TG_F32 || dt == TG_F64) {
      ts_read_grad(t, ids[i], tmp, n[i]);
    } else {
      uint16_t raw[64];
      cr_assert_eq(tg_tape_read_grad(t, ids[i], raw, (size_t)n[i] * 2), TG_OK);
      for (int64_t k = 0; k < n[i]; k++)
        tmp[k] = dt == TG_BF16 ? ts_bf16_to_f32(raw[k]) : ts_f16_to_f32(raw[k]);
    }
    memcpy(grads + off, tmp, (size_t)n[i] * sizeof *tmp);
    free(tmp);
  }
  tg_tape_destroy(t);
  if (!destroy_early) tg_relation_destroy(r);
}

Test(graph, relation_destroyed_before_backward) {
  tg_runtime *rt = ts_host_runtime();
  double o1[84], o2[84], g1[96], g2[96];
  chain(rt, 0, TG_PROVIDER_HOST, TG_F64, o1, g1);
  chain(rt, 1, TG_PROVIDER_HOST, TG_F64, o2, g2);
  cr_expect(memcmp(o1, o2, sizeof o1) == 0 && memcmp(g1, g2, sizeof g1) == 0);
  tg_runtime_destroy(rt);
}

/* ------------------------------------------------------------ CUDA providers (skip without a GPU) */

/* f32 computes in f32 (rel L2 ~1e-7 against f64); bf16 / f16 round inputs, outputs and gradients
 * to 8 / 11 mantissa bits (the composed bf16 chain measured rel L2 0.0201 on the H200). */
static double tol_of(tg_dtype dt) { return dt == TG_F32 ? 2e-5 : dt == TG_F16 ? 4e-3 : 3e-2; }

Test(graph_cuda, every_op_every_kind_matches_host) {
  tg_runtime_destroy(ts_cuda_runtime_or_skip());
  const tg_dtype dts[3] = {TG_F32, TG_BF16, TG_F16};
  for (size_t k = 0; k < NKINDS; k++)
    for (int c = 0; c < NOPS; c++)
      for (int i = 0; i < 3; i++) {
        gr_ctx x = op_ctx(c, &KINDS[k].rel);
        /* rounding to 8 bits can tie or reorder a column's values, which moves MAX's gradient */
        if (x.op == OP_REDUCE && x.kind == TG_REDUCE_MAX && dts[i] != TG_F32) continue;
        gr_ref g = gr_ref_of(&x.rel);
        gr_data d;
        gr_data_init(&d, &x, &g, 700 + 100 * k + (uint64_t)c, 1.5);
        tg_gradcheck_input in[4];
        gr_gc_inputs(&d, in);
        int np = x.op >= OP_ATTEND ? 2 : 1;
        for (int pi = 0; pi < np; pi++) {
          tg_provider p = pi ? TG_PROVIDER_CUDA_COMPOSED : TG_PROVIDER_CUDA_FUSED;
          cr_log_info("%s on %s, keep %g, %s, %s", op_name(&x), KINDS[k].name, x.keep, tg_dtype_name(dts[i]),
                      tg_provider_name(p));
          ts_check_cuda_vs_host(gr_fn, &x, d.n, in, dts[i], p, tol_of(dts[i]));
        }
        gr_data_free(&d);
        gr_ref_free(&g);
        gr_free_rels(&x);
      }
}

/* A larger graph: Nq = 300 destinations, Nk = 700 sources; destination 5 is a hub (every source:
 * a row walked by a whole thread block), source 3 a hub (in every row: a long transpose walk), rows
 * 0, 150 and 299 empty, about 6 random sources elsewhere. */
static int64_t BIG_RP[301];
static int32_t BIG_CI[300 * 40 + 700];
static void big_graph(void) {
  uint64_t s = 99;
  int64_t e = 0;
  for (int64_t i = 0; i < 300; i++) {
    BIG_RP[i] = e;
    if (i == 0 || i == 150 || i == 299) continue;
    for (int32_t j = 0; j < 700; j++)
      if ((i == 5 || j == 3 || ts_next(&s) % 700 < 6) && e < (int64_t)(sizeof BIG_CI / sizeof *BIG_CI)) BIG_CI[e++] = j;
  }
  BIG_RP[300] = e;
}

Test(graph_cuda, big_hub_graph_matches_host) {
  tg_runtime_destroy(ts_cuda_runtime_or_skip());
  big_graph();
  const gr_spec big = {.kind = TG_REL_CSR, .nq = 300, .nk = 700, .row_ptr = BIG_RP, .col_idx = BIG_CI};
  const int64_t Fs[3] = {5, 64, 256};
  for (int c = 0; c < NOPS; c++)
    for (int fi = 0; fi < 3; fi++)
      for (int i = 0; i < 2; i++) {
        gr_ctx x = op_ctx(c, &big);
        tg_dtype dt = i ? TG_BF16 : TG_F32;
        if (x.op < OP_ATTEND && fi > 0) continue;
        if (x.op == OP_REDUCE && x.kind == TG_REDUCE_MAX && dt != TG_F32) continue;
        x.H = 4, x.F = Fs[fi];
        gr_ref g = gr_ref_of(&x.rel);
        gr_data d;
        gr_data_init(&d, &x, &g, 900 + (uint64_t)c, 2.0);
        tg_gradcheck_input in[4];
        gr_gc_inputs(&d, in);
        for (int pi = 0; pi < (x.op >= OP_ATTEND ? 2 : 1); pi++) {
          tg_provider p = pi ? TG_PROVIDER_CUDA_COMPOSED : TG_PROVIDER_CUDA_FUSED;
          cr_log_info("big graph: %s F=%lld keep %g %s %s", op_name(&x), (long long)x.F, x.keep, tg_dtype_name(dt),
                      tg_provider_name(p));
          ts_check_cuda_vs_host(gr_fn, &x, d.n, in, dt, p, tol_of(dt));
        }
        gr_data_free(&d);
        gr_ref_free(&g);
        gr_free_rels(&x);
      }
}

/* Raw bytes of a value's gradient (any dtype). */
static void *grad_bytes(tg_tape *t, tg_id id, size_t *bytes) {
  int64_t n;
  tg_dtype dt;
  tg_tape_numel(t, id, &n);
  tg_tape_dtype(t, id, &dt);
  *bytes = (size_t)n * tg_dtype_size(dt);
  void *p = malloc(*bytes);
  cr_assert_eq(tg_tape_read_grad(t, id, p, *bytes), TG_OK, "%s", tg_tape_error(t));
  return p;
}

/* The same inputs twice: bit-identical gradients (no float atomics). */
Test(graph_cuda, gradients_are_deterministic) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  big_graph();
  const gr_spec big = {.kind = TG_REL_CSR, .nq = 300, .nk = 700, .row_ptr = BIG_RP, .col_idx = BIG_CI};
  const int cs[4] = {0, 5, 7, 9}; /* gather SOURCE, softmax, attend + dropout, gat + dropout */
  for (int ci = 0; ci < 4; ci++) {
    gr_ctx x = op_ctx(cs[ci], &big);
    x.H = 4, x.F = 32;
    gr_ref g = gr_ref_of(&x.rel);
    gr_data d;
    gr_data_init(&d, &x, &g, 77, 2.0);
    void *first[3] = {NULL, NULL, NULL};
    for (int run = 0; run < 2; run++) {
      tg_tape *t = ts_tape(rt);
      tg_tape_set_provider(t, TG_PROVIDER_CUDA_FUSED, NULL);
      tg_id ids[4];
      for (int k = 0; k <= d.n; k++) {
        void *c = ts_convert(d.in[k], (size_t)d.cnt[k], TG_BF16);
        ids[k] = ts_input(t, TG_BF16, d.nd[k], d.sh[k], c, k < d.n ? TG_REQUIRES_GRAD : 0);
        free(c);
      }
      tg_id y = gr_call(&x, t, ids, NULL);
      tg_id loss = tg_sum(t, tg_cast(t, tg_mul(t, y, ids[d.n]), TG_F32));
      cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
      for (int k = 0; k < d.n; k++) {
        size_t nb;
        void *gb = grad_bytes(t, ids[k], &nb);
        if (!run)
          first[k] = gb;
        else {
          cr_expect(memcmp(first[k], gb, nb) == 0, "%s: gradient %d differs between two runs", op_name(&x), k);
          free(gb), free(first[k]);
        }
      }
      tg_tape_destroy(t);
    }
    gr_data_free(&d);
    gr_ref_free(&g);
    gr_free_rels(&x);
  }
  tg_runtime_destroy(rt);
}

/* The dropped edges are the same on HOST, CUDA_FUSED and CUDA_COMPOSED (one-hot values show them),
 * and follow the rule; on a graph with odd and even rows and sources of both parities. */
Test(graph_cuda, dropout_masks_equal_across_providers) {
  tg_runtime *crt = ts_cuda_runtime_or_skip();
  tg_runtime *hrt = ts_host_runtime();
  static int64_t rp[38];
  static int32_t ci[37 * 53];
  uint64_t s = 5;
  int64_t e = 0;
  for (int64_t i = 0; i < 37; i++) {
    rp[i] = e;
    for (int32_t j = 0; j < 53; j++)
      if (i != 20 && (i == 7 || ts_next(&s) % 4 == 0)) ci[e++] = j;
  }
  rp[37] = e;
  const gr_spec spec = {.kind = TG_REL_CSR, .nq = 37, .nk = 53, .row_ptr = rp, .col_idx = ci};
  const uint64_t seed = 0xfeed;
  for (int gat = 0; gat < 2; gat++) {
    gr_ctx x = op_ctx(gat ? 9 : 7, &spec);
    x.keep = 0.6, x.H = 3, x.F = 53;
    gr_ref g = gr_ref_of(&x.rel);
    gr_data d;
    gr_data_init(&d, &x, &g, 13, 1.0);
    one_hot(d.in[d.n - 1], g.nk, x.H);
    int64_t ny = d.cnt[d.n];
    double *outs[3];
    const tg_provider ps[3] = {TG_PROVIDER_HOST, TG_PROVIDER_CUDA_FUSED, TG_PROVIDER_CUDA_COMPOSED};
    for (int pi = 0; pi < 3; pi++) {
      tg_tape *t = ts_tape(pi ? crt : hrt);
      tg_tape_set_seed(t, seed);
      tg_tape_set_provider(t, ps[pi], NULL);
      tg_tape_set_grad_enabled(t, 1, NULL);
      tg_id ids[3];
      tg_dtype dt = pi ? TG_F32 : TG_F64;
      for (int k = 0; k < d.n; k++) {
        void *c = ts_convert(d.in[k], (size_t)d.cnt[k], dt);
        ids[k] = ts_input(t, dt, d.nd[k], d.sh[k], c, TG_REQUIRES_GRAD);
        free(c);
      }
      tg_id y = gr_call(&x, t, ids, NULL);
      cr_assert_neq(y, TG_NO_ID, "%s: %s", tg_provider_name(ps[pi]), tg_tape_error(t));
      outs[pi] = read_new(t, y, 0, ny);
      tg_tape_destroy(t);
    }
    expect_mask("host", &g, x.H, outs[0], seed, 0, 0.6);
    for (int pi = 1; pi < 3; pi++) {
      for (int64_t k = 0; k < ny; k++)
        cr_expect((outs[pi][k] == 0) == (outs[0][k] == 0), "%s %s: element %lld is %g, host %g", op_name(&x),
                  tg_provider_name(ps[pi]), (long long)k, outs[pi][k], outs[0][k]);
      cr_expect(ts_rel_l2(outs[pi], outs[0], (size_t)ny) <= 1e-5, "%s %s: out differs from host", op_name(&x),
                tg_provider_name(ps[pi]));
    }
    for (int pi = 0; pi < 3; pi++)
      free(outs[pi]);
    gr_data_free(&d);
    gr_ref_free(&g);
    gr_free_rels(&x);
  }
  tg_runtime_destroy(crt);
  tg_runtime_destroy(hrt);
}

Test(graph_cuda, providers_explain_saved_limits_and_lifetimes) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  tg_tape *t = ts_tape(rt);
  tg_relation *r = NULL;
  cr_assert_eq(tg_relation_csr(rt, 7, 5, G_RP, sizeof G_RP, G_CI, sizeof G_CI, &r), TG_OK);
  float z[5 * 3 * 300];
  ts_uniform_f32(z, 5 * 3 * 300, 4, -1, 1);
  int64_t ss[2] = {11, 3}, sv[3] = {5, 3, 4}, sw[3] = {5, 3, 300};
  tg_id s, v, lse;
  char buf[4096];
  size_t nodes, saved;
  tg_graph_attention_options o;
  tg_graph_attention_options_init(&o);
  o.lse_out = &lse;
#define FRESH()                                                                                                        \
  (tg_tape_reset(t), s = ts_input(t, TG_F32, 2, ss, z, TG_REQUIRES_GRAD),                                              \
   v = ts_input(t, TG_F32, 3, sv, z, TG_REQUIRES_GRAD))
  /* FUSED: one node, saves lse f32 [H, Nq] only */
  FRESH();
  tg_tape_set_provider(t, TG_PROVIDER_AUTO, NULL);
  tg_id yf = tg_graph_attend(t, r, s, v, &o);
  cr_assert_neq(yf, TG_NO_ID, "%s", tg_tape_error(t));
  tg_tape_stats(t, &nodes, &saved);
  cr_expect(nodes == 1 && saved == 3 * 7 * 4, "fused: nodes %zu saved %zu", nodes, saved);
  tg_tape_explain(t, buf, sizeof buf, NULL);
  cr_expect(strstr(buf, "graph_attend     cuda_fused") && strstr(buf, "H=3 F=4 fused"), "%s", buf);
  double lf[21], lc[21], of[84], oc[84]; /* out [Nq = 7, H = 3, F = 4] */
  ts_read(t, lse, lf, 21);
  ts_read(t, yf, of, 84);
  /* COMPOSED: graph ops with [E, ...] intermediates; the softmax node outputs lse */
  FRESH();
  tg_tape_set_provider(t, TG_PROVIDER_CUDA_COMPOSED, NULL);
  tg_id yc = tg_graph_attend(t, r, s, v, &o);
  cr_assert_neq(yc, TG_NO_ID, "%s", tg_tape_error(t));
  tg_tape_explain(t, buf, sizeof buf, NULL);
  cr_expect(strstr(buf, "graph_softmax") && strstr(buf, "graph_gather") && strstr(buf, "graph_reduce") &&
                !strstr(buf, "graph_attend"),
            "%s", buf);
  ts_read(t, lse, lc, 21);
  ts_read(t, yc, oc, 84);
  cr_expect(ts_rel_l2(oc, of, 84) <= 1e-6, "composed and fused outputs differ");
  expect_lse("composed vs fused", lc, lf, 21, 1e-6);
  cr_assert_eq(tg_tape_backward(t, tg_sum(t, yc)), TG_OK, "%s", tg_tape_error(t));
  /* F = 300: AUTO takes COMPOSED, an explicit FUSED is refused */
  tg_tape_reset(t);
  s = ts_input(t, TG_F32, 2, ss, z, TG_REQUIRES_GRAD);
  tg_id w = ts_input(t, TG_F32, 3, sw, z, TG_REQUIRES_GRAD);
  tg_tape_set_provider(t, TG_PROVIDER_AUTO, NULL);
  cr_expect_neq(tg_graph_attend(t, r, s, w, NULL), TG_NO_ID, "%s", tg_tape_error(t));
  tg_tape_explain(t, buf, sizeof buf, NULL);
  cr_expect(strstr(buf, "graph_softmax") && !strstr(buf, "graph_attend"), "%s", buf);
  tg_tape_set_provider(t, TG_PROVIDER_CUDA_FUSED, NULL);
  cr_expect_eq(tg_graph_attend(t, r, s, w, NULL), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_UNSUPPORTED, "provider CUDA_FUSED takes at most 256 features per head");
  /* f64 is a HOST dtype */
  tg_tape_reset(t);
  double zd[60] = {0};
  tg_id sd = ts_input(t, TG_F64, 2, ss, zd, 0), vd = ts_input(t, TG_F64, 3, sv, zd, 0);
  cr_expect_eq(tg_graph_attend(t, r, sd, vd, NULL), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "f64 is computed on the HOST provider");
  tg_tape_set_provider(t, TG_PROVIDER_AUTO, NULL);
#undef FRESH
  tg_tape_destroy(t);
  tg_relation_destroy(r);
  /* lifetimes on the device: both CUDA providers, relation destroyed before backward */
  const tg_provider ps[2] = {TG_PROVIDER_CUDA_FUSED, TG_PROVIDER_CUDA_COMPOSED};
  for (int pi = 0; pi < 2; pi++) {
    double o1[84], o2[84], g1[96], g2[96];
    chain(rt, 0, ps[pi], TG_BF16, o1, g1);
    chain(rt, 1, ps[pi], TG_BF16, o2, g2);
    cr_expect(memcmp(o1, o2, sizeof o1) == 0 && memcmp(g1, g2, sizeof g1) == 0, "%s", tg_provider_name(ps[pi]));
  }
  tg_runtime_destroy(rt);
}
