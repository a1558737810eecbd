// Linear and matmul on the device. Row-major products run as column-major ones on the transposes:
//   C = op(A)·op(B) (row-major)  <=>  Cᵀ = op(B)ᵀ·op(A)ᵀ (column-major),
// and a row-major [r, c] buffer is, read column-major, its transpose [c, r] with ld = c.
// 2-D products go through cuBLASLt with the heuristic's algorithm cached per shape (PyTorch asks the
// same heuristic); Lt also fuses the bias into the forward GEMM (epilogue BIAS) and the bias gradient
// into the weight-gradient GEMM (epilogue BGRADA). Where Lt offers no algorithm, cublasGemmEx and two
// small kernels (bias broadcast, column sums) compute the same thing. Batched products use
// cublasGemmStridedBatchedEx.
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cublasLt.h>
#include <initializer_list>
#include <mutex>

#include "common.cuh"
#include "linear.h"
#include "linear_tall.h"

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

// Switches for benchmarking and for testing every path, read on every call (getenv is cheap next to
// a GEMM): TIGA_LINEAR_LT=0 runs every product through cublasGemmEx plus the bias kernels;
// TIGA_LINEAR_BGRAD=0 computes the bias gradient with the column-sum kernel, =2 fuses it into the
// weight-gradient GEMM whenever Lt can (default 1: only when that GEMM still fills the GPU).
static int knob(const char *name, int dflt) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : dflt;
}

// f32 tall-and-skinny products (many rows, K * N <= 1024) take cuda/linear_tall.cu's kernels: cuBLAS's
// tiled kernels run them far from the memory bound (bench/records/run_s10b.sh, run_s10c.sh).
static bool tall(tg_dtype dt, int64_t rows, int64_t K, int64_t N, std::initializer_list<const void *> ps) {
  if (dt != TG_F32 || !cuda_tall_shape_ok(rows, K, N)) return false;
  for (const void *p : ps)
    if (!tgc_aligned(p, 16)) return false;
  return true;
}

// Row-major C[M, N] = op(A)[M, K] · op(B)[K, N] + beta C for `batch` matrices at the given element
// strides through cublasGemmEx. A is stored [M, K], or [K, M] when trans_a; B is stored [K, N], or
// [N, K] when trans_b. beta = 0 never reads C. Accumulates in f32 whatever the storage type.
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

// ---------------------------------------------------------------- cuBLASLt
// One row-major product C[M, N] = op(A)[M, K] · op(B)[K, N] + beta C (storage as in gemm()) with an
// epilogue:
//   EPI_BIAS     C[i, j] = (op(A)·op(B))[i, j] + bias[j]            (beta must be 0)
//   EPI_BGRAD_B  the product, and bias[j] = sum_k B[k, j] written   (B untransposed)
// Lt sees the column-major transpose: D[m = N, n = M] = opA(LtA)·opB(LtB) with LtA = B's buffer
// ([N, K] ld N, or with tb [K, N] ld K and opA = T) and LtB = A's buffer ([K, M] ld K, or with ta
// [M, K] ld M and opB = T); D = C's buffer [N, M] ld N. So bias[j] runs over D's rows: Lt's BIAS, and
// sum_k B[k, j] = sum_k LtA[j, k] is Lt's BGRADA (which needs opA = N, i.e. !tb).
enum lt_epi { EPI_NONE = 0, EPI_BIAS = 1, EPI_BGRAD_B = 2 };

struct lt_gemm_args {
  tg_dtype dt;
  bool ta, tb;
  long long M, N, K;
  const void *a, *b;
  void *c;
  float beta;
  lt_epi epi;
  void *bias;
  bool need_fill; // take Lt's algorithm only if it keeps the GPU busy (else: fall back)
};

// Heuristic results per (handle, device, problem, pointer alignments): the query costs more than a
// launch, and a training loop repeats a few shapes. state 2 remembers that Lt offers nothing.
struct lt_key {
  const void *lt;
  int device, dt, epi, ta, tb, need_fill;
  long long M, N, K;
  unsigned align_a, align_b, align_c, align_bias; // of the row-major operands A, B, C and the bias
};
struct lt_slot {
  lt_key key;
  int state; // 0 empty, 1 algo, 2 no algorithm: fall back
  cublasLtMatmulAlgo_t algo;
};
enum { LT_SLOTS = 128 };
static std::mutex g_lt_mu; // runtimes on different threads share the table
static lt_slot g_lt[LT_SLOTS];
static unsigned g_lt_next;

static int lt_lookup(const lt_key &k, cublasLtMatmulAlgo_t *algo) {
  std::lock_guard<std::mutex> lock(g_lt_mu);
  for (int i = 0; i < LT_SLOTS; i++)
    if (g_lt[i].state && !memcmp(&g_lt[i].key, &k, sizeof k)) {
      if (g_lt[i].state == 1) *algo = g_lt[i].algo;
      return g_lt[i].state;
    }
  return 0;
}

static void lt_store(const lt_key &k, int state, const cublasLtMatmulAlgo_t *algo) {
  std::lock_guard<std::mutex> lock(g_lt_mu);
  int at = -1;
  for (int i = 0; i < LT_SLOTS && at < 0; i++)
    if (g_lt[i].state && !memcmp(&g_lt[i].key, &k, sizeof k)) at = i;
  if (at < 0) at = (int)(g_lt_next++ % LT_SLOTS);
  g_lt[at].key = k;
  g_lt[at].state = state;
  if (algo) g_lt[at].algo = *algo;
}

// A BGRADA kernel reduces over k inside each output tile, so it likely cannot split k across SMs as
// the plain GEMM's choice does for small outputs (dW of 768x3072 is 72 tiles of 128x256 on 132 SMs;
// unmeasured). Lt reports the waves its choice runs; fusing is taken only when the last wave is
// mostly full, otherwise the plain GEMM plus the column-sum kernel (one read of dy) should be cheaper.
static bool fills_gpu(float waves) {
  if (!(waves > 0.f)) return false;
  float whole = ceilf(waves);
  return waves / whole >= 0.75f;
}

// Largest power of two up to 256 that divides the address (Lt's alignment preferences).
static unsigned align_of(const void *p) {
  uintptr_t u = (uintptr_t)p;
  unsigned a = 256;
  while (a > 1 && (u & (a - 1)))
    a >>= 1;
  return a;
}

#define LT_TRY(call)                                                                                                   \
  do {                                                                                                                 \
    cublasStatus_t lt_s_ = (call);                                                                                     \
    if (lt_s_ != CUBLAS_STATUS_SUCCESS) {                                                                              \
      tgc_set_error("%s: %s (%s:%d)", #call, tgc_cublas_string(lt_s_), __FILE__, __LINE__);                            \
      return tgc_status_of_cublas(lt_s_);                                                                              \
    }                                                                                                                  \
  } while (0)

// TG_OK with *done = true when Lt ran the product; TG_OK with *done = false when Lt has no algorithm
// for it (or is switched off): the caller falls back. Another status when Lt failed otherwise.
static tg_status lt_gemm(const tgc_blas *h, const lt_gemm_args &g, bool *done) {
  *done = false;
  if (!h->lt || !knob("TIGA_LINEAR_LT", 1)) return TG_OK;
  cudaDataType_t ty;
  if (!cuda_type(g.dt, &ty)) return TG_ERR_DTYPE;
  cublasLtHandle_t lt = (cublasLtHandle_t)h->lt;
  lt_key key;
  memset(&key, 0, sizeof key); // padding takes part in memcmp
  key.lt = h->lt;
  if (cudaGetDevice(&key.device) != cudaSuccess) key.device = -1;
  key.dt = (int)g.dt;
  key.epi = (int)g.epi;
  key.ta = g.ta;
  key.tb = g.tb;
  key.need_fill = g.need_fill;
  key.M = g.M;
  key.N = g.N;
  key.K = g.K;
  key.align_a = align_of(g.a);
  key.align_b = align_of(g.b);
  key.align_c = align_of(g.c);
  key.align_bias = g.epi == EPI_NONE ? 0 : align_of(g.bias);
  cublasLtMatmulAlgo_t algo;
  int state = lt_lookup(key, &algo);
  if (state == 2) return TG_OK;

  cublasLtMatmulDescOpaque_t op;
  cublasLtMatrixLayoutOpaque_t la, lb, lc;
  cublasOperation_t opa = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtEpilogue_t epi = g.epi == EPI_BIAS      ? CUBLASLT_EPILOGUE_BIAS
                           : g.epi == EPI_BGRAD_B ? CUBLASLT_EPILOGUE_BGRADA
                                                  : CUBLASLT_EPILOGUE_DEFAULT;
  uint64_t M = (uint64_t)g.M, N = (uint64_t)g.N, K = (uint64_t)g.K;
  LT_TRY(cublasLtMatmulDescInit(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  LT_TRY(cublasLtMatmulDescSetAttribute(&op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
  LT_TRY(cublasLtMatmulDescSetAttribute(&op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
  LT_TRY(cublasLtMatmulDescSetAttribute(&op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
  if (g.epi != EPI_NONE)
    LT_TRY(cublasLtMatmulDescSetAttribute(&op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof g.bias));
  // LtA = B's buffer, LtB = A's buffer, D = C = C's buffer (column-major rows, cols, ld)
  LT_TRY(cublasLtMatrixLayoutInit(&la, ty, g.tb ? K : N, g.tb ? N : K, (int64_t)(g.tb ? K : N)));
  LT_TRY(cublasLtMatrixLayoutInit(&lb, ty, g.ta ? M : K, g.ta ? K : M, (int64_t)(g.ta ? M : K)));
  LT_TRY(cublasLtMatrixLayoutInit(&lc, ty, N, M, (int64_t)N));
  if (state == 0) {
    cublasLtMatmulPreferenceOpaque_t pref;
    uint64_t ws = h->workspace_bytes;
    uint32_t al_a = key.align_b, al_b = key.align_a, al_c = key.align_c; // in Lt's roles
    LT_TRY(cublasLtMatmulPreferenceInit(&pref));
    LT_TRY(cublasLtMatmulPreferenceSetAttribute(&pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    LT_TRY(cublasLtMatmulPreferenceSetAttribute(&pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a));
    LT_TRY(cublasLtMatmulPreferenceSetAttribute(&pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b));
    LT_TRY(cublasLtMatmulPreferenceSetAttribute(&pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c));
    LT_TRY(cublasLtMatmulPreferenceSetAttribute(&pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c));
    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0, sizeof res);
    int found = 0;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt, &op, &la, &lb, &lc, &lc, &pref, 1, &res, &found);
    if (hs != CUBLAS_STATUS_SUCCESS || found < 1 || res.state != CUBLAS_STATUS_SUCCESS ||
        (g.need_fill && !fills_gpu(res.wavesCount))) {
      lt_store(key, 2, nullptr);
      return TG_OK;
    }
    algo = res.algo;
    lt_store(key, 1, &algo);
  }
  const float alpha = 1.f, beta = g.beta;
  cublasStatus_t ms = cublasLtMatmul(lt, &op, &alpha, g.b, &la, g.a, &lb, &beta, g.c, &lc, g.c, &lc, &algo,
                                     h->workspace, h->workspace_bytes, h->stream);
  if (ms == CUBLAS_STATUS_NOT_SUPPORTED || ms == CUBLAS_STATUS_INVALID_VALUE) {
    lt_store(key, 2, nullptr); // refused before any work was enqueued: the fallback runs instead
    return TG_OK;
  }
  if (ms != CUBLAS_STATUS_SUCCESS) {
    tgc_set_error("cublasLtMatmul (M=%lld N=%lld K=%lld): %s", g.M, g.N, g.K, tgc_cublas_string(ms));
    return tgc_status_of_cublas(ms);
  }
  *done = true;
  return TG_OK;
}

// A single 2-D product without epilogue: Lt when it has an algorithm, else cublasGemmEx.
static tg_status gemm2d(const tgc_blas *h, tg_dtype dt, bool ta, bool tb, long long M, long long N, long long K,
                        const void *a, const void *b, void *c, float beta) {
  lt_gemm_args g = {dt, ta, tb, M, N, K, a, b, c, beta, EPI_NONE, nullptr, false};
  bool done = false;
  tg_status st = lt_gemm(h, g, &done);
  if (st || done) return st;
  return gemm(h->cublas, dt, ta, tb, M, N, K, a, 0, b, 0, beta, c, 0, 1);
}

// ---------------------------------------------------------------- bias kernels (fallbacks)

// y[r, j] = bias[j]: the GEMM then adds x·w with beta = 1, so bias and product round once.
template <typename T>
__global__ void k_bias_rows(T *__restrict__ y, const T *__restrict__ bias, long long rows, long long n) {
  long long total = rows * n;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x)
    y[i] = bias[i % n];
}

// Bias gradient, deterministic in two passes: part[c, j] = sum of gy[r, j] over the rows of chunk c,
// then gb[j] (+)= sum_c part[c, j] in chunk order. A block is 32 columns x 8 row lanes: each warp reads
// 32 consecutive elements of one row (coalesced) and the 8 lanes meet in shared memory.
enum { CS_COLS = 32, CS_LANES = 8, CS_MAX_CHUNKS = 256, CS_MIN_ROWS = 64 };

static long long colsum_chunks(long long rows) {
  long long c = (rows + CS_MIN_ROWS - 1) / CS_MIN_ROWS, cap = CS_MAX_CHUNKS;
  return c < 1 ? 1 : c > cap ? cap : c;
}

template <typename T>
__global__ void k_colsum_part(const T *__restrict__ gy, long long rows, long long n, long long per,
                              float *__restrict__ part) {
  __shared__ float sh[CS_LANES][CS_COLS + 1];
  long long j = blockIdx.x * (long long)CS_COLS + threadIdx.x;
  long long r0 = blockIdx.y * per, r1 = min(rows, r0 + per);
  float s = 0.f;
  if (j < n) {
#pragma unroll 4
    for (long long r = r0 + threadIdx.y; r < r1; r += CS_LANES)
      s += tgc_to_f(gy[r * n + j]);
  }
  sh[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && j < n) {
    for (int k = 1; k < CS_LANES; k++)
      s += sh[k][threadIdx.x];
    part[blockIdx.y * n + j] = s;
  }
}

template <typename T>
__global__ void k_colsum_final(const float *__restrict__ part, long long chunks, long long n, int add,
                               T *__restrict__ gb) {
  long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (j >= n) return;
  float s = 0.f;
  for (long long c = 0; c < chunks; c++)
    s += part[c * n + j];
  gb[j] = tgc_from_f<T>(add ? tgc_to_f(gb[j]) + s : s);
}

template <typename T>
static tg_status bias_rows(cudaStream_t s, void *y, const void *bias, long long rows, long long n) {
  k_bias_rows<T><<<tgc_blocks(rows * n, 256), 256, 0, s>>>((T *)y, (const T *)bias, rows, n);
  TGC_LAUNCHED("bias_rows");
  return TG_OK;
}

template <typename T>
static tg_status colsum(cudaStream_t s, const void *gy, long long rows, long long n, int add, void *gb, void *scratch) {
  long long chunks = colsum_chunks(rows), per = (rows + chunks - 1) / chunks;
  dim3 grid((unsigned)((n + CS_COLS - 1) / CS_COLS), (unsigned)chunks), block(CS_COLS, CS_LANES);
  k_colsum_part<T><<<grid, block, 0, s>>>((const T *)gy, rows, n, per, (float *)scratch);
  TGC_LAUNCHED("colsum_part");
  k_colsum_final<T><<<(unsigned)((n + 255) / 256), 256, 0, s>>>((const float *)scratch, chunks, n, add, (T *)gb);
  TGC_LAUNCHED("colsum_final");
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
static tg_status colsum_any(cudaStream_t s, tg_dtype dt, const void *gy, long long rows, long long n, int add, void *gb,
                            void *scratch) {
  DISPATCH(dt, colsum, s, gy, rows, n, add, gb, scratch)
}

// ---------------------------------------------------------------- launchers

extern "C" tg_status cuda_linear_forward(const tgc_blas *h, tg_dtype dt, const void *x, const void *w, const void *bias,
                                         void *y, int64_t rows, int64_t in, int64_t out) {
  // y[rows, out] = x[rows, in] · w[in, out] (+ bias): M = rows, N = out, K = in
  if (tall(dt, rows, in, out, {x, w, bias, y}))
    return cuda_tall_ab(h->stream, rows, in, out, static_cast<const float *>(x), static_cast<const float *>(w), 0,
                        static_cast<const float *>(bias), static_cast<float *>(y), 0);
  lt_gemm_args g = {dt, false, false, rows, out, in, x, w, y, 0.f, bias ? EPI_BIAS : EPI_NONE, (void *)bias, false};
  bool done = false;
  tg_status st = lt_gemm(h, g, &done);
  if (st || done) return st;
  if (bias && (st = bias_rows_any(h->stream, dt, y, bias, rows, out))) return st;
  return gemm(h->cublas, dt, false, false, rows, out, in, x, 0, w, 0, bias ? 1.f : 0.f, y, 0, 1);
}

extern "C" size_t cuda_linear_scratch_bytes(int64_t rows, int64_t out) {
  return (size_t)colsum_chunks(rows) * (size_t)out * sizeof(float);
}

extern "C" tg_status cuda_linear_backward(const tgc_blas *h, tg_dtype dt, const void *x, const void *w, const void *gy,
                                          tgc_grad gx, tgc_grad gw, tgc_grad gb, void *scratch, int64_t rows,
                                          int64_t in, int64_t out) {
  tg_status st = TG_OK;
  // tall f32 shapes with the weight gradient wanted: gx, gw and gb in one pass over gy
  // (cuda_tall_backward) where its shape rule and the workspace allow
  if (gw.p && tall(dt, rows, in, out, {x, gy, gw.p}) && (!gx.p || tgc_aligned(gx.p, 16)) && tgc_aligned(w, 16) &&
      cuda_tall_backward_ok(rows, in, out) && h->workspace &&
      h->workspace_bytes >= cuda_tall_backward_workspace(rows, in, out))
    return cuda_tall_backward(h->stream, rows, in, out, static_cast<const float *>(x), static_cast<const float *>(w),
                              static_cast<const float *>(gy), static_cast<float *>(gx.p), gx.add,
                              static_cast<float *>(gw.p), gw.add, static_cast<float *>(gb.p), gb.add, h->workspace);
  // gx[rows, in] (+)= gy[rows, out] · wᵀ   (w stored [in, out] = [N, K]: transposed)
  if (gx.p && tall(dt, rows, out, in, {gy, w, gx.p}))
    st = cuda_tall_ab(h->stream, rows, out, in, static_cast<const float *>(gy), static_cast<const float *>(w), 1,
                      nullptr, static_cast<float *>(gx.p), gx.add);
  else if (gx.p)
    st = gemm2d(h, dt, false, true, rows, in, out, gy, w, gx.p, gx.add ? 1.f : 0.f);
  // gw[in, out] (+)= xᵀ · gy               (x stored [rows, in] = [K, M]: transposed)
  // An overwritten bias gradient may ride along: gb[j] = sum_r gy[r, j], the column sums of the
  // GEMM's untransposed B operand (Lt's BGRADA, which writes and cannot add); see fills_gpu.
  bool gb_done = false;
  int fuse = knob("TIGA_LINEAR_BGRAD", 1);
  if (!st && gw.p && tall(dt, rows, in, out, {x, gy, gw.p}) && h->workspace &&
      h->workspace_bytes >= cuda_tall_atb_workspace(rows, in, out)) {
    st = cuda_tall_atb(h->stream, rows, in, out, static_cast<const float *>(x), static_cast<const float *>(gy),
                       static_cast<float *>(gw.p), gw.add, h->workspace);
  } else if (!st && gw.p) {
    if (gb.p && !gb.add && fuse) {
      lt_gemm_args g = {dt, true, false, in, out, rows, x, gy, gw.p, gw.add ? 1.f : 0.f, EPI_BGRAD_B, gb.p, fuse < 2};
      st = lt_gemm(h, g, &gb_done);
    }
    if (!st && !gb_done) st = gemm2d(h, dt, true, false, in, out, rows, x, gy, gw.p, gw.add ? 1.f : 0.f);
  }
  if (!st && gb.p && !gb_done) {
    if (!scratch) {
      tgc_set_error("bias gradient: no scratch buffer given");
      return TG_ERR_INTERNAL;
    }
    st = colsum_any(h->stream, dt, gy, rows, out, gb.add, gb.p, scratch);
  }
  return st;
}

extern "C" tg_status cuda_matmul_forward(const tgc_blas *h, tg_dtype dt, const void *a, const void *b, void *y,
                                         int64_t batch, int64_t M, int64_t K, int64_t N, int b_shared) {
  if (b_shared) return cuda_linear_forward(h, dt, a, b, nullptr, y, batch * M, K, N); // one product, all rows
  if (batch == 1) return gemm2d(h, dt, false, false, M, N, K, a, b, y, 0.f);
  return gemm(h->cublas, dt, false, false, M, N, K, a, M * K, b, K * N, 0.f, y, M * N, batch);
}

extern "C" tg_status cuda_matmul_backward(const tgc_blas *h, tg_dtype dt, const void *a, const void *b, const void *gy,
                                          tgc_grad ga, tgc_grad gb, int64_t batch, int64_t M, int64_t K, int64_t N,
                                          int b_shared) {
  if (b_shared) {
    tgc_grad none = {nullptr, 0};
    return cuda_linear_backward(h, dt, a, b, gy, ga, gb, none, nullptr, batch * M, K, N);
  }
  tg_status st = TG_OK;
  // ga[i][M, K] (+)= gy[i][M, N] · b[i]ᵀ   (b[i] stored [K, N] = [N', K']: transposed)
  if (ga.p) st = gemm(h->cublas, dt, false, true, M, K, N, gy, M * N, b, K * N, ga.add ? 1.f : 0.f, ga.p, M * K, batch);
  // gb[i][K, N] (+)= a[i]ᵀ · gy[i]          (a[i] stored [M, K] = [K', M']: transposed)
  if (!st && gb.p)
    st = gemm(h->cublas, dt, true, false, K, N, M, a, M * K, gy, M * N, gb.add ? 1.f : 0.f, gb.p, K * N, batch);
  return st;
}
