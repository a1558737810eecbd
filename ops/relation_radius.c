/* tg_relation_radius / tg_relation_radius_value: radius graphs from positions (tiga.h). The
 * builders are host/radius.c (the reference) and, on a CUDA runtime, cuda/radius.cu; both give the
 * same CSR bit for bit. A GPU-built relation keeps its CSR on the device (it is the relation's
 * device form) and reads it back to the host only when a host consumer asks (relation.h). */
#include "../host/radius.h"
#include "relation.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TIGA_HAVE_CUDA
#include "../cuda/attention_csr.h"
#include "../cuda/radius.h"
#endif

void tg_radius_options_init(tg_radius_options *o) {
  if (o) *o = (tg_radius_options){.struct_size = sizeof *o, .max_neighbors = 0, .flags = 0, .perm_out = NULL};
}

static tg_status fail(tg_runtime *rt, tg_status s, const char *fn, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static tg_status fail(tg_runtime *rt, tg_status s, const char *fn, const char *fmt, ...) {
  char tmp[TGI_MSG_CAP];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  tgi_set_last_error("%s: %s", fn, tmp);
  if (rt) tgi_rt_error(rt, s, "%s: %s", fn, tmp);
  return s;
}

typedef struct radius_req {
  int dim;
  tg_dtype dtype;
  int64_t n_dst, n_src;
  const void *pos_dst, *pos_src; /* host or device (on_device) */
  int on_device, square;
  double cutoff;
  tg_radius_options o;
} radius_req;

/* Checks shared by both entry points (sizes, cutoff, options). */
static tg_status check_req(tg_runtime *rt, const char *fn, const radius_req *q) {
  if (q->dim < 1 || q->dim > 3)
    return fail(rt, TG_ERR_INVALID_ARGUMENT, fn, "argument 'dim' is %d; expected 1, 2 or 3", q->dim);
  if (q->dtype != TG_F32 && q->dtype != TG_F64)
    return fail(rt, TG_ERR_DTYPE, fn, "positions have dtype %s; expected f32 or f64", tg_dtype_name(q->dtype));
  if (q->n_dst < 1 || q->n_dst > INT32_MAX)
    return fail(rt, TG_ERR_INVALID_ARGUMENT, fn, "n_dst is %lld; expected 1 <= n_dst <= %d", (long long)q->n_dst,
                INT32_MAX);
  if (!q->square && (q->n_src < 1 || q->n_src > INT32_MAX))
    return fail(rt, TG_ERR_INVALID_ARGUMENT, fn, "n_src is %lld; expected 1 <= n_src <= %d (or a square graph)",
                (long long)q->n_src, INT32_MAX);
  if (!(isfinite(q->cutoff) && q->cutoff > 0))
    return fail(rt, TG_ERR_INVALID_ARGUMENT, fn, "argument 'cutoff' is %g; expected a finite number > 0", q->cutoff);
  if (q->o.max_neighbors < 0)
    return fail(rt, TG_ERR_INVALID_ARGUMENT, fn, "option 'max_neighbors' is %lld; expected 0 (unlimited) or >= 1",
                (long long)q->o.max_neighbors);
  if (q->o.flags & ~TG_RADIUS_SELF_LOOPS)
    return fail(rt, TG_ERR_INVALID_ARGUMENT, fn, "option 'flags' is 0x%x; expected 0 or TG_RADIUS_SELF_LOOPS",
                q->o.flags);
  if ((q->o.flags & TG_RADIUS_SELF_LOOPS) && !q->square)
    return fail(rt, TG_ERR_INVALID_ARGUMENT, fn,
                "option TG_RADIUS_SELF_LOOPS needs a square graph (one point set); this call has separate source "
                "positions");
  if (q->o.perm_out && q->o.perm_out_bytes != (size_t)q->n_dst * sizeof(int64_t))
    return fail(rt, TG_ERR_INVALID_ARGUMENT, fn, "option 'perm_out_bytes' is %zu; n_dst = %lld points need %zu",
                q->o.perm_out_bytes, (long long)q->n_dst, (size_t)q->n_dst * sizeof(int64_t));
  if (!q->o.perm_out && q->o.perm_out_bytes)
    return fail(rt, TG_ERR_INVALID_ARGUMENT, fn, "option 'perm_out' is NULL with perm_out_bytes %zu",
                q->o.perm_out_bytes);
  return TG_OK;
}

#ifdef TIGA_HAVE_CUDA
static void *radius_alloc(void *ctx, size_t bytes) {
  void *p = NULL;
  char msg[TGI_MSG_CAP];
  return tgi_device_alloc(ctx, bytes, &p, msg) == TG_OK ? p : NULL;
}
static void radius_release(void *ctx, void *p) { tgi_device_free(ctx, p); }
#endif

/* Builds the relation for a checked request; *out on success. */
static tg_status build(tg_runtime *rt, const char *fn, const radius_req *q, tg_relation **out) {
  tg_relation *r = tgi_rel_new_simple(rt, TG_REL_CSR, q->n_dst, q->square ? q->n_dst : q->n_src);
  if (!r) return fail(rt, TG_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  char msg[TGI_MSG_CAP];
  tg_status s;
  int64_t nnz = 0;
  if (rt->dev) {
#ifdef TIGA_HAVE_CUDA
    cuda_radius_args a = {.n_dst = q->n_dst,
                          .n_src = q->square ? q->n_dst : q->n_src,
                          .dim = q->dim,
                          .dtype = q->dtype,
                          .pos_dst = q->pos_dst,
                          .pos_src = q->square ? NULL : q->pos_src,
                          .on_device = q->on_device,
                          .cutoff = q->cutoff,
                          .max_neighbors = q->o.max_neighbors,
                          .square = q->square,
                          .self_loops = (q->o.flags & TG_RADIUS_SELF_LOOPS) != 0,
                          .phase_events = NULL};
    tgc_allocator al = {radius_alloc, radius_release, rt->dev};
    int64_t *d_rp = NULL, *d_perm = NULL;
    int32_t *d_ci = NULL, *d_order = NULL;
    /* A square graph keeps the builder's Morton order as its attention schedule (relation.h):
     * spatially close rows run together, so their gathers hit L2. Only a hint: skipped when the
     * memory is not there. */
    const bool want_order = q->square && q->n_dst >= TGI_REL_ORDER_MIN_ROWS;
    if ((q->o.perm_out || want_order) && !(d_perm = radius_alloc(rt->dev, (size_t)q->n_dst * sizeof *d_perm)) &&
        q->o.perm_out) {
      tgi_rel_release(r);
      return fail(rt, TG_ERR_OUT_OF_MEMORY, fn, "out of device memory for the permutation");
    }
    tgc_stream st = tgi_device_stream(rt->dev);
    s = cuda_radius_build(st, &a, &al, &d_rp, &d_ci, &nnz, d_perm);
    if (!s && d_perm && q->o.perm_out)
      s = tgi_device_d2h(rt->dev, q->o.perm_out, d_perm, q->o.perm_out_bytes, msg);
    else if (s)
      snprintf(msg, sizeof msg, "%s", tgc_error());
    if (!s && d_perm && want_order && (d_order = radius_alloc(rt->dev, (size_t)q->n_dst * sizeof *d_order)) &&
        cuda_attention_csr_order_from_perm(st, d_perm, q->n_dst, d_order) != TG_OK) {
      radius_release(rt->dev, d_order);
      d_order = NULL;
    }
    if (d_perm) radius_release(rt->dev, d_perm);
    if (s) {
      if (d_rp) radius_release(rt->dev, d_rp);
      if (d_ci) radius_release(rt->dev, d_ci);
      if (d_order) radius_release(rt->dev, d_order);
      tgi_rel_release(r);
      return fail(rt, s, fn, "%s", msg);
    }
    r->dev.row_ptr = d_rp, r->dev.col_idx = d_ci;
    r->dev.bytes += (size_t)(q->n_dst + 1) * sizeof(int64_t) + (size_t)(nnz ? nnz : 1) * sizeof(int32_t);
    if (d_order) r->dev.order = d_order, r->dev.order_tried = true, r->dev.bytes += (size_t)q->n_dst * sizeof *d_order;
    r->host_pending = true;
#endif
  } else {
    host_radius_args a = {.n_dst = q->n_dst,
                          .n_src = q->square ? q->n_dst : q->n_src,
                          .dim = q->dim,
                          .dtype = q->dtype,
                          .pos_dst = q->pos_dst,
                          .pos_src = q->square ? NULL : q->pos_src,
                          .cutoff = q->cutoff,
                          .max_neighbors = q->o.max_neighbors,
                          .square = q->square,
                          .self_loops = (q->o.flags & TG_RADIUS_SELF_LOOPS) != 0};
    s = host_radius_build(&a, &r->row_ptr, &r->col_idx, &nnz, q->o.perm_out, msg, sizeof msg);
    if (s) {
      tgi_rel_release(r);
      return fail(rt, s, fn, "%s", msg);
    }
  }
  r->nnz = r->allowed = nnz;
  *out = r;
  return TG_OK;
}

static tg_status load_opts(tg_runtime *rt, const char *fn, const tg_radius_options *opts, radius_req *q) {
  tg_radius_options_init(&q->o);
  const char *why = opts ? tgi_opts_copy(&q->o, sizeof q->o, opts) : NULL;
  return why ? fail(rt, TG_ERR_INVALID_ARGUMENT, fn, "argument 'opts' (tg_radius_options): %s", why) : TG_OK;
}

tg_status tg_relation_radius(tg_runtime *rt, int dim, tg_dtype dtype, int64_t n_dst, const void *pos_dst,
                             size_t pos_dst_bytes, int64_t n_src, const void *pos_src, size_t pos_src_bytes,
                             double cutoff, const tg_radius_options *opts, tg_relation **out) {
  const char *fn = "tg_relation_radius";
  if (!rt) return fail(NULL, TG_ERR_INVALID_ARGUMENT, fn, "argument 'rt' is NULL; expected a runtime");
  if (!out) return fail(rt, TG_ERR_INVALID_ARGUMENT, fn, "argument 'out' is NULL; expected a tg_relation**");
  *out = NULL;
  radius_req q = {.dim = dim,
                  .dtype = dtype,
                  .n_dst = n_dst,
                  .n_src = n_src,
                  .pos_dst = pos_dst,
                  .pos_src = pos_src,
                  .square = !pos_src && !pos_src_bytes && !n_src,
                  .cutoff = cutoff};
  tg_status s = load_opts(rt, fn, opts, &q);
  if (!s) s = check_req(rt, fn, &q);
  if (s) return s;
  size_t es = tg_dtype_size(dtype);
  size_t need_d = (size_t)n_dst * (size_t)dim * es;
  if (!pos_dst || pos_dst_bytes != need_d)
    return fail(rt, TG_ERR_INVALID_ARGUMENT, fn,
                "argument 'pos_dst%s' is %s%zu; [n_dst = %lld, dim = %d] %s take %zu bytes", pos_dst ? "_bytes" : "",
                pos_dst ? "" : "NULL with ", pos_dst_bytes, (long long)n_dst, dim, tg_dtype_name(dtype), need_d);
  if (!q.square) {
    size_t need_s = (size_t)n_src * (size_t)dim * es;
    if (!pos_src || pos_src_bytes != need_s)
      return fail(
          rt, TG_ERR_INVALID_ARGUMENT, fn,
          "argument 'pos_src%s' is %s%zu; [n_src = %lld, dim = %d] %s take %zu bytes (or NULL, 0 bytes and n_src "
          "0 for a square graph)",
          pos_src ? "_bytes" : "", pos_src ? "" : "NULL with ", pos_src_bytes, (long long)n_src, dim,
          tg_dtype_name(dtype), need_s);
  }
  return build(rt, fn, &q, out);
}

tg_status tg_relation_radius_value(tg_tape *t, tg_id pos_dst, tg_id pos_src, double cutoff,
                                   const tg_radius_options *opts, tg_relation **out) {
  const char *fn = "tg_relation_radius_value";
  if (!t) return fail(NULL, TG_ERR_INVALID_ARGUMENT, fn, "argument 'tape' is NULL; expected a tape");
  if (!out) return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "%s: argument 'out' is NULL; expected a tg_relation**", fn);
  *out = NULL;
  if (t->status)
    return tgi_error(t, TG_ERR_STATE, "%s: the tape holds an error from an earlier op call: %s", fn, t->msg);
  tg_status s;
  tgi_value *d = tgi_lookup(t, fn, "pos_dst", pos_dst, &s), *sv = NULL;
  if (!d) return s;
  if (pos_src != TG_ABSENT && !(sv = tgi_lookup(t, fn, "pos_src", pos_src, &s))) return s;
  const tgi_value *vals[2] = {d, sv};
  const char *names[2] = {"pos_dst", "pos_src"};
  for (int k = 0; k < 2; k++) {
    const tgi_value *v = vals[k];
    if (!v) continue;
    char sh[TGI_SHAPE_STR_CAP];
    if (v->ndim != 2 || v->shape[1] < 1 || v->shape[1] > 3 || (v->dtype != TG_F32 && v->dtype != TG_F64))
      return tgi_error(t, v->ndim != 2 || v->shape[1] < 1 || v->shape[1] > 3 ? TG_ERR_SHAPE : TG_ERR_DTYPE,
                       "%s: argument '%s' is %s %s; expected [n, dim] with dim 1..3, f32 or f64", fn, names[k],
                       tgi_shape_str(v->shape, v->ndim, sh, sizeof sh), tg_dtype_name((tg_dtype)v->dtype));
  }
  if (sv && (sv->shape[1] != d->shape[1] || sv->dtype != d->dtype))
    return tgi_error(t, TG_ERR_SHAPE, "%s: arguments 'pos_src' and 'pos_dst' have different dims or dtypes", fn);
  radius_req q = {.dim = (int)d->shape[1],
                  .dtype = (tg_dtype)d->dtype,
                  .n_dst = d->shape[0],
                  .n_src = sv ? sv->shape[0] : 0,
                  .square = sv == NULL,
                  .cutoff = cutoff};
  if ((s = load_opts(t->rt, fn, opts, &q)) || (s = check_req(t->rt, fn, &q)))
    return tgi_error(t, s, "%s", tg_runtime_error(t->rt));
  /* read the positions where they live: on a device runtime, the device copy when it is current */
  tg_status before = t->status;
  const char *prev = t->cur_op;
  t->cur_op = fn;
  bool dev = t->rt->dev && (d->data.valid & TGI_ON_DEV) && (!sv || (sv->data.valid & TGI_ON_DEV));
  q.on_device = dev;
  q.pos_dst = dev ? tgi_read_d(t, d) : tgi_read_h(t, d);
  if (sv) q.pos_src = dev ? tgi_read_d(t, sv) : tgi_read_h(t, sv);
  t->cur_op = prev;
  if (t->status != before) { /* a placement failure: reported, not sticky */
    s = t->status;
    t->status = before;
    return s;
  }
  s = build(t->rt, fn, &q, out); /* host copies on a device runtime: the GPU builder uploads them */
  return s ? tgi_error(t, s, "%s", tg_runtime_error(t->rt)) : TG_OK;
}
