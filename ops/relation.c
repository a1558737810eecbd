/* Relations: which key j each query i may attend to (which edges j -> i a graph has). Built and
 * validated once (sizes, offsets, sortedness), then read by every node that uses them. Index
 * arrays are copied. Lifetimes and the cached device form: relation.h. */
#include "relation.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REL_MAX INT32_MAX /* sizes and indices must fit the int32 key indices the kernels use */

static tg_status rel_error(tg_runtime *rt, tg_status s, const char *fn, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static tg_status rel_error(tg_runtime *rt, tg_status s, const char *fn, const char *fmt, ...) {
  char tmp[TGI_MSG_CAP];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  tgi_set_last_error("%s: %s", fn, tmp);
  if (rt) tgi_rt_error(rt, s, "%s: %s", fn, tmp);
  return s;
}

/* Common checks of every builder; on success *out is set to NULL and a zeroed relation returned. */
static tg_status rel_begin(tg_runtime *rt, const char *fn, tg_relation **out) {
  if (!rt) return rel_error(NULL, TG_ERR_INVALID_ARGUMENT, fn, "argument 'rt' is NULL; expected a runtime");
  if (!out)
    return rel_error(rt, TG_ERR_INVALID_ARGUMENT, fn,
                     "argument 'out' is NULL; expected a tg_relation** to receive the handle");
  *out = NULL;
  return TG_OK;
}

static tg_status check_size(tg_runtime *rt, const char *fn, const char *arg, int64_t n) {
  if (n < 1 || n > REL_MAX)
    return rel_error(rt, TG_ERR_INVALID_ARGUMENT, fn, "argument '%s' is %lld; expected 1 <= %s <= %d", arg,
                     (long long)n, arg, REL_MAX);
  return TG_OK;
}

/* Checks a caller's (pointer, byte count) pair against the bytes a call needs. */
static tg_status check_bytes(tg_runtime *rt, const char *fn, const char *arg, const void *p, size_t bytes, size_t need,
                             const char *what) {
  if (!p && need)
    return rel_error(rt, TG_ERR_INVALID_ARGUMENT, fn, "argument '%s' is NULL; expected %s (%zu bytes)", arg, what,
                     need);
  if (bytes != need)
    return rel_error(rt, TG_ERR_INVALID_ARGUMENT, fn, "argument '%s_bytes' is %zu; %s take %zu bytes", arg, bytes, what,
                     need);
  return TG_OK;
}

/* Allowed pairs of a causal [nq, nk] relation (bottom-right aligned: j <= i + nk - nq). */
static int64_t causal_pairs(int64_t nq, int64_t nk);

static tg_relation *rel_new(tg_runtime *rt, tg_relation_kind kind, int64_t nq, int64_t nk) {
  tg_relation *r = tgi_calloc(1, sizeof *r);
  if (!r) return NULL;
  r->refs = 1;
  r->rt = rt;
  tgi_rt_retain(rt);
  r->kind = kind;
  r->nq = nq;
  r->nk = nk;
  if (kind == TG_REL_CAUSAL)
    r->allowed = causal_pairs(nq, nk);
  else
    r->allowed = nq * nk;
  return r;
}

tg_relation *tgi_rel_new_simple(tg_runtime *rt, tg_relation_kind kind, int64_t nq, int64_t nk) {
  return rel_new(rt, kind, nq, nk);
}

static void dev_free(tg_relation *r) {
  tgi_device *d = r->rt->dev;
  void *ps[] = {r->dev.row_ptr,  r->dev.t_ptr,      r->dev.t_edge,   r->dev.col_idx, r->dev.t_row,
                r->dev.mask,     r->dev.prep,       r->dev.cu,       r->dev.order,   r->dev.rn_row_ptr,
                r->dev.rn_t_ptr, r->dev.rn_col_idx, r->dev.rn_t_row, r->dev.graded};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
    if (ps[i]) tgi_device_free(d, ps[i]);
  memset(&r->dev, 0, sizeof r->dev);
}

void tgi_rel_retain(tg_relation *r) { tgi_atomic_add(&r->refs, 1); }

void tgi_rel_release(tg_relation *r) {
  if (tgi_atomic_add(&r->refs, -1) > 0) return;
  dev_free(r);
  if (r->batched) tgi_rel_release(r->batched);
  free(r->mask);
  free(r->cu_q);
  free(r->cu_k);
  free(r->row_ptr);
  free(r->col_idx);
  free(r->hcsr_row_ptr);
  free(r->hcsr_col_idx);
  tgi_rt_release(r->rt);
  free(r);
}

static void drop_rel(void *p) { tgi_rel_release(p); }

void tgi_rel_hold(tgi_node *n, tg_relation *r) {
  tgi_rel_retain(r);
  n->held = r;
  n->drop = drop_rel;
}

/* Row i allows min(max(i + off, 0), nk) keys, off = nk - nq + 1; their sum in closed form (sizes up
 * to 2^31: a loop over the rows took seconds): rows with i + off <= 0 add 0, rows with
 * 0 < i + off < nk add i + off, rows with i + off >= nk add nk. */
static int64_t causal_pairs(int64_t nq, int64_t nk) {
  int64_t off = nk - nq + 1, total = 0;
  int64_t a = 1 - off > 0 ? 1 - off : 0, b = nk - 1 - off < nq - 1 ? nk - 1 - off : nq - 1;
  if (b >= a) total += (b - a + 1) * (a + b + 2 * off) / 2;
  int64_t c = nk - off > 0 ? nk - off : 0;
  if (nq > c) total += nk * (nq - c);
  return total;
}

static tg_status simple(tg_runtime *rt, const char *fn, tg_relation_kind kind, int64_t nq, int64_t nk,
                        tg_relation **out) {
  tg_status s = rel_begin(rt, fn, out);
  if (!s) s = check_size(rt, fn, "nq", nq);
  if (!s) s = check_size(rt, fn, "nk", nk);
  if (s) return s;
  if (!(*out = rel_new(rt, kind, nq, nk))) return rel_error(rt, TG_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  return TG_OK;
}

tg_status tg_relation_dense(tg_runtime *rt, int64_t nq, int64_t nk, tg_relation **out) {
  return simple(rt, "tg_relation_dense", TG_REL_DENSE, nq, nk, out);
}

tg_status tg_relation_causal(tg_runtime *rt, int64_t nq, int64_t nk, tg_relation **out) {
  return simple(rt, "tg_relation_causal", TG_REL_CAUSAL, nq, nk, out);
}

/* r->mask_coarse of a u8 mask [nb, nq, nk] (relation.h). */
static int mask_coarse(const uint8_t *m, int64_t nb, int64_t nq, int64_t nk) {
  const int64_t cq = (nq + 63) / 64, ck = (nk + 63) / 64;
  uint8_t *cell = tgi_malloc((size_t)(cq * ck));
  if (!cell) return 0;
  int ok = 1;
  for (int64_t b = 0; b < nb && ok; b++) {
    memset(cell, 0, (size_t)(cq * ck));
    for (int64_t i = 0; i < nq; i++) {
      const uint8_t *row = m + (b * nq + i) * nk;
      uint8_t *crow = cell + (i >> 6) * ck;
      for (int64_t j = 0; j < nk; j++)
        crow[j >> 6] |= row[j] != 0;
    }
    for (int64_t a = 0; a < cq && ok; a++)
      for (int64_t c = 0; c < ck; c++)
        if (cell[a * ck + c] != cell[(a & ~(int64_t)1) * ck + (c & ~(int64_t)1)]) {
          ok = 0;
          break;
        }
  }
  free(cell);
  return ok;
}

tg_status tg_relation_mask(tg_runtime *rt, int64_t batch, int64_t nq, int64_t nk, const uint8_t *mask,
                           size_t mask_bytes, tg_relation **out) {
  const char *fn = "tg_relation_mask";
  tg_status s = rel_begin(rt, fn, out);
  if (!s) s = check_size(rt, fn, "nq", nq);
  if (!s) s = check_size(rt, fn, "nk", nk);
  if (s) return s;
  if (batch < 0 || batch > INT64_MAX / (nq * nk))
    return rel_error(rt, TG_ERR_INVALID_ARGUMENT, fn,
                     "argument 'batch' is %lld; expected 0 (one [nq, nk] mask shared by every batch entry) or a "
                     "batch count >= 1",
                     (long long)batch);
  int64_t n = (batch ? batch : 1) * nq * nk;
  if ((s = check_bytes(rt, fn, "mask", mask, mask_bytes, (size_t)n,
                       batch ? "[batch, nq, nk] mask bytes" : "[nq, nk] mask bytes")))
    return s;
  tg_relation *r = rel_new(rt, TG_REL_MASK, nq, nk);
  uint8_t *m = tgi_malloc((size_t)n);
  if (!r || !m) {
    if (r) tgi_rel_release(r);
    free(m);
    return rel_error(rt, TG_ERR_OUT_OF_MEMORY, fn, "out of host memory (%lld mask bytes)", (long long)n);
  }
  r->allowed = 0;
  for (int64_t i = 0; i < n; i++)
    r->allowed += (m[i] = mask[i] != 0);
  r->mask = m;
  r->mask_batch = batch;
  r->mask_coarse = mask_coarse(m, batch ? batch : 1, nq, nk);
  *out = r;
  return TG_OK;
}

/* cu must start at 0 and strictly increase; returns the total (cu[n]) or -1 with the error set. */
static int64_t check_offsets(tg_runtime *rt, const char *fn, const char *arg, const int32_t *cu, int n,
                             int32_t *max_len, tg_status *st) {
  if (cu[0] != 0) {
    *st = rel_error(rt, TG_ERR_INVALID_ARGUMENT, fn, "argument '%s' has %s[0] = %d; expected 0", arg, arg, cu[0]);
    return -1;
  }
  *max_len = 0;
  for (int s = 0; s < n; s++) {
    if (cu[s + 1] <= cu[s]) {
      *st = rel_error(rt, TG_ERR_INVALID_ARGUMENT, fn,
                      "argument '%s' has %s[%d] = %d after %s[%d] = %d; expected strictly increasing offsets "
                      "(sequence %d would have length %lld; every length must be >= 1)",
                      arg, arg, s + 1, cu[s + 1], arg, s, cu[s], s, (long long)cu[s + 1] - cu[s]);
      return -1;
    }
    if (cu[s + 1] - cu[s] > *max_len) *max_len = cu[s + 1] - cu[s];
  }
  return cu[n];
}

tg_status tg_relation_varlen(tg_runtime *rt, int n_seqs, const int32_t *cu_seqlens_q, size_t cu_seqlens_q_bytes,
                             const int32_t *cu_seqlens_k, size_t cu_seqlens_k_bytes, int causal, tg_relation **out) {
  const char *fn = "tg_relation_varlen";
  tg_status s = rel_begin(rt, fn, out);
  if (s) return s;
  if (n_seqs < 1 || n_seqs == INT32_MAX)
    return rel_error(rt, TG_ERR_INVALID_ARGUMENT, fn, "argument 'n_seqs' is %d; expected 1 <= n_seqs < %d", n_seqs,
                     INT32_MAX);
  size_t need = ((size_t)n_seqs + 1) * sizeof(int32_t);
  if ((s = check_bytes(rt, fn, "cu_seqlens_q", cu_seqlens_q, cu_seqlens_q_bytes, need, "n_seqs + 1 int32 offsets")))
    return s;
  if (cu_seqlens_k &&
      (s = check_bytes(rt, fn, "cu_seqlens_k", cu_seqlens_k, cu_seqlens_k_bytes, need, "n_seqs + 1 int32 offsets")))
    return s;
  if (!cu_seqlens_k && cu_seqlens_k_bytes)
    return rel_error(rt, TG_ERR_INVALID_ARGUMENT, fn,
                     "argument 'cu_seqlens_k' is NULL with cu_seqlens_k_bytes %zu; pass NULL with 0 (same as q)",
                     cu_seqlens_k_bytes);
  const int32_t *cu_k = cu_seqlens_k ? cu_seqlens_k : cu_seqlens_q;
  int32_t max_q, max_k;
  int64_t nq = check_offsets(rt, fn, "cu_seqlens_q", cu_seqlens_q, n_seqs, &max_q, &s);
  if (nq < 0) return s;
  int64_t nk = check_offsets(rt, fn, cu_seqlens_k ? "cu_seqlens_k" : "cu_seqlens_q", cu_k, n_seqs, &max_k, &s);
  if (nk < 0) return s;
  tg_relation *r = rel_new(rt, TG_REL_VARLEN, nq, nk);
  size_t bytes = (size_t)(n_seqs + 1) * sizeof(int32_t);
  int32_t *q = tgi_malloc(bytes), *k = tgi_malloc(bytes);
  if (!r || !q || !k) {
    if (r) tgi_rel_release(r);
    free(q), free(k);
    return rel_error(rt, TG_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  }
  memcpy(q, cu_seqlens_q, bytes);
  memcpy(k, cu_k, bytes);
  r->cu_q = q;
  r->cu_k = k;
  r->n_seqs = n_seqs;
  r->causal = causal != 0;
  r->max_q = max_q;
  r->max_k = max_k;
  r->allowed = 0;
  for (int i = 0; i < n_seqs; i++) {
    int64_t lq = q[i + 1] - q[i], lk = k[i + 1] - k[i];
    r->allowed += r->causal ? causal_pairs(lq, lk) : lq * lk;
  }
  *out = r;
  return TG_OK;
}

tg_status tg_relation_csr(tg_runtime *rt, int64_t nq, int64_t nk, const int64_t *row_ptr, size_t row_ptr_bytes,
                          const int32_t *col_idx, size_t col_idx_bytes, tg_relation **out) {
  const char *fn = "tg_relation_csr";
  tg_status s = rel_begin(rt, fn, out);
  if (!s) s = check_size(rt, fn, "nq", nq);
  if (!s) s = check_size(rt, fn, "nk", nk);
  if (s) return s;
  if ((s = check_bytes(rt, fn, "row_ptr", row_ptr, row_ptr_bytes, (size_t)(nq + 1) * sizeof(int64_t),
                       "nq + 1 int64 row offsets")))
    return s;
  if (row_ptr[0] != 0)
    return rel_error(rt, TG_ERR_INVALID_ARGUMENT, fn, "argument 'row_ptr' has row_ptr[0] = %lld; expected 0",
                     (long long)row_ptr[0]);
  for (int64_t i = 0; i < nq; i++)
    if (row_ptr[i + 1] < row_ptr[i])
      return rel_error(
          rt, TG_ERR_INVALID_ARGUMENT, fn,
          "argument 'row_ptr' has row_ptr[%lld] = %lld after row_ptr[%lld] = %lld; expected non-decreasing "
          "offsets",
          (long long)i + 1, (long long)row_ptr[i + 1], (long long)i, (long long)row_ptr[i]);
  int64_t nnz = row_ptr[nq];
  if (nnz > nq * nk)
    return rel_error(
        rt, TG_ERR_INVALID_ARGUMENT, fn,
        "argument 'row_ptr' ends at nnz = %lld; expected at most nq * nk = %lld (columns are unique per row)",
        (long long)nnz, (long long)(nq * nk));
  char what[64];
  snprintf(what, sizeof what, "nnz = %lld int32 column indices", (long long)nnz);
  if ((s = check_bytes(rt, fn, "col_idx", col_idx, col_idx_bytes, (size_t)nnz * sizeof(int32_t), what))) return s;
  for (int64_t i = 0; i < nq; i++)
    for (int64_t e = row_ptr[i]; e < row_ptr[i + 1]; e++) {
      if (col_idx[e] < 0 || col_idx[e] >= nk)
        return rel_error(rt, TG_ERR_INVALID_ARGUMENT, fn,
                         "argument 'col_idx' has col_idx[%lld] = %d (row %lld); expected a key index in [0, %lld)",
                         (long long)e, col_idx[e], (long long)i, (long long)nk);
      if (e > row_ptr[i] && col_idx[e] <= col_idx[e - 1])
        return rel_error(rt, TG_ERR_INVALID_ARGUMENT, fn,
                         "argument 'col_idx' has col_idx[%lld] = %d after col_idx[%lld] = %d in row %lld; expected "
                         "strictly increasing columns per row (sorted, no duplicates)",
                         (long long)e, col_idx[e], (long long)e - 1, col_idx[e - 1], (long long)i);
    }
  tg_relation *r = rel_new(rt, TG_REL_CSR, nq, nk);
  int64_t *rp = tgi_malloc((size_t)(nq + 1) * sizeof *rp);
  int32_t *ci = tgi_malloc((size_t)(nnz ? nnz : 1) * sizeof *ci);
  if (!r || !rp || !ci) {
    if (r) tgi_rel_release(r);
    free(rp), free(ci);
    return rel_error(rt, TG_ERR_OUT_OF_MEMORY, fn, "out of host memory (%lld column indices)", (long long)nnz);
  }
  memcpy(rp, row_ptr, (size_t)(nq + 1) * sizeof *rp);
  if (nnz) memcpy(ci, col_idx, (size_t)nnz * sizeof *ci);
  r->row_ptr = rp;
  r->col_idx = ci;
  r->nnz = r->allowed = nnz;
  *out = r;
  return TG_OK;
}

tg_status tg_relation_concat(tg_runtime *rt, int n, tg_relation *const *parts, tg_relation **out) {
  const char *fn = "tg_relation_concat";
  tg_status s = rel_begin(rt, fn, out);
  if (s) return s;
  if (n < 1) return rel_error(rt, TG_ERR_INVALID_ARGUMENT, fn, "argument 'n' is %d; expected >= 1 parts", n);
  if (!parts) return rel_error(rt, TG_ERR_INVALID_ARGUMENT, fn, "argument 'parts' is NULL; expected %d relations", n);
  int64_t nq = 0, nk = 0, nnz = 0;
  for (int p = 0; p < n; p++) {
    const tg_relation *r = parts[p];
    if (!r)
      return rel_error(rt, TG_ERR_INVALID_ARGUMENT, fn, "argument 'parts' has parts[%d] = NULL; expected a relation",
                       p);
    if (r->rt != rt)
      return rel_error(rt, TG_ERR_INVALID_ARGUMENT, fn,
                       "argument 'parts' has parts[%d] built on another runtime; expected relations of runtime 'rt'",
                       p);
    char msg[TGI_MSG_CAP];
    if ((s = tgi_rel_host_sync(parts[p], msg))) return rel_error(rt, s, fn, "parts[%d]: %s", p, msg);
    if (r->kind == TG_REL_MASK && r->mask_batch > 1)
      return rel_error(rt, TG_ERR_INVALID_ARGUMENT, fn,
                       "argument 'parts' has parts[%d], a per-batch mask (batch %lld); expected relations that are the "
                       "same for every batch entry (a shared mask has batch 0)",
                       p, (long long)r->mask_batch);
    /* checked as they add up: each part is within REL_MAX, so no partial sum can overflow */
    nq += r->nq, nk += r->nk;
    if (nq > REL_MAX || nk > REL_MAX)
      return rel_error(rt, TG_ERR_INVALID_ARGUMENT, fn,
                       "parts[0..%d] add up to nq = %lld, nk = %lld; expected at most %d each", p, (long long)nq,
                       (long long)nk, REL_MAX);
    if (r->allowed > (INT64_MAX / 8) - nnz)
      return rel_error(rt, TG_ERR_INVALID_ARGUMENT, fn,
                       "parts[0..%d] hold more than 2^60 allowed pairs; at most 2^60 can be concatenated", p);
    nnz += r->allowed;
  }
  tg_relation *r = rel_new(rt, TG_REL_CONCAT, nq, nk);
  int64_t *rp = tgi_malloc((size_t)(nq + 1) * sizeof *rp);
  int32_t *ci = tgi_malloc((size_t)(nnz ? nnz : 1) * sizeof *ci);
  if (!r || !rp || !ci) {
    if (r) tgi_rel_release(r);
    free(rp), free(ci);
    return rel_error(rt, TG_ERR_OUT_OF_MEMORY, fn, "out of host memory (%lld allowed pairs)", (long long)nnz);
  }
  /* part p's rows follow the earlier parts' rows, its key indices are shifted by their keys */
  int64_t row = 0, e = 0, koff = 0;
  rp[0] = 0;
  for (int p = 0; p < n; p++) {
    host_rel v;
    tgi_rel_host_view(parts[p], &v);
    for (int64_t i = 0; i < parts[p]->nq; i++, row++) {
      int64_t c = host_rel_row(&v, 0, i, ci + e);
      for (int64_t x = 0; x < c; x++)
        ci[e + x] += (int32_t)koff;
      e += c;
      rp[row + 1] = e;
    }
    koff += parts[p]->nk;
  }
  r->row_ptr = rp;
  r->col_idx = ci;
  r->nnz = r->allowed = nnz;
  r->n_parts = n;
  *out = r;
  return TG_OK;
}

void tg_relation_destroy(tg_relation *r) {
  if (r) tgi_rel_release(r);
}

tg_status tg_relation_info(const tg_relation *r, tg_relation_kind *kind, int64_t *nq, int64_t *nk,
                           int64_t *allowed_pairs) {
  if (!r) {
    tgi_set_last_error("tg_relation_info: argument 'rel' is NULL; expected a relation");
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (kind) *kind = r->kind;
  if (nq) *nq = r->nq;
  if (nk) *nk = r->nk;
  if (allowed_pairs) *allowed_pairs = r->allowed;
  return TG_OK;
}

tg_status tg_relation_read_csr(const tg_relation *r, int64_t batch, int64_t *row_ptr, size_t row_ptr_bytes,
                               int32_t *col_idx, size_t col_idx_bytes) {
  const char *fn = "tg_relation_read_csr";
  if (!r) return rel_error(NULL, TG_ERR_INVALID_ARGUMENT, fn, "argument 'rel' is NULL; expected a relation");
  int64_t nb = r->kind == TG_REL_MASK && r->mask_batch > 1 ? r->mask_batch : 1;
  if (batch < 0 || batch >= nb)
    return rel_error(r->rt, TG_ERR_INVALID_ARGUMENT, fn, "argument 'batch' is %lld; expected %s", (long long)batch,
                     nb > 1 ? "a batch entry of the per-batch mask" : "0 (the relation is the same for every entry)");
  tg_status s = check_bytes(r->rt, fn, "row_ptr", row_ptr, row_ptr_bytes, (size_t)(r->nq + 1) * sizeof(int64_t),
                            "nq + 1 int64 row offsets");
  if (s) return s;
  char msg[TGI_MSG_CAP];
  if ((s = tgi_rel_host_sync((tg_relation *)r, msg))) return rel_error(r->rt, s, fn, "%s", msg);
  host_rel v;
  tgi_rel_host_view(r, &v);
  host_rel_to_csr(&v, batch, row_ptr, NULL);
  if (!col_idx && col_idx_bytes == 0) return TG_OK;
  if ((s = check_bytes(r->rt, fn, "col_idx", col_idx, col_idx_bytes, (size_t)row_ptr[r->nq] * sizeof(int32_t),
                       "row_ptr[nq] int32 column indices")))
    return s;
  host_rel_to_csr(&v, batch, row_ptr, col_idx);
  return TG_OK;
}

tg_relation *tgi_rel_batched(tg_tape *t, tg_relation *r, int64_t B) {
  if (r->batched && r->batched_B == B) return r->batched;
  if (B > INT32_MAX / (r->nq > r->nk ? r->nq : r->nk))
    return tgi_fail(t, TG_ERR_SHAPE, "a batch of %lld copies of the relation exceeds %d rows", (long long)B, INT32_MAX),
           NULL;
  tg_relation **parts = tgi_malloc((size_t)B * sizeof *parts), *out = NULL;
  if (!parts) return tgi_fail(t, TG_ERR_OUT_OF_MEMORY, "out of host memory"), NULL;
  for (int64_t b = 0; b < B; b++)
    parts[b] = r;
  tg_status s = tg_relation_concat(r->rt, (int)B, parts, &out);
  free(parts);
  if (s) return tgi_fail(t, s, "batching the relation: %s", tg_last_error()), NULL;
  if (r->batched) tgi_rel_release(r->batched);
  r->batched = out, r->batched_B = B;
  return out;
}
