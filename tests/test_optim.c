/* tg_sgd_step, tg_adamw_step, tg_clip_grad_norm: updates against the formulas written out here
 * for small vectors, state across tg_tape_reset, parameters without a gradient, error paths,
 * CUDA against host. */
#include <math.h>
#include <stdlib.h>

#include "support.h"

#define N 4
static const int64_t SN[1] = {N};

/* Gives parameter w[k] the gradient g[k] (after zeroing all gradients): backward of
 * sum_k sum(w[k] * x[k]) with inputs x[k] = g[k] in dtype dt. */
static void set_grads(tg_tape *t, tg_dtype dt, int n, const tg_id *w, double g[][N]) {
  cr_assert_eq(tg_tape_zero_grad(t), TG_OK);
  tg_id loss = TG_NO_ID;
  for (int k = 0; k < n; k++) {
    void *buf = ts_convert(g[k], N, dt);
    tg_id x = ts_input(t, dt, 1, SN, buf, 0);
    free(buf);
    tg_id term = tg_sum(t, tg_mul(t, w[k], x));
    loss = k == 0 ? term : tg_add(t, loss, term);
  }
  cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "backward: %s", tg_tape_error(t));
}

static tg_id param(tg_tape *t, tg_dtype dt, const double *init, unsigned flags) {
  void *buf = ts_convert(init, N, dt);
  tg_id id = TG_NO_ID;
  cr_assert_eq(tg_tape_parameter(t, dt, 1, SN, buf, ts_bytes(dt, 1, SN), flags, &id), TG_OK, "%s", tg_tape_error(t));
  free(buf);
  return id;
}

/* Values as the test sees them after storing in dt. */
static void round_to(double *x, int n, tg_dtype dt) {
  if (dt == TG_F32)
    for (int i = 0; i < n; i++)
      x[i] = (float)x[i];
}

/* ---------------------------------------------------------------- SGD */

/* PyTorch's SGD for one parameter, written independently of host/optim.c. */
static void ref_sgd(double *p, const double *g, double *buf, int *has_buf, const tg_sgd_options *o, double wd) {
  for (int i = 0; i < N; i++) {
    double d = g[i] + wd * p[i];
    if (o->momentum != 0) {
      buf[i] = *has_buf ? o->momentum * buf[i] + (1 - o->dampening) * d : d;
      d = o->nesterov ? d + o->momentum * buf[i] : buf[i];
    }
    p[i] -= o->lr * d;
  }
  *has_buf = 1;
}

static double P0[2][N] = {{0.5, -1.25, 2.0, 0.75}, {-0.3, 0.9, 1.7, -2.2}};
static double GRADS[3][2][N] = {{{0.1, -0.2, 0.3, 0.4}, {1.0, -0.5, 0.25, 2.0}},
                                {{-0.6, 0.2, 0.05, 0.3}, {0.7, 0.1, -0.9, 0.4}},
                                {{0.2, 0.2, -0.4, 1.5}, {-1.1, 0.3, 0.6, -0.2}}};

/* Three steps (with a tape reset between them) of `step` on two parameters, the second one
 * TG_NO_WEIGHT_DECAY, plus a third parameter that never gets a gradient; compares each step
 * with the reference. */
static void run_sgd(tg_dtype dt, const tg_sgd_options *o, double rtol) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  tg_id w[3] = {param(t, dt, P0[0], 0), param(t, dt, P0[1], TG_NO_WEIGHT_DECAY), param(t, dt, P0[0], 0)};
  double p[2][N], buf[2][N] = {{0}}, got[N];
  int has[2] = {0, 0};
  memcpy(p, P0, sizeof p);
  round_to(p[0], N, dt);
  round_to(p[1], N, dt);
  for (int s = 0; s < 3; s++) {
    double g[2][N];
    memcpy(g, GRADS[s], sizeof g);
    round_to(g[0], N, dt);
    round_to(g[1], N, dt);
    set_grads(t, dt, 2, w, g);
    cr_assert_eq(tg_sgd_step(t, o), TG_OK, "sgd: %s", tg_tape_error(t));
    for (int k = 0; k < 2; k++) {
      ref_sgd(p[k], g[k], buf[k], &has[k], o, k == 0 ? o->weight_decay : 0);
      ts_read(t, w[k], got, N);
      TS_EXPECT_CLOSE(got, p[k], N, 1e-300, rtol);
    }
    ts_read(t, w[2], got, N);
    double untouched[N];
    memcpy(untouched, P0[0], sizeof untouched);
    round_to(untouched, N, dt);
    cr_expect_arr_eq(got, untouched, sizeof got, "a parameter without gradient moved");
    cr_assert_eq(tg_tape_reset(t), TG_OK); /* momentum buffers persist across reset */
  }
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(sgd, plain_f64) {
  tg_sgd_options o = {.struct_size = sizeof(tg_sgd_options), .lr = 0.1};
  run_sgd(TG_F64, &o, 1e-14);
}

Test(sgd, momentum_dampening_weight_decay_f64) {
  tg_sgd_options o = {
      .struct_size = sizeof(tg_sgd_options), .lr = 0.05, .momentum = 0.9, .dampening = 0.25, .weight_decay = 0.1};
  run_sgd(TG_F64, &o, 1e-14);
}

Test(sgd, nesterov_f64) {
  tg_sgd_options o = {
      .struct_size = sizeof(tg_sgd_options), .lr = 0.05, .momentum = 0.8, .weight_decay = 0.01, .nesterov = 1};
  run_sgd(TG_F64, &o, 1e-14);
}

Test(sgd, momentum_f32) {
  tg_sgd_options o = {
      .struct_size = sizeof(tg_sgd_options), .lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.1};
  run_sgd(TG_F32, &o, 2e-6);
}

/* ---------------------------------------------------------------- AdamW */

static void ref_adamw(double *p, const double *g, double *m, double *v, int step, const tg_adamw_options *o,
                      double wd) {
  for (int i = 0; i < N; i++) {
    p[i] *= 1 - o->lr * wd;
    m[i] = o->beta1 * m[i] + (1 - o->beta1) * g[i];
    v[i] = o->beta2 * v[i] + (1 - o->beta2) * g[i] * g[i];
    double mhat = m[i] / (1 - pow(o->beta1, step)), vhat = v[i] / (1 - pow(o->beta2, step));
    p[i] -= o->lr * mhat / (sqrt(vhat) + o->eps);
  }
}

static void run_adamw(tg_dtype dt, const tg_adamw_options *o, int steps, double rtol) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  tg_id w[3] = {param(t, dt, P0[0], 0), param(t, dt, P0[1], TG_NO_WEIGHT_DECAY), param(t, dt, P0[1], 0)};
  double p[2][N], m[2][N] = {{0}}, v[2][N] = {{0}}, got[N];
  memcpy(p, P0, sizeof p);
  round_to(p[0], N, dt);
  round_to(p[1], N, dt);
  for (int s = 0; s < steps; s++) {
    double g[2][N];
    memcpy(g, GRADS[s], sizeof g);
    round_to(g[0], N, dt);
    round_to(g[1], N, dt);
    set_grads(t, dt, 2, w, g);
    cr_assert_eq(tg_adamw_step(t, o), TG_OK, "adamw: %s", tg_tape_error(t));
    for (int k = 0; k < 2; k++) {
      ref_adamw(p[k], g[k], m[k], v[k], s + 1, o, k == 0 ? o->weight_decay : 0);
      ts_read(t, w[k], got, N);
      TS_EXPECT_CLOSE(got, p[k], N, 1e-300, rtol);
    }
    double untouched[N];
    memcpy(untouched, P0[1], sizeof untouched);
    round_to(untouched, N, dt);
    ts_read(t, w[2], got, N);
    cr_expect_arr_eq(got, untouched, sizeof got, "a parameter without gradient moved");
    cr_assert_eq(tg_tape_reset(t), TG_OK); /* moments and step counts persist across reset */
  }
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(adamw, two_steps_with_decay_f64) {
  tg_adamw_options o = {.struct_size = sizeof(tg_adamw_options),
                        .lr = 0.1,
                        .beta1 = 0.9,
                        .beta2 = 0.999,
                        .eps = 1e-8,
                        .weight_decay = 0.05};
  run_adamw(TG_F64, &o, 2, 1e-13);
}

Test(adamw, three_steps_without_decay_f64) {
  tg_adamw_options o = {
      .struct_size = sizeof(tg_adamw_options), .lr = 0.01, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0};
  run_adamw(TG_F64, &o, 3, 1e-13);
}

Test(adamw, two_steps_f32) {
  tg_adamw_options o;
  tg_adamw_options_init(&o);
  o.lr = 0.1;
  run_adamw(TG_F32, &o, 2, 1e-6);
}

Test(adamw, defaults_are_pytorchs) {
  tg_adamw_options o;
  tg_adamw_options_init(&o);
  cr_expect_eq(o.lr, 1e-3);
  cr_expect_eq(o.beta1, 0.9);
  cr_expect_eq(o.beta2, 0.999);
  cr_expect_eq(o.eps, 1e-8);
  cr_expect_eq(o.weight_decay, 0.01);
}

/* ---------------------------------------------------------------- Adam (coupled L2) */

/* torch.optim.Adam: g += wd * p, then the Adam update; no decoupled decay. */
static void ref_adam(double *p, const double *g0, double *m, double *v, int step, const tg_adam_options *o, double wd) {
  for (int i = 0; i < N; i++) {
    double g = g0[i] + wd * p[i];
    m[i] = o->beta1 * m[i] + (1 - o->beta1) * g;
    v[i] = o->beta2 * v[i] + (1 - o->beta2) * g * g;
    double mhat = m[i] / (1 - pow(o->beta1, step)), vhat = v[i] / (1 - pow(o->beta2, step));
    p[i] -= o->lr * mhat / (sqrt(vhat) + o->eps);
  }
}

static void run_adam(tg_dtype dt, const tg_adam_options *o, int steps, double rtol) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  tg_id w[2] = {param(t, dt, P0[0], 0), param(t, dt, P0[1], TG_NO_WEIGHT_DECAY)};
  double p[2][N], m[2][N] = {{0}}, v[2][N] = {{0}}, got[N];
  memcpy(p, P0, sizeof p);
  round_to(p[0], N, dt);
  round_to(p[1], N, dt);
  for (int s = 0; s < steps; s++) {
    double g[2][N];
    memcpy(g, GRADS[s], sizeof g);
    round_to(g[0], N, dt);
    round_to(g[1], N, dt);
    set_grads(t, dt, 2, w, g);
    cr_assert_eq(tg_adam_step(t, o), TG_OK, "adam: %s", tg_tape_error(t));
    for (int k = 0; k < 2; k++) {
      ref_adam(p[k], g[k], m[k], v[k], s + 1, o, k == 0 ? o->weight_decay : 0);
      ts_read(t, w[k], got, N);
      TS_EXPECT_CLOSE(got, p[k], N, 1e-300, rtol);
    }
    cr_assert_eq(tg_tape_reset(t), TG_OK);
  }
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(adam, coupled_weight_decay_f64_and_f32) {
  tg_adam_options o;
  tg_adam_options_init(&o);
  cr_expect(o.lr == 1e-3 && o.beta1 == 0.9 && o.beta2 == 0.999 && o.eps == 1e-8 && o.weight_decay == 0,
            "PyTorch's Adam defaults");
  o.lr = 0.005;
  o.weight_decay = 5e-4 * 200; /* large enough that coupled vs decoupled differ clearly */
  run_adam(TG_F64, &o, 2, 1e-13);
  run_adam(TG_F32, &o, 2, 1e-6);
}

Test(adam, differs_from_adamw_and_checks_options) {
  /* with the same numbers, coupled L2 (Adam) and decoupled decay (AdamW) move a parameter differently */
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  tg_id a = param(t, TG_F64, P0[0], 0), b = param(t, TG_F64, P0[0], 0);
  double g[2][N];
  memcpy(g[0], GRADS[0][0], sizeof g[0]);
  memcpy(g[1], GRADS[0][0], sizeof g[1]);
  tg_id both[2] = {a, b};
  set_grads(t, TG_F64, 2, both, g);
  tg_adam_options o;
  tg_adam_options_init(&o);
  o.lr = 0.1;
  o.weight_decay = 0.5;
  cr_assert_eq(tg_adam_step(t, &o), TG_OK, "%s", tg_tape_error(t));
  double pa[N], pb[N];
  ts_read(t, a, pa, N);
  ts_read(t, b, pb, N);
  cr_expect_arr_eq(pa, pb, sizeof pa, "both parameters take the same step");
  double ref[N], m[N] = {0}, v[N] = {0};
  memcpy(ref, P0[0], sizeof ref);
  ref_adam(ref, g[0], m, v, 1, &o, 0.5);
  TS_EXPECT_CLOSE(pa, ref, N, 1e-300, 1e-13);
  TS_EXPECT_STATUS(tg_adam_step(t, NULL), TG_ERR_INVALID_ARGUMENT, t, "tg_adam_step: argument 'opts' is NULL");
  o.beta2 = 1;
  TS_EXPECT_STATUS(tg_adam_step(t, &o), TG_ERR_INVALID_ARGUMENT, t, "tg_adam_step: option 'beta2' is 1");
  tg_adam_options z;
  memset(&z, 0, sizeof z);
  TS_EXPECT_STATUS(tg_adam_step(t, &z), TG_ERR_INVALID_ARGUMENT, t, "argument 'opts' (tg_adam_options)");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* The first AdamW step moves every coordinate by about lr (m_hat / sqrt(v_hat) = sign(g)). */
Test(adamw, first_step_is_lr_times_sign) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  tg_id w = param(t, TG_F64, P0[0], 0);
  double g[1][N] = {{3.0, -1e-3, 200.0, -7.0}}, got[N];
  set_grads(t, TG_F64, 1, &w, g);
  tg_adamw_options o = {.struct_size = sizeof(tg_adamw_options),
                        .lr = 0.01,
                        .beta1 = 0.9,
                        .beta2 = 0.999,
                        .eps = 1e-12,
                        .weight_decay = 0};
  cr_assert_eq(tg_adamw_step(t, &o), TG_OK);
  ts_read(t, w, got, N);
  for (int i = 0; i < N; i++)
    cr_expect(fabs(got[i] - (P0[0][i] - 0.01 * (g[0][i] > 0 ? 1 : -1))) < 1e-9);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* ---------------------------------------------------------------- clip */

Test(clip, norm_reported_and_gradients_scaled) {
  tg_dtype dts[2] = {TG_F64, TG_F32};
  for (int d = 0; d < 2; d++) {
    tg_runtime *rt = ts_host_runtime();
    tg_tape *t = ts_tape(rt);
    tg_id w[3] = {param(t, dts[d], P0[0], 0), param(t, dts[d], P0[1], 0), param(t, dts[d], P0[1], 0)};
    double g[2][N] = {{3, 0, -4, 0}, {0, 12, 0, 0}}; /* global norm sqrt(9 + 16 + 144) = 13 */
    set_grads(t, dts[d], 2, w, g);
    double norm = -1, got[N], want[N];
    /* below the limit: untouched, norm reported */
    cr_assert_eq(tg_clip_grad_norm(t, 20, &norm), TG_OK, "%s", tg_tape_error(t));
    cr_expect_eq(norm, 13.0);
    ts_read_grad(t, w[0], got, N);
    cr_expect_arr_eq(got, g[0], sizeof got);
    /* above: every gradient times max_norm / (norm + 1e-6) */
    cr_assert_eq(tg_clip_grad_norm(t, 6.5, &norm), TG_OK, "%s", tg_tape_error(t));
    cr_expect_eq(norm, 13.0);
    double coef = 6.5 / (13.0 + 1e-6);
    for (int k = 0; k < 2; k++) {
      for (int i = 0; i < N; i++)
        want[i] = dts[d] == TG_F32 ? (double)(float)(g[k][i] * coef) : g[k][i] * coef;
      ts_read_grad(t, w[k], got, N);
      TS_EXPECT_CLOSE(got, want, N, 1e-300, 1e-15);
    }
    /* the untouched third parameter has no gradient; the norm is now max_norm (to 1e-6) */
    cr_assert_eq(tg_clip_grad_norm(t, 100, NULL), TG_OK);
    cr_assert_eq(tg_clip_grad_norm(t, 100, &norm), TG_OK);
    cr_expect(fabs(norm - 6.5) < 1e-5, "norm after clipping %g", norm);
    /* no gradients at all: norm 0 */
    tg_tape_zero_grad(t);
    cr_assert_eq(tg_clip_grad_norm(t, 1, &norm), TG_OK);
    cr_expect_eq(norm, 0.0);
    tg_tape_destroy(t);
    tg_runtime_destroy(rt);
  }
}

/* ---------------------------------------------------------------- errors */

Test(optim, option_and_state_errors) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  tg_id w = param(t, TG_F64, P0[0], 0);
  double g[1][N] = {{1, 2, 3, 4}}, got[N];
  set_grads(t, TG_F64, 1, &w, g);

  tg_sgd_options so = {.struct_size = sizeof(tg_sgd_options), .lr = 0.1};
  cr_expect_eq(tg_sgd_step(NULL, &so), TG_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(tg_last_error(), "tg_sgd_step: argument 'tape' is NULL") != NULL, "%s", tg_last_error());
  TS_EXPECT_STATUS(tg_sgd_step(t, NULL), TG_ERR_INVALID_ARGUMENT, t, "argument 'opts' is NULL");
  so.lr = -1;
  TS_EXPECT_STATUS(tg_sgd_step(t, &so), TG_ERR_INVALID_ARGUMENT, t, "option 'lr' is -1; expected a finite number >= 0");
  so.lr = NAN;
  TS_EXPECT_STATUS(tg_sgd_step(t, &so), TG_ERR_INVALID_ARGUMENT, t, "option 'lr' is nan");
  so = (tg_sgd_options){.struct_size = sizeof(tg_sgd_options), .lr = 0.1, .momentum = -0.5};
  TS_EXPECT_STATUS(tg_sgd_step(t, &so), TG_ERR_INVALID_ARGUMENT, t, "option 'momentum' is -0.5");
  so = (tg_sgd_options){.struct_size = sizeof(tg_sgd_options), .lr = 0.1, .weight_decay = -1e-3};
  TS_EXPECT_STATUS(tg_sgd_step(t, &so), TG_ERR_INVALID_ARGUMENT, t, "option 'weight_decay'");
  so = (tg_sgd_options){.struct_size = sizeof(tg_sgd_options), .lr = 0.1, .dampening = INFINITY};
  TS_EXPECT_STATUS(tg_sgd_step(t, &so), TG_ERR_INVALID_ARGUMENT, t, "option 'dampening' is inf");
  so = (tg_sgd_options){
      .struct_size = sizeof(tg_sgd_options), .lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = 1};
  TS_EXPECT_STATUS(tg_sgd_step(t, &so), TG_ERR_INVALID_ARGUMENT, t,
                   "Nesterov momentum needs momentum > 0 and dampening 0");
  so = (tg_sgd_options){.struct_size = sizeof(tg_sgd_options), .lr = 0.1, .nesterov = 1};
  TS_EXPECT_STATUS(tg_sgd_step(t, &so), TG_ERR_INVALID_ARGUMENT, t, "Nesterov");

  tg_adamw_options ao;
  tg_adamw_options_init(&ao);
  cr_expect_eq(tg_adamw_step(NULL, &ao), TG_ERR_INVALID_ARGUMENT);
  TS_EXPECT_STATUS(tg_adamw_step(t, NULL), TG_ERR_INVALID_ARGUMENT, t, "tg_adamw_step: argument 'opts' is NULL");
  ao.beta1 = 1.0;
  TS_EXPECT_STATUS(tg_adamw_step(t, &ao), TG_ERR_INVALID_ARGUMENT, t,
                   "option 'beta1' is 1; expected a number in [0, 1)");
  tg_adamw_options_init(&ao);
  ao.beta2 = -0.1;
  TS_EXPECT_STATUS(tg_adamw_step(t, &ao), TG_ERR_INVALID_ARGUMENT, t, "option 'beta2' is -0.1");
  tg_adamw_options_init(&ao);
  ao.eps = 0;
  TS_EXPECT_STATUS(tg_adamw_step(t, &ao), TG_ERR_INVALID_ARGUMENT, t,
                   "option 'eps' is 0; expected a finite number > 0");
  tg_adamw_options_init(&ao);
  ao.lr = INFINITY;
  TS_EXPECT_STATUS(tg_adamw_step(t, &ao), TG_ERR_INVALID_ARGUMENT, t, "option 'lr' is inf");
  tg_adamw_options_init(&ao);
  ao.weight_decay = NAN;
  TS_EXPECT_STATUS(tg_adamw_step(t, &ao), TG_ERR_INVALID_ARGUMENT, t, "option 'weight_decay' is nan");
  /* the struct_size rule: a zeroed struct (never initialised) and one from a newer header are refused */
  tg_adamw_options zeroed;
  memset(&zeroed, 0, sizeof zeroed);
  zeroed.lr = 0.1;
  TS_EXPECT_STATUS(tg_adamw_step(t, &zeroed), TG_ERR_INVALID_ARGUMENT, t, "struct_size is 0");
  struct {
    tg_adamw_options o;
    double newer_field;
  } bigger;
  tg_adamw_options_init(&bigger.o);
  bigger.o.struct_size = sizeof bigger;
  TS_EXPECT_STATUS(tg_adamw_step(t, &bigger.o), TG_ERR_INVALID_ARGUMENT, t, "built against a newer tiga.h");
  tg_sgd_options szero;
  memset(&szero, 0, sizeof szero);
  TS_EXPECT_STATUS(tg_sgd_step(t, &szero), TG_ERR_INVALID_ARGUMENT, t, "tg_sgd_step: argument 'opts' (tg_sgd_options)");

  cr_expect_eq(tg_clip_grad_norm(NULL, 1, NULL), TG_ERR_INVALID_ARGUMENT);
  TS_EXPECT_STATUS(tg_clip_grad_norm(t, 0, NULL), TG_ERR_INVALID_ARGUMENT, t, "argument 'max_norm' is 0");
  TS_EXPECT_STATUS(tg_clip_grad_norm(t, NAN, NULL), TG_ERR_INVALID_ARGUMENT, t, "argument 'max_norm' is nan");

  /* nothing above moved the parameter or its gradient */
  ts_read(t, w, got, N);
  cr_expect_arr_eq(got, P0[0], sizeof got);
  ts_read_grad(t, w, got, N);
  cr_expect_arr_eq(got, g[0], sizeof got);

  /* a sticky error: every runner refuses, the sticky message stays */
  cr_expect_eq(tg_relu(t, TG_NO_ID), TG_NO_ID);
  so = (tg_sgd_options){.struct_size = sizeof(tg_sgd_options), .lr = 0.1};
  tg_adamw_options_init(&ao);
  cr_expect_eq(tg_sgd_step(t, &so), TG_ERR_STATE);
  cr_expect_eq(tg_adamw_step(t, &ao), TG_ERR_STATE);
  cr_expect_eq(tg_clip_grad_norm(t, 1, NULL), TG_ERR_STATE);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "tg_relu");
  cr_expect(strstr(tg_last_error(), "tg_clip_grad_norm: the tape holds an error") != NULL, "%s", tg_last_error());
  ts_read(t, w, got, N);
  cr_expect_arr_eq(got, P0[0], sizeof got);
  /* after reset the same call works */
  tg_tape_reset(t);
  cr_expect_eq(tg_sgd_step(t, &so), TG_OK, "%s", tg_tape_error(t));
  ts_read(t, w, got, N);
  for (int i = 0; i < N; i++)
    cr_expect_eq(got[i], P0[0][i] - 0.1 * g[0][i]);
  cr_expect_eq(tg_tape_status(t), TG_OK);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* An f16 parameter whose gradient sits on the host (backward from the parameter itself): the
 * host update takes f32 / f64 only; refused before anything moves, the tape stays usable. */
Test(optim, host_update_of_f16_is_a_dtype_error) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  tg_id a = param(t, TG_F64, P0[0], 0);
  double g[1][N] = {{1, 1, 1, 1}};
  set_grads(t, TG_F64, 1, &a, g);
  uint16_t h = ts_f32_to_f16(1.5f);
  tg_id w = TG_NO_ID;
  cr_assert_eq(tg_tape_parameter(t, TG_F16, 0, NULL, &h, ts_bytes(TG_F16, 0, NULL), 0, &w), TG_OK);
  cr_assert_eq(tg_tape_backward(t, w), TG_OK, "%s", tg_tape_error(t));
  tg_sgd_options so = {.struct_size = sizeof(tg_sgd_options), .lr = 0.1};
  TS_EXPECT_STATUS(tg_sgd_step(t, &so), TG_ERR_DTYPE, t, "parameter 1 (id");
  TS_EXPECT_STATUS(tg_clip_grad_norm(t, 1, NULL), TG_ERR_DTYPE, t, "is f16 with its gradient on the host");
  double got[N];
  ts_read(t, a, got, N); /* the f64 parameter before it was not updated either */
  cr_expect_arr_eq(got, P0[0], sizeof got);
  cr_expect_eq(tg_tape_status(t), TG_OK);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* ---------------------------------------------------------------- CUDA vs host */

/* Runs three steps of `which` (0 SGD, 1 AdamW) then a clip on two parameters of `len` elements
 * whose gradients come from tg_sum(tg_mul(w, x)) on `prov`; returns values and the norm. */
static void optim_run(tg_runtime *rt, tg_provider prov, int which, int64_t len, double *out, double *norm) {
  tg_tape *t = ts_tape(rt);
  float *buf = malloc((size_t)len * sizeof(float));
  tg_id w[2];
  for (int k = 0; k < 2; k++) {
    ts_uniform_f32(buf, (size_t)len, 100 + k, -1, 1);
    cr_assert_eq(
        tg_tape_parameter(t, TG_F32, 1, &len, buf, ts_bytes(TG_F32, 1, &len), k ? TG_NO_WEIGHT_DECAY : 0, &w[k]),
        TG_OK);
  }
  tg_sgd_options so = {
      .struct_size = sizeof(tg_sgd_options), .lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.02};
  tg_adamw_options ao = {.struct_size = sizeof(tg_adamw_options),
                         .lr = 0.01,
                         .beta1 = 0.9,
                         .beta2 = 0.99,
                         .eps = 1e-8,
                         .weight_decay = 0.05};
  for (int s = 0; s < 3; s++) {
    tg_tape_zero_grad(t);
    tg_tape_set_provider(t, prov, NULL);
    tg_id loss = TG_NO_ID;
    for (int k = 0; k < 2; k++) {
      ts_uniform_f32(buf, (size_t)len, 1000 + 10 * s + k, -2, 2);
      tg_id xi = ts_input(t, TG_F32, 1, &len, buf, 0);
      tg_id term = tg_sum(t, tg_mul(t, w[k], xi));
      loss = k ? tg_add(t, loss, term) : term;
    }
    cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
    tg_status st = which ? tg_adamw_step(t, &ao) : tg_sgd_step(t, &so);
    cr_assert_eq(st, TG_OK, "%s", tg_tape_error(t));
    tg_tape_reset(t);
  }
  cr_assert_eq(tg_clip_grad_norm(t, 1.0, norm), TG_OK, "%s", tg_tape_error(t));
  for (int k = 0; k < 2; k++) {
    ts_read(t, w[k], out + k * len, len);
    ts_read_grad(t, w[k], out + (2 + k) * len, len);
  }
  tg_tape_destroy(t);
  free(buf);
}

Test(optim_cuda, matches_host_f32_odd_sizes) {
  tg_runtime *dev = ts_cuda_runtime_or_skip();
  tg_runtime *host = ts_host_runtime();
  int64_t len = 10007;
  double *a = malloc(4 * (size_t)len * sizeof(double)), *b = malloc(4 * (size_t)len * sizeof(double));
  for (int which = 0; which < 2; which++) {
    double na, nb;
    optim_run(host, TG_PROVIDER_HOST, which, len, a, &na);
    optim_run(dev, TG_PROVIDER_CUDA, which, len, b, &nb);
    cr_expect(ts_rel_l2(b, a, 2 * (size_t)len) < 1e-5, "%s values: rel err %g", which ? "adamw" : "sgd",
              ts_rel_l2(b, a, 2 * (size_t)len));
    cr_expect(ts_rel_l2(b + 2 * len, a + 2 * len, 2 * (size_t)len) < 1e-5, "clipped grads: rel err %g",
              ts_rel_l2(b + 2 * len, a + 2 * len, 2 * (size_t)len));
    cr_expect(fabs(na - nb) <= 1e-5 * na, "norm host %g cuda %g", na, nb);
    /* norm not asked for: the clip is decided on the device, with no host round trip */
    optim_run(dev, TG_PROVIDER_CUDA, which, len, b, NULL);
    cr_expect(ts_rel_l2(b + 2 * len, a + 2 * len, 2 * (size_t)len) < 1e-5, "device-side clip: rel err %g",
              ts_rel_l2(b + 2 * len, a + 2 * len, 2 * (size_t)len));
  }
  free(a);
  free(b);
  tg_runtime_destroy(host);
  tg_runtime_destroy(dev);
}

/* Many parameters (the multi-tensor kernels: more tensors than one launch holds, a tensor of
 * several chunks and one that spills over a launch's block list), AdamW twice then a clip with
 * the norm asked for and one decided on the device; values and gradients vs the host. */
static void many_run(tg_runtime *rt, tg_provider prov, int np, const int64_t *lens, int report_norm, double *out,
                     double *norm) {
  tg_tape *t = ts_tape(rt);
  int64_t total = 0, maxlen = 0;
  for (int k = 0; k < np; k++) {
    total += lens[k];
    if (lens[k] > maxlen) maxlen = lens[k];
  }
  float *buf = malloc((size_t)maxlen * sizeof(float));
  tg_id *w = malloc((size_t)np * sizeof *w);
  for (int k = 0; k < np; k++) {
    ts_uniform_f32(buf, (size_t)lens[k], 300 + (uint64_t)k, -1, 1);
    cr_assert_eq(tg_tape_parameter(t, TG_F32, 1, &lens[k], buf, ts_bytes(TG_F32, 1, &lens[k]),
                                   k % 3 ? 0 : TG_NO_WEIGHT_DECAY, &w[k]),
                 TG_OK);
  }
  tg_adamw_options ao = {.struct_size = sizeof(tg_adamw_options),
                         .lr = 0.01,
                         .beta1 = 0.9,
                         .beta2 = 0.99,
                         .eps = 1e-8,
                         .weight_decay = 0.05};
  for (int s = 0; s < 2; s++) {
    tg_tape_zero_grad(t);
    tg_tape_set_provider(t, prov, NULL);
    tg_id loss = TG_NO_ID;
    for (int k = 0; k < np; k++) {
      ts_uniform_f32(buf, (size_t)lens[k], 5000 + 100 * (uint64_t)s + (uint64_t)k, -2, 2);
      tg_id term = tg_sum(t, tg_mul(t, w[k], ts_input(t, TG_F32, 1, &lens[k], buf, 0)));
      loss = k ? tg_add(t, loss, term) : term;
    }
    cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
    if (s == 1) cr_assert_eq(tg_clip_grad_norm(t, 3.0, report_norm ? norm : NULL), TG_OK, "%s", tg_tape_error(t));
    cr_assert_eq(tg_adamw_step(t, &ao), TG_OK, "%s", tg_tape_error(t));
    if (s == 0) tg_tape_reset(t);
  }
  for (int64_t k = 0, off = 0; k < np; off += lens[k], k++) {
    ts_read(t, w[k], out + off, lens[k]);
    ts_read_grad(t, w[k], out + total + off, lens[k]);
  }
  tg_tape_destroy(t);
  free(w);
  free(buf);
}

Test(optim_cuda, many_parameters_multi_tensor) {
  tg_runtime *dev = ts_cuda_runtime_or_skip();
  tg_runtime *host = ts_host_runtime();
  enum { NP = 40 };
  int64_t lens[NP], total = 0;
  for (int k = 0; k < NP; k++)
    lens[k] = (k * 37) % 1000 + 1;
  lens[7] = 2 * 16384 + 3;    /* three chunks */
  lens[31] = 330 * 16384 + 5; /* more chunks than one launch's block list */
  for (int k = 0; k < NP; k++)
    total += lens[k];
  double *a = malloc(2 * (size_t)total * sizeof(double)), *b = malloc(2 * (size_t)total * sizeof(double));
  double na = 0, nb = 0;
  many_run(host, TG_PROVIDER_HOST, NP, lens, 1, a, &na);
  many_run(dev, TG_PROVIDER_CUDA, NP, lens, 1, b, &nb);
  cr_expect(ts_rel_l2(b, a, (size_t)total) < 1e-5, "values: rel err %g", ts_rel_l2(b, a, (size_t)total));
  cr_expect(ts_rel_l2(b + total, a + total, (size_t)total) < 1e-5, "clipped grads: rel err %g",
            ts_rel_l2(b + total, a + total, (size_t)total));
  cr_expect(na > 3.0 && fabs(na - nb) <= 1e-6 * na, "norm host %.10g cuda %.10g (must exceed the clip)", na, nb);
  many_run(dev, TG_PROVIDER_CUDA, NP, lens, 0, b, NULL);
  cr_expect(ts_rel_l2(b, a, (size_t)total) < 1e-5, "device-side clip, values: rel err %g",
            ts_rel_l2(b, a, (size_t)total));
  free(a);
  free(b);
  tg_runtime_destroy(host);
  tg_runtime_destroy(dev);
}

/* A device allocation failing in the middle of a step (the second parameter's first moment)
 * is returned, moves nothing, and leaves the tape usable; the retried step then equals a host
 * step. The same for the clip's scratch buffer. */
Test(optim_cuda, allocation_failure_leaves_parameters_untouched) {
  tg_runtime *dev = ts_cuda_runtime_or_skip();
  tg_tape *t = ts_tape(dev);
  int64_t len = 333;
  float *x = malloc((size_t)len * sizeof(float)), *before = malloc(2 * (size_t)len * sizeof(float)),
        *after = malloc(2 * (size_t)len * sizeof(float));
  tg_id w[2];
  for (int k = 0; k < 2; k++) {
    ts_uniform_f32(x, (size_t)len, 50 + k, -1, 1);
    cr_assert_eq(tg_tape_parameter(t, TG_F32, 1, &len, x, ts_bytes(TG_F32, 1, &len), 0, &w[k]), TG_OK);
  }
  tg_tape_set_provider(t, TG_PROVIDER_CUDA, NULL);
  ts_uniform_f32(x, (size_t)len, 60, -1, 1);
  tg_id xi = ts_input(t, TG_F32, 1, &len, x, 0);
  tg_id loss = tg_add(t, tg_sum(t, tg_mul(t, w[0], xi)), tg_sum(t, tg_mul(t, w[1], xi)));
  cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
  for (int k = 0; k < 2; k++)
    tg_tape_read(t, w[k], before + k * len, (size_t)len * sizeof(float));
  tg_adamw_options o;
  tg_adamw_options_init(&o);
  cr_assert_eq(tg_runtime_inject_alloc_failure(dev, 2), TG_OK); /* m0, v0 succeed, m1 fails */
  TS_EXPECT_STATUS(tg_adamw_step(t, &o), TG_ERR_OUT_OF_MEMORY, t, "injected");
  cr_expect_eq(tg_tape_status(t), TG_OK);
  for (int k = 0; k < 2; k++)
    tg_tape_read(t, w[k], after + k * len, (size_t)len * sizeof(float));
  cr_expect(memcmp(before, after, 2 * (size_t)len * sizeof(float)) == 0, "a failed step moved parameters");
  cr_assert_eq(tg_runtime_inject_alloc_failure(dev, 0), TG_OK);
  double norm = -1;
  TS_EXPECT_STATUS(tg_clip_grad_norm(t, 1e-3, &norm), TG_ERR_OUT_OF_MEMORY, t, "injected");
  cr_expect_eq(norm, -1.0);
  cr_expect_eq(tg_tape_status(t), TG_OK);
  /* retry: one AdamW step from zero state moves each coordinate by lr * sign(g) (+ decay) */
  cr_assert_eq(tg_adamw_step(t, &o), TG_OK, "%s", tg_tape_error(t));
  for (int k = 0; k < 2; k++)
    tg_tape_read(t, w[k], after + k * len, (size_t)len * sizeof(float));
  for (int64_t i = 0; i < 2 * len; i++) {
    double p = before[i], g = x[i % len];
    double want = p * (1 - o.lr * o.weight_decay) - o.lr * g / (fabs(g) + o.eps);
    cr_expect(fabs(after[i] - want) < 1e-6, "element %lld: %.9g vs %.9g", (long long)i, after[i], want);
  }
  tg_tape_destroy(t);
  tg_runtime_destroy(dev);
  free(x);
  free(before);
  free(after);
}
