// Inverted dropout on the device. The mask matches host/dropout.c bit for bit: cuRAND's Philox4x32-10
// block (host/philox.h) per four elements, one 32-bit word per element compared with the same
// threshold, and the f32 product formed with one explicitly rounded multiply (__fmul_rn: never
// contracted into an FMA). Backward regenerates the mask from (seed, call) rather than reading a
// saved one.
#include "common.cuh"
#include "dropout.h"
#include "finite.cuh"
#include "../host/philox.h"

#include <stdint.h>

// Mask words of elements 4g .. 4g+3: cuRAND's Philox block g of subsequence `call` (host/philox.h).
__device__ __forceinline__ void words(uint64_t seed, uint64_t call, uint64_t g, uint32_t w[4]) {
  tg_philox4x32(seed, g, call, w);
}

// One thread per vector of N elements (N a multiple of 4: one Philox block per 4 elements), then
// the scalar tail from element `done`. Every element stored is tested for anomaly mode (nf); the
// backward tests the whole gradient, the elements it leaves as they were included.
template <typename T, int N>
__global__ void k_dropout_fwd(uint64_t seed, uint64_t call, uint32_t thr, int all, float scale, const T *__restrict__ x,
                              T *__restrict__ y, long long nv, long long done, long long n, tgc_nf nf) {
  bool bad = false;
  TGC_VEC_LOOP(v, nv) {
    tgc_pack<T, N> a = reinterpret_cast<const tgc_pack<T, N> *>(x)[v], r;
#pragma unroll
    for (int q = 0; q < N / 4; q++) {
      uint32_t w[4];
      words(seed, call, (uint64_t)v * (N / 4) + q, w);
#pragma unroll
      for (int k = 0; k < 4; k++)
        r.e[4 * q + k] = tgc_from_f<T>(all || w[k] < thr ? __fmul_rn(tgc_to_f(a.e[4 * q + k]), scale) : 0.f);
    }
#pragma unroll
    for (int k = 0; k < N; k++)
      bad |= tgc_nonfinite(r.e[k]);
    reinterpret_cast<tgc_pack<T, N> *>(y)[v] = r;
  }
  TGC_TAIL_LOOP(i, done, n) {
    uint32_t w[4];
    words(seed, call, (uint64_t)i >> 2, w);
    T r = tgc_from_f<T>(all || w[i & 3] < thr ? __fmul_rn(tgc_to_f(x[i]), scale) : 0.f);
    bad |= tgc_nonfinite(r);
    y[i] = r;
  }
  tgc_nf_raise(nf, bad);
}

template <typename T, int N>
__global__ void k_dropout_bwd(uint64_t seed, uint64_t call, uint32_t thr, int all, float scale,
                              const T *__restrict__ gy, T *__restrict__ gx, long long nv, long long done, long long n,
                              tgc_nf nf) {
  bool bad = false;
  TGC_VEC_LOOP(v, nv) {
    tgc_pack<T, N> g = reinterpret_cast<const tgc_pack<T, N> *>(gy)[v], r = reinterpret_cast<tgc_pack<T, N> *>(gx)[v];
#pragma unroll
    for (int q = 0; q < N / 4; q++) {
      uint32_t w[4];
      if (!all) words(seed, call, (uint64_t)v * (N / 4) + q, w);
#pragma unroll
      for (int k = 0; k < 4; k++)
        if (all || w[k] < thr)
          r.e[4 * q + k] =
              tgc_from_f<T>(__fadd_rn(tgc_to_f(r.e[4 * q + k]), __fmul_rn(tgc_to_f(g.e[4 * q + k]), scale)));
    }
#pragma unroll
    for (int k = 0; k < N; k++)
      bad |= tgc_nonfinite(r.e[k]);
    reinterpret_cast<tgc_pack<T, N> *>(gx)[v] = r;
  }
  TGC_TAIL_LOOP(i, done, n) {
    uint32_t w[4] = {0, 0, 0, 0};
    if (!all) words(seed, call, (uint64_t)i >> 2, w);
    T r = gx[i];
    if (all || w[i & 3] < thr) gx[i] = r = tgc_from_f<T>(__fadd_rn(tgc_to_f(r), __fmul_rn(tgc_to_f(gy[i]), scale)));
    bad |= tgc_nonfinite(r);
  }
  tgc_nf_raise(nf, bad);
}

template <typename T>
static tg_status dropout_fwd(cudaStream_t s, uint64_t seed, uint64_t call, double keep, const void *x, void *y,
                             long long n) {
  if (keep >= 1.0) { // identity (keep == 1, or no-grad mode): a copy
    TGC_CUDA(cudaMemcpyAsync(y, x, (size_t)n * sizeof(T), cudaMemcpyDeviceToDevice, s));
    return TG_OK;
  }
  constexpr int N = tgc_vec_n<T>();
  long long nv = tgc_vec_count<T>(n, {x, y});
  tgc_nf nf = tgc_nf_take(s);
  k_dropout_fwd<T, N><<<tgc_vec_blocks<T>(nv, n), 256, 0, s>>>(
      seed, call, (uint32_t)tg_keep_threshold(keep), 0, (float)(1.0 / keep), (const T *)x, (T *)y, nv, nv * N, n, nf);
  TGC_LAUNCHED("dropout_fwd");
  tgc_nf_cover(nf, y, n);
  return TG_OK;
}

template <typename T>
static tg_status dropout_bwd(cudaStream_t s, uint64_t seed, uint64_t call, double keep, const void *gy, void *gx,
                             long long n) {
  constexpr int N = tgc_vec_n<T>();
  long long nv = tgc_vec_count<T>(n, {gy, gx});
  int all = keep >= 1.0;
  float scale = all ? 1.f : (float)(1.0 / keep);
  tgc_nf nf = tgc_nf_take(s);
  k_dropout_bwd<T, N><<<tgc_vec_blocks<T>(nv, n), 256, 0, s>>>(seed, call, all ? 0u : (uint32_t)tg_keep_threshold(keep),
                                                               all, scale, (const T *)gy, (T *)gx, nv, nv * N, n, nf);
  TGC_LAUNCHED("dropout_bwd");
  tgc_nf_cover(nf, gx, n);
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
