/* CUDA launchers for row reductions (f32, f16, bf16 storage; f32 accumulation). Semantics match
 * host/reduce.h: y[r] = sum_c x[r, c]; gx[r, c] += gy[r]. Deterministic (one thread or one warp
 * sums a row in a fixed order). */
#ifndef TIGA_CUDA_REDUCE_H
#define TIGA_CUDA_REDUCE_H
#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif
tg_status cuda_sum_last_forward(tgc_stream s, tg_dtype dt, const void *x, int64_t rows, int64_t cols, void *y);
tg_status cuda_sum_last_backward(tgc_stream s, tg_dtype dt, const void *gy, int64_t rows, int64_t cols, void *gx);
#ifdef __cplusplus
}
#endif
#endif
