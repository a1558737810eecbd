/* CUDA launchers for inverted dropout (f32, f16, bf16). The mask is host/dropout.h's, bit for
 * bit: element i kept iff uniform53(Philox4x32-10(key = seed, counter = (i, call))) < keep. */
#ifndef TIGA_CUDA_DROPOUT_H
#define TIGA_CUDA_DROPOUT_H
#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif
/* y_i = kept(i) ? x_i * s : 0 with s = (float)(1 / keep). keep >= 1: y = x (a copy). */
tg_status cuda_dropout_forward(tgc_stream s, tg_dtype dt, uint64_t seed, uint64_t call, double keep, const void *x,
                               void *y, int64_t n);
/* gx_i += kept(i) ? gy_i * s : 0 (keep >= 1: gx += gy). */
tg_status cuda_dropout_backward(tgc_stream s, tg_dtype dt, uint64_t seed, uint64_t call, double keep, const void *gy,
                                void *gx, int64_t n);
#ifdef __cplusplus
}
#endif
#endif
