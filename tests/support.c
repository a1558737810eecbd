#include "support.h"

#include <math.h>
#include <stdlib.h>

uint64_t ts_next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void ts_uniform(double *x, size_t n, uint64_t seed, double lo, double hi) {
  uint64_t s = seed;
  for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (double)(ts_next(&s) >> 11) * 0x1.0p-53;
}

void ts_uniform_f32(float *x, size_t n, uint64_t seed, double lo, double hi) {
  uint64_t s = seed;
  for (size_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * (double)(ts_next(&s) >> 11) * 0x1.0p-53);
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

tg_tape *ts_tape(tg_runtime *rt) {
  tg_tape *t = NULL;
  tg_status s = tg_tape_create(rt, &t);
  cr_assert_eq(s, TG_OK, "tg_tape_create: %s", tg_last_error());
  return t;
}

tg_id ts_input(tg_tape *t, tg_dtype dt, int ndim, const int64_t *shape, const void *data, unsigned flags) {
  tg_id id = TG_NO_ID;
  tg_status s = tg_tape_input(t, dt, ndim, shape, data, flags, &id);
  cr_assert_eq(s, TG_OK, "tg_tape_input: %s", tg_tape_error(t));
  return id;
}

tg_id ts_param(tg_tape *t, tg_dtype dt, int ndim, const int64_t *shape, const void *data) {
  tg_id id = TG_NO_ID;
  tg_status s = tg_tape_parameter(t, dt, ndim, shape, data, 0, &id);
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
  tg_status s = tg_gradcheck(rt, fn, user, n, inputs, NULL, &r);
  cr_expect_eq(s, TG_OK, "gradcheck: %s: %s", tg_status_string(s), tg_runtime_error(rt));
  cr_expect(r.checked > 0 || s != TG_OK, "gradcheck compared no element");
  tg_runtime_destroy(rt);
}

tg_gradcheck_input ts_gc_input(tg_dtype dt, int ndim, const int64_t *shape, const void *data) {
  tg_gradcheck_input in;
  memset(&in, 0, sizeof in);
  in.dtype = dt;
  in.ndim = ndim;
  for (int i = 0; i < ndim; i++) in.shape[i] = shape[i];
  in.data = data;
  in.differentiable = dt == TG_F64;
  return in;
}
