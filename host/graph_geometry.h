/* Host reference kernels for edge geometry over a relation (tg_graph_displacement):
 *   out[e, d] = pos_src[j, d] - pos_dst[i, d]   for edge e = (j -> i), destination-major (host/relation.h)
 * Backward: dpos_src[j] += sum over j's edges of dout[e];  dpos_dst[i] -= sum over i's edges of dout[e]
 * (loops in edge order: deterministic). f32 / f64; math in double. */
#ifndef TIGA_HOST_GRAPH_GEOMETRY_H
#define TIGA_HOST_GRAPH_GEOMETRY_H
#include "tiga.h"

void host_displacement_forward(tg_dtype dt, int64_t nq, const int64_t *row_ptr, const int32_t *col_idx, int dim,
                               const void *pos_src, const void *pos_dst, void *out);
/* dpos_src / dpos_dst may be NULL (not wanted) or the same buffer (a square graph's one position value). */
void host_displacement_backward(tg_dtype dt, int64_t nq, const int64_t *row_ptr, const int32_t *col_idx, int dim,
                                const void *dout, void *dpos_src, void *dpos_dst);
#endif
