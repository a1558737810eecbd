// Standalone check and benchmark of the CSR attention kernels (cuda/attention_csr.h).
//   bench_attention_csr --check [substring]  random graphs vs a float64 CPU reference (PASS/FAIL per
//                                            case, exit 1 on any FAIL)
//   bench_attention_csr --bench              radius graphs (ANCHORS), the target configs, a hub test;
//                                            the random-order graphs also with schedules (BFS and
//                                            Morton from the positions; attention_csr.h)
//   bench_attention_csr --graph FILE         the target configs on a CSR file: int64 n, int64 nnz,
//                                            float32 pos[n*3], int64 row_ptr[n+1], int32 col_idx[nnz];
//                                            and the schedules (Morton from the file's positions)
// A long log goes to $OUT/bench_attention_csr.log when OUT is set; the last lines are a short table.
// Graphs and the float64 reference: bench/attention_csr_ref.h.
#include <algorithm>
#include <chrono>
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

#include "cuda/attention_csr.h"
#include "bench/attention_csr_ref.h"

// The library's device.cu provides these; the bench links only the CSR attention files.
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

static FILE *g_log = nullptr; // long log ($OUT), besides stdout
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
  fflush(stdout);
}

#define CK(x)                                                                                                          \
  do {                                                                                                                 \
    cudaError_t e_ = (x);                                                                                              \
    if (e_ != cudaSuccess) {                                                                                           \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                               \
      exit(2);                                                                                                         \
    }                                                                                                                  \
  } while (0)

struct DBuf {
  char *p = nullptr;
  size_t n = 0;
  explicit DBuf(size_t bytes) : n(bytes) { CK(cudaMalloc((void **)&p, bytes ? bytes : 16)); }
  ~DBuf() { cudaFree(p); }
  DBuf(const DBuf &) = delete;
  DBuf &operator=(const DBuf &) = delete;
};

// ------------------------------------------------------------------ check
struct Case {
  std::string name;
  tg_dtype dt;
  int B, Hq, Hkv, D, Dv;
  double keep;
  GKind kind;
  int64_t nq, nk;
  int64_t chunk; // cuda_attention_csr_set_chunk (0: automatic)
  bool bwd, misalign;
};

struct Dev { // device copies of a graph
  DBuf rp, col, tp, tr, te;
  explicit Dev(const Graph &g)
      : rp(g.rp.size() * 8), col(g.col.size() * 4), tp(g.tp.size() * 8), tr(g.tr.size() * 4), te(g.te.size() * 8) {
    put(rp, g.rp.data(), g.rp.size() * 8), put(col, g.col.data(), g.col.size() * 4);
    put(tp, g.tp.data(), g.tp.size() * 8), put(tr, g.tr.data(), g.tr.size() * 4), put(te, g.te.data(), g.te.size() * 8);
  }
  static void put(DBuf &d, const void *h, size_t n) {
    if (n) CK(cudaMemcpy(d.p, h, n, cudaMemcpyHostToDevice));
  }
  tgc_csr csr(const Graph &g) const {
    return tgc_csr{g.nq,
                   g.nk,
                   g.nnz(),
                   (const int64_t *)rp.p,
                   (const int32_t *)col.p,
                   (const int64_t *)tp.p,
                   (const int32_t *)tr.p,
                   (const int64_t *)te.p};
  }
};

// Random values rounded to dt: raw bytes (for the device) and the rounded floats (for the reference).
static void fill(Rng &r, tg_dtype dt, size_t n, double mag, std::vector<char> &raw, std::vector<float> &f) {
  raw.assign(n * dsize(dt), 0);
  f.resize(n);
  for (size_t i = 0; i < n; ++i)
    f[i] = store(dt, raw.data(), i, (float)(mag * r.normal()));
}
// A device buffer of n elements of dt, displaced by one element when misaligned (16-byte access off).
struct Arr {
  DBuf buf;
  char *p;
  size_t bytes;
  Arr(size_t n, tg_dtype dt, bool mis)
      : buf(n * dsize(dt) + 16), p(buf.p + (mis ? dsize(dt) : 0)), bytes(n * dsize(dt)) {}
  void put(const std::vector<char> &h) { CK(cudaMemcpy(p, h.data(), bytes, cudaMemcpyHostToDevice)); }
  std::vector<char> get() const {
    std::vector<char> h(bytes);
    CK(cudaMemcpy(h.data(), p, bytes, cudaMemcpyDeviceToHost));
    return h;
  }
  void poison() { CK(cudaMemset(p, 0xFF, bytes)); } // NaN in f32, f16 and bf16
};

static const char *run_status(tg_status s) { return s == TG_OK ? "" : tgc_error(); }

// Schedules of g: its locality order (cuda_attention_csr_order_host with this leaf: 0 plain BFS,
// else bisected), or a random permutation of the rows and one of the sources. why: set when the
// locality order is not a permutation.
struct Sched {
  std::vector<int32_t> rows, srcs;
};
static bool is_perm(const std::vector<int32_t> &p, int64_t n) {
  std::vector<char> seen(n, 0);
  if ((int64_t)p.size() != n) return false;
  for (int32_t x : p) {
    if (x < 0 || x >= n || seen[x]) return false;
    seen[x] = 1;
  }
  return true;
}
static Sched graph_sched(const Graph &g, int64_t leaf, std::string &why) {
  const bool sq = g.nq == g.nk;
  std::vector<int32_t> o(g.nq + (sq ? 0 : g.nk), -7);
  Sched r;
  if (cuda_attention_csr_order_host(g.nq, g.nk, g.rp.data(), g.col.data(), leaf, o.data()) != TG_OK) {
    why += std::string(" graph-order: ") + tgc_error();
    return r;
  }
  r.rows.assign(o.begin(), o.begin() + g.nq);
  r.srcs = sq ? r.rows : std::vector<int32_t>(o.begin() + g.nq, o.end());
  if (!is_perm(r.rows, g.nq) || !is_perm(r.srcs, g.nk))
    why += " graph-order-leaf" + std::to_string(leaf) + "-not-a-permutation";
  return r;
}
static Sched random_sched(Rng &r, const Graph &g) {
  Sched s;
  for (auto [v, n] : {std::pair<std::vector<int32_t> *, int64_t>{&s.rows, g.nq}, {&s.srcs, g.nk}}) {
    v->resize(n);
    for (int64_t x = 0; x < n; ++x)
      (*v)[x] = (int32_t)x;
    for (int64_t x = n - 1; x > 0; --x)
      std::swap((*v)[x], (*v)[r.below(x + 1)]);
  }
  return s;
}
struct DSched { // device copy
  DBuf rows, srcs;
  explicit DSched(const Sched &s) : rows(s.rows.size() * 4), srcs(s.srcs.size() * 4) {
    if (!s.rows.empty()) CK(cudaMemcpy(rows.p, s.rows.data(), rows.n, cudaMemcpyHostToDevice));
    if (!s.srcs.empty()) CK(cudaMemcpy(srcs.p, s.srcs.data(), srcs.n, cudaMemcpyHostToDevice));
  }
  const int32_t *r() const { return (const int32_t *)rows.p; }
  const int32_t *s() const { return (const int32_t *)srcs.p; }
};

// Runs one case; returns true when it passes. Prints one PASS/FAIL line.
static bool run_case(const Case &c, uint64_t seed) {
  Rng r{seed};
  Graph g = c.kind == G_RANDOM  ? random_graph(r, c.nq, c.nk, 24, 3000)
            : c.kind == G_EMPTY ? pattern_graph(G_EMPTY, c.nq, c.nk)
                                : pattern_graph(c.kind, c.nq, c.nk);
  Dev dg(g);
  const tgc_csr csr = dg.csr(g);
  const tg_dtype dt = c.dt;
  const double tol = dt == TG_F32 ? 1e-5 : 1e-2;
  Prob P{c.B, c.nq, c.nk, c.Hq, c.Hkv, c.D, c.Dv, 1.0 / std::sqrt((double)c.D), c.keep, 0x5EEDull + seed, 7 + seed};
  const size_t nq = P.B * P.Nq * P.Hq, nk = P.B * P.Nk * P.Hkv;
  std::vector<char> hq, hk, hv, hdo, hg0q, hg0k, hg0v;
  std::vector<float> fq, fk, fv, fdo, f0q, f0k, f0v;
  fill(r, dt, nq * c.D, 1.0, hq, fq);
  fill(r, dt, nk * c.D, 1.0, hk, fk);
  fill(r, dt, nk * c.Dv, 1.0, hv, fv);
  fill(r, dt, nq * c.Dv, 1.0, hdo, fdo);
  const double gmag = dt == TG_F32 ? 1.0 : 0.01; // prior gradient contents: += must keep them
  fill(r, dt, nq * c.D, gmag, hg0q, f0q);
  fill(r, dt, nk * c.D, gmag, hg0k, f0k);
  fill(r, dt, nk * c.Dv, gmag, hg0v, f0v);
  std::vector<double> ro, rl, rdq, rdk, rdv;
  reference(P, c.kind, g, fq, fk, fv, fdo, ro, rl, rdq, rdk, rdv);

  cuda_attention_csr_set_chunk(c.chunk);
  tgc_csr_attn_shape sh{P.B, P.Nq, P.Nk, P.Hq, P.Hkv, P.D, P.Dv, dt, (float)P.scale, P.keep, P.seed, P.call};
  Arr q(nq * c.D, dt, c.misalign), k(nk * c.D, dt, false), v(nk * c.Dv, dt, false), dout(nq * c.Dv, dt, false);
  Arr out(nq * c.Dv, dt, false), dq(nq * c.D, dt, c.misalign), dk(nk * c.D, dt, false), dv(nk * c.Dv, dt, false);
  DBuf lse(P.B * P.Hq * P.Nq * 4 + 16);
  q.put(hq), k.put(hk), v.put(hv), dout.put(hdo);
  const size_t wf = cuda_attention_csr_forward_workspace(&sh, &csr);
  const size_t wb = c.bwd ? cuda_attention_csr_backward_workspace(&sh, &csr) : 0;
  DBuf ws(std::max(wf, wb));
  std::string why;
  char buf[512];
  // Schedules: the graph's bisected order (small leaves: deep bisection; the plain BFS order is
  // checked to be a permutation too) and a random one; every run with one must give the same bits.
  const Sched sb = graph_sched(g, 8, why), sr = random_sched(r, g);
  (void)graph_sched(g, 0, why);
  const DSched db(sb), dr(sr);
  const DSched *scheds[2] = {&db, &dr};
  const char *sname[2] = {"graph", "random"};
  auto forward_with = [&](std::vector<char> &o, std::vector<float> &l, const int32_t *rord) {
    out.poison();
    CK(cudaMemset(lse.p, 0xFF, lse.n));
    CK(cudaMemset(ws.p, 0xFF, ws.n));
    tg_status s = cuda_attention_csr_forward(nullptr, &sh, &csr, rord, q.p, k.p, v.p, out.p, (float *)lse.p, ws.p, wf);
    CK(cudaDeviceSynchronize());
    if (s != TG_OK) why += std::string(" forward: ") + run_status(s);
    o = out.get();
    l.resize(P.B * P.Hq * P.Nq);
    CK(cudaMemcpy(l.data(), lse.p, l.size() * 4, cudaMemcpyDeviceToHost));
  };
  std::vector<char> o1, o2;
  std::vector<float> l1, l2;
  forward_with(o1, l1, nullptr);
  for (int x = 0; x < 2; ++x) {
    if (x == 0 && sb.rows.empty()) continue; // the graph order failed (reported above)
    forward_with(o2, l2, scheds[x]->r());
    if (o1 != o2 || memcmp(l1.data(), l2.data(), l1.size() * 4) != 0)
      why += std::string(" forward-") + sname[x] + "-schedule-not-bit-identical";
  }
  forward_with(o2, l2, nullptr);
  if (o1 != o2 || memcmp(l1.data(), l2.data(), l1.size() * 4) != 0) why += " forward-not-bitwise-repeatable";
  // out: every element written and finite; lse: -inf exactly for the empty rows, finite elsewhere.
  std::vector<double> go(ro.size()), gl, rlf;
  int bad_out = 0, bad_lse = 0;
  for (size_t x = 0; x < go.size(); ++x)
    if (!std::isfinite(go[x] = load(dt, o1.data(), x))) ++bad_out;
  for (size_t x = 0; x < rl.size(); ++x) {
    if (rl[x] == -INFINITY) {
      bad_lse += !(l1[x] == -INFINITY);
    } else {
      bad_lse += !std::isfinite(l1[x]);
      gl.push_back(l1[x]), rlf.push_back(rl[x]);
    }
  }
  const double eo = rel_l2(go, ro), el = rel_l2(gl, rlf);
  if (bad_out || bad_lse) snprintf(buf, sizeof buf, " unwritten/nonfinite out=%d lse=%d", bad_out, bad_lse), why += buf;
  if (!(eo <= tol)) why += " out";
  if (!(el <= tol)) why += " lse";
  snprintf(buf, sizeof buf, "out %.1e lse %.1e", eo, el);
  std::string errs = buf;
  if (c.bwd) {
    std::vector<char> r1[3], r2[3];
    Arr *gs[3] = {&dq, &dk, &dv};
    auto backward_with = [&](std::vector<char>(&res)[3], const int32_t *rord, const int32_t *sord) {
      dq.put(hg0q), dk.put(hg0k), dv.put(hg0v);
      CK(cudaMemset(ws.p, 0xFF, ws.n));
      tg_status s = cuda_attention_csr_backward(nullptr, &sh, &csr, rord, sord, q.p, k.p, v.p, out.p, dout.p,
                                                (const float *)lse.p, dq.p, dk.p, dv.p, ws.p, wb);
      CK(cudaDeviceSynchronize());
      if (s != TG_OK) why += std::string(" backward: ") + run_status(s);
      for (int x = 0; x < 3; ++x)
        res[x] = gs[x]->get();
    };
    backward_with(r1, nullptr, nullptr);
    backward_with(r2, nullptr, nullptr);
    for (int x = 0; x < 3; ++x)
      if (r1[x] != r2[x]) why += " backward-not-bitwise-repeatable";
    for (int y = 0; y < 2; ++y) {
      if (y == 0 && sb.rows.empty()) continue;
      backward_with(r2, scheds[y]->r(), scheds[y]->s());
      for (int x = 0; x < 3; ++x)
        if (r1[x] != r2[x]) why += std::string(" backward-") + sname[y] + "-schedule-not-bit-identical";
    }
    const std::vector<double> *ref[3] = {&rdq, &rdk, &rdv};
    const std::vector<float> *g0[3] = {&f0q, &f0k, &f0v};
    const char *nm[3] = {"dq", "dk", "dv"};
    for (int x = 0; x < 3; ++x) {
      std::vector<double> got(ref[x]->size());
      int nonfinite = 0;
      for (size_t e = 0; e < got.size(); ++e) {
        const double a = load(dt, r1[x].data(), e);
        nonfinite += !std::isfinite(a);
        got[e] = a - (*g0[x])[e];
      }
      const double er = rel_l2(got, *ref[x]);
      snprintf(buf, sizeof buf, " %s %.1e", nm[x], er);
      errs += buf;
      if (nonfinite) snprintf(buf, sizeof buf, " %s-nonfinite=%d", nm[x], nonfinite), why += buf;
      if (!(er <= tol)) why += std::string(" ") + nm[x];
    }
    // Rows without edges and keys without in-edges: their gradient rows stay bitwise as they were.
    int moved = 0;
    for (int64_t b = 0; b < P.B; ++b) {
      for (int64_t i = 0; i < P.Nq; ++i)
        if (g.rp[i + 1] == g.rp[i] && c.kind == G_RANDOM) {
          const size_t o = ((b * P.Nq + i) * P.Hq) * c.D * dsize(dt);
          moved += memcmp(r1[0].data() + o, hg0q.data() + o, P.Hq * c.D * dsize(dt)) != 0;
        }
      for (int64_t j = 0; j < P.Nk; ++j)
        if (g.tp[j + 1] == g.tp[j]) {
          const size_t ok_ = ((b * P.Nk + j) * P.Hkv) * c.D * dsize(dt),
                       ov = ((b * P.Nk + j) * P.Hkv) * c.Dv * dsize(dt);
          moved += memcmp(r1[1].data() + ok_, hg0k.data() + ok_, P.Hkv * c.D * dsize(dt)) != 0;
          moved += memcmp(r1[2].data() + ov, hg0v.data() + ov, P.Hkv * c.Dv * dsize(dt)) != 0;
        }
    }
    if (moved) snprintf(buf, sizeof buf, " edgeless-rows-changed=%d", moved), why += buf;
  }
  cuda_attention_csr_set_chunk(0);
  say("%s %-44s %s nnz=%lld ws=%zu/%zu KB%s%s\n", why.empty() ? "PASS" : "FAIL", c.name.c_str(), errs.c_str(),
      (long long)g.nnz(), wf >> 10, wb >> 10, why.empty() ? "" : " :", why.c_str());
  return why.empty();
}

// Argument checks: each refusal with its status, before any device work.
static bool check_api() {
  std::string why;
  auto expect = [&](const char *what, tg_status got, tg_status want) {
    if (got != want) why += std::string(" ") + what;
  };
  int64_t rp_h[3] = {0, 1, 1};
  DBuf rp(sizeof rp_h), col(4), ws(1 << 16), buf(1 << 16);
  CK(cudaMemcpy(rp.p, rp_h, sizeof rp_h, cudaMemcpyHostToDevice));
  CK(cudaMemset(col.p, 0, 4));
  tgc_csr csr{2, 3, 1, (const int64_t *)rp.p, (const int32_t *)col.p, nullptr, nullptr, nullptr};
  tgc_csr_attn_shape sh{1, 2, 3, 2, 1, 16, 16, TG_F32, 0.25f, 0.0, 0, 0};
  expect("supported", cuda_attention_csr_supported(&sh), TG_OK);
  tgc_csr_attn_shape bad = sh;
  bad.dtype = TG_F64;
  expect("dtype", cuda_attention_csr_supported(&bad), TG_ERR_UNSUPPORTED);
  bad = sh, bad.D = 256;
  expect("D256-fwd", cuda_attention_csr_supported(&bad), TG_OK);
  expect("D256-bwd-f32", cuda_attention_csr_backward_supported(&bad), TG_ERR_UNSUPPORTED);
  bad.dtype = TG_BF16;
  expect("D256-bwd-bf16", cuda_attention_csr_backward_supported(&bad), TG_OK);
  bad = sh, bad.Hkv = 3;
  expect("gqa", cuda_attention_csr_supported(&bad), TG_ERR_UNSUPPORTED);
  bad = sh, bad.drop_keep = 1.5;
  expect("keep", cuda_attention_csr_supported(&bad), TG_ERR_INVALID_ARGUMENT);
  expect("null-shape", cuda_attention_csr_supported(nullptr), TG_ERR_INVALID_ARGUMENT);
  char *b = buf.p;
  float *lse = (float *)(b + 8192);
  tgc_csr wrong = csr;
  wrong.nk = 4;
  expect("csr-shape", cuda_attention_csr_forward(nullptr, &sh, &wrong, nullptr, b, b, b, b, lse, ws.p, ws.n),
         TG_ERR_SHAPE);
  expect("forward", cuda_attention_csr_forward(nullptr, &sh, &csr, nullptr, b, b, b, b + 4096, lse, ws.p, ws.n), TG_OK);
  cuda_attention_csr_set_chunk(1); // every row of > 1 edge splits: the forward needs a workspace
  rp_h[1] = 0, rp_h[2] = 2;
  csr.nnz = 2;
  DBuf col2(8);
  CK(cudaMemset(col2.p, 0, 8));
  csr.col_idx = (const int32_t *)col2.p;
  CK(cudaMemcpy(rp.p, rp_h, sizeof rp_h, cudaMemcpyHostToDevice));
  const size_t need = cuda_attention_csr_forward_workspace(&sh, &csr);
  if (need == 0) why += " ws-size";
  expect("ws-small", cuda_attention_csr_forward(nullptr, &sh, &csr, nullptr, b, b, b, b + 4096, lse, ws.p, need - 1),
         TG_ERR_INVALID_ARGUMENT);
  cuda_attention_csr_set_chunk(0);
  expect("no-transpose",
         cuda_attention_csr_backward(nullptr, &sh, &csr, nullptr, nullptr, b, b, b, b, b, lse, b + 4096, b + 8192,
                                     b + 12288, ws.p, ws.n),
         TG_ERR_INVALID_ARGUMENT);
  CK(cudaDeviceSynchronize());
  say("%s %-44s%s%s\n", why.empty() ? "PASS" : "FAIL", "api: argument checks", why.empty() ? "" : " :", why.c_str());
  return why.empty();
}

static std::vector<Case> check_cases() {
  std::vector<Case> v;
  auto add = [&](tg_dtype dt, int B, int Hq, int Hkv, int D, int Dv, double keep, GKind kind, int64_t nq, int64_t nk,
                 int64_t chunk, bool bwd, bool mis = false) {
    char nm[160];
    const char *kn = kind == G_RANDOM ? "graph" : kind == G_DENSE ? "dense" : kind == G_CAUSAL ? "causal" : "empty";
    snprintf(nm, sizeof nm, "%s %s B%d H%d/%d D%d/%d N%lldx%lld%s%s%s%s", dname(dt), kn, B, Hq, Hkv, D, Dv,
             (long long)nq, (long long)nk, keep > 0 && keep < 1 ? " drop" : "", chunk ? " chunk" : "",
             chunk ? std::to_string(chunk).c_str() : "", bwd ? "" : " fwd-only");
    v.push_back(
        {std::string(nm) + (mis ? " misaligned" : ""), dt, B, Hq, Hkv, D, Dv, keep, kind, nq, nk, chunk, bwd, mis});
  };
  for (tg_dtype dt : {TG_F32, TG_F16, TG_BF16}) {
    add(dt, 1, 4, 4, 16, 16, 0, G_RANDOM, 701, 3203, 0, true);
    add(dt, 2, 4, 2, 40, 24, 0.7, G_RANDOM, 517, 3111, 0, true);
    add(dt, 2, 2, 2, 64, 64, 0, G_RANDOM, 433, 3050, 0, true);
    add(dt, 1, 4, 2, 64, 64, 0.7, G_RANDOM, 389, 3001, 0, true);
    add(dt, 1, 4, 2, 128, 128, 0, G_RANDOM, 301, 3007, 0, true);
    add(dt, 2, 2, 1, 128, 96, 0.7, G_RANDOM, 257, 3003, 0, true);
    add(dt, 1, 2, 2, 256, 256, 0, G_RANDOM, 211, 3001, 0, dt != TG_F32);
    add(dt, 2, 2, 1, 256, 64, 0.7, G_RANDOM, 173, 3001, 0, dt != TG_F32);
    add(dt, 1, 3, 1, 18, 10, 0, G_RANDOM, 333, 3001, 0, true); // unaligned rows: scalar access
    add(dt, 2, 4, 2, 16, 16, 0.7, G_RANDOM, 301, 3005, 1, true);
    add(dt, 1, 4, 4, 64, 64, 0, G_RANDOM, 297, 3001, 5, true);
    add(dt, 2, 2, 2, 32, 32, 0.7, G_DENSE, 65, 97, 0, true);
    add(dt, 1, 4, 2, 64, 64, 0, G_CAUSAL, 80, 100, 0, true);
    add(dt, 2, 2, 2, 32, 32, 0, G_CAUSAL, 100, 80, 7, true); // rows 0..19 have no key
  }
  add(TG_F32, 1, 4, 4, 16, 16, 0, G_RANDOM, 301, 3001, 0, true, true);
  add(TG_BF16, 2, 4, 2, 64, 64, 0.7, G_RANDOM, 301, 3001, 3, true, true);
  add(TG_F32, 2, 2, 2, 16, 16, 0, G_EMPTY, 50, 40, 0, true);
  add(TG_F32, 1, 1, 1, 1, 1, 0.3, G_RANDOM, 129, 3001, 0, true);
  add(TG_F32, 1, 8, 8, 64, 64, 0, G_DENSE, 300, 300, 64, true); // every row and source split
  return v;
}

// ------------------------------------------------------------------ bench
__device__ uint64_t dev_mix(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
// Normal values (Box-Muller on a hash of the index): no zeros timed, no host round trip.
template <typename T> __global__ void fill_kernel(T *p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const uint64_t h = dev_mix(seed * 0x100000001B3ull + i);
    const float u1 = ((float)(h >> 40) + 1.f) * 0x1.0p-24f, u2 = (float)((h >> 16) & 0xFFFFFF) * 0x1.0p-24f;
    p[i] = (T)(sqrtf(-2.f * logf(u1)) * cospif(2.f * u2));
  }
}
static void fill_dev(void *p, tg_dtype dt, size_t n, uint64_t seed) {
  if (dt == TG_F32) fill_kernel<float><<<4096, 256>>>((float *)p, n, seed);
  if (dt == TG_F16) fill_kernel<__half><<<4096, 256>>>((__half *)p, n, seed);
  if (dt == TG_BF16) fill_kernel<__nv_bfloat16><<<4096, 256>>>((__nv_bfloat16 *)p, n, seed);
  CK(cudaGetLastError());
}

static double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
template <typename F> static double time_ms(F f) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  f(), f(); // warm-up
  std::vector<float> t;
  float total = 0;
  while ((int)t.size() < 40 && (t.size() < 5 || total < 500.f)) {
    CK(cudaEventRecord(a));
    f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms), total += ms;
  }
  CK(cudaGetLastError());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return median(t);
}

struct BRes {
  double fwd, bwd, fb, gbs_f, gbs_fb, gath_f, gath_fb;
  unsigned long long hash; // of out, lse, dq, dk, dv after one forward + backward from zero gradients
  bool ok;
};

// Order-independent hash of a buffer's bytes (sum of hashes of (index, word), exact integer atomics).
__global__ void hash_kernel(const uint32_t *p, size_t n, unsigned long long *acc) {
  unsigned long long h = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    h += dev_mix(((uint64_t)i << 32) ^ p[i]);
  atomicAdd(acc, h);
}
static unsigned long long hash_dev(std::initializer_list<const DBuf *> bufs) {
  DBuf acc(8);
  CK(cudaMemset(acc.p, 0, 8));
  for (const DBuf *b : bufs)
    hash_kernel<<<1024, 256>>>((const uint32_t *)b->p, b->n / 4, (unsigned long long *)acc.p);
  CK(cudaGetLastError());
  unsigned long long h = 0;
  CK(cudaMemcpy(&h, acc.p, 8, cudaMemcpyDeviceToHost));
  return h;
}

// B = 1, Hq = Hkv = H, D = Dv. Bytes the kernels must move (each tensor once): forward q, k, v, out,
// lse, CSR; backward q, k, v, out, dout, lse, dq/dk/dv read and written, CSR and transpose.
// Gathered bytes: the k and v rows read per edge (forward), plus q and dout per edge (backward).
// rord / sord: schedules (NULL: none).
static BRes bench_graph(const Graph &g, const Dev &dg, tg_dtype dt, int H, int D, const int32_t *rord = nullptr,
                        const int32_t *sord = nullptr) {
  const int64_t n = g.nq, E = g.nnz();
  const size_t el = (size_t)n * H * D, es = dsize(dt);
  tgc_csr csr = dg.csr(g);
  tgc_csr_attn_shape sh{1, n, n, H, H, D, D, dt, (float)(1.0 / std::sqrt((double)D)), 0.0, 0, 0};
  DBuf q(el * es), k(el * es), v(el * es), dout(el * es), out(el * es), dq(el * es), dk(el * es), dv(el * es);
  DBuf lse((size_t)n * H * 4);
  fill_dev(q.p, dt, el, 1), fill_dev(k.p, dt, el, 2), fill_dev(v.p, dt, el, 3), fill_dev(dout.p, dt, el, 4);
  CK(cudaMemset(dq.p, 0, dq.n));
  CK(cudaMemset(dk.p, 0, dk.n));
  CK(cudaMemset(dv.p, 0, dv.n));
  const size_t wf = cuda_attention_csr_forward_workspace(&sh, &csr),
               wb = cuda_attention_csr_backward_workspace(&sh, &csr);
  DBuf ws(std::max(wf, wb));
  bool ok = true;
  auto fwd = [&] {
    tg_status s = cuda_attention_csr_forward(nullptr, &sh, &csr, rord, q.p, k.p, v.p, out.p, (float *)lse.p, ws.p, wf);
    if (s != TG_OK && ok) say("FAIL forward: %s\n", tgc_error()), ok = false;
  };
  auto bwd = [&] {
    tg_status s = cuda_attention_csr_backward(nullptr, &sh, &csr, rord, sord, q.p, k.p, v.p, out.p, dout.p,
                                              (const float *)lse.p, dq.p, dk.p, dv.p, ws.p, wb);
    if (s != TG_OK && ok) say("FAIL backward: %s\n", tgc_error()), ok = false;
  };
  auto fb = [&] { fwd(), bwd(); };
  BRes r{};
  r.fwd = time_ms(fwd);
  r.bwd = time_ms(bwd);
  r.fb = time_ms(fb);
  CK(cudaMemset(dq.p, 0, dq.n));
  CK(cudaMemset(dk.p, 0, dk.n));
  CK(cudaMemset(dv.p, 0, dv.n));
  fb();
  CK(cudaDeviceSynchronize());
  r.hash = hash_dev({&out, &lse, &dq, &dk, &dv});
  std::vector<float> l(std::min<int64_t>(n * H, 4096));
  CK(cudaMemcpy(l.data(), lse.p, l.size() * 4, cudaMemcpyDeviceToHost));
  for (float x : l)
    if (std::isnan(x)) ok = false;
  const double row = (double)el * es, csrb = 8.0 * (n + 1) + 4.0 * E, lseb = 4.0 * n * H;
  const double bf = 4 * row + lseb + csrb, bb = 5 * row + lseb + 6 * row + 2 * csrb;
  const double gf = (double)E * H * 2 * D * es, gb = 2 * gf;
  r.gbs_f = bf / (r.fwd * 1e6), r.gbs_fb = (bf + bb) / (r.fb * 1e6);
  r.gath_f = gf / (r.fwd * 1e6), r.gath_fb = (gf + gb) / (r.fb * 1e6);
  r.ok = ok;
  return r;
}

struct Cfg {
  const char *name;
  tg_dtype dt;
  int H, D;
  double target_per_edge_ms; // target fwd+bwd ms per million edges (1.7 ms at 1.73M edges etc.)
};
static const Cfg kCfgs[] = {{"f32 H4 D16", TG_F32, 4, 16, 1.7 / 1.73},
                            {"bf16 H4 D16", TG_BF16, 4, 16, 1.7 / 1.73},
                            {"f32 H8 D64", TG_F32, 8, 64, 5.5 / 1.73},
                            {"bf16 H8 D64", TG_BF16, 8, 64, 5.5 / 1.73}};

static std::vector<std::string> g_table;

static bool bench_on(const Graph &g, const char *gname, bool with_target) {
  Dev dg(g);
  bool all = true;
  for (const Cfg &c : kCfgs) {
    BRes r = bench_graph(g, dg, c.dt, c.H, c.D);
    const double target = c.target_per_edge_ms * (double)g.nnz() / 1e6;
    char line[300];
    snprintf(line, sizeof line,
             "%-12s %-16s fwd %7.3f ms  fwd+bwd %7.3f ms%s  unique %5.0f/%5.0f GB/s  gathered %5.0f/%5.0f GB/s%s",
             c.name, gname, r.fwd, r.fb, with_target ? (r.fb <= target ? " (<= target)" : " (ABOVE TARGET)") : "",
             r.gbs_f, r.gbs_fb, r.gath_f, r.gath_fb, r.ok ? "" : " FAIL");
    say("RESULT %s\n", line);
    if (with_target) snprintf(line + strlen(line), sizeof line - strlen(line), " [target %.2f]", target);
    g_table.push_back(line);
    all = all && r.ok;
  }
  return all;
}

// Morton schedule of points x [n, 3]: coordinates scaled by the largest extent to 21 bits each,
// interleaved (x lowest), sorted by (code, index).
static std::vector<int32_t> morton_sched(const std::vector<float> &x, int64_t n) {
  std::vector<std::pair<uint64_t, int32_t>> key(n);
  double lo[3] = {INFINITY, INFINITY, INFINITY}, ext = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int d = 0; d < 3; ++d)
      lo[d] = std::min(lo[d], (double)x[i * 3 + d]);
  for (int64_t i = 0; i < n; ++i)
    for (int d = 0; d < 3; ++d)
      ext = std::max(ext, (double)x[i * 3 + d] - lo[d]);
  const double scale = ext > 0 ? 2097152.0 / ext : 0;
  for (int64_t i = 0; i < n; ++i) {
    uint64_t code = 0;
    for (int d = 0; d < 3; ++d) {
      const uint64_t qd = std::min<uint64_t>((uint64_t)(((double)x[i * 3 + d] - lo[d]) * scale), 2097151);
      for (int b = 0; b < 21; ++b)
        code |= ((qd >> b) & 1) << (3 * b + d);
    }
    key[i] = {code, (int32_t)i};
  }
  std::sort(key.begin(), key.end());
  std::vector<int32_t> o(n);
  for (int64_t i = 0; i < n; ++i)
    o[i] = key[i].second;
  return o;
}

// The schedule configs on a random-order radius graph: no schedule, its plain BFS order, its
// bisected order (leaf 4096, the library's), the Morton order of its points. Every schedule must
// give the unscheduled run's bits (hash of out, lse and the gradients).
static std::vector<std::string> g_sched;
// The points of radius_graph(n, rc, seed, false): the same draws (uniform in the unit cube).
static std::vector<float> radius_points(int64_t n, uint64_t seed) {
  Rng r{seed};
  std::vector<float> x(n * 3);
  for (auto &c : x)
    c = (float)r.uni();
  return x;
}

static bool bench_schedules(const Graph &g, const char *gname, const std::vector<float> &pos) {
  std::string why;
  const int64_t leaves[2] = {0, 4096};
  Sched sg[2];
  double build_ms[2];
  for (int x = 0; x < 2; ++x) {
    const auto t0 = std::chrono::steady_clock::now();
    sg[x] = graph_sched(g, leaves[x], why);
    build_ms[x] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  Sched sm;
  sm.rows = morton_sched(pos, g.nq);
  sm.srcs = sm.rows;
  if (!is_perm(sm.rows, g.nq)) why += " morton-not-a-permutation";
  if (!why.empty()) {
    say("FAIL schedules %s:%s\n", gname, why.c_str());
    return false;
  }
  char line[300];
  snprintf(line, sizeof line, "%-5s host build of the graph orders: bfs %.1f ms, bisect %.1f ms", gname, build_ms[0],
           build_ms[1]);
  say("RESULT %s\n", line);
  g_sched.push_back(line);
  Dev dg(g);
  const DSched d1(sg[0]), d2(sg[1]), dm(sm);
  const Cfg cf[] = {
      {"f32 H8 D64", TG_F32, 8, 64, 0}, {"bf16 H8 D64", TG_BF16, 8, 64, 0}, {"f32 H4 D16", TG_F32, 4, 16, 0}};
  bool ok = true;
  for (const Cfg &c : cf) {
    BRes rs[4];
    const DSched *ds[4] = {nullptr, &d1, &d2, &dm};
    const char *nm[4] = {"none", "bfs", "bisect", "morton"};
    for (int x = 0; x < 4; ++x)
      rs[x] = bench_graph(g, dg, c.dt, c.H, c.D, ds[x] ? ds[x]->r() : nullptr, ds[x] ? ds[x]->s() : nullptr);
    for (int x = 0; x < 4; ++x) {
      const bool same = rs[x].hash == rs[0].hash;
      snprintf(line, sizeof line, "%-12s %-5s %-7s fwd %7.3f  bwd %7.3f  fwd+bwd %7.3f ms  x%.2f vs none%s%s", c.name,
               gname, nm[x], rs[x].fwd, rs[x].bwd, rs[x].fb, rs[0].fb / rs[x].fb, same ? "" : " FAIL: bits differ",
               rs[x].ok ? "" : " FAIL");
      say("RESULT %s\n", line);
      g_sched.push_back(line);
      ok = ok && same && rs[x].ok;
    }
  }
  return ok;
}

static bool load_graph(const char *path, Graph &g, std::vector<float> &pos) {
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  int64_t n = 0, nnz = 0;
  bool ok = fread(&n, 8, 1, f) == 1 && fread(&nnz, 8, 1, f) == 1 && n >= 0 && nnz >= 0;
  if (ok) {
    pos.resize(n * 3);
    g.nq = g.nk = n;
    g.rp.resize(n + 1);
    g.col.resize(nnz);
    ok = fread(pos.data(), 4, pos.size(), f) == pos.size() && fread(g.rp.data(), 8, n + 1, f) == (size_t)n + 1 &&
         fread(g.col.data(), 4, nnz, f) == (size_t)nnz && g.rp[0] == 0 && g.rp[n] == nnz;
    for (int64_t i = 0; ok && i < n; ++i)
      ok = g.rp[i] <= g.rp[i + 1];
    for (int64_t e = 0; ok && e < nnz; ++e)
      ok = g.col[e] >= 0 && g.col[e] < n;
  }
  fclose(f);
  if (ok) build_transpose(g);
  return ok;
}

int main(int argc, char **argv) {
  std::string mode = argc > 1 ? argv[1] : "--check", arg = argc > 2 ? argv[2] : "";
  if (const char *o = getenv("OUT")) g_log = fopen((std::string(o) + "/bench_attention_csr.log").c_str(), "w");
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  say("device: %s (%d SMs, L2 %d MB)\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  if (mode == "--check") {
    int pass = 0, fail = 0, idx = 0;
    for (const Case &c : check_cases()) {
      ++idx;
      if (!arg.empty() && c.name.find(arg) == std::string::npos) continue;
      (run_case(c, 1000 + idx) ? pass : fail)++;
    }
    if (arg.empty()) (check_api() ? pass : fail)++;
    say("SUMMARY: %d PASS, %d FAIL\n", pass, fail);
    return fail ? 1 : 0;
  }
  bool ok = true;
  if (mode == "--graph") {
    Graph g;
    std::vector<float> pos;
    if (!load_graph(arg.c_str(), g, pos)) {
      say("FAIL cannot read graph file '%s'\n", arg.c_str());
      return 1;
    }
    say("graph %s: n=%lld nnz=%lld\n", arg.c_str(), (long long)g.nq, (long long)g.nnz());
    ok = bench_on(g, "file", true);
    ok = bench_schedules(g, "file", pos) && ok;
  } else if (mode == "--bench") {
    const struct {
      int64_t n;
      double rc;
    } rg[] = {{100000, 0.035}, {400000, 0.022}};
    for (auto &x : rg)
      for (bool sorted : {false, true}) {
        Graph g = radius_graph(x.n, x.rc, 42, sorted);
        char nm[64];
        snprintf(nm, sizeof nm, "%lldk%s", (long long)(x.n / 1000), sorted ? " cellsort" : "");
        say("radius graph %s: n=%lld nnz=%lld (avg degree %.2f)\n", nm, (long long)g.nq, (long long)g.nnz(),
            (double)g.nnz() / g.nq);
        ok = bench_on(g, nm, !sorted) && ok;
        if (!sorted) ok = bench_schedules(g, nm, radius_points(x.n, 42)) && ok;
      }
    // Hub: row 0 attends to all 100k nodes, vs a uniform graph of the same edge count.
    Graph gu = hub_graph(100000, 1730000, false, 7), gh = hub_graph(100000, 1730000, true, 7);
    Dev du(gu), dh(gh);
    for (int ci : {0, 3}) {
      const Cfg &c = kCfgs[ci];
      BRes ru = bench_graph(gu, du, c.dt, c.H, c.D), rh = bench_graph(gh, dh, c.dt, c.H, c.D);
      char line[300];
      snprintf(line, sizeof line,
               "hub %-12s E %lld/%lld: uniform fwd %.3f fb %.3f ms, hub fwd %.3f fb %.3f ms, ratio fwd %.2f fb %.2f %s",
               c.name, (long long)gu.nnz(), (long long)gh.nnz(), ru.fwd, ru.fb, rh.fwd, rh.fb, rh.fwd / ru.fwd,
               rh.fb / ru.fb, rh.fb <= 2 * ru.fb && rh.fwd <= 2 * ru.fwd ? "(<= 2)" : "(ABOVE 2)");
      say("RESULT %s\n", line);
      g_table.push_back(line);
      ok = ok && ru.ok && rh.ok;
    }
  } else {
    say("usage: %s --check [substring] | --bench | --graph FILE\n", argv[0]);
    return 2;
  }
  say("\n==== summary (unique: bytes each tensor moved once / time; gathered: per-edge row reads / time)\n");
  for (auto &l : g_table)
    say("%s\n", l.c_str());
  if (!g_sched.empty())
    say("\n==== schedules (random node order; bfs / bisect: the graph's own orders; morton: the points')\n");
  for (auto &l : g_sched)
    say("%s\n", l.c_str());
  if (g_log) fclose(g_log);
  return ok ? 0 : 1;
}
