/* tg_embedding: forward rows against the table read here, scatter-add gradients with repeated
 * ids, gradcheck in f64, id validation, CUDA against the host reference. */
#include <stdlib.h>

#include "support.h"

Test(embedding, forward_f32) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t st[2] = {5, 3}, si[2] = {2, 2};
  float table[15];
  for (int v = 0; v < 5; v++)
    for (int d = 0; d < 3; d++)
      table[v * 3 + d] = (float)(10 * v + d);
  int32_t ids[4] = {4, 0, 4, 2};
  tg_id it = ts_input(t, TG_F32, 2, st, table, 0), ii = ts_input(t, TG_I32, 2, si, ids, 0);
  tg_id y = tg_embedding(t, it, ii);
  int nd;
  int64_t sh[TG_MAX_DIMS];
  cr_assert_eq(tg_tape_shape(t, y, &nd, sh, TG_MAX_DIMS), TG_OK, "%s", tg_tape_error(t));
  cr_expect(nd == 3 && sh[0] == 2 && sh[1] == 2 && sh[2] == 3, "shape %d [%lld, %lld, %lld]", nd, (long long)sh[0],
            (long long)sh[1], (long long)sh[2]);
  double got[12], want[12];
  for (int i = 0; i < 4; i++)
    for (int d = 0; d < 3; d++)
      want[i * 3 + d] = 10 * ids[i] + d;
  ts_read(t, y, got, 12);
  TS_EXPECT_CLOSE(got, want, 12, 0, 0);
  /* a scalar id gives one row [D] */
  int32_t one = 3;
  tg_id ys = tg_embedding(t, it, ts_input(t, TG_I32, 0, NULL, &one, 0));
  cr_assert_eq(tg_tape_shape(t, ys, &nd, sh, TG_MAX_DIMS), TG_OK, "%s", tg_tape_error(t));
  cr_expect(nd == 1 && sh[0] == 3);
  double row[3], wrow[3] = {30, 31, 32};
  ts_read(t, ys, row, 3);
  TS_EXPECT_CLOSE(row, wrow, 3, 0, 0);
  char buf[2048];
  cr_expect_eq(tg_tape_explain(t, buf, sizeof buf, NULL), TG_OK);
  cr_expect(strstr(buf, "embedding") && strstr(buf, "V=5 D=3"), "explain: %s", buf);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* d loss / d table[v, d] = sum over positions i with ids[i] == v of w[i, d] */
Test(embedding, backward_accumulates_repeated_ids) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t st[2] = {4, 3}, si[1] = {5}, sw[2] = {5, 3};
  double table[12], w[15];
  ts_uniform(table, 12, 1, -1, 1);
  ts_uniform(w, 15, 2, -1, 1);
  int32_t ids[5] = {1, 3, 1, 1, 3};
  tg_id it = ts_param(t, TG_F64, 2, st, table);
  tg_id loss =
      tg_sum(t, tg_mul(t, tg_embedding(t, it, ts_input(t, TG_I32, 1, si, ids, 0)), ts_input(t, TG_F64, 2, sw, w, 0)));
  cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
  double g[12], want[12] = {0};
  for (int i = 0; i < 5; i++)
    for (int d = 0; d < 3; d++)
      want[ids[i] * 3 + d] += w[i * 3 + d];
  ts_read_grad(t, it, g, 12);
  TS_EXPECT_CLOSE(g, want, 12, 1e-15, 1e-14);
  /* a second sweep adds again into the parameter's gradient (rows 0 and 2 stay zero) */
  cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
  for (int k = 0; k < 12; k++)
    want[k] *= 2;
  ts_read_grad(t, it, g, 12);
  TS_EXPECT_CLOSE(g, want, 12, 1e-15, 1e-14);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

static tg_id gc_embedding(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_sum(t, tg_mul(t, tg_embedding(t, in[0], in[1]), in[2]));
}

/* the table used by two lookups, one of them squared: gradients from both nodes accumulate */
static tg_id gc_embedding_twice(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  tg_id a = tg_embedding(t, in[0], in[1]);
  int64_t s[1] = {-1};
  tg_id b = tg_reshape(t, tg_embedding(t, in[0], in[3]), 1, s);
  return tg_add(t, tg_sum(t, tg_mul(t, a, in[2])), tg_sum(t, tg_mul(t, b, b)));
}

Test(embedding, gradcheck) {
  int64_t st[2] = {6, 4}, si[2] = {2, 5}, sw[3] = {2, 5, 4}, s3[1] = {3};
  double table[24], w[40];
  ts_uniform(table, 24, 3, -1, 1);
  ts_uniform(w, 40, 4, -1, 1);
  int32_t ids[10] = {0, 5, 5, 2, 0, 3, 5, 1, 0, 0}, ids2[3] = {5, 4, 5};
  tg_gradcheck_input in[4] = {ts_gc_input(TG_F64, 2, st, table), ts_gc_input(TG_I32, 2, si, ids),
                              ts_gc_input(TG_F64, 3, sw, w), ts_gc_input(TG_I32, 1, s3, ids2)};
  ts_gradcheck(gc_embedding, NULL, 3, in);
  ts_gradcheck(gc_embedding_twice, NULL, 4, in);
}

Test(embedding, errors) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t st[2] = {5, 3}, si[2] = {2, 2}, s15[1] = {15};
  float table[15] = {0};
  int32_t out_of_range[4] = {0, 1, 2, 5}, negative[4] = {0, -1, 7, 1};
  tg_id it = ts_input(t, TG_F32, 2, st, table, 0);
  cr_expect_eq(tg_embedding(t, it, ts_input(t, TG_I32, 2, si, out_of_range, 0)), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT,
                   "tg_embedding: argument 'ids' [2, 2] holds 5 at position 3 (index [1, 1]); expected ids in [0, 5) "
                   "(table [5, 3])");
  tg_tape_reset(t);
  it = ts_input(t, TG_F32, 2, st, table, 0);
  cr_expect_eq(tg_embedding(t, it, ts_input(t, TG_I32, 2, si, negative, 0)), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "holds -1 at position 1 (index [0, 1])");
  tg_tape_reset(t);
  it = ts_input(t, TG_F32, 2, st, table, 0);
  int64_t ids64[4] = {0, 1, 2, 3};
  cr_expect_eq(tg_embedding(t, it, ts_input(t, TG_I64, 2, si, ids64, 0)), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "argument 'ids' has dtype i64; expected i32");
  tg_tape_reset(t);
  it = ts_input(t, TG_F32, 2, st, table, 0);
  cr_expect_eq(tg_embedding(t, it, ts_input(t, TG_F32, 2, si, table, 0)), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "argument 'ids' has dtype f32; expected i32");
  tg_tape_reset(t);
  int32_t ok[4] = {0, 1, 2, 3};
  cr_expect_eq(tg_embedding(t, ts_input(t, TG_F32, 1, s15, table, 0), ts_input(t, TG_I32, 2, si, ok, 0)), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "argument 'table' has shape [15]; expected [V, D] (2 dims)");
  tg_tape_reset(t);
  int32_t itable[15] = {0};
  cr_expect_eq(tg_embedding(t, ts_input(t, TG_I32, 2, st, itable, 0), ts_input(t, TG_I32, 2, si, ok, 0)), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "argument 'table' has dtype i32");
  tg_tape_reset(t);
  int64_t s8[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  it = ts_input(t, TG_F32, 2, st, table, 0);
  cr_expect_eq(tg_embedding(t, it, ts_input(t, TG_I32, 8, s8, ok, 0)), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "would exceed 8 dims");
  tg_tape_reset(t);
  it = ts_input(t, TG_F32, 2, st, table, 0);
  cr_expect_eq(tg_embedding(t, it, TG_NO_ID), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "argument 'ids' is TG_NO_ID");
  tg_tape_reset(t);
  cr_expect_eq(tg_embedding(t, TG_NO_ID, TG_NO_ID), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "argument 'table' is TG_NO_ID");
  tg_tape_reset(t);
  it = ts_input(t, TG_F32, 2, st, table, 0);
  tg_tape_set_provider(t, TG_PROVIDER_CUDA, NULL);
  cr_expect_eq(tg_embedding(t, it, ts_input(t, TG_I32, 2, si, ok, 0)), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_NO_DEVICE, "host-only");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* ------------------------------------------------------------ CUDA against the host (skips without a GPU) */

static tg_id cv_embedding(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_embedding(t, in[0], in[1]);
}

Test(embedding_cuda, matches_host_odd_sizes) {
  int64_t st[2] = {37, 19}, si[2] = {5, 7};
  double table[37 * 19];
  ts_uniform(table, 37 * 19, 5, -1, 1);
  int32_t ids[35];
  uint64_t s = 6;
  for (int i = 0; i < 35; i++)
    ids[i] = (int32_t)(ts_next(&s) % 11); /* many repeats */
  ids[0] = 36;
  tg_gradcheck_input in[2] = {ts_gc_input(TG_F64, 2, st, table), ts_gc_input(TG_I32, 2, si, ids)};
  ts_check_cuda_vs_host(cv_embedding, NULL, 2, in, TG_F32, TG_PROVIDER_CUDA, 1e-6);
  ts_check_cuda_vs_host(cv_embedding, NULL, 2, in, TG_F16, TG_PROVIDER_CUDA, 2e-2);
  ts_check_cuda_vs_host(cv_embedding, NULL, 2, in, TG_BF16, TG_PROVIDER_CUDA, 2e-2);
}

/* Ids produced on the device (by a CUDA reshape) are still checked before any kernel runs. */
Test(embedding_cuda, device_resident_ids_are_checked) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  tg_tape *t = ts_tape(rt);
  tg_tape_set_provider(t, TG_PROVIDER_CUDA, NULL);
  int64_t st[2] = {4, 2}, s4[1] = {4}, s22[2] = {2, 2};
  float table[8] = {0, 1, 10, 11, 20, 21, 30, 31};
  int32_t good[4] = {3, 0, 3, 1}, bad[4] = {3, 0, 4, 1};
  tg_id it = ts_input(t, TG_F32, 2, st, table, 0);
  tg_id ids = tg_reshape(t, ts_input(t, TG_I32, 1, s4, good, 0), 2, s22);
  double y[8], want[8] = {30, 31, 0, 1, 30, 31, 10, 11};
  ts_read(t, tg_embedding(t, it, ids), y, 8);
  TS_EXPECT_CLOSE(y, want, 8, 0, 0);
  tg_id bids = tg_reshape(t, ts_input(t, TG_I32, 1, s4, bad, 0), 2, s22);
  cr_expect_eq(tg_embedding(t, it, bids), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "holds 4 at position 2 (index [1, 0]); expected ids in [0, 4)");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}
