/* The device form of a relation, as kernels see it. Built once per relation and runtime by
 * ops/relation.c (which owns the memory, caches it on the relation and frees it with it) and
 * handed to launchers by value. Kernels never see the relation handle or the tape.
 *
 * CSR (every kind can be read as one; the graph ops and CSR attention use it): the allowed pairs
 * (j -> i), destination-major, sources ascending within a row. Edge e of row i is
 * row_ptr[i] <= e < row_ptr[i + 1], its source col_idx[e]. Per-edge tensors ([E, ...]) follow
 * this order.
 * Transpose (built on demand, NULL until then): source-major. Entry t of source j is
 * t_ptr[j] <= t < t_ptr[j + 1]; its destination t_row[t] and its edge id t_edge[t] (the e above).
 * Within a source the entries are ordered by destination ascending (= by edge id ascending), so
 * a per-source sum walked in t order is deterministic: no float atomics anywhere.
 * Indices: row_ptr / t_ptr / t_edge are int64 (nnz may exceed 2^31 for large dense relations),
 * col_idx / t_row int32 (nq, nk <= INT32_MAX). */
#ifndef TIGA_CUDA_RELATION_H
#define TIGA_CUDA_RELATION_H
#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tgc_csr {
  int64_t nq, nk, nnz;
  const int64_t *row_ptr; /* [nq + 1], device */
  const int32_t *col_idx; /* [nnz], device */
  const int64_t *t_ptr;   /* [nk + 1], device; NULL until the transpose is built */
  const int32_t *t_row;   /* [nnz] */
  const int64_t *t_edge;  /* [nnz] */
} tgc_csr;

/* Scratch bytes cuda_relation_transpose needs for these sizes. */
size_t cuda_relation_transpose_workspace(int64_t nq, int64_t nk, int64_t nnz);
/* Builds the transpose of (row_ptr, col_idx) into t_ptr [nk + 1], t_row [nnz], t_edge [nnz]
 * (device memory the caller owns), on stream s. Deterministic (stable by destination). */
tg_status cuda_relation_transpose(tgc_stream s, int64_t nq, int64_t nk, int64_t nnz, const int64_t *row_ptr,
                                  const int32_t *col_idx, int64_t *t_ptr, int32_t *t_row, int64_t *t_edge,
                                  void *workspace, size_t workspace_bytes);

#ifdef __cplusplus
}
#endif
#endif
