// Pieces shared by the tg_edge_attention kernels (cuda/edge_attention.cu, cuda/edge_attention_bwd.cu).
// C++ only. Math and notation: cuda/edge_attention.h.
//
// One warp per segment (a destination row, or a source's transposed entries), walked in batches of
// up to 32 edges. Score phase: lane = edge; the lane evaluates the score MLP of its edge
//   a[k] = c[k] + g[k] + sum_d wp[d, k] dpos[d] + sum_f we[f, k] fe[f]
// where c is the segment's constant vector (b1 + V[i] on a row, b1 + U[j] on a source) kept in the
// warp's shared memory and g the other node's vector gathered from global memory, 8 units at a
// time (16-byte loads). Column phase: the warp is split into groups of G lanes, a group per edge,
// a lane per V-column chunk of the node's [H * F] feature row (values, dout); groups take edges
// t = grp, grp + 32 / G, ... and their partial sums are combined in a fixed butterfly.
#pragma once
#include "edge_attention.h"
#include "graph_walk.cuh"

namespace tgea {
using tgg::Drop;
using tgg::Pack;

constexpr int kMaxH = 8, kMaxDim = 3, kMaxFe = 16, kMaxHF = 1024;

__device__ __forceinline__ float leaky(float x, float slope) { return x > 0.f ? x : slope * x; }
__device__ __forceinline__ float leaky_d(float x, float slope) { return x > 0.f ? 1.f : slope; }
// e^x as ex2.approx.ftz(x log2 e): __expf's instruction without its fix-up for results below
// 2^-126 (those flush to 0 here): three instructions fewer an exponential (the lane and slice
// kernels' edge loops).
__device__ __forceinline__ float exp_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.44269502f));
  return y;
}

// Everything a kernel reads; unused pointers NULL.
struct Args {
  int64_t nq, nk, H, F, HF;
  int hid, dim, Fe;
  tg_dtype dt;
  float slope;
  Drop drop;
  int G, R;   // column phase: lanes per group, chunks per lane
  int gvec;   // U and V rows 16-byte aligned (vector gathers)
  int vvec;   // values / out / dout rows 16-byte aligned and HF a multiple of the vector width
  int nblk;   // backward destination pass: blocks (== partial sets)
  int P;      // floats per weight partial set
  int wgrad;  // weight gradients wanted
  int edges;  // backward destination pass walks the edges (else D only)
  int srcda;  // backward source pass needs da (dU or dps wanted)
  int rows;   // packed kernels: destination rows per chunk (rows_for(nq))
  int srows;  // packed kernels: sources per chunk (rows_for(nk))
  int lanes;  // lane kernels: lanes per destination row (lanes_ln(nq))
  int slanes; // lane kernels: lanes per source (lanes_ln(nk)); slice kernels: slices per source
  int slice;  // slice kernels: lanes an edge (8 or 16; 0: not the slice kernels)
  int big;    // lane kernels: the (H 4, F 2) large-graph rule applies (ln_big_of)
  const int64_t *rp, *tp, *te;
  const int32_t *ci, *tr;
  const int32_t *ro, *so; // schedules of the rows and of the sources (NULL: identity)
  const int32_t *rmap;    // renumbered: old index of each new row (out, dout, fout), else NULL
  void *dnew;             // renumbered backward: dout in the new numbering (dst pass writes, src reads)
  const void *U, *V, *fe, *vals, *wp, *we, *b1, *w2, *b2;
  const float *ps, *pd;
  void *out;
  float *lse;
  const void *fout, *dout;
  const float *lse_in;
  float *D, *part;
  tgc_edge_grads g;
};

// The r-th segment handed out under schedule o (NULL: r itself).
__device__ __forceinline__ int64_t sched(const int32_t *o, int64_t r) { return o ? (int64_t)__ldg(o + r) : r; }

template <typename T> __device__ __forceinline__ float ldf(const void *p, int64_t i) {
  return tgc_to_f(static_cast<const T *>(p)[i]);
}
template <typename T> __device__ __forceinline__ void addf(void *p, int64_t i, float v) {
  T *q = static_cast<T *>(p) + i;
  *q = tgc_from_f<T>(tgc_to_f(*q) + v);
}

// The score MLP's weights in f32, heads padded to kMaxH with zeros, rows padded with zeros. 16-byte
// aligned rows: the score phase reads 4 consecutive weights with one shared load.
template <int HID> struct Wts {
  alignas(16) float wp[kMaxDim][HID];
  alignas(16) float we[kMaxFe][HID];
  alignas(16) float b1[HID];
  alignas(16) float w2[HID][kMaxH];
  alignas(16) float b2[kMaxH];
};
template <typename T, int HID> __device__ void load_wts(Wts<HID> &w, const Args &a) {
  for (int t = threadIdx.x; t < kMaxDim * HID; t += blockDim.x) {
    const int d = t / HID, k = t % HID;
    w.wp[d][k] = d < a.dim && a.wp ? ldf<T>(a.wp, t) : 0.f;
  }
  for (int t = threadIdx.x; t < kMaxFe * HID; t += blockDim.x) {
    const int f = t / HID, k = t % HID;
    w.we[f][k] = f < a.Fe && a.we ? ldf<T>(a.we, t) : 0.f;
  }
  for (int t = threadIdx.x; t < HID * kMaxH; t += blockDim.x) {
    const int k = t / kMaxH, h = t % kMaxH;
    w.w2[k][h] = h < a.H && a.w2 ? ldf<T>(a.w2, k * a.H + h) : 0.f;
  }
  for (int t = threadIdx.x; t < HID; t += blockDim.x)
    w.b1[t] = a.b1 ? ldf<T>(a.b1, t) : 0.f;
  for (int t = threadIdx.x; t < kMaxH; t += blockDim.x)
    w.b2[t] = t < a.H && a.b2 ? ldf<T>(a.b2, t) : 0.f;
}

// 8 consecutive elements of a gathered row as f32 (zeros for a NULL row).
template <typename T> __device__ __forceinline__ void ld8(const T *p, int vec, float (&f)[8]) {
  if (!p) {
#pragma unroll
    for (int q = 0; q < 8; ++q)
      f[q] = 0.f;
  } else if (vec) {
    if constexpr (sizeof(T) == 4) {
      const Pack<T, 4> x = tgg::ldp<T, 4>(p), y = tgg::ldp<T, 4>(p + 4);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        f[q] = tgc_to_f(x.e[q]);
        f[q + 4] = tgc_to_f(y.e[q]);
      }
    } else {
      const Pack<T, 8> x = tgg::ldp<T, 8>(p);
#pragma unroll
      for (int q = 0; q < 8; ++q)
        f[q] = tgc_to_f(x.e[q]);
    }
  } else {
#pragma unroll
    for (int q = 0; q < 8; ++q)
      f[q] = tgc_to_f(p[q]);
  }
}

// Pre-activations a[8] of units k0 .. k0 + 7 for one edge: c the segment's constant vector (shared
// memory), gr and gv gathered rows (NULL: zero; the packed kernels gather both U[j] and V[i] and
// pass c = b1), dp the edge's position difference, fes its edge features in shared memory at
// fes[f * 32] (column of the lane).
template <typename T, int HID>
__device__ __forceinline__ void pre8(const Args &a, const Wts<HID> &w, const float *c, const T *gr, const T *gv, int k0,
                                     const float (&dp)[kMaxDim], const float *fes, float (&x)[8]) {
  ld8<T>(gr ? gr + k0 : nullptr, a.gvec, x);
  if (gv) {
    float y[8];
    ld8<T>(gv + k0, a.gvec, y);
#pragma unroll
    for (int q = 0; q < 8; ++q)
      x[q] += y[q];
  }
#pragma unroll
  for (int q = 0; q < 8; ++q)
    x[q] += c[k0 + q];
#pragma unroll
  for (int d = 0; d < kMaxDim; ++d)
    if (d < a.dim)
#pragma unroll
      for (int q = 0; q < 8; ++q)
        x[q] = fmaf(w.wp[d][k0 + q], dp[d], x[q]);
#pragma unroll 1
  for (int f = 0; f < a.Fe; ++f) {
    const float v = fes[f * 32];
#pragma unroll
    for (int q = 0; q < 8; ++q)
      x[q] = fmaf(w.we[f][k0 + q], v, x[q]);
  }
}

// Row stride of the backward's per-warp pre-activation stash [unit][edge] (conflict free both ways).
constexpr int kAS = 33;

// The HP head scores of one edge (heads >= H come out as 0: zero weights). KEEP: also stores the
// pre-activations a[k] at keep[k * kAS] (the backward reuses them instead of recomputing).
template <typename T, int HID, int HP, bool KEEP = false>
__device__ __forceinline__ void scores(const Args &a, const Wts<HID> &w, const float *c, const T *gr, const T *gv,
                                       const float (&dp)[kMaxDim], const float *fes, float (&s)[HP],
                                       float *keep = nullptr) {
#pragma unroll
  for (int h = 0; h < HP; ++h)
    s[h] = w.b2[h];
#pragma unroll
  for (int k0 = 0; k0 < HID; k0 += 8) {
    float x[8];
    pre8<T, HID>(a, w, c, gr, gv, k0, dp, fes, x);
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      if constexpr (KEEP) keep[(k0 + q) * kAS] = x[q];
      const float z = leaky(x[q], a.slope);
#pragma unroll
      for (int h = 0; h < HP; ++h)
        s[h] = fmaf(z, w.w2[k0 + q][h], s[h]);
    }
  }
}

// An edge's geometry and edge features: dp = ps[j] - pd[i] (NULL positions read as 0), fe row
// stashed at fes[f * 32].
template <typename T>
__device__ __forceinline__ void edge_in(const Args &a, int64_t e, int64_t j, int64_t i, float (&dp)[kMaxDim],
                                        float *fes) {
#pragma unroll
  for (int d = 0; d < kMaxDim; ++d) {
    const float s = d < a.dim && a.ps ? a.ps[j * a.dim + d] : 0.f;
    const float t = d < a.dim && a.pd ? a.pd[i * a.dim + d] : 0.f;
    dp[d] = s - t;
  }
#pragma unroll 1
  for (int f = 0; f < a.Fe; ++f)
    fes[f * 32] = a.fe ? ldf<T>(a.fe, e * a.Fe + f) : 0.f;
}

// ---------------------------------------------------------------- column phase
// Lane (grp, gl) owns chunks c = gl + G r (r < RM, r < R) of V columns of a [H * F] row.
template <typename T, int RM> struct Cols {
  static constexpr int V = tgc_vec_n<T>();
  int G, NG, grp, gl;
  int hq[RM][V]; // head of each owned column (clamped for columns past HF)
  __device__ __forceinline__ void init(const Args &a, int lane) {
    G = a.G;
    NG = 32 / G;
    grp = lane / G;
    gl = lane % G;
#pragma unroll
    for (int r = 0; r < RM; ++r)
#pragma unroll
      for (int q = 0; q < V; ++q) {
        int64_t col = (int64_t)(gl + G * r) * V + q;
        if (col >= a.HF) col = a.HF - 1;
        hq[r][q] = (int)(col / a.F);
      }
  }
  // Head of owned column (r, q) as an index into per-head arrays of HP entries.
  template <int HP> __device__ __forceinline__ int head(int r, int q) const { return HP == 1 ? 0 : hq[r][q]; }
  __device__ __forceinline__ bool has(const Args &a, int r) const {
    return r < a.R && (int64_t)(gl + G * r) * V < a.HF;
  }
  __device__ __forceinline__ int64_t col(int r) const { return (int64_t)(gl + G * r) * V; }
  // Row n's chunk r as f32 (columns past HF read as 0).
  __device__ __forceinline__ void load(const Args &a, const void *base, int64_t n, int r, float (&f)[V]) const {
    const T *p = static_cast<const T *>(base) + n * a.HF + col(r);
    if (a.vvec) {
      const Pack<T, V> x = tgg::ldp<T, V>(p);
#pragma unroll
      for (int q = 0; q < V; ++q)
        f[q] = tgc_to_f(x.e[q]);
    } else {
#pragma unroll
      for (int q = 0; q < V; ++q)
        f[q] = col(r) + q < a.HF ? tgc_to_f(p[q]) : 0.f;
    }
  }
  // Row n's chunk r += f (accumulate into storage).
  __device__ __forceinline__ void add(const Args &a, void *base, int64_t n, int r, const float (&f)[V],
                                      bool accumulate) const {
    T *p = static_cast<T *>(base) + n * a.HF + col(r);
    if (a.vvec) {
      float o[V];
      if (accumulate) {
        const Pack<T, V> x = tgg::ldp<T, V>(p);
#pragma unroll
        for (int q = 0; q < V; ++q)
          o[q] = tgc_to_f(x.e[q]) + f[q];
      } else {
#pragma unroll
        for (int q = 0; q < V; ++q)
          o[q] = f[q];
      }
      tgg::stp<T, V>(p, o);
    } else {
#pragma unroll
      for (int q = 0; q < V; ++q)
        if (col(r) + q < a.HF) p[q] = tgc_from_f<T>(accumulate ? tgc_to_f(p[q]) + f[q] : f[q]);
    }
  }
  // Sum of x over the warp's groups (same lane of each group), fixed butterfly.
  __device__ __forceinline__ float across(float x) const {
    for (int o = G; o < 32; o <<= 1)
      x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
  }
};

// Per-head dot of the lane's owned columns of two rows (x, y in registers), summed over the group.
template <int HP, int RM, int V>
__device__ __forceinline__ void head_dot(const float (&x)[RM][V], const float (&y)[RM][V], const int (&hq)[RM][V],
                                         int G, float (&d)[HP]) {
#pragma unroll
  for (int h = 0; h < HP; ++h)
    d[h] = 0.f;
#pragma unroll
  for (int r = 0; r < RM; ++r)
#pragma unroll
    for (int q = 0; q < V; ++q) {
      const float v = x[r][q] * y[r][q];
#pragma unroll
      for (int h = 0; h < HP; ++h)
        d[h] += HP == 1 || hq[r][q] == h ? v : 0.f;
    }
#pragma unroll
  for (int h = 0; h < HP; ++h)
    d[h] = tgg::group_sum(d[h], G);
}

// ---------------------------------------------------------------- backward sizes
constexpr int kKB = 16; // hidden units per block of the per-unit phase

// Floats per warp of the backward's edge-feature area: the batch's edge features and their dfe
// ([f][edge], Fe * 32 each), then da of one block of units ([unit][edge], kKB * kAS).
__host__ __device__ constexpr int fe_floats(int Fe) { return Fe > 0 ? 64 * Fe + kKB * kAS : 0; }

// k_src's resident blocks per SM the register budget is set for: the kept pre-activations (HID * 33
// floats per warp) cap hid 64 at 4 blocks (H > 1) and hid 128 at 2 by shared memory, so those may
// use more registers (no spills at H > 1) at no loss of occupancy. (k_dst spills more when given
// more: it keeps the 96 / 80 budget.)
__host__ __device__ constexpr int src_min_blocks(int HID, int HP, int RM) {
  return RM != 1 ? 1 : HID >= 128 ? 2 : HID >= 64 && HP > 1 ? 4 : HP == 1 ? 6 : 5;
}

// ---------------------------------------------------------------- packed walk
// The packed kernels (cuda/edge_attention_pk*.cu) give each warp a chunk of up to kRows consecutive
// segments and take the chunk's edges 32 at a time regardless of segment boundaries, so the score
// phase (lane = edge) keeps every lane busy however short the segments are (average degree ~17
// leaves half the lanes of a warp-per-segment batch idle). The lanes gather both U[j] and V[i].
// Then the batch's pieces of segments are processed in order with the per-segment phases of the
// warp-per-segment kernels, the state of the segment in progress in registers.
constexpr int kRows = 16;

// Segment q of a chunk's offsets rp[0..n] holding edge e: rp[q] <= e < rp[q + 1] (needs
// rp[0] <= e < rp[n]; empty segments never hold an edge).
__device__ __forceinline__ int seg_of(const int64_t *rp, int n, int64_t e) {
  int lo = 0, hi = n; // rp[lo] <= e < rp[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (rp[mid] <= e)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

// The piece [lo, hi) of batch [e0, e0 + nb) that belongs to the segment [rb, re) (warp uniform);
// the segment goes on in the next batch when re > e0 + nb.
__device__ __forceinline__ void piece_of(int64_t rb, int64_t re, int64_t e0, int nb, int &lo, int &hi) {
  lo = (int)((rb > e0 ? rb : e0) - e0);
  hi = (int)((re < e0 + nb ? re : e0 + nb) - e0);
}

// Prefetch into L1 the lines of bytes [p, p + n) (p may be NULL), up to 4 lines: a lane asks for
// the row it (or its warp) gathers a phase later, so the gather's latency overlaps the score phase.
__device__ __forceinline__ void prefetch_row(const void *p, int64_t n) {
  if (!p || n <= 0) return;
  const char *c = static_cast<const char *>(p);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int64_t o = (int64_t)q * 128;
    if (o >= n + 127) break;
    asm volatile("prefetch.L1 [%0];" ::"l"(c + (o < n ? o : n - 1)));
  }
}
// The same for a contiguous span of a chunk's rows, the warp's lanes in parallel (up to 256 lines).
__device__ __forceinline__ void prefetch_span(const void *p, int64_t n, int lane) {
  if (!p || n <= 0) return;
  const char *c = static_cast<const char *>(p);
  for (int64_t o = (int64_t)lane * 128; o < n + 127 && o < 256 * 128; o += 32 * 128)
    asm volatile("prefetch.L1 [%0];" ::"l"(c + (o < n ? o : n - 1)));
}

// Row r of a [*, len] table of T at base (NULL: nothing).
template <typename T> __device__ __forceinline__ void prefetch_of(const void *base, int64_t r, int64_t len) {
  if (base) prefetch_row(static_cast<const T *>(base) + r * len, len * (int64_t)sizeof(T));
}

// Which kernels the launchers take: 0 by hidden width (packed_for), 1 the warp-per-segment ones,
// 2 the packed ones (the bench sets 1 / 2 from TIGA_EA_KERNEL=old / new and for --compare).
extern int g_kernels;
// The default (g_kernels 0): the packed kernels at hid 16, where they were faster forward and
// backward on both bench graphs (run_s7c.sh: f+b 0.659 -> 0.575 ms at 100k, 2.689 -> 2.156 ms at
// 400k, H 1); the warp-per-segment ones from hid 32 on (at hid 64 the packed backward was 9-21 %
// slower; hid 32 and 128 were not timed). Forward and backward always take the same family. A
// function of the sizes only, so the sums' order is too.
static inline bool packed_for(int64_t hid) { return g_kernels == 2 || (g_kernels == 0 && hid <= 16); }
// Segments per chunk, 1..kRows (0: by size, rows_for; the bench may force it: TIGA_EA_ROWS).
extern int g_rows;

// Segments per chunk for n segments: kRows from 65536 segments on, halved below so that a launch
// keeps at least ~4096 warps (a small graph would otherwise leave most of the GPU idle). A function
// of the size alone, so the sums' order depends only on the sizes.
static inline int rows_for(int64_t n) {
  if (g_rows > 0) return g_rows < kRows ? g_rows : kRows;
  int r = 1;
  while (r < kRows && (int64_t)r * 2 * 4096 <= n)
    r *= 2;
  return r;
}

// ---------------------------------------------------------------- host side
constexpr int kDstWarps = 4, kSrcWarps = 4;
constexpr int64_t kMaxDstBlocks = 2048; // fixed: the weight partials' order does not depend on the device

static inline int64_t dst_blocks(int64_t nq) {
  const int64_t b = (nq + kDstWarps - 1) / kDstWarps;
  return b < kMaxDstBlocks ? b : kMaxDstBlocks;
}
// Weight partial layout (floats): dwp [dim][hid], dwe [Fe][hid], db1 [hid], dw2 [H][hid], db2 [H].
static inline int64_t partial_floats(const tgc_edge_attn *a) { return (a->dim + a->Fe + 1 + a->H) * a->hid + a->H; }
// D per row and head (the lane kernels store (lse, D) pairs there: two floats each).
static inline int64_t ws_d_floats(const tgc_csr *g, const tgc_edge_attn *a) { return (2 * g->nq * a->H + 3) & ~3ll; }

static inline tg_status make_args(const char *op, const tgc_csr *g, const tgc_edge_attn *a, const tgc_edge_inputs *in,
                                  bool need_transpose, Args *x) {
  // a renumbered graph (row_map) has no edge ids: only the lane kernels take it (no per-edge data)
  tg_status st = tgg::check_csr(g, op, need_transpose, !(a && a->row_map));
  if (st != TG_OK) return st;
  if (const char *why = cuda_edge_attention_unsupported(a)) {
    tgc_set_error("%s: unsupported: %s", op, why);
    return TG_ERR_UNSUPPORTED;
  }
  if (a->row_map && (a->Fe > 0 || (a->keep > 0 && a->keep < 1))) {
    tgc_set_error("%s: row_map (a renumbered graph) with edge features or dropout (both follow the old numbering)", op);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (!in) {
    tgc_set_error("%s: inputs are NULL", op);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (g->nnz > 0 && g->nq > 0 && (!in->values || !in->w2)) {
    tgc_set_error("%s: values or w2 is NULL", op);
    return TG_ERR_INVALID_ARGUMENT;
  }
  *x = Args{};
  x->nq = g->nq;
  x->nk = g->nk;
  x->H = a->H;
  x->F = a->F;
  x->HF = a->H * a->F;
  x->hid = (int)a->hid;
  x->dim = a->dim;
  x->Fe = a->Fe;
  x->dt = a->dtype;
  x->slope = a->slope;
  x->rp = g->row_ptr;
  x->ci = g->col_idx;
  x->tp = g->t_ptr;
  x->tr = g->t_row;
  x->te = g->t_edge;
  x->ro = a->row_order;
  x->so = a->src_order;
  x->rmap = a->row_map;
  x->dnew = a->row_map ? a->dout_new : nullptr;
  x->U = in->U;
  x->V = in->V;
  x->fe = a->Fe > 0 ? in->fe : nullptr;
  x->vals = in->values;
  x->wp = a->dim > 0 ? in->wp : nullptr;
  x->we = a->Fe > 0 ? in->we : nullptr;
  x->b1 = in->b1;
  x->w2 = in->w2;
  x->b2 = in->b2;
  x->ps = a->dim > 0 ? in->ps : nullptr;
  x->pd = a->dim > 0 ? in->pd : nullptr;
  x->gvec = tgc_aligned(in->U, 16) && tgc_aligned(in->V, 16);
  return tgg::make_drop(g, a->keep, a->seed, a->call, &x->drop, op);
}

// Column phase geometry for the feature rows at ps (values, out, dout, dvalues).
static inline void set_cols(Args *x, std::initializer_list<const void *> ps) {
  const int vn = x->dt == TG_F32 ? 4 : 8;
  const int64_t nc = (x->HF + vn - 1) / vn;
  x->G = tgg::lanes_for(nc);
  x->R = (int)((nc + x->G - 1) / x->G);
  bool al = x->HF % vn == 0;
  for (const void *p : ps)
    al = al && tgc_aligned(p, 16);
  x->vvec = al;
}

// K::run<T, HID, HP, RM>(stream, args) for the call's dtype, hidden width, heads (1, or padded to
// 4 or 8) and chunks per lane (1, or the most any supported H * F needs).
template <class K, typename T, int HID, int HP> static tg_status disp_rm(cudaStream_t s, const Args &a) {
  constexpr int RMAX = kMaxHF / tgc_vec_n<T>() / 32;
  return a.R == 1 ? K::template run<T, HID, HP, 1>(s, a) : K::template run<T, HID, HP, RMAX>(s, a);
}
template <class K, typename T, int HID> static tg_status disp_hp(cudaStream_t s, const Args &a) {
  return a.H == 1   ? disp_rm<K, T, HID, 1>(s, a)
         : a.H <= 4 ? disp_rm<K, T, HID, 4>(s, a)
                    : disp_rm<K, T, HID, kMaxH>(s, a);
}
template <class K, typename T> static tg_status disp_hid(cudaStream_t s, const Args &a) {
  switch (a.hid) {
  case 16: return disp_hp<K, T, 16>(s, a);
  case 32: return disp_hp<K, T, 32>(s, a);
  case 64: return disp_hp<K, T, 64>(s, a);
  default: return disp_hp<K, T, 128>(s, a);
  }
}
template <class K> static tg_status dispatch(cudaStream_t s, const Args &a) {
  return a.dt == TG_F32 ? disp_hid<K, float>(s, a) : disp_hid<K, __nv_bfloat16>(s, a);
}

// The packed kernels' dispatch: every hidden width where something can select them at every width
// (the bench, built with TIGA_EA_PACKED_ALL for --compare and TIGA_EA_KERNEL=new); in the library
// the rule (packed_for) takes them at hid 16 alone, so only those are built (the others would add
// ~5 MB of device code nothing runs: libtiga 73.6 -> 68.7 MB).
template <class K> static tg_status dispatch_packed(cudaStream_t s, const Args &a) {
#ifdef TIGA_EA_PACKED_ALL
  return dispatch<K>(s, a);
#else
  if (a.hid != 16) {
    tgc_set_error("edge attention: the packed kernels are built for hidden width 16 only (got %d)", a.hid);
    return TG_ERR_UNSUPPORTED;
  }
  return a.dt == TG_F32 ? disp_hp<K, float, 16>(s, a) : disp_hp<K, __nv_bfloat16, 16>(s, a);
#endif
}

// Packed launches (cuda/edge_attention_pk.cu, cuda/edge_attention_pk_bwd.cu).
tg_status forward_packed(cudaStream_t s, const Args &a);
tg_status dst_packed(cudaStream_t s, const Args &a);
tg_status src_packed(cudaStream_t s, const Args &a);

// ---------------------------------------------------------------- lane and slice kernels' helpers
// N consecutive f32 at p (N = 1, 2 or a multiple of 4; p aligned to min(N, 4) floats).
template <int N> __device__ __forceinline__ void ld_n(const float *p, float (&x)[N]) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int q = 0; q < N; q += 4) {
      const float4 v = *reinterpret_cast<const float4 *>(p + q);
      x[q] = v.x, x[q + 1] = v.y, x[q + 2] = v.z, x[q + 3] = v.w;
    }
  } else if constexpr (N == 2) {
    const float2 v = *reinterpret_cast<const float2 *>(p);
    x[0] = v.x, x[1] = v.y;
  } else {
    static_assert(N == 1, "ld_n: 1, 2 or a multiple of 4");
    x[0] = *p;
  }
}
template <int N> __device__ __forceinline__ void st_n(float *p, const float (&x)[N]) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int q = 0; q < N; q += 4)
      *reinterpret_cast<float4 *>(p + q) = make_float4(x[q], x[q + 1], x[q + 2], x[q + 3]);
  } else if constexpr (N == 2) {
    *reinterpret_cast<float2 *>(p) = make_float2(x[0], x[1]);
  } else {
    *p = x[0];
  }
}
// p[0..N) = 0
template <int N> __device__ __forceinline__ void st_zero(float *p) {
  float z[N];
#pragma unroll
  for (int q = 0; q < N; ++q)
    z[q] = 0.f;
  st_n<N>(p, z);
}
// p[0..N) += x (a gradient row accumulates into storage)
template <int N> __device__ __forceinline__ void add_n(float *p, const float (&x)[N]) {
  float y[N];
  ld_n<N>(p, y);
#pragma unroll
  for (int q = 0; q < N; ++q)
    y[q] += x[q];
  st_n<N>(p, y);
}
// Every x[q] summed over the lanes l ^ o for o = from, 2 from, ... < to (to a power of two up to 32,
// the lanes of the calling lane's aligned group of `to`): a fixed butterfly whose pairwise sums
// commute, so each lane ends with the same bits as the others of its set.
template <int N> __device__ __forceinline__ void xor_sums(float (&x)[N], int from, int to) {
  const unsigned m = tgg::group_mask(to);
  for (int o = from; o < to; o <<= 1)
#pragma unroll
    for (int q = 0; q < N; ++q)
      x[q] += __shfl_xor_sync(m, x[q], o);
}
// Online-softmax states merged the same way: per head h < NH the running max m[h], the sum l[h] and
// NF accumulators acc[h * NF + f] of a weighted row.
template <int NH, int NF>
__device__ __forceinline__ void xor_merge(float (&m)[NH], float (&l)[NH], float (&acc)[NH * NF], int from, int to) {
  const unsigned gm = tgg::group_mask(to);
  for (int o = from; o < to; o <<= 1)
#pragma unroll
    for (int h = 0; h < NH; ++h) {
      const float mo = __shfl_xor_sync(gm, m[h], o), lo = __shfl_xor_sync(gm, l[h], o);
      const float mn = fmaxf(m[h], mo);
      const float sa = m[h] == -INFINITY ? 0.f : __expf(m[h] - mn), sb = mo == -INFINITY ? 0.f : __expf(mo - mn);
      l[h] = l[h] * sa + lo * sb;
      m[h] = mn;
#pragma unroll
      for (int f = 0; f < NF; ++f) {
        const float ao = __shfl_xor_sync(gm, acc[h * NF + f], o);
        acc[h * NF + f] = acc[h * NF + f] * sa + ao * sb;
      }
    }
}

// Lane kernels (cuda/edge_attention_ln.cu): the small case (f32, hid 16, dim 0, Fe 0, H <= 4,
// listed (H, F) pairs, aligned rows), taken before the packed ones when lanes_ok; forward and
// backward decide alike (the same sizes and the tape's aligned buffers). lanes_ln: lanes per segment
// for n segments (a function of n, or forced by ea->lanes). dst_lanes sets a.nblk to the partial
// sets it writes.
bool lanes_ok(const tgc_edge_attn *ea, const Args &a);
int lanes_ln(const tgc_edge_attn *ea, int64_t n);
// Whether the lane kernels' large-graph rule applies to a call of nq rows (ea->big, else by size).
int ln_big_of(const tgc_edge_attn *ea, int64_t nq);
tg_status forward_lanes(cudaStream_t s, const Args &a);
tg_status dst_lanes(cudaStream_t s, Args &a);
tg_status src_lanes(cudaStream_t s, const Args &a);
// Slice kernels (cuda/edge_attention_sl.cu): f32 at hidden 64, no edge features, H in {1, 2, 4},
// aligned rows; S lanes share an edge. slice_of: S for the call (0: not taken); sl_groups: slices
// per segment for n segments. Forward and backward decide alike; the launchers read a.slice and
// a.lanes / a.slanes (dst_slices sets a.nblk).
int slice_of(const tgc_edge_attn *ea, const Args &a);
int sl_groups(const tgc_edge_attn *ea, int S, int64_t n);
tg_status forward_slices(cudaStream_t s, const Args &a);
tg_status dst_slices(cudaStream_t s, Args &a);
tg_status src_slices(cudaStream_t s, const Args &a);

} // namespace tgea
