// Standalone check and benchmark of the fused attention kernels (cuda/attention_fused.h), built by
// bench/CMakeLists.txt or tools/build_bench_attention.sh: every attention file it compiles takes
// -DTIGA_BENCH_SWITCHES (the sweep switches below exist only then, never in libtiga).
//   bench_attention --check [substring]   random odd-sized cases vs a float64 CPU reference
//   bench_attention --bench [substring]   the shapes of docs/ANCHORS.md, CUDA events, medians
//   --family N                            kernel family (cuda_attention_fused_set_family): 0 = the
//                                         mma.sync kernels only, 1 = wgmma where it applies (default)
// Output: one line per case (CHECK ... / RESULT impl=tiga ...), a short table last.
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/attention_fused.h"

#ifndef TIGA_BENCH_SWITCHES
#error "bench_attention is compiled with -DTIGA_BENCH_SWITCHES (as are the attention files it links)"
#endif

// The library's device.cu provides these; the bench links only the attention files.
static char g_err[1024];
void tgc_set_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_err, sizeof g_err, fmt, ap);
  va_end(ap);
}
extern "C" const char *tgc_error(void) { return g_err; }
tg_status tgc_status_of(cudaError_t e) {
  return e == cudaSuccess ? TG_OK : e == cudaErrorMemoryAllocation ? TG_ERR_OUT_OF_MEMORY : TG_ERR_DEVICE;
}

#define CK(x)                                                                                                          \
  do {                                                                                                                 \
    cudaError_t e_ = (x);                                                                                              \
    if (e_ != cudaSuccess) {                                                                                           \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                               \
      exit(2);                                                                                                         \
    }                                                                                                                  \
  } while (0)
#define TG(x)                                                                                                          \
  do {                                                                                                                 \
    tg_status s_ = (x);                                                                                                \
    if (s_ != TG_OK) {                                                                                                 \
      fprintf(stderr, "%s:%d %s: status %d: %s\n", __FILE__, __LINE__, #x, (int)s_, tgc_error());                      \
      exit(2);                                                                                                         \
    }                                                                                                                  \
  } while (0)

// ------------------------------------------------------------------ host helpers
static uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
struct Rng {
  uint64_t s;
  double uni() { return (double)((s = splitmix64(s)) >> 11) * 0x1.0p-53; }
  double normal() { return std::sqrt(-2.0 * std::log(uni() + 1e-300)) * std::cos(6.283185307179586 * uni()); }
};
static size_t dsize(tg_dtype dt) { return dt == TG_F32 ? 4 : 2; }
static const char *dname(tg_dtype dt) { return dt == TG_F32 ? "f32" : dt == TG_F16 ? "f16" : "bf16"; }
// x rounded to dt, stored into raw (element i), returns the rounded value
static float store(tg_dtype dt, void *raw, size_t i, float x) {
  if (dt == TG_F32) return ((float *)raw)[i] = x;
  if (dt == TG_F16) {
    __half h = __float2half_rn(x);
    ((__half *)raw)[i] = h;
    return __half2float(h);
  }
  __nv_bfloat16 h = __float2bfloat16_rn(x);
  ((__nv_bfloat16 *)raw)[i] = h;
  return __bfloat162float(h);
}
static double load(tg_dtype dt, const void *raw, size_t i) {
  if (dt == TG_F32) return ((const float *)raw)[i];
  if (dt == TG_F16) return __half2float(((const __half *)raw)[i]);
  return __bfloat162float(((const __nv_bfloat16 *)raw)[i]);
}

struct DBuf {
  void *p = nullptr;
  size_t n = 0;
  explicit DBuf(size_t bytes) : n(bytes) { CK(cudaMalloc(&p, bytes ? bytes : 16)); }
  ~DBuf() { cudaFree(p); }
  DBuf(const DBuf &) = delete;
  DBuf &operator=(const DBuf &) = delete;
};

// ------------------------------------------------------------------ cases
enum { MASK_NONE, MASK_RANDOM, MASK_BLOCKS };
// The library's mask_coarse hint (ops/relation.h; tg_relation_mask computes it), computed the same way here:
// inside each aligned 128 x 128 block, the 64 x 64 cells are all empty or all non-empty.
static int mask_coarse(const std::vector<uint8_t> &m, int64_t mb, int64_t Nq, int64_t Nk) {
  const int64_t cq = (Nq + 63) / 64, ck = (Nk + 63) / 64;
  for (int64_t b = 0; b < mb; ++b) {
    std::vector<uint8_t> cell(cq * ck, 0);
    for (int64_t i = 0; i < Nq; ++i)
      for (int64_t j = 0; j < Nk; ++j)
        cell[(i / 64) * ck + j / 64] |= m[(b * Nq + i) * Nk + j] != 0;
    for (int64_t a = 0; a < cq; ++a)
      for (int64_t c = 0; c < ck; ++c)
        if (cell[a * ck + c] != cell[(a / 2 * 2) * ck + c / 2 * 2]) return 0;
  }
  return 1;
}

struct Case {
  std::string name;
  tg_dtype dt;
  int B, Hq, Hkv, Nq, Nk, D, Dv;
  tgc_attn_kind kind;
  int mask_style = MASK_NONE, mask_batch = 1;
  std::vector<int> lens_q, lens_k; // VARLEN
  int varlen_causal = 0;
  float prune = 0.f, mag = 1.f;
};

// allowed(b, i, j) for the non-varlen kinds; mask is [mask_batch, Nq, Nk]
struct Problem {
  int b, q0, k0, Lq, Lk, causal;
};
static std::vector<Problem> problems(const Case &c) {
  std::vector<Problem> v;
  if (c.kind == TGC_ATTN_VARLEN) {
    int q = 0, k = 0;
    for (size_t s = 0; s < c.lens_q.size(); ++s) {
      v.push_back({0, q, k, c.lens_q[s], c.lens_k[s], c.varlen_causal});
      q += c.lens_q[s];
      k += c.lens_k[s];
    }
  } else {
    for (int b = 0; b < c.B; ++b)
      v.push_back({b, b * c.Nq, b * c.Nk, c.Nq, c.Nk, c.kind == TGC_ATTN_CAUSAL});
  }
  return v;
}

// Float64 reference: out, lse, and the gradients for upstream dout.
static void reference(const Case &c, const std::vector<float> &q, const std::vector<float> &k,
                      const std::vector<float> &v, const std::vector<float> &dout, const std::vector<uint8_t> &mask,
                      std::vector<double> &out, std::vector<double> &lse, std::vector<double> &dq,
                      std::vector<double> &dk, std::vector<double> &dv) {
  const int Hq = c.Hq, Hkv = c.Hkv, D = c.D, Dv = c.Dv, G = Hq / Hkv;
  const int64_t NQ = (int64_t)c.B * c.Nq, NK = (int64_t)c.B * c.Nk;
  out.assign(NQ * Hq * Dv, 0.0);
  lse.assign((size_t)c.B * Hq * c.Nq, -INFINITY);
  dq.assign(NQ * Hq * D, 0.0);
  dk.assign(NK * Hkv * D, 0.0);
  dv.assign(NK * Hkv * Dv, 0.0);
  const double scale = 1.0 / std::sqrt((double)D);
  std::vector<Problem> pr = problems(c);
  const int nwork = (int)pr.size() * Hkv;
#pragma omp parallel for schedule(dynamic)
  for (int wi = 0; wi < nwork; ++wi) {
    const Problem P = pr[wi / Hkv];
    const int hk = wi % Hkv;
    std::vector<double> s(P.Lk), p(P.Lk), dp(P.Lk);
    std::vector<char> ok(P.Lk);
    for (int h = hk * G; h < (hk + 1) * G; ++h)
      for (int i = 0; i < P.Lq; ++i) {
        const int64_t qr = (int64_t)P.q0 + i;
        const float *qi = &q[(qr * Hq + h) * D];
        double mx = -INFINITY;
        for (int j = 0; j < P.Lk; ++j) {
          bool a = !P.causal || j <= i + P.Lk - P.Lq;
          if (c.kind == TGC_ATTN_MASK) a = mask[((int64_t)(c.mask_batch == 1 ? 0 : P.b) * c.Nq + i) * c.Nk + j] != 0;
          ok[j] = a;
          if (!a) continue;
          const float *kj = &k[(((int64_t)P.k0 + j) * Hkv + hk) * D];
          double acc = 0;
          for (int d = 0; d < D; ++d)
            acc += (double)qi[d] * kj[d];
          s[j] = acc * scale;
          mx = std::max(mx, s[j]);
        }
        if (mx == -INFINITY) continue; // no allowed key: out 0, lse -inf, no gradient
        double sum = 0;
        for (int j = 0; j < P.Lk; ++j)
          sum += ok[j] ? std::exp(s[j] - mx) : 0.0;
        const double L = mx + std::log(sum);
        lse[((size_t)P.b * Hq + h) * c.Nq + (c.kind == TGC_ATTN_VARLEN ? P.q0 : 0) + i] = L;
        double *oi = &out[(qr * Hq + h) * Dv];
        const float *doi = &dout[(qr * Hq + h) * Dv];
        double delta = 0;
        for (int j = 0; j < P.Lk; ++j) {
          if (!ok[j]) continue;
          p[j] = std::exp(s[j] - L);
          const float *vj = &v[(((int64_t)P.k0 + j) * Hkv + hk) * Dv];
          double acc = 0;
          for (int d = 0; d < Dv; ++d) {
            oi[d] += p[j] * vj[d];
            acc += (double)doi[d] * vj[d];
          }
          dp[j] = acc;
          delta += p[j] * acc;
        }
        double *dqi = &dq[(qr * Hq + h) * D];
        for (int j = 0; j < P.Lk; ++j) {
          if (!ok[j]) continue;
          const double ds = p[j] * (dp[j] - delta);
          const int64_t kr = (int64_t)P.k0 + j;
          const float *kj = &k[(kr * Hkv + hk) * D];
          double *dkj = &dk[(kr * Hkv + hk) * D], *dvj = &dv[(kr * Hkv + hk) * Dv];
          for (int d = 0; d < D; ++d) {
            dqi[d] += scale * ds * kj[d];
            dkj[d] += scale * ds * qi[d];
          }
          for (int d = 0; d < Dv; ++d)
            dvj[d] += p[j] * doi[d];
        }
      }
  }
}

// ||got - ref|| / ||ref|| (absolute when ref is 0); NaN / inf mismatches give +inf.
static double rel_l2(const std::vector<double> &got, const std::vector<double> &ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isinf(ref[i]) || std::isinf(got[i])) {
      if (ref[i] != got[i]) return INFINITY;
      continue;
    }
    if (std::isnan(got[i])) return INFINITY;
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

struct DevIn {
  std::vector<char> raw;
  std::vector<float> val;
};
static DevIn make_input(tg_dtype dt, size_t n, Rng &r, double mag) {
  DevIn x;
  x.raw.resize(n * dsize(dt));
  x.val.resize(n);
  for (size_t i = 0; i < n; ++i)
    x.val[i] = store(dt, x.raw.data(), i, (float)(r.normal() * mag));
  return x;
}
static void upload(DBuf &d, const void *h, size_t bytes) { CK(cudaMemcpy(d.p, h, bytes, cudaMemcpyHostToDevice)); }

static bool run_check(const Case &c, uint64_t seed) {
  Rng r{seed};
  const tg_dtype dt = c.dt;
  const size_t es = dsize(dt);
  const int64_t NQ = (int64_t)c.B * c.Nq, NK = (int64_t)c.B * c.Nk;
  DevIn q = make_input(dt, NQ * c.Hq * c.D, r, c.mag), k = make_input(dt, NK * c.Hkv * c.D, r, c.mag);
  DevIn v = make_input(dt, NK * c.Hkv * c.Dv, r, 1.0), dout = make_input(dt, NQ * c.Hq * c.Dv, r, 1.0);
  if (c.prune > 0) { // scores that grow with the key index, so early key tiles are prunable
    for (int64_t row = 0; row < NK; ++row)
      for (int hk = 0; hk < c.Hkv; ++hk)
        for (int d = 0; d < c.D; ++d) {
          size_t i = ((size_t)row * c.Hkv + hk) * c.D + d;
          k.val[i] = store(dt, k.raw.data(), i, (float)(d == 0 ? 40.0 * (row % c.Nk) / c.Nk : k.val[i] * 0.3));
        }
    for (size_t i = 0; i < q.val.size(); i += c.D)
      q.val[i] = store(dt, q.raw.data(), i, 8.f);
  }
  std::vector<uint8_t> mask;
  if (c.kind == TGC_ATTN_MASK) {
    mask.resize((size_t)c.mask_batch * c.Nq * c.Nk);
    for (int b = 0; b < c.mask_batch; ++b)
      for (int i = 0; i < c.Nq; ++i)
        for (int j = 0; j < c.Nk; ++j) {
          uint8_t a;
          const int bi = i / 64, bj = j / 64;
          if (c.mask_style == MASK_BLOCKS)
            a = (splitmix64(seed + b * 7919 + bi * 131 + bj) & 3) != 0 || bi == bj;
          else
            a = r.uni() < 0.5;
          if (bi == 1 && bj == 1) a = 0;                  // a fully masked 64 x 64 tile
          if (bi == 0 && bj == 2) a = 1;                  // a full one
          if (i == 5 || (b == 0 && i == c.Nq - 1)) a = 0; // fully masked rows
          mask[((size_t)b * c.Nq + i) * c.Nk + j] = a;
        }
  }
  std::vector<double> ro, rl, rdq, rdk, rdv;
  reference(c, q.val, k.val, v.val, dout.val, mask, ro, rl, rdq, rdk, rdv);
  // accumulation targets: dq, dk, dv start at random values of the gradients' size
  auto rms = [](const std::vector<double> &x) {
    double s = 0;
    for (double y : x)
      s += y * y;
    return x.empty() ? 0.0 : std::sqrt(s / x.size());
  };
  DevIn iq = make_input(dt, rdq.size(), r, 0.5 * rms(rdq)), ik = make_input(dt, rdk.size(), r, 0.5 * rms(rdk));
  DevIn iv = make_input(dt, rdv.size(), r, 0.5 * rms(rdv));

  DBuf bq(q.raw.size()), bk(k.raw.size()), bv(v.raw.size()), bdo(dout.raw.size());
  DBuf bout(NQ * c.Hq * c.Dv * es), dlse((size_t)c.B * c.Hq * c.Nq * 4);
  DBuf gq(iq.raw.size()), gk(ik.raw.size()), gv(iv.raw.size()), cnt(16);
  upload(bq, q.raw.data(), q.raw.size());
  upload(bk, k.raw.data(), k.raw.size());
  upload(bv, v.raw.data(), v.raw.size());
  upload(bdo, dout.raw.data(), dout.raw.size());
  upload(gq, iq.raw.data(), iq.raw.size());
  upload(gk, ik.raw.data(), ik.raw.size());
  upload(gv, iv.raw.data(), iv.raw.size());
  CK(cudaMemset(bout.p, 0xFF, bout.n)); // NaN poison
  CK(cudaMemset(dlse.p, 0xFF, dlse.n));
  CK(cudaMemset(cnt.p, 0, 16));

  tgc_attn_shape sh{};
  sh.B = c.B;
  sh.Nq = NQ / c.B;
  sh.Nk = NK / c.B;
  sh.Hq = c.Hq;
  sh.Hkv = c.Hkv;
  sh.D = c.D;
  sh.Dv = c.Dv;
  sh.dtype = dt;
  sh.scale = (float)(1.0 / std::sqrt((double)c.D));
  sh.kind = c.kind;
  sh.prune_rho = c.prune;
  DBuf dmask(mask.size()), prep(cuda_attention_fused_mask_bytes(c.mask_batch, c.Nq, c.Nk));
  std::vector<int32_t> cq(1, 0), ckk(1, 0);
  for (size_t s = 0; s < c.lens_q.size(); ++s) {
    cq.push_back(cq.back() + c.lens_q[s]);
    ckk.push_back(ckk.back() + c.lens_k[s]);
  }
  DBuf dcq(cq.size() * 4), dck(ckk.size() * 4);
  if (c.kind == TGC_ATTN_MASK) {
    upload(dmask, mask.data(), mask.size());
    CK(cudaMemset(prep.p, 0xFF, prep.n));
    TG(cuda_attention_fused_mask_prepare(0, (const uint8_t *)dmask.p, c.mask_batch, c.Nq, c.Nk, prep.p));
    sh.mask_prep = prep.p;
    sh.mask_batch = c.mask_batch;
    sh.mask_coarse = mask_coarse(mask, c.mask_batch, c.Nq, c.Nk);
  }
  if (c.kind == TGC_ATTN_VARLEN) {
    upload(dcq, cq.data(), cq.size() * 4);
    upload(dck, ckk.data(), ckk.size() * 4);
    sh.cu_q = (const int32_t *)dcq.p;
    sh.cu_k = (const int32_t *)dck.p;
    sh.n_seqs = (int)c.lens_q.size();
    sh.max_q = *std::max_element(c.lens_q.begin(), c.lens_q.end());
    sh.max_k = *std::max_element(c.lens_k.begin(), c.lens_k.end());
    sh.varlen_causal = c.varlen_causal;
  }
  TG(cuda_attention_fused_supported(&sh));
  DBuf ws(cuda_attention_fused_backward_workspace(&sh));
  CK(cudaMemset(ws.p, 0xFF, ws.n));
  TG(cuda_attention_fused_forward(0, &sh, bq.p, bk.p, bv.p, bout.p, (float *)dlse.p, (unsigned long long *)cnt.p));
  CK(cudaGetLastError());
  TG(cuda_attention_fused_backward(0, &sh, bq.p, bk.p, bv.p, bout.p, bdo.p, (const float *)dlse.p, gq.p, gk.p, gv.p,
                                   ws.p));
  CK(cudaDeviceSynchronize());

  std::vector<char> ho(bout.n), hq(gq.n), hk(gk.n), hv(gv.n);
  std::vector<float> hl(dlse.n / 4);
  unsigned long long hc[2];
  CK(cudaMemcpy(ho.data(), bout.p, ho.size(), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hl.data(), dlse.p, dlse.n, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hq.data(), gq.p, hq.size(), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hk.data(), gk.p, hk.size(), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hv.data(), gv.p, hv.size(), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hc, cnt.p, 16, cudaMemcpyDeviceToHost));
  auto vals = [&](const std::vector<char> &raw, const DevIn *init, size_t n) {
    std::vector<double> x(n);
    for (size_t i = 0; i < n; ++i)
      x[i] = load(dt, raw.data(), i) - (init ? init->val[i] : 0.0);
    return x;
  };
  std::vector<double> go = vals(ho, nullptr, ro.size()), gl(hl.begin(), hl.end());
  double e[5] = {rel_l2(go, ro), rel_l2(gl, rl), rel_l2(vals(hq, &iq, rdq.size()), rdq),
                 rel_l2(vals(hk, &ik, rdk.size()), rdk), rel_l2(vals(hv, &iv, rdv.size()), rdv)};
  double thr = dt == TG_F32 ? 1e-5 : 1e-2;
  // Pruning drops weights below rho of the row's max (tolerance 1e-4). The prune inputs give the
  // keys a large shared component (scores ramp over ~40 nats), so dq = scale sum dS k cancels
  // heavily and 16-bit dS rounding shows in dq: 10x tolerance for dq there.
  if (c.prune > 0) thr = std::max(thr, 1e-4);
  bool ok = true;
  for (int x = 0; x < 5; ++x)
    ok &= e[x] <= (c.prune > 0 && x == 2 ? 10 * thr : thr); // NaN compares false
  printf(
      "CHECK %-28s %-4s B=%d Hq=%d Hkv=%d Nq=%d Nk=%d D=%d Dv=%d  out=%.2e lse=%.2e dq=%.2e dk=%.2e dv=%.2e  thr=%.0e"
      "  tiles=%llu/%llu  %s\n",
      c.name.c_str(), dname(dt), c.B, c.Hq, c.Hkv, c.Nq, c.Nk, c.D, c.Dv, e[0], e[1], e[2], e[3], e[4], thr, hc[0],
      hc[1], ok ? "PASS" : "FAIL");
  fflush(stdout);
  return ok;
}

static std::vector<Case> check_cases() {
  std::vector<Case> v;
  const tg_dtype dts[3] = {TG_F32, TG_F16, TG_BF16};
  for (tg_dtype dt : dts) {
    for (int D : {32, 64, 96, 128, 256}) {
      v.push_back({"dense-gqa", dt, 2, 4, 2, 37, 53, D, D, TGC_ATTN_DENSE});
      v.push_back({"causal-q<k", dt, 1, 2, 1, 129, 200, D, D, TGC_ATTN_CAUSAL});
      v.push_back({"causal-q>k", dt, 1, 3, 3, 200, 53, D, D, TGC_ATTN_CAUSAL});
    }
    v.push_back({"decode-nq1", dt, 2, 8, 2, 1, 200, 64, 64, TGC_ATTN_DENSE});
    v.push_back({"dense-513", dt, 1, 2, 2, 513, 513, 128, 128, TGC_ATTN_DENSE});
    v.push_back({"causal-513", dt, 1, 2, 1, 513, 513, 64, 64, TGC_ATTN_CAUSAL});
    v.push_back({"dense-dv!=d", dt, 1, 4, 2, 129, 200, 64, 32, TGC_ATTN_DENSE});
    v.push_back({"causal-dv!=d", dt, 1, 2, 2, 129, 200, 96, 128, TGC_ATTN_CAUSAL});
    v.push_back({"dense-odd-d", dt, 1, 2, 1, 37, 53, 40, 24, TGC_ATTN_DENSE});
    v.push_back({"large-mag", dt, 1, 2, 1, 129, 200, 64, 64, TGC_ATTN_DENSE, MASK_NONE, 1, {}, {}, 0, 0.f, 3.f});
    v.push_back(
        {"large-mag-causal", dt, 1, 2, 1, 129, 200, 128, 128, TGC_ATTN_CAUSAL, MASK_NONE, 1, {}, {}, 0, 0.f, 3.f});
    for (int D : {64, 128}) {
      v.push_back({"mask-random-b2", dt, 2, 2, 1, 129, 200, D, D, TGC_ATTN_MASK, MASK_RANDOM, 2});
      v.push_back({"mask-blocks-shared", dt, 2, 2, 2, 300, 260, D, D, TGC_ATTN_MASK, MASK_BLOCKS, 1});
      v.push_back({"varlen-causal",
                   dt,
                   1,
                   4,
                   2,
                   0,
                   0,
                   D,
                   D,
                   TGC_ATTN_VARLEN,
                   MASK_NONE,
                   1,
                   {1, 37, 129, 64, 1, 200},
                   {1, 37, 129, 64, 1, 200},
                   1});
      v.push_back({"varlen-dense",
                   dt,
                   1,
                   2,
                   1,
                   0,
                   0,
                   D,
                   D,
                   TGC_ATTN_VARLEN,
                   MASK_NONE,
                   1,
                   {1, 37, 129, 200},
                   {53, 1, 200, 64},
                   0});
      v.push_back({"varlen-causal-q!=k",
                   dt,
                   1,
                   2,
                   2,
                   0,
                   0,
                   D,
                   D,
                   TGC_ATTN_VARLEN,
                   MASK_NONE,
                   1,
                   {1, 37, 200, 64},
                   {53, 1, 129, 200},
                   1});
    }
    v.push_back({"prune-1e-6", dt, 1, 2, 1, 129, 700, 64, 64, TGC_ATTN_DENSE, MASK_NONE, 1, {}, {}, 0, 1e-6f});
    v.push_back(
        {"prune-causal-1e-6", dt, 1, 2, 1, 300, 700, 128, 128, TGC_ATTN_CAUSAL, MASK_NONE, 1, {}, {}, 0, 1e-6f});
  }
  for (Case &c : v)
    if (c.kind == TGC_ATTN_VARLEN) {
      int tq = 0, tk = 0;
      for (size_t s = 0; s < c.lens_q.size(); ++s)
        tq += c.lens_q[s], tk += c.lens_k[s];
      c.Nq = tq;
      c.Nk = tk;
    }
  return v;
}

// ------------------------------------------------------------------ benchmark
__global__ void fill_normal(void *p, int dt, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint64_t z = seed + i * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    float u1 = ((z >> 40) + 1) * 0x1.0p-24f, u2 = ((z >> 16) & 0xFFFFFF) * 0x1.0p-24f;
    float x = sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
    if (dt == TG_F32)
      ((float *)p)[i] = x;
    else if (dt == TG_F16)
      ((__half *)p)[i] = __float2half_rn(x);
    else
      ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(x);
  }
}

struct BenchCase {
  std::string name;
  tg_dtype dt;
  int B, H, N, D;
  tgc_attn_kind kind;
};

static double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

template <typename F> static double time_ms(F f, double budget_ms) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 2; ++i)
    f(); // warm-up
  CK(cudaEventRecord(a));
  f();
  CK(cudaEventRecord(b));
  CK(cudaEventSynchronize(b));
  float one;
  CK(cudaEventElapsedTime(&one, a, b));
  int reps = std::max(5, std::min(50, (int)(budget_ms / std::max(one, 1e-3f))));
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(a));
    f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  CK(cudaGetLastError());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return median(t);
}

struct Row {
  std::string label;
  double fwd_tf, fb_tf;
};

static Row run_bench(const BenchCase &c) {
  const tg_dtype dt = c.dt;
  const size_t es = dsize(dt);
  int B = c.B, N = c.N;
  std::vector<int32_t> cu(1, 0);
  std::vector<uint8_t> mask;
  double pairs = 0;                // allowed (query, key) pairs per head
  if (c.kind == TGC_ATTN_VARLEN) { // 32 documents of random length 64..4031, causal inside each
    for (int s = 0; s < 32; ++s) {
      int L = 64 + (int)(splitmix64(12345 + s) % 3968);
      cu.push_back(cu.back() + L);
      pairs += (double)L * (L + 1) / 2;
    }
    B = 1;
    N = cu.back();
  } else if (c.kind == TGC_ATTN_MASK) { // random blocks at <name>% + the diagonal, per batch
    mask.resize((size_t)B * N * N);
    const int bs = strstr(c.name.c_str(), "b64") ? 64 : 128, nb = N / bs; // "mask50b64": 64 x 64 blocks
    const double dens = atoi(c.name.c_str() + 4) / 100.0;                 // "mask50" -> 0.5
    for (int b = 0; b < B; ++b)
      for (int bi = 0; bi < nb; ++bi)
        for (int bj = 0; bj < nb; ++bj) {
          uint64_t hsh = splitmix64(((uint64_t)b * 1024 + bi) * 1024 + bj);
          uint8_t a = bi == bj || (double)(hsh >> 11) * 0x1.0p-53 < dens;
          for (int i = bi * bs; i < bi * bs + bs; ++i)
            memset(&mask[((size_t)b * N + i) * N + bj * bs], a, bs);
          if (a) pairs += (double)bs * bs / B;
        }
  } else if (c.kind == TGC_ATTN_CAUSAL) {
    pairs = (double)N * N / 2; // FlashAttention's convention
  } else {
    pairs = (double)N * N;
  }
  const double fwd_flop = 4.0 * B * c.H * pairs * c.D, fb_flop = 3.5 * fwd_flop;
  const size_t nel = (size_t)B * N * c.H * c.D;
  DBuf q(nel * es), k(nel * es), v(nel * es), o(nel * es), dout(nel * es), dq(nel * es), dk(nel * es), dv(nel * es);
  DBuf lse((size_t)B * c.H * N * 4), cnt(16);
  void *ins[] = {q.p, k.p, v.p, dout.p, dq.p, dk.p, dv.p};
  for (int i = 0; i < 7; ++i)
    fill_normal<<<1024, 256>>>(ins[i], dt, nel, 1000 + i);
  tgc_attn_shape sh{};
  sh.B = B;
  sh.Nq = sh.Nk = N;
  sh.Hq = sh.Hkv = c.H;
  sh.D = sh.Dv = c.D;
  sh.dtype = dt;
  sh.scale = (float)(1.0 / std::sqrt((double)c.D));
  sh.kind = c.kind;
  DBuf dmask(mask.size()), prep(cuda_attention_fused_mask_bytes(B, N, N)), dcu(cu.size() * 4);
  if (c.kind == TGC_ATTN_MASK) {
    upload(dmask, mask.data(), mask.size());
    TG(cuda_attention_fused_mask_prepare(0, (const uint8_t *)dmask.p, B, N, N, prep.p));
    sh.mask_prep = prep.p;
    sh.mask_batch = B;
    sh.mask_coarse = mask_coarse(mask, B, N, N);
  }
  if (c.kind == TGC_ATTN_VARLEN) {
    upload(dcu, cu.data(), cu.size() * 4);
    sh.cu_q = sh.cu_k = (const int32_t *)dcu.p;
    sh.n_seqs = 32;
    int mx = 0;
    for (size_t s = 1; s < cu.size(); ++s)
      mx = std::max(mx, cu[s] - cu[s - 1]);
    sh.max_q = sh.max_k = mx;
    sh.varlen_causal = 1;
  }
  DBuf ws(cuda_attention_fused_backward_workspace(&sh));
  CK(cudaDeviceSynchronize());
  auto fwd = [&] { TG(cuda_attention_fused_forward(0, &sh, q.p, k.p, v.p, o.p, (float *)lse.p, nullptr)); };
  auto fb = [&] {
    fwd();
    TG(cuda_attention_fused_backward(0, &sh, q.p, k.p, v.p, o.p, dout.p, (const float *)lse.p, dq.p, dk.p, dv.p, ws.p));
  };
  double tf = time_ms(fwd, 300), tb = time_ms(fb, 600);
  char label[160];
  snprintf(label, sizeof label, "%s %s B=%d H=%d N=%d D=%d", c.name.c_str(), dname(dt), B, c.H, N, c.D);
  printf("RESULT impl=tiga case=%s dtype=%s B=%d H=%d N=%d D=%d fwd_ms=%.4f fwd_tflops=%.1f fwdbwd_ms=%.4f "
         "fwdbwd_tflops=%.1f\n",
         c.name.c_str(), dname(dt), B, c.H, N, c.D, tf, fwd_flop / tf * 1e-9, tb, fb_flop / tb * 1e-9);
  fflush(stdout);
  return {label, fwd_flop / tf * 1e-9, fb_flop / tb * 1e-9};
}

static std::vector<BenchCase> bench_cases() {
  std::vector<BenchCase> v;
  struct S {
    int D, N, B, H;
  } shapes[] = {{64, 1024, 32, 32},  {64, 4096, 8, 32},  {64, 16384, 2, 32},
                {128, 1024, 32, 16}, {128, 4096, 8, 16}, {128, 16384, 2, 16}};
  for (const S &s : shapes)
    for (int causal = 0; causal < 2; ++causal)
      v.push_back({causal ? "causal" : "dense", TG_F16, s.B, s.H, s.N, s.D, causal ? TGC_ATTN_CAUSAL : TGC_ATTN_DENSE});
  for (int D : {64, 128})
    for (int causal = 0; causal < 2; ++causal)
      v.push_back({causal ? "causal" : "dense", TG_BF16, 8, D == 64 ? 32 : 16, 4096, D,
                   causal ? TGC_ATTN_CAUSAL : TGC_ATTN_DENSE});
  v.push_back({"causal", TG_F16, 4, 16, 4096, 64, TGC_ATTN_CAUSAL}); // flex_attention's anchor shape
  v.push_back({"mask50", TG_F16, 4, 16, 4096, 64, TGC_ATTN_MASK});
  v.push_back({"mask100", TG_F16, 4, 16, 4096, 64, TGC_ATTN_MASK});   // the mask machinery's cost vs dense
  v.push_back({"mask50b64", TG_F16, 4, 16, 4096, 64, TGC_ATTN_MASK}); // 64 x 64 blocks: finer than 128-row tiles
  v.push_back({"mask50", TG_F16, 4, 16, 4096, 128, TGC_ATTN_MASK});
  v.push_back({"varlen", TG_F16, 1, 16, 0, 64, TGC_ATTN_VARLEN});
  return v;
}

int main(int argc, char **argv) {
  bool check = false, bench = false;
  const char *filter = "";
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--check"))
      check = true;
    else if (!strcmp(argv[i], "--bench"))
      bench = true;
    else if (!strcmp(argv[i], "--family") && i + 1 < argc)
      cuda_attention_fused_set_family(atoi(argv[++i]));
    else
      filter = argv[i];
  }
  if (!check && !bench) {
    fprintf(stderr, "usage: %s --check|--bench [substring]\n", argv[0]);
    return 2;
  }
  int fails = 0, n = 0;
  if (check) {
    uint64_t seed = 1;
    for (const Case &c : check_cases()) {
      std::string id = c.name + " " + dname(c.dt) + " D=" + std::to_string(c.D);
      if (!strstr(id.c_str(), filter)) continue;
      ++n;
      fails += !run_check(c, seed++ * 7777);
    }
    printf("CHECK SUMMARY: %d passed, %d failed\n", n - fails, fails);
  }
  if (bench) {
    std::vector<Row> rows;
    for (const BenchCase &c : bench_cases()) {
      std::string id = c.name + " " + dname(c.dt) + " D=" + std::to_string(c.D) + " N=" + std::to_string(c.N);
      if (!strstr(id.c_str(), filter)) continue;
      rows.push_back(run_bench(c));
    }
    printf("\n%-40s %10s %10s\n", "tiga (TFLOP/s)", "fwd", "fwd+bwd");
    for (const Row &r : rows)
      printf("%-40s %10.1f %10.1f\n", r.label.c_str(), r.fwd_tf, r.fb_tf);
  }
  return fails ? 1 : 0;
}
