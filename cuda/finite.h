/* Non-finite checks on the device (anomaly mode, tg_tape_set_check_finite). */
#ifndef TIGA_CUDA_FINITE_H
#define TIGA_CUDA_FINITE_H
#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif
/* *flag = max(*flag, tag) when one of the n elements of x (f32, f64, f16 or bf16) is NaN or +-inf.
 * Stream-ordered; nothing waits. Other dtypes: TG_ERR_DTYPE. */
tg_status cuda_flag_nonfinite(tgc_stream s, tg_dtype dt, const void *x, int64_t n, int32_t tag, int32_t *flag);

/* One tensor of a multi-tensor check. */
typedef struct cuda_finite_entry {
  const void *x; /* device pointer to n elements of dtype */
  int64_t n;
  int32_t tag;  /* > 0 */
  int8_t dtype; /* tg_dtype: TG_F32, TG_F64, TG_F16 or TG_BF16 */
  int8_t flag;  /* 0 .. CUDA_FINITE_FLAGS - 1: which of the flags it raises */
} cuda_finite_entry;
#define CUDA_FINITE_FLAGS 4
/* Entries one launch carries (as kernel parameters: nothing is uploaded). */
#define CUDA_FINITE_LAUNCH_ENTRIES 160
/* For every entry e: flags[e.flag] = max(flags[e.flag], e.tag) when one of its elements is NaN or
 * +-inf; the same result as cuda_flag_nonfinite per entry, in one launch per
 * CUDA_FINITE_LAUNCH_ENTRIES entries. Stream-ordered; nothing waits. A bad dtype or flag index:
 * TG_ERR_DTYPE / TG_ERR_INVALID_ARGUMENT before anything is launched. */
tg_status cuda_flag_nonfinite_multi(tgc_stream s, const cuda_finite_entry *e, int count, int32_t *flags);

/* The check stream: a second stream of the runtime's device on which the checks run beside the
 * compute of the main stream, and the two events that order them. Created on the current device. */
typedef struct cuda_finite_side cuda_finite_side;
tg_status cuda_finite_side_create(cuda_finite_side **out);
/* Waits for the check stream's work, then frees it (NULL: nothing). */
void cuda_finite_side_destroy(cuda_finite_side *side);
/* cuda_flag_nonfinite_multi on the check stream, after everything queued on `main` so far (an event
 * recorded on main, waited for by the check stream), with few blocks a launch (2 per SM, or
 * TIGA_CHECK_FINITE_SIDE_BLOCKS when the stream was made) so the compute keeps most of each SM; then
 * marks the check stream's progress. Main does not wait. */
tg_status cuda_finite_side_launch(cuda_finite_side *side, tgc_stream main, const cuda_finite_entry *e, int count,
                                  int32_t *flags);
/* Main waits (on the device; the host does not) for every check launched through side so far. */
tg_status cuda_finite_side_join(cuda_finite_side *side, tgc_stream main);

/* In-kernel checks (finite.cuh): until the next arm or disarm on this thread, kernels that support
 * it and are launched on stream s raise flag with tag themselves, and their launchers list the
 * buffers they checked in full. Arming clears that list. */
void cuda_nf_arm(tgc_stream s, int32_t *flag, int32_t tag);
void cuda_nf_disarm(void);
/* Whether a kernel launched under the arm with this tag checked all n elements at p. */
int cuda_nf_covered(const void *p, int64_t n, int32_t tag);
#ifdef __cplusplus
}
#endif
#endif
