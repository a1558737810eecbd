// tg_edge_attention's geometry fold (cuda/edge_attention.h): the per-edge term wp^T (ps[j] - pd[i])
// becomes per-node terms folded into U and V, so that the edge kernels run with dim 0 (no position
// gathers, no per-edge geometry products, no per-edge dwp sums). Its backward maps dU / dV (the
// gradients the edge kernels leave for the folded U / V) back to the positions and to wp.
#include <type_traits>

#include "common.cuh"
#include "edge_attention.h"

namespace {

constexpr int kFoldThreads = 256;
constexpr int kMaxFoldDim = 3, kMaxFoldHid = 128;

// U[j, k] += sum_d wp[d, k] ps[j, d] (rows j < nk), then V[i, k] -= sum_d wp[d, k] pd[i, d] (rows
// nk + i). Thread (row, 4 units): hid / 4 threads per row, one 16-byte read-modify-write each.
__global__ void k_fold(int64_t nk, int64_t nq, int dim, int hid, float *U, float *V, const float *ps, const float *pd,
                       const float *wp) {
  __shared__ alignas(16) float w[kMaxFoldDim * kMaxFoldHid];
  for (int t = threadIdx.x; t < dim * hid; t += blockDim.x)
    w[t] = wp[t];
  __syncthreads();
  const int hq = hid >> 2;
  const int64_t t = (int64_t)blockIdx.x * kFoldThreads + threadIdx.x, r = t / hq;
  if (r >= nk + nq) return;
  const int k = 4 * (int)(t - r * hq);
  const bool src = r < nk;
  const int64_t n = src ? r : r - nk;
  const float *p = (src ? ps : pd) + n * dim;
  float4 g = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int d = 0; d < dim; ++d) {
    const float pv = p[d];
    const float4 wv = *reinterpret_cast<const float4 *>(w + d * hid + k);
    g.x = fmaf(wv.x, pv, g.x);
    g.y = fmaf(wv.y, pv, g.y);
    g.z = fmaf(wv.z, pv, g.z);
    g.w = fmaf(wv.w, pv, g.w);
  }
  float4 *x = reinterpret_cast<float4 *>((src ? U : V) + n * hid + k);
  float4 v = *x;
  if (src)
    v.x += g.x, v.y += g.y, v.z += g.z, v.w += g.w;
  else
    v.x -= g.x, v.y -= g.y, v.z -= g.z, v.w -= g.w;
  *x = v;
}

// The fold's backward at hid 16 (the only size ops/edge_attention.c folds), streaming. A block is
// kUf16Dims groups of 64 threads, group d for position coordinate d; thread (d, j) takes node
// n = 64 c + j for the block's chunks c (grid-stride over a fixed grid, so the partials' order does
// not depend on the device): it reads dU[n] and dV[n] as float4s (the d groups share the rows
// through L1) and ps[n, d], pd[n, d], adds dU[n] . wp[d, :] into gps[n, d] and subtracts
// dV[n] . wp[d, :] from gpd[n, d] (one thread both sides, so gps == gpd is safe), and keeps f64
// sums of ps[n, d] dU[n, k] - pd[n, d] dV[n, k] for its d and every k; the block sums them in a
// fixed order (warp butterflies, then the group's two warps) into part[b, d, k]. 80 registers: 4
// blocks a SM, the 512 blocks in one wave. (Session 11's kernel staged tiles of 256 nodes in shared
// memory with a node range per block, any hid <= 32: 37 / 75 us at 100k / 400k, ncu cold, against
// 16 / 40 now; a thread per node with all 48 f64 sums ran at 202 registers, 20 / 43 us.)
constexpr int kUf16Blocks = 512, kUfHid = 16, kUfNodes = 64, kUf16Threads = kMaxFoldDim * kUfNodes;
__global__ void __launch_bounds__(kUf16Threads, 4)
    k_unfold16(int64_t nk, int64_t nq, int dim, const float *dU, const float *dV, const float *ps, const float *pd,
               const float *wp, float *gps, float *gpd, double *part) {
  __shared__ double red[kUf16Threads / 32][kUfHid];
  __shared__ float wsm[kMaxFoldDim][kUfHid];
  const int d = (int)threadIdx.x / kUfNodes, jn = (int)threadIdx.x % kUfNodes; // d: warp-uniform
  if (jn < kUfHid) wsm[d][jn] = wp && d < dim ? wp[d * kUfHid + jn] : 0.f;
  __syncthreads();
  const float *w = wsm[d];
  double acc[kUfHid];
#pragma unroll
  for (int k = 0; k < kUfHid; ++k)
    acc[k] = 0.0;
  const int64_t nmax = nk > nq ? nk : nq, stride = (int64_t)kUf16Blocks * kUfNodes;
  for (int64_t n = (int64_t)blockIdx.x * kUfNodes + jn; d < dim && n < nmax; n += stride) {
    float x[2] = {0.f, 0.f};
#pragma unroll
    for (int side = 0; side < 2; ++side) {
      const float *g = side ? dV : dU, *pp = side ? pd : ps;
      if (!g || n >= (side ? nq : nk)) continue;
      float r[kUfHid];
#pragma unroll
      for (int k = 0; k < kUfHid; k += 4) {
        const float4 v = *reinterpret_cast<const float4 *>(g + n * kUfHid + k);
        r[k] = v.x, r[k + 1] = v.y, r[k + 2] = v.z, r[k + 3] = v.w;
      }
      const double p = part ? (double)pp[n * dim + d] : 0.0;
#pragma unroll
      for (int k = 0; k < kUfHid; ++k) {
        x[side] = fmaf(w[k], r[k], x[side]);
        acc[k] = side ? fma(-p, (double)r[k], acc[k]) : fma(p, (double)r[k], acc[k]);
      }
    }
    const bool ws = gps && n < nk && dU, wd = gpd && n < nq && dV;
    const int64_t o = n * dim + d;
    if (ws && wd && gps == gpd) // one position value on both sides
      gps[o] = gps[o] - x[1] + x[0];
    else {
      if (wd) gpd[o] -= x[1];
      if (ws) gps[o] += x[0];
    }
  }
  if (!part) return; // grid-uniform
  const int wid = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31;
#pragma unroll
  for (int k = 0; k < kUfHid; ++k) {
    double v = acc[k];
    for (int o = 16; o; o >>= 1)
      v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) red[wid][k] = v;
  }
  __syncthreads();
  const int t = (int)threadIdx.x, P = dim * kUfHid, wpg = kUfNodes / 32;
  if (t < P) {
    const int dd = t / kUfHid, k = t % kUfHid;
    double a = 0.0;
    for (int r = 0; r < wpg; ++r)
      a += red[dd * wpg + r][k];
    part[(int64_t)blockIdx.x * P + t] = a;
  }
}

// gwp[t] += sum_b part[b, t]: a warp per t, lane l sums b = l, l + 32, ... then a fixed butterfly.
__global__ void k_unfold_wsum(int nparts, int nt, const double *part, float *gwp) {
  const int t = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5), lane = (int)threadIdx.x & 31;
  if (t >= nt) return; // warp-uniform
  double s = 0.0;
  for (int b = lane; b < nparts; b += 32)
    s += part[(int64_t)b * nt + t];
  for (int o = 16; o; o >>= 1)
    s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) gwp[t] = (float)((double)gwp[t] + s);
}

// ---------------------------------------------------------------- per-node products (self attention)
// The products' weights [wp; ws; wd] (dim + 2 Fx rows of HID) into shared memory w, by the block.
template <int HID>
__device__ __forceinline__ void load_pw(float *w, int dim, int Fx, const float *wp, const float *ws, const float *wd) {
  for (int t = threadIdx.x; t < (dim + 2 * Fx) * HID; t += blockDim.x) {
    const int r = t / HID, k = t % HID;
    w[t] = r < dim ? wp[r * HID + k] : r < dim + Fx ? ws[(r - dim) * HID + k] : wd[(r - dim - Fx) * HID + k];
  }
}

// cuda_edge_products: thread (node a, 4 units; HID / 4 threads a node): U[a] and V[a] quads from
// x[m] and p[m] (m = perm[a] or a), the weights in shared memory. The element loops run to their maxima (unrolled), so
// that a node's loads issue together: 48.2 -> 42.9 us at 400k against loops to dim and Fx, which waited for each
// element in turn (ncu, run_s18a.sh).
constexpr int kPrThreads = 256, kPrMaxFx = 8;
// Node m's position and feature row, zero-padded to the maxima (zeros when !ok), every element
// loaded before any is used (k_products, k_products_bwd).
__device__ __forceinline__ void ld_node(bool ok, int64_t m, int dim, int Fx, const float *x, const float *p,
                                        float (&pv)[kMaxFoldDim], float (&xv)[kPrMaxFx]) {
#pragma unroll
  for (int d = 0; d < kMaxFoldDim; ++d)
    pv[d] = ok && d < dim ? p[m * dim + d] : 0.f;
#pragma unroll
  for (int f = 0; f < kPrMaxFx; ++f)
    xv[f] = ok && f < Fx ? x[m * Fx + f] : 0.f;
}
template <int HID>
__global__ void k_products(int64_t n, int dim, int Fx, const int32_t *perm, const float *x, const float *p,
                           const float *wp, const float *ws, const float *wd, float *U, float *V, float *Xr,
                           int u_only) {
  constexpr int TQ = HID / 4;
  __shared__ alignas(16) float w[(kMaxFoldDim + 2 * kPrMaxFx) * HID];
  load_pw<HID>(w, dim, Fx, wp, ws, wd);
  __syncthreads();
  const int64_t t = (int64_t)blockIdx.x * kPrThreads + threadIdx.x, a = t / TQ;
  if (a >= n) return;
  const int q = (int)(t % TQ), k = 4 * q;
  const int64_t m = perm ? (int64_t)__ldg(perm + a) : a;
  float4 g = make_float4(0.f, 0.f, 0.f, 0.f), u = g, v = g;
  float pv[kMaxFoldDim], xv[kPrMaxFx];
  ld_node(true, m, dim, Fx, x, p, pv, xv);
  if (Xr) // x's row in the new order: thread q of the node stores elements q, q + TQ
#pragma unroll
    for (int f = 0; f < kPrMaxFx; ++f)
      if (f % TQ == q && f < Fx) Xr[a * Fx + f] = xv[f];
#pragma unroll
  for (int d = 0; d < kMaxFoldDim; ++d) {
    if (d >= dim) break;
    const float4 wv = *reinterpret_cast<const float4 *>(w + d * HID + k);
    g.x = fmaf(wv.x, pv[d], g.x), g.y = fmaf(wv.y, pv[d], g.y), g.z = fmaf(wv.z, pv[d], g.z),
    g.w = fmaf(wv.w, pv[d], g.w);
  }
#pragma unroll
  for (int f = 0; f < kPrMaxFx; ++f) {
    if (f >= Fx) break;
    const float4 a4 = *reinterpret_cast<const float4 *>(w + (dim + f) * HID + k),
                 b4 = *reinterpret_cast<const float4 *>(w + (dim + Fx + f) * HID + k);
    const float xf = xv[f];
    u.x = fmaf(a4.x, xf, u.x), u.y = fmaf(a4.y, xf, u.y), u.z = fmaf(a4.z, xf, u.z), u.w = fmaf(a4.w, xf, u.w);
    v.x = fmaf(b4.x, xf, v.x), v.y = fmaf(b4.y, xf, v.y), v.z = fmaf(b4.z, xf, v.z), v.w = fmaf(b4.w, xf, v.w);
  }
  *reinterpret_cast<float4 *>(U + a * HID + k) = make_float4(u.x + g.x, u.y + g.y, u.z + g.z, u.w + g.w);
  if (!u_only) *reinterpret_cast<float4 *>(V + a * HID + k) = make_float4(v.x - g.x, v.y - g.y, v.z - g.z, v.w - g.w);
}

// cuda_edge_products_backward: thread (node slot, quarter-group q), a slot being TQ = HID / 4
// threads and thread q owning units 4q .. 4q + 3 of every node it takes. The block's L = 128 / TQ
// slots take nodes a = L b + s + r S (S = L kPqBlocks; a fixed grid, so the partials' order does
// not depend on the device); a warp walks its 32 / TQ slots together (a warp-uniform loop, invalid
// slots computing zeros). Per node the slot reads dU[a], dV[a] (a float4 a thread), x[m], p[m]
// (m = perm[a], loaded one node ahead), adds its units' share of gx[m, f] = dU[a] . ws[f, :] +
// dV[a] . wd[f, :] and of gp[m, c] = (dU[a] - dV[a]) . wp[c, :], sums them over the slot by a
// butterfly and thread f % TQ (thread c) adds them at m (red.global.add: perm is a permutation, one
// addition an element here); and keeps f32 sums of p[m, c] (dU - dV)[a, k], x[m, f] dU[a, k],
// x[m, f] dV[a, k] for its four k — summed at the end in f64, over the warp's slots by a fixed
// butterfly and over the warps in order, into part[block, c, k] (k_products_wsum). No
// shared-memory staging and no barriers in the walk: 86.9 us at 400k (ncu, run_s18a.sh) against
// 142.2 for session 15's kernel (8 warps a coordinate each over 32-node tiles staged in shared
// memory, the next tile's loads in registers: git history, bench/NOTES.md); 128 registers, no
// spill, four blocks a SM (hidden 16).
constexpr int kPqThreads = 128, kPqBlocks = 512;
constexpr int kPrRows = kMaxFoldDim + 2 * kPrMaxFx;
template <int HID>
__global__ void __launch_bounds__(kPqThreads, 4)
    k_products_bwd(int64_t n, int dim, int Fx, const int32_t *perm, const float *x, const float *p, const float *wp,
                   const float *ws, const float *wd, const float *dU, const float *dV, const float *dXr, float *gx,
                   float *gp, double *part) {
  constexpr int TQ = HID / 4, kSlots = kPqThreads / TQ;
  __shared__ alignas(16) float w[kPrRows * HID];
  __shared__ double red[kPqThreads / 32][kPrRows * HID];
  load_pw<HID>(w, dim, Fx, wp, ws, wd);
  __syncthreads();
  const int t = (int)threadIdx.x, lane = t & 31, wid = t >> 5, q = HID == 16 ? t & 3 : t % TQ, k0 = 4 * q; // (*)
  const int64_t stride = (int64_t)gridDim.x * kSlots;
  float aP[kMaxFoldDim][4], aS[kPrMaxFx][4], aD[kPrMaxFx][4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
#pragma unroll
    for (int d = 0; d < kMaxFoldDim; ++d)
      aP[d][j] = 0.f;
#pragma unroll
    for (int f = 0; f < kPrMaxFx; ++f)
      aS[f][j] = 0.f, aD[f][j] = 0.f;
  }
  auto old = [&](int64_t a) -> int64_t { return a >= n ? 0 : perm ? (int64_t)__ldg(perm + a) : a; };
  // (*) at hidden 16 as session 20's kernel (bit operations: 128 registers, no spill; t % TQ and
  // t / TQ on the signed t cost it 12 B of spill), at 64 as run_s21a.sh ran it
  int64_t a = (int64_t)blockIdx.x * kSlots + (HID == 16 ? t >> 2 : t / TQ), m = old(a);
  const int64_t warp0 = (int64_t)blockIdx.x * kSlots + (32 / TQ) * wid; // the warp's first slot
  for (int64_t r0 = warp0; r0 < n; r0 += stride, a += stride) {         // warp-uniform
    const bool ok = a < n;
    const int64_t mn = old(a + stride);
    const float4 z4 = make_float4(0.f, 0.f, 0.f, 0.f);
    const float4 u4 = ok && dU ? *reinterpret_cast<const float4 *>(dU + a * HID + k0) : z4,
                 v4 = ok && dV ? *reinterpret_cast<const float4 *>(dV + a * HID + k0) : z4;
    float pv[kMaxFoldDim], xv[kPrMaxFx];
    ld_node(ok, m, dim, Fx, x, p, pv, xv);
    const float u[4] = {u4.x, u4.y, u4.z, u4.w}, v[4] = {v4.x, v4.y, v4.z, v4.w};
    const float e[4] = {u[0] - v[0], u[1] - v[1], u[2] - v[2], u[3] - v[3]};
#pragma unroll
    for (int d = 0; d < kMaxFoldDim; ++d) {
      if (d >= dim) break;
      const float4 w4 = *reinterpret_cast<const float4 *>(w + d * HID + k0);
      float g = w4.x * e[0];
      g = fmaf(w4.y, e[1], g), g = fmaf(w4.z, e[2], g), g = fmaf(w4.w, e[3], g);
#pragma unroll
      for (int o = 1; o < TQ; o <<= 1)
        g += __shfl_xor_sync(0xffffffffu, g, o);
      if (ok && gp && q == d) atomicAdd(gp + m * dim + d, g);
#pragma unroll
      for (int j = 0; j < 4; ++j)
        aP[d][j] = fmaf(pv[d], e[j], aP[d][j]);
    }
#pragma unroll
    for (int f = 0; f < kPrMaxFx; ++f) {
      if (f >= Fx) break;
      const float4 a4 = *reinterpret_cast<const float4 *>(w + (dim + f) * HID + k0),
                   b4 = *reinterpret_cast<const float4 *>(w + (dim + Fx + f) * HID + k0);
      float g = a4.x * u[0];
      g = fmaf(a4.y, u[1], g), g = fmaf(a4.z, u[2], g), g = fmaf(a4.w, u[3], g);
      g = fmaf(b4.x, v[0], g), g = fmaf(b4.y, v[1], g), g = fmaf(b4.z, v[2], g), g = fmaf(b4.w, v[3], g);
#pragma unroll
      for (int o = 1; o < TQ; o <<= 1)
        g += __shfl_xor_sync(0xffffffffu, g, o);
      if (ok && gx && q == f % TQ) atomicAdd(gx + m * Fx + f, dXr ? g + dXr[a * Fx + f] : g);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        aS[f][j] = fmaf(xv[f], u[j], aS[f][j]);
        aD[f][j] = fmaf(xv[f], v[j], aD[f][j]);
      }
    }
    m = mn;
  }
  if (!part) return; // grid-uniform
  const int C = dim + 2 * Fx;
  auto put = [&](int c, int j, float x0) {
    double s = (double)x0;
#pragma unroll
    for (int o = TQ; o < 32; o <<= 1)
      s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane < TQ) red[wid][c * HID + k0 + j] = s;
  };
#pragma unroll
  for (int j = 0; j < 4; ++j) {
#pragma unroll
    for (int d = 0; d < kMaxFoldDim; ++d)
      if (d < dim) put(d, j, aP[d][j]);
#pragma unroll
    for (int f = 0; f < kPrMaxFx; ++f)
      if (f < Fx) put(dim + f, j, aS[f][j]), put(dim + Fx + f, j, aD[f][j]);
  }
  __syncthreads();
  for (int i = t; i < C * HID; i += kPqThreads) {
    double s = 0.0;
#pragma unroll
    for (int r = 0; r < kPqThreads / 32; ++r)
      s += red[r][i];
    part[(int64_t)blockIdx.x * C * HID + i] = s;
  }
}

// The weight gradients: a warp per partial slot t = (c, k) sums part[b, t] over the blocks in a
// fixed order and adds it to row c of [wp; ws; wd] (gwp, gws, gwd), unit k.
template <int HID>
__global__ void k_products_wsum(int nparts, int dim, int Fx, const double *part, float *gwp, float *gws, float *gwd) {
  const int nt = (dim + 2 * Fx) * HID;
  const int t = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5), lane = (int)threadIdx.x & 31;
  if (t >= nt) return; // warp-uniform
  const int c = t / HID, k = t % HID;
  float *o = c < dim        ? (gwp ? gwp + c * HID + k : nullptr)
             : c < dim + Fx ? (gws ? gws + (c - dim) * HID + k : nullptr)
                            : (gwd ? gwd + (c - dim - Fx) * HID + k : nullptr);
  if (!o) return;
  double s = 0.0;
  for (int b = lane; b < nparts; b += 32)
    s += part[(int64_t)b * nt + t];
  for (int q = 16; q; q >>= 1)
    s += __shfl_xor_sync(0xffffffffu, s, q);
  if (lane == 0) *o = (float)((double)*o + s);
}

// cuda_rows_permute: thread per element, or per float4 (V 4: cols a multiple of 4, both rows
// 16-byte aligned).
template <int V4>
__global__ void k_rows_permute(int64_t n, int64_t cols, const int32_t *perm, const float *src, float *dst, int back) {
  using T = typename std::conditional<V4 == 4, float4, float>::type;
  const int64_t c4 = cols / V4, t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, a = t / c4;
  if (a >= n) return;
  const int64_t c = t - a * c4, m = __ldg(perm + a);
  const T *s = reinterpret_cast<const T *>(src);
  T *d = reinterpret_cast<T *>(dst);
  if (back) {
    T y = d[m * c4 + c];
    const T z = s[a * c4 + c];
    if constexpr (V4 == 4)
      y.x += z.x, y.y += z.y, y.z += z.z, y.w += z.w;
    else
      y += z;
    d[m * c4 + c] = y;
  } else {
    d[a * c4 + c] = s[m * c4 + c];
  }
}

// The hidden widths the products kernels are built for.
bool products_hid_ok(int hid) { return hid == 16 || hid == 64; }

bool fold_sizes_ok(const char *op, int64_t nk, int64_t nq, int dim, int hid) {
  if (nk < 0 || nq < 0 || dim < 1 || dim > kMaxFoldDim || hid < 4 || hid > kMaxFoldHid || kFoldThreads % hid != 0) {
    tgc_set_error("%s: unsupported sizes nk %lld, nq %lld, dim %d, hid %d (dim 1..%d, hid 4..%d dividing %d)", op,
                  (long long)nk, (long long)nq, dim, hid, kMaxFoldDim, kMaxFoldHid, kFoldThreads);
    return false;
  }
  return true;
}

} // namespace

extern "C" {

tg_status cuda_edge_fold(tgc_stream s, int64_t nk, int64_t nq, int dim, int hid, float *U, float *V, const float *ps,
                         const float *pd, const float *wp) {
  if (!fold_sizes_ok("cuda_edge_fold", nk, nq, dim, hid)) return TG_ERR_INVALID_ARGUMENT;
  if ((nk > 0 && (!U || !ps)) || (nq > 0 && (!V || !pd)) || !wp) {
    tgc_set_error("cuda_edge_fold: U and ps (nk > 0), V and pd (nq > 0) and wp are needed");
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (!tgc_aligned(U, 16) || !tgc_aligned(V, 16)) {
    tgc_set_error("cuda_edge_fold: U and V must be 16-byte aligned");
    return TG_ERR_INVALID_ARGUMENT;
  }
  if ((nk + nq) * hid == 0) return TG_OK;
  const int64_t threads = (nk + nq) * (hid / 4);
  k_fold<<<(unsigned)((threads + kFoldThreads - 1) / kFoldThreads), kFoldThreads, 0, s>>>(nk, nq, dim, hid, U, V, ps,
                                                                                          pd, wp);
  TGC_LAUNCHED("edge_attention_fold");
  return TG_OK;
}

size_t cuda_edge_unfold_workspace(int dim, int hid) {
  return (size_t)kUf16Blocks * (size_t)(dim > 0 ? dim : 0) * (size_t)(hid > 0 ? hid : 0) * sizeof(double);
}

tg_status cuda_edge_unfold(tgc_stream s, int64_t nk, int64_t nq, int dim, int hid, const float *dU, const float *dV,
                           const float *ps, const float *pd, const float *wp, float *gps, float *gpd, float *gwp,
                           void *ws, size_t ws_bytes) {
  if (!fold_sizes_ok("cuda_edge_unfold", nk, nq, dim, hid)) return TG_ERR_INVALID_ARGUMENT;
  if (hid != kUfHid || !tgc_aligned(dU, 16) || !tgc_aligned(dV, 16)) {
    tgc_set_error("cuda_edge_unfold: hid %d (16 only) or dU / dV not 16-byte aligned", hid);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (((gps || gpd) && !wp) || (gwp && (!ps || !pd)) || (gps && !dU) || (gpd && !dV)) {
    tgc_set_error("cuda_edge_unfold: a wanted gradient lacks its inputs (dU / dV, ps / pd, wp)");
    return TG_ERR_INVALID_ARGUMENT;
  }
  const int64_t nmax = nk > nq ? nk : nq;
  const bool wgrad = gwp && (dU || dV);
  if (wgrad && (!ws || ws_bytes < cuda_edge_unfold_workspace(dim, hid))) {
    tgc_set_error("cuda_edge_unfold: workspace of %zu bytes, needs %zu", ws_bytes,
                  cuda_edge_unfold_workspace(dim, hid));
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (nmax == 0 || (!gps && !gpd && !wgrad)) return TG_OK;
  double *part = wgrad ? static_cast<double *>(ws) : nullptr;
  k_unfold16<<<kUf16Blocks, kUf16Threads, 0, s>>>(nk, nq, dim, dU, dV, ps, pd, wp, gps, gpd, part);
  TGC_LAUNCHED("edge_attention_unfold");
  if (wgrad) {
    const int nt = dim * hid;
    k_unfold_wsum<<<(unsigned)((nt * 32 + 255) / 256), 256, 0, s>>>(kUf16Blocks, nt, part, gwp);
    TGC_LAUNCHED("edge_attention_unfold_wsum");
  }
  return TG_OK;
}

tg_status cuda_edge_products(tgc_stream s, int64_t n, int dim, int Fx, int hid, const int32_t *perm, const float *x,
                             const float *p, const float *wp, const float *ws, const float *wd, float *U, float *V,
                             float *Xr, int u_only) {
  if (n < 0 || dim < 1 || dim > kMaxFoldDim || Fx < 1 || Fx > kPrMaxFx || !products_hid_ok(hid)) {
    tgc_set_error("cuda_edge_products: unsupported sizes n %lld, dim %d, Fx %d, hid %d (dim 1..%d, Fx 1..%d, hid 16 "
                  "or 64)",
                  (long long)n, dim, Fx, hid, kMaxFoldDim, kPrMaxFx);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (n == 0) return TG_OK;
  if (!x || !p || !wp || !ws || !wd || !U || (!u_only && !V) || !tgc_aligned(U, 16) || !tgc_aligned(V, 16)) {
    tgc_set_error("cuda_edge_products: x, p, wp, ws, wd, U and V are needed, U and V 16-byte aligned");
    return TG_ERR_INVALID_ARGUMENT;
  }
  const int64_t threads = n * (hid / 4);
  const unsigned blocks = (unsigned)((threads + kPrThreads - 1) / kPrThreads);
  if (hid == 16)
    k_products<16><<<blocks, kPrThreads, 0, s>>>(n, dim, Fx, perm, x, p, wp, ws, wd, U, V, Xr, u_only);
  else
    k_products<64><<<blocks, kPrThreads, 0, s>>>(n, dim, Fx, perm, x, p, wp, ws, wd, U, V, Xr, u_only);
  TGC_LAUNCHED("edge_attention_products");
  return TG_OK;
}

size_t cuda_edge_products_workspace(int dim, int Fx, int hid) {
  return (size_t)kPqBlocks * (size_t)((dim > 0 ? dim : 0) + 2 * (Fx > 0 ? Fx : 0)) * (size_t)(hid > 0 ? hid : 0) *
         sizeof(double);
}

tg_status cuda_edge_products_backward(tgc_stream s, int64_t n, int dim, int Fx, int hid, const int32_t *perm,
                                      const float *x, const float *p, const float *wp, const float *ws, const float *wd,
                                      const float *dU, const float *dV, const float *dXr, float *gx, float *gp,
                                      float *gwp, float *gws, float *gwd, void *work, size_t work_bytes) {
  const char *op = "cuda_edge_products_backward";
  if (n < 0 || dim < 1 || dim > kMaxFoldDim || Fx < 1 || Fx > kPrMaxFx || !products_hid_ok(hid) || (gx && gx == gp)) {
    tgc_set_error("%s: unsupported sizes n %lld, dim %d, Fx %d, hid %d, or gx == gp", op, (long long)n, dim, Fx, hid);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (!x || !p || !wp || !ws || !wd || !tgc_aligned(dU, 16) || !tgc_aligned(dV, 16)) {
    tgc_set_error("%s: x, p, wp, ws and wd are needed, dU and dV 16-byte aligned", op);
    return TG_ERR_INVALID_ARGUMENT;
  }
  const bool wgrad = (gwp || gws || gwd) && (dU || dV);
  const size_t need = cuda_edge_products_workspace(dim, Fx, hid);
  if (wgrad && (!work || work_bytes < need || !tgc_aligned(work, sizeof(double)))) {
    tgc_set_error("%s: workspace of %zu bytes, needs %zu", op, work ? work_bytes : 0, need);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (!gx) dXr = nullptr; // only x's gradient takes it
  if (n == 0 || (!dU && !dV && !dXr) || (!gx && !gp && !wgrad)) return TG_OK;
  double *part = wgrad ? static_cast<double *>(work) : nullptr;
  if (hid == 16)
    k_products_bwd<16><<<kPqBlocks, kPqThreads, 0, s>>>(n, dim, Fx, perm, x, p, wp, ws, wd, dU, dV, dXr, gx, gp, part);
  else
    k_products_bwd<64><<<kPqBlocks, kPqThreads, 0, s>>>(n, dim, Fx, perm, x, p, wp, ws, wd, dU, dV, dXr, gx, gp, part);
  TGC_LAUNCHED("edge_attention_products_backward");
  if (wgrad) {
    const int nt = (dim + 2 * Fx) * hid;
    const unsigned blocks = (unsigned)((nt * 32 + 255) / 256);
    if (hid == 16)
      k_products_wsum<16><<<blocks, 256, 0, s>>>(kPqBlocks, dim, Fx, part, gwp, gws, gwd);
    else
      k_products_wsum<64><<<blocks, 256, 0, s>>>(kPqBlocks, dim, Fx, part, gwp, gws, gwd);
    TGC_LAUNCHED("edge_attention_products_wsum");
  }
  return TG_OK;
}

tg_status cuda_rows_permute(tgc_stream s, int64_t n, int64_t cols, const int32_t *perm, const float *src, float *dst,
                            int back) {
  if (n < 0 || cols < 1 || (n > 0 && (!perm || !src || !dst))) {
    tgc_set_error("cuda_rows_permute: n %lld, cols %lld, or a NULL pointer", (long long)n, (long long)cols);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (n * cols == 0) return TG_OK;
  if (cols % 4 == 0 && tgc_aligned(src, 16) && tgc_aligned(dst, 16)) {
    const int64_t threads = n * cols / 4;
    k_rows_permute<4><<<(unsigned)((threads + 255) / 256), 256, 0, s>>>(n, cols, perm, src, dst, back);
  } else {
    const int64_t threads = n * cols;
    k_rows_permute<1><<<(unsigned)((threads + 255) / 256), 256, 0, s>>>(n, cols, perm, src, dst, back);
  }
  TGC_LAUNCHED("rows_permute");
  return TG_OK;
}

} // extern "C"
