/* Inverted dropout: y = x * mask / keep, mask_i ~ Bernoulli(keep). HOST runs host/dropout.c, CUDA
 * runs cuda/dropout.cu; both draw the same mask (host/dropout.h):
 *   mask_i = uniform53(Philox4x32-10(key = tape seed, counter = (i, c))) < keep
 * where c is the tape's dropout call counter (t->rng_calls), taken and incremented by every dropout
 * call that passes validation (keep == 1 and no-grad calls included, so a call's mask depends only
 * on its position since the last tg_tape_reset / tg_tape_set_seed).
 * Backward regenerates the mask from (seed, c) kept in the node instead of saving it: no saved
 * bytes, at the price of recomputing one Philox block per element. */
#include "../host/dropout.h"
#include "../tape/internal.h"

#include <stdio.h>

#ifdef TIGA_HAVE_CUDA
#include "../cuda/dropout.h"
#endif

/* Node parameters: p.i[0] seed, p.i[1] call counter, p.f[2] keep (1: identity). */

static tg_status dropout_backward(tg_tape *t, tgi_node *n) {
  tgi_value *x = tgi_in(t, n, 0), *y = tgi_out(t, n, 0);
  if (!x->requires_grad) return TG_OK;
  uint64_t seed = (uint64_t)n->p.i[0], call = (uint64_t)n->p.i[1];
  double keep = n->p.f[2];
  if (n->cap->provider == TG_PROVIDER_HOST) {
    const void *gy = tgi_grad_h(t, y);
    void *gx = tgi_grad_h(t, x);
    if (t->status) return t->status;
    host_dropout_backward((tg_dtype)x->dtype, seed, call, keep, gy, gx, x->numel);
    return TG_OK;
  }
#ifdef TIGA_HAVE_CUDA
  const void *gy = tgi_grad_d(t, y);
  void *gx = tgi_grad_d(t, x);
  if (t->status) return t->status;
  tg_status s = cuda_dropout_backward(TGI_STREAM(t), (tg_dtype)x->dtype, seed, call, keep, gy, gx, x->numel);
  if (s) tgi_fail_cuda(t, s, "backward");
  return s;
#else
  return TG_ERR_INTERNAL;
#endif
}

static void describe_dropout(const tgi_node *n, char *buf, size_t cap) {
  if (n->p.f[2] >= 1)
    snprintf(buf, cap, "keep=1 (identity)");
  else
    snprintf(buf, cap, "keep=%g call=%lld (mask regenerated in backward)", n->p.f[2], (long long)n->p.i[1]);
}

static const tgi_capsule cap_dropout[2] = {{"dropout", TG_PROVIDER_HOST, dropout_backward, describe_dropout},
                                           {"dropout", TG_PROVIDER_CUDA, dropout_backward, describe_dropout}};

tg_id tg_dropout(tg_tape *t, tg_id x_id, double keep) {
  if (!tgi_op_begin(t, "tg_dropout")) return TG_NO_ID;
  tgi_value *x = tgi_arg(t, "x", x_id);
  if (!x) return TG_NO_ID;
  if (!(keep > 0 && keep <= 1)) { /* also rejects NaN */
    tgi_fail(t, TG_ERR_INVALID_ARGUMENT, "argument 'keep' is %g; expected a keep probability in (0, 1]", keep);
    return TG_NO_ID;
  }
  tg_provider p = tgi_pick(t, TGI_HOST_AND_CUDA);
  if (!p || !tgi_need_float_for(t, p, "x", x)) return TG_NO_ID;
  uint64_t seed = t->seed, call = t->rng_calls++;
  /* inference (no grad): the identity, as a copy */
  double k = t->grad_enabled ? keep : 1.0;
  tgi_value *y = tgi_result(t, (tg_dtype)x->dtype, x->ndim, x->shape);
  if (!y) return TG_NO_ID;
  if (p == TG_PROVIDER_HOST) {
    const void *px = tgi_read_h(t, x);
    void *py = tgi_write_h(t, y);
    if (!px || !py) return TG_NO_ID;
    host_dropout_forward((tg_dtype)x->dtype, seed, call, k, px, py, x->numel);
  } else {
#ifdef TIGA_HAVE_CUDA
    const void *px = tgi_read_d(t, x);
    void *py = tgi_write_d(t, y);
    if (!px || !py) return TG_NO_ID;
    tg_status s = cuda_dropout_forward(TGI_STREAM(t), (tg_dtype)x->dtype, seed, call, k, px, py, x->numel);
    if (s) return tgi_fail_cuda(t, s, "forward"), TG_NO_ID;
#endif
  }
  tgi_node *n = tgi_record(t, TGI_CAP(cap_dropout, p), 1, &x, 1, &y);
  if (n) {
    n->p.i[0] = (int64_t)seed;
    n->p.i[1] = (int64_t)call;
    n->p.f[2] = k;
  }
  return tgi_done(t, y);
}
