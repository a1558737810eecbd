// Internal to the fused attention kernels (attention_fused*.cu): the launch parameters, the
// per-CTA problem (batch or varlen sequence), the tile classifier shared by every kernel, and
// the PTX wrappers (cp.async, ldmatrix, mma.sync m16n8k16). C++ only.
#pragma once
#include <cstdint>

#include "attention_fused.h"
#include "common.cuh"
#include "../host/philox.h"

// Mask summaries are kept on a 64 x 64 grid (rows = queries, cols = keys). Every kernel's tile
// is a multiple or an aligned divisor of 64, so a tile's class is the join of the summary
// cells it covers: all empty -> skipped, all full -> no per-element mask reads.
#define FA_MASK_GRAIN 64
#define FA_LOG2E 1.4426950408889634f
#define FA_LN2 0.6931471805599453f
enum { FA_EMPTY = 0, FA_FULL = 1, FA_PARTIAL = 2 };

struct FaParams {
  const void *q, *k, *v, *o, *dout;
  void *out, *dq, *dk, *dv;
  float *lse;            // forward: written; backward: read
  float *dq_acc, *delta; // backward workspace
  int dq_swizzled;       // dq_acc in the sm_90a layout (attention_sm90.cu), not [B, Nq, Hq, D]
  tg_dtype dtype;
  int64_t B, Nq, Nk;
  int Hq, Hkv, D, Dv, group;
  int nz, max_q, max_k;    // CTAs' z extent (B or n_seqs) and the longest query / key range
  float scale, scale_log2; // scale and scale * log2(e)
  int causal;              // CAUSAL kind, or VARLEN with varlen_causal
  // MASK
  const uint64_t *mbits; // [mask_batch, Nq, mw] bit j of row i: key j allowed
  const uint8_t *msum;   // [mask_batch, mtq, mtk] FA_EMPTY / FA_FULL / FA_PARTIAL
  int mask_batch, mask_coarse;
  int64_t mw, mtq, mtk;
  // VARLEN
  const int32_t *cu_q, *cu_k;
  int varlen;
  // pruning (forward, DENSE / CAUSAL)
  int prune;
  float log2_rho;
  unsigned long long *counters;
};

// One CTA's problem: rows [qoff, qoff + Lq) of the flattened [B * Nq] query rows, keys
// [koff, koff + Lk); causal keeps j <= i + off (local indices, off = Lk - Lq).
struct FaSeq {
  int64_t qoff, koff, lse_base; // lse index of local row i: lse_base + i (before adding head)
  int Lq, Lk, off, b;
};

__device__ __forceinline__ bool fa_seq(const FaParams &p, int z, FaSeq &s) {
  if (p.varlen) {
    int q0 = p.cu_q[z], q1 = p.cu_q[z + 1], k0 = p.cu_k[z], k1 = p.cu_k[z + 1];
    s.qoff = q0;
    s.koff = k0;
    s.Lq = q1 - q0;
    s.Lk = k1 - k0;
    s.b = 0;
    s.lse_base = q0;
  } else {
    s.qoff = (int64_t)z * p.Nq;
    s.koff = (int64_t)z * p.Nk;
    s.Lq = (int)p.Nq;
    s.Lk = (int)p.Nk;
    s.b = z;
    s.lse_base = 0;
  }
  s.off = s.Lk - s.Lq;
  return s.Lq > 0;
}

// lse / delta index of (head h, local row i): [B, Hq, Nq] with B == 1 and packed rows for varlen.
__device__ __forceinline__ int64_t fa_lse_index(const FaParams &p, const FaSeq &s, int h, int i) {
  return ((int64_t)s.b * p.Hq + h) * p.Nq + s.lse_base + i;
}

// Class of the tile rows [i0, i0 + bm) x keys [j0, j0 + bn) (local indices), clipped to Lq.
__device__ __forceinline__ int fa_tile_class(const FaParams &p, const FaSeq &s, int i0, int bm, int j0, int bn) {
  int ilast = min(i0 + bm, s.Lq) - 1, jlast = j0 + bn - 1;
  if (j0 >= s.Lk) return FA_EMPTY;
  if (p.causal && j0 > ilast + s.off) return FA_EMPTY;
  bool full = jlast < s.Lk && (!p.causal || jlast <= i0 + s.off);
  if (p.mbits) {
    const uint8_t *sum = p.msum + (int64_t)(p.mask_batch == 1 ? 0 : s.b) * p.mtq * p.mtk;
    int jl = min(jlast, s.Lk - 1);
    bool any = false, all = true;
    for (int tq = i0 / FA_MASK_GRAIN; tq <= ilast / FA_MASK_GRAIN; ++tq)
      for (int tk = j0 / FA_MASK_GRAIN; tk <= jl / FA_MASK_GRAIN; ++tk) {
        uint8_t c = sum[(int64_t)tq * p.mtk + tk];
        any |= c != FA_EMPTY;
        all &= c == FA_FULL;
      }
    if (!any) return FA_EMPTY;
    full &= all;
  }
  return full ? FA_FULL : FA_PARTIAL;
}

// Attention dropout state: a second kernel argument of the dropout instantiations only, so the
// others keep their exact signature and code. Weight of a kept pair: inv_keep; dropped: 0.
struct FaDrop {
  double keep;
  float inv_keep;
  uint32_t thr; // tg_keep_threshold(keep) (< 2^32 since keep < 1)
  uint64_t seed, call;
};

// Dropout weight of (head h, local query row i, local key j) (host/philox.h): word
// tg_attn_drop_word(R, jg) of Philox block tg_attn_drop_block(R, jg, Nk), R the flat row
// (fa_lse_index) and jg the global (packed, for varlen) key, as the host computes it.
__device__ __forceinline__ float fa_drop_w(const FaDrop &d, const FaParams &p, const FaSeq &s, int h, int i, int j) {
  const uint64_t R = (uint64_t)fa_lse_index(p, s, h, i), jg = (uint64_t)((p.varlen ? s.koff : 0) + j);
  uint32_t w[4];
  tg_philox4x32(d.seed, tg_attn_drop_block(R, jg, (uint64_t)p.Nk), d.call | (1ull << 63), w);
  return w[tg_attn_drop_word(R, jg)] < d.thr ? d.inv_keep : 0.f;
}

// The weights of (i, j) and (i + di, j + dj), di + dj == 1: a row pair (backward) or a key pair
// (forward). When both fall in one 2x2 patch (the pair starts on an even flat row / even global
// key: uniform across a CTA) one Philox block serves both; otherwise the second is drawn alone.
__device__ __forceinline__ float2 fa_drop_w2(const FaDrop &d, const FaParams &p, const FaSeq &s, int h, int i, int j,
                                             int di, int dj) {
  const uint64_t R = (uint64_t)fa_lse_index(p, s, h, i), jg = (uint64_t)((p.varlen ? s.koff : 0) + j);
  uint32_t w[4];
  tg_philox4x32(d.seed, tg_attn_drop_block(R, jg, (uint64_t)p.Nk), d.call | (1ull << 63), w);
  float2 r;
  r.x = w[tg_attn_drop_word(R, jg)] < d.thr ? d.inv_keep : 0.f;
  const uint64_t R1 = R + (uint64_t)di, j1 = jg + (uint64_t)dj;
  if ((R1 >> 1) == (R >> 1) && (j1 >> 1) == (jg >> 1))
    r.y = w[tg_attn_drop_word(R1, j1)] < d.thr ? d.inv_keep : 0.f;
  else
    r.y = fa_drop_w(d, p, s, h, i + di, j + dj);
  return r;
}

// Mask bits row of local query row i (MASK kind only; i < Lq).
__device__ __forceinline__ const uint64_t *fa_mask_row(const FaParams &p, const FaSeq &s, int i) {
  return p.mbits + ((int64_t)(p.mask_batch == 1 ? 0 : s.b) * p.Nq + i) * p.mw;
}

// ------------------------------------------------------------------ PTX wrappers
__device__ __forceinline__ uint32_t fa_smem(const void *ptr) { return (uint32_t)__cvta_generic_to_shared(ptr); }

// 16-byte async copy global -> shared; zero-fills when !valid (src is then not read).
__device__ __forceinline__ void fa_cp16(void *dst, const void *src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(fa_smem(dst)), "l"(src), "r"(valid ? 16 : 0));
}
// 4-byte async copy (lse / delta rows); zero-fills when !valid.
__device__ __forceinline__ void fa_cp4(void *dst, const void *src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(fa_smem(dst)), "l"(src), "r"(valid ? 4 : 0));
}
// 2^x in one MUFU op (flushes denormal results to 0; exp2(-inf) = 0). Tensor-core paths only.
__device__ __forceinline__ float fa_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ void fa_cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void fa_cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// rows [0, ROWS) of a [*, D] tile whose row r is at g + r * gstride -> shared (stride LDS);
// rows >= valid are zero-filled (so padded keys add 0 * 0, never garbage or NaN).
// FAST keeps one base address per thread (fewer instructions, more live registers).
template <int D, int LDS, int ROWS, int THREADS, typename T, bool FAST = true>
__device__ __forceinline__ void fa_load_tile(T *s, const T *g, int64_t gstride, int valid) {
  constexpr int CH = D / 8;
  if constexpr (FAST && THREADS % CH == 0 && ROWS % (THREADS / CH) == 0) {
    // fixed chunk column per thread: one base address, constant row steps
    constexpr int RPI = THREADS / CH;
    const int r0 = threadIdx.x / CH, cc = threadIdx.x % CH;
    T *sp = s + r0 * LDS + cc * 8;
    const T *gp = g + r0 * gstride + cc * 8;
#pragma unroll
    for (int it = 0; it < ROWS / RPI; ++it) {
      const bool ok = r0 + it * RPI < valid;
      fa_cp16(sp + it * RPI * LDS, ok ? gp + it * RPI * gstride : g, ok);
    }
  } else {
    constexpr int TOTAL = ROWS * CH;
#pragma unroll
    for (int it = 0; it < (TOTAL + THREADS - 1) / THREADS; ++it) {
      const int c = threadIdx.x + it * THREADS;
      if (TOTAL % THREADS == 0 || c < TOTAL) {
        const int r = c / CH, cc = c - r * CH;
        const bool ok = r < valid;
        fa_cp16(s + r * LDS + cc * 8, ok ? g + r * gstride + cc * 8 : g, ok);
      }
    }
  }
}

__device__ __forceinline__ void fa_ldm_x4(uint32_t (&r)[4], const void *ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(fa_smem(ptr)));
}
__device__ __forceinline__ void fa_ldm_x4_t(uint32_t (&r)[4], const void *ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(fa_smem(ptr)));
}

// c += a * b, m16n8k16, f32 accumulators.
template <typename T>
__device__ __forceinline__ void fa_mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void fa_mma<__half>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void fa_mma<__nv_bfloat16>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats -> packed pair of T (low half = first).
template <typename T> __device__ __forceinline__ uint32_t fa_pack(float a, float b);
template <> __device__ __forceinline__ uint32_t fa_pack<__half>(float a, float b) {
  __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<uint32_t *>(&h);
}
template <> __device__ __forceinline__ uint32_t fa_pack<__nv_bfloat16>(float a, float b) {
  __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<uint32_t *>(&h);
}
template <typename T> __device__ __forceinline__ float2 fa_unpack(uint32_t u);
template <> __device__ __forceinline__ float2 fa_unpack<__half>(uint32_t u) {
  return __half22float2(*reinterpret_cast<__half2 *>(&u));
}
template <> __device__ __forceinline__ float2 fa_unpack<__nv_bfloat16>(uint32_t u) {
  return __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 *>(&u));
}

// acc (S^T, rows = keys j0 + 8 hh, cols = queries) -> P^T in place; MASKED applies key bounds,
// query bounds, causality and mask bits (partial tiles only).
template <bool MASKED, int NQT>
__device__ __forceinline__ void fa_bwd_probs(float (&acc)[NQT][4], const float *ls, const FaParams &p, const FaSeq &s,
                                             int i0, int j0, int t, float sl2) {
#pragma unroll
  for (int nt = 0; nt < NQT; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int ql = nt * 8 + 2 * t + e, i = i0 + ql;
      const float lraw = ls[ql];
      const float lq = lraw == -INFINITY ? INFINITY : lraw * FA_LOG2E; // no keys: P = 2^(s - inf) = 0
      uint64_t bits = ~0ull;
      if (MASKED && p.mbits) bits = i < s.Lq && (j0 & ~7) < s.Lk ? fa_mask_row(p, s, i)[j0 >> 6] : 0ull;
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        float x = fa_exp2(fmaf(acc[nt][2 * hh + e], sl2, -lq));
        if (MASKED) {
          const int jg = j0 + 8 * hh;
          const bool ok = jg < s.Lk && i < s.Lq && (!p.causal || jg <= i + s.off) && ((bits >> (jg & 63)) & 1ull);
          if (!ok) x = 0.f;
        }
        acc[nt][2 * hh + e] = x;
      }
    }
}

// Entry points between the .cu files. Each returns TG_OK or sets tgc_error.
// dr: NULL, or the dropout state (then the dropout instantiations run; never with pruning).
bool fa_forward_tc_has(int D, int Dv);
tg_status fa_forward_tc(const FaParams &p, const FaDrop *dr, cudaStream_t st); // f16 / bf16, fa_forward_tc_has
tg_status fa_forward_generic(const FaParams &p, const FaDrop *dr, cudaStream_t st);
bool fa_backward_tc_has(int D, int Dv);
tg_status fa_backward_tc(const FaParams &p, const FaDrop *dr, cudaStream_t st);
tg_status fa_backward_generic(const FaParams &p, const FaDrop *dr, cudaStream_t st);
// attention_sm90.cu (wgmma, sm_90a): f16 / bf16, D == Dv in {64, 128}; no dropout, no pruning.
bool fa_sm90_has(const FaParams &p);
void fa_sm90_set_variant(int v);
tg_status fa_forward_sm90(const FaParams &p, cudaStream_t st);
tg_status fa_backward_sm90(const FaParams &p, cudaStream_t st);
