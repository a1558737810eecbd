/* Radius graphs from point positions on the GPU. Same definition as host/radius.h (d2 rounded per
 * operation without FMA, cutoff c * c, square / self loops, max_neighbors by (d2, j), the Morton
 * permutation): the arrays are identical, bit for bit, to host_radius_build's.
 *
 * Memory. Every device allocation goes through the caller's allocator: alloc(ctx, bytes) returns
 * device memory usable on the stream (NULL when out of memory), release(ctx, p) gives it back. The
 * builder releases its scratch right after enqueuing the last kernel that reads it, so release must
 * be stream-ordered on s (cudaFreeAsync semantics) or wait for the device (cudaFree semantics).
 * Outputs (*d_row_ptr, *d_col_idx) are allocated through it too and belong to the caller.
 *
 * Synchronisation. The launcher blocks once, after the count pass, to learn nnz (and whether a
 * coordinate was not finite); everything after that (fill, row sort, Morton order) is enqueued on
 * s and not awaited. Host positions (pageable or pinned) are uploaded by the launcher and have
 * reached the device when it returns: the caller may reuse them at once. */
#ifndef TIGA_CUDA_RADIUS_H
#define TIGA_CUDA_RADIUS_H
#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tgc_allocator {
  void *(*alloc)(void *ctx, size_t bytes);
  void (*release)(void *ctx, void *p);
  void *ctx;
} tgc_allocator;

/* Events recorded (when phase_events is non-NULL) at: 0 start, 1 positions on the device, 2 cell
 * list built, 3 rows counted (row_ptr done), 4 rows filled and sorted (this phase includes the host
 * round trip for nnz), 5 Morton order done. */
#define CUDA_RADIUS_EVENTS 6

typedef struct cuda_radius_args {
  int64_t n_dst, n_src;
  int dim;                       /* 1, 2 or 3 */
  tg_dtype dtype;                /* TG_F32 or TG_F64 */
  const void *pos_dst, *pos_src; /* [n, dim]; pos_src unused when square */
  int on_device;                 /* 1: device pointers; 0: host pointers, uploaded here */
  double cutoff;                 /* finite, > 0 */
  int64_t max_neighbors;         /* 0 = unlimited */
  int square, self_loops;
  struct CUevent_st *const *phase_events; /* NULL, or CUDA_RADIUS_EVENTS events (benchmarks) */
} cuda_radius_args;

/* Builds the radius graph of a on stream s. On success *d_row_ptr (n_dst + 1 int64) and *d_col_idx
 * (max(nnz, 1) int32, never NULL) are device arrays from al, *nnz the edge count; d_perm: NULL, or a
 * device array of n_dst int64 that receives the Morton permutation. Errors (message in tgc_error()):
 * TG_ERR_INVALID_ARGUMENT for arguments out of range (as host_radius_build) or a non-finite
 * coordinate ("pos_dst point 7 ..."), TG_ERR_OUT_OF_MEMORY when al fails, TG_ERR_DEVICE for a
 * failed CUDA call. On failure the outputs are NULL / 0 and every allocation has been released. */
tg_status cuda_radius_build(tgc_stream s, const cuda_radius_args *a, const tgc_allocator *al, int64_t **d_row_ptr,
                            int32_t **d_col_idx, int64_t *nnz, int64_t *d_perm);

#ifdef __cplusplus
}
#endif
#endif
