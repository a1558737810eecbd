/* The library's allocation wrappers (tape/alloc.h) without fault injection, for benches that
 * compile library sources into themselves (check_radius, bench_radius). */
#include "tape/alloc.h"

#include <stdlib.h>

void *tgi_malloc(size_t bytes) { return malloc(bytes); }
void *tgi_calloc(size_t n, size_t size) { return calloc(n, size); }
void *tgi_realloc(void *p, size_t bytes) { return realloc(p, bytes); }
void *tgi_aligned_alloc(size_t align, size_t bytes) {
  size_t n = (bytes + align - 1) / align * align;
  return n < bytes ? NULL : aligned_alloc(align, n ? n : align);
}
