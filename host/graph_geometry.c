#include "graph_geometry.h"

static inline double ld(tg_dtype dt, const void *p, int64_t i) {
  return dt == TG_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}
static inline void add(tg_dtype dt, void *p, int64_t i, double v) {
  if (dt == TG_F32)
    ((float *)p)[i] = (float)((double)((float *)p)[i] + v);
  else
    ((double *)p)[i] += v;
}

void host_displacement_forward(tg_dtype dt, int64_t nq, const int64_t *row_ptr, const int32_t *col_idx, int dim,
                               const void *pos_src, const void *pos_dst, void *out) {
  for (int64_t i = 0; i < nq; i++)
    for (int64_t e = row_ptr[i]; e < row_ptr[i + 1]; e++)
      for (int d = 0; d < dim; d++) {
        double v = ld(dt, pos_src, (int64_t)col_idx[e] * dim + d) - ld(dt, pos_dst, i * dim + d);
        if (dt == TG_F32)
          ((float *)out)[e * dim + d] = (float)v;
        else
          ((double *)out)[e * dim + d] = v;
      }
}

void host_displacement_backward(tg_dtype dt, int64_t nq, const int64_t *row_ptr, const int32_t *col_idx, int dim,
                                const void *dout, void *dpos_src, void *dpos_dst) {
  for (int64_t i = 0; i < nq; i++)
    for (int64_t e = row_ptr[i]; e < row_ptr[i + 1]; e++)
      for (int d = 0; d < dim; d++) {
        double g = ld(dt, dout, e * dim + d);
        if (dpos_src) add(dt, dpos_src, (int64_t)col_idx[e] * dim + d, g);
        if (dpos_dst) add(dt, dpos_dst, i * dim + d, -g);
      }
}
