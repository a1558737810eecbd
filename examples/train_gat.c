/*
 * train_gat — the GAT of Veličković et al. on Cora (examples/gat.h), with PyG's protocol
 * (bench/gat_torch.py runs PyG the same way):
 *   every epoch one training step, then an evaluation without dropout (val loss / acc, test acc);
 *   the reported test accuracy is the one at the epoch of the lowest validation loss; early stopping
 *   once `--patience` epochs in a row have not lowered it; at most `--epochs` epochs.
 *
 *   train_gat [--device cuda|host] [--attention fused|composed|host|auto] [--seeds N] [--seed S]
 *             [--epochs 1000] [--patience 100] [--dtype f32|f64] [--data DIR] [--out DIR]
 *             [--log-interval 50] [--quiet] [--profile]
 *
 * Per seed: a progress line every --log-interval epochs and a summary line; at the end every seed's
 * test accuracy and their mean ± std (sample standard deviation). Writes <out>/gat_seed<S>.csv (the
 * curves), <out>/gat_seed<S>.svg and the best checkpoint <out>/gat_seed<S>.ckpt (tg_tape_save).
 * Timing, as bench/gat_torch.py times PyG: the median over every training step of every seed, after
 * the first 10 steps of each seed, of the wall time of one step (forward, backward, Adam), the device
 * synchronised before reading the clock at its start and end; evaluation is not timed.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "gat.h"

#ifndef GAT_DEFAULT_DATA
#define GAT_DEFAULT_DATA "examples/data/cora"
#endif

typedef struct opts {
  int device_cuda, seeds, epochs, patience, log_interval, quiet, profile;
  long long seed;
  tg_provider attention;
  tg_dtype dtype;
  const char *data, *out;
} opts;

static void usage(FILE *f) {
  fprintf(f, "usage: train_gat [--device cuda|host] [--attention fused|composed|host|auto] [--seeds N] [--seed S]\n"
             "                 [--epochs N] [--patience N] [--dtype f32|f64] [--data DIR] [--out DIR]\n"
             "                 [--log-interval N] [--quiet] [--profile]\n");
}

static int parse(opts *o, int argc, char **argv) {
  *o = (opts){.device_cuda = -1,
              .seeds = 1,
              .epochs = 1000,
              .patience = 100,
              .log_interval = 50,
              .attention = TG_PROVIDER_AUTO,
              .dtype = TG_F32,
              .data = GAT_DEFAULT_DATA,
              .out = "out_gat"};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int used = 1;
    if (!strcmp(a, "--quiet")) {
      o->quiet = 1, used = 0;
    } else if (!strcmp(a, "--profile")) {
      o->profile = 1, used = 0;
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      exit(0);
    } else if (!v) {
      fprintf(stderr, "train_gat: option %s needs a value\n", a);
      return -1;
    } else if (!strcmp(a, "--device")) {
      if (strcmp(v, "cuda") && strcmp(v, "host")) return fprintf(stderr, "train_gat: --device cuda|host\n"), -1;
      o->device_cuda = !strcmp(v, "cuda");
    } else if (!strcmp(a, "--attention")) {
      if (!strcmp(v, "fused"))
        o->attention = TG_PROVIDER_CUDA_FUSED;
      else if (!strcmp(v, "composed"))
        o->attention = TG_PROVIDER_CUDA_COMPOSED;
      else if (!strcmp(v, "host"))
        o->attention = TG_PROVIDER_HOST;
      else if (!strcmp(v, "auto"))
        o->attention = TG_PROVIDER_AUTO;
      else
        return fprintf(stderr, "train_gat: --attention fused|composed|host|auto\n"), -1;
    } else if (!strcmp(a, "--dtype")) {
      if (strcmp(v, "f32") && strcmp(v, "f64")) return fprintf(stderr, "train_gat: --dtype f32|f64\n"), -1;
      o->dtype = !strcmp(v, "f32") ? TG_F32 : TG_F64;
    } else if (!strcmp(a, "--data")) {
      o->data = v;
    } else if (!strcmp(a, "--out")) {
      o->out = v;
    } else {
      char *end;
      long long x = strtoll(v, &end, 10);
      if (*end || end == v || x < 0 || x > 1000000000)
        return fprintf(stderr, "train_gat: %s: bad number '%s'\n", a, v), -1;
      if (!strcmp(a, "--seeds") && x >= 1)
        o->seeds = (int)x;
      else if (!strcmp(a, "--seed"))
        o->seed = x;
      else if (!strcmp(a, "--epochs") && x >= 1)
        o->epochs = (int)x;
      else if (!strcmp(a, "--patience") && x >= 1)
        o->patience = (int)x;
      else if (!strcmp(a, "--log-interval"))
        o->log_interval = (int)x;
      else
        return fprintf(stderr, "train_gat: unknown option or bad value: %s %s\n", a, v), usage(stderr), -1;
    }
    i += used;
  }
  return 0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

typedef struct curve {
  int n;
  double *train_loss, *val_loss, *val_acc, *test_acc;
} curve;

/* Training loss, validation loss (left axis) and accuracies (right axis, 0..1) per epoch. */
static void write_svg(const char *path, const curve *c, const char *title) {
  FILE *f = fopen(path, "w");
  if (!f || c->n < 2) {
    if (f) fclose(f);
    return;
  }
  const double W = 720, H = 360, L = 60, R = 60, T = 30, B = 40;
  double lmax = 0;
  for (int i = 0; i < c->n; i++)
    lmax = fmax(lmax, fmax(c->train_loss[i], c->val_loss[i]));
  lmax = lmax > 0 ? lmax * 1.05 : 1;
  fprintf(f,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
          "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
          W, H);
  fprintf(f, "<text x=\"%.0f\" y=\"18\">%s</text>\n", L, title);
  fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#999\"/>\n", L, T,
          W - L - R, H - T - B);
  const double *ys[4] = {c->train_loss, c->val_loss, c->val_acc, c->test_acc};
  const char *color[4] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd"},
             *name[4] = {"train loss", "val loss", "val acc", "test acc"};
  for (int s = 0; s < 4; s++) {
    double top = s < 2 ? lmax : 1.0;
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", color[s]);
    for (int i = 0; i < c->n; i++)
      fprintf(f, "%.1f,%.1f ", L + (W - L - R) * i / (c->n - 1), T + (H - T - B) * (1 - ys[s][i] / top));
    fprintf(f, "\"/>\n<text x=\"%.0f\" y=\"%.0f\" fill=\"%s\">%s</text>\n", L + 10 + 110 * s, H - 12, color[s],
            name[s]);
  }
  fprintf(f, "<text x=\"5\" y=\"%.0f\">loss %.2f</text><text x=\"%.0f\" y=\"%.0f\">acc 1.0</text>\n", T + 10, lmax,
          W - R + 5, T + 10);
  fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">epoch %d</text>\n</svg>\n", W - R - 60, H - 25, c->n);
  fclose(f);
}

int main(int argc, char **argv) {
  opts o;
  if (parse(&o, argc, argv)) return 2;
  char err[GAT_ERR];
  gat_data d;
  if (gat_data_load(&d, o.data, err)) return fprintf(stderr, "train_gat: %s\n", err), 1;
  tg_runtime *rt = NULL;
  if (o.device_cuda != 0) {
    if (tg_runtime_create_cuda(0, &rt)) {
      if (o.device_cuda == 1) return fprintf(stderr, "train_gat: no CUDA device: %s\n", tg_last_error()), 1;
      rt = NULL;
    }
  }
  if (!rt && tg_runtime_create_host(&rt)) return fprintf(stderr, "train_gat: %s\n", tg_last_error()), 1;
  int cuda = tg_runtime_has_device(rt);
  if (mkdir(o.out, 0755) && errno != EEXIST) return fprintf(stderr, "train_gat: cannot create '%s'\n", o.out), 1;
  printf("GAT on Cora: %lld nodes, %lld features, %lld edges with self loops; train/val/test %lld/%lld/%lld; "
         "runtime %s, attention %s, %s\n",
         (long long)d.n, (long long)d.n_feat, (long long)d.adj_ptr[d.n], (long long)d.count[GAT_TRAIN],
         (long long)d.count[GAT_VAL], (long long)d.count[GAT_TEST], cuda ? "cuda" : "host",
         tg_provider_name(o.attention), tg_dtype_name(o.dtype));

  double *acc = calloc((size_t)o.seeds, sizeof *acc);
  size_t tcap = (size_t)o.seeds * (size_t)o.epochs, tn = 0;
  double *times = malloc(tcap * sizeof *times);
  curve c = {0, malloc((size_t)o.epochs * sizeof(double)), malloc((size_t)o.epochs * sizeof(double)),
             malloc((size_t)o.epochs * sizeof(double)), malloc((size_t)o.epochs * sizeof(double))};
  int rc = 0;
  double t_all = now_s();
  long long epochs_total = 0;
  for (int s = 0; s < o.seeds && !rc; s++) {
    long long seed = o.seed + s;
    gat_config cfg;
    gat_config_default(&cfg);
    cfg.attention = o.attention;
    cfg.dtype = o.dtype;
    cfg.seed = (uint64_t)seed;
    cfg.profile = o.profile;
    gat_model m;
    if (gat_model_init(&m, rt, &cfg, &d, err)) {
      fprintf(stderr, "train_gat: %s\n", err);
      rc = 1;
      break;
    }
    char path[4096], ckpt[4096];
    snprintf(path, sizeof path, "%s/gat_seed%lld.csv", o.out, seed);
    snprintf(ckpt, sizeof ckpt, "%s/gat_seed%lld.ckpt", o.out, seed);
    FILE *csv = fopen(path, "w");
    if (csv) fprintf(csv, "epoch,train_loss,val_loss,val_acc,test_acc,step_ms\n");
    double best_val = INFINITY, best_test = 0;
    int best_epoch = 0, since = 0, e = 0;
    c.n = 0;
    for (e = 1; e <= o.epochs; e++) {
      double tl, l3[3], a3[3];
      tg_runtime_sync(rt);
      double t0 = now_s();
      if (gat_train_step(&m, &tl, err)) {
        fprintf(stderr, "train_gat: seed %lld epoch %d: %s\n", seed, e, err);
        rc = 1;
        break;
      }
      tg_runtime_sync(rt);
      double dt = now_s() - t0;
      if (e > 10 && tn < tcap) times[tn++] = dt;
      if (gat_evaluate(&m, l3, a3, err)) {
        fprintf(stderr, "train_gat: seed %lld epoch %d: %s\n", seed, e, err);
        rc = 1;
        break;
      }
      c.train_loss[c.n] = tl, c.val_loss[c.n] = l3[GAT_VAL], c.val_acc[c.n] = a3[GAT_VAL],
      c.test_acc[c.n] = a3[GAT_TEST], c.n++;
      if (csv) fprintf(csv, "%d,%.6f,%.6f,%.4f,%.4f,%.4f\n", e, tl, l3[GAT_VAL], a3[GAT_VAL], a3[GAT_TEST], 1e3 * dt);
      if (l3[GAT_VAL] < best_val) {
        best_val = l3[GAT_VAL], best_test = a3[GAT_TEST], best_epoch = e, since = 0;
        if (tg_tape_save(m.tape, ckpt)) fprintf(stderr, "train_gat: checkpoint: %s\n", tg_tape_error(m.tape));
      } else if (++since >= o.patience) {
        break;
      }
      if (!o.quiet && o.log_interval > 0 && e % o.log_interval == 0)
        printf("  seed %lld epoch %4d  train loss %.4f  val loss %.4f  val acc %.3f  test acc %.3f  %.3f ms/step\n",
               seed, e, tl, l3[GAT_VAL], a3[GAT_VAL], a3[GAT_TEST], 1e3 * dt);
    }
    if (csv) fclose(csv);
    if (o.profile && m.prof_steps) {
      const double k = 1e3 / (double)m.prof_steps;
      printf("  profile (device drained between phases): forward %.3f ms, backward %.3f ms, adam %.3f ms per step\n",
             k * m.phase_s[0], k * m.phase_s[1], k * m.phase_s[2]);
      printf("  profile (host: until the phase's calls returned): forward %.3f ms, backward %.3f ms, adam %.3f ms; "
             "%zu nodes per step; mean over %llu steps after the first %d\n",
             k * m.host_s[0], k * m.host_s[1], k * m.host_s[2], m.nodes, (unsigned long long)m.prof_steps,
             GAT_PROFILE_WARMUP);
    }
    if (rc) {
      gat_model_free(&m);
      break;
    }
    int ran = e > o.epochs ? o.epochs : e;
    epochs_total += ran;
    acc[s] = best_test;
    printf("seed %lld: %d epochs, best val loss %.4f at epoch %d, test accuracy %.2f %%\n", seed, ran, best_val,
           best_epoch, 100 * best_test);
    fflush(stdout);
    snprintf(path, sizeof path, "%s/gat_seed%lld.svg", o.out, seed);
    char title[256];
    snprintf(title, sizeof title, "tiga GAT on Cora, seed %lld (%s, attention %s)", seed, cuda ? "cuda" : "host",
             tg_provider_name(o.attention));
    write_svg(path, &c, title);
    gat_model_free(&m);
  }
  if (!rc) {
    double mean = 0, var = 0;
    for (int s = 0; s < o.seeds; s++)
      mean += acc[s] / o.seeds;
    for (int s = 0; s < o.seeds; s++)
      var += (acc[s] - mean) * (acc[s] - mean) / (o.seeds > 1 ? o.seeds - 1 : 1);
    printf("test accuracy over %d seed(s):", o.seeds);
    for (int s = 0; s < o.seeds; s++)
      printf(" %.1f", 100 * acc[s]);
    printf("\nmean %.2f %% +- %.2f (sample std), %.1f epochs on average, %.1f s in all\n", 100 * mean, 100 * sqrt(var),
           (double)epochs_total / o.seeds, now_s() - t_all);
    if (tn) {
      qsort(times, tn, sizeof *times, cmp_double);
      printf("training step: median %.3f ms over %zu steps (forward, backward, Adam; synchronised)\n",
             1e3 * times[tn / 2], tn);
    }
  }
  free(acc), free(times), free(c.train_loss), free(c.val_loss), free(c.val_acc), free(c.test_acc);
  tg_runtime_destroy(rt);
  gat_data_free(&d);
  return rc;
}
