/* Helpers of the checkpoint tests (test_checkpoint.c, test_checkpoint_files.c): a scratch
 * directory, file bytes, a small model trained with AdamW, and snapshots of every parameter's
 * value, moments and step count. Static inline, so each test file uses what it needs. */
#ifndef TIGA_TEST_CHECKPOINT_SUPPORT_H
#define TIGA_TEST_CHECKPOINT_SUPPORT_H
#define _POSIX_C_SOURCE 200809L /* mkdtemp, mkfifo, access, rmdir */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support.h"
/* Only to compare optimizer state and step counts, which the public API does not expose. */
#include "tape/internal.h"
static inline tgi_value *val(tg_tape *t, tg_id id) { return tgi_slot(t, (uint32_t)((uint64_t)id & 0xffffffffu)); }

/* A scratch directory per test (tests run in parallel processes). */
static char g_dir[64];
static inline char *path_in(const char *name) {
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
static inline void cleanup_dir(void) {
  static const char *names[] = {"a.ckpt", "b.ckpt", "bad.ckpt", "c.ckpt", "fifo", "a.ckpt.tmp"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    remove(path_in(names[i]));
  rmdir(g_dir);
  g_dir[0] = 0;
}

static inline unsigned char *slurp(const char *path, size_t *size) {
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
static inline void spit(const char *path, const unsigned char *b, size_t size) {
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

static inline model make_model(tg_runtime *rt, uint64_t seed) {
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
  static const char *const names[3] = {"enc.w", "enc.b", "head.w"}; /* w[3] keeps "param.3" */
  for (int k = 0; k < 3; k++)
    cr_assert_eq(tg_tape_set_name(m.t, m.w[k], names[k]), TG_OK, "%s", tg_tape_error(m.t));
  return m;
}

/* One AdamW step with step-dependent gradients (from sum(w * x) on the HOST provider). */
static inline void train_step(model *m, int step) {
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

static inline void take(model *m, snap *s) {
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

static inline void expect_same(const snap *a, const snap *b, const char *what) {
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
static inline void perturb(model *m) {
  double z[6] = {9, 9, 9, 9, 9, 9};
  float zf[4] = {9, 9, 9, 9};
  uint16_t zh[3] = {0, 0, 0};
  cr_assert_eq(tg_tape_write(m->t, m->w[0], z, sizeof z), TG_OK);
  cr_assert_eq(tg_tape_write(m->t, m->w[1], zf, sizeof zf), TG_OK);
  cr_assert_eq(tg_tape_write(m->t, m->w[2], z, 5 * sizeof(double)), TG_OK);
  cr_assert_eq(tg_tape_write(m->t, m->w[3], zh, sizeof zh), TG_OK);
  train_step(m, 7); /* also gives w[2] moments and a step count */
}

static inline uint64_t le64(const unsigned char *b) {
  uint64_t x = 0;
  for (int i = 0; i < 8; i++)
    x |= (uint64_t)b[i] << (8 * i);
  return x;
}

/* ---------------------------------------------------------------- mismatches */

/* Expects a failed load with status st and message needle, and the tape exactly as before. */
static inline void expect_load_fails(model *m, const char *path, tg_status st, const char *needle) {
  snap before, after;
  take(m, &before);
  TS_EXPECT_STATUS(tg_tape_load(m->t, path), st, m->t, needle);
  take(m, &after);
  expect_same(&after, &before, needle);
  cr_expect_eq(tg_tape_status(m->t), TG_OK);
}

#endif
