/* Tall-and-skinny f32 products for the projection family (cuda/linear_tall.cu; cuda/linear.cu
 * takes them where cuda_tall_shape_ok holds and the pointers are 16-byte aligned). All pointers are
 * device memory; f32 storage and arithmetic (no TF32), bit-reproducible (fixed orders). */
#ifndef TIGA_CUDA_LINEAR_TALL_H
#define TIGA_CUDA_LINEAR_TALL_H
#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif
/* Nonzero when [R, K] x [K, N] (or its transposed forms) is in these kernels' range: R >= 8192,
 * K and N multiples of 4, K * N <= 1024; 0 also when TIGA_LINEAR_TALL=0 in the environment (the
 * bench's switch, and the tests' for the cuBLAS path). */
int cuda_tall_shape_ok(int64_t R, int64_t K, int64_t N);
/* Y[R, N] (+)= X[R, K] . W + bias, W stored [K, N] (w_trans 0) or [N, K] (w_trans 1: W^T is used);
 * bias [N] or NULL; add nonzero: Y += the product, else Y = it (Y never read). */
tg_status cuda_tall_ab(tgc_stream s, int64_t R, int64_t K, int64_t N, const float *X, const float *W, int w_trans,
                       const float *bias, float *Y, int add);
/* Bytes of workspace cuda_tall_atb needs (the blocks' partial sets). */
size_t cuda_tall_atb_workspace(int64_t R, int64_t M, int64_t N);
/* C[M, N] (+)= A[R, M]^T . B[R, N] (M, N as K, N of cuda_tall_shape_ok); ws: the workspace. */
tg_status cuda_tall_atb(tgc_stream s, int64_t R, int64_t M, int64_t N, const float *A, const float *B, float *C,
                        int add, void *ws);
/* A linear's whole backward in one pass over G = dY (k_tall_bwd), for shapes where
 * cuda_tall_backward_ok holds (cuda_tall_shape_ok, K 4 or 8, N / 4 a power of two from K to 32; 0 also when
 * TIGA_TALL_BWD=0 in the environment: the tests' switch for the separate kernels):
 *   dX[R, K] (+)= G[R, N] . W^T (W stored [K, N]),  dW[K, N] (+)= X^T . G,  db[N] (+)= column sums of G;
 * each output NULL when not wanted (X is read only for dW, W only for dX); ws:
 * cuda_tall_backward_workspace bytes. Bit-reproducible (fixed orders). */
int cuda_tall_backward_ok(int64_t R, int64_t K, int64_t N);
size_t cuda_tall_backward_workspace(int64_t R, int64_t K, int64_t N);
tg_status cuda_tall_backward(tgc_stream s, int64_t R, int64_t K, int64_t N, const float *X, const float *W,
                             const float *G, float *dX, int dx_add, float *dW, int dw_add, float *db, int db_add,
                             void *ws);
#ifdef __cplusplus
}
#endif
#endif
