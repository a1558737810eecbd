// Shared by attention_csr.cu (checks, split schedules, forward) and attention_csr_bwd.cu.
//
// Lane geometry. Every kernel gives a warp one CSR row (or transpose source) of one batch entry
// and a block of heads. A warp is ES edge slots x HPW heads x LPH lanes (lane = (slot*HPW + hw)*LPH
// + l, all powers of two, product 32). The LPH lanes of a head hold its D (and Dv) values as
// 16-byte vectors: lane l owns vectors c*LPH + l, c < NC, so a group reads a row in contiguous
// 16-byte pieces. Slot s walks edges s, s + ES, ... of the row (U at a time, for loads in
// flight); slots are combined at the end by an xor butterfly (commutative steps: every lane
// gets the same bits), so each result is a fixed function of the row.
// Split schedule. A row with more than C entries is handled in chunks of C (items) by separate
// warps that write partial results to the workspace; a merge kernel combines each row's chunks
// in chunk order. Rows with <= C entries are finished directly by one warp.
#pragma once
#include <cstdint>
#include <cstring>

#include "attention_csr.h"
#include "common.cuh"
#include "../host/philox.h"

constexpr int CA_WPB = 4;  // warps per block of the edge kernels
constexpr int CA_MINB = 5; // blocks per SM the forward is compiled for (<= 102 registers: 20 warps per SM)
constexpr float CA_LOG2E = 1.4426950408889634f, CA_LN2 = 0.6931471805599453f;

template <typename T> constexpr int ca_v() { return 16 / (int)sizeof(T); }

// ------------------------------------------------------------------ split schedule
// Device view of a schedule over ptr (row_ptr or t_ptr): count = {split rows, items}; row[r]
// the r-th split row (ascending); start[r] .. start[r + 1] its items. NULL pointers when no row
// can be split (nnz <= chunk).
struct CaSched {
  int64_t chunk;
  const int64_t *count;
  const int32_t *row;
  const int64_t *start;
};

// Host plan of a schedule: chunk C, capacities (smax split rows, imax items) and block count of
// the build kernels. Depends only on sizes.
struct CaPlan {
  int64_t n, chunk, smax, imax, nb;
};
CaPlan ca_plan(int64_t n, int64_t nnz, int64_t units);

// Bump allocator over the workspace (base NULL: only sizes it). 256-byte aligned pieces.
struct CaBump {
  char *base;
  size_t off;
  void *take(size_t bytes) {
    void *r = base ? base + off : nullptr;
    off += (bytes + 255) & ~(size_t)255;
    return r;
  }
};

struct CaSchedMem {
  int64_t *count, *blk, *start;
  int32_t *row;
};
CaSchedMem ca_sched_take(CaBump &m, const CaPlan &pl);
// Builds the schedule of ptr [n + 1] into sm (two small kernels); nothing when pl.smax == 0.
tg_status ca_sched_build(cudaStream_t st, const CaPlan &pl, const int64_t *ptr, const CaSchedMem &sm);
CaSched ca_sched_view(const CaPlan &pl, const CaSchedMem &sm);

// Item it -> (split row index r, chunk index c), by binary search over start[0 .. count[0]].
__device__ __forceinline__ int64_t ca_item_row(const CaSched &s, int64_t it) {
  int64_t lo = 0, hi = s.count[0] - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) >> 1;
    if (s.start[mid] <= it)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// ------------------------------------------------------------------ common state
// Host helpers (attention_csr.cu).
tg_status ca_check(const tgc_csr_attn_shape *sh, bool backward);
int ca_sm_count();
// Lanes per head for vectors of width V covering maxd values: a power of two in [2, 32].
int ca_lph(int maxd, int V);
// Heads per warp for LPH lanes per head and H heads.
int ca_hpw(int lph, int H);

// Attention dropout (tiga.h): weight of a kept pair inv_keep, of a dropped one 0.
struct CaDrop {
  int on;
  unsigned long long seed, call, thr;
  float inv_keep;
  int64_t Nk;
};
CaDrop ca_drop_of(const tgc_csr_attn_shape *sh);

__device__ __forceinline__ float ca_drop_w(const CaDrop &d, uint64_t R, uint64_t j) {
  uint32_t w[4];
  tg_philox4x32(d.seed, tg_attn_drop_block(R, j, (uint64_t)d.Nk), d.call | (1ull << 63), w);
  const int k = tg_attn_drop_word(R, j);
  const uint32_t x = k == 0 ? w[0] : k == 1 ? w[1] : k == 2 ? w[2] : w[3];
  return (unsigned long long)x < d.thr ? d.inv_keep : 0.f;
}

// ------------------------------------------------------------------ element access
// The 16 bytes (V elements) at p[off ..] as a raw vector, n of them valid (the rest read as 0).
// vec: 16-byte access allowed (the row length is a multiple of V and the base pointer is aligned),
// so n is >= V or <= 0. Gathered rows stay raw until used: 4 registers per vector in any dtype.
template <typename T> __device__ __forceinline__ uint4 ca_fetch(const T *__restrict__ p, int64_t off, int n, bool vec) {
  constexpr int V = ca_v<T>();
  if (vec) return n >= V ? __ldg(reinterpret_cast<const uint4 *>(p + off)) : make_uint4(0u, 0u, 0u, 0u);
  tgc_vec<T> r;
#pragma unroll
  for (int t = 0; t < V; ++t)
    r.e[t] = t < n ? p[off + t] : tgc_from_f<T>(0.f);
  uint4 u;
  memcpy(&u, &r, 16);
  return u;
}
template <typename T> __device__ __forceinline__ void ca_unpack(const uint4 &u, float (&x)[ca_v<T>()]) {
  tgc_vec<T> r;
  memcpy(&r, &u, 16);
#pragma unroll
  for (int t = 0; t < ca_v<T>(); ++t)
    x[t] = tgc_to_f(r.e[t]);
}
template <typename T>
__device__ __forceinline__ void ca_load(const T *__restrict__ p, int64_t off, int n, bool vec, float (&x)[ca_v<T>()]) {
  ca_unpack<T>(ca_fetch(p, off, n, vec), x);
}
// <a, u> and acc += w * u for a raw vector u.
template <typename T>
__device__ __forceinline__ float ca_dot_raw(const float (&a)[ca_v<T>()], const uint4 &u, float s) {
  float x[ca_v<T>()];
  ca_unpack<T>(u, x);
#pragma unroll
  for (int t = 0; t < ca_v<T>(); ++t)
    s = fmaf(a[t], x[t], s);
  return s;
}
template <typename T> __device__ __forceinline__ void ca_axpy_raw(float w, const uint4 &u, float (&acc)[ca_v<T>()]) {
  float x[ca_v<T>()];
  ca_unpack<T>(u, x);
#pragma unroll
  for (int t = 0; t < ca_v<T>(); ++t)
    acc[t] = fmaf(w, x[t], acc[t]);
}

// p[off ..] = x (n valid), or with add: p[off ..] += mul * x (read-modify-write, rounded once).
template <typename T, bool ADD>
__device__ __forceinline__ void ca_store(T *p, int64_t off, int n, bool vec, const float (&x)[ca_v<T>()],
                                         float mul = 1.f) {
  constexpr int V = ca_v<T>();
  if (vec) {
    if (n < V) return;
    tgc_vec<T> r;
    if (ADD) r = *reinterpret_cast<const tgc_vec<T> *>(p + off);
#pragma unroll
    for (int t = 0; t < V; ++t)
      r.e[t] = tgc_from_f<T>(ADD ? tgc_to_f(r.e[t]) + mul * x[t] : x[t]);
    *reinterpret_cast<tgc_vec<T> *>(p + off) = r;
    return;
  }
#pragma unroll
  for (int t = 0; t < V; ++t)
    if (t < n) p[off + t] = tgc_from_f<T>(ADD ? tgc_to_f(p[off + t]) + mul * x[t] : x[t]);
}

// Sum over the LPH lanes of a head (xor butterfly: the same bits in every lane of the group).
template <int LPH> __device__ __forceinline__ float ca_gsum(float v) {
#pragma unroll
  for (int o = LPH / 2; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Edge kernels: blocks [0, split_blocks) grid-stride over the split items, the others take one
// unit (row or source, batch entry, head block) per warp. Split blocks come first so that long
// chunks start early and overlap the short rows.
struct CaGrid {
  int hpw, es, nhb; // heads per warp, edge slots, head blocks (ceil(H / hpw))
  unsigned split_blocks, blocks;
};

// Checks csr against the shape and the device arrays a launch reads (transpose: the backward).
tg_status ca_check_csr(const tgc_csr_attn_shape *sh, const tgc_csr *csr, bool transpose);
// Grid of an edge kernel over n units (rows or sources) of B x ceil(H / hpw) warps, plus the split
// blocks when the plan can split.
tg_status ca_grid(int64_t n, int64_t B, int H, int lph, const CaPlan &pl, CaGrid &g);
// Blocks of a merge kernel (one warp per split unit and head, grid-stride); 0 when nothing splits.
unsigned ca_merge_blocks(const CaPlan &pl, int64_t B, int H);

static inline bool ca_al16(std::initializer_list<const void *> ps) {
  for (const void *p : ps)
    if ((uintptr_t)p & 15) return false;
  return true;
}
