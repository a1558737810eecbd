// tg_edge_attention's fused forward (cuda/edge_attention.h), the size checks and the workspace
// size. One warp per destination row: per batch of up to 32 edges the lanes evaluate the score MLP
// of one edge each (cuda/edge_attention.cuh), the row's online-softmax state per head is updated
// with warp max / sum, and the column phase accumulates p w values[j] into the row's output.
// The launcher takes the packed forward of cuda/edge_attention_pk.cu where packed_for says so
// (cuda/edge_attention.cuh), else this one.
#include "edge_attention.cuh"

namespace tgea {

int g_kernels = 0, g_rows = 0; // cuda/edge_attention.cuh

constexpr int kFwdWarps = 8;

template <int HID, int HP> struct FwdSm {
  float c[HID];          // b1 + V[i]
  float fe[kMaxFe * 32]; // edge features of the batch, [f][lane]
  float pw[HP][32];      // p * w of the batch, [h][edge]
  int32_t j[32];         // sources of the batch
  float sc[HP], m[HP], l[HP];
};

template <typename T, int HID, int HP, int RM>
__global__ void __launch_bounds__(kFwdWarps * 32, RM == 1 ? 3 : 1) k_fwd(const Args a) {
  __shared__ Wts<HID> w;
  __shared__ FwdSm<HID, HP> sms[kFwdWarps];
  load_wts<T, HID>(w, a);
  __syncthreads();
  const int wid = (int)threadIdx.x >> 5, lane = (int)threadIdx.x & 31;
  const int64_t rk = (int64_t)blockIdx.x * kFwdWarps + wid;
  if (rk >= a.nq) return; // warp-uniform, after the block's only barrier
  const int64_t i = sched(a.ro, rk);
  FwdSm<HID, HP> &sm = sms[wid];
  for (int k = lane; k < HID; k += 32)
    sm.c[k] = w.b1[k] + (a.V ? ldf<T>(a.V, i * HID + k) : 0.f);
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
  const T *U = static_cast<const T *>(a.U);
  const int64_t b = a.rp[i], e = a.rp[i + 1];
  __syncwarp();
#pragma unroll 1
  for (int64_t e0 = b; e0 < e; e0 += 32) {
    const int nb = (int)(e - e0 < 32 ? e - e0 : 32);
    float s[HP];
    int32_t j = 0;
    if (lane < nb) {
      j = a.ci[e0 + lane];
      float dp[kMaxDim];
      edge_in<T>(a, e0 + lane, j, i, dp, sm.fe + lane);
      scores<T, HID, HP>(a, w, sm.c, U ? U + (int64_t)j * HID : nullptr, nullptr, dp, sm.fe + lane, s);
    } else {
#pragma unroll
      for (int h = 0; h < HP; ++h)
        s[h] = -INFINITY;
    }
    sm.j[lane] = j;
#pragma unroll
    for (int h = 0; h < HP; ++h) {
      const float mn = fmaxf(m[h], tgc_warp_max(s[h]));
      const float p = mn == -INFINITY ? 0.f : __expf(s[h] - mn);
      const float scale = mn == -INFINITY ? 1.f : __expf(m[h] - mn);
      l[h] = l[h] * scale + tgc_warp_sum(p);
      m[h] = mn;
      sm.pw[h][lane] = h < a.H && lane < nb ? p * a.drop.w(h, i, j) : 0.f;
      if (lane == 0) sm.sc[h] = scale;
    }
    __syncwarp();
#pragma unroll
    for (int r = 0; r < RM; ++r)
#pragma unroll
      for (int q = 0; q < V; ++q)
        acc[r][q] *= sm.sc[cl.template head<HP>(r, q)];
#pragma unroll 1
    for (int t0 = cl.grp; t0 < nb; t0 += UF * cl.NG) {
      float v[UF][RM][V];
#pragma unroll
      for (int u = 0; u < UF; ++u) {
        const int t = t0 + u * cl.NG;
        if (t < nb)
#pragma unroll
          for (int r = 0; r < RM; ++r)
            if (cl.has(a, r)) cl.load(a, a.vals, sm.j[t], r, v[u][r]);
      }
#pragma unroll
      for (int u = 0; u < UF; ++u) {
        const int t = t0 + u * cl.NG;
        if (t < nb)
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
}

struct Fwd {
  template <typename T, int HID, int HP, int RM> static tg_status run(cudaStream_t s, const Args &a) {
    const int64_t blocks = (a.nq + kFwdWarps - 1) / kFwdWarps;
    k_fwd<T, HID, HP, RM><<<(unsigned)blocks, kFwdWarps * 32, 0, s>>>(a);
    TGC_LAUNCHED("edge_attention_forward");
    return TG_OK;
  }
};

} // namespace tgea

using namespace tgea;

extern "C" const char *cuda_edge_attention_unsupported(const tgc_edge_attn *a) {
  if (!a) return "edge attention parameters are NULL";
  if (a->hid != 16 && a->hid != 32 && a->hid != 64 && a->hid != 128) return "hidden width must be 16, 32, 64 or 128";
  if (a->H < 1 || a->H > kMaxH) return "heads H must be in 1..8";
  if (a->F < 1 || a->F > 128) return "features per head F must be in 1..128";
  if (a->dim < 0 || a->dim > kMaxDim) return "geometry dim must be in 0..3";
  if (a->Fe < 0 || a->Fe > kMaxFe) return "edge features Fe must be in 0..16";
  if (a->dtype != TG_F32 && a->dtype != TG_BF16) return "storage dtype must be f32 or bf16";
  if (!(a->keep >= 0 && a->keep <= 1)) return "dropout keep must be in [0, 1]";
  return nullptr;
}

extern "C" size_t cuda_edge_attention_backward_workspace(const tgc_csr *g, const tgc_edge_attn *a) {
  if (!g || g->nq <= 0 || cuda_edge_attention_unsupported(a)) return 0;
  return (size_t)(ws_d_floats(g, a) + (int64_t)dst_blocks(g->nq) * partial_floats(a)) * sizeof(float);
}

extern "C" tg_status cuda_edge_attention_forward(tgc_stream s, const tgc_csr *g, const tgc_edge_attn *a,
                                                 const tgc_edge_inputs *in, void *out, float *lse) {
  const char *op = "cuda_edge_attention_forward";
  Args x{}; // value-initialised: a field a path does not set reads 0
  tg_status st = make_args(op, g, a, in, false, &x);
  if (st != TG_OK || g->nq == 0) return st;
  if (!out || !lse) {
    tgc_set_error("%s: out or lse is NULL", op);
    return TG_ERR_INVALID_ARGUMENT;
  }
  x.out = out;
  x.lse = lse;
  set_cols(&x, {in->values, out});
  x.rows = rows_for(g->nq);
  if (lanes_ok(a, x)) {
    x.lanes = lanes_ln(a, g->nq);
    x.big = ln_big_of(a, g->nq);
    return forward_lanes(s, x);
  }
  if (x.rmap) {
    tgc_set_error("%s: row_map (a renumbered graph) needs the lane kernels, which do not take this call", op);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if ((x.slice = slice_of(a, x)) != 0) {
    x.lanes = sl_groups(a, x.slice, g->nq);
    return forward_slices(s, x);
  }
  return packed_for(x.hid) ? forward_packed(s, x) : dispatch<Fwd>(s, x);
}
