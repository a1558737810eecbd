/* Host kernels for tg_embedding: gather rows of a table [V, D] by I32 ids, scatter-add back. */
#ifndef TIGA_HOST_EMBEDDING_H
#define TIGA_HOST_EMBEDDING_H
#include <stddef.h>
#include <stdint.h>

#include "tiga.h"

/* Flat position of the first id outside [0, V), or -1 when every id is valid. */
int64_t host_embedding_bad_id(const int32_t *ids, int64_t n, int64_t V);
/* y[i, :] = table[ids[i], :] for i < n; rows of D elements of `elem` bytes. Ids must be valid. */
void host_embedding_forward(size_t elem, const void *table, int64_t D, const int32_t *ids, int64_t n, void *y);
/* gtable[ids[i], :] += gy[i, :] for i < n (f32 or f64); repeated ids accumulate. */
void host_embedding_backward(tg_dtype dt, const void *gy, const int32_t *ids, int64_t n, int64_t D, void *gtable);
#endif
