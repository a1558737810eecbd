/* charlm.c — data, model, training step, evaluation, sampling and checkpoints of the char model
 * (see charlm.h for the model and its conventions). */
#include "charlm.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(char *err, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, CHARLM_ERR, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* ------------------------------------------------------------ RNG */

static uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void charlm_rng_seed(charlm_rng *r, uint64_t seed) {
  r->s = splitmix64(seed);
  if (!r->s) r->s = 0x2545f4914f6cdd1dull; /* xorshift's one forbidden state */
}

uint64_t charlm_rng_next(charlm_rng *r) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return r->s * 0x2545f4914f6cdd1dull;
}

/* The modulo bias is below n / 2^64: irrelevant for window offsets of a text. */
uint64_t charlm_rng_below(charlm_rng *r, uint64_t n) { return charlm_rng_next(r) % n; }
double charlm_rng_uniform(charlm_rng *r) { return (double)(charlm_rng_next(r) >> 11) * 0x1.0p-53; }

/* ------------------------------------------------------------ data */

int charlm_data_from_text(charlm_data *d, const unsigned char *text, int64_t n, char *err) {
  memset(d, 0, sizeof *d);
  if (n < 2) return fail(err, "the text has %lld bytes; expected at least 2", (long long)n);
  int seen[256] = {0};
  for (int64_t i = 0; i < n; i++)
    seen[text[i]] = 1;
  for (int c = 0; c < 256; c++) {
    d->stoi[c] = seen[c] ? d->vocab : -1;
    if (seen[c]) d->itos[d->vocab++] = (unsigned char)c;
  }
  d->tokens = malloc((size_t)n);
  if (!d->tokens) return fail(err, "out of memory for %lld tokens", (long long)n);
  for (int64_t i = 0; i < n; i++)
    d->tokens[i] = (uint8_t)d->stoi[text[i]];
  d->n = n;
  d->n_train = n * 9 / 10;
  return 0;
}

int charlm_data_load(charlm_data *d, const char *path, char *err) {
  memset(d, 0, sizeof *d);
  FILE *f = fopen(path, "rb");
  if (!f) return fail(err, "cannot open data file '%s': %s", path, strerror(errno));
  size_t cap = 1 << 20, n = 0;
  unsigned char *buf = malloc(cap);
  for (;;) {
    if (!buf) {
      fclose(f);
      return fail(err, "out of memory reading '%s'", path);
    }
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    unsigned char *nb = realloc(buf, cap * 2);
    if (!nb) free(buf);
    buf = nb;
    cap *= 2;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    return fail(err, "cannot read data file '%s' (is it a directory?)", path);
  }
  int rc = charlm_data_from_text(d, buf, (int64_t)n, err);
  free(buf);
  if (rc) {
    char tmp[CHARLM_ERR];
    snprintf(tmp, sizeof tmp, "data file '%s': %s", path, err);
    memcpy(err, tmp, sizeof tmp);
  }
  return rc;
}

void charlm_data_free(charlm_data *d) {
  free(d->tokens);
  memset(d, 0, sizeof *d);
}

int charlm_data_check_context(const charlm_data *d, int64_t context, char *err) {
  int64_t n_val = d->n - d->n_train;
  int64_t smallest = n_val < d->n_train ? n_val : d->n_train;
  if (smallest < context + 1)
    return fail(err,
                "a context of %lld needs at least %lld tokens in each split, but the data has %lld "
                "(train %lld, validation %lld); use a smaller --context or more data",
                (long long)context, (long long)context + 1, (long long)d->n, (long long)d->n_train, (long long)n_val);
  return 0;
}

void charlm_batch(const charlm_data *d, int split, int64_t B, int64_t T, charlm_rng *r, int32_t *x, int32_t *y) {
  const uint8_t *s = split ? d->tokens + d->n_train : d->tokens;
  int64_t len = split ? d->n - d->n_train : d->n_train;
  for (int64_t b = 0; b < B; b++) {
    int64_t o = (int64_t)charlm_rng_below(r, (uint64_t)(len - T)); /* o + T <= len - 1 */
    for (int64_t i = 0; i < T; i++) {
      x[b * T + i] = s[o + i];
      y[b * T + i] = s[o + i + 1];
    }
  }
}

/* ------------------------------------------------------------ model */

int charlm_config_check(const charlm_config *c, char *err) {
  if (c->layers < 1 || c->heads < 1 || c->d_model < 1 || c->context < 1 || c->vocab < 1)
    return fail(err, "layers (%d), heads (%d), d_model (%d), context (%d) and vocab (%d) must all be >= 1", c->layers,
                c->heads, c->d_model, c->context, c->vocab);
  if (c->d_model % c->heads)
    return fail(err, "d_model %d is not a multiple of heads %d (each head gets d_model / heads dims)", c->d_model,
                c->heads);
  if (!(c->dropout >= 0 && c->dropout < 1)) return fail(err, "dropout %g is outside [0, 1)", c->dropout);
  if (!(c->attn_dropout >= 0 && c->attn_dropout < 1))
    return fail(err, "attn_dropout %g is outside [0, 1)", c->attn_dropout);
  if (c->compute != TG_F32 && c->compute != TG_BF16 && c->compute != TG_F16)
    return fail(err, "compute dtype %s is not supported; expected f32, bf16 or f16", tg_dtype_name(c->compute));
  return 0;
}

static int tape_fail(charlm_model *m, char *err, const char *what) {
  return fail(err, "%s: %s", what, tg_tape_error(m->tape));
}

int charlm_model_init(charlm_model *m, tg_runtime *rt, const charlm_config *cfg, uint64_t seed, char *err) {
  memset(m, 0, sizeof *m);
  if (charlm_config_check(cfg, err)) return -1;
  m->cfg = *cfg;
  m->rt = rt;
  if (tg_tape_create(rt, &m->tape)) return fail(err, "tg_tape_create: %s", tg_last_error());
  if (tg_tape_set_provider(m->tape, cfg->provider, NULL)) return tape_fail(m, err, "tg_tape_set_provider");
  m->blocks = calloc((size_t)cfg->layers, sizeof *m->blocks);
  if (!m->blocks) return fail(err, "out of memory");
  if (cfg->compute == TG_F16 && tg_loss_scaler_create(NULL, &m->scaler))
    return fail(err, "tg_loss_scaler_create: %s", tg_last_error());

  const int64_t D = cfg->d_model;
  const double std = 0.02, proj_std = 0.02 / sqrt(2.0 * cfg->layers);
  uint64_t k = 0; /* every parameter draws from its own Philox key */
  tg_status s = TG_OK;
  char name_[64];
#define PARAM(id, r, c, kind_, a_, b_, flags, ...)                                                                     \
  do {                                                                                                                 \
    int64_t shp_[2] = {(r), (c)}, cols_ = (c);                                                                         \
    int nd_ = cols_ != 0 ? 2 : 1;                                                                                      \
    tg_init_options in_;                                                                                               \
    tg_init_options_init(&in_);                                                                                        \
    in_.kind = (kind_), in_.a = (a_), in_.b = (b_), in_.seed = splitmix64(seed ^ (++k * 0x9e3779b97f4a7c15ull));       \
    if (!s) s = tg_tape_parameter_init(m->tape, TG_F32, nd_, shp_, &in_, (flags), &(id));                              \
    snprintf(name_, sizeof name_, __VA_ARGS__); /* nanoGPT's names: checkpoints store parameters by name */            \
    if (!s) s = tg_tape_set_name(m->tape, (id), name_);                                                                \
    if (!s) m->n_params += shp_[0] * (cols_ != 0 ? cols_ : 1);                                                         \
  } while (0)
  PARAM(m->wte, cfg->vocab, D, TG_INIT_NORMAL, 0, std, 0, "wte");
  PARAM(m->wpe, cfg->context, D, TG_INIT_NORMAL, 0, std, 0, "wpe");
  for (int l = 0; l < cfg->layers; l++) {
    charlm_block *b = &m->blocks[l];
    PARAM(b->ln1_w, D, 0, TG_INIT_ONES, 0, 0, TG_NO_WEIGHT_DECAY, "h.%d.ln_1.w", l);
    PARAM(b->ln1_b, D, 0, TG_INIT_ZEROS, 0, 0, TG_NO_WEIGHT_DECAY, "h.%d.ln_1.b", l);
    PARAM(b->wq, D, D, TG_INIT_NORMAL, 0, std, 0, "h.%d.attn.wq", l);
    PARAM(b->wk, D, D, TG_INIT_NORMAL, 0, std, 0, "h.%d.attn.wk", l);
    PARAM(b->wv, D, D, TG_INIT_NORMAL, 0, std, 0, "h.%d.attn.wv", l);
    PARAM(b->wo, D, D, TG_INIT_NORMAL, 0, proj_std, 0, "h.%d.attn.c_proj", l);
    PARAM(b->ln2_w, D, 0, TG_INIT_ONES, 0, 0, TG_NO_WEIGHT_DECAY, "h.%d.ln_2.w", l);
    PARAM(b->ln2_b, D, 0, TG_INIT_ZEROS, 0, 0, TG_NO_WEIGHT_DECAY, "h.%d.ln_2.b", l);
    PARAM(b->fc, D, 4 * D, TG_INIT_NORMAL, 0, std, 0, "h.%d.mlp.c_fc", l);
    PARAM(b->proj, 4 * D, D, TG_INIT_NORMAL, 0, proj_std, 0, "h.%d.mlp.c_proj", l);
  }
  PARAM(m->lnf_w, D, 0, TG_INIT_ONES, 0, 0, TG_NO_WEIGHT_DECAY, "ln_f.w");
  PARAM(m->lnf_b, D, 0, TG_INIT_ZEROS, 0, 0, TG_NO_WEIGHT_DECAY, "ln_f.b");
#undef PARAM
  if (s) return tape_fail(m, err, "creating the parameters");
  return 0;
}

void charlm_model_free(charlm_model *m) {
  tg_loss_scaler_destroy(m->scaler);
  tg_tape_destroy(m->tape);
  free(m->blocks);
  memset(m, 0, sizeof *m);
}

/* Autocast: the matmuls and attention see bf16 copies; everything else stays f32. */
static tg_id lowp(const charlm_model *m, tg_id v) {
  return m->cfg.compute == TG_F32 ? v : tg_cast(m->tape, v, m->cfg.compute);
}
static tg_id fullp(const charlm_model *m, tg_id v) {
  return m->cfg.compute == TG_F32 ? v : tg_cast(m->tape, v, TG_F32);
}
static tg_id drop(const charlm_model *m, tg_id v, int train) {
  return train && m->cfg.dropout > 0 ? tg_dropout(m->tape, v, 1.0 - m->cfg.dropout) : v;
}

tg_id charlm_logits(charlm_model *m, tg_id x, int64_t B, int64_t T, int train) {
  (void)B;
  tg_tape *t = m->tape;
  const charlm_config *c = &m->cfg;
  const double eps = 1e-5;
  tg_id pos = m->wpe; /* [context, D] broadcasts over the batch when T == context */
  if (T != c->context) {
    int32_t *ids = malloc((size_t)T * sizeof *ids);
    if (!ids) return TG_NO_ID;
    for (int64_t i = 0; i < T; i++)
      ids[i] = (int32_t)i;
    tg_id pid = TG_NO_ID;
    tg_tape_input(t, TG_I32, 1, &T, ids, (size_t)T * sizeof *ids, 0, &pid);
    free(ids);
    pos = tg_embedding(t, m->wpe, pid);
  }
  tg_id h = drop(m, tg_add(t, tg_embedding(t, m->wte, x), pos), train);

  tg_mha_options mo;
  tg_mha_options_init(&mo);
  mo.heads_q = mo.heads_kv = c->heads;
  mo.causal = 1; /* a causal relation needs no device form: nothing is uploaded per step */
  mo.attention_provider = c->attention;
  mo.attention_dropout_keep = train && c->attn_dropout > 0 ? 1.0 - c->attn_dropout : 1;
  for (int l = 0; l < c->layers; l++) {
    const charlm_block *b = &m->blocks[l];
    tg_id a = lowp(m, tg_layernorm(t, h, b->ln1_w, b->ln1_b, eps));
    a = tg_mha(t, a, lowp(m, b->wq), lowp(m, b->wk), lowp(m, b->wv), lowp(m, b->wo), &mo);
    h = tg_add(t, h, drop(m, fullp(m, a), train));
    tg_id f = lowp(m, tg_layernorm(t, h, b->ln2_w, b->ln2_b, eps));
    f = tg_gelu(t, tg_linear(t, f, lowp(m, b->fc), TG_ABSENT));
    f = tg_linear(t, f, lowp(m, b->proj), TG_ABSENT);
    h = tg_add(t, h, drop(m, fullp(m, f), train));
  }
  h = lowp(m, tg_layernorm(t, h, m->lnf_w, m->lnf_b, eps));
  /* tied head: logits = h wte^T (nanoGPT shares wte with lm_head) */
  return fullp(m, tg_linear(t, h, tg_transpose(t, lowp(m, m->wte), 0, 1), TG_ABSENT));
}

/* Per-step seed for the dropout masks, so a resumed run draws the same masks. */
static uint64_t step_seed(uint64_t seed, int64_t step) {
  return splitmix64(seed ^ splitmix64((uint64_t)step + 0x6a09e667f3bcc909ull));
}

static int batch_inputs(charlm_model *m, const int32_t *x, const int32_t *y, int64_t B, int64_t T, tg_id *xi, tg_id *yi,
                        char *err) {
  int64_t shp[2] = {B, T};
  size_t bytes = (size_t)(B * T) * sizeof(int32_t);
  if (tg_tape_input(m->tape, TG_I32, 2, shp, x, bytes, 0, xi) ||
      tg_tape_input(m->tape, TG_I32, 2, shp, y, bytes, 0, yi))
    return tape_fail(m, err, "tg_tape_input");
  return 0;
}

int charlm_train_step(charlm_model *m, const int32_t *x, const int32_t *y, int64_t B, int64_t T,
                      const charlm_train_opts *o, double lr, int64_t step, tg_id *loss, char *err) {
  tg_tape *t = m->tape;
  *loss = TG_NO_ID;
  if (tg_tape_reset(t)) return tape_fail(m, err, "tg_tape_reset");
  tg_tape_zero_grad(t);
  tg_tape_set_seed(t, step_seed(o->seed, step));
  tg_id xi, yi;
  if (batch_inputs(m, x, y, B, T, &xi, &yi, err)) return -1;
  tg_id l = tg_cross_entropy(t, charlm_logits(m, xi, B, T, 1), yi, TG_NO_IGNORE);
  /* f16: backward from loss * S so that small f16 gradients do not flush to zero */
  tg_id root = m->scaler ? tg_loss_scaler_scale(t, m->scaler, l) : l;
  /* no tg_tape_status here: backward reports a failed forward too, and in anomaly mode a status
   * check would wait for the device between forward and backward (backward reads the forward's
   * flag with its own, at its end) */
  if (tg_tape_backward(t, root)) return tape_fail(m, err, "tg_tape_backward");
  if (m->comm && tg_comm_finish_gradients(m->comm, t)) /* before unscale: found-inf agrees across ranks */
    return fail(err, "tg_comm_finish_gradients: %s", tg_comm_error(m->comm));
  if (m->scaler) {
    int found_inf = 0;
    if (tg_loss_scaler_unscale(t, m->scaler, &found_inf)) return tape_fail(m, err, "tg_loss_scaler_unscale");
    if (found_inf) { /* overflow at this scale: skip the step (the scale has backed off) */
      m->skipped++;
      *loss = l;
      return 0;
    }
  }
  if (o->clip > 0 && tg_clip_grad_norm(t, o->clip, NULL)) return tape_fail(m, err, "tg_clip_grad_norm");
  tg_adamw_options ao = {sizeof ao, lr, o->beta1, o->beta2, o->eps, o->weight_decay};
  if (tg_adamw_step(t, &ao)) return tape_fail(m, err, "tg_adamw_step");
  *loss = l;
  return 0;
}

int charlm_evaluate(charlm_model *m, const charlm_data *d, int split, int iters, int64_t B, charlm_rng *r, double *mean,
                    char *err) {
  tg_tape *t = m->tape;
  const int64_t T = m->cfg.context;
  int32_t *x = malloc((size_t)(B * T) * sizeof *x), *y = malloc((size_t)(B * T) * sizeof *y);
  int prev = 1, rc = 0;
  double sum = 0;
  if (!x || !y) rc = fail(err, "out of memory for an evaluation batch");
  tg_tape_set_grad_enabled(t, 0, &prev);
  for (int i = 0; i < iters && !rc; i++) {
    double v = 0;
    tg_id xi, yi;
    charlm_batch(d, split, B, T, r, x, y);
    if (tg_tape_reset(t))
      rc = tape_fail(m, err, "tg_tape_reset");
    else if (batch_inputs(m, x, y, B, T, &xi, &yi, err))
      rc = -1;
    else if (tg_tape_scalar(t, tg_cross_entropy(t, charlm_logits(m, xi, B, T, 0), yi, TG_NO_IGNORE), &v))
      rc = tape_fail(m, err, "evaluation");
    sum += v;
  }
  tg_tape_set_grad_enabled(t, prev, NULL);
  tg_tape_reset(t);
  free(x);
  free(y);
  *mean = rc ? NAN : sum / iters;
  return rc;
}

double charlm_lr(int64_t step, int64_t warmup, int64_t total, double lr, double min_lr) {
  if (step < warmup) return lr * (double)(step + 1) / (double)(warmup + 1);
  if (step >= total) return min_lr;
  double ratio = (double)(step - warmup) / (double)(total - warmup);
  return min_lr + 0.5 * (1.0 + cos(3.14159265358979323846 * ratio)) * (lr - min_lr);
}

/* ------------------------------------------------------------ sampling */

static int desc_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x < y) - (x > y);
}

/* Draws from softmax(logits / temperature) restricted to the top_k largest logits (ties at the
 * k-th value are kept). p and sorted are scratch of V entries. */
static int draw(const float *logits, int V, double temperature, int top_k, charlm_rng *r, double *p, float *sorted) {
  double cut = -INFINITY;
  if (top_k > 0 && top_k < V) {
    memcpy(sorted, logits, (size_t)V * sizeof *sorted);
    qsort(sorted, (size_t)V, sizeof *sorted, desc_float);
    cut = sorted[top_k - 1];
  }
  double mx = -INFINITY, z = 0;
  for (int i = 0; i < V; i++)
    if (logits[i] >= cut && logits[i] > mx) mx = logits[i];
  for (int i = 0; i < V; i++) {
    p[i] = logits[i] >= cut ? exp((logits[i] - mx) / temperature) : 0;
    z += p[i];
  }
  double u = charlm_rng_uniform(r) * z;
  int last = 0;
  for (int i = 0; i < V; i++) {
    if (p[i] <= 0) continue;
    last = i;
    if (u < p[i]) return i;
    u -= p[i];
  }
  return last;
}

int charlm_sample(charlm_model *m, const charlm_data *d, const int32_t *prompt, int n_prompt, int n, double temperature,
                  int top_k, charlm_rng *r, char *out, char *err) {
  tg_tape *t = m->tape;
  const int V = m->cfg.vocab, C = m->cfg.context;
  if (n_prompt < 1) return fail(err, "sampling needs a prompt of at least one token");
  int32_t *seq = malloc((size_t)(n_prompt + n) * sizeof *seq);
  float *logits = malloc((size_t)C * V * sizeof *logits);
  double *p = malloc((size_t)V * sizeof *p);
  float *sorted = malloc((size_t)V * sizeof *sorted);
  int rc = 0, prev = 1, len = n_prompt;
  if (!seq || !logits || !p || !sorted)
    rc = fail(err, "out of memory for sampling");
  else
    memcpy(seq, prompt, (size_t)n_prompt * sizeof *seq);
  tg_tape_set_grad_enabled(t, 0, &prev);
  for (int i = 0; i < n && !rc; i++) {
    int64_t T = len < C ? len : C, shp[2] = {1, T};
    tg_id xi;
    if (tg_tape_reset(t) || tg_tape_input(t, TG_I32, 2, shp, seq + len - T, (size_t)T * sizeof *seq, 0, &xi)) {
      rc = tape_fail(m, err, "sampling");
      break;
    }
    tg_id lg = charlm_logits(m, xi, 1, T, 0);
    if (tg_tape_status(t) || tg_tape_read(t, lg, logits, (size_t)(T * V) * sizeof *logits)) {
      rc = tape_fail(m, err, "sampling");
      break;
    }
    seq[len] = draw(logits + (T - 1) * V, V, temperature, top_k, r, p, sorted);
    out[i] = (char)d->itos[seq[len]];
    len++;
  }
  out[rc ? 0 : n] = 0;
  tg_tape_set_grad_enabled(t, prev, NULL);
  tg_tape_reset(t);
  free(seq);
  free(logits);
  free(p);
  free(sorted);
  return rc;
}

/* ------------------------------------------------------------ checkpoints */

static void meta_path(char *dst, size_t cap, const char *path) { snprintf(dst, cap, "%s.meta", path); }

int charlm_ckpt_save(charlm_model *m, const charlm_data *d, const char *path, const charlm_ckpt_state *s, char *err) {
  char mp[4096];
  meta_path(mp, sizeof mp, path);
  if (tg_tape_save(m->tape, path)) return fail(err, "saving checkpoint '%s': %s", path, tg_tape_error(m->tape));
  FILE *f = fopen(mp, "w");
  if (!f) return fail(err, "cannot write checkpoint sidecar '%s': %s", mp, strerror(errno));
  const charlm_config *c = &m->cfg;
  fprintf(f, "charlm-checkpoint 1\nlayers %d\nheads %d\nd_model %d\ncontext %d\nvocab %d\nvocab_bytes ", c->layers,
          c->heads, c->d_model, c->context, c->vocab);
  for (int i = 0; i < d->vocab; i++)
    fprintf(f, "%02x", d->itos[i]);
  fprintf(f, "\nstep %lld\nrng %llu\nelapsed %.17g\n", (long long)s->step, (unsigned long long)s->rng, s->elapsed_s);
  if (m->scaler) { /* f16: the loss scaler's state, so that a resumed run keeps its scale */
    double scale = 0;
    int64_t tracker = 0;
    tg_loss_scaler_state(m->scaler, &scale, &tracker);
    fprintf(f, "loss_scale %.17g\nloss_scale_tracker %lld\n", scale, (long long)tracker);
  }
  if (fclose(f)) return fail(err, "cannot write checkpoint sidecar '%s': %s", mp, strerror(errno));
  return 0;
}

int charlm_ckpt_load(charlm_model *m, const charlm_data *d, const char *path, charlm_ckpt_state *s, char *err) {
  char mp[4096], key[64], hex[600] = "", want[600] = "";
  meta_path(mp, sizeof mp, path);
  FILE *f = fopen(mp, "r");
  if (!f)
    return fail(err, "cannot open checkpoint sidecar '%s': %s (was the checkpoint written by train_charlm?)", mp,
                strerror(errno));
  long long step = -1, L = -1, H = -1, Dm = -1, C = -1, V = -1, tracker = -1;
  unsigned long long rng = 0;
  double elapsed = 0, scale = 0;
  int version = 0;
  if (fscanf(f, "charlm-checkpoint %d", &version) != 1 || version != 1) {
    fclose(f);
    return fail(err, "'%s' is not a charlm checkpoint sidecar (version 1)", mp);
  }
  while (fscanf(f, "%63s", key) == 1) {
    int ok = 1;
    if (!strcmp(key, "layers"))
      ok = fscanf(f, "%lld", &L) == 1;
    else if (!strcmp(key, "heads"))
      ok = fscanf(f, "%lld", &H) == 1;
    else if (!strcmp(key, "d_model"))
      ok = fscanf(f, "%lld", &Dm) == 1;
    else if (!strcmp(key, "context"))
      ok = fscanf(f, "%lld", &C) == 1;
    else if (!strcmp(key, "vocab"))
      ok = fscanf(f, "%lld", &V) == 1;
    else if (!strcmp(key, "vocab_bytes"))
      ok = fscanf(f, "%599s", hex) == 1;
    else if (!strcmp(key, "step"))
      ok = fscanf(f, "%lld", &step) == 1;
    else if (!strcmp(key, "rng"))
      ok = fscanf(f, "%llu", &rng) == 1;
    else if (!strcmp(key, "elapsed"))
      ok = fscanf(f, "%lf", &elapsed) == 1;
    else if (!strcmp(key, "loss_scale"))
      ok = fscanf(f, "%lf", &scale) == 1;
    else if (!strcmp(key, "loss_scale_tracker"))
      ok = fscanf(f, "%lld", &tracker) == 1;
    else
      ok = fscanf(f, "%*s") == 0;
    if (!ok) {
      fclose(f);
      return fail(err, "checkpoint sidecar '%s' is malformed near '%s'", mp, key);
    }
  }
  fclose(f);
  if (step < 0 || L < 0 || H < 0 || Dm < 0 || C < 0 || V < 0 || !rng)
    return fail(err, "checkpoint sidecar '%s' is incomplete", mp);
  const charlm_config *c = &m->cfg;
  if (L != c->layers || H != c->heads || Dm != c->d_model || C != c->context || V != c->vocab)
    return fail(err,
                "checkpoint '%s' is from another config: it has --layers %lld --heads %lld --d-model %lld "
                "--context %lld (vocab %lld); this run has --layers %d --heads %d --d-model %d --context %d "
                "(vocab %d). Pass the checkpoint's model flags or start without --resume",
                path, L, H, Dm, C, V, c->layers, c->heads, c->d_model, c->context, c->vocab);
  for (int i = 0; i < d->vocab; i++)
    snprintf(want + 2 * i, 3, "%02x", d->itos[i]);
  if (strcmp(hex, want))
    return fail(err, "checkpoint '%s' was trained on another vocabulary (another --data file?)", path);
  if (tg_tape_load(m->tape, path)) return fail(err, "loading checkpoint '%s': %s", path, tg_tape_error(m->tape));
  /* an f16 run takes the scaler's state when the checkpoint has one (an f32 checkpoint has none:
   * the scaler keeps its initial scale); an f32 run ignores it */
  if (m->scaler && tracker >= 0 && tg_loss_scaler_set_state(m->scaler, scale, tracker))
    return fail(err, "checkpoint sidecar '%s': loss_scale %g, loss_scale_tracker %lld: %s", mp, scale, tracker,
                tg_last_error());
  s->step = step;
  s->rng = rng;
  s->elapsed_s = elapsed;
  return 0;
}
