/* tg_attention: HOST against a naive masked-softmax reference written here, for every relation;
 * gradcheck in f64; empty rows; large scores; saved state; explain; errors; then the CUDA
 * providers against HOST f64 and against each other (these skip without a GPU). */
#include <math.h>
#include <stdlib.h>

#include "support.h"
#include "../host/philox.h"
#include "ops/relation.h"
/* Relations belong to a runtime, and the harnesses (tg_gradcheck, ts_check_cuda_vs_host) create
 * their own runtimes: the callbacks read the tape's runtime to build a relation for it. */

/* ------------------------------------------------------------ helpers */

/* A relation described by the data it is built from. */
typedef struct at_spec {
  tg_relation_kind kind;
  int64_t nq, nk, mask_batch;
  const uint8_t *mask;
  int n_seqs, causal;
  const int32_t *cu_q, *cu_k;
  const int64_t *row_ptr;
  const int32_t *col_idx;
  int n_parts;
  const struct at_spec *parts;
} at_spec;

/* One attention call: relation, sizes, scale, and the relations built so far (one per runtime). */
typedef struct at_ctx {
  const char *name;
  at_spec rel;
  int64_t B, Nq, Nk, Hq, Hkv, D, Dv;
  double scale;
  int with_w; /* callback returns sum(out * w) (gradcheck) instead of out */
  tg_runtime *rts[16];
  tg_relation *rels[16];
  int nrel;
  double keep; /* attention dropout_keep passed by at_fn (0: none) */
} at_ctx;

static tg_runtime *at_runtime_of(tg_tape *t) { return tg_tape_runtime(t); }

static tg_relation *at_build(tg_runtime *rt, const at_spec *s) {
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
    st = tg_relation_varlen(rt, s->n_seqs, s->cu_q, (size_t)((s->n_seqs) + 1) * sizeof(int32_t), s->cu_k,
                            (size_t)((s->n_seqs) + 1) * sizeof(int32_t), s->causal, &r);
    break;
  case TG_REL_CSR:
    st = tg_relation_csr(rt, s->nq, s->nk, s->row_ptr, (size_t)((s->nq) + 1) * sizeof(int64_t), s->col_idx,
                         (size_t)(s->row_ptr)[s->nq] * sizeof(int32_t), &r);
    break;
  case TG_REL_CONCAT:
    cr_assert(s->n_parts <= 8);
    for (int p = 0; p < s->n_parts; p++)
      parts[p] = at_build(rt, &s->parts[p]);
    st = tg_relation_concat(rt, s->n_parts, parts, &r);
    for (int p = 0; p < s->n_parts; p++)
      tg_relation_destroy(parts[p]);
    break;
  }
  cr_assert_eq(st, TG_OK, "building relation: %s", tg_runtime_error(rt));
  return r;
}

static tg_relation *at_rel(at_ctx *x, tg_runtime *rt) {
  for (int i = 0; i < x->nrel; i++)
    if (x->rts[i] == rt) return x->rels[i];
  cr_assert(x->nrel < 16);
  x->rts[x->nrel] = rt;
  return x->rels[x->nrel++] = at_build(rt, &x->rel);
}

/* Relations are host data: destroying them after their runtime is fine. */
static void at_free_rels(at_ctx *xs, size_t n) {
  for (size_t c = 0; c < n; c++) {
    for (int i = 0; i < xs[c].nrel; i++)
      tg_relation_destroy(xs[c].rels[i]);
    xs[c].nrel = 0;
  }
}

/* A[i * nk + j] = 1 when the spec allows (i, j) for batch entry b, from the definitions in tiga.h. */
static void at_allow(const at_spec *s, int64_t nq, int64_t nk, int64_t b, uint8_t *A) {
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
      A[e] = s->mask[(s->mask_batch > 1 ? b : 0) * nq * nk + e] != 0;
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
      const at_spec *ps = &s->parts[p];
      uint8_t *P = malloc((size_t)(ps->nq * ps->nk));
      at_allow(ps, ps->nq, ps->nk, 0, P);
      for (int64_t i = 0; i < ps->nq; i++)
        memcpy(A + (qo + i) * nk + ko, P + i * ps->nk, (size_t)ps->nk);
      free(P);
      qo += ps->nq, ko += ps->nk;
    }
    break;
  }
  }
}

static int64_t at_row_count(const at_ctx *x, int64_t b, int64_t i) {
  uint8_t *A = malloc((size_t)(x->Nq * x->Nk));
  at_allow(&x->rel, x->Nq, x->Nk, b, A);
  int64_t c = 0;
  for (int64_t j = 0; j < x->Nk; j++)
    c += A[i * x->Nk + j];
  free(A);
  return c;
}

static size_t at_n_out(const at_ctx *x) { return (size_t)(x->B * x->Nq * x->Hq * x->Dv); }
static size_t at_n_lse(const at_ctx *x) { return (size_t)(x->B * x->Hq * x->Nq); }

/* Dense softmax over the masked score matrix, in double. */
static void at_naive(const at_ctx *x, const double *q, const double *k, const double *v, double *out, double *lse) {
  double scale = x->scale ? x->scale : 1 / sqrt((double)x->D);
  uint8_t *A = malloc((size_t)(x->Nq * x->Nk));
  double *S = malloc((size_t)x->Nk * sizeof *S);
  for (int64_t b = 0; b < x->B; b++) {
    at_allow(&x->rel, x->Nq, x->Nk, b, A);
    for (int64_t h = 0; h < x->Hq; h++) {
      int64_t g = h / (x->Hq / x->Hkv);
      for (int64_t i = 0; i < x->Nq; i++) {
        double m = -INFINITY, z = 0;
        for (int64_t j = 0; j < x->Nk; j++) {
          S[j] = 0;
          for (int64_t e = 0; e < x->D; e++)
            S[j] += q[((b * x->Nq + i) * x->Hq + h) * x->D + e] * k[((b * x->Nk + j) * x->Hkv + g) * x->D + e];
          S[j] *= scale;
          if (A[i * x->Nk + j] && S[j] > m) m = S[j];
        }
        for (int64_t j = 0; j < x->Nk; j++)
          z += A[i * x->Nk + j] ? exp(S[j] - m) : 0;
        double *o = out + ((b * x->Nq + i) * x->Hq + h) * x->Dv;
        for (int64_t e = 0; e < x->Dv; e++) {
          o[e] = 0;
          for (int64_t j = 0; j < x->Nk; j++)
            if (A[i * x->Nk + j]) o[e] += exp(S[j] - m) / z * v[((b * x->Nk + j) * x->Hkv + g) * x->Dv + e];
        }
        lse[(b * x->Hq + h) * x->Nq + i] = z > 0 ? m + log(z) : -INFINITY;
      }
    }
  }
  free(A), free(S);
}

typedef struct at_data {
  double *q, *k, *v, *w;
} at_data;

static void at_data_init(at_data *d, const at_ctx *x, uint64_t seed, double amp) {
  size_t nq = (size_t)(x->B * x->Nq * x->Hq * x->D), nk = (size_t)(x->B * x->Nk * x->Hkv * x->D),
         nv = (size_t)(x->B * x->Nk * x->Hkv * x->Dv);
  d->q = malloc(nq * sizeof(double)), d->k = malloc(nk * sizeof(double)), d->v = malloc(nv * sizeof(double));
  d->w = malloc((nq > at_n_out(x) ? nq : at_n_out(x)) * sizeof(double));
  ts_uniform(d->q, nq, seed, -amp, amp);
  ts_uniform(d->k, nk, seed + 1000, -amp, amp);
  ts_uniform(d->v, nv, seed + 2000, -1, 1);
  ts_uniform(d->w, nq > at_n_out(x) ? nq : at_n_out(x), seed + 3000, -1, 1);
}
static void at_data_free(at_data *d) { free(d->q), free(d->k), free(d->v), free(d->w); }

static void at_inputs(tg_tape *t, const at_ctx *x, const at_data *d, tg_dtype dt, unsigned flags, tg_id *ids) {
  int64_t sq[4] = {x->B, x->Nq, x->Hq, x->D}, sk[4] = {x->B, x->Nk, x->Hkv, x->D}, sv[4] = {x->B, x->Nk, x->Hkv, x->Dv};
  const int64_t *sh[3] = {sq, sk, sv};
  const double *src[3] = {d->q, d->k, d->v};
  for (int i = 0; i < 3; i++) {
    void *c = ts_convert(src[i], (size_t)(sh[i][0] * sh[i][1] * sh[i][2] * sh[i][3]), dt);
    ids[i] = ts_input(t, dt, 4, sh[i], c, flags);
    free(c);
  }
}

static void at_gc_inputs(const at_ctx *x, const at_data *d, tg_gradcheck_input *in) {
  int64_t sq[4] = {x->B, x->Nq, x->Hq, x->D}, sk[4] = {x->B, x->Nk, x->Hkv, x->D}, sv[4] = {x->B, x->Nk, x->Hkv, x->Dv},
          so[4] = {x->B, x->Nq, x->Hq, x->Dv};
  in[0] = ts_gc_input(TG_F64, 4, sq, d->q);
  in[1] = ts_gc_input(TG_F64, 4, sk, d->k);
  in[2] = ts_gc_input(TG_F64, 4, sv, d->v);
  in[3] = ts_gc_input(TG_F64, 4, so, d->w);
  in[3].differentiable = 0;
}

static tg_id at_fn(tg_tape *t, const tg_id *in, void *user) {
  at_ctx *x = user;
  tg_attention_options o = ts_attn_opts(x->scale, 0, NULL, x->keep);
  tg_id y = tg_attention(t, in[0], in[1], in[2], at_rel(x, at_runtime_of(t)), &o);
  return x->with_w ? tg_sum(t, tg_mul(t, y, in[3])) : y;
}

/* lse: -inf exactly where expected, relatively close elsewhere. */
static void at_expect_lse(const char *name, const double *got, const double *want, size_t n, double rtol) {
  for (size_t i = 0; i < n; i++) {
    if (isinf(want[i]) || isinf(got[i])) {
      cr_expect(got[i] == want[i], "%s: lse[%zu] = %g, expected %g", name, i, got[i], want[i]);
      continue;
    }
    cr_expect(fabs(got[i] - want[i]) <= rtol * (1 + fabs(want[i])), "%s: lse[%zu] = %.9g, expected %.9g", name, i,
              got[i], want[i]);
  }
}

/* ------------------------------------------------------------ cases */

static uint8_t MASK2[2 * 3 * 4] = {1, 0, 1, 1, 0, 0, 0, 0, 0, 1, 1, 0, /* batch 1: */ 1,
                                   1, 1, 1, 0, 1, 0, 0, 1, 0, 0, 0};
static int32_t CUQ[4] = {0, 1, 4, 6}, CUK[4] = {0, 2, 3, 6};
static int64_t RP[5] = {0, 2, 2, 5, 6};
static int32_t CI[6] = {0, 3, 1, 2, 4, 0};
static const at_spec PARTS[3] = {{.kind = TG_REL_CSR, .nq = 4, .nk = 5, .row_ptr = RP, .col_idx = CI},
                                 {.kind = TG_REL_CAUSAL, .nq = 2, .nk = 3},
                                 {.kind = TG_REL_DENSE, .nq = 1, .nk = 2}};

/* B, Nq, Nk, Hq, Hkv, D, Dv */
#define DIMS(b, nq, nk, hq, hkv, d, dv) .B = b, .Nq = nq, .Nk = nk, .Hq = hq, .Hkv = hkv, .D = d, .Dv = dv
static at_ctx CASES[] = {
    {"dense", {.kind = TG_REL_DENSE, .nq = 3, .nk = 4}, DIMS(2, 3, 4, 2, 2, 3, 3)},
    {"causal nq<nk", {.kind = TG_REL_CAUSAL, .nq = 3, .nk = 5}, DIMS(2, 3, 5, 2, 1, 3, 2)},
    {"causal nq>nk", {.kind = TG_REL_CAUSAL, .nq = 5, .nk = 3}, DIMS(1, 5, 3, 2, 2, 2, 3)},
    {"mask per batch, empty row",
     {.kind = TG_REL_MASK, .nq = 3, .nk = 4, .mask_batch = 2, .mask = MASK2},
     DIMS(2, 3, 4, 2, 1, 3, 2)},
    {"mask shared", {.kind = TG_REL_MASK, .nq = 3, .nk = 4, .mask_batch = 0, .mask = MASK2}, DIMS(2, 3, 4, 1, 1, 2, 2)},
    {"varlen causal, length-1 seq",
     {.kind = TG_REL_VARLEN, .n_seqs = 3, .cu_q = CUQ, .cu_k = CUK, .causal = 1},
     DIMS(1, 6, 6, 2, 1, 3, 2)},
    {"varlen", {.kind = TG_REL_VARLEN, .n_seqs = 3, .cu_q = CUQ, .cu_k = CUK}, DIMS(1, 6, 6, 2, 2, 2, 3)},
    {"csr with empty row",
     {.kind = TG_REL_CSR, .nq = 4, .nk = 5, .row_ptr = RP, .col_idx = CI},
     DIMS(2, 4, 5, 2, 1, 3, 3)},
    {"concat", {.kind = TG_REL_CONCAT, .n_parts = 3, .parts = PARTS}, DIMS(1, 7, 10, 1, 1, 2, 2)},
    {"gqa 4/2, Dv != D", {.kind = TG_REL_CAUSAL, .nq = 4, .nk = 4}, DIMS(2, 4, 4, 4, 2, 3, 5)},
};
#define NCASES (sizeof CASES / sizeof CASES[0])

/* ------------------------------------------------------------ forward against the reference */

Test(attention, host_matches_naive_every_relation) {
  for (size_t c = 0; c < NCASES; c++) {
    at_ctx *x = &CASES[c];
    at_data d;
    at_data_init(&d, x, 100 + c, 1.5);
    double *want = malloc(at_n_out(x) * sizeof *want), *wlse = malloc(at_n_lse(x) * sizeof *wlse);
    at_naive(x, d.q, d.k, d.v, want, wlse);
    for (int pass = 0; pass < 2; pass++) {
      tg_dtype dt = pass ? TG_F32 : TG_F64;
      tg_runtime *rt = ts_host_runtime();
      tg_tape *t = ts_tape(rt);
      tg_id ids[3];
      at_inputs(t, x, &d, dt, 0, ids);
      tg_id lse = 42;
      tg_attention_options o = ts_attn_opts(x->scale, 0, &lse, 0);
      tg_id y = tg_attention(t, ids[0], ids[1], ids[2], at_rel(x, rt), &o);
      cr_assert_neq(y, TG_NO_ID, "%s: %s", x->name, tg_tape_error(t));
      double *got = malloc(at_n_out(x) * sizeof *got), *glse = malloc(at_n_lse(x) * sizeof *glse);
      ts_read(t, y, got, (int64_t)at_n_out(x));
      ts_read(t, lse, glse, (int64_t)at_n_lse(x));
      double tol = dt == TG_F64 ? 1e-12 : 2e-6;
      double r = ts_close_ratio(got, want, at_n_out(x), tol, tol);
      cr_expect(r <= 1, "%s %s: out off by %.3g x tolerance", x->name, tg_dtype_name(dt), r);
      at_expect_lse(x->name, glse, wlse, at_n_lse(x), 1e-6);
      free(got), free(glse);
      tg_tape_destroy(t);
      tg_runtime_destroy(rt);
    }
    free(want), free(wlse);
    at_data_free(&d);
  }
  at_free_rels(CASES, NCASES);
}

/* ------------------------------------------------------------ gradients */

Test(attention, gradcheck_every_relation) {
  for (size_t c = 0; c < NCASES; c++) {
    at_ctx *x = &CASES[c];
    at_data d;
    at_data_init(&d, x, 200 + c, 1.0);
    x->with_w = 1;
    tg_gradcheck_input in[4];
    at_gc_inputs(x, &d, in);
    cr_log_info("gradcheck: %s", x->name);
    ts_gradcheck(at_fn, x, 4, in);
    x->with_w = 0;
    at_data_free(&d);
  }
  at_free_rels(CASES, NCASES);
}

static tg_id self_fn(tg_tape *t, const tg_id *in, void *user) {
  at_ctx *x = user;
  tg_attention_options o = ts_attn_opts(x->scale, 0, NULL, 0);
  tg_id y = tg_attention(t, in[0], in[0], in[0], at_rel(x, at_runtime_of(t)), &o);
  return tg_sum(t, tg_mul(t, y, in[1]));
}

Test(attention, gradcheck_same_tensor_as_q_k_v) {
  at_ctx x = {"self", {.kind = TG_REL_CAUSAL, .nq = 4, .nk = 4}, DIMS(2, 4, 4, 2, 2, 3, 3)};
  at_data d;
  at_data_init(&d, &x, 7, 1.0);
  int64_t sq[4] = {2, 4, 2, 3};
  tg_gradcheck_input in[2] = {ts_gc_input(TG_F64, 4, sq, d.q), ts_gc_input(TG_F64, 4, sq, d.w)};
  in[1].differentiable = 0;
  ts_gradcheck(self_fn, &x, 2, in);
  at_data_free(&d);
  at_free_rels(&x, 1);
}

/* Rows with no allowed key: out 0, lse -inf, no gradient, never NaN. */
Test(attention, empty_rows_zero_out_zero_grad) {
  at_ctx cases[2] = {
      {"causal 5x3", {.kind = TG_REL_CAUSAL, .nq = 5, .nk = 3}, DIMS(2, 5, 3, 2, 1, 2, 2)},
      {"mask", {.kind = TG_REL_MASK, .nq = 3, .nk = 4, .mask_batch = 2, .mask = MASK2}, DIMS(2, 3, 4, 1, 1, 2, 2)}};
  for (int c = 0; c < 2; c++) {
    at_ctx *x = &cases[c];
    at_data d;
    at_data_init(&d, x, 300 + c, 2.0);
    tg_runtime *rt = ts_host_runtime();
    tg_tape *t = ts_tape(rt);
    tg_id ids[3], lse = TG_NO_ID;
    at_inputs(t, x, &d, TG_F64, TG_REQUIRES_GRAD, ids);
    tg_attention_options o = ts_attn_opts(0, 0, &lse, 0);
    tg_id y = tg_attention(t, ids[0], ids[1], ids[2], at_rel(x, rt), &o);
    int64_t so[4] = {x->B, x->Nq, x->Hq, x->Dv};
    tg_id w = ts_input(t, TG_F64, 4, so, d.w, 0);
    cr_assert_eq(tg_tape_backward(t, tg_sum(t, tg_mul(t, y, w))), TG_OK, "%s", tg_tape_error(t));
    size_t no = at_n_out(x), nl = at_n_lse(x), nq = (size_t)(x->B * x->Nq * x->Hq * x->D);
    double *out = malloc(no * sizeof *out), *l = malloc(nl * sizeof *l), *gq = malloc(nq * sizeof *gq);
    ts_read(t, y, out, (int64_t)no);
    ts_read(t, lse, l, (int64_t)nl);
    ts_read_grad(t, ids[0], gq, (int64_t)nq);
    int empties = 0;
    for (int64_t b = 0; b < x->B; b++)
      for (int64_t h = 0; h < x->Hq; h++)
        for (int64_t i = 0; i < x->Nq; i++) {
          int64_t allowed = at_row_count(x, b, i);
          double L = l[(b * x->Hq + h) * x->Nq + i];
          cr_expect(!isnan(L));
          if (allowed) {
            cr_expect(isfinite(L), "%s: row %lld has keys but lse %g", x->name, (long long)i, L);
            continue;
          }
          empties++;
          cr_expect(L == -INFINITY, "%s: empty row %lld has lse %g, expected -inf", x->name, (long long)i, L);
          for (int64_t e = 0; e < x->Dv; e++)
            cr_expect_eq(out[((b * x->Nq + i) * x->Hq + h) * x->Dv + e], 0.0);
          for (int64_t e = 0; e < x->D; e++)
            cr_expect_eq(gq[((b * x->Nq + i) * x->Hq + h) * x->D + e], 0.0);
        }
    cr_expect(empties > 0, "%s: the case should have empty rows", x->name);
    for (size_t i = 0; i < no; i++)
      cr_expect(!isnan(out[i]));
    for (size_t i = 0; i < nq; i++)
      cr_expect(!isnan(gq[i]));
    free(out), free(l), free(gq);
    tg_tape_destroy(t);
    tg_runtime_destroy(rt);
    at_data_free(&d);
  }
  at_free_rels(cases, 2);
}

/* |s| ~ 1e3: exp overflows without the max shift; everything stays finite and exact. */
Test(attention, large_scores_finite) {
  at_ctx x = {"large", {.kind = TG_REL_CAUSAL, .nq = 4, .nk = 6}, DIMS(1, 4, 6, 2, 1, 4, 3)};
  x.scale = 1.0;
  at_data d;
  at_data_init(&d, &x, 77, 30.0); /* |s| = |q.k| up to 4 * 30 * 30, typically ~1e3 */
  double *want = malloc(at_n_out(&x) * sizeof *want), *wl = malloc(at_n_lse(&x) * sizeof *wl);
  at_naive(&x, d.q, d.k, d.v, want, wl);
  double big = 0;
  for (size_t i = 0; i < at_n_lse(&x); i++)
    big = fmax(big, fabs(wl[i]));
  cr_expect(big > 500, "scores should be large (max |lse| %g)", big);
  for (int pass = 0; pass < 2; pass++) {
    tg_dtype dt = pass ? TG_F32 : TG_F64;
    tg_runtime *rt = ts_host_runtime();
    tg_tape *t = ts_tape(rt);
    tg_id ids[3], lse;
    at_inputs(t, &x, &d, dt, TG_REQUIRES_GRAD, ids);
    tg_attention_options o = ts_attn_opts(1.0, 0, &lse, 0);
    tg_id y = tg_attention(t, ids[0], ids[1], ids[2], at_rel(&x, rt), &o);
    cr_assert_eq(tg_tape_backward(t, tg_sum(t, y)), TG_OK, "%s", tg_tape_error(t));
    double got[4 * 2 * 3], gl[8], gk[6 * 4];
    ts_read(t, y, got, 24);
    ts_read(t, lse, gl, 8);
    ts_read_grad(t, ids[1], gk, 24);
    double tol = dt == TG_F64 ? 1e-12 : 1e-4;
    TS_EXPECT_CLOSE(got, want, 24, tol, tol);
    TS_EXPECT_CLOSE(gl, wl, 8, 0, 1e-6);
    for (int i = 0; i < 24; i++)
      cr_expect(isfinite(gk[i]), "grad k[%d] = %g", i, gk[i]);
    tg_tape_destroy(t);
    tg_runtime_destroy(rt);
  }
  free(want), free(wl);
  at_data_free(&d);
  at_free_rels(&x, 1);
}

/* ------------------------------------------------------------ saved state, lse, explain */

Test(attention, host_saved_state_lse_and_explain) {
  at_ctx x = {
      "varlen", {.kind = TG_REL_VARLEN, .n_seqs = 3, .cu_q = CUQ, .cu_k = CUK, .causal = 1}, DIMS(1, 6, 6, 4, 2, 3, 5)};
  at_data d;
  at_data_init(&d, &x, 5, 1.0);
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  tg_id ids[3], lse;
  at_inputs(t, &x, &d, TG_F64, TG_REQUIRES_GRAD, ids);
  tg_attention_options o = ts_attn_opts(0, 0, &lse, 0);
  tg_id y = tg_attention(t, ids[0], ids[1], ids[2], at_rel(&x, rt), &o);
  cr_assert_neq(y, TG_NO_ID, "%s", tg_tape_error(t));
  size_t nodes, saved;
  tg_tape_stats(t, &nodes, &saved);
  cr_expect_eq(nodes, 1);
  cr_expect_eq(saved, (size_t)(1 * 4 * 6) * sizeof(double), "HOST saves lse in f64: %zu bytes", saved);
  tg_dtype ldt;
  int nd;
  int64_t sh[TG_MAX_DIMS];
  tg_tape_dtype(t, lse, &ldt);
  tg_tape_shape(t, lse, &nd, sh, TG_MAX_DIMS);
  cr_expect(ldt == TG_F32 && nd == 3 && sh[0] == 1 && sh[1] == 4 && sh[2] == 6, "lse is f32 [B, Hq, Nq]");
  char buf[1024];
  tg_tape_explain(t, buf, sizeof buf, NULL);
  cr_expect(strstr(buf, "attention") && strstr(buf, "host"), "%s", buf);
  cr_expect(strstr(buf, "rel=varlen(3 seqs, causal) nnz=") != NULL, "%s", buf);
  cr_expect(strstr(buf, "rel_dev=0B lowering=host-rows Hq=4 Hkv=2 D=3 Dv=5") != NULL, "%s", buf);
  /* lse carries no gradient: a loss built from it alone cannot be differentiated */
  cr_expect_eq(tg_tape_backward(t, tg_sum(t, lse)), TG_ERR_STATE);
  /* no grad wanted -> node recorded, nothing saved; grad mode off -> no node */
  tg_tape_reset(t);
  at_inputs(t, &x, &d, TG_F64, 0, ids);
  tg_attention(t, ids[0], ids[1], ids[2], at_rel(&x, rt), NULL);
  tg_tape_stats(t, &nodes, &saved);
  cr_expect(nodes == 1 && saved == 0, "nodes %zu saved %zu", nodes, saved);
  tg_tape_reset(t);
  tg_tape_set_grad_enabled(t, 0, NULL);
  at_inputs(t, &x, &d, TG_F64, TG_REQUIRES_GRAD, ids);
  cr_expect_neq(tg_attention(t, ids[0], ids[1], ids[2], at_rel(&x, rt), NULL), TG_NO_ID);
  tg_tape_stats(t, &nodes, &saved);
  cr_expect(nodes == 0 && saved == 0);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
  at_data_free(&d);
  at_free_rels(&x, 1);
}

/* ------------------------------------------------------------ errors */

static tg_id input4(tg_tape *t, tg_dtype dt, int64_t a, int64_t b, int64_t c, int64_t e) {
  int64_t s[4] = {a, b, c, e};
  double z[512] = {0};
  cr_assert(a * b * c * e <= 512);
  return ts_input(t, dt, 4, s, z, 0);
}

Test(attention, errors) {
  tg_runtime *rt = ts_host_runtime(), *other = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  tg_relation *d34 = NULL, *d33 = NULL, *c35 = NULL, *foreign = NULL, *mask3 = NULL, *vl = NULL;
  uint8_t m[3 * 3 * 4] = {0};
  tg_relation_dense(rt, 3, 4, &d34);
  tg_relation_dense(rt, 3, 3, &d33);
  tg_relation_causal(rt, 3, 5, &c35);
  tg_relation_dense(other, 3, 4, &foreign);
  tg_relation_mask(rt, 3, 3, 4, m, (size_t)(3 * 3 * 4), &mask3);
  int32_t cu[3] = {0, 1, 3};
  tg_relation_varlen(rt, 2, cu, 3 * sizeof(int32_t), NULL, 0, 0, &vl);
  tg_id lse = 42;
  tg_attention_options o = ts_attn_opts(0, 0, &lse, 0);
#define FRESH()                                                                                                        \
  (tg_tape_reset(t), q = input4(t, TG_F64, 2, 3, 2, 4), k = input4(t, TG_F64, 2, 4, 1, 4),                             \
   v = input4(t, TG_F64, 2, 4, 1, 3))
  tg_id q, k, v;
  FRESH();
  int64_t s3[3] = {2, 3, 8};
  double z[48] = {0};
  tg_id q3 = ts_input(t, TG_F64, 3, s3, z, 0);
  cr_expect_eq(tg_attention(t, q3, k, v, d34, &o), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "tg_attention: argument 'q' has shape [2, 3, 8]; expected 4 dims [B, Nq, Hq, D]");
  cr_expect_eq(lse, TG_NO_ID, "lse_out is TG_NO_ID after a failure");
  FRESH();
  cr_expect_eq(tg_attention(t, q, input4(t, TG_F64, 2, 4, 1, 3), v, d34, NULL), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "argument 'k' has shape [2, 4, 1, 3]; expected [B=2, Nk, Hkv, D=4]");
  FRESH();
  cr_expect_eq(tg_attention(t, q, k, input4(t, TG_F64, 2, 5, 1, 3), d34, NULL), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "argument 'v' has shape [2, 5, 1, 3]; expected [B=2, Nk=4, Hkv=1, Dv]");
  FRESH();
  tg_id q3h = input4(t, TG_F64, 2, 3, 3, 4), k2h = input4(t, TG_F64, 2, 4, 2, 4), v2h = input4(t, TG_F64, 2, 4, 2, 3);
  cr_expect_eq(tg_attention(t, q3h, k2h, v2h, d34, NULL), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "query heads Hq = 3 (argument 'q') are not a multiple of key/value heads Hkv = 2");
  FRESH();
  cr_expect_eq(tg_attention(t, q, k, v, d33, NULL), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE,
                   "argument 'rel' is a dense relation over nq = 3, nk = 3; expected nq = Nq = 3 and nk = Nk = 4");
  FRESH();
  cr_expect_eq(tg_attention(t, q, k, v, c35, NULL), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "causal relation over nq = 3, nk = 5");
  FRESH();
  cr_expect_eq(tg_attention(t, q, k, v, mask3, NULL), TG_NO_ID);
  TS_EXPECT_STICKY(
      t, TG_ERR_SHAPE,
      "argument 'rel' is a mask over 3 batch entries; expected a shared mask (batch 0 or 1) or batch B = 2");
  FRESH();
  cr_expect_eq(tg_attention(t, q, k, v, vl, NULL), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "varlen relation (packed sequences); expected batch B = 1, got B = 2");
  FRESH();
  cr_expect_eq(tg_attention(t, q, k, v, foreign, NULL), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "argument 'rel' (dense) was built on another runtime");
  FRESH();
  cr_expect_eq(tg_attention(t, q, k, v, NULL, NULL), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "argument 'rel' is NULL");
  FRESH();
  cr_expect_eq(tg_attention(t, q, input4(t, TG_F32, 2, 4, 1, 4), v, d34, NULL), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "arguments 'q' (f64) and 'k' (f32) must have the same dtype");
  FRESH();
  int32_t zi[96] = {0};
  int64_t sq[4] = {2, 3, 2, 4};
  cr_expect_eq(tg_attention(t, ts_input(t, TG_I32, 4, sq, zi, 0), k, v, d34, NULL), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "argument 'q' has dtype i32");
  FRESH();
  cr_expect_eq(tg_attention(t, TG_NO_ID, k, v, d34, NULL), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "argument 'q' is TG_NO_ID");
  FRESH();
  tg_id stale = q;
  FRESH();
  cr_expect_eq(tg_attention(t, q, k, stale, d34, NULL), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "argument 'v' is id");
  FRESH();
  o.scale = NAN;
  cr_expect_eq(tg_attention(t, q, k, v, d34, &o), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "option 'scale' is nan");
  FRESH();
  o.scale = 0; /* zero is a value, not "default" (tiga.h): refused */
  cr_expect_eq(tg_attention(t, q, k, v, d34, &o), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "option 'scale' is 0; expected a finite number > 0, or TG_SCALE_AUTO");
  o.scale = TG_SCALE_AUTO;
  double bad[2] = {1.5, -0.1};
  for (int i = 0; i < 2; i++) {
    FRESH();
    o.block_prune_threshold = bad[i];
    cr_expect_eq(tg_attention(t, q, k, v, d34, &o), TG_NO_ID);
    TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "option 'block_prune_threshold' is");
  }
  FRESH();
  o.block_prune_threshold = 0.5; /* HOST computes exact attention only */
  cr_expect_eq(tg_attention(t, q, k, v, d34, &o), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_UNSUPPORTED,
                   "option 'block_prune_threshold' = 0.5 needs provider CUDA_FUSED; provider host");
  o.block_prune_threshold = 0;
  FRESH();
  tg_tape_set_provider(t, TG_PROVIDER_CUDA_FUSED, NULL);
  cr_expect_eq(tg_attention(t, q, k, v, d34, NULL), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_NO_DEVICE, "host-only");
  tg_tape_set_provider(t, TG_PROVIDER_AUTO, NULL);
  cr_expect_eq(tg_attention(NULL, q, k, v, d34, NULL), TG_NO_ID);
  cr_expect(strstr(tg_last_error(), "tg_attention: argument 'tape' is NULL") != NULL);
#undef FRESH
  tg_tape_destroy(t);
  tg_relation *rels[6] = {d34, d33, c35, foreign, mask3, vl};
  for (int i = 0; i < 6; i++)
    tg_relation_destroy(rels[i]);
  tg_runtime_destroy(rt);
  tg_runtime_destroy(other);
}

/* ------------------------------------------------------------ attention dropout (HOST) */

/* Reference with dropout, written from tiga.h: p over all allowed keys, weight m_ij / keep with
 * m_ij = [w < keep * 2^32], w word 2 (R mod 2) + (j mod 2) of Philox(seed, counter lo =
 * floor(R/2) * ceil(Nk/2) + floor(j/2), hi = call | 2^63), R = (b*Hq + h)*Nq + i. lse is that of
 * at_naive. */
static int ad_kept(uint64_t seed, uint64_t call, double keep, uint64_t R, uint64_t j, uint64_t Nk) {
  uint32_t w[4];
  tg_philox4x32(seed, (R / 2) * ((Nk + 1) / 2) + j / 2, call | (1ull << 63), w);
  return (double)w[2 * (R % 2) + j % 2] < keep * 4294967296.0;
}

static void ad_naive(const at_ctx *x, uint64_t seed, uint64_t call, double keep, const double *q, const double *k,
                     const double *v, double *out) {
  double scale = x->scale ? x->scale : 1 / sqrt((double)x->D);
  uint8_t *A = malloc((size_t)(x->Nq * x->Nk));
  double *S = malloc((size_t)x->Nk * sizeof *S);
  for (int64_t b = 0; b < x->B; b++) {
    at_allow(&x->rel, x->Nq, x->Nk, b, A);
    for (int64_t h = 0; h < x->Hq; h++) {
      int64_t g = h / (x->Hq / x->Hkv);
      for (int64_t i = 0; i < x->Nq; i++) {
        double z = 0;
        for (int64_t j = 0; j < x->Nk; j++) {
          S[j] = 0;
          for (int64_t e = 0; e < x->D; e++)
            S[j] += q[((b * x->Nq + i) * x->Hq + h) * x->D + e] * k[((b * x->Nk + j) * x->Hkv + g) * x->D + e];
          S[j] = exp(scale * S[j]); /* inputs are small: no max shift needed here */
          z += A[i * x->Nk + j] ? S[j] : 0;
        }
        double *o = out + ((b * x->Nq + i) * x->Hq + h) * x->Dv;
        for (int64_t e = 0; e < x->Dv; e++) {
          o[e] = 0;
          for (int64_t j = 0; j < x->Nk; j++) {
            uint64_t R = (uint64_t)((b * x->Hq + h) * x->Nq + i);
            if (A[i * x->Nk + j] && ad_kept(seed, call, keep, R, (uint64_t)j, (uint64_t)x->Nk))
              o[e] += S[j] / z / keep * v[((b * x->Nk + j) * x->Hkv + g) * x->Dv + e];
          }
        }
      }
    }
  }
  free(A), free(S);
}

static const size_t DROP_CASES[] = {0, 1, 3, 5, 7, 9}; /* dense, causal, mask+empty row, varlen, csr, gqa */
#define NDROP (sizeof DROP_CASES / sizeof DROP_CASES[0])

Test(attention_dropout, host_matches_naive_and_counter_advances) {
  const uint64_t seed = 0x1234abcdull;
  for (size_t c = 0; c < NDROP; c++) {
    at_ctx *x = &CASES[DROP_CASES[c]];
    at_data d;
    at_data_init(&d, x, 300 + c, 1.0);
    size_t no = at_n_out(x), nl = at_n_lse(x);
    double *want[2] = {malloc(no * sizeof(double)), malloc(no * sizeof(double))};
    double *nodrop = malloc(no * sizeof(double)), *wlse = malloc(nl * sizeof(double));
    at_naive(x, d.q, d.k, d.v, nodrop, wlse);
    for (int call = 0; call < 2; call++)
      ad_naive(x, seed, (uint64_t)call, 0.6, d.q, d.k, d.v, want[call]);
    for (int pass = 0; pass < 2; pass++) {
      tg_dtype dt = pass ? TG_F32 : TG_F64;
      tg_runtime *rt = ts_host_runtime();
      tg_tape *t = ts_tape(rt);
      cr_assert_eq(tg_tape_set_seed(t, seed), TG_OK);
      tg_id ids[3];
      at_inputs(t, x, &d, dt, TG_REQUIRES_GRAD, ids);
      double tol = dt == TG_F64 ? 1e-12 : 2e-6;
      for (int call = 0; call < 2; call++) { /* the second call draws with counter 1 */
        tg_id lse = TG_NO_ID;
        tg_attention_options o = ts_attn_opts(x->scale, 0, &lse, 0.6);
        tg_id y = tg_attention(t, ids[0], ids[1], ids[2], at_rel(x, rt), &o);
        cr_assert_neq(y, TG_NO_ID, "%s: %s", x->name, tg_tape_error(t));
        double *got = malloc(no * sizeof *got), *glse = malloc(nl * sizeof *glse);
        ts_read(t, y, got, (int64_t)no);
        ts_read(t, lse, glse, (int64_t)nl);
        double r = ts_close_ratio(got, want[call], no, tol, tol);
        cr_expect(r <= 1, "%s %s call %d: out off by %.3g x tolerance", x->name, tg_dtype_name(dt), call, r);
        at_expect_lse(x->name, glse, wlse, nl, 1e-6); /* lse does not see the mask */
        free(got), free(glse);
      }
      tg_tape_destroy(t);
      tg_runtime_destroy(rt);
    }
    free(want[0]), free(want[1]), free(nodrop), free(wlse);
    at_data_free(&d);
  }
  at_free_rels(CASES, NCASES);
}

Test(attention_dropout, gradcheck_every_relation) {
  for (size_t c = 0; c < NDROP; c++) {
    at_ctx *x = &CASES[DROP_CASES[c]];
    at_data d;
    at_data_init(&d, x, 400 + c, 1.0);
    x->with_w = 1, x->keep = 0.7;
    tg_gradcheck_input in[4];
    at_gc_inputs(x, &d, in);
    cr_log_info("gradcheck with dropout: %s", x->name);
    ts_gradcheck(at_fn, x, 4, in);
    x->with_w = 0, x->keep = 0;
    at_data_free(&d);
  }
  at_free_rels(CASES, NCASES);
}

/* gradcheck relies on this: the callback re-run on a reset tape draws the same mask. */
Test(attention_dropout, reset_tape_same_mask_set_seed_new_mask) {
  at_ctx *x = &CASES[0];
  at_data d;
  at_data_init(&d, x, 9, 1.0);
  size_t no = at_n_out(x);
  double *a = malloc(no * sizeof *a), *b = malloc(no * sizeof *b), *c = malloc(no * sizeof *c);
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double *dst[3] = {a, b, c};
  for (int run = 0; run < 3; run++) {
    tg_tape_reset(t);
    if (run == 2) tg_tape_set_seed(t, 99);
    tg_id ids[3];
    at_inputs(t, x, &d, TG_F64, 0, ids);
    tg_attention_options o = ts_attn_opts(0, 0, NULL, 0.5);
    tg_id y = tg_attention(t, ids[0], ids[1], ids[2], at_rel(x, rt), &o);
    cr_assert_neq(y, TG_NO_ID, "%s", tg_tape_error(t));
    ts_read(t, y, dst[run], (int64_t)no);
  }
  cr_expect(memcmp(a, b, no * sizeof *a) == 0, "a reset tape must draw the same mask");
  cr_expect(memcmp(a, c, no * sizeof *a) != 0, "another seed must draw another mask");
  free(a), free(b), free(c);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
  at_data_free(&d);
  at_free_rels(x, 1);
}

/* keep = 1 and keep = 0 are bit for bit no dropout; so is any keep in no-grad mode. */
Test(attention_dropout, keep_one_zero_and_no_grad_are_identity) {
  at_ctx *x = &CASES[1];
  at_data d;
  at_data_init(&d, x, 11, 1.0);
  size_t no = at_n_out(x);
  double *ref = malloc(no * sizeof *ref), *got = malloc(no * sizeof *got);
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  const double keeps[4] = {-1 /* options NULL */, 1, 0, 0.5};
  for (int c = 0; c < 4; c++) {
    tg_tape_reset(t);
    if (c == 3) cr_assert_eq(tg_tape_set_grad_enabled(t, 0, NULL), TG_OK);
    tg_id ids[3];
    at_inputs(t, x, &d, TG_F32, TG_REQUIRES_GRAD, ids);
    tg_attention_options o = ts_attn_opts(0, 0, NULL, keeps[c]);
    tg_id y = tg_attention(t, ids[0], ids[1], ids[2], at_rel(x, rt), c ? &o : NULL);
    cr_assert_neq(y, TG_NO_ID, "%s", tg_tape_error(t));
    ts_read(t, y, c ? got : ref, (int64_t)no);
    if (c) cr_expect(memcmp(ref, got, no * sizeof *got) == 0, "keep %g (case %d) must equal no dropout", keeps[c], c);
  }
  tg_tape_set_grad_enabled(t, 1, NULL);
  free(ref), free(got);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
  at_data_free(&d);
  at_free_rels(x, 1);
}

/* q = 0: every allowed weight is 1/Nk; v[j] = e_j, so out[b,i,h,j] = m_ij / (Nk keep). */
Test(attention_dropout, dropped_fraction_is_one_minus_keep) {
  enum { B = 2, N = 64, H = 2 };
  const double keep = 0.8;
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  tg_relation *r = NULL;
  cr_assert_eq(tg_relation_dense(rt, N, N, &r), TG_OK);
  double *q = calloc(B * N * H * 4, sizeof *q), *v = calloc(B * N * H * N, sizeof *v);
  for (int b = 0; b < B; b++)
    for (int j = 0; j < N; j++)
      for (int h = 0; h < H; h++)
        v[((b * N + j) * H + h) * N + j] = 1;
  int64_t sq[4] = {B, N, H, 4}, sv[4] = {B, N, H, N};
  tg_id qi = ts_input(t, TG_F64, 4, sq, q, TG_REQUIRES_GRAD), vi = ts_input(t, TG_F64, 4, sv, v, 0);
  tg_attention_options o = ts_attn_opts(0, 0, NULL, keep);
  tg_id y = tg_attention(t, qi, qi, vi, r, &o);
  cr_assert_neq(y, TG_NO_ID, "%s", tg_tape_error(t));
  size_t n = (size_t)B * N * H * N, zeros = 0, bad = 0;
  double *out = malloc(n * sizeof *out);
  ts_read(t, y, out, (int64_t)n);
  for (size_t e = 0; e < n; e++) {
    if (out[e] == 0)
      zeros++;
    else if (fabs(out[e] - 1.0 / (N * keep)) > 1e-12)
      bad++;
  }
  double frac = (double)zeros / (double)n; /* 16384 draws: sd ~ 0.003 */
  cr_expect(fabs(frac - (1 - keep)) < 0.02, "dropped fraction %.4f, expected about %.2f", frac, 1 - keep);
  cr_expect_eq(bad, 0, "%zu kept weights differ from 1/(Nk keep)", bad);
  free(q), free(v), free(out);
  tg_relation_destroy(r);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(attention_dropout, bad_keep_values) {
  const double bad[4] = {NAN, -0.25, 1.5, INFINITY};
  at_ctx *x = &CASES[0];
  at_data d;
  at_data_init(&d, x, 13, 1.0);
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  for (int c = 0; c < 4; c++) {
    tg_tape_reset(t);
    tg_id ids[3];
    at_inputs(t, x, &d, TG_F64, 0, ids);
    tg_attention_options o = ts_attn_opts(0, 0, NULL, bad[c]);
    cr_expect_eq(tg_attention(t, ids[0], ids[1], ids[2], at_rel(x, rt), &o), TG_NO_ID);
    TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "dropout_keep");
  }
  tg_tape_reset(t);
  int64_t sx[3] = {1, 3, 4}, sw[2] = {4, 4};
  double z[16] = {0};
  tg_id xi = ts_input(t, TG_F64, 3, sx, z, 0), w = ts_input(t, TG_F64, 2, sw, z, 0);
  tg_mha_options mo = ts_mha_opts(2, 2, 0);
  mo.attention_dropout_keep = 2;
  cr_expect_eq(tg_mha(t, xi, w, w, w, w, &mo), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "dropout_keep");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
  at_data_free(&d);
  at_free_rels(x, 1);
}

/* tg_mha passes attention_dropout_keep through: same as tg_attention's output path, so checked by
 * gradcheck on the whole block with dropout on. */
static tg_id mha_fn(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  tg_mha_options mo = ts_mha_opts(2, 2, 1);
  mo.attention_dropout_keep = 0.6;
  return tg_sum(t, tg_mul(t, tg_mha(t, in[0], in[1], in[2], in[3], in[4], &mo), in[5]));
}

Test(attention_dropout, mha_passes_keep_through_gradcheck) {
  int64_t sx[3] = {2, 5, 4}, sw[2] = {4, 4};
  double X[40], W[4][16], R[40];
  ts_uniform(X, 40, 1, -1, 1);
  ts_uniform(R, 40, 2, -1, 1);
  for (int i = 0; i < 4; i++)
    ts_uniform(W[i], 16, 3 + (uint64_t)i, -1, 1);
  tg_gradcheck_input in[6] = {ts_gc_input(TG_F64, 3, sx, X),    ts_gc_input(TG_F64, 2, sw, W[0]),
                              ts_gc_input(TG_F64, 2, sw, W[1]), ts_gc_input(TG_F64, 2, sw, W[2]),
                              ts_gc_input(TG_F64, 2, sw, W[3]), ts_gc_input(TG_F64, 3, sx, R)};
  in[5].differentiable = 0;
  ts_gradcheck(mha_fn, NULL, 6, in);
  /* and the option takes effect: output differs from keep = 1 */
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  tg_id xi = ts_input(t, TG_F64, 3, sx, X, 0), w[4];
  for (int i = 0; i < 4; i++)
    w[i] = ts_input(t, TG_F64, 2, sw, W[i], 0);
  tg_mha_options m0 = ts_mha_opts(2, 2, 1), m1 = ts_mha_opts(2, 2, 1);
  m1.attention_dropout_keep = 0.6;
  double a[40], b[40];
  ts_read(t, tg_mha(t, xi, w[0], w[1], w[2], w[3], &m0), a, 40);
  ts_read(t, tg_mha(t, xi, w[0], w[1], w[2], w[3], &m1), b, 40);
  cr_expect(memcmp(a, b, sizeof a) != 0, "attention_dropout_keep = 0.6 had no effect");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* ------------------------------------------------------------ CUDA providers (skip without a GPU) */

static uint8_t ODD_MASK[2 * 37 * 53];
static int64_t ODD_RP[38];
static int32_t ODD_CI[37 * 53];
static int32_t ODD_CUQ[4] = {0, 1, 15, 37}, ODD_CUK[4] = {0, 20, 21, 53};

/* A random mask (about 70% allowed) with row 3 of batch 0 fully blocked, and its CSR form. */
static void odd_relations(void) {
  uint64_t s = 99;
  for (int64_t e = 0; e < 2 * 37 * 53; e++)
    ODD_MASK[e] = (ts_next(&s) % 10) < 7;
  memset(ODD_MASK + 3 * 53, 0, 53);
  int64_t nnz = 0;
  for (int64_t i = 0; i < 37; i++) {
    ODD_RP[i] = nnz;
    for (int64_t j = 0; j < 53; j++)
      if (ODD_MASK[i * 53 + j]) ODD_CI[nnz++] = (int32_t)j;
  }
  ODD_RP[37] = nnz;
}

static at_ctx ODD[] = {
    {"dense", {.kind = TG_REL_DENSE, .nq = 37, .nk = 53}, DIMS(2, 37, 53, 4, 2, 64, 32)},
    {"causal nq<nk", {.kind = TG_REL_CAUSAL, .nq = 37, .nk = 53}, DIMS(2, 37, 53, 4, 2, 64, 32)},
    {"causal nq>nk", {.kind = TG_REL_CAUSAL, .nq = 53, .nk = 37}, DIMS(1, 53, 37, 2, 1, 64, 64)},
    {"mask per batch",
     {.kind = TG_REL_MASK, .nq = 37, .nk = 53, .mask_batch = 2, .mask = ODD_MASK},
     DIMS(2, 37, 53, 4, 2, 64, 32)},
    {"varlen causal",
     {.kind = TG_REL_VARLEN, .n_seqs = 3, .cu_q = ODD_CUQ, .cu_k = ODD_CUK, .causal = 1},
     DIMS(1, 37, 53, 4, 1, 64, 32)},
    {"csr",
     {.kind = TG_REL_CSR, .nq = 37, .nk = 53, .row_ptr = ODD_RP, .col_idx = ODD_CI},
     DIMS(2, 37, 53, 4, 2, 64, 32)},
    {"csr B=1",
     {.kind = TG_REL_CSR, .nq = 37, .nk = 53, .row_ptr = ODD_RP, .col_idx = ODD_CI},
     DIMS(1, 37, 53, 4, 2, 64, 32)},
    {"N=1", {.kind = TG_REL_CAUSAL, .nq = 1, .nk = 1}, DIMS(3, 1, 1, 2, 1, 64, 32)},
};
#define NODD (sizeof ODD / sizeof ODD[0])

/* keep: attention dropout_keep (0: none). Both tapes start at the default seed and counter 0, so
 * the host and the device draw the same mask. */
static void cuda_vs_host(tg_provider prov, double keep) {
  tg_runtime_destroy(ts_cuda_runtime_or_skip());
  odd_relations();
  const tg_dtype dts[3] = {TG_F32, TG_BF16, TG_F16};
  const double tols[3] = {1e-4, 3e-2, 3e-2};
  for (size_t c = 0; c < NODD; c++) {
    at_ctx *x = &ODD[c];
    /* CUDA_COMPOSED over a graph folds the batch into one graph: its dropout takes B = 1 (the
     * "csr B=1" case covers it; B > 1 with dropout is refused there) */
    if (prov == TG_PROVIDER_CUDA_COMPOSED && keep > 0 && x->rel.kind == TG_REL_CSR && x->B > 1) continue;
    x->keep = keep;
    at_data d;
    at_data_init(&d, x, 500 + c, 1.0);
    tg_gradcheck_input in[4];
    at_gc_inputs(x, &d, in);
    for (int i = 0; i < 3; i++) {
      cr_log_info("%s %s %s", tg_provider_name(prov), x->name, tg_dtype_name(dts[i]));
      ts_check_cuda_vs_host(at_fn, x, 3, in, dts[i], prov, tols[i]);
    }
    x->keep = 0;
    at_data_free(&d);
  }
  at_free_rels(ODD, NODD);
}

Test(attention_cuda, composed_matches_host) { cuda_vs_host(TG_PROVIDER_CUDA_COMPOSED, 0); }
Test(attention_cuda, fused_matches_host) { cuda_vs_host(TG_PROVIDER_CUDA_FUSED, 0); }
Test(attention_cuda, composed_matches_host_with_dropout) { cuda_vs_host(TG_PROVIDER_CUDA_COMPOSED, 0.7); }

Test(attention_cuda, fused_matches_host_with_dropout) { cuda_vs_host(TG_PROVIDER_CUDA_FUSED, 0.7); }

/* D == Dv cases reach the tensor-core kernels (f16 / bf16), whose accumulator fragments map to
 * (i, j) for the mask: dense, causal and mask relations with odd sizes and GQA. */
Test(attention_cuda, fused_tensor_core_dropout_matches_host) {
  tg_runtime_destroy(ts_cuda_runtime_or_skip());
  odd_relations();
  at_ctx tc[3] = {{"tc dense", {.kind = TG_REL_DENSE, .nq = 37, .nk = 53}, DIMS(2, 37, 53, 4, 2, 64, 64)},
                  {"tc causal", {.kind = TG_REL_CAUSAL, .nq = 70, .nk = 70}, DIMS(1, 70, 70, 2, 1, 32, 32)},
                  {"tc mask",
                   {.kind = TG_REL_MASK, .nq = 37, .nk = 53, .mask_batch = 2, .mask = ODD_MASK},
                   DIMS(2, 37, 53, 2, 2, 128, 128)}};
  const tg_dtype dts[2] = {TG_BF16, TG_F16};
  for (size_t c = 0; c < 3; c++) {
    at_ctx *x = &tc[c];
    x->keep = 0.8;
    at_data d;
    at_data_init(&d, x, 900 + c, 1.0);
    tg_gradcheck_input in[4];
    at_gc_inputs(x, &d, in);
    for (int i = 0; i < 2; i++) {
      cr_log_info("CUDA_FUSED dropout %s %s", x->name, tg_dtype_name(dts[i]));
      ts_check_cuda_vs_host(at_fn, x, 3, in, dts[i], TG_PROVIDER_CUDA_FUSED, 3e-2);
    }
    at_data_free(&d);
  }
  at_free_rels(tc, 3);
}

/* No dropout, D == Dv in {64, 128}, f16 / bf16: on a compute capability 9.0 device these run the
 * sm_90a wgmma kernels (cuda/attention_sm90.cu), elsewhere the mma.sync ones. Odd sizes (tiles of
 * 64 / 128 rows cut mid-way), GQA, causal both ways, a mask with a fully blocked row, varlen with a
 * length-1 sequence. */
/* Masks for the two D = 64 mask tile shapes of the sm_90a kernels (ops/relation.h, mask_coarse):
 * COARSE_MASK [300, 260], each aligned 128 x 128 block empty, full or 70 % random (coarse: 128-row /
 * 128-key tiles); FINE_MASK [2, 150, 140], 70 % random on a 64 x 64 checkerboard, the second
 * entry's checkerboard shifted, row 70 of entry 0 empty (not coarse: 64 x 64 tiles). */
static uint8_t COARSE_MASK[300 * 260], FINE_MASK[2 * 150 * 140];
static void wg_masks(void) {
  uint64_t s = 7;
  for (int64_t i = 0; i < 300; i++)
    for (int64_t j = 0; j < 260; j++) {
      const int64_t blk = (i / 128) * 3 + j / 128;
      const int state = (int)((blk * 2654435761u >> 7) % 3); /* 0 empty, 1 full, 2 random */
      COARSE_MASK[i * 260 + j] = state == 1 || (state == 2 && ts_next(&s) % 10 < 7);
    }
  for (int64_t b = 0; b < 2; b++)
    for (int64_t i = 0; i < 150; i++)
      for (int64_t j = 0; j < 140; j++)
        FINE_MASK[(b * 150 + i) * 140 + j] = ((i / 64 + j / 64 + b) % 2 == 0) && ts_next(&s) % 10 < 7;
  memset(FINE_MASK + 70 * 140, 0, 140);
}

/* The two masks take the two shapes (checked without a GPU: the hint is host data). */
Test(attention_cuda, wgmma_masks_are_coarse_and_fine) {
  wg_masks();
  tg_runtime *rt = ts_host_runtime();
  tg_relation *c = NULL, *f = NULL;
  cr_assert_eq(tg_relation_mask(rt, 0, 300, 260, COARSE_MASK, (size_t)(300 * 260), &c), TG_OK);
  cr_assert_eq(tg_relation_mask(rt, 2, 150, 140, FINE_MASK, (size_t)(2 * 150 * 140), &f), TG_OK);
  cr_expect_eq(c->mask_coarse, 1, "the coarse mask takes the 128-row / 128-key tiles");
  cr_expect_eq(f->mask_coarse, 0, "the fine mask takes the 64 x 64 tiles");
  tg_relation_destroy(c);
  tg_relation_destroy(f);
  tg_runtime_destroy(rt);
}

Test(attention_cuda, fused_wgmma_shapes_match_host) {
  tg_runtime_destroy(ts_cuda_runtime_or_skip());
  odd_relations();
  wg_masks();
  at_ctx wc[7] = {{"wg dense gqa", {.kind = TG_REL_DENSE, .nq = 37, .nk = 53}, DIMS(2, 37, 53, 4, 2, 128, 128)},
                  {"wg causal nq<nk", {.kind = TG_REL_CAUSAL, .nq = 130, .nk = 200}, DIMS(1, 130, 200, 2, 1, 64, 64)},
                  {"wg causal nq>nk", {.kind = TG_REL_CAUSAL, .nq = 200, .nk = 70}, DIMS(1, 200, 70, 3, 3, 128, 128)},
                  {"wg mask",
                   {.kind = TG_REL_MASK, .nq = 37, .nk = 53, .mask_batch = 2, .mask = ODD_MASK},
                   DIMS(2, 37, 53, 2, 1, 64, 64)},
                  {"wg varlen causal",
                   {.kind = TG_REL_VARLEN, .n_seqs = 3, .cu_q = ODD_CUQ, .cu_k = ODD_CUK, .causal = 1},
                   DIMS(1, 37, 53, 4, 2, 128, 128)},
                  {"wg mask coarse",
                   {.kind = TG_REL_MASK, .nq = 300, .nk = 260, .mask = COARSE_MASK},
                   DIMS(2, 300, 260, 4, 2, 64, 64)},
                  {"wg mask fine",
                   {.kind = TG_REL_MASK, .nq = 150, .nk = 140, .mask_batch = 2, .mask = FINE_MASK},
                   DIMS(2, 150, 140, 4, 2, 64, 64)}};
  const tg_dtype dts[2] = {TG_BF16, TG_F16};
  for (size_t c = 0; c < 7; c++) {
    at_ctx *x = &wc[c];
    at_data d;
    at_data_init(&d, x, 1900 + c, 1.0);
    tg_gradcheck_input in[4];
    at_gc_inputs(x, &d, in);
    for (int i = 0; i < 2; i++) {
      cr_log_info("CUDA_FUSED %s %s", x->name, tg_dtype_name(dts[i]));
      ts_check_cuda_vs_host(at_fn, x, 3, in, dts[i], TG_PROVIDER_CUDA_FUSED, 3e-2);
    }
    at_data_free(&d);
  }
  at_free_rels(wc, 7);
}

/* Dropout does not combine with tile pruning (the pruned forward has no exact backward anyway). */
Test(attention_cuda, dropout_with_pruning_is_refused) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  tg_tape *t = ts_tape(rt);
  tg_relation *r = NULL;
  cr_assert_eq(tg_relation_causal(rt, 5, 5, &r), TG_OK);
  int64_t sq[4] = {1, 5, 2, 8};
  double z[80] = {0};
  tg_id q = ts_input(t, TG_F32, 4, sq, z, TG_REQUIRES_GRAD);
  tg_attention_options o = ts_attn_opts(0, 0.5, NULL, 0.8);
  tg_tape_set_provider(t, TG_PROVIDER_CUDA_FUSED, NULL);
  cr_expect_eq(tg_attention(t, q, q, q, r, &o), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_UNSUPPORTED, "dropout_keep");
  tg_relation_destroy(r);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* Reads a value or gradient of any float dtype as doubles (new buffer). */
static double *read_dt(tg_tape *t, tg_id id, int grad, size_t n) {
  tg_dtype dt;
  tg_tape_dtype(t, id, &dt);
  size_t es = tg_dtype_size(dt);
  unsigned char *raw = malloc(n * es);
  cr_assert_eq(grad ? tg_tape_read_grad(t, id, raw, n * es) : tg_tape_read(t, id, raw, n * es), TG_OK, "%s",
               tg_tape_error(t));
  double *o = malloc(n * sizeof *o);
  for (size_t i = 0; i < n; i++) {
    uint16_t h;
    memcpy(&h, raw + i * es, es < 2 ? es : 2);
    o[i] = dt == TG_F32 ? ((float *)raw)[i] : dt == TG_F16 ? ts_f16_to_f32(h) : ts_bf16_to_f32(h);
  }
  free(raw);
  return o;
}

typedef struct {
  double *out, *g[3];
  size_t saved;
} cuda_run;

/* out, gradients of loss = sum(out * R) and the attention node's saved bytes, on provider p. */
static void run_cuda(tg_runtime *rt, tg_provider p, at_ctx *x, const at_data *d, tg_dtype dt, cuda_run *r) {
  tg_tape *t = ts_tape(rt);
  tg_tape_set_provider(t, p, NULL);
  tg_id ids[3];
  at_inputs(t, x, d, dt, TG_REQUIRES_GRAD, ids);
  tg_id y = tg_attention(t, ids[0], ids[1], ids[2], at_rel(x, rt), NULL);
  cr_assert_neq(y, TG_NO_ID, "%s: %s", tg_provider_name(p), tg_tape_error(t));
  size_t nodes;
  tg_tape_stats(t, &nodes, &r->saved);
  int64_t so[4] = {x->B, x->Nq, x->Hq, x->Dv};
  float *R = malloc(at_n_out(x) * sizeof *R);
  ts_uniform_f32(R, at_n_out(x), 4242, -1, 1);
  tg_id w = ts_input(t, TG_F32, 4, so, R, 0);
  free(R);
  cr_assert_eq(tg_tape_backward(t, tg_sum(t, tg_mul(t, tg_cast(t, y, TG_F32), w))), TG_OK, "%s", tg_tape_error(t));
  r->out = read_dt(t, y, 0, at_n_out(x));
  size_t n[3] = {(size_t)(x->B * x->Nq * x->Hq * x->D), (size_t)(x->B * x->Nk * x->Hkv * x->D),
                 (size_t)(x->B * x->Nk * x->Hkv * x->Dv)};
  for (int i = 0; i < 3; i++)
    r->g[i] = read_dt(t, ids[i], 1, n[i]);
  tg_tape_destroy(t);
}

static void free_run(cuda_run *r) { free(r->out), free(r->g[0]), free(r->g[1]), free(r->g[2]); }

/* FUSED and COMPOSED read the same rounded inputs and accumulate in f32; they differ by where
 * they round to the storage type (P / dS before the second GEMM in COMPOSED, the output and the
 * gradients in both). Each rounding is at most half an ulp (2^-9 for bf16, 2^-12 for f16) and
 * they do not add up coherently over a row, so each provider is within ~1% (bf16) / ~0.15% (f16)
 * of exact in relative L2 and the two within twice that: 2e-2 and 4e-3. */
Test(attention_cuda, fused_agrees_with_composed_low_precision) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  odd_relations();
  const tg_dtype dts[2] = {TG_BF16, TG_F16};
  const double tols[2] = {2e-2, 4e-3};
  for (size_t c = 0; c < NODD; c++) {
    at_ctx *x = &ODD[c];
    if (x->rel.kind == TG_REL_CSR) continue;
    at_data d;
    at_data_init(&d, x, 700 + c, 1.0);
    for (int i = 0; i < 2; i++) {
      cuda_run f, m;
      run_cuda(rt, TG_PROVIDER_CUDA_FUSED, x, &d, dts[i], &f);
      run_cuda(rt, TG_PROVIDER_CUDA_COMPOSED, x, &d, dts[i], &m);
      double e = ts_rel_l2(f.out, m.out, at_n_out(x));
      cr_expect(e <= tols[i], "%s %s: out rel L2 %.3g > %.3g", x->name, tg_dtype_name(dts[i]), e, tols[i]);
      size_t n[3] = {(size_t)(x->B * x->Nq * x->Hq * x->D), (size_t)(x->B * x->Nk * x->Hkv * x->D),
                     (size_t)(x->B * x->Nk * x->Hkv * x->Dv)};
      for (int g = 0; g < 3; g++) {
        if (x->Nk == 1 && g < 2) {
          /* one key per row: softmax is exactly 1, so dq = dk = 0 analytically and both providers
           * return rounding noise; a relative error of noise is meaningless. Check instead that
           * the noise is small next to dv (which carries the whole gradient). */
          double nf = 0, nm = 0, nv = 0;
          for (size_t k = 0; k < n[g]; k++)
            nf += f.g[g][k] * f.g[g][k], nm += m.g[g][k] * m.g[g][k];
          for (size_t k = 0; k < n[2]; k++)
            nv += m.g[2][k] * m.g[2][k];
          cr_expect(sqrt(nf) <= tols[i] * sqrt(nv) && sqrt(nm) <= tols[i] * sqrt(nv),
                    "%s %s: grad %d should be ~0: |fused| %.3g |composed| %.3g |dv| %.3g", x->name,
                    tg_dtype_name(dts[i]), g, sqrt(nf), sqrt(nm), sqrt(nv));
          continue;
        }
        e = ts_rel_l2(f.g[g], m.g[g], n[g]);
        cr_expect(e <= tols[i], "%s %s: grad %d rel L2 %.3g > %.3g", x->name, tg_dtype_name(dts[i]), g, e, tols[i]);
      }
      /* fused keeps only lse: B*Hq*Nq f32; composed keeps P: B*Hq*Nq*Nk f32 */
      cr_expect_eq(f.saved, (size_t)(x->B * x->Hq * x->Nq) * 4, "%s fused saved %zu", x->name, f.saved);
      cr_expect_eq(m.saved, (size_t)(x->B * x->Hq * x->Nq * x->Nk) * 4, "%s composed saved %zu", x->name, m.saved);
      free_run(&f), free_run(&m);
    }
    at_data_free(&d);
  }
  at_free_rels(ODD, NODD);
  tg_runtime_destroy(rt);
}

Test(attention_cuda, provider_errors_prune_and_explain) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  odd_relations();
  tg_tape *t = ts_tape(rt);
  at_ctx *dense = &ODD[0], *mask = &ODD[3], *csr = &ODD[5];
  at_data d;
  at_data_init(&d, dense, 11, 1.0);
  tg_id ids[3], lse;
  char buf[2048];
  tg_attention_options o = ts_attn_opts(0, 0.5, &lse, 0);
#define FRESH(dt) (tg_tape_reset(t), at_inputs(t, dense, &d, dt, TG_REQUIRES_GRAD, ids))
  FRESH(TG_F64);
  tg_tape_set_provider(t, TG_PROVIDER_CUDA_COMPOSED, NULL);
  cr_expect_eq(tg_attention(t, ids[0], ids[1], ids[2], at_rel(dense, rt), NULL), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "f64 is computed on the HOST provider");
  FRESH(TG_F32);
  cr_expect_eq(tg_attention(t, ids[0], ids[1], ids[2], at_rel(dense, rt), &o), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_UNSUPPORTED, "needs provider CUDA_FUSED; provider cuda_composed");
  FRESH(TG_F32); /* a CSR relation runs the fused graph kernels (numbers: fused_csr_matches_host) */
  tg_tape_set_provider(t, TG_PROVIDER_CUDA_FUSED, NULL);
  cr_expect_neq(tg_attention(t, ids[0], ids[1], ids[2], at_rel(csr, rt), NULL), TG_NO_ID, "%s", tg_tape_error(t));
  tg_tape_explain(t, buf, sizeof buf, NULL);
  cr_expect(strstr(buf, "cuda_fused") && strstr(buf, "rel=csr") && strstr(buf, "lowering=csr-rows"), "%s", buf);
  FRESH(TG_F32);
  cr_expect_eq(tg_attention(t, ids[0], ids[1], ids[2], at_rel(mask, rt), &o), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_UNSUPPORTED, "implemented for dense and causal relations; argument 'rel' is mask");
  FRESH(TG_F32);
  cr_expect_eq(tg_attention(t, ids[0], ids[1], ids[2], at_rel(csr, rt), &o), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_UNSUPPORTED, "block_prune_threshold");
  /* pruned forward runs, explain reports the pruned fraction, backward fails closed */
  FRESH(TG_BF16);
  tg_id y = tg_attention(t, ids[0], ids[1], ids[2], at_rel(dense, rt), &o);
  cr_assert_neq(y, TG_NO_ID, "%s", tg_tape_error(t));
  tg_tape_explain(t, buf, sizeof buf, NULL);
  cr_expect(strstr(buf, "cuda_fused") && strstr(buf, "rel=dense nnz=") &&
                strstr(buf, "lowering=tiles Hq=4 Hkv=2 D=64 Dv=32 pruned "),
            "%s", buf);
  tg_id loss = tg_sum(t, tg_cast(t, y, TG_F32));
  cr_expect_eq(tg_tape_backward(t, loss), TG_ERR_UNSUPPORTED);
  cr_expect(strstr(tg_tape_error(t), "tile-pruned") != NULL, "%s", tg_tape_error(t));
  /* rho tiny: ln(rho) = -69 skips no tile at these score sizes, so the output is the exact one */
  FRESH(TG_F32);
  o.block_prune_threshold = 1e-30;
  double *pruned = read_dt(t, tg_attention(t, ids[0], ids[1], ids[2], at_rel(dense, rt), &o), 0, at_n_out(dense));
  double *exact = read_dt(t, tg_attention(t, ids[0], ids[1], ids[2], at_rel(dense, rt), NULL), 0, at_n_out(dense));
  cr_expect(ts_rel_l2(pruned, exact, at_n_out(dense)) <= 1e-6);
  free(pruned), free(exact);
  /* AUTO on a device takes FUSED for CSR too; q, k, v move to the device (3), and the relation's
   * device CSR is already there from the FUSED call above (no upload) */
  FRESH(TG_F32);
  tg_tape_set_provider(t, TG_PROVIDER_AUTO, NULL);
  cr_expect_neq(tg_attention(t, ids[0], ids[1], ids[2], at_rel(csr, rt), NULL), TG_NO_ID, "%s", tg_tape_error(t));
  tg_tape_explain(t, buf, sizeof buf, NULL);
  cr_expect(strstr(buf, "cuda_fused") && strstr(buf, "lowering=csr-rows") && strstr(buf, "h2d=3"), "%s", buf);
#undef FRESH
  tg_tape_destroy(t);
  at_data_free(&d);
  at_free_rels(ODD, NODD);
  tg_runtime_destroy(rt);
}

/* Memory at N = 16384: the fused node keeps only lse, and neither direction materialises an
 * N x N buffer (which would be 16384^2 * 8 heads * 4 B = 8.6 GB here). The peak device memory of
 * forward + backward (uploads, the f32 cast for the loss and its gradient, the dq workspace and
 * the step arena's geometric growth included) must stay within 8x of q, k, v, out and their
 * gradients (134 MB) — two orders of magnitude below one score matrix. */
Test(attention_cuda, fused_memory_at_16k_is_linear_in_n) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  tg_tape *t = ts_tape(rt);
  const int64_t N = 16384, H = 8, D = 64;
  int64_t sh[4] = {1, N, H, D};
  size_t n = (size_t)(N * H * D);
  double *src = malloc(n * sizeof(double));
  tg_id ids[3];
  for (int i = 0; i < 3; i++) {
    ts_uniform(src, n, 40 + i, -1, 1);
    void *b = ts_convert(src, n, TG_BF16);
    ids[i] = ts_input(t, TG_BF16, 4, sh, b, TG_REQUIRES_GRAD);
    free(b);
  }
  free(src);
  tg_tape_set_provider(t, TG_PROVIDER_CUDA_FUSED, NULL);
  size_t base = 0, peak = 0;
  tg_runtime_reset_peak(rt);
  tg_runtime_memory(rt, &base, NULL);
  tg_relation *rel = NULL;
  cr_assert_eq(tg_relation_causal(rt, N, N, &rel), TG_OK);
  tg_id y = tg_attention(t, ids[0], ids[1], ids[2], rel, NULL);
  tg_id loss = tg_sum(t, tg_cast(t, y, TG_F32));
  cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
  cr_assert_eq(tg_runtime_sync(rt), TG_OK);
  tg_runtime_memory(rt, NULL, &peak);
  size_t io = 8 * n * 2; /* q, k, v, out, and dq, dk, dv, dout in bf16 */
  size_t saved = 0;
  tg_tape_stats(t, NULL, &saved);
  cr_expect(peak - base <= 8 * io,
            "fused fwd+bwd at N=%lld: peak %zu bytes above the baseline, inputs+outputs+grads %zu", (long long)N,
            peak - base, io);
  cr_log_info("fused causal N=16384 H=8 D=64 bf16: peak above baseline %.1f MB (inputs+outputs+grads %.1f MB), "
              "saved for backward %zu bytes",
              (peak - base) / 1e6, io / 1e6, saved);
  tg_tape_destroy(t);
  tg_relation_destroy(rel);
  tg_runtime_destroy(rt);
}

/* The relation owns its device form: built and uploaded on first use, then cached. Over 10 steps
 * on a fixed mask / varlen relation (q, k, v parameters, so they stay on the device), only the
 * first step's attention node may show host->device copies; the relation's device bytes count in
 * tg_runtime_memory and are freed with it. */
Test(attention_cuda, relation_uploads_once) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  enum { N = 70, H = 2, D = 32 };
  uint8_t *m = malloc((size_t)N * N);
  for (int i = 0; i < N * N; i++)
    m[i] = (uint8_t)((i * 7919) % 3 != 0);
  int32_t cu[3] = {0, 30, N};
  tg_relation *rels[2] = {NULL, NULL};
  cr_assert_eq(tg_relation_mask(rt, 0, N, N, m, (size_t)N * N, &rels[0]), TG_OK);
  cr_assert_eq(tg_relation_varlen(rt, 2, cu, sizeof cu, NULL, 0, 1, &rels[1]), TG_OK);
  free(m);
  size_t before = 0;
  tg_runtime_memory(rt, &before, NULL);
  int64_t sh[4] = {1, N, H, D};
  double *x = malloc(sizeof(double) * N * H * D);
  ts_uniform(x, (size_t)N * H * D, 9, -1, 1);
  float *xf = malloc(sizeof(float) * N * H * D);
  for (int i = 0; i < N * H * D; i++)
    xf[i] = (float)x[i];
  tg_provider provs[2] = {TG_PROVIDER_CUDA_FUSED, TG_PROVIDER_CUDA_COMPOSED};
  for (int r = 0; r < 2; r++)
    for (int pv = 0; pv < 2; pv++) {
      tg_tape *t = ts_tape(rt);
      tg_id q = ts_param(t, TG_F32, 4, sh, xf);
      for (int step = 0; step < 10; step++) {
        tg_tape_reset(t);
        tg_tape_set_provider(t, provs[pv], NULL);
        tg_id y = tg_attention(t, q, q, q, rels[r], NULL);
        tg_tape_set_provider(t, TG_PROVIDER_AUTO, NULL);
        cr_assert_eq(tg_tape_backward(t, tg_sum(t, y)), TG_OK, "%s", tg_tape_error(t));
        char buf[4096];
        tg_tape_explain(t, buf, sizeof buf, NULL);
        const char *line = strstr(buf, "attention");
        cr_assert(line != NULL, "%s", buf);
        const char *eol = strchr(line, '\n');
        const char *h2d = strstr(line, "h2d=");
        bool copied = h2d && (!eol || h2d < eol);
        if (step > 0) cr_expect(!copied, "relation %d provider %d step %d copied to the device: %s", r, pv, step, buf);
        cr_expect(strstr(line, "rel_dev=") != NULL && strstr(line, "rel_dev=0B") == NULL, "%s", buf);
      }
      tg_tape_destroy(t);
    }
  size_t with_rel = 0, after = 0;
  tg_runtime_memory(rt, &with_rel, NULL);
  cr_expect(with_rel > before, "the relations' device forms count in tg_runtime_memory");
  tg_relation_destroy(rels[0]);
  tg_relation_destroy(rels[1]);
  tg_runtime_memory(rt, &after, NULL);
  cr_expect(after < with_rel, "destroying the relations frees their device forms (%zu -> %zu)", with_rel, after);
  free(x);
  free(xf);
  tg_runtime_destroy(rt);
}

/* A CSR relation that holds exactly the causal / dense / varlen pattern gives those relations'
 * numbers on CUDA_FUSED (the graph kernels against the tiled ones), forward and gradients. */
Test(attention_cuda, fused_csr_equals_structured_relations) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  const int64_t B = 2, Nq = 37, Nk = 53, Hq = 4, Hkv = 2, D = 32;
  int32_t cu[3] = {0, 11, 37}, cuk[3] = {0, 20, 53};
  tg_relation *rels[3] = {NULL, NULL, NULL};
  cr_assert_eq(tg_relation_causal(rt, Nq, Nk, &rels[0]), TG_OK);
  cr_assert_eq(tg_relation_dense(rt, Nq, Nk, &rels[1]), TG_OK);
  cr_assert_eq(tg_relation_varlen(rt, 2, cu, sizeof cu, cuk, sizeof cuk, 1, &rels[2]), TG_OK);
  size_t nq = (size_t)(B * Nq * Hq * D), nk = (size_t)(B * Nk * Hkv * D);
  float *q = malloc(nq * sizeof *q), *k = malloc(nk * sizeof *k), *v = malloc(nk * sizeof *v);
  ts_uniform_f32(q, nq, 1, -1, 1);
  ts_uniform_f32(k, nk, 2, -1, 1);
  ts_uniform_f32(v, nk, 3, -1, 1);
  for (int r = 0; r < 3; r++) {
    int64_t b = r == 2 ? 1 : B, rp[38];
    int32_t *ci = malloc((size_t)(Nq * Nk) * sizeof *ci);
    cr_assert_eq(tg_relation_read_csr(rels[r], 0, rp, sizeof rp, NULL, 0), TG_OK);
    cr_assert_eq(tg_relation_read_csr(rels[r], 0, rp, sizeof rp, ci, (size_t)rp[Nq] * sizeof *ci), TG_OK);
    tg_relation *csr = NULL;
    cr_assert_eq(tg_relation_csr(rt, Nq, Nk, rp, sizeof rp, ci, (size_t)rp[Nq] * sizeof *ci, &csr), TG_OK);
    double *out[2], *gq[2], *gk[2];
    for (int w = 0; w < 2; w++) {
      tg_tape *t = ts_tape(rt);
      int64_t sq[4] = {b, Nq, Hq, D}, sk[4] = {b, Nk, Hkv, D};
      tg_id iq = ts_input(t, TG_F32, 4, sq, q, TG_REQUIRES_GRAD), ik = ts_input(t, TG_F32, 4, sk, k, TG_REQUIRES_GRAD),
            iv = ts_input(t, TG_F32, 4, sk, v, TG_REQUIRES_GRAD);
      tg_tape_set_provider(t, TG_PROVIDER_CUDA_FUSED, NULL);
      tg_id y = tg_attention(t, iq, ik, iv, w ? csr : rels[r], NULL);
      tg_tape_set_provider(t, TG_PROVIDER_AUTO, NULL);
      cr_assert_neq(y, TG_NO_ID, "%s", tg_tape_error(t));
      tg_id loss = tg_sum(t, tg_mul(t, y, y));
      cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
      size_t no = (size_t)(b * Nq * Hq * D), nkk = (size_t)(b * Nk * Hkv * D), nqq = no;
      out[w] = malloc(no * sizeof(double)), gq[w] = malloc(nqq * sizeof(double)), gk[w] = malloc(nkk * sizeof(double));
      ts_read(t, y, out[w], (int64_t)no);
      ts_read_grad(t, iq, gq[w], (int64_t)nqq);
      ts_read_grad(t, ik, gk[w], (int64_t)nkk);
      tg_tape_destroy(t);
    }
    size_t no = (size_t)(b * Nq * Hq * D), nkk = (size_t)(b * Nk * Hkv * D);
    cr_expect(ts_rel_l2(out[1], out[0], no) <= 1e-5, "relation %d: outputs differ", r);
    cr_expect(ts_rel_l2(gq[1], gq[0], no) <= 1e-5, "relation %d: dq differs", r);
    cr_expect(ts_rel_l2(gk[1], gk[0], nkk) <= 1e-5, "relation %d: dk differs", r);
    for (int w = 0; w < 2; w++)
      free(out[w]), free(gq[w]), free(gk[w]);
    free(ci);
    tg_relation_destroy(csr);
  }
  for (int r = 0; r < 3; r++)
    tg_relation_destroy(rels[r]);
  free(q), free(k), free(v);
  tg_runtime_destroy(rt);
}

/* ------------------------------------------------------------ CSR schedules (relation.h: dev.order)
 * Graphs large enough that the fused CSR kernels run in a locality schedule (>= 4096 rows, the
 * gathered rows >= 16 MiB): a ring lattice (each row's sources within 4 places of it on a hidden
 * ring, in a scrambled numbering; every 97th row empty), square and bipartite. The scheduled path
 * must give the host f64 numbers, and the relation must hold its schedule afterwards. */
#define SCHED_NK 8192
static int64_t SCHED_RP[2][SCHED_NK + 1];
static int32_t SCHED_CI[2][SCHED_NK * 9];

/* place(i) = i * 7919 mod n is a bijection of [0, n) for n = 2^13; the rows of the bipartite graph
 * sit at every (nk / nq)-th place. */
static void sched_graph(int g, int64_t nq, int64_t nk) {
  int32_t *at = malloc((size_t)nk * sizeof *at);
  for (int64_t j = 0; j < nk; j++)
    at[(j * 7919) % nk] = (int32_t)j;
  int64_t nnz = 0;
  for (int64_t i = 0; i < nq; i++) {
    SCHED_RP[g][i] = nnz;
    int64_t c = (nq == nk ? (i * 7919) % nk : (i * nk) / nq);
    if (i % 97 == 5) continue;
    int32_t row[9];
    for (int d = -4; d <= 4; d++)
      row[d + 4] = at[(c + d + nk) % nk];
    for (int a = 1; a < 9; a++) /* insertion sort: columns ascending */
      for (int b = a; b > 0 && row[b] < row[b - 1]; b--) {
        int32_t x = row[b];
        row[b] = row[b - 1], row[b - 1] = x;
      }
    for (int a = 0; a < 9; a++)
      SCHED_CI[g][nnz++] = row[a];
  }
  SCHED_RP[g][nq] = nnz;
  free(at);
}

static at_ctx SCHED[] = {
    {"csr scheduled square",
     {.kind = TG_REL_CSR, .nq = SCHED_NK, .nk = SCHED_NK, .row_ptr = SCHED_RP[0], .col_idx = SCHED_CI[0]},
     DIMS(1, SCHED_NK, SCHED_NK, 8, 4, 64, 64)},
    {"csr scheduled bipartite",
     {.kind = TG_REL_CSR, .nq = 5000, .nk = SCHED_NK, .row_ptr = SCHED_RP[1], .col_idx = SCHED_CI[1]},
     DIMS(1, 5000, SCHED_NK, 8, 8, 64, 64)},
};

Test(attention_cuda, fused_csr_schedule_matches_host) {
  tg_runtime_destroy(ts_cuda_runtime_or_skip());
  sched_graph(0, SCHED_NK, SCHED_NK);
  sched_graph(1, 5000, SCHED_NK);
  const tg_dtype dts[2] = {TG_F32, TG_BF16};
  const double tols[2] = {1e-4, 3e-2};
  for (size_t c = 0; c < 2; c++) {
    at_ctx *x = &SCHED[c];
    at_data d;
    at_data_init(&d, x, 700 + c, 1.0);
    tg_gradcheck_input in[4];
    at_gc_inputs(x, &d, in);
    for (int i = 0; i < 2; i++) {
      cr_log_info("%s %s", x->name, tg_dtype_name(dts[i]));
      ts_check_cuda_vs_host(at_fn, x, 3, in, dts[i], TG_PROVIDER_CUDA_FUSED, tols[i]);
    }
    int scheduled = 0;
    for (int r = 0; r < x->nrel; r++)
      scheduled += x->rels[r]->rt->dev && x->rels[r]->dev.order_tried && x->rels[r]->dev.order;
    cr_expect(scheduled > 0, "%s: the CUDA relation holds no schedule", x->name);
    at_data_free(&d);
  }
  at_free_rels(SCHED, 2);
}

/* A square radius graph built on the GPU keeps the builder's Morton order as its schedule; the
 * same graph as a plain CSR relation gets its graph order on first use. Both are permutations of
 * the rows, so the fused kernels give the same bits under either, forward and gradients. */
Test(attention_cuda, radius_morton_schedule_equals_graph_schedule) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  const int64_t n = 6000, H = 8, D = 64;
  float *p = malloc((size_t)n * 3 * sizeof *p);
  ts_uniform_f32(p, (size_t)n * 3, 11, 0, 1);
  tg_relation *rels[2] = {NULL, NULL};
  cr_assert_eq(tg_relation_radius(rt, 3, TG_F32, n, p, (size_t)n * 12, 0, NULL, 0, 0.08, NULL, &rels[0]), TG_OK, "%s",
               tg_last_error());
  cr_assert(rels[0]->dev.order_tried && rels[0]->dev.order, "the radius relation kept no schedule");
  int64_t *rp = malloc((size_t)(n + 1) * sizeof *rp);
  cr_assert_eq(tg_relation_read_csr(rels[0], 0, rp, (size_t)(n + 1) * sizeof *rp, NULL, 0), TG_OK);
  int32_t *ci = malloc((size_t)rp[n] * sizeof *ci);
  cr_assert_eq(tg_relation_read_csr(rels[0], 0, rp, (size_t)(n + 1) * sizeof *rp, ci, (size_t)rp[n] * sizeof *ci),
               TG_OK);
  cr_assert_eq(tg_relation_csr(rt, n, n, rp, (size_t)(n + 1) * sizeof *rp, ci, (size_t)rp[n] * sizeof *ci, &rels[1]),
               TG_OK);
  const size_t ne = (size_t)(n * H * D);
  float *x = malloc(3 * ne * sizeof *x);
  ts_uniform_f32(x, 3 * ne, 12, -1, 1);
  double *res[2];
  for (int w = 0; w < 2; w++) {
    tg_tape *t = ts_tape(rt);
    int64_t sh[4] = {1, n, H, D};
    tg_id q = ts_input(t, TG_F32, 4, sh, x, TG_REQUIRES_GRAD), k = ts_input(t, TG_F32, 4, sh, x + ne, TG_REQUIRES_GRAD),
          v = ts_input(t, TG_F32, 4, sh, x + 2 * ne, TG_REQUIRES_GRAD);
    tg_tape_set_provider(t, TG_PROVIDER_CUDA_FUSED, NULL);
    tg_id y = tg_attention(t, q, k, v, rels[w], NULL);
    tg_tape_set_provider(t, TG_PROVIDER_AUTO, NULL);
    cr_assert_neq(y, TG_NO_ID, "%s", tg_tape_error(t));
    cr_assert_eq(tg_tape_backward(t, tg_sum(t, tg_mul(t, y, y))), TG_OK, "%s", tg_tape_error(t));
    res[w] = malloc(4 * ne * sizeof(double));
    ts_read(t, y, res[w], (int64_t)ne);
    ts_read_grad(t, q, res[w] + ne, (int64_t)ne);
    ts_read_grad(t, k, res[w] + 2 * ne, (int64_t)ne);
    ts_read_grad(t, v, res[w] + 3 * ne, (int64_t)ne);
    tg_tape_destroy(t);
  }
  cr_expect(rels[1]->dev.order_tried && rels[1]->dev.order, "the CSR relation built no schedule");
  cr_expect(memcmp(res[0], res[1], 4 * ne * sizeof(double)) == 0, "Morton and graph schedules give different bits");
  free(res[0]), free(res[1]), free(x), free(ci), free(rp), free(p);
  tg_relation_destroy(rels[0]);
  tg_relation_destroy(rels[1]);
  tg_runtime_destroy(rt);
}
