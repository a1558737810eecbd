/* Relations: sizes and allowed-pair counts computed here by hand, and every validation error
 * (message names the argument, the index, what was expected and what came). */
#include "support.h"
#include "ops/relation.h"

#define EXPECT_REL_ERR(expr, st, rt, needle)                                                                           \
  do {                                                                                                                 \
    tg_status s_ = (expr);                                                                                             \
    cr_expect_eq(s_, (st), "%s returned %s (msg: %s)", #expr, tg_status_string(s_), tg_runtime_error(rt));             \
    cr_expect(strstr(tg_runtime_error(rt), (needle)) != NULL, "message '%s' lacks '%s'", tg_runtime_error(rt),         \
              (needle));                                                                                               \
    cr_expect(strstr(tg_last_error(), (needle)) != NULL, "last error '%s' lacks '%s'", tg_last_error(), (needle));     \
  } while (0)

static void expect_info(const tg_relation *r, tg_relation_kind kind, int64_t nq, int64_t nk, int64_t allowed) {
  tg_relation_kind k;
  int64_t a, b, c;
  cr_assert_eq(tg_relation_info(r, &k, &a, &b, &c), TG_OK);
  cr_expect_eq(k, kind);
  cr_expect_eq(a, nq, "nq %lld, expected %lld", (long long)a, (long long)nq);
  cr_expect_eq(b, nk, "nk %lld, expected %lld", (long long)b, (long long)nk);
  cr_expect_eq(c, allowed, "allowed pairs %lld, expected %lld", (long long)c, (long long)allowed);
}

Test(relation, dense_and_causal_counts) {
  tg_runtime *rt = ts_host_runtime();
  tg_relation *r = NULL;
  cr_assert_eq(tg_relation_dense(rt, 3, 5, &r), TG_OK);
  expect_info(r, TG_REL_DENSE, 3, 5, 15);
  tg_relation_destroy(r);
  /* bottom-right: row i sees keys 0 .. i + nk - nq. nq=3, nk=5: 3 + 4 + 5 */
  cr_assert_eq(tg_relation_causal(rt, 3, 5, &r), TG_OK);
  expect_info(r, TG_REL_CAUSAL, 3, 5, 12);
  tg_relation_destroy(r);
  /* nq=5, nk=3: rows 0, 1 see nothing; then 1, 2, 3 */
  cr_assert_eq(tg_relation_causal(rt, 5, 3, &r), TG_OK);
  expect_info(r, TG_REL_CAUSAL, 5, 3, 6);
  tg_relation_destroy(r);
  cr_assert_eq(tg_relation_causal(rt, 4, 4, &r), TG_OK);
  expect_info(r, TG_REL_CAUSAL, 4, 4, 10);
  tg_relation_destroy(r);
  tg_relation_destroy(NULL); /* NULL-safe */
  tg_runtime_destroy(rt);
}

Test(relation, mask_copied_and_counted) {
  tg_runtime *rt = ts_host_runtime();
  uint8_t m[2 * 2 * 3] = {1, 0, 7, 0, 0, 0, /* batch 1: */ 1, 1, 1, 0, 1, 0};
  tg_relation *shared = NULL, *per = NULL;
  cr_assert_eq(tg_relation_mask(rt, 0, 2, 3, m, (size_t)(2 * 3), &shared), TG_OK);
  cr_assert_eq(tg_relation_mask(rt, 2, 2, 3, m, (size_t)(2 * 2 * 3), &per), TG_OK);
  memset(m, 0, sizeof m); /* the relation holds its own copy */
  expect_info(shared, TG_REL_MASK, 2, 3, 2);
  expect_info(per, TG_REL_MASK, 2, 3, 6); /* summed over batch entries */
  tg_relation_destroy(shared);
  tg_relation_destroy(per);
  tg_runtime_destroy(rt);
}

Test(relation, varlen_counts) {
  tg_runtime *rt = ts_host_runtime();
  int32_t cq[3] = {0, 2, 5}, ck[3] = {0, 3, 4};
  tg_relation *r = NULL;
  /* seq 0: 2 x 3, seq 1: 3 x 1 */
  cr_assert_eq(tg_relation_varlen(rt, 2, cq, 3 * sizeof(int32_t), ck, 3 * sizeof(int32_t), 0, &r), TG_OK);
  expect_info(r, TG_REL_VARLEN, 5, 4, 9);
  tg_relation_destroy(r);
  /* causal, bottom-right per sequence: seq 0 rows see 2, 3 keys; seq 1 (lq 3, lk 1) rows see 0, 0, 1 */
  cr_assert_eq(tg_relation_varlen(rt, 2, cq, 3 * sizeof(int32_t), ck, 3 * sizeof(int32_t), 1, &r), TG_OK);
  expect_info(r, TG_REL_VARLEN, 5, 4, 6);
  tg_relation_destroy(r);
  /* cu_seqlens_k NULL: same as q; a length-1 sequence is fine */
  int32_t c1[4] = {0, 1, 4, 6};
  cr_assert_eq(tg_relation_varlen(rt, 3, c1, 4 * sizeof(int32_t), NULL, 0, 1, &r), TG_OK);
  expect_info(r, TG_REL_VARLEN, 6, 6, 1 + 6 + 3);
  tg_relation_destroy(r);
  tg_runtime_destroy(rt);
}

Test(relation, csr_and_concat) {
  tg_runtime *rt = ts_host_runtime();
  int64_t rp[5] = {0, 2, 2, 5, 6};
  int32_t ci[6] = {0, 3, 1, 2, 4, 0};
  tg_relation *csr = NULL, *causal = NULL, *dense = NULL, *cat = NULL;
  cr_assert_eq(tg_relation_csr(rt, 4, 5, rp, 5 * sizeof(int64_t), ci, (size_t)(rp)[4] * sizeof(int32_t), &csr), TG_OK);
  expect_info(csr, TG_REL_CSR, 4, 5, 6);
  cr_assert_eq(tg_relation_causal(rt, 2, 2, &causal), TG_OK);
  cr_assert_eq(tg_relation_dense(rt, 1, 3, &dense), TG_OK);
  tg_relation *parts[3] = {csr, causal, dense};
  cr_assert_eq(tg_relation_concat(rt, 3, parts, &cat), TG_OK);
  expect_info(cat, TG_REL_CONCAT, 4 + 2 + 1, 5 + 2 + 3, 6 + 3 + 3);
  tg_relation_destroy(csr); /* the concatenation keeps its own copy */
  tg_relation_destroy(causal);
  tg_relation_destroy(dense);
  expect_info(cat, TG_REL_CONCAT, 7, 10, 12);
  tg_relation_destroy(cat);
  /* a CSR with no pairs at all is valid (every query empty) */
  int64_t rp0[3] = {0, 0, 0};
  cr_assert_eq(tg_relation_csr(rt, 2, 2, rp0, 3 * sizeof(int64_t), NULL, 0, &csr), TG_OK);
  expect_info(csr, TG_REL_CSR, 2, 2, 0);
  tg_relation_destroy(csr);
  tg_runtime_destroy(rt);
}

Test(relation, errors_sizes_and_nulls) {
  tg_runtime *rt = ts_host_runtime();
  tg_relation *r = NULL;
  uint8_t m[4] = {1, 1, 1, 1};
  cr_expect_eq(tg_relation_dense(NULL, 2, 2, &r), TG_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(tg_last_error(), "tg_relation_dense: argument 'rt' is NULL") != NULL, "%s", tg_last_error());
  EXPECT_REL_ERR(tg_relation_dense(rt, 2, 2, NULL), TG_ERR_INVALID_ARGUMENT, rt, "argument 'out' is NULL");
  EXPECT_REL_ERR(tg_relation_dense(rt, 0, 2, &r), TG_ERR_INVALID_ARGUMENT, rt, "argument 'nq' is 0; expected 1 <= nq");
  cr_expect_null(r, "*out is NULL after a failure");
  EXPECT_REL_ERR(tg_relation_causal(rt, 2, -3, &r), TG_ERR_INVALID_ARGUMENT, rt, "argument 'nk' is -3");
  EXPECT_REL_ERR(tg_relation_mask(rt, 0, 2, 2, NULL, 0, &r), TG_ERR_INVALID_ARGUMENT, rt, "argument 'mask' is NULL");
  EXPECT_REL_ERR(tg_relation_mask(rt, -1, 2, 2, m, (size_t)(-1 * 2 * 2), &r), TG_ERR_INVALID_ARGUMENT, rt,
                 "argument 'batch' is -1");
  EXPECT_REL_ERR(tg_relation_mask(rt, 0, 2, 0, m, (size_t)(2 * 0), &r), TG_ERR_INVALID_ARGUMENT, rt,
                 "argument 'nk' is 0");
  int32_t cu[3] = {0, 1, 2};
  EXPECT_REL_ERR(tg_relation_varlen(rt, 0, cu, 1 * sizeof(int32_t), NULL, 0, 0, &r), TG_ERR_INVALID_ARGUMENT, rt,
                 "argument 'n_seqs' is 0");
  EXPECT_REL_ERR(tg_relation_varlen(rt, 2, NULL, 0, NULL, 0, 0, &r), TG_ERR_INVALID_ARGUMENT, rt,
                 "argument 'cu_seqlens_q' is NULL");
  int64_t rp[3] = {0, 1, 2};
  int32_t ci[2] = {0, 1};
  EXPECT_REL_ERR(tg_relation_csr(rt, 2, 2, NULL, 0, ci, 0, &r), TG_ERR_INVALID_ARGUMENT, rt,
                 "argument 'row_ptr' is NULL");
  EXPECT_REL_ERR(tg_relation_csr(rt, 2, 2, rp, 3 * sizeof(int64_t), NULL, 0, &r), TG_ERR_INVALID_ARGUMENT, rt,
                 "argument 'col_idx' is NULL; expected nnz = 2");
  EXPECT_REL_ERR(tg_relation_concat(rt, 0, NULL, &r), TG_ERR_INVALID_ARGUMENT, rt, "argument 'n' is 0");
  EXPECT_REL_ERR(tg_relation_concat(rt, 2, NULL, &r), TG_ERR_INVALID_ARGUMENT, rt, "argument 'parts' is NULL");
  tg_relation *parts[2] = {NULL, NULL};
  EXPECT_REL_ERR(tg_relation_concat(rt, 2, parts, &r), TG_ERR_INVALID_ARGUMENT, rt, "parts[0] = NULL");
  cr_expect_eq(tg_relation_info(NULL, NULL, NULL, NULL, NULL), TG_ERR_INVALID_ARGUMENT);
  cr_expect(strstr(tg_last_error(), "argument 'rel' is NULL") != NULL);
  tg_runtime_destroy(rt);
}

Test(relation, errors_varlen_offsets) {
  tg_runtime *rt = ts_host_runtime();
  tg_relation *r = NULL;
  int32_t start[3] = {1, 2, 3}, nonmono[4] = {0, 3, 2, 5}, zero[4] = {0, 2, 2, 4}, ok[4] = {0, 2, 3, 4};
  EXPECT_REL_ERR(tg_relation_varlen(rt, 2, start, 3 * sizeof(int32_t), NULL, 0, 0, &r), TG_ERR_INVALID_ARGUMENT, rt,
                 "argument 'cu_seqlens_q' has cu_seqlens_q[0] = 1; expected 0");
  EXPECT_REL_ERR(tg_relation_varlen(rt, 3, nonmono, 4 * sizeof(int32_t), NULL, 0, 0, &r), TG_ERR_INVALID_ARGUMENT, rt,
                 "cu_seqlens_q[2] = 2 after cu_seqlens_q[1] = 3; expected strictly increasing");
  EXPECT_REL_ERR(tg_relation_varlen(rt, 3, zero, 4 * sizeof(int32_t), NULL, 0, 1, &r), TG_ERR_INVALID_ARGUMENT, rt,
                 "sequence 1 would have length 0");
  EXPECT_REL_ERR(tg_relation_varlen(rt, 3, ok, 4 * sizeof(int32_t), zero, 4 * sizeof(int32_t), 1, &r),
                 TG_ERR_INVALID_ARGUMENT, rt,
                 "argument 'cu_seqlens_k' has cu_seqlens_k[2] = 2 after cu_seqlens_k[1] = 2");
  cr_expect_null(r);
  tg_runtime_destroy(rt);
}

Test(relation, errors_csr) {
  tg_runtime *rt = ts_host_runtime();
  tg_relation *r = NULL;
  int64_t rp_start[3] = {1, 2, 3}, rp_dec[3] = {0, 2, 1}, rp[3] = {0, 2, 4}, rp_big[3] = {0, 3, 5};
  int32_t unsorted[4] = {0, 2, 3, 1}, dup[4] = {0, 2, 1, 1}, range[4] = {0, 4, 0, 1}, neg[4] = {-1, 0, 0, 1};
  EXPECT_REL_ERR(
      tg_relation_csr(rt, 2, 4, rp_start, 3 * sizeof(int64_t), unsorted, (size_t)(rp_start)[2] * sizeof(int32_t), &r),
      TG_ERR_INVALID_ARGUMENT, rt, "argument 'row_ptr' has row_ptr[0] = 1; expected 0");
  EXPECT_REL_ERR(
      tg_relation_csr(rt, 2, 4, rp_dec, 3 * sizeof(int64_t), unsorted, (size_t)(rp_dec)[2] * sizeof(int32_t), &r),
      TG_ERR_INVALID_ARGUMENT, rt, "row_ptr[2] = 1 after row_ptr[1] = 2; expected non-decreasing");
  EXPECT_REL_ERR(tg_relation_csr(rt, 2, 4, rp, 3 * sizeof(int64_t), unsorted, (size_t)(rp)[2] * sizeof(int32_t), &r),
                 TG_ERR_INVALID_ARGUMENT, rt,
                 "col_idx[3] = 1 after col_idx[2] = 3 in row 1; expected strictly increasing");
  EXPECT_REL_ERR(tg_relation_csr(rt, 2, 4, rp, 3 * sizeof(int64_t), dup, (size_t)(rp)[2] * sizeof(int32_t), &r),
                 TG_ERR_INVALID_ARGUMENT, rt, "col_idx[3] = 1 after col_idx[2] = 1 in row 1");
  EXPECT_REL_ERR(tg_relation_csr(rt, 2, 4, rp, 3 * sizeof(int64_t), range, (size_t)(rp)[2] * sizeof(int32_t), &r),
                 TG_ERR_INVALID_ARGUMENT, rt, "col_idx[1] = 4 (row 0); expected a key index in [0, 4)");
  EXPECT_REL_ERR(tg_relation_csr(rt, 2, 4, rp, 3 * sizeof(int64_t), neg, (size_t)(rp)[2] * sizeof(int32_t), &r),
                 TG_ERR_INVALID_ARGUMENT, rt, "col_idx[0] = -1 (row 0)");
  EXPECT_REL_ERR(
      tg_relation_csr(rt, 2, 2, rp_big, 3 * sizeof(int64_t), unsorted, (size_t)(rp_big)[2] * sizeof(int32_t), &r),
      TG_ERR_INVALID_ARGUMENT, rt, "ends at nnz = 5; expected at most nq * nk = 4");
  cr_expect_null(r);
  tg_runtime_destroy(rt);
}

Test(relation, errors_concat_parts) {
  tg_runtime *rt = ts_host_runtime(), *other = ts_host_runtime();
  tg_relation *a = NULL, *b = NULL, *per = NULL, *r = NULL;
  uint8_t m[2 * 2 * 2] = {1, 1, 1, 1, 1, 0, 0, 1};
  cr_assert_eq(tg_relation_dense(rt, 2, 2, &a), TG_OK);
  cr_assert_eq(tg_relation_dense(other, 2, 2, &b), TG_OK);
  cr_assert_eq(tg_relation_mask(rt, 2, 2, 2, m, (size_t)(2 * 2 * 2), &per), TG_OK);
  tg_relation *p1[2] = {a, b}, *p2[2] = {a, per};
  EXPECT_REL_ERR(tg_relation_concat(rt, 2, p1, &r), TG_ERR_INVALID_ARGUMENT, rt, "parts[1] built on another runtime");
  EXPECT_REL_ERR(tg_relation_concat(rt, 2, p2, &r), TG_ERR_INVALID_ARGUMENT, rt,
                 "parts[1], a per-batch mask (batch 2)");
  cr_expect_null(r);
  tg_relation_destroy(a);
  tg_relation_destroy(b);
  tg_relation_destroy(per);
  tg_runtime_destroy(rt);
  tg_runtime_destroy(other);
}

/* The fused kernels' tile-shape hint that tg_relation_mask records (ops/relation.h, mask_coarse):
 * inside every aligned 128 x 128 block the 64 x 64 cells are all empty or all non-empty. Masks of
 * 150 x 140 (cut cells at both edges). */
static int coarse_of(tg_runtime *rt, int64_t batch, const uint8_t *m, int64_t nq, int64_t nk) {
  tg_relation *r = NULL;
  cr_assert_eq(tg_relation_mask(rt, batch, nq, nk, m, (size_t)((batch ? batch : 1) * nq * nk), &r), TG_OK, "%s",
               tg_runtime_error(rt));
  const int c = r->mask_coarse;
  tg_relation_destroy(r);
  return c;
}

Test(relation, mask_coarse_hint) {
  enum { NQ = 150, NK = 140 };
  static uint8_t m[2 * NQ * NK];
  tg_runtime *rt = ts_host_runtime();
  memset(m, 1, sizeof m);
  cr_expect_eq(coarse_of(rt, 2, m, NQ, NK), 1, "all allowed");
  memset(m, 0, sizeof m);
  cr_expect_eq(coarse_of(rt, 2, m, NQ, NK), 1, "all blocked");
  for (int i = 0; i < NQ; i++)
    for (int j = 0; j < NK; j++)
      m[i * NK + j] = (i / 128 + j / 128) % 2 == 0 && (i * 7 + j) % 3 != 0;
  cr_expect_eq(coarse_of(rt, 0, m, NQ, NK), 1, "128 x 128 blocks, partial inside");
  memset(m, 0, sizeof m);
  m[70 * NK + 10] = 1; /* cell (1, 0) non-empty, cell (0, 0) of the same block empty */
  cr_expect_eq(coarse_of(rt, 0, m, NQ, NK), 0, "one pair in a 128 x 128 block's second cell row");
  memset(m, 0, sizeof m);
  m[140 * NK + 130] = 1; /* cell (2, 2): alone in its block (cells 3 do not exist) */
  cr_expect_eq(coarse_of(rt, 0, m, NQ, NK), 1, "a cut cell alone in its block");
  m[140 * NK + 120] = 1; /* cell (2, 1), whose block's first cell (2, 0) is empty */
  cr_expect_eq(coarse_of(rt, 0, m, NQ, NK), 0, "cell (2, 1) non-empty, (2, 0) empty");
  for (int i = 0; i < NQ; i++)
    for (int j = 0; j < NK; j++) {
      m[i * NK + j] = (i / 128 + j / 128) % 2 == 0;      /* entry 0: blocks */
      m[(NQ + i) * NK + j] = (i / 64 + j / 64) % 2 == 0; /* entry 1: 64 x 64 checkerboard */
    }
  cr_expect_eq(coarse_of(rt, 0, m, NQ, NK), 1, "entry 0 alone (shared mask)");
  cr_expect_eq(coarse_of(rt, 2, m, NQ, NK), 0, "entry 1 is not coarse (per-batch mask)");
  tg_runtime_destroy(rt);
}

/* tgi_order_grade (the graded order's host step, ops/relation.h): each window of W entries of an
 * order comes out sorted by the rows' degree, ties in the input's order, and holds the same rows as
 * the input's window. Checked by those properties alone, on a random order of 1000 rows with degrees
 * 0..9 (many ties), for windows of 1 (a copy), 2, 7, 64, n and more than n (the last window shorter
 * in every case but 1, n and more). */
Test(relation, order_grade_sorts_each_window_by_degree_stably) {
  enum { N = 1000 };
  static int64_t rp[N + 1];
  static int32_t in[N], out[N], pos[N], seen[N];
  static uint64_t key[N + 5];
  uint64_t st = 0x6ead;
  rp[0] = 0;
  for (int64_t i = 0; i < N; i++)
    rp[i + 1] = rp[i] + (int64_t)(ts_next(&st) % 10);
  for (int32_t i = 0; i < N; i++)
    in[i] = i;
  for (int64_t i = N - 1; i > 0; i--) { /* Fisher-Yates */
    const int64_t j = (int64_t)(ts_next(&st) % (uint64_t)(i + 1));
    const int32_t x = in[i];
    in[i] = in[j], in[j] = x;
  }
  for (int32_t k = 0; k < N; k++)
    pos[in[k]] = k;
  static const int64_t windows[] = {1, 2, 7, 64, N, N + 5};
  for (size_t w = 0; w < sizeof windows / sizeof windows[0]; w++) {
    const int64_t W = windows[w];
    memset(out, 0xff, sizeof out);
    tgi_order_grade(N, W, rp, in, out, key);
    for (int64_t w0 = 0; w0 < N; w0 += W) {
      const int64_t m = N - w0 < W ? N - w0 : W;
      memset(seen, 0, sizeof seen);
      for (int64_t k = 0; k < m; k++) {
        const int32_t o = out[w0 + k];
        cr_assert(o >= 0 && o < N, "W %lld: out[%lld] = %d is not a row", (long long)W, (long long)(w0 + k), o);
        cr_assert(pos[o] >= w0 && pos[o] < w0 + m && !seen[o]++,
                  "W %lld: out[%lld] = row %d, which is not (once) in the input's window [%lld, %lld)", (long long)W,
                  (long long)(w0 + k), o, (long long)w0, (long long)(w0 + m));
        if (k == 0) continue;
        const int32_t p = out[w0 + k - 1];
        const int64_t dp = rp[p + 1] - rp[p], d = rp[o + 1] - rp[o];
        cr_assert(dp < d || (dp == d && pos[p] < pos[o]),
                  "W %lld: out[%lld] (row %d, degree %lld, input position %d) after row %d (degree %lld, position %d)",
                  (long long)W, (long long)(w0 + k), o, (long long)d, pos[o], p, (long long)dp, pos[p]);
      }
    }
    if (W == 1) cr_expect(memcmp(out, in, sizeof in) == 0, "W 1 must copy the order");
  }
  tgi_order_grade(0, 64, rp, in, out, key); /* nothing to do */
}
