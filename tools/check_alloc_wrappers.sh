#!/usr/bin/env bash
# Every host allocation of the library goes through tape/alloc.h's wrappers (tgi_malloc & co.), so
# fault injection (tg_inject_host_alloc_failure) reaches it: fails on a bare malloc / calloc /
# realloc / aligned_alloc call in tape/, ops/, train/ or host/ (tape/alloc.c itself excepted).
set -euo pipefail
cd "$(dirname "$0")/.."
bad=$(grep -nE '(^|[^_[:alnum:].>])(malloc|calloc|realloc|aligned_alloc)\(' tape/*.c ops/*.c train/*.c host/*.c \
  tape/*.h ops/*.h host/*.h | grep -v '^tape/alloc\.c:' | grep -vE ':[0-9]+:\s*(/?\*|//)' |
  cat || true)
if [ -n "$bad" ]; then
  echo "bare host allocations (use tgi_malloc / tgi_calloc / tgi_realloc / tgi_aligned_alloc from tape/alloc.h):"
  echo "$bad"
  exit 1
fi
echo "every host allocation goes through tape/alloc.h"
