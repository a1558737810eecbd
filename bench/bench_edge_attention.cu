// Standalone check and benchmark of tg_edge_attention's fused kernels (cuda/edge_attention.h).
// Builds as bench_edge_attention (bench/CMakeLists.txt), needing only cudart.
//   --check  random CSR graphs (odd sizes, empty rows, a hub row with every source, a 20000-edge
//            hub, > 8192 rows so warps walk several rows), every hidden width, H, F, dim, Fe, with
//            and without U, V, b1, b2, dropout keep 0.6 and 1, f32 and bf16: out, lse and every
//            gradient against a float64 CPU reference (ref_forward / ref_backward below). Gradients
//            are checked as ACCUMULATION into nonzero buffers, and the backward is run twice into
//            identical buffers and compared bit for bit. One FAIL line per failed case, then
//            "edge_attention check: N/M passed"; exit 1 on any failure.
//   --bench  radius graphs of 100k and 400k points (uniform in the unit cube, neighbours within r
//            by a cell list, points sorted by cell unless --shuffled): forward, backward,
//            forward + backward, CUDA-event medians of 25 reps after warm-up. --only SUBSTR
//            times only the configs whose name contains SUBSTR; --compare times the warp-per-row
//            kernels ("old") and the packed ones ("new") side by side.
// TIGA_EA_KERNEL=old / new in the environment makes every launch take the warp-per-row / the packed
// kernels (default: the library's rule, packed_for in cuda/edge_attention.cuh);
// TIGA_EA_ROWS=n (1..16) forces the packed kernels' rows per warp chunk (default: by graph size,
// 16 from 65536 rows on, so --check's graphs take 1..8 unless forced).
// With $OUT set, the full log also goes to $OUT/bench_edge_attention.log.
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "cuda/edge_attention.h"
#include "cuda/relation.h"
#include "host/philox.h"

// The library's device.cu provides these; the bench compiles only the kernel files.
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

static FILE *g_log = nullptr;
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  if (g_log) {
    va_start(ap, fmt);
    vfprintf(g_log, fmt, ap);
    va_end(ap);
  }
}
static std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static std::string fmt(const char *f, ...) {
  char b[512];
  va_list ap;
  va_start(ap, f);
  vsnprintf(b, sizeof b, f, ap);
  va_end(ap);
  return b;
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
  int64_t below(int64_t n) { return (int64_t)(uni() * (double)n) % n; }
};
static size_t dsize(tg_dtype dt) { return dt == TG_F32 ? 4 : 2; }
static const char *dname(tg_dtype dt) { return dt == TG_F32 ? "f32" : "bf16"; }

struct DBuf {
  void *p = nullptr;
  size_t bytes = 0;
  explicit DBuf(size_t b) : bytes(b) { CK(cudaMalloc(&p, b ? b : 16)); }
  ~DBuf() { cudaFree(p); }
  DBuf(const DBuf &) = delete;
  DBuf &operator=(const DBuf &) = delete;
  void poison() { CK(cudaMemset(p, 0xFF, bytes)); } // NaN in f32 and bf16
  std::vector<uint8_t> raw() const {
    std::vector<uint8_t> r(bytes);
    CK(cudaDeviceSynchronize());
    if (bytes) CK(cudaMemcpy(r.data(), p, bytes, cudaMemcpyDeviceToHost));
    return r;
  }
};
using UB = std::unique_ptr<DBuf>;
template <typename X> static DBuf *upload(const std::vector<X> &v) {
  DBuf *b = new DBuf(v.size() * sizeof(X));
  if (!v.empty()) CK(cudaMemcpy(b->p, v.data(), v.size() * sizeof(X), cudaMemcpyHostToDevice));
  return b;
}

// A tensor in storage dtype dt (f32 / bf16): the stored bits and the same values as doubles.
struct Tensor {
  tg_dtype dt;
  std::vector<uint8_t> raw;
  std::vector<double> v;
  Tensor() : dt(TG_F32) {}
  Tensor(tg_dtype d, size_t n) : dt(d), raw(n * dsize(d)), v(n) {}
  void set(size_t i, double x) {
    if (dt == TG_F32) {
      ((float *)raw.data())[i] = (float)x;
      v[i] = (float)x;
    } else {
      const __nv_bfloat16 h = __float2bfloat16_rn((float)x);
      ((__nv_bfloat16 *)raw.data())[i] = h;
      v[i] = __bfloat162float(h);
    }
  }
  size_t n() const { return v.size(); }
  DBuf *dev() const {
    DBuf *b = new DBuf(raw.size());
    if (!raw.empty()) CK(cudaMemcpy(b->p, raw.data(), raw.size(), cudaMemcpyHostToDevice));
    return b;
  }
};
// Normal values; grid > 0 rounds to multiples of 1 / grid (see check_case: exact pre-activations).
static Tensor randn(tg_dtype dt, size_t n, Rng &r, double scale, double grid = 0) {
  Tensor t(dt, n);
  for (size_t i = 0; i < n; ++i) {
    double x = scale * r.normal();
    if (grid > 0) x = std::max(-3.0, std::min(3.0, std::round(x * grid) / grid));
    t.set(i, x);
  }
  return t;
}
static std::vector<double> values_of(const void *raw, tg_dtype dt, size_t n) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = dt == TG_F32 ? ((const float *)raw)[i] : __bfloat162float(((const __nv_bfloat16 *)raw)[i]);
  return v;
}

// ------------------------------------------------------------------ graphs
struct HG {
  std::string name;
  int64_t nq = 0, nk = 0;
  std::vector<int64_t> rp{0};
  std::vector<int32_t> ci, row_of;
  int64_t nnz() const { return (int64_t)ci.size(); }
  void add_row(std::vector<int32_t> row) {
    std::sort(row.begin(), row.end());
    row.erase(std::unique(row.begin(), row.end()), row.end());
    ci.insert(ci.end(), row.begin(), row.end());
    rp.push_back((int64_t)ci.size());
    row_of.resize(ci.size(), (int32_t)(rp.size() - 2));
  }
};
struct DG {
  UB rp, ci, tp, tr, te;
  tgc_csr csr;
  explicit DG(const HG &g) {
    rp.reset(upload(g.rp));
    ci.reset(upload(g.ci));
    tp.reset(new DBuf((g.nk + 1) * 8));
    tr.reset(new DBuf(g.nnz() * 4));
    te.reset(new DBuf(g.nnz() * 8));
    DBuf ws(cuda_relation_transpose_workspace(g.nq, g.nk, g.nnz()));
    TG(cuda_relation_transpose(0, g.nq, g.nk, g.nnz(), (const int64_t *)rp->p, (const int32_t *)ci->p, (int64_t *)tp->p,
                               (int32_t *)tr->p, (int64_t *)te->p, ws.p, ws.bytes));
    CK(cudaDeviceSynchronize());
    csr = tgc_csr{g.nq,
                  g.nk,
                  g.nnz(),
                  (const int64_t *)rp->p,
                  (const int32_t *)ci->p,
                  (const int64_t *)tp->p,
                  (const int32_t *)tr->p,
                  (const int64_t *)te->p};
  }
};
// Random rows of degree 1 .. 2 avg (distinct sources), ~8 % empty, the first row empty; hubs:
// (row, degree) pairs whose row takes that many distinct random sources.
static HG random_graph(const char *name, int64_t nq, int64_t nk, int avg,
                       const std::vector<std::pair<int64_t, int64_t>> &hubs, uint64_t seed) {
  Rng r{seed};
  HG g;
  g.name = name;
  g.nq = nq;
  g.nk = nk;
  std::vector<int32_t> perm(nk);
  for (int64_t i = 0; i < nq; ++i) {
    std::vector<int32_t> row;
    int64_t deg = -1;
    for (auto &h : hubs)
      if (h.first == i) deg = std::min(h.second, nk);
    if (deg >= 0) {
      for (int64_t j = 0; j < nk; ++j)
        perm[j] = (int32_t)j;
      for (int64_t t = 0; t < deg; ++t)
        std::swap(perm[t], perm[t + r.below(nk - t)]);
      row.assign(perm.begin(), perm.begin() + deg);
    } else if (i != 0 && r.uni() > 0.08 && nk > 0) {
      const int64_t d = 1 + r.below(2 * avg);
      for (int64_t t = 0; t < d; ++t)
        row.push_back((int32_t)r.below(nk));
    }
    g.add_row(row);
  }
  return g;
}

// ------------------------------------------------------------------ the float64 reference
struct Cfg {
  int64_t H, F, hid;
  int dim, Fe;
  float slope;
  double keep;
};
static const uint64_t kSeed = 0x5eed1234abcdull, kCall = 41;
// The attention-dropout rule of include/tiga.h written out from its text: R = h Nq + i; block
// floor(R/2) ceil(Nk/2) + floor(j/2) of subsequence call | 2^63; word 2 (R mod 2) + (j mod 2);
// kept iff word * 2^-32 < keep; weight 1 / keep.
static double w_rule(double keep, int64_t nq, int64_t nk, int64_t h, int64_t i, int64_t j) {
  if (!(keep > 0 && keep < 1)) return 1;
  const uint64_t R = (uint64_t)(h * nq + i);
  uint32_t w[4];
  tg_philox4x32(kSeed, (R / 2) * (((uint64_t)nk + 1) / 2) + (uint64_t)j / 2, kCall | (1ull << 63), w);
  return (double)w[2 * (R % 2) + (j % 2)] * 0x1p-32 < keep ? 1.0 / keep : 0.0;
}
// Inputs as doubles; empty vectors are absent inputs (zero).
struct RefIn {
  std::vector<double> U, V, ps, pd, fe, values, wp, we, b1, w2, b2;
};
struct RefGrads {
  std::vector<double> U, V, ps, pd, fe, values, wp, we, b1, w2, b2;
};
static double at(const std::vector<double> &v, size_t i) { return v.empty() ? 0.0 : v[i]; }

// a[k] and s[h] of edge e = (j -> i), straight from the definition (cuda/edge_attention.h).
static void ref_edge(const HG &g, const Cfg &c, const RefIn &x, int64_t e, std::vector<double> &a,
                     std::vector<double> &s) {
  const int64_t i = g.row_of[e], j = g.ci[e], K = c.hid;
  a.assign(K, 0.0);
  s.assign(c.H, 0.0);
  for (int64_t k = 0; k < K; ++k) {
    double v = at(x.b1, k) + at(x.U, j * K + k) + at(x.V, i * K + k);
    for (int d = 0; d < c.dim; ++d)
      v += x.wp[d * K + k] * (x.ps[j * c.dim + d] - x.pd[i * c.dim + d]);
    for (int f = 0; f < c.Fe; ++f)
      v += x.we[f * K + k] * x.fe[e * c.Fe + f];
    a[k] = v;
  }
  for (int64_t h = 0; h < c.H; ++h) {
    double v = at(x.b2, h);
    for (int64_t k = 0; k < K; ++k)
      v += (a[k] > 0 ? a[k] : (double)c.slope * a[k]) * x.w2[k * c.H + h];
    s[h] = v;
  }
}

// out [Nq, H, F], lse [H, Nq] and the per-edge probabilities P [E, H].
static void ref_forward(const HG &g, const Cfg &c, const RefIn &x, std::vector<double> &out, std::vector<double> &lse,
                        std::vector<double> &P) {
  const int64_t E = g.nnz(), H = c.H, F = c.F;
  std::vector<double> S(E * H), a, s;
  for (int64_t e = 0; e < E; ++e) {
    ref_edge(g, c, x, e, a, s);
    for (int64_t h = 0; h < H; ++h)
      S[e * H + h] = s[h];
  }
  out.assign(g.nq * H * F, 0.0);
  lse.assign(H * g.nq, -INFINITY);
  P.assign(E * H, 0.0);
  for (int64_t i = 0; i < g.nq; ++i)
    for (int64_t h = 0; h < H; ++h) {
      if (g.rp[i] == g.rp[i + 1]) continue;
      double m = -INFINITY, l = 0;
      for (int64_t e = g.rp[i]; e < g.rp[i + 1]; ++e)
        m = std::max(m, S[e * H + h]);
      for (int64_t e = g.rp[i]; e < g.rp[i + 1]; ++e)
        l += std::exp(S[e * H + h] - m);
      const double L = m + std::log(l);
      lse[h * g.nq + i] = L;
      for (int64_t e = g.rp[i]; e < g.rp[i + 1]; ++e) {
        const int64_t j = g.ci[e];
        const double p = std::exp(S[e * H + h] - L), w = w_rule(c.keep, g.nq, g.nk, h, i, j);
        P[e * H + h] = p;
        for (int64_t f = 0; f < F; ++f)
          out[(i * H + h) * F + f] += p * w * x.values[(j * H + h) * F + f];
      }
    }
}

// Every gradient (the contributions only; the harness adds the prior), given the forward's out
// (the one the kernel saw) and P.
static RefGrads ref_backward(const HG &g, const Cfg &c, const RefIn &x, const std::vector<double> &out,
                             const std::vector<double> &P, const std::vector<double> &dout) {
  const int64_t E = g.nnz(), H = c.H, F = c.F, K = c.hid;
  RefGrads r;
  r.U.assign(g.nk * K, 0.0);
  r.V.assign(g.nq * K, 0.0);
  r.ps.assign(g.nk * c.dim, 0.0);
  r.pd.assign(g.nq * c.dim, 0.0);
  r.fe.assign(E * c.Fe, 0.0);
  r.values.assign(g.nk * H * F, 0.0);
  r.wp.assign(c.dim * K, 0.0);
  r.we.assign(c.Fe * K, 0.0);
  r.b1.assign(K, 0.0);
  r.w2.assign(K * H, 0.0);
  r.b2.assign(H, 0.0);
  std::vector<double> D(g.nq * H, 0.0), a, s, ds(H), da(K);
  for (int64_t t = 0; t < g.nq * H * F; ++t)
    D[t / F] += dout[t] * out[t];
  for (int64_t e = 0; e < E; ++e) {
    const int64_t i = g.row_of[e], j = g.ci[e];
    ref_edge(g, c, x, e, a, s);
    for (int64_t h = 0; h < H; ++h) {
      const double p = P[e * H + h], w = w_rule(c.keep, g.nq, g.nk, h, i, j);
      double dot = 0;
      for (int64_t f = 0; f < F; ++f) {
        dot += dout[(i * H + h) * F + f] * x.values[(j * H + h) * F + f];
        r.values[(j * H + h) * F + f] += p * w * dout[(i * H + h) * F + f];
      }
      ds[h] = p * (w * dot - D[i * H + h]);
      r.b2[h] += ds[h];
    }
    for (int64_t k = 0; k < K; ++k) {
      double dz = 0;
      for (int64_t h = 0; h < H; ++h)
        dz += ds[h] * x.w2[k * H + h];
      const double z = a[k] > 0 ? a[k] : (double)c.slope * a[k];
      da[k] = dz * (a[k] > 0 ? 1.0 : (double)c.slope);
      for (int64_t h = 0; h < H; ++h)
        r.w2[k * H + h] += z * ds[h];
      r.U[j * K + k] += da[k];
      r.V[i * K + k] += da[k];
      r.b1[k] += da[k];
      for (int d = 0; d < c.dim; ++d) {
        const double dd = x.wp[d * K + k] * da[k];
        r.ps[j * c.dim + d] += dd;
        r.pd[i * c.dim + d] -= dd;
        r.wp[d * K + k] += (x.ps[j * c.dim + d] - x.pd[i * c.dim + d]) * da[k];
      }
      for (int f = 0; f < c.Fe; ++f) {
        r.fe[e * c.Fe + f] += x.we[f * K + k] * da[k];
        r.we[f * K + k] += x.fe[e * c.Fe + f] * da[k];
      }
    }
  }
  return r;
}

// ------------------------------------------------------------------ check
static int g_pass = 0, g_fail = 0;
static std::vector<std::string> g_failed;
static void report(const std::string &name, bool ok, const std::string &detail) {
  if (ok) {
    ++g_pass;
    if (g_log) fprintf(g_log, "PASS %s %s\n", name.c_str(), detail.c_str());
  } else {
    ++g_fail;
    g_failed.push_back(name + " " + detail);
    say("FAIL %s %s\n", name.c_str(), detail.c_str());
  }
}
// max |got - want| / max |want| (-inf wants must match exactly; non-finite gots are bad).
struct Err {
  double num = 0, den = 0;
  int64_t bad = 0;
  void add(double got, double want) {
    if (std::isinf(want) && want < 0) {
      bad += !(std::isinf(got) && got < 0);
      return;
    }
    if (!std::isfinite(got)) {
      ++bad;
      return;
    }
    num = std::max(num, std::fabs(got - want));
    den = std::max(den, std::fabs(want));
  }
  double rel() const { return den > 0 ? num / den : num; }
};

struct Opts {
  bool U = true, V = true, b1 = true, b2 = true;
  int want = 0; // 0 every gradient, 1 dvalues only, 2 dU and dps only, 3 the weights only
};

static void check_case(const HG &g, const DG &dg, tg_dtype dt, const Cfg &c, const Opts &o, Rng &rng) {
  const int64_t E = g.nnz(), nq = g.nq, nk = g.nk, K = c.hid, H = c.H, F = c.F;
  const std::string name =
      fmt("%s %s hid=%lld H=%lld F=%lld dim=%d Fe=%d keep=%.1f U%d V%d b1%d b2%d want%d", g.name.c_str(), dname(dt),
          (long long)K, (long long)H, (long long)F, c.dim, c.Fe, c.keep, o.U, o.V, o.b1, o.b2, o.want);
  // Pre-activation inputs on the 1/64 grid with |x| <= 3: every product and sum making a[k] is
  // exact in f32 (and the inputs exact in bf16), so the kernel's a has the reference's sign and
  // LeakyReLU' agrees (a rounding difference at the kink would otherwise flip da).
  const double q = 64;
  Tensor U = randn(dt, o.U ? nk * K : 0, rng, 0.5, q), V = randn(dt, o.V ? nq * K : 0, rng, 0.5, q),
         b1 = randn(dt, o.b1 ? K : 0, rng, 0.3, q), wp = randn(dt, c.dim * K, rng, 0.5, q),
         we = randn(dt, c.Fe * K, rng, 0.3, q), fe = randn(dt, E * c.Fe, rng, 0.5, q),
         w2 = randn(dt, K * H, rng, 1.0 / std::sqrt((double)K)), b2 = randn(dt, o.b2 ? H : 0, rng, 0.5),
         vals = randn(dt, nk * H * F, rng, 1.0);
  std::vector<float> ps(nk * c.dim), pd(nq * c.dim);
  for (auto &v : ps)
    v = (float)(std::round(rng.uni() * 2 * q) / q);
  for (auto &v : pd)
    v = (float)(std::round(rng.uni() * 2 * q) / q);
  RefIn x{U.v, V.v, {}, {}, fe.v, vals.v, wp.v, we.v, b1.v, w2.v, b2.v};
  x.ps.assign(ps.begin(), ps.end());
  x.pd.assign(pd.begin(), pd.end());
  std::vector<double> rout, rlse, P;
  ref_forward(g, c, x, rout, rlse, P);

  UB dU(U.dev()), dV(V.dev()), db1(b1.dev()), dwp(wp.dev()), dwe(we.dev()), dfe(fe.dev()), dw2(w2.dev()), db2(b2.dev()),
      dvals(vals.dev()), dps(upload(ps)), dpd(upload(pd));
  const tgc_edge_attn a{H,     F, K, c.dim,   c.Fe,    dt,      c.slope, c.keep, kSeed,
                        kCall, 0, 0, nullptr, nullptr, nullptr, nullptr, 0};
  const tgc_edge_inputs in{o.U ? dU->p : nullptr,
                           o.V ? dV->p : nullptr,
                           c.dim ? (const float *)dps->p : nullptr,
                           c.dim ? (const float *)dpd->p : nullptr,
                           c.Fe ? dfe->p : nullptr,
                           dvals->p,
                           c.dim ? dwp->p : nullptr,
                           c.Fe ? dwe->p : nullptr,
                           o.b1 ? db1->p : nullptr,
                           dw2->p,
                           o.b2 ? db2->p : nullptr};
  UB out(new DBuf(nq * H * F * dsize(dt))), lse(new DBuf(H * nq * 4)), out2(new DBuf(out->bytes)),
      lse2(new DBuf(lse->bytes));
  out->poison();
  lse->poison();
  TG(cuda_edge_attention_forward(0, &dg.csr, &a, &in, out->p, (float *)lse->p));
  TG(cuda_edge_attention_forward(0, &dg.csr, &a, &in, out2->p, (float *)lse2->p));
  const double tol = dt == TG_F32 ? 1e-4 : 1.5e-2;
  const std::vector<uint8_t> oraw = out->raw(), lraw = lse->raw();
  const std::vector<double> kout = values_of(oraw.data(), dt, rout.size());
  {
    Err eo, el;
    for (size_t t = 0; t < rout.size(); ++t)
      eo.add(kout[t], rout[t]);
    const std::vector<double> kl = values_of(lraw.data(), TG_F32, rlse.size());
    for (size_t t = 0; t < rlse.size(); ++t)
      el.add(kl[t], rlse[t]);
    const bool same = oraw == out2->raw() && lraw == lse2->raw();
    report(name + " fwd", !eo.bad && !el.bad && eo.rel() <= tol && el.rel() <= tol && same,
           fmt("out=%.1e lse=%.1e%s%s", eo.rel(), el.rel(), eo.bad + el.bad ? " NONFINITE" : "",
               same ? "" : " NONDETERMINISTIC"));
  }

  Tensor dout = randn(dt, nq * H * F, rng, 1.0);
  UB ddout(dout.dev());
  const RefGrads rg = ref_backward(g, c, x, kout, P, dout.v);
  // Which gradients are asked for (absent inputs have none).
  struct G {
    const char *n;
    bool want;
    tg_dtype dt;
    const std::vector<double> *ref;
  };
  const bool all = o.want == 0, wts = o.want == 3;
  std::vector<G> gs = {{"dU", o.U && (all || o.want == 2), dt, &rg.U},
                       {"dV", o.V && all, dt, &rg.V},
                       {"dps", c.dim > 0 && (all || o.want == 2), TG_F32, &rg.ps},
                       {"dpd", c.dim > 0 && all, TG_F32, &rg.pd},
                       {"dfe", c.Fe > 0 && all, dt, &rg.fe},
                       {"dvalues", all || o.want == 1, dt, &rg.values},
                       {"dwp", c.dim > 0 && (all || wts), dt, &rg.wp},
                       {"dwe", c.Fe > 0 && (all || wts), dt, &rg.we},
                       {"db1", o.b1 && (all || wts), dt, &rg.b1},
                       {"dw2", all || wts, dt, &rg.w2},
                       {"db2", o.b2 && (all || wts), dt, &rg.b2}};
  // Priors: nonzero, about the size of the gradient; two identical sets of buffers.
  std::vector<Tensor> prior;
  std::vector<UB> A, B;
  // db2 = sum_e ds[e, h] is 0 up to rounding (the softmax is shift invariant per row): its prior and
  // its error take the scale of dw2, whose terms are the same ds weighted by z.
  auto ref_of = [&](const G &q_) { return std::string(q_.n) == "db2" ? &rg.w2 : q_.ref; };
  for (const G &q_ : gs) {
    double s = 0;
    for (double v : *ref_of(q_))
      s += v * v;
    const double rms = ref_of(q_)->empty() ? 1 : std::sqrt(s / (double)ref_of(q_)->size());
    prior.push_back(randn(q_.dt, q_.want ? q_.ref->size() : 0, rng, rms > 0 ? rms : 1));
    A.emplace_back(prior.back().dev());
    B.emplace_back(prior.back().dev());
  }
  auto grads = [&](std::vector<UB> &bufs) {
    auto p = [&](int t) -> void * { return gs[t].want ? bufs[t]->p : nullptr; };
    return tgc_edge_grads{p(0), p(1), (float *)p(2), (float *)p(3), p(4), p(5), p(6), p(7), p(8), p(9), p(10), 0, 0};
  };
  const tgc_edge_grads ga = grads(A), gb = grads(B);
  UB ws(new DBuf(cuda_edge_attention_backward_workspace(&dg.csr, &a)));
  TG(cuda_edge_attention_backward(0, &dg.csr, &a, &in, out->p, ddout->p, (const float *)lse->p, &ga, ws->p, ws->bytes));
  TG(cuda_edge_attention_backward(0, &dg.csr, &a, &in, out->p, ddout->p, (const float *)lse->p, &gb, ws->p, ws->bytes));
  bool ok = true;
  std::string detail;
  for (size_t t = 0; t < gs.size(); ++t) {
    if (!gs[t].want) continue;
    const std::vector<uint8_t> ra = A[t]->raw(), rb = B[t]->raw();
    const std::vector<double> got = values_of(ra.data(), gs[t].dt, gs[t].ref->size());
    Err er;
    for (size_t u = 0; u < got.size(); ++u)
      er.add(got[u], prior[t].v[u] + (*gs[t].ref)[u]);
    if (std::string(gs[t].n) == "db2")
      for (double v : rg.w2)
        er.den = std::max(er.den, std::fabs(v));
    const bool same = ra == rb, good = !er.bad && er.rel() <= tol && same;
    ok = ok && good;
    detail += fmt("%s=%.1e%s%s ", gs[t].n, er.rel(), er.bad ? "(NONFINITE)" : "", same ? "" : "(NONDETERMINISTIC)");
  }
  report(name + " bwd", ok, detail);
}

static HG empty_graph(const char *name, int64_t nq, int64_t nk) {
  HG g;
  g.name = name;
  g.nq = nq;
  g.nk = nk;
  for (int64_t i = 0; i < nq; ++i)
    g.add_row({});
  return g;
}

static void check_unsupported() {
  const tgc_edge_attn good{4, 16, 64, 3, 0, TG_F32, 0.2f, 1.0, 0, 0, 0, 0, nullptr, nullptr, nullptr, nullptr, 0};
  bool ok = cuda_edge_attention_unsupported(&good) == nullptr;
  tgc_edge_attn b = good;
  b.hid = 48;
  ok = ok && cuda_edge_attention_unsupported(&b);
  b = good;
  b.H = 9;
  ok = ok && cuda_edge_attention_unsupported(&b);
  b = good;
  b.F = 129;
  ok = ok && cuda_edge_attention_unsupported(&b);
  b = good;
  b.dim = 4;
  ok = ok && cuda_edge_attention_unsupported(&b);
  b = good;
  b.Fe = 17;
  ok = ok && cuda_edge_attention_unsupported(&b);
  b = good;
  b.dtype = TG_F16;
  ok = ok && cuda_edge_attention_unsupported(&b);
  HG g = random_graph("tiny", 3, 3, 2, {}, 5);
  DG dg(g);
  b = good;
  b.hid = 48;
  const tgc_edge_inputs in{};
  ok = ok && cuda_edge_attention_forward(0, &dg.csr, &b, &in, nullptr, nullptr) == TG_ERR_UNSUPPORTED;
  report("unsupported sizes are refused", ok, "");
}

static int run_check() {
  Rng rng{2026};
  check_unsupported();
  // Nq 37 / Nk 41: row 0 empty, row 5 takes every source, random rows elsewhere.
  const HG small = random_graph("small37x41", 37, 41, 4, {{5, 41}}, 11);
  const DG dsmall(small);
  const int64_t Hs[] = {1, 3, 8}, Fs[] = {1, 7, 128, 8, 16, 2, 5};
  const int Fes[] = {0, 5, 16};
  int n = 0;
  for (int64_t hid : {16, 32, 64, 128})
    for (tg_dtype dt : {TG_F32, TG_BF16})
      for (int v = 0; v < 7; ++v, ++n) {
        Cfg c{Hs[v % 3], Fs[v], hid, v % 4, Fes[(v + n) % 3], 0.2f, v % 2 ? 0.6 : 1.0};
        Opts o;
        if (v == 1) o.U = o.V = o.b1 = o.b2 = false;
        if (v >= 2) {
          o.U = rng.uni() < 0.8;
          o.V = rng.uni() < 0.8;
          o.b1 = rng.uni() < 0.7;
          o.b2 = rng.uni() < 0.7;
        }
        if (v == 4) o.want = 1 + (n % 3);
        check_case(small, dsmall, dt, c, o, rng);
      }
  // Gradient subsets on every hidden width.
  for (int w = 1; w <= 3; ++w)
    check_case(small, dsmall, TG_F32, Cfg{3, 7, 16 << (w - 1), 3, 5, 0.2f, 0.6}, Opts{true, true, true, true, w}, rng);
  // > 8192 rows: destination-pass warps walk several rows; several partial sets.
  const HG mid = random_graph("mid9001x7919", 9001, 7919, 3, {{17, 3000}}, 12);
  const DG dmid(mid);
  check_case(mid, dmid, TG_F32, Cfg{4, 2, 16, 3, 0, 0.2f, 1.0}, Opts{}, rng);
  check_case(mid, dmid, TG_BF16, Cfg{1, 64, 64, 3, 5, 0.1f, 0.6}, Opts{}, rng);
  // A 20000-edge hub row.
  const HG hub = random_graph("hub5x20011", 5, 20011, 3, {{2, 20000}}, 13);
  const DG dhub(hub);
  check_case(hub, dhub, TG_F32, Cfg{4, 16, 64, 3, 5, 0.2f, 0.6}, Opts{}, rng);
  check_case(hub, dhub, TG_BF16, Cfg{1, 8, 16, 3, 0, 0.2f, 1.0}, Opts{}, rng);
  // Empty graphs: out 0, lse -inf, gradients untouched.
  const HG e1 = empty_graph("empty5x3", 5, 3), e2 = empty_graph("empty0x4", 0, 4);
  const DG de1(e1), de2(e2);
  check_case(e1, de1, TG_F32, Cfg{2, 3, 16, 3, 5, 0.2f, 0.6}, Opts{}, rng);
  check_case(e2, de2, TG_BF16, Cfg{2, 3, 32, 1, 0, 0.2f, 1.0}, Opts{}, rng);
  say("edge_attention check: %d/%d passed\n", g_pass, g_pass + g_fail);
  return g_fail ? 1 : 0;
}

// ------------------------------------------------------------------ bench
// Radius graph of n uniform points in the unit cube (neighbours closer than rc, no self loops),
// by a cell list of side >= rc; sources ascending per row. Unless shuffled, the points are
// numbered cell by cell (a spatially sorted cloud, as a cell-list builder leaves them).
static HG radius_graph(int64_t n, double rc, bool shuffled, uint64_t seed) {
  Rng r{seed};
  const int gd = std::max(1, (int)(1.0 / rc));
  auto cof = [&](float x) { return std::min(gd - 1, (int)(x * gd)); };
  std::vector<float> pos(n * 3);
  for (auto &x : pos)
    x = (float)r.uni();
  auto cell_of = [&](int64_t i) {
    return ((int64_t)cof(pos[3 * i]) * gd + cof(pos[3 * i + 1])) * gd + cof(pos[3 * i + 2]);
  };
  if (!shuffled) {
    std::vector<int64_t> idx(n);
    for (int64_t i = 0; i < n; ++i)
      idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return cell_of(a) < cell_of(b); });
    std::vector<float> p2(n * 3);
    for (int64_t i = 0; i < n; ++i)
      for (int d = 0; d < 3; ++d)
        p2[3 * i + d] = pos[3 * idx[i] + d];
    pos.swap(p2);
  }
  std::vector<std::vector<int32_t>> cell((size_t)gd * gd * gd);
  for (int64_t i = 0; i < n; ++i)
    cell[cell_of(i)].push_back((int32_t)i);
  HG g;
  g.name = fmt("radius%lldk", (long long)(n / 1000));
  g.nq = g.nk = n;
  std::vector<int32_t> row;
  for (int64_t i = 0; i < n; ++i) {
    row.clear();
    const int cx = cof(pos[3 * i]), cy = cof(pos[3 * i + 1]), cz = cof(pos[3 * i + 2]);
    for (int a = std::max(0, cx - 1); a <= std::min(gd - 1, cx + 1); ++a)
      for (int b = std::max(0, cy - 1); b <= std::min(gd - 1, cy + 1); ++b)
        for (int c = std::max(0, cz - 1); c <= std::min(gd - 1, cz + 1); ++c)
          for (int32_t j : cell[((size_t)a * gd + b) * gd + c]) {
            const double dx = pos[3 * i] - pos[3 * j], dy = pos[3 * i + 1] - pos[3 * j + 1],
                         dz = pos[3 * i + 2] - pos[3 * j + 2];
            if (j != i && dx * dx + dy * dy + dz * dz < rc * rc) row.push_back(j);
          }
    g.add_row(row);
  }
  return g;
}

__global__ void k_fill(void *p, size_t n, int bf, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint64_t z = (seed ^ (i * 0x9E3779B97F4A7C15ull)) + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float v = scale * ((float)(z >> 40) * 0x1p-24f * 2.f - 1.f);
    if (bf)
      ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
    else
      ((float *)p)[i] = v;
  }
}
static DBuf *filled(size_t n, size_t es, uint64_t seed, float scale) {
  DBuf *b = new DBuf(n * es);
  k_fill<<<1024, 256>>>(b->p, n, es == 2, seed, scale);
  CK(cudaGetLastError());
  return b;
}

static double time_ms(const std::function<void()> &f, int reps = 25) {
  for (int i = 0; i < 3; ++i)
    f();
  CK(cudaDeviceSynchronize());
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int r = 0; r < reps; ++r) {
    CK(cudaEventRecord(a));
    f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float t;
    CK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

namespace tgea {
extern int g_kernels; // cuda/edge_attention.cuh: 0 by hidden width, 1 warp per row, 2 packed
extern int g_rows;    // packed kernels' rows per warp chunk (0: by size)
} // namespace tgea
static const char *g_only = nullptr;
static bool g_compare = false;

struct BRow {
  std::string cfg;
  double fwd, bwd, both, gflop_both, gb_fwd, gb_bwd;
};
static std::vector<BRow> g_rows;

// FLOPs (naive per-edge MLP on the concatenated input [x_src, x_dst, dpos, fe] of Din = 2 f_in +
// dim + Fe): forward 2 E (Din hid + hid H) for the scores + 2 E H F for the aggregation; backward
// counted as 2x the forward. Bytes: every tensor read or written once (the compulsory traffic).
static void bench_cfg(const HG &g, const DG &dg, tg_dtype dt, int64_t hid, int64_t fin, int64_t H) {
  const int64_t N = g.nq, E = g.nnz(), F = fin / H, es = (int64_t)dsize(dt);
  const int dim = 3, Fe = 0;
  const tgc_edge_attn a{H, F, hid, dim, Fe, dt, 0.2f, 1.0, kSeed, kCall, 0, 0, nullptr, nullptr, nullptr, nullptr, 0};
  UB U(filled(N * hid, es, 1, 1.f)), V(filled(N * hid, es, 2, 1.f)), vals(filled(N * H * F, es, 3, 1.f)),
      ps(filled(N * dim, 4, 4, 1.f)), pd(filled(N * dim, 4, 5, 1.f)), wp(filled(dim * hid, es, 6, 0.5f)),
      b1(filled(hid, es, 7, 0.5f)), w2(filled(hid * H, es, 8, 0.3f)), b2(filled(H, es, 9, 0.1f)),
      out(new DBuf(N * H * F * es)), lse(new DBuf(H * N * 4)), dout(filled(N * H * F, es, 10, 1.f)),
      gU(filled(N * hid, es, 11, 0.f)), gV(filled(N * hid, es, 12, 0.f)), gps(filled(N * dim, 4, 13, 0.f)),
      gpd(filled(N * dim, 4, 14, 0.f)), gvals(filled(N * H * F, es, 15, 0.f)), gwp(filled(dim * hid, es, 16, 0.f)),
      gb1(filled(hid, es, 17, 0.f)), gw2(filled(hid * H, es, 18, 0.f)), gb2(filled(H, es, 19, 0.f)),
      ws(new DBuf(cuda_edge_attention_backward_workspace(&dg.csr, &a)));
  const tgc_edge_inputs in{
      U->p, V->p, (const float *)ps->p, (const float *)pd->p, nullptr, vals->p, wp->p, nullptr, b1->p, w2->p, b2->p};
  const tgc_edge_grads gr{gU->p,   gV->p,  (float *)gps->p, (float *)gpd->p, nullptr, gvals->p, gwp->p,
                          nullptr, gb1->p, gw2->p,          gb2->p,          0,       0};
  const std::string cfg =
      fmt("%s hid=%lld f_in=%lld H=%lld %s", g.name.c_str(), (long long)hid, (long long)fin, (long long)H, dname(dt));
  if (g_only && !strstr(cfg.c_str(), g_only)) return;
  auto fwd = [&] { TG(cuda_edge_attention_forward(0, &dg.csr, &a, &in, out->p, (float *)lse->p)); };
  auto bwd = [&] {
    TG(cuda_edge_attention_backward(0, &dg.csr, &a, &in, out->p, dout->p, (const float *)lse->p, &gr, ws->p,
                                    ws->bytes));
  };
  const int k_saved = tgea::g_kernels;
  for (int ver = g_compare ? 1 : k_saved; ver <= (g_compare ? 2 : k_saved); ++ver) {
    tgea::g_kernels = ver;
    const std::string name = g_compare ? cfg + (ver == 1 ? " old" : " new") : cfg;
    const double tf = time_ms(fwd), tb = time_ms(bwd), tt = time_ms([&] {
                                                         fwd();
                                                         bwd();
                                                       });
    const double din = 2.0 * fin + dim + Fe;
    const double flop_f = 2.0 * E * (din * hid + hid * H) + 2.0 * E * H * F;
    const double node_in = N * (2.0 * hid + H * F) * es + N * 2.0 * dim * 4;
    const double bytes_f = node_in + (N + 1) * 8.0 + E * 4.0 + N * H * F * es + N * H * 4.0;
    const double bytes_b = node_in + (N + 1) * 16.0 + E * 16.0 + 2 * N * H * F * es + N * H * 4.0 +
                           2 * (N * (2.0 * hid + H * F) * es + N * 2.0 * dim * 4);
    g_rows.push_back({name, tf, tb, tt, 3 * flop_f / tt / 1e6, bytes_f / tf / 1e6, bytes_b / tb / 1e6});
    say("RESULT %s fwd_ms=%.3f bwd_ms=%.3f fwdbwd_ms=%.3f\n", name.c_str(), tf, tb, tt);
  }
  tgea::g_kernels = k_saved;
}

static void run_bench(bool shuffled) {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  say("# device %s, %d SMs, L2 %d MB; points %s\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20,
      shuffled ? "in random order" : "sorted by grid cell");
  const std::pair<int64_t, double> sizes[] = {{100000, 0.035}, {400000, 0.022}};
  for (const auto &sz : sizes) {
    const HG g = radius_graph(sz.first, sz.second, shuffled, 7);
    int64_t maxdeg = 0;
    for (int64_t i = 0; i < g.nq; ++i)
      maxdeg = std::max(maxdeg, g.rp[i + 1] - g.rp[i]);
    say("# graph %s: n %lld nnz %lld avg degree %.2f max %lld\n", g.name.c_str(), (long long)g.nq, (long long)g.nnz(),
        (double)g.nnz() / (double)g.nq, (long long)maxdeg);
    const DG dg(g);
    for (auto hf : {std::pair<int64_t, int64_t>{16, 8}, {64, 64}})
      for (int64_t H : {1, 4})
        for (tg_dtype dt : {TG_F32, TG_BF16})
          bench_cfg(g, dg, dt, hf.first, hf.second, H);
  }
  say("\n%-40s %8s %8s %9s %9s %9s %9s\n", "config (dim 3, Fe 0, keep 1)", "fwd ms", "bwd ms", "f+b ms", "GFLOP/s",
      "fwd GB/s", "bwd GB/s");
  for (const BRow &r : g_rows)
    say("%-40s %8.3f %8.3f %9.3f %9.0f %9.0f %9.0f\n", r.cfg.c_str(), r.fwd, r.bwd, r.both, r.gflop_both, r.gb_fwd,
        r.gb_bwd);
  say("targets f+b: hid 16: 0.25 ms (100k), 0.6 ms (400k); hid 64: 1.2 ms (100k), 5 ms (400k)\n");
}

// ------------------------------------------------------------------ reference self-test (host only)
// ref_backward against central differences of L = <dout, out(inputs)> through ref_forward, on a
// small graph with continuous inputs (no GPU needed): checks the reference itself.
static int run_ref_selftest() {
  Rng rng{77};
  const HG g = random_graph("st9x7", 9, 7, 3, {{4, 7}}, 3);
  int bad = 0;
  for (double keep : {1.0, 0.6}) {
    const Cfg c{3, 2, 16, 2, 3, 0.2f, keep};
    const int64_t E = g.nnz(), K = c.hid, H = c.H, F = c.F;
    auto rv = [&](size_t n, double sc) {
      std::vector<double> v(n);
      for (auto &x : v)
        x = sc * rng.normal();
      return v;
    };
    RefIn x{rv(g.nk * K, 0.5), rv(g.nq * K, 0.5),   rv(g.nk * c.dim, 1), rv(g.nq * c.dim, 1),
            rv(E * c.Fe, 0.5), rv(g.nk * H * F, 1), rv(c.dim * K, 0.5),  rv(c.Fe * K, 0.3),
            rv(K, 0.3),        rv(K * H, 0.3),      rv(H, 0.5)};
    const std::vector<double> dout = rv(g.nq * H * F, 1);
    std::vector<double> out, lse, P;
    ref_forward(g, c, x, out, lse, P);
    RefGrads r = ref_backward(g, c, x, out, P, dout);
    auto L = [&]() {
      std::vector<double> o, l, p;
      ref_forward(g, c, x, o, l, p);
      double s = 0;
      for (size_t t = 0; t < o.size(); ++t)
        s += o[t] * dout[t];
      return s;
    };
    std::vector<std::pair<const char *, std::pair<std::vector<double> *, std::vector<double> *>>> ts = {
        {"U", {&x.U, &r.U}},    {"V", {&x.V, &r.V}},    {"ps", {&x.ps, &r.ps}},
        {"pd", {&x.pd, &r.pd}}, {"fe", {&x.fe, &r.fe}}, {"values", {&x.values, &r.values}},
        {"wp", {&x.wp, &r.wp}}, {"we", {&x.we, &r.we}}, {"b1", {&x.b1, &r.b1}},
        {"w2", {&x.w2, &r.w2}}, {"b2", {&x.b2, &r.b2}}};
    for (auto &t : ts) {
      std::vector<double> &in = *t.second.first, &gr = *t.second.second;
      double num = 0, den = 0;
      for (size_t u = 0; u < in.size(); ++u) {
        const double x0 = in[u], h = 1e-6;
        in[u] = x0 + h;
        const double lp = L();
        in[u] = x0 - h;
        const double lm = L();
        in[u] = x0;
        num = std::max(num, std::fabs((lp - lm) / (2 * h) - gr[u]));
        den = std::max(den, std::fabs(gr[u]));
      }
      const bool ok = num <= 1e-6 * std::max(1.0, den);
      bad += !ok;
      say("%s ref self-test keep=%.1f d%-6s max err %.2e (max |grad| %.2e)\n", ok ? "PASS" : "FAIL", keep, t.first, num,
          den);
    }
  }
  for (const auto &sz : {std::pair<int64_t, double>{100000, 0.035}, {400000, 0.022}}) {
    const HG g = radius_graph(sz.first, sz.second, false, 7);
    say("# graph %s: n %lld nnz %lld avg degree %.2f\n", g.name.c_str(), (long long)g.nq, (long long)g.nnz(),
        (double)g.nnz() / (double)g.nq);
  }
  return bad ? 1 : 0;
}

int main(int argc, char **argv) {
  bool check = false, bench = false, shuffled = false, selftest = false;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--check"))
      check = true;
    else if (!strcmp(argv[i], "--bench"))
      bench = true;
    else if (!strcmp(argv[i], "--shuffled"))
      shuffled = true;
    else if (!strcmp(argv[i], "--ref-selftest"))
      selftest = true;
    else if (!strcmp(argv[i], "--only") && i + 1 < argc)
      g_only = argv[++i];
    else if (!strcmp(argv[i], "--compare"))
      g_compare = true;
    else {
      fprintf(stderr, "usage: %s [--check] [--bench [--shuffled] [--only SUBSTR] [--compare]] [--ref-selftest]\n",
              argv[0]);
      return 2;
    }
  }
  if (selftest) return run_ref_selftest();
  if (const char *k = getenv("TIGA_EA_KERNEL")) tgea::g_kernels = !strcmp(k, "old") ? 1 : !strcmp(k, "new") ? 2 : 0;
  if (const char *k = getenv("TIGA_EA_ROWS")) tgea::g_rows = atoi(k);
  if (!check && !bench) check = true;
  if (const char *o = getenv("OUT")) {
    const std::string path = std::string(o) + "/bench_edge_attention.log";
    g_log = fopen(path.c_str(), "a");
  }
  int rc = 0;
  if (check) rc = run_check();
  if (bench) run_bench(shuffled);
  if (g_log) fclose(g_log);
  return rc;
}
