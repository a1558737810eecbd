/* Host reference kernels of tg_edge_attention's core (f32 / f64 storage, math and accumulation in
 * double): the oracle of cuda/edge_attention.h, whose math, backward formulas and special values
 * they follow exactly. U = x_src . w1_src [Nk, hid] and V = x_dst . w1_dst [Nq, hid] are inputs
 * (NULL: zero); wp [dim, hid] and we [Fe, hid] point at w1's geometry and edge-feature rows.
 * Positions have their own dtype pdt (f32 or f64). Dropout weight w = host_graph_kept / keep
 * (host/graph.h) or 1. lse [H, Nq] in double: -inf for an empty row (out 0, zero gradient).
 * The backward recomputes a, z, s and p per row from the inputs and lse; per-source and weight
 * sums accumulate in double in edge order and are added to the gradients at the end. */
#ifndef TIGA_HOST_EDGE_ATTENTION_H
#define TIGA_HOST_EDGE_ATTENTION_H
#include "graph.h"

typedef struct host_edge_attn {
  int64_t H, F, hid;
  int dim;
  int64_t Fe;
  double slope;
  host_graph_attn drop; /* keep / seed / call (H set, F unused) */
} host_edge_attn;

typedef struct host_edge_inputs {
  const void *U, *V;        /* [Nk, hid], [Nq, hid] (dt) */
  const void *ps, *pd;      /* [Nk, dim], [Nq, dim] (pdt) */
  const void *fe;           /* [E, Fe] */
  const void *values;       /* [Nk, H, F] */
  const void *wp, *we, *b1; /* [dim, hid], [Fe, hid], [hid] */
  const void *w2, *b2;      /* [hid, H], [H] */
} host_edge_inputs;

/* NULL: not wanted. Each ACCUMULATES. ps and pd may alias (the same value passed twice). */
typedef struct host_edge_grads {
  void *U, *V, *ps, *pd, *fe, *values, *wp, *we, *b1, *w2, *b2;
} host_edge_grads;

/* out [Nq, H, F] (dt), lse [H, Nq]. TG_ERR_OUT_OF_MEMORY when scratch cannot be allocated. */
tg_status host_edge_attention_forward(tg_dtype dt, tg_dtype pdt, const host_graph *g, const host_edge_attn *a,
                                      const host_edge_inputs *in, void *out, double *lse);
tg_status host_edge_attention_backward(tg_dtype dt, tg_dtype pdt, const host_graph *g, const host_edge_attn *a,
                                       const host_edge_inputs *in, const void *dout, const double *lse,
                                       const host_edge_grads *d);
#endif
