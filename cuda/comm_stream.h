/* The communication stream of train/comm.c (tg_comm): a second stream on the runtime's device on
 * which the gradient all-reduce runs beside the backward of the main stream, and the events that
 * order the two. NCCL itself is called from train/comm_nccl.c; this file holds only the CUDA
 * runtime calls it needs. */
#ifndef TIGA_CUDA_COMM_STREAM_H
#define TIGA_CUDA_COMM_STREAM_H
#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif
typedef struct cuda_comm_side cuda_comm_side;
/* Makes `main`'s device current on this thread and creates the side stream there (highest
 * priority, so a ready all-reduce is scheduled ahead of compute); *device receives the ordinal. */
tg_status cuda_comm_side_create(tgc_stream main, cuda_comm_side **out, int *device);
/* Frees the stream and events without waiting (NULL: nothing). Call after the work is done or the
 * communicator aborted. */
void cuda_comm_side_destroy(cuda_comm_side *side);
tgc_stream cuda_comm_side_stream(const cuda_comm_side *side);
/* Makes the side's device current on the calling thread (NCCL calls use the current device). */
tg_status cuda_comm_side_use(const cuda_comm_side *side);
/* The side stream waits (on the device) for everything queued on main so far. */
tg_status cuda_comm_side_follow(cuda_comm_side *side, tgc_stream main);
/* Records the side stream's progress so far (the "done" event of cuda_comm_side_query / _join). */
tg_status cuda_comm_side_mark(cuda_comm_side *side);
/* Main waits (on the device; the host does not) for the side's work up to the last mark. */
tg_status cuda_comm_side_join(cuda_comm_side *side, tgc_stream main);
/* Whether the side's work up to the last mark has finished: 1 yes, 0 not yet, -1 a device error
 * (message in tgc_error()). Never blocks. */
int cuda_comm_side_query(cuda_comm_side *side);
#ifdef __cplusplus
}
#endif
#endif
