/* CUDA_FUSED attention: tiled online softmax (FlashAttention-2 style) forward that saves only
 * the per-row log-sum-exp, and a backward that recomputes scores tile by tile. No Nq x Nk
 * buffer exists in either direction.
 *
 * Layouts (contiguous, row-major): q [B, Nq, Hq, D], k [B, Nk, Hkv, D], v [B, Nk, Hkv, Dv],
 * out / dout [B, Nq, Hq, Dv], lse (f32) [B, Hq, Nq]; dq, dk, dv like q, k, v.
 * Math: s_ij = scale <q_i, k_j> over allowed pairs; lse_i = log sum_j exp(s_ij); out_i =
 * sum_j exp(s_ij - lse_i) v_j. A row with no allowed key: out 0, lse -inf, gradient 0.
 * Query head h reads key/value head h / (Hq / Hkv). */
#ifndef TIGA_CUDA_ATTENTION_FUSED_H
#define TIGA_CUDA_ATTENTION_FUSED_H
#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TGC_ATTN_DENSE = 0, TGC_ATTN_CAUSAL = 1, TGC_ATTN_MASK = 2, TGC_ATTN_VARLEN = 3 } tgc_attn_kind;

typedef struct tgc_attn_shape {
  int64_t B, Nq, Nk;
  int Hq, Hkv, D, Dv;
  tg_dtype dtype; /* F16, BF16 or F32 for q, k, v, out, dout, dq, dk, dv */
  float scale;
  tgc_attn_kind kind;
  /* CAUSAL: key j allowed for query i when j <= i + Nk - Nq (bottom-right). */
  /* MASK: output of cuda_attention_fused_mask_prepare; mask_batch 1 (shared) or B */
  const void *mask_prep;
  int64_t mask_batch;
  /* MASK, a hint (results do not depend on it): 1 when the mask's 64 x 64 cells are all empty or
   * all non-empty inside each aligned 128 x 128 block (tg_relation_mask records it: ops/relation.h); the
   * kernels may then use 128-row / 128-key tiles. 0: 64 x 64 tiles, every empty cell skipped. */
  int mask_coarse;
  /* VARLEN (B == 1; Nq, Nk are the packed totals): device arrays of n_seqs + 1 offsets, the
   * longest sequence lengths, and whether each sequence is causal (bottom-right inside it). */
  const int32_t *cu_q, *cu_k;
  int n_seqs, max_q, max_k, varlen_causal;
  /* 0: exact. In (0, 1]: tile pruning (forward, DENSE/CAUSAL only): a key tile whose max score
   * is below the query block's running max + ln(prune_rho) skips its V load and accumulation. */
  float prune_rho;
  /* Attention dropout (tiga.h): keep in (0, 1) drops, anything else (0) does not. Mask bit of
   * (b, h, i, j) from Philox(seed, ((b*Hq + h)*Nq + i)*Nk + j, call | 2^63), i and j global
   * (packed for varlen). Not combined with prune_rho. */
  double drop_keep;
  unsigned long long drop_seed, drop_call;
} tgc_attn_shape;

/* TG_OK when the fused kernels handle this shape (dtype, D, Dv, kind), else TG_ERR_UNSUPPORTED
 * with tgc_error() saying what is not supported. Host-side check, no device work. */
tg_status cuda_attention_fused_supported(const tgc_attn_shape *sh);

/* Boolean mask [mask_batch, Nq, Nk] (u8 on the device, nonzero = allowed) -> packed bitmask plus
 * a per-tile summary (empty / full / partial) in the kernels' tile sizes. */
size_t cuda_attention_fused_mask_bytes(int64_t mask_batch, int64_t Nq, int64_t Nk);
tg_status cuda_attention_fused_mask_prepare(tgc_stream s, const uint8_t *mask, int64_t mask_batch, int64_t Nq,
                                            int64_t Nk, void *prep);

/* Forward. tile_counters (device, may be NULL): [0] += key tiles visited, [1] += tiles pruned. */
tg_status cuda_attention_fused_forward(tgc_stream s, const tgc_attn_shape *sh, const void *q, const void *k,
                                       const void *v, void *out, float *lse, unsigned long long *tile_counters);

/* Backward: dq, dk, dv are ACCUMULATED into (+=). workspace: device memory of
 * cuda_attention_fused_backward_workspace(sh) bytes (may be 0). */
size_t cuda_attention_fused_backward_workspace(const tgc_attn_shape *sh);
tg_status cuda_attention_fused_backward(tgc_stream s, const tgc_attn_shape *sh, const void *q, const void *k,
                                        const void *v, const void *out, const void *dout, const float *lse, void *dq,
                                        void *dk, void *dv, void *workspace);

#ifdef TIGA_BENCH_SWITCHES
/* Kernel family: a sweep switch compiled only into bench_attention (-DTIGA_BENCH_SWITCHES on every
 * attention file it compiles); libtiga neither calls nor exports it. 1, the default: the sm_90a
 * wgmma kernels (attention_sm90.cu) where they apply (compute capability 9.0 device, F16 / BF16,
 * D == Dv in {64, 128}, no dropout, no pruning), the mma.sync kernels elsewhere. 0: always the
 * mma.sync / CUDA-core kernels. 2..8: alternative wgmma tile shapes and mask walks (sweeps,
 * bench/NOTES.md).
 * Process-wide; not synchronised with launches in flight on other threads. */
void cuda_attention_fused_set_family(int family);
#endif

#ifdef __cplusplus
}
#endif
#endif
