// Fused attention backward (FlashAttention-2): one CTA per key block and key/value head; it walks
// every query head of its GQA group and every query block that can see the keys, recomputes
// P = exp(s - lse) and accumulates, with delta_i = rowsum(dO_i * O_i):
//   dV += P^T dO,  dP = dO V^T,  dS = P * (dP - delta),  dK += scale dS^T Q,  dQ += scale dS K.
// dK and dV stay in registers (one CTA owns them: no races); dQ goes by f32 atomics into the
// workspace and is scaled and added into dq by a later kernel.
#include <cfloat>

#include "attention_fused.cuh"

// ------------------------------------------------------------------ tensor-core kernel
// BN = NW * 16 keys (warp w owns keys [16w, 16w + 16) as the M side of S^T = K Q^T), BM = 64
// queries per step, double-buffered Q / dO / lse / delta. dS^T goes through shared memory as T
// for dQ = dS K, where the 4 m16 query tiles are split over the warps along D.
template <int D, int NW, int BM_> struct BwdCfg {
  static constexpr int BN = NW * 16, BM = BM_, LDS = D + 8, LDSS = BM + 8, THREADS = NW * 32;
  static constexpr size_t SMEM = (size_t)(2 * BN * LDS + 4 * BM * LDS + BN * LDSS) * 2 + 4 * BM * sizeof(float);
};

// acc[n][.] = A B^T for a warp's 16 rows of A (shared, row stride LDS) and the 8*NQT rows of B
// (shared, row stride LDS), contracting over D: S^T = K Q^T and dP^T = V dO^T.
template <typename T, int D, int LDS, int NQT>
__device__ __forceinline__ void fa_bwd_gemm_t(float (&acc)[NQT][4], const T *a_s, const T *b_s, int lane) {
#pragma unroll
  for (int nt = 0; nt < NQT; ++nt)
    acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t a[4];
    fa_ldm_x4(a, a_s + (lane & 15) * LDS + kk * 16 + (lane >> 4) * 8);
#pragma unroll
    for (int np = 0; np < NQT / 2; ++np) {
      uint32_t b[4];
      fa_ldm_x4(b, b_s + (np * 16 + (lane & 7) + (lane >> 4) * 8) * LDS + kk * 16 + ((lane >> 3) & 1) * 8);
      fa_mma<T>(acc[2 * np], a, b[0], b[1]);
      fa_mma<T>(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// c[D/8][.] += A B with A the warp's packed 16 x 64 fragments (k = queries) and B the 64 x D
// shared tile (rows = queries): dV += P^T dO and dK += dS^T Q.
template <typename T, int D, int LDS, int KT>
__device__ __forceinline__ void fa_bwd_gemm_acc(float (&c)[D / 8][4], const uint32_t (&a)[KT][4], const T *b_s,
                                                int lane) {
#pragma unroll
  for (int kk = 0; kk < KT; ++kk)
#pragma unroll
    for (int dq2 = 0; dq2 < D / 16; ++dq2) {
      uint32_t b[4];
      fa_ldm_x4_t(b, b_s + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + dq2 * 16 + (lane >> 4) * 8);
      fa_mma<T>(c[2 * dq2], a[kk], b[0], b[1]);
      fa_mma<T>(c[2 * dq2 + 1], a[kk], b[2], b[3]);
    }
}

// DROP: attention dropout (FaDrop): dV += (P W)^T dO, dS = P (dP W - delta), W regenerated.
template <typename T, int D, int NW, int BM_, bool DROP>
__device__ __forceinline__ void fa_bwd_tc_body(const FaParams &p, const FaDrop &dr) {
  using C = BwdCfg<D, NW, BM_>;
  constexpr int BN = C::BN, BM = C::BM, LDS = C::LDS, LDSS = C::LDSS, THREADS = C::THREADS;
  constexpr int DT = D / 8, NQT = BM / 8, MQT = BM / 16, WPM = NW / MQT, DQC = D / WPM, DQT = DQC / 8;
  static_assert(NW % MQT == 0 && DQT % 2 == 0 && 2 * BM <= THREADS, "dQ split");
  extern __shared__ __align__(16) unsigned char fa_smem_raw[];
  T *sK = reinterpret_cast<T *>(fa_smem_raw), *sV = sK + BN * LDS, *sQ = sV + BN * LDS, *sdO = sQ + 2 * BM * LDS;
  T *sdS = sdO + 2 * BM * LDS;
  float *slse = reinterpret_cast<float *>(sdS + BN * LDSS), *sdel = slse + 2 * BM;
  const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;

  FaSeq s;
  if (!fa_seq(p, blockIdx.z, s)) return;
  const int nkb = (s.Lk + BN - 1) / BN;
  if ((int)blockIdx.x >= nkb) return;
  const int n0 = blockIdx.x * BN, hk = blockIdx.y;
  const int qs = p.causal ? max(0, n0 - s.off) / BM : 0, nqb = (s.Lq + BM - 1) / BM;
  const int64_t qstr = (int64_t)p.Hq * D, kstr = (int64_t)p.Hkv * D;
  const float sl2 = p.scale_log2;

  // Work items: (query head gi of the group, query block qb), qb fastest; empty tiles skipped.
  auto next_item = [&](int &gi, int &qb, int &cls) {
    for (; gi < p.group; ++gi, qb = qs)
      for (; qb < nqb; ++qb)
        if ((cls = fa_tile_class(p, s, qb * BM, BM, n0, BN)) != FA_EMPTY) return;
  };
  auto issue_q = [&](int gi, int qb, int b) {
    const int h = hk * p.group + gi, i0 = qb * BM;
    const int64_t off = (s.qoff + i0) * qstr + (int64_t)h * D;
    fa_load_tile<D, LDS, BM, THREADS, T, (D <= 64)>(sQ + b * BM * LDS, (const T *)p.q + off, qstr, s.Lq - i0);
    fa_load_tile<D, LDS, BM, THREADS, T, (D <= 64)>(sdO + b * BM * LDS, (const T *)p.dout + off, qstr, s.Lq - i0);
    if (tid < 2 * BM) { // lse and delta rows, async too (a plain load here would stall its warp)
      const int r = tid & (BM - 1), i = i0 + r;
      const bool ok = i < s.Lq;
      const float *src = tid < BM ? p.lse : p.delta;
      fa_cp4((tid < BM ? slse : sdel) + b * BM + r, ok ? src + fa_lse_index(p, s, h, i) : src, ok);
    }
  };

  int gi = 0, qb = qs, cls = FA_EMPTY;
  next_item(gi, qb, cls);
  if (gi >= p.group) return; // dk, dv += 0

  fa_load_tile<D, LDS, BN, THREADS>(sK, (const T *)p.k + (s.koff + n0) * kstr + (int64_t)hk * D, kstr, s.Lk - n0);
  fa_load_tile<D, LDS, BN, THREADS>(sV, (const T *)p.v + (s.koff + n0) * kstr + (int64_t)hk * D, kstr, s.Lk - n0);
  issue_q(gi, qb, 0);
  fa_cp_commit();

  float dk[DT][4], dv[DT][4];
#pragma unroll
  for (int dt = 0; dt < DT; ++dt)
#pragma unroll
    for (int x = 0; x < 4; ++x)
      dk[dt][x] = dv[dt][x] = 0.f;
  int buf = 0;
  while (gi < p.group) {
    fa_cp_wait<0>();
    __syncthreads(); // this step's tiles landed; the previous step's readers are done
    int gin = gi, qbn = qb + 1, cn = FA_EMPTY;
    next_item(gin, qbn, cn);
    if (gin < p.group) issue_q(gin, qbn, buf ^ 1);
    fa_cp_commit();
    const int h = hk * p.group + gi, i0 = qb * BM;
    const T *qsm = sQ + buf * BM * LDS, *dos = sdO + buf * BM * LDS;
    const float *ls = slse + buf * BM, *dls = sdel + buf * BM;

    // S^T = K Q^T for the warp's 16 keys x 64 queries
    float acc[NQT][4];
    fa_bwd_gemm_t<T, D, LDS, NQT>(acc, sK + w * 16 * LDS, qsm, lane);
    // P^T = 2^(s scale log2e - lse log2e), packed at once into the A fragments of dV += P^T dO.
    // Rows past Lq were zero-filled (lse 0); their Q and dO rows are 0 too, so they add 0.
    uint32_t pf[NQT / 2][4];
    if (cls == FA_PARTIAL)
      fa_bwd_probs<true>(acc, ls, p, s, i0, n0 + w * 16 + g, t, sl2);
    else
      fa_bwd_probs<false>(acc, ls, p, s, i0, n0 + w * 16 + g, t, sl2);
#pragma unroll
    for (int kk = 0; kk < NQT / 2; ++kk)
#pragma unroll
      for (int x = 0; x < 4; ++x)
        pf[kk][x] = fa_pack<T>(acc[2 * kk + (x >> 1)][2 * (x & 1)], acc[2 * kk + (x >> 1)][2 * (x & 1) + 1]);
    // Dropout: acc[nt][2 hh + e] is (key n0 + 16w + g + 8hh, query i0 + 8nt + 2t + e); its keep
    // bit goes to bit 4 nt + 2 hh + e of kb, and dV takes (P W)^T.
    uint32_t kb = 0;
    if constexpr (DROP) {
      static_assert(NQT * 4 <= 32, "keep bits");
      uint32_t pd[NQT / 2][4];
#pragma unroll
      for (int nt = 0; nt < NQT; ++nt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          // queries (i, i + 1) of one key: one Philox block for both
          const float2 dw = fa_drop_w2(dr, p, s, h, i0 + nt * 8 + 2 * t, n0 + w * 16 + g + 8 * hh, 1, 0);
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float wv = e ? dw.y : dw.x;
            kb |= (wv != 0.f ? 1u : 0u) << (4 * nt + 2 * hh + e);
            acc[nt][2 * hh + e] *= wv;
          }
        }
#pragma unroll
      for (int kk = 0; kk < NQT / 2; ++kk)
#pragma unroll
        for (int x = 0; x < 4; ++x)
          pd[kk][x] = fa_pack<T>(acc[2 * kk + (x >> 1)][2 * (x & 1)], acc[2 * kk + (x >> 1)][2 * (x & 1) + 1]);
      fa_bwd_gemm_acc<T, D, LDS>(dv, pd, dos, lane); // dV += (P W)^T dO
    } else {
      // dV += P^T dO (k = queries)
      fa_bwd_gemm_acc<T, D, LDS>(dv, pf, dos, lane);
    }
    // dP^T = V dO^T; dS^T = P^T (dP^T - delta), packed likewise and stored for dQ
    fa_bwd_gemm_t<T, D, LDS, NQT>(acc, sV + w * 16 * LDS, dos, lane);
#pragma unroll
    for (int kk = 0; kk < NQT / 2; ++kk)
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        const int nt = 2 * kk + (x >> 1), hh = x & 1;
        const float2 pv = fa_unpack<T>(pf[kk][x]);
        const float d0 = dls[nt * 8 + 2 * t], d1 = dls[nt * 8 + 2 * t + 1];
        if constexpr (DROP) { // dP = (V dO^T)^T W
          acc[nt][2 * hh] *= (kb >> (4 * nt + 2 * hh)) & 1u ? dr.inv_keep : 0.f;
          acc[nt][2 * hh + 1] *= (kb >> (4 * nt + 2 * hh + 1)) & 1u ? dr.inv_keep : 0.f;
        }
        pf[kk][x] = fa_pack<T>(pv.x * (acc[nt][2 * hh] - d0), pv.y * (acc[nt][2 * hh + 1] - d1));
        *reinterpret_cast<uint32_t *>(sdS + (w * 16 + g + 8 * hh) * LDSS + nt * 8 + 2 * t) = pf[kk][x];
      }
    // dK += dS^T Q
    fa_bwd_gemm_acc<T, D, LDS>(dk, pf, qsm, lane);
    __syncthreads(); // dS^T complete

    // dQ (unscaled) += dS K for query tile mq, columns [dc0, dc0 + DQC)
    {
      const int mq = w % MQT, dc0 = (w / MQT) * DQC;
      float dqa[DQT][4];
#pragma unroll
      for (int dt = 0; dt < DQT; ++dt)
        dqa[dt][0] = dqa[dt][1] = dqa[dt][2] = dqa[dt][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        uint32_t a[4];
        fa_ldm_x4_t(a, sdS + (kk * 16 + (lane & 7) + (lane >> 4) * 8) * LDSS + mq * 16 + ((lane >> 3) & 1) * 8);
#pragma unroll
        for (int dq2 = 0; dq2 < DQT / 2; ++dq2) {
          uint32_t b[4];
          fa_ldm_x4_t(b, sK + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + dc0 + dq2 * 16 + (lane >> 4) * 8);
          fa_mma<T>(dqa[2 * dq2], a, b[0], b[1]);
          fa_mma<T>(dqa[2 * dq2 + 1], a, b[2], b[3]);
        }
      }
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int i = i0 + mq * 16 + g + 8 * hh;
        if (i < s.Lq) {
          float *row = p.dq_acc + ((s.qoff + i) * p.Hq + h) * (int64_t)D + dc0 + 2 * t;
#pragma unroll
          for (int dt = 0; dt < DQT; ++dt)
            atomicAdd(reinterpret_cast<float2 *>(row + dt * 8), make_float2(dqa[dt][2 * hh], dqa[dt][2 * hh + 1]));
        }
      }
    }
    gi = gin;
    qb = qbn;
    cls = cn;
    buf ^= 1;
  }
  fa_cp_wait<0>();

  // dk += scale * dK, dv += dV
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int jg = n0 + w * 16 + g + 8 * hh;
    if (jg < s.Lk) {
      const int64_t off = (s.koff + jg) * kstr + (int64_t)hk * D + 2 * t;
      uint32_t *dkr = reinterpret_cast<uint32_t *>((T *)p.dk + off),
               *dvr = reinterpret_cast<uint32_t *>((T *)p.dv + off);
#pragma unroll
      for (int dt = 0; dt < DT; ++dt) {
        float2 a = fa_unpack<T>(dkr[dt * 4]), b = fa_unpack<T>(dvr[dt * 4]);
        dkr[dt * 4] = fa_pack<T>(a.x + p.scale * dk[dt][2 * hh], a.y + p.scale * dk[dt][2 * hh + 1]);
        dvr[dt * 4] = fa_pack<T>(b.x + dv[dt][2 * hh], b.y + dv[dt][2 * hh + 1]);
      }
    }
  }
}

template <typename T, int D, int NW, int BM_>
__global__ void __launch_bounds__(NW * 32) fa_bwd_tc_kernel(const FaParams p) {
  fa_bwd_tc_body<T, D, NW, BM_, false>(p, FaDrop{});
}
template <typename T, int D, int NW, int BM_>
__global__ void __launch_bounds__(NW * 32) fa_bwd_tc_drop_kernel(const FaParams p, const FaDrop dr) {
  fa_bwd_tc_body<T, D, NW, BM_, true>(p, dr);
}

template <typename T, int D, int NW, int BM>
static tg_status fa_launch_bwd_tc(const FaParams &p, const FaDrop *dr, cudaStream_t st) {
  using C = BwdCfg<D, NW, BM>;
  dim3 grid((unsigned)((p.max_k + C::BN - 1) / C::BN), (unsigned)p.Hkv, (unsigned)p.nz);
  if (dr) {
    auto kern = fa_bwd_tc_drop_kernel<T, D, NW, BM>;
    if (C::SMEM > 48 * 1024)
      TGC_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM));
    kern<<<grid, C::THREADS, C::SMEM, st>>>(p, *dr);
  } else {
    auto kern = fa_bwd_tc_kernel<T, D, NW, BM>;
    if (C::SMEM > 48 * 1024)
      TGC_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM));
    kern<<<grid, C::THREADS, C::SMEM, st>>>(p);
  }
  TGC_LAUNCHED("fa_bwd_tc_kernel");
  return TG_OK;
}

template <typename T> static tg_status fa_bwd_tc_dim(const FaParams &p, const FaDrop *dr, cudaStream_t st) {
  switch (p.D) {
  case 32: return fa_launch_bwd_tc<T, 32, 8, 64>(p, dr, st);
  case 64: return fa_launch_bwd_tc<T, 64, 8, 64>(p, dr, st);
  case 96: return fa_launch_bwd_tc<T, 96, 8, 64>(p, dr, st);
  case 128: return fa_launch_bwd_tc<T, 128, 8, 64>(p, dr, st);
  }
  tgc_set_error("fused attention backward: no tensor-core kernel for D=%d", p.D);
  return TG_ERR_UNSUPPORTED;
}

bool fa_backward_tc_has(int D, int Dv) { return D == Dv && (D == 32 || D == 64 || D == 96 || D == 128); }

tg_status fa_backward_tc(const FaParams &p, const FaDrop *dr, cudaStream_t st) {
  if (p.dtype == TG_F16) return fa_bwd_tc_dim<__half>(p, dr, st);
  if (p.dtype == TG_BF16) return fa_bwd_tc_dim<__nv_bfloat16>(p, dr, st);
  tgc_set_error("fused attention backward: tensor-core kernels take f16 or bf16");
  return TG_ERR_UNSUPPORTED;
}

// ------------------------------------------------------------------ CUDA-core kernel
// Any D, Dv <= 256, f32 math. A CTA of 128 threads owns 16 keys; thread (j, g) = (tid / 8,
// tid % 8) holds dims g + 8c of key j (k, v, dK, dV in registers). Query rows come 16 at a time
// through shared f32; dS goes through shared memory for dQ = dS K.
template <typename T, int NC, bool DROP>
__device__ __forceinline__ void fa_bwd_generic_body(const FaParams p, const FaDrop dr) {
  constexpr int BN = 16, QC = 16;
  extern __shared__ float fa_gsm[];
  const int D = p.D, Dv = p.Dv;
  float *sQ = fa_gsm, *sdO = sQ + QC * D, *sKf = sdO + QC * Dv, *sds = sKf + BN * D, *slse = sds + QC * (BN + 1),
        *sdel = slse + QC;
  const int tid = threadIdx.x, jl = tid >> 3, g = tid & 7;
  FaSeq s;
  if (!fa_seq(p, blockIdx.z, s)) return;
  const int nkb = (s.Lk + BN - 1) / BN;
  if ((int)blockIdx.x >= nkb) return;
  const int n0 = blockIdx.x * BN, jg = n0 + jl, hk = blockIdx.y;
  const bool keyok = jg < s.Lk;
  const float sl2 = p.scale_log2;
  const T *kg = (const T *)p.k + s.koff * p.Hkv * (int64_t)D + (int64_t)hk * D;
  const T *vg = (const T *)p.v + s.koff * p.Hkv * (int64_t)Dv + (int64_t)hk * Dv;
  float kv[NC], vv[NC], dk[NC], dv[NC];
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    const int d = g + 8 * c;
    kv[c] = keyok && d < D ? tgc_to_f(kg[(int64_t)jg * p.Hkv * D + d]) : 0.f;
    vv[c] = keyok && d < Dv ? tgc_to_f(vg[(int64_t)jg * p.Hkv * Dv + d]) : 0.f;
    dk[c] = dv[c] = 0.f;
  }
  for (int x = tid; x < BN * D; x += 128) {
    const int jj = x / D, d = x - jj * D;
    sKf[x] = n0 + jj < s.Lk ? tgc_to_f(kg[(int64_t)(n0 + jj) * p.Hkv * D + d]) : 0.f;
  }
  const int qs = p.causal ? max(0, n0 - s.off) / QC : 0, nqc = (s.Lq + QC - 1) / QC;
  bool any = false;
  for (int gi = 0; gi < p.group; ++gi) {
    const int h = hk * p.group + gi;
    const T *qg = (const T *)p.q + (s.qoff * p.Hq + h) * (int64_t)D;
    const T *dog = (const T *)p.dout + (s.qoff * p.Hq + h) * (int64_t)Dv;
    for (int qc = qs; qc < nqc; ++qc) {
      const int i0 = qc * QC;
      const int cls = fa_tile_class(p, s, i0, QC, n0, BN);
      if (cls == FA_EMPTY) continue;
      any = true;
      __syncthreads(); // previous chunk's readers are done
      for (int x = tid; x < QC * D; x += 128) {
        const int r = x / D, d = x - r * D;
        sQ[x] = i0 + r < s.Lq ? tgc_to_f(qg[(int64_t)(i0 + r) * p.Hq * D + d]) : 0.f;
      }
      for (int x = tid; x < QC * Dv; x += 128) {
        const int r = x / Dv, d = x - r * Dv;
        sdO[x] = i0 + r < s.Lq ? tgc_to_f(dog[(int64_t)(i0 + r) * p.Hq * Dv + d]) : 0.f;
      }
      if (tid < QC) {
        const int i = i0 + tid;
        float L = INFINITY, dl = 0.f;
        if (i < s.Lq) {
          const int64_t x = fa_lse_index(p, s, h, i);
          L = p.lse[x];
          L = L == -INFINITY ? INFINITY : L * FA_LOG2E;
          dl = p.delta[x];
        }
        slse[tid] = L;
        sdel[tid] = dl;
      }
      __syncthreads();
      for (int r = 0; r < QC; ++r) {
        const int i = i0 + r;
        float sp = 0.f, dpv = 0.f;
#pragma unroll
        for (int c = 0; c < NC; ++c) {
          if (g + 8 * c < D) sp = fmaf(kv[c], sQ[r * D + g + 8 * c], sp);
          if (g + 8 * c < Dv) dpv = fmaf(vv[c], sdO[r * Dv + g + 8 * c], dpv);
        }
#pragma unroll
        for (int x = 1; x < 8; x <<= 1) {
          sp += __shfl_xor_sync(0xffffffffu, sp, x);
          dpv += __shfl_xor_sync(0xffffffffu, dpv, x);
        }
        float pv = exp2f(fmaf(sp, sl2, -slse[r]));
        if (cls == FA_PARTIAL) {
          bool ok = keyok && i < s.Lq && (!p.causal || jg <= i + s.off);
          if (ok && p.mbits) ok = (fa_mask_row(p, s, i)[jg >> 6] >> (jg & 63)) & 1ull;
          if (!ok) pv = 0.f;
        }
        if constexpr (DROP) { // dV += (P W)^T dO, dP = (dO V^T) W; pv becomes P W once ds is formed
          const float wv = fa_drop_w(dr, p, s, h, i, jg);
          dpv *= wv;
        }
        const float ds = pv * (dpv - sdel[r]);
        if constexpr (DROP) pv *= fa_drop_w(dr, p, s, h, i, jg);
#pragma unroll
        for (int c = 0; c < NC; ++c) {
          if (g + 8 * c < Dv) dv[c] = fmaf(pv, sdO[r * Dv + g + 8 * c], dv[c]);
          if (g + 8 * c < D) dk[c] = fmaf(ds, sQ[r * D + g + 8 * c], dk[c]);
        }
        if (g == 0) sds[r * (BN + 1) + jl] = ds;
      }
      __syncthreads();
      for (int x = tid; x < QC * D; x += 128) {
        const int r = x / D, d = x - r * D;
        if (i0 + r < s.Lq) {
          float acc = 0.f;
#pragma unroll
          for (int j = 0; j < BN; ++j)
            acc = fmaf(sds[r * (BN + 1) + j], sKf[j * D + d], acc);
          atomicAdd(p.dq_acc + ((s.qoff + i0 + r) * p.Hq + h) * (int64_t)D + d, acc);
        }
      }
    }
  }
  if (any && keyok) {
    T *dkr = (T *)p.dk + ((s.koff + jg) * p.Hkv + hk) * (int64_t)D;
    T *dvr = (T *)p.dv + ((s.koff + jg) * p.Hkv + hk) * (int64_t)Dv;
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      const int d = g + 8 * c;
      if (d < D) dkr[d] = tgc_from_f<T>(tgc_to_f(dkr[d]) + p.scale * dk[c]);
      if (d < Dv) dvr[d] = tgc_from_f<T>(tgc_to_f(dvr[d]) + dv[c]);
    }
  }
}

template <typename T, int NC> __global__ void __launch_bounds__(128) fa_bwd_generic_kernel(const FaParams p) {
  fa_bwd_generic_body<T, NC, false>(p, FaDrop{});
}

// With attention dropout: P becomes P W (W = 0 or 1 / keep per pair, fa_drop_w) in dV and dS.
template <typename T, int NC>
__global__ void __launch_bounds__(128) fa_bwd_generic_drop_kernel(const FaParams p, const FaDrop dr) {
  fa_bwd_generic_body<T, NC, true>(p, dr);
}

template <typename T> static tg_status fa_launch_bwd_generic(const FaParams &p, const FaDrop *dr, cudaStream_t st) {
  size_t smem = (size_t)(16 * p.D + 16 * p.Dv + 16 * p.D + 16 * 17 + 32) * sizeof(float);
  dim3 grid((unsigned)((p.max_k + 15) / 16), (unsigned)p.Hkv, (unsigned)p.nz);
  if (dr) {
    auto kern = p.D <= 64 && p.Dv <= 64 ? fa_bwd_generic_drop_kernel<T, 8> : fa_bwd_generic_drop_kernel<T, 32>;
    if (smem > 48 * 1024) TGC_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    kern<<<grid, 128, smem, st>>>(p, *dr);
  } else {
    auto kern = p.D <= 64 && p.Dv <= 64 ? fa_bwd_generic_kernel<T, 8> : fa_bwd_generic_kernel<T, 32>;
    if (smem > 48 * 1024) TGC_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    kern<<<grid, 128, smem, st>>>(p);
  }
  TGC_LAUNCHED("fa_bwd_generic_kernel");
  return TG_OK;
}

tg_status fa_backward_generic(const FaParams &p, const FaDrop *dr, cudaStream_t st) {
  switch (p.dtype) {
  case TG_F32: return fa_launch_bwd_generic<float>(p, dr, st);
  case TG_F16: return fa_launch_bwd_generic<__half>(p, dr, st);
  case TG_BF16: return fa_launch_bwd_generic<__nv_bfloat16>(p, dr, st);
  default: break;
  }
  tgc_set_error("fused attention backward: dtype %d not supported", (int)p.dtype);
  return TG_ERR_UNSUPPORTED;
}
