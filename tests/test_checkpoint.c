/* tg_tape_save / tg_tape_load in the safetensors format: round trips of values and optimizer
 * state in every float dtype, resuming training gives bit-identical results, parameters match by
 * name (tg_tape_set_name; "param.<k>" by default), mismatched names / shapes / dtypes are errors
 * naming both sides, and every malformed, corrupt, truncated, oversized or non-regular file is
 * TG_ERR_IO and leaves the tape untouched. (tests/fuzz/ drives tg_tape_load with a fuzzer.) */
#include "checkpoint_support.h"

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

/* ---------------------------------------------------------------- names */

Test(checkpoint, names) {
  tg_runtime *rt = ts_host_runtime();
  model m = make_model(rt, 1);
  char buf[64];
  size_t len = 0;
  cr_expect_eq(tg_tape_name(m.t, m.w[0], buf, sizeof buf, &len), TG_OK);
  cr_expect_str_eq(buf, "enc.w");
  cr_expect_eq(len, 5);
  cr_expect_eq(tg_tape_name(m.t, m.w[3], buf, sizeof buf, &len), TG_OK);
  cr_expect_str_eq(buf, "param.3");
  cr_expect_eq(tg_tape_name(m.t, m.w[3], NULL, 0, &len), TG_OK);
  cr_expect_eq(len, 7);
  cr_expect_eq(tg_tape_name(m.t, m.w[0], buf, 3, &len), TG_OK); /* truncated like snprintf */
  cr_expect_str_eq(buf, "en");
  tg_id id = TG_NO_ID;
  cr_expect_eq(tg_tape_find_parameter(m.t, "head.w", &id), TG_OK);
  cr_expect_eq(id, m.w[2]);
  cr_expect_eq(tg_tape_find_parameter(m.t, "param.3", &id), TG_OK);
  cr_expect_eq(id, m.w[3]);
  TS_EXPECT_STATUS(tg_tape_find_parameter(m.t, "nope", &id), TG_ERR_INVALID_ID, m.t, "no parameter named 'nope'");
  cr_expect_eq(id, TG_NO_ID);
  /* refused names; the old name stays */
  const char *bad[] = {"",        "a b",        "q\"uote", "back\\slash", "__metadata__", "x.opt_m",
                       "x.opt_v", "x.opt_step", "x.flags", "param.12",    "caf\xc3\xa9"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    TS_EXPECT_STATUS(tg_tape_set_name(m.t, m.w[1], bad[i]), TG_ERR_INVALID_ARGUMENT, m.t, "is refused");
  char longname[TG_NAME_MAX + 2];
  memset(longname, 'a', sizeof longname - 1);
  longname[TG_NAME_MAX + 1] = 0;
  TS_EXPECT_STATUS(tg_tape_set_name(m.t, m.w[1], longname), TG_ERR_INVALID_ARGUMENT, m.t, "TG_NAME_MAX");
  longname[TG_NAME_MAX] = 0;
  cr_expect_eq(tg_tape_set_name(m.t, m.w[3], longname), TG_OK, "%s", tg_tape_error(m.t));
  cr_expect_eq(tg_tape_set_name(m.t, m.w[3], "param.x"), TG_OK, "%s", tg_tape_error(m.t)); /* not digits: fine */
  TS_EXPECT_STATUS(tg_tape_set_name(m.t, m.w[1], "enc.w"), TG_ERR_INVALID_ARGUMENT, m.t, "taken by parameter");
  cr_expect_eq(tg_tape_set_name(m.t, m.w[0], "enc.w"), TG_OK); /* its own name again */
  cr_expect_eq(tg_tape_name(m.t, m.w[1], buf, sizeof buf, NULL), TG_OK);
  cr_expect_str_eq(buf, "enc.b");
  double one = 1;
  tg_id x = ts_input(m.t, TG_F64, 0, NULL, &one, 0);
  TS_EXPECT_STATUS(tg_tape_set_name(m.t, x, "x"), TG_ERR_STATE, m.t, "only parameters have names");
  TS_EXPECT_STATUS(tg_tape_name(m.t, TG_NO_ID, buf, sizeof buf, NULL), TG_ERR_INVALID_ID, m.t, "TG_NO_ID");
  TS_EXPECT_STATUS(tg_tape_set_name(m.t, m.w[0], NULL), TG_ERR_INVALID_ARGUMENT, m.t, "'name' is NULL");
  cr_expect_eq(tg_tape_set_name(NULL, m.w[0], "a"), TG_ERR_INVALID_ARGUMENT);
  tg_tape_destroy(m.t);
  tg_runtime_destroy(rt);
}

/* Two same-shaped weights created in the other order load by name, not by position. */
Test(checkpoint, matched_by_name_not_position) {
  tg_runtime *rt = ts_host_runtime();
  int64_t sh[2] = {2, 2};
  double a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, z[4] = {0};
  tg_tape *t1 = ts_tape(rt), *t2 = ts_tape(rt);
  tg_id wq = ts_param(t1, TG_F64, 2, sh, a), wk = ts_param(t1, TG_F64, 2, sh, b);
  cr_assert_eq(tg_tape_set_name(t1, wq, "wq"), TG_OK);
  cr_assert_eq(tg_tape_set_name(t1, wk, "wk"), TG_OK);
  cr_assert_eq(tg_tape_save(t1, path_in("a.ckpt")), TG_OK, "%s", tg_tape_error(t1));
  tg_id k2 = ts_param(t2, TG_F64, 2, sh, z), q2 = ts_param(t2, TG_F64, 2, sh, z);
  cr_assert_eq(tg_tape_set_name(t2, k2, "wk"), TG_OK);
  cr_assert_eq(tg_tape_set_name(t2, q2, "wq"), TG_OK);
  cr_assert_eq(tg_tape_load(t2, path_in("a.ckpt")), TG_OK, "%s", tg_tape_error(t2));
  double got[4];
  ts_read(t2, q2, got, 4);
  cr_expect(memcmp(got, a, sizeof a) == 0, "wq loaded the wrong tensor");
  ts_read(t2, k2, got, 4);
  cr_expect(memcmp(got, b, sizeof b) == 0, "wk loaded the wrong tensor");
  tg_tape_destroy(t1);
  tg_tape_destroy(t2);
  tg_runtime_destroy(rt);
  cleanup_dir();
}

/* ---------------------------------------------------------------- layout */
Test(checkpoint, layout_is_safetensors) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sh[2] = {2, 1}, sh3 = 3;
  double x[2] = {1.5, -2.0};
  uint16_t h[3] = {0x3c00, 0x4000, 0xc000}; /* f16 1, 2, -2 */
  tg_id w = ts_param(t, TG_F16, 1, &sh3, h), v = ts_param(t, TG_F64, 2, sh, x);
  cr_assert_eq(tg_tape_set_name(t, v, "v"), TG_OK);
  (void)w;
  cr_assert_eq(tg_tape_save(t, path_in("a.ckpt")), TG_OK);
  size_t n;
  unsigned char *b = slurp(path_in("a.ckpt"), &n);
  uint64_t hl = le64(b);
  cr_assert(hl + 8 + 16 + 6 == n, "header %llu + data 22 != file %zu", (unsigned long long)hl, n);
  cr_expect_eq((8 + hl) % 8, 0, "the data section starts unaligned");
  char *json = malloc(hl + 1);
  memcpy(json, b + 8, hl);
  json[hl] = 0;
  cr_expect_eq(json[0], '{');
  /* f64 before f16 (element size, largest first), so both start aligned */
  cr_expect(strstr(json, "\"v\":{\"dtype\":\"F64\",\"shape\":[2,1],\"data_offsets\":[0,16]}") != NULL, "%s", json);
  cr_expect(strstr(json, "\"param.0\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[16,22]}") != NULL, "%s", json);
  cr_expect(strstr(json, "\"tiga.format\":\"1\"") && strstr(json, "\"tiga.step\":\"0\"") &&
                strstr(json, "\"v.opt_step\":\"0\"") && strstr(json, "\"tiga.fnv1a64\":\""),
            "%s", json);
  cr_expect(strstr(json, ".opt_m") == NULL, "no optimizer state yet: %s", json);
  double y[2];
  memcpy(y, b + 8 + hl, 16);
  cr_expect(y[0] == 1.5 && y[1] == -2.0);
  cr_expect(memcmp(b + 8 + hl + 16, h, 6) == 0);
  char *at = strstr(json, "\"tiga.fnv1a64\":\"") + 16; /* the digits */
  char stored[17];
  memcpy(stored, at, 16);
  stored[16] = 0;
  memset(b + 8 + (at - json), '0', 16);
  uint64_t fnv = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++)
    fnv = (fnv ^ b[i]) * 0x100000001b3ull;
  char digits[64];
  snprintf(digits, sizeof digits, "%016llx", (unsigned long long)fnv);
  cr_expect_str_eq(stored, digits, "checksum is not FNV-1a 64 of the file with its digits as zeros");
  free(json);
  free(b);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
  cleanup_dir();
}

/* Every float dtype with moments: save, perturb, load gives the same bytes back. */
Test(checkpoint, every_dtype_round_trip) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  const tg_dtype dts[4] = {TG_F32, TG_F64, TG_F16, TG_BF16};
  int64_t sh[3] = {2, 3, 1};
  tg_id ids[4];
  double src[6];
  for (int k = 0; k < 4; k++) {
    ts_uniform(src, 6, 40 + (uint64_t)k, -2, 2);
    void *p = ts_convert(src, 6, dts[k]);
    cr_assert_eq(tg_tape_parameter(t, dts[k], 3, sh, p, ts_bytes(dts[k], 3, sh), 0, &ids[k]), TG_OK);
    free(p);
    tgi_value *v = val(t, ids[k]);
    for (int w = 0; w < 2; w++) { /* moments with recognisable bytes */
      tgi_buf *b = w ? &v->opt_v : &v->opt_m;
      b->h = aligned_alloc(64, 64);
      for (size_t i = 0; i < v->bytes; i++)
        ((unsigned char *)b->h)[i] = (unsigned char)(17 * k + 5 * w + i);
      b->valid = TGI_ON_HOST;
    }
    v->opt_step = 3 + k;
  }
  snap before;
  model m = {t, {ids[0], ids[1], ids[2], ids[3]}};
  take(&m, &before);
  cr_assert_eq(tg_tape_save(t, path_in("a.ckpt")), TG_OK, "%s", tg_tape_error(t));
  for (int k = 0; k < 4; k++) {
    tgi_value *v = val(t, ids[k]);
    memset(v->data.h, 0, v->bytes);
    v->opt_m.valid = v->opt_v.valid = 0;
    v->opt_step = 0;
  }
  cr_assert_eq(tg_tape_load(t, path_in("a.ckpt")), TG_OK, "%s", tg_tape_error(t));
  snap after;
  take(&m, &after);
  expect_same(&after, &before, "every dtype");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
  cleanup_dir();
}

Test(checkpoint, mismatched_parameters) {
  tg_runtime *rt = ts_host_runtime();
  model m = make_model(rt, 5);
  train_step(&m, 1);
  cr_assert_eq(tg_tape_save(m.t, path_in("a.ckpt")), TG_OK);
  const char *p = path_in("a.ckpt");
  model o = make_model(rt, 6);
  train_step(&o, 2);
  /* a parameter the file lacks: named, with the file's unclaimed tensors */
  cr_assert_eq(tg_tape_set_name(o.t, o.w[2], "head.w2"), TG_OK);
  expect_load_fails(&o, p, TG_ERR_SHAPE, "parameter 'head.w2' (position 2) is not in the checkpoint");
  expect_load_fails(&o, p, TG_ERR_SHAPE, "tensors no parameter claims: 'head.w'");
  cr_assert_eq(tg_tape_set_name(o.t, o.w[2], "head.w"), TG_OK);
  cr_expect_eq(tg_tape_load(o.t, p), TG_OK, "%s", tg_tape_error(o.t));
  /* a tensor of the file that no parameter claims */
  model fewer;
  fewer.t = ts_tape(rt);
  double d[6] = {0};
  fewer.w[0] = fewer.w[1] = fewer.w[2] = fewer.w[3] = ts_param(fewer.t, TG_F64, 2, SH0, d);
  cr_assert_eq(tg_tape_set_name(fewer.t, fewer.w[0], "enc.w"), TG_OK);
  TS_EXPECT_STATUS(tg_tape_load(fewer.t, p), TG_ERR_SHAPE, fewer.t, "the checkpoint holds 'enc.b' (F32 [4])");
  /* shape and dtype, naming both sides */
  model bad;
  bad.t = ts_tape(rt);
  int64_t sh5 = 5;
  float f[5] = {0};
  uint16_t h[3] = {0};
  bad.w[0] = ts_param(bad.t, TG_F64, 2, SH0, d);
  bad.w[1] = ts_param(bad.t, TG_F32, 1, &sh5, f);
  bad.w[2] = ts_param(bad.t, TG_F64, 1, SH2, d);
  bad.w[3] = ts_param(bad.t, TG_BF16, 1, SH3, h);
  static const char *const names[3] = {"enc.w", "enc.b", "head.w"};
  for (int k = 0; k < 3; k++)
    cr_assert_eq(tg_tape_set_name(bad.t, bad.w[k], names[k]), TG_OK);
  TS_EXPECT_STATUS(tg_tape_load(bad.t, p), TG_ERR_SHAPE, bad.t,
                   "'enc.b' has shape [4] in the checkpoint and [5] on the tape");
  double got[6];
  ts_read(bad.t, bad.w[0], got, 6); /* enc.w matched but was not written */
  for (int i = 0; i < 6; i++)
    cr_expect_eq(got[i], 0.0);
  tg_tape *t3 = ts_tape(rt);
  tg_id x0 = ts_param(t3, TG_F64, 2, SH0, d), x1 = ts_param(t3, TG_F64, 1, SH1, d);
  ts_param(t3, TG_F64, 1, SH2, d);
  ts_param(t3, TG_BF16, 1, SH3, h);
  cr_assert_eq(tg_tape_set_name(t3, x0, "enc.w"), TG_OK);
  cr_assert_eq(tg_tape_set_name(t3, x1, "enc.b"), TG_OK);
  TS_EXPECT_STATUS(tg_tape_load(t3, p), TG_ERR_DTYPE, t3, "'enc.b' is F32 in the checkpoint and f64 on the tape");
  tg_tape_destroy(t3);
  tg_tape_destroy(fewer.t);
  tg_tape_destroy(bad.t);
  tg_tape_destroy(o.t);
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
