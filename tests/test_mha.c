/* tg_mha: forward against projections + masked softmax written here in double, gradcheck of x
 * and the four weights in f64, the recorded structure (explain), provider handling, errors, and
 * CUDA against HOST. */
#include <math.h>
#include <stdlib.h>

#include "support.h"

typedef struct {
  int64_t B, n, dm, Hq, Hkv, D, Dv;
  const uint8_t *mask; /* [n, n] or NULL */
  int causal;
  tg_mha_options o;
} mha_case;

/* Y = x W, x [rows, in], W [in, out] */
static void mm(const double *x, const double *w, double *y, int64_t rows, int64_t in, int64_t out) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < out; c++) {
      double s = 0;
      for (int64_t i = 0; i < in; i++)
        s += x[r * in + i] * w[i * out + c];
      y[r * out + c] = s;
    }
}

/* The reference: projections, per (b, h) softmax over the allowed keys, heads concatenated, Wo. */
static void naive_mha(const mha_case *c, const double *x, const double *wq, const double *wk, const double *wv,
                      const double *wo, double *y) {
  int64_t rows = c->B * c->n, G = c->Hq / c->Hkv;
  double *Q = malloc((size_t)(rows * c->Hq * c->D) * sizeof(double)), *K = malloc((size_t)(rows * c->Hkv * c->D) * 8);
  double *V = malloc((size_t)(rows * c->Hkv * c->Dv) * 8), *O = calloc((size_t)(rows * c->Hq * c->Dv), 8);
  double *s = malloc((size_t)c->n * 8);
  mm(x, wq, Q, rows, c->dm, c->Hq * c->D);
  mm(x, wk, K, rows, c->dm, c->Hkv * c->D);
  mm(x, wv, V, rows, c->dm, c->Hkv * c->Dv);
  double scale = c->o.scale != TG_SCALE_AUTO ? c->o.scale : 1 / sqrt((double)c->D);
  for (int64_t b = 0; b < c->B; b++)
    for (int64_t h = 0; h < c->Hq; h++)
      for (int64_t i = 0; i < c->n; i++) {
        double m = -INFINITY, z = 0;
        for (int64_t j = 0; j < c->n; j++) {
          int ok = c->mask ? c->mask[i * c->n + j] != 0 : !c->causal || j <= i;
          s[j] = -INFINITY;
          if (!ok) continue;
          double d = 0;
          for (int64_t e = 0; e < c->D; e++)
            d += Q[(b * c->n + i) * c->Hq * c->D + h * c->D + e] *
                 K[(b * c->n + j) * c->Hkv * c->D + (h / G) * c->D + e];
          s[j] = scale * d;
          m = fmax(m, s[j]);
        }
        for (int64_t j = 0; j < c->n; j++)
          z += s[j] == -INFINITY ? 0 : exp(s[j] - m);
        for (int64_t j = 0; j < c->n && z > 0; j++) {
          double p = s[j] == -INFINITY ? 0 : exp(s[j] - m) / z;
          for (int64_t e = 0; e < c->Dv; e++)
            O[(b * c->n + i) * c->Hq * c->Dv + h * c->Dv + e] +=
                p * V[(b * c->n + j) * c->Hkv * c->Dv + (h / G) * c->Dv + e];
        }
      }
  mm(O, wo, y, rows, c->Hq * c->Dv, c->dm);
  free(Q), free(K), free(V), free(O), free(s);
}

typedef struct {
  double *x, *w[4], *r;
  int64_t sx[3], sw[4][2];
} mha_data;

static void data_init(mha_data *d, const mha_case *c, uint64_t seed) {
  int64_t cols[4] = {c->Hq * c->D, c->Hkv * c->D, c->Hkv * c->Dv, c->dm};
  int64_t nx = c->B * c->n * c->dm;
  d->x = malloc((size_t)nx * 8), d->r = malloc((size_t)nx * 8);
  ts_uniform(d->x, (size_t)nx, seed, -1, 1);
  ts_uniform(d->r, (size_t)nx, seed + 9, -1, 1);
  d->sx[0] = c->B, d->sx[1] = c->n, d->sx[2] = c->dm;
  for (int i = 0; i < 4; i++) {
    d->sw[i][0] = i == 3 ? c->Hq * c->Dv : c->dm;
    d->sw[i][1] = cols[i];
    d->w[i] = malloc((size_t)(d->sw[i][0] * d->sw[i][1]) * 8);
    ts_uniform(d->w[i], (size_t)(d->sw[i][0] * d->sw[i][1]), seed + 1 + i, -0.6, 0.6);
  }
}
static void data_free(mha_data *d) {
  free(d->x), free(d->r), free(d->w[0]), free(d->w[1]), free(d->w[2]), free(d->w[3]);
}

static void gc_inputs(const mha_data *d, tg_gradcheck_input *in, int with_r) {
  in[0] = ts_gc_input(TG_F64, 3, d->sx, d->x);
  for (int i = 0; i < 4; i++)
    in[1 + i] = ts_gc_input(TG_F64, 2, d->sw[i], d->w[i]);
  if (with_r) {
    in[5] = ts_gc_input(TG_F64, 3, d->sx, d->r);
    in[5].differentiable = 0;
  }
}

static tg_id mha_fn(tg_tape *t, const tg_id *in, void *user) {
  const mha_case *c = user;
  return tg_mha(t, in[0], in[1], in[2], in[3], in[4], &c->o);
}
static tg_id mha_loss(tg_tape *t, const tg_id *in, void *user) {
  return tg_sum(t, tg_mul(t, mha_fn(t, in, user), in[5]));
}

#define SMALL(causal_, mask_)                                                                                          \
  { 2, 5, 8, 2, 1, 4, 3, mask_, causal_, ts_mha_opts(2, 1, causal_) }

static void expect_forward(mha_case *c, tg_dtype dt) {
  mha_data d;
  data_init(&d, c, 31);
  double want[2 * 5 * 8], got[2 * 5 * 8];
  naive_mha(c, d.x, d.w[0], d.w[1], d.w[2], d.w[3], want);
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  tg_id ids[5];
  void *cx = ts_convert(d.x, 80, dt);
  ids[0] = ts_input(t, dt, 3, d.sx, cx, 0);
  free(cx);
  for (int i = 0; i < 4; i++) {
    void *cw = ts_convert(d.w[i], (size_t)(d.sw[i][0] * d.sw[i][1]), dt);
    ids[1 + i] = ts_param(t, dt, 2, d.sw[i], cw);
    free(cw);
  }
  ts_read(t, mha_fn(t, ids, c), got, 80);
  double tol = dt == TG_F64 ? 1e-12 : 1e-5;
  TS_EXPECT_CLOSE(got, want, 80, tol, tol);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
  data_free(&d);
}

Test(mha, forward_matches_reference) {
  mha_case causal = SMALL(1, NULL), dense = SMALL(0, NULL);
  expect_forward(&causal, TG_F64);
  expect_forward(&causal, TG_F32);
  expect_forward(&dense, TG_F64);
  /* an explicit mask relation (with a fully blocked row) overrides the causal flag */
  uint8_t m[25] = {1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 1, 0, 1, 0, 1, 1, 0, 0, 1};
  mha_case masked = SMALL(1, m);
  masked.o.scale = 0.3;
  mha_data d;
  data_init(&d, &masked, 31);
  double want[80], got[80];
  naive_mha(&masked, d.x, d.w[0], d.w[1], d.w[2], d.w[3], want);
  tg_runtime *rt = ts_host_runtime();
  tg_relation *rel = NULL;
  cr_assert_eq(tg_relation_mask(rt, 0, 5, 5, m, (size_t)(5 * 5), &rel), TG_OK);
  tg_tape *t = ts_tape(rt);
  tg_id ids[5] = {ts_input(t, TG_F64, 3, d.sx, d.x, 0)};
  for (int i = 0; i < 4; i++)
    ids[1 + i] = ts_param(t, TG_F64, 2, d.sw[i], d.w[i]);
  masked.o.rel = rel;
  ts_read(t, mha_fn(t, ids, &masked), got, 80);
  TS_EXPECT_CLOSE(got, want, 80, 1e-12, 1e-12);
  tg_tape_destroy(t);
  tg_relation_destroy(rel);
  tg_runtime_destroy(rt);
  data_free(&d);
}

Test(mha, gradcheck_x_and_weights) {
  mha_case c = SMALL(1, NULL);
  mha_data d;
  data_init(&d, &c, 41);
  tg_gradcheck_input in[6];
  gc_inputs(&d, in, 1);
  ts_gradcheck(mha_loss, &c, 6, in);
  mha_case g = {2, 5, 8, 4, 2, 2, 3, NULL, 0, ts_mha_opts(4, 2, 0)}; /* GQA, dense */
  mha_data e;
  data_init(&e, &g, 43);
  gc_inputs(&e, in, 1);
  ts_gradcheck(mha_loss, &g, 6, in);
  data_free(&d), data_free(&e);
}

Test(mha, structure_and_provider_restored) {
  mha_case c = SMALL(1, NULL);
  mha_data d;
  data_init(&d, &c, 51);
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  tg_id ids[5] = {ts_input(t, TG_F64, 3, d.sx, d.x, 0)};
  for (int i = 0; i < 4; i++)
    ids[1 + i] = ts_param(t, TG_F64, 2, d.sw[i], d.w[i]);
  tg_tape_set_provider(t, TG_PROVIDER_HOST, NULL);
  c.o.attention_provider = TG_PROVIDER_HOST;
  tg_id y = mha_fn(t, ids, &c);
  cr_assert_neq(y, TG_NO_ID, "%s", tg_tape_error(t));
  tg_provider now;
  tg_tape_set_provider(t, TG_PROVIDER_AUTO, &now);
  cr_expect_eq(now, TG_PROVIDER_HOST, "the tape's provider is restored");
  int nd;
  int64_t sh[TG_MAX_DIMS];
  tg_tape_shape(t, y, &nd, sh, TG_MAX_DIMS);
  cr_expect(nd == 3 && sh[0] == 2 && sh[1] == 5 && sh[2] == 8);
  char buf[4096];
  tg_tape_explain(t, buf, sizeof buf, NULL);
  cr_expect(strstr(buf, "rel=causal nnz=15 rel_dev=0B lowering=host-rows Hq=2 Hkv=1 D=4 Dv=3") != NULL, "%s", buf);
  int linears = 0;
  for (const char *p = buf; (p = strstr(p, "linear")); p++)
    linears++;
  cr_expect_eq(linears, 4, "four projections recorded:\n%s", buf);
  cr_expect_eq(tg_tape_backward(t, tg_sum(t, y)), TG_OK, "%s", tg_tape_error(t));
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
  data_free(&d);
}

Test(mha, errors) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double z[256] = {0};
  int64_t sx[3] = {2, 5, 8}, s2[2] = {10, 8}, sq[2] = {8, 8}, sk[2] = {8, 4}, sv[2] = {8, 3}, so[2] = {6, 8};
  int64_t bad_q[2] = {8, 7}, bad_k[2] = {8, 5}, bad_o[2] = {8, 8};
  tg_mha_options o = ts_mha_opts(2, 1, 1);
  tg_id x, wq, wk, wv, wo;
#define FRESH()                                                                                                        \
  (tg_tape_reset(t), x = ts_input(t, TG_F64, 3, sx, z, 0), wq = ts_input(t, TG_F64, 2, sq, z, 0),                      \
   wk = ts_input(t, TG_F64, 2, sk, z, 0), wv = ts_input(t, TG_F64, 2, sv, z, 0),                                       \
   wo = ts_input(t, TG_F64, 2, so, z, 0))
  FRESH();
  cr_expect_neq(tg_mha(t, x, wq, wk, wv, wo, &o), TG_NO_ID, "%s", tg_tape_error(t));
  FRESH();
  cr_expect_eq(tg_mha(t, x, wq, wk, wv, wo, NULL), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "tg_mha: argument 'opts' is NULL");
  FRESH();
  tg_mha_options o0 = ts_mha_opts(0, 0, 0);
  cr_expect_eq(tg_mha(t, x, wq, wk, wv, wo, &o0), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "heads_q = 0");
  FRESH();
  tg_mha_options o3 = ts_mha_opts(2, 3, 0);
  cr_expect_eq(tg_mha(t, x, wq, wk, wv, wo, &o3), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "heads_q = 2 is not a multiple of heads_kv = 3");
  FRESH();
  cr_expect_eq(tg_mha(t, ts_input(t, TG_F64, 2, s2, z, 0), wq, wk, wv, wo, &o), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "argument 'x' has shape [10, 8]; expected [B, n, dModel]");
  FRESH();
  cr_expect_eq(tg_mha(t, x, ts_input(t, TG_F64, 2, bad_q, z, 0), wk, wv, wo, &o), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "argument 'wq' has shape [8, 7]; expected [dModel=8, Hq*D] with Hq=2");
  FRESH();
  cr_expect_eq(tg_mha(t, x, wq, ts_input(t, TG_F64, 2, bad_k, z, 0), wv, wo, &o), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "argument 'wk' has shape [8, 5]; expected [dModel=8, Hkv*D=4]");
  FRESH();
  cr_expect_eq(tg_mha(t, x, wq, wk, wv, ts_input(t, TG_F64, 2, bad_o, z, 0), &o), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "argument 'wo' has shape [8, 8]; expected [Hq*Dv=6, dModel=8]");
  FRESH();
  cr_expect_eq(tg_mha(t, x, wq, wk, TG_NO_ID, wo, &o), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "argument 'wv' is TG_NO_ID");
  FRESH();
  tg_relation *r4 = NULL;
  tg_relation_dense(rt, 4, 4, &r4);
  tg_mha_options orel = ts_mha_opts(2, 1, 0);
  orel.rel = r4;
  cr_expect_eq(tg_mha(t, x, wq, wk, wv, wo, &orel), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE,
                   "tg_attention: argument 'rel' is a dense relation over nq = 4, nk = 4; expected nq = Nq = 5");
  FRESH();
  tg_mha_options ofused = ts_mha_opts(2, 2, 0);
  ofused.attention_provider = TG_PROVIDER_CUDA_FUSED;
  int64_t sk2[2] = {8, 8}, sv2[2] = {8, 6};
  cr_expect_eq(tg_mha(t, x, wq, ts_input(t, TG_F64, 2, sk2, z, 0), ts_input(t, TG_F64, 2, sv2, z, 0), wo, &ofused),
               TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_NO_DEVICE, "host-only");
  tg_provider now;
  tg_tape_set_provider(t, TG_PROVIDER_AUTO, &now);
  cr_expect_eq(now, TG_PROVIDER_AUTO, "provider restored after a failure");
#undef FRESH
  tg_relation_destroy(r4);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(mha_cuda, matches_host) {
  tg_runtime_destroy(ts_cuda_runtime_or_skip());
  mha_case c = {2, 37, 96, 4, 2, 64, 32, NULL, 1, ts_mha_opts(4, 2, 1)};
  mha_data d;
  data_init(&d, &c, 61);
  tg_gradcheck_input in[5];
  gc_inputs(&d, in, 0);
  const tg_provider provs[2] = {TG_PROVIDER_CUDA_COMPOSED, TG_PROVIDER_CUDA_FUSED};
  for (int p = 0; p < 2; p++) {
    ts_check_cuda_vs_host(mha_fn, &c, 5, in, TG_F32, provs[p], 1e-4);
    ts_check_cuda_vs_host(mha_fn, &c, 5, in, TG_BF16, provs[p], 3e-2);
  }
  data_free(&d);
}
