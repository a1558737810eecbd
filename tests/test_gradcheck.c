/* tg_gradcheck itself: it passes correct gradients, catches wrong ones, reports the worst
 * element, has a fast mode, and validates its arguments. */
#include <math.h>

#include "support.h"

static tg_id f_smooth(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_sum(t, tg_mul(t, tg_tanh(t, in[0]), in[1]));
}

Test(gradcheck, passes_on_correct_gradients) {
  int64_t sh[2] = {4, 5};
  double a[20], b[20];
  ts_uniform(a, 20, 1, -2, 2);
  ts_uniform(b, 20, 2, -2, 2);
  tg_gradcheck_input in[2] = {ts_gc_input(TG_F64, 2, sh, a), ts_gc_input(TG_F64, 2, sh, b)};
  tg_runtime *rt = ts_host_runtime();
  tg_gradcheck_result r;
  tg_gradcheck_result_init(&r);
  cr_expect_eq(tg_gradcheck(rt, f_smooth, NULL, 2, in, NULL, &r), TG_OK, "%s", tg_runtime_error(rt));
  cr_expect_eq(r.passed, 1);
  cr_expect_eq(r.checked, 40);
  cr_expect(r.excess <= 0);
  /* fast mode: random directions */
  tg_gradcheck_options o;
  tg_gradcheck_options_init(&o);
  o.fast_mode = 1;
  o.fast_directions = 3;
  cr_expect_eq(tg_gradcheck(rt, f_smooth, NULL, 2, in, &o, &r), TG_OK, "%s", tg_runtime_error(rt));
  cr_expect_eq(r.checked, 6);
  tg_runtime_destroy(rt);
}

/* relu at exactly 0: the analytic gradient (0) disagrees with the central difference (0.5). */
static tg_id f_kink(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_sum(t, tg_relu(t, in[0]));
}

Test(gradcheck, catches_a_wrong_gradient_and_names_it) {
  int64_t sh[1] = {3};
  double x[3] = {1.0, 0.0, -1.0};
  tg_gradcheck_input in = ts_gc_input(TG_F64, 1, sh, x);
  tg_runtime *rt = ts_host_runtime();
  tg_gradcheck_result r;
  tg_gradcheck_result_init(&r);
  cr_expect_eq(tg_gradcheck(rt, f_kink, NULL, 1, &in, NULL, &r), TG_ERR_GRADCHECK);
  cr_expect_eq(r.passed, 0);
  cr_expect_eq(r.worst_input, 0);
  cr_expect_eq(r.worst_index, 1);
  cr_expect_float_eq(r.analytic, 0.0, 1e-12);
  cr_expect_float_eq(r.numeric, 0.5, 1e-6);
  cr_expect(strstr(tg_runtime_error(rt), "input 0 element 1") != NULL, "%s", tg_runtime_error(rt));
  tg_runtime_destroy(rt);
}

static tg_id f_fail(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_add(t, in[0], TG_NO_ID);
}
static tg_id f_vector(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_relu(t, in[0]);
}
static tg_id f_const(tg_tape *t, const tg_id *in, void *user) {
  (void)user;
  return tg_sum(t, in[1]); /* does not depend on the differentiable input */
}

Test(gradcheck, argument_and_callback_errors) {
  int64_t sh[1] = {3};
  double x[3] = {1, 2, 3};
  int32_t ids[3] = {0, 1, 2};
  tg_gradcheck_input in = ts_gc_input(TG_F64, 1, sh, x);
  tg_runtime *rt = ts_host_runtime();
  cr_expect_eq(tg_gradcheck(NULL, f_smooth, NULL, 1, &in, NULL, NULL), TG_ERR_INVALID_ARGUMENT);
  cr_expect_eq(tg_gradcheck(rt, NULL, NULL, 1, &in, NULL, NULL), TG_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(tg_runtime_error(rt), "'fn' is NULL") != NULL);
  cr_expect_eq(tg_gradcheck(rt, f_smooth, NULL, 0, &in, NULL, NULL), TG_ERR_INVALID_ARGUMENT);
  tg_gradcheck_input i32 = ts_gc_input(TG_I32, 1, sh, ids);
  cr_expect_eq(tg_gradcheck(rt, f_smooth, NULL, 1, &i32, NULL, NULL), TG_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(tg_runtime_error(rt), "no input is marked differentiable") != NULL);
  i32.differentiable = 1;
  cr_expect_eq(tg_gradcheck(rt, f_smooth, NULL, 1, &i32, NULL, NULL), TG_ERR_DTYPE);
  tg_gradcheck_options o;
  tg_gradcheck_options_init(&o);
  o.eps = -1;
  cr_expect_eq(tg_gradcheck(rt, f_kink, NULL, 1, &in, &o, NULL), TG_ERR_INVALID_ARGUMENT);
  cr_expect_eq(tg_gradcheck(rt, f_fail, NULL, 1, &in, NULL, NULL), TG_ERR_INVALID_ID);
  cr_expect(strstr(tg_runtime_error(rt), "callback's ops failed") != NULL, "%s", tg_runtime_error(rt));
  cr_expect_eq(tg_gradcheck(rt, f_vector, NULL, 1, &in, NULL, NULL), TG_ERR_SHAPE);
  /* a result independent of the input: analytic 0 == numeric 0 */
  tg_gradcheck_input two[2] = {in, ts_gc_input(TG_F64, 1, sh, x)};
  two[1].differentiable = 0;
  cr_expect_eq(tg_gradcheck(rt, f_const, NULL, 2, two, NULL, NULL), TG_OK, "%s", tg_runtime_error(rt));
  tg_runtime_destroy(rt);
}
