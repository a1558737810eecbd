/* tg_mha: multi-head attention in TorchLean's structure, composed of recorded ops:
 *   Q = x Wq -> [B, n, Hq, D],  K = x Wk -> [B, n, Hkv, D],  V = x Wv -> [B, n, Hkv, Dv]
 *   O = attention(Q, K, V; relation)  [B, n, Hq, Dv] -> [B, n, Hq*Dv],   y = O Wo  [B, n, dModel]
 * tg_linear reads x [B, n, dModel] as [B*n, dModel] rows (the batch folded into the rows), and its
 * row-major output [B, n, H*D] already is the attention layout [B, n, H, D]: the reshapes are
 * views, no transpose. (batch, head) is the attention batch. The projections run on the tape's
 * provider; only the attention node takes opts->attention_provider. */
#include "relation.h"

#include <stdio.h>

static bool need_2d(tg_tape *t, const char *arg, const tgi_value *w, int64_t rows, int64_t cols, const char *want) {
  char s[TGI_SHAPE_STR_CAP];
  if (w->ndim == 2 && w->shape[0] == rows && (cols < 0 || w->shape[1] == cols)) return true;
  return tgi_fail(t, TG_ERR_SHAPE, "argument '%s' has shape %s; expected %s", arg,
                  tgi_shape_str(w->shape, w->ndim, s, sizeof s), want);
}

void tg_mha_options_init(tg_mha_options *o) {
  if (o)
    *o = (tg_mha_options){.struct_size = sizeof *o,
                          .heads_q = 0,
                          .heads_kv = 0,
                          .causal = 0,
                          .rel = NULL,
                          .attention_provider = TG_PROVIDER_AUTO,
                          .scale = TG_SCALE_AUTO,
                          .attention_dropout_keep = 1};
}

tg_id tg_mha(tg_tape *t, tg_id x_id, tg_id wq_id, tg_id wk_id, tg_id wv_id, tg_id wo_id,
             const tg_mha_options *opts_in) {
  if (!tgi_op_begin(t, "tg_mha")) return TG_NO_ID;
  tgi_value *x = tgi_arg(t, "x", x_id);
  tgi_value *wq = x ? tgi_arg(t, "wq", wq_id) : NULL, *wk = wq ? tgi_arg(t, "wk", wk_id) : NULL;
  tgi_value *wv = wk ? tgi_arg(t, "wv", wv_id) : NULL, *wo = wv ? tgi_arg(t, "wo", wo_id) : NULL;
  if (!wo) return TG_NO_ID;
  if (!opts_in)
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT,
                    "argument 'opts' is NULL; expected tg_mha_options (tg_mha_options_init, then heads_q, heads_kv)"),
           TG_NO_ID;
  tg_mha_options ob;
  tg_mha_options_init(&ob);
  const char *why = tgi_opts_copy(&ob, sizeof ob, opts_in);
  if (why) return tgi_fail(t, TG_ERR_INVALID_ARGUMENT, "argument 'opts' (tg_mha_options): %s", why), TG_NO_ID;
  const tg_mha_options *opts = &ob;
  int64_t Hq = opts->heads_q, Hkv = opts->heads_kv;
  if (Hq < 1 || Hkv < 1)
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT,
                    "options heads_q = %d, heads_kv = %d; expected both >= 1 (set heads_kv = heads_q for plain "
                    "multi-head attention)",
                    opts->heads_q, opts->heads_kv),
           TG_NO_ID;
  if (Hq % Hkv)
    return tgi_fail(t, TG_ERR_SHAPE, "option heads_q = %lld is not a multiple of heads_kv = %lld", (long long)Hq,
                    (long long)Hkv),
           TG_NO_ID;
  if ((int)opts->attention_provider < TG_PROVIDER_AUTO || (int)opts->attention_provider > TG_PROVIDER_CUDA_COMPOSED)
    return tgi_fail(t, TG_ERR_INVALID_ARGUMENT, "option attention_provider is %d; expected a tg_provider",
                    (int)opts->attention_provider),
           TG_NO_ID;
  char s[TGI_SHAPE_STR_CAP], want[128];
  if (x->ndim != 3)
    return tgi_fail(t, TG_ERR_SHAPE, "argument 'x' has shape %s; expected [B, n, dModel]",
                    tgi_shape_str(x->shape, x->ndim, s, sizeof s)),
           TG_NO_ID;
  int64_t B = x->shape[0], n = x->shape[1], dm = x->shape[2];
  snprintf(want, sizeof want, "[dModel=%lld, Hq*D] with Hq=%lld dividing the columns", (long long)dm, (long long)Hq);
  if (!need_2d(t, "wq", wq, dm, -1, want)) return TG_NO_ID;
  if (wq->shape[1] % Hq) return need_2d(t, "wq", wq, -1, -1, want), TG_NO_ID;
  int64_t D = wq->shape[1] / Hq;
  snprintf(want, sizeof want, "[dModel=%lld, Hkv*D=%lld]", (long long)dm, (long long)(Hkv * D));
  if (!need_2d(t, "wk", wk, dm, Hkv * D, want)) return TG_NO_ID;
  snprintf(want, sizeof want, "[dModel=%lld, Hkv*Dv] with Hkv=%lld dividing the columns", (long long)dm,
           (long long)Hkv);
  if (!need_2d(t, "wv", wv, dm, -1, want)) return TG_NO_ID;
  if (wv->shape[1] % Hkv) return need_2d(t, "wv", wv, -1, -1, want), TG_NO_ID;
  int64_t Dv = wv->shape[1] / Hkv;
  snprintf(want, sizeof want, "[Hq*Dv=%lld, dModel=%lld]", (long long)(Hq * Dv), (long long)dm);
  if (!need_2d(t, "wo", wo, Hq * Dv, dm, want)) return TG_NO_ID;

  /* without opts->rel, a dense or causal relation built here; the attention node holds it */
  tg_relation *local = NULL;
  const tg_relation *rel = opts->rel;
  if (!rel) {
    if (!(local = tgi_rel_new_simple(t->rt, opts->causal ? TG_REL_CAUSAL : TG_REL_DENSE, n, n)))
      return tgi_fail(t, TG_ERR_OUT_OF_MEMORY, "out of host memory for the attention relation"), TG_NO_ID;
    rel = local;
  }
  int64_t sq[4] = {B, n, Hq, D}, sk[4] = {B, n, Hkv, D}, sv[4] = {B, n, Hkv, Dv}, so[3] = {B, n, Hq * Dv};
  tg_id q = tg_reshape(t, tg_linear(t, x_id, wq_id, TG_ABSENT), 4, sq);
  tg_id k = tg_reshape(t, tg_linear(t, x_id, wk_id, TG_ABSENT), 4, sk);
  tg_id v = tg_reshape(t, tg_linear(t, x_id, wv_id, TG_ABSENT), 4, sv);
  tg_provider prev = t->provider;
  if (opts->attention_provider != TG_PROVIDER_AUTO) tg_tape_set_provider(t, opts->attention_provider, &prev);
  tg_attention_options ao;
  tg_attention_options_init(&ao);
  ao.scale = opts->scale;
  ao.dropout_keep = opts->attention_dropout_keep;
  tg_id o = tg_attention(t, q, k, v, rel, &ao);
  tg_tape_set_provider(t, prev, NULL); /* restored whatever happened */
  if (local) tgi_rel_release(local);   /* the node holds it now (or nothing does) */
  return tg_linear(t, tg_reshape(t, o, 3, so), wo_id, TG_ABSENT);
}
