/* tg_softmax: softmax over the last dim, y = exp(x - max) / sum exp(x - max) per row.
 * Backward reads the output: dx = y (dy - <dy, y>), so the node saves nothing extra.
 * HOST runs host/softmax.c, CUDA runs cuda/softmax.cu. */
#include "../host/softmax.h"
#include "../tape/internal.h"

#include <stdio.h>

#ifdef TIGA_HAVE_CUDA
#include "../cuda/softmax.h"
#endif

static tg_status softmax_backward(tg_tape *t, tgi_node *n) {
  tgi_value *x = tgi_in(t, n, 0), *y = tgi_out(t, n, 0);
  if (!x->requires_grad) return TG_OK;
  int64_t cols = n->p.i[0], rows = x->numel / cols;
  if (n->cap->provider == TG_PROVIDER_HOST) {
    const void *gy = tgi_grad_h(t, y);
    const void *py = tgi_read_h(t, y);
    void *gx = tgi_grad_h(t, x);
    if (t->status) return t->status;
    host_softmax_backward((tg_dtype)x->dtype, py, gy, gx, rows, cols);
    return TG_OK;
  }
#ifdef TIGA_HAVE_CUDA
  const void *gy = tgi_grad_d(t, y);
  const void *py = tgi_read_d(t, y);
  void *gx = tgi_grad_d(t, x);
  if (t->status) return t->status;
  tg_status s = cuda_softmax_backward(TGI_STREAM(t), (tg_dtype)x->dtype, py, gy, gx, rows, cols);
  if (s) tgi_fail_cuda(t, s, "backward");
  return s;
#else
  return TG_ERR_INTERNAL;
#endif
}

static void describe_softmax(const tgi_node *n, char *buf, size_t cap) {
  snprintf(buf, cap, "dim=-1 n=%lld", (long long)n->p.i[0]);
}

static const tgi_capsule cap_softmax[2] = {{"softmax", TG_PROVIDER_HOST, softmax_backward, describe_softmax},
                                           {"softmax", TG_PROVIDER_CUDA, softmax_backward, describe_softmax}};

tg_id tg_softmax(tg_tape *t, tg_id x_id) {
  if (!tgi_op_begin(t, "tg_softmax")) return TG_NO_ID;
  tgi_value *x = tgi_arg(t, "x", x_id);
  if (!x) return TG_NO_ID;
  tg_provider p = tgi_pick(t, TGI_HOST_AND_CUDA);
  if (!p || !tgi_need_float_for(t, p, "x", x)) return TG_NO_ID;
  if (x->ndim < 1) {
    tgi_fail(t, TG_ERR_SHAPE,
             "argument 'x' is a scalar (shape []); expected at least 1 dim (softmax runs over the last)");
    return TG_NO_ID;
  }
  int64_t cols = x->shape[x->ndim - 1], rows = x->numel / cols;
  tgi_value *y = tgi_result(t, (tg_dtype)x->dtype, x->ndim, x->shape);
  if (!y) return TG_NO_ID;
  if (p == TG_PROVIDER_HOST) {
    const void *px = tgi_read_h(t, x);
    void *py = tgi_write_h(t, y);
    if (!px || !py) return TG_NO_ID;
    host_softmax_forward((tg_dtype)x->dtype, px, py, rows, cols);
  } else {
#ifdef TIGA_HAVE_CUDA
    const void *px = tgi_read_d(t, x);
    void *py = tgi_write_d(t, y);
    if (!px || !py) return TG_NO_ID;
    tg_status s = cuda_softmax_forward(TGI_STREAM(t), (tg_dtype)x->dtype, px, py, rows, cols);
    if (s) return tgi_fail_cuda(t, s, "forward"), TG_NO_ID;
#endif
  }
  tgi_node *n = tgi_record(t, TGI_CAP(cap_softmax, p), 1, &x, 1, &y);
  if (n) n->p.i[0] = cols;
  return tgi_done(t, y);
}
