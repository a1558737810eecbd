/* Placement: which side (host, device) holds the current bytes of a value, its gradient and its
 * optimizer state; lazy copies between the sides (counted for explain); step scratch memory. */
#include "internal.h"

#include <stdio.h>

#include <stdlib.h>
#include <string.h>

#ifdef TIGA_HAVE_CUDA
#include "../cuda/optim.h"
#endif

static void *side_alloc(tg_tape *t, tgi_value *v, tgi_buf *b, int side) {
  if (side == TGI_ON_DEV && b == &v->grad && v->kind != TGI_PARAM && !b->d && t->rt->dev) {
    b->d = tgi_arena_alloc(&t->grad_arena, v->bytes ? v->bytes : 1);
    if (!b->d) tgi_fail(t, TG_ERR_OUT_OF_MEMORY, "out of device memory (%zu bytes for a gradient)", v->bytes);
    return b->d;
  }
  void **slot = side == TGI_ON_HOST ? &b->h : &b->d;
  if (*slot) return *slot;
  size_t bytes = v->bytes ? v->bytes : 1;
  if (side == TGI_ON_DEV && !t->rt->dev) {
    tgi_fail(t, TG_ERR_NO_DEVICE, "device memory needed, but the runtime is host-only");
    return NULL;
  }
  if (v->kind == TGI_PARAM) {
    if (side == TGI_ON_HOST) {
      *slot = tgi_aligned_alloc(64, (bytes + 63) / 64 * 64);
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

const tgi_value *tgi_view_stale(const tg_tape *t, const tgi_value *v) {
  if (!(v->flags & TGI_LEAF_VIEW)) return NULL;
  const tgi_value *x = tgi_slot(t, v->base_slot);
  return x->gen != v->base_gen || x->version != v->base_ver ? x : NULL;
}

bool tgi_data_unreadable(const tg_tape *t, const tgi_value *v, char *buf, size_t cap) {
  if (v->flags & TGI_SPENT) {
    snprintf(buf, cap,
             "value %lld (an intermediate of a fused op) holds its gradient: a backward through that op wrote the "
             "gradient over its storage (the op was its last reader), so its data cannot be read until that op's "
             "next backward computes it again or the tape is reset",
             (long long)tgi_id_of(t, v));
    return true;
  }
  const tgi_value *x = tgi_view_stale(t, v);
  if (!x) return false;
  const char *kind = x->kind == TGI_PARAM ? "parameter" : "input";
  snprintf(buf, cap,
           "value %lld is a reshape of %s %lld and shares its storage, but that %s was rewritten after the "
           "reshape (tg_tape_write, tg_tape_load or an optimizer step); reshape it again",
           (long long)tgi_id_of(t, v), kind, (long long)tgi_id_of(t, x), kind);
  return true;
}

/* Reads of a value: never before anything wrote it, never one whose bytes are not its own any more
 * (tgi_data_unreadable). */
static bool readable(tg_tape *t, tgi_value *v) {
  if (!v->data.valid) return tgi_fail(t, TG_ERR_INTERNAL, "a value was read before anything wrote it");
  char msg[TGI_MSG_CAP];
  if (tgi_data_unreadable(t, v, msg, sizeof msg)) return tgi_fail(t, TG_ERR_STATE, "%s", msg);
  return true;
}

void *tgi_read_h(tg_tape *t, tgi_value *v) { return readable(t, v) ? make_current(t, v, &v->data, TGI_ON_HOST) : NULL; }
void *tgi_read_d(tg_tape *t, tgi_value *v) { return readable(t, v) ? make_current(t, v, &v->data, TGI_ON_DEV) : NULL; }
/* A write makes the written side the only current one and bumps the version (nodes that read the
 * old bytes must not run their backward on the new ones). */
void *tgi_write_h(tg_tape *t, tgi_value *v) {
  void *p = side_alloc(t, v, &v->data, TGI_ON_HOST);
  if (p) v->data.valid = TGI_ON_HOST, tgi_value_bump_version(v);
  return p;
}
void *tgi_write_d(tg_tape *t, tgi_value *v) {
  void *p = side_alloc(t, v, &v->data, TGI_ON_DEV);
  if (p) v->data.valid = TGI_ON_DEV, tgi_value_bump_version(v);
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
  const bool had = (side == TGI_ON_HOST ? b->h : b->d) != NULL;
  void *p = side_alloc(t, v, b, side);
  if (!p) return NULL;
  if (fresh) {
    *fresh = true; /* the caller overwrites every element */
  } else if (side == TGI_ON_DEV && !had && (uintptr_t)p >= t->grad_zero_lo &&
             (uintptr_t)p + v->bytes <= t->grad_zero_hi) {
    /* a new block from the room the sweep zeroed (tgi_grad_zero_room): already zero */
  } else if (side == TGI_ON_DEV && had && v->grad_zeroed) {
    /* a parameter's gradient zeroed with the others at the start of the sweep (tgi_grad_zero_params) */
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
  v->grad_zeroed = false;
  return p;
}

void *tgi_grad_d_base(tg_tape *t, tgi_value *v) {
  /* anomaly mode checks each node's writes into its own inputs' gradients: no shortcut there */
  while (!t->check_finite && v->producer >= 0) {
    const tgi_node *n = &t->nodes[v->producer];
    if (n->n_in != 1 || n->n_out != 1 || n->in[0] == UINT32_MAX) break;
    tgi_value *x = tgi_in(t, n, 0);
    if (!x->requires_grad || x->dtype != v->dtype || x->bytes != v->bytes || !x->data.d || x->data.d != v->data.d)
      break;
    v = x;
  }
  return grad_side(t, v, TGI_ON_DEV, NULL);
}

bool tgi_grad_over_ok(const tg_tape *t, const tgi_value *v) {
  return !t->check_finite && v->kind == TGI_RESULT && v->requires_grad && !v->grad.valid && v->sweep_uses == 1 &&
         !(v->flags & (TGI_LEAF_VIEW | TGI_BORROWED | TGI_SPENT)) && (v->data.valid & TGI_ON_DEV) && v->data.d;
}

void *tgi_grad_d_over(tg_tape *t, tgi_value *v) {
  if (!tgi_grad_over_ok(t, v)) {
    tgi_fail(t, TG_ERR_INTERNAL, "a gradient over a value's storage asked for where the rules do not allow it");
    return NULL;
  }
  v->grad.d = v->data.d;
  v->grad.valid = TGI_ON_DEV;
  v->grad_lent |= TGI_ON_DEV;
  v->has_grad = true;
  v->grad_zeroed = false;
  v->flags |= TGI_SPENT;
  return v->grad.d;
}

void *tgi_grad_h(tg_tape *t, tgi_value *v) { return grad_side(t, v, TGI_ON_HOST, NULL); }
void *tgi_grad_h_fresh(tg_tape *t, tgi_value *v, bool *fresh) { return grad_side(t, v, TGI_ON_HOST, fresh); }
void *tgi_grad_d_fresh(tg_tape *t, tgi_value *v, bool *fresh) { return grad_side(t, v, TGI_ON_DEV, fresh); }

tg_status tgi_grad_zero_room(tg_tape *t) {
  size_t bytes = 0;
  void *p = t->rt->dev ? tgi_arena_tail(&t->grad_arena, &bytes) : NULL;
  t->grad_zero_lo = t->grad_zero_hi = 0;
  /* Small steps only: there the launches saved are what counts; a large step's gradients are mostly
   * written whole (GEMMs with beta = 0), and zeroing all of its room would cost bandwidth. */
  const size_t room_max = (size_t)16 << 20;
  if (!p || bytes == 0 || bytes > room_max) return TG_OK;
  char msg[TGI_MSG_CAP];
  tg_status s = tgi_device_zero(t->rt->dev, p, bytes, msg);
  if (s) return tgi_fail(t, s, "%s", msg), s;
  t->grad_zero_lo = (uintptr_t)p;
  t->grad_zero_hi = (uintptr_t)p + bytes;
  return TG_OK;
}

int32_t *tgi_found_flag(tg_tape *t, tg_status *st, char *msg) {
  *st = TG_OK;
  if (t->found_flag) return t->found_flag;
  void *p = NULL;
  if ((*st = tgi_device_alloc(t->rt->dev, sizeof(int32_t), &p, msg))) return NULL;
  t->found_flag = p;
  t->found_flag_zero = false;
  return p;
}

void tgi_grad_zeroed_clear(tg_tape *t) {
  if (!t->rt->dev) return; /* only set on a device runtime */
  for (uint32_t i = 0; i < t->nvals; i++)
    tgi_slot(t, i)->grad_zeroed = false;
}

tg_status tgi_grad_zero_params(tg_tape *t) {
  tgi_grad_zeroed_clear(t);
#ifdef TIGA_HAVE_CUDA
  if (!t->rt->dev) return TG_OK;
  /* Larger gradients keep the lazy zero-fill: they are mostly written whole (GEMMs with beta = 0),
   * and zeroing them here would cost bandwidth; a small one costs a launch either way. */
  const size_t small = (size_t)1 << 20;
  enum { BATCH = 48 };
  static const tg_dtype dts[3] = {TG_F32, TG_F16, TG_BF16};
  cuda_mt_tensor mt[BATCH];
  tgi_value *vs[BATCH];
  for (int d = 0; d < 3; d++) {
    int k = 0;
    for (uint32_t i = 0; i <= t->nvals; i++) {
      tgi_value *v = i < t->nvals ? tgi_slot(t, i) : NULL;
      if (v && v->kind == TGI_PARAM && v->requires_grad && v->sweep_mark && !v->grad.valid && v->grad.d &&
          v->dtype == dts[d] && v->bytes <= small) {
        mt[k] = (cuda_mt_tensor){NULL, v->grad.d, NULL, NULL, v->numel, 0, 0, 0, 0};
        vs[k++] = v;
      }
      if (k && (k == BATCH || !v)) {
        tg_status s = cuda_zero_multi(TGI_STREAM(t), dts[d], mt, k);
        if (s) return tgi_fail_cuda(t, s, "zeroing parameter gradients"), s;
        for (int j = 0; j < k; j++)
          vs[j]->grad_zeroed = true;
        k = 0;
      }
    }
  }
#endif
  return TG_OK;
}

bool tgi_grad_pass(tg_tape *t, tgi_value *x, tgi_value *y, int side) {
  (void)t;
  if (x == y || x->kind != TGI_RESULT || x->grad.valid || x->sweep_uses != 1 || !(y->grad.valid & side) ||
      x->dtype != y->dtype || x->bytes != y->bytes || (x->flags & TGI_BORROWED))
    return false;
  void *g = side == TGI_ON_HOST ? y->grad.h : y->grad.d;
  if (!g) return false;
  if (side == TGI_ON_HOST)
    x->grad.h = g;
  else
    x->grad.d = g;
  x->grad.valid = (uint8_t)side;
  x->grad_lent |= (uint8_t)side;
  x->has_grad = true;
  return true;
}

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

void *tgi_alloc_h(tg_tape *t, tgi_value *v, tgi_buf *b) { return side_alloc(t, v, b, TGI_ON_HOST); }
