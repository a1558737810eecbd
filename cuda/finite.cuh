// Anomaly mode's in-kernel check (tg_tape_set_check_finite). While the tape runs a node on a device
// runtime it arms a flag and a tag for its stream (cuda_nf_arm, finite.h). A kernel that writes a
// value takes the armed flag (tgc_nf_take), tests every element as it stores it (the stored dtype:
// a float that rounds to inf in f16 counts), and raises *flag = max(*flag, tag) if one was NaN or
// +-inf; its launcher reports the buffer (tgc_nf_cover) so the tape does not read it again with a
// check kernel. Outside an armed node, or on another stream, the flag is null and nothing is
// raised. The test is a few integer operations per element in memory-bound kernels.
#pragma once
#include "common.cuh"

struct tgc_nf {
  int *flag; // null: not armed
  int tag;
};

// The armed flag for a launch on stream s ({null, 0} when none is armed for s).
tgc_nf tgc_nf_take(cudaStream_t s);
// The kernel just launched with nf (from tgc_nf_take) writes, and tests, every one of the n
// elements at p: the tape need not check them again (nothing, when nf is not armed).
void tgc_nf_cover(const tgc_nf &nf, const void *p, long long n);

__device__ __forceinline__ bool tgc_nonfinite(float v) { return (__float_as_uint(v) & 0x7f800000u) == 0x7f800000u; }
__device__ __forceinline__ bool tgc_nonfinite(double v) {
  return ((unsigned long long)__double_as_longlong(v) & 0x7ff0000000000000ull) == 0x7ff0000000000000ull;
}
__device__ __forceinline__ bool tgc_nonfinite(__half v) { return (__half_as_ushort(v) & 0x7c00u) == 0x7c00u; }
__device__ __forceinline__ bool tgc_nonfinite(__nv_bfloat16 v) {
  return (__bfloat16_as_ushort(v) & 0x7f80u) == 0x7f80u;
}
// One atomic for a thread that stored a non-finite element; nothing otherwise.
__device__ __forceinline__ void tgc_nf_raise(const tgc_nf &f, bool bad) {
  if (bad && f.flag) atomicMax(f.flag, f.tag);
}
