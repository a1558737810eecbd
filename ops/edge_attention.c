/* tg_edge_attention: GAT with a learned edge score (math in tiga.h and cuda/edge_attention.h).
 * Lowerings:
 *   HOST           U = x_src . w1_src, V = x_dst . w1_dst as tg_matmul nodes on row slices of w1
 *                  (reshape + slice + reshape), then one "edge_attention" node (host/edge_attention.c,
 *                  f32 / f64) that reads w1's geometry and edge-feature rows itself and evaluates the
 *                  rest of the score MLP per edge with the softmax and the weighted sum; saves lse f64
 *                  [H, Nq], the backward recomputes a, z, s and p
 *   CUDA_FUSED     the same decomposition; the node runs cuda/edge_attention.h's kernels; saves lse
 *                  f32 [H, Nq] only (nothing of size E in either direction); sizes outside the
 *                  kernels' range are TG_ERR_UNSUPPORTED (AUTO picks CUDA_COMPOSED then). In f32
 *                  at hidden 16 with positions and both feature products, the geometry is folded into U and V
 *                  in place (cuda_edge_fold: U += ps . wp, V -= pd . wp) and the edge kernels run
 *                  without positions; the backward maps dU, dV back to the positions and wp
 *                  (cuda_edge_unfold). TIGA_EA_FOLD=0 in the environment turns the fold off
 *                  (benchmarks, tests of both paths). The small f32 case (hidden 16, no per-edge
 *                  geometry left, no edge features, H <= 4, H * F in 4 / 8 / 16) runs the lane
 *                  kernels (one lane per edge, cuda/edge_attention_ln.cu); TIGA_EA_LANES=0 turns them
 *                  off, =1 / 2 / 4 / 8 / 16 / 32 forces the lanes per row. f32 at hidden 64 without
 *                  edge features, H in {1, 2, 4}, H * F in 8 / 16 / 32 / 64, runs the slice kernels
 *                  (8 lanes an edge, cuda/edge_attention_sl.cu); TIGA_EA_SLICE=0 turns them off.
 *                  Rows and sources go to the kernels in the relation's locality order when the
 *                  gathered rows reach 16 MiB (TIGA_EA_ORDER=0 / 1: off / on). Self attention
 *                  (one x of at most 8 columns and one position value on both sides, no edge
 *                  features) at hidden 16, and at hidden 64 where the slice kernels take the call:
 *                  an edge_attention_products node makes U and V with the geometry folded in (the
 *                  kernels run without positions), and at hidden 16 on big graphs the graph is
 *                  renumbered (tgi_rel_dev_renum; the values in the new order from the products
 *                  node when they are x's own rows, else from a rows_renumbered node). Backward
 *                  memory:
 *                  the lane and slice kernels write dU over U (U's last reader; a second sweep
 *                  computes U again), and the values' gradient goes into the gradient of the value
 *                  `values` is a reshape of (tgi_grad_d_base). With opts recompute_products the
 *                  node takes x_src / x_dst themselves (in the U / V slots) and makes U and V in
 *                  temporary device memory in each pass (ea_products; no tg_matmul nodes, no fold,
 *                  no products node), so nothing of size [N, hidden] stays on the tape between the
 *                  passes; its backward adds the products' gradients into x's and w1's. On the
 *                  self-attention case above those products are the folded ones
 *                  (cuda_edge_products), their backward cuda_edge_products_backward (es->rpo).
 *                  TIGA_EA_OWN=0 turns the self-attention products off (both forms).
 *   CUDA_COMPOSED  recorded ops with [E, ...] intermediates: concat(displacement, gather(x_src,
 *                  SOURCE), gather(x_dst, DEST), edge_feat) -> linear(w1, b1) -> leaky_relu ->
 *                  linear(w2, b2) = scores [E, H] -> tg_graph_attend (its composed form)
 * Node inputs: {U?, V?, pos_src?, pos_dst?, edge_feat?, values, w1, b1?, w2, b2?}; outputs {out, lse?}.
 * Attention dropout: tg_graph_attend's rule and stream (one RNG call per call with keep < 1, taken
 * after every check passed), so the three lowerings drop the same (h, i, j). */
#include "graph.h"
#include "../host/edge_attention.h"

#ifdef TIGA_HAVE_CUDA
#include "../cuda/edge_attention.h"
#include "../cuda/shape.h"
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { IN_U, IN_V, IN_PS, IN_PD, IN_FE, IN_VALUES, IN_W1, IN_B1, IN_W2, IN_B2, N_IN };

/* The node's parameters (host arena, n->aux). */
typedef struct ea_state {
  graph_state *g; /* relation, E / Nq / Nk, H / F, slope, dropout */
  int64_t hid, Fs, Fd, Fe;
  int dim;
  bool fold;              /* CUDA_FUSED: geometry folded into U and V (the kernels see dim 0) */
  int lanes;              /* CUDA_FUSED: tgc_edge_attn.lanes (TIGA_EA_LANES, read once per call) */
  int slice;              /* CUDA_FUSED: tgc_edge_attn.slice (TIGA_EA_SLICE, read once per call) */
  int big;                /* CUDA_FUSED: tgc_edge_attn.big (TIGA_EA_BIG, read once per call) */
  const int32_t *ro, *so; /* CUDA_FUSED: the relation's locality schedules (NULL: identity) */
  bool own;               /* CUDA_FUSED: U, V from an edge_attention_products node (geometry folded) */
  bool rp;                /* CUDA_FUSED, opts recompute_products: slots IN_U / IN_V hold x_src / x_dst; U and V
                           * live in temporary memory during each pass (ea_products) */
  bool rpo;               /* rp on the self-attention case of `own`: each pass makes U and V with the geometry
                           * folded in (cuda_edge_products; the kernels see dim 0), the backward maps dU, dV
                           * to x, the positions and w1 (cuda_edge_products_backward) */
  const int32_t *perm;    /* own: the graph renumbered (new -> old), U, V, values in the new numbering */
#ifdef TIGA_HAVE_CUDA
  tgc_csr rcsr; /* the renumbered CSR and its transpose (relation.h: tgi_rel_dev_renum) */
#endif
  int8_t slot[N_IN]; /* node input index of each argument, -1 when absent */
} ea_state;

static void describe(const tgi_node *n, char *buf, size_t cap) {
  const ea_state *es = n->aux;
  const graph_state *st = es->g;
  char rel[128];
  tgi_rel_describe(st->rel, rel, sizeof rel);
  int w = snprintf(buf, cap, "%s H=%lld F=%lld hidden=%lld dim=%d Fs=%lld Fd=%lld Fe=%lld slope=%g", rel,
                   (long long)st->H, (long long)st->F, (long long)es->hid, es->dim, (long long)es->Fs,
                   (long long)es->Fd, (long long)es->Fe, st->slope);
  if (st->keep < 1 && w > 0 && (size_t)w < cap)
    w += snprintf(buf + w, cap - (size_t)w, " dropout keep=%g call=%llu", st->keep, (unsigned long long)st->call);
  if (n->cap->provider == TG_PROVIDER_CUDA_FUSED && w > 0 && (size_t)w < cap)
    snprintf(buf + w, cap - (size_t)w, "%s%s%s%s",
             es->fold  ? " fused geometry-folded"
             : es->own ? " fused on products"
                       : " fused",
             es->rpo  ? " geometry-folded products recomputed"
             : es->rp ? " products recomputed"
                      : "",
             es->ro ? " scheduled" : "", es->own && es->perm ? " renumbered" : "");
}

static size_t dt_size(tg_dtype dt) { return dt == TG_F64 ? 8 : dt == TG_F32 ? 4 : 2; }

/* Row offsets (in elements) of w1's geometry and edge-feature blocks. */
static size_t off_wp(const ea_state *es) {
  (void)es;
  return 0;
}
static size_t off_we(const ea_state *es) { return (size_t)((es->dim + es->Fs + es->Fd) * es->hid); }
/* The geometry (edge = false) or edge-feature (edge = true) row block inside a w1-shaped buffer, its
 * value or its gradient (the one cast serves both); NULL when the buffer or the block is absent. */
static char *w1_block(const ea_state *es, const void *w1, size_t elem, bool edge) {
  if (!w1 || !(edge ? es->Fe : es->dim)) return NULL;
  return (char *)(uintptr_t)w1 + (edge ? off_we(es) : off_wp(es)) * elem;
}

static host_edge_attn host_attn(const ea_state *es) {
  const graph_state *st = es->g;
  return (host_edge_attn){.H = st->H,
                          .F = st->F,
                          .hid = es->hid,
                          .dim = es->dim,
                          .Fe = es->Fe,
                          .slope = st->slope,
                          .drop = {.H = st->H, .F = st->F, .keep = st->keep, .seed = st->seed, .call = st->call}};
}

#ifdef TIGA_HAVE_CUDA
static tgc_edge_attn dev_attn(const ea_state *es, tg_dtype dt) {
  const graph_state *st = es->g;
  return (tgc_edge_attn){.H = st->H,
                         .F = st->F,
                         .hid = es->hid,
                         .dim = es->fold || es->own || es->rpo ? 0 : es->dim,
                         .Fe = (int)es->Fe,
                         .dtype = dt,
                         .slope = (float)st->slope,
                         .keep = st->keep < 1 ? st->keep : 0,
                         .seed = st->seed,
                         .call = st->call,
                         .lanes = es->lanes,
                         .slice = es->slice,
                         .big = es->big,
                         .row_order = es->ro,
                         .src_order = es->so,
                         .row_map = es->perm};
}
#endif

/* Input k of the node (NULL when absent). */
static tgi_value *in_of(tg_tape *t, const tgi_node *n, const ea_state *es, int k) {
  return es->slot[k] < 0 ? NULL : tgi_in(t, n, (uint32_t)es->slot[k]);
}

/* Pointers to the node's inputs (read) and wanted gradients on one side (host or device). */
typedef struct ea_ptrs {
  const void *in[N_IN];
  void *grad[N_IN];
} ea_ptrs;

/* skip: a bit (1 << k) for each input k whose gradient the caller sets itself. */
static bool gather_ptrs(tg_tape *t, const tgi_node *n, const ea_state *es, bool dev, bool grads, unsigned skip,
                        ea_ptrs *p) {
  memset(p, 0, sizeof *p);
  for (int k = 0; k < N_IN; k++) {
    tgi_value *v = in_of(t, n, es, k);
    if (!v) continue;
    p->in[k] = dev ? tgi_read_d(t, v) : tgi_read_h(t, v);
    if (skip & (1u << k)) continue;
    /* the values' gradient goes straight into the base of a reshape (tgi_grad_d_base: the kernels
     * add into it), so `values` = a reshape of the features costs no gradient buffer */
    if (grads && v->requires_grad)
      p->grad[k] = !dev ? tgi_grad_h(t, v) : k == IN_VALUES ? tgi_grad_d_base(t, v) : tgi_grad_d(t, v);
  }
  return t->status == TG_OK;
}

static host_edge_inputs host_inputs(const ea_state *es, const ea_ptrs *p, tg_dtype dt) {
  const size_t z = dt_size(dt);
  return (host_edge_inputs){.U = p->in[IN_U],
                            .V = p->in[IN_V],
                            .ps = p->in[IN_PS],
                            .pd = p->in[IN_PD],
                            .fe = p->in[IN_FE],
                            .values = p->in[IN_VALUES],
                            .wp = w1_block(es, p->in[IN_W1], z, false),
                            .we = w1_block(es, p->in[IN_W1], z, true),
                            .b1 = p->in[IN_B1],
                            .w2 = p->in[IN_W2],
                            .b2 = p->in[IN_B2]};
}

#ifdef TIGA_HAVE_CUDA
static tgc_edge_inputs dev_inputs(const ea_state *es, const ea_ptrs *p, tg_dtype dt) {
  const size_t z = dt_size(dt);
  return (tgc_edge_inputs){.U = p->in[IN_U],
                           .V = p->in[IN_V],
                           .ps = p->in[IN_PS],
                           .pd = p->in[IN_PD],
                           .fe = p->in[IN_FE],
                           .values = p->in[IN_VALUES],
                           .wp = w1_block(es, p->in[IN_W1], z, false),
                           .we = w1_block(es, p->in[IN_W1], z, true),
                           .b1 = p->in[IN_B1],
                           .w2 = p->in[IN_W2],
                           .b2 = p->in[IN_B2]};
}
#endif

#ifdef TIGA_HAVE_CUDA
/* ------------------------------------------------------------ per-node products (CUDA_FUSED)
 * The hidden-16 self-attention path (one feature value x and one position value p on both sides):
 * an "edge_attention_products" node {x, p, w1} -> {U, V} [N, 16] computes the per-node products
 * with the geometry folded in (cuda_edge_products: U = x ws + p wp, V = x wd - p wp) in one pass,
 * in the renumbered order when the graph is renumbered, and maps dU, dV back to x, p and w1's
 * three blocks (cuda_edge_products_backward). With renumbering, a "rows_renumbered" node {values}
 * -> {values in the new order} gives the kernels local value rows (its backward scatters the
 * gradient back). Neither saves anything. */
typedef struct ep_state {
  int64_t n, cols;     /* nodes; rows node: floats a row */
  int dim, Fx, hid;    /* products node */
  bool xr;             /* products node: a third output, x's rows in the new order (the values) */
  size_t ows, owd;     /* products node: element offsets of w1's x_src and x_dst blocks */
  const int32_t *perm; /* new -> old, or NULL */
} ep_state;

static bool ep_run(tg_tape *t, const ep_state *e, tgi_value *x, tgi_value *p, tgi_value *w1, float *U, float *V,
                   float *Xr, int u_only) {
  const float *px = tgi_read_d(t, x), *pp = tgi_read_d(t, p), *pw = tgi_read_d(t, w1);
  if (!px || !pp || !pw) return false;
  tg_status s = cuda_edge_products(TGI_STREAM(t), e->n, e->dim, e->Fx, e->hid, e->perm, px, pp, pw, pw + e->ows,
                                   pw + e->owd, U, V, Xr, u_only);
  if (s) return tgi_fail_cuda(t, s, "edge attention per-node products"), false;
  return true;
}

static tg_status ep_backward(tg_tape *t, tgi_node *n) {
  const ep_state *e = n->aux;
  tgi_value *x = tgi_in(t, n, 0), *p = tgi_in(t, n, 1), *w1 = tgi_in(t, n, 2), *U = tgi_out(t, n, 0),
            *V = tgi_out(t, n, 1), *Xr = e->xr ? tgi_out(t, n, 2) : NULL;
  const bool gxr = Xr && Xr->has_grad;
  if ((!x->requires_grad && !p->requires_grad && !w1->requires_grad) || (!U->has_grad && !V->has_grad && !gxr))
    return TG_OK;
  const float *dU = U->has_grad ? tgi_grad_d(t, U) : NULL, *dV = V->has_grad ? tgi_grad_d(t, V) : NULL,
              *dXr = gxr ? tgi_grad_d(t, Xr) : NULL;
  const float *px = tgi_read_d(t, x), *pp = tgi_read_d(t, p), *pw = tgi_read_d(t, w1);
  float *gx = x->requires_grad ? tgi_grad_d(t, x) : NULL, *gp = p->requires_grad ? tgi_grad_d(t, p) : NULL,
        *gw = w1->requires_grad ? tgi_grad_d(t, w1) : NULL;
  if (t->status) return t->status;
  const size_t wb = gw ? cuda_edge_products_workspace(e->dim, e->Fx, e->hid) : 0;
  void *ws = wb ? tgi_scratch_d(t, wb) : NULL;
  if (wb && !ws) return t->status;
  tg_status s = cuda_edge_products_backward(TGI_STREAM(t), e->n, e->dim, e->Fx, e->hid, e->perm, px, pp, pw,
                                            pw + e->ows, pw + e->owd, dU, dV, dXr, gx, gp, gw, gw ? gw + e->ows : NULL,
                                            gw ? gw + e->owd : NULL, ws, wb);
  if (s) tgi_fail_cuda(t, s, "edge attention per-node products backward");
  return s;
}

static void ep_describe(const tgi_node *n, char *buf, size_t cap) {
  const ep_state *e = n->aux;
  snprintf(buf, cap, "n=%lld dim=%d Fx=%d hidden=%d geometry-folded%s%s", (long long)e->n, e->dim, e->Fx, e->hid,
           e->perm ? " renumbered" : "", e->xr ? " +value-rows" : "");
}

static tg_status rows_backward(tg_tape *t, tgi_node *n) {
  const ep_state *e = n->aux;
  tgi_value *x = tgi_in(t, n, 0), *y = tgi_out(t, n, 0);
  if (!x->requires_grad || !y->has_grad) return TG_OK;
  const float *dy = tgi_grad_d(t, y);
  float *gx = dy ? tgi_grad_d_base(t, x) : NULL;
  if (!gx) return t->status;
  tg_status s = cuda_rows_permute(TGI_STREAM(t), e->n, e->cols, e->perm, dy, gx, 1);
  if (s) tgi_fail_cuda(t, s, "renumbered rows backward");
  return s;
}

static void rows_describe(const tgi_node *n, char *buf, size_t cap) {
  const ep_state *e = n->aux;
  snprintf(buf, cap, "n=%lld cols=%lld", (long long)e->n, (long long)e->cols);
}

static const tgi_capsule cap_ep = {"edge_attention_products", TG_PROVIDER_CUDA_FUSED, ep_backward, ep_describe};
static const tgi_capsule cap_rows = {"rows_renumbered", TG_PROVIDER_CUDA_FUSED, rows_backward, rows_describe};

/* Records the products node: UV[0] = U, UV[1] = V, and with xr (the values' shape) UV[2] = x's rows
 * in the new order, shaped as xr. */
static bool ep_record(tg_tape *t, const ea_state *es, tgi_value *x, tgi_value *p, tgi_value *w1, const int32_t *perm,
                      const tgi_value *xr, tgi_value **UV) {
  ep_state *e = tgi_scratch_h(t, sizeof *e);
  if (!e) return false;
  *e = (ep_state){.n = es->g->Nk,
                  .dim = es->dim,
                  .Fx = (int)es->Fs,
                  .hid = (int)es->hid,
                  .ows = (size_t)(es->dim * es->hid),
                  .owd = (size_t)((es->dim + es->Fs) * es->hid),
                  .perm = perm,
                  .xr = xr != NULL};
  const int64_t shape[2] = {e->n, es->hid};
  tgi_value *U = tgi_result(t, TG_F32, 2, shape), *V = U ? tgi_result(t, TG_F32, 2, shape) : NULL;
  tgi_value *X = V && xr ? tgi_result(t, TG_F32, xr->ndim, xr->shape) : NULL;
  float *pu = V ? tgi_write_d(t, U) : NULL, *pv = pu ? tgi_write_d(t, V) : NULL, *px = X ? tgi_write_d(t, X) : NULL;
  if (!pv || (xr && !px) || !ep_run(t, e, x, p, w1, pu, pv, px, 0)) return false;
  tgi_value *in[3] = {x, p, w1}, *out[3] = {U, V, X};
  tgi_node *n = tgi_record(t, &cap_ep, 3, in, xr ? 3 : 2, out);
  if (n) n->aux = e;
  UV[0] = U, UV[1] = V;
  if (xr) UV[2] = X;
  return t->status == TG_OK;
}

/* Records the rows node: values in the new numbering. */
static tgi_value *rows_record(tg_tape *t, tgi_value *v, const int32_t *perm) {
  ep_state *e = tgi_scratch_h(t, sizeof *e);
  if (!e) return NULL;
  *e = (ep_state){.n = v->shape[0], .cols = v->shape[1] * v->shape[2], .perm = perm};
  tgi_value *y = tgi_result(t, TG_F32, 3, v->shape);
  const float *px = y ? tgi_read_d(t, v) : NULL;
  float *py = px ? tgi_write_d(t, y) : NULL;
  if (!py) return NULL;
  tg_status s = cuda_rows_permute(TGI_STREAM(t), e->n, e->cols, perm, px, py, 0);
  if (s) return tgi_fail_cuda(t, s, "renumbering the value rows"), NULL;
  tgi_value *in[1] = {v}, *out[1] = {y};
  tgi_node *n = tgi_record(t, &cap_rows, 1, in, 1, out);
  if (n) n->aux = e;
  return t->status == TG_OK ? y : NULL;
}

/* Whether v is x's rows themselves: f32 both, the same bytes at the same device address (a reshape
 * of x). Reads both onto the device (the products node reads x there anyway). */
static bool values_are_x(tg_tape *t, tgi_value *v, tgi_value *x) {
  if (v->dtype != TG_F32 || x->dtype != TG_F32 || v->bytes != x->bytes) return false;
  const void *pv = tgi_read_d(t, v), *px = pv ? tgi_read_d(t, x) : NULL;
  return px && pv == px;
}

/* A second sweep through an edge node whose first one wrote dvalues over the renumbered values:
 * the rows renumbered again from the rows node's input — or, for x's rows from the products node,
 * that node's products again (U as well: the same bits as its storage holds, ea_redo_U having run
 * first when a sweep wrote dU over it). */
static bool rows_redo(tg_tape *t, tgi_value *y) {
  const tgi_node *n = y->producer >= 0 ? &t->nodes[y->producer] : NULL;
  if (n && n->cap == &cap_ep && n->n_out == 3 && tgi_out(t, n, 2) == y) {
    tgi_value *U = tgi_out(t, n, 0);
    if (!ep_run(t, n->aux, tgi_in(t, n, 0), tgi_in(t, n, 1), tgi_in(t, n, 2), U->data.d, NULL, y->data.d, 1))
      return false;
    y->flags &= ~TGI_SPENT;
    return true;
  }
  if (!n || n->cap != &cap_rows)
    return tgi_fail(t, TG_ERR_INTERNAL, "recomputing renumbered rows that no rows node produced"), false;
  const ep_state *e = n->aux;
  const float *px = tgi_read_d(t, tgi_in(t, n, 0));
  if (!px) return false;
  tg_status s = cuda_rows_permute(TGI_STREAM(t), e->n, e->cols, e->perm, px, y->data.d, 0);
  if (s) return tgi_fail_cuda(t, s, "renumbering the value rows"), false;
  y->flags &= ~TGI_SPENT;
  return true;
}
#endif

#ifdef TIGA_HAVE_CUDA
/* ------------------------------------------------------------ recomputed products (es->rp)
 * U = x_src . w1_src and V = x_dst . w1_dst (w1's row blocks read in place) in device memory of
 * their own (tgi_device_alloc: stream-ordered, counted by tg_runtime_memory), by the launcher the
 * tg_matmul nodes of the other path use, so they are the same bits. A pass computes them, runs its
 * kernels and frees them (ea_tmp_free): nothing of size [N, hidden] outlives the pass. */
typedef struct ea_tmp {
  void *p[4]; /* U, V, and in the backward dU (when not over U), dV */
} ea_tmp;

static void ea_tmp_free(tg_tape *t, ea_tmp *m) {
  for (int k = 0; k < 4; k++)
    tgi_device_free(tgi_dev(t), m->p[k]), m->p[k] = NULL;
}

/* Temporary device buffer of bytes (zero-filled when zero); NULL + sticky error on failure. */
static void *ea_tmp_alloc(tg_tape *t, size_t bytes, bool zero, const char *what) {
  char msg[TGI_MSG_CAP];
  void *q = NULL;
  tg_status s = tgi_device_alloc(tgi_dev(t), bytes, &q, msg);
  if (!s && zero && (s = tgi_device_zero(tgi_dev(t), q, bytes, msg))) tgi_device_free(tgi_dev(t), q), q = NULL;
  if (s) tgi_fail(t, s, "%s: %s", what, msg);
  return q;
}

/* Rows of w1's block for x_src (side 0) or x_dst (side 1), as an element offset. */
static size_t off_w1x(const ea_state *es, int side) { return (size_t)((es->dim + (side ? es->Fs : 0)) * es->hid); }

/* m->p[0] = U, m->p[1] = V (NULL for an absent side) from x (the node's IN_U / IN_V inputs, read
 * at px[]) and w1 (at pw); es->rpo: both with the geometry folded in, from x (px[0] == px[1]) and
 * the positions (pos: the node's IN_PS == IN_PD) in one pass (cuda_edge_products). */
static bool ea_products(tg_tape *t, const ea_state *es, tg_dtype dt, const void *const px[2], const void *pos,
                        const void *pw, ea_tmp *m) {
  const size_t z = dt_size(dt);
  if (es->rpo) {
    const int64_t n = es->g->Nk;
    const float *w = pw;
    for (int side = 0; side < 2; side++)
      if (!(m->p[side] = ea_tmp_alloc(t, (size_t)(n * es->hid) * sizeof(float), false, "per-node products")))
        return false;
    tg_status s = cuda_edge_products(TGI_STREAM(t), n, es->dim, (int)es->Fs, (int)es->hid, NULL, px[0], pos,
                                     w + off_wp(es), w + off_w1x(es, 0), w + off_w1x(es, 1), m->p[0], m->p[1], NULL, 0);
    if (s) return tgi_fail_cuda(t, s, "edge attention per-node products"), false;
    return true;
  }
  tgc_blas h = tgi_blas_of(t);
  for (int side = 0; side < 2; side++) {
    if (!px[side]) continue;
    const int64_t rows = side ? es->g->Nq : es->g->Nk, cols = side ? es->Fd : es->Fs;
    if (!(m->p[side] = ea_tmp_alloc(t, (size_t)(rows * es->hid) * z, false, "per-node products"))) return false;
    tg_status s = cuda_matmul_forward(&h, dt, px[side], (const char *)pw + off_w1x(es, side) * z, m->p[side], 1, rows,
                                      cols, es->hid, 1);
    if (s) return tgi_fail_cuda(t, s, side ? "x_dst . w1_dst" : "x_src . w1_src"), false;
  }
  return true;
}
#endif

/* ------------------------------------------------------------ backward (HOST, CUDA_FUSED) */

#ifdef TIGA_HAVE_CUDA
/* A second sweep through a node whose first one wrote dU over U (tgi_grad_d_over): U computed
 * again from x_src and w1 (its matmul node's inputs, which the sweep's version check covers), the
 * geometry folded in again when the forward folded it; then U reads as in the forward. */
static bool ea_redo_U(tg_tape *t, const tgi_node *n, const ea_state *es, tgi_value *U) {
  if (es->own) { /* U from the products node: U (alone) computed again from its inputs */
    const tgi_node *pn = U->producer >= 0 ? &t->nodes[U->producer] : NULL;
    if (!pn || pn->cap != &cap_ep)
      return tgi_fail(t, TG_ERR_INTERNAL, "recomputing per-node products that no products node produced"), false;
    if (!ep_run(t, pn->aux, tgi_in(t, pn, 0), tgi_in(t, pn, 1), tgi_in(t, pn, 2), U->data.d, NULL, NULL, 1))
      return false;
    U->flags &= ~TGI_SPENT;
    return true;
  }
  if (tgi_matmul_redo(t, U)) return false;
  if (es->fold) {
    const float *ps = tgi_read_d(t, in_of(t, n, es, IN_PS)), *w1 = tgi_read_d(t, in_of(t, n, es, IN_W1));
    if (!ps || !w1) return false;
    tg_status fs = cuda_edge_fold(TGI_STREAM(t), es->g->Nk, 0, es->dim, (int)es->hid, U->data.d, NULL, ps, NULL,
                                  (const float *)w1_block(es, w1, sizeof(float), false));
    if (fs) return tgi_fail_cuda(t, fs, "edge attention geometry fold");
  }
  U->flags &= ~TGI_SPENT;
  return true;
}
#endif

static tg_status ea_backward(tg_tape *t, tgi_node *n) {
  const ea_state *es = n->aux;
  const graph_state *st = es->g;
  bool any = false;
  for (int k = 0; k < N_IN; k++) {
    tgi_value *v = in_of(t, n, es, k);
    any |= v && v->requires_grad;
  }
  if (!any) return TG_OK;
  if (!n->saved) return tgi_fail(t, TG_ERR_INTERNAL, "edge attention node has no saved lse"), TG_ERR_INTERNAL;
  tgi_value *out = tgi_out(t, n, 0), *vals = in_of(t, n, es, IN_VALUES);
  tg_dtype dt = (tg_dtype)vals->dtype;
  tgi_value *ps = in_of(t, n, es, IN_PS);
  ea_ptrs p;
  const size_t z = dt_size(dt);
  if (n->cap->provider == TG_PROVIDER_HOST) {
    host_graph hg;
    const void *gy = tgi_grad_h(t, out);
    if (!gy || !gather_ptrs(t, n, es, false, true, 0, &p) || !tgi_graph_host(t, st, &hg)) return t->status;
    host_edge_grads d = {.U = p.grad[IN_U],
                         .V = p.grad[IN_V],
                         .ps = p.grad[IN_PS],
                         .pd = p.grad[IN_PD],
                         .fe = p.grad[IN_FE],
                         .values = p.grad[IN_VALUES],
                         .wp = w1_block(es, p.grad[IN_W1], z, false),
                         .we = w1_block(es, p.grad[IN_W1], z, true),
                         .b1 = p.grad[IN_B1],
                         .w2 = p.grad[IN_W2],
                         .b2 = p.grad[IN_B2]};
    host_edge_attn a = host_attn(es);
    host_edge_inputs hi = host_inputs(es, &p, dt);
    tg_status s = host_edge_attention_backward(dt, ps ? (tg_dtype)ps->dtype : dt, &hg, &a, &hi, gy, n->saved, &d);
    if (s) tgi_fail(t, s, "out of host memory for the edge attention gradient");
    return s;
  }
#ifdef TIGA_HAVE_CUDA
  /* dU over U: U = x_src . w1_src is this call's own product, read by this node alone, and the
   * lane and slice kernels read U[j] last in the pass over source j, which then writes dU[j]; so
   * U's storage takes its gradient (tgi_grad_d_over: one [Nk, hid] buffer less; a second sweep
   * through this recording computes U again first, ea_redo_U) */
  tgi_value *U = es->rp ? NULL : in_of(t, n, es, IN_U);                         /* rp: the slot holds x_src */
  if (U && (U->flags & TGI_SPENT) && !ea_redo_U(t, n, es, U)) return t->status; /* a second sweep */
  if (es->perm && (vals->flags & TGI_SPENT) && !rows_redo(t, vals)) return t->status;
  bool over = U && tgi_grad_over_ok(t, U);
  /* renumbered: the values' rows are the rows node's own result, read last by the source pass, which
   * then writes their gradient over them (values_over: the lane kernels) */
  const bool vover = es->perm && tgi_grad_over_ok(t, vals);
  const void *gy = tgi_grad_d(t, out), *po = tgi_read_d(t, out);
  /* rp: x's gradients come after (rpo: the positions' too) */
  const unsigned rp_skip = (es->rp ? (1u << IN_U) | (1u << IN_V) : 0) | (es->rpo ? (1u << IN_PS) | (1u << IN_PD) : 0);
  if (!gy || !po ||
      !gather_ptrs(t, n, es, true, true, (over ? 1u << IN_U : 0) | (vover ? 1u << IN_VALUES : 0) | rp_skip, &p))
    return t->status;
  /* rp: which products' gradients are wanted (through x or w1's block) */
  tgi_value *w1v = in_of(t, n, es, IN_W1);
  bool rp_want[2] = {false, false};
  const void *rp_x[2] = {NULL, NULL};
  for (int side = 0; es->rp && side < 2; side++) {
    tgi_value *x = in_of(t, n, es, side ? IN_V : IN_U);
    rp_x[side] = x ? p.in[side ? IN_V : IN_U] : NULL;
    rp_want[side] = x && (x->requires_grad || w1v->requires_grad || (es->rpo && ps->requires_grad));
  }
  if (over) p.grad[IN_U] = (void *)(uintptr_t)p.in[IN_U]; /* confirmed below */
  if (vover) p.grad[IN_VALUES] = (void *)(uintptr_t)p.in[IN_VALUES];
  if (es->perm && !((uintptr_t)gy % 16 == 0)) { /* the lane kernels read dout rows as vectors */
    const size_t bytes = (size_t)(st->Nq * st->H * st->F) * sizeof(float);
    void *c = tgi_scratch_d(t, bytes);
    char msg[TGI_MSG_CAP];
    tg_status cs = c ? tgi_device_d2d(tgi_dev(t), c, gy, bytes, msg) : TG_OK;
    if (!c) return t->status;
    if (cs) return tgi_fail(t, cs, "%s", msg), cs;
    gy = c;
  }
  tgc_edge_inputs di = dev_inputs(es, &p, dt);
  tgc_edge_grads d = {.U = p.grad[IN_U],
                      .V = p.grad[IN_V],
                      .ps = p.grad[IN_PS],
                      .pd = p.grad[IN_PD],
                      .fe = p.grad[IN_FE],
                      .values = p.grad[IN_VALUES],
                      .wp = w1_block(es, p.grad[IN_W1], z, false),
                      .we = w1_block(es, p.grad[IN_W1], z, true),
                      .b1 = p.grad[IN_B1],
                      .w2 = p.grad[IN_W2],
                      .b2 = p.grad[IN_B2]};
  float *rpo_gw = NULL; /* rpo: w1's gradient, for the products' backward (the kernels see dim 0) */
  if (es->rpo) rpo_gw = p.grad[IN_W1], d.wp = NULL;
  /* folded geometry: the kernels see dim 0; the positions' and wp's gradients come from dU, dV
   * afterwards (scratch dU / dV when U or V itself wants none) */
  float *gps = NULL, *gpd = NULL, *gwp = NULL;
  if (es->fold) {
    gps = d.ps, gpd = d.pd, gwp = d.wp;
    d.ps = d.pd = NULL, d.wp = NULL;
    char msg[TGI_MSG_CAP];
    for (int side = 0; side < 2 && (gps || gpd || gwp); side++) {
      void **g = side ? &d.V : &d.U;
      if (*g) continue;
      size_t bytes = (size_t)((side ? st->Nq : st->Nk) * es->hid) * sizeof(float);
      if (!(*g = tgi_scratch_d(t, bytes))) return t->status;
      tg_status zs = tgi_device_zero(tgi_dev(t), *g, bytes, msg);
      if (zs) return tgi_fail(t, zs, "%s", msg), zs;
    }
  }
  /* per-source sums (dU, dvalues, dpos_src) walk the transpose */
  bool per_source = d.U || d.values || d.ps || rp_want[0];
  tgc_csr cg;
  if (es->perm)
    cg = es->rcsr;
  else if (!tgi_rel_dev_csr(t, st->rel, per_source, &cg))
    return t->status;
  tgc_edge_attn a = dev_attn(es, dt);
  if (es->perm && per_source) { /* dout in the new numbering, for the source pass */
    if (!(a.dout_new = tgi_scratch_d(t, (size_t)(st->Nq * st->H * st->F) * sizeof(float)))) return t->status;
  }
  size_t wb = cuda_edge_attention_backward_workspace(&cg, &a);
  size_t fb = gwp ? cuda_edge_unfold_workspace(es->dim, (int)es->hid) : 0;
  void *ws = wb ? tgi_scratch_d(t, wb) : NULL, *fws = fb ? tgi_scratch_d(t, fb) : NULL;
  if ((wb && !ws) || (fb && !fws)) return t->status;
  if (over && !(over = cuda_edge_attention_dU_over(&cg, &a, &di, po, gy, &d, ws)) && !(d.U = tgi_grad_d(t, U)))
    return t->status; /* kernels that read U later: dU gets its own buffer */
  if (over && !tgi_grad_d_over(t, U)) return t->status;
  d.U_over = over;
  if (vover && !tgi_grad_d_over(t, vals)) return t->status;
  d.values_over = vover;
  /* pos_src and pos_dst the same value: the kernels get distinct buffers (dpd into zeroed scratch,
   * added back after), whatever order they write them in */
  float *gpd2 = NULL;
  if (d.ps && d.ps == d.pd) {
    char msg[TGI_MSG_CAP];
    size_t bytes = (size_t)(st->Nq * es->dim) * sizeof *gpd2;
    if (!(gpd2 = tgi_scratch_d(t, bytes))) return t->status;
    tg_status zs = tgi_device_zero(tgi_dev(t), gpd2, bytes, msg);
    if (zs) return tgi_fail(t, zs, "%s", msg), zs;
    d.pd = gpd2;
  }
  /* rp: U and V again, dV in zeroed memory, dU over U where the kernels allow it (else zeroed) */
  ea_tmp m = {{NULL}};
  tg_status s = TG_OK;
  if (es->rp) {
    if (!ea_products(t, es, dt, rp_x, p.in[IN_PS], p.in[IN_W1], &m)) goto rp_out;
    di.U = m.p[0], di.V = m.p[1];
    if (rp_want[1] &&
        !(d.V = m.p[3] = ea_tmp_alloc(t, (size_t)(st->Nq * es->hid) * z, true, "gradient of x_dst . w1_dst")))
      goto rp_out;
    if (rp_want[0]) {
      d.U = m.p[0];
      d.U_over = cuda_edge_attention_dU_over(&cg, &a, &di, po, gy, &d, ws);
      if (!d.U_over &&
          !(d.U = m.p[2] = ea_tmp_alloc(t, (size_t)(st->Nk * es->hid) * z, true, "gradient of x_src . w1_src")))
        goto rp_out;
    }
  }
  s = cuda_edge_attention_backward(TGI_STREAM(t), &cg, &a, &di, po, gy, n->saved, &d, ws, wb);
  if (!s && gpd2) s = cuda_cols(TGI_STREAM(t), TG_F32, st->Nq, es->dim, gpd2, es->dim, 0, d.ps, es->dim, 0, 1);
  if (!s && es->fold && (gps || gpd || gwp))
    s = cuda_edge_unfold(TGI_STREAM(t), st->Nk, st->Nq, es->dim, (int)es->hid, d.U, d.V, p.in[IN_PS], p.in[IN_PD],
                         (const float *)w1_block(es, p.in[IN_W1], z, false), gps, gpd, gwp, fws, fb);
  if (s) tgi_fail_cuda(t, s, "fused edge attention backward");
  /* rpo: dU, dV to x, the positions and w1 in one pass */
  if (!s && es->rpo && rp_want[0]) {
    tgi_value *x = in_of(t, n, es, IN_U);
    float *gx = x->requires_grad ? tgi_grad_d(t, x) : NULL, *gp = ps->requires_grad ? tgi_grad_d(t, ps) : NULL;
    const size_t pb = rpo_gw ? cuda_edge_products_workspace(es->dim, (int)es->Fs, (int)es->hid) : 0;
    void *pws = pb ? tgi_scratch_d(t, pb) : NULL;
    if ((x->requires_grad && !gx) || (ps->requires_grad && !gp) || (pb && !pws)) goto rp_out;
    const float *w = p.in[IN_W1];
    float *gw = rpo_gw;
    s = cuda_edge_products_backward(TGI_STREAM(t), st->Nk, es->dim, (int)es->Fs, (int)es->hid, NULL, rp_x[0],
                                    p.in[IN_PS], w + off_wp(es), w + off_w1x(es, 0), w + off_w1x(es, 1), d.U, d.V, NULL,
                                    gx, gp, gw ? gw + off_wp(es) : NULL, gw ? gw + off_w1x(es, 0) : NULL,
                                    gw ? gw + off_w1x(es, 1) : NULL, pws, pb);
    if (s) tgi_fail_cuda(t, s, "edge attention per-node products backward");
  }
  /* rp: the products' gradients, as their tg_matmul nodes would take them: x (+)= dU . w1_src^T,
   * w1_src (+)= x^T . dU (likewise V), added into x's and w1's gradients */
  for (int side = 0; !s && !es->rpo && side < 2; side++) {
    if (!rp_want[side]) continue;
    tgi_value *x = in_of(t, n, es, side ? IN_V : IN_U);
    tgc_grad ga = {NULL, 1}, gb = {NULL, 1};
    if (x->requires_grad && !(ga.p = tgi_grad_d(t, x))) goto rp_out;
    if (w1v->requires_grad) gb.p = (char *)p.grad[IN_W1] + off_w1x(es, side) * z;
    tgc_blas h = tgi_blas_of(t);
    s = cuda_matmul_backward(&h, dt, rp_x[side], (const char *)p.in[IN_W1] + off_w1x(es, side) * z, side ? d.V : d.U,
                             ga, gb, 1, side ? st->Nq : st->Nk, side ? es->Fd : es->Fs, es->hid, 1);
    if (s) tgi_fail_cuda(t, s, side ? "gradient of x_dst . w1_dst" : "gradient of x_src . w1_src");
  }
rp_out:
  ea_tmp_free(t, &m);
  return t->status;
#else
  (void)ps;
  return tgi_fail(t, TG_ERR_INTERNAL, "CUDA edge attention node in a host-only build"), TG_ERR_INTERNAL;
#endif
}

static const tgi_capsule cap_ea[2] = {{"edge_attention", TG_PROVIDER_HOST, ea_backward, describe},
                                      {"edge_attention", TG_PROVIDER_CUDA_FUSED, ea_backward, describe}};

/* ------------------------------------------------------------ argument checks */

static const char *const ARG[N_IN] = {"x_src",  "x_dst", "pos_src", "pos_dst", "edge_feat",
                                      "values", "w1",    "b1",      "w2",      "b2"};

/* v is [n0] (nd 1) or [n0, n1] (nd 2); n1 < 0: any n1 >= 1. */
static bool need_shape(tg_tape *t, const char *arg, const tgi_value *v, int nd, int64_t n0, int64_t n1,
                       const char *want) {
  if (v->ndim == nd && v->shape[0] == n0 && (nd == 1 || n1 < 0 || v->shape[1] == n1)) return true;
  char s[TGI_SHAPE_STR_CAP];
  return tgi_fail(t, TG_ERR_SHAPE, "argument '%s' has shape %s; expected %s", arg,
                  tgi_shape_str(v->shape, v->ndim, s, sizeof s), want);
}

/* Shapes (sets es and es->g's H, F). a[k] are the arguments (NULL when absent). */
static bool check_shapes(tg_tape *t, ea_state *es, tgi_value *const *a) {
  graph_state *st = es->g;
  char w[256], rs[160];
  tgi_graph_rel_str(st, rs, sizeof rs);
  if (!a[IN_PS] != !a[IN_PD])
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT,
                    "argument '%s' is TG_ABSENT but '%s' is not; expected both positions, or both TG_ABSENT for "
                    "no geometry",
                    a[IN_PS] ? "pos_dst" : "pos_src", a[IN_PS] ? "pos_src" : "pos_dst");
  if (a[IN_PS]) {
    const tgi_value *ps = a[IN_PS];
    snprintf(w, sizeof w, "[Nk = %lld, dim] with dim 1..3 (argument 'rel' is a %s)", (long long)st->Nk, rs);
    if (ps->ndim != 2 || ps->shape[1] > 3) return need_shape(t, "pos_src", ps, 2, -1, -2, w);
    if (!need_shape(t, "pos_src", ps, 2, st->Nk, -1, w)) return false;
    es->dim = (int)ps->shape[1];
    snprintf(w, sizeof w, "[Nq = %lld, dim = %d] (Nq of argument 'rel', dim from argument 'pos_src')",
             (long long)st->Nq, es->dim);
    if (!need_shape(t, "pos_dst", a[IN_PD], 2, st->Nq, es->dim, w)) return false;
  }
  snprintf(w, sizeof w, "[Nk = %lld, Fs] (argument 'rel' is a %s)", (long long)st->Nk, rs);
  if (a[IN_U] && !need_shape(t, "x_src", a[IN_U], 2, st->Nk, -1, w)) return false;
  snprintf(w, sizeof w, "[Nq = %lld, Fd] (argument 'rel' is a %s)", (long long)st->Nq, rs);
  if (a[IN_V] && !need_shape(t, "x_dst", a[IN_V], 2, st->Nq, -1, w)) return false;
  snprintf(w, sizeof w, "[E = %lld, Fe] in edge order (argument 'rel' is a %s)", (long long)st->E, rs);
  if (a[IN_FE] && !need_shape(t, "edge_feat", a[IN_FE], 2, st->E, -1, w)) return false;
  es->Fs = a[IN_U] ? a[IN_U]->shape[1] : 0;
  es->Fd = a[IN_V] ? a[IN_V]->shape[1] : 0;
  es->Fe = a[IN_FE] ? a[IN_FE]->shape[1] : 0;
  const tgi_value *v = a[IN_VALUES];
  snprintf(w, sizeof w, "[Nk = %lld, H, F] (argument 'rel' is a %s)", (long long)st->Nk, rs);
  if (v->ndim != 3 || v->shape[0] != st->Nk) return need_shape(t, "values", v, 3, -1, -1, w);
  st->H = v->shape[1], st->F = v->shape[2];
  const int64_t din = es->dim + es->Fs + es->Fd + es->Fe;
  if (din == 0)
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT,
                    "arguments 'pos_src', 'pos_dst', 'x_src', 'x_dst' and 'edge_feat' are all TG_ABSENT; the score "
                    "MLP needs at least one input");
  snprintf(w, sizeof w,
           "[dim + Fs + Fd + Fe = %d + %lld + %lld + %lld = %lld, hidden] (rows: geometry, source, destination, "
           "edge features)",
           es->dim, (long long)es->Fs, (long long)es->Fd, (long long)es->Fe, (long long)din);
  if (!need_shape(t, "w1", a[IN_W1], 2, din, -1, w)) return false;
  es->hid = a[IN_W1]->shape[1];
  snprintf(w, sizeof w, "[hidden = %lld] (hidden from argument 'w1')", (long long)es->hid);
  if (a[IN_B1] && !need_shape(t, "b1", a[IN_B1], 1, es->hid, 0, w)) return false;
  snprintf(w, sizeof w, "[hidden = %lld, H = %lld] (hidden from argument 'w1', H from argument 'values')",
           (long long)es->hid, (long long)st->H);
  if (!need_shape(t, "w2", a[IN_W2], 2, es->hid, st->H, w)) return false;
  snprintf(w, sizeof w, "[H = %lld] (H from argument 'values')", (long long)st->H);
  if (a[IN_B2] && !need_shape(t, "b2", a[IN_B2], 1, st->H, 0, w)) return false;
  return true;
}

/* dtypes for provider p: one float dtype (values') for all but the positions; positions f32 / f64
 * on HOST (both the same), f32 on CUDA. */
static bool check_dtypes(tg_tape *t, tg_provider p, tgi_value *const *a) {
  if (!tgi_need_float_for(t, p, "values", a[IN_VALUES])) return false;
  for (int k = 0; k < N_IN; k++)
    if (a[k] && k != IN_PS && k != IN_PD && k != IN_VALUES &&
        !tgi_need_same_dtype(t, "values", a[IN_VALUES], ARG[k], a[k]))
      return false;
  if (!a[IN_PS]) return true;
  if (!tgi_need_same_dtype(t, "pos_src", a[IN_PS], "pos_dst", a[IN_PD])) return false;
  if (p == TG_PROVIDER_HOST ? a[IN_PS]->dtype == TG_F32 || a[IN_PS]->dtype == TG_F64 : a[IN_PS]->dtype == TG_F32)
    return true;
  return tgi_fail(t, TG_ERR_DTYPE, "argument 'pos_src' has dtype %s; provider %s takes %s positions",
                  tg_dtype_name((tg_dtype)a[IN_PS]->dtype), tg_provider_name(p),
                  p == TG_PROVIDER_HOST ? "f32 or f64" : "f32 (positions stay f32 in a bf16 model)");
}

/* Why CUDA_FUSED cannot run this call (NULL: it can). */
static const char *fused_unsupported(const ea_state *es, tg_dtype dt) {
  if (dt != TG_F32 && dt != TG_BF16) return "the fused kernels take f32 or bf16 (CUDA_COMPOSED takes f16)";
#ifdef TIGA_HAVE_CUDA
  tgc_edge_attn a = dev_attn(es, dt);
  return cuda_edge_attention_unsupported(&a);
#else
  (void)es;
  return "this build has no CUDA";
#endif
}

/* ------------------------------------------------------------ lowerings */

/* Rows [r0, r0 + n) of w [rows, hid] as a recorded [n, hid] value (w itself when it is all of it). */
static tg_id w1_rows(tg_tape *t, tg_id w1, int64_t rows, int64_t r0, int64_t n, int64_t hid) {
  if (r0 == 0 && n == rows) return w1;
  int64_t flat[1] = {rows * hid}, shape[2] = {n, hid};
  return tg_reshape(t, tg_slice(t, tg_reshape(t, w1, 1, flat), r0 * hid, n * hid), 2, shape);
}

/* CUDA_COMPOSED: recorded ops only; tg_graph_attend (forced to its composed form) takes the
 * dropout stream and writes lse_out. */
static tg_id composed(tg_tape *t, const ea_state *es, const tg_id *id, tg_dtype dt, tgi_value *const *a,
                      const tg_graph_attention_options *o) {
  const tg_relation *rel = es->g->rel;
  tg_provider prev = t->provider;
  t->provider = TG_PROVIDER_CUDA_COMPOSED;
  tg_id parts[4];
  int np = 0;
  if (a[IN_PS]) {
    tg_id d = tg_graph_displacement(t, rel, id[IN_PS], id[IN_PD]);
    parts[np++] = a[IN_PS]->dtype == dt ? d : tg_cast(t, d, dt);
  }
  if (a[IN_U]) parts[np++] = tg_graph_gather(t, rel, id[IN_U], TG_GRAPH_SOURCE);
  if (a[IN_V]) parts[np++] = tg_graph_gather(t, rel, id[IN_V], TG_GRAPH_DEST);
  if (a[IN_FE]) parts[np++] = id[IN_FE];
  tg_id x = np == 1 ? parts[0] : tg_concat(t, np, parts);
  tg_id z = tg_leaky_relu(t, tg_linear(t, x, id[IN_W1], a[IN_B1] ? id[IN_B1] : TG_ABSENT), es->g->slope);
  tg_id s = tg_linear(t, z, id[IN_W2], a[IN_B2] ? id[IN_B2] : TG_ABSENT);
  tg_id out = tg_graph_attend(t, rel, s, id[IN_VALUES], o);
  t->provider = prev;
  return out;
}

tg_id tg_edge_attention(tg_tape *t, const tg_relation *rel, tg_id pos_src, tg_id pos_dst, tg_id x_src, tg_id x_dst,
                        tg_id edge_feat, tg_id values, tg_id w1, tg_id b1, tg_id w2, tg_id b2,
                        const tg_graph_attention_options *opts_in) {
  static const char *const name = "tg_edge_attention";
  tg_graph_attention_options o;
  tg_graph_attention_options_init(&o);
  const char *why = opts_in ? tgi_opts_copy(&o, sizeof o, opts_in) : NULL;
  if (!why && o.lse_out) *o.lse_out = TG_NO_ID;
  if (!tgi_op_begin(t, name)) return TG_NO_ID;
  if (why)
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT, "argument 'opts' (tg_graph_attention_options): %s", why), TG_NO_ID;

  /* arguments in node-input order (x_src / x_dst sit where U / V go) */
  const tg_id id[N_IN] = {x_src, x_dst, pos_src, pos_dst, edge_feat, values, w1, b1, w2, b2};
  const bool optional[N_IN] = {true, true, true, true, true, false, false, true, false, true};
  tgi_value *a[N_IN] = {NULL};
  const int order[N_IN] = {IN_PS, IN_PD, IN_U, IN_V, IN_FE, IN_VALUES, IN_W1, IN_B1, IN_W2, IN_B2};
  for (int q = 0; q < N_IN; q++) {
    int k = order[q];
    bool ok = true;
    a[k] = optional[k] ? tgi_arg_opt(t, ARG[k], id[k], &ok) : tgi_arg(t, ARG[k], id[k]);
    if (!ok || (!optional[k] && !a[k])) return TG_NO_ID;
  }
  graph_state *st = tgi_graph_begin(t, rel);
  ea_state *es = st ? tgi_scratch_h(t, sizeof *es) : NULL;
  if (!es) return TG_NO_ID;
  memset(es, 0, sizeof *es);
  es->g = st;
  if (!check_shapes(t, es, a)) return TG_NO_ID;

  /* options */
  if (!(isfinite(o.negative_slope) && o.negative_slope >= 0))
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT, "option 'negative_slope' is %g; expected a finite number >= 0",
                    o.negative_slope),
           TG_NO_ID;
  if (!(o.dropout_keep > 0 && o.dropout_keep <= 1)) /* also rejects NaN */
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT,
                    "option 'dropout_keep' is %g; expected a keep probability in (0, 1], 1 for no dropout",
                    o.dropout_keep),
           TG_NO_ID;
  st->slope = o.negative_slope;

  /* provider and dtypes */
  tg_provider p = tgi_pick(t, TGI_HOST_AND_CUDA);
  if (!p || !check_dtypes(t, p, a)) return TG_NO_ID;
  const tg_dtype dt = (tg_dtype)a[IN_VALUES]->dtype;
  if (p == TG_PROVIDER_CUDA_FUSED) {
    const char *no = fused_unsupported(es, dt);
    if (no && t->provider == TG_PROVIDER_AUTO)
      p = TG_PROVIDER_CUDA_COMPOSED;
    else if (no)
      return tgi_fail(t, TG_ERR_UNSUPPORTED,
                      "provider CUDA_FUSED cannot run this call: %s (CUDA_COMPOSED takes any size)", no),
             TG_NO_ID;
  }
  char rs[160];
  if (p == TG_PROVIDER_CUDA_COMPOSED && st->E == 0)
    return tgi_fail(t, TG_ERR_SHAPE,
                    "argument 'rel' is a %s; provider CUDA_COMPOSED records per-edge tensors [E, ...], which cannot "
                    "be empty (HOST and CUDA_FUSED take a relation without edges)",
                    tgi_graph_rel_str(st, rs, sizeof rs)),
           TG_NO_ID;
  if (p == TG_PROVIDER_CUDA_COMPOSED) return composed(t, es, id, dt, a, &o);

  /* every check passed: take the dropout stream (in no-grad mode too; the dropout is off there) */
  if (o.dropout_keep < 1) {
    st->seed = t->seed, st->call = t->rng_calls++;
    if (t->grad_enabled) st->keep = o.dropout_keep;
  }
  /* f32 FUSED at hidden 16 with positions and both feature products: fold the geometry into U and
   * V. Measured (bench/records/run_s9h.sh): 3-12 % off the step at hidden 16 (the edge kernels
   * lose 124 of 778 us at 100k, the fold and unfold cost 81); at hidden 64 an earlier version cost
   * more than the warp-per-row kernels gained (run_s9f.sh), so hidden 16 only. */
  /* the lane kernels (cuda/edge_attention_ln.cu) take the small f32 hidden-16 case; TIGA_EA_LANES=0
   * turns them off, =n forces n lanes per segment (tests of every path, the bench) */
  const char *ln_env = getenv("TIGA_EA_LANES");
  es->lanes = 0;
  if (ln_env && *ln_env) {
    const long n = strtol(ln_env, NULL, 10);
    es->lanes = n <= 0 ? -1 : n == 1 || n == 2 || n == 4 || n == 8 || n == 16 || n == 32 ? (int)n : 0;
  }
  /* the slice kernels (cuda/edge_attention_sl.cu) take f32 at hidden 64; TIGA_EA_SLICE=0 turns them
   * off (tests of both paths, the bench) */
  const char *sl_env = getenv("TIGA_EA_SLICE");
  es->slice = sl_env && !strcmp(sl_env, "0") ? -1 : 0;
  /* the lane kernels' large-graph rule at (H 4, F 2) (by size from 2^18 rows): TIGA_EA_BIG=1 / 0
   * forces it on / off at any size (tests: the rule's kernels on test-sized graphs; the bench) */
  const char *big_env = getenv("TIGA_EA_BIG");
  es->big = big_env && *big_env ? (strcmp(big_env, "0") ? 1 : -1) : 0;
  /* recompute_products (tiga.h): the node takes x_src / x_dst in the U / V slots and makes the
   * products itself in each pass (ea_products); the fold and the products node (which keep them on
   * the tape) are not taken */
  es->rp = p == TG_PROVIDER_CUDA_FUSED && o.recompute_products && (a[IN_U] || a[IN_V]);
  const char *fe_env = getenv("TIGA_EA_FOLD");
  es->fold = p == TG_PROVIDER_CUDA_FUSED && dt == TG_F32 && es->dim > 0 && a[IN_U] && a[IN_V] && es->hid == 16 &&
             !es->rp && !(fe_env && !strcmp(fe_env, "0"));
  /* Self attention at hidden 16 (the fold's case with one feature value x of at most 8 columns and
   * one position value on both sides, no edge features): the per-node products come from one
   * edge_attention_products node (U = x ws + p wp, V = x wd - p wp in one pass over the nodes; its
   * backward one pass for x, p and w1) instead of two tg_matmul nodes, the fold and the unfold.
   * TIGA_EA_OWN=0 turns it off (tests of both paths, the bench). On it, when the lane kernels take
   * the call (H * F in 4 / 8 / 16, H <= 4), without dropout or lse_out, and the gathered rows reach
   * 16 MiB (the schedule's rule), the graph is renumbered in its locality order
   * (tgi_rel_dev_renum): U and V come out in the new order, the values are renumbered by a
   * rows_renumbered node, and the kernels run on the renumbered CSR, writing out and reading dout
   * at the old row indices. Measured (run_s14f.sh, step ms at 400k, H 1 / H 4): matmuls + fold
   * 1.007 / 1.630, products 0.958 / 1.577, products renumbered 0.883 / 1.387; at 100k (no
   * renumbering by the rule) 0.321 / 0.433 -> 0.283 / 0.394 (run_s14b.sh, run_s14f.sh). The
   * graph renumbered before the call instead (run_s14e.sh: the data in that order, nothing to map
   * at the boundary) reaches 0.78 - 0.81 / 1.28 - 1.32: the rest is the scattered row accesses at
   * the old indices (out, dout, x, positions and their gradients). TIGA_EA_RENUM=0 / 1: off / on
   * wherever it can run. The order renumbered in is the graded one (tgi_rel_dev_order_graded): at
   * 400k hid 16 H 4 1.14 -> 1.08 ms, H 1 unchanged (run_s18b.sh). */
  /* At hidden 64 the same products (hidden 64: no fold otherwise) when the slice kernels take the
   * call (f32, H in {1, 2, 4}, H * F in 8 / 16 / 32 / 64), so that they run without per-edge
   * geometry — with recompute_products too (es->rpo: the node makes the folded products in each
   * pass and maps their gradients back itself). Measured: bench/NOTES.md, session 21. */
  const char *own_env = getenv("TIGA_EA_OWN");
  const int64_t hf0 = st->H * st->F;
  const bool self = p == TG_PROVIDER_CUDA_FUSED && dt == TG_F32 && es->dim > 0 && a[IN_U] && a[IN_U] == a[IN_V] &&
                    a[IN_PS] == a[IN_PD] && a[IN_U] != a[IN_PS] && es->Fe == 0 && es->Fs <= 8 &&
                    !(own_env && !strcmp(own_env, "0")) && !(fe_env && !strcmp(fe_env, "0"));
  const bool sl64 = es->hid == 64 && es->slice >= 0 && (st->H == 1 || st->H == 2 || st->H == 4) &&
                    (hf0 == 8 || hf0 == 16 || hf0 == 32 || hf0 == 64);
  es->own = self && !es->rp && (es->fold || sl64);
  es->rpo = self && es->rp && (es->hid == 16 || sl64);
#ifdef TIGA_HAVE_CUDA
  if (es->own) {
    const char *rn_env = getenv("TIGA_EA_RENUM");
    const int64_t hf = st->H * st->F;
    const bool lanes =
        es->hid == 16 && es->lanes >= 0 && (st->H == 1 || st->H == 2 || st->H == 4) && (hf == 4 || hf == 8 || hf == 16);
    const bool big = st->Nk * (es->hid + hf) * (int64_t)sizeof(float) >= ((int64_t)16 << 20);
    const bool want = rn_env && *rn_env ? strcmp(rn_env, "0") != 0 : big;
    if (!(lanes && want && o.dropout_keep >= 1 && !o.lse_out && tgi_rel_dev_renum(st->rel, &es->perm, &es->rcsr)))
      es->perm = NULL;
    /* renumbered, with the values x's own rows (a reshape of x: the same device bytes): the
     * products node writes them in the new order too (its backward adds their gradient into x's),
     * instead of a rows_renumbered node's two passes over them. Measured (run_s19e.sh against
     * run_s19d.sh, 400k hid 16): H 1 0.741 / 0.737 -> 0.722 / 0.724 ms, H 4 1.069 / 1.065 ->
     * 1.044 / 1.044 (k_rows_permute's 9.9 + 17.9 us gone, k_products 33.5 -> 37.1, k_products_bwd
     * 83.3 -> 86.3). */
    const bool xr = es->perm && values_are_x(t, a[IN_VALUES], a[IN_U]);
    if (t->status) return TG_NO_ID;
    tgi_value *uv[3] = {NULL, NULL, NULL};
    if (!ep_record(t, es, a[IN_U], a[IN_PS], a[IN_W1], es->perm, xr ? a[IN_VALUES] : NULL, uv)) return TG_NO_ID;
    if (xr)
      a[IN_VALUES] = uv[2];
    else if (es->perm && !(a[IN_VALUES] = rows_record(t, a[IN_VALUES], es->perm)))
      return TG_NO_ID;
    a[IN_U] = uv[0], a[IN_V] = uv[1];
    a[IN_PS] = a[IN_PD] = a[IN_W1] = NULL; /* the kernels read neither: dim 0, no edge features */
    es->fold = false;
  } else {
#endif
    /* the per-node feature products, recorded under the tape's provider (rp: made by the node) */
    const int64_t din = es->dim + es->Fs + es->Fd + es->Fe;
    const bool rec = !es->rp;
    tg_id U = rec && a[IN_U] ? tg_matmul(t, x_src, w1_rows(t, w1, din, es->dim, es->Fs, es->hid)) : TG_ABSENT;
    tg_id V = rec && a[IN_V] ? tg_matmul(t, x_dst, w1_rows(t, w1, din, es->dim + es->Fs, es->Fd, es->hid)) : TG_ABSENT;
    if (t->status) return TG_NO_ID;
    t->cur_op = name; /* the sub-ops named themselves */
    if (rec && a[IN_U] && !(a[IN_U] = tgi_arg(t, "x_src . w1_src", U))) return TG_NO_ID;
    if (rec && a[IN_V] && !(a[IN_V] = tgi_arg(t, "x_dst . w1_dst", V))) return TG_NO_ID;
#ifdef TIGA_HAVE_CUDA
  }
#endif

  tgi_value *in[N_IN];
  uint32_t nin = 0;
  for (int k = 0; k < N_IN; k++) {
    es->slot[k] = (int8_t)(a[k] ? (int)nin : -1);
    if (a[k]) in[nin++] = a[k];
  }
  int64_t oshape[3] = {st->Nq, st->H, st->F}, lshape[2] = {st->H, st->Nq}, nl = st->H * st->Nq;
  tgi_value *out = tgi_result(t, dt, 3, oshape);
  tgi_value *lse = out && o.lse_out ? tgi_result(t, TG_F32, 2, lshape) : NULL;
  if (!out || (o.lse_out && !lse)) return TG_NO_ID;
  const bool grad = tgi_needs_grad(t, nin, in);
  void *saved = NULL;
  size_t saved_bytes = 0;
  ea_ptrs ptr;
  memset(&ptr, 0, sizeof ptr);
  if (p == TG_PROVIDER_HOST) {
    host_graph g;
    for (int k = 0; k < N_IN; k++)
      if (a[k] && !(ptr.in[k] = tgi_read_h(t, a[k]))) return TG_NO_ID;
    void *po = tgi_write_h(t, out);
    double *pl = tgi_scratch_h(t, (size_t)nl * sizeof *pl);
    float *plo = lse ? tgi_write_h(t, lse) : NULL;
    if (!po || !pl || (lse && !plo) || !tgi_graph_host(t, st, &g)) return TG_NO_ID;
    host_edge_attn ha = host_attn(es);
    host_edge_inputs hi = host_inputs(es, &ptr, dt);
    tg_status s = host_edge_attention_forward(dt, a[IN_PS] ? (tg_dtype)a[IN_PS]->dtype : dt, &g, &ha, &hi, po, pl);
    if (s) return tgi_fail(t, s, "out of host memory for edge attention scratch"), TG_NO_ID;
    for (int64_t k = 0; plo && k < nl; k++)
      plo[k] = (float)pl[k];
    saved = pl, saved_bytes = (size_t)nl * sizeof *pl;
  } else {
#ifdef TIGA_HAVE_CUDA
    tgc_csr cg;
    for (int k = 0; k < N_IN; k++)
      if (a[k] && !(ptr.in[k] = tgi_read_d(t, a[k]))) return TG_NO_ID;
    void *po = tgi_write_d(t, out);
    float *pl = lse ? tgi_write_d(t, lse) : tgi_scratch_d(t, (size_t)nl * sizeof *pl);
    if (es->perm) cg = es->rcsr;
    if (!po || !pl || (!es->perm && !tgi_rel_dev_csr(t, st->rel, false, &cg))) return TG_NO_ID;
    if (es->fold) { /* U and V are this call's own products, read by this node alone */
      float *Uw = tgi_write_d(t, a[IN_U]), *Vw = tgi_write_d(t, a[IN_V]);
      if (!Uw || !Vw) return TG_NO_ID;
      tg_status fs = cuda_edge_fold(TGI_STREAM(t), st->Nk, st->Nq, es->dim, (int)es->hid, Uw, Vw, ptr.in[IN_PS],
                                    ptr.in[IN_PD], (const float *)w1_block(es, ptr.in[IN_W1], sizeof(float), false));
      if (fs) return tgi_fail_cuda(t, fs, "edge attention geometry fold"), TG_NO_ID;
    }
    /* the relation's locality schedule (built once, cached with it; the node holds the relation,
     * so the backward may use it too): rows and sources handed to the kernels in an order where
     * the ones that run together gather overlapping node rows. Results do not depend on it (the
     * weight gradients' rounding follows it). Taken, as by the CSR attention (ops/attention.c),
     * when the rows a pass gathers (U and values for the rows, V and dout for the sources) reach
     * 16 MiB; below that they stay in L2 in any order. Measured (run_s11a.sh, step ms as built ->
     * scheduled): hid 16 at 100k 0.393 -> 0.402 (H 1), 0.550 -> 0.561 (H 4); at 400k 1.152 ->
     * 1.072, 1.813 -> 1.690; hid 64 at 100k 2.583 -> 2.426, 4.124 -> 3.960; at 400k 10.260 ->
     * 9.252, 16.477 -> 15.402. TIGA_EA_ORDER=0 turns it off, =1 forces it (tests, the bench).
     * The order is graded (tgi_rel_dev_order_graded: windows of 1024 sorted by degree) so that the
     * rows a warp and a block walk together have about one length: at 400k hid 64 H 1 3.96 -> 3.66
     * ms, H 4 5.57 -> 5.18 (run_s18b.sh). */
    const char *or_env = getenv("TIGA_EA_ORDER");
    const int64_t esz = (int64_t)dt_size(dt), hf = st->H * st->F;
    const int64_t kv = st->Nk * ((a[IN_U] ? es->hid : 0) + hf) * esz,
                  qo = st->Nq * ((a[IN_V] ? es->hid : 0) + hf) * esz;
    const bool big = kv >= ((int64_t)16 << 20) || qo >= ((int64_t)16 << 20);
    if (!es->perm && (or_env && *or_env ? strcmp(or_env, "0") != 0 : big))
      tgi_rel_dev_order_graded(st->rel, &es->ro, &es->so);
    ea_tmp m = {{NULL}};
    if (es->rp) { /* the products for this pass, freed after its kernel */
      const void *px[2] = {ptr.in[IN_U], ptr.in[IN_V]};
      if (!ea_products(t, es, dt, px, ptr.in[IN_PS], ptr.in[IN_W1], &m)) return ea_tmp_free(t, &m), TG_NO_ID;
      ptr.in[IN_U] = m.p[0], ptr.in[IN_V] = m.p[1];
    }
    tgc_edge_inputs di = dev_inputs(es, &ptr, dt);
    tgc_edge_attn da = dev_attn(es, dt);
    tg_status s = cuda_edge_attention_forward(TGI_STREAM(t), &cg, &da, &di, po, pl);
    ea_tmp_free(t, &m);
    if (s) return tgi_fail_cuda(t, s, "fused edge attention forward"), TG_NO_ID;
    saved = pl, saved_bytes = (size_t)nl * sizeof *pl;
#endif
  }
  tgi_value *outs[2] = {out, lse};
  tgi_node *n = tgi_record(t, &cap_ea[p != TG_PROVIDER_HOST], nin, in, lse ? 2 : 1, outs);
  if (n) {
    n->aux = es;
    tgi_rel_hold(n, st->rel);
    if (grad) {
      n->saved = saved;
      n->saved_bytes = saved_bytes;
      n->saved_on = p == TG_PROVIDER_HOST ? TGI_ON_HOST : TGI_ON_DEV;
    }
  }
  if (lse) lse->requires_grad = false; /* the gradient flows through out only */
  if (o.lse_out && t->status == TG_OK) *o.lse_out = tgi_id_of(t, lse);
  return tgi_done(t, out);
}
