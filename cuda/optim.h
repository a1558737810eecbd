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

/* Multi-tensor forms: every tensor of one dtype in a few launches. For AdamW, per tensor:
 * p = p * decay - step * m / (sqrt(v) / sbc2 + eps) with decay = 1 - lr * wd, step = lr / bc1,
 * sbc2 = sqrt(bc2) (the single-tensor kernel's folding); m, v unused by sumsq / clip. */
typedef struct cuda_mt_tensor {
  void *p, *g, *m, *v;
  int64_t n;
  double decay, step, sbc2;
} cuda_mt_tensor;
/* Partial sums cuda_sumsq_multi writes (device doubles of its `part` scratch). */
int64_t cuda_mt_blocks(const cuda_mt_tensor *ts, int count);
tg_status cuda_adamw_multi(tgc_stream s, tg_dtype dt, const cuda_mt_tensor *ts, int count, double b1, double b2,
                           double eps);
/* *acc += sum of g^2 over every tensor; deterministic (fixed chunking and summation order). */
tg_status cuda_sumsq_multi(tgc_stream s, tg_dtype dt, const cuda_mt_tensor *ts, int count, double *part, double *acc);
tg_status cuda_clip_scale_multi(tgc_stream s, tg_dtype dt, const cuda_mt_tensor *ts, int count, const double *sumsq,
                                double max_norm);
#ifdef __cplusplus
}
#endif
#endif
