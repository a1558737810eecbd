/* Elementwise ops: add / sub / mul with bias-style broadcasting, scale, relu, leaky_relu,
 * gelu, tanh. One node each; the HOST capsule runs host/elementwise.c. */
#include "../host/elementwise.h"
#include "../tape/internal.h"

#include <math.h>
#include <stdio.h>

/* ------------------------------------------------------------ binary */

static tg_status binary_backward_host(tg_tape *t, tgi_node *n) {
  tgi_value *a = tgi_in(t, n, 0), *b = tgi_in(t, n, 1), *y = tgi_out(t, n, 0);
  const void *gy = tgi_grad_h(t, y);
  const void *pa = tgi_read_h(t, a), *pb = tgi_read_h(t, b);
  void *ga = a->requires_grad ? tgi_grad_h(t, a) : NULL;
  void *gb = b->requires_grad ? tgi_grad_h(t, b) : NULL;
  if (t->status) return t->status;
  host_binary_backward((tg_dtype)y->dtype, (host_binary_op)n->p.i[0], pa, a->numel, pb, b->numel, gy, ga, gb);
  return TG_OK;
}

static const tgi_capsule cap_add_host = {"add", TG_PROVIDER_HOST, binary_backward_host, NULL};
static const tgi_capsule cap_sub_host = {"sub", TG_PROVIDER_HOST, binary_backward_host, NULL};
static const tgi_capsule cap_mul_host = {"mul", TG_PROVIDER_HOST, binary_backward_host, NULL};

/* The smaller operand's shape must equal the trailing dims of the larger. */
static bool broadcast_ok(const tgi_value *big, const tgi_value *small) {
  if (small->ndim > big->ndim) return false;
  for (int i = 0; i < small->ndim; i++)
    if (small->shape[small->ndim - 1 - i] != big->shape[big->ndim - 1 - i]) return false;
  return true;
}

static tg_id binary(tg_tape *t, const char *name, host_binary_op op, const tgi_capsule *cap, tg_id a_id, tg_id b_id) {
  if (!tgi_op_begin(t, name)) return TG_NO_ID;
  tgi_value *a = tgi_arg(t, "a", a_id);
  tgi_value *b = a ? tgi_arg(t, "b", b_id) : NULL;
  if (!b) return TG_NO_ID;
  if (!tgi_need_float(t, "a", a) || !tgi_need_float(t, "b", b) || !tgi_need_same_dtype(t, "a", a, "b", b))
    return TG_NO_ID;
  const tgi_value *big = a->numel >= b->numel ? a : b, *small = big == a ? b : a;
  if (!broadcast_ok(big, small)) {
    char sa[TGI_SHAPE_STR_CAP], sb[TGI_SHAPE_STR_CAP];
    tgi_fail(t, TG_ERR_SHAPE,
             "arguments 'a' %s and 'b' %s do not broadcast; expected equal shapes, or one equal to the trailing "
             "dims of the other",
             tgi_shape_str(a->shape, a->ndim, sa, sizeof sa), tgi_shape_str(b->shape, b->ndim, sb, sizeof sb));
    return TG_NO_ID;
  }
  tg_provider p = tgi_pick(t, TGI_HOST_ONLY);
  if (!p) return TG_NO_ID;
  tgi_value *y = tgi_result(t, (tg_dtype)a->dtype, big->ndim, big->shape);
  if (!y) return TG_NO_ID;
  const void *pa = tgi_read_h(t, a), *pb = tgi_read_h(t, b);
  void *py = tgi_write_h(t, y);
  if (!pa || !pb || !py) return TG_NO_ID;
  host_binary_forward((tg_dtype)a->dtype, op, pa, a->numel, pb, b->numel, py);
  tgi_value *in[2] = {a, b};
  tgi_node *n = tgi_record(t, cap, 2, in, 1, &y);
  if (n) n->p.i[0] = op;
  return tgi_done(t, y);
}

tg_id tg_add(tg_tape *t, tg_id a, tg_id b) { return binary(t, "tg_add", HOST_ADD, &cap_add_host, a, b); }
tg_id tg_sub(tg_tape *t, tg_id a, tg_id b) { return binary(t, "tg_sub", HOST_SUB, &cap_sub_host, a, b); }
tg_id tg_mul(tg_tape *t, tg_id a, tg_id b) { return binary(t, "tg_mul", HOST_MUL, &cap_mul_host, a, b); }

/* ------------------------------------------------------------ unary */

static tg_status unary_backward_host(tg_tape *t, tgi_node *n) {
  tgi_value *x = tgi_in(t, n, 0), *y = tgi_out(t, n, 0);
  if (!x->requires_grad) return TG_OK;
  const void *gy = tgi_grad_h(t, y);
  const void *px = tgi_read_h(t, x), *py = tgi_read_h(t, y);
  void *gx = tgi_grad_h(t, x);
  if (t->status) return t->status;
  host_unary_backward((tg_dtype)x->dtype, (host_unary_op)n->p.i[0], n->p.f[1], px, py, gy, gx, x->numel);
  return TG_OK;
}

static void describe_alpha(const tgi_node *n, char *buf, size_t cap) {
  snprintf(buf, cap, "alpha=%g", n->p.f[1]);
}

static const tgi_capsule cap_scale_host = {"scale", TG_PROVIDER_HOST, unary_backward_host, describe_alpha};
static const tgi_capsule cap_relu_host = {"relu", TG_PROVIDER_HOST, unary_backward_host, NULL};
static const tgi_capsule cap_leaky_host = {"leaky_relu", TG_PROVIDER_HOST, unary_backward_host, describe_alpha};
static const tgi_capsule cap_gelu_host = {"gelu", TG_PROVIDER_HOST, unary_backward_host, NULL};
static const tgi_capsule cap_tanh_host = {"tanh", TG_PROVIDER_HOST, unary_backward_host, NULL};

static tg_id unary(tg_tape *t, const char *name, host_unary_op op, double alpha, const tgi_capsule *cap, tg_id x_id) {
  if (!tgi_op_begin(t, name)) return TG_NO_ID;
  tgi_value *x = tgi_arg(t, "x", x_id);
  if (!x || !tgi_need_float(t, "x", x)) return TG_NO_ID;
  if (!isfinite(alpha)) {
    tgi_fail(t, TG_ERR_INVALID_ARGUMENT, "argument '%s' is %g; expected a finite number",
             op == HOST_SCALE ? "s" : "slope", alpha);
    return TG_NO_ID;
  }
  tg_provider p = tgi_pick(t, TGI_HOST_ONLY);
  if (!p) return TG_NO_ID;
  tgi_value *y = tgi_result(t, (tg_dtype)x->dtype, x->ndim, x->shape);
  if (!y) return TG_NO_ID;
  const void *px = tgi_read_h(t, x);
  void *py = tgi_write_h(t, y);
  if (!px || !py) return TG_NO_ID;
  host_unary_forward((tg_dtype)x->dtype, op, alpha, px, py, x->numel);
  tgi_node *n = tgi_record(t, cap, 1, &x, 1, &y);
  if (n) {
    n->p.i[0] = op;
    n->p.f[1] = alpha;
  }
  return tgi_done(t, y);
}

tg_id tg_scale(tg_tape *t, tg_id x, double s) { return unary(t, "tg_scale", HOST_SCALE, s, &cap_scale_host, x); }
tg_id tg_relu(tg_tape *t, tg_id x) { return unary(t, "tg_relu", HOST_RELU, 0, &cap_relu_host, x); }
tg_id tg_leaky_relu(tg_tape *t, tg_id x, double slope) {
  return unary(t, "tg_leaky_relu", HOST_LEAKY_RELU, slope, &cap_leaky_host, x);
}
tg_id tg_gelu(tg_tape *t, tg_id x) { return unary(t, "tg_gelu", HOST_GELU, 0, &cap_gelu_host, x); }
tg_id tg_tanh(tg_tape *t, tg_id x) { return unary(t, "tg_tanh", HOST_TANH, 0, &cap_tanh_host, x); }
