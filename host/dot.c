#include "dot.h"

#include <stdbool.h>
#include <string.h>

/* Row offsets (in rows) of a and b for result row i of a plan. */
static void rows_of(const host_bcast *p, int64_t i, int64_t *ia, int64_t *ib) {
  int64_t oa = 0, ob = 0;
  for (int d = p->ndim - 1; d >= 0; d--) {
    int64_t q = i / p->shape[d], r = i - q * p->shape[d];
    oa += r * p->sa[d];
    ob += r * p->sb[d];
    i = q;
  }
  *ia = oa;
  *ib = ob;
}

static double at(tg_dtype dt, const void *x, int64_t i) {
  return dt == TG_F32 ? (double)((const float *)x)[i] : ((const double *)x)[i];
}

static void add_at(tg_dtype dt, void *x, int64_t i, double v) {
  if (dt == TG_F32)
    ((float *)x)[i] += (float)v;
  else
    ((double *)x)[i] += v;
}

void host_dot_forward(tg_dtype dt, const host_bcast *p, const void *a, const void *b, int64_t cols, void *y) {
  for (int64_t i = 0; i < p->n; i++) {
    int64_t ia, ib;
    rows_of(p, i, &ia, &ib);
    double s = 0;
    for (int64_t c = 0; c < cols; c++)
      s += at(dt, a, ia * cols + c) * at(dt, b, ib * cols + c);
    if (dt == TG_F32)
      ((float *)y)[i] = (float)s;
    else
      ((double *)y)[i] = s;
  }
}

/* gx for operand x (which 0: a, 1: b) with partner o: direct when x is not broadcast over rows,
 * else summed over the result's rows into ws (row order) and added once. */
static void grad_one(tg_dtype dt, const host_bcast *p, int which, const void *o, int64_t cols, const void *gy, void *gx,
                     double *ws) {
  const int64_t nx = which ? p->nb : p->na;
  const bool full = nx == p->n;
  if (!full) memset(ws, 0, sizeof(double) * (size_t)(nx * cols));
  for (int64_t i = 0; i < p->n; i++) {
    int64_t ia, ib;
    rows_of(p, i, &ia, &ib);
    const int64_t rx = which ? ib : ia, ro = which ? ia : ib;
    const double g = at(dt, gy, i);
    for (int64_t c = 0; c < cols; c++) {
      const double v = g * at(dt, o, ro * cols + c);
      if (full)
        add_at(dt, gx, rx * cols + c, v);
      else
        ws[rx * cols + c] += v;
    }
  }
  if (!full)
    for (int64_t j = 0; j < nx * cols; j++)
      add_at(dt, gx, j, ws[j]);
}

void host_dot_backward(tg_dtype dt, const host_bcast *p, const void *a, const void *b, int64_t cols, const void *gy,
                       void *ga, void *gb, double *ws_a, double *ws_b) {
  if (ga) grad_one(dt, p, 0, b, cols, gy, ga, ws_a);
  if (gb) grad_one(dt, p, 1, a, cols, gy, gb, ws_b);
}
