/* The reverse sweep. */
#include "internal.h"

#include <stdio.h>
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

/* Before anything accumulates: every node the sweep will run must find its inputs at the versions
 * it recorded (PyTorch's saved-tensor version check), else the gradient would silently mix old and
 * new values (or, for index inputs, address rows that the forward never read). The marks mirror the
 * sweep's rule (a node runs when an output that requires grad receives a gradient); they may mark a
 * node the sweep then skips, which only makes the check stricter. */
static tg_status check_versions(tg_tape *t, const char *fn, tgi_value *L) {
  for (uint32_t i = 0; i < t->nvals; i++) {
    tgi_value *v = tgi_slot(t, i);
    v->sweep_mark = false;
    v->sweep_uses = 0;
  }
  L->sweep_mark = true;
  for (int32_t i = L->producer; i >= 0; i--) {
    const tgi_node *n = &t->nodes[i];
    bool runs = false;
    for (uint32_t o = 0; o < n->n_out && o < TGI_MAX_OUT; o++) {
      const tgi_value *ov = tgi_out(t, n, o);
      runs = runs || (ov->requires_grad && ov->sweep_mark);
    }
    if (!runs) continue;
    for (uint32_t k = 0; k < n->n_in; k++) {
      if (n->in[k] == UINT32_MAX) continue;
      tgi_value *v = tgi_in(t, n, k);
      if (v->version != n->in_ver[k]) {
        char line[320];
        tgi_explain_node(t, (uint32_t)i, line, sizeof line);
        return tgi_error(t, TG_ERR_STATE,
                         "%s: node #%d (%s, %s) read value v%u (id %lld, input %u) at version %llu, but it is at "
                         "version %llu now: it was rewritten after the forward (tg_tape_write, tg_tape_load or an "
                         "optimizer step), so the node's gradient would be wrong; run the forward again. Node: %s",
                         fn, (int)i, n->cap->op, tg_provider_name(n->cap->provider), n->in[k],
                         (long long)tgi_id_of(t, v), k, (unsigned long long)n->in_ver[k],
                         (unsigned long long)v->version, line);
      }
      const tgi_value *leaf = tgi_view_stale(t, v);
      if (leaf) {
        char line[320];
        tgi_explain_node(t, (uint32_t)i, line, sizeof line);
        return tgi_error(t, TG_ERR_STATE,
                         "%s: node #%d (%s, %s) read value v%u (id %lld, input %u), a reshape that shares the "
                         "storage of %s id %lld, which was rewritten after the forward (tg_tape_write, "
                         "tg_tape_load or an optimizer step), so the node's gradient would be wrong; run the "
                         "forward again. Node: %s",
                         fn, (int)i, n->cap->op, tg_provider_name(n->cap->provider), n->in[k],
                         (long long)tgi_id_of(t, v), k, leaf->kind == TGI_PARAM ? "parameter" : "input",
                         (long long)tgi_id_of(t, leaf), line);
      }
      if (v->requires_grad) {
        v->sweep_mark = true;
        v->sweep_uses++; /* counts every node that may add into v's gradient (tgi_grad_pass) */
      }
    }
  }
  return TG_OK;
}

/* A node whose one output shares its one input's storage (same bytes, same dtype: a view, e.g. a
 * reshape of an op result) is the identity on the elements, so its input's gradient is its output's
 * gradient: handed over (tgi_grad_pass) instead of running its backward, when the rules of the
 * hand-off allow; false means the node's backward runs as usual. */
static bool view_pass(tg_tape *t, tgi_node *n) {
  if (n->n_in != 1 || n->n_out != 1 || n->in[0] == UINT32_MAX) return false;
  tgi_value *x = tgi_in(t, n, 0), *y = tgi_out(t, n, 0);
  if (!x->requires_grad || x->dtype != y->dtype || x->bytes != y->bytes) return false;
  const bool same_d = x->data.d && x->data.d == y->data.d, same_h = x->data.h && x->data.h == y->data.h;
  if (!same_d && !same_h) return false;
  const int side = (y->grad.valid & TGI_ON_DEV) ? TGI_ON_DEV : TGI_ON_HOST;
  return tgi_grad_pass(t, x, y, side);
}

/* Gradient-ready hook (tiga.h). A node "runs" for the hook exactly when the pre-pass counted it
 * (check_versions' rule), whether the sweep then executes or skips it, so each parameter's count of
 * possible contributors (sweep_uses) reaches zero right after its last one. */
static bool prepass_runs(const tg_tape *t, const tgi_node *n) {
  for (uint32_t o = 0; o < n->n_out && o < TGI_MAX_OUT; o++) {
    const tgi_value *ov = tgi_out(t, n, o);
    if (ov->requires_grad && ov->sweep_mark) return true;
  }
  return false;
}

static void hook_begin(tg_tape *t) {
  for (uint32_t i = 0; i < t->nvals; i++) {
    tgi_value *v = tgi_slot(t, i);
    v->hook_left = v->kind == TGI_PARAM && v->sweep_mark ? v->sweep_uses : 0;
  }
  t->grad_hook(t, TG_NO_ID, t->grad_hook_user);
}

static void hook_node_done(tg_tape *t, const tgi_node *n) {
  if (!prepass_runs(t, n)) return;
  for (uint32_t k = 0; k < n->n_in; k++) {
    if (n->in[k] == UINT32_MAX) continue;
    tgi_value *v = tgi_in(t, n, k);
    if (v->kind != TGI_PARAM || !v->requires_grad || v->hook_left == 0) continue;
    if (--v->hook_left == 0) t->grad_hook(t, tgi_id_of(t, v), t->grad_hook_user);
  }
}

/* The end of a successful sweep: parameters whose last possible contributor was skipped. */
static void hook_flush(tg_tape *t) {
  for (uint32_t i = 0; i < t->nvals; i++) {
    tgi_value *v = tgi_slot(t, i);
    if (v->kind != TGI_PARAM || v->hook_left == 0) continue;
    v->hook_left = 0;
    t->grad_hook(t, tgi_id_of(t, v), t->grad_hook_user);
  }
}

/* Seeding an op result L from grad_y's bytes src on `side`: L's gradient buffer becomes src itself
 * (lent, as tgi_grad_pass lends: forgotten when the next sweep starts) instead of a copy. Backwards
 * only read their outputs' gradients (the rule tgi_grad_pass relies on) and nothing of the sweep
 * adds into the root's gradient, so the bytes read are grad_y's; a step saves L's size in gradient
 * memory and a copy. A leaf keeps the copy (its gradient persists and accumulates). */
static bool lend_seed(tgi_value *L, const void *src, int side) {
  if (L->kind != TGI_RESULT || L->producer < 0) return false;
  if (side == TGI_ON_HOST)
    L->grad.h = (void *)(uintptr_t)src;
  else
    L->grad.d = (void *)(uintptr_t)src;
  L->grad.valid = (uint8_t)side;
  L->grad_lent |= (uint8_t)side;
  return true;
}

/* The reverse sweep from L, seeded with 1 (G == NULL, a one-element loss) or with the values of G
 * (the vector-Jacobian product G^T dL/d(inputs)). fn names the public call in messages. */
static tg_status sweep_run(tg_tape *t, const char *fn, tgi_value *L, tgi_value *G) {
  tg_status s = check_versions(t, fn, L);
  if (s) return s;
  const bool hook = t->grad_hook != NULL;
  if (hook) hook_begin(t);
  if (t->check_finite && (s = tgi_finite_sweep_begin(t))) goto failed;
  /* intermediate gradients restart from zero on every sweep; leaves accumulate */
  for (uint32_t i = 0; i < t->nvals; i++) {
    tgi_value *v = tgi_slot(t, i);
    if (v->kind == TGI_RESULT) {
      v->grad.valid = 0;
      v->has_grad = false;
      if (v->grad_lent & TGI_ON_HOST) v->grad.h = NULL; /* another value's buffer: give it back */
      if (v->grad_lent & TGI_ON_DEV) v->grad.d = NULL;
      v->grad_lent = 0;
    }
  }
  t->cur_op = fn;
  if (tgi_grad_zero_room(t) || tgi_grad_zero_params(t)) goto failed;
  if (G) { /* seed: L's gradient = G's values, copied on the side that computed L (on the device
            * unless L lives only on the host: a large gradient never crosses the bus per step) */
    bool fresh = false;
    char msg[TGI_MSG_CAP];
    if (t->rt->dev && (L->data.valid & TGI_ON_DEV)) {
      const void *src = tgi_read_d(t, G); /* a parameter uploads once and stays */
      if (!src) goto failed;
      if (lend_seed(L, src, TGI_ON_DEV)) goto seeded;
      void *g = tgi_grad_d_fresh(t, L, &fresh);
      if (!g) goto failed;
      if (L->producer < 0 && !fresh) { /* a leaf accumulates */
        s = TG_ERR_UNSUPPORTED;
        tgi_fail(t, s,
                 "argument 'y' is a leaf that already holds a gradient; seeding it from 'grad_y' would need "
                 "an add: call tg_tape_zero_grad first");
        goto failed;
      }
      if ((s = tgi_device_d2d(t->rt->dev, g, src, L->bytes, msg))) {
        tgi_fail(t, s, "%s", msg);
        goto failed;
      }
    } else {
      const void *src = tgi_read_h(t, G);
      if (!src) goto failed;
      if (lend_seed(L, src, TGI_ON_HOST)) goto seeded;
      void *g = tgi_grad_h_fresh(t, L, &fresh);
      if (!g) goto failed;
      if (L->producer < 0 && !fresh) {
        s = TG_ERR_UNSUPPORTED;
        tgi_fail(t, s, "argument 'y' is a leaf that already holds a gradient; call tg_tape_zero_grad first");
        goto failed;
      }
      memcpy(g, src, L->bytes);
    }
  seeded:
    L->has_grad = true;
    if (L->producer < 0) {
      if (hook) hook_flush(t);
      return TG_OK;
    }
  } else if (L->producer < 0) { /* the loss is a leaf: d loss / d loss = 1 */
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
    if (hook) hook_flush(t);
    return TG_OK;
  } else {
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
    if (!any) {
      if (hook) hook_node_done(t, n);
      continue;
    }
    t->cur_op = n->cap->op;
    if (view_pass(t, n)) {
      if (t->check_finite && !tgi_finite_backward(t, (uint32_t)i)) return t->status; /* sticky */
      if (hook) hook_node_done(t, n);
      continue;
    }
    if (t->check_finite) tgi_finite_arm(t, 1, i + 1); /* disarmed by tgi_finite_backward */
    s = n->cap->backward(t, n);
    if (s != TG_OK || t->status != TG_OK) {
      tgi_finite_disarm();
      if (t->status == TG_OK) tgi_fail(t, s, "backward failed");
      char msg[TGI_MSG_CAP]; /* the message names the call, then the node that failed */
      memcpy(msg, t->msg, sizeof msg);
      snprintf(t->msg, sizeof t->msg, "%s: node #%d (%s, %s): %s", fn, (int)i, n->cap->op,
               tg_provider_name(n->cap->provider), msg);
      goto failed;
    }
    if (t->check_finite && !tgi_finite_backward(t, (uint32_t)i)) return t->status; /* sticky */
    if (hook) hook_node_done(t, n);
  }
  if (hook) hook_flush(t);
  if (t->check_finite) tgi_finite_sweep_end(t);
  return t->status; /* TG_OK, or anomaly mode's sticky TG_ERR_NONFINITE */
failed:
  s = t->status;
  t->status = TG_OK;                     /* a failed sweep is reported, not sticky: the tape stays usable */
  if (strncmp(t->msg, fn, strlen(fn))) { /* a failure before the nodes: name the call */
    char msg[TGI_MSG_CAP];
    memcpy(msg, t->msg, sizeof msg);
    snprintf(t->msg, sizeof t->msg, "%s: %s", fn, msg);
  }
  tgi_set_last_error("%s", t->msg);
  return s ? s : TG_ERR_INTERNAL;
}

/* The sweep; the zeroed flags of gradients it did not reach are dropped on every way out (the
 * buffers stay invalid, and nothing but a later sweep may take them as zero). */
static tg_status sweep(tg_tape *t, const char *fn, tgi_value *L, tgi_value *G) {
  tg_status s = sweep_run(t, fn, L, G);
  tgi_grad_zeroed_clear(t);
  if (s == TG_OK && t->check_finite) { /* a sweep that ended before any node: the forward's flag */
    tgi_finite_sweep_end(t);
    s = t->status;
  }
  return s;
}

static tg_status begin(tg_tape *t, const char *fn) {
  if (!t) {
    tgi_set_last_error("%s: argument 'tape' is NULL; expected a tape from tg_tape_create", fn);
    return TG_ERR_INVALID_ARGUMENT;
  }
  tgi_finite_defer(t); /* the forward's device flag is read with the sweep's, at its end */
  if (t->status != TG_OK)
    return tgi_error(t, TG_ERR_STATE, "%s: the tape holds an error from an earlier op call: %s", fn, t->msg);
  return TG_OK;
}

tg_status tg_tape_backward(tg_tape *t, tg_id loss) {
  tg_status s = begin(t, "tg_tape_backward");
  if (s) return s;
  TGI_GUARD(t->rt, "tg_tape_backward", TG_ERR_STATE);
  tgi_value *L = tgi_lookup(t, "tg_tape_backward", "loss", loss, &s);
  if (!L) return s;
  if (L->numel != 1)
    return tgi_error(t, TG_ERR_SHAPE,
                     "tg_tape_backward: argument 'loss' has %lld elements; expected a one-element value (or "
                     "tg_tape_backward_with and an output gradient)",
                     (long long)L->numel);
  if (!L->requires_grad)
    return tgi_error(
        t, TG_ERR_STATE,
        "tg_tape_backward: argument 'loss' does not depend on any parameter or input with TG_REQUIRES_GRAD "
        "(or was computed with grad disabled)");
  return sweep(t, "tg_tape_backward", L, NULL);
}

tg_status tg_tape_backward_with(tg_tape *t, tg_id y, tg_id grad_y) {
  const char *fn = "tg_tape_backward_with";
  tg_status s = begin(t, fn);
  if (s) return s;
  TGI_GUARD(t->rt, fn, TG_ERR_STATE);
  tgi_value *L = tgi_lookup(t, fn, "y", y, &s);
  if (!L) return s;
  tgi_value *G = tgi_lookup(t, fn, "grad_y", grad_y, &s);
  if (!G) return s;
  char a[TGI_SHAPE_STR_CAP], b[TGI_SHAPE_STR_CAP];
  bool same = G->ndim == L->ndim && G->dtype == L->dtype;
  for (int d = 0; same && d < L->ndim; d++)
    same = G->shape[d] == L->shape[d];
  if (!same)
    return tgi_error(t, TG_ERR_SHAPE, "%s: argument 'grad_y' is %s %s; expected y's shape and dtype, %s %s", fn,
                     tgi_shape_str(G->shape, G->ndim, a, sizeof a), tg_dtype_name((tg_dtype)G->dtype),
                     tgi_shape_str(L->shape, L->ndim, b, sizeof b), tg_dtype_name((tg_dtype)L->dtype));
  if (!G->data.valid) return tgi_error(t, TG_ERR_STATE, "%s: argument 'grad_y' holds no data", fn);
  if (!L->requires_grad)
    return tgi_error(t, TG_ERR_STATE,
                     "%s: argument 'y' does not depend on any parameter or input with TG_REQUIRES_GRAD (or was "
                     "computed with grad disabled)",
                     fn);
  return sweep(t, fn, L, G);
}

tg_status tg_tape_set_grad_ready_hook(tg_tape *t, tg_grad_ready_fn fn, void *user) {
  if (!t) {
    tgi_set_last_error("tg_tape_set_grad_ready_hook: argument 'tape' is NULL; expected a tape from tg_tape_create");
    return TG_ERR_INVALID_ARGUMENT;
  }
  TGI_GUARD(t->rt, "tg_tape_set_grad_ready_hook", TG_ERR_STATE);
  t->grad_hook = fn;
  t->grad_hook_user = fn ? user : NULL;
  return TG_OK;
}
