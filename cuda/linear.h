/* CUDA launchers for the projection family (f32, f16, bf16 storage; f32 accumulation with
 * CUBLAS_COMPUTE_32F, so f32 products are true fp32, no TF32; as in cuBLAS's and PyTorch's defaults,
 * a split-k bf16/f16 product may add its partial sums in the storage type). Semantics match
 * host/linear.h, except that every gradient output says whether it accumulates or is overwritten. */
#ifndef TIGA_CUDA_LINEAR_H
#define TIGA_CUDA_LINEAR_H
#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif
/* What the launchers run on: the stream, a cuBLAS handle bound to it, and the cuBLASLt handle
 * (cublasLtHandle_t) with its workspace (shared with the cuBLAS handle: same stream, so the
 * two never use it at the same time). */
typedef struct tgc_blas {
  tgc_stream stream;
  tgc_cublas cublas;
  void *lt;
  void *workspace;
  size_t workspace_bytes;
} tgc_blas;

/* A gradient output. p NULL: not wanted. add nonzero: p += result; zero: p = result, and the old
 * contents of p are never read (a fresh, uninitialised buffer is fine). */
typedef struct tgc_grad {
  void *p;
  int add;
} tgc_grad;

/* y[rows, out] = x[rows, in] · w[in, out] (+ bias[out] on every row when bias is not NULL). */
tg_status cuda_linear_forward(const tgc_blas *h, tg_dtype dt, const void *x, const void *w, const void *bias, void *y,
                              int64_t rows, int64_t in, int64_t out);
/* Device scratch bytes cuda_linear_backward needs when gb is wanted (0 otherwise). */
size_t cuda_linear_scratch_bytes(int64_t rows, int64_t out);
/* gx (+)= gy · wᵀ, gw (+)= xᵀ · gy, gb[j] (+)= sum_r gy[r, j]. x is read only for gw, w only for
 * gx. scratch: cuda_linear_scratch_bytes(rows, out) bytes of device memory when gb.p is set.
 * The outputs are written in the order gx, gw, gb, so when two of them are the same buffer (a value
 * used as two arguments) the first may overwrite and the later ones must add. */
tg_status cuda_linear_backward(const tgc_blas *h, tg_dtype dt, const void *x, const void *w, const void *gy,
                               tgc_grad gx, tgc_grad gw, tgc_grad gb, void *scratch, int64_t rows, int64_t in,
                               int64_t out);
/* y[i] = a[i] · b[i], a[i] [M, K], b[i] [K, N] (b_shared: one b for every i). */
tg_status cuda_matmul_forward(const tgc_blas *h, tg_dtype dt, const void *a, const void *b, void *y, int64_t batch,
                              int64_t M, int64_t K, int64_t N, int b_shared);
/* ga[i] (+)= gy[i] · b[i]ᵀ, gb[i] (+)= a[i]ᵀ · gy[i] (b_shared: gb (+)= sum_i); written in the order
 * ga, gb (see cuda_linear_backward). */
tg_status cuda_matmul_backward(const tgc_blas *h, tg_dtype dt, const void *a, const void *b, const void *gy,
                               tgc_grad ga, tgc_grad gb, int64_t batch, int64_t M, int64_t K, int64_t N, int b_shared);
#ifdef __cplusplus
}
#endif
#endif
