/* Host reference kernels for layer norm. Math in double, stored in the value's dtype (the row
 * statistics too). Two passes over a row for the variance, so rows far from zero (|x| ~ 1e3)
 * keep their precision. */
#include "layernorm.h"

#include <math.h>

#define DEFINE_KERNELS(T, S)                                                                                           \
  static void fwd_##S(const T *x, const T *w, const T *b, double eps, T *y, T *mean, T *rstd, int64_t rows,            \
                      int64_t n) {                                                                                     \
    for (int64_t r = 0; r < rows; r++) {                                                                               \
      const T *xr = x + r * n;                                                                                         \
      T *yr = y + r * n;                                                                                               \
      double m = 0, v = 0;                                                                                             \
      for (int64_t j = 0; j < n; j++)                                                                                  \
        m += xr[j];                                                                                                    \
      m /= (double)n;                                                                                                  \
      for (int64_t j = 0; j < n; j++)                                                                                  \
        v += ((double)xr[j] - m) * ((double)xr[j] - m);                                                                \
      v /= (double)n;                                                                                                  \
      double rs = 1.0 / sqrt(v + eps);                                                                                 \
      for (int64_t j = 0; j < n; j++)                                                                                  \
        yr[j] = (T)(((double)xr[j] - m) * rs * w[j] + b[j]);                                                           \
      if (mean) mean[r] = (T)m;                                                                                        \
      if (rstd) rstd[r] = (T)rs;                                                                                       \
    }                                                                                                                  \
  }                                                                                                                    \
  static void bwd_##S(const T *x, const T *w, const T *mean, const T *rstd, const T *gy, T *gx, T *gw, T *gb,          \
                      int64_t rows, int64_t n) {                                                                       \
    for (int64_t r = 0; gx && r < rows; r++) {                                                                         \
      const T *xr = x + r * n, *gr = gy + r * n;                                                                       \
      T *dr = gx + r * n;                                                                                              \
      double m = mean[r], rs = rstd[r], sg = 0, sgx = 0; /* <g> and <g xhat> */                                        \
      for (int64_t j = 0; j < n; j++) {                                                                                \
        double g = (double)gr[j] * w[j];                                                                               \
        sg += g;                                                                                                       \
        sgx += g * ((double)xr[j] - m) * rs;                                                                           \
      }                                                                                                                \
      sg /= (double)n;                                                                                                 \
      sgx /= (double)n;                                                                                                \
      for (int64_t j = 0; j < n; j++) {                                                                                \
        double xh = ((double)xr[j] - m) * rs;                                                                          \
        dr[j] += (T)(rs * ((double)gr[j] * w[j] - sg - xh * sgx));                                                     \
      }                                                                                                                \
    }                                                                                                                  \
    /* column sums in double, added once, so f32 gradients do not drift over many rows */                              \
    for (int64_t j = 0; (gw || gb) && j < n; j++) {                                                                    \
      double sw = 0, sb = 0;                                                                                           \
      for (int64_t r = 0; r < rows; r++) {                                                                             \
        double g = gy[r * n + j];                                                                                      \
        sw += g * ((double)x[r * n + j] - (double)mean[r]) * (double)rstd[r];                                          \
        sb += g;                                                                                                       \
      }                                                                                                                \
      if (gw) gw[j] += (T)sw;                                                                                          \
      if (gb) gb[j] += (T)sb;                                                                                          \
    }                                                                                                                  \
  }

DEFINE_KERNELS(float, f32)
DEFINE_KERNELS(double, f64)

void host_layernorm_forward(tg_dtype dt, const void *x, const void *w, const void *b, double eps, void *y, void *mean,
                            void *rstd, int64_t rows, int64_t n) {
  if (dt == TG_F32)
    fwd_f32(x, w, b, eps, y, mean, rstd, rows, n);
  else
    fwd_f64(x, w, b, eps, y, mean, rstd, rows, n);
}

void host_layernorm_backward(tg_dtype dt, const void *x, const void *w, const void *mean, const void *rstd,
                             const void *gy, void *gx, void *gw, void *gb, int64_t rows, int64_t n) {
  if (dt == TG_F32)
    bwd_f32(x, w, mean, rstd, gy, gx, gw, gb, rows, n);
  else
    bwd_f64(x, w, mean, rstd, gy, gx, gw, gb, rows, n);
}
