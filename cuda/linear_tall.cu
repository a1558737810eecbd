// Tall-and-skinny f32 products (cuda/linear_tall.h): many rows, a small inner and outer width.
// cuBLAS picks tiled GEMM kernels for these shapes that run far from the memory bound (ncu at 400k
// rows, K 8, N 16, cold caches: 56-97 us a product where the bytes take ~12 us; see
// bench/records/run_s10b.sh), so the projection family takes these kernels instead:
//   k_tall_ab   Y[R, N] (+)= X[R, K] . W (+ bias): thread (row, 4 outputs), W in shared memory
//               (k_tall_ab_k at K 4 / 8: a resident grid walking the items, the next x row in flight;
//               TIGA_TALL_AB=0 in the environment keeps k_tall_ab)
//               ([K][N], transposed on load when W is stored [N, K]).
//   k_tall_atb  C[M, N] (+)= A[R, M]^T . B[R, N]: a fixed grid (a function of R only) of blocks, each
//               over a contiguous row range; thread (m, 4 columns of n) of slice s sums rows s, s + S,
//               ...; the slices summed in order, one partial set per block; k_tall_sum adds the
//               partial sets in a fixed order (32 strided slices, then the slices in order).
//   k_tall_bwd  a linear's backward in one pass over dY (cuda_tall_backward; K 4 or 8, N / 4 a power
//               of two from K to 32): the grid of k_tall_atb, thread (row slice, 4 columns q of n)
//               holding all K weight sums of its columns, rows streamed through shared memory by
//               cp.async, the row's N / 4 lanes reducing their K partial dots for gX by a fixed
//               reduce-scatter — dY is read once instead of three
//               times (gX by k_tall_ab, gW by k_tall_atb, gb by a column sum). Bit-reproducible.
#include <cstdlib>

#include "attention_fused.cuh" // the cp.async wrappers
#include "common.cuh"
#include "linear_tall.h"

namespace {

constexpr int kTallThreads = 256, kTallMaxKN = 1024, kTallMaxBlocks = 1024;
constexpr int64_t kTallRowsPerBlock = 128, kTallMinRows = 8192;
constexpr int kAbBlocksPerSm = 4; // k_tall_ab_k's grid: blocks a SM (56 registers at K 8: four resident)

// k_tall_ab's and k_tall_ab_k's pieces: W into shared memory as [K][N] (transposed on load when
// stored [N, K]); acc += x[k .. k + 3] . w's rows k .. k + 3 at columns 4q .. 4q + 3, in that order;
// Y[r, 4q .. 4q + 3] (+)= acc.
__device__ __forceinline__ void ab_load_w(float *w, const float *__restrict__ W, int K, int N, int w_trans) {
  for (int t = threadIdx.x; t < K * N; t += kTallThreads) {
    const int k = t / N, n = t % N;
    w[t] = w_trans ? W[(int64_t)n * K + k] : W[t];
  }
  __syncthreads();
}
__device__ __forceinline__ void ab_rows4(float4 &acc, const float4 xv, const float *w, int k, int N, int q) {
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
__device__ __forceinline__ void ab_store(float *__restrict__ Y, int64_t r, int N, int q, float4 acc, int add) {
  float4 *y = reinterpret_cast<float4 *>(Y + r * N) + q;
  if (add) {
    const float4 o = *y;
    acc.x += o.x, acc.y += o.y, acc.z += o.z, acc.w += o.w;
  }
  *y = acc;
}

__global__ void __launch_bounds__(kTallThreads)
    k_tall_ab(int64_t R, int K, int N, const float *__restrict__ X, const float *__restrict__ W, int w_trans,
              const float *__restrict__ bias, float *__restrict__ Y, int add) {
  __shared__ alignas(16) float w[kTallMaxKN];
  ab_load_w(w, W, K, N, w_trans);
  const int NQ = N >> 2;
  const int64_t t = (int64_t)blockIdx.x * kTallThreads + threadIdx.x, r = t / NQ;
  if (r >= R) return;
  const int q = (int)(t - r * NQ);
  float4 acc = bias ? *reinterpret_cast<const float4 *>(bias + 4 * q) : make_float4(0.f, 0.f, 0.f, 0.f);
  const float *x = X + r * K;
  for (int k = 0; k < K; k += 4)
    ab_rows4(acc, *reinterpret_cast<const float4 *>(x + k), w, k, N, q);
  ab_store(Y, r, N, q, acc, add);
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

// k_tall_ab for K 4 or 8 (the narrow inputs of the point-cloud and graph layers): a grid of at most
// a few blocks a SM walks the items (row, 4 outputs) by a grid stride, W loaded into shared memory
// once a block, the next item's x row loaded into registers before this one is computed (two rows
// in flight a thread). The same arithmetic in the same order as k_tall_ab (the same bits).
template <int K>
__global__ void __launch_bounds__(kTallThreads)
    k_tall_ab_k(int64_t R, int N, const float *__restrict__ X, const float *__restrict__ W, int w_trans,
                const float *__restrict__ bias, float *__restrict__ Y, int add) {
  __shared__ alignas(16) float w[kTallMaxKN];
  ab_load_w(w, W, K, N, w_trans);
  const int NQ = N >> 2;
  const int64_t total = R * NQ, stride = (int64_t)gridDim.x * kTallThreads;
  int64_t t = (int64_t)blockIdx.x * kTallThreads + threadIdx.x;
  if (t >= total) return;
  float4 xv[K / 4], xn[K / 4];
#pragma unroll
  for (int j = 0; j < K / 4; ++j)
    xv[j] = *reinterpret_cast<const float4 *>(X + (t / NQ) * K + 4 * j);
  for (;;) {
    const int64_t tn = t + stride;
    if (tn < total)
#pragma unroll
      for (int j = 0; j < K / 4; ++j)
        xn[j] = *reinterpret_cast<const float4 *>(X + (tn / NQ) * K + 4 * j);
    const int64_t r = t / NQ;
    const int q = (int)(t - r * NQ);
    float4 acc = bias ? *reinterpret_cast<const float4 *>(bias + 4 * q) : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int j = 0; j < K / 4; ++j)
      ab_rows4(acc, xv[j], w, 4 * j, N, q);
    ab_store(Y, r, N, q, acc, add);
    if (tn >= total) break;
    t = tn;
#pragma unroll
    for (int j = 0; j < K / 4; ++j)
      xv[j] = xn[j];
  }
}

// dX[R, K] (+)= dY . W^T, part[b] = (sum of x[r]^T dY[r] | sum of dY[r]) over block b's rows
// (sets of K N + N floats; the bias part only when gb). Thread (slice s, column chunk q): NQ = N / 4
// (a power of two, K <= NQ <= 32) consecutive lanes share a row; a tile is S = 256 / NQ rows, one
// float4 of dY a thread, and the block streams its rows through kBwdStages tiles of shared memory
// by cp.async (each thread copies its own dY float4, lanes q < K / 4 their row's x; a row's lanes
// are one warp's, so warp barriers order the stages). Per row a thread adds x[r, k] dY[r, q] to its
// K float4 weight sums and dY[r, q] to its bias sums, and forms K partial dots dY[r, q] . W[k, q];
// the row's NQ lanes sum them by a reduce-scatter (K - 1 exchanges leave each lane one k, summed
// over K lanes) and an xor butterfly over the rest, and the lanes with no low bits set write gX[r,
// k]. Block sums over the slices in order through shared memory; k_tall_sum adds the blocks.
constexpr int kBwdStages = 8, kBwdXq = 64; // x (and old gX) float4s a stage: S K / 4 <= 64 when NQ >= K
template <int K>
__global__ void __launch_bounds__(kTallThreads, 2)
    k_tall_bwd(int64_t R, int64_t per, int N, const float *__restrict__ X, const float *__restrict__ W,
               const float *__restrict__ G, float *__restrict__ dX, int dx_add, float *__restrict__ part, int gw,
               int gb) {
  static_assert(kBwdStages * (kTallThreads + kBwdXq) >= kTallThreads * K, "the sums reuse the stages");
  // stages: dY, x, and gX's old values when dX is added to (their load is pipelined too: a load
  // before each store would wait a memory trip a row); then the sums
  __shared__ float4 sm[kBwdStages * (kTallThreads + 2 * kBwdXq)];
  float4 *sg = sm, *sx = sm + kBwdStages * kTallThreads, *so = sx + kBwdStages * kBwdXq;
  const int NQ = N >> 2, S = kTallThreads / NQ;
  const int q = (int)threadIdx.x % NQ, s = (int)threadIdx.x / NQ;
  const int64_t r0 = (int64_t)blockIdx.x * per, r1 = r0 + per < R ? r0 + per : R;
  const int ntile = r1 > r0 ? (int)((r1 - r0 + S - 1) / S) : 0;
  // the NQ lanes of a row are consecutive lanes of one warp (NQ divides 32)
  const unsigned lane = threadIdx.x & 31u;
  const unsigned grp = NQ == 32 ? 0xffffffffu : ((1u << NQ) - 1u) << (lane & ~(unsigned)(NQ - 1));
  float4 w[K], acc[K], bacc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    w[k] = dX ? *reinterpret_cast<const float4 *>(W + (int64_t)k * N + 4 * q) : make_float4(0.f, 0.f, 0.f, 0.f);
    acc[k] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  auto issue = [&](int t) { // tile t into stage t % kBwdStages (zero-filled past the rows)
    const int st = t % kBwdStages;
    const int64_t r = r0 + (int64_t)t * S + s;
    const bool ok = t < ntile && r < r1;
    fa_cp16(&sg[st * kTallThreads + (int)threadIdx.x], ok ? G + r * N + 4 * q : G, ok);
    if (gw && q < K / 4) fa_cp16(&sx[st * kBwdXq + s * (K / 4) + q], ok ? X + r * K + 4 * q : X, ok);
    if (dX && dx_add && q < K / 4) fa_cp16(&so[st * kBwdXq + s * (K / 4) + q], ok ? dX + r * K + 4 * q : dX, ok);
    fa_cp_commit();
  };
  for (int t = 0; t < kBwdStages - 1; ++t)
    issue(t);
  for (int t = 0; t < ntile; ++t) {
    issue(t + kBwdStages - 1); // the stage tile t - 1 used: its warp passed the barrier below
    fa_cp_wait<kBwdStages - 1>();
    __syncwarp();
    const int st = t % kBwdStages;
    const int64_t r = r0 + (int64_t)t * S + s;
    if (r < r1) { // the same for the row's lanes
      const float4 g = sg[st * kTallThreads + (int)threadIdx.x];
      if (gw) {
        float x[K];
#pragma unroll
        for (int k = 0; k < K; k += 4) {
          const float4 v = sx[st * kBwdXq + s * (K / 4) + k / 4];
          x[k] = v.x, x[k + 1] = v.y, x[k + 2] = v.z, x[k + 3] = v.w;
        }
#pragma unroll
        for (int k = 0; k < K; ++k) {
          acc[k].x = fmaf(x[k], g.x, acc[k].x);
          acc[k].y = fmaf(x[k], g.y, acc[k].y);
          acc[k].z = fmaf(x[k], g.z, acc[k].z);
          acc[k].w = fmaf(x[k], g.w, acc[k].w);
        }
      }
      if (gb) bacc.x += g.x, bacc.y += g.y, bacc.z += g.z, bacc.w += g.w;
      if (dX) {
        float p[K];
#pragma unroll
        for (int k = 0; k < K; ++k)
          p[k] = fmaf(g.w, w[k].w, fmaf(g.z, w[k].z, fmaf(g.y, w[k].y, g.x * w[k].x)));
        // reduce-scatter: at offset o the lane with bit o set keeps the upper half of the vector
        int idx = 0, o = NQ >> 1;
#pragma unroll
        for (int L = K; L > 1; L >>= 1, o >>= 1) {
          const bool up = (q & o) != 0;
#pragma unroll
          for (int i = 0; i < L / 2; ++i) {
            const float keep = up ? p[i + L / 2] : p[i], send = up ? p[i] : p[i + L / 2];
            p[i] = keep + __shfl_xor_sync(grp, send, o);
          }
          idx += up ? L / 2 : 0;
        }
        float d = p[0];
        for (; o; o >>= 1) // the lanes that hold the same k
          d += __shfl_xor_sync(grp, d, o);
        if ((q & (NQ / K - 1)) == 0)
          dX[r * K + idx] = dx_add ? reinterpret_cast<const float *>(&so[st * kBwdXq + s * (K / 4)])[idx] + d : d;
      }
    }
    __syncwarp();
  }
  fa_cp_wait<0>(); // the zero-filled copies past the end too, before the stages become the sums
  __syncthreads();
  float4 *red = sm;
  const int P = K * N + (gb ? N : 0);
  float *out = part + (int64_t)blockIdx.x * P;
  if (gw) {
#pragma unroll
    for (int k = 0; k < K; ++k)
      red[(int)threadIdx.x * K + k] = acc[k];
    __syncthreads();
    for (int t = (int)threadIdx.x; t < NQ * K; t += kTallThreads) { // (column chunk, k)
      const int tq = t / K, tk = t % K;
      float4 v = red[tq * K + tk];
      for (int z = 1; z < S; ++z) {
        const float4 o2 = red[(z * NQ + tq) * K + tk];
        v.x += o2.x, v.y += o2.y, v.z += o2.z, v.w += o2.w;
      }
      float *dst = out + (int64_t)tk * N + 4 * tq;
      dst[0] = v.x, dst[1] = v.y, dst[2] = v.z, dst[3] = v.w;
    }
    __syncthreads();
  }
  if (gb) {
    red[threadIdx.x] = bacc;
    __syncthreads();
    if ((int)threadIdx.x < NQ) {
      float4 v = red[q];
      for (int z = 1; z < S; ++z) {
        const float4 o2 = red[z * NQ + q];
        v.x += o2.x, v.y += o2.y, v.z += o2.z, v.w += o2.w;
      }
      float *dst = out + (int64_t)K * N + 4 * q;
      dst[0] = v.x, dst[1] = v.y, dst[2] = v.z, dst[3] = v.w;
    }
  }
}

// C[t] (+)= sum_b part[b * stride + t]: block of 32 outputs; thread (slice y, output x) sums b = y,
// y + 32, ... (coalesced rows of the partial sets, several loads in flight), then the 32 slices in
// order.
constexpr int kSumSlices = 32;
__global__ void __launch_bounds__(32 * kSumSlices)
    k_tall_sum(int nb, int mn, int64_t stride, const float *part, float *C, int add) {
  __shared__ float red[kSumSlices][32];
  const int x = (int)threadIdx.x & 31, y = (int)threadIdx.x >> 5, t = (int)blockIdx.x * 32 + x;
  float s = 0.f;
  if (t < mn)
#pragma unroll 4
    for (int b = y; b < nb; b += kSumSlices)
      s += part[(int64_t)b * stride + t];
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
  const int64_t threads = R * (N / 4), blocks = (threads + kTallThreads - 1) / kTallThreads;
  const char *v = getenv("TIGA_TALL_AB");
  int dev = 0, sms = 0;
  if ((K == 4 || K == 8) && !(v && *v && atoi(v) == 0) && cudaGetDevice(&dev) == cudaSuccess &&
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && sms > 0) {
    const int64_t grid = blocks < (int64_t)sms * kAbBlocksPerSm ? blocks : (int64_t)sms * kAbBlocksPerSm;
    if (K == 4)
      k_tall_ab_k<4><<<(unsigned)grid, kTallThreads, 0, s>>>(R, (int)N, X, W, w_trans, bias, Y, add);
    else
      k_tall_ab_k<8><<<(unsigned)grid, kTallThreads, 0, s>>>(R, (int)N, X, W, w_trans, bias, Y, add);
  } else {
    k_tall_ab<<<(unsigned)blocks, kTallThreads, 0, s>>>(R, (int)K, (int)N, X, W, w_trans, bias, Y, add);
  }
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
  k_tall_sum<<<(unsigned)((mn + 31) / 32), 32 * kSumSlices, 0, s>>>((int)nb, mn, mn, part, C, add);
  TGC_LAUNCHED("linear_tall_sum");
  return TG_OK;
}

int cuda_tall_backward_ok(int64_t R, int64_t K, int64_t N) {
  const char *v = getenv("TIGA_TALL_BWD");
  if (v && *v && atoi(v) == 0) return 0;
  const int64_t nq = N / 4;
  return cuda_tall_shape_ok(R, K, N) && (K == 4 || K == 8) && nq >= K && nq <= 32 && (nq & (nq - 1)) == 0;
}

size_t cuda_tall_backward_workspace(int64_t R, int64_t K, int64_t N) {
  return (size_t)atb_blocks(R) * (size_t)(K * N + N) * sizeof(float);
}

tg_status cuda_tall_backward(tgc_stream s, int64_t R, int64_t K, int64_t N, const float *X, const float *W,
                             const float *G, float *dX, int dx_add, float *dW, int dw_add, float *db, int db_add,
                             void *ws) {
  const int64_t nb = atb_blocks(R), per = (R + nb - 1) / nb, P = K * N + (db ? N : 0);
  float *part = static_cast<float *>(ws);
  if (K == 4)
    k_tall_bwd<4>
        <<<(unsigned)nb, kTallThreads, 0, s>>>(R, per, (int)N, X, W, G, dX, dx_add, part, dW != nullptr, db != nullptr);
  else
    k_tall_bwd<8>
        <<<(unsigned)nb, kTallThreads, 0, s>>>(R, per, (int)N, X, W, G, dX, dx_add, part, dW != nullptr, db != nullptr);
  TGC_LAUNCHED("linear_tall_bwd");
  if (dW) {
    const int mn = (int)(K * N);
    k_tall_sum<<<(unsigned)((mn + 31) / 32), 32 * kSumSlices, 0, s>>>((int)nb, mn, P, part, dW, dw_add);
    TGC_LAUNCHED("linear_tall_sum");
  }
  if (db) {
    k_tall_sum<<<(unsigned)((N + 31) / 32), 32 * kSumSlices, 0, s>>>((int)nb, (int)N, P, part + K * N, db, db_add);
    TGC_LAUNCHED("linear_tall_sum");
  }
  return TG_OK;
}

} // extern "C"
