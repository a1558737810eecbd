// Shape family on the device: transpose (tiled for batched matrix transposes, index math
// otherwise), column-block copies for concat / slice / split, and flat adds for reshape.
// Copies run on unsigned words of the element size; accumulating forms add in f32 registers.
#include <type_traits>

#include "common.cuh"
#include "shape.h"

// dst = v, or dst += v when ACC (T a float type).
template <typename T, bool ACC> __device__ __forceinline__ void put(T *dst, T v) {
  if constexpr (ACC)
    *dst = tgc_from_f<T>(tgc_to_f(*dst) + tgc_to_f(v));
  else
    *dst = v;
}

#define GRID_STRIDE(i, n)                                                                                              \
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)

// y [A, n1, B, n0, C] from x [A, n0, B, n1, C]: y[a, j, b, i, c] = x[a, i, b, j, c]. Writes are
// coalesced; reads are too whenever C is large.
template <typename T, bool ACC>
__global__ void k_transpose(const T *__restrict__ x, T *__restrict__ y, host_swap s, long long n) {
  GRID_STRIDE(idx, n) {
    long long c = idx % s.c, r = idx / s.c;
    long long i = r % s.n0;
    r /= s.n0;
    long long b = r % s.b;
    r /= s.b;
    long long j = r % s.n1, a = r / s.n1;
    put<T, ACC>(&y[idx], x[(((a * s.n0 + i) * s.b + b) * s.n1 + j) * s.c + c]);
  }
}

// Batched matrix transpose x [A, n0, n1] -> y [A, n1, n0] (the B = C = 1 case) through a 32 x 33
// shared tile, so both the reads and the writes are coalesced. The tile holds f32 when adding.
constexpr int TILE = 32, TILE_ROWS = 8;
template <typename T, bool ACC>
__global__ void k_transpose_tile(const T *__restrict__ x, T *__restrict__ y, long long A, long long n0, long long n1) {
  using S = typename std::conditional<ACC, float, T>::type;
  __shared__ S tile[TILE][TILE + 1];
  long long j0 = (long long)blockIdx.x * TILE, i0 = (long long)blockIdx.y * TILE;
  for (long long a = blockIdx.z; a < A; a += gridDim.z) {
    const T *xa = x + a * n0 * n1;
    T *ya = y + a * n0 * n1;
    for (int k = threadIdx.y; k < TILE; k += TILE_ROWS) {
      long long i = i0 + k, j = j0 + threadIdx.x;
      if (i < n0 && j < n1) {
        if constexpr (ACC)
          tile[k][threadIdx.x] = tgc_to_f(xa[i * n1 + j]);
        else
          tile[k][threadIdx.x] = xa[i * n1 + j];
      }
    }
    __syncthreads();
    for (int k = threadIdx.y; k < TILE; k += TILE_ROWS) {
      long long j = j0 + k, i = i0 + threadIdx.x;
      if (i < n0 && j < n1) {
        T *d = &ya[j * n0 + i];
        if constexpr (ACC)
          *d = tgc_from_f<T>(tgc_to_f(*d) + tile[threadIdx.x][k]);
        else
          *d = tile[threadIdx.x][k];
      }
    }
    __syncthreads();
  }
}

template <typename T, bool ACC> static tg_status transpose_t(cudaStream_t st, host_swap s, const void *x, void *y) {
  long long n = s.a * s.n0 * s.b * s.n1 * s.c;
  long long ti = (s.n0 + TILE - 1) / TILE, tj = (s.n1 + TILE - 1) / TILE;
  if (s.b == 1 && s.c == 1 && s.n0 > 1 && s.n1 > 1 && ti <= 65535 && tj <= 0x7fffffffLL) {
    dim3 grid((unsigned)tj, (unsigned)ti, (unsigned)(s.a < 65535 ? s.a : 65535));
    k_transpose_tile<T, ACC><<<grid, dim3(TILE, TILE_ROWS), 0, st>>>((const T *)x, (T *)y, s.a, s.n0, s.n1);
    TGC_LAUNCHED("transpose_tile");
    return TG_OK;
  }
  k_transpose<T, ACC><<<tgc_blocks(n, 256), 256, 0, st>>>((const T *)x, (T *)y, s, n);
  TGC_LAUNCHED("transpose");
  return TG_OK;
}

template <typename T, bool ACC>
__global__ void k_cols(long long rows, long long w, const T *__restrict__ src, long long sld, long long soff,
                       T *__restrict__ dst, long long dld, long long doff) {
  GRID_STRIDE(idx, rows * w) {
    long long r = idx / w, c = idx - r * w;
    put<T, ACC>(&dst[r * dld + doff + c], src[r * sld + soff + c]);
  }
}

// The same copy / add with N-element vectors: w, the leading dimensions and the offsets are
// multiples of N and both bases are vector-aligned (checked by the launcher). One 64-bit division
// per vector instead of per element.
template <typename T, bool ACC, int N>
__global__ void k_cols_vec(long long rows, long long wv, const T *__restrict__ src, long long sld, long long soff,
                           T *__restrict__ dst, long long dld, long long doff) {
  GRID_STRIDE(idx, rows * wv) {
    long long r = idx / wv, c = (idx - r * wv) * N;
    tgc_pack<T, N> a = *reinterpret_cast<const tgc_pack<T, N> *>(src + r * sld + soff + c);
    tgc_pack<T, N> *d = reinterpret_cast<tgc_pack<T, N> *>(dst + r * dld + doff + c);
    if (ACC) {
      tgc_pack<T, N> o = *d;
#pragma unroll
      for (int k = 0; k < N; k++)
        put<T, ACC>(&o.e[k], a.e[k]);
      *d = o;
    } else {
      *d = a;
    }
  }
}

template <typename T, bool ACC>
static tg_status cols_t(cudaStream_t st, long long rows, long long w, const void *src, long long sld, long long soff,
                        void *dst, long long dld, long long doff) {
  constexpr int N = 16 / (int)sizeof(T) > 1 ? 16 / (int)sizeof(T) : 1;
  if (N > 1 && w % N == 0 && sld % N == 0 && soff % N == 0 && dld % N == 0 && doff % N == 0 &&
      tgc_aligned(src, sizeof(T) * N) && tgc_aligned(dst, sizeof(T) * N)) {
    k_cols_vec<T, ACC, N>
        <<<tgc_blocks(rows * (w / N), 256), 256, 0, st>>>(rows, w / N, (const T *)src, sld, soff, (T *)dst, dld, doff);
    TGC_LAUNCHED("cols");
    return TG_OK;
  }
  k_cols<T, ACC><<<tgc_blocks(rows * w, 256), 256, 0, st>>>(rows, w, (const T *)src, sld, soff, (T *)dst, dld, doff);
  TGC_LAUNCHED("cols");
  return TG_OK;
}

// Copies dispatch on the element size, adds on the float dtype.
#define DISPATCH_MOVE(dt, acc, FN, ...)                                                                                \
  if (acc) {                                                                                                           \
    switch (dt) {                                                                                                      \
    case TG_F32: return FN<float, true>(__VA_ARGS__);                                                                  \
    case TG_F16: return FN<__half, true>(__VA_ARGS__);                                                                 \
    case TG_BF16: return FN<__nv_bfloat16, true>(__VA_ARGS__);                                                         \
    default:                                                                                                           \
      tgc_set_error("dtype %s has no CUDA gradient kernel for shape ops", tg_dtype_name(dt));                          \
      return TG_ERR_DTYPE;                                                                                             \
    }                                                                                                                  \
  }                                                                                                                    \
  switch (tg_dtype_size(dt)) {                                                                                         \
  case 1: return FN<unsigned char, false>(__VA_ARGS__);                                                                \
  case 2: return FN<unsigned short, false>(__VA_ARGS__);                                                               \
  case 4: return FN<unsigned int, false>(__VA_ARGS__);                                                                 \
  case 8: return FN<unsigned long long, false>(__VA_ARGS__);                                                           \
  default: tgc_set_error("dtype %d has no CUDA copy kernel", (int)dt); return TG_ERR_DTYPE;                            \
  }

extern "C" tg_status cuda_copy(tgc_stream s, void *dst, const void *src, size_t bytes) {
  TGC_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
  return TG_OK;
}

extern "C" tg_status cuda_transpose(tgc_stream s, tg_dtype dt, host_swap sw, const void *x, void *y, int accumulate) {
  DISPATCH_MOVE(dt, accumulate, transpose_t, s, sw, x, y)
}

extern "C" tg_status cuda_cols(tgc_stream s, tg_dtype dt, int64_t rows, int64_t w, const void *src, int64_t sld,
                               int64_t soff, void *dst, int64_t dld, int64_t doff, int accumulate) {
  DISPATCH_MOVE(dt, accumulate, cols_t, s, rows, w, src, sld, soff, dst, dld, doff)
}
