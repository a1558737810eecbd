/* CUDA launchers for elementwise ops and full reductions (f32, f16, bf16). Semantics match
 * host/elementwise.h and host/reduce.h; the op enums are shared. */
#ifndef TIGA_CUDA_ELEMENTWISE_H
#define TIGA_CUDA_ELEMENTWISE_H
#include "../host/elementwise.h"
#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif
/* Binary ops (cuda/binary.cu). y = a (op) b over a broadcast plan (host/elementwise.h), any kind. */
tg_status cuda_binary_forward_bc(tgc_stream s, tg_dtype dt, host_binary_op op, const host_bcast *p, const void *a,
                                 const void *b, void *y);
/* Device scratch bytes cuda_binary_backward_bc needs for plan p with the gradients of a and / or b
 * wanted (0 when it needs none). */
size_t cuda_binary_backward_bc_workspace(const host_bcast *p, int want_a, int want_b);
/* ga += reduce(gy * dy/da) over a's broadcast dims, likewise gb (either may be NULL). Deterministic:
 * every reduced element is summed in f32 in a fixed order (no atomics), the same bits every run.
 * ws: ws_bytes >= cuda_binary_backward_bc_workspace(p, ga != NULL, gb != NULL) bytes of device
 * memory, 4-byte aligned (NULL when that is 0), that no other work touches before the stream has
 * run this call's kernels. */
tg_status cuda_binary_backward_bc(tgc_stream s, tg_dtype dt, host_binary_op op, const host_bcast *p, const void *a,
                                  const void *b, const void *gy, void *ga, void *gb, void *ws, size_t ws_bytes);
tg_status cuda_unary_forward(tgc_stream s, tg_dtype dt, host_unary_op op, double alpha, const void *x, void *y,
                             int64_t n);
tg_status cuda_unary_backward(tgc_stream s, tg_dtype dt, host_unary_op op, double alpha, const void *x, const void *y,
                              const void *gy, void *gx, int64_t n);
/* *y = alpha * sum(x) (y is one element of dt); gx[i] += alpha * gy. */
tg_status cuda_sum_forward(tgc_stream s, tg_dtype dt, const void *x, int64_t n, double alpha, void *y);
tg_status cuda_sum_backward(tgc_stream s, tg_dtype dt, const void *gy, int64_t n, double alpha, void *gx);
/* gx (+)= alpha * gy with gy a device scalar or, when gy_dev is NULL, the host value gy_host
 * (no copy, no sync); add = 0 overwrites gx without reading it. */
tg_status cuda_sum_backward_ex(tgc_stream s, tg_dtype dt, const void *gy_dev, double gy_host, int64_t n, double alpha,
                               int add, void *gx);
#ifdef __cplusplus
}
#endif
#endif
