/*
 * tape/alloc.h — every host allocation of the library (tape/, ops/, train/, host/) goes through
 * these wrappers, so a test can make the k-th one fail (SQLite-style fault injection, see
 * tg_inject_host_alloc_failure in tiga.h). Memory they return is released with free().
 * Standalone (no tape types), so host/ kernels may include it.
 */
#ifndef TIGA_TAPE_ALLOC_H
#define TIGA_TAPE_ALLOC_H

#include <stddef.h>

void *tgi_malloc(size_t bytes);
void *tgi_calloc(size_t n, size_t size);
void *tgi_realloc(void *p, size_t bytes);
/* aligned_alloc(align, bytes rounded up to a multiple of align). */
void *tgi_aligned_alloc(size_t align, size_t bytes);

#endif
