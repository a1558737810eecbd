/* Zero-copy: tg_tape_input_borrowed reads the caller's buffer in place (same pointer, never
 * written), tg_tape_export_dlpack hands out the tape's own buffers as DLPack tensors that keep the
 * tape alive, and tg_runtime_cuda_stream. The CUDA tests pass device memory from one tape to
 * another through DLPack (no cudart in the test) and skip without a GPU. */
#include <math.h>
#include <stdlib.h>

#include "support.h"
#include "tiga_dlpack.h"

static DLManagedTensor *export_ok(tg_tape *t, tg_id id, unsigned flags) {
  struct DLManagedTensor *mt = NULL;
  cr_assert_eq(tg_tape_export_dlpack(t, id, flags, &mt), TG_OK, "%s", tg_tape_error(t));
  cr_assert(mt != NULL && mt->deleter != NULL);
  return mt;
}

Test(zerocopy, borrowed_host_input) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sh[2] = {2, 3};
  double *x = malloc(6 * sizeof *x), w[6];
  ts_uniform(x, 6, 1, -1, 1);
  ts_uniform(w, 6, 2, -1, 1);
  tg_id xb = TG_NO_ID, wp = ts_param(t, TG_F64, 2, sh, w);
  cr_assert_eq(tg_tape_input_borrowed(t, TG_F64, 2, sh, x, 6 * sizeof *x, TG_MEMORY_HOST, 0, TG_REQUIRES_GRAD, &xb),
               TG_OK, "%s", tg_tape_error(t));
  DLManagedTensor *mt = export_ok(t, xb, 0);
  cr_expect_eq(mt->dl_tensor.data, (void *)x, "a borrowed input must be read in place");
  cr_expect_eq(mt->dl_tensor.device.device_type, kDLCPU);
  mt->deleter(mt);
  tg_id loss = tg_sum(t, tg_mul(t, tg_relu(t, xb), wp));
  cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
  double gx[6], gw[6], want = 0;
  ts_read_grad(t, xb, gx, 6);
  ts_read_grad(t, wp, gw, 6);
  for (int i = 0; i < 6; i++) {
    want += (x[i] > 0 ? x[i] : 0) * w[i];
    cr_expect_eq(gx[i], x[i] > 0 ? w[i] : 0.0);
    cr_expect_eq(gw[i], x[i] > 0 ? x[i] : 0.0);
  }
  double got;
  cr_expect_eq(tg_tape_scalar(t, loss, &got), TG_OK);
  cr_expect_eq(got, want);
  TS_EXPECT_STATUS(tg_tape_write(t, xb, w, sizeof w), TG_ERR_STATE, t, "borrowed");
  cr_expect_eq(tg_tape_reset(t), TG_OK);
  free(x); /* allowed after reset: the value is gone */
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

Test(zerocopy, borrowed_argument_errors) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sh[1] = {4};
  double buf[5] = {0};
  tg_id id = 7;
  TS_EXPECT_STATUS(tg_tape_input_borrowed(t, TG_F64, 1, sh, buf, 24, TG_MEMORY_HOST, 0, 0, &id),
                   TG_ERR_INVALID_ARGUMENT, t, "needs 4 x 8 = 32 bytes");
  cr_expect_eq(id, TG_NO_ID);
  TS_EXPECT_STATUS(tg_tape_input_borrowed(t, TG_F64, 1, sh, (char *)buf + 4, 32, TG_MEMORY_HOST, 0, 0, &id),
                   TG_ERR_INVALID_ARGUMENT, t, "not aligned to 8 bytes");
  TS_EXPECT_STATUS(tg_tape_input_borrowed(t, TG_F64, 1, sh, NULL, 32, TG_MEMORY_HOST, 0, 0, &id),
                   TG_ERR_INVALID_ARGUMENT, t, "'data' is NULL");
  TS_EXPECT_STATUS(tg_tape_input_borrowed(t, TG_F64, 1, sh, buf, 32, TG_MEMORY_HOST, 1, 0, &id),
                   TG_ERR_INVALID_ARGUMENT, t, "host memory has device 0");
  TS_EXPECT_STATUS(tg_tape_input_borrowed(t, TG_F64, 1, sh, buf, 32, TG_MEMORY_CUDA, 0, 0, &id), TG_ERR_NO_DEVICE, t,
                   "host-only");
  TS_EXPECT_STATUS(tg_tape_input_borrowed(t, TG_F64, 1, sh, buf, 32, (tg_memory)7, 0, 0, &id), TG_ERR_INVALID_ARGUMENT,
                   t, "argument 'memory' is 7");
  TS_EXPECT_STATUS(tg_tape_input_borrowed(t, TG_I32, 1, sh, buf, 16, TG_MEMORY_HOST, 0, TG_REQUIRES_GRAD, &id),
                   TG_ERR_DTYPE, t, "float dtype");
  TS_EXPECT_STATUS(tg_tape_input_borrowed(t, TG_F64, 1, sh, buf, 32, TG_MEMORY_HOST, 0, 0x8u, &id),
                   TG_ERR_INVALID_ARGUMENT, t, "'flags' is 0x8");
  int64_t bad = 0;
  TS_EXPECT_STATUS(tg_tape_input_borrowed(t, TG_F64, 1, &bad, buf, 0, TG_MEMORY_HOST, 0, 0, &id), TG_ERR_SHAPE, t,
                   "expected sizes > 0");
  cr_expect_eq(tg_tape_input_borrowed(NULL, TG_F64, 1, sh, buf, 32, TG_MEMORY_HOST, 0, 0, &id),
               TG_ERR_INVALID_ARGUMENT);
  void *stream = (void *)1;
  cr_expect_eq(tg_runtime_cuda_stream(rt, &stream), TG_OK);
  cr_expect_eq(stream, NULL);
  cr_expect_eq(tg_runtime_cuda_stream(NULL, &stream), TG_ERR_INVALID_ARGUMENT);
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
}

/* Value and gradient exports: layout, same memory, and the tape outliving tg_tape_destroy. */
Test(zerocopy, export_value_and_gradient) {
  tg_runtime *rt = ts_host_runtime();
  tg_tape *t = ts_tape(rt);
  int64_t sh[3] = {2, 3, 4};
  float w[24];
  ts_uniform_f32(w, 24, 3, -1, 1);
  tg_id p = TG_NO_ID;
  cr_assert_eq(tg_tape_parameter(t, TG_F32, 3, sh, w, sizeof w, 0, &p), TG_OK);
  tg_id y = tg_scale(t, p, 3.0);
  tg_id loss = tg_sum(t, tg_mul(t, y, y));
  cr_assert_eq(tg_tape_backward(t, loss), TG_OK, "%s", tg_tape_error(t));
  DLManagedTensor *mv = export_ok(t, p, 0), *mg = export_ok(t, p, TG_EXPORT_GRAD), *my = export_ok(t, y, 0);
  const DLTensor *v = &mv->dl_tensor, *g = &mg->dl_tensor;
  cr_expect(v->ndim == 3 && v->shape[0] == 2 && v->shape[1] == 3 && v->shape[2] == 4);
  cr_expect(v->strides[0] == 12 && v->strides[1] == 4 && v->strides[2] == 1 && v->byte_offset == 0);
  cr_expect(v->dtype.code == kDLFloat && v->dtype.bits == 32 && v->dtype.lanes == 1);
  cr_expect(v->device.device_type == kDLCPU && v->device.device_id == 0);
  float gr[24];
  cr_assert_eq(tg_tape_read_grad(t, p, gr, sizeof gr), TG_OK);
  cr_expect(memcmp(v->data, w, sizeof w) == 0, "exported value differs");
  cr_expect(memcmp(g->data, gr, sizeof gr) == 0, "exported gradient differs");
  for (int i = 0; i < 24; i++)
    cr_expect(fabsf(((const float *)g->data)[i] - 18.0f * w[i]) <= 1e-5f, "grad[%d]", i);
  /* a view: a write to the parameter shows through */
  float w2[24] = {0};
  w2[5] = 42;
  cr_assert_eq(tg_tape_write(t, p, w2, sizeof w2), TG_OK);
  cr_expect_eq(((const float *)v->data)[5], 42.0f);
  tg_memory mem = TG_MEMORY_CUDA;
  int dev = -1;
  cr_expect_eq(tg_tape_export_location(t, p, TG_EXPORT_GRAD, &mem, &dev), TG_OK);
  cr_expect(mem == TG_MEMORY_HOST && dev == 0);
  /* errors */
  struct DLManagedTensor *none = (struct DLManagedTensor *)1;
  double one = 1;
  tg_id c = ts_input(t, TG_F64, 0, NULL, &one, 0);
  TS_EXPECT_STATUS(tg_tape_export_dlpack(t, c, TG_EXPORT_GRAD, &none), TG_ERR_STATE, t, "does not require grad");
  cr_expect_eq(none, NULL);
  TS_EXPECT_STATUS(tg_tape_export_dlpack(t, p, TG_EXPORT_DEVICE, &none), TG_ERR_NO_DEVICE, t, "host-only");
  TS_EXPECT_STATUS(tg_tape_export_dlpack(t, p, TG_EXPORT_DEVICE | TG_EXPORT_HOST, &none), TG_ERR_INVALID_ARGUMENT, t,
                   "exclude each other");
  TS_EXPECT_STATUS(tg_tape_export_dlpack(t, p, 0x10u, &none), TG_ERR_INVALID_ARGUMENT, t, "'flags' is 0x10");
  TS_EXPECT_STATUS(tg_tape_export_dlpack(t, TG_NO_ID, 0, &none), TG_ERR_INVALID_ID, t, "TG_NO_ID");
  TS_EXPECT_STATUS(tg_tape_export_dlpack(t, p, 0, NULL), TG_ERR_INVALID_ARGUMENT, t, "'out' is NULL");
  /* a sticky op error stays through an export */
  cr_expect_eq(tg_relu(t, TG_NO_ID), TG_NO_ID);
  DLManagedTensor *m2 = export_ok(t, p, 0);
  TS_EXPECT_STICKY(t, TG_ERR_INVALID_ID, "tg_relu");
  m2->deleter(m2);
  /* the tensors keep the tape alive after the caller's destroy (ASan checks the reads) */
  tg_tape_destroy(t);
  tg_runtime_destroy(rt);
  cr_expect_eq(((const float *)v->data)[5], 42.0f);
  cr_expect_eq(((const float *)g->data)[0], gr[0]);
  cr_expect_eq(((const float *)my->dl_tensor.data)[1], 3.0f * w[1]);
  mv->deleter(mv);
  mg->deleter(mg);
  my->deleter(my);
}

/* ---------------------------------------------------------------- CUDA */

/* Device memory from tape A (exported) borrowed by tape B: same pointer, same results as the
 * host; the exported gradient is the device gradient, bit-equal to tg_tape_read_grad. */
Test(zerocopy_cuda, device_borrow_and_export) {
  tg_runtime *rt = ts_cuda_runtime_or_skip();
  void *stream = NULL;
  cr_expect_eq(tg_runtime_cuda_stream(rt, &stream), TG_OK);
  cr_expect(stream != NULL);
  tg_tape *a = ts_tape(rt), *b = ts_tape(rt);
  int64_t sh[2] = {33, 7};
  float x[231], w[231];
  ts_uniform_f32(x, 231, 5, -1, 1);
  ts_uniform_f32(w, 231, 6, -1, 1);
  tg_id xa = ts_input(a, TG_F32, 2, sh, x, 0);
  DLManagedTensor *mx = export_ok(a, xa, TG_EXPORT_DEVICE);
  cr_expect_eq(mx->dl_tensor.device.device_type, kDLCUDA);
  tg_id xb = TG_NO_ID, wb = TG_NO_ID;
  cr_assert_eq(
      tg_tape_input_borrowed(b, TG_F32, 2, sh, mx->dl_tensor.data, sizeof x, TG_MEMORY_CUDA, 0, TG_REQUIRES_GRAD, &xb),
      TG_OK, "%s", tg_tape_error(b));
  DLManagedTensor *back = export_ok(b, xb, 0);
  cr_expect_eq(back->dl_tensor.data, mx->dl_tensor.data, "the borrowed device buffer must be used in place");
  cr_expect_eq(back->dl_tensor.device.device_type, kDLCUDA);
  back->deleter(back);
  cr_assert_eq(tg_tape_parameter(b, TG_F32, 2, sh, w, sizeof w, 0, &wb), TG_OK);
  tg_tape_set_provider(b, TG_PROVIDER_CUDA, NULL);
  tg_id loss = tg_sum(b, tg_mul(b, tg_mul(b, xb, xb), wb));
  cr_assert_eq(tg_tape_backward(b, loss), TG_OK, "%s", tg_tape_error(b));
  DLManagedTensor *g = export_ok(b, xb, TG_EXPORT_GRAD);
  cr_expect_eq(g->dl_tensor.device.device_type, kDLCUDA, "the gradient was computed on the device");
  tg_memory mem;
  int dev = -1;
  cr_expect_eq(tg_tape_export_location(b, xb, TG_EXPORT_GRAD, &mem, &dev), TG_OK);
  cr_expect(mem == TG_MEMORY_CUDA && dev == 0);
  /* the device bytes, read through a host export of another tape's borrow of them */
  tg_tape *c = ts_tape(rt);
  tg_id gc = TG_NO_ID;
  cr_assert_eq(tg_tape_input_borrowed(c, TG_F32, 2, sh, g->dl_tensor.data, sizeof x, TG_MEMORY_CUDA, 0, 0, &gc), TG_OK,
               "%s", tg_tape_error(c));
  float via_dlpack[231], via_read[231];
  cr_assert_eq(tg_tape_read(c, gc, via_dlpack, sizeof via_dlpack), TG_OK, "%s", tg_tape_error(c));
  cr_assert_eq(tg_tape_read_grad(b, xb, via_read, sizeof via_read), TG_OK);
  cr_expect(memcmp(via_dlpack, via_read, sizeof x) == 0);
  for (int i = 0; i < 231; i++)
    cr_expect(fabsf(via_read[i] - 2.0f * x[i] * w[i]) <= 1e-6f, "grad[%d] = %g, expected %g", i, via_read[i],
              2.0f * x[i] * w[i]);
  /* a host pointer is not device memory */
  TS_EXPECT_STATUS(tg_tape_input_borrowed(c, TG_F32, 2, sh, x, sizeof x, TG_MEMORY_CUDA, 0, 0, &gc),
                   TG_ERR_INVALID_ARGUMENT, c, "not memory of CUDA device 0");
  TS_EXPECT_STATUS(tg_tape_input_borrowed(c, TG_F32, 2, sh, g->dl_tensor.data, sizeof x, TG_MEMORY_CUDA, 1, 0, &gc),
                   TG_ERR_INVALID_ARGUMENT, c, "runs on CUDA device 0");
  tg_tape_destroy(c);
  g->deleter(g);
  tg_tape_destroy(b);
  mx->deleter(mx);
  tg_tape_destroy(a);
  tg_runtime_destroy(rt);
}
