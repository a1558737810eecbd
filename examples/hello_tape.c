/* The smallest tiga program: y = sum(relu(x) * w), backward, read dy/dw. */
#include <stdio.h>

#include "tiga.h"

int main(void) {
  tg_runtime *rt;
  tg_tape *t;
  if (tg_runtime_create_host(&rt) || tg_tape_create(rt, &t)) {
    fprintf(stderr, "setup failed: %s\n", tg_last_error());
    return 1;
  }
  int64_t shape[1] = {4};
  double xs[4] = {-1, 2, -3, 4}, ws[4] = {0.5, 0.5, 0.5, 0.5};
  tg_id x, w;
  tg_tape_input(t, TG_F64, 1, shape, xs, sizeof xs, 0, &x);
  tg_tape_parameter(t, TG_F64, 1, shape, ws, sizeof ws, 0, &w);
  tg_id y = tg_sum(t, tg_mul(t, tg_relu(t, x), w));
  if (tg_tape_status(t) || tg_tape_backward(t, y)) {
    fprintf(stderr, "error: %s\n", tg_tape_error(t));
    return 1;
  }
  double g[4], v;
  tg_tape_scalar(t, y, &v);
  tg_tape_read_grad(t, w, g, sizeof g);
  printf("y = %g, dy/dw = [%g %g %g %g]\n", v, g[0], g[1], g[2], g[3]);
  char text[2048];
  tg_tape_explain(t, text, sizeof text, NULL);
  fputs(text, stdout);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
  return 0;
}
