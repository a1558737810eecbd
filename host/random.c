#include "random.h"

#include "philox.h"

#include <math.h>

void host_philox4x32(uint64_t key, uint64_t ctr_lo, uint64_t ctr_hi, uint32_t out[4]) {
  tg_philox4x32(key, ctr_lo, ctr_hi, out);
}

static inline double u53(uint32_t a, uint32_t b) { return tg_uniform53_of(a, b); }

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
