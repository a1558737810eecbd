/* The forms kernels read, built on demand from a relation and cached on it: the host CSR of a
 * non-CSR kind (graph ops on the host) and, on a CUDA runtime, the device form (relation.h). */
#include "relation.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TIGA_HAVE_CUDA
#include "../cuda/attention_csr.h"
#include "../cuda/attention_fused.h"
#endif

void tgi_rel_host_view(const tg_relation *r, host_rel *v) {
  static const host_rel_kind map[] = {HOST_REL_DENSE,  HOST_REL_CAUSAL, HOST_REL_MASK,
                                      HOST_REL_VARLEN, HOST_REL_CSR,    HOST_REL_CSR};
  memset(v, 0, sizeof *v);
  v->kind = map[r->kind];
  v->nq = r->nq;
  v->nk = r->nk;
  v->mask = r->mask;
  v->mask_batch = r->mask_batch;
  v->cu_q = r->cu_q;
  v->cu_k = r->cu_k;
  v->n_seqs = r->n_seqs;
  v->causal = r->causal;
  v->row_ptr = r->row_ptr;
  v->col_idx = r->col_idx;
}

const char *tgi_rel_kind_name(tg_relation_kind k) {
  static const char *names[] = {"dense", "causal", "mask", "varlen", "csr", "concat"};
  return (unsigned)k < 6 ? names[k] : "unknown";
}

static int64_t rel_edges(const tg_relation *r) {
  if (r->kind == TG_REL_CSR || r->kind == TG_REL_CONCAT) return r->nnz;
  if (r->kind == TG_REL_MASK && r->mask_batch > 1) return -1; /* differs per batch entry */
  return r->allowed;
}

void tgi_rel_describe(const tg_relation *r, char *buf, size_t cap) {
  char kind[64];
  if (r->kind == TG_REL_MASK)
    snprintf(kind, sizeof kind, "mask(batch %lld)", (long long)r->mask_batch);
  else if (r->kind == TG_REL_VARLEN)
    snprintf(kind, sizeof kind, "varlen(%d seqs%s)", r->n_seqs, r->causal ? ", causal" : "");
  else if (r->kind == TG_REL_CONCAT)
    snprintf(kind, sizeof kind, "concat(%d parts)", r->n_parts);
  else
    snprintf(kind, sizeof kind, "%s", tgi_rel_kind_name(r->kind));
  snprintf(buf, cap, "rel=%s nnz=%lld rel_dev=%zuB", kind, (long long)r->allowed, r->dev.bytes);
}

tg_status tgi_rel_host_sync(tg_relation *r, char *msg) {
  if (!r->host_pending) return TG_OK;
#ifdef TIGA_HAVE_CUDA
  int64_t *rp = tgi_malloc((size_t)(r->nq + 1) * sizeof *rp);
  int32_t *ci = tgi_malloc((size_t)(r->nnz ? r->nnz : 1) * sizeof *ci);
  tg_status s = rp && ci ? TG_OK : TG_ERR_OUT_OF_MEMORY;
  if (s) snprintf(msg, TGI_MSG_CAP, "out of host memory for the relation's CSR (%lld edges)", (long long)r->nnz);
  if (!s) s = tgi_device_d2h(r->rt->dev, rp, r->dev.row_ptr, (size_t)(r->nq + 1) * sizeof *rp, msg);
  if (!s && r->nnz) s = tgi_device_d2h(r->rt->dev, ci, r->dev.col_idx, (size_t)r->nnz * sizeof *ci, msg);
  if (s) {
    free(rp), free(ci);
    return s;
  }
  r->row_ptr = rp, r->col_idx = ci, r->host_pending = false;
  return TG_OK;
#else
  snprintf(msg, TGI_MSG_CAP, "a device-built relation in a host-only build");
  return TG_ERR_INTERNAL;
#endif
}

bool tgi_rel_host_ready(tg_tape *t, tg_relation *r) {
  char msg[TGI_MSG_CAP];
  tg_status s = tgi_rel_host_sync(r, msg);
  return s ? tgi_fail(t, s, "reading the relation back to the host: %s", msg) : true;
}

bool tgi_rel_host_csr(tg_tape *t, tg_relation *r, const int64_t **row_ptr, const int32_t **col_idx, int64_t *nnz) {
  if (!tgi_rel_host_ready(t, r)) return false;
  if (r->kind == TG_REL_CSR || r->kind == TG_REL_CONCAT) {
    *row_ptr = r->row_ptr, *col_idx = r->col_idx, *nnz = r->nnz;
    return true;
  }
  if (!r->hcsr_row_ptr) {
    host_rel v;
    tgi_rel_host_view(r, &v);
    int64_t *rp = tgi_malloc((size_t)(r->nq + 1) * sizeof *rp);
    if (!rp) return tgi_fail(t, TG_ERR_OUT_OF_MEMORY, "out of host memory for the relation's CSR form");
    host_rel_to_csr(&v, 0, rp, NULL);
    int32_t *ci = tgi_malloc((size_t)(rp[r->nq] ? rp[r->nq] : 1) * sizeof *ci);
    if (!ci) {
      free(rp);
      return tgi_fail(t, TG_ERR_OUT_OF_MEMORY, "out of host memory for the relation's CSR form (%lld edges)",
                      (long long)rel_edges(r));
    }
    host_rel_to_csr(&v, 0, rp, ci);
    r->hcsr_row_ptr = rp, r->hcsr_col_idx = ci, r->hcsr_nnz = rp[r->nq];
  }
  *row_ptr = r->hcsr_row_ptr, *col_idx = r->hcsr_col_idx, *nnz = r->hcsr_nnz;
  return true;
}

#ifdef TIGA_HAVE_CUDA
/* Device memory that belongs to the relation (counted by the runtime, freed with the relation). */
static void *dev_alloc(tg_tape *t, tg_relation *r, size_t bytes) {
  void *d = NULL;
  char msg[TGI_MSG_CAP];
  tg_status s = tgi_device_alloc(r->rt->dev, bytes ? bytes : 1, &d, msg);
  if (s) return tgi_fail(t, s, "the relation's device form: %s", msg), NULL;
  r->dev.bytes += bytes;
  return d;
}

/* Uploads relation-owned host bytes into new relation device memory. The host arrays live as long
 * as the relation, and cudaMemcpyAsync has staged pageable sources when it returns, so nothing
 * waits for the copy. */
static void *dev_upload(tg_tape *t, tg_relation *r, const void *src, size_t bytes) {
  void *d = dev_alloc(t, r, bytes);
  if (!d || !bytes) return d;
  char msg[TGI_MSG_CAP];
  tg_status s = tgi_device_h2d_async(r->rt->dev, d, src, bytes, msg);
  if (s) {
    tgi_device_free(r->rt->dev, d);
    r->dev.bytes -= bytes;
    return tgi_fail(t, s, "uploading the relation's device form: %s", msg), NULL;
  }
  r->dev.uploads++;
  t->pending_h2d++;
  return d;
}

bool tgi_rel_dev_csr(tg_tape *t, tg_relation *r, bool transpose, tgc_csr *out) {
  const int64_t *rp = NULL;
  const int32_t *ci = NULL;
  int64_t nnz;
  if (!r->dev.row_ptr) {
    if (!tgi_rel_host_csr(t, r, &rp, &ci, &nnz)) return false;
    int64_t *drp = dev_upload(t, r, rp, (size_t)(r->nq + 1) * sizeof *rp);
    int32_t *dci = drp ? dev_upload(t, r, ci, (size_t)nnz * sizeof *ci) : NULL;
    if (!dci) {
      if (drp) tgi_device_free(r->rt->dev, drp), r->dev.bytes -= (size_t)(r->nq + 1) * sizeof *rp;
      return false;
    }
    r->dev.row_ptr = drp, r->dev.col_idx = dci;
  }
  nnz = rel_edges(r);
  if (transpose && !r->dev.t_ptr) {
    size_t bp = (size_t)(r->nk + 1) * sizeof(int64_t), br = (size_t)nnz * sizeof(int32_t),
           be = (size_t)nnz * sizeof(int64_t);
    size_t wb = cuda_relation_transpose_workspace(r->nq, r->nk, nnz);
    int64_t *tp = dev_alloc(t, r, bp);
    int32_t *tr = tp ? dev_alloc(t, r, br) : NULL;
    int64_t *te = tr ? dev_alloc(t, r, be) : NULL;
    void *ws = te && wb ? tgi_scratch_d(t, wb) : NULL;
    tg_status s = TG_OK;
    if (te && (ws || !wb))
      s = cuda_relation_transpose(TGI_STREAM(t), r->nq, r->nk, nnz, r->dev.row_ptr, r->dev.col_idx, tp, tr, te, ws, wb);
    if (!te || (wb && !ws) || s) {
      if (s) tgi_fail_cuda(t, s, "transposing the relation");
      void *ps[] = {tp, tr, te};
      for (int i = 0; i < 3; i++)
        if (ps[i]) tgi_device_free(r->rt->dev, ps[i]);
      r->dev.bytes -= (tp ? bp : 0) + (tr ? br : 0) + (te ? be : 0);
      return false;
    }
    r->dev.t_ptr = tp, r->dev.t_row = tr, r->dev.t_edge = te;
  }
  *out = (tgc_csr){.nq = r->nq,
                   .nk = r->nk,
                   .nnz = nnz,
                   .row_ptr = r->dev.row_ptr,
                   .col_idx = r->dev.col_idx,
                   .t_ptr = r->dev.t_ptr,
                   .t_row = r->dev.t_row,
                   .t_edge = r->dev.t_edge};
  return true;
}

static int64_t mask_entries(const tg_relation *r) {
  return r->kind == TG_REL_MASK && r->mask_batch > 1 ? r->mask_batch : 1;
}

/* u8 mask bytes on the host: the relation's own (MASK) or a dense copy of a CSR (*owned). */
static const uint8_t *host_mask(tg_tape *t, tg_relation *r, bool *owned) {
  *owned = false;
  if (r->kind == TG_REL_MASK) return r->mask;
  const int64_t *rp = NULL;
  const int32_t *ci = NULL;
  int64_t nnz;
  if (!tgi_rel_host_csr(t, r, &rp, &ci, &nnz)) return NULL;
  uint8_t *m = tgi_calloc((size_t)(r->nq * r->nk), 1);
  if (!m) return tgi_fail(t, TG_ERR_OUT_OF_MEMORY, "out of host memory densifying the relation"), NULL;
  for (int64_t i = 0; i < r->nq; i++)
    for (int64_t e = rp[i]; e < rp[i + 1]; e++)
      m[i * r->nk + ci[e]] = 1;
  *owned = true;
  return m;
}

const uint8_t *tgi_rel_dev_mask(tg_tape *t, tg_relation *r) {
  if (r->dev.mask) return r->dev.mask;
  bool owned;
  const uint8_t *h = host_mask(t, r, &owned);
  if (!h) return NULL;
  r->dev.mask = dev_upload(t, r, h, (size_t)(mask_entries(r) * r->nq * r->nk));
  if (owned) free((void *)h);
  return r->dev.mask;
}

const void *tgi_rel_dev_mask_prep(tg_tape *t, tg_relation *r) {
  if (r->dev.prep) return r->dev.prep;
  int64_t mb = mask_entries(r);
  /* the u8 bytes are only an input here: staged in step scratch unless COMPOSED cached them */
  const uint8_t *m = r->dev.mask;
  if (!m) {
    bool owned;
    const uint8_t *h = host_mask(t, r, &owned);
    if (!h) return NULL;
    size_t bytes = (size_t)(mb * r->nq * r->nk);
    uint8_t *d = tgi_scratch_d(t, bytes);
    char msg[TGI_MSG_CAP];
    tg_status s = d ? tgi_device_h2d(r->rt->dev, d, h, bytes, msg) : TG_OK;
    if (owned) free((void *)h);
    if (!d) return NULL;
    if (s) return tgi_fail(t, s, "uploading the relation's mask: %s", msg), NULL;
    r->dev.uploads++;
    t->pending_h2d++;
    m = d;
  }
  void *prep = dev_alloc(t, r, cuda_attention_fused_mask_bytes(mb, r->nq, r->nk));
  if (!prep) return NULL;
  tg_status s = cuda_attention_fused_mask_prepare(TGI_STREAM(t), m, mb, r->nq, r->nk, prep);
  if (s) {
    tgi_device_free(r->rt->dev, prep);
    r->dev.bytes -= cuda_attention_fused_mask_bytes(mb, r->nq, r->nk);
    return tgi_fail_cuda(t, s, "fused mask preparation"), NULL;
  }
  r->dev.prep = prep;
  return prep;
}

const int32_t *tgi_rel_dev_cu(tg_tape *t, tg_relation *r) {
  if (r->dev.cu) return r->dev.cu;
  size_t n = (size_t)r->n_seqs + 1;
  int32_t *h = tgi_malloc(2 * n * sizeof *h);
  if (!h) return tgi_fail(t, TG_ERR_OUT_OF_MEMORY, "out of host memory"), NULL;
  memcpy(h, r->cu_q, n * sizeof *h);
  memcpy(h + n, r->cu_k, n * sizeof *h);
  r->dev.cu = dev_upload(t, r, h, 2 * n * sizeof *h);
  free(h);
  return r->dev.cu;
}

/* Segments of the graph's locality order are bisected down to this many nodes. In an LRU model
 * of the kernels' gathers (2k to 10k rows cached, radius graphs of 100k and 400k nodes in random
 * order), leaves of 64, 512 and 4096 missed alike (7.7-8.8 % of gathers; plain BFS 9-21 %, the
 * points' Morton order 6.7-9 %, no order 90-99 %), and larger leaves take fewer passes. */
#define ORDER_LEAF 4096

/* The graph's locality order (cuda_attention_csr_order_host) from the host CSR, uploaded once.
 * Nothing is reported on failure: the kernels run in the identity order, with the same results. */
static int32_t *order_build(tg_relation *r) {
  char msg[TGI_MSG_CAP];
  if (tgi_rel_host_sync(r, msg)) return NULL;
  const size_t n = (size_t)(r->nq + (r->nq == r->nk ? 0 : r->nk)), bytes = n * sizeof(int32_t);
  int32_t *h = tgi_malloc(bytes);
  void *d = NULL;
  if (h && cuda_attention_csr_order_host(r->nq, r->nk, r->row_ptr, r->col_idx, ORDER_LEAF, h) == TG_OK &&
      tgi_device_alloc(r->rt->dev, bytes, &d, msg) == TG_OK) {
    if (tgi_device_h2d(r->rt->dev, d, h, bytes, msg) == TG_OK) {
      r->dev.bytes += bytes;
      r->dev.uploads++;
    } else {
      tgi_device_free(r->rt->dev, d);
      d = NULL;
    }
  }
  free(h);
  return d;
}

void tgi_rel_dev_order(tg_relation *r, const int32_t **row, const int32_t **src) {
  if (!r->dev.order_tried) {
    r->dev.order_tried = true;
    if ((r->kind == TG_REL_CSR || r->kind == TG_REL_CONCAT) && r->nq >= TGI_REL_ORDER_MIN_ROWS)
      r->dev.order = order_build(r);
  }
  *row = r->dev.order;
  *src = r->dev.order && r->nq != r->nk ? r->dev.order + r->nq : r->dev.order;
}

/* The graded order (tgi_rel_dev_order_graded) of order [n] in windows of W, uploaded; NULL when
 * host or device memory runs out. The row pointers from the host CSR, or read back from the device
 * (a relation built there: 8 (n + 1) bytes, not the whole CSR). */
static int32_t *graded_build(tg_relation *r, const int32_t *order, int64_t W) {
  char msg[TGI_MSG_CAP];
  const int64_t n = r->nq;
  const size_t bn = (size_t)n * sizeof(int32_t), bp = (size_t)(n + 1) * sizeof(int64_t);
  int32_t *h = tgi_malloc(bn), *h2 = tgi_malloc(bn);
  uint64_t *key = tgi_malloc((size_t)(W < n ? W : n) * sizeof *key);
  int64_t *rp = r->host_pending ? tgi_malloc(bp) : r->row_ptr;
  void *d = NULL;
  bool ok = h && h2 && key && rp && tgi_device_d2h(r->rt->dev, h, order, bn, msg) == TG_OK &&
            (!r->host_pending || tgi_device_d2h(r->rt->dev, rp, r->dev.row_ptr, bp, msg) == TG_OK);
  if (ok) tgi_order_grade(n, W, rp, h, h2, key);
  ok = ok && tgi_device_alloc(r->rt->dev, bn, &d, msg) == TG_OK;
  if (ok && tgi_device_h2d(r->rt->dev, d, h2, bn, msg) != TG_OK) tgi_device_free(r->rt->dev, d), ok = false;
  if (ok) r->dev.bytes += bn, r->dev.uploads++;
  if (rp != r->row_ptr) free(rp);
  free(h), free(h2), free(key);
  return ok ? d : NULL;
}

void tgi_rel_dev_order_graded(tg_relation *r, const int32_t **row, const int32_t **src) {
  tgi_rel_dev_order(r, row, src);
  if (!r->dev.graded_tried) {
    r->dev.graded_tried = true;
    const char *env = getenv("TIGA_EA_GRADE");
    const int64_t W = env && *env ? atoll(env) : TGI_REL_GRADE_WINDOW;
    if (*row && r->nq == r->nk && W > 1 && (r->host_pending ? r->dev.row_ptr != NULL : r->row_ptr != NULL))
      r->dev.graded = graded_build(r, *row, W);
  }
  if (r->dev.graded) *row = *src = r->dev.graded;
}

/* Host arrays of the renumbered graph (tgi_rel_dev_renum) from the CSR (rp, ci) and perm (new ->
 * old) of n nodes: rp2 / ci2 its CSR (each row's edges in the old row's order), tp2 / tr2 its
 * transpose. inv and cnt are n-element scratch. (Sources sorted ascending within the new rows, or
 * the order bisected down to 32-node pieces instead of the schedule's 4096, measured no different:
 * run_s14c.sh, run_s14d.sh.) */
static void renum_host(int64_t n, const int64_t *rp, const int32_t *ci, const int32_t *perm, int32_t *inv, int64_t *cnt,
                       int64_t *rp2, int32_t *ci2, int64_t *tp2, int32_t *tr2) {
  for (int64_t a = 0; a < n; a++)
    inv[perm[a]] = (int32_t)a;
  rp2[0] = 0;
  for (int64_t a = 0; a < n; a++) {
    const int64_t o = perm[a], d = rp[o + 1] - rp[o];
    for (int64_t k = 0; k < d; k++)
      ci2[rp2[a] + k] = inv[ci[rp[o] + k]];
    rp2[a + 1] = rp2[a] + d;
  }
  memset(cnt, 0, (size_t)n * sizeof *cnt);
  for (int64_t e = 0; e < rp2[n]; e++)
    cnt[ci2[e]]++;
  tp2[0] = 0;
  for (int64_t b = 0; b < n; b++)
    tp2[b + 1] = tp2[b] + cnt[b], cnt[b] = tp2[b];
  for (int64_t a = 0; a < n; a++) /* rows ascending: each source's entries by new row ascending */
    for (int64_t e = rp2[a]; e < rp2[a + 1]; e++)
      tr2[cnt[ci2[e]]++] = (int32_t)a;
}

/* The renumbering's order is the relation's graded one (tgi_rel_dev_order_graded, from the radius
 * builder's Morton order, else the graph's own). */
static bool renum_build(tg_relation *r) {
  char msg[TGI_MSG_CAP];
  const int64_t n = r->nq, nnz = r->nnz;
  const int32_t *ro, *so;
  tgi_rel_dev_order_graded(r, &ro, &so);
  if (!ro || tgi_rel_host_sync(r, msg)) return false;
  const size_t bp = (size_t)(n + 1) * sizeof(int64_t), bi = (size_t)nnz * sizeof(int32_t),
               bn = (size_t)n * sizeof(int32_t);
  int32_t *perm = tgi_malloc(bn), *inv = tgi_malloc(bn);
  int64_t *cnt = tgi_malloc((size_t)n * sizeof *cnt), *rp2 = tgi_malloc(bp), *tp2 = tgi_malloc(bp);
  int32_t *ci2 = tgi_malloc(bi ? bi : 1), *tr2 = tgi_malloc(bi ? bi : 1);
  void *d[4] = {NULL, NULL, NULL, NULL};
  const size_t sz[4] = {bp, bp, bi, bi};
  const void *h[4] = {rp2, tp2, ci2, tr2};
  bool ok = perm && inv && cnt && rp2 && tp2 && ci2 && tr2 && tgi_device_d2h(r->rt->dev, perm, ro, bn, msg) == TG_OK;
  if (ok) renum_host(n, r->row_ptr, r->col_idx, perm, inv, cnt, rp2, ci2, tp2, tr2);
  for (int k = 0; ok && k < 4; k++)
    ok = !sz[k] || (tgi_device_alloc(r->rt->dev, sz[k], &d[k], msg) == TG_OK &&
                    tgi_device_h2d(r->rt->dev, d[k], h[k], sz[k], msg) == TG_OK);
  free(perm), free(inv), free(cnt), free(rp2), free(tp2), free(ci2), free(tr2);
  if (!ok) {
    for (int k = 0; k < 4; k++)
      if (d[k]) tgi_device_free(r->rt->dev, d[k]);
    return false;
  }
  r->dev.rn_row_ptr = d[0], r->dev.rn_t_ptr = d[1], r->dev.rn_col_idx = d[2], r->dev.rn_t_row = d[3];
  r->dev.rn_perm = ro;
  r->dev.bytes += sz[0] + sz[1] + sz[2] + sz[3];
  r->dev.uploads += 4;
  return true;
}

bool tgi_rel_dev_renum(tg_relation *r, const int32_t **perm, tgc_csr *out) {
  if (!r->dev.rn_tried) {
    r->dev.rn_tried = true;
    if ((r->kind == TG_REL_CSR || r->kind == TG_REL_CONCAT) && r->nq == r->nk && r->nq >= TGI_REL_ORDER_MIN_ROWS)
      (void)renum_build(r); /* none: the caller's usual path */
  }
  if (!r->dev.rn_row_ptr) return false;
  *perm = r->dev.rn_perm;
  *out = (tgc_csr){.nq = r->nq,
                   .nk = r->nk,
                   .nnz = r->nnz,
                   .row_ptr = r->dev.rn_row_ptr,
                   .col_idx = r->dev.rn_col_idx,
                   .t_ptr = r->dev.rn_t_ptr,
                   .t_row = r->dev.rn_t_row,
                   .t_edge = NULL};
  return true;
}
#endif
