/* tg_dot_last: the dot product over the last dim, y[...] = sum_c a[..., c] b[..., c], with the leading
 * dims broadcast by NumPy's rule. One node instead of tg_sum_last(tg_mul(a, b)): one forward kernel,
 * and on CUDA at most two backward kernels when one operand repeats along the other's rows (GAT's
 * scores z [N, H, C] . a [H, C]). */
#include "../host/dot.h"
#include "../tape/internal.h"

#ifdef TIGA_HAVE_CUDA
#include "../cuda/dot.h"
#endif

/* The plan over the leading dims (rows of `cols` elements); -1, or the first result dim whose
 * sizes do not broadcast (host_bcast_plan). */
static int plan_rows(const tgi_value *a, const tgi_value *b, host_bcast *p, int *ndy, int64_t *shy) {
  return host_bcast_plan(p, a->ndim - 1, a->shape, b->ndim - 1, b->shape, ndy, shy);
}

static tg_status dot_backward(tg_tape *t, tgi_node *n) {
  tgi_value *a = tgi_in(t, n, 0), *b = tgi_in(t, n, 1), *y = tgi_out(t, n, 0);
  if (!a->requires_grad && !b->requires_grad) return TG_OK;
  host_bcast p;
  int ndy;
  int64_t shy[TG_MAX_DIMS];
  if (plan_rows(a, b, &p, &ndy, shy) >= 0) /* checked by the forward */
    return tgi_error(t, TG_ERR_INTERNAL, "%s backward: the operands no longer broadcast", n->cap->op);
  const int64_t cols = a->shape[a->ndim - 1];
  const tg_dtype dt = (tg_dtype)y->dtype;
  if (n->cap->provider == TG_PROVIDER_HOST) {
    const void *gy = tgi_grad_h(t, y);
    const void *pa = tgi_read_h(t, a), *pb = tgi_read_h(t, b);
    void *ga = a->requires_grad ? tgi_grad_h(t, a) : NULL;
    void *gb = b->requires_grad ? tgi_grad_h(t, b) : NULL;
    double *wa = ga && p.na < p.n ? tgi_scratch_h(t, sizeof(double) * (size_t)(p.na * cols)) : NULL;
    double *wb = gb && p.nb < p.n ? tgi_scratch_h(t, sizeof(double) * (size_t)(p.nb * cols)) : NULL;
    if (t->status) return t->status;
    host_dot_backward(dt, &p, pa, pb, cols, gy, ga, gb, wa, wb);
    return TG_OK;
  }
#ifdef TIGA_HAVE_CUDA
  const void *gy = tgi_grad_d(t, y);
  const void *pa = tgi_read_d(t, a), *pb = tgi_read_d(t, b);
  if (t->status) return t->status;
  /* A fresh gradient buffer is overwritten instead of zero-filled and added to; the same value as
   * both operands takes the zero-filled buffer (both terms add into it). */
  const bool same = a == b;
  bool fresh_a = false, fresh_b = false;
  void *ga = NULL, *gb = NULL;
  if (a->requires_grad) ga = same ? tgi_grad_d(t, a) : tgi_grad_d_fresh(t, a, &fresh_a);
  if (b->requires_grad) gb = same ? tgi_grad_d(t, b) : tgi_grad_d_fresh(t, b, &fresh_b);
  if (t->status) return t->status;
  size_t ws_bytes = cuda_dot_backward_workspace(&p, cols, ga != NULL, gb != NULL);
  void *ws = ws_bytes ? tgi_scratch_d(t, ws_bytes) : NULL; /* partial sums of the broadcast operand */
  if (t->status) return t->status;
  tg_status s = cuda_dot_backward(TGI_STREAM(t), dt, &p, pa, pb, cols, gy, ga, !fresh_a, gb, !fresh_b, ws, ws_bytes);
  if (s) tgi_fail_cuda(t, s, "backward");
  return s;
#else
  return TG_ERR_INTERNAL;
#endif
}

static const tgi_capsule cap_dot_last[2] = {{"dot_last", TG_PROVIDER_HOST, dot_backward, NULL},
                                            {"dot_last", TG_PROVIDER_CUDA, dot_backward, NULL}};

tg_id tg_dot_last(tg_tape *t, tg_id a_id, tg_id b_id) {
  if (!tgi_op_begin(t, "tg_dot_last")) return TG_NO_ID;
  tgi_value *a = tgi_arg(t, "a", a_id);
  tgi_value *b = a ? tgi_arg(t, "b", b_id) : NULL;
  if (!b) return TG_NO_ID;
  if (a->ndim < 1)
    return tgi_fail(t, TG_ERR_SHAPE, "argument 'a' is a scalar (ndim 0); expected at least one dim"), TG_NO_ID;
  if (b->ndim < 1)
    return tgi_fail(t, TG_ERR_SHAPE, "argument 'b' is a scalar (ndim 0); expected at least one dim"), TG_NO_ID;
  tg_provider p = tgi_pick(t, TGI_HOST_AND_CUDA);
  if (!p) return TG_NO_ID;
  if (!tgi_need_float_for(t, p, "a", a) || !tgi_need_float_for(t, p, "b", b) || !tgi_need_same_dtype(t, "a", a, "b", b))
    return TG_NO_ID;
  char sa[TGI_SHAPE_STR_CAP], sb[TGI_SHAPE_STR_CAP];
  const int64_t cols = a->shape[a->ndim - 1];
  if (b->shape[b->ndim - 1] != cols)
    return tgi_fail(t, TG_ERR_SHAPE,
                    "arguments 'a' %s and 'b' %s differ in the last dim (%lld and %lld); expected equal",
                    tgi_shape_str(a->shape, a->ndim, sa, sizeof sa), tgi_shape_str(b->shape, b->ndim, sb, sizeof sb),
                    (long long)cols, (long long)b->shape[b->ndim - 1]),
           TG_NO_ID;
  host_bcast plan;
  int ndy;
  int64_t shy[TG_MAX_DIMS];
  int bad = plan_rows(a, b, &plan, &ndy, shy);
  if (bad >= 0) {
    int nd = a->ndim > b->ndim ? a->ndim - 1 : b->ndim - 1; /* both have leading dim `bad` (neither size 1) */
    tgi_fail(t, TG_ERR_SHAPE,
             "arguments 'a' %s and 'b' %s: the leading dims do not broadcast: dim %d has %lld and %lld; expected "
             "equal sizes or 1 (NumPy's rule)",
             tgi_shape_str(a->shape, a->ndim, sa, sizeof sa), tgi_shape_str(b->shape, b->ndim, sb, sizeof sb), bad,
             (long long)a->shape[bad - (nd - (a->ndim - 1))], (long long)b->shape[bad - (nd - (b->ndim - 1))]);
    return TG_NO_ID;
  }
  tgi_value *y = tgi_result(t, (tg_dtype)a->dtype, ndy, shy);
  if (!y) return TG_NO_ID;
  if (p == TG_PROVIDER_HOST) {
    const void *pa = tgi_read_h(t, a), *pb = tgi_read_h(t, b);
    void *py = tgi_write_h(t, y);
    if (!pa || !pb || !py) return TG_NO_ID;
    host_dot_forward((tg_dtype)a->dtype, &plan, pa, pb, cols, py);
  } else {
#ifdef TIGA_HAVE_CUDA
    const void *pa = tgi_read_d(t, a), *pb = tgi_read_d(t, b);
    void *py = tgi_write_d(t, y);
    if (!pa || !pb || !py) return TG_NO_ID;
    tg_status s = cuda_dot_forward(TGI_STREAM(t), (tg_dtype)a->dtype, &plan, pa, pb, cols, py);
    if (s) return tgi_fail_cuda(t, s, "forward"), TG_NO_ID;
#endif
  }
  tgi_value *in[2] = {a, b};
  tgi_record(t, TGI_CAP(cap_dot_last, p), 2, in, 1, &y);
  return tgi_done(t, y);
}
