/* tg_layernorm: layer norm over the last dim n with weight and bias [n], biased variance:
 *   y = (x - mean) rstd w + b,  rstd = 1 / sqrt(var + eps).
 * Forward saves the per-row mean and rstd (only when a gradient can flow) as the node's saved
 * state: [rows] mean then [rows] rstd, f64 for f64 values and f32 otherwise (the CUDA kernels'
 * math type), on the side that computed them. Backward gives dx, dw, db (dw, db summed over
 * rows). HOST runs host/layernorm.c, CUDA runs cuda/layernorm.cu. */
#include "../host/layernorm.h"
#include "../tape/internal.h"

#include <math.h>
#include <stdio.h>

#ifdef TIGA_HAVE_CUDA
#include "../cuda/layernorm.h"
#endif

/* Bytes of one saved row statistic. */
static size_t stat_size(tg_dtype dt) { return dt == TG_F64 ? sizeof(double) : sizeof(float); }

static tg_status layernorm_backward(tg_tape *t, tgi_node *n) {
  tgi_value *x = tgi_in(t, n, 0), *w = tgi_in(t, n, 1), *b = tgi_in(t, n, 2), *y = tgi_out(t, n, 0);
  int64_t cols = n->p.i[1], rows = x->numel / cols;
  int want_on = n->cap->provider == TG_PROVIDER_HOST ? TGI_ON_HOST : TGI_ON_DEV;
  if (!n->saved || n->saved_on != want_on) {
    tgi_fail(t, TG_ERR_INTERNAL, "layernorm node has no saved row statistics on the %s side",
             want_on == TGI_ON_HOST ? "host" : "device");
    return TG_ERR_INTERNAL;
  }
  const char *mean = n->saved, *rstd = mean + (size_t)rows * stat_size((tg_dtype)x->dtype);
  if (n->cap->provider == TG_PROVIDER_HOST) {
    const void *gy = tgi_grad_h(t, y);
    const void *px = tgi_read_h(t, x), *pw = tgi_read_h(t, w);
    void *gx = x->requires_grad ? tgi_grad_h(t, x) : NULL;
    void *gw = w->requires_grad ? tgi_grad_h(t, w) : NULL;
    void *gb = b->requires_grad ? tgi_grad_h(t, b) : NULL;
    if (t->status) return t->status;
    host_layernorm_backward((tg_dtype)x->dtype, px, pw, mean, rstd, gy, gx, gw, gb, rows, cols);
    return TG_OK;
  }
#ifdef TIGA_HAVE_CUDA
  const void *gy = tgi_grad_d(t, y);
  const void *px = tgi_read_d(t, x), *pw = tgi_read_d(t, w);
  void *gx = x->requires_grad ? tgi_grad_d(t, x) : NULL;
  void *gw = w->requires_grad ? tgi_grad_d(t, w) : NULL;
  void *gb = b->requires_grad ? tgi_grad_d(t, b) : NULL;
  size_t ws_bytes = (gw || gb) ? cuda_layernorm_backward_workspace(rows, cols) : 0;
  void *ws = ws_bytes ? tgi_scratch_d(t, ws_bytes) : NULL;
  if (t->status) return t->status;
  tg_status s = cuda_layernorm_backward(TGI_STREAM(t), (tg_dtype)x->dtype, px, pw, (const float *)mean,
                                        (const float *)rstd, gy, gx, gw, gb, rows, cols, ws, ws_bytes);
  if (s) tgi_fail_cuda(t, s, "backward");
  return s;
#else
  return TG_ERR_INTERNAL;
#endif
}

static void describe_layernorm(const tgi_node *n, char *buf, size_t cap) {
  snprintf(buf, cap, "n=%lld eps=%g%s", (long long)n->p.i[1], n->p.f[0], n->saved ? " saves mean,rstd" : "");
}

static const tgi_capsule cap_layernorm[2] = {{"layernorm", TG_PROVIDER_HOST, layernorm_backward, describe_layernorm},
                                             {"layernorm", TG_PROVIDER_CUDA, layernorm_backward, describe_layernorm}};

/* w and b must be 1-D of length n = the last dim of x. */
static bool need_row_param(tg_tape *t, const char *arg, const tgi_value *v, const tgi_value *x) {
  int64_t cols = x->shape[x->ndim - 1];
  if (v->ndim == 1 && v->shape[0] == cols) return true;
  char sv[TGI_SHAPE_STR_CAP], sx[TGI_SHAPE_STR_CAP];
  return tgi_fail(t, TG_ERR_SHAPE, "argument '%s' has shape %s; expected [n=%lld] (the last dim of 'x' %s)", arg,
                  tgi_shape_str(v->shape, v->ndim, sv, sizeof sv), (long long)cols,
                  tgi_shape_str(x->shape, x->ndim, sx, sizeof sx));
}

tg_id tg_layernorm(tg_tape *t, tg_id x_id, tg_id w_id, tg_id b_id, double eps) {
  if (!tgi_op_begin(t, "tg_layernorm")) return TG_NO_ID;
  tgi_value *x = tgi_arg(t, "x", x_id);
  tgi_value *w = x ? tgi_arg(t, "w", w_id) : NULL;
  tgi_value *b = w ? tgi_arg(t, "b", b_id) : NULL;
  if (!b) return TG_NO_ID;
  if (!(eps > 0) || !isfinite(eps)) {
    tgi_fail(t, TG_ERR_INVALID_ARGUMENT,
             "argument 'eps' is %g; expected a finite number > 0 (PyTorch's default is 1e-5)", eps);
    return TG_NO_ID;
  }
  tg_provider p = tgi_pick(t, TGI_HOST_AND_CUDA);
  if (!p || !tgi_need_float_for(t, p, "x", x) || !tgi_need_float_for(t, p, "w", w) ||
      !tgi_need_float_for(t, p, "b", b) || !tgi_need_same_dtype(t, "x", x, "w", w) ||
      !tgi_need_same_dtype(t, "x", x, "b", b))
    return TG_NO_ID;
  if (x->ndim < 1) {
    tgi_fail(t, TG_ERR_SHAPE,
             "argument 'x' is a scalar (shape []); expected at least 1 dim (layernorm runs over the last)");
    return TG_NO_ID;
  }
  if (!need_row_param(t, "w", w, x) || !need_row_param(t, "b", b, x)) return TG_NO_ID;
  tg_dtype dt = (tg_dtype)x->dtype;
  int64_t cols = x->shape[x->ndim - 1], rows = x->numel / cols;
  tgi_value *y = tgi_result(t, dt, x->ndim, x->shape);
  if (!y) return TG_NO_ID;
  tgi_value *in[3] = {x, w, b};
  /* row statistics for backward, only when a gradient can reach this node */
  size_t saved_bytes = tgi_needs_grad(t, 3, in) ? 2 * (size_t)rows * stat_size(dt) : 0;
  char *saved = NULL;
  if (p == TG_PROVIDER_HOST) {
    const void *px = tgi_read_h(t, x), *pw = tgi_read_h(t, w), *pb = tgi_read_h(t, b);
    void *py = tgi_write_h(t, y);
    saved = saved_bytes ? tgi_scratch_h(t, saved_bytes) : NULL;
    if (!px || !pw || !pb || !py || (saved_bytes && !saved)) return TG_NO_ID;
    host_layernorm_forward(dt, px, pw, pb, eps, py, saved, saved ? saved + saved_bytes / 2 : NULL, rows, cols);
  } else {
#ifdef TIGA_HAVE_CUDA
    const void *px = tgi_read_d(t, x), *pw = tgi_read_d(t, w), *pb = tgi_read_d(t, b);
    void *py = tgi_write_d(t, y);
    saved = saved_bytes ? tgi_scratch_d(t, saved_bytes) : NULL;
    if (!px || !pw || !pb || !py || (saved_bytes && !saved)) return TG_NO_ID;
    tg_status s = cuda_layernorm_forward(TGI_STREAM(t), dt, px, pw, pb, eps, py, (float *)saved,
                                         saved ? (float *)(saved + saved_bytes / 2) : NULL, rows, cols);
    if (s) return tgi_fail_cuda(t, s, "forward"), TG_NO_ID;
#endif
  }
  tgi_node *n = tgi_record(t, TGI_CAP(cap_layernorm, p), 3, in, 1, &y);
  if (n) {
    n->p.f[0] = eps;
    n->p.i[1] = cols;
    n->saved = saved;
    n->saved_bytes = saved_bytes;
    n->saved_on = saved ? (p == TG_PROVIDER_HOST ? TGI_ON_HOST : TGI_ON_DEV) : 0;
  }
  return tgi_done(t, y);
}
