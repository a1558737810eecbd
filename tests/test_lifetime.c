/* Lifetimes an FFI host cannot get wrong (tiga.h): handles are reference counted, so a relation
 * destroyed before backward, or a runtime destroyed before its tapes, keeps working until its last
 * user is gone. Every destruction order runs here; under ASan (tools/test.sh) a use after free or a
 * leak fails the run. Also the API rules: TG_ABSENT vs TG_NO_ID, byte counts, options struct_size,
 * reading any relation back as CSR. */
#include "support.h"

#include <math.h>

/* A small attention problem over a CSR relation: loss = sum(attention(q, k, v) * w). */
typedef struct {
  double q[2 * 3 * 2], k[2 * 4 * 2], v[2 * 4 * 3], w[2 * 3 * 3];
} att_data;

static void att_data_init(att_data *d) {
  ts_uniform(d->q, 12, 1, -1, 1);
  ts_uniform(d->k, 16, 2, -1, 1);
  ts_uniform(d->v, 24, 3, -1, 1);
  ts_uniform(d->w, 18, 4, -1, 1);
}

static tg_relation *csr_relation(tg_runtime *rt) {
  int64_t rp[4] = {0, 2, 2, 5};
  int32_t ci[5] = {0, 3, 1, 2, 3};
  tg_relation *r = NULL;
  cr_assert_eq(tg_relation_csr(rt, 3, 4, rp, sizeof rp, ci, sizeof ci, &r), TG_OK, "%s", tg_last_error());
  return r;
}

/* Records the loss on t; returns the ids of q and the loss. */
static tg_id att_loss(tg_tape *t, const tg_relation *r, const att_data *d, tg_id *q_out) {
  int64_t sq[4] = {2, 3, 1, 2}, sk[4] = {2, 4, 1, 2}, sv[4] = {2, 4, 1, 3}, sw[4] = {2, 3, 1, 3};
  tg_id q = ts_input(t, TG_F64, 4, sq, d->q, TG_REQUIRES_GRAD);
  tg_id k = ts_input(t, TG_F64, 4, sk, d->k, TG_REQUIRES_GRAD);
  tg_id v = ts_input(t, TG_F64, 4, sv, d->v, TG_REQUIRES_GRAD);
  tg_id w = ts_input(t, TG_F64, 4, sw, d->w, 0);
  *q_out = q;
  return tg_sum(t, tg_mul(t, tg_attention(t, q, k, v, r, NULL), w));
}

/* dL/dq with every handle alive: the reference. */
static void reference_grad(double *g) {
  att_data d;
  att_data_init(&d);
  tg_runtime *rt = ts_host_runtime();
  tg_relation *r = csr_relation(rt);
  tg_tape *t = ts_tape(rt);
  tg_id q, loss = att_loss(t, r, &d, &q);
  cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
  ts_read_grad(t, q, g, 12);
  tg_tape_destroy(t);
  tg_relation_destroy(r);
  tg_runtime_destroy(rt);
}

Test(lifetime, relation_destroyed_before_backward) {
  double want[12], got[12];
  reference_grad(want);
  att_data d;
  att_data_init(&d);
  tg_runtime *rt = ts_host_runtime();
  tg_relation *r = csr_relation(rt);
  tg_tape *t = ts_tape(rt);
  tg_id q, loss = att_loss(t, r, &d, &q);
  tg_relation_destroy(r); /* the attention node still holds it */
  cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
  ts_read_grad(t, q, got, 12);
  for (int i = 0; i < 12; i++)
    cr_expect_eq(got[i], want[i], "element %d: %.17g vs %.17g", i, got[i], want[i]);
  char buf[2048];
  cr_expect_eq(tg_tape_explain(t, buf, sizeof buf, NULL), TG_OK);
  cr_expect(strstr(buf, "rel=csr nnz=5") != NULL, "%s", buf);
  tg_tape_reset(t); /* drops the node and with it the relation's last reference */
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* The six orders of destroying (runtime, tape, relation) after a recorded step whose nodes are
 * alive; the tape keeps working (a second backward, a new step) whatever went before it. */
Test(lifetime, every_destruction_order) {
  static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  double want[12];
  reference_grad(want);
  for (int o = 0; o < 6; o++) {
    att_data d;
    att_data_init(&d);
    tg_runtime *rt = ts_host_runtime();
    tg_relation *r = csr_relation(rt);
    tg_tape *t = ts_tape(rt);
    tg_id q, loss = att_loss(t, r, &d, &q);
    bool tape_alive = true;
    for (int s = 0; s < 3; s++) {
      int what = orders[o][s];
      if (what == 0) tg_runtime_destroy(rt);
      if (what == 1) tg_tape_destroy(t), tape_alive = false;
      if (what == 2) tg_relation_destroy(r);
      if (tape_alive) { /* whatever the caller gave up, the tape still works */
        double got[12];
        tg_tape_zero_grad(t);
        cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "order %d step %d: %s", o, s, tg_tape_error(t));
        ts_read_grad(t, q, got, 12);
        for (int i = 0; i < 12; i++)
          cr_expect_eq(got[i], want[i], "order %d step %d element %d", o, s, i);
      }
    }
  }
}

Test(lifetime, tape_outlives_runtime_and_runs_new_steps) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  tg_runtime_destroy(rt);
  cr_expect(tg_tape_runtime(t) != NULL, "the tape keeps its runtime");
  tg_relation *r = NULL; /* relations can still be built on the tape's runtime */
  cr_assert_eq(tg_relation_causal(tg_tape_runtime(t), 3, 4, &r), TG_OK);
  att_data d;
  att_data_init(&d);
  for (int step = 0; step < 3; step++) {
    tg_tape_reset(t);
    tg_id q, loss = att_loss(t, r, &d, &q);
    cr_expect_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
  }
  tg_relation_destroy(r);
  tg_tape_destroy(t);
}

Test(lifetime, mha_relation_is_released_with_its_node) {
  /* tg_mha builds its causal relation internally; the node holds the only reference (ASan's
   * leak check fails this test if reset or destroy forgot it) */
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sx[3] = {1, 4, 4}, sw[2] = {4, 4};
  double x[16], w[16];
  ts_uniform(x, 16, 5, -1, 1);
  ts_uniform(w, 16, 6, -1, 1);
  tg_mha_options o = ts_mha_opts(2, 2, 1);
  for (int step = 0; step < 2; step++) {
    tg_tape_reset(t);
    tg_id xi = ts_input(t, TG_F64, 3, sx, x, 0), wi = ts_param(t, TG_F64, 2, sw, w);
    cr_expect_eq(tg_tape_backward(t, tg_sum(t, tg_mha(t, xi, wi, wi, wi, wi, &o))), TG_OK, "%s", tg_tape_error(t));
  }
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* ---------------------------------------------------------------- API rules */

Test(api_rules, absent_and_no_id) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sx[2] = {2, 3}, sw[2] = {3, 2};
  double x[6] = {1, 2, 3, 4, 5, 6}, w[6] = {1, 0, 0, 1, 1, 1};
  tg_id xi = ts_input(t, TG_F64, 2, sx, x, 0), wi = ts_input(t, TG_F64, 2, sw, w, 0);
  double y[4];
  ts_read(t, tg_linear(t, xi, wi, TG_ABSENT), y, 4); /* TG_ABSENT: no bias */
  cr_expect(y[0] == 4 && y[1] == 5 && y[2] == 10 && y[3] == 11);
  /* a failed creation returns TG_NO_ID; passing it on is an error, never "no bias" */
  tg_id b = TG_NO_ID;
  int64_t sb[1] = {2};
  cr_expect_eq(tg_tape_input(t, TG_F64, 1, sb, x, 8, 0, &b), TG_ERR_INVALID_ARGUMENT);
  cr_expect_eq(b, TG_NO_ID);
  cr_expect_eq(tg_linear(t, xi, wi, b), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "argument 'b' is TG_NO_ID (what a failed call returns); pass TG_ABSENT");
  tg_tape_reset(t);
  xi = ts_input(t, TG_F64, 2, sx, x, 0);
  cr_expect_eq(tg_relu(t, TG_ABSENT), TG_NO_ID); /* a required argument cannot be absent */
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "argument 'x' is TG_ABSENT; expected the id of a value");
  tg_tape_reset(t);
  /* tg_tape_shape takes the capacity of its array */
  xi = ts_input(t, TG_F64, 2, sx, x, 0);
  int nd;
  int64_t one[1];
  TS_EXPECT_STATUS(tg_tape_shape(t, xi, &nd, one, 1), TG_ERR_INVALID_ARGUMENT, t, "'shape_cap' is 1; value");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(api_rules, options_struct_size) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t s4[4] = {1, 2, 1, 2};
  double a[4] = {1, 2, 3, 4};
  tg_relation *r = NULL;
  cr_assert_eq(tg_relation_dense(rt, 2, 2, &r), TG_OK);
  tg_id q = ts_input(t, TG_F64, 4, s4, a, 0);
  tg_attention_options o;
  memset(&o, 0, sizeof o); /* never initialised: refused, not read as defaults */
  cr_expect_eq(tg_attention(t, q, q, q, r, &o), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "argument 'opts' (tg_attention_options): its struct_size is 0");
  tg_tape_reset(t);
  q = ts_input(t, TG_F64, 4, s4, a, 0);
  tg_attention_options_init(&o);
  cr_expect_eq(o.scale, TG_SCALE_AUTO);
  cr_expect_eq(o.dropout_keep, 1.0);
  cr_expect_neq(tg_attention(t, q, q, q, r, &o), TG_NO_ID, "%s", tg_tape_error(t));
  tg_mha_options mo;
  tg_mha_options_init(&mo); /* heads are required: init leaves them 0 */
  int64_t sx[3] = {1, 2, 2}, sw[2] = {2, 2};
  tg_id x = ts_input(t, TG_F64, 3, sx, a, 0), w = ts_input(t, TG_F64, 2, sw, a, 0);
  cr_expect_eq(tg_mha(t, x, w, w, w, w, &mo), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "heads_q = 0, heads_kv = 0; expected both >= 1");
  /* gradcheck inputs and results carry their size too */
  tg_gradcheck_input in = ts_gc_input(TG_F64, 4, s4, a);
  in.struct_size = 0;
  tg_gradcheck_result res;
  tg_gradcheck_result_init(&res);
  cr_expect_eq(tg_gradcheck(rt, NULL, NULL, 1, &in, NULL, &res), TG_ERR_INVALID_ARGUMENT);
  tg_relation_destroy(r);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* Every relation kind read back as destination-major CSR, against pairs listed by hand. */
static void expect_csr(const tg_relation *r, int64_t batch, int64_t nq, const int64_t *rp_want,
                       const int32_t *ci_want) {
  int64_t rp[16];
  int32_t ci[64];
  cr_assert(nq + 1 <= 16);
  cr_assert_eq(tg_relation_read_csr(r, batch, rp, (size_t)(nq + 1) * sizeof *rp, NULL, 0), TG_OK, "%s",
               tg_last_error());
  for (int64_t i = 0; i <= nq; i++)
    cr_expect_eq(rp[i], rp_want[i], "row_ptr[%lld]", (long long)i);
  cr_assert(rp[nq] <= 64);
  cr_assert_eq(tg_relation_read_csr(r, batch, rp, (size_t)(nq + 1) * sizeof *rp, ci, (size_t)rp[nq] * sizeof *ci),
               TG_OK, "%s", tg_last_error());
  for (int64_t e = 0; e < rp[nq]; e++)
    cr_expect_eq(ci[e], ci_want[e], "col_idx[%lld]", (long long)e);
}

Test(api_rules, read_csr_every_kind) {
  tg_runtime *rt = ts_host_runtime();
  tg_relation *r = NULL;
  cr_assert_eq(tg_relation_dense(rt, 2, 3, &r), TG_OK);
  expect_csr(r, 0, 2, (int64_t[]){0, 3, 6}, (int32_t[]){0, 1, 2, 0, 1, 2});
  tg_relation_destroy(r);
  cr_assert_eq(tg_relation_causal(rt, 3, 2, &r), TG_OK); /* bottom-right: j <= i - 1 */
  expect_csr(r, 0, 3, (int64_t[]){0, 0, 1, 3}, (int32_t[]){0, 0, 1});
  tg_relation_destroy(r);
  uint8_t m[2 * 2 * 3] = {0, 1, 1, 0, 0, 0, 1, 0, 1, 1, 1, 1};
  cr_assert_eq(tg_relation_mask(rt, 2, 2, 3, m, sizeof m, &r), TG_OK);
  expect_csr(r, 0, 2, (int64_t[]){0, 2, 2}, (int32_t[]){1, 2});
  expect_csr(r, 1, 2, (int64_t[]){0, 2, 5}, (int32_t[]){0, 2, 0, 1, 2});
  int64_t rp[3];
  cr_expect_eq(tg_relation_read_csr(r, 2, rp, sizeof rp, NULL, 0), TG_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(tg_last_error(), "argument 'batch' is 2") != NULL, "%s", tg_last_error());
  tg_relation_destroy(r);
  int32_t cu[3] = {0, 1, 3};
  cr_assert_eq(tg_relation_varlen(rt, 2, cu, sizeof cu, NULL, 0, 1, &r), TG_OK);
  expect_csr(r, 0, 3, (int64_t[]){0, 1, 2, 4}, (int32_t[]){0, 1, 1, 2});
  /* wrong byte counts are refused */
  int64_t rp4[4];
  cr_expect_eq(tg_relation_read_csr(r, 0, rp4, 8, NULL, 0), TG_ERR_INVALID_ARGUMENT);
  int32_t ci1[1];
  cr_expect_eq(tg_relation_read_csr(r, 0, rp4, sizeof rp4, ci1, sizeof ci1), TG_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(tg_last_error(), "argument 'col_idx_bytes' is 4") != NULL, "%s", tg_last_error());
  tg_relation *parts[2];
  parts[0] = r;
  cr_assert_eq(tg_relation_dense(rt, 1, 2, &parts[1]), TG_OK);
  tg_relation *cat = NULL;
  cr_assert_eq(tg_relation_concat(rt, 2, parts, &cat), TG_OK);
  tg_relation_destroy(parts[0]); /* the concatenation copied its parts */
  tg_relation_destroy(parts[1]);
  expect_csr(cat, 0, 4, (int64_t[]){0, 1, 2, 4, 6}, (int32_t[]){0, 1, 1, 2, 3, 4});
  tg_relation_destroy(cat);
  tg_runtime_destroy(rt);
}

Test(api_rules, relation_byte_counts) {
  tg_runtime *rt = ts_host_runtime();
  tg_relation *r = NULL;
  uint8_t m[6] = {1, 1, 1, 1, 1, 1};
  cr_expect_eq(tg_relation_mask(rt, 0, 2, 3, m, 5, &r), TG_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(tg_last_error(), "argument 'mask_bytes' is 5; [nq, nk] mask bytes take 6 bytes") != NULL, "%s",
            tg_last_error());
  int64_t rp[3] = {0, 1, 2};
  int32_t ci[2] = {0, 1};
  cr_expect_eq(tg_relation_csr(rt, 2, 2, rp, 16, ci, sizeof ci, &r), TG_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(tg_last_error(), "argument 'row_ptr_bytes' is 16") != NULL, "%s", tg_last_error());
  cr_expect_eq(tg_relation_csr(rt, 2, 2, rp, sizeof rp, ci, 4, &r), TG_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(tg_last_error(), "argument 'col_idx_bytes' is 4; nnz = 2 int32 column indices take 8") != NULL, "%s",
            tg_last_error());
  int32_t cu[3] = {0, 2, 3};
  cr_expect_eq(tg_relation_varlen(rt, 2, cu, 8, NULL, 0, 0, &r), TG_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(tg_last_error(), "argument 'cu_seqlens_q_bytes' is 8") != NULL, "%s", tg_last_error());
  cr_expect(r == NULL);
  tg_runtime_destroy(rt);
}
