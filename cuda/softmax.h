/* CUDA launchers for softmax over the last dim (f32, f16, bf16 storage; f32 math). Semantics
 * match host/softmax.h. */
#ifndef TIGA_CUDA_SOFTMAX_H
#define TIGA_CUDA_SOFTMAX_H
#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif
/* x, y: [rows, n] device buffers of dt. */
tg_status cuda_softmax_forward(tgc_stream s, tg_dtype dt, const void *x, void *y, int64_t rows, int64_t n);
/* gx += y * (gy - rowsum(gy * y)). */
tg_status cuda_softmax_backward(tgc_stream s, tg_dtype dt, const void *y, const void *gy, void *gx, int64_t rows,
                                int64_t n);
#ifdef __cplusplus
}
#endif
#endif
