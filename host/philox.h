/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011).
 * key (k0, k1) = key; counter (c0, c1, c2, c3) = (lo, lo >> 32, hi, hi >> 32).
 * On the device this is cuRAND's generator: the block function behind curand_init / curand4 for
 * curandStatePhilox4x32_10_t (curand_philox4x32_x.h), so tg_philox4x32(key, lo, hi) is the 4-word
 * output of cuRAND's Philox stream with seed = key, subsequence = hi, offset = 4 * lo. The host
 * compiles the same rounds here, so HOST and CUDA providers draw bit-identical streams (the
 * dropout and attention CUDA-vs-HOST tests compare them bit for bit on the GPU). Plain C that
 * also compiles as CUDA C++. */
#ifndef TIGA_HOST_PHILOX_H
#define TIGA_HOST_PHILOX_H
#include <stdint.h>

#ifdef __CUDACC__
#include <curand_philox4x32_x.h>
#define TG_PHILOX_FN static __host__ __device__ __forceinline__
#else
#define TG_PHILOX_FN static inline
#endif

TG_PHILOX_FN void tg_philox4x32(uint64_t key, uint64_t ctr_lo, uint64_t ctr_hi, uint32_t out[4]) {
#if defined(__CUDA_ARCH__)
  uint4 r = curand_Philox4x32_10(
      make_uint4((uint32_t)ctr_lo, (uint32_t)(ctr_lo >> 32), (uint32_t)ctr_hi, (uint32_t)(ctr_hi >> 32)),
      make_uint2((uint32_t)key, (uint32_t)(key >> 32)));
  out[0] = r.x;
  out[1] = r.y;
  out[2] = r.z;
  out[3] = r.w;
#else
  uint32_t c0 = (uint32_t)ctr_lo, c1 = (uint32_t)(ctr_lo >> 32), c2 = (uint32_t)ctr_hi, c3 = (uint32_t)(ctr_hi >> 32);
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
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
#endif
}

/* Dropout keep threshold: a 32-bit word w keeps its element iff w < tg_keep_threshold(keep), i.e.
 * iff w * 2^-32 < keep exactly (keep * 2^32 is exact in double; its ceiling is the first word that
 * is not below it). keep >= 1 -> 2^32 (everything kept). */
TG_PHILOX_FN uint64_t tg_keep_threshold(double keep) {
  if (!(keep < 1)) return (uint64_t)1 << 32;
  if (!(keep > 0)) return 0;
  double t = keep * 4294967296.0;
  uint64_t u = (uint64_t)t;
  return (double)u < t ? u + 1 : u;
}

/* Attention dropout mask of score element (flat row R = (b*Hq + h)*Nq + i, key j) (global,
 * packed indices for varlen; tiga.h): 2x2 patches of (row pair, key pair) share one Philox block,
 * counter (lo = tg_attn_drop_block, hi = call | 2^63), and the element takes word
 * tg_attn_drop_word of it; kept iff that word < tg_keep_threshold(keep). The fused kernels hold
 * element pairs that share a patch, so they draw one block per two elements. */
TG_PHILOX_FN uint64_t tg_attn_drop_block(uint64_t R, uint64_t j, uint64_t Nk) {
  return (R >> 1) * ((Nk + 1) >> 1) + (j >> 1);
}
TG_PHILOX_FN int tg_attn_drop_word(uint64_t R, uint64_t j) { return (int)((R & 1) * 2 + (j & 1)); }

/* A uniform in [0, 1) from two words: 27 + 26 bits, scaled by 2^-53 (exact in double). */
TG_PHILOX_FN double tg_uniform53_of(uint32_t a, uint32_t b) {
  return (double)(((uint64_t)(a >> 5) << 26) | (b >> 6)) * 0x1.0p-53;
}
#endif
