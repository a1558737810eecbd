// tg_edge_attention's geometry fold (cuda/edge_attention.h): the per-edge term wp^T (ps[j] - pd[i])
// becomes per-node terms folded into U and V, so that the edge kernels run with dim 0 (no position
// gathers, no per-edge geometry products, no per-edge dwp sums). Its backward maps dU / dV (the
// gradients the edge kernels leave for the folded U / V) back to the positions and to wp.
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

} // extern "C"
