/* CUDA launchers for the shape family. Semantics match host/shape.h (the host_swap view is
 * shared). Copies move elements by size (any dtype); accumulating forms take f32, f16, bf16. */
#ifndef TIGA_CUDA_SHAPE_H
#define TIGA_CUDA_SHAPE_H
#include "../host/shape.h"
#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif
/* dst = src, `bytes` bytes, device to device on the stream. */
tg_status cuda_copy(tgc_stream s, void *dst, const void *src, size_t bytes);
/* y = swap(x) (accumulate 0: any dtype) or y += swap(x) (accumulate 1: f32, f16, bf16). */
tg_status cuda_transpose(tgc_stream s, tg_dtype dt, host_swap sw, const void *x, void *y, int accumulate);
/* dst[r * dld + doff + c] (=, or += when accumulate) src[r * sld + soff + c], r < rows, c < w. */
tg_status cuda_cols(tgc_stream s, tg_dtype dt, int64_t rows, int64_t w, const void *src, int64_t sld, int64_t soff,
                    void *dst, int64_t dld, int64_t doff, int accumulate);
#ifdef __cplusplus
}
#endif
#endif
