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
void host_dropout_forward(tg_dtype dt, uint64_t seed, uint64_t call, double keep, const void *x, void *y, int64_t n) {
  if (keep >= 1) { /* identity: every uniform in [0, 1) is below 1 and the scale is 1 */
    memcpy(y, x, (size_t)n * tg_dtype_size(dt));
  } else if (dt == TG_F32) {
    const float *px = x, s = (float)(1.0 / keep);
    float *py = y;
    for (int64_t i = 0; i < n; i++)
      py[i] = host_dropout_keeps(seed, call, i, keep) ? px[i] * s : 0.0f;
  } else {
    const double *px = x, s = 1.0 / keep;
    double *py = y;
    for (int64_t i = 0; i < n; i++)
      py[i] = host_dropout_keeps(seed, call, i, keep) ? px[i] * s : 0.0;
  }
}

void host_dropout_backward(tg_dtype dt, uint64_t seed, uint64_t call, double keep, const void *gy, void *gx,
                           int64_t n) {
  if (dt == TG_F32) {
    const float *g = gy, s = (float)(1.0 / keep);
    float *o = gx;
    for (int64_t i = 0; i < n; i++)
      if (keep >= 1 || host_dropout_keeps(seed, call, i, keep)) o[i] += g[i] * s;
  } else {
    const double *g = gy, s = 1.0 / keep;
    double *o = gx;
    for (int64_t i = 0; i < n; i++)
      if (keep >= 1 || host_dropout_keeps(seed, call, i, keep)) o[i] += g[i] * s;
  }
}
