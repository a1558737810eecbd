/* tg_tape_save / tg_tape_load: round trip of values and optimizer state, resuming training gives
 * bit-identical results, every malformed file is TG_ERR_IO and leaves the tape untouched,
 * mismatched parameters are TG_ERR_SHAPE / TG_ERR_DTYPE naming the parameter. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, access, rmdir */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "support.h"
/* Only to compare optimizer state and step counts, which the public API does not expose. */
#include "tape/internal.h"

static tgi_value *val(tg_tape *t, tg_id id) { return tgi_slot(t, tgi_id_slot(id)); }

/* A scratch directory per test (tests run in parallel processes). */
static char g_dir[64];
static char *path_in(const char *name) {
  static char buf[4][128];
  static int k;
  k = (k + 1) % 4;
  if (!g_dir[0]) {
    strcpy(g_dir, "/tmp/tiga_ckpt_XXXXXX");
    cr_assert(mkdtemp(g_dir) != NULL);
  }
  snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
  return buf[k];
}
static void cleanup_dir(void) {
  static const char *names[] = {"a.ckpt", "b.ckpt", "bad.ckpt", "c.ckpt"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    remove(path_in(names[i]));
  rmdir(g_dir);
  g_dir[0] = 0;
}

static unsigned char *slurp(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  cr_assert(f != NULL, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  *size = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc(*size ? *size : 1);
  cr_assert_eq(fread(b, 1, *size, f), *size);
  fclose(f);
  return b;
}
static void spit(const char *path, const unsigned char *b, size_t size) {
  FILE *f = fopen(path, "wb");
  cr_assert(f != NULL);
  cr_assert_eq(fwrite(b, 1, size, f), size);
  fclose(f);
}

/* ---------------------------------------------------------------- a small model */

#define NP 4
static const int64_t SH0[2] = {2, 3}, SH1[1] = {4}, SH2[1] = {5}, SH3[1] = {3};

typedef struct model {
  tg_tape *t;
  tg_id w[NP]; /* f64 [2,3]; f32 [4] no decay; f64 [5] (gradient only at step >= 3); bf16 [3] (never) */
} model;

static model make_model(tg_runtime *rt, uint64_t seed) {
  model m;
  m.t = ts_tape(rt);
  double d[6];
  float f[4];
  uint16_t h[3];
  ts_uniform(d, 6, seed, -1, 1);
  cr_assert_eq(tg_tape_parameter(m.t, TG_F64, 2, SH0, d, ts_bytes(TG_F64, 2, SH0), 0, &m.w[0]), TG_OK);
  ts_uniform_f32(f, 4, seed + 1, -1, 1);
  cr_assert_eq(tg_tape_parameter(m.t, TG_F32, 1, SH1, f, ts_bytes(TG_F32, 1, SH1), TG_NO_WEIGHT_DECAY, &m.w[1]), TG_OK);
  ts_uniform(d, 5, seed + 2, -1, 1);
  cr_assert_eq(tg_tape_parameter(m.t, TG_F64, 1, SH2, d, ts_bytes(TG_F64, 1, SH2), 0, &m.w[2]), TG_OK);
  for (int i = 0; i < 3; i++)
    h[i] = ts_f32_to_bf16(0.5f * (float)(i + 1) + (float)seed);
  cr_assert_eq(tg_tape_parameter(m.t, TG_BF16, 1, SH3, h, ts_bytes(TG_BF16, 1, SH3), 0, &m.w[3]), TG_OK);
  return m;
}

/* One AdamW step with step-dependent gradients (from sum(w * x) on the HOST provider). */
static void train_step(model *m, int step) {
  tg_tape *t = m->t;
  tg_tape_zero_grad(t);
  double x0[6], x2[5];
  float x1[4];
  ts_uniform(x0, 6, 500 + step, -2, 2);
  ts_uniform_f32(x1, 4, 600 + step, -2, 2);
  ts_uniform(x2, 5, 700 + step, -2, 2);
  tg_id loss = tg_add(t, tg_sum(t, tg_mul(t, m->w[0], ts_input(t, TG_F64, 2, SH0, x0, 0))),
                      tg_cast(t, tg_sum(t, tg_mul(t, m->w[1], ts_input(t, TG_F32, 1, SH1, x1, 0))), TG_F64));
  if (step >= 3) loss = tg_add(t, loss, tg_sum(t, tg_mul(t, m->w[2], ts_input(t, TG_F64, 1, SH2, x2, 0))));
  cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
  tg_adamw_options o = {.struct_size = sizeof(tg_adamw_options),
                        .lr = 0.05,
                        .beta1 = 0.9,
                        .beta2 = 0.99,
                        .eps = 1e-8,
                        .weight_decay = 0.1};
  cr_assert_eq(tg_adamw_step(t, &o), TG_OK, "%s", tg_tape_error(t));
  cr_assert_eq(tg_tape_reset(t), TG_OK);
}

/* Raw bytes of every parameter's value, moments (host copies) and step count. */
typedef struct snap {
  unsigned char value[NP][64], m[NP][64], v[NP][64];
  int has_m[NP], has_v[NP];
  int64_t step[NP];
} snap;

static void take(model *m, snap *s) {
  memset(s, 0, sizeof *s);
  for (int k = 0; k < NP; k++) {
    tgi_value *v = val(m->t, m->w[k]);
    cr_assert(v->bytes <= 64);
    cr_assert_eq(tg_tape_read(m->t, m->w[k], s->value[k], v->bytes), TG_OK);
    s->has_m[k] = v->opt_m.valid != 0;
    s->has_v[k] = v->opt_v.valid != 0;
    if (s->has_m[k]) {
      cr_assert(v->opt_m.valid & TGI_ON_HOST);
      memcpy(s->m[k], v->opt_m.h, v->bytes);
    }
    if (s->has_v[k]) {
      cr_assert(v->opt_v.valid & TGI_ON_HOST);
      memcpy(s->v[k], v->opt_v.h, v->bytes);
    }
    s->step[k] = v->opt_step;
  }
}

static void expect_same(const snap *a, const snap *b, const char *what) {
  for (int k = 0; k < NP; k++) {
    cr_expect(memcmp(a->value[k], b->value[k], 64) == 0, "%s: parameter %d value differs", what, k);
    cr_expect_eq(a->has_m[k], b->has_m[k], "%s: parameter %d first moment presence", what, k);
    cr_expect_eq(a->has_v[k], b->has_v[k], "%s: parameter %d second moment presence", what, k);
    cr_expect(memcmp(a->m[k], b->m[k], 64) == 0, "%s: parameter %d first moment differs", what, k);
    cr_expect(memcmp(a->v[k], b->v[k], 64) == 0, "%s: parameter %d second moment differs", what, k);
    cr_expect_eq(a->step[k], b->step[k], "%s: parameter %d step count", what, k);
  }
}

/* Overwrites every value and gives every parameter fresh state. */
static void perturb(model *m) {
  double z[6] = {9, 9, 9, 9, 9, 9};
  float zf[4] = {9, 9, 9, 9};
  uint16_t zh[3] = {0, 0, 0};
  cr_assert_eq(tg_tape_write(m->t, m->w[0], z, sizeof z), TG_OK);
  cr_assert_eq(tg_tape_write(m->t, m->w[1], zf, sizeof zf), TG_OK);
  cr_assert_eq(tg_tape_write(m->t, m->w[2], z, 5 * sizeof(double)), TG_OK);
  cr_assert_eq(tg_tape_write(m->t, m->w[3], zh, sizeof zh), TG_OK);
  train_step(m, 7); /* also gives w[2] moments and a step count */
}

Test(checkpoint, round_trip_and_resume_bit_identical) {
  tg_runtime *rt = ts_host_runtime();
  model a = make_model(rt, 1), b = make_model(rt, 1), c = make_model(rt, 99);
  for (int s = 1; s <= 2; s++) {
    train_step(&a, s);
    train_step(&b, s);
  }
  snap saved, now;
  take(&a, &saved);
  cr_expect(saved.has_m[0] && saved.has_v[1] && !saved.has_m[2] && !saved.has_m[3]);
  cr_expect_eq(saved.step[0], 2);
  cr_assert_eq(tg_tape_save(a.t, path_in("a.ckpt")), TG_OK, "%s", tg_tape_error(a.t));
  perturb(&a);
  take(&a, &now);
  cr_expect(now.has_m[2] && now.step[2] == 1, "the perturbation should give w[2] state");
  cr_assert_eq(tg_tape_load(a.t, path_in("a.ckpt")), TG_OK, "%s", tg_tape_error(a.t));
  take(&a, &now);
  expect_same(&now, &saved, "after load");
  /* a fresh tape of the same structure (no state yet) loads the same */
  cr_assert_eq(tg_tape_load(c.t, path_in("a.ckpt")), TG_OK, "%s", tg_tape_error(c.t));
  take(&c, &now);
  expect_same(&now, &saved, "fresh tape after load");
  /* resuming gives exactly the uninterrupted run */
  for (int s = 3; s <= 4; s++) {
    train_step(&a, s);
    train_step(&b, s);
    train_step(&c, s);
  }
  snap sa, sb, sc;
  take(&a, &sa);
  take(&b, &sb);
  take(&c, &sc);
  expect_same(&sa, &sb, "resumed vs uninterrupted");
  expect_same(&sc, &sb, "fresh resumed vs uninterrupted");
  /* saving again gives the same bytes as a save of the uninterrupted run */
  cr_assert_eq(tg_tape_save(a.t, path_in("b.ckpt")), TG_OK);
  cr_assert_eq(tg_tape_save(b.t, path_in("c.ckpt")), TG_OK);
  size_t na, nb;
  unsigned char *fa = slurp(path_in("b.ckpt"), &na), *fb = slurp(path_in("c.ckpt"), &nb);
  cr_expect(na == nb && memcmp(fa, fb, na) == 0, "checkpoints of equal states differ");
  cr_expect(access(path_in("b.ckpt.tmp"), F_OK) != 0, "the temporary file was left behind");
  free(fa);
  free(fb);
  tg_tape_destroy(a.t);
  tg_tape_destroy(b.t);
  tg_tape_destroy(c.t);
  tg_runtime_destroy(rt);
  cleanup_dir();
}

/* The documented layout, read back byte by byte for one parameter. */
Test(checkpoint, layout_is_as_documented) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sh[2] = {2, 1};
  double x[2] = {1.5, -2.0};
  tg_id w = TG_NO_ID;
  cr_assert_eq(tg_tape_parameter(t, TG_F64, 2, sh, x, ts_bytes(TG_F64, 2, sh), 0, &w), TG_OK);
  cr_assert_eq(tg_tape_save(t, path_in("a.ckpt")), TG_OK);
  size_t n;
  unsigned char *b = slurp(path_in("a.ckpt"), &n);
  /* 24 header + 4 + 4 + 2*8 shape + 8 step + (8 + 16) value + 8 + 8 empty moments + 8 checksum */
  cr_assert_eq(n, (size_t)(24 + 8 + 16 + 8 + 24 + 16 + 8));
  cr_expect(memcmp(b, "TIGACKPT", 8) == 0);
  cr_expect(b[8] == 1 && b[9] == 0 && b[12] == 0 && b[16] == 1 && b[17] == 0); /* version 1, count 1 */
  cr_expect(b[24] == TG_F64 && b[28] == 2 && b[32] == 2 && b[40] == 1);        /* dtype, ndim, shape */
  cr_expect(b[48] == 0 && b[56] == 16);                                        /* step 0, value bytes */
  double y[2];
  memcpy(y, b + 64, 16);
  cr_expect(y[0] == 1.5 && y[1] == -2.0);
  cr_expect(b[80] == 0 && b[88] == 0); /* no moments */
  uint64_t h = 0xcbf29ce484222325ull, stored = 0;
  for (size_t i = 0; i < n - 8; i++)
    h = (h ^ b[i]) * 0x100000001b3ull;
  for (int i = 0; i < 8; i++)
    stored |= (uint64_t)b[n - 8 + i] << (8 * i);
  cr_expect_eq(stored, h, "checksum is not FNV-1a 64 of the preceding bytes");
  free(b);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
  cleanup_dir();
}

/* ---------------------------------------------------------------- errors */

/* Expects a failed load with status st and message needle, and the tape exactly as before. */
static void expect_load_fails(model *m, const char *path, tg_status st, const char *needle) {
  snap before, after;
  take(m, &before);
  TS_EXPECT_STATUS(tg_tape_load(m->t, path), st, m->t, needle);
  take(m, &after);
  expect_same(&after, &before, needle);
  cr_expect_eq(tg_tape_status(m->t), TG_OK);
}

Test(checkpoint, malformed_files_are_io_errors) {
  tg_runtime *rt = ts_host_runtime();
  model m = make_model(rt, 3);
  train_step(&m, 1);
  cr_assert_eq(tg_tape_save(m.t, path_in("a.ckpt")), TG_OK);
  model target = make_model(rt, 4);
  train_step(&target, 5);
  size_t n;
  unsigned char *good = slurp(path_in("a.ckpt"), &n), *bad = malloc(n + 8);
  const char *bp = path_in("bad.ckpt");

  expect_load_fails(&target, path_in("missing.ckpt"), TG_ERR_IO, "cannot open");
  memcpy(bad, good, n);
  bad[0] = 'X';
  spit(bp, bad, n);
  expect_load_fails(&target, bp, TG_ERR_IO, "does not start with \"TIGACKPT\"");
  memcpy(bad, good, n);
  bad[8] = 2;
  spit(bp, bad, n);
  expect_load_fails(&target, bp, TG_ERR_IO, "format version 2");
  memcpy(bad, good, n);
  memcpy(bad + n, "garbage!", 8);
  spit(bp, bad, n + 8);
  expect_load_fails(&target, bp, TG_ERR_IO, "unexpected bytes after the checksum");
  /* every truncation */
  for (size_t len = 0; len < n; len++) {
    spit(bp, good, len);
    expect_load_fails(&target, bp, TG_ERR_IO, "is not a valid checkpoint");
  }
  /* every single-byte corruption */
  for (size_t i = 0; i < n; i++) {
    memcpy(bad, good, n);
    bad[i] ^= 0x41;
    spit(bp, bad, n);
    expect_load_fails(&target, bp, TG_ERR_IO, "is not a valid checkpoint");
  }
  memcpy(bad, good, n);
  bad[n - 27] ^= 1; /* inside the last value (bf16 [3], before two empty moments): only the checksum notices */
  spit(bp, bad, n);
  expect_load_fails(&target, bp, TG_ERR_IO, "checksum mismatch");
  /* the good file still loads */
  cr_expect_eq(tg_tape_load(target.t, path_in("a.ckpt")), TG_OK, "%s", tg_tape_error(target.t));
  free(good);
  free(bad);
  tg_tape_destroy(m.t);
  tg_tape_destroy(target.t);
  tg_runtime_destroy(rt);
  remove(bp);
  cleanup_dir();
}

Test(checkpoint, mismatched_parameters) {
  tg_runtime *rt = ts_host_runtime();
  model m = make_model(rt, 5);
  train_step(&m, 1);
  cr_assert_eq(tg_tape_save(m.t, path_in("a.ckpt")), TG_OK);
  const char *p = path_in("a.ckpt");
  double d[6] = {0};
  float f[5] = {0};
  uint16_t h[3] = {0};
  /* wrong count: one parameter fewer */
  model fewer;
  fewer.t = ts_tape(rt);
  cr_assert_eq(tg_tape_parameter(fewer.t, TG_F64, 2, SH0, d, ts_bytes(TG_F64, 2, SH0), 0, &fewer.w[0]), TG_OK);
  TS_EXPECT_STATUS(tg_tape_load(fewer.t, p), TG_ERR_SHAPE, fewer.t,
                   "the checkpoint holds 4 parameters; the tape has 1");
  /* wrong shape of parameter 1 */
  int64_t sh5[1] = {5};
  model shape;
  shape.t = ts_tape(rt);
  cr_assert_eq(tg_tape_parameter(shape.t, TG_F64, 2, SH0, d, ts_bytes(TG_F64, 2, SH0), 0, &shape.w[0]), TG_OK);
  cr_assert_eq(tg_tape_parameter(shape.t, TG_F32, 1, sh5, f, ts_bytes(TG_F32, 1, sh5), 0, &shape.w[1]), TG_OK);
  cr_assert_eq(tg_tape_parameter(shape.t, TG_F64, 1, SH2, d, ts_bytes(TG_F64, 1, SH2), 0, &shape.w[2]), TG_OK);
  cr_assert_eq(tg_tape_parameter(shape.t, TG_BF16, 1, SH3, h, ts_bytes(TG_BF16, 1, SH3), 0, &shape.w[3]), TG_OK);
  TS_EXPECT_STATUS(tg_tape_load(shape.t, p), TG_ERR_SHAPE, shape.t,
                   "parameter 1 has shape [4] in the checkpoint and [5] on the tape");
  double got[6];
  ts_read(shape.t, shape.w[0], got, 6); /* parameter 0 matched but was not written */
  for (int i = 0; i < 6; i++)
    cr_expect_eq(got[i], 0.0);
  /* wrong dtype of parameter 2 */
  model dtype;
  dtype.t = ts_tape(rt);
  cr_assert_eq(tg_tape_parameter(dtype.t, TG_F64, 2, SH0, d, ts_bytes(TG_F64, 2, SH0), 0, &dtype.w[0]), TG_OK);
  cr_assert_eq(tg_tape_parameter(dtype.t, TG_F32, 1, SH1, f, ts_bytes(TG_F32, 1, SH1), 0, &dtype.w[1]), TG_OK);
  cr_assert_eq(tg_tape_parameter(dtype.t, TG_F32, 1, SH2, f, ts_bytes(TG_F32, 1, SH2), 0, &dtype.w[2]), TG_OK);
  cr_assert_eq(tg_tape_parameter(dtype.t, TG_BF16, 1, SH3, h, ts_bytes(TG_BF16, 1, SH3), 0, &dtype.w[3]), TG_OK);
  TS_EXPECT_STATUS(tg_tape_load(dtype.t, p), TG_ERR_DTYPE, dtype.t,
                   "parameter 2 has dtype f64 in the checkpoint and f32 on the tape");
  tg_tape_destroy(fewer.t);
  tg_tape_destroy(shape.t);
  tg_tape_destroy(dtype.t);
  tg_tape_destroy(m.t);
  tg_runtime_destroy(rt);
  cleanup_dir();
}

Test(checkpoint, argument_errors_and_sticky_tape) {
  tg_runtime *rt = ts_host_runtime();
  model m = make_model(rt, 6);
  cr_expect_eq(tg_tape_save(NULL, "x"), TG_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(tg_last_error(), "tg_tape_save: argument 'tape' is NULL") != NULL);
  cr_expect_eq(tg_tape_load(NULL, "x"), TG_ERR_INVALID_ARGUMENT);
  TS_EXPECT_STATUS(tg_tape_save(m.t, NULL), TG_ERR_INVALID_ARGUMENT, m.t, "argument 'path' is NULL");
  TS_EXPECT_STATUS(tg_tape_load(m.t, ""), TG_ERR_INVALID_ARGUMENT, m.t, "argument 'path' is empty");
  TS_EXPECT_STATUS(tg_tape_save(m.t, "/nonexistent-dir-tiga/x.ckpt"), TG_ERR_IO, m.t, "cannot create");
  /* a sticky op error does not block save / load, and stays */
  cr_expect_eq(tg_relu(m.t, TG_NO_ID), TG_NO_ID);
  cr_expect_eq(tg_tape_save(m.t, path_in("a.ckpt")), TG_OK);
  cr_expect_eq(tg_tape_load(m.t, path_in("a.ckpt")), TG_OK);
  TS_EXPECT_STICKY(m.t, TG_ERR_INVALID_ID, "tg_relu");
  tg_tape_destroy(m.t);
  tg_runtime_destroy(rt);
  cleanup_dir();
}

/* Parameters trained on the device (gradients from the CUDA provider) save from device memory;
 * a host tape loads them, and one more host step agrees bit for bit on both tapes (the device
 * tape moves value and moments to the host for it). */
Test(checkpoint_cuda, device_state_round_trip) {
  tg_runtime *dev = ts_cuda_runtime_or_skip();
  tg_runtime *host = ts_host_runtime();
  int64_t len = 1001;
  float *x = malloc((size_t)len * sizeof(float)), *a = malloc((size_t)len * sizeof(float)),
        *b = malloc((size_t)len * sizeof(float));
  tg_tape *td = ts_tape(dev), *th = ts_tape(host);
  tg_id wd, wh;
  ts_uniform_f32(x, (size_t)len, 1, -1, 1);
  cr_assert_eq(tg_tape_parameter(td, TG_F32, 1, &len, x, ts_bytes(TG_F32, 1, &len), 0, &wd), TG_OK);
  cr_assert_eq(tg_tape_parameter(th, TG_F32, 1, &len, NULL, 0, 0, &wh), TG_OK);
  tg_adamw_options o;
  tg_adamw_options_init(&o);
  for (int s = 0; s < 2; s++) {
    tg_tape_zero_grad(td);
    tg_tape_set_provider(td, TG_PROVIDER_CUDA, NULL);
    ts_uniform_f32(x, (size_t)len, 10 + s, -1, 1);
    tg_id loss = tg_sum(td, tg_mul(td, wd, ts_input(td, TG_F32, 1, &len, x, 0)));
    cr_assert_eq(tg_tape_backward(td, loss), TG_OK, "%s", tg_tape_error(td));
    cr_assert_eq(tg_adamw_step(td, &o), TG_OK, "%s", tg_tape_error(td));
    tg_tape_reset(td);
  }
  cr_expect(val(td, wd)->data.valid == TGI_ON_DEV && val(td, wd)->opt_m.valid == TGI_ON_DEV,
            "the CUDA step should leave value and state on the device only");
  cr_assert_eq(tg_tape_save(td, path_in("a.ckpt")), TG_OK, "%s", tg_tape_error(td));
  cr_assert_eq(tg_tape_load(th, path_in("a.ckpt")), TG_OK, "%s", tg_tape_error(th));
  cr_expect_eq(val(th, wh)->opt_step, 2);
  tg_tape *tapes[2] = {td, th};
  tg_id ws[2] = {wd, wh};
  float *outs[2] = {a, b};
  for (int k = 0; k < 2; k++) {
    tg_tape *t = tapes[k];
    cr_assert_eq(tg_tape_read(t, ws[k], outs[k], (size_t)len * sizeof(float)), TG_OK);
  }
  cr_expect(memcmp(a, b, (size_t)len * sizeof(float)) == 0, "loaded values differ from the device values");
  for (int k = 0; k < 2; k++) {
    tg_tape *t = tapes[k];
    tg_tape_zero_grad(t);
    tg_tape_set_provider(t, TG_PROVIDER_HOST, NULL);
    ts_uniform_f32(x, (size_t)len, 20, -1, 1);
    tg_id loss = tg_sum(t, tg_mul(t, ws[k], ts_input(t, TG_F32, 1, &len, x, 0)));
    cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
    cr_assert_eq(tg_adamw_step(t, &o), TG_OK, "%s", tg_tape_error(t));
    cr_assert_eq(tg_tape_read(t, ws[k], outs[k], (size_t)len * sizeof(float)), TG_OK);
  }
  cr_expect(memcmp(a, b, (size_t)len * sizeof(float)) == 0, "the next host step differs after the round trip");
  tg_tape_destroy(td);
  tg_tape_destroy(th);
  tg_runtime_destroy(dev);
  tg_runtime_destroy(host);
  free(x);
  free(a);
  free(b);
  cleanup_dir();
}
