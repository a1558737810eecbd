/* CUDA launcher for float dtype conversion (f32, f16, bf16). */
#ifndef TIGA_CUDA_CAST_H
#define TIGA_CUDA_CAST_H
#include "launch.h"
#ifdef __cplusplus
extern "C" {
#endif
/* y (dst) = x (src), or y += x when add != 0. */
tg_status cuda_cast(tgc_stream s, tg_dtype src, const void *x, tg_dtype dst, void *y, int64_t n, int add);
#ifdef __cplusplus
}
#endif
#endif
