/* tg_attention: softmax attention over the pairs a relation allows (math in host/attention.h).
 * One node with outputs out (and, when asked, lse: a non-differentiable second output).
 * Three lowerings, one capsule each:
 *   HOST           f32/f64, every relation; saves lse as f64 (B*Hq*Nq*8 bytes)
 *   CUDA_COMPOSED  cuBLAS + masked softmax; saves P, f32 [B,Hq,Nq,Nk]
 *   CUDA_FUSED     online softmax (cuda/attention_fused.h; a CSR / CONCAT relation: the row-centric
 *                  graph kernels of cuda/attention_csr.h over the relation's device CSR and its
 *                  transpose, in the relation's locality schedule on large graphs: csr_order);
 *                  saves only lse, f32 [B,Hq,Nq]
 * Attention dropout (tiga.h) on every provider: the node keeps (seed, call, keep) and the
 * backward regenerates the mask.
 * The node holds a reference to the relation (ops/relation.h), and the CUDA providers read the
 * relation's cached device form (mask bitmask + tile summary, u8 mask, cu_seqlens), built and
 * uploaded the first time a node needs it. */
#include "relation.h"
#include "../host/attention.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TIGA_HAVE_CUDA
#include "../cuda/attention_composed.h"
#include "../cuda/attention_csr.h"
#include "../cuda/attention_fused.h"
#endif

typedef struct attn_state {
  tg_relation *rel; /* held by the node */
  int64_t B, Nq, Nk, Hq, Hkv, D, Dv;
  double scale, prune;
  double keep;         /* attention dropout keep probability; 1: none */
  uint64_t seed, call; /* dropout stream (tiga.h) */
  /* the relation's device form (CUDA providers) and composed scratch */
  const uint8_t *d_mask;
  const void *d_prep;
  void *d_lo;
  const int32_t *d_cu_q, *d_cu_k;
  unsigned long long tiles[2]; /* fused forward: key tiles visited, pruned */
  int has_tiles;
} attn_state;

static void describe(const tgi_node *n, char *buf, size_t cap) {
  const attn_state *st = n->aux;
  char rel[128];
  tgi_rel_describe(st->rel, rel, sizeof rel);
  const tg_provider p = n->cap->provider;
  const bool graph = st->rel->kind == TG_REL_CSR || st->rel->kind == TG_REL_CONCAT;
  const char *lowering = p == TG_PROVIDER_HOST            ? "host-rows"
                         : p == TG_PROVIDER_CUDA_COMPOSED ? "dense-scores"
                         : graph                          ? "csr-rows"
                                                          : "tiles";
  int w = snprintf(buf, cap, "%s lowering=%s Hq=%lld Hkv=%lld D=%lld Dv=%lld", rel, lowering, (long long)st->Hq,
                   (long long)st->Hkv, (long long)st->D, (long long)st->Dv);
  if (st->keep < 1 && w > 0 && (size_t)w < cap)
    w += snprintf(buf + w, cap - (size_t)w, " dropout keep=%g call=%llu", st->keep, (unsigned long long)st->call);
  if (st->has_tiles && w > 0 && (size_t)w < cap)
    snprintf(buf + w, cap - (size_t)w, " pruned %.1f%% of %llu tiles (rho=%g)",
             st->tiles[0] ? 100.0 * (double)st->tiles[1] / (double)st->tiles[0] : 0.0, st->tiles[0], st->prune);
}

static tg_status attn_backward(tg_tape *t, tgi_node *n);
static const tgi_capsule cap_attn[3] = {{"attention", TG_PROVIDER_HOST, attn_backward, describe},
                                        {"attention", TG_PROVIDER_CUDA_FUSED, attn_backward, describe},
                                        {"attention", TG_PROVIDER_CUDA_COMPOSED, attn_backward, describe}};

static void host_shape(const attn_state *st, host_attn_shape *hs) {
  *hs =
      (host_attn_shape){st->B, st->Nq, st->Nk, st->Hq, st->Hkv, st->D, st->Dv, st->scale, st->keep, st->seed, st->call};
}

/* ------------------------------------------------------------ CUDA glue */
#ifdef TIGA_HAVE_CUDA
static void fused_shape(const attn_state *st, tg_dtype dt, tgc_attn_shape *sh) {
  static const tgc_attn_kind kinds[] = {TGC_ATTN_DENSE,  TGC_ATTN_CAUSAL, TGC_ATTN_MASK,
                                        TGC_ATTN_VARLEN, TGC_ATTN_MASK,   TGC_ATTN_MASK};
  const tg_relation *r = st->rel;
  memset(sh, 0, sizeof *sh);
  *sh = (tgc_attn_shape){.B = st->B,
                         .Nq = st->Nq,
                         .Nk = st->Nk,
                         .Hq = (int)st->Hq,
                         .Hkv = (int)st->Hkv,
                         .D = (int)st->D,
                         .Dv = (int)st->Dv,
                         .dtype = dt,
                         .scale = (float)st->scale,
                         .kind = kinds[r->kind],
                         .mask_prep = st->d_prep,
                         .mask_batch = r->mask_batch > 1 ? r->mask_batch : 1,
                         .mask_coarse = r->kind == TG_REL_MASK && r->mask_coarse,
                         .cu_q = st->d_cu_q,
                         .cu_k = st->d_cu_k,
                         .n_seqs = r->n_seqs,
                         .max_q = r->max_q,
                         .max_k = r->max_k,
                         .varlen_causal = r->causal,
                         .prune_rho = (float)st->prune,
                         .drop_keep = st->keep < 1 ? st->keep : 0,
                         .drop_seed = st->seed,
                         .drop_call = st->call};
}

static void composed_shape(const attn_state *st, tg_dtype dt, tgc_comp_shape *sh) {
  tgc_attn_shape f;
  fused_shape(st, dt, &f);
  *sh = (tgc_comp_shape){.B = f.B,
                         .Nq = f.Nq,
                         .Nk = f.Nk,
                         .Hq = f.Hq,
                         .Hkv = f.Hkv,
                         .D = f.D,
                         .Dv = f.Dv,
                         .dtype = dt,
                         .scale = f.scale,
                         .kind = f.kind,
                         .mask = st->d_mask,
                         .mask_batch = st->rel->kind == TG_REL_MASK ? st->rel->mask_batch : 0,
                         .cu_q = f.cu_q,
                         .cu_k = f.cu_k,
                         .n_seqs = f.n_seqs,
                         .varlen_causal = f.varlen_causal,
                         .keep = st->keep < 1 ? st->keep : 0,
                         .seed = st->seed,
                         .call = st->call};
}

/* Points the node's state at the relation's device form (built and uploaded on first use): the
 * fused kernels' prepared mask (MASK, FUSED), the u8 mask (MASK, and CSR / CONCAT densified, for
 * COMPOSED), cu_seqlens (VARLEN). */
static bool stage(tg_tape *t, attn_state *st, bool fused) {
  tg_relation *r = st->rel;
  bool sparse = r->kind == TG_REL_CSR || r->kind == TG_REL_CONCAT;
  if (fused && r->kind == TG_REL_MASK && !(st->d_prep = tgi_rel_dev_mask_prep(t, r))) return false;
  if (!fused && (r->kind == TG_REL_MASK || sparse) && !(st->d_mask = tgi_rel_dev_mask(t, r))) return false;
  if (r->kind == TG_REL_VARLEN) {
    const int32_t *d = tgi_rel_dev_cu(t, r);
    if (!d) return false;
    st->d_cu_q = d, st->d_cu_k = d + r->n_seqs + 1;
  }
  return true;
}

static bool is_graph(const tg_relation *r) { return r->kind == TG_REL_CSR || r->kind == TG_REL_CONCAT; }

static void csr_shape(const attn_state *st, tg_dtype dt, tgc_csr_attn_shape *sh) {
  *sh = (tgc_csr_attn_shape){.B = st->B,
                             .Nq = st->Nq,
                             .Nk = st->Nk,
                             .Hq = (int)st->Hq,
                             .Hkv = (int)st->Hkv,
                             .D = (int)st->D,
                             .Dv = (int)st->Dv,
                             .dtype = dt,
                             .scale = (float)st->scale,
                             .drop_keep = st->keep < 1 ? st->keep : 0,
                             .drop_seed = st->seed,
                             .drop_call = st->call};
}

/* The fused CSR kernels' schedules (ops/relation.h: dev.order), asked for only when the rows a
 * pass gathers (k and v for the rows, q and dout for the sources) are too many for L2 to keep
 * between their uses in the graph's own order. 16 MiB: below it the rows fit in the L2 of any GPU
 * the fused kernels target (40 MiB and up) whatever the order, and no schedule is built; above it a
 * schedule costs one int32 load per warp, and its one-time build is O(nodes + edges). */
#define CSR_ORDER_MIN_BYTES ((int64_t)16 << 20)
static void csr_order(const attn_state *st, tg_dtype dt, const int32_t **row, const int32_t **src) {
  const int64_t es = (int64_t)tg_dtype_size(dt), w = st->D + st->Dv;
  const int64_t kv = st->B * st->Nk * st->Hkv * w * es, qo = st->B * st->Nq * st->Hq * w * es;
  *row = *src = NULL;
  if (kv >= CSR_ORDER_MIN_BYTES || qo >= CSR_ORDER_MIN_BYTES) tgi_rel_dev_order(st->rel, row, src);
}

/* The fused kernels take this call (forward, and the backward when a gradient will be wanted);
 * false with tgc_error() saying why. */
static bool fused_takes(const attn_state *st, tg_dtype dt, bool grad) {
  if (is_graph(st->rel)) {
    tgc_csr_attn_shape sh;
    csr_shape(st, dt, &sh);
    return cuda_attention_csr_supported(&sh) == TG_OK && (!grad || cuda_attention_csr_backward_supported(&sh) == TG_OK);
  }
  tgc_attn_shape sh;
  fused_shape(st, dt, &sh);
  return cuda_attention_fused_supported(&sh) == TG_OK;
}

/* Whether AUTO may take the fused lowering for this call. */
static bool fused_fits(const attn_state *st, tg_dtype dt) {
  if (dt != TG_F32 && dt != TG_F16 && dt != TG_BF16) return false;
  if (is_graph(st->rel)) return fused_takes(st, dt, true);
  tgc_attn_shape sh;
  fused_shape(st, dt, &sh);
  return cuda_attention_fused_supported(&sh) == TG_OK;
}
#endif

/* ------------------------------------------------------------ CUDA_COMPOSED over a graph
 * A CSR / CONCAT relation never becomes an Nq x Nk mask: CUDA_COMPOSED records graph ops with
 * per-edge tensors, as tg_mha records projections (the batch folded into one block-diagonal graph):
 *   q_e = gather(q, DEST), k_e = gather(k, SOURCE)                 [E, Hq, D], [E, Hkv, D]
 *   s = scale * sum_last(q_e (*) k_e)  (GQA: [E, Hkv, G, D] (*) [E, Hkv, 1, D])     [E, Hq]
 *   out = graph_attend(s, v)   (GQA: v repeated over the group's heads)        [B*Nq, Hq, Dv]
 * graph_attend's composed lowering is softmax, [E, Hq, Dv] weighted values and a segment sum. Its
 * dropout rule (B = 1, R = h * Nq + i, key j) is tg_attention's for B = 1; with B > 1 the rows
 * would be numbered differently, so dropout takes B = 1 there. */
#ifdef TIGA_HAVE_CUDA
static tg_id composed_graph(tg_tape *t, tg_id q, tg_id k, tg_id v, tg_relation *rel, const attn_state *st, tg_dtype dt,
                            const tg_attention_options *opts) {
  const int64_t B = st->B, Nq = st->Nq, Nk = st->Nk, Hq = st->Hq, Hkv = st->Hkv, G = Hq / Hkv, D = st->D, Dv = st->Dv;
  if (B > 1 && opts->dropout_keep < 1)
    return tgi_fail(t, TG_ERR_UNSUPPORTED,
                    "attention dropout over a %s relation on CUDA_COMPOSED takes batch B = 1 (got %lld): the graph "
                    "lowering folds the batch into one graph, whose rows the dropout rule would number otherwise; "
                    "use CUDA_FUSED or HOST",
                    tgi_rel_kind_name(rel->kind), (long long)B),
           TG_NO_ID;
  tg_relation *g = B == 1 ? rel : tgi_rel_batched(t, rel, B);
  if (!g) return TG_NO_ID;
  if (opts->dropout_keep < 1) t->rng_calls--; /* graph_attend draws with the counter this call took */
  tg_provider prev;
  tg_tape_set_provider(t, TG_PROVIDER_CUDA_COMPOSED, &prev);
  const int64_t E = g->allowed;
  int64_t sq[3] = {B * Nq, Hq, D}, sk[3] = {B * Nk, Hkv, D}, sq4[4] = {E, Hkv, G, D}, sk4[4] = {E, Hkv, 1, D},
          ss[2] = {E, Hq}, sv[3] = {B * Nk, Hkv, Dv};
  tg_id qe = tg_reshape(t, tg_graph_gather(t, g, tg_reshape(t, q, 3, sq), TG_GRAPH_DEST), 4, sq4);
  tg_id ke = tg_reshape(t, tg_graph_gather(t, g, tg_reshape(t, k, 3, sk), TG_GRAPH_SOURCE), 4, sk4);
  tg_id s = tg_scale(t, tg_reshape(t, tg_sum_last(t, tg_mul(t, qe, ke)), 2, ss), st->scale);
  tg_id vals = tg_reshape(t, v, 3, sv);
  if (G > 1) { /* each kv head serves G query heads: repeat it (ones broadcast over the group) */
    uint16_t one16 = dt == TG_BF16 ? 0x3F80 : 0x3C00;
    float one32 = 1.0f;
    int64_t s1[4] = {1, 1, G, 1}, sv4[4] = {B * Nk, Hkv, 1, Dv}, svq[3] = {B * Nk, Hq, Dv};
    tg_id ones = TG_NO_ID;
    void *ob = tgi_malloc((size_t)G * tg_dtype_size(dt));
    if (ob) {
      for (int64_t i = 0; i < G; i++)
        memcpy((char *)ob + (size_t)i * tg_dtype_size(dt), dt == TG_F32 ? (void *)&one32 : (void *)&one16,
               tg_dtype_size(dt));
      if (tg_tape_input(t, dt, 4, s1, ob, (size_t)G * tg_dtype_size(dt), 0, &ones))
        tgi_fail(t, TG_ERR_OUT_OF_MEMORY, "the head-repeat constant: %s", tg_tape_error(t));
      free(ob);
    } else {
      tgi_fail(t, TG_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    vals = tg_reshape(t, tg_mul(t, tg_reshape(t, v, 4, sv4), ones), 3, svq);
  }
  tg_graph_attention_options go;
  tg_graph_attention_options_init(&go);
  go.dropout_keep = opts->dropout_keep;
  tg_id glse = TG_NO_ID;
  if (opts->lse_out) go.lse_out = &glse;
  int64_t so[4] = {B, Nq, Hq, Dv};
  tg_id out = tg_reshape(t, tg_graph_attend(t, g, s, vals, &go), 4, so);
  if (opts->lse_out) { /* [Hq, B * Nq] -> [B, Hq, Nq] */
    int64_t sl3[3] = {Hq, B, Nq};
    tg_id l3 = tg_reshape(t, glse, 3, sl3);
    *opts->lse_out = B == 1 ? tg_reshape(t, l3, 3, (int64_t[3]){1, Hq, Nq}) : tg_transpose(t, l3, 0, 1);
  }
  tg_tape_set_provider(t, prev, NULL);
  return t->status ? TG_NO_ID : out;
}
#endif

/* ------------------------------------------------------------ validation */

static bool check_shapes(tg_tape *t, const tgi_value *q, const tgi_value *k, const tgi_value *v, attn_state *st) {
  char a[TGI_SHAPE_STR_CAP], b[TGI_SHAPE_STR_CAP];
  const tgi_value *vals[3] = {q, k, v};
  const char *names[3] = {"q", "k", "v"}, *want[3] = {"[B, Nq, Hq, D]", "[B, Nk, Hkv, D]", "[B, Nk, Hkv, Dv]"};
  for (int i = 0; i < 3; i++)
    if (vals[i]->ndim != 4)
      return tgi_fail(t, TG_ERR_SHAPE, "argument '%s' has shape %s; expected 4 dims %s", names[i],
                      tgi_shape_str(vals[i]->shape, vals[i]->ndim, a, sizeof a), want[i]);
  st->B = q->shape[0], st->Nq = q->shape[1], st->Hq = q->shape[2], st->D = q->shape[3];
  st->Nk = k->shape[1], st->Hkv = k->shape[2], st->Dv = v->shape[3];
  if (k->shape[0] != st->B || k->shape[3] != st->D)
    return tgi_fail(t, TG_ERR_SHAPE, "argument 'k' has shape %s; expected [B=%lld, Nk, Hkv, D=%lld] (from 'q' %s)",
                    tgi_shape_str(k->shape, 4, a, sizeof a), (long long)st->B, (long long)st->D,
                    tgi_shape_str(q->shape, 4, b, sizeof b));
  if (v->shape[0] != st->B || v->shape[1] != st->Nk || v->shape[2] != st->Hkv)
    return tgi_fail(t, TG_ERR_SHAPE,
                    "argument 'v' has shape %s; expected [B=%lld, Nk=%lld, Hkv=%lld, Dv] (from 'k' %s)",
                    tgi_shape_str(v->shape, 4, a, sizeof a), (long long)st->B, (long long)st->Nk, (long long)st->Hkv,
                    tgi_shape_str(k->shape, 4, b, sizeof b));
  if (st->Hq % st->Hkv)
    return tgi_fail(
        t, TG_ERR_SHAPE,
        "query heads Hq = %lld (argument 'q') are not a multiple of key/value heads Hkv = %lld (argument 'k'); "
        "expected Hq %% Hkv == 0",
        (long long)st->Hq, (long long)st->Hkv);
  if (st->Hq > INT32_MAX || st->D > INT32_MAX || st->Dv > INT32_MAX || st->Nq > INT32_MAX || st->Nk > INT32_MAX)
    return tgi_fail(t, TG_ERR_SHAPE, "sizes Nq=%lld Nk=%lld Hq=%lld D=%lld Dv=%lld; expected each at most %d",
                    (long long)st->Nq, (long long)st->Nk, (long long)st->Hq, (long long)st->D, (long long)st->Dv,
                    INT32_MAX);
  return true;
}

static bool check_relation(tg_tape *t, const tg_relation *r, const attn_state *st) {
  const char *kn = tgi_rel_kind_name(r->kind);
  if (r->rt != t->rt)
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT,
                    "argument 'rel' (%s) was built on another runtime; expected a relation of this tape's runtime", kn);
  if (r->kind == TG_REL_VARLEN && st->B != 1)
    return tgi_fail(t, TG_ERR_SHAPE,
                    "argument 'rel' is a varlen relation (packed sequences); expected batch B = 1, got B = %lld "
                    "(argument 'q')",
                    (long long)st->B);
  if (r->nq != st->Nq || r->nk != st->Nk)
    return tgi_fail(t, TG_ERR_SHAPE,
                    "argument 'rel' is a %s relation over nq = %lld, nk = %lld; expected nq = Nq = %lld and nk = Nk = "
                    "%lld (dim 1 of 'q' and of 'k')",
                    kn, (long long)r->nq, (long long)r->nk, (long long)st->Nq, (long long)st->Nk);
  if (r->kind == TG_REL_MASK && r->mask_batch > 1 && r->mask_batch != st->B)
    return tgi_fail(t, TG_ERR_SHAPE,
                    "argument 'rel' is a mask over %lld batch entries; expected a shared mask (batch 0 or 1) or batch "
                    "B = %lld (dim 0 of 'q')",
                    (long long)r->mask_batch, (long long)st->B);
  return true;
}

/* Provider for this call: the tape's; AUTO on a device takes FUSED when it fits, else COMPOSED. */
static tg_provider pick(tg_tape *t, attn_state *st, tg_dtype dt) {
  tg_provider p = tgi_pick(t, TGI_HOST_AND_CUDA);
#ifdef TIGA_HAVE_CUDA
  if (p == TG_PROVIDER_CUDA_FUSED && t->provider == TG_PROVIDER_AUTO && st->prune == 0 && !fused_fits(st, dt))
    p = TG_PROVIDER_CUDA_COMPOSED;
#else
  (void)st, (void)dt;
#endif
  return p;
}

static bool check_provider(tg_tape *t, tg_provider p, const attn_state *st, tg_dtype dt, bool grad) {
  const tg_relation_kind kind = st->rel->kind;
  if (st->prune > 0 && p != TG_PROVIDER_CUDA_FUSED)
    return tgi_fail(
        t, TG_ERR_UNSUPPORTED,
        "option 'block_prune_threshold' = %g needs provider CUDA_FUSED; provider %s computes exact attention "
        "only (use 0)",
        st->prune, tg_provider_name(p));
  if (st->prune > 0 && kind != TG_REL_DENSE && kind != TG_REL_CAUSAL)
    return tgi_fail(t, TG_ERR_UNSUPPORTED,
                    "option 'block_prune_threshold' = %g is implemented for dense and causal relations; argument 'rel' "
                    "is %s",
                    st->prune, tgi_rel_kind_name(kind));
  if (st->keep < 1 && st->prune > 0)
    return tgi_fail(t, TG_ERR_UNSUPPORTED,
                    "option 'dropout_keep' = %g (attention dropout) does not combine with option "
                    "'block_prune_threshold' = %g; use one of them",
                    st->keep, st->prune);
  if (p != TG_PROVIDER_CUDA_FUSED) return true;
#ifdef TIGA_HAVE_CUDA
  if (!fused_takes(st, dt, grad))
    return tgi_fail(t, TG_ERR_UNSUPPORTED, "provider CUDA_FUSED does not take this call: %s (CUDA_COMPOSED does)",
                    tgc_error());
#else
  (void)dt, (void)grad;
#endif
  return true;
}

/* ------------------------------------------------------------ forward */

void tg_attention_options_init(tg_attention_options *o) {
  if (o)
    *o = (tg_attention_options){.struct_size = sizeof *o,
                                .scale = TG_SCALE_AUTO,
                                .block_prune_threshold = 0,
                                .lse_out = NULL,
                                .dropout_keep = 1};
}

tg_id tg_attention(tg_tape *t, tg_id q_id, tg_id k_id, tg_id v_id, const tg_relation *rel_in,
                   const tg_attention_options *opts_in) {
  tg_attention_options ob;
  tg_attention_options_init(&ob);
  const char *why = opts_in ? tgi_opts_copy(&ob, sizeof ob, opts_in) : NULL;
  const tg_attention_options *opts = &ob;
  if (!why && opts->lse_out) *opts->lse_out = TG_NO_ID;
  if (!tgi_op_begin(t, "tg_attention")) return TG_NO_ID;
  if (why) return tgi_fail(t, TG_ERR_INVALID_ARGUMENT, "argument 'opts' (tg_attention_options): %s", why), TG_NO_ID;
  tg_relation *rel = (tg_relation *)rel_in; /* its caches change, its meaning does not */
  tgi_value *q = tgi_arg(t, "q", q_id);
  tgi_value *k = q ? tgi_arg(t, "k", k_id) : NULL;
  tgi_value *v = k ? tgi_arg(t, "v", v_id) : NULL;
  if (!v) return TG_NO_ID;
  if (!rel)
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT,
                    "argument 'rel' is NULL; expected a relation (tg_relation_dense for full attention)"),
           TG_NO_ID;
  attn_state *st = tgi_scratch_h(t, sizeof *st);
  if (!st) return TG_NO_ID;
  memset(st, 0, sizeof *st);
  st->rel = rel;
  if (!check_shapes(t, q, k, v, st) || !check_relation(t, rel, st)) return TG_NO_ID;
  double scale = opts->scale, prune = opts->block_prune_threshold, keep = opts->dropout_keep;
  if (scale != TG_SCALE_AUTO && !(isfinite(scale) && scale > 0))
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT,
                    "option 'scale' is %g; expected a finite number > 0, or TG_SCALE_AUTO for 1/sqrt(D)", scale),
           TG_NO_ID;
  if (!(prune >= 0 && prune <= 1))
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT,
                    "option 'block_prune_threshold' is %g; expected 0 (exact) or a value in (0, 1]", prune),
           TG_NO_ID;
  if (!(keep > 0 && keep <= 1)) /* also rejects NaN */
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT,
                    "option 'dropout_keep' is %g; expected a keep probability in (0, 1], 1 for no dropout", keep),
           TG_NO_ID;
  st->scale = scale != TG_SCALE_AUTO ? scale : 1.0 / sqrt((double)st->D);
  st->keep = 1;
  if (keep < 1) { /* the call counter advances in no-grad mode too, as in tg_dropout */
    st->seed = t->seed, st->call = t->rng_calls++;
    if (t->grad_enabled) st->keep = keep; /* inference: no dropout */
  }
  st->prune = prune;
  tg_dtype dt = (tg_dtype)q->dtype;
  tgi_value *in[3] = {q, k, v};
  bool grad = tgi_needs_grad(t, 3, in);
  tg_provider p = pick(t, st, dt);
  if (!p || !tgi_need_float_for(t, p, "q", q) || !tgi_need_same_dtype(t, "q", q, "k", k) ||
      !tgi_need_same_dtype(t, "q", q, "v", v) || !check_provider(t, p, st, dt, grad))
    return TG_NO_ID;
#ifdef TIGA_HAVE_CUDA
  if (p == TG_PROVIDER_CUDA_COMPOSED && is_graph(rel)) return composed_graph(t, q_id, k_id, v_id, rel, st, dt, opts);
#endif

  int64_t oshape[4] = {st->B, st->Nq, st->Hq, st->Dv}, lshape[3] = {st->B, st->Hq, st->Nq};
  int64_t nrows = st->B * st->Hq * st->Nq;
  tgi_value *out = tgi_result(t, dt, 4, oshape);
  tgi_value *lse = out && opts->lse_out ? tgi_result(t, TG_F32, 3, lshape) : NULL;
  if (!out || (opts->lse_out && !lse)) return TG_NO_ID;
  void *saved = NULL;
  size_t saved_bytes = 0;

  if (p == TG_PROVIDER_HOST) {
    if (!tgi_rel_host_ready(t, rel)) return TG_NO_ID;
    const void *pq = tgi_read_h(t, q), *pk = tgi_read_h(t, k), *pv = tgi_read_h(t, v);
    void *po = tgi_write_h(t, out);
    double *pl = tgi_scratch_h(t, (size_t)nrows * sizeof(double));
    float *plo = lse ? tgi_write_h(t, lse) : NULL;
    if (!pq || !pk || !pv || !po || !pl || (lse && !plo)) return TG_NO_ID;
    host_rel hv;
    host_attn_shape hs;
    tgi_rel_host_view(rel, &hv);
    host_shape(st, &hs);
    if (host_attention_forward(dt, &hs, &hv, pq, pk, pv, po, pl))
      return tgi_fail(t, TG_ERR_OUT_OF_MEMORY, "out of host memory for attention scratch"), TG_NO_ID;
    for (int64_t i = 0; plo && i < nrows; i++)
      plo[i] = (float)pl[i];
    saved = pl, saved_bytes = (size_t)nrows * sizeof(double);
  } else {
#ifdef TIGA_HAVE_CUDA
    bool fused = p == TG_PROVIDER_CUDA_FUSED;
    const void *pq = tgi_read_d(t, q), *pk = tgi_read_d(t, k), *pv = tgi_read_d(t, v);
    void *po = tgi_write_d(t, out);
    if (!pq || !pk || !pv || !po || !stage(t, st, fused)) return TG_NO_ID;
    tg_status s;
    if (fused && is_graph(rel)) { /* row-centric kernels over the relation's device CSR */
      float *pl = lse ? tgi_write_d(t, lse) : tgi_scratch_d(t, (size_t)nrows * sizeof(float));
      tgc_csr csr;
      if (!pl || !tgi_rel_dev_csr(t, rel, false, &csr)) return TG_NO_ID;
      tgc_csr_attn_shape sh;
      csr_shape(st, dt, &sh);
      const int32_t *row, *src;
      csr_order(st, dt, &row, &src);
      size_t wb = cuda_attention_csr_forward_workspace(&sh, &csr);
      void *ws = wb ? tgi_scratch_d(t, wb) : NULL;
      if (wb && !ws) return TG_NO_ID;
      if ((s = cuda_attention_csr_forward(TGI_STREAM(t), &sh, &csr, row, pq, pk, pv, po, pl, ws, wb)))
        return tgi_fail_cuda(t, s, "fused CSR attention forward"), TG_NO_ID;
      saved = pl, saved_bytes = (size_t)nrows * sizeof(float);
    } else if (fused) {
      float *pl = lse ? tgi_write_d(t, lse) : tgi_scratch_d(t, (size_t)nrows * sizeof(float));
      unsigned long long *ctr = prune > 0 ? tgi_scratch_d(t, 2 * sizeof *ctr) : NULL;
      if (!pl || (prune > 0 && !ctr)) return TG_NO_ID;
      char msg[TGI_MSG_CAP];
      if (ctr && (s = tgi_device_zero(tgi_dev(t), ctr, 2 * sizeof *ctr, msg)))
        return tgi_fail(t, s, "%s", msg), TG_NO_ID;
      tgc_attn_shape sh;
      fused_shape(st, dt, &sh);
      if ((s = cuda_attention_fused_forward(TGI_STREAM(t), &sh, pq, pk, pv, po, pl, ctr)))
        return tgi_fail_cuda(t, s, "fused attention forward"), TG_NO_ID;
      if (ctr) { /* read the tile counters now so explain can report the pruned fraction */
        if ((s = tgi_device_d2h(tgi_dev(t), st->tiles, ctr, sizeof st->tiles, msg)))
          return tgi_fail(t, s, "reading the tile counters: %s", msg), TG_NO_ID;
        t->pending_d2h++;
        st->has_tiles = 1;
      }
      saved = pl, saved_bytes = (size_t)nrows * sizeof(float);
    } else {
      tgc_comp_shape sh;
      composed_shape(st, dt, &sh);
      size_t np = (size_t)(nrows * st->Nk), lo_bytes = cuda_attention_composed_lo_bytes(&sh);
      float *P = tgi_scratch_d(t, np * sizeof(float));
      st->d_lo = lo_bytes ? tgi_scratch_d(t, lo_bytes) : NULL;
      float *pl = lse ? tgi_write_d(t, lse) : NULL;
      if (!P || (lo_bytes && !st->d_lo) || (lse && !pl)) return TG_NO_ID;
      if ((s = cuda_attention_composed_forward(TGI_STREAM(t), TGI_CUBLAS(t), &sh, pq, pk, pv, po, pl, P, st->d_lo)))
        return tgi_fail_cuda(t, s, "composed attention forward"), TG_NO_ID;
      saved = P, saved_bytes = np * sizeof(float);
    }
#endif
  }
  tgi_value *outs[2] = {out, lse};
  tgi_node *n = tgi_record(t, TGI_CAP(cap_attn, p), 3, in, lse ? 2 : 1, outs);
  if (n) {
    n->aux = st;
    tgi_rel_hold(n, rel);
    if (grad) {
      n->saved = saved;
      n->saved_bytes = saved_bytes;
      n->saved_on = p == TG_PROVIDER_HOST ? TGI_ON_HOST : TGI_ON_DEV;
    }
  }
  if (lse) lse->requires_grad = false; /* gradient flows through out only */
  if (opts->lse_out && t->status == TG_OK) *opts->lse_out = tgi_id_of(t, lse);
  return tgi_done(t, out);
}

/* ------------------------------------------------------------ backward */

static tg_status attn_backward(tg_tape *t, tgi_node *n) {
  attn_state *st = n->aux;
  tgi_value *q = tgi_in(t, n, 0), *k = tgi_in(t, n, 1), *v = tgi_in(t, n, 2), *out = tgi_out(t, n, 0);
  if (!q->requires_grad && !k->requires_grad && !v->requires_grad) return TG_OK;
  tg_dtype dt = (tg_dtype)q->dtype;
  if (!n->saved) return tgi_fail(t, TG_ERR_INTERNAL, "attention node has no saved state"), TG_ERR_INTERNAL;
  if (n->cap->provider == TG_PROVIDER_HOST) {
    const void *gy = tgi_grad_h(t, out), *pq = tgi_read_h(t, q), *pk = tgi_read_h(t, k), *pv = tgi_read_h(t, v);
    void *gq = q->requires_grad ? tgi_grad_h(t, q) : NULL, *gk = k->requires_grad ? tgi_grad_h(t, k) : NULL;
    void *gv = v->requires_grad ? tgi_grad_h(t, v) : NULL;
    if (t->status) return t->status;
    host_rel hv;
    host_attn_shape hs;
    tgi_rel_host_view(st->rel, &hv);
    host_shape(st, &hs);
    if (host_attention_backward(dt, &hs, &hv, pq, pk, pv, gy, n->saved, gq, gk, gv))
      return tgi_fail(t, TG_ERR_OUT_OF_MEMORY, "out of host memory for attention scratch"), TG_ERR_OUT_OF_MEMORY;
    return TG_OK;
  }
#ifdef TIGA_HAVE_CUDA
  if (n->cap->provider == TG_PROVIDER_CUDA_FUSED && st->prune > 0)
    return tgi_fail(
               t, TG_ERR_UNSUPPORTED,
               "backward of a tile-pruned node (block_prune_threshold = %g) is not implemented: the fused backward "
               "is exact and would not match the pruned forward; train with block_prune_threshold = 0",
               st->prune),
           TG_ERR_UNSUPPORTED;
  const void *gy = tgi_grad_d(t, out), *pq = tgi_read_d(t, q), *pk = tgi_read_d(t, k), *pv = tgi_read_d(t, v);
  const void *po = tgi_read_d(t, out);
  void *gq = q->requires_grad ? tgi_grad_d(t, q) : NULL, *gk = k->requires_grad ? tgi_grad_d(t, k) : NULL;
  void *gv = v->requires_grad ? tgi_grad_d(t, v) : NULL;
  if (t->status) return t->status;
  tg_status s;
  if (n->cap->provider == TG_PROVIDER_CUDA_COMPOSED) {
    tgc_comp_shape sh;
    composed_shape(st, dt, &sh);
    size_t np = (size_t)(st->B * st->Hq * st->Nq * st->Nk);
    float *dS = tgi_scratch_d(t, np * sizeof(float));
    if (!dS) return t->status;
    if ((s = cuda_attention_composed_backward(TGI_STREAM(t), TGI_CUBLAS(t), &sh, pq, pk, pv, po, gy, n->saved, dS,
                                              st->d_lo, gq, gk, gv)))
      tgi_fail_cuda(t, s, "composed attention backward");
    return s;
  }
  /* The fused kernel accumulates into three distinct buffers: inputs that need no gradient, or
   * that are the same value (self-attention on one tensor), get zeroed scratch added back after. */
  tgi_value *vals[3] = {q, k, v};
  void *g[3] = {gq, gk, gv}, *tmp[3] = {NULL, NULL, NULL};
  char msg[TGI_MSG_CAP];
  for (int i = 0; i < 3; i++) {
    bool alias = (i > 0 && vals[i] == vals[0]) || (i > 1 && vals[i] == vals[1]);
    if (g[i] && !alias) continue;
    if (!(tmp[i] = tgi_scratch_d(t, vals[i]->bytes))) return t->status;
    if ((s = tgi_device_zero(tgi_dev(t), tmp[i], vals[i]->bytes, msg))) return tgi_fail(t, s, "%s", msg), s;
  }
  void *d[3] = {tmp[0] ? tmp[0] : g[0], tmp[1] ? tmp[1] : g[1], tmp[2] ? tmp[2] : g[2]};
  if (is_graph(st->rel)) {
    tgc_csr csr;
    if (!tgi_rel_dev_csr(t, st->rel, true, &csr)) return t->status;
    tgc_csr_attn_shape sh;
    csr_shape(st, dt, &sh);
    const int32_t *row, *src;
    csr_order(st, dt, &row, &src);
    size_t wb = cuda_attention_csr_backward_workspace(&sh, &csr);
    void *ws = wb ? tgi_scratch_d(t, wb) : NULL;
    if (wb && !ws) return t->status;
    if ((s = cuda_attention_csr_backward(TGI_STREAM(t), &sh, &csr, row, src, pq, pk, pv, po, gy, n->saved, d[0], d[1],
                                         d[2], ws, wb)))
      return tgi_fail_cuda(t, s, "fused CSR attention backward"), s;
  } else {
    tgc_attn_shape sh;
    fused_shape(st, dt, &sh);
    size_t wb = cuda_attention_fused_backward_workspace(&sh);
    void *ws = wb ? tgi_scratch_d(t, wb) : NULL;
    if (wb && !ws) return t->status;
    if ((s = cuda_attention_fused_backward(TGI_STREAM(t), &sh, pq, pk, pv, po, gy, n->saved, d[0], d[1], d[2], ws)))
      return tgi_fail_cuda(t, s, "fused attention backward"), s;
  }
  for (int i = 0; i < 3; i++)
    if (tmp[i] && g[i] && (s = cuda_attention_add(TGI_STREAM(t), dt, g[i], tmp[i], vals[i]->numel)))
      return tgi_fail_cuda(t, s, "attention gradient accumulation"), s;
  return TG_OK;
#else
  return tgi_fail(t, TG_ERR_INTERNAL, "CUDA attention node in a host-only build"), TG_ERR_INTERNAL;
#endif
}
