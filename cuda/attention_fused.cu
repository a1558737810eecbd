// Fused attention launchers (cuda/attention_fused.h): argument checks, mask preparation, the
// backward preprocess (delta_i = rowsum(dO_i * O_i)) and dQ finish, and the choice between the
// tensor-core kernels (f16 / bf16, D == Dv in {32, 64, 96, 128}, 256 forward) and the CUDA-core
// f32-math kernels (f32, Dv != D, any D, Dv <= 256) in attention_fused_{fwd,bwd}.cu.
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "attention_fused.cuh"

static const char *fa_kind_name(int k) {
  switch (k) {
  case TGC_ATTN_DENSE: return "DENSE";
  case TGC_ATTN_CAUSAL: return "CAUSAL";
  case TGC_ATTN_MASK: return "MASK";
  case TGC_ATTN_VARLEN: return "VARLEN";
  }
  return "?";
}

#define FA_FAIL(...)                                                                                                   \
  do {                                                                                                                 \
    tgc_set_error(__VA_ARGS__);                                                                                        \
    return TG_ERR_UNSUPPORTED;                                                                                         \
  } while (0)

// Shape / dtype / kind check; with_pointers also requires the device arrays a launch reads
// (cuda_attention_fused_supported is called before they are staged, so it does not).
static tg_status fa_check(const tgc_attn_shape *sh, bool with_pointers) {
  if (!sh) FA_FAIL("fused attention: shape is NULL");
  if (sh->dtype != TG_F32 && sh->dtype != TG_F16 && sh->dtype != TG_BF16)
    FA_FAIL("fused attention: dtype %d not supported (expected F32, F16 or BF16)", (int)sh->dtype);
  if (sh->D < 1 || sh->D > 256 || sh->Dv < 1 || sh->Dv > 256)
    FA_FAIL("fused attention: D=%d, Dv=%d; expected 1..256 each", sh->D, sh->Dv);
  if (sh->Hq < 1 || sh->Hkv < 1 || sh->Hq % sh->Hkv != 0 || sh->Hq > 65535)
    FA_FAIL("fused attention: Hq=%d, Hkv=%d; expected Hkv >= 1 dividing Hq <= 65535", sh->Hq, sh->Hkv);
  if (sh->B < 0 || sh->B > 65535 || sh->Nq < 0 || sh->Nk < 0 || sh->Nq > INT32_MAX / 2 || sh->Nk > INT32_MAX / 2)
    FA_FAIL("fused attention: B=%lld, Nq=%lld, Nk=%lld out of range", (long long)sh->B, (long long)sh->Nq,
            (long long)sh->Nk);
  if (!(sh->scale > 0.f) || std::isinf(sh->scale))
    FA_FAIL("fused attention: scale=%g; expected a finite positive number", (double)sh->scale);
  if (!(sh->prune_rho >= 0.f && sh->prune_rho <= 1.f))
    FA_FAIL("fused attention: prune_rho=%g; expected 0 (exact) or in (0, 1]", (double)sh->prune_rho);
  if (sh->prune_rho > 0.f && sh->kind != TGC_ATTN_DENSE && sh->kind != TGC_ATTN_CAUSAL)
    FA_FAIL("fused attention: tile pruning is for DENSE / CAUSAL only (kind %s)", fa_kind_name(sh->kind));
  if (sh->prune_rho > 0.f && sh->drop_keep > 0 && sh->drop_keep < 1)
    FA_FAIL("fused attention: tile pruning and attention dropout do not combine");
  switch (sh->kind) {
  case TGC_ATTN_DENSE:
  case TGC_ATTN_CAUSAL: break;
  case TGC_ATTN_MASK:
    if (with_pointers && !sh->mask_prep)
      FA_FAIL("fused attention: MASK needs mask_prep from cuda_attention_fused_mask_prepare");
    if (sh->mask_batch != 1 && sh->mask_batch != sh->B)
      FA_FAIL("fused attention: mask_batch=%lld; expected 1 or B=%lld", (long long)sh->mask_batch, (long long)sh->B);
    break;
  case TGC_ATTN_VARLEN:
    if (sh->B != 1) FA_FAIL("fused attention: VARLEN needs B == 1 (packed rows), got B=%lld", (long long)sh->B);
    if (with_pointers && (!sh->cu_q || !sh->cu_k)) FA_FAIL("fused attention: VARLEN needs cu_q and cu_k");
    if (sh->n_seqs < 0 || sh->n_seqs > 65535 || sh->max_q < 0 || sh->max_k < 0 || sh->max_q > sh->Nq ||
        sh->max_k > sh->Nk)
      FA_FAIL("fused attention: VARLEN n_seqs=%d, max_q=%d, max_k=%d out of range", sh->n_seqs, sh->max_q, sh->max_k);
    break;
  default: FA_FAIL("fused attention: unknown kind %d", (int)sh->kind);
  }
  return TG_OK;
}

extern "C" tg_status cuda_attention_fused_supported(const tgc_attn_shape *sh) { return fa_check(sh, false); }

// ------------------------------------------------------------------ mask preparation
// prep = [mask_batch, Nq, W] u64 bit rows (W = ceil(Nk / 64)), then [mask_batch, ceil(Nq/64), W]
// u8 summaries of the 64 x 64 cells (in-range elements only).
static int64_t fa_words(int64_t Nk) { return (Nk + 63) / 64; }
static size_t fa_bits_bytes(int64_t mb, int64_t Nq, int64_t Nk) { return (size_t)(mb * Nq * fa_words(Nk)) * 8; }

extern "C" size_t cuda_attention_fused_mask_bytes(int64_t mask_batch, int64_t Nq, int64_t Nk) {
  if (mask_batch < 0 || Nq < 0 || Nk < 0) return 0;
  size_t sum = (size_t)(mask_batch * ((Nq + 63) / 64) * fa_words(Nk));
  return fa_bits_bytes(mask_batch, Nq, Nk) + ((sum + 15) & ~(size_t)15);
}

// One warp per 64-bit word: two ballots over 32 bytes each.
__global__ void fa_mask_bits_kernel(const uint8_t *__restrict__ m, int64_t rows, int64_t Nk, int64_t W,
                                    uint64_t *__restrict__ bits) {
  const int64_t wid = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (wid >= rows * W) return;
  const int64_t row = wid / W, j = (wid - row * W) * 64 + lane;
  const uint8_t *mr = m + row * Nk;
  const unsigned lo = __ballot_sync(0xffffffffu, j < Nk && mr[j] != 0);
  const unsigned hi = __ballot_sync(0xffffffffu, j + 32 < Nk && mr[j + 32] != 0);
  if (lane == 0) bits[wid] = (uint64_t)lo | ((uint64_t)hi << 32);
}

__global__ void fa_mask_sum_kernel(const uint64_t *__restrict__ bits, int64_t mb, int64_t Nq, int64_t Nk, int64_t W,
                                   uint8_t *__restrict__ sum) {
  const int64_t TQ = (Nq + 63) / 64, n = mb * TQ * W;
  for (int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; x < n; x += (int64_t)gridDim.x * blockDim.x) {
    const int64_t b = x / (TQ * W), tq = (x / W) % TQ, tk = x % W;
    const int64_t r0 = tq * 64, r1 = r0 + 64 < Nq ? r0 + 64 : Nq;
    const int64_t ncol = Nk - tk * 64 < 64 ? Nk - tk * 64 : 64;
    const uint64_t valid = ncol == 64 ? ~0ull : ((1ull << ncol) - 1);
    int64_t cnt = 0;
    for (int64_t r = r0; r < r1; ++r)
      cnt += __popcll(bits[(b * Nq + r) * W + tk] & valid);
    sum[x] = cnt == 0 ? FA_EMPTY : cnt == (r1 - r0) * ncol ? FA_FULL : FA_PARTIAL;
  }
}

extern "C" tg_status cuda_attention_fused_mask_prepare(tgc_stream s, const uint8_t *mask, int64_t mask_batch,
                                                       int64_t Nq, int64_t Nk, void *prep) {
  if (mask_batch < 0 || Nq < 0 || Nk < 0) FA_FAIL("fused attention mask: negative size");
  const int64_t W = fa_words(Nk), rows = mask_batch * Nq;
  if (rows == 0 || W == 0) return TG_OK;
  if (!mask || !prep) {
    tgc_set_error("fused attention mask: mask or prep is NULL");
    return TG_ERR_INVALID_ARGUMENT;
  }
  cudaStream_t st = (cudaStream_t)s;
  uint64_t *bits = (uint64_t *)prep;
  fa_mask_bits_kernel<<<tgc_blocks(rows * W * 32, 256, 1LL << 30), 256, 0, st>>>(mask, rows, Nk, W, bits);
  TGC_LAUNCHED("fa_mask_bits_kernel");
  uint8_t *sum = (uint8_t *)prep + fa_bits_bytes(mask_batch, Nq, Nk);
  fa_mask_sum_kernel<<<tgc_blocks(mask_batch * ((Nq + 63) / 64) * W, 256), 256, 0, st>>>(bits, mask_batch, Nq, Nk, W,
                                                                                         sum);
  TGC_LAUNCHED("fa_mask_sum_kernel");
  return TG_OK;
}

// ------------------------------------------------------------------ kernel family
// The family switch is a sweep tool compiled into bench_attention alone (TIGA_BENCH_SWITCHES); in
// the library the family is the constant 1, so the mma.sync-only path for wgmma-capable calls folds away.
#ifdef TIGA_BENCH_SWITCHES
static std::atomic<int> g_family{1};

extern "C" void cuda_attention_fused_set_family(int family) {
  g_family.store(family < 0 ? 0 : family);
  fa_sm90_set_variant(family >= 2 ? family - 1 : 0);
}

static int fa_family() { return g_family.load(); }
#else
static constexpr int fa_family() { return 1; }
#endif

// Whether the current device runs the sm_90a kernels (compute capability exactly 9.0), cached.
static bool fa_device_sm90() {
  static std::atomic<int> known[64]; // 0 unknown, 1 yes, 2 no
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return false;
  int c = known[dev].load(std::memory_order_relaxed);
  if (c == 0) {
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
      return false;
    c = major == 9 && minor == 0 ? 1 : 2;
    known[dev].store(c, std::memory_order_relaxed);
  }
  return c == 1;
}

static bool fa_use_sm90(const FaParams &p, const FaDrop *dr) {
  return fa_family() != 0 && !dr && !p.prune && !p.counters && fa_sm90_has(p) && fa_device_sm90();
}

// ------------------------------------------------------------------ shared setup
static void fa_params(const tgc_attn_shape *sh, FaParams &p) {
  p = FaParams{};
  p.dtype = sh->dtype;
  p.B = sh->B;
  p.Nq = sh->Nq;
  p.Nk = sh->Nk;
  p.Hq = sh->Hq;
  p.Hkv = sh->Hkv;
  p.D = sh->D;
  p.Dv = sh->Dv;
  p.group = sh->Hq / sh->Hkv;
  p.scale = sh->scale;
  p.scale_log2 = sh->scale * 1.4426950408889634f;
  p.causal = sh->kind == TGC_ATTN_CAUSAL || (sh->kind == TGC_ATTN_VARLEN && sh->varlen_causal);
  if (sh->kind == TGC_ATTN_MASK) {
    p.mbits = (const uint64_t *)sh->mask_prep;
    p.msum = (const uint8_t *)sh->mask_prep + fa_bits_bytes(sh->mask_batch, sh->Nq, sh->Nk);
    p.mask_batch = (int)sh->mask_batch;
    p.mask_coarse = sh->mask_coarse != 0;
    p.mw = fa_words(sh->Nk);
    p.mtq = (sh->Nq + 63) / 64;
    p.mtk = p.mw;
  }
  if (sh->kind == TGC_ATTN_VARLEN) {
    p.varlen = 1;
    p.cu_q = sh->cu_q;
    p.cu_k = sh->cu_k;
    p.nz = sh->n_seqs;
    p.max_q = sh->max_q;
    p.max_k = sh->max_k;
  } else {
    p.nz = (int)sh->B;
    p.max_q = (int)sh->Nq;
    p.max_k = (int)sh->Nk;
  }
  p.prune = sh->prune_rho > 0.f;
  p.log2_rho = p.prune ? log2f(sh->prune_rho) : 0.f;
}

// The dropout state for the kernels when sh asks for dropout (keep in (0, 1)), else NULL.
static const FaDrop *fa_drop(const tgc_attn_shape *sh, FaDrop &d) {
  if (!(sh->drop_keep > 0 && sh->drop_keep < 1)) return nullptr;
  d.keep = sh->drop_keep;
  d.inv_keep = (float)(1.0 / sh->drop_keep);
  d.thr = (uint32_t)tg_keep_threshold(sh->drop_keep);
  d.seed = sh->drop_seed;
  d.call = sh->drop_call;
  return &d;
}

static bool fa_aligned(const void *a, const void *b, const void *c, const void *d) {
  return (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d) & 15) == 0;
}

extern "C" tg_status cuda_attention_fused_forward(tgc_stream s, const tgc_attn_shape *sh, const void *q, const void *k,
                                                  const void *v, void *out, float *lse,
                                                  unsigned long long *tile_counters) {
  tg_status stt = fa_check(sh, true);
  if (stt != TG_OK) return stt;
  FaParams p;
  fa_params(sh, p);
  if (p.nz == 0 || p.max_q == 0) return TG_OK;
  if (!q || !k || !v || !out || !lse) {
    tgc_set_error("fused attention forward: q, k, v, out and lse must be device pointers (one is NULL)");
    return TG_ERR_INVALID_ARGUMENT;
  }
  p.q = q;
  p.k = k;
  p.v = v;
  p.out = out;
  p.lse = lse;
  p.counters = tile_counters;
  FaDrop drs;
  const FaDrop *dr = fa_drop(sh, drs);
  const bool tc = p.dtype != TG_F32 && fa_forward_tc_has(p.D, p.Dv) && fa_aligned(q, k, v, out);
  if (tc && fa_use_sm90(p, dr)) return fa_forward_sm90(p, (cudaStream_t)s);
  return tc ? fa_forward_tc(p, dr, (cudaStream_t)s) : fa_forward_generic(p, dr, (cudaStream_t)s);
}

static size_t fa_align256(size_t n) { return (n + 255) & ~(size_t)255; }

// dQ accumulator: B * Nq * Hq * D floats plus 64 rows of slack (the sm_90a backward adds whole
// 64-row blocks), then delta [B, Hq, Nq].
static size_t fa_acc_bytes(const tgc_attn_shape *sh) {
  return fa_align256(((size_t)sh->B * sh->Nq * sh->Hq + 64) * sh->D * sizeof(float));
}

extern "C" size_t cuda_attention_fused_backward_workspace(const tgc_attn_shape *sh) {
  if (!sh || sh->B < 0 || sh->Nq < 0 || sh->Hq < 0 || sh->D < 0) return 0;
  return fa_acc_bytes(sh) + fa_align256((size_t)sh->B * sh->Hq * sh->Nq * sizeof(float));
}

// delta[b, h, i] = sum_d dO[b, i, h, d] * O[b, i, h, d]: one warp per row.
template <typename T>
__global__ void fa_delta_kernel(const T *__restrict__ o, const T *__restrict__ dout, float *__restrict__ delta,
                                int64_t rows, int64_t Nq, int Hq, int Dv) {
  const int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (r >= rows) return;
  float acc = 0.f;
  for (int d = lane; d < Dv; d += 32)
    acc = fmaf(tgc_to_f(o[r * Dv + d]), tgc_to_f(dout[r * Dv + d]), acc);
#pragma unroll
  for (int x = 16; x > 0; x >>= 1)
    acc += __shfl_xor_sync(0xffffffffu, acc, x);
  if (lane == 0) {
    const int64_t h = r % Hq, bi = r / Hq, i = bi % Nq, b = bi / Nq;
    delta[(b * Hq + h) * Nq + i] = acc;
  }
}

// The same, vectorised (16-byte loads), TPR threads per row (Dv / 8 rounded up to a power of two,
// <= 32), and zeroing the row's D floats of the dQ accumulator on the way (one pass instead of a
// memset). Needs Dv % 8 == 0, D % 4 == 0 and 16-byte aligned o, dout, acc.
template <typename T, int TPR>
__global__ void fa_delta_vec_kernel(const T *__restrict__ o, const T *__restrict__ dout, float *__restrict__ delta,
                                    float *__restrict__ acc, int64_t rows, int64_t Nq, int Hq, int Dv, int D) {
  const int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / TPR;
  const int c0 = threadIdx.x % TPR;
  if (r >= rows) return;
  using P = tgc_pack<T, 8>;
  const P *op = reinterpret_cast<const P *>(o + r * Dv), *dp = reinterpret_cast<const P *>(dout + r * Dv);
  float a = 0.f;
  for (int c = c0; c < Dv / 8; c += TPR) {
    const P x = op[c], y = dp[c];
#pragma unroll
    for (int e = 0; e < 8; ++e)
      a = fmaf(tgc_to_f(x.e[e]), tgc_to_f(y.e[e]), a);
  }
  float4 *ar = reinterpret_cast<float4 *>(acc + r * D);
  for (int c = c0; c < D / 4; c += TPR)
    ar[c] = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
  for (int x = TPR / 2; x > 0; x >>= 1)
    a += __shfl_xor_sync(0xffffffffu, a, x);
  if (c0 == 0) {
    const int64_t h = r % Hq, bi = r / Hq, i = bi % Nq, b = bi / Nq;
    delta[(b * Hq + h) * Nq + i] = a;
  }
}

// dq += scale * dq_acc
template <typename T>
__global__ void fa_dq_finish_kernel(T *__restrict__ dq, const float *__restrict__ acc, float scale, int64_t n) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    dq[i] = tgc_from_f<T>(tgc_to_f(dq[i]) + scale * acc[i]);
}

// The same for the sm_90a backward's accumulator layout (attention_sm90.cu): [B, Hq, Nq, D] planes
// with the 16-byte chunks of row i XOR-swizzled by i & 7. One thread per 4 consecutive d.
template <typename T>
__global__ void fa_dq_finish_sw_kernel(T *__restrict__ dq, const float *__restrict__ acc, float scale, int64_t B,
                                       int64_t Nq, int Hq, int D) {
  const int64_t n4 = B * Nq * Hq * D / 4;
  for (int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; x < n4; x += (int64_t)gridDim.x * blockDim.x) {
    const int64_t e = x * 4, d = e % D, r = e / D, h = r % Hq, bi = r / Hq, i = bi % Nq, b = bi / Nq;
    const float4 a = *reinterpret_cast<const float4 *>(acc + ((b * Hq + h) * Nq + i) * D + (((d >> 2) ^ (i & 7)) << 2));
    tgc_pack<T, 4> v = *reinterpret_cast<const tgc_pack<T, 4> *>(dq + e); // 8 bytes: D % 4 == 0, dq aligned
    v.e[0] = tgc_from_f<T>(tgc_to_f(v.e[0]) + scale * a.x);
    v.e[1] = tgc_from_f<T>(tgc_to_f(v.e[1]) + scale * a.y);
    v.e[2] = tgc_from_f<T>(tgc_to_f(v.e[2]) + scale * a.z);
    v.e[3] = tgc_from_f<T>(tgc_to_f(v.e[3]) + scale * a.w);
    *reinterpret_cast<tgc_pack<T, 4> *>(dq + e) = v;
  }
}

template <typename T, int TPR> static tg_status fa_delta_vec(const FaParams &p, cudaStream_t st, int64_t rows) {
  fa_delta_vec_kernel<T, TPR><<<tgc_blocks(rows * TPR, 256, 1LL << 30), 256, 0, st>>>(
      (const T *)p.o, (const T *)p.dout, p.delta, p.dq_acc, rows, p.Nq, p.Hq, p.Dv, p.D);
  TGC_LAUNCHED("fa_delta_vec_kernel");
  return TG_OK;
}

// pre: delta and a zeroed dQ accumulator; post: dq += scale * accumulator.
template <typename T>
static tg_status fa_bwd_pre_post(const FaParams &p, cudaStream_t st, bool pre, int64_t rows, int64_t nq_elems) {
  if (pre) {
    const bool vec = sizeof(T) == 2 && p.Dv % 8 == 0 && p.D % 4 == 0 &&
                     ((uintptr_t)p.o | (uintptr_t)p.dout | (uintptr_t)p.dq_acc) % 16 == 0;
    if (vec)
      return p.Dv <= 32    ? fa_delta_vec<T, 4>(p, st, rows)
             : p.Dv <= 64  ? fa_delta_vec<T, 8>(p, st, rows)
             : p.Dv <= 128 ? fa_delta_vec<T, 16>(p, st, rows)
                           : fa_delta_vec<T, 32>(p, st, rows);
    TGC_CUDA(cudaMemsetAsync(p.dq_acc, 0, (size_t)nq_elems * sizeof(float), st));
    fa_delta_kernel<T><<<tgc_blocks(rows * 32, 256, 1LL << 30), 256, 0, st>>>((const T *)p.o, (const T *)p.dout,
                                                                              p.delta, rows, p.Nq, p.Hq, p.Dv);
    TGC_LAUNCHED("fa_delta_kernel");
  } else if (p.dq_swizzled) {
    fa_dq_finish_sw_kernel<T>
        <<<tgc_blocks(nq_elems / 4, 256, 132 * 64), 256, 0, st>>>((T *)p.dq, p.dq_acc, p.scale, p.B, p.Nq, p.Hq, p.D);
    TGC_LAUNCHED("fa_dq_finish_sw_kernel");
  } else {
    fa_dq_finish_kernel<T><<<tgc_blocks(nq_elems, 256, 132 * 64), 256, 0, st>>>((T *)p.dq, p.dq_acc, p.scale, nq_elems);
    TGC_LAUNCHED("fa_dq_finish_kernel");
  }
  return TG_OK;
}

static tg_status fa_bwd_step(const FaParams &p, cudaStream_t st, bool pre, int64_t rows, int64_t n) {
  switch (p.dtype) {
  case TG_F32: return fa_bwd_pre_post<float>(p, st, pre, rows, n);
  case TG_F16: return fa_bwd_pre_post<__half>(p, st, pre, rows, n);
  case TG_BF16: return fa_bwd_pre_post<__nv_bfloat16>(p, st, pre, rows, n);
  default: break;
  }
  tgc_set_error("fused attention backward: dtype %d not supported", (int)p.dtype);
  return TG_ERR_UNSUPPORTED;
}

extern "C" tg_status cuda_attention_fused_backward(tgc_stream s, const tgc_attn_shape *sh, const void *q, const void *k,
                                                   const void *v, const void *out, const void *dout, const float *lse,
                                                   void *dq, void *dk, void *dv, void *workspace) {
  tg_status stt = fa_check(sh, true);
  if (stt != TG_OK) return stt;
  FaParams p;
  fa_params(sh, p);
  if (p.nz == 0 || p.max_q == 0) return TG_OK;
  if (!q || !k || !v || !out || !dout || !lse || !dq || !dk || !dv || !workspace) {
    tgc_set_error("fused attention backward: q, k, v, out, dout, lse, dq, dk, dv and workspace must be device pointers "
                  "(one is NULL)");
    return TG_ERR_INVALID_ARGUMENT;
  }
  cudaStream_t st = (cudaStream_t)s;
  p.q = q;
  p.k = k;
  p.v = v;
  p.o = out;
  p.dout = dout;
  p.lse = (float *)lse;
  p.dq = dq;
  p.dk = dk;
  p.dv = dv;
  p.prune = 0; // the backward is exact for the saved lse
  const int64_t rows = p.B * p.Nq * p.Hq, nq_elems = rows * p.D;
  p.dq_acc = (float *)workspace;
  p.delta = (float *)((char *)workspace + fa_acc_bytes(sh));
  stt = fa_bwd_step(p, st, true, rows, nq_elems); // delta, and the dQ accumulator zeroed

  if (stt != TG_OK) return stt;
  if (p.max_k > 0) {
    const bool tc =
        p.dtype != TG_F32 && fa_backward_tc_has(p.D, p.Dv) && fa_aligned(q, k, v, dout) && fa_aligned(dq, dk, dv, out);
    FaDrop drs;
    const FaDrop *dr = fa_drop(sh, drs);
    p.dq_swizzled = tc && fa_use_sm90(p, dr);
    stt = p.dq_swizzled ? fa_backward_sm90(p, st) : tc ? fa_backward_tc(p, dr, st) : fa_backward_generic(p, dr, st);
    if (stt != TG_OK) return stt;
  }
  return fa_bwd_step(p, st, false, rows, nq_elems);
}
