/* Device layer of a host-only build: every call reports that there is no device. */
#include "internal.h"

#include <stdio.h>

static tg_status none(char *msg) {
  if (msg) snprintf(msg, TGI_MSG_CAP, "tiga was built without CUDA (TIGA_CUDA=OFF or no nvcc found)");
  return TG_ERR_NO_DEVICE;
}

int tgi_device_compiled(void) { return 0; }
tg_status tgi_device_open(int index, tgi_device **out, char *msg) {
  (void)index;
  *out = NULL;
  return none(msg);
}
void tgi_device_close(tgi_device *dev) { (void)dev; }
tg_status tgi_device_alloc(tgi_device *dev, size_t bytes, void **out, char *msg) {
  (void)dev, (void)bytes;
  *out = NULL;
  return none(msg);
}
void tgi_device_free(tgi_device *dev, void *p) { (void)dev, (void)p; }
tg_status tgi_device_h2d(tgi_device *dev, void *dst, const void *src, size_t bytes, char *msg) {
  (void)dev, (void)dst, (void)src, (void)bytes;
  return none(msg);
}
tg_status tgi_device_d2h(tgi_device *dev, void *dst, const void *src, size_t bytes, char *msg) {
  (void)dev, (void)dst, (void)src, (void)bytes;
  return none(msg);
}
tg_status tgi_device_d2d(tgi_device *dev, void *dst, const void *src, size_t bytes, char *msg) {
  (void)dev, (void)dst, (void)src, (void)bytes;
  return none(msg);
}
tg_status tgi_device_zero(tgi_device *dev, void *p, size_t bytes, char *msg) {
  (void)dev, (void)p, (void)bytes;
  return none(msg);
}
tg_status tgi_device_sync(tgi_device *dev, char *msg) {
  (void)dev;
  return none(msg);
}
void tgi_device_memory(const tgi_device *dev, size_t *current, size_t *peak) {
  (void)dev;
  if (current) *current = 0;
  if (peak) *peak = 0;
}
void tgi_device_reset_peak(tgi_device *dev) { (void)dev; }
void tgi_device_inject_alloc_failure(tgi_device *dev, int64_t after) { (void)dev, (void)after; }
tg_status tgi_device_check_pointer(tgi_device *dev, const void *p, size_t bytes, char *msg) {
  (void)dev, (void)p, (void)bytes;
  return none(msg);
}
int64_t tgi_device_alloc_failure_pending(const tgi_device *dev) {
  (void)dev;
  return -1;
}
struct CUstream_st *tgi_device_stream(tgi_device *dev) {
  (void)dev;
  return NULL;
}
struct cublasContext *tgi_device_cublas(tgi_device *dev) {
  (void)dev;
  return NULL;
}
void *tgi_device_cublaslt(tgi_device *dev, void **workspace, size_t *bytes) {
  (void)dev;
  if (workspace) *workspace = NULL;
  if (bytes) *bytes = 0;
  return NULL;
}
const char *tgc_error(void) { return "tiga was built without CUDA"; }
tg_status tgi_device_host_alloc(tgi_device *dev, size_t bytes, void **out, char *msg) {
  (void)dev, (void)bytes;
  *out = NULL;
  return none(msg);
}
void tgi_device_host_free(tgi_device *dev, void *p) { (void)dev, (void)p; }
tg_status tgi_device_h2d_async(tgi_device *dev, void *dst, const void *src, size_t bytes, char *msg) {
  (void)dev, (void)dst, (void)src, (void)bytes;
  return none(msg);
}
tg_status tgi_device_h2d_wait(tgi_device *dev, char *msg) {
  (void)dev, (void)msg;
  return TG_OK;
}
tg_status tgi_device_flag_nonfinite(tgi_device *dev, tg_dtype dt, const void *x, int64_t n, int32_t tag, int32_t *flag,
                                    char *msg) {
  (void)dev, (void)dt, (void)x, (void)n, (void)tag, (void)flag;
  return none(msg);
}
