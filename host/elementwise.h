/* Host reference kernels for elementwise ops (f32 and f64; dt selects). */
#ifndef TIGA_HOST_ELEMENTWISE_H
#define TIGA_HOST_ELEMENTWISE_H
#include "tiga.h"

typedef enum { HOST_ADD = 0, HOST_SUB = 1, HOST_MUL = 2 } host_binary_op;
typedef enum { HOST_SCALE = 0, HOST_RELU, HOST_LEAKY_RELU, HOST_GELU, HOST_TANH, HOST_ELU } host_unary_op;

/* ---- broadcasting (NumPy's rule)
 * Shapes are aligned from the right; in each dim the sizes are equal, or one is 1 or missing, and
 * the result takes the larger. A plan describes y[i] = a[ia(i)] (op) b[ib(i)] after dropping the
 * result's size-1 dims and merging adjacent dims in which each operand is either present in both
 * or broadcast in both (so [E, 64] * [E, 1] is the 2-D [E, 64] * [E, 1] and [2, 3, 4] + [4] the 2-D
 * [6, 4] + [1, 4]). The kind picks the kernel; the shapes and strides describe every kind. */
typedef enum {
  HOST_BC_SAME = 0, /* na == nb == n */
  HOST_BC_TRAIL,    /* one operand has n elements, the other repeats along the leading dims: read at
                     * i % n_small (a scalar, or [n] (+) [..., n]); the bias-style kernels */
  HOST_BC_ROWS,     /* one operand [rows, cols], the other [rows, 1] (the operand named by row_operand) */
  HOST_BC_GENERAL
} host_bcast_kind;

typedef struct host_bcast {
  host_bcast_kind kind;
  int ndim;                   /* merged dims, 0 <= ndim <= TG_MAX_DIMS; every shape[d] > 1 */
  int64_t shape[TG_MAX_DIMS]; /* merged result dims (row-major, contiguous) */
  int64_t sa[TG_MAX_DIMS];    /* element stride of a in each merged dim; 0 where a is broadcast */
  int64_t sb[TG_MAX_DIMS];    /* likewise for b */
  int64_t n, na, nb;          /* elements of y, a, b */
  int64_t rows, cols;         /* HOST_BC_ROWS only */
  int row_operand;            /* HOST_BC_ROWS only: 0 when a is [rows, 1], 1 when b is */
} host_bcast;

/* Broadcasts shapes a (nda dims) and b (ndb dims): fills *p and the result shape (*ndy dims into
 * shy, room for TG_MAX_DIMS) and returns -1; when they do not broadcast, returns the first result
 * dim (counted from the left of the result) whose sizes differ with neither being 1. */
int host_bcast_plan(host_bcast *p, int nda, const int64_t *sha, int ndb, const int64_t *shb, int *ndy, int64_t *shy);

/* y = a (op) b over a plan. */
void host_binary_forward_bc(tg_dtype dt, host_binary_op op, const host_bcast *p, const void *a, const void *b, void *y);
/* ga += reduce(gy * dy/da) over a's broadcast dims, likewise gb; ga or gb may be NULL (not wanted).
 * Each reduced element is summed in double in a fixed order and added once. */
void host_binary_backward_bc(tg_dtype dt, host_binary_op op, const host_bcast *p, const void *a, const void *b,
                             const void *gy, void *ga, void *gb);

/* The bias-style kernels (plans of kind SAME and TRAIL): y[i] = a[i % na] (op) b[i % nb] for
 * i < n = max(na, nb); the smaller count divides the larger. */
void host_binary_forward(tg_dtype dt, host_binary_op op, const void *a, int64_t na, const void *b, int64_t nb, void *y);
/* ga[i % na] += gy[i] * dy/da, gb[i % nb] += gy[i] * dy/db; ga or gb may be NULL (not wanted). */
void host_binary_backward(tg_dtype dt, host_binary_op op, const void *a, int64_t na, const void *b, int64_t nb,
                          const void *gy, void *ga, void *gb);

/* y = f(x; alpha): scale (alpha = s), relu, leaky_relu (alpha = slope), gelu (tanh form), tanh, elu
 * (alpha: x > 0 ? x : alpha (exp(x) - 1)). */
void host_unary_forward(tg_dtype dt, host_unary_op op, double alpha, const void *x, void *y, int64_t n);
/* gx += gy * f'(x) (tanh uses y = f(x)). */
void host_unary_backward(tg_dtype dt, host_unary_op op, double alpha, const void *x, const void *y, const void *gy,
                         void *gx, int64_t n);
#endif
