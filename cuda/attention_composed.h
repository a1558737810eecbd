/* CUDA_COMPOSED attention: cuBLAS strided-batched GEMMs around a masked softmax. Materializes
 * the scores: S = scale Q Kᵀ and P = softmax(S) are [B, Hq, Nq, Nk] f32; P is what backward
 * keeps.
 *   forward:  S = scale Q Kᵀ;  P_ij = exp(S_ij - lse_i) on allowed pairs, 0 elsewhere;  O = P V
 *   backward: dP = dO Vᵀ;  Di = rowsum(dO ⊙ O);  dS = P ⊙ (dP - Di);
 *             dQ += scale dS K;  dK += scale dSᵀ Q;  dV += Pᵀ dO
 * With dropout (W = M / keep, M regenerated from the counter, never stored): P stays the saved
 * undropped softmax; O = (P ⊙ W) V;  dV += (P ⊙ W)ᵀ dO;  dP = (dO Vᵀ) ⊙ W;  Di and dS as above
 * (rowsum(P ⊙ dP) = rowsum(dO ⊙ O) still holds).
 * Layouts as cuda/attention_fused.h: q [B,Nq,Hq,D], k [B,Nk,Hkv,D], v [B,Nk,Hkv,Dv], out / dout
 * [B,Nq,Hq,Dv], lse [B,Hq,Nq] f32. Query head h reads key/value head h / (Hq / Hkv). Each GEMM
 * runs once per query head, batched over B (leading dimension H*D, per-head pointer offset), so
 * the GQA sums into dK, dV are sequential accumulations (no races). GEMMs take the storage dtype
 * (f32, f16, bf16) with f32 compute; the softmax is f32. */
#ifndef TIGA_CUDA_ATTENTION_COMPOSED_H
#define TIGA_CUDA_ATTENTION_COMPOSED_H
#include "attention_fused.h"
#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tgc_comp_shape {
  int64_t B, Nq, Nk;
  int Hq, Hkv, D, Dv;
  tg_dtype dtype; /* F32, F16 or BF16 */
  float scale;
  /* which pairs are allowed: DENSE, CAUSAL (j <= i + Nk - Nq), MASK (u8 [mask_batch or 1, Nq,
   * Nk] on the device; mask_batch <= 1 shared), VARLEN (B == 1; device offsets, bottom-right
   * causal inside a sequence when varlen_causal) */
  tgc_attn_kind kind;
  const uint8_t *mask;
  int64_t mask_batch;
  const int32_t *cu_q, *cu_k;
  int n_seqs, varlen_causal;
  /* attention dropout (tiga.h): keep in (0, 1) drops, anything else (0) does not. The mask bit
   * of P element e = ((b*Hq + h)*Nq + i)*Nk + j comes from Philox(seed, e, call | 2^63). */
  double keep;
  unsigned long long seed, call;
} tgc_comp_shape;

/* Scratch in bytes: lo = B*Hq*Nq*Nk elements of dtype for f16/bf16, or for any dtype with
 * dropout (it holds P ⊙ W); 0 for f32 without dropout. */
size_t cuda_attention_composed_lo_bytes(const tgc_comp_shape *sh);

/* P (f32 [B,Hq,Nq,Nk], kept for backward), out (dtype), lse (may be NULL). lo: scratch of
 * cuda_attention_composed_lo_bytes (may be NULL when that is 0). */
tg_status cuda_attention_composed_forward(tgc_stream s, tgc_cublas h, const tgc_comp_shape *sh, const void *q,
                                          const void *k, const void *v, void *out, float *lse, float *P, void *lo);

/* Accumulates dq, dk, dv (+=; each may be NULL). dS: f32 scratch of B*Hq*Nq*Nk; lo as above. */
tg_status cuda_attention_composed_backward(tgc_stream s, tgc_cublas h, const tgc_comp_shape *sh, const void *q,
                                           const void *k, const void *v, const void *out, const void *dout,
                                           const float *P, float *dS, void *lo, void *dq, void *dk, void *dv);

/* dst += src, n elements of dtype (f32, f16, bf16): gradients computed into scratch. */
tg_status cuda_attention_add(tgc_stream s, tg_dtype dt, void *dst, const void *src, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
