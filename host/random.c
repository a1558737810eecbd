#include "random.h"

#include <math.h>

static inline uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t *hi) {
  uint64_t p = (uint64_t)a * b;
  *hi = (uint32_t)(p >> 32);
  return (uint32_t)p;
}

void host_philox4x32(uint64_t key, uint64_t ctr_lo, uint64_t ctr_hi, uint32_t out[4]) {
  uint32_t c0 = (uint32_t)ctr_lo, c1 = (uint32_t)(ctr_lo >> 32), c2 = (uint32_t)ctr_hi, c3 = (uint32_t)(ctr_hi >> 32);
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  for (int r = 0; r < 10; r++) {
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo(0xD2511F53u, c0, &hi0);
    uint32_t lo1 = mulhilo(0xCD9E8D57u, c2, &hi1);
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

static inline double u53(uint32_t a, uint32_t b) {
  return (double)(((uint64_t)(a >> 5) << 26) | (b >> 6)) * 0x1.0p-53;
}

double host_uniform53(uint64_t key, uint64_t i, uint64_t stream) {
  uint32_t w[4];
  host_philox4x32(key, i, stream, w);
  return u53(w[0], w[1]);
}

double host_normal(uint64_t key, uint64_t i, uint64_t stream) {
  uint32_t w[4];
  host_philox4x32(key, i, stream, w);
  double u1 = 1.0 - u53(w[0], w[1]); /* (0, 1] */
  double u2 = u53(w[2], w[3]);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
