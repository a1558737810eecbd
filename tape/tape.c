/* The tape: value slots, step memory, creation / reading / writing of values, reset. */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ memory callbacks */

/* Host step memory: pinned on device runtimes (uploads then run asynchronously), plain otherwise. */
static void *host_alloc(void *ctx, size_t bytes) {
  tg_runtime *rt = ctx;
  size_t n = (bytes + 63) / 64 * 64;
  if (!rt->dev) return tgi_aligned_alloc(64, n);
  void *p = NULL;
  char msg[TGI_MSG_CAP];
  return tgi_device_host_alloc(rt->dev, n, &p, msg) == TG_OK ? p : NULL;
}
static void host_release(void *ctx, void *p) {
  tg_runtime *rt = ctx;
  if (rt->dev)
    tgi_device_host_free(rt->dev, p);
  else
    free(p);
}
static void *dev_alloc(void *ctx, size_t bytes) {
  tg_runtime *rt = ctx;
  void *p = NULL;
  char msg[TGI_MSG_CAP];
  if (tgi_device_alloc(rt->dev, bytes, &p, msg) != TG_OK) return NULL;
  return p;
}
static void dev_release(void *ctx, void *p) {
  tg_runtime *rt = ctx;
  tgi_device_free(rt->dev, p);
}

/* ------------------------------------------------------------ tape tags
 * The tags of live tapes (internal.h, ids): a bitmap under a spin lock, handed out round-robin
 * from a global cursor, so no two live tapes share a tag and a freed tag comes back last. Tag 0 is
 * never used (small integers are never valid ids). */
#define TAG_COUNT (1u << TGI_TAG_BITS)
static uint64_t tag_live[TAG_COUNT / 64];
static uint32_t tag_cursor;
static int tag_lock;

static void tags_lock(void) {
  while (__atomic_exchange_n(&tag_lock, 1, __ATOMIC_ACQUIRE)) {
  }
}
static void tags_unlock(void) { __atomic_store_n(&tag_lock, 0, __ATOMIC_RELEASE); }

/* A free tag, marked live; 0 when every tag is taken. */
static uint32_t tag_take(void) {
  uint32_t got = 0;
  tags_lock();
  for (uint32_t k = 0; k < TAG_COUNT && !got; k++) {
    uint32_t c = tag_cursor = (tag_cursor + 1) % TAG_COUNT;
    if (c && !(tag_live[c / 64] >> (c % 64) & 1)) {
      tag_live[c / 64] |= UINT64_C(1) << (c % 64);
      got = c;
    }
  }
  tags_unlock();
  return got;
}

static void tag_give(uint32_t c) {
  tags_lock();
  tag_live[c / 64] &= ~(UINT64_C(1) << (c % 64));
  tags_unlock();
}

/* ------------------------------------------------------------ create / destroy */

tg_status tg_tape_create(tg_runtime *rt, tg_tape **out) {
  if (!out) {
    tgi_set_last_error("tg_tape_create: argument 'out' is NULL; expected a tg_tape** to receive the handle");
    return TG_ERR_INVALID_ARGUMENT;
  }
  *out = NULL;
  if (!rt) {
    tgi_set_last_error("tg_tape_create: argument 'rt' is NULL; expected a runtime from tg_runtime_create_*");
    return TG_ERR_INVALID_ARGUMENT;
  }
  tg_tape *t = tgi_calloc(1, sizeof *t);
  if (!t) return tgi_rt_error(rt, TG_ERR_OUT_OF_MEMORY, "tg_tape_create: out of host memory");
  t->refs = 1;
  t->tag = tag_take();
  if (!t->tag) {
    free(t);
    return tgi_rt_error(rt, TG_ERR_STATE, "tg_tape_create: %u tapes are alive, the most ids can tell apart",
                        TAG_COUNT - 1);
  }
  t->rt = rt;
  tgi_rt_retain(rt);
  tgi_arena_init(&t->host_arena, 64, rt, host_alloc, host_release);
  tgi_arena_init(&t->dev_arena, 256, rt, dev_alloc, dev_release);
  tgi_arena_init(&t->grad_arena, 256, rt, dev_alloc, dev_release);
  t->grad_enabled = true;
  t->provider = TG_PROVIDER_AUTO;
  t->seed = 0x5eed;
  *out = t;
  return TG_OK;
}

static void buf_free_persistent(tg_tape *t, tgi_buf *b) {
  free(b->h);
  if (b->d) tgi_device_free(t->rt->dev, b->d);
  b->h = b->d = NULL;
  b->valid = 0;
}

static void value_release(tg_tape *t, tgi_value *v) {
  if (v->kind == TGI_PARAM) {
    buf_free_persistent(t, &v->data);
    buf_free_persistent(t, &v->grad);
    buf_free_persistent(t, &v->opt_m);
    buf_free_persistent(t, &v->opt_v);
  }
  tgi_value_free_name(v);
  /* the next occupant gets the next generation; an exhausted slot is retired instead */
  bool retire = tgi_gen_exhausted(v->gen);
  uint64_t gen = retire ? v->gen : v->gen + 1;
  memset(v, 0, sizeof *v);
  v->gen = gen;
  v->kind = TGI_FREE;
  v->retired = retire;
}

void tg_tape_destroy(tg_tape *t) {
  if (t) tgi_tape_release(t);
}

void tgi_tape_retain(tg_tape *t) { tgi_atomic_add(&t->refs, 1); }

void tgi_tape_release(tg_tape *t) {
  if (tgi_atomic_add(&t->refs, -1) > 0) return;
  if (t->rt->dev) {
    char msg[TGI_MSG_CAP];
    tgi_device_h2d_wait(t->rt->dev, msg);
  }
  tgi_finite_join(t);  /* checks beside the main stream may still read what is freed below */
  tgi_finite_disarm(); /* no kernel may raise the flag freed below */
  tgi_nodes_drop(t, 0);
  for (uint32_t i = 0; i < t->nvals; i++)
    value_release(t, tgi_slot(t, i));
  for (uint32_t s = 0; s < t->nvslabs; s++)
    free(t->vslabs[s]);
  free(t->vslabs);
  free(t->free_slots);
  free(t->nodes);
  tgi_arena_free(&t->host_arena);
  tgi_arena_free(&t->dev_arena);
  tgi_arena_free(&t->grad_arena);
  if (t->dev_flags) tgi_device_free(t->rt->dev, t->dev_flags);
  if (t->found_flag) tgi_device_free(t->rt->dev, t->found_flag);
  tgi_rt_release(t->rt);
  tag_give(t->tag);
  free(t);
}

/* ------------------------------------------------------------ slots */

uint32_t tgi_slot_of(const tg_tape *t, const tgi_value *v) {
  for (uint32_t s = 0; s < t->nvslabs; s++) {
    const tgi_value *base = t->vslabs[s];
    if (v >= base && v < base + TGI_SLAB) return s * TGI_SLAB + (uint32_t)(v - base);
  }
  return UINT32_MAX;
}

tg_id tgi_id_of(const tg_tape *t, const tgi_value *v) { return tgi_make_id(tgi_slot_of(t, v), v->gen); }

/* A fresh slot; NULL when out of memory. */
tgi_value *tgi_slot_new(tg_tape *t) {
  uint32_t idx;
  if (t->nfree) {
    idx = t->free_slots[--t->nfree];
  } else {
    if (t->nvals == TGI_MAX_SLOTS) return NULL;
    if (t->nvals == (uint32_t)t->nvslabs * TGI_SLAB) {
      tgi_value **ns = tgi_realloc(t->vslabs, (t->nvslabs + 1) * sizeof *ns);
      if (!ns) return NULL;
      t->vslabs = ns;
      ns[t->nvslabs] = tgi_calloc(TGI_SLAB, sizeof(tgi_value));
      if (!ns[t->nvslabs]) return NULL;
      t->nvslabs++;
    }
    idx = t->nvals++;
    tgi_slot(t, idx)->gen = (uint64_t)t->tag << TGI_GEN_BITS;
  }
  tgi_value *v = tgi_slot(t, idx);
  uint64_t gen = v->gen;
  memset(v, 0, sizeof *v);
  v->gen = gen;
  v->producer = -1;
  return v;
}

tgi_value *tgi_resolve(const tg_tape *t, tg_id id, const char **why) {
  if (id < 0) {
    *why = id == TG_NO_ID ? "TG_NO_ID" : id == TG_ABSENT ? "TG_ABSENT" : "negative";
    return NULL;
  }
  uint32_t idx = tgi_id_slot(id);
  uint64_t gen = tgi_id_gen(id);
  if (tgi_gen_tag(gen) != t->tag) {
    *why = "foreign";
    return NULL;
  }
  if (idx >= t->nvals) {
    *why = "never issued";
    return NULL;
  }
  tgi_value *v = tgi_slot(t, idx);
  if (v->kind == TGI_FREE || v->gen != gen) {
    *why = "stale";
    return NULL;
  }
  *why = NULL;
  return v;
}

tgi_value *tgi_lookup(tg_tape *t, const char *fn, const char *arg, tg_id id, tg_status *st) {
  *st = TG_ERR_INVALID_ID;
  const char *why;
  tgi_value *v = tgi_resolve(t, id, &why);
  if (v) {
    *st = TG_OK;
    return v;
  }
  if (id < 0)
    tgi_error(t, *st, "%s: argument '%s' is %s; expected the id of a value (was it the result of a failed op?)", fn,
              arg,
              id == TG_NO_ID    ? "TG_NO_ID"
              : id == TG_ABSENT ? "TG_ABSENT"
                                : "a negative id");
  else if (!strcmp(why, "stale"))
    tgi_error(t, *st, "%s: argument '%s' is id %lld, a step value dropped by tg_tape_reset (stale id)", fn, arg,
              (long long)id);
  else
    tgi_error(t, *st, "%s: argument '%s' is id %lld, which this tape never issued%s", fn, arg, (long long)id,
              !strcmp(why, "foreign") ? " (another tape's id?)" : "");
  return NULL;
}

/* ------------------------------------------------------------ state */

tg_runtime *tg_tape_runtime(const tg_tape *t) { return t ? t->rt : NULL; }

/* Both first look at the device's anomaly flag (tape/finite.c; the tape is changed, hence the cast). */
tg_status tg_tape_status(const tg_tape *t) {
  if (!t) return TG_ERR_INVALID_ARGUMENT;
  tgi_finite_resolve((tg_tape *)t);
  return t->status;
}
const char *tg_tape_error(const tg_tape *t) {
  if (!t) return tg_last_error();
  tgi_finite_resolve((tg_tape *)t);
  return t->msg;
}

/* The tape argument, then the thread check of debug builds for the rest of the call's scope. */
#define NEED_TAPE(fn)                                                                                                  \
  if (!t) {                                                                                                            \
    tgi_set_last_error(fn ": argument 'tape' is NULL; expected a tape from tg_tape_create");                           \
    return TG_ERR_INVALID_ARGUMENT;                                                                                    \
  }                                                                                                                    \
  TGI_GUARD(t->rt, fn, TG_ERR_STATE)

tg_status tg_tape_reset(tg_tape *t) {
  NEED_TAPE("tg_tape_reset");
  /* No full device sync: step memory on the device is reused by later kernels of the same
   * stream (stream order protects it). Host step memory may still be the source of uploads in
   * flight: wait for those (they were issued at the start of this step, so the host stays about
   * one step ahead of the device). */
  if (t->rt->dev) {
    char msg[TGI_MSG_CAP];
    tg_status s = tgi_device_h2d_wait(t->rt->dev, msg);
    if (s) return tgi_error(t, s, "tg_tape_reset: %s", msg);
  }
  /* room for every slot on the free list first, so that nothing below can fail */
  if (t->capfree < t->nvals) {
    uint32_t nc = t->nvals > 256 ? t->nvals : 256;
    uint32_t *nf = tgi_realloc(t->free_slots, nc * sizeof *nf);
    if (!nf) return tgi_error(t, TG_ERR_OUT_OF_MEMORY, "tg_tape_reset: out of host memory");
    t->free_slots = nf;
    t->capfree = nc;
  }
  for (uint32_t i = 0; i < t->nvals; i++) {
    tgi_value *v = tgi_slot(t, i);
    if (v->kind == TGI_FREE || v->kind == TGI_PARAM) continue;
    value_release(t, v);
    if (!v->retired) t->free_slots[t->nfree++] = i;
  }
  /* hand out low slots first: ids stay small and steps reuse the same slots */
  for (uint32_t a = 0, b = t->nfree ? t->nfree - 1 : 0; a < b; a++, b--) {
    uint32_t tmp = t->free_slots[a];
    t->free_slots[a] = t->free_slots[b];
    t->free_slots[b] = tmp;
  }
  for (uint32_t i = 0; i < t->nvals; i++)
    tgi_slot(t, i)->producer = -1;
  tgi_nodes_drop(t, 0);
  t->nnodes = 0;
  tgi_finite_join(t); /* checks beside the main stream may still read the memory rewound below */
  tgi_arena_rewind(&t->host_arena);
  tgi_arena_rewind(&t->dev_arena);
  tgi_arena_rewind(&t->grad_arena);
  t->grad_zero_lo = t->grad_zero_hi = 0;
  tgi_finite_reset(t);
  t->status = TG_OK;
  t->msg[0] = 0;
  t->rng_calls = 0;
  return TG_OK;
}

tg_status tg_tape_set_grad_enabled(tg_tape *t, int enabled, int *previous) {
  NEED_TAPE("tg_tape_set_grad_enabled");
  if (previous) *previous = t->grad_enabled ? 1 : 0;
  t->grad_enabled = enabled != 0;
  return TG_OK;
}

tg_status tg_tape_set_provider(tg_tape *t, tg_provider p, tg_provider *previous) {
  NEED_TAPE("tg_tape_set_provider");
  if ((int)p < TG_PROVIDER_AUTO || (int)p > TG_PROVIDER_CUDA_COMPOSED)
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT,
                     "tg_tape_set_provider: argument 'provider' is %d; expected TG_PROVIDER_AUTO, _HOST, _CUDA_FUSED "
                     "or _CUDA_COMPOSED",
                     (int)p);
  if (previous) *previous = t->provider;
  t->provider = p;
  return TG_OK;
}

tg_status tg_tape_set_seed(tg_tape *t, uint64_t seed) {
  NEED_TAPE("tg_tape_set_seed");
  t->seed = seed;
  t->rng_calls = 0;
  return TG_OK;
}

/* ------------------------------------------------------------ creating values */

/* tgi_write_h inside returning call fn: a failure becomes fn's returned error (*st, message on the
 * tape, never sticky; the message names fn), and a sticky error the tape held before is kept. */
static void *write_h_returning(tg_tape *t, const char *fn, tgi_value *v, tg_status *st) {
  tg_status before = t->status;
  char kept[TGI_MSG_CAP], failed[TGI_MSG_CAP];
  if (before) memcpy(kept, t->msg, sizeof kept);
  const char *op = t->cur_op;
  t->status = TG_OK;
  t->cur_op = fn;
  void *p = tgi_write_h(t, v);
  *st = p ? TG_OK : t->status ? t->status : TG_ERR_INTERNAL;
  if (!p) memcpy(failed, t->msg, sizeof failed);
  t->cur_op = op;
  t->status = before;
  if (before) memcpy(t->msg, kept, sizeof kept);
  if (!p) tgi_error(t, *st, "%s", failed);
  return p;
}

tg_status tgi_check_shape(tg_tape *t, const char *fn, int ndim, const int64_t *shape, int64_t *numel) {
  if (ndim < 0 || ndim > TG_MAX_DIMS)
    return tgi_error(t, TG_ERR_SHAPE, "%s: argument 'ndim' is %d; expected 0..%d", fn, ndim, TG_MAX_DIMS);
  if (ndim > 0 && !shape)
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "%s: argument 'shape' is NULL; expected %d sizes", fn, ndim);
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] <= 0)
      return tgi_error(t, TG_ERR_SHAPE, "%s: argument 'shape' has size %lld at dim %d; expected sizes > 0", fn,
                       (long long)shape[i], i);
    if (n > INT64_MAX / 16 / shape[i])
      return tgi_error(t, TG_ERR_SHAPE, "%s: argument 'shape' has too many elements", fn);
    n *= shape[i];
  }
  *numel = n;
  return TG_OK;
}

static bool is_float(tg_dtype dt) { return dt == TG_F32 || dt == TG_F64 || dt == TG_F16 || dt == TG_BF16; }

tg_status tgi_new_leaf(tg_tape *t, const char *fn, tgi_kind kind, tg_dtype dt, int ndim, const int64_t *shape,
                       const void *data, size_t data_bytes, unsigned flags, tg_id *out) {
  if (out) *out = TG_NO_ID;
  if (!out)
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "%s: argument 'out' is NULL; expected a tg_id* to receive the id", fn);
  if ((int)dt < 0 || dt >= TG_DTYPE_COUNT)
    return tgi_error(t, TG_ERR_DTYPE, "%s: argument 'dtype' is %d; expected a tg_dtype", fn, (int)dt);
  int64_t numel;
  tg_status s = tgi_check_shape(t, fn, ndim, shape, &numel);
  if (s) return s;
  unsigned allowed = kind == TGI_PARAM ? TG_NO_WEIGHT_DECAY : TG_REQUIRES_GRAD;
  if (flags & ~allowed)
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "%s: argument 'flags' is 0x%x; expected 0 or %s", fn, flags,
                     kind == TGI_PARAM ? "TG_NO_WEIGHT_DECAY" : "TG_REQUIRES_GRAD");
  bool grad = kind == TGI_PARAM || (flags & TG_REQUIRES_GRAD);
  if (grad && !is_float(dt))
    return tgi_error(t, TG_ERR_DTYPE, "%s: argument 'dtype' is %s; a value that requires grad must be a float dtype",
                     fn, tg_dtype_name(dt));
  size_t need = (size_t)numel * tg_dtype_size(dt);
  if (!data && (kind != TGI_PARAM || data_bytes != 0))
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT,
                     "%s: argument 'data' is NULL; expected %lld elements of %s (%zu bytes)%s", fn, (long long)numel,
                     tg_dtype_name(dt), need, kind == TGI_PARAM ? ", or NULL with data_bytes 0 for zeros" : "");
  if (data && data_bytes != need)
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT,
                     "%s: argument 'data_bytes' is %zu; shape %s of %s needs %lld x %zu = %zu bytes", fn, data_bytes,
                     tgi_shape_str(shape, ndim, (char[TGI_SHAPE_STR_CAP]){0}, TGI_SHAPE_STR_CAP), tg_dtype_name(dt),
                     (long long)numel, tg_dtype_size(dt), need);
  tgi_value *v = tgi_slot_new(t);
  if (!v) return tgi_error(t, TG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  v->kind = (uint8_t)kind;
  v->dtype = (uint8_t)dt;
  v->ndim = (uint8_t)ndim;
  for (int i = 0; i < ndim; i++)
    v->shape[i] = shape[i];
  v->numel = numel;
  v->bytes = (size_t)numel * tg_dtype_size(dt);
  v->requires_grad = grad;
  v->flags = flags;
  tg_status st;
  void *dst = write_h_returning(t, fn, v, &st);
  if (!dst) {
    value_release(t, v);
    if (!v->retired && t->nfree < t->capfree) t->free_slots[t->nfree++] = tgi_slot_of(t, v);
    return st;
  }
  if (data)
    memcpy(dst, data, v->bytes);
  else
    memset(dst, 0, v->bytes);
  *out = tgi_id_of(t, v);
  return TG_OK;
}

tg_status tg_tape_input(tg_tape *t, tg_dtype dt, int ndim, const int64_t *shape, const void *data, size_t data_bytes,
                        unsigned flags, tg_id *out) {
  NEED_TAPE("tg_tape_input");
  return tgi_new_leaf(t, "tg_tape_input", TGI_INPUT, dt, ndim, shape, data, data_bytes, flags, out);
}

tg_status tg_tape_parameter(tg_tape *t, tg_dtype dt, int ndim, const int64_t *shape, const void *data,
                            size_t data_bytes, unsigned flags, tg_id *out) {
  NEED_TAPE("tg_tape_parameter");
  return tgi_new_leaf(t, "tg_tape_parameter", TGI_PARAM, dt, ndim, shape, data, data_bytes, flags, out);
}

/* ------------------------------------------------------------ queries and reads */

tg_status tg_tape_shape(tg_tape *t, tg_id id, int *ndim, int64_t *shape, int shape_cap) {
  NEED_TAPE("tg_tape_shape");
  tg_status s;
  tgi_value *v = tgi_lookup(t, "tg_tape_shape", "id", id, &s);
  if (!v) return s;
  if (!ndim || !shape)
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "tg_tape_shape: argument '%s' is NULL; expected %s",
                     !ndim ? "ndim" : "shape", !ndim ? "an int*" : "room for TG_MAX_DIMS sizes");
  if (shape_cap < v->ndim)
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT,
                     "tg_tape_shape: argument 'shape_cap' is %d; value %lld has %d dims (TG_MAX_DIMS always suffices)",
                     shape_cap, (long long)id, v->ndim);
  *ndim = v->ndim;
  for (int i = 0; i < v->ndim; i++)
    shape[i] = v->shape[i];
  return TG_OK;
}

tg_status tg_tape_dtype(tg_tape *t, tg_id id, tg_dtype *out) {
  NEED_TAPE("tg_tape_dtype");
  tg_status s;
  tgi_value *v = tgi_lookup(t, "tg_tape_dtype", "id", id, &s);
  if (!v) return s;
  if (!out) return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "tg_tape_dtype: argument 'out' is NULL");
  *out = (tg_dtype)v->dtype;
  return TG_OK;
}

tg_status tg_tape_numel(tg_tape *t, tg_id id, int64_t *out) {
  NEED_TAPE("tg_tape_numel");
  tg_status s;
  tgi_value *v = tgi_lookup(t, "tg_tape_numel", "id", id, &s);
  if (!v) return s;
  if (!out) return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "tg_tape_numel: argument 'out' is NULL");
  *out = v->numel;
  return TG_OK;
}

/* Copies one side of a buffer to host memory dst. */
static tg_status copy_out(tg_tape *t, const char *fn, const tgi_buf *b, void *dst, size_t bytes) {
  if (b->valid & TGI_ON_HOST) {
    memcpy(dst, b->h, bytes);
    return TG_OK;
  }
  if (b->valid & TGI_ON_DEV) {
    char msg[TGI_MSG_CAP];
    tg_status s = tgi_device_d2h(t->rt->dev, dst, b->d, bytes, msg);
    if (s) return tgi_error(t, s, "%s: copying from the device failed: %s", fn, msg);
    return TG_OK;
  }
  memset(dst, 0, bytes);
  return TG_OK;
}

static tg_status read_common(tg_tape *t, const char *fn, tg_id id, void *dst, size_t bytes, bool grad) {
  tg_status s;
  tgi_value *v = tgi_lookup(t, fn, "id", id, &s);
  if (!v) return s;
  if (!dst)
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "%s: argument 'dst' is NULL; expected %zu bytes", fn, v->bytes);
  if (bytes != v->bytes)
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT,
                     "%s: argument 'dst_bytes' is %zu; the value holds %lld x %s = %zu bytes", fn, bytes,
                     (long long)v->numel, tg_dtype_name((tg_dtype)v->dtype), v->bytes);
  if (!grad && !v->data.valid)
    return tgi_error(t, TG_ERR_STATE, "%s: value %lld has no data (its op failed)", fn, (long long)id);
  char why[TGI_MSG_CAP];
  if (!grad && tgi_data_unreadable(t, v, why, sizeof why)) return tgi_error(t, TG_ERR_STATE, "%s: %s", fn, why);
  return copy_out(t, fn, grad ? &v->grad : &v->data, dst, bytes);
}

tg_status tg_tape_read(tg_tape *t, tg_id id, void *dst, size_t bytes) {
  NEED_TAPE("tg_tape_read");
  return read_common(t, "tg_tape_read", id, dst, bytes, false);
}

tg_status tg_tape_read_grad(tg_tape *t, tg_id id, void *dst, size_t bytes) {
  NEED_TAPE("tg_tape_read_grad");
  return read_common(t, "tg_tape_read_grad", id, dst, bytes, true);
}

tg_status tg_tape_write(tg_tape *t, tg_id id, const void *src, size_t bytes) {
  NEED_TAPE("tg_tape_write");
  tg_status s;
  tgi_value *v = tgi_lookup(t, "tg_tape_write", "id", id, &s);
  if (!v) return s;
  if (v->kind == TGI_RESULT)
    return tgi_error(t, TG_ERR_STATE,
                     "tg_tape_write: value %lld is an op result; only parameters and inputs can be written",
                     (long long)id);
  if (v->flags & TGI_BORROWED)
    return tgi_error(t, TG_ERR_STATE,
                     "tg_tape_write: value %lld is borrowed (tg_tape_input_borrowed): the library never writes the "
                     "caller's buffer; write the buffer itself before the step instead",
                     (long long)id);
  if (!src)
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "tg_tape_write: argument 'src' is NULL; expected %zu bytes", v->bytes);
  if (bytes != v->bytes)
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT,
                     "tg_tape_write: argument 'src_bytes' is %zu; the value holds %zu bytes", bytes, v->bytes);
  if (t->rt->dev) { /* the old bytes may still be uploading */
    char msg[TGI_MSG_CAP];
    s = tgi_device_h2d_wait(t->rt->dev, msg);
    if (s) return tgi_error(t, s, "tg_tape_write: %s", msg);
  }
  void *dst = write_h_returning(t, "tg_tape_write", v, &s);
  if (!dst) return s;
  memcpy(dst, src, bytes);
  return TG_OK;
}

static double load_as_double(const void *p, tg_dtype dt) {
  switch (dt) {
  case TG_F32: return *(const float *)p;
  case TG_F64: return *(const double *)p;
  case TG_F16: {
    uint16_t h = *(const uint16_t *)p;
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
  }
  case TG_BF16: {
    uint32_t u = (uint32_t)(*(const uint16_t *)p) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  case TG_I32: return *(const int32_t *)p;
  case TG_I64: return (double)*(const int64_t *)p;
  case TG_U8: return *(const uint8_t *)p;
  case TG_DTYPE_COUNT: break;
  }
  return NAN;
}

tg_status tg_tape_scalar(tg_tape *t, tg_id id, double *out) {
  NEED_TAPE("tg_tape_scalar");
  tg_status s;
  tgi_value *v = tgi_lookup(t, "tg_tape_scalar", "id", id, &s);
  if (!v) return s;
  if (!out) return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "tg_tape_scalar: argument 'out' is NULL");
  if (v->numel != 1)
    return tgi_error(t, TG_ERR_SHAPE, "tg_tape_scalar: value %lld has %lld elements; expected 1", (long long)id,
                     (long long)v->numel);
  unsigned char buf[8];
  s = read_common(t, "tg_tape_scalar", id, buf, v->bytes, false);
  if (s) return s;
  *out = load_as_double(buf, (tg_dtype)v->dtype);
  return TG_OK;
}

tg_status tg_tape_parameters(tg_tape *t, tg_id *ids, size_t cap, size_t *count) {
  NEED_TAPE("tg_tape_parameters");
  if (!count) return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "tg_tape_parameters: argument 'count' is NULL");
  if (!ids && cap)
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "tg_tape_parameters: argument 'ids' is NULL but cap is %zu", cap);
  size_t n = 0;
  for (uint32_t i = 0; i < t->nvals; i++) {
    tgi_value *v = tgi_slot(t, i);
    if (v->kind != TGI_PARAM) continue;
    if (n < cap) ids[n] = tgi_make_id(i, v->gen);
    n++;
  }
  *count = n;
  return TG_OK;
}

tg_status tg_tape_zero_grad(tg_tape *t) {
  NEED_TAPE("tg_tape_zero_grad");
  for (uint32_t i = 0; i < t->nvals; i++) {
    tgi_value *v = tgi_slot(t, i);
    if (v->kind == TGI_PARAM || v->kind == TGI_INPUT) v->grad.valid = 0; /* re-zeroed on next use */
    v->has_grad = false;
  }
  return TG_OK;
}
