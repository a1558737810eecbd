/* The dynamic loss scaler (issue 15): scaling, unscaling with found-inf, back-off and growth; and
 * tg_loss_scaler_set_state: a scaler restored from another's state (a resumed run) goes on exactly
 * as the original does, bad states are refused and leave the scaler as it was. Host runtime. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "support.h"

static const int64_t S3[1] = {3};

/* One step of loss = sum(x * w) scaled by sc; x holds a NaN when bad. Returns found_inf. */
static int step(tg_tape *t, tg_loss_scaler *sc, tg_id w, int bad) {
  float x[3] = {0.5f, -0.25f, 2}, xbad[3] = {0.5f, NAN, 2};
  tg_tape_zero_grad(t);
  tg_id xi = ts_input(t, TG_F32, 1, S3, bad ? xbad : x, 0);
  tg_id L = tg_loss_scaler_scale(t, sc, tg_sum(t, tg_mul(t, xi, w)));
  cr_assert_eq(tg_tape_backward(t, L), TG_OK, "%s", tg_tape_error(t));
  int found = -1;
  cr_assert_eq(tg_loss_scaler_unscale(t, sc, &found), TG_OK, "%s", tg_tape_error(t));
  cr_assert_eq(tg_tape_reset(t), TG_OK);
  return found;
}

Test(scaler, restored_state_continues_the_same) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  float w0[3] = {1, 2, 3};
  tg_id w = ts_param(t, TG_F32, 1, S3, w0);
  tg_loss_scaler_options so;
  tg_loss_scaler_options_init(&so);
  so.init_scale = 1024;
  so.growth_interval = 3;
  tg_loss_scaler *a = NULL, *b = NULL;
  cr_assert_eq(tg_loss_scaler_create(&so, &a), TG_OK, "%s", tg_last_error());
  cr_assert_eq(tg_loss_scaler_create(&so, &b), TG_OK, "%s", tg_last_error());
  /* a: 1024 -> found-inf 512 -> two clean steps (tracker 2, one short of growth) */
  static const int pattern[] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0};
  for (int k = 0; k < 3; k++)
    step(t, a, w, pattern[k]);
  double sa = 0, sb = 0;
  int64_t ta = -1, tb = -1;
  cr_assert_eq(tg_loss_scaler_state(a, &sa, &ta), TG_OK);
  cr_expect(sa == 512 && ta == 2, "scale %g, tracker %lld", sa, (long long)ta);
  cr_assert_eq(tg_loss_scaler_set_state(b, sa, ta), TG_OK, "%s", tg_last_error());
  for (int k = 3; k < 10; k++) {
    int fa = step(t, a, w, pattern[k]), fb = step(t, b, w, pattern[k]);
    cr_expect_eq(fa, fb, "step %d", k);
    cr_assert_eq(tg_loss_scaler_state(a, &sa, &ta), TG_OK);
    cr_assert_eq(tg_loss_scaler_state(b, &sb, &tb), TG_OK);
    cr_expect(sa == sb && ta == tb, "step %d: original %g / %lld, restored %g / %lld", k, sa, (long long)ta, sb,
              (long long)tb);
  }
  /* the next clean step after the restore grew the scale: 512 -> 1024 at step 3 */
  tg_loss_scaler_destroy(a);
  tg_loss_scaler_destroy(b);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(scaler, set_state_refuses_bad_states) {
  tg_loss_scaler_options so;
  tg_loss_scaler_options_init(&so);
  so.init_scale = 0x1p100; /* a state above 2^64 that init allows round-trips too */
  tg_loss_scaler *sc = NULL;
  cr_assert_eq(tg_loss_scaler_create(&so, &sc), TG_OK, "%s", tg_last_error());
  double s = 0;
  int64_t tr = -1;
  cr_assert_eq(tg_loss_scaler_state(sc, &s, &tr), TG_OK);
  cr_expect_eq(tg_loss_scaler_set_state(sc, s, tr), TG_OK, "%s", tg_last_error());
  const struct {
    double scale;
    int64_t tracker;
    const char *needle;
  } bad[] = {{0, 0, "'scale' is 0"},
             {-1, 0, "'scale' is -1"},
             {INFINITY, 0, "'scale' is inf"},
             {NAN, 0, "'scale' is"},
             {1024, -1, "'growth_tracker' is -1; expected 0 .. 1999"},
             {1024, 2000, "'growth_tracker' is 2000"}};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    cr_expect_eq(tg_loss_scaler_set_state(sc, bad[k].scale, bad[k].tracker), TG_ERR_INVALID_ARGUMENT, "case %zu", k);
    cr_expect(strstr(tg_last_error(), bad[k].needle) != NULL, "case %zu: '%s' lacks '%s'", k, tg_last_error(),
              bad[k].needle);
    double s2 = 0;
    int64_t t2 = -1;
    tg_loss_scaler_state(sc, &s2, &t2);
    cr_expect(s2 == 0x1p100 && t2 == 0, "case %zu changed the scaler: %g / %lld", k, s2, (long long)t2);
  }
  cr_expect_eq(tg_loss_scaler_set_state(NULL, 1, 0), TG_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(tg_last_error(), "'scaler' is NULL") != NULL, "%s", tg_last_error());
  tg_loss_scaler_destroy(sc);
}

/* ------------------------------------------------------------ loss scaler */

Test(scaler, scale_unscale_backoff_growth) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  tg_loss_scaler_options so;
  tg_loss_scaler_options_init(&so);
  cr_expect(so.init_scale == 65536 && so.growth_factor == 2 && so.backoff_factor == 0.5 && so.growth_interval == 2000);
  so.init_scale = 1024;
  so.growth_interval = 2;
  tg_loss_scaler *sc = NULL;
  cr_assert_eq(tg_loss_scaler_create(&so, &sc), TG_OK, "%s", tg_last_error());
  float w0[3] = {1, 2, 3}, x[3] = {0.5f, -0.25f, 2}, xbad[3] = {0.5f, NAN, 2};
  tg_id w = ts_param(t, TG_F32, 1, S3, w0);
  tg_id xi = ts_input(t, TG_F32, 1, S3, x, 0);
  double scale = 0, g[3];
  int64_t tracker = -1;
  for (int step = 0; step < 5; step++) {
    tg_tape_zero_grad(t);
    int bad = step == 2;
    cr_assert_eq(tg_tape_write(t, xi, bad ? xbad : x, sizeof x), TG_OK);
    tg_id L = tg_loss_scaler_scale(t, sc, tg_sum(t, tg_mul(t, xi, w)));
    cr_assert_eq(tg_tape_backward(t, L), TG_OK, "%s", tg_tape_error(t));
    int found = -1;
    cr_assert_eq(tg_loss_scaler_unscale(t, sc, &found), TG_OK, "%s", tg_tape_error(t));
    cr_expect_eq(found, bad, "step %d", step);
    ts_read_grad(t, w, g, 3);
    if (!bad)
      for (int i = 0; i < 3; i++)
        cr_expect_eq(g[i], x[i], "step %d: unscaled gradient %g, expected %g", step, g[i], x[i]);
    tg_loss_scaler_state(sc, &scale, &tracker);
    /* 1024 -> (2 clean) 2048 -> found-inf 1024 -> (2 clean) 2048 */
    static const double want[5] = {1024, 2048, 1024, 1024, 2048};
    cr_expect_eq(scale, want[step], "step %d: scale %g", step, scale);
    tg_tape_reset(t);
    xi = ts_input(t, TG_F32, 1, S3, x, 0);
  }
  tg_loss_scaler_destroy(sc);
  /* bad options and arguments */
  tg_loss_scaler_options_init(&so);
  so.backoff_factor = 1;
  cr_expect_eq(tg_loss_scaler_create(&so, &sc), TG_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(tg_last_error(), "backoff_factor") != NULL, "%s", tg_last_error());
  cr_expect_eq(tg_loss_scaler_create(NULL, NULL), TG_ERR_INVALID_ARGUMENT);
  cr_expect_eq(tg_loss_scaler_scale(t, NULL, xi), TG_NO_ID);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ARGUMENT, "scaler");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}
