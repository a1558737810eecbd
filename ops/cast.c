/* tg_cast: float dtype conversion; the gradient flows back converted to the input's dtype. */
#include "../host/cast.h"
#include "../tape/internal.h"

#ifdef TIGA_HAVE_CUDA
#include "../cuda/cast.h"
#endif

static tg_status cast_backward(tg_tape *t, tgi_node *n) {
  tgi_value *x = tgi_in(t, n, 0), *y = tgi_out(t, n, 0);
  if (!x->requires_grad) return TG_OK;
  if (n->cap->provider == TG_PROVIDER_HOST) {
    const void *gy = tgi_grad_h(t, y);
    void *gx = tgi_grad_h(t, x);
    if (t->status) return t->status;
    host_cast((tg_dtype)y->dtype, gy, (tg_dtype)x->dtype, gx, x->numel, 1);
    return TG_OK;
  }
#ifdef TIGA_HAVE_CUDA
  const void *gy = tgi_grad_d(t, y);
  void *gx = tgi_grad_d(t, x);
  if (t->status) return t->status;
  tg_status s = cuda_cast(TGI_STREAM(t), (tg_dtype)y->dtype, gy, (tg_dtype)x->dtype, gx, x->numel, 1);
  if (s) tgi_fail_cuda(t, s, "backward");
  return s;
#else
  return TG_ERR_INTERNAL;
#endif
}

static const tgi_capsule cap_cast[2] = {{"cast", TG_PROVIDER_HOST, cast_backward, NULL},
                                        {"cast", TG_PROVIDER_CUDA, cast_backward, NULL}};

static bool castable(tg_provider p, tg_dtype dt) {
  if (p == TG_PROVIDER_HOST) return dt == TG_F32 || dt == TG_F64 || dt == TG_F16 || dt == TG_BF16;
  return dt == TG_F32 || dt == TG_F16 || dt == TG_BF16;
}

tg_id tg_cast(tg_tape *t, tg_id x_id, tg_dtype dt) {
  if (!tgi_op_begin(t, "tg_cast")) return TG_NO_ID;
  tgi_value *x = tgi_arg(t, "x", x_id);
  if (!x) return TG_NO_ID;
  tg_provider p = tgi_pick(t, TGI_HOST_AND_CUDA);
  if (!p) return TG_NO_ID;
  if (!castable(p, (tg_dtype)x->dtype) || !castable(p, dt)) {
    tgi_fail(t, TG_ERR_DTYPE, "cannot cast %s to %s on provider %s; expected float dtypes (%s)",
             tg_dtype_name((tg_dtype)x->dtype), tg_dtype_name(dt), tg_provider_name(p),
             p == TG_PROVIDER_HOST ? "f32, f64, f16, bf16" : "f32, f16, bf16");
    return TG_NO_ID;
  }
  tgi_value *y = tgi_result(t, dt, x->ndim, x->shape);
  if (!y) return TG_NO_ID;
  if (p == TG_PROVIDER_HOST) {
    const void *px = tgi_read_h(t, x);
    void *py = tgi_write_h(t, y);
    if (!px || !py) return TG_NO_ID;
    host_cast((tg_dtype)x->dtype, px, dt, py, x->numel, 0);
  } else {
#ifdef TIGA_HAVE_CUDA
    const void *px = tgi_read_d(t, x);
    void *py = tgi_write_d(t, y);
    if (!px || !py) return TG_NO_ID;
    tg_status s = cuda_cast(TGI_STREAM(t), (tg_dtype)x->dtype, px, dt, py, x->numel, 0);
    if (s) return tgi_fail_cuda(t, s, "forward"), TG_NO_ID;
#endif
  }
  tgi_record(t, TGI_CAP(cap_cast, p), 1, &x, 1, &y);
  return tgi_done(t, y);
}
