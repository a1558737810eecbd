/* Host reference kernels for the optimizers (see optim.h for the math). */
#include "optim.h"

#include <math.h>

#define DEFINE_KERNELS(T, S)                                                                                           \
  static void sgd_##S(T *p, const T *g, T *buf, int64_t n, double lr, double mom, double damp, double wd,              \
                      int nesterov, int first) {                                                                       \
    for (int64_t i = 0; i < n; i++) {                                                                                  \
      double d = (double)g[i] + wd * (double)p[i];                                                                     \
      if (buf) {                                                                                                       \
        double b = first ? d : mom * (double)buf[i] + (1 - damp) * d;                                                  \
        buf[i] = (T)b;                                                                                                 \
        b = (double)buf[i]; /* the stored buffer is what the next step sees; use it now too */                         \
        d = nesterov ? d + mom * b : b;                                                                                \
      }                                                                                                                \
      p[i] = (T)((double)p[i] - lr * d);                                                                               \
    }                                                                                                                  \
  }                                                                                                                    \
  static void adamw_##S(T *p, const T *g, T *m, T *v, int64_t n, double lr, double b1, double b2, double eps,          \
                        double wd, double l2, double bc1, double bc2) {                                                \
    double step = lr / bc1, sbc2 = sqrt(bc2), decay = 1 - lr * wd;                                                     \
    for (int64_t i = 0; i < n; i++) {                                                                                  \
      double gi = (double)g[i] + l2 * (double)p[i];                                                                    \
      double mi = b1 * (double)m[i] + (1 - b1) * gi;                                                                   \
      double vi = b2 * (double)v[i] + (1 - b2) * gi * gi;                                                              \
      m[i] = (T)mi;                                                                                                    \
      v[i] = (T)vi;                                                                                                    \
      p[i] = (T)((double)p[i] * decay - step * mi / (sqrt(vi) / sbc2 + eps));                                          \
    }                                                                                                                  \
  }                                                                                                                    \
  static double sumsq_##S(const T *g, int64_t n) {                                                                     \
    double s = 0;                                                                                                      \
    for (int64_t i = 0; i < n; i++)                                                                                    \
      s += (double)g[i] * (double)g[i];                                                                                \
    return s;                                                                                                          \
  }                                                                                                                    \
  static void scale_##S(T *g, int64_t n, double s) {                                                                   \
    for (int64_t i = 0; i < n; i++)                                                                                    \
      g[i] = (T)((double)g[i] * s);                                                                                    \
  }

DEFINE_KERNELS(float, f32)
DEFINE_KERNELS(double, f64)

void host_sgd_step(tg_dtype dt, void *p, const void *grad, void *buf, int64_t n, double lr, double momentum,
                   double dampening, double wd, int nesterov, int first) {
  if (dt == TG_F32)
    sgd_f32(p, grad, buf, n, lr, momentum, dampening, wd, nesterov, first);
  else
    sgd_f64(p, grad, buf, n, lr, momentum, dampening, wd, nesterov, first);
}

void host_adamw_step(tg_dtype dt, void *p, const void *grad, void *m, void *v, int64_t n, double lr, double b1,
                     double b2, double eps, double wd, double l2, double bc1, double bc2) {
  if (dt == TG_F32)
    adamw_f32(p, grad, m, v, n, lr, b1, b2, eps, wd, l2, bc1, bc2);
  else
    adamw_f64(p, grad, m, v, n, lr, b1, b2, eps, wd, l2, bc1, bc2);
}

double host_sumsq(tg_dtype dt, const void *g, int64_t n) { return dt == TG_F32 ? sumsq_f32(g, n) : sumsq_f64(g, n); }

void host_scale_inplace(tg_dtype dt, void *g, int64_t n, double s) {
  if (dt == TG_F32)
    scale_f32(g, n, s);
  else
    scale_f64(g, n, s);
}
