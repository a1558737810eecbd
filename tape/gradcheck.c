/* tg_gradcheck: analytic gradients against central differences in float64 (PyTorch's
 * conventions: eps 1e-6, atol 1e-5, rtol 1e-3), full or fast (random directions) mode. */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tg_gradcheck_options_init(tg_gradcheck_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->eps = 1e-6;
  o->atol = 1e-5;
  o->rtol = 1e-3;
  o->fast_mode = 0;
  o->fast_directions = 4;
  o->seed = 0;
  o->provider = TG_PROVIDER_AUTO;
}

void tg_gradcheck_input_init(tg_gradcheck_input *in) {
  if (!in) return;
  memset(in, 0, sizeof *in);
  in->struct_size = sizeof *in;
}

void tg_gradcheck_result_init(tg_gradcheck_result *r) {
  if (!r) return;
  memset(r, 0, sizeof *r);
  r->struct_size = sizeof *r;
}

/* Fast-mode directions: standard normals by Box-Muller on splitmix64 draws (they need not match
 * any provider's stream, only be reproducible from the seed). */
static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double normal_draw(uint64_t *state) {
  double u1 = ((double)(splitmix64(state) >> 11) + 1.0) * 0x1.0p-53; /* (0, 1] */
  double u2 = (double)(splitmix64(state) >> 11) * 0x1.0p-53;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

typedef struct {
  tg_runtime *rt;
  tg_tape *t;
  tg_gradcheck_fn fn;
  void *user;
  int n;
  const tg_gradcheck_input *in;
  double **x; /* working copies of the differentiable inputs (NULL for others) */
  int64_t *numel;
  tg_id *ids;
  tg_provider provider;
} gc_ctx;

/* Builds the inputs and runs the callback on a reset tape; returns the result id. */
static tg_status gc_build(gc_ctx *c, bool grad, tg_id *y) {
  tg_status s = tg_tape_reset(c->t);
  if (s) return s;
  tg_tape_set_provider(c->t, c->provider, NULL);
  for (int i = 0; i < c->n; i++) {
    const tg_gradcheck_input *in = &c->in[i];
    const void *data = c->x[i] ? (const void *)c->x[i] : in->data;
    unsigned flags = (grad && in->differentiable) ? TG_REQUIRES_GRAD : 0;
    s = tg_tape_input(c->t, in->dtype, in->ndim, in->shape, data, in->data_bytes, flags, &c->ids[i]);
    if (s) return tgi_rt_error(c->rt, s, "tg_gradcheck: input %d: %s", i, tg_tape_error(c->t));
  }
  *y = c->fn(c->t, c->ids, c->user);
  if (tg_tape_status(c->t) != TG_OK)
    return tgi_rt_error(c->rt, tg_tape_status(c->t), "tg_gradcheck: the callback's ops failed: %s",
                        tg_tape_error(c->t));
  int64_t numel = 0;
  s = tg_tape_numel(c->t, *y, &numel);
  if (s) return tgi_rt_error(c->rt, s, "tg_gradcheck: the callback returned no valid id: %s", tg_tape_error(c->t));
  if (numel != 1)
    return tgi_rt_error(c->rt, TG_ERR_SHAPE, "tg_gradcheck: the callback returned a value of %lld elements; expected 1",
                        (long long)numel);
  return TG_OK;
}

static tg_status gc_eval(gc_ctx *c, double *f) {
  tg_id y;
  tg_status s = gc_build(c, false, &y);
  if (s) return s;
  s = tg_tape_scalar(c->t, y, f);
  if (s) return tgi_rt_error(c->rt, s, "tg_gradcheck: %s", tg_tape_error(c->t));
  return TG_OK;
}

static void consider(tg_gradcheck_result *r, const tg_gradcheck_options *o, int input, int64_t idx, double a,
                     double num) {
  double err = fabs(a - num);
  double excess = err - (o->atol + o->rtol * fabs(num));
  if (isnan(a) || isnan(num)) excess = INFINITY;
  r->checked++;
  if (r->worst_input < 0 || excess > r->excess) {
    r->worst_input = input;
    r->worst_index = idx;
    r->analytic = a;
    r->numeric = num;
    r->abs_err = err;
    r->excess = excess;
  }
}

tg_status tg_gradcheck(tg_runtime *rt, tg_gradcheck_fn fn, void *user, int n_inputs, const tg_gradcheck_input *inputs,
                       const tg_gradcheck_options *opts, tg_gradcheck_result *result) {
  if (!rt) {
    tgi_set_last_error("tg_gradcheck: argument 'rt' is NULL; expected a runtime");
    return TG_ERR_INVALID_ARGUMENT;
  }
  if (!fn) return tgi_rt_error(rt, TG_ERR_INVALID_ARGUMENT, "tg_gradcheck: argument 'fn' is NULL; expected a callback");
  if (n_inputs <= 0 || !inputs)
    return tgi_rt_error(rt, TG_ERR_INVALID_ARGUMENT,
                        "tg_gradcheck: arguments 'n_inputs' (%d) / 'inputs' (%p); expected at least one input",
                        n_inputs, (const void *)inputs);
  if (result) {
    size_t rs;
    memcpy(&rs, result, sizeof rs);
    if (rs != sizeof *result)
      return tgi_rt_error(rt, TG_ERR_INVALID_ARGUMENT, "tg_gradcheck: argument 'result' has struct_size %zu; %s", rs,
                          rs ? "this library's tg_gradcheck_result differs (built against another tiga.h)"
                             : "initialise it with tg_gradcheck_result_init");
  }
  tg_gradcheck_options o;
  tg_gradcheck_options_init(&o);
  const char *why = opts ? tgi_opts_copy(&o, sizeof o, opts) : NULL;
  if (why)
    return tgi_rt_error(rt, TG_ERR_INVALID_ARGUMENT, "tg_gradcheck: argument 'opts' (tg_gradcheck_options): %s", why);
  /* the caller's array has a stride of inputs[0].struct_size (tiga.h) */
  size_t stride;
  memcpy(&stride, inputs, sizeof stride);
  if (stride != sizeof(tg_gradcheck_input))
    return tgi_rt_error(rt, TG_ERR_INVALID_ARGUMENT, "tg_gradcheck: argument 'inputs' has struct_size %zu; %s", stride,
                        stride ? "this library's tg_gradcheck_input differs (built against another tiga.h)"
                               : "initialise each element with tg_gradcheck_input_init");
  if (!(o.eps > 0) || !(o.atol >= 0) || !(o.rtol >= 0))
    return tgi_rt_error(rt, TG_ERR_INVALID_ARGUMENT,
                        "tg_gradcheck: options eps=%g atol=%g rtol=%g; expected eps > 0, "
                        "atol >= 0, rtol >= 0",
                        o.eps, o.atol, o.rtol);
  if (o.fast_mode && o.fast_directions <= 0)
    return tgi_rt_error(rt, TG_ERR_INVALID_ARGUMENT,
                        "tg_gradcheck: option fast_directions is %d; expected >= 1 in fast mode", o.fast_directions);
  int ndiff = 0;
  for (int i = 0; i < n_inputs; i++) {
    if (inputs[i].struct_size != stride)
      return tgi_rt_error(rt, TG_ERR_INVALID_ARGUMENT,
                          "tg_gradcheck: input %d has struct_size %zu, input 0 has %zu; initialise every element with "
                          "tg_gradcheck_input_init",
                          i, inputs[i].struct_size, stride);
    if (inputs[i].differentiable && inputs[i].dtype != TG_F64)
      return tgi_rt_error(rt, TG_ERR_DTYPE, "tg_gradcheck: input %d is differentiable but has dtype %s; expected f64",
                          i, tg_dtype_name(inputs[i].dtype));
    if (!inputs[i].data) return tgi_rt_error(rt, TG_ERR_INVALID_ARGUMENT, "tg_gradcheck: input %d has data NULL", i);
    ndiff += inputs[i].differentiable != 0;
  }
  if (!ndiff) return tgi_rt_error(rt, TG_ERR_INVALID_ARGUMENT, "tg_gradcheck: no input is marked differentiable");

  tg_gradcheck_result r;
  tg_gradcheck_result_init(&r);
  r.worst_input = -1;
  r.excess = -INFINITY;
  gc_ctx c = {rt, NULL, fn, user, n_inputs, inputs, NULL, NULL, NULL, o.provider};
  tg_status s = TG_ERR_OUT_OF_MEMORY;
  double **grads = tgi_calloc((size_t)n_inputs, sizeof *grads);
  c.x = tgi_calloc((size_t)n_inputs, sizeof *c.x);
  c.numel = tgi_calloc((size_t)n_inputs, sizeof *c.numel);
  c.ids = tgi_calloc((size_t)n_inputs, sizeof *c.ids);
  if (!grads || !c.x || !c.numel || !c.ids) {
    tgi_rt_error(rt, s, "tg_gradcheck: out of host memory");
    goto done;
  }
  for (int i = 0; i < n_inputs; i++) {
    int64_t n = 1;
    if (inputs[i].ndim < 0 || inputs[i].ndim > TG_MAX_DIMS) {
      s = tgi_rt_error(rt, TG_ERR_SHAPE, "tg_gradcheck: input %d has ndim %d; expected 0..%d", i, inputs[i].ndim,
                       TG_MAX_DIMS);
      goto done;
    }
    for (int d = 0; d < inputs[i].ndim; d++) {
      if (inputs[i].shape[d] <= 0 || n > INT64_MAX / 16 / inputs[i].shape[d]) {
        s = tgi_rt_error(rt, TG_ERR_SHAPE,
                         "tg_gradcheck: input %d has size %lld at dim %d; expected > 0 (and a sane total)", i,
                         (long long)inputs[i].shape[d], d);
        goto done;
      }
      n *= inputs[i].shape[d];
    }
    if (inputs[i].data_bytes != (size_t)n * tg_dtype_size(inputs[i].dtype)) {
      s = tgi_rt_error(rt, TG_ERR_INVALID_ARGUMENT,
                       "tg_gradcheck: input %d has data_bytes %zu; %lld elements of %s need %zu", i,
                       inputs[i].data_bytes, (long long)n, tg_dtype_name(inputs[i].dtype),
                       (size_t)n * tg_dtype_size(inputs[i].dtype));
      goto done;
    }
    c.numel[i] = n;
    if (!inputs[i].differentiable) continue;
    c.x[i] = tgi_malloc((size_t)n * sizeof(double));
    grads[i] = tgi_calloc((size_t)n, sizeof(double));
    if (!c.x[i] || !grads[i]) {
      s = tgi_rt_error(rt, TG_ERR_OUT_OF_MEMORY, "tg_gradcheck: out of host memory");
      goto done;
    }
    memcpy(c.x[i], inputs[i].data, (size_t)n * sizeof(double));
  }
  s = tg_tape_create(rt, &c.t);
  if (s) goto done;

  /* analytic */
  tg_id y;
  s = gc_build(&c, true, &y);
  if (s) goto done;
  s = tg_tape_backward(c.t, y);
  if (s == TG_ERR_STATE) {
    s = TG_OK; /* result does not depend on the inputs: the analytic gradient is zero */
  } else if (s) {
    tgi_rt_error(rt, s, "tg_gradcheck: backward failed: %s", tg_tape_error(c.t));
    goto done;
  } else {
    for (int i = 0; i < n_inputs; i++) {
      if (!grads[i]) continue;
      s = tg_tape_read_grad(c.t, c.ids[i], grads[i], (size_t)c.numel[i] * sizeof(double));
      if (s) {
        tgi_rt_error(rt, s, "tg_gradcheck: %s", tg_tape_error(c.t));
        goto done;
      }
    }
  }

  /* numeric */
  for (int i = 0; i < n_inputs; i++) {
    if (!c.x[i]) continue;
    double *x = c.x[i];
    int64_t n = c.numel[i];
    if (!o.fast_mode) {
      for (int64_t k = 0; k < n; k++) {
        double x0 = x[k], fp, fm;
        x[k] = x0 + o.eps;
        s = gc_eval(&c, &fp);
        x[k] = x0 - o.eps;
        if (!s) s = gc_eval(&c, &fm);
        x[k] = x0;
        if (s) goto done;
        consider(&r, &o, i, k, grads[i][k], (fp - fm) / (2 * o.eps));
      }
    } else {
      double *u = tgi_malloc((size_t)n * sizeof(double));
      double *x0 = tgi_malloc((size_t)n * sizeof(double));
      if (!u || !x0) {
        free(u);
        free(x0);
        s = tgi_rt_error(rt, TG_ERR_OUT_OF_MEMORY, "tg_gradcheck: out of host memory");
        goto done;
      }
      memcpy(x0, x, (size_t)n * sizeof(double));
      uint64_t state = o.seed ^ (0x6c8e9cf570932bd5ull * (uint64_t)(i + 1));
      for (int d = 0; d < o.fast_directions && !s; d++) {
        double norm = 0, a = 0, fp = 0, fm = 0;
        for (int64_t k = 0; k < n; k++) {
          u[k] = normal_draw(&state);
          norm += u[k] * u[k];
        }
        norm = sqrt(norm);
        for (int64_t k = 0; k < n; k++) {
          u[k] /= norm;
          a += grads[i][k] * u[k];
        }
        for (int64_t k = 0; k < n; k++)
          x[k] = x0[k] + o.eps * u[k];
        s = gc_eval(&c, &fp);
        for (int64_t k = 0; k < n; k++)
          x[k] = x0[k] - o.eps * u[k];
        if (!s) s = gc_eval(&c, &fm);
        memcpy(x, x0, (size_t)n * sizeof(double));
        if (!s) consider(&r, &o, i, d, a, (fp - fm) / (2 * o.eps));
      }
      free(u);
      free(x0);
      if (s) goto done;
    }
  }
  r.passed = r.excess <= 0;
  if (!r.passed) {
    s = tgi_rt_error(
        rt, TG_ERR_GRADCHECK,
        "tg_gradcheck: input %d %s %lld: analytic %.10g vs numeric %.10g (|diff| %.3g > atol %.3g + rtol %.3g "
        "* |numeric|)",
        r.worst_input, o.fast_mode ? "direction" : "element", (long long)r.worst_index, r.analytic, r.numeric,
        r.abs_err, o.atol, o.rtol);
  } else {
    s = TG_OK;
  }
done:
  if (result) *result = r;
  tg_tape_destroy(c.t);
  for (int i = 0; i < n_inputs; i++) {
    if (grads) free(grads[i]);
    if (c.x) free(c.x[i]);
  }
  free(grads);
  free(c.x);
  free(c.numel);
  free(c.ids);
  return s;
}
