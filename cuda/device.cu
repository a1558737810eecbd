// The device layer: CUDA context, one stream, cuBLAS / cuBLASLt / cuRAND handles, and the
// device allocator (stream-ordered cudaMallocAsync on the device's default memory pool, which
// keeps freed blocks for reuse; we count current and peak bytes ourselves).
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cublasLt.h>

#include "common.cuh"

extern "C" {
#include "../tape/internal.h"
#include "finite.h"
}

static thread_local char g_err[TGI_MSG_CAP];

void tgc_set_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_err, sizeof g_err, fmt, ap);
  va_end(ap);
}

extern "C" const char *tgc_error(void) { return g_err; }

tg_status tgc_status_of(cudaError_t e) {
  if (e == cudaSuccess) return TG_OK;
  if (e == cudaErrorMemoryAllocation) return TG_ERR_OUT_OF_MEMORY;
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInvalidDevice)
    return TG_ERR_NO_DEVICE;
  return TG_ERR_DEVICE;
}

tg_status tgc_status_of_cublas(cublasStatus_t e) {
  if (e == CUBLAS_STATUS_SUCCESS) return TG_OK;
  if (e == CUBLAS_STATUS_ALLOC_FAILED) return TG_ERR_OUT_OF_MEMORY;
  if (e == CUBLAS_STATUS_NOT_SUPPORTED) return TG_ERR_UNSUPPORTED;
  return TG_ERR_DEVICE;
}

const char *tgc_cublas_string(cublasStatus_t e) {
  switch (e) {
  case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
  case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

struct tgi_device {
  int index;
  cudaStream_t stream;
  cublasHandle_t cublas;
  cublasLtHandle_t lt;
  void *lt_workspace;
  size_t lt_workspace_bytes;
  cudaMemPool_t pool;
  // live allocations: open addressing ptr -> size
  void **keys;
  size_t *sizes;
  size_t cap, count;
  size_t current, peak;
  int64_t fail_after;   // -1: off
  cudaEvent_t h2d_done; // recorded after each asynchronous upload
  bool h2d_pending;
};

static size_t slot_of(const tgi_device *d, const void *p) {
  size_t h = ((uintptr_t)p >> 8) * 0x9E3779B97F4A7C15ull;
  return h & (d->cap - 1);
}

static bool table_grow(tgi_device *d) {
  size_t nc = d->cap ? d->cap * 2 : 1024;
  void **nk = (void **)calloc(nc, sizeof *nk);
  size_t *ns = (size_t *)calloc(nc, sizeof *ns);
  if (!nk || !ns) {
    free(nk);
    free(ns);
    return false;
  }
  void **ok = d->keys;
  size_t *os = d->sizes, oc = d->cap;
  d->keys = nk;
  d->sizes = ns;
  d->cap = nc;
  for (size_t i = 0; i < oc; i++)
    if (ok[i]) {
      size_t s = slot_of(d, ok[i]);
      while (d->keys[s])
        s = (s + 1) & (d->cap - 1);
      d->keys[s] = ok[i];
      d->sizes[s] = os[i];
    }
  free(ok);
  free(os);
  return true;
}

static bool table_put(tgi_device *d, void *p, size_t bytes) {
  if ((d->count + 1) * 2 > d->cap && !table_grow(d)) return false;
  size_t s = slot_of(d, p);
  while (d->keys[s])
    s = (s + 1) & (d->cap - 1);
  d->keys[s] = p;
  d->sizes[s] = bytes;
  d->count++;
  return true;
}

static size_t table_take(tgi_device *d, void *p) {
  if (!d->cap) return 0;
  size_t s = slot_of(d, p);
  while (d->keys[s] && d->keys[s] != p)
    s = (s + 1) & (d->cap - 1);
  if (!d->keys[s]) return 0;
  size_t bytes = d->sizes[s];
  d->keys[s] = NULL;
  d->count--;
  // re-insert the rest of the cluster (linear probing deletion)
  size_t j = (s + 1) & (d->cap - 1);
  while (d->keys[j]) {
    void *k = d->keys[j];
    size_t b = d->sizes[j];
    d->keys[j] = NULL;
    d->count--;
    table_put(d, k, b);
    j = (j + 1) & (d->cap - 1);
  }
  return bytes;
}

#define DEV_TRY(call, what)                                                                                            \
  do {                                                                                                                 \
    cudaError_t e_ = (call);                                                                                           \
    if (e_ != cudaSuccess) {                                                                                           \
      snprintf(msg, TGI_MSG_CAP, "%s: %s", what, cudaGetErrorString(e_));                                              \
      return tgc_status_of(e_);                                                                                        \
    }                                                                                                                  \
  } while (0)

extern "C" int tgi_device_compiled(void) { return 1; }

extern "C" tg_status tgi_device_open(int index, tgi_device **out, char *msg) {
  *out = NULL;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    snprintf(msg, TGI_MSG_CAP, "no CUDA device available (%s)",
             e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount returned 0");
    cudaGetLastError();
    return TG_ERR_NO_DEVICE;
  }
  if (index >= n) {
    snprintf(msg, TGI_MSG_CAP, "device index %d out of range; %d device(s) present", index, n);
    return TG_ERR_NO_DEVICE;
  }
  DEV_TRY(cudaSetDevice(index), "cudaSetDevice");
  tgi_device *d = (tgi_device *)calloc(1, sizeof *d);
  if (!d) {
    snprintf(msg, TGI_MSG_CAP, "out of host memory");
    return TG_ERR_OUT_OF_MEMORY;
  }
  d->index = index;
  d->fail_after = -1;
  tg_status st = TG_OK;
  cudaError_t ce = cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking);
  if (ce != cudaSuccess) {
    snprintf(msg, TGI_MSG_CAP, "cudaStreamCreate: %s", cudaGetErrorString(ce));
    free(d);
    return tgc_status_of(ce);
  }
  cublasStatus_t be = cublasCreate(&d->cublas);
  if (be == CUBLAS_STATUS_SUCCESS) be = cublasSetStream(d->cublas, d->stream);
  if (be == CUBLAS_STATUS_SUCCESS) be = cublasLtCreate(&d->lt);
  if (be != CUBLAS_STATUS_SUCCESS) {
    snprintf(msg, TGI_MSG_CAP, "cuBLAS initialisation: %s", tgc_cublas_string(be));
    st = tgc_status_of_cublas(be);
  }
  if (st == TG_OK) {
    ce = cudaDeviceGetDefaultMemPool(&d->pool, index);
    if (ce == cudaSuccess) {
      uint64_t keep = UINT64_MAX; // keep freed blocks in the pool: reuse between steps
      ce = cudaMemPoolSetAttribute(d->pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
    d->lt_workspace_bytes = 32u << 20;
    if (ce == cudaSuccess) ce = cudaMalloc(&d->lt_workspace, d->lt_workspace_bytes);
    if (ce != cudaSuccess) {
      snprintf(msg, TGI_MSG_CAP, "device memory setup: %s", cudaGetErrorString(ce));
      st = tgc_status_of(ce);
    }
  }
  if (st == TG_OK) {
    ce = cudaEventCreateWithFlags(&d->h2d_done, cudaEventDisableTiming);
    if (ce != cudaSuccess) {
      snprintf(msg, TGI_MSG_CAP, "cudaEventCreate: %s", cudaGetErrorString(ce));
      st = tgc_status_of(ce);
    }
  }
  if (st == TG_OK && cublasSetWorkspace(d->cublas, d->lt_workspace, d->lt_workspace_bytes) != CUBLAS_STATUS_SUCCESS) {
    snprintf(msg, TGI_MSG_CAP, "cublasSetWorkspace failed");
    st = TG_ERR_DEVICE;
  }
  if (st != TG_OK) {
    tgi_device_close(d);
    return st;
  }
  *out = d;
  return TG_OK;
}

extern "C" void tgi_device_close(tgi_device *d) {
  if (!d) return;
  cudaSetDevice(d->index);
  if (d->stream) cudaStreamSynchronize(d->stream);
  for (size_t i = 0; i < d->cap; i++)
    if (d->keys[i]) cudaFreeAsync(d->keys[i], d->stream);
  if (d->stream) cudaStreamSynchronize(d->stream);
  if (d->h2d_done) cudaEventDestroy(d->h2d_done);
  if (d->lt) cublasLtDestroy(d->lt);
  if (d->cublas) cublasDestroy(d->cublas);
  if (d->lt_workspace) cudaFree(d->lt_workspace);
  if (d->stream) cudaStreamDestroy(d->stream);
  if (d->pool) cudaMemPoolTrimTo(d->pool, 0);
  free(d->keys);
  free(d->sizes);
  free(d);
}

// The countdown of tg_runtime_inject_alloc_failure: true when this allocation must fail (once).
static bool injected(tgi_device *d) {
  if (d->fail_after < 0) return false;
  if (d->fail_after == 0) {
    d->fail_after = -1;
    return true;
  }
  d->fail_after--;
  return false;
}

extern "C" tg_status tgi_device_alloc(tgi_device *d, size_t bytes, void **out, char *msg) {
  *out = NULL;
  if (injected(d)) {
    snprintf(msg, TGI_MSG_CAP, "out of device memory allocating %zu bytes (injected failure)", bytes);
    return TG_ERR_OUT_OF_MEMORY;
  }
  void *p = NULL;
  cudaError_t e = cudaMallocAsync(&p, bytes ? bytes : 1, d->stream);
  if (e != cudaSuccess) {
    cudaGetLastError();
    snprintf(msg, TGI_MSG_CAP, "out of device memory allocating %zu bytes (%s; %zu bytes held)", bytes,
             cudaGetErrorString(e), d->current);
    return tgc_status_of(e) == TG_ERR_DEVICE ? TG_ERR_DEVICE : TG_ERR_OUT_OF_MEMORY;
  }
  if (!table_put(d, p, bytes)) {
    cudaFreeAsync(p, d->stream);
    snprintf(msg, TGI_MSG_CAP, "out of host memory tracking a device allocation");
    return TG_ERR_OUT_OF_MEMORY;
  }
  d->current += bytes;
  if (d->current > d->peak) d->peak = d->current;
  *out = p;
  return TG_OK;
}

extern "C" void tgi_device_free(tgi_device *d, void *p) {
  if (!d || !p) return;
  d->current -= table_take(d, p);
  cudaFreeAsync(p, d->stream);
}

extern "C" tg_status tgi_device_h2d(tgi_device *d, void *dst, const void *src, size_t bytes, char *msg) {
  DEV_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, d->stream), "copy host -> device");
  // the host buffer may be reused by the caller right after: wait for the copy
  DEV_TRY(cudaStreamSynchronize(d->stream), "copy host -> device");
  return TG_OK;
}

extern "C" tg_status tgi_device_host_alloc(tgi_device *d, size_t bytes, void **out, char *msg) {
  *out = NULL;
  if (injected(d)) {
    snprintf(msg, TGI_MSG_CAP, "pinned host allocation of %zu bytes failed (injected failure)", bytes);
    return TG_ERR_OUT_OF_MEMORY;
  }
  cudaError_t e = cudaHostAlloc(out, bytes ? bytes : 1, cudaHostAllocDefault);
  if (e != cudaSuccess) {
    cudaGetLastError();
    *out = NULL;
    snprintf(msg, TGI_MSG_CAP, "pinned host allocation of %zu bytes failed: %s", bytes, cudaGetErrorString(e));
    return TG_ERR_OUT_OF_MEMORY;
  }
  return TG_OK;
}

extern "C" void tgi_device_host_free(tgi_device *d, void *p) {
  (void)d;
  if (p) cudaFreeHost(p);
}

extern "C" tg_status tgi_device_h2d_async(tgi_device *d, void *dst, const void *src, size_t bytes, char *msg) {
  DEV_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, d->stream), "copy host -> device");
  DEV_TRY(cudaEventRecord(d->h2d_done, d->stream), "cudaEventRecord");
  d->h2d_pending = true;
  return TG_OK;
}

extern "C" tg_status tgi_device_h2d_wait(tgi_device *d, char *msg) {
  if (!d || !d->h2d_pending) return TG_OK;
  DEV_TRY(cudaEventSynchronize(d->h2d_done), "waiting for uploads (a kernel before them failed)");
  d->h2d_pending = false;
  return TG_OK;
}

extern "C" tg_status tgi_device_d2h(tgi_device *d, void *dst, const void *src, size_t bytes, char *msg) {
  DEV_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, d->stream), "copy device -> host");
  DEV_TRY(cudaStreamSynchronize(d->stream), "copy device -> host (a kernel before it failed)");
  return TG_OK;
}

extern "C" tg_status tgi_device_d2d(tgi_device *d, void *dst, const void *src, size_t bytes, char *msg) {
  DEV_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, d->stream), "copy device -> device");
  return TG_OK;
}

extern "C" tg_status tgi_device_zero(tgi_device *d, void *p, size_t bytes, char *msg) {
  DEV_TRY(cudaMemsetAsync(p, 0, bytes, d->stream), "cudaMemsetAsync");
  return TG_OK;
}

extern "C" tg_status tgi_device_sync(tgi_device *d, char *msg) {
  DEV_TRY(cudaStreamSynchronize(d->stream), "device work failed");
  return TG_OK;
}

extern "C" void tgi_device_memory(const tgi_device *d, size_t *current, size_t *peak) {
  if (current) *current = d ? d->current : 0;
  if (peak) *peak = d ? d->peak : 0;
}

extern "C" void tgi_device_reset_peak(tgi_device *d) {
  if (d) d->peak = d->current;
}

extern "C" void tgi_device_inject_alloc_failure(tgi_device *d, int64_t after) {
  if (d) d->fail_after = after < 0 ? -1 : after;
}

// A zero-copy input's pointer: its first and last byte must be device (or managed) memory of
// this device. (The runtime API cannot tell whether both lie in one allocation.)
extern "C" tg_status tgi_device_check_pointer(tgi_device *d, const void *p, size_t bytes, char *msg) {
  const char *ends[2] = {(const char *)p, (const char *)p + (bytes ? bytes - 1 : 0)};
  for (int k = 0; k < 2; k++) {
    cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, ends[k]);
    if (e != cudaSuccess) {
      cudaGetLastError(); // not sticky: clear it
      snprintf(msg, TGI_MSG_CAP, "cudaPointerGetAttributes(%p): %s", (const void *)ends[k], cudaGetErrorString(e));
      return TG_ERR_INVALID_ARGUMENT;
    }
    bool dev = a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
    if (!dev || a.device != d->index) {
      const char *what = k ? "its last byte" : "the pointer";
      if (dev)
        snprintf(msg, TGI_MSG_CAP, "%s %p is memory of CUDA device %d, not of the runtime's device %d", what,
                 (const void *)ends[k], a.device, d->index);
      else
        snprintf(msg, TGI_MSG_CAP, "%s %p is host or unregistered memory, not memory of CUDA device %d", what,
                 (const void *)ends[k], d->index);
      return TG_ERR_INVALID_ARGUMENT;
    }
  }
  return TG_OK;
}

extern "C" tg_status tgi_device_flag_nonfinite(tgi_device *d, tg_dtype dt, const void *x, int64_t n, int32_t tag,
                                               int32_t *flag, char *msg) {
  tg_status s = cuda_flag_nonfinite(d->stream, dt, x, n, tag, flag);
  if (s) snprintf(msg, TGI_MSG_CAP, "%s", tgc_error());
  return s;
}

extern "C" int64_t tgi_device_alloc_failure_pending(const tgi_device *d) { return d ? d->fail_after : -1; }

extern "C" struct CUstream_st *tgi_device_stream(tgi_device *d) { return d ? d->stream : NULL; }
extern "C" struct cublasContext *tgi_device_cublas(tgi_device *d) { return d ? d->cublas : NULL; }
extern "C" void *tgi_device_cublaslt(tgi_device *d, void **workspace, size_t *bytes) {
  if (workspace) *workspace = d ? d->lt_workspace : NULL;
  if (bytes) *bytes = d ? d->lt_workspace_bytes : 0;
  return d ? (void *)d->lt : NULL;
}
