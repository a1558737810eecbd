// Dot product over the last dim with broadcast leading rows (cuda/dot.h).
#include "common.cuh"
#include "dot.h"

// Rows (ia, ib) of a and b read by result row i: direct for SAME and TRAIL plans (the one that
// repeats is read at i % its rows), the general walk over the merged dims otherwise.
__device__ __forceinline__ void dot_rows(const host_bcast &p, long long i, long long &ia, long long &ib) {
  if (p.kind == HOST_BC_SAME) {
    ia = ib = i;
    return;
  }
  if (p.kind == HOST_BC_TRAIL) {
    ia = p.na == p.n ? i : i % p.na;
    ib = p.nb == p.n ? i : i % p.nb;
    return;
  }
  ia = ib = 0;
#pragma unroll
  for (int d = TG_MAX_DIMS - 1; d >= 0; d--)
    if (d < p.ndim) {
      long long q = i / p.shape[d], r = i - q * p.shape[d];
      ia += r * p.sa[d];
      ib += r * p.sb[d];
      i = q;
    }
}

// ---- forward: y[i] = sum_c a[ia, c] b[ib, c]. Short rows (cols <= 32): a thread per row; longer: a
// warp per row, lanes striding the row, then the fixed shuffle tree.
template <typename T>
__global__ void k_dot_thread(host_bcast p, const T *__restrict__ a, const T *__restrict__ b, long long cols,
                             T *__restrict__ y) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < p.n;
       i += (long long)gridDim.x * blockDim.x) {
    long long ia, ib;
    dot_rows(p, i, ia, ib);
    const T *ar = a + ia * cols, *br = b + ib * cols;
    float s = 0.f;
    for (long long c = 0; c < cols; c++)
      s += tgc_to_f(ar[c]) * tgc_to_f(br[c]);
    y[i] = tgc_from_f<T>(s);
  }
}

template <typename T>
__global__ void k_dot_warp(host_bcast p, const T *__restrict__ a, const T *__restrict__ b, long long cols,
                           T *__restrict__ y) {
  const int lane = threadIdx.x & 31;
  const long long warps = (long long)gridDim.x * (blockDim.x / 32);
  for (long long i = blockIdx.x * (long long)(blockDim.x / 32) + threadIdx.x / 32; i < p.n; i += warps) {
    long long ia, ib;
    dot_rows(p, i, ia, ib);
    const T *ar = a + ia * cols, *br = b + ib * cols;
    float s = 0.f;
    for (long long c = lane; c < cols; c += 32)
      s += tgc_to_f(ar[c]) * tgc_to_f(br[c]);
    s = tgc_warp_sum(s);
    if (lane == 0) y[i] = tgc_from_f<T>(s);
  }
}

// ---- backward, operands not broadcast over rows: ga[i, c] (+)= gy[i] b[ib, c] (ia = i), likewise
// gb; a NULL gradient is not wanted (or is an operand broadcast over rows, done elsewhere).
template <typename T>
__global__ void k_dot_bwd_full(host_bcast p, const T *__restrict__ a, const T *__restrict__ b, long long cols,
                               const T *__restrict__ gy, T *ga, int add_a, T *gb, int add_b) {
  const long long n = p.n * cols;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n; e += (long long)gridDim.x * blockDim.x) {
    long long i = e / cols, c = e - i * cols, ia, ib;
    dot_rows(p, i, ia, ib);
    const float g = tgc_to_f(gy[i]);
    if (ga) {
      const float v = g * tgc_to_f(b[ib * cols + c]);
      ga[e] = tgc_from_f<T>(add_a ? tgc_to_f(ga[e]) + v : v);
    }
    if (gb) { // read after ga's write: ga == gb (the same value twice) then adds both terms
      const float v = g * tgc_to_f(a[ia * cols + c]);
      gb[e] = tgc_from_f<T>(add_b ? tgc_to_f(gb[e]) + v : v);
    }
  }
}

// ---- backward, TRAIL plans: S [ns, cols] repeats along the rows of the full operand F [R * ns, cols]
// (result row i reads S row i % ns). Over the flattened [R, M] (M = ns * cols), element (k, j) pairs
// gy[k * ns + j / cols], F[k * M + j] and S[j]. A block (32, TRAIL_Y) covers 32 columns j and the
// rows [y * per, y * per + per) of chunk y = blockIdx.y: gF[k, j] (+)= gy S[j] (gF NULL: not wanted),
// and the chunk's sum over k of gy F[k, j] — each thread its rows in order, then the threads of a
// column in threadIdx.y order — goes to part[y, j], or straight to gS when there is one chunk
// (part NULL). Both NULL: S's gradient is not wanted.
constexpr int TRAIL_Y = 8;

template <typename T>
__global__ void k_dot_bwd_trail(const T *__restrict__ F, const T *__restrict__ S, const T *__restrict__ gy,
                                long long ns, long long cols, long long R, long long per, T *gF, int add_f, float *part,
                                T *gS, int add_s) {
  __shared__ float red[TRAIL_Y][33];
  const long long M = ns * cols, j = blockIdx.x * 32LL + threadIdx.x;
  const long long k0 = blockIdx.y * per, k1 = min(R, k0 + per);
  const bool want_s = part != nullptr || gS != nullptr;
  float s = 0.f;
  if (j < M) {
    const long long r = j / cols;
    const float sj = gF ? tgc_to_f(S[j]) : 0.f;
    for (long long k = k0 + threadIdx.y; k < k1; k += TRAIL_Y) {
      const float g = tgc_to_f(gy[k * ns + r]);
      const long long e = k * M + j;
      if (gF) {
        const float v = g * sj;
        gF[e] = tgc_from_f<T>(add_f ? tgc_to_f(gF[e]) + v : v);
      }
      if (want_s) s += g * tgc_to_f(F[e]);
    }
  }
  if (!want_s) return; // the same for the whole block
  red[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && j < M) {
    float t = 0.f;
#pragma unroll
    for (int q = 0; q < TRAIL_Y; q++)
      t += red[q][threadIdx.x];
    if (part)
      part[blockIdx.y * M + j] = t;
    else
      gS[j] = tgc_from_f<T>(add_s ? tgc_to_f(gS[j]) + t : t);
  }
}

// gS[j] (+)= sum over chunks c, in order, of part[c, j].
template <typename T>
__global__ void k_dot_parts(const float *__restrict__ part, long long chunks, long long M, T *gS, int add_s) {
  for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < M; j += (long long)gridDim.x * blockDim.x) {
    float t = 0.f;
    for (long long c = 0; c < chunks; c++)
      t += part[c * M + j];
    gS[j] = tgc_from_f<T>(add_s ? tgc_to_f(gS[j]) + t : t);
  }
}

// Rows per chunk of the TRAIL backward: 64 (8 per thread), fewer chunks when there would be more
// than 4096 or the partials would pass 4 MiB (one chunk at least).
static void trail_chunks(long long R, long long M, long long *chunks, long long *per) {
  long long c = (R + 63) / 64, cap = (1LL << 20) / M;
  if (c > 4096) c = 4096;
  if (c > cap) c = cap;
  if (c < 1) c = 1;
  *per = (R + c - 1) / c;
  *chunks = (R + *per - 1) / *per;
}

// ---- backward, any other plan, for an operand x broadcast over rows: gx[r, c] (+)= sum over k of
// gy[yo + yi(k)] o[(oo + oi(k)) * cols + c]. The outer dims are x's present merged dims (row-major,
// so r counts x's rows), the inner ones its broadcast dims (k); each carries its stride in y's rows
// and in the other operand's rows. A thread per element of gx sums its k in order.
struct DotRed {
  int no, ni;
  long long os[TG_MAX_DIMS], oy[TG_MAX_DIMS], oo[TG_MAX_DIMS];
  long long is[TG_MAX_DIMS], iy[TG_MAX_DIMS], io[TG_MAX_DIMS];
  long long nx, m;
};

static DotRed dot_red(const host_bcast *p, int which) {
  const int64_t *sx = which ? p->sb : p->sa, *so = which ? p->sa : p->sb;
  DotRed g{};
  g.nx = 1;
  long long ys[TG_MAX_DIMS], sy = 1;
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

__device__ __forceinline__ void red_offsets(long long i, int nd, const long long *shape, const long long *s0,
                                            const long long *s1, long long &o0, long long &o1) {
  o0 = o1 = 0;
  for (int d = nd - 1; d >= 0; d--) {
    long long q = i / shape[d], r = i - q * shape[d];
    o0 += r * s0[d];
    o1 += r * s1[d];
    i = q;
  }
}

template <typename T>
__global__ void k_dot_bwd_general(DotRed g, const T *__restrict__ o, const T *__restrict__ gy, long long cols, T *gx,
                                  int add) {
  const long long n = g.nx * cols;
  for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < n; j += (long long)gridDim.x * blockDim.x) {
    long long r = j / cols, c = j - r * cols, yo, oo;
    red_offsets(r, g.no, g.os, g.oy, g.oo, yo, oo);
    float s = 0.f;
    for (long long k = 0; k < g.m; k++) {
      long long yi, oi;
      red_offsets(k, g.ni, g.is, g.iy, g.io, yi, oi);
      s += tgc_to_f(gy[yo + yi]) * tgc_to_f(o[(oo + oi) * cols + c]);
    }
    gx[j] = tgc_from_f<T>(add ? tgc_to_f(gx[j]) + s : s);
  }
}

// ---- launchers
template <typename T>
static tg_status dot_fwd(cudaStream_t s, const host_bcast *p, const void *a, const void *b, long long cols, void *y) {
  if (cols <= 32)
    k_dot_thread<T><<<tgc_blocks(p->n, 256), 256, 0, s>>>(*p, (const T *)a, (const T *)b, cols, (T *)y);
  else
    k_dot_warp<T><<<tgc_blocks(p->n * 32, 256), 256, 0, s>>>(*p, (const T *)a, (const T *)b, cols, (T *)y);
  TGC_LAUNCHED("dot_forward");
  return TG_OK;
}

// Partials of the TRAIL backward: bytes of device scratch (0 when S's gradient is not wanted or
// one chunk writes it directly).
static size_t trail_ws(const host_bcast *p, long long cols, bool want_s) {
  if (!want_s) return 0;
  const long long ns = p->na == p->n ? p->nb : p->na, M = ns * cols;
  long long chunks, per;
  trail_chunks(p->n / ns, M, &chunks, &per);
  return chunks > 1 ? sizeof(float) * (size_t)(chunks * M) : 0;
}

template <typename T>
static tg_status dot_bwd(cudaStream_t s, const host_bcast *p, const void *a, const void *b, long long cols,
                         const void *gy, void *ga, int add_a, void *gb, int add_b, void *ws, size_t ws_bytes) {
  const bool full_a = p->na == p->n, full_b = p->nb == p->n;
  if (p->kind == HOST_BC_TRAIL) { // exactly one operand is full
    const T *F = (const T *)(full_a ? a : b), *S = (const T *)(full_a ? b : a);
    T *gF = (T *)(full_a ? ga : gb), *gS = (T *)(full_a ? gb : ga);
    const int add_f = full_a ? add_a : add_b, add_s = full_a ? add_b : add_a;
    const long long ns = full_a ? p->nb : p->na, M = ns * cols, R = p->n / ns;
    long long chunks, per;
    trail_chunks(R, M, &chunks, &per);
    const size_t need = trail_ws(p, cols, gS != nullptr);
    if (need > ws_bytes || (need && !ws)) {
      tgc_set_error("cuda_dot_backward: workspace of %zu bytes, expected %zu", ws_bytes, need);
      return TG_ERR_INTERNAL;
    }
    float *part = need ? (float *)ws : nullptr;
    dim3 grid((unsigned)((M + 31) / 32), (unsigned)chunks), block(32, TRAIL_Y);
    k_dot_bwd_trail<T>
        <<<grid, block, 0, s>>>(F, S, (const T *)gy, ns, cols, R, per, gF, add_f, part, part ? nullptr : gS, add_s);
    TGC_LAUNCHED("dot_backward_trail");
    if (part) {
      k_dot_parts<T><<<tgc_blocks(M, 256), 256, 0, s>>>(part, chunks, M, gS, add_s);
      TGC_LAUNCHED("dot_backward_parts");
    }
    return TG_OK;
  }
  T *fa = full_a ? (T *)ga : nullptr, *fb = full_b ? (T *)gb : nullptr;
  if (fa || fb) {
    k_dot_bwd_full<T><<<tgc_blocks(p->n * cols, 256), 256, 0, s>>>(*p, (const T *)a, (const T *)b, cols, (const T *)gy,
                                                                   fa, add_a, fb, add_b);
    TGC_LAUNCHED("dot_backward_full");
  }
  if (ga && !full_a) {
    DotRed g = dot_red(p, 0);
    k_dot_bwd_general<T>
        <<<tgc_blocks(g.nx * cols, 256), 256, 0, s>>>(g, (const T *)b, (const T *)gy, cols, (T *)ga, add_a);
    TGC_LAUNCHED("dot_backward_general");
  }
  if (gb && !full_b) {
    DotRed g = dot_red(p, 1);
    k_dot_bwd_general<T>
        <<<tgc_blocks(g.nx * cols, 256), 256, 0, s>>>(g, (const T *)a, (const T *)gy, cols, (T *)gb, add_b);
    TGC_LAUNCHED("dot_backward_general");
  }
  return TG_OK;
}

extern "C" tg_status cuda_dot_forward(tgc_stream s, tg_dtype dt, const host_bcast *p, const void *a, const void *b,
                                      int64_t cols, void *y) {
  if (p->n <= 0 || cols <= 0) return TG_OK;
  switch (dt) {
  case TG_F32: return dot_fwd<float>(s, p, a, b, cols, y);
  case TG_F16: return dot_fwd<__half>(s, p, a, b, cols, y);
  case TG_BF16: return dot_fwd<__nv_bfloat16>(s, p, a, b, cols, y);
  default: tgc_set_error("cuda_dot_forward: dtype %s", tg_dtype_name(dt)); return TG_ERR_DTYPE;
  }
}

extern "C" size_t cuda_dot_backward_workspace(const host_bcast *p, int64_t cols, int want_a, int want_b) {
  if (p->kind != HOST_BC_TRAIL || p->n <= 0 || cols <= 0) return 0;
  return trail_ws(p, cols, p->na == p->n ? want_b != 0 : want_a != 0);
}

extern "C" tg_status cuda_dot_backward(tgc_stream s, tg_dtype dt, const host_bcast *p, const void *a, const void *b,
                                       int64_t cols, const void *gy, void *ga, int add_a, void *gb, int add_b, void *ws,
                                       size_t ws_bytes) {
  if (p->n <= 0 || cols <= 0 || (!ga && !gb)) return TG_OK;
  switch (dt) {
  case TG_F32: return dot_bwd<float>(s, p, a, b, cols, gy, ga, add_a, gb, add_b, ws, ws_bytes);
  case TG_F16: return dot_bwd<__half>(s, p, a, b, cols, gy, ga, add_a, gb, add_b, ws, ws_bytes);
  case TG_BF16: return dot_bwd<__nv_bfloat16>(s, p, a, b, cols, gy, ga, add_a, gb, add_b, ws, ws_bytes);
  default: tgc_set_error("cuda_dot_backward: dtype %s", tg_dtype_name(dt)); return TG_ERR_DTYPE;
  }
}
