/* CUDA launchers for tg_embedding (tables f32, f16, bf16; ids I32 on the device). Ids outside
 * [0, V) (which the op rejects before launching) give zero rows and add nothing: the kernels never
 * index out of bounds. */
#ifndef TIGA_CUDA_EMBEDDING_H
#define TIGA_CUDA_EMBEDDING_H
#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif
/* y[i, :] = table[ids[i], :], i < n, rows of D elements. */
tg_status cuda_embedding_forward(tgc_stream s, tg_dtype dt, const void *table, int64_t V, int64_t D, const int32_t *ids,
                                 int64_t n, void *y);
/* gtable[ids[i], :] += gy[i, :] with atomics (repeated ids accumulate; the order of the adds, and
 * so the rounding of f16/bf16 sums, is not fixed). */
tg_status cuda_embedding_backward(tgc_stream s, tg_dtype dt, const void *gy, const int32_t *ids, int64_t n, int64_t V,
                                  int64_t D, void *gtable);
#ifdef __cplusplus
}
#endif
#endif
