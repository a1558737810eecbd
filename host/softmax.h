/* Host reference kernels for softmax over the last dim (f32 and f64; dt selects). */
#ifndef TIGA_HOST_SOFTMAX_H
#define TIGA_HOST_SOFTMAX_H
#include "tiga.h"

/* x, y: [rows, n] row-major. y[r, j] = exp(x[r, j] - m_r) / sum_k exp(x[r, k] - m_r) with
 * m_r = max_k x[r, k] (so no exp overflows and the largest term is exactly 1). */
void host_softmax_forward(tg_dtype dt, const void *x, void *y, int64_t rows, int64_t n);
/* gx[r, j] += y[r, j] * (gy[r, j] - sum_k gy[r, k] y[r, k]). */
void host_softmax_backward(tg_dtype dt, const void *y, const void *gy, void *gx, int64_t rows, int64_t n);
#endif
