/* Checkpoint files that are not what tg_tape_save writes: crafted headers (every refusal of the
 * strict parser, and files other writers produce), truncations, single-byte corruptions, random
 * mutations, FIFOs and directories. A failed load is TG_ERR_IO (or a mismatch) with a message and
 * leaves the tape untouched. (tests/fuzz/ drives tg_tape_load with a coverage-guided fuzzer.) */
#include "checkpoint_support.h"

/* ---------------------------------------------------------------- malformed files */

/* A safetensors file from a header text and data bytes. */
static void write_st(const char *path, const char *json, const void *data, size_t n) {
  size_t hl = strlen(json);
  unsigned char *b = malloc(8 + hl + n + 1);
  for (int i = 0; i < 8; i++)
    b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
  memcpy(b + 8, json, hl);
  if (n) memcpy(b + 8 + hl, data, n);
  spit(path, b, 8 + hl + n);
  free(b);
}

/* One f64 [2] parameter called "w"; file tests load into it. */
static model one_param(tg_runtime *rt) {
  model m;
  m.t = ts_tape(rt);
  int64_t two = 2;
  double x[2] = {7, 8};
  m.w[0] = m.w[1] = m.w[2] = m.w[3] = ts_param(m.t, TG_F64, 1, &two, x);
  cr_assert_eq(tg_tape_set_name(m.t, m.w[0], "w"), TG_OK);
  return m;
}

#define W_GOOD "\"w\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}"

Test(checkpoint, crafted_headers) {
  tg_runtime *rt = ts_host_runtime();
  model m = one_param(rt);
  const char *bp = path_in("bad.ckpt");
  double d[3] = {1, 2, 3};
  static const struct {
    const char *json;
    size_t data;
    tg_status st;
    const char *needle;
  } cases[] = {
      {"{" W_GOOD "}", 16, TG_OK, ""},
      {"{\"__metadata__\":{\"format\":\"pt\",\"caf\\u00e9 \\ud83d\\ude00\":\"\\\"x\\\"\\n\"}, " W_GOOD "}  ", 16, TG_OK,
       ""},
      {"{" W_GOOD ",\"__metadata__\":{\"w.opt_step\":\"9007199254740992\"}}", 16, TG_OK, ""},
      {"{" W_GOOD ",\"__metadata__\":{\"w.opt_step\":\"9007199254740993\"}}", 16, TG_ERR_IO, "expected a step count"},
      {"{" W_GOOD ",\"__metadata__\":{\"w.opt_step\":\"9223372036854775807\"}}", 16, TG_ERR_IO,
       "step count in 0..2^53"},
      {"{" W_GOOD ",\"__metadata__\":{\"w.opt_step\":\"-1\"}}", 16, TG_ERR_IO, "expected a step count"},
      {"{" W_GOOD ",\"__metadata__\":{\"w.opt_step\":\"01\"}}", 16, TG_ERR_IO, "expected a step count"},
      {"{" W_GOOD ",\"__metadata__\":{\"tiga.format\":\"2\"}}", 16, TG_ERR_IO, "this build reads \"1\""},
      {"{" W_GOOD ",\"__metadata__\":{\"tiga.fnv1a64\":\"0000000000000000\"}}", 16, TG_ERR_IO, "checksum mismatch"},
      {"{" W_GOOD ",\"__metadata__\":{\"a\":1}}", 16, TG_ERR_IO, "is not a string"},
      {"{" W_GOOD ",\"__metadata__\":{\"a\":\"b\"},\"__metadata__\":{}}", 16, TG_ERR_IO, "__metadata__ appears twice"},
      {"{" W_GOOD "," W_GOOD "}", 16, TG_ERR_IO, "appears twice"},
      {"[" W_GOOD "]", 16, TG_ERR_IO, "does not start with '{'"},
      {" {" W_GOOD "}", 16, TG_ERR_IO, "does not start with '{'"},
      {"{" W_GOOD "}x", 16, TG_ERR_IO, "bytes after the header's closing brace"},
      {"{" W_GOOD, 16, TG_ERR_IO, "the header ends"},
      {"{\"w\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16],\"x\":1}}", 16, TG_ERR_IO, "unknown key 'x'"},
      {"{\"w\":{\"dtype\":\"F64\",\"shape\":[2],\"shape\":[2],\"data_offsets\":[0,16]}}", 16, TG_ERR_IO, "twice"},
      {"{\"w\":{\"dtype\":\"F64\",\"data_offsets\":[0,16]}}", 16, TG_ERR_IO, "lacks 'shape'"},
      {"{\"w\":{\"dtype\":\"F65\",\"shape\":[2],\"data_offsets\":[0,16]}}", 16, TG_ERR_IO, "unknown dtype 'F65'"},
      {"{\"w\":{\"dtype\":\"F64\",\"shape\":[02],\"data_offsets\":[0,16]}}", 16, TG_ERR_IO, "leading zero"},
      {"{\"w\":{\"dtype\":\"F64\",\"shape\":[2.0],\"data_offsets\":[0,16]}}", 16, TG_ERR_IO, "fraction or exponent"},
      {"{\"w\":{\"dtype\":\"F64\",\"shape\":[-2],\"data_offsets\":[0,16]}}", 16, TG_ERR_IO, "non-negative integer"},
      {"{\"w\":{\"dtype\":\"F64\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,16]}}", 16, TG_ERR_IO,
       "more than 8 entries"},
      {"{\"w\":{\"dtype\":\"F64\",\"shape\":[99999999999999999999],\"data_offsets\":[0,16]}}", 16, TG_ERR_IO,
       "above 2^63 - 1"},
      {"{\"w\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,16]}}", 16, TG_ERR_IO,
       "larger than the data section"},
      {"{\"w\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,17]}}", 17, TG_ERR_IO, "need 16"},
      {"{\"w\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[8,24]}}", 24, TG_ERR_IO, "must tile"},
      {"{\"w\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 24, TG_ERR_IO, "cover 16 bytes of a 24"},
      {"{\"w\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 8, TG_ERR_IO, "data section"},
      {"{\"w\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[16,0]}}", 16, TG_ERR_IO, "outside the data section"},
      {"{\"w\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0]}}", 16, TG_ERR_IO, "needs 2 entries"},
      {"{\"w\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,8,16]}}", 16, TG_ERR_IO, "more than 2"},
      {"{\"w\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]},\"v\":{\"dtype\":\"U8\",\"shape\":[0],"
       "\"data_offsets\":[16,16]}}",
       16, TG_ERR_SHAPE, "the checkpoint holds 'v' (U8 [0])"},
      {"{\"w\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]},\"a\\u0000\":{}}", 16, TG_ERR_IO, "\\u0000"},
      {"{\"w\\ud800\":{}}", 16, TG_ERR_IO, "surrogate"},
      {"{\"w\\q\":{}}", 16, TG_ERR_IO, "unknown escape"},
      {"{\"w\xff\":{}}", 16, TG_ERR_IO, "invalid UTF-8"},
      {"{\"w\xc0\xaf\":{}}", 16, TG_ERR_IO, "invalid UTF-8"},
      {"{\"w\x01\":{}}", 16, TG_ERR_IO, "control character"},
      {"{\"w\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}", 16, TG_ERR_IO, "the header ends"},
      {"{\"w\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 16 + 8, TG_ERR_IO, "cover 16 bytes"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    write_st(bp, cases[i].json, d, cases[i].data);
    if (cases[i].st == TG_OK) {
      cr_expect_eq(tg_tape_load(m.t, bp), TG_OK, "case %zu: %s", i, tg_tape_error(m.t));
      double got[2];
      ts_read(m.t, m.w[0], got, 2);
      cr_expect(got[0] == 1 && got[1] == 2, "case %zu loaded %g %g", i, got[0], got[1]);
      double back[2] = {7, 8};
      cr_assert_eq(tg_tape_write(m.t, m.w[0], back, sizeof back), TG_OK);
    } else {
      expect_load_fails(&m, bp, cases[i].st, cases[i].needle);
    }
  }
  /* header length beyond the file, and beyond 100 MB */
  unsigned char hdr[16] = {0};
  hdr[0] = 9;
  spit(bp, hdr, 16);
  expect_load_fails(&m, bp, TG_ERR_IO, "header length 9 exceeds the file");
  memset(hdr, 0xff, 8);
  spit(bp, hdr, 16);
  expect_load_fails(&m, bp, TG_ERR_IO, "exceeds the file");
  spit(bp, hdr, 5);
  expect_load_fails(&m, bp, TG_ERR_IO, "shorter than the 8-byte header length");
  expect_load_fails(&m, path_in("missing.ckpt"), TG_ERR_IO, "cannot open");
  expect_load_fails(&m, g_dir, TG_ERR_IO, "is not a regular file");
  /* a FIFO without a writer: refused at once (a blocking open would hang here) */
  const char *fifo = path_in("fifo");
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  expect_load_fails(&m, fifo, TG_ERR_IO, "is not a regular file");
  remove(fifo);
  tg_tape_destroy(m.t);
  tg_runtime_destroy(rt);
  remove(bp);
  cleanup_dir();
}

/* Every truncation and every single-byte corruption of a real checkpoint: a corrupt data byte is
 * a checksum mismatch; a corrupt header byte fails or (inside free-text metadata) loads the right
 * values; a failed load leaves the tape as it was. Then random multi-byte mutations (a cheap
 * fuzzer under ASan; tests/fuzz/ has the real one). */
Test(checkpoint, truncated_and_corrupted_files) {
  tg_runtime *rt = ts_host_runtime();
  model m = make_model(rt, 3);
  train_step(&m, 1);
  snap saved;
  take(&m, &saved);
  cr_assert_eq(tg_tape_save(m.t, path_in("a.ckpt")), TG_OK);
  model target = make_model(rt, 4);
  train_step(&target, 5);
  size_t n;
  unsigned char *good = slurp(path_in("a.ckpt"), &n), *bad = malloc(n + 8);
  const size_t data_at = 8 + (size_t)le64(good);
  const char *bp = path_in("bad.ckpt");
  for (size_t len = 0; len < n; len++) {
    spit(bp, good, len);
    expect_load_fails(&target, bp, TG_ERR_IO, "");
  }
  memcpy(bad, good, n);
  memcpy(bad + n, "garbage!", 8);
  spit(bp, bad, n + 8);
  expect_load_fails(&target, bp, TG_ERR_IO, "the tensors cover");
  int loaded = 0;
  for (size_t i = 0; i < n; i++) {
    memcpy(bad, good, n);
    bad[i] ^= 0x41;
    spit(bp, bad, n);
    if (i >= data_at) {
      expect_load_fails(&target, bp, TG_ERR_IO, "checksum mismatch");
      continue;
    }
    /* in the header: any failure (most are checksum mismatches) */
    snap before, after;
    take(&target, &before);
    if (tg_tape_load(target.t, bp) == TG_OK) {
      loaded++;
      take(&target, &after);
      expect_same(&after, &saved, "a header corruption that loads");
    } else {
      take(&target, &after);
      expect_same(&after, &before, "a failed load");
    }
  }
  cr_expect(loaded <= 12, "%d header corruptions loaded; only those of the checksum key should", loaded);
  uint64_t rng = 12345;
  for (int it = 0; it < 400; it++) {
    memcpy(bad, good, n);
    int flips = 1 + (int)(ts_next(&rng) % 4);
    for (int k = 0; k < flips; k++)
      bad[ts_next(&rng) % n] = (unsigned char)ts_next(&rng);
    size_t len = ts_next(&rng) % 4 ? n : (size_t)(ts_next(&rng) % n);
    spit(bp, bad, len);
    tg_status s = tg_tape_load(target.t, bp);
    cr_expect(s == TG_OK || s == TG_ERR_IO || s == TG_ERR_SHAPE || s == TG_ERR_DTYPE, "mutation %d: %s", it,
              tg_status_string(s));
  }
  cr_expect_eq(tg_tape_load(target.t, path_in("a.ckpt")), TG_OK, "%s", tg_tape_error(target.t));
  free(good);
  free(bad);
  tg_tape_destroy(m.t);
  tg_tape_destroy(target.t);
  tg_runtime_destroy(rt);
  remove(bp);
  cleanup_dir();
}
