/* CUDA launchers for the dot product over the last dim (f32, f16, bf16 storage; f32 accumulation).
 * Semantics match host/dot.h: the leading dims broadcast by a plan (host/elementwise.h) counting
 * rows of `cols` elements, y[i] = sum_c a[ia(i), c] b[ib(i), c]. Deterministic: every sum runs in
 * a fixed order (no float atomics), the same bits every run. */
#ifndef TIGA_CUDA_DOT_H
#define TIGA_CUDA_DOT_H
#include "../host/elementwise.h"
#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif
/* One kernel. */
tg_status cuda_dot_forward(tgc_stream s, tg_dtype dt, const host_bcast *p, const void *a, const void *b, int64_t cols,
                           void *y);
/* Device scratch bytes cuda_dot_backward needs (0 when none). */
size_t cuda_dot_backward_workspace(const host_bcast *p, int64_t cols, int want_a, int want_b);
/* ga[r, c] (+)= sum over the rows i with ia(i) = r of gy[i] b[ib(i), c], likewise gb; ga or gb may
 * be NULL (not wanted). add_a = 0 overwrites ga without reading it (a fresh gradient buffer), 1
 * accumulates; likewise add_b (ga == gb, the same value twice, needs add_a = add_b = 1). A plan in
 * which one operand repeats along the leading rows (HOST_BC_TRAIL: b [H, C] against a [N, H, C])
 * runs two kernels at most: the full operand's gradient fused with per-chunk partial sums of the
 * other's, then the partials summed in chunk order. ws: ws_bytes >= cuda_dot_backward_workspace(p,
 * cols, ga != NULL, gb != NULL) bytes of device memory, 4-byte aligned (NULL when that is 0), that
 * no other work touches before the stream has run this call's kernels. */
tg_status cuda_dot_backward(tgc_stream s, tg_dtype dt, const host_bcast *p, const void *a, const void *b, int64_t cols,
                            const void *gy, void *ga, int add_a, void *gb, int add_b, void *ws, size_t ws_bytes);
#ifdef __cplusplus
}
#endif
#endif
