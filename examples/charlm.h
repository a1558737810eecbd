/*
 * charlm.h — a GPT-style character language model on the tiga tape (nanoGPT's shakespeare_char).
 *
 * Model (pre-LayerNorm GPT-2, nanoGPT with bias=False in the linears):
 *   h = drop(wte[x] + wpe[0..T))
 *   per block:  h = h + drop(MHA_causal(LN1(h)))           tg_mha: Wq Wk Wv [d, d], Wo [d, d]
 *               h = h + drop(gelu(LN2(h) W_fc) W_proj)      W_fc [d, 4d], W_proj [4d, d]
 *   logits = LN_f(h) wte^T                                  head tied to wte via tg_transpose
 *   loss = cross_entropy(logits, y)
 * Dropout sits where nanoGPT has it (embeddings, after the attention projection, after the MLP);
 * attention-probability dropout is cfg.attn_dropout (tg_mha's attention_dropout_keep).
 *
 * Pieces here are reusable by tests: data (vocabulary, split, batches), the RNG, the model, one
 * training step, evaluation, sampling, the learning-rate schedule and checkpoints (tg_tape_save
 * plus a text sidecar "<path>.meta" with the config, vocabulary, step and RNG state).
 * Functions that can fail return 0 on success, else -1 with a message in err (CHARLM_ERR bytes).
 */
#ifndef CHARLM_H
#define CHARLM_H

#include <stddef.h>
#include <stdint.h>

#include "tiga.h"

#define CHARLM_ERR 1024

/* ------------------------------------------------------------ RNG (xorshift64*, state != 0) */
typedef struct charlm_rng {
  uint64_t s;
} charlm_rng;
void charlm_rng_seed(charlm_rng *r, uint64_t seed);
uint64_t charlm_rng_next(charlm_rng *r);
/* Uniform in [0, n) (n >= 1) and in [0, 1). */
uint64_t charlm_rng_below(charlm_rng *r, uint64_t n);
double charlm_rng_uniform(charlm_rng *r);

/* ------------------------------------------------------------ data */
typedef struct charlm_data {
  int vocab;               /* number of distinct bytes */
  unsigned char itos[256]; /* token -> byte, sorted ascending */
  int stoi[256];           /* byte -> token, -1 if absent */
  uint8_t *tokens;         /* the whole text encoded */
  int64_t n;               /* its length */
  int64_t n_train;         /* first 90 % train, the rest validation */
} charlm_data;

/* Builds the vocabulary (sorted unique bytes) and the 90/10 split from text[0..n). */
int charlm_data_from_text(charlm_data *d, const unsigned char *text, int64_t n, char *err);
int charlm_data_load(charlm_data *d, const char *path, char *err);
void charlm_data_free(charlm_data *d);
/* Checks that both splits hold more than context + 1 tokens (one full (x, y) window). */
int charlm_data_check_context(const charlm_data *d, int64_t context, char *err);
/* B random windows of split 0 (train) or 1 (val): x[b, t] = s[o_b + t], y[b, t] = s[o_b + t + 1]. */
void charlm_batch(const charlm_data *d, int split, int64_t B, int64_t T, charlm_rng *r, int32_t *x, int32_t *y);

/* ------------------------------------------------------------ model */
typedef struct charlm_config {
  int layers, heads, d_model, context, vocab;
  double dropout;        /* drop probability in [0, 1) */
  tg_dtype compute;      /* TG_F32, or TG_BF16 / TG_F16: autocast-style mixed precision (f32 master
                            weights); f16 adds dynamic loss scaling (tg_loss_scaler) */
  tg_provider provider;  /* tape provider for every node (HOST for --device host, AUTO on CUDA) */
  tg_provider attention; /* provider of every MHA attention node (AUTO: the tape's) */
  double attn_dropout;   /* drop probability of the attention weights in [0, 1) (tg_mha's
                            attention_dropout_keep = 1 - it) */
} charlm_config;

typedef struct charlm_block {
  tg_id ln1_w, ln1_b, wq, wk, wv, wo, ln2_w, ln2_b, fc, proj;
} charlm_block;

typedef struct charlm_model {
  charlm_config cfg;
  tg_runtime *rt; /* borrowed */
  tg_tape *tape;  /* owned */
  tg_id wte, wpe, lnf_w, lnf_b;
  charlm_block *blocks;
  int64_t n_params;       /* number of scalars */
  tg_loss_scaler *scaler; /* compute f16 only: the dynamic loss scaler (owned) */
  int64_t skipped;        /* f16: steps skipped because the scaled gradients were not finite */
  tg_comm *comm;          /* data parallel (charlm_dp.h): borrowed, attached to tape; NULL: one GPU.
                             charlm_train_step averages the gradients over the ranks after backward */
} charlm_model;

/* Checks the config (sizes > 0, heads divide d_model, ...). */
int charlm_config_check(const charlm_config *c, char *err);
/* Creates the tape and the parameters, initialised as nanoGPT: N(0, 0.02) for weights and
 * embeddings, N(0, 0.02 / sqrt(2 layers)) for the two residual projections, LN weight 1, bias 0. */
int charlm_model_init(charlm_model *m, tg_runtime *rt, const charlm_config *cfg, uint64_t seed, char *err);
void charlm_model_free(charlm_model *m);

/* Logits [B, T, vocab] (f32) of token ids x ([B, T] I32 on the tape, T <= context). train
 * nonzero: dropout nodes are recorded (they are the identity in no-grad mode anyway). */
tg_id charlm_logits(charlm_model *m, tg_id x, int64_t B, int64_t T, int train);

typedef struct charlm_train_opts {
  double lr, weight_decay, beta1, beta2, eps;
  double clip;   /* global grad-norm bound; 0: no clipping */
  uint64_t seed; /* dropout masks are a function of (seed, step) */
} charlm_train_opts;

/* One optimisation step on batch (x, y) [B, T]: reset, forward, backward, clip, AdamW(lr),
 * zero grads. *loss receives the id of the loss (readable until the next reset); nothing is
 * read back from the device here, except with f16: the loss is scaled before backward and the
 * gradients unscaled after it (tg_loss_scaler, one 4-byte read), and a step whose gradients are
 * not finite is skipped (m->skipped counts them; the scale backs off) — PyTorch's GradScaler. */
int charlm_train_step(charlm_model *m, const int32_t *x, const int32_t *y, int64_t B, int64_t T,
                      const charlm_train_opts *o, double lr, int64_t step, tg_id *loss, char *err);
/* Mean loss over `iters` random batches of split 0/1, in no-grad mode (no dropout). */
int charlm_evaluate(charlm_model *m, const charlm_data *d, int split, int iters, int64_t B, charlm_rng *r, double *mean,
                    char *err);
/* nanoGPT's schedule: linear warmup lr (step+1)/(warmup+1), then cosine from lr to min_lr over
 * [warmup, total); min_lr from there on. */
double charlm_lr(int64_t step, int64_t warmup, int64_t total, double lr, double min_lr);

/* Appends n generated bytes to out (n + 1 bytes, NUL-terminated), starting from the prompt
 * tokens; context cropped to the model's; temperature > 0; top_k 0 = all. No-grad mode. */
int charlm_sample(charlm_model *m, const charlm_data *d, const int32_t *prompt, int n_prompt, int n, double temperature,
                  int top_k, charlm_rng *r, char *out, char *err);

/* ------------------------------------------------------------ checkpoints */
typedef struct charlm_ckpt_state {
  int64_t step;     /* completed training steps */
  uint64_t rng;     /* data RNG state */
  double elapsed_s; /* training wall time so far */
} charlm_ckpt_state;

/* tg_tape_save(path) (parameters + AdamW state) and "<path>.meta". */
int charlm_ckpt_save(charlm_model *m, const charlm_data *d, const char *path, const charlm_ckpt_state *s, char *err);
/* Reads "<path>.meta", refuses another config or vocabulary with a message naming the
 * difference, then tg_tape_load(path). */
int charlm_ckpt_load(charlm_model *m, const charlm_data *d, const char *path, charlm_ckpt_state *s, char *err);

#endif
