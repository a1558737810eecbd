/* Host reference kernels for softmax. Math in double, stored in the value's dtype. */
#include "softmax.h"

#include <math.h>

#define DEFINE_KERNELS(T, S)                                                                                           \
  static void fwd_##S(const T *x, T *y, int64_t rows, int64_t n) {                                                     \
    for (int64_t r = 0; r < rows; r++) {                                                                               \
      const T *xr = x + r * n;                                                                                         \
      T *yr = y + r * n;                                                                                               \
      double m = xr[0];                                                                                                \
      for (int64_t j = 1; j < n; j++)                                                                                  \
        if (xr[j] > m) m = xr[j];                                                                                      \
      double s = 0;                                                                                                    \
      for (int64_t j = 0; j < n; j++)                                                                                  \
        s += exp((double)xr[j] - m);                                                                                   \
      double inv = 1.0 / s;                                                                                            \
      for (int64_t j = 0; j < n; j++)                                                                                  \
        yr[j] = (T)(exp((double)xr[j] - m) * inv);                                                                     \
    }                                                                                                                  \
  }                                                                                                                    \
  static void bwd_##S(const T *y, const T *gy, T *gx, int64_t rows, int64_t n) {                                       \
    for (int64_t r = 0; r < rows; r++) {                                                                               \
      const T *yr = y + r * n, *gr = gy + r * n;                                                                       \
      T *dr = gx + r * n;                                                                                              \
      double dot = 0;                                                                                                  \
      for (int64_t j = 0; j < n; j++)                                                                                  \
        dot += (double)gr[j] * yr[j];                                                                                  \
      for (int64_t j = 0; j < n; j++)                                                                                  \
        dr[j] += (T)((double)yr[j] * ((double)gr[j] - dot));                                                           \
    }                                                                                                                  \
  }

DEFINE_KERNELS(float, f32)
DEFINE_KERNELS(double, f64)

void host_softmax_forward(tg_dtype dt, const void *x, void *y, int64_t rows, int64_t n) {
  if (dt == TG_F32)
    fwd_f32(x, y, rows, n);
  else
    fwd_f64(x, y, rows, n);
}

void host_softmax_backward(tg_dtype dt, const void *y, const void *gy, void *gx, int64_t rows, int64_t n) {
  if (dt == TG_F32)
    bwd_f32(y, gy, gx, rows, n);
  else
    bwd_f64(y, gy, gx, rows, n);
}
