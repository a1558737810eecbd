/* CUDA_FUSED attention over a CSR relation (a graph): online-softmax forward that saves only the
 * log-sum-exp, and a backward that recomputes the scores, with dk / dv summed per key through the
 * relation's transpose (cuda/relation.h). Deterministic: no float atomics; every sum runs in an
 * order fixed by the relation and the shape.
 *
 * Layouts (contiguous, row-major): q [B, Nq, Hq, D], k [B, Nk, Hkv, D], v [B, Nk, Hkv, Dv],
 * out / dout [B, Nq, Hq, Dv] (all in dtype), lse [B, Hq, Nq] f32; dq, dk, dv like q, k, v.
 * One CSR (csr->nq == Nq, csr->nk == Nk) is shared by every batch entry b. For query i the keys
 * are j = col_idx[e], row_ptr[i] <= e < row_ptr[i + 1]; head h reads kv head g = h / (Hq / Hkv):
 *   s_ij = scale <q[b,i,h], k[b,j,g]>,  lse_i = log sum_j exp(s_ij),
 *   out_i = sum_j exp(s_ij - lse_i) w_ij v[b,j,g]
 * with w_ij = 1, or with attention dropout (drop_keep in (0, 1)) w_ij = m_ij / keep, m_ij the mask
 * bit of tiga.h's rule (R = (b*Hq + h)*Nq + i, key j; host/philox.h), bit-identical with
 * host_attn_kept (host/attention.h). A row with no edge: out 0, lse -inf, zero gradient.
 * Backward (nothing saved but lse): Delta_i = <dout_i, out_i>, p_ij = exp(s_ij - lse_i),
 *   dp_ij = w_ij <dout_i, v_j>, ds_ij = p_ij (dp_ij - Delta_i);
 *   dq_i += scale sum_j ds_ij k_j            (walking row i of the CSR)
 *   dk_j += scale sum_i ds_ij q_i, dv_j += sum_i p_ij w_ij dout_i   (walking source j of the
 *   transpose; for GQA, over every query head of kv head g's group).
 * Storage dtypes F32, F16, BF16; math in f32. Limits: D, Dv in 1..256 (forward); backward
 * D, Dv <= 128 for F32 and <= 256 for F16 / BF16.
 * Long rows (and, in the backward, long sources) are split into chunks that run on different
 * warps; their partial results go to the workspace and are merged in chunk order.
 * Schedules (row_order, src_order): optional device int32 permutations of [0, Nq) / [0, Nk), NULL
 * for the identity. Warps that run at the same time take consecutive entries of the schedule, so a
 * schedule that puts nearby nodes next to each other (a Morton or BFS order) makes their gathers of
 * k / v (rows) and q / dout (sources) hit L2. Which warp handles a row changes, nothing else: the
 * results are bit-identical with and without a schedule. An entry outside [0, N) is skipped (its
 * row is then not computed); a schedule that is not a permutation gives wrong results. */
#ifndef TIGA_CUDA_ATTENTION_CSR_H
#define TIGA_CUDA_ATTENTION_CSR_H
#include "launch.h"
#include "relation.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tgc_csr_attn_shape {
  int64_t B, Nq, Nk;
  int Hq, Hkv, D, Dv;
  tg_dtype dtype;                          /* F32, F16 or BF16: q, k, v, out, dout, dq, dk, dv */
  float scale;                             /* finite */
  double drop_keep;                        /* attention dropout keep probability in (0, 1); 0 or 1: none */
  unsigned long long drop_seed, drop_call; /* the tape seed and RNG call counter (tiga.h) */
} tgc_csr_attn_shape;

/* TG_OK when the forward kernels take this shape, else TG_ERR_UNSUPPORTED (TG_ERR_INVALID_ARGUMENT
 * for a NULL shape) with tgc_error() saying why. Host-side check, no device work. */
tg_status cuda_attention_csr_supported(const tgc_csr_attn_shape *sh);
/* The same for the backward (smaller head-dim limits, see above). */
tg_status cuda_attention_csr_backward_supported(const tgc_csr_attn_shape *sh);

/* Workspace bytes of a forward / backward call (device memory, contents need no initialisation;
 * may be 0). Depends only on the shape and csr's sizes (nq, nk, nnz), never on device data. Holds
 * per-row state (backward: 8 bytes per query row and head), the split schedules, and the partial
 * results of split rows: at most about 1.5x an f32 copy of out (forward) or of q, k and v
 * (backward), and at most 2^19 * (Dv + 2) bytes (forward) or 2^19 * (D + Dv) bytes per pass
 * (backward) whatever the sizes: never O(nnz * H * D). */
size_t cuda_attention_csr_forward_workspace(const tgc_csr_attn_shape *sh, const tgc_csr *csr);
size_t cuda_attention_csr_backward_workspace(const tgc_csr_attn_shape *sh, const tgc_csr *csr);

/* Forward: writes out and lse. row_order: NULL or a schedule of the rows (above). ws: ws_bytes >=
 * cuda_attention_csr_forward_workspace bytes. */
tg_status cuda_attention_csr_forward(tgc_stream s, const tgc_csr_attn_shape *sh, const tgc_csr *csr,
                                     const int32_t *row_order, const void *q, const void *k, const void *v, void *out,
                                     float *lse, void *ws, size_t ws_bytes);

/* Backward: dq, dk, dv (three distinct buffers, none aliasing an input) are ACCUMULATED into (+=).
 * out and lse are the forward's (same shape, same dropout stream). Needs csr's transpose
 * (t_ptr, t_row) when nnz > 0. row_order / src_order: NULL or schedules of the rows (dq pass) and
 * of the sources (dk / dv pass). ws: ws_bytes >= cuda_attention_csr_backward_workspace bytes. */
tg_status cuda_attention_csr_backward(tgc_stream s, const tgc_csr_attn_shape *sh, const tgc_csr *csr,
                                      const int32_t *row_order, const int32_t *src_order, const void *q, const void *k,
                                      const void *v, const void *out, const void *dout, const float *lse, void *dq,
                                      void *dk, void *dv, void *ws, size_t ws_bytes);

/* Schedules (cuda/attention_csr_order.cu). A graph's locality order on the host: breadth-first
 * sweeps (the first finds a far node, the second orders the nodes by their distance from it, per
 * connected piece: Cuthill-McKee without the degree sort, for cache locality, not bandwidth); with
 * leaf > 0, every segment of the order longer than leaf is then cut in half and each half ordered
 * the same way within itself (a k-d tree of the graph; O((nodes + edges) log(nodes / leaf))), with
 * leaf 0 not (O(nodes + edges)). Square (nq == nk): rows and sources are one node set, neighbours
 * are both edge directions, and order[0, nq) serves as both schedules. Else rows and sources are
 * the two sides of a bipartite graph: order[0, nq) is the row schedule and order[nq, nq + nk) the
 * source schedule. row_ptr / col_idx: a valid host CSR (tgc_csr's layout). TG_ERR_OUT_OF_MEMORY
 * when scratch cannot be had, TG_ERR_INVALID_ARGUMENT for a size out of range; order is then
 * untouched. */
tg_status cuda_attention_csr_order_host(int64_t nq, int64_t nk, const int64_t *row_ptr, const int32_t *col_idx,
                                        int64_t leaf, int32_t *order);
/* order[r] = (int32) perm[r] for r < n, on stream s (device arrays): a spatial sort's int64
 * permutation (tg_radius_options' perm_out) as a schedule. */
tg_status cuda_attention_csr_order_from_perm(tgc_stream s, const int64_t *perm, int64_t n, int32_t *order);

/* Tests and benchmarks only (the library never calls it): chunk length of the long-row split; a row
 * (source) with more entries than that is split. 0, the default: chosen from the shape (at least
 * 256). A small value (e.g. 3) makes every path run on small graphs. Process-wide; takes effect for
 * workspace sizes and launches made after it. */
#ifdef TIGA_BENCH_SWITCHES
void cuda_attention_csr_set_chunk(int64_t chunk);
#endif

#ifdef __cplusplus
}
#endif
#endif
