/* CUDA launchers for the projection family (f32, f16, bf16 storage; f32 accumulation through
 * cuBLAS with CUBLAS_COMPUTE_32F, so f32 products are true fp32, no TF32). Semantics match
 * host/linear.h. The cuBLAS handle must be bound to stream s. Gradient outputs accumulate (+=). */
#ifndef TIGA_CUDA_LINEAR_H
#define TIGA_CUDA_LINEAR_H
#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif
/* y[rows, out] = x[rows, in] · w[in, out] (+ bias[out] on every row when bias is not NULL). */
tg_status cuda_linear_forward(tgc_stream s, tgc_cublas h, tg_dtype dt, const void *x, const void *w, const void *bias,
                              void *y, int64_t rows, int64_t in, int64_t out);
/* gx += gy · wᵀ, gw += xᵀ · gy, gb[j] += sum_r gy[r, j]; any of gx, gw, gb may be NULL. */
tg_status cuda_linear_backward(tgc_stream s, tgc_cublas h, tg_dtype dt, const void *x, const void *w, const void *gy,
                               void *gx, void *gw, void *gb, int64_t rows, int64_t in, int64_t out);
/* y[i] = a[i] · b[i], a[i] [M, K], b[i] [K, N] (b_shared: one b for every i). */
tg_status cuda_matmul_forward(tgc_stream s, tgc_cublas h, tg_dtype dt, const void *a, const void *b, void *y,
                              int64_t batch, int64_t M, int64_t K, int64_t N, int b_shared);
/* ga[i] += gy[i] · b[i]ᵀ, gb[i] += a[i]ᵀ · gy[i] (b_shared: gb += sum_i); ga or gb may be NULL. */
tg_status cuda_matmul_backward(tgc_stream s, tgc_cublas h, tg_dtype dt, const void *a, const void *b, const void *gy,
                               void *ga, void *gb, int64_t batch, int64_t M, int64_t K, int64_t N, int b_shared);
#ifdef __cplusplus
}
#endif
#endif
