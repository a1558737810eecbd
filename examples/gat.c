/* The GAT of gat.h: Cora data, the model on the tape, a training step, evaluation. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "gat.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int fail(char *err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, GAT_ERR, fmt, ap);
  va_end(ap);
  return -1;
}

/* ------------------------------------------------------------ data */

/* Next non-comment line of f into buf; 0 at end of file. */
static int next_line(FILE *f, char *buf, size_t cap) {
  while (fgets(buf, (int)cap, f))
    if (buf[0] != '#' && buf[0] != '\n') return 1;
  return 0;
}

static int cmp_i32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

int gat_data_load(gat_data *d, const char *dir, char *err) {
  memset(d, 0, sizeof *d);
  char path[4096], line[1 << 16];
  snprintf(path, sizeof path, "%s/cora.nodes", dir);
  FILE *f = fopen(path, "r");
  if (!f) return fail(err, "cannot read '%s': %s", path, strerror(errno));
  long long n = 0, nf = 0, nc = 0;
  if (!next_line(f, line, sizeof line) || sscanf(line, "%lld %lld %lld", &n, &nf, &nc) != 3 || n < 1 || nf < 1 ||
      nc < 1 || n > INT32_MAX || nf > INT32_MAX) {
    fclose(f);
    return fail(err, "'%s': expected a header 'nodes features classes'", path);
  }
  d->n = n, d->n_feat = nf, d->n_class = nc;
  d->label = malloc((size_t)n * sizeof *d->label);
  d->split = malloc((size_t)n);
  d->feat_ptr = malloc((size_t)(n + 1) * sizeof *d->feat_ptr);
  size_t cap = (size_t)n * 32, used = 0;
  d->feat_idx = malloc(cap * sizeof *d->feat_idx);
  if (!d->label || !d->split || !d->feat_ptr || !d->feat_idx) {
    fclose(f);
    gat_data_free(d);
    return fail(err, "out of memory");
  }
  d->feat_ptr[0] = 0;
  for (long long i = 0; i < n; i++) {
    char *p = line, *end;
    if (!next_line(f, line, sizeof line)) {
      fclose(f);
      gat_data_free(d);
      return fail(err, "'%s': %lld node lines; expected %lld", path, i, n);
    }
    long lab = strtol(p, &end, 10), sp = strtol(end, &end, 10), cnt = strtol(end, &end, 10);
    if (lab < 0 || lab >= nc || sp < 0 || sp > 3 || cnt < 0 || cnt > nf) {
      fclose(f);
      gat_data_free(d);
      return fail(err, "'%s': node %lld: bad label / split / count", path, i);
    }
    d->label[i] = (int32_t)lab;
    d->split[i] = (uint8_t)sp;
    d->count[sp]++;
    if (used + (size_t)cnt > cap) {
      cap = (used + (size_t)cnt) * 2;
      int32_t *g = realloc(d->feat_idx, cap * sizeof *g);
      if (!g) {
        fclose(f);
        gat_data_free(d);
        return fail(err, "out of memory");
      }
      d->feat_idx = g;
    }
    for (long c = 0; c < cnt; c++) {
      long v = strtol(end, &p, 10);
      if (p == end || v < 0 || v >= nf) {
        fclose(f);
        gat_data_free(d);
        return fail(err, "'%s': node %lld: bad feature index", path, i);
      }
      end = p;
      d->feat_idx[used + (size_t)c] = (int32_t)v;
    }
    qsort(d->feat_idx + used, (size_t)cnt, sizeof *d->feat_idx, cmp_i32);
    for (long c = 1; c < cnt; c++)
      if (d->feat_idx[used + (size_t)c] == d->feat_idx[used + (size_t)c - 1]) {
        fclose(f);
        gat_data_free(d);
        return fail(err, "'%s': node %lld lists a feature twice", path, i);
      }
    used += (size_t)cnt;
    d->feat_ptr[i + 1] = (int64_t)used;
  }
  fclose(f);

  snprintf(path, sizeof path, "%s/cora.edges", dir);
  f = fopen(path, "r");
  if (!f) {
    gat_data_free(d);
    return fail(err, "cannot read '%s': %s", path, strerror(errno));
  }
  long long m = 0;
  if (!next_line(f, line, sizeof line) || sscanf(line, "%lld", &m) != 1 || m < 0) {
    fclose(f);
    gat_data_free(d);
    return fail(err, "'%s': expected the edge count", path);
  }
  int32_t *ea = malloc((size_t)(m ? m : 1) * 2 * sizeof *ea);
  int64_t *deg = calloc((size_t)n + 1, sizeof *deg);
  if (!ea || !deg) {
    free(ea), free(deg), fclose(f), gat_data_free(d);
    return fail(err, "out of memory");
  }
  for (long long e = 0; e < m; e++) {
    long long a, b;
    if (!next_line(f, line, sizeof line) || sscanf(line, "%lld %lld", &a, &b) != 2 || a < 0 || b < 0 || a >= n ||
        b >= n || a == b) {
      free(ea), free(deg), fclose(f), gat_data_free(d);
      return fail(err, "'%s': edge %lld: expected 'a b' with distinct nodes in [0, %lld)", path, e, n);
    }
    ea[2 * e] = (int32_t)a, ea[2 * e + 1] = (int32_t)b;
    deg[a]++, deg[b]++;
  }
  fclose(f);
  /* both directions plus a self loop per node, rows sorted */
  d->adj_ptr = malloc((size_t)(n + 1) * sizeof *d->adj_ptr);
  d->adj_idx = malloc((size_t)(2 * m + n) * sizeof *d->adj_idx);
  if (!d->adj_ptr || !d->adj_idx) {
    free(ea), free(deg), gat_data_free(d);
    return fail(err, "out of memory");
  }
  d->adj_ptr[0] = 0;
  for (long long i = 0; i < n; i++)
    d->adj_ptr[i + 1] = d->adj_ptr[i] + deg[i] + 1;
  for (long long i = 0; i < n; i++) /* deg becomes the fill cursor */
    deg[i] = d->adj_ptr[i], d->adj_idx[deg[i]++] = (int32_t)i;
  for (long long e = 0; e < m; e++) {
    int32_t a = ea[2 * e], b = ea[2 * e + 1];
    d->adj_idx[deg[a]++] = b;
    d->adj_idx[deg[b]++] = a;
  }
  free(ea), free(deg);
  for (long long i = 0; i < n; i++) {
    int32_t *row = d->adj_idx + d->adj_ptr[i];
    int64_t c = d->adj_ptr[i + 1] - d->adj_ptr[i];
    qsort(row, (size_t)c, sizeof *row, cmp_i32);
    for (int64_t k = 1; k < c; k++)
      if (row[k] == row[k - 1]) {
        gat_data_free(d);
        return fail(err, "'%s': node %lld has a repeated edge", path, i);
      }
  }
  return 0;
}

void gat_data_free(gat_data *d) {
  free(d->label), free(d->split), free(d->feat_ptr), free(d->feat_idx), free(d->adj_ptr), free(d->adj_idx);
  memset(d, 0, sizeof *d);
}

/* ------------------------------------------------------------ model */

void gat_config_default(gat_config *c) {
  *c = (gat_config){.heads1 = 8,
                    .hidden1 = 8,
                    .in_drop = 0.6,
                    .hid_drop = 0.6,
                    .attn_drop = 0.6,
                    .slope = 0.2,
                    .lr = 0.005,
                    .weight_decay = 5e-4,
                    .attention = TG_PROVIDER_AUTO,
                    .dtype = TG_F32,
                    .seed = 0};
}

static uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

static int tape_fail(gat_model *m, char *err, const char *what) {
  return fail(err, "%s: %s", what, tg_tape_error(m->tape));
}

int gat_model_init(gat_model *m, tg_runtime *rt, const gat_config *cfg, const gat_data *d, char *err) {
  memset(m, 0, sizeof *m);
  m->cfg = *cfg;
  m->data = d;
  if (cfg->dtype != TG_F32 && cfg->dtype != TG_F64) return fail(err, "dtype: expected f32 or f64");
  if (tg_tape_create(rt, &m->tape)) return fail(err, "tg_tape_create: %s", tg_last_error());
  m->rt = rt;
  size_t E_bow = (size_t)d->feat_ptr[d->n];
  if (tg_relation_csr(rt, d->n, d->n, d->adj_ptr, (size_t)(d->n + 1) * sizeof(int64_t), d->adj_idx,
                      (size_t)d->adj_ptr[d->n] * sizeof(int32_t), &m->graph) ||
      tg_relation_csr(rt, d->n, d->n_feat, d->feat_ptr, (size_t)(d->n + 1) * sizeof(int64_t), d->feat_idx,
                      E_bow * sizeof(int32_t), &m->bow)) {
    fail(err, "relations: %s", tg_last_error());
    gat_model_free(m);
    return -1;
  }
  size_t es = tg_dtype_size(cfg->dtype);
  m->zeros = calloc((size_t)(d->n > d->n_feat ? d->n : d->n_feat), es);
  for (int s = 0; s < 3; s++)
    m->target[s] = malloc((size_t)d->n * sizeof(int32_t));
  if (!m->zeros || !m->target[0] || !m->target[1] || !m->target[2]) {
    gat_model_free(m);
    return fail(err, "out of memory");
  }
  for (int64_t i = 0; i < d->n; i++) {
    for (int s = 0; s < 3; s++)
      m->target[s][i] = d->split[i] == s ? d->label[i] : -1;
  }
  /* PyG's initialisation: glorot (U(+-sqrt(6 / (fan_in + fan_out)))) for lin and att, zero bias */
  const int64_t H = cfg->heads1, C = cfg->hidden1, K = d->n_class;
  const int64_t shapes[8][2] = {{d->n_feat, H * C}, {H, C}, {H, C}, {H * C, 0}, {H * C, K}, {1, K}, {1, K}, {K, 0}};
  tg_id *ids[8] = {&m->w1, &m->a_src1, &m->a_dst1, &m->b1, &m->w2, &m->a_src2, &m->a_dst2, &m->b2};
  /* PyG's GATConv parameter names (checkpoints store parameters by name) */
  static const char *const names[8] = {"conv1.lin.weight", "conv1.att_src", "conv1.att_dst", "conv1.bias",
                                       "conv2.lin.weight", "conv2.att_src", "conv2.att_dst", "conv2.bias"};
  for (int p = 0; p < 8; p++) {
    tg_init_options io;
    tg_init_options_init(&io);
    io.kind = shapes[p][1] ? TG_INIT_XAVIER_UNIFORM : TG_INIT_ZEROS;
    io.seed = splitmix64(cfg->seed * 16 + (uint64_t)p);
    if (tg_tape_parameter_init(m->tape, cfg->dtype, shapes[p][1] ? 2 : 1, shapes[p], &io, 0, ids[p]) ||
        tg_tape_set_name(m->tape, *ids[p], names[p])) {
      fail(err, "parameters: %s", tg_tape_error(m->tape));
      gat_model_free(m);
      return -1;
    }
  }
  return 0;
}

void gat_model_free(gat_model *m) {
  tg_tape_destroy(m->tape);
  tg_relation_destroy(m->graph);
  tg_relation_destroy(m->bow);
  free(m->zeros);
  for (int s = 0; s < 3; s++)
    free(m->target[s]);
  memset(m, 0, sizeof *m);
}

void gat_model_params(const gat_model *m, tg_id ids[8]) {
  const tg_id p[8] = {m->w1, m->a_src1, m->a_dst1, m->b1, m->w2, m->a_src2, m->a_dst2, m->b2};
  memcpy(ids, p, sizeof p);
}

/* One GAT layer on z [n, H, C] (the projected features): scores, attention, heads concatenated, bias. */
static tg_id gat_layer(gat_model *m, tg_id z, tg_id a_src, tg_id a_dst, tg_id b, int64_t H, int64_t C, int train) {
  tg_tape *t = m->tape;
  tg_id e_src = tg_dot_last(t, z, a_src), e_dst = tg_dot_last(t, z, a_dst);
  tg_graph_attention_options o;
  tg_graph_attention_options_init(&o);
  o.negative_slope = m->cfg.slope;
  o.dropout_keep = train && m->cfg.attn_drop > 0 ? 1 - m->cfg.attn_drop : 1;
  tg_provider prev;
  tg_tape_set_provider(t, m->cfg.attention, &prev);
  tg_id o1 = tg_gat_attention(t, m->graph, e_dst, e_src, z, &o);
  tg_tape_set_provider(t, prev, NULL);
  int64_t flat[2] = {m->data->n, H * C};
  return tg_add(t, tg_reshape(t, o1, 2, flat), b);
}

tg_id gat_logits(gat_model *m, int train) {
  tg_tape *t = m->tape;
  const gat_data *d = m->data;
  const int64_t H = m->cfg.heads1, C = m->cfg.hidden1, K = d->n_class;
  /* x W1: the mean of W1's rows over each node's active features (equal scores 0 on bow), with the
   * input dropout as the attention's dropout of pairs (gat.h) */
  const size_t es = tg_dtype_size(m->cfg.dtype);
  int64_t sn[2] = {d->n, 1}, sf[2] = {d->n_feat, 1}, sw[3] = {d->n_feat, 1, H * C};
  tg_id z_dst, z_src;
  if (tg_tape_input(t, m->cfg.dtype, 2, sn, m->zeros, (size_t)d->n * es, 0, &z_dst) ||
      tg_tape_input(t, m->cfg.dtype, 2, sf, m->zeros, (size_t)d->n_feat * es, 0, &z_src))
    return TG_NO_ID;
  tg_graph_attention_options xo;
  tg_graph_attention_options_init(&xo);
  xo.dropout_keep = train && m->cfg.in_drop > 0 ? 1 - m->cfg.in_drop : 1;
  tg_id w1 = tg_reshape(t, m->w1, 3, sw);
  tg_provider prev;
  tg_tape_set_provider(t, m->cfg.attention, &prev);
  tg_id xw = tg_gat_attention(t, m->bow, z_dst, z_src, w1, &xo);
  tg_tape_set_provider(t, prev, NULL);
  int64_t s1[3] = {d->n, H, C}, s2[3] = {d->n, 1, K};
  tg_id h = tg_elu(t, gat_layer(m, tg_reshape(t, xw, 3, s1), m->a_src1, m->a_dst1, m->b1, H, C, train), 1.0);
  if (train && m->cfg.hid_drop > 0) h = tg_dropout(t, h, 1 - m->cfg.hid_drop);
  tg_id z2 = tg_reshape(t, tg_linear(t, h, m->w2, TG_ABSENT), 3, s2);
  return gat_layer(m, z2, m->a_src2, m->a_dst2, m->b2, 1, K, train);
}

/* Profiling (cfg.profile): the clock read when a phase's calls have returned (host time), then the
 * device drained and the clock read again (phase time). */
static double clock_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static double phase_mark(gat_model *m, double t0, int phase) {
  if (!m->cfg.profile) return 0;
  const int count = phase >= 0 && m->steps >= GAT_PROFILE_WARMUP;
  if (count) m->host_s[phase] += clock_s() - t0;
  tg_runtime_sync(m->rt);
  double now = clock_s();
  if (count) m->phase_s[phase] += now - t0;
  if (count && phase == 2) m->prof_steps++;
  return now;
}

int gat_train_step(gat_model *m, double *loss, char *err) {
  tg_tape *t = m->tape;
  double t0 = phase_mark(m, 0, -1);
  if (tg_tape_reset(t)) return tape_fail(m, err, "reset");
  tg_tape_set_seed(t, splitmix64(m->cfg.seed ^ splitmix64(m->steps + 0x6a09e667f3bcc909ull)));
  tg_id logits = gat_logits(m, 1);
  tg_id tgt;
  int64_t sn[1] = {m->data->n};
  if (tg_tape_input(t, TG_I32, 1, sn, m->target[GAT_TRAIN], (size_t)m->data->n * sizeof(int32_t), 0, &tgt))
    return tape_fail(m, err, "targets");
  tg_id l = tg_cross_entropy(t, logits, tgt, -1);
  if (tg_tape_status(t)) return tape_fail(m, err, "forward");
  t0 = phase_mark(m, t0, 0);
  if (m->cfg.profile) tg_tape_stats(t, &m->nodes, NULL);
  if (tg_tape_zero_grad(t) || tg_tape_backward(t, l)) return tape_fail(m, err, "backward");
  t0 = phase_mark(m, t0, 1);
  tg_adam_options o;
  tg_adam_options_init(&o);
  o.lr = m->cfg.lr;
  o.weight_decay = m->cfg.weight_decay;
  if (tg_adam_step(t, &o)) return tape_fail(m, err, "adam");
  phase_mark(m, t0, 2);
  if (loss && tg_tape_scalar(t, l, loss)) return tape_fail(m, err, "loss");
  m->steps++;
  return 0;
}

int gat_evaluate(gat_model *m, double loss[3], double acc[3], char *err) {
  tg_tape *t = m->tape;
  const gat_data *d = m->data;
  int prev = 1;
  if (tg_tape_reset(t)) return tape_fail(m, err, "reset");
  tg_tape_set_grad_enabled(t, 0, &prev);
  tg_id logits = gat_logits(m, 0);
  const int64_t n = d->n, K = d->n_class;
  double *lg = malloc((size_t)(n * K) * sizeof *lg);
  void *raw = malloc((size_t)(n * K) * tg_dtype_size(m->cfg.dtype));
  int rc = 0;
  if (!lg || !raw)
    rc = fail(err, "out of memory");
  else if (tg_tape_status(t) || tg_tape_read(t, logits, raw, (size_t)(n * K) * tg_dtype_size(m->cfg.dtype)))
    rc = tape_fail(m, err, "evaluation");
  tg_tape_set_grad_enabled(t, prev, NULL);
  if (!rc) {
    for (int64_t i = 0; i < n * K; i++)
      lg[i] = m->cfg.dtype == TG_F32 ? (double)((float *)raw)[i] : ((double *)raw)[i];
    double sl[3] = {0, 0, 0}, sc[3] = {0, 0, 0};
    for (int64_t i = 0; i < n; i++) {
      int s = d->split[i];
      if (s > GAT_TEST) continue;
      const double *r = lg + i * K;
      int64_t best = 0;
      double mx = r[0];
      for (int64_t k = 1; k < K; k++)
        if (r[k] > mx) mx = r[k], best = k;
      double z = 0;
      for (int64_t k = 0; k < K; k++)
        z += exp(r[k] - mx);
      sl[s] += mx + log(z) - r[d->label[i]];
      sc[s] += best == d->label[i];
    }
    for (int s = 0; s < 3; s++) {
      double c = d->count[s] ? (double)d->count[s] : 1;
      if (loss) loss[s] = sl[s] / c;
      if (acc) acc[s] = sc[s] / c;
    }
  }
  free(lg), free(raw);
  return rc;
}
