#!/usr/bin/env bash
# Fails when libtiga.so exports a defined dynamic symbol that is not tg_*: the public API is
# include/tiga.h's tg_ names, everything else is built -fvisibility=hidden. Undefined symbols (U,
# w: what the library imports) and the linker's own (_init, _fini, _edata, _end, __bss_start, ...)
# are ignored. Exits 0 with SKIP when nm is missing.
#   tools/check_exports.sh LIBTIGA_SO [NM]
set -euo pipefail
lib=${1:?usage: check_exports.sh LIBTIGA_SO [NM]}
nm_bin=${2:-nm}
if ! command -v "$nm_bin" >/dev/null 2>&1; then
  echo "SKIP: $nm_bin not found: exports of $lib not checked"
  exit 0
fi
syms=$("$nm_bin" -D --defined-only "$lib") || { echo "FAIL: $nm_bin -D $lib failed"; exit 1; }
bad=$(printf '%s\n' "$syms" | awk 'NF >= 3 {print $2, $3}' |
  grep -vE ' (tg_[A-Za-z0-9_]*|_init|_fini|_edata|_end|__bss_start|__bss_end__|_bss_end__|__end__|__data_start|_GLOBAL_OFFSET_TABLE_|_DYNAMIC)(@.*)?$' |
  sort -u || true)
n=$(printf '%s\n' "$syms" | awk '$3 ~ /^tg_/' | wc -l)
if [ -n "$bad" ]; then
  printf '%s\n' "$bad" | sed 's/^/  exported: /'
  echo "FAIL: $lib exports $(printf '%s\n' "$bad" | wc -l) defined dynamic symbol(s) that are not tg_*"
  exit 1
fi
echo "ok: $lib exports $n tg_ symbols and nothing else"
