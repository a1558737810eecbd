#include "support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

uint64_t ts_next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void ts_uniform(double *x, size_t n, uint64_t seed, double lo, double hi) {
  uint64_t s = seed;
  for (size_t i = 0; i < n; i++)
    x[i] = lo + (hi - lo) * (double)(ts_next(&s) >> 11) * 0x1.0p-53;
}

void ts_uniform_f32(float *x, size_t n, uint64_t seed, double lo, double hi) {
  uint64_t s = seed;
  for (size_t i = 0; i < n; i++)
    x[i] = (float)(lo + (hi - lo) * (double)(ts_next(&s) >> 11) * 0x1.0p-53);
}

tg_runtime *ts_host_runtime(void) {
  tg_runtime *rt = NULL;
  tg_status s = tg_runtime_create_host(&rt);
  cr_assert_eq(s, TG_OK, "tg_runtime_create_host: %s", tg_last_error());
  return rt;
}

tg_runtime *ts_cuda_runtime_or_skip(void) {
  tg_runtime *rt = NULL;
  tg_status s = tg_runtime_create_cuda(0, &rt);
  if (s != TG_OK) cr_skip_test("no CUDA device: %s", tg_last_error());
  return rt;
}

int ts_under_sanitizer(void) {
  const char *e = getenv("TIGA_TEST_UNDER_SANITIZER");
  return e && *e && strcmp(e, "0") != 0;
}

tg_tape *ts_tape(tg_runtime *rt) {
  tg_tape *t = NULL;
  tg_status s = tg_tape_create(rt, &t);
  cr_assert_eq(s, TG_OK, "tg_tape_create: %s", tg_last_error());
  return t;
}

tg_id ts_input(tg_tape *t, tg_dtype dt, int ndim, const int64_t *shape, const void *data, unsigned flags) {
  tg_id id = TG_NO_ID;
  tg_status s = tg_tape_input(t, dt, ndim, shape, data, ts_bytes(dt, ndim, shape), flags, &id);
  cr_assert_eq(s, TG_OK, "tg_tape_input: %s", tg_tape_error(t));
  return id;
}

tg_id ts_param(tg_tape *t, tg_dtype dt, int ndim, const int64_t *shape, const void *data) {
  tg_id id = TG_NO_ID;
  tg_status s = tg_tape_parameter(t, dt, ndim, shape, data, ts_bytes(dt, ndim, shape), 0, &id);
  cr_assert_eq(s, TG_OK, "tg_tape_parameter: %s", tg_tape_error(t));
  return id;
}

static int64_t read_any(tg_tape *t, tg_id id, double *dst, int64_t cap, int grad) {
  cr_assert_neq(id, TG_NO_ID, "reading TG_NO_ID (tape error: %s)", tg_tape_error(t));
  int64_t n = 0;
  tg_dtype dt;
  cr_assert_eq(tg_tape_numel(t, id, &n), TG_OK, "%s", tg_tape_error(t));
  cr_assert_eq(tg_tape_dtype(t, id, &dt), TG_OK, "%s", tg_tape_error(t));
  cr_assert(n <= cap, "value has %lld elements, buffer %lld", (long long)n, (long long)cap);
  size_t bytes = (size_t)n * tg_dtype_size(dt);
  void *tmp = malloc(bytes);
  tg_status s = grad ? tg_tape_read_grad(t, id, tmp, bytes) : tg_tape_read(t, id, tmp, bytes);
  cr_assert_eq(s, TG_OK, "read: %s", tg_tape_error(t));
  for (int64_t i = 0; i < n; i++) {
    if (dt == TG_F32)
      dst[i] = ((float *)tmp)[i];
    else if (dt == TG_F64)
      dst[i] = ((double *)tmp)[i];
    else if (dt == TG_I32)
      dst[i] = ((int32_t *)tmp)[i];
    else
      cr_assert_fail("ts_read: dtype %s not handled", tg_dtype_name(dt));
  }
  free(tmp);
  return n;
}

int64_t ts_read(tg_tape *t, tg_id id, double *dst, int64_t cap) { return read_any(t, id, dst, cap, 0); }
int64_t ts_read_grad(tg_tape *t, tg_id id, double *dst, int64_t cap) { return read_any(t, id, dst, cap, 1); }

double ts_close_ratio(const double *a, const double *b, size_t n, double atol, double rtol) {
  double worst = 0;
  for (size_t i = 0; i < n; i++) {
    if (isnan(a[i]) || isnan(b[i])) return INFINITY;
    double r = fabs(a[i] - b[i]) / (atol + rtol * fabs(b[i]));
    if (r > worst) worst = r;
  }
  return worst;
}

double ts_rel_l2(const double *a, const double *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    if (isnan(a[i]) || isnan(b[i])) return INFINITY;
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

void ts_gradcheck(tg_gradcheck_fn fn, void *user, int n, const tg_gradcheck_input *inputs) {
  tg_runtime *rt = ts_host_runtime();
  tg_gradcheck_result r;
  tg_gradcheck_result_init(&r);
  tg_status s = tg_gradcheck(rt, fn, user, n, inputs, NULL, &r);
  cr_expect_eq(s, TG_OK, "gradcheck: %s: %s", tg_status_string(s), tg_runtime_error(rt));
  cr_expect(r.checked > 0 || s != TG_OK, "gradcheck compared no element");
  tg_runtime_destroy(rt);
}

tg_gradcheck_input ts_gc_input(tg_dtype dt, int ndim, const int64_t *shape, const void *data) {
  tg_gradcheck_input in;
  tg_gradcheck_input_init(&in);
  in.dtype = dt;
  in.ndim = ndim;
  for (int i = 0; i < ndim; i++)
    in.shape[i] = shape[i];
  in.data = data;
  in.data_bytes = ts_bytes(dt, ndim, shape);
  in.differentiable = dt == TG_F64;
  return in;
}

size_t ts_bytes(tg_dtype dt, int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= shape[i];
  return (size_t)n * tg_dtype_size(dt);
}

uint16_t ts_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

float ts_bf16_to_f32(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

uint16_t ts_f32_to_f16(float f) {
  /* exact via double arithmetic: scale into the half grid and round to nearest even */
  double v = f;
  uint16_t sign = v < 0 ? 0x8000 : 0;
  v = fabs(v);
  if (isnan(f)) return 0x7e00;
  if (v >= 65520.0) return sign | 0x7c00;
  if (v < 0x1.0p-14) { /* subnormal: multiples of 2^-24 */
    double q = nearbyint(v * 0x1.0p24);
    return sign | (uint16_t)q;
  }
  int e;
  double m = frexp(v, &e);          /* v = m 2^e, m in [0.5, 1) */
  double q = nearbyint(m * 2048.0); /* 11 bits */
  if (q >= 2048.0) {
    q /= 2;
    e++;
  }
  int exp = e - 1 + 15;
  if (exp >= 31) return sign | 0x7c00;
  return sign | (uint16_t)(exp << 10) | (uint16_t)((int)q - 1024);
}

float ts_f16_to_f32(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
  return (float)((h & 0x8000) ? -v : v);
}

void *ts_convert(const double *x, size_t n, tg_dtype dt) {
  void *out = malloc(n * tg_dtype_size(dt) + 1);
  for (size_t i = 0; i < n; i++) {
    switch (dt) {
    case TG_F32: ((float *)out)[i] = (float)x[i]; break;
    case TG_F64: ((double *)out)[i] = x[i]; break;
    case TG_F16: ((uint16_t *)out)[i] = ts_f32_to_f16((float)x[i]); break;
    case TG_BF16: ((uint16_t *)out)[i] = ts_f32_to_bf16((float)x[i]); break;
    default: cr_assert_fail("ts_convert: dtype %s", tg_dtype_name(dt));
    }
  }
  return out;
}

/* Reads any float value as doubles into a new buffer; *n receives numel. */
static double *read_doubles(tg_tape *t, tg_id id, int grad, int64_t *n) {
  tg_dtype dt;
  cr_assert_eq(tg_tape_numel(t, id, n), TG_OK, "%s", tg_tape_error(t));
  cr_assert_eq(tg_tape_dtype(t, id, &dt), TG_OK, "%s", tg_tape_error(t));
  size_t bytes = (size_t)*n * tg_dtype_size(dt);
  void *raw = malloc(bytes);
  tg_status s = grad ? tg_tape_read_grad(t, id, raw, bytes) : tg_tape_read(t, id, raw, bytes);
  cr_assert_eq(s, TG_OK, "read: %s", tg_tape_error(t));
  double *out = malloc((size_t)*n * sizeof(double));
  for (int64_t i = 0; i < *n; i++) {
    switch (dt) {
    case TG_F32: out[i] = ((float *)raw)[i]; break;
    case TG_F64: out[i] = ((double *)raw)[i]; break;
    case TG_F16: out[i] = ts_f16_to_f32(((uint16_t *)raw)[i]); break;
    case TG_BF16: out[i] = ts_bf16_to_f32(((uint16_t *)raw)[i]); break;
    default: cr_assert_fail("read_doubles: dtype %s", tg_dtype_name(dt));
    }
  }
  free(raw);
  return out;
}

typedef struct {
  double *y;
  int64_t ny;
  double **g;
} run_out;

static void run_once(tg_runtime *rt, tg_provider prov, tg_gradcheck_fn fn, void *user, int n,
                     const tg_gradcheck_input *inputs, tg_dtype dt, const double *R, int64_t nR, run_out *o) {
  tg_tape *t = ts_tape(rt);
  tg_tape_set_provider(t, prov, NULL);
  tg_id ids[16];
  cr_assert(n <= 16);
  for (int i = 0; i < n; i++) {
    const tg_gradcheck_input *in = &inputs[i];
    int64_t numel = 1;
    for (int d = 0; d < in->ndim; d++)
      numel *= in->shape[d];
    if (in->differentiable) {
      void *conv = ts_convert(in->data, (size_t)numel, dt);
      ids[i] = ts_input(t, dt, in->ndim, in->shape, conv, TG_REQUIRES_GRAD);
      free(conv);
    } else {
      ids[i] = ts_input(t, in->dtype, in->ndim, in->shape, in->data, 0);
    }
  }
  tg_id y = fn(t, ids, user);
  cr_assert_eq(tg_tape_status(t), TG_OK, "provider %s: %s", tg_provider_name(prov), tg_tape_error(t));
  o->y = read_doubles(t, y, 0, &o->ny);
  if (R) {
    cr_assert_eq(nR, o->ny);
    tg_dtype ydt;
    tg_tape_dtype(t, y, &ydt);
    tg_dtype wide = ydt == TG_F64 ? TG_F64 : TG_F32;
    int ndim;
    int64_t shape[TG_MAX_DIMS];
    tg_tape_shape(t, y, &ndim, shape, TG_MAX_DIMS);
    void *rc = ts_convert(R, (size_t)nR, wide);
    tg_id r = ts_input(t, wide, ndim, shape, rc, 0);
    free(rc);
    tg_id yw = ydt == wide ? y : tg_cast(t, y, wide);
    tg_id loss = tg_sum(t, tg_mul(t, yw, r));
    cr_assert_eq(tg_tape_status(t), TG_OK, "loss: %s", tg_tape_error(t));
    cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "backward on %s: %s", tg_provider_name(prov), tg_tape_error(t));
    o->g = calloc((size_t)n, sizeof(double *));
    for (int i = 0; i < n; i++) {
      if (!inputs[i].differentiable) continue;
      int64_t ng;
      o->g[i] = read_doubles(t, ids[i], 1, &ng);
    }
  }
  tg_tape_destroy(t);
}

void ts_check_cuda_vs_host(tg_gradcheck_fn fn, void *user, int n, const tg_gradcheck_input *inputs, tg_dtype dt,
                           tg_provider prov, double tol) {
  tg_runtime *crt = ts_cuda_runtime_or_skip();
  tg_runtime *hrt = ts_host_runtime();
  run_out h = {0}, c = {0};
  /* The host reference runs on the inputs rounded to dt, so the comparison measures the CUDA
   * kernels (their accumulation and output rounding), not the quantisation of the inputs. */
  tg_gradcheck_input rounded[16];
  double *held[16] = {NULL};
  cr_assert(n <= 16);
  for (int i = 0; i < n; i++) {
    rounded[i] = inputs[i];
    if (!inputs[i].differentiable || dt == TG_F64 || dt == TG_F32) continue;
    int64_t numel = 1;
    for (int d = 0; d < inputs[i].ndim; d++)
      numel *= inputs[i].shape[d];
    void *q = ts_convert(inputs[i].data, (size_t)numel, dt);
    held[i] = malloc((size_t)numel * sizeof(double));
    for (int64_t k = 0; k < numel; k++)
      held[i][k] = dt == TG_BF16 ? ts_bf16_to_f32(((uint16_t *)q)[k]) : ts_f16_to_f32(((uint16_t *)q)[k]);
    free(q);
    rounded[i].data = held[i];
  }
  inputs = rounded;
  run_once(hrt, TG_PROVIDER_HOST, fn, user, n, inputs, TG_F64, NULL, 0, &h);
  double *R = malloc((size_t)h.ny * sizeof(double));
  ts_uniform(R, (size_t)h.ny, 0xabcdef, -1, 1);
  free(h.y);
  run_once(hrt, TG_PROVIDER_HOST, fn, user, n, inputs, TG_F64, R, h.ny, &h);
  run_once(crt, prov, fn, user, n, inputs, dt, R, h.ny, &c);
  double e = ts_rel_l2(c.y, h.y, (size_t)h.ny);
  cr_expect(e <= tol, "%s %s forward: rel L2 error %.3g > %.3g", tg_provider_name(prov), tg_dtype_name(dt), e, tol);
  for (int i = 0; i < n; i++) {
    if (!inputs[i].differentiable) continue;
    int64_t numel = 1;
    for (int d = 0; d < inputs[i].ndim; d++)
      numel *= inputs[i].shape[d];
    double eg = ts_rel_l2(c.g[i], h.g[i], (size_t)numel);
    cr_expect(eg <= tol, "%s %s gradient of input %d: rel L2 error %.3g > %.3g", tg_provider_name(prov),
              tg_dtype_name(dt), i, eg, tol);
    free(c.g[i]);
    free(h.g[i]);
  }
  free(c.g);
  free(h.g);
  free(c.y);
  free(h.y);
  free(R);
  for (int i = 0; i < n; i++)
    free(held[i]);
  tg_runtime_destroy(crt);
  tg_runtime_destroy(hrt);
}

tg_init_options ts_init(tg_init_kind kind, double a, double b, uint64_t seed) {
  tg_init_options o;
  tg_init_options_init(&o);
  o.kind = kind;
  o.a = a;
  o.b = b;
  o.seed = seed;
  if (kind == TG_INIT_XAVIER_UNIFORM || kind == TG_INIT_XAVIER_NORMAL) { /* the tests' a is the gain (0: 1) */
    o.gain = a == 0 ? 1 : a;
    o.a = 0;
  }
  return o;
}

tg_attention_options ts_attn_opts(double scale, double prune, tg_id *lse_out, double keep) {
  tg_attention_options o;
  tg_attention_options_init(&o);
  o.scale = scale == 0 ? TG_SCALE_AUTO : scale;
  o.block_prune_threshold = prune;
  o.lse_out = lse_out;
  o.dropout_keep = keep == 0 ? 1 : keep;
  return o;
}

tg_mha_options ts_mha_opts(int heads_q, int heads_kv, int causal) {
  tg_mha_options o;
  tg_mha_options_init(&o);
  o.heads_q = heads_q;
  o.heads_kv = heads_kv;
  o.causal = causal;
  return o;
}
