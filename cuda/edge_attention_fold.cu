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

// ---------------------------------------------------------------- per-node products (self attention)
// The products' weights [wp; ws; wd] (dim + 2 Fx rows of 16) into shared memory w, by the block.
__device__ __forceinline__ void load_pw(float *w, int dim, int Fx, const float *wp, const float *ws, const float *wd) {
  for (int t = threadIdx.x; t < (dim + 2 * Fx) * kUfHid; t += blockDim.x) {
    const int r = t / kUfHid, k = t % kUfHid;
    w[t] = r < dim ? wp[r * kUfHid + k] : r < dim + Fx ? ws[(r - dim) * kUfHid + k] : wd[(r - dim - Fx) * kUfHid + k];
  }
}

// cuda_edge_products: thread (node a, 4 units): U[a] and V[a] quads from x[m] and p[m] (m = perm[a]
// or a), the weights in shared memory.
constexpr int kPrThreads = 256, kPrMaxFx = 8;
__global__ void k_products(int64_t n, int dim, int Fx, const int32_t *perm, const float *x, const float *p,
                           const float *wp, const float *ws, const float *wd, float *U, float *V, int u_only) {
  __shared__ alignas(16) float w[(kMaxFoldDim + 2 * kPrMaxFx) * kUfHid];
  load_pw(w, dim, Fx, wp, ws, wd);
  __syncthreads();
  const int64_t t = (int64_t)blockIdx.x * kPrThreads + threadIdx.x, a = t >> 2;
  if (a >= n) return;
  const int q = (int)(t & 3), k = 4 * q;
  const int64_t m = perm ? (int64_t)__ldg(perm + a) : a;
  float4 g = make_float4(0.f, 0.f, 0.f, 0.f), u = g, v = g;
  for (int d = 0; d < dim; ++d) {
    const float pv = p[m * dim + d];
    const float4 wv = *reinterpret_cast<const float4 *>(w + d * kUfHid + k);
    g.x = fmaf(wv.x, pv, g.x), g.y = fmaf(wv.y, pv, g.y), g.z = fmaf(wv.z, pv, g.z), g.w = fmaf(wv.w, pv, g.w);
  }
  for (int f = 0; f < Fx; ++f) {
    const float xv = x[m * Fx + f];
    const float4 a4 = *reinterpret_cast<const float4 *>(w + (dim + f) * kUfHid + k),
                 b4 = *reinterpret_cast<const float4 *>(w + (dim + Fx + f) * kUfHid + k);
    u.x = fmaf(a4.x, xv, u.x), u.y = fmaf(a4.y, xv, u.y), u.z = fmaf(a4.z, xv, u.z), u.w = fmaf(a4.w, xv, u.w);
    v.x = fmaf(b4.x, xv, v.x), v.y = fmaf(b4.y, xv, v.y), v.z = fmaf(b4.z, xv, v.z), v.w = fmaf(b4.w, xv, v.w);
  }
  *reinterpret_cast<float4 *>(U + a * kUfHid + k) = make_float4(u.x + g.x, u.y + g.y, u.z + g.z, u.w + g.w);
  if (!u_only)
    *reinterpret_cast<float4 *>(V + a * kUfHid + k) = make_float4(v.x - g.x, v.y - g.y, v.z - g.z, v.w - g.w);
}

// cuda_rows_permute: thread per element.
__global__ void k_rows_permute(int64_t n, int64_t cols, const int32_t *perm, const float *src, float *dst, int back) {
  const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, a = t / cols;
  if (a >= n) return;
  const int64_t c = t - a * cols, m = __ldg(perm + a);
  if (back)
    dst[m * cols + c] += src[a * cols + c];
  else
    dst[a * cols + c] = src[m * cols + c];
}

// cuda_edge_products_backward: a block is C = dim + 2 Fx warps, each for one input coordinate and
// one product: warp c < dim for position coordinate c (with dU - dV), then Fx warps for feature f
// with dU (they also write gx, which needs dU and dV), then Fx for feature f with dV. Lane l takes
// nodes a = 32 b + l + 32 kPrBlocks r (a fixed grid, so the partials' order does not depend on the
// device), reads dU[a] and / or dV[a] (the warps share the rows through L1), adds its coordinate's
// gradient at the old index m and keeps f64 sums of its coordinate times the 16 units of its
// product, summed over the warp by a fixed butterfly into part[b, c, 16].
constexpr int kPrBlocks = 512;
__global__ void __launch_bounds__((kMaxFoldDim + 2 * kPrMaxFx) * 32, 1)
    k_products_bwd(int64_t n, int dim, int Fx, const int32_t *perm, const float *x, const float *p, const float *wp,
                   const float *ws, const float *wd, const float *dU, const float *dV, float *gx, float *gp,
                   double *part) {
  __shared__ float w[(kMaxFoldDim + 2 * kPrMaxFx) * kUfHid];
  load_pw(w, dim, Fx, wp, ws, wd);
  __syncthreads();
  const int c = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31; // c warp-uniform
  const int role = c < dim ? 0 : c < dim + Fx ? 1 : 2, f = role == 1 ? c - dim : c - dim - Fx;
  const bool needU = role < 2 && dU, needV = (role != 1 || gx) && dV;
  double acc[kUfHid];
#pragma unroll
  for (int k = 0; k < kUfHid; ++k)
    acc[k] = 0.0;
  const int64_t stride = (int64_t)gridDim.x * 32;
  for (int64_t a = (int64_t)blockIdx.x * 32 + lane; a < n; a += stride) {
    const int64_t m = perm ? (int64_t)__ldg(perm + a) : a;
    float du[kUfHid], dv[kUfHid];
#pragma unroll
    for (int k = 0; k < kUfHid; k += 4) {
      const float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
      const float4 x4 = needU ? *reinterpret_cast<const float4 *>(dU + a * kUfHid + k) : z,
                   y4 = needV ? *reinterpret_cast<const float4 *>(dV + a * kUfHid + k) : z;
      du[k] = x4.x, du[k + 1] = x4.y, du[k + 2] = x4.z, du[k + 3] = x4.w;
      dv[k] = y4.x, dv[k + 1] = y4.y, dv[k + 2] = y4.z, dv[k + 3] = y4.w;
    }
    if (role == 0) {
      const float *wr = w + c * kUfHid;
      const double pv = part ? (double)p[m * dim + c] : 0.0;
      float g = 0.f;
#pragma unroll
      for (int k = 0; k < kUfHid; ++k) {
        const float e = du[k] - dv[k];
        g = fmaf(wr[k], e, g);
        acc[k] = fma(pv, (double)e, acc[k]);
      }
      if (gp) gp[m * dim + c] += g;
    } else {
      const double xv = part ? (double)x[m * Fx + f] : 0.0;
#pragma unroll
      for (int k = 0; k < kUfHid; ++k)
        acc[k] = fma(xv, (double)(role == 1 ? du[k] : dv[k]), acc[k]);
      if (role == 1 && gx) {
        const float *wa = w + (dim + f) * kUfHid, *wb = w + (dim + Fx + f) * kUfHid;
        float g = 0.f;
#pragma unroll
        for (int k = 0; k < kUfHid; ++k) {
          g = fmaf(wa[k], du[k], g);
          g = fmaf(wb[k], dv[k], g);
        }
        gx[m * Fx + f] += g;
      }
    }
  }
  if (!part) return; // grid-uniform
#pragma unroll
  for (int k = 0; k < kUfHid; ++k)
    for (int o = 16; o; o >>= 1)
      acc[k] += __shfl_xor_sync(0xffffffffu, acc[k], o);
  if (lane == 0) {
    double *dst = part + ((int64_t)blockIdx.x * (dim + 2 * Fx) + c) * kUfHid;
#pragma unroll
    for (int k = 0; k < kUfHid; ++k)
      dst[k] = acc[k];
  }
}

// The weight gradients: a warp per partial slot t = (c, k) sums part[b, t] over the blocks in a
// fixed order and adds it to row c of [wp; ws; wd] (gwp, gws, gwd), unit k.
__global__ void k_products_wsum(int nparts, int dim, int Fx, const double *part, float *gwp, float *gws, float *gwd) {
  const int nt = (dim + 2 * Fx) * kUfHid;
  const int t = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5), lane = (int)threadIdx.x & 31;
  if (t >= nt) return; // warp-uniform
  const int c = t / kUfHid, k = t % kUfHid;
  float *o = c < dim        ? (gwp ? gwp + c * kUfHid + k : nullptr)
             : c < dim + Fx ? (gws ? gws + (c - dim) * kUfHid + k : nullptr)
                            : (gwd ? gwd + (c - dim - Fx) * kUfHid + k : nullptr);
  if (!o) return;
  double s = 0.0;
  for (int b = lane; b < nparts; b += 32)
    s += part[(int64_t)b * nt + t];
  for (int q = 16; q; q >>= 1)
    s += __shfl_xor_sync(0xffffffffu, s, q);
  if (lane == 0) *o = (float)((double)*o + s);
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

tg_status cuda_edge_products(tgc_stream s, int64_t n, int dim, int Fx, const int32_t *perm, const float *x,
                             const float *p, const float *wp, const float *ws, const float *wd, float *U, float *V,
                             int u_only) {
  if (n < 0 || dim < 1 || dim > kMaxFoldDim || Fx < 1 || Fx > kPrMaxFx) {
    tgc_set_error("cuda_edge_products: unsupported sizes n %lld, dim %d, Fx %d (dim 1..%d, Fx 1..%d)", (long long)n,
                  dim, Fx, kMaxFoldDim, kPrMaxFx);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (n == 0) return TG_OK;
  if (!x || !p || !wp || !ws || !wd || !U || (!u_only && !V) || !tgc_aligned(U, 16) || !tgc_aligned(V, 16)) {
    tgc_set_error("cuda_edge_products: x, p, wp, ws, wd, U and V are needed, U and V 16-byte aligned");
    return TG_ERR_INVALID_ARGUMENT;
  }
  const int64_t threads = n * 4;
  k_products<<<(unsigned)((threads + kPrThreads - 1) / kPrThreads), kPrThreads, 0, s>>>(n, dim, Fx, perm, x, p, wp, ws,
                                                                                        wd, U, V, u_only);
  TGC_LAUNCHED("edge_attention_products");
  return TG_OK;
}

size_t cuda_edge_products_workspace(int dim, int Fx) {
  return (size_t)kPrBlocks * (size_t)((dim > 0 ? dim : 0) + 2 * (Fx > 0 ? Fx : 0)) * kUfHid * sizeof(double);
}

tg_status cuda_edge_products_backward(tgc_stream s, int64_t n, int dim, int Fx, const int32_t *perm, const float *x,
                                      const float *p, const float *wp, const float *ws, const float *wd,
                                      const float *dU, const float *dV, float *gx, float *gp, float *gwp, float *gws,
                                      float *gwd, void *work, size_t work_bytes) {
  const char *op = "cuda_edge_products_backward";
  if (n < 0 || dim < 1 || dim > kMaxFoldDim || Fx < 1 || Fx > kPrMaxFx || (gx && gx == gp)) {
    tgc_set_error("%s: unsupported sizes n %lld, dim %d, Fx %d, or gx == gp", op, (long long)n, dim, Fx);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (!x || !p || !wp || !ws || !wd || !tgc_aligned(dU, 16) || !tgc_aligned(dV, 16)) {
    tgc_set_error("%s: x, p, wp, ws and wd are needed, dU and dV 16-byte aligned", op);
    return TG_ERR_INVALID_ARGUMENT;
  }
  const bool wgrad = (gwp || gws || gwd) && (dU || dV);
  if (wgrad && (!work || work_bytes < cuda_edge_products_workspace(dim, Fx) || !tgc_aligned(work, sizeof(double)))) {
    tgc_set_error("%s: workspace of %zu bytes, needs %zu", op, work ? work_bytes : 0,
                  cuda_edge_products_workspace(dim, Fx));
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (n == 0 || (!dU && !dV) || (!gx && !gp && !wgrad)) return TG_OK;
  double *part = wgrad ? static_cast<double *>(work) : nullptr;
  k_products_bwd<<<kPrBlocks, (dim + 2 * Fx) * 32, 0, s>>>(n, dim, Fx, perm, x, p, wp, ws, wd, dU, dV, gx, gp, part);
  TGC_LAUNCHED("edge_attention_products_backward");
  if (wgrad) {
    const int nt = (dim + 2 * Fx) * kUfHid;
    k_products_wsum<<<(unsigned)((nt * 32 + 255) / 256), 256, 0, s>>>(kPrBlocks, dim, Fx, part, gwp, gws, gwd);
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
  const int64_t threads = n * cols;
  if (threads == 0) return TG_OK;
  k_rows_permute<<<(unsigned)((threads + 255) / 256), 256, 0, s>>>(n, cols, perm, src, dst, back);
  TGC_LAUNCHED("rows_permute");
  return TG_OK;
}

} // extern "C"
