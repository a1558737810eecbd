/* The point-cloud model of pointcloud.h: data, the two-layer edge-MLP attention model, a training step. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "pointcloud.h"

#include "tiga_dlpack.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int fail(char *err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, PC_ERR, fmt, ap);
  va_end(ap);
  return -1;
}

static uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

void pc_config_default(pc_config *c) {
  *c = (pc_config){.model = PC_MODEL_WIDE,
                   .n = 512,
                   .degree = 7,
                   .f_in = 8,
                   .hidden = 64,
                   .heads = 4,
                   .kappa = 4,
                   .lr = 5e-3,
                   .attention = TG_PROVIDER_AUTO,
                   .dtype = TG_F32,
                   .seed = 0};
}

/* ------------------------------------------------------------ data */

static int fill(tg_init_kind kind, double a, double b, uint64_t seed, int64_t rows, int64_t cols, float *dst) {
  tg_init_options io;
  tg_init_options_init(&io);
  io.kind = kind, io.a = a, io.b = b, io.seed = seed;
  int64_t shape[2] = {rows, cols};
  return tg_init_fill(&io, TG_F32, 2, shape, dst, (size_t)(rows * cols) * sizeof(float)) ? -1 : 0;
}

int pc_data_init(pc_data *d, tg_runtime *rt, const pc_config *cfg, char *err) {
  memset(d, 0, sizeof *d);
  const int64_t n = cfg->n, f = cfg->f_in;
  if (n < 2 || n > INT32_MAX) return fail(err, "n: expected 2 .. 2^31-1 points");
  if (!(cfg->degree > 0) || f < 3) return fail(err, "degree > 0 and f_in >= 3 expected");
  d->n = n, d->f_in = f;
  d->cutoff = cbrt(3.0 * cfg->degree / (4.0 * 3.14159265358979323846 * (double)n));
  d->pos = malloc((size_t)n * 3 * sizeof(float));
  d->x = malloc((size_t)(n * f) * sizeof(float));
  d->target = calloc((size_t)n * 3, sizeof(float));
  int64_t *row_ptr = malloc((size_t)(n + 1) * sizeof *row_ptr);
  int32_t *col = NULL;
  if (!d->pos || !d->x || !d->target || !row_ptr) {
    free(row_ptr);
    pc_data_free(d);
    return fail(err, "out of memory");
  }
  if (fill(TG_INIT_UNIFORM, 0, 1, splitmix64(cfg->seed * 16 + 100), n, 3, d->pos) ||
      fill(TG_INIT_NORMAL, 0, 1, splitmix64(cfg->seed * 16 + 101), n, f, d->x) ||
      tg_relation_radius(rt, 3, TG_F32, n, d->pos, (size_t)n * 12, 0, NULL, 0, d->cutoff, NULL, &d->graph) ||
      tg_relation_read_csr(d->graph, 0, row_ptr, (size_t)(n + 1) * 8, NULL, 0)) {
    free(row_ptr);
    pc_data_free(d);
    return fail(err, "data: %s", tg_last_error());
  }
  d->edges = row_ptr[n];
  col = malloc((size_t)(d->edges ? d->edges : 1) * sizeof *col);
  if (!col || tg_relation_read_csr(d->graph, 0, row_ptr, (size_t)(n + 1) * 8, col, (size_t)d->edges * 4)) {
    free(row_ptr), free(col);
    pc_data_free(d);
    return fail(err, "graph: %s", col ? tg_last_error() : "out of memory");
  }
  /* t_i = sum_j softmax_j(-kappa d2_ij / r^2) x_j[0:3], in double */
  const double inv_r2 = 1.0 / (d->cutoff * d->cutoff);
  for (int64_t i = 0; i < n; i++) {
    double mx = -INFINITY, z = 0, acc[3] = {0, 0, 0};
    for (int pass = 0; pass < 2; pass++)
      for (int64_t e = row_ptr[i]; e < row_ptr[i + 1]; e++) {
        const float *pi = d->pos + 3 * i, *pj = d->pos + 3 * (int64_t)col[e];
        double d2 = 0;
        for (int k = 0; k < 3; k++)
          d2 += ((double)pj[k] - pi[k]) * ((double)pj[k] - pi[k]);
        double s = -cfg->kappa * d2 * inv_r2;
        if (!pass) {
          mx = fmax(mx, s);
        } else {
          double w = exp(s - mx);
          z += w;
          for (int k = 0; k < 3; k++)
            acc[k] += w * d->x[(int64_t)col[e] * f + k];
        }
      }
    for (int k = 0; k < 3 && z > 0; k++)
      d->target[3 * i + k] = (float)(acc[k] / z);
  }
  free(row_ptr), free(col);
  return 0;
}

void pc_data_free(pc_data *d) {
  free(d->pos), free(d->x), free(d->target);
  tg_relation_destroy(d->graph);
  memset(d, 0, sizeof *d);
}

/* ------------------------------------------------------------ model */

static int is_score(int p) {
  int k = p % PC_PER_LAYER;
  return p < 2 * PC_PER_LAYER && (k == PC_W1 || k == PC_B1 || k == PC_W2 || k == PC_B2);
}

int pc_model_init(pc_model *m, tg_runtime *rt, const pc_config *cfg, const pc_data *d, char *err) {
  memset(m, 0, sizeof *m);
  m->cfg = *cfg;
  m->data = d;
  m->rt = rt;
  const int64_t dh = cfg->hidden, H = cfg->heads, wide = cfg->model == PC_MODEL_WIDE;
  if (cfg->model != PC_MODEL_SEED && !wide) return fail(err, "model: expected seed or wide");
  if (dh < 1 || H < 1 || (wide ? dh : cfg->f_in) % H)
    return fail(err, "heads must divide %s", wide ? "hidden" : "f_in (the seed model's values are its features)");
  if (cfg->dtype != TG_F32 && cfg->dtype != TG_BF16) return fail(err, "dtype: expected f32 or bf16");
  if (tg_tape_create(rt, &m->tape)) return fail(err, "tg_tape_create: %s", tg_last_error());
  static const char *const names[PC_PER_LAYER] = {"score.w1", "score.b1", "score.w2", "score.b2",
                                                  "value.w",  "skip.w",   "skip.b"};
  for (int l = 0; l < 2; l++) {
    const int64_t din = l && wide ? dh : cfg->f_in;
    const int64_t s[PC_PER_LAYER][2] = {{3 + 2 * din, dh}, {dh, 0}, {dh, H}, {H, 0}, {din, dh}, {din, dh}, {dh, 0}};
    memcpy(m->shape[l * PC_PER_LAYER], s, (wide ? PC_PER_LAYER : PC_WV) * sizeof s[0]);
  }
  m->shape[2 * PC_PER_LAYER][0] = wide ? dh : 2 * cfg->f_in, m->shape[2 * PC_PER_LAYER][1] = 3;
  m->shape[2 * PC_PER_LAYER + 1][0] = 3;
  for (int p = 0; p < PC_PARAMS; p++) {
    const int64_t *s = m->shape[p];
    const int nd = s[1] ? 2 : 1;
    tg_init_options io;
    tg_init_options_init(&io);
    io.kind = nd == 2 ? TG_INIT_XAVIER_UNIFORM : TG_INIT_ZEROS;
    io.seed = splitmix64(cfg->seed * 64 + (uint64_t)p);
    m->param[p] = TG_NO_ID;
    if (!s[0]) continue; /* not in this model */
    if (cfg->freeze_score && is_score(p)) {
      size_t numel = (size_t)(s[0] * (nd == 2 ? s[1] : 1));
      m->frozen[p] = malloc(numel * sizeof(float));
      if (!m->frozen[p] || tg_init_fill(&io, TG_F32, nd, s, m->frozen[p], numel * sizeof(float))) {
        pc_model_free(m);
        return fail(err, "frozen weights: %s", m->frozen[p] ? tg_last_error() : "out of memory");
      }
      continue;
    }
    char name[64];
    if (p < 2 * PC_PER_LAYER)
      snprintf(name, sizeof name, "layer%d.%s", p / PC_PER_LAYER, names[p % PC_PER_LAYER]);
    else
      snprintf(name, sizeof name, "out.%s", p == 2 * PC_PER_LAYER ? "w" : "b");
    if (tg_tape_parameter_init(m->tape, TG_F32, nd, s, &io, 0, &m->param[p]) ||
        tg_tape_set_name(m->tape, m->param[p], name)) {
      fail(err, "parameters: %s", tg_tape_error(m->tape));
      pc_model_free(m);
      return -1;
    }
  }
  /* resident data: parameters that no op reads (so they never get a gradient), exported once */
  const float *src[3] = {d->pos, d->x, d->target};
  const int64_t cols[3] = {3, d->f_in, 3};
  const unsigned side = tg_runtime_has_device(rt) ? TG_EXPORT_DEVICE : TG_EXPORT_HOST;
  for (int k = 0; k < 3; k++) {
    int64_t s[2] = {d->n, cols[k]};
    tg_id id;
    if (tg_tape_parameter(m->tape, TG_F32, 2, s, src[k], (size_t)(d->n * cols[k]) * 4, TG_NO_WEIGHT_DECAY, &id) ||
        tg_tape_export_dlpack(m->tape, id, side, &m->store[k])) {
      fail(err, "resident data: %s", tg_tape_error(m->tape));
      pc_model_free(m);
      return -1;
    }
    const DLTensor *dl = &m->store[k]->dl_tensor;
    m->store_ptr[k] = (const char *)dl->data + dl->byte_offset;
    m->store_mem = dl->device.device_type == kDLCUDA ? TG_MEMORY_CUDA : TG_MEMORY_HOST;
    m->store_dev = dl->device.device_id;
  }
  return 0;
}

void pc_model_free(pc_model *m) {
  for (int k = 0; k < 3; k++)
    if (m->store[k] && m->store[k]->deleter) m->store[k]->deleter(m->store[k]);
  tg_tape_destroy(m->tape);
  for (int p = 0; p < PC_PARAMS; p++)
    free(m->frozen[p]);
  memset(m, 0, sizeof *m);
}

/* The parameter's id this step: the parameter, or a gradient-free input holding the frozen value. */
static tg_id weight(pc_model *m, int p) {
  if (!m->frozen[p]) return m->param[p];
  const int64_t *s = m->shape[p];
  const int nd = s[1] ? 2 : 1;
  tg_id id;
  if (tg_tape_input(m->tape, TG_F32, nd, s, m->frozen[p], (size_t)(s[0] * (nd == 2 ? s[1] : 1)) * sizeof(float), 0,
                    &id))
    return TG_NO_ID;
  return id;
}

static tg_id to_dtype(pc_model *m, tg_id x) { return m->cfg.dtype == TG_F32 ? x : tg_cast(m->tape, x, m->cfg.dtype); }

/* Layer l's edge attention over features hc (the op's dtype) with values v [N, H, F], under
 * cfg.attention (the other ops keep the tape's provider); the result f32 and viewed [N, H F]. */
static tg_id attend(pc_model *m, int l, tg_id q, tg_id hc, tg_id v, int64_t width) {
  tg_tape *t = m->tape;
  int64_t s2[2] = {m->data->n, width};
  tg_id w[4];
  for (int k = 0; k < 4; k++) /* W1, b1, W2, b2 */
    w[k] = to_dtype(m, weight(m, l * PC_PER_LAYER + PC_W1 + k));
  tg_graph_attention_options o;
  tg_graph_attention_options_init(&o);
  o.recompute_products = m->cfg.recompute;
  tg_provider prev;
  tg_tape_set_provider(t, m->cfg.attention, &prev);
  tg_id a = tg_edge_attention(t, m->data->graph, q, q, hc, hc, TG_ABSENT, v, w[0], w[1], w[2], w[3], &o);
  tg_tape_set_provider(t, prev, NULL);
  if (m->cfg.dtype != TG_F32) a = tg_cast(t, a, TG_F32);
  return tg_reshape(t, a, 2, s2);
}

/* The seed model's layer: the features are the values (h [N, f_in] viewed [N, H, f_in / H]). */
static tg_id seed_layer(pc_model *m, int l, tg_id q, tg_id h) {
  const int64_t f = m->data->f_in, H = m->cfg.heads;
  int64_t s3[3] = {m->data->n, H, f / H};
  tg_id hc = to_dtype(m, h);
  return attend(m, l, q, hc, tg_reshape(m->tape, hc, 3, s3), f);
}

static tg_id layer(pc_model *m, int l, tg_id q, tg_id h) {
  tg_tape *t = m->tape;
  const int64_t dh = m->cfg.hidden, H = m->cfg.heads;
  const int b = l * PC_PER_LAYER;
  int64_t s3[3] = {m->data->n, H, dh / H};
  tg_id v = to_dtype(m, tg_reshape(t, tg_linear(t, h, m->param[b + PC_WV], TG_ABSENT), 3, s3));
  tg_id a = attend(m, l, q, to_dtype(m, h), v, dh);
  tg_id skip = tg_linear(t, h, m->param[b + PC_WS], m->param[b + PC_BS]);
  return tg_elu(t, tg_add(t, a, skip), 1.0);
}

tg_id pc_loss(pc_model *m) {
  tg_tape *t = m->tape;
  const pc_data *d = m->data;
  int64_t sp[2] = {d->n, 3}, sx[2] = {d->n, d->f_in};
  tg_id tgt;
  const tg_memory mem = m->store_mem;
  if (tg_tape_input_borrowed(t, TG_F32, 2, sp, m->store_ptr[0], (size_t)d->n * 12, mem, m->store_dev, TG_REQUIRES_GRAD,
                             &m->pos) ||
      tg_tape_input_borrowed(t, TG_F32, 2, sx, m->store_ptr[1], (size_t)(d->n * d->f_in) * 4, mem, m->store_dev,
                             TG_REQUIRES_GRAD, &m->x) ||
      tg_tape_input_borrowed(t, TG_F32, 2, sp, m->store_ptr[2], (size_t)d->n * 12, mem, m->store_dev, 0, &tgt))
    return TG_NO_ID;
  tg_id q = tg_scale(t, m->pos, 1.0 / d->cutoff);
  if (m->cfg.model == PC_MODEL_SEED) {
    tg_id hs[2];
    hs[0] = seed_layer(m, 0, q, m->x);
    hs[1] = seed_layer(m, 1, q, hs[0]);
    return tg_mse(t, tg_linear(t, tg_concat(t, 2, hs), m->param[2 * PC_PER_LAYER], m->param[2 * PC_PER_LAYER + 1]),
                  tgt);
  }
  tg_id h = layer(m, 0, q, m->x);
  h = layer(m, 1, q, h);
  tg_id y = tg_linear(t, h, m->param[2 * PC_PER_LAYER], m->param[2 * PC_PER_LAYER + 1]);
  return tg_mse(t, y, tgt);
}

/* Profiling (cfg.profile): the device drained and the clock read between phases. */
static double phase_mark(pc_model *m, double t0, int phase) {
  if (!m->cfg.profile) return 0;
  struct timespec ts;
  tg_runtime_sync(m->rt);
  clock_gettime(CLOCK_MONOTONIC, &ts);
  double now = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
  if (phase >= 0) m->phase_s[phase] += now - t0;
  return now;
}

int pc_train_step(pc_model *m, double *loss, char *err) {
  tg_tape *t = m->tape;
  double t0 = phase_mark(m, 0, -1);
  if (tg_tape_reset(t)) return fail(err, "reset: %s", tg_tape_error(t));
  tg_id l = pc_loss(m);
  if (tg_tape_status(t)) return fail(err, "forward: %s", tg_tape_error(t));
  t0 = phase_mark(m, t0, 0);
  if (tg_tape_zero_grad(t) || tg_tape_backward(t, l)) return fail(err, "backward: %s", tg_tape_error(t));
  t0 = phase_mark(m, t0, 1);
  tg_adam_options o;
  tg_adam_options_init(&o);
  o.lr = m->cfg.lr;
  if (tg_adam_step(t, &o)) return fail(err, "adam: %s", tg_tape_error(t));
  phase_mark(m, t0, 2);
  if (loss && tg_tape_scalar(t, l, loss)) return fail(err, "loss: %s", tg_tape_error(t));
  m->steps++;
  return 0;
}

static int grad_norm(tg_tape *t, tg_id id, size_t numel, double *out) {
  float *g = malloc(numel * sizeof *g);
  if (!g || tg_tape_read_grad(t, id, g, numel * sizeof *g)) {
    free(g);
    return -1;
  }
  double s = 0;
  for (size_t i = 0; i < numel; i++)
    s += (double)g[i] * g[i];
  free(g);
  *out = sqrt(s);
  return 0;
}

int pc_input_grad_norms(pc_model *m, double *pos_norm, double *x_norm, char *err) {
  if (!m->steps) return fail(err, "no step taken yet");
  if (grad_norm(m->tape, m->pos, (size_t)m->data->n * 3, pos_norm) ||
      grad_norm(m->tape, m->x, (size_t)(m->data->n * m->data->f_in), x_norm))
    return fail(err, "gradients: %s", tg_tape_error(m->tape));
  return 0;
}
