// tg_edge_attention's geometry fold (cuda/edge_attention.h): the per-edge term wp^T (ps[j] - pd[i])
// becomes per-node terms folded into U and V, so that the edge kernels run with dim 0 (no position
// gathers, no per-edge geometry products, no per-edge dwp sums). Its backward maps dU / dV (the
// gradients the edge kernels leave for the folded U / V) back to the positions and to wp.
#include "common.cuh"
#include "edge_attention.h"

namespace {

constexpr int kFoldThreads = 256;
constexpr int kUnfoldBlocks = 132; // fixed: the partials' order does not depend on the device
constexpr int kMaxFoldDim = 3, kMaxFoldHid = 128;

// U[j, k] += sum_d wp[d, k] ps[j, d] (rows j < nk), then V[i, k] -= sum_d wp[d, k] pd[i, d] (rows
// nk + i). Thread (row, unit): 256 / hid rows per block (hid a power of two, sh = log2 hid).
__global__ void k_fold(int64_t nk, int64_t nq, int dim, int hid, int sh, float *U, float *V, const float *ps,
                       const float *pd, const float *wp) {
  __shared__ float w[kMaxFoldDim * kMaxFoldHid];
  for (int t = threadIdx.x; t < dim * hid; t += blockDim.x)
    w[t] = wp[t];
  __syncthreads();
  const int k = (int)threadIdx.x & (hid - 1), rpb = kFoldThreads >> sh;
  for (int64_t r = (int64_t)blockIdx.x * rpb + (threadIdx.x >> sh); r < nk + nq; r += (int64_t)gridDim.x * rpb) {
    const bool src = r < nk;
    const int64_t n = src ? r : r - nk;
    const float *p = (src ? ps : pd) + n * dim;
    float g = 0.f;
    for (int d = 0; d < dim; ++d)
      g = fmaf(w[d * hid + k], p[d], g);
    float *x = (src ? U : V) + n * hid + k;
    *x = src ? *x + g : *x - g;
  }
}

// Per node n: gps[n, d] += sum_k wp[d, k] dU[n, k] (n < nk), gpd[n, d] -= sum_k wp[d, k] dV[n, k]
// (n < nq). Thread (row, unit) as k_fold; the unit sums go by a fixed butterfly within the warp,
// then (hid > 32) the warps of a row in order. The row's unit-0 thread writes both sides in turn,
// so gps == gpd (one position value on both sides) is safe.
__global__ void k_unfold_pos(int64_t nk, int64_t nq, int dim, int hid, int sh, const float *dU, const float *dV,
                             const float *wp, float *gps, float *gpd) {
  __shared__ float w[kMaxFoldDim * kMaxFoldHid];
  __shared__ float red[2][kMaxFoldDim][kFoldThreads / 32];
  for (int t = threadIdx.x; t < dim * hid; t += blockDim.x)
    w[t] = wp[t];
  __syncthreads();
  const int k = (int)threadIdx.x & (hid - 1), rpb = kFoldThreads >> sh, lane = (int)threadIdx.x & 31;
  const int width = hid < 32 ? hid : 32;
  const int64_t nmax = nk > nq ? nk : nq;
  for (int64_t base = (int64_t)blockIdx.x * rpb; base < nmax; base += (int64_t)gridDim.x * rpb) {
    const int64_t n = base + (threadIdx.x >> sh); // every thread takes part in the shuffles
    float r[2][kMaxFoldDim];
    for (int side = 0; side < 2; ++side) {
      const float *g = side ? dV : dU;
      const float v = g && n < (side ? nq : nk) ? g[n * hid + k] : 0.f;
#pragma unroll
      for (int d = 0; d < kMaxFoldDim; ++d) {
        float x = d < dim ? w[d * hid + k] * v : 0.f;
        for (int o = width >> 1; o; o >>= 1)
          x += __shfl_xor_sync(0xffffffffu, x, o);
        r[side][d] = x;
      }
    }
    if (hid > 32) { // combine the row's warps in order
      if (lane == 0)
        for (int side = 0; side < 2; ++side)
          for (int d = 0; d < dim; ++d)
            red[side][d][threadIdx.x >> 5] = r[side][d];
      __syncthreads();
      if (k == 0)
        for (int side = 0; side < 2; ++side)
          for (int d = 0; d < dim; ++d) {
            float s = 0.f;
            for (int q = 0; q < hid / 32; ++q)
              s += red[side][d][(threadIdx.x >> 5) + q];
            r[side][d] = s;
          }
      __syncthreads();
    }
    if (k == 0)
      for (int d = 0; d < dim; ++d) {
        if (gps && n < nk) gps[n * dim + d] += r[0][d];
        if (gpd && n < nq) gpd[n * dim + d] -= r[1][d];
      }
  }
}

// Block b's partial of dwp[d, k] = sum_n ps[n, d] dU[n, k] - sum_n pd[n, d] dV[n, k] over its
// fixed node range; thread (row group q, unit k) sums rows q, q + RG, ... in order, then the row
// groups are added in order. In f64: the two sums are of |pos| size and cancel to |ps - pd| size
// (the per-edge form sums the small differences directly).
__global__ void k_unfold_w(int64_t nk, int64_t nq, int dim, int hid, const float *dU, const float *dV, const float *ps,
                           const float *pd, double *part) {
  __shared__ double red[kFoldThreads * kMaxFoldDim];
  const int RG = kFoldThreads / hid, q = (int)threadIdx.x / hid, k = (int)threadIdx.x % hid;
  const int64_t nmax = nk > nq ? nk : nq, per = (nmax + gridDim.x - 1) / gridDim.x;
  const int64_t n0 = (int64_t)blockIdx.x * per, n1 = n0 + per < nmax ? n0 + per : nmax;
  double acc[kMaxFoldDim] = {0.0, 0.0, 0.0};
  if (q < RG)
    for (int64_t n = n0 + q; n < n1; n += RG) {
      if (dU && n < nk) {
        const double v = dU[n * hid + k];
        for (int d = 0; d < dim; ++d)
          acc[d] = fma((double)ps[n * dim + d], v, acc[d]);
      }
      if (dV && n < nq) {
        const double v = dV[n * hid + k];
        for (int d = 0; d < dim; ++d)
          acc[d] = fma(-(double)pd[n * dim + d], v, acc[d]);
      }
    }
  for (int d = 0; d < dim; ++d)
    red[d * kFoldThreads + threadIdx.x] = acc[d];
  __syncthreads();
  for (int t = threadIdx.x; t < dim * hid; t += blockDim.x) {
    const int d = t / hid, kk = t % hid;
    double s = 0.0;
    for (int g = 0; g < RG; ++g)
      s += red[d * kFoldThreads + g * hid + kk];
    part[(int64_t)blockIdx.x * dim * hid + t] = s;
  }
}

// gwp[t] += sum_b part[b, t], in block order.
__global__ void k_unfold_wsum(int nparts, int nt, const double *part, float *gwp) {
  const int t = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (t >= nt) return;
  double s = 0.0;
  for (int b = 0; b < nparts; ++b)
    s += part[(int64_t)b * nt + t];
  gwp[t] = (float)((double)gwp[t] + s);
}

bool fold_sizes_ok(const char *op, int64_t nk, int64_t nq, int dim, int hid) {
  if (nk < 0 || nq < 0 || dim < 1 || dim > kMaxFoldDim || hid < 1 || hid > kMaxFoldHid || kFoldThreads % hid != 0) {
    tgc_set_error("%s: unsupported sizes nk %lld, nq %lld, dim %d, hid %d (dim 1..%d, hid dividing %d, <= %d)", op,
                  (long long)nk, (long long)nq, dim, hid, kMaxFoldDim, kFoldThreads, kMaxFoldHid);
    return false;
  }
  return true;
}

unsigned grid_for(int64_t n) {
  const int64_t b = (n + kFoldThreads - 1) / kFoldThreads;
  return (unsigned)(b < 65535 * 32 ? (b > 0 ? b : 1) : 65535 * 32);
}

} // namespace

extern "C" {

tg_status cuda_edge_fold(tgc_stream s, int64_t nk, int64_t nq, int dim, int hid, float *U, float *V, const float *ps,
                         const float *pd, const float *wp) {
  if (!fold_sizes_ok("cuda_edge_fold", nk, nq, dim, hid)) return TG_ERR_INVALID_ARGUMENT;
  if (!U || !V || !ps || !pd || !wp) {
    tgc_set_error("cuda_edge_fold: U, V, ps, pd and wp are all needed");
    return TG_ERR_INVALID_ARGUMENT;
  }
  if ((nk + nq) * hid == 0) return TG_OK;
  const int sh = __builtin_ctz((unsigned)hid);
  k_fold<<<grid_for((nk + nq) * hid), kFoldThreads, 0, s>>>(nk, nq, dim, hid, sh, U, V, ps, pd, wp);
  TGC_LAUNCHED("edge_attention_fold");
  return TG_OK;
}

size_t cuda_edge_unfold_workspace(int dim, int hid) {
  return (size_t)kUnfoldBlocks * (size_t)(dim > 0 ? dim : 0) * (size_t)(hid > 0 ? hid : 0) * sizeof(double);
}

tg_status cuda_edge_unfold(tgc_stream s, int64_t nk, int64_t nq, int dim, int hid, const float *dU, const float *dV,
                           const float *ps, const float *pd, const float *wp, float *gps, float *gpd, float *gwp,
                           void *ws, size_t ws_bytes) {
  if (!fold_sizes_ok("cuda_edge_unfold", nk, nq, dim, hid)) return TG_ERR_INVALID_ARGUMENT;
  if (((gps || gpd) && !wp) || (gwp && (!ps || !pd)) || (gps && !dU) || (gpd && !dV)) {
    tgc_set_error("cuda_edge_unfold: a wanted gradient lacks its inputs (dU / dV, ps / pd, wp)");
    return TG_ERR_INVALID_ARGUMENT;
  }
  const int64_t nmax = nk > nq ? nk : nq;
  if ((gps || gpd) && nmax > 0) {
    k_unfold_pos<<<grid_for(nmax * hid), kFoldThreads, 0, s>>>(nk, nq, dim, hid, __builtin_ctz((unsigned)hid), dU, dV,
                                                               wp, gps, gpd);
    TGC_LAUNCHED("edge_attention_unfold_pos");
  }
  if (gwp && (dU || dV)) {
    if (!ws || ws_bytes < cuda_edge_unfold_workspace(dim, hid)) {
      tgc_set_error("cuda_edge_unfold: workspace of %zu bytes, needs %zu", ws_bytes,
                    cuda_edge_unfold_workspace(dim, hid));
      return TG_ERR_INVALID_ARGUMENT;
    }
    double *part = static_cast<double *>(ws);
    k_unfold_w<<<kUnfoldBlocks, kFoldThreads, 0, s>>>(nk, nq, dim, hid, dU, dV, ps, pd, part);
    TGC_LAUNCHED("edge_attention_unfold_w");
    k_unfold_wsum<<<(unsigned)((dim * hid + 127) / 128), 128, 0, s>>>(kUnfoldBlocks, dim * hid, part, gwp);
    TGC_LAUNCHED("edge_attention_unfold_wsum");
  }
  return TG_OK;
}

} // extern "C"
