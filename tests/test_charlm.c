/* The char model example (examples/charlm.c, compiled into this test): vocabulary, split and
 * batches against the text, the lr schedule against its formula, a tiny config whose loss must
 * fall, a checkpoint round trip that must give a bit-identical next step, sampling, and the
 * error paths (bad config, context too long, another config's checkpoint, missing sidecar).
 * Host provider only; a few seconds under ASan. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../examples/charlm.c"
#include "support.h"

/* The corpus shipped with the example, found from this file's path (CMake compiles with
 * absolute paths). */
static void load_corpus(charlm_data *d) {
  char path[4096], err[CHARLM_ERR];
  const char *slash = strrchr(__FILE__, '/');
  int dir = slash ? (int)(slash - __FILE__) : 0;
  snprintf(path, sizeof path, "%.*s%s../examples/data/input.txt", dir, __FILE__, slash ? "/" : "");
  cr_assert_eq(charlm_data_load(d, path, err), 0, "%s", err);
}

/* Tiny config of the CI run: 1 layer, 2 heads, d 32, context 16, on the HOST provider. */
static charlm_config tiny(int vocab, double dropout) {
  charlm_config c = {1, 2, 32, 16, vocab, dropout, TG_F32, TG_PROVIDER_HOST, TG_PROVIDER_HOST, 0};
  return c;
}

static const charlm_train_opts OPTS = {1e-2, 0.1, 0.9, 0.99, 1e-8, 1.0, 7};

Test(charlm, vocabulary_split_and_batches) {
  const char *text = "hello world, hello tiga!\nabcabcabcabcabcabcabcabcabcabc";
  charlm_data d;
  char err[CHARLM_ERR];
  int64_t n = (int64_t)strlen(text);
  cr_assert_eq(charlm_data_from_text(&d, (const unsigned char *)text, n, err), 0, "%s", err);
  /* sorted unique bytes, computed here independently */
  char want[256];
  int nv = 0;
  for (int c = 0; c < 256; c++)
    if (memchr(text, c, (size_t)n)) want[nv++] = (char)c;
  cr_assert_eq(d.vocab, nv);
  for (int i = 0; i < nv; i++) {
    cr_expect_eq(d.itos[i], (unsigned char)want[i]);
    cr_expect_eq(d.stoi[(unsigned char)want[i]], i);
  }
  cr_expect_eq(d.stoi['Z'], -1);
  for (int64_t i = 0; i < n; i++)
    cr_expect_eq(d.itos[d.tokens[i]], (unsigned char)text[i]);
  cr_expect_eq(d.n_train, n * 9 / 10);

  /* every window lies inside its split and y is x shifted by one */
  int32_t x[4 * 3], y[4 * 3];
  charlm_rng r;
  charlm_rng_seed(&r, 3);
  for (int split = 0; split < 2; split++)
    for (int rep = 0; rep < 50; rep++) {
      charlm_batch(&d, split, 4, 3, &r, x, y);
      const uint8_t *s = split ? d.tokens + d.n_train : d.tokens;
      int64_t len = split ? n - d.n_train : d.n_train;
      for (int b = 0; b < 4; b++) {
        int64_t o = -1;
        for (int64_t k = 0; k + 3 < len + 0 && o < 0; k++)
          if (s[k] == x[b * 3] && s[k + 1] == x[b * 3 + 1] && s[k + 2] == x[b * 3 + 2] && s[k + 3] == y[b * 3 + 2])
            o = k;
        cr_expect_geq(o, 0, "window %d of split %d is not in the split", b, split);
        for (int i = 0; i < 2; i++)
          cr_expect_eq(y[b * 3 + i], x[b * 3 + i + 1]);
      }
    }
  /* validation holds n - n_train = 6 tokens: context 5 fits, 6 does not */
  cr_expect_eq(charlm_data_check_context(&d, 5, err), 0, "%s", err);
  cr_expect_eq(charlm_data_check_context(&d, 6, err), -1);
  cr_expect(strstr(err, "smaller --context") != NULL, "%s", err);
  charlm_data_free(&d);

  cr_expect_eq(charlm_data_from_text(&d, (const unsigned char *)"a", 1, err), -1);
  cr_expect_eq(charlm_data_load(&d, "/nonexistent/input.txt", err), -1);
  cr_expect(strstr(err, "cannot open data file '/nonexistent/input.txt'") != NULL, "%s", err);
}

Test(charlm, lr_schedule) {
  /* warmup: lr (s+1)/(w+1); cosine from lr at s = w to min_lr at s = total; flat after */
  cr_expect_float_eq(charlm_lr(0, 100, 5000, 1e-3, 1e-4), 1e-3 / 101, 1e-15);
  cr_expect_float_eq(charlm_lr(99, 100, 5000, 1e-3, 1e-4), 1e-3 * 100 / 101, 1e-15);
  cr_expect_float_eq(charlm_lr(100, 100, 5000, 1e-3, 1e-4), 1e-3, 1e-15);
  cr_expect_float_eq(charlm_lr(2550, 100, 5000, 1e-3, 1e-4), 5.5e-4, 1e-12);
  cr_expect_float_eq(charlm_lr(4999, 100, 5000, 1e-3, 1e-4), 1e-4, 1e-9);
  cr_expect_float_eq(charlm_lr(7000, 100, 5000, 1e-3, 1e-4), 1e-4, 1e-15);
  cr_expect_float_eq(charlm_lr(3, 0, 10, 1.0, 0.0), 0.5 * (1 + cos(3.14159265358979323846 * 0.3)), 1e-12);
}

Test(charlm, config_errors) {
  charlm_config c = tiny(65, 0);
  char err[CHARLM_ERR];
  c.heads = 3;
  cr_expect_eq(charlm_config_check(&c, err), -1);
  cr_expect(strstr(err, "not a multiple of heads 3") != NULL, "%s", err);
  c = tiny(65, 1.0);
  cr_expect_eq(charlm_config_check(&c, err), -1);
  cr_expect(strstr(err, "dropout") != NULL, "%s", err);
  c = tiny(65, 0);
  c.layers = 0;
  cr_expect_eq(charlm_config_check(&c, err), -1);
}

/* Trains the tiny config for `steps` steps from seed 7; returns the last loss. */
static double train(charlm_model *m, const charlm_data *d, charlm_rng *r, int64_t from, int64_t steps, double *first) {
  const int64_t B = 8, T = m->cfg.context;
  int32_t x[8 * 16], y[8 * 16];
  char err[CHARLM_ERR];
  double v = NAN;
  for (int64_t s = from; s < from + steps; s++) {
    tg_id loss;
    charlm_batch(d, 0, B, T, r, x, y);
    cr_assert_eq(charlm_train_step(m, x, y, B, T, &OPTS, charlm_lr(s, 5, 120, OPTS.lr, 1e-3), s, &loss, err), 0, "%s",
                 err);
    cr_assert_eq(tg_tape_scalar(m->tape, loss, &v), TG_OK, "%s", tg_tape_error(m->tape));
    if (s == from && first) *first = v;
  }
  return v;
}

/* Threshold, measured on the host (lr 1e-2, 5 warmup steps, cosine to 1e-3 over 120 steps,
 * batch 8 x 16 tokens): before training the validation loss is ln(65) = 4.17 +- 0.03 (N(0, 0.02)
 * weights give near-uniform logits); after 120 steps it is 3.08 - 3.20 over seeds 1..5 (the
 * model has learned the character frequencies, whose entropy is 3.31 nats, and starts on
 * bigrams). Passing needs < 3.45 = ln(65) - 0.72: a margin of 0.25 over the worst seed, and
 * unreachable without learning. */
Test(charlm, tiny_config_loss_falls, .timeout = 120) {
  charlm_data d;
  charlm_model m;
  char err[CHARLM_ERR];
  load_corpus(&d);
  cr_assert_eq(d.vocab, 65);
  tg_runtime *rt = ts_host_runtime();
  charlm_config c = tiny(d.vocab, 0.0);
  cr_assert_eq(charlm_model_init(&m, rt, &c, 7, err), 0, "%s", err);
  /* 2 * 65 * 32 embeddings... : wte + wpe + 12 d^2 + 4 LN vectors + final LN */
  cr_expect_eq(m.n_params, 65 * 32 + 16 * 32 + 12 * 32 * 32 + 4 * 32 + 2 * 32);
  charlm_rng r;
  charlm_rng_seed(&r, 7);
  double before;
  cr_assert_eq(charlm_evaluate(&m, &d, 1, 4, 8, &r, &before, err), 0, "%s", err);
  cr_expect(fabs(before - log(65.0)) < 0.1, "initial val loss %.4f; expected ~ln(65) = 4.174", before);
  double first, last = train(&m, &d, &r, 0, 120, &first);
  double after;
  cr_assert_eq(charlm_evaluate(&m, &d, 1, 8, 8, &r, &after, err), 0, "%s", err);
  cr_log_info("tiny config: first batch loss %.4f, last batch loss %.4f, val %.4f -> %.4f", first, last, before, after);
  cr_expect(after < 3.45, "val loss after 120 steps is %.4f; expected < 3.45 (ln 65 = 4.17)", after);
  charlm_model_free(&m);
  tg_runtime_destroy(rt);
  charlm_data_free(&d);
}

/* Saves after 4 steps, takes step 5; a fresh model that loads the checkpoint (and the RNG state
 * from its sidecar) must produce the same step-5 loss bit for bit, dropout included. */
Test(charlm, checkpoint_round_trip, .timeout = 120) {
  charlm_data d;
  charlm_model a, b;
  char err[CHARLM_ERR], path[] = "/tmp/charlm_ckpt_XXXXXX", meta[64];
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  snprintf(meta, sizeof meta, "%s.meta", path);
  load_corpus(&d);
  tg_runtime *rt = ts_host_runtime();
  charlm_config c = tiny(d.vocab, 0.1);
  charlm_rng r;
  charlm_rng_seed(&r, 11);
  cr_assert_eq(charlm_model_init(&a, rt, &c, 11, err), 0, "%s", err);
  train(&a, &d, &r, 0, 4, NULL);
  charlm_ckpt_state st = {4, r.s, 1.5};
  cr_assert_eq(charlm_ckpt_save(&a, &d, path, &st, err), 0, "%s", err);
  double want = train(&a, &d, &r, 4, 1, NULL);
  charlm_model_free(&a);

  cr_assert_eq(charlm_model_init(&b, rt, &c, 999, err), 0, "%s", err); /* other init: load must overwrite */
  charlm_ckpt_state got;
  cr_assert_eq(charlm_ckpt_load(&b, &d, path, &got, err), 0, "%s", err);
  cr_expect_eq(got.step, 4);
  cr_expect_eq(got.rng, st.rng);
  cr_expect_float_eq(got.elapsed_s, 1.5, 1e-12);
  charlm_rng r2 = {got.rng};
  double again = train(&b, &d, &r2, got.step, 1, NULL);
  cr_expect(again == want, "step 5 after load: %.17g, without the round trip: %.17g", again, want);
  charlm_model_free(&b);

  /* another config: refused with a message naming both configs */
  charlm_config c2 = tiny(d.vocab, 0.1);
  c2.d_model = 64;
  cr_assert_eq(charlm_model_init(&b, rt, &c2, 1, err), 0, "%s", err);
  cr_expect_eq(charlm_ckpt_load(&b, &d, path, &got, err), -1);
  cr_expect(strstr(err, "another config") && strstr(err, "--d-model 32") && strstr(err, "--d-model 64"), "%s", err);
  charlm_model_free(&b);
  /* no sidecar: refused */
  remove(meta);
  cr_assert_eq(charlm_model_init(&b, rt, &c, 1, err), 0, "%s", err);
  cr_expect_eq(charlm_ckpt_load(&b, &d, path, &got, err), -1);
  cr_expect(strstr(err, "cannot open checkpoint sidecar") != NULL, "%s", err);
  charlm_model_free(&b);
  remove(path);
  tg_runtime_destroy(rt);
  charlm_data_free(&d);
}

/* f16 runs keep their loss scale across a resume: the sidecar holds the scaler's state. The model
 * here is f32 on the host with a scaler attached (the sidecar code is the same; f16 needs CUDA). */
Test(charlm, checkpoint_keeps_the_loss_scale, .timeout = 120) {
  charlm_data d;
  charlm_model a, b;
  char err[CHARLM_ERR], path[] = "/tmp/charlm_scale_XXXXXX", meta[64];
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  snprintf(meta, sizeof meta, "%s.meta", path);
  load_corpus(&d);
  tg_runtime *rt = ts_host_runtime();
  charlm_config c = tiny(d.vocab, 0.0);
  cr_assert_eq(charlm_model_init(&a, rt, &c, 5, err), 0, "%s", err);
  cr_assert_eq(tg_loss_scaler_create(NULL, &a.scaler), TG_OK, "%s", tg_last_error());
  cr_assert_eq(tg_loss_scaler_set_state(a.scaler, 2048, 7), TG_OK, "%s", tg_last_error());
  charlm_ckpt_state st = {3, 12345, 0};
  cr_assert_eq(charlm_ckpt_save(&a, &d, path, &st, err), 0, "%s", err);
  charlm_model_free(&a);

  cr_assert_eq(charlm_model_init(&b, rt, &c, 6, err), 0, "%s", err);
  cr_assert_eq(tg_loss_scaler_create(NULL, &b.scaler), TG_OK, "%s", tg_last_error());
  charlm_ckpt_state got;
  cr_assert_eq(charlm_ckpt_load(&b, &d, path, &got, err), 0, "%s", err);
  double scale = 0;
  int64_t tracker = -1;
  tg_loss_scaler_state(b.scaler, &scale, &tracker);
  cr_expect(scale == 2048 && tracker == 7, "restored scale %g, tracker %lld", scale, (long long)tracker);
  charlm_model_free(&b);

  /* a run without a scaler (f32) ignores the entries */
  cr_assert_eq(charlm_model_init(&b, rt, &c, 6, err), 0, "%s", err);
  cr_expect_eq(charlm_ckpt_load(&b, &d, path, &got, err), 0, "%s", err);
  charlm_model_free(&b);

  /* a bad state in the sidecar (a later entry wins): refused with its message */
  FILE *f = fopen(meta, "a");
  cr_assert_not_null(f);
  fputs("loss_scale -1\n", f);
  fclose(f);
  cr_assert_eq(charlm_model_init(&b, rt, &c, 6, err), 0, "%s", err);
  cr_assert_eq(tg_loss_scaler_create(NULL, &b.scaler), TG_OK, "%s", tg_last_error());
  cr_expect_eq(charlm_ckpt_load(&b, &d, path, &got, err), -1);
  cr_expect(strstr(err, "loss_scale -1") && strstr(err, "'scale' is -1"), "%s", err);
  charlm_model_free(&b);
  remove(meta);
  remove(path);
  tg_runtime_destroy(rt);
  charlm_data_free(&d);
}

Test(charlm, sampling_and_bad_context) {
  charlm_data d;
  charlm_model m;
  char err[CHARLM_ERR], out[41], out2[41];
  load_corpus(&d);
  tg_runtime *rt = ts_host_runtime();
  charlm_config c = tiny(d.vocab, 0.0);
  cr_assert_eq(charlm_model_init(&m, rt, &c, 5, err), 0, "%s", err);
  /* 40 chars > context 16: the window is cropped; every char is in the vocabulary */
  int32_t prompt = d.stoi['\n'];
  charlm_rng r;
  charlm_rng_seed(&r, 1);
  cr_assert_eq(charlm_sample(&m, &d, &prompt, 1, 40, 0.8, 10, &r, out, err), 0, "%s", err);
  cr_expect_eq(strlen(out), 40);
  for (int i = 0; i < 40; i++)
    cr_expect_geq(d.stoi[(unsigned char)out[i]], 0);
  /* top-k 1 is greedy: the RNG and the temperature do not matter */
  charlm_rng_seed(&r, 2);
  cr_assert_eq(charlm_sample(&m, &d, &prompt, 1, 40, 0.5, 1, &r, out, err), 0, "%s", err);
  charlm_rng_seed(&r, 3);
  cr_assert_eq(charlm_sample(&m, &d, &prompt, 1, 40, 2.0, 1, &r, out2, err), 0, "%s", err);
  cr_expect_str_eq(out, out2);
  /* a window longer than the context: an error, not a crash */
  int32_t x[17] = {0}, y[17] = {0};
  tg_id loss;
  cr_expect_eq(charlm_train_step(&m, x, y, 1, 17, &OPTS, 1e-3, 0, &loss, err), -1);
  cr_log_info("context 17 > 16: %s", err);
  charlm_model_free(&m);
  tg_runtime_destroy(rt);
  charlm_data_free(&d);
}
