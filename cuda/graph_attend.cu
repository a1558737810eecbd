// The attention reducers of cuda/graph.h (attend: a score per edge; gat: LeakyReLU(e_dst + e_src)).
// A unit is (node, head): G lanes share it, lane owns the feature chunks c = lane + G r (r < R) of
// V features each. Forward: one pass per (row, head), online softmax, nothing of size E written.
// Backward: a destination pass (unit (row, head): D = <dout, out>, then per edge dp and ds ->
// dscores, or de_dst for gat) and a source pass over the transpose (unit (source, head): dvalues,
// and de_src for gat), both recomputing p = exp(s - lse) and the dropout mask.
#include "graph_walk.cuh"

namespace tgg {

__device__ __forceinline__ float leaky(float x, float slope) { return x > 0.f ? x : slope * x; }
__device__ __forceinline__ float leaky_d(float x, float slope) { return x > 0.f ? 1.f : slope; }

// Shared by the three kernels: head geometry and the lane's chunks.
struct Heads {
  int64_t nq, H, F;
  int R;
  __device__ __forceinline__ bool valid(int lane, int G, int r, int V) const {
    return r < R && (int64_t)(lane + G * r) * V < F;
  }
  __device__ __forceinline__ int64_t at(int64_t node, int64_t h, int lane, int G, int r, int V) const {
    return (node * H + h) * F + (int64_t)(lane + G * r) * V;
  }
};

template <typename T, int V, int RM, bool GAT> struct AttnFwd {
  static constexpr int kU = RM == 1 ? 4 : 2;
  static constexpr bool kMerge = true;
  static constexpr int kMinBlocks = (RM == 1 && V == 4) ? 3 : 1; // f32 vector path: 80 registers
  int64_t units;
  int G;
  Heads hd;
  const int64_t *row_ptr;
  const int32_t *col;
  const T *sc, *ed, *vals; // sc: scores [E, H] (attend) or e_src [Nk, H] (gat)
  T *out;
  float *lse;
  float slope;
  Drop drop;
  struct C {
    int64_t i, h;
    int lane;
    float ed;
  };
  struct S {
    float m, l, acc[RM][V];
  };
  struct L {
    int32_t j;
    float s;
    Pack<T, V> v[RM];
  };
  __device__ void unit(int64_t u, int lane, C &c, int64_t &b, int64_t &e) const {
    c.i = u / hd.H;
    c.h = u - c.i * hd.H;
    c.lane = lane;
    c.ed = GAT ? ld1(ed + u) : 0.f;
    b = row_ptr[c.i];
    e = row_ptr[c.i + 1];
  }
  __device__ void init(S &s, const C &) const {
    s.m = -INFINITY;
    s.l = 0.f;
#pragma unroll
    for (int r = 0; r < RM; ++r)
#pragma unroll
      for (int q = 0; q < V; ++q)
        s.acc[r][q] = 0.f;
  }
  __device__ void load(L &l, const C &c, int64_t k) const {
    l.j = col[k];
    l.s = GAT ? ld1(sc + (int64_t)l.j * hd.H + c.h) : ld1(sc + k * hd.H + c.h);
#pragma unroll
    for (int r = 0; r < RM; ++r)
      if (hd.valid(c.lane, G, r, V)) l.v[r] = ldp<T, V>(vals + hd.at(l.j, c.h, c.lane, G, r, V));
  }
  __device__ void step(S &s, const L &l, const C &c, int64_t) const {
    const float x = GAT ? leaky(c.ed + l.s, slope) : l.s;
    float sc_, p;
    online(s.m, x, sc_, p);
    s.l = s.l * sc_ + p;
    const float pw = p * drop.w(c.h, c.i, l.j);
#pragma unroll
    for (int r = 0; r < RM; ++r)
      if (hd.valid(c.lane, G, r, V)) {
        float f[V];
        unpack<T, V>(l.v[r], f);
#pragma unroll
        for (int q = 0; q < V; ++q)
          s.acc[r][q] = fmaf(s.acc[r][q], sc_, pw * f[q]);
      }
  }
  __device__ void merge(S &a, const S &b) const {
    float fa, fb;
    a.m = online_merge(a.m, b.m, fa, fb);
    a.l = a.l * fa + b.l * fb;
#pragma unroll
    for (int r = 0; r < RM; ++r)
#pragma unroll
      for (int q = 0; q < V; ++q)
        a.acc[r][q] = a.acc[r][q] * fa + b.acc[r][q] * fb;
  }
  __device__ void finish(const S &s, const C &c, int64_t, int64_t) const {
#pragma unroll
    for (int r = 0; r < RM; ++r)
      if (hd.valid(c.lane, G, r, V)) {
        float o[V];
#pragma unroll
        for (int q = 0; q < V; ++q)
          o[q] = s.l == 0.f ? 0.f : s.acc[r][q] / s.l;
        stp<T, V>(out + hd.at(c.i, c.h, c.lane, G, r, V), o);
      }
    if (c.lane == 0) lse[c.h * hd.nq + c.i] = lse_of(s.m, s.l);
  }
};

// Destination pass of the backward: D = <dout, out>; per edge ds = p (w <dout, v_j> - D);
// attend: dscores += ds; gat: de_dst += sum_row ds leaky'(pre), and D saved for the source pass.
template <typename T, int V, int RM, bool GAT> struct AttnDst {
  static constexpr int kU = RM == 1 ? 4 : 2;
  static constexpr bool kMerge = GAT;
  static constexpr int kMinBlocks = (RM == 1 && V == 4) ? 3 : 1; // f32 vector path: 80 registers
  int64_t units;
  int G;
  Heads hd;
  const int64_t *row_ptr;
  const int32_t *col;
  const T *sc, *ed, *vals, *out, *dout;
  const float *lse;
  T *dscores, *de_dst;
  float *dws;
  int edges; // 0: only D is wanted (gat without de_dst)
  float slope;
  Drop drop;
  struct C {
    int64_t i, h;
    int lane;
    float ed, lse, D, g[RM][V];
  };
  struct S {
    float ds;
  };
  struct L {
    int32_t j;
    float s;
    Pack<T, V> v[RM];
  };
  __device__ void unit(int64_t u, int lane, C &c, int64_t &b, int64_t &e) const {
    c.i = u / hd.H;
    c.h = u - c.i * hd.H;
    c.lane = lane;
    c.ed = GAT ? ld1(ed + u) : 0.f;
    c.lse = lse[c.h * hd.nq + c.i];
    float d = 0.f;
#pragma unroll
    for (int r = 0; r < RM; ++r) {
#pragma unroll
      for (int q = 0; q < V; ++q)
        c.g[r][q] = 0.f;
      if (hd.valid(lane, G, r, V)) {
        const int64_t at = hd.at(c.i, c.h, lane, G, r, V);
        float o[V];
        unpack<T, V>(ldp<T, V>(dout + at), c.g[r]);
        unpack<T, V>(ldp<T, V>(out + at), o);
#pragma unroll
        for (int q = 0; q < V; ++q)
          d = fmaf(c.g[r][q], o[q], d);
      }
    }
    c.D = group_sum(d, G);
    b = row_ptr[c.i];
    e = edges ? row_ptr[c.i + 1] : b;
  }
  __device__ void init(S &s, const C &) const { s.ds = 0.f; }
  __device__ void load(L &l, const C &c, int64_t k) const {
    l.j = col[k];
    l.s = GAT ? ld1(sc + (int64_t)l.j * hd.H + c.h) : ld1(sc + k * hd.H + c.h);
#pragma unroll
    for (int r = 0; r < RM; ++r)
      if (hd.valid(c.lane, G, r, V)) l.v[r] = ldp<T, V>(vals + hd.at(l.j, c.h, c.lane, G, r, V));
  }
  __device__ void step(S &s, const L &l, const C &c, int64_t k) const {
    float d = 0.f;
#pragma unroll
    for (int r = 0; r < RM; ++r)
      if (hd.valid(c.lane, G, r, V)) {
        float f[V];
        unpack<T, V>(l.v[r], f);
#pragma unroll
        for (int q = 0; q < V; ++q)
          d = fmaf(c.g[r][q], f[q], d);
      }
    d = group_sum(d, G);
    const float pre = GAT ? c.ed + l.s : l.s;
    const float p = exp_from(GAT ? leaky(pre, slope) : pre, c.lse);
    const float ds = p * (drop.w(c.h, c.i, l.j) * d - c.D);
    if (GAT) {
      s.ds += ds * leaky_d(pre, slope);
    } else if (c.lane == 0) {
      acc1(dscores + k * hd.H + c.h, ds);
    }
  }
  __device__ void merge(S &a, const S &b) const { a.ds += b.ds; }
  __device__ void finish(const S &s, const C &c, int64_t, int64_t) const {
    if (c.lane != 0) return;
    const int64_t at = c.i * hd.H + c.h;
    if (de_dst) acc1(de_dst + at, s.ds);
    if (dws) dws[at] = c.D;
  }
};

// Source pass of the backward, over the transpose: dvalues[j] += sum p w dout[i]; gat also
// de_src[j] += sum ds leaky'(pre) with ds = p (w <dout[i], v_j> - D[i]).
template <typename T, int V, int RM, bool GAT> struct AttnSrc {
  static constexpr int kU = RM == 1 ? 4 : 2;
  static constexpr bool kMerge = true;
  static constexpr int kMinBlocks = (RM == 1 && V == 4) ? 3 : 1; // f32 vector path: 80 registers
  int64_t units;
  int G;
  Heads hd;
  const int64_t *t_ptr, *t_edge;
  const int32_t *t_row;
  const T *sc, *es, *vals, *dout; // sc: scores (attend) or e_dst (gat)
  const float *lse, *dws;
  T *dvalues, *de_src;
  float slope;
  Drop drop;
  struct C {
    int64_t j, h;
    int lane;
    float es, v[RM][V];
  };
  struct S {
    float dv[RM][V], de;
  };
  struct L {
    int32_t i;
    float s, lse, D;
    Pack<T, V> g[RM];
  };
  __device__ void unit(int64_t u, int lane, C &c, int64_t &b, int64_t &e) const {
    c.j = u / hd.H;
    c.h = u - c.j * hd.H;
    c.lane = lane;
    c.es = 0.f;
#pragma unroll
    for (int r = 0; r < RM; ++r)
#pragma unroll
      for (int q = 0; q < V; ++q)
        c.v[r][q] = 0.f;
    if (GAT && de_src) {
      c.es = ld1(es + u);
#pragma unroll
      for (int r = 0; r < RM; ++r)
        if (hd.valid(lane, G, r, V)) unpack<T, V>(ldp<T, V>(vals + hd.at(c.j, c.h, lane, G, r, V)), c.v[r]);
    }
    b = t_ptr[c.j];
    e = t_ptr[c.j + 1];
  }
  __device__ void init(S &s, const C &) const {
#pragma unroll
    for (int r = 0; r < RM; ++r)
#pragma unroll
      for (int q = 0; q < V; ++q)
        s.dv[r][q] = 0.f;
    s.de = 0.f;
  }
  __device__ void load(L &l, const C &c, int64_t k) const {
    l.i = t_row[k];
    const int64_t ih = (int64_t)l.i * hd.H + c.h;
    l.s = GAT ? ld1(sc + ih) : ld1(sc + t_edge[k] * hd.H + c.h);
    l.lse = lse[c.h * hd.nq + l.i];
    l.D = GAT && de_src ? dws[ih] : 0.f;
#pragma unroll
    for (int r = 0; r < RM; ++r)
      if (hd.valid(c.lane, G, r, V)) l.g[r] = ldp<T, V>(dout + hd.at(l.i, c.h, c.lane, G, r, V));
  }
  __device__ void step(S &s, const L &l, const C &c, int64_t) const {
    const float pre = GAT ? l.s + c.es : l.s;
    const float p = exp_from(GAT ? leaky(pre, slope) : pre, l.lse);
    const float w = drop.w(c.h, l.i, c.j), pw = p * w;
    float d = 0.f;
#pragma unroll
    for (int r = 0; r < RM; ++r)
      if (hd.valid(c.lane, G, r, V)) {
        float f[V];
        unpack<T, V>(l.g[r], f);
#pragma unroll
        for (int q = 0; q < V; ++q) {
          s.dv[r][q] = fmaf(pw, f[q], s.dv[r][q]);
          d = fmaf(f[q], c.v[r][q], d);
        }
      }
    if (GAT && de_src) {
      d = group_sum(d, G);
      s.de += p * (w * d - l.D) * leaky_d(pre, slope);
    }
  }
  __device__ void merge(S &a, const S &b) const {
#pragma unroll
    for (int r = 0; r < RM; ++r)
#pragma unroll
      for (int q = 0; q < V; ++q)
        a.dv[r][q] += b.dv[r][q];
    a.de += b.de;
  }
  __device__ void finish(const S &s, const C &c, int64_t, int64_t) const {
    if (dvalues)
#pragma unroll
      for (int r = 0; r < RM; ++r)
        if (hd.valid(c.lane, G, r, V)) {
          T *o = dvalues + hd.at(c.j, c.h, c.lane, G, r, V);
          float f[V];
          unpack<T, V>(ldp<T, V>(o), f);
#pragma unroll
          for (int q = 0; q < V; ++q)
            f[q] += s.dv[r][q];
          stp<T, V>(o, f);
        }
    if (GAT && de_src && c.lane == 0) acc1(de_src + c.j * hd.H + c.h, s.de);
  }
};

// mask[e, h] = dropout mask bit (unit (row, head), one lane).
struct MaskWrite {
  static constexpr int kU = 4;
  static constexpr bool kMerge = false;
  static constexpr int kMinBlocks = 1;
  int64_t units;
  int G;
  int64_t H;
  const int64_t *row_ptr;
  const int32_t *col;
  uint8_t *mask;
  Drop drop;
  struct C {
    int64_t i, h;
  };
  struct S {};
  struct L {
    int32_t j;
  };
  __device__ void unit(int64_t u, int, C &c, int64_t &b, int64_t &e) const {
    c.i = u / H;
    c.h = u - c.i * H;
    b = row_ptr[c.i];
    e = row_ptr[c.i + 1];
  }
  __device__ void init(S &, const C &) const {}
  __device__ void load(L &l, const C &, int64_t k) const { l.j = col[k]; }
  __device__ void step(S &, const L &l, const C &c, int64_t k) const {
    mask[k * H + c.h] = drop.w(c.h, c.i, l.j) != 0.f;
  }
};

// ---------------------------------------------------------------- launch
struct AttnIn { // everything a launch may need; unused pointers are NULL
  const tgc_csr *g;
  const tgc_graph_attn *a;
  const void *sc, *ed, *es, *vals, *out, *dout;
  const float *lse_in;
  float *lse_out, *dws;
  void *o, *dscores, *de_dst, *de_src, *dvalues;
  Drop drop;
};
enum { FWD = 0, DST = 1, SRC = 2 };

template <typename T, int V, int RM, bool GAT, int PASS> static tg_status attn_run(cudaStream_t s, const AttnIn &in) {
  const int64_t F = in.a->F, H = in.a->H;
  const int64_t nch = (F + V - 1) / V;
  const int G = lanes_for(nch);
  const Heads hd{in.g->nq, H, F, (int)((nch + G - 1) / G)};
  if constexpr (PASS == FWD) {
    AttnFwd<T, V, RM, GAT> p;
    p.units = in.g->nq * H;
    p.G = G;
    p.hd = hd;
    p.row_ptr = in.g->row_ptr;
    p.col = in.g->col_idx;
    p.sc = (const T *)(GAT ? in.es : in.sc);
    p.ed = (const T *)in.ed;
    p.vals = (const T *)in.vals;
    p.out = (T *)in.o;
    p.lse = in.lse_out;
    p.slope = in.a->slope;
    p.drop = in.drop;
    return launch_sliced(s, p, GAT ? "graph_gat_forward" : "graph_attend_forward", slices_for(p.units, G));
  } else if constexpr (PASS == DST) {
    AttnDst<T, V, RM, GAT> p;
    p.units = in.g->nq * H;
    p.G = G;
    p.hd = hd;
    p.row_ptr = in.g->row_ptr;
    p.col = in.g->col_idx;
    p.sc = (const T *)(GAT ? in.es : in.sc);
    p.ed = (const T *)in.ed;
    p.vals = (const T *)in.vals;
    p.out = (const T *)in.out;
    p.dout = (const T *)in.dout;
    p.lse = in.lse_in;
    p.dscores = (T *)in.dscores;
    p.de_dst = (T *)in.de_dst;
    p.dws = in.dws;
    p.edges = GAT ? in.de_dst != nullptr : 1;
    p.slope = in.a->slope;
    p.drop = in.drop;
    return launch_sliced(s, p, GAT ? "graph_gat_backward_dst" : "graph_attend_backward_dst", slices_for(p.units, G));
  } else {
    AttnSrc<T, V, RM, GAT> p;
    p.units = in.g->nk * H;
    p.G = G;
    p.hd = hd;
    p.t_ptr = in.g->t_ptr;
    p.t_edge = in.g->t_edge;
    p.t_row = in.g->t_row;
    p.sc = (const T *)(GAT ? in.ed : in.sc);
    p.es = (const T *)in.es;
    p.vals = (const T *)in.vals;
    p.dout = (const T *)in.dout;
    p.lse = in.lse_in;
    p.dws = in.dws;
    p.dvalues = (T *)in.dvalues;
    p.de_src = (T *)in.de_src;
    p.slope = in.a->slope;
    p.drop = in.drop;
    return launch_sliced(s, p, GAT ? "graph_gat_backward_src" : "graph_attend_backward_src", slices_for(p.units, G));
  }
}

// Vector chunks (V = 16 / sizeof(T), one chunk per lane) when F allows and every feature tensor
// is aligned, else one feature per chunk: one per lane up to F = 32, up to 8 per lane above.
template <typename T, bool GAT, int PASS> static tg_status attn_pick(cudaStream_t s, const AttnIn &in) {
  constexpr int VN = tgc_vec_n<T>();
  const int64_t F = in.a->F;
  if (F % VN == 0 && F / VN <= 32 && tgc_vec_count<T>(F, {in.vals, in.out, in.dout, in.o, in.dvalues}) > 0)
    return attn_run<T, VN, 1, GAT, PASS>(s, in);
  if (F <= 32) return attn_run<T, 1, 1, GAT, PASS>(s, in); // one feature per lane: 4 edges in flight
  if (F <= 256) return attn_run<T, 1, 8, GAT, PASS>(s, in);
  tgc_set_error("graph attention: F = %lld is above the kernels' limit (256, or %d when a multiple of %d)",
                (long long)F, 32 * VN, VN);
  return TG_ERR_UNSUPPORTED;
}

template <typename T, bool GAT> static tg_status attn_bwd_any(cudaStream_t s, const AttnIn &in) {
  const bool dst = GAT ? (in.de_dst || in.de_src) : in.dscores != nullptr;
  const bool src = GAT ? (in.de_src || in.dvalues) : in.dvalues != nullptr;
  if (dst) {
    tg_status st = attn_pick<T, GAT, DST>(s, in);
    if (st != TG_OK) return st;
  }
  return src ? attn_pick<T, GAT, SRC>(s, in) : TG_OK;
}

template <typename T> static tg_status attend_fwd(cudaStream_t s, const AttnIn &in) {
  return attn_pick<T, false, FWD>(s, in);
}
template <typename T> static tg_status gat_fwd(cudaStream_t s, const AttnIn &in) {
  return attn_pick<T, true, FWD>(s, in);
}
template <typename T> static tg_status attend_bwd(cudaStream_t s, const AttnIn &in) {
  return attn_bwd_any<T, false>(s, in);
}
template <typename T> static tg_status gat_bwd(cudaStream_t s, const AttnIn &in) {
  return attn_bwd_any<T, true>(s, in);
}

static tg_status attn_check(const char *op, const tgc_csr *g, const tgc_graph_attn *a, bool need_transpose,
                            AttnIn *in) {
  tg_status st = check_csr(g, op, need_transpose);
  if (st != TG_OK) return st;
  if (!a || a->H < 1 || a->F < 1) {
    tgc_set_error("%s: attention parameters NULL or H, F < 1", op);
    return TG_ERR_INVALID_ARGUMENT;
  }
  *in = AttnIn{};
  in->g = g;
  in->a = a;
  return make_drop(g, a->keep, a->seed, a->call, &in->drop, op);
}
static tg_status need(const char *op, std::initializer_list<const void *> ps) {
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

extern "C" tg_status cuda_graph_attend_forward(tgc_stream s, const tgc_csr *g, const tgc_graph_attn *a,
                                               const void *scores, const void *values, void *out, float *lse) {
  const char *op = "cuda_graph_attend_forward";
  AttnIn in;
  TGG_TRY(attn_check(op, g, a, false, &in));
  if (g->nq == 0) return TG_OK;
  TGG_TRY(need(op, {out, lse}));
  if (g->nnz > 0) TGG_TRY(need(op, {scores, values}));
  in.sc = scores;
  in.vals = values;
  in.o = out;
  in.lse_out = lse;
  TGG_DISPATCH(a->dtype, op, attend_fwd, s, in)
}

extern "C" tg_status cuda_graph_attend_backward(tgc_stream s, const tgc_csr *g, const tgc_graph_attn *a,
                                                const void *scores, const void *values, const void *out,
                                                const void *dout, const float *lse, void *dscores, void *dvalues) {
  const char *op = "cuda_graph_attend_backward";
  AttnIn in;
  TGG_TRY(attn_check(op, g, a, dvalues != nullptr, &in));
  if (g->nnz == 0 || (!dscores && !dvalues)) return TG_OK;
  TGG_TRY(need(op, {scores, dout, lse}));
  if (dscores) TGG_TRY(need(op, {values, out}));
  in.sc = scores;
  in.vals = values;
  in.out = out;
  in.dout = dout;
  in.lse_in = lse;
  in.dscores = dscores;
  in.dvalues = dvalues;
  TGG_DISPATCH(a->dtype, op, attend_bwd, s, in)
}

extern "C" tg_status cuda_graph_gat_forward(tgc_stream s, const tgc_csr *g, const tgc_graph_attn *a, const void *e_dst,
                                            const void *e_src, const void *values, void *out, float *lse) {
  const char *op = "cuda_graph_gat_forward";
  AttnIn in;
  TGG_TRY(attn_check(op, g, a, false, &in));
  if (g->nq == 0) return TG_OK;
  TGG_TRY(need(op, {out, lse, e_dst}));
  if (g->nnz > 0) TGG_TRY(need(op, {e_src, values}));
  in.ed = e_dst;
  in.es = e_src;
  in.vals = values;
  in.o = out;
  in.lse_out = lse;
  TGG_DISPATCH(a->dtype, op, gat_fwd, s, in)
}

extern "C" size_t cuda_graph_gat_backward_workspace(const tgc_csr *g, const tgc_graph_attn *a) {
  return g && a && g->nq > 0 && a->H > 0 ? (size_t)g->nq * (size_t)a->H * sizeof(float) : 0;
}

extern "C" tg_status cuda_graph_gat_backward(tgc_stream s, const tgc_csr *g, const tgc_graph_attn *a, const void *e_dst,
                                             const void *e_src, const void *values, const void *out, const void *dout,
                                             const float *lse, void *de_dst, void *de_src, void *dvalues,
                                             void *workspace, size_t workspace_bytes) {
  const char *op = "cuda_graph_gat_backward";
  AttnIn in;
  TGG_TRY(attn_check(op, g, a, de_src || dvalues, &in));
  if (g->nnz == 0 || (!de_dst && !de_src && !dvalues)) return TG_OK;
  TGG_TRY(need(op, {e_dst, e_src, values, dout, lse}));
  if (de_dst || de_src) TGG_TRY(need(op, {out}));
  if (de_src) {
    const size_t ws = cuda_graph_gat_backward_workspace(g, a);
    if (!workspace || workspace_bytes < ws) {
      tgc_set_error("%s: workspace of %zu bytes, %zu needed", op, workspace ? workspace_bytes : 0, ws);
      return TG_ERR_INVALID_ARGUMENT;
    }
    in.dws = (float *)workspace;
  }
  in.ed = e_dst;
  in.es = e_src;
  in.vals = values;
  in.out = out;
  in.dout = dout;
  in.lse_in = lse;
  in.de_dst = de_dst;
  in.de_src = de_src;
  in.dvalues = dvalues;
  TGG_DISPATCH(a->dtype, op, gat_bwd, s, in)
}

extern "C" tg_status cuda_graph_attn_dropout_mask(tgc_stream s, const tgc_csr *g, const tgc_graph_attn *a,
                                                  uint8_t *mask) {
  const char *op = "cuda_graph_attn_dropout_mask";
  AttnIn in;
  TGG_TRY(attn_check(op, g, a, false, &in));
  if (g->nnz == 0) return TG_OK;
  TGG_TRY(need(op, {mask}));
  MaskWrite p;
  p.units = g->nq * a->H;
  p.G = 1;
  p.H = a->H;
  p.row_ptr = g->row_ptr;
  p.col = g->col_idx;
  p.mask = mask;
  p.drop = in.drop;
  return launch(s, p, "graph_attn_dropout_mask");
}
