/* What an op call does around its kernel: argument checks, sticky errors, provider choice,
 * result values, data placement and transfers, node recording. */
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
  t->cur_op = op;
  t->pending_h2d = t->pending_d2h = 0;
  return true;
}

bool tgi_fail(tg_tape *t, tg_status s, const char *fmt, ...) {
  if (t->status != TG_OK) return false; /* the first failure wins */
  char tmp[TGI_MSG_CAP];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  snprintf(t->msg, sizeof t->msg, "%s: %s", t->cur_op ? t->cur_op : "tiga", tmp);
  t->status = s;
  tgi_set_last_error("%s", t->msg);
  return false;
}

tgi_value *tgi_arg(tg_tape *t, const char *arg, tg_id id) {
  if (id < 0) {
    tgi_fail(t, TG_ERR_INVALID_ID, "argument '%s' is TG_NO_ID; expected the id of a value", arg);
    return NULL;
  }
  uint32_t idx = (uint32_t)((uint64_t)id & 0xffffffffu);
  uint32_t gen = (uint32_t)((uint64_t)id >> 32);
  if ((gen >> TGI_GEN_BITS) != t->tag) {
    tgi_fail(t, TG_ERR_INVALID_ID, "argument '%s' is id %lld, which this tape never issued (another tape's id?)", arg,
             (long long)id);
    return NULL;
  }
  if (idx >= t->nvals) {
    tgi_fail(t, TG_ERR_INVALID_ID, "argument '%s' is id %lld, which this tape never issued", arg, (long long)id);
    return NULL;
  }
  tgi_value *v = tgi_slot(t, idx);
  if (v->kind == TGI_FREE || v->gen != gen) {
    tgi_fail(t, TG_ERR_INVALID_ID, "argument '%s' is id %lld, a step value dropped by tg_tape_reset (stale id)", arg,
             (long long)id);
    return NULL;
  }
  if (!v->data.valid) {
    tgi_fail(t, TG_ERR_STATE, "argument '%s' (id %lld) holds no data", arg, (long long)id);
    return NULL;
  }
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

tgi_value *tgi_slot_new(tg_tape *t);

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
    v->shape[i] = shape[i];
    n *= shape[i];
  }
  v->numel = n;
  v->bytes = (size_t)n * tg_dtype_size(dt);
  return v;
}

/* ------------------------------------------------------------ placement */

static void *side_alloc(tg_tape *t, tgi_value *v, tgi_buf *b, int side) {
  void **slot = side == TGI_ON_HOST ? &b->h : &b->d;
  if (*slot) return *slot;
  size_t bytes = v->bytes ? v->bytes : 1;
  if (side == TGI_ON_DEV && !t->rt->dev) {
    tgi_fail(t, TG_ERR_NO_DEVICE, "device memory needed, but the runtime is host-only");
    return NULL;
  }
  if (v->kind == TGI_PARAM) {
    if (side == TGI_ON_HOST) {
      *slot = aligned_alloc(64, (bytes + 63) / 64 * 64);
      if (!*slot) tgi_fail(t, TG_ERR_OUT_OF_MEMORY, "out of host memory (%zu bytes for a parameter)", bytes);
    } else {
      char msg[TGI_MSG_CAP];
      tg_status s = tgi_device_alloc(t->rt->dev, bytes, slot, msg);
      if (s) tgi_fail(t, s, "%s", msg);
    }
  } else {
    *slot = side == TGI_ON_HOST ? tgi_arena_alloc(&t->host_arena, bytes) : tgi_arena_alloc(&t->dev_arena, bytes);
    if (!*slot)
      tgi_fail(t, TG_ERR_OUT_OF_MEMORY, "out of %s memory (%zu bytes for a step value)",
               side == TGI_ON_HOST ? "host" : "device", bytes);
  }
  return *slot;
}

/* Makes side `side` of b current, copying from the other side when needed. */
static void *make_current(tg_tape *t, tgi_value *v, tgi_buf *b, int side) {
  if (b->valid & side) return side == TGI_ON_HOST ? b->h : b->d;
  void *p = side_alloc(t, v, b, side);
  if (!p) return NULL;
  char msg[TGI_MSG_CAP];
  tg_status s = TG_OK;
  if (side == TGI_ON_HOST && (b->valid & TGI_ON_DEV)) {
    s = tgi_device_d2h(t->rt->dev, p, b->d, v->bytes, msg);
    t->pending_d2h++;
  } else if (side == TGI_ON_DEV && (b->valid & TGI_ON_HOST)) {
    /* step values live in pinned arena memory: upload asynchronously (reset waits for it);
     * parameters' host copies are ordinary memory: synchronous */
    s = v->kind == TGI_PARAM ? tgi_device_h2d(t->rt->dev, p, b->h, v->bytes, msg)
                             : tgi_device_h2d_async(t->rt->dev, p, b->h, v->bytes, msg);
    t->pending_h2d++;
  } else {
    return p; /* nothing valid anywhere: caller fills it */
  }
  if (s) {
    tgi_fail(t, s, "moving a value between host and device failed: %s", msg);
    return NULL;
  }
  b->valid |= (uint8_t)side;
  return p;
}

void *tgi_read_h(tg_tape *t, tgi_value *v) {
  if (!v->data.valid) {
    tgi_fail(t, TG_ERR_INTERNAL, "a value was read before anything wrote it");
    return NULL;
  }
  return make_current(t, v, &v->data, TGI_ON_HOST);
}
void *tgi_read_d(tg_tape *t, tgi_value *v) {
  if (!v->data.valid) {
    tgi_fail(t, TG_ERR_INTERNAL, "a value was read before anything wrote it");
    return NULL;
  }
  return make_current(t, v, &v->data, TGI_ON_DEV);
}
void *tgi_write_h(tg_tape *t, tgi_value *v) {
  void *p = side_alloc(t, v, &v->data, TGI_ON_HOST);
  if (p) v->data.valid = TGI_ON_HOST;
  return p;
}
void *tgi_write_d(tg_tape *t, tgi_value *v) {
  void *p = side_alloc(t, v, &v->data, TGI_ON_DEV);
  if (p) v->data.valid = TGI_ON_DEV;
  return p;
}

static void *grad_side(tg_tape *t, tgi_value *v, int side, bool *fresh) {
  tgi_buf *b = &v->grad;
  if (fresh) *fresh = false;
  if (side == TGI_ON_HOST && b->valid == (TGI_ON_HOST | TGI_ON_DEV) && v->kind != TGI_PARAM) {
    /* the host copy is about to change and may still be uploading */
    char msg[TGI_MSG_CAP];
    tg_status s = tgi_device_h2d_wait(t->rt->dev, msg);
    if (s) {
      tgi_fail(t, s, "%s", msg);
      return NULL;
    }
  }
  if (b->valid) {
    void *p = make_current(t, v, b, side);
    if (p) b->valid = (uint8_t)side; /* the caller accumulates into this side */
    return p;
  }
  void *p = side_alloc(t, v, b, side);
  if (!p) return NULL;
  if (fresh) {
    *fresh = true; /* the caller overwrites every element */
  } else if (side == TGI_ON_HOST) {
    memset(p, 0, v->bytes);
  } else {
    char msg[TGI_MSG_CAP];
    tg_status s = tgi_device_zero(t->rt->dev, p, v->bytes, msg);
    if (s) {
      tgi_fail(t, s, "%s", msg);
      return NULL;
    }
  }
  b->valid = (uint8_t)side;
  v->has_grad = true;
  return p;
}

void *tgi_grad_h(tg_tape *t, tgi_value *v) { return grad_side(t, v, TGI_ON_HOST, NULL); }
void *tgi_grad_h_fresh(tg_tape *t, tgi_value *v, bool *fresh) { return grad_side(t, v, TGI_ON_HOST, fresh); }
void *tgi_grad_d_fresh(tg_tape *t, tgi_value *v, bool *fresh) { return grad_side(t, v, TGI_ON_DEV, fresh); }

static void *state_side(tg_tape *t, tgi_value *v, int which, int side) {
  if (v->kind != TGI_PARAM) {
    tgi_fail(t, TG_ERR_INTERNAL, "optimizer state asked for a value that is not a parameter");
    return NULL;
  }
  tgi_buf *b = which ? &v->opt_v : &v->opt_m;
  if (b->valid) {
    void *p = make_current(t, v, b, side);
    if (p) b->valid = (uint8_t)side; /* the caller updates this side */
    return p;
  }
  void *p = side_alloc(t, v, b, side);
  if (!p) return NULL;
  if (side == TGI_ON_HOST) {
    memset(p, 0, v->bytes);
  } else {
    char msg[TGI_MSG_CAP];
    tg_status s = tgi_device_zero(t->rt->dev, p, v->bytes, msg);
    if (s) {
      tgi_fail(t, s, "%s", msg);
      return NULL;
    }
  }
  b->valid = (uint8_t)side;
  return p;
}

void *tgi_state_h(tg_tape *t, tgi_value *v, int which) { return state_side(t, v, which, TGI_ON_HOST); }
void *tgi_state_d(tg_tape *t, tgi_value *v, int which) { return state_side(t, v, which, TGI_ON_DEV); }
void *tgi_grad_d(tg_tape *t, tgi_value *v) { return grad_side(t, v, TGI_ON_DEV, NULL); }

void *tgi_scratch_h(tg_tape *t, size_t bytes) {
  void *p = tgi_arena_alloc(&t->host_arena, bytes);
  if (!p) tgi_fail(t, TG_ERR_OUT_OF_MEMORY, "out of host memory (%zu bytes of scratch)", bytes);
  return p;
}
void *tgi_scratch_d(tg_tape *t, size_t bytes) {
  if (!t->rt->dev) {
    tgi_fail(t, TG_ERR_NO_DEVICE, "device scratch needed, but the runtime is host-only");
    return NULL;
  }
  void *p = tgi_arena_alloc(&t->dev_arena, bytes);
  if (!p) tgi_fail(t, TG_ERR_OUT_OF_MEMORY, "out of device memory (%zu bytes of scratch)", bytes);
  return p;
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
  if (t->nnodes == t->capnodes) {
    uint32_t nc = t->capnodes ? t->capnodes * 2 : 256;
    tgi_node *nn = realloc(t->nodes, nc * sizeof *nn);
    if (!nn) {
      tgi_fail(t, TG_ERR_OUT_OF_MEMORY, "out of host memory for a node");
      return NULL;
    }
    t->nodes = nn;
    t->capnodes = nc;
  }
  uint32_t *ins = n_in ? tgi_arena_alloc(&t->host_arena, n_in * sizeof *ins) : NULL;
  if (n_in && !ins) {
    tgi_fail(t, TG_ERR_OUT_OF_MEMORY, "out of host memory for a node");
    return NULL;
  }
  tgi_node *n = &t->nodes[t->nnodes];
  memset(n, 0, sizeof *n);
  n->cap = cap;
  n->n_in = n_in;
  n->in = ins;
  for (uint32_t i = 0; i < n_in; i++)
    ins[i] = tgi_slot_of(t, in[i]);
  n->n_out = n_out;
  bool grad = tgi_needs_grad(t, n_in, in);
  for (uint32_t i = 0; i < n_out && i < 2; i++) {
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

tg_id tgi_done(tg_tape *t, tgi_value *v) {
  if (t->status != TG_OK || !v) return TG_NO_ID;
  return tgi_id_of(t, v);
}

const char *tgc_error(void);

bool tgi_fail_cuda(tg_tape *t, tg_status s, const char *what) {
  return tgi_fail(t, s, "CUDA %s failed: %s", what, tgc_error());
}
