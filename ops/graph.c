/* Graph ops over a relation read as a graph (tiga.h "graph ops"): tg_graph_gather,
 * tg_graph_reduce, tg_graph_softmax. One node each, HOST (host/graph.c) or CUDA (cuda/graph.h);
 * the node holds its relation, so the caller may destroy the relation right after the call.
 * Edge order: the relation's destination-major CSR of batch entry 0 (tgi_rel_host_csr); the CUDA
 * kernels read the same CSR on the device and its transpose for per-source sums (gather SOURCE
 * backward), so gradients are deterministic on both providers. Nothing is saved: gather and
 * reduce recompute what they need (reduce MAX its arg-max), softmax's backward reads its output. */
#include "graph.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ shared */

graph_state *tgi_graph_begin(tg_tape *t, const tg_relation *rel_in) {
  tg_relation *r = (tg_relation *)rel_in; /* its caches change, its meaning does not */
  if (!r)
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT,
                    "argument 'rel' is NULL; expected a relation (e.g. tg_relation_csr for a graph)"),
           NULL;
  if (r->rt != t->rt)
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT,
                    "argument 'rel' (%s) was built on another runtime; expected a relation of this tape's runtime",
                    tgi_rel_kind_name(r->kind)),
           NULL;
  if (r->kind == TG_REL_MASK && r->mask_batch > 1)
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT,
                    "argument 'rel' is a mask over %lld batch entries (one graph per entry); graph ops take one "
                    "graph: a shared mask (batch 0 or 1) or another kind",
                    (long long)r->mask_batch),
           NULL;
  graph_state *st = tgi_scratch_h(t, sizeof *st);
  if (!st) return NULL;
  memset(st, 0, sizeof *st);
  st->rel = r;
  st->E = r->allowed;
  st->Nq = r->nq;
  st->Nk = r->nk;
  st->keep = 1;
  return st;
}

const char *tgi_graph_rel_str(const graph_state *st, char *buf, size_t cap) {
  snprintf(buf, cap, "%s relation over nq = %lld, nk = %lld with E = %lld edges", tgi_rel_kind_name(st->rel->kind),
           (long long)st->Nq, (long long)st->Nk, (long long)st->E);
  return buf;
}

bool tgi_graph_host(tg_tape *t, const graph_state *st, host_graph *g) {
  const int64_t *rp = NULL;
  const int32_t *ci = NULL;
  int64_t nnz;
  if (!tgi_rel_host_csr(t, st->rel, &rp, &ci, &nnz)) return false;
  *g = (host_graph){.nq = st->Nq, .nk = st->Nk, .nnz = nnz, .row_ptr = rp, .col_idx = ci};
  return true;
}

/* Attaches the state and the relation to a freshly recorded node (NULL: no node). */
static void keep_rel(tgi_node *n, graph_state *st) {
  if (!n) return;
  n->aux = st;
  tgi_rel_hold(n, st->rel);
}

/* Per-edge tensors cannot be empty (tiga's sizes are >= 1). */
static bool need_edges(tg_tape *t, const graph_state *st, const char *what) {
  char rs[160];
  if (st->E > 0) return true;
  return tgi_fail(t, TG_ERR_SHAPE, "argument 'rel' is a %s; %s [E, ...] would be empty (sizes are >= 1)",
                  tgi_graph_rel_str(st, rs, sizeof rs), what);
}

static void describe(const tgi_node *n, char *buf, size_t cap) {
  static const char *sides[2] = {"source", "dest"}, *kinds[3] = {"sum", "mean", "max"};
  const graph_state *st = n->aux;
  char rel[128];
  tgi_rel_describe(st->rel, rel, sizeof rel);
  const char *op = n->cap->op;
  if (!strcmp(op, "graph_gather"))
    snprintf(buf, cap, "%s side=%s W=%lld", rel, sides[st->side], (long long)st->W);
  else if (!strcmp(op, "graph_reduce"))
    snprintf(buf, cap, "%s kind=%s W=%lld", rel, kinds[st->kind], (long long)st->W);
  else
    snprintf(buf, cap, "%s H=%lld", rel, (long long)st->H);
}

#ifdef TIGA_HAVE_CUDA
/* The relation's device CSR (and its transpose when asked), built and uploaded on first use. */
static bool dev_graph(tg_tape *t, const graph_state *st, bool transpose, tgc_csr *g) {
  return tgi_rel_dev_csr(t, st->rel, transpose, g);
}
#endif

/* ------------------------------------------------------------ gather */

static tg_status gather_backward(tg_tape *t, tgi_node *n) {
  const graph_state *st = n->aux;
  tgi_value *x = tgi_in(t, n, 0), *y = tgi_out(t, n, 0);
  if (!x->requires_grad) return TG_OK;
  tg_dtype dt = (tg_dtype)x->dtype;
  if (n->cap->provider == TG_PROVIDER_HOST) {
    host_graph g;
    const void *gy = tgi_grad_h(t, y);
    void *gx = tgi_grad_h(t, x);
    if (t->status || !tgi_graph_host(t, st, &g)) return t->status;
    if (host_graph_gather_backward(dt, &g, (host_graph_side)st->side, st->W, gy, gx))
      return tgi_fail(t, TG_ERR_OUT_OF_MEMORY, "out of host memory for the gather gradient"), TG_ERR_OUT_OF_MEMORY;
    return TG_OK;
  }
#ifdef TIGA_HAVE_CUDA
  tgc_csr g;
  const void *gy = tgi_grad_d(t, y);
  void *gx = tgi_grad_d(t, x);
  if (t->status || !dev_graph(t, st, st->side == TG_GRAPH_SOURCE, &g)) return t->status;
  tg_status s = cuda_graph_gather_backward(TGI_STREAM(t), &g, (tgc_graph_side)st->side, dt, st->W, gy, gx);
  if (s) tgi_fail_cuda(t, s, "graph gather backward");
  return s;
#else
  return tgi_fail(t, TG_ERR_INTERNAL, "CUDA graph node in a host-only build"), TG_ERR_INTERNAL;
#endif
}

static const tgi_capsule cap_gather[2] = {{"graph_gather", TG_PROVIDER_HOST, gather_backward, describe},
                                          {"graph_gather", TG_PROVIDER_CUDA, gather_backward, describe}};

tg_id tg_graph_gather(tg_tape *t, const tg_relation *rel, tg_id x_id, tg_graph_side side) {
  if (!tgi_op_begin(t, "tg_graph_gather")) return TG_NO_ID;
  tgi_value *x = tgi_arg(t, "x", x_id);
  graph_state *st = x ? tgi_graph_begin(t, rel) : NULL;
  if (!st) return TG_NO_ID;
  if (side != TG_GRAPH_SOURCE && side != TG_GRAPH_DEST)
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT,
                    "argument 'side' is %d; expected TG_GRAPH_SOURCE (%d) or TG_GRAPH_DEST (%d)", (int)side,
                    TG_GRAPH_SOURCE, TG_GRAPH_DEST),
           TG_NO_ID;
  const bool src = side == TG_GRAPH_SOURCE;
  const int64_t N = src ? st->Nk : st->Nq;
  char xs[TGI_SHAPE_STR_CAP], rs[160];
  if (x->ndim < 1 || x->shape[0] != N)
    return tgi_fail(t, TG_ERR_SHAPE,
                    "argument 'x' has shape %s; expected [%s = %lld, ...] (side %s of argument 'rel', %s)",
                    tgi_shape_str(x->shape, x->ndim, xs, sizeof xs), src ? "Nk" : "Nq", (long long)N,
                    src ? "TG_GRAPH_SOURCE: one row per source" : "TG_GRAPH_DEST: one row per destination",
                    tgi_graph_rel_str(st, rs, sizeof rs)),
           TG_NO_ID;
  if (!need_edges(t, st, "the per-edge result")) return TG_NO_ID;
  tg_provider p = tgi_pick(t, TGI_HOST_AND_CUDA);
  if (!p || !tgi_need_float_for(t, p, "x", x)) return TG_NO_ID;
  tg_dtype dt = (tg_dtype)x->dtype;
  st->side = side;
  st->W = x->numel / N;
  int64_t shape[TG_MAX_DIMS];
  memcpy(shape, x->shape, sizeof shape);
  shape[0] = st->E;
  tgi_value *y = tgi_result(t, dt, x->ndim, shape);
  if (!y) return TG_NO_ID;
  if (p == TG_PROVIDER_HOST) {
    host_graph g;
    const void *px = tgi_read_h(t, x);
    void *py = tgi_write_h(t, y);
    if (!px || !py || !tgi_graph_host(t, st, &g)) return TG_NO_ID;
    host_graph_gather_forward(dt, &g, (host_graph_side)side, st->W, px, py);
  } else {
#ifdef TIGA_HAVE_CUDA
    tgc_csr g;
    const void *px = tgi_read_d(t, x);
    void *py = tgi_write_d(t, y);
    if (!px || !py || !dev_graph(t, st, false, &g)) return TG_NO_ID;
    tg_status s = cuda_graph_gather_forward(TGI_STREAM(t), &g, (tgc_graph_side)side, dt, st->W, px, py);
    if (s) return tgi_fail_cuda(t, s, "graph gather forward"), TG_NO_ID;
#endif
  }
  keep_rel(tgi_record(t, &cap_gather[p != TG_PROVIDER_HOST], 1, &x, 1, &y), st);
  return tgi_done(t, y);
}

/* ------------------------------------------------------------ reduce */

static tg_status reduce_backward(tg_tape *t, tgi_node *n) {
  const graph_state *st = n->aux;
  tgi_value *x = tgi_in(t, n, 0), *y = tgi_out(t, n, 0);
  if (!x->requires_grad) return TG_OK;
  tg_dtype dt = (tg_dtype)x->dtype;
  const bool max = st->kind == TG_REDUCE_MAX;
  if (n->cap->provider == TG_PROVIDER_HOST) {
    host_graph g;
    const void *gy = tgi_grad_h(t, y), *px = max ? tgi_read_h(t, x) : NULL;
    void *gx = tgi_grad_h(t, x);
    if (t->status || !tgi_graph_host(t, st, &g)) return t->status;
    host_graph_reduce_backward(dt, &g, (host_graph_reduce)st->kind, st->W, px, gy, gx);
    return TG_OK;
  }
#ifdef TIGA_HAVE_CUDA
  tgc_csr g;
  const void *gy = tgi_grad_d(t, y), *px = max ? tgi_read_d(t, x) : NULL;
  void *gx = tgi_grad_d(t, x);
  if (t->status || !dev_graph(t, st, false, &g)) return t->status;
  tg_status s = cuda_graph_reduce_backward(TGI_STREAM(t), &g, (tgc_graph_reduce)st->kind, dt, st->W, px, gy, gx);
  if (s) tgi_fail_cuda(t, s, "graph reduce backward");
  return s;
#else
  return tgi_fail(t, TG_ERR_INTERNAL, "CUDA graph node in a host-only build"), TG_ERR_INTERNAL;
#endif
}

static const tgi_capsule cap_reduce[2] = {{"graph_reduce", TG_PROVIDER_HOST, reduce_backward, describe},
                                          {"graph_reduce", TG_PROVIDER_CUDA, reduce_backward, describe}};

tg_id tg_graph_reduce(tg_tape *t, const tg_relation *rel, tg_id x_id, tg_graph_reduce_kind kind) {
  if (!tgi_op_begin(t, "tg_graph_reduce")) return TG_NO_ID;
  tgi_value *x = tgi_arg(t, "edge_values", x_id);
  graph_state *st = x ? tgi_graph_begin(t, rel) : NULL;
  if (!st) return TG_NO_ID;
  if (kind != TG_REDUCE_SUM && kind != TG_REDUCE_MEAN && kind != TG_REDUCE_MAX)
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT,
                    "argument 'kind' is %d; expected TG_REDUCE_SUM (%d), TG_REDUCE_MEAN (%d) or TG_REDUCE_MAX (%d)",
                    (int)kind, TG_REDUCE_SUM, TG_REDUCE_MEAN, TG_REDUCE_MAX),
           TG_NO_ID;
  char xs[TGI_SHAPE_STR_CAP], rs[160];
  if (x->ndim < 1 || x->shape[0] != st->E)
    return tgi_fail(t, TG_ERR_SHAPE,
                    "argument 'edge_values' has shape %s; expected [E = %lld, ...] (one row per edge of argument "
                    "'rel', a %s)",
                    tgi_shape_str(x->shape, x->ndim, xs, sizeof xs), (long long)st->E,
                    tgi_graph_rel_str(st, rs, sizeof rs)),
           TG_NO_ID;
  tg_provider p = tgi_pick(t, TGI_HOST_AND_CUDA);
  if (!p || !tgi_need_float_for(t, p, "edge_values", x)) return TG_NO_ID;
  tg_dtype dt = (tg_dtype)x->dtype;
  st->kind = kind;
  st->W = x->numel / st->E;
  int64_t shape[TG_MAX_DIMS];
  memcpy(shape, x->shape, sizeof shape);
  shape[0] = st->Nq;
  tgi_value *y = tgi_result(t, dt, x->ndim, shape);
  if (!y) return TG_NO_ID;
  if (p == TG_PROVIDER_HOST) {
    host_graph g;
    const void *px = tgi_read_h(t, x);
    void *py = tgi_write_h(t, y);
    if (!px || !py || !tgi_graph_host(t, st, &g)) return TG_NO_ID;
    host_graph_reduce_forward(dt, &g, (host_graph_reduce)kind, st->W, px, py);
  } else {
#ifdef TIGA_HAVE_CUDA
    tgc_csr g;
    const void *px = tgi_read_d(t, x);
    void *py = tgi_write_d(t, y);
    if (!px || !py || !dev_graph(t, st, false, &g)) return TG_NO_ID;
    tg_status s = cuda_graph_reduce_forward(TGI_STREAM(t), &g, (tgc_graph_reduce)kind, dt, st->W, px, py);
    if (s) return tgi_fail_cuda(t, s, "graph reduce forward"), TG_NO_ID;
#endif
  }
  keep_rel(tgi_record(t, &cap_reduce[p != TG_PROVIDER_HOST], 1, &x, 1, &y), st);
  return tgi_done(t, y);
}

/* ------------------------------------------------------------ softmax */

static tg_status softmax_backward(tg_tape *t, tgi_node *n) {
  const graph_state *st = n->aux;
  tgi_value *x = tgi_in(t, n, 0), *y = tgi_out(t, n, 0);
  if (!x->requires_grad) return TG_OK;
  tg_dtype dt = (tg_dtype)x->dtype;
  if (n->cap->provider == TG_PROVIDER_HOST) {
    host_graph g;
    const void *gy = tgi_grad_h(t, y), *py = tgi_read_h(t, y);
    void *gx = tgi_grad_h(t, x);
    if (t->status || !tgi_graph_host(t, st, &g)) return t->status;
    host_graph_softmax_backward(dt, &g, st->H, py, gy, gx);
    return TG_OK;
  }
#ifdef TIGA_HAVE_CUDA
  tgc_csr g;
  const void *gy = tgi_grad_d(t, y), *py = tgi_read_d(t, y);
  void *gx = tgi_grad_d(t, x);
  if (t->status || !dev_graph(t, st, false, &g)) return t->status;
  size_t wb = cuda_graph_softmax_backward_workspace(&g, st->H);
  void *ws = wb ? tgi_scratch_d(t, wb) : NULL;
  if (wb && !ws) return t->status;
  tg_status s = cuda_graph_softmax_backward(TGI_STREAM(t), &g, dt, st->H, py, gy, gx, ws, wb);
  if (s) tgi_fail_cuda(t, s, "graph softmax backward");
  return s;
#else
  return tgi_fail(t, TG_ERR_INTERNAL, "CUDA graph node in a host-only build"), TG_ERR_INTERNAL;
#endif
}

static const tgi_capsule cap_softmax[2] = {{"graph_softmax", TG_PROVIDER_HOST, softmax_backward, describe},
                                           {"graph_softmax", TG_PROVIDER_CUDA, softmax_backward, describe}};

tgi_value *tgi_graph_softmax_rec(tg_tape *t, graph_state *st, tgi_value *x, tg_provider p, tgi_value **lse_out) {
  tg_dtype dt = (tg_dtype)x->dtype;
  int64_t lshape[2] = {st->H, st->Nq}, nl = st->H * st->Nq;
  tgi_value *y = tgi_result(t, dt, 2, x->shape);
  tgi_value *lse = y && lse_out ? tgi_result(t, TG_F32, 2, lshape) : NULL;
  if (!y || (lse_out && !lse)) return NULL;
  if (p == TG_PROVIDER_HOST) {
    host_graph g;
    const void *px = tgi_read_h(t, x);
    void *py = tgi_write_h(t, y);
    double *pl = lse ? tgi_scratch_h(t, (size_t)nl * sizeof *pl) : NULL;
    float *plo = lse ? tgi_write_h(t, lse) : NULL;
    if (!px || !py || (lse && (!pl || !plo)) || !tgi_graph_host(t, st, &g)) return NULL;
    host_graph_softmax_forward(dt, &g, st->H, px, py, pl);
    for (int64_t k = 0; plo && k < nl; k++)
      plo[k] = (float)pl[k];
  } else {
#ifdef TIGA_HAVE_CUDA
    tgc_csr g;
    const void *px = tgi_read_d(t, x);
    void *py = tgi_write_d(t, y);
    float *pl = lse ? tgi_write_d(t, lse) : tgi_scratch_d(t, (size_t)nl * sizeof *pl); /* the kernel needs it */
    if (!px || !py || !pl || !dev_graph(t, st, false, &g)) return NULL;
    tg_status s = cuda_graph_softmax_forward(TGI_STREAM(t), &g, dt, st->H, px, py, pl);
    if (s) return tgi_fail_cuda(t, s, "graph softmax forward"), NULL;
#endif
  }
  tgi_value *outs[2] = {y, lse};
  keep_rel(tgi_record(t, &cap_softmax[p != TG_PROVIDER_HOST], 1, &x, lse ? 2 : 1, outs), st);
  if (lse) lse->requires_grad = false, *lse_out = lse;
  return t->status ? NULL : y;
}

tg_id tg_graph_softmax(tg_tape *t, const tg_relation *rel, tg_id x_id) {
  if (!tgi_op_begin(t, "tg_graph_softmax")) return TG_NO_ID;
  tgi_value *x = tgi_arg(t, "scores", x_id);
  graph_state *st = x ? tgi_graph_begin(t, rel) : NULL;
  if (!st) return TG_NO_ID;
  char xs[TGI_SHAPE_STR_CAP], rs[160];
  if (x->ndim != 2 || x->shape[0] != st->E)
    return tgi_fail(t, TG_ERR_SHAPE,
                    "argument 'scores' has shape %s; expected [E = %lld, H] (one row per edge of argument 'rel', a "
                    "%s; one column per head)",
                    tgi_shape_str(x->shape, x->ndim, xs, sizeof xs), (long long)st->E,
                    tgi_graph_rel_str(st, rs, sizeof rs)),
           TG_NO_ID;
  tg_provider p = tgi_pick(t, TGI_HOST_AND_CUDA);
  if (!p || !tgi_need_float_for(t, p, "scores", x)) return TG_NO_ID;
  st->H = x->shape[1];
  return tgi_done(t, tgi_graph_softmax_rec(t, st, x, p, NULL));
}
