/* Host reference kernels for cross-entropy and MSE. Math in double, stored in the value's dtype. */
#include "loss.h"

#include <math.h>

int64_t host_ce_check_targets(const int32_t *targets, int64_t rows, int64_t C, int32_t ignore, int64_t *count) {
  int64_t c = 0;
  for (int64_t r = 0; r < rows; r++) {
    int32_t k = targets[r];
    if (k == ignore && ignore != TG_NO_IGNORE) continue; /* INT32_MIN is a bad target under TG_NO_IGNORE */
    if (k < 0 || (int64_t)k >= C) return r;
    c++;
  }
  *count = c;
  return -1;
}

static inline double load(tg_dtype dt, const void *p, int64_t i) {
  return dt == TG_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}
static inline void store(tg_dtype dt, void *p, int64_t i, double v) {
  if (dt == TG_F32)
    ((float *)p)[i] = (float)v;
  else
    ((double *)p)[i] = v;
}
static inline void add_to(tg_dtype dt, void *p, int64_t i, double v) {
  if (dt == TG_F32)
    ((float *)p)[i] += (float)v;
  else
    ((double *)p)[i] += v;
}

/* Log-sum-exp of one row, shifted by its max so no exp overflows. */
static double row_lse(tg_dtype dt, const void *x, int64_t off, int64_t C) {
  double m = -INFINITY;
  for (int64_t j = 0; j < C; j++) {
    double v = load(dt, x, off + j);
    if (v > m) m = v;
  }
  if (m == -INFINITY) return -INFINITY; /* every logit -inf: exp(x - m) would be NaN */
  double s = 0;
  for (int64_t j = 0; j < C; j++)
    s += exp(load(dt, x, off + j) - m);
  return m + log(s);
}

void host_ce_forward(tg_dtype dt, const void *x, const int32_t *targets, int64_t rows, int64_t C, int32_t ignore,
                     int64_t count, double *lse, void *y) {
  double sum = 0;
  for (int64_t r = 0; r < rows; r++) {
    if (targets[r] == ignore) {
      if (lse) lse[r] = 0;
      continue;
    }
    double l = row_lse(dt, x, r * C, C);
    if (lse) lse[r] = l;
    sum += l - load(dt, x, r * C + targets[r]);
  }
  store(dt, y, 0, count > 0 ? sum / (double)count : 0.0);
}

void host_ce_backward(tg_dtype dt, const void *x, const int32_t *targets, int64_t rows, int64_t C, int32_t ignore,
                      int64_t count, const double *lse, const void *gy, void *gx) {
  if (count <= 0) return;
  double g = load(dt, gy, 0) / (double)count;
  for (int64_t r = 0; r < rows; r++) {
    int32_t k = targets[r];
    if (k == ignore) continue;
    for (int64_t j = 0; j < C; j++) {
      double p = exp(load(dt, x, r * C + j) - lse[r]);
      add_to(dt, gx, r * C + j, g * (p - (j == k ? 1.0 : 0.0)));
    }
  }
}

void host_mse_forward(tg_dtype dt, const void *a, const void *b, int64_t n, void *y) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = load(dt, a, i) - load(dt, b, i);
    s += d * d;
  }
  store(dt, y, 0, s / (double)n);
}

void host_mse_backward(tg_dtype dt, const void *a, const void *b, int64_t n, const void *gy, void *ga, void *gb) {
  double c = 2.0 * load(dt, gy, 0) / (double)n;
  for (int64_t i = 0; i < n; i++) {
    double d = c * (load(dt, a, i) - load(dt, b, i));
    if (ga) add_to(dt, ga, i, d);
    if (gb) add_to(dt, gb, i, -d);
  }
}
