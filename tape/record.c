/* What an op call does around its kernel: argument checks, provider choice, result values, node
 * recording. (Placement of bytes: placement.c; error helpers: errors.c.) */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool tgi_op_begin(tg_tape *t, const char *op) {
  if (!t) {
    tgi_set_last_error("%s: argument 'tape' is NULL; expected a tape from tg_tape_create", op);
    return false;
  }
  if (t->status != TG_OK) return false; /* sticky: do nothing */
  bool acquired;
  if (!tgi_thread_enter(t->rt, op, &acquired)) return false; /* debug builds: another thread is inside */
  t->cur_op = op;
  t->pending_h2d = t->pending_d2h = 0;
  if (t->check_finite) tgi_finite_arm(t, 0, INT32_MAX - (int32_t)t->nnodes); /* the node this call records */
  return true;
}

tgi_value *tgi_arg(tg_tape *t, const char *arg, tg_id id) {
  if (id == TG_ABSENT) {
    tgi_fail(t, TG_ERR_INVALID_ID, "argument '%s' is TG_ABSENT; expected the id of a value (it is not optional)", arg);
    return NULL;
  }
  if (id < 0) {
    tgi_fail(t, TG_ERR_INVALID_ID,
             "argument '%s' is %s; expected the id of a value (was it the result of a failed call?)", arg,
             id == TG_NO_ID ? "TG_NO_ID" : "a negative id");
    return NULL;
  }
  const char *why;
  tgi_value *v = tgi_resolve(t, id, &why);
  if (!v) {
    if (!strcmp(why, "stale"))
      tgi_fail(t, TG_ERR_INVALID_ID, "argument '%s' is id %lld, a step value dropped by tg_tape_reset (stale id)", arg,
               (long long)id);
    else
      tgi_fail(t, TG_ERR_INVALID_ID, "argument '%s' is id %lld, which this tape never issued%s", arg, (long long)id,
               !strcmp(why, "foreign") ? " (another tape's id?)" : "");
    return NULL;
  }
  if (!v->data.valid) {
    tgi_fail(t, TG_ERR_STATE, "argument '%s' (id %lld) holds no data", arg, (long long)id);
    return NULL;
  }
  return v;
}

tgi_value *tgi_arg_opt(tg_tape *t, const char *arg, tg_id id, bool *ok) {
  *ok = true;
  if (id == TG_ABSENT) return NULL;
  if (id == TG_NO_ID) {
    *ok = false;
    tgi_fail(t, TG_ERR_INVALID_ID,
             "argument '%s' is TG_NO_ID (what a failed call returns); pass TG_ABSENT for no %s, or the id of a value",
             arg, arg);
    return NULL;
  }
  tgi_value *v = tgi_arg(t, arg, id);
  *ok = v != NULL;
  return v;
}

bool tgi_need_float(tg_tape *t, const char *arg, const tgi_value *v) {
  if (v->dtype == TG_F32 || v->dtype == TG_F64) return true;
  return tgi_fail(t, TG_ERR_DTYPE, "argument '%s' has dtype %s; expected f32 or f64", arg,
                  tg_dtype_name((tg_dtype)v->dtype));
}

bool tgi_need_float_for(tg_tape *t, tg_provider p, const char *arg, const tgi_value *v) {
  if (p == TG_PROVIDER_HOST) return tgi_need_float(t, arg, v);
  if (v->dtype == TG_F32 || v->dtype == TG_F16 || v->dtype == TG_BF16) return true;
  return tgi_fail(t, TG_ERR_DTYPE, "argument '%s' has dtype %s; provider %s takes f32, f16 or bf16%s", arg,
                  tg_dtype_name((tg_dtype)v->dtype), tg_provider_name(p),
                  v->dtype == TG_F64 ? " (f64 is computed on the HOST provider)" : "");
}

bool tgi_need_same_dtype(tg_tape *t, const char *a, const tgi_value *va, const char *b, const tgi_value *vb) {
  if (va->dtype == vb->dtype) return true;
  return tgi_fail(t, TG_ERR_DTYPE, "arguments '%s' (%s) and '%s' (%s) must have the same dtype", a,
                  tg_dtype_name((tg_dtype)va->dtype), b, tg_dtype_name((tg_dtype)vb->dtype));
}

tg_provider tgi_pick(tg_tape *t, unsigned supported) {
  tg_provider p = t->provider;
  bool dev = tgi_has_device(t);
  if (p == TG_PROVIDER_AUTO) {
    if (dev && (supported & TGI_P(TG_PROVIDER_CUDA_FUSED))) return TG_PROVIDER_CUDA_FUSED;
    if (dev && (supported & TGI_P(TG_PROVIDER_CUDA_COMPOSED))) return TG_PROVIDER_CUDA_COMPOSED;
    if (supported & TGI_P(TG_PROVIDER_HOST)) return TG_PROVIDER_HOST;
    tgi_fail(t, dev ? TG_ERR_UNSUPPORTED : TG_ERR_NO_DEVICE, "no provider available for this op on this runtime");
    return TG_PROVIDER_AUTO;
  }
  if ((p == TG_PROVIDER_CUDA_FUSED || p == TG_PROVIDER_CUDA_COMPOSED) && !dev) {
    tgi_fail(t, TG_ERR_NO_DEVICE, "provider %s was asked for, but the runtime is host-only (tg_runtime_create_host)",
             tg_provider_name(p));
    return TG_PROVIDER_AUTO;
  }
  if (!(supported & TGI_P(p))) {
    tgi_fail(t, TG_ERR_UNSUPPORTED, "provider %s is not implemented for this op", tg_provider_name(p));
    return TG_PROVIDER_AUTO;
  }
  return p;
}

tgi_value *tgi_result(tg_tape *t, tg_dtype dt, int ndim, const int64_t *shape) {
  if (t->status != TG_OK) return NULL;
  if (ndim < 0 || ndim > TG_MAX_DIMS) {
    tgi_fail(t, TG_ERR_SHAPE, "result would have %d dims; at most %d are supported", ndim, TG_MAX_DIMS);
    return NULL;
  }
  tgi_value *v = tgi_slot_new(t);
  if (!v) {
    tgi_fail(t, TG_ERR_OUT_OF_MEMORY, "out of host memory for a value slot");
    return NULL;
  }
  v->kind = TGI_RESULT;
  v->dtype = (uint8_t)dt;
  v->ndim = (uint8_t)ndim;
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 1) { /* no value is empty (kernels divide by sizes): an op that would make one fails */
      tgi_fail(t, TG_ERR_SHAPE, "the result would have size %lld at dim %d; every size must be >= 1",
               (long long)shape[i], i);
      v->kind = TGI_RESULT; /* dropped by the next reset */
      return NULL;
    }
    v->shape[i] = shape[i];
    n *= shape[i];
  }
  v->numel = n;
  v->bytes = (size_t)n * tg_dtype_size(dt);
  return v;
}

/* ------------------------------------------------------------ nodes */

bool tgi_needs_grad(const tg_tape *t, uint32_t n_in, tgi_value *const *in) {
  if (!t->grad_enabled) return false;
  for (uint32_t i = 0; i < n_in; i++)
    if (in[i] && in[i]->requires_grad) return true;
  return false;
}

tgi_node *tgi_record(tg_tape *t, const tgi_capsule *cap, uint32_t n_in, tgi_value *const *in, uint32_t n_out,
                     tgi_value *const *out) {
  if (t->status != TG_OK || !t->grad_enabled) return NULL;
  if (n_out > TGI_MAX_OUT) {
    tgi_fail(t, TG_ERR_INTERNAL, "a node with %u outputs (at most %d)", n_out, TGI_MAX_OUT);
    return NULL;
  }
  if (t->nnodes == t->capnodes) {
    uint32_t nc = t->capnodes ? t->capnodes * 2 : 256;
    tgi_node *nn = tgi_realloc(t->nodes, nc * sizeof *nn);
    if (!nn) {
      tgi_fail(t, TG_ERR_OUT_OF_MEMORY, "out of host memory for a node");
      return NULL;
    }
    t->nodes = nn;
    t->capnodes = nc;
  }
  uint32_t *ins = n_in ? tgi_arena_alloc(&t->host_arena, n_in * sizeof *ins) : NULL;
  uint64_t *vers = n_in ? tgi_arena_alloc(&t->host_arena, n_in * sizeof *vers) : NULL;
  if (n_in && (!ins || !vers)) {
    tgi_fail(t, TG_ERR_OUT_OF_MEMORY, "out of host memory for a node");
    return NULL;
  }
  tgi_node *n = &t->nodes[t->nnodes];
  memset(n, 0, sizeof *n);
  n->cap = cap;
  n->n_in = n_in;
  n->in = ins;
  n->in_ver = vers;
  for (uint32_t i = 0; i < n_in; i++) {
    ins[i] = tgi_slot_of(t, in[i]);
    vers[i] = in[i] ? in[i]->version : 0;
  }
  n->n_out = n_out;
  bool grad = tgi_needs_grad(t, n_in, in);
  for (uint32_t i = 0; i < n_out && i < TGI_MAX_OUT; i++) {
    n->out[i] = tgi_slot_of(t, out[i]);
    out[i]->producer = (int32_t)t->nnodes;
    out[i]->requires_grad = grad;
  }
  n->h2d = t->pending_h2d;
  n->d2h = t->pending_d2h;
  t->pending_h2d = t->pending_d2h = 0;
  t->nnodes++;
  return n;
}

void tgi_nodes_drop(tg_tape *t, uint32_t from) {
  for (uint32_t i = from; i < t->nnodes; i++) {
    tgi_node *n = &t->nodes[i];
    if (n->drop) n->drop(n->held);
    n->drop = NULL;
    n->held = NULL;
  }
}

tg_id tgi_done(tg_tape *t, tgi_value *v) {
  if (t->check_finite && t->status == TG_OK) tgi_finite_forward(t);
  tgi_finite_disarm();
  tgi_thread_leave(t->rt);
  if (t->status != TG_OK || !v) return TG_NO_ID;
  return tgi_id_of(t, v);
}
