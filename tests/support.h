/* Shared helpers for the Criterion tests. */
#ifndef TIGA_TEST_SUPPORT_H
#define TIGA_TEST_SUPPORT_H
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tiga.h"

/* Deterministic test RNG (splitmix64), independent of the library's own RNG. */
uint64_t ts_next(uint64_t *state);
/* n uniforms in [lo, hi). */
void ts_uniform(double *x, size_t n, uint64_t seed, double lo, double hi);
void ts_uniform_f32(float *x, size_t n, uint64_t seed, double lo, double hi);

/* numel * dtype size of a shape (the data_bytes of a matching buffer). */
size_t ts_bytes(tg_dtype dt, int ndim, const int64_t *shape);

/* Options in the tests' shorthand: tg_init_options with a = gain for XAVIER kinds (0: 1);
 * attention options with scale 0 meaning TG_SCALE_AUTO and keep 0 meaning 1 (no dropout). */
tg_init_options ts_init(tg_init_kind kind, double a, double b, uint64_t seed);
tg_attention_options ts_attn_opts(double scale, double prune, tg_id *lse_out, double keep);
tg_mha_options ts_mha_opts(int heads_q, int heads_kv, int causal);

/* A host runtime; fails the test if it cannot be created. */
tg_runtime *ts_host_runtime(void);
/* A CUDA runtime on device 0, or skips the test with the reason when there is none. */
tg_runtime *ts_cuda_runtime_or_skip(void);
tg_tape *ts_tape(tg_runtime *rt);
/* Whether TIGA_TEST_UNDER_SANITIZER is set (non-empty, not "0"): the few tests that run thousands
 * of steps or tapes (test_nonfinite's many-buffer walks, test_charlm_f16's training) then run a
 * subset of their cases or steps, so compute-sanitizer (10-100x slower) finishes them; the full
 * runs, with every assertion, are the plain suite's. */
int ts_under_sanitizer(void);

/* Creates an input value (asserts success). */
tg_id ts_input(tg_tape *t, tg_dtype dt, int ndim, const int64_t *shape, const void *data, unsigned flags);
tg_id ts_param(tg_tape *t, tg_dtype dt, int ndim, const int64_t *shape, const void *data);
/* Reads a value as doubles (f32 or f64 values), asserting success; returns numel. */
int64_t ts_read(tg_tape *t, tg_id id, double *dst, int64_t cap);
int64_t ts_read_grad(tg_tape *t, tg_id id, double *dst, int64_t cap);

/* max |a - b| / (atol + rtol |b|) over n elements; <= 1 means close. */
double ts_close_ratio(const double *a, const double *b, size_t n, double atol, double rtol);
/* ||a - b|| / ||b|| */
double ts_rel_l2(const double *a, const double *b, size_t n);

/* Asserts a and b are elementwise close. */
#define TS_EXPECT_CLOSE(a, b, n, atol, rtol)                                                                           \
  do {                                                                                                                 \
    double ts_r_ = ts_close_ratio((a), (b), (n), (atol), (rtol));                                                      \
    cr_expect(ts_r_ <= 1.0, "%s vs %s: worst error is %.3g x tolerance", #a, #b, ts_r_);                               \
  } while (0)

/* Asserts that the tape holds sticky status `st` and its message contains `needle`. */
#define TS_EXPECT_STICKY(t, st, needle)                                                                                \
  do {                                                                                                                 \
    cr_expect_eq(tg_tape_status(t), (st), "status %s, expected %s (msg: %s)", tg_status_string(tg_tape_status(t)),     \
                 tg_status_string(st), tg_tape_error(t));                                                              \
    cr_expect(strstr(tg_tape_error(t), (needle)) != NULL, "message '%s' lacks '%s'", tg_tape_error(t), (needle));      \
  } while (0)

/* Asserts a returned status and that the tape's message contains `needle`. */
#define TS_EXPECT_STATUS(expr, st, t, needle)                                                                          \
  do {                                                                                                                 \
    tg_status ts_s_ = (expr);                                                                                          \
    cr_expect_eq(ts_s_, (st), "%s returned %s, expected %s (msg: %s)", #expr, tg_status_string(ts_s_),                 \
                 tg_status_string(st), tg_tape_error(t));                                                              \
    cr_expect(strstr(tg_tape_error(t), (needle)) != NULL, "message '%s' lacks '%s'", tg_tape_error(t), (needle));      \
  } while (0)

/* Runs tg_gradcheck on a host runtime with default options and asserts it passes. */
void ts_gradcheck(tg_gradcheck_fn fn, void *user, int n, const tg_gradcheck_input *inputs);
/* Builds a tg_gradcheck_input (f64, differentiable unless dt is not F64). */
tg_gradcheck_input ts_gc_input(tg_dtype dt, int ndim, const int64_t *shape, const void *data);

/* Host-side conversions for building f16 / bf16 test inputs (round to nearest even). */
uint16_t ts_f32_to_f16(float f);
float ts_f16_to_f32(uint16_t h);
uint16_t ts_f32_to_bf16(float f);
float ts_bf16_to_f32(uint16_t b);
/* Converts n doubles to dt (f32, f64, f16, bf16) into a new malloc'd buffer. */
void *ts_convert(const double *x, size_t n, tg_dtype dt);

/* CUDA-vs-host check. Runs fn twice: on a HOST runtime with the inputs as given (f64), and on a
 * CUDA runtime (device 0) with provider `prov` and every differentiable input converted to `dt`.
 * The result y (any shape) is compared by ||y_cuda - y_host|| / ||y_host|| <= tol; then both
 * tapes run backward from sum(cast(y, f32 or f64) * R) with the same random R, and every
 * differentiable input's gradient is compared the same way. Skips (visible reason) without a
 * GPU. The worst relative errors are written to *out_err / *grad_err when not NULL. */
void ts_check_cuda_vs_host(tg_gradcheck_fn fn, void *user, int n, const tg_gradcheck_input *inputs, tg_dtype dt,
                           tg_provider prov, double tol);

#endif
