#!/usr/bin/env bash
# Fails when include/tiga.h (with include/tiga_dlpack.h) does not compile cleanly as C11 and C++17 with gcc and clang at
# -Wall -Wextra -Werror -Wpedantic: a tiny translation unit includes it and uses a few of its
# declarations, compiled once per compiler and language. Compilers that are not installed are
# reported as skipped; the check fails only on a compile error.
#   tools/check_header.sh [INCLUDE_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
inc=${1:-include}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/tu.c" <<'TU'
#include "tiga.h"
#include "tiga_dlpack.h"

/* Uses types, enumerators and functions so that the declarations are checked, not just parsed. */
int tiga_header_check(void);
int tiga_header_check(void) {
  tg_runtime *rt = NULL;
  tg_status s = tg_runtime_create_host(&rt);
  const char *msg = tg_status_string(s);
  tg_id id = 0;
  tg_tape *tape = NULL;
  size_t bytes = tg_dtype_size(TG_F32);
  DLManagedTensor *mt = NULL;
  tg_status e = tg_tape_export_dlpack(tape, id, TG_EXPORT_GRAD, &mt);
  tg_runtime_destroy(rt);
  return msg != NULL && tape == NULL && id == 0 && bytes == 4 && s == TG_OK && tg_last_error() != NULL &&
         e != TG_OK && mt == NULL && sizeof(DLTensor) == 48 && sizeof(DLManagedTensor) == 64;
}
TU
cp "$tmp/tu.c" "$tmp/tu.cpp"
flags="-Wall -Wextra -Werror -Wpedantic -I $inc"
fail=0 ran=0
for spec in "gcc c11" "clang c11" "g++ c++17" "clang++ c++17"; do
  set -- $spec
  cxx=$1 std=$2
  src="$tmp/tu.c"
  [ "$std" = c++17 ] && src="$tmp/tu.cpp"
  if ! command -v "$cxx" >/dev/null 2>&1; then
    echo "SKIP: $cxx not found (tiga.h as $std not checked with it)"
    continue
  fi
  ran=$((ran + 1))
  if "$cxx" -std="$std" $flags -c "$src" -o "$tmp/tu.o" > "$tmp/log" 2>&1; then
    echo "ok:   $cxx -std=$std"
  else
    cat "$tmp/log"
    echo "FAIL: tiga.h with $cxx -std=$std $flags"
    fail=1
  fi
done
[ $ran -gt 0 ] || echo "SKIP: no compiler found"
exit $fail
