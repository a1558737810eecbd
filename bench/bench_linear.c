/* bench_linear: tg_linear forward + backward on the CUDA provider for transformer shapes.
 *
 * One step = y = linear(x, W, b); loss = sum(y); backward; tg_tape_zero_grad; tg_tape_reset. x, W
 * and b are parameters (x as a parameter so that no host-to-device copy of x happens per step; it
 * requires grad like an activation would). zero_grad each step is what PyTorch's
 * zero_grad(set_to_none=True) does in linear_torch.py: every gradient is new in the next backward,
 * so the GEMMs overwrite it (beta = 0). --accumulate skips zero_grad: gradients add up across steps
 * (beta = 1), as with gradient accumulation (linear_torch.py --accumulate keeps .grad likewise).
 * Timing: tg_runtime_sync + clock_gettime around `iters` steps after warm-up, median over `repeats`.
 * Nothing in a step waits for the device (reset does not sync, the loss seed is not copied), so the
 * host runs ahead and launch overhead hides behind the GEMMs, as in PyTorch.
 *   ms       median milliseconds per step
 *   tflops   6 * rows * in * out / step time (forward 2, backward 4 flop per multiply-add)
 *   loss_ms  the same step with the linear taken out (sum over a [rows, out] parameter, its
 *            backward and the reset): the part of `ms` that is not the linear
 *   tflops_net  6 * rows * in * out / (ms - loss_ms)
 * Output, one line per case:
 *   linear dtype=bf16 rows=16384 in=768 out=3072 ms=.. tflops=.. loss_ms=.. tflops_net=.. impl=tiga
 * Usage: bench_linear [--dtype f32|bf16|f16|all] [--rows N] [--iters N] [--repeats N] [--accumulate]
 * A/B switches (environment): TIGA_LINEAR_LT=0 (cublasGemmEx + bias kernels instead of cuBLASLt),
 * TIGA_LINEAR_BGRAD=0 (bias gradient by the column-sum kernel instead of the Lt epilogue). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tiga.h"

typedef struct {
  int64_t in, out;
} proj_shape;

static const proj_shape SHAPES[] = {{768, 3072}, {3072, 768}, {384, 1152}, {1024, 4096}};

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static void die(const char *what, const char *msg) {
  fprintf(stderr, "bench_linear: %s: %s\n", what, msg);
  exit(1);
}

/* f32 -> bf16 / f16 bits, round to nearest even (inputs are small normals: no inf/nan/subnormal care). */
static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}
static uint16_t to_f16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u, e = (u >> 23) & 0xff, m = u & 0x7fffffu;
  if (e < 103) return (uint16_t)sign; /* below half precision: flush to zero */
  if (e < 113) {                      /* subnormal half */
    m |= 0x800000u;
    uint32_t shift = 126 - e, half = m >> shift, rest = m & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t h = ((e - 112) << 10) | (m >> 13), rest = m & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

/* A parameter of N(0, std) values in dtype dt. */
static tg_id param(tg_tape *t, tg_dtype dt, int ndim, const int64_t *shape, double std, uint64_t seed) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= shape[i];
  float *f = malloc((size_t)n * sizeof *f);
  uint16_t *h = dt == TG_F32 ? NULL : malloc((size_t)n * sizeof *h);
  if (!f || (dt != TG_F32 && !h)) die("malloc", "out of host memory");
  tg_init_options init;
  tg_init_options_init(&init);
  init.kind = TG_INIT_NORMAL, init.a = 0.0, init.b = std, init.seed = seed;
  if (tg_init_fill(&init, TG_F32, ndim, shape, f, (size_t)n * sizeof *f)) die("tg_init_fill", tg_last_error());
  if (h)
    for (int64_t i = 0; i < n; i++)
      h[i] = dt == TG_BF16 ? to_bf16(f[i]) : to_f16(f[i]);
  tg_id id = TG_NO_ID;
  if (tg_tape_parameter(t, dt, ndim, shape, h ? (const void *)h : (const void *)f, (size_t)n * tg_dtype_size(dt), 0,
                        &id))
    die("tg_tape_parameter", tg_tape_error(t));
  free(f);
  free(h);
  return id;
}

static int g_accumulate; /* --accumulate: no zero_grad between steps */

/* One training-style step; w == TG_NO_ID gives the baseline (sum of x only). */
static void step(tg_tape *t, tg_id x, tg_id w, tg_id b) {
  tg_id y = w == TG_NO_ID ? x : tg_linear(t, x, w, b);
  tg_id loss = tg_sum(t, y);
  if (tg_tape_status(t)) die("forward", tg_tape_error(t));
  if (tg_tape_backward(t, loss)) die("tg_tape_backward", tg_tape_error(t));
  if (!g_accumulate && tg_tape_zero_grad(t)) die("tg_tape_zero_grad", tg_tape_error(t));
  if (tg_tape_reset(t)) die("tg_tape_reset", tg_tape_error(t));
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median over `repeats` of the mean step time of `iters` steps, after 3 warm-up steps. */
static double time_steps(tg_runtime *rt, tg_tape *t, tg_id x, tg_id w, tg_id b, int iters, int repeats) {
  for (int i = 0; i < 3; i++)
    step(t, x, w, b);
  double *ms = malloc((size_t)repeats * sizeof *ms);
  for (int r = 0; r < repeats; r++) {
    if (tg_runtime_sync(rt)) die("tg_runtime_sync", tg_runtime_error(rt));
    double t0 = now_ms();
    for (int i = 0; i < iters; i++)
      step(t, x, w, b);
    if (tg_runtime_sync(rt)) die("tg_runtime_sync", tg_runtime_error(rt));
    ms[r] = (now_ms() - t0) / iters;
  }
  qsort(ms, (size_t)repeats, sizeof *ms, cmp_double);
  double med = ms[repeats / 2];
  free(ms);
  return med;
}

static void run_case(tg_runtime *rt, tg_dtype dt, int64_t rows, proj_shape s, int iters, int repeats) {
  tg_tape *t = NULL;
  if (tg_tape_create(rt, &t)) die("tg_tape_create", tg_last_error());
  int64_t xs[2] = {rows, s.in}, ws[2] = {s.in, s.out}, bs[1] = {s.out}, ys[2] = {rows, s.out};
  tg_id x = param(t, dt, 2, xs, 1.0, 1), w = param(t, dt, 2, ws, 0.02, 2), b = param(t, dt, 1, bs, 0.02, 3);
  double ms = time_steps(rt, t, x, w, b, iters, repeats);
  tg_tape_destroy(t);
  /* baseline: the same loss, backward and reset without the linear */
  if (tg_tape_create(rt, &t)) die("tg_tape_create", tg_last_error());
  tg_id y = param(t, dt, 2, ys, 1.0, 4);
  double loss_ms = time_steps(rt, t, y, TG_NO_ID, TG_NO_ID, iters, repeats);
  tg_tape_destroy(t);
  double flop = 6.0 * (double)rows * (double)s.in * (double)s.out;
  double net = ms - loss_ms > 0 ? ms - loss_ms : ms;
  printf("linear dtype=%s rows=%lld in=%lld out=%lld ms=%.4f tflops=%.2f loss_ms=%.4f tflops_net=%.2f impl=tiga\n",
         tg_dtype_name(dt), (long long)rows, (long long)s.in, (long long)s.out, ms, flop / (ms * 1e-3) / 1e12, loss_ms,
         flop / (net * 1e-3) / 1e12);
  fflush(stdout);
}

int main(int argc, char **argv) {
  const char *dtype = "all";
  int64_t rows = 16384;
  int iters = 20, repeats = 7;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--dtype") && i + 1 < argc)
      dtype = argv[++i];
    else if (!strcmp(argv[i], "--rows") && i + 1 < argc)
      rows = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
      iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--repeats") && i + 1 < argc)
      repeats = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--accumulate"))
      g_accumulate = 1;
    else {
      fprintf(stderr, "usage: %s [--dtype f32|bf16|f16|all] [--rows N] [--iters N] [--repeats N] [--accumulate]\n",
              argv[0]);
      return 2;
    }
  }
  if (rows < 1 || iters < 1 || repeats < 1) die("arguments", "rows, iters and repeats must be >= 1");
  tg_runtime *rt = NULL;
  if (tg_runtime_create_cuda(0, &rt)) die("tg_runtime_create_cuda", tg_last_error());
  tg_dtype dts[3] = {TG_F32, TG_BF16, TG_F16};
  int n_dt = 0;
  tg_dtype run[3];
  for (int k = 0; k < 3; k++)
    if ((!strcmp(dtype, "all") && dts[k] != TG_F16) || !strcmp(dtype, tg_dtype_name(dts[k]))) run[n_dt++] = dts[k];
  if (!n_dt) die("--dtype", "expected f32, bf16, f16 or all");
  for (int k = 0; k < n_dt; k++)
    for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++)
      run_case(rt, run[k], rows, SHAPES[s], iters, repeats);
  tg_runtime_destroy(rt);
  return 0;
}
