// Host side of bench_attention_csr: random numbers, graphs (CSR + the tiny CPU transpose), and the
// float64 reference of CSR / dense / causal attention. Independent simple loops; the dropout mask
// is tiga's rule through host_attn_kept (host/attention.h).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "host/attention.h"

// ------------------------------------------------------------------ host helpers
static uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
struct Rng {
  uint64_t s;
  uint64_t next() { return s = splitmix64(s); }
  double uni() { return (double)(next() >> 11) * 0x1.0p-53; }
  int64_t below(int64_t n) { return (int64_t)(uni() * (double)n); }
  double normal() { return std::sqrt(-2.0 * std::log(uni() + 1e-300)) * std::cos(6.283185307179586 * uni()); }
};
static size_t dsize(tg_dtype dt) { return dt == TG_F32 ? 4 : 2; }
static const char *dname(tg_dtype dt) { return dt == TG_F32 ? "f32" : dt == TG_F16 ? "f16" : "bf16"; }
// x rounded to dt and stored as element i of raw; returns the rounded value.
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

// ------------------------------------------------------------------ graphs
struct Graph {
  int64_t nq = 0, nk = 0;
  std::vector<int64_t> rp, tp, te;
  std::vector<int32_t> col, tr;
  int64_t nnz() const { return (int64_t)col.size(); }
};

static void build_transpose(Graph &g);
// Rows -> CSR (sorted, unique) and its transpose.
static Graph make_graph(int64_t nq, int64_t nk, std::vector<std::vector<int32_t>> &rows) {
  Graph g;
  g.nq = nq, g.nk = nk;
  g.rp.assign(nq + 1, 0);
  for (int64_t i = 0; i < nq; ++i) {
    std::sort(rows[i].begin(), rows[i].end());
    rows[i].erase(std::unique(rows[i].begin(), rows[i].end()), rows[i].end());
    g.rp[i + 1] = g.rp[i] + (int64_t)rows[i].size();
    g.col.insert(g.col.end(), rows[i].begin(), rows[i].end());
  }
  build_transpose(g);
  return g;
}

// The tiny CPU transpose: source-major, destinations ascending (rows are visited in order).
static void build_transpose(Graph &g) {
  const int64_t nq = g.nq, nk = g.nk;
  g.tp.assign(nk + 1, 0);
  for (int32_t j : g.col)
    g.tp[j + 1]++;
  for (int64_t j = 0; j < nk; ++j)
    g.tp[j + 1] += g.tp[j];
  std::vector<int64_t> pos(g.tp.begin(), g.tp.end() - 1);
  g.tr.resize(g.col.size());
  g.te.resize(g.col.size());
  for (int64_t i = 0; i < nq; ++i)
    for (int64_t e = g.rp[i]; e < g.rp[i + 1]; ++e) {
      const int64_t t = pos[g.col[e]]++;
      g.tr[t] = (int32_t)i, g.te[t] = e;
    }
}

enum GKind { G_RANDOM, G_DENSE, G_CAUSAL, G_EMPTY };

// Random graph: degrees 0..maxdeg, about 1 in 8 rows (and the first and last) empty, self loops
// on the diagonal now and then, a hub row (hub_deg keys) and a hub source (key nk/2 in ~90 % of
// the rows).
static Graph random_graph(Rng &r, int64_t nq, int64_t nk, int maxdeg, int64_t hub_deg) {
  std::vector<std::vector<int32_t>> rows(nq);
  const int64_t hub_row = nq / 3, hub_src = nk / 2;
  for (int64_t i = 0; i < nq; ++i) {
    if (i == 0 || i == nq - 1 || r.below(8) == 0) continue;
    const int64_t d = i == hub_row ? std::min(hub_deg, nk) : r.below(maxdeg + 1);
    for (int64_t c = 0; c < d; ++c)
      rows[i].push_back((int32_t)(i == hub_row ? (c * nk) / d : r.below(nk)));
    if (i < nk && r.below(3) == 0) rows[i].push_back((int32_t)i);
    if (r.below(10) != 0) rows[i].push_back((int32_t)hub_src);
  }
  return make_graph(nq, nk, rows);
}

static Graph pattern_graph(GKind k, int64_t nq, int64_t nk) {
  std::vector<std::vector<int32_t>> rows(nq);
  for (int64_t i = 0; i < nq; ++i)
    for (int64_t j = 0; j < nk; ++j)
      if (k == G_DENSE || (k == G_CAUSAL && j <= i + nk - nq)) rows[i].push_back((int32_t)j);
  return make_graph(nq, nk, rows);
}

// Uniform points in the unit cube, edges between points closer than rc (no self loops), found
// through a grid of cells of side >= rc. sorted: points renumbered in cell order (locality).
static Graph radius_graph(int64_t n, double rc, uint64_t seed, bool sorted) {
  Rng r{seed};
  std::vector<float> x(n * 3);
  for (auto &c : x)
    c = (float)r.uni();
  const int nc = std::max(1, (int)std::floor(1.0 / rc));
  auto cell = [&](int64_t i, int d) { return std::min(nc - 1, (int)(x[i * 3 + d] * nc)); };
  auto cid = [&](int64_t i) { return ((int64_t)cell(i, 2) * nc + cell(i, 1)) * nc + cell(i, 0); };
  if (sorted) {
    std::vector<int64_t> ord(n);
    for (int64_t i = 0; i < n; ++i)
      ord[i] = i;
    std::stable_sort(ord.begin(), ord.end(), [&](int64_t a, int64_t b) { return cid(a) < cid(b); });
    std::vector<float> y(n * 3);
    for (int64_t i = 0; i < n; ++i)
      for (int d = 0; d < 3; ++d)
        y[i * 3 + d] = x[ord[i] * 3 + d];
    x.swap(y);
  }
  const int64_t ncell = (int64_t)nc * nc * nc;
  std::vector<int64_t> start(ncell + 1, 0), pts(n);
  for (int64_t i = 0; i < n; ++i)
    start[cid(i) + 1]++;
  for (int64_t c = 0; c < ncell; ++c)
    start[c + 1] += start[c];
  std::vector<int64_t> fillp(start.begin(), start.end() - 1);
  for (int64_t i = 0; i < n; ++i)
    pts[fillp[cid(i)]++] = i;
  std::vector<std::vector<int32_t>> rows(n);
  const float r2 = (float)(rc * rc);
  for (int64_t i = 0; i < n; ++i) {
    const int cx = cell(i, 0), cy = cell(i, 1), cz = cell(i, 2);
    for (int dz = -1; dz <= 1; ++dz)
      for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
          const int X = cx + dx, Y = cy + dy, Z = cz + dz;
          if (X < 0 || Y < 0 || Z < 0 || X >= nc || Y >= nc || Z >= nc) continue;
          const int64_t c = ((int64_t)Z * nc + Y) * nc + X;
          for (int64_t s = start[c]; s < start[c + 1]; ++s) {
            const int64_t j = pts[s];
            float d2 = 0;
            for (int d = 0; d < 3; ++d)
              d2 += (x[i * 3 + d] - x[j * 3 + d]) * (x[i * 3 + d] - x[j * 3 + d]);
            if (j != i && d2 < r2) rows[i].push_back((int32_t)j);
          }
        }
  }
  return make_graph(n, n, rows);
}

// Hub test graphs of n nodes and about e edges: random keys; hub: row 0 attends to every node.
static Graph hub_graph(int64_t n, int64_t e, bool hub, uint64_t seed) {
  Rng r{seed};
  std::vector<std::vector<int32_t>> rows(n);
  int64_t left = e;
  if (hub) {
    for (int64_t j = 0; j < n; ++j)
      rows[0].push_back((int32_t)j);
    left -= n;
  }
  for (int64_t i = hub ? 1 : 0, m = hub ? n - 1 : n; i < n; ++i) {
    const int64_t d = left / m + (r.below(m) < left % m ? 1 : 0);
    for (int64_t c = 0; c < d; ++c)
      rows[i].push_back((int32_t)r.below(n));
  }
  return make_graph(n, n, rows); // duplicates removed: E slightly below e in both
}

// ------------------------------------------------------------------ float64 reference
struct Prob {
  int64_t B, Nq, Nk;
  int Hq, Hkv, D, Dv;
  double scale, keep;
  uint64_t seed, call;
};

// Keys of query i: the CSR row, or (independently of the CSR) every key / the causal prefix.
static void keys_of(GKind pat, const Graph &g, const Prob &P, int64_t i, std::vector<int32_t> &keys) {
  keys.clear();
  if (pat == G_DENSE || pat == G_CAUSAL) {
    const int64_t last = pat == G_DENSE ? P.Nk - 1 : std::min(P.Nk - 1, i + P.Nk - P.Nq);
    for (int64_t j = 0; j <= last; ++j)
      keys.push_back((int32_t)j);
    return;
  }
  keys.assign(g.col.begin() + g.rp[i], g.col.begin() + g.rp[i + 1]);
}

// out [B,Nq,Hq,Dv], lse [B,Hq,Nq] (-inf: no key), dq/dk/dv (gradients of sum(out * dout)).
static void reference(const Prob &P, GKind pat, const Graph &g, const std::vector<float> &q,
                      const std::vector<float> &k, const std::vector<float> &v, const std::vector<float> &dout,
                      std::vector<double> &out, std::vector<double> &lse, std::vector<double> &dq,
                      std::vector<double> &dk, std::vector<double> &dv) {
  const int G = P.Hq / P.Hkv, D = P.D, Dv = P.Dv;
  out.assign(P.B * P.Nq * P.Hq * Dv, 0.0);
  lse.assign(P.B * P.Hq * P.Nq, -INFINITY);
  dq.assign(P.B * P.Nq * P.Hq * D, 0.0);
  dk.assign(P.B * P.Nk * P.Hkv * D, 0.0);
  dv.assign(P.B * P.Nk * P.Hkv * Dv, 0.0);
  host_attn_shape hs{P.B, P.Nq, P.Nk, P.Hq, P.Hkv, D, Dv, P.scale, P.keep, P.seed, P.call};
  const bool drop = P.keep > 0 && P.keep < 1;
  std::vector<int32_t> keys;
  std::vector<double> s, w, dpv;
  for (int64_t b = 0; b < P.B; ++b)
    for (int h = 0; h < P.Hq; ++h)
      for (int64_t i = 0; i < P.Nq; ++i) {
        keys_of(pat, g, P, i, keys);
        if (keys.empty()) continue;
        const int gh = h / G;
        const float *qi = &q[((b * P.Nq + i) * P.Hq + h) * D], *oi = &dout[((b * P.Nq + i) * P.Hq + h) * Dv];
        const size_t n = keys.size();
        s.assign(n, 0), w.assign(n, 1), dpv.assign(n, 0);
        double mx = -INFINITY;
        for (size_t c = 0; c < n; ++c) {
          const float *kj = &k[((b * P.Nk + keys[c]) * P.Hkv + gh) * D];
          double a = 0;
          for (int d = 0; d < D; ++d)
            a += (double)qi[d] * kj[d];
          s[c] = P.scale * a;
          mx = std::max(mx, s[c]);
          if (drop) w[c] = host_attn_kept(&hs, b, h, i, keys[c]) ? 1.0 / P.keep : 0.0;
        }
        double l = 0;
        for (size_t c = 0; c < n; ++c)
          l += std::exp(s[c] - mx);
        const double L = mx + std::log(l);
        lse[(b * P.Hq + h) * P.Nq + i] = L;
        double *o = &out[((b * P.Nq + i) * P.Hq + h) * Dv], delta = 0;
        for (size_t c = 0; c < n; ++c) {
          const float *vj = &v[((b * P.Nk + keys[c]) * P.Hkv + gh) * Dv];
          const double p = std::exp(s[c] - L);
          double a = 0;
          for (int d = 0; d < Dv; ++d)
            o[d] += p * w[c] * vj[d], a += (double)oi[d] * vj[d];
          dpv[c] = w[c] * a;
          delta += p * dpv[c];
        }
        for (size_t c = 0; c < n; ++c) {
          const int64_t kr = (b * P.Nk + keys[c]) * P.Hkv + gh;
          const double p = std::exp(s[c] - L), ds = p * (dpv[c] - delta);
          for (int d = 0; d < D; ++d) {
            dq[((b * P.Nq + i) * P.Hq + h) * D + d] += P.scale * ds * k[kr * D + d];
            dk[kr * D + d] += P.scale * ds * qi[d];
          }
          for (int d = 0; d < Dv; ++d)
            dv[kr * Dv + d] += p * w[c] * oi[d];
        }
      }
}

static double rel_l2(const std::vector<double> &got, const std::vector<double> &ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = got[i] - ref[i];
    num += d * d, den += ref[i] * ref[i];
  }
  if (!(num == num)) return INFINITY;
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}
