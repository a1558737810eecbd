// Schedules for the CSR attention kernels (cuda/attention_csr.h): a graph's locality order on the
// host (breadth-first sweeps, optionally bisected recursively), and a spatial sort's int64
// permutation narrowed to an int32 schedule.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "attention_csr.h"
#include "common.cuh"

// The graph's nodes: square, one node per row / source u, with the row's sources and the source's
// rows as neighbours; else rows u < nq and sources nq + j (a bipartite graph).
namespace {
struct CaGraph {
  int64_t nq, nk;
  bool square, sym; // sym: square and the transpose is the CSR itself (one direction is enough)
  const int64_t *rp, *tp;
  const int32_t *col, *tr;
  template <typename F> void each(int64_t u, F f) const { // f(v) for each neighbour v of u
    const int64_t off = square ? 0 : nq;
    if (u < nq)
      for (int64_t e = rp[u]; e < rp[u + 1]; ++e)
        f((int64_t)col[e] + off);
    const int64_t j = square ? u : u - nq;
    if (!sym && j >= 0 && j < nk)
      for (int64_t t = tp[j]; t < tp[j + 1]; ++t)
        f((int64_t)tr[t]);
  }
};

// Segments of the order: the nodes of segment [a, b) have owner a; a sweep only follows edges
// inside its segment.
struct CaOrder {
  CaGraph g;
  int32_t *owner;
  uint32_t *vis; // stamp of the last sweep that reached the node
  uint32_t stamp;
  int64_t n;

  // BFS over segment [a, b) from `first`, restarting at the first unreached node of from[a, b)
  // until every node is reached; the visit order goes to to[a, b). Returns the last node reached
  // in the largest connected piece (far from `first` when that piece is the one it starts).
  int64_t sweep(const int32_t *from, int32_t *to, int64_t a, int64_t b, int64_t first) {
    if (++stamp == 0) { // wrapped: forget every earlier sweep
      memset(vis, 0, (size_t)n * sizeof *vis);
      stamp = 1;
    }
    const int32_t seg = (int32_t)a;
    int64_t head = a, tail = a, next = a, piece = a, best = -1, far = first;
    auto push = [&](int64_t v) { vis[v] = stamp, to[tail++] = (int32_t)v; };
    push(first);
    for (;;) {
      while (head < tail) {
        const int64_t u = to[head++];
        g.each(u, [&](int64_t v) {
          if (owner[v] == seg && vis[v] != stamp) push(v);
        });
      }
      if (tail - piece > best) best = tail - piece, far = to[tail - 1];
      while (next < b && vis[from[next]] == stamp)
        ++next;
      if (next == b) return far;
      piece = tail;
      push(from[next]);
    }
  }
};
} // namespace

// Every segment of queue longer than leaf is cut in half and each half ordered within itself as
// the whole was (two sweeps), recursively: a k-d tree of the graph, halves along the longest
// extent each time. The graph is first renumbered in queue's order (node x = queue[x]) so that the
// sweeps read neighbours close in memory. Without the memory for that, queue stays as it is.
static void bisect(const CaOrder &o, int32_t *queue, int32_t *tmp, int32_t *owner, int64_t leaf, int64_t *stack) {
  const int64_t n = o.n;
  int64_t m = 0;
  for (int64_t x = 0; x < n; ++x)
    o.g.each(queue[x], [&](int64_t) { ++m; });
  int64_t *aptr = (int64_t *)malloc(((size_t)n + 1) * sizeof *aptr);
  int32_t *adj = (int32_t *)malloc((size_t)(m > 0 ? m : 1) * sizeof *adj), *q = (int32_t *)malloc((size_t)n * 4);
  if (aptr && adj && q) {
    for (int64_t x = 0; x < n; ++x)
      tmp[queue[x]] = (int32_t)x; // tmp: the new number of each node
    aptr[0] = 0;
    for (int64_t x = 0; x < n; ++x) {
      int64_t k = aptr[x];
      o.g.each(queue[x], [&](int64_t v) { adj[k++] = tmp[v]; });
      aptr[x + 1] = k;
      q[x] = (int32_t)x;
      owner[x] = 0;
    }
    CaOrder r{CaGraph{n, n, true, true, aptr, nullptr, adj, nullptr}, owner, o.vis, o.stamp, n};
    int64_t top = 0;
    stack[top++] = 0, stack[top++] = n;
    bool first = true; // [0, n) is ordered already
    while (top > 0) {
      const int64_t b = stack[--top], a = stack[--top];
      if (!first) r.sweep(tmp, q, a, b, r.sweep(q, tmp, a, b, q[a]));
      first = false;
      if (b - a <= leaf) continue;
      const int64_t mid = a + (b - a) / 2;
      for (int64_t x = mid; x < b; ++x)
        owner[q[x]] = (int32_t)mid;
      stack[top++] = mid, stack[top++] = b; // the second half waits (the stack holds one per level)
      stack[top++] = a, stack[top++] = mid;
    }
    for (int64_t x = 0; x < n; ++x)
      tmp[x] = queue[q[x]];
    memcpy(queue, tmp, (size_t)n * sizeof *queue);
  }
  free(aptr), free(adj), free(q);
}

extern "C" tg_status cuda_attention_csr_order_host(int64_t nq, int64_t nk, const int64_t *row_ptr,
                                                   const int32_t *col_idx, int64_t leaf, int32_t *order) {
  const bool square = nq == nk;
  const int64_t n = square ? nq : nq + nk;
  if (nq < 0 || nk < 0 || leaf < 0 || n > INT32_MAX || !order || !row_ptr) {
    tgc_set_error("csr attention order: nq=%lld, nk=%lld, leaf=%lld out of range", (long long)nq, (long long)nk,
                  (long long)leaf);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (n == 0) return TG_OK;
  const int64_t nnz = row_ptr[nq];
  int64_t *tp = (int64_t *)calloc((size_t)nk + 1, sizeof *tp), *fill = (int64_t *)malloc(((size_t)nk + 1) * 8);
  int32_t *tr = (int32_t *)malloc((size_t)(nnz > 0 ? nnz : 1) * sizeof *tr);
  int32_t *owner = (int32_t *)calloc((size_t)n, sizeof *owner), *queue = (int32_t *)malloc((size_t)n * 4),
          *tmp = (int32_t *)malloc((size_t)n * 4);
  uint32_t *vis = (uint32_t *)calloc((size_t)n, sizeof *vis);
  // pending segments: at most one per level of the bisection plus one
  int64_t *stack = (int64_t *)malloc(2 * 66 * sizeof *stack);
  tg_status st = TG_OK;
  if (!tp || !fill || !tr || !owner || !queue || !tmp || !vis || !stack) {
    tgc_set_error("csr attention order: out of host memory (%lld nodes, %lld edges)", (long long)n, (long long)nnz);
    st = TG_ERR_OUT_OF_MEMORY;
  } else {
    // the transpose: rows of each source, ascending
    for (int64_t e = 0; e < nnz; ++e)
      tp[col_idx[e] + 1]++;
    for (int64_t j = 0; j < nk; ++j)
      tp[j + 1] += tp[j];
    memcpy(fill, tp, ((size_t)nk + 1) * sizeof *fill);
    for (int64_t i = 0; i < nq; ++i)
      for (int64_t e = row_ptr[i]; e < row_ptr[i + 1]; ++e)
        tr[fill[col_idx[e]]++] = (int32_t)i;
    for (int64_t u = 0; u < n; ++u)
      queue[u] = (int32_t)u;
    const bool sym = square && memcmp(tp, row_ptr, ((size_t)nq + 1) * sizeof *tp) == 0 &&
                     (nnz == 0 || memcmp(tr, col_idx, (size_t)nnz * sizeof *tr) == 0);
    CaOrder o{CaGraph{nq, nk, square, sym, row_ptr, tp, col_idx, tr}, owner, vis, 0, n};
    // The whole graph: per connected piece, a first sweep finds a far node, the second (from there)
    // orders the piece by distance from it.
    o.sweep(tmp, queue, 0, n, o.sweep(queue, tmp, 0, n, queue[0]));
    if (leaf > 0 && n > leaf) bisect(o, queue, tmp, owner, leaf, stack);
    if (square) {
      memcpy(order, queue, (size_t)n * sizeof *order);
    } else {
      int64_t r = 0, c = nq;
      for (int64_t x = 0; x < n; ++x)
        if (queue[x] < nq)
          order[r++] = queue[x];
        else
          order[c++] = (int32_t)(queue[x] - nq);
    }
  }
  free(tp), free(fill), free(tr), free(owner), free(queue), free(tmp), free(vis), free(stack);
  return st;
}

__global__ void ca_order_narrow_kernel(const int64_t *__restrict__ perm, int64_t n, int32_t *__restrict__ order) {
  for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < n; r += (int64_t)gridDim.x * blockDim.x)
    order[r] = (int32_t)perm[r];
}

extern "C" tg_status cuda_attention_csr_order_from_perm(tgc_stream s, const int64_t *perm, int64_t n, int32_t *order) {
  if (n < 0 || n > INT32_MAX || (n > 0 && (!perm || !order))) {
    tgc_set_error("csr attention order: n=%lld out of range or NULL arrays", (long long)n);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (n == 0) return TG_OK;
  const unsigned blocks = (unsigned)std::min<int64_t>((n + 255) / 256, 4096);
  ca_order_narrow_kernel<<<blocks, 256, 0, (cudaStream_t)s>>>(perm, n, order);
  TGC_LAUNCHED("ca_order_narrow_kernel");
  return TG_OK;
}
