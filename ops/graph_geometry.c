/* tg_graph_displacement: per-edge geometry, out[e] = pos_src[j] - pos_dst[i] for the edges
 * e = (j -> i) of a relation in destination-major order (tiga.h, graph ops). Math in
 * host/graph_geometry.h; CUDA in cuda/graph_geometry.cu (f32 positions). */
#include "../host/graph_geometry.h"
#include "relation.h"

#include <stdio.h>

#ifdef TIGA_HAVE_CUDA
#include "../cuda/graph_geometry.h"
#endif

static void describe(const tgi_node *n, char *buf, size_t cap) {
  char rel[128];
  tgi_rel_describe(n->held, rel, sizeof rel);
  snprintf(buf, cap, "%s dim=%lld", rel, (long long)n->p.i[0]);
}

static tg_status disp_backward(tg_tape *t, tgi_node *n) {
  tg_relation *r = n->held;
  tgi_value *ps = tgi_in(t, n, 0), *pd = tgi_in(t, n, 1), *y = tgi_out(t, n, 0);
  int dim = (int)n->p.i[0];
  bool same = ps == pd;
  if (!ps->requires_grad && !pd->requires_grad) return TG_OK;
  if (n->cap->provider == TG_PROVIDER_HOST) {
    const int64_t *rp = NULL;
    const int32_t *ci = NULL;
    int64_t nnz;
    const void *gy = tgi_grad_h(t, y);
    void *gs = ps->requires_grad ? tgi_grad_h(t, ps) : NULL;
    void *gd = pd->requires_grad ? (same ? gs : tgi_grad_h(t, pd)) : NULL;
    if (t->status || !tgi_rel_host_csr(t, r, &rp, &ci, &nnz)) return t->status;
    host_displacement_backward((tg_dtype)y->dtype, r->nq, rp, ci, dim, gy, gs, gd);
    return TG_OK;
  }
#ifdef TIGA_HAVE_CUDA
  tgc_csr g;
  const void *gy = tgi_grad_d(t, y);
  void *gs = ps->requires_grad ? tgi_grad_d(t, ps) : NULL;
  void *gd = pd->requires_grad ? (same ? gs : tgi_grad_d(t, pd)) : NULL;
  if (t->status || !tgi_rel_dev_csr(t, r, gs != NULL, &g)) return t->status;
  tg_status s = cuda_displacement_backward(TGI_STREAM(t), &g, dim, gy, gs, gd);
  if (s) tgi_fail_cuda(t, s, "displacement backward");
  return s;
#else
  return TG_ERR_INTERNAL;
#endif
}

static const tgi_capsule cap_disp[2] = {{"displacement", TG_PROVIDER_HOST, disp_backward, describe},
                                        {"displacement", TG_PROVIDER_CUDA, disp_backward, describe}};

tg_id tg_graph_displacement(tg_tape *t, const tg_relation *rel_in, tg_id src_id, tg_id dst_id) {
  if (!tgi_op_begin(t, "tg_graph_displacement")) return TG_NO_ID;
  tgi_value *ps = tgi_arg(t, "pos_src", src_id);
  tgi_value *pd = ps ? tgi_arg(t, "pos_dst", dst_id) : NULL;
  if (!pd) return TG_NO_ID;
  tg_relation *r = (tg_relation *)rel_in;
  if (!r) return tgi_fail(t, TG_ERR_INVALID_ARGUMENT, "argument 'rel' is NULL; expected a relation"), TG_NO_ID;
  if (r->rt != t->rt)
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT, "argument 'rel' was built on another runtime"), TG_NO_ID;
  if (r->kind == TG_REL_MASK && r->mask_batch > 1)
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT,
                    "argument 'rel' is a per-batch mask (%lld graphs); graph ops take one graph",
                    (long long)r->mask_batch),
           TG_NO_ID;
  char a[TGI_SHAPE_STR_CAP], b[TGI_SHAPE_STR_CAP];
  if (ps->ndim != 2 || ps->shape[0] != r->nk || ps->shape[1] < 1 || ps->shape[1] > 3)
    return tgi_fail(t, TG_ERR_SHAPE, "argument 'pos_src' has shape %s; expected [Nk = %lld, dim] with dim 1..3",
                    tgi_shape_str(ps->shape, ps->ndim, a, sizeof a), (long long)r->nk),
           TG_NO_ID;
  if (pd->ndim != 2 || pd->shape[0] != r->nq || pd->shape[1] != ps->shape[1])
    return tgi_fail(t, TG_ERR_SHAPE,
                    "argument 'pos_dst' has shape %s; expected [Nq = %lld, dim = %lld] (from 'pos_src' %s)",
                    tgi_shape_str(pd->shape, pd->ndim, a, sizeof a), (long long)r->nq, (long long)ps->shape[1],
                    tgi_shape_str(ps->shape, ps->ndim, b, sizeof b)),
           TG_NO_ID;
  tg_provider p = tgi_pick(t, TGI_HOST_AND_CUDA);
  if (!p || !tgi_need_same_dtype(t, "pos_src", ps, "pos_dst", pd)) return TG_NO_ID;
  if (p == TG_PROVIDER_HOST ? !tgi_need_float(t, "pos_src", ps) : ps->dtype != TG_F32)
    return tgi_fail(t, TG_ERR_DTYPE, "argument 'pos_src' has dtype %s; provider %s takes %s positions",
                    tg_dtype_name((tg_dtype)ps->dtype), tg_provider_name(p),
                    p == TG_PROVIDER_HOST ? "f32 or f64" : "f32 (positions stay f32 in a bf16 model)"),
           TG_NO_ID;
  int dim = (int)ps->shape[1];
  int64_t nnz = r->allowed, oshape[2] = {nnz, dim};
  if (nnz < 1) /* as tg_graph_gather: no value has a size-0 dim */
    return tgi_fail(t, TG_ERR_SHAPE, "argument 'rel' has no edge; the per-edge result [E, dim] would be empty"),
           TG_NO_ID;
  tgi_value *y = tgi_result(t, (tg_dtype)ps->dtype, 2, oshape);
  if (!y) return TG_NO_ID;
  tgi_value *in[2] = {ps, pd};
  if (p == TG_PROVIDER_HOST) {
    const int64_t *rp = NULL;
    const int32_t *ci = NULL;
    const void *hs = tgi_read_h(t, ps), *hd = tgi_read_h(t, pd);
    void *hy = tgi_write_h(t, y);
    if (!hs || !hd || !hy || !tgi_rel_host_csr(t, r, &rp, &ci, &nnz)) return TG_NO_ID;
    host_displacement_forward((tg_dtype)ps->dtype, r->nq, rp, ci, dim, hs, hd, hy);
  } else {
#ifdef TIGA_HAVE_CUDA
    tgc_csr g;
    const float *ds = tgi_read_d(t, ps), *dd = tgi_read_d(t, pd);
    float *dy = tgi_write_d(t, y);
    if (!ds || !dd || !dy || !tgi_rel_dev_csr(t, r, false, &g)) return TG_NO_ID;
    tg_status s = cuda_displacement_forward(TGI_STREAM(t), &g, dim, ds, dd, dy);
    if (s) return tgi_fail_cuda(t, s, "displacement forward"), TG_NO_ID;
#endif
  }
  tgi_node *n = tgi_record(t, TGI_CAP(cap_disp, p), 2, in, 1, &y);
  if (n) {
    n->p.i[0] = dim;
    tgi_rel_hold(n, r);
  }
  return tgi_done(t, y);
}
