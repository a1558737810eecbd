/* CUDA launchers for layer norm over the last dim (f32, f16, bf16 storage; f32 math and f32
 * row statistics). Semantics match host/layernorm.h. */
#ifndef TIGA_CUDA_LAYERNORM_H
#define TIGA_CUDA_LAYERNORM_H
#include <stddef.h>

#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif
/* x, y: [rows, n], w, b: [n] device buffers of dt. mean, rstd: [rows] f32, written when not NULL. */
tg_status cuda_layernorm_forward(tgc_stream s, tg_dtype dt, const void *x, const void *w, const void *b, double eps,
                                 void *y, float *mean, float *rstd, int64_t rows, int64_t n);
/* Device workspace bytes cuda_layernorm_backward needs for (rows, n): partial column sums of gw
 * and gb, at most 8 MiB whatever rows is (8 n bytes when n > 2^20). */
size_t cuda_layernorm_backward_workspace(int64_t rows, int64_t n);
/* gx += rstd (g - <g> - xhat <g xhat>) with g = gy w, xhat = (x - mean) rstd;
 * gw += sum_r gy xhat; gb += sum_r gy (deterministic two-pass reduction over rows).
 * Any of gx, gw, gb may be NULL; they may alias. workspace: cuda_layernorm_backward_workspace
 * bytes of device memory (used only when gw or gb is wanted). */
tg_status cuda_layernorm_backward(tgc_stream s, tg_dtype dt, const void *x, const void *w, const float *mean,
                                  const float *rstd, const void *gy, void *gx, void *gw, void *gb, int64_t rows,
                                  int64_t n, void *workspace, size_t workspace_bytes);
#ifdef __cplusplus
}
#endif
#endif
