// Check and benchmark of the GPU radius-graph builder (cuda/radius.h) against the host builder
// (host/radius.h, compiled in) and brute force.
//   bench_radius --check   every case: GPU == host bit for bit (row_ptr, col_idx, perm; host and
//                          device positions), host == brute force on the small ones, errors,
//                          allocator failures and leaks. A FAIL line per mismatch, exit 1.
//   bench_radius --bench   100k (cutoff 0.035) and 400k (0.022) uniform points in the unit cube:
//                          CUDA-event medians per phase, host positions (upload included) and
//                          device positions. A short table last; the full log goes to $OUT if set.
// Brute force rounds like the builders: x86-64 without -mfma cannot contract, and the host build
// of the bench adds no -march flag.
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <time.h>

#include <cuda_runtime.h>

#include "cuda/radius.h"
#include "host/radius.h"

// The library's device.cu provides these; the bench compiles only the radius files.
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
      fprintf(stderr, "FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                          \
      exit(2);                                                                                                         \
    }                                                                                                                  \
  } while (0)

static FILE *g_log = nullptr;
static int g_fail = 0, g_cases = 0;
static void logline(const char *fmt, ...) {
  if (!g_log) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(g_log, fmt, ap);
  va_end(ap);
}
static void failf(const char *fmt, ...) {
  char b[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b, sizeof b, fmt, ap);
  va_end(ap);
  printf("FAIL %s\n", b);
  logline("FAIL %s\n", b);
  g_fail++;
}

// ------------------------------------------------------------------ counting stream-ordered allocator
struct Pool {
  cudaStream_t s;
  std::map<void *, size_t> live;
  long long calls = 0, fail_at = -1; // fail the fail_at-th call (0-based), -1 never
  size_t peak = 0, cur = 0;
};
static void *pool_alloc(void *ctx, size_t n) {
  Pool *p = (Pool *)ctx;
  if (p->calls++ == p->fail_at) return nullptr;
  void *q = nullptr;
  if (cudaMallocAsync(&q, n, p->s) != cudaSuccess) return nullptr;
  p->live[q] = n;
  p->cur += n;
  p->peak = std::max(p->peak, p->cur);
  return q;
}
static void pool_release(void *ctx, void *q) {
  Pool *p = (Pool *)ctx;
  auto it = p->live.find(q);
  if (it == p->live.end()) {
    failf("allocator: release of %p, which is not live", q);
    return;
  }
  p->cur -= it->second;
  p->live.erase(it);
  CK(cudaFreeAsync(q, p->s));
}

// ------------------------------------------------------------------ point sets
static uint64_t rng_s = 0x1234567;
static double uni() {
  uint64_t z = (rng_s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}
struct Pts {
  int64_t n = 0;
  int dim = 3;
  tg_dtype dt = TG_F64;
  std::vector<unsigned char> raw;
  Pts() = default;
  Pts(int64_t n_, int dim_, tg_dtype dt_)
      : n(n_), dim(dim_), dt(dt_), raw((size_t)std::max<int64_t>(n_, 1) * dim_ * (dt_ == TG_F32 ? 4 : 8)) {}
  void put(int64_t i, int d, double x) {
    if (dt == TG_F32)
      ((float *)raw.data())[i * dim + d] = (float)x;
    else
      ((double *)raw.data())[i * dim + d] = x;
  }
  double at(int64_t i, int d) const {
    return dt == TG_F32 ? ((const float *)raw.data())[i * dim + d] : ((const double *)raw.data())[i * dim + d];
  }
  const void *p() const { return raw.data(); }
  size_t bytes() const { return (size_t)n * dim * (dt == TG_F32 ? 4 : 8); }
};
static Pts uniform(int64_t n, int dim, tg_dtype dt, double lo, double hi) {
  Pts s(n, dim, dt);
  for (int64_t i = 0; i < n; i++)
    for (int d = 0; d < dim; d++)
      s.put(i, d, lo + (hi - lo) * uni());
  return s;
}
static Pts lattice(int m, int dim, tg_dtype dt, double origin, double spacing) {
  int64_t n = 1;
  for (int d = 0; d < dim; d++)
    n *= m;
  Pts s(n, dim, dt);
  std::vector<int64_t> ord(n);
  for (int64_t i = 0; i < n; i++)
    ord[i] = i;
  for (int64_t i = n - 1; i > 0; i--)
    std::swap(ord[i], ord[(int64_t)(uni() * (double)(i + 1))]);
  for (int64_t i = 0; i < n; i++) {
    int64_t v = ord[i];
    for (int d = 0; d < dim; d++, v /= m)
      s.put(i, d, origin + spacing * (double)(v % m));
  }
  return s;
}

// Brute force: every pair, the builders' rule.
static void brute(const Pts &D, const Pts &S, double c, int64_t k, bool square, bool loops, std::vector<int64_t> &rp,
                  std::vector<int32_t> &col) {
  double cc = c * c;
  rp.assign(1, 0);
  col.clear();
  std::vector<std::pair<double, int32_t>> row;
  for (int64_t i = 0; i < D.n; i++) {
    row.clear();
    for (int64_t j = 0; j < S.n; j++) {
      if (square && !loops && i == j) continue;
      double s = 0;
      for (int d = 0; d < D.dim; d++) {
        double df = S.at(j, d) - D.at(i, d);
        double sq = df * df;
        s = d == 0 ? sq : s + sq;
      }
      if (s <= cc) row.push_back({s, (int32_t)j});
    }
    if (k > 0 && (int64_t)row.size() > k) {
      std::sort(row.begin(), row.end());
      row.resize((size_t)k);
    }
    size_t at = col.size();
    for (auto &e : row)
      col.push_back(e.second);
    std::sort(col.begin() + at, col.end());
    rp.push_back((int64_t)col.size());
  }
}

// ------------------------------------------------------------------ one case
struct Gpu {
  cudaStream_t s;
  Pool pool;
  tgc_allocator al;
};

struct Csr {
  std::vector<int64_t> rp, perm;
  std::vector<int32_t> col;
  int64_t nnz = -1;
};

// GPU build (host or device positions) copied back; returns the status.
static tg_status gpu_build(Gpu &g, const Pts &D, const Pts *S, double c, int64_t k, bool square, bool loops,
                           bool on_device, bool want_perm, Csr &out) {
  void *dd = nullptr, *ds = nullptr;
  int64_t *dperm = nullptr;
  if (on_device) {
    CK(cudaMalloc(&dd, std::max<size_t>(D.bytes(), 1)));
    CK(cudaMemcpy(dd, D.p(), D.bytes(), cudaMemcpyHostToDevice));
    if (S) {
      CK(cudaMalloc(&ds, std::max<size_t>(S->bytes(), 1)));
      CK(cudaMemcpy(ds, S->p(), S->bytes(), cudaMemcpyHostToDevice));
    }
  }
  if (want_perm) CK(cudaMalloc(&dperm, (size_t)std::max<int64_t>(D.n, 1) * 8));
  cuda_radius_args a = {};
  a.n_dst = D.n;
  a.n_src = square ? D.n : S->n;
  a.dim = D.dim;
  a.dtype = D.dt;
  a.pos_dst = on_device ? dd : D.p();
  a.pos_src = square ? nullptr : on_device ? ds : S->p();
  a.on_device = on_device;
  a.cutoff = c;
  a.max_neighbors = k;
  a.square = square;
  a.self_loops = loops;
  int64_t *rp = nullptr, nnz = -1;
  int32_t *col = nullptr;
  tg_status st = cuda_radius_build(g.s, &a, &g.al, &rp, &col, &nnz, dperm);
  if (st == TG_OK) {
    out.nnz = nnz;
    out.rp.resize((size_t)D.n + 1);
    out.col.resize((size_t)nnz);
    CK(cudaMemcpyAsync(out.rp.data(), rp, out.rp.size() * 8, cudaMemcpyDeviceToHost, g.s));
    if (nnz) CK(cudaMemcpyAsync(out.col.data(), col, out.col.size() * 4, cudaMemcpyDeviceToHost, g.s));
    if (want_perm) {
      out.perm.resize((size_t)D.n);
      if (D.n) CK(cudaMemcpyAsync(out.perm.data(), dperm, out.perm.size() * 8, cudaMemcpyDeviceToHost, g.s));
    }
    pool_release(&g.pool, rp);
    pool_release(&g.pool, col);
  } else if (rp || col || nnz != 0) {
    failf("failed build returned outputs (status %d)", (int)st);
  }
  CK(cudaStreamSynchronize(g.s));
  CK(cudaGetLastError());
  if (!g.pool.live.empty()) {
    failf("allocator: %zu allocations still live after the build (status %d)", g.pool.live.size(), (int)st);
    for (auto &e : g.pool.live)
      CK(cudaFreeAsync(e.first, g.s));
    g.pool.live.clear();
    g.pool.cur = 0;
  }
  cudaFree(dd), cudaFree(ds), cudaFree(dperm);
  return st;
}

static bool same(const char *name, const char *what, const Csr &a, const Csr &b, bool perm) {
  if (a.nnz != b.nnz) {
    failf("%s: %s nnz %lld != %lld", name, what, (long long)a.nnz, (long long)b.nnz);
    return false;
  }
  for (size_t i = 0; i < a.rp.size(); i++)
    if (a.rp[i] != b.rp[i]) {
      failf("%s: %s row_ptr[%zu] %lld != %lld", name, what, i, (long long)a.rp[i], (long long)b.rp[i]);
      return false;
    }
  for (size_t e = 0; e < a.col.size(); e++)
    if (a.col[e] != b.col[e]) {
      failf("%s: %s col_idx[%zu] %d != %d", name, what, e, a.col[e], b.col[e]);
      return false;
    }
  if (perm)
    for (size_t r = 0; r < a.perm.size(); r++)
      if (a.perm[r] != b.perm[r]) {
        failf("%s: %s perm[%zu] %lld != %lld", name, what, r, (long long)a.perm[r], (long long)b.perm[r]);
        return false;
      }
  return true;
}

// Host builder, optional brute force, GPU from host and from device positions: all equal.
static void run_case(Gpu &g, const char *name, const Pts &D, const Pts *S, double c, int64_t k, bool square, bool loops,
                     bool with_brute) {
  g_cases++;
  host_radius_args ha = {D.n, square ? D.n : S->n, D.dim, D.dt, D.p(), square ? nullptr : S->p(), c, k, square, loops};
  Csr h;
  h.perm.resize((size_t)D.n);
  int64_t *rp = nullptr;
  int32_t *col = nullptr;
  char msg[256] = "";
  tg_status st = host_radius_build(&ha, &rp, &col, &h.nnz, h.perm.data(), msg, sizeof msg);
  if (st != TG_OK) {
    failf("%s: host status %d: %s", name, (int)st, msg);
    return;
  }
  h.rp.assign(rp, rp + D.n + 1);
  h.col.assign(col, col + h.nnz);
  free(rp), free(col);
  bool ok = true;
  if (with_brute) {
    Csr b;
    brute(D, square ? D : *S, c, k, square, loops, b.rp, b.col);
    b.nnz = b.rp.back();
    ok = same(name, "host vs brute force", h, b, false);
  }
  for (int dev = 0; dev < 2 && ok; dev++) {
    Csr d;
    st = gpu_build(g, D, S, c, k, square, loops, dev, true, d);
    if (st != TG_OK) {
      failf("%s: GPU (%s positions) status %d: %s", name, dev ? "device" : "host", (int)st, tgc_error());
      ok = false;
    } else
      ok = same(name, dev ? "GPU (device positions) vs host" : "GPU (host positions) vs host", d, h, true);
  }
  logline("%s %-48s n_dst %8lld n_src %8lld nnz %10lld\n", ok ? "ok  " : "BAD ", name, (long long)D.n,
          (long long)ha.n_src, (long long)h.nnz);
}

static void expect_error(Gpu &g, const char *name, const Pts &D, const Pts *S, cuda_radius_args a, bool on_device,
                         const char *needle) {
  g_cases++;
  Csr d;
  g_err[0] = 0;
  tg_status st;
  if (!on_device) {
    int64_t *rp = (int64_t *)1, nnz = 5;
    int32_t *col = (int32_t *)1;
    st = cuda_radius_build(g.s, &a, &g.al, &rp, &col, &nnz, nullptr);
    if (rp || col || nnz) failf("%s: outputs not cleared on failure", name);
    CK(cudaStreamSynchronize(g.s));
    if (!g.pool.live.empty()) failf("%s: %zu allocations live after the failure", name, g.pool.live.size());
  } else {
    st = gpu_build(g, D, S, a.cutoff, a.max_neighbors, a.square, a.self_loops, true, true, d);
  }
  if (st != TG_ERR_INVALID_ARGUMENT || !strstr(g_err, needle))
    failf("%s: status %d, message \"%s\" (expected TG_ERR_INVALID_ARGUMENT naming \"%s\")", name, (int)st, g_err,
          needle);
  else
    logline("ok   %-48s -> %s\n", name, g_err);
}

// Random small configurations: mixtures of uniform, lattice and duplicate points, random cutoffs
// (often exactly a lattice distance), max_neighbors, square / bipartite.
static void fill_mixed(Pts &s, double spacing) {
  for (int64_t i = 0; i < s.n; i++) {
    double r = uni();
    for (int d = 0; d < s.dim; d++)
      s.put(i, d, r < 0.4 ? uni() : r < 0.8 ? spacing * (double)(int)(uni() * 8) : (i > 0 ? s.at(i - 1, d) : 0.5));
  }
}
static void fuzz_cases(Gpu &g, int count) {
  char name[128];
  for (int q = 0; q < count; q++) {
    int dim = 1 + (int)(uni() * 3);
    bool sq = uni() < 0.6, loops = sq && uni() < 0.5;
    tg_dtype dt = uni() < 0.5 ? TG_F32 : TG_F64;
    double spacing = uni() < 0.5 ? 0.125 : 0.1;
    double c = uni() < 0.5 ? spacing * (double)(1 + (int)(uni() * 3)) : 0.02 + uni() * 0.3;
    int64_t k = uni() < 0.5 ? 0 : 1 + (int64_t)(uni() * 12);
    Pts D(1 + (int64_t)(uni() * 400), dim, dt), S((int64_t)(uni() * 400), dim, dt);
    fill_mixed(D, spacing);
    fill_mixed(S, spacing);
    snprintf(name, sizeof name, "fuzz %d: %dD %s %s c=%.4g k=%lld", q, dim, dt == TG_F32 ? "f32" : "f64",
             sq ? (loops ? "square+loops" : "square") : "bipartite", c, (long long)k);
    run_case(g, name, D, sq ? nullptr : &S, c, k, sq, loops, true);
  }
}

// ------------------------------------------------------------------ --check
static void check(Gpu &g) {
  char name[128];
  const tg_dtype dts[2] = {TG_F32, TG_F64};
  for (int dim = 1; dim <= 3; dim++)
    for (int t = 0; t < 2; t++) {
      double c = dim == 1 ? 0.004 : dim == 2 ? 0.04 : 0.1;
      Pts D = uniform(1500, dim, dts[t], -0.3, 0.7), S = uniform(1100, dim, dts[t], -0.5, 0.6);
      for (int loops = 0; loops < 2; loops++)
        for (int64_t k : {0, 5, 1}) {
          snprintf(name, sizeof name, "uniform %dD %s square loops=%d k=%lld", dim, t ? "f64" : "f32", loops,
                   (long long)k);
          run_case(g, name, D, nullptr, c, k, true, loops, true);
        }
      for (int64_t k : {0, 7}) {
        snprintf(name, sizeof name, "uniform %dD %s bipartite k=%lld", dim, t ? "f64" : "f32", (long long)k);
        run_case(g, name, D, &S, c, k, false, false, true);
      }
    }
  printf("random cases done (%d failures so far)\n", g_fail);
  for (int dim = 1; dim <= 3; dim++)
    for (double cs : {0.25, 0.1, 1.0})
      for (int t = 0; t < 2; t++) {
        int m = dim == 1 ? 300 : dim == 2 ? 30 : 10;
        Pts L = lattice(m, dim, dts[t], cs == 1.0 ? -3.0 : 0.0, cs);
        for (int64_t k : {0, 3, 7}) {
          snprintf(name, sizeof name, "lattice %dD c=%g %s k=%lld", dim, cs, t ? "f64" : "f32", (long long)k);
          run_case(g, name, L, nullptr, cs, k, true, k == 7, true);
        }
        snprintf(name, sizeof name, "lattice %dD c=diag(%g) %s", dim, cs, t ? "f64" : "f32");
        run_case(g, name, L, nullptr, cs * std::sqrt((double)dim), 0, true, false, true);
      }
  for (int dim = 1; dim <= 3; dim++) {
    int m = dim == 1 ? 200 : dim == 2 ? 20 : 8;
    Pts A = lattice(m, dim, TG_F64, 0.0, 1.0 + 0x1p-16), B = lattice(m, dim, TG_F64, 0.0, 1.0);
    snprintf(name, sizeof name, "cell borders %dD bipartite", dim);
    run_case(g, name, A, &B, 1.0, 0, false, false, true);
    snprintf(name, sizeof name, "cell borders %dD square", dim);
    run_case(g, name, A, nullptr, 1.0 + 0x1p-16, 0, true, false, true);
  }
  printf("lattice cases done (%d failures so far)\n", g_fail);
  for (int dim = 1; dim <= 3; dim++) {
    Pts sites = uniform(10, dim, TG_F64, 0, 1), D(300, dim, TG_F64);
    for (int64_t i = 0; i < 300; i++)
      for (int d = 0; d < dim; d++)
        D.put(i, d, sites.at((int64_t)(uni() * 10), d));
    for (int loops = 0; loops < 2; loops++)
      for (int k = 0; k < 12; k += 4) {
        snprintf(name, sizeof name, "duplicates %dD loops=%d k=%d", dim, loops, k);
        run_case(g, name, D, nullptr, 0.2, k, true, loops, true);
      }
    // every point identical: rows of 400 (> 64: the segmented sort), max_neighbors heaps
    Pts I(400, dim, TG_F32), J(300, dim, TG_F32);
    for (int64_t i = 0; i < 400; i++)
      for (int d = 0; d < dim; d++)
        I.put(i, d, 0.3), J.put(i % 300, d, 0.3);
    for (int64_t k : {0, 10, 100}) {
      snprintf(name, sizeof name, "identical %dD square loops k=%lld", dim, (long long)k);
      run_case(g, name, I, nullptr, 0.01, k, true, true, true);
      snprintf(name, sizeof name, "identical %dD bipartite k=%lld", dim, (long long)k);
      run_case(g, name, I, &J, 0.01, k, false, false, true);
    }
    Pts one = uniform(1, dim, TG_F64, 0, 1), none(0, dim, TG_F64);
    snprintf(name, sizeof name, "N=1 %dD loops", dim);
    run_case(g, name, one, nullptr, 0.5, 0, true, true, true);
    snprintf(name, sizeof name, "N=1 %dD no loops", dim);
    run_case(g, name, one, nullptr, 0.5, 0, true, false, true);
    snprintf(name, sizeof name, "n_dst=0 %dD", dim);
    run_case(g, name, none, &D, 0.5, 0, false, false, true);
    snprintf(name, sizeof name, "n_src=0 %dD", dim);
    run_case(g, name, D, &none, 0.5, 0, false, false, true);
    snprintf(name, sizeof name, "N=0 %dD square", dim);
    run_case(g, name, none, nullptr, 0.5, 0, true, true, true);
  }
  printf("degenerate cases done (%d failures so far)\n", g_fail);
  for (int dim = 1; dim <= 3; dim++) {
    int m = dim == 1 ? 100 : dim == 2 ? 12 : 6;
    Pts L = lattice(m, dim, TG_F64, 1e15, 1.0);
    snprintf(name, sizeof name, "lattice at 1e15 %dD", dim);
    run_case(g, name, L, nullptr, 1.0, 0, true, false, true);
    Pts W(600, dim, TG_F64);
    for (int64_t i = 0; i < 600; i += 2)
      for (int d = 0; d < dim; d++) {
        double x = (uni() * 2 - 1) * 1e300;
        W.put(i, d, x), W.put(i + 1, d, x + std::fabs(x) * 1e-15 * uni());
      }
    snprintf(name, sizeof name, "spread 1e300 %dD c=1e285", dim);
    run_case(g, name, W, nullptr, 1e285, 0, true, false, true);
    snprintf(name, sizeof name, "spread 1e300 %dD c=1e200 (c*c = inf)", dim);
    run_case(g, name, W, nullptr, 1e200, 3, true, false, true);
    snprintf(name, sizeof name, "spread 1e300 %dD c=1e154", dim);
    run_case(g, name, W, nullptr, 1e154, 0, true, true, true);
    Pts X(4, dim, TG_F64);
    for (int d = 0; d < dim; d++)
      X.put(0, d, -1.7e308), X.put(1, d, 1.7e308), X.put(2, d, 1.7e308), X.put(3, d, 0.0);
    snprintf(name, sizeof name, "+-1.7e308 %dD", dim);
    run_case(g, name, X, nullptr, 1.0, 0, true, true, true);
    snprintf(name, sizeof name, "+-1.7e308 %dD c=1e300", dim);
    run_case(g, name, X, nullptr, 1e300, 0, true, true, true);
    Pts O(400, dim, TG_F64);
    for (int64_t i = 0; i < 400; i += 2)
      for (int d = 0; d < dim; d++) {
        double x = uni() * 1e12;
        O.put(i, d, x), O.put(i + 1, d, x + (uni() - 0.5) * 1e-3);
      }
    snprintf(name, sizeof name, "1e12 box c=1e-3 %dD", dim);
    run_case(g, name, O, nullptr, 1e-3, 0, true, false, true);
    Pts T(300, dim, TG_F64);
    for (int64_t i = 0; i < 300; i++)
      for (int d = 0; d < dim; d++)
        T.put(i, d, (double)(i % 7) * 1e-201 + (double)(i % 3) * 1e-160);
    for (double tc : {1e-200, 1e-160, 3e-154}) {
      snprintf(name, sizeof name, "tiny c=%g %dD", tc, dim);
      run_case(g, name, T, nullptr, tc, 0, true, false, true);
    }
    Pts Z(6, dim, TG_F64);
    for (int64_t i = 0; i < 6; i++)
      for (int d = 0; d < dim; d++)
        Z.put(i, d, i % 2 ? -0.0 : 0.0);
    snprintf(name, sizeof name, "signed zeros %dD", dim);
    run_case(g, name, Z, nullptr, 1e-300, 2, true, true, true);
    Pts K(500, dim, TG_F32);
    for (int64_t i = 0; i < 500; i++)
      for (int d = 0; d < dim; d++)
        K.put(i, d, (i < 250 ? -1000.0 : 5000.0) + uni() * 0.5);
    snprintf(name, sizeof name, "two clusters %dD", dim);
    run_case(g, name, K, nullptr, 0.05, 0, true, false, true);
  }
  printf("extreme cases done (%d failures so far)\n", g_fail);
  fuzz_cases(g, 300);
  printf("fuzz cases done (%d failures so far)\n", g_fail);

  // large: GPU vs host only
  {
    Pts P = uniform(100000, 3, TG_F32, 0, 1);
    run_case(g, "100k 3D f32 square c=0.035", P, nullptr, 0.035, 0, true, false, false);
    run_case(g, "100k 3D f32 square loops c=0.035 k=8", P, nullptr, 0.035, 8, true, true, false);
    Pts Q = uniform(400000, 3, TG_F32, 0, 1);
    run_case(g, "400k 3D f32 square c=0.022", Q, nullptr, 0.022, 0, true, false, false);
    Pts D = uniform(200000, 3, TG_F64, 0, 1), S = uniform(150000, 3, TG_F64, -0.1, 0.9);
    run_case(g, "200k x 150k 3D f64 bipartite k=16", D, &S, 0.04, 16, false, false, false);
    run_case(g, "200k x 150k 3D f64 bipartite", D, &S, 0.04, 0, false, false, false);
    Pts E = uniform(100000, 2, TG_F64, 0, 1), F = uniform(100000, 1, TG_F32, 0, 1);
    run_case(g, "100k 2D f64 square c=0.01", E, nullptr, 0.01, 0, true, false, false);
    run_case(g, "100k 1D f32 square c=1e-4", F, nullptr, 1e-4, 4, true, false, false);
    // a clustered set with long rows (segmented sort) and a long-row max_neighbors
    Pts C(20000, 3, TG_F32);
    for (int64_t i = 0; i < 20000; i++)
      for (int d = 0; d < 3; d++)
        C.put(i, d, (i % 4 == 0 ? 0.5 : uni()) + 0.001 * uni());
    run_case(g, "20k 3D clustered c=0.05", C, nullptr, 0.05, 0, true, false, false);
    run_case(g, "20k 3D clustered c=0.05 k=70", C, nullptr, 0.05, 70, true, true, false);
  }
  printf("large cases done (%d failures so far)\n", g_fail);

  // errors
  {
    Pts D = uniform(20, 3, TG_F64, 0, 1), S = uniform(10, 3, TG_F32, 0, 1), D32 = uniform(20, 3, TG_F32, 0, 1);
    cuda_radius_args a = {};
    a.n_dst = a.n_src = 20, a.dim = 3, a.dtype = TG_F64, a.pos_dst = D.p(), a.cutoff = 0.3, a.square = 1;
    D.put(7, 1, NAN);
    expect_error(g, "NaN in pos_dst point 7 (host positions)", D, nullptr, a, false, "pos_dst point 7 ");
    expect_error(g, "NaN in pos_dst point 7 (device positions)", D, nullptr, a, true, "pos_dst point 7 ");
    D.put(7, 1, 0.5);
    D.put(19, 2, -INFINITY);
    expect_error(g, "-inf in pos_dst point 19", D, nullptr, a, false, "pos_dst point 19");
    D.put(19, 2, 0.5);
    cuda_radius_args b = {};
    b.n_dst = 20, b.n_src = 10, b.dim = 3, b.dtype = TG_F32, b.pos_dst = D32.p(), b.pos_src = S.p(), b.cutoff = 0.3;
    S.put(3, 0, INFINITY);
    expect_error(g, "inf in pos_src point 3 (f32)", D32, &S, b, false, "pos_src point 3 ");
    expect_error(g, "inf in pos_src point 3 (f32, device)", D32, &S, b, true, "pos_src point 3 ");
    S.put(3, 0, 0.5);
    cuda_radius_args c = b;
    c.dim = 4;
    expect_error(g, "dim 4", D32, &S, c, false, "dim");
    c = b, c.dtype = TG_F16;
    expect_error(g, "dtype f16", D32, &S, c, false, "f32 or f64");
    c = b, c.cutoff = 0;
    expect_error(g, "cutoff 0", D32, &S, c, false, "cutoff");
    c = b, c.cutoff = NAN;
    expect_error(g, "cutoff NaN", D32, &S, c, false, "cutoff");
    c = b, c.max_neighbors = -1;
    expect_error(g, "max_neighbors -1", D32, &S, c, false, "max_neighbors");
    c = b, c.square = 1;
    expect_error(g, "square with n_src != n_dst", D32, &S, c, false, "square");
    c = b, c.self_loops = 1;
    expect_error(g, "self loops on a bipartite graph", D32, &S, c, false, "self loops");
    c = b, c.pos_src = nullptr;
    expect_error(g, "NULL pos_src", D32, &S, c, false, "NULL");
    c = b, c.n_src = (int64_t)INT32_MAX + 1;
    expect_error(g, "n_src 2^31", D32, &S, c, false, "counts");
  }
  // allocator failures: fail each allocation in turn; every failure must be TG_ERR_OUT_OF_MEMORY
  // and leave nothing allocated
  {
    Pts P = uniform(3000, 3, TG_F32, 0, 1);
    for (int64_t k : {0, 4})
      for (long long f = 0;; f++) {
        g_cases++;
        g.pool.calls = 0;
        g.pool.fail_at = f;
        Csr d;
        tg_status st = gpu_build(g, P, nullptr, 0.2, k, true, false, false, true, d);
        g.pool.fail_at = -1;
        if (st == TG_OK) {
          logline("ok   allocator failure sweep k=%lld: %lld allocations\n", (long long)k, f);
          break;
        }
        if (st != TG_ERR_OUT_OF_MEMORY) {
          failf("allocation %lld failed: status %d (%s), expected TG_ERR_OUT_OF_MEMORY", f, (int)st, g_err);
          break;
        }
        if (f > 32) {
          failf("allocator failure sweep does not end");
          break;
        }
      }
  }
  printf("%d cases, %d failed\n", g_cases, g_fail);
}

// ------------------------------------------------------------------ --bench
static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct BenchRow {
  std::string what;
  double total, wall, ph[CUDA_RADIUS_EVENTS - 1];
  long long nnz;
  double target;
};

static BenchRow bench_one(Gpu &g, const Pts &P, double c, bool on_device, bool perm, double target, int reps) {
  cudaEvent_t ev[CUDA_RADIUS_EVENTS];
  for (auto &e : ev)
    CK(cudaEventCreate(&e));
  void *dp = nullptr;
  int64_t *dperm = nullptr;
  if (on_device) {
    CK(cudaMalloc(&dp, P.bytes()));
    CK(cudaMemcpy(dp, P.p(), P.bytes(), cudaMemcpyHostToDevice));
  }
  if (perm) CK(cudaMalloc(&dperm, (size_t)P.n * 8));
  cuda_radius_args a = {};
  a.n_dst = a.n_src = P.n, a.dim = P.dim, a.dtype = P.dt, a.pos_dst = on_device ? dp : P.p(), a.on_device = on_device;
  a.cutoff = c, a.square = 1, a.phase_events = ev;
  std::vector<double> tot, wall, ph[CUDA_RADIUS_EVENTS - 1];
  long long nnz = 0;
  for (int r = 0; r < reps + 3; r++) {
    int64_t *rp, n;
    int32_t *col;
    CK(cudaStreamSynchronize(g.s));
    struct timespec w0, w1;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    tg_status st = cuda_radius_build(g.s, &a, &g.al, &rp, &col, &n, dperm);
    if (st != TG_OK) {
      failf("bench build: status %d: %s", (int)st, tgc_error());
      break;
    }
    CK(cudaStreamSynchronize(g.s));
    clock_gettime(CLOCK_MONOTONIC, &w1);
    nnz = n;
    if (r >= 3) {
      float ms;
      CK(cudaEventElapsedTime(&ms, ev[0], ev[CUDA_RADIUS_EVENTS - 1]));
      tot.push_back(ms);
      for (int p = 0; p + 1 < CUDA_RADIUS_EVENTS; p++) {
        CK(cudaEventElapsedTime(&ms, ev[p], ev[p + 1]));
        ph[p].push_back(ms);
      }
      wall.push_back((w1.tv_sec - w0.tv_sec) * 1e3 + (w1.tv_nsec - w0.tv_nsec) * 1e-6);
    }
    pool_release(&g.pool, rp);
    pool_release(&g.pool, col);
  }
  CK(cudaStreamSynchronize(g.s));
  BenchRow row;
  char what[128];
  snprintf(what, sizeof what, "n=%lld c=%g %s %s%s", (long long)P.n, c, P.dt == TG_F32 ? "f32" : "f64",
           on_device ? "device-pos" : "host-pos", perm ? " +perm" : "");
  row.what = what;
  row.total = tot.empty() ? INFINITY : median(tot); // a failed build misses its target
  row.wall = wall.empty() ? INFINITY : median(wall);
  for (int p = 0; p + 1 < CUDA_RADIUS_EVENTS; p++)
    row.ph[p] = median(ph[p]);
  row.nnz = nnz;
  row.target = target;
  for (auto &e : ev)
    CK(cudaEventDestroy(e));
  cudaFree(dp), cudaFree(dperm);
  return row;
}

static void bench(Gpu &g) {
  std::vector<BenchRow> rows;
  const int reps = 21;
  Pts P1 = uniform(100000, 3, TG_F32, 0, 1), P4 = uniform(400000, 3, TG_F32, 0, 1);
  Pts P1d = uniform(100000, 3, TG_F64, 0, 1);
  rows.push_back(bench_one(g, P1, 0.035, false, false, 1.0, reps));
  rows.push_back(bench_one(g, P1, 0.035, false, true, 1.0, reps));
  rows.push_back(bench_one(g, P1, 0.035, true, false, 1.0, reps));
  rows.push_back(bench_one(g, P1d, 0.035, false, false, 1.0, reps));
  rows.push_back(bench_one(g, P4, 0.022, false, false, 3.0, reps));
  rows.push_back(bench_one(g, P4, 0.022, false, true, 3.0, reps));
  rows.push_back(bench_one(g, P4, 0.022, true, false, 3.0, reps));
  printf("\nradius graph, GPU, square without self loops; CUDA-event medians of %d runs (ms)\n", reps);
  printf("%-36s %9s %7s %7s %7s %7s %7s %7s %7s %7s  %s\n", "case", "nnz", "upload", "cells", "count", "fill", "perm",
         "total", "wall", "target", "");
  for (auto &r : rows) {
    bool ok = r.total <= r.target && r.wall <= r.target;
    printf("%-36s %9lld %7.3f %7.3f %7.3f %7.3f %7.3f %7.3f %7.3f %7.1f  %s\n", r.what.c_str(), r.nnz, r.ph[0], r.ph[1],
           r.ph[2], r.ph[3], r.ph[4], r.total, r.wall, r.target, ok ? "met" : "MISSED");
    logline("RESULT %s nnz %lld upload %.4f cells %.4f count %.4f fill %.4f perm %.4f total %.4f wall %.4f\n",
            r.what.c_str(), r.nnz, r.ph[0], r.ph[1], r.ph[2], r.ph[3], r.ph[4], r.total, r.wall);
  }
  int missed = 0;
  for (auto &r : rows)
    missed += !(r.total <= r.target && r.wall <= r.target);
  printf("(fill includes the host round trip for nnz; wall = host clock from the call to the stream's end)\n");
  printf("targets: %s (%d of %zu missed)\n", missed ? "MISSED" : "all met", missed, rows.size());
}

int main(int argc, char **argv) {
  bool do_check = false, do_bench = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--check"))
      do_check = true;
    else if (!strcmp(argv[i], "--bench"))
      do_bench = true;
  }
  if (!do_check && !do_bench) {
    fprintf(stderr, "usage: %s --check | --bench\n", argv[0]);
    return 2;
  }
  if (const char *out = getenv("OUT")) {
    std::string f = std::string(out) + (do_check ? "/radius_check.log" : "/radius_bench.log");
    g_log = fopen(f.c_str(), "w");
  }
  Gpu g;
  CK(cudaSetDevice(0));
  CK(cudaStreamCreateWithFlags(&g.s, cudaStreamNonBlocking));
  cudaMemPool_t mp;
  CK(cudaDeviceGetDefaultMemPool(&mp, 0));
  uint64_t keep = UINT64_MAX;
  CK(cudaMemPoolSetAttribute(mp, cudaMemPoolAttrReleaseThreshold, &keep));
  g.pool.s = g.s;
  g.al.alloc = pool_alloc;
  g.al.release = pool_release;
  g.al.ctx = &g.pool;
  if (do_check) check(g);
  if (do_bench) bench(g);
  CK(cudaStreamSynchronize(g.s));
  CK(cudaStreamDestroy(g.s));
  if (g_log) fclose(g_log);
  if (do_check)
    printf(g_fail ? "FAIL bench_radius --check: %d failures\n" : "PASS bench_radius --check\n", g_fail);
  else if (g_fail)
    printf("FAIL bench_radius --bench: %d failures\n", g_fail);
  return g_fail ? 1 : 0;
}
