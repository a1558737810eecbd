/* The projection family: tg_linear (y = x·W + b over the rows of x) and tg_matmul (batched
 * products, b shared or per batch). HOST runs host/linear.c, CUDA runs cuda/linear.cu (cuBLAS/Lt).
 *   linear:  x [..., in] is read as [rows, in];   dx += dy·Wᵀ, dW += xᵀ·dy, db += column sums of dy.
 *   matmul:  a [..., M, K] · b [..., K, N];       da += dy·bᵀ, db += aᵀ·dy (summed over batches
 *            when b is 2-D and shared, which is a linear without bias over batch*M rows).
 * Nothing is saved: backward reads the inputs, which live until tg_tape_reset. On CUDA a gradient
 * buffer that does not exist yet is overwritten (GEMM beta = 0) instead of zero-filled and added to. */
#include "../host/linear.h"
#include "../tape/internal.h"
#include "graph.h"

#include <stdio.h>
#include <string.h>

#ifdef TIGA_HAVE_CUDA
#include "../cuda/linear.h"
#endif

/* node parameters */
enum { P_ROWS = 0, P_IN = 1, P_OUT = 2 };                      /* linear */
enum { P_BATCH = 0, P_M = 1, P_K = 2, P_N = 3, P_SHARED = 4 }; /* matmul */

static bool fail_oom_or_cuda(tg_tape *t, tg_status s, bool cuda, const char *what) {
  if (cuda) return tgi_fail_cuda(t, s, what);
  return tgi_fail(t, s, "out of host memory in the %s product", what);
}

#ifdef TIGA_HAVE_CUDA
tgc_blas tgi_blas_of(tg_tape *t) {
  tgc_blas h;
  h.stream = TGI_STREAM(t);
  h.cublas = TGI_CUBLAS(t);
  h.lt = tgi_device_cublaslt(tgi_dev(t), &h.workspace, &h.workspace_bytes);
  return h;
}

/* The device gradient buffer of v for an output that is written, not read: a buffer that does not
 * exist yet is handed out un-zeroed and overwritten (add = 0). Callers fetch in the order the launcher
 * writes, so a value passed as two arguments is overwritten once and then added to. */
static tgc_grad grad_out(tg_tape *t, tgi_value *v) {
  bool fresh = false;
  tgc_grad g = {tgi_grad_d_fresh(t, v, &fresh), 0};
  g.add = !fresh;
  return g;
}
#endif

/* ------------------------------------------------------------ linear */

static tg_status linear_backward(tg_tape *t, tgi_node *n) {
  tgi_value *x = tgi_in(t, n, 0), *w = tgi_in(t, n, 1), *b = n->n_in > 2 ? tgi_in(t, n, 2) : NULL;
  tgi_value *y = tgi_out(t, n, 0);
  int64_t rows = n->p.i[P_ROWS], in = n->p.i[P_IN], out = n->p.i[P_OUT];
  bool want_x = x->requires_grad, want_w = w->requires_grad, want_b = b && b->requires_grad;
  tg_dtype dt = (tg_dtype)y->dtype;
  tg_status s;
  if (n->cap->provider == TG_PROVIDER_HOST) {
    const void *gy = tgi_grad_h(t, y);
    const void *px = want_w ? tgi_read_h(t, x) : NULL, *pw = want_x ? tgi_read_h(t, w) : NULL;
    void *gx = want_x ? tgi_grad_h(t, x) : NULL, *gw = want_w ? tgi_grad_h(t, w) : NULL;
    void *gb = want_b ? tgi_grad_h(t, b) : NULL;
    if (t->status) return t->status;
    s = host_linear_backward(dt, px, pw, gy, gx, gw, gb, rows, in, out);
  } else {
#ifdef TIGA_HAVE_CUDA
    const void *gy = tgi_grad_d(t, y);
    const void *px = want_w ? tgi_read_d(t, x) : NULL, *pw = want_x ? tgi_read_d(t, w) : NULL;
    tgc_grad none = {NULL, 0};
    tgc_grad gx = want_x ? grad_out(t, x) : none; /* written in this order: gx, gw, gb */
    tgc_grad gw = want_w ? grad_out(t, w) : none;
    tgc_grad gb = want_b ? grad_out(t, b) : none;
    void *scratch = want_b ? tgi_scratch_d(t, cuda_linear_scratch_bytes(rows, out)) : NULL;
    if (t->status) return t->status;
    tgc_blas h = tgi_blas_of(t);
    s = cuda_linear_backward(&h, dt, px, pw, gy, gx, gw, gb, scratch, rows, in, out);
#else
    return TG_ERR_INTERNAL;
#endif
  }
  if (s) fail_oom_or_cuda(t, s, n->cap->provider != TG_PROVIDER_HOST, "backward");
  return s;
}

static void describe_linear(const tgi_node *n, char *buf, size_t cap) {
  snprintf(buf, cap, "rows=%lld in=%lld out=%lld%s", (long long)n->p.i[P_ROWS], (long long)n->p.i[P_IN],
           (long long)n->p.i[P_OUT], n->n_in > 2 ? " +bias" : "");
}

static const tgi_capsule cap_linear[2] = {{"linear", TG_PROVIDER_HOST, linear_backward, describe_linear},
                                          {"linear", TG_PROVIDER_CUDA, linear_backward, describe_linear}};

tg_id tg_linear(tg_tape *t, tg_id x_id, tg_id w_id, tg_id b_id) {
  if (!tgi_op_begin(t, "tg_linear")) return TG_NO_ID;
  tgi_value *x = tgi_arg(t, "x", x_id);
  tgi_value *w = x ? tgi_arg(t, "w", w_id) : NULL;
  if (!w) return TG_NO_ID;
  bool ok;
  tgi_value *b = tgi_arg_opt(t, "b", b_id, &ok);
  if (!ok) return TG_NO_ID;
  tg_provider p = tgi_pick(t, TGI_HOST_AND_CUDA);
  if (!p || !tgi_need_float_for(t, p, "x", x) || !tgi_need_float_for(t, p, "w", w) ||
      (b && !tgi_need_float_for(t, p, "b", b)) || !tgi_need_same_dtype(t, "x", x, "w", w) ||
      (b && !tgi_need_same_dtype(t, "x", x, "b", b)))
    return TG_NO_ID;
  char sx[TGI_SHAPE_STR_CAP], sw[TGI_SHAPE_STR_CAP], sb[TGI_SHAPE_STR_CAP];
  if (x->ndim < 1)
    return tgi_fail(t, TG_ERR_SHAPE, "argument 'x' is a scalar (shape []); expected at least 1 dim [..., in]"),
           TG_NO_ID;
  int64_t in = x->shape[x->ndim - 1];
  if (w->ndim != 2 || w->shape[0] != in)
    return tgi_fail(t, TG_ERR_SHAPE, "argument 'w' has shape %s; expected [in=%lld, out] (in from 'x' %s)",
                    tgi_shape_str(w->shape, w->ndim, sw, sizeof sw), (long long)in,
                    tgi_shape_str(x->shape, x->ndim, sx, sizeof sx)),
           TG_NO_ID;
  int64_t out = w->shape[1], rows = x->numel / in;
  if (b && (b->ndim != 1 || b->shape[0] != out))
    return tgi_fail(t, TG_ERR_SHAPE, "argument 'b' has shape %s; expected [out=%lld] (out from 'w' %s)",
                    tgi_shape_str(b->shape, b->ndim, sb, sizeof sb), (long long)out,
                    tgi_shape_str(w->shape, w->ndim, sw, sizeof sw)),
           TG_NO_ID;
  int64_t shape[TG_MAX_DIMS];
  for (int i = 0; i < x->ndim - 1; i++)
    shape[i] = x->shape[i];
  shape[x->ndim - 1] = out;
  tgi_value *y = tgi_result(t, (tg_dtype)x->dtype, x->ndim, shape);
  if (!y) return TG_NO_ID;
  tg_status s;
  if (p == TG_PROVIDER_HOST) {
    const void *px = tgi_read_h(t, x), *pw = tgi_read_h(t, w), *pb = b ? tgi_read_h(t, b) : NULL;
    void *py = tgi_write_h(t, y);
    if (t->status) return TG_NO_ID;
    s = host_linear_forward((tg_dtype)x->dtype, px, pw, pb, py, rows, in, out);
  } else {
#ifdef TIGA_HAVE_CUDA
    const void *px = tgi_read_d(t, x), *pw = tgi_read_d(t, w), *pb = b ? tgi_read_d(t, b) : NULL;
    void *py = tgi_write_d(t, y);
    if (t->status) return TG_NO_ID;
    tgc_blas h = tgi_blas_of(t);
    s = cuda_linear_forward(&h, (tg_dtype)x->dtype, px, pw, pb, py, rows, in, out);
#else
    s = TG_ERR_INTERNAL;
#endif
  }
  if (s) return fail_oom_or_cuda(t, s, p != TG_PROVIDER_HOST, "forward"), TG_NO_ID;
  tgi_value *ins[3] = {x, w, b};
  tgi_node *n = tgi_record(t, TGI_CAP(cap_linear, p), b ? 3 : 2, ins, 1, &y);
  if (n) {
    n->p.i[P_ROWS] = rows;
    n->p.i[P_IN] = in;
    n->p.i[P_OUT] = out;
  }
  return tgi_done(t, y);
}

/* ------------------------------------------------------------ matmul */

static tg_status matmul_backward(tg_tape *t, tgi_node *n) {
  tgi_value *a = tgi_in(t, n, 0), *b = tgi_in(t, n, 1), *y = tgi_out(t, n, 0);
  int64_t batch = n->p.i[P_BATCH], M = n->p.i[P_M], K = n->p.i[P_K], N = n->p.i[P_N];
  int shared = (int)n->p.i[P_SHARED];
  bool want_a = a->requires_grad, want_b = b->requires_grad;
  tg_dtype dt = (tg_dtype)y->dtype;
  tg_status s;
  if (n->cap->provider == TG_PROVIDER_HOST) {
    const void *gy = tgi_grad_h(t, y);
    const void *pa = want_b ? tgi_read_h(t, a) : NULL, *pb = want_a ? tgi_read_h(t, b) : NULL;
    void *ga = want_a ? tgi_grad_h(t, a) : NULL, *gb = want_b ? tgi_grad_h(t, b) : NULL;
    if (t->status) return t->status;
    s = host_matmul_backward(dt, pa, pb, gy, ga, gb, batch, M, K, N, shared);
  } else {
#ifdef TIGA_HAVE_CUDA
    const void *gy = tgi_grad_d(t, y);
    const void *pa = want_b ? tgi_read_d(t, a) : NULL, *pb = want_a ? tgi_read_d(t, b) : NULL;
    tgc_grad none = {NULL, 0};
    tgc_grad ga = want_a ? grad_out(t, a) : none; /* written in this order: ga, gb */
    tgc_grad gb = want_b ? grad_out(t, b) : none;
    if (t->status) return t->status;
    tgc_blas h = tgi_blas_of(t);
    s = cuda_matmul_backward(&h, dt, pa, pb, gy, ga, gb, batch, M, K, N, shared);
#else
    return TG_ERR_INTERNAL;
#endif
  }
  if (s) fail_oom_or_cuda(t, s, n->cap->provider != TG_PROVIDER_HOST, "backward");
  return s;
}

tg_status tgi_matmul_redo(tg_tape *t, tgi_value *y) {
  const tgi_node *n = y->producer >= 0 ? &t->nodes[y->producer] : NULL;
  if (!n || strcmp(n->cap->op, "matmul") || n->cap->provider == TG_PROVIDER_HOST || !y->data.d)
    return tgi_fail(t, TG_ERR_INTERNAL, "recomputing a product that is not a CUDA matmul result"), TG_ERR_INTERNAL;
#ifdef TIGA_HAVE_CUDA
  tgi_value *a = tgi_in(t, n, 0), *b = tgi_in(t, n, 1);
  const void *pa = tgi_read_d(t, a), *pb = tgi_read_d(t, b);
  if (!pa || !pb) return t->status;
  tgc_blas h = tgi_blas_of(t);
  tg_status s = cuda_matmul_forward(&h, (tg_dtype)a->dtype, pa, pb, y->data.d, n->p.i[P_BATCH], n->p.i[P_M],
                                    n->p.i[P_K], n->p.i[P_N], (int)n->p.i[P_SHARED]);
  if (s) fail_oom_or_cuda(t, s, true, "forward");
  return s;
#else
  return tgi_fail(t, TG_ERR_INTERNAL, "CUDA matmul node in a host-only build"), TG_ERR_INTERNAL;
#endif
}

static void describe_matmul(const tgi_node *n, char *buf, size_t cap) {
  snprintf(buf, cap, "batch=%lld M=%lld K=%lld N=%lld%s", (long long)n->p.i[P_BATCH], (long long)n->p.i[P_M],
           (long long)n->p.i[P_K], (long long)n->p.i[P_N], n->p.i[P_SHARED] ? " b shared" : "");
}

static const tgi_capsule cap_matmul[2] = {{"matmul", TG_PROVIDER_HOST, matmul_backward, describe_matmul},
                                          {"matmul", TG_PROVIDER_CUDA, matmul_backward, describe_matmul}};

tg_id tg_matmul(tg_tape *t, tg_id a_id, tg_id b_id) {
  if (!tgi_op_begin(t, "tg_matmul")) return TG_NO_ID;
  tgi_value *a = tgi_arg(t, "a", a_id);
  tgi_value *b = a ? tgi_arg(t, "b", b_id) : NULL;
  if (!b) return TG_NO_ID;
  tg_provider p = tgi_pick(t, TGI_HOST_AND_CUDA);
  if (!p || !tgi_need_float_for(t, p, "a", a) || !tgi_need_float_for(t, p, "b", b) ||
      !tgi_need_same_dtype(t, "a", a, "b", b))
    return TG_NO_ID;
  char sa[TGI_SHAPE_STR_CAP], sb[TGI_SHAPE_STR_CAP];
  tgi_shape_str(a->shape, a->ndim, sa, sizeof sa);
  tgi_shape_str(b->shape, b->ndim, sb, sizeof sb);
  if (a->ndim < 2)
    return tgi_fail(t, TG_ERR_SHAPE, "argument 'a' has shape %s; expected at least 2 dims [..., M, K]", sa), TG_NO_ID;
  if (b->ndim < 2)
    return tgi_fail(t, TG_ERR_SHAPE, "argument 'b' has shape %s; expected at least 2 dims [..., K, N]", sb), TG_NO_ID;
  int nd = a->ndim;
  int64_t M = a->shape[nd - 2], K = a->shape[nd - 1], N = b->shape[b->ndim - 1];
  if (b->shape[b->ndim - 2] != K)
    return tgi_fail(t, TG_ERR_SHAPE, "argument 'b' has shape %s; expected [..., K=%lld, N] (K from 'a' %s)", sb,
                    (long long)K, sa),
           TG_NO_ID;
  bool shared = b->ndim == 2;
  bool same_batch = b->ndim == nd;
  for (int i = 0; same_batch && i < nd - 2; i++)
    same_batch = a->shape[i] == b->shape[i];
  if (!shared && !same_batch) {
    char bat[TGI_SHAPE_STR_CAP];
    return tgi_fail(t, TG_ERR_SHAPE,
                    "arguments 'a' %s and 'b' %s have different batch dims; expected 'b' [..., K, N] with the "
                    "batch dims %s of 'a', or 2-D [K, N] shared by every batch",
                    sa, sb, tgi_shape_str(a->shape, nd - 2, bat, sizeof bat)),
           TG_NO_ID;
  }
  int64_t batch = a->numel / (M * K);
  int64_t shape[TG_MAX_DIMS];
  for (int i = 0; i < nd - 1; i++)
    shape[i] = a->shape[i];
  shape[nd - 1] = N;
  tgi_value *y = tgi_result(t, (tg_dtype)a->dtype, nd, shape);
  if (!y) return TG_NO_ID;
  tg_status s;
  if (p == TG_PROVIDER_HOST) {
    const void *pa = tgi_read_h(t, a), *pb = tgi_read_h(t, b);
    void *py = tgi_write_h(t, y);
    if (t->status) return TG_NO_ID;
    s = host_matmul_forward((tg_dtype)a->dtype, pa, pb, py, batch, M, K, N, shared);
  } else {
#ifdef TIGA_HAVE_CUDA
    const void *pa = tgi_read_d(t, a), *pb = tgi_read_d(t, b);
    void *py = tgi_write_d(t, y);
    if (t->status) return TG_NO_ID;
    tgc_blas h = tgi_blas_of(t);
    s = cuda_matmul_forward(&h, (tg_dtype)a->dtype, pa, pb, py, batch, M, K, N, shared);
#else
    s = TG_ERR_INTERNAL;
#endif
  }
  if (s) return fail_oom_or_cuda(t, s, p != TG_PROVIDER_HOST, "forward"), TG_NO_ID;
  tgi_value *ins[2] = {a, b};
  tgi_node *n = tgi_record(t, TGI_CAP(cap_matmul, p), 2, ins, 1, &y);
  if (n) {
    n->p.i[P_BATCH] = batch;
    n->p.i[P_M] = M;
    n->p.i[P_K] = K;
    n->p.i[P_N] = N;
    n->p.i[P_SHARED] = shared;
  }
  return tgi_done(t, y);
}
