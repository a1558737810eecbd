/* tg_comm's NCCL calls (train/comm.h). The communicator is non-blocking (config.blocking = 0): a
 * call that returns ncclInProgress is polled (ncclCommGetAsyncError) with the comm's deadline, and
 * so is every wait for the communication stream, so that a rank that dies or stops answering
 * becomes TG_ERR_DEVICE after opts.timeout_s (the communicator aborted with ncclCommAbort), not a
 * hang. Built only with NCCL's header (CMake TIGA_NCCL); libnccl itself is loaded at the first
 * tg_comm call (dlopen), so libtiga loads and every other call works on a machine without it (tg_comm
 * calls then fail with TG_ERR_UNSUPPORTED naming the library). CUDA runtime calls go through
 * cuda/comm_stream.h. */
#define _POSIX_C_SOURCE 200809L /* nanosleep, clock_gettime */
#include "comm.h"

#include "../cuda/comm_stream.h"

#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

_Static_assert(sizeof(ncclUniqueId) == TG_COMM_ID_BYTES, "tg_comm_id must hold an ncclUniqueId");

/* ------------------------------------------------------------ libnccl, loaded at first use
 * Tried in order: $TIGA_NCCL_LIBRARY, "libnccl.so.2" (the loader's search path), and the library
 * the build found (TIGA_NCCL_PATH). Needs NCCL >= 2.14 (non-blocking communicators, finalize). */
static struct nccl_api {
  ncclResult_t (*GetVersion)(int *);
  ncclResult_t (*GetUniqueId)(ncclUniqueId *);
  ncclResult_t (*CommInitRankConfig)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t *);
  const char *(*GetErrorString)(ncclResult_t);
  const char *(*GetLastError)(ncclComm_t);
  ncclResult_t (*CommAbort)(ncclComm_t);
  ncclResult_t (*CommFinalize)(ncclComm_t);
  ncclResult_t (*CommDestroy)(ncclComm_t);
  ncclResult_t (*GroupStart)(void);
  ncclResult_t (*GroupEnd)(void);
  ncclResult_t (*AllReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*Broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
} N;
static pthread_once_t N_once = PTHREAD_ONCE_INIT;
static bool N_ok;
static char N_err[512];

static bool sym(void *h, const char *name, void *fnptr, size_t size) {
  void *p = dlsym(h, name);
  if (!p) return false;
  memcpy(fnptr, &p, size); /* POSIX: a function's address as void * */
  return true;
}

static void nccl_load(void) {
  const char *env = getenv("TIGA_NCCL_LIBRARY");
#ifdef TIGA_NCCL_PATH
  const char *built = TIGA_NCCL_PATH;
#else
  const char *built = NULL;
#endif
  const char *tries[3] = {env && *env ? env : NULL, "libnccl.so.2", built};
  void *h = NULL;
  const char *why = "not found";
  for (int i = 0; i < 3 && !h; i++)
    if (tries[i] && !(h = dlopen(tries[i], RTLD_NOW | RTLD_LOCAL))) why = dlerror();
  if (!h) {
    snprintf(N_err, sizeof N_err, "NCCL could not be loaded (libnccl.so.2; set TIGA_NCCL_LIBRARY to its path): %s",
             why ? why : "?");
    return;
  }
#define SYM(f) sym(h, "nccl" #f, &N.f, sizeof N.f)
  bool ok = SYM(GetVersion) && SYM(GetUniqueId) && SYM(CommInitRankConfig) && SYM(CommGetAsyncError) &&
            SYM(GetErrorString) && SYM(GetLastError) && SYM(CommAbort) && SYM(CommFinalize) && SYM(CommDestroy) &&
            SYM(GroupStart) && SYM(GroupEnd) && SYM(AllReduce) && SYM(Broadcast);
#undef SYM
  int v = 0;
  if (ok && N.GetVersion(&v) == ncclSuccess && v >= 21400) {
    N_ok = true;
    return;
  }
  snprintf(N_err, sizeof N_err,
           "the NCCL library found (version code %d) is older than 2.14 or lacks a function tg_comm uses", v);
  dlclose(h);
}

/* TG_OK once libnccl is loaded; else TG_ERR_UNSUPPORTED with why in msg. */
static tg_status nccl_ready(char *msg) {
  pthread_once(&N_once, nccl_load);
  if (N_ok) return TG_OK;
  snprintf(msg, TGI_MSG_CAP, "%s", N_err);
  return TG_ERR_UNSUPPORTED;
}

struct tgi_nccl {
  ncclComm_t comm; /* NULL once aborted or destroyed */
  cuda_comm_side *side;
  bool inflight; /* collectives queued since the last completed wait */
};

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Polling: spins briefly (a collective in flight usually ends within microseconds of the wait
 * starting), then sleeps 50 us between looks. */
static void nap(unsigned *polls) {
  if ((*polls)++ < 2000) return;
  struct timespec ts = {0, 50 * 1000};
  nanosleep(&ts, NULL);
}

static const char *nccl_why(struct tgi_nccl *nc, ncclResult_t r) {
  const char *last = nc && nc->comm ? N.GetLastError(nc->comm) : N.GetLastError(NULL);
  return last && *last ? last : N.GetErrorString(r);
}

/* Aborts the communicator (every rank's pending collectives with it, as far as NCCL can) and marks
 * the comm dead; returns TG_ERR_DEVICE with the message. */
static tg_status abort_comm(tg_comm *c, const char *what, const char *why) {
  struct tgi_nccl *nc = c->nc;
  if (nc && nc->comm) {
    N.CommAbort(nc->comm);
    nc->comm = NULL;
  }
  if (nc) nc->inflight = false;
  c->dead = true;
  return tgi_comm_fail(c, TG_ERR_DEVICE, "%s: %s; the communicator was aborted (rank %d of %d): destroy the comm", what,
                       why, c->rank, c->nranks);
}

/* The communicator's state after a call that returned r: polls while it is ncclInProgress. */
static tg_status settle(tg_comm *c, ncclResult_t r, const char *what) {
  struct tgi_nccl *nc = c->nc;
  const double deadline = mono_s() + c->opts.timeout_s;
  unsigned polls = 0;
  while (r == ncclInProgress) {
    ncclResult_t state = ncclInProgress;
    ncclResult_t q = N.CommGetAsyncError(nc->comm, &state);
    r = q != ncclSuccess ? q : state;
    if (r != ncclInProgress) break;
    if (mono_s() > deadline) {
      char why[160];
      snprintf(why, sizeof why, "no answer within %g s (opts.timeout_s): did a rank die or not join?",
               c->opts.timeout_s);
      return abort_comm(c, what, why);
    }
    nap(&polls);
  }
  if (r != ncclSuccess) {
    char why[TGI_MSG_CAP / 2];
    snprintf(why, sizeof why, "NCCL: %s", nccl_why(nc, r));
    return abort_comm(c, what, why);
  }
  return TG_OK;
}

/* Waits until the communication stream has finished everything up to its last mark, watching the
 * communicator for asynchronous errors, with the deadline. */
static tg_status wait_side(tg_comm *c, const char *what) {
  struct tgi_nccl *nc = c->nc;
  const double deadline = mono_s() + c->opts.timeout_s;
  unsigned polls = 0;
  for (;;) {
    int q = cuda_comm_side_query(nc->side);
    if (q == 1) {
      nc->inflight = false;
      return TG_OK;
    }
    if (q < 0) return abort_comm(c, what, tgc_error());
    ncclResult_t state = ncclSuccess;
    ncclResult_t e = N.CommGetAsyncError(nc->comm, &state);
    if (e != ncclSuccess || (state != ncclSuccess && state != ncclInProgress)) {
      char why[TGI_MSG_CAP / 2];
      snprintf(why, sizeof why, "NCCL: %s", nccl_why(nc, e != ncclSuccess ? e : state));
      return abort_comm(c, what, why);
    }
    if (mono_s() > deadline) {
      char why[160];
      snprintf(why, sizeof why, "not finished within %g s (opts.timeout_s): did a rank die or stop calling?",
               c->opts.timeout_s);
      return abort_comm(c, what, why);
    }
    nap(&polls);
  }
}

static tg_status use_device(tg_comm *c, const char *what) {
  tg_status s = cuda_comm_side_use(c->nc->side);
  if (s) return tgi_comm_fail(c, s, "%s: %s", what, tgc_error());
  return TG_OK;
}

tg_status tgi_nccl_id_create(unsigned char *bytes, size_t nbytes, char *msg) {
  tg_status s = nccl_ready(msg);
  if (s) return s;
  ncclUniqueId id;
  ncclResult_t r = N.GetUniqueId(&id);
  if (r != ncclSuccess) {
    snprintf(msg, TGI_MSG_CAP, "ncclGetUniqueId: %s", nccl_why(NULL, r));
    return TG_ERR_DEVICE;
  }
  memcpy(bytes, &id, nbytes < sizeof id ? nbytes : sizeof id);
  return TG_OK;
}

tg_status tgi_nccl_open(tg_comm *c, const unsigned char *id_bytes, size_t id_len) {
  const char *what = "joining the communicator";
  char msg[TGI_MSG_CAP];
  tg_status s = nccl_ready(msg);
  if (s) return tgi_comm_fail(c, s, "%s", msg);
  struct tgi_nccl *nc = tgi_calloc(1, sizeof *nc);
  if (!nc) return tgi_comm_fail(c, TG_ERR_OUT_OF_MEMORY, "out of host memory");
  c->nc = nc;
  s = cuda_comm_side_create(tgi_device_stream(c->rt->dev), &nc->side, &c->device);
  if (s) return tgi_comm_fail(c, s, "%s", tgc_error());
  ncclUniqueId id;
  memcpy(&id, id_bytes, id_len < sizeof id ? id_len : sizeof id);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclResult_t r = N.CommInitRankConfig(&nc->comm, c->nranks, id, c->rank, &cfg);
  if (!nc->comm) {
    c->dead = true;
    return tgi_comm_fail(c, TG_ERR_DEVICE, "%s: ncclCommInitRankConfig: %s", what, nccl_why(NULL, r));
  }
  return settle(c, r, what);
}

void tgi_nccl_close(tg_comm *c) {
  struct tgi_nccl *nc = c->nc;
  if (!nc) return;
  if (nc->side) cuda_comm_side_use(nc->side);
  if (nc->comm && nc->inflight && wait_side(c, "tg_comm_destroy: waiting for collectives in flight")) {
    /* aborted by wait_side */
  }
  if (nc->comm) {
    /* Finalize flushes the communicator's work; with a dead peer it may not finish: then abort. */
    if (settle(c, N.CommFinalize(nc->comm), "tg_comm_destroy: ncclCommFinalize") == TG_OK) {
      N.CommDestroy(nc->comm);
      nc->comm = NULL;
    }
  }
  cuda_comm_side_destroy(nc->side);
  free(nc);
  c->nc = NULL;
}

static ncclDataType_t nccl_type(tg_dtype dt, bool *ok) {
  *ok = true;
  switch (dt) {
  case TG_F32: return ncclFloat32;
  case TG_F64: return ncclFloat64;
  case TG_F16: return ncclFloat16;
  case TG_BF16: return ncclBfloat16;
  default: *ok = false; return ncclFloat32;
  }
}

tg_status tgi_nccl_allreduce(tg_comm *c, tg_tape *t, void *const *ptrs, const int64_t *numel, const tg_dtype *dtypes,
                             uint32_t n) {
  const char *what = "gradient all-reduce";
  struct tgi_nccl *nc = c->nc;
  tg_status s = use_device(c, what);
  if (s) return s;
  if ((s = cuda_comm_side_follow(nc->side, TGI_STREAM(t)))) return tgi_comm_fail(c, s, "%s: %s", what, tgc_error());
  for (uint32_t i = 0; i < n; i++) {
    bool ok;
    nccl_type(dtypes[i], &ok);
    if (!ok)
      return tgi_comm_fail(c, TG_ERR_DTYPE, "%s: a gradient of dtype %s; NCCL reduces f32, f64, f16 and bf16", what,
                           tg_dtype_name(dtypes[i]));
  }
  ncclResult_t r = N.GroupStart();
  if (r == ncclSuccess) {
    for (uint32_t i = 0; i < n && (r == ncclSuccess || r == ncclInProgress); i++) {
      bool ok;
      r = N.AllReduce(ptrs[i], ptrs[i], (size_t)numel[i], nccl_type(dtypes[i], &ok), ncclAvg, nc->comm,
                      cuda_comm_side_stream(nc->side));
    }
    ncclResult_t e = N.GroupEnd();
    if (r == ncclSuccess || r == ncclInProgress) r = e;
  }
  nc->inflight = true;
  return settle(c, r, what);
}

tg_status tgi_nccl_join(tg_comm *c, tg_tape *t) {
  const char *what = "tg_comm_finish_gradients";
  struct tgi_nccl *nc = c->nc;
  tg_status s = use_device(c, what);
  if (s) return s;
  if ((s = cuda_comm_side_mark(nc->side)) || (s = cuda_comm_side_join(nc->side, TGI_STREAM(t))))
    return tgi_comm_fail(c, s, "%s: %s", what, tgc_error());
  if (c->opts.host_wait) return wait_side(c, "tg_comm_finish_gradients: waiting for the gradient all-reduce");
  /* device-side wait only: report a failure NCCL already knows of */
  ncclResult_t state = ncclSuccess;
  ncclResult_t e = N.CommGetAsyncError(nc->comm, &state);
  if (e != ncclSuccess || (state != ncclSuccess && state != ncclInProgress)) {
    char why[TGI_MSG_CAP / 2];
    snprintf(why, sizeof why, "NCCL: %s", nccl_why(nc, e != ncclSuccess ? e : state));
    return abort_comm(c, what, why);
  }
  return TG_OK;
}

tg_status tgi_nccl_broadcast(tg_comm *c, tg_tape *t, uint64_t signature, void *const *ptrs, const size_t *bytes,
                             uint32_t n) {
  const char *what = "tg_comm_broadcast_parameters";
  struct tgi_nccl *nc = c->nc;
  tg_status s = use_device(c, what);
  if (s) return s;
  char msg[TGI_MSG_CAP];
  /* 1. every rank must hold the same parameter layout: max over the ranks of (sig, -sig) gives
   * (max sig, -min sig), equal exactly when every rank has the same signature */
  const int64_t sig = (int64_t)(signature >> 2);
  int64_t host[2] = {sig, -sig};
  void *dev = NULL;
  if ((s = tgi_device_alloc(c->rt->dev, sizeof host, &dev, msg))) return tgi_comm_fail(c, s, "%s: %s", what, msg);
  if ((s = tgi_device_h2d(c->rt->dev, dev, host, sizeof host, msg))) {
    tgi_device_free(c->rt->dev, dev);
    return tgi_comm_fail(c, s, "%s: %s", what, msg);
  }
  if ((s = cuda_comm_side_follow(nc->side, TGI_STREAM(t)))) {
    tgi_device_free(c->rt->dev, dev);
    return tgi_comm_fail(c, s, "%s: %s", what, tgc_error());
  }
  nc->inflight = true;
  s = settle(c, N.AllReduce(dev, dev, 2, ncclInt64, ncclMax, nc->comm, cuda_comm_side_stream(nc->side)),
             "tg_comm_broadcast_parameters: comparing the parameter layouts");
  if (!s && (s = cuda_comm_side_mark(nc->side))) s = tgi_comm_fail(c, s, "%s: %s", what, tgc_error());
  if (!s) s = wait_side(c, "tg_comm_broadcast_parameters: comparing the parameter layouts");
  if (!s && (s = tgi_device_d2h(c->rt->dev, host, dev, sizeof host, msg))) s = tgi_comm_fail(c, s, "%s: %s", what, msg);
  tgi_device_free(c->rt->dev, dev);
  if (s) return s;
  if (host[0] != sig || -host[1] != sig)
    return tgi_comm_fail(c, TG_ERR_SHAPE,
                         "%s: the ranks hold different parameters (count, dtypes or shapes differ; this rank has %u); "
                         "build the same model on every rank",
                         what, n);
  /* 2. the values, in groups of at most 256 */
  if ((s = cuda_comm_side_follow(nc->side, TGI_STREAM(t)))) return tgi_comm_fail(c, s, "%s: %s", what, tgc_error());
  for (uint32_t i0 = 0; i0 < n; i0 += 256) {
    ncclResult_t r = N.GroupStart();
    if (r != ncclSuccess) return settle(c, r, what);
    for (uint32_t i = i0; i < n && i < i0 + 256 && (r == ncclSuccess || r == ncclInProgress); i++)
      r = N.Broadcast(ptrs[i], ptrs[i], bytes[i], ncclUint8, 0, nc->comm, cuda_comm_side_stream(nc->side));
    ncclResult_t e = N.GroupEnd();
    if (r == ncclSuccess || r == ncclInProgress) r = e;
    nc->inflight = true;
    if ((s = settle(c, r, what))) return s;
  }
  if ((s = cuda_comm_side_mark(nc->side)) || (s = cuda_comm_side_join(nc->side, TGI_STREAM(t))))
    return tgi_comm_fail(c, s, "%s: %s", what, tgc_error());
  if (c->opts.host_wait) return wait_side(c, "tg_comm_broadcast_parameters: waiting for the broadcast");
  return TG_OK;
}
