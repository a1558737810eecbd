/* The debug-build detector of two threads inside calls on one runtime at once (internal.h). */
#include "internal.h"

#include <stdio.h>

/* A thread's id: the address of a thread-local byte (unique among live threads, never 0). */
static _Thread_local char me_byte;
static uintptr_t me(void) { return (uintptr_t)&me_byte; }

bool tgi_thread_enter(tg_runtime *rt, const char *fn, bool *acquired) {
  *acquired = false;
  if (!TGI_THREAD_CHECK || !rt) return true;
  uintptr_t expected = 0, self = me();
  if (__atomic_compare_exchange_n(&rt->owner, &expected, self, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
    *acquired = true;
    return true;
  }
  if (expected == self) return true; /* a call made inside a call of this thread */
  tgi_set_last_error("%s: another thread is inside a call on this runtime (or on one of its tapes) right now; a "
                     "runtime, its tapes and relations must be used by one thread at a time (tiga.h: threads). "
                     "Nothing was done. (Detected by a debug build of tiga.)",
                     fn);
  fprintf(stderr, "tiga: %s\n", tg_last_error());
  return false;
}

void tgi_thread_leave(tg_runtime *rt) {
  if (!TGI_THREAD_CHECK || !rt) return;
  uintptr_t expected = me();
  __atomic_compare_exchange_n(&rt->owner, &expected, 0, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

void tgi_guard_exit(tgi_guard *g) {
  if (g->acquired) tgi_thread_leave(g->rt);
}
