/* Host reference kernels for the dot product over the last dim (f32 / f64; accumulation in
 * double). The leading dims broadcast by a plan of host/elementwise.h over a.shape[:-1] and
 * b.shape[:-1], counting rows of `cols` elements: y[i] = sum_c a[ia(i), c] b[ib(i), c]. */
#ifndef TIGA_HOST_DOT_H
#define TIGA_HOST_DOT_H
#include "elementwise.h"

void host_dot_forward(tg_dtype dt, const host_bcast *p, const void *a, const void *b, int64_t cols, void *y);
/* ga[r, c] += sum over the rows i with ia(i) = r of gy[i] b[ib(i), c], likewise gb; ga or gb may be
 * NULL (not wanted). Each element is summed in double in row order and added once: an operand
 * broadcast over rows (p->na < p->n) needs ws_a, p->na * cols doubles of scratch (likewise ws_b). */
void host_dot_backward(tg_dtype dt, const host_bcast *p, const void *a, const void *b, int64_t cols, const void *gy,
                       void *ga, void *gb, double *ws_a, double *ws_b);
#endif
