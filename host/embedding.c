/* Host kernels for tg_embedding. */
#include "embedding.h"

#include <string.h>

int64_t host_embedding_bad_id(const int32_t *ids, int64_t n, int64_t V) {
  for (int64_t i = 0; i < n; i++)
    if (ids[i] < 0 || (int64_t)ids[i] >= V) return i;
  return -1;
}

void host_embedding_forward(size_t elem, const void *table, int64_t D, const int32_t *ids, int64_t n, void *y) {
  size_t row = (size_t)D * elem;
  const char *pt = table;
  char *py = y;
  for (int64_t i = 0; i < n; i++)
    memcpy(py + (size_t)i * row, pt + (size_t)ids[i] * row, row);
}

#define DEFINE_SCATTER(T, S)                                                                                           \
  static void scatter_##S(const T *gy, const int32_t *ids, int64_t n, int64_t D, T *g) {                               \
    for (int64_t i = 0; i < n; i++) {                                                                                  \
      T *dst = g + (int64_t)ids[i] * D;                                                                                \
      const T *src = gy + i * D;                                                                                       \
      for (int64_t d = 0; d < D; d++)                                                                                  \
        dst[d] += src[d];                                                                                              \
    }                                                                                                                  \
  }
DEFINE_SCATTER(float, f32)
DEFINE_SCATTER(double, f64)

void host_embedding_backward(tg_dtype dt, const void *gy, const int32_t *ids, int64_t n, int64_t D, void *gtable) {
  if (dt == TG_F32)
    scatter_f32(gy, ids, n, D, gtable);
  else
    scatter_f64(gy, ids, n, D, gtable);
}
