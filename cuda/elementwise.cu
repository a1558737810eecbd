// Unary elementwise ops and full reductions on the device (binary ops: binary.cu). Math in f32
// registers, storage in T.
#include "common.cuh"
#include "elementwise.h"
#include "finite.cuh"

#define SQRT_2_OVER_PI 0.7978845608028654f

__device__ __forceinline__ float unary_f(int op, float a, float x) {
  switch (op) {
  case HOST_SCALE: return a * x;
  case HOST_RELU: return x > 0.f ? x : 0.f;
  case HOST_LEAKY_RELU: return x > 0.f ? x : a * x;
  case HOST_GELU: return 0.5f * x * (1.f + tanhf(SQRT_2_OVER_PI * (x + 0.044715f * x * x * x)));
  case HOST_TANH: return tanhf(x);
  case HOST_ELU: return x > 0.f ? x : a * expm1f(x);
  }
  return 0.f;
}

__device__ __forceinline__ float unary_df(int op, float a, float x, float y) {
  switch (op) {
  case HOST_SCALE: return a;
  case HOST_RELU: return x > 0.f ? 1.f : 0.f;
  case HOST_LEAKY_RELU: return x > 0.f ? 1.f : a;
  case HOST_GELU: {
    float u = SQRT_2_OVER_PI * (x + 0.044715f * x * x * x);
    float th = tanhf(u);
    float du = SQRT_2_OVER_PI * (1.f + 3.f * 0.044715f * x * x);
    // saturated tanh: the second term is 0 exactly (else 0 * inf = NaN once x^3 overflows, |x| > ~7e12)
    float s2 = 1.f - th * th;
    return 0.5f * (1.f + th) + (s2 == 0.f ? 0.f : 0.5f * x * s2 * du);
  }
  case HOST_TANH: return 1.f - y * y;
  case HOST_ELU: return x > 0.f ? 1.f : a * __expf(x);
  }
  return 0.f;
}

// Both directions test every element they store for anomaly mode (nf, finite.cuh).
template <typename T>
__global__ void k_unary_fwd(int op, float al, const T *__restrict__ x, T *__restrict__ y, long long nv, long long n,
                            tgc_nf nf) {
  constexpr int N = tgc_vec_n<T>();
  bool bad = false;
  TGC_VEC_LOOP(v, nv) {
    tgc_vec<T> a = reinterpret_cast<const tgc_vec<T> *>(x)[v], r;
#pragma unroll
    for (int k = 0; k < N; k++) {
      r.e[k] = tgc_from_f<T>(unary_f(op, al, tgc_to_f(a.e[k])));
      bad |= tgc_nonfinite(r.e[k]);
    }
    reinterpret_cast<tgc_vec<T> *>(y)[v] = r;
  }
  TGC_TAIL_LOOP(i, nv * N, n) {
    T r = tgc_from_f<T>(unary_f(op, al, tgc_to_f(x[i])));
    bad |= tgc_nonfinite(r);
    y[i] = r;
  }
  tgc_nf_raise(nf, bad);
}

template <typename T>
__global__ void k_unary_bwd(int op, float al, const T *__restrict__ x, const T *__restrict__ y,
                            const T *__restrict__ gy, T *__restrict__ gx, long long nv, long long n, tgc_nf nf) {
  constexpr int N = tgc_vec_n<T>();
  const bool need_y = op == HOST_TANH; // the other ops' derivatives read x only
  bool bad = false;
  TGC_VEC_LOOP(v, nv) {
    tgc_vec<T> a = reinterpret_cast<const tgc_vec<T> *>(x)[v], g = reinterpret_cast<const tgc_vec<T> *>(gy)[v],
               r = reinterpret_cast<tgc_vec<T> *>(gx)[v], b{};
    if (need_y) b = reinterpret_cast<const tgc_vec<T> *>(y)[v];
#pragma unroll
    for (int k = 0; k < N; k++) {
      float d = unary_df(op, al, tgc_to_f(a.e[k]), need_y ? tgc_to_f(b.e[k]) : 0.f);
      r.e[k] = tgc_from_f<T>(tgc_to_f(r.e[k]) + tgc_to_f(g.e[k]) * d);
      bad |= tgc_nonfinite(r.e[k]);
    }
    reinterpret_cast<tgc_vec<T> *>(gx)[v] = r;
  }
  TGC_TAIL_LOOP(i, nv * N, n) {
    float d = unary_df(op, al, tgc_to_f(x[i]), need_y ? tgc_to_f(y[i]) : 0.f);
    T r = tgc_from_f<T>(tgc_to_f(gx[i]) + tgc_to_f(gy[i]) * d);
    bad |= tgc_nonfinite(r);
    gx[i] = r;
  }
  tgc_nf_raise(nf, bad);
}

#define DISPATCH(dt, FN, ...) TGC_DISPATCH_FLOAT(dt, "elementwise", FN, __VA_ARGS__)

template <typename T>
static tg_status unary_fwd(cudaStream_t s, int op, double al, const void *x, void *y, long long n) {
  long long nv = tgc_vec_count<T>(n, {x, y});
  tgc_nf nf = tgc_nf_take(s);
  k_unary_fwd<T><<<tgc_vec_blocks<T>(nv, n), 256, 0, s>>>(op, (float)al, (const T *)x, (T *)y, nv, n, nf);
  TGC_LAUNCHED("unary_fwd");
  tgc_nf_cover(nf, y, n);
  return TG_OK;
}
template <typename T>
static tg_status unary_bwd(cudaStream_t s, int op, double al, const void *x, const void *y, const void *gy, void *gx,
                           long long n) {
  long long nv = tgc_vec_count<T>(n, {x, op == HOST_TANH ? y : nullptr, gy, gx});
  tgc_nf nf = tgc_nf_take(s);
  k_unary_bwd<T><<<tgc_vec_blocks<T>(nv, n), 256, 0, s>>>(op, (float)al, (const T *)x, (const T *)y, (const T *)gy,
                                                          (T *)gx, nv, n, nf);
  TGC_LAUNCHED("unary_bwd");
  tgc_nf_cover(nf, gx, n);
  return TG_OK;
}

extern "C" tg_status cuda_unary_forward(tgc_stream s, tg_dtype dt, host_unary_op op, double alpha, const void *x,
                                        void *y, int64_t n) {
  DISPATCH(dt, unary_fwd, s, op, alpha, x, y, n)
}
extern "C" tg_status cuda_unary_backward(tgc_stream s, tg_dtype dt, host_unary_op op, double alpha, const void *x,
                                         const void *y, const void *gy, void *gx, int64_t n) {
  DISPATCH(dt, unary_bwd, s, op, alpha, x, y, gy, gx, n)
}

// ---------------------------------------------------------------- sum
// Sum: each thread adds 16-byte vectors (8 bf16/f16 or 4 f32) two at a time, so enough loads are in
// flight to keep HBM busy; per-block partials in f32, then one block adds them in a fixed order
// (deterministic). A misaligned start falls back to scalar loads.
template <typename T> struct alignas(16) pack16 {
  static constexpr int n = 16 / (int)sizeof(T);
  T e[16 / sizeof(T)];
};

template <typename T> __device__ __forceinline__ float pack_sum(uint4 u) {
  pack16<T> v;
  memcpy(&v, &u, 16);
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < pack16<T>::n; k++)
    s += tgc_to_f(v.e[k]);
  return s;
}

template <typename T> __global__ void k_sum_partial(const T *__restrict__ x, long long n, float *__restrict__ part) {
  __shared__ float sh[32];
  constexpr int V = pack16<T>::n;
  long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x, stride = (long long)gridDim.x * blockDim.x;
  long long nv = ((uintptr_t)x % 16 == 0) ? n / V : 0; // whole vectors
  const uint4 *xv = reinterpret_cast<const uint4 *>(x);
  float s0 = 0.f, s1 = 0.f;
  long long i = tid;
  for (; i + stride < nv; i += 2 * stride) {
    uint4 a = __ldg(xv + i), b = __ldg(xv + i + stride);
    s0 += pack_sum<T>(a);
    s1 += pack_sum<T>(b);
  }
  if (i < nv) s0 += pack_sum<T>(__ldg(xv + i));
  for (long long k = nv * V + tid; k < n; k += stride)
    s1 += tgc_to_f(x[k]); // tail (or everything)
  float s = s0 + s1;
  for (int o = 16; o; o >>= 1)
    s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = threadIdx.x < (blockDim.x >> 5) ? sh[threadIdx.x] : 0.f;
    for (int o = 16; o; o >>= 1)
      s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
  }
}

// Deterministic: one block adds the partials in a fixed order.
template <typename T> __global__ void k_sum_final(const float *__restrict__ part, int np, float alpha, T *y) {
  __shared__ float sh[32];
  float s = 0.f;
  for (int i = threadIdx.x; i < np; i += blockDim.x)
    s += part[i];
  for (int o = 16; o; o >>= 1)
    s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = threadIdx.x < (blockDim.x >> 5) ? sh[threadIdx.x] : 0.f;
    for (int o = 16; o; o >>= 1)
      s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x == 0) *y = tgc_from_f<T>(alpha * s);
  }
}

template <typename T> static tg_status sum_fwd(cudaStream_t s, const void *x, long long n, double alpha, void *y) {
  // 1024 blocks of 256 threads fill an H100/H200 (8 blocks on each of 132 SMs); fewer for small n
  int blocks = (int)tgc_blocks((n + pack16<T>::n - 1) / pack16<T>::n, 256, 1024);
  float *part = nullptr;
  TGC_CUDA(cudaMallocAsync((void **)&part, blocks * sizeof(float), s));
  k_sum_partial<T><<<blocks, 256, 0, s>>>((const T *)x, n, part);
  k_sum_final<T><<<1, 1024, 0, s>>>(part, blocks, (float)alpha, (T *)y);
  cudaError_t e = cudaGetLastError();
  cudaFreeAsync(part, s);
  if (e != cudaSuccess) {
    tgc_set_error("sum: %s", cudaGetErrorString(e));
    return tgc_status_of(e);
  }
  return TG_OK;
}

// Backward of sum: gx[i] (+)= g with g = alpha * (gy_dev ? *gy_dev : gy_host). Overwriting (add = 0)
// only writes, 16 bytes per store; gx comes from the arena or cudaMalloc, so it is 16-byte aligned
// in practice, and a misaligned one takes the scalar loop.
template <typename T>
__global__ void k_sum_bwd(const T *gy_dev, float gy_host, float alpha, long long n, int add, T *__restrict__ gx) {
  constexpr int V = pack16<T>::n;
  float g = alpha * (gy_dev ? tgc_to_f(gy_dev[0]) : gy_host);
  long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x, stride = (long long)gridDim.x * blockDim.x;
  long long nv = ((uintptr_t)gx % 16 == 0) ? n / V : 0;
  uint4 *xv = reinterpret_cast<uint4 *>(gx);
  T gt = tgc_from_f<T>(g);
  pack16<T> c;
#pragma unroll
  for (int k = 0; k < V; k++)
    c.e[k] = gt;
  uint4 cu;
  memcpy(&cu, &c, 16);
  for (long long i = tid; i < nv; i += stride) {
    if (add) {
      uint4 u = xv[i];
      pack16<T> v;
      memcpy(&v, &u, 16);
#pragma unroll
      for (int k = 0; k < V; k++)
        v.e[k] = tgc_from_f<T>(tgc_to_f(v.e[k]) + g);
      memcpy(&u, &v, 16);
      xv[i] = u;
    } else {
      xv[i] = cu;
    }
  }
  for (long long i = nv * V + tid; i < n; i += stride)
    gx[i] = add ? tgc_from_f<T>(tgc_to_f(gx[i]) + g) : gt;
}

template <typename T>
static tg_status sum_bwd(cudaStream_t s, const void *gy_dev, double gy_host, long long n, double alpha, int add,
                         void *gx) {
  k_sum_bwd<T><<<tgc_blocks((n + pack16<T>::n - 1) / pack16<T>::n, 256), 256, 0, s>>>((const T *)gy_dev, (float)gy_host,
                                                                                      (float)alpha, n, add, (T *)gx);
  TGC_LAUNCHED("sum_bwd");
  return TG_OK;
}

extern "C" tg_status cuda_sum_forward(tgc_stream s, tg_dtype dt, const void *x, int64_t n, double alpha, void *y) {
  DISPATCH(dt, sum_fwd, s, x, n, alpha, y)
}
extern "C" tg_status cuda_sum_backward(tgc_stream s, tg_dtype dt, const void *gy, int64_t n, double alpha, void *gx) {
  DISPATCH(dt, sum_bwd, s, gy, 0.0, n, alpha, 1, gx)
}
// gx (+)= alpha * gy where gy is a device scalar (gy_dev) or, when gy_dev is NULL, the host value gy_host
// (no copy, no sync); add = 0 overwrites gx without reading it. (Declared in ops/reduce.c.)
extern "C" tg_status cuda_sum_backward_ex(tgc_stream s, tg_dtype dt, const void *gy_dev, double gy_host, int64_t n,
                                          double alpha, int add, void *gx) {
  DISPATCH(dt, sum_bwd, s, gy_dev, gy_host, n, alpha, add, gx)
}
