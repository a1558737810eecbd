// Tall-and-skinny f32 products (cuda/linear_tall.h): many rows, a small inner and outer width.
// cuBLAS picks tiled GEMM kernels for these shapes that run far from the memory bound (ncu at 400k
// rows, K 8, N 16, cold caches: 56-97 us a product where the bytes take ~12 us; see
// bench/records/run_s10b.sh), so the projection family takes these kernels instead:
//   k_tall_ab   Y[R, N] (+)= X[R, K] . W (+ bias): thread (row, 4 outputs), W in shared memory
//               ([K][N], transposed on load when W is stored [N, K]).
//   k_tall_atb  C[M, N] (+)= A[R, M]^T . B[R, N]: a fixed grid (a function of R only) of blocks, each
//               over a contiguous row range; thread (m, 4 columns of n) of slice s sums rows s, s + S,
//               ...; the slices summed in order, one partial set per block; k_tall_sum adds the
//               partial sets in a fixed order (32 strided slices, then the slices in order).
//               Bit-reproducible.
#include <cstdlib>

#include "common.cuh"
#include "linear_tall.h"

namespace {

constexpr int kTallThreads = 256, kTallMaxKN = 1024, kTallMaxBlocks = 1024;
constexpr int64_t kTallRowsPerBlock = 128, kTallMinRows = 8192;

__global__ void __launch_bounds__(kTallThreads)
    k_tall_ab(int64_t R, int K, int N, const float *__restrict__ X, const float *__restrict__ W, int w_trans,
              const float *__restrict__ bias, float *__restrict__ Y, int add) {
  __shared__ alignas(16) float w[kTallMaxKN];
  for (int t = threadIdx.x; t < K * N; t += kTallThreads) {
    const int k = t / N, n = t % N;
    w[t] = w_trans ? W[(int64_t)n * K + k] : W[t];
  }
  __syncthreads();
  const int NQ = N >> 2;
  const int64_t t = (int64_t)blockIdx.x * kTallThreads + threadIdx.x, r = t / NQ;
  if (r >= R) return;
  const int q = (int)(t - r * NQ);
  float4 acc = bias ? *reinterpret_cast<const float4 *>(bias + 4 * q) : make_float4(0.f, 0.f, 0.f, 0.f);
  const float *x = X + r * K;
  for (int k = 0; k < K; k += 4) {
    const float4 xv = *reinterpret_cast<const float4 *>(x + k);
    const float xs[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const float4 wv = *reinterpret_cast<const float4 *>(w + (k + u) * N + 4 * q);
      acc.x = fmaf(xs[u], wv.x, acc.x);
      acc.y = fmaf(xs[u], wv.y, acc.y);
      acc.z = fmaf(xs[u], wv.z, acc.z);
      acc.w = fmaf(xs[u], wv.w, acc.w);
    }
  }
  float4 *y = reinterpret_cast<float4 *>(Y + r * N) + q;
  if (add) {
    const float4 o = *y;
    acc.x += o.x, acc.y += o.y, acc.z += o.z, acc.w += o.w;
  }
  *y = acc;
}

__global__ void __launch_bounds__(kTallThreads)
    k_tall_atb(int64_t R, int64_t per, int M, int N, const float *__restrict__ A, const float *__restrict__ B,
               float *__restrict__ part) {
  __shared__ alignas(16) float red[kTallThreads * 4]; // [slice][unit][4]: S * U <= 256 float4
  const int NQ = N >> 2, U = M * NQ, S = kTallThreads / U;
  const int u = (int)threadIdx.x % U, s = (int)threadIdx.x / U;
  const int m = u / NQ, q = u % NQ;
  const int64_t r0 = (int64_t)blockIdx.x * per, r1 = r0 + per < R ? r0 + per : R;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  if (s < S)
#pragma unroll 4
    for (int64_t r = r0 + s; r < r1; r += S) {
      const float a = A[r * M + m];
      const float4 b = *reinterpret_cast<const float4 *>(B + r * N + 4 * q);
      acc.x = fmaf(a, b.x, acc.x);
      acc.y = fmaf(a, b.y, acc.y);
      acc.z = fmaf(a, b.z, acc.z);
      acc.w = fmaf(a, b.w, acc.w);
    }
  if (s < S) reinterpret_cast<float4 *>(red)[s * U + u] = acc;
  __syncthreads();
  if (threadIdx.x >= U) return;
  float4 v = reinterpret_cast<const float4 *>(red)[u];
  for (int z = 1; z < S; ++z) {
    const float4 o = reinterpret_cast<const float4 *>(red)[z * U + u];
    v.x += o.x, v.y += o.y, v.z += o.z, v.w += o.w;
  }
  reinterpret_cast<float4 *>(part + (int64_t)blockIdx.x * M * N + (int64_t)m * N)[q] = v;
}

// C[t] (+)= sum_b part[b, t]: block of 32 outputs; thread (slice y, output x) sums b = y, y + 32, ...
// (coalesced rows of the partial sets, several loads in flight), then the 32 slices in order.
constexpr int kSumSlices = 32;
__global__ void __launch_bounds__(32 * kSumSlices) k_tall_sum(int nb, int mn, const float *part, float *C, int add) {
  __shared__ float red[kSumSlices][32];
  const int x = (int)threadIdx.x & 31, y = (int)threadIdx.x >> 5, t = (int)blockIdx.x * 32 + x;
  float s = 0.f;
  if (t < mn)
#pragma unroll 4
    for (int b = y; b < nb; b += kSumSlices)
      s += part[(int64_t)b * mn + t];
  red[y][x] = s;
  __syncthreads();
  if (y != 0 || t >= mn) return;
  for (int z = 1; z < kSumSlices; ++z)
    s += red[z][x];
  C[t] = add ? C[t] + s : s;
}

int64_t atb_blocks(int64_t R) {
  const int64_t b = (R + kTallRowsPerBlock - 1) / kTallRowsPerBlock;
  return b < kTallMaxBlocks ? (b > 0 ? b : 1) : kTallMaxBlocks;
}

} // namespace

extern "C" {

int cuda_tall_shape_ok(int64_t R, int64_t K, int64_t N) {
  const char *v = getenv("TIGA_LINEAR_TALL");
  if (v && *v && atoi(v) == 0) return 0;
  return R >= kTallMinRows && K >= 4 && N >= 4 && K % 4 == 0 && N % 4 == 0 && K * N <= kTallMaxKN && K <= 256 &&
         N <= 256;
}

size_t cuda_tall_atb_workspace(int64_t R, int64_t M, int64_t N) {
  return (size_t)atb_blocks(R) * (size_t)(M * N) * sizeof(float);
}

tg_status cuda_tall_ab(tgc_stream s, int64_t R, int64_t K, int64_t N, const float *X, const float *W, int w_trans,
                       const float *bias, float *Y, int add) {
  const int64_t threads = R * (N / 4);
  k_tall_ab<<<(unsigned)((threads + kTallThreads - 1) / kTallThreads), kTallThreads, 0, s>>>(R, (int)K, (int)N, X, W,
                                                                                             w_trans, bias, Y, add);
  TGC_LAUNCHED("linear_tall_ab");
  return TG_OK;
}

tg_status cuda_tall_atb(tgc_stream s, int64_t R, int64_t M, int64_t N, const float *A, const float *B, float *C,
                        int add, void *ws) {
  const int64_t nb = atb_blocks(R), per = (R + nb - 1) / nb;
  float *part = static_cast<float *>(ws);
  k_tall_atb<<<(unsigned)nb, kTallThreads, 0, s>>>(R, per, (int)M, (int)N, A, B, part);
  TGC_LAUNCHED("linear_tall_atb");
  const int mn = (int)(M * N);
  k_tall_sum<<<(unsigned)((mn + 31) / 32), 32 * kSumSlices, 0, s>>>((int)nb, mn, part, C, add);
  TGC_LAUNCHED("linear_tall_sum");
  return TG_OK;
}

} // extern "C"
