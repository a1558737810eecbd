/* The proof of the GAT's math beyond accuracy: PyG's initial weights (tests/data/gat_cora_fixture.bin,
 * made by bench/gat_fixture.py with PyG 2.8) loaded into examples/gat.c's model must give PyG's
 * logits, gradients and 5-step Adam loss trajectory, with every dropout off. In float64 on the host
 * the match is to rounding; in float32 within the fixture README's tolerances. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../examples/gat.c"
#include "support.h"

/* A path relative to this file's directory (the data next to it); when the build runs elsewhere
 * (the GPU machine runs a packed build from <repo>/build-gpu-run/tests), relative to ../../tests. */
static void src_path(char *buf, size_t cap, const char *rel) {
  const char *f = __FILE__, *slash = strrchr(f, '/');
  int n = slash ? (int)(slash - f) : 1;
  snprintf(buf, cap, "%.*s/%s", n, slash ? f : ".", rel);
  char probe[4200];
  snprintf(probe, sizeof probe, "%.*s/data/README.md", n, slash ? f : ".");
  FILE *p = fopen(probe, "r");
  if (p)
    fclose(p);
  else
    snprintf(buf, cap, "../../tests/%s", rel);
}

typedef struct fx_array {
  char name[32];
  int dtype, ndim;
  int64_t dims[4], n;
  double *v;
} fx_array;

/* Reads the TGFX0001 file (tests/data/README.md); returns the number of arrays. */
static int fx_load(fx_array *out, int cap) {
  char path[4096];
  src_path(path, sizeof path, "data/gat_cora_fixture.bin");
  FILE *f = fopen(path, "rb");
  cr_assert(f, "cannot open %s", path);
  char magic[8];
  int32_t count;
  cr_assert(fread(magic, 1, 8, f) == 8 && !memcmp(magic, "TGFX0001", 8), "bad magic");
  cr_assert(fread(&count, 4, 1, f) == 1 && count > 0 && count <= cap);
  for (int a = 0; a < count; a++) {
    fx_array *x = &out[a];
    int32_t len, dt, nd;
    cr_assert(fread(&len, 4, 1, f) == 1 && len > 0 && len < 32);
    cr_assert(fread(x->name, 1, (size_t)len, f) == (size_t)len);
    x->name[len] = 0;
    cr_assert(fread(&dt, 4, 1, f) == 1 && fread(&nd, 4, 1, f) == 1 && (dt == 0 || dt == 1) && nd >= 1 && nd <= 4);
    x->dtype = dt, x->ndim = nd, x->n = 1;
    for (int d = 0; d < nd; d++) {
      cr_assert(fread(&x->dims[d], 8, 1, f) == 1 && x->dims[d] > 0);
      x->n *= x->dims[d];
    }
    x->v = malloc((size_t)x->n * sizeof *x->v);
    for (int64_t i = 0; i < x->n; i++) {
      if (dt == 0) {
        float v;
        cr_assert(fread(&v, 4, 1, f) == 1);
        x->v[i] = v;
      } else {
        cr_assert(fread(&x->v[i], 8, 1, f) == 1);
      }
    }
  }
  fclose(f);
  return count;
}

static const fx_array *fx_get(const fx_array *a, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(a[i].name, name)) return &a[i];
  cr_assert_fail("fixture array '%s' missing", name);
  return NULL;
}

static double max_abs(const double *v, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++)
    m = fmax(m, fabs(v[i]));
  return m;
}

static void run_fixture(tg_dtype dt, double loss_tol, double grad_rel, double logit_rel) {
  fx_array fx[32];
  int nfx = fx_load(fx, 32);
  char dir[4096], err[GAT_ERR];
  src_path(dir, sizeof dir, "../examples/data/cora");
  gat_data d;
  cr_assert_eq(gat_data_load(&d, dir, err), 0, "%s", err);
  tg_runtime *rt = ts_host_runtime();
  gat_config cfg;
  gat_config_default(&cfg);
  cfg.in_drop = cfg.hid_drop = cfg.attn_drop = 0; /* the fixture runs with every dropout off */
  cfg.dtype = dt;
  cfg.attention = TG_PROVIDER_HOST;
  gat_model m;
  cr_assert_eq(gat_model_init(&m, rt, &cfg, &d, err), 0, "%s", err);
  static const char *names[8] = {"w1", "a_src1", "a_dst1", "b1", "w2", "a_src2", "a_dst2", "b2"};
  tg_id ids[8];
  gat_model_params(&m, ids);
  for (int p = 0; p < 8; p++) { /* PyG's initial weights */
    const fx_array *w = fx_get(fx, nfx, names[p]);
    int64_t n;
    tg_tape_numel(m.tape, ids[p], &n);
    cr_assert_eq(n, w->n, "%s: %lld elements, fixture %lld", names[p], (long long)n, (long long)w->n);
    void *buf = ts_convert(w->v, (size_t)n, dt);
    cr_assert_eq(tg_tape_write(m.tape, ids[p], buf, (size_t)n * tg_dtype_size(dt)), TG_OK, "%s", tg_tape_error(m.tape));
    free(buf);
  }
  /* logits at the initial weights */
  const fx_array *lg = fx_get(fx, nfx, "logits_0");
  tg_tape_reset(m.tape);
  tg_tape_set_grad_enabled(m.tape, 0, NULL);
  tg_id l0 = gat_logits(&m, 0);
  double *got = malloc((size_t)lg->n * sizeof *got);
  cr_assert_eq(ts_read(m.tape, l0, got, lg->n), lg->n, "%s", tg_tape_error(m.tape));
  double worst = 0;
  for (int64_t i = 0; i < lg->n; i++)
    worst = fmax(worst, fabs(got[i] - lg->v[i]));
  cr_expect(worst <= logit_rel * max_abs(lg->v, lg->n), "logits: worst |diff| %.3g (max |logit| %.3g)", worst,
            max_abs(lg->v, lg->n));
  free(got);
  tg_tape_set_grad_enabled(m.tape, 1, NULL);
  /* the 5-step Adam trajectory; the first step's gradients are those at the initial weights */
  const fx_array *loss = fx_get(fx, nfx, "loss");
  for (int step = 0; step <= 5; step++) {
    double l;
    cr_assert_eq(gat_train_step(&m, &l, err), 0, "%s", err);
    cr_expect(fabs(l - loss->v[step]) <= loss_tol, "loss after %d steps: %.12f, PyG %.12f (|diff| %.3g)", step, l,
              loss->v[step], fabs(l - loss->v[step]));
    if (step) continue;
    for (int p = 0; p < 8; p++) {
      char gname[32];
      snprintf(gname, sizeof gname, "grad_%s", names[p]);
      const fx_array *g = fx_get(fx, nfx, gname);
      double *gg = malloc((size_t)g->n * sizeof *gg);
      cr_assert_eq(ts_read_grad(m.tape, ids[p], gg, g->n), g->n);
      double gw = 0, scale = max_abs(g->v, g->n);
      for (int64_t i = 0; i < g->n; i++)
        gw = fmax(gw, fabs(gg[i] - g->v[i]));
      cr_expect(gw <= grad_rel * scale, "%s: worst |diff| %.3g, max |grad| %.3g", gname, gw, scale);
      free(gg);
    }
  }
  gat_model_free(&m);
  tg_runtime_destroy(rt);
  gat_data_free(&d);
  for (int i = 0; i < nfx; i++)
    free(fx[i].v);
}

Test(gat, pyg_fixture_f64, .timeout = 600) { run_fixture(TG_F64, 1e-10, 1e-8, 1e-10); }
Test(gat, pyg_fixture_f32, .timeout = 600) { run_fixture(TG_F32, 1e-5, 1e-4, 1e-5); }

/* The data loader: Cora's counts and a row of the graph with its self loop. */
Test(gat, cora_data) {
  char dir[4096], err[GAT_ERR];
  src_path(dir, sizeof dir, "../examples/data/cora");
  gat_data d;
  cr_assert_eq(gat_data_load(&d, dir, err), 0, "%s", err);
  cr_expect(d.n == 2708 && d.n_feat == 1433 && d.n_class == 7);
  cr_expect(d.count[GAT_TRAIN] == 140 && d.count[GAT_VAL] == 500 && d.count[GAT_TEST] == 1000);
  cr_expect_eq(d.adj_ptr[d.n], 2 * 5278 + 2708, "both directions plus a self loop each");
  int self = 0;
  for (int64_t e = d.adj_ptr[0]; e < d.adj_ptr[1]; e++)
    self += d.adj_idx[e] == 0;
  cr_expect_eq(self, 1);
  gat_data_free(&d);
  cr_expect_eq(gat_data_load(&d, "/nonexistent", err), -1);
  cr_expect(strstr(err, "cannot read") != NULL, "%s", err);
}
