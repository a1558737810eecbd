// Binary elementwise ops with NumPy broadcasting on the device (cuda/elementwise.h). Math in f32
// registers, storage in T.
#include "common.cuh"
#include "elementwise.h"
#include "finite.cuh"

// ---------------------------------------------------------------- binary ops
// Plans (host/elementwise.h) pick the kernels: SAME and TRAIL run the bias-style kernels (operands
// read at i % n, 16-byte vectors), ROWS ([R, C] (op) [R, 1]) its own vectorised kernels, GENERAL
// per-element index arithmetic over up to TG_MAX_DIMS merged dims. Gradients of broadcast operands
// are reductions summed in f32 in a fixed order (no atomics): the same bits on every run.

__device__ __forceinline__ float binary_f(int op, float a, float b) {
  return op == HOST_ADD ? a + b : op == HOST_SUB ? a - b : a * b;
}

// y = a op b; a operand of na elements is read at i % na (na == n or na divides n; likewise b).
// The vector path needs na and nb to be multiples of N, so a vector never straddles a wrap. Every
// element stored is tested for anomaly mode (nf, finite.cuh), as in k_binary_bwd_full.
template <typename T>
__global__ void k_binary_fwd(int op, const T *__restrict__ a, long long na, const T *__restrict__ b, long long nb,
                             T *__restrict__ y, long long nv, long long n, tgc_nf nf) {
  constexpr int N = tgc_vec_n<T>();
  bool bad = false;
  TGC_VEC_LOOP(v, nv) {
    long long i = v * N;
    tgc_vec<T> av = *reinterpret_cast<const tgc_vec<T> *>(a + (na == n ? i : i % na)),
               bv = *reinterpret_cast<const tgc_vec<T> *>(b + (nb == n ? i : i % nb)), r;
#pragma unroll
    for (int k = 0; k < N; k++) {
      r.e[k] = tgc_from_f<T>(binary_f(op, tgc_to_f(av.e[k]), tgc_to_f(bv.e[k])));
      bad |= tgc_nonfinite(r.e[k]);
    }
    reinterpret_cast<tgc_vec<T> *>(y)[v] = r;
  }
  TGC_TAIL_LOOP(i, nv * N, n) {
    float av = tgc_to_f(a[na == n ? i : i % na]), bv = tgc_to_f(b[nb == n ? i : i % nb]);
    T r = tgc_from_f<T>(binary_f(op, av, bv));
    bad |= tgc_nonfinite(r);
    y[i] = r;
  }
  tgc_nf_raise(nf, bad);
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
                                  const T *__restrict__ gy, T *__restrict__ g, long long nv, long long n, tgc_nf nf) {
  constexpr int N = tgc_vec_n<T>();
  bool bad = false;
  TGC_VEC_LOOP(v, nv) {
    long long i = v * N;
    tgc_vec<T> gv = reinterpret_cast<const tgc_vec<T> *>(gy)[v], r = reinterpret_cast<tgc_vec<T> *>(g)[v], ov{};
    if (op == HOST_MUL) ov = *reinterpret_cast<const tgc_vec<T> *>(other + (no == n ? i : i % no));
    const float c = (op == HOST_SUB && which == 1) ? -1.f : 1.f;
#pragma unroll
    for (int k = 0; k < N; k++) {
      r.e[k] = tgc_from_f<T>(tgc_to_f(r.e[k]) + tgc_to_f(gv.e[k]) * (op == HOST_MUL ? tgc_to_f(ov.e[k]) : c));
      bad |= tgc_nonfinite(r.e[k]);
    }
    reinterpret_cast<tgc_vec<T> *>(g)[v] = r;
  }
  TGC_TAIL_LOOP(i, nv * N, n) {
    T r = tgc_from_f<T>(tgc_to_f(g[i]) + tgc_to_f(gy[i]) * dpart(op, which, other, no, i));
    bad |= tgc_nonfinite(r);
    g[i] = r;
  }
  tgc_nf_raise(nf, bad);
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
static tg_status binary_fwd(cudaStream_t s, int op, const void *a, long long na, const void *b, long long nb, void *y) {
  long long n = na > nb ? na : nb;
  constexpr int N = tgc_vec_n<T>();
  long long nv = (na % N == 0 && nb % N == 0) ? tgc_vec_count<T>(n, {a, b, y}) : 0;
  tgc_nf nf = tgc_nf_take(s);
  k_binary_fwd<T><<<tgc_vec_blocks<T>(nv, n), 256, 0, s>>>(op, (const T *)a, na, (const T *)b, nb, (T *)y, nv, n, nf);
  TGC_LAUNCHED("binary_fwd");
  tgc_nf_cover(nf, y, n);
  return TG_OK;
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

// ---- backward plans. Each wanted gradient takes one path. A reduction split into chunks writes
// f32 partial sums part[c * nx + j] to the caller's workspace and k_add_parts adds them into the
// gradient in a fixed order; the two gradients run one after the other on the stream, so they
// share the workspace.
enum { BW_FULL, BW_COLS, BW_ROWSUM, BW_THREAD, BW_WARP };
struct BwPlan {
  int path;
  long long nx, chunks, per; // gradient elements; chunks per element and reduced elements per chunk
};

static BwPlan bw_plan(const host_bcast *p, int which) {
  BwPlan r{};
  r.nx = which ? p->nb : p->na;
  r.chunks = 1;
  if (p->kind == HOST_BC_SAME || p->kind == HOST_BC_TRAIL) {
    if (r.nx == p->n) {
      r.path = BW_FULL;
      return r;
    }
    // Column sums want columns enough to keep their threads busy: a small broadcast operand (a
    // scalar, [..., 3] (+) [3]) takes the general reduction's warps instead. About 256K busy
    // threads (enough to fill an H200), each summing at least 32 rows.
    if (r.nx >= 32) {
      r.path = BW_COLS;
      r.chunks = split_chunks(r.nx, p->n / r.nx, 1024 * 256, 32, 65535, &r.per);
      return r;
    }
  } else if (p->kind == HOST_BC_ROWS) {
    // The [rows, cols] operand's gradient is elementwise; the [rows, 1] one's a row sum, by the row
    // kernel when there are rows enough to fill the device, else by the general reduction, which
    // also splits long rows into chunks.
    if (which != p->row_operand) {
      r.path = BW_FULL;
      return r;
    }
    if (p->rows >= 1024) {
      r.path = BW_ROWSUM;
      return r;
    }
  }
  // A thread per output when x's last dim is present (coalesced across outputs) and there are
  // outputs enough, each summing at least 32 elements, about 256K threads; else a warp per output
  // with the lanes along the reduced elements, about 8192 warps summing at least 256 each.
  const BcRed g = bc_red(p, which);
  const int64_t *sx = which ? p->sb : p->sa;
  if (sx[p->ndim - 1] && g.nx >= 32) {
    r.path = BW_THREAD;
    r.chunks = split_chunks(g.nx, g.m, 1024 * 256, 32, 1LL << 20, &r.per);
  } else {
    r.path = BW_WARP;
    r.chunks = split_chunks(g.nx, g.m, 1024 * 8, 256, 1LL << 20, &r.per);
  }
  return r;
}

static size_t bw_workspace(const BwPlan &r) { return r.chunks > 1 ? (size_t)(r.chunks * r.nx) * sizeof(float) : 0; }

// The gradient of operand `which` (x) by its plan: g += reduce(gy * dy/dx). a, b: the operands.
template <typename T>
static tg_status bw_one(cudaStream_t s, int op, int which, const host_bcast *p, const BwPlan &r, const T *a, const T *b,
                        const T *gy, T *g, float *ws) {
  constexpr int N = tgc_vec_n<T>();
  const T *other = which ? a : b;
  const long long no = which ? p->na : p->nb;
  const float c = (op == HOST_SUB && which == 1) ? -1.f : 1.f;
  float *part = r.chunks > 1 ? ws : nullptr;
  const char *what = "";
  switch (r.path) {
  case BW_FULL:
    if (p->kind == HOST_BC_ROWS) { // g is F's gradient; other is w ([rows, 1])
      long long nv = p->cols % N == 0 ? tgc_vec_count<T>(p->n, {gy, g}) : 0;
      k_rows_bwd_full<T><<<tgc_vec_blocks<T>(nv, p->n), 256, 0, s>>>(op, c, other, gy, g, p->cols, nv, p->n);
      what = "rows_bwd_full";
    } else {
      long long nv =
          (op != HOST_MUL || no % N == 0) ? tgc_vec_count<T>(p->n, {op == HOST_MUL ? other : nullptr, gy, g}) : 0;
      tgc_nf nf = tgc_nf_take(s);
      k_binary_bwd_full<T><<<tgc_vec_blocks<T>(nv, p->n), 256, 0, s>>>(op, which, other, no, gy, g, nv, p->n, nf);
      TGC_LAUNCHED("binary_bwd_full");
      tgc_nf_cover(nf, g, p->n);
      what = "binary_bwd_full";
    }
    break;
  case BW_COLS: {
    dim3 grid((unsigned)((r.nx + 255) / 256), (unsigned)r.chunks);
    k_binary_bwd_cols<T><<<grid, 256, 0, s>>>(op, which, other, no, gy, g, part, r.nx, p->n / r.nx, r.per);
    what = "binary_bwd_cols";
    break;
  }
  case BW_ROWSUM: { // g is w's gradient; other is F ([rows, cols])
    int vec = p->cols % N == 0 && tgc_vec_count<T>(p->n, {gy, op == HOST_MUL ? other : nullptr}) > 0;
    dim3 block = p->cols >= 1024 ? dim3(256, 1) : dim3(32, 8);
    k_rows_bwd_sum<T><<<tgc_blocks(p->rows, (int)block.y), block, 0, s>>>(op, c, other, gy, g, p->rows, p->cols, vec);
    what = "rows_bwd_sum";
    break;
  }
  case BW_THREAD: {
    const BcRed gr = bc_red(p, which);
    k_bc_red_thread<T><<<tgc_blocks(r.nx * r.chunks, 256), 256, 0, s>>>(op, c, gr, other, gy, g, part, r.chunks, r.per);
    what = "bc_red_thread";
    break;
  }
  default: {
    const BcRed gr = bc_red(p, which);
    k_bc_red_warp<T>
        <<<tgc_blocks(r.nx * r.chunks * 32, 256), 256, 0, s>>>(op, c, gr, other, gy, g, part, r.chunks, r.per);
    what = "bc_red_warp";
  }
  }
  TGC_LAUNCHED(what);
  if (part) {
    k_add_parts<T><<<tgc_blocks(r.nx * 32, 256), 256, 0, s>>>(part, r.chunks, r.nx, g);
    TGC_LAUNCHED("add_parts");
  }
  return TG_OK;
}

static size_t bw_workspace_of(const host_bcast *p, int want_a, int want_b) {
  size_t wa = want_a ? bw_workspace(bw_plan(p, 0)) : 0, wb = want_b ? bw_workspace(bw_plan(p, 1)) : 0;
  return wa > wb ? wa : wb;
}

template <typename T>
static tg_status binary_bwd_bc(cudaStream_t s, int op, const host_bcast *p, const void *a, const void *b,
                               const void *gy, void *ga, void *gb, void *ws, size_t ws_bytes) {
  const size_t need = bw_workspace_of(p, ga != nullptr, gb != nullptr);
  if (need > 0 && (!ws || ws_bytes < need || (uintptr_t)ws % alignof(float))) {
    tgc_set_error("binary backward: workspace %p of %zu bytes; this plan needs %zu bytes, 4-byte aligned "
                  "(cuda_binary_backward_bc_workspace)",
                  ws, ws_bytes, need);
    return TG_ERR_INVALID_ARGUMENT;
  }
  tg_status st = TG_OK;
  if (ga) st = bw_one<T>(s, op, 0, p, bw_plan(p, 0), (const T *)a, (const T *)b, (const T *)gy, (T *)ga, (float *)ws);
  if (!st && gb)
    st = bw_one<T>(s, op, 1, p, bw_plan(p, 1), (const T *)a, (const T *)b, (const T *)gy, (T *)gb, (float *)ws);
  return st;
}

#define DISPATCH(dt, FN, ...) TGC_DISPATCH_FLOAT(dt, "binary", FN, __VA_ARGS__)

extern "C" tg_status cuda_binary_forward_bc(tgc_stream s, tg_dtype dt, host_binary_op op, const host_bcast *p,
                                            const void *a, const void *b, void *y) {
  if (!p) {
    tgc_set_error("binary forward: the broadcast plan is NULL");
    return TG_ERR_INVALID_ARGUMENT;
  }
  DISPATCH(dt, binary_fwd_bc, s, op, p, a, b, y)
}

extern "C" size_t cuda_binary_backward_bc_workspace(const host_bcast *p, int want_a, int want_b) {
  return p ? bw_workspace_of(p, want_a, want_b) : 0;
}

extern "C" tg_status cuda_binary_backward_bc(tgc_stream s, tg_dtype dt, host_binary_op op, const host_bcast *p,
                                             const void *a, const void *b, const void *gy, void *ga, void *gb, void *ws,
                                             size_t ws_bytes) {
  if (!p) {
    tgc_set_error("binary backward: the broadcast plan is NULL");
    return TG_ERR_INVALID_ARGUMENT;
  }
  DISPATCH(dt, binary_bwd_bc, s, op, p, a, b, gy, ga, gb, ws, ws_bytes)
}
