// Linear and matmul on the device: cuBLAS GEMMs plus two small kernels (bias broadcast, bias
// gradient). Row-major products run as column-major ones on the transposes:
//   C = op(A)·op(B) (row-major)  <=>  Cᵀ = op(B)ᵀ·op(A)ᵀ (column-major),
// and a row-major [r, c] buffer is, read column-major, its transpose [c, r] with ld = c.
#include <climits>

#include "common.cuh"
#include "linear.h"

static bool cuda_type(tg_dtype dt, cudaDataType_t *out) {
  switch (dt) {
  case TG_F32: *out = CUDA_R_32F; return true;
  case TG_F16: *out = CUDA_R_16F; return true;
  case TG_BF16: *out = CUDA_R_16BF; return true;
  default: tgc_set_error("dtype %s has no CUDA linear kernel", tg_dtype_name(dt)); return false;
  }
}

static bool fits_int(long long v, const char *what) {
  if (v <= INT_MAX) return true;
  tgc_set_error("%s = %lld exceeds the %d that one cuBLAS call takes", what, v, INT_MAX);
  return false;
}

// Row-major C[M, N] = op(A)[M, K] · op(B)[K, N] + beta C for `batch` matrices at the given element
// strides. A is stored [M, K], or [K, M] when trans_a; B is stored [K, N], or [N, K] when trans_b.
// Accumulates in f32 whatever the storage type (CUBLAS_COMPUTE_32F).
static tg_status gemm(cublasHandle_t h, tg_dtype dt, bool trans_a, bool trans_b, long long M, long long N, long long K,
                      const void *a, long long stride_a, const void *b, long long stride_b, float beta, void *c,
                      long long stride_c, long long batch) {
  cudaDataType_t ty;
  if (!cuda_type(dt, &ty)) return TG_ERR_DTYPE;
  if (!fits_int(M, "M") || !fits_int(N, "N") || !fits_int(K, "K") || !fits_int(batch, "batch"))
    return TG_ERR_UNSUPPORTED;
  const float alpha = 1.f;
  // column-major: Cᵀ[N, M] = op'(B)[N, K] · op'(A)[K, M]
  cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  int ldb = (int)(trans_b ? K : N), lda = (int)(trans_a ? M : K), ldc = (int)N;
  if (batch == 1) {
    TGC_CUBLAS(cublasGemmEx(h, op_b, op_a, (int)N, (int)M, (int)K, &alpha, b, ty, ldb, a, ty, lda, &beta, c, ty, ldc,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  } else {
    TGC_CUBLAS(cublasGemmStridedBatchedEx(h, op_b, op_a, (int)N, (int)M, (int)K, &alpha, b, ty, ldb, stride_b, a, ty,
                                          lda, stride_a, &beta, c, ty, ldc, stride_c, (int)batch, CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT));
  }
  return TG_OK;
}

// y[r, j] = bias[j]: the GEMM then adds x·w with beta = 1, so bias and product round once.
template <typename T>
__global__ void k_bias_rows(T *__restrict__ y, const T *__restrict__ bias, long long rows, long long n) {
  long long total = rows * n;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x)
    y[i] = bias[i % n];
}

// Bias gradient, deterministic in two passes: part[c, j] = sum of gy[r, j] over the rows of chunk c,
// then gb[j] += sum_c part[c, j] in chunk order. Threads run along j, so row reads coalesce.
template <typename T>
__global__ void k_colsum_part(const T *__restrict__ gy, long long rows, long long n, long long rows_per_chunk,
                              float *__restrict__ part) {
  long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (j >= n) return;
  long long r0 = blockIdx.y * rows_per_chunk, r1 = min(rows, r0 + rows_per_chunk);
  float s = 0.f;
  for (long long r = r0; r < r1; r++)
    s += tgc_to_f(gy[r * n + j]);
  part[blockIdx.y * n + j] = s;
}

template <typename T>
__global__ void k_colsum_final(const float *__restrict__ part, long long chunks, long long n, T *__restrict__ gb) {
  long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (j >= n) return;
  float s = 0.f;
  for (long long c = 0; c < chunks; c++)
    s += part[c * n + j];
  gb[j] = tgc_from_f<T>(tgc_to_f(gb[j]) + s);
}

template <typename T>
static tg_status bias_rows(cudaStream_t s, void *y, const void *bias, long long rows, long long n) {
  k_bias_rows<T><<<tgc_blocks(rows * n, 256), 256, 0, s>>>((T *)y, (const T *)bias, rows, n);
  TGC_LAUNCHED("bias_rows");
  return TG_OK;
}

template <typename T> static tg_status colsum(cudaStream_t s, const void *gy, long long rows, long long n, void *gb) {
  long long per = (rows + 255) / 256; // at most 256 chunks of at least 32 rows
  if (per < 32) per = 32;
  long long chunks = (rows + per - 1) / per;
  float *part = nullptr;
  TGC_CUDA(cudaMallocAsync((void **)&part, (size_t)(chunks * n) * sizeof(float), s));
  dim3 grid((unsigned)((n + 255) / 256), (unsigned)chunks);
  k_colsum_part<T><<<grid, 256, 0, s>>>((const T *)gy, rows, n, per, part);
  k_colsum_final<T><<<(unsigned)((n + 255) / 256), 256, 0, s>>>(part, chunks, n, (T *)gb);
  cudaError_t e = cudaGetLastError();
  cudaFreeAsync(part, s);
  if (e != cudaSuccess) {
    tgc_set_error("bias gradient: %s", cudaGetErrorString(e));
    return tgc_status_of(e);
  }
  return TG_OK;
}

#define DISPATCH(dt, FN, ...)                                                                                          \
  switch (dt) {                                                                                                        \
  case TG_F32: return FN<float>(__VA_ARGS__);                                                                          \
  case TG_F16: return FN<__half>(__VA_ARGS__);                                                                         \
  case TG_BF16: return FN<__nv_bfloat16>(__VA_ARGS__);                                                                 \
  default: tgc_set_error("dtype %s has no CUDA linear kernel", tg_dtype_name(dt)); return TG_ERR_DTYPE;                \
  }

static tg_status bias_rows_any(cudaStream_t s, tg_dtype dt, void *y, const void *bias, long long rows, long long n) {
  DISPATCH(dt, bias_rows, s, y, bias, rows, n)
}
static tg_status colsum_any(cudaStream_t s, tg_dtype dt, const void *gy, long long rows, long long n, void *gb) {
  DISPATCH(dt, colsum, s, gy, rows, n, gb)
}

extern "C" tg_status cuda_linear_forward(tgc_stream s, tgc_cublas h, tg_dtype dt, const void *x, const void *w,
                                         const void *bias, void *y, int64_t rows, int64_t in, int64_t out) {
  if (bias) {
    tg_status st = bias_rows_any(s, dt, y, bias, rows, out);
    if (st) return st;
  }
  // y[rows, out] = x[rows, in] · w[in, out] (+ y)
  return gemm(h, dt, false, false, rows, out, in, x, 0, w, 0, bias ? 1.f : 0.f, y, 0, 1);
}

extern "C" tg_status cuda_linear_backward(tgc_stream s, tgc_cublas h, tg_dtype dt, const void *x, const void *w,
                                          const void *gy, void *gx, void *gw, void *gb, int64_t rows, int64_t in,
                                          int64_t out) {
  tg_status st = TG_OK;
  // gx[rows, in] += gy[rows, out] · wᵀ   (w stored [in, out] = [N, K]: transposed)
  if (gx) st = gemm(h, dt, false, true, rows, in, out, gy, 0, w, 0, 1.f, gx, 0, 1);
  // gw[in, out] += xᵀ · gy               (x stored [rows, in] = [K, M]: transposed)
  if (!st && gw) st = gemm(h, dt, true, false, in, out, rows, x, 0, gy, 0, 1.f, gw, 0, 1);
  if (!st && gb) st = colsum_any(s, dt, gy, rows, out, gb);
  return st;
}

extern "C" tg_status cuda_matmul_forward(tgc_stream s, tgc_cublas h, tg_dtype dt, const void *a, const void *b, void *y,
                                         int64_t batch, int64_t M, int64_t K, int64_t N, int b_shared) {
  if (b_shared) return cuda_linear_forward(s, h, dt, a, b, nullptr, y, batch * M, K, N); // one product, all rows
  return gemm(h, dt, false, false, M, N, K, a, M * K, b, K * N, 0.f, y, M * N, batch);
}

extern "C" tg_status cuda_matmul_backward(tgc_stream s, tgc_cublas h, tg_dtype dt, const void *a, const void *b,
                                          const void *gy, void *ga, void *gb, int64_t batch, int64_t M, int64_t K,
                                          int64_t N, int b_shared) {
  if (b_shared) return cuda_linear_backward(s, h, dt, a, b, gy, ga, gb, nullptr, batch * M, K, N);
  tg_status st = TG_OK;
  // ga[i][M, K] += gy[i][M, N] · b[i]ᵀ   (b[i] stored [K, N] = [N', K']: transposed)
  if (ga) st = gemm(h, dt, false, true, M, K, N, gy, M * N, b, K * N, 1.f, ga, M * K, batch);
  // gb[i][K, N] += a[i]ᵀ · gy[i]          (a[i] stored [M, K] = [K', M']: transposed)
  if (!st && gb) st = gemm(h, dt, true, false, K, N, M, a, M * K, gy, M * N, 1.f, gb, K * N, batch);
  return st;
}
