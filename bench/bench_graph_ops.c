/* bench_graph_ops: the graph family through the public API on the GPU, on the graphs that
 * bench/graph_torch.py measures PyTorch / PyG on (its --save-graph files), timed as graph_torch.py
 * times PyTorch: median of CUDA-synchronised wall times of 20 forward+backward steps after 5 warm-up
 * steps, each step seeded with a fixed random output gradient (tg_tape_backward_with, PyTorch's
 * y.backward(grad)). Peak memory by the graph issue's rule: the device bytes a fresh tape's first step
 * adds (tg_runtime_memory's peak) minus its inputs and parameters; the relation's device form is
 * built by a warm-up tape first and is not counted, as PyTorch's edge_index is not.
 *
 *   bench_graph_ops --graph FILE --cutoff C [--reps 20] [--warmup 5] [--only gat,csr,reduce,radius]
 *
 * Rows: gat (a GAT layer 64 -> 4 x 16: linear, score projections, tg_gat_attention, bias — PyG's
 * GATConv(64, 16, heads=4, add_self_loops=False)), the same layer on a radius graph of the same points
 * with about 4x the edges (peak growth), csr (tg_attention over the graph, CUDA_FUSED: H=4 D=16 f32,
 * H=8 D=64 f32 and bf16), reduce (tg_graph_reduce SUM at F = 64, f32: bytes moved / time), radius
 * (tg_relation_radius from host positions, upload included). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tiga.h"
#include "graph_file.h"

static void die(const char *what, const char *msg) {
  fprintf(stderr, "bench_graph_ops: %s: %s\n", what, msg);
  exit(1);
}
#define CHECK_T(t, call)                                                                                               \
  do {                                                                                                                 \
    if ((call) != TG_OK) die(#call, tg_tape_error(t));                                                                 \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void read_graph(const char *path, graph *g) {
  const char *why;
  if (graph_read(path, g, &why)) die(path, why);
}

/* The same points at a cutoff for ~4x the edges (peak growth at fixed N); *e4 = its edge count. */
static tg_relation *radius_4x(tg_runtime *rt, const graph *g, double cutoff, int64_t *e4) {
  tg_relation *r;
  if (tg_relation_radius(rt, 3, TG_F32, g->n, g->pos, (size_t)g->n * 12, 0, NULL, 0, cutoff * cbrt(4.0), NULL, &r))
    die("tg_relation_radius", tg_last_error());
  tg_relation_info(r, NULL, NULL, NULL, e4);
  return r;
}

/* Uniform [-1, 1) values (splitmix64), never zeros. */
static void fill(float *x, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    uint64_t z = (seed += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    x[i] = (float)((double)(z >> 11) * 0x1.0p-52 - 1.0);
  }
}
static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* ------------------------------------------------------------ a timed workload */

typedef struct work work;
struct work {
  /* builds parameters / inputs on a fresh tape (their bytes into *leaf_bytes) */
  void (*setup)(work *w, tg_tape *t, size_t *leaf_bytes);
  /* one forward + backward on t (already reset, leaves from setup alive) */
  void (*step)(work *w, tg_tape *t);
  const tg_relation *rel;
  int64_t n, H, D, F;
  tg_dtype dt;
  tg_id ids[12];
  int nids;
};

static tg_id leaf(tg_tape *t, tg_dtype dt, int nd, const int64_t *shape, uint64_t seed, int param, int grad,
                  size_t *bytes) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++)
    n *= shape[i];
  float *f = malloc((size_t)n * sizeof *f);
  fill(f, (size_t)n, seed);
  void *data = f;
  uint16_t *h = NULL;
  if (dt == TG_BF16) {
    h = malloc((size_t)n * 2);
    for (int64_t i = 0; i < n; i++)
      h[i] = to_bf16(f[i]);
    data = h;
  }
  size_t b = (size_t)n * tg_dtype_size(dt);
  tg_id id;
  if (param)
    CHECK_T(t, tg_tape_parameter(t, dt, nd, shape, data, b, 0, &id));
  else
    CHECK_T(t, tg_tape_input(t, dt, nd, shape, data, b, grad ? TG_REQUIRES_GRAD : 0, &id));
  free(f), free(h);
  *bytes += b * (grad ? 2 : 1); /* the value and, for a leaf that gets a gradient, its gradient */
  return id;
}

/* Times w: `warmup` + `reps` steps on one tape, median; then the peak of a fresh tape's first step. */
static void run(tg_runtime *rt, work *w, int warmup, int reps, double *ms, double *peak_mib) {
  tg_tape *t;
  size_t lb = 0;
  if (tg_tape_create(rt, &t)) die("tg_tape_create", tg_last_error());
  w->setup(w, t, &lb);
  double *ts = malloc((size_t)reps * sizeof *ts);
  for (int i = 0; i < warmup + reps; i++) {
    tg_runtime_sync(rt);
    double t0 = now_s();
    CHECK_T(t, tg_tape_reset(t));
    w->step(w, t);
    CHECK_T(t, tg_runtime_sync(rt));
    if (i >= warmup) ts[i - warmup] = 1e3 * (now_s() - t0);
  }
  qsort(ts, (size_t)reps, sizeof *ts, cmp_d);
  *ms = ts[reps / 2];
  free(ts);
  tg_tape_destroy(t);
  /* peak: a fresh tape (its leaves' bytes, values and gradients, are subtracted) */
  if (tg_tape_create(rt, &t)) die("tg_tape_create", tg_last_error());
  size_t before = 0, peak = 0;
  lb = 0;
  tg_runtime_sync(rt);
  tg_runtime_memory(rt, &before, NULL);
  tg_runtime_reset_peak(rt);
  w->setup(w, t, &lb);
  w->step(w, t);
  CHECK_T(t, tg_runtime_sync(rt));
  tg_runtime_memory(rt, NULL, &peak);
  *peak_mib = ((double)peak - (double)before - (double)lb) / (1024.0 * 1024.0);
  tg_tape_destroy(t);
}

/* ---- GAT layer 64 -> 4 x 16 */
static void gat_setup(work *w, tg_tape *t, size_t *lb) {
  int64_t sx[2] = {w->n, 64}, sw[2] = {64, 64}, sa[2] = {4, 16}, sb[1] = {64}, sm[2] = {64, 4};
  /* every leaf is a parameter so that it stays on the device across steps (a step value would be
   * dropped by tg_tape_reset); x gets a gradient, as in PyG's benchmark */
  w->ids[0] = leaf(t, TG_F32, 2, sx, 1, 1, 1, lb);
  w->ids[1] = leaf(t, TG_F32, 2, sw, 2, 1, 1, lb);
  w->ids[2] = leaf(t, TG_F32, 2, sa, 3, 1, 1, lb);
  w->ids[3] = leaf(t, TG_F32, 2, sa, 4, 1, 1, lb);
  w->ids[4] = leaf(t, TG_F32, 1, sb, 5, 1, 1, lb);
  w->ids[5] = leaf(t, TG_F32, 2, sx, 6, 1, 0, lb); /* the output gradient */
  float mask[64 * 4];                              /* block mask: row h*16 + c feeds head h */
  for (int r = 0; r < 64; r++)
    for (int h = 0; h < 4; h++)
      mask[r * 4 + h] = r / 16 == h ? 1.f : 0.f;
  CHECK_T(t, tg_tape_parameter(t, TG_F32, 2, sm, mask, sizeof mask, 0, &w->ids[6]));
  *lb += 2 * sizeof mask;
  w->nids = 7;
}
static void gat_step(work *w, tg_tape *t) {
  const tg_id x = w->ids[0], W = w->ids[1], a_src = w->ids[2], a_dst = w->ids[3], b = w->ids[4], R = w->ids[5],
              M = w->ids[6];
  int64_t s641[2] = {64, 1}, s3[3] = {w->n, 4, 16}, s2[2] = {w->n, 64}, parts[2] = {4, 4};
  /* e[i, h] = sum_c z[i, h, c] a[h, c] as one GEMM with the block matrices A = a (x) block mask */
  tg_id A[2] = {tg_mul(t, tg_reshape(t, a_src, 2, s641), M), tg_mul(t, tg_reshape(t, a_dst, 2, s641), M)};
  tg_id z = tg_linear(t, x, W, TG_ABSENT), e[2];
  tg_split(t, tg_linear(t, z, tg_concat(t, 2, A), TG_ABSENT), 2, parts, e);
  tg_graph_attention_options o;
  tg_graph_attention_options_init(&o);
  tg_id y = tg_gat_attention(t, w->rel, e[1], e[0], tg_reshape(t, z, 3, s3), &o);
  y = tg_add(t, tg_reshape(t, y, 2, s2), b);
  CHECK_T(t, tg_tape_status(t));
  CHECK_T(t, tg_tape_backward_with(t, y, R));
}

/* ---- CSR attention: q, k, v [1, N, H, D] */
static void csr_setup(work *w, tg_tape *t, size_t *lb) {
  int64_t s[4] = {1, w->n, w->H, w->D};
  for (int i = 0; i < 4; i++) /* parameters: device-resident across steps (q, k, v get gradients) */
    w->ids[i] = leaf(t, w->dt, 4, s, 11 + (uint64_t)i, 1, i < 3, lb);
  w->nids = 4;
}
static void csr_step(work *w, tg_tape *t) {
  tg_provider prev;
  tg_tape_set_provider(t, TG_PROVIDER_CUDA_FUSED, &prev);
  tg_id y = tg_attention(t, w->ids[0], w->ids[1], w->ids[2], w->rel, NULL);
  tg_tape_set_provider(t, prev, NULL);
  CHECK_T(t, tg_tape_status(t));
  CHECK_T(t, tg_tape_backward_with(t, y, w->ids[3]));
}

/* ---- reduce SUM, F = 64: forward only (its bytes: E*F*4 read + N*F*4 written + the CSR) */
static void reduce_setup(work *w, tg_tape *t, size_t *lb) {
  int64_t s[2] = {w->D, 64}; /* D holds E here */
  w->ids[0] = leaf(t, TG_F32, 2, s, 21, 1, 0, lb);
  w->nids = 1;
}
static void reduce_step(work *w, tg_tape *t) {
  tg_graph_reduce(t, w->rel, w->ids[0], TG_REDUCE_SUM);
  CHECK_T(t, tg_tape_status(t));
}

static int wants(const char *only, const char *what) { return !only || strstr(only, what) != NULL; }

int main(int argc, char **argv) {
  const char *path = NULL, *only = NULL;
  double cutoff = 0;
  int reps = 20, warmup = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--graph"))
      path = argv[i + 1];
    else if (!strcmp(argv[i], "--cutoff"))
      cutoff = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--reps"))
      reps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--warmup"))
      warmup = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--only"))
      only = argv[i + 1];
  }
  if (!path || !(cutoff > 0) || reps < 1 || warmup < 0) {
    fprintf(stderr, "usage: bench_graph_ops --graph FILE --cutoff C [--reps 20] [--warmup 5] [--only ...]\n");
    return 2;
  }
  graph g;
  read_graph(path, &g);
  tg_runtime *rt;
  if (tg_runtime_create_cuda(0, &rt)) die("tg_runtime_create_cuda", tg_last_error());
  tg_relation *rel;
  if (tg_relation_csr(rt, g.n, g.n, g.row_ptr, (size_t)(g.n + 1) * 8, g.col_idx, (size_t)g.nnz * 4, &rel))
    die("tg_relation_csr", tg_last_error());
  printf("graph %s: %lld nodes, %lld edges (avg degree %.1f)\n", path, (long long)g.n, (long long)g.nnz,
         (double)g.nnz / (double)g.n);
  printf("%-34s %10s %12s %s\n", "workload", "fwd+bwd ms", "peak MiB", "notes");
  double ms, mib;
  if (wants(only, "gat")) {
    work w = {gat_setup, gat_step, rel, g.n, 4, 16, 16, TG_F32, {0}, 0};
    run(rt, &w, 1, 1, &ms, &mib); /* builds the relation's device form (CSR + transpose) */
    run(rt, &w, warmup, reps, &ms, &mib);
    printf("%-34s %10.3f %12.1f\n", "gat layer 64->4x16 f32", ms, mib);
    /* the same points at a cutoff for ~4x the edges: peak growth at fixed N */
    int64_t e4;
    tg_relation *rel4 = radius_4x(rt, &g, cutoff, &e4);
    work w4 = w;
    w4.rel = rel4;
    double ms4, mib4;
    run(rt, &w4, 1, 1, &ms4, &mib4);
    run(rt, &w4, warmup, reps, &ms4, &mib4);
    printf("%-34s %10.3f %12.1f E x%.2f, peak growth %+.1f %%\n", "gat layer, ~4x edges", ms4, mib4,
           (double)e4 / (double)g.nnz, 100 * (mib4 / mib - 1));
    tg_relation_destroy(rel4);
  }
  if (wants(only, "csr")) {
    struct {
      int H, D;
      tg_dtype dt;
    } cs[3] = {{4, 16, TG_F32}, {8, 64, TG_F32}, {8, 64, TG_BF16}};
    for (int c = 0; c < 3; c++) {
      work w = {csr_setup, csr_step, rel, g.n, cs[c].H, cs[c].D, cs[c].D, cs[c].dt, {0}, 0};
      run(rt, &w, 1, 1, &ms, &mib);
      run(rt, &w, warmup, reps, &ms, &mib);
      char name[64];
      snprintf(name, sizeof name, "csr attention H=%d D=%d %s", cs[c].H, cs[c].D, tg_dtype_name(cs[c].dt));
      printf("%-34s %10.3f %12.1f\n", name, ms, mib);
      if (c != 1) continue;
      /* f32 H=8 D=64 on the same points at a cutoff for ~4x the edges: peak growth at fixed N */
      int64_t e4;
      tg_relation *rel4 = radius_4x(rt, &g, cutoff, &e4);
      work w4 = w;
      w4.rel = rel4;
      double ms4, mib4;
      run(rt, &w4, 1, 1, &ms4, &mib4);
      run(rt, &w4, warmup, reps, &ms4, &mib4);
      printf("%-34s %10.3f %12.1f E x%.2f, peak growth %+.1f %%\n", "csr attention H=8 D=64, ~4x edges", ms4, mib4,
             (double)e4 / (double)g.nnz, 100 * (mib4 / mib - 1));
      tg_relation_destroy(rel4);
    }
  }
  if (wants(only, "reduce")) {
    work w = {reduce_setup, reduce_step, rel, g.n, 0, g.nnz, 64, TG_F32, {0}, 0};
    run(rt, &w, 1, 1, &ms, &mib);
    run(rt, &w, warmup, reps, &ms, &mib);
    double bytes = (double)g.nnz * 64 * 4 + (double)g.n * 64 * 4 + (double)(g.n + 1) * 8 + (double)g.nnz * 4;
    printf("%-34s %10.3f %12s %.0f GB/s (%.0f %% of 4200), forward only, op-level\n", "graph_reduce SUM F=64 f32", ms,
           "-", bytes / (ms * 1e-3) / 1e9, 100 * bytes / (ms * 1e-3) / 4.2e12);
  }
  if (wants(only, "radius")) {
    double *ts = malloc((size_t)reps * sizeof *ts);
    for (int i = 0; i < warmup + reps; i++) {
      tg_relation *r;
      tg_runtime_sync(rt);
      double t0 = now_s();
      if (tg_relation_radius(rt, 3, TG_F32, g.n, g.pos, (size_t)g.n * 12, 0, NULL, 0, cutoff, NULL, &r))
        die("tg_relation_radius", tg_last_error());
      tg_runtime_sync(rt);
      if (i >= warmup) ts[i - warmup] = 1e3 * (now_s() - t0);
      int64_t e;
      tg_relation_info(r, NULL, NULL, NULL, &e);
      if (e != g.nnz) fprintf(stderr, "radius: %lld edges, the file has %lld\n", (long long)e, (long long)g.nnz);
      tg_relation_destroy(r);
    }
    qsort(ts, (size_t)reps, sizeof *ts, cmp_d);
    printf("%-34s %10.3f %12s from host positions, upload included\n", "radius graph build", ts[reps / 2], "-");
    free(ts);
  }
  tg_relation_destroy(rel);
  tg_runtime_destroy(rt);
  graph_free(&g);
  return 0;
}
