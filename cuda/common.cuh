// Shared by the CUDA provider's .cu files: error mapping and small helpers. C++ only.
#pragma once
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <curand.h>

#include <initializer_list>

#include "launch.h"

// Sets the thread-local launcher message (tgc_error()).
void tgc_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// Maps a CUDA error to a status: out-of-memory errors -> TG_ERR_OUT_OF_MEMORY, others TG_ERR_DEVICE.
tg_status tgc_status_of(cudaError_t e);
tg_status tgc_status_of_cublas(cublasStatus_t e);
const char *tgc_cublas_string(cublasStatus_t e);

#define TGC_CUDA(call)                                                                                                 \
  do {                                                                                                                 \
    cudaError_t tgc_e_ = (call);                                                                                       \
    if (tgc_e_ != cudaSuccess) {                                                                                       \
      tgc_set_error("%s: %s (%s:%d)", #call, cudaGetErrorString(tgc_e_), __FILE__, __LINE__);                          \
      return tgc_status_of(tgc_e_);                                                                                    \
    }                                                                                                                  \
  } while (0)

// After a kernel launch: reports a launch failure (bad configuration, etc.).
#define TGC_LAUNCHED(name)                                                                                             \
  do {                                                                                                                 \
    cudaError_t tgc_e_ = cudaGetLastError();                                                                           \
    if (tgc_e_ != cudaSuccess) {                                                                                       \
      tgc_set_error("kernel %s: %s", name, cudaGetErrorString(tgc_e_));                                                \
      return tgc_status_of(tgc_e_);                                                                                    \
    }                                                                                                                  \
  } while (0)

#define TGC_CUBLAS(call)                                                                                               \
  do {                                                                                                                 \
    cublasStatus_t tgc_b_ = (call);                                                                                    \
    if (tgc_b_ != CUBLAS_STATUS_SUCCESS) {                                                                             \
      tgc_set_error("%s: %s (%s:%d)", #call, tgc_cublas_string(tgc_b_), __FILE__, __LINE__);                           \
      return tgc_status_of_cublas(tgc_b_);                                                                             \
    }                                                                                                                  \
  } while (0)

static inline unsigned tgc_blocks(long long n, int threads, long long cap = 65535LL * 32) {
  long long b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > cap) b = cap;
  return (unsigned)b;
}

// Element conversions used by kernels that take any float dtype.
template <typename T> __device__ __forceinline__ float tgc_to_f(T x) { return (float)x; }
template <> __device__ __forceinline__ float tgc_to_f<__half>(__half x) { return __half2float(x); }
template <> __device__ __forceinline__ float tgc_to_f<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T tgc_from_f(float x) { return (T)x; }
template <> __device__ __forceinline__ __half tgc_from_f<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 tgc_from_f<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// ---------------------------------------------------------------- vectorised elementwise access
// Memory-bound kernels move 16-byte vectors (4 f32, 8 f16/bf16 per access): one load instruction
// per vector instead of per element. A launcher takes the vector path only when every pointer is
// aligned to the vector size (tgc_aligned); the last n % N elements go through the scalar path.
template <typename T, int N> struct alignas(sizeof(T) * N) tgc_pack { T e[N]; };
template <typename T> constexpr int tgc_vec_n() { return 16 / (int)sizeof(T); }
template <typename T> using tgc_vec = tgc_pack<T, tgc_vec_n<T>()>;
static inline bool tgc_aligned(const void *p, size_t bytes) { return p == nullptr || (size_t)p % bytes == 0; }
// Vectors of T for pointers ps (NULLs ignored): n / N when all are 16-byte aligned, else 0.
template <typename T> static inline long long tgc_vec_count(long long n, std::initializer_list<const void *> ps) {
  for (const void *p : ps)
    if (!tgc_aligned(p, sizeof(tgc_vec<T>))) return 0;
  return n / tgc_vec_n<T>();
}
// Blocks of 256 for nv vectors plus the scalar tail of n - nv * N elements.
template <typename T> static inline unsigned tgc_vec_blocks(long long nv, long long n) {
  return tgc_blocks(nv + (n - nv * tgc_vec_n<T>()), 256);
}
// Kernel loops: one thread per vector for v < nv, then the scalar tail i in [from, n).
#define TGC_VEC_LOOP(v, nv)                                                                                            \
  for (long long v = blockIdx.x * (long long)blockDim.x + threadIdx.x; v < (nv); v += (long long)gridDim.x * blockDim.x)
#define TGC_TAIL_LOOP(i, from, n)                                                                                      \
  for (long long i = (from) + blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n);                               \
       i += (long long)gridDim.x * blockDim.x)

// ---------------------------------------------------------------- reductions (one home)
__device__ __forceinline__ float tgc_warp_sum(float v) {
  for (int o = 16; o; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float tgc_warp_max(float v) {
  for (int o = 16; o; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Sum over the block, returned to every thread (blockDim.x a multiple of 32, <= 1024). Safe to call
// repeatedly: the leading barrier keeps a previous call's readers ahead of this call's writers.
__device__ __forceinline__ float tgc_row_sum(float v) {
  __shared__ float sh[32];
  v = tgc_warp_sum(v);
  if (blockDim.x == 32) return v;
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  v = (threadIdx.x & 31) < (blockDim.x >> 5) ? sh[threadIdx.x & 31] : 0.f;
  return tgc_warp_sum(v);
}
// Sum over the block in a fixed tree (same bits every run); the result is valid in thread 0.
template <typename T> __device__ __forceinline__ T tgc_block_sum(T s) {
  __shared__ T sh[32];
  for (int o = 16; o; o >>= 1)
    s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = s;
  __syncthreads();
  s = T(0);
  if (threadIdx.x < 32) {
    s = threadIdx.x < (blockDim.x >> 5) ? sh[threadIdx.x] : T(0);
    for (int o = 16; o; o >>= 1)
      s += __shfl_xor_sync(0xffffffffu, s, o);
  }
  return s;
}

// Calls FN<float | __half | __nv_bfloat16>(...) for a float storage dtype; other dtypes are a
// TG_ERR_DTYPE naming `what`.
#define TGC_DISPATCH_FLOAT(dt, what, FN, ...)                                                                          \
  switch (dt) {                                                                                                        \
  case TG_F32: return FN<float>(__VA_ARGS__);                                                                          \
  case TG_F16: return FN<__half>(__VA_ARGS__);                                                                         \
  case TG_BF16: return FN<__nv_bfloat16>(__VA_ARGS__);                                                                 \
  default: tgc_set_error("dtype %s has no CUDA %s kernel", tg_dtype_name(dt), what); return TG_ERR_DTYPE;              \
  }
