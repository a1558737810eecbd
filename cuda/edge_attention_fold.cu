// tg_edge_attention's geometry fold (cuda/edge_attention.h): the per-edge term wp^T (ps[j] - pd[i])
// becomes per-node terms folded into U and V, so that the edge kernels run with dim 0 (no position
// gathers, no per-edge geometry products, no per-edge dwp sums). Its backward maps dU / dV (the
// gradients the edge kernels leave for the folded U / V) back to the positions and to wp.
#include "common.cuh"
#include "edge_attention.h"

namespace {

constexpr int kFoldThreads = 256;
constexpr int kUnfoldBlocks = 2048; // fixed: the partials' order does not depend on the device
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

// The fold's backward in one pass over dU and dV. Block b owns a fixed contiguous node range (the
// grid is fixed: the partials' order does not depend on the device) and walks it in tiles of kTile
// nodes, each side's rows staged in shared memory:
//   positions: thread n of the tile: gps[n, d] += sum_k wp[d, k] dU[n, k], then gpd[n, d] -=
//     sum_k wp[d, k] dV[n, k] (one thread both sides in turn, so gps == gpd is safe);
//   wp: thread (d, k): sum over the tile's nodes of ps[n, d] dU[n, k] - pd[n, d] dV[n, k], in f64 (the
//     two sums are of |pos| size and cancel to |ps - pd| size), node order; part[b, d, k] at the end.
constexpr int kTile = 64;
__global__ void __launch_bounds__(kFoldThreads)
    k_unfold(int64_t nk, int64_t nq, int dim, int hid, int sh, const float *dU, const float *dV, const float *ps,
             const float *pd, const float *wp, float *gps, float *gpd, double *part) {
  extern __shared__ float sm[]; // [kTile][hid + 1] rows, then [kTile][kMaxFoldDim] positions
  __shared__ float w[kMaxFoldDim * kMaxFoldHid];
  float *rows = sm, *pos = sm + kTile * (hid + 1);
  for (int t = threadIdx.x; t < dim * hid; t += blockDim.x)
    w[t] = wp ? wp[t] : 0.f;
  const int64_t nmax = nk > nq ? nk : nq, per = (nmax + gridDim.x - 1) / gridDim.x;
  const int64_t n0 = (int64_t)blockIdx.x * per, n1 = n0 + per < nmax ? n0 + per : nmax;
  constexpr int kPairs = (kMaxFoldDim * kMaxFoldHid + kFoldThreads - 1) / kFoldThreads;
  double acc[kPairs];
#pragma unroll
  for (int q = 0; q < kPairs; ++q)
    acc[q] = 0.0;
  for (int64_t t0 = n0; t0 < n1; t0 += kTile) {
    const int tn = (int)(n1 - t0 < kTile ? n1 - t0 : kTile);
    float r[kMaxFoldDim] = {0.f, 0.f, 0.f}; // the thread's node: side 0's position gradient
    for (int side = 0; side < 2; ++side) {
      const float *g = side ? dV : dU, *p = side ? pd : ps;
      const int64_t lim = side ? nq : nk;
      const int valid = g ? (int)(lim - t0 < tn ? (lim - t0 > 0 ? lim - t0 : 0) : tn) : 0;
      __syncthreads(); // the previous side's readers are done
      for (int e = threadIdx.x; e < tn * hid; e += blockDim.x) {
        const int n = e >> sh, k = e & (hid - 1);
        rows[n * (hid + 1) + k] = n < valid ? g[(t0 + n) * hid + k] : 0.f;
      }
      for (int e = threadIdx.x; e < tn * dim; e += blockDim.x)
        pos[e] = part && p && e / dim < valid ? p[t0 * dim + e] : 0.f;
      __syncthreads();
      const int n = (int)threadIdx.x;
      if (n < valid && (side ? gpd : gps)) {
        float x[kMaxFoldDim] = {0.f, 0.f, 0.f};
        for (int k = 0; k < hid; ++k) {
          const float v = rows[n * (hid + 1) + k];
          for (int d = 0; d < dim; ++d)
            x[d] = fmaf(w[d * hid + k], v, x[d]);
        }
        for (int d = 0; d < dim; ++d)
          if (side)
            gpd[(t0 + n) * dim + d] -= x[d];
          else
            r[d] = x[d];
      }
      if (side == 1 && n < tn && gps && t0 + n < nk) // side 0's, after side 1's (gps == gpd: one thread)
        for (int d = 0; d < dim; ++d)
          gps[(t0 + n) * dim + d] += r[d];
      if (part)
#pragma unroll
        for (int q = 0; q < kPairs; ++q) {
          const int t = (int)threadIdx.x + q * kFoldThreads;
          if (t >= dim * hid) break;
          const int d = t / hid, k = t - d * hid;
          double a = acc[q];
          for (int m = 0; m < valid; ++m) {
            const double v = (double)pos[m * dim + d] * (double)rows[m * (hid + 1) + k];
            a = side ? a - v : a + v;
          }
          acc[q] = a;
        }
    }
  }
  if (part)
#pragma unroll
    for (int q = 0; q < kPairs; ++q) {
      const int t = (int)threadIdx.x + q * kFoldThreads;
      if (t < dim * hid) part[(int64_t)blockIdx.x * dim * hid + t] = acc[q];
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
  const bool wgrad = gwp && (dU || dV);
  if (wgrad && (!ws || ws_bytes < cuda_edge_unfold_workspace(dim, hid))) {
    tgc_set_error("cuda_edge_unfold: workspace of %zu bytes, needs %zu", ws_bytes,
                  cuda_edge_unfold_workspace(dim, hid));
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (nmax == 0 || (!gps && !gpd && !wgrad)) return TG_OK;
  double *part = wgrad ? static_cast<double *>(ws) : nullptr;
  const size_t smem = sizeof(float) * (size_t)kTile * (size_t)(hid + 1 + kMaxFoldDim);
  k_unfold<<<kUnfoldBlocks, kFoldThreads, smem, s>>>(nk, nq, dim, hid, __builtin_ctz((unsigned)hid), dU, dV, ps, pd, wp,
                                                     gps, gpd, part);
  TGC_LAUNCHED("edge_attention_unfold");
  if (wgrad) {
    const int nt = dim * hid;
    k_unfold_wsum<<<(unsigned)((nt * 32 + 255) / 256), 256, 0, s>>>(kUnfoldBlocks, nt, part, gwp);
    TGC_LAUNCHED("edge_attention_unfold_wsum");
  }
  return TG_OK;
}

} // extern "C"
