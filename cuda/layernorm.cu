// Layer norm over the last dim on the device. Row kernels (forward, backward dx): one warp per
// row for n <= 1024 (8 rows per block), one block per row above, reductions with warp shuffles.
// Weight and bias gradients: a column kernel writes per-chunk partial sums of gy xhat and gy
// over a chunk of rows, then one kernel adds the chunks in a fixed order into gw / gb, so the
// result is deterministic and any number of rows works. Math in f32, storage in T.
#include "common.cuh"
#include "finite.cuh"
#include "layernorm.h"

// Row group = the block's x-extent: a warp (blockDim.x == 32) or the whole block (blockDim.y == 1).
// The row kernels test every element of y / gx they store for anomaly mode (nf, finite.cuh).

// mean = <x>, var = <(x - mean)^2> (two passes over the row), rstd = 1/sqrt(var + eps), y = (x - mean) rstd w + b.
template <typename T>
__global__ void k_ln_fwd(const T *__restrict__ x, const T *__restrict__ w, const T *__restrict__ b, float eps,
                         T *__restrict__ y, float *__restrict__ mean, float *__restrict__ rstd, long long rows,
                         long long n, tgc_nf nf) {
  bool bad = false;
  for (long long r = blockIdx.x * (long long)blockDim.y + threadIdx.y; r < rows;
       r += (long long)gridDim.x * blockDim.y) {
    const T *xr = x + r * n;
    T *yr = y + r * n;
    // Work relative to k = x[r, 0]: mu = <x - k>, x - mean = (x - k) - mu. Rows far from zero
    // (|x| ~ 1e3) then keep their digits instead of losing them to an f32 mean near 1e3.
    float k = tgc_to_f(xr[0]), s = 0.f;
    for (long long j = threadIdx.x; j < n; j += blockDim.x)
      s += tgc_to_f(xr[j]) - k;
    float mu = tgc_row_sum(s) / (float)n;
    float v = 0.f;
    for (long long j = threadIdx.x; j < n; j += blockDim.x) {
      float d = (tgc_to_f(xr[j]) - k) - mu;
      v += d * d;
    }
    float rs = 1.f / sqrtf(tgc_row_sum(v) / (float)n + eps);
    for (long long j = threadIdx.x; j < n; j += blockDim.x) {
      T o = tgc_from_f<T>(((tgc_to_f(xr[j]) - k) - mu) * rs * tgc_to_f(w[j]) + tgc_to_f(b[j]));
      bad |= tgc_nonfinite(o);
      yr[j] = o;
    }
    if (threadIdx.x == 0) {
      if (mean) mean[r] = k + mu;
      if (rstd) rstd[r] = rs;
    }
  }
  tgc_nf_raise(nf, bad);
}

// gx += rstd (g - <g> - xhat <g xhat>), g = gy w.
template <typename T>
__global__ void k_ln_bwd_dx(const T *__restrict__ x, const T *__restrict__ w, const float *__restrict__ mean,
                            const float *__restrict__ rstd, const T *__restrict__ gy, T *gx, long long rows,
                            long long n, tgc_nf nf) {
  bool bad = false;
  for (long long r = blockIdx.x * (long long)blockDim.y + threadIdx.y; r < rows;
       r += (long long)gridDim.x * blockDim.y) {
    const T *xr = x + r * n, *gr = gy + r * n;
    T *dr = gx + r * n;
    float m = mean[r], rs = rstd[r], sg = 0.f, sgx = 0.f;
    for (long long j = threadIdx.x; j < n; j += blockDim.x) {
      float g = tgc_to_f(gr[j]) * tgc_to_f(w[j]);
      sg += g;
      sgx += g * (tgc_to_f(xr[j]) - m) * rs;
    }
    sg = tgc_row_sum(sg) / (float)n;
    sgx = tgc_row_sum(sgx) / (float)n;
    for (long long j = threadIdx.x; j < n; j += blockDim.x) {
      float xh = (tgc_to_f(xr[j]) - m) * rs;
      float g = tgc_to_f(gr[j]) * tgc_to_f(w[j]);
      T o = tgc_from_f<T>(tgc_to_f(dr[j]) + rs * (g - sg - xh * sgx));
      bad |= tgc_nonfinite(o);
      dr[j] = o;
    }
  }
  tgc_nf_raise(nf, bad);
}

// Register-cached forms of the two row kernels for rows of at most 32 * KV vectors (a warp per
// row, 16-byte vectors, n % N == 0, vector-aligned bases): the row is read from memory once
// instead of once per pass. Same formulas as above.
template <typename T, int KV>
__global__ void __launch_bounds__(256)
    k_ln_fwd_vec(const T *__restrict__ x, const T *__restrict__ w, const T *__restrict__ b, float eps,
                 T *__restrict__ y, float *__restrict__ mean, float *__restrict__ rstd, long long rows, int n,
                 tgc_nf nf) {
  constexpr int N = tgc_vec_n<T>();
  using V = tgc_pack<T, N>;
  const int nv = n / N, lane = threadIdx.x;
  bool bad = false;
  for (long long r = blockIdx.x * (long long)blockDim.y + threadIdx.y; r < rows;
       r += (long long)gridDim.x * blockDim.y) {
    const V *xr = reinterpret_cast<const V *>(x + r * n);
    float c[KV][N];
    const float k = tgc_to_f(x[r * n]);
    float s = 0.f;
#pragma unroll
    for (int q = 0; q < KV; q++) {
      const int v = lane + 32 * q;
      if (v < nv) {
        V a = xr[v];
#pragma unroll
        for (int e = 0; e < N; e++) {
          c[q][e] = tgc_to_f(a.e[e]) - k;
          s += c[q][e];
        }
      }
    }
    const float mu = tgc_warp_sum(s) / (float)n;
    float var = 0.f;
#pragma unroll
    for (int q = 0; q < KV; q++)
      if (lane + 32 * q < nv)
#pragma unroll
        for (int e = 0; e < N; e++) {
          c[q][e] -= mu;
          var += c[q][e] * c[q][e];
        }
    const float rs = 1.f / sqrtf(tgc_warp_sum(var) / (float)n + eps);
    V *yr = reinterpret_cast<V *>(y + r * n);
#pragma unroll
    for (int q = 0; q < KV; q++) {
      const int v = lane + 32 * q;
      if (v < nv) {
        V wv = reinterpret_cast<const V *>(w)[v], bv = reinterpret_cast<const V *>(b)[v], o;
#pragma unroll
        for (int e = 0; e < N; e++) {
          o.e[e] = tgc_from_f<T>(c[q][e] * rs * tgc_to_f(wv.e[e]) + tgc_to_f(bv.e[e]));
          bad |= tgc_nonfinite(o.e[e]);
        }
        yr[v] = o;
      }
    }
    if (lane == 0) {
      if (mean) mean[r] = k + mu;
      if (rstd) rstd[r] = rs;
    }
  }
  tgc_nf_raise(nf, bad);
}

template <typename T, int KV>
__global__ void __launch_bounds__(256)
    k_ln_bwd_dx_vec(const T *__restrict__ x, const T *__restrict__ w, const float *__restrict__ mean,
                    const float *__restrict__ rstd, const T *__restrict__ gy, T *gx, long long rows, int n, tgc_nf nf) {
  constexpr int N = tgc_vec_n<T>();
  using V = tgc_pack<T, N>;
  const int nv = n / N, lane = threadIdx.x;
  bool bad = false;
  for (long long r = blockIdx.x * (long long)blockDim.y + threadIdx.y; r < rows;
       r += (long long)gridDim.x * blockDim.y) {
    const V *xr = reinterpret_cast<const V *>(x + r * n), *gr = reinterpret_cast<const V *>(gy + r * n);
    const float m = mean[r], rs = rstd[r];
    float g[KV][N], xh[KV][N], sg = 0.f, sgx = 0.f;
#pragma unroll
    for (int q = 0; q < KV; q++) {
      const int v = lane + 32 * q;
      if (v < nv) {
        V a = xr[v], gv = gr[v], wv = reinterpret_cast<const V *>(w)[v];
#pragma unroll
        for (int e = 0; e < N; e++) {
          g[q][e] = tgc_to_f(gv.e[e]) * tgc_to_f(wv.e[e]);
          xh[q][e] = (tgc_to_f(a.e[e]) - m) * rs;
          sg += g[q][e];
          sgx += g[q][e] * xh[q][e];
        }
      }
    }
    sg = tgc_warp_sum(sg) / (float)n;
    sgx = tgc_warp_sum(sgx) / (float)n;
    V *dr = reinterpret_cast<V *>(gx + r * n);
#pragma unroll
    for (int q = 0; q < KV; q++) {
      const int v = lane + 32 * q;
      if (v < nv) {
        V o = dr[v];
#pragma unroll
        for (int e = 0; e < N; e++) {
          o.e[e] = tgc_from_f<T>(tgc_to_f(o.e[e]) + rs * (g[q][e] - sg - xh[q][e] * sgx));
          bad |= tgc_nonfinite(o.e[e]);
        }
        dr[v] = o;
      }
    }
  }
  tgc_nf_raise(nf, bad);
}

// Vector rows per lane (KV) the register-cached kernels need for rows of n, or 0 when they do not
// apply (n not a multiple of the vector, rows longer than 32 * 8 vectors, unaligned bases).
template <typename T> static int vec_lanes(long long n, std::initializer_list<const void *> ps) {
  constexpr int N = tgc_vec_n<T>();
  if (n % N != 0 || n > 32LL * 8 * N || !tgc_vec_count<T>(n, ps)) return 0;
  long long kv = (n / N + 31) / 32;
  return kv <= 2 ? 2 : kv <= 4 ? 4 : 8;
}

// Partial column sums over rows [c * rpc, (c + 1) * rpc) for chunk c = blockIdx.y:
// pw[c, j] = sum gy xhat, pb[c, j] = sum gy. Threads take consecutive columns (coalesced).
template <typename T>
__global__ void k_ln_bwd_partial(const T *__restrict__ x, const float *__restrict__ mean,
                                 const float *__restrict__ rstd, const T *__restrict__ gy, float *__restrict__ pw,
                                 float *__restrict__ pb, long long rows, long long n, long long rpc) {
  long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (j >= n) return;
  long long r0 = blockIdx.y * rpc, r1 = min(rows, r0 + rpc);
  float sw = 0.f, sb = 0.f;
  for (long long r = r0; r < r1; r++) {
    float g = tgc_to_f(gy[r * n + j]);
    sw += g * (tgc_to_f(x[r * n + j]) - mean[r]) * rstd[r];
    sb += g;
  }
  pw[blockIdx.y * n + j] = sw;
  pb[blockIdx.y * n + j] = sb;
}

// gw[j] += sum_c pw[c, j]; gb[j] += sum_c pb[c, j]. Block (32 columns x 16 lanes): lane y sums chunks
// y, y + 16, ... (coalesced across the 32 columns, 16 independent chains in flight), then the 16
// partials are added in a fixed order (deterministic). No __restrict__ on gw and gb: they may
// alias, and each update is its own read-modify-write in one thread.
constexpr int kFinCols = 32, kFinLanes = 16;
template <typename T>
__global__ void k_ln_bwd_finish(const float *__restrict__ pw, const float *__restrict__ pb, long long chunks,
                                long long n, T *gw, T *gb) {
  __shared__ float shw[kFinLanes][kFinCols + 1], shb[kFinLanes][kFinCols + 1];
  const long long j = blockIdx.x * (long long)kFinCols + threadIdx.x;
  float sw = 0.f, sb = 0.f;
  if (j < n)
    for (long long c = threadIdx.y; c < chunks; c += kFinLanes) {
      sw += pw[c * n + j];
      sb += pb[c * n + j];
    }
  shw[threadIdx.y][threadIdx.x] = sw;
  shb[threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  if (threadIdx.y == 0 && j < n) {
    for (int k = 1; k < kFinLanes; k++) {
      sw += shw[k][threadIdx.x];
      sb += shb[k][threadIdx.x];
    }
    if (gw) gw[j] = tgc_from_f<T>(tgc_to_f(gw[j]) + sw);
    if (gb) gb[j] = tgc_from_f<T>(tgc_to_f(gb[j]) + sb);
  }
}

// Launch shape of the row kernels.
static void row_shape(long long rows, long long n, dim3 *grid, dim3 *block) {
  if (n <= 1024) {
    *block = dim3(32, 8);
    *grid = dim3(tgc_blocks(rows, 8));
  } else {
    *block = dim3(n <= 4096 ? 256 : n <= 16384 ? 512 : 1024, 1);
    *grid = dim3(tgc_blocks(rows, 1));
  }
}

// Row chunking of the column reduction: at least 32 rows per chunk, at most 1024 chunks and at
// most 2^20 partial floats per buffer (so the workspace stays <= 8 MiB for n <= 2^20).
static void chunking(long long rows, long long n, long long *chunks, long long *rpc) {
  long long cap = (1LL << 20) / n;
  if (cap > 1024) cap = 1024;
  if (cap < 1) cap = 1;
  long long c = (rows + 31) / 32;
  if (c > cap) c = cap;
  if (c < 1) c = 1;
  *rpc = (rows + c - 1) / c;
  *chunks = (rows + *rpc - 1) / *rpc;
}

extern "C" size_t cuda_layernorm_backward_workspace(int64_t rows, int64_t n) {
  if (rows <= 0 || n <= 0) return 0;
  long long chunks, rpc;
  chunking(rows, n, &chunks, &rpc);
  return 2 * (size_t)chunks * (size_t)n * sizeof(float);
}

template <typename T>
static tg_status ln_fwd(cudaStream_t s, const void *x, const void *w, const void *b, double eps, void *y, float *mean,
                        float *rstd, long long rows, long long n) {
  dim3 grid, block;
  row_shape(rows, n, &grid, &block);
  const int kv = vec_lanes<T>(n, {x, w, b, y});
  tgc_nf nf = tgc_nf_take(s);
  if (kv) {
    auto kern = kv == 2 ? k_ln_fwd_vec<T, 2> : kv == 4 ? k_ln_fwd_vec<T, 4> : k_ln_fwd_vec<T, 8>;
    kern<<<tgc_blocks(rows, 8), dim3(32, 8), 0, s>>>((const T *)x, (const T *)w, (const T *)b, (float)eps, (T *)y, mean,
                                                     rstd, rows, (int)n, nf);
  } else {
    k_ln_fwd<T>
        <<<grid, block, 0, s>>>((const T *)x, (const T *)w, (const T *)b, (float)eps, (T *)y, mean, rstd, rows, n, nf);
  }
  TGC_LAUNCHED("layernorm_fwd");
  tgc_nf_cover(nf, y, rows * n);
  return TG_OK;
}

template <typename T>
static tg_status ln_bwd(cudaStream_t s, const void *x, const void *w, const float *mean, const float *rstd,
                        const void *gy, void *gx, void *gw, void *gb, long long rows, long long n, void *ws,
                        size_t ws_bytes) {
  if (gx) {
    dim3 grid, block;
    row_shape(rows, n, &grid, &block);
    const int kv = vec_lanes<T>(n, {x, w, gy, gx});
    tgc_nf nf = tgc_nf_take(s);
    if (kv) {
      auto kern = kv == 2 ? k_ln_bwd_dx_vec<T, 2> : kv == 4 ? k_ln_bwd_dx_vec<T, 4> : k_ln_bwd_dx_vec<T, 8>;
      kern<<<tgc_blocks(rows, 8), dim3(32, 8), 0, s>>>((const T *)x, (const T *)w, mean, rstd, (const T *)gy, (T *)gx,
                                                       rows, (int)n, nf);
    } else {
      k_ln_bwd_dx<T>
          <<<grid, block, 0, s>>>((const T *)x, (const T *)w, mean, rstd, (const T *)gy, (T *)gx, rows, n, nf);
    }
    TGC_LAUNCHED("layernorm_bwd_dx");
    tgc_nf_cover(nf, gx, rows * n);
  }
  if (!gw && !gb) return TG_OK;
  size_t need = cuda_layernorm_backward_workspace(rows, n);
  if (!ws || ws_bytes < need) {
    tgc_set_error("layernorm backward: workspace of %zu bytes; expected at least %zu", ws_bytes, need);
    return TG_ERR_INTERNAL;
  }
  long long chunks, rpc;
  chunking(rows, n, &chunks, &rpc);
  float *pw = (float *)ws, *pb = pw + chunks * n;
  dim3 grid((unsigned)((n + 255) / 256), (unsigned)chunks);
  k_ln_bwd_partial<T><<<grid, 256, 0, s>>>((const T *)x, mean, rstd, (const T *)gy, pw, pb, rows, n, rpc);
  TGC_LAUNCHED("layernorm_bwd_partial");
  k_ln_bwd_finish<T><<<(unsigned)((n + kFinCols - 1) / kFinCols), dim3(kFinCols, kFinLanes), 0, s>>>(pw, pb, chunks, n,
                                                                                                     (T *)gw, (T *)gb);
  TGC_LAUNCHED("layernorm_bwd_finish");
  return TG_OK;
}

#define DISPATCH(dt, FN, ...) TGC_DISPATCH_FLOAT(dt, "layernorm", FN, __VA_ARGS__)

extern "C" tg_status cuda_layernorm_forward(tgc_stream s, tg_dtype dt, const void *x, const void *w, const void *b,
                                            double eps, void *y, float *mean, float *rstd, int64_t rows, int64_t n) {
  if (rows <= 0 || n <= 0) return TG_OK;
  DISPATCH(dt, ln_fwd, s, x, w, b, eps, y, mean, rstd, rows, n)
}

extern "C" tg_status cuda_layernorm_backward(tgc_stream s, tg_dtype dt, const void *x, const void *w, const float *mean,
                                             const float *rstd, const void *gy, void *gx, void *gw, void *gb,
                                             int64_t rows, int64_t n, void *workspace, size_t workspace_bytes) {
  if (rows <= 0 || n <= 0) return TG_OK;
  DISPATCH(dt, ln_bwd, s, x, w, mean, rstd, gy, gx, gw, gb, rows, n, workspace, workspace_bytes)
}
