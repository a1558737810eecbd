/* Optimizer steps (SGD, Adam, AdamW) and global gradient-norm clipping over the tape's parameters.
 *
 * Each call visits the parameters that hold a gradient and updates them where the gradient
 * lives: on the device (CUDA kernels on device buffers; the value and state are moved there if
 * needed) or on the host (host kernels). The formulas are PyTorch's (see tiga.h and
 * host/optim.h). A call runs in two passes so that a failure leaves every parameter untouched:
 * pass 1 places value, gradient and state on the compute side (the only pass that allocates or
 * copies), pass 2 runs the kernels. Failures are returned, never left sticky on the tape.
 * Before pass 1 the gradients are checked for NaN / inf (found-inf): a step with a non-finite
 * gradient changes nothing and returns TG_ERR_NONFINITE. */
#include "../host/optim.h"
#include "../tape/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TIGA_HAVE_CUDA
#include "../cuda/optim.h"
#endif

/* A parameter to update: where its gradient is and facts taken before pass 1 changes them. */
typedef struct item {
  tgi_value *v;
  size_t index;      /* position in tg_tape_parameters order (messages) */
  int side;          /* TGI_ON_HOST or TGI_ON_DEV */
  bool first;        /* no momentum buffer yet (SGD) */
  bool had_m, had_v; /* state buffers valid before this call (place_all's rollback) */
} item;

/* Turns a failure that the tape helpers made sticky into a returned one (tape stays usable). */
static tg_status unstick(tg_tape *t) {
  tg_status s = t->status ? t->status : TG_ERR_INTERNAL;
  char msg[TGI_MSG_CAP];
  memcpy(msg, t->msg, sizeof msg);
  t->status = TG_OK;
  return tgi_error(t, s, "%s", msg);
}

/* Checks shared by the three runners: a tape without a sticky error, and options when given
 * (copied over the defaults in *dst, which has dst_size bytes: tiga.h's struct_size rule). */
static tg_status begin(tg_tape *t, const char *fn, const char *opts_type, void *dst, size_t dst_size,
                       const void *opts) {
  if (!t) {
    tgi_set_last_error("%s: argument 'tape' is NULL; expected a tape from tg_tape_create", fn);
    return TG_ERR_INVALID_ARGUMENT;
  }
  tgi_finite_resolve(t);
  if (t->status != TG_OK)
    return tgi_error(t, TG_ERR_STATE, "%s: the tape holds an error from an earlier op call: %s", fn, t->msg);
  if (opts_type && !opts)
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "%s: argument 'opts' is NULL; expected %s (%s_init)", fn, opts_type,
                     opts_type);
  const char *why = opts_type ? tgi_opts_copy(dst, dst_size, opts) : NULL;
  if (why) return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "%s: argument 'opts' (%s): %s", fn, opts_type, why);
  t->cur_op = fn; /* prefix of messages from the placement helpers */
  return TG_OK;
}

/* The option `name` must satisfy lo <= x (lo_open: lo < x) and x < hi (hi_open) / x <= hi. */
static tg_status check_range(tg_tape *t, const char *fn, const char *name, double x, double lo, bool lo_open, double hi,
                             bool hi_open) {
  bool ok = isfinite(x) && (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
  if (ok) return TG_OK;
  char range[96];
  if (isinf(hi))
    snprintf(range, sizeof range, "a finite number %s %g", lo_open ? ">" : ">=", lo);
  else
    snprintf(range, sizeof range, "a number in %c%g, %g%c", lo_open ? '(' : '[', lo, hi, hi_open ? ')' : ']');
  return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "%s: option '%s' is %g; expected %s", fn, name, x, range);
}

/* Lists the parameters that hold a gradient and checks each dtype against its compute side.
 * *items is malloc'd (NULL when there is none). */
static tg_status collect(tg_tape *t, const char *fn, item **items, size_t *count) {
  *items = NULL;
  *count = 0;
  size_t n = 0;
  for (uint32_t i = 0; i < t->nvals; i++) {
    tgi_value *v = tgi_slot(t, i);
    if (v->kind == TGI_PARAM && v->grad.valid) n++;
  }
  if (!n) return TG_OK;
  item *it = tgi_malloc(n * sizeof *it);
  if (!it) return tgi_error(t, TG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  size_t k = 0, index = 0;
  for (uint32_t i = 0; i < t->nvals; i++) {
    tgi_value *v = tgi_slot(t, i);
    if (v->kind != TGI_PARAM) continue;
    size_t pos = index++;
    if (!v->grad.valid) continue;
    item *e = &it[k++];
    e->v = v;
    e->index = pos;
    e->side = (v->grad.valid & TGI_ON_DEV) ? TGI_ON_DEV : TGI_ON_HOST;
    e->first = !v->opt_m.valid;
    e->had_m = v->opt_m.valid != 0;
    e->had_v = v->opt_v.valid != 0;
    tg_dtype dt = (tg_dtype)v->dtype;
    bool ok = e->side == TGI_ON_HOST ? (dt == TG_F32 || dt == TG_F64) : (dt == TG_F32 || dt == TG_F16 || dt == TG_BF16);
#ifndef TIGA_HAVE_CUDA
    if (e->side == TGI_ON_DEV) ok = false;
#endif
    if (!ok) {
      bool host = e->side == TGI_ON_HOST;
      free(it);
      return tgi_error(
          t, TG_ERR_DTYPE, "%s: parameter %zu (id %lld) is %s with its gradient on the %s; the %s takes %s", fn, pos,
          (long long)tgi_id_of(t, v), tg_dtype_name(dt), host ? "host" : "device", host ? "host update" : "CUDA update",
          host ? "f32 or f64" : "f32, f16 or bf16 (f64 is host-only)");
    }
  }
  *items = it;
  *count = n;
  return TG_OK;
}

/* Value (current, updated in place), gradient and `nstate` state buffers of e on its side.
 * NULL in p on failure (sticky until unstick). */
typedef struct bufs {
  void *p, *g, *m, *v;
} bufs;

static bufs place(tg_tape *t, const item *e, int nstate) {
  bufs b = {NULL, NULL, NULL, NULL};
  bool dev = e->side == TGI_ON_DEV;
  void *p = dev ? tgi_read_d(t, e->v) : tgi_read_h(t, e->v);
  void *g = p ? (dev ? tgi_grad_d(t, e->v) : tgi_grad_h(t, e->v)) : NULL;
  void *m = g && nstate > 0 ? (dev ? tgi_state_d(t, e->v, 0) : tgi_state_h(t, e->v, 0)) : NULL;
  void *v = m && nstate > 1 ? (dev ? tgi_state_d(t, e->v, 1) : tgi_state_h(t, e->v, 1)) : NULL;
  if (!g || (nstate > 0 && !m) || (nstate > 1 && !v)) return b;
  b.p = p, b.g = g, b.m = m, b.v = v;
  return b;
}

#ifdef TIGA_HAVE_CUDA
/* Device parameters are handed to the multi-tensor kernels grouped by dtype: group d (MT_DTYPE[d])
 * holds n[d] entries of the caller's table starting at off[d]; mt_slot hands out the next slot of
 * a value's group. collect() admits no other device dtype. */
static const tg_dtype MT_DTYPE[3] = {TG_F32, TG_BF16, TG_F16};
typedef struct mt_groups {
  size_t n[3], off[3], fill[3];
} mt_groups;
static int mt_group(const tgi_value *v) { return v->dtype == TG_F32 ? 0 : v->dtype == TG_BF16 ? 1 : 2; }
static void mt_layout(const item *it, size_t n, mt_groups *g) {
  memset(g, 0, sizeof *g);
  for (size_t k = 0; k < n; k++)
    if (it[k].side == TGI_ON_DEV) g->n[mt_group(it[k].v)]++;
  g->off[1] = g->n[0], g->off[2] = g->n[0] + g->n[1];
  memcpy(g->fill, g->off, sizeof g->fill);
}
static size_t mt_slot(mt_groups *g, const tgi_value *v) { return g->fill[mt_group(v)]++; }
#endif

/* Pass 1 over all items; TG_OK or a returned error with nothing updated. State buffers that pass 1
 * created (zero-filled) are made invalid again on failure, so the next step still sees "no state
 * yet" (SGD's first momentum step) exactly as before the failed call. */
static tg_status place_all(tg_tape *t, const item *it, size_t n, int nstate) {
  for (size_t k = 0; k < n; k++) {
    if (place(t, &it[k], nstate).p) continue;
    for (size_t j = 0; j <= k; j++) {
      if (!it[j].had_m) it[j].v->opt_m.valid = 0;
      if (!it[j].had_v) it[j].v->opt_v.valid = 0;
    }
    return unstick(t);
  }
  return TG_OK;
}

/* Step counts an update can increment (a checkpoint's count near INT64_MAX must not overflow). */
static tg_status check_steps(tg_tape *t, const char *fn, const item *it, size_t n) {
  for (size_t k = 0; k < n; k++)
    if (it[k].v->opt_step < 0 || it[k].v->opt_step == INT64_MAX)
      return tgi_error(t, TG_ERR_STATE, "%s: parameter %zu (id %lld) has step count %lld; no further step is possible",
                       fn, it[k].index, (long long)tgi_id_of(t, it[k].v), (long long)it[k].v->opt_step);
  return TG_OK;
}

/* Found-inf: TG_OK when every gradient of the items is finite; TG_ERR_NONFINITE naming the first
 * parameter whose gradient is not; another status when the check itself failed. Host gradients are
 * scanned; device gradients are checked by multi-tensor kernels into the tape's device flag, read
 * once (a per-parameter pass names the culprit only when one is found). */
static tg_status check_finite_grads(tg_tape *t, const char *fn, const item *it, size_t n) {
  const item *bad = NULL;
  bool any_dev = false;
  for (size_t k = 0; k < n && !bad; k++) {
    if (it[k].side == TGI_ON_DEV) {
      any_dev = true;
      continue;
    }
    if (tgi_host_first_nonfinite((tg_dtype)it[k].v->dtype, it[k].v->grad.h, it[k].v->numel) >= 0) bad = &it[k];
  }
#ifdef TIGA_HAVE_CUDA
  if (any_dev) {
    char msg[TGI_MSG_CAP];
    tg_status s;
    int32_t *flag = tgi_found_flag(t, &s, msg);
    if (!flag) return tgi_error(t, s, "%s: %s", fn, msg);
    /* zero-filled unless the last check left it at 0 (a kernel here only ever writes 1) */
    if (!t->found_flag_zero && (s = tgi_device_zero(tgi_dev(t), flag, sizeof(int32_t), msg)))
      return tgi_error(t, s, "%s: %s", fn, msg);
    t->found_flag_zero = false; /* until read back as 0 below */
    cuda_mt_tensor *mt = tgi_malloc(n * sizeof *mt);
    if (!mt) return tgi_error(t, TG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    mt_groups gr;
    mt_layout(it, n, &gr);
    for (size_t k = 0; k < n; k++)
      if (it[k].side == TGI_ON_DEV)
        mt[mt_slot(&gr, it[k].v)] = (cuda_mt_tensor){NULL, it[k].v->grad.d, NULL, NULL, it[k].v->numel, 0, 0, 0, 0};
    for (int d = 0; d < 3 && !s; d++)
      if (gr.n[d] && (s = cuda_nonfinite_multi(TGI_STREAM(t), MT_DTYPE[d], mt + gr.off[d], (int)gr.n[d], flag)))
        snprintf(msg, sizeof msg, "CUDA found-inf check failed: %s", tgc_error());
    free(mt);
    int32_t found = 0;
    if (!s) s = tgi_device_d2h(tgi_dev(t), &found, flag, sizeof found, msg);
    if (s) return tgi_error(t, s, "%s: %s", fn, msg);
    t->found_flag_zero = found == 0;
    /* which one: a flag per parameter in item order, the first wins (only on this rare path) */
    for (size_t k = 0; found && k < n && !bad; k++) {
      if (it[k].side != TGI_ON_DEV) continue;
      int32_t one = 0;
      if ((s = tgi_device_zero(tgi_dev(t), flag, sizeof(int32_t), msg)) ||
          (s = tgi_device_flag_nonfinite(tgi_dev(t), (tg_dtype)it[k].v->dtype, it[k].v->grad.d, it[k].v->numel, 1, flag,
                                         msg)) ||
          (s = tgi_device_d2h(tgi_dev(t), &one, flag, sizeof one, msg)))
        return tgi_error(t, s, "%s: %s", fn, msg);
      if (one) bad = &it[k];
    }
  }
#else
  (void)any_dev;
#endif
  if (!bad) return TG_OK;
  return tgi_error(t, TG_ERR_NONFINITE,
                   "%s: parameter %zu (id %lld) has a non-finite gradient (NaN or inf); the step was skipped: no "
                   "parameter, moment or step count changed (lower the learning rate, clip gradients, or use a loss "
                   "scaler for f16)",
                   fn, bad->index, (long long)tgi_id_of(t, bad->v));
}

/* ------------------------------------------------------------ SGD */

void tg_sgd_options_init(tg_sgd_options *o) {
  if (o) *o = (tg_sgd_options){.struct_size = sizeof *o, .lr = 1e-3};
}

tg_status tg_sgd_step(tg_tape *t, const tg_sgd_options *opts) {
  const char *fn = "tg_sgd_step";
  tg_sgd_options oo;
  tg_sgd_options_init(&oo);
  const tg_sgd_options *o = &oo;
  tg_status s = begin(t, fn, "tg_sgd_options", &oo, sizeof oo, opts);
  if (s) return s;
  TGI_GUARD(t->rt, fn, TG_ERR_STATE);
  if ((s = check_range(t, fn, "lr", o->lr, 0, false, INFINITY, true)) ||
      (s = check_range(t, fn, "momentum", o->momentum, 0, false, INFINITY, true)) ||
      (s = check_range(t, fn, "dampening", o->dampening, -INFINITY, false, INFINITY, true)) ||
      (s = check_range(t, fn, "weight_decay", o->weight_decay, 0, false, INFINITY, true)))
    return s;
  if (o->nesterov && (o->momentum <= 0 || o->dampening != 0))
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT,
                     "%s: option 'nesterov' is set with momentum %g and dampening %g; Nesterov momentum needs "
                     "momentum > 0 and dampening 0",
                     fn, o->momentum, o->dampening);
  item *it;
  size_t n;
  if ((s = collect(t, fn, &it, &n))) return s;
  int nstate = o->momentum != 0 ? 1 : 0; /* PyTorch keeps no buffer without momentum */
  if ((s = check_steps(t, fn, it, n)) || (s = check_finite_grads(t, fn, it, n)) || (s = place_all(t, it, n, nstate)))
    goto done;
  for (size_t k = 0; k < n; k++) {
    item *e = &it[k];
    bufs b = place(t, e, nstate); /* already placed: no allocation or copy can fail here */
    if (!b.p) {
      s = unstick(t);
      goto done;
    }
    double wd = (e->v->flags & TG_NO_WEIGHT_DECAY) ? 0.0 : o->weight_decay;
    if (e->side == TGI_ON_HOST) {
      host_sgd_step((tg_dtype)e->v->dtype, b.p, b.g, b.m, e->v->numel, o->lr, o->momentum, o->dampening, wd,
                    o->nesterov, e->first);
    } else {
#ifdef TIGA_HAVE_CUDA
      tg_status ks = cuda_sgd_step(TGI_STREAM(t), (tg_dtype)e->v->dtype, b.p, b.g, b.m, e->v->numel, o->lr, o->momentum,
                                   o->dampening, wd, o->nesterov, e->first);
      if (ks) {
        s = tgi_error(t, ks, "%s: CUDA update of parameter %zu failed: %s", fn, e->index, tgc_error());
        goto done;
      }
#endif
    }
    e->v->data.valid = (uint8_t)e->side; /* updated in place on that side only */
    tgi_value_bump_version(e->v);
    e->v->opt_step++;
  }
done:
  free(it);
  return s;
}

/* ------------------------------------------------------------ AdamW */

void tg_adamw_options_init(tg_adamw_options *o) {
  if (o) *o = (tg_adamw_options){sizeof *o, 1e-3, 0.9, 0.999, 1e-8, 0.01};
}

void tg_adam_options_init(tg_adam_options *o) {
  if (o) *o = (tg_adam_options){sizeof *o, 1e-3, 0.9, 0.999, 1e-8, 0};
}

/* Adam and AdamW share the update; they differ in where weight decay enters (host/optim.h):
 * AdamW decays the parameter (decoupled), Adam adds wd * p to the gradient (coupled L2). */
static tg_status adam_update(tg_tape *t, const char *fn, const tg_adamw_options *o, bool coupled) {
  tg_status s;
  if ((s = check_range(t, fn, "lr", o->lr, 0, false, INFINITY, true)) ||
      (s = check_range(t, fn, "beta1", o->beta1, 0, false, 1, true)) ||
      (s = check_range(t, fn, "beta2", o->beta2, 0, false, 1, true)) ||
      (s = check_range(t, fn, "eps", o->eps, 0, true, INFINITY, true)) ||
      (s = check_range(t, fn, "weight_decay", o->weight_decay, 0, false, INFINITY, true)))
    return s;
  item *it;
  size_t n;
  if ((s = collect(t, fn, &it, &n))) return s;
#ifdef TIGA_HAVE_CUDA
  /* device parameters: gathered per dtype and updated by multi-tensor launches (the table is
   * allocated before pass 1, which must be the last thing that can fail) */
  mt_groups gr;
  mt_layout(it, n, &gr);
  cuda_mt_tensor *mt = tgi_malloc((n ? n : 1) * sizeof *mt);
  if (!mt) {
    free(it);
    return tgi_error(t, TG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
#endif
  if ((s = check_steps(t, fn, it, n)) || (s = check_finite_grads(t, fn, it, n)) || (s = place_all(t, it, n, 2)))
    goto done;
  for (size_t k = 0; k < n; k++) {
    item *e = &it[k];
    bufs b = place(t, e, 2); /* already placed: no allocation or copy can fail here */
    if (!b.p) {
      s = unstick(t);
      break;
    }
    double wd_all = (e->v->flags & TG_NO_WEIGHT_DECAY) ? 0.0 : o->weight_decay;
    double wd = coupled ? 0.0 : wd_all, l2 = coupled ? wd_all : 0.0;
    double step = (double)(e->v->opt_step + 1);
    double bc1 = 1 - pow(o->beta1, step), bc2 = 1 - pow(o->beta2, step);
    if (e->side == TGI_ON_HOST) {
      host_adamw_step((tg_dtype)e->v->dtype, b.p, b.g, b.m, b.v, e->v->numel, o->lr, o->beta1, o->beta2, o->eps, wd, l2,
                      bc1, bc2);
    }
#ifdef TIGA_HAVE_CUDA
    else {
      /* scalars folded in double on the host, as PyTorch does with its python floats */
      mt[mt_slot(&gr, e->v)] =
          (cuda_mt_tensor){b.p, b.g, b.m, b.v, e->v->numel, 1 - o->lr * wd, o->lr / bc1, sqrt(bc2), l2};
    }
#endif
    e->v->data.valid = (uint8_t)e->side;
    tgi_value_bump_version(e->v);
    e->v->opt_step++;
  }
#ifdef TIGA_HAVE_CUDA
  for (int d = 0; d < 3 && !s; d++) {
    if (!gr.n[d]) continue;
    tg_status ks =
        cuda_adamw_multi(TGI_STREAM(t), MT_DTYPE[d], mt + gr.off[d], (int)gr.n[d], o->beta1, o->beta2, o->eps);
    if (ks)
      s = tgi_error(t, ks, "%s: CUDA update of the %s parameters failed: %s", fn, tg_dtype_name(MT_DTYPE[d]),
                    tgc_error());
  }
#endif
done:
#ifdef TIGA_HAVE_CUDA
  free(mt);
#endif
  free(it);
  return s;
}

tg_status tg_adamw_step(tg_tape *t, const tg_adamw_options *opts) {
  const char *fn = "tg_adamw_step";
  tg_adamw_options o;
  tg_adamw_options_init(&o);
  tg_status s = begin(t, fn, "tg_adamw_options", &o, sizeof o, opts);
  if (s) return s;
  TGI_GUARD(t->rt, fn, TG_ERR_STATE);
  return adam_update(t, fn, &o, false);
}

tg_status tg_adam_step(tg_tape *t, const tg_adam_options *opts) {
  const char *fn = "tg_adam_step";
  tg_adam_options a;
  tg_adam_options_init(&a);
  tg_status s = begin(t, fn, "tg_adam_options", &a, sizeof a, opts);
  if (s) return s;
  TGI_GUARD(t->rt, fn, TG_ERR_STATE);
  tg_adamw_options o = {sizeof o, a.lr, a.beta1, a.beta2, a.eps, a.weight_decay};
  return adam_update(t, fn, &o, true);
}

/* ------------------------------------------------------------ clip_grad_norm */

/* total = sqrt(sum over parameters of sum g^2) (double accumulation on each side); when
 * max_norm / (total + 1e-6) < 1 every gradient is multiplied by it (PyTorch's clip_grad_norm_,
 * whose clamped coefficient is 1 otherwise). A non-finite total leaves the gradients as they are
 * (the caller sees it in *total_norm and can skip the step). */
#ifdef TIGA_HAVE_CUDA
static bool any_host(const item *it, size_t n) {
  for (size_t k = 0; k < n; k++)
    if (it[k].side == TGI_ON_HOST) return true;
  return false;
}
#endif

void tg_clip_options_init(tg_clip_options *o) {
  if (o) *o = (tg_clip_options){.struct_size = sizeof *o, .max_norm = 1.0, .error_if_nonfinite = 0};
}

/* tg_clip_grad_norm's body; error_if_nonfinite: a non-finite norm is TG_ERR_NONFINITE (the norm is
 * then always brought to the host). */
static tg_status clip(tg_tape *t, const char *fn, double max_norm, bool error_if_nonfinite, double *total_norm) {
  tg_status s;
  if (!(max_norm > 0))
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "%s: argument 'max_norm' is %g; expected a number > 0", fn, max_norm);
  item *it;
  size_t n;
#ifdef TIGA_HAVE_CUDA
  cuda_mt_tensor *mt = NULL;
#endif
  if ((s = collect(t, fn, &it, &n))) return s;
  /* pass 1: make each gradient current on exactly its side (no allocation: it is valid there) */
  for (size_t k = 0; k < n; k++) {
    void *g = it[k].side == TGI_ON_DEV ? tgi_grad_d(t, it[k].v) : tgi_grad_h(t, it[k].v);
    if (!g) {
      s = unstick(t);
      goto done;
    }
  }
  double host_sum = 0, dev_sum = 0;
  bool any_dev = false;
  for (size_t k = 0; k < n; k++) {
    if (it[k].side == TGI_ON_HOST)
      host_sum += host_sumsq((tg_dtype)it[k].v->dtype, it[k].v->grad.h, it[k].v->numel);
    else
      any_dev = true;
  }
#ifdef TIGA_HAVE_CUDA
  if (any_dev) {
    char msg[TGI_MSG_CAP];
    /* the device gradients grouped by dtype for the multi-tensor kernels */
    mt_groups gr;
    mt_layout(it, n, &gr);
    mt = tgi_malloc(n * sizeof *mt);
    if (!mt) {
      s = tgi_error(t, TG_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
      goto done;
    }
    for (size_t k = 0; k < n; k++)
      if (it[k].side == TGI_ON_DEV)
        mt[mt_slot(&gr, it[k].v)] = (cuda_mt_tensor){NULL, it[k].v->grad.d, NULL, NULL, it[k].v->numel, 0, 0, 0, 0};
    int64_t parts = 0;
    for (int d = 0; d < 3; d++) {
      int64_t b = cuda_mt_blocks(mt + gr.off[d], (int)gr.n[d]);
      if (b > parts) parts = b;
    }
    double *acc = NULL; /* acc[0]: the sum; acc[1..]: partial sums */
    s = tgi_device_alloc(tgi_dev(t), (size_t)(1 + parts) * sizeof(double), (void **)&acc, msg);
    if (s) {
      s = tgi_error(t, s, "%s: %s", fn, msg);
      goto done;
    }
    s = tgi_device_zero(tgi_dev(t), acc, sizeof(double), msg);
    for (int d = 0; d < 3 && !s; d++) {
      if (!gr.n[d]) continue;
      const cuda_mt_tensor *g = mt + gr.off[d];
      s = cuda_sumsq_multi(TGI_STREAM(t), MT_DTYPE[d], g, (int)gr.n[d], acc + 1, acc);
      if (s)
        snprintf(msg, sizeof msg, "CUDA norm of the %s gradients failed: %s", tg_dtype_name(MT_DTYPE[d]), tgc_error());
    }
    if (!s && !total_norm && !error_if_nonfinite && host_sum == 0 && !any_host(it, n)) {
      /* every gradient is on the device and nobody asked for the norm: decide and scale on
       * the device, no host round trip (the training loop keeps running ahead of the GPU) */
      for (int d = 0; d < 3 && !s; d++) {
        if (!gr.n[d]) continue;
        s = cuda_clip_scale_multi(TGI_STREAM(t), MT_DTYPE[d], mt + gr.off[d], (int)gr.n[d], acc, max_norm);
        if (s)
          snprintf(msg, sizeof msg, "CUDA clipping of the %s gradients failed: %s", tg_dtype_name(MT_DTYPE[d]),
                   tgc_error());
      }
      tgi_device_free(tgi_dev(t), acc);
      if (s) s = tgi_error(t, s, "%s: %s", fn, msg);
      goto done;
    }
    if (!s) s = tgi_device_d2h(tgi_dev(t), &dev_sum, acc, sizeof(double), msg);
    tgi_device_free(tgi_dev(t), acc);
    if (s) {
      s = tgi_error(t, s, "%s: %s", fn, msg);
      goto done;
    }
  }
#else
  (void)any_dev;
#endif
  double total = sqrt(host_sum + dev_sum);
  double coef = max_norm / (total + 1e-6);
  if (total_norm) *total_norm = total;
  if (error_if_nonfinite && !isfinite(total)) {
    s = tgi_error(t, TG_ERR_NONFINITE,
                  "%s: the total norm of the gradients is %g (a gradient holds NaN or inf); no gradient was changed "
                  "(error_if_nonfinite)",
                  fn, total);
    goto done;
  }
  if (isfinite(total) && coef < 1) {
    for (size_t k = 0; k < n; k++) {
      tgi_value *v = it[k].v;
      if (it[k].side == TGI_ON_HOST) {
        host_scale_inplace((tg_dtype)v->dtype, v->grad.h, v->numel, coef);
      } else {
#ifdef TIGA_HAVE_CUDA
        tg_status ks = cuda_scale_inplace(TGI_STREAM(t), (tg_dtype)v->dtype, v->grad.d, v->numel, coef);
        if (ks) {
          s = tgi_error(t, ks, "%s: CUDA scaling of parameter %zu failed: %s", fn, it[k].index, tgc_error());
          goto done;
        }
#endif
      }
    }
  }
done:
#ifdef TIGA_HAVE_CUDA
  free(mt);
#endif
  free(it);
  return s;
}

tg_status tg_clip_grad_norm(tg_tape *t, double max_norm, double *total_norm) {
  const char *fn = "tg_clip_grad_norm";
  tg_status s = begin(t, fn, NULL, NULL, 0, NULL);
  if (s) return s;
  TGI_GUARD(t->rt, fn, TG_ERR_STATE);
  return clip(t, fn, max_norm, false, total_norm);
}

tg_status tg_clip_grad_norm_with(tg_tape *t, const tg_clip_options *opts, double *total_norm) {
  const char *fn = "tg_clip_grad_norm_with";
  tg_clip_options o;
  tg_clip_options_init(&o);
  tg_status s = begin(t, fn, "tg_clip_options", &o, sizeof o, opts);
  if (s) return s;
  TGI_GUARD(t->rt, fn, TG_ERR_STATE);
  return clip(t, fn, o.max_norm, o.error_if_nonfinite != 0, total_norm);
}
