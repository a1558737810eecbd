/* Host kernels for the shape family (reshape, transpose, concat, slice, split). Copies move
 * elements by size, so they serve any dtype; gradient accumulations (+=) are typed, f32 or f64. */
#ifndef TIGA_HOST_SHAPE_H
#define TIGA_HOST_SHAPE_H
#include <stddef.h>
#include <stdint.h>

#include "tiga.h"

/* Swapping dims d0 < d1 of a row-major value is, with A the product of the dims before d0, B of
 * those between and C of those after d1, the map of x viewed as [A, n0, B, n1, C] to
 * y [A, n1, B, n0, C]:  y[a, j, b, i, c] = x[a, i, b, j, c]. */
typedef struct host_swap {
  int64_t a, n0, b, n1, c;
} host_swap;

/* The view for swapping dims d0 and d1 (in [0, ndim), any order; d0 == d1 is a plain copy). */
host_swap host_swap_of(const int64_t *shape, int ndim, int d0, int d1);
/* The view of the swapped result (n0 and n1 exchanged): swapping it again gives back x, which is
 * how the gradient flows back. */
static inline host_swap host_swap_back(host_swap s) {
  host_swap r = {s.a, s.n1, s.b, s.n0, s.c};
  return r;
}

/* y = swap(x), elements of `elem` bytes. */
void host_transpose(size_t elem, host_swap s, const void *x, void *y);
/* y += swap(x), f32 or f64 (backward: gx += swap(gy) with the host_swap_back view). */
void host_transpose_add(tg_dtype dt, host_swap s, const void *x, void *y);

/* Column blocks of row-major matrices, for r < rows and c < w:
 *   dst[r * dld + doff + c]  = src[r * sld + soff + c]    (host_cols_copy, `elem` bytes)
 *   dst[r * dld + doff + c] += src[r * sld + soff + c]    (host_cols_add, f32 or f64)
 * Concat writes each input into its block of columns, slice reads one block; a flat add (reshape
 * backward) is rows = 1. */
void host_cols_copy(size_t elem, int64_t rows, int64_t w, const void *src, int64_t sld, int64_t soff, void *dst,
                    int64_t dld, int64_t doff);
void host_cols_add(tg_dtype dt, int64_t rows, int64_t w, const void *src, int64_t sld, int64_t soff, void *dst,
                   int64_t dld, int64_t doff);
#endif
