/* Losses with a scalar result: mean cross-entropy over the last dim (with ignore_index) and mean
 * squared error. HOST runs host/loss.c, CUDA runs cuda/loss.cu. */
#include "../host/loss.h"
#include "../tape/internal.h"

#include <stdio.h>

#ifdef TIGA_HAVE_CUDA
#include "../cuda/loss.h"
#endif

/* ------------------------------------------------------------ cross-entropy
 * loss = (1/count) sum_{r: t_r != ignore} (lse_r - x_r,t_r),  lse_r = log sum_j exp(x_rj)
 * dloss/dx_rj = (softmax_rj - [j == t_r]) / count for counted rows, 0 for ignored rows.
 * Forward saves lse per row (double on HOST, float on CUDA; counted in saved_bytes) so backward
 * is one pass: softmax_rj = exp(x_rj - lse_r). count is known on the host from the target
 * check, so it lives in the node (p.i[2]) and the device never counts.
 * Node parameters: p.i[0] rows, p.i[1] C, p.i[2] count, p.i[3] ignore_index. */

static tg_status ce_backward(tg_tape *t, tgi_node *n) {
  tgi_value *x = tgi_in(t, n, 0), *tg = tgi_in(t, n, 1), *y = tgi_out(t, n, 0);
  int64_t rows = n->p.i[0], C = n->p.i[1], count = n->p.i[2];
  int32_t ignore = (int32_t)n->p.i[3];
  if (!x->requires_grad || count == 0) return TG_OK; /* every row ignored: zero gradient */
  if (!n->saved) {
    tgi_fail(t, TG_ERR_INTERNAL, "cross-entropy node has no saved log-sum-exp");
    return TG_ERR_INTERNAL;
  }
  if (n->cap->provider == TG_PROVIDER_HOST) {
    const void *gy = tgi_grad_h(t, y);
    const void *px = tgi_read_h(t, x);
    const int32_t *pt = tgi_read_h(t, tg);
    void *gx = tgi_grad_h(t, x);
    if (t->status) return t->status;
    host_ce_backward((tg_dtype)x->dtype, px, pt, rows, C, ignore, count, n->saved, gy, gx);
    return TG_OK;
  }
#ifdef TIGA_HAVE_CUDA
  const void *gy = tgi_grad_d(t, y);
  const void *px = tgi_read_d(t, x);
  const int32_t *pt = tgi_read_d(t, tg);
  void *gx = tgi_grad_d(t, x);
  if (t->status) return t->status;
  tg_status s = cuda_ce_backward(TGI_STREAM(t), (tg_dtype)x->dtype, px, pt, rows, C, ignore, count, n->saved, gy, gx);
  if (s) tgi_fail_cuda(t, s, "backward");
  return s;
#else
  return TG_ERR_INTERNAL;
#endif
}

static void describe_ce(const tgi_node *n, char *buf, size_t cap) {
  if ((int32_t)n->p.i[3] == TG_NO_IGNORE)
    snprintf(buf, cap, "rows=%lld C=%lld counted=%lld", (long long)n->p.i[0], (long long)n->p.i[1],
             (long long)n->p.i[2]);
  else
    snprintf(buf, cap, "rows=%lld C=%lld counted=%lld ignore_index=%d", (long long)n->p.i[0], (long long)n->p.i[1],
             (long long)n->p.i[2], (int)n->p.i[3]);
}

static const tgi_capsule cap_ce[2] = {{"cross_entropy", TG_PROVIDER_HOST, ce_backward, describe_ce},
                                      {"cross_entropy", TG_PROVIDER_CUDA, ce_backward, describe_ce}};

/* "[1, 2]": the multi-index of flat element `flat` of a value of the given shape. */
static const char *index_str(int64_t flat, const int64_t *shape, int ndim, char *buf, size_t cap) {
  int64_t idx[TG_MAX_DIMS];
  for (int d = ndim - 1; d >= 0; d--) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return tgi_shape_str(idx, ndim, buf, cap);
}

tg_id tg_cross_entropy(tg_tape *t, tg_id logits_id, tg_id targets_id, int32_t ignore_index) {
  if (!tgi_op_begin(t, "tg_cross_entropy")) return TG_NO_ID;
  tgi_value *x = tgi_arg(t, "logits", logits_id);
  tgi_value *tg = x ? tgi_arg(t, "targets", targets_id) : NULL;
  if (!tg) return TG_NO_ID;
  tg_provider p = tgi_pick(t, TGI_HOST_AND_CUDA);
  if (!p || !tgi_need_float_for(t, p, "logits", x)) return TG_NO_ID;
  if (tg->dtype != TG_I32) {
    tgi_fail(t, TG_ERR_DTYPE, "argument 'targets' has dtype %s; expected i32 (class indices)",
             tg_dtype_name((tg_dtype)tg->dtype));
    return TG_NO_ID;
  }
  char sx[TGI_SHAPE_STR_CAP], st[TGI_SHAPE_STR_CAP], sw[TGI_SHAPE_STR_CAP];
  if (x->ndim < 1) {
    tgi_fail(t, TG_ERR_SHAPE, "argument 'logits' is a scalar; expected [..., C] with the classes in the last dim");
    return TG_NO_ID;
  }
  bool same = tg->ndim == x->ndim - 1;
  for (int d = 0; same && d < tg->ndim; d++)
    same = tg->shape[d] == x->shape[d];
  if (!same) {
    tgi_fail(t, TG_ERR_SHAPE, "argument 'targets' has shape %s; expected %s (the leading dims of 'logits' %s)",
             tgi_shape_str(tg->shape, tg->ndim, st, sizeof st), tgi_shape_str(x->shape, x->ndim - 1, sw, sizeof sw),
             tgi_shape_str(x->shape, x->ndim, sx, sizeof sx));
    return TG_NO_ID;
  }
  int64_t C = x->shape[x->ndim - 1], rows = x->numel / C, count = 0;
  /* Checked on the host copy (targets are normally host inputs, so this costs no transfer): the
   * kernels then never index a class outside [0, C). */
  const int32_t *ht = tgi_read_h(t, tg);
  if (!ht) return TG_NO_ID;
  int64_t bad = host_ce_check_targets(ht, rows, C, ignore_index, &count);
  if (bad >= 0) {
    char ign[48] = "";
    if (ignore_index != TG_NO_IGNORE) snprintf(ign, sizeof ign, " or ignore_index %d", (int)ignore_index);
    tgi_fail(t, TG_ERR_INVALID_ARGUMENT,
             "argument 'targets' holds %d at %s (row %lld); expected a class in [0, %lld)%s", (int)ht[bad],
             index_str(bad, tg->shape, tg->ndim, st, sizeof st), (long long)bad, (long long)C, ign);
    return TG_NO_ID;
  }
  tgi_value *in[2] = {x, tg};
  bool save = tgi_needs_grad(t, 2, in);
  tgi_value *y = tgi_result(t, (tg_dtype)x->dtype, 0, NULL);
  if (!y) return TG_NO_ID;
  void *lse = NULL;
  size_t lse_bytes = 0;
  if (p == TG_PROVIDER_HOST) {
    const void *px = tgi_read_h(t, x);
    void *py = tgi_write_h(t, y);
    lse_bytes = (size_t)rows * sizeof(double);
    lse = save ? tgi_scratch_h(t, lse_bytes) : NULL;
    if (!px || !py || (save && !lse)) return TG_NO_ID;
    host_ce_forward((tg_dtype)x->dtype, px, ht, rows, C, ignore_index, count, lse, py);
  } else {
#ifdef TIGA_HAVE_CUDA
    const void *px = tgi_read_d(t, x);
    const int32_t *pt = tgi_read_d(t, tg);
    void *py = tgi_write_d(t, y);
    lse_bytes = (size_t)rows * sizeof(float);
    lse = tgi_scratch_d(t, lse_bytes); /* the final reduction reads it, so needed even without grad */
    if (!px || !pt || !py || !lse) return TG_NO_ID;
    tg_status s = cuda_ce_forward(TGI_STREAM(t), (tg_dtype)x->dtype, px, pt, rows, C, ignore_index, count, lse, py);
    if (s) return tgi_fail_cuda(t, s, "forward"), TG_NO_ID;
#endif
  }
  tgi_node *n = tgi_record(t, TGI_CAP(cap_ce, p), 2, in, 1, &y);
  if (n) {
    n->p.i[0] = rows;
    n->p.i[1] = C;
    n->p.i[2] = count;
    n->p.i[3] = ignore_index;
    if (save) {
      n->saved = lse;
      n->saved_bytes = lse_bytes;
      n->saved_on = p == TG_PROVIDER_HOST ? TGI_ON_HOST : TGI_ON_DEV;
    }
  }
  return tgi_done(t, y);
}

/* ------------------------------------------------------------ mse
 * loss = (1/n) sum_i (a_i - b_i)^2;  dloss/da_i = 2 (a_i - b_i) / n = -dloss/db_i. Saves nothing
 * (a and b are read again in backward). */

static tg_status mse_backward(tg_tape *t, tgi_node *n) {
  tgi_value *a = tgi_in(t, n, 0), *b = tgi_in(t, n, 1), *y = tgi_out(t, n, 0);
  if (!a->requires_grad && !b->requires_grad) return TG_OK;
  if (n->cap->provider == TG_PROVIDER_HOST) {
    const void *gy = tgi_grad_h(t, y);
    const void *pa = tgi_read_h(t, a), *pb = tgi_read_h(t, b);
    void *ga = a->requires_grad ? tgi_grad_h(t, a) : NULL;
    void *gb = b->requires_grad ? tgi_grad_h(t, b) : NULL;
    if (t->status) return t->status;
    host_mse_backward((tg_dtype)a->dtype, pa, pb, a->numel, gy, ga, gb);
    return TG_OK;
  }
#ifdef TIGA_HAVE_CUDA
  const void *gy = tgi_grad_d(t, y);
  const void *pa = tgi_read_d(t, a), *pb = tgi_read_d(t, b);
  void *ga = a->requires_grad ? tgi_grad_d(t, a) : NULL;
  void *gb = b->requires_grad ? tgi_grad_d(t, b) : NULL;
  if (t->status) return t->status;
  tg_status s = cuda_mse_backward(TGI_STREAM(t), (tg_dtype)a->dtype, pa, pb, a->numel, gy, ga, gb);
  if (s) tgi_fail_cuda(t, s, "backward");
  return s;
#else
  return TG_ERR_INTERNAL;
#endif
}

static const tgi_capsule cap_mse[2] = {{"mse", TG_PROVIDER_HOST, mse_backward, NULL},
                                       {"mse", TG_PROVIDER_CUDA, mse_backward, NULL}};

tg_id tg_mse(tg_tape *t, tg_id a_id, tg_id b_id) {
  if (!tgi_op_begin(t, "tg_mse")) return TG_NO_ID;
  tgi_value *a = tgi_arg(t, "a", a_id);
  tgi_value *b = a ? tgi_arg(t, "b", b_id) : NULL;
  if (!b) return TG_NO_ID;
  tg_provider p = tgi_pick(t, TGI_HOST_AND_CUDA);
  if (!p || !tgi_need_float_for(t, p, "a", a) || !tgi_need_float_for(t, p, "b", b) ||
      !tgi_need_same_dtype(t, "a", a, "b", b))
    return TG_NO_ID;
  bool same = a->ndim == b->ndim;
  for (int d = 0; same && d < a->ndim; d++)
    same = a->shape[d] == b->shape[d];
  if (!same) {
    char sa[TGI_SHAPE_STR_CAP], sb[TGI_SHAPE_STR_CAP];
    tgi_fail(t, TG_ERR_SHAPE, "arguments 'a' %s and 'b' %s must have the same shape",
             tgi_shape_str(a->shape, a->ndim, sa, sizeof sa), tgi_shape_str(b->shape, b->ndim, sb, sizeof sb));
    return TG_NO_ID;
  }
  tgi_value *y = tgi_result(t, (tg_dtype)a->dtype, 0, NULL);
  if (!y) return TG_NO_ID;
  if (p == TG_PROVIDER_HOST) {
    const void *pa = tgi_read_h(t, a), *pb = tgi_read_h(t, b);
    void *py = tgi_write_h(t, y);
    if (!pa || !pb || !py) return TG_NO_ID;
    host_mse_forward((tg_dtype)a->dtype, pa, pb, a->numel, py);
  } else {
#ifdef TIGA_HAVE_CUDA
    const void *pa = tgi_read_d(t, a), *pb = tgi_read_d(t, b);
    void *py = tgi_write_d(t, y);
    float *part = tgi_scratch_d(t, CUDA_MSE_PARTIALS * sizeof(float));
    if (!pa || !pb || !py || !part) return TG_NO_ID;
    tg_status s = cuda_mse_forward(TGI_STREAM(t), (tg_dtype)a->dtype, pa, pb, a->numel, part, py);
    if (s) return tgi_fail_cuda(t, s, "forward"), TG_NO_ID;
#endif
  }
  tgi_value *in[2] = {a, b};
  tgi_record(t, TGI_CAP(cap_mse, p), 2, in, 1, &y);
  return tgi_done(t, y);
}
