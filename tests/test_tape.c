/* Tape semantics and the runtime / value API: accumulation, reset, no-grad, second backward,
 * parameters persisting, explain, and every error path of the returning calls. */
#include <math.h>
#include <stdlib.h>

#include "support.h"

static const int64_t S3[1] = {3};

Test(tape, version_and_names) {
  cr_expect_eq(tg_api_version(), TIGA_API_VERSION);
  cr_expect(strstr(tg_version_string(), "0.2.0") != NULL);
  cr_expect_eq(TIGA_API_VERSION, 200);
  cr_expect_str_eq(tg_status_string(TG_ERR_SHAPE), "TG_ERR_SHAPE");
  cr_expect_str_eq(tg_status_string((tg_status)999), "TG_ERR_UNKNOWN");
  cr_expect_eq(tg_dtype_size(TG_BF16), 2);
  cr_expect_eq(tg_dtype_size((tg_dtype)99), 0);
  cr_expect_str_eq(tg_dtype_name(TG_I32), "i32");
  cr_expect_str_eq(tg_provider_name(TG_PROVIDER_CUDA_COMPOSED), "cuda_composed");
}

Test(tape, value_used_twice_accumulates) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double x[3] = {1, 2, 3};
  tg_id ix = ts_input(t, TG_F64, 1, S3, x, TG_REQUIRES_GRAD);
  /* y = sum(x*x) + sum(3x): dy/dx = 2x + 3 */
  tg_id y = tg_add(t, tg_sum(t, tg_mul(t, ix, ix)), tg_sum(t, tg_scale(t, ix, 3)));
  cr_assert_eq(tg_tape_backward(t, y), TG_OK, "%s", tg_tape_error(t));
  double g[3], want[3] = {5, 7, 9};
  ts_read_grad(t, ix, g, 3);
  TS_EXPECT_CLOSE(g, want, 3, 0, 1e-15);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(tape, second_backward_accumulates_leaves_only) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double x[3] = {1, -2, 3}, w[3] = {0.5, 0.25, 2};
  tg_id ix = ts_input(t, TG_F64, 1, S3, x, 0);
  tg_id iw = ts_param(t, TG_F64, 1, S3, w);
  tg_id h = tg_mul(t, iw, ix);
  tg_id y = tg_sum(t, tg_mul(t, h, h)); /* dy/dw = 2 w x^2 */
  cr_assert_eq(tg_tape_backward(t, y), TG_OK);
  cr_assert_eq(tg_tape_backward(t, y), TG_OK, "second backward: %s", tg_tape_error(t));
  double g[3], want[3];
  for (int i = 0; i < 3; i++)
    want[i] = 2 * (2 * w[i] * x[i] * x[i]);
  ts_read_grad(t, iw, g, 3);
  TS_EXPECT_CLOSE(g, want, 3, 0, 1e-15);
  /* the intermediate h holds one sweep's gradient, not two */
  double gh[3], want_h[3];
  for (int i = 0; i < 3; i++)
    want_h[i] = 2 * w[i] * x[i];
  ts_read_grad(t, h, gh, 3);
  TS_EXPECT_CLOSE(gh, want_h, 3, 0, 1e-15);
  cr_expect_eq(tg_tape_zero_grad(t), TG_OK);
  ts_read_grad(t, iw, g, 3);
  double zero[3] = {0, 0, 0};
  TS_EXPECT_CLOSE(g, zero, 3, 0, 0);
  /* input without TG_REQUIRES_GRAD gets no gradient (reads as zeros) */
  ts_read_grad(t, ix, g, 3);
  TS_EXPECT_CLOSE(g, zero, 3, 0, 0);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(tape, reset_keeps_parameters_and_reuses_memory) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double w[3] = {1, 2, 3}, x[3] = {4, 5, 6};
  tg_id iw = ts_param(t, TG_F64, 1, S3, w);
  for (int step = 0; step < 5; step++) {
    tg_id ix = ts_input(t, TG_F64, 1, S3, x, 0);
    tg_id y = tg_sum(t, tg_mul(t, iw, ix));
    cr_assert_eq(tg_tape_backward(t, y), TG_OK, "%s", tg_tape_error(t));
    cr_assert_eq(tg_tape_reset(t), TG_OK);
    /* the step value is stale now */
    double tmp[3];
    TS_EXPECT_STATUS(tg_tape_read(t, ix, tmp, sizeof tmp), TG_ERR_INVALID_ID, t, "stale");
    /* the parameter and its accumulated gradient survive */
    double g[3];
    ts_read_grad(t, iw, g, 3);
    for (int i = 0; i < 3; i++)
      cr_expect_eq(g[i], (step + 1) * x[i]);
  }
  size_t n = 0;
  tg_id ids[4];
  cr_expect_eq(tg_tape_parameters(t, ids, 4, &n), TG_OK);
  cr_expect_eq(n, 1);
  cr_expect_eq(ids[0], iw);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(tape, no_grad_mode_records_nothing) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double w[3] = {1, 2, 3};
  tg_id iw = ts_param(t, TG_F64, 1, S3, w);
  int prev = -1;
  cr_expect_eq(tg_tape_set_grad_enabled(t, 0, &prev), TG_OK);
  cr_expect_eq(prev, 1);
  tg_id y = tg_sum(t, tg_mul(t, iw, iw));
  double v;
  cr_assert_eq(tg_tape_scalar(t, y, &v), TG_OK);
  cr_expect_eq(v, 14);
  size_t nodes = 99, saved = 99;
  tg_tape_stats(t, &nodes, &saved);
  cr_expect_eq(nodes, 0);
  cr_expect_eq(saved, 0);
  TS_EXPECT_STATUS(tg_tape_backward(t, y), TG_ERR_STATE, t, "grad disabled");
  tg_tape_set_grad_enabled(t, 1, NULL);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(tape, explain_lists_every_node) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double x[3] = {1, 2, 3};
  tg_id ix = ts_input(t, TG_F64, 1, S3, x, TG_REQUIRES_GRAD);
  tg_id y = tg_sum(t, tg_relu(t, tg_scale(t, ix, 2)));
  cr_assert_neq(y, TG_NO_ID);
  size_t len = 0;
  cr_assert_eq(tg_tape_explain(t, NULL, 0, &len), TG_OK);
  cr_assert(len > 0);
  char *buf = malloc(len + 1);
  size_t len2 = 0;
  cr_assert_eq(tg_tape_explain(t, buf, len + 1, &len2), TG_OK);
  cr_expect_eq(len, len2);
  cr_expect(strstr(buf, "3 nodes") != NULL, "%s", buf);
  cr_expect(strstr(buf, "scale") && strstr(buf, "relu") && strstr(buf, "sum"), "%s", buf);
  cr_expect(strstr(buf, "host") != NULL);
  cr_expect(strstr(buf, "saved=0") != NULL);
  cr_expect(strstr(buf, "[3] f64") != NULL, "%s", buf);
  /* truncation: always NUL-terminated, full length reported */
  char small[16];
  cr_expect_eq(tg_tape_explain(t, small, sizeof small, &len2), TG_OK);
  cr_expect_eq(strlen(small), sizeof small - 1);
  cr_expect_eq(len2, len);
  free(buf);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(tape, provider_choice_is_checked) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double x[3] = {1, 2, 3};
  tg_id ix = ts_input(t, TG_F64, 1, S3, x, 0);
  tg_provider prev;
  cr_expect_eq(tg_tape_set_provider(t, TG_PROVIDER_CUDA_FUSED, &prev), TG_OK);
  cr_expect_eq(prev, TG_PROVIDER_AUTO);
  cr_expect_eq(tg_relu(t, ix), TG_NO_ID); /* never a silent fallback to the host */
  TS_EXPECT_STICKY(t, TG_ERR_NO_DEVICE, "host-only");
  tg_tape_reset(t);
  TS_EXPECT_STATUS(tg_tape_set_provider(t, (tg_provider)42, NULL), TG_ERR_INVALID_ARGUMENT, t, "'provider' is 42");
  cr_expect_eq(tg_tape_set_provider(t, TG_PROVIDER_HOST, NULL), TG_OK);
  ix = ts_input(t, TG_F64, 1, S3, x, 0);
  cr_expect_neq(tg_relu(t, ix), TG_NO_ID);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(tape, backward_errors) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double x[3] = {1, 2, 3};
  tg_id ix = ts_input(t, TG_F64, 1, S3, x, TG_REQUIRES_GRAD);
  tg_id r = tg_relu(t, ix);
  TS_EXPECT_STATUS(tg_tape_backward(t, r), TG_ERR_SHAPE, t, "3 elements");
  tg_id c = ts_input(t, TG_F64, 0, NULL, x, 0);
  TS_EXPECT_STATUS(tg_tape_backward(t, c), TG_ERR_STATE, t, "does not depend");
  TS_EXPECT_STATUS(tg_tape_backward(t, TG_NO_ID), TG_ERR_INVALID_ID, t, "TG_NO_ID");
  TS_EXPECT_STATUS(tg_tape_backward(t, (tg_id)12345), TG_ERR_INVALID_ID, t, "never issued");
  cr_expect_eq(tg_tape_backward(NULL, r), TG_ERR_INVALID_ARGUMENT);
  /* a sticky op error blocks backward until reset */
  cr_expect_eq(tg_add(t, ix, TG_NO_ID), TG_NO_ID);
  tg_id s = tg_sum(t, ix); /* does nothing */
  cr_expect_eq(s, TG_NO_ID);
  TS_EXPECT_STATUS(tg_tape_backward(t, r), TG_ERR_STATE, t, "tg_add");
  cr_expect_eq(tg_tape_reset(t), TG_OK);
  cr_expect_eq(tg_tape_status(t), TG_OK);
  cr_expect_str_eq(tg_tape_error(t), "");
  /* a scalar leaf as loss: gradient 1 */
  tg_id leaf = ts_input(t, TG_F64, 0, NULL, x, TG_REQUIRES_GRAD);
  cr_expect_eq(tg_tape_backward(t, leaf), TG_OK);
  double g;
  ts_read_grad(t, leaf, &g, 1);
  cr_expect_eq(g, 1.0);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(tape, create_and_read_errors) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  double x[3] = {1, 2, 3};
  int32_t ix32[3] = {1, 2, 3};
  tg_id id = TG_NO_ID;
  int64_t bad[2] = {2, 0}, big[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  TS_EXPECT_STATUS(tg_tape_input(t, TG_F64, 1, S3, NULL, 0, 0, &id), TG_ERR_INVALID_ARGUMENT, t, "'data' is NULL");
  cr_expect_eq(id, TG_NO_ID);
  TS_EXPECT_STATUS(tg_tape_input(t, TG_F64, 1, S3, x, ts_bytes(TG_F64, 1, S3), 0, NULL), TG_ERR_INVALID_ARGUMENT, t,
                   "'out' is NULL");
  TS_EXPECT_STATUS(tg_tape_input(t, TG_F64, 2, bad, x, ts_bytes(TG_F64, 2, bad), 0, &id), TG_ERR_SHAPE, t,
                   "size 0 at dim 1");
  TS_EXPECT_STATUS(tg_tape_input(t, TG_F64, 9, big, x, ts_bytes(TG_F64, 9, big), 0, &id), TG_ERR_SHAPE, t,
                   "'ndim' is 9");
  TS_EXPECT_STATUS(tg_tape_input(t, TG_F64, 1, NULL, x, sizeof x, 0, &id), TG_ERR_INVALID_ARGUMENT, t,
                   "'shape' is NULL");
  TS_EXPECT_STATUS(tg_tape_input(t, (tg_dtype)77, 1, S3, x, ts_bytes((tg_dtype)77, 1, S3), 0, &id), TG_ERR_DTYPE, t,
                   "'dtype' is 77");
  TS_EXPECT_STATUS(tg_tape_input(t, TG_I32, 1, S3, ix32, ts_bytes(TG_I32, 1, S3), TG_REQUIRES_GRAD, &id), TG_ERR_DTYPE,
                   t, "float dtype");
  TS_EXPECT_STATUS(tg_tape_input(t, TG_F64, 1, S3, x, ts_bytes(TG_F64, 1, S3), 0x80, &id), TG_ERR_INVALID_ARGUMENT, t,
                   "'flags' is 0x80");
  TS_EXPECT_STATUS(tg_tape_parameter(t, TG_F64, 1, S3, x, ts_bytes(TG_F64, 1, S3), TG_REQUIRES_GRAD, &id),
                   TG_ERR_INVALID_ARGUMENT, t, "TG_NO_WEIGHT_DECAY");
  cr_expect_eq(tg_tape_input(NULL, TG_F64, 1, S3, x, ts_bytes(TG_F64, 1, S3), 0, &id), TG_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(tg_last_error(), "'tape' is NULL") != NULL);
  /* every pointer carries its byte count: a short or long buffer is refused, never read past */
  TS_EXPECT_STATUS(tg_tape_input(t, TG_F64, 1, S3, x, 16, 0, &id), TG_ERR_INVALID_ARGUMENT, t,
                   "argument 'data_bytes' is 16; shape [3] of f64 needs 3 x 8 = 24 bytes");
  TS_EXPECT_STATUS(tg_tape_parameter(t, TG_F64, 1, S3, x, 32, 0, &id), TG_ERR_INVALID_ARGUMENT, t,
                   "argument 'data_bytes' is 32");
  TS_EXPECT_STATUS(tg_tape_parameter(t, TG_F64, 1, S3, NULL, 24, 0, &id), TG_ERR_INVALID_ARGUMENT, t,
                   "or NULL with data_bytes 0 for zeros");
  cr_expect_eq(id, TG_NO_ID);
  /* parameter with NULL data is zeros */
  tg_id p;
  cr_assert_eq(tg_tape_parameter(t, TG_F64, 1, S3, NULL, 0, 0, &p), TG_OK);
  double v[3] = {9, 9, 9};
  cr_expect_eq(tg_tape_read(t, p, v, sizeof v), TG_OK);
  cr_expect(v[0] == 0 && v[1] == 0 && v[2] == 0);
  TS_EXPECT_STATUS(tg_tape_read(t, p, v, 8), TG_ERR_INVALID_ARGUMENT, t, "3 x f64 = 24 bytes");
  TS_EXPECT_STATUS(tg_tape_read(t, p, NULL, 24), TG_ERR_INVALID_ARGUMENT, t, "'dst' is NULL");
  TS_EXPECT_STATUS(tg_tape_read_grad(t, p, v, 4), TG_ERR_INVALID_ARGUMENT, t, "dst_bytes");
  /* write: parameters and inputs yes, op results no */
  double nv[3] = {7, 8, 9};
  cr_expect_eq(tg_tape_write(t, p, nv, sizeof nv), TG_OK);
  cr_expect_eq(tg_tape_read(t, p, v, sizeof v), TG_OK);
  cr_expect(v[0] == 7 && v[2] == 9);
  tg_id r = tg_relu(t, p);
  TS_EXPECT_STATUS(tg_tape_write(t, r, nv, sizeof nv), TG_ERR_STATE, t, "op result");
  TS_EXPECT_STATUS(tg_tape_write(t, p, nv, 3), TG_ERR_INVALID_ARGUMENT, t, "src_bytes");
  /* queries */
  int nd;
  int64_t sh[TG_MAX_DIMS];
  tg_dtype dt;
  int64_t numel;
  cr_expect_eq(tg_tape_shape(t, r, &nd, sh, TG_MAX_DIMS), TG_OK);
  cr_expect(nd == 1 && sh[0] == 3);
  cr_expect_eq(tg_tape_dtype(t, r, &dt), TG_OK);
  cr_expect_eq(dt, TG_F64);
  cr_expect_eq(tg_tape_numel(t, r, &numel), TG_OK);
  cr_expect_eq(numel, 3);
  TS_EXPECT_STATUS(tg_tape_shape(t, r, NULL, sh, TG_MAX_DIMS), TG_ERR_INVALID_ARGUMENT, t, "'ndim' is NULL");
  TS_EXPECT_STATUS(tg_tape_dtype(t, r, NULL), TG_ERR_INVALID_ARGUMENT, t, "'out' is NULL");
  double sv;
  TS_EXPECT_STATUS(tg_tape_scalar(t, r, &sv), TG_ERR_SHAPE, t, "3 elements");
  size_t cnt;
  TS_EXPECT_STATUS(tg_tape_parameters(t, NULL, 2, &cnt), TG_ERR_INVALID_ARGUMENT, t, "'ids' is NULL");
  cr_expect_eq(tg_tape_parameters(t, NULL, 0, &cnt), TG_OK);
  cr_expect_eq(cnt, 1);
  /* f16 / bf16 storage values can be created and read back */
  uint16_t h[3] = {0x3C00, 0x4000, 0xC200}; /* 1, 2, -3 in f16 */
  tg_id hf;
  cr_assert_eq(tg_tape_input(t, TG_F16, 1, S3, h, ts_bytes(TG_F16, 1, S3), 0, &hf), TG_OK);
  tg_id one;
  cr_assert_eq(tg_tape_input(t, TG_BF16, 0, NULL, (uint16_t[]){0xC040}, ts_bytes(TG_BF16, 0, NULL), 0, &one),
               TG_OK); /* -3 in bf16 */
  cr_expect_eq(tg_tape_scalar(t, one, &sv), TG_OK);
  cr_expect_eq(sv, -3.0);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(tape, runtime_api) {
  tg_runtime *rt = NULL;
  cr_expect_eq(tg_runtime_create_host(NULL), TG_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(tg_last_error(), "'out' is NULL") != NULL);
  cr_assert_eq(tg_runtime_create_host(&rt), TG_OK);
  cr_expect_eq(tg_runtime_has_device(rt), 0);
  cr_expect_eq(tg_runtime_has_device(NULL), 0);
  size_t cur = 1, peak = 1;
  cr_expect_eq(tg_runtime_memory(rt, &cur, &peak), TG_OK);
  cr_expect(cur == 0 && peak == 0);
  cr_expect_eq(tg_runtime_sync(rt), TG_OK);
  cr_expect_eq(tg_runtime_inject_alloc_failure(rt, 0), TG_ERR_NO_DEVICE);
  cr_expect_eq(tg_runtime_memory(NULL, &cur, &peak), TG_ERR_INVALID_ARGUMENT);
  tg_runtime *bad = (tg_runtime *)0x1;
  cr_expect_eq(tg_runtime_create_cuda(-1, &bad), TG_ERR_INVALID_ARGUMENT);
  cr_expect_null(bad);
  tg_tape *t = NULL;
  cr_expect_eq(tg_tape_create(NULL, &t), TG_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(tg_last_error(), "'rt' is NULL") != NULL);
  cr_expect_eq(tg_tape_create(rt, NULL), TG_ERR_INVALID_ARGUMENT);
  tg_tape_destroy(NULL);
  tg_runtime_destroy(NULL);
  /* tapes keep their runtime alive after its destroy; the last of them frees it (no leak under ASan) */
  tg_tape *t1 = ts_tape(rt), *t2 = ts_tape(rt);
  tg_runtime_destroy(rt);
  tg_tape_destroy(t1);
  tg_tape_destroy(t2);
}

Test(tape, cuda_runtime_without_device_reports) {
  tg_runtime *rt = NULL;
  tg_status s = tg_runtime_create_cuda(0, &rt);
  if (s == TG_OK) {
    cr_expect_eq(tg_runtime_has_device(rt), 1);
    tg_runtime_destroy(rt);
    return;
  }
  cr_expect_eq(s, TG_ERR_NO_DEVICE, "%s", tg_status_string(s));
  cr_expect_null(rt);
  cr_expect(strstr(tg_last_error(), "device 0") != NULL, "%s", tg_last_error());
}

Test(tape, many_steps_stable_memory) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t shape[2] = {64, 64};
  double *x = malloc(64 * 64 * sizeof(double));
  ts_uniform(x, 64 * 64, 3, -1, 1);
  tg_id w = ts_param(t, TG_F64, 2, shape, x);
  for (int step = 0; step < 50; step++) {
    tg_id ix = ts_input(t, TG_F64, 2, shape, x, 0);
    tg_id y = tg_mean(t, tg_tanh(t, tg_mul(t, tg_add(t, ix, w), w)));
    cr_assert_eq(tg_tape_backward(t, y), TG_OK, "%s", tg_tape_error(t));
    cr_assert_eq(tg_tape_reset(t), TG_OK);
  }
  free(x);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(tape, ids_of_another_tape_are_rejected) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *a = ts_tape(rt), *b = ts_tape(rt);
  double x[3] = {1, 2, 3};
  tg_id ia = ts_input(a, TG_F64, 1, S3, x, 0);
  ts_input(b, TG_F64, 1, S3, x, 0); /* same slot index in b */
  cr_expect_eq(tg_relu(b, ia), TG_NO_ID);
  TS_EXPECT_STICKY(b, TG_ERR_INVALID_ID, "another tape");
  double v[3];
  TS_EXPECT_STATUS(tg_tape_read(b, ia, v, sizeof v), TG_ERR_INVALID_ID, b, "another tape");
  tg_tape_destroy(a);
  tg_tape_destroy(b);
  tg_runtime_destroy(rt);
}

Test(tape, runtime_of_a_tape) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  cr_expect_eq(tg_tape_runtime(t), rt);
  cr_expect_null(tg_tape_runtime(NULL));
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* tg_tape_backward_with: the vector-Jacobian product from a non-scalar value. */
Test(tape, backward_with_output_gradient) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t s3[1] = {3};
  double x[3] = {1, -2, 3}, g[3] = {0.5, 2, -1}, got[3];
  tg_id xi = ts_input(t, TG_F64, 1, s3, x, TG_REQUIRES_GRAD);
  tg_id y = tg_mul(t, xi, xi); /* dy/dx = 2x */
  tg_id gy = ts_input(t, TG_F64, 1, s3, g, 0);
  cr_assert_eq(tg_tape_backward_with(t, y, gy), TG_OK, "%s", tg_tape_error(t));
  ts_read_grad(t, xi, got, 3);
  for (int i = 0; i < 3; i++)
    cr_expect_eq(got[i], 2 * x[i] * g[i]);
  int64_t s2[1] = {2};
  tg_id bad = ts_input(t, TG_F64, 1, s2, g, 0);
  TS_EXPECT_STATUS(tg_tape_backward_with(t, y, bad), TG_ERR_SHAPE, t, "argument 'grad_y' is [2] f64; expected y's");
  TS_EXPECT_STATUS(tg_tape_backward(t, y), TG_ERR_SHAPE, t, "tg_tape_backward_with");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* tg_tape_backward_with seeds an op result from grad_y's own bytes (no copy, no gradient buffer of
 * y's size): the gradients are those of a copy, y's gradient reads as grad_y, a second sweep with
 * another grad_y sees only that one, and y may be its own output gradient. HOST and CUDA; on CUDA
 * the sweep's new device bytes are x's gradient alone (n f32, over the arena's small-block limit). */
static void seed_case(tg_runtime *rt, tg_provider p) {
  enum { n = 100000 };
  tg_tape *t = ts_tape(rt);
  tg_tape_set_provider(t, p, NULL);
  int64_t sn[1] = {n};
  float *x = malloc(n * sizeof *x), *g1 = malloc(n * sizeof *g1), *g2 = malloc(n * sizeof *g2);
  double *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want);
  ts_uniform_f32(x, n, 1, -2, 2);
  ts_uniform_f32(g1, n, 2, -2, 2);
  ts_uniform_f32(g2, n, 3, -2, 2);
  tg_id xi = ts_input(t, TG_F32, 1, sn, x, TG_REQUIRES_GRAD);
  tg_id y = tg_mul(t, xi, xi); /* dy/dx = 2x */
  tg_id G1 = ts_input(t, TG_F32, 1, sn, g1, 0), G2 = ts_input(t, TG_F32, 1, sn, g2, 0);
  if (p != TG_PROVIDER_HOST) { /* everything on the device before measuring */
    ts_read(t, tg_scale(t, G1, 1), got, n);
    ts_read(t, tg_scale(t, G2, 1), got, n);
  }
  size_t before = 0, after = 0;
  tg_runtime_memory(rt, &before, NULL);
  cr_assert_eq(tg_tape_backward_with(t, y, G1), TG_OK, "%s", tg_tape_error(t));
  tg_runtime_memory(rt, &after, NULL);
  if (p != TG_PROVIDER_HOST)
    cr_expect_lt(after - before, (size_t)n * 4 * 3 / 2, "the sweep took %zu device bytes for x's %zu-byte gradient",
                 after - before, (size_t)n * 4);
  ts_read_grad(t, xi, got, n);
  for (int i = 0; i < n; i++)
    want[i] = 2.0 * x[i] * g1[i];
  TS_EXPECT_CLOSE(got, want, n, 1e-6, 1e-6);
  ts_read_grad(t, y, got, n);
  for (int i = 0; i < n; i++)
    want[i] = g1[i];
  TS_EXPECT_CLOSE(got, want, n, 0, 0);
  cr_assert_eq(tg_tape_backward_with(t, y, G2), TG_OK, "%s", tg_tape_error(t));
  ts_read_grad(t, xi, got, n);
  for (int i = 0; i < n; i++)
    want[i] = 2.0 * x[i] * ((double)g1[i] + g2[i]);
  TS_EXPECT_CLOSE(got, want, n, 1e-5, 1e-6);
  ts_read_grad(t, y, got, n);
  for (int i = 0; i < n; i++)
    want[i] = g2[i];
  TS_EXPECT_CLOSE(got, want, n, 0, 0);
  ts_read(t, G1, got, n); /* grad_y's bytes are read, never written */
  for (int i = 0; i < n; i++)
    want[i] = g1[i];
  TS_EXPECT_CLOSE(got, want, n, 0, 0);
  cr_assert_eq(tg_tape_zero_grad(t), TG_OK, "%s", tg_tape_error(t));
  cr_assert_eq(tg_tape_backward_with(t, y, y), TG_OK, "%s", tg_tape_error(t)); /* y as its own gradient */
  ts_read_grad(t, xi, got, n);
  for (int i = 0; i < n; i++)
    want[i] = 2.0 * x[i] * ((double)x[i] * x[i]);
  TS_EXPECT_CLOSE(got, want, n, 1e-5, 1e-6);
  tg_tape_destroy(t);
  free(x), free(g1), free(g2), free(got), free(want);
}

Test(tape, backward_with_reads_the_seed_in_place) {
  tg_runtime *rt = ts_host_runtime();
  seed_case(rt, TG_PROVIDER_HOST);
  tg_runtime_destroy(rt);
}

Test(tape_cuda, backward_with_reads_the_seed_in_place) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  seed_case(rt, TG_PROVIDER_CUDA);
  tg_runtime_destroy(rt);
}
