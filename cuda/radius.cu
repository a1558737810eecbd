// Radius graphs from point positions on the GPU (cuda/radius.h); host/radius.c is the reference and
// explains why the cell list never misses a pair (the grid here follows the same rule).
//
// Pipeline on one stream: [upload] -> bounding boxes + finiteness (ordered-key atomics) -> grid
// (one thread) -> cell of every source, slot by atomicAdd -> scan of the cell counts -> sources
// placed in cell order (the order inside a cell is arbitrary: nothing downstream depends on it) ->
// count pass per destination over its 3^dim neighbour cells -> scan -> row_ptr; one host sync for
// nnz -> fill pass (max_neighbors: a per-row max-heap on (d2, j)) with a per-thread sort of rows up
// to 64 entries, CUB's segmented sort when a row is longer -> Morton codes + stable radix sort.
// Every distance is __dsub_rn / __dmul_rn / __dadd_rn in dimension order, as the host rounds it.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_sort.cuh>

#include <cmath>

#include "common.cuh"
#include "radius.h"

namespace {

constexpr int kSortMax = 64; // rows up to this length are sorted by their thread

struct RadInfo {                         // accumulators, read back at the one sync
  unsigned long long lo[2][3], hi[2][3]; // ordered keys of the box of set 0 (dst) and 1 (src)
  unsigned long long bad[2];             // first non-finite point of each set (~0: none)
  unsigned long long maxlen;             // longest row
  unsigned long long nnz;
};

struct RadGrid {
  double lo[3];  // 0.5 * source minimum
  double k;      // cells per half-scale unit
  int g[3];      // cells per dimension (1 beyond dim)
  int ncells;    // 0: no sources, or a non-finite coordinate (every pass does nothing)
  double mlo[3]; // 0.5 * destination minimum (Morton)
  double me;     // largest half-scale destination extent (Morton)
};

struct alignas(32) RadPt {
  double x, y, z, w;
};

__device__ __forceinline__ unsigned long long okey(double x) {
  unsigned long long u = (unsigned long long)__double_as_longlong(x);
  return (u >> 63) ? ~u : u | 0x8000000000000000ull;
}
__device__ __forceinline__ double unkey(unsigned long long k) {
  unsigned long long u = (k >> 63) ? k & 0x7fffffffffffffffull : ~k;
  return __longlong_as_double((long long)u);
}

template <typename T> __device__ __forceinline__ double ld(const T *p, long long i) { return (double)p[i]; }

template <int DIM> __device__ __forceinline__ double dist2(const RadPt &a, const RadPt &b) {
  double dx = __dsub_rn(b.x, a.x);
  double s = __dmul_rn(dx, dx);
  if (DIM > 1) {
    double dy = __dsub_rn(b.y, a.y);
    s = __dadd_rn(s, __dmul_rn(dy, dy));
  }
  if (DIM > 2) {
    double dz = __dsub_rn(b.z, a.z);
    s = __dadd_rn(s, __dmul_rn(dz, dz));
  }
  return s;
}

__device__ __forceinline__ int cell_of(double x, double lo, double k, int cmin, int cmax) {
  double t = floor(__dmul_rn(__dsub_rn(__dmul_rn(0.5, x), lo), k));
  if (!(t >= (double)cmin)) return cmin;
  if (t > (double)cmax) return cmax;
  return (int)t;
}

template <typename T, int DIM> __device__ __forceinline__ RadPt load_pt(const T *p, long long i) {
  RadPt q = {ld(p, i * DIM), DIM > 1 ? ld(p, i * DIM + 1) : 0.0, DIM > 2 ? ld(p, i * DIM + 2) : 0.0, 0.0};
  return q;
}

// ---------------------------------------------------------------- boxes, grid, cell list
__global__ void k_init(RadInfo *info, int *counts, long long ncount) {
  long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (t == 0) {
    for (int s = 0; s < 2; s++) {
      for (int d = 0; d < 3; d++)
        info->lo[s][d] = ~0ull, info->hi[s][d] = 0;
      info->bad[s] = ~0ull;
    }
    info->maxlen = 0;
    info->nnz = 0;
  }
  for (long long i = t; i < ncount; i += (long long)gridDim.x * blockDim.x)
    counts[i] = 0;
}

// Box (ordered keys) and first non-finite point of set `set`; blockDim.x == 256.
template <typename T> __global__ void k_bbox(const T *pos, long long n, int dim, int set, RadInfo *info) {
  unsigned long long v[7] = {~0ull, ~0ull, ~0ull, 0, 0, 0, ~0ull}; // lo[3], hi[3], bad
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    for (int d = 0; d < dim; d++) {
      double x = ld(pos, i * dim + d);
      if (!isfinite(x)) {
        v[6] = min(v[6], (unsigned long long)i);
      } else {
        unsigned long long k = okey(x);
        v[d] = min(v[d], k);
        v[3 + d] = max(v[3 + d], k);
      }
    }
  __shared__ unsigned long long sh[8][7];
  for (int o = 16; o; o >>= 1)
    for (int q = 0; q < 7; q++) {
      unsigned long long w = __shfl_xor_sync(0xffffffffu, v[q], o);
      v[q] = (q >= 3 && q < 6) ? max(v[q], w) : min(v[q], w);
    }
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0)
    for (int q = 0; q < 7; q++)
      sh[warp][q] = v[q];
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < (int)(blockDim.x >> 5); w++)
      for (int q = 0; q < 7; q++)
        v[q] = (q >= 3 && q < 6) ? max(v[q], sh[w][q]) : min(v[q], sh[w][q]);
    for (int d = 0; d < dim; d++) {
      atomicMin(&info->lo[set][d], v[d]);
      atomicMax(&info->hi[set][d], v[3 + d]);
    }
    atomicMin(&info->bad[set], v[6]);
  }
}

// The grid of host/radius.c (grid_make) and the Morton frame, one thread.
__global__ void k_grid(const RadInfo *info, RadGrid *G, int dim, int src_set, double cutoff, long long cap,
                       long long n_src, long long n_dst) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  RadGrid g;
  double e[3];
  for (int d = 0; d < 3; d++) {
    double lo = d < dim && n_src > 0 ? unkey(info->lo[src_set][d]) : 0.0;
    double hi = d < dim && n_src > 0 ? unkey(info->hi[src_set][d]) : 0.0;
    g.lo[d] = __dmul_rn(0.5, lo);
    e[d] = d < dim ? __dsub_rn(__dmul_rn(0.5, hi), g.lo[d]) : 0.0;
    g.g[d] = 1;
    g.mlo[d] = 0.0;
  }
  g.k = 0.0;
  g.me = 0.0;
  bool bad = info->bad[0] != ~0ull || info->bad[1] != ~0ull;
  g.ncells = bad || n_src == 0 ? 0 : 1;
  double cc = __dmul_rn(cutoff, cutoff);
  if (g.ncells && !isinf(cc)) {
    double r = cutoff > 0x1p-500 ? cutoff : 0x1p-500;
    double hh = __dmul_rn(__dmul_rn(r, 1.0 + 0x1p-16), 0.5);
    for (;;) {
      double k = __ddiv_rn(1.0, hh), prod = 1.0;
      for (int d = 0; d < dim; d++)
        prod = __dmul_rn(prod, __dadd_rn(floor(__dmul_rn(e[d], k)), 1.0));
      if (prod <= (double)cap) {
        g.k = k;
        g.ncells = 1;
        for (int d = 0; d < dim; d++) {
          g.g[d] = (int)__dadd_rn(floor(__dmul_rn(e[d], k)), 1.0);
          g.ncells *= g.g[d];
        }
        break;
      }
      hh = __dmul_rn(hh, prod > ldexp((double)cap, 60 * dim) ? 0x1p60 : prod > ldexp((double)cap, dim) ? 2.0 : 1.25);
    }
  }
  if (!bad && n_dst > 0)
    for (int d = 0; d < dim; d++) {
      double h0 = __dmul_rn(0.5, unkey(info->lo[0][d]));
      double ed = __dsub_rn(__dmul_rn(0.5, unkey(info->hi[0][d])), h0);
      g.mlo[d] = h0;
      if (ed > g.me) g.me = ed;
    }
  *G = g;
}

template <typename T, int DIM>
__global__ void k_bin(const T *pos, long long n, const RadGrid *Gp, int *counts, int *cell, int *slot) {
  const RadGrid G = *Gp;
  if (G.ncells == 0) return;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    int id = 0;
    for (int d = DIM - 1; d >= 0; d--)
      id = id * G.g[d] + cell_of(ld(pos, i * DIM + d), G.lo[d], G.k, 0, G.g[d] - 1);
    cell[i] = id;
    slot[i] = atomicAdd(&counts[id], 1);
  }
}

template <typename T, int DIM>
__global__ void k_place(const T *pos, long long n, const RadGrid *Gp, const int *start, const int *cell,
                        const int *slot, RadPt *spos, int *sidx) {
  if (Gp->ncells == 0) return;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    int s = start[cell[i]] + slot[i];
    spos[s] = load_pt<T, DIM>(pos, i);
    sidx[s] = (int)i;
  }
}

// ---------------------------------------------------------------- rows
// Calls f(s, d2) for every sorted source s of the 3^dim cells around p with d2 <= cc.
template <int DIM, typename F>
__device__ __forceinline__ void for_near(const RadGrid &G, const int *start, const RadPt *spos, const RadPt &p,
                                         double cc, F &&f) {
  int c[3] = {0, 0, 0};
  c[0] = cell_of(p.x, G.lo[0], G.k, -2, G.g[0] + 1);
  if (DIM > 1) c[1] = cell_of(p.y, G.lo[1], G.k, -2, G.g[1] + 1);
  if (DIM > 2) c[2] = cell_of(p.z, G.lo[2], G.k, -2, G.g[2] + 1);
  int x0 = max(c[0] - 1, 0), x1 = min(c[0] + 1, G.g[0] - 1);
  if (x0 > x1) return;
  int z0 = DIM > 2 ? max(c[2] - 1, 0) : 0, z1 = DIM > 2 ? min(c[2] + 1, G.g[2] - 1) : 0;
  int y0 = DIM > 1 ? max(c[1] - 1, 0) : 0, y1 = DIM > 1 ? min(c[1] + 1, G.g[1] - 1) : 0;
  for (int z = z0; z <= z1; z++)
    for (int y = y0; y <= y1; y++) {
      int base = (z * G.g[1] + y) * G.g[0];
      int s1 = start[base + x1 + 1];
      for (int s = start[base + x0]; s < s1; s++) {
        double d2 = dist2<DIM>(p, spos[s]);
        if (d2 <= cc) f(s, d2);
      }
    }
}

// Destination of thread t: in a square graph destination t of the cell order (= sorted source t),
// else point t of pos_dst.
template <typename T, int DIM>
__device__ __forceinline__ void dest(long long t, bool square, const T *pos_dst, const RadPt *spos, const int *sidx,
                                     long long &i, RadPt &p) {
  if (square) {
    i = sidx[t];
    p = spos[t];
  } else {
    i = t;
    p = load_pt<T, DIM>(pos_dst, t);
  }
}

template <typename T, int DIM>
__global__ void k_count(const RadGrid *Gp, const T *pos_dst, const RadPt *spos, const int *sidx, const int *start,
                        long long n_dst, int square, int skip_self, long long kmax, double cc, long long *cnt,
                        RadInfo *info) {
  const RadGrid G = *Gp;
  long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (t == 0) cnt[n_dst] = 0;
  long long m = 0;
  if (t < n_dst) {
    if (G.ncells == 0) {
      cnt[t] = 0;
    } else {
      long long i;
      RadPt p;
      dest<T, DIM>(t, square, pos_dst, spos, sidx, i, p);
      long long self = square && skip_self ? t : -1; // the sorted position of the pair i -> i
      for_near<DIM>(G, start, spos, p, cc, [&](int s, double) { m += s != self; });
      if (kmax > 0 && m > kmax) m = kmax;
      cnt[i] = m;
    }
  }
  unsigned w = __reduce_max_sync(0xffffffffu, (unsigned)m);
  if ((threadIdx.x & 31) == 0 && w > 0) atomicMax(&info->maxlen, (unsigned long long)w);
}

__global__ void k_nnz(const long long *row_ptr, long long n_dst, RadInfo *info) {
  if (threadIdx.x == 0 && blockIdx.x == 0) info->nnz = (unsigned long long)row_ptr[n_dst];
}

// (d2, j) order of max_neighbors.
__device__ __forceinline__ bool pair_less(double da, int ja, double db, int jb) {
  return da < db || (da == db && ja < jb);
}
__device__ void sift_down(int *c, double *d, long long n, long long r) {
  for (;;) {
    long long l = 2 * r + 1, ch = l;
    if (l >= n) return;
    if (l + 1 < n && pair_less(d[l], c[l], d[l + 1], c[l + 1])) ch = l + 1;
    if (!pair_less(d[r], c[r], d[ch], c[ch])) return;
    int tc = c[r];
    c[r] = c[ch], c[ch] = tc;
    double td = d[r];
    d[r] = d[ch], d[ch] = td;
    r = ch;
  }
}

template <typename T, int DIM>
__global__ void k_fill(const RadGrid *Gp, const T *pos_dst, const RadPt *spos, const int *sidx, const int *start,
                       long long n_dst, int square, int skip_self, long long kmax, double cc, const long long *row_ptr,
                       int *col, double *dd, int thread_sort) {
  const RadGrid G = *Gp;
  long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (t >= n_dst || G.ncells == 0) return;
  long long i;
  RadPt p;
  dest<T, DIM>(t, square, pos_dst, spos, sidx, i, p);
  long long self = square && skip_self ? t : -1;
  long long rp = row_ptr[i], len = row_ptr[i + 1] - rp, m = 0;
  int *c = col + rp;
  double *d = kmax > 0 ? dd + rp : nullptr;
  bool heap = false;
  for_near<DIM>(G, start, spos, p, cc, [&](int s, double d2) {
    if (s == self) return;
    int j = sidx[s];
    if (m < len) { // the first len candidates: every one when the row is not cut
      c[m] = j;
      if (d) d[m] = d2;
      m++;
      return;
    }
    if (!d || len == 0) return;
    if (!heap) { // more than k: keep the k smallest (d2, j) in a max-heap
      for (long long r = len / 2 - 1; r >= 0; r--)
        sift_down(c, d, len, r);
      heap = true;
    }
    if (pair_less(d2, j, d[0], c[0])) {
      c[0] = j, d[0] = d2;
      sift_down(c, d, len, 0);
    }
  });
  if (thread_sort && len <= kSortMax) {
    int b[kSortMax];
    for (long long e = 0; e < len; e++) {
      int v = c[e];
      long long q = e;
      for (; q > 0 && b[q - 1] > v; q--)
        b[q] = b[q - 1];
      b[q] = v;
    }
    for (long long e = 0; e < len; e++)
      c[e] = b[e];
  }
}

// ---------------------------------------------------------------- Morton order (host/radius.h)
__device__ __forceinline__ unsigned long long spread(unsigned long long q, int dim) {
  if (dim == 2) {
    q &= 0x7fffffffull;
    q = (q | q << 16) & 0x0000ffff0000ffffull;
    q = (q | q << 8) & 0x00ff00ff00ff00ffull;
    q = (q | q << 4) & 0x0f0f0f0f0f0f0f0full;
    q = (q | q << 2) & 0x3333333333333333ull;
    q = (q | q << 1) & 0x5555555555555555ull;
  } else if (dim == 3) {
    q &= 0x1fffffull;
    q = (q | q << 32) & 0x001f00000000ffffull;
    q = (q | q << 16) & 0x001f0000ff0000ffull;
    q = (q | q << 8) & 0x100f00f00f00f00full;
    q = (q | q << 4) & 0x10c30c30c30c30c3ull;
    q = (q | q << 2) & 0x1249249249249249ull;
  }
  return q;
}

template <typename T>
__global__ void k_morton(const T *pos, long long n, int dim, const RadGrid *Gp, unsigned long long *code,
                         long long *iota) {
  const int B = 63 / dim;
  const double scale = ldexp(1.0, B), E = Gp->me;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    unsigned long long c = 0;
    for (int d = 0; d < dim; d++) {
      unsigned long long q = 0;
      if (E > 0.0) {
        double u = __dsub_rn(__dmul_rn(0.5, ld(pos, i * dim + d)), Gp->mlo[d]);
        double f = floor(__dmul_rn(__ddiv_rn(u, E), scale));
        q = f >= scale ? (1ull << B) - 1 : f > 0.0 ? (unsigned long long)f : 0;
      }
      c |= spread(q, dim) << d;
    }
    code[i] = c;
    iota[i] = i;
  }
}

// ---------------------------------------------------------------- launcher
struct Build {
  const tgc_allocator *al;
  void *scratch[8];
  int ns;
  int64_t *row_ptr;
  int32_t *col;
};

void *grab(Build &b, size_t bytes, bool scratch, const char *what) {
  void *p = b.al->alloc(b.al->ctx, bytes > 0 ? bytes : 1);
  if (!p) {
    tgc_set_error("radius: the allocator failed (%zu bytes for %s)", bytes, what);
    return nullptr;
  }
  if (scratch) b.scratch[b.ns++] = p;
  return p;
}

// Bump layout inside one scratch block (256-byte aligned pieces).
struct Layout {
  size_t off = 0;
  size_t add(size_t bytes) {
    size_t o = off;
    off += (bytes + 255) / 256 * 256;
    return o;
  }
};

long long grid_cap(long long n_src) {
  long long c = 4 * n_src > 4096 ? 4 * n_src : 4096;
  return c < (1LL << 30) ? c : 1LL << 30;
}

#define RAD_CUB(call)                                                                                                  \
  do {                                                                                                                 \
    cudaError_t e_ = (call);                                                                                           \
    if (e_ != cudaSuccess) {                                                                                           \
      tgc_set_error("radius: %s: %s", #call, cudaGetErrorString(e_));                                                  \
      return tgc_status_of(e_);                                                                                        \
    }                                                                                                                  \
  } while (0)

template <typename T, int DIM>
tg_status run(Build &b, cudaStream_t s, const cuda_radius_args *a, int64_t *nnz_out, int64_t *d_perm) {
  cudaEvent_t const *ev = a->phase_events;
  const long long n_dst = a->n_dst, n_src = a->square ? a->n_dst : a->n_src, cap = grid_cap(n_src);
  const size_t pdst = (size_t)n_dst * DIM * sizeof(T), psrc = a->square ? 0 : (size_t)n_src * DIM * sizeof(T);
  const double cc = a->cutoff * a->cutoff;
  if (ev) TGC_CUDA(cudaEventRecord(ev[0], s));

  size_t scan_cells = 0, scan_rows = 0;
  RAD_CUB(cub::DeviceScan::ExclusiveSum(nullptr, scan_cells, (int *)nullptr, (int)(cap + 1), s));
  RAD_CUB(cub::DeviceScan::ExclusiveSum(nullptr, scan_rows, (long long *)nullptr, (long long)(n_dst + 1), s));
  Layout L;
  size_t o_dst = L.add(a->on_device ? 0 : pdst), o_src = L.add(a->on_device ? 0 : psrc),
         o_info = L.add(sizeof(RadInfo)), o_grid = L.add(sizeof(RadGrid)), o_cnt = L.add((size_t)(cap + 1) * 4),
         o_cell = L.add((size_t)n_src * 4), o_slot = L.add((size_t)n_src * 4), o_sidx = L.add((size_t)n_src * 4),
         o_spos = L.add((size_t)n_src * sizeof(RadPt)), o_tmp = L.add(scan_cells > scan_rows ? scan_cells : scan_rows);
  char *w = (char *)grab(b, L.off, true, "the cell list");
  if (!w) return TG_ERR_OUT_OF_MEMORY;
  b.row_ptr = (int64_t *)grab(b, (size_t)(n_dst + 1) * 8, false, "row_ptr");
  if (!b.row_ptr) return TG_ERR_OUT_OF_MEMORY;
  RadInfo *info = (RadInfo *)(w + o_info);
  RadGrid *grid = (RadGrid *)(w + o_grid);
  int *counts = (int *)(w + o_cnt), *cell = (int *)(w + o_cell), *slot = (int *)(w + o_slot),
      *sidx = (int *)(w + o_sidx);
  RadPt *spos = (RadPt *)(w + o_spos);
  long long *cnt = (long long *)b.row_ptr;

  const T *pd = (const T *)a->pos_dst, *ps = (const T *)(a->square ? a->pos_dst : a->pos_src);
  if (!a->on_device) {
    if (pdst) TGC_CUDA(cudaMemcpyAsync(w + o_dst, a->pos_dst, pdst, cudaMemcpyHostToDevice, s));
    if (psrc) TGC_CUDA(cudaMemcpyAsync(w + o_src, a->pos_src, psrc, cudaMemcpyHostToDevice, s));
    pd = (const T *)(w + o_dst);
    ps = a->square ? pd : (const T *)(w + o_src);
  }
  if (ev) TGC_CUDA(cudaEventRecord(ev[1], s));

  k_init<<<tgc_blocks(cap + 1, 256), 256, 0, s>>>(info, counts, cap + 1);
  TGC_LAUNCHED("radius init");
  k_bbox<T><<<tgc_blocks(n_dst, 256, 512), 256, 0, s>>>(pd, n_dst, DIM, 0, info);
  TGC_LAUNCHED("radius bbox");
  if (!a->square) {
    k_bbox<T><<<tgc_blocks(n_src, 256, 512), 256, 0, s>>>(ps, n_src, DIM, 1, info);
    TGC_LAUNCHED("radius bbox");
  }
  k_grid<<<1, 32, 0, s>>>(info, grid, DIM, a->square ? 0 : 1, a->cutoff, cap, n_src, n_dst);
  TGC_LAUNCHED("radius grid");
  k_bin<T, DIM><<<tgc_blocks(n_src, 256), 256, 0, s>>>(ps, n_src, grid, counts, cell, slot);
  TGC_LAUNCHED("radius bin");
  RAD_CUB(cub::DeviceScan::ExclusiveSum(w + o_tmp, scan_cells, counts, (int)(cap + 1), s));
  k_place<T, DIM><<<tgc_blocks(n_src, 256), 256, 0, s>>>(ps, n_src, grid, counts, cell, slot, spos, sidx);
  TGC_LAUNCHED("radius place");
  if (ev) TGC_CUDA(cudaEventRecord(ev[2], s));

  const int rows_threads = 128;
  const unsigned rows_blocks =
      (unsigned)((n_dst + rows_threads - 1) / rows_threads > 0 ? (n_dst + rows_threads - 1) / rows_threads : 1);
  const int skip_self = a->square && !a->self_loops;
  k_count<T, DIM><<<rows_blocks, rows_threads, 0, s>>>(grid, pd, spos, sidx, counts, n_dst, a->square, skip_self,
                                                       a->max_neighbors, cc, cnt, info);
  TGC_LAUNCHED("radius count");
  RAD_CUB(cub::DeviceScan::ExclusiveSum(w + o_tmp, scan_rows, cnt, (long long)(n_dst + 1), s));
  k_nnz<<<1, 32, 0, s>>>(cnt, n_dst, info);
  TGC_LAUNCHED("radius nnz");
  if (ev) TGC_CUDA(cudaEventRecord(ev[3], s));

  RadInfo h;
  TGC_CUDA(cudaMemcpyAsync(&h, info, sizeof h, cudaMemcpyDeviceToHost, s));
  TGC_CUDA(cudaStreamSynchronize(s));
  for (int set = 0; set < 2; set++)
    if (h.bad[set] != ~0ull) {
      tgc_set_error("radius: %s point %llu has a non-finite coordinate", set ? "pos_src" : "pos_dst", h.bad[set]);
      return TG_ERR_INVALID_ARGUMENT;
    }
  const long long nnz = (long long)h.nnz;
  const bool thread_sort = h.maxlen <= (unsigned long long)kSortMax;

  size_t seg_bytes = 0, morton_bytes = 0;
  if (!thread_sort)
    RAD_CUB(cub::DeviceSegmentedSort::SortKeys(nullptr, seg_bytes, (const int *)nullptr, (int *)nullptr, nnz, n_dst,
                                               (const long long *)nullptr, (const long long *)nullptr, s));
  if (d_perm)
    RAD_CUB(cub::DeviceRadixSort::SortPairs(nullptr, morton_bytes, (const unsigned long long *)nullptr,
                                            (unsigned long long *)nullptr, (const long long *)nullptr,
                                            (long long *)nullptr, (int)n_dst, 0, DIM * (63 / DIM), s));
  Layout M;
  size_t o_dd = M.add(a->max_neighbors > 0 ? (size_t)nnz * 8 : 0), o_seg = M.add(seg_bytes),
         o_code = M.add(d_perm ? (size_t)n_dst * 8 : 0), o_code2 = M.add(d_perm ? (size_t)n_dst * 8 : 0),
         o_iota = M.add(d_perm ? (size_t)n_dst * 8 : 0), o_mtmp = M.add(morton_bytes);
  char *w2 = (char *)grab(b, M.off, true, "the row fill");
  if (!w2) return TG_ERR_OUT_OF_MEMORY;
  // rows up to kSortMax are sorted by their thread in place; longer ones go through a second
  // buffer and CUB's segmented sort
  const size_t col_bytes = (size_t)(nnz > 0 ? nnz : 1) * 4;
  int *col = (int *)grab(b, col_bytes, !thread_sort, "col_idx");
  if (!col) return TG_ERR_OUT_OF_MEMORY;
  if (thread_sort) b.col = col;
  k_fill<T, DIM><<<rows_blocks, rows_threads, 0, s>>>(grid, pd, spos, sidx, counts, n_dst, a->square, skip_self,
                                                      a->max_neighbors, cc, cnt, col, (double *)(w2 + o_dd),
                                                      thread_sort);
  TGC_LAUNCHED("radius fill");
  if (!thread_sort) {
    b.col = (int32_t *)grab(b, col_bytes, false, "col_idx");
    if (!b.col) return TG_ERR_OUT_OF_MEMORY;
    RAD_CUB(cub::DeviceSegmentedSort::SortKeys(w2 + o_seg, seg_bytes, (const int *)col, (int *)b.col, nnz, n_dst,
                                               (const long long *)cnt, (const long long *)cnt + 1, s));
  }
  if (ev) TGC_CUDA(cudaEventRecord(ev[4], s));

  if (d_perm && n_dst > 0) {
    unsigned long long *code = (unsigned long long *)(w2 + o_code), *code2 = (unsigned long long *)(w2 + o_code2);
    long long *iota = (long long *)(w2 + o_iota);
    k_morton<T><<<tgc_blocks(n_dst, 256), 256, 0, s>>>(pd, n_dst, DIM, grid, code, iota);
    TGC_LAUNCHED("radius morton");
    RAD_CUB(cub::DeviceRadixSort::SortPairs(w2 + o_mtmp, morton_bytes, code, code2, iota, (long long *)d_perm,
                                            (int)n_dst, 0, DIM * (63 / DIM), s));
  }
  if (ev) TGC_CUDA(cudaEventRecord(ev[5], s));
  *nnz_out = nnz;
  return TG_OK;
}

template <typename T>
tg_status run_dim(Build &b, cudaStream_t s, const cuda_radius_args *a, int64_t *nnz, int64_t *perm) {
  switch (a->dim) {
  case 1: return run<T, 1>(b, s, a, nnz, perm);
  case 2: return run<T, 2>(b, s, a, nnz, perm);
  default: return run<T, 3>(b, s, a, nnz, perm);
  }
}

tg_status check_args(const cuda_radius_args *a, const tgc_allocator *al) {
  auto bad = [](const char *m) {
    tgc_set_error("radius: %s", m);
    return TG_ERR_INVALID_ARGUMENT;
  };
  if (!a || !al || !al->alloc || !al->release) return bad("NULL arguments or allocator");
  if (a->dim < 1 || a->dim > 3) return bad("dim not in 1..3");
  if (a->dtype != TG_F32 && a->dtype != TG_F64) return bad("positions must be f32 or f64");
  if (a->n_dst < 0 || a->n_dst > INT32_MAX || a->n_src < 0 || a->n_src > INT32_MAX)
    return bad("point counts not in 0..INT32_MAX");
  if (!(std::isfinite(a->cutoff) && a->cutoff > 0)) return bad("cutoff must be finite and > 0");
  if (a->max_neighbors < 0) return bad("max_neighbors < 0");
  if (a->square && a->n_src != a->n_dst) return bad("square graph with n_src != n_dst");
  if (a->self_loops && !a->square) return bad("self loops need a square graph");
  if ((a->n_dst > 0 && !a->pos_dst) || (!a->square && a->n_src > 0 && !a->pos_src)) return bad("NULL positions");
  return TG_OK;
}

} // namespace

extern "C" tg_status cuda_radius_build(tgc_stream s, const cuda_radius_args *a, const tgc_allocator *al,
                                       int64_t **d_row_ptr, int32_t **d_col_idx, int64_t *nnz, int64_t *d_perm) {
  if (d_row_ptr) *d_row_ptr = nullptr;
  if (d_col_idx) *d_col_idx = nullptr;
  if (nnz) *nnz = 0;
  if (!d_row_ptr || !d_col_idx || !nnz) {
    tgc_set_error("radius: NULL outputs");
    return TG_ERR_INVALID_ARGUMENT;
  }
  tg_status st = check_args(a, al);
  if (st != TG_OK) return st;
  Build b = {};
  b.al = al;
  int64_t n = 0;
  st = a->dtype == TG_F32 ? run_dim<float>(b, (cudaStream_t)s, a, &n, d_perm)
                          : run_dim<double>(b, (cudaStream_t)s, a, &n, d_perm);
  for (int q = 0; q < b.ns; q++)
    al->release(al->ctx, b.scratch[q]);
  if (st != TG_OK) {
    if (b.row_ptr) al->release(al->ctx, b.row_ptr);
    if (b.col) al->release(al->ctx, b.col);
    return st;
  }
  *d_row_ptr = b.row_ptr;
  *d_col_idx = b.col;
  *nnz = n;
  return TG_OK;
}
