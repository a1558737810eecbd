// Softmax over the last dim on the device: one warp per row for n <= 1024 (8 rows per block),
// one block per row above; row reductions with warp shuffles (and shared memory across warps).
// Math in f32 registers, storage in T.
#include "common.cuh"
#include "softmax.h"

// A "row group" is the x-extent of the block: 32 threads (a warp) or the whole block (blockDim.y == 1).
// Every thread of the group calls these with its partial value and gets the group's total back.
static __device__ float row_max(float v) {
  __shared__ float sh[32];
  v = tgc_warp_max(v);
  if (blockDim.x == 32) return v;
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  v = (threadIdx.x & 31) < (blockDim.x >> 5) ? sh[threadIdx.x & 31] : -INFINITY;
  return tgc_warp_max(v);
}

// y = exp(x - max) / sum exp(x - max), per row.
template <typename T>
__global__ void k_softmax_fwd(const T *__restrict__ x, T *__restrict__ y, long long rows, long long n) {
  for (long long r = blockIdx.x * (long long)blockDim.y + threadIdx.y; r < rows;
       r += (long long)gridDim.x * blockDim.y) {
    const T *xr = x + r * n;
    T *yr = y + r * n;
    float m = -INFINITY;
    for (long long j = threadIdx.x; j < n; j += blockDim.x)
      m = fmaxf(m, tgc_to_f(xr[j]));
    m = row_max(m);
    float s = 0.f;
    for (long long j = threadIdx.x; j < n; j += blockDim.x)
      s += expf(tgc_to_f(xr[j]) - m);
    float inv = 1.f / tgc_row_sum(s);
    for (long long j = threadIdx.x; j < n; j += blockDim.x)
      yr[j] = tgc_from_f<T>(expf(tgc_to_f(xr[j]) - m) * inv);
  }
}

// gx += y (gy - <gy, y>), per row.
template <typename T>
__global__ void k_softmax_bwd(const T *__restrict__ y, const T *__restrict__ gy, T *__restrict__ gx, long long rows,
                              long long n) {
  for (long long r = blockIdx.x * (long long)blockDim.y + threadIdx.y; r < rows;
       r += (long long)gridDim.x * blockDim.y) {
    const T *yr = y + r * n, *gr = gy + r * n;
    T *dr = gx + r * n;
    float d = 0.f;
    for (long long j = threadIdx.x; j < n; j += blockDim.x)
      d += tgc_to_f(gr[j]) * tgc_to_f(yr[j]);
    d = tgc_row_sum(d);
    for (long long j = threadIdx.x; j < n; j += blockDim.x)
      dr[j] = tgc_from_f<T>(tgc_to_f(dr[j]) + tgc_to_f(yr[j]) * (tgc_to_f(gr[j]) - d));
  }
}

// Launch shape: a warp per row (8 rows per block) for short rows, else a block per row.
static void row_shape(long long rows, long long n, dim3 *grid, dim3 *block) {
  if (n <= 1024) {
    *block = dim3(32, 8);
    *grid = dim3(tgc_blocks(rows, 8));
  } else {
    *block = dim3(n <= 4096 ? 256 : n <= 16384 ? 512 : 1024, 1);
    *grid = dim3(tgc_blocks(rows, 1));
  }
}

template <typename T>
static tg_status softmax_fwd(cudaStream_t s, const void *x, void *y, long long rows, long long n) {
  dim3 grid, block;
  row_shape(rows, n, &grid, &block);
  k_softmax_fwd<T><<<grid, block, 0, s>>>((const T *)x, (T *)y, rows, n);
  TGC_LAUNCHED("softmax_fwd");
  return TG_OK;
}

template <typename T>
static tg_status softmax_bwd(cudaStream_t s, const void *y, const void *gy, void *gx, long long rows, long long n) {
  dim3 grid, block;
  row_shape(rows, n, &grid, &block);
  k_softmax_bwd<T><<<grid, block, 0, s>>>((const T *)y, (const T *)gy, (T *)gx, rows, n);
  TGC_LAUNCHED("softmax_bwd");
  return TG_OK;
}

#define DISPATCH(dt, FN, ...) TGC_DISPATCH_FLOAT(dt, "softmax", FN, __VA_ARGS__)

extern "C" tg_status cuda_softmax_forward(tgc_stream s, tg_dtype dt, const void *x, void *y, int64_t rows, int64_t n) {
  if (rows <= 0 || n <= 0) return TG_OK;
  DISPATCH(dt, softmax_fwd, s, x, y, rows, n)
}

extern "C" tg_status cuda_softmax_backward(tgc_stream s, tg_dtype dt, const void *y, const void *gy, void *gx,
                                           int64_t rows, int64_t n) {
  if (rows <= 0 || n <= 0) return TG_OK;
  DISPATCH(dt, softmax_bwd, s, y, gy, gx, rows, n)
}
