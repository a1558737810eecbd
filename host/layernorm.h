/* Host reference kernels for layer norm over the last dim (f32 and f64; dt selects). */
#ifndef TIGA_HOST_LAYERNORM_H
#define TIGA_HOST_LAYERNORM_H
#include "tiga.h"

/* x, y: [rows, n]; w, b: [n]. Per row r:
 *   mean_r = (1/n) sum_j x[r, j],  var_r = (1/n) sum_j (x[r, j] - mean_r)^2  (biased),
 *   rstd_r = 1 / sqrt(var_r + eps),  y[r, j] = (x[r, j] - mean_r) rstd_r w[j] + b[j].
 * mean and rstd ([rows], in dt) receive the row statistics when not NULL. */
void host_layernorm_forward(tg_dtype dt, const void *x, const void *w, const void *b, double eps, void *y, void *mean,
                            void *rstd, int64_t rows, int64_t n);
/* With xhat = (x - mean) rstd and g = gy w (per row; <.> is the mean over the row):
 *   gx += rstd (g - <g> - xhat <g xhat>),  gw += sum_r gy xhat,  gb += sum_r gy.
 * Any of gx, gw, gb may be NULL (not wanted); they may alias one another (each update is its own
 * read-modify-write). mean and rstd are what forward saved. */
void host_layernorm_backward(tg_dtype dt, const void *x, const void *w, const void *mean, const void *rstd,
                             const void *gy, void *gx, void *gw, void *gb, int64_t rows, int64_t n);
#endif
