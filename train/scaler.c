/* Dynamic loss scaling (tg_loss_scaler, PyTorch's GradScaler): scale the loss, then unscale the
 * parameter gradients and look for NaN / inf in the same pass, and adapt the scale. */
#include "../host/optim.h"
#include "../tape/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TIGA_HAVE_CUDA
#include "../cuda/optim.h"
#endif

struct tg_loss_scaler {
  tg_loss_scaler_options o;
  double scale;
  int64_t tracker; /* finite steps since the scale last changed */
};

void tg_loss_scaler_options_init(tg_loss_scaler_options *o) {
  if (o) *o = (tg_loss_scaler_options){sizeof *o, 65536.0, 2.0, 0.5, 2000};
}

tg_status tg_loss_scaler_create(const tg_loss_scaler_options *opts, tg_loss_scaler **out) {
  const char *fn = "tg_loss_scaler_create";
  if (!out) {
    tgi_set_last_error("%s: argument 'out' is NULL; expected a tg_loss_scaler** to receive the handle", fn);
    return TG_ERR_INVALID_ARGUMENT;
  }
  *out = NULL;
  tg_loss_scaler_options o;
  tg_loss_scaler_options_init(&o);
  const char *why = opts ? tgi_opts_copy(&o, sizeof o, opts) : NULL;
  if (why) {
    tgi_set_last_error("%s: argument 'opts' (tg_loss_scaler_options): %s", fn, why);
    return TG_ERR_INVALID_ARGUMENT;
  }
  const char *bad = !(isfinite(o.init_scale) && o.init_scale > 0)         ? "init_scale (expected finite > 0)"
                    : !(isfinite(o.growth_factor) && o.growth_factor > 1) ? "growth_factor (expected finite > 1)"
                    : !(o.backoff_factor > 0 && o.backoff_factor < 1)     ? "backoff_factor (expected in (0, 1))"
                    : o.growth_interval < 1                               ? "growth_interval (expected >= 1)"
                                                                          : NULL;
  if (bad) {
    tgi_set_last_error("%s: option %s is out of range: init_scale %g, growth_factor %g, backoff_factor %g, "
                       "growth_interval %lld",
                       fn, bad, o.init_scale, o.growth_factor, o.backoff_factor, (long long)o.growth_interval);
    return TG_ERR_INVALID_ARGUMENT;
  }
  tg_loss_scaler *sc = tgi_calloc(1, sizeof *sc);
  if (!sc) {
    tgi_set_last_error("%s: out of host memory", fn);
    return TG_ERR_OUT_OF_MEMORY;
  }
  sc->o = o;
  sc->scale = o.init_scale;
  *out = sc;
  return TG_OK;
}

void tg_loss_scaler_destroy(tg_loss_scaler *sc) { free(sc); }

tg_status tg_loss_scaler_state(const tg_loss_scaler *sc, double *scale, int64_t *tracker) {
  if (!sc) {
    tgi_set_last_error("tg_loss_scaler_state: argument 'scaler' is NULL; expected a scaler from tg_loss_scaler_create");
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (scale) *scale = sc->scale;
  if (tracker) *tracker = sc->tracker;
  return TG_OK;
}

tg_status tg_loss_scaler_set_state(tg_loss_scaler *sc, double scale, int64_t tracker) {
  if (!sc) {
    tgi_set_last_error(
        "tg_loss_scaler_set_state: argument 'scaler' is NULL; expected a scaler from tg_loss_scaler_create");
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (!(isfinite(scale) && scale > 0)) { /* init_scale's rule */
    tgi_set_last_error("tg_loss_scaler_set_state: argument 'scale' is %g; expected finite and > 0", scale);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (tracker < 0 || tracker >= sc->o.growth_interval) {
    tgi_set_last_error("tg_loss_scaler_set_state: argument 'growth_tracker' is %lld; expected 0 .. %lld (below the "
                       "scaler's growth_interval)",
                       (long long)tracker, (long long)sc->o.growth_interval - 1);
    return TG_ERR_INVALID_ARGUMENT;
  }
  sc->scale = scale;
  sc->tracker = tracker;
  return TG_OK;
}

tg_id tg_loss_scaler_scale(tg_tape *t, tg_loss_scaler *sc, tg_id loss) {
  if (!tgi_op_begin(t, "tg_loss_scaler_scale")) return TG_NO_ID;
  if (!sc)
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT,
                    "argument 'scaler' is NULL; expected a scaler from "
                    "tg_loss_scaler_create"),
           TG_NO_ID;
  tgi_thread_leave(t->rt); /* tg_scale is a call of its own */
  return tg_scale(t, loss, sc->scale);
}

/* After a step: back off on found-inf, grow after growth_interval finite steps (kept below 2^64). */
static void update(tg_loss_scaler *sc, bool found) {
  if (found) {
    sc->scale *= sc->o.backoff_factor;
    sc->tracker = 0;
    return;
  }
  if (++sc->tracker < sc->o.growth_interval) return;
  sc->tracker = 0;
  if (sc->scale * sc->o.growth_factor < 0x1p64) sc->scale *= sc->o.growth_factor;
}

tg_status tg_loss_scaler_unscale(tg_tape *t, tg_loss_scaler *sc, int *found_inf) {
  const char *fn = "tg_loss_scaler_unscale";
  if (!t) {
    tgi_set_last_error("%s: argument 'tape' is NULL; expected a tape from tg_tape_create", fn);
    return TG_ERR_INVALID_ARGUMENT;
  }
  TGI_GUARD(t->rt, fn, TG_ERR_STATE);
  tgi_finite_resolve(t);
  if (t->status)
    return tgi_error(t, TG_ERR_STATE, "%s: the tape holds an error from an earlier op call: %s", fn, t->msg);
  if (!sc || !found_inf)
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "%s: argument '%s' is NULL", fn, !sc ? "scaler" : "found_inf");
  *found_inf = 0;
  const double inv = 1.0 / sc->scale;
  /* everything that can fail comes first, so a failure leaves every gradient as it was */
  size_t ndev = 0;
  for (uint32_t i = 0; i < t->nvals; i++) {
    tgi_value *v = tgi_slot(t, i);
    if (v->kind != TGI_PARAM || !v->grad.valid) continue;
    bool dev = (v->grad.valid & TGI_ON_DEV) != 0;
    ndev += dev;
    bool ok = dev ? (v->dtype == TG_F32 || v->dtype == TG_F16 || v->dtype == TG_BF16)
                  : (v->dtype == TG_F32 || v->dtype == TG_F64);
    if (!ok)
      return tgi_error(t, TG_ERR_DTYPE, "%s: parameter id %lld has a %s gradient on the %s, which cannot be unscaled",
                       fn, (long long)tgi_id_of(t, v), tg_dtype_name((tg_dtype)v->dtype), dev ? "device" : "host");
  }
  bool found = false;
#ifdef TIGA_HAVE_CUDA
  char msg[TGI_MSG_CAP];
  tg_status s = TG_OK;
  int32_t *flag = NULL;
  cuda_mt_tensor *mt = NULL;
  if (ndev) {
    flag = tgi_found_flag(t, &s, msg);
    t->found_flag_zero = false; /* this pass writes the flag and leaves it as it found */
    if (flag) s = tgi_device_zero(tgi_dev(t), flag, sizeof(int32_t), msg);
    if (s) return tgi_error(t, s, "%s: %s", fn, msg);
    if (!(mt = tgi_malloc(ndev * sizeof *mt))) return tgi_error(t, TG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
#else
  if (ndev) return tgi_error(t, TG_ERR_INTERNAL, "%s: a gradient lives on a device in a host-only build", fn);
#endif
  /* host gradients: found-inf looks at the values before the division */
  for (uint32_t i = 0; i < t->nvals; i++) {
    tgi_value *v = tgi_slot(t, i);
    if (v->kind != TGI_PARAM || !v->grad.valid || (v->grad.valid & TGI_ON_DEV)) continue;
    found = found || tgi_host_first_nonfinite((tg_dtype)v->dtype, v->grad.h, v->numel) >= 0;
    host_scale_inplace((tg_dtype)v->dtype, v->grad.h, v->numel, inv);
  }
#ifdef TIGA_HAVE_CUDA
  /* device gradients: one multi-tensor pass per dtype, one flag read back */
  static const tg_dtype DT[3] = {TG_F32, TG_BF16, TG_F16};
  for (int d = 0; d < 3 && ndev && !s; d++) {
    int k = 0;
    for (uint32_t i = 0; i < t->nvals; i++) {
      tgi_value *v = tgi_slot(t, i);
      if (v->kind == TGI_PARAM && (v->grad.valid & TGI_ON_DEV) && v->dtype == DT[d])
        mt[k++] = (cuda_mt_tensor){NULL, v->grad.d, NULL, NULL, v->numel, 0, 0, 0, 0};
    }
    if (k && (s = cuda_unscale_multi(TGI_STREAM(t), DT[d], mt, k, inv, flag)))
      snprintf(msg, sizeof msg, "CUDA unscale of the %s gradients failed: %s", tg_dtype_name(DT[d]), tgc_error());
  }
  free(mt);
  for (uint32_t i = 0; i < t->nvals; i++) {
    tgi_value *v = tgi_slot(t, i);
    if (v->kind == TGI_PARAM && (v->grad.valid & TGI_ON_DEV)) v->grad.valid = TGI_ON_DEV; /* changed there */
  }
  int32_t f = 0;
  if (ndev && !s) s = tgi_device_d2h(tgi_dev(t), &f, flag, sizeof f, msg);
  if (s) return tgi_error(t, s, "%s: %s", fn, msg);
  found = found || f != 0;
#endif
  update(sc, found);
  *found_inf = found ? 1 : 0;
  return TG_OK;
}
