// tg_edge_attention's lane kernels (cuda/edge_attention.h): the small case, where one lane
// evaluates a whole edge — score MLP, softmax and the value row — with no shared-memory staging and
// no per-row warp phases. Taken (lanes_ok) for f32 at hidden 16 without per-edge geometry or edge
// features (dim 0: no positions, or the geometry folded into U and V by ops/edge_attention.c),
// H <= 4 and H * F in {4, 8, 16} (the exact (H, F) pairs of kLnPairs), 16-byte aligned rows.
//
// A segment (destination row, or a source's transposed entries) belongs to a group of G lanes
// (G a power of two, lanes_ln), the groups taking the segments in the schedule's order (Args ro /
// so: a locality order, so that the groups of a warp gather overlapping rows); lane q of the group takes the segment's
// edges q, q + G, ... in order, keeping its own state in registers; the lanes' states are then merged by a fixed xor
// butterfly and lane 0 writes. Every sum's order depends on the sizes alone: bit-reproducible.
//   k_fwd_ln  per row: online softmax (m, l) and the output accumulators -> out, lse.
//   k_dst_ln  per row: (lse, D)[i] side by side for k_src_ln (the workspace's D area holds two
//             floats per row and head), p, ds, da -> dV[i]; per lane over all its rows the
//             weight sums (db1, dw2, db2) -> one partial set per block (k_wsum reduces them).
//   k_src_ln  per source (transpose): dvalues[j], dU[j].
// A segment is walked by G lanes alone: a hub row of degree d costs d / G dependent steps (the
// packed kernels give it 32 lanes), so graphs with very long rows may be faster with
// TIGA_EA_LANES=0.
#include "edge_attention.cuh"

namespace tgea {

constexpr int kLnThreads = 256, kLnHid = 16;

// The score MLP's weights (f32) in shared memory, read by every lane at the same address.
template <int H> struct LnW {
  alignas(16) float b1[kLnHid];
  alignas(16) float w2[kLnHid][H];
  float b2[H];
};
template <int H> __device__ void load_lnw(LnW<H> &w, const Args &a) {
  const float *b1 = static_cast<const float *>(a.b1), *w2 = static_cast<const float *>(a.w2),
              *b2 = static_cast<const float *>(a.b2);
  for (int t = threadIdx.x; t < kLnHid * H; t += blockDim.x)
    w.w2[t / H][t % H] = w2[t];
  if (threadIdx.x < kLnHid) w.b1[threadIdx.x] = b1 ? b1[threadIdx.x] : 0.f;
  if (threadIdx.x < H) w.b2[threadIdx.x] = b2 ? b2[threadIdx.x] : 0.f;
}

// The weights at an address the compiler cannot prove loop-invariant (an asm zero per call): read
// from shared memory at each use instead of hoisted into registers (the FR kernels: fewer registers).
template <class T> __device__ __forceinline__ const T &fresh(const T &w) {
  unsigned z;
  asm volatile("mov.u32 %0, 0;" : "=r"(z));
  return *reinterpret_cast<const T *>(reinterpret_cast<const char *>(&w) + z);
}

// A node's 16 feature-product units (NULL: zeros).
__device__ __forceinline__ void ld16(const void *base, int64_t n, float (&x)[kLnHid]) {
  if (!base) {
#pragma unroll
    for (int k = 0; k < kLnHid; ++k)
      x[k] = 0.f;
    return;
  }
  ld_n<kLnHid>(static_cast<const float *>(base) + n * kLnHid, x);
}
// The H scores of edge (j -> i): a[k] = c[k] + u[k] with c = b1 + V[i] (this order in all three
// kernels, so the backward recomputes the forward's bits), z = LeakyReLU(a), s = b2 + z . w2.
template <int H>
__device__ __forceinline__ void ln_scores(const LnW<H> &w, float slope, const float (&c)[kLnHid],
                                          const float (&u)[kLnHid], float (&a)[kLnHid], float (&s)[H]) {
#pragma unroll
  for (int h = 0; h < H; ++h)
    s[h] = w.b2[h];
#pragma unroll
  for (int k = 0; k < kLnHid; ++k) {
    a[k] = c[k] + u[k];
    const float z = leaky(a[k], slope);
#pragma unroll
    for (int h = 0; h < H; ++h)
      s[h] = fmaf(z, w.w2[k][h], s[h]);
  }
}

// A lane's walk over its edges e = e0, e0 + G, ... < e1: n = idx(e) is the gathered node (col_idx
// or the transpose's row), load(n, d) gathers its rows into d, body(e, n, d) consumes them.
// (Overlapping the next edge's gathers with this one's arithmetic — an L1 prefetch, or a second
// payload in registers — measured slower or equal: run_s11b.sh.)
template <class D, class Idx, class Load, class Body>
__device__ __forceinline__ void walk(int64_t e0, int64_t e1, int G, Idx idx, Load load, Body body) {
#pragma unroll 1
  for (int64_t e = e0; e < e1; e += G) {
    const int64_t n = idx(e);
    D d;
    load(n, d);
    body(e, n, d);
  }
}

// What a row's lane gathers per edge (the source j's U row and value row), and what a source's lane
// gathers per transposed entry (the row i's V row, dout row and (lse, D) pairs).
template <int HF> struct LnJ {
  float u[kLnHid], v[HF];
  __device__ __forceinline__ void load(const Args &a, int64_t j) {
    ld16(a.U, j, u);
    ld_n<HF>(static_cast<const float *>(a.vals) + j * HF, v);
  }
};
template <int H, int HF> struct LnI {
  float c[kLnHid], g[HF];
  float2 ld[H];
};

// MB: the minimum resident blocks a SM the registers are capped for (LnFwd::go picks it).
template <int H, int F, int MB, bool FR, bool DR>
__global__ void __launch_bounds__(kLnThreads, MB) k_fwd_ln(const Args a) {
  constexpr int HF = H * F;
  __shared__ LnW<H> w;
  load_lnw<H>(w, a);
  __syncthreads();
  const int G = a.lanes;
  const int64_t t = (int64_t)blockIdx.x * kLnThreads + threadIdx.x, rk = t / G;
  const int q = (int)(t % G);
  if (rk >= a.nq) return; // the whole group (G consecutive lanes share rk)
  const int64_t i = sched(a.ro, rk);
  float c[kLnHid], m[H], l[H], acc[HF];
  ld16(a.V, i, c);
#pragma unroll
  for (int k = 0; k < kLnHid; ++k)
    c[k] = w.b1[k] + c[k];
#pragma unroll
  for (int h = 0; h < H; ++h)
    m[h] = -INFINITY, l[h] = 0.f;
#pragma unroll
  for (int f = 0; f < HF; ++f)
    acc[f] = 0.f;
  walk<LnJ<HF>>(
      a.rp[i] + q, a.rp[i + 1], G, [&](int64_t e) { return (int64_t)a.ci[e]; },
      [&](int64_t j, LnJ<HF> &d) { d.load(a, j); },
      [&](int64_t, int64_t j, const LnJ<HF> &d) {
        float x[kLnHid], s[H];
        ln_scores<H>(FR ? fresh(w) : w, a.slope, c, d.u, x, s);
#pragma unroll
        for (int h = 0; h < H; ++h) {
          const float mn = fmaxf(m[h], s[h]);
          const float sc = mn == -INFINITY ? 1.f : exp_ftz(m[h] - mn);
          const float p = mn == -INFINITY ? 0.f : exp_ftz(s[h] - mn);
          l[h] = l[h] * sc + p;
          m[h] = mn;
          const float pw = DR ? p * a.drop.w(h, i, j) : p;
#pragma unroll
          for (int f = 0; f < F; ++f)
            acc[h * F + f] = fmaf(pw, d.v[h * F + f], acc[h * F + f] * sc);
        }
      });
  // merge the group's states (each lane's edges are a strided subset: softmax sums commute)
  xor_merge<H, F>(m, l, acc, 1, G);
  if (q != 0) return;
#pragma unroll
  for (int h = 0; h < H; ++h) {
    const float r = l[h] == 0.f ? 0.f : 1.f / l[h];
#pragma unroll
    for (int f = 0; f < F; ++f)
      acc[h * F + f] = l[h] == 0.f ? 0.f : acc[h * F + f] * r;
    a.lse[h * a.nq + i] = tgg::lse_of(m[h], l[h]);
  }
  st_n<HF>(static_cast<float *>(a.out) + (a.rmap ? (int64_t)a.rmap[i] : i) * HF, acc);
}

// Floats of one weight partial set here (dim 0, Fe 0): db1 [16], dw2 [H][16], db2 [H].
template <int H> constexpr int ln_p() { return (1 + H) * kLnHid + H; }

template <int H, int F, int MB, bool DR> __global__ void __launch_bounds__(kLnThreads, MB) k_dst_ln(const Args a) {
  constexpr int HF = H * F, P = ln_p<H>();
  __shared__ LnW<H> w;
  __shared__ float red[kLnThreads / 32][P];
  __shared__ float sdb1[kLnHid][kLnThreads]; // the lane's db1 (per row, not per edge: out of registers)
  load_lnw<H>(w, a);
  __syncthreads();
  const int G = a.lanes;
  const int64_t t0 = (int64_t)blockIdx.x * kLnThreads + threadIdx.x, stride = (int64_t)gridDim.x * kLnThreads / G;
  const int q = (int)(t0 % G);
  float dw2[kLnHid][H], db2[H];
#pragma unroll
  for (int k = 0; k < kLnHid; ++k) {
    sdb1[k][threadIdx.x] = 0.f;
#pragma unroll
    for (int h = 0; h < H; ++h)
      dw2[k][h] = 0.f;
  }
#pragma unroll
  for (int h = 0; h < H; ++h)
    db2[h] = 0.f;
#pragma unroll 1
  for (int64_t rk = t0 / G; rk < a.nq; rk += stride) { // group-uniform
    const int64_t i = sched(a.ro, rk), io = a.rmap ? (int64_t)a.rmap[i] : i;
    float g[HF], D[H], lse[H];
#pragma unroll
    for (int h = 0; h < H; ++h)
      lse[h] = a.lse_in[h * a.nq + i];
    {
      float o[HF];
      ld_n<HF>(static_cast<const float *>(a.dout) + io * HF, g);
      ld_n<HF>(static_cast<const float *>(a.fout) + io * HF, o);
      if (a.dnew && q == 0) st_n<HF>(static_cast<float *>(a.dnew) + i * HF, g); // for k_src_ln
#pragma unroll
      for (int h = 0; h < H; ++h) {
        D[h] = 0.f;
#pragma unroll
        for (int f = 0; f < F; ++f)
          D[h] = fmaf(g[h * F + f], o[h * F + f], D[h]);
        if (q == 0) reinterpret_cast<float2 *>(a.D)[i * H + h] = make_float2(lse[h], D[h]);
      }
    }
    if (!a.edges) continue;
    float c[kLnHid], rs[kLnHid];
    ld16(a.V, i, c);
#pragma unroll
    for (int k = 0; k < kLnHid; ++k) {
      c[k] = w.b1[k] + c[k];
      rs[k] = 0.f;
    }
    walk<LnJ<HF>>(
        a.rp[i] + q, a.rp[i + 1], G, [&](int64_t e) { return (int64_t)a.ci[e]; },
        [&](int64_t j, LnJ<HF> &d) { d.load(a, j); },
        [&](int64_t, int64_t j, const LnJ<HF> &d) {
          float x[kLnHid], s[H];
          ln_scores<H>(w, a.slope, c, d.u, x, s);
          float ds[H];
#pragma unroll
          for (int h = 0; h < H; ++h) {
            const float p = exp_ftz(s[h] - lse[h]);
            float dp = 0.f;
#pragma unroll
            for (int f = 0; f < F; ++f)
              dp = fmaf(g[h * F + f], d.v[h * F + f], dp);
            ds[h] = p * ((DR ? dp * a.drop.w(h, i, j) : dp) - D[h]);
            db2[h] += ds[h];
          }
#pragma unroll
          for (int k = 0; k < kLnHid; ++k) {
            float dz = 0.f;
#pragma unroll
            for (int h = 0; h < H; ++h)
              dz = fmaf(ds[h], w.w2[k][h], dz);
            // LeakyReLU'(x) as a multiplier mk (z = x mk: the forward's bits), fewer instructions
            // than predicated products; with the dropout draw's registers the predicated form is
            // the shorter (ptxas / SASS, session 20)
            const float mk = x[k] > 0.f ? 1.f : a.slope;
            if (DR)
              rs[k] += x[k] > 0.f ? dz : a.slope * dz;
            else
              rs[k] = fmaf(dz, mk, rs[k]);
            const float z = DR ? leaky(x[k], a.slope) : x[k] * mk;
#pragma unroll
            for (int h = 0; h < H; ++h)
              dw2[k][h] = fmaf(z, ds[h], dw2[k][h]);
          }
        });
#pragma unroll
    for (int k = 0; k < kLnHid; ++k)
      sdb1[k][threadIdx.x] += rs[k];
    if (a.g.V) {
      xor_sums<kLnHid>(rs, 1, G);
      if (q == 0) add_n<kLnHid>(static_cast<float *>(a.g.V) + i * kLnHid, rs);
    }
  }
  if (!a.wgrad) return; // block-uniform
  // the block's weight sums: a fixed butterfly per warp, then the warps in order
  const int wid = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31;
  float x[P];
#pragma unroll
  for (int k = 0; k < kLnHid; ++k) {
    x[k] = sdb1[k][threadIdx.x];
#pragma unroll
    for (int h = 0; h < H; ++h)
      x[kLnHid + h * kLnHid + k] = dw2[k][h];
  }
#pragma unroll
  for (int h = 0; h < H; ++h)
    x[(1 + H) * kLnHid + h] = db2[h];
#pragma unroll
  for (int p = 0; p < P; ++p) {
    float v = x[p];
    for (int o = 16; o; o >>= 1)
      v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) red[wid][p] = v;
  }
  __syncthreads();
  for (int p = threadIdx.x; p < P; p += kLnThreads) {
    float v = 0.f;
    for (int r = 0; r < kLnThreads / 32; ++r)
      v += red[r][p];
    a.part[(int64_t)blockIdx.x * a.P + p] = v;
  }
}

template <int H, int F, int MB, bool DR> __global__ void __launch_bounds__(kLnThreads, MB) k_src_ln(const Args a) {
  constexpr int HF = H * F;
  __shared__ LnW<H> w;
  load_lnw<H>(w, a);
  __syncthreads();
  const int G = a.slanes;
  const int64_t t = (int64_t)blockIdx.x * kLnThreads + threadIdx.x, rk = t / G;
  const int q = (int)(t % G);
  if (rk >= a.nk) return;
  const int64_t j = sched(a.so, rk);
  const int64_t e1 = a.tp[j + 1];
  if (a.tp[j] == e1) { // group-uniform; nothing to add, but dU over U (dvalues over values) is 0
    if (a.g.U_over && q == 0) st_zero<kLnHid>(static_cast<float *>(a.g.U) + j * kLnHid);
    if (a.g.values_over && q == 0) st_zero<HF>(static_cast<float *>(a.g.values) + j * HF);
    return;
  }
  float u[kLnHid], vj[HF], dU[kLnHid], dv[HF];
  ld16(a.U, j, u);
  ld_n<HF>(static_cast<const float *>(a.vals) + j * HF, vj);
#pragma unroll
  for (int k = 0; k < kLnHid; ++k)
    dU[k] = 0.f;
#pragma unroll
  for (int f = 0; f < HF; ++f)
    dv[f] = 0.f;
  const float *dout = static_cast<const float *>(a.dnew ? a.dnew : a.dout); // dnew: k_dst_ln's copy
  const float2 *dp2 = reinterpret_cast<const float2 *>(a.D);
  walk<LnI<H, HF>>(
      a.tp[j] + q, e1, G, [&](int64_t e) { return (int64_t)a.tr[e]; },
      [&](int64_t i, LnI<H, HF> &d) {
        ld16(a.V, i, d.c);
        ld_n<HF>(dout + i * HF, d.g);
    // (lse, D) of (i, h) side by side (k_dst_ln's record: one sector per edge); lse alone when
    // no da is wanted (k_dst_ln did not run)
#pragma unroll
        for (int h = 0; h < H; ++h)
          d.ld[h] = a.srcda ? dp2[i * H + h] : make_float2(a.lse_in[h * a.nq + i], 0.f);
      },
      [&](int64_t, int64_t i, const LnI<H, HF> &d) {
        float c[kLnHid], x[kLnHid], s[H];
#pragma unroll
        for (int k = 0; k < kLnHid; ++k)
          c[k] = w.b1[k] + d.c[k];
        ln_scores<H>(w, a.slope, c, u, x, s);
        float ds[H];
#pragma unroll
        for (int h = 0; h < H; ++h) {
          const float p = exp_ftz(s[h] - d.ld[h].x), wd = DR ? a.drop.w(h, i, j) : 1.f, pw = p * wd;
          float dp = 0.f;
#pragma unroll
          for (int f = 0; f < F; ++f) {
            dv[h * F + f] = fmaf(pw, d.g[h * F + f], dv[h * F + f]);
            dp = fmaf(d.g[h * F + f], vj[h * F + f], dp);
          }
          ds[h] = a.srcda ? p * (dp * wd - d.ld[h].y) : 0.f;
        }
        if (a.srcda)
#pragma unroll
          for (int k = 0; k < kLnHid; ++k) {
            float dz = 0.f;
#pragma unroll
            for (int h = 0; h < H; ++h)
              dz = fmaf(ds[h], w.w2[k][h], dz);
            if (DR) // as in k_dst_ln
              dU[k] += x[k] > 0.f ? dz : a.slope * dz;
            else
              dU[k] = fmaf(dz, x[k] > 0.f ? 1.f : a.slope, dU[k]);
          }
      });
  if (a.g.values) xor_sums<HF>(dv, 1, G);
  if (a.g.U) xor_sums<kLnHid>(dU, 1, G);
  if (q != 0) return;
  if (a.g.values) { // over values itself (values_over): read above, before the sums
    float *gv = static_cast<float *>(a.g.values) + j * HF;
    if (a.g.values_over)
      st_n<HF>(gv, dv);
    else
      add_n<HF>(gv, dv);
  }
  if (a.g.U) { // over U itself (U_over): every lane of the segment read U[j] before the sums above
    float *du = static_cast<float *>(a.g.U) + j * kLnHid;
    if (a.g.U_over)
      st_n<kLnHid>(du, dU);
    else
      add_n<kLnHid>(du, dU);
  }
}

// ---------------------------------------------------------------- host side
// The (H, F) pairs built: the head loop and the value row are unrolled at compile time.
#define TGEA_LN_PAIRS(X) X(1, 4) X(1, 8) X(1, 16) X(2, 2) X(2, 4) X(2, 8) X(4, 1) X(4, 2) X(4, 4)

bool lanes_ok(const tgc_edge_attn *ea, const Args &a) {
  if (g_kernels != 0 || ea->lanes < 0 || a.dt != TG_F32 || a.hid != kLnHid || a.dim != 0 || a.Fe != 0 || !a.gvec ||
      !a.vvec)
    return false;
#define TGEA_LN_OK(h, f)                                                                                               \
  if (a.H == h && a.F == f) return true;
  TGEA_LN_PAIRS(TGEA_LN_OK)
#undef TGEA_LN_OK
  return false;
}

// Lanes per segment for n segments: the least power of two up to 8 with n * G >= 2^17 threads at
// H 1, 2^16 at H > 1 (run_s10a.sh, step ms at G = 1 / 2 / 4 / 8: 100k H 1 0.525 / 0.474 / 0.504 /
// 0.558, H 4 0.702 / 0.733 / 0.748 / 0.853; 400k H 1 1.434 / 1.503 / 1.595 / 1.728, H 4 2.413 /
// 2.623 / 2.769 / 3.081: fewer lanes per row are better as soon as the rows fill the GPU, more
// help small graphs), or the forced count (TIGA_EA_LANES). A function of the sizes alone.
int lanes_ln(const tgc_edge_attn *ea, int64_t n) {
  if (ea->lanes > 0) return ea->lanes < 32 ? ea->lanes : 32;
  const int64_t want = ea->H == 1 ? (int64_t)1 << 17 : (int64_t)1 << 16;
  int G = 1;
  while (G < 8 && n * G < want)
    G *= 2;
  return G;
}

static unsigned ln_blocks(int64_t n, int G) { return (unsigned)((n * G + kLnThreads - 1) / kLnThreads); }

// K::go<H, F> launches one kernel family's instance for the call's (H, F).
// The forward's register cap: 3 blocks a SM at H 1 (80 registers), 2 at H > 1 (128; k_fwd_ln<4, 2>
// spilled 224 B there with its dropout code, 40 B without), except k_fwd_ln<4, 2> below 2^18 rows:
// one block (180 registers with the dropout code, 141 without; no spill).
// Measured (run_s12g.sh, step ms two blocks / one): 100k H 4 0.457 / 0.423 and 0.452 / 0.410; 400k
// 1.569 / 1.583 and 1.550 / 1.610 — where the gathered rows stay in L2 the spills cost more than
// the occupancy gains; at 400k the misses want the second block.
// Each kernel is built with and without the dropout code (DR): without it (keep 0 or 1) the Philox
// draw does not hold registers — ptxas, sm_90, with / without: k_src_ln<1, 8> at two blocks 128
// registers + 176 B spilled / 122 unspilled, k_src_ln<4, 2> 248 / 192, k_fwd_ln<4, 2> at two blocks
// 224 / 40 B spilled; steps at 400k 0.883 -> 0.86 ms (H 1), 1.39 -> 1.31 (H 4) (run_s15a.sh).
template <int H, int F, int MB, bool FR> static void fwd_go(cudaStream_t s, unsigned b, const Args &a) {
  if (a.drop.on)
    k_fwd_ln<H, F, MB, FR, true><<<b, kLnThreads, 0, s>>>(a);
  else
    k_fwd_ln<H, F, MB, FR, false><<<b, kLnThreads, 0, s>>>(a);
}
template <int H, int F, int MB> static void dst_go(cudaStream_t s, unsigned b, const Args &a) {
  if (a.drop.on)
    k_dst_ln<H, F, MB, true><<<b, kLnThreads, 0, s>>>(a);
  else
    k_dst_ln<H, F, MB, false><<<b, kLnThreads, 0, s>>>(a);
}
template <int H, int F, int MB> static void src_go(cudaStream_t s, unsigned b, const Args &a) {
  if (a.drop.on)
    k_src_ln<H, F, MB, true><<<b, kLnThreads, 0, s>>>(a);
  else
    k_src_ln<H, F, MB, false><<<b, kLnThreads, 0, s>>>(a);
}

// At (4, 2) from 2^18 rows the forward reads the score weights from shared memory at each edge (FR,
// fresh) at two blocks a SM (118 registers): session 15 measured that rule for all three kernels,
// the step at 400k 1.31 -> 1.245 ms (run_s15a.sh; at 100k 0.43 -> 0.46, run_s15b.sh, where the
// rows stay in L2 and the spills cost more; at H 1 no faster). Since the edge loops were trimmed
// (exp_ftz, LeakyReLU's derivative as a multiplier; session 20) the two backward passes are faster
// with their weights held in registers at one block a SM (the rule's destination pass 382 -> 365
// instructions an edge, its source pass 449 with 124 B spilled at two blocks -> 373 unspilled at
// 202 registers): 400k H 4 step 0.992 / 1.009 -> 0.929 / 0.933 ms, k_dst_ln 306.8 -> 298.8 us,
// k_src_ln 330.8 -> 274.9 (run_s20b.sh, through temporary switches). Below 2^18 rows, and for the
// other (H, F) pairs, the caps below.
template <int H, int F> constexpr bool ln_big_rule() { return H == 4 && F == 2; }
int ln_big_of(const tgc_edge_attn *ea, int64_t nq) { return ea->big ? ea->big > 0 : nq >= ((int64_t)1 << 18); }
static bool ln_big(const Args &a) { return a.big != 0; }
struct LnFwd {
  template <int H, int F> static void go(cudaStream_t s, unsigned b, const Args &a) {
    if constexpr (ln_big_rule<H, F>()) {
      if (ln_big(a)) {
        fwd_go<H, F, 2, true>(s, b, a);
        return;
      }
    }
    if constexpr (H == 4 && F == 2) {
      if (a.nq < ((int64_t)1 << 18)) {
        fwd_go<H, F, 1, false>(s, b, a);
        return;
      }
    }
    fwd_go<H, F, H == 1 ? 3 : 2, false>(s, b, a);
  }
};
struct LnDst {
  template <int H, int F> static void go(cudaStream_t s, unsigned b, const Args &a) {
    dst_go<H, F, H == 1 ? 2 : 1>(s, b, a);
  }
};
struct LnSrc {
  template <int H, int F> static void go(cudaStream_t s, unsigned b, const Args &a) {
    src_go<H, F, H == 1 ? 2 : 1>(s, b, a);
  }
};
template <class K> static tg_status launch_ln(cudaStream_t s, unsigned blocks, const Args &a, const char *what) {
#define X(h, f)                                                                                                        \
  if (a.H == h && a.F == f)                                                                                            \
    K::template go<h, f>(s, blocks, a);                                                                                \
  else
  TGEA_LN_PAIRS(X) {
    tgc_set_error("edge attention: no lane kernel for H %lld, F %lld", (long long)a.H, (long long)a.F);
    return TG_ERR_UNSUPPORTED;
  }
#undef X
  TGC_LAUNCHED(what);
  return TG_OK;
}

tg_status forward_lanes(cudaStream_t s, const Args &a) {
  return launch_ln<LnFwd>(s, ln_blocks(a.nq, a.lanes), a, "edge_attention_forward");
}

tg_status dst_lanes(cudaStream_t s, Args &a) {
  // grid-stride over the rows: at most dst_blocks(nq) blocks, the partial sets the workspace holds
  const int64_t want = ln_blocks(a.nq, a.lanes), cap = dst_blocks(a.nq);
  a.nblk = (int)(want < cap ? want : cap);
  return launch_ln<LnDst>(s, (unsigned)a.nblk, a, "edge_attention_backward_dst");
}

tg_status src_lanes(cudaStream_t s, const Args &a) {
  return launch_ln<LnSrc>(s, ln_blocks(a.nk, a.slanes), a, "edge_attention_backward_src");
}

} // namespace tgea
