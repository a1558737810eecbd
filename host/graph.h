/* Host reference kernels of the graph ops (f32 and f64, math in double): the oracle for the CUDA
 * provider. Every kernel walks the destination-major CSR of a relation (host/relation.h's edge
 * order): edge e = (j -> i) with row_ptr[i] <= e < row_ptr[i + 1], j = col_idx[e].
 *
 * Layouts (row-major). Per-edge tensors [E, W], node tensors [N, W] (W = product of the trailing
 * dims); multi-head: scores [E, H], e_dst [Nq, H], e_src [Nk, H], values [Nk, H, F],
 * out [Nq, H, F], lse [H, Nq].
 *
 *   gather   SOURCE out[e] = x[j],  DEST out[e] = x[i]
 *   reduce   out[i] = SUM / MEAN / MAX of vals[e] over the row (per column); an empty row gives 0
 *   softmax  lse[h, i] = log sum_{e in row i} exp(s[e, h]);  p[e, h] = exp(s[e, h] - lse[h, i])
 *   attend   out[i, h] = sum_{e in row i} p[e, h] w[e, h] values[j, h]
 *   gat      attend with s[e, h] = LeakyReLU(e_dst[i, h] + e_src[j, h]; slope)
 * with w = 1, or under attention dropout w = m / keep, m = host_graph_kept (tiga.h's attention rule
 * for B = 1: row R = h * Nq + i, key j, Nk = the relation's nk).
 *
 * Backward (every gradient ACCUMULATES; a NULL gradient is not wanted):
 *   gather   SOURCE dx[j] += sum of dout over the edges with source j (edges walked in e order);
 *            DEST dx[i] += sum of dout over row i
 *   reduce   SUM dvals[e] += dout[i]; MEAN dvals[e] += dout[i] / deg(i); MAX per column only the
 *            first edge (lowest e) of the row whose value attains the max takes dout[i]
 *   softmax  ds[e] += p[e] (dp[e] - sum_{e' in row} p[e'] dp[e'])
 *   attend   dp[e] = w <dout[i, h], values[j, h]>, D = sum_row p dp (= <dout[i, h], out[i, h]>),
 *            ds = p (dp - D): dscores += ds; dvalues[j, h] += p w dout[i, h]
 *   gat      ds' = ds * leaky'(e_dst[i, h] + e_src[j, h]) (leaky'(x) = 1 for x > 0, else slope, so
 *            leaky'(0) = slope): de_dst[i] += sum_row ds', de_src[j] += sum over j's edges ds'
 * p is recomputed from the saved lse (double here).
 *
 * Special values. Rows with no edge, and rows whose scores are all -inf: p = 0, out = 0, lse = -inf,
 * zero gradient. A NaN score makes its row's p, out and lse NaN. reduce MAX: a NaN in a column
 * makes that column's max NaN and the first NaN edge takes the gradient; equal values (-0 and +0
 * included) go to the first edge. */
#ifndef TIGA_HOST_GRAPH_H
#define TIGA_HOST_GRAPH_H
#include "tiga.h"
#include "philox.h"

typedef struct host_graph {
  int64_t nq, nk, nnz;
  const int64_t *row_ptr; /* [nq + 1] */
  const int32_t *col_idx; /* [nnz] */
} host_graph;

typedef enum { HOST_GRAPH_SOURCE = 0, HOST_GRAPH_DEST = 1 } host_graph_side;
typedef enum { HOST_GRAPH_SUM = 0, HOST_GRAPH_MEAN = 1, HOST_GRAPH_MAX = 2 } host_graph_reduce;

typedef struct host_graph_attn {
  int64_t H, F;
  double slope;        /* gat only */
  double keep;         /* dropout keep in (0, 1); 0 or 1: none */
  uint64_t seed, call; /* dropout stream (tape seed, RNG call counter) */
} host_graph_attn;

/* The dropout mask bit of (head h, destination i, source j): tiga.h's attention rule with B = 1. */
static inline int host_graph_kept(const host_graph_attn *a, int64_t nq, int64_t nk, int64_t h, int64_t i, int64_t j) {
  uint32_t w[4];
  uint64_t R = (uint64_t)(h * nq + i);
  tg_philox4x32(a->seed, tg_attn_drop_block(R, (uint64_t)j, (uint64_t)nk), a->call | (1ull << 63), w);
  return w[tg_attn_drop_word(R, (uint64_t)j)] < tg_keep_threshold(a->keep);
}

void host_graph_gather_forward(tg_dtype dt, const host_graph *g, host_graph_side side, int64_t W, const void *x,
                               void *out);
/* TG_ERR_OUT_OF_MEMORY when the double accumulator cannot be allocated (dx unchanged). */
tg_status host_graph_gather_backward(tg_dtype dt, const host_graph *g, host_graph_side side, int64_t W,
                                     const void *dout, void *dx);

void host_graph_reduce_forward(tg_dtype dt, const host_graph *g, host_graph_reduce kind, int64_t W, const void *vals,
                               void *out);
void host_graph_reduce_backward(tg_dtype dt, const host_graph *g, host_graph_reduce kind, int64_t W, const void *vals,
                                const void *dout, void *dvals);

/* p [E, H]; lse [H, Nq] (may be NULL). */
void host_graph_softmax_forward(tg_dtype dt, const host_graph *g, int64_t H, const void *scores, void *p, double *lse);
void host_graph_softmax_backward(tg_dtype dt, const host_graph *g, int64_t H, const void *p, const void *dp, void *ds);

/* out [Nq, H, F], lse [H, Nq] (required: backward reads it). TG_ERR_OUT_OF_MEMORY when scratch
 * cannot be allocated. */
tg_status host_graph_attend_forward(tg_dtype dt, const host_graph *g, const host_graph_attn *a, const void *scores,
                                    const void *values, void *out, double *lse);
/* dscores, dvalues may be NULL. TG_ERR_OUT_OF_MEMORY when scratch cannot be allocated. */
tg_status host_graph_attend_backward(tg_dtype dt, const host_graph *g, const host_graph_attn *a, const void *scores,
                                     const void *values, const void *dout, const double *lse, void *dscores,
                                     void *dvalues);
tg_status host_graph_gat_forward(tg_dtype dt, const host_graph *g, const host_graph_attn *a, const void *e_dst,
                                 const void *e_src, const void *values, void *out, double *lse);
/* de_dst, de_src, dvalues may be NULL (and may alias: nothing reads them). */
tg_status host_graph_gat_backward(tg_dtype dt, const host_graph *g, const host_graph_attn *a, const void *e_dst,
                                  const void *e_src, const void *values, const void *dout, const double *lse,
                                  void *de_dst, void *de_src, void *dvalues);
#endif
