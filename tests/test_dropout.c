/* dropout: the mask against an independent Philox4x32-10 written here (itself checked against
 * Random123's known answers), keep fraction and scale, seeds and call counter, identity cases,
 * the exact gradient pattern, gradcheck, error paths, and CUDA against the host bit for bit. */
#include <math.h>
#include <stdlib.h>

#include "support.h"

/* Philox4x32-10 as in Salmon et al. 2011: 10 rounds of two 32x32->64 multiplies, the key bumped by
 * the Weyl constants between rounds. */
static void ref_philox(const uint32_t key[2], const uint32_t ctr[4], uint32_t out[4]) {
  uint32_t c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]}, k[2] = {key[0], key[1]};
  for (int r = 0; r < 10; r++) {
    if (r) k[0] += 0x9E3779B9u, k[1] += 0xBB67AE85u;
    uint64_t p0 = (uint64_t)0xD2511F53u * c[0], p1 = (uint64_t)0xCD9E8D57u * c[2];
    uint32_t n[4] = {(uint32_t)(p1 >> 32) ^ c[1] ^ k[0], (uint32_t)p1, (uint32_t)(p0 >> 32) ^ c[3] ^ k[1],
                     (uint32_t)p0};
    memcpy(c, n, sizeof c);
  }
  memcpy(out, c, sizeof c);
}

/* The documented mask (host/dropout.h): element i of call c keeps iff u < keep, u = w / 2^32 with w
 * word i % 4 of Philox(key = seed, counter = (i / 4, c)) (cuRAND's subsequence c, offset i). */
static int ref_keep(uint64_t seed, uint64_t call, uint64_t i, double keep) {
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  uint64_t g = i / 4;
  uint32_t ctr[4] = {(uint32_t)g, (uint32_t)(g >> 32), (uint32_t)call, (uint32_t)(call >> 32)};
  uint32_t w[4];
  ref_philox(key, ctr, w);
  return (double)w[i % 4] / 4294967296.0 < keep;
}

Test(dropout, reference_philox_known_answers) {
  /* Random123 kat_vectors: philox4x32_10 */
  uint32_t o[4];
  uint32_t k0[2] = {0, 0}, c0[4] = {0, 0, 0, 0};
  ref_philox(k0, c0, o);
  cr_expect(o[0] == 0x6627e8d5u && o[1] == 0xe169c58du && o[2] == 0xbc57ac4cu && o[3] == 0x9b00dbd8u);
  uint32_t k1[2] = {~0u, ~0u}, c1[4] = {~0u, ~0u, ~0u, ~0u};
  ref_philox(k1, c1, o);
  cr_expect(o[0] == 0x408f276du && o[1] == 0x41c83b0eu && o[2] == 0xa20bc7c6u && o[3] == 0x6d5451fdu);
  uint32_t k2[2] = {0xa4093822u, 0x299f31d0u}, c2[4] = {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u};
  ref_philox(k2, c2, o);
  cr_expect(o[0] == 0xd16cfe09u && o[1] == 0x94fdccebu && o[2] == 0x5001e420u && o[3] == 0x24126ea1u);
}

#define N 100000

Test(dropout, mask_fraction_and_scale_f32) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  float *x = malloc(N * sizeof(float));
  double *y = malloc(N * sizeof(double)), *y2 = malloc(N * sizeof(double));
  ts_uniform_f32(x, N, 7, 0.5, 2.0);
  int64_t s[1] = {N};
  const double keep = 0.7;
  tg_tape_set_seed(t, 1234);
  tg_id ix = ts_input(t, TG_F32, 1, s, x, 0);
  ts_read(t, tg_dropout(t, ix, keep), y, N);
  ts_read(t, tg_dropout(t, ix, keep), y2, N); /* the second call of the step */
  int64_t kept = 0, bad_mask = 0, bad_scale = 0, bad_mask2 = 0, differ = 0;
  for (int64_t i = 0; i < N; i++) {
    int k = ref_keep(1234, 0, (uint64_t)i, keep);
    kept += k;
    if ((y[i] != 0) != k) bad_mask++;
    if (k && fabs(y[i] - x[i] / keep) > 1e-6 * fabs(x[i] / keep)) bad_scale++; /* x / keep within f32 rounding */
    if (k && y[i] != (double)(x[i] * (float)(1.0 / keep))) bad_scale++;        /* and exactly the documented product */
    if ((y2[i] != 0) != ref_keep(1234, 1, (uint64_t)i, keep)) bad_mask2++;
    if ((y[i] != 0) != (y2[i] != 0)) differ++;
  }
  double frac = (double)kept / N; /* binomial sd sqrt(0.21 / 1e5) = 0.00145 */
  cr_expect(fabs(frac - keep) < 0.01, "kept fraction %.4f, keep %.2f", frac, keep);
  cr_expect_eq(bad_mask, 0, "%lld elements differ from the reference mask", (long long)bad_mask);
  cr_expect_eq(bad_scale, 0, "%lld kept elements not scaled by 1/keep", (long long)bad_scale);
  cr_expect_eq(bad_mask2, 0, "second call: %lld elements differ from the reference mask", (long long)bad_mask2);
  cr_expect(differ > N / 10, "two calls of one step share %lld of %d mask bits", (long long)(N - differ), N);
  free(x);
  free(y);
  free(y2);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(dropout, seeds_and_call_counter) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  enum { M = 4096 };
  double x[M], a[M], b[M], c[M], d[M], e[M];
  ts_uniform(x, M, 8, 1, 2);
  int64_t s[1] = {M};
  tg_tape_set_seed(t, 99);
  tg_id ix = ts_input(t, TG_F64, 1, s, x, 0);
  ts_read(t, tg_dropout(t, ix, 0.5), a, M);
  tg_tape_reset(t); /* the counter restarts; the seed stays */
  ix = ts_input(t, TG_F64, 1, s, x, 0);
  ts_read(t, tg_dropout(t, ix, 0.5), b, M);
  cr_expect(memcmp(a, b, sizeof a) == 0, "same seed and call after reset: different output");
  ts_read(t, tg_dropout(t, ix, 0.5), c, M);
  cr_expect(memcmp(a, c, sizeof a) != 0, "the next call drew the same mask");
  tg_tape_set_seed(t, 99); /* restarts the counter too */
  ts_read(t, tg_dropout(t, ix, 0.5), d, M);
  cr_expect(memcmp(a, d, sizeof a) == 0, "tg_tape_set_seed did not restart the call counter");
  tg_tape_set_seed(t, 100);
  ts_read(t, tg_dropout(t, ix, 0.5), e, M);
  int same = 0;
  for (int i = 0; i < M; i++)
    same += (a[i] != 0) == (e[i] != 0);
  cr_expect(same < M * 6 / 10, "seeds 99 and 100 agree on %d of %d mask bits", same, M);
  for (int i = 0; i < M; i++)
    cr_expect_eq(e[i] != 0, ref_keep(100, 0, (uint64_t)i, 0.5));
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(dropout, identity_keep_one_and_no_grad) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  enum { M = 257 };
  double x[M], y[M], g[M];
  ts_uniform(x, M, 9, -3, 3);
  int64_t s[1] = {M};
  tg_id ix = ts_input(t, TG_F64, 1, s, x, TG_REQUIRES_GRAD);
  tg_id iy = tg_dropout(t, ix, 1.0);
  ts_read(t, iy, y, M);
  cr_expect(memcmp(x, y, sizeof x) == 0, "keep = 1 is not the identity");
  cr_assert_eq(tg_tape_backward(t, tg_sum(t, iy)), TG_OK, "%s", tg_tape_error(t));
  ts_read_grad(t, ix, g, M);
  for (int i = 0; i < M; i++)
    cr_expect_eq(g[i], 1.0);
  char buf[512];
  tg_tape_explain(t, buf, sizeof buf, NULL);
  cr_expect(strstr(buf, "dropout") && strstr(buf, "identity"), "%s", buf);
  /* no-grad mode: a copy (new value), no node, whatever keep */
  tg_tape_reset(t);
  ix = ts_input(t, TG_F64, 1, s, x, 0);
  tg_tape_set_grad_enabled(t, 0, NULL);
  iy = tg_dropout(t, ix, 0.3); /* call 0, drawn as identity */
  cr_expect_neq(iy, ix);
  ts_read(t, iy, y, M);
  cr_expect(memcmp(x, y, sizeof x) == 0, "no-grad dropout is not the identity");
  size_t nodes = 1;
  tg_tape_stats(t, &nodes, NULL);
  cr_expect_eq(nodes, 0);
  /* every call advances the counter, identity ones included: the next call is call 1 */
  tg_tape_set_grad_enabled(t, 1, NULL);
  ts_read(t, tg_dropout(t, ix, 0.3), y, M);
  for (int i = 0; i < M; i++)
    cr_expect_eq(y[i] != 0, ref_keep(0x5eed, 1, (uint64_t)i, 0.3), "element %d", i);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(dropout, gradient_is_mask_over_keep) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  enum { M = 3 * 1001 };
  double x[M], y[M], g[M];
  float xf[M];
  ts_uniform(x, M, 10, 0.5, 2);
  int64_t s[2] = {3, 1001};
  const double keep = 0.6;
  tg_id ix = ts_input(t, TG_F64, 2, s, x, TG_REQUIRES_GRAD);
  tg_id iy = tg_dropout(t, ix, keep);
  ts_read(t, iy, y, M);
  cr_assert_eq(tg_tape_backward(t, tg_sum(t, iy)), TG_OK, "%s", tg_tape_error(t));
  ts_read_grad(t, ix, g, M);
  int64_t bad = 0, kept = 0;
  for (int i = 0; i < M; i++) {
    kept += y[i] != 0;
    if (g[i] != (y[i] != 0 ? 1.0 / keep : 0.0)) bad++; /* x is nonzero, so y != 0 is the mask */
  }
  cr_expect_eq(bad, 0, "f64: %lld gradients are not mask / keep", (long long)bad);
  cr_expect(kept > 0 && kept < M);
  size_t saved = 1;
  tg_tape_stats(t, NULL, &saved);
  cr_expect_eq(saved, 0, "the mask is regenerated, not saved");
  char buf[512];
  tg_tape_explain(t, buf, sizeof buf, NULL);
  cr_expect(strstr(buf, "keep=0.6 call=0 (mask regenerated in backward)"), "%s", buf);
  /* f32 */
  tg_tape_reset(t);
  for (int i = 0; i < M; i++)
    xf[i] = (float)x[i];
  ix = ts_input(t, TG_F32, 2, s, xf, TG_REQUIRES_GRAD);
  iy = tg_dropout(t, ix, keep);
  ts_read(t, iy, y, M);
  cr_assert_eq(tg_tape_backward(t, tg_sum(t, iy)), TG_OK, "%s", tg_tape_error(t));
  ts_read_grad(t, ix, g, M);
  bad = 0;
  for (int i = 0; i < M; i++)
    if (g[i] != (y[i] != 0 ? (double)(float)(1.0 / keep) : 0.0)) bad++;
  cr_expect_eq(bad, 0, "f32: %lld gradients are not mask / keep", (long long)bad);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

static tg_id gc_dropout(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  tg_id h = tg_dropout(t, tg_tanh(t, tg_dropout(t, in[0], 0.5)), 0.8); /* two calls, two masks */
  return tg_sum(t, tg_mul(t, h, in[1]));
}

Test(dropout, gradcheck_f64) {
  int64_t s[2] = {3, 7};
  double x[21], w[21];
  ts_uniform(x, 21, 11, -2, 2);
  ts_uniform(w, 21, 12, -1, 1);
  tg_gradcheck_input in[2] = {ts_gc_input(TG_F64, 2, s, x), ts_gc_input(TG_F64, 2, s, w)};
  ts_gradcheck(gc_dropout, NULL, 2, in); /* each evaluation resets the tape: the same masks */
}

Test(dropout, errors) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t s[1] = {4};
  double d[4] = {1, 2, 3, 4};
  int32_t i4[4] = {0};
  double bad_keep[5] = {0.0, -0.5, 1.5, NAN, INFINITY};
  const char *msgs[5] = {"argument 'keep' is 0; expected a keep probability in (0, 1]", "argument 'keep' is -0.5",
                         "argument 'keep' is 1.5", "argument 'keep' is nan", "argument 'keep' is inf"};
  for (int k = 0; k < 5; k++) {
    tg_tape_reset(t);
    tg_id ix = ts_input(t, TG_F64, 1, s, d, 0);
    cr_expect_eq(tg_dropout(t, ix, bad_keep[k]), TG_NO_ID);
    TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, msgs[k]);
  }
  tg_tape_reset(t);
  tg_id ii = ts_input(t, TG_I32, 1, s, i4, 0);
  cr_expect_eq(tg_dropout(t, ii, 0.5), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_DTYPE, "tg_dropout: argument 'x' has dtype i32");
  tg_tape_reset(t);
  cr_expect_eq(tg_dropout(t, TG_NO_ID, 0.5), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "argument 'x' is TG_NO_ID");
  tg_tape_reset(t);
  cr_expect_eq(tg_dropout(t, ii, 0.5), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "stale");
  cr_expect_eq(tg_dropout(NULL, ii, 0.5), TG_NO_ID);
  cr_expect(strstr(tg_last_error(), "tg_dropout: argument 'tape' is NULL") != NULL, "%s", tg_last_error());
  tg_tape_reset(t);
  tg_id ix = ts_input(t, TG_F64, 1, s, d, 0);
  tg_tape_set_provider(t, TG_PROVIDER_CUDA, NULL);
  cr_expect_eq(tg_dropout(t, ix, 0.5), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_NO_DEVICE, "host-only");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* ---------------------------------------------------------------- CUDA against the host */

/* y1 = dropout(x, keep), y2 = dropout(y1, 0.9) on one provider; returns y1, y2 and grad of
 * sum(y2) w.r.t. x as raw f32 bytes. */
static void run_f32(tg_runtime *rt, tg_provider p, const float *x, int64_t n, double keep, int grad_mode, float *y1,
                    float *y2, float *gx) {
  tg_tape *t = ts_tape(rt);
  tg_tape_set_provider(t, p, NULL);
  tg_tape_set_seed(t, 0x0123456789abcdefull);
  tg_tape_set_grad_enabled(t, grad_mode, NULL);
  tg_id ix = ts_input(t, TG_F32, 1, &n, x, grad_mode ? TG_REQUIRES_GRAD : 0);
  tg_id a = tg_dropout(t, ix, keep), b = tg_dropout(t, a, 0.9);
  cr_assert_eq(tg_tape_status(t), TG_OK, "%s: %s", tg_provider_name(p), tg_tape_error(t));
  size_t bytes = (size_t)n * sizeof(float);
  cr_assert_eq(tg_tape_read(t, a, y1, bytes), TG_OK, "%s", tg_tape_error(t));
  cr_assert_eq(tg_tape_read(t, b, y2, bytes), TG_OK, "%s", tg_tape_error(t));
  if (grad_mode) {
    cr_assert_eq(tg_tape_backward(t, tg_sum(t, b)), TG_OK, "%s", tg_tape_error(t));
    cr_assert_eq(tg_tape_read_grad(t, ix, gx, bytes), TG_OK, "%s", tg_tape_error(t));
  }
  tg_tape_destroy(t);
}

Test(dropout_cuda, identical_to_host_f32) {
  tg_runtime *crt = ts_cuda_runtime_or_skip();
  tg_runtime *hrt = ts_host_runtime();
  int64_t sizes[3] = {1, 37, 37 * 1001};
  double keeps[3] = {0.5, 0.9, 1.0};
  for (int k = 0; k < 3; k++) {
    int64_t n = sizes[k];
    size_t bytes = (size_t)n * sizeof(float);
    float *x = malloc(bytes), *h[3], *c[3];
    for (int j = 0; j < 3; j++)
      h[j] = calloc((size_t)n, sizeof(float)), c[j] = calloc((size_t)n, sizeof(float));
    ts_uniform_f32(x, (size_t)n, 100 + (uint64_t)k, -3, 3);
    for (int mode = 1; mode >= 0; mode--) {
      run_f32(hrt, TG_PROVIDER_HOST, x, n, keeps[k], mode, h[0], h[1], h[2]);
      run_f32(crt, TG_PROVIDER_CUDA, x, n, keeps[k], mode, c[0], c[1], c[2]);
      cr_expect(memcmp(h[0], c[0], bytes) == 0, "n %lld keep %g grad %d: first dropout differs", (long long)n, keeps[k],
                mode);
      cr_expect(memcmp(h[1], c[1], bytes) == 0, "n %lld keep %g grad %d: second dropout differs", (long long)n,
                keeps[k], mode);
      if (mode)
        cr_expect(memcmp(h[2], c[2], bytes) == 0, "n %lld keep %g: gradients differ", (long long)n, keeps[k]);
      else
        cr_expect(memcmp(x, c[1], bytes) == 0, "n %lld: no-grad CUDA dropout is not the identity", (long long)n);
    }
    free(x);
    for (int j = 0; j < 3; j++)
      free(h[j]), free(c[j]);
  }
  tg_runtime_destroy(crt);
  tg_runtime_destroy(hrt);
}

static tg_id cv_dropout(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_dropout(t, tg_dropout(t, in[0], 0.75), 0.5);
}

Test(dropout_cuda, matches_host_f64_reference) {
  int64_t s[3] = {7, 13, 37};
  size_t n = 7 * 13 * 37;
  double *x = malloc(n * sizeof(double));
  ts_uniform(x, n, 13, -3, 3);
  tg_gradcheck_input in = ts_gc_input(TG_F64, 3, s, x);
  ts_check_cuda_vs_host(cv_dropout, NULL, 1, &in, TG_F32, TG_PROVIDER_CUDA, 1e-6);
  ts_check_cuda_vs_host(cv_dropout, NULL, 1, &in, TG_BF16, TG_PROVIDER_CUDA, 2e-2);
  ts_check_cuda_vs_host(cv_dropout, NULL, 1, &in, TG_F16, TG_PROVIDER_CUDA, 2e-2);
  free(x);
}
