// CSR attention (cuda/attention_csr.h): argument checks, the long-row split schedule, and the
// forward (online softmax over each row's edges; math in attention_csr.h, lane geometry and the
// split in attention_csr.cuh).
#include <atomic>
#include <cmath>

#include "attention_csr.cuh"

#define CA_FAIL(code, ...)                                                                                             \
  do {                                                                                                                 \
    tgc_set_error(__VA_ARGS__);                                                                                        \
    return code;                                                                                                       \
  } while (0)

// ------------------------------------------------------------------ checks and geometry
static int ca_vwidth(tg_dtype dt) { return dt == TG_F32 ? 4 : 8; }

tg_status ca_check(const tgc_csr_attn_shape *sh, bool backward) {
  if (!sh) CA_FAIL(TG_ERR_INVALID_ARGUMENT, "csr attention: shape is NULL");
  if (sh->dtype != TG_F32 && sh->dtype != TG_F16 && sh->dtype != TG_BF16)
    CA_FAIL(TG_ERR_UNSUPPORTED, "csr attention: dtype %d not supported (expected F32, F16 or BF16)", (int)sh->dtype);
  const int dmax = backward && sh->dtype == TG_F32 ? 128 : 256;
  if (sh->D < 1 || sh->D > dmax || sh->Dv < 1 || sh->Dv > dmax)
    CA_FAIL(TG_ERR_UNSUPPORTED, "csr attention%s: D=%d, Dv=%d; expected 1..%d each", backward ? " backward" : "", sh->D,
            sh->Dv, dmax);
  if (sh->Hq < 1 || sh->Hkv < 1 || sh->Hq % sh->Hkv != 0 || sh->Hq > 65535)
    CA_FAIL(TG_ERR_UNSUPPORTED, "csr attention: Hq=%d, Hkv=%d; expected Hkv >= 1 dividing Hq <= 65535", sh->Hq,
            sh->Hkv);
  if (sh->B < 0 || sh->B > 65535 || sh->Nq < 0 || sh->Nk < 0 || sh->Nq > INT32_MAX || sh->Nk > INT32_MAX)
    CA_FAIL(TG_ERR_UNSUPPORTED, "csr attention: B=%lld, Nq=%lld, Nk=%lld out of range", (long long)sh->B,
            (long long)sh->Nq, (long long)sh->Nk);
  if (!std::isfinite(sh->scale)) CA_FAIL(TG_ERR_INVALID_ARGUMENT, "csr attention: scale=%g is not finite", sh->scale);
  if (!(sh->drop_keep >= 0 && sh->drop_keep <= 1))
    CA_FAIL(TG_ERR_INVALID_ARGUMENT, "csr attention: drop_keep=%g; expected 0 or 1 (none) or in (0, 1)", sh->drop_keep);
  return TG_OK;
}

extern "C" tg_status cuda_attention_csr_supported(const tgc_csr_attn_shape *sh) { return ca_check(sh, false); }
extern "C" tg_status cuda_attention_csr_backward_supported(const tgc_csr_attn_shape *sh) { return ca_check(sh, true); }

int ca_sm_count() {
  int dev = 0, n = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
    return 132;
  return n > 0 ? n : 132;
}

int ca_lph(int maxd, int V) {
  const int vecs = (maxd + V - 1) / V;
  int l = 2;
  while (l < vecs && l < 32)
    l <<= 1;
  return l;
}

int ca_hpw(int lph, int H) {
  int h = 1;
  while (h < H && h * lph < 32)
    h <<= 1;
  return h;
}

CaDrop ca_drop_of(const tgc_csr_attn_shape *sh) {
  CaDrop d{};
  d.on = sh->drop_keep > 0 && sh->drop_keep < 1;
  if (d.on) {
    d.seed = sh->drop_seed;
    d.call = sh->drop_call;
    d.thr = tg_keep_threshold(sh->drop_keep);
    d.inv_keep = (float)(1.0 / sh->drop_keep);
  }
  d.Nk = sh->Nk;
  return d;
}

// ------------------------------------------------------------------ split schedule
// The forced chunk length is a bench / test switch: compiled only into bench_attention_csr
// (TIGA_BENCH_SWITCHES), never into the library, where the chunk is always chosen from the shape.
#ifdef TIGA_BENCH_SWITCHES
static std::atomic<long long> g_chunk{0};
extern "C" void cuda_attention_csr_set_chunk(int64_t chunk) { g_chunk.store(chunk > 0 ? chunk : 0); }
static int64_t forced_chunk() { return g_chunk.load(); }
#else
static int64_t forced_chunk() { return 0; }
#endif

// Chunk C: at least 256 edges; at least twice the mean degree (then the split rows' items number
// at most n); and large enough that items * units <= 2^17 (units: batch entries x heads whose
// partials an item stores), which bounds the workspace independently of the degree distribution.
// Items of split rows (d > C each, sum d <= nnz): sum ceil(d / C) <= (nnz + smax (C - 1)) / C.
CaPlan ca_plan(int64_t n, int64_t nnz, int64_t units) {
  CaPlan p{};
  p.n = n;
  int64_t c = forced_chunk();
  if (c <= 0) {
    c = 256;
    if (n > 0) c = std::max<int64_t>(c, 2 * ((nnz + n - 1) / n));
    c = std::max<int64_t>(c, (int64_t)std::ceil((double)nnz * (double)units / 65536.0));
  }
  p.chunk = c;
  p.smax = n > 0 ? std::min<int64_t>(n, nnz / (c + 1)) : 0;
  p.imax = p.smax > 0 ? (nnz + p.smax * (c - 1)) / c : 0;
  p.nb = p.smax > 0 ? (n + 8191) / 8192 : 0;
  return p;
}

CaSchedMem ca_sched_take(CaBump &m, const CaPlan &pl) {
  CaSchedMem s{};
  if (pl.smax == 0) return s;
  s.count = (int64_t *)m.take(2 * sizeof(int64_t));
  s.blk = (int64_t *)m.take((size_t)pl.nb * 2 * sizeof(int64_t));
  s.row = (int32_t *)m.take((size_t)pl.smax * sizeof(int32_t));
  s.start = (int64_t *)m.take((size_t)(pl.smax + 1) * sizeof(int64_t));
  return s;
}

CaSched ca_sched_view(const CaPlan &pl, const CaSchedMem &sm) { return CaSched{pl.chunk, sm.count, sm.row, sm.start}; }

constexpr int CA_SCH_T = 256, CA_SCH_R = 32; // threads per block, rows per thread (8192 rows per block)

// Split rows and items among rows [r0, r0 + CA_SCH_R) of ptr.
__device__ __forceinline__ void ca_sched_rows(const int64_t *__restrict__ ptr, int64_t n, int64_t C, int64_t r0,
                                              int64_t &cnt, int64_t &items) {
  cnt = items = 0;
  const int64_t r1 = r0 + CA_SCH_R < n ? r0 + CA_SCH_R : n;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t d = ptr[r + 1] - ptr[r];
    if (d > C) cnt += 1, items += (d + C - 1) / C;
  }
}

// Exclusive scan of (a, b) over the block in thread order; returns the block totals. Starts with a
// barrier so that calls may follow each other.
__device__ void ca_block_scan2(int64_t &a, int64_t &b, int64_t &ta, int64_t &tb) {
  __shared__ int64_t sa[CA_SCH_T / 32], sb[CA_SCH_T / 32];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  int64_t ia = a, ib = b; // inclusive within the warp
  for (int o = 1; o < 32; o <<= 1) {
    const int64_t xa = __shfl_up_sync(0xffffffffu, ia, o), xb = __shfl_up_sync(0xffffffffu, ib, o);
    if (lane >= o) ia += xa, ib += xb;
  }
  __syncthreads();
  if (lane == 31) sa[w] = ia, sb[w] = ib;
  __syncthreads();
  int64_t pa = 0, pb = 0;
  ta = tb = 0;
  for (int k = 0; k < CA_SCH_T / 32; ++k) {
    if (k < w) pa += sa[k], pb += sb[k];
    ta += sa[k], tb += sb[k];
  }
  a = pa + ia - a;
  b = pb + ib - b;
}

__global__ void __launch_bounds__(CA_SCH_T)
    ca_sched_count_kernel(const int64_t *__restrict__ ptr, int64_t n, int64_t C, int64_t *__restrict__ blk) {
  int64_t cnt, items, tc, ti;
  ca_sched_rows(ptr, n, C, ((int64_t)blockIdx.x * CA_SCH_T + threadIdx.x) * CA_SCH_R, cnt, items);
  ca_block_scan2(cnt, items, tc, ti);
  if (threadIdx.x == 0) blk[2 * blockIdx.x] = tc, blk[2 * blockIdx.x + 1] = ti;
}

// Each block adds up the counts of the blocks before it (nb is small: n / 8192), then writes its
// split rows in row order. The last block writes the totals and start[total rows].
__global__ void __launch_bounds__(CA_SCH_T)
    ca_sched_place_kernel(const int64_t *__restrict__ ptr, int64_t n, int64_t C, const int64_t *__restrict__ blk,
                          int64_t *__restrict__ count, int32_t *__restrict__ row, int64_t *__restrict__ start) {
  int64_t oc = 0, oi = 0, bc, bi;
  for (int64_t k = threadIdx.x; k < blockIdx.x; k += CA_SCH_T)
    oc += blk[2 * k], oi += blk[2 * k + 1];
  ca_block_scan2(oc, oi, bc, bi); // bc, bi: this block's offsets
  const int64_t r0 = ((int64_t)blockIdx.x * CA_SCH_T + threadIdx.x) * CA_SCH_R;
  int64_t pc, pi, tc, ti;
  ca_sched_rows(ptr, n, C, r0, pc, pi);
  ca_block_scan2(pc, pi, tc, ti);
  pc += bc, pi += bi;
  const int64_t r1 = r0 + CA_SCH_R < n ? r0 + CA_SCH_R : n;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t d = ptr[r + 1] - ptr[r];
    if (d > C) {
      row[pc] = (int32_t)r;
      start[pc] = pi;
      pc += 1, pi += (d + C - 1) / C;
    }
  }
  if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) {
    count[0] = bc + tc;
    count[1] = bi + ti;
    start[bc + tc] = bi + ti;
  }
}

tg_status ca_sched_build(cudaStream_t st, const CaPlan &pl, const int64_t *ptr, const CaSchedMem &sm) {
  if (pl.smax == 0) return TG_OK;
  if (pl.nb > INT32_MAX) CA_FAIL(TG_ERR_UNSUPPORTED, "csr attention: %lld rows are too many", (long long)pl.n);
  ca_sched_count_kernel<<<(unsigned)pl.nb, CA_SCH_T, 0, st>>>(ptr, pl.n, pl.chunk, sm.blk);
  TGC_LAUNCHED("ca_sched_count_kernel");
  ca_sched_place_kernel<<<(unsigned)pl.nb, CA_SCH_T, 0, st>>>(ptr, pl.n, pl.chunk, sm.blk, sm.count, sm.row, sm.start);
  TGC_LAUNCHED("ca_sched_place_kernel");
  return TG_OK;
}

// ------------------------------------------------------------------ forward
struct CaFwd {
  const void *q, *k, *v;
  void *out;
  float *lse;
  const int64_t *row_ptr;
  const int32_t *col;
  const int32_t *order; // row schedule (NULL: identity)
  int64_t B, Nq, Nk;
  int Hq, Hkv, D, Dv, group;
  float sl2; // scale * log2(e): scores in base 2
  bool vq, vv;
  CaDrop drop;
  CaGrid grid;
  CaSched sc;
  float *part; // [imax, B, Hq, 2 + Dv]: (m, l, acc) of each split item
};

// One unit: edges [e0, e1) of row i, batch entry b, head block hb. item < 0: a whole row, writes
// out and lse; else the partial (m, l, acc) of split item `item`.
template <typename T, int LPH, int NC, bool DROP>
__device__ __forceinline__ void ca_fwd_unit(const CaFwd &p, int64_t b, int hb, int64_t i, int64_t e0, int64_t e1,
                                            int64_t item) {
  constexpr int V = ca_v<T>(), U = 4 / NC;
  const int lane = threadIdx.x & 31, l = lane % LPH, hw = (lane / LPH) % p.grid.hpw, slot = lane / (LPH * p.grid.hpw);
  const int es = p.grid.es;
  const int hr = hb * p.grid.hpw + hw, h = hr < p.Hq ? hr : p.Hq - 1, g = h / p.group;
  const T *qr = (const T *)p.q + ((b * p.Nq + i) * p.Hq + h) * p.D;
  const T *kb = (const T *)p.k + (b * p.Nk * p.Hkv + g) * p.D, *vb = (const T *)p.v + (b * p.Nk * p.Hkv + g) * p.Dv;
  const int64_t ks = (int64_t)p.Hkv * p.D, vs = (int64_t)p.Hkv * p.Dv;
  const uint64_t R = ((uint64_t)b * p.Hq + h) * p.Nq + i;
  float qx[NC][V], acc[NC][V];
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    const int d0 = (c * LPH + l) * V;
    ca_load(qr, d0, p.D - d0, p.vq, qx[c]);
#pragma unroll
    for (int t = 0; t < V; ++t)
      acc[c][t] = 0.f;
  }
  float m = -INFINITY, ls = 0.f;
#pragma unroll 1
  for (int64_t base = e0 + slot; base < e1 + slot; base += (int64_t)es * U) { // same trip count in every slot
    int j[U];
    bool ok[U];
    uint4 kr[U][NC], vr[U][NC];
    float s[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t e = base + (int64_t)u * es;
      ok[u] = e < e1;
      j[u] = ok[u] ? p.col[e] : 0; // a masked slot reads row 0 (exists: the row has an edge)
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        const int d0 = (c * LPH + l) * V;
        kr[u][c] = ca_fetch(kb + j[u] * ks, d0, p.D - d0, p.vq);
        vr[u][c] = ca_fetch(vb + j[u] * vs, d0, p.Dv - d0, p.vv);
      }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      s[u] = 0.f;
#pragma unroll
      for (int c = 0; c < NC; ++c)
        s[u] = ca_dot_raw<T>(qx[c], kr[u][c], s[u]);
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
      s[u] = ca_gsum<LPH>(s[u]);
    float mx = m;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      s[u] = ok[u] ? s[u] * p.sl2 : -INFINITY;
      mx = fmaxf(mx, s[u]);
    }
    if (mx == -INFINITY) continue; // nothing valid in this slot yet
    const float corr = exp2f(m - mx);
    ls *= corr;
#pragma unroll
    for (int c = 0; c < NC; ++c)
#pragma unroll
      for (int t = 0; t < V; ++t)
        acc[c][t] *= corr;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float pu = exp2f(s[u] - mx); // 0 for a masked slot
      ls += pu;
      if (DROP && ok[u]) pu *= ca_drop_w(p.drop, R, (uint64_t)j[u]);
#pragma unroll
      for (int c = 0; c < NC; ++c)
        ca_axpy_raw<T>(pu, vr[u][c], acc[c]);
    }
    m = mx;
  }
  for (int o = LPH * p.grid.hpw; o < 32; o <<= 1) { // combine the slots
    const float mo = __shfl_xor_sync(0xffffffffu, m, o), lo = __shfl_xor_sync(0xffffffffu, ls, o);
    const float mx = fmaxf(m, mo);
    const float fa = m == -INFINITY ? 0.f : exp2f(m - mx), fb = mo == -INFINITY ? 0.f : exp2f(mo - mx);
    ls = ls * fa + lo * fb;
#pragma unroll
    for (int c = 0; c < NC; ++c)
#pragma unroll
      for (int t = 0; t < V; ++t)
        acc[c][t] = acc[c][t] * fa + __shfl_xor_sync(0xffffffffu, acc[c][t], o) * fb;
    m = mx;
  }
  if (slot != 0 || hr >= p.Hq) return;
  if (item < 0) {
    const float inv = ls > 0.f ? 1.f / ls : 0.f;
    T *orow = (T *)p.out + ((b * p.Nq + i) * p.Hq + h) * p.Dv;
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      const int d0 = (c * LPH + l) * V;
#pragma unroll
      for (int t = 0; t < V; ++t)
        acc[c][t] *= inv;
      ca_store<T, false>(orow, d0, p.Dv - d0, p.vv, acc[c]);
    }
    if (l == 0) p.lse[((int64_t)b * p.Hq + h) * p.Nq + i] = ls > 0.f ? (m + log2f(ls)) * CA_LN2 : -INFINITY;
  } else {
    float *pp = p.part + ((item * p.B + b) * p.Hq + h) * (int64_t)(p.Dv + 2);
    if (l == 0) pp[0] = m, pp[1] = ls;
#pragma unroll
    for (int c = 0; c < NC; ++c)
#pragma unroll
      for (int t = 0; t < V; ++t) {
        const int d = (c * LPH + l) * V + t;
        if (d < p.Dv) pp[2 + d] = acc[c][t];
      }
  }
}

template <typename T, int LPH, int NC, bool DROP>
__global__ void __launch_bounds__(CA_WPB * 32, CA_MINB) ca_fwd_kernel(const CaFwd p) {
  const int64_t per = p.B * p.grid.nhb; // warps per row
  const int wib = threadIdx.x >> 5;
  if (blockIdx.x < p.grid.split_blocks) {
    const int64_t total = p.sc.count[1] * per, nw = (int64_t)p.grid.split_blocks * CA_WPB;
    for (int64_t w = (int64_t)blockIdx.x * CA_WPB + wib; w < total; w += nw) {
      const int64_t it = w / per, rem = w - it * per, b = rem / p.grid.nhb;
      const int hb = (int)(rem - b * p.grid.nhb);
      const int64_t r = ca_item_row(p.sc, it), i = p.sc.row[r], c = it - p.sc.start[r];
      const int64_t e0 = p.row_ptr[i] + c * p.sc.chunk, end = p.row_ptr[i + 1];
      const int64_t e1 = e0 + p.sc.chunk < end ? e0 + p.sc.chunk : end;
      ca_fwd_unit<T, LPH, NC, DROP>(p, b, hb, i, e0, e1, it);
    }
    return;
  }
  const int64_t w = (int64_t)(blockIdx.x - p.grid.split_blocks) * CA_WPB + wib;
  if (w >= p.Nq * per) return;
  const int64_t x = w / per, rem = w - x * per, b = rem / p.grid.nhb;
  const int hb = (int)(rem - b * p.grid.nhb);
  const int64_t i = p.order ? (int64_t)p.order[x] : x;
  if (i < 0 || i >= p.Nq) return; // not a schedule entry: skipped (attention_csr.h)
  const int64_t e0 = p.row_ptr[i], e1 = p.row_ptr[i + 1];
  if (e1 - e0 > p.sc.chunk) return; // a split row: the split blocks and the merge handle it
  ca_fwd_unit<T, LPH, NC, DROP>(p, b, hb, i, e0, e1, -1);
}

// One warp per (split row, batch entry, head): combine the row's items in order.
template <typename T> __global__ void __launch_bounds__(CA_WPB * 32) ca_fwd_merge_kernel(const CaFwd p) {
  const int lane = threadIdx.x & 31;
  const int64_t total = p.sc.count[0] * p.B * p.Hq, nw = (int64_t)gridDim.x * CA_WPB;
  for (int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < total; w += nw) {
    const int64_t r = w / (p.B * p.Hq), bh = w - r * p.B * p.Hq, b = bh / p.Hq, h = bh - b * p.Hq;
    const int64_t i = p.sc.row[r], it0 = p.sc.start[r], it1 = p.sc.start[r + 1];
    const int64_t stride = p.B * p.Hq * (int64_t)(p.Dv + 2);
    const float *pp = p.part + (it0 * p.B * p.Hq + bh) * (int64_t)(p.Dv + 2);
    float M = -INFINITY, L = 0.f;
    for (int64_t it = 0; it < it1 - it0; ++it)
      M = fmaxf(M, pp[it * stride]);
    for (int64_t it = 0; it < it1 - it0; ++it)
      L += pp[it * stride + 1] * exp2f(pp[it * stride] - M);
    T *orow = (T *)p.out + ((b * p.Nq + i) * p.Hq + h) * p.Dv;
    for (int d = lane; d < p.Dv; d += 32) {
      float a = 0.f;
      for (int64_t it = 0; it < it1 - it0; ++it)
        a += pp[it * stride + 2 + d] * exp2f(pp[it * stride] - M);
      orow[d] = tgc_from_f<T>(a / L);
    }
    if (lane == 0) p.lse[(b * p.Hq + h) * p.Nq + i] = (M + log2f(L)) * CA_LN2;
  }
}

template <typename T, int LPH, int NC> static tg_status ca_fwd_run(const CaFwd &p, cudaStream_t st) {
  if (p.drop.on)
    ca_fwd_kernel<T, LPH, NC, true><<<p.grid.blocks, CA_WPB * 32, 0, st>>>(p);
  else
    ca_fwd_kernel<T, LPH, NC, false><<<p.grid.blocks, CA_WPB * 32, 0, st>>>(p);
  TGC_LAUNCHED("ca_fwd_kernel");
  return TG_OK;
}

template <typename T>
static tg_status ca_fwd_dispatch(const CaFwd &p, int lph, int nc, unsigned merge_blocks, cudaStream_t st) {
  tg_status s = TG_ERR_UNSUPPORTED;
  switch (lph) {
  case 2: s = ca_fwd_run<T, 2, 1>(p, st); break;
  case 4: s = ca_fwd_run<T, 4, 1>(p, st); break;
  case 8: s = ca_fwd_run<T, 8, 1>(p, st); break;
  case 16: s = ca_fwd_run<T, 16, 1>(p, st); break;
  case 32: s = nc == 1 ? ca_fwd_run<T, 32, 1>(p, st) : ca_fwd_run<T, 32, 2>(p, st); break;
  default: tgc_set_error("csr attention: no kernel for %d lanes per head", lph);
  }
  if (s != TG_OK || merge_blocks == 0) return s;
  ca_fwd_merge_kernel<T><<<merge_blocks, CA_WPB * 32, 0, st>>>(p);
  TGC_LAUNCHED("ca_fwd_merge_kernel");
  return TG_OK;
}

static size_t ca_fwd_layout(const tgc_csr_attn_shape *sh, const tgc_csr *csr, CaBump &m, CaPlan &pl, CaSchedMem &sm,
                            float **part) {
  pl = ca_plan(sh->Nq, csr->nnz, sh->B * sh->Hq);
  sm = ca_sched_take(m, pl);
  *part = (float *)m.take((size_t)pl.imax * sh->B * sh->Hq * (sh->Dv + 2) * sizeof(float));
  return m.off;
}

extern "C" size_t cuda_attention_csr_forward_workspace(const tgc_csr_attn_shape *sh, const tgc_csr *csr) {
  if (ca_check(sh, false) != TG_OK || !csr || csr->nnz < 0) return 0;
  CaBump m{nullptr, 0};
  CaPlan pl;
  CaSchedMem sm;
  float *part;
  return ca_fwd_layout(sh, csr, m, pl, sm, &part);
}

// Checks the CSR against the shape and the device arrays a launch reads.
tg_status ca_check_csr(const tgc_csr_attn_shape *sh, const tgc_csr *csr, bool transpose) {
  if (!csr) CA_FAIL(TG_ERR_INVALID_ARGUMENT, "csr attention: csr is NULL");
  if (csr->nq != sh->Nq || csr->nk != sh->Nk || csr->nnz < 0)
    CA_FAIL(TG_ERR_SHAPE, "csr attention: csr is %lld x %lld (nnz %lld), attention is Nq=%lld x Nk=%lld",
            (long long)csr->nq, (long long)csr->nk, (long long)csr->nnz, (long long)sh->Nq, (long long)sh->Nk);
  if ((sh->Nq > 0 && !csr->row_ptr) || (csr->nnz > 0 && !csr->col_idx))
    CA_FAIL(TG_ERR_INVALID_ARGUMENT, "csr attention: csr row_ptr / col_idx is NULL");
  if (transpose && csr->nnz > 0 && (!csr->t_ptr || !csr->t_row))
    CA_FAIL(TG_ERR_INVALID_ARGUMENT, "csr attention backward: the csr's transpose (t_ptr, t_row) is not built");
  return TG_OK;
}

// Grid of an edge kernel over n units of B x ceil(H / hpw) warps plus split blocks (smax > 0).
tg_status ca_grid(int64_t n, int64_t B, int H, int lph, const CaPlan &pl, CaGrid &g) {
  g.hpw = ca_hpw(lph, H);
  g.es = 32 / (lph * g.hpw);
  g.nhb = (H + g.hpw - 1) / g.hpw;
  const int64_t cap = (int64_t)ca_sm_count() * 16;
  const int64_t sw = pl.imax * B * g.nhb;
  const int64_t sb = pl.smax > 0 ? std::min<int64_t>((sw + CA_WPB - 1) / CA_WPB, cap) : 0;
  const int64_t mb = (n * B * g.nhb + CA_WPB - 1) / CA_WPB;
  if (sb + mb > INT32_MAX)
    CA_FAIL(TG_ERR_UNSUPPORTED, "csr attention: grid of %lld blocks is too large", (long long)(sb + mb));
  g.split_blocks = (unsigned)sb;
  g.blocks = (unsigned)(sb + mb);
  return TG_OK;
}

unsigned ca_merge_blocks(const CaPlan &pl, int64_t B, int H) {
  if (pl.smax == 0) return 0;
  const int64_t w = pl.smax * B * H;
  return (unsigned)std::min<int64_t>((w + CA_WPB - 1) / CA_WPB, (int64_t)ca_sm_count() * 16);
}

extern "C" tg_status cuda_attention_csr_forward(tgc_stream s, const tgc_csr_attn_shape *sh, const tgc_csr *csr,
                                                const int32_t *row_order, const void *q, const void *k, const void *v,
                                                void *out, float *lse, void *ws, size_t ws_bytes) {
  tg_status stt = ca_check(sh, false);
  if (stt == TG_OK) stt = ca_check_csr(sh, csr, false);
  if (stt != TG_OK) return stt;
  if (sh->B == 0 || sh->Nq == 0) return TG_OK;
  if (!q || !out || !lse || (csr->nnz > 0 && (!k || !v)))
    CA_FAIL(TG_ERR_INVALID_ARGUMENT, "csr attention forward: q, k, v, out and lse must be device pointers");
  CaBump m{(char *)ws, 0};
  CaFwd p{};
  CaPlan pl;
  CaSchedMem sm;
  const size_t need = ca_fwd_layout(sh, csr, m, pl, sm, &p.part);
  if (need > 0 && (!ws || ws_bytes < need))
    CA_FAIL(TG_ERR_INVALID_ARGUMENT, "csr attention forward: workspace of %zu bytes given, %zu needed", ws_bytes, need);
  const int V = ca_vwidth(sh->dtype), lph = ca_lph(std::max(sh->D, sh->Dv), V);
  const int nc = (std::max(sh->D, sh->Dv) + lph * V - 1) / (lph * V);
  p.q = q, p.k = k, p.v = v, p.out = out, p.lse = lse;
  p.row_ptr = csr->row_ptr, p.col = csr->col_idx, p.order = row_order;
  p.B = sh->B, p.Nq = sh->Nq, p.Nk = sh->Nk;
  p.Hq = sh->Hq, p.Hkv = sh->Hkv, p.D = sh->D, p.Dv = sh->Dv, p.group = sh->Hq / sh->Hkv;
  p.sl2 = sh->scale * CA_LOG2E;
  p.vq = sh->D % V == 0 && ca_al16({q, k});
  p.vv = sh->Dv % V == 0 && ca_al16({v, out});
  p.drop = ca_drop_of(sh);
  p.sc = ca_sched_view(pl, sm);
  if ((stt = ca_grid(sh->Nq, sh->B, sh->Hq, lph, pl, p.grid)) != TG_OK) return stt;
  cudaStream_t st = (cudaStream_t)s;
  if ((stt = ca_sched_build(st, pl, csr->row_ptr, sm)) != TG_OK) return stt;
  const unsigned mb = ca_merge_blocks(pl, sh->B, sh->Hq);
  switch (sh->dtype) {
  case TG_F32: return ca_fwd_dispatch<float>(p, lph, nc, mb, st);
  case TG_F16: return ca_fwd_dispatch<__half>(p, lph, nc, mb, st);
  default: return ca_fwd_dispatch<__nv_bfloat16>(p, lph, nc, mb, st);
  }
}
