// Cross-entropy and MSE on the device. Math in f32 registers, storage in T (f32, f16, bf16).
#include "common.cuh"
#include "loss.h"

// ---------------------------------------------------------------- cross-entropy forward
// Row r's log-sum-exp in one pass over x with the online (max, sum) pair
//   m = max_j x_j,  s = sum_j exp(x_j - m),  lse = m + log s;
// each thread folds its strided elements in, then the pairs are merged across the row's threads
// (merge rescales the pair with the smaller max). A warp per row when C <= CE_WARP_MAX_C,
// else a block of CE_BLOCK threads per row (C up to 50k and beyond: threads stride over the row).
#define CE_WARP_MAX_C 1024
#define CE_BLOCK 512

struct MaxSum {
  float m, s;
};

__device__ __forceinline__ MaxSum ms_add(MaxSum a, float x) {
  if (x == -INFINITY) return a; // contributes exp(-inf) = 0 (and -inf - -inf would be NaN)
  if (x > a.m) {
    a.s = a.s * expf(a.m - x) + 1.f;
    a.m = x;
  } else {
    a.s += expf(x - a.m); // NaN logits fall here and make the row NaN, as on the host
  }
  return a;
}

__device__ __forceinline__ MaxSum ms_merge(MaxSum a, MaxSum b) {
  float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return a; // both empty
  MaxSum r;
  r.m = m;
  r.s = a.s * expf(a.m - m) + b.s * expf(b.m - m);
  return r;
}

__device__ __forceinline__ MaxSum ms_warp(MaxSum v) {
  for (int o = 16; o; o >>= 1) {
    MaxSum w;
    w.m = __shfl_xor_sync(0xffffffffu, v.m, o);
    w.s = __shfl_xor_sync(0xffffffffu, v.s, o);
    v = ms_merge(v, w);
  }
  return v;
}

__device__ __forceinline__ float ms_lse(MaxSum v) { return v.m == -INFINITY ? -INFINITY : v.m + logf(v.s); }

// One warp per row; blockDim.x = 256 (8 rows per block).
template <typename T>
__global__ void k_ce_lse_warp(const T *__restrict__ x, const int32_t *__restrict__ tg, long long rows, long long C,
                              int ignore, float *__restrict__ lse) {
  long long r = blockIdx.x * (long long)(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (r >= rows) return; // whole warp leaves together
  if (tg[r] == ignore) return;
  int lane = threadIdx.x & 31;
  const T *row = x + r * C;
  MaxSum v = {-INFINITY, 0.f};
  for (long long j = lane; j < C; j += 32)
    v = ms_add(v, tgc_to_f(row[j]));
  v = ms_warp(v);
  if (lane == 0) lse[r] = ms_lse(v);
}

// One block of CE_BLOCK threads per row.
template <typename T>
__global__ void k_ce_lse_block(const T *__restrict__ x, const int32_t *__restrict__ tg, long long C, int ignore,
                               float *__restrict__ lse) {
  __shared__ MaxSum sh[CE_BLOCK / 32];
  long long r = blockIdx.x;
  if (tg[r] == ignore) return; // uniform over the block: no thread reaches the barrier
  const T *row = x + r * C;
  MaxSum v = {-INFINITY, 0.f};
  for (long long j = threadIdx.x; j < C; j += CE_BLOCK)
    v = ms_add(v, tgc_to_f(row[j]));
  v = ms_warp(v);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    MaxSum w = threadIdx.x < CE_BLOCK / 32 ? sh[threadIdx.x] : MaxSum{-INFINITY, 0.f};
    w = ms_warp(w);
    if (threadIdx.x == 0) lse[r] = ms_lse(w);
  }
}

// *y = inv_count * sum over counted rows of (lse_r - x_r,t_r). One block: a deterministic order.
template <typename T>
__global__ void k_ce_mean(const T *__restrict__ x, const int32_t *__restrict__ tg, const float *__restrict__ lse,
                          long long rows, long long C, int ignore, float inv_count, T *__restrict__ y) {
  float s = 0.f;
  for (long long r = threadIdx.x; r < rows; r += blockDim.x) {
    int k = tg[r];
    if (k != ignore) s += lse[r] - tgc_to_f(x[r * C + k]);
  }
  s = tgc_block_sum(s);
  if (threadIdx.x == 0) *y = tgc_from_f<T>(s * inv_count);
}

template <typename T>
static tg_status ce_fwd(cudaStream_t s, const void *x, const int32_t *tg, long long rows, long long C, int ignore,
                        long long count, float *lse, void *y) {
  if (count > 0) {
    if (C <= CE_WARP_MAX_C) {
      k_ce_lse_warp<T><<<(unsigned)((rows + 7) / 8), 256, 0, s>>>((const T *)x, tg, rows, C, ignore, lse);
    } else {
      if (rows > 0x7fffffffLL) {
        tgc_set_error("cross_entropy: %lld rows exceed the grid limit", rows);
        return TG_ERR_UNSUPPORTED;
      }
      k_ce_lse_block<T><<<(unsigned)rows, CE_BLOCK, 0, s>>>((const T *)x, tg, C, ignore, lse);
    }
    TGC_LAUNCHED("ce_lse");
  }
  float inv = count > 0 ? (float)(1.0 / (double)count) : 0.f; // all rows ignored: loss 0
  k_ce_mean<T><<<1, 1024, 0, s>>>((const T *)x, tg, lse, rows, C, ignore, inv, (T *)y);
  TGC_LAUNCHED("ce_mean");
  return TG_OK;
}

// ---------------------------------------------------------------- cross-entropy backward
// gx_rj += g (exp(x_rj - lse_r) - [j == t_r]), g = gy / count; elementwise over [rows, C].
template <typename T>
__global__ void k_ce_bwd(const T *__restrict__ x, const int32_t *__restrict__ tg, const float *__restrict__ lse,
                         long long rows, long long C, int ignore, float inv_count, const T *__restrict__ gy,
                         T *__restrict__ gx) {
  float g = tgc_to_f(gy[0]) * inv_count;
  long long n = rows * C;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    long long r = i / C, j = i - r * C;
    int k = tg[r];
    if (k == ignore) continue;
    float p = expf(tgc_to_f(x[i]) - lse[r]);
    gx[i] = tgc_from_f<T>(tgc_to_f(gx[i]) + g * (p - (j == k ? 1.f : 0.f)));
  }
}

template <typename T>
static tg_status ce_bwd(cudaStream_t s, const void *x, const int32_t *tg, long long rows, long long C, int ignore,
                        long long count, const float *lse, const void *gy, void *gx) {
  if (count <= 0) return TG_OK;
  long long n = rows * C;
  k_ce_bwd<T><<<tgc_blocks(n, 256), 256, 0, s>>>((const T *)x, tg, lse, rows, C, ignore, (float)(1.0 / (double)count),
                                                 (const T *)gy, (T *)gx);
  TGC_LAUNCHED("ce_bwd");
  return TG_OK;
}

// ---------------------------------------------------------------- mse
template <typename T>
__global__ void k_mse_partial(const T *__restrict__ a, const T *__restrict__ b, long long n, float *__restrict__ part) {
  float s = 0.f;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    float d = tgc_to_f(a[i]) - tgc_to_f(b[i]);
    s += d * d;
  }
  s = tgc_block_sum(s);
  if (threadIdx.x == 0) part[blockIdx.x] = s;
}

template <typename T> __global__ void k_mse_final(const float *__restrict__ part, int np, float inv_n, T *y) {
  float s = 0.f;
  for (int i = threadIdx.x; i < np; i += blockDim.x)
    s += part[i];
  s = tgc_block_sum(s);
  if (threadIdx.x == 0) *y = tgc_from_f<T>(s * inv_n);
}

// The grid depends only on n, and each block's and the final sum run in a fixed order: deterministic.
template <typename T>
static tg_status mse_fwd(cudaStream_t s, const void *a, const void *b, long long n, float *part, void *y) {
  int blocks = (int)tgc_blocks(n, 256, CUDA_MSE_PARTIALS);
  k_mse_partial<T><<<blocks, 256, 0, s>>>((const T *)a, (const T *)b, n, part);
  TGC_LAUNCHED("mse_partial");
  k_mse_final<T><<<1, 1024, 0, s>>>(part, blocks, (float)(1.0 / (double)n), (T *)y);
  TGC_LAUNCHED("mse_final");
  return TG_OK;
}

// Both gradients in one thread per element, so mse(x, x) (ga == gb) adds +d and -d in order.
template <typename T>
__global__ void k_mse_bwd(const T *__restrict__ a, const T *__restrict__ b, long long n, float c,
                          const T *__restrict__ gy, T *ga, T *gb) {
  float g = c * tgc_to_f(gy[0]);
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    float d = g * (tgc_to_f(a[i]) - tgc_to_f(b[i]));
    if (ga) ga[i] = tgc_from_f<T>(tgc_to_f(ga[i]) + d);
    if (gb) gb[i] = tgc_from_f<T>(tgc_to_f(gb[i]) - d);
  }
}

template <typename T>
static tg_status mse_bwd(cudaStream_t s, const void *a, const void *b, long long n, const void *gy, void *ga,
                         void *gb) {
  k_mse_bwd<T><<<tgc_blocks(n, 256), 256, 0, s>>>((const T *)a, (const T *)b, n, (float)(2.0 / (double)n),
                                                  (const T *)gy, (T *)ga, (T *)gb);
  TGC_LAUNCHED("mse_bwd");
  return TG_OK;
}

// ---------------------------------------------------------------- launchers
#define DISPATCH(dt, FN, ...) TGC_DISPATCH_FLOAT(dt, "loss", FN, __VA_ARGS__)

extern "C" tg_status cuda_ce_forward(tgc_stream s, tg_dtype dt, const void *x, const int32_t *targets, int64_t rows,
                                     int64_t C, int32_t ignore, int64_t count, float *lse, void *y) {
  DISPATCH(dt, ce_fwd, s, x, targets, rows, C, ignore, count, lse, y)
}
extern "C" tg_status cuda_ce_backward(tgc_stream s, tg_dtype dt, const void *x, const int32_t *targets, int64_t rows,
                                      int64_t C, int32_t ignore, int64_t count, const float *lse, const void *gy,
                                      void *gx) {
  DISPATCH(dt, ce_bwd, s, x, targets, rows, C, ignore, count, lse, gy, gx)
}
extern "C" tg_status cuda_mse_forward(tgc_stream s, tg_dtype dt, const void *a, const void *b, int64_t n,
                                      float *partials, void *y) {
  DISPATCH(dt, mse_fwd, s, a, b, n, partials, y)
}
extern "C" tg_status cuda_mse_backward(tgc_stream s, tg_dtype dt, const void *a, const void *b, int64_t n,
                                       const void *gy, void *ga, void *gb) {
  DISPATCH(dt, mse_bwd, s, a, b, n, gy, ga, gb)
}
