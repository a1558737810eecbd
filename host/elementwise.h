/* Host reference kernels for elementwise ops (f32 and f64; dt selects). */
#ifndef TIGA_HOST_ELEMENTWISE_H
#define TIGA_HOST_ELEMENTWISE_H
#include "tiga.h"

typedef enum { HOST_ADD = 0, HOST_SUB = 1, HOST_MUL = 2 } host_binary_op;
typedef enum { HOST_SCALE = 0, HOST_RELU, HOST_LEAKY_RELU, HOST_GELU, HOST_TANH, HOST_ELU } host_unary_op;

/* y[i] = a[i % na] (op) b[i % nb] for i < n = max(na, nb); the smaller count divides the larger
 * (bias-style broadcast: the small operand repeats along the leading dims). */
void host_binary_forward(tg_dtype dt, host_binary_op op, const void *a, int64_t na, const void *b, int64_t nb, void *y);
/* ga[i % na] += gy[i] * dy/da, gb[i % nb] += gy[i] * dy/db; ga or gb may be NULL (not wanted). */
void host_binary_backward(tg_dtype dt, host_binary_op op, const void *a, int64_t na, const void *b, int64_t nb,
                          const void *gy, void *ga, void *gb);

/* y = f(x; alpha): scale (alpha = s), relu, leaky_relu (alpha = slope), gelu (tanh form), tanh, elu
 * (alpha: x > 0 ? x : alpha (exp(x) - 1)). */
void host_unary_forward(tg_dtype dt, host_unary_op op, double alpha, const void *x, void *y, int64_t n);
/* gx += gy * f'(x) (tanh uses y = f(x)). */
void host_unary_backward(tg_dtype dt, host_unary_op op, double alpha, const void *x, const void *y, const void *gy,
                         void *gx, int64_t n);
#endif
