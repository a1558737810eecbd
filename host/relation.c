/* Host view of a relation: row iteration (host/relation.h). */
#include "relation.h"

#include <string.h>

/* Largest s with cu[s] <= i (cu strictly increasing from 0, i < cu[n]). */
static int seq_of(const int32_t *cu, int n, int64_t i) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (cu[mid] <= i)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* Keys 0 .. last (inclusive, clipped to [0, n)) as a contiguous run starting at first. */
static int64_t run_keys(int64_t first, int64_t count, int64_t last, int32_t *keys) {
  int64_t c = last + 1 < count ? last + 1 : count;
  for (int64_t j = 0; j < c; j++)
    keys[j] = (int32_t)(first + j);
  return c > 0 ? c : 0;
}

int64_t host_rel_row(const host_rel *r, int64_t b, int64_t i, int32_t *keys) {
  switch (r->kind) {
  case HOST_REL_DENSE: return run_keys(0, r->nk, r->nk - 1, keys);
  case HOST_REL_CAUSAL: return run_keys(0, r->nk, i + r->nk - r->nq, keys); /* j <= i + nk - nq */
  case HOST_REL_MASK: {
    const uint8_t *m = r->mask + ((r->mask_batch > 1 ? b : 0) * r->nq + i) * r->nk;
    int64_t c = 0;
    for (int64_t j = 0; j < r->nk; j++)
      if (m[j]) keys[c++] = (int32_t)j;
    return c;
  }
  case HOST_REL_VARLEN: {
    int s = seq_of(r->cu_q, r->n_seqs, i);
    int64_t lq = r->cu_q[s + 1] - r->cu_q[s], lk = r->cu_k[s + 1] - r->cu_k[s];
    int64_t last = r->causal ? (i - r->cu_q[s]) + lk - lq : lk - 1; /* bottom-right inside the sequence */
    return run_keys(r->cu_k[s], lk, last, keys);
  }
  case HOST_REL_CSR: {
    int64_t c = r->row_ptr[i + 1] - r->row_ptr[i];
    memcpy(keys, r->col_idx + r->row_ptr[i], (size_t)c * sizeof *keys);
    return c;
  }
  }
  return 0;
}

int64_t host_rel_row_count(const host_rel *r, int64_t b, int64_t i) {
  switch (r->kind) {
  case HOST_REL_DENSE: return r->nk;
  case HOST_REL_CAUSAL: {
    int64_t c = i + r->nk - r->nq + 1;
    return c < 0 ? 0 : c > r->nk ? r->nk : c;
  }
  case HOST_REL_MASK: {
    const uint8_t *m = r->mask + ((r->mask_batch > 1 ? b : 0) * r->nq + i) * r->nk;
    int64_t c = 0;
    for (int64_t j = 0; j < r->nk; j++)
      c += m[j] != 0;
    return c;
  }
  case HOST_REL_VARLEN: {
    int s = seq_of(r->cu_q, r->n_seqs, i);
    int64_t lq = r->cu_q[s + 1] - r->cu_q[s], lk = r->cu_k[s + 1] - r->cu_k[s];
    int64_t last = r->causal ? (i - r->cu_q[s]) + lk - lq : lk - 1;
    int64_t c = last + 1 < lk ? last + 1 : lk;
    return c > 0 ? c : 0;
  }
  case HOST_REL_CSR: return r->row_ptr[i + 1] - r->row_ptr[i];
  }
  return 0;
}

void host_rel_to_csr(const host_rel *r, int64_t b, int64_t *row_ptr, int32_t *col_idx) {
  row_ptr[0] = 0;
  for (int64_t i = 0; i < r->nq; i++) {
    int64_t c = col_idx ? host_rel_row(r, b, i, col_idx + row_ptr[i]) : host_rel_row_count(r, b, i);
    row_ptr[i + 1] = row_ptr[i] + c;
  }
}
