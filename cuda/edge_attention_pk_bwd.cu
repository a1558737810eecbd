// tg_edge_attention's packed backward passes (cuda/edge_attention.h; the packed walk of
// cuda/edge_attention.cuh). Same math, sums and partial layout as k_dst / k_src of
// cuda/edge_attention_bwd.cu, whose k_wsum reduces the partials:
//   k_dst_pk  a warp takes chunks of a.rows destination rows (chunk c, c + W, ... for the grid's W
//             warps). Per batch of 32 of the chunk's edges: scores (lane = edge, pre-activations
//             kept in the warp's shared memory), p, w; then per row piece of the batch: the column
//             phase <dout[i], values[j]>, ds, and the per-unit phase (da, the row sums dV, the
//             weight sums, dfe) as in k_dst. D[i] and the row's dout chunks are loaded when the
//             row starts; dV[i], dpd[i] are written when it ends.
//   k_src_pk  a warp takes a.srows consecutive sources of the transpose, the same scheme: dvalues[j],
//             dU[j], dps[j] written when source j ends.
// Every sum runs in an order fixed by the graph and the sizes: bit-reproducible.
#include "edge_attention.cuh"

namespace tgea {

// D[i, h] = <dout[i, h], out[i, h]> on every lane (and into the workspace for k_src); g keeps the
// lane's chunks of dout[i].
template <typename T, int HP, int RM>
__device__ __forceinline__ void row_d(const Args &a, const Cols<T, RM> &cl, int lane, int64_t i,
                                      float (&g)[RM][Cols<T, RM>::V], float (&D)[HP]) {
  constexpr int V = Cols<T, RM>::V;
  float o[RM][V];
#pragma unroll
  for (int r = 0; r < RM; ++r) {
#pragma unroll
    for (int q = 0; q < V; ++q)
      g[r][q] = o[r][q] = 0.f;
    if (cl.has(a, r)) {
      cl.load(a, a.dout, i, r, g[r]);
      cl.load(a, a.fout, i, r, o[r]);
    }
  }
  head_dot<HP, RM, V>(g, o, cl.hq, cl.G, D);
#pragma unroll
  for (int h = 0; h < HP; ++h)
    if (lane == h && h < a.H) a.D[i * a.H + h] = D[h];
}

// head_dot with the group's sums left scattered: lane gl of the group ends with the sum of head
// gl / (G / HP). Recursive halving: log2(HP) exchanges of half the heads still held, then a
// butterfly over the remaining lanes: HP - 1 + log2(G / HP) shuffles instead of HP log2(G).
// Needs G >= HP (G, HP powers of two).
template <int HP, int RM, int V>
__device__ __forceinline__ float head_dot_rs(const float (&x)[RM][V], const float (&y)[RM][V], const int (&hq)[RM][V],
                                             int G) {
  float d[HP];
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
        d[h] += hq[r][q] == h ? v : 0.f;
    }
  const unsigned m = tgg::group_mask(G);
  const int gl = (int)(threadIdx.x & 31u) & (G - 1);
  int o = G >> 1;
#pragma unroll
  for (int s = HP >> 1; s >= 1; s >>= 1) {
    // keep heads [s, 2s) (upper lane of the pair) or [0, s) of the ones held, send the others
    const bool up = (gl & o) != 0;
#pragma unroll
    for (int q = 0; q < s; ++q) {
      const float send = up ? d[q] : d[q + s];
      const float keep = up ? d[q + s] : d[q];
      d[q] = keep + __shfl_xor_sync(m, send, o);
    }
    o >>= 1;
  }
  for (; o >= 1; o >>= 1)
    d[0] += __shfl_xor_sync(m, d[0], o);
  return d[0];
}

// Per warp; followed in dynamic shared memory by each warp's edge-feature area (fe_floats), then
// each warp's weight sums (P floats).
template <int HID, int HP> struct DstPkSm {
  int64_t rp[kRows + 1];         // row offsets of the chunk
  alignas(16) float dpos[32][4]; // ps[j] - pd[i] of the batch, [edge][d] (one 16-byte read)
  alignas(16) float dd[32][HP];  // <dout, values[j]> per head, then ds: [edge][h]
  float a[HID][kAS];             // pre-activations of the batch: [unit][edge]
  int32_t j[32];
};

// k_dst_pk's resident blocks per SM the register budget is set for: at hid 64 the kept
// pre-activations and the weight sums cap it at 4 blocks by shared memory, so it may use 128
// registers (ptxas: fewer spills, except f32 at H 1, which spills more and keeps 80).
template <typename T> __host__ __device__ constexpr int dst_min_blocks(int HID, int HP, int RM) {
  return RM != 1 ? 1 : HID == 64 && (HP > 1 || sizeof(T) == 2) ? 4 : HP == 1 ? 6 : 5;
}

template <typename T, int HID, int HP, int RM>
__global__ void __launch_bounds__(kDstWarps * 32, dst_min_blocks<T>(HID, HP, RM)) k_dst_pk(const Args a) {
  __shared__ Wts<HID> w;
  extern __shared__ __align__(16) float dyn[];
  constexpr int V = Cols<T, RM>::V, NKB = HID / kKB, UF = RM == 1 ? 2 : 1; // UF: edges loaded ahead
  const int wid = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31, es = lane >> 4, kk = lane & 15;
  DstPkSm<HID, HP> &sm = reinterpret_cast<DstPkSm<HID, HP> *>(dyn)[wid];
  const int xf = fe_floats(a.Fe);
  float *const sfe = dyn + kDstWarps * sizeof(DstPkSm<HID, HP>) / sizeof(float) + wid * xf;
  float *const sgfe = sfe + 32 * a.Fe;
  float *const sda = sgfe + 32 * a.Fe; // [kKB][kAS], only when Fe > 0
  float *const wall = dyn + kDstWarps * (sizeof(DstPkSm<HID, HP>) / sizeof(float) + xf);
  float *const wacc = wall + wid * a.P; // this warp's weight sums, the partial layout
  load_wts<T, HID>(w, a);
  if (a.wgrad)
    for (int t = threadIdx.x; t < kDstWarps * a.P; t += blockDim.x)
      wall[t] = 0.f;
  __syncthreads();
  Cols<T, RM> cl;
  cl.init(a, lane);
  const T *U = static_cast<const T *>(a.U), *Vn = static_cast<const T *>(a.V);
  const int ob1 = (a.dim + a.Fe) * HID, ow2 = ob1 + HID;
  const bool fegrad = a.Fe > 0 && (a.wgrad || a.g.fe); // da per edge wanted (dwe, dfe)
  float db2[HP];
#pragma unroll
  for (int h = 0; h < HP; ++h)
    db2[h] = 0.f;
  const int64_t nch = (a.nq + a.rows - 1) / a.rows, nw = (int64_t)gridDim.x * kDstWarps;
#pragma unroll 1
  for (int64_t ch = (int64_t)blockIdx.x * kDstWarps + wid; ch < nch; ch += nw) {
    const int64_t r0 = ch * a.rows;
    const int n = (int)(a.nq - r0 < a.rows ? a.nq - r0 : a.rows);
    __syncwarp(); // the previous chunk's readers of sm.rp are done
    for (int q = lane; q <= n; q += 32)
      sm.rp[q] = a.rp[r0 + q];
    // the chunk's rows of dout, out (D, the column phase) and dV (row sums) are read row by row later
    prefetch_span(static_cast<const T *>(a.dout) + r0 * a.HF, n * a.HF * (int64_t)sizeof(T), lane);
    prefetch_span(static_cast<const T *>(a.fout) + r0 * a.HF, n * a.HF * (int64_t)sizeof(T), lane);
    if (a.edges && a.g.V) prefetch_span(static_cast<const T *>(a.g.V) + r0 * HID, n * HID * (int64_t)sizeof(T), lane);
    if (a.edges && a.g.pd) prefetch_span(a.g.pd + r0 * a.dim, n * a.dim * (int64_t)sizeof(float), lane);
    __syncwarp();
    float g[RM][V], D[HP];
    row_d<T, HP, RM>(a, cl, lane, r0, g, D);
    if (!a.edges) {
#pragma unroll 1
      for (int q = 1; q < n; ++q)
        row_d<T, HP, RM>(a, cl, lane, r0 + q, g, D);
      continue;
    }
    float dv[NKB];
#pragma unroll
    for (int kb = 0; kb < NKB; ++kb)
      dv[kb] = 0.f;
    // the chunk's rows of V, pd and lse, gathered by the lanes of every batch
    prefetch_span(Vn ? Vn + r0 * HID : nullptr, n * HID * (int64_t)sizeof(T), lane);
    prefetch_span(a.pd ? a.pd + r0 * a.dim : nullptr, n * a.dim * (int64_t)sizeof(float), lane);
#pragma unroll 1
    for (int h = 0; h < a.H; ++h)
      prefetch_span(a.lse_in + h * a.nq + r0, n * (int64_t)sizeof(float), lane);
    const int64_t E0 = sm.rp[0], E1 = sm.rp[n];
    int cur = 0;                                       // the row in progress (index in the chunk)
    int32_t jn = E0 + lane < E1 ? a.ci[E0 + lane] : 0; // col_idx one batch ahead
#pragma unroll 1
    for (int64_t e0 = E0;; e0 += 32) {
      const int nb = (int)(E1 - e0 < 32 ? E1 - e0 : 32); // 0 only for a chunk without edges
      const int32_t jc = jn;
      if (e0 + 32 + lane < E1) jn = a.ci[e0 + 32 + lane];
      // lane = edge: scores (pre-activations kept in sm.a), p, dropout weight
      float p[HP], wd[HP], dp[kMaxDim];
      int32_t j = 0;
      if (lane < nb) {
        const int64_t i = r0 + seg_of(sm.rp, n, e0 + lane);
        j = jc;
        prefetch_row(static_cast<const T *>(a.vals) + (int64_t)j * a.HF, a.HF * (int64_t)sizeof(T));
        edge_in<T>(a, e0 + lane, j, i, dp, sfe + lane);
        float s[HP];
        scores<T, HID, HP, true>(a, w, w.b1, U ? U + (int64_t)j * HID : nullptr, Vn ? Vn + i * HID : nullptr, dp,
                                 sfe + lane, s, &sm.a[0][lane]);
#pragma unroll
        for (int h = 0; h < HP; ++h) {
          const bool on = h < a.H;
          p[h] = on ? tgg::exp_from(s[h], a.lse_in[h * a.nq + i]) : 0.f;
          wd[h] = on ? a.drop.w(h, i, j) : 0.f;
        }
      } else {
#pragma unroll
        for (int h = 0; h < HP; ++h)
          p[h] = wd[h] = 0.f;
#pragma unroll
        for (int d = 0; d < kMaxDim; ++d)
          dp[d] = 0.f;
      }
      sm.j[lane] = j;
#pragma unroll
      for (int d = 0; d < kMaxDim; ++d)
        sm.dpos[lane][d] = dp[d];
      sm.dpos[lane][3] = 0.f;
#pragma unroll 1
      for (int f = 0; f < a.Fe; ++f)
        sgfe[f * 32 + lane] = 0.f;
      __syncwarp();
#pragma unroll 1
      while (cur < n) {
        const int64_t i = r0 + cur, re = sm.rp[cur + 1];
        int lo, hi;
        piece_of(sm.rp[cur], re, e0, nb, lo, hi);
        if (hi > lo) {
          // groups over the piece's edges: <dout[i, h], values[j, h]>
#pragma unroll 1
          for (int t0 = lo + cl.grp; t0 < hi; t0 += UF * cl.NG) {
            float v[UF][RM][V];
#pragma unroll
            for (int u = 0; u < UF; ++u)
#pragma unroll
              for (int r = 0; r < RM; ++r) {
#pragma unroll
                for (int q = 0; q < V; ++q)
                  v[u][r][q] = 0.f;
                const int t = t0 + u * cl.NG;
                if (t < hi && cl.has(a, r)) cl.load(a, a.vals, sm.j[t], r, v[u][r]);
              }
#pragma unroll
            for (int u = 0; u < UF; ++u) {
              const int t = t0 + u * cl.NG;
              if (t < hi) { // uniform over the group
                if (HP > 1 && cl.G >= HP) {
                  const float r = head_dot_rs<HP, RM, V>(g, v[u], cl.hq, cl.G);
                  const int sub = cl.G / HP; // lanes per head after the halving
                  if (cl.gl % sub == 0) sm.dd[t][cl.gl / sub] = r;
                } else {
                  float dt[HP];
                  head_dot<HP, RM, V>(g, v[u], cl.hq, cl.G, dt);
                  if (cl.gl == 0)
#pragma unroll
                    for (int h = 0; h < HP; ++h)
                      sm.dd[t][h] = dt[h];
                }
              }
            }
          }
          __syncwarp();
          if (lane >= lo && lane < hi)
#pragma unroll
            for (int h = 0; h < HP; ++h) {
              const float ds = p[h] * (wd[h] * sm.dd[lane][h] - D[h]);
              db2[h] += ds;
              sm.dd[lane][h] = ds;
            }
          __syncwarp();
          const int hh = (hi - lo + 1) >> 1; // the piece's halves: [lo, lo + hh) and [lo + hh, hi)
          const int t0 = lo + es * hh, t1 = es ? hi : lo + hh;
#pragma unroll
          for (int kb = 0; kb < NKB; ++kb) {
            // lane = (es, kk): over half es of the piece for unit k, from the kept a and ds:
            // da = LeakyReLU'(a) sum_h ds[h] w2[k, h], and the sums of da, dpos da, ds z
            const int k = kb * kKB + kk;
            float w2k[HP], sd = 0.f, rwp[kMaxDim], rw2[HP];
#pragma unroll
            for (int h = 0; h < HP; ++h) {
              w2k[h] = w.w2[k][h];
              rw2[h] = 0.f;
            }
#pragma unroll
            for (int d = 0; d < kMaxDim; ++d)
              rwp[d] = 0.f;
#pragma unroll 4
            for (int t = t0; t < t1; ++t) {
              const float x = sm.a[k][t];
              float dsv[HP], dz = 0.f;
#pragma unroll
              for (int h = 0; h < HP; ++h) {
                dsv[h] = sm.dd[t][h];
                dz = fmaf(dsv[h], w2k[h], dz);
              }
              const float d_ = dz * leaky_d(x, a.slope);
              if (fegrad) sda[kk * kAS + t] = d_;
              sd += d_;
              if (a.wgrad) {
#pragma unroll
                for (int d = 0; d < kMaxDim; ++d)
                  if (d < a.dim) rwp[d] = fmaf(sm.dpos[t][d], d_, rwp[d]);
                const float z_ = leaky(x, a.slope);
#pragma unroll
                for (int h = 0; h < HP; ++h)
                  rw2[h] = fmaf(dsv[h], z_, rw2[h]);
              }
            }
            sd += __shfl_xor_sync(0xffffffffu, sd, 16);
            dv[kb] += sd;
            if (a.wgrad) {
#pragma unroll
              for (int d = 0; d < kMaxDim; ++d)
                rwp[d] += __shfl_xor_sync(0xffffffffu, rwp[d], 16);
#pragma unroll
              for (int h = 0; h < HP; ++h)
                rw2[h] += __shfl_xor_sync(0xffffffffu, rw2[h], 16);
              if (es == 0) {
#pragma unroll
                for (int d = 0; d < kMaxDim; ++d)
                  if (d < a.dim) wacc[d * HID + k] += rwp[d];
                wacc[ob1 + k] += sd;
#pragma unroll
                for (int h = 0; h < HP; ++h)
                  if (h < a.H) wacc[ow2 + h * HID + k] += rw2[h];
              }
              // dwe: the lane's own da entries (written above by this lane)
#pragma unroll 1
              for (int f = 0; f < a.Fe; ++f) {
                float r = 0.f;
                for (int t = t0; t < t1; ++t)
                  r = fmaf(sfe[f * 32 + t], sda[kk * kAS + t], r);
                r += __shfl_xor_sync(0xffffffffu, r, 16);
                if (es == 0) wacc[(a.dim + f) * HID + k] += r;
              }
            }
            if (fegrad) {
              __syncwarp();
              // lane = edge of the piece: dfe[e, f] += sum over this block's units of we[f, k] da[e, k]
              if (a.g.fe && lane >= lo && lane < hi)
#pragma unroll 1
                for (int f = 0; f < a.Fe; ++f) {
                  float r = 0.f;
#pragma unroll
                  for (int q = 0; q < kKB; ++q)
                    r = fmaf(w.we[f][kb * kKB + q], sda[q * kAS + lane], r);
                  sgfe[f * 32 + lane] += r;
                }
              __syncwarp();
            }
          }
        }
        if (re > e0 + nb) break; // the row goes on in the next batch
        // row i is complete: dV[i] += sum_e da; dpd[i, d] -= sum_k wp[d, k] dV-row[k]
        if (a.g.V && es == 0)
#pragma unroll
          for (int kb = 0; kb < NKB; ++kb)
            addf<T>(a.g.V, i * HID + kb * kKB + kk, dv[kb]);
        if (a.g.pd)
#pragma unroll
          for (int d = 0; d < kMaxDim; ++d)
            if (d < a.dim) {
              float r = 0.f;
              if (es == 0)
#pragma unroll
                for (int kb = 0; kb < NKB; ++kb)
                  r = fmaf(w.wp[d][kb * kKB + kk], dv[kb], r);
              r = tgc_warp_sum(r);
              if (lane == 0) a.g.pd[i * a.dim + d] -= r;
            }
#pragma unroll
        for (int kb = 0; kb < NKB; ++kb)
          dv[kb] = 0.f;
        ++cur;
        if (cur < n) row_d<T, HP, RM>(a, cl, lane, r0 + cur, g, D);
      }
      if (lane < nb && a.g.fe)
#pragma unroll 1
        for (int f = 0; f < a.Fe; ++f)
          addf<T>(a.g.fe, (e0 + lane) * a.Fe + f, sgfe[f * 32 + lane]);
      if (e0 + 32 + lane < E1) { // the next batch's gathers
        prefetch_of<T>(a.U, jn, HID);
        prefetch_of<T>(a.vals, jn, a.HF);
        prefetch_of<float>(a.ps, jn, a.dim);
      }
      __syncwarp();
      if (e0 + nb >= E1) break;
    }
  }
  if (a.wgrad) {
#pragma unroll
    for (int h = 0; h < HP; ++h) {
      const float r = tgc_warp_sum(db2[h]);
      if (lane == 0 && h < a.H) wacc[ow2 + a.H * HID + h] += r;
    }
  }
  __syncthreads();
  if (a.wgrad)
    for (int t = threadIdx.x; t < a.P; t += blockDim.x) {
      float s = 0.f;
#pragma unroll
      for (int q = 0; q < kDstWarps; ++q)
        s += wall[q * a.P + t];
      a.part[(int64_t)blockIdx.x * a.P + t] = s;
    }
}

// Per warp; followed in dynamic shared memory by each warp's edge features of the batch
// ([f][entry], Fe * 32 floats).
template <int HID, int HP> struct SrcPkSm {
  int64_t rp[kRows + 1];        // transpose offsets of the chunk
  float pw[HP][32];             // p * w
  alignas(16) float dd[32][HP]; // <dout[i, h], values[j, h]>, then ds: [entry][h]
  float a[HID][kAS];            // pre-activations of the batch: [unit][entry]
  int32_t i[32];
};

// Source j's state: values[j] chunks (when da is wanted) and zero sums.
template <typename T, int RM, int NKB>
__device__ __forceinline__ void src_open(const Args &a, const Cols<T, RM> &cl, int64_t j,
                                         float (&vj)[RM][Cols<T, RM>::V], float (&acc)[RM][Cols<T, RM>::V],
                                         float (&du)[NKB]) {
#pragma unroll
  for (int r = 0; r < RM; ++r) {
#pragma unroll
    for (int q = 0; q < Cols<T, RM>::V; ++q)
      vj[r][q] = acc[r][q] = 0.f;
    if (a.srcda && cl.has(a, r)) cl.load(a, a.vals, j, r, vj[r]);
  }
#pragma unroll
  for (int kb = 0; kb < NKB; ++kb)
    du[kb] = 0.f;
}

template <typename T, int HID, int HP, int RM>
__global__ void __launch_bounds__(kSrcWarps * 32, src_min_blocks(HID, HP, RM)) k_src_pk(const Args a) {
  __shared__ Wts<HID> w;
  extern __shared__ __align__(16) float dyn[];
  constexpr int V = Cols<T, RM>::V, NKB = HID / kKB, UF = RM == 1 ? 2 : 1; // UF: entries loaded ahead
  load_wts<T, HID>(w, a);
  __syncthreads();
  const int wid = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31, es = lane >> 4, kk = lane & 15;
  const int64_t s0 = ((int64_t)blockIdx.x * kSrcWarps + wid) * a.srows;
  if (s0 >= a.nk) return; // warp-uniform, after the block's only barrier
  const int n = (int)(a.nk - s0 < a.srows ? a.nk - s0 : a.srows);
  SrcPkSm<HID, HP> &sm = reinterpret_cast<SrcPkSm<HID, HP> *>(dyn)[wid];
  float *const sfe = dyn + kSrcWarps * sizeof(SrcPkSm<HID, HP>) / sizeof(float) + wid * 32 * a.Fe;
  for (int q = lane; q <= n; q += 32)
    sm.rp[q] = a.tp[s0 + q];
  // the chunk's rows of values (source state) and dvalues, dU (written when a source ends)
  if (a.srcda) prefetch_span(static_cast<const T *>(a.vals) + s0 * a.HF, n * a.HF * (int64_t)sizeof(T), lane);
  if (a.g.values) prefetch_span(static_cast<const T *>(a.g.values) + s0 * a.HF, n * a.HF * (int64_t)sizeof(T), lane);
  if (a.g.U) prefetch_span(static_cast<const T *>(a.g.U) + s0 * HID, n * HID * (int64_t)sizeof(T), lane);
  if (a.g.ps) prefetch_span(a.g.ps + s0 * a.dim, n * a.dim * (int64_t)sizeof(float), lane);
  Cols<T, RM> cl;
  cl.init(a, lane);
  const T *U = static_cast<const T *>(a.U), *Vn = static_cast<const T *>(a.V);
  float vj[RM][V], acc[RM][V], du[NKB];
  src_open<T, RM, NKB>(a, cl, s0, vj, acc, du);
  __syncwarp();
  // the chunk's rows of U and ps, gathered by the lanes of every batch
  prefetch_span(U ? U + s0 * HID : nullptr, n * HID * (int64_t)sizeof(T), lane);
  prefetch_span(a.ps ? a.ps + s0 * a.dim : nullptr, n * a.dim * (int64_t)sizeof(float), lane);
  const int64_t E0 = sm.rp[0], E1 = sm.rp[n];
  int cur = 0; // the source in progress (index in the chunk)
  // t_row / t_edge one batch ahead
  int32_t in_ = E0 + lane < E1 ? a.tr[E0 + lane] : 0;
  int64_t en = a.Fe > 0 && E0 + lane < E1 ? a.te[E0 + lane] : 0; // t_edge: only fe reads it
#pragma unroll 1
  for (int64_t e0 = E0;; e0 += 32) {
    const int nb = (int)(E1 - e0 < 32 ? E1 - e0 : 32); // 0 only for a chunk without entries
    const int32_t ic = in_;
    const int64_t ec = en;
    if (e0 + 32 + lane < E1) {
      in_ = a.tr[e0 + 32 + lane];
      if (a.Fe > 0) en = a.te[e0 + 32 + lane];
    }
    float p[HP], wd[HP], Dv[HP];
    int32_t i = 0;
    if (lane < nb) {
      const int64_t j = s0 + seg_of(sm.rp, n, e0 + lane);
      float dp[kMaxDim];
      i = ic;
      prefetch_row(static_cast<const T *>(a.dout) + (int64_t)i * a.HF, a.HF * (int64_t)sizeof(T));
      edge_in<T>(a, ec, j, i, dp, sfe + lane);
      float s[HP];
      scores<T, HID, HP, true>(a, w, w.b1, U ? U + j * HID : nullptr, Vn ? Vn + (int64_t)i * HID : nullptr, dp,
                               sfe + lane, s, &sm.a[0][lane]);
#pragma unroll
      for (int h = 0; h < HP; ++h) {
        const bool on = h < a.H;
        p[h] = on ? tgg::exp_from(s[h], a.lse_in[h * a.nq + i]) : 0.f;
        wd[h] = on ? a.drop.w(h, i, j) : 0.f;
        Dv[h] = on && a.srcda ? a.D[(int64_t)i * a.H + h] : 0.f;
      }
    } else {
#pragma unroll
      for (int h = 0; h < HP; ++h)
        p[h] = wd[h] = Dv[h] = 0.f;
    }
    sm.i[lane] = i;
#pragma unroll
    for (int h = 0; h < HP; ++h)
      sm.pw[h][lane] = p[h] * wd[h];
    __syncwarp();
#pragma unroll 1
    while (cur < n) {
      const int64_t j = s0 + cur, re = sm.rp[cur + 1];
      int lo, hi;
      piece_of(sm.rp[cur], re, e0, nb, lo, hi);
      if (hi > lo) {
        // groups over the piece's entries: dvalues += p w dout[i]; <dout[i, h], values[j, h]>
#pragma unroll 1
        for (int t0 = lo + cl.grp; t0 < hi; t0 += UF * cl.NG) {
          float x[UF][RM][V];
#pragma unroll
          for (int u = 0; u < UF; ++u)
#pragma unroll
            for (int r = 0; r < RM; ++r) {
#pragma unroll
              for (int q = 0; q < V; ++q)
                x[u][r][q] = 0.f;
              const int t = t0 + u * cl.NG;
              if (t < hi && cl.has(a, r)) cl.load(a, a.dout, sm.i[t], r, x[u][r]);
            }
#pragma unroll
          for (int u = 0; u < UF; ++u) {
            const int t = t0 + u * cl.NG;
            if (t < hi) { // uniform over the group
#pragma unroll
              for (int r = 0; r < RM; ++r)
#pragma unroll
                for (int q = 0; q < V; ++q)
                  acc[r][q] = fmaf(sm.pw[cl.template head<HP>(r, q)][t], x[u][r][q], acc[r][q]);
              if (a.srcda) {
                if (HP > 1 && cl.G >= HP) {
                  const float r = head_dot_rs<HP, RM, V>(x[u], vj, cl.hq, cl.G);
                  const int sub = cl.G / HP; // lanes per head after the halving
                  if (cl.gl % sub == 0) sm.dd[t][cl.gl / sub] = r;
                } else {
                  float dt[HP];
                  head_dot<HP, RM, V>(x[u], vj, cl.hq, cl.G, dt);
                  if (cl.gl == 0)
#pragma unroll
                    for (int h = 0; h < HP; ++h)
                      sm.dd[t][h] = dt[h];
                }
              }
            }
          }
        }
        __syncwarp();
        if (a.srcda) {
          if (lane >= lo && lane < hi)
#pragma unroll
            for (int h = 0; h < HP; ++h)
              sm.dd[lane][h] = p[h] * (wd[h] * sm.dd[lane][h] - Dv[h]);
          __syncwarp();
          // lane = (es, kk): sum over half es of the piece of da[k] = LeakyReLU'(a) sum_h ds[h] w2[k, h]
          const int hh = (hi - lo + 1) >> 1, t0 = lo + es * hh, t1 = es ? hi : lo + hh;
#pragma unroll
          for (int kb = 0; kb < NKB; ++kb) {
            const int k = kb * kKB + kk;
            float w2k[HP], sd = 0.f;
#pragma unroll
            for (int h = 0; h < HP; ++h)
              w2k[h] = w.w2[k][h];
#pragma unroll 4
            for (int t = t0; t < t1; ++t) {
              float dz = 0.f;
#pragma unroll
              for (int h = 0; h < HP; ++h)
                dz = fmaf(sm.dd[t][h], w2k[h], dz);
              sd += dz * leaky_d(sm.a[k][t], a.slope);
            }
            sd += __shfl_xor_sync(0xffffffffu, sd, 16);
            du[kb] += sd;
          }
        }
        __syncwarp();
      }
      if (re > e0 + nb)
        break; // the source goes on in the next batch
               // source j is complete: dvalues[j], dU[j], dps[j]
#pragma unroll
      for (int r = 0; r < RM; ++r)
#pragma unroll
        for (int q = 0; q < V; ++q)
          acc[r][q] = cl.across(acc[r][q]);
      if (a.g.values && cl.grp == 0)
#pragma unroll
        for (int r = 0; r < RM; ++r)
          if (cl.has(a, r)) cl.add(a, a.g.values, j, r, acc[r], true);
      if (a.g.U && es == 0)
#pragma unroll
        for (int kb = 0; kb < NKB; ++kb)
          addf<T>(a.g.U, j * HID + kb * kKB + kk, du[kb]);
      if (a.g.ps)
#pragma unroll
        for (int d = 0; d < kMaxDim; ++d)
          if (d < a.dim) {
            float r = 0.f;
            if (es == 0)
#pragma unroll
              for (int kb = 0; kb < NKB; ++kb)
                r = fmaf(w.wp[d][kb * kKB + kk], du[kb], r);
            r = tgc_warp_sum(r);
            if (lane == 0) a.g.ps[j * a.dim + d] += r;
          }
      ++cur;
      if (cur < n) src_open<T, RM, NKB>(a, cl, s0 + cur, vj, acc, du);
    }
    if (e0 + 32 + lane < E1) { // the next batch's gathers
      prefetch_of<T>(a.V, in_, HID);
      prefetch_of<T>(a.dout, in_, a.HF);
      prefetch_of<float>(a.pd, in_, a.dim);
      if (a.srcda) prefetch_of<float>(a.D, in_, a.H);
#pragma unroll 1
      for (int h = 0; h < a.H; ++h)
        prefetch_row(a.lse_in + h * a.nq + in_, (int64_t)sizeof(float));
    }
    __syncwarp();
    if (e0 + nb >= E1) break;
  }
}

struct DstPk {
  template <typename T, int HID, int HP, int RM> static tg_status run(cudaStream_t s, const Args &a) {
    const size_t smem = kDstWarps * (sizeof(DstPkSm<HID, HP>) + sizeof(float) * (size_t)fe_floats(a.Fe) +
                                     (a.wgrad ? (size_t)a.P * sizeof(float) : 0));
    if (smem + sizeof(Wts<HID>) > 48 * 1024) // opt-in above the default (large Fe, H, hid)
      TGC_CUDA(cudaFuncSetAttribute(k_dst_pk<T, HID, HP, RM>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    k_dst_pk<T, HID, HP, RM><<<(unsigned)a.nblk, kDstWarps * 32, smem, s>>>(a);
    TGC_LAUNCHED("edge_attention_backward_dst");
    return TG_OK;
  }
};
struct SrcPk {
  template <typename T, int HID, int HP, int RM> static tg_status run(cudaStream_t s, const Args &a) {
    const int64_t chunks = (a.nk + a.srows - 1) / a.srows;
    const int64_t blocks = (chunks + kSrcWarps - 1) / kSrcWarps;
    const size_t smem = kSrcWarps * (sizeof(SrcPkSm<HID, HP>) + 32 * sizeof(float) * (size_t)a.Fe);
    if (smem + sizeof(Wts<HID>) > 48 * 1024) // opt-in above the default (large Fe, H, hid)
      TGC_CUDA(cudaFuncSetAttribute(k_src_pk<T, HID, HP, RM>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    k_src_pk<T, HID, HP, RM><<<(unsigned)blocks, kSrcWarps * 32, smem, s>>>(a);
    TGC_LAUNCHED("edge_attention_backward_src");
    return TG_OK;
  }
};

tg_status dst_packed(cudaStream_t s, const Args &a) { return dispatch_packed<DstPk>(s, a); }
tg_status src_packed(cudaStream_t s, const Args &a) { return dispatch_packed<SrcPk>(s, a); }

} // namespace tgea
