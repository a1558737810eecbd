/* Shared by the libFuzzer harnesses of tests/fuzz/: a reader over the fuzzer's bytes (every read is
 * defined, past the end it yields zeros) and the entry point each harness defines. Built by
 * tools/fuzz.sh with clang -fsanitize=fuzzer,address,undefined, and by CMake with replay_main.c
 * into fuzz_replay_* tests that run the checked-in corpora in the ordinary (sanitizer) test suite. */
#ifndef TIGA_FUZZ_H
#define TIGA_FUZZ_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct fz {
  const uint8_t *p;
  size_t n, at;
} fz;

static inline int fz_more(const fz *f) { return f->at < f->n; }
static inline uint8_t fz_u8(fz *f) { return f->at < f->n ? f->p[f->at++] : 0; }
static inline uint32_t fz_u32(fz *f) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++)
    v |= (uint32_t)fz_u8(f) << (8 * i);
  return v;
}
static inline uint64_t fz_u64(fz *f) { return (uint64_t)fz_u32(f) | (uint64_t)fz_u32(f) << 32; }
/* In [lo, hi] (hi - lo < 256). */
static inline int fz_range(fz *f, int lo, int hi) { return lo + fz_u8(f) % (hi - lo + 1); }
/* Mostly small sizes, sometimes an extreme one (negative, 0, huge). */
static inline int64_t fz_size(fz *f, int small) {
  uint8_t k = fz_u8(f);
  switch (k % 16) {
  case 0: return 0;
  case 1: return -(int64_t)fz_u8(f);
  case 2: return (int64_t)fz_u64(f);
  case 3: return INT32_MAX - (int64_t)fz_u8(f) + 1;
  default: return 1 + (int64_t)(fz_u8(f) % small);
  }
}
/* A double: mostly moderate, sometimes 0, huge, tiny, inf or NaN. */
static inline double fz_real(fz *f) {
  uint8_t k = fz_u8(f);
  double m = ((double)(int8_t)fz_u8(f)) / 16.0;
  switch (k % 32) {
  case 0: return 0.0;
  case 1: return 1e300 * (k & 32 ? -1 : 1);
  case 2: return 1e-310;
  case 3: return m / 0.0; /* +-inf, or NaN for m == 0 */
  case 4: {
    uint64_t u = fz_u64(f);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
  }
  default: return m;
  }
}
/* The next min(want, left) bytes, in place: *p points into the fuzzer's buffer. */
static inline size_t fz_take(fz *f, size_t want, const uint8_t **p) {
  size_t n = f->n - f->at < want ? f->n - f->at : want;
  *p = f->p + f->at;
  f->at += n;
  return n;
}
#endif
