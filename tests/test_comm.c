/* tg_comm (data-parallel training through NCCL) and the tape's gradient-ready hook.
 * Everywhere: argument checks, id files, the hook on the host provider, the build without NCCL.
 * One GPU (skipped with the reason otherwise): a 1-rank comm is the identity on gradients and
 * parameters; a rank that never joins becomes a status. Two GPUs: the 2-rank all-reduce is the mean
 * and the broadcast copies rank 0's parameters. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "support.h"

#define EXPECT_LAST(expr, st, needle)                                                                                  \
  do {                                                                                                                 \
    tg_status s_ = (expr);                                                                                             \
    cr_expect_eq(s_, (st), "%s returned %s, expected %s (msg: %s)", #expr, tg_status_string(s_), tg_status_string(st), \
                 tg_last_error());                                                                                     \
    cr_expect(strstr(tg_last_error(), (needle)) != NULL, "message '%s' lacks '%s'", tg_last_error(), (needle));        \
  } while (0)

typedef struct comm_id {
  unsigned char bytes[TG_COMM_ID_BYTES];
} comm_id;

/* NCCL in this build: tg_comm_id_create succeeds (or fails for another reason than the build or a
 * missing libnccl). */
static int have_nccl(comm_id *id) {
  comm_id tmp;
  tg_status s = tg_comm_id_create(id ? id->bytes : tmp.bytes, sizeof tmp.bytes);
  if (s == TG_ERR_UNSUPPORTED) return 0;
  cr_assert_eq(s, TG_OK, "tg_comm_id_create: %s", tg_last_error());
  return 1;
}

Test(comm, options_defaults) {
  tg_comm_options o;
  memset(&o, 0xff, sizeof o);
  tg_comm_options_init(&o);
  cr_expect_eq(o.struct_size, sizeof o);
  cr_expect_eq(o.timeout_s, 600.0);
  cr_expect_eq(o.bucket_bytes, (size_t)25 << 20);
  cr_expect_eq(o.host_wait, 1);
}

Test(comm, id_file_round_trip_and_errors) {
  char path[] = "/tmp/tiga_comm_id_XXXXXX";
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  close(fd);
  remove(path);
  comm_id a, b;
  for (int i = 0; i < TG_COMM_ID_BYTES; i++)
    a.bytes[i] = (unsigned char)(i * 37 + 11);
  cr_assert_eq(tg_comm_id_write(a.bytes, sizeof a.bytes, path), TG_OK, "%s", tg_last_error());
  cr_assert_eq(tg_comm_id_read(path, 0, b.bytes, sizeof b.bytes), TG_OK, "%s", tg_last_error());
  cr_expect(!memcmp(a.bytes, b.bytes, sizeof a.bytes));
  /* a file of something else */
  FILE *f = fopen(path, "wb");
  cr_assert(f);
  fputs("hello\n", f);
  fclose(f);
  EXPECT_LAST(tg_comm_id_read(path, 0, b.bytes, sizeof b.bytes), TG_ERR_IO, "not a comm id file");
  remove(path);
  EXPECT_LAST(tg_comm_id_read(path, 0.05, b.bytes, sizeof b.bytes), TG_ERR_IO, "did not appear");
  EXPECT_LAST(tg_comm_id_read(path, -1, b.bytes, sizeof b.bytes), TG_ERR_INVALID_ARGUMENT, "'timeout_s'");
  EXPECT_LAST(tg_comm_id_read(NULL, 0, b.bytes, sizeof b.bytes), TG_ERR_INVALID_ARGUMENT, "'path'");
  EXPECT_LAST(tg_comm_id_read(path, 0, NULL, sizeof b.bytes), TG_ERR_INVALID_ARGUMENT, "'id'");
  EXPECT_LAST(tg_comm_id_read(path, 0, b.bytes, 64), TG_ERR_INVALID_ARGUMENT, "'id_bytes'");
  EXPECT_LAST(tg_comm_id_write(a.bytes, 127, path), TG_ERR_INVALID_ARGUMENT, "'id_bytes'");
  EXPECT_LAST(tg_comm_id_write(a.bytes, sizeof a.bytes, ""), TG_ERR_INVALID_ARGUMENT, "'path'");
  EXPECT_LAST(tg_comm_id_write(a.bytes, sizeof a.bytes, "/nonexistent-dir/x/id"), TG_ERR_IO, "could not write");
  EXPECT_LAST(tg_comm_id_create(NULL, sizeof a.bytes), TG_ERR_INVALID_ARGUMENT, "'id'");
  EXPECT_LAST(tg_comm_id_create(a.bytes, 1), TG_ERR_INVALID_ARGUMENT, "'id_bytes'");
}

Test(comm, create_argument_checks) {
  tg_runtime *rt = ts_host_runtime();
  comm_id id;
  memset(&id, 0, sizeof id);
  tg_comm *c = (tg_comm *)&id; /* must be overwritten with NULL */
  EXPECT_LAST(tg_comm_create(rt, 1, 0, id.bytes, sizeof id.bytes, NULL, NULL), TG_ERR_INVALID_ARGUMENT, "'out'");
  EXPECT_LAST(tg_comm_create(NULL, 1, 0, id.bytes, sizeof id.bytes, NULL, &c), TG_ERR_INVALID_ARGUMENT, "'rt'");
  cr_expect_null(c);
  EXPECT_LAST(tg_comm_create(rt, 0, 0, id.bytes, sizeof id.bytes, NULL, &c), TG_ERR_INVALID_ARGUMENT, "'nranks'");
  EXPECT_LAST(tg_comm_create(rt, 2, 2, id.bytes, sizeof id.bytes, NULL, &c), TG_ERR_INVALID_ARGUMENT, "'rank'");
  EXPECT_LAST(tg_comm_create(rt, 2, -1, id.bytes, sizeof id.bytes, NULL, &c), TG_ERR_INVALID_ARGUMENT, "'rank'");
  EXPECT_LAST(tg_comm_create(rt, 1, 0, NULL, sizeof id.bytes, NULL, &c), TG_ERR_INVALID_ARGUMENT, "'id'");
  EXPECT_LAST(tg_comm_create(rt, 1, 0, id.bytes, 16, NULL, &c), TG_ERR_INVALID_ARGUMENT, "'id_bytes'");
  tg_comm_options o;
  tg_comm_options_init(&o);
  o.struct_size = 0;
  EXPECT_LAST(tg_comm_create(rt, 1, 0, id.bytes, sizeof id.bytes, &o, &c), TG_ERR_INVALID_ARGUMENT, "'opts'");
  tg_comm_options_init(&o);
  o.timeout_s = 0;
  EXPECT_LAST(tg_comm_create(rt, 1, 0, id.bytes, sizeof id.bytes, &o, &c), TG_ERR_INVALID_ARGUMENT, "timeout_s");
  tg_comm_options_init(&o);
  o.bucket_bytes = 0;
  EXPECT_LAST(tg_comm_create(rt, 1, 0, id.bytes, sizeof id.bytes, &o, &c), TG_ERR_INVALID_ARGUMENT, "bucket_bytes");
  tg_comm_options_init(&o);
  o.host_wait = 2;
  EXPECT_LAST(tg_comm_create(rt, 1, 0, id.bytes, sizeof id.bytes, &o, &c), TG_ERR_INVALID_ARGUMENT, "host_wait");
  /* valid arguments on a host runtime: no NCCL in the build, or no device in the runtime */
  tg_status s = tg_comm_create(rt, 1, 0, id.bytes, sizeof id.bytes, NULL, &c);
  cr_expect(s == TG_ERR_UNSUPPORTED || s == TG_ERR_NO_DEVICE, "got %s: %s", tg_status_string(s), tg_last_error());
  cr_expect_null(c);
  if (s == TG_ERR_UNSUPPORTED) /* built without NCCL */
    cr_expect(strstr(tg_last_error(), "without NCCL") != NULL, "%s", tg_last_error());
  else /* NCCL build: the host runtime is refused before libnccl is looked for */
    cr_expect(strstr(tg_last_error(), "'rt'") != NULL, "%s", tg_last_error());
  /* the other calls refuse a NULL comm by name */
  tg_tape *t = ts_tape(rt);
  EXPECT_LAST(tg_comm_attach(NULL, t), TG_ERR_INVALID_ARGUMENT, "'comm'");
  EXPECT_LAST(tg_comm_detach(NULL, t), TG_ERR_INVALID_ARGUMENT, "'comm'");
  EXPECT_LAST(tg_comm_broadcast_parameters(NULL, t), TG_ERR_INVALID_ARGUMENT, "'comm'");
  EXPECT_LAST(tg_comm_finish_gradients(NULL, t), TG_ERR_INVALID_ARGUMENT, "'comm'");
  EXPECT_LAST(tg_comm_rank(NULL, NULL, NULL), TG_ERR_INVALID_ARGUMENT, "'comm'");
  cr_expect_str_eq(tg_comm_error(NULL), "");
  tg_comm_destroy(NULL);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(comm, without_nccl_id_create_is_unsupported) {
  if (have_nccl(NULL))
    cr_skip_test("this build has NCCL and libnccl loads (the unsupported path is for builds without it)");
  comm_id id;
  EXPECT_LAST(tg_comm_id_create(id.bytes, sizeof id.bytes), TG_ERR_UNSUPPORTED, "NCCL");
  printf("tg_comm_id_create without NCCL: %s\n", tg_last_error());
}

/* ------------------------------------------------------------ a small model */

typedef struct model {
  tg_id w1, b1, w2, b2;
} model;

static model make_model(tg_tape *t, uint64_t seed) {
  model m;
  int64_t s1[2] = {8, 16}, s2[1] = {16}, s3[2] = {16, 4}, s4[1] = {4};
  float w1[128], b1[16], w2[64], b2[4];
  ts_uniform_f32(w1, 128, seed, -0.5, 0.5);
  ts_uniform_f32(b1, 16, seed + 1, -0.5, 0.5);
  ts_uniform_f32(w2, 64, seed + 2, -0.5, 0.5);
  ts_uniform_f32(b2, 4, seed + 3, -0.5, 0.5);
  m.w1 = ts_param(t, TG_F32, 2, s1, w1);
  m.b1 = ts_param(t, TG_F32, 1, s2, b1);
  m.w2 = ts_param(t, TG_F32, 2, s3, w2);
  m.b2 = ts_param(t, TG_F32, 1, s4, b2);
  return m;
}

/* loss = mean(y * y), y = relu(x w1 + b1 + x w1) w2 + b2 (w1 used twice: two contributors). */
static tg_id forward(tg_tape *t, const model *m, uint64_t seed) {
  int64_t xs[2] = {5, 8};
  float x[40];
  ts_uniform_f32(x, 40, seed, -1, 1);
  tg_id xi = ts_input(t, TG_F32, 2, xs, x, 0);
  tg_id h = tg_relu(t, tg_add(t, tg_linear(t, xi, m->w1, m->b1), tg_linear(t, xi, m->w1, TG_ABSENT)));
  tg_id y = tg_linear(t, h, m->w2, m->b2);
  tg_id loss = tg_mean(t, tg_mul(t, y, y));
  cr_assert_neq(loss, TG_NO_ID, "forward: %s", tg_tape_error(t));
  return loss;
}

typedef struct hook_log {
  int begins;
  int calls[4];
  int other;
  const model *m;
} hook_log;

static void log_hook(tg_tape *t, tg_id p, void *user) {
  (void)t;
  hook_log *l = user;
  if (p == TG_NO_ID) {
    l->begins++;
    return;
  }
  const tg_id ids[4] = {l->m->w1, l->m->b1, l->m->w2, l->m->b2};
  for (int i = 0; i < 4; i++)
    if (ids[i] == p) {
      l->calls[i]++;
      return;
    }
  l->other++;
}

static void hook_once_per_parameter(tg_runtime *rt) {
  tg_tape *t = ts_tape(rt);
  model m = make_model(t, 7);
  hook_log l = {0, {0}, 0, &m};
  cr_assert_eq(tg_tape_set_grad_ready_hook(t, log_hook, &l), TG_OK);
  for (int step = 1; step <= 2; step++) {
    tg_id loss = forward(t, &m, 100 + (uint64_t)step);
    cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
    cr_expect_eq(l.begins, step);
    for (int i = 0; i < 4; i++)
      cr_expect_eq(l.calls[i], step, "parameter %d: hook called %d times after %d backward passes", i, l.calls[i],
                   step);
    cr_expect_eq(l.other, 0);
    tg_tape_reset(t);
  }
  /* removed: no more calls */
  cr_assert_eq(tg_tape_set_grad_ready_hook(t, NULL, &l), TG_OK);
  tg_id loss = forward(t, &m, 200);
  cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
  cr_expect_eq(l.begins, 2);
  EXPECT_LAST(tg_tape_set_grad_ready_hook(NULL, log_hook, &l), TG_ERR_INVALID_ARGUMENT, "'tape'");
  tg_tape_destroy(t);
}

Test(grad_ready_hook, once_per_parameter_host) {
  tg_runtime *rt = ts_host_runtime();
  hook_once_per_parameter(rt);
  tg_runtime_destroy(rt);
}

Test(grad_ready_hook, once_per_parameter_cuda) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  hook_once_per_parameter(rt);
  tg_runtime_destroy(rt);
}

/* ------------------------------------------------------------ one GPU */

static tg_runtime *cuda_with_nccl_or_skip(comm_id *id) {
  if (!have_nccl(id)) cr_skip_test("no NCCL: %s", tg_last_error());
  return ts_cuda_runtime_or_skip();
}

static void read_all_grads(tg_tape *t, const model *m, double *g) {
  ts_read_grad(t, m->w1, g, 128);
  ts_read_grad(t, m->b1, g + 128, 16);
  ts_read_grad(t, m->w2, g + 144, 64);
  ts_read_grad(t, m->b2, g + 208, 4);
}

static void read_all_values(tg_tape *t, const model *m, double *g) {
  ts_read(t, m->w1, g, 128);
  ts_read(t, m->b1, g + 128, 16);
  ts_read(t, m->w2, g + 144, 64);
  ts_read(t, m->b2, g + 208, 4);
}

/* bucket_bytes: 25 MiB (one bucket) and 64 (a bucket per parameter), host_wait 1 and 0 */
static void one_rank_identity(size_t bucket_bytes, int host_wait) {
  comm_id id;
  tg_runtime *rt = cuda_with_nccl_or_skip(&id);
  tg_comm_options o;
  tg_comm_options_init(&o);
  o.timeout_s = 60;
  o.bucket_bytes = bucket_bytes;
  o.host_wait = host_wait;
  tg_comm *c = NULL;
  cr_assert_eq(tg_comm_create(rt, 1, 0, id.bytes, sizeof id.bytes, &o, &c), TG_OK, "%s", tg_last_error());
  int rank = -1, n = -1;
  cr_expect_eq(tg_comm_rank(c, &rank, &n), TG_OK);
  cr_expect(rank == 0 && n == 1);
  tg_tape *t = ts_tape(rt);
  model m = make_model(t, 3);
  double before[212], after[212], g0[212], g1[212];
  read_all_values(t, &m, before);
  cr_assert_eq(tg_comm_broadcast_parameters(c, t), TG_OK, "%s", tg_comm_error(c));
  read_all_values(t, &m, after);
  cr_expect(!memcmp(before, after, sizeof before), "a 1-rank broadcast changed a parameter");
  /* reference gradients without the comm */
  tg_id loss = forward(t, &m, 11);
  cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
  read_all_grads(t, &m, g0);
  tg_tape_reset(t);
  tg_tape_zero_grad(t);
  /* the same step with the comm attached (buckets launched during backward), twice */
  cr_assert_eq(tg_comm_attach(c, t), TG_OK, "%s", tg_comm_error(c));
  for (int step = 0; step < 2; step++) {
    loss = forward(t, &m, 11);
    cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
    cr_assert_eq(tg_comm_finish_gradients(c, t), TG_OK, "%s", tg_comm_error(c));
    read_all_grads(t, &m, g1);
    for (int i = 0; i < 212; i++)
      cr_expect_eq(g1[i], g0[i], "step %d: gradient element %d: %.9g after the 1-rank all-reduce, %.9g without", step,
                   i, g1[i], g0[i]);
    tg_tape_reset(t);
    tg_tape_zero_grad(t);
  }
  /* detached: finish reduces everything after the backward */
  cr_assert_eq(tg_comm_detach(c, t), TG_OK, "%s", tg_comm_error(c));
  loss = forward(t, &m, 11);
  cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
  cr_assert_eq(tg_comm_finish_gradients(c, t), TG_OK, "%s", tg_comm_error(c));
  read_all_grads(t, &m, g1);
  cr_expect(!memcmp(g0, g1, sizeof g0), "detached finish changed a gradient");
  /* a second backward before finish (attached) is a clear status */
  tg_tape_reset(t);
  tg_tape_zero_grad(t);
  cr_assert_eq(tg_comm_attach(c, t), TG_OK, "%s", tg_comm_error(c));
  loss = forward(t, &m, 11);
  cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
  cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
  tg_status s = tg_comm_finish_gradients(c, t);
  cr_expect_eq(s, TG_ERR_STATE, "got %s: %s", tg_status_string(s), tg_comm_error(c));
  cr_expect(strstr(tg_comm_error(c), "second backward") != NULL, "%s", tg_comm_error(c));
  tg_comm_destroy(c);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(comm_cuda, one_rank_is_identity_one_bucket) { one_rank_identity((size_t)25 << 20, 1); }
Test(comm_cuda, one_rank_is_identity_many_buckets) { one_rank_identity(64, 1); }
Test(comm_cuda, one_rank_is_identity_device_wait) { one_rank_identity(64, 0); }

/* Rank 1 never joins: rank 0's create ends with TG_ERR_DEVICE at the deadline, not a hang. */
Test(comm_cuda, missing_rank_times_out, .timeout = 120) {
  comm_id id;
  tg_runtime *rt = cuda_with_nccl_or_skip(&id);
  tg_comm_options o;
  tg_comm_options_init(&o);
  o.timeout_s = 3;
  tg_comm *c = NULL;
  tg_status s = tg_comm_create(rt, 2, 0, id.bytes, sizeof id.bytes, &o, &c);
  cr_expect_eq(s, TG_ERR_DEVICE, "got %s: %s", tg_status_string(s), tg_last_error());
  cr_expect(strstr(tg_last_error(), "aborted") != NULL, "%s", tg_last_error());
  cr_expect_null(c);
  tg_runtime_destroy(rt);
}

/* ------------------------------------------------------------ two GPUs, one thread per rank */

typedef struct rank_job {
  int rank;
  comm_id id;
  tg_status status;
  char msg[512];
  double grad[2][300]; /* after the all-reduce */
  double value[300];   /* parameter 0 after the broadcast */
} rank_job;

static void *rank_main(void *arg) {
  rank_job *j = arg;
  tg_runtime *rt = NULL;
  tg_tape *t = NULL;
  tg_comm *c = NULL;
  tg_status s = tg_runtime_create_cuda(j->rank, &rt);
  const char *where = "tg_runtime_create_cuda";
  tg_comm_options o;
  tg_comm_options_init(&o);
  o.timeout_s = 120;
  o.bucket_bytes = 512; /* several buckets */
  if (!s) where = "tg_comm_create", s = tg_comm_create(rt, 2, j->rank, j->id.bytes, sizeof j->id.bytes, &o, &c);
  if (!s) where = "tg_tape_create", s = tg_tape_create(rt, &t);
  /* p0 [300] differs per rank before the broadcast; p1 [300] gets gradient (rank + 1) * (i + 1) */
  float v[300], cst[300];
  for (int i = 0; i < 300; i++) {
    v[i] = (float)(j->rank * 1000 + i);
    cst[i] = (float)((j->rank + 1) * (i + 1));
  }
  int64_t shape[1] = {300};
  tg_id p0 = TG_NO_ID, p1 = TG_NO_ID, ci = TG_NO_ID;
  if (!s) where = "tg_tape_parameter", s = tg_tape_parameter(t, TG_F32, 1, shape, v, sizeof v, 0, &p0);
  if (!s) s = tg_tape_parameter(t, TG_F32, 1, shape, v, sizeof v, 0, &p1);
  if (!s) where = "tg_comm_broadcast_parameters", s = tg_comm_broadcast_parameters(c, t);
  if (!s) where = "tg_tape_read", s = tg_tape_read(t, p0, v, sizeof v);
  for (int i = 0; i < 300; i++)
    j->value[i] = v[i];
  if (!s) where = "tg_comm_attach", s = tg_comm_attach(c, t);
  if (!s) where = "tg_tape_input", s = tg_tape_input(t, TG_F32, 1, shape, cst, sizeof cst, 0, &ci);
  if (!s) { /* loss = sum(p0 * c) + sum(p1 * c): gradients c on both */
    where = "forward";
    tg_id loss = tg_add(t, tg_sum(t, tg_mul(t, p0, ci)), tg_sum(t, tg_mul(t, p1, ci)));
    s = loss == TG_NO_ID ? tg_tape_status(t) : tg_tape_backward(t, loss);
  }
  if (!s) where = "tg_comm_finish_gradients", s = tg_comm_finish_gradients(c, t);
  for (int k = 0; k < 2 && !s; k++) {
    where = "tg_tape_read_grad";
    s = tg_tape_read_grad(t, k ? p1 : p0, v, sizeof v);
    for (int i = 0; i < 300; i++)
      j->grad[k][i] = v[i];
  }
  j->status = s;
  if (s)
    snprintf(j->msg, sizeof j->msg, "rank %d: %s: %s / %s / %s", j->rank, where, tg_last_error(),
             c ? tg_comm_error(c) : "", t ? tg_tape_error(t) : "");
  tg_comm_destroy(c);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
  return NULL;
}

Test(comm_multi_gpu, two_ranks_average_and_broadcast, .timeout = 300) {
  comm_id id;
  tg_runtime *rt0 = cuda_with_nccl_or_skip(&id);
  tg_runtime *rt1 = NULL;
  if (tg_runtime_create_cuda(1, &rt1) != TG_OK) {
    tg_runtime_destroy(rt0);
    cr_skip_test("needs 2 GPUs: device 1: %s", tg_last_error());
  }
  tg_runtime_destroy(rt1);
  tg_runtime_destroy(rt0);
  static rank_job jobs[2];
  pthread_t th[2];
  for (int r = 0; r < 2; r++) {
    memset(&jobs[r], 0, sizeof jobs[r]);
    jobs[r].rank = r;
    jobs[r].id = id;
    cr_assert_eq(pthread_create(&th[r], NULL, rank_main, &jobs[r]), 0);
  }
  for (int r = 0; r < 2; r++)
    pthread_join(th[r], NULL);
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(jobs[r].status, TG_OK, "%s", jobs[r].msg);
    for (int i = 0; i < 300; i++) {
      const double mean = 1.5 * (i + 1); /* ((1 + 2) / 2) * (i + 1), exact in f32 */
      cr_expect_eq(jobs[r].grad[0][i], mean, "rank %d p0 grad[%d] = %g, expected %g", r, i, jobs[r].grad[0][i], mean);
      cr_expect_eq(jobs[r].grad[1][i], mean, "rank %d p1 grad[%d] = %g, expected %g", r, i, jobs[r].grad[1][i], mean);
      cr_expect_eq(jobs[r].value[i], (double)i, "rank %d p0[%d] = %g after the broadcast, expected rank 0's %d", r, i,
                   jobs[r].value[i], i);
    }
  }
}
