#include "reduce.h"

void host_sum_forward(tg_dtype dt, const void *x, int64_t n, double alpha, void *y) {
  double s = 0;
  if (dt == TG_F32) {
    const float *p = x;
    for (int64_t i = 0; i < n; i++)
      s += p[i];
    *(float *)y = (float)(alpha * s);
  } else {
    const double *p = x;
    for (int64_t i = 0; i < n; i++)
      s += p[i];
    *(double *)y = alpha * s;
  }
}

void host_sum_backward(tg_dtype dt, const void *gy, int64_t n, double alpha, void *gx) {
  if (dt == TG_F32) {
    float g = (float)(alpha * *(const float *)gy);
    float *p = gx;
    for (int64_t i = 0; i < n; i++)
      p[i] += g;
  } else {
    double g = alpha * *(const double *)gy;
    double *p = gx;
    for (int64_t i = 0; i < n; i++)
      p[i] += g;
  }
}

void host_sum_last_forward(tg_dtype dt, const void *x, int64_t rows, int64_t cols, void *y) {
  for (int64_t r = 0; r < rows; r++) {
    double s = 0;
    for (int64_t c = 0; c < cols; c++)
      s += dt == TG_F32 ? (double)((const float *)x)[r * cols + c] : ((const double *)x)[r * cols + c];
    if (dt == TG_F32)
      ((float *)y)[r] = (float)s;
    else
      ((double *)y)[r] = s;
  }
}

void host_sum_last_backward(tg_dtype dt, const void *gy, int64_t rows, int64_t cols, void *gx) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) {
      if (dt == TG_F32)
        ((float *)gx)[r * cols + c] += ((const float *)gy)[r];
      else
        ((double *)gx)[r * cols + c] += ((const double *)gy)[r];
    }
}
