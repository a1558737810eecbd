/* Elementwise ops: add / sub / mul with NumPy broadcasting, scale, relu, leaky_relu, gelu,
 * tanh, elu. One node each; HOST runs host/elementwise.c, CUDA runs cuda/elementwise.cu. */
#include "../host/elementwise.h"
#include "../tape/internal.h"

#include <math.h>
#include <stdio.h>

#ifdef TIGA_HAVE_CUDA
#include "../cuda/elementwise.h"
#endif

/* ------------------------------------------------------------ binary */

/* add's operand x of the result's element count (not broadcast) gets exactly gy: its gradient may
 * take gy's buffer instead of a new one (tgi_grad_pass; saves a buffer of the result's size and
 * the add into it, e.g. the bias add of a layer output). */
static bool passes(tg_tape *t, host_binary_op op, tgi_value *x, tgi_value *y, int side) {
  return op == HOST_ADD && x->numel == y->numel && tgi_grad_pass(t, x, y, side);
}

static tg_status binary_backward(tg_tape *t, tgi_node *n) {
  tgi_value *a = tgi_in(t, n, 0), *b = tgi_in(t, n, 1), *y = tgi_out(t, n, 0);
  host_binary_op op = (host_binary_op)n->p.i[0];
  host_bcast bc;
  int ndy;
  int64_t shy[TG_MAX_DIMS];
  if (host_bcast_plan(&bc, a->ndim, a->shape, b->ndim, b->shape, &ndy, shy) >= 0) /* checked by the forward */
    return tgi_error(t, TG_ERR_INTERNAL, "%s backward: the operands no longer broadcast", n->cap->op);
  if (n->cap->provider == TG_PROVIDER_HOST) {
    const void *gy = tgi_grad_h(t, y);
    const void *pa = tgi_read_h(t, a), *pb = tgi_read_h(t, b);
    if (t->status) return t->status;
    const bool pass_a = a->requires_grad && passes(t, op, a, y, TGI_ON_HOST);
    const bool pass_b = b->requires_grad && passes(t, op, b, y, TGI_ON_HOST);
    void *ga = a->requires_grad && !pass_a ? tgi_grad_h(t, a) : NULL;
    void *gb = b->requires_grad && !pass_b ? tgi_grad_h(t, b) : NULL;
    if (t->status) return t->status;
    if (ga || gb) host_binary_backward_bc((tg_dtype)y->dtype, op, &bc, pa, pb, gy, ga, gb);
    return TG_OK;
  }
#ifdef TIGA_HAVE_CUDA
  const void *gy = tgi_grad_d(t, y);
  const void *pa = tgi_read_d(t, a), *pb = tgi_read_d(t, b);
  if (t->status) return t->status;
  const bool pass_a = a->requires_grad && passes(t, op, a, y, TGI_ON_DEV);
  const bool pass_b = b->requires_grad && passes(t, op, b, y, TGI_ON_DEV);
  void *ga = a->requires_grad && !pass_a ? tgi_grad_d(t, a) : NULL;
  void *gb = b->requires_grad && !pass_b ? tgi_grad_d(t, b) : NULL;
  if (t->status) return t->status;
  if (!ga && !gb) return TG_OK;
  size_t ws_bytes = cuda_binary_backward_bc_workspace(&bc, ga != NULL, gb != NULL);
  void *ws = ws_bytes ? tgi_scratch_d(t, ws_bytes) : NULL; /* partial sums of broadcast gradients */
  if (t->status) return t->status;
  tg_status s = cuda_binary_backward_bc(TGI_STREAM(t), (tg_dtype)y->dtype, op, &bc, pa, pb, gy, ga, gb, ws, ws_bytes);
  if (s) tgi_fail_cuda(t, s, "backward");
  return s;
#else
  return TG_ERR_INTERNAL;
#endif
}

static const tgi_capsule cap_add_host = {"add", TG_PROVIDER_HOST, binary_backward, NULL};
static const tgi_capsule cap_sub_host = {"sub", TG_PROVIDER_HOST, binary_backward, NULL};
static const tgi_capsule cap_mul_host = {"mul", TG_PROVIDER_HOST, binary_backward, NULL};
static const tgi_capsule cap_add_cuda = {"add", TG_PROVIDER_CUDA, binary_backward, NULL};
static const tgi_capsule cap_sub_cuda = {"sub", TG_PROVIDER_CUDA, binary_backward, NULL};
static const tgi_capsule cap_mul_cuda = {"mul", TG_PROVIDER_CUDA, binary_backward, NULL};
static const tgi_capsule *const cap_binary[3][2] = {
    {&cap_add_host, &cap_add_cuda}, {&cap_sub_host, &cap_sub_cuda}, {&cap_mul_host, &cap_mul_cuda}};

static tg_id binary(tg_tape *t, const char *name, host_binary_op op, tg_id a_id, tg_id b_id) {
  if (!tgi_op_begin(t, name)) return TG_NO_ID;
  tgi_value *a = tgi_arg(t, "a", a_id);
  tgi_value *b = a ? tgi_arg(t, "b", b_id) : NULL;
  if (!b) return TG_NO_ID;
  tg_provider p = tgi_pick(t, TGI_HOST_AND_CUDA);
  if (!p) return TG_NO_ID;
  if (!tgi_need_float_for(t, p, "a", a) || !tgi_need_float_for(t, p, "b", b) || !tgi_need_same_dtype(t, "a", a, "b", b))
    return TG_NO_ID;
  host_bcast bc;
  int ndy;
  int64_t shy[TG_MAX_DIMS];
  int bad = host_bcast_plan(&bc, a->ndim, a->shape, b->ndim, b->shape, &ndy, shy);
  if (bad >= 0) {
    char sa[TGI_SHAPE_STR_CAP], sb[TGI_SHAPE_STR_CAP];
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim; /* both operands have dim `bad` (neither size is 1) */
    tgi_fail(t, TG_ERR_SHAPE,
             "arguments 'a' %s and 'b' %s do not broadcast: dim %d has %lld and %lld; expected equal sizes or 1 "
             "(NumPy's rule)",
             tgi_shape_str(a->shape, a->ndim, sa, sizeof sa), tgi_shape_str(b->shape, b->ndim, sb, sizeof sb), bad,
             (long long)a->shape[bad - (nd - a->ndim)], (long long)b->shape[bad - (nd - b->ndim)]);
    return TG_NO_ID;
  }
  tgi_value *y = tgi_result(t, (tg_dtype)a->dtype, ndy, shy);
  if (!y) return TG_NO_ID;
  if (p == TG_PROVIDER_HOST) {
    const void *pa = tgi_read_h(t, a), *pb = tgi_read_h(t, b);
    void *py = tgi_write_h(t, y);
    if (!pa || !pb || !py) return TG_NO_ID;
    host_binary_forward_bc((tg_dtype)a->dtype, op, &bc, pa, pb, py);
  } else {
#ifdef TIGA_HAVE_CUDA
    const void *pa = tgi_read_d(t, a), *pb = tgi_read_d(t, b);
    void *py = tgi_write_d(t, y);
    if (!pa || !pb || !py) return TG_NO_ID;
    tg_status s = cuda_binary_forward_bc(TGI_STREAM(t), (tg_dtype)a->dtype, op, &bc, pa, pb, py);
    if (s) return tgi_fail_cuda(t, s, "forward"), TG_NO_ID;
#endif
  }
  tgi_value *in[2] = {a, b};
  tgi_node *n = tgi_record(t, cap_binary[op][p != TG_PROVIDER_HOST], 2, in, 1, &y);
  if (n) n->p.i[0] = op;
  return tgi_done(t, y);
}

tg_id tg_add(tg_tape *t, tg_id a, tg_id b) { return binary(t, "tg_add", HOST_ADD, a, b); }
tg_id tg_sub(tg_tape *t, tg_id a, tg_id b) { return binary(t, "tg_sub", HOST_SUB, a, b); }
tg_id tg_mul(tg_tape *t, tg_id a, tg_id b) { return binary(t, "tg_mul", HOST_MUL, a, b); }

/* ------------------------------------------------------------ unary */

static tg_status unary_backward(tg_tape *t, tgi_node *n) {
  tgi_value *x = tgi_in(t, n, 0), *y = tgi_out(t, n, 0);
  if (!x->requires_grad) return TG_OK;
  host_unary_op op = (host_unary_op)n->p.i[0];
  if (n->cap->provider == TG_PROVIDER_HOST) {
    const void *gy = tgi_grad_h(t, y);
    const void *px = tgi_read_h(t, x), *py = tgi_read_h(t, y);
    void *gx = tgi_grad_h(t, x);
    if (t->status) return t->status;
    host_unary_backward((tg_dtype)x->dtype, op, n->p.f[1], px, py, gy, gx, x->numel);
    return TG_OK;
  }
#ifdef TIGA_HAVE_CUDA
  const void *gy = tgi_grad_d(t, y);
  const void *px = tgi_read_d(t, x), *py = tgi_read_d(t, y);
  void *gx = tgi_grad_d(t, x);
  if (t->status) return t->status;
  tg_status s = cuda_unary_backward(TGI_STREAM(t), (tg_dtype)x->dtype, op, n->p.f[1], px, py, gy, gx, x->numel);
  if (s) tgi_fail_cuda(t, s, "backward");
  return s;
#else
  return TG_ERR_INTERNAL;
#endif
}

static void describe_alpha(const tgi_node *n, char *buf, size_t cap) { snprintf(buf, cap, "alpha=%g", n->p.f[1]); }

#define UNARY_CAPS(name, str, desc)                                                                                    \
  static const tgi_capsule cap_##name##_host = {str, TG_PROVIDER_HOST, unary_backward, desc};                          \
  static const tgi_capsule cap_##name##_cuda = {str, TG_PROVIDER_CUDA, unary_backward, desc};
UNARY_CAPS(scale, "scale", describe_alpha)
UNARY_CAPS(relu, "relu", NULL)
UNARY_CAPS(leaky, "leaky_relu", describe_alpha)
UNARY_CAPS(gelu, "gelu", NULL)
UNARY_CAPS(tanh, "tanh", NULL)
UNARY_CAPS(elu, "elu", describe_alpha)
static const tgi_capsule *const cap_unary[6][2] = {{&cap_scale_host, &cap_scale_cuda}, {&cap_relu_host, &cap_relu_cuda},
                                                   {&cap_leaky_host, &cap_leaky_cuda}, {&cap_gelu_host, &cap_gelu_cuda},
                                                   {&cap_tanh_host, &cap_tanh_cuda},   {&cap_elu_host, &cap_elu_cuda}};

static tg_id unary(tg_tape *t, const char *name, host_unary_op op, double alpha, tg_id x_id) {
  if (!tgi_op_begin(t, name)) return TG_NO_ID;
  tgi_value *x = tgi_arg(t, "x", x_id);
  if (!x) return TG_NO_ID;
  if (!isfinite(alpha)) {
    tgi_fail(t, TG_ERR_INVALID_ARGUMENT, "argument '%s' is %g; expected a finite number",
             op == HOST_SCALE ? "s"
             : op == HOST_ELU ? "alpha"
                              : "slope",
             alpha);
    return TG_NO_ID;
  }
  if (op == HOST_ELU && !(alpha > 0)) {
    tgi_fail(t, TG_ERR_INVALID_ARGUMENT, "argument 'alpha' is %g; expected a number > 0 (1 is the usual ELU)", alpha);
    return TG_NO_ID;
  }
  tg_provider p = tgi_pick(t, TGI_HOST_AND_CUDA);
  if (!p || !tgi_need_float_for(t, p, "x", x)) return TG_NO_ID;
  tgi_value *y = tgi_result(t, (tg_dtype)x->dtype, x->ndim, x->shape);
  if (!y) return TG_NO_ID;
  if (p == TG_PROVIDER_HOST) {
    const void *px = tgi_read_h(t, x);
    void *py = tgi_write_h(t, y);
    if (!px || !py) return TG_NO_ID;
    host_unary_forward((tg_dtype)x->dtype, op, alpha, px, py, x->numel);
  } else {
#ifdef TIGA_HAVE_CUDA
    const void *px = tgi_read_d(t, x);
    void *py = tgi_write_d(t, y);
    if (!px || !py) return TG_NO_ID;
    tg_status s = cuda_unary_forward(TGI_STREAM(t), (tg_dtype)x->dtype, op, alpha, px, py, x->numel);
    if (s) return tgi_fail_cuda(t, s, "forward"), TG_NO_ID;
#endif
  }
  tgi_node *n = tgi_record(t, cap_unary[op][tgi_lowering(p, 2)], 1, &x, 1, &y);
  if (n) {
    n->p.i[0] = op;
    n->p.f[1] = alpha;
  }
  return tgi_done(t, y);
}

tg_id tg_scale(tg_tape *t, tg_id x, double s) { return unary(t, "tg_scale", HOST_SCALE, s, x); }
tg_id tg_relu(tg_tape *t, tg_id x) { return unary(t, "tg_relu", HOST_RELU, 0, x); }
tg_id tg_leaky_relu(tg_tape *t, tg_id x, double slope) { return unary(t, "tg_leaky_relu", HOST_LEAKY_RELU, slope, x); }
tg_id tg_gelu(tg_tape *t, tg_id x) { return unary(t, "tg_gelu", HOST_GELU, 0, x); }
tg_id tg_tanh(tg_tape *t, tg_id x) { return unary(t, "tg_tanh", HOST_TANH, 0, x); }
tg_id tg_elu(tg_tape *t, tg_id x, double alpha) { return unary(t, "tg_elu", HOST_ELU, alpha, x); }
