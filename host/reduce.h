/* Host reference kernels for reductions (f32 / f64; accumulation in double): of all elements, and
 * over the last dim. */
#ifndef TIGA_HOST_REDUCE_H
#define TIGA_HOST_REDUCE_H
#include "tiga.h"

/* *y = alpha * sum(x). */
void host_sum_forward(tg_dtype dt, const void *x, int64_t n, double alpha, void *y);
/* gx[i] += alpha * gy. */
void host_sum_backward(tg_dtype dt, const void *gy, int64_t n, double alpha, void *gx);
/* y[r] = sum_c x[r, c] over rows x cols (row-major); gx[r, c] += gy[r]. */
void host_sum_last_forward(tg_dtype dt, const void *x, int64_t rows, int64_t cols, void *y);
void host_sum_last_backward(tg_dtype dt, const void *gy, int64_t rows, int64_t cols, void *gx);
#endif
