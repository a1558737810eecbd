// tg_embedding on the device: a coalesced row gather forward, an atomic scatter-add backward.
// One thread per output element (i, d), consecutive threads on consecutive d.
#include "common.cuh"
#include "embedding.h"

template <typename T>
__global__ void k_emb_fwd(const T *__restrict__ table, long long V, long long D, const int32_t *__restrict__ ids,
                          long long n, T *__restrict__ y) {
  for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < n * D;
       idx += (long long)gridDim.x * blockDim.x) {
    long long i = idx / D, d = idx - i * D;
    long long id = ids[i];
    y[idx] = (id >= 0 && id < V) ? table[id * D + d] : tgc_from_f<T>(0.f);
  }
}

// gtable[ids[i], d] += gy[i, d]; atomicAdd has f32, f16 (sm_70+) and bf16 (sm_70+, native on sm_90)
// overloads.
template <typename T>
__global__ void k_emb_bwd(const T *__restrict__ gy, const int32_t *__restrict__ ids, long long n, long long V,
                          long long D, T *__restrict__ g) {
  for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < n * D;
       idx += (long long)gridDim.x * blockDim.x) {
    long long i = idx / D, d = idx - i * D;
    long long id = ids[i];
    if (id >= 0 && id < V) atomicAdd(&g[id * D + d], gy[idx]);
  }
}

template <typename T>
static tg_status fwd(cudaStream_t s, const void *table, long long V, long long D, const int32_t *ids, long long n,
                     void *y) {
  k_emb_fwd<T><<<tgc_blocks(n * D, 256), 256, 0, s>>>((const T *)table, V, D, ids, n, (T *)y);
  TGC_LAUNCHED("embedding_fwd");
  return TG_OK;
}

template <typename T>
static tg_status bwd(cudaStream_t s, const void *gy, const int32_t *ids, long long n, long long V, long long D,
                     void *g) {
  k_emb_bwd<T><<<tgc_blocks(n * D, 256), 256, 0, s>>>((const T *)gy, ids, n, V, D, (T *)g);
  TGC_LAUNCHED("embedding_bwd");
  return TG_OK;
}

#define DISPATCH(dt, FN, ...) TGC_DISPATCH_FLOAT(dt, "embedding", FN, __VA_ARGS__)

extern "C" tg_status cuda_embedding_forward(tgc_stream s, tg_dtype dt, const void *table, int64_t V, int64_t D,
                                            const int32_t *ids, int64_t n, void *y) {
  DISPATCH(dt, fwd, s, table, V, D, ids, n, y)
}

extern "C" tg_status cuda_embedding_backward(tgc_stream s, tg_dtype dt, const void *gy, const int32_t *ids, int64_t n,
                                             int64_t V, int64_t D, void *gtable) {
  DISPATCH(dt, bwd, s, gy, ids, n, V, D, gtable)
}
