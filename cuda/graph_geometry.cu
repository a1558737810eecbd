// Edge geometry over a relation's device CSR (cuda/graph_geometry.h).
#include "common.cuh"
#include "graph_geometry.h"

// The destination row of edge e: the last i with row_ptr[i] <= e (binary search; rows may be empty).
__device__ __forceinline__ long long row_of(const int64_t *__restrict__ row_ptr, long long nq, long long e) {
  long long lo = 0, hi = nq - 1;
  while (lo < hi) {
    long long mid = (lo + hi + 1) >> 1;
    if (row_ptr[mid] <= e)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

__global__ void k_disp_fwd(const int64_t *__restrict__ row_ptr, const int32_t *__restrict__ col, long long nq,
                           long long nnz, int dim, const float *__restrict__ ps, const float *__restrict__ pd,
                           float *__restrict__ out) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < nnz;
       e += (long long)gridDim.x * blockDim.x) {
    long long i = row_of(row_ptr, nq, e), j = col[e];
    for (int d = 0; d < dim; d++)
      out[e * dim + d] = ps[j * dim + d] - pd[i * dim + d];
  }
}

// dpos_dst[i] -= sum of dout over row i, in edge order.
__global__ void k_disp_bwd_dst(const int64_t *__restrict__ row_ptr, long long nq, int dim,
                               const float *__restrict__ dout, float *__restrict__ gd) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < nq; i += (long long)gridDim.x * blockDim.x) {
    float acc[3] = {0.f, 0.f, 0.f};
    for (long long e = row_ptr[i]; e < row_ptr[i + 1]; e++)
      for (int d = 0; d < dim; d++)
        acc[d] += dout[e * dim + d];
    for (int d = 0; d < dim; d++)
      gd[i * dim + d] -= acc[d];
  }
}

// dpos_src[j] += sum of dout over j's transposed entries, in transpose order.
__global__ void k_disp_bwd_src(const int64_t *__restrict__ t_ptr, const int64_t *__restrict__ t_edge, long long nk,
                               int dim, const float *__restrict__ dout, float *__restrict__ gs) {
  for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < nk; j += (long long)gridDim.x * blockDim.x) {
    float acc[3] = {0.f, 0.f, 0.f};
    for (long long t = t_ptr[j]; t < t_ptr[j + 1]; t++) {
      long long e = t_edge[t];
      for (int d = 0; d < dim; d++)
        acc[d] += dout[e * dim + d];
    }
    for (int d = 0; d < dim; d++)
      gs[j * dim + d] += acc[d];
  }
}

extern "C" tg_status cuda_displacement_forward(tgc_stream s, const tgc_csr *g, int dim, const float *pos_src,
                                               const float *pos_dst, float *out) {
  if (dim < 1 || dim > 3) {
    tgc_set_error("cuda_displacement_forward: dim %d; expected 1..3", dim);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (g->nnz == 0) return TG_OK;
  k_disp_fwd<<<tgc_blocks(g->nnz, 256), 256, 0, s>>>(g->row_ptr, g->col_idx, g->nq, g->nnz, dim, pos_src, pos_dst, out);
  TGC_LAUNCHED("displacement_forward");
  return TG_OK;
}

extern "C" tg_status cuda_displacement_backward(tgc_stream s, const tgc_csr *g, int dim, const float *dout,
                                                float *dpos_src, float *dpos_dst) {
  if (dim < 1 || dim > 3) {
    tgc_set_error("cuda_displacement_backward: dim %d; expected 1..3", dim);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (g->nnz == 0) return TG_OK;
  if (dpos_dst) {
    k_disp_bwd_dst<<<tgc_blocks(g->nq, 256), 256, 0, s>>>(g->row_ptr, g->nq, dim, dout, dpos_dst);
    TGC_LAUNCHED("displacement_backward (destinations)");
  }
  if (dpos_src) {
    if (!g->t_ptr) {
      tgc_set_error("cuda_displacement_backward: the relation's transpose was not built");
      return TG_ERR_INTERNAL;
    }
    k_disp_bwd_src<<<tgc_blocks(g->nk, 256), 256, 0, s>>>(g->t_ptr, g->t_edge, g->nk, dim, dout, dpos_src);
    TGC_LAUNCHED("displacement_backward (sources)");
  }
  return TG_OK;
}
