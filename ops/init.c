/* Initializers: pure functions of (kind, a, b, seed, shape, dtype); see tiga.h. */
#include "../host/random.h"
#include "../tape/internal.h"

#include <math.h>

/* lo + (hi - lo) * u with u < 1 can still round up to hi (in f64, and more often once stored as
 * f32): such draws become the largest representable number below hi, so values stay in [lo, hi).
 * f32 values below lo (lo not representable) move up likewise. Empty ranges (lo == hi) give lo. */
static double in_range_f64(double v, double lo, double hi) {
  if (v >= hi && hi > lo) v = nextafter(hi, lo);
  return v;
}
static float in_range_f32(double v, double lo, double hi) {
  float f = (float)v;
  if (!(hi > lo)) return f;
  if ((double)f >= hi) {
    float below = (float)hi;
    while ((double)below >= hi)
      below = nextafterf(below, -INFINITY);
    if ((double)below >= lo) f = below;
  } else if ((double)f < lo) {
    float above = (float)lo;
    while ((double)above < lo)
      above = nextafterf(above, INFINITY);
    if ((double)above < hi) f = above;
  }
  return f;
}

tg_status tg_init_fill(const tg_init *init, tg_dtype dt, int ndim, const int64_t *shape, void *dst) {
  if (!init) {
    tgi_set_last_error("tg_init_fill: argument 'init' is NULL; expected a tg_init");
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (!dst) {
    tgi_set_last_error("tg_init_fill: argument 'dst' is NULL; expected a buffer for the values");
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (dt != TG_F32 && dt != TG_F64) {
    tgi_set_last_error("tg_init_fill: argument 'dtype' is %s; expected f32 or f64", tg_dtype_name(dt));
    return TG_ERR_DTYPE;
  }
  if (ndim < 0 || ndim > TG_MAX_DIMS || (ndim > 0 && !shape)) {
    tgi_set_last_error("tg_init_fill: arguments 'ndim' (%d) / 'shape' invalid; expected 0..%d dims with a shape array",
                       ndim, TG_MAX_DIMS);
    return TG_ERR_SHAPE;
  }
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] <= 0) {
      tgi_set_last_error("tg_init_fill: argument 'shape' has size %lld at dim %d; expected > 0", (long long)shape[i],
                         i);
      return TG_ERR_SHAPE;
    }
    if (n > INT64_MAX / 16 / shape[i]) {
      tgi_set_last_error("tg_init_fill: argument 'shape' has too many elements");
      return TG_ERR_SHAPE;
    }
    n *= shape[i];
  }
  double a = init->a, b = init->b;
  if (!isfinite(a) || !isfinite(b)) {
    tgi_set_last_error("tg_init_fill: init parameters a=%g b=%g; expected finite numbers", a, b);
    return TG_ERR_INVALID_ARGUMENT;
  }
  double fan_in = 1, fan_out = 1;
  if (ndim == 1) {
    fan_in = fan_out = (double)shape[0];
  } else if (ndim >= 2) {
    double rec = 1;
    for (int i = 0; i < ndim - 2; i++)
      rec *= (double)shape[i];
    fan_in = (double)shape[ndim - 2] * rec;
    fan_out = (double)shape[ndim - 1] * rec;
  }
  double gain = a == 0 ? 1.0 : a;
  double lo = 0, hi = 0, mean = 0, std = 0;
  int kind = 0; /* 0 const, 1 uniform, 2 normal */
  double c = 0;
  switch (init->kind) {
  case TG_INIT_ZEROS: c = 0; break;
  case TG_INIT_ONES: c = 1; break;
  case TG_INIT_CONSTANT: c = a; break;
  case TG_INIT_NORMAL:
    if (b < 0) {
      tgi_set_last_error("tg_init_fill: NORMAL std (b) is %g; expected >= 0", b);
      return TG_ERR_INVALID_ARGUMENT;
    }
    kind = 2, mean = a, std = b;
    break;
  case TG_INIT_UNIFORM:
    if (!(b >= a)) {
      tgi_set_last_error("tg_init_fill: UNIFORM bounds [a=%g, b=%g); expected a <= b", a, b);
      return TG_ERR_INVALID_ARGUMENT;
    }
    kind = 1, lo = a, hi = b;
    break;
  case TG_INIT_XAVIER_UNIFORM: {
    double r = gain * sqrt(6.0 / (fan_in + fan_out));
    kind = 1, lo = -r, hi = r;
    break;
  }
  case TG_INIT_XAVIER_NORMAL: kind = 2, mean = 0, std = gain * sqrt(2.0 / (fan_in + fan_out)); break;
  default:
    tgi_set_last_error("tg_init_fill: init kind %d is not a tg_init_kind", (int)init->kind);
    return TG_ERR_INVALID_ARGUMENT;
  }
  for (int64_t i = 0; i < n; i++) {
    double v = kind == 0   ? c
               : kind == 1 ? lo + (hi - lo) * host_uniform53(init->seed, (uint64_t)i, 0)
                           : mean + std * host_normal(init->seed, (uint64_t)i, 0);
    if (dt == TG_F32)
      ((float *)dst)[i] = kind == 1 ? in_range_f32(v, lo, hi) : (float)v;
    else
      ((double *)dst)[i] = kind == 1 ? in_range_f64(v, lo, hi) : v;
  }
  return TG_OK;
}
