// tg_edge_attention's packed forward (cuda/edge_attention.h; the packed walk of
// cuda/edge_attention.cuh). A warp takes a.rows consecutive destination rows; per batch of 32 of
// their edges the lanes evaluate the score MLP of one edge each, then each row's piece of the batch
// updates that row's online-softmax state (warp max / sum over the piece's lanes) and its output
// accumulators (column phase over the piece's edges). A row is written when its last edge is done.
#include "edge_attention.cuh"

namespace tgea {

constexpr int kFwdPkWarps = 8;

template <int HP> struct FwdPkSm {
  int64_t rp[kRows + 1]; // row offsets of the chunk
  float fe[kMaxFe * 32]; // edge features of the batch, [f][lane]
  float pw[HP][32];      // p * w of the piece, [h][edge]
  int32_t j[32];         // sources of the batch
  float sc[HP], m[HP], l[HP];
};

template <typename T, int HID, int HP, int RM>
__global__ void __launch_bounds__(kFwdPkWarps * 32, RM == 1 ? 3 : 1) k_fwd_pk(const Args a) {
  __shared__ Wts<HID> w;
  __shared__ FwdPkSm<HP> sms[kFwdPkWarps];
  load_wts<T, HID>(w, a);
  __syncthreads();
  const int wid = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31;
  const int64_t r0 = ((int64_t)blockIdx.x * kFwdPkWarps + wid) * a.rows;
  if (r0 >= a.nq) return; // warp-uniform, after the block's only barrier
  const int n = (int)(a.nq - r0 < a.rows ? a.nq - r0 : a.rows);
  FwdPkSm<HP> &sm = sms[wid];
  for (int q = lane; q <= n; q += 32)
    sm.rp[q] = a.rp[r0 + q];
  Cols<T, RM> cl;
  cl.init(a, lane);
  constexpr int V = Cols<T, RM>::V;
  constexpr int UF = RM == 1 ? 16 / V : 1; // edges loaded ahead per group (16 elements)
  float acc[RM][V], m[HP], l[HP];
#pragma unroll
  for (int r = 0; r < RM; ++r)
#pragma unroll
    for (int q = 0; q < V; ++q)
      acc[r][q] = 0.f;
#pragma unroll
  for (int h = 0; h < HP; ++h) {
    m[h] = -INFINITY;
    l[h] = 0.f;
  }
  const T *U = static_cast<const T *>(a.U), *Vn = static_cast<const T *>(a.V);
  __syncwarp();
  // the chunk's rows of V and pd, gathered by the lanes of every batch
  prefetch_span(Vn ? Vn + r0 * HID : nullptr, n * HID * (int64_t)sizeof(T), lane);
  prefetch_span(a.pd ? a.pd + r0 * a.dim : nullptr, n * a.dim * (int64_t)sizeof(float), lane);
  const int64_t E0 = sm.rp[0], E1 = sm.rp[n];
  int cur = 0;                                       // the row in progress (index in the chunk)
  int32_t jn = E0 + lane < E1 ? a.ci[E0 + lane] : 0; // col_idx one batch ahead
#pragma unroll 1
  for (int64_t e0 = E0;; e0 += 32) {
    const int nb = (int)(E1 - e0 < 32 ? E1 - e0 : 32); // 0 only for a chunk without edges
    const int32_t jc = jn;
    if (e0 + 32 + lane < E1) jn = a.ci[e0 + 32 + lane];
    float s[HP];
    int32_t j = 0;
    if (lane < nb) {
      const int64_t i = r0 + seg_of(sm.rp, n, e0 + lane);
      j = jc;
      prefetch_row(static_cast<const T *>(a.vals) + (int64_t)j * a.HF, a.HF * (int64_t)sizeof(T));
      float dp[kMaxDim];
      edge_in<T>(a, e0 + lane, j, i, dp, sm.fe + lane);
      scores<T, HID, HP>(a, w, w.b1, U ? U + (int64_t)j * HID : nullptr, Vn ? Vn + i * HID : nullptr, dp, sm.fe + lane,
                         s);
    } else {
#pragma unroll
      for (int h = 0; h < HP; ++h)
        s[h] = -INFINITY;
    }
    sm.j[lane] = j;
    __syncwarp();
#pragma unroll 1
    while (cur < n) {
      const int64_t i = r0 + cur, re = sm.rp[cur + 1];
      int lo, hi;
      piece_of(sm.rp[cur], re, e0, nb, lo, hi);
      if (hi > lo) {
        const bool in = lane >= lo && lane < hi;
#pragma unroll
        for (int h = 0; h < HP; ++h) {
          const float sv = in ? s[h] : -INFINITY;
          const float mn = fmaxf(m[h], tgc_warp_max(sv));
          const float p = mn == -INFINITY ? 0.f : __expf(sv - mn);
          const float scale = mn == -INFINITY ? 1.f : __expf(m[h] - mn);
          l[h] = l[h] * scale + tgc_warp_sum(p);
          m[h] = mn;
          sm.pw[h][lane] = h < a.H && in ? p * a.drop.w(h, i, j) : 0.f;
          if (lane == 0) sm.sc[h] = scale;
        }
        __syncwarp();
#pragma unroll
        for (int r = 0; r < RM; ++r)
#pragma unroll
          for (int q = 0; q < V; ++q)
            acc[r][q] *= sm.sc[cl.template head<HP>(r, q)];
#pragma unroll 1
        for (int t0 = lo + cl.grp; t0 < hi; t0 += UF * cl.NG) {
          float v[UF][RM][V];
#pragma unroll
          for (int u = 0; u < UF; ++u) {
            const int t = t0 + u * cl.NG;
            if (t < hi)
#pragma unroll
              for (int r = 0; r < RM; ++r)
                if (cl.has(a, r)) cl.load(a, a.vals, sm.j[t], r, v[u][r]);
          }
#pragma unroll
          for (int u = 0; u < UF; ++u) {
            const int t = t0 + u * cl.NG;
            if (t < hi)
#pragma unroll
              for (int r = 0; r < RM; ++r)
                if (cl.has(a, r))
#pragma unroll
                  for (int q = 0; q < V; ++q)
                    acc[r][q] = fmaf(sm.pw[cl.template head<HP>(r, q)][t], v[u][r][q], acc[r][q]);
          }
        }
        __syncwarp();
      }
      if (re > e0 + nb) break; // the row goes on in the next batch
      // row i is complete: out = acc / l, lse; then a fresh state for the next row
      if (lane == 0)
#pragma unroll
        for (int h = 0; h < HP; ++h) {
          sm.m[h] = m[h];
          sm.l[h] = l[h];
        }
      __syncwarp();
#pragma unroll
      for (int r = 0; r < RM; ++r)
#pragma unroll
        for (int q = 0; q < V; ++q)
          acc[r][q] = cl.across(acc[r][q]);
      if (cl.grp == 0)
#pragma unroll
        for (int r = 0; r < RM; ++r)
          if (cl.has(a, r)) {
            float o[V];
#pragma unroll
            for (int q = 0; q < V; ++q) {
              const float lh = sm.l[cl.template head<HP>(r, q)];
              o[q] = lh == 0.f ? 0.f : acc[r][q] / lh;
            }
            cl.add(a, a.out, i, r, o, false);
          }
      if (lane < a.H) a.lse[lane * a.nq + i] = tgg::lse_of(sm.m[lane], sm.l[lane]);
#pragma unroll
      for (int r = 0; r < RM; ++r)
#pragma unroll
        for (int q = 0; q < V; ++q)
          acc[r][q] = 0.f;
#pragma unroll
      for (int h = 0; h < HP; ++h) {
        m[h] = -INFINITY;
        l[h] = 0.f;
      }
      __syncwarp();
      ++cur;
    }
    if (e0 + 32 + lane < E1) { // the next batch's gathers
      prefetch_of<T>(a.U, jn, HID);
      prefetch_of<T>(a.vals, jn, a.HF);
      prefetch_of<float>(a.ps, jn, a.dim);
    }
    if (e0 + nb >= E1) break;
  }
}

struct FwdPk {
  template <typename T, int HID, int HP, int RM> static tg_status run(cudaStream_t s, const Args &a) {
    const int64_t chunks = (a.nq + a.rows - 1) / a.rows;
    const int64_t blocks = (chunks + kFwdPkWarps - 1) / kFwdPkWarps;
    k_fwd_pk<T, HID, HP, RM><<<(unsigned)blocks, kFwdPkWarps * 32, 0, s>>>(a);
    TGC_LAUNCHED("edge_attention_forward");
    return TG_OK;
  }
};

tg_status forward_packed(cudaStream_t s, const Args &a) { return dispatch_packed<FwdPk>(s, a); }

} // namespace tgea
