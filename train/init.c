/* Initializers: pure functions of (kind, a, b, gain, seed, shape, dtype); see tiga.h. And
 * tg_tape_parameter_init, a parameter created from one. */
#include "../host/random.h"
#include "../tape/internal.h"

#include <math.h>
#include <stdlib.h>

void tg_init_options_init(tg_init_options *o) {
  if (!o) return;
  *o = (tg_init_options){.struct_size = sizeof *o, .kind = TG_INIT_ZEROS, .a = 0, .b = 1, .gain = 1, .seed = 0};
}

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

tg_status tg_init_fill(const tg_init_options *init_in, tg_dtype dt, int ndim, const int64_t *shape, void *dst,
                       size_t dst_bytes) {
  if (!init_in) {
    tgi_set_last_error("tg_init_fill: argument 'init' is NULL; expected tg_init_options (tg_init_options_init)");
    return TG_ERR_INVALID_ARGUMENT;
  }
  tg_init_options opts;
  tg_init_options_init(&opts);
  const char *why = tgi_opts_copy(&opts, sizeof opts, init_in);
  if (why) {
    tgi_set_last_error("tg_init_fill: argument 'init' (tg_init_options): %s", why);
    return TG_ERR_INVALID_ARGUMENT;
  }
  const tg_init_options *init = &opts;
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
  if (dst_bytes != (size_t)n * tg_dtype_size(dt)) {
    tgi_set_last_error("tg_init_fill: argument 'dst_bytes' is %zu; %lld elements of %s need %zu bytes", dst_bytes,
                       (long long)n, tg_dtype_name(dt), (size_t)n * tg_dtype_size(dt));
    return TG_ERR_INVALID_ARGUMENT;
  }
  double a = init->a, b = init->b, gain = init->gain;
  if (!isfinite(a) || !isfinite(b) || !isfinite(gain)) {
    tgi_set_last_error("tg_init_fill: init parameters a=%g b=%g gain=%g; expected finite numbers", a, b, gain);
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

tg_status tg_tape_parameter_init(tg_tape *t, tg_dtype dt, int ndim, const int64_t *shape, const tg_init_options *init,
                                 unsigned flags, tg_id *out) {
  if (!t) {
    tgi_set_last_error("tg_tape_parameter_init: argument 'tape' is NULL; expected a tape from tg_tape_create");
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (out) *out = TG_NO_ID;
  if (dt != TG_F32 && dt != TG_F64)
    return tgi_error(t, TG_ERR_DTYPE, "tg_tape_parameter_init: argument 'dtype' is %s; expected f32 or f64",
                     tg_dtype_name(dt));
  int64_t numel;
  tg_status s = tgi_check_shape(t, "tg_tape_parameter_init", ndim, shape, &numel);
  if (s) return s;
  size_t bytes = (size_t)numel * tg_dtype_size(dt);
  void *tmp = tgi_malloc(bytes);
  if (!tmp) return tgi_error(t, TG_ERR_OUT_OF_MEMORY, "tg_tape_parameter_init: out of host memory");
  s = tg_init_fill(init, dt, ndim, shape, tmp, bytes);
  if (s != TG_OK) {
    free(tmp);
    return tgi_error(t, s, "tg_tape_parameter_init: %s", tg_last_error());
  }
  s = tgi_new_leaf(t, "tg_tape_parameter_init", TGI_PARAM, dt, ndim, shape, tmp, bytes, flags, out);
  free(tmp);
  return s;
}
