// Row reductions over the last dim (cuda/reduce.h).
#include "common.cuh"
#include "reduce.h"

// Short rows (cols <= 32): a thread per row. Longer rows: a warp per row, lanes striding the row and a
// fixed shuffle tree, so the order of the sum never depends on scheduling.
template <typename T>
__global__ void k_sum_last_thread(const T *__restrict__ x, long long rows, long long cols, T *__restrict__ y) {
  for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < rows;
       r += (long long)gridDim.x * blockDim.x) {
    float s = 0.f;
    for (long long c = 0; c < cols; c++)
      s += tgc_to_f(x[r * cols + c]);
    y[r] = tgc_from_f<T>(s);
  }
}

template <typename T>
__global__ void k_sum_last_warp(const T *__restrict__ x, long long rows, long long cols, T *__restrict__ y) {
  const int lane = threadIdx.x & 31;
  const long long warps = (long long)gridDim.x * (blockDim.x / 32);
  for (long long r = blockIdx.x * (long long)(blockDim.x / 32) + threadIdx.x / 32; r < rows; r += warps) {
    float s = 0.f;
    for (long long c = lane; c < cols; c += 32)
      s += tgc_to_f(x[r * cols + c]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) y[r] = tgc_from_f<T>(s);
  }
}

template <typename T>
__global__ void k_sum_last_bwd(const T *__restrict__ gy, long long rows, long long cols, T *__restrict__ gx) {
  const long long n = rows * cols;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    gx[i] = tgc_from_f<T>(tgc_to_f(gx[i]) + tgc_to_f(gy[i / cols]));
}

template <typename T>
static tg_status sum_last_fwd(cudaStream_t s, const void *x, long long rows, long long cols, void *y) {
  if (cols <= 32)
    k_sum_last_thread<T><<<tgc_blocks(rows, 256), 256, 0, s>>>((const T *)x, rows, cols, (T *)y);
  else
    k_sum_last_warp<T><<<tgc_blocks(rows * 32, 256), 256, 0, s>>>((const T *)x, rows, cols, (T *)y);
  TGC_LAUNCHED("sum_last_forward");
  return TG_OK;
}

template <typename T>
static tg_status sum_last_bwd(cudaStream_t s, const void *gy, long long rows, long long cols, void *gx) {
  k_sum_last_bwd<T><<<tgc_blocks(rows * cols, 256), 256, 0, s>>>((const T *)gy, rows, cols, (T *)gx);
  TGC_LAUNCHED("sum_last_backward");
  return TG_OK;
}

extern "C" tg_status cuda_sum_last_forward(tgc_stream s, tg_dtype dt, const void *x, int64_t rows, int64_t cols,
                                           void *y) {
  if (rows <= 0 || cols <= 0) return TG_OK;
  switch (dt) {
  case TG_F32: return sum_last_fwd<float>(s, x, rows, cols, y);
  case TG_F16: return sum_last_fwd<__half>(s, x, rows, cols, y);
  case TG_BF16: return sum_last_fwd<__nv_bfloat16>(s, x, rows, cols, y);
  default: tgc_set_error("cuda_sum_last_forward: dtype %s", tg_dtype_name(dt)); return TG_ERR_DTYPE;
  }
}

extern "C" tg_status cuda_sum_last_backward(tgc_stream s, tg_dtype dt, const void *gy, int64_t rows, int64_t cols,
                                            void *gx) {
  if (rows <= 0 || cols <= 0) return TG_OK;
  switch (dt) {
  case TG_F32: return sum_last_bwd<float>(s, gy, rows, cols, gx);
  case TG_F16: return sum_last_bwd<__half>(s, gy, rows, cols, gx);
  case TG_BF16: return sum_last_bwd<__nv_bfloat16>(s, gy, rows, cols, gx);
  default: tgc_set_error("cuda_sum_last_backward: dtype %s", tg_dtype_name(dt)); return TG_ERR_DTYPE;
  }
}
