/* Host reference kernels for full reductions (f32 / f64; accumulation in double). */
#ifndef TIGA_HOST_REDUCE_H
#define TIGA_HOST_REDUCE_H
#include "tiga.h"

/* *y = alpha * sum(x). */
void host_sum_forward(tg_dtype dt, const void *x, int64_t n, double alpha, void *y);
/* gx[i] += alpha * gy. */
void host_sum_backward(tg_dtype dt, const void *gy, int64_t n, double alpha, void *gx);
#endif
