/* bench_edge_ops: tg_edge_attention forward + backward through the public API on the graphs that
 * bench/edge_attention_torch.py measures PyTorch on (its --dump files), per provider, and a check
 * against PyTorch's results on the same inputs.
 *
 *   bench_edge_ops --graph DIR/radius_<size>.bin [--reps 20] [--warmup 5] [--providers fused,composed]
 *                  [--only K]   (CONFIGS[K] alone, 0..3, for profilers)
 *                  [--variant nopos|nob1|nopos,nob1]   (experiments: no geometry / no b1)
 *                  [--split 1]  (also the medians of the host's phases of a timed step: when
 *                               reset + zero_grad, the forward's recording and the backward's
 *                               issue returned, ms from the step's start; one line a timing run)
 *   bench_edge_ops --check DIR [--providers fused,composed] [--device cuda|host]
 *
 * Workload (edge_attention_torch.py's): per edge e = (j -> i), s_e = leaky_relu([pos_j - pos_i | x_j | x_i]
 * W1 + b1, 0.2) W2 + b2 [E, H]; out_i = sum_e softmax_e(s) v_j with v = x viewed [N, H, f_in / H];
 * (H, f_in, hidden) in (1, 8, 16), (1, 64, 64), (4, 8, 16), (4, 64, 64); f32. Gradients reach pos, x,
 * W1, b1, W2, b2; the backward is seeded with a fixed random output gradient (tg_tape_backward_with).
 * Timing as bench_graph_ops: median of CUDA-synchronised wall times of `reps` forward+backward steps
 * after `warmup`. Peak memory by bench_graph_ops' rule: the device bytes a fresh tape's first step
 * adds (tg_runtime_memory's peak) minus its leaves (values and gradients); the relation's device
 * form is built by a warm-up tape first and is not counted, as PyTorch's edge index is not.
 * --check DIR: for each config, DIR/edge_2k_f<f>_h<h>_H<H>.bin (inputs, PyTorch's output and
 * gradients) on DIR/radius_2k.bin; max |tiga - torch| / max |torch| per array must be <= 1e-3 (the
 * b2 gradient, 0 up to rounding, is compared against the scale of W2's gradient). A FAIL line and
 * exit 1 on any mismatch. --device host runs the check on the HOST provider (no GPU needed).
 * The point-cloud training step at 400k is train_pointcloud's "training step: median" line
 * (examples/README.md gives the command). */
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
  fprintf(stderr, "bench_edge_ops: FAIL %s: %s\n", what, msg);
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

/* Uniform [-1, 1) values (splitmix64), never zeros; scaled. */
static void fill(float *x, size_t n, uint64_t seed, double scale) {
  for (size_t i = 0; i < n; i++) {
    uint64_t z = (seed += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    x[i] = (float)(((double)(z >> 11) * 0x1.0p-52 - 1.0) * scale);
  }
}

enum { X, W1, B1, W2, B2, GO, POS, NLEAF };

/* --variant (developer experiments, not the workload): "nopos" records the call without
 * geometry (pos TG_ABSENT, w1 without its 3 geometry rows), "nob1" without b1; both: "nopos,nob1". */
static int g_nopos, g_nob1;
/* --split 1: also print the medians of the host's phases of a timed step (developer experiment):
 * reset + zero_grad returned, the forward recorded, the backward issued (before the final sync). */
static int g_split;
static double g_mark[3];

typedef struct work {
  const tg_relation *rel;
  const graph *g;
  int H, fin, hid;
  tg_provider provider;
  const float *data[NLEAF]; /* given values (check), or NULL: random */
  tg_id ids[NLEAF];
  tg_id out;
} work;

static void leaf_shape(const work *w, int k, int *nd, int64_t s[2]) {
  const int64_t n = w->g->n, f = w->fin, h = w->hid;
  const int64_t shapes[NLEAF][2] = {{n, f}, {(g_nopos ? 0 : 3) + 2 * f, h}, {h, 0}, {h, w->H}, {w->H, 0}, {n, f},
                                    {n, 3}};
  s[0] = shapes[k][0], s[1] = shapes[k][1];
  *nd = s[1] ? 2 : 1;
}

/* Every leaf is a parameter so that it stays on the device across steps (bench_graph_ops' way);
 * all but the output gradient get gradients. */
static void setup(work *w, tg_tape *t, size_t *leaf_bytes) {
  for (int k = 0; k < NLEAF; k++) {
    int nd;
    int64_t s[2];
    leaf_shape(w, k, &nd, s);
    size_t numel = (size_t)(s[0] * (nd == 2 ? s[1] : 1));
    const float *src = k == POS ? w->g->pos : w->data[k];
    float *tmp = NULL;
    if (!src) {
      tmp = malloc(numel * sizeof *tmp);
      if (!tmp) die("setup", "out of memory");
      double scale = k == W1 ? 1.0 / sqrt(3.0 + 2 * w->fin) : k == W2 ? 1.0 / sqrt((double)w->hid) : 1.0;
      fill(tmp, numel, 1000 + (uint64_t)k, scale);
      src = tmp;
    }
    CHECK_T(t, tg_tape_parameter(t, TG_F32, nd, s, src, numel * 4, 0, &w->ids[k]));
    *leaf_bytes += numel * 4 * (k == GO ? 1 : 2);
    free(tmp);
  }
}

/* One forward + backward; 0, or -1 with the tape's error printed (e.g. a provider that refuses). */
static int step(work *w, tg_tape *t) {
  int64_t s3[3] = {w->g->n, w->H, w->fin / w->H};
  const tg_id *id = w->ids;
  tg_id v = tg_reshape(t, id[X], 3, s3), go = tg_reshape(t, id[GO], 3, s3);
  tg_provider prev; /* only the attention node under the provider asked for */
  tg_tape_set_provider(t, w->provider, &prev);
  w->out = tg_edge_attention(t, w->rel, g_nopos ? TG_ABSENT : id[POS], g_nopos ? TG_ABSENT : id[POS], id[X], id[X],
                             TG_ABSENT, v, id[W1], g_nob1 ? TG_ABSENT : id[B1], id[W2], id[B2], NULL);
  tg_tape_set_provider(t, prev, NULL);
  g_mark[1] = now_s();
  int bad = tg_tape_status(t) || tg_tape_backward_with(t, w->out, go);
  g_mark[2] = now_s();
  if (bad) {
    printf("FAIL H=%d f_in=%d hidden=%d provider %s: %s\n", w->H, w->fin, w->hid, tg_provider_name(w->provider),
           tg_tape_error(t));
    return -1;
  }
  return 0;
}

/* `warmup` + `reps` steps on one tape, median; then the peak of a fresh tape's first step. 0 or -1. */
static int run(tg_runtime *rt, work *w, int warmup, int reps, double *ms, double *peak_mib) {
  tg_tape *t;
  size_t lb = 0;
  if (tg_tape_create(rt, &t)) die("tg_tape_create", tg_last_error());
  setup(w, t, &lb);
  double *ts = malloc((size_t)reps * 4 * sizeof *ts);
  for (int i = 0; i < warmup + reps; i++) {
    tg_runtime_sync(rt);
    double t0 = now_s();
    CHECK_T(t, tg_tape_reset(t));
    CHECK_T(t, tg_tape_zero_grad(t));
    g_mark[0] = now_s();
    if (step(w, t)) {
      free(ts);
      tg_tape_destroy(t);
      return -1;
    }
    CHECK_T(t, tg_runtime_sync(rt));
    if (i >= warmup) {
      ts[i - warmup] = 1e3 * (now_s() - t0);
      for (int k = 0; k < 3; k++)
        ts[(size_t)reps * (size_t)(k + 1) + (size_t)(i - warmup)] = 1e3 * (g_mark[k] - t0);
    }
  }
  for (int k = 0; k < 4; k++)
    qsort(ts + (size_t)reps * (size_t)k, (size_t)reps, sizeof *ts, cmp_d);
  *ms = ts[reps / 2];
  if (g_split)
    printf("split (ms from the step's start, medians): reset+zero_grad %.4f, forward recorded %.4f, backward issued "
           "%.4f, synchronised %.4f\n",
           ts[reps + reps / 2], ts[2 * reps + reps / 2], ts[3 * reps + reps / 2], *ms);
  free(ts);
  tg_tape_destroy(t);
  if (tg_tape_create(rt, &t)) die("tg_tape_create", tg_last_error());
  size_t before = 0, peak = 0;
  lb = 0;
  tg_runtime_sync(rt);
  tg_runtime_memory(rt, &before, NULL);
  tg_runtime_reset_peak(rt);
  setup(w, t, &lb);
  int rc = step(w, t);
  CHECK_T(t, tg_runtime_sync(rt));
  tg_runtime_memory(rt, NULL, &peak);
  *peak_mib = ((double)peak - (double)before - (double)lb) / (1024.0 * 1024.0);
  tg_tape_destroy(t);
  return rc;
}

static const int CONFIGS[4][3] = {{1, 8, 16}, {1, 64, 64}, {4, 8, 16}, {4, 64, 64}}; /* H, f_in, hidden */

static int parse_providers(const char *s, tg_provider *p, const char **names) {
  int n = 0;
  if (strstr(s, "fused")) p[n] = TG_PROVIDER_CUDA_FUSED, names[n++] = "fused";
  if (strstr(s, "composed")) p[n] = TG_PROVIDER_CUDA_COMPOSED, names[n++] = "composed";
  if (strstr(s, "host")) p[n] = TG_PROVIDER_HOST, names[n++] = "host";
  return n;
}

static double rel_err(const float *a, const float *b, size_t n, double scale) {
  double mx = 0, ref = scale;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - b[i]);
    if (!(d <= mx)) mx = d; /* NaN sticks */
    if (scale <= 0) ref = fmax(ref, fabs((double)b[i]));
  }
  return mx / fmax(ref, 1e-30);
}

/* One fixture: tiga's output and gradients against PyTorch's. Returns the number of failures. */
static int check_one(tg_runtime *rt, const char *dir, const graph *g, const tg_relation *rel, const int *cfg,
                     tg_provider prov, const char *pname) {
  char path[4096];
  snprintf(path, sizeof path, "%s/edge_2k_f%d_h%d_H%d.bin", dir, cfg[1], cfg[2], cfg[0]);
  FILE *f = fopen(path, "rb");
  if (!f) die("open", path);
  int64_t hdr[5];
  if (fread(hdr, 8, 5, f) != 5 || hdr[0] != g->n || hdr[1] != g->nnz || hdr[2] != cfg[1] || hdr[3] != cfg[2] ||
      hdr[4] != cfg[0])
    die("fixture header does not match the graph / config", path);
  work w = {rel, g, cfg[0], cfg[1], cfg[2], prov, {0}, {0}, 0};
  /* inputs X W1 B1 W2 B2 GO, then out, g_pos, g_x, g_W1, g_b1, g_W2, g_b2 */
  const int order_in[6] = {X, W1, B1, W2, B2, GO}, order_res[7] = {-1, POS, X, W1, B1, W2, B2};
  float *in[NLEAF] = {0}, *res[7] = {0};
  size_t n_in[NLEAF] = {0}, n_res[7];
  for (int k = 0; k < 6; k++) {
    int nd;
    int64_t s[2];
    leaf_shape(&w, order_in[k], &nd, s);
    n_in[order_in[k]] = (size_t)(s[0] * (nd == 2 ? s[1] : 1));
    in[order_in[k]] = malloc(n_in[order_in[k]] * 4);
    if (fread(in[order_in[k]], 4, n_in[order_in[k]], f) != n_in[order_in[k]]) die("read", path);
    w.data[order_in[k]] = in[order_in[k]];
  }
  for (int k = 0; k < 7; k++) {
    int nd;
    int64_t s[2];
    leaf_shape(&w, k ? order_res[k] : X, &nd, s);
    n_res[k] = (size_t)(s[0] * (nd == 2 ? s[1] : 1));
    res[k] = malloc(n_res[k] * 4);
    if (fread(res[k], 4, n_res[k], f) != n_res[k]) die("read", path);
  }
  fclose(f);
  tg_tape *t;
  size_t lb = 0;
  if (tg_tape_create(rt, &t)) die("tg_tape_create", tg_last_error());
  setup(&w, t, &lb);
  int fails = 0;
  if (step(&w, t)) {
    fails = 1;
    goto done;
  }
  static const char *const what[7] = {"out", "d pos", "d x", "d W1", "d b1", "d W2", "d b2"};
  double worst = 0;
  double gw2_scale = 0;
  for (size_t i = 0; i < n_res[5]; i++)
    gw2_scale = fmax(gw2_scale, fabs((double)res[5][i]));
  for (int k = 0; k < 7; k++) {
    float *got = malloc(n_res[k] * 4);
    tg_status st =
        k ? tg_tape_read_grad(t, w.ids[order_res[k]], got, n_res[k] * 4) : tg_tape_read(t, w.out, got, n_res[k] * 4);
    if (st) die("read back", tg_tape_error(t));
    double e = rel_err(got, res[k], n_res[k], k == 6 ? gw2_scale : 0);
    if (!(e <= 1e-3)) {
      printf("FAIL check %s H=%d f_in=%d hidden=%d %s: max rel diff %.2e > 1e-3\n", pname, cfg[0], cfg[1], cfg[2],
             what[k], e);
      fails++;
    }
    worst = fmax(worst, e);
    free(got);
  }
  if (!fails)
    printf("ok check %-8s H=%d f_in=%2d hidden=%2d: out and 6 gradients within %.1e of PyTorch (max rel)\n", pname,
           cfg[0], cfg[1], cfg[2], worst);
done:
  tg_tape_destroy(t);
  for (int k = 0; k < NLEAF; k++)
    free(in[k]);
  for (int k = 0; k < 7; k++)
    free(res[k]);
  return fails;
}

int main(int argc, char **argv) {
  const char *path = NULL, *check = NULL, *provs = "fused,composed", *device = "cuda";
  int reps = 20, warmup = 5, only = -1; /* --only K: the timing of CONFIGS[K] alone (profiling) */
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--graph"))
      path = argv[i + 1];
    else if (!strcmp(argv[i], "--check"))
      check = argv[i + 1];
    else if (!strcmp(argv[i], "--reps"))
      reps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--warmup"))
      warmup = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--providers"))
      provs = argv[i + 1];
    else if (!strcmp(argv[i], "--device"))
      device = argv[i + 1];
    else if (!strcmp(argv[i], "--only"))
      only = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--split"))
      g_split = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--variant"))
      g_nopos = strstr(argv[i + 1], "nopos") != NULL, g_nob1 = strstr(argv[i + 1], "nob1") != NULL;
    else
      path = NULL, check = NULL, i = argc;
  }
  tg_provider prov[3];
  const char *pname[3];
  int np = parse_providers(provs, prov, pname);
  if ((!path == !check) || reps < 1 || warmup < 0 || !np || only < -1 || only > 3) {
    fprintf(stderr, "usage: bench_edge_ops --graph FILE [--reps 20] [--warmup 5] [--providers fused,composed] "
                    "[--only 0..3] [--variant nopos,nob1] [--split 1]\n"
                    "       bench_edge_ops --check DIR [--providers fused,composed|host] [--device cuda|host]\n");
    return 2;
  }
  tg_runtime *rt;
  if (!strcmp(device, "host") ? tg_runtime_create_host(&rt) : tg_runtime_create_cuda(0, &rt))
    die("runtime", tg_last_error());
  graph g;
  char gpath[4096];
  if (check) snprintf(gpath, sizeof gpath, "%s/radius_2k.bin", check);
  read_graph(check ? gpath : path, &g);
  tg_relation *rel;
  if (tg_relation_csr(rt, g.n, g.n, g.row_ptr, (size_t)(g.n + 1) * 8, g.col_idx, (size_t)g.nnz * 4, &rel))
    die("tg_relation_csr", tg_last_error());
  printf("graph %s: %lld nodes, %lld edges (mean degree %.2f)\n", check ? gpath : path, (long long)g.n,
         (long long)g.nnz, (double)g.nnz / (double)g.n);
  int fails = 0; /* failed checks, or failed timing rows */
  if (check) {
    for (int p = 0; p < np; p++)
      for (int c = 0; c < 4; c++)
        fails += check_one(rt, check, &g, rel, CONFIGS[c], prov[p], pname[p]);
    printf("bench_edge_ops --check: %d failed\n", fails);
  } else {
    printf("%-44s %-9s %10s %10s\n", "tg_edge_attention fwd+bwd f32", "provider", "ms", "peak MiB");
    for (int c = 0; c < 4; c++)
      for (int p = 0; p < np && (only < 0 || c == only); p++) {
        work w = {rel, &g, CONFIGS[c][0], CONFIGS[c][1], CONFIGS[c][2], prov[p], {0}, {0}, 0};
        double ms, mib;
        /* the first run builds the relation's device form (CSR + transpose) */
        if (run(rt, &w, 1, 1, &ms, &mib) || run(rt, &w, warmup, reps, &ms, &mib)) {
          fails++;
          continue;
        }
        char name[96];
        snprintf(name, sizeof name, "edge-MLP attention H=%d f_in=%d hidden=%d", w.H, w.fin, w.hid);
        printf("%-44s %-9s %10.3f %10.1f\n", name, pname[p], ms, mib);
        printf("{\"bench\":\"bench_edge_ops\",\"nodes\":%lld,\"edges\":%lld,\"H\":%d,\"f_in\":%d,\"hidden\":%d,"
               "\"provider\":\"%s\",\"ms\":%.4f,\"peak_mib\":%.1f}\n",
               (long long)g.n, (long long)g.nnz, w.H, w.fin, w.hid, pname[p], ms, mib);
        fflush(stdout);
      }
  }
  tg_relation_destroy(rel);
  tg_runtime_destroy(rt);
  graph_free(&g);
  return fails ? 1 : 0;
}
