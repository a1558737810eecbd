/* The host view of a relation: which keys (sources) j each query (destination) i may attend to.
 * Every host kernel that consumes a relation (attention, the graph ops) reads it through this
 * view. The arrays belong to the relation (ops/relation.c); the view only points at them.
 *
 * Edge order (the graph ops' rule): the allowed pairs (j -> i) of batch entry b, destination-major
 * (by i), sources j ascending within a row; edge e of row i is row_start(i) + its rank in the row. */
#ifndef TIGA_HOST_RELATION_H
#define TIGA_HOST_RELATION_H
#include <stdint.h>

typedef enum { HOST_REL_DENSE = 0, HOST_REL_CAUSAL, HOST_REL_MASK, HOST_REL_VARLEN, HOST_REL_CSR } host_rel_kind;

typedef struct host_rel {
  host_rel_kind kind;
  int64_t nq, nk;
  const uint8_t *mask;        /* MASK: [mask_batch or 1, nq, nk], nonzero = allowed */
  int64_t mask_batch;         /* 0 or 1: shared by every batch entry; else one mask per entry */
  const int32_t *cu_q, *cu_k; /* VARLEN: n_seqs + 1 offsets each */
  int n_seqs, causal;
  const int64_t *row_ptr; /* CSR: nq + 1 */
  const int32_t *col_idx;
} host_rel;

/* Writes the keys allowed for query i of batch entry b into keys (ascending, capacity nk) and
 * returns how many there are. */
int64_t host_rel_row(const host_rel *r, int64_t b, int64_t i, int32_t *keys);
/* Number of keys allowed for query i of batch entry b (no array written). */
int64_t host_rel_row_count(const host_rel *r, int64_t b, int64_t i);
/* Destination-major CSR of batch entry b: row_ptr [nq + 1] (row_ptr[0] = 0), col_idx [row_ptr[nq]]
 * (pass NULL to get only row_ptr, e.g. to size col_idx first). */
void host_rel_to_csr(const host_rel *r, int64_t b, int64_t *row_ptr, int32_t *col_idx);
#endif
