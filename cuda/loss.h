/* CUDA launchers for the loss family (f32, f16, bf16 storage; math in f32). Semantics match
 * host/loss.h. Targets must already be checked on the host (host_ce_check_targets), so no
 * kernel indexes a row with a class outside [0, C). */
#ifndef TIGA_CUDA_LOSS_H
#define TIGA_CUDA_LOSS_H
#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif
/* Cross-entropy forward. x [rows, C] of dt, targets [rows] i32 (device). lse (rows floats)
 * receives each non-ignored row's log-sum-exp; *y (one element of dt) = mean over the count
 * non-ignored rows of lse_r - x_r,t_r, summed in a fixed order (deterministic), 0 if count == 0. */
tg_status cuda_ce_forward(tgc_stream s, tg_dtype dt, const void *x, const int32_t *targets, int64_t rows, int64_t C,
                          int32_t ignore, int64_t count, float *lse, void *y);
/* gx_rj += gy[0] / count * (exp(x_rj - lse_r) - [j == t_r]) for non-ignored rows. */
tg_status cuda_ce_backward(tgc_stream s, tg_dtype dt, const void *x, const int32_t *targets, int64_t rows, int64_t C,
                           int32_t ignore, int64_t count, const float *lse, const void *gy, void *gx);

/* Floats of device scratch cuda_mse_forward needs (per-block partial sums). */
#define CUDA_MSE_PARTIALS 1024
/* *y = mean((a - b)^2), deterministic (fixed grid, fixed-order final sum). */
tg_status cuda_mse_forward(tgc_stream s, tg_dtype dt, const void *a, const void *b, int64_t n, float *partials,
                           void *y);
/* d = 2 gy[0] (a_i - b_i) / n: ga_i += d, gb_i -= d; ga or gb may be NULL. */
tg_status cuda_mse_backward(tgc_stream s, tg_dtype dt, const void *a, const void *b, int64_t n, const void *gy,
                            void *ga, void *gb);
#ifdef __cplusplus
}
#endif
#endif
