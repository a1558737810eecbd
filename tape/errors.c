/* Errors: the thread-local fallback message, the runtime's and the tape's messages (returned and
 * sticky), status / dtype / provider names. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[TGI_MSG_CAP];

void tgi_set_last_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
}

const char *tg_last_error(void) { return last_error; }

tg_status tgi_rt_error(tg_runtime *rt, tg_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rt->msg, sizeof rt->msg, fmt, ap);
  va_end(ap);
  return s;
}

tg_status tgi_error(tg_tape *t, tg_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char tmp[TGI_MSG_CAP];
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (t->status == TG_OK) memcpy(t->msg, tmp, sizeof tmp); /* never hide a sticky message */
  tgi_set_last_error("%s", tmp);
  return s;
}

bool tgi_fail(tg_tape *t, tg_status s, const char *fmt, ...) {
  /* an op call ends with its failure (debug builds' thread check, anomaly mode's in-kernel checks) */
  tgi_thread_leave(t->rt);
  tgi_finite_disarm();
  if (t->status != TG_OK) return false; /* the first failure wins */
  char tmp[TGI_MSG_CAP];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  snprintf(t->msg, sizeof t->msg, "%s: %s", t->cur_op ? t->cur_op : "tiga", tmp);
  t->status = s;
  tgi_set_last_error("%s", t->msg);
  return false;
}

const char *tgc_error(void);

bool tgi_fail_cuda(tg_tape *t, tg_status s, const char *what) {
  return tgi_fail(t, s, "CUDA %s failed: %s", what, tgc_error());
}

int tg_api_version(void) { return TIGA_API_VERSION; }

#define TGI_STR2(x) #x
#define TGI_STR(x) TGI_STR2(x)
#define TGI_VERSION TGI_STR(TIGA_VERSION_MAJOR) "." TGI_STR(TIGA_VERSION_MINOR) "." TGI_STR(TIGA_VERSION_PATCH)
const char *tg_version_string(void) {
  return tgi_device_compiled() ? TGI_VERSION " (cuda)" : TGI_VERSION " (host-only)";
}

const char *tgi_opts_copy(void *dst, size_t dst_size, const void *src) {
  size_t n;
  memcpy(&n, src, sizeof n);
  if (n == 0) return "its struct_size is 0: initialise it with its init function first";
  if (n > dst_size) return "its struct_size is larger than this library's: built against a newer tiga.h";
  if (n < dst_size) return "its struct_size is smaller than this library's and no older layout of it was published";
  memcpy(dst, src, n);
  return NULL;
}

const char *tg_status_string(tg_status s) {
  switch (s) {
  case TG_OK: return "TG_OK";
  case TG_ERR_INVALID_ARGUMENT: return "TG_ERR_INVALID_ARGUMENT";
  case TG_ERR_SHAPE: return "TG_ERR_SHAPE";
  case TG_ERR_DTYPE: return "TG_ERR_DTYPE";
  case TG_ERR_INVALID_ID: return "TG_ERR_INVALID_ID";
  case TG_ERR_UNSUPPORTED: return "TG_ERR_UNSUPPORTED";
  case TG_ERR_NO_DEVICE: return "TG_ERR_NO_DEVICE";
  case TG_ERR_OUT_OF_MEMORY: return "TG_ERR_OUT_OF_MEMORY";
  case TG_ERR_DEVICE: return "TG_ERR_DEVICE";
  case TG_ERR_STATE: return "TG_ERR_STATE";
  case TG_ERR_IO: return "TG_ERR_IO";
  case TG_ERR_GRADCHECK: return "TG_ERR_GRADCHECK";
  case TG_ERR_INTERNAL: return "TG_ERR_INTERNAL";
  case TG_ERR_NONFINITE: return "TG_ERR_NONFINITE";
  }
  return "TG_ERR_UNKNOWN";
}

size_t tg_dtype_size(tg_dtype dt) {
  switch (dt) {
  case TG_F32: return 4;
  case TG_F64: return 8;
  case TG_F16: return 2;
  case TG_BF16: return 2;
  case TG_I32: return 4;
  case TG_I64: return 8;
  case TG_U8: return 1;
  case TG_DTYPE_COUNT: break;
  }
  return 0;
}

const char *tg_dtype_name(tg_dtype dt) {
  switch (dt) {
  case TG_F32: return "f32";
  case TG_F64: return "f64";
  case TG_F16: return "f16";
  case TG_BF16: return "bf16";
  case TG_I32: return "i32";
  case TG_I64: return "i64";
  case TG_U8: return "u8";
  case TG_DTYPE_COUNT: break;
  }
  return "invalid";
}

const char *tg_provider_name(tg_provider p) {
  switch (p) {
  case TG_PROVIDER_AUTO: return "auto";
  case TG_PROVIDER_HOST: return "host";
  case TG_PROVIDER_CUDA_FUSED: return "cuda_fused";
  case TG_PROVIDER_CUDA_COMPOSED: return "cuda_composed";
  }
  return "invalid";
}

const char *tgi_shape_str(const int64_t *shape, int ndim, char *buf, size_t cap) {
  size_t off = 0;
  off += (size_t)snprintf(buf + off, cap - off, "[");
  for (int i = 0; i < ndim && off < cap; i++)
    off += (size_t)snprintf(buf + off, cap - off, i ? ", %lld" : "%lld", (long long)shape[i]);
  if (off < cap) snprintf(buf + off, cap - off, "]");
  return buf;
}
