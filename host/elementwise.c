/* Host reference kernels for elementwise ops. Math in double, stored in the value's dtype. */
#include "elementwise.h"

#include <math.h>

#define SQRT_2_OVER_PI 0.7978845608028654

static inline double unary_f(host_unary_op op, double a, double x) {
  switch (op) {
  case HOST_SCALE: return a * x;
  case HOST_RELU: return x > 0 ? x : 0;
  case HOST_LEAKY_RELU: return x > 0 ? x : a * x;
  case HOST_GELU: return 0.5 * x * (1 + tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)));
  case HOST_TANH: return tanh(x);
  case HOST_ELU: return x > 0 ? x : a * expm1(x);
  }
  return 0;
}

/* f'(x); y = f(x) is passed for tanh. */
static inline double unary_df(host_unary_op op, double a, double x, double y) {
  switch (op) {
  case HOST_SCALE: return a;
  case HOST_RELU: return x > 0 ? 1 : 0;
  case HOST_LEAKY_RELU: return x > 0 ? 1 : a;
  case HOST_GELU: {
    /* d/dx 0.5 x (1 + tanh u), u = c (x + k x^3) */
    double u = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x);
    double th = tanh(u);
    double du = SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x);
    return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * du;
  }
  case HOST_TANH: return 1 - y * y;
  case HOST_ELU: return x > 0 ? 1 : a * exp(x);
  }
  return 0;
}

static inline double binary_f(host_binary_op op, double a, double b) {
  return op == HOST_ADD ? a + b : op == HOST_SUB ? a - b : a * b;
}

#define DEFINE_KERNELS(T, S)                                                                                           \
  static void bin_fwd_##S(host_binary_op op, const T *a, int64_t na, const T *b, int64_t nb, T *y) {                   \
    int64_t n = na > nb ? na : nb;                                                                                     \
    if (na == nb) {                                                                                                    \
      for (int64_t i = 0; i < n; i++)                                                                                  \
        y[i] = (T)binary_f(op, a[i], b[i]);                                                                            \
    } else {                                                                                                           \
      for (int64_t i = 0; i < n; i++)                                                                                  \
        y[i] = (T)binary_f(op, a[i % na], b[i % nb]);                                                                  \
    }                                                                                                                  \
  }                                                                                                                    \
  static void bin_bwd_##S(host_binary_op op, const T *a, int64_t na, const T *b, int64_t nb, const T *gy, T *ga,       \
                          T *gb) {                                                                                     \
    int64_t n = na > nb ? na : nb;                                                                                     \
    for (int64_t i = 0; i < n; i++) {                                                                                  \
      double g = gy[i];                                                                                                \
      if (ga) ga[i % na] += (T)(op == HOST_MUL ? g * b[i % nb] : g);                                                   \
      if (gb) gb[i % nb] += (T)(op == HOST_MUL ? g * a[i % na] : op == HOST_SUB ? -g : g);                             \
    }                                                                                                                  \
  }                                                                                                                    \
  static void un_fwd_##S(host_unary_op op, double al, const T *x, T *y, int64_t n) {                                   \
    for (int64_t i = 0; i < n; i++)                                                                                    \
      y[i] = (T)unary_f(op, al, x[i]);                                                                                 \
  }                                                                                                                    \
  static void un_bwd_##S(host_unary_op op, double al, const T *x, const T *y, const T *gy, T *gx, int64_t n) {         \
    for (int64_t i = 0; i < n; i++)                                                                                    \
      gx[i] += (T)(gy[i] * unary_df(op, al, x[i], y ? y[i] : 0));                                                      \
  }

DEFINE_KERNELS(float, f32)
DEFINE_KERNELS(double, f64)

void host_binary_forward(tg_dtype dt, host_binary_op op, const void *a, int64_t na, const void *b, int64_t nb,
                         void *y) {
  if (dt == TG_F32)
    bin_fwd_f32(op, a, na, b, nb, y);
  else
    bin_fwd_f64(op, a, na, b, nb, y);
}

void host_binary_backward(tg_dtype dt, host_binary_op op, const void *a, int64_t na, const void *b, int64_t nb,
                          const void *gy, void *ga, void *gb) {
  if (dt == TG_F32)
    bin_bwd_f32(op, a, na, b, nb, gy, ga, gb);
  else
    bin_bwd_f64(op, a, na, b, nb, gy, ga, gb);
}

void host_unary_forward(tg_dtype dt, host_unary_op op, double alpha, const void *x, void *y, int64_t n) {
  if (dt == TG_F32)
    un_fwd_f32(op, alpha, x, y, n);
  else
    un_fwd_f64(op, alpha, x, y, n);
}

void host_unary_backward(tg_dtype dt, host_unary_op op, double alpha, const void *x, const void *y, const void *gy,
                         void *gx, int64_t n) {
  if (dt == TG_F32)
    un_bwd_f32(op, alpha, x, y, gy, gx, n);
  else
    un_bwd_f64(op, alpha, x, y, gy, gx, n);
}
