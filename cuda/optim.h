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
/* g[i] *= scale. */
tg_status cuda_scale_inplace(tgc_stream s, tg_dtype dt, void *g, int64_t n, double scale);

/* Multi-tensor forms: every tensor of one dtype in a few launches. For Adam(W), per tensor:
 * g' = g + l2 * p; m, v from g'; p = p * decay - step * m / (sqrt(v) / sbc2 + eps) with step =
 * lr / bc1, sbc2 = sqrt(bc2), and decay = 1 - lr * wd, l2 = 0 (AdamW, decoupled) or decay = 1,
 * l2 = wd (Adam, coupled L2), folded in double on the host as PyTorch does; m, v unused by sumsq /
 * clip. */
typedef struct cuda_mt_tensor {
  void *p, *g, *m, *v;
  int64_t n;
  double decay, step, sbc2, l2;
} cuda_mt_tensor;
/* Partial sums cuda_sumsq_multi writes (device doubles of its `part` scratch). */
int64_t cuda_mt_blocks(const cuda_mt_tensor *ts, int count);
tg_status cuda_adamw_multi(tgc_stream s, tg_dtype dt, const cuda_mt_tensor *ts, int count, double b1, double b2,
                           double eps);
/* *acc += sum of g^2 over every tensor; deterministic (fixed chunking and summation order). */
tg_status cuda_sumsq_multi(tgc_stream s, tg_dtype dt, const cuda_mt_tensor *ts, int count, double *part, double *acc);
/* g[i] = 0 for every tensor (+0 bits, as cudaMemsetAsync writes): many small gradients in one
 * launch instead of a memset each. */
tg_status cuda_zero_multi(tgc_stream s, tg_dtype dt, const cuda_mt_tensor *ts, int count);
/* Found-inf: *flag = 1 when a gradient g of any tensor holds NaN or inf (else *flag unchanged). */
tg_status cuda_nonfinite_multi(tgc_stream s, tg_dtype dt, const cuda_mt_tensor *ts, int count, int32_t *flag);
/* The loss scaler's pass: g *= (float)inv_scale; *found = 1 when a g held NaN or inf before. */
tg_status cuda_unscale_multi(tgc_stream s, tg_dtype dt, const cuda_mt_tensor *ts, int count, double inv_scale,
                             int32_t *found);
tg_status cuda_clip_scale_multi(tgc_stream s, tg_dtype dt, const cuda_mt_tensor *ts, int count, const double *sumsq,
                                double max_norm);
#ifdef __cplusplus
}
#endif
#endif
