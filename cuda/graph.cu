// Graph gather, reduce and edge softmax (cuda/graph.h) on the walker of graph_walk.cuh.
// Column kernels (gather, reduce): a unit is (segment, slice of G * V columns); each lane owns V
// consecutive columns (16-byte vectors when every tensor is aligned and W % V == 0).
// Softmax: a unit is (row, head) with one lane; the row's sum is a second launch.
#include "graph_walk.cuh"

namespace tgg {

// Units and lane columns of a column kernel: segment seg, columns [off, off + V) if active.
struct Cols {
  int64_t W, nch, NB;
  int G;
  __device__ __forceinline__ void at(int64_t u, int lane, int V, int64_t &seg, int64_t &off, bool &active) const {
    seg = u / NB;
    const int64_t ch = (u - seg * NB) * G + lane;
    active = ch < nch;
    off = ch * V;
  }
};
template <int V> static Cols cols_for(int64_t W) {
  Cols c;
  c.W = W;
  c.nch = (W + V - 1) / V;
  c.G = lanes_for(c.nch);
  c.NB = (c.nch + c.G - 1) / c.G;
  return c;
}

// out[seg] (+)= SUM / MEAN / MAX over the segment's entries k of vals[idx ? idx[k] : k].
template <typename T, int V, bool MAX, bool IDX> struct SegReduce {
  static constexpr int kU = V == 1 ? 8 : 4;
  static constexpr bool kMerge = true;
  static constexpr int kMinBlocks = sizeof(T) == 4 ? 4 : 2;
  int64_t units;
  int G;
  Cols cl;
  const int64_t *seg_ptr, *idx;
  const T *vals;
  T *out;
  int accumulate, mean;
  struct C {
    int64_t seg, off;
    bool active;
  };
  struct S {
    float a[V];
  };
  struct L {
    Pack<T, V> r;
  };
  __device__ void unit(int64_t u, int lane, C &c, int64_t &b, int64_t &e) const {
    cl.at(u, lane, V, c.seg, c.off, c.active);
    b = seg_ptr[c.seg];
    e = seg_ptr[c.seg + 1];
  }
  __device__ void init(S &s, const C &) const {
#pragma unroll
    for (int q = 0; q < V; ++q)
      s.a[q] = MAX ? -INFINITY : 0.f;
  }
  __device__ void load(L &l, const C &c, int64_t k) const {
    if (c.active) l.r = ldp<T, V>(vals + (IDX ? idx[k] : k) * cl.W + c.off);
  }
  // MAX: a NaN, once seen, stays the max.
  __device__ void step(S &s, const L &l, const C &c, int64_t) const {
    if (!c.active) return;
    float f[V];
    unpack<T, V>(l.r, f);
#pragma unroll
    for (int q = 0; q < V; ++q)
      s.a[q] = MAX ? ((f[q] > s.a[q] || f[q] != f[q]) ? f[q] : s.a[q]) : s.a[q] + f[q];
  }
  __device__ void merge(S &a, const S &b) const {
#pragma unroll
    for (int q = 0; q < V; ++q)
      a.a[q] = MAX ? ((b.a[q] > a.a[q] || (b.a[q] != b.a[q] && a.a[q] == a.a[q])) ? b.a[q] : a.a[q]) : a.a[q] + b.a[q];
  }
  __device__ void finish(const S &s, const C &c, int64_t b, int64_t e) const {
    if (!c.active) return;
    float v[V];
#pragma unroll
    for (int q = 0; q < V; ++q)
      v[q] = e == b ? 0.f : mean ? s.a[q] / (float)(e - b) : s.a[q];
    T *o = out + c.seg * cl.W + c.off;
    if (accumulate) {
      float f[V];
      unpack<T, V>(ldp<T, V>(o), f);
#pragma unroll
      for (int q = 0; q < V; ++q)
        v[q] += f[q];
    }
    stp<T, V>(o, v);
  }
};

// Per-edge writes of a row: GATHER_SRC out[k] = x[col[k]]; GATHER_DST out[k] = x[row];
// RED_BWD out[k] += x[row] (/ deg for MEAN).
enum { GATHER_SRC = 0, GATHER_DST = 1, RED_BWD = 2 };
template <typename T, int V, int MODE> struct RowWrite {
  static constexpr int kU = V == 1 ? 8 : 4;
  static constexpr bool kMerge = false;
  static constexpr int kMinBlocks = 3;
  int64_t units;
  int G;
  Cols cl;
  const int64_t *row_ptr;
  const int32_t *col;
  const T *x;
  T *out;
  int mean;
  struct C {
    int64_t seg, off;
    bool active;
    float g[V];
  };
  struct S {};
  struct L {
    Pack<T, V> r;
  };
  __device__ void unit(int64_t u, int lane, C &c, int64_t &b, int64_t &e) const {
    cl.at(u, lane, V, c.seg, c.off, c.active);
    b = row_ptr[c.seg];
    e = row_ptr[c.seg + 1];
    if (MODE != GATHER_SRC && c.active) {
      unpack<T, V>(ldp<T, V>(x + c.seg * cl.W + c.off), c.g);
      if (MODE == RED_BWD && mean && e > b)
#pragma unroll
        for (int q = 0; q < V; ++q)
          c.g[q] /= (float)(e - b);
    }
  }
  __device__ void init(S &, const C &) const {}
  __device__ void load(L &l, const C &c, int64_t k) const {
    if (!c.active) return;
    if (MODE == GATHER_SRC) l.r = ldp<T, V>(x + (int64_t)col[k] * cl.W + c.off);
    if (MODE == RED_BWD) l.r = ldp<T, V>(out + k * cl.W + c.off);
  }
  __device__ void step(S &, const L &l, const C &c, int64_t k) const {
    if (!c.active) return;
    T *o = out + k * cl.W + c.off;
    if (MODE == GATHER_SRC) {
      *reinterpret_cast<Pack<T, V> *>(o) = l.r;
    } else if (MODE == GATHER_DST) {
      stp<T, V>(o, c.g);
    } else {
      float f[V];
      unpack<T, V>(l.r, f);
#pragma unroll
      for (int q = 0; q < V; ++q)
        f[q] += c.g[q];
      stp<T, V>(o, f);
    }
  }
};

// reduce MAX backward: per column, the first edge reaching the max (NaN: the first NaN) gets dout.
template <typename T, int V> struct MaxBwd {
  static constexpr int kU = V == 1 ? 8 : 4;
  static constexpr bool kMerge = true;
  static constexpr int kMinBlocks = 2;
  int64_t units;
  int G;
  Cols cl;
  const int64_t *row_ptr;
  const T *vals, *dout;
  T *dvals;
  struct C {
    int64_t seg, off;
    bool active;
  };
  struct S {
    float m[V];
    int64_t arg[V];
  };
  struct L {
    Pack<T, V> r;
  };
  __device__ static bool better(float v, float m) { return v > m || (v != v && m == m); }
  __device__ void unit(int64_t u, int lane, C &c, int64_t &b, int64_t &e) const {
    cl.at(u, lane, V, c.seg, c.off, c.active);
    b = row_ptr[c.seg];
    e = row_ptr[c.seg + 1];
  }
  __device__ void init(S &s, const C &) const {
#pragma unroll
    for (int q = 0; q < V; ++q) {
      s.m[q] = -INFINITY;
      s.arg[q] = -1;
    }
  }
  __device__ void load(L &l, const C &c, int64_t k) const {
    if (c.active) l.r = ldp<T, V>(vals + k * cl.W + c.off);
  }
  __device__ void step(S &s, const L &l, const C &c, int64_t k) const {
    if (!c.active) return;
    float f[V];
    unpack<T, V>(l.r, f);
#pragma unroll
    for (int q = 0; q < V; ++q)
      if (s.arg[q] < 0 || better(f[q], s.m[q])) {
        s.m[q] = f[q];
        s.arg[q] = k;
      }
  }
  __device__ void merge(S &a, const S &b) const {
#pragma unroll
    for (int q = 0; q < V; ++q)
      if (b.arg[q] >= 0 && (a.arg[q] < 0 || better(b.m[q], a.m[q]))) {
        a.m[q] = b.m[q];
        a.arg[q] = b.arg[q];
      }
  }
  __device__ void finish(const S &s, const C &c, int64_t, int64_t) const {
    if (!c.active) return;
#pragma unroll
    for (int q = 0; q < V; ++q)
      if (s.arg[q] >= 0) acc1(dvals + s.arg[q] * cl.W + c.off + q, ld1(dout + c.seg * cl.W + c.off + q));
  }
};

// ---------------------------------------------------------------- edge softmax, unit (row, head)
struct RowHead {
  int64_t nq, H;
  const int64_t *row_ptr;
  __device__ __forceinline__ void at(int64_t u, int64_t &i, int64_t &h, int64_t &b, int64_t &e) const {
    i = u / H;
    h = u - i * H;
    b = row_ptr[i];
    e = row_ptr[i + 1];
  }
};

// lse[h, i] = log sum_row exp(s) (online); kind 1: sums[h, i] = sum_row p dp.
template <typename T, int KIND> struct RowSum {
  static constexpr int kU = 4;
  static constexpr bool kMerge = true;
  static constexpr int kMinBlocks = 4;
  int64_t units;
  int G;
  RowHead rh;
  const T *a, *b2; // KIND 0: scores; KIND 1: p, dp
  float *res;
  struct C {
    int64_t i, h;
  };
  struct S {
    float m, l;
  };
  struct L {
    float x, y;
  };
  __device__ void unit(int64_t u, int, C &c, int64_t &b, int64_t &e) const { rh.at(u, c.i, c.h, b, e); }
  __device__ void init(S &s, const C &) const {
    s.m = KIND == 0 ? -INFINITY : 0.f;
    s.l = 0.f;
  }
  __device__ void load(L &l, const C &c, int64_t k) const {
    l.x = ld1(a + k * rh.H + c.h);
    l.y = KIND == 0 ? 0.f : ld1(b2 + k * rh.H + c.h);
  }
  __device__ void step(S &s, const L &l, const C &, int64_t) const {
    if (KIND == 0) {
      float sc, p;
      online(s.m, l.x, sc, p);
      s.l = s.l * sc + p;
    } else {
      s.m += l.x * l.y;
    }
  }
  __device__ void merge(S &x, const S &y) const {
    if (KIND == 0) {
      float fa, fb;
      x.m = online_merge(x.m, y.m, fa, fb);
      x.l = x.l * fa + y.l * fb;
    } else {
      x.m += y.m;
    }
  }
  __device__ void finish(const S &s, const C &c, int64_t, int64_t) const {
    res[c.h * rh.nq + c.i] = KIND == 0 ? lse_of(s.m, s.l) : s.m;
  }
};

// KIND 0: p = exp(s - lse); KIND 1: ds += p (dp - sum).
template <typename T, int KIND> struct RowWriteH {
  static constexpr int kU = 4;
  static constexpr bool kMerge = false;
  static constexpr int kMinBlocks = 4;
  int64_t units;
  int G;
  RowHead rh;
  const T *a, *b2; // KIND 0: scores; KIND 1: p, dp
  const float *r;  // lse or sums [H, Nq]
  T *out;
  struct C {
    int64_t i, h;
    float r;
  };
  struct S {};
  struct L {
    float x, y, o;
  };
  __device__ void unit(int64_t u, int, C &c, int64_t &b, int64_t &e) const {
    rh.at(u, c.i, c.h, b, e);
    c.r = r[c.h * rh.nq + c.i];
  }
  __device__ void init(S &, const C &) const {}
  __device__ void load(L &l, const C &c, int64_t k) const {
    const int64_t at = k * rh.H + c.h;
    l.x = ld1(a + at);
    l.y = KIND == 0 ? 0.f : ld1(b2 + at);
    l.o = KIND == 0 ? 0.f : ld1(out + at);
  }
  __device__ void step(S &, const L &l, const C &c, int64_t k) const {
    const float v = KIND == 0 ? exp_from(l.x, c.r) : l.o + l.x * (l.y - c.r);
    out[k * rh.H + c.h] = tgc_from_f<T>(v);
  }
};

// ---------------------------------------------------------------- launch helpers
template <typename T> static bool vec_ok(int64_t W, std::initializer_list<const void *> ps) {
  return W % tgc_vec_n<T>() == 0 && tgc_vec_count<T>(W, ps) > 0;
}

template <typename T, int V, bool MAX, bool IDX>
static tg_status seg_reduce(cudaStream_t s, int64_t nseg, const int64_t *seg_ptr, const int64_t *idx, int64_t W,
                            const void *vals, void *out, int accumulate, int mean, const char *name) {
  SegReduce<T, V, MAX, IDX> p;
  p.cl = cols_for<V>(W);
  p.G = p.cl.G;
  p.units = nseg * p.cl.NB;
  p.seg_ptr = seg_ptr;
  p.idx = idx;
  p.vals = (const T *)vals;
  p.out = (T *)out;
  p.accumulate = accumulate;
  p.mean = mean;
  return launch(s, p, name);
}
template <typename T, bool MAX>
static tg_status seg_reduce_any(cudaStream_t s, int64_t nseg, const int64_t *seg_ptr, const int64_t *idx, int64_t W,
                                const void *vals, void *out, int accumulate, int mean, const char *name) {
  constexpr int VN = tgc_vec_n<T>();
  const bool v = vec_ok<T>(W, {vals, out});
  if (idx) {
    if (MAX) {
      tgc_set_error("%s: internal: MAX over an index list", name);
      return TG_ERR_INTERNAL;
    }
    if (v) return seg_reduce<T, VN, false, true>(s, nseg, seg_ptr, idx, W, vals, out, accumulate, mean, name);
    return seg_reduce<T, 1, false, true>(s, nseg, seg_ptr, idx, W, vals, out, accumulate, mean, name);
  }
  if (v) return seg_reduce<T, VN, MAX, false>(s, nseg, seg_ptr, idx, W, vals, out, accumulate, mean, name);
  return seg_reduce<T, 1, MAX, false>(s, nseg, seg_ptr, idx, W, vals, out, accumulate, mean, name);
}

template <typename T, int V, int MODE>
static tg_status row_write(cudaStream_t s, const tgc_csr *g, int64_t W, const void *x, void *out, int mean,
                           const char *name) {
  RowWrite<T, V, MODE> p;
  p.cl = cols_for<V>(W);
  p.G = p.cl.G;
  p.units = g->nq * p.cl.NB;
  p.row_ptr = g->row_ptr;
  p.col = g->col_idx;
  p.x = (const T *)x;
  p.out = (T *)out;
  p.mean = mean;
  return launch(s, p, name);
}
template <typename T, int MODE>
static tg_status row_write_any(cudaStream_t s, const tgc_csr *g, int64_t W, const void *x, void *out, int mean,
                               const char *name) {
  constexpr int VN = tgc_vec_n<T>();
  if (vec_ok<T>(W, {x, out})) return row_write<T, VN, MODE>(s, g, W, x, out, mean, name);
  return row_write<T, 1, MODE>(s, g, W, x, out, mean, name);
}

template <typename T, int V>
static tg_status max_bwd(cudaStream_t s, const tgc_csr *g, int64_t W, const void *vals, const void *dout, void *dvals) {
  MaxBwd<T, V> p;
  p.cl = cols_for<V>(W);
  p.G = p.cl.G;
  p.units = g->nq * p.cl.NB;
  p.row_ptr = g->row_ptr;
  p.vals = (const T *)vals;
  p.dout = (const T *)dout;
  p.dvals = (T *)dvals;
  return launch(s, p, "graph_reduce_max_backward");
}

// ---------------------------------------------------------------- per-dtype bodies
template <typename T>
static tg_status gather_fwd(cudaStream_t s, const tgc_csr *g, int side, int64_t W, const void *x, void *out) {
  if (side == TGC_GRAPH_SOURCE) return row_write_any<T, GATHER_SRC>(s, g, W, x, out, 0, "graph_gather_source");
  return row_write_any<T, GATHER_DST>(s, g, W, x, out, 0, "graph_gather_dest");
}
template <typename T>
static tg_status gather_bwd(cudaStream_t s, const tgc_csr *g, int side, int64_t W, const void *dout, void *dx) {
  if (side == TGC_GRAPH_SOURCE)
    return seg_reduce_any<T, false>(s, g->nk, g->t_ptr, g->t_edge, W, dout, dx, 1, 0, "graph_gather_source_backward");
  return seg_reduce_any<T, false>(s, g->nq, g->row_ptr, nullptr, W, dout, dx, 1, 0, "graph_gather_dest_backward");
}
template <typename T>
static tg_status reduce_fwd(cudaStream_t s, const tgc_csr *g, int kind, int64_t W, const void *vals, void *out) {
  if (kind == TGC_GRAPH_MAX)
    return seg_reduce_any<T, true>(s, g->nq, g->row_ptr, nullptr, W, vals, out, 0, 0, "graph_reduce_max");
  return seg_reduce_any<T, false>(s, g->nq, g->row_ptr, nullptr, W, vals, out, 0, kind == TGC_GRAPH_MEAN,
                                  "graph_reduce_sum");
}
template <typename T>
static tg_status reduce_bwd(cudaStream_t s, const tgc_csr *g, int kind, int64_t W, const void *vals, const void *dout,
                            void *dvals) {
  constexpr int VN = tgc_vec_n<T>();
  if (kind == TGC_GRAPH_MAX) {
    if (vec_ok<T>(W, {vals, dout, dvals})) return max_bwd<T, VN>(s, g, W, vals, dout, dvals);
    return max_bwd<T, 1>(s, g, W, vals, dout, dvals);
  }
  return row_write_any<T, RED_BWD>(s, g, W, dout, dvals, kind == TGC_GRAPH_MEAN, "graph_reduce_sum_backward");
}

template <typename T>
static tg_status softmax_fwd(cudaStream_t s, const tgc_csr *g, int64_t H, const void *scores, void *p, float *lse) {
  RowHead rh{g->nq, H, g->row_ptr};
  RowSum<T, 0> a;
  a.units = g->nq * H;
  a.G = 1;
  a.rh = rh;
  a.a = (const T *)scores;
  a.b2 = nullptr;
  a.res = lse;
  tg_status st = launch(s, a, "graph_softmax_lse");
  if (st != TG_OK) return st;
  RowWriteH<T, 0> w;
  w.units = g->nq * H;
  w.G = 1;
  w.rh = rh;
  w.a = (const T *)scores;
  w.b2 = nullptr;
  w.r = lse;
  w.out = (T *)p;
  return launch(s, w, "graph_softmax_write");
}
template <typename T>
static tg_status softmax_bwd(cudaStream_t s, const tgc_csr *g, int64_t H, const void *p, const void *dp, void *ds,
                             float *sums) {
  RowHead rh{g->nq, H, g->row_ptr};
  RowSum<T, 1> a;
  a.units = g->nq * H;
  a.G = 1;
  a.rh = rh;
  a.a = (const T *)p;
  a.b2 = (const T *)dp;
  a.res = sums;
  tg_status st = launch(s, a, "graph_softmax_backward_sum");
  if (st != TG_OK) return st;
  RowWriteH<T, 1> w;
  w.units = g->nq * H;
  w.G = 1;
  w.rh = rh;
  w.a = (const T *)p;
  w.b2 = (const T *)dp;
  w.r = sums;
  w.out = (T *)ds;
  return launch(s, w, "graph_softmax_backward_write");
}

static tg_status check_ptrs(const char *op, std::initializer_list<const void *> ps) {
  for (const void *p : ps)
    if (!p) {
      tgc_set_error("%s: a tensor pointer is NULL", op);
      return TG_ERR_INVALID_ARGUMENT;
    }
  return TG_OK;
}

} // namespace tgg

using namespace tgg;

#define TGG_TRY(x)                                                                                                     \
  do {                                                                                                                 \
    tg_status st_ = (x);                                                                                               \
    if (st_ != TG_OK) return st_;                                                                                      \
  } while (0)

extern "C" tg_status cuda_graph_gather_forward(tgc_stream s, const tgc_csr *g, tgc_graph_side side, tg_dtype dt,
                                               int64_t W, const void *x, void *out) {
  const char *op = "cuda_graph_gather_forward";
  TGG_TRY(check_csr(g, op, false));
  if (W < 1 || (side != TGC_GRAPH_SOURCE && side != TGC_GRAPH_DEST)) {
    tgc_set_error("%s: W %lld < 1 or bad side %d", op, (long long)W, (int)side);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (g->nnz == 0 || (side == TGC_GRAPH_DEST ? g->nq : g->nk) == 0) return TG_OK;
  TGG_TRY(check_ptrs(op, {x, out}));
  TGG_DISPATCH(dt, op, gather_fwd, s, g, (int)side, W, x, out)
}

extern "C" tg_status cuda_graph_gather_backward(tgc_stream s, const tgc_csr *g, tgc_graph_side side, tg_dtype dt,
                                                int64_t W, const void *dout, void *dx) {
  const char *op = "cuda_graph_gather_backward";
  TGG_TRY(check_csr(g, op, side == TGC_GRAPH_SOURCE));
  if (W < 1 || (side != TGC_GRAPH_SOURCE && side != TGC_GRAPH_DEST)) {
    tgc_set_error("%s: W %lld < 1 or bad side %d", op, (long long)W, (int)side);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (!dx || g->nnz == 0) return TG_OK;
  TGG_TRY(check_ptrs(op, {dout}));
  TGG_DISPATCH(dt, op, gather_bwd, s, g, (int)side, W, dout, dx)
}

extern "C" tg_status cuda_graph_reduce_forward(tgc_stream s, const tgc_csr *g, tgc_graph_reduce kind, tg_dtype dt,
                                               int64_t W, const void *vals, void *out) {
  const char *op = "cuda_graph_reduce_forward";
  TGG_TRY(check_csr(g, op, false));
  if (W < 1 || kind < TGC_GRAPH_SUM || kind > TGC_GRAPH_MAX) {
    tgc_set_error("%s: W %lld < 1 or bad kind %d", op, (long long)W, (int)kind);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (g->nq == 0) return TG_OK;
  TGG_TRY(check_ptrs(op, {out}));
  if (g->nnz > 0) TGG_TRY(check_ptrs(op, {vals}));
  TGG_DISPATCH(dt, op, reduce_fwd, s, g, (int)kind, W, vals, out)
}

extern "C" tg_status cuda_graph_reduce_backward(tgc_stream s, const tgc_csr *g, tgc_graph_reduce kind, tg_dtype dt,
                                                int64_t W, const void *vals, const void *dout, void *dvals) {
  const char *op = "cuda_graph_reduce_backward";
  TGG_TRY(check_csr(g, op, false));
  if (W < 1 || kind < TGC_GRAPH_SUM || kind > TGC_GRAPH_MAX) {
    tgc_set_error("%s: W %lld < 1 or bad kind %d", op, (long long)W, (int)kind);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (!dvals || g->nnz == 0) return TG_OK;
  TGG_TRY(check_ptrs(op, {dout}));
  if (kind == TGC_GRAPH_MAX) TGG_TRY(check_ptrs(op, {vals}));
  TGG_DISPATCH(dt, op, reduce_bwd, s, g, (int)kind, W, vals, dout, dvals)
}

extern "C" tg_status cuda_graph_softmax_forward(tgc_stream s, const tgc_csr *g, tg_dtype dt, int64_t H,
                                                const void *scores, void *p, float *lse) {
  const char *op = "cuda_graph_softmax_forward";
  TGG_TRY(check_csr(g, op, false));
  if (H < 1) {
    tgc_set_error("%s: H %lld < 1", op, (long long)H);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (g->nq == 0) return TG_OK;
  TGG_TRY(check_ptrs(op, {lse}));
  if (g->nnz > 0) TGG_TRY(check_ptrs(op, {scores, p}));
  TGG_DISPATCH(dt, op, softmax_fwd, s, g, H, scores, p, lse)
}

extern "C" size_t cuda_graph_softmax_backward_workspace(const tgc_csr *g, int64_t H) {
  return g && g->nq > 0 && H > 0 ? (size_t)g->nq * (size_t)H * sizeof(float) : 0;
}

extern "C" tg_status cuda_graph_softmax_backward(tgc_stream s, const tgc_csr *g, tg_dtype dt, int64_t H, const void *p,
                                                 const void *dp, void *dscores, void *workspace,
                                                 size_t workspace_bytes) {
  const char *op = "cuda_graph_softmax_backward";
  TGG_TRY(check_csr(g, op, false));
  if (H < 1) {
    tgc_set_error("%s: H %lld < 1", op, (long long)H);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (!dscores || g->nnz == 0) return TG_OK;
  TGG_TRY(check_ptrs(op, {p, dp, workspace}));
  if (workspace_bytes < cuda_graph_softmax_backward_workspace(g, H)) {
    tgc_set_error("%s: workspace of %zu bytes, %zu needed", op, workspace_bytes,
                  cuda_graph_softmax_backward_workspace(g, H));
    return TG_ERR_INVALID_ARGUMENT;
  }
  TGG_DISPATCH(dt, op, softmax_bwd, s, g, H, p, dp, dscores, (float *)workspace)
}
