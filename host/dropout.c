/* Host reference kernels for inverted dropout (mask from Philox; see dropout.h). */
#include "dropout.h"

#include "philox.h"

#include <string.h>

int host_dropout_keeps(uint64_t seed, uint64_t call, int64_t i, double keep) {
  uint32_t w[4];
  tg_philox4x32(seed, (uint64_t)i >> 2, call, w);
  return w[i & 3] < tg_keep_threshold(keep);
}

/* The scale is rounded to the storage type first and the product formed in that type, so an f32
 * result is bit-identical to the CUDA kernel's (one IEEE multiply, nothing to contract). */
/* The keep bits of elements [4c, 4c + 4): one Philox block serves four elements (host_dropout_keeps
 * for each of them, drawn once). */
static unsigned keep_bits(uint64_t seed, uint64_t call, uint64_t c, double keep) {
  uint32_t w[4];
  tg_philox4x32(seed, c, call, w);
  uint64_t th = tg_keep_threshold(keep);
  return (unsigned)(w[0] < th) | (unsigned)(w[1] < th) << 1 | (unsigned)(w[2] < th) << 2 | (unsigned)(w[3] < th) << 3;
}

void host_dropout_forward(tg_dtype dt, uint64_t seed, uint64_t call, double keep, const void *x, void *y, int64_t n) {
  if (keep >= 1) { /* identity: every uniform in [0, 1) is below 1 and the scale is 1 */
    memcpy(y, x, (size_t)n * tg_dtype_size(dt));
  } else if (dt == TG_F32) {
    const float *px = x, s = (float)(1.0 / keep);
    float *py = y;
    unsigned bits = 0;
    for (int64_t i = 0; i < n; i++) {
      if ((i & 3) == 0) bits = keep_bits(seed, call, (uint64_t)i >> 2, keep);
      py[i] = bits >> (i & 3) & 1 ? px[i] * s : 0.0f;
    }
  } else {
    const double *px = x, s = 1.0 / keep;
    double *py = y;
    unsigned bits = 0;
    for (int64_t i = 0; i < n; i++) {
      if ((i & 3) == 0) bits = keep_bits(seed, call, (uint64_t)i >> 2, keep);
      py[i] = bits >> (i & 3) & 1 ? px[i] * s : 0.0;
    }
  }
}

void host_dropout_backward(tg_dtype dt, uint64_t seed, uint64_t call, double keep, const void *gy, void *gx,
                           int64_t n) {
  unsigned bits = 0xf;
  if (dt == TG_F32) {
    const float *g = gy, s = (float)(1.0 / keep);
    float *o = gx;
    for (int64_t i = 0; i < n; i++) {
      if ((i & 3) == 0 && keep < 1) bits = keep_bits(seed, call, (uint64_t)i >> 2, keep);
      if (bits >> (i & 3) & 1) o[i] += g[i] * s;
    }
  } else {
    const double *g = gy, s = 1.0 / keep;
    double *o = gx;
    for (int64_t i = 0; i < n; i++) {
      if ((i & 3) == 0 && keep < 1) bits = keep_bits(seed, call, (uint64_t)i >> 2, keep);
      if (bits >> (i & 3) & 1) o[i] += g[i] * s;
    }
  }
}
