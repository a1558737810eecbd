/* Fault injection, SQLite-style (issue 15): one training step of the char model (examples/charlm.c:
 * forward, backward, clip, AdamW, save) is run once per allocation it makes, failing the k-th one
 * for every k. Each run must return a status (or absorb the failure harmlessly), leave the
 * parameters and optimizer state as they were (or, when only the save failed, as the step left
 * them), keep the tape usable (the next clean step gives bit for bit the reference result), and
 * leak nothing (LeakSanitizer in the sanitizer build). Host allocations on a host runtime
 * (tg_inject_host_alloc_failure); device allocations on the GPU (tg_runtime_inject_alloc_failure,
 * skipped without one). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../examples/charlm.c"
#include "support.h"
#include "tape/internal.h"

enum { B = 2, T = 8 };
typedef enum { PH_RESET, PH_INPUT, PH_FORWARD, PH_BACKWARD, PH_CLIP, PH_ADAMW, PH_SAVE, PH_DONE } phase;
static const char *PHASE[] = {"reset", "input", "forward", "backward", "clip", "adamw", "save", "done"};

typedef struct {
  charlm_data d;
  int32_t x[B * T], y[B * T];
  char path[64];
} fixture;

static void fixture_init(fixture *f) {
  char text[600] = "", err[CHARLM_ERR];
  for (int i = 0; i < 12; i++)
    strcat(text, "the quick brown fox jumps over the lazy dog. ");
  cr_assert_eq(charlm_data_from_text(&f->d, (const unsigned char *)text, (int64_t)strlen(text), err), 0, "%s", err);
  charlm_rng r;
  charlm_rng_seed(&r, 5);
  charlm_batch(&f->d, 0, B, T, &r, f->x, f->y);
  snprintf(f->path, sizeof f->path, "/tmp/tiga_fault_%d.ckpt", (int)getpid());
}

static charlm_config config(const fixture *f, int gpu) {
  charlm_config c = {1,
                     2,
                     16,
                     T,
                     f->d.vocab,
                     0.1,
                     TG_F32,
                     gpu ? TG_PROVIDER_AUTO : TG_PROVIDER_HOST,
                     gpu ? TG_PROVIDER_CUDA_FUSED : TG_PROVIDER_HOST,
                     0.1};
  return c;
}

/* One step, phase by phase; returns the phase that failed (PH_DONE: none). */
static phase step(charlm_model *m, const fixture *f, int64_t k) {
  tg_tape *t = m->tape;
  if (tg_tape_reset(t)) return PH_RESET;
  tg_tape_zero_grad(t);
  tg_tape_set_seed(t, step_seed(7, k));
  tg_id xi, yi;
  char err[CHARLM_ERR];
  if (batch_inputs(m, f->x, f->y, B, T, &xi, &yi, err)) return PH_INPUT;
  tg_id l = tg_cross_entropy(t, charlm_logits(m, xi, B, T, 1), yi, TG_NO_IGNORE);
  if (tg_tape_status(t)) return PH_FORWARD;
  if (tg_tape_backward(t, l)) return PH_BACKWARD;
  if (tg_clip_grad_norm(t, 0.5, NULL)) return PH_CLIP;
  tg_adamw_options o;
  tg_adamw_options_init(&o);
  o.lr = 1e-2;
  if (tg_adamw_step(t, &o)) return PH_ADAMW;
  if (tg_tape_save(t, f->path)) return PH_SAVE;
  return PH_DONE;
}

/* Parameters (bytes), step counts and which optimizer state exists: what a failed step must keep. */
typedef struct {
  size_t n;
  unsigned char *bytes;
  int64_t steps;
  int states;
} snapshot;

/* Few Criterion assertions on this path: thousands of them per test trip a leak in Criterion's
 * parallel runner. Problems are collected in `bad` (the first one's text) and asserted once. */
static char bad[1024];
static int nbad;
#define CHECK(cond, ...)                                                                                               \
  do {                                                                                                                 \
    if (!(cond) && nbad++ == 0) snprintf(bad, sizeof bad, __VA_ARGS__);                                                \
  } while (0)

static void snap(charlm_model *m, snapshot *s) {
  tg_id ids[64];
  size_t n = 0, off = 0;
  if (tg_tape_parameters(m->tape, ids, 64, &n) || n > 64) cr_assert_fail("tg_tape_parameters");
  s->n = 0;
  for (size_t i = 0; i < n; i++)
    s->n += tgi_slot(m->tape, tgi_id_slot(ids[i]))->bytes;
  s->bytes = malloc(s->n);
  s->steps = 0;
  s->states = 0;
  for (size_t i = 0; i < n; i++) {
    tgi_value *v = tgi_slot(m->tape, tgi_id_slot(ids[i]));
    if (tg_tape_read(m->tape, ids[i], s->bytes + off, v->bytes)) cr_assert_fail("%s", tg_tape_error(m->tape));
    off += v->bytes;
    s->steps += v->opt_step;
    s->states += (v->opt_m.valid != 0) + (v->opt_v.valid != 0);
  }
}

static int same(const snapshot *a, const snapshot *b) {
  return a->n == b->n && !memcmp(a->bytes, b->bytes, a->n) && a->steps == b->steps && a->states == b->states;
}

/* A computed step against its reference. The host is deterministic: bit for bit. A CUDA step is
 * not: the embedding backward and attention's dQ accumulate with atomics, whose order varies from
 * run to run (the reference step itself, run twice, differs in the last bits; the walk logs it).
 * So on the GPU, every parameter (f32 here) within 1e-4: a hundredth of one AdamW update at
 * lr = 1e-2, far below what a lost update, a skipped kernel or stale memory would move. The largest
 * difference seen is kept in *worst. */
static double worst_gpu_diff;
static int matches(const snapshot *a, const snapshot *b, int gpu) {
  if (!gpu) return same(a, b);
  if (a->n != b->n || a->steps != b->steps || a->states != b->states || a->n % sizeof(float)) return 0;
  for (size_t i = 0; i < a->n / sizeof(float); i++) {
    float x, y;
    memcpy(&x, a->bytes + i * sizeof x, sizeof x);
    memcpy(&y, b->bytes + i * sizeof y, sizeof y);
    double d = fabs((double)x - (double)y);
    if (!(d <= 1e-4)) return 0; /* NaN fails too */
    if (d > worst_gpu_diff) worst_gpu_diff = d;
  }
  return 1;
}

typedef struct {
  int gpu;
  tg_runtime *rt;
} injector;

static void arm(const injector *in, int64_t k) {
  if (in->gpu)
    tg_runtime_inject_alloc_failure(in->rt, k);
  else
    tg_inject_host_alloc_failure(k, NULL);
}

/* Disarms; true when the armed failure fired. */
static int disarm(const injector *in) {
  int64_t pending = -1;
  if (in->gpu) {
    tg_runtime_alloc_failure_pending(in->rt, &pending);
    tg_runtime_inject_alloc_failure(in->rt, -1);
  } else {
    tg_inject_host_alloc_failure(-1, &pending);
  }
  return pending < 0;
}

static void walk(int gpu) {
  injector in = {gpu, gpu ? ts_cuda_runtime_or_skip() : ts_host_runtime()};
  fixture f;
  fixture_init(&f);
  charlm_config c = config(&f, gpu);
  char err[CHARLM_ERR];
  /* the references: a clean model after one and after two steps */
  charlm_model m;
  snapshot s0, r1, r2, now;
  cr_assert_eq(charlm_model_init(&m, in.rt, &c, 3, err), 0, "%s", err);
  snap(&m, &s0);
  cr_assert_eq(step(&m, &f, 0), PH_DONE, "%s", tg_tape_error(m.tape));
  snap(&m, &r1);
  cr_assert_eq(step(&m, &f, 1), PH_DONE, "%s", tg_tape_error(m.tape));
  snap(&m, &r2);
  charlm_model_free(&m);
  cr_assert(!same(&s0, &r1) && !same(&r1, &r2), "the reference steps changed nothing");
  if (gpu) { /* how reproducible the device step is by itself (logged; matches() decides) */
    snapshot q1, q2;
    cr_assert_eq(charlm_model_init(&m, in.rt, &c, 3, err), 0, "%s", err);
    cr_assert_eq(step(&m, &f, 0), PH_DONE, "%s", tg_tape_error(m.tape));
    snap(&m, &q1);
    cr_assert_eq(step(&m, &f, 1), PH_DONE, "%s", tg_tape_error(m.tape));
    snap(&m, &q2);
    charlm_model_free(&m);
    cr_assert(matches(&q1, &r1, 1) && matches(&q2, &r2, 1), "the reference steps, run twice, disagree beyond 1e-4");
    cr_log_info("device reference run twice: step 1 %s, step 2 %s; largest difference %.3g",
                same(&q1, &r1) ? "bit-identical" : "differs", same(&q2, &r2) ? "bit-identical" : "differs",
                worst_gpu_diff);
    worst_gpu_diff = 0;
    free(q1.bytes), free(q2.bytes);
  }

  int64_t k = 0, failed = 0, absorbed = 0, per_phase[PH_DONE + 1] = {0};
  for (;; k++) {
    if (charlm_model_init(&m, in.rt, &c, 3, err)) cr_assert_fail("%s", err);
    arm(&in, k);
    phase p = step(&m, &f, 0);
    int fired = disarm(&in);
    if (!fired) {
      CHECK(p == PH_DONE, "nothing was injected, yet the %s failed: %s", PHASE[p], tg_tape_error(m.tape));
      charlm_model_free(&m);
      break;
    }
    per_phase[p]++;
    snap(&m, &now);
    if (p == PH_DONE) { /* a failure the library absorbed (e.g. coalescing the arena): results intact */
      absorbed++;
      CHECK(matches(&now, &r1, gpu), "allocation %lld failed silently and changed the step's result", (long long)k);
    } else if (p == PH_SAVE) {
      failed++;
      CHECK(matches(&now, &r1, gpu), "allocation %lld: the save failed, the step's update must stand", (long long)k);
    } else {
      failed++;
      CHECK(same(&now, &s0), "allocation %lld failed in %s (%s) but changed parameters or optimizer state",
            (long long)k, PHASE[p], tg_tape_error(m.tape));
      CHECK(tg_tape_error(m.tape)[0] != 0, "allocation %lld: a failed %s left no message", (long long)k, PHASE[p]);
    }
    free(now.bytes);
    /* the tape stays usable: the clean step from here gives the reference bit for bit */
    int done_one = p == PH_SAVE || p == PH_DONE;
    phase again = step(&m, &f, done_one ? 1 : 0);
    CHECK(again == PH_DONE, "after allocation %lld failed in %s, the next step failed in %s: %s", (long long)k,
          PHASE[p], PHASE[again], tg_tape_error(m.tape));
    snap(&m, &now);
    CHECK(matches(&now, done_one ? &r2 : &r1, gpu), "after allocation %lld failed in %s the next step differs",
          (long long)k, PHASE[p]);
    free(now.bytes);
    charlm_model_free(&m);
    if (k > 20000) cr_assert_fail("more than 20000 allocations in one step");
  }
  cr_log_info("%s walk: %lld allocations in a first step; %lld failed with a status, %lld absorbed "
              "(reset %lld, input %lld, forward %lld, backward %lld, clip %lld, adamw %lld, save %lld); "
              "largest difference from the reference %.3g",
              gpu ? "device" : "host", (long long)k, (long long)failed, (long long)absorbed,
              (long long)per_phase[PH_RESET], (long long)per_phase[PH_INPUT], (long long)per_phase[PH_FORWARD],
              (long long)per_phase[PH_BACKWARD], (long long)per_phase[PH_CLIP], (long long)per_phase[PH_ADAMW],
              (long long)per_phase[PH_SAVE], worst_gpu_diff);
  cr_expect_eq(nbad, 0, "%d problems; the first: %s", nbad, bad);
  cr_expect_gt(k, 10, "the walk saw too few allocations to be meaningful");
  free(s0.bytes), free(r1.bytes), free(r2.bytes);
  remove(f.path);
  charlm_data_free(&f.d);
  tg_runtime_destroy(in.rt);
}

/* Model creation under every failing allocation: a status, and nothing leaks. */
static void walk_model_init(void) {
  fixture f;
  fixture_init(&f);
  tg_runtime *rt = ts_host_runtime();
  charlm_config c = config(&f, 0);
  char err[CHARLM_ERR];
  int64_t k = 0;
  for (;; k++) {
    charlm_model m;
    tg_inject_host_alloc_failure(k, NULL);
    int rc = charlm_model_init(&m, rt, &c, 3, err);
    int64_t pending;
    tg_inject_host_alloc_failure(-1, &pending);
    charlm_model_free(&m);
    if (pending >= 0) {
      cr_expect_eq(rc, 0, "%s", err);
      break;
    }
  }
  cr_expect_gt(k, 10);
  charlm_data_free(&f.d);
  tg_runtime_destroy(rt);
}

/* (One test for both host walks: two long tests at once trip a leak in Criterion's parallel runner.) */
Test(fault_injection, host_allocations_of_model_init_and_a_training_step, .timeout = 600) {
  walk_model_init();
  walk(0);
}
Test(fault_injection, device_allocations_of_a_training_step, .timeout = 600) { walk(1); }
