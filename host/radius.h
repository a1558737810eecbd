/* Radius graphs from point positions: the host builder (the reference; cuda/radius.h is the GPU
 * builder and produces the same arrays bit for bit).
 *
 * Points. n_dst destination points pos_dst [n_dst, dim] and n_src source points pos_src
 * [n_src, dim], row-major, dim in {1, 2, 3}, dtype TG_F32 or TG_F64 (converted to double exactly).
 * A "square" graph has one point set: pos_src is ignored (may be NULL) and n_src must equal n_dst.
 *
 * Edges. Destination i lists source j when d2(i, j) <= c2, where
 *   d2(i, j) = ((s_0 + s_1) + s_2),  s_d = (p_j,d - p_i,d) * (p_j,d - p_i,d),
 *   c2 = cutoff * cutoff,
 * every operation a double operation rounded once, in this order, never fused into an FMA. In a
 * square graph the pair j == i is listed only with self_loops (a duplicate point j != i at distance
 * 0 always is). max_neighbors k > 0 keeps the k smallest (d2, j) pairs of a row (d2 first, then the
 * smaller j; a self loop counts with d2 = 0).
 *
 * Output (destination-major CSR, the edge order of host/relation.h): row_ptr [n_dst + 1] (int64,
 * row_ptr[0] = 0), col_idx [nnz] (int32), the sources of each row ascending and unique.
 *
 * Morton permutation (optional, a function of pos_dst alone). With lo_d / hi_d the smallest / largest
 * coordinate d over the destination points, in half scale (no overflow for any finite input):
 *   u_d(i) = 0.5 * p_i,d - 0.5 * lo_d,   e_d = 0.5 * hi_d - 0.5 * lo_d,   E = max_d e_d,
 *   B = 63 / dim (integer division: 63, 31, 21 bits per coordinate),
 *   q_d(i) = 0 when E == 0, else min(floor((u_d(i) / E) * 2^B), 2^B - 1)
 * (each operation one rounded double operation), the code interleaves the bits: bit b of q_d is
 * bit b * dim + d of the code. perm[r] is the index of the point of rank r when the destination
 * points are sorted by (code, index) ascending. Minimum and maximum order -0.0 before +0.0.
 *
 * Errors (the builder writes a message into msg, capacity msg_cap, when msg is non-NULL):
 * TG_ERR_INVALID_ARGUMENT for a non-finite coordinate (the message names the set and the first such
 * point), for arguments out of range (dim, dtype, counts < 0 or > INT32_MAX, cutoff not finite or
 * <= 0, max_neighbors < 0, NULL positions with points, square with n_src != n_dst, self_loops without
 * square); TG_ERR_OUT_OF_MEMORY when an allocation fails. On failure nothing is returned through
 * the output pointers (they are set to NULL / 0). */
#ifndef TIGA_HOST_RADIUS_H
#define TIGA_HOST_RADIUS_H
#include <stddef.h>
#include <stdint.h>

#include "tiga.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct host_radius_args {
  int64_t n_dst, n_src;
  int dim;                       /* 1, 2 or 3 */
  tg_dtype dtype;                /* TG_F32 or TG_F64, both position arrays */
  const void *pos_dst, *pos_src; /* [n, dim] host arrays; pos_src unused when square */
  double cutoff;                 /* finite, > 0 */
  int64_t max_neighbors;         /* 0 = unlimited */
  int square;                    /* the source set is the destination set */
  int self_loops;                /* square only: list the pair i -> i */
} host_radius_args;

/* Builds the radius graph of a. On success *row_ptr (n_dst + 1 entries) and *col_idx (max(nnz, 1)
 * entries, never NULL) are malloc'd arrays the caller owns and releases with free(); *nnz is the
 * edge count. perm: NULL, or a caller array of n_dst entries that receives the Morton permutation.
 * Cost: O(n + nnz) expected with a cell list (cell edge about the cutoff), more for clustered
 * points (one cell holding every point degrades to all pairs, still exact). From 16384 destinations
 * the rows are built by the calling thread and helper threads, one per CPU the process may run on
 * (POSIX threads, joined before the call returns); the result does not depend on their number. */
tg_status host_radius_build(const host_radius_args *a, int64_t **row_ptr, int32_t **col_idx, int64_t *nnz,
                            int64_t *perm, char *msg, size_t msg_cap);

/* The Morton permutation alone (same definition as above) of n points [n, dim] of dtype into perm
 * [n]. The points must be finite; returns TG_ERR_INVALID_ARGUMENT otherwise (naming the point). */
tg_status host_radius_morton(int64_t n, int dim, tg_dtype dtype, const void *pos, int64_t *perm, char *msg,
                             size_t msg_cap);

#ifdef __cplusplus
}
#endif
#endif
