/* Fuzzes every relation constructor (dense, causal, mask, varlen, csr, concat, radius) with sizes,
 * offsets, index arrays, positions and options from the fuzzer's bytes; each byte count passed is
 * the true size of the buffer passed (the API's contract), so any out-of-bounds access or UB is
 * the library's. A relation that is built is read back (info, CSR of every batch entry, checked
 * against its promises) and, when small, used by a host attention node and a graph reduce with a
 * backward. */
#include <math.h>
#include <stdlib.h>

#include "fuzz.h"
#include "tiga.h"

#define MAXREL 6

static void trap(const char *why) {
  (void)why;
  __builtin_trap(); /* a broken promise: libFuzzer reports it as a crash */
}

/* Reads the relation back and checks what tiga.h promises about its CSR. */
static void check(tg_relation *r) {
  tg_relation_kind kind;
  int64_t nq, nk, pairs;
  if (tg_relation_info(r, &kind, &nq, &nk, &pairs)) trap("info");
  if (nq < 1 || nk < 1 || pairs < 0) trap("sizes");
  if (nq > (1 << 14)) return; /* the CSR read needs nq + 1 words */
  int64_t *rp = malloc((size_t)(nq + 1) * sizeof *rp);
  if (!rp) return;
  for (int64_t b = 0; b < 3; b++) {
    tg_status s = tg_relation_read_csr(r, b, rp, (size_t)(nq + 1) * sizeof *rp, NULL, 0);
    if (s) break;
    int64_t e = rp[nq];
    if (rp[0] != 0 || e < 0) trap("row_ptr");
    if (e > (1 << 20)) break;
    int32_t *ci = malloc((size_t)(e ? e : 1) * sizeof *ci);
    if (ci && !tg_relation_read_csr(r, b, rp, (size_t)(nq + 1) * sizeof *rp, ci, (size_t)e * sizeof *ci)) {
      for (int64_t i = 0; i < nq; i++)
        for (int64_t x = rp[i]; x < rp[i + 1]; x++)
          if (ci[x] < 0 || ci[x] >= nk || (x > rp[i] && ci[x] <= ci[x - 1])) trap("col_idx");
    }
    free(ci);
  }
  free(rp);
}

/* A host attention node over r and a graph reduce, with backward, when r is small. */
static void use(tg_runtime *rt, tg_relation *r, fz *f) {
  int64_t nq, nk;
  tg_relation_info(r, NULL, &nq, &nk, NULL);
  if (nq > 12 || nk > 12) return;
  tg_tape *t = NULL;
  if (tg_tape_create(rt, &t)) return;
  const int64_t D = 2, sq[4] = {1, nq, 1, D}, sk[4] = {1, nk, 1, D};
  double buf[64];
  for (int i = 0; i < 64; i++)
    buf[i] = fz_real(f);
  tg_id q, k, v;
  tg_tape_input(t, TG_F64, 4, sq, buf, (size_t)(nq * D) * 8, TG_REQUIRES_GRAD, &q);
  tg_tape_input(t, TG_F64, 4, sk, buf + 24, (size_t)(nk * D) * 8, TG_REQUIRES_GRAD, &k);
  tg_tape_input(t, TG_F64, 4, sk, buf + 40, (size_t)(nk * D) * 8, TG_REQUIRES_GRAD, &v);
  tg_attention_options o;
  tg_attention_options_init(&o);
  if (fz_u8(f) & 1) o.dropout_keep = 0.5;
  tg_id y = tg_attention(t, q, k, v, r, &o);
  tg_tape_backward(t, tg_sum(t, y));
  int64_t pairs = 0;
  tg_relation_info(r, NULL, NULL, NULL, &pairs);
  if (pairs <= 200) {
    tg_tape_reset(t);
    const int64_t se[2] = {pairs > 0 ? pairs : 1, 1};
    double eb[200];
    for (int64_t i = 0; i < se[0]; i++)
      eb[i] = buf[i % 64];
    tg_id ev;
    tg_tape_input(t, TG_F64, 2, se, eb, (size_t)se[0] * 8, TG_REQUIRES_GRAD, &ev);
    tg_tape_backward(t, tg_sum(t, tg_graph_reduce(t, r, ev, (tg_graph_reduce_kind)(fz_u8(f) % 4))));
  }
  tg_tape_destroy(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz f = {data, size, 0};
  tg_runtime *rt = NULL;
  if (tg_runtime_create_host(&rt)) return 0;
  tg_relation *made[MAXREL] = {0};
  int nmade = 0;
  while (fz_more(&f) && nmade < MAXREL) {
    tg_relation *r = NULL;
    uint8_t op = fz_u8(&f) % 8;
    switch (op) {
    case 0: tg_relation_dense(rt, fz_size(&f, 40), fz_size(&f, 40), &r); break;
    case 1: tg_relation_causal(rt, fz_size(&f, 40), fz_size(&f, 40), &r); break;
    case 2: {
      int64_t batch = fz_u8(&f) % 4 == 0 ? fz_size(&f, 3) : fz_u8(&f) % 3;
      int64_t nq = fz_size(&f, 12), nk = fz_size(&f, 12);
      int claim = fz_u8(&f) % 4; /* 0: claim half the bytes (a wrong count); 1: pass NULL */
      const uint8_t *m;
      size_t n = fz_take(&f, (size_t)fz_u8(&f) * 2, &m);
      tg_relation_mask(rt, batch, nq, nk, claim == 1 ? NULL : m, claim == 0 ? n / 2 : claim == 1 ? 0 : n, &r);
      break;
    }
    case 3: {
      int n = fz_range(&f, 0, 8) - (fz_u8(&f) % 8 == 0 ? 100 : 0);
      int32_t cq[10], ck[10];
      int32_t aq = 0, ak = 0;
      for (int i = 0; i < 10; i++) {
        int kind = fz_u8(&f) % 16;
        cq[i] = kind == 0 ? (int32_t)fz_u32(&f) : (aq += fz_range(&f, 0, 6));
        ck[i] = kind == 1 ? INT32_MAX : (ak += fz_range(&f, 0, 6));
      }
      cq[0] = fz_u8(&f) % 8 ? 0 : cq[0];
      ck[0] = 0;
      size_t bytes = n >= 0 && n < 10 ? (size_t)(n + 1) * 4 : 40;
      int same = fz_u8(&f) & 1;
      tg_relation_varlen(rt, n, cq, bytes, same ? NULL : ck, same ? 0 : bytes, fz_u8(&f) & 1, &r);
      break;
    }
    case 4: {
      int64_t nq = fz_size(&f, 10), nk = fz_size(&f, 10);
      int64_t rp[12];
      int32_t ci[64];
      int64_t at = 0;
      for (int i = 0; i < 12; i++) {
        int kind = fz_u8(&f) % 16;
        rp[i] = kind == 0 ? (int64_t)fz_u64(&f) : i == 0 ? 0 : (at += fz_range(&f, 0, 5));
      }
      for (int i = 0; i < 64; i++)
        ci[i] = fz_u8(&f) % 16 == 0 ? (int32_t)fz_u32(&f) : fz_range(&f, 0, 11);
      size_t rpb = nq >= 0 && nq < 12 ? (size_t)(nq + 1) * 8 : sizeof rp;
      size_t cib = (size_t)fz_range(&f, 0, 64) * 4;
      tg_relation_csr(rt, nq, nk, rp, rpb, ci, cib, &r);
      break;
    }
    case 5: {
      /* concat materialises its CSR: parts of at most 2^12 rows and keys (a 2^31-row part would ask
       * for 16 GiB, which the library may legitimately try; the fuzzer's malloc limit would flag it) */
      int n = fz_range(&f, 0, nmade);
      tg_relation *parts[MAXREL + 1];
      for (int i = 0; i < n; i++) {
        parts[i] = made[fz_u8(&f) % (nmade ? nmade : 1)];
        int64_t pq = 0, pk = 0;
        if (nmade) tg_relation_info(parts[i], NULL, &pq, &pk, NULL);
        if (pq > 4096 || pk > 4096) n = i;
      }
      if (n == 0 || nmade == 0) {
        tg_relation_concat(rt, 0, NULL, &r);
        tg_relation_concat(rt, 1, NULL, &r);
      } else {
        tg_relation_concat(rt, n, parts, &r);
      }
      break;
    }
    default: { /* radius, 6 and 7 */
      int dim = fz_range(&f, 0, 4);
      tg_dtype dt = fz_u8(&f) & 1 ? TG_F32 : TG_F64;
      int64_t nd = fz_range(&f, 0, 20), ns = fz_u8(&f) & 1 ? 0 : fz_range(&f, 0, 20);
      double pd[80], ps[80];
      float fd[80], fs[80];
      for (int i = 0; i < 80; i++) {
        pd[i] = fz_u8(&f) % 8 == 0 ? fz_real(&f) : (double)fz_range(&f, 0, 20) / 4;
        ps[i] = (double)fz_range(&f, 0, 20) / 4;
        fd[i] = (float)pd[i], fs[i] = (float)ps[i];
      }
      size_t es = dt == TG_F32 ? 4 : 8;
      const void *d = dt == TG_F32 ? (const void *)fd : pd, *s = dt == TG_F32 ? (const void *)fs : ps;
      size_t db = dim >= 1 && dim <= 3 ? (size_t)(nd * dim) * es : 0,
             sb = dim >= 1 && dim <= 3 ? (size_t)(ns * dim) * es : 0;
      tg_radius_options o;
      tg_radius_options_init(&o);
      o.max_neighbors = fz_u8(&f) % 4 ? 0 : fz_range(&f, -1, 4);
      o.flags = fz_u8(&f) % 3 == 0 ? TG_RADIUS_SELF_LOOPS : 0;
      int64_t perm[20];
      if (fz_u8(&f) & 1) o.perm_out = perm, o.perm_out_bytes = (size_t)nd * 8;
      double cutoff = fz_u8(&f) % 8 == 0 ? fz_real(&f) : (double)fz_range(&f, 1, 12) / 4;
      tg_relation_radius(rt, dim, dt, nd, d, db, ns, ns ? s : NULL, ns ? sb : 0, cutoff, &o, &r);
      if (r && o.perm_out) /* a permutation of 0..nd-1 */
        for (int64_t i = 0, seen = 0; i < nd; i++, seen = 0) {
          for (int64_t j = 0; j < nd; j++)
            seen += perm[j] == i;
          if (seen != 1) trap("perm");
        }
      break;
    }
    }
    if (!r) continue;
    check(r);
    use(rt, r, &f);
    made[nmade++] = r;
  }
  /* destroy in an order the bytes choose (lifetimes: any order) */
  while (nmade > 0) {
    int i = fz_u8(&f) % nmade;
    tg_relation_destroy(made[i]);
    made[i] = made[--nmade];
  }
  tg_runtime_destroy(rt);
  return 0;
}
