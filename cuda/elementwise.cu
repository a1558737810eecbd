// Elementwise ops and full reductions on the device. Math in f32 registers, storage in T.
#include "common.cuh"
#include "elementwise.h"

#define SQRT_2_OVER_PI 0.7978845608028654f

__device__ __forceinline__ float unary_f(int op, float a, float x) {
  switch (op) {
  case HOST_SCALE: return a * x;
  case HOST_RELU: return x > 0.f ? x : 0.f;
  case HOST_LEAKY_RELU: return x > 0.f ? x : a * x;
  case HOST_GELU: return 0.5f * x * (1.f + tanhf(SQRT_2_OVER_PI * (x + 0.044715f * x * x * x)));
  case HOST_TANH: return tanhf(x);
  case HOST_ELU: return x > 0.f ? x : a * expm1f(x);
  }
  return 0.f;
}

__device__ __forceinline__ float unary_df(int op, float a, float x, float y) {
  switch (op) {
  case HOST_SCALE: return a;
  case HOST_RELU: return x > 0.f ? 1.f : 0.f;
  case HOST_LEAKY_RELU: return x > 0.f ? 1.f : a;
  case HOST_GELU: {
    float u = SQRT_2_OVER_PI * (x + 0.044715f * x * x * x);
    float th = tanhf(u);
    float du = SQRT_2_OVER_PI * (1.f + 3.f * 0.044715f * x * x);
    // saturated tanh: the second term is 0 exactly (else 0 * inf = NaN once x^3 overflows, |x| > ~7e12)
    float s2 = 1.f - th * th;
    return 0.5f * (1.f + th) + (s2 == 0.f ? 0.f : 0.5f * x * s2 * du);
  }
  case HOST_TANH: return 1.f - y * y;
  case HOST_ELU: return x > 0.f ? 1.f : a * __expf(x);
  }
  return 0.f;
}

template <typename T>
__global__ void k_unary_fwd(int op, float al, const T *__restrict__ x, T *__restrict__ y, long long nv, long long n) {
  constexpr int N = tgc_vec_n<T>();
  TGC_VEC_LOOP(v, nv) {
    tgc_vec<T> a = reinterpret_cast<const tgc_vec<T> *>(x)[v], r;
#pragma unroll
    for (int k = 0; k < N; k++)
      r.e[k] = tgc_from_f<T>(unary_f(op, al, tgc_to_f(a.e[k])));
    reinterpret_cast<tgc_vec<T> *>(y)[v] = r;
  }
  TGC_TAIL_LOOP(i, nv * N, n) y[i] = tgc_from_f<T>(unary_f(op, al, tgc_to_f(x[i])));
}

template <typename T>
__global__ void k_unary_bwd(int op, float al, const T *__restrict__ x, const T *__restrict__ y,
                            const T *__restrict__ gy, T *__restrict__ gx, long long nv, long long n) {
  constexpr int N = tgc_vec_n<T>();
  const bool need_y = op == HOST_TANH; // the other ops' derivatives read x only
  TGC_VEC_LOOP(v, nv) {
    tgc_vec<T> a = reinterpret_cast<const tgc_vec<T> *>(x)[v], g = reinterpret_cast<const tgc_vec<T> *>(gy)[v],
               r = reinterpret_cast<tgc_vec<T> *>(gx)[v], b{};
    if (need_y) b = reinterpret_cast<const tgc_vec<T> *>(y)[v];
#pragma unroll
    for (int k = 0; k < N; k++) {
      float d = unary_df(op, al, tgc_to_f(a.e[k]), need_y ? tgc_to_f(b.e[k]) : 0.f);
      r.e[k] = tgc_from_f<T>(tgc_to_f(r.e[k]) + tgc_to_f(g.e[k]) * d);
    }
    reinterpret_cast<tgc_vec<T> *>(gx)[v] = r;
  }
  TGC_TAIL_LOOP(i, nv * N, n) {
    float d = unary_df(op, al, tgc_to_f(x[i]), need_y ? tgc_to_f(y[i]) : 0.f);
    gx[i] = tgc_from_f<T>(tgc_to_f(gx[i]) + tgc_to_f(gy[i]) * d);
  }
}

// ---------------------------------------------------------------- binary ops
// Plans (host/elementwise.h) pick the kernels: SAME and TRAIL run the bias-style kernels (operands
// read at i % n, 16-byte vectors), ROWS ([R, C] (op) [R, 1]) its own vectorised kernels, GENERAL
// per-element index arithmetic over up to TG_MAX_DIMS merged dims. Gradients of broadcast operands
// are reductions summed in f32 in a fixed order (no atomics): the same bits on every run.

__device__ __forceinline__ float binary_f(int op, float a, float b) {
  return op == HOST_ADD ? a + b : op == HOST_SUB ? a - b : a * b;
}

// y = a op b; a operand of na elements is read at i % na (na == n or na divides n; likewise b).
// The vector path needs na and nb to be multiples of N, so a vector never straddles a wrap.
template <typename T>
__global__ void k_binary_fwd(int op, const T *__restrict__ a, long long na, const T *__restrict__ b, long long nb,
                             T *__restrict__ y, long long nv, long long n) {
  constexpr int N = tgc_vec_n<T>();
  TGC_VEC_LOOP(v, nv) {
    long long i = v * N;
    tgc_vec<T> av = *reinterpret_cast<const tgc_vec<T> *>(a + (na == n ? i : i % na)),
               bv = *reinterpret_cast<const tgc_vec<T> *>(b + (nb == n ? i : i % nb)), r;
#pragma unroll
    for (int k = 0; k < N; k++)
      r.e[k] = tgc_from_f<T>(binary_f(op, tgc_to_f(av.e[k]), tgc_to_f(bv.e[k])));
    reinterpret_cast<tgc_vec<T> *>(y)[v] = r;
  }
  TGC_TAIL_LOOP(i, nv * N, n) {
    float av = tgc_to_f(a[na == n ? i : i % na]), bv = tgc_to_f(b[nb == n ? i : i % nb]);
    y[i] = tgc_from_f<T>(binary_f(op, av, bv));
  }
}

// d y / d (operand `which`) at element i: add 1, sub +1/-1, mul the other operand.
template <typename T>
__device__ __forceinline__ float dpart(int op, int which, const T *other, long long no, long long i) {
  if (op == HOST_MUL) return tgc_to_f(other[i % no]);
  return (op == HOST_SUB && which == 1) ? -1.f : 1.f;
}

// Full-size gradient of one operand: g[i] += gy[i] * d(i). `other` (no elements, read at i % no)
// is only read for mul; the vector path needs no to be a multiple of N.
template <typename T>
__global__ void k_binary_bwd_full(int op, int which, const T *__restrict__ other, long long no,
                                  const T *__restrict__ gy, T *__restrict__ g, long long nv, long long n) {
  constexpr int N = tgc_vec_n<T>();
  TGC_VEC_LOOP(v, nv) {
    long long i = v * N;
    tgc_vec<T> gv = reinterpret_cast<const tgc_vec<T> *>(gy)[v], r = reinterpret_cast<tgc_vec<T> *>(g)[v], ov{};
    if (op == HOST_MUL) ov = *reinterpret_cast<const tgc_vec<T> *>(other + (no == n ? i : i % no));
    const float c = (op == HOST_SUB && which == 1) ? -1.f : 1.f;
#pragma unroll
    for (int k = 0; k < N; k++)
      r.e[k] = tgc_from_f<T>(tgc_to_f(r.e[k]) + tgc_to_f(gv.e[k]) * (op == HOST_MUL ? tgc_to_f(ov.e[k]) : c));
    reinterpret_cast<tgc_vec<T> *>(g)[v] = r;
  }
  TGC_TAIL_LOOP(i, nv * N, n) g[i] = tgc_from_f<T>(tgc_to_f(g[i]) + tgc_to_f(gy[i]) * dpart(op, which, other, no, i));
}

// Trailing broadcast operand of ns elements: g[j] += sum over rows r of gy[r*ns + j] * d(r*ns + j).
// Block (x: columns, y: chunk of `per` rows) sums its rows in order into part[chunk * ns + j], or
// with one chunk adds into g itself.
template <typename T>
__global__ void k_binary_bwd_cols(int op, int which, const T *__restrict__ other, long long no,
                                  const T *__restrict__ gy, T *__restrict__ g, float *__restrict__ part, long long ns,
                                  long long rows, long long per) {
  long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (j >= ns) return;
  long long r0 = blockIdx.y * per, r1 = min(rows, r0 + per);
  float s = 0.f;
  for (long long r = r0; r < r1; r++) {
    long long i = r * ns + j;
    s += tgc_to_f(gy[i]) * dpart(op, which, other, no, i);
  }
  if (part)
    part[blockIdx.y * ns + j] = s;
  else
    g[j] = tgc_from_f<T>(tgc_to_f(g[j]) + s);
}

// g[j] += sum over chunks c of part[c * nx + j]: a warp per j, each lane adding its chunks in
// ascending order, then the fixed shuffle tree.
template <typename T>
__global__ void k_add_parts(const float *__restrict__ part, long long chunks, long long nx, T *__restrict__ g) {
  const int lane = threadIdx.x & 31;
  const long long warps = (long long)gridDim.x * (blockDim.x >> 5);
  for (long long j = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5; j < nx; j += warps) {
    float s = 0.f;
    for (long long c = lane; c < chunks; c += 32)
      s += part[c * nx + j];
    s = tgc_warp_sum(s);
    if (lane == 0) g[j] = tgc_from_f<T>(tgc_to_f(g[j]) + s);
  }
}

// Runs launch(part), a kernel that writes part[c * nx + j] for c < chunks, then adds the partial
// sums into g in a fixed order; with one chunk, launch(nullptr) adds into g itself.
template <typename T, typename F>
static tg_status with_parts(cudaStream_t s, long long chunks, long long nx, T *g, const char *what, F launch) {
  if (chunks <= 1) {
    launch(nullptr);
    TGC_LAUNCHED(what);
    return TG_OK;
  }
  float *part = nullptr;
  TGC_CUDA(cudaMallocAsync((void **)&part, (size_t)(chunks * nx) * sizeof(float), s));
  launch(part);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) {
    k_add_parts<T><<<tgc_blocks(nx * 32, 256), 256, 0, s>>>(part, chunks, nx, g);
    e = cudaGetLastError();
  }
  cudaError_t ef = cudaFreeAsync(part, s);
  if (e == cudaSuccess) e = ef;
  if (e != cudaSuccess) {
    tgc_set_error("kernel %s: %s", what, cudaGetErrorString(e));
    return tgc_status_of(e);
  }
  return TG_OK;
}

// Splits a reduction of length m for nx outputs into chunks so that about `units` work items exist,
// each at least `least` long; returns the chunk count and sets *per (elements per chunk).
static long long split_chunks(long long nx, long long m, long long units, long long least, long long cap,
                              long long *per) {
  long long chunks = (units + nx - 1) / nx, most = (m + least - 1) / least;
  if (chunks > most) chunks = most;
  if (chunks > cap) chunks = cap;
  if (chunks < 1) chunks = 1;
  *per = (m + chunks - 1) / chunks;
  return (m + *per - 1) / *per;
}

template <typename T>
static tg_status binary_bwd_one(cudaStream_t s, int op, int which, const T *other, long long no, const T *gy, T *g,
                                long long ng, long long n) {
  if (ng == n) {
    constexpr int N = tgc_vec_n<T>();
    long long nv = (op != HOST_MUL || no % N == 0) ? tgc_vec_count<T>(n, {op == HOST_MUL ? other : nullptr, gy, g}) : 0;
    k_binary_bwd_full<T><<<tgc_vec_blocks<T>(nv, n), 256, 0, s>>>(op, which, other, no, gy, g, nv, n);
    TGC_LAUNCHED("binary_bwd_full");
    return TG_OK;
  }
  // About 256K busy threads (enough to fill an H200), each summing at least 32 rows.
  long long rows = n / ng, cblocks = (ng + 255) / 256, per;
  long long chunks = split_chunks(ng, rows, 1024 * 256, 32, 65535, &per);
  dim3 grid((unsigned)cblocks, (unsigned)chunks);
  return with_parts(s, chunks, ng, g, "binary_bwd_cols", [&](float *part) {
    k_binary_bwd_cols<T><<<grid, 256, 0, s>>>(op, which, other, no, gy, g, part, ng, rows, per);
  });
}

template <typename T>
static tg_status binary_fwd(cudaStream_t s, int op, const void *a, long long na, const void *b, long long nb, void *y) {
  long long n = na > nb ? na : nb;
  constexpr int N = tgc_vec_n<T>();
  long long nv = (na % N == 0 && nb % N == 0) ? tgc_vec_count<T>(n, {a, b, y}) : 0;
  k_binary_fwd<T><<<tgc_vec_blocks<T>(nv, n), 256, 0, s>>>(op, (const T *)a, na, (const T *)b, nb, (T *)y, nv, n);
  TGC_LAUNCHED("binary_fwd");
  return TG_OK;
}

template <typename T>
static tg_status binary_bwd(cudaStream_t s, int op, const void *a, long long na, const void *b, long long nb,
                            const void *gy, void *ga, void *gb) {
  long long n = na > nb ? na : nb;
  tg_status st = TG_OK;
  if (ga) st = binary_bwd_one<T>(s, op, 0, (const T *)b, nb, (const T *)gy, (T *)ga, na, n);
  if (!st && gb) st = binary_bwd_one<T>(s, op, 1, (const T *)a, na, (const T *)gy, (T *)gb, nb, n);
  return st;
}

// ---- row scale: F [rows, cols] (op) w [rows, 1], or w (op) F when w_first. The vector paths need
// cols % N == 0, so a vector never straddles two rows.
template <typename T>
__global__ void k_rows_fwd(int op, int w_first, const T *__restrict__ F, const T *__restrict__ w, T *__restrict__ y,
                           long long cols, long long nv, long long n) {
  constexpr int N = tgc_vec_n<T>();
  TGC_VEC_LOOP(v, nv) {
    float wv = tgc_to_f(w[v * N / cols]);
    tgc_vec<T> f = reinterpret_cast<const tgc_vec<T> *>(F)[v], r;
#pragma unroll
    for (int k = 0; k < N; k++) {
      float x = tgc_to_f(f.e[k]);
      r.e[k] = tgc_from_f<T>(w_first ? binary_f(op, wv, x) : binary_f(op, x, wv));
    }
    reinterpret_cast<tgc_vec<T> *>(y)[v] = r;
  }
  TGC_TAIL_LOOP(i, nv * N, n) {
    float wv = tgc_to_f(w[i / cols]), x = tgc_to_f(F[i]);
    y[i] = tgc_from_f<T>(w_first ? binary_f(op, wv, x) : binary_f(op, x, wv));
  }
}

// gF[i] += gy[i] * d with d = w[i / cols] for mul, else the constant c (+1 or -1).
template <typename T>
__global__ void k_rows_bwd_full(int op, float c, const T *__restrict__ w, const T *__restrict__ gy, T *__restrict__ g,
                                long long cols, long long nv, long long n) {
  constexpr int N = tgc_vec_n<T>();
  TGC_VEC_LOOP(v, nv) {
    float d = op == HOST_MUL ? tgc_to_f(w[v * N / cols]) : c;
    tgc_vec<T> gv = reinterpret_cast<const tgc_vec<T> *>(gy)[v], r = reinterpret_cast<tgc_vec<T> *>(g)[v];
#pragma unroll
    for (int k = 0; k < N; k++)
      r.e[k] = tgc_from_f<T>(tgc_to_f(r.e[k]) + tgc_to_f(gv.e[k]) * d);
    reinterpret_cast<tgc_vec<T> *>(g)[v] = r;
  }
  TGC_TAIL_LOOP(i, nv * N, n) {
    float d = op == HOST_MUL ? tgc_to_f(w[i / cols]) : c;
    g[i] = tgc_from_f<T>(tgc_to_f(g[i]) + tgc_to_f(gy[i]) * d);
  }
}

// gw[r] += c * sum_k gy[r, k] (add, sub) or sum_k gy[r, k] F[r, k] (mul, c = 1). blockDim.x threads
// per row (a warp, or the whole block for long rows), each adding its columns in order, then the
// fixed tree of tgc_row_sum. vec: cols % N == 0 and gy, F 16-byte aligned.
template <typename T>
__global__ void k_rows_bwd_sum(int op, float c, const T *__restrict__ F, const T *__restrict__ gy, T *__restrict__ gw,
                               long long rows, long long cols, int vec) {
  constexpr int N = tgc_vec_n<T>();
  for (long long r = blockIdx.x * (long long)blockDim.y + threadIdx.y; r < rows;
       r += (long long)gridDim.x * blockDim.y) {
    const T *gr = gy + r * cols, *fr = F + r * cols;
    float s = 0.f;
    if (vec) {
      for (long long v = threadIdx.x; v < cols / N; v += blockDim.x) {
        tgc_vec<T> gv = reinterpret_cast<const tgc_vec<T> *>(gr)[v], fv{};
        if (op == HOST_MUL) fv = reinterpret_cast<const tgc_vec<T> *>(fr)[v];
#pragma unroll
        for (int k = 0; k < N; k++)
          s += tgc_to_f(gv.e[k]) * (op == HOST_MUL ? tgc_to_f(fv.e[k]) : 1.f);
      }
    } else {
      for (long long k = threadIdx.x; k < cols; k += blockDim.x)
        s += tgc_to_f(gr[k]) * (op == HOST_MUL ? tgc_to_f(fr[k]) : 1.f);
    }
    s = tgc_row_sum(s);
    if (threadIdx.x == 0) gw[r] = tgc_from_f<T>(tgc_to_f(gw[r]) + c * s);
  }
}

// ---- general plans
// Element offsets (o0, o1) of the row-major index i over nd dims of sizes shape with strides s0, s1.
__device__ __forceinline__ void bc_offsets(long long i, int nd, const int64_t *shape, const int64_t *s0,
                                           const int64_t *s1, long long &o0, long long &o1) {
  o0 = o1 = 0;
#pragma unroll
  for (int d = TG_MAX_DIMS - 1; d >= 0; d--)
    if (d < nd) {
      long long q = i / shape[d], r = i - q * shape[d];
      o0 += r * s0[d];
      o1 += r * s1[d];
      i = q;
    }
}

template <typename T>
__global__ void k_bc_fwd(int op, host_bcast p, const T *__restrict__ a, const T *__restrict__ b, T *__restrict__ y) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < p.n;
       i += (long long)gridDim.x * blockDim.x) {
    long long ia, ib;
    bc_offsets(i, p.ndim, p.shape, p.sa, p.sb, ia, ib);
    y[i] = tgc_from_f<T>(binary_f(op, tgc_to_f(a[ia]), tgc_to_f(b[ib])));
  }
}

// One operand x's gradient in a plan: gx[j] = sum over k of gy[.] * d(other[.]). The outer dims are
// x's present dims (row-major, so j counts x's elements), the inner dims its broadcast ones (k); each
// carries its stride in y and in the other operand.
struct BcRed {
  int no, ni;
  int64_t os[TG_MAX_DIMS], oy[TG_MAX_DIMS], oo[TG_MAX_DIMS];
  int64_t is[TG_MAX_DIMS], iy[TG_MAX_DIMS], io[TG_MAX_DIMS];
  long long nx, m;
};

static BcRed bc_red(const host_bcast *p, int which) {
  const int64_t *sx = which ? p->sb : p->sa, *so = which ? p->sa : p->sb;
  BcRed g{};
  g.nx = 1;
  int64_t ys[TG_MAX_DIMS], sy = 1;
  for (int d = p->ndim - 1; d >= 0; d--) {
    ys[d] = sy;
    sy *= p->shape[d];
  }
  for (int d = 0; d < p->ndim; d++) {
    if (sx[d]) {
      g.os[g.no] = p->shape[d], g.oy[g.no] = ys[d], g.oo[g.no] = so[d], g.no++;
      g.nx *= p->shape[d];
    } else {
      g.is[g.ni] = p->shape[d], g.iy[g.ni] = ys[d], g.io[g.ni] = so[d], g.ni++;
    }
  }
  g.m = p->n / g.nx;
  return g;
}

// Partial sum of chunk ch (k in [ch * per, min(m, ch * per + per))) for output j, k stepping by `step`
// from lane. c: the derivative for add / sub (+1 or -1); mul reads the other operand.
template <typename T>
__device__ __forceinline__ float bc_red_part(int op, float c, const BcRed &g, const T *other, const T *gy, long long j,
                                             long long ch, long long per, int lane, int step) {
  long long yo, oo;
  bc_offsets(j, g.no, g.os, g.oy, g.oo, yo, oo);
  long long k1 = min(g.m, ch * per + per);
  float s = 0.f;
  for (long long k = ch * per + lane; k < k1; k += step) {
    long long yi, oi;
    bc_offsets(k, g.ni, g.is, g.iy, g.io, yi, oi);
    s += tgc_to_f(gy[yo + yi]) * (op == HOST_MUL ? tgc_to_f(other[oo + oi]) : c);
  }
  return s;
}

// A thread per (j, chunk): for x's last dim present, so neighbouring threads read neighbouring gy.
template <typename T>
__global__ void k_bc_red_thread(int op, float c, BcRed g, const T *__restrict__ other, const T *__restrict__ gy,
                                T *__restrict__ gx, float *__restrict__ part, long long chunks, long long per) {
  for (long long u = blockIdx.x * (long long)blockDim.x + threadIdx.x; u < g.nx * chunks;
       u += (long long)gridDim.x * blockDim.x) {
    long long j = u % g.nx, ch = u / g.nx;
    float s = bc_red_part(op, c, g, other, gy, j, ch, per, 0, 1);
    if (part)
      part[u] = s;
    else
      gx[j] = tgc_from_f<T>(tgc_to_f(gx[j]) + s);
  }
}

// A warp per (j, chunk): for x's last dim broadcast, so the lanes read neighbouring gy.
template <typename T>
__global__ void k_bc_red_warp(int op, float c, BcRed g, const T *__restrict__ other, const T *__restrict__ gy,
                              T *__restrict__ gx, float *__restrict__ part, long long chunks, long long per) {
  const int lane = threadIdx.x & 31;
  const long long warps = (long long)gridDim.x * (blockDim.x >> 5);
  for (long long u = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5; u < g.nx * chunks; u += warps) {
    long long j = u % g.nx, ch = u / g.nx;
    float s = tgc_warp_sum(bc_red_part(op, c, g, other, gy, j, ch, per, lane, 32));
    if (lane == 0) {
      if (part)
        part[u] = s;
      else
        gx[j] = tgc_from_f<T>(tgc_to_f(gx[j]) + s);
    }
  }
}

template <typename T>
static tg_status bc_bwd_general(cudaStream_t s, int op, int which, const host_bcast *p, const T *other, const T *gy,
                                T *gx) {
  BcRed g = bc_red(p, which);
  const float c = (op == HOST_SUB && which == 1) ? -1.f : 1.f;
  const int64_t *sx = which ? p->sb : p->sa;
  long long per;
  // A thread per output when x's last dim is present (coalesced across outputs) and there are
  // outputs enough; else a warp per output with the lanes along the reduced elements.
  if (sx[p->ndim - 1] && g.nx >= 32) { // about 256K threads, each summing at least 32 elements
    long long chunks = split_chunks(g.nx, g.m, 1024 * 256, 32, 1LL << 20, &per);
    return with_parts(s, chunks, g.nx, gx, "bc_red_thread", [&](float *part) {
      k_bc_red_thread<T><<<tgc_blocks(g.nx * chunks, 256), 256, 0, s>>>(op, c, g, other, gy, gx, part, chunks, per);
    });
  }
  long long chunks = split_chunks(g.nx, g.m, 1024 * 8, 256, 1LL << 20, &per); // about 8192 warps, >= 256 each
  return with_parts(s, chunks, g.nx, gx, "bc_red_warp", [&](float *part) {
    k_bc_red_warp<T><<<tgc_blocks(g.nx * chunks * 32, 256), 256, 0, s>>>(op, c, g, other, gy, gx, part, chunks, per);
  });
}

template <typename T>
static tg_status binary_fwd_bc(cudaStream_t s, int op, const host_bcast *p, const void *a, const void *b, void *y) {
  if (p->kind == HOST_BC_SAME || p->kind == HOST_BC_TRAIL) return binary_fwd<T>(s, op, a, p->na, b, p->nb, y);
  if (p->kind == HOST_BC_ROWS) {
    const void *F = p->row_operand ? a : b, *w = p->row_operand ? b : a;
    long long nv = p->cols % tgc_vec_n<T>() == 0 ? tgc_vec_count<T>(p->n, {F, y}) : 0;
    k_rows_fwd<T><<<tgc_vec_blocks<T>(nv, p->n), 256, 0, s>>>(op, p->row_operand == 0, (const T *)F, (const T *)w,
                                                              (T *)y, p->cols, nv, p->n);
    TGC_LAUNCHED("rows_fwd");
    return TG_OK;
  }
  k_bc_fwd<T><<<tgc_blocks(p->n, 256), 256, 0, s>>>(op, *p, (const T *)a, (const T *)b, (T *)y);
  TGC_LAUNCHED("bc_fwd");
  return TG_OK;
}

// ROWS backward. The [rows, cols] operand's gradient is elementwise; the [rows, 1] one's is a row
// sum, by the row kernel when there are rows enough to fill the device, else by the general
// reduction, which also splits long rows into chunks.
template <typename T>
static tg_status rows_bwd(cudaStream_t s, int op, const host_bcast *p, const T *a, const T *b, const T *gy, T *ga,
                          T *gb) {
  const int wi = p->row_operand, fi = 1 - wi; // operand index of w ([rows, 1]) and F ([rows, cols])
  const T *w = wi ? b : a, *F = wi ? a : b;
  T *gw = wi ? gb : ga, *gF = wi ? ga : gb;
  constexpr int N = tgc_vec_n<T>();
  if (gF) {
    float c = (op == HOST_SUB && fi == 1) ? -1.f : 1.f;
    long long nv = p->cols % N == 0 ? tgc_vec_count<T>(p->n, {gy, gF}) : 0;
    k_rows_bwd_full<T><<<tgc_vec_blocks<T>(nv, p->n), 256, 0, s>>>(op, c, w, gy, gF, p->cols, nv, p->n);
    TGC_LAUNCHED("rows_bwd_full");
  }
  if (!gw) return TG_OK;
  if (p->rows < 1024) return bc_bwd_general<T>(s, op, wi, p, F, gy, gw);
  float c = (op == HOST_SUB && wi == 1) ? -1.f : 1.f;
  int vec = p->cols % N == 0 && tgc_vec_count<T>(p->n, {gy, op == HOST_MUL ? F : nullptr}) > 0;
  dim3 block = p->cols >= 1024 ? dim3(256, 1) : dim3(32, 8);
  k_rows_bwd_sum<T><<<tgc_blocks(p->rows, (int)block.y), block, 0, s>>>(op, c, F, gy, gw, p->rows, p->cols, vec);
  TGC_LAUNCHED("rows_bwd_sum");
  return TG_OK;
}

template <typename T>
static tg_status binary_bwd_bc(cudaStream_t s, int op, const host_bcast *p, const void *a, const void *b,
                               const void *gy, void *ga, void *gb) {
  if (p->kind == HOST_BC_SAME || p->kind == HOST_BC_TRAIL) {
    // The column kernel wants columns enough to keep its threads busy: a small broadcast operand
    // (a scalar, [..., 3] (+) [3]) takes the general reduction's warps instead.
    tg_status st = TG_OK;
    if (ga)
      st = p->na < 32 && p->na < p->n
               ? bc_bwd_general<T>(s, op, 0, p, (const T *)b, (const T *)gy, (T *)ga)
               : binary_bwd_one<T>(s, op, 0, (const T *)b, p->nb, (const T *)gy, (T *)ga, p->na, p->n);
    if (!st && gb)
      st = p->nb < 32 && p->nb < p->n
               ? bc_bwd_general<T>(s, op, 1, p, (const T *)a, (const T *)gy, (T *)gb)
               : binary_bwd_one<T>(s, op, 1, (const T *)a, p->na, (const T *)gy, (T *)gb, p->nb, p->n);
    return st;
  }
  if (p->kind == HOST_BC_ROWS)
    return rows_bwd<T>(s, op, p, (const T *)a, (const T *)b, (const T *)gy, (T *)ga, (T *)gb);
  tg_status st = TG_OK;
  if (ga) st = bc_bwd_general<T>(s, op, 0, p, (const T *)b, (const T *)gy, (T *)ga);
  if (!st && gb) st = bc_bwd_general<T>(s, op, 1, p, (const T *)a, (const T *)gy, (T *)gb);
  return st;
}

#define DISPATCH(dt, FN, ...) TGC_DISPATCH_FLOAT(dt, "elementwise", FN, __VA_ARGS__)

extern "C" tg_status cuda_binary_forward_bc(tgc_stream s, tg_dtype dt, host_binary_op op, const host_bcast *p,
                                            const void *a, const void *b, void *y) {
  DISPATCH(dt, binary_fwd_bc, s, op, p, a, b, y)
}

extern "C" tg_status cuda_binary_backward_bc(tgc_stream s, tg_dtype dt, host_binary_op op, const host_bcast *p,
                                             const void *a, const void *b, const void *gy, void *ga, void *gb) {
  DISPATCH(dt, binary_bwd_bc, s, op, p, a, b, gy, ga, gb)
}

extern "C" tg_status cuda_binary_forward(tgc_stream s, tg_dtype dt, host_binary_op op, const void *a, int64_t na,
                                         const void *b, int64_t nb, void *y) {
  DISPATCH(dt, binary_fwd, s, op, a, na, b, nb, y)
}

extern "C" tg_status cuda_binary_backward(tgc_stream s, tg_dtype dt, host_binary_op op, const void *a, int64_t na,
                                          const void *b, int64_t nb, const void *gy, void *ga, void *gb) {
  DISPATCH(dt, binary_bwd, s, op, a, na, b, nb, gy, ga, gb)
}

template <typename T>
static tg_status unary_fwd(cudaStream_t s, int op, double al, const void *x, void *y, long long n) {
  long long nv = tgc_vec_count<T>(n, {x, y});
  k_unary_fwd<T><<<tgc_vec_blocks<T>(nv, n), 256, 0, s>>>(op, (float)al, (const T *)x, (T *)y, nv, n);
  TGC_LAUNCHED("unary_fwd");
  return TG_OK;
}
template <typename T>
static tg_status unary_bwd(cudaStream_t s, int op, double al, const void *x, const void *y, const void *gy, void *gx,
                           long long n) {
  long long nv = tgc_vec_count<T>(n, {x, op == HOST_TANH ? y : nullptr, gy, gx});
  k_unary_bwd<T><<<tgc_vec_blocks<T>(nv, n), 256, 0, s>>>(op, (float)al, (const T *)x, (const T *)y, (const T *)gy,
                                                          (T *)gx, nv, n);
  TGC_LAUNCHED("unary_bwd");
  return TG_OK;
}

extern "C" tg_status cuda_unary_forward(tgc_stream s, tg_dtype dt, host_unary_op op, double alpha, const void *x,
                                        void *y, int64_t n) {
  DISPATCH(dt, unary_fwd, s, op, alpha, x, y, n)
}
extern "C" tg_status cuda_unary_backward(tgc_stream s, tg_dtype dt, host_unary_op op, double alpha, const void *x,
                                         const void *y, const void *gy, void *gx, int64_t n) {
  DISPATCH(dt, unary_bwd, s, op, alpha, x, y, gy, gx, n)
}

// ---------------------------------------------------------------- sum
// Sum: each thread adds 16-byte vectors (8 bf16/f16 or 4 f32) two at a time, so enough loads are in
// flight to keep HBM busy; per-block partials in f32, then one block adds them in a fixed order
// (deterministic). A misaligned start falls back to scalar loads.
template <typename T> struct alignas(16) pack16 {
  static constexpr int n = 16 / (int)sizeof(T);
  T e[16 / sizeof(T)];
};

template <typename T> __device__ __forceinline__ float pack_sum(uint4 u) {
  pack16<T> v;
  memcpy(&v, &u, 16);
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < pack16<T>::n; k++)
    s += tgc_to_f(v.e[k]);
  return s;
}

template <typename T> __global__ void k_sum_partial(const T *__restrict__ x, long long n, float *__restrict__ part) {
  __shared__ float sh[32];
  constexpr int V = pack16<T>::n;
  long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x, stride = (long long)gridDim.x * blockDim.x;
  long long nv = ((uintptr_t)x % 16 == 0) ? n / V : 0; // whole vectors
  const uint4 *xv = reinterpret_cast<const uint4 *>(x);
  float s0 = 0.f, s1 = 0.f;
  long long i = tid;
  for (; i + stride < nv; i += 2 * stride) {
    uint4 a = __ldg(xv + i), b = __ldg(xv + i + stride);
    s0 += pack_sum<T>(a);
    s1 += pack_sum<T>(b);
  }
  if (i < nv) s0 += pack_sum<T>(__ldg(xv + i));
  for (long long k = nv * V + tid; k < n; k += stride)
    s1 += tgc_to_f(x[k]); // tail (or everything)
  float s = s0 + s1;
  for (int o = 16; o; o >>= 1)
    s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = threadIdx.x < (blockDim.x >> 5) ? sh[threadIdx.x] : 0.f;
    for (int o = 16; o; o >>= 1)
      s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
  }
}

// Deterministic: one block adds the partials in a fixed order.
template <typename T> __global__ void k_sum_final(const float *__restrict__ part, int np, float alpha, T *y) {
  __shared__ float sh[32];
  float s = 0.f;
  for (int i = threadIdx.x; i < np; i += blockDim.x)
    s += part[i];
  for (int o = 16; o; o >>= 1)
    s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = threadIdx.x < (blockDim.x >> 5) ? sh[threadIdx.x] : 0.f;
    for (int o = 16; o; o >>= 1)
      s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x == 0) *y = tgc_from_f<T>(alpha * s);
  }
}

template <typename T> static tg_status sum_fwd(cudaStream_t s, const void *x, long long n, double alpha, void *y) {
  // 1024 blocks of 256 threads fill an H100/H200 (8 blocks on each of 132 SMs); fewer for small n
  int blocks = (int)tgc_blocks((n + pack16<T>::n - 1) / pack16<T>::n, 256, 1024);
  float *part = nullptr;
  TGC_CUDA(cudaMallocAsync((void **)&part, blocks * sizeof(float), s));
  k_sum_partial<T><<<blocks, 256, 0, s>>>((const T *)x, n, part);
  k_sum_final<T><<<1, 1024, 0, s>>>(part, blocks, (float)alpha, (T *)y);
  cudaError_t e = cudaGetLastError();
  cudaFreeAsync(part, s);
  if (e != cudaSuccess) {
    tgc_set_error("sum: %s", cudaGetErrorString(e));
    return tgc_status_of(e);
  }
  return TG_OK;
}

// Backward of sum: gx[i] (+)= g with g = alpha * (gy_dev ? *gy_dev : gy_host). Overwriting (add = 0)
// only writes, 16 bytes per store; gx comes from the arena or cudaMalloc, so it is 16-byte aligned
// in practice, and a misaligned one takes the scalar loop.
template <typename T>
__global__ void k_sum_bwd(const T *gy_dev, float gy_host, float alpha, long long n, int add, T *__restrict__ gx) {
  constexpr int V = pack16<T>::n;
  float g = alpha * (gy_dev ? tgc_to_f(gy_dev[0]) : gy_host);
  long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x, stride = (long long)gridDim.x * blockDim.x;
  long long nv = ((uintptr_t)gx % 16 == 0) ? n / V : 0;
  uint4 *xv = reinterpret_cast<uint4 *>(gx);
  T gt = tgc_from_f<T>(g);
  pack16<T> c;
#pragma unroll
  for (int k = 0; k < V; k++)
    c.e[k] = gt;
  uint4 cu;
  memcpy(&cu, &c, 16);
  for (long long i = tid; i < nv; i += stride) {
    if (add) {
      uint4 u = xv[i];
      pack16<T> v;
      memcpy(&v, &u, 16);
#pragma unroll
      for (int k = 0; k < V; k++)
        v.e[k] = tgc_from_f<T>(tgc_to_f(v.e[k]) + g);
      memcpy(&u, &v, 16);
      xv[i] = u;
    } else {
      xv[i] = cu;
    }
  }
  for (long long i = nv * V + tid; i < n; i += stride)
    gx[i] = add ? tgc_from_f<T>(tgc_to_f(gx[i]) + g) : gt;
}

template <typename T>
static tg_status sum_bwd(cudaStream_t s, const void *gy_dev, double gy_host, long long n, double alpha, int add,
                         void *gx) {
  k_sum_bwd<T><<<tgc_blocks((n + pack16<T>::n - 1) / pack16<T>::n, 256), 256, 0, s>>>((const T *)gy_dev, (float)gy_host,
                                                                                      (float)alpha, n, add, (T *)gx);
  TGC_LAUNCHED("sum_bwd");
  return TG_OK;
}

extern "C" tg_status cuda_sum_forward(tgc_stream s, tg_dtype dt, const void *x, int64_t n, double alpha, void *y) {
  DISPATCH(dt, sum_fwd, s, x, n, alpha, y)
}
extern "C" tg_status cuda_sum_backward(tgc_stream s, tg_dtype dt, const void *gy, int64_t n, double alpha, void *gx) {
  DISPATCH(dt, sum_bwd, s, gy, 0.0, n, alpha, 1, gx)
}
// gx (+)= alpha * gy where gy is a device scalar (gy_dev) or, when gy_dev is NULL, the host value gy_host
// (no copy, no sync); add = 0 overwrites gx without reading it. (Declared in ops/reduce.c.)
extern "C" tg_status cuda_sum_backward_ex(tgc_stream s, tg_dtype dt, const void *gy_dev, double gy_host, int64_t n,
                                          double alpha, int add, void *gx) {
  DISPATCH(dt, sum_bwd, s, gy_dev, gy_host, n, alpha, add, gx)
}
