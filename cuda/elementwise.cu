// Elementwise ops and full reductions on the device. Math in f32 registers, storage in T.
#include "common.cuh"
#include "elementwise.h"

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
    return 0.5f * (1.f + th) + 0.5f * x * (1.f - th * th) * du;
  }
  case HOST_TANH: return 1.f - y * y;
  case HOST_ELU: return x > 0.f ? 1.f : a * __expf(x);
  }
  return 0.f;
}

template <typename T>
__global__ void k_unary_fwd(int op, float al, const T *__restrict__ x, T *__restrict__ y, long long nv, long long n) {
  constexpr int N = tgc_vec_n<T>();
  TGC_VEC_LOOP(v, nv) {
    tgc_vec<T> a = reinterpret_cast<const tgc_vec<T> *>(x)[v], r;
#pragma unroll
    for (int k = 0; k < N; k++)
      r.e[k] = tgc_from_f<T>(unary_f(op, al, tgc_to_f(a.e[k])));
    reinterpret_cast<tgc_vec<T> *>(y)[v] = r;
  }
  TGC_TAIL_LOOP(i, nv * N, n) y[i] = tgc_from_f<T>(unary_f(op, al, tgc_to_f(x[i])));
}

template <typename T>
__global__ void k_unary_bwd(int op, float al, const T *__restrict__ x, const T *__restrict__ y,
                            const T *__restrict__ gy, T *__restrict__ gx, long long nv, long long n) {
  constexpr int N = tgc_vec_n<T>();
  const bool need_y = op == HOST_TANH; // the other ops' derivatives read x only
  TGC_VEC_LOOP(v, nv) {
    tgc_vec<T> a = reinterpret_cast<const tgc_vec<T> *>(x)[v], g = reinterpret_cast<const tgc_vec<T> *>(gy)[v],
               r = reinterpret_cast<tgc_vec<T> *>(gx)[v], b{};
    if (need_y) b = reinterpret_cast<const tgc_vec<T> *>(y)[v];
#pragma unroll
    for (int k = 0; k < N; k++) {
      float d = unary_df(op, al, tgc_to_f(a.e[k]), need_y ? tgc_to_f(b.e[k]) : 0.f);
      r.e[k] = tgc_from_f<T>(tgc_to_f(r.e[k]) + tgc_to_f(g.e[k]) * d);
    }
    reinterpret_cast<tgc_vec<T> *>(gx)[v] = r;
  }
  TGC_TAIL_LOOP(i, nv * N, n) {
    float d = unary_df(op, al, tgc_to_f(x[i]), need_y ? tgc_to_f(y[i]) : 0.f);
    gx[i] = tgc_from_f<T>(tgc_to_f(gx[i]) + tgc_to_f(gy[i]) * d);
  }
}

__device__ __forceinline__ float binary_f(int op, float a, float b) {
  return op == HOST_ADD ? a + b : op == HOST_SUB ? a - b : a * b;
}

// y = a op b; a operand of na elements is read at i % na (na == n or na divides n; likewise b).
// The vector path needs na and nb to be multiples of N, so a vector never straddles a wrap.
template <typename T>
__global__ void k_binary_fwd(int op, const T *__restrict__ a, long long na, const T *__restrict__ b, long long nb,
                             T *__restrict__ y, long long nv, long long n) {
  constexpr int N = tgc_vec_n<T>();
  TGC_VEC_LOOP(v, nv) {
    long long i = v * N;
    tgc_vec<T> av = *reinterpret_cast<const tgc_vec<T> *>(a + (na == n ? i : i % na)),
               bv = *reinterpret_cast<const tgc_vec<T> *>(b + (nb == n ? i : i % nb)), r;
#pragma unroll
    for (int k = 0; k < N; k++)
      r.e[k] = tgc_from_f<T>(binary_f(op, tgc_to_f(av.e[k]), tgc_to_f(bv.e[k])));
    reinterpret_cast<tgc_vec<T> *>(y)[v] = r;
  }
  TGC_TAIL_LOOP(i, nv * N, n) {
    float av = tgc_to_f(a[na == n ? i : i % na]), bv = tgc_to_f(b[nb == n ? i : i % nb]);
    y[i] = tgc_from_f<T>(binary_f(op, av, bv));
  }
}

// d y / d (operand `which`) at element i: add 1, sub +1/-1, mul the other operand.
template <typename T>
__device__ __forceinline__ float dpart(int op, int which, const T *other, long long no, long long i) {
  if (op == HOST_MUL) return tgc_to_f(other[i % no]);
  return (op == HOST_SUB && which == 1) ? -1.f : 1.f;
}

// Full-size gradient of one operand: g[i] += gy[i] * d(i). `other` (no elements, read at i % no)
// is only read for mul; the vector path needs no to be a multiple of N.
template <typename T>
__global__ void k_binary_bwd_full(int op, int which, const T *__restrict__ other, long long no,
                                  const T *__restrict__ gy, T *__restrict__ g, long long nv, long long n) {
  constexpr int N = tgc_vec_n<T>();
  TGC_VEC_LOOP(v, nv) {
    long long i = v * N;
    tgc_vec<T> gv = reinterpret_cast<const tgc_vec<T> *>(gy)[v], r = reinterpret_cast<tgc_vec<T> *>(g)[v], ov{};
    if (op == HOST_MUL) ov = *reinterpret_cast<const tgc_vec<T> *>(other + (no == n ? i : i % no));
    const float c = (op == HOST_SUB && which == 1) ? -1.f : 1.f;
#pragma unroll
    for (int k = 0; k < N; k++)
      r.e[k] = tgc_from_f<T>(tgc_to_f(r.e[k]) + tgc_to_f(gv.e[k]) * (op == HOST_MUL ? tgc_to_f(ov.e[k]) : c));
    reinterpret_cast<tgc_vec<T> *>(g)[v] = r;
  }
  TGC_TAIL_LOOP(i, nv * N, n) g[i] = tgc_from_f<T>(tgc_to_f(g[i]) + tgc_to_f(gy[i]) * dpart(op, which, other, no, i));
}

// Broadcast operand of ns elements: g[j] += sum over rows r of gy[r*ns + j] * d(r*ns + j).
// Block (x: columns, y: row chunk) sums its rows and adds once with an atomic.
template <typename T>
__global__ void k_binary_bwd_reduce(int op, int which, const T *__restrict__ other, long long no,
                                    const T *__restrict__ gy, float *__restrict__ acc, long long ns, long long rows,
                                    long long rows_per_chunk) {
  long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (j >= ns) return;
  long long r0 = blockIdx.y * rows_per_chunk, r1 = min(rows, r0 + rows_per_chunk);
  float s = 0.f;
  for (long long r = r0; r < r1; r++) {
    long long i = r * ns + j;
    s += tgc_to_f(gy[i]) * dpart(op, which, other, no, i);
  }
  atomicAdd(&acc[j], s);
}

template <typename T> __global__ void k_add_into(T *__restrict__ g, const float *__restrict__ acc, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    g[i] = tgc_from_f<T>(tgc_to_f(g[i]) + acc[i]);
}

template <typename T>
static tg_status binary_bwd_one(cudaStream_t s, int op, int which, const T *other, long long no, const T *gy, T *g,
                                long long ng, long long n) {
  if (ng == n) {
    constexpr int N = tgc_vec_n<T>();
    long long nv = (op != HOST_MUL || no % N == 0) ? tgc_vec_count<T>(n, {op == HOST_MUL ? other : nullptr, gy, g}) : 0;
    k_binary_bwd_full<T><<<tgc_vec_blocks<T>(nv, n), 256, 0, s>>>(op, which, other, no, gy, g, nv, n);
    TGC_LAUNCHED("binary_bwd_full");
    return TG_OK;
  }
  long long rows = n / ng;
  float *acc = nullptr;
  TGC_CUDA(cudaMallocAsync((void **)&acc, ng * sizeof(float), s));
  cudaError_t e = cudaMemsetAsync(acc, 0, ng * sizeof(float), s);
  if (e == cudaSuccess) {
    long long chunk = 64;
    long long chunks = (rows + chunk - 1) / chunk;
    if (chunks > 65535) {
      chunk = (rows + 65534) / 65535;
      chunks = (rows + chunk - 1) / chunk;
    }
    dim3 grid((unsigned)((ng + 255) / 256), (unsigned)chunks);
    k_binary_bwd_reduce<T><<<grid, 256, 0, s>>>(op, which, other, no, gy, acc, ng, rows, chunk);
    k_add_into<T><<<tgc_blocks(ng, 256), 256, 0, s>>>(g, acc, ng);
    e = cudaGetLastError();
  }
  cudaFreeAsync(acc, s);
  if (e != cudaSuccess) {
    tgc_set_error("binary backward (broadcast): %s", cudaGetErrorString(e));
    return tgc_status_of(e);
  }
  return TG_OK;
}

template <typename T>
static tg_status binary_fwd(cudaStream_t s, int op, const void *a, long long na, const void *b, long long nb, void *y) {
  long long n = na > nb ? na : nb;
  constexpr int N = tgc_vec_n<T>();
  long long nv = (na % N == 0 && nb % N == 0) ? tgc_vec_count<T>(n, {a, b, y}) : 0;
  k_binary_fwd<T><<<tgc_vec_blocks<T>(nv, n), 256, 0, s>>>(op, (const T *)a, na, (const T *)b, nb, (T *)y, nv, n);
  TGC_LAUNCHED("binary_fwd");
  return TG_OK;
}

template <typename T>
static tg_status binary_bwd(cudaStream_t s, int op, const void *a, long long na, const void *b, long long nb,
                            const void *gy, void *ga, void *gb) {
  long long n = na > nb ? na : nb;
  tg_status st = TG_OK;
  if (ga) st = binary_bwd_one<T>(s, op, 0, (const T *)b, nb, (const T *)gy, (T *)ga, na, n);
  if (!st && gb) st = binary_bwd_one<T>(s, op, 1, (const T *)a, na, (const T *)gy, (T *)gb, nb, n);
  return st;
}

#define DISPATCH(dt, FN, ...) TGC_DISPATCH_FLOAT(dt, "elementwise", FN, __VA_ARGS__)

extern "C" tg_status cuda_binary_forward(tgc_stream s, tg_dtype dt, host_binary_op op, const void *a, int64_t na,
                                         const void *b, int64_t nb, void *y) {
  DISPATCH(dt, binary_fwd, s, op, a, na, b, nb, y)
}

extern "C" tg_status cuda_binary_backward(tgc_stream s, tg_dtype dt, host_binary_op op, const void *a, int64_t na,
                                          const void *b, int64_t nb, const void *gy, void *ga, void *gb) {
  DISPATCH(dt, binary_bwd, s, op, a, na, b, nb, gy, ga, gb)
}

template <typename T>
static tg_status unary_fwd(cudaStream_t s, int op, double al, const void *x, void *y, long long n) {
  long long nv = tgc_vec_count<T>(n, {x, y});
  k_unary_fwd<T><<<tgc_vec_blocks<T>(nv, n), 256, 0, s>>>(op, (float)al, (const T *)x, (T *)y, nv, n);
  TGC_LAUNCHED("unary_fwd");
  return TG_OK;
}
template <typename T>
static tg_status unary_bwd(cudaStream_t s, int op, double al, const void *x, const void *y, const void *gy, void *gx,
                           long long n) {
  long long nv = tgc_vec_count<T>(n, {x, op == HOST_TANH ? y : nullptr, gy, gx});
  k_unary_bwd<T><<<tgc_vec_blocks<T>(nv, n), 256, 0, s>>>(op, (float)al, (const T *)x, (const T *)y, (const T *)gy,
                                                          (T *)gx, nv, n);
  TGC_LAUNCHED("unary_bwd");
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
