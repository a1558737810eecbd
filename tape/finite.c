/* Anomaly mode (tg_tape_set_check_finite): every recorded node's outputs and, in backward, the
 * gradients each node computed are checked for NaN / inf on the side that computed them. The host
 * checks at once. Device buffers are queued (t->nf_pend) and checked by one multi-tensor launch per
 * batch (cuda_flag_nonfinite_multi) that raises a device flag, a max over an encoding of the node
 * index; the flag is read once: at the end of a backward sweep, and for the forward at the next
 * status check (tg_tape_status, tg_tape_error, backward, optimizer steps). No per-node launch and no
 * per-node synchronisation. The first non-finite value becomes a sticky TG_ERR_NONFINITE naming the
 * node, its op and its explain line.
 *
 * When a queued buffer is checked. Forward outputs never change after their node ran, so any time
 * before tg_tape_reset gives the same answer. A gradient may still be accumulated into by later
 * nodes of the sweep, while the check must see it as the node that computed it left it (so the
 * message names that node, not a later one): the queue is launched before the next node the sweep
 * runs reads or accumulates into a queued gradient (its inputs), and at the end of the sweep.
 *
 * Where the checks run. On a device runtime the launches go to the runtime's check stream
 * (rt->nf_side), each after an event recorded on the main stream when its buffers were written, so
 * the checks (memory-bound) run beside the compute (GEMMs and attention leave bandwidth free). The
 * main stream waits for the check stream (tgi_finite_join, a device-side wait) only where a buffer
 * still being checked could change: before the next node of a sweep accumulates into a gradient
 * whose check was launched and not waited for (the same points where the queue is launched), before
 * a flag is read or zeroed, and before step memory is reused or freed (tg_tape_reset, tape
 * release). In backward a node whose gradient more nodes will add into launches the queue at once,
 * so that its check overlaps the nodes up to the next one that adds into it. Without the check
 * stream (the default; host builds; see tape/runtime.c for why the stream is opt-in,
 * TIGA_CHECK_FINITE_OVERLAP=1) everything runs in order on the main stream. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TIGA_HAVE_CUDA
#include "../cuda/finite.h"
#endif

/* NaN / inf by the exponent bits, so no float compare can be fooled by -ffast-math. */
int64_t tgi_host_first_nonfinite(tg_dtype dt, const void *p, int64_t n) {
  switch (dt) {
  case TG_F32:
    for (int64_t i = 0; i < n; i++) {
      uint32_t u;
      memcpy(&u, (const char *)p + 4 * i, 4);
      if ((u & 0x7f800000u) == 0x7f800000u) return i;
    }
    return -1;
  case TG_F64:
    for (int64_t i = 0; i < n; i++) {
      uint64_t u;
      memcpy(&u, (const char *)p + 8 * i, 8);
      if ((u & 0x7ff0000000000000ull) == 0x7ff0000000000000ull) return i;
    }
    return -1;
  case TG_F16:
  case TG_BF16: {
    uint16_t mask = dt == TG_F16 ? 0x7c00u : 0x7f80u;
    for (int64_t i = 0; i < n; i++)
      if ((((const uint16_t *)p)[i] & mask) == mask) return i;
    return -1;
  }
  default: return -1;
  }
}

int32_t *tgi_dev_flags(tg_tape *t, tg_status *st, char *msg) {
  *st = TG_OK;
  if (t->dev_flags) return t->dev_flags;
  void *p = NULL;
  *st = tgi_device_alloc(t->rt->dev, 4 * sizeof(int32_t), &p, msg);
  if (!*st) *st = tgi_device_zero(t->rt->dev, p, 4 * sizeof(int32_t), msg);
  if (*st) {
    if (p) tgi_device_free(t->rt->dev, p);
    return NULL;
  }
  return t->dev_flags = p;
}

/* The sticky TG_ERR_NONFINITE for node i (value slot `slot`, or UINT32_MAX when the device found it). */
static void nonfinite(tg_tape *t, uint32_t i, bool grad, uint32_t slot) {
  if (t->status) return;
  char line[320], which[64] = "";
  tgi_explain_node(t, i, line, sizeof line);
  if (slot != UINT32_MAX) snprintf(which, sizeof which, " v%u", slot);
  t->status = TG_ERR_NONFINITE;
  snprintf(t->msg, sizeof t->msg, "check_finite: node #%u (%s, %s) %s a non-finite value (NaN or inf)%s%s; node: %s", i,
           t->nodes[i].cap->op, tg_provider_name(t->nodes[i].cap->provider), grad ? "computed" : "produced",
           grad ? " in the gradient of its input" : " in its output", which, line);
  tgi_set_last_error("%s", t->msg);
}

static void device_failed(tg_tape *t, tg_status s, const char *msg) {
  if (t->status) return;
  t->status = s;
  snprintf(t->msg, sizeof t->msg, "check_finite: %s", msg);
  tgi_set_last_error("%s", t->msg);
}

void tgi_finite_join(tg_tape *t) {
  if (!t->nf_side_busy) return;
  t->nf_side_busy = false;
  t->nf_nfly = 0;
#ifdef TIGA_HAVE_CUDA
  if (cuda_finite_side_join(t->rt->nf_side, TGI_STREAM(t))) device_failed(t, TG_ERR_DEVICE, tgc_error());
#endif
}

/* Reads flag k (a wait for the device); 0 when unreadable (the error is made sticky). */
static int32_t read_flag(tg_tape *t, int k) {
  int32_t v = 0;
  char msg[TGI_MSG_CAP];
  tgi_finite_join(t);
  tg_status s = tgi_device_d2h(t->rt->dev, &v, t->dev_flags + k, sizeof v, msg);
  if (s) {
    device_failed(t, s, msg);
    return 0;
  }
  return v;
}

static void read_forward_flag(tg_tape *t);

/* Bytes of queued device checks after which the queue is launched (besides every TGI_NF_PENDING
 * entries): environment TIGA_CHECK_FINITE_BATCH_BYTES, read once; 0 = no byte limit; unset: 32 MiB
 * with the check stream (its checks trail the compute closely, reading buffers while they are
 * still in L2, and a flag read waits for a short tail), no limit without it. */
static uint64_t batch_bytes(const tg_tape *t) {
  static uint64_t cached = UINT64_MAX; /* UINT64_MAX: not read yet; UINT64_MAX - 1: unset */
  uint64_t v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (v == UINT64_MAX) {
    const char *e = getenv("TIGA_CHECK_FINITE_BATCH_BYTES");
    v = e ? strtoull(e, NULL, 10) : UINT64_MAX - 1;
    if (v == UINT64_MAX) v -= 2;
    __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
  }
  if (v != UINT64_MAX - 1) return v;
  return t->rt->nf_side ? (uint64_t)32 << 20 : 0;
}

/* Launches the queued device checks; false when that failed (the error is made sticky). */
static bool flush(tg_tape *t) {
  uint32_t n = t->nf_npend;
  if (!n) return true;
  t->nf_npend = 0;
  t->nf_pend_bytes = 0;
  char msg[TGI_MSG_CAP];
  tg_status s;
  int32_t *f = tgi_dev_flags(t, &s, msg);
  if (f) {
#ifdef TIGA_HAVE_CUDA
    cuda_finite_entry e[TGI_NF_PENDING];
    for (uint32_t k = 0; k < n; k++) {
      const tgi_nf_entry *q = &t->nf_pend[k];
      e[k] = (cuda_finite_entry){q->p, q->n, q->tag, (int8_t)q->dtype, (int8_t)q->flag};
    }
    if (t->rt->nf_side) {
      s = cuda_finite_side_launch(t->rt->nf_side, TGI_STREAM(t), e, (int)n, f);
      t->nf_side_busy = true;
      for (uint32_t k = 0; k < n; k++) { /* the gradients in flight, for the sweep's hazards */
        if (t->nf_pend[k].flag != 1) continue;
        if (t->nf_nfly < TGI_NF_FLY) t->nf_fly[t->nf_nfly] = t->nf_pend[k];
        if (t->nf_nfly <= TGI_NF_FLY) t->nf_nfly++;
      }
    } else {
      s = cuda_flag_nonfinite_multi(TGI_STREAM(t), e, (int)n, f);
    }
    if (s) snprintf(msg, sizeof msg, "%s", tgc_error());
#else
    s = TG_ERR_NO_DEVICE;
    snprintf(msg, sizeof msg, "device checks queued in a build without CUDA");
#endif
  }
  if (s) {
    device_failed(t, s, msg);
    return false;
  }
  return true;
}

/* Queues the check of n elements of dtype at device pointer p (value slot), raising flag k with tag.
 * A buffer already queued for the same flag keeps the larger tag (the flag's max is the same). */
static bool enqueue(tg_tape *t, const void *p, int64_t n, tg_dtype dt, uint32_t slot, int k, int32_t tag) {
  if (n <= 0) return true;
  for (uint32_t q = 0; q < t->nf_npend; q++) {
    tgi_nf_entry *e = &t->nf_pend[q];
    if (e->p == p && e->n == n && e->dtype == (uint8_t)dt && e->flag == (uint8_t)k) {
      if (tag > e->tag) e->tag = tag;
      return true;
    }
  }
  if (t->nf_npend == TGI_NF_PENDING && !flush(t)) return false;
  t->nf_pend[t->nf_npend++] = (tgi_nf_entry){p, n, slot, tag, (uint8_t)dt, (uint8_t)k};
  t->nf_pend_bytes += (uint64_t)n * tg_dtype_size(dt);
  uint64_t limit = batch_bytes(t);
  return !limit || t->nf_pend_bytes < limit || flush(t);
}

/* In-kernel checks (cuda/finite.cuh): while node `tag` of the tape runs on a device runtime, the
 * kernels that support it raise dev_flags[k] with tag themselves as they store its outputs (k = 0)
 * or its input gradients (k = 1), and name the buffers they checked in full; check_buf then reads
 * those buffers no more. The flag is armed for this tape's stream only, from an op's start
 * (tgi_op_begin) or a node's backward to its end (tgi_done, tgi_fail, tgi_finite_backward); a flag
 * that cannot be allocated leaves it unarmed (the check kernels read everything). */
void tgi_finite_arm(tg_tape *t, int k, int32_t tag) {
#ifdef TIGA_HAVE_CUDA
  if (!t->check_finite || !t->rt->dev || t->status) return;
  tg_status s;
  char msg[TGI_MSG_CAP];
  int32_t *f = tgi_dev_flags(t, &s, msg);
  if (f) cuda_nf_arm(TGI_STREAM(t), f + k, tag);
#else
  (void)t, (void)k, (void)tag;
#endif
}

void tgi_finite_disarm(void) {
#ifdef TIGA_HAVE_CUDA
  cuda_nf_disarm();
#endif
}

/* Whether a kernel of the armed node checked all of buffer b (device) of v with tag. */
static bool covered(const tgi_value *v, const tgi_buf *b, int32_t tag) {
#ifdef TIGA_HAVE_CUDA
  return b->d && cuda_nf_covered(b->d, v->numel, tag);
#else
  (void)v, (void)b, (void)tag;
  return false;
#endif
}

/* Checks buffer b of value v (node i) where it is current: host now, device queued for flag k with
 * tag, or nothing when the kernel that wrote it checked it (cover: its writes are known to be the
 * last to that buffer in this node). */
static bool check_buf(tg_tape *t, uint32_t i, tgi_value *v, const tgi_buf *b, int k, int32_t tag, bool grad,
                      bool cover) {
  if (v->dtype != TG_F32 && v->dtype != TG_F64 && v->dtype != TG_F16 && v->dtype != TG_BF16) return true;
  if (b->valid & TGI_ON_HOST) {
    if (tgi_host_first_nonfinite((tg_dtype)v->dtype, b->h, v->numel) < 0) return true;
    /* an earlier node's device finding comes first */
    if (!grad) read_forward_flag(t);
    if (grad && (t->nf_bwd_dev || t->nf_fwd_dev)) tgi_finite_sweep_end(t);
    nonfinite(t, i, grad, tgi_slot_of(t, v));
    return false;
  }
  if (!(b->valid & TGI_ON_DEV)) return true;
  if (grad)
    t->nf_bwd_dev = true;
  else
    t->nf_fwd_dev = true;
  if (cover && covered(v, b, tag)) return true;
  return enqueue(t, b->d, v->numel, (tg_dtype)v->dtype, tgi_slot_of(t, v), k, tag);
}

void tgi_finite_forward(tg_tape *t) {
  for (; t->nf_checked < t->nnodes && !t->status; t->nf_checked++) {
    uint32_t i = t->nf_checked;
    const tgi_node *n = &t->nodes[i];
    for (uint32_t o = 0; o < n->n_out && o < TGI_MAX_OUT; o++) {
      tgi_value *v = tgi_slot(t, n->out[o]);
      if (!check_buf(t, i, v, &v->data, 0, INT32_MAX - (int32_t)i, false, true)) return;
    }
  }
}

/* The device's forward finding, if any, becomes the sticky error. */
static void read_forward_flag(tg_tape *t) {
  if (!t->nf_fwd_dev) return;
  t->nf_fwd_dev = false;
  if (!flush(t) || !t->dev_flags) return;
  int32_t f = read_flag(t, 0);
  if (f > 0) nonfinite(t, (uint32_t)(INT32_MAX - f), false, UINT32_MAX);
}

void tgi_finite_resolve(tg_tape *t) {
  if (t->check_finite && t->status == TG_OK) tgi_finite_forward(t); /* nodes not checked yet */
  read_forward_flag(t);
}

void tgi_finite_defer(tg_tape *t) {
  if (t->check_finite && t->status == TG_OK) tgi_finite_forward(t);
}

tg_status tgi_finite_sweep_begin(tg_tape *t) {
  t->nf_bwd_dev = false;
  if (!flush(t)) return t->status; /* anything queued before the sweep raises its own flag */
  tgi_finite_join(t);              /* ... before the flag is zeroed and the gradients restart */
  if (t->status) return t->status;
  if (!t->check_finite || !t->dev_flags) return TG_OK;
  char msg[TGI_MSG_CAP];
  tg_status s = tgi_device_zero(t->rt->dev, t->dev_flags + 1, sizeof(int32_t), msg);
  if (s) device_failed(t, s, msg);
  return s;
}

/* The next node the sweep runs after node i (UINT32_MAX: none). The sweep's rule (backward.c): a
 * node runs when an output that requires grad has a gradient; for the nodes below i that is already
 * decided when node i has run, since their outputs' consumers all come later in the tape. */
static uint32_t next_node(const tg_tape *t, uint32_t i) {
  for (uint32_t m = i; m-- > 0;) {
    const tgi_node *n = &t->nodes[m];
    for (uint32_t o = 0; o < n->n_out && o < TGI_MAX_OUT; o++) {
      const tgi_value *ov = tgi_out(t, n, o);
      if (ov->requires_grad && ov->has_grad) return m;
    }
  }
  return UINT32_MAX;
}

/* Whether entry q checks the gradient of value v (slot): by slot, or by buffer (a view hands its
 * gradient buffer over to its input, tgi_grad_pass). */
static bool checks_grad_of(const tgi_nf_entry *q, uint32_t slot, const tgi_value *v) {
  return q->flag == 1 && (q->slot == slot || ((v->grad.valid & TGI_ON_DEV) && v->grad.d == q->p));
}

/* Whether v's device gradient is the buffer of an output of node n that a view handed over
 * (tgi_grad_pass) rather than new values: the output's consumers (sweep_uses, so not the seeded
 * root) checked it after the last of them ran and nothing has written it since, so a check here
 * reads the same values again and, the tags being a max, can change no finding. */
static bool handed_over(const tg_tape *t, const tgi_node *n, const tgi_value *v) {
  if (v->grad.valid != TGI_ON_DEV || !v->grad.d) return false;
  for (uint32_t o = 0; o < n->n_out && o < TGI_MAX_OUT; o++) {
    const tgi_value *ov = tgi_out(t, n, o);
    if (ov != v && ov->sweep_uses && (ov->grad.valid & TGI_ON_DEV) && ov->grad.d == v->grad.d &&
        ov->bytes == v->bytes && ov->dtype == v->dtype)
      return true;
  }
  return false;
}

/* Whether input k of node n is also another of its inputs: its gradient then takes writes from
 * more than one part of the node's backward, and an in-kernel check of one of them proves nothing
 * about the buffer's final values. */
static bool aliased(const tgi_node *n, uint32_t k) {
  for (uint32_t m = 0; m < n->n_in; m++)
    if (m != k && n->in[m] == n->in[k]) return true;
  return false;
}

static bool finite_backward(tg_tape *t, uint32_t i);

bool tgi_finite_backward(tg_tape *t, uint32_t i) {
  bool ok = finite_backward(t, i);
  tgi_finite_disarm();
  return ok;
}

static bool finite_backward(tg_tape *t, uint32_t i) {
  const tgi_node *n = &t->nodes[i];
  bool more = false; /* a gradient checked here that later nodes of the sweep may add into */
  for (uint32_t k = 0; k < n->n_in; k++) {
    if (n->in[k] == UINT32_MAX) continue;
    tgi_value *v = tgi_slot(t, n->in[k]);
    if (!v->requires_grad || !v->grad.valid) continue;
    more = more || v->sweep_uses > 1;
    if (handed_over(t, n, v)) continue;
    if (!check_buf(t, i, v, &v->grad, 1, (int32_t)i + 1, true, !aliased(n, k))) return false;
  }
  if (!t->nf_npend && !t->nf_side_busy) return true;
  /* the next node adds into the gradients of its inputs: a check must see them as they are now */
  bool queued = false, flying = false;
  uint32_t m = next_node(t, i);
  for (uint32_t k = 0; m != UINT32_MAX && k < t->nodes[m].n_in; k++) {
    uint32_t slot = t->nodes[m].in[k];
    if (slot == UINT32_MAX) continue;
    const tgi_value *v = tgi_slot(t, slot);
    for (uint32_t q = 0; q < t->nf_npend && !queued; q++)
      queued = checks_grad_of(&t->nf_pend[q], slot, v);
    if (t->nf_nfly > TGI_NF_FLY) /* too many in flight to list: any gradient may be one */
      flying = flying || v->grad.valid != 0;
    for (uint32_t q = 0; q < t->nf_nfly && q < TGI_NF_FLY && !flying; q++)
      flying = checks_grad_of(&t->nf_fly[q], slot, v);
  }
  /* beside the main stream, a gradient more nodes add into is checked at once: its check then runs
   * while the nodes up to the next one that adds into it do */
  if ((queued || (more && t->rt->nf_side)) && !flush(t)) return false;
  if (queued || flying) tgi_finite_join(t);
  return t->status == TG_OK;
}

/* The sweep's device flag and, when the forward's was left for it (tgi_finite_defer), that one
 * too, in one read: the forward's finding comes first. */
void tgi_finite_sweep_end(tg_tape *t) {
  const bool fwd = t->nf_fwd_dev, bwd = t->nf_bwd_dev;
  if (!fwd && !bwd) return;
  t->nf_fwd_dev = t->nf_bwd_dev = false;
  if (!flush(t) || !t->dev_flags) return;
  int32_t f[2] = {0, 0};
  char msg[TGI_MSG_CAP];
  tgi_finite_join(t);
  tg_status s = tgi_device_d2h(t->rt->dev, f, t->dev_flags, sizeof f, msg);
  if (s) {
    device_failed(t, s, msg);
    return;
  }
  if (fwd && f[0] > 0)
    nonfinite(t, (uint32_t)(INT32_MAX - f[0]), false, UINT32_MAX);
  else if (bwd && f[1] > 0)
    nonfinite(t, (uint32_t)(f[1] - 1), true, UINT32_MAX);
}

tg_status tg_tape_set_check_finite(tg_tape *t, int on, int *previous) {
  if (!t) {
    tgi_set_last_error("tg_tape_set_check_finite: argument 'tape' is NULL; expected a tape from tg_tape_create");
    return TG_ERR_INVALID_ARGUMENT;
  }
  TGI_GUARD(t->rt, "tg_tape_set_check_finite", TG_ERR_STATE);
  if (previous) *previous = t->check_finite ? 1 : 0;
  if (on && !t->check_finite) t->nf_checked = t->nnodes; /* the nodes recorded after this call */
  t->check_finite = on != 0;
  return TG_OK;
}

void tgi_finite_reset(tg_tape *t) {
  tgi_finite_join(t); /* before the flags are zeroed */
  t->nf_checked = 0;
  t->nf_npend = 0; /* the step's buffers are gone: nothing queued is checked */
  t->nf_pend_bytes = 0;
  t->nf_fwd_dev = t->nf_bwd_dev = false;
  if (!t->dev_flags) return;
  char msg[TGI_MSG_CAP];
  if (tgi_device_zero(t->rt->dev, t->dev_flags, 2 * sizeof(int32_t), msg)) { /* the next check finds it */
  }
}
