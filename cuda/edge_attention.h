/* CUDA launchers of tg_edge_attention's fused core (ops/edge_attention.c records the rest).
 * Storage dtype f32 or bf16 for every tensor but positions (f32) and lse / workspaces (f32);
 * all arithmetic and accumulation in f32. Notation of cuda/graph.h (edges e = (j -> i) in the
 * CSR's order, row(e) = i, j = col_idx[e]).
 *
 * The per-node feature products are inputs: U = x_src . w1_src [Nk, hid] and V = x_dst . w1_dst
 * [Nq, hid] (either may be NULL: zero). The kernels evaluate, per edge and hidden unit k,
 *   a[e, k] = b1[k] + U[j, k] + V[i, k] + sum_d wp[d, k] (ps[j, d] - pd[i, d]) + sum_f we[f, k] fe[e, f]
 *   z[e, k] = LeakyReLU(a; slope)                (a > 0: a; else slope * a — a = 0 takes the slope)
 *   s[e, h] = b2[h] + sum_k z[e, k] w2[k, h]
 *   out[i, h, :] = sum_{e in row i} exp(s[e, h] - lse[h, i]) w[e, h] values[j, h, :]
 *   lse[h, i] = log sum_{e in row i} exp(s[e, h])  (-inf for an empty row, whose out is 0)
 * with w the attention-dropout weight of cuda/graph.h (tgc_graph_attn's keep / seed / call rule).
 * wp [dim, hid] and we [Fe, hid] are the geometry and edge-feature rows of w1 (contiguous rows, so
 * the caller passes pointers into w1 and into its gradient); b1 [hid], b2 [H] may be NULL (zero).
 *
 * Backward (every gradient ACCUMULATES, g += ...; NULL = not wanted):
 *   D[i, h] = <dout[i, h], out[i, h]>;  p = exp(s - lse);  dp = w <dout[i, h], values[j, h]>
 *   ds[e, h] = p (dp - D);  dz[e, k] = sum_h ds[e, h] w2[k, h];  da = dz * LeakyReLU'(a)
 *   dvalues[j, h] += sum_e p w dout[i, h]          dU[j, k] += sum_e da     dV[i, k] += sum_e da
 *   dps[j, d] += sum_e sum_k wp[d, k] da           dpd[i, d] -= sum_e sum_k wp[d, k] da
 *   dfe[e, f] += sum_k we[f, k] da[e, k]
 *   dwp[d, k] += sum_e (ps[j, d] - pd[i, d]) da     dwe[f, k] += sum_e fe[e, f] da[e, k]
 *   db1[k] += sum_e da[e, k]    dw2[k, h] += sum_e z[e, k] ds[e, h]    db2[h] += sum_e ds[e, h]
 * (db2 is 0 up to rounding: softmax is shift invariant per row.) Nothing of size E is stored: the
 * backward recomputes a, z, s, p from the inputs and lse. Deterministic: no float atomics; per-row
 * sums by one group in edge order, per-source sums in transpose order (needs csr->t_ptr), weight
 * sums as fixed-order partials per block reduced in block order.
 *
 * Supported: hid in {16, 32, 64, 128}, H in 1..8, F in 1..128, dim in 0..3, Fe in 0..16; else
 * TG_ERR_UNSUPPORTED with a message (tgc_set_error). Pointers are device memory. */
#ifndef TIGA_CUDA_EDGE_ATTENTION_H
#define TIGA_CUDA_EDGE_ATTENTION_H
#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tgc_edge_attn {
  int64_t H, F, hid; /* heads, features per head of values / out, hidden width of the score MLP */
  int dim, Fe;       /* geometry dims (0: no positions), edge features (0: none) */
  tg_dtype dtype;    /* storage dtype of U, V, fe, values, weights, out and their gradients (f32, bf16) */
  float slope;       /* LeakyReLU negative slope */
  double keep;       /* attention dropout keep: 0 or 1 none, (0, 1) dropout (cuda/graph.h's rule) */
  uint64_t seed, call;
  int lanes; /* the lane kernels (the small case, cuda/edge_attention_ln.cu): 0 by size, < 0 off,
              * n > 0 n lanes per segment (TIGA_EA_LANES, for tests and the bench) */
  int slice; /* the slice kernels (f32 hidden 64, cuda/edge_attention_sl.cu): 0 where they apply,
              * < 0 off (TIGA_EA_SLICE=0, for tests and the bench) */
  /* Schedules (NULL: the identity): device int32 permutations of [0, Nq) and [0, Nk) giving the
   * order in which the destination rows and the sources are handed to lanes / warps, so that the
   * ones that run together gather overlapping rows (a locality order of the graph: ops/relation.h,
   * dev.order). A performance hint: every row's and source's result is the same bits in any
   * order; the weight gradients' partial sums follow the schedule (fixed for a fixed relation).
   * The lane and warp-per-segment kernels follow them; the packed kernels (consecutive chunks of
   * rows) do not. */
  const int32_t *row_order, *src_order;
  /* Renumbered graphs (the lane kernels only; else TG_ERR_INVALID_ARGUMENT): the CSR and every
   * per-node tensor the kernels index by node (U, V, values, lse, the backward's D pairs and
   * gradients) are in a new numbering, except the destination rows' out (written by the forward),
   * dout and the forward's out (read by the backward), which stay at row_map[i], the old index of
   * new row i. dout_new [Nq, H, F] (backward, with row_map): the destination pass copies dout there
   * in the new numbering and the source pass gathers it. NULL: no renumbering. (ops/edge_attention.c
   * renumbers the hidden-16 self-attention path in the relation's locality order.) */
  const int32_t *row_map;
  void *dout_new;
  int big; /* the lane kernels' large-graph rule at (H 4, F 2) (cuda/edge_attention_ln.cu): 0 by size
            * (from 2^18 rows), > 0 on, < 0 off at any size (TIGA_EA_BIG=1 / 0: tests, the bench) */
} tgc_edge_attn;

/* The inputs every launcher reads (NULL where absent). */
typedef struct tgc_edge_inputs {
  const void *U, *V;        /* [Nk, hid], [Nq, hid] */
  const float *ps, *pd;     /* [Nk, dim], [Nq, dim] (f32) */
  const void *fe;           /* [E, Fe] */
  const void *values;       /* [Nk, H, F] */
  const void *wp, *we, *b1; /* [dim, hid], [Fe, hid], [hid] */
  const void *w2, *b2;      /* [hid, H], [H] */
} tgc_edge_inputs;

/* The gradients (NULL = not wanted; each accumulates, but see U_over). */
typedef struct tgc_edge_grads {
  void *U, *V;
  float *ps, *pd;
  void *fe, *values, *wp, *we, *b1, *w2, *b2;
  /* nonzero: U is the inputs' U itself, and the backward overwrites it with dU (no accumulation)
   * after its last read of U. Only where cuda_edge_attention_dU_over says the kernels allow it. */
  int U_over;
  /* nonzero: values is the inputs' values itself and the source pass overwrites it with dvalues
   * (stores; sources without edges store 0) after its last read. The lane kernels only. */
  int values_over;
} tgc_edge_grads;

/* NULL when a is supported, else a static message naming what is not (for the op's status). */
const char *cuda_edge_attention_unsupported(const tgc_edge_attn *a);

/* -> out [Nq, H, F], lse [H, Nq] f32. */
tg_status cuda_edge_attention_forward(tgc_stream s, const tgc_csr *g, const tgc_edge_attn *a, const tgc_edge_inputs *in,
                                      void *out, float *lse);
/* f32 scratch the backward needs (D per row and head, the weight partials). */
size_t cuda_edge_attention_backward_workspace(const tgc_csr *g, const tgc_edge_attn *a);
/* Whether cuda_edge_attention_backward with these arguments (d->U_over ignored) would run kernels
 * that can write dU over U (d->U == in->U, d->U_over set): kernels whose only reads of U[j] after
 * the destination pass are those of the pass over source j itself (the lane and slice kernels). */
int cuda_edge_attention_dU_over(const tgc_csr *g, const tgc_edge_attn *a, const tgc_edge_inputs *in, const void *out,
                                const void *dout, const tgc_edge_grads *d, const void *workspace);
/* Accumulates the gradients in *d. out, dout, lse are the forward's output, its gradient and lse.
 * Needs the transpose when d->U, d->values or d->ps is wanted. */
tg_status cuda_edge_attention_backward(tgc_stream s, const tgc_csr *g, const tgc_edge_attn *a,
                                       const tgc_edge_inputs *in, const void *out, const void *dout, const float *lse,
                                       const tgc_edge_grads *d, void *workspace, size_t workspace_bytes);

/* The geometry fold (f32 only; ops/edge_attention.c uses it on CUDA_FUSED f32 calls at hidden 16
 * with both feature products, where it measured faster). Since
 *   wp^T (ps[j] - pd[i]) = wp^T ps[j] - wp^T pd[i],
 * the per-edge geometry term becomes per-node terms folded into U and V in place,
 *   U[j, k] += sum_d wp[d, k] ps[j, d]   (j < nk),   V[i, k] -= sum_d wp[d, k] pd[i, d]   (i < nq),
 * and the edge launchers above then run with dim 0. (The pre-activation's rounding error grows
 * with |pos| instead of |ps - pd|: about eps |pos| |wp| absolute.) All f32, dim 1..3, hid 4..128
 * dividing 256, U and V 16-byte aligned; nq 0 folds U alone (V and pd may be NULL), nk 0 V alone. */
tg_status cuda_edge_fold(tgc_stream s, int64_t nk, int64_t nq, int dim, int hid, float *U, float *V, const float *ps,
                         const float *pd, const float *wp);
/* Bytes of scratch cuda_edge_unfold needs for gwp (f64 partials). */
size_t cuda_edge_unfold_workspace(int dim, int hid);
/* The fold's backward from dU, dV (the gradients of the folded U, V; either may be NULL: zero;
 * hid 16, the size ops/edge_attention.c folds; dU, dV 16-byte aligned):
 *   gps[j, d] += sum_k wp[d, k] dU[j, k],   gpd[i, d] -= sum_k wp[d, k] dV[i, k],
 *   gwp[d, k] += sum_j ps[j, d] dU[j, k] - sum_i pd[i, d] dV[i, k]   (f64 partials, fixed order)
 * gps, gpd, gwp NULL = not wanted; gps == gpd is allowed (one position value on both sides). */
tg_status cuda_edge_unfold(tgc_stream s, int64_t nk, int64_t nq, int dim, int hid, const float *dU, const float *dV,
                           const float *ps, const float *pd, const float *wp, float *gps, float *gpd, float *gwp,
                           void *ws, size_t ws_bytes);

/* The per-node products of the self-attention path (f32; ops/edge_attention.c): with one feature
 * matrix x [n, Fx] (Fx 1..8) and one position matrix p [n, dim] (dim 1..3) on both sides, hidden
 * width hid (16 or 64) and the w1 blocks wp [dim, hid], ws [Fx, hid] (x_src's rows), wd [Fx, hid]
 * (x_dst's rows),
 *   U[a, k] = sum_f x[m, f] ws[f, k] + sum_d p[m, d] wp[d, k]
 *   V[a, k] = sum_f x[m, f] wd[f, k] - sum_d p[m, d] wp[d, k]      (the geometry folded in)
 * with m = perm[a] (a new numbering: perm [n] maps new to old indices) or m = a (perm NULL). U, V
 * [n, hid], 16-byte aligned. u_only: U alone (recomputing U after a sweep wrote dU over it).
 * Xr [n, Fx] (NULL: not wanted): x's rows in the same order, Xr[a, :] = x[m, :] (the values, when
 * they are x's own rows, for the kernels on a renumbered graph: no separate pass over them). */
tg_status cuda_edge_products(tgc_stream s, int64_t n, int dim, int Fx, int hid, const int32_t *perm, const float *x,
                             const float *p, const float *wp, const float *ws, const float *wd, float *U, float *V,
                             float *Xr, int u_only);
/* Bytes of scratch cuda_edge_products_backward needs (f64 partials of the weight gradients). */
size_t cuda_edge_products_workspace(int dim, int Fx, int hid);
/* Its backward, accumulating (NULL = not wanted; dU or dV NULL = zero), m as above:
 *   gx[m, f] += sum_k ws[f, k] dU[a, k] + wd[f, k] dV[a, k] + dXr[a, f]   (dXr: Xr's gradient, or NULL)
 *   gp[m, d] += sum_k wp[d, k] (dU[a, k] - dV[a, k])
 *   gws[f, k] += sum_a x[m, f] dU[a, k],  gwd[f, k] += sum_a x[m, f] dV[a, k],
 *   gwp[d, k] += sum_a p[m, d] (dU[a, k] - dV[a, k])
 * (the weight sums: f32 over a thread's nodes, every S-th with S = 512 * 128 / (hid / 4), then f64
 * partials in a fixed order). gx and gp distinct buffers, perm a permutation; dU, dV 16-byte aligned.
 * Deterministic. */
tg_status cuda_edge_products_backward(tgc_stream s, int64_t n, int dim, int Fx, int hid, const int32_t *perm,
                                      const float *x, const float *p, const float *wp, const float *ws, const float *wd,
                                      const float *dU, const float *dV, const float *dXr, float *gx, float *gp,
                                      float *gwp, float *gws, float *gwd, void *work, size_t work_bytes);
/* Rows renumbered (f32, cols floats a row): back 0: dst[a, :] = src[perm[a], :]; back 1 (the
 * gradient): dst[perm[a], :] += src[a, :]. perm [n] a permutation of [0, n). */
tg_status cuda_rows_permute(tgc_stream s, int64_t n, int64_t cols, const int32_t *perm, const float *src, float *dst,
                            int back);

#ifdef __cplusplus
}
#endif
#endif
