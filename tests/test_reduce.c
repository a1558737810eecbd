/* tg_sum_last: values against loops written here, gradcheck, errors, CUDA vs host. */
#include "support.h"

static tg_id sum_last_loss(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_sum(t, tg_mul(t, tg_sum_last(t, in[0]), in[1]));
}
static tg_id sum_last_fn(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_sum_last(t, in[0]);
}

Test(reduce, sum_last_values_and_grad) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sh[3] = {3, 2, 5};
  double x[30], y[6], want[6];
  ts_uniform(x, 30, 1, -2, 2);
  for (int r = 0; r < 6; r++) {
    want[r] = 0;
    for (int c = 0; c < 5; c++)
      want[r] += x[r * 5 + c];
  }
  tg_id xi = ts_input(t, TG_F64, 3, sh, x, TG_REQUIRES_GRAD), yi = tg_sum_last(t, xi);
  cr_assert_eq(ts_read(t, yi, y, 6), 6);
  TS_EXPECT_CLOSE(y, want, 6, 1e-15, 1e-15);
  int nd;
  int64_t ys[TG_MAX_DIMS];
  tg_tape_shape(t, yi, &nd, ys, TG_MAX_DIMS);
  cr_expect(nd == 2 && ys[0] == 3 && ys[1] == 2);
  /* a 1-D value gives a scalar; a scalar is refused */
  int64_t s1[1] = {4};
  double four[4] = {1, 2, 3, 4}, one;
  tg_id si = tg_sum_last(t, ts_input(t, TG_F64, 1, s1, four, 0));
  cr_expect_eq(ts_read(t, si, &one, 1), 1);
  cr_expect_eq(one, 10.0);
  cr_expect_eq(tg_sum_last(t, si), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_SHAPE, "tg_sum_last: argument 'x' is a scalar");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
  double w[6];
  ts_uniform(w, 6, 2, -1, 1);
  int64_t sw[2] = {3, 2};
  tg_gradcheck_input in[2] = {ts_gc_input(TG_F64, 3, sh, x), ts_gc_input(TG_F64, 2, sw, w)};
  ts_gradcheck(sum_last_loss, NULL, 2, in);
}

Test(reduce_cuda, sum_last_matches_host) {
  int64_t shs[2][2] = {{37, 7}, {19, 131}}; /* a thread per row, a warp per row */
  for (int k = 0; k < 2; k++) {
    double *x = malloc(sizeof(double) * (size_t)(shs[k][0] * shs[k][1]));
    ts_uniform(x, (size_t)(shs[k][0] * shs[k][1]), 3 + (uint64_t)k, -1, 1);
    tg_gradcheck_input in = ts_gc_input(TG_F64, 2, shs[k], x);
    ts_check_cuda_vs_host(sum_last_fn, NULL, 1, &in, TG_F32, TG_PROVIDER_CUDA, 1e-6);
    ts_check_cuda_vs_host(sum_last_fn, NULL, 1, &in, TG_BF16, TG_PROVIDER_CUDA, 2e-2);
    free(x);
  }
}
