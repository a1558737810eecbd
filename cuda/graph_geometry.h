/* CUDA launchers for edge geometry over a relation's device CSR (host/graph_geometry.h has the math).
 * Positions and out are f32 on the device (positions stay f32 when a model runs in bf16).
 * Deterministic: per-destination sums walk a row, per-source sums walk the transpose. */
#ifndef TIGA_CUDA_GRAPH_GEOMETRY_H
#define TIGA_CUDA_GRAPH_GEOMETRY_H
#include "launch.h"
#include "relation.h"

#ifdef __cplusplus
extern "C" {
#endif
/* out [E, dim] = pos_src[j] - pos_dst[i]. */
tg_status cuda_displacement_forward(tgc_stream s, const tgc_csr *g, int dim, const float *pos_src, const float *pos_dst,
                                    float *out);
/* dpos_src += per-source sums of dout (needs g's transpose); dpos_dst -= per-destination sums. Either
 * may be NULL; they may be the same buffer (both kernels run in stream order). */
tg_status cuda_displacement_backward(tgc_stream s, const tgc_csr *g, int dim, const float *dout, float *dpos_src,
                                     float *dpos_dst);
#ifdef __cplusplus
}
#endif
#endif
