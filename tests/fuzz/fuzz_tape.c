/* The op-sequence interpreter: the fuzzer's bytes are a program that builds random tapes on a host
 * runtime — inputs and parameters of random shapes and (sometimes extreme) values, every op family
 * (elementwise, linear, shape, reductions, losses, layernorm, embedding, dropout, cast, attention
 * over random relations, MHA, graph ops), random providers, grad mode and anomaly mode switches,
 * writes and optimizer steps between forward and backward, backward from random values, resets,
 * the loss scaler, explain, and injected host allocation failures — mixing valid and invalid ids
 * and arguments. Every call must return (a status, or TG_NO_ID with a sticky error); ASan / UBSan /
 * LeakSanitizer find the rest. Checked promises trap. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "tape/internal.h" /* only to check that no call leaves the runtime's thread-owner slot taken */
#include "tiga.h"

#define POOL 48
#define NREL 4

typedef struct vm {
  fz f;
  tg_runtime *rt;
  tg_tape *t;
  tg_id pool[POOL];
  int n;
  tg_relation *rel[NREL];
  int nrel;
  tg_loss_scaler *scaler;
  double buf[4096];
} vm;

static void trap(void) { __builtin_trap(); }

static void keep(vm *m, tg_id id) {
  if (id == TG_NO_ID && fz_u8(&m->f) % 4) return;
  if (m->n < POOL)
    m->pool[m->n++] = id;
  else
    m->pool[fz_u8(&m->f) % POOL] = id;
}

/* An id from the pool; sometimes TG_NO_ID, TG_ABSENT or a made-up number. */
static tg_id pick(vm *m) {
  uint8_t k = fz_u8(&m->f);
  if (k % 32 == 0) return (tg_id)fz_u64(&m->f);
  if (k % 32 == 1) return k & 32 ? TG_NO_ID : TG_ABSENT;
  return m->n ? m->pool[fz_u8(&m->f) % m->n] : TG_NO_ID;
}

static int64_t numel_of(int nd, const int64_t *s) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++)
    n *= s[i];
  return n;
}

/* Shape of id (false for an invalid one). */
static int shape_of(vm *m, tg_id id, int *nd, int64_t *s, tg_dtype *dt) {
  return tg_tape_shape(m->t, id, nd, s, TG_MAX_DIMS) == TG_OK && tg_tape_dtype(m->t, id, dt) == TG_OK;
}

/* Fills m->buf with n values of dt (doubles drawn from the bytes; ints in [lo, hi]). */
static void fill(vm *m, tg_dtype dt, int64_t n, int lo, int hi) {
  for (int64_t i = 0; i < n; i++) {
    if (dt == TG_I32) {
      ((int32_t *)m->buf)[i] = fz_u8(&m->f) % 16 == 0 ? (int32_t)fz_u32(&m->f) : fz_range(&m->f, lo, hi);
    } else if (dt == TG_F32) {
      ((float *)m->buf)[i] = (float)fz_real(&m->f);
    } else {
      m->buf[i] = fz_real(&m->f);
    }
  }
}

/* A new input (or parameter) of the given shape; the id or TG_NO_ID. */
static tg_id make(vm *m, tg_dtype dt, int nd, const int64_t *s, int param, unsigned flags, int lo, int hi) {
  int64_t n = numel_of(nd, s);
  if (n > 512 || n < 1) return TG_NO_ID;
  fill(m, dt, n, lo, hi);
  tg_id id = TG_NO_ID;
  size_t bytes = (size_t)n * tg_dtype_size(dt);
  if (param)
    tg_tape_parameter(m->t, dt, nd, s, m->buf, bytes, flags & TG_NO_WEIGHT_DECAY, &id);
  else
    tg_tape_input(m->t, dt, nd, s, m->buf, bytes, flags & TG_REQUIRES_GRAD, &id);
  return id;
}

static tg_dtype fdt(vm *m) { return fz_u8(&m->f) & 1 ? TG_F32 : TG_F64; }

static tg_id make_random(vm *m, int param) {
  int nd = fz_range(&m->f, 0, 4);
  int64_t s[4];
  for (int i = 0; i < nd; i++)
    s[i] = fz_range(&m->f, 1, 5);
  return make(m, fdt(m), nd, s, param, fz_u8(&m->f), 0, 0);
}

/* A value with a's shape (dims sometimes set to 1 or dropped: broadcasting), same dtype. */
static tg_id make_like(vm *m, tg_id a, int bcast) {
  int nd;
  int64_t s[TG_MAX_DIMS];
  tg_dtype dt;
  if (!shape_of(m, a, &nd, s, &dt)) return make_random(m, 0);
  if (bcast) {
    for (int i = 0; i < nd; i++)
      if (fz_u8(&m->f) % 3 == 0) s[i] = 1;
    int drop = fz_range(&m->f, 0, nd);
    memmove(s, s + drop, (size_t)(nd - drop) * sizeof *s);
    nd -= drop;
  }
  if (dt != TG_F32 && dt != TG_F64) dt = TG_F64;
  return make(m, dt, nd, s, 0, fz_u8(&m->f) & 1 ? TG_REQUIRES_GRAD : 0, 0, 0);
}

static void new_relation(vm *m) {
  if (m->nrel == NREL) {
    int i = fz_u8(&m->f) % NREL;
    tg_relation_destroy(m->rel[i]); /* nodes that use it keep it alive */
    m->rel[i] = m->rel[--m->nrel];
  }
  int64_t nq = fz_range(&m->f, 1, 6), nk = fz_range(&m->f, 1, 6);
  tg_relation *r = NULL;
  switch (fz_u8(&m->f) % 5) {
  case 0: tg_relation_dense(m->rt, nq, nk, &r); break;
  case 1: tg_relation_causal(m->rt, nq, nk, &r); break;
  case 2: {
    uint8_t mask[36];
    for (int i = 0; i < 36; i++)
      mask[i] = fz_u8(&m->f) & 1;
    tg_relation_mask(m->rt, 0, nq, nk, mask, (size_t)(nq * nk), &r);
    break;
  }
  case 3: {
    int32_t cu[3] = {0, (int32_t)fz_range(&m->f, 1, 3), 0};
    cu[2] = cu[1] + fz_range(&m->f, 1, 3);
    tg_relation_varlen(m->rt, 2, cu, sizeof cu, NULL, 0, fz_u8(&m->f) & 1, &r);
    break;
  }
  default: {
    int64_t rp[7] = {0};
    int32_t ci[36];
    int64_t e = 0;
    for (int64_t i = 0; i < nq; i++) {
      for (int64_t j = 0; j < nk; j++)
        if (fz_u8(&m->f) & 1) ci[e++] = (int32_t)j;
      rp[i + 1] = e;
    }
    tg_relation_csr(m->rt, nq, nk, rp, (size_t)(nq + 1) * 8, ci, (size_t)e * 4, &r);
    break;
  }
  }
  if (r) m->rel[m->nrel++] = r;
}

static tg_relation *rel(vm *m, int64_t *nq, int64_t *nk, int64_t *E) {
  if (!m->nrel) new_relation(m);
  if (!m->nrel) return NULL;
  tg_relation *r = m->rel[fz_u8(&m->f) % m->nrel];
  tg_relation_info(r, NULL, nq, nk, E);
  return r;
}

static void op_unary(vm *m) {
  tg_tape *t = m->t;
  tg_id a = pick(m), y = TG_NO_ID;
  int nd;
  int64_t s[TG_MAX_DIMS];
  tg_dtype dt;
  int ok = shape_of(m, a, &nd, s, &dt);
  switch (fz_u8(&m->f) % 16) {
  case 0: y = tg_relu(t, a); break;
  case 1: y = tg_leaky_relu(t, a, fz_real(&m->f)); break;
  case 2: y = tg_elu(t, a, fz_real(&m->f)); break;
  case 3: y = tg_gelu(t, a); break;
  case 4: y = tg_tanh(t, a); break;
  case 5: y = tg_softmax(t, a); break;
  case 6: y = tg_scale(t, a, fz_real(&m->f)); break;
  case 7: y = tg_dropout(t, a, fz_u8(&m->f) % 4 ? 0.5 : fz_real(&m->f)); break;
  case 8: y = tg_cast(t, a, (tg_dtype)(fz_u8(&m->f) % 8)); break;
  case 9: y = tg_sum(t, a); break;
  case 10: y = tg_mean(t, a); break;
  case 11: y = tg_sum_last(t, a); break;
  case 12: y = tg_transpose(t, a, fz_range(&m->f, -3, 3), fz_range(&m->f, -3, 3)); break;
  case 13: {
    int64_t last = ok && nd ? s[nd - 1] : 1;
    y = tg_slice(t, a, fz_range(&m->f, -1, (int)last), fz_range(&m->f, -1, (int)last + 1));
    break;
  }
  case 14: {
    int64_t r[2] = {-1, ok ? fz_range(&m->f, 1, 4) : 0};
    y = tg_reshape(t, a, fz_range(&m->f, 0, 2), r);
    break;
  }
  default: {
    int64_t sizes[3] = {1, 1, ok && nd ? s[nd - 1] - 2 : 1};
    tg_id outs[3];
    y = tg_split(t, a, fz_range(&m->f, 0, 3), sizes, outs);
    break;
  }
  }
  keep(m, y);
}

static void op_binary(vm *m) {
  tg_tape *t = m->t;
  tg_id a = pick(m);
  tg_id b = fz_u8(&m->f) % 4 ? make_like(m, a, fz_u8(&m->f) & 1) : pick(m);
  if (fz_u8(&m->f) & 1) {
    tg_id x = a;
    a = b, b = x;
  }
  tg_id y = TG_NO_ID;
  switch (fz_u8(&m->f) % 6) {
  case 0: y = tg_add(t, a, b); break;
  case 1: y = tg_sub(t, a, b); break;
  case 2: y = tg_mul(t, a, b); break;
  case 3: y = tg_mse(t, a, b); break;
  case 4: y = tg_dot_last(t, a, b); break;
  default: {
    tg_id xs[3] = {a, b, pick(m)};
    y = tg_concat(t, fz_range(&m->f, 0, 3), xs);
  }
  }
  keep(m, y);
}

static void op_linear(vm *m) {
  tg_id x = pick(m);
  int nd;
  int64_t s[TG_MAX_DIMS];
  tg_dtype dt;
  if (!shape_of(m, x, &nd, s, &dt) || nd == 0) return;
  if (dt != TG_F32 && dt != TG_F64) dt = TG_F64;
  int64_t w[2] = {s[nd - 1], fz_range(&m->f, 1, 5)};
  tg_id W = make(m, dt, 2, w, fz_u8(&m->f) & 1, TG_REQUIRES_GRAD, 0, 0);
  tg_id b = fz_u8(&m->f) & 1 ? make(m, dt, 1, w + 1, 1, 0, 0, 0) : TG_ABSENT;
  keep(m, fz_u8(&m->f) % 3 ? tg_linear(m->t, x, W, b) : tg_matmul(m->t, x, W));
  if (fz_u8(&m->f) % 4 == 0) { /* layernorm over the last dim */
    tg_id g = make(m, dt, 1, s + nd - 1, 1, 0, 0, 0), c = make(m, dt, 1, s + nd - 1, 1, 0, 0, 0);
    keep(m, tg_layernorm(m->t, x, g, c, fz_u8(&m->f) & 1 ? 1e-5 : fz_real(&m->f)));
  }
}

static void op_index(vm *m) {
  int64_t V = fz_range(&m->f, 1, 6), D = fz_range(&m->f, 1, 4), tb[2] = {V, D}, n[2] = {fz_range(&m->f, 1, 4), 2};
  tg_id table = make(m, fdt(m), 2, tb, 1, 0, 0, 0);
  tg_id ids = make(m, TG_I32, fz_range(&m->f, 1, 2), n, 0, 0, -1, (int)V);
  tg_id e = tg_embedding(m->t, table, ids);
  keep(m, e);
  keep(m, ids);
  /* cross-entropy of the embedding rows as logits over D classes */
  tg_id tg = make(m, TG_I32, 1, n, 0, 0, -1, (int)D);
  keep(m, tg_cross_entropy(m->t, e, tg, fz_u8(&m->f) & 1 ? TG_NO_IGNORE : 0));
}

static void op_attention(vm *m) {
  int64_t nq, nk, E;
  tg_relation *r = rel(m, &nq, &nk, &E);
  if (!r) return;
  int64_t H = fz_range(&m->f, 1, 2), D = fz_range(&m->f, 1, 3);
  int64_t sq[4] = {1, nq, H, D}, sk[4] = {1, nk, H, D};
  tg_dtype dt = fdt(m);
  tg_id q = make(m, dt, 4, sq, 0, TG_REQUIRES_GRAD, 0, 0), k = make(m, dt, 4, sk, 1, 0, 0, 0),
        v = make(m, dt, 4, sk, 0, fz_u8(&m->f) & 1, 0, 0);
  tg_attention_options o;
  tg_attention_options_init(&o);
  tg_id lse = TG_NO_ID;
  if (fz_u8(&m->f) & 1) o.lse_out = &lse;
  if (fz_u8(&m->f) % 3 == 0) o.dropout_keep = fz_u8(&m->f) & 1 ? 0.7 : fz_real(&m->f);
  if (fz_u8(&m->f) % 4 == 0) o.scale = fz_real(&m->f);
  if (fz_u8(&m->f) % 8 == 0) o.struct_size = fz_u8(&m->f);
  keep(m, tg_attention(m->t, q, k, v, r, &o));
  keep(m, lse);
  if (fz_u8(&m->f) % 4 == 0) { /* MHA over a square relation or causal */
    int64_t n = fz_range(&m->f, 1, 4), dm = 2 * fz_range(&m->f, 1, 2), sx[3] = {1, n, dm}, sw[2] = {dm, dm};
    tg_id x = make(m, dt, 3, sx, 0, TG_REQUIRES_GRAD, 0, 0);
    tg_id w[4];
    for (int i = 0; i < 4; i++)
      w[i] = make(m, dt, 2, sw, 1, 0, 0, 0);
    tg_mha_options mo;
    tg_mha_options_init(&mo);
    mo.heads_q = fz_range(&m->f, 0, 2);
    mo.heads_kv = fz_range(&m->f, 0, 2);
    mo.causal = fz_u8(&m->f) & 1;
    if (nq == n && nk == n && (fz_u8(&m->f) & 1)) mo.rel = r;
    keep(m, tg_mha(m->t, x, w[0], w[1], w[2], w[3], &mo));
  }
}

static void op_graph(vm *m) {
  int64_t nq, nk, E;
  tg_relation *r = rel(m, &nq, &nk, &E);
  if (!r) return;
  int64_t H = fz_range(&m->f, 1, 2), F = fz_range(&m->f, 1, 3), Ee = E > 0 ? E : 1;
  tg_dtype dt = fdt(m);
  int64_t sn[3] = {nk, H, F}, sd[2] = {nq, H}, ss[2] = {nk, H}, se[2] = {Ee, H};
  tg_id vals = make(m, dt, 3, sn, 0, TG_REQUIRES_GRAD, 0, 0);
  tg_graph_attention_options o;
  tg_graph_attention_options_init(&o);
  if (fz_u8(&m->f) % 3 == 0) o.dropout_keep = 0.6;
  tg_id lse = TG_NO_ID;
  if (fz_u8(&m->f) & 1) o.lse_out = &lse;
  switch (fz_u8(&m->f) % 6) {
  case 0: keep(m, tg_graph_gather(m->t, r, vals, (tg_graph_side)(fz_u8(&m->f) % 3))); break;
  case 1: {
    tg_id ev = make(m, dt, 2, se, 0, TG_REQUIRES_GRAD, 0, 0);
    keep(m, tg_graph_reduce(m->t, r, ev, (tg_graph_reduce_kind)(fz_u8(&m->f) % 4)));
    break;
  }
  case 2: keep(m, tg_graph_softmax(m->t, r, make(m, dt, 2, se, 0, TG_REQUIRES_GRAD, 0, 0))); break;
  case 3: keep(m, tg_graph_attend(m->t, r, make(m, dt, 2, se, 0, TG_REQUIRES_GRAD, 0, 0), vals, &o)); break;
  case 4:
    keep(m, tg_gat_attention(m->t, r, make(m, dt, 2, sd, 1, 0, 0, 0), make(m, dt, 2, ss, 0, TG_REQUIRES_GRAD, 0, 0),
                             vals, &o));
    break;
  default: {
    int64_t dim = fz_range(&m->f, 1, 3), ps[2] = {nk, dim}, pd[2] = {nq, dim};
    keep(m, tg_graph_displacement(m->t, r, make(m, dt, 2, ps, 0, TG_REQUIRES_GRAD, 0, 0),
                                  make(m, dt, 2, pd, 0, TG_REQUIRES_GRAD, 0, 0)));
  }
  }
  keep(m, lse);
}

static void op_write(vm *m) {
  tg_id a = pick(m);
  int nd;
  int64_t s[TG_MAX_DIMS];
  tg_dtype dt;
  if (!shape_of(m, a, &nd, s, &dt)) {
    tg_tape_write(m->t, a, m->buf, 8);
    return;
  }
  int64_t n = numel_of(nd, s);
  size_t bytes = (size_t)n * tg_dtype_size(dt);
  if (bytes > sizeof m->buf) return;
  fill(m, dt == TG_I32 ? TG_I32 : dt, dt == TG_F32 || dt == TG_F64 || dt == TG_I32 ? n : 0, -1, 6);
  tg_tape_write(m->t, a, m->buf, fz_u8(&m->f) % 8 ? bytes : bytes / 2);
}

static void op_optimizer(vm *m) {
  tg_tape *t = m->t;
  switch (fz_u8(&m->f) % 6) {
  case 0: {
    tg_sgd_options o;
    tg_sgd_options_init(&o);
    o.lr = fz_real(&m->f), o.momentum = fz_u8(&m->f) & 1 ? 0.9 : 0, o.nesterov = fz_u8(&m->f) % 4 == 0;
    tg_sgd_step(t, &o);
    break;
  }
  case 1: {
    tg_adamw_options o;
    tg_adamw_options_init(&o);
    if (fz_u8(&m->f) % 4 == 0) o.lr = fz_real(&m->f);
    tg_adamw_step(t, &o);
    break;
  }
  case 2: {
    tg_adam_options o;
    tg_adam_options_init(&o);
    o.weight_decay = fz_u8(&m->f) & 1 ? 0.1 : 0;
    tg_adam_step(t, &o);
    break;
  }
  case 3: {
    double norm;
    tg_clip_grad_norm(t, fz_real(&m->f), fz_u8(&m->f) & 1 ? &norm : NULL);
    break;
  }
  case 4: {
    tg_clip_options o;
    tg_clip_options_init(&o);
    o.error_if_nonfinite = fz_u8(&m->f) & 1;
    o.max_norm = fz_u8(&m->f) & 1 ? 1.0 : fz_real(&m->f);
    tg_clip_grad_norm_with(t, &o, NULL);
    break;
  }
  default: {
    if (!m->scaler) {
      tg_loss_scaler_options o;
      tg_loss_scaler_options_init(&o);
      o.growth_interval = fz_range(&m->f, 0, 3);
      tg_loss_scaler_create(&o, &m->scaler);
      if (!m->scaler) return;
    }
    tg_id s = tg_loss_scaler_scale(t, m->scaler, pick(m));
    keep(m, s);
    if (fz_u8(&m->f) & 1) tg_tape_backward(t, s);
    int found;
    tg_loss_scaler_unscale(t, m->scaler, &found);
  }
  }
}

static void op_backward(vm *m) {
  tg_id y = pick(m);
  int nd;
  int64_t s[TG_MAX_DIMS];
  tg_dtype dt;
  if (fz_u8(&m->f) & 1 || !shape_of(m, y, &nd, s, &dt)) {
    tg_status st = tg_tape_backward(m->t, y);
    if (st == TG_OK && tg_tape_status(m->t) != TG_OK) trap(); /* a successful sweep leaves no sticky error */
  } else {
    tg_tape_backward_with(m->t, y, make_like(m, y, fz_u8(&m->f) % 8 == 0));
  }
}

static void op_misc(vm *m) {
  tg_tape *t = m->t;
  switch (fz_u8(&m->f) % 10) {
  case 0: tg_tape_reset(t); break; /* pool ids become stale: kept on purpose */
  case 1: tg_tape_set_provider(t, (tg_provider)fz_range(&m->f, 0, 4), NULL); break;
  case 2: tg_tape_set_grad_enabled(t, fz_u8(&m->f) & 1, NULL); break;
  case 3: tg_tape_set_check_finite(t, fz_u8(&m->f) & 1, NULL); break;
  case 4: tg_tape_zero_grad(t); break;
  case 5: {
    char buf[256];
    size_t len;
    tg_tape_explain(t, buf, fz_u8(&m->f) % 4 ? sizeof buf : 0, &len);
    size_t nodes, saved;
    tg_tape_stats(t, &nodes, &saved);
    break;
  }
  case 6: { /* reads of every kind */
    tg_id a = pick(m);
    int64_t n = 0;
    tg_dtype dt;
    double x;
    if (tg_tape_numel(t, a, &n) == TG_OK && tg_tape_dtype(t, a, &dt) == TG_OK &&
        (size_t)n * tg_dtype_size(dt) <= sizeof m->buf) {
      tg_tape_read(t, a, m->buf, (size_t)n * tg_dtype_size(dt));
      tg_tape_read_grad(t, a, m->buf, (size_t)n * tg_dtype_size(dt));
    }
    tg_tape_scalar(t, a, &x);
    tg_id ids[8];
    size_t cnt;
    tg_tape_parameters(t, ids, fz_range(&m->f, 0, 8), &cnt);
    break;
  }
  case 7: tg_inject_host_alloc_failure(fz_range(&m->f, 0, 40), NULL); break;
  case 8: tg_tape_set_seed(t, fz_u64(&m->f)); break;
  default: new_relation(m);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vm *m = calloc(1, sizeof *m);
  if (!m) return 0;
  m->f = (fz){data, size, 0};
  if (tg_runtime_create_host(&m->rt) || tg_tape_create(m->rt, &m->t)) trap();
  for (int steps = 0; fz_more(&m->f) && steps < 256; steps++) {
    switch (fz_u8(&m->f) % 13) {
    case 0: keep(m, make_random(m, 0)); break;
    case 1: keep(m, make_random(m, 1)); break;
    case 2:
    case 3: op_unary(m); break;
    case 4: op_binary(m); break;
    case 5: op_linear(m); break;
    case 6: op_index(m); break;
    case 7: op_attention(m); break;
    case 8: op_graph(m); break;
    case 9: op_write(m); break;
    case 10: op_optimizer(m); break;
    case 11: op_backward(m); break;
    default: op_misc(m);
    }
    /* debug builds: every call gave the runtime's owner slot back (else another thread would be
     * refused forever) */
    if (TGI_THREAD_CHECK && __atomic_load_n(&m->rt->owner, __ATOMIC_RELAXED) != 0) trap();
    /* a sticky error stops the ops: clear it now and then to go on exploring */
    if (tg_tape_status(m->t) != TG_OK && fz_u8(&m->f) % 2) tg_tape_reset(m->t);
  }
  tg_inject_host_alloc_failure(-1, NULL);
  /* lifetimes: any destruction order */
  if (fz_u8(&m->f) & 1) tg_runtime_destroy(m->rt), m->rt = NULL;
  for (int i = 0; i < m->nrel; i++)
    tg_relation_destroy(m->rel[i]);
  tg_tape_destroy(m->t);
  tg_runtime_destroy(m->rt);
  tg_loss_scaler_destroy(m->scaler);
  free(m);
  return 0;
}
