/* Host reference kernels for the optimizers and gradient clipping (f32 and f64; dt selects).
 * Math in double, stored in the parameter's dtype. State buffers have the parameter's dtype. */
#ifndef TIGA_HOST_OPTIM_H
#define TIGA_HOST_OPTIM_H
#include "tiga.h"

/* PyTorch's SGD on n elements:
 *   g = grad + wd * p
 *   buf = first ? g : momentum * buf + (1 - dampening) * g      (only when buf != NULL)
 *   g = nesterov ? g + momentum * buf : buf                      (only when buf != NULL)
 *   p -= lr * g
 * buf == NULL means momentum 0 (no state). */
void host_sgd_step(tg_dtype dt, void *p, const void *grad, void *buf, int64_t n, double lr, double momentum,
                   double dampening, double wd, int nesterov, int first);

/* Adam / AdamW with precomputed bias corrections bc1 = 1 - beta1^t, bc2 = 1 - beta2^t:
 *   g = grad + l2 * p                                              (Adam's coupled L2; AdamW: l2 = 0)
 *   p *= 1 - lr * wd                                               (AdamW's decoupled decay; Adam: wd = 0)
 *   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
 *   p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps)             (PyTorch's evaluation order) */
void host_adamw_step(tg_dtype dt, void *p, const void *grad, void *m, void *v, int64_t n, double lr, double b1,
                     double b2, double eps, double wd, double l2, double bc1, double bc2);

/* sum of g[i]^2, accumulated in double. */
double host_sumsq(tg_dtype dt, const void *g, int64_t n);
/* g[i] *= s. */
void host_scale_inplace(tg_dtype dt, void *g, int64_t n, double s);
#endif
