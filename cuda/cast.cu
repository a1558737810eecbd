// Float dtype conversion on the device.
#include "cast.h"
#include "common.cuh"
#include "finite.cuh"

// N elements per thread (16 bytes on the wider side) for the first nv * N, then the scalar tail;
// every element stored is tested for anomaly mode (nf, finite.cuh).
template <typename S, typename D, int N>
__global__ void k_cast(const S *__restrict__ x, D *__restrict__ y, long long nv, long long n, int add, tgc_nf nf) {
  const long long stride = (long long)gridDim.x * blockDim.x, t0 = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  bool bad = false;
  for (long long v = t0; v < nv; v += stride) {
    tgc_pack<S, N> a = reinterpret_cast<const tgc_pack<S, N> *>(x)[v];
    tgc_pack<D, N> r;
    if (add) r = reinterpret_cast<const tgc_pack<D, N> *>(y)[v];
#pragma unroll
    for (int k = 0; k < N; k++) {
      r.e[k] = tgc_from_f<D>((add ? tgc_to_f(r.e[k]) : 0.f) + tgc_to_f(a.e[k]));
      bad |= tgc_nonfinite(r.e[k]);
    }
    reinterpret_cast<tgc_pack<D, N> *>(y)[v] = r;
  }
  for (long long i = nv * N + t0; i < n; i += stride) {
    D r = tgc_from_f<D>((add ? tgc_to_f(y[i]) : 0.f) + tgc_to_f(x[i]));
    bad |= tgc_nonfinite(r);
    y[i] = r;
  }
  tgc_nf_raise(nf, bad);
}

template <typename S, typename D> static tg_status run(cudaStream_t s, const void *x, void *y, long long n, int add) {
  constexpr int N = 16 / (sizeof(S) > sizeof(D) ? sizeof(S) : sizeof(D));
  long long nv = tgc_aligned(x, sizeof(S) * N) && tgc_aligned(y, sizeof(D) * N) ? n / N : 0;
  tgc_nf nf = tgc_nf_take(s);
  k_cast<S, D, N><<<tgc_blocks(nv + (n - nv * N), 256), 256, 0, s>>>((const S *)x, (D *)y, nv, n, add, nf);
  TGC_LAUNCHED("cast");
  tgc_nf_cover(nf, y, n);
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
