/* Reductions: sum and mean of all elements (a scalar, ndim 0), and the sum over the last dim. */
#include "../host/reduce.h"
#include "../tape/internal.h"

#include <math.h>

#ifdef TIGA_HAVE_CUDA
#include "../cuda/elementwise.h"
#include "../cuda/reduce.h"
#include <string.h>

/* One element of a CUDA float dtype on the host, as a double. */
static double host_scalar(tg_dtype dt, const void *p) {
  uint16_t h;
  uint32_t u;
  float f;
  switch (dt) {
  case TG_F32: memcpy(&f, p, 4); return f;
  case TG_BF16:
    memcpy(&h, p, 2);
    u = (uint32_t)h << 16;
    memcpy(&f, &u, 4);
    return f;
  case TG_F16: {
    memcpy(&h, p, 2);
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
  }
  default: return 0;
  }
}
#endif

static tg_status sum_backward(tg_tape *t, tgi_node *n) {
  tgi_value *x = tgi_in(t, n, 0), *y = tgi_out(t, n, 0);
  if (!x->requires_grad) return TG_OK;
  if (n->cap->provider == TG_PROVIDER_HOST) {
    const void *gy = tgi_grad_h(t, y);
    void *gx = tgi_grad_h(t, x);
    if (t->status) return t->status;
    host_sum_backward((tg_dtype)x->dtype, gy, x->numel, n->p.f[0], gx);
    return TG_OK;
  }
#ifdef TIGA_HAVE_CUDA
  /* The loss seed lives on the host (tg_tape_backward writes it there): pass its value to the kernel
   * instead of copying it to the device, which would wait for every queued kernel. */
  tg_dtype dt = (tg_dtype)x->dtype;
  const void *gy_dev = NULL;
  double gy_host = 0;
  if (y->grad.valid & TGI_ON_HOST) {
    const void *gh = tgi_grad_h(t, y);
    if (gh) gy_host = host_scalar(dt, gh);
  } else {
    gy_dev = tgi_grad_d(t, y);
  }
  bool fresh = false;
  void *gx = tgi_grad_d_fresh(t, x, &fresh); /* fresh: write the constant, no zero-fill */
  if (t->status) return t->status;
  tg_status s = cuda_sum_backward_ex(TGI_STREAM(t), dt, gy_dev, gy_host, x->numel, n->p.f[0], !fresh, gx);
  if (s) tgi_fail_cuda(t, s, "backward");
  return s;
#else
  return TG_ERR_INTERNAL;
#endif
}

static const tgi_capsule cap_sum[2] = {{"sum", TG_PROVIDER_HOST, sum_backward, NULL},
                                       {"sum", TG_PROVIDER_CUDA, sum_backward, NULL}};
static const tgi_capsule cap_mean[2] = {{"mean", TG_PROVIDER_HOST, sum_backward, NULL},
                                        {"mean", TG_PROVIDER_CUDA, sum_backward, NULL}};

static tg_id reduce(tg_tape *t, const char *name, const tgi_capsule (*caps)[2], bool mean, tg_id x_id) {
  if (!tgi_op_begin(t, name)) return TG_NO_ID;
  tgi_value *x = tgi_arg(t, "x", x_id);
  if (!x) return TG_NO_ID;
  tg_provider p = tgi_pick(t, TGI_HOST_AND_CUDA);
  if (!p || !tgi_need_float_for(t, p, "x", x)) return TG_NO_ID;
  tgi_value *y = tgi_result(t, (tg_dtype)x->dtype, 0, NULL);
  if (!y) return TG_NO_ID;
  double alpha = mean ? 1.0 / (double)x->numel : 1.0;
  if (p == TG_PROVIDER_HOST) {
    const void *px = tgi_read_h(t, x);
    void *py = tgi_write_h(t, y);
    if (!px || !py) return TG_NO_ID;
    host_sum_forward((tg_dtype)x->dtype, px, x->numel, alpha, py);
  } else {
#ifdef TIGA_HAVE_CUDA
    const void *px = tgi_read_d(t, x);
    void *py = tgi_write_d(t, y);
    if (!px || !py) return TG_NO_ID;
    tg_status s = cuda_sum_forward(TGI_STREAM(t), (tg_dtype)x->dtype, px, x->numel, alpha, py);
    if (s) return tgi_fail_cuda(t, s, "forward"), TG_NO_ID;
#endif
  }
  tgi_node *n = tgi_record(t, TGI_CAP(*caps, p), 1, &x, 1, &y);
  if (n) n->p.f[0] = alpha;
  return tgi_done(t, y);
}

tg_id tg_sum(tg_tape *t, tg_id x) { return reduce(t, "tg_sum", &cap_sum, false, x); }
tg_id tg_mean(tg_tape *t, tg_id x) { return reduce(t, "tg_mean", &cap_mean, true, x); }

/* ------------------------------------------------------------ sum over the last dim */

static tg_status sum_last_backward(tg_tape *t, tgi_node *n) {
  tgi_value *x = tgi_in(t, n, 0), *y = tgi_out(t, n, 0);
  if (!x->requires_grad) return TG_OK;
  int64_t cols = x->shape[x->ndim - 1], rows = x->numel / cols;
  if (n->cap->provider == TG_PROVIDER_HOST) {
    const void *gy = tgi_grad_h(t, y);
    void *gx = tgi_grad_h(t, x);
    if (t->status) return t->status;
    host_sum_last_backward((tg_dtype)x->dtype, gy, rows, cols, gx);
    return TG_OK;
  }
#ifdef TIGA_HAVE_CUDA
  const void *gy = tgi_grad_d(t, y);
  void *gx = tgi_grad_d(t, x);
  if (t->status) return t->status;
  tg_status s = cuda_sum_last_backward(TGI_STREAM(t), (tg_dtype)x->dtype, gy, rows, cols, gx);
  if (s) tgi_fail_cuda(t, s, "backward");
  return s;
#else
  return TG_ERR_INTERNAL;
#endif
}

static const tgi_capsule cap_sum_last[2] = {{"sum_last", TG_PROVIDER_HOST, sum_last_backward, NULL},
                                            {"sum_last", TG_PROVIDER_CUDA, sum_last_backward, NULL}};

tg_id tg_sum_last(tg_tape *t, tg_id x_id) {
  if (!tgi_op_begin(t, "tg_sum_last")) return TG_NO_ID;
  tgi_value *x = tgi_arg(t, "x", x_id);
  if (!x) return TG_NO_ID;
  if (x->ndim < 1)
    return tgi_fail(t, TG_ERR_SHAPE, "argument 'x' is a scalar (ndim 0); expected at least one dim"), TG_NO_ID;
  tg_provider p = tgi_pick(t, TGI_HOST_AND_CUDA);
  if (!p || !tgi_need_float_for(t, p, "x", x)) return TG_NO_ID;
  tgi_value *y = tgi_result(t, (tg_dtype)x->dtype, x->ndim - 1, x->shape);
  if (!y) return TG_NO_ID;
  int64_t cols = x->shape[x->ndim - 1], rows = x->numel / cols;
  if (p == TG_PROVIDER_HOST) {
    const void *px = tgi_read_h(t, x);
    void *py = tgi_write_h(t, y);
    if (!px || !py) return TG_NO_ID;
    host_sum_last_forward((tg_dtype)x->dtype, px, rows, cols, py);
  } else {
#ifdef TIGA_HAVE_CUDA
    const void *px = tgi_read_d(t, x);
    void *py = tgi_write_d(t, y);
    if (!px || !py) return TG_NO_ID;
    tg_status s = cuda_sum_last_forward(TGI_STREAM(t), (tg_dtype)x->dtype, px, rows, cols, py);
    if (s) return tgi_fail_cuda(t, s, "forward"), TG_NO_ID;
#endif
  }
  tgi_record(t, TGI_CAP(cap_sum_last, p), 1, &x, 1, &y);
  return tgi_done(t, y);
}
