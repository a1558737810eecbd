/* The relation handle, shared by every op that consumes a relation (attention, mha, the graph
 * ops). It includes nothing of any op: ops ask it for the form their kernels read.
 *
 * A relation is host data (sizes plus the copied index arrays, validated once when built) and,
 * on a CUDA runtime, a device form built on demand and cached here (CSR and its transpose, the
 * mask's u8 bytes and the fused kernels' bitmask + tile summary, cu_seqlens). Device memory comes
 * from the runtime's counted allocator and is freed (stream-ordered) with the relation.
 *
 * Lifetime: reference counted (tiga.h). The caller's handle is one reference, each node that
 * uses the relation holds one (tgi_rel_hold), and the relation holds one on its runtime, so its
 * device memory can always be freed on a live device. */
#ifndef TIGA_OPS_RELATION_H
#define TIGA_OPS_RELATION_H
#include <stdlib.h>

#include "../host/relation.h"
#include "../tape/internal.h"

#ifdef TIGA_HAVE_CUDA
#include "../cuda/relation.h"
#endif

struct tg_relation {
  int64_t refs;          /* atomic (tgi_atomic_*): a finalizer may drop a reference from another thread */
  tg_runtime *rt;        /* referenced */
  tg_relation_kind kind; /* as built; CONCAT is stored in the CSR fields */
  int64_t nq, nk;        /* per batch entry (VARLEN: packed totals) */
  int64_t allowed;       /* allowed pairs (per-batch masks: summed over entries) */
  /* MASK: (mask_batch ? mask_batch : 1) * nq * nk bytes, 0 / 1 */
  int64_t mask_batch;
  uint8_t *mask;
  /* 1 when, in every batch entry, the 64 x 64 cells of the mask (rows and columns from 0 in steps
   * of 64; the last ones may be cut short) inside each aligned 128 x 128 block are all empty or
   * all non-empty, else 0 (also when out of memory). A hint for the fused kernels: they then run
   * 128-query / 128-key tiles, which never compute an empty half; otherwise 64 x 64 tiles, so
   * that every empty cell is skipped. Results do not depend on it. */
  int mask_coarse;
  /* VARLEN */
  int n_seqs, causal;
  int32_t *cu_q, *cu_k;
  int32_t max_q, max_k;
  /* CSR, and CONCAT (block diagonal of its parts, materialized) */
  int64_t nnz;
  int64_t *row_ptr;
  int32_t *col_idx;
  int n_parts;
  /* A relation built on the device (tg_relation_radius on a CUDA runtime) holds its CSR there;
   * row_ptr / col_idx above are NULL until a host consumer needs them (tgi_rel_host_ready). */
  bool host_pending;
  /* The block diagonal of `batched_B` copies (composed CSR attention folds a batch into one graph),
   * built on demand and owned by this relation. */
  tg_relation *batched;
  int64_t batched_B;
  /* Destination-major CSR of batch entry 0 for the other kinds (graph ops on the host), built
   * on demand: hcsr_row_ptr [nq + 1], hcsr_col_idx [hcsr_nnz]. */
  int64_t *hcsr_row_ptr;
  int32_t *hcsr_col_idx;
  int64_t hcsr_nnz;
  /* Device form (CUDA runtimes), each part built the first time a node needs it. */
  struct {
    int64_t *row_ptr, *t_ptr, *t_edge;
    int32_t *col_idx, *t_row;
    uint8_t *mask;    /* u8 [mask_batch or 1, nq, nk] (MASK; CSR / CONCAT densified for COMPOSED) */
    void *prep;       /* the fused kernels' prepared mask (cuda_attention_fused_mask_prepare) */
    int32_t *cu;      /* VARLEN: cu_q then cu_k, n_seqs + 1 each */
    size_t bytes;     /* device bytes held by the parts above */
    uint64_t uploads; /* host -> device copies made so far (tests, explain) */
    /* CSR / CONCAT: the fused CSR attention kernels' locality schedules (cuda/attention_csr.h),
     * counted in bytes: the row schedule [nq] and, unless nq == nk (then it serves both sides),
     * the source schedule [nk] after it. Set by tg_relation_radius (the builder's Morton order)
     * or tgi_rel_dev_order (the graph's own). order_tried: decided (order NULL: identity). */
    int32_t *order;
    bool order_tried;
    /* Square CSR / CONCAT with an order: the order graded (tgi_rel_dev_order_graded), counted in
     * bytes. graded_tried: decided (graded NULL: the order as it is). */
    int32_t *graded;
    bool graded_tried;
    /* CSR / CONCAT, square, with an order: the graph renumbered in it (tgi_rel_dev_renum), counted
     * in bytes. rn_tried: decided (rn_row_ptr NULL: none). */
    int64_t *rn_row_ptr, *rn_t_ptr;
    int32_t *rn_col_idx, *rn_t_row;
    const int32_t *rn_perm; /* the order renumbered in (graded or order; not owned) */
    bool rn_tried;
  } dev;
};

/* References (tiga.h: lifetimes). Release frees the relation and its device form at zero. */
void tgi_rel_retain(tg_relation *r);
void tgi_rel_release(tg_relation *r);
/* Makes node n hold a reference to r (dropped with the node). */
void tgi_rel_hold(tgi_node *n, tg_relation *r);

/* A dense or causal relation on the heap (one reference, the caller's), for relations that ops
 * build internally (tg_mha). NULL when out of memory. */
tg_relation *tgi_rel_new_simple(tg_runtime *rt, tg_relation_kind kind, int64_t nq, int64_t nk);

/* Makes r's host arrays current (downloads a device-built CSR once). Every host consumer calls it
 * before tgi_rel_host_view; false + sticky error on t, or a status + message without a tape. */
bool tgi_rel_host_ready(tg_tape *t, tg_relation *r);
tg_status tgi_rel_host_sync(tg_relation *r, char *msg);
/* The block diagonal of B copies of r (B >= 2), cached on r; NULL + sticky error on t. */
tg_relation *tgi_rel_batched(tg_tape *t, tg_relation *r, int64_t B);
/* The host kernels' view of r (CONCAT appears as CSR); r's host arrays must be current. */
void tgi_rel_host_view(const tg_relation *r, host_rel *v);
/* Destination-major CSR of batch entry 0 (the relation's own arrays for CSR / CONCAT, else a
 * cached materialisation). false + sticky error on t when out of memory. */
bool tgi_rel_host_csr(tg_tape *t, tg_relation *r, const int64_t **row_ptr, const int32_t **col_idx, int64_t *nnz);

/* Static name: "dense", "causal", "mask", "varlen", "csr", "concat". */
const char *tgi_rel_kind_name(tg_relation_kind k);
/* "csr nnz=1234 dev=56KB" style summary for explain lines. */
void tgi_rel_describe(const tg_relation *r, char *buf, size_t cap);

#ifdef TIGA_HAVE_CUDA
/* Device forms for the tape's runtime (== r->rt), built and uploaded once, then cached. Each
 * returns false / NULL with a sticky error on t. */
bool tgi_rel_dev_csr(tg_tape *t, tg_relation *r, bool transpose, tgc_csr *out);
const uint8_t *tgi_rel_dev_mask(tg_tape *t, tg_relation *r);
const void *tgi_rel_dev_mask_prep(tg_tape *t, tg_relation *r);
const int32_t *tgi_rel_dev_cu(tg_tape *t, tg_relation *r);
/* The CSR attention schedules of a CSR / CONCAT relation (relation.h: dev.order), built once. A
 * performance hint only: when one cannot be built (host or device memory), *row and *src are NULL
 * (the identity) and nothing fails. */
void tgi_rel_dev_order(tg_relation *r, const int32_t **row, const int32_t **src);
/* The order graded for kernels that give each row (source) its own lane: every window of
 * TGI_REL_GRADE_WINDOW consecutive entries of the locality order sorted by the rows' degree, ties
 * in the order's order, so that the lanes of a warp and the warps of a block walk rows of about one
 * length (by rows' in-degree; one array for both sides, square relations only). Built once on the
 * host from the row pointers; *row and *src as tgi_rel_dev_order's when it cannot be built, or with
 * TIGA_EA_GRADE=0 (the environment, read when it is built; another value: the window). */
void tgi_rel_dev_order_graded(tg_relation *r, const int32_t **row, const int32_t **src);
/* The relation renumbered in its graded locality order (square CSR / CONCAT relations with an
 * order, tgi_rel_dev_order_graded): *perm [n] maps new node indices to old (that order) and *out is the
 * CSR of the renumbered graph with its transpose: new row a is old row perm[a], its sources mapped
 * to their new indices in the old row's edge order; the transpose lists each new source's entries
 * by new row ascending (t_edge NULL: no per-edge data follows it). Built on the host once, uploaded
 * and cached (about as many bytes as the CSR and its transpose). A performance path: false, with
 * nothing reported, when the relation has none or memory runs out. */
bool tgi_rel_dev_renum(tg_relation *r, const int32_t **perm, tgc_csr *out);
#endif
/* The grading of tgi_rel_dev_order_graded, on the host (tests/test_relation.c runs it alone): out
 * [n] is in [n] with each window of W consecutive entries (the last one shorter) sorted by the rows'
 * degree row_ptr[o + 1] - row_ptr[o], ascending, ties in in's order. key: W (or n, if fewer)
 * scratch words. W < 2 copies in. in's entries are rows of row_ptr; n and W below 2^32. */
static inline int tgi_order_key_cmp(const void *a, const void *b) {
  const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}
static inline void tgi_order_grade(int64_t n, int64_t W, const int64_t *row_ptr, const int32_t *in, int32_t *out,
                                   uint64_t *key) {
  if (W < 2) W = 1;
  for (int64_t w0 = 0; w0 < n; w0 += W) {
    const int64_t m = n - w0 < W ? n - w0 : W;
    for (int64_t k = 0; k < m; k++) {
      const int64_t o = in[w0 + k];
      key[k] = ((uint64_t)(row_ptr[o + 1] - row_ptr[o]) << 32) | (uint64_t)k; /* unique keys: stable */
    }
    if (m > 1) qsort(key, (size_t)m, sizeof *key, tgi_order_key_cmp);
    for (int64_t k = 0; k < m; k++)
      out[w0 + k] = in[w0 + (int64_t)(key[k] & 0xffffffffu)];
  }
}

/* Relations with fewer rows get no schedule: their gathers fit in L2 whatever the order. */
#define TGI_REL_ORDER_MIN_ROWS 4096
/* The graded order's window (rows). Step ms at 400k nodes / 6.6M edges, windows 0 / 256 / 1024 /
 * 4096 (run_s18b.sh): edge attention hid 16 H 4 1.136 / 1.113 / 1.077 / 1.086, hid 64 H 1 3.995 /
 * 3.661 / 3.667 / 3.777, hid 64 H 4 5.586 / 5.174 / 5.188 / 5.289, hid 16 H 1 0.746 / 0.746 /
 * 0.744 / 0.765. */
#define TGI_REL_GRADE_WINDOW 1024
#endif
