/* explain: one line per node. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

typedef struct {
  char *buf;
  size_t cap, len;
} sink;

static void put(sink *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sink *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *dst = s->len < s->cap ? s->buf + s->len : NULL;
  size_t room = s->len < s->cap ? s->cap - s->len : 0;
  int n = vsnprintf(dst, room, fmt, ap);
  va_end(ap);
  if (n > 0) s->len += (size_t)n;
}

/* Node i's line, without the newline. */
static void node_line(sink *s, const tg_tape *t, uint32_t i) {
  const tgi_node *n = &t->nodes[i];
  put(s, "#%-4u %-16s %-13s in=[", i, n->cap->op, tg_provider_name(n->cap->provider));
  for (uint32_t k = 0; k < n->n_in; k++) {
    put(s, k ? ",v%u" : "v%u", n->in[k]);
  }
  put(s, "]");
  for (uint32_t o = 0; o < n->n_out && o < TGI_MAX_OUT; o++) {
    const tgi_value *v = tgi_slot(t, n->out[o]);
    char sh[TGI_SHAPE_STR_CAP];
    put(s, " -> v%u %s %s", n->out[o], tgi_shape_str(v->shape, v->ndim, sh, sizeof sh),
        tg_dtype_name((tg_dtype)v->dtype));
  }
  put(s, " saved=%zu", n->saved_bytes);
  if (n->h2d || n->d2h) put(s, " h2d=%u d2h=%u", n->h2d, n->d2h);
  if (n->cap->describe) {
    char extra[160];
    extra[0] = 0;
    n->cap->describe(n, extra, sizeof extra);
    if (extra[0]) put(s, " %s", extra);
  }
}

void tgi_explain_node(const tg_tape *t, uint32_t i, char *buf, size_t cap) {
  sink s = {buf, cap, 0};
  if (cap) buf[0] = 0;
  node_line(&s, t, i);
}

tg_status tg_tape_explain(tg_tape *t, char *buf, size_t cap, size_t *len) {
  if (!t) {
    tgi_set_last_error("tg_tape_explain: argument 'tape' is NULL; expected a tape from tg_tape_create");
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (!buf && cap)
    return tgi_error(t, TG_ERR_INVALID_ARGUMENT, "tg_tape_explain: argument 'buf' is NULL but cap is %zu", cap);
  TGI_GUARD(t->rt, "tg_tape_explain", TG_ERR_STATE);
  tgi_finite_resolve(t);
  sink s = {buf, cap, 0};
  if (cap) buf[0] = 0;
  size_t saved = 0;
  for (uint32_t i = 0; i < t->nnodes; i++)
    saved += t->nodes[i].saved_bytes;
  put(&s, "tape: %u nodes, saved %zu bytes, grad %s, status %s\n", t->nnodes, saved, t->grad_enabled ? "on" : "off",
      tg_status_string(t->status));
  for (uint32_t i = 0; i < t->nnodes; i++) {
    node_line(&s, t, i);
    put(&s, "\n");
  }
  if (len) *len = s.len;
  return TG_OK;
}

tg_status tg_tape_stats(tg_tape *t, size_t *nodes, size_t *saved_bytes) {
  if (!t) {
    tgi_set_last_error("tg_tape_stats: argument 'tape' is NULL; expected a tape from tg_tape_create");
    return TG_ERR_INVALID_ARGUMENT;
  }
  size_t saved = 0;
  for (uint32_t i = 0; i < t->nnodes; i++)
    saved += t->nodes[i].saved_bytes;
  if (nodes) *nodes = t->nnodes;
  if (saved_bytes) *saved_bytes = saved;
  return TG_OK;
}
