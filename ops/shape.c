/* Shape family: reshape, transpose, concat, slice, split. Values stay dense row-major, so each op
 * materializes its result: reshape copies the bytes, transpose moves elements through the
 * host_swap view [A, n0, B, n1, C] -> [A, n1, B, n0, C], and concat / slice / split copy blocks
 * of columns of the [rows, last dim] matrix. Backward applies the adjoint map and accumulates:
 * reshape gx += gy, transpose gx += swap(gy), concat adds each block of gy's columns into its
 * input's gradient, slice adds gy into its block of gx. Split records one slice node per piece.
 * Data movement works for any dtype the provider stores (integers included; they never carry
 * gradients); HOST takes f32/f64 floats, CUDA f32/f16/bf16. No node saves anything. */
#include "../host/shape.h"
#include "../tape/internal.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef TIGA_HAVE_CUDA
#include "../cuda/shape.h"
#endif

/* ------------------------------------------------------------ shared plumbing */

static bool need_movable(tg_tape *t, tg_provider p, const char *arg, const tgi_value *v) {
  tg_dtype dt = (tg_dtype)v->dtype;
  bool host = p == TG_PROVIDER_HOST;
  if (dt == TG_I32 || dt == TG_I64 || dt == TG_U8) return true;
  if (host ? (dt == TG_F32 || dt == TG_F64) : (dt == TG_F32 || dt == TG_F16 || dt == TG_BF16)) return true;
  return tgi_fail(t, TG_ERR_DTYPE, "argument '%s' has dtype %s; provider %s takes %s, i32, i64 or u8%s", arg,
                  tg_dtype_name(dt), tg_provider_name(p), host ? "f32, f64" : "f32, f16, bf16",
                  host ? " (f16/bf16 are computed on the CUDA provider)" : " (f64 is computed on the HOST provider)");
}

/* Data and gradient pointers on the side of provider p. */
static const void *read_on(tg_tape *t, tg_provider p, tgi_value *v) {
  return p == TG_PROVIDER_HOST ? tgi_read_h(t, v) : tgi_read_d(t, v);
}
static void *write_on(tg_tape *t, tg_provider p, tgi_value *v) {
  return p == TG_PROVIDER_HOST ? tgi_write_h(t, v) : tgi_write_d(t, v);
}
static void *grad_on(tg_tape *t, tg_provider p, tgi_value *v) {
  return p == TG_PROVIDER_HOST ? tgi_grad_h(t, v) : tgi_grad_d(t, v);
}

/* The kernels, run on provider p; acc selects the accumulating (backward) form. False with a
 * sticky error when a CUDA launcher fails. */
static bool run_cols(tg_tape *t, tg_provider p, tg_dtype dt, int64_t rows, int64_t w, const void *src, int64_t sld,
                     int64_t soff, void *dst, int64_t dld, int64_t doff, bool acc) {
  if (p == TG_PROVIDER_HOST) {
    if (acc)
      host_cols_add(dt, rows, w, src, sld, soff, dst, dld, doff);
    else
      host_cols_copy(tg_dtype_size(dt), rows, w, src, sld, soff, dst, dld, doff);
    return true;
  }
#ifdef TIGA_HAVE_CUDA
  tg_status s = cuda_cols(TGI_STREAM(t), dt, rows, w, src, sld, soff, dst, dld, doff, acc);
  return s ? tgi_fail_cuda(t, s, acc ? "backward" : "forward") : true;
#else
  return tgi_fail(t, TG_ERR_INTERNAL, "a CUDA node in a build without CUDA");
#endif
}

static bool run_swap(tg_tape *t, tg_provider p, tg_dtype dt, host_swap sw, const void *x, void *y, bool acc) {
  if (p == TG_PROVIDER_HOST) {
    if (acc)
      host_transpose_add(dt, sw, x, y);
    else
      host_transpose(tg_dtype_size(dt), sw, x, y);
    return true;
  }
#ifdef TIGA_HAVE_CUDA
  tg_status s = cuda_transpose(TGI_STREAM(t), dt, sw, x, y, acc);
  return s ? tgi_fail_cuda(t, s, acc ? "backward" : "forward") : true;
#else
  return tgi_fail(t, TG_ERR_INTERNAL, "a CUDA node in a build without CUDA");
#endif
}

static int64_t last_dim(const tgi_value *v) { return v->shape[v->ndim - 1]; }

/* Backward of a one-input node y = f(x): gy and the buffer gx accumulates into, on the node's
 * side. False when x wants no gradient or a buffer failed (t->status tells them apart). */
static bool unary_grads(tg_tape *t, tgi_node *n, tgi_value **x, const void **gy, void **gx) {
  *x = tgi_in(t, n, 0);
  if (!(*x)->requires_grad) return false;
  *gy = grad_on(t, n->cap->provider, tgi_out(t, n, 0));
  *gx = grad_on(t, n->cap->provider, *x);
  return t->status == TG_OK;
}

/* ------------------------------------------------------------ reshape */

static tg_status reshape_backward(tg_tape *t, tgi_node *n) {
  tgi_value *x;
  const void *gy;
  void *gx;
  if (unary_grads(t, n, &x, &gy, &gx))
    run_cols(t, n->cap->provider, (tg_dtype)x->dtype, 1, x->numel, gy, 0, 0, gx, 0, 0, true);
  return t->status;
}

static const tgi_capsule cap_reshape[2] = {{"reshape", TG_PROVIDER_HOST, reshape_backward, NULL},
                                           {"reshape", TG_PROVIDER_CUDA, reshape_backward, NULL}};

tg_id tg_reshape(tg_tape *t, tg_id x_id, int ndim, const int64_t *shape) {
  if (!tgi_op_begin(t, "tg_reshape")) return TG_NO_ID;
  tgi_value *x = tgi_arg(t, "x", x_id);
  if (!x) return TG_NO_ID;
  if (ndim < 0 || ndim > TG_MAX_DIMS)
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT, "argument 'ndim' is %d; expected 0..%d", ndim, TG_MAX_DIMS), TG_NO_ID;
  if (ndim > 0 && !shape)
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT, "argument 'shape' is NULL; expected %d dims", ndim), TG_NO_ID;
  tg_provider p = tgi_pick(t, TGI_HOST_AND_CUDA);
  if (!p || !need_movable(t, p, "x", x)) return TG_NO_ID;
  char ss[TGI_SHAPE_STR_CAP], sx[TGI_SHAPE_STR_CAP];
  tgi_shape_str(shape, ndim, ss, sizeof ss);
  tgi_shape_str(x->shape, x->ndim, sx, sizeof sx);
  /* known = product of the given sizes, watched for int64 overflow */
  int64_t out[TG_MAX_DIMS], known = 1;
  int infer = -1;
  bool too_big = false;
  for (int i = 0; i < ndim; i++) {
    out[i] = shape[i];
    if (shape[i] == -1) {
      if (infer >= 0)
        return tgi_fail(t, TG_ERR_SHAPE,
                        "argument 'shape' %s has -1 at dims %d and %d; at most one dim may be inferred", ss, infer, i),
               TG_NO_ID;
      infer = i;
    } else if (shape[i] <= 0) {
      return tgi_fail(t, TG_ERR_SHAPE, "argument 'shape' %s has %lld at dim %d; expected sizes > 0 (or one -1)", ss,
                      (long long)shape[i], i),
             TG_NO_ID;
    } else if (shape[i] > INT64_MAX / known) {
      too_big = true;
    } else {
      known *= shape[i];
    }
  }
  if (too_big)
    return tgi_fail(t, TG_ERR_SHAPE, "argument 'shape' %s holds more than the %lld elements of x %s", ss,
                    (long long)x->numel, sx),
           TG_NO_ID;
  if (infer < 0 && known != x->numel)
    return tgi_fail(t, TG_ERR_SHAPE, "argument 'shape' %s holds %lld elements; x %s holds %lld", ss, (long long)known,
                    sx, (long long)x->numel),
           TG_NO_ID;
  if (infer >= 0 && x->numel % known != 0)
    return tgi_fail(t, TG_ERR_SHAPE, "argument 'shape' %s: no size for the -1 makes %lld elements (those of x %s)", ss,
                    (long long)x->numel, sx),
           TG_NO_ID;
  if (infer >= 0) out[infer] = x->numel / known;
  tgi_value *y = tgi_result(t, (tg_dtype)x->dtype, ndim, out);
  if (!y) return TG_NO_ID;
  const void *px = read_on(t, p, x);
  if (!px) return TG_NO_ID;
  /* Same bytes, new shape: y shares x's storage (no copy). An op result is immutable step memory.
   * An input or a parameter can be rewritten (tg_tape_write, tg_tape_load, optimizer steps) while y
   * is alive: y is then a leaf view (TGI_LEAF_VIEW) on the side the provider read, and reading it or
   * running a backward through it after such a rewrite is TG_ERR_STATE (tgi_view_stale), never the
   * new bytes under the old name. */
  if (x->kind == TGI_RESULT) {
    y->data = x->data;
    y->flags |= x->flags & TGI_LEAF_VIEW;
    y->base_slot = x->base_slot, y->base_gen = x->base_gen, y->base_ver = x->base_ver;
  } else {
    memset(&y->data, 0, sizeof y->data);
    if (p == TG_PROVIDER_HOST)
      y->data.h = (void *)(uintptr_t)px;
    else
      y->data.d = (void *)(uintptr_t)px;
    y->data.valid = p == TG_PROVIDER_HOST ? TGI_ON_HOST : TGI_ON_DEV;
    y->flags |= TGI_LEAF_VIEW;
    y->base_slot = tgi_slot_of(t, x), y->base_gen = x->gen, y->base_ver = x->version;
  }
  tgi_record(t, TGI_CAP(cap_reshape, p), 1, &x, 1, &y);
  return tgi_done(t, y);
}

/* ------------------------------------------------------------ transpose */

static tg_status transpose_backward(tg_tape *t, tgi_node *n) {
  tgi_value *x;
  const void *gy;
  void *gx;
  if (unary_grads(t, n, &x, &gy, &gx)) {
    host_swap back = host_swap_back(host_swap_of(x->shape, x->ndim, (int)n->p.i[0], (int)n->p.i[1]));
    run_swap(t, n->cap->provider, (tg_dtype)x->dtype, back, gy, gx, true);
  }
  return t->status;
}

static void describe_dims(const tgi_node *n, char *buf, size_t cap) {
  snprintf(buf, cap, "dims=(%lld, %lld)", (long long)n->p.i[0], (long long)n->p.i[1]);
}

static const tgi_capsule cap_transpose[2] = {{"transpose", TG_PROVIDER_HOST, transpose_backward, describe_dims},
                                             {"transpose", TG_PROVIDER_CUDA, transpose_backward, describe_dims}};

/* d in [-ndim, ndim) -> [0, ndim). */
static bool norm_dim(tg_tape *t, const char *arg, int d, const tgi_value *x, int *out) {
  int nd = x->ndim;
  if (d < -nd || d >= nd) {
    char sx[TGI_SHAPE_STR_CAP];
    tgi_shape_str(x->shape, nd, sx, sizeof sx);
    if (nd == 0) return tgi_fail(t, TG_ERR_INVALID_ARGUMENT, "argument '%s' is %d; x is a scalar (no dims)", arg, d);
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT, "argument '%s' is %d; expected a dim in [%d, %d] for x %s", arg, d, -nd,
                    nd - 1, sx);
  }
  *out = d < 0 ? d + nd : d;
  return true;
}

tg_id tg_transpose(tg_tape *t, tg_id x_id, int d0, int d1) {
  if (!tgi_op_begin(t, "tg_transpose")) return TG_NO_ID;
  tgi_value *x = tgi_arg(t, "x", x_id);
  if (!x) return TG_NO_ID;
  int a = 0, b = 0;
  if (!norm_dim(t, "d0", d0, x, &a) || !norm_dim(t, "d1", d1, x, &b)) return TG_NO_ID;
  tg_provider p = tgi_pick(t, TGI_HOST_AND_CUDA);
  if (!p || !need_movable(t, p, "x", x)) return TG_NO_ID;
  int64_t shape[TG_MAX_DIMS];
  memcpy(shape, x->shape, sizeof shape);
  shape[a] = x->shape[b];
  shape[b] = x->shape[a];
  tgi_value *y = tgi_result(t, (tg_dtype)x->dtype, x->ndim, shape);
  if (!y) return TG_NO_ID;
  const void *px = read_on(t, p, x);
  void *py = write_on(t, p, y);
  if (!px || !py) return TG_NO_ID;
  if (!run_swap(t, p, (tg_dtype)x->dtype, host_swap_of(x->shape, x->ndim, a, b), px, py, false)) return TG_NO_ID;
  tgi_node *n = tgi_record(t, TGI_CAP(cap_transpose, p), 1, &x, 1, &y);
  if (n) {
    n->p.i[0] = a;
    n->p.i[1] = b;
  }
  return tgi_done(t, y);
}

/* ------------------------------------------------------------ concat */

static tg_status concat_backward(tg_tape *t, tgi_node *n) {
  tgi_value *y = tgi_out(t, n, 0);
  tg_provider p = n->cap->provider;
  const void *gy = grad_on(t, p, y);
  if (t->status) return t->status;
  int64_t W = last_dim(y), rows = y->numel / W, off = 0;
  for (uint32_t k = 0; k < n->n_in; k++) {
    tgi_value *x = tgi_in(t, n, k);
    int64_t w = last_dim(x);
    if (x->requires_grad) {
      void *gx = grad_on(t, p, x);
      if (!gx || !run_cols(t, p, (tg_dtype)x->dtype, rows, w, gy, W, off, gx, w, 0, true)) return t->status;
    }
    off += w;
  }
  return TG_OK;
}

static void describe_concat(const tgi_node *n, char *buf, size_t cap) { snprintf(buf, cap, "n=%u", n->n_in); }

static const tgi_capsule cap_concat[2] = {{"concat", TG_PROVIDER_HOST, concat_backward, describe_concat},
                                          {"concat", TG_PROVIDER_CUDA, concat_backward, describe_concat}};

/* All dims but the last equal. */
static bool same_leading(const tgi_value *a, const tgi_value *b) {
  if (a->ndim != b->ndim) return false;
  for (int i = 0; i + 1 < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return false;
  return true;
}

tg_id tg_concat(tg_tape *t, int n, const tg_id *xs) {
  if (!tgi_op_begin(t, "tg_concat")) return TG_NO_ID;
  if (n < 1) return tgi_fail(t, TG_ERR_INVALID_ARGUMENT, "argument 'n' is %d; expected at least 1 value", n), TG_NO_ID;
  if (!xs) return tgi_fail(t, TG_ERR_INVALID_ARGUMENT, "argument 'xs' is NULL; expected %d ids", n), TG_NO_ID;
  tgi_value **v = tgi_scratch_h(t, (size_t)n * sizeof *v);
  if (!v) return TG_NO_ID;
  char name[32];
  for (int k = 0; k < n; k++) {
    snprintf(name, sizeof name, "xs[%d]", k);
    if (!(v[k] = tgi_arg(t, name, xs[k]))) return TG_NO_ID;
  }
  tg_provider p = tgi_pick(t, TGI_HOST_AND_CUDA);
  if (!p) return TG_NO_ID;
  char s0[TGI_SHAPE_STR_CAP], sk[TGI_SHAPE_STR_CAP];
  tgi_shape_str(v[0]->shape, v[0]->ndim, s0, sizeof s0);
  if (v[0]->ndim < 1)
    return tgi_fail(t, TG_ERR_SHAPE, "argument 'xs[0]' is a scalar; concat joins along the last dim (1 dim or more)"),
           TG_NO_ID;
  int64_t W = 0;
  for (int k = 0; k < n; k++) {
    snprintf(name, sizeof name, "xs[%d]", k);
    if (!need_movable(t, p, name, v[k]) || !tgi_need_same_dtype(t, "xs[0]", v[0], name, v[k])) return TG_NO_ID;
    if (!same_leading(v[0], v[k]))
      return tgi_fail(t, TG_ERR_SHAPE,
                      "argument '%s' has shape %s; expected the shape of 'xs[0]' %s in every dim but the last", name,
                      tgi_shape_str(v[k]->shape, v[k]->ndim, sk, sizeof sk), s0),
             TG_NO_ID;
    W += last_dim(v[k]);
  }
  int64_t shape[TG_MAX_DIMS];
  memcpy(shape, v[0]->shape, sizeof shape);
  shape[v[0]->ndim - 1] = W;
  tg_dtype dt = (tg_dtype)v[0]->dtype;
  tgi_value *y = tgi_result(t, dt, v[0]->ndim, shape);
  if (!y) return TG_NO_ID;
  void *py = write_on(t, p, y);
  if (!py) return TG_NO_ID;
  int64_t rows = y->numel / W, off = 0;
  for (int k = 0; k < n; k++) {
    const void *px = read_on(t, p, v[k]);
    int64_t w = last_dim(v[k]);
    if (!px || !run_cols(t, p, dt, rows, w, px, w, 0, py, W, off, false)) return TG_NO_ID;
    off += w;
  }
  tgi_record(t, TGI_CAP(cap_concat, p), (uint32_t)n, v, 1, &y);
  return tgi_done(t, y);
}

/* ------------------------------------------------------------ slice and split */

static tg_status slice_backward(tg_tape *t, tgi_node *n) {
  tgi_value *x;
  const void *gy;
  void *gx;
  if (unary_grads(t, n, &x, &gy, &gx)) {
    int64_t W = last_dim(x), start = n->p.i[0], len = n->p.i[1];
    run_cols(t, n->cap->provider, (tg_dtype)x->dtype, x->numel / W, len, gy, len, 0, gx, W, start, true);
  }
  return t->status;
}

static void describe_slice(const tgi_node *n, char *buf, size_t cap) {
  snprintf(buf, cap, "cols=[%lld, %lld)", (long long)n->p.i[0], (long long)(n->p.i[0] + n->p.i[1]));
}

static const tgi_capsule cap_slice[2] = {{"slice", TG_PROVIDER_HOST, slice_backward, describe_slice},
                                         {"slice", TG_PROVIDER_CUDA, slice_backward, describe_slice}};

/* One slice node: columns [start, start + len) of x's last dim (range checked by the caller).
 * NULL on failure (sticky error). */
static tgi_value *slice_run(tg_tape *t, tg_provider p, tgi_value *x, int64_t start, int64_t len) {
  int64_t shape[TG_MAX_DIMS], W = last_dim(x);
  memcpy(shape, x->shape, sizeof shape);
  shape[x->ndim - 1] = len;
  tg_dtype dt = (tg_dtype)x->dtype;
  tgi_value *y = tgi_result(t, dt, x->ndim, shape);
  if (!y) return NULL;
  const void *px = read_on(t, p, x);
  void *py = write_on(t, p, y);
  if (!px || !py || !run_cols(t, p, dt, x->numel / W, len, px, W, start, py, len, 0, false)) return NULL;
  tgi_node *n = tgi_record(t, TGI_CAP(cap_slice, p), 1, &x, 1, &y);
  if (n) {
    n->p.i[0] = start;
    n->p.i[1] = len;
  }
  return t->status ? NULL : y;
}

/* x exists, has a last dim, and a dtype provider p moves. */
static bool slicable(tg_tape *t, tgi_value *x, tg_provider *p) {
  *p = tgi_pick(t, TGI_HOST_AND_CUDA);
  if (!*p || !need_movable(t, *p, "x", x)) return false;
  if (x->ndim < 1) return tgi_fail(t, TG_ERR_SHAPE, "argument 'x' is a scalar; expected a value with a last dim");
  return true;
}

tg_id tg_slice(tg_tape *t, tg_id x_id, int64_t start, int64_t len) {
  if (!tgi_op_begin(t, "tg_slice")) return TG_NO_ID;
  tgi_value *x = tgi_arg(t, "x", x_id);
  tg_provider p;
  if (!x || !slicable(t, x, &p)) return TG_NO_ID;
  int64_t W = last_dim(x);
  if (start < 0 || start >= W || len < 1 || len > W - start) {
    char sx[TGI_SHAPE_STR_CAP];
    tgi_fail(
        t, TG_ERR_INVALID_ARGUMENT,
        "arguments 'start' %lld and 'len' %lld do not fit x %s; expected 0 <= start, 1 <= len, start + len <= %lld",
        (long long)start, (long long)len, tgi_shape_str(x->shape, x->ndim, sx, sizeof sx), (long long)W);
    return TG_NO_ID;
  }
  return tgi_done(t, slice_run(t, p, x, start, len));
}

tg_id tg_split(tg_tape *t, tg_id x_id, int n, const int64_t *sizes, tg_id *outs) {
  if (outs)
    for (int k = 0; k < n; k++)
      outs[k] = TG_NO_ID;
  if (!tgi_op_begin(t, "tg_split")) return TG_NO_ID;
  tgi_value *x = tgi_arg(t, "x", x_id);
  if (!x) return TG_NO_ID;
  if (n < 1) return tgi_fail(t, TG_ERR_INVALID_ARGUMENT, "argument 'n' is %d; expected at least 1 piece", n), TG_NO_ID;
  if (!sizes) return tgi_fail(t, TG_ERR_INVALID_ARGUMENT, "argument 'sizes' is NULL; expected %d sizes", n), TG_NO_ID;
  if (!outs)
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT, "argument 'outs' is NULL; expected room for %d ids", n), TG_NO_ID;
  tg_provider p;
  if (!slicable(t, x, &p)) return TG_NO_ID;
  int64_t W = last_dim(x), sum = 0;
  bool over = false;
  for (int k = 0; k < n; k++) {
    if (sizes[k] < 1)
      return tgi_fail(t, TG_ERR_INVALID_ARGUMENT, "argument 'sizes[%d]' is %lld; expected a size >= 1", k,
                      (long long)sizes[k]),
             TG_NO_ID;
    if (over || sizes[k] > W - sum)
      over = true;
    else
      sum += sizes[k];
  }
  if (over || sum != W) {
    char sx[TGI_SHAPE_STR_CAP];
    tgi_fail(t, TG_ERR_SHAPE, "argument 'sizes' (%d pieces) sums to %s%lld; expected the last dim of x %s, %lld", n,
             over ? "more than " : "", (long long)(over ? W : sum), tgi_shape_str(x->shape, x->ndim, sx, sizeof sx),
             (long long)W);
    return TG_NO_ID;
  }
  int64_t start = 0;
  for (int k = 0; k < n; k++) {
    tgi_value *y = slice_run(t, p, x, start, sizes[k]);
    if (!y) {
      for (int j = 0; j < k; j++)
        outs[j] = TG_NO_ID;
      return TG_NO_ID;
    }
    outs[k] = tgi_id_of(t, y);
    start += sizes[k];
  }
  if (tgi_done(t, tgi_slot(t, tgi_id_slot(outs[0]))) == TG_NO_ID) /* ends the call (anomaly mode may fail it) */
    for (int k = 0; k < n; k++)
      outs[k] = TG_NO_ID;
  return outs[0];
}
