/* The runtime: a device (or none), reference counted by its caller, tapes and relations. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TIGA_HAVE_CUDA
#include "../cuda/finite.h"
#endif

/* Anomaly mode's check stream, made with the device (the device is current here) only when
 * TIGA_CHECK_FINITE_OVERLAP=1 asks for it: measured on the H200 (bench/records/run_s6d.sh, char
 * model bf16) the overlapped checks cost +19 % a step against +15 % in order on the main stream —
 * the check kernels take bandwidth the compute needs and the joins add waits — so in order is the
 * default. A failure leaves it NULL (the checks then run on the main stream). */
static void side_open(tg_runtime *rt) {
#ifdef TIGA_HAVE_CUDA
  const char *e = getenv("TIGA_CHECK_FINITE_OVERLAP");
  if (!e || strcmp(e, "1") != 0) return;
  if (cuda_finite_side_create(&rt->nf_side)) rt->nf_side = NULL;
#else
  (void)rt;
#endif
}

static tg_status create(int device, bool cuda, tg_runtime **out) {
  if (!out) {
    tgi_set_last_error("%s: argument 'out' is NULL; expected a tg_runtime** to receive the handle",
                       cuda ? "tg_runtime_create_cuda" : "tg_runtime_create_host");
    return TG_ERR_INVALID_ARGUMENT;
  }
  *out = NULL;
  tg_runtime *rt = tgi_calloc(1, sizeof *rt);
  if (!rt) {
    tgi_set_last_error("tg_runtime_create: out of host memory");
    return TG_ERR_OUT_OF_MEMORY;
  }
  rt->device_index = -1;
  rt->refs = 1;
  if (cuda) {
    if (device < 0) {
      free(rt);
      tgi_set_last_error("tg_runtime_create_cuda: argument 'device' is %d; expected a device index >= 0", device);
      return TG_ERR_INVALID_ARGUMENT;
    }
    char msg[TGI_MSG_CAP];
    tg_status s = tgi_device_open(device, &rt->dev, msg);
    if (s != TG_OK) {
      free(rt);
      tgi_set_last_error("tg_runtime_create_cuda: device %d: %s", device, msg);
      return s;
    }
    rt->device_index = device;
    side_open(rt);
  }
  *out = rt;
  return TG_OK;
}

tg_status tg_runtime_create_host(tg_runtime **out) { return create(-1, false, out); }
tg_status tg_runtime_create_cuda(int device, tg_runtime **out) { return create(device, true, out); }

void tgi_rt_retain(tg_runtime *rt) { tgi_atomic_add(&rt->refs, 1); }

void tgi_rt_release(tg_runtime *rt) {
  if (tgi_atomic_add(&rt->refs, -1) > 0) return;
#ifdef TIGA_HAVE_CUDA
  cuda_finite_side_destroy(rt->nf_side);
#endif
  tgi_device_close(rt->dev);
  free(rt);
}

void tg_runtime_destroy(tg_runtime *rt) {
  if (rt) tgi_rt_release(rt);
}

const char *tg_runtime_error(const tg_runtime *rt) { return rt ? rt->msg : tg_last_error(); }

int tg_runtime_has_device(const tg_runtime *rt) { return rt && rt->dev ? 1 : 0; }

tg_status tg_runtime_memory(const tg_runtime *rt, size_t *current, size_t *peak) {
  if (!rt) {
    tgi_set_last_error("tg_runtime_memory: argument 'rt' is NULL; expected a runtime");
    return TG_ERR_INVALID_ARGUMENT;
  }
  tgi_device_memory(rt->dev, current, peak);
  return TG_OK;
}

tg_status tg_runtime_reset_peak(tg_runtime *rt) {
  if (!rt) {
    tgi_set_last_error("tg_runtime_reset_peak: argument 'rt' is NULL; expected a runtime");
    return TG_ERR_INVALID_ARGUMENT;
  }
  tgi_device_reset_peak(rt->dev);
  return TG_OK;
}

tg_status tg_runtime_inject_alloc_failure(tg_runtime *rt, int64_t after) {
  if (!rt) {
    tgi_set_last_error("tg_runtime_inject_alloc_failure: argument 'rt' is NULL; expected a runtime");
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (!rt->dev) return tgi_rt_error(rt, TG_ERR_NO_DEVICE, "tg_runtime_inject_alloc_failure: the runtime is host-only");
  tgi_device_inject_alloc_failure(rt->dev, after);
  return TG_OK;
}

tg_status tg_runtime_alloc_failure_pending(const tg_runtime *rt, int64_t *pending) {
  if (!rt || !pending) {
    tgi_set_last_error("tg_runtime_alloc_failure_pending: argument '%s' is NULL", !rt ? "rt" : "pending");
    return TG_ERR_INVALID_ARGUMENT;
  }
  *pending = tgi_device_alloc_failure_pending(rt->dev);
  return TG_OK;
}

tg_status tg_runtime_sync(tg_runtime *rt) {
  if (!rt) {
    tgi_set_last_error("tg_runtime_sync: argument 'rt' is NULL; expected a runtime");
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (!rt->dev) return TG_OK;
  char msg[TGI_MSG_CAP];
  tg_status s = tgi_device_sync(rt->dev, msg);
  if (s) return tgi_rt_error(rt, s, "tg_runtime_sync: %s", msg);
  return TG_OK;
}
