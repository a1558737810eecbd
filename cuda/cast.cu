// Float dtype conversion on the device.
#include "cast.h"
#include "common.cuh"

template <typename S, typename D>
__global__ void k_cast(const S *__restrict__ x, D *__restrict__ y, long long n, int add) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = tgc_from_f<D>((add ? tgc_to_f(y[i]) : 0.f) + tgc_to_f(x[i]));
}

template <typename S, typename D> static tg_status run(cudaStream_t s, const void *x, void *y, long long n, int add) {
  k_cast<S, D><<<tgc_blocks(n, 256), 256, 0, s>>>((const S *)x, (D *)y, n, add);
  TGC_LAUNCHED("cast");
  return TG_OK;
}

template <typename S> static tg_status to(cudaStream_t s, tg_dtype dst, const void *x, void *y, long long n, int add) {
  switch (dst) {
  case TG_F32: return run<S, float>(s, x, y, n, add);
  case TG_F16: return run<S, __half>(s, x, y, n, add);
  case TG_BF16: return run<S, __nv_bfloat16>(s, x, y, n, add);
  default: tgc_set_error("cast: dtype %s not supported on CUDA", tg_dtype_name(dst)); return TG_ERR_DTYPE;
  }
}

extern "C" tg_status cuda_cast(tgc_stream s, tg_dtype src, const void *x, tg_dtype dst, void *y, int64_t n, int add) {
  switch (src) {
  case TG_F32: return to<float>(s, dst, x, y, n, add);
  case TG_F16: return to<__half>(s, dst, x, y, n, add);
  case TG_BF16: return to<__nv_bfloat16>(s, dst, x, y, n, add);
  default: tgc_set_error("cast: dtype %s not supported on CUDA", tg_dtype_name(src)); return TG_ERR_DTYPE;
  }
}
