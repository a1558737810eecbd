/* Non-finite checks on the device (anomaly mode, tg_tape_set_check_finite). */
#ifndef TIGA_CUDA_FINITE_H
#define TIGA_CUDA_FINITE_H
#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif
/* *flag = max(*flag, tag) when one of the n elements of x (f32, f64, f16 or bf16) is NaN or +-inf.
 * Stream-ordered; nothing waits. Other dtypes: TG_ERR_DTYPE. */
tg_status cuda_flag_nonfinite(tgc_stream s, tg_dtype dt, const void *x, int64_t n, int32_t tag, int32_t *flag);
#ifdef __cplusplus
}
#endif
#endif
