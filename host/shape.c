/* Host kernels for the shape family: plain loops, obviously correct. */
#include "shape.h"

#include <string.h>

host_swap host_swap_of(const int64_t *shape, int ndim, int d0, int d1) {
  int64_t numel = 1;
  for (int i = 0; i < ndim; i++)
    numel *= shape[i];
  host_swap s = {1, 1, 1, 1, numel};
  if (d0 == d1) return s; /* identity: one contiguous block */
  int lo = d0 < d1 ? d0 : d1, hi = d0 < d1 ? d1 : d0;
  s.c = 1;
  for (int i = 0; i < lo; i++)
    s.a *= shape[i];
  s.n0 = shape[lo];
  for (int i = lo + 1; i < hi; i++)
    s.b *= shape[i];
  s.n1 = shape[hi];
  for (int i = hi + 1; i < ndim; i++)
    s.c *= shape[i];
  return s;
}

/* Source element offset of y[a, j, b, i, 0] in x [A, n0, B, n1, C]. */
static inline int64_t swap_src(host_swap s, int64_t a, int64_t j, int64_t b, int64_t i) {
  return (((a * s.n0 + i) * s.b + b) * s.n1 + j) * s.c;
}

void host_transpose(size_t elem, host_swap s, const void *x, void *y) {
  const char *px = x;
  char *py = y;
  size_t blk = (size_t)s.c * elem;
  for (int64_t a = 0; a < s.a; a++)
    for (int64_t j = 0; j < s.n1; j++)
      for (int64_t b = 0; b < s.b; b++)
        for (int64_t i = 0; i < s.n0; i++) {
          memcpy(py, px + (size_t)swap_src(s, a, j, b, i) * elem, blk);
          py += blk;
        }
}

#define DEFINE_ADDS(T, S)                                                                                              \
  static void transpose_add_##S(host_swap s, const T *x, T *y) {                                                       \
    for (int64_t a = 0; a < s.a; a++)                                                                                  \
      for (int64_t j = 0; j < s.n1; j++)                                                                               \
        for (int64_t b = 0; b < s.b; b++)                                                                              \
          for (int64_t i = 0; i < s.n0; i++) {                                                                         \
            const T *src = x + swap_src(s, a, j, b, i);                                                                \
            for (int64_t c = 0; c < s.c; c++)                                                                          \
              *y++ += src[c];                                                                                          \
          }                                                                                                            \
  }                                                                                                                    \
  static void cols_add_##S(int64_t rows, int64_t w, const T *src, int64_t sld, int64_t soff, T *dst, int64_t dld,      \
                           int64_t doff) {                                                                             \
    for (int64_t r = 0; r < rows; r++) {                                                                               \
      const T *s = src + r * sld + soff;                                                                               \
      T *d = dst + r * dld + doff;                                                                                     \
      for (int64_t c = 0; c < w; c++)                                                                                  \
        d[c] += s[c];                                                                                                  \
    }                                                                                                                  \
  }

DEFINE_ADDS(float, f32)
DEFINE_ADDS(double, f64)

void host_transpose_add(tg_dtype dt, host_swap s, const void *x, void *y) {
  if (dt == TG_F32)
    transpose_add_f32(s, x, y);
  else
    transpose_add_f64(s, x, y);
}

void host_cols_copy(size_t elem, int64_t rows, int64_t w, const void *src, int64_t sld, int64_t soff, void *dst,
                    int64_t dld, int64_t doff) {
  const char *ps = src;
  char *pd = dst;
  for (int64_t r = 0; r < rows; r++)
    memcpy(pd + (size_t)(r * dld + doff) * elem, ps + (size_t)(r * sld + soff) * elem, (size_t)w * elem);
}

void host_cols_add(tg_dtype dt, int64_t rows, int64_t w, const void *src, int64_t sld, int64_t soff, void *dst,
                   int64_t dld, int64_t doff) {
  if (dt == TG_F32)
    cols_add_f32(rows, w, src, sld, soff, dst, dld, doff);
  else
    cols_add_f64(rows, w, src, sld, soff, dst, dld, doff);
}
