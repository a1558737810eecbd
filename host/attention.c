/* Host reference attention: per (b, h, i) a loop over the allowed keys, two passes in double
 * (max, then exp / sum / weighted values). Obviously correct first; the oracle for the CUDA
 * providers. Math in host/attention.h. */
#include "attention.h"
#include "../tape/alloc.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static inline double ld(tg_dtype dt, const void *p, int64_t i) {
  return dt == TG_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

/* Offsets of row (b, i, head) in the [B, N, H, W] layouts. */
#define QOFF(sh, b, i, h) ((((b) * (sh)->Nq + (i)) * (sh)->Hq + (h)) * (sh)->D)
#define KOFF(sh, b, j, g) ((((b) * (sh)->Nk + (j)) * (sh)->Hkv + (g)) * (sh)->D)
#define VOFF(sh, b, j, g) ((((b) * (sh)->Nk + (j)) * (sh)->Hkv + (g)) * (sh)->Dv)
#define OOFF(sh, b, i, h) ((((b) * (sh)->Nq + (i)) * (sh)->Hq + (h)) * (sh)->Dv)

/* Dropout weight m_ij / keep of (b, h, i, j); 1 without dropout. */
static double drop_w(const host_attn_shape *sh, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (!(sh->keep > 0 && sh->keep < 1)) return 1.0;
  return host_attn_kept(sh, b, h, i, j) ? 1.0 / sh->keep : 0.0;
}

static double dot(tg_dtype dt, const void *a, int64_t ia, const void *b, int64_t ib, int64_t n) {
  double s = 0;
  for (int64_t c = 0; c < n; c++)
    s += ld(dt, a, ia + c) * ld(dt, b, ib + c);
  return s;
}

/* max |x[i + c]| over c < n. */
static double max_abs(tg_dtype dt, const void *x, int64_t i, int64_t n) {
  double m = 0;
  for (int64_t c = 0; c < n; c++)
    m = fmax(m, fabs(ld(dt, x, i + c)));
  return m;
}

/* <a, b> (times s), never NaN for finite inputs: the plain double dot when it is finite (the usual
 * case, bit for bit the plain formula); otherwise (a product overflowed, or +inf met -inf) the dot
 * of both operands scaled by powers of two (exact; each term then lies in [-1, 1]) and scaled back
 * at the end, where an overflow gives +-inf. */
static double safe_dot(tg_dtype dt, const void *a, int64_t ia, const void *b, int64_t ib, int64_t n, double s) {
  double d = dot(dt, a, ia, b, ib, n);
  if (isfinite(d)) return s * d;
  int ea, eb;
  frexp(max_abs(dt, a, ia, n), &ea);
  frexp(max_abs(dt, b, ib, n), &eb);
  double acc = 0;
  for (int64_t c = 0; c < n; c++)
    acc += ldexp(ld(dt, a, ia + c), -ea) * ldexp(ld(dt, b, ib + c), -eb);
  return acc == 0 ? 0.0 : ldexp(acc * s, ea + eb);
}

/* Softmax weights of one row of scores s[0..cnt) that may hold +-inf (never NaN): *L = log-sum-exp.
 * Largest score +inf: the limit of the softmax, equal weights on the +inf scores (*L = +inf). Every
 * score -inf: treated as a row with no allowed key (false; *L = -inf). Otherwise the usual
 * max-subtracted form, where a -inf score gets weight 0. */
static bool row_softmax(const double *s, int64_t cnt, double *p, double *L) {
  double m = -INFINITY;
  for (int64_t c = 0; c < cnt; c++)
    m = fmax(m, s[c]);
  *L = m;
  if (m == -INFINITY) return false;
  if (m == INFINITY) {
    int64_t top = 0;
    for (int64_t c = 0; c < cnt; c++)
      top += s[c] == INFINITY;
    for (int64_t c = 0; c < cnt; c++)
      p[c] = s[c] == INFINITY ? 1.0 / (double)top : 0.0;
    return true;
  }
  double l = 0;
  for (int64_t c = 0; c < cnt; c++)
    l += exp(s[c] - m);
  *L = m + log(l);
  for (int64_t c = 0; c < cnt; c++)
    p[c] = exp(s[c] - *L);
  return true;
}

tg_status host_attention_forward(tg_dtype dt, const host_attn_shape *sh, const host_rel *rel, const void *q,
                                 const void *k, const void *v, void *out, double *lse) {
  int32_t *keys = tgi_malloc((size_t)sh->Nk * sizeof *keys);
  double *s = tgi_malloc((size_t)sh->Nk * sizeof *s), *acc = tgi_malloc((size_t)sh->Dv * sizeof *acc);
  double *pw = tgi_malloc((size_t)sh->Nk * sizeof *pw);
  if (!keys || !s || !acc || !pw) {
    free(keys), free(s), free(acc), free(pw);
    return TG_ERR_OUT_OF_MEMORY;
  }
  int64_t group = sh->Hq / sh->Hkv;
  for (int64_t b = 0; b < sh->B; b++)
    for (int64_t h = 0; h < sh->Hq; h++)
      for (int64_t i = 0; i < sh->Nq; i++) {
        int64_t g = h / group, cnt = host_rel_row(rel, b, i, keys), o = OOFF(sh, b, i, h);
        double L = -INFINITY;
        for (int64_t c = 0; c < sh->Dv; c++)
          acc[c] = 0;
        for (int64_t c = 0; c < cnt; c++)
          s[c] = safe_dot(dt, q, QOFF(sh, b, i, h), k, KOFF(sh, b, keys[c], g), sh->D, sh->scale);
        if (cnt > 0 && row_softmax(s, cnt, pw, &L)) {
          for (int64_t c = 0; c < cnt; c++) {
            double p = pw[c] * drop_w(sh, b, h, i, keys[c]);
            if (p == 0) continue;
            int64_t vo = VOFF(sh, b, keys[c], g);
            for (int64_t e = 0; e < sh->Dv; e++)
              acc[e] += p * ld(dt, v, vo + e);
          }
        }
        for (int64_t e = 0; e < sh->Dv; e++) {
          if (dt == TG_F32)
            ((float *)out)[o + e] = (float)acc[e];
          else
            ((double *)out)[o + e] = acc[e];
        }
        lse[(b * sh->Hq + h) * sh->Nq + i] = L;
      }
  free(keys), free(s), free(acc), free(pw);
  return TG_OK;
}

static void add_into(tg_dtype dt, void *g, const double *acc, int64_t n) {
  if (!g) return;
  for (int64_t i = 0; i < n; i++) {
    if (dt == TG_F32)
      ((float *)g)[i] += (float)acc[i];
    else
      ((double *)g)[i] += acc[i];
  }
}

tg_status host_attention_backward(tg_dtype dt, const host_attn_shape *sh, const host_rel *rel, const void *q,
                                  const void *k, const void *v, const void *dout, const double *lse, void *dq, void *dk,
                                  void *dv) {
  int64_t nq_el = sh->B * sh->Nq * sh->Hq * sh->D, nk_el = sh->B * sh->Nk * sh->Hkv * sh->D,
          nv_el = sh->B * sh->Nk * sh->Hkv * sh->Dv;
  int32_t *keys = tgi_malloc((size_t)sh->Nk * sizeof *keys);
  double *p = tgi_malloc((size_t)sh->Nk * sizeof *p), *dp = tgi_malloc((size_t)sh->Nk * sizeof *dp),
         *w = tgi_malloc((size_t)sh->Nk * sizeof *w);
  double *gq = tgi_calloc((size_t)nq_el, sizeof *gq), *gk = tgi_calloc((size_t)nk_el, sizeof *gk),
         *gv = tgi_calloc((size_t)nv_el, sizeof *gv);
  tg_status st = TG_ERR_OUT_OF_MEMORY;
  if (!keys || !p || !dp || !w || !gq || !gk || !gv) goto done;
  int64_t group = sh->Hq / sh->Hkv;
  for (int64_t b = 0; b < sh->B; b++)
    for (int64_t h = 0; h < sh->Hq; h++)
      for (int64_t i = 0; i < sh->Nq; i++) {
        double L = lse[(b * sh->Hq + h) * sh->Nq + i];
        int64_t g = h / group, cnt = host_rel_row(rel, b, i, keys);
        if (cnt == 0 || L == -INFINITY) continue; /* no allowed key: zero gradient */
        int64_t qo = QOFF(sh, b, i, h), oo = OOFF(sh, b, i, h);
        /* a row saturated by +inf scores (L = +inf) has the forward's limit weights and zero
         * gradient with respect to its scores */
        bool saturated = L == INFINITY;
        for (int64_t c = 0; c < cnt; c++)
          dp[c] = safe_dot(dt, q, qo, k, KOFF(sh, b, keys[c], g), sh->D, sh->scale); /* the scores */
        if (saturated) {
          double L2;
          row_softmax(dp, cnt, p, &L2);
        } else {
          for (int64_t c = 0; c < cnt; c++)
            p[c] = exp(dp[c] - L);
        }
        double Di = 0;
        for (int64_t c = 0; c < cnt; c++) {
          w[c] = drop_w(sh, b, h, i, keys[c]);
          dp[c] = p[c] * w[c] == 0 ? 0.0 : w[c] * safe_dot(dt, dout, oo, v, VOFF(sh, b, keys[c], g), sh->Dv, 1.0);
          Di += p[c] * dp[c];
        }
        for (int64_t c = 0; c < cnt; c++) {
          double ds = saturated || p[c] == 0 ? 0.0 : sh->scale * p[c] * (dp[c] - Di);
          int64_t ko = KOFF(sh, b, keys[c], g), vo = VOFF(sh, b, keys[c], g);
          for (int64_t e = 0; ds != 0 && e < sh->D; e++) {
            gq[qo + e] += ds * ld(dt, k, ko + e);
            gk[ko + e] += ds * ld(dt, q, qo + e);
          }
          for (int64_t e = 0; p[c] * w[c] != 0 && e < sh->Dv; e++)
            gv[vo + e] += p[c] * w[c] * ld(dt, dout, oo + e);
        }
      }
  add_into(dt, dq, gq, nq_el);
  add_into(dt, dk, gk, nk_el);
  add_into(dt, dv, gv, nv_el);
  st = TG_OK;
done:
  free(keys), free(p), free(dp), free(w), free(gq), free(gk), free(gv);
  return st;
}
