// Fused attention forward: FlashAttention-2 on tensor cores (f16 / bf16, D == Dv) and a CUDA-core
// f32-math kernel for everything else (f32 inputs, Dv != D). Both keep the online softmax state
// per query row: m (running max, log2 domain), l (running sum of 2^(s*scale*log2e - m)), and
// O = sum 2^(...) v; at the end out = O / l and lse = (m + log2 l) ln 2.
#include <cfloat>

#include "attention_fused.cuh"

// ------------------------------------------------------------------ tensor-core kernel
// A CTA owns BM = NW * MT * 16 query rows of one head; warp w owns rows [w*MT*16, (w+1)*MT*16)
// as MT m16 tiles. Key tiles of BN = 64 rows stream through double-buffered shared memory
// (cp.async), last tile first. S = Q K^T and O += P V use mma.m16n8k16 with f32 accumulators;
// P goes from the S accumulators to A fragments in registers without touching shared memory.
// Shared rows are padded by 16 bytes (an odd number of 16-byte units) so ldmatrix is conflict-free.
template <int D, int MT, int NW, int BN_, bool PRUNE> struct FwdCfg {
  static constexpr int BN = BN_, BM = NW * MT * 16, LDS = D + 8, THREADS = NW * 32;
  static constexpr int VBUF = PRUNE ? 1 : 2; // with pruning V is loaded only after S is known
  static constexpr size_t SMEM = (size_t)(BM + 2 * BN + VBUF * BN) * LDS * 2;
};

// DROP: attention dropout (FaDrop); the row sum l uses the undropped weights, O the dropped ones.
template <typename T, int D, int MT, int NW, int BN_, bool QREG, bool PRUNE, bool DROP>
__device__ __forceinline__ void fa_fwd_tc_body(const FaParams &p, const FaDrop &dr) {
  using C = FwdCfg<D, MT, NW, BN_, PRUNE>;
  constexpr int BM = C::BM, BN = C::BN, LDS = C::LDS, THREADS = C::THREADS;
  constexpr int NT = BN / 8, DT = D / 8, KS = D / 16;
  constexpr int MWORDS = BN >= 64 ? BN / 64 : 1; // mask words per row and tile
  static_assert(BN % 32 == 0 && (BN <= 64 || BN % 64 == 0) && D % 16 == 0, "tile shape");
  extern __shared__ __align__(16) unsigned char fa_smem_raw[];
  T *sQ = reinterpret_cast<T *>(fa_smem_raw), *sK = sQ + BM * LDS, *sV = sK + 2 * BN * LDS;
  const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;

  FaSeq s;
  if (!fa_seq(p, blockIdx.z, s)) return;
  const int nqb = (s.Lq + BM - 1) / BM;
  if ((int)blockIdx.x >= nqb) return;
  const int qb = p.causal ? nqb - 1 - (int)blockIdx.x : (int)blockIdx.x; // longest rows first
  const int h = blockIdx.y, hk = h / p.group, i0 = qb * BM;
  const int ilast = min(i0 + BM, s.Lq) - 1;
  const int jend = p.causal ? min(s.Lk, ilast + s.off + 1) : s.Lk;
  const int64_t qstr = (int64_t)p.Hq * D, kstr = (int64_t)p.Hkv * D;
  const T *qg = (const T *)p.q + (s.qoff + i0) * qstr + (int64_t)h * D;
  const T *kg = (const T *)p.k + s.koff * kstr + (int64_t)hk * D;
  const T *vg = (const T *)p.v + s.koff * kstr + (int64_t)hk * D;
  const float sl2 = p.scale_log2;

  int j = jend > 0 ? (jend - 1) / BN : -1, cls = FA_EMPTY;
  while (j >= 0 && (cls = fa_tile_class(p, s, i0, BM, j * BN, BN)) == FA_EMPTY)
    --j;

  float o[MT][DT][4], mrow[MT][2], lrow[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int dt = 0; dt < DT; ++dt)
      o[mt][dt][0] = o[mt][dt][1] = o[mt][dt][2] = o[mt][dt][3] = 0.f;
    mrow[mt][0] = mrow[mt][1] = -INFINITY;
    lrow[mt][0] = lrow[mt][1] = 0.f;
  }
  uint32_t qf[QREG ? MT : 1][QREG ? KS : 1][4];
  unsigned visited = 0, npruned = 0;

  fa_load_tile<D, LDS, BM, THREADS>(sQ, qg, qstr, s.Lq - i0);
  if (j >= 0) {
    fa_load_tile<D, LDS, BN, THREADS>(sK, kg + (int64_t)j * BN * kstr, kstr, s.Lk - j * BN);
    if (!PRUNE) fa_load_tile<D, LDS, BN, THREADS>(sV, vg + (int64_t)j * BN * kstr, kstr, s.Lk - j * BN);
  }
  fa_cp_commit();
  int buf = 0;
  bool first = true;
  while (j >= 0) {
    fa_cp_wait<0>();
    __syncthreads(); // tile j landed; every warp is done with the other buffer
    int jn = j - 1, cn = FA_EMPTY;
    while (jn >= 0 && (cn = fa_tile_class(p, s, i0, BM, jn * BN, BN)) == FA_EMPTY)
      --jn;
    if (jn >= 0) {
      fa_load_tile<D, LDS, BN, THREADS>(sK + (buf ^ 1) * BN * LDS, kg + (int64_t)jn * BN * kstr, kstr, s.Lk - jn * BN);
      if (!PRUNE)
        fa_load_tile<D, LDS, BN, THREADS>(sV + (buf ^ 1) * BN * LDS, vg + (int64_t)jn * BN * kstr, kstr,
                                          s.Lk - jn * BN);
    }
    fa_cp_commit();
    if (QREG && first) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int kk = 0; kk < KS; ++kk)
          fa_ldm_x4(qf[QREG ? mt : 0][QREG ? kk : 0],
                    sQ + (w * MT * 16 + mt * 16 + (lane & 15)) * LDS + kk * 16 + (lane >> 4) * 8);
    }
    first = false;

    // S = Q K^T (raw dot products)
    const T *ks = sK + buf * BN * LDS;
    float sc[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
        sc[mt][nt][0] = sc[mt][nt][1] = sc[mt][nt][2] = sc[mt][nt][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) {
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if (QREG) {
#pragma unroll
          for (int x = 0; x < 4; ++x)
            a[mt][x] = qf[QREG ? mt : 0][QREG ? kk : 0][x];
        } else {
          fa_ldm_x4(a[mt], sQ + (w * MT * 16 + mt * 16 + (lane & 15)) * LDS + kk * 16 + (lane >> 4) * 8);
        }
      }
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        uint32_t b[4];
        fa_ldm_x4(b, ks + (np * 16 + (lane & 7) + (lane >> 4) * 8) * LDS + kk * 16 + ((lane >> 3) & 1) * 8);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          fa_mma<T>(sc[mt][2 * np], a[mt], b[0], b[1]);
          fa_mma<T>(sc[mt][2 * np + 1], a[mt], b[2], b[3]);
        }
      }
    }
    const int j0 = j * BN;
    if (cls == FA_PARTIAL) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int i = i0 + w * MT * 16 + mt * 16 + g + 8 * hh;
          uint64_t bits[MWORDS];
#pragma unroll
          for (int x = 0; x < MWORDS; ++x) {
            bits[x] = ~0ull;
            if (p.mbits)
              bits[x] = i < s.Lq && j0 + 64 * x < s.Lk ? fa_mask_row(p, s, i)[(j0 >> 6) + x] >> (j0 & 63) : 0ull;
          }
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int jj = nt * 8 + 2 * t + e, jg = j0 + jj;
              bool ok = jg < s.Lk && (!p.causal || jg <= i + s.off) && ((bits[jj >> 6] >> (jj & 63)) & 1ull);
              if (!ok) sc[mt][nt][2 * hh + e] = -INFINITY;
            }
        }
    }
    float mx[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        float x = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
          x = fmaxf(x, fmaxf(sc[mt][nt][2 * hh], sc[mt][nt][2 * hh + 1]));
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
        mx[mt][hh] = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
      }
    ++visited;
    bool skip = false;
    if (PRUNE) {
      // Skip when, for every row of the block, the tile's best score is below the row's running
      // max + ln(rho): each dropped weight is < rho times the row's current largest one.
      bool prunable = true;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int i = i0 + w * MT * 16 + mt * 16 + g + 8 * hh;
          float x = mx[mt][hh];
          prunable &= i >= s.Lq || x == -INFINITY || x * sl2 < mrow[mt][hh] + p.log2_rho;
        }
      skip = __syncthreads_and(prunable) != 0;
      if (skip) {
        ++npruned;
      } else {
        fa_load_tile<D, LDS, BN, THREADS>(sV, vg + (int64_t)j0 * kstr, kstr, s.Lk - j0);
        fa_cp_commit();
        fa_cp_wait<0>();
        __syncthreads();
      }
    }
    if (!skip) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const float mnew = fmaxf(mrow[mt][hh], mx[mt][hh] * sl2);
          const float muse = mnew == -INFINITY ? 0.f : mnew; // no (-inf) - (-inf)
          const float alpha = fa_exp2(mrow[mt][hh] - muse);
          mrow[mt][hh] = mnew;
          float rs = 0.f;
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            float2 dw = make_float2(1.f, 1.f);
            if constexpr (DROP) // keys (j, j + 1) of one row: one Philox block for both
              dw = fa_drop_w2(dr, p, s, h, i0 + w * MT * 16 + mt * 16 + g + 8 * hh, j0 + nt * 8 + 2 * t, 0, 1);
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              float pv = fa_exp2(fmaf(sc[mt][nt][2 * hh + e], sl2, -muse));
              rs += pv;
              if constexpr (DROP) pv *= e ? dw.y : dw.x;
              sc[mt][nt][2 * hh + e] = pv;
            }
          }
          lrow[mt][hh] = lrow[mt][hh] * alpha + rs;
#pragma unroll
          for (int dt = 0; dt < DT; ++dt) {
            o[mt][dt][2 * hh] *= alpha;
            o[mt][dt][2 * hh + 1] *= alpha;
          }
        }
      // O += P V
      const T *vs = sV + (PRUNE ? 0 : buf * BN * LDS);
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        uint32_t pa[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          pa[mt][0] = fa_pack<T>(sc[mt][2 * kk][0], sc[mt][2 * kk][1]);
          pa[mt][1] = fa_pack<T>(sc[mt][2 * kk][2], sc[mt][2 * kk][3]);
          pa[mt][2] = fa_pack<T>(sc[mt][2 * kk + 1][0], sc[mt][2 * kk + 1][1]);
          pa[mt][3] = fa_pack<T>(sc[mt][2 * kk + 1][2], sc[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          uint32_t b[4];
          fa_ldm_x4_t(b, vs + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + dp * 16 + (lane >> 4) * 8);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            fa_mma<T>(o[mt][2 * dp], pa[mt], b[0], b[1]);
            fa_mma<T>(o[mt][2 * dp + 1], pa[mt], b[2], b[3]);
          }
        }
      }
    }
    j = jn;
    cls = cn;
    buf ^= 1;
  }
  fa_cp_wait<0>();

  // out = O / l; lse = (m + log2 l) ln 2; a row without allowed keys: out 0, lse -inf.
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      float l = lrow[mt][hh];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const int i = i0 + w * MT * 16 + mt * 16 + g + 8 * hh;
      if (i < s.Lq) {
        const float inv = l > 0.f ? 1.f / l : 0.f;
        T *orow = (T *)p.out + ((s.qoff + i) * p.Hq + h) * (int64_t)D;
#pragma unroll
        for (int dt = 0; dt < DT; ++dt)
          *reinterpret_cast<uint32_t *>(orow + dt * 8 + 2 * t) =
              fa_pack<T>(o[mt][dt][2 * hh] * inv, o[mt][dt][2 * hh + 1] * inv);
        if (t == 0) p.lse[fa_lse_index(p, s, h, i)] = l > 0.f ? (mrow[mt][hh] + log2f(l)) * FA_LN2 : -INFINITY;
      }
    }
  if (p.counters && tid == 0) {
    atomicAdd(p.counters, (unsigned long long)visited);
    atomicAdd(p.counters + 1, (unsigned long long)npruned);
  }
}

template <typename T, int D, int MT, int NW, int BN_, bool QREG, bool PRUNE>
__global__ void __launch_bounds__(NW * 32) fa_fwd_tc_kernel(const FaParams p) {
  fa_fwd_tc_body<T, D, MT, NW, BN_, QREG, PRUNE, false>(p, FaDrop{});
}
template <typename T, int D, int MT, int NW, int BN_, bool QREG>
__global__ void __launch_bounds__(NW * 32) fa_fwd_tc_drop_kernel(const FaParams p, const FaDrop dr) {
  fa_fwd_tc_body<T, D, MT, NW, BN_, QREG, false, true>(p, dr);
}

template <typename T, int D, int MT, int NW, int BN, bool QREG, bool PRUNE, bool DROP>
static tg_status fa_launch_fwd_tc(const FaParams &p, const FaDrop *dr, cudaStream_t st) {
  using C = FwdCfg<D, MT, NW, BN, PRUNE>;
  dim3 grid((unsigned)((p.max_q + C::BM - 1) / C::BM), (unsigned)p.Hq, (unsigned)p.nz);
  if constexpr (DROP) {
    auto kern = fa_fwd_tc_drop_kernel<T, D, MT, NW, BN, QREG>;
    if (C::SMEM > 48 * 1024)
      TGC_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM));
    kern<<<grid, C::THREADS, C::SMEM, st>>>(p, *dr);
  } else {
    auto kern = fa_fwd_tc_kernel<T, D, MT, NW, BN, QREG, PRUNE>;
    if (C::SMEM > 48 * 1024)
      TGC_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM));
    kern<<<grid, C::THREADS, C::SMEM, st>>>(p);
  }
  TGC_LAUNCHED("fa_fwd_tc_kernel");
  return TG_OK;
}

// Per head dimension: MT m16 tiles per warp, 4 warps. Q stays in registers where they allow.
template <typename T, bool PRUNE, bool DROP>
static tg_status fa_fwd_tc_dim(const FaParams &p, const FaDrop *dr, cudaStream_t st) {
  switch (p.D) {
  case 32: return fa_launch_fwd_tc<T, 32, 2, 4, 64, true, PRUNE, DROP>(p, dr, st);
  case 64: return fa_launch_fwd_tc<T, 64, 2, 4, 64, true, PRUNE, DROP>(p, dr, st);
  case 96: return fa_launch_fwd_tc<T, 96, 2, 4, 64, false, PRUNE, DROP>(p, dr, st);
  case 128: return fa_launch_fwd_tc<T, 128, 2, 4, 64, false, PRUNE, DROP>(p, dr, st);
  case 256: return fa_launch_fwd_tc<T, 256, 1, 4, 64, false, PRUNE, DROP>(p, dr, st);
  }
  tgc_set_error("fused attention forward: no tensor-core kernel for D=%d", p.D);
  return TG_ERR_UNSUPPORTED;
}

bool fa_forward_tc_has(int D, int Dv) { return D == Dv && (D == 32 || D == 64 || D == 96 || D == 128 || D == 256); }

tg_status fa_forward_tc(const FaParams &p, const FaDrop *dr, cudaStream_t st) {
  if (p.dtype == TG_F16)
    return dr        ? fa_fwd_tc_dim<__half, false, true>(p, dr, st)
           : p.prune ? fa_fwd_tc_dim<__half, true, false>(p, dr, st)
                     : fa_fwd_tc_dim<__half, false, false>(p, dr, st);
  if (p.dtype == TG_BF16)
    return dr        ? fa_fwd_tc_dim<__nv_bfloat16, false, true>(p, dr, st)
           : p.prune ? fa_fwd_tc_dim<__nv_bfloat16, true, false>(p, dr, st)
                     : fa_fwd_tc_dim<__nv_bfloat16, false, false>(p, dr, st);
  tgc_set_error("fused attention forward: tensor-core kernels take f16 or bf16");
  return TG_ERR_UNSUPPORTED;
}

// ------------------------------------------------------------------ CUDA-core kernel
// Any D, Dv <= 256, math in f32 (f32 inputs stay exact to rounding). A CTA of 128 threads owns
// 16 query rows; thread (r, g) = (tid / 8, tid % 8) holds dims d = g + 8c of its row, and the 8
// threads of a row reduce dot products with shuffles. Keys come in chunks of 32 through shared f32.
// NC: dims per thread (8 for D, Dv <= 64, else 32).
template <typename T, int NC, bool PRUNE, bool DROP>
__device__ __forceinline__ void fa_fwd_generic_body(const FaParams p, const FaDrop dr) {
  constexpr int BM = 16, BN = 32;
  extern __shared__ float fa_gsm[];
  const int D = p.D, Dv = p.Dv;
  float *sK = fa_gsm, *sV = fa_gsm + BN * D;
  const int tid = threadIdx.x, r = tid >> 3, g = tid & 7;
  FaSeq s;
  if (!fa_seq(p, blockIdx.z, s)) return;
  const int nqb = (s.Lq + BM - 1) / BM;
  if ((int)blockIdx.x >= nqb) return;
  const int qb = p.causal ? nqb - 1 - (int)blockIdx.x : (int)blockIdx.x;
  const int h = blockIdx.y, hk = h / p.group, i0 = qb * BM, i = i0 + r;
  const bool rowok = i < s.Lq;
  const int ilast = min(i0 + BM, s.Lq) - 1;
  const int jend = p.causal ? min(s.Lk, ilast + s.off + 1) : s.Lk;
  const float sl2 = p.scale_log2;
  const T *qrow = (const T *)p.q + ((s.qoff + min(i, s.Lq - 1)) * p.Hq + h) * (int64_t)D;
  const T *kg = (const T *)p.k + s.koff * p.Hkv * (int64_t)D + (int64_t)hk * D;
  const T *vg = (const T *)p.v + s.koff * p.Hkv * (int64_t)Dv + (int64_t)hk * Dv;
  float qv[NC], o[NC];
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    int d = g + 8 * c;
    qv[c] = rowok && d < D ? tgc_to_f(qrow[d]) : 0.f;
    o[c] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  unsigned visited = 0, npruned = 0;
  for (int jt = jend > 0 ? (jend - 1) / BN : -1; jt >= 0; --jt) {
    const int j0 = jt * BN;
    const int cls = fa_tile_class(p, s, i0, BM, j0, BN);
    if (cls == FA_EMPTY) continue;
    __syncthreads(); // previous chunk fully read
    for (int x = tid; x < BN * D; x += 128) {
      int jj = x / D, d = x - jj * D;
      sK[x] = j0 + jj < s.Lk ? tgc_to_f(kg[(int64_t)(j0 + jj) * p.Hkv * D + d]) : 0.f;
    }
    if (!PRUNE)
      for (int x = tid; x < BN * Dv; x += 128) {
        int jj = x / Dv, d = x - jj * Dv;
        sV[x] = j0 + jj < s.Lk ? tgc_to_f(vg[(int64_t)(j0 + jj) * p.Hkv * Dv + d]) : 0.f;
      }
    __syncthreads();
    float sc[BN];
    uint64_t bits = ~0ull;
    if (cls == FA_PARTIAL && p.mbits) bits = rowok ? fa_mask_row(p, s, i)[j0 >> 6] >> (j0 & 63) : 0ull;
    float mx = -INFINITY;
#pragma unroll
    for (int jj = 0; jj < BN; ++jj) {
      float part = 0.f;
#pragma unroll
      for (int c = 0; c < NC; ++c)
        if (g + 8 * c < D) part = fmaf(qv[c], sK[jj * D + g + 8 * c], part);
      part += __shfl_xor_sync(0xffffffffu, part, 1);
      part += __shfl_xor_sync(0xffffffffu, part, 2);
      part += __shfl_xor_sync(0xffffffffu, part, 4);
      if (cls == FA_PARTIAL) {
        const int jg = j0 + jj;
        bool ok = jg < s.Lk && (!p.causal || jg <= i + s.off) && ((bits >> jj) & 1ull);
        if (!ok) part = -INFINITY;
      }
      sc[jj] = part;
      mx = fmaxf(mx, part);
    }
    ++visited;
    if (PRUNE) {
      bool prunable = !rowok || mx == -INFINITY || mx * sl2 < m + p.log2_rho;
      if (__syncthreads_and(prunable)) {
        ++npruned;
        continue;
      }
      for (int x = tid; x < BN * Dv; x += 128) {
        int jj = x / Dv, d = x - jj * Dv;
        sV[x] = j0 + jj < s.Lk ? tgc_to_f(vg[(int64_t)(j0 + jj) * p.Hkv * Dv + d]) : 0.f;
      }
      __syncthreads();
    }
    const float mnew = fmaxf(m, mx * sl2);
    const float muse = mnew == -INFINITY ? 0.f : mnew;
    const float alpha = exp2f(m - muse);
    m = mnew;
    l *= alpha;
#pragma unroll
    for (int c = 0; c < NC; ++c)
      o[c] *= alpha;
#pragma unroll
    for (int jj = 0; jj < BN; ++jj) {
      float pv = exp2f(fmaf(sc[jj], sl2, -muse));
      l += pv;
      if constexpr (DROP) pv *= fa_drop_w(dr, p, s, h, i, j0 + jj);
#pragma unroll
      for (int c = 0; c < NC; ++c)
        if (g + 8 * c < Dv) o[c] = fmaf(pv, sV[jj * Dv + g + 8 * c], o[c]);
    }
  }
  if (rowok) {
    const float inv = l > 0.f ? 1.f / l : 0.f;
    T *orow = (T *)p.out + ((s.qoff + i) * p.Hq + h) * (int64_t)Dv;
#pragma unroll
    for (int c = 0; c < NC; ++c)
      if (g + 8 * c < Dv) orow[g + 8 * c] = tgc_from_f<T>(o[c] * inv);
    if (g == 0) p.lse[fa_lse_index(p, s, h, i)] = l > 0.f ? (m + log2f(l)) * FA_LN2 : -INFINITY;
  }
  if (p.counters && tid == 0) {
    atomicAdd(p.counters, (unsigned long long)visited);
    atomicAdd(p.counters + 1, (unsigned long long)npruned);
  }
}

template <typename T, int NC, bool PRUNE>
__global__ void __launch_bounds__(128) fa_fwd_generic_kernel(const FaParams p) {
  fa_fwd_generic_body<T, NC, PRUNE, false>(p, FaDrop{});
}
template <typename T, int NC>
__global__ void __launch_bounds__(128) fa_fwd_generic_drop_kernel(const FaParams p, const FaDrop dr) {
  fa_fwd_generic_body<T, NC, false, true>(p, dr);
}

template <typename T, bool PRUNE> static tg_status fa_launch_fwd_generic(const FaParams &p, cudaStream_t st) {
  auto kern = p.D <= 64 && p.Dv <= 64 ? fa_fwd_generic_kernel<T, 8, PRUNE> : fa_fwd_generic_kernel<T, 32, PRUNE>;
  size_t smem = (size_t)32 * (p.D + p.Dv) * sizeof(float);
  if (smem > 48 * 1024) TGC_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  dim3 grid((unsigned)((p.max_q + 15) / 16), (unsigned)p.Hq, (unsigned)p.nz);
  kern<<<grid, 128, smem, st>>>(p);
  TGC_LAUNCHED("fa_fwd_generic_kernel");
  return TG_OK;
}

template <typename T>
static tg_status fa_launch_fwd_generic_drop(const FaParams &p, const FaDrop &dr, cudaStream_t st) {
  auto kern = p.D <= 64 && p.Dv <= 64 ? fa_fwd_generic_drop_kernel<T, 8> : fa_fwd_generic_drop_kernel<T, 32>;
  size_t smem = (size_t)32 * (p.D + p.Dv) * sizeof(float);
  if (smem > 48 * 1024) TGC_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  dim3 grid((unsigned)((p.max_q + 15) / 16), (unsigned)p.Hq, (unsigned)p.nz);
  kern<<<grid, 128, smem, st>>>(p, dr);
  TGC_LAUNCHED("fa_fwd_generic_drop_kernel");
  return TG_OK;
}

tg_status fa_forward_generic(const FaParams &p, const FaDrop *dr, cudaStream_t st) {
  if (dr) switch (p.dtype) {
    case TG_F32: return fa_launch_fwd_generic_drop<float>(p, *dr, st);
    case TG_F16: return fa_launch_fwd_generic_drop<__half>(p, *dr, st);
    case TG_BF16: return fa_launch_fwd_generic_drop<__nv_bfloat16>(p, *dr, st);
    default: break;
    }
  switch (p.dtype) {
  case TG_F32: return p.prune ? fa_launch_fwd_generic<float, true>(p, st) : fa_launch_fwd_generic<float, false>(p, st);
  case TG_F16:
    return p.prune ? fa_launch_fwd_generic<__half, true>(p, st) : fa_launch_fwd_generic<__half, false>(p, st);
  case TG_BF16:
    return p.prune ? fa_launch_fwd_generic<__nv_bfloat16, true>(p, st)
                   : fa_launch_fwd_generic<__nv_bfloat16, false>(p, st);
  default: break;
  }
  tgc_set_error("fused attention forward: dtype %d not supported", (int)p.dtype);
  return TG_ERR_UNSUPPORTED;
}
