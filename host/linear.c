/* Host kernels for linear and matmul.
 *
 * One GEMM, C += A·B, serves every product of the family: the forward and the three backward
 * products differ only in which operand is read transposed, which the (row, column) strides of
 * A and B express. Layout of the work (the classic blocked i-k-j scheme):
 *   - K is cut into blocks of KB and N into panels of NB columns; each KB x NB block of B is
 *     copied (packed) into a contiguous, zero-padded buffer, whatever B's strides are, so the
 *     inner loop always reads unit-stride rows of B and the block stays in cache;
 *   - C is computed in MR x NR tiles held in registers (GCC/Clang vector extensions, 16-byte
 *     vectors: SSE2 / NEON, no ISA flags needed) over the KB rows of the block:
 *       tile[r, :] += A[i+r, k] * Bpanel[k, :]   for k in the block,
 *     then added to C. Edge tiles compute a full tile and store only the valid part.
 * Products accumulate in the value's dtype (f32 in f32, f64 in f64); bias sums use double. */
#include "linear.h"
#include "../tape/alloc.h"

#include <stdlib.h>
#include <string.h>

#define KB 128 /* rows of B per packed block */
#define NB 256 /* columns of B per packed panel (a multiple of every NR) */
#define MR 4   /* rows of a register tile (tile_* is written out for 4) */

typedef float v4f __attribute__((vector_size(16)));
typedef double v2d __attribute__((vector_size(16)));

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* T: element type, S: suffix, V: vector type of VL lanes; tiles are MR x (2 VL). */
#define DEFINE_GEMM(T, S, V, VL)                                                                                       \
  enum { NR_##S = 2 * (VL) };                                                                                          \
                                                                                                                       \
  /* P[k, j] = B[k0 + k, j0 + j] for k < kb, j < nb; zero for nb <= j < ldp. */                                        \
  static void pack_##S(const T *b, int64_t b_rs, int64_t b_cs, int64_t k0, int64_t kb, int64_t j0, int64_t nb, T *P,   \
                       int64_t ldp) {                                                                                  \
    const T *base = b + k0 * b_rs + j0 * b_cs;                                                                         \
    if (b_cs == 1) {                                                                                                   \
      for (int64_t k = 0; k < kb; k++)                                                                                 \
        memcpy(P + k * ldp, base + k * b_rs, (size_t)nb * sizeof(T));                                                  \
    } else { /* transposed: walk B along its contiguous direction */                                                   \
      for (int64_t j = 0; j < nb; j++)                                                                                 \
        for (int64_t k = 0; k < kb; k++)                                                                               \
          P[k * ldp + j] = base[k * b_rs + j * b_cs];                                                                  \
    }                                                                                                                  \
    if (nb < ldp)                                                                                                      \
      for (int64_t k = 0; k < kb; k++)                                                                                 \
        memset(P + k * ldp + nb, 0, (size_t)(ldp - nb) * sizeof(T));                                                   \
  }                                                                                                                    \
                                                                                                                       \
  /* C[0..mr, 0..nr] += sum_k A[r, k] * P[k, 0..NR]; rows r >= mr of `a` repeat a valid row. */                        \
  static inline void tile_##S(int64_t kb, const T *const a[MR], int64_t a_cs, const T *P, int64_t ldp, T *c,           \
                              int64_t ldc, int mr, int nr) {                                                           \
    /* written out for MR = 4 so that -O2 keeps the eight accumulators in registers */                                 \
    V acc[MR][2], c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};              \
    const T *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];                                                            \
    for (int64_t k = 0; k < kb; k++) {                                                                                 \
      V b0, b1;                                                                                                        \
      memcpy(&b0, P + k * ldp, sizeof b0);                                                                             \
      memcpy(&b1, P + k * ldp + (VL), sizeof b1);                                                                      \
      T x0 = a0[k * a_cs], x1 = a1[k * a_cs], x2 = a2[k * a_cs], x3 = a3[k * a_cs];                                    \
      c00 += x0 * b0;                                                                                                  \
      c01 += x0 * b1;                                                                                                  \
      c10 += x1 * b0;                                                                                                  \
      c11 += x1 * b1;                                                                                                  \
      c20 += x2 * b0;                                                                                                  \
      c21 += x2 * b1;                                                                                                  \
      c30 += x3 * b0;                                                                                                  \
      c31 += x3 * b1;                                                                                                  \
    }                                                                                                                  \
    acc[0][0] = c00, acc[0][1] = c01, acc[1][0] = c10, acc[1][1] = c11;                                                \
    acc[2][0] = c20, acc[2][1] = c21, acc[3][0] = c30, acc[3][1] = c31;                                                \
    if (nr == NR_##S) {                                                                                                \
      for (int r = 0; r < mr; r++) {                                                                                   \
        V c0, c1;                                                                                                      \
        memcpy(&c0, c + r * ldc, sizeof c0);                                                                           \
        memcpy(&c1, c + r * ldc + (VL), sizeof c1);                                                                    \
        c0 += acc[r][0];                                                                                               \
        c1 += acc[r][1];                                                                                               \
        memcpy(c + r * ldc, &c0, sizeof c0);                                                                           \
        memcpy(c + r * ldc + (VL), &c1, sizeof c1);                                                                    \
      }                                                                                                                \
    } else {                                                                                                           \
      T tmp[MR][NR_##S];                                                                                               \
      memcpy(tmp, acc, sizeof tmp);                                                                                    \
      for (int r = 0; r < mr; r++)                                                                                     \
        for (int j = 0; j < nr; j++)                                                                                   \
          c[r * ldc + j] += tmp[r][j];                                                                                 \
    }                                                                                                                  \
  }                                                                                                                    \
                                                                                                                       \
  static void gemm_##S(int64_t M, int64_t N, int64_t K, const T *a, int64_t a_rs, int64_t a_cs, const T *b,            \
                       int64_t b_rs, int64_t b_cs, T *c, int64_t ldc, T *P) {                                          \
    for (int64_t k0 = 0; k0 < K; k0 += KB) {                                                                           \
      int64_t kb = min64(KB, K - k0);                                                                                  \
      for (int64_t j0 = 0; j0 < N; j0 += NB) {                                                                         \
        int64_t nb = min64(NB, N - j0), ldp = (nb + NR_##S - 1) / NR_##S * NR_##S;                                     \
        pack_##S(b, b_rs, b_cs, k0, kb, j0, nb, P, ldp);                                                               \
        for (int64_t i0 = 0; i0 < M; i0 += MR) {                                                                       \
          int mr = (int)min64(MR, M - i0);                                                                             \
          const T *ar[MR];                                                                                             \
          for (int r = 0; r < MR; r++)                                                                                 \
            ar[r] = a + (i0 + (r < mr ? r : mr - 1)) * a_rs + k0 * a_cs;                                               \
          for (int64_t jj = 0; jj < nb; jj += NR_##S)                                                                  \
            tile_##S(kb, ar, a_cs, P + jj, ldp, c + i0 * ldc + j0 + jj, ldc, mr, (int)min64(NR_##S, nb - jj));         \
        }                                                                                                              \
      }                                                                                                                \
    }                                                                                                                  \
  }                                                                                                                    \
                                                                                                                       \
  /* gb[j] += sum_r gy[r, j], summed in double. */                                                                     \
  static void colsum_##S(const T *gy, int64_t rows, int64_t n, T *gb, double *acc) {                                   \
    memset(acc, 0, (size_t)n * sizeof *acc);                                                                           \
    for (int64_t r = 0; r < rows; r++)                                                                                 \
      for (int64_t j = 0; j < n; j++)                                                                                  \
        acc[j] += gy[r * n + j];                                                                                       \
    for (int64_t j = 0; j < n; j++)                                                                                    \
      gb[j] += (T)acc[j];                                                                                              \
  }                                                                                                                    \
                                                                                                                       \
  /* y[r, :] = bias (or 0) for every row. */                                                                           \
  static void fill_rows_##S(T *y, const T *bias, int64_t rows, int64_t n) {                                            \
    if (!bias) {                                                                                                       \
      memset(y, 0, (size_t)(rows * n) * sizeof(T));                                                                    \
      return;                                                                                                          \
    }                                                                                                                  \
    for (int64_t r = 0; r < rows; r++)                                                                                 \
      memcpy(y + r * n, bias, (size_t)n * sizeof(T));                                                                  \
  }

DEFINE_GEMM(float, f32, v4f, 4)
DEFINE_GEMM(double, f64, v2d, 2)

/* Packing buffer for one KB x NB block (64-byte aligned; NB is a multiple of every NR). */
static void *pack_alloc(tg_dtype dt) { return tgi_aligned_alloc(64, (size_t)KB * NB * tg_dtype_size(dt)); }

static void gemm_any(tg_dtype dt, int64_t M, int64_t N, int64_t K, const void *a, int64_t a_rs, int64_t a_cs,
                     const void *b, int64_t b_rs, int64_t b_cs, void *c, int64_t ldc, void *P) {
  if (dt == TG_F32)
    gemm_f32(M, N, K, a, a_rs, a_cs, b, b_rs, b_cs, c, ldc, P);
  else
    gemm_f64(M, N, K, a, a_rs, a_cs, b, b_rs, b_cs, c, ldc, P);
}

tg_status host_gemm(tg_dtype dt, int64_t M, int64_t N, int64_t K, const void *a, int64_t a_rs, int64_t a_cs,
                    const void *b, int64_t b_rs, int64_t b_cs, void *c, int64_t ldc) {
  void *P = pack_alloc(dt);
  if (!P) return TG_ERR_OUT_OF_MEMORY;
  gemm_any(dt, M, N, K, a, a_rs, a_cs, b, b_rs, b_cs, c, ldc, P);
  free(P);
  return TG_OK;
}

tg_status host_linear_forward(tg_dtype dt, const void *x, const void *w, const void *bias, void *y, int64_t rows,
                              int64_t in, int64_t out) {
  void *P = pack_alloc(dt);
  if (!P) return TG_ERR_OUT_OF_MEMORY;
  if (dt == TG_F32)
    fill_rows_f32(y, bias, rows, out);
  else
    fill_rows_f64(y, bias, rows, out);
  gemm_any(dt, rows, out, in, x, in, 1, w, out, 1, y, out, P); /* y += x · w */
  free(P);
  return TG_OK;
}

tg_status host_linear_backward(tg_dtype dt, const void *x, const void *w, const void *gy, void *gx, void *gw, void *gb,
                               int64_t rows, int64_t in, int64_t out) {
  void *P = pack_alloc(dt);
  double *acc = gb ? tgi_malloc((size_t)out * sizeof *acc) : NULL;
  if (!P || (gb && !acc)) {
    free(P);
    free(acc);
    return TG_ERR_OUT_OF_MEMORY;
  }
  /* gx[rows, in] += gy[rows, out] · wᵀ: B[k=o, j=i] = w[i*out + o] */
  if (gx) gemm_any(dt, rows, in, out, gy, out, 1, w, 1, out, gx, in, P);
  /* gw[in, out] += xᵀ · gy: A[i, k=r] = x[r*in + i] */
  if (gw) gemm_any(dt, in, out, rows, x, 1, in, gy, out, 1, gw, out, P);
  if (gb) {
    if (dt == TG_F32)
      colsum_f32(gy, rows, out, gb, acc);
    else
      colsum_f64(gy, rows, out, gb, acc);
  }
  free(acc);
  free(P);
  return TG_OK;
}

tg_status host_matmul_forward(tg_dtype dt, const void *a, const void *b, void *y, int64_t batch, int64_t M, int64_t K,
                              int64_t N, int b_shared) {
  if (b_shared) return host_linear_forward(dt, a, b, NULL, y, batch * M, K, N); /* one product over all rows */
  void *P = pack_alloc(dt);
  if (!P) return TG_ERR_OUT_OF_MEMORY;
  size_t es = tg_dtype_size(dt);
  memset(y, 0, (size_t)(batch * M * N) * es);
  for (int64_t i = 0; i < batch; i++)
    gemm_any(dt, M, N, K, (const char *)a + (size_t)(i * M * K) * es, K, 1, (const char *)b + (size_t)(i * K * N) * es,
             N, 1, (char *)y + (size_t)(i * M * N) * es, N, P);
  free(P);
  return TG_OK;
}

tg_status host_matmul_backward(tg_dtype dt, const void *a, const void *b, const void *gy, void *ga, void *gb,
                               int64_t batch, int64_t M, int64_t K, int64_t N, int b_shared) {
  if (b_shared) return host_linear_backward(dt, a, b, gy, ga, gb, NULL, batch * M, K, N);
  void *P = pack_alloc(dt);
  if (!P) return TG_ERR_OUT_OF_MEMORY;
  size_t es = tg_dtype_size(dt);
  for (int64_t i = 0; i < batch; i++) {
    const char *ai = (const char *)a + (size_t)(i * M * K) * es, *bi = (const char *)b + (size_t)(i * K * N) * es;
    const char *gyi = (const char *)gy + (size_t)(i * M * N) * es;
    /* ga[M, K] += gy · bᵀ;  gb[K, N] += aᵀ · gy */
    if (ga) gemm_any(dt, M, K, N, gyi, N, 1, bi, 1, N, (char *)ga + (size_t)(i * M * K) * es, K, P);
    if (gb) gemm_any(dt, K, N, M, ai, 1, K, gyi, N, 1, (char *)gb + (size_t)(i * K * N) * es, N, P);
  }
  free(P);
  return TG_OK;
}
