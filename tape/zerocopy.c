/* Zero-copy in and out: tg_tape_input_borrowed (a step value over the caller's buffer) and
 * tg_tape_export_dlpack (a value's or gradient's buffer as a DLPack tensor that holds a
 * reference to the tape). tiga.h states the lifetime and memory rules. */
#include "internal.h"
#include "tiga_dlpack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NEED_TAPE(fn)                                                                                                  \
  do {                                                                                                                 \
    if (!t) {                                                                                                          \
      tgi_set_last_error(fn ": argument 'tape' is NULL; expected a tape from tg_tape_create");                         \
      return TG_ERR_INVALID_ARGUMENT;                                                                                  \
    }                                                                                                                  \
  } while (0)

static bool is_float(tg_dtype dt) { return dt == TG_F32 || dt == TG_F64 || dt == TG_F16 || dt == TG_BF16; }

tg_status tg_runtime_cuda_stream(tg_runtime *rt, void **stream) {
  if (!rt || !stream) {
    tgi_set_last_error("tg_runtime_cuda_stream: argument '%s' is NULL", !rt ? "rt" : "stream");
    return TG_ERR_INVALID_ARGUMENT;
  }
  *stream = rt->dev ? (void *)tgi_device_stream(rt->dev) : NULL;
  return TG_OK;
}

/* ------------------------------------------------------------ borrowed inputs */

tg_status tg_tape_input_borrowed(tg_tape *t, tg_dtype dt, int ndim, const int64_t *shape, const void *data,
                                 size_t data_bytes, tg_memory memory, int device, unsigned flags, tg_id *out) {
  static const char fn[] = "tg_tape_input_borrowed";
  NEED_TAPE("tg_tape_input_borrowed");
  if (!out) return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "%s: argument 'out' is NULL; expected a tg_id*", fn);
  *out = TG_NO_ID;
  if ((int)dt < 0 || dt >= TG_DTYPE_COUNT)
    return tgi_error(t, TG_ERR_DTYPE, "%s: argument 'dtype' is %d; expected a tg_dtype", fn, (int)dt);
  int64_t numel;
  tg_status s = tgi_check_shape(t, fn, ndim, shape, &numel);
  if (s) return s;
  if (flags & ~TG_REQUIRES_GRAD)
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "%s: argument 'flags' is 0x%x; expected 0 or TG_REQUIRES_GRAD", fn,
                     flags);
  if ((flags & TG_REQUIRES_GRAD) && !is_float(dt))
    return tgi_error(t, TG_ERR_DTYPE, "%s: argument 'dtype' is %s; a value that requires grad must be a float dtype",
                     fn, tg_dtype_name(dt));
  if (memory == TG_MEMORY_HOST) {
    if (device != 0)
      return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "%s: argument 'device' is %d; host memory has device 0", fn, device);
  } else if (memory == TG_MEMORY_CUDA) {
    if (!t->rt->dev)
      return tgi_error(t, TG_ERR_NO_DEVICE, "%s: device memory given, but the tape's runtime is host-only", fn);
    if (device != t->rt->device_index)
      return tgi_error(t, TG_ERR_INVALID_ARGUMENT,
                       "%s: argument 'device' is %d; the tape's runtime runs on CUDA device %d (copy the tensor "
                       "there first)",
                       fn, device, t->rt->device_index);
  } else {
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "%s: argument 'memory' is %d; expected TG_MEMORY_HOST or _CUDA", fn,
                     (int)memory);
  }
  size_t esize = tg_dtype_size(dt), need = (size_t)numel * esize;
  if (!data) return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "%s: argument 'data' is NULL; expected %zu bytes", fn, need);
  if (data_bytes != need)
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT,
                     "%s: argument 'data_bytes' is %zu; shape %s of %s needs %lld x %zu = %zu bytes", fn, data_bytes,
                     tgi_shape_str(shape, ndim, (char[TGI_SHAPE_STR_CAP]){0}, TGI_SHAPE_STR_CAP), tg_dtype_name(dt),
                     (long long)numel, esize, need);
  if ((uintptr_t)data % esize)
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "%s: argument 'data' (%p) is not aligned to %zu bytes (%s elements)",
                     fn, data, esize, tg_dtype_name(dt));
  if (memory == TG_MEMORY_CUDA) {
    char msg[TGI_MSG_CAP];
    s = tgi_device_check_pointer(t->rt->dev, data, data_bytes, msg);
    if (s) return tgi_error(t, s, "%s: argument 'data': %s", fn, msg);
  }
  tgi_value *v = tgi_slot_new(t);
  if (!v) return tgi_error(t, TG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  v->kind = TGI_INPUT;
  v->dtype = (uint8_t)dt;
  v->ndim = (uint8_t)ndim;
  for (int i = 0; i < ndim; i++)
    v->shape[i] = shape[i];
  v->numel = numel;
  v->bytes = need;
  v->requires_grad = (flags & TG_REQUIRES_GRAD) != 0;
  v->flags = flags | TGI_BORROWED;
  /* The library never writes data (tg_tape_write refuses borrowed values; ops write results
   * only), so dropping const here is safe. */
  void *p;
  memcpy(&p, &data, sizeof p);
  if (memory == TG_MEMORY_HOST) {
    v->data.h = p;
    v->data.valid = TGI_ON_HOST;
  } else {
    v->data.d = p;
    v->data.valid = TGI_ON_DEV;
  }
  *out = tgi_id_of(t, v);
  return TG_OK;
}

/* ------------------------------------------------------------ DLPack export */

typedef struct export_ctx {
  DLManagedTensor mt;
  int64_t shape[TG_MAX_DIMS];
  int64_t strides[TG_MAX_DIMS];
  tg_tape *tape; /* referenced */
} export_ctx;

static void export_deleter(DLManagedTensor *self) {
  if (!self) return;
  export_ctx *c = self->manager_ctx;
  tg_tape *t = c->tape;
  free(c);
  tgi_tape_release(t);
}

static bool dl_dtype(tg_dtype dt, DLDataType *out) {
  static const struct {
    uint8_t code, bits;
  } map[TG_DTYPE_COUNT] = {
      [TG_F32] = {kDLFloat, 32}, [TG_F64] = {kDLFloat, 64}, [TG_F16] = {kDLFloat, 16}, [TG_BF16] = {kDLBfloat, 16},
      [TG_I32] = {kDLInt, 32},   [TG_I64] = {kDLInt, 64},   [TG_U8] = {kDLUInt, 8},
  };
  if ((int)dt < 0 || dt >= TG_DTYPE_COUNT) return false;
  out->code = map[dt].code;
  out->bits = map[dt].bits;
  out->lanes = 1;
  return true;
}

/* The value, the buffer and the side an export with `flags` reads; TG_OK or an error on the tape. */
static tg_status export_target(tg_tape *t, const char *fn, tg_id id, unsigned flags, tgi_value **pv, int *side) {
  tg_status s;
  tgi_value *v = tgi_lookup(t, fn, "id", id, &s);
  if (!v) return s;
  if (flags & ~(TG_EXPORT_GRAD | TG_EXPORT_HOST | TG_EXPORT_DEVICE))
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT,
                     "%s: argument 'flags' is 0x%x; expected TG_EXPORT_GRAD, TG_EXPORT_HOST, TG_EXPORT_DEVICE or 0", fn,
                     flags);
  if ((flags & TG_EXPORT_HOST) && (flags & TG_EXPORT_DEVICE))
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "%s: TG_EXPORT_HOST and TG_EXPORT_DEVICE exclude each other", fn);
  if ((flags & TG_EXPORT_DEVICE) && !t->rt->dev)
    return tgi_error(t, TG_ERR_NO_DEVICE, "%s: TG_EXPORT_DEVICE asked for, but the tape's runtime is host-only", fn);
  bool grad = flags & TG_EXPORT_GRAD;
  if (grad && !v->requires_grad)
    return tgi_error(t, TG_ERR_STATE, "%s: value %lld does not require grad; it has no gradient to export", fn,
                     (long long)id);
  if (!grad && !v->data.valid)
    return tgi_error(t, TG_ERR_STATE, "%s: value %lld has no data (its op failed)", fn, (long long)id);
  const tgi_buf *b = grad ? &v->grad : &v->data;
  if (flags & TG_EXPORT_HOST)
    *side = TGI_ON_HOST;
  else if (flags & TG_EXPORT_DEVICE)
    *side = TGI_ON_DEV;
  else if (b->valid)
    *side = (b->valid & TGI_ON_DEV) ? TGI_ON_DEV : TGI_ON_HOST;
  else
    *side = t->rt->dev ? TGI_ON_DEV : TGI_ON_HOST;
  *pv = v;
  return TG_OK;
}

tg_status tg_tape_export_location(tg_tape *t, tg_id id, unsigned flags, tg_memory *memory, int *device) {
  NEED_TAPE("tg_tape_export_location");
  tgi_value *v = NULL;
  int side = TGI_ON_HOST;
  tg_status s = export_target(t, "tg_tape_export_location", id, flags, &v, &side);
  if (s) return s;
  if (memory) *memory = side == TGI_ON_DEV ? TG_MEMORY_CUDA : TG_MEMORY_HOST;
  if (device) *device = side == TGI_ON_DEV ? t->rt->device_index : 0;
  return TG_OK;
}

tg_status tg_tape_export_dlpack(tg_tape *t, tg_id id, unsigned flags, struct DLManagedTensor **out) {
  static const char fn[] = "tg_tape_export_dlpack";
  NEED_TAPE("tg_tape_export_dlpack");
  if (!out) return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "%s: argument 'out' is NULL", fn);
  *out = NULL;
  tgi_value *v = NULL;
  int side = TGI_ON_HOST;
  tg_status s = export_target(t, fn, id, flags, &v, &side);
  if (s) return s;
  DLDataType dtype;
  if (!dl_dtype((tg_dtype)v->dtype, &dtype)) return tgi_error(t, TG_ERR_INTERNAL, "%s: value of unknown dtype", fn);
  export_ctx *c = tgi_calloc(1, sizeof *c);
  if (!c) return tgi_error(t, TG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  /* The placement helpers report through the sticky status; a sticky error from earlier op
   * calls is set aside meanwhile (an export is a returning call, not an op). */
  tg_status sticky = t->status;
  char sticky_msg[TGI_MSG_CAP];
  memcpy(sticky_msg, t->msg, sizeof sticky_msg);
  const char *before = t->cur_op;
  t->cur_op = fn;
  t->status = TG_OK;
  void *p;
  if (flags & TG_EXPORT_GRAD)
    p = side == TGI_ON_DEV ? tgi_grad_d(t, v) : tgi_grad_h(t, v);
  else
    p = side == TGI_ON_DEV ? tgi_read_d(t, v) : tgi_read_h(t, v);
  s = p ? TG_OK : (t->status ? t->status : TG_ERR_INTERNAL);
  char fail_msg[TGI_MSG_CAP];
  memcpy(fail_msg, t->msg, sizeof fail_msg);
  t->status = sticky;
  t->cur_op = before;
  memcpy(t->msg, sticky_msg, sizeof sticky_msg);
  if (!s && side == TGI_ON_DEV) { /* ready for any stream of any library */
    s = tgi_device_sync(t->rt->dev, fail_msg);
    if (s) {
      char tmp[TGI_MSG_CAP];
      snprintf(tmp, sizeof tmp, "%s: waiting for the device: %s", fn, fail_msg);
      memcpy(fail_msg, tmp, sizeof tmp);
    }
  }
  if (s) {
    free(c);
    return tgi_error(t, s, "%s", fail_msg);
  }
  int64_t stride = 1;
  for (int d = v->ndim - 1; d >= 0; d--) {
    c->shape[d] = v->shape[d];
    c->strides[d] = stride;
    stride *= v->shape[d];
  }
  DLTensor *dl = &c->mt.dl_tensor;
  dl->data = p;
  dl->device.device_type = side == TGI_ON_DEV ? kDLCUDA : kDLCPU;
  dl->device.device_id = side == TGI_ON_DEV ? t->rt->device_index : 0;
  dl->ndim = v->ndim;
  dl->dtype = dtype;
  dl->shape = c->shape;
  dl->strides = c->strides;
  dl->byte_offset = 0;
  c->mt.manager_ctx = c;
  c->mt.deleter = export_deleter;
  c->tape = t;
  tgi_tape_retain(t);
  *out = (struct DLManagedTensor *)&c->mt;
  return TG_OK;
}
