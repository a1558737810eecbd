/* tg_embedding: y[i..., :] = table[ids[i...], :] for a table [V, D] and I32 ids of any shape;
 * result [ids..., D]. Backward scatter-adds gy's rows into the table's gradient (repeated ids
 * accumulate). Ids are checked on the host before anything runs: the ids of a step are created
 * on the host, so the check reads them where they are; ids that live only on the device are
 * copied back for it (one d2h, shown by explain). The CUDA kernels also skip ids out of range,
 * so no path indexes out of bounds. Nothing is saved: backward reads the ids value. */
#include "../host/embedding.h"
#include "../tape/internal.h"

#include <stdio.h>

#ifdef TIGA_HAVE_CUDA
#include "../cuda/embedding.h"
#endif

static tg_status embedding_backward(tg_tape *t, tgi_node *n) {
  tgi_value *table = tgi_in(t, n, 0), *ids = tgi_in(t, n, 1), *y = tgi_out(t, n, 0);
  if (!table->requires_grad) return TG_OK;
  int64_t V = table->shape[0], D = table->shape[1];
  if (n->cap->provider == TG_PROVIDER_HOST) {
    const void *gy = tgi_grad_h(t, y);
    const int32_t *pi = tgi_read_h(t, ids);
    void *gt = tgi_grad_h(t, table);
    if (t->status) return t->status;
    /* never trust indices in a scatter: backward refuses rewritten ids (versions), and this keeps
     * an out-of-range row from ever being written */
    int64_t bad = host_embedding_bad_id(pi, ids->numel, V);
    if (bad >= 0)
      return tgi_fail(t, TG_ERR_STATE, "ids hold %d at position %lld; expected ids in [0, %lld)", (int)pi[bad],
                      (long long)bad, (long long)V),
             TG_ERR_STATE;
    host_embedding_backward((tg_dtype)table->dtype, gy, pi, ids->numel, D, gt);
    return TG_OK;
  }
#ifdef TIGA_HAVE_CUDA
  const void *gy = tgi_grad_d(t, y);
  const int32_t *pi = tgi_read_d(t, ids);
  void *gt = tgi_grad_d(t, table);
  if (t->status) return t->status;
  tg_status s = cuda_embedding_backward(TGI_STREAM(t), (tg_dtype)table->dtype, gy, pi, ids->numel, V, D, gt);
  if (s) tgi_fail_cuda(t, s, "backward");
  return s;
#else
  (void)V;
  return TG_ERR_INTERNAL;
#endif
}

static void describe_embedding(const tgi_node *n, char *buf, size_t cap) {
  snprintf(buf, cap, "V=%lld D=%lld", (long long)n->p.i[0], (long long)n->p.i[1]);
}

static const tgi_capsule cap_embedding[2] = {{"embedding", TG_PROVIDER_HOST, embedding_backward, describe_embedding},
                                             {"embedding", TG_PROVIDER_CUDA, embedding_backward, describe_embedding}};

/* "[1, 2]": the multi-index of flat position pos in shape. */
static const char *index_str(const int64_t *shape, int ndim, int64_t pos, char *buf, size_t cap) {
  int64_t idx[TG_MAX_DIMS];
  for (int i = ndim - 1; i >= 0; i--) {
    idx[i] = pos % shape[i];
    pos /= shape[i];
  }
  return tgi_shape_str(idx, ndim, buf, cap);
}

tg_id tg_embedding(tg_tape *t, tg_id table_id, tg_id ids_id) {
  if (!tgi_op_begin(t, "tg_embedding")) return TG_NO_ID;
  tgi_value *table = tgi_arg(t, "table", table_id);
  tgi_value *ids = table ? tgi_arg(t, "ids", ids_id) : NULL;
  if (!ids) return TG_NO_ID;
  tg_provider p = tgi_pick(t, TGI_HOST_AND_CUDA);
  if (!p || !tgi_need_float_for(t, p, "table", table)) return TG_NO_ID;
  if (ids->dtype != TG_I32)
    return tgi_fail(t, TG_ERR_DTYPE, "argument 'ids' has dtype %s; expected i32", tg_dtype_name((tg_dtype)ids->dtype)),
           TG_NO_ID;
  char st[TGI_SHAPE_STR_CAP], si[TGI_SHAPE_STR_CAP];
  tgi_shape_str(table->shape, table->ndim, st, sizeof st);
  tgi_shape_str(ids->shape, ids->ndim, si, sizeof si);
  if (table->ndim != 2)
    return tgi_fail(t, TG_ERR_SHAPE, "argument 'table' has shape %s; expected [V, D] (2 dims)", st), TG_NO_ID;
  if (ids->ndim + 1 > TG_MAX_DIMS)
    return tgi_fail(t, TG_ERR_SHAPE, "argument 'ids' has shape %s; the result [ids..., D] would exceed %d dims", si,
                    TG_MAX_DIMS),
           TG_NO_ID;
  int64_t V = table->shape[0], D = table->shape[1];
  const int32_t *hid = tgi_read_h(t, ids);
  if (!hid) return TG_NO_ID;
  int64_t bad = host_embedding_bad_id(hid, ids->numel, V);
  if (bad >= 0) {
    char sp[TGI_SHAPE_STR_CAP];
    tgi_fail(t, TG_ERR_INVALID_ARGUMENT,
             "argument 'ids' %s holds %d at position %lld (index %s); expected ids in [0, %lld) (table %s)", si,
             (int)hid[bad], (long long)bad, index_str(ids->shape, ids->ndim, bad, sp, sizeof sp), (long long)V, st);
    return TG_NO_ID;
  }
  int64_t shape[TG_MAX_DIMS];
  for (int i = 0; i < ids->ndim; i++)
    shape[i] = ids->shape[i];
  shape[ids->ndim] = D;
  tgi_value *y = tgi_result(t, (tg_dtype)table->dtype, ids->ndim + 1, shape);
  if (!y) return TG_NO_ID;
  if (p == TG_PROVIDER_HOST) {
    const void *pt = tgi_read_h(t, table);
    void *py = tgi_write_h(t, y);
    if (!pt || !py) return TG_NO_ID;
    host_embedding_forward(tg_dtype_size((tg_dtype)table->dtype), pt, D, hid, ids->numel, py);
  } else {
#ifdef TIGA_HAVE_CUDA
    const void *pt = tgi_read_d(t, table);
    const int32_t *pi = tgi_read_d(t, ids);
    void *py = tgi_write_d(t, y);
    if (!pt || !pi || !py) return TG_NO_ID;
    tg_status s = cuda_embedding_forward(TGI_STREAM(t), (tg_dtype)table->dtype, pt, V, D, pi, ids->numel, py);
    if (s) return tgi_fail_cuda(t, s, "forward"), TG_NO_ID;
#endif
  }
  tgi_value *in[2] = {table, ids};
  tgi_node *n = tgi_record(t, TGI_CAP(cap_embedding, p), 2, in, 1, &y);
  if (n) {
    n->p.i[0] = V;
    n->p.i[1] = D;
  }
  return tgi_done(t, y);
}
