// Inverted dropout on the device. The mask matches host/dropout.c bit for bit: same Philox4x32-10
// rounds as host/random.c, same 53-bit uniform, same double comparison with keep, and the f32
// product formed with one explicitly rounded multiply (__fmul_rn: never contracted into an FMA).
// Backward regenerates the mask from (seed, call) rather than reading a saved one.
#include "common.cuh"
#include "dropout.h"
#include "../host/philox.h"

#include <stdint.h>

// host_uniform53's stream, from the shared Philox definition.
__device__ __forceinline__ double tgc_uniform53(uint64_t key, uint64_t i, uint64_t stream) {
  uint32_t w[4];
  tg_philox4x32(key, i, stream, w);
  return tg_uniform53_of(w[0], w[1]);
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

#define DISPATCH(dt, FN, ...) TGC_DISPATCH_FLOAT(dt, "dropout", FN, __VA_ARGS__)

extern "C" tg_status cuda_dropout_forward(tgc_stream s, tg_dtype dt, uint64_t seed, uint64_t call, double keep,
                                          const void *x, void *y, int64_t n) {
  DISPATCH(dt, dropout_fwd, s, seed, call, keep, x, y, n)
}
extern "C" tg_status cuda_dropout_backward(tgc_stream s, tg_dtype dt, uint64_t seed, uint64_t call, double keep,
                                           const void *gy, void *gx, int64_t n) {
  DISPATCH(dt, dropout_bwd, s, seed, call, keep, gy, gx, n)
}
