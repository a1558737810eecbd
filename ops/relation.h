/* The relation handle, shared by the ops that consume relations (attention, mha).
 *
 * A relation is plain host data: sizes plus the copied index arrays, validated once when built.
 * It holds no device memory. CUDA providers stage what they need (mask bytes, cu_seqlens, the
 * fused kernels' prepared mask) into the tape's device arena for the step, so a relation never
 * depends on its runtime being alive and tg_relation_destroy is a plain free. `rt` is recorded
 * only to refuse use on a tape of another runtime. */
#ifndef TIGA_OPS_RELATION_H
#define TIGA_OPS_RELATION_H
#include "../host/attention.h"
#include "../tape/internal.h"

struct tg_relation {
  tg_runtime *rt;
  tg_relation_kind kind; /* as built; CONCAT is stored in the CSR fields */
  int64_t nq, nk;        /* per attention batch entry (VARLEN: packed totals) */
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
};

/* A dense or causal relation filled in place (no allocation; nothing to destroy). Used for the
 * relations that ops build internally (tg_mha). */
void tgi_rel_init_simple(tg_relation *r, tg_runtime *rt, tg_relation_kind kind, int64_t nq, int64_t nk);

/* The host kernels' view of r (CONCAT appears as CSR). */
void tgi_rel_host_view(const tg_relation *r, host_attn_rel *v);

/* Static name: "dense", "causal", "mask", "varlen", "csr", "concat". */
const char *tgi_rel_kind_name(tg_relation_kind k);

/* Dense u8 mask [nq, nk] of a CSR / CONCAT relation, written into dst (nq * nk bytes). */
void tgi_rel_dense_mask(const tg_relation *r, uint8_t *dst);
#endif
