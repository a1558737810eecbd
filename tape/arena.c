/* Bump allocator over chunks; rewind keeps (and coalesces) the memory for the next step. */
#include "internal.h"

#include <stdlib.h>

struct tgi_chunk {
  tgi_chunk *next;
  void *base;
  size_t size;
  size_t used;
};

void tgi_arena_init(tgi_arena *a, size_t align, void *ctx, void *(*alloc)(void *, size_t),
                    void (*release)(void *, void *)) {
  a->head = NULL;
  a->chunks = NULL;
  a->align = align;
  a->in_use = 0;
  a->capacity = 0;
  a->ctx = ctx;
  a->alloc = alloc;
  a->release = release;
}

static tgi_chunk *chunk_new(tgi_arena *a, size_t size) {
  tgi_chunk *c = tgi_malloc(sizeof *c);
  if (!c) return NULL;
  c->base = a->alloc(a->ctx, size);
  if (!c->base) {
    free(c);
    return NULL;
  }
  c->size = size;
  c->used = 0;
  c->next = a->chunks;
  a->chunks = c;
  a->capacity += size;
  return c;
}

void *tgi_arena_alloc(tgi_arena *a, size_t bytes) {
  if (bytes == 0) bytes = 1;
  size_t need = (bytes + a->align - 1) / a->align * a->align;
  if (need < bytes) return NULL; /* overflow */
  tgi_chunk *h = a->head;
  if (h && h->size - h->used >= need) {
    void *p = (char *)h->base + h->used;
    h->used += need;
    a->in_use += need;
    return p;
  }
  /* A large block gets a chunk of exactly its size and the head stays where it was, so small
   * blocks keep filling their chunk around large ones; small blocks (under 256 KiB) share chunks of
   * 512 KiB. So a first step wastes at most one small chunk's tail (a step's peak device memory is
   * what benchmarks compare; 2 MiB chunks cost a graph layer's step up to 4 MiB of its ~30), and
   * rewind coalesces everything into one chunk that later steps fill. */
  const size_t big = (size_t)256 << 10, small_chunk = (size_t)512 << 10;
  tgi_chunk *c = chunk_new(a, need >= big ? need : small_chunk);
  if (!c && need < big) c = chunk_new(a, need);
  if (!c) return NULL;
  c->used = need;
  a->in_use += need;
  if (need < big || !a->head) a->head = c;
  return c->base;
}

void tgi_arena_rewind(tgi_arena *a) {
  if (a->chunks && a->chunks->next) {
    /* several chunks: replace them by one of the total size */
    size_t total = a->capacity;
    tgi_chunk *c = a->chunks;
    while (c) {
      tgi_chunk *n = c->next;
      a->release(a->ctx, c->base);
      free(c);
      c = n;
    }
    a->chunks = NULL;
    a->capacity = 0;
    if (!chunk_new(a, total)) { /* fine: the next step allocates again */
    }
  }
  for (tgi_chunk *c = a->chunks; c; c = c->next)
    c->used = 0;
  a->head = a->chunks;
  a->in_use = 0;
}

void tgi_arena_free(tgi_arena *a) {
  tgi_chunk *c = a->chunks;
  while (c) {
    tgi_chunk *n = c->next;
    a->release(a->ctx, c->base);
    free(c);
    c = n;
  }
  a->chunks = NULL;
  a->head = NULL;
  a->capacity = 0;
  a->in_use = 0;
}

void *tgi_arena_tail(const tgi_arena *a, size_t *bytes) {
  *bytes = a->head ? a->head->size - a->head->used : 0;
  return a->head ? (char *)a->head->base + a->head->used : NULL;
}
