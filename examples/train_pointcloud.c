/*
 * train_pointcloud — two edge-MLP attention layers (tg_edge_attention) regress a neighbourhood
 * quantity of points in the unit cube (the models, data and target: examples/pointcloud.h; --model
 * wide, the default, widens the features to --hidden by value and skip projections; --model seed is
 * seed 000's layer, the features themselves averaged by the learned softmax).
 *
 *   train_pointcloud [--model wide|seed] [--n 512] [--degree 7] [--device cuda|host]
 *                    [--attention fused|composed|host|auto] [--dtype f32|bf16] [--steps 200]
 *                    [--lr 5e-3 (wide) | 2e-2 (seed)] [--seed 0] [--hidden 64] [--heads 4 (wide) | 1 (seed)]
 *                    [--freeze-score] [--recompute] [--csv PATH] [--svg PATH] [--log-interval 20] [--quiet]
 *                    [--profile]
 *                    [--expect-drop F] [--check-freeze-ratio R]
 *
 * Prints a progress line every --log-interval steps and a summary: the final loss (mean of the last
 * 10 steps' losses), the norms of the last step's position and feature gradients (the run fails when
 * either is zero or not finite: gradients must reach the geometry and the features), and the
 * median step time. --csv writes step,loss,step_ms; --svg the loss curve (log scale).
 * --recompute: the attention layers take tg_graph_attention_options.recompute_products (CUDA_FUSED:
 * their per-node products are made again in the backward instead of kept on the tape — less memory,
 * two small products more per layer).
 * --expect-drop F: fail (exit 1) unless final loss <= F * first loss.
 * --check-freeze-ratio R: train twice from the same initial weights, with the score network trained
 * and then frozen (--freeze-score), and fail unless frozen final loss >= R * trained final loss.
 * Timing, as train_gat: the median over the steps after the first 10 (all steps when there are
 * fewer than 20) of the wall time of one step (forward, backward, Adam, the loss read back; the data
 * stay resident, pointcloud.h), the device synchronised at its start and end. Peak (the graph
 * issue's rule, as bench_graph_ops): after training, a second model from the same configuration on
 * a fresh tape runs one step; its peak is tg_runtime_memory's peak during that step minus the bytes
 * held before it (the model's parameters and resident data; the graph's device form, built by the
 * first model, is not counted, as pointcloud_torch.py does not count its edge_index). A fresh tape,
 * because a tape keeps its step arena across tg_tape_reset: the bytes held before a later step
 * already include the step's working memory. The step's Adam state (first step) is counted.
 * Exit: 0, 1 (failure or a failed check), 2 (usage).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pointcloud.h"

typedef struct opts {
  pc_config cfg;
  int device_cuda, steps, log_interval, quiet;
  double expect_drop, freeze_ratio;
  const char *csv, *svg;
} opts;

static void usage(FILE *f) {
  fprintf(f, "usage: train_pointcloud [--model wide|seed] [--n N] [--degree D] [--device cuda|host]\n"
             "                        [--attention fused|composed|host|auto] [--dtype f32|bf16] [--steps N] [--lr X]\n"
             "                        [--seed S] [--hidden N] [--heads N]\n"
             "                        [--freeze-score] [--recompute] [--csv PATH] [--svg PATH] [--log-interval N]\n"
             "                        [--quiet]"
             " [--profile] [--expect-drop F] [--check-freeze-ratio R]\n");
}

static int bad(const char *a, const char *v) {
  fprintf(stderr, "train_pointcloud: %s: bad value '%s'\n", a, v);
  return -1;
}

static int parse(opts *o, int argc, char **argv) {
  memset(o, 0, sizeof *o);
  pc_config_default(&o->cfg);
  o->device_cuda = -1, o->steps = 200, o->log_interval = 20;
  int heads_set = 0, lr_set = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int used = 1;
    if (!strcmp(a, "--quiet")) {
      o->quiet = 1, used = 0;
    } else if (!strcmp(a, "--profile")) {
      o->cfg.profile = 1, used = 0;
    } else if (!strcmp(a, "--freeze-score")) {
      o->cfg.freeze_score = 1, used = 0;
    } else if (!strcmp(a, "--recompute")) {
      o->cfg.recompute = 1, used = 0;
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      exit(0);
    } else if (!v) {
      fprintf(stderr, "train_pointcloud: option %s needs a value\n", a);
      return -1;
    } else if (!strcmp(a, "--device")) {
      if (strcmp(v, "cuda") && strcmp(v, "host")) return bad(a, v);
      o->device_cuda = !strcmp(v, "cuda");
    } else if (!strcmp(a, "--attention")) {
      if (!strcmp(v, "fused"))
        o->cfg.attention = TG_PROVIDER_CUDA_FUSED;
      else if (!strcmp(v, "composed"))
        o->cfg.attention = TG_PROVIDER_CUDA_COMPOSED;
      else if (!strcmp(v, "host"))
        o->cfg.attention = TG_PROVIDER_HOST;
      else if (!strcmp(v, "auto"))
        o->cfg.attention = TG_PROVIDER_AUTO;
      else
        return bad(a, v);
    } else if (!strcmp(a, "--model")) {
      if (strcmp(v, "seed") && strcmp(v, "wide")) return bad(a, v);
      o->cfg.model = !strcmp(v, "seed") ? PC_MODEL_SEED : PC_MODEL_WIDE;
    } else if (!strcmp(a, "--dtype")) {
      if (strcmp(v, "f32") && strcmp(v, "bf16")) return bad(a, v);
      o->cfg.dtype = !strcmp(v, "f32") ? TG_F32 : TG_BF16;
    } else if (!strcmp(a, "--csv")) {
      o->csv = v;
    } else if (!strcmp(a, "--svg")) {
      o->svg = v;
    } else if (!strcmp(a, "--lr") || !strcmp(a, "--degree") || !strcmp(a, "--expect-drop") ||
               !strcmp(a, "--check-freeze-ratio")) {
      char *end;
      double x = strtod(v, &end);
      if (*end || end == v || !(x > 0) || !isfinite(x)) return bad(a, v);
      if (!strcmp(a, "--lr"))
        o->cfg.lr = x, lr_set = 1;
      else if (!strcmp(a, "--degree"))
        o->cfg.degree = x;
      else if (!strcmp(a, "--expect-drop"))
        o->expect_drop = x;
      else
        o->freeze_ratio = x;
    } else {
      char *end;
      long long x = strtoll(v, &end, 10);
      if (*end || end == v || x < 0 || x > 1000000000) return bad(a, v);
      if (!strcmp(a, "--n") && x >= 2)
        o->cfg.n = x;
      else if (!strcmp(a, "--steps") && x >= 1)
        o->steps = (int)x;
      else if (!strcmp(a, "--seed"))
        o->cfg.seed = (uint64_t)x;
      else if (!strcmp(a, "--hidden") && x >= 1)
        o->cfg.hidden = (int)x;
      else if (!strcmp(a, "--heads") && x >= 1)
        o->cfg.heads = (int)x, heads_set = 1;
      else if (!strcmp(a, "--log-interval"))
        o->log_interval = (int)x;
      else
        return fprintf(stderr, "train_pointcloud: unknown option or bad value: %s %s\n", a, v), usage(stderr), -1;
    }
    i += used;
  }
  if (!heads_set) o->cfg.heads = o->cfg.model == PC_MODEL_WIDE ? 4 : 1;
  if (!lr_set) o->cfg.lr = o->cfg.model == PC_MODEL_WIDE ? 5e-3 : 2e-2;
  if (o->cfg.model == PC_MODEL_WIDE && o->cfg.hidden % o->cfg.heads)
    return fprintf(stderr, "train_pointcloud: --heads must divide --hidden\n"), -1;
  if (o->cfg.model == PC_MODEL_SEED && o->cfg.f_in % o->cfg.heads)
    return fprintf(stderr, "train_pointcloud: --heads must divide the features (%d) in the seed model\n", o->cfg.f_in),
           -1;
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

/* Loss per step, log-scaled y axis. */
static void write_svg(const char *path, const double *loss, int n, const char *title) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "train_pointcloud: cannot write '%s'\n", path);
    return;
  }
  const double W = 720, H = 360, L = 70, R = 20, T = 30, B = 40;
  double lo = INFINITY, hi = -INFINITY;
  for (int i = 0; i < n; i++)
    if (loss[i] > 0) lo = fmin(lo, log10(loss[i])), hi = fmax(hi, log10(loss[i]));
  if (!(hi > lo)) hi = lo + 1;
  fprintf(f,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
          "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
          W, H);
  fprintf(f, "<text x=\"%.0f\" y=\"18\">%s</text>\n", L, title);
  fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#999\"/>\n", L, T,
          W - L - R, H - T - B);
  fprintf(f, "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"");
  for (int i = 0; i < n; i++)
    if (loss[i] > 0)
      fprintf(f, "%.1f,%.1f ", L + (W - L - R) * i / (n > 1 ? n - 1 : 1),
              T + (H - T - B) * (hi - log10(loss[i])) / (hi - lo));
  fprintf(f, "\"/>\n<text x=\"5\" y=\"%.0f\">%.3g</text><text x=\"5\" y=\"%.0f\">%.3g</text>\n", T + 10, pow(10, hi),
          H - B, pow(10, lo));
  fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">training loss (MSE), log scale; step %d</text>\n</svg>\n", L + 10, H - 12, n);
  fclose(f);
}

typedef struct result {
  double first, final, pos_grad, x_grad, step_ms, peak_mib;
  int timed;
} result;

/* One training run of o->cfg (freeze as given); fills r. */
static int train(const opts *o, tg_runtime *rt, const pc_data *d, int freeze, result *r) {
  char err[PC_ERR];
  pc_config cfg = o->cfg;
  cfg.freeze_score = freeze;
  pc_model m;
  if (pc_model_init(&m, rt, &cfg, d, err)) return fprintf(stderr, "train_pointcloud: %s\n", err), 1;
  double *loss = malloc((size_t)o->steps * sizeof *loss), *ts = malloc((size_t)o->steps * sizeof *ts);
  FILE *csv = o->csv && !freeze == !o->cfg.freeze_score ? fopen(o->csv, "w") : NULL;
  if (csv) fprintf(csv, "step,loss,step_ms\n");
  int rc = 0, nt = 0, skip = o->steps >= 20 ? 10 : 0;
  for (int s = 0; s < o->steps; s++) {
    tg_runtime_sync(rt);
    double t0 = now_s();
    if (pc_train_step(&m, &loss[s], err)) {
      fprintf(stderr, "train_pointcloud: step %d: %s\n", s, err);
      rc = 1;
      break;
    }
    tg_runtime_sync(rt);
    double dt = now_s() - t0;
    if (s >= skip) ts[nt++] = dt;
    if (csv) fprintf(csv, "%d,%.6g,%.4f\n", s, loss[s], 1e3 * dt);
    if (!isfinite(loss[s])) {
      fprintf(stderr, "train_pointcloud: FAIL step %d: loss is %g\n", s, loss[s]);
      rc = 1;
      break;
    }
    if (!o->quiet && o->log_interval > 0 && (s % o->log_interval == 0 || s == o->steps - 1))
      printf("  %sstep %5d  loss %.6f  %.3f ms/step\n", freeze ? "[frozen score] " : "", s, loss[s], 1e3 * dt);
  }
  if (csv) fclose(csv);
  if (!rc) {
    int k = o->steps < 10 ? o->steps : 10;
    r->first = loss[0], r->final = 0;
    for (int s = o->steps - k; s < o->steps; s++)
      r->final += loss[s] / k;
    qsort(ts, (size_t)nt, sizeof *ts, cmp_double);
    r->step_ms = nt ? 1e3 * ts[nt / 2] : 0, r->timed = nt;
    if (pc_input_grad_norms(&m, &r->pos_grad, &r->x_grad, err)) {
      fprintf(stderr, "train_pointcloud: %s\n", err);
      rc = 1;
    } else if (!(r->pos_grad > 0) || !isfinite(r->pos_grad) || !(r->x_grad > 0) || !isfinite(r->x_grad)) {
      fprintf(stderr, "train_pointcloud: FAIL gradient norms: positions %g, features %g (expected finite, > 0)\n",
              r->pos_grad, r->x_grad);
      rc = 1;
    }
    /* peak of a fresh model's first step (header) */
    pc_model m2;
    size_t before = 0, peak = 0;
    double l2;
    if (!rc && pc_model_init(&m2, rt, &cfg, d, err) == 0) {
      tg_runtime_sync(rt);
      tg_runtime_memory(rt, &before, NULL), tg_runtime_reset_peak(rt);
      if (pc_train_step(&m2, &l2, err)) fprintf(stderr, "train_pointcloud: peak step: %s\n", err), rc = 1;
      tg_runtime_sync(rt);
      tg_runtime_memory(rt, NULL, &peak);
      r->peak_mib = ((double)peak - (double)before) / 1048576.0;
      pc_model_free(&m2);
    } else if (!rc) {
      fprintf(stderr, "train_pointcloud: peak model: %s\n", err), rc = 1;
    }
    if (o->cfg.profile && m.steps)
      printf("  profile (device drained between phases): forward %.3f ms, backward %.3f ms, adam %.3f ms per step\n",
             1e3 * m.phase_s[0] / (double)m.steps, 1e3 * m.phase_s[1] / (double)m.steps,
             1e3 * m.phase_s[2] / (double)m.steps);
  }
  if (!rc && o->svg && !freeze == !o->cfg.freeze_score) {
    char title[256];
    snprintf(title, sizeof title, "tiga point cloud, N %lld, %s, attention %s, %s%s", (long long)d->n,
             tg_runtime_has_device(rt) ? "cuda" : "host", tg_provider_name(o->cfg.attention),
             tg_dtype_name(o->cfg.dtype), freeze ? ", score frozen" : "");
    write_svg(o->svg, loss, o->steps, title);
  }
  free(loss), free(ts);
  pc_model_free(&m);
  return rc;
}

int main(int argc, char **argv) {
  opts o;
  if (parse(&o, argc, argv)) return 2;
  tg_runtime *rt = NULL;
  if (o.device_cuda != 0 && tg_runtime_create_cuda(0, &rt)) {
    if (o.device_cuda == 1) return fprintf(stderr, "train_pointcloud: no CUDA device: %s\n", tg_last_error()), 1;
    rt = NULL;
  }
  if (!rt && tg_runtime_create_host(&rt)) return fprintf(stderr, "train_pointcloud: %s\n", tg_last_error()), 1;
  const int cuda = tg_runtime_has_device(rt);
  if (!cuda && o.cfg.dtype != TG_F32) {
    fprintf(stderr, "train_pointcloud: --dtype bf16 needs a CUDA runtime\n");
    tg_runtime_destroy(rt);
    return 2;
  }
  char err[PC_ERR];
  pc_data d;
  double t0 = now_s();
  if (pc_data_init(&d, rt, &o.cfg, err)) {
    fprintf(stderr, "train_pointcloud: %s\n", err);
    tg_runtime_destroy(rt);
    return 1;
  }
  printf("point cloud: %lld points, cutoff %.5f (expected degree %.1f), %lld edges (mean degree %.2f), "
         "graph and target in %.2f s\n",
         (long long)d.n, d.cutoff, o.cfg.degree, (long long)d.edges, (double)d.edges / (double)d.n, now_s() - t0);
  printf("model: %s, 2 edge-MLP attention layers, f_in %d, hidden %d, heads %d; runtime %s, attention %s, %s; "
         "Adam lr %g, %d steps%s%s\n",
         o.cfg.model == PC_MODEL_SEED ? "seed" : "wide", o.cfg.f_in, o.cfg.hidden, o.cfg.heads, cuda ? "cuda" : "host",
         tg_provider_name(o.cfg.attention), tg_dtype_name(o.cfg.dtype), o.cfg.lr, o.steps,
         o.cfg.freeze_score ? ", score network frozen" : "", o.cfg.recompute ? ", products recomputed" : "");
  result r = {0}, rf = {0};
  int rc = train(&o, rt, &d, o.cfg.freeze_score, &r);
  if (!rc) {
    printf("loss: first %.6f, final %.6f (mean of the last 10 steps; floor 0)%s\n", r.first, r.final,
           o.cfg.freeze_score ? " [score frozen]" : "");
    printf("gradient norms (last step): positions %.4g, features %.4g\n", r.pos_grad, r.x_grad);
    if (r.timed)
      printf("training step: median %.3f ms over %d steps (forward, backward, Adam; synchronised); peak %.1f MiB "
             "(a fresh model's first step, above the memory held before it)\n",
             r.step_ms, r.timed, r.peak_mib);
    if (o.expect_drop > 0) {
      int ok = r.final <= o.expect_drop * r.first;
      printf("%s expect-drop: final %.6f %s %g x first %.6f\n", ok ? "ok" : "FAIL", r.final, ok ? "<=" : ">",
             o.expect_drop, r.first);
      rc = !ok;
    }
  }
  if (!rc && o.freeze_ratio > 0) {
    rc = train(&o, rt, &d, !o.cfg.freeze_score, &rf);
    if (!rc) {
      const result *tr = o.cfg.freeze_score ? &rf : &r, *fr = o.cfg.freeze_score ? &r : &rf;
      double ratio = fr->final / tr->final;
      int ok = ratio >= o.freeze_ratio;
      printf("%s freeze ratio: frozen score %.6f / trained %.6f = %.2f (need >= %g)\n", ok ? "ok" : "FAIL", fr->final,
             tr->final, ratio, o.freeze_ratio);
      rc = !ok;
    }
  }
  pc_data_free(&d);
  tg_runtime_destroy(rt);
  return rc;
}
