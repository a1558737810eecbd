// CUDA_COMPOSED attention: strided-batched GEMMs (cuBLAS, f32 compute) and a masked softmax.
// Math and layouts in attention_composed.h.
#include <cmath>

#include "attention_composed.h"
#include "common.cuh"
#include "../host/philox.h"

namespace {

// Which keys query i of batch entry b may see: [lo, hi) and, for masks, a per-key byte row.
struct RowRel {
  long long lo, hi;
  const uint8_t *m;
  __device__ bool ok(long long j) const { return j >= lo && j < hi && (!m || m[j]); }
};

__device__ RowRel row_rel(const tgc_comp_shape &sh, long long b, long long i) {
  RowRel r{0, (long long)sh.Nk, nullptr};
  switch (sh.kind) {
  case TGC_ATTN_DENSE: break;
  case TGC_ATTN_CAUSAL: r.hi = min((long long)sh.Nk, i + sh.Nk - sh.Nq + 1); break; // j <= i + Nk - Nq
  case TGC_ATTN_MASK: r.m = sh.mask + ((sh.mask_batch > 1 ? b : 0) * sh.Nq + i) * sh.Nk; break;
  case TGC_ATTN_VARLEN: {
    int lo = 0, hi = sh.n_seqs - 1; // sequence s with cu_q[s] <= i < cu_q[s + 1]
    while (lo < hi) {
      int mid = (lo + hi + 1) / 2;
      if (sh.cu_q[mid] <= i)
        lo = mid;
      else
        hi = mid - 1;
    }
    long long q0 = sh.cu_q[lo], lq = sh.cu_q[lo + 1] - q0, k0 = sh.cu_k[lo], lk = sh.cu_k[lo + 1] - k0;
    r.lo = k0;
    r.hi = k0 + (sh.varlen_causal ? min(lk, (i - q0) + lk - lq + 1) : lk);
    break;
  }
  }
  return r;
}

constexpr int kThreads = 256;

__host__ __device__ bool drops(const tgc_comp_shape &sh) { return sh.keep > 0 && sh.keep < 1; }

// Dropout weight M_e / keep of score element e = R * Nk + j (attention_composed.h, host/philox.h);
// 1 without dropout.
__device__ float drop_w(const tgc_comp_shape &sh, long long e) {
  if (!drops(sh)) return 1.f;
  const uint64_t R = (uint64_t)e / (uint64_t)sh.Nk, j = (uint64_t)e % (uint64_t)sh.Nk;
  uint32_t w[4];
  tg_philox4x32(sh.seed, tg_attn_drop_block(R, j, (uint64_t)sh.Nk), sh.call | (1ull << 63), w);
  return w[tg_attn_drop_word(R, j)] < tg_keep_threshold(sh.keep) ? (float)(1.0 / sh.keep) : 0.f;
}

// Block-wide reduction (max or sum) of one float per thread; every thread gets the result.
template <bool kMax> __device__ float block_reduce(float x, float *sh) {
  for (int o = 16; o > 0; o >>= 1) {
    float y = __shfl_xor_sync(0xffffffffu, x, o);
    x = kMax ? fmaxf(x, y) : x + y;
  }
  int w = threadIdx.x / 32, l = threadIdx.x % 32;
  __syncthreads(); // sh may still be read by the previous reduction
  if (l == 0) sh[w] = x;
  __syncthreads();
  x = sh[0];
  for (int i = 1; i < kThreads / 32; i++)
    x = kMax ? fmaxf(x, sh[i]) : x + sh[i];
  return x;
}

// One block per row r = (b*Hq + h)*Nq + i: S row in, P row out (in place); blocked pairs and empty
// rows give 0, and lse = -inf for an empty row.
template <typename T>
__global__ void k_softmax_fwd(tgc_comp_shape sh, float *__restrict__ S, T *__restrict__ lo, float *__restrict__ lse) {
  __shared__ float red[kThreads / 32];
  long long r = blockIdx.x, b = r / ((long long)sh.Hq * sh.Nq), i = r % sh.Nq;
  RowRel rr = row_rel(sh, b, i);
  float *s = S + r * sh.Nk;
  float m = -INFINITY;
  for (long long j = threadIdx.x; j < sh.Nk; j += kThreads)
    if (rr.ok(j)) m = fmaxf(m, s[j]);
  m = block_reduce<true>(m, red);
  float l = 0.f;
  if (m != -INFINITY)
    for (long long j = threadIdx.x; j < sh.Nk; j += kThreads)
      if (rr.ok(j)) l += expf(s[j] - m);
  l = block_reduce<false>(l, red);
  float L = m == -INFINITY ? -INFINITY : m + logf(l);
  for (long long j = threadIdx.x; j < sh.Nk; j += kThreads) {
    float p = (L != -INFINITY && rr.ok(j)) ? expf(s[j] - L) : 0.f;
    s[j] = p;
    if (lo) lo[r * sh.Nk + j] = tgc_from_f<T>(p * drop_w(sh, r * sh.Nk + j)); // what O = P V multiplies
  }
  if (lse && threadIdx.x == 0) lse[r] = L;
}

// One block per row: Di = <dO_i, O_i>, then dS = P (dP - Di) in place over dP (and a storage copy).
template <typename T>
__global__ void k_softmax_bwd(tgc_comp_shape sh, const T *__restrict__ O, const T *__restrict__ dO,
                              const float *__restrict__ P, float *__restrict__ dS, T *__restrict__ lo) {
  __shared__ float red[kThreads / 32];
  long long r = blockIdx.x, bh = r / sh.Nq, i = r % sh.Nq, b = bh / sh.Hq, h = bh % sh.Hq;
  long long o = ((b * sh.Nq + i) * sh.Hq + h) * sh.Dv;
  float d = 0.f;
  for (int c = threadIdx.x; c < sh.Dv; c += kThreads)
    d += tgc_to_f(dO[o + c]) * tgc_to_f(O[o + c]);
  d = block_reduce<false>(d, red);
  const float *p = P + r * sh.Nk;
  float *g = dS + r * sh.Nk;
  for (long long j = threadIdx.x; j < sh.Nk; j += kThreads) {
    float v = p[j] * (g[j] * drop_w(sh, r * sh.Nk + j) - d); // dP = (dO Vᵀ) ⊙ W
    g[j] = v;
    if (lo) lo[r * sh.Nk + j] = tgc_from_f<T>(v);
  }
}

// y = x ⊙ W (the dropout weights; 1 without dropout), converted to the storage type.
template <typename T>
__global__ void k_to_lo(tgc_comp_shape sh, const float *__restrict__ x, T *__restrict__ y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = tgc_from_f<T>(x[i] * drop_w(sh, i));
}

template <typename T> __global__ void k_add(T *__restrict__ y, const T *__restrict__ x, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = tgc_from_f<T>(tgc_to_f(y[i]) + tgc_to_f(x[i]));
}

template <typename T> tg_status add(cudaStream_t s, void *y, const void *x, long long n) {
  k_add<T><<<tgc_blocks(n, 256), 256, 0, s>>>((T *)y, (const T *)x, n);
  TGC_LAUNCHED("attention add");
  return TG_OK;
}

template <typename T> struct DT;
template <> struct DT<float> { static constexpr cudaDataType_t v = CUDA_R_32F; };
template <> struct DT<__half> { static constexpr cudaDataType_t v = CUDA_R_16F; };
template <> struct DT<__nv_bfloat16> { static constexpr cudaDataType_t v = CUDA_R_16BF; };

// A strided-batched operand: base pointer, type, leading dimension, stride between batch entries.
struct Mat {
  const void *p;
  cudaDataType_t t;
  long long ld, stride;
};

// Row-major C[M,N] = alpha op(A)[M,K] op(B)[K,N] + beta C, batched. cuBLAS is column-major, where
// a row-major X is Xᵀ: so compute Cᵀ = op(B)ᵀ op(A)ᵀ with the operands swapped.
tg_status rm_gemm(cublasHandle_t hd, bool ta, bool tb, long long M, long long N, long long K, float alpha, Mat A, Mat B,
                  float beta, void *C, cudaDataType_t ct, long long ldc, long long sc, long long batch) {
  TGC_CUBLAS(cublasGemmStridedBatchedEx(hd, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N,
                                        (int)M, (int)K, &alpha, B.p, B.t, (int)B.ld, B.stride, A.p, A.t, (int)A.ld,
                                        A.stride, &beta, C, ct, (int)ldc, sc, (int)batch, CUBLAS_COMPUTE_32F,
                                        CUBLAS_GEMM_DEFAULT));
  return TG_OK;
}

#define TRY(x)                                                                                                         \
  do {                                                                                                                 \
    tg_status st_ = (x);                                                                                               \
    if (st_) return st_;                                                                                               \
  } while (0)

// Per-head operands (pointer offset by head, leading dim H*W, batch stride N*H*W).
struct Layout {
  const tgc_comp_shape &sh;
  size_t es; // element size
  cudaDataType_t t;
  Mat q(const void *p, int h) const {
    return {(const char *)p + es * h * sh.D, t, (long long)sh.Hq * sh.D, sh.Nq * sh.Hq * sh.D};
  }
  Mat k(const void *p, int g) const {
    return {(const char *)p + es * g * sh.D, t, (long long)sh.Hkv * sh.D, sh.Nk * sh.Hkv * sh.D};
  }
  Mat v(const void *p, int g) const {
    return {(const char *)p + es * g * sh.Dv, t, (long long)sh.Hkv * sh.Dv, sh.Nk * sh.Hkv * sh.Dv};
  }
  Mat o(const void *p, int h) const {
    return {(const char *)p + es * h * sh.Dv, t, (long long)sh.Hq * sh.Dv, sh.Nq * sh.Hq * sh.Dv};
  }
  // [B, Hq, Nq, Nk] score-shaped buffer of element size e and type tt
  Mat s(const void *p, int h, size_t e, cudaDataType_t tt) const {
    return {(const char *)p + e * h * sh.Nq * sh.Nk, tt, sh.Nk, (long long)sh.Hq * sh.Nq * sh.Nk};
  }
};

template <typename T>
tg_status fwd(cudaStream_t s, cublasHandle_t hd, const tgc_comp_shape &sh, const void *q, const void *k, const void *v,
              void *out, float *lse, float *P, void *lo) {
  Layout L{sh, sizeof(T), DT<T>::v};
  int group = sh.Hq / sh.Hkv;
  for (int h = 0; h < sh.Hq; h++) { // S = scale Q Kᵀ
    Mat S = L.s(P, h, 4, CUDA_R_32F);
    TRY(rm_gemm(hd, false, true, sh.Nq, sh.Nk, sh.D, sh.scale, L.q(q, h), L.k(k, h / group), 0.f, (void *)S.p,
                CUDA_R_32F, S.ld, S.stride, sh.B));
  }
  long long rows = sh.B * sh.Hq * sh.Nq;
  T *plo = sizeof(T) == 4 && !drops(sh) ? nullptr : (T *)lo;
  k_softmax_fwd<T><<<(unsigned)rows, kThreads, 0, s>>>(sh, P, plo, lse);
  TGC_LAUNCHED("attention_composed softmax");
  for (int h = 0; h < sh.Hq; h++) { // O = P V
    Mat Pm = plo ? L.s(plo, h, sizeof(T), DT<T>::v) : L.s(P, h, 4, CUDA_R_32F);
    Mat O = L.o(out, h);
    TRY(rm_gemm(hd, false, false, sh.Nq, sh.Dv, sh.Nk, 1.f, Pm, L.v(v, h / group), 0.f, (void *)O.p, O.t, O.ld,
                O.stride, sh.B));
  }
  return TG_OK;
}

template <typename T>
tg_status bwd(cudaStream_t s, cublasHandle_t hd, const tgc_comp_shape &sh, const void *q, const void *k, const void *v,
              const void *out, const void *dout, const float *P, float *dS, void *lo, void *dq, void *dk, void *dv) {
  Layout L{sh, sizeof(T), DT<T>::v};
  int group = sh.Hq / sh.Hkv;
  long long n = sh.B * sh.Hq * sh.Nq * sh.Nk, rows = sh.B * sh.Hq * sh.Nq;
  T *plo = sizeof(T) == 4 && !drops(sh) ? nullptr : (T *)lo;
  if (dv) { // dV += Pᵀ dO (the query heads of a group accumulate one after the other)
    if (plo) {
      k_to_lo<T><<<tgc_blocks(n, 256), 256, 0, s>>>(sh, P, plo, n);
      TGC_LAUNCHED("attention_composed convert P");
    }
    for (int h = 0; h < sh.Hq; h++) {
      Mat Pm = plo ? L.s(plo, h, sizeof(T), DT<T>::v) : L.s(P, h, 4, CUDA_R_32F);
      Mat V = L.v(dv, h / group);
      TRY(rm_gemm(hd, true, false, sh.Nk, sh.Dv, sh.Nq, 1.f, Pm, L.o(dout, h), 1.f, (void *)V.p, V.t, V.ld, V.stride,
                  sh.B));
    }
  }
  if (!dq && !dk) return TG_OK;
  for (int h = 0; h < sh.Hq; h++) { // dP = dO Vᵀ
    Mat G = L.s(dS, h, 4, CUDA_R_32F);
    TRY(rm_gemm(hd, false, true, sh.Nq, sh.Nk, sh.Dv, 1.f, L.o(dout, h), L.v(v, h / group), 0.f, (void *)G.p,
                CUDA_R_32F, G.ld, G.stride, sh.B));
  }
  k_softmax_bwd<T><<<(unsigned)rows, kThreads, 0, s>>>(sh, (const T *)out, (const T *)dout, P, dS, plo);
  TGC_LAUNCHED("attention_composed softmax backward");
  for (int h = 0; h < sh.Hq; h++) {
    Mat G = plo ? L.s(plo, h, sizeof(T), DT<T>::v) : L.s(dS, h, 4, CUDA_R_32F);
    if (dq) { // dQ += scale dS K
      Mat Q = L.q(dq, h);
      TRY(rm_gemm(hd, false, false, sh.Nq, sh.D, sh.Nk, sh.scale, G, L.k(k, h / group), 1.f, (void *)Q.p, Q.t, Q.ld,
                  Q.stride, sh.B));
    }
    if (dk) { // dK += scale dSᵀ Q
      Mat K = L.k(dk, h / group);
      TRY(rm_gemm(hd, true, false, sh.Nk, sh.D, sh.Nq, sh.scale, G, L.q(q, h), 1.f, (void *)K.p, K.t, K.ld, K.stride,
                  sh.B));
    }
  }
  return TG_OK;
}

tg_status check(const tgc_comp_shape *sh) {
  long long rows = sh->B * sh->Hq * sh->Nq;
  if (sh->Nq > INT32_MAX || sh->Nk > INT32_MAX || sh->B > INT32_MAX || rows > INT32_MAX ||
      (long long)sh->Hq * sh->D > INT32_MAX || (long long)sh->Hq * sh->Dv > INT32_MAX) {
    tgc_set_error("attention_composed: sizes B=%lld Nq=%lld Nk=%lld Hq=%d exceed the int range of cuBLAS / the grid",
                  (long long)sh->B, (long long)sh->Nq, (long long)sh->Nk, sh->Hq);
    return TG_ERR_UNSUPPORTED;
  }
  return TG_OK;
}

} // namespace

extern "C" size_t cuda_attention_composed_lo_bytes(const tgc_comp_shape *sh) {
  if (sh->dtype == TG_F32 && !drops(*sh)) return 0;
  return (size_t)(sh->B * sh->Hq * sh->Nq * sh->Nk) * (sh->dtype == TG_F32 ? 4 : 2);
}

#define DISPATCH(FN, ...) DISPATCH_DT(sh->dtype, FN, __VA_ARGS__)
#define DISPATCH_DT(dt, FN, ...)                                                                                       \
  switch (dt) {                                                                                                        \
  case TG_F32: return FN<float>(__VA_ARGS__);                                                                          \
  case TG_F16: return FN<__half>(__VA_ARGS__);                                                                         \
  case TG_BF16: return FN<__nv_bfloat16>(__VA_ARGS__);                                                                 \
  default: tgc_set_error("attention_composed: dtype %s not supported", tg_dtype_name(dt)); return TG_ERR_DTYPE;        \
  }

extern "C" tg_status cuda_attention_composed_forward(tgc_stream s, tgc_cublas h, const tgc_comp_shape *sh,
                                                     const void *q, const void *k, const void *v, void *out, float *lse,
                                                     float *P, void *lo) {
  TRY(check(sh));
  DISPATCH(fwd, s, h, *sh, q, k, v, out, lse, P, lo)
}

extern "C" tg_status cuda_attention_composed_backward(tgc_stream s, tgc_cublas h, const tgc_comp_shape *sh,
                                                      const void *q, const void *k, const void *v, const void *out,
                                                      const void *dout, const float *P, float *dS, void *lo, void *dq,
                                                      void *dk, void *dv) {
  TRY(check(sh));
  DISPATCH(bwd, s, h, *sh, q, k, v, out, dout, P, dS, lo, dq, dk, dv)
}

extern "C" tg_status cuda_attention_add(tgc_stream s, tg_dtype dt, void *dst, const void *src, int64_t n) {
  DISPATCH_DT(dt, add, s, dst, src, n)
}
