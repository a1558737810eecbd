/* CUDA launchers for the optimizers and gradient clipping (f32, f16, bf16; state in the parameter's
 * dtype, math in f32 registers). Semantics match host/optim.h. */
#ifndef TIGA_CUDA_OPTIM_H
#define TIGA_CUDA_OPTIM_H
#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif
tg_status cuda_sgd_step(tgc_stream s, tg_dtype dt, void *p, const void *grad, void *buf, int64_t n, double lr,
                        double momentum, double dampening, double wd, int nesterov, int first);
tg_status cuda_adamw_step(tgc_stream s, tg_dtype dt, void *p, const void *grad, void *m, void *v, int64_t n, double lr,
                          double b1, double b2, double eps, double wd, double bc1, double bc2);
/* Number of doubles of device scratch cuda_sumsq needs (per call; may be reused across calls on
 * the same stream). */
#define CUDA_SUMSQ_SCRATCH 1024
/* *acc += sum of g[i]^2 (acc: one device double). Deterministic: fixed-order partial sums in
 * double. scratch: CUDA_SUMSQ_SCRATCH device doubles. */
tg_status cuda_sumsq(tgc_stream s, tg_dtype dt, const void *g, int64_t n, double *scratch, double *acc);
/* Clipping without a host round trip: coef = max_norm / (sqrt(*sumsq) + 1e-6) read on the device;
 * g[i] *= coef when coef < 1 and the norm is finite (PyTorch's clip_grad_norm_ rule). */
tg_status cuda_clip_scale(tgc_stream s, tg_dtype dt, void *g, int64_t n, const double *sumsq, double max_norm);
/* g[i] *= scale. */
tg_status cuda_scale_inplace(tgc_stream s, tg_dtype dt, void *g, int64_t n, double scale);
#ifdef __cplusplus
}
#endif
#endif
