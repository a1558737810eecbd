// Optimizer steps and gradient-norm clipping on the device (math in host/optim.h).
#include "common.cuh"
#include "optim.h"

#include <string.h>

#define GRID_STRIDE(i, n)                                                                                              \
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)

template <typename T>
__global__ void k_sgd(T *__restrict__ p, const T *__restrict__ g, T *__restrict__ buf, long long n, float lr, float mom,
                      float damp, float wd, int nesterov, int first) {
  GRID_STRIDE(i, n) {
    float pi = tgc_to_f(p[i]);
    float d = tgc_to_f(g[i]) + wd * pi;
    if (buf) {
      float b = first ? d : mom * tgc_to_f(buf[i]) + (1.f - damp) * d;
      T bs = tgc_from_f<T>(b);
      buf[i] = bs;
      b = tgc_to_f(bs);
      d = nesterov ? d + mom * b : b;
    }
    p[i] = tgc_from_f<T>(pi - lr * d);
  }
}

// One block adds the partials in a fixed order, so the norm does not depend on scheduling.
__global__ void k_sumsq_final(const double *__restrict__ part, int np, double *acc) {
  double s = 0;
  for (int i = threadIdx.x; i < np; i += blockDim.x)
    s += part[i];
  s = tgc_block_sum(s);
  if (threadIdx.x == 0) *acc += s;
}

template <typename T> __global__ void k_scale(T *__restrict__ g, long long n, float s) {
  GRID_STRIDE(i, n) g[i] = tgc_from_f<T>(tgc_to_f(g[i]) * s);
}

template <typename T>
static tg_status sgd(cudaStream_t s, void *p, const void *g, void *buf, long long n, double lr, double mom, double damp,
                     double wd, int nesterov, int first) {
  k_sgd<T><<<tgc_blocks(n, 256), 256, 0, s>>>((T *)p, (const T *)g, (T *)buf, n, (float)lr, (float)mom, (float)damp,
                                              (float)wd, nesterov, first);
  TGC_LAUNCHED("sgd_step");
  return TG_OK;
}

template <typename T> static tg_status scale(cudaStream_t s, void *g, long long n, double f) {
  k_scale<T><<<tgc_blocks(n, 256), 256, 0, s>>>((T *)g, n, (float)f);
  TGC_LAUNCHED("scale_inplace");
  return TG_OK;
}

// ---------------------------------------------------------------- multi-tensor launches
// Many parameters per launch (PyTorch's multi_tensor_apply idea): the launch arguments carry up to
// kMtTensors tensors and a list of up to kMtBlocks (tensor, chunk) work items, one per block; a
// chunk is kMtChunk elements. The whole struct is passed by value (< 4 KB of kernel parameters),
// so nothing is uploaded. A model's ~60 parameters then take a handful of launches instead of one
// per parameter per kernel.
constexpr int kMtTensors = 24, kMtBlocks = 320, kMtThreads = 256;
constexpr long long kMtChunk = 16384; // 16 vectors of 4 f32 per thread

struct MtArgs {
  void *p[kMtTensors], *g[kMtTensors], *m[kMtTensors], *v[kMtTensors];
  long long n[kMtTensors];
  float decay[kMtTensors], step[kMtTensors], sbc2[kMtTensors], l2[kMtTensors];
  unsigned char tensor[kMtBlocks];
  int chunk[kMtBlocks];
  int base; // index of this launch's first block among all blocks of the call (partial sums)
};
static_assert(sizeof(MtArgs) < 4000, "multi-tensor arguments must fit the kernel parameter space");

// Calls launch(args, blocks) for successive batches of (tensor, chunk) work items.
template <typename F> static tg_status mt_for_each(const cuda_mt_tensor *ts, int count, F launch) {
  MtArgs a;
  memset(&a, 0, sizeof a);
  int nt = 0, nb = 0, base = 0;
  for (int t = 0; t < count; t++) {
    long long n = ts[t].n;
    if (n <= 0) continue;
    if (nt == kMtTensors) { // tensor slots full: flush
      tg_status s = launch(a, nb);
      if (s) return s;
      base += nb, nt = nb = 0;
      a.base = base;
    }
    a.p[nt] = ts[t].p, a.g[nt] = ts[t].g, a.m[nt] = ts[t].m, a.v[nt] = ts[t].v, a.n[nt] = n;
    a.decay[nt] = (float)ts[t].decay, a.step[nt] = (float)ts[t].step, a.sbc2[nt] = (float)ts[t].sbc2;
    a.l2[nt] = (float)ts[t].l2;
    for (long long c = 0; c * kMtChunk < n; c++) {
      if (nb == kMtBlocks) { // block slots full: flush, keep the current tensor in slot 0
        tg_status s = launch(a, nb);
        if (s) return s;
        base += nb, nb = 0;
        a.base = base;
        a.p[0] = a.p[nt], a.g[0] = a.g[nt], a.m[0] = a.m[nt], a.v[0] = a.v[nt], a.n[0] = a.n[nt];
        a.decay[0] = a.decay[nt], a.step[0] = a.step[nt], a.sbc2[0] = a.sbc2[nt], a.l2[0] = a.l2[nt];
        nt = 0;
      }
      a.tensor[nb] = (unsigned char)nt;
      a.chunk[nb] = (int)c;
      nb++;
    }
    nt++;
  }
  return nb ? launch(a, nb) : TG_OK;
}

extern "C" int64_t cuda_mt_blocks(const cuda_mt_tensor *ts, int count) {
  int64_t b = 0;
  for (int t = 0; t < count; t++)
    if (ts[t].n > 0) b += (ts[t].n + kMtChunk - 1) / kMtChunk;
  return b;
}

#define MT_RANGE(a, t, i0, i1)                                                                                         \
  const int t = (a).tensor[blockIdx.x];                                                                                \
  const long long i0 = (long long)(a).chunk[blockIdx.x] * kMtChunk, i1 = min((a).n[t], i0 + kMtChunk)

// The chunk as 16-byte vectors when every buffer of the tensor is vector-aligned (uniform across
// the block: chunk starts are multiples of the vector), then the scalar remainder.
__device__ __forceinline__ bool mt_aligned(const void *a, const void *b, const void *c, const void *d) {
  return (((size_t)a | (size_t)b | (size_t)c | (size_t)d) & 15) == 0;
}

template <typename T>
__device__ __forceinline__ void adamw_one(T &p, T g, T &m, T &v, float b1, float b2, float eps, float decay, float step,
                                          float sbc2, float l2) {
  float gi = tgc_to_f(g) + l2 * tgc_to_f(p); // l2: Adam's coupled weight decay (0 for AdamW)
  float mi = b1 * tgc_to_f(m) + (1.f - b1) * gi;
  float vi = b2 * tgc_to_f(v) + (1.f - b2) * gi * gi;
  m = tgc_from_f<T>(mi);
  v = tgc_from_f<T>(vi);
  p = tgc_from_f<T>(tgc_to_f(p) * decay - step * mi / (sqrtf(vi) / sbc2 + eps));
}

template <typename T>
__global__ void __launch_bounds__(kMtThreads) k_adamw_mt(MtArgs a, float b1, float b2, float eps) {
  constexpr int N = tgc_vec_n<T>();
  using V = tgc_pack<T, N>;
  MT_RANGE(a, t, i0, i1);
  T *p = (T *)a.p[t], *m = (T *)a.m[t], *v = (T *)a.v[t];
  const T *g = (const T *)a.g[t];
  const float decay = a.decay[t], step = a.step[t], sbc2 = a.sbc2[t], l2 = a.l2[t];
  long long rest = i0;
  if (mt_aligned(p, g, m, v)) {
    const long long nv = (i1 - i0) / N, o0 = i0 / N;
    for (long long k = threadIdx.x; k < nv; k += kMtThreads) {
      V pv = reinterpret_cast<V *>(p)[o0 + k], gv = reinterpret_cast<const V *>(g)[o0 + k],
        mv = reinterpret_cast<V *>(m)[o0 + k], vv = reinterpret_cast<V *>(v)[o0 + k];
#pragma unroll
      for (int e = 0; e < N; e++)
        adamw_one<T>(pv.e[e], gv.e[e], mv.e[e], vv.e[e], b1, b2, eps, decay, step, sbc2, l2);
      reinterpret_cast<V *>(p)[o0 + k] = pv;
      reinterpret_cast<V *>(m)[o0 + k] = mv;
      reinterpret_cast<V *>(v)[o0 + k] = vv;
    }
    rest = i0 + nv * N;
  }
  for (long long i = rest + threadIdx.x; i < i1; i += kMtThreads)
    adamw_one<T>(p[i], g[i], m[i], v[i], b1, b2, eps, decay, step, sbc2, l2);
}

// Block b of the call writes the double sum of squares of its chunk to part[base + b].
template <typename T> __global__ void __launch_bounds__(kMtThreads) k_sumsq_mt(MtArgs a, double *__restrict__ part) {
  constexpr int N = tgc_vec_n<T>();
  using V = tgc_pack<T, N>;
  MT_RANGE(a, t, i0, i1);
  const T *g = (const T *)a.g[t];
  double s = 0;
  long long rest = i0;
  if (mt_aligned(g, g, g, g)) {
    const long long nv = (i1 - i0) / N, o0 = i0 / N;
    for (long long k = threadIdx.x; k < nv; k += kMtThreads) {
      V gv = reinterpret_cast<const V *>(g)[o0 + k];
#pragma unroll
      for (int e = 0; e < N; e++) {
        double x = (double)tgc_to_f(gv.e[e]);
        s += x * x;
      }
    }
    rest = i0 + nv * N;
  }
  for (long long i = rest + threadIdx.x; i < i1; i += kMtThreads) {
    double x = (double)tgc_to_f(g[i]);
    s += x * x;
  }
  s = tgc_block_sum(s);
  if (threadIdx.x == 0) part[a.base + blockIdx.x] = s;
}

template <typename T>
__global__ void __launch_bounds__(kMtThreads)
    k_clip_scale_mt(MtArgs a, const double *__restrict__ sumsq, double max_norm) {
  double norm = sqrt(*sumsq), coef = max_norm / (norm + 1e-6);
  if (!isfinite(norm) || !(coef < 1.0)) return;
  const float c = (float)coef;
  MT_RANGE(a, t, i0, i1);
  T *g = (T *)a.g[t];
  for (long long i = i0 + threadIdx.x; i < i1; i += kMtThreads)
    g[i] = tgc_from_f<T>(tgc_to_f(g[i]) * c);
}

template <typename T> __device__ __forceinline__ bool mt_nonfinite(T x) { return !isfinite(tgc_to_f(x)); }

// Found-inf over the chunk: one store per block that saw one (all stores write 1).
template <typename T> __global__ void __launch_bounds__(kMtThreads) k_nonfinite_mt(MtArgs a, int *__restrict__ flag) {
  MT_RANGE(a, t, i0, i1);
  const T *g = (const T *)a.g[t];
  bool bad = false;
  for (long long i = i0 + threadIdx.x; i < i1; i += kMtThreads)
    bad |= mt_nonfinite(g[i]);
  if (__syncthreads_or(bad) && threadIdx.x == 0) *flag = 1;
}

// The loss scaler's unscale: g *= inv, found-inf on the value before the product.
template <typename T>
__global__ void __launch_bounds__(kMtThreads) k_unscale_mt(MtArgs a, float inv, int *__restrict__ found) {
  MT_RANGE(a, t, i0, i1);
  T *g = (T *)a.g[t];
  bool bad = false;
  for (long long i = i0 + threadIdx.x; i < i1; i += kMtThreads) {
    T x = g[i];
    bad |= mt_nonfinite(x);
    g[i] = tgc_from_f<T>(tgc_to_f(x) * inv);
  }
  if (__syncthreads_or(bad) && threadIdx.x == 0) *found = 1;
}

// g = 0 over the chunk (+0 in every dtype: the bits a memset writes).
template <typename T> __global__ void __launch_bounds__(kMtThreads) k_zero_mt(MtArgs a) {
  MT_RANGE(a, t, i0, i1);
  T *g = (T *)a.g[t];
  for (long long i = i0 + threadIdx.x; i < i1; i += kMtThreads)
    g[i] = tgc_from_f<T>(0.f);
}

template <typename T> static tg_status zero_mt(cudaStream_t s, const cuda_mt_tensor *ts, int count) {
  return mt_for_each(ts, count, [&](const MtArgs &a, int nb) -> tg_status {
    k_zero_mt<T><<<nb, kMtThreads, 0, s>>>(a);
    TGC_LAUNCHED("zero_multi");
    return TG_OK;
  });
}

template <typename T> static tg_status nonfinite_mt(cudaStream_t s, const cuda_mt_tensor *ts, int count, int *flag) {
  return mt_for_each(ts, count, [&](const MtArgs &a, int nb) -> tg_status {
    k_nonfinite_mt<T><<<nb, kMtThreads, 0, s>>>(a, flag);
    TGC_LAUNCHED("nonfinite_multi");
    return TG_OK;
  });
}

template <typename T>
static tg_status unscale_mt(cudaStream_t s, const cuda_mt_tensor *ts, int count, double inv, int *found) {
  return mt_for_each(ts, count, [&](const MtArgs &a, int nb) -> tg_status {
    k_unscale_mt<T><<<nb, kMtThreads, 0, s>>>(a, (float)inv, found);
    TGC_LAUNCHED("unscale_multi");
    return TG_OK;
  });
}

template <typename T>
static tg_status adamw_mt(cudaStream_t s, const cuda_mt_tensor *ts, int count, double b1, double b2, double eps) {
  return mt_for_each(ts, count, [&](const MtArgs &a, int nb) -> tg_status {
    k_adamw_mt<T><<<nb, kMtThreads, 0, s>>>(a, (float)b1, (float)b2, (float)eps);
    TGC_LAUNCHED("adamw_multi");
    return TG_OK;
  });
}

template <typename T>
static tg_status sumsq_mt(cudaStream_t s, const cuda_mt_tensor *ts, int count, double *part, double *acc) {
  tg_status st = mt_for_each(ts, count, [&](const MtArgs &a, int nb) -> tg_status {
    k_sumsq_mt<T><<<nb, kMtThreads, 0, s>>>(a, part);
    TGC_LAUNCHED("sumsq_multi");
    return TG_OK;
  });
  if (st) return st;
  int64_t np = cuda_mt_blocks(ts, count);
  if (np == 0) return TG_OK;
  k_sumsq_final<<<1, 1024, 0, s>>>(part, (int)np, acc);
  TGC_LAUNCHED("sumsq_final");
  return TG_OK;
}

template <typename T>
static tg_status clip_scale_mt(cudaStream_t s, const cuda_mt_tensor *ts, int count, const double *sumsq,
                               double max_norm) {
  return mt_for_each(ts, count, [&](const MtArgs &a, int nb) -> tg_status {
    k_clip_scale_mt<T><<<nb, kMtThreads, 0, s>>>(a, sumsq, max_norm);
    TGC_LAUNCHED("clip_scale_multi");
    return TG_OK;
  });
}

#define DISPATCH(dt, FN, ...) TGC_DISPATCH_FLOAT(dt, "optimizer", FN, __VA_ARGS__)

extern "C" tg_status cuda_adamw_multi(tgc_stream s, tg_dtype dt, const cuda_mt_tensor *ts, int count, double b1,
                                      double b2, double eps) {
  DISPATCH(dt, adamw_mt, s, ts, count, b1, b2, eps)
}
extern "C" tg_status cuda_sumsq_multi(tgc_stream s, tg_dtype dt, const cuda_mt_tensor *ts, int count, double *part,
                                      double *acc) {
  DISPATCH(dt, sumsq_mt, s, ts, count, part, acc)
}
extern "C" tg_status cuda_clip_scale_multi(tgc_stream s, tg_dtype dt, const cuda_mt_tensor *ts, int count,
                                           const double *sumsq, double max_norm) {
  DISPATCH(dt, clip_scale_mt, s, ts, count, sumsq, max_norm)
}

extern "C" tg_status cuda_zero_multi(tgc_stream s, tg_dtype dt, const cuda_mt_tensor *ts, int count) {
  DISPATCH(dt, zero_mt, s, ts, count)
}

extern "C" tg_status cuda_nonfinite_multi(tgc_stream s, tg_dtype dt, const cuda_mt_tensor *ts, int count,
                                          int32_t *flag) {
  DISPATCH(dt, nonfinite_mt, s, ts, count, flag)
}
extern "C" tg_status cuda_unscale_multi(tgc_stream s, tg_dtype dt, const cuda_mt_tensor *ts, int count,
                                        double inv_scale, int32_t *found) {
  DISPATCH(dt, unscale_mt, s, ts, count, inv_scale, found)
}

extern "C" tg_status cuda_sgd_step(tgc_stream s, tg_dtype dt, void *p, const void *grad, void *buf, int64_t n,
                                   double lr, double momentum, double dampening, double wd, int nesterov, int first) {
  DISPATCH(dt, sgd, s, p, grad, buf, n, lr, momentum, dampening, wd, nesterov, first)
}

extern "C" tg_status cuda_scale_inplace(tgc_stream s, tg_dtype dt, void *g, int64_t n, double f) {
  DISPATCH(dt, scale, s, g, n, f)
}
