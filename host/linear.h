/* Host kernels for the projection family (f32 and f64; dt selects). All matrices are row-major.
 * Products accumulate in the value's dtype. Gradient outputs are accumulated (+=). */
#ifndef TIGA_HOST_LINEAR_H
#define TIGA_HOST_LINEAR_H
#include "tiga.h"

/* C[M, N] += A · B with A[i, k] = a[i*a_rs + k*a_cs] and B[k, j] = b[k*b_rs + j*b_cs], so either
 * operand may be read transposed; C has row stride ldc. TG_ERR_OUT_OF_MEMORY when the packing
 * buffer cannot be allocated (C is then unchanged). */
tg_status host_gemm(tg_dtype dt, int64_t M, int64_t N, int64_t K, const void *a, int64_t a_rs, int64_t a_cs,
                    const void *b, int64_t b_rs, int64_t b_cs, void *c, int64_t ldc);

/* y[rows, out] = x[rows, in] · w[in, out] (+ bias[out] on every row when bias is not NULL). */
tg_status host_linear_forward(tg_dtype dt, const void *x, const void *w, const void *bias, void *y, int64_t rows,
                              int64_t in, int64_t out);
/* gx += gy · wᵀ, gw += xᵀ · gy, gb[j] += sum_r gy[r, j]; any of gx, gw, gb may be NULL (not wanted). */
tg_status host_linear_backward(tg_dtype dt, const void *x, const void *w, const void *gy, void *gx, void *gw, void *gb,
                               int64_t rows, int64_t in, int64_t out);

/* y[i] = a[i] · b[i] for i < batch with a[i] [M, K], b[i] [K, N] (b_shared: one b for every i). */
tg_status host_matmul_forward(tg_dtype dt, const void *a, const void *b, void *y, int64_t batch, int64_t M, int64_t K,
                              int64_t N, int b_shared);
/* ga[i] += gy[i] · b[i]ᵀ, gb[i] += a[i]ᵀ · gy[i] (b_shared: gb += sum_i a[i]ᵀ · gy[i]); ga or gb may be NULL. */
tg_status host_matmul_backward(tg_dtype dt, const void *a, const void *b, const void *gy, void *ga, void *gb,
                               int64_t batch, int64_t M, int64_t K, int64_t N, int b_shared);
#endif
