// Inverted dropout on the device. The mask matches host/dropout.c bit for bit: same Philox4x32-10
// rounds as host/random.c, same 53-bit uniform, same double comparison with keep, and the f32
// product formed with one explicitly rounded multiply (__fmul_rn: never contracted into an FMA).
// Backward regenerates the mask from (seed, call) rather than reading a saved one.
#include "common.cuh"
#include "dropout.h"

#include <stdint.h>

// Philox4x32-10 (Salmon et al. 2011), written exactly as host_philox4x32: key (k0, k1) = seed,
// counter (c0, c1, c2, c3) = (lo, lo >> 32, hi, hi >> 32); words 0 and 1 make the uniform.
__host__ __device__ __forceinline__ void tgc_philox4x32(uint64_t key, uint64_t ctr_lo, uint64_t ctr_hi,
                                                        uint32_t out[4]) {
  uint32_t c0 = (uint32_t)ctr_lo, c1 = (uint32_t)(ctr_lo >> 32), c2 = (uint32_t)ctr_hi, c3 = (uint32_t)(ctr_hi >> 32);
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
#ifdef __CUDA_ARCH__ // the host compiler warns on unknown pragmas
#pragma unroll
#endif
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0, hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

// host_uniform53: 27 + 26 bits of words 0 and 1, scaled by 2^-53 (exact in double).
__host__ __device__ __forceinline__ double tgc_uniform53(uint64_t key, uint64_t i, uint64_t stream) {
  uint32_t w[4];
  tgc_philox4x32(key, i, stream, w);
  return (double)(((uint64_t)(w[0] >> 5) << 26) | (w[1] >> 6)) * 0x1.0p-53;
}

template <typename T>
__global__ void k_dropout_fwd(uint64_t seed, uint64_t call, double keep, float scale, const T *__restrict__ x,
                              T *__restrict__ y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    bool kept = tgc_uniform53(seed, (uint64_t)i, call) < keep;
    y[i] = tgc_from_f<T>(kept ? __fmul_rn(tgc_to_f(x[i]), scale) : 0.f);
  }
}

template <typename T>
__global__ void k_dropout_bwd(uint64_t seed, uint64_t call, double keep, float scale, const T *__restrict__ gy,
                              T *__restrict__ gx, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    if (keep >= 1.0 || tgc_uniform53(seed, (uint64_t)i, call) < keep)
      gx[i] = tgc_from_f<T>(__fadd_rn(tgc_to_f(gx[i]), __fmul_rn(tgc_to_f(gy[i]), scale)));
  }
}

template <typename T>
static tg_status dropout_fwd(cudaStream_t s, uint64_t seed, uint64_t call, double keep, const void *x, void *y,
                             long long n) {
  if (keep >= 1.0) { // identity (keep == 1, or no-grad mode): a copy
    TGC_CUDA(cudaMemcpyAsync(y, x, (size_t)n * sizeof(T), cudaMemcpyDeviceToDevice, s));
    return TG_OK;
  }
  k_dropout_fwd<T><<<tgc_blocks(n, 256), 256, 0, s>>>(seed, call, keep, (float)(1.0 / keep), (const T *)x, (T *)y, n);
  TGC_LAUNCHED("dropout_fwd");
  return TG_OK;
}

template <typename T>
static tg_status dropout_bwd(cudaStream_t s, uint64_t seed, uint64_t call, double keep, const void *gy, void *gx,
                             long long n) {
  float scale = keep >= 1.0 ? 1.f : (float)(1.0 / keep);
  k_dropout_bwd<T><<<tgc_blocks(n, 256), 256, 0, s>>>(seed, call, keep, scale, (const T *)gy, (T *)gx, n);
  TGC_LAUNCHED("dropout_bwd");
  return TG_OK;
}

#define DISPATCH(dt, FN, ...)                                                                              \
  switch (dt) {                                                                                            \
  case TG_F32: return FN<float>(__VA_ARGS__);                                                              \
  case TG_F16: return FN<__half>(__VA_ARGS__);                                                             \
  case TG_BF16: return FN<__nv_bfloat16>(__VA_ARGS__);                                                     \
  default: tgc_set_error("dtype %s has no CUDA dropout kernel", tg_dtype_name(dt)); return TG_ERR_DTYPE;   \
  }

extern "C" tg_status cuda_dropout_forward(tgc_stream s, tg_dtype dt, uint64_t seed, uint64_t call, double keep,
                                          const void *x, void *y, int64_t n) {
  DISPATCH(dt, dropout_fwd, s, seed, call, keep, x, y, n)
}
extern "C" tg_status cuda_dropout_backward(tgc_stream s, tg_dtype dt, uint64_t seed, uint64_t call, double keep,
                                           const void *gy, void *gx, int64_t n) {
  DISPATCH(dt, dropout_bwd, s, seed, call, keep, gy, gx, n)
}
