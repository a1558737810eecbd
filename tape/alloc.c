/* Host allocation wrappers with the fault-injection countdown behind tg_inject_host_alloc_failure.
 * The countdown is thread-local: the library allocates on its caller's thread, so a test that walks
 * the allocations of one thread is not disturbed by other threads. */
#include "alloc.h"

#include "internal.h"

#include <stdlib.h>

static _Thread_local int64_t fail_after = -1;

/* True when this allocation must fail (the countdown reached it; it fires once). */
static bool injected(void) {
  if (fail_after < 0) return false;
  if (fail_after == 0) {
    fail_after = -1;
    return true;
  }
  fail_after--;
  return false;
}

void *tgi_malloc(size_t bytes) { return injected() ? NULL : malloc(bytes); }
void *tgi_calloc(size_t n, size_t size) { return injected() ? NULL : calloc(n, size); }
void *tgi_realloc(void *p, size_t bytes) { return injected() ? NULL : realloc(p, bytes); }

void *tgi_aligned_alloc(size_t align, size_t bytes) {
  size_t n = (bytes + align - 1) / align * align;
  if (n < bytes) return NULL;
  return injected() ? NULL : aligned_alloc(align, n ? n : align);
}

tg_status tg_inject_host_alloc_failure(int64_t after, int64_t *pending) {
  if (pending) *pending = fail_after;
  fail_after = after < 0 ? -1 : after;
  return TG_OK;
}
