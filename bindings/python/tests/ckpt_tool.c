/* The C side of test_checkpoint.py: "write PATH" saves a tape with parameters "emb" (f32 [3, 2])
 * and "head.b" (f64 [4]) after one AdamW step; "read PATH" creates the same parameters (zeros, in
 * the other order), loads PATH and prints every value. Exit status != 0 with the message on
 * failure. */
#include <stdio.h>
#include <string.h>

#include "tiga.h"

static int fail(tg_tape *t, const char *what) {
  fprintf(stderr, "FAIL %s: %s\n", what, t ? tg_tape_error(t) : tg_last_error());
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 3 || (strcmp(argv[1], "write") && strcmp(argv[1], "read"))) {
    fprintf(stderr, "usage: ckpt_tool write|read PATH\n");
    return 2;
  }
  tg_runtime *rt;
  tg_tape *t;
  if (tg_runtime_create_host(&rt) || tg_tape_create(rt, &t)) return fail(NULL, "create");
  int64_t se[2] = {3, 2}, sb[1] = {4};
  float e[6] = {1, 2, 3, 4, 5, 6};
  double b[4] = {0.5, -0.25, 8, 1e-3};
  tg_id emb, hb;
  int writing = !strcmp(argv[1], "write");
  if (writing) {
    if (tg_tape_parameter(t, TG_F32, 2, se, e, sizeof e, 0, &emb) ||
        tg_tape_parameter(t, TG_F64, 1, sb, b, sizeof b, TG_NO_WEIGHT_DECAY, &hb))
      return fail(t, "parameter");
  } else { /* other order, zeros */
    if (tg_tape_parameter(t, TG_F64, 1, sb, NULL, 0, TG_NO_WEIGHT_DECAY, &hb) ||
        tg_tape_parameter(t, TG_F32, 2, se, NULL, 0, 0, &emb))
      return fail(t, "parameter");
  }
  if (tg_tape_set_name(t, emb, "emb") || tg_tape_set_name(t, hb, "head.b")) return fail(t, "set_name");
  if (writing) {
    tg_id loss = tg_add(t, tg_cast(t, tg_sum(t, emb), TG_F64), tg_sum(t, hb));
    tg_adamw_options o;
    tg_adamw_options_init(&o);
    if (tg_tape_backward(t, loss) || tg_adamw_step(t, &o)) return fail(t, "train");
    if (tg_tape_save(t, argv[2])) return fail(t, "save");
  } else if (tg_tape_load(t, argv[2])) {
    return fail(t, "load");
  }
  float ge[6];
  double gb[4];
  if (tg_tape_read(t, emb, ge, sizeof ge) || tg_tape_read(t, hb, gb, sizeof gb)) return fail(t, "read");
  printf("emb");
  for (int i = 0; i < 6; i++)
    printf(" %.9g", ge[i]);
  printf("\nhead.b");
  for (int i = 0; i < 4; i++)
    printf(" %.17g", gb[i]);
  printf("\n");
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
  return 0;
}
