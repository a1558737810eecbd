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
