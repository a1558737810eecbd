/* What ops/graph.c (gather, reduce, softmax) and ops/graph_attend.c (attend, gat) share: the node
 * state, the relation argument's checks, and the softmax node the composed attention records. */
#ifndef TIGA_OPS_GRAPH_H
#define TIGA_OPS_GRAPH_H
#include "relation.h"
#include "../host/graph.h"

#ifdef TIGA_HAVE_CUDA
#include "../cuda/graph.h"
#include "../cuda/linear.h"
#endif

/* A graph node's parameters (host arena, n->aux). */
typedef struct graph_state {
  tg_relation *rel;    /* held by the node */
  int64_t E, Nq, Nk;   /* edges of batch entry 0, destinations, sources */
  int64_t W;           /* gather / reduce: product of the trailing dims */
  int64_t H, F;        /* softmax / attend / gat */
  int side, kind;      /* gather side, reduce kind */
  int gat;             /* attention: scores from e_dst + e_src */
  double slope;        /* gat LeakyReLU slope */
  double keep;         /* attention dropout keep; 1: none */
  uint64_t seed, call; /* dropout stream */
} graph_state;

/* Checks the relation argument of a graph op (not NULL, this tape's runtime, one graph: not a
 * per-batch mask) and returns a new state for it, or NULL with a sticky error. */
graph_state *tgi_graph_begin(tg_tape *t, const tg_relation *rel);
/* "csr relation over nq = 7, nk = 5 with E = 12 edges" into buf (for messages); returns buf. */
const char *tgi_graph_rel_str(const graph_state *st, char *buf, size_t cap);
/* The host kernels' CSR of the node's relation (false + sticky error when out of memory). */
bool tgi_graph_host(tg_tape *t, const graph_state *st, host_graph *g);

/* p = softmax of scores [E, H] (checked by the caller; st->H set) over each destination's edges,
 * recorded as a graph_softmax node of provider p (HOST, or CUDA for either CUDA provider). With
 * lse non-NULL the node also outputs *lse = lse [H, Nq] f32, which carries no gradient. NULL with a
 * sticky error on failure. */
tgi_value *tgi_graph_softmax_rec(tg_tape *t, graph_state *st, tgi_value *scores, tg_provider p, tgi_value **lse);

/* (ops/linear.c) y, the result of a CUDA tg_matmul node, computed again into its device storage
 * from the node's inputs (for a fused op whose backward gave y's storage to y's gradient in an
 * earlier sweep: tgi_grad_d_over). TG_OK, or the failure (sticky). */
tg_status tgi_matmul_redo(tg_tape *t, tgi_value *y);
#ifdef TIGA_HAVE_CUDA
/* The tape's cuBLAS / cuBLASLt handles, stream and workspace, for cuda/linear.h's launchers. */
tgc_blas tgi_blas_of(tg_tape *t);
#endif
#endif
