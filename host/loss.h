/* Host reference kernels for the loss family: cross-entropy over the last dim and mean squared
 * error (f32 / f64; math and accumulation in double). */
#ifndef TIGA_HOST_LOSS_H
#define TIGA_HOST_LOSS_H
#include "tiga.h"

/* Checks targets[r] in [0, C) or == ignore for r < rows (ignore may be TG_NO_IGNORE, which
 * no valid class equals). Returns -1 when all are valid, with *count = rows not ignored;
 * otherwise the first bad row. */
int64_t host_ce_check_targets(const int32_t *targets, int64_t rows, int64_t C, int32_t ignore, int64_t *count);

/* Cross-entropy of logits x [rows, C] against targets (already checked):
 *   lse_r = m_r + log sum_j exp(x_rj - m_r),  m_r = max_j x_rj
 *   *y = (1 / count) sum_{r not ignored} (lse_r - x_r,t_r), or 0 when count == 0.
 * lse (rows doubles, may be NULL) receives lse_r for non-ignored rows (0 for ignored ones). */
void host_ce_forward(tg_dtype dt, const void *x, const int32_t *targets, int64_t rows, int64_t C, int32_t ignore,
                     int64_t count, double *lse, void *y);
/* gx_rj += g / count * (exp(x_rj - lse_r) - [j == t_r]) for non-ignored rows, g = *gy (one
 * element of dt). lse as saved by host_ce_forward. Nothing when count == 0. */
void host_ce_backward(tg_dtype dt, const void *x, const int32_t *targets, int64_t rows, int64_t C, int32_t ignore,
                      int64_t count, const double *lse, const void *gy, void *gx);

/* *y = (1/n) sum_i (a_i - b_i)^2. */
void host_mse_forward(tg_dtype dt, const void *a, const void *b, int64_t n, void *y);
/* d = 2 g (a_i - b_i) / n: ga_i += d, gb_i -= d; ga or gb may be NULL (not wanted). */
void host_mse_backward(tg_dtype dt, const void *a, const void *b, int64_t n, const void *gy, void *ga, void *gb);
#endif
