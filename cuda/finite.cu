// Non-finite checks by exponent bits (NaN and +-inf have every exponent bit set), so the test does
// not depend on float compare semantics. One atomicMax per block that saw one, none otherwise.
#include "common.cuh"
#include "finite.h"

template <typename U, U kExp>
__global__ void k_flag_nonfinite(const U *__restrict__ x, long long n, int tag, int *flag) {
  bool bad = false;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    bad |= (x[i] & kExp) == kExp;
  if (__syncthreads_or(bad) && threadIdx.x == 0) atomicMax(flag, tag);
}

template <typename U, U kExp> static tg_status flag(cudaStream_t s, const void *x, long long n, int tag, int *f) {
  if (n <= 0) return TG_OK;
  k_flag_nonfinite<U, kExp><<<tgc_blocks(n, 256, 1024), 256, 0, s>>>((const U *)x, n, tag, f);
  TGC_LAUNCHED("flag_nonfinite");
  return TG_OK;
}

extern "C" tg_status cuda_flag_nonfinite(tgc_stream s, tg_dtype dt, const void *x, int64_t n, int32_t tag, int32_t *f) {
  switch (dt) {
  case TG_F32: return flag<unsigned, 0x7f800000u>(s, x, n, tag, f);
  case TG_F64: return flag<unsigned long long, 0x7ff0000000000000ull>(s, x, n, tag, f);
  case TG_F16: return flag<unsigned short, (unsigned short)0x7c00u>(s, x, n, tag, f);
  case TG_BF16: return flag<unsigned short, (unsigned short)0x7f80u>(s, x, n, tag, f);
  default: tgc_set_error("flag_nonfinite: dtype %s is not a float dtype", tg_dtype_name(dt)); return TG_ERR_DTYPE;
  }
}
