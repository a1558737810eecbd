/* tg_init_fill / tg_tape_parameter_init: exact values from an independent Philox4x32-10 (checked
 * against the Random123 known-answer vectors), reproducibility, distributions over 1e5 draws,
 * Xavier fans, constants, f32 against f64, bounds, error paths. */
#include <math.h>
#include <stdlib.h>

#include "support.h"

#define NBIG 100000

/* ---------------------------------------------------------------- reference generator */

/* Philox4x32-10 written from the paper (Salmon et al., SC'11): the key is bumped before each
 * round after the first. */
static void ref_philox(const uint32_t in[4], const uint32_t key_in[2], uint32_t out[4]) {
  uint32_t c[4] = {in[0], in[1], in[2], in[3]}, k[2] = {key_in[0], key_in[1]};
  for (int r = 0; r < 10; r++) {
    if (r > 0) {
      k[0] += 0x9E3779B9u;
      k[1] += 0xBB67AE85u;
    }
    uint64_t p0 = (uint64_t)0xD2511F53u * c[0], p1 = (uint64_t)0xCD9E8D57u * c[2];
    uint32_t n[4] = {(uint32_t)(p1 >> 32) ^ c[1] ^ k[0], (uint32_t)p1, (uint32_t)(p0 >> 32) ^ c[3] ^ k[1],
                     (uint32_t)p0};
    memcpy(c, n, sizeof c);
  }
  memcpy(out, c, sizeof c);
}

/* Words of element i under seed: counter (i, 0), key = seed. */
static void words(uint64_t seed, uint64_t i, uint32_t w[4]) {
  uint32_t c[4] = {(uint32_t)i, (uint32_t)(i >> 32), 0, 0}, k[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  ref_philox(c, k, w);
}

/* 53-bit uniform in [0, 1) from two words: 27 high bits of a, 26 of b. */
static double ref_u53(uint32_t a, uint32_t b) {
  return ((double)(a >> 5) * 67108864.0 + (double)(b >> 6)) / 9007199254740992.0;
}

Test(init, philox_known_answers) {
  /* Random123 kat_vectors: philox4x32 10 <ctr x4> <key x2> -> <out x4> */
  static const uint32_t kat[3][10] = {{0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
                                      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
                                       0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
                                      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
                                       0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}};
  for (int v = 0; v < 3; v++) {
    uint32_t out[4];
    ref_philox(kat[v], kat[v] + 4, out);
    for (int j = 0; j < 4; j++)
      cr_expect_eq(out[j], kat[v][6 + j], "vector %d word %d", v, j);
  }
  /* the library's first uniform under seed 0 is built from the first KAT vector */
  tg_init_options u = ts_init(TG_INIT_UNIFORM, 0, 1, 0);
  double x;
  cr_assert_eq(tg_init_fill(&u, TG_F64, 0, NULL, &x, tg_dtype_size(TG_F64)), TG_OK);
  cr_expect_eq(x, ref_u53(0x6627e8d5, 0xe169c58d));
}

Test(init, exact_values_uniform_and_normal_f64) {
  const uint64_t seed = 0x0123456789abcdefull;
  int64_t sh[2] = {7, 37};
  double x[259], y[259];
  tg_init_options u = ts_init(TG_INIT_UNIFORM, -2, 3, seed), nrm = ts_init(TG_INIT_NORMAL, 0.5, 2, seed);
  cr_assert_eq(tg_init_fill(&u, TG_F64, 2, sh, x, ts_bytes(TG_F64, 2, sh)), TG_OK);
  cr_assert_eq(tg_init_fill(&nrm, TG_F64, 2, sh, y, ts_bytes(TG_F64, 2, sh)), TG_OK);
  for (int i = 0; i < 259; i++) {
    uint32_t w[4];
    words(seed, (uint64_t)i, w);
    cr_expect_eq(x[i], -2 + 5 * ref_u53(w[0], w[1]), "uniform element %d", i);
    /* Box-Muller on the two uniforms of the same counter; u1 in (0, 1] */
    double z = sqrt(-2 * log(1 - ref_u53(w[0], w[1]))) * cos(6.283185307179586 * ref_u53(w[2], w[3]));
    cr_expect(fabs(y[i] - (0.5 + 2 * z)) <= 1e-13 * (1 + fabs(y[i])), "normal element %d: %.17g vs %.17g", i, y[i],
              0.5 + 2 * z);
  }
}

Test(init, seeds_and_shapes) {
  int64_t sh[1] = {1000}, sh2[2] = {10, 100};
  double a[1000], b[1000], c[1000];
  tg_init_options n1 = ts_init(TG_INIT_NORMAL, 0, 1, 42), n2 = n1, n3 = n1, n4 = n1;
  n2.seed = 43;
  n3.seed = 42 + (1ull << 32); /* the high key word counts too */
  cr_assert_eq(tg_init_fill(&n1, TG_F64, 1, sh, a, ts_bytes(TG_F64, 1, sh)), TG_OK);
  cr_assert_eq(tg_init_fill(&n4, TG_F64, 1, sh, b, ts_bytes(TG_F64, 1, sh)), TG_OK);
  cr_expect(memcmp(a, b, sizeof a) == 0, "same seed, different values");
  tg_init_options seeds[2] = {n2, n3};
  for (int s = 0; s < 2; s++) {
    cr_assert_eq(tg_init_fill(&seeds[s], TG_F64, 1, sh, c, ts_bytes(TG_F64, 1, sh)), TG_OK);
    int same = 0;
    for (int i = 0; i < 1000; i++)
      same += a[i] == c[i];
    cr_expect_eq(same, 0, "seed %d: %d equal elements", s, same);
  }
  /* element i depends on i only (not on how the shape splits it) for NORMAL / UNIFORM */
  cr_assert_eq(tg_init_fill(&n1, TG_F64, 2, sh2, c, ts_bytes(TG_F64, 2, sh2)), TG_OK);
  cr_expect(memcmp(a, c, sizeof a) == 0);
}

/* ---------------------------------------------------------------- distributions */

static void moments(const double *x, int n, double *mean, double *sd, double *lo, double *hi) {
  double s = 0, q = 0;
  *lo = INFINITY, *hi = -INFINITY;
  for (int i = 0; i < n; i++) {
    s += x[i];
    *lo = fmin(*lo, x[i]);
    *hi = fmax(*hi, x[i]);
  }
  *mean = s / n;
  for (int i = 0; i < n; i++)
    q += (x[i] - *mean) * (x[i] - *mean);
  *sd = sqrt(q / (n - 1));
}

Test(init, normal_mean_std) {
  static double x[NBIG];
  int64_t sh[1] = {NBIG};
  tg_init_options in = ts_init(TG_INIT_NORMAL, 2, 3, 7);
  cr_assert_eq(tg_init_fill(&in, TG_F64, 1, sh, x, ts_bytes(TG_F64, 1, sh)), TG_OK);
  double mean, sd, lo, hi;
  moments(x, NBIG, &mean, &sd, &lo, &hi);
  /* 5 standard errors: mean 3/sqrt(n) = 0.0095, std ~ 3/sqrt(2n) = 0.0067 */
  cr_expect(fabs(mean - 2) < 0.05, "mean %g", mean);
  cr_expect(fabs(sd - 3) < 0.035, "std %g", sd);
  int within = 0;
  for (int i = 0; i < NBIG; i++)
    within += fabs(x[i] - 2) < 3;
  cr_expect(fabs(within / (double)NBIG - 0.682689) < 0.0075, "P(|z| < 1) = %g", within / (double)NBIG);
}

Test(init, uniform_bounds_mean_var) {
  static double x[NBIG];
  static float f[NBIG];
  int64_t sh[1] = {NBIG};
  tg_init_options in = ts_init(TG_INIT_UNIFORM, -0.5, 2.5, 9);
  cr_assert_eq(tg_init_fill(&in, TG_F64, 1, sh, x, ts_bytes(TG_F64, 1, sh)), TG_OK);
  double mean, sd, lo, hi;
  moments(x, NBIG, &mean, &sd, &lo, &hi);
  cr_expect(lo >= -0.5 && hi < 2.5, "range [%g, %g]", lo, hi);
  cr_expect(lo < -0.5 + 1e-3 && hi > 2.5 - 1e-3, "range [%g, %g] does not fill [-0.5, 2.5)", lo, hi);
  cr_expect(fabs(mean - 1) < 0.014, "mean %g", mean);        /* 5 * (3 / sqrt 12) / sqrt n */
  cr_expect(fabs(sd - 3 / sqrt(12.0)) < 0.01, "std %g", sd); /* ~ 4.5 standard errors */
  cr_assert_eq(tg_init_fill(&in, TG_F32, 1, sh, f, ts_bytes(TG_F32, 1, sh)), TG_OK);
  for (int i = 0; i < NBIG; i++)
    cr_assert(f[i] >= -0.5f && f[i] < 2.5f, "f32 element %d = %.9g", i, f[i]);
}

/* Xavier: U(-r, r) with r = g sqrt(6 / (fan_in + fan_out)), N(0, g sqrt(2 / (fan_in + fan_out))). */
static void check_xavier(int ndim, const int64_t *sh, double fan_sum, double gain_field, double gain) {
  static double x[NBIG];
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= sh[i];
  cr_assert(n <= NBIG);
  double mean, sd, lo, hi;
  tg_init_options u = ts_init(TG_INIT_XAVIER_UNIFORM, gain_field, 0, 11);
  cr_assert_eq(tg_init_fill(&u, TG_F64, ndim, sh, x, ts_bytes(TG_F64, ndim, sh)), TG_OK);
  moments(x, (int)n, &mean, &sd, &lo, &hi);
  double r = gain * sqrt(6 / fan_sum);
  cr_expect(lo >= -r && hi < r, "xavier uniform range [%g, %g], bound %g", lo, hi, r);
  cr_expect(lo < -0.99 * r && hi > 0.99 * r, "xavier uniform range [%g, %g] does not reach %g", lo, hi, r);
  cr_expect(fabs(sd / (r / sqrt(3.0)) - 1) < 0.02, "xavier uniform std %g, expected %g", sd, r / sqrt(3.0));
  tg_init_options nn = ts_init(TG_INIT_XAVIER_NORMAL, gain_field, 0, 12);
  cr_assert_eq(tg_init_fill(&nn, TG_F64, ndim, sh, x, ts_bytes(TG_F64, ndim, sh)), TG_OK);
  moments(x, (int)n, &mean, &sd, &lo, &hi);
  double want = gain * sqrt(2 / fan_sum);
  cr_expect(fabs(sd / want - 1) < 0.02, "xavier normal std %g, expected %g", sd, want);
  cr_expect(fabs(mean) < 5 * want / sqrt((double)n), "xavier normal mean %g", mean);
}

Test(init, xavier_fans) {
  int64_t s2[2] = {200, 500}, s3[3] = {4, 100, 250}, s1[1] = {NBIG};
  check_xavier(2, s2, 200 + 500, 0, 1);         /* [in, out] */
  check_xavier(2, s2, 200 + 500, 2, 2);         /* gain 2 */
  check_xavier(3, s3, 4 * 100 + 4 * 250, 0, 1); /* receptive field 4 */
  check_xavier(1, s1, 2.0 * NBIG, 0.5, 0.5);    /* 1-D: fan_in = fan_out = n */
}

Test(init, constants) {
  int64_t sh[2] = {3, 5};
  double x[15];
  float f[15];
  tg_init_options kinds[3] = {ts_init(TG_INIT_ZEROS, 7, 7, 1), ts_init(TG_INIT_ONES, 0, 0, 1),
                              ts_init(TG_INIT_CONSTANT, -3.25, 0, 1)};
  double want[3] = {0, 1, -3.25};
  for (int k = 0; k < 3; k++) {
    cr_assert_eq(tg_init_fill(&kinds[k], TG_F64, 2, sh, x, ts_bytes(TG_F64, 2, sh)), TG_OK);
    cr_assert_eq(tg_init_fill(&kinds[k], TG_F32, 2, sh, f, ts_bytes(TG_F32, 2, sh)), TG_OK);
    for (int i = 0; i < 15; i++) {
      cr_expect_eq(x[i], want[k]);
      cr_expect_eq(f[i], (float)want[k]);
    }
  }
  double s = 1; /* scalar */
  cr_assert_eq(tg_init_fill(&kinds[0], TG_F64, 0, NULL, &s, tg_dtype_size(TG_F64)), TG_OK);
  cr_expect_eq(s, 0.0);
}

/* The largest float < hi (and >= lo): where an f32 draw that rounded up to hi must land. */
static float below(double hi) {
  float f = (float)hi;
  while ((double)f >= hi)
    f = nextafterf(f, -INFINITY);
  return f;
}

Test(init, f32_is_f64_rounded) {
  int64_t sh[2] = {97, 101};
  int n = 97 * 101;
  double *x = malloc((size_t)n * sizeof *x);
  float *f = malloc((size_t)n * sizeof *f);
  tg_init_options kinds[4] = {ts_init(TG_INIT_NORMAL, -1, 0.3, 5), ts_init(TG_INIT_UNIFORM, -0.5, 2.5, 6),
                              ts_init(TG_INIT_XAVIER_UNIFORM, 0, 0, 7), ts_init(TG_INIT_XAVIER_NORMAL, 1.5, 0, 8)};
  double his[4] = {INFINITY, 2.5, sqrt(6.0 / 198), INFINITY};
  for (int k = 0; k < 4; k++) {
    cr_assert_eq(tg_init_fill(&kinds[k], TG_F64, 2, sh, x, ts_bytes(TG_F64, 2, sh)), TG_OK);
    cr_assert_eq(tg_init_fill(&kinds[k], TG_F32, 2, sh, f, ts_bytes(TG_F32, 2, sh)), TG_OK);
    int bad = 0;
    for (int i = 0; i < n; i++) {
      float want = (float)x[i];
      if ((double)want >= his[k]) want = below(his[k]);
      bad += f[i] != want;
    }
    cr_expect_eq(bad, 0, "kind %d: %d f32 elements differ from the rounded f64 ones", k, bad);
  }
  free(x);
  free(f);
}

/* lo + (hi - lo) u rounds to hi for u near 1 when the range is a few ulps wide; the values must
 * still lie in [lo, hi). */
Test(init, uniform_never_reaches_upper_bound) {
  static double x[4096];
  static float f[4096];
  int64_t sh[1] = {4096};
  tg_init_options one_ulp_f32 = ts_init(TG_INIT_UNIFORM, 1, 1 + 0x1p-23, 3);
  cr_assert_eq(tg_init_fill(&one_ulp_f32, TG_F32, 1, sh, f, ts_bytes(TG_F32, 1, sh)), TG_OK);
  for (int i = 0; i < 4096; i++)
    cr_assert_eq(f[i], 1.0f, "element %d = %.9g", i, f[i]);
  tg_init_options one_ulp_f64 = ts_init(TG_INIT_UNIFORM, 1, 1 + 0x1p-52, 3);
  cr_assert_eq(tg_init_fill(&one_ulp_f64, TG_F64, 1, sh, x, ts_bytes(TG_F64, 1, sh)), TG_OK);
  for (int i = 0; i < 4096; i++)
    cr_assert_eq(x[i], 1.0, "element %d = %.17g", i, x[i]);
  /* lo not representable in f32: draws that round below it move up to the first float >= lo */
  double lo = 0.100000002, hi = lo + 1e-8;
  tg_init_options narrow = ts_init(TG_INIT_UNIFORM, lo, hi, 4);
  cr_assert_eq(tg_init_fill(&narrow, TG_F32, 1, sh, f, ts_bytes(TG_F32, 1, sh)), TG_OK);
  for (int i = 0; i < 4096; i++)
    cr_assert((double)f[i] >= lo && (double)f[i] < hi, "element %d = %.9g", i, f[i]);
  /* random ranges in both dtypes */
  double r[2];
  for (int k = 0; k < 50; k++) {
    ts_uniform(r, 2, 100 + k, -4, 4);
    double a = fmin(r[0], r[1]), b = fmax(r[0], r[1]);
    tg_init_options in = ts_init(TG_INIT_UNIFORM, a, b, (uint64_t)k);
    cr_assert_eq(tg_init_fill(&in, TG_F64, 1, sh, x, ts_bytes(TG_F64, 1, sh)), TG_OK);
    cr_assert_eq(tg_init_fill(&in, TG_F32, 1, sh, f, ts_bytes(TG_F32, 1, sh)), TG_OK);
    for (int i = 0; i < 4096; i++) {
      cr_assert(x[i] >= a && x[i] < b);
      cr_assert((double)f[i] >= a && (double)f[i] < b, "[%.17g, %.17g): %.9g", a, b, f[i]);
    }
  }
  /* an empty range gives its bound */
  tg_init_options empty = ts_init(TG_INIT_UNIFORM, 0.25, 0.25, 1);
  cr_assert_eq(tg_init_fill(&empty, TG_F64, 1, sh, x, ts_bytes(TG_F64, 1, sh)), TG_OK);
  cr_expect_eq(x[0], 0.25);
}

/* ---------------------------------------------------------------- errors */

#define EXPECT_FILL(st, needle, ...)                                                                                   \
  do {                                                                                                                 \
    tg_status s_ = tg_init_fill(__VA_ARGS__);                                                                          \
    cr_expect_eq(s_, (st), "got %s (%s)", tg_status_string(s_), tg_last_error());                                      \
    cr_expect(strstr(tg_last_error(), (needle)) != NULL, "message '%s' lacks '%s'", tg_last_error(), (needle));        \
  } while (0)

Test(init, fill_errors) {
  int64_t sh[2] = {2, 3}, zero[2] = {2, 0}, huge[3] = {INT64_MAX / 4, 4, 4};
  double x[6];
  tg_init_options ok = ts_init(TG_INIT_NORMAL, 0, 1, 1);
  EXPECT_FILL(TG_ERR_INVALID_ARGUMENT, "argument 'init' is NULL", NULL, TG_F64, 2, sh, x, sizeof x);
  EXPECT_FILL(TG_ERR_INVALID_ARGUMENT, "argument 'dst' is NULL", &ok, TG_F64, 2, sh, NULL, sizeof x);
  EXPECT_FILL(TG_ERR_DTYPE, "argument 'dtype' is f16; expected f32 or f64", &ok, TG_F16, 2, sh, x, sizeof x);
  EXPECT_FILL(TG_ERR_DTYPE, "argument 'dtype' is i32", &ok, TG_I32, 2, sh, x, sizeof x);
  EXPECT_FILL(TG_ERR_SHAPE, "'ndim' (-1)", &ok, TG_F64, -1, sh, x, sizeof x);
  EXPECT_FILL(TG_ERR_SHAPE, "'ndim' (9)", &ok, TG_F64, 9, sh, x, sizeof x);
  EXPECT_FILL(TG_ERR_SHAPE, "'ndim' (2)", &ok, TG_F64, 2, NULL, x, sizeof x);
  EXPECT_FILL(TG_ERR_SHAPE, "size 0 at dim 1", &ok, TG_F64, 2, zero, x, sizeof x);
  EXPECT_FILL(TG_ERR_SHAPE, "too many elements", &ok, TG_F64, 3, huge, x, sizeof x);
  tg_init_options nan_a = ts_init(TG_INIT_NORMAL, NAN, 1, 1), inf_b = ts_init(TG_INIT_UNIFORM, 0, INFINITY, 1);
  EXPECT_FILL(TG_ERR_INVALID_ARGUMENT, "expected finite numbers", &nan_a, TG_F64, 2, sh, x, sizeof x);
  EXPECT_FILL(TG_ERR_INVALID_ARGUMENT, "expected finite numbers", &inf_b, TG_F64, 2, sh, x, sizeof x);
  tg_init_options neg_std = ts_init(TG_INIT_NORMAL, 0, -1, 1), rev = ts_init(TG_INIT_UNIFORM, 1, 0, 1),
                  kind = ts_init((tg_init_kind)99, 0, 0, 1);
  EXPECT_FILL(TG_ERR_INVALID_ARGUMENT, "NORMAL std (b) is -1", &neg_std, TG_F64, 2, sh, x, sizeof x);
  EXPECT_FILL(TG_ERR_INVALID_ARGUMENT, "UNIFORM bounds [a=1, b=0)", &rev, TG_F64, 2, sh, x, sizeof x);
  EXPECT_FILL(TG_ERR_INVALID_ARGUMENT, "init kind 99", &kind, TG_F64, 2, sh, x, sizeof x);
}

Test(init, parameter_init) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sh[2] = {4, 6};
  double want[24], got[24];
  tg_init_options in = ts_init(TG_INIT_XAVIER_UNIFORM, 0, 0, 77);
  cr_assert_eq(tg_init_fill(&in, TG_F64, 2, sh, want, ts_bytes(TG_F64, 2, sh)), TG_OK);
  tg_id w = TG_NO_ID, b = TG_NO_ID;
  cr_assert_eq(tg_tape_parameter_init(t, TG_F64, 2, sh, &in, 0, &w), TG_OK, "%s", tg_tape_error(t));
  ts_read(t, w, got, 24);
  cr_expect(memcmp(got, want, sizeof got) == 0);
  tg_init_options zeros = ts_init(TG_INIT_ZEROS, 0, 0, 0);
  cr_assert_eq(tg_tape_parameter_init(t, TG_F32, 1, sh + 1, &zeros, TG_NO_WEIGHT_DECAY, &b), TG_OK);
  ts_read(t, b, got, 6);
  for (int i = 0; i < 6; i++)
    cr_expect_eq(got[i], 0.0);
  size_t count = 0;
  tg_tape_parameters(t, NULL, 0, &count);
  cr_expect_eq(count, 2);
  /* errors */
  tg_id out = 123;
  TS_EXPECT_STATUS(tg_tape_parameter_init(t, TG_F16, 2, sh, &in, 0, &out), TG_ERR_DTYPE, t, "argument 'dtype' is f16");
  cr_expect_eq(out, TG_NO_ID);
  TS_EXPECT_STATUS(tg_tape_parameter_init(t, TG_F64, 2, sh, NULL, 0, &out), TG_ERR_INVALID_ARGUMENT, t,
                   "tg_tape_parameter_init: tg_init_fill: argument 'init' is NULL");
  tg_init_options bad = ts_init(TG_INIT_UNIFORM, 2, 1, 0);
  TS_EXPECT_STATUS(tg_tape_parameter_init(t, TG_F64, 2, sh, &bad, 0, &out), TG_ERR_INVALID_ARGUMENT, t,
                   "UNIFORM bounds");
  int64_t neg[1] = {-3};
  TS_EXPECT_STATUS(tg_tape_parameter_init(t, TG_F64, 1, neg, &in, 0, &out), TG_ERR_SHAPE, t, "size -3 at dim 0");
  TS_EXPECT_STATUS(tg_tape_parameter_init(t, TG_F64, 2, sh, &in, TG_REQUIRES_GRAD, &out), TG_ERR_INVALID_ARGUMENT, t,
                   "argument 'flags'");
  TS_EXPECT_STATUS(tg_tape_parameter_init(t, TG_F64, 2, sh, &in, 0, NULL), TG_ERR_INVALID_ARGUMENT, t,
                   "argument 'out' is NULL");
  cr_expect_eq(tg_tape_parameter_init(NULL, TG_F64, 2, sh, &in, 0, &out), TG_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(tg_last_error(), "argument 'tape' is NULL") != NULL);
  tg_tape_parameters(t, NULL, 0, &count);
  cr_expect_eq(count, 2, "a failed call created a parameter");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}
