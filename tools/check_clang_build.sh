#!/usr/bin/env bash
# Fails when the host-only library does not build with clang at the project's warning flags
# (-Wall -Wextra -Werror) or when clang prints any warning at all: configures a throwaway build
# directory with CC=CLANG and builds the tiga target only (about a minute on 2 cores).
#   tools/check_clang_build.sh [CLANG] [CMAKE]
set -euo pipefail
cd "$(dirname "$0")/.."
clang=${1:-clang}
cmake_bin=${2:-cmake}
if ! command -v "$clang" >/dev/null 2>&1; then
  echo "SKIP: $clang not found"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$cmake_bin" -S . -B "$tmp" -DCMAKE_C_COMPILER="$clang" -DTIGA_CUDA=OFF -DCMAKE_BUILD_TYPE=Release \
  -DTIGA_BUILD_TESTS=OFF -DTIGA_BUILD_EXAMPLES=OFF -DTIGA_BUILD_BENCH=OFF > "$tmp/configure.log" 2>&1; then
  cat "$tmp/configure.log"
  echo "FAIL: configuring with $clang"
  exit 1
fi
if ! "$cmake_bin" --build "$tmp" --target tiga -j"$(nproc)" > "$tmp/build.log" 2>&1; then
  grep -E "error|warning" "$tmp/build.log" | head -n 60 || tail -n 40 "$tmp/build.log"
  echo "FAIL: the host-only library does not build with $clang"
  exit 1
fi
if grep -q "warning:" "$tmp/build.log"; then
  grep -A3 "warning:" "$tmp/build.log" | head -n 60
  echo "FAIL: $clang warns on the host-only library"
  exit 1
fi
echo "ok: the host-only library builds with $($clang --version | head -n 1) without a warning"
