// The communication stream of tg_comm (cuda/comm_stream.h).
#include "comm_stream.h"

#include "common.cuh"

#include <stdlib.h>

struct cuda_comm_side {
  int device;
  cudaStream_t stream;
  cudaEvent_t ready; // recorded on main, waited for by the side stream
  cudaEvent_t done;  // recorded on the side stream by cuda_comm_side_mark
};

extern "C" tg_status cuda_comm_side_create(tgc_stream main, cuda_comm_side **out, int *device) {
  *out = NULL;
  int dev = -1;
  TGC_CUDA(cudaStreamGetDevice(main, &dev));
  TGC_CUDA(cudaSetDevice(dev));
  cuda_comm_side *s = (cuda_comm_side *)calloc(1, sizeof *s);
  if (!s) {
    tgc_set_error("communication stream: out of host memory");
    return TG_ERR_OUT_OF_MEMORY;
  }
  s->device = dev;
  int least = 0, greatest = 0;
  cudaError_t e = cudaDeviceGetStreamPriorityRange(&least, &greatest);
  if (e == cudaSuccess) e = cudaStreamCreateWithPriority(&s->stream, cudaStreamNonBlocking, greatest);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&s->ready, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventRecord(s->done, s->stream); // "nothing pending" until the first mark
  if (e != cudaSuccess) {
    cudaGetLastError();
    tgc_set_error("communication stream: %s", cudaGetErrorString(e));
    cuda_comm_side_destroy(s);
    return tgc_status_of(e);
  }
  *device = dev;
  *out = s;
  return TG_OK;
}

extern "C" void cuda_comm_side_destroy(cuda_comm_side *s) {
  if (!s) return;
  cudaSetDevice(s->device);
  if (s->done) cudaEventDestroy(s->done);
  if (s->ready) cudaEventDestroy(s->ready);
  if (s->stream) cudaStreamDestroy(s->stream); // returns at once; the device frees it when idle
  cudaGetLastError();
  free(s);
}

extern "C" tgc_stream cuda_comm_side_stream(const cuda_comm_side *s) { return s ? s->stream : NULL; }

extern "C" tg_status cuda_comm_side_use(const cuda_comm_side *s) {
  TGC_CUDA(cudaSetDevice(s->device));
  return TG_OK;
}

extern "C" tg_status cuda_comm_side_follow(cuda_comm_side *s, tgc_stream main) {
  TGC_CUDA(cudaEventRecord(s->ready, main));
  TGC_CUDA(cudaStreamWaitEvent(s->stream, s->ready, 0));
  return TG_OK;
}

extern "C" tg_status cuda_comm_side_mark(cuda_comm_side *s) {
  TGC_CUDA(cudaEventRecord(s->done, s->stream));
  return TG_OK;
}

extern "C" tg_status cuda_comm_side_join(cuda_comm_side *s, tgc_stream main) {
  TGC_CUDA(cudaStreamWaitEvent(main, s->done, 0));
  return TG_OK;
}

extern "C" int cuda_comm_side_query(cuda_comm_side *s) {
  cudaError_t e = cudaEventQuery(s->done);
  if (e == cudaSuccess) return 1;
  if (e == cudaErrorNotReady) {
    cudaGetLastError(); // not an error: clear it so later checks do not see it
    return 0;
  }
  tgc_set_error("communication stream: %s", cudaGetErrorString(e));
  return -1;
}
