/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011): the one
 * definition shared by the host (host/random.c) and the device (cuda/dropout.cu), so host and
 * CUDA draw bit-identical streams. key (k0, k1) = key; counter (c0, c1, c2, c3) =
 * (lo, lo >> 32, hi, hi >> 32). Plain C that also compiles as CUDA C++. */
#ifndef TIGA_HOST_PHILOX_H
#define TIGA_HOST_PHILOX_H
#include <stdint.h>

#ifdef __CUDACC__
#define TG_PHILOX_FN static __host__ __device__ __forceinline__
#else
#define TG_PHILOX_FN static inline
#endif

TG_PHILOX_FN void tg_philox4x32(uint64_t key, uint64_t ctr_lo, uint64_t ctr_hi, uint32_t out[4]) {
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
}

/* A uniform in [0, 1) from two words: 27 + 26 bits, scaled by 2^-53 (exact in double). */
TG_PHILOX_FN double tg_uniform53_of(uint32_t a, uint32_t b) {
  return (double)(((uint64_t)(a >> 5) << 26) | (b >> 6)) * 0x1.0p-53;
}
#endif
