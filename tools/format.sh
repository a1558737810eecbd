#!/usr/bin/env bash
# Formats every C / CUDA source with the checked-in .clang-format (clang-format 14).
#   bash tools/format.sh          rewrite in place
#   bash tools/format.sh --check  list files that differ, exit 1 if any
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files '*.c' '*.h' '*.cu' '*.cuh')
if [ "${1:-}" = "--check" ]; then
  bad=0
  for f in $files; do
    clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || { echo "needs formatting: $f"; bad=1; }
  done
  exit $bad
fi
clang-format -i $files
