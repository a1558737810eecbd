/* tg_graph_attend and tg_gat_attention: the online-softmax reducer over a relation read as a graph
 * (math in host/graph.h). Lowerings:
 *   HOST           one node, host/graph.c, f32/f64; saves lse f64 [H, Nq]
 *   CUDA_FUSED     one node, cuda/graph.h's attend / gat kernels (F <= 256); saves lse f32 [H, Nq]
 *                  only: nothing of size E in either direction
 *   CUDA_COMPOSED  recorded graph ops with [E, ...] intermediates, as tg_mha records projections:
 *                    gat:    s = leaky_relu(gather(e_dst, DEST) + gather(e_src, SOURCE))
 *                    attend: p = graph_softmax(s)  (the node also outputs lse when asked)
 *                            p = p * M              (dropout: M [E, H] = m / keep, see below)
 *                            out = reduce_sum(p (x) gather(values, SOURCE))
 *                  where the broadcast product [E, H] (x) [E, H, F] runs as a trailing-dims tg_mul on
 *                  the [F, E*H] transpose of the gathered values.
 * AUTO picks HOST on a host-only runtime, else CUDA_FUSED (CUDA_COMPOSED when F > 256).
 * Attention dropout: the mask bit of (h, i, j) is tiga.h's attention rule with B = 1, R = h*Nq + i,
 * key j, Nk = the relation's nk, stream call | 2^63, call = the tape's RNG counter taken once per call
 * with keep < 1 (also in no-grad mode, where the dropout is off). HOST and FUSED regenerate it in
 * backward; COMPOSED draws M on the host with the same Philox rounds (host/philox.h) once per call
 * and uploads it as a constant of the tape: the same bits, at O(E H) host work per call (there is
 * no device kernel yet that writes a float mask). */
#include "graph.h"
#include "../host/cast.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void tg_graph_attention_options_init(tg_graph_attention_options *o) {
  if (o)
    *o = (tg_graph_attention_options){
        .struct_size = sizeof *o, .negative_slope = 0.2, .dropout_keep = 1, .lse_out = NULL};
}

#define FUSED_MAX_F 256 /* cuda/graph.h: the attention kernels take F <= 256 */

static void describe(const tgi_node *n, char *buf, size_t cap) {
  const graph_state *st = n->aux;
  char rel[128];
  tgi_rel_describe(st->rel, rel, sizeof rel);
  int w = snprintf(buf, cap, "%s H=%lld F=%lld", rel, (long long)st->H, (long long)st->F);
  if (st->gat && w > 0 && (size_t)w < cap) w += snprintf(buf + w, cap - (size_t)w, " slope=%g", st->slope);
  if (st->keep < 1 && w > 0 && (size_t)w < cap)
    w += snprintf(buf + w, cap - (size_t)w, " dropout keep=%g call=%llu", st->keep, (unsigned long long)st->call);
  if (n->cap->provider == TG_PROVIDER_CUDA_FUSED && w > 0 && (size_t)w < cap)
    snprintf(buf + w, cap - (size_t)w, " fused");
}

static host_graph_attn host_attn(const graph_state *st) {
  return (host_graph_attn){
      .H = st->H, .F = st->F, .slope = st->slope, .keep = st->keep, .seed = st->seed, .call = st->call};
}

#ifdef TIGA_HAVE_CUDA
static tgc_graph_attn dev_attn(const graph_state *st, tg_dtype dt) {
  return (tgc_graph_attn){.H = st->H,
                          .F = st->F,
                          .dtype = dt,
                          .slope = (float)st->slope,
                          .keep = st->keep < 1 ? st->keep : 0,
                          .seed = st->seed,
                          .call = st->call};
}
#endif

/* ------------------------------------------------------------ backward (HOST, CUDA_FUSED) */

/* Inputs: attend {scores, values}, gat {e_dst, e_src, values}; outputs {out, lse?}. */
static tg_status attn_backward(tg_tape *t, tgi_node *n) {
  const graph_state *st = n->aux;
  const uint32_t nv = st->gat ? 3 : 2;
  tgi_value *in[3] = {tgi_in(t, n, 0), tgi_in(t, n, 1), st->gat ? tgi_in(t, n, 2) : NULL};
  tgi_value *out = tgi_out(t, n, 0), *values = in[nv - 1];
  bool any = false;
  for (uint32_t i = 0; i < nv; i++)
    any |= in[i]->requires_grad;
  if (!any) return TG_OK;
  if (!n->saved) return tgi_fail(t, TG_ERR_INTERNAL, "graph attention node has no saved lse"), TG_ERR_INTERNAL;
  tg_dtype dt = (tg_dtype)values->dtype;
  const void *p[3] = {NULL, NULL, NULL};
  void *g[3] = {NULL, NULL, NULL};
  if (n->cap->provider == TG_PROVIDER_HOST) {
    host_graph hg;
    const void *gy = tgi_grad_h(t, out);
    for (uint32_t i = 0; i < nv; i++) {
      p[i] = tgi_read_h(t, in[i]);
      g[i] = in[i]->requires_grad ? tgi_grad_h(t, in[i]) : NULL;
    }
    if (t->status || !tgi_graph_host(t, st, &hg)) return t->status;
    host_graph_attn a = host_attn(st);
    tg_status s = st->gat ? host_graph_gat_backward(dt, &hg, &a, p[0], p[1], p[2], gy, n->saved, g[0], g[1], g[2])
                          : host_graph_attend_backward(dt, &hg, &a, p[0], p[1], gy, n->saved, g[0], g[1]);
    if (s) tgi_fail(t, s, "out of host memory for the graph attention gradient");
    return s;
  }
#ifdef TIGA_HAVE_CUDA
  const void *gy = tgi_grad_d(t, out), *po = tgi_read_d(t, out);
  for (uint32_t i = 0; i < nv; i++) {
    p[i] = tgi_read_d(t, in[i]);
    g[i] = in[i]->requires_grad ? tgi_grad_d(t, in[i]) : NULL;
  }
  /* per-source sums (dvalues, de_src) walk the transpose */
  bool per_source = g[nv - 1] || (st->gat && g[1]);
  tgc_csr cg;
  if (t->status || !tgi_rel_dev_csr(t, st->rel, per_source, &cg)) return t->status;
  tgc_graph_attn a = dev_attn(st, dt);
  tg_status s;
  if (st->gat) {
    size_t wb = cuda_graph_gat_backward_workspace(&cg, &a);
    void *ws = wb ? tgi_scratch_d(t, wb) : NULL;
    if (wb && !ws) return t->status;
    s = cuda_graph_gat_backward(TGI_STREAM(t), &cg, &a, p[0], p[1], p[2], po, gy, n->saved, g[0], g[1], g[2], ws, wb);
  } else {
    s = cuda_graph_attend_backward(TGI_STREAM(t), &cg, &a, p[0], p[1], po, gy, n->saved, g[0], g[1]);
  }
  if (s) tgi_fail_cuda(t, s, st->gat ? "fused GAT backward" : "fused graph attention backward");
  return s;
#else
  return tgi_fail(t, TG_ERR_INTERNAL, "CUDA graph attention node in a host-only build"), TG_ERR_INTERNAL;
#endif
}

static const tgi_capsule cap_attend[2] = {{"graph_attend", TG_PROVIDER_HOST, attn_backward, describe},
                                          {"graph_attend", TG_PROVIDER_CUDA_FUSED, attn_backward, describe}};
static const tgi_capsule cap_gat[2] = {{"gat_attention", TG_PROVIDER_HOST, attn_backward, describe},
                                       {"gat_attention", TG_PROVIDER_CUDA_FUSED, attn_backward, describe}};

/* ------------------------------------------------------------ CUDA_COMPOSED */

/* M [E, H] in dt: m / keep per edge and head (the dropout rule above), a constant of the tape. */
static tg_id dropout_weights(tg_tape *t, const graph_state *st, tg_dtype dt) {
  host_graph g;
  int64_t shape[2] = {st->E, st->H};
  tgi_value *m = tgi_result(t, dt, 2, shape);
  void *pm = m ? tgi_write_h(t, m) : NULL;
  if (!pm || !tgi_graph_host(t, st, &g)) return TG_NO_ID;
  const host_graph_attn a = host_attn(st);
  const float inv = (float)(1.0 / st->keep); /* as the fused kernels scale */
  for (int64_t i = 0; i < g.nq; i++)
    for (int64_t e = g.row_ptr[i]; e < g.row_ptr[i + 1]; e++)
      for (int64_t h = 0; h < st->H; h++) {
        float w = host_graph_kept(&a, g.nq, g.nk, h, i, g.col_idx[e]) ? inv : 0.0f;
        int64_t k = e * st->H + h;
        if (dt == TG_F32)
          ((float *)pm)[k] = w;
        else
          ((uint16_t *)pm)[k] = dt == TG_F16 ? host_f32_to_f16(w) : host_f32_to_bf16(w);
      }
  return tgi_id_of(t, m);
}

/* out = sum over each row's edges of softmax(scores) [* M] * values[j], as recorded ops. */
static tg_id attend_composed(tg_tape *t, graph_state *st, tg_id scores_id, tg_id values_id, tgi_value **lse) {
  tgi_value *s = tgi_arg(t, "scores", scores_id);
  tgi_value *p = s ? tgi_graph_softmax_rec(t, st, s, TG_PROVIDER_CUDA_COMPOSED, lse) : NULL;
  if (!p) return TG_NO_ID;
  tg_id w = tgi_id_of(t, p);
  if (st->keep < 1) w = tg_mul(t, w, dropout_weights(t, st, (tg_dtype)s->dtype));
  const int64_t EH = st->E * st->H;
  int64_t s1[1] = {EH}, s2[2] = {EH, st->F}, s3[3] = {st->E, st->H, st->F};
  tg_id vt = tg_transpose(t, tg_reshape(t, tg_graph_gather(t, st->rel, values_id, TG_GRAPH_SOURCE), 2, s2), 0, 1);
  tg_id pv = tg_mul(t, vt, tg_reshape(t, w, 1, s1)); /* [F, E*H] (x) [E*H] */
  return tg_graph_reduce(t, st->rel, tg_reshape(t, tg_transpose(t, pv, 0, 1), 3, s3), TG_REDUCE_SUM);
}

/* ------------------------------------------------------------ the calls */

/* attend: a = scores, b unused; gat: a = e_dst, b = e_src. */
static tg_id attn_call(tg_tape *t, const char *name, bool gat, const tg_relation *rel, tg_id a_id, tg_id b_id,
                       tg_id v_id, const tg_graph_attention_options *opts_in) {
  tg_graph_attention_options o;
  tg_graph_attention_options_init(&o);
  const char *why = opts_in ? tgi_opts_copy(&o, sizeof o, opts_in) : NULL;
  if (!why && o.lse_out) *o.lse_out = TG_NO_ID;
  if (!tgi_op_begin(t, name)) return TG_NO_ID;
  if (why)
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT, "argument 'opts' (tg_graph_attention_options): %s", why), TG_NO_ID;
  const char *an = gat ? "e_dst" : "scores";
  tgi_value *a = tgi_arg(t, an, a_id);
  tgi_value *b = a && gat ? tgi_arg(t, "e_src", b_id) : NULL;
  tgi_value *v = a && (b || !gat) ? tgi_arg(t, "values", v_id) : NULL;
  graph_state *st = v ? tgi_graph_begin(t, rel) : NULL;
  if (!st) return TG_NO_ID;
  st->gat = gat;

  /* shapes: scores [E, H] or e_dst [Nq, H] + e_src [Nk, H]; values [Nk, H, F] */
  char s1[TGI_SHAPE_STR_CAP], s2[TGI_SHAPE_STR_CAP], rs[160];
  tgi_graph_rel_str(st, rs, sizeof rs);
  int64_t N0 = gat ? st->Nq : st->E;
  if (a->ndim != 2 || a->shape[0] != N0)
    return tgi_fail(t, TG_ERR_SHAPE, "argument '%s' has shape %s; expected [%s = %lld, H] (argument 'rel' is a %s)", an,
                    tgi_shape_str(a->shape, a->ndim, s1, sizeof s1), gat ? "Nq" : "E", (long long)N0, rs),
           TG_NO_ID;
  st->H = a->shape[1];
  tgi_shape_str(a->shape, 2, s2, sizeof s2);
  if (gat && (b->ndim != 2 || b->shape[0] != st->Nk || b->shape[1] != st->H))
    return tgi_fail(t, TG_ERR_SHAPE,
                    "argument 'e_src' has shape %s; expected [Nk = %lld, H = %lld] (H from argument 'e_dst' %s)",
                    tgi_shape_str(b->shape, b->ndim, s1, sizeof s1), (long long)st->Nk, (long long)st->H, s2),
           TG_NO_ID;
  if (v->ndim != 3 || v->shape[0] != st->Nk || v->shape[1] != st->H)
    return tgi_fail(t, TG_ERR_SHAPE,
                    "argument 'values' has shape %s; expected [Nk = %lld, H = %lld, F] (Nk of argument 'rel', H from "
                    "argument '%s' %s)",
                    tgi_shape_str(v->shape, v->ndim, s1, sizeof s1), (long long)st->Nk, (long long)st->H, an, s2),
           TG_NO_ID;
  st->F = v->shape[2];

  /* options */
  if (gat && !(isfinite(o.negative_slope) && o.negative_slope >= 0))
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT, "option 'negative_slope' is %g; expected a finite number >= 0",
                    o.negative_slope),
           TG_NO_ID;
  if (!(o.dropout_keep > 0 && o.dropout_keep <= 1)) /* also rejects NaN */
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT,
                    "option 'dropout_keep' is %g; expected a keep probability in (0, 1], 1 for no dropout",
                    o.dropout_keep),
           TG_NO_ID;
  st->slope = gat ? o.negative_slope : 0;

  /* provider and dtypes */
  tg_provider p = tgi_pick(t, TGI_HOST_AND_CUDA);
  if (p == TG_PROVIDER_CUDA_FUSED && t->provider == TG_PROVIDER_AUTO && st->F > FUSED_MAX_F)
    p = TG_PROVIDER_CUDA_COMPOSED;
  if (!p || !tgi_need_float_for(t, p, an, a) || (gat && !tgi_need_same_dtype(t, an, a, "e_src", b)) ||
      !tgi_need_same_dtype(t, an, a, "values", v))
    return TG_NO_ID;
  if (p == TG_PROVIDER_CUDA_FUSED && st->F > FUSED_MAX_F)
    return tgi_fail(t, TG_ERR_UNSUPPORTED,
                    "provider CUDA_FUSED takes at most %d features per head; argument 'values' has F = %lld (HOST and "
                    "CUDA_COMPOSED take any F)",
                    FUSED_MAX_F, (long long)st->F),
           TG_NO_ID;
  if (p == TG_PROVIDER_CUDA_COMPOSED && st->E == 0)
    return tgi_fail(t, TG_ERR_SHAPE,
                    "argument 'rel' is a %s; provider CUDA_COMPOSED records per-edge tensors [E, ...], which cannot "
                    "be empty (HOST and CUDA_FUSED take a relation without edges)",
                    rs),
           TG_NO_ID;

  /* every check passed: take the dropout stream (in no-grad mode too; the dropout is off there) */
  if (o.dropout_keep < 1) {
    st->seed = t->seed, st->call = t->rng_calls++;
    if (t->grad_enabled) st->keep = o.dropout_keep;
  }
  tg_dtype dt = (tg_dtype)v->dtype;
  tgi_value *lse = NULL;
  if (p == TG_PROVIDER_CUDA_COMPOSED) {
    tg_id sc = a_id;
    if (gat)
      sc = tg_leaky_relu(
          t, tg_add(t, tg_graph_gather(t, rel, a_id, TG_GRAPH_DEST), tg_graph_gather(t, rel, b_id, TG_GRAPH_SOURCE)),
          st->slope);
    tg_id out = attend_composed(t, st, sc, v_id, o.lse_out ? &lse : NULL);
    if (o.lse_out && t->status == TG_OK) *o.lse_out = tgi_id_of(t, lse);
    return out;
  }

  int64_t oshape[3] = {st->Nq, st->H, st->F}, lshape[2] = {st->H, st->Nq}, nl = st->H * st->Nq;
  tgi_value *out = tgi_result(t, dt, 3, oshape);
  lse = out && o.lse_out ? tgi_result(t, TG_F32, 2, lshape) : NULL;
  if (!out || (o.lse_out && !lse)) return TG_NO_ID;
  tgi_value *in[3] = {a, gat ? b : v, v};
  const uint32_t nin = gat ? 3 : 2;
  bool grad = tgi_needs_grad(t, nin, in);
  void *saved = NULL;
  size_t saved_bytes = 0;
  if (p == TG_PROVIDER_HOST) {
    host_graph g;
    const void *pa = tgi_read_h(t, a), *pb = gat ? tgi_read_h(t, b) : NULL, *pv = tgi_read_h(t, v);
    void *po = tgi_write_h(t, out);
    double *pl = tgi_scratch_h(t, (size_t)nl * sizeof *pl);
    float *plo = lse ? tgi_write_h(t, lse) : NULL;
    if (!pa || (gat && !pb) || !pv || !po || !pl || (lse && !plo) || !tgi_graph_host(t, st, &g)) return TG_NO_ID;
    host_graph_attn ha = host_attn(st);
    tg_status s = gat ? host_graph_gat_forward(dt, &g, &ha, pa, pb, pv, po, pl)
                      : host_graph_attend_forward(dt, &g, &ha, pa, pv, po, pl);
    if (s) return tgi_fail(t, s, "out of host memory for graph attention scratch"), TG_NO_ID;
    for (int64_t k = 0; plo && k < nl; k++)
      plo[k] = (float)pl[k];
    saved = pl, saved_bytes = (size_t)nl * sizeof *pl;
  } else {
#ifdef TIGA_HAVE_CUDA
    tgc_csr cg;
    const void *pa = tgi_read_d(t, a), *pb = gat ? tgi_read_d(t, b) : NULL, *pv = tgi_read_d(t, v);
    void *po = tgi_write_d(t, out);
    float *pl = lse ? tgi_write_d(t, lse) : tgi_scratch_d(t, (size_t)nl * sizeof *pl);
    if (!pa || (gat && !pb) || !pv || !po || !pl || !tgi_rel_dev_csr(t, st->rel, false, &cg)) return TG_NO_ID;
    tgc_graph_attn da = dev_attn(st, dt);
    tg_status s = gat ? cuda_graph_gat_forward(TGI_STREAM(t), &cg, &da, pa, pb, pv, po, pl)
                      : cuda_graph_attend_forward(TGI_STREAM(t), &cg, &da, pa, pv, po, pl);
    if (s) return tgi_fail_cuda(t, s, gat ? "fused GAT forward" : "fused graph attention forward"), TG_NO_ID;
    saved = pl, saved_bytes = (size_t)nl * sizeof *pl;
#endif
  }
  tgi_value *outs[2] = {out, lse};
  tgi_node *n = tgi_record(t, gat ? &cap_gat[p != TG_PROVIDER_HOST] : &cap_attend[p != TG_PROVIDER_HOST], nin, in,
                           lse ? 2 : 1, outs);
  if (n) {
    n->aux = st;
    tgi_rel_hold(n, st->rel);
    if (grad) {
      n->saved = saved;
      n->saved_bytes = saved_bytes;
      n->saved_on = p == TG_PROVIDER_HOST ? TGI_ON_HOST : TGI_ON_DEV;
    }
  }
  if (lse) lse->requires_grad = false; /* the gradient flows through out only */
  if (o.lse_out && t->status == TG_OK) *o.lse_out = tgi_id_of(t, lse);
  return tgi_done(t, out);
}

tg_id tg_graph_attend(tg_tape *t, const tg_relation *rel, tg_id scores, tg_id values,
                      const tg_graph_attention_options *opts) {
  return attn_call(t, "tg_graph_attend", false, rel, scores, TG_ABSENT, values, opts);
}

tg_id tg_gat_attention(tg_tape *t, const tg_relation *rel, tg_id e_dst, tg_id e_src, tg_id values,
                       const tg_graph_attention_options *opts) {
  return attn_call(t, "tg_gat_attention", true, rel, e_dst, e_src, values, opts);
}
