/* The graph files bench/graph_torch.py writes with --save-graph (and edge_attention_torch.py with
 * --dump), read by the C benches: int64 n, int64 nnz, float32 pos [n, 3], int64 row_ptr [n + 1],
 * int32 col_idx [nnz] (destination-major CSR, as tg_relation_csr takes it). */
#ifndef TIGA_BENCH_GRAPH_FILE_H
#define TIGA_BENCH_GRAPH_FILE_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct graph {
  int64_t n, nnz;
  float *pos;
  int64_t *row_ptr;
  int32_t *col_idx;
} graph;

/* 0, or -1 with what failed in *why (a static string). */
static inline int graph_read(const char *path, graph *g, const char **why) {
  *g = (graph){0};
  FILE *f = fopen(path, "rb");
  if (!f) return *why = "cannot open the file", -1;
  int ok = fread(&g->n, 8, 1, f) == 1 && fread(&g->nnz, 8, 1, f) == 1 && g->n >= 1 && g->nnz >= 0;
  if (ok) {
    g->pos = malloc((size_t)g->n * 3 * sizeof(float));
    g->row_ptr = malloc((size_t)(g->n + 1) * sizeof(int64_t));
    g->col_idx = malloc((size_t)(g->nnz ? g->nnz : 1) * sizeof(int32_t));
    if (!g->pos || !g->row_ptr || !g->col_idx) {
      fclose(f);
      return *why = "out of memory", -1;
    }
    ok = fread(g->pos, sizeof(float), (size_t)g->n * 3, f) == (size_t)g->n * 3 &&
         fread(g->row_ptr, 8, (size_t)g->n + 1, f) == (size_t)g->n + 1 &&
         fread(g->col_idx, 4, (size_t)g->nnz, f) == (size_t)g->nnz;
  }
  fclose(f);
  if (!ok) return *why = "short or malformed file", -1;
  return 0;
}

static inline void graph_free(graph *g) {
  free(g->pos), free(g->row_ptr), free(g->col_idx);
  *g = (graph){0};
}
#endif
