/* Full reductions: sum and mean of all elements, a scalar (ndim 0) result. */
#include "../host/reduce.h"
#include "../tape/internal.h"

static tg_status sum_backward_host(tg_tape *t, tgi_node *n) {
  tgi_value *x = tgi_in(t, n, 0), *y = tgi_out(t, n, 0);
  if (!x->requires_grad) return TG_OK;
  const void *gy = tgi_grad_h(t, y);
  void *gx = tgi_grad_h(t, x);
  if (t->status) return t->status;
  host_sum_backward((tg_dtype)x->dtype, gy, x->numel, n->p.f[0], gx);
  return TG_OK;
}

static const tgi_capsule cap_sum_host = {"sum", TG_PROVIDER_HOST, sum_backward_host, NULL};
static const tgi_capsule cap_mean_host = {"mean", TG_PROVIDER_HOST, sum_backward_host, NULL};

static tg_id reduce(tg_tape *t, const char *name, const tgi_capsule *cap, bool mean, tg_id x_id) {
  if (!tgi_op_begin(t, name)) return TG_NO_ID;
  tgi_value *x = tgi_arg(t, "x", x_id);
  if (!x || !tgi_need_float(t, "x", x)) return TG_NO_ID;
  tg_provider p = tgi_pick(t, TGI_HOST_ONLY);
  if (!p) return TG_NO_ID;
  tgi_value *y = tgi_result(t, (tg_dtype)x->dtype, 0, NULL);
  if (!y) return TG_NO_ID;
  const void *px = tgi_read_h(t, x);
  void *py = tgi_write_h(t, y);
  if (!px || !py) return TG_NO_ID;
  double alpha = mean ? 1.0 / (double)x->numel : 1.0;
  host_sum_forward((tg_dtype)x->dtype, px, x->numel, alpha, py);
  tgi_node *n = tgi_record(t, cap, 1, &x, 1, &y);
  if (n) n->p.f[0] = alpha;
  return tgi_done(t, y);
}

tg_id tg_sum(tg_tape *t, tg_id x) { return reduce(t, "tg_sum", &cap_sum_host, false, x); }
tg_id tg_mean(tg_tape *t, tg_id x) { return reduce(t, "tg_mean", &cap_mean_host, true, x); }
