// Optimizer steps and gradient-norm clipping on the device (math in host/optim.h).
#include "common.cuh"
#include "optim.h"

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

template <typename T>
__global__ void k_adamw(T *__restrict__ p, const T *__restrict__ g, T *__restrict__ m, T *__restrict__ v, long long n,
                        float b1, float b2, float eps, float decay, float step, float sbc2) {
  GRID_STRIDE(i, n) {
    float gi = tgc_to_f(g[i]);
    float mi = b1 * tgc_to_f(m[i]) + (1.f - b1) * gi;
    float vi = b2 * tgc_to_f(v[i]) + (1.f - b2) * gi * gi;
    m[i] = tgc_from_f<T>(mi);
    v[i] = tgc_from_f<T>(vi);
    p[i] = tgc_from_f<T>(tgc_to_f(p[i]) * decay - step * mi / (sqrtf(vi) / sbc2 + eps));
  }
}

// Block b writes the double sum of squares of its grid-stride elements to part[b].
template <typename T> __global__ void k_sumsq_partial(const T *__restrict__ g, long long n, double *__restrict__ part) {
  double s = 0;
  GRID_STRIDE(i, n) {
    double x = (double)tgc_to_f(g[i]);
    s += x * x;
  }
  s = tgc_block_sum(s);
  if (threadIdx.x == 0) part[blockIdx.x] = s;
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
__global__ void k_clip_scale(T *__restrict__ g, long long n, const double *__restrict__ sumsq, double max_norm) {
  double norm = sqrt(*sumsq), coef = max_norm / (norm + 1e-6);
  if (!isfinite(norm) || !(coef < 1.0)) return;
  float c = (float)coef;
  GRID_STRIDE(i, n) g[i] = tgc_from_f<T>(tgc_to_f(g[i]) * c);
}

template <typename T>
static tg_status clip_scale(cudaStream_t s, void *g, long long n, const double *sumsq, double max_norm) {
  k_clip_scale<T><<<tgc_blocks(n, 256), 256, 0, s>>>((T *)g, n, sumsq, max_norm);
  TGC_LAUNCHED("clip_scale");
  return TG_OK;
}

template <typename T>
static tg_status sgd(cudaStream_t s, void *p, const void *g, void *buf, long long n, double lr, double mom, double damp,
                     double wd, int nesterov, int first) {
  k_sgd<T><<<tgc_blocks(n, 256), 256, 0, s>>>((T *)p, (const T *)g, (T *)buf, n, (float)lr, (float)mom, (float)damp,
                                              (float)wd, nesterov, first);
  TGC_LAUNCHED("sgd_step");
  return TG_OK;
}

template <typename T>
static tg_status adamw(cudaStream_t s, void *p, const void *g, void *m, void *v, long long n, double lr, double b1,
                       double b2, double eps, double wd, double bc1, double bc2) {
  // scalars folded in double on the host, as PyTorch does with its python floats
  k_adamw<T><<<tgc_blocks(n, 256), 256, 0, s>>>((T *)p, (const T *)g, (T *)m, (T *)v, n, (float)b1, (float)b2,
                                                (float)eps, (float)(1 - lr * wd), (float)(lr / bc1), (float)sqrt(bc2));
  TGC_LAUNCHED("adamw_step");
  return TG_OK;
}

template <typename T> static tg_status sumsq(cudaStream_t s, const void *g, long long n, double *part, double *acc) {
  int blocks = (int)tgc_blocks(n, 256, CUDA_SUMSQ_SCRATCH);
  k_sumsq_partial<T><<<blocks, 256, 0, s>>>((const T *)g, n, part);
  TGC_LAUNCHED("sumsq_partial");
  k_sumsq_final<<<1, 1024, 0, s>>>(part, blocks, acc);
  TGC_LAUNCHED("sumsq_final");
  return TG_OK;
}

template <typename T> static tg_status scale(cudaStream_t s, void *g, long long n, double f) {
  k_scale<T><<<tgc_blocks(n, 256), 256, 0, s>>>((T *)g, n, (float)f);
  TGC_LAUNCHED("scale_inplace");
  return TG_OK;
}

#define DISPATCH(dt, FN, ...) TGC_DISPATCH_FLOAT(dt, "optimizer", FN, __VA_ARGS__)

extern "C" tg_status cuda_sgd_step(tgc_stream s, tg_dtype dt, void *p, const void *grad, void *buf, int64_t n,
                                   double lr, double momentum, double dampening, double wd, int nesterov, int first) {
  DISPATCH(dt, sgd, s, p, grad, buf, n, lr, momentum, dampening, wd, nesterov, first)
}

extern "C" tg_status cuda_adamw_step(tgc_stream s, tg_dtype dt, void *p, const void *grad, void *m, void *v, int64_t n,
                                     double lr, double b1, double b2, double eps, double wd, double bc1, double bc2) {
  DISPATCH(dt, adamw, s, p, grad, m, v, n, lr, b1, b2, eps, wd, bc1, bc2)
}

extern "C" tg_status cuda_sumsq(tgc_stream s, tg_dtype dt, const void *g, int64_t n, double *scratch, double *acc) {
  DISPATCH(dt, sumsq, s, g, n, scratch, acc)
}

extern "C" tg_status cuda_clip_scale(tgc_stream s, tg_dtype dt, void *g, int64_t n, const double *sumsq,
                                     double max_norm) {
  DISPATCH(dt, clip_scale, s, g, n, sumsq, max_norm)
}

extern "C" tg_status cuda_scale_inplace(tgc_stream s, tg_dtype dt, void *g, int64_t n, double f) {
  DISPATCH(dt, scale, s, g, n, f)
}
