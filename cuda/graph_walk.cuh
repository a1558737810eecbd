// The walker every graph kernel is built on (cuda/graph.cu, cuda/graph_attend.cu). C++ only.
//
// Work is split into units: a unit is one segment of the CSR (a destination row, or a source's
// run of transposed entries) times a slice of the columns. A unit belongs to a group of G lanes
// (G a power of two <= 32, each lane owning a few columns); a block of kBlock threads holds
// kBlock / G consecutive units. A group walks its unit's edges in ascending order, keeping a
// per-lane state; then `finish` writes the unit's outputs.
// Slices: a launch too small to fill the GPU (Cora: 2708 rows) lasts as long as its longest
// row's chain of dependent loads, so the launcher may give each unit S groups (S slices, a power
// of two, G * S <= 32 lanes of one warp): slice s walks the s-th contiguous piece of the unit's
// edges and the slices' states are merged by a butterfly whose every step merges (lower slice,
// upper slice), i.e. in edge order; slice 0 finishes. S depends only on the launch's sizes
// (slices_for), so a given problem always takes the same path and gives the same bits.
// A unit with more than kLong edges would keep one group busy for the whole kernel, so after
// the short units are done the whole block walks each of its long units: group q takes the q-th
// contiguous piece of the edges, and group 0 merges the pieces' states in piece order. Both paths
// fix the order of every sum, so results are bit identical run to run (no atomics).
//
// A policy P supplies:
//   int64_t units; int G;        how many units, lanes per unit
//   kU                           edges loaded ahead (memory-level parallelism)
//   kMerge                       P has a state to merge and a finish (else it only writes per edge)
//   C, S, L                      per-unit constants, per-lane state, one edge's loads
//   unit(u, lane, C&, b&, e&)    constants of unit u and its edge range [b, e) (all lanes call it)
//   init(S&, C) / load(L&, C, k) / step(S&, L, C, k) / merge(S&, S later) / finish(S, C, b, e)
#pragma once
#include <climits>
#include <cstdio>
#include <cstring>

#include "../host/philox.h"
#include "common.cuh"
#include "graph.h"

namespace tgg {

constexpr int kBlock = 256;
constexpr int64_t kLong = 256;
constexpr size_t kSmemMax = 48 * 1024;

// ---------------------------------------------------------------- small helpers
// Mask of the lanes of this thread's group of G lanes (aligned within the warp).
__device__ __forceinline__ unsigned group_mask(int G) {
  if (G >= 32) return 0xffffffffu;
  const unsigned base = (threadIdx.x & 31u) & ~(unsigned)(G - 1);
  return ((1u << G) - 1u) << base;
}
// Sum over the group's lanes (fixed butterfly: same bits on every lane and every run).
__device__ __forceinline__ float group_sum(float v, int G) {
  if (G == 1) return v;
  const unsigned m = group_mask(G);
  for (int o = G >> 1; o; o >>= 1)
    v += __shfl_xor_sync(m, v, o);
  return v;
}

template <typename T, int V> using Pack = tgc_pack<T, V>;
template <typename T, int V> __device__ __forceinline__ Pack<T, V> ldp(const T *p) {
  return *reinterpret_cast<const Pack<T, V> *>(p);
}
template <typename T, int V> __device__ __forceinline__ void stp(T *p, const float (&f)[V]) {
  Pack<T, V> r;
#pragma unroll
  for (int q = 0; q < V; ++q)
    r.e[q] = tgc_from_f<T>(f[q]);
  *reinterpret_cast<Pack<T, V> *>(p) = r;
}
template <typename T, int V> __device__ __forceinline__ void unpack(const Pack<T, V> &r, float (&f)[V]) {
#pragma unroll
  for (int q = 0; q < V; ++q)
    f[q] = tgc_to_f(r.e[q]);
}
template <typename T> __device__ __forceinline__ float ld1(const T *p) { return tgc_to_f(*p); }
template <typename T> __device__ __forceinline__ void acc1(T *p, float v) { *p = tgc_from_f<T>(tgc_to_f(*p) + v); }

// Online softmax: takes score s into the running max m; returns the factor the previous sums are
// scaled by and the weight of s, with one exp: exp(min(m, s) - max(m, s)) is the one that is not 1.
// -inf scores weigh 0; a NaN score weighs NaN (it propagates into the row's sums).
__device__ __forceinline__ void online(float &m, float s, float &scale, float &p) {
  const float mn = fmaxf(m, s);
  const float a = mn == -INFINITY ? 0.f : __expf(fminf(m, s) - mn);
  const bool up = s > m;
  scale = up ? a : 1.f;
  p = up ? 1.f : a;
  if (s != s) p = s;
  m = mn;
}
// Weight of the earlier (ma) and later (mb) partial states when merged; returns the merged max.
__device__ __forceinline__ float online_merge(float ma, float mb, float &fa, float &fb) {
  const float mn = (ma != ma || mb != mb) ? __int_as_float(0x7fffffff) : fmaxf(ma, mb);
  fa = ma == -INFINITY ? 0.f : __expf(ma - mn);
  fb = mb == -INFINITY ? 0.f : __expf(mb - mn);
  return mn;
}
__device__ __forceinline__ float lse_of(float m, float l) { return l == 0.f ? -INFINITY : m + __logf(l); }
__device__ __forceinline__ float exp_from(float s, float lse) { return lse == -INFINITY ? 0.f : __expf(s - lse); }

// ---------------------------------------------------------------- attention dropout (host/philox.h)
struct Drop {
  int on;
  uint64_t seed, call, thr;
  int64_t nq, nk;
  float inv_keep;
  // w = m / keep for (head h, row i, key j): 1 without dropout.
  __device__ __forceinline__ float w(int64_t h, int64_t i, int64_t j) const {
    if (!on) return 1.f;
    const uint64_t R = (uint64_t)(h * nq + i);
    uint32_t x[4];
    tg_philox4x32(seed, tg_attn_drop_block(R, (uint64_t)j, (uint64_t)nk), call | (1ull << 63), x);
    const int q = tg_attn_drop_word(R, (uint64_t)j);
    const uint32_t word = q == 0 ? x[0] : q == 1 ? x[1] : q == 2 ? x[2] : x[3];
    return (uint64_t)word < thr ? inv_keep : 0.f;
  }
};
// keep NaN, < 0 or > 1 is an error; 0 and 1 mean no dropout.
static inline tg_status make_drop(const tgc_csr *g, double keep, uint64_t seed, uint64_t call, Drop *d,
                                  const char *op) {
  if (!(keep >= 0 && keep <= 1)) {
    tgc_set_error("%s: dropout keep %g is not in [0, 1]", op, keep);
    return TG_ERR_INVALID_ARGUMENT;
  }
  d->on = keep > 0 && keep < 1;
  d->seed = seed;
  d->call = call;
  d->thr = tg_keep_threshold(keep);
  d->nq = g->nq;
  d->nk = g->nk;
  d->inv_keep = d->on ? (float)(1.0 / keep) : 1.f;
  return TG_OK;
}

// ---------------------------------------------------------------- the walker
template <class P>
__device__ __forceinline__ void walk(const P &p, typename P::S &st, const typename P::C &c, int64_t b, int64_t e) {
  // Batches of U edges, the last one partial: every batch issues its loads before using them, so
  // a row costs ceil(deg / U) memory round trips.
  constexpr int U = P::kU;
#pragma unroll 1
  for (int64_t k = b; k < e; k += U) {
    typename P::L l[U];
#pragma unroll
    for (int q = 0; q < U; ++q)
      if (k + q < e) p.load(l[q], c, k + q);
#pragma unroll
    for (int q = 0; q < U; ++q)
      if (k + q < e) p.step(st, l[q], c, k + q);
  }
}

// The state of the lane `lanes` away (xor) within the unit's lanes `mask` (32-bit words of S).
template <class S> __device__ __forceinline__ S shfl_state(unsigned mask, const S &s, int lanes) {
  static_assert(sizeof(S) % 4 == 0, "walker state must be made of 32-bit words");
  constexpr int n = (int)(sizeof(S) / 4);
  unsigned w[n];
  memcpy(w, &s, sizeof(S));
#pragma unroll
  for (int i = 0; i < n; ++i)
    w[i] = __shfl_xor_sync(mask, w[i], lanes);
  S r;
  memcpy(&r, w, sizeof(S));
  return r;
}

// Merges the S slices' states of a unit (butterfly over slices; each step merges the lower
// slice's state with the upper one's, the same operands on both lanes, so every slice ends with
// the bit-identical state of the whole unit in edge order).
template <class P>
__device__ __forceinline__ void merge_slices(const P &p, typename P::S &st, int G, int S, int sl, unsigned mask) {
  for (int o = 1; o < S; o <<= 1) {
    const typename P::S other = shfl_state(mask, st, o * G);
    if (sl & o) {
      typename P::S lower = other;
      p.merge(lower, st);
      st = lower;
    } else {
      p.merge(st, other);
    }
  }
}

// The block's long units (NU of them per block), one after the other, each split into
// kBlock / G contiguous pieces.
template <class P> __device__ __forceinline__ void walk_long(const P &p, const unsigned char *is_long_of, int NU) {
  extern __shared__ __align__(16) unsigned char tgg_smem[];
  const int G = p.G, NG = kBlock / G;
  const int grp = (int)threadIdx.x / G, lane = (int)threadIdx.x % G;
  for (int q = 0; q < NU; ++q) {
    if (!is_long_of[q]) continue; // block-uniform
    const int64_t uq = (int64_t)blockIdx.x * NU + q;
    typename P::C c;
    int64_t bq, eq;
    p.unit(uq, lane, c, bq, eq);
    const int64_t len = eq - bq, lo = bq + len * grp / NG, hi = bq + len * (grp + 1) / NG;
    typename P::S st;
    p.init(st, c);
    walk(p, st, c, lo, hi);
    if constexpr (P::kMerge) {
      typename P::S *sx = reinterpret_cast<typename P::S *>(tgg_smem);
      sx[threadIdx.x] = st;
      __syncthreads();
      if (grp == 0) {
#pragma unroll 1
        for (int r = 1; r < NG; ++r)
          p.merge(st, sx[r * G + lane]);
        p.finish(st, c, bq, eq);
      }
      __syncthreads();
    }
  }
}

// Thread layout: unit q of the block owns threads [q W, (q + 1) W), W = G * S; within them,
// slice sl = the (tid / G) % S-th group of G lanes. The sliced form is its own instantiation
// (SLICED, S > 1), so the one-slice kernel that large graphs run is the plain walker; it has no
// occupancy target (it runs only for launches too small to fill the GPU) and so no spills.
template <class P, bool SLICED>
__global__ void __launch_bounds__(kBlock, SLICED ? 1 : P::kMinBlocks) k_walk(const P p, const int S) {
  __shared__ unsigned char is_long_of[kBlock];
  const int G = p.G, W = SLICED ? G * S : G, NU = kBlock / W;
  const int q = (int)threadIdx.x / W, sl = SLICED ? ((int)threadIdx.x / G) % S : 0, lane = (int)threadIdx.x % G;
  const int64_t u = (int64_t)blockIdx.x * NU + q;
  const bool have = u < p.units;
  bool is_long = false;
  if (have) {
    typename P::C c;
    int64_t b, e;
    p.unit(u, lane, c, b, e);
    is_long = e - b > kLong;
    if (!is_long) {
      typename P::S st;
      p.init(st, c);
      if constexpr (SLICED) {
        const int len = (int)(e - b); // <= kLong
        walk(p, st, c, b + len * sl / S, b + len * (sl + 1) / S);
      } else {
        walk(p, st, c, b, e);
      }
      if constexpr (P::kMerge) {
        if constexpr (SLICED) merge_slices(p, st, G, S, sl, group_mask(W));
        if (sl == 0) p.finish(st, c, b, e);
      }
    }
  }
  if (lane == 0 && sl == 0) is_long_of[q] = is_long;
  if (__syncthreads_or(is_long)) walk_long(p, is_long_of, NU);
}

// Blocks for a launch of p with S slices per unit (S a power of two, G * S <= 32); 0 with the
// message set when it cannot launch.
template <class P> static int64_t blocks_for(const P &p, const char *name, int S) {
  if (S < 1 || (S & (S - 1)) || p.G * S > 32) {
    tgc_set_error("%s: %d slices of %d lanes do not fit a warp", name, S, p.G);
    return 0;
  }
  const int NU = kBlock / (p.G * S);
  const int64_t blocks = (p.units + NU - 1) / NU;
  if (blocks > INT_MAX) {
    tgc_set_error("%s: %lld units is too many for one launch", name, (long long)p.units);
    return 0;
  }
  return blocks;
}
template <class P> constexpr size_t smem_of() {
  constexpr size_t smem = P::kMerge ? kBlock * sizeof(typename P::S) : 0;
  static_assert(smem <= kSmemMax, "walker state too large for shared memory");
  return smem;
}

// One slice per unit (the plain walker).
template <class P> static tg_status launch(cudaStream_t s, const P &p, const char *name) {
  if (p.units <= 0) return TG_OK;
  const int64_t blocks = blocks_for(p, name, 1);
  if (!blocks) return TG_ERR_UNSUPPORTED;
  k_walk<P, false><<<(unsigned)blocks, kBlock, smem_of<P>(), s>>>(p, 1);
  TGC_LAUNCHED(name);
  return TG_OK;
}
// S slices per unit (see the top; S == 1 is the plain walker).
template <class P> static tg_status launch_sliced(cudaStream_t s, const P &p, const char *name, int S) {
  if (S == 1 || p.units <= 0) return launch(s, p, name);
  const int64_t blocks = blocks_for(p, name, S);
  if (!blocks) return TG_ERR_UNSUPPORTED;
  k_walk<P, true><<<(unsigned)blocks, kBlock, smem_of<P>(), s>>>(p, S);
  TGC_LAUNCHED(name);
  return TG_OK;
}

// Slices for a launch of `units` units of G lanes: while the launch has fewer than kFewThreads
// threads, double S (at most 32 / G lanes, at most kMaxSlices). A function of the sizes only.
constexpr int64_t kFewThreads = (int64_t)1 << 18;
constexpr int kMaxSlices = 8;
// Cap on S for benches that compare against the one-slice walker (bench/bench_graph.cu); the
// library never changes it.
inline int g_slice_cap = kMaxSlices;
static inline int slices_for(int64_t units, int G) {
  int S = 1;
  while (S < kMaxSlices && S < g_slice_cap && G * S * 2 <= 32 && units * G * S * 2 <= kFewThreads)
    S <<= 1;
  return S;
}

// Smallest power of two >= n, capped at 32.
static inline int lanes_for(int64_t n) {
  int G = 1;
  while (G < 32 && G < n)
    G <<= 1;
  return G;
}

// Common argument checks: g sane, sizes non-negative. edge_ids: the transpose's t_edge is read.
static inline tg_status check_csr(const tgc_csr *g, const char *op, bool need_transpose, bool edge_ids = true) {
  if (!g || g->nq < 0 || g->nk < 0 || g->nnz < 0 || g->nq > INT32_MAX || g->nk > INT32_MAX) {
    tgc_set_error("%s: invalid CSR (NULL or sizes out of range)", op);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (!g->row_ptr || (g->nnz > 0 && !g->col_idx)) {
    tgc_set_error("%s: CSR row_ptr / col_idx is NULL", op);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (need_transpose && (!g->t_ptr || (g->nnz > 0 && (!g->t_row || (edge_ids && !g->t_edge))))) {
    tgc_set_error("%s: the relation's transpose is not built (cuda_relation_transpose)", op);
    return TG_ERR_INVALID_ARGUMENT;
  }
  return TG_OK;
}

static inline size_t elem_size(tg_dtype dt) { return dt == TG_F32 ? 4 : 2; }

} // namespace tgg

// Calls FN<float | __half | __nv_bfloat16>(...) for a float storage dtype (error text without
// the library's dtype names, so the bench can compile these files alone).
#define TGG_DISPATCH(dt, what, FN, ...)                                                                                \
  switch (dt) {                                                                                                        \
  case TG_F32: return FN<float>(__VA_ARGS__);                                                                          \
  case TG_F16: return FN<__half>(__VA_ARGS__);                                                                         \
  case TG_BF16: return FN<__nv_bfloat16>(__VA_ARGS__);                                                                 \
  default: tgc_set_error("%s: dtype %d has no CUDA kernel (f32, f16, bf16)", what, (int)(dt)); return TG_ERR_DTYPE;    \
  }
