/* C view of the CUDA provider: handle types, error text, and (in cuda/<family>.h) the extern "C"
 * launchers. Launchers take device pointers, sizes and a stream, enqueue work, and return a
 * tg_status; on failure tgc_error() holds the message (thread-local). They never see the tape. */
#ifndef TIGA_CUDA_LAUNCH_H
#define TIGA_CUDA_LAUNCH_H
#include "tiga.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CUstream_st *tgc_stream;   /* == cudaStream_t */
typedef struct cublasContext *tgc_cublas; /* == cublasHandle_t */

/* Message of the last failed launcher on this thread. */
const char *tgc_error(void);

#ifdef __cplusplus
}
#endif
#endif
