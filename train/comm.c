/* Data-parallel training (tiga.h: tg_comm_*): the public calls and their argument checks, the
 * rendezvous id files, the gradient bucket plan and the gradient-ready hook that launches buckets
 * during backward. Every NCCL call is in comm_nccl.c; without NCCL the stubs at the end return
 * TG_ERR_UNSUPPORTED (after the same argument checks). */
#define _POSIX_C_SOURCE 200809L /* nanosleep, rename */
#include "comm.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NO_NCCL                                                                                                        \
  "tiga was built without NCCL (CMake TIGA_NCCL=OFF, no CUDA provider, or nccl.h / libnccl not found), so "            \
  "data-parallel training (tg_comm_*) is unavailable"

tg_status tgi_comm_fail(tg_comm *c, tg_status s, const char *fmt, ...) {
  char buf[TGI_MSG_CAP];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (c) memcpy(c->msg, buf, sizeof buf);
  tgi_set_last_error("%s", buf);
  return s;
}

void tg_comm_options_init(tg_comm_options *o) {
  if (o) *o = (tg_comm_options){sizeof *o, 600.0, (size_t)25 << 20, 1};
}

const char *tg_comm_error(const tg_comm *c) { return c ? c->msg : ""; }

tg_status tg_comm_rank(const tg_comm *c, int *rank, int *nranks) {
  if (!c) {
    tgi_set_last_error("tg_comm_rank: argument 'comm' is NULL; expected a comm from tg_comm_create");
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (rank) *rank = c->rank;
  if (nranks) *nranks = c->nranks;
  return TG_OK;
}

/* ------------------------------------------------------------ rendezvous id files
 * One line: "tiga-comm-id-1 " and the 128 bytes as 256 lowercase hex digits. */
#define ID_MAGIC "tiga-comm-id-1 "
#define ID_FILE_BYTES (sizeof ID_MAGIC - 1 + 2 * TG_COMM_ID_BYTES + 1)

static tg_status check_id_arg(const char *fn, const char *arg, const void *p, size_t bytes) {
  if (!p) {
    tgi_set_last_error("%s: argument '%s' is NULL; expected TG_COMM_ID_BYTES bytes (a comm id)", fn, arg);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (bytes != TG_COMM_ID_BYTES) {
    tgi_set_last_error("%s: argument '%s_bytes' is %zu; expected TG_COMM_ID_BYTES = %d", fn, arg, bytes,
                       TG_COMM_ID_BYTES);
    return TG_ERR_INVALID_ARGUMENT;
  }
  return TG_OK;
}

static tg_status check_path(const char *fn, const char *path) {
  if (!path || !*path) {
    tgi_set_last_error("%s: argument 'path' is %s; expected a file path", fn, path ? "empty" : "NULL");
    return TG_ERR_INVALID_ARGUMENT;
  }
  return TG_OK;
}

tg_status tg_comm_id_write(const void *id, size_t id_bytes, const char *path) {
  const char *fn = "tg_comm_id_write";
  tg_status s = check_id_arg(fn, "id", id, id_bytes);
  if (s || (s = check_path(fn, path))) return s;
  char line[ID_FILE_BYTES + 1];
  memcpy(line, ID_MAGIC, sizeof ID_MAGIC - 1);
  static const char hex[] = "0123456789abcdef";
  char *p = line + sizeof ID_MAGIC - 1;
  const unsigned char *b = id;
  for (size_t i = 0; i < TG_COMM_ID_BYTES; i++) {
    *p++ = hex[b[i] >> 4];
    *p++ = hex[b[i] & 15];
  }
  *p++ = '\n';
  size_t plen = strlen(path);
  char *tmp = tgi_malloc(plen + 5);
  if (!tmp) {
    tgi_set_last_error("%s: out of host memory", fn);
    return TG_ERR_OUT_OF_MEMORY;
  }
  memcpy(tmp, path, plen);
  memcpy(tmp + plen, ".tmp", 5);
  FILE *f = fopen(tmp, "wb");
  bool ok = f && fwrite(line, 1, ID_FILE_BYTES, f) == ID_FILE_BYTES;
  int err = errno;
  if (f && fclose(f) != 0) ok = false, err = errno;
  if (ok && rename(tmp, path) != 0) ok = false, err = errno;
  if (!ok) {
    remove(tmp);
    tgi_set_last_error("%s: could not write '%s' (through '%s'): %s", fn, path, tmp, strerror(err));
  }
  free(tmp);
  return ok ? TG_OK : TG_ERR_IO;
}

static int hexval(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  return -1;
}

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

tg_status tg_comm_id_read(const char *path, double timeout_s, void *out, size_t id_bytes) {
  const char *fn = "tg_comm_id_read";
  tg_status s = check_id_arg(fn, "id", out, id_bytes);
  if (s || (s = check_path(fn, path))) return s;
  if (!(timeout_s >= 0) || !isfinite(timeout_s)) {
    tgi_set_last_error("%s: argument 'timeout_s' is %g; expected a finite number >= 0", fn, timeout_s);
    return TG_ERR_INVALID_ARGUMENT;
  }
  const double deadline = mono_s() + timeout_s;
  FILE *f;
  while (!(f = fopen(path, "rb"))) { /* written by a rename: once it exists it is whole */
    if (mono_s() >= deadline) {
      tgi_set_last_error("%s: '%s' did not appear within %g s (%s): has rank 0 written it (tg_comm_id_write)?", fn,
                         path, timeout_s, strerror(errno));
      return TG_ERR_IO;
    }
    struct timespec nap = {0, 10 * 1000 * 1000};
    nanosleep(&nap, NULL);
  }
  char line[ID_FILE_BYTES + 1];
  size_t got = fread(line, 1, sizeof line, f);
  fclose(f);
  bool ok = got == ID_FILE_BYTES && !memcmp(line, ID_MAGIC, sizeof ID_MAGIC - 1) && line[ID_FILE_BYTES - 1] == '\n';
  unsigned char id[TG_COMM_ID_BYTES];
  for (size_t i = 0; ok && i < TG_COMM_ID_BYTES; i++) {
    int hi = hexval(line[sizeof ID_MAGIC - 1 + 2 * i]), lo = hexval(line[sizeof ID_MAGIC + 2 * i]);
    ok = hi >= 0 && lo >= 0;
    id[i] = (unsigned char)(hi << 4 | (lo & 15));
  }
  if (!ok) {
    tgi_set_last_error("%s: '%s' is not a comm id file (tg_comm_id_write: %zu bytes starting \"%s\")", fn, path,
                       (size_t)ID_FILE_BYTES, ID_MAGIC);
    return TG_ERR_IO;
  }
  memcpy(out, id, sizeof id);
  return TG_OK;
}

tg_status tg_comm_id_create(void *id, size_t id_bytes) {
  const char *fn = "tg_comm_id_create";
  tg_status s = check_id_arg(fn, "id", id, id_bytes);
  if (s) return s;
  char msg[TGI_MSG_CAP];
  if ((s = tgi_nccl_id_create(id, id_bytes, msg))) tgi_set_last_error("%s: %s", fn, msg);
  return s;
}

/* ------------------------------------------------------------ create / destroy */

tg_status tg_comm_create(tg_runtime *rt, int nranks, int rank, const void *id, size_t id_bytes,
                         const tg_comm_options *opts, tg_comm **out) {
  const char *fn = "tg_comm_create";
  if (!out) {
    tgi_set_last_error("%s: argument 'out' is NULL", fn);
    return TG_ERR_INVALID_ARGUMENT;
  }
  *out = NULL;
  if (!rt) {
    tgi_set_last_error("%s: argument 'rt' is NULL; expected a runtime from tg_runtime_create_cuda", fn);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (nranks < 1) {
    tgi_set_last_error("%s: argument 'nranks' is %d; expected >= 1", fn, nranks);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (rank < 0 || rank >= nranks) {
    tgi_set_last_error("%s: argument 'rank' is %d; expected 0 <= rank < nranks = %d", fn, rank, nranks);
    return TG_ERR_INVALID_ARGUMENT;
  }
  tg_status s = check_id_arg(fn, "id", id, id_bytes);
  if (s) return s;
  tg_comm_options o;
  tg_comm_options_init(&o);
  const char *why = opts ? tgi_opts_copy(&o, sizeof o, opts) : NULL;
  if (why) {
    tgi_set_last_error("%s: argument 'opts' (tg_comm_options): %s", fn, why);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (!(o.timeout_s > 0) || !isfinite(o.timeout_s)) {
    tgi_set_last_error("%s: argument 'opts': timeout_s is %g; expected a finite number > 0", fn, o.timeout_s);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (o.bucket_bytes < 1) {
    tgi_set_last_error("%s: argument 'opts': bucket_bytes is 0; expected >= 1", fn);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (o.host_wait != 0 && o.host_wait != 1) {
    tgi_set_last_error("%s: argument 'opts': host_wait is %d; expected 0 or 1", fn, o.host_wait);
    return TG_ERR_INVALID_ARGUMENT;
  }
#ifndef TIGA_HAVE_NCCL
  tgi_set_last_error("%s: %s", fn, NO_NCCL);
  return TG_ERR_UNSUPPORTED;
#endif
  if (!rt->dev) {
    tgi_set_last_error("%s: argument 'rt' is a host-only runtime; a comm needs a CUDA runtime "
                       "(tg_runtime_create_cuda), one GPU per rank",
                       fn);
    return TG_ERR_NO_DEVICE;
  }
  tg_comm *c = tgi_calloc(1, sizeof *c);
  if (!c) {
    tgi_set_last_error("%s: out of host memory", fn);
    return TG_ERR_OUT_OF_MEMORY;
  }
  c->rt = rt;
  tgi_rt_retain(rt);
  c->nranks = nranks;
  c->rank = rank;
  c->opts = o;
  if ((s = tgi_nccl_open(c, id, id_bytes))) {
    char msg[TGI_MSG_CAP];
    memcpy(msg, c->msg, sizeof msg);
    tg_comm_destroy(c);
    tgi_set_last_error("%s: %s", fn, msg);
    return s;
  }
  *out = c;
  return TG_OK;
}

static void plan_free(tgi_comm_plan *p) {
  free(p->slot);
  free(p->first);
  free(p->param_of);
  free(p->ready);
  free(p->pending);
  memset(p, 0, sizeof *p);
}

static void on_grad_ready(tg_tape *t, tg_id id, void *user);

static void detach(tg_comm *c) {
  if (!c->tape) return;
  if (c->tape->grad_hook == on_grad_ready && c->tape->grad_hook_user == c) {
    c->tape->grad_hook = NULL;
    c->tape->grad_hook_user = NULL;
  }
  tgi_tape_release(c->tape);
  c->tape = NULL;
}

void tg_comm_destroy(tg_comm *c) {
  if (!c) return;
  tgi_nccl_close(c); /* first: collectives in flight write into the attached tape's gradients */
  detach(c);
  plan_free(&c->plan);
  tgi_rt_release(c->rt);
  free(c);
}

/* ------------------------------------------------------------ bucket plan */

/* Plans the buckets over t's parameters now: reverse tg_tape_parameters order, a new bucket when
 * the next gradient would take the current one past bucket_bytes (a larger gradient: alone). */
static tg_status plan_make(tg_comm *c, tg_tape *t, const char *fn) {
  tgi_comm_plan *p = &c->plan;
  plan_free(p);
  uint32_t n = 0;
  for (uint32_t i = 0; i < t->nvals; i++)
    n += tgi_slot(t, i)->kind == TGI_PARAM;
  p->nslots = t->nvals;
  p->slot = tgi_calloc(n ? n : 1, sizeof *p->slot);
  p->first = tgi_calloc((size_t)n + 1, sizeof *p->first);
  p->param_of = tgi_calloc(t->nvals ? t->nvals : 1, sizeof *p->param_of);
  p->ready = tgi_calloc(n ? n : 1, 1);
  p->pending = tgi_calloc(n ? n : 1, sizeof *p->pending);
  if (!p->slot || !p->first || !p->param_of || !p->ready || !p->pending) {
    plan_free(p);
    return tgi_comm_fail(c, TG_ERR_OUT_OF_MEMORY, "%s: out of host memory (bucket plan of %u parameters)", fn, n);
  }
  for (uint32_t i = 0; i < t->nvals; i++)
    p->param_of[i] = UINT32_MAX;
  size_t in_bucket = 0;
  for (uint32_t i = t->nvals; i-- > 0;) {
    tgi_value *v = tgi_slot(t, i);
    if (v->kind != TGI_PARAM) continue;
    if (p->n > p->first[p->nbuckets] && in_bucket + v->bytes > c->opts.bucket_bytes) {
      p->first[++p->nbuckets] = p->n;
      in_bucket = 0;
    }
    p->param_of[i] = p->n;
    p->slot[p->n++] = i;
    in_bucket += v->bytes;
  }
  if (p->n) p->first[++p->nbuckets] = p->n;
  for (uint32_t b = 0; b < p->nbuckets; b++)
    p->pending[b] = p->first[b + 1] - p->first[b];
  p->next = 0;
  return TG_OK;
}

/* Forgets this step's progress (the plan stays). */
static void plan_rewind(tgi_comm_plan *p) {
  if (p->n) memset(p->ready, 0, p->n);
  for (uint32_t b = 0; b < p->nbuckets; b++)
    p->pending[b] = p->first[b + 1] - p->first[b];
  p->next = 0;
}

/* Launches bucket b; at_finish: gradients not on the device (or absent: zeros) are put there first. */
static tg_status launch(tg_comm *c, tg_tape *t, uint32_t b, bool at_finish) {
  tgi_comm_plan *p = &c->plan;
  enum { CHUNK = 256 }; /* one NCCL group per bucket; a larger bucket: several groups, same order */
  void *ptrs[CHUNK];
  int64_t numel[CHUNK];
  tg_dtype dts[CHUNK];
  uint32_t k = 0;
  for (uint32_t j = p->first[b]; j < p->first[b + 1]; j++) {
    tgi_value *v = tgi_slot(t, p->slot[j]);
    void *g = v->grad.d;
    if (at_finish && (!(v->grad.valid & TGI_ON_DEV) || !g)) {
      g = tgi_grad_d(t, v); /* uploads a host gradient, or makes a zero one */
      if (!g) {
        tg_status s = t->status ? t->status : TG_ERR_INTERNAL;
        char msg[TGI_MSG_CAP];
        memcpy(msg, t->msg, sizeof msg);
        t->status = TG_OK; /* reported here, not sticky on the tape */
        return tgi_comm_fail(c, s, "gradient of parameter slot %u: %s", p->slot[j], msg);
      }
    }
    v->grad.valid = TGI_ON_DEV; /* the reduced gradient lives on the device only */
    ptrs[k] = g;
    numel[k] = v->numel;
    dts[k] = (tg_dtype)v->dtype;
    if (++k == CHUNK || j + 1 == p->first[b + 1]) {
      tg_status s = tgi_nccl_allreduce(c, t, ptrs, numel, dts, k);
      if (s) return s;
      k = 0;
    }
  }
  return TG_OK;
}

/* The gradient-ready hook (tiga.h: tg_tape_set_grad_ready_hook): marks the parameter final and
 * launches, in plan order, every bucket whose gradients are all final on the device. */
static void on_grad_ready(tg_tape *t, tg_id id, void *user) {
  tg_comm *c = user;
  tgi_comm_plan *p = &c->plan;
  if (c->dead || c->hook_status) return;
  if (id == TG_NO_ID) { /* a sweep begins */
    bool any = p->next > 0;
    for (uint32_t j = 0; !any && j < p->n; j++)
      any = p->ready[j] != 0;
    if (p->next > 0)
      c->hook_status = tgi_comm_fail(
          c, TG_ERR_STATE,
          "a second backward began before tg_comm_finish_gradients; buckets of the first were already being "
          "reduced (for gradient accumulation, tg_comm_detach during the micro-steps that must not reduce)");
    else if (any)
      plan_rewind(p); /* an earlier sweep stopped (failed) before launching anything */
    return;
  }
  uint32_t slot = tgi_id_slot(id);
  uint32_t j = slot < p->nslots ? p->param_of[slot] : UINT32_MAX;
  if (j == UINT32_MAX) {
    c->hook_status = tgi_comm_fail(c, TG_ERR_STATE,
                                   "parameter id %lld was created after tg_comm_attach; call tg_comm_attach again "
                                   "so that the buckets include it",
                                   (long long)id);
    return;
  }
  if (p->ready[j]) return;
  const tgi_value *v = tgi_slot(t, slot);
  p->ready[j] = (v->grad.valid & TGI_ON_DEV) && v->grad.d ? 1 : 2;
  uint32_t b = 0;
  while (p->first[b + 1] <= j) /* buckets are few: a scan */
    b++;
  p->pending[b]--;
  while (p->next < p->nbuckets && p->pending[p->next] == 0) {
    bool on_dev = true;
    for (uint32_t i = p->first[p->next]; on_dev && i < p->first[p->next + 1]; i++)
      on_dev = p->ready[i] == 1;
    if (!on_dev) return; /* launched by finish, keeping the order */
    tg_status s = launch(c, t, p->next, false);
    if (s) {
      c->hook_status = s;
      return;
    }
    p->next++;
  }
}

/* ------------------------------------------------------------ calls on a tape */

static tg_status begin(tg_comm *c, tg_tape *t, const char *fn) {
  if (!c) {
    tgi_set_last_error("%s: argument 'comm' is NULL; expected a comm from tg_comm_create", fn);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (!t) return tgi_comm_fail(c, TG_ERR_INVALID_ARGUMENT, "%s: argument 'tape' is NULL", fn);
  if (t->rt != c->rt)
    return tgi_comm_fail(c, TG_ERR_INVALID_ARGUMENT,
                         "%s: argument 'tape' belongs to another runtime than the comm's (one runtime per rank)", fn);
  if (c->dead)
    return tgi_comm_fail(c, TG_ERR_STATE, "%s: the comm failed or was aborted earlier; destroy it (%s)", fn, c->msg);
  if (t->status != TG_OK)
    return tgi_comm_fail(c, TG_ERR_STATE, "%s: the tape holds an error from an earlier op call: %s", fn, t->msg);
  return TG_OK;
}

tg_status tg_comm_attach(tg_comm *c, tg_tape *t) {
  const char *fn = "tg_comm_attach";
  tg_status s = begin(c, t, fn);
  if (s) return s;
  TGI_GUARD(t->rt, fn, TG_ERR_STATE);
  if (c->tape && c->tape != t)
    return tgi_comm_fail(c, TG_ERR_STATE, "%s: the comm is attached to another tape; tg_comm_detach it first", fn);
  if (c->plan.next > 0)
    return tgi_comm_fail(c, TG_ERR_STATE,
                         "%s: buckets of a backward are in flight; call tg_comm_finish_gradients first", fn);
  if ((s = plan_make(c, t, fn))) return s;
  if (!c->tape) tgi_tape_retain(t);
  c->tape = t;
  t->grad_hook = on_grad_ready;
  t->grad_hook_user = c;
  return TG_OK;
}

tg_status tg_comm_detach(tg_comm *c, tg_tape *t) {
  const char *fn = "tg_comm_detach";
  if (!c) {
    tgi_set_last_error("%s: argument 'comm' is NULL; expected a comm from tg_comm_create", fn);
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (!t || t != c->tape)
    return tgi_comm_fail(c, TG_ERR_INVALID_ARGUMENT, "%s: argument 'tape' is %s", fn,
                         t ? "not the tape the comm is attached to" : "NULL");
  if (c->plan.next > 0)
    return tgi_comm_fail(c, TG_ERR_STATE,
                         "%s: buckets of a backward are in flight; call tg_comm_finish_gradients first", fn);
  detach(c);
  plan_rewind(&c->plan);
  return TG_OK;
}

/* FNV-1a over what every rank must agree on before a broadcast: count, dtypes and shapes. */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

tg_status tg_comm_broadcast_parameters(tg_comm *c, tg_tape *t) {
  const char *fn = "tg_comm_broadcast_parameters";
  tg_status s = begin(c, t, fn);
  if (s) return s;
  TGI_GUARD(t->rt, fn, TG_ERR_STATE);
  if (c->plan.next > 0)
    return tgi_comm_fail(c, TG_ERR_STATE,
                         "%s: buckets of a backward are in flight; call tg_comm_finish_gradients first", fn);
  uint32_t n = 0;
  for (uint32_t i = 0; i < t->nvals; i++)
    n += tgi_slot(t, i)->kind == TGI_PARAM;
  void **ptrs = tgi_calloc(n ? n : 1, sizeof *ptrs);
  size_t *bytes = tgi_calloc(n ? n : 1, sizeof *bytes);
  if (!ptrs || !bytes) {
    free(ptrs);
    free(bytes);
    return tgi_comm_fail(c, TG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  uint64_t sig = fnv(0xcbf29ce484222325ull, &n, sizeof n);
  uint32_t k = 0;
  for (uint32_t i = 0; i < t->nvals && !s; i++) {
    tgi_value *v = tgi_slot(t, i);
    if (v->kind != TGI_PARAM) continue;
    int64_t d[2 + TG_MAX_DIMS] = {v->dtype, v->ndim};
    for (int j = 0; j < v->ndim && j < TG_MAX_DIMS; j++)
      d[2 + j] = v->shape[j];
    sig = fnv(sig, d, sizeof d);
    ptrs[k] = tgi_read_d(t, v); /* the device copy current (uploads a host one) */
    if (!ptrs[k]) {
      s = t->status ? t->status : TG_ERR_INTERNAL;
      t->status = TG_OK;
      tgi_comm_fail(c, s, "%s: parameter %u: %s", fn, k, t->msg);
      break;
    }
    bytes[k++] = v->bytes;
  }
  if (!s) s = tgi_nccl_broadcast(c, t, sig, ptrs, bytes, n);
  if (!s) /* the device copies now hold rank 0's values */
    for (uint32_t i = 0; i < t->nvals; i++) {
      tgi_value *v = tgi_slot(t, i);
      if (v->kind != TGI_PARAM) continue;
      v->data.valid = TGI_ON_DEV;
      tgi_value_bump_version(v);
    }
  free(ptrs);
  free(bytes);
  return s;
}

tg_status tg_comm_finish_gradients(tg_comm *c, tg_tape *t) {
  const char *fn = "tg_comm_finish_gradients";
  tg_status s = begin(c, t, fn);
  if (s) return s;
  TGI_GUARD(t->rt, fn, TG_ERR_STATE);
  if (c->hook_status) { /* reported once; the step's buckets are then out of step across ranks */
    s = c->hook_status;
    c->hook_status = TG_OK;
    c->dead = true;
    char msg[TGI_MSG_CAP];
    memcpy(msg, c->msg, sizeof msg);
    return tgi_comm_fail(c, s, "%s: during backward: %s", fn, msg);
  }
  if (c->tape && c->tape != t) return tgi_comm_fail(c, TG_ERR_STATE, "%s: the comm is attached to another tape", fn);
  if (!c->tape && (s = plan_make(c, t, fn))) return s;
  tgi_comm_plan *p = &c->plan;
  for (; p->next < p->nbuckets; p->next++)
    if ((s = launch(c, t, p->next, true))) {
      c->dead = true; /* this rank's collectives are now out of step with the others' */
      return s;
    }
  s = tgi_nccl_join(c, t);
  plan_rewind(p);
  return s;
}

/* ------------------------------------------------------------ without NCCL */
#ifndef TIGA_HAVE_NCCL
tg_status tgi_nccl_id_create(unsigned char *bytes, size_t nbytes, char *msg) {
  (void)bytes, (void)nbytes;
  snprintf(msg, TGI_MSG_CAP, "%s", NO_NCCL);
  return TG_ERR_UNSUPPORTED;
}
tg_status tgi_nccl_open(tg_comm *c, const unsigned char *id, size_t id_bytes) {
  (void)id, (void)id_bytes;
  return tgi_comm_fail(c, TG_ERR_UNSUPPORTED, "%s", NO_NCCL);
}
void tgi_nccl_close(tg_comm *c) { (void)c; }
tg_status tgi_nccl_broadcast(tg_comm *c, tg_tape *t, uint64_t signature, void *const *ptrs, const size_t *bytes,
                             uint32_t n) {
  (void)t, (void)signature, (void)ptrs, (void)bytes, (void)n;
  return tgi_comm_fail(c, TG_ERR_UNSUPPORTED, "%s", NO_NCCL);
}
tg_status tgi_nccl_allreduce(tg_comm *c, tg_tape *t, void *const *ptrs, const int64_t *numel, const tg_dtype *dtypes,
                             uint32_t n) {
  (void)t, (void)ptrs, (void)numel, (void)dtypes, (void)n;
  return tgi_comm_fail(c, TG_ERR_UNSUPPORTED, "%s", NO_NCCL);
}
tg_status tgi_nccl_join(tg_comm *c, tg_tape *t) {
  (void)t;
  return tgi_comm_fail(c, TG_ERR_UNSUPPORTED, "%s", NO_NCCL);
}
#endif
