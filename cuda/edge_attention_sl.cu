// tg_edge_attention's slice kernels (cuda/edge_attention.h): f32 at hidden 64 without edge
// features, H in {1, 2, 4}, H * F a multiple of S, 16-byte aligned rows (slice_of), where S lanes
// share each edge and lane k owns a slice of it:
//   hidden units [UL k, UL (k + 1)), UL = 64 / S, with their rows of w2 and of w1's geometry block
//   and b1 in registers; value columns [FQ k, FQ (k + 1)) of the [H * F] row, FQ = H F / S, all of
//   head hq = FQ k / F (H divides S).
// Per edge the S lanes gather the source's U row (256 bytes) and value row with one or two 16-byte
// loads a lane, contiguous across the lanes, and evaluate the score MLP on their units; the H
// partial scores are summed over the S lanes by a fixed butterfly (the same bits on every lane).
// The warp-per-row kernels (cuda/edge_attention.cu, _bwd.cu) have each lane gather a whole 256-byte
// U row for its edge and stash pre-activations in shared memory for per-unit phases. S is 8 at
// every H (run_s11g.sh: 16 lanes an edge, half the registers a lane, was slower at H 1 and 4).
//
// A segment (destination row, or a source's transposed entries) belongs to a group of G slices
// (sl_groups), the groups taking segments in the schedule's order (Args ro / so); slice q of the
// group takes the segment's edges q, q + G, ... in order, and the group's states are merged by a
// fixed xor butterfly over slices. Every sum's order depends on the sizes alone: bit-reproducible.
//   k_fwd_sl  per row: online softmax of the lane's head and its value columns -> out, lse.
//   k_dst_sl  per row: (lse, D) pairs for k_src_sl (the workspace's D area), p, ds, da -> dV[i],
//             dpd[i]; per lane over its rows the weight sums of its units (dwp, db1, dw2, db2) ->
//             one partial set per block (k_wsum reduces them).
//   k_src_sl  per source (transpose): dvalues[j], dU[j], dps[j].
#include "edge_attention.cuh"

namespace tgea {

// Threads a block, hidden width, S. 128 threads: k_src_sl takes ~145 registers, so 256-thread
// blocks fit one a SM (8 warps) where 128-thread ones fit three (12 warps).
constexpr int kSlThreads = 128, kSlHid = 64, kSlLanes = 8;

// The lane's slice of the score MLP's weights, in registers.
template <int H, int UL> struct SlW { float b1[UL], w2[UL][H], wp[kMaxDim][UL], b2[H]; };
template <int H, int UL> __device__ __forceinline__ void load_slw(SlW<H, UL> &w, const Args &a, int dim, int k) {
  const float *b1 = static_cast<const float *>(a.b1), *w2 = static_cast<const float *>(a.w2),
              *b2 = static_cast<const float *>(a.b2), *wp = static_cast<const float *>(a.wp);
#pragma unroll
  for (int u = 0; u < UL; ++u) {
    const int n = UL * k + u;
    w.b1[u] = b1 ? __ldg(b1 + n) : 0.f;
#pragma unroll
    for (int h = 0; h < H; ++h)
      w.w2[u][h] = __ldg(w2 + n * H + h);
#pragma unroll
    for (int d = 0; d < kMaxDim; ++d)
      w.wp[d][u] = d < dim && wp ? __ldg(wp + d * kSlHid + n) : 0.f;
  }
#pragma unroll
  for (int h = 0; h < H; ++h)
    w.b2[h] = b2 ? __ldg(b2 + h) : 0.f;
}

// The lane's UL units of node n's [*, 64] row (NULL: zeros).
template <int UL> __device__ __forceinline__ void ld_units(const void *base, int64_t n, int k, float (&x)[UL]) {
  if (!base) {
#pragma unroll
    for (int u = 0; u < UL; ++u)
      x[u] = 0.f;
    return;
  }
  ld_n<UL>(static_cast<const float *>(base) + n * kSlHid + UL * k, x);
}

// Edge (j -> i): the lane's pre-activations a[u] = (c[u] + U[j, u]) + sum_d wp[d, u] dp[d] with
// c = b1 + V[i] and dp = ps[j] - pd[i] (this order in all three kernels, so the backward recomputes
// the forward's bits), and the H scores s = b2 + slice sum of sum_u LeakyReLU(a[u]) w2[u, :].
template <int H, int S, int UL>
__device__ __forceinline__ void sl_scores(const SlW<H, UL> &w, const Args &a, int dim, const float (&c)[UL],
                                          const float (&u)[UL], const float (&dp)[kMaxDim], float (&x)[UL],
                                          float (&s)[H]) {
#pragma unroll
  for (int h = 0; h < H; ++h)
    s[h] = 0.f;
#pragma unroll
  for (int q = 0; q < UL; ++q) {
    x[q] = c[q] + u[q];
#pragma unroll
    for (int d = 0; d < kMaxDim; ++d)
      if (d < dim) x[q] = fmaf(w.wp[d][q], dp[d], x[q]);
    const float z = leaky(x[q], a.slope);
#pragma unroll
    for (int h = 0; h < H; ++h)
      s[h] = fmaf(z, w.w2[q][h], s[h]);
  }
  xor_sums<H>(s, 1, S);
#pragma unroll
  for (int h = 0; h < H; ++h)
    s[h] += w.b2[h];
}

// acc[d] += wp[d, the lane's units] . x for d < dim: a position gradient's share formed from per-unit
// sums of da after an edge loop (x = rs in the destination pass, dU in the source pass).
template <int H, int UL>
__device__ __forceinline__ void wp_dot(const SlW<H, UL> &w, int dim, const float (&x)[UL], float (&acc)[kMaxDim]) {
#pragma unroll
  for (int d = 0; d < kMaxDim; ++d)
    if (d < dim)
#pragma unroll
      for (int u = 0; u < UL; ++u)
        acc[d] = fmaf(w.wp[d][u], x[u], acc[d]);
}

// x[hq] of a per-head array (hq is a lane constant; H is small).
template <int H> __device__ __forceinline__ float pick(const float (&x)[H], int hq) {
  float v = x[0];
#pragma unroll
  for (int h = 1; h < H; ++h)
    v = hq == h ? x[h] : v;
  return v;
}
// Position of node n (zeros without geometry).
__device__ __forceinline__ void ld_pos(int dim, const float *p, int64_t n, float (&x)[kMaxDim]) {
#pragma unroll
  for (int d = 0; d < kMaxDim; ++d)
    x[d] = d < dim && p ? __ldg(p + n * dim + d) : 0.f;
}

// A row's edge to source j, for the lane: j's value columns v, the displacement dp = ps[j] - pdi,
// the pre-activations x of its units and the H scores s (vals: the lane's first column).
template <int H, int S, int UL, int FQ>
__device__ __forceinline__ void sl_edge(const Args &a, int dim, const SlW<H, UL> &w, const float (&c)[UL],
                                        const float (&pdi)[kMaxDim], const float *vals, int64_t j, int k,
                                        float (&v)[FQ], float (&dp)[kMaxDim], float (&x)[UL], float (&s)[H]) {
  float u[UL];
  ld_units<UL>(a.U, j, k, u);
  ld_n<FQ>(vals + j * a.HF, v);
  ld_pos(dim, a.ps, j, dp);
#pragma unroll
  for (int d = 0; d < kMaxDim; ++d)
    dp[d] -= pdi[d];
  sl_scores<H, S, UL>(w, a, dim, c, u, dp, x, s);
}

template <int H, int S, int FQ, int MB, bool DR, bool GEO>
__global__ void __launch_bounds__(kSlThreads, MB) k_fwd_sl(const Args a) {
  constexpr int UL = kSlHid / S;
  const int dim = GEO ? a.dim : 0; // GEO false: compiled without the geometry code
  const int k = (int)(threadIdx.x % S), hq = (int)(k * FQ / a.F);
  const int G = a.lanes;
  const int64_t t = ((int64_t)blockIdx.x * kSlThreads + threadIdx.x) / S, rk = t / G;
  const int q = (int)(t % G);
  if (rk >= a.nq) return; // the whole group (G consecutive slices share rk)
  const int64_t i = sched(a.ro, rk), HF = a.HF;
  SlW<H, UL> w;
  load_slw<H, UL>(w, a, dim, k);
  float c[UL], pdi[kMaxDim], acc[FQ], m[1] = {-INFINITY}, l[1] = {0.f};
  ld_units<UL>(a.V, i, k, c);
#pragma unroll
  for (int u = 0; u < UL; ++u)
    c[u] = w.b1[u] + c[u];
  ld_pos(dim, a.pd, i, pdi);
#pragma unroll
  for (int f = 0; f < FQ; ++f)
    acc[f] = 0.f;
  const float *vals = static_cast<const float *>(a.vals) + k * FQ;
  const int64_t e1 = a.rp[i + 1];
#pragma unroll 1
  for (int64_t e = a.rp[i] + q; e < e1; e += G) {
    const int64_t j = a.ci[e];
    float x[UL], s[H], v[FQ], dp[kMaxDim];
    sl_edge<H, S, UL, FQ>(a, dim, w, c, pdi, vals, j, k, v, dp, x, s);
    const float sh = pick<H>(s, hq);
    const float mn = fmaxf(m[0], sh);
    const float sc = mn == -INFINITY ? 1.f : exp_ftz(m[0] - mn);
    const float p = mn == -INFINITY ? 0.f : exp_ftz(sh - mn);
    l[0] = l[0] * sc + p;
    m[0] = mn;
    const float pw = DR ? p * a.drop.w(hq, i, j) : p;
#pragma unroll
    for (int f = 0; f < FQ; ++f)
      acc[f] = fmaf(pw, v[f], acc[f] * sc);
  }
  // merge the group's states (each slice's edges are a strided subset: softmax sums commute)
  xor_merge<1, FQ>(m, l, acc, S, S * G);
  if (q != 0) return;
  const float r = l[0] == 0.f ? 0.f : 1.f / l[0];
#pragma unroll
  for (int f = 0; f < FQ; ++f)
    acc[f] = l[0] == 0.f ? 0.f : acc[f] * r;
  if ((k * FQ) % a.F == 0) a.lse[hq * a.nq + i] = tgg::lse_of(m[0], l[0]); // the head's first lane
  st_n<FQ>(static_cast<float *>(a.out) + i * HF + k * FQ, acc);
}

template <int H, int S, int FQ, int MB, bool DR, bool GEO>
__global__ void __launch_bounds__(kSlThreads, MB) k_dst_sl(const Args a) {
  constexpr int UL = kSlHid / S;
  const int dim = GEO ? a.dim : 0; // GEO false: compiled without the geometry code
  __shared__ float red[kSlThreads / 32][(kMaxDim + 1 + H) * kSlHid + H];
  const int k = (int)(threadIdx.x % S), hq = (int)(k * FQ / a.F);
  const int G = a.lanes;
  const int64_t t0 = ((int64_t)blockIdx.x * kSlThreads + threadIdx.x) / S,
                stride = (int64_t)gridDim.x * (kSlThreads / S) / G, HF = a.HF;
  const int q = (int)(t0 % G);
  SlW<H, UL> w;
  load_slw<H, UL>(w, a, dim, k);
  float dw2[UL][H], db1[UL], dwp[kMaxDim][UL], db2[H];
#pragma unroll
  for (int u = 0; u < UL; ++u) {
    db1[u] = 0.f;
#pragma unroll
    for (int h = 0; h < H; ++h)
      dw2[u][h] = 0.f;
#pragma unroll
    for (int d = 0; d < kMaxDim; ++d)
      dwp[d][u] = 0.f;
  }
#pragma unroll
  for (int h = 0; h < H; ++h)
    db2[h] = 0.f;
  const float *vals = static_cast<const float *>(a.vals) + k * FQ;
#pragma unroll 1
  for (int64_t rk = t0 / G; rk < a.nq; rk += stride) { // group-uniform
    const int64_t i = sched(a.ro, rk);
    float g[FQ], D[H], lse[H];
#pragma unroll
    for (int h = 0; h < H; ++h)
      lse[h] = a.lse_in[h * a.nq + i];
    {
      float o[FQ];
      ld_n<FQ>(static_cast<const float *>(a.dout) + i * HF + k * FQ, g);
      ld_n<FQ>(static_cast<const float *>(a.fout) + i * HF + k * FQ, o);
      float d = 0.f;
#pragma unroll
      for (int f = 0; f < FQ; ++f)
        d = fmaf(g[f], o[f], d);
#pragma unroll
      for (int h = 0; h < H; ++h)
        D[h] = h == hq ? d : 0.f;
      xor_sums<H>(D, 1, S);
      if (q == 0 && k == 0)
#pragma unroll
        for (int h = 0; h < H; ++h)
          reinterpret_cast<float2 *>(a.D)[i * H + h] = make_float2(lse[h], D[h]);
    }
    if (!a.edges) continue;
    float c[UL], rs[UL], pdi[kMaxDim], rpd[kMaxDim];
    ld_units<UL>(a.V, i, k, c);
#pragma unroll
    for (int u = 0; u < UL; ++u) {
      c[u] = w.b1[u] + c[u];
      rs[u] = 0.f;
    }
    ld_pos(dim, a.pd, i, pdi);
#pragma unroll
    for (int d = 0; d < kMaxDim; ++d)
      rpd[d] = 0.f;
    const int64_t e1 = a.rp[i + 1];
#pragma unroll 1
    for (int64_t e = a.rp[i] + q; e < e1; e += G) {
      const int64_t j = a.ci[e];
      float x[UL], s[H], v[FQ], dp[kMaxDim], dpv[H];
      sl_edge<H, S, UL, FQ>(a, dim, w, c, pdi, vals, j, k, v, dp, x, s);
      float d = 0.f;
#pragma unroll
      for (int f = 0; f < FQ; ++f)
        d = fmaf(g[f], v[f], d);
      if (DR) d *= a.drop.w(hq, i, j);
#pragma unroll
      for (int h = 0; h < H; ++h)
        dpv[h] = h == hq ? d : 0.f;
      xor_sums<H>(dpv, 1, S);
      float ds[H];
#pragma unroll
      for (int h = 0; h < H; ++h) {
        ds[h] = exp_ftz(s[h] - lse[h]) * (dpv[h] - D[h]);
        db2[h] += ds[h];
      }
#pragma unroll
      for (int uu = 0; uu < UL; ++uu) {
        float dz = 0.f;
#pragma unroll
        for (int h = 0; h < H; ++h)
          dz = fmaf(ds[h], w.w2[uu][h], dz);
        const float da = x[uu] > 0.f ? dz : a.slope * dz, z = leaky(x[uu], a.slope);
        rs[uu] += da;
#pragma unroll
        for (int h = 0; h < H; ++h)
          dw2[uu][h] = fmaf(z, ds[h], dw2[uu][h]);
#pragma unroll
        for (int dd = 0; dd < kMaxDim; ++dd)
          if (dd < dim) dwp[dd][uu] = fmaf(dp[dd], da, dwp[dd][uu]);
      }
    }
    // dpd[i]'s share of the lane: sum over its edges and units of wp[d, u] da = wp[d, :] . rs (per
    // row, not per edge)
    wp_dot<H, UL>(w, dim, rs, rpd);
#pragma unroll
    for (int u = 0; u < UL; ++u)
      db1[u] += rs[u];
    if (a.g.V) {
      xor_sums<UL>(rs, S, S * G);
      if (q == 0) add_n<UL>(static_cast<float *>(a.g.V) + i * kSlHid + UL * k, rs);
    }
    if (a.g.pd && dim > 0) { // dpd[i] -= sum over the row's edges and all units of wp[d, :] da
      xor_sums<kMaxDim>(rpd, 1, S);
      xor_sums<kMaxDim>(rpd, S, S * G);
      if (q == 0 && k == 0)
        for (int dd = 0; dd < dim; ++dd)
          a.g.pd[i * dim + dd] -= rpd[dd];
    }
  }
  if (!a.wgrad) return; // block-uniform
  // the block's weight sums: per warp a fixed butterfly over its slices (lane k of each: the same
  // units), then the warps in order; db2 from the slices' lane 0 (all S lanes hold it)
  const int wid = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31;
  for (int o = S; o < 32; o <<= 1) {
#pragma unroll
    for (int u = 0; u < UL; ++u) {
      db1[u] += __shfl_xor_sync(0xffffffffu, db1[u], o);
#pragma unroll
      for (int h = 0; h < H; ++h)
        dw2[u][h] += __shfl_xor_sync(0xffffffffu, dw2[u][h], o);
#pragma unroll
      for (int d = 0; d < kMaxDim; ++d)
        if (d < dim) dwp[d][u] += __shfl_xor_sync(0xffffffffu, dwp[d][u], o);
    }
#pragma unroll
    for (int h = 0; h < H; ++h)
      db2[h] += __shfl_xor_sync(0xffffffffu, db2[h], o);
  }
  // partial layout (floats): dwp [dim][64], db1 [64], dw2 [H][64], db2 [H]
  const int ob1 = dim * kSlHid, ow2 = ob1 + kSlHid, ob2 = ow2 + H * kSlHid;
  if (lane < S) {
#pragma unroll
    for (int u = 0; u < UL; ++u) {
      const int n = UL * lane + u;
      red[wid][ob1 + n] = db1[u];
#pragma unroll
      for (int h = 0; h < H; ++h)
        red[wid][ow2 + h * kSlHid + n] = dw2[u][h];
#pragma unroll
      for (int d = 0; d < kMaxDim; ++d)
        if (d < dim) red[wid][d * kSlHid + n] = dwp[d][u];
    }
    if (lane == 0)
#pragma unroll
      for (int h = 0; h < H; ++h)
        red[wid][ob2 + h] = db2[h];
  }
  __syncthreads();
  for (int p = threadIdx.x; p < a.P; p += kSlThreads) {
    float v = 0.f;
    for (int r = 0; r < kSlThreads / 32; ++r)
      v += red[r][p];
    a.part[(int64_t)blockIdx.x * a.P + p] = v;
  }
}

template <int H, int S, int FQ, int MB, bool DR, bool GEO>
__global__ void __launch_bounds__(kSlThreads, MB) k_src_sl(const Args a) {
  constexpr int UL = kSlHid / S;
  const int dim = GEO ? a.dim : 0; // GEO false: compiled without the geometry code
  const int k = (int)(threadIdx.x % S), hq = (int)(k * FQ / a.F);
  const int G = a.slanes;
  const int64_t t = ((int64_t)blockIdx.x * kSlThreads + threadIdx.x) / S, rk = t / G, HF = a.HF;
  const int q = (int)(t % G);
  if (rk >= a.nk) return;
  const int64_t j = sched(a.so, rk);
  const int64_t e1 = a.tp[j + 1];
  if (a.tp[j] == e1) { // group-uniform; nothing to add, but dU over U is 0
    if (a.g.U_over && q == 0) st_zero<UL>(static_cast<float *>(a.g.U) + j * kSlHid + UL * k);
    return;
  }
  SlW<H, UL> w;
  load_slw<H, UL>(w, a, dim, k);
  float u[UL], vj[FQ], psj[kMaxDim], dU[UL], dv[FQ], dps[kMaxDim];
  ld_units<UL>(a.U, j, k, u);
  ld_n<FQ>(static_cast<const float *>(a.vals) + j * HF + k * FQ, vj);
  ld_pos(dim, a.ps, j, psj);
#pragma unroll
  for (int uu = 0; uu < UL; ++uu)
    dU[uu] = 0.f;
#pragma unroll
  for (int f = 0; f < FQ; ++f)
    dv[f] = 0.f;
#pragma unroll
  for (int d = 0; d < kMaxDim; ++d)
    dps[d] = 0.f;
  const float *dout = static_cast<const float *>(a.dout) + k * FQ;
  const float2 *ld2 = reinterpret_cast<const float2 *>(a.D);
#pragma unroll 1
  for (int64_t e = a.tp[j] + q; e < e1; e += G) {
    const int64_t i = a.tr[e];
    float c[UL], x[UL], s[H], g[FQ], dp[kMaxDim];
    ld_units<UL>(a.V, i, k, c);
#pragma unroll
    for (int uu = 0; uu < UL; ++uu)
      c[uu] = w.b1[uu] + c[uu];
    ld_n<FQ>(dout + i * HF, g);
    ld_pos(dim, a.pd, i, dp);
#pragma unroll
    for (int d = 0; d < kMaxDim; ++d)
      dp[d] = psj[d] - dp[d];
    // (lse, D) of (i, h) side by side (k_dst_sl's record); lse alone when no da is wanted (k_dst_sl
    // did not run)
    float2 ld[H];
#pragma unroll
    for (int h = 0; h < H; ++h)
      ld[h] = a.srcda ? ld2[i * H + h] : make_float2(a.lse_in[h * a.nq + i], 0.f);
    sl_scores<H, S, UL>(w, a, dim, c, u, dp, x, s);
    float p[H];
#pragma unroll
    for (int h = 0; h < H; ++h)
      p[h] = exp_ftz(s[h] - ld[h].x);
    const float wd = DR ? a.drop.w(hq, i, j) : 1.f, pw = pick<H>(p, hq) * wd;
    float d = 0.f;
#pragma unroll
    for (int f = 0; f < FQ; ++f) {
      dv[f] = fmaf(pw, g[f], dv[f]);
      d = fmaf(g[f], vj[f], d);
    }
    if (a.srcda) {
      float dpv[H];
      d *= wd;
#pragma unroll
      for (int h = 0; h < H; ++h)
        dpv[h] = h == hq ? d : 0.f;
      xor_sums<H>(dpv, 1, S);
      float ds[H];
#pragma unroll
      for (int h = 0; h < H; ++h)
        ds[h] = p[h] * (dpv[h] - ld[h].y);
#pragma unroll
      for (int uu = 0; uu < UL; ++uu) {
        float dz = 0.f;
#pragma unroll
        for (int h = 0; h < H; ++h)
          dz = fmaf(ds[h], w.w2[uu][h], dz);
        const float da = x[uu] > 0.f ? dz : a.slope * dz;
        dU[uu] += da;
      }
    }
  }
  if (a.g.ps && dim > 0) // dps[j]'s share of the lane: wp[d, :] . dU (per source, not per edge)
    wp_dot<H, UL>(w, dim, dU, dps);
  if (a.g.values) xor_sums<FQ>(dv, S, S * G);
  if (a.g.U) xor_sums<UL>(dU, S, S * G);
  if (a.g.ps && dim > 0) {
    xor_sums<kMaxDim>(dps, 1, S);
    xor_sums<kMaxDim>(dps, S, S * G);
  }
  if (q != 0) return;
  if (a.g.values) add_n<FQ>(static_cast<float *>(a.g.values) + j * HF + k * FQ, dv);
  if (a.g.U) { // over U itself (U_over): every lane of the group read U[j] before the sums above
    float *du = static_cast<float *>(a.g.U) + j * kSlHid + UL * k;
    if (a.g.U_over)
      st_n<UL>(du, dU);
    else
      add_n<UL>(du, dU);
  }
  if (a.g.ps && k == 0)
    for (int dd = 0; dd < dim; ++dd)
      a.g.ps[j * dim + dd] += dps[dd];
}

// ---------------------------------------------------------------- host side
// The (H, S, FQ) triples built: S 8 at H 1, 2, 4 and FQ = H F / 8 in 1, 2, 4, 8 (H * F in 8, 16, 32,
// 64). (S 16, fewer registers a lane, measured slower at H 1 and H 4, run_s11g.sh.)
// clang-format off
#define TGEA_SL_TRIPLES(X) \
  X(1, 8, 1) X(1, 8, 2) X(1, 8, 4) X(1, 8, 8) \
  X(2, 8, 1) X(2, 8, 2) X(2, 8, 4) X(2, 8, 8) \
  X(4, 8, 1) X(4, 8, 2) X(4, 8, 4) X(4, 8, 8)
// clang-format on

// Lanes an edge for the call (0: the slice kernels do not take it).
int slice_of(const tgc_edge_attn *ea, const Args &a) {
  if (g_kernels != 0 || ea->lanes < 0 || ea->slice < 0 || a.dt != TG_F32 || a.hid != kSlHid || a.Fe != 0 || !a.gvec ||
      !a.vvec || (a.H != 1 && a.H != 2 && a.H != 4))
    return 0;
  constexpr int S = kSlLanes;
  if (a.HF % S != 0) return 0;
  const int64_t FQ = a.HF / S;
#define TGEA_SL_OK(h, s, fq)                                                                                           \
  if (a.H == h && S == s && FQ == fq) return S;
  TGEA_SL_TRIPLES(TGEA_SL_OK)
#undef TGEA_SL_OK
  return 0;
}

// Slices per segment for n segments: the least power of two up to 32 / S (a group stays inside a
// warp) with S n G >= 2^18 threads (about the H200's resident threads), or the forced count
// (TIGA_EA_LANES, clamped likewise). A function of the sizes alone.
int sl_groups(const tgc_edge_attn *ea, int S, int64_t n) {
  const int gmax = 32 / S;
  if (ea->lanes > 0) return ea->lanes < gmax ? ea->lanes : gmax;
  int G = 1;
  while (G < gmax && (int64_t)S * n * G < ((int64_t)1 << 18))
    G *= 2;
  return G;
}

static unsigned sl_blocks(int64_t n, int S, int G) {
  return (unsigned)(((int64_t)S * n * G + kSlThreads - 1) / kSlThreads);
}

// Minimum resident blocks a SM (of 128 threads), the register cap of each kernel: 5 for the
// forward at H 1 (96 registers), 4 at H 2, 4 (128), 2 for the destination pass (up to 255), 3 for
// the source pass (168) — the occupancy the kernels reach uncapped (an explicit cap of 1 block lets
// ptxas take more registers: k_src_sl<4, 8, 8> 168 -> 178 and k_fwd_sl<4, 8, 8> 128 -> 134, one
// block less each, and the hidden-64 H 4 step at 400k 5.68 -> 6.52 ms, run_s13b.sh) — except at
// H 1, FQ 8 (H F 64): 3 for the destination pass (168 registers, no spill) and 4 for the source
// pass (128, 24 B spilled). Measured there (run_s13c.sh, hidden-64 H 1 step ms, uncapped occupancy /
// these, two rounds): 100k 1.293 / 1.135 and 1.304 / 1.139, 400k 4.737 / 4.107 and 4.750 / 4.101.
// At H 4 the same caps spill 408 / 156 B and the step is 14 % slower (6.575 against 5.747 ms at
// 400k). Tried at H 4 and not kept (bench/NOTES.md, session 13): the weights in shared memory
// (ptxas: k_dst_sl<4, 8, 8> 250 -> 236 registers, still two blocks), 16 lanes an edge in the
// backward passes (slower), cp.async-staged gathers (10-40 % slower per pass).
// At H 1, FQ 1 (H F 8: seed 000's point-cloud layer, values = its [N, 8] features) without the
// dropout code (with it: not measured, the caps above) the forward takes 6 blocks (no spill), the
// destination pass 4 (128 registers, 140 B spilled then, 116 since the position sums left its edge
// loop; uncapped it took 161, three resident) and the source pass 5 (96 registers, 8 B spilled
// then, 32 since; uncapped 116, four resident): the seed model
// at 400k 6.203 / 6.231 -> 5.911 / 5.907 ms a step with --recompute, 6.031 / 6.073 -> 5.689 / 5.715
// kept; ncu a launch k_fwd_sl 500.2 -> 452.8 us, k_dst_sl 1110.2 -> 1066.7, k_src_sl 870.8 -> 794.9
// (run_s20e.sh, through temporary switches; each cap alone gained 1-3 %).
template <int H, int FQ, bool DR, bool GEO> constexpr int sl_min_blocks(int pass) {
  if (H == 1 && FQ == 1 && !DR) return pass == 0 ? 6 : pass == 1 ? 4 : 5;
  return pass == 0 ? (H == 1 ? 5 : 4) : pass == 1 ? (H == 1 && FQ == 8 ? 3 : 2) : (H == 1 && FQ == 8 ? 4 : 3);
}
// Kernel K's instance for the call: dropout code or not, geometry code (dim > 0) or not. Without
// positions (or with them folded into U and V: ops/edge_attention.c's self-attention products) the
// kernels are built without the geometry's registers and instructions (GEO false); with dropout
// at dim 0 they run the geometry build (dim 0 at run time: the same results, fewer instances).
#define TGEA_SL_GO(KERNEL, PASS)                                                                                       \
  if (a.drop.on)                                                                                                       \
    KERNEL<H, S, FQ, sl_min_blocks<H, FQ, true, true>(PASS), true, true><<<b, kSlThreads, 0, s>>>(a);                  \
  else if (a.dim > 0)                                                                                                  \
    KERNEL<H, S, FQ, sl_min_blocks<H, FQ, false, true>(PASS), false, true><<<b, kSlThreads, 0, s>>>(a);                \
  else                                                                                                                 \
    KERNEL<H, S, FQ, sl_min_blocks<H, FQ, false, false>(PASS), false, false><<<b, kSlThreads, 0, s>>>(a);
struct SlFwd {
  template <int H, int S, int FQ> static void go(cudaStream_t s, unsigned b, const Args &a) { TGEA_SL_GO(k_fwd_sl, 0) }
};
struct SlDst {
  template <int H, int S, int FQ> static void go(cudaStream_t s, unsigned b, const Args &a) { TGEA_SL_GO(k_dst_sl, 1) }
};
struct SlSrc {
  template <int H, int S, int FQ> static void go(cudaStream_t s, unsigned b, const Args &a) { TGEA_SL_GO(k_src_sl, 2) }
};
#undef TGEA_SL_GO
template <class K> static tg_status launch_sl(cudaStream_t s, unsigned blocks, const Args &a, const char *what) {
  const int64_t FQ = a.slice > 0 ? a.HF / a.slice : 0;
#define X(h, sl, fq)                                                                                                   \
  if (a.H == h && a.slice == sl && FQ == fq)                                                                           \
    K::template go<h, sl, fq>(s, blocks, a);                                                                           \
  else
  TGEA_SL_TRIPLES(X) {
    tgc_set_error("edge attention: no slice kernel for H %lld, H * F %lld, %d lanes an edge", (long long)a.H,
                  (long long)a.HF, a.slice);
    return TG_ERR_UNSUPPORTED;
  }
#undef X
  TGC_LAUNCHED(what);
  return TG_OK;
}

tg_status forward_slices(cudaStream_t s, const Args &a) {
  return launch_sl<SlFwd>(s, sl_blocks(a.nq, a.slice, a.lanes), a, "edge_attention_forward");
}

tg_status dst_slices(cudaStream_t s, Args &a) {
  // grid-stride over the rows: at most dst_blocks(nq) blocks, the partial sets the workspace holds
  const int64_t want = sl_blocks(a.nq, a.slice, a.lanes), cap = dst_blocks(a.nq);
  a.nblk = (int)(want < cap ? want : cap);
  return launch_sl<SlDst>(s, (unsigned)a.nblk, a, "edge_attention_backward_dst");
}

tg_status src_slices(cudaStream_t s, const Args &a) {
  return launch_sl<SlSrc>(s, sl_blocks(a.nk, a.slice, a.slanes), a, "edge_attention_backward_src");
}

} // namespace tgea
