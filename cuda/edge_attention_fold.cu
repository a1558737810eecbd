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

// cuda_edge_products_backward. C = dim + 2 Fx coordinates, each with one product: c < dim position
// coordinate c (with dU - dV), then Fx feature coordinates with dU (they also make gx, which needs
// dU and dV), then Fx with dV. A block of 8 warps takes the 32-node tiles T = blockIdx.x + gridDim.x r
// (nodes a = 32 T + l; a fixed grid, so the partials' order does not depend on the device); warp w
// takes coordinates w, w + 8, w + 16, lane l node l of the tile, keeping f32 sums of its
// coordinate times the 16 units of its product over its tiles, then summed over the warp in f64 by
// a fixed butterfly into part[block, c, 16]. A tile's rows are staged in shared memory: its dU / dV
// rows (contiguous: float4s), its old indices m = perm[a] (two tiles ahead) and the elements x[m],
// p[m] (one element a thread) — loaded into registers one tile ahead, while the tile before is
// computed, so a tile costs about one memory latency; the gradients are added at m from shared
// memory by the same element threads, as reductions without a return (red.global.add: perm is a
// permutation, so each element gets one addition here and the result does not depend on timing).
// 142 µs at 400k (ncu, caches kept; run_s15d.sh). Before, session 14: each of C warps read the rows
// and made its scattered accesses itself, 222 µs with L1 86 % busy; the same staging without the
// tile ahead (19 warps, four barriers a tile) 439 µs (run_s15a.sh, run_s15b.sh, bench/NOTES.md).
constexpr int kPrBlocks = 512, kPrThreads2 = 256, kPrCpw = 3, kPrPad = kUfHid + 1, kPrMaxE = kPrMaxFx + kMaxFoldDim;
static_assert((kPrThreads2 / 32) * kPrCpw >= kMaxFoldDim + 2 * kPrMaxFx, "coordinates a warp");
static_assert(2 * kPrThreads2 >= 32 * kPrMaxE && kPrThreads2 == 2 * 32 * (kUfHid / 4), "element slots");
__global__ void __launch_bounds__(kPrThreads2, 2)
    k_products_bwd(int64_t n, int dim, int Fx, const int32_t *perm, const float *x, const float *p, const float *wp,
                   const float *ws, const float *wd, const float *dU, const float *dV, float *gx, float *gp,
                   double *part) {
  __shared__ float w[(kMaxFoldDim + 2 * kPrMaxFx) * kUfHid];
  __shared__ float su[2][32][kPrPad], sv[2][32][kPrPad], se[2][32][kPrMaxE + 1], sg[32][kPrMaxE + 1];
  __shared__ int32_t sm[3][32];
  load_pw(w, dim, Fx, wp, ws, wd);
  const int C = dim + 2 * Fx, E = Fx + dim, t = (int)threadIdx.x, wid = t >> 5, lane = t & 31;
  const int64_t ntiles = (n + 31) / 32, step = gridDim.x;
  auto count = [&](int64_t T) { return n - 32 * T < 32 ? (int)(n - 32 * T) : 32; };
  auto index = [&](int64_t T, int l) -> int32_t {
    const int64_t a = 32 * T + l;
    return a >= n ? 0 : perm ? __ldg(perm + a) : (int32_t)a;
  };
  // one tile's loads into registers: thread t's float4 of the dU (t < 128) or dV rows, and its two
  // element slots q = t, t + 256 (node q / E, element q % E: x then p)
  float4 ru;
  float re[2] = {0.f, 0.f};
  auto fetch = [&](int64_t T, const int32_t *ms) {
    const int cnt = count(T), node = (t & 127) >> 2, k = 4 * (t & 3);
    const float *src = t < 128 ? dU : dV;
    ru = src && node < cnt ? *reinterpret_cast<const float4 *>(src + (32 * T + node) * kUfHid + k)
                           : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int sl = 0; sl < 2; ++sl) {
      const int q = t + kPrThreads2 * sl;
      re[sl] = 0.f;
      if (q < cnt * E) {
        const int nd = q / E, e = q % E;
        const int64_t m = ms[nd];
        re[sl] = e < Fx ? x[m * Fx + e] : p[m * dim + (e - Fx)];
      }
    }
  };
  auto put = [&](int b, int64_t T) {
    const int cnt = count(T), node = (t & 127) >> 2, k = 4 * (t & 3);
    float *d = t < 128 ? &su[b][node][k] : &sv[b][node][k];
    d[0] = ru.x, d[1] = ru.y, d[2] = ru.z, d[3] = ru.w;
#pragma unroll
    for (int sl = 0; sl < 2; ++sl) {
      const int q = t + kPrThreads2 * sl;
      if (q < cnt * E) se[b][q / E][q % E] = re[sl];
    }
  };
  float acc[kPrCpw][kUfHid];
#pragma unroll
  for (int ci = 0; ci < kPrCpw; ++ci)
#pragma unroll
    for (int k = 0; k < kUfHid; ++k)
      acc[ci][k] = 0.f;
  int64_t T = blockIdx.x;
  if (T < ntiles) { // block-uniform
    if (t < 32) sm[0][t] = index(T, t), sm[1][t] = T + step < ntiles ? index(T + step, t) : 0;
    __syncthreads();
    fetch(T, sm[0]);
    put(0, T);
    __syncthreads();
  }
  for (int r = 0; T < ntiles; ++r, T += step) { // block-uniform
    const int b = r & 1, cnt = count(T);
    const int64_t T1 = T + step, T2 = T + 2 * step;
    // (1) the next tiles' loads (perm two ahead, rows and elements one ahead): into registers
    int32_t pn = 0;
    if (t < 32 && T2 < ntiles) pn = index(T2, t);
    if (T1 < ntiles) fetch(T1, sm[(r + 1) % 3]);
    // (2) this tile, from shared memory
    if (lane < cnt) {
#pragma unroll
      for (int ci = 0; ci < kPrCpw; ++ci) {
        const int c = wid + 8 * ci;
        if (c >= C) break;
        const float *u = su[b][lane], *v = sv[b][lane];
        if (c < dim) {
          const float *wr = w + c * kUfHid;
          const float pv = se[b][lane][Fx + c];
          float g = 0.f;
#pragma unroll
          for (int k = 0; k < kUfHid; ++k) {
            const float e = u[k] - v[k];
            g = fmaf(wr[k], e, g);
            acc[ci][k] = fmaf(pv, e, acc[ci][k]);
          }
          sg[lane][Fx + c] = g;
        } else if (c < dim + Fx) {
          const int f = c - dim;
          const float xv = se[b][lane][f], *wa = w + (dim + f) * kUfHid, *wb = w + (dim + Fx + f) * kUfHid;
          float g = 0.f;
#pragma unroll
          for (int k = 0; k < kUfHid; ++k) {
            acc[ci][k] = fmaf(xv, u[k], acc[ci][k]);
            g = fmaf(wa[k], u[k], g);
            g = fmaf(wb[k], v[k], g);
          }
          sg[lane][f] = g;
        } else {
          const float xv = se[b][lane][c - dim - Fx];
#pragma unroll
          for (int k = 0; k < kUfHid; ++k)
            acc[ci][k] = fmaf(xv, v[k], acc[ci][k]);
        }
      }
    }
    __syncthreads();
    // (3) this tile's gradients at the old indices; the next tile into the other buffer
#pragma unroll
    for (int sl = 0; sl < 2; ++sl) {
      const int q = t + kPrThreads2 * sl;
      if (q < cnt * E) {
        const int nd = q / E, e = q % E;
        const int64_t m = sm[r % 3][nd];
        if (e < Fx) {
          if (gx) atomicAdd(gx + m * Fx + e, sg[nd][e]);
        } else if (gp) {
          atomicAdd(gp + m * dim + (e - Fx), sg[nd][e]);
        }
      }
    }
    if (T1 < ntiles) put(b ^ 1, T1);
    if (t < 32) sm[(r + 2) % 3][t] = pn;
    __syncthreads();
  }
  if (!part) return; // grid-uniform
#pragma unroll
  for (int ci = 0; ci < kPrCpw; ++ci) {
    const int c = wid + 8 * ci;
    if (c >= C) break; // warp-uniform
    double v[kUfHid];
#pragma unroll
    for (int k = 0; k < kUfHid; ++k) {
      v[k] = (double)acc[ci][k];
      for (int o = 16; o; o >>= 1)
        v[k] += __shfl_xor_sync(0xffffffffu, v[k], o);
    }
    if (lane == 0) {
      double *dst = part + ((int64_t)blockIdx.x * C + c) * kUfHid;
#pragma unroll
      for (int k = 0; k < kUfHid; ++k)
        dst[k] = v[k];
    }
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
  k_products_bwd<<<kPrBlocks, kPrThreads2, 0, s>>>(n, dim, Fx, perm, x, p, wp, ws, wd, dU, dV, gx, gp, part);
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
