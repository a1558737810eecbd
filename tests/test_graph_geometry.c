/* tg_graph_displacement: values against loops written here, gradcheck for both position inputs
 * (bipartite, and a square graph given one value twice), CUDA vs host, errors. */
#include "support.h"

/* A 5 x 4 bipartite CSR with an empty first and middle row, and a 4 x 4 square one with self loops. */
static const int64_t RP_B[6] = {0, 0, 3, 3, 5, 6};
static const int32_t CI_B[6] = {0, 2, 3, 1, 3, 2};
static const int64_t RP_S[5] = {0, 2, 3, 6, 7};
static const int32_t CI_S[7] = {0, 3, 2, 0, 1, 2, 3};

static tg_relation *rel_of(tg_runtime *rt, int square) {
  tg_relation *r = NULL;
  if (square)
    cr_assert_eq(tg_relation_csr(rt, 4, 4, RP_S, sizeof RP_S, CI_S, sizeof CI_S, &r), TG_OK);
  else
    cr_assert_eq(tg_relation_csr(rt, 5, 4, RP_B, sizeof RP_B, CI_B, sizeof CI_B, &r), TG_OK);
  return r;
}

typedef struct {
  int square;
} gg_ctx;

static tg_relation *g_rel[2]; /* per runtime of the current gradcheck: rebuilt on demand */
static tg_runtime *g_rt[2];

static tg_relation *rel_for(tg_tape *t, int square) {
  tg_runtime *rt = tg_tape_runtime(t);
  if (g_rt[square] != rt) {
    tg_relation_destroy(g_rel[square]);
    g_rel[square] = rel_of(rt, square);
    g_rt[square] = rt;
  }
  return g_rel[square];
}

static tg_id disp_loss(tg_tape *t, const tg_id *in, void *user) {
  const gg_ctx *c = user;
  tg_id y = c->square ? tg_graph_displacement(t, rel_for(t, 1), in[0], in[0])
                      : tg_graph_displacement(t, rel_for(t, 0), in[0], in[1]);
  return tg_sum(t, tg_mul(t, y, in[c->square ? 1 : 2]));
}
static tg_id disp_fn(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_graph_displacement(t, rel_for(t, 0), in[0], in[1]);
}

static void drop_rels(void) {
  for (int k = 0; k < 2; k++) {
    tg_relation_destroy(g_rel[k]);
    g_rel[k] = NULL;
    g_rt[k] = NULL;
  }
}

Test(graph_geometry, displacement_values_and_gradcheck) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double ps[4 * 3], pd[5 * 3], y[6 * 3];
  ts_uniform(ps, 12, 1, -1, 1);
  ts_uniform(pd, 15, 2, -1, 1);
  int64_t ss[2] = {4, 3}, sd[2] = {5, 3};
  tg_relation *r = rel_of(rt, 0);
  tg_id yi = tg_graph_displacement(t, r, ts_input(t, TG_F64, 2, ss, ps, 0), ts_input(t, TG_F64, 2, sd, pd, 0));
  cr_assert_eq(ts_read(t, yi, y, 18), 18, "%s", tg_tape_error(t));
  for (int i = 0; i < 5; i++)
    for (int64_t e = RP_B[i]; e < RP_B[i + 1]; e++)
      for (int d = 0; d < 3; d++)
        cr_expect_eq(y[e * 3 + d], ps[CI_B[e] * 3 + d] - pd[i * 3 + d], "edge %lld dim %d", (long long)e, d);
  char buf[1024];
  tg_tape_explain(t, buf, sizeof buf, NULL);
  cr_expect(strstr(buf, "displacement") && strstr(buf, "rel=csr nnz=6") && strstr(buf, "dim=3"), "%s", buf);
  tg_relation_destroy(r);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);

  double w[18], w7[21];
  ts_uniform(w, 18, 3, -1, 1);
  ts_uniform(w7, 21, 4, -1, 1);
  int64_t sw[2] = {6, 3}, sw7[2] = {7, 3}, s4[2] = {4, 3};
  gg_ctx bip = {0}, sq = {1};
  tg_gradcheck_input in3[3] = {ts_gc_input(TG_F64, 2, ss, ps), ts_gc_input(TG_F64, 2, sd, pd),
                               ts_gc_input(TG_F64, 2, sw, w)};
  in3[2].differentiable = 0;
  ts_gradcheck(disp_loss, &bip, 3, in3);
  tg_gradcheck_input in2[2] = {ts_gc_input(TG_F64, 2, s4, ps), ts_gc_input(TG_F64, 2, sw7, w7)};
  in2[1].differentiable = 0;
  ts_gradcheck(disp_loss, &sq, 2, in2); /* one value as both ends: the two terms add up */
  drop_rels();
}

Test(graph_geometry, displacement_errors) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  tg_relation *r = rel_of(rt, 0);
  double z[30] = {0};
  int64_t s43[2] = {4, 3}, s53[2] = {5, 3}, s52[2] = {5, 2}, s44[2] = {4, 4};
  tg_id ps = ts_input(t, TG_F64, 2, s43, z, 0), pd = ts_input(t, TG_F64, 2, s53, z, 0);
  cr_expect_eq(tg_graph_displacement(t, NULL, ps, pd), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "argument 'rel' is NULL");
  tg_tape_reset(t);
  ps = ts_input(t, TG_F64, 2, s43, z, 0), pd = ts_input(t, TG_F64, 2, s52, z, 0);
  cr_expect_eq(tg_graph_displacement(t, r, ps, pd), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "argument 'pos_dst' has shape [5, 2]; expected [Nq = 5, dim = 3]");
  tg_tape_reset(t);
  ps = ts_input(t, TG_F64, 2, s44, z, 0), pd = ts_input(t, TG_F64, 2, s53, z, 0);
  cr_expect_eq(tg_graph_displacement(t, r, ps, pd), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "argument 'pos_src' has shape [4, 4]; expected [Nk = 4, dim] with dim 1..3");
  tg_tape_reset(t);
  float f[15] = {0};
  ps = ts_input(t, TG_F64, 2, s43, z, 0), pd = ts_input(t, TG_F32, 2, s53, f, 0);
  cr_expect_eq(tg_graph_displacement(t, r, ps, pd), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "must have the same dtype");
  tg_relation_destroy(r);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(graph_geometry_cuda, displacement_matches_host) {
  tg_runtime_destroy(ts_cuda_runtime_or_skip());
  double ps[12], pd[15];
  ts_uniform(ps, 12, 5, -1, 1);
  ts_uniform(pd, 15, 6, -1, 1);
  int64_t ss[2] = {4, 3}, sd[2] = {5, 3};
  tg_gradcheck_input in[2] = {ts_gc_input(TG_F64, 2, ss, ps), ts_gc_input(TG_F64, 2, sd, pd)};
  ts_check_cuda_vs_host(disp_fn, NULL, 2, in, TG_F32, TG_PROVIDER_CUDA, 1e-6);
  drop_rels();
}
