/* Host reference kernels for inverted dropout. The mask is a pure function of (seed, call, i):
 *   keep element i  iff  w[i % 4] < tg_keep_threshold(keep)   (iff w[i % 4] * 2^-32 < keep)
 *   w = Philox4x32-10(key = seed, counter = (lo = i / 4, hi = call))   (host/philox.h)
 * i.e. cuRAND's Philox stream with seed = seed, subsequence = call, one 32-bit word per element,
 * so the CUDA provider (cuda/dropout.cu) draws the identical mask with one Philox block per four
 * elements, and backward regenerates it. */
#ifndef TIGA_HOST_DROPOUT_H
#define TIGA_HOST_DROPOUT_H
#include "tiga.h"

/* 1 if element i is kept. */
int host_dropout_keeps(uint64_t seed, uint64_t call, int64_t i, double keep);
/* y_i = kept(i) ? x_i * s : 0 with s = 1 / keep rounded to dt (the same product the device forms). */
void host_dropout_forward(tg_dtype dt, uint64_t seed, uint64_t call, double keep, const void *x, void *y, int64_t n);
/* gx_i += kept(i) ? gy_i * s : 0. */
void host_dropout_backward(tg_dtype dt, uint64_t seed, uint64_t call, double keep, const void *gy, void *gx, int64_t n);
#endif
