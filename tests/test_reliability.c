/* Reliability (issue 15): values changed between forward and backward are refused (versions), ids
 * never wrap (tape tags, slot generations), size arithmetic of argument checks is overflow-free,
 * an out-of-memory message names the failing call, and debug builds detect two threads inside
 * calls on one runtime. Each test reproduces a failure the library had before. Host runtime. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "support.h"
#include "tape/internal.h"

static const int64_t S3[1] = {3};

/* L = sum(x * w) with x an input and w a parameter; dL/dw = x. */
static tg_id sum_xw(tg_tape *t, tg_id x, tg_id w) { return tg_sum(t, tg_mul(t, x, w)); }

/* Before: writing x after the forward gave dL/dw = the new x (100, 200, 300) instead of 1, 2, 3. */
Test(versions, input_rewritten_after_forward_is_refused) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double x0[3] = {1, 2, 3}, x1[3] = {100, 200, 300}, w0[3] = {4, 5, 6}, g[3];
  tg_id w = ts_param(t, TG_F64, 1, S3, w0);
  tg_id x = ts_input(t, TG_F64, 1, S3, x0, 0);
  tg_id L = sum_xw(t, x, w);
  cr_assert_eq(tg_tape_status(t), TG_OK, "%s", tg_tape_error(t));
  cr_assert_eq(tg_tape_write(t, x, x1, sizeof x1), TG_OK, "%s", tg_tape_error(t));
  TS_EXPECT_STATUS(tg_tape_backward(t, L), TG_ERR_STATE, t, "was rewritten after the forward");
  const char *m = tg_tape_error(t);
  char idtxt[64];
  snprintf(idtxt, sizeof idtxt, "id %lld", (long long)x);
  cr_expect(strstr(m, "node #0 (mul, host)") && strstr(m, idtxt) && strstr(m, "version 1") && strstr(m, "version 2") &&
                strstr(m, "in=["),
            "message lacks node, op, id, versions or explain line: %s", m);
  /* nothing accumulated, and the tape is usable: a new forward gives the right gradient */
  ts_read_grad(t, w, g, 3);
  for (int i = 0; i < 3; i++)
    cr_expect_eq(g[i], 0.0, "gradient changed by a refused backward");
  cr_assert_eq(tg_tape_status(t), TG_OK, "the refusal must not be sticky");
  L = sum_xw(t, x, w);
  cr_assert_eq(tg_tape_backward(t, L), TG_OK, "%s", tg_tape_error(t));
  ts_read_grad(t, w, g, 3);
  for (int i = 0; i < 3; i++)
    cr_expect_eq(g[i], x1[i]);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(versions, weight_rewritten_after_forward_is_refused) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double x0[3] = {1, 2, 3}, w0[3] = {4, 5, 6}, w1[3] = {7, 8, 9}, g[3];
  tg_id w = ts_param(t, TG_F64, 1, S3, w0);
  tg_id x = ts_input(t, TG_F64, 1, S3, x0, TG_REQUIRES_GRAD);
  tg_id L = sum_xw(t, x, w);
  cr_assert_eq(tg_tape_write(t, w, w1, sizeof w1), TG_OK, "%s", tg_tape_error(t));
  TS_EXPECT_STATUS(tg_tape_backward(t, L), TG_ERR_STATE, t, "node #0 (mul, host)");
  ts_read_grad(t, x, g, 3);
  for (int i = 0; i < 3; i++)
    cr_expect_eq(g[i], 0.0);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* Before: after an AdamW step between two backwards the second added 1, 1, 1 computed from the
 * updated weights instead of refusing. */
Test(versions, optimizer_step_between_backwards_is_refused) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double x0[3] = {1, 1, 1}, w0[3] = {4, 5, 6}, g[3];
  tg_id w = ts_param(t, TG_F64, 1, S3, w0);
  tg_id x = ts_input(t, TG_F64, 1, S3, x0, 0);
  tg_id L = tg_sum(t, tg_mul(t, tg_mul(t, x, w), w)); /* dL/dw = 2 w: reads w in backward */
  cr_assert_eq(tg_tape_backward(t, L), TG_OK, "%s", tg_tape_error(t));
  tg_adamw_options o;
  tg_adamw_options_init(&o);
  cr_assert_eq(tg_adamw_step(t, &o), TG_OK, "%s", tg_tape_error(t));
  TS_EXPECT_STATUS(tg_tape_backward(t, L), TG_ERR_STATE, t, "an optimizer step");
  ts_read_grad(t, w, g, 3);
  for (int i = 0; i < 3; i++)
    cr_expect_eq(g[i], 2 * w0[i], "the refused backward changed the gradient");
  /* after a reset the next step runs */
  cr_assert_eq(tg_tape_reset(t), TG_OK);
  x = ts_input(t, TG_F64, 1, S3, x0, 0);
  L = tg_sum(t, tg_mul(t, x, w));
  cr_expect_eq(tg_tape_backward(t, L), TG_OK, "%s", tg_tape_error(t));
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* Before: rewriting ids after the forward made the host embedding backward write out of bounds. */
Test(versions, embedding_ids_rewritten_after_forward) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  const int64_t sv[2] = {4, 2};
  double table[8] = {0, 1, 2, 3, 4, 5, 6, 7}, g[8];
  int32_t ids[3] = {0, 1, 2}, evil[3] = {0, 1, 1 << 30};
  tg_id tb = ts_param(t, TG_F64, 2, sv, table);
  tg_id id = ts_input(t, TG_I32, 1, S3, ids, 0);
  tg_id L = tg_sum(t, tg_embedding(t, tb, id));
  cr_assert_eq(tg_tape_write(t, id, evil, sizeof evil), TG_OK, "%s", tg_tape_error(t));
  TS_EXPECT_STATUS(tg_tape_backward(t, L), TG_ERR_STATE, t, "embedding");
  ts_read_grad(t, tb, g, 8);
  for (int i = 0; i < 8; i++)
    cr_expect_eq(g[i], 0.0);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* tg_tape_load between forward and backward must be refused like tg_tape_write. Disabled until
 * the checkpoint loader (train/checkpoint.c, rewritten for safetensors by issue 16) calls
 * tgi_value_bump_version on every parameter it writes; enable it then. */
Test(versions, load_after_forward_is_refused) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  char path[] = "/tmp/tiga_versions_XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  double x0[3] = {1, 2, 3}, w0[3] = {4, 5, 6}, g[3];
  tg_id w = ts_param(t, TG_F64, 1, S3, w0);
  cr_assert_eq(tg_tape_save(t, path), TG_OK, "%s", tg_tape_error(t));
  tg_id x = ts_input(t, TG_F64, 1, S3, x0, 0);
  tg_id L = tg_sum(t, tg_mul(t, tg_mul(t, x, w), w));
  cr_assert_eq(tg_tape_load(t, path), TG_OK, "%s", tg_tape_error(t));
  TS_EXPECT_STATUS(tg_tape_backward(t, L), TG_ERR_STATE, t, "was rewritten after the forward");
  ts_read_grad(t, w, g, 3);
  for (int i = 0; i < 3; i++)
    cr_expect_eq(g[i], 0.0);
  remove(path);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* A write that nobody recorded against changes nothing: gradients as usual. */
Test(versions, writes_before_the_forward_are_fine) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double x0[3] = {1, 2, 3}, w0[3] = {4, 5, 6}, g[3];
  tg_id w = ts_param(t, TG_F64, 1, S3, w0);
  tg_id x = ts_input(t, TG_F64, 1, S3, w0, 0);
  cr_assert_eq(tg_tape_write(t, x, x0, sizeof x0), TG_OK);
  cr_assert_eq(tg_tape_write(t, w, w0, sizeof w0), TG_OK);
  tg_id L = sum_xw(t, x, w);
  cr_assert_eq(tg_tape_backward(t, L), TG_OK, "%s", tg_tape_error(t));
  cr_assert_eq(tg_tape_backward(t, L), TG_OK, "a second backward over unchanged values: %s", tg_tape_error(t));
  ts_read_grad(t, w, g, 3);
  for (int i = 0; i < 3; i++)
    cr_expect_eq(g[i], 2 * x0[i]);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* ------------------------------------------------------------ ids */

/* Before: the 2048th tape created after A shared A's 11-bit tag, so A's ids resolved in it. */
Test(ids, another_tapes_id_is_never_accepted, .timeout = 120) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *a = ts_tape(rt);
  double one = 1;
  tg_id va = ts_input(a, TG_F64, 0, NULL, &one, 0);
  for (int k = 0; k < 4200; k++) {
    tg_tape *b = ts_tape(rt);
    tg_id vb = ts_input(b, TG_F64, 0, NULL, &one, 0);
    cr_assert_neq(vb, va, "tape %d issued an id equal to a live tape's", k);
    int64_t n = 0;
    tg_status s = tg_tape_numel(b, va, &n);
    if (s != TG_ERR_INVALID_ID)
      cr_assert_fail("tape %d accepted the id of another live tape (%s)", k, tg_status_string(s));
    tg_tape_destroy(b);
  }
  tg_tape_destroy(a);
  tg_runtime_destroy(rt);
}

/* Before: a slot's 20-bit generation wrapped after 2^20 resets and a stale id read the new value.
 * Now the slot retires when its generation runs out (2^18 reuses) and is never handed out again. */
Test(ids, stale_id_never_matches_after_many_resets, .timeout = 300) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double one = 1;
  tg_id first = ts_input(t, TG_F64, 0, NULL, &one, 0);
  uint32_t slot = tgi_id_slot(first);
  const int64_t resets = (INT64_C(1) << 20) + 2;
  for (int64_t r = 0; r < resets; r++) {
    cr_assert_eq(tg_tape_reset(t), TG_OK);
    tg_id now = TG_NO_ID;
    cr_assert_eq(tg_tape_input(t, TG_F64, 0, NULL, &one, sizeof one, 0, &now), TG_OK);
    if (now == first) cr_assert_fail("reset %lld handed out the stale id %lld again", (long long)r, (long long)first);
  }
  int64_t n;
  cr_expect_eq(tg_tape_numel(t, first, &n), TG_ERR_INVALID_ID);
  cr_expect(tgi_slot(t, slot)->retired, "the slot whose generations ran out is retired");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(ids, layout) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double one = 1;
  tg_id v = ts_input(t, TG_F64, 0, NULL, &one, 0);
  cr_expect_geq(v, 0);
  cr_expect_eq(tgi_id_slot(v), 0u);
  cr_expect_eq(tgi_gen_tag(tgi_id_gen(v)), t->tag);
  int64_t n;
  TS_EXPECT_STATUS(tg_tape_numel(t, TG_ABSENT, &n), TG_ERR_INVALID_ID, t, "TG_ABSENT");
  TS_EXPECT_STATUS(tg_tape_numel(t, 1, &n), TG_ERR_INVALID_ID, t, "never issued");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* ------------------------------------------------------------ argument checks without UB */

/* Before: the parts' allowed pairs were summed without a bound (signed overflow under UBSan). */
Test(ub, concat_of_huge_parts) {
  tg_runtime *rt = ts_host_runtime();
  tg_relation *big = NULL, *out = NULL;
  cr_assert_eq(tg_relation_dense(rt, INT32_MAX, INT32_MAX, &big), TG_OK, "%s", tg_last_error());
  tg_relation *parts[4] = {big, big, big, big};
  cr_expect_eq(tg_relation_concat(rt, 4, parts, &out), TG_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(tg_last_error(), "at most") != NULL, "%s", tg_last_error());
  cr_expect_null(out);
  tg_relation_destroy(big);
  tg_runtime_destroy(rt);
}

Test(ub, varlen_extreme_offsets) {
  tg_runtime *rt = ts_host_runtime();
  tg_relation *r = NULL;
  int32_t cu[3] = {0, INT32_MAX - 1, INT32_MAX}, bad[3] = {0, INT32_MAX, INT32_MIN};
  cr_expect_eq(tg_relation_varlen(rt, 2, bad, sizeof bad, NULL, 0, 0, &r), TG_ERR_INVALID_ARGUMENT);
  cr_expect_eq(tg_relation_varlen(rt, INT32_MAX, cu, sizeof cu, NULL, 0, 0, &r), TG_ERR_INVALID_ARGUMENT);
  cr_expect_eq(tg_relation_varlen(rt, INT32_MAX - 1, cu, sizeof cu, NULL, 0, 0, &r), TG_ERR_INVALID_ARGUMENT);
  /* two sequences with (2^31 - 2)^2 + 1 allowed pairs: valid (nothing is materialised) */
  cr_expect_eq(tg_relation_varlen(rt, 2, cu, sizeof cu, NULL, 0, 0, &r), TG_OK, "%s", tg_last_error());
  int64_t pairs = 0;
  tg_relation_info(r, NULL, NULL, NULL, &pairs);
  cr_expect_eq(pairs, (int64_t)(INT32_MAX - 1) * (INT32_MAX - 1) + 1);
  tg_relation_destroy(r);
  tg_runtime_destroy(rt);
}

static tg_id gc_sum(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_sum(t, in[0]);
}

Test(ub, gradcheck_huge_shapes) {
  tg_runtime *rt = ts_host_runtime();
  double x = 1;
  tg_gradcheck_input in;
  tg_gradcheck_input_init(&in);
  in.dtype = TG_F64;
  in.ndim = 3;
  in.shape[0] = INT64_MAX / 2, in.shape[1] = 4, in.shape[2] = INT64_MAX;
  in.data = &x;
  in.data_bytes = 8;
  in.differentiable = 1;
  cr_expect_eq(tg_gradcheck(rt, gc_sum, NULL, 1, &in, NULL, NULL), TG_ERR_SHAPE);
  in.ndim = 1, in.shape[0] = INT64_MAX / 8 + 1, in.data_bytes = 8;
  cr_expect_neq(tg_gradcheck(rt, gc_sum, NULL, 1, &in, NULL, NULL), TG_OK);
  tg_runtime_destroy(rt);
}

/* ------------------------------------------------------------ out of memory */

/* Before: the message of a failing tg_tape_input named the previous op ("tg_linear: ..."). */
Test(oom, message_names_the_failing_call) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double x[3] = {1, 2, 3};
  tg_id a = ts_input(t, TG_F64, 1, S3, x, 0);
  cr_assert_neq(tg_scale(t, a, 2), TG_NO_ID);
  static double big[1 << 18]; /* 2 MiB: more than the arena's first chunk holds, so it allocates */
  const int64_t sb[1] = {1 << 18};
  tg_id id;
  tg_inject_host_alloc_failure(0, NULL);
  tg_status s = tg_tape_input(t, TG_F64, 1, sb, big, sizeof big, 0, &id);
  tg_inject_host_alloc_failure(-1, NULL);
  cr_expect_eq(s, TG_ERR_OUT_OF_MEMORY);
  cr_expect_eq(id, TG_NO_ID);
  cr_expect(strncmp(tg_tape_error(t), "tg_tape_input: ", 15) == 0, "message: %s", tg_tape_error(t));
  cr_expect_eq(tg_tape_status(t), TG_OK, "a returning call's failure is not sticky");
  /* also on a tape that holds a sticky error: that error survives */
  tg_add(t, a, TG_NO_ID);
  cr_assert_eq(tg_tape_status(t), TG_ERR_INVALID_ID);
  tg_inject_host_alloc_failure(0, NULL);
  s = tg_tape_input(t, TG_F64, 1, sb, big, sizeof big, 0, &id);
  tg_inject_host_alloc_failure(-1, NULL);
  cr_expect_eq(s, TG_ERR_OUT_OF_MEMORY);
  cr_expect(strncmp(tg_last_error(), "tg_tape_input: ", 15) == 0, "message: %s", tg_last_error());
  cr_expect_eq(tg_tape_status(t), TG_ERR_INVALID_ID, "the sticky error was replaced");
  cr_expect(strstr(tg_tape_error(t), "TG_NO_ID") != NULL, "%s", tg_tape_error(t));
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* A backward that runs out of memory names tg_tape_backward and the node. */
Test(oom, backward_message_names_call_and_node) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  static double x[1 << 18];
  const int64_t s2[2] = {512, 512}, sw[2] = {512, 4};
  static double w[2048];
  tg_id xi = ts_input(t, TG_F64, 2, s2, x, 0);
  tg_id wi = ts_param(t, TG_F64, 2, sw, w);
  tg_id L = tg_sum(t, tg_linear(t, xi, wi, TG_ABSENT));
  cr_assert_eq(tg_tape_status(t), TG_OK, "%s", tg_tape_error(t));
  tg_status s = TG_OK;
  for (int64_t k = 0; k < 64 && s == TG_OK; k++) { /* the first k whose failure the sweep reports */
    tg_tape_zero_grad(t);
    tg_inject_host_alloc_failure(k, NULL);
    s = tg_tape_backward(t, L);
    tg_inject_host_alloc_failure(-1, NULL);
  }
  cr_expect_eq(s, TG_ERR_OUT_OF_MEMORY);
  cr_expect(strncmp(tg_tape_error(t), "tg_tape_backward: ", 18) == 0, "message: %s", tg_tape_error(t));
  cr_expect_eq(tg_tape_status(t), TG_OK);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(oom, host_injection_hook) {
  int64_t pending = 7;
  cr_expect_eq(tg_inject_host_alloc_failure(3, &pending), TG_OK);
  cr_expect_eq(pending, -1);
  cr_expect_eq(tg_inject_host_alloc_failure(-1, &pending), TG_OK);
  cr_expect_eq(pending, 3);
  tg_runtime *rt = ts_host_runtime();
  cr_expect_eq(tg_runtime_alloc_failure_pending(rt, &pending), TG_OK);
  cr_expect_eq(pending, -1);
  /* the injected failure fires once */
  tg_tape *t = NULL;
  tg_inject_host_alloc_failure(0, NULL);
  cr_expect_eq(tg_tape_create(rt, &t), TG_ERR_OUT_OF_MEMORY);
  cr_expect_null(t);
  cr_expect_eq(tg_tape_create(rt, &t), TG_OK);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* ------------------------------------------------------------ threads */

/* Another thread inside a call (its id in the runtime's owner slot): every kind of call refuses
 * and touches nothing. Debug builds only. */
Test(threads, detector_refuses_a_second_thread) {
  if (!TGI_THREAD_CHECK) cr_skip_test("release build: the thread check is compiled out");
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double x[3] = {1, 2, 3};
  tg_id a = ts_input(t, TG_F64, 1, S3, x, TG_REQUIRES_GRAD);
  tg_id L = tg_sum(t, a);
  __atomic_store_n(&rt->owner, (uintptr_t)0x1234, __ATOMIC_SEQ_CST); /* "another thread" */
  cr_expect_eq(tg_scale(t, a, 2), TG_NO_ID);
  cr_expect(strstr(tg_last_error(), "tg_scale: another thread is inside a call") != NULL, "%s", tg_last_error());
  cr_expect_eq(t->status, TG_OK, "the tape was touched");
  tg_id id;
  cr_expect_eq(tg_tape_input(t, TG_F64, 1, S3, x, sizeof x, 0, &id), TG_ERR_STATE);
  cr_expect_eq(tg_tape_backward(t, L), TG_ERR_STATE);
  tg_sgd_options o;
  tg_sgd_options_init(&o);
  cr_expect_eq(tg_sgd_step(t, &o), TG_ERR_STATE);
  cr_expect(strstr(tg_last_error(), "another thread") != NULL, "%s", tg_last_error());
  __atomic_store_n(&rt->owner, (uintptr_t)0, __ATOMIC_SEQ_CST);
  cr_expect_neq(tg_scale(t, a, 2), TG_NO_ID, "%s", tg_tape_error(t));
  cr_expect_eq(tg_tape_backward(t, L), TG_OK, "%s", tg_tape_error(t));
  cr_expect_eq(rt->owner, 0u, "a call left the owner slot taken");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

typedef struct {
  tg_tape *t;
  tg_id x;
  int ok;
} thread_job;

static void *job(void *p) {
  thread_job *j = p;
  for (int k = 0; k < 50; k++) {
    tg_id y = tg_sum(j->t, tg_scale(j->t, j->x, 3));
    j->ok += y != TG_NO_ID && tg_tape_backward(j->t, y) == TG_OK;
  }
  return NULL;
}

/* Serialised use from several threads (one after the other) is allowed and never flagged. */
Test(threads, serialised_use_is_not_flagged) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double x[3] = {1, 2, 3};
  thread_job j = {t, ts_input(t, TG_F64, 1, S3, x, TG_REQUIRES_GRAD), 0};
  for (int k = 0; k < 4; k++) {
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, job, &j), 0);
    pthread_join(th, NULL);
  }
  cr_expect_eq(j.ok, 200, "%s / %s", tg_tape_error(t), tg_last_error());
  cr_expect_eq(rt->owner, 0u);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}
