// tg_edge_attention's fused backward (cuda/edge_attention.h): three kernels, all recomputing a, z,
// s, p per edge from the inputs and lse (nothing of size E is stored).
//   k_dst  one warp per destination row, rows assigned statically (warp w of the grid takes rows
//          w, w + W, ...): D = <dout, out> (saved for k_src), then per batch of 32 edges the scores
//          (lane = edge, keeping the pre-activations a[unit][edge] in the warp's shared memory),
//          dp, ds, and from the kept a: da, the row sums dV[i], dpd[i], the per-edge dfe[e], and
//          the weight sums over the block's edges (per-warp shared accumulators, summed in warp
//          order into one partial set per block).
//   k_src  one warp per source over the transpose, the same scores-then-kept-a scheme: dvalues[j],
//          dU[j], dps[j].
//   k_wsum one block per weight element: the block partials summed in block order (fixed tree),
//          added into the gradient in its storage dtype.
// The MLP is evaluated once per edge per pass: the per-unit phase reads a from shared memory
// (z = LeakyReLU(a), da = LeakyReLU'(a) sum_h ds[h] w2[k, h]) instead of re-gathering U / V.
// Sums over a batch's nb edges for unit k are taken by lane (es, kk): half es of the batch (edges
// [0, ceil(nb / 2)) or the rest) for unit kb * 16 + kk, the halves then added with one shuffle.
// Every order is fixed: bit-reproducible.
// The launcher takes the packed k_dst / k_src of cuda/edge_attention_pk_bwd.cu (same partial
// layout, same k_wsum) where packed_for says so (cuda/edge_attention.cuh), else these.
#include "edge_attention.cuh"

namespace tgea {

// Per warp; followed in dynamic shared memory by each warp's edge-feature area (fe_floats), then
// each warp's weight sums (P floats).
template <int HID, int HP> struct DstSm {
  float c[HID];            // b1 + V[i]
  float dpos[kMaxDim][32]; // ps[j] - pd[i] of the batch
  float dd[HP][32];        // <dout, values[j]> per head, then ds
  float a[HID][kAS];       // pre-activations of the batch: [unit][edge]
  int32_t j[32];
};

template <typename T, int HID, int HP, int RM>
__global__ void __launch_bounds__(kDstWarps * 32, RM == 1 ? (HP == 1 ? 6 : 5) : 1) k_dst(const Args a) {
  __shared__ Wts<HID> w;
  extern __shared__ __align__(16) float dyn[];
  constexpr int V = Cols<T, RM>::V, NKB = HID / kKB, UF = RM == 1 ? 2 : 1; // UF: edges loaded ahead
  const int wid = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31, es = lane >> 4, kk = lane & 15;
  DstSm<HID, HP> &sm = reinterpret_cast<DstSm<HID, HP> *>(dyn)[wid];
  const int xf = fe_floats(a.Fe);
  float *const sfe = dyn + kDstWarps * sizeof(DstSm<HID, HP>) / sizeof(float) + wid * xf;
  float *const sgfe = sfe + 32 * a.Fe;
  float *const sda = sgfe + 32 * a.Fe; // [kKB][kAS], only when Fe > 0
  float *const wall = dyn + kDstWarps * (sizeof(DstSm<HID, HP>) / sizeof(float) + xf);
  float *const wacc = wall + wid * a.P; // this warp's weight sums, the partial layout
  load_wts<T, HID>(w, a);
  if (a.wgrad)
    for (int t = threadIdx.x; t < kDstWarps * a.P; t += blockDim.x)
      wall[t] = 0.f;
  __syncthreads();
  Cols<T, RM> cl;
  cl.init(a, lane);
  const T *U = static_cast<const T *>(a.U);
  const int ob1 = (a.dim + a.Fe) * HID, ow2 = ob1 + HID;
  const bool fegrad = a.Fe > 0 && (a.wgrad || a.g.fe); // da per edge wanted (dwe, dfe)
  float db2[HP];
#pragma unroll
  for (int h = 0; h < HP; ++h)
    db2[h] = 0.f;
  const int64_t nw = (int64_t)gridDim.x * kDstWarps;
#pragma unroll 1
  for (int64_t rk = (int64_t)blockIdx.x * kDstWarps + wid; rk < a.nq; rk += nw) {
    const int64_t i = sched(a.ro, rk);
    float g[RM][V], o[RM][V], D[HP];
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
    if (!a.edges) continue;
    float lse[HP];
#pragma unroll
    for (int h = 0; h < HP; ++h)
      lse[h] = h < a.H ? a.lse_in[h * a.nq + i] : -INFINITY;
    for (int k = lane; k < HID; k += 32)
      sm.c[k] = w.b1[k] + (a.V ? ldf<T>(a.V, i * HID + k) : 0.f);
    float dv[NKB];
#pragma unroll
    for (int kb = 0; kb < NKB; ++kb)
      dv[kb] = 0.f;
    const int64_t b = a.rp[i], e = a.rp[i + 1];
    __syncwarp();
#pragma unroll 1
    for (int64_t e0 = b; e0 < e; e0 += 32) {
      const int nb = (int)(e - e0 < 32 ? e - e0 : 32);
      // lane = edge: scores (pre-activations kept in sm.a), p, dropout weight
      float p[HP], wd[HP], dp[kMaxDim];
      int32_t j = 0;
      if (lane < nb) {
        j = a.ci[e0 + lane];
        edge_in<T>(a, e0 + lane, j, i, dp, sfe + lane);
        float s[HP];
        scores<T, HID, HP, true>(a, w, sm.c, U ? U + (int64_t)j * HID : nullptr, nullptr, dp, sfe + lane, s,
                                 &sm.a[0][lane]);
#pragma unroll
        for (int h = 0; h < HP; ++h) {
          p[h] = tgg::exp_from(s[h], lse[h]);
          wd[h] = h < a.H ? a.drop.w(h, i, j) : 0.f;
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
        sm.dpos[d][lane] = dp[d];
#pragma unroll 1
      for (int f = 0; f < a.Fe; ++f)
        sgfe[f * 32 + lane] = 0.f;
      __syncwarp();
      // groups over edges: <dout[i, h], values[j, h]>
#pragma unroll 1
      for (int t0 = cl.grp; t0 < nb; t0 += UF * cl.NG) {
        float v[UF][RM][V];
#pragma unroll
        for (int u = 0; u < UF; ++u)
#pragma unroll
          for (int r = 0; r < RM; ++r) {
#pragma unroll
            for (int q = 0; q < V; ++q)
              v[u][r][q] = 0.f;
            const int t = t0 + u * cl.NG;
            if (t < nb && cl.has(a, r)) cl.load(a, a.vals, sm.j[t], r, v[u][r]);
          }
#pragma unroll
        for (int u = 0; u < UF; ++u) {
          const int t = t0 + u * cl.NG;
          if (t < nb) { // uniform over the group
            float dt[HP];
            head_dot<HP, RM, V>(g, v[u], cl.hq, cl.G, dt);
            if (cl.gl == 0)
#pragma unroll
              for (int h = 0; h < HP; ++h)
                sm.dd[h][t] = dt[h];
          }
        }
      }
      __syncwarp();
#pragma unroll
      for (int h = 0; h < HP; ++h) {
        const float ds = lane < nb ? p[h] * (wd[h] * sm.dd[h][lane] - D[h]) : 0.f;
        db2[h] += ds;
        sm.dd[h][lane] = ds;
      }
      __syncwarp();
      const int hh = (nb + 1) >> 1; // the batch's halves: edges [0, hh) and [hh, nb)
#pragma unroll
      for (int kb = 0; kb < NKB; ++kb) {
        // lane = (es, kk): over half es of the batch for unit k, from the kept a and ds:
        // da = LeakyReLU'(a) sum_h ds[h] w2[k, h], and the sums of da, dpos da, ds z
        const int k = kb * kKB + kk, t0 = es * hh, t1 = es ? nb : hh;
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
            dsv[h] = sm.dd[h][t];
            dz = fmaf(dsv[h], w2k[h], dz);
          }
          const float d_ = dz * leaky_d(x, a.slope);
          if (fegrad) sda[kk * kAS + t] = d_;
          sd += d_;
          if (a.wgrad) {
#pragma unroll
            for (int d = 0; d < kMaxDim; ++d)
              if (d < a.dim) rwp[d] = fmaf(sm.dpos[d][t], d_, rwp[d]);
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
          // lane = edge: dfe[e, f] += sum over this block's units of we[f, k] da[e, k]
          if (a.g.fe && lane < nb)
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
      if (lane < nb && a.g.fe)
#pragma unroll 1
        for (int f = 0; f < a.Fe; ++f)
          addf<T>(a.g.fe, (e0 + lane) * a.Fe + f, sgfe[f * 32 + lane]);
      __syncwarp();
    }
    // row sums: dV[i] += sum_e da; dpd[i, d] -= sum_k wp[d, k] dV-row[k]
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
    __syncwarp();
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
template <int HID, int HP> struct SrcSm {
  float c[HID];      // b1 + U[j]
  float pw[HP][32];  // p * w
  float dd[HP][32];  // <dout[i, h], values[j, h]>, then ds
  float a[HID][kAS]; // pre-activations of the batch: [unit][entry]
  int32_t i[32];
};

template <typename T, int HID, int HP, int RM>
__global__ void __launch_bounds__(kSrcWarps * 32, src_min_blocks(HID, HP, RM)) k_src(const Args a) {
  __shared__ Wts<HID> w;
  extern __shared__ __align__(16) float dyn[];
  constexpr int V = Cols<T, RM>::V, NKB = HID / kKB, UF = RM == 1 ? 2 : 1; // UF: entries loaded ahead
  load_wts<T, HID>(w, a);
  __syncthreads();
  const int wid = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31, es = lane >> 4, kk = lane & 15;
  const int64_t rk = (int64_t)blockIdx.x * kSrcWarps + wid;
  if (rk >= a.nk) return; // warp-uniform, after the block's only barrier
  const int64_t j = sched(a.so, rk);
  SrcSm<HID, HP> &sm = reinterpret_cast<SrcSm<HID, HP> *>(dyn)[wid];
  float *const sfe = dyn + kSrcWarps * sizeof(SrcSm<HID, HP>) / sizeof(float) + wid * 32 * a.Fe;
  for (int k = lane; k < HID; k += 32)
    sm.c[k] = w.b1[k] + (a.U ? ldf<T>(a.U, j * HID + k) : 0.f);
  Cols<T, RM> cl;
  cl.init(a, lane);
  const T *Vn = static_cast<const T *>(a.V);
  float vj[RM][V], acc[RM][V], du[NKB];
#pragma unroll
  for (int r = 0; r < RM; ++r) {
#pragma unroll
    for (int q = 0; q < V; ++q)
      vj[r][q] = acc[r][q] = 0.f;
    if (a.srcda && cl.has(a, r)) cl.load(a, a.vals, j, r, vj[r]);
  }
#pragma unroll
  for (int kb = 0; kb < NKB; ++kb)
    du[kb] = 0.f;
  const int64_t b = a.tp[j], e = a.tp[j + 1];
  __syncwarp();
#pragma unroll 1
  for (int64_t e0 = b; e0 < e; e0 += 32) {
    const int nb = (int)(e - e0 < 32 ? e - e0 : 32);
    float p[HP], wd[HP], Dv[HP];
    int32_t i = 0;
    if (lane < nb) {
      float dp[kMaxDim];
      i = a.tr[e0 + lane];
      edge_in<T>(a, a.te[e0 + lane], j, i, dp, sfe + lane);
      float s[HP];
      scores<T, HID, HP, true>(a, w, sm.c, Vn ? Vn + (int64_t)i * HID : nullptr, nullptr, dp, sfe + lane, s,
                               &sm.a[0][lane]);
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
    // groups over entries: dvalues += p w dout[i]; <dout[i, h], values[j, h]>
#pragma unroll 1
    for (int t0 = cl.grp; t0 < nb; t0 += UF * cl.NG) {
      float x[UF][RM][V];
#pragma unroll
      for (int u = 0; u < UF; ++u)
#pragma unroll
        for (int r = 0; r < RM; ++r) {
#pragma unroll
          for (int q = 0; q < V; ++q)
            x[u][r][q] = 0.f;
          const int t = t0 + u * cl.NG;
          if (t < nb && cl.has(a, r)) cl.load(a, a.dout, sm.i[t], r, x[u][r]);
        }
#pragma unroll
      for (int u = 0; u < UF; ++u) {
        const int t = t0 + u * cl.NG;
        if (t < nb) { // uniform over the group
#pragma unroll
          for (int r = 0; r < RM; ++r)
#pragma unroll
            for (int q = 0; q < V; ++q)
              acc[r][q] = fmaf(sm.pw[cl.template head<HP>(r, q)][t], x[u][r][q], acc[r][q]);
          if (a.srcda) {
            float dt[HP];
            head_dot<HP, RM, V>(x[u], vj, cl.hq, cl.G, dt);
            if (cl.gl == 0)
#pragma unroll
              for (int h = 0; h < HP; ++h)
                sm.dd[h][t] = dt[h];
          }
        }
      }
    }
    __syncwarp();
    if (a.srcda) {
#pragma unroll
      for (int h = 0; h < HP; ++h)
        sm.dd[h][lane] = lane < nb ? p[h] * (wd[h] * sm.dd[h][lane] - Dv[h]) : 0.f;
      __syncwarp();
      // lane = (es, kk): sum over half es of the batch of da[k] = LeakyReLU'(a) sum_h ds[h] w2[k, h]
      const int hh = (nb + 1) >> 1, t0 = es * hh, t1 = es ? nb : hh;
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
            dz = fmaf(sm.dd[h][t], w2k[h], dz);
          sd += dz * leaky_d(sm.a[k][t], a.slope);
        }
        sd += __shfl_xor_sync(0xffffffffu, sd, 16);
        du[kb] += sd;
      }
    }
    __syncwarp();
  }
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
}

// Weight element t: the block partials summed in block order (strided per thread, then a fixed
// tree), added into its gradient.
template <typename T> __global__ void __launch_bounds__(256) k_wsum(const Args a) {
  const int t = (int)blockIdx.x;
  float s = 0.f;
  for (int b = (int)threadIdx.x; b < a.nblk; b += (int)blockDim.x)
    s += a.part[(int64_t)b * a.P + t];
  s = tgc_block_sum(s);
  if (threadIdx.x != 0) return;
  const int hid = a.hid, nwp = a.dim * hid, nwe = a.Fe * hid;
  int u = t;
  if (u < nwp) {
    if (a.g.wp) addf<T>(a.g.wp, u, s);
    return;
  }
  u -= nwp;
  if (u < nwe) {
    if (a.g.we) addf<T>(a.g.we, u, s);
    return;
  }
  u -= nwe;
  if (u < hid) {
    if (a.g.b1) addf<T>(a.g.b1, u, s);
    return;
  }
  u -= hid;
  if (u < a.H * hid) {
    if (a.g.w2) addf<T>(a.g.w2, (int64_t)(u % hid) * a.H + u / hid, s);
    return;
  }
  u -= (int)a.H * hid;
  if (a.g.b2) addf<T>(a.g.b2, u, s);
}

struct Dst {
  template <typename T, int HID, int HP, int RM> static tg_status run(cudaStream_t s, const Args &a) {
    const size_t smem = kDstWarps * (sizeof(DstSm<HID, HP>) + sizeof(float) * (size_t)fe_floats(a.Fe) +
                                     (a.wgrad ? (size_t)a.P * sizeof(float) : 0));
    if (smem + sizeof(Wts<HID>) > 48 * 1024) // opt-in above the default (large Fe, H, hid)
      TGC_CUDA(cudaFuncSetAttribute(k_dst<T, HID, HP, RM>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    k_dst<T, HID, HP, RM><<<(unsigned)a.nblk, kDstWarps * 32, smem, s>>>(a);
    TGC_LAUNCHED("edge_attention_backward_dst");
    return TG_OK;
  }
};
struct Src {
  template <typename T, int HID, int HP, int RM> static tg_status run(cudaStream_t s, const Args &a) {
    const int64_t blocks = (a.nk + kSrcWarps - 1) / kSrcWarps;
    const size_t smem = kSrcWarps * (sizeof(SrcSm<HID, HP>) + 32 * sizeof(float) * (size_t)a.Fe);
    if (smem + sizeof(Wts<HID>) > 48 * 1024) // opt-in above the default (large Fe, H, hid)
      TGC_CUDA(cudaFuncSetAttribute(k_src<T, HID, HP, RM>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    k_src<T, HID, HP, RM><<<(unsigned)blocks, kSrcWarps * 32, smem, s>>>(a);
    TGC_LAUNCHED("edge_attention_backward_src");
    return TG_OK;
  }
};

} // namespace tgea

using namespace tgea;

// The kernel families a backward call runs (x filled for launching). st != TG_OK: the call's error;
// go false: nothing to run.
struct BwdPlan {
  tg_status st = TG_OK;
  bool go = false, src = false, ln = false, wgrad = false;
};

static BwdPlan plan_backward(const char *op, const tgc_csr *g, const tgc_edge_attn *a, const tgc_edge_inputs *in,
                             const void *out, const void *dout, const float *lse, const tgc_edge_grads *d,
                             const void *workspace, Args &x) {
  BwdPlan pl;
  if (!d) {
    tgc_set_error("%s: gradients are NULL", op);
    pl.st = TG_ERR_INVALID_ARGUMENT;
    return pl;
  }
  const bool geo = a && a->dim > 0, efe = a && a->Fe > 0;
  pl.src = d->U || d->values || (geo && d->ps);
  pl.st = make_args(op, g, a, in, pl.src, &x);
  if (pl.st != TG_OK || g->nq == 0 || g->nnz == 0) return pl;
  x.g = *d;
  if (!geo) x.g.wp = nullptr, x.g.ps = x.g.pd = nullptr;
  if (!efe) x.g.we = x.g.fe = nullptr;
  pl.wgrad = x.g.wp || x.g.we || x.g.b1 || x.g.w2 || x.g.b2;
  x.edges = pl.wgrad || x.g.V || x.g.pd || x.g.fe;
  x.srcda = x.g.U || x.g.ps;
  x.wgrad = pl.wgrad;
  if (!x.edges && !pl.src) return pl;
  if (!dout || !lse || ((x.edges || x.srcda) && !out)) {
    tgc_set_error("%s: out, dout or lse is NULL", op);
    pl.st = TG_ERR_INVALID_ARGUMENT;
    return pl;
  }
  x.fout = out;
  x.dout = dout;
  x.lse_in = lse;
  x.nblk = (int)dst_blocks(g->nq);
  x.P = (int)partial_floats(a);
  set_cols(&x, {in->values, out, dout, d->values});
  x.rows = rows_for(g->nq);
  x.srows = rows_for(g->nk);
  pl.ln = lanes_ok(a, x) && tgc_aligned(workspace, sizeof(float2));
  x.lanes = lanes_ln(a, g->nq);
  x.slanes = lanes_ln(a, g->nk);
  x.big = ln_big_of(a, g->nq);
  x.slice = pl.ln || !tgc_aligned(workspace, sizeof(float2)) ? 0 : slice_of(a, x);
  if (x.slice) {
    x.lanes = sl_groups(a, x.slice, g->nq);
    x.slanes = sl_groups(a, x.slice, g->nk);
  }
  pl.go = true;
  return pl;
}

extern "C" int cuda_edge_attention_dU_over(const tgc_csr *g, const tgc_edge_attn *a, const tgc_edge_inputs *in,
                                           const void *out, const void *dout, const tgc_edge_grads *d,
                                           const void *workspace) {
  if (!g || !a || !in || !d || !d->U || !in->U) return 0;
  Args x{}; // value-initialised: a field a path does not set reads 0
  // lse only needs to be non-NULL for planning
  const BwdPlan pl = plan_backward("cuda_edge_attention_dU_over", g, a, in, out, dout,
                                   static_cast<const float *>(workspace), d, workspace, x);
  return pl.st == TG_OK && pl.go && pl.src && (pl.ln || x.slice);
}

extern "C" tg_status cuda_edge_attention_backward(tgc_stream s, const tgc_csr *g, const tgc_edge_attn *a,
                                                  const tgc_edge_inputs *in, const void *out, const void *dout,
                                                  const float *lse, const tgc_edge_grads *d, void *workspace,
                                                  size_t workspace_bytes) {
  const char *op = "cuda_edge_attention_backward";
  Args x{}; // value-initialised: a field a path does not set reads 0
  const BwdPlan pl = plan_backward(op, g, a, in, out, dout, lse, d, workspace, x);
  if (pl.st != TG_OK || !pl.go) return pl.st;
  const bool ln = pl.ln;
  if (d->U_over && (d->U != in->U || !pl.src || !(ln || x.slice))) {
    tgc_set_error("%s: U_over set, but d->U is not in->U or these kernels cannot write dU over U", op);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if ((d->values_over && (d->values != in->values || !ln)) || (x.rmap && (!ln || (pl.src && !x.dnew)))) {
    tgc_set_error("%s: values_over or row_map set where the lane kernels do not run, or d->values is not "
                  "in->values, or no dout_new for the source pass",
                  op);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (!pl.src) x.dnew = nullptr; // nothing gathers the copy
  tg_status st = TG_OK;
  if (x.edges || x.srcda || x.dnew) {
    const size_t need = cuda_edge_attention_backward_workspace(g, a);
    if (!workspace || workspace_bytes < need || !tgc_aligned(workspace, sizeof(float))) {
      tgc_set_error("%s: workspace of %zu bytes (float aligned), %zu needed", op, workspace ? workspace_bytes : 0,
                    need);
      return TG_ERR_INVALID_ARGUMENT;
    }
    x.D = static_cast<float *>(workspace);
    x.part = x.D + ws_d_floats(g, a);
    st = ln ? dst_lanes(s, x) : x.slice ? dst_slices(s, x) : packed_for(x.hid) ? dst_packed(s, x) : dispatch<Dst>(s, x);
    if (st != TG_OK) return st;
  }
  if (pl.src) {
    st = ln ? src_lanes(s, x) : x.slice ? src_slices(s, x) : packed_for(x.hid) ? src_packed(s, x) : dispatch<Src>(s, x);
    if (st != TG_OK) return st;
  }
  if (pl.wgrad) {
    if (x.dt == TG_F32)
      k_wsum<float><<<(unsigned)x.P, 256, 0, s>>>(x);
    else
      k_wsum<__nv_bfloat16><<<(unsigned)x.P, 256, 0, s>>>(x);
    TGC_LAUNCHED("edge_attention_backward_wsum");
  }
  return TG_OK;
}
