// Fused attention on Hopper (sm_90a only; CMake builds this file for that target alone): the
// forward and backward of attention_fused_{fwd,bwd}.cu with the matrix products on wgmma, the
// warpgroup-wide asynchronous tensor-core instruction, instead of per-warp mma.sync.
//
// Operands live in shared memory in the 128-byte swizzled layout wgmma's matrix descriptors name
// (below); the same tile serves as a K-major operand (S = Q K^T: rows are M / N, columns are the
// contraction) and as an MN-major one (O += P V, dV += P^T dO, ...: rows are the contraction).
// A warpgroup (4 consecutive warps, 128 threads) owns 64 rows of every product; warp wq of it
// holds rows [16 wq, 16 wq + 16) in the mma.sync accumulator layout, so the softmax, masking and
// P -> A-fragment code is the FlashAttention-2 code of the mma.sync kernels with one m16 tile.
//
// Scope (attention_fused.cu dispatches here only then): f16 / bf16, D == Dv in {64, 128}, no
// dropout, no tile pruning, on a compute capability 9.0 device. Everything else runs the
// mma.sync / CUDA-core kernels, which stay the reference implementation for the rest.
#include <cfloat>

#include "attention_fused.cuh"
#include "wgmma.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "attention_sm90.cu is built for sm_90a only (-gencode=arch=compute_90a,code=sm_90a)"
#endif

// ------------------------------------------------------------------ swizzled tiles
// A tile of R rows x C 16-bit columns (C a multiple of 64) is C / 64 panels of R rows x 128 bytes,
// one after another; the 16-byte chunk c of row r sits at chunk c ^ (r & 7) of its 128-byte row.
// Each 8-row group is then one 1024-byte swizzle atom, and every panel base is 1024-aligned.
template <int R> __device__ __forceinline__ uint32_t sw_off(int r, int c) {
  return (uint32_t)((c >> 3) * R * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

// rows [0, R) of a [*, C] global tile (row r at g + r * gstride) -> swizzled shared; rows >= valid
// are zero-filled. Consecutive threads take consecutive 16-byte chunks of a row (coalesced).
template <int R, int C, int THREADS, typename T>
__device__ __forceinline__ void sw_load(unsigned char *s, const T *g, int64_t gstride, int valid) {
  constexpr int CH = C / 8, TOTAL = R * CH;
#pragma unroll
  for (int it = 0; it < (TOTAL + THREADS - 1) / THREADS; ++it) {
    const int x = (int)threadIdx.x + it * THREADS, r = x / CH, c = x % CH;
    if (TOTAL % THREADS == 0 || x < TOTAL) {
      const bool ok = r < valid;
      fa_cp16(s + sw_off<R>(r, c), ok ? g + r * gstride + c * 8 : g, ok);
    }
  }
}

// Matrix descriptor (PTX ISA, "matrix descriptor format"): start address >> 4 in bits 0-13, the
// leading-dimension byte offset >> 4 in 16-29, the stride-dimension byte offset >> 4 in 32-45,
// swizzle mode in 62-63 (1 = 128 bytes). SBO is the 8-row group stride (1024) in both majors;
// LBO is ignored for a K-major swizzled operand and is the 64-column panel stride for an MN-major
// one. Advancing along the 128-byte row (k steps of a K-major operand) adds bytes to the start:
// the hardware applies the swizzle to the final address bits.
__device__ __forceinline__ uint64_t sw_desc(const unsigned char *ptr, uint32_t lbo) {
  const uint32_t a = fa_smem(ptr);
  return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFF) << 16) | ((uint64_t)(1024 >> 4) << 32) |
         (1ull << 62);
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accesses of accumulator registers across wgmma issue / wait.
template <int N> __device__ __forceinline__ void wg_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    asm volatile("" : "+f"(r[i])::"memory");
}
// Generic-proxy shared writes (cp.async, st.shared) made visible to wgmma's async-proxy reads.
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Barrier over one warpgroup's 128 threads (ids 1.. ; 0 is __syncthreads).
__device__ __forceinline__ void wg_bar(int id) { asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory"); }

// Bulk asynchronous reduction shared -> global (sm_90): *dst += *src elementwise, bytes % 16 == 0,
// both 16-byte aligned; tracked per issuing thread in bulk groups.
__device__ __forceinline__ void bulk_reduce_add(float *dst, const float *src, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst),
               "r"(fa_smem(src)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
template <int N> __device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ unsigned char *sw_base(unsigned char *raw) {
  return raw + ((1024 - (fa_smem(raw) & 1023)) & 1023);
}

// ------------------------------------------------------------------ tile walks over masks
// A boolean mask's tile classes come from its summaries in global memory. Looked up one tile
// after another, every skipped tile puts a dependent load on the path that issues the next
// tile's loads. The mask kernels (MW) instead classify 32 candidate tiles at once, one per lane,
// and keep the answer as two ballots: live (not empty for the CTA) and full (full for this
// warp's warpgroup). Every warp computes the same ballots (the same loads, served from L1), so the
// walk stays uniform across the CTA; one round of loads per 32 candidates instead of one per tile.
struct Sm90Walk {
  int base;      // candidate of bit 0
  uint32_t live; // candidates base + b not yet returned that are not empty
  uint32_t full; // ... that are full for this warp's warpgroup
};
__device__ __forceinline__ void walk_init(Sm90Walk &w) {
  w.base = -32;
  w.live = w.full = 0u;
}
// The next live candidate (-1: none left of the n) and whether it is full for our warpgroup;
// eval(c) -> bit 0: live, bit 1: full for our warpgroup. All 32 lanes of every warp call it.
template <typename F> __device__ __forceinline__ int walk_next(Sm90Walk &w, int n, F &&eval, bool &wfull) {
  while (w.live == 0u) {
    if (w.base + 32 >= n) return -1;
    w.base += 32;
    const int c = w.base + (int)(threadIdx.x & 31), e = c < n ? eval(c) : 0;
    w.live = __ballot_sync(0xffffffffu, e & 1);
    w.full = __ballot_sync(0xffffffffu, e & 2);
  }
  const int b = __ffs(w.live) - 1;
  w.live &= w.live - 1u;
  wfull = (w.full >> b) & 1u;
  return w.base + b;
}
// The same with the state in shared memory (one per warp), for a kernel with no registers to
// spare for it (the D = 128 backward spilled 200 bytes with it in registers; in shared memory 24,
// as without the walk). Every lane writes the same values; __syncwarp orders them between calls.
template <typename F> __device__ __forceinline__ int walk_next_shared(Sm90Walk &ws, int n, F &&eval, bool &wfull) {
  Sm90Walk w = ws;
  const int r = walk_next(w, n, eval, wfull);
  __syncwarp();
  ws = w;
  __syncwarp();
  return r;
}

// ------------------------------------------------------------------ forward
// CTA: NWG warpgroups x 64 query rows (BM = 64 NWG) of one head; key tiles of BN rows stream
// through shared memory (cp.async; K double-, V triple-buffered), last tile first. Warpgroup wg
// computes S = Q_wg K^T (SS wgmma, N = BN), the online softmax in registers, and O += P V (RS
// wgmma: P from registers, V MN-major). With PIPE the products are software-pipelined as in
// FlashAttention-3: S of tile n and P V of tile n - 1 are issued together, so the tensor cores
// run P V while the softmax of tile n is computed; O is rescaled once P V has landed (without
// PIPE each tile's P V is issued and waited for right after its softmax). Every
// wgmma is issued unconditionally (see the backward); a warpgroup whose rows see nothing of a
// tile runs the masked path (P = 0, O unchanged).
template <int D, int BN, int NWG> struct Sm90Fwd {
  static constexpr int BM = 64 * NWG, THREADS = 128 * NWG;
  static constexpr int QBYTES = BM * D * 2, KBYTES = BN * D * 2;
  static constexpr size_t SMEM = (size_t)QBYTES + 5 * (size_t)KBYTES + 1024; // + alignment slack
};

template <typename T, int D, int BN, int NWG, int MINB, bool PIPE, bool MW>
__global__ void __launch_bounds__(NWG * 128, MINB) fa_fwd_sm90_kernel(const FaParams p) {
  using C = Sm90Fwd<D, BN, NWG>;
  constexpr int BM = C::BM, THREADS = C::THREADS, NT = BN / 8, DT = D / 8, KS = D / 16, MWORDS = BN / 64;
  static_assert(BN % 64 == 0 && D % 64 == 0, "tile shape");
  extern __shared__ unsigned char fa_sm90_raw[];
  unsigned char *sQ = sw_base(fa_sm90_raw), *sK = sQ + C::QBYTES, *sV = sK + 2 * C::KBYTES;
  const int tid = threadIdx.x, wg = tid >> 7, wq = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, t = lane & 3;

  FaSeq s;
  if (!fa_seq(p, blockIdx.z, s)) return;
  const int nqb = (s.Lq + BM - 1) / BM;
  if ((int)blockIdx.x >= nqb) return;
  const int qb = p.causal ? nqb - 1 - (int)blockIdx.x : (int)blockIdx.x; // longest rows first
  const int h = blockIdx.y, hk = h / p.group, i0 = qb * BM, iw = i0 + 64 * wg;
  const int ilast = min(i0 + BM, s.Lq) - 1;
  const int jend = p.causal ? min(s.Lk, ilast + s.off + 1) : s.Lk;
  const int64_t qstr = (int64_t)p.Hq * D, kstr = (int64_t)p.Hkv * D;
  const T *qg = (const T *)p.q + (s.qoff + i0) * qstr + (int64_t)h * D;
  const T *kg = (const T *)p.k + s.koff * kstr + (int64_t)hk * D;
  const T *vg = (const T *)p.v + s.koff * kstr + (int64_t)hk * D;
  const float sl2 = p.scale_log2;

  // tile n of the walk: K in slot n % 2, V in slot n % 3
  auto issue_kv = [&](int jt, int n) {
    sw_load<BN, D, THREADS>(sK + (n & 1) * C::KBYTES, kg + (int64_t)jt * BN * kstr, kstr, s.Lk - jt * BN);
    sw_load<BN, D, THREADS>(sV + (n % 3) * C::KBYTES, vg + (int64_t)jt * BN * kstr, kstr, s.Lk - jt * BN);
  };
  // The walk: key tiles from jf down to 0, empty ones skipped. wclass: this warpgroup's class of
  // tile jt (rows past Lq: empty).
  auto wclass = [&](int jt) {
    return iw >= s.Lq ? FA_EMPTY
           : NWG == 1 ? fa_tile_class(p, s, i0, BM, jt * BN, BN)
                      : fa_tile_class(p, s, iw, 64, jt * BN, BN);
  };
  const int jf = jend > 0 ? (jend - 1) / BN : -1;
  Sm90Walk walk;
  walk_init(walk);
  bool wfn = false; // MW: whether the tile next_tile returned is full for this warpgroup
  auto next_tile = [&](int jt) {
    if constexpr (MW) {
      const int c = walk_next(
          walk, jf + 1,
          [&](int c) {
            const int jc = jf - c, cls = fa_tile_class(p, s, i0, BM, jc * BN, BN);
            return cls == FA_EMPTY ? 0 : 1 | (wclass(jc) == FA_FULL ? 2 : 0);
          },
          wfn);
      return c < 0 ? -1 : jf - c;
    } else {
      --jt;
      while (jt >= 0 && fa_tile_class(p, s, i0, BM, jt * BN, BN) == FA_EMPTY)
        --jt;
      return jt;
    }
  };
  int j = next_tile(jf + 1);
  bool wfc = wfn; // MW: the current tile's wfn

  float o[D / 2], sc[BN / 2], mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.f, 0.f};
  uint32_t pa[BN / 16][4];
#pragma unroll
  for (int x = 0; x < D / 2; ++x)
    o[x] = 0.f;
  sw_load<BM, D, THREADS>(sQ, qg, qstr, s.Lq - i0);
  if (j >= 0) issue_kv(j, 0);
  fa_cp_commit();
  const uint64_t dq0 = sw_desc(sQ + wg * 64 * 128, 16);

  auto issue_s = [&](int n) { // S = Q K^T (raw dot products), k steps of 16 along D
    const unsigned char *ks = sK + (n & 1) * C::KBYTES;
#pragma unroll
    for (int kk = 0; kk < KS; ++kk)
      Wgmma<T, BN>::template ss<0, 0>(sc, dq0 + (((kk >> 2) * BM * 128 + (kk & 3) * 32) >> 4),
                                      sw_desc(ks + (kk >> 2) * BN * 128 + (kk & 3) * 32, 16), kk);
    wg_commit();
  };
  auto issue_pv = [&](int n) { // O += P V for the tile in V slot n % 3
    const unsigned char *vs = sV + (n % 3) * C::KBYTES;
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
      Wgmma<T, D>::template rs<1>(o, pa[kk], sw_desc(vs + kk * 16 * 128, BN * 128), 1);
    wg_commit();
  };
  // mask + online softmax of sc (tile j): P in sc, returns the rescale factors of O's rows
  // (wcls: the warpgroup's class of the tile; without MW from wclass while S is in flight)
  auto curclass = [&](int jt) {
    if constexpr (MW)
      return wfc ? (int)FA_FULL : (int)FA_PARTIAL;
    else
      return wclass(jt);
  };
  auto softmax = [&](int jt, int wcls, float(&alpha)[2]) {
    const int j0 = jt * BN;
    if (wcls != FA_FULL) {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int i = iw + wq * 16 + g + 8 * hh;
        uint64_t bits[MWORDS];
#pragma unroll
        for (int x = 0; x < MWORDS; ++x) {
          bits[x] = ~0ull;
          if (p.mbits) bits[x] = i < s.Lq && j0 + 64 * x < s.Lk ? fa_mask_row(p, s, i)[(j0 >> 6) + x] : 0ull;
        }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int jj = nt * 8 + 2 * t + e, jg = j0 + jj;
            const bool ok = jg < s.Lk && (!p.causal || jg <= i + s.off) && ((bits[jj >> 6] >> (jj & 63)) & 1ull);
            if (!ok) sc[nt * 4 + 2 * hh + e] = -INFINITY;
          }
      }
    }
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      float mx = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
        mx = fmaxf(mx, fmaxf(sc[nt * 4 + 2 * hh], sc[nt * 4 + 2 * hh + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mnew = fmaxf(mrow[hh], mx * sl2);
      const float muse = mnew == -INFINITY ? 0.f : mnew; // no (-inf) - (-inf)
      alpha[hh] = fa_exp2(mrow[hh] - muse);
      mrow[hh] = mnew;
      float rs = 0.f;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float pv = fa_exp2(fmaf(sc[nt * 4 + 2 * hh + e], sl2, -muse));
          rs += pv;
          sc[nt * 4 + 2 * hh + e] = pv;
        }
      lrow[hh] = lrow[hh] * alpha[hh] + rs;
    }
  };
  auto pack_p = [&]() {
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      pa[kk][0] = fa_pack<T>(sc[8 * kk + 0], sc[8 * kk + 1]);
      pa[kk][1] = fa_pack<T>(sc[8 * kk + 2], sc[8 * kk + 3]);
      pa[kk][2] = fa_pack<T>(sc[8 * kk + 4], sc[8 * kk + 5]);
      pa[kk][3] = fa_pack<T>(sc[8 * kk + 6], sc[8 * kk + 7]);
    }
  };

  if (j >= 0) {
    // tile 0: S, softmax (O is 0: no rescale), P
    fa_cp_wait<0>();
    fence_async_smem();
    __syncthreads();
    float alpha[2];
    int jn = next_tile(j);
    if (jn >= 0) issue_kv(jn, 1);
    fa_cp_commit();
    wg_fence();
    issue_s(0);
    int wc = curclass(j);
    wg_wait<0>();
    wg_regs(sc);
    softmax(j, wc, alpha);
    pack_p();
    if constexpr (!PIPE) {
      wg_fence();
      issue_pv(0);
      wg_wait<0>();
      wg_regs(o);
    }
    int n = 1;
    while (jn >= 0) {
      j = jn;
      wfc = wfn;
      fa_cp_wait<0>();
      fence_async_smem();
      __syncthreads(); // tile n landed; S of tile n - 1 and P V of tile n - 2 are done everywhere
      // The next tile (its class reads mask summaries) and its loads: after S is issued where
      // registers allow (the pipelined D = 64 kernel would spill), so they overlap it.
      if constexpr (PIPE) {
        jn = next_tile(j);
        if (jn >= 0) issue_kv(jn, n + 1);
        fa_cp_commit();
      }
      wg_fence();
      issue_s(n);
      if constexpr (PIPE) {
        issue_pv(n - 1);
        wc = curclass(j);
        wg_wait<1>();
      } else {
        jn = next_tile(j);
        if (jn >= 0) issue_kv(jn, n + 1);
        fa_cp_commit();
        wc = curclass(j);
        wg_wait<0>();
      }
      wg_regs(sc);
      softmax(j, wc, alpha);
      wg_wait<0>();
      wg_regs(o);
#pragma unroll
      for (int dt = 0; dt < DT; ++dt) {
        o[dt * 4 + 0] *= alpha[0];
        o[dt * 4 + 1] *= alpha[0];
        o[dt * 4 + 2] *= alpha[1];
        o[dt * 4 + 3] *= alpha[1];
      }
      pack_p();
      if constexpr (!PIPE) {
        wg_fence();
        issue_pv(n);
        wg_wait<0>();
        wg_regs(o);
      }
      ++n;
    }
    if constexpr (PIPE) {
      wg_regs(o);
      wg_fence();
      issue_pv(n - 1);
      wg_wait<0>();
      wg_regs(o);
    }
  }
  fa_cp_wait<0>();

  // out = O / l; lse = (m + log2 l) ln 2; a row without allowed keys: out 0, lse -inf.
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    float l = lrow[hh];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int i = iw + wq * 16 + g + 8 * hh;
    if (i < s.Lq) {
      const float inv = l > 0.f ? 1.f / l : 0.f;
      T *orow = (T *)p.out + ((s.qoff + i) * p.Hq + h) * (int64_t)D;
#pragma unroll
      for (int dt = 0; dt < DT; ++dt)
        *reinterpret_cast<uint32_t *>(orow + dt * 8 + 2 * t) =
            fa_pack<T>(o[dt * 4 + 2 * hh] * inv, o[dt * 4 + 2 * hh + 1] * inv);
      if (t == 0) p.lse[fa_lse_index(p, s, h, i)] = l > 0.f ? (mrow[hh] + log2f(l)) * FA_LN2 : -INFINITY;
    }
  }
}

// ------------------------------------------------------------------ backward
// CTA: one key block of BN = 64 NWG keys of one key/value head; warpgroup wg owns keys
// [64 wg, 64 wg + 64) as the M side of S^T = K Q^T and dP^T = V dO^T (SS wgmma, N = 64 queries)
// and keeps dK, dV for them in registers. The CTA walks every (query head of the GQA group,
// query block of BM = 64) that can see its keys, with Q / dO / lse / delta double-buffered:
//   P^T = 2^(S^T scale log2e - lse log2e), dS^T = P^T (dP^T - delta)
//   dV += P^T dO, dK += dS^T Q        (RS wgmma: P^T, dS^T from registers; Q, dO MN-major)
//   dQ = dS K                          (SS wgmma over all BN keys; dS^T through shared memory)
// dQ is split by columns: warpgroup wg computes columns [wg D / NWG, (wg + 1) D / NWG) over all
// BN keys, and adds them to the f32 workspace with bulk asynchronous reductions (fa_dq_finish_kernel
// scales and adds the workspace into dq). The step is software-pipelined per warpgroup: dV runs
// while dS is computed, and step n's dQ is computed and reduced while step n + 1's S and dP run
// (dS^T is double-buffered for that).
// NQB: Q / dO buffers (3 lets dV, dK of a step run into the next; D = 128 has no registers for
// that and retires them at the step's start, and one-warpgroup CTAs keep to 2 so that two fit
// on an SM). GBYTES: one f32 dQ stage (64 x D), double-buffered.
template <int D, int NWG> struct Sm90Bwd {
  static constexpr int BN = 64 * NWG, BM = 64, THREADS = 128 * NWG, DQN = D / NWG;
  static constexpr int NQB = D > 64 || NWG == 1 ? 2 : 3;
  static constexpr int KBYTES = BN * D * 2, QBYTES = BM * D * 2, SBYTES = BN * BM * 2, GBYTES = BM * D * 4;
  static constexpr size_t SMEM = 2 * (size_t)KBYTES + 2 * NQB * (size_t)QBYTES + 2 * (size_t)SBYTES +
                                 2 * NQB * BM * sizeof(float) + 2 * (size_t)GBYTES + 1024;
};

template <typename T, int D, int NWG, bool MW>
__global__ void __launch_bounds__(NWG * 128, 1) fa_bwd_sm90_kernel(const FaParams p) {
  using C = Sm90Bwd<D, NWG>;
  constexpr int BN = C::BN, BM = C::BM, THREADS = C::THREADS, KS = D / 16, NQT = BM / 8, DT = D / 8, DQN = C::DQN;
  static_assert(DQN == 32 || DQN == 64 || DQN == 128, "dQ column split");
  extern __shared__ unsigned char fa_sm90_raw[];
  constexpr int NQB = C::NQB;
  unsigned char *sK = sw_base(fa_sm90_raw), *sV = sK + C::KBYTES, *sQ = sV + C::KBYTES, *sdO = sQ + NQB * C::QBYTES;
  unsigned char *sdS = sdO + NQB * C::QBYTES, *sSTG = sdS + 2 * C::SBYTES;
  float *slse = reinterpret_cast<float *>(sSTG + 2 * C::GBYTES), *sdel = slse + NQB * BM;
  const int tid = threadIdx.x, wg = tid >> 7, wq = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, t = lane & 3;

  FaSeq s;
  if (!fa_seq(p, blockIdx.z, s)) return;
  const int nkb = (s.Lk + BN - 1) / BN;
  if ((int)blockIdx.x >= nkb) return;
  const int n0 = blockIdx.x * BN, hk = blockIdx.y, nw = n0 + 64 * wg;
  const int qs = p.causal ? max(0, n0 - s.off) / BM : 0, nqb = (s.Lq + BM - 1) / BM;
  const int64_t qstr = (int64_t)p.Hq * D, kstr = (int64_t)p.Hkv * D;
  const float sl2 = p.scale_log2;

  // The walk: (query head gi of the group, query block qb >= qs), empty steps skipped; cls: the
  // CTA's class of the step (without MW), wfn: whether it is full for this warpgroup (MW).
  const int nqc = max(nqb - qs, 0);
  // the walk's state: in registers for D = 64, in shared memory for D = 128 (walk_next_shared)
  constexpr bool WSH = MW && D > 64;
  __shared__ Sm90Walk walks[WSH ? NWG * 4 : 1];
  Sm90Walk wreg;
  Sm90Walk &walk = WSH ? walks[tid >> 5] : wreg;
  walk_init(walk);
  if constexpr (WSH) __syncwarp();
  bool wfn = false;
  auto next_item = [&](int &gi, int &qb, int &cls) {
    if constexpr (MW) {
      auto eval = [&](int c) {
        const int i0c = (qs + c % nqc) * BM, cc = fa_tile_class(p, s, i0c, BM, n0, BN);
        if (cc == FA_EMPTY) return 0;
        const bool f = nw < s.Lk && (NWG == 1 ? cc : fa_tile_class(p, s, i0c, BM, nw, 64)) == FA_FULL;
        return f ? 3 : 1;
      };
      int c;
      if constexpr (WSH)
        c = walk_next_shared(walk, p.group * nqc, eval, wfn);
      else
        c = walk_next(walk, p.group * nqc, eval, wfn);
      if (c < 0) {
        gi = p.group;
      } else {
        gi = c / nqc;
        qb = qs + c % nqc;
      }
      cls = FA_PARTIAL; // unused
    } else {
      for (; gi < p.group; ++gi, qb = qs)
        for (; qb < nqb; ++qb)
          if ((cls = fa_tile_class(p, s, qb * BM, BM, n0, BN)) != FA_EMPTY) return;
    }
  };
  auto issue_q = [&](int gi, int qb, int b) {
    const int h = hk * p.group + gi, i0 = qb * BM;
    const int64_t off = (s.qoff + i0) * qstr + (int64_t)h * D;
    sw_load<BM, D, THREADS>(sQ + b * C::QBYTES, (const T *)p.q + off, qstr, s.Lq - i0);
    sw_load<BM, D, THREADS>(sdO + b * C::QBYTES, (const T *)p.dout + off, qstr, s.Lq - i0);
    if (tid < 2 * BM) {
      const int r = tid & (BM - 1), i = i0 + r;
      const bool ok = i < s.Lq;
      const float *src = tid < BM ? p.lse : p.delta;
      fa_cp4((tid < BM ? slse : sdel) + b * BM + r, ok ? src + fa_lse_index(p, s, h, i) : src, ok);
    }
  };

  int gi = 0, qb = qs, cls = FA_EMPTY;
  next_item(gi, qb, cls);
  if (gi >= p.group) return; // dk, dv += 0
  bool wfc = wfn;            // MW: the current step's wfn

  sw_load<BN, D, THREADS>(sK, (const T *)p.k + (s.koff + n0) * kstr + (int64_t)hk * D, kstr, s.Lk - n0);
  sw_load<BN, D, THREADS>(sV, (const T *)p.v + (s.koff + n0) * kstr + (int64_t)hk * D, kstr, s.Lk - n0);
  issue_q(gi, qb, 0);
  fa_cp_commit();

  float dk[D / 2], dv[D / 2], dqa[DQN / 2];
#pragma unroll
  for (int x = 0; x < D / 2; ++x)
    dk[x] = dv[x] = 0.f;
#pragma unroll
  for (int x = 0; x < DQN / 2; ++x)
    dqa[x] = 0.f;
  const uint64_t dK0 = sw_desc(sK + wg * 64 * 128, 16), dV0 = sw_desc(sV + wg * 64 * 128, 16);
  // dK's A operand: this warpgroup's dS^T rows, per buffer (K-major: the contraction is queries)
  // dQ's B operand: K rows (the contraction), this warpgroup's DQN columns
  const unsigned char *kq = sK + (wg * DQN / 64) * BN * 128 + (wg * DQN % 64) * 2;
  bool pend = false; // a dQ of the previous step is in flight (dqa, for head ph, rows pi0..)
  int ph = 0, pi0 = 0;
  // dQ of a step -> the f32 workspace (dq_swizzled layout: [B, Hq, Nq, D] planes, 16-byte chunks of
  // row r XOR-swizzled by r & 7): the warpgroups write their columns of the 64 x D block into a
  // shared stage with the same swizzle (conflict-free), and after the next barrier thread 0 adds
  // the whole block with one bulk asynchronous reduction (cp.reduce.async.bulk .add.f32: the
  // copy engine does the read-modify-write in L2). Rows past Lq carry exact zeros (Q, dO are
  // zero-filled there, so dS = 0); the workspace has 64 rows of slack after the last plane.
  int64_t pend_off = -1; // workspace offset of the staged block not yet issued (-1: none)
  int stg = 0;           // stage buffer the next flush writes
  auto flush = [&]() {   // dqa (head ph, rows pi0..) -> stage stg
    float *sg = reinterpret_cast<float *>(sSTG + stg * C::GBYTES);
    const int64_t prow = s.qoff - (int64_t)s.b * p.Nq + pi0; // plane row of stage row 0
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int r = wq * 16 + g + 8 * hh, key = (int)((prow + r) & 7);
#pragma unroll
      for (int dt = 0; dt < DQN / 8; ++dt) {
        const int c = wg * DQN + dt * 8 + 2 * t; // column
        *reinterpret_cast<float2 *>(sg + r * D + ((((c >> 2) ^ key)) << 2) + (c & 3)) =
            make_float2(dqa[dt * 4 + 2 * hh], dqa[dt * 4 + 2 * hh + 1]);
      }
    }
    fence_async_smem();
    pend_off = (((int64_t)s.b * p.Hq + ph) * p.Nq + prow) * D;
  };
  auto issue_stage = [&]() { // after a barrier: the block staged by flush goes out (thread 0)
    if (tid == 0 && pend_off >= 0) {
      bulk_reduce_add(p.dq_acc + pend_off, reinterpret_cast<const float *>(sSTG + stg * C::GBYTES), C::GBYTES);
      bulk_commit();
    }
    if (pend_off >= 0) stg ^= 1;
    pend_off = -1;
  };
  // dQ of step n is issued at the start of step n + 1, just before its S and dP, and its atomics
  // run while those two products do. Step 0 has no predecessor: it multiplies a zeroed dS^T
  // buffer and flushes nothing. Every wgmma is issued unconditionally (ptxas serializes wgmma
  // pipelines whose issue or wait sits under data-dependent branches); a warpgroup whose keys see
  // nothing of a step runs the masked path, which yields P = dS = 0 exactly.
  for (int x = tid; x < C::SBYTES / 16; x += THREADS)
    reinterpret_cast<uint4 *>(sdS + C::SBYTES)[x] = make_uint4(0u, 0u, 0u, 0u);
  int buf = 0, sb = 0;
  // dQ[:, our columns] = dS K of the step whose dS^T is in buffer b: A = dS (M = queries,
  // contraction = keys: MN-major), B = K (MN-major)
  auto issue_dq = [&](int b) {
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
      Wgmma<T, DQN>::template ss<1, 1>(dqa, sw_desc(sdS + b * C::SBYTES + kk * 16 * 128, BN * 128),
                                       sw_desc(kq + kk * 16 * 128, BN * 128), kk);
    wg_commit();
  };
  // Step n: Q / dO / lse / delta in buffer n % 3, dS^T in buffer n % 2. dV and dK of step n stay
  // in flight into step n + 1 (they are retired by its wait<2>), so the loads of step n + 2 go
  // to the third buffer.
  while (gi < p.group) {
    // With two Q / dO buffers dV, dK must be done before the loads below (for D = 128 also: no
    // registers to keep them in flight over the loop; ptxas would serialize every wgmma).
    if constexpr (NQB == 2) wg_wait<0>();
    fa_cp_wait<0>();
    fence_async_smem();
    if (tid == 0) bulk_wait_read<0>(); // the stage issued a step ago has been read out
    __syncthreads();                   // this step's tiles landed; the previous step's dS^T and dQ stage are complete
    issue_stage();
    // The next step (tile classes read mask summaries) and its loads: for D = 64 after this
    // step's first products are issued, so they overlap them (D = 128 has no registers for it).
    int gin = gi, qbn = qb + 1, cn = FA_EMPTY;
    const int h = hk * p.group + gi, i0 = qb * BM;
    auto wclass = [&]() {
      if constexpr (MW)
        return wfc ? (int)FA_FULL : (int)FA_PARTIAL;
      else
        return nw >= s.Lk ? FA_EMPTY : NWG == 1 ? cls : fa_tile_class(p, s, i0, BM, nw, 64);
    };
    int wcls = FA_EMPTY;
    if constexpr (D > 64) {
      next_item(gin, qbn, cn);
      if (gin < p.group) issue_q(gin, qbn, buf + 1 == NQB ? 0 : buf + 1);
      fa_cp_commit();
      wcls = wclass();
    }
    const unsigned char *qsm = sQ + buf * C::QBYTES, *dos = sdO + buf * C::QBYTES;
    unsigned char *dss = sdS + sb * C::SBYTES;
    const uint64_t dS0 = sw_desc(dss + 64 * wg * 128, 16);
    const float *ls = slse + buf * BM, *dls = sdel + buf * BM;
    wg_fence();
    issue_dq(sb ^ 1);
    float sa[BM / 2], da[BM / 2];
#pragma unroll
    for (int kk = 0; kk < KS; ++kk)
      Wgmma<T, BM>::template ss<0, 0>(sa, dK0 + (((kk >> 2) * BN * 128 + (kk & 3) * 32) >> 4),
                                      sw_desc(qsm + (kk >> 2) * BM * 128 + (kk & 3) * 32, 16), kk);
    wg_commit();
#pragma unroll
    for (int kk = 0; kk < KS; ++kk)
      Wgmma<T, BM>::template ss<0, 0>(da, dV0 + (((kk >> 2) * BN * 128 + (kk & 3) * 32) >> 4),
                                      sw_desc(dos + (kk >> 2) * BM * 128 + (kk & 3) * 32, 16), kk);
    wg_commit();
    if constexpr (D == 64) {
      next_item(gin, qbn, cn);
      if (gin < p.group) issue_q(gin, qbn, buf + 1 == NQB ? 0 : buf + 1);
      fa_cp_commit();
      wcls = wclass();
    }
    wg_wait<2>(); // the previous step's dV, dK and dQ
    wg_regs(dqa);
    if (pend) flush();
    wg_wait<1>();
    wg_regs(sa);
    // P^T (rows: keys nw + 16 wq + g + 8 hh; columns: queries i0 + 8 nt + 2 t + e)
    float(&sa4)[NQT][4] = *reinterpret_cast<float(*)[NQT][4]>(sa);
    if (wcls == FA_FULL)
      fa_bwd_probs<false>(sa4, ls, p, s, i0, nw + wq * 16 + g, t, sl2);
    else
      fa_bwd_probs<true>(sa4, ls, p, s, i0, nw + wq * 16 + g, t, sl2);
    uint32_t pf[BM / 16][4];
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk)
#pragma unroll
      for (int x = 0; x < 4; ++x)
        pf[kk][x] = fa_pack<T>(sa[8 * kk + 2 * x], sa[8 * kk + 2 * x + 1]);
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk)
      Wgmma<T, D>::template rs<1>(dv, pf[kk], sw_desc(dos + kk * 16 * 128, BM * 128), 1);
    wg_commit();
    wg_wait<1>(); // dP^T ready; dV may still run
    wg_regs(da);
    // dS^T = P^T (dP^T - delta) -> shared memory (swizzled, rows = keys, columns = queries)
#pragma unroll
    for (int nt = 0; nt < NQT; ++nt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int c = 4 * nt + 2 * hh, r = 64 * wg + 16 * wq + g + 8 * hh;
        const float d0 = dls[nt * 8 + 2 * t], d1 = dls[nt * 8 + 2 * t + 1];
        *reinterpret_cast<uint32_t *>(dss + r * 128 + ((nt ^ (r & 7)) << 4) + 4 * t) =
            fa_pack<T>(sa[c] * (da[c] - d0), sa[c + 1] * (da[c + 1] - d1));
      }
    fence_async_smem();
    wg_bar(1 + wg); // our dS^T rows are complete (dQ waits for all rows at the next step's barrier)
    // dK += dS^T Q: A = our dS^T rows (K-major: the contraction is queries), B = Q (MN-major)
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk)
      Wgmma<T, D>::template ss<0, 1>(dk, dS0 + ((kk * 32) >> 4), sw_desc(qsm + kk * 16 * 128, BM * 128), 1);
    wg_commit();
    pend = true;
    ph = h;
    pi0 = i0;
    gi = gin;
    qb = qbn;
    cls = cn;
    wfc = wfn;
    buf = buf + 1 == NQB ? 0 : buf + 1;
    sb ^= 1;
  }
  wg_wait<0>();
  // For D = 64 the dk, dv being accumulated into are read now, so that their latency overlaps
  // the last dQ product and its reduction (the step's products are retired, registers allow it;
  // with D = 128 the bf16 kernel spilled over a kilobyte, so it reads them as it writes).
  uint32_t odk[2][DT], odv[2][DT];
  auto read_old = [&]() {
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int jg = nw + wq * 16 + g + 8 * hh;
      const int64_t off = (s.koff + jg) * kstr + (int64_t)hk * D + 2 * t;
      const uint32_t *dkr = reinterpret_cast<const uint32_t *>((const T *)p.dk + off),
                     *dvr = reinterpret_cast<const uint32_t *>((const T *)p.dv + off);
#pragma unroll
      for (int dt = 0; dt < DT; ++dt) {
        odk[hh][dt] = jg < s.Lk ? dkr[dt * 4] : 0u;
        odv[hh][dt] = jg < s.Lk ? dvr[dt * 4] : 0u;
      }
    }
  };
  if constexpr (D == 64) read_old();
  fa_cp_wait<0>();
  fence_async_smem();
  if (tid == 0) bulk_wait_read<0>();
  __syncthreads(); // the last step's dS^T and the previous dQ stage are complete
  issue_stage();
  wg_regs(dk);
  wg_regs(dv);
  wg_fence();
  issue_dq(sb ^ 1);
  wg_wait<0>();
  wg_regs(dqa);
  flush();
  if (tid == 0) bulk_wait_read<0>();
  __syncthreads();
  issue_stage();
  // Before the CTA (and its shared memory) ends, the copy engine must have read the last stage;
  // the reduction into global memory itself completes with the grid, before any later kernel.
  if (tid == 0) bulk_wait_read<0>();

    // dk += scale * dK, dv += dV
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int jg = nw + wq * 16 + g + 8 * hh;
    if (jg < s.Lk) {
      const int64_t off = (s.koff + jg) * kstr + (int64_t)hk * D + 2 * t;
      uint32_t *dkr = reinterpret_cast<uint32_t *>((T *)p.dk + off),
               *dvr = reinterpret_cast<uint32_t *>((T *)p.dv + off);
#pragma unroll
      for (int dt = 0; dt < DT; ++dt) {
        const float2 a = fa_unpack<T>(D == 64 ? odk[hh][dt] : dkr[dt * 4]),
                     b = fa_unpack<T>(D == 64 ? odv[hh][dt] : dvr[dt * 4]);
        dkr[dt * 4] = fa_pack<T>(a.x + p.scale * dk[dt * 4 + 2 * hh], a.y + p.scale * dk[dt * 4 + 2 * hh + 1]);
        dvr[dt * 4] = fa_pack<T>(b.x + dv[dt * 4 + 2 * hh], b.y + dv[dt * 4 + 2 * hh + 1]);
      }
    }
  }
}

// ------------------------------------------------------------------ launchers
// The variant is a sweep switch (cuda_attention_fused_set_family), compiled into bench_attention
// alone; in the library it is the constant 0 and the sweep-only instantiations below are not built.
#ifdef TIGA_BENCH_SWITCHES
static int g_sm90_variant = 0;
#else
static constexpr int g_sm90_variant = 0;
#endif

template <typename T, int D, int BN, int NWG, int MINB, bool PIPE, bool MW = false>
static tg_status fa_launch_fwd_sm90(const FaParams &p, cudaStream_t st) {
  using C = Sm90Fwd<D, BN, NWG>;
  auto kern = fa_fwd_sm90_kernel<T, D, BN, NWG, MINB, PIPE, MW>;
  TGC_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM));
  dim3 grid((unsigned)((p.max_q + C::BM - 1) / C::BM), (unsigned)p.Hq, (unsigned)p.nz);
  kern<<<grid, C::THREADS, C::SMEM, st>>>(p);
  TGC_LAUNCHED("fa_fwd_sm90_kernel");
  return TG_OK;
}

// Forward tile shapes <D, BN, NWG, CTAs per SM, pipelined, mask walk>, chosen by the sweeps of
// bench/NOTES.md (sessions 3, 4): D = 64 pipelined with BN = 64 and two 2-warpgroup CTAs per SM;
// D = 128 with BN = 128 not pipelined (the pipelined form spills); causal D = 128 up to 1024
// queries in one-warpgroup CTAs (finer query blocks balance uneven tiles better). Masks walk
// their tiles 32 at a time (Sm90Walk); D = 64 masks run 64 x 64 tiles (one-warpgroup CTAs, four
// per SM) unless mask_coarse says no 128-row tile has an empty half. Variants 1..7
// (cuda_attention_fused_set_family 2..8) force the alternatives for sweeps: 5 the session-3 mask
// kernels (tile by tile lookups), 6 / 7 the coarse / fine mask shapes whatever the mask; the
// variants exist in bench_attention alone (TIGA_BENCH_SWITCHES).
template <typename T> static tg_status fa_fwd_sm90_dim(const FaParams &p, cudaStream_t st) {
  const int v = g_sm90_variant;
  if (p.D == 64) {
#ifdef TIGA_BENCH_SWITCHES
    if (v == 1) return fa_launch_fwd_sm90<T, 64, 64, 2, 2, false>(p, st);
    if (v == 2) return fa_launch_fwd_sm90<T, 64, 128, 1, 2, true>(p, st);
    if (v == 3) return fa_launch_fwd_sm90<T, 64, 128, 1, 2, false>(p, st);
#endif
    if (!p.mbits) return fa_launch_fwd_sm90<T, 64, 64, 2, 2, true>(p, st);
#ifdef TIGA_BENCH_SWITCHES
    if (v == 5) return fa_launch_fwd_sm90<T, 64, 128, 1, 2, true, false>(p, st);
#endif
    if ((p.mask_coarse && v != 7) || v == 6) return fa_launch_fwd_sm90<T, 64, 64, 2, 2, true, true>(p, st);
    return fa_launch_fwd_sm90<T, 64, 64, 1, 4, true, true>(p, st);
  }
#ifdef TIGA_BENCH_SWITCHES
  if (v == 1) return fa_launch_fwd_sm90<T, 128, 128, 2, 1, true>(p, st);
  if (v == 2) return fa_launch_fwd_sm90<T, 128, 64, 1, 2, false>(p, st);
  if (v == 3) return fa_launch_fwd_sm90<T, 128, 64, 2, 1, false>(p, st);
#endif
  if (p.mbits && v == 5) return fa_launch_fwd_sm90<T, 128, 64, 1, 2, false, false>(p, st);
  if (p.mbits) return fa_launch_fwd_sm90<T, 128, 64, 1, 2, false, true>(p, st);
  return p.causal && p.max_q <= 1024 ? fa_launch_fwd_sm90<T, 128, 64, 1, 2, false>(p, st)
                                     : fa_launch_fwd_sm90<T, 128, 128, 2, 1, false>(p, st);
}

template <typename T, int D, int NWG, bool MW = false>
static tg_status fa_launch_bwd_sm90(const FaParams &p, cudaStream_t st) {
  using C = Sm90Bwd<D, NWG>;
  auto kern = fa_bwd_sm90_kernel<T, D, NWG, MW>;
  TGC_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM));
  dim3 grid((unsigned)((p.max_k + C::BN - 1) / C::BN), (unsigned)p.Hkv, (unsigned)p.nz);
  kern<<<grid, C::THREADS, C::SMEM, st>>>(p);
  TGC_LAUNCHED("fa_bwd_sm90_kernel");
  return TG_OK;
}

// Short causal rows with D = 64 run one-warpgroup CTAs of 64 keys: with two warpgroups, a step
// whose 64 x 128 tile is half empty still computes the empty half (wgmma is issued
// unconditionally), which causal diagonals hit once per CTA (measured: bench/NOTES.md, session 3).
// D = 64 masks likewise, unless mask_coarse says no step has an empty half; masks walk their steps
// 32 at a time (Sm90Walk).
template <typename T> static tg_status fa_bwd_sm90_dim(const FaParams &p, cudaStream_t st) {
  const int v = g_sm90_variant;
  if (p.D == 128)
    return p.mbits && v != 5 ? fa_launch_bwd_sm90<T, 128, 2, true>(p, st) : fa_launch_bwd_sm90<T, 128, 2>(p, st);
  if (p.mbits) {
    if (v == 5) return fa_launch_bwd_sm90<T, 64, 1, false>(p, st);
    if ((p.mask_coarse && v != 7) || v == 6) return fa_launch_bwd_sm90<T, 64, 2, true>(p, st);
    return fa_launch_bwd_sm90<T, 64, 1, true>(p, st);
  }
  return (p.causal && p.max_k <= 2048) || v == 4 ? fa_launch_bwd_sm90<T, 64, 1>(p, st)
                                                 : fa_launch_bwd_sm90<T, 64, 2>(p, st);
}

bool fa_sm90_has(const FaParams &p) {
  return (p.dtype == TG_F16 || p.dtype == TG_BF16) && p.D == p.Dv && (p.D == 64 || p.D == 128);
}

#ifdef TIGA_BENCH_SWITCHES
void fa_sm90_set_variant(int v) { g_sm90_variant = v; }
#endif

tg_status fa_forward_sm90(const FaParams &p, cudaStream_t st) {
  if (p.dtype == TG_F16) return fa_fwd_sm90_dim<__half>(p, st);
  return fa_fwd_sm90_dim<__nv_bfloat16>(p, st);
}

tg_status fa_backward_sm90(const FaParams &p, cudaStream_t st) {
  if (p.dtype == TG_F16) return fa_bwd_sm90_dim<__half>(p, st);
  return fa_bwd_sm90_dim<__nv_bfloat16>(p, st);
}
