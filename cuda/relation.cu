// The device CSR transpose (cuda/relation.h): a stable radix sort of the edge ids by source
// (CUB), so within a source the entries keep edge order = destination ascending. The sorted keys
// land in t_row first; t_ptr[j] is the first sorted position with key >= j (binary search), and
// t_row[t] is then overwritten by the destination of edge t_edge[t] (binary search in row_ptr).
// Deterministic: no atomics, the sort is stable.
#include <cub/device/device_radix_sort.cuh>

#include "common.cuh"
#include "relation.h"

namespace {

constexpr size_t kAlign = 256;
size_t up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Key bits needed for sources in [0, nk).
int key_bits(int64_t nk) {
  int b = 1;
  while (b < 32 && ((int64_t)1 << b) < nk)
    ++b;
  return b;
}

size_t sort_bytes(int64_t nk, int64_t nnz) {
  size_t bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, bytes, (const uint32_t *)nullptr, (uint32_t *)nullptr,
                                  (const int64_t *)nullptr, (int64_t *)nullptr, nnz, 0, key_bits(nk));
  return bytes;
}

__global__ void k_iota(int64_t *v, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    v[i] = i;
}

// t_ptr[j] = number of sorted keys < j, for j in [0, nk].
__global__ void k_t_ptr(const uint32_t *keys, int64_t nnz, int64_t nk, int64_t *t_ptr) {
  for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j <= nk; j += (int64_t)gridDim.x * blockDim.x) {
    int64_t lo = 0, hi = nnz;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if ((int64_t)keys[mid] < j)
        lo = mid + 1;
      else
        hi = mid;
    }
    t_ptr[j] = lo;
  }
}

// t_row[t] = the row i with row_ptr[i] <= t_edge[t] < row_ptr[i + 1].
__global__ void k_t_row(const int64_t *row_ptr, int64_t nq, const int64_t *t_edge, int64_t nnz, int32_t *t_row) {
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < nnz; t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t e = t_edge[t];
    int64_t lo = 0, hi = nq; // last i in [0, nq) with row_ptr[i] <= e
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (row_ptr[mid] <= e)
        lo = mid;
      else
        hi = mid;
    }
    t_row[t] = (int32_t)lo;
  }
}

} // namespace

extern "C" size_t cuda_relation_transpose_workspace(int64_t nq, int64_t nk, int64_t nnz) {
  (void)nq;
  if (nnz <= 0 || nk <= 0) return 0;
  return up((size_t)nnz * sizeof(int64_t)) + up(sort_bytes(nk, nnz));
}

extern "C" tg_status cuda_relation_transpose(tgc_stream s, int64_t nq, int64_t nk, int64_t nnz, const int64_t *row_ptr,
                                             const int32_t *col_idx, int64_t *t_ptr, int32_t *t_row, int64_t *t_edge,
                                             void *workspace, size_t workspace_bytes) {
  if (nq < 0 || nk < 0 || nnz < 0 || nq > INT32_MAX || nk > INT32_MAX || (nnz > 0 && (nq == 0 || nk == 0))) {
    tgc_set_error("cuda_relation_transpose: sizes nq %lld, nk %lld, nnz %lld are inconsistent", (long long)nq,
                  (long long)nk, (long long)nnz);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (!t_ptr || (nnz > 0 && (!row_ptr || !col_idx || !t_row || !t_edge))) {
    tgc_set_error("cuda_relation_transpose: a device pointer is NULL");
    return TG_ERR_INVALID_ARGUMENT;
  }
  const size_t need = cuda_relation_transpose_workspace(nq, nk, nnz);
  if (need > 0 && (!workspace || workspace_bytes < need)) {
    tgc_set_error("cuda_relation_transpose: workspace of %zu bytes, %zu needed", workspace ? workspace_bytes : 0, need);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (nnz == 0) {
    TGC_CUDA(cudaMemsetAsync(t_ptr, 0, (size_t)(nk + 1) * sizeof(int64_t), s));
    return TG_OK;
  }
  int64_t *ids = (int64_t *)workspace;
  void *tmp = (char *)workspace + up((size_t)nnz * sizeof(int64_t));
  size_t tmp_bytes = workspace_bytes - up((size_t)nnz * sizeof(int64_t));
  const unsigned blocks = tgc_blocks(nnz, 256);
  k_iota<<<blocks, 256, 0, s>>>(ids, nnz);
  TGC_LAUNCHED("relation_transpose_iota");
  uint32_t *keys = reinterpret_cast<uint32_t *>(t_row); // sorted sources, until t_row is written
  TGC_CUDA(cub::DeviceRadixSort::SortPairs(tmp, tmp_bytes, reinterpret_cast<const uint32_t *>(col_idx), keys, ids,
                                           t_edge, nnz, 0, key_bits(nk), s));
  k_t_ptr<<<tgc_blocks(nk + 1, 256), 256, 0, s>>>(keys, nnz, nk, t_ptr);
  TGC_LAUNCHED("relation_transpose_ptr");
  k_t_row<<<blocks, 256, 0, s>>>(row_ptr, nq, t_edge, nnz, t_row);
  TGC_LAUNCHED("relation_transpose_row");
  return TG_OK;
}
