/* Non-finite values are never silent (issue 15): anomaly mode, found-inf in the optimizers, the
 * clip's error_if_nonfinite (the loss scaler: test_scaler.c; the NaN-free domains of attention and
 * GELU: test_domains.c).
 * Host runtime, plus CUDA checks that skip without a GPU. */
#define _POSIX_C_SOURCE 200809L /* setenv: one test checks every buffer in a launch of its own */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "tape/internal.h"

static const int64_t S3[1] = {3};

/* ------------------------------------------------------------ anomaly mode */

Test(anomaly, forward_names_the_first_node) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  cr_assert_eq(tg_tape_set_check_finite(t, 1, NULL), TG_OK);
  double x[3] = {1, 1e200, 3};
  tg_id a = ts_input(t, TG_F64, 1, S3, x, TG_REQUIRES_GRAD);
  tg_id b = tg_scale(t, a, 2); /* node #0: finite */
  tg_id c = tg_mul(t, b, b);   /* node #1: 4e400 = inf */
  cr_expect_neq(b, TG_NO_ID);
  cr_expect_eq(c, TG_NO_ID, "the op that made the inf returns TG_NO_ID in anomaly mode");
  TS_EXPECT_STICKY(t, TG_ERR_NONFINITE, "node #1 (mul, host) produced a non-finite value");
  cr_expect(strstr(tg_tape_error(t), "#1    mul") != NULL, "explain line missing: %s", tg_tape_error(t));
  cr_expect_eq(tg_sum(t, b), TG_NO_ID, "later ops do nothing");
  TS_EXPECT_STATUS(tg_tape_backward(t, b), TG_ERR_STATE, t, "non-finite");
  cr_assert_eq(tg_tape_reset(t), TG_OK);
  cr_expect_eq(tg_tape_status(t), TG_OK);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(anomaly, off_by_default) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double x[3] = {1, 1e200, 3};
  tg_id a = ts_input(t, TG_F64, 1, S3, x, 0);
  cr_expect_neq(tg_mul(t, a, a), TG_NO_ID);
  cr_expect_eq(tg_tape_status(t), TG_OK);
  int prev = 7;
  cr_expect_eq(tg_tape_set_check_finite(t, 1, &prev), TG_OK);
  cr_expect_eq(prev, 0);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* y = a * b with a = 1e300, b = 1e-300 is 1; L = 1e300 * sum(y) is finite, but dL/db = 1e300 a =
 * inf: only the backward check sees it, at the mul node. */
Test(anomaly, backward_names_the_node) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  tg_tape_set_check_finite(t, 1, NULL);
  double av[1] = {1e300}, bv[1] = {1e-300};
  const int64_t s1[1] = {1};
  tg_id a = ts_input(t, TG_F64, 1, s1, av, TG_REQUIRES_GRAD);
  tg_id b = ts_param(t, TG_F64, 1, s1, bv);
  tg_id L = tg_scale(t, tg_sum(t, tg_mul(t, a, b)), 1e300);
  cr_assert_eq(tg_tape_status(t), TG_OK, "%s", tg_tape_error(t));
  tg_status s = tg_tape_backward(t, L);
  cr_expect_eq(s, TG_ERR_NONFINITE);
  TS_EXPECT_STICKY(t, TG_ERR_NONFINITE, "node #0 (mul, host) computed a non-finite value");
  tg_adamw_options o;
  tg_adamw_options_init(&o);
  cr_expect_eq(tg_adamw_step(t, &o), TG_ERR_STATE, "the optimizer must refuse a tape in anomaly error");
  double bb[1];
  ts_read(t, b, bb, 1);
  cr_expect_eq(bb[0], 1e-300);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* The same ops in f32 on the CUDA provider: found at the next status check after the forward and at
 * the end of the backward, with the same node names. */
Test(anomaly, cuda_flags) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  tg_tape *t = ts_tape(rt);
  tg_tape_set_check_finite(t, 1, NULL);
  float x[3] = {1, 1e20f, 3};
  tg_id a = ts_input(t, TG_F32, 1, S3, x, TG_REQUIRES_GRAD);
  tg_id b = tg_scale(t, a, 2);
  tg_id c = tg_mul(t, b, b); /* 4e40: inf in f32 */
  (void)c;
  TS_EXPECT_STICKY(t, TG_ERR_NONFINITE, "node #1 (mul, cuda_fused) produced a non-finite value");
  cr_assert_eq(tg_tape_reset(t), TG_OK);
  cr_expect_eq(tg_tape_status(t), TG_OK, "reset forgets the device flag: %s", tg_tape_error(t));
  float av[1] = {1e30f}, bv[1] = {1e-30f};
  const int64_t s1[1] = {1};
  a = ts_input(t, TG_F32, 1, s1, av, TG_REQUIRES_GRAD);
  tg_id pb = ts_param(t, TG_F32, 1, s1, bv);
  tg_id L = tg_scale(t, tg_sum(t, tg_mul(t, a, pb)), 1e30);
  cr_assert_eq(tg_tape_status(t), TG_OK, "%s", tg_tape_error(t));
  cr_expect_eq(tg_tape_backward(t, L), TG_ERR_NONFINITE);
  TS_EXPECT_STICKY(t, TG_ERR_NONFINITE, "node #0 (mul, cuda_fused) computed a non-finite value");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* ------------------------------------------------------------ anomaly mode on the device, many buffers
 * The device checks are queued and run as multi-tensor launches (160 buffers a launch, 16-byte loads
 * with an element-wise tail). Many values of odd sizes in f32 / bf16 / f16, with NaN or inf at the
 * first or last element of some and the largest finite number (which must not count) every 97th
 * element of all, must name the node that a check of each value alone names, known here from where
 * the specials were put: forward, the first bad node; backward, the first bad node of the sweep. */
enum { MT_FWD = 200, MT_BWD = 60, MT_NSIZES = 20 };
static const int64_t MT_SIZES[MT_NSIZES] = {1,  2,  3,   5,   7,   8,    9,    15,    17,    31,
                                            33, 63, 127, 255, 257, 1023, 4097, 12289, 65537, 100003};
static const tg_dtype MT_DT[3] = {TG_F32, TG_BF16, TG_F16};

/* Bits of a special: 0 NaN, 1 +inf, 2 -inf, 3 a negative NaN with payload. */
static uint32_t mt_special(tg_dtype dt, int kind) {
  static const uint32_t f32[4] = {0x7fc00000u, 0x7f800000u, 0xff800000u, 0xffc00001u};
  static const uint32_t bf16[4] = {0x7fc0u, 0x7f80u, 0xff80u, 0xffc1u};
  static const uint32_t f16[4] = {0x7e00u, 0x7c00u, 0xfc00u, 0xfe01u};
  return dt == TG_F32 ? f32[kind & 3] : dt == TG_BF16 ? bf16[kind & 3] : f16[kind & 3];
}
static void mt_put(void *p, tg_dtype dt, int64_t i, uint32_t bits) {
  if (dt == TG_F32) {
    memcpy((char *)p + 4 * i, &bits, 4);
  } else {
    uint16_t h = (uint16_t)bits;
    memcpy((char *)p + 2 * i, &h, 2);
  }
}
/* n elements of 0.25, the largest finite number at every 97th (finite after the scale by 0.5). */
static void *mt_fill(tg_dtype dt, int64_t n) {
  void *p = malloc((size_t)n * (dt == TG_F32 ? 4 : 2));
  cr_assert(p != NULL);
  uint32_t quarter = dt == TG_F32 ? 0x3e800000u : dt == TG_BF16 ? 0x3e80u : 0x3400u;
  uint32_t maxf = dt == TG_F32 ? 0x7f7fffffu : dt == TG_BF16 ? 0x7f7fu : 0x7bffu;
  for (int64_t i = 0; i < n; i++)
    mt_put(p, dt, i, i % 97 == 50 ? maxf : quarter);
  return p;
}

typedef struct mt_bad {
  int k, last, kind; /* value k gets special `kind` at its first (last = 0) or last element */
} mt_bad;

/* Node #k = scale(x_k, 0.5) for MT_FWD values x_k (dtype and size cycling through 60 pairs). */
static void mt_forward(tg_runtime *rt, const mt_bad *bad, int nbad) {
  tg_tape *t = ts_tape(rt);
  tg_tape_set_check_finite(t, 1, NULL);
  int want = -1;
  for (int k = 0; k < MT_FWD; k++) {
    tg_dtype dt = MT_DT[k % 3];
    int64_t n = MT_SIZES[k % MT_NSIZES];
    void *x = mt_fill(dt, n);
    for (int b = 0; b < nbad; b++)
      if (bad[b].k == k) {
        mt_put(x, dt, bad[b].last ? n - 1 : 0, mt_special(dt, bad[b].kind));
        if (want < 0 || k < want) want = k;
      }
    tg_id xi = ts_input(t, dt, 1, &n, x, 0);
    free(x);
    tg_id y = tg_scale(t, xi, 0.5);
    /* the device's finding waits for the next status check; the host's is immediate */
    if (want < 0 || want == k) cr_assert(y != TG_NO_ID || want == k, "%s", tg_tape_error(t));
  }
  if (want < 0) {
    cr_expect_eq(tg_tape_status(t), TG_OK, "no special, yet: %s", tg_tape_error(t));
  } else {
    char needle[64];
    snprintf(needle, sizeof needle, "node #%d (scale, ", want);
    TS_EXPECT_STICKY(t, TG_ERR_NONFINITE, needle);
    cr_expect(strstr(tg_tape_error(t), "produced") != NULL, "%s", tg_tape_error(t));
  }
  tg_tape_destroy(t);
}

/* MT_BWD branches l_k = scale(sum(mul(a_k, b_k)), sc) added up; in a bad branch one element has
 * a = big, b = 1 / big (y = 1, forward finite) and dL/db = sc * big overflows: the mul node (#0 for
 * k = 0, else #4k - 1) computes the first non-finite gradient. */
static void mt_backward(tg_runtime *rt, tg_dtype dt, const int *badk, int nbad, int last) {
  tg_tape *t = ts_tape(rt);
  tg_tape_set_check_finite(t, 1, NULL);
  double big = dt == TG_F16 ? 250 : 1e30, sc = dt == TG_F16 ? 300 : 1e10;
  tg_id acc = TG_NO_ID;
  int want = -1;
  for (int k = 0; k < MT_BWD; k++) {
    int64_t n = MT_SIZES[k % MT_NSIZES];
    double *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    cr_assert(a && b);
    for (int64_t i = 0; i < n; i++)
      a[i] = 1, b[i] = 1e-5;
    for (int q = 0; q < nbad; q++)
      if (badk[q] == k) {
        a[last ? n - 1 : 0] = big, b[last ? n - 1 : 0] = 1 / big;
        int node = k == 0 ? 0 : 4 * k - 1; /* its mul */
        if (node > want) want = node;
      }
    void *ac = ts_convert(a, (size_t)n, dt), *bc = ts_convert(b, (size_t)n, dt);
    tg_id ai = ts_input(t, dt, 1, &n, ac, TG_REQUIRES_GRAD), bi = ts_param(t, dt, 1, &n, bc);
    free(a), free(b), free(ac), free(bc);
    tg_id l = tg_scale(t, tg_sum(t, tg_mul(t, ai, bi)), sc);
    acc = k ? tg_add(t, acc, l) : l;
  }
  cr_assert_eq(tg_tape_status(t), TG_OK, "forward: %s", tg_tape_error(t));
  tg_status s = tg_tape_backward(t, acc);
  if (want < 0) {
    cr_expect_eq(s, TG_OK, "%s: %s", tg_dtype_name(dt), tg_tape_error(t));
  } else {
    char needle[64];
    snprintf(needle, sizeof needle, "node #%d (mul, ", want);
    cr_expect_eq(s, TG_ERR_NONFINITE, "%s", tg_dtype_name(dt));
    TS_EXPECT_STICKY(t, TG_ERR_NONFINITE, needle);
    cr_expect(strstr(tg_tape_error(t), "computed") != NULL, "%s", tg_tape_error(t));
  }
  tg_tape_destroy(t);
}

/* Under a sanitizer (ts_under_sanitizer) every 10th forward case and the first and last backward
 * branch alone, the pairs and the launch-boundary cases all kept. */
static void mt_all(void) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  const int quick = ts_under_sanitizer();
  mt_forward(rt, NULL, 0);
  const mt_bad two[][2] = {{{MT_FWD - 1, 1, 1}, {MT_FWD - 1, 1, 1}},
                           {{0, 0, 0}, {0, 0, 0}},
                           {{159, 1, 2}, {159, 1, 2}},
                           {{160, 0, 0}, {161, 1, 3}},
                           {{190, 1, 1}, {170, 0, 0}},
                           {{150, 0, 0}, {3, 1, 2}}};
  for (size_t c = 0; c < sizeof two / sizeof two[0]; c++)
    mt_forward(rt, two[c], 2);
  for (int k = 100; k < 160; k += quick ? 10 : 1) /* every (dtype, size) pair, first and last element, every kind */
    for (int last = 0; last < 2; last++) {
      mt_bad one = {k, last, k + last};
      mt_forward(rt, &one, 1);
    }
  const int singles[] = {0, 1, 2, 19, 20, 39, 40, 58, MT_BWD - 1}, pair[2] = {5, 40}, pair2[2] = {MT_BWD - 1, 2};
  for (int d = 0; d < 3; d++) {
    mt_backward(rt, MT_DT[d], NULL, 0, 0);
    for (size_t q = 0; q < sizeof singles / sizeof singles[0]; q++)
      for (int last = 0; last < 2; last++)
        if (!quick || (q == 0 && !last) || (q + 1 == sizeof singles / sizeof singles[0] && last))
          mt_backward(rt, MT_DT[d], &singles[q], 1, last);
    mt_backward(rt, MT_DT[d], pair, 2, 1);
    mt_backward(rt, MT_DT[d], pair2, 2, 0);
  }
  tg_runtime_destroy(rt);
}

Test(anomaly, cuda_many_buffers_batched) { mt_all(); }

/* The same with a launch per buffer (the batch byte limit at 1 byte; read once per process, and
 * Criterion runs each test in a process of its own): the per-buffer answer the batches must match. */
Test(anomaly, cuda_many_buffers_one_per_launch) {
  setenv("TIGA_CHECK_FINITE_BATCH_BYTES", "1", 1);
  mt_all();
}

/* ------------------------------------------------------------ checks beside the compute
 * On a device runtime the checks run on a check stream of their own; the main stream waits for it
 * before a node adds into a gradient still being checked and before step memory is reused. A
 * residual chain x_{l+1} = x_l + scale(mul(x_l, w_l), 0.5) (nodes #3l mul, #3l+1 scale, #3l+2 add;
 * x_l's gradient is written by the add, then added into by the mul: the wait that matters), of 4 MB
 * values (several launches per sweep), loss = 1e10 sum(x_L), four steps on one tape (memory reused):
 *   0: finite;
 *   1: w_OV_JF[e] = inf: node #3 OV_JF (mul) produced a non-finite output;
 *   2: x_0[e] = 1e-30, w_OV_JB[e] = 1e30, w_l[e] = 0 elsewhere: the forward is finite (x_{l+1}[e] =
 *      0.5), but the mul adds 0.5e10 * 1e30 = inf into x_OV_JB's gradient after the add wrote a
 *      finite one there: node #3 OV_JB (mul) computed it (a check that read the gradient after the
 *      mul would name the add, #3 OV_JB + 2);
 *   3: finite again: the same results as step 0.
 * The same steps with the checks on the main stream (TIGA_CHECK_FINITE_OVERLAP=0 when the runtime
 * is made) and without anomaly mode must give the same messages and bitwise the same gradients. */
#define OV_N ((int64_t)(1 << 20) + 3)
#define OV_L 12
#define OV_JF 7
#define OV_JB 4
#define OV_E (OV_N - 2)

typedef struct ov_run {
  tg_status st[4];
  char msg[4][TGI_MSG_CAP];
  double loss[2];    /* steps 0 and 3 */
  float *grad[2][3]; /* steps 0 and 3: d/dw_0, d/dw_{L-1}, d/dx_0 */
} ov_run;

static void ov_step(tg_tape *t, const tg_id *w, int step, ov_run *r) {
  float *x = malloc((size_t)OV_N * sizeof *x), *wv = malloc((size_t)OV_N * sizeof *wv);
  cr_assert(x && wv);
  for (int64_t i = 0; i < OV_N; i++)
    x[i] = 0.5f + (float)(i % 17) / 64;
  if (step == 2) x[OV_E] = 1e-30f;
  for (int l = 0; l < OV_L; l++) {
    for (int64_t i = 0; i < OV_N; i++)
      wv[i] = 0.25f + (float)((i + l) % 13) / 128;
    if (step == 1 && l == OV_JF) wv[OV_E] = INFINITY;
    if (step == 2) wv[OV_E] = l == OV_JB ? 1e30f : 0;
    cr_assert_eq(tg_tape_write(t, w[l], wv, (size_t)OV_N * sizeof *wv), TG_OK, "%s", tg_tape_error(t));
  }
  cr_assert_eq(tg_tape_zero_grad(t), TG_OK, "%s", tg_tape_error(t));
  const int64_t n = OV_N;
  tg_id x0 = ts_input(t, TG_F32, 1, &n, x, TG_REQUIRES_GRAD), xl = x0;
  for (int l = 0; l < OV_L; l++)
    xl = tg_add(t, xl, tg_scale(t, tg_mul(t, xl, w[l]), 0.5));
  tg_id L = tg_scale(t, tg_sum(t, xl), 1e10);
  r->st[step] = tg_tape_status(t);
  if (r->st[step] == TG_OK) r->st[step] = tg_tape_backward(t, L);
  snprintf(r->msg[step], sizeof r->msg[step], "%s", r->st[step] ? tg_tape_error(t) : "");
  if ((step == 0 || step == 3) && r->st[step] == TG_OK) {
    int k = step == 3;
    ts_read(t, L, &r->loss[k], 1);
    const tg_id of[3] = {w[0], w[OV_L - 1], x0};
    for (int q = 0; q < 3; q++) {
      r->grad[k][q] = malloc((size_t)OV_N * sizeof(float));
      cr_assert(r->grad[k][q]);
      cr_assert_eq(tg_tape_read_grad(t, of[q], r->grad[k][q], (size_t)OV_N * sizeof(float)), TG_OK, "%s",
                   tg_tape_error(t));
    }
  }
  cr_assert_eq(tg_tape_reset(t), TG_OK, "%s", tg_tape_error(t));
  free(x);
  free(wv);
}

/* The four steps on a fresh runtime; overlap: the checks' own stream (NULL: as the environment says). */
static void ov_steps(const char *overlap, int check, ov_run *r) {
  if (overlap) setenv("TIGA_CHECK_FINITE_OVERLAP", overlap, 1);
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  unsetenv("TIGA_CHECK_FINITE_OVERLAP");
  if (overlap) cr_assert_eq(rt->nf_side != NULL, strcmp(overlap, "0") != 0, "check stream made as asked");
  tg_tape *t = ts_tape(rt);
  cr_assert_eq(tg_tape_set_check_finite(t, check, NULL), TG_OK);
  float *w0 = calloc((size_t)OV_N, sizeof *w0);
  cr_assert(w0);
  const int64_t n = OV_N;
  tg_id w[OV_L];
  for (int l = 0; l < OV_L; l++)
    w[l] = ts_param(t, TG_F32, 1, &n, w0);
  free(w0);
  memset(r, 0, sizeof *r);
  for (int step = 0; step < 4; step++)
    ov_step(t, w, step, r);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

static void ov_free(ov_run *r) {
  for (int k = 0; k < 2; k++)
    for (int q = 0; q < 3; q++)
      free(r->grad[k][q]);
}

/* The clean steps of a and b (and steps 0 and 3 of a) agree bitwise. */
static void ov_same_results(const ov_run *a, const ov_run *b, const char *what) {
  static const char *names[3] = {"dL/dw_0", "dL/dw_11", "dL/dx_0"};
  for (int k = 0; k < 2; k++) {
    cr_expect_eq(a->loss[k], b->loss[k], "%s: step %d loss %.9g vs %.9g", what, 3 * k, a->loss[k], b->loss[k]);
    for (int q = 0; q < 3; q++)
      if (a->grad[k][q] && b->grad[k][q])
        cr_expect(memcmp(a->grad[k][q], b->grad[k][q], (size_t)OV_N * sizeof(float)) == 0, "%s: step %d: %s differs",
                  what, 3 * k, names[q]);
      else
        cr_expect(0, "%s: step %d: %s missing", what, 3 * k, names[q]);
  }
  for (int q = 0; q < 3; q++)
    if (a->grad[0][q] && a->grad[1][q])
      cr_expect(memcmp(a->grad[0][q], a->grad[1][q], (size_t)OV_N * sizeof(float)) == 0,
                "%s: step 3 (after reuse) differs from step 0 in %s", what, names[q]);
}

static void ov_check(void) {
  ov_run on, off, none;
  ov_steps("1", 1, &on);
  char want[2][64];
  snprintf(want[0], sizeof want[0], "node #%d (mul, ", 3 * OV_JF);
  snprintf(want[1], sizeof want[1], "node #%d (mul, ", 3 * OV_JB);
  cr_expect_eq(on.st[0], TG_OK, "step 0: %s", on.msg[0]);
  cr_expect_eq(on.st[1], TG_ERR_NONFINITE, "step 1: %s", on.msg[1]);
  cr_expect(strstr(on.msg[1], want[0]) && strstr(on.msg[1], "produced"), "step 1: '%s' lacks '%s' produced", on.msg[1],
            want[0]);
  cr_expect_eq(on.st[2], TG_ERR_NONFINITE, "step 2: %s", on.msg[2]);
  cr_expect(strstr(on.msg[2], want[1]) && strstr(on.msg[2], "computed"), "step 2: '%s' lacks '%s' computed", on.msg[2],
            want[1]);
  cr_expect_eq(on.st[3], TG_OK, "step 3: %s", on.msg[3]);
  ov_steps("0", 1, &off);
  for (int s = 0; s < 4; s++) {
    cr_expect_eq(on.st[s], off.st[s], "step %d: %s beside vs %s in order", s, tg_status_string(on.st[s]),
                 tg_status_string(off.st[s]));
    cr_expect_str_eq(on.msg[s], off.msg[s], "step %d: messages differ", s);
  }
  ov_same_results(&on, &off, "check stream vs main stream");
  ov_steps("1", 0, &none);
  ov_same_results(&on, &none, "anomaly mode vs off");
  ov_free(&on);
  ov_free(&off);
  ov_free(&none);
}

Test(anomaly, cuda_check_stream_names_the_node_across_steps) { ov_check(); }

/* The same with a launch (and on the check stream, a wait point) per buffer. */
Test(anomaly, cuda_check_stream_one_per_launch) {
  setenv("TIGA_CHECK_FINITE_BATCH_BYTES", "1", 1);
  ov_check();
}

/* ------------------------------------------------------------ found-inf in the optimizers */

/* L = sum(w * w * k); SGD with lr so large that w grows 19x per step. Before: NaN from a few steps
 * on with every status TG_OK. Now the first step whose gradient overflows is skipped and reported. */
Test(found_inf, sgd_divergence_is_reported) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  float w0[3] = {1, -2, 3};
  tg_id w = ts_param(t, TG_F32, 1, S3, w0);
  tg_sgd_options o;
  tg_sgd_options_init(&o);
  o.lr = 10;
  int step = 0;
  tg_status s = TG_OK;
  double before[3], after[3];
  for (; step < 200 && s == TG_OK; step++) {
    tg_tape_reset(t);
    tg_tape_zero_grad(t);
    tg_id L = tg_sum(t, tg_mul(t, w, w));
    cr_assert_eq(tg_tape_backward(t, L), TG_OK, "%s", tg_tape_error(t));
    ts_read(t, w, before, 3);
    s = tg_sgd_step(t, &o);
  }
  cr_expect_eq(s, TG_ERR_NONFINITE, "divergence was never reported");
  cr_expect(strstr(tg_tape_error(t), "parameter 0") && strstr(tg_tape_error(t), "skipped"), "%s", tg_tape_error(t));
  ts_read(t, w, after, 3);
  for (int i = 0; i < 3; i++)
    cr_expect(before[i] == after[i], "w[%d]: %g -> %g: the skipped step changed the parameter", i, before[i], after[i]);
  cr_log_info("SGD lr 10: step %d reported", step);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* Before: one inf gradient poisoned AdamW's moments forever. Now the step changes nothing: the next
 * finite step gives bit for bit what a fresh optimizer gives. */
static void adam_once(tg_tape *t, tg_id w, const double *xv, tg_status want) {
  tg_tape_reset(t);
  tg_tape_zero_grad(t);
  tg_id x = ts_input(t, TG_F64, 1, S3, xv, 0);
  tg_id L = tg_sum(t, tg_mul(t, x, w));
  cr_assert_eq(tg_tape_backward(t, L), TG_OK, "%s", tg_tape_error(t));
  tg_adamw_options o;
  tg_adamw_options_init(&o);
  o.lr = 0.1;
  cr_expect_eq(tg_adamw_step(t, &o), want, "%s", tg_tape_error(t));
}

Test(found_inf, adamw_skips_and_keeps_state) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *a = ts_tape(rt), *b = ts_tape(rt);
  double w0[3] = {1, 2, 3}, good[3] = {0.5, -1, 2}, bad[3] = {0.5, INFINITY, 2}, nan3[3] = {NAN, 0, 0};
  tg_id wa = ts_param(a, TG_F64, 1, S3, w0), wb = ts_param(b, TG_F64, 1, S3, w0);
  /* a: good, bad, nan, good; b: good, good */
  adam_once(a, wa, good, TG_OK);
  adam_once(a, wa, bad, TG_ERR_NONFINITE);
  cr_expect(strstr(tg_tape_error(a), "no parameter, moment or step count changed") != NULL, "%s", tg_tape_error(a));
  adam_once(a, wa, nan3, TG_ERR_NONFINITE);
  adam_once(a, wa, good, TG_OK);
  adam_once(b, wb, good, TG_OK);
  adam_once(b, wb, good, TG_OK);
  double pa[3], pb[3];
  ts_read(a, wa, pa, 3);
  ts_read(b, wb, pb, 3);
  for (int i = 0; i < 3; i++)
    cr_expect_eq(pa[i], pb[i], "w[%d]: %.17g after skipped steps vs %.17g", i, pa[i], pb[i]);
  tgi_value *va = tgi_slot(a, tgi_id_slot(wa)), *vb = tgi_slot(b, tgi_id_slot(wb));
  cr_expect_eq(va->opt_step, 2);
  cr_expect_eq(memcmp(va->opt_m.h, vb->opt_m.h, 24), 0, "first moments differ");
  cr_expect_eq(memcmp(va->opt_v.h, vb->opt_v.h, 24), 0, "second moments differ");
  tg_tape_destroy(a);
  tg_tape_destroy(b);
  tg_runtime_destroy(rt);
}

/* The same on CUDA, where the found-inf flag is read back per step and zero-filled only when the
 * last read did not leave it at 0: after a skipped step the next finite steps go through, and
 * the trajectory equals one without the skipped step. */
static void adam_once_cuda(tg_tape *t, tg_id w, const float *xv, tg_status want) {
  tg_tape_reset(t);
  tg_tape_zero_grad(t);
  tg_tape_set_provider(t, TG_PROVIDER_CUDA, NULL);
  tg_id x = ts_input(t, TG_F32, 1, S3, xv, 0);
  tg_id L = tg_sum(t, tg_mul(t, x, w));
  cr_assert_eq(tg_tape_backward(t, L), TG_OK, "%s", tg_tape_error(t));
  tg_adamw_options o;
  tg_adamw_options_init(&o);
  o.lr = 0.1;
  cr_expect_eq(tg_adamw_step(t, &o), want, "%s", tg_tape_error(t));
}

Test(found_inf, cuda_adamw_skips_then_continues) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  tg_tape *a = ts_tape(rt), *b = ts_tape(rt);
  float w0[3] = {1, 2, 3}, good[3] = {0.5f, -1, 2}, bad[3] = {0.5f, INFINITY, 2}, nan3[3] = {NAN, 0, 0};
  tg_id wa = ts_param(a, TG_F32, 1, S3, w0), wb = ts_param(b, TG_F32, 1, S3, w0);
  /* a: good, good, bad, nan, good, good; b: four good */
  adam_once_cuda(a, wa, good, TG_OK);
  adam_once_cuda(a, wa, good, TG_OK);
  adam_once_cuda(a, wa, bad, TG_ERR_NONFINITE);
  cr_expect(strstr(tg_tape_error(a), "parameter 0") != NULL, "%s", tg_tape_error(a));
  adam_once_cuda(a, wa, nan3, TG_ERR_NONFINITE);
  adam_once_cuda(a, wa, good, TG_OK);
  adam_once_cuda(a, wa, good, TG_OK);
  for (int k = 0; k < 4; k++)
    adam_once_cuda(b, wb, good, TG_OK);
  double pa[3], pb[3];
  ts_read(a, wa, pa, 3);
  ts_read(b, wb, pb, 3);
  for (int i = 0; i < 3; i++)
    cr_expect_eq(pa[i], pb[i], "w[%d]: %.9g after skipped steps vs %.9g", i, pa[i], pb[i]);
  tg_tape_destroy(a);
  tg_tape_destroy(b);
  tg_runtime_destroy(rt);
}

/* ------------------------------------------------------------ clip */

Test(clip, error_if_nonfinite) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double w0[3] = {1, 2, 3}, x[3] = {1, INFINITY, 1}, g[3];
  tg_id w = ts_param(t, TG_F64, 1, S3, w0);
  tg_id xi = ts_input(t, TG_F64, 1, S3, x, 0);
  cr_assert_eq(tg_tape_backward(t, tg_sum(t, tg_mul(t, xi, w))), TG_OK, "%s", tg_tape_error(t));
  tg_clip_options o;
  tg_clip_options_init(&o);
  cr_expect_eq(o.max_norm, 1.0);
  cr_expect_eq(o.error_if_nonfinite, 0);
  o.error_if_nonfinite = 1;
  double norm = 0;
  TS_EXPECT_STATUS(tg_clip_grad_norm_with(t, &o, &norm), TG_ERR_NONFINITE, t, "error_if_nonfinite");
  cr_expect(isinf(norm));
  ts_read_grad(t, w, g, 3);
  cr_expect(g[0] == 1 && isinf(g[1]) && g[2] == 1, "gradients changed");
  o.error_if_nonfinite = 0;
  cr_expect_eq(tg_clip_grad_norm_with(t, &o, &norm), TG_OK);
  TS_EXPECT_STATUS(tg_clip_grad_norm_with(t, NULL, &norm), TG_ERR_INVALID_ARGUMENT, t, "opts");
  tg_clip_options z = {0};
  TS_EXPECT_STATUS(tg_clip_grad_norm_with(t, &z, &norm), TG_ERR_INVALID_ARGUMENT, t, "struct_size is 0");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}
