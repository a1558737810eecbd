// CSR attention backward (cuda/attention_csr.h). Three passes, no float atomics:
//   prep: ld[b, i, h] = (lse_i * log2(e), Delta_i = <dout_i, out_i>)   (one LPH-lane group per row)
//   rows: dq_i += scale sum_j ds_ij k_j, walking row i of the CSR (as the forward)
//   keys: dk_j += scale sum_i ds_ij q_i, dv_j += sum_i p_ij w_ij dout_i, walking source j of the
//         transpose in t order, the query heads of kv head g's group inner.
// Long rows / sources are split (attention_csr.cuh); their partial sums are added in chunk order.
#include "attention_csr.cuh"

struct CaBwd {
  const void *q, *k, *v, *out, *dout;
  const float *lse;
  void *dq, *dk, *dv;
  const int64_t *row_ptr, *t_ptr;
  const int32_t *col, *t_row;
  const int32_t *rord, *sord; // row and source schedules (NULL: identity)
  int64_t B, Nq, Nk;
  int Hq, Hkv, D, Dv, group;
  float scale, sl2;
  bool vq, vv;
  CaDrop drop;
  CaGrid gq, gk;  // row pass over Hq heads, key pass over Hkv heads
  CaSched sq, sk; // row and source split schedules
  float2 *ld;     // [B, Nq, Hq]: (lse in base 2, +inf for an empty row; Delta)
  float *part_q;  // [imax_q, B, Hq, D]
  float *part_kv; // [imax_k, B, Hkv, D + Dv]
};

// Entries per slot in flight, and blocks per SM the kernels are compiled for: 4 loads of 16 bytes
// in flight per lane and pair of tensors; the rows pass fits 128 registers (16 warps per SM), the
// keys pass (k, v, dk, dv held per lane) 168 (12 warps per SM).
constexpr int CA_U = 4, CA_MINB_DQ = 4, CA_MINB_KV = 3;

// ------------------------------------------------------------------ prep
template <typename T, int LPH> __global__ void __launch_bounds__(256) ca_bwd_prep_kernel(const CaBwd p) {
  constexpr int V = ca_v<T>();
  const int64_t n = p.B * p.Nq * p.Hq, gt = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, u = gt / LPH;
  const int l = (int)(gt % LPH), d0 = l * V;
  const int64_t uu = u < n ? u : 0;
  float a[V], c[V];
  ca_load((const T *)p.out, uu * p.Dv + d0, p.Dv - d0, p.vv, a);
  ca_load((const T *)p.dout, uu * p.Dv + d0, p.Dv - d0, p.vv, c);
  float s = 0.f;
#pragma unroll
  for (int t = 0; t < V; ++t)
    s = fmaf(a[t], c[t], s);
  s = ca_gsum<LPH>(s);
  if (u < n && l == 0) {
    const int64_t h = u % p.Hq, bi = u / p.Hq, i = bi % p.Nq, b = bi / p.Nq;
    const float L = p.lse[(b * p.Hq + h) * p.Nq + i];
    p.ld[u] = make_float2(L == -INFINITY ? INFINITY : L * CA_LOG2E, s);
  }
}

// ------------------------------------------------------------------ rows: dq
template <typename T, int LPH, bool DROP>
__device__ __forceinline__ void ca_dq_unit(const CaBwd &p, int64_t b, int hb, int64_t i, int64_t e0, int64_t e1,
                                           int64_t item) {
  constexpr int V = ca_v<T>(), U = CA_U;
  const int lane = threadIdx.x & 31, hpw = p.gq.hpw, es = p.gq.es;
  const int l = lane % LPH, hw = (lane / LPH) % hpw, slot = lane / (LPH * hpw), d0 = l * V;
  const int hr = hb * hpw + hw, h = hr < p.Hq ? hr : p.Hq - 1, g = h / p.group;
  if (e0 == e1) return; // no edge: zero gradient, nothing written
  const int64_t qo = ((b * p.Nq + i) * p.Hq + h);
  const T *kb = (const T *)p.k + (b * p.Nk * p.Hkv + g) * p.D, *vb = (const T *)p.v + (b * p.Nk * p.Hkv + g) * p.Dv;
  const int64_t ks = (int64_t)p.Hkv * p.D, vs = (int64_t)p.Hkv * p.Dv;
  const uint64_t R = ((uint64_t)b * p.Hq + h) * p.Nq + i;
  float qx[V], ox[V], acc[V];
  ca_load((const T *)p.q, qo * p.D + d0, p.D - d0, p.vq, qx);
  ca_load((const T *)p.dout, qo * p.Dv + d0, p.Dv - d0, p.vv, ox);
  const float2 ld = p.ld[qo];
#pragma unroll
  for (int t = 0; t < V; ++t)
    acc[t] = 0.f;
#pragma unroll 1
  for (int64_t base = e0 + slot; base < e1 + slot; base += (int64_t)es * U) {
    int j[U];
    bool ok[U];
    uint4 kr[U], vr[U];
    float s[U], dp[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t e = base + (int64_t)u * es;
      ok[u] = e < e1;
      j[u] = ok[u] ? p.col[e] : 0;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      kr[u] = ca_fetch(kb + j[u] * ks, d0, p.D - d0, p.vq);
      vr[u] = ca_fetch(vb + j[u] * vs, d0, p.Dv - d0, p.vv);
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
      s[u] = ca_dot_raw<T>(qx, kr[u], 0.f), dp[u] = ca_dot_raw<T>(ox, vr[u], 0.f);
#pragma unroll
    for (int u = 0; u < U; ++u)
      s[u] = ca_gsum<LPH>(s[u]), dp[u] = ca_gsum<LPH>(dp[u]);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (!ok[u]) continue;
      const float pr = exp2f(s[u] * p.sl2 - ld.x);
      const float w = DROP ? ca_drop_w(p.drop, R, (uint64_t)j[u]) : 1.f;
      ca_axpy_raw<T>(pr * (w * dp[u] - ld.y), kr[u], acc);
    }
  }
  for (int o = LPH * hpw; o < 32; o <<= 1)
#pragma unroll
    for (int t = 0; t < V; ++t)
      acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], o);
  if (slot != 0 || hr >= p.Hq) return;
  if (item < 0) {
    ca_store<T, true>((T *)p.dq, qo * p.D + d0, p.D - d0, p.vq, acc, p.scale);
  } else {
    float *pp = p.part_q + ((item * p.B + b) * p.Hq + h) * (int64_t)p.D;
#pragma unroll
    for (int t = 0; t < V; ++t)
      if (d0 + t < p.D) pp[d0 + t] = acc[t];
  }
}

template <typename T, int LPH, bool DROP>
__global__ void __launch_bounds__(CA_WPB * 32, CA_MINB_DQ) ca_dq_kernel(const CaBwd p) {
  const int64_t per = p.B * p.gq.nhb;
  const int wib = threadIdx.x >> 5;
  if (blockIdx.x < p.gq.split_blocks) {
    const int64_t total = p.sq.count[1] * per, nw = (int64_t)p.gq.split_blocks * CA_WPB;
    for (int64_t w = (int64_t)blockIdx.x * CA_WPB + wib; w < total; w += nw) {
      const int64_t it = w / per, rem = w - it * per, b = rem / p.gq.nhb;
      const int hb = (int)(rem - b * p.gq.nhb);
      const int64_t r = ca_item_row(p.sq, it), i = p.sq.row[r], c = it - p.sq.start[r];
      const int64_t e0 = p.row_ptr[i] + c * p.sq.chunk, end = p.row_ptr[i + 1];
      ca_dq_unit<T, LPH, DROP>(p, b, hb, i, e0, e0 + p.sq.chunk < end ? e0 + p.sq.chunk : end, it);
    }
    return;
  }
  const int64_t w = (int64_t)(blockIdx.x - p.gq.split_blocks) * CA_WPB + wib;
  if (w >= p.Nq * per) return;
  const int64_t x = w / per, rem = w - x * per, b = rem / p.gq.nhb;
  const int hb = (int)(rem - b * p.gq.nhb);
  const int64_t i = p.rord ? (int64_t)p.rord[x] : x;
  if (i < 0 || i >= p.Nq) return; // not a schedule entry: skipped (attention_csr.h)
  const int64_t e0 = p.row_ptr[i], e1 = p.row_ptr[i + 1];
  if (e1 - e0 > p.sq.chunk) return;
  ca_dq_unit<T, LPH, DROP>(p, b, hb, i, e0, e1, -1);
}

// One warp per (split row, batch entry, head): dq += scale * (sum of the row's items in order).
template <typename T> __global__ void __launch_bounds__(CA_WPB * 32) ca_dq_merge_kernel(const CaBwd p) {
  const int lane = threadIdx.x & 31;
  const int64_t BH = p.B * p.Hq, total = p.sq.count[0] * BH, nw = (int64_t)gridDim.x * CA_WPB;
  for (int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < total; w += nw) {
    const int64_t r = w / BH, bh = w - r * BH, b = bh / p.Hq, h = bh - b * p.Hq;
    const int64_t i = p.sq.row[r], it0 = p.sq.start[r], it1 = p.sq.start[r + 1];
    const float *pp = p.part_q + (it0 * BH + bh) * p.D;
    T *dq = (T *)p.dq + ((b * p.Nq + i) * p.Hq + h) * p.D;
    for (int d = lane; d < p.D; d += 32) {
      float a = 0.f;
      for (int64_t it = 0; it < it1 - it0; ++it)
        a += pp[it * BH * p.D + d];
      dq[d] = tgc_from_f<T>(tgc_to_f(dq[d]) + p.scale * a);
    }
  }
}

// ------------------------------------------------------------------ keys: dk, dv
template <typename T, int LPH, bool DROP>
__device__ __forceinline__ void ca_dkv_unit(const CaBwd &p, int64_t b, int gb, int64_t j, int64_t t0, int64_t t1,
                                            int64_t item) {
  constexpr int V = ca_v<T>(), U = CA_U;
  const int lane = threadIdx.x & 31, hpw = p.gk.hpw, es = p.gk.es;
  const int l = lane % LPH, hw = (lane / LPH) % hpw, slot = lane / (LPH * hpw), d0 = l * V;
  const int gr = gb * hpw + hw, g = gr < p.Hkv ? gr : p.Hkv - 1;
  if (t0 == t1) return; // no entry: zero gradient, nothing written
  const int64_t ko = (b * p.Nk + j) * p.Hkv + g;
  const T *qb = (const T *)p.q + b * p.Nq * p.Hq * (int64_t)p.D,
          *ob = (const T *)p.dout + b * p.Nq * p.Hq * (int64_t)p.Dv;
  const float2 *lb = p.ld + b * p.Nq * p.Hq;
  float kx[V], vx[V], ak[V], av[V];
  ca_load((const T *)p.k, ko * p.D + d0, p.D - d0, p.vq, kx);
  ca_load((const T *)p.v, ko * p.Dv + d0, p.Dv - d0, p.vv, vx);
#pragma unroll
  for (int t = 0; t < V; ++t)
    ak[t] = 0.f, av[t] = 0.f;
#pragma unroll 1
  for (int64_t base = t0 + slot; base < t1 + slot; base += (int64_t)es * U) {
    int i[U];
    bool ok[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t t = base + (int64_t)u * es;
      ok[u] = t < t1;
      i[u] = ok[u] ? p.t_row[t] : 0; // a masked slot reads row 0 (exists: the source has an entry)
    }
#pragma unroll 1
    for (int hh = 0; hh < p.group; ++hh) {
      const int h = g * p.group + hh;
      uint4 qr[U], orw[U];
      float s[U], dp[U];
      float2 ld[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t r = (int64_t)i[u] * p.Hq + h;
        qr[u] = ca_fetch(qb, r * p.D + d0, p.D - d0, p.vq);
        orw[u] = ca_fetch(ob, r * p.Dv + d0, p.Dv - d0, p.vv);
        ld[u] = lb[r];
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
        s[u] = ca_dot_raw<T>(kx, qr[u], 0.f), dp[u] = ca_dot_raw<T>(vx, orw[u], 0.f);
#pragma unroll
      for (int u = 0; u < U; ++u)
        s[u] = ca_gsum<LPH>(s[u]), dp[u] = ca_gsum<LPH>(dp[u]);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (!ok[u]) continue;
        const float pr = exp2f(s[u] * p.sl2 - ld[u].x);
        const float w = DROP ? ca_drop_w(p.drop, ((uint64_t)b * p.Hq + h) * p.Nq + (uint64_t)i[u], (uint64_t)j) : 1.f;
        ca_axpy_raw<T>(pr * (w * dp[u] - ld[u].y), qr[u], ak);
        ca_axpy_raw<T>(pr * w, orw[u], av);
      }
    }
  }
  for (int o = LPH * hpw; o < 32; o <<= 1)
#pragma unroll
    for (int t = 0; t < V; ++t) {
      ak[t] += __shfl_xor_sync(0xffffffffu, ak[t], o);
      av[t] += __shfl_xor_sync(0xffffffffu, av[t], o);
    }
  if (slot != 0 || gr >= p.Hkv) return;
  if (item < 0) {
    ca_store<T, true>((T *)p.dk, ko * p.D + d0, p.D - d0, p.vq, ak, p.scale);
    ca_store<T, true>((T *)p.dv, ko * p.Dv + d0, p.Dv - d0, p.vv, av, 1.f);
  } else {
    float *pp = p.part_kv + ((item * p.B + b) * p.Hkv + g) * (int64_t)(p.D + p.Dv);
#pragma unroll
    for (int t = 0; t < V; ++t) {
      if (d0 + t < p.D) pp[d0 + t] = ak[t];
      if (d0 + t < p.Dv) pp[p.D + d0 + t] = av[t];
    }
  }
}

template <typename T, int LPH, bool DROP>
__global__ void __launch_bounds__(CA_WPB * 32, CA_MINB_KV) ca_dkv_kernel(const CaBwd p) {
  const int64_t per = p.B * p.gk.nhb;
  const int wib = threadIdx.x >> 5;
  if (blockIdx.x < p.gk.split_blocks) {
    const int64_t total = p.sk.count[1] * per, nw = (int64_t)p.gk.split_blocks * CA_WPB;
    for (int64_t w = (int64_t)blockIdx.x * CA_WPB + wib; w < total; w += nw) {
      const int64_t it = w / per, rem = w - it * per, b = rem / p.gk.nhb;
      const int gb = (int)(rem - b * p.gk.nhb);
      const int64_t r = ca_item_row(p.sk, it), j = p.sk.row[r], c = it - p.sk.start[r];
      const int64_t t0 = p.t_ptr[j] + c * p.sk.chunk, end = p.t_ptr[j + 1];
      ca_dkv_unit<T, LPH, DROP>(p, b, gb, j, t0, t0 + p.sk.chunk < end ? t0 + p.sk.chunk : end, it);
    }
    return;
  }
  const int64_t w = (int64_t)(blockIdx.x - p.gk.split_blocks) * CA_WPB + wib;
  if (w >= p.Nk * per) return;
  const int64_t x = w / per, rem = w - x * per, b = rem / p.gk.nhb;
  const int gb = (int)(rem - b * p.gk.nhb);
  const int64_t j = p.sord ? (int64_t)p.sord[x] : x;
  if (j < 0 || j >= p.Nk) return; // not a schedule entry: skipped (attention_csr.h)
  const int64_t t0 = p.t_ptr[j], t1 = p.t_ptr[j + 1];
  if (t1 - t0 > p.sk.chunk) return;
  ca_dkv_unit<T, LPH, DROP>(p, b, gb, j, t0, t1, -1);
}

// One warp per (split source, batch entry, kv head): dk += scale * sum, dv += sum (items in order).
template <typename T> __global__ void __launch_bounds__(CA_WPB * 32) ca_dkv_merge_kernel(const CaBwd p) {
  const int lane = threadIdx.x & 31, W = p.D + p.Dv;
  const int64_t BH = p.B * p.Hkv, total = p.sk.count[0] * BH, nw = (int64_t)gridDim.x * CA_WPB;
  for (int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < total; w += nw) {
    const int64_t r = w / BH, bg = w - r * BH, b = bg / p.Hkv, g = bg - b * p.Hkv;
    const int64_t j = p.sk.row[r], it0 = p.sk.start[r], it1 = p.sk.start[r + 1];
    const float *pp = p.part_kv + (it0 * BH + bg) * W;
    const int64_t ko = (b * p.Nk + j) * p.Hkv + g;
    for (int d = lane; d < W; d += 32) {
      float a = 0.f;
      for (int64_t it = 0; it < it1 - it0; ++it)
        a += pp[it * BH * W + d];
      if (d < p.D) {
        T *x = (T *)p.dk + ko * p.D + d;
        *x = tgc_from_f<T>(tgc_to_f(*x) + p.scale * a);
      } else {
        T *x = (T *)p.dv + ko * p.Dv + (d - p.D);
        *x = tgc_from_f<T>(tgc_to_f(*x) + a);
      }
    }
  }
}

// ------------------------------------------------------------------ launcher
struct CaBwdLayout {
  CaPlan pq, pk;
  CaSchedMem sq, sk;
  float2 *ld;
  float *part_q, *part_kv;
  size_t bytes;
};

static void ca_bwd_layout(const tgc_csr_attn_shape *sh, const tgc_csr *csr, char *base, CaBwdLayout &L) {
  CaBump m{base, 0};
  L.ld = (float2 *)m.take((size_t)sh->B * sh->Nq * sh->Hq * sizeof(float2));
  L.pq = ca_plan(sh->Nq, csr->nnz, sh->B * sh->Hq);
  L.sq = ca_sched_take(m, L.pq);
  L.part_q = (float *)m.take((size_t)L.pq.imax * sh->B * sh->Hq * sh->D * sizeof(float));
  L.pk = ca_plan(sh->Nk, csr->nnz, sh->B * sh->Hkv);
  L.sk = ca_sched_take(m, L.pk);
  L.part_kv = (float *)m.take((size_t)L.pk.imax * sh->B * sh->Hkv * (sh->D + sh->Dv) * sizeof(float));
  L.bytes = m.off;
}

extern "C" size_t cuda_attention_csr_backward_workspace(const tgc_csr_attn_shape *sh, const tgc_csr *csr) {
  if (ca_check(sh, true) != TG_OK || !csr || csr->nnz < 0) return 0;
  CaBwdLayout L;
  ca_bwd_layout(sh, csr, nullptr, L);
  return L.bytes;
}

// prep, then the row pass (schedule, kernel, merge), then the key pass.
template <typename T, int LPH>
static tg_status ca_bwd_run(const CaBwd &p, const CaBwdLayout &L, unsigned prep_blocks, cudaStream_t st) {
  ca_bwd_prep_kernel<T, LPH><<<prep_blocks, 256, 0, st>>>(p);
  TGC_LAUNCHED("ca_bwd_prep_kernel");
  tg_status s;
  if ((s = ca_sched_build(st, L.pq, p.row_ptr, L.sq)) != TG_OK) return s;
  if (p.drop.on)
    ca_dq_kernel<T, LPH, true><<<p.gq.blocks, CA_WPB * 32, 0, st>>>(p);
  else
    ca_dq_kernel<T, LPH, false><<<p.gq.blocks, CA_WPB * 32, 0, st>>>(p);
  TGC_LAUNCHED("ca_dq_kernel");
  if (const unsigned mb = ca_merge_blocks(L.pq, p.B, p.Hq)) {
    ca_dq_merge_kernel<T><<<mb, CA_WPB * 32, 0, st>>>(p);
    TGC_LAUNCHED("ca_dq_merge_kernel");
  }
  if ((s = ca_sched_build(st, L.pk, p.t_ptr, L.sk)) != TG_OK) return s;
  if (p.drop.on)
    ca_dkv_kernel<T, LPH, true><<<p.gk.blocks, CA_WPB * 32, 0, st>>>(p);
  else
    ca_dkv_kernel<T, LPH, false><<<p.gk.blocks, CA_WPB * 32, 0, st>>>(p);
  TGC_LAUNCHED("ca_dkv_kernel");
  if (const unsigned mb = ca_merge_blocks(L.pk, p.B, p.Hkv)) {
    ca_dkv_merge_kernel<T><<<mb, CA_WPB * 32, 0, st>>>(p);
    TGC_LAUNCHED("ca_dkv_merge_kernel");
  }
  return TG_OK;
}

template <typename T>
static tg_status ca_bwd_dispatch(const CaBwd &p, const CaBwdLayout &L, int lph, unsigned pb, cudaStream_t st) {
  switch (lph) {
  case 2: return ca_bwd_run<T, 2>(p, L, pb, st);
  case 4: return ca_bwd_run<T, 4>(p, L, pb, st);
  case 8: return ca_bwd_run<T, 8>(p, L, pb, st);
  case 16: return ca_bwd_run<T, 16>(p, L, pb, st);
  case 32: return ca_bwd_run<T, 32>(p, L, pb, st);
  }
  tgc_set_error("csr attention backward: no kernel for %d lanes per head", lph);
  return TG_ERR_UNSUPPORTED;
}

extern "C" tg_status cuda_attention_csr_backward(tgc_stream s, const tgc_csr_attn_shape *sh, const tgc_csr *csr,
                                                 const int32_t *row_order, const int32_t *src_order, const void *q,
                                                 const void *k, const void *v, const void *out, const void *dout,
                                                 const float *lse, void *dq, void *dk, void *dv, void *ws,
                                                 size_t ws_bytes) {
  tg_status stt = ca_check(sh, true);
  if (stt == TG_OK) stt = ca_check_csr(sh, csr, true);
  if (stt != TG_OK) return stt;
  if (sh->B == 0 || sh->Nq == 0 || csr->nnz == 0) return TG_OK; // no edge: every gradient is 0
  if (!q || !k || !v || !out || !dout || !lse || !dq || !dk || !dv) {
    tgc_set_error("csr attention backward: q, k, v, out, dout, lse, dq, dk and dv must be device pointers");
    return TG_ERR_INVALID_ARGUMENT;
  }
  CaBwdLayout L;
  ca_bwd_layout(sh, csr, (char *)ws, L);
  if (L.bytes > 0 && (!ws || ws_bytes < L.bytes)) {
    tgc_set_error("csr attention backward: workspace of %zu bytes given, %zu needed", ws_bytes, L.bytes);
    return TG_ERR_INVALID_ARGUMENT;
  }
  const int V = sh->dtype == TG_F32 ? 4 : 8, lph = ca_lph(sh->D > sh->Dv ? sh->D : sh->Dv, V);
  CaBwd p{};
  p.q = q, p.k = k, p.v = v, p.out = out, p.dout = dout, p.lse = lse, p.dq = dq, p.dk = dk, p.dv = dv;
  p.row_ptr = csr->row_ptr, p.col = csr->col_idx, p.t_ptr = csr->t_ptr, p.t_row = csr->t_row;
  p.rord = row_order, p.sord = src_order;
  p.B = sh->B, p.Nq = sh->Nq, p.Nk = sh->Nk;
  p.Hq = sh->Hq, p.Hkv = sh->Hkv, p.D = sh->D, p.Dv = sh->Dv, p.group = sh->Hq / sh->Hkv;
  p.scale = sh->scale;
  p.sl2 = sh->scale * CA_LOG2E;
  p.vq = sh->D % V == 0 && ca_al16({q, k, dq, dk});
  p.vv = sh->Dv % V == 0 && ca_al16({v, out, dout, dv});
  p.drop = ca_drop_of(sh);
  p.sq = ca_sched_view(L.pq, L.sq);
  p.sk = ca_sched_view(L.pk, L.sk);
  p.ld = L.ld, p.part_q = L.part_q, p.part_kv = L.part_kv;
  if ((stt = ca_grid(sh->Nq, sh->B, sh->Hq, lph, L.pq, p.gq)) != TG_OK) return stt;
  if ((stt = ca_grid(sh->Nk, sh->B, sh->Hkv, lph, L.pk, p.gk)) != TG_OK) return stt;
  const int64_t pb = (sh->B * sh->Nq * sh->Hq * lph + 255) / 256;
  if (pb > INT32_MAX) {
    tgc_set_error("csr attention backward: %lld rows are too many", (long long)(sh->B * sh->Nq * sh->Hq));
    return TG_ERR_UNSUPPORTED;
  }
  cudaStream_t st = (cudaStream_t)s;
  switch (sh->dtype) {
  case TG_F32: return ca_bwd_dispatch<float>(p, L, lph, (unsigned)pb, st);
  case TG_F16: return ca_bwd_dispatch<__half>(p, L, lph, (unsigned)pb, st);
  default: return ca_bwd_dispatch<__nv_bfloat16>(p, L, lph, (unsigned)pb, st);
  }
}
