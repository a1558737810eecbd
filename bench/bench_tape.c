/* bench_tape: per-node overhead of the tape on tiny values.
 *
 * The tape: x, a 4-element f32 parameter; y = x; then 999 nodes alternating y = scale(y, 0.999)
 * and y = add(y, x); then loss = sum(y): 1000 nodes. Measured per provider (HOST always, CUDA
 * when a device can be opened):
 *   fwd_us    recording and running the 1000 nodes (+ a device sync), per node
 *   step_us   forward + tg_tape_backward + tg_tape_reset, per node
 * Median over repeats of the mean over iters steps. Output, one line per provider:
 *   tape provider=host nodes=1000 fwd_us=.. step_us=..
 * Usage: bench_tape [--iters N] [--repeats N] */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tiga.h"

#define NODES 1000

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static void die(const char *what, const char *msg) {
  fprintf(stderr, "bench_tape: %s: %s\n", what, msg);
  exit(1);
}

static tg_id forward(tg_tape *t, tg_id x) {
  tg_id y = x;
  for (int i = 0; i < NODES - 1; i++)
    y = (i & 1) ? tg_add(t, y, x) : tg_scale(t, y, 0.999);
  tg_id loss = tg_sum(t, y);
  if (tg_tape_status(t)) die("forward", tg_tape_error(t));
  return loss;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return v[n / 2];
}

static void run(tg_runtime *rt, tg_provider prov, int iters, int repeats) {
  tg_tape *t = NULL;
  if (tg_tape_create(rt, &t)) die("tg_tape_create", tg_last_error());
  tg_tape_set_provider(t, prov, NULL);
  float data[4] = {0.1f, 0.2f, 0.3f, 0.4f};
  int64_t shape[1] = {4};
  tg_id x = TG_NO_ID;
  if (tg_tape_parameter(t, TG_F32, 1, shape, data, sizeof data, 0, &x)) die("tg_tape_parameter", tg_tape_error(t));
  double *fwd = malloc((size_t)repeats * sizeof *fwd), *stp = malloc((size_t)repeats * sizeof *stp);
  for (int i = 0; i < 3; i++) { /* warm-up: arena chunks, node array, device pool */
    if (tg_tape_backward(t, forward(t, x))) die("tg_tape_backward", tg_tape_error(t));
    tg_tape_reset(t);
  }
  for (int r = 0; r < repeats; r++) {
    double sum = 0;
    for (int i = 0; i < iters; i++) { /* forward only: the reset stays outside the clock */
      double t0 = now_us();
      forward(t, x);
      if (tg_runtime_sync(rt)) die("tg_runtime_sync", tg_runtime_error(rt));
      sum += now_us() - t0;
      if (tg_tape_reset(t)) die("tg_tape_reset", tg_tape_error(t));
    }
    fwd[r] = sum / iters / NODES;
    double t0 = now_us();
    for (int i = 0; i < iters; i++) {
      if (tg_tape_backward(t, forward(t, x))) die("tg_tape_backward", tg_tape_error(t));
      if (tg_tape_reset(t)) die("tg_tape_reset", tg_tape_error(t));
    }
    if (tg_runtime_sync(rt)) die("tg_runtime_sync", tg_runtime_error(rt));
    stp[r] = (now_us() - t0) / iters / NODES;
  }
  printf("tape provider=%s nodes=%d fwd_us=%.3f step_us=%.3f\n", prov == TG_PROVIDER_HOST ? "host" : "cuda", NODES,
         median(fwd, repeats), median(stp, repeats));
  fflush(stdout);
  free(fwd);
  free(stp);
  tg_tape_destroy(t);
}

int main(int argc, char **argv) {
  int iters = 20, repeats = 7;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--iters") && i + 1 < argc)
      iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--repeats") && i + 1 < argc)
      repeats = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--iters N] [--repeats N]\n", argv[0]);
      return 2;
    }
  }
  if (iters < 1 || repeats < 1) die("arguments", "iters and repeats must be >= 1");
  tg_runtime *rt = NULL;
  if (tg_runtime_create_host(&rt)) die("tg_runtime_create_host", tg_last_error());
  run(rt, TG_PROVIDER_HOST, iters, repeats);
  tg_runtime_destroy(rt);
  rt = NULL;
  if (tg_runtime_create_cuda(0, &rt) == TG_OK) {
    run(rt, TG_PROVIDER_CUDA, iters, repeats);
    tg_runtime_destroy(rt);
  } else {
    fprintf(stderr, "bench_tape: no CUDA provider (%s): host only\n", tg_last_error());
  }
  return 0;
}
