/* CUDA launchers of the graph ops over a relation's device CSR (cuda/relation.h). Storage dtypes
 * f32, f16, bf16 (one dtype per call for every tensor but lse / workspaces, which are f32); all
 * arithmetic and accumulation in f32.
 *
 * Notation. E = csr->nnz edges (j -> i) in the CSR's order; i in [0, Nq) is the destination (row),
 * j = col_idx[e] in [0, Nk) the source, row(e) the i with row_ptr[i] <= e < row_ptr[i + 1],
 * deg(i) = row_ptr[i + 1] - row_ptr[i]. Per-edge tensors are [E, ...] in edge order, node tensors
 * [N, ...]; W = the product of the trailing dims (W >= 1), element (n, c) at n * W + c.
 * Multi-head tensors: scores [E, H] at e * H + h; values [Nk, H, F] at (j * H + h) * F + f;
 * out [Nq, H, F]; e_dst [Nq, H], e_src [Nk, H]; lse [H, Nq] f32 at h * Nq + i.
 *
 *   gather   SOURCE: out[e] = x[j(e)]             DEST: out[e] = x[row(e)]
 *   reduce   out[i] = SUM / MEAN / MAX over e in row i of vals[e], per column; empty row -> 0
 *   softmax  p[e, h] = exp(s[e, h] - lse[h, i]),  lse[h, i] = log sum_{e in row i} exp(s[e, h])
 *   attend   out[i, h] = sum_{e in row i} p[e, h] w[e, h] values[j(e), h]   (p as in softmax)
 *   gat      attend with s[e, h] = LeakyReLU(e_dst[i, h] + e_src[j, h]; slope)
 * Attention dropout (keep in (0, 1)): w = m / keep with m tiga's attention-dropout mask bit of
 * (b = 0, head h, row i, key j) for a relation of Nq x Nk (include/tiga.h, host/philox.h):
 * R = h * Nq + i, kept iff word tg_attn_drop_word(R, j) of tg_philox4x32(seed,
 * tg_attn_drop_block(R, j, Nk), call | 2^63) < tg_keep_threshold(keep). keep 0 or 1: w = 1.
 * The softmax denominator counts every edge, dropped or not.
 *
 * Backward (every gradient buffer ACCUMULATES: g += ...; a NULL gradient pointer is not wanted):
 *   gather   SOURCE: dx[j] += sum over j's transposed entries of dout[e]; DEST: dx[i] += sum_row dout[e]
 *   reduce   SUM: dvals[e] += dout[i]; MEAN: dvals[e] += dout[i] / deg(i); MAX: per column c only
 *            the first edge of the row (lowest e) whose value equals the max gets dout[i, c]
 *   softmax  ds[e] += p[e] (dp[e] - sum_{e' in row} p[e'] dp[e'])
 *   attend   D[i, h] = <dout[i, h], out[i, h]>, dp[e, h] = w <dout[i, h], values[j, h]>,
 *            ds[e, h] = p (dp - D): dscores += ds; dvalues[j] += sum over j's entries p w dout[i]
 *   gat      ds'[e, h] = ds[e, h] * leaky'(e_dst[i, h] + e_src[j, h]), leaky'(x) = 1 for x > 0
 *            else slope (x = 0 takes the slope): de_dst[i] += sum_row ds', de_src[j] += sum over
 *            j's entries ds', dvalues as in attend. p is recomputed from lse; nothing of size E is
 *            stored (the masks are regenerated).
 *
 * Determinism: no float atomics. Each output element is summed by one thread group in a fixed
 * order (edges of a row ascending; a source's entries in transpose order), so results are bit
 * identical run to run. Per-source sums (gather SOURCE / attend / gat backward) need the
 * transpose (csr->t_ptr != NULL, cuda_relation_transpose), else TG_ERR_INVALID_ARGUMENT.
 * Rows (or sources) with more than a few hundred edges are walked by a whole thread block, split
 * into contiguous pieces combined in piece order. Attention launches too small to fill the GPU
 * (fewer than ~2^18 threads, e.g. Cora) give each (row, head) up to 8 lane groups that walk
 * contiguous pieces of its edges, merged in piece order; the choice depends only on the sizes, so
 * a given problem always gives the same bits.
 *
 * Special values. reduce MAX: a NaN in a column makes that column's max NaN and the first NaN
 * edge takes the gradient; -0.0 and +0.0 tie (the first edge wins). softmax / attend / gat: a row
 * whose scores are all -inf behaves as an empty row (p = 0, out = 0, lse = -inf); NaN scores
 * propagate into the row's outputs.
 *
 * Limits: attend / gat take F <= 256, or F <= 32 * (16 / element size) when F is a multiple of
 * 16 / element size; larger F is TG_ERR_UNSUPPORTED. Pointers must be device memory; vector
 * (16-byte) accesses are used when every tensor of the call is 16-byte aligned. */
#ifndef TIGA_CUDA_GRAPH_H
#define TIGA_CUDA_GRAPH_H
#include "launch.h"
#include "relation.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tgc_graph_side { TGC_GRAPH_SOURCE = 0, TGC_GRAPH_DEST = 1 } tgc_graph_side;
typedef enum tgc_graph_reduce { TGC_GRAPH_SUM = 0, TGC_GRAPH_MEAN = 1, TGC_GRAPH_MAX = 2 } tgc_graph_reduce;

/* x [N_side, W] -> out [E, W] (N_side = Nk for SOURCE, Nq for DEST). */
tg_status cuda_graph_gather_forward(tgc_stream s, const tgc_csr *g, tgc_graph_side side, tg_dtype dt, int64_t W,
                                    const void *x, void *out);
/* dx [N_side, W] += the per-node sums of dout [E, W]. SOURCE needs the transpose. */
tg_status cuda_graph_gather_backward(tgc_stream s, const tgc_csr *g, tgc_graph_side side, tg_dtype dt, int64_t W,
                                     const void *dout, void *dx);

/* vals [E, W] -> out [Nq, W]. */
tg_status cuda_graph_reduce_forward(tgc_stream s, const tgc_csr *g, tgc_graph_reduce kind, tg_dtype dt, int64_t W,
                                    const void *vals, void *out);
/* dvals [E, W] += ...; vals is read only for MAX (may be NULL otherwise). */
tg_status cuda_graph_reduce_backward(tgc_stream s, const tgc_csr *g, tgc_graph_reduce kind, tg_dtype dt, int64_t W,
                                     const void *vals, const void *dout, void *dvals);

/* scores [E, H] -> p [E, H], lse [H, Nq] (f32, required: p is written from it). */
tg_status cuda_graph_softmax_forward(tgc_stream s, const tgc_csr *g, tg_dtype dt, int64_t H, const void *scores,
                                     void *p, float *lse);
/* f32 scratch of Nq * H (the per-row sums <p, dp>). */
size_t cuda_graph_softmax_backward_workspace(const tgc_csr *g, int64_t H);
tg_status cuda_graph_softmax_backward(tgc_stream s, const tgc_csr *g, tg_dtype dt, int64_t H, const void *p,
                                      const void *dp, void *dscores, void *workspace, size_t workspace_bytes);

/* Parameters of the attention reducers. */
typedef struct tgc_graph_attn {
  int64_t H, F;   /* heads, features per head of values / out */
  tg_dtype dtype; /* storage dtype of every tensor but lse */
  float slope;    /* gat: LeakyReLU negative slope (0.2 usual); attend ignores it */
  double keep;    /* attention dropout keep probability: 0 or 1 none, (0, 1) dropout */
  uint64_t seed;  /* dropout key (the tape seed) */
  uint64_t call;  /* dropout subsequence (the tape's call counter); bit 63 is set by the rule */
} tgc_graph_attn;

/* scores [E, H], values [Nk, H, F] -> out [Nq, H, F], lse [H, Nq] f32. Single pass online
 * softmax per (row, head); nothing of size E is written. */
tg_status cuda_graph_attend_forward(tgc_stream s, const tgc_csr *g, const tgc_graph_attn *a, const void *scores,
                                    const void *values, void *out, float *lse);
/* Accumulates dscores [E, H] and dvalues [Nk, H, F] (either may be NULL; dvalues needs the
 * transpose). out and lse are the forward's. No workspace. */
tg_status cuda_graph_attend_backward(tgc_stream s, const tgc_csr *g, const tgc_graph_attn *a, const void *scores,
                                     const void *values, const void *out, const void *dout, const float *lse,
                                     void *dscores, void *dvalues);

/* e_dst [Nq, H], e_src [Nk, H], values [Nk, H, F] -> out [Nq, H, F], lse [H, Nq] f32. */
tg_status cuda_graph_gat_forward(tgc_stream s, const tgc_csr *g, const tgc_graph_attn *a, const void *e_dst,
                                 const void *e_src, const void *values, void *out, float *lse);
/* f32 scratch of Nq * H (D = <dout, out> per row and head). */
size_t cuda_graph_gat_backward_workspace(const tgc_csr *g, const tgc_graph_attn *a);
/* Accumulates de_dst [Nq, H], de_src [Nk, H], dvalues [Nk, H, F] (any may be NULL; de_src and
 * dvalues need the transpose). Two passes: destination side (D, de_dst), source side (de_src,
 * dvalues). */
tg_status cuda_graph_gat_backward(tgc_stream s, const tgc_csr *g, const tgc_graph_attn *a, const void *e_dst,
                                  const void *e_src, const void *values, const void *out, const void *dout,
                                  const float *lse, void *de_dst, void *de_src, void *dvalues, void *workspace,
                                  size_t workspace_bytes);

/* mask [E, H] (u8) = the dropout mask bit m[e, h] the attention kernels use for a->keep,
 * a->seed, a->call (1 everywhere without dropout). For tests and provider comparisons. */
tg_status cuda_graph_attn_dropout_mask(tgc_stream s, const tgc_csr *g, const tgc_graph_attn *a, uint8_t *mask);

#ifdef __cplusplus
}
#endif
#endif
