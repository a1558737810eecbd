// Standalone check and benchmark of the graph kernels (cuda/graph.h) and the CSR transpose
// (cuda/relation.h). Builds as bench_graph (bench/CMakeLists.txt), needing only cudart.
//   bench_graph --check              random CSR graphs (empty rows, hubs, self loops, bipartite),
//                                    every op forward and backward against a float64 CPU reference
//   bench_graph --bench              radius graphs of 100k and 400k points, CUDA-event medians
//   bench_graph --bench --graph FILE time the graph in FILE instead: int64 n, int64 nnz,
//                                    float32 pos[n*3], int64 row_ptr[n+1], int32 col_idx[nnz] (LE)
// Output: one PASS/FAIL line per case, a summary (failures repeated) last; exit 1 on any FAIL.
// With $OUT set the full log also goes to $OUT/bench_graph.log.
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
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/graph.h"
#include "cuda/graph_walk.cuh"
#include "cuda/relation.h"
#include "host/philox.h"

// The library's device.cu provides these; the bench compiles only the graph files.
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
static __host__ __device__ uint64_t splitmix64(uint64_t x) {
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
static const char *dname(tg_dtype dt) { return dt == TG_F32 ? "f32" : dt == TG_F16 ? "f16" : "bf16"; }
static double store(tg_dtype dt, void *raw, size_t i, double x) {
  if (dt == TG_F32) return ((float *)raw)[i] = (float)x;
  if (dt == TG_F16) {
    __half h = __float2half_rn((float)x);
    ((__half *)raw)[i] = h;
    return __half2float(h);
  }
  __nv_bfloat16 h = __float2bfloat16_rn((float)x);
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
  size_t bytes = 0;
  explicit DBuf(size_t b) : bytes(b) { CK(cudaMalloc(&p, b ? b : 16)); }
  ~DBuf() { cudaFree(p); }
  DBuf(const DBuf &) = delete;
  DBuf &operator=(const DBuf &) = delete;
  void poison() { CK(cudaMemset(p, 0xFF, bytes)); } // NaN in f32, f16 and bf16
  void zero() { CK(cudaMemset(p, 0, bytes)); }
  std::vector<uint8_t> raw() const {
    std::vector<uint8_t> r(bytes);
    CK(cudaDeviceSynchronize());
    if (bytes) CK(cudaMemcpy(r.data(), p, bytes, cudaMemcpyDeviceToHost));
    return r;
  }
};
template <typename X> static DBuf *upload(const std::vector<X> &v) {
  DBuf *b = new DBuf(v.size() * sizeof(X));
  if (!v.empty()) CK(cudaMemcpy(b->p, v.data(), v.size() * sizeof(X), cudaMemcpyHostToDevice));
  return b;
}

// A tensor of dtype dt: the stored bits and the same values as doubles (what a reference sees).
struct Tensor {
  tg_dtype dt;
  std::vector<uint8_t> raw;
  std::vector<double> v;
  Tensor(tg_dtype d, size_t n) : dt(d), raw(n * dsize(d)), v(n) {}
  void set(size_t i, double x) { v[i] = store(dt, raw.data(), i, x); }
  DBuf *dev() const {
    DBuf *b = new DBuf(raw.size());
    if (!raw.empty()) CK(cudaMemcpy(b->p, raw.data(), raw.size(), cudaMemcpyHostToDevice));
    return b;
  }
};
static Tensor randn(tg_dtype dt, size_t n, Rng &r, double scale = 1.0) {
  Tensor t(dt, n);
  for (size_t i = 0; i < n; ++i)
    t.set(i, scale * r.normal());
  return t;
}
static std::vector<double> values_of(const DBuf &b, tg_dtype dt, size_t n) {
  std::vector<uint8_t> r = b.raw();
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = load(dt, r.data(), i);
  return v;
}

// rel-L2 error; -inf references must match exactly; a non-finite result where the reference is
// finite (e.g. the NaN poison left unwritten) is counted as bad.
struct Cmp {
  double num = 0, den = 0;
  int64_t bad = 0;
  void add(double got, double ref) {
    if (std::isinf(ref) && ref < 0) {
      if (!(std::isinf(got) && got < 0)) ++bad;
      return;
    }
    if (!std::isfinite(got)) {
      ++bad;
      return;
    }
    num += (got - ref) * (got - ref);
    den += ref * ref;
  }
  void add(const std::vector<double> &got, const std::vector<double> &ref) {
    for (size_t i = 0; i < ref.size(); ++i)
      add(got[i], ref[i]);
  }
  double rel() const { return den > 0 ? std::sqrt(num / den) : std::sqrt(num); }
};

static int g_pass = 0, g_fail = 0;
static std::vector<std::string> g_failed;
static void report(const std::string &name, bool ok, const std::string &detail) {
  say("%s %-58s %s\n", ok ? "PASS" : "FAIL", name.c_str(), detail.c_str());
  if (ok) {
    ++g_pass;
  } else {
    ++g_fail;
    g_failed.push_back(name + " " + detail);
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
static double tol_of(tg_dtype dt) { return dt == TG_F32 ? 1e-5 : 1e-2; }

// ------------------------------------------------------------------ graphs
struct HG {
  std::string name;
  int64_t nq = 0, nk = 0;
  std::vector<int64_t> rp;
  std::vector<int32_t> ci, row_of;
  int64_t nnz() const { return (int64_t)ci.size(); }
  void finish() {
    row_of.resize(ci.size());
    for (int64_t i = 0; i < nq; ++i)
      for (int64_t e = rp[i]; e < rp[i + 1]; ++e)
        row_of[e] = (int32_t)i;
  }
};
struct DG {
  DBuf *rp, *ci, *tp, *tr, *te;
  tgc_csr csr;
  explicit DG(const HG &g) {
    rp = upload(g.rp);
    ci = upload(g.ci);
    tp = new DBuf((g.nk + 1) * 8);
    tr = new DBuf(g.nnz() * 4);
    te = new DBuf(g.nnz() * 8);
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
  ~DG() {
    delete rp;
    delete ci;
    delete tp;
    delete tr;
    delete te;
  }
};

// Random graph: rows of random degree (distinct ascending sources), empty first/last rows and
// some empty ones inside, hub rows of given degrees, a popular source, self loops.
static HG make_graph(const char *name, int64_t nq, int64_t nk, int avg, std::vector<std::pair<int64_t, int64_t>> hubs,
                     int hub_src, double hub_src_p, uint64_t seed) {
  Rng r{seed};
  HG g;
  g.name = name;
  g.nq = nq;
  g.nk = nk;
  g.rp.push_back(0);
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
    } else if (i != 0 && i != nq - 1 && r.uni() > 0.08 && nk > 0) {
      const int64_t d = 1 + r.below(2 * avg);
      for (int64_t t = 0; t < d; ++t)
        row.push_back((int32_t)r.below(nk));
      if (i < nk && r.uni() < 0.5) row.push_back((int32_t)i);
      if (hub_src >= 0 && r.uni() < hub_src_p) row.push_back(hub_src);
    }
    std::sort(row.begin(), row.end());
    row.erase(std::unique(row.begin(), row.end()), row.end());
    g.ci.insert(g.ci.end(), row.begin(), row.end());
    g.rp.push_back((int64_t)g.ci.size());
  }
  g.finish();
  return g;
}

// Radius graph of n uniform points in the unit cube (neighbours closer than rc, no self loops),
// built with a grid of cells of side >= rc; sources ascending per row.
static HG radius_graph(int64_t n, double rc, uint64_t seed) {
  Rng r{seed};
  std::vector<float> pos(n * 3);
  for (auto &x : pos)
    x = (float)r.uni();
  const int gd = std::max(1, (int)(1.0 / rc));
  std::vector<std::vector<int32_t>> cell((size_t)gd * gd * gd);
  auto cof = [&](float x) { return std::min(gd - 1, (int)(x * gd)); };
  for (int64_t i = 0; i < n; ++i)
    cell[((size_t)cof(pos[3 * i]) * gd + cof(pos[3 * i + 1])) * gd + cof(pos[3 * i + 2])].push_back((int32_t)i);
  HG g;
  g.name = fmt("radius%lldk", (long long)(n / 1000));
  g.nq = g.nk = n;
  g.rp.push_back(0);
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
    std::sort(row.begin(), row.end());
    g.ci.insert(g.ci.end(), row.begin(), row.end());
    g.rp.push_back((int64_t)g.ci.size());
  }
  g.finish();
  return g;
}

static bool read_graph(const char *path, HG *g) {
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  int64_t n = 0, nnz = 0;
  bool ok = fread(&n, 8, 1, f) == 1 && fread(&nnz, 8, 1, f) == 1 && n > 0 && nnz >= 0;
  if (ok) {
    std::vector<float> pos(n * 3);
    g->rp.resize(n + 1);
    g->ci.resize(nnz);
    ok = fread(pos.data(), 4, n * 3, f) == (size_t)(n * 3) && fread(g->rp.data(), 8, n + 1, f) == (size_t)(n + 1) &&
         fread(g->ci.data(), 4, nnz, f) == (size_t)nnz && g->rp[0] == 0 && g->rp[n] == nnz;
  }
  fclose(f);
  for (int64_t i = 0; ok && i < n; ++i)
    ok = g->rp[i] <= g->rp[i + 1];
  for (int64_t e = 0; ok && e < nnz; ++e)
    ok = g->ci[e] >= 0 && g->ci[e] < n;
  if (!ok) return false;
  g->name = "file";
  g->nq = g->nk = n;
  g->finish();
  return true;
}

// Cora's citation graph (examples/data/cora/cora.edges: a count, then 'a b' per undirected edge)
// in both directions plus a self loop per node, as train_gat builds it: 2708 rows, 13264 edges,
// max degree 169. Empty graph (nq 0) when the file is missing.
static HG cora_graph(const char *dir) {
  HG g;
  g.name = "cora";
  const std::string path = std::string(dir) + "/cora.edges";
  FILE *f = fopen(path.c_str(), "r");
  if (!f) return g;
  char line[256];
  long long m = -1;
  std::vector<std::pair<int32_t, int32_t>> ed;
  int32_t n = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#' || line[0] == '\n') continue;
    long long a, b;
    if (m < 0) {
      if (sscanf(line, "%lld", &m) != 1) break;
    } else if (sscanf(line, "%lld %lld", &a, &b) == 2) {
      ed.push_back({(int32_t)a, (int32_t)b});
      n = std::max(n, (int32_t)std::max(a, b) + 1);
    }
  }
  fclose(f);
  n = std::max(n, (int32_t)2708);
  std::vector<std::vector<int32_t>> rows(n);
  for (int32_t i = 0; i < n; ++i)
    rows[i].push_back(i);
  for (auto &e : ed) {
    rows[e.first].push_back(e.second);
    rows[e.second].push_back(e.first);
  }
  g.nq = g.nk = n;
  g.rp.push_back(0);
  for (auto &r : rows) {
    std::sort(r.begin(), r.end());
    r.erase(std::unique(r.begin(), r.end()), r.end());
    g.ci.insert(g.ci.end(), r.begin(), r.end());
    g.rp.push_back((int64_t)g.ci.size());
  }
  g.finish();
  return g;
}
static const char *g_cora_dir = "examples/data/cora";

// ------------------------------------------------------------------ check helpers
using U = std::unique_ptr<DBuf>;
struct Grad {
  const char *name;
  size_t n;
  std::vector<double> ref;
};
static double rms(const std::vector<double> &v) {
  double s = 0;
  for (double x : v)
    s += x * x;
  return v.empty() ? 0 : std::sqrt(s / (double)v.size());
}

// Forward outputs: poisoned (NaN) before the run by the caller, compared here.
struct Out {
  const char *name;
  const DBuf *buf;
  tg_dtype dt;
  std::vector<double> ref;
};
static void check_fwd(const std::string &name, tg_dtype dt, const std::vector<Out> &outs) {
  bool ok = true;
  std::string detail;
  for (const Out &o : outs) {
    Cmp c;
    c.add(values_of(*o.buf, o.dt, o.ref.size()), o.ref);
    ok = ok && c.bad == 0 && c.rel() <= tol_of(dt);
    detail += fmt("%s=%.2e%s ", o.name, c.rel(), c.bad ? fmt("(%lld bad)", (long long)c.bad).c_str() : "");
  }
  report(name + " fwd", ok, detail);
}

// A backward runs three times: into zeroed gradients twice (accuracy against the reference; the
// two results must be bit identical), then into random prior gradients (accumulation: the result
// must be prior + reference).
static void check_bwd(const std::string &name, tg_dtype dt, const std::vector<Grad> &gs,
                      const std::function<tg_status(const std::vector<void *> &)> &run, Rng &rng) {
  const size_t k = gs.size();
  std::vector<U> a, b, c;
  std::vector<Tensor> prior;
  std::vector<void *> pa, pb, pc;
  for (const Grad &g : gs) {
    a.emplace_back(new DBuf(g.n * dsize(dt)));
    b.emplace_back(new DBuf(g.n * dsize(dt)));
    a.back()->zero();
    b.back()->zero();
    prior.push_back(randn(dt, g.n, rng, rms(g.ref) > 0 ? rms(g.ref) : 1.0));
    c.emplace_back(prior.back().dev());
    pa.push_back(a.back()->p);
    pb.push_back(b.back()->p);
    pc.push_back(c.back()->p);
  }
  TG(run(pa));
  TG(run(pb));
  TG(run(pc));
  bool ok = true;
  std::string detail;
  for (size_t i = 0; i < k; ++i) {
    Cmp ca, cc;
    ca.add(values_of(*a[i], dt, gs[i].n), gs[i].ref);
    std::vector<double> want(gs[i].n);
    for (size_t t = 0; t < gs[i].n; ++t)
      want[t] = prior[i].v[t] + gs[i].ref[t];
    cc.add(values_of(*c[i], dt, gs[i].n), want);
    const bool same = a[i]->raw() == b[i]->raw();
    ok = ok && ca.bad == 0 && cc.bad == 0 && ca.rel() <= tol_of(dt) && cc.rel() <= tol_of(dt) && same;
    detail += fmt("%s=%.2e acc=%.2e%s%s ", gs[i].name, ca.rel(), cc.rel(), same ? "" : " NONDETERMINISTIC",
                  ca.bad + cc.bad ? " NONFINITE" : "");
  }
  report(name + " bwd", ok, detail);
}

// ------------------------------------------------------------------ checks
static void check_transpose(const HG &g, const DG &d) {
  std::vector<int64_t> tp(g.nk + 1, 0), te(g.nnz());
  std::vector<int32_t> tr(g.nnz());
  for (int32_t j : g.ci)
    ++tp[j + 1];
  for (int64_t j = 0; j < g.nk; ++j)
    tp[j + 1] += tp[j];
  std::vector<int64_t> next(tp.begin(), tp.end() - 1);
  for (int64_t e = 0; e < g.nnz(); ++e) {
    const int64_t t = next[g.ci[e]]++;
    tr[t] = g.row_of[e];
    te[t] = e;
  }
  const bool ok = d.tp->raw() == std::vector<uint8_t>((uint8_t *)tp.data(), (uint8_t *)(tp.data() + tp.size())) &&
                  d.tr->raw() == std::vector<uint8_t>((uint8_t *)tr.data(), (uint8_t *)(tr.data() + tr.size())) &&
                  d.te->raw() == std::vector<uint8_t>((uint8_t *)te.data(), (uint8_t *)(te.data() + te.size()));
  report(fmt("transpose %s nq=%lld nk=%lld nnz=%lld", g.name.c_str(), (long long)g.nq, (long long)g.nk,
             (long long)g.nnz()),
         ok, ok ? "exact" : "MISMATCH");
}

static void check_gather(const HG &g, const DG &d, tg_dtype dt, tgc_graph_side side, int64_t W, Rng &rng) {
  const int64_t E = g.nnz(), Ns = side == TGC_GRAPH_SOURCE ? g.nk : g.nq;
  const std::string name =
      fmt("gather %s %s %s W=%lld", side == TGC_GRAPH_SOURCE ? "src" : "dst", g.name.c_str(), dname(dt), (long long)W);
  Tensor x = randn(dt, Ns * W, rng);
  std::vector<double> ref(E * W), rdx(Ns * W, 0.0);
  U xd(x.dev()), out(new DBuf(E * W * dsize(dt)));
  out->poison();
  TG(cuda_graph_gather_forward(0, &d.csr, side, dt, W, xd->p, out->p));
  for (int64_t e = 0; e < E; ++e)
    for (int64_t c = 0; c < W; ++c)
      ref[e * W + c] = x.v[(side == TGC_GRAPH_SOURCE ? g.ci[e] : g.row_of[e]) * W + c];
  check_fwd(name, dt, {{"out", out.get(), dt, ref}});
  Tensor dout = randn(dt, E * W, rng);
  U dd(dout.dev());
  for (int64_t e = 0; e < E; ++e)
    for (int64_t c = 0; c < W; ++c)
      rdx[(side == TGC_GRAPH_SOURCE ? g.ci[e] : g.row_of[e]) * W + c] += dout.v[e * W + c];
  check_bwd(
      name, dt, {{"dx", (size_t)(Ns * W), rdx}},
      [&](const std::vector<void *> &p) { return cuda_graph_gather_backward(0, &d.csr, side, dt, W, dd->p, p[0]); },
      rng);
}

static void check_reduce(const HG &g, const DG &d, tg_dtype dt, tgc_graph_reduce kind, int64_t W, Rng &rng) {
  const int64_t E = g.nnz();
  const char *kn = kind == TGC_GRAPH_SUM ? "sum" : kind == TGC_GRAPH_MEAN ? "mean" : "max";
  const std::string name = fmt("reduce %s %s %s W=%lld", kn, g.name.c_str(), dname(dt), (long long)W);
  Tensor vals(dt, E * W); // MAX: values on a coarse grid, so rows have ties
  for (int64_t t = 0; t < E * W; ++t)
    vals.set(t, kind == TGC_GRAPH_MAX ? std::round(rng.normal() * 4) / 4 : rng.normal());
  std::vector<double> ref(g.nq * W, 0.0);
  std::vector<int64_t> arg(g.nq * W, -1);
  for (int64_t i = 0; i < g.nq; ++i)
    for (int64_t c = 0; c < W; ++c) {
      double s = 0, m = 0;
      for (int64_t e = g.rp[i]; e < g.rp[i + 1]; ++e) {
        const double v = vals.v[e * W + c];
        s += v;
        if (arg[i * W + c] < 0 || v > m) {
          m = v;
          arg[i * W + c] = e;
        }
      }
      const int64_t deg = g.rp[i + 1] - g.rp[i];
      ref[i * W + c] = deg == 0 ? 0 : kind == TGC_GRAPH_SUM ? s : kind == TGC_GRAPH_MEAN ? s / deg : m;
    }
  U vd(vals.dev()), out(new DBuf(g.nq * W * dsize(dt)));
  out->poison();
  TG(cuda_graph_reduce_forward(0, &d.csr, kind, dt, W, vd->p, out->p));
  check_fwd(name, dt, {{"out", out.get(), dt, ref}});
  Tensor dout = randn(dt, g.nq * W, rng);
  U dd(dout.dev());
  std::vector<double> rdv(E * W, 0.0);
  for (int64_t i = 0; i < g.nq; ++i) {
    const int64_t deg = g.rp[i + 1] - g.rp[i];
    for (int64_t c = 0; c < W; ++c) {
      if (kind == TGC_GRAPH_MAX) {
        if (arg[i * W + c] >= 0) rdv[arg[i * W + c] * W + c] = dout.v[i * W + c];
        continue;
      }
      for (int64_t e = g.rp[i]; e < g.rp[i + 1]; ++e)
        rdv[e * W + c] = kind == TGC_GRAPH_SUM ? dout.v[i * W + c] : dout.v[i * W + c] / deg;
    }
  }
  check_bwd(
      name, dt, {{"dvals", (size_t)(E * W), rdv}},
      [&](const std::vector<void *> &p) {
        return cuda_graph_reduce_backward(0, &d.csr, kind, dt, W, vd->p, dd->p, p[0]);
      },
      rng);
}

static void check_softmax(const HG &g, const DG &d, tg_dtype dt, int64_t H, Rng &rng) {
  const int64_t E = g.nnz();
  const std::string name = fmt("softmax %s %s H=%lld", g.name.c_str(), dname(dt), (long long)H);
  Tensor s = randn(dt, E * H, rng, 1.5);
  std::vector<double> rp(E * H), rl(H * g.nq);
  for (int64_t i = 0; i < g.nq; ++i)
    for (int64_t h = 0; h < H; ++h) {
      double m = -INFINITY, l = 0;
      for (int64_t e = g.rp[i]; e < g.rp[i + 1]; ++e)
        m = std::max(m, s.v[e * H + h]);
      for (int64_t e = g.rp[i]; e < g.rp[i + 1]; ++e)
        l += std::exp(s.v[e * H + h] - m);
      const double lse = l > 0 ? m + std::log(l) : -INFINITY;
      rl[h * g.nq + i] = lse;
      for (int64_t e = g.rp[i]; e < g.rp[i + 1]; ++e)
        rp[e * H + h] = std::exp(s.v[e * H + h] - lse);
    }
  U sd(s.dev()), p(new DBuf(E * H * dsize(dt))), lse(new DBuf(H * g.nq * 4));
  p->poison();
  lse->poison();
  TG(cuda_graph_softmax_forward(0, &d.csr, dt, H, sd->p, p->p, (float *)lse->p));
  check_fwd(name, dt, {{"p", p.get(), dt, rp}, {"lse", lse.get(), TG_F32, rl}});
  Tensor pin(dt, E * H), dp = randn(dt, E * H, rng);
  for (int64_t t = 0; t < E * H; ++t)
    pin.set(t, rp[t]);
  std::vector<double> rds(E * H);
  for (int64_t i = 0; i < g.nq; ++i)
    for (int64_t h = 0; h < H; ++h) {
      double sum = 0;
      for (int64_t e = g.rp[i]; e < g.rp[i + 1]; ++e)
        sum += pin.v[e * H + h] * dp.v[e * H + h];
      for (int64_t e = g.rp[i]; e < g.rp[i + 1]; ++e)
        rds[e * H + h] = pin.v[e * H + h] * (dp.v[e * H + h] - sum);
    }
  U pd(pin.dev()), dpd(dp.dev()), ws(new DBuf(cuda_graph_softmax_backward_workspace(&d.csr, H)));
  check_bwd(
      name, dt, {{"ds", (size_t)(E * H), rds}},
      [&](const std::vector<void *> &q) {
        return cuda_graph_softmax_backward(0, &d.csr, dt, H, pd->p, dpd->p, q[0], ws->p, ws->bytes);
      },
      rng);
}

static const uint64_t kSeed = 0x5eed1234abcdull, kCall = 41;
// The attention-dropout rule of include/tiga.h written out from its text (only the Philox block
// function is shared with the kernels): R = h Nq + i; block floor(R/2) ceil(Nk/2) + floor(j/2)
// of subsequence call | 2^63; word 2 (R mod 2) + (j mod 2); kept iff word * 2^-32 < keep.
static double w_rule(double keep, int64_t nq, int64_t nk, int64_t h, int64_t i, int64_t j) {
  if (!(keep > 0 && keep < 1)) return 1;
  const uint64_t R = (uint64_t)(h * nq + i);
  uint32_t w[4];
  tg_philox4x32(kSeed, (R / 2) * (((uint64_t)nk + 1) / 2) + (uint64_t)j / 2, kCall | (1ull << 63), w);
  return (double)w[2 * (R % 2) + (j % 2)] * 0x1p-32 < keep ? 1.0 / keep : 0.0;
}

static void check_mask(const HG &g, const DG &d, int64_t H, double keep) {
  const int64_t E = g.nnz();
  U m(new DBuf(E * H));
  CK(cudaMemset(m->p, 0xAB, m->bytes));
  const tgc_graph_attn a{H, 1, TG_F32, 0.2f, keep, kSeed, kCall};
  TG(cuda_graph_attn_dropout_mask(0, &d.csr, &a, (uint8_t *)m->p));
  const std::vector<uint8_t> got = m->raw();
  int64_t bad = 0, kept = 0;
  for (int64_t e = 0; e < E; ++e)
    for (int64_t h = 0; h < H; ++h) {
      const int want = w_rule(keep, g.nq, g.nk, h, g.row_of[e], g.ci[e]) != 0;
      kept += want;
      bad += got[e * H + h] != want;
    }
  report(fmt("dropout mask %s H=%lld keep=%.2f", g.name.c_str(), (long long)H, keep), bad == 0,
         fmt("kept %.4f, %lld mismatches", E ? (double)kept / (double)(E * H) : 0.0, (long long)bad));
}

static void check_attn(const HG &g, const DG &d, tg_dtype dt, int64_t H, int64_t F, double keep, bool gat, bool partial,
                       Rng &rng) {
  const int64_t E = g.nnz(), nq = g.nq, nk = g.nk;
  const std::string name = fmt("%s %s %s H=%lld F=%lld keep=%.1f", gat ? "gat" : "attend", g.name.c_str(), dname(dt),
                               (long long)H, (long long)F, keep);
  const float slope = 0.2f;
  Tensor sc = randn(dt, gat ? 0 : E * H, rng, 1.5), ed = randn(dt, gat ? nq * H : 0, rng),
         es = randn(dt, gat ? nk * H : 0, rng), v = randn(dt, nk * H * F, rng);
  std::vector<double> S(E * H), PRE(E * H), Wt(E * H), P(E * H), rout(nq * H * F, 0.0), rl(H * nq);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t i = g.row_of[e], j = g.ci[e], t = e * H + h;
      PRE[t] = gat ? ed.v[i * H + h] + es.v[j * H + h] : sc.v[t];
      S[t] = gat ? (PRE[t] > 0 ? PRE[t] : (double)slope * PRE[t]) : PRE[t];
      Wt[t] = w_rule(keep, nq, nk, h, i, j);
    }
  for (int64_t i = 0; i < nq; ++i)
    for (int64_t h = 0; h < H; ++h) {
      double m = -INFINITY, l = 0;
      for (int64_t e = g.rp[i]; e < g.rp[i + 1]; ++e)
        m = std::max(m, S[e * H + h]);
      for (int64_t e = g.rp[i]; e < g.rp[i + 1]; ++e)
        l += std::exp(S[e * H + h] - m);
      const double lse = l > 0 ? m + std::log(l) : -INFINITY;
      rl[h * nq + i] = lse;
      for (int64_t e = g.rp[i]; e < g.rp[i + 1]; ++e) {
        const int64_t t = e * H + h, j = g.ci[e];
        P[t] = std::exp(S[t] - lse);
        for (int64_t f = 0; f < F; ++f)
          rout[(i * H + h) * F + f] += P[t] * Wt[t] * v.v[(j * H + h) * F + f];
      }
    }
  U scd(sc.dev()), edd(ed.dev()), esd(es.dev()), vd(v.dev()), out(new DBuf(nq * H * F * dsize(dt))),
      lse(new DBuf(H * nq * 4));
  out->poison();
  lse->poison();
  const tgc_graph_attn a{H, F, dt, slope, keep, kSeed, kCall};
  if (gat)
    TG(cuda_graph_gat_forward(0, &d.csr, &a, edd->p, esd->p, vd->p, out->p, (float *)lse->p));
  else
    TG(cuda_graph_attend_forward(0, &d.csr, &a, scd->p, vd->p, out->p, (float *)lse->p));
  check_fwd(name, dt, {{"out", out.get(), dt, rout}, {"lse", lse.get(), TG_F32, rl}});

  // Backward from the kernel's out and lse (D = <dout, out> uses the out the kernel gets).
  const std::vector<double> og = values_of(*out, dt, nq * H * F);
  Tensor dout = randn(dt, nq * H * F, rng);
  U dd(dout.dev());
  std::vector<double> D(nq * H, 0.0), rds(E * H), rdd(nq * H, 0.0), rdsrc(nk * H, 0.0), rdv(nk * H * F, 0.0);
  for (int64_t t = 0; t < nq * H * F; ++t)
    D[t / F] += dout.v[t] * og[t];
  for (int64_t e = 0; e < E; ++e)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t i = g.row_of[e], j = g.ci[e], t = e * H + h;
      double dot = 0;
      for (int64_t f = 0; f < F; ++f) {
        dot += dout.v[(i * H + h) * F + f] * v.v[(j * H + h) * F + f];
        rdv[(j * H + h) * F + f] += P[t] * Wt[t] * dout.v[(i * H + h) * F + f];
      }
      const double ds = P[t] * (Wt[t] * dot - D[i * H + h]);
      rds[t] = ds;
      const double dsp = ds * (PRE[t] > 0 ? 1.0 : (double)slope);
      rdd[i * H + h] += dsp;
      rdsrc[j * H + h] += dsp;
    }
  const float *lp = (const float *)lse->p;
  if (gat) {
    U ws(new DBuf(cuda_graph_gat_backward_workspace(&d.csr, &a)));
    check_bwd(
        name, dt, {{"de_dst", (size_t)(nq * H), rdd}, {"de_src", (size_t)(nk * H), rdsrc}, {"dv", rdv.size(), rdv}},
        [&](const std::vector<void *> &p) {
          return cuda_graph_gat_backward(0, &d.csr, &a, edd->p, esd->p, vd->p, out->p, dd->p, lp, p[0], p[1], p[2],
                                         ws->p, ws->bytes);
        },
        rng);
    if (partial)
      check_bwd(
          name + " no-de_dst", dt, {{"de_src", (size_t)(nk * H), rdsrc}, {"dv", rdv.size(), rdv}},
          [&](const std::vector<void *> &p) {
            return cuda_graph_gat_backward(0, &d.csr, &a, edd->p, esd->p, vd->p, out->p, dd->p, lp, nullptr, p[0], p[1],
                                           ws->p, ws->bytes);
          },
          rng);
  } else {
    check_bwd(
        name, dt, {{"dscores", rds.size(), rds}, {"dv", rdv.size(), rdv}},
        [&](const std::vector<void *> &p) {
          return cuda_graph_attend_backward(0, &d.csr, &a, scd->p, vd->p, out->p, dd->p, lp, p[0], p[1]);
        },
        rng);
    if (partial)
      check_bwd(
          name + " dv-only", dt, {{"dv", rdv.size(), rdv}},
          [&](const std::vector<void *> &p) {
            return cuda_graph_attend_backward(0, &d.csr, &a, scd->p, vd->p, out->p, dd->p, lp, nullptr, p[0]);
          },
          rng);
  }
}

// Runs the GAT forward and backward twice on the same inputs and compares the bits.
static void check_repeat(const HG &g) {
  const DG d(g);
  Rng rng{77};
  for (auto hf : std::vector<std::pair<int64_t, int64_t>>{{8, 8}, {1, 7}, {4, 16}}) {
    const int64_t H = hf.first, F = hf.second, nq = g.nq, nk = g.nk;
    const tgc_graph_attn a{H, F, TG_F32, 0.2f, 0.4, kSeed, kCall};
    Tensor ed = randn(TG_F32, nq * H, rng), es = randn(TG_F32, nk * H, rng), v = randn(TG_F32, nk * H * F, rng),
           dout = randn(TG_F32, nq * H * F, rng);
    U edd(ed.dev()), esd(es.dev()), vd(v.dev()), dd(dout.dev()),
        ws(new DBuf(cuda_graph_gat_backward_workspace(&d.csr, &a)));
    std::vector<uint8_t> first[5];
    bool same = true;
    for (int run = 0; run < 2; ++run) {
      U out(new DBuf(nq * H * F * 4)), lse(new DBuf(H * nq * 4)), gd(new DBuf(nq * H * 4)), gs(new DBuf(nk * H * 4)),
          gv(new DBuf(nk * H * F * 4));
      gd->zero();
      gs->zero();
      gv->zero();
      TG(cuda_graph_gat_forward(0, &d.csr, &a, edd->p, esd->p, vd->p, out->p, (float *)lse->p));
      TG(cuda_graph_gat_backward(0, &d.csr, &a, edd->p, esd->p, vd->p, out->p, dd->p, (const float *)lse->p, gd->p,
                                 gs->p, gv->p, ws->p, ws->bytes));
      const DBuf *bs[5] = {out.get(), lse.get(), gd.get(), gs.get(), gv.get()};
      for (int k = 0; k < 5; ++k) {
        std::vector<uint8_t> r = bs[k]->raw();
        if (run == 0)
          first[k] = r;
        else
          same = same && r == first[k];
      }
    }
    report(fmt("repeat gat %s f32 H=%lld F=%lld keep=0.4", g.name.c_str(), (long long)H, (long long)F), same,
           same ? "bit-identical" : "results differ between two identical launches");
  }
}

static int run_check() {
  std::vector<HG> graphs;
  graphs.push_back(make_graph("sq6007", 6007, 6007, 4, {{5, 5000}, {6, 700}, {9, 257}, {10, 256}}, 3, 0.7, 11));
  graphs.push_back(make_graph("bip1531x5003", 1531, 5003, 3, {{700, 4000}}, 17, 0.3, 12));
  graphs.push_back(make_graph("small37x53", 37, 53, 3, {}, -1, 0, 13));
  HG empty;
  empty.name = "empty5x3";
  empty.nq = 5;
  empty.nk = 3;
  empty.rp.assign(6, 0);
  empty.finish();
  graphs.push_back(empty);
  const tg_dtype dts[] = {TG_F32, TG_F16, TG_BF16};
  Rng rng{2024};
  for (size_t gi = 0; gi < graphs.size(); ++gi) {
    const HG &g = graphs[gi];
    int64_t maxdeg = 0;
    for (int64_t i = 0; i < g.nq; ++i)
      maxdeg = std::max(maxdeg, g.rp[i + 1] - g.rp[i]);
    say("# graph %s: nq %lld nk %lld nnz %lld max degree %lld\n", g.name.c_str(), (long long)g.nq, (long long)g.nk,
        (long long)g.nnz(), (long long)maxdeg);
    DG d(g);
    check_transpose(g, d);
    check_mask(g, d, 3, 0.6);
    check_mask(g, d, 8, 0.6);
    check_mask(g, d, 2, 1.0);
    std::vector<int64_t> Ws = {1, 7, 16, 64, 67};
    std::vector<std::pair<int64_t, int64_t>> HFs = {{1, 1}, {3, 7}, {8, 16}, {1, 64}, {3, 67}, {4, 16}};
    if (g.name == "small37x53") {
      Ws.push_back(300);
      HFs.insert(HFs.end(), {{2, 200}, {1, 256}, {1, 128}});
    }
    for (tg_dtype dt : dts) {
      for (int64_t W : Ws) {
        check_gather(g, d, dt, TGC_GRAPH_SOURCE, W, rng);
        check_gather(g, d, dt, TGC_GRAPH_DEST, W, rng);
        for (tgc_graph_reduce k : {TGC_GRAPH_SUM, TGC_GRAPH_MEAN, TGC_GRAPH_MAX})
          check_reduce(g, d, dt, k, W, rng);
      }
      for (int64_t H : {1, 3, 8})
        check_softmax(g, d, dt, H, rng);
      for (auto hf : HFs)
        for (double keep : {1.0, 0.6})
          for (bool gat : {false, true})
            check_attn(g, d, dt, hf.first, hf.second, keep, gat, hf.first == 3, rng);
    }
  }
  // The walker's paths (graph_walk.cuh): rows of every length around the slice and block-wide
  // thresholds in one graph, Cora itself (the GAT example's shapes, sliced launches) and a dense
  // radius graph (avg degree ~68, one-slice launches for the large shapes). f32 and bf16.
  std::vector<HG> walks;
  walks.push_back(make_graph("mixed3000x24000", 3000, 24000, 3,
                             {{1, 1},
                              {2, 31},
                              {3, 32},
                              {4, 33},
                              {7, 168},
                              {8, 1000},
                              {11, 20000},
                              {12, 255},
                              {13, 256},
                              {14, 257},
                              {2990, 169},
                              {2991, 2}},
                             5, 0.2, 14));
  walks.push_back(cora_graph(g_cora_dir));
  HG dense = radius_graph(4000, 0.165, 15);
  dense.name = "dense4k";
  walks.push_back(dense);
  for (const HG &g : walks) {
    if (g.nq == 0) {
      report("graph " + g.name, false, fmt("missing (Cora's edges in %s?)", g_cora_dir));
      continue;
    }
    int64_t maxdeg = 0;
    for (int64_t i = 0; i < g.nq; ++i)
      maxdeg = std::max(maxdeg, g.rp[i + 1] - g.rp[i]);
    say("# graph %s: nq %lld nk %lld nnz %lld max degree %lld\n", g.name.c_str(), (long long)g.nq, (long long)g.nk,
        (long long)g.nnz(), (long long)maxdeg);
    DG d(g);
    check_transpose(g, d);
    const std::vector<std::pair<int64_t, int64_t>> HFs = {{8, 8}, {1, 7}, {4, 16}, {1, 1}, {3, 67}, {2, 64}};
    for (tg_dtype dt : {TG_F32, TG_BF16})
      for (auto hf : HFs)
        for (double keep : {1.0, 0.4})
          for (bool gat : {false, true})
            if (gat || hf.first != 1 || hf.second != 7) // attend at the odd shapes is covered above
              check_attn(g, d, dt, hf.first, hf.second, keep, gat, hf.first == 3, rng);
  }
  // Determinism: the same launch twice gives the same bits (sliced and block-wide paths).
  for (const HG &g : walks)
    if (g.nq > 0) check_repeat(g);

  say("\nSUMMARY: %d passed, %d failed\n", g_pass, g_fail);
  for (size_t i = 0; i < g_failed.size() && i < 40; ++i)
    say("  FAILED %s\n", g_failed[i].c_str());
  if (g_failed.size() > 40) say("  ... and %zu more\n", g_failed.size() - 40);
  return g_fail ? 1 : 0;
}

// ------------------------------------------------------------------ bench
template <typename T> __global__ void k_fill(T *p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const uint64_t z = splitmix64(seed ^ (i * 0x9E3779B97F4A7C15ull));
    p[i] = (T)((float)(z >> 40) * 0x1p-24f * 2.f - 1.f);
  }
}
static DBuf *filled(tg_dtype dt, size_t n, uint64_t seed) {
  DBuf *b = new DBuf(n * dsize(dt));
  if (dt == TG_F32)
    k_fill<<<1024, 256>>>((float *)b->p, n, seed);
  else
    k_fill<<<1024, 256>>>((__nv_bfloat16 *)b->p, n, seed);
  CK(cudaGetLastError());
  return b;
}

static double time_us(const std::function<void()> &f, int reps = 25) {
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
  return 1e3 * ms[ms.size() / 2];
}

struct Row {
  std::string graph, op, dt;
  double us, gb; // gb: bytes moved / 1e9 (0: not a bandwidth figure)
};
static std::vector<Row> g_rows;
static void row(const HG &g, const std::string &op, const char *dt, double us, double bytes) {
  g_rows.push_back({g.name, op, dt, us, bytes / 1e9});
  say("RESULT graph=%s op=%s dtype=%s us=%.1f%s\n", g.name.c_str(), op.c_str(), dt, us,
      bytes > 0 ? fmt(" GB/s=%.0f", bytes / 1e3 / us).c_str() : "");
}

static void bench_graph(const HG &g) {
  const int64_t E = g.nnz(), N = g.nq, W = 64, H = 4, F = 16;
  int64_t maxdeg = 0;
  for (int64_t i = 0; i < N; ++i)
    maxdeg = std::max(maxdeg, g.rp[i + 1] - g.rp[i]);
  say("# graph %s: n %lld nnz %lld avg degree %.2f max %lld\n", g.name.c_str(), (long long)N, (long long)E,
      (double)E / (double)N, (long long)maxdeg);
  DG d(g);
  const tgc_csr *c = &d.csr;
  { // transpose build
    U tp(new DBuf((g.nk + 1) * 8)), tr(new DBuf(E * 4)), te(new DBuf(E * 8)),
        ws(new DBuf(cuda_relation_transpose_workspace(g.nq, g.nk, E)));
    const double us = time_us([&] {
      TG(cuda_relation_transpose(0, g.nq, g.nk, E, c->row_ptr, c->col_idx, (int64_t *)tp->p, (int32_t *)tr->p,
                                 (int64_t *)te->p, ws->p, ws->bytes));
    });
    row(g, "transpose", "-", us, 0);
  }
  {
    U vals(filled(TG_F32, E * W, 1)), out(new DBuf(N * W * 4)), x(filled(TG_F32, N * W, 2)), eo(new DBuf(E * W * 4)),
        dx(new DBuf(N * W * 4));
    dx->zero();
    double us = time_us([&] { TG(cuda_graph_reduce_forward(0, c, TGC_GRAPH_SUM, TG_F32, W, vals->p, out->p)); });
    row(g, "reduce_sum W=64", "f32", us, E * W * 4.0 + (N + 1) * 8.0 + N * W * 4.0);
    us = time_us([&] { TG(cuda_graph_reduce_forward(0, c, TGC_GRAPH_MAX, TG_F32, W, vals->p, out->p)); });
    row(g, "reduce_max W=64", "f32", us, E * W * 4.0 + (N + 1) * 8.0 + N * W * 4.0);
    us = time_us([&] { TG(cuda_graph_gather_forward(0, c, TGC_GRAPH_SOURCE, TG_F32, W, x->p, eo->p)); });
    row(g, "gather_src W=64", "f32", us, E * W * 4.0 + E * 4.0 + (N + 1) * 8.0 + N * W * 4.0);
    us = time_us([&] { TG(cuda_graph_gather_backward(0, c, TGC_GRAPH_SOURCE, TG_F32, W, vals->p, dx->p)); });
    row(g, "gather_src_bwd W=64", "f32", us, E * W * 4.0 + E * 12.0 + (N + 1) * 8.0 + 2 * N * W * 4.0);
  }
  {
    U s(filled(TG_F32, E * H, 3)), p(new DBuf(E * H * 4)), ds(new DBuf(E * H * 4)), lse(new DBuf(H * N * 4)),
        ws(new DBuf(cuda_graph_softmax_backward_workspace(c, H)));
    ds->zero();
    double us = time_us([&] { TG(cuda_graph_softmax_forward(0, c, TG_F32, H, s->p, p->p, (float *)lse->p)); });
    row(g, "softmax H=4 fwd", "f32", us, 0);
    us = time_us([&] { TG(cuda_graph_softmax_backward(0, c, TG_F32, H, p->p, s->p, ds->p, ws->p, ws->bytes)); });
    row(g, "softmax H=4 bwd", "f32", us, 0);
  }
  for (int variant = 0; variant < 4; ++variant) { // attend f32, gat f32, gat f32 dropout, gat bf16
    const bool gat = variant > 0;
    const tg_dtype dt = variant == 3 ? TG_BF16 : TG_F32;
    const double keep = variant == 2 ? 0.9 : 1.0;
    const tgc_graph_attn a{H, F, dt, 0.2f, keep, kSeed, kCall};
    U sc(filled(dt, gat ? 1 : E * H, 4)), ed(filled(dt, N * H, 5)), es(filled(dt, N * H, 6)),
        v(filled(dt, N * H * F, 7)), out(new DBuf(N * H * F * dsize(dt))), lse(new DBuf(H * N * 4)),
        dout(filled(dt, N * H * F, 8)), dsc(new DBuf(gat ? 16 : E * H * dsize(dt))),
        dv(new DBuf(N * H * F * dsize(dt))), dedst(new DBuf(N * H * dsize(dt))), desrc(new DBuf(N * H * dsize(dt))),
        ws(new DBuf(cuda_graph_gat_backward_workspace(c, &a)));
    dsc->zero();
    dv->zero();
    dedst->zero();
    desrc->zero();
    auto fwd = [&] {
      if (gat)
        TG(cuda_graph_gat_forward(0, c, &a, ed->p, es->p, v->p, out->p, (float *)lse->p));
      else
        TG(cuda_graph_attend_forward(0, c, &a, sc->p, v->p, out->p, (float *)lse->p));
    };
    auto bwd = [&] {
      if (gat)
        TG(cuda_graph_gat_backward(0, c, &a, ed->p, es->p, v->p, out->p, dout->p, (const float *)lse->p, dedst->p,
                                   desrc->p, dv->p, ws->p, ws->bytes));
      else
        TG(cuda_graph_attend_backward(0, c, &a, sc->p, v->p, out->p, dout->p, (const float *)lse->p, dsc->p, dv->p));
    };
    const std::string op = fmt("%s H=4 F=16%s", gat ? "gat" : "attend", keep < 1 ? " keep=0.9" : "");
    row(g, op + " fwd", dname(dt), time_us(fwd), 0);
    row(g, op + " fwd+bwd", dname(dt), time_us([&] {
          fwd();
          bwd();
        }),
        0);
  }
}

// The GAT example's attention launches (forward; backward = destination + source passes) at
// Cora's shapes and on a dense graph, each with the sliced walker (default) and with one slice per
// unit (the walker before slicing), so one run shows both.
static void bench_gat_shapes(const HG &g) {
  const int64_t N = g.nq, E = g.nnz();
  int64_t maxdeg = 0;
  for (int64_t i = 0; i < N; ++i)
    maxdeg = std::max(maxdeg, g.rp[i + 1] - g.rp[i]);
  say("# graph %s: n %lld nnz %lld avg degree %.2f max %lld\n", g.name.c_str(), (long long)N, (long long)E,
      (double)E / (double)N, (long long)maxdeg);
  DG d(g);
  const tgc_csr *c = &d.csr;
  for (auto hf : std::vector<std::pair<int64_t, int64_t>>{{8, 8}, {1, 7}, {4, 16}})
    for (double keep : {1.0, 0.4}) {
      const int64_t H = hf.first, F = hf.second;
      const tgc_graph_attn a{H, F, TG_F32, 0.2f, keep, kSeed, kCall};
      U ed(filled(TG_F32, N * H, 5)), es(filled(TG_F32, N * H, 6)), v(filled(TG_F32, N * H * F, 7)),
          out(new DBuf(N * H * F * 4)), lse(new DBuf(H * N * 4)), dout(filled(TG_F32, N * H * F, 8)),
          dv(new DBuf(N * H * F * 4)), dedst(new DBuf(N * H * 4)), desrc(new DBuf(N * H * 4)),
          ws(new DBuf(cuda_graph_gat_backward_workspace(c, &a)));
      dv->zero();
      dedst->zero();
      desrc->zero();
      const int reps = E > 1000000 ? 20 : 200;
      for (int cap : {1, tgg::kMaxSlices}) {
        tgg::g_slice_cap = cap;
        const double f =
            time_us([&] { TG(cuda_graph_gat_forward(0, c, &a, ed->p, es->p, v->p, out->p, (float *)lse->p)); }, reps);
        const double b = time_us(
            [&] {
              TG(cuda_graph_gat_backward(0, c, &a, ed->p, es->p, v->p, out->p, dout->p, (const float *)lse->p, dedst->p,
                                         desrc->p, dv->p, ws->p, ws->bytes));
            },
            reps);
        // the slices graph_attend.cu picks (f32: 4-feature vectors when F % 4 == 0, else one feature
        // per chunk); forward and destination pass run N * H units, the source pass Nk * H
        const int G = tgg::lanes_for(F % 4 == 0 && F / 4 <= 32 ? F / 4 : F);
        const int S = cap == 1 ? 1 : tgg::slices_for(N * H, G);
        const std::string op =
            fmt("gat H=%lld F=%lld keep=%.1f S=%d%s", (long long)H, (long long)F, keep, S, cap == 1 ? " (forced)" : "");
        row(g, op + " fwd", "f32", f, 0);
        row(g, op + " bwd", "f32", b, 0);
      }
      tgg::g_slice_cap = tgg::kMaxSlices;
    }
}

static void run_bench(const char *file) {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  say("# device %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  if (file) {
    HG g;
    if (!read_graph(file, &g)) {
      fprintf(stderr, "cannot read graph file %s\n", file);
      exit(2);
    }
    bench_graph(g);
  } else {
    const HG cora = cora_graph(g_cora_dir);
    if (cora.nq > 0)
      bench_gat_shapes(cora);
    else
      say("# no Cora graph in %s: its rows are skipped\n", g_cora_dir);
    HG dense = radius_graph(100000, 0.0555, 3); // ~3.9x the edges of radius100k: avg degree ~68
    dense.name = "dense100k";
    bench_gat_shapes(dense);
    bench_gat_shapes(radius_graph(100000, 0.035, 1));
    bench_graph(radius_graph(100000, 0.035, 1));
    bench_graph(radius_graph(400000, 0.022, 2));
  }
  say("\n%-12s %-34s %-5s %10s %9s %8s\n", "graph", "op", "dtype", "us", "GB/s", "%4.2TB/s");
  for (const Row &r : g_rows) {
    if (r.gb > 0)
      say("%-12s %-34s %-5s %10.1f %9.0f %7.1f%%\n", r.graph.c_str(), r.op.c_str(), r.dt.c_str(), r.us,
          r.gb * 1e3 / r.us, r.gb * 1e3 / r.us / 42.0);
    else
      say("%-12s %-34s %-5s %10.1f %9s %8s\n", r.graph.c_str(), r.op.c_str(), r.dt.c_str(), r.us, "-", "-");
  }
}

int main(int argc, char **argv) {
  bool check = false, bench = false;
  const char *file = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--check"))
      check = true;
    else if (!strcmp(argv[i], "--bench"))
      bench = true;
    else if (!strcmp(argv[i], "--graph") && i + 1 < argc)
      file = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--check] [--bench [--graph FILE]]\n", argv[0]);
      return 2;
    }
  }
  if (!check && !bench) check = true;
  if (const char *out = getenv("OUT")) {
    const std::string path = std::string(out) + "/bench_graph.log";
    g_log = fopen(path.c_str(), "a");
  }
  int rc = 0;
  if (check) rc = run_check();
  if (bench) run_bench(file);
  if (g_log) fclose(g_log);
  return rc;
}
