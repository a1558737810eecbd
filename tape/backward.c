/* The reverse sweep. */
#include "internal.h"

#include <string.h>

static void seed_one(void *p, tg_dtype dt) {
  switch (dt) {
  case TG_F32: *(float *)p = 1.0f; break;
  case TG_F64: *(double *)p = 1.0; break;
  case TG_F16: *(uint16_t *)p = 0x3C00; break;
  case TG_BF16: *(uint16_t *)p = 0x3F80; break;
  default: break;
  }
}

tg_status tg_tape_backward(tg_tape *t, tg_id loss) {
  if (!t) {
    tgi_set_last_error("tg_tape_backward: argument 'tape' is NULL; expected a tape from tg_tape_create");
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (t->status != TG_OK)
    return tgi_error(t, TG_ERR_STATE, "tg_tape_backward: the tape holds an error from an earlier op call: %s", t->msg);
  tg_status s;
  tgi_value *L = tgi_lookup(t, "tg_tape_backward", "loss", loss, &s);
  if (!L) return s;
  if (L->numel != 1)
    return tgi_error(t, TG_ERR_SHAPE,
                     "tg_tape_backward: argument 'loss' has %lld elements; expected a one-element value",
                     (long long)L->numel);
  if (!L->requires_grad)
    return tgi_error(
        t, TG_ERR_STATE,
        "tg_tape_backward: argument 'loss' does not depend on any parameter or input with TG_REQUIRES_GRAD "
        "(or was computed with grad disabled)");
  /* intermediate gradients restart from zero on every sweep; leaves accumulate */
  for (uint32_t i = 0; i < t->nvals; i++) {
    tgi_value *v = tgi_slot(t, i);
    if (v->kind == TGI_RESULT) {
      v->grad.valid = 0;
      v->has_grad = false;
    }
  }
  t->cur_op = "tg_tape_backward";
  if (L->producer < 0) { /* the loss is a leaf: d loss / d loss = 1 */
    unsigned char one[8];
    seed_one(one, (tg_dtype)L->dtype);
    void *g = tgi_grad_h(t, L);
    if (!g) goto failed;
    if (L->dtype == TG_F32)
      *(float *)g += 1.0f;
    else if (L->dtype == TG_F64)
      *(double *)g += 1.0;
    else
      memcpy(g, one, L->bytes);
    return TG_OK;
  }
  {
    void *g = tgi_grad_h(t, L);
    if (!g) goto failed;
    seed_one(g, (tg_dtype)L->dtype);
  }
  for (int32_t i = L->producer; i >= 0; i--) {
    tgi_node *n = &t->nodes[i];
    bool any = false;
    for (uint32_t o = 0; o < n->n_out; o++) {
      tgi_value *ov = tgi_out(t, n, o);
      if (ov->requires_grad && ov->has_grad) any = true;
    }
    if (!any) continue;
    t->cur_op = n->cap->op;
    s = n->cap->backward(t, n);
    if (s != TG_OK || t->status != TG_OK) {
      if (t->status == TG_OK) tgi_fail(t, s, "backward failed");
      goto failed;
    }
  }
  return TG_OK;
failed:
  s = t->status;
  t->status = TG_OK; /* a failed sweep is reported, not sticky: the tape stays usable */
  return s ? s : TG_ERR_INTERNAL;
}
